/* hostd-chaos.h: a harness around a tallyd-record child process, shared by
 * the chaos suite (tests/test-hostd-chaos.c) and the flood measurement
 * (tests/bench/hostd-flood.c).
 *
 * The daemon runs as its own process so that its descriptors
 * (/proc/PID/fd) and memory (VmRSS) can be read, kill -9 of a tenant is a
 * real process death, and a crash of the daemon is seen as one.  Waits are
 * bounded polls (chaos_wait), never fixed sleeps whose length decides the
 * result.  Raw peers (half-open, slowloris, malformed input) are plain
 * sockets; well-behaved tenants are wire_conn_open or the guest library in
 * tests/guest-tenant-helper.
 */
#ifndef TALLY_TESTS_HOSTD_CHAOS_H
#define TALLY_TESTS_HOSTD_CHAOS_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "wire/call.h"
#include "wire/wire-int.h"

typedef struct chaos_daemon {
  pid_t pid;
  int port;
  char dir[64];   /* temporary folder: socket, token, state, log */
  char sock[100]; /* tenants' UNIX socket */
  char log[128];
  char token[WIRE_TOKEN_MAX + 1];
} chaos_daemon_t;

static inline uint64_t chaos_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline void chaos_nap(void) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  nanosleep(&ts, NULL);
}

/* Polls cond(arg) every 20 ms for up to ms; true once it holds. */
static inline bool chaos_wait(bool (*cond)(void *), void *arg, int ms) {
  uint64_t end = chaos_now_ms() + (uint64_t)ms;
  do {
    if (cond(arg))
      return true;
    chaos_nap();
  } while (chaos_now_ms() < end);
  return cond(arg);
}

static inline int chaos_fds(pid_t pid) {
  char p[64];
  DIR *d;
  struct dirent *e;
  int n = 0;
  snprintf(p, sizeof(p), "/proc/%d/fd", (int)pid);
  if (!(d = opendir(p)))
    return -1;
  while ((e = readdir(d)) != NULL)
    n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static inline long chaos_rss_kb(pid_t pid) {
  char p[64], line[256];
  long kb = -1;
  FILE *f;
  snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
  if (!(f = fopen(p, "r")))
    return -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "VmRSS: %ld", &kb) == 1)
      break;
  fclose(f);
  return kb;
}

static inline bool chaos_alive(const chaos_daemon_t *d) {
  int st;
  return d->pid > 0 && waitpid(d->pid, &st, WNOHANG) == 0;
}

/* Lines of the daemon's log containing s. */
static inline int chaos_log_count(const chaos_daemon_t *d, const char *s) {
  char line[4096];
  int n = 0;
  FILE *f = fopen(d->log, "r");
  if (!f)
    return 0;
  while (fgets(line, sizeof(line), f))
    n += strstr(line, s) != NULL;
  fclose(f);
  return n;
}

typedef struct chaos_logwait {
  const chaos_daemon_t *d;
  const char *s;
  int n;
} chaos_logwait_t;

static inline bool chaos_log_has(void *arg) {
  chaos_logwait_t *w = arg;
  return chaos_log_count(w->d, w->s) >= w->n;
}

/* Starts bin (tallyd-record) with the harness's socket, token and state
 * and extra flags (NULL-terminated), its stderr in the log; waits for
 * "serving" and reads the TCP port.  0 or -1. */
static inline int chaos_start(chaos_daemon_t *d, const char *bin, const char *const *extra) {
  char tok[160], state[128], *argv[64];
  int n = 0, fd;
  chaos_logwait_t w = {d, "serving", 1};
  FILE *f;
  memset(d->token, 'k', WIRE_TOKEN_MAX); /* the protocol's longest token */
  d->token[WIRE_TOKEN_MAX] = 0;
  snprintf(d->dir, sizeof(d->dir), "/tmp/tally-chaos-XXXXXX");
  if (!mkdtemp(d->dir))
    return -1;
  snprintf(d->sock, sizeof(d->sock), "%s/s.sock", d->dir);
  snprintf(d->log, sizeof(d->log), "%s/d.log", d->dir);
  snprintf(tok, sizeof(tok), "%s/token", d->dir);
  snprintf(state, sizeof(state), "%s/state", d->dir);
  if ((fd = open(tok, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0 ||
      dprintf(fd, "%s\n", d->token) < 0 || close(fd) != 0)
    return -1;
  argv[n++] = (char *)bin;
  argv[n++] = "--listen-unix", argv[n++] = d->sock;
  argv[n++] = "--listen-tcp", argv[n++] = "127.0.0.1:0";
  argv[n++] = "--token-file", argv[n++] = tok;
  argv[n++] = "--state-dir", argv[n++] = state;
  for (; extra && *extra && n < 62; extra++)
    argv[n++] = (char *)*extra;
  argv[n] = NULL;
  if ((d->pid = fork()) == 0) {
    int lfd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (getenv("TALLYD_NOFILE")) { /* the daemon's descriptor limit, e.g. 256 */
      struct rlimit rl = {(rlim_t)atol(getenv("TALLYD_NOFILE")),
                          (rlim_t)atol(getenv("TALLYD_NOFILE"))};
      setrlimit(RLIMIT_NOFILE, &rl);
    }
    dup2(lfd, 2);
    execv(bin, argv);
    _exit(127);
  }
  if (d->pid < 0 || !chaos_wait(chaos_log_has, &w, 10000))
    return -1;
  d->port = 0;
  if ((f = fopen(d->log, "r")) != NULL) {
    char line[1024];
    while (fgets(line, sizeof(line), f))
      if (strstr(line, "serving") && strstr(line, "(port "))
        d->port = atoi(strstr(line, "(port ") + 6);
    fclose(f);
  }
  return d->port > 0 ? 0 : -1;
}

/* SIGTERM, wait (bounded), remove the folder unless KEEP is set.  Returns
 * the daemon's exit status, or -1 when it had to be killed. */
static inline int chaos_stop(chaos_daemon_t *d) {
  int st = 0, rc = -1;
  uint64_t end = chaos_now_ms() + 10000;
  char cmd[128];
  if (d->pid > 0) {
    kill(d->pid, SIGTERM);
    while (waitpid(d->pid, &st, WNOHANG) == 0 && chaos_now_ms() < end)
      chaos_nap();
    if (kill(d->pid, 0) == 0 && waitpid(d->pid, &st, WNOHANG) == 0) {
      kill(d->pid, SIGKILL);
      waitpid(d->pid, &st, 0);
    } else {
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    }
  }
  if (!getenv("KEEP")) {
    snprintf(cmd, sizeof(cmd), "rm -rf %s", d->dir);
    if (system(cmd) != 0)
      fprintf(stderr, "# cannot remove %s\n", d->dir);
  }
  return rc;
}

/* A raw TCP connection to the daemon from source address src (any
 * 127.x.y.z: each is its own peer for admission), or -1. */
static inline int chaos_tcp_raw(const chaos_daemon_t *d, const char *src) {
  struct sockaddr_in a = {.sin_family = AF_INET}, s = {.sin_family = AF_INET};
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  a.sin_port = htons((uint16_t)d->port);
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  inet_pton(AF_INET, src ? src : "127.0.0.1", &s.sin_addr);
  if (fd < 0 || bind(fd, (struct sockaddr *)&s, sizeof(s)) != 0 ||
      connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

static inline int chaos_unix_raw(const chaos_daemon_t *d) {
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  snprintf(a.sun_path, sizeof(a.sun_path), "%s", d->sock);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
    if (fd >= 0)
      close(fd);
    return -1;
  }
  return fd;
}

/* A HELLO frame in b (the guest's encoding; wire/proto.h). */
static inline int chaos_hello(wire_buf_t *b, const char *name, const char *token) {
  wire__hello h = {.vmin = WIRE_VERSION_MIN, .vmax = WIRE_VERSION, .prio = 1};
  wire_buf_t body;
  int rc;
  snprintf(h.tenant, sizeof(h.tenant), "%s", name);
  snprintf(h.token, sizeof(h.token), "%s", token ? token : "");
  wire_buf_init(&body);
  wire_buf_init(b);
  wire__hello_encode(&body, &h);
  rc = wire_buf_status(&body);
  if (rc == 0)
    rc = wire__frame_put(b, 1, WIRE__K_HELLO, 0, body.data, body.len);
  wire_buf_close(&body);
  return rc ? rc : wire_buf_status(b);
}

/* Has the daemon closed fd (EOF or reset), within ms? */
static inline bool chaos_closed_within(int fd, int ms) {
  uint64_t end = chaos_now_ms() + (uint64_t)ms;
  char buf[512];
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  do {
    ssize_t r = recv(fd, buf, sizeof(buf), 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
      return true;
    if (r < 0)
      chaos_nap();
  } while (chaos_now_ms() < end);
  return false;
}

/* A tenant through wire (no guest library): 0 or wire's error. */
static inline int chaos_tenant(const chaos_daemon_t *d, bool tcp, const char *name,
                               const char *token, wire_conn_t **out) {
  char url[160], err[256];
  wire_hello_t h = {.tenant = name, .prio = WIRE_PRIO_BEST_EFFORT, .token = token};
  wire_conn_opts_t o = {.no_thread = true, .connect_timeout_ms = 5000};
  if (tcp)
    snprintf(url, sizeof(url), "tcp://127.0.0.1:%d", d->port);
  else
    snprintf(url, sizeof(url), "unix:%s", d->sock);
  return wire_conn_open(out, url, &h, &o, err, sizeof(err));
}


/* A tenant's first call, the call protocol's HELLO (wire/call.def), built by
 * the table's encoder.  Returns the call's CUresult, or wire's negative
 * error when the call itself failed. */
static inline int chaos_call_hello(wire_conn_t *c, const char *name, uint32_t prio) {
  call_hello_req_t q;
  wire_buf_t b;
  struct iovec iov;
  void *rep = NULL;
  size_t rlen = 0;
  uint32_t res = 1;
  int rc;
  memset(&q, 0, sizeof(q));
  q.version = CALL_PROTO_VERSION;
  q.priority = prio;
  memcpy(q.name, name, strnlen(name, sizeof(q.name) - 1));
  wire_buf_init(&b);
  if (wire_buf_reserve(&b, CALL_HDR_LEN) != 0)
    return -ENOMEM;
  b.len = CALL_HDR_LEN;
  if (call_hello_req_put(&q, &b) != 0 || wire_buf_status(&b)) {
    wire_buf_close(&b);
    return -ENOMEM;
  }
  call_hdr_write(b.data, CALL_OP_HELLO, 0, (uint32_t)(b.len - CALL_HDR_LEN));
  iov = (struct iovec){b.data, b.len};
  rc = wire_conn_call_alloc(c, &iov, 1, &rep, &rlen);
  if (rc == 0 && rlen >= CALL_REPLY_HDR_LEN)
    memcpy(&res, rep, 4);
  free(rep);
  wire_buf_close(&b);
  return rc ? rc : (int)res;
}

#endif /* TALLY_TESTS_HOSTD_CHAOS_H */
