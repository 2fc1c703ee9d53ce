/* test-wire-peer.c: hostile, broken and dying peers.
 *
 * - the daemon killed (SIGKILL) or frozen (SIGSTOP) under a guest: the
 *   guest's next call fails with a loss status within a bound;
 * - a guest killed or frozen under the daemon: on_close reports it within a
 *   bound, and the daemon keeps serving others;
 * - malformed, oversized and truncated frames from a raw peer (TCP and raw
 *   shared memory) close only that tenant with a reason; version and token
 *   mismatches are refused with a message saying what was expected;
 * - a NOTE, which only the daemon may send, from a guest closes that tenant;
 *   a daemon's NOTE of the wrong length fails the guest's connection.
 * Processes are forked before any thread starts.  Waiting is on calls,
 * pipes and waitpid, or a bounded yield loop on an atomic counter: no sleeps.
 */
#include "tests/test-wire-harness.h"
#include "wire/shm.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

/* Death must be noticed well within this: socket hang-up is immediate,
 * heartbeat timeouts here are 300 ms. */
#define BOUND_MS 2000

static uint64_t ms_since(uint64_t t0) {
  return (wire__now_ns() - t0) / 1000000u;
}

/* Waits (yielding) until *ctr != old or BOUND_MS passed; returns elapsed ms. */
static uint64_t wait_change(_Atomic int *ctr, int old) {
  uint64_t t0 = wire__now_ns();
  while (atomic_load(ctr) == old && ms_since(t0) < BOUND_MS)
    sched_yield();
  return ms_since(t0);
}

/* --------------------------------------------------- daemon in a child */

typedef struct child {
  pid_t pid;
  char url[128];
} child;

/* Forks a daemon (heartbeat 100 ms, dead after 300 ms); returns its url. */
static void daemon_child(child *ch, bool tcp) {
  int p[2];
  assert_int_equal(pipe(p), 0);
  ch->pid = fork();
  assert_true(ch->pid >= 0);
  if (ch->pid == 0) {
    harness h;
    wire_server_opts_t o = {.heartbeat_ms = 100, .dead_after_ms = 300};
    char url[128];
    close(p[0]);
    if (harness_start(&h, &o) != 0)
      _exit(1);
    snprintf(url, sizeof(url), "%s", tcp ? h.url_tcp : h.url_shm);
    if (write(p[1], url, sizeof(url)) != (ssize_t)sizeof(url))
      _exit(1);
    pthread_join(h.th, NULL);
    _exit(0);
  }
  close(p[1]);
  assert_int_equal(read(p[0], ch->url, sizeof(ch->url)), (ssize_t)sizeof(ch->url));
  close(p[0]);
}

static wire_conn_t *connect_to(const char *url, const wire_conn_opts_t *o) {
  wire_hello_t hello = {.tenant = "victim", .prio = WIRE_PRIO_LATENCY_CRITICAL};
  wire_conn_t *c = NULL;
  char err[256];
  int rc = wire_conn_open(&c, url, &hello, o, err, sizeof(err));
  if (rc)
    fail_msg("open %s: %s", url, err);
  return c;
}

static void daemon_death(bool tcp, int sig) {
  child ch;
  wire_conn_t *c;
  uint64_t t0;
  int rc;

  daemon_child(&ch, tcp);
  c = connect_to(ch.url, NULL);
  assert_int_equal(wire_conn_call(c, NULL, 0, NULL, 0, NULL), 0);
  kill(ch.pid, sig);
  if (sig == SIGSTOP) /* wait until it really is stopped */
    assert_int_equal(waitpid(ch.pid, NULL, WUNTRACED), ch.pid);
  t0 = wire__now_ns();
  rc = wire_conn_call(c, NULL, 0, NULL, 0, NULL);
  if (sig == SIGKILL)
    assert_true(rc == WIRE_ECLOSED || rc == -ECONNRESET || rc == -EPIPE);
  else
    assert_int_equal(rc, WIRE_EPEERDEAD);
  assert_true(ms_since(t0) < BOUND_MS);
  /* Every later request fails the same way, posts included, and the
   * connection says why. */
  assert_int_equal(wire_conn_post(c, NULL, 0), rc);
  assert_true(strlen(wire_conn_why(c)) > 0);
  if (sig == SIGSTOP)
    assert_non_null(strstr(wire_conn_why(c), "no byte from the daemon"));
  wire_conn_close(c);
  kill(ch.pid, SIGKILL);
  waitpid(ch.pid, NULL, 0);
}

static void shm_daemon_killed_fails_the_next_call(void **s) {
  daemon_death(false, SIGKILL);
}
static void tcp_daemon_killed_fails_the_next_call(void **s) {
  daemon_death(true, SIGKILL);
}
static void shm_daemon_frozen_times_out_by_heartbeat(void **s) {
  daemon_death(false, SIGSTOP);
}
static void tcp_daemon_frozen_times_out_by_heartbeat(void **s) {
  daemon_death(true, SIGSTOP);
}

/* A frozen daemon stops draining: a sender blocked on the full ring or
 * socket must give up once the heartbeat thread declares the daemon dead,
 * not hang the application. */
static void blocked_sender_gives_up_when_daemon_freezes(bool tcp) {
  child ch;
  wire_conn_t *c;
  size_t len = 1 << 20;
  uint8_t *big = calloc(1, len);
  struct iovec v = {big, len};
  uint64_t t0;
  int rc = 0, i;

  daemon_child(&ch, tcp);
  c = connect_to(ch.url, NULL);
  assert_int_equal(wire_conn_call(c, NULL, 0, NULL, 0, NULL), 0);
  kill(ch.pid, SIGSTOP);
  assert_int_equal(waitpid(ch.pid, NULL, WUNTRACED), ch.pid);
  t0 = wire__now_ns();
  for (i = 0; i < 100000 && rc == 0; i++)
    rc = wire_conn_post(c, &v, 1);
  assert_int_equal(rc, WIRE_EPEERDEAD);
  assert_true(ms_since(t0) < BOUND_MS);
  wire_conn_close(c);
  kill(ch.pid, SIGKILL);
  waitpid(ch.pid, NULL, 0);
  free(big);
}
static void shm_blocked_sender_gives_up_when_daemon_freezes(void **s) {
  blocked_sender_gives_up_when_daemon_freezes(false);
}
static void tcp_blocked_sender_gives_up_when_daemon_freezes(void **s) {
  blocked_sender_gives_up_when_daemon_freezes(true);
}

/* ---------------------------------------------------- guest in a child */

static void guest_death(bool tcp, int sig) {
  int to_child[2], from_child[2];
  harness h;
  wire_server_opts_t o = {.heartbeat_ms = 100, .dead_after_ms = 300};
  pid_t pid;
  char url[128], ok;
  int closes;
  uint64_t ms;

  assert_int_equal(pipe(to_child), 0);
  assert_int_equal(pipe(from_child), 0);
  pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    wire_hello_t hello = {.tenant = "doomed", .prio = WIRE_PRIO_BEST_EFFORT};
    wire_conn_t *c = NULL;
    if (read(to_child[0], url, sizeof(url)) != (ssize_t)sizeof(url) ||
        wire_conn_open(&c, url, &hello, NULL, NULL, 0) != 0 ||
        wire_conn_call(c, NULL, 0, NULL, 0, NULL) != 0)
      _exit(1);
    if (write(from_child[1], "k", 1) != 1)
      _exit(1);
    for (;;)
      pause();
  }
  assert_int_equal(harness_start(&h, &o), 0);
  snprintf(url, sizeof(url), "%s", tcp ? h.url_tcp : h.url_shm);
  assert_int_equal(write(to_child[1], url, sizeof(url)), (ssize_t)sizeof(url));
  assert_int_equal(read(from_child[0], &ok, 1), 1);
  closes = atomic_load(&h.closes);
  kill(pid, sig);
  if (sig == SIGSTOP)
    assert_int_equal(waitpid(pid, NULL, WUNTRACED), pid);
  ms = wait_change(&h.closes, closes);
  assert_true(ms < BOUND_MS);
  if (sig == SIGKILL)
    assert_true(atomic_load(&h.last_close_status) == WIRE_ECLOSED ||
                atomic_load(&h.last_close_status) == -ECONNRESET);
  else
    assert_int_equal(atomic_load(&h.last_close_status), WIRE_EPEERDEAD);
  /* The daemon still serves other tenants. */
  {
    wire_conn_t *c = connect_to(url, NULL);
    assert_int_equal(wire_conn_call(c, NULL, 0, NULL, 0, NULL), 0);
    wire_conn_close(c);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  harness_stop(&h);
  close(to_child[0]);
  close(to_child[1]);
  close(from_child[0]);
  close(from_child[1]);
}

static void shm_guest_killed_is_closed_at_once(void **s) {
  guest_death(false, SIGKILL);
}
static void tcp_guest_killed_is_closed_at_once(void **s) {
  guest_death(true, SIGKILL);
}
static void shm_guest_frozen_times_out_by_heartbeat(void **s) {
  guest_death(false, SIGSTOP);
}
static void tcp_guest_frozen_times_out_by_heartbeat(void **s) {
  guest_death(true, SIGSTOP);
}

/* ------------------------------------------------------------ raw peers */

static int raw_tcp(harness *h) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sa.sin_port = htons((uint16_t)wire_server_tcp_port(h->s));
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

static int raw_unix(harness *h) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  memcpy(sa.sun_path, h->path, strlen(h->path));
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

static void send_hello(int fd, uint16_t vmin, uint16_t vmax, const char *token) {
  wire__hello hh = {.vmin = vmin, .vmax = vmax, .prio = 1};
  wire_buf_t b, f;
  wire_buf_init(&b);
  wire_buf_init(&f);
  strcpy(hh.tenant, "raw");
  snprintf(hh.token, sizeof(hh.token), "%s", token ? token : "");
  wire__hello_encode(&b, &hh);
  wire__frame_put(&f, 1, WIRE__K_HELLO, 0, b.data, b.len);
  assert_int_equal(write(fd, f.data, f.len), (ssize_t)f.len);
  wire_buf_close(&b);
  wire_buf_close(&f);
}

/* Reads until EOF; returns true if EOF came within the bound. */
static bool reads_to_eof(int fd) {
  uint8_t b[4096];
  uint64_t t0 = wire__now_ns();
  while (ms_since(t0) < BOUND_MS) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, BOUND_MS) <= 0)
      return false;
    if (read(fd, b, sizeof(b)) <= 0)
      return true;
  }
  return false;
}

static void bad_bytes_after_handshake(const uint8_t *bad, size_t n, int want_status,
                                      const char *why_part, bool then_eof) {
  harness h;
  wire__welcome w;
  char why[256] = "";
  int fd, got, closes;
  wire_conn_t *other;

  assert_int_equal(harness_start(&h, NULL), 0);
  other = connect_to(h.url_shm, NULL);
  fd = raw_tcp(&h);
  send_hello(fd, 1, 1, NULL);
  assert_int_equal(wire__handshake_read(fd, 2000, &w, NULL, 0, &got, why, sizeof(why)), 0);
  closes = atomic_load(&h.closes);
  assert_int_equal(write(fd, bad, n), (ssize_t)n);
  if (then_eof)
    shutdown(fd, SHUT_WR);
  assert_true(wait_change(&h.closes, closes) < BOUND_MS);
  assert_int_equal(atomic_load(&h.last_close_status), want_status);
  if (strstr(h.last_why, why_part) == NULL)
    fail_msg("close reason \"%s\" lacks \"%s\"", h.last_why, why_part);
  assert_true(reads_to_eof(fd));
  close(fd);
  /* Every other tenant is untouched. */
  assert_int_equal(wire_conn_call(other, NULL, 0, NULL, 0, NULL), 0);
  wire_conn_close(other);
  harness_stop(&h);
}

static void garbage_frame_closes_only_that_tenant(void **s) {
  const uint8_t junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  bad_bytes_after_handshake(junk, sizeof(junk) - 1, -EPROTO, "bad frame magic", false);
}

static void oversized_frame_closes_only_that_tenant(void **s) {
  uint8_t b[WIRE__HDR_LEN];
  wire__hdr hd = {1, WIRE__K_CALL, 0, 64u << 20, 0, 1};
  wire__hdr_encode(b, &hd);
  bad_bytes_after_handshake(b, sizeof(b), -EMSGSIZE, "exceeds", false);
}

static void oversized_message_closes_only_that_tenant(void **s) {
  uint8_t b[WIRE__HDR_LEN];
  wire__hdr hd = {1, WIRE__K_CALL, WIRE__F_MORE, 16, 0xffffffffu, 1};
  wire__hdr_encode(b, &hd);
  bad_bytes_after_handshake(b, sizeof(b), -EMSGSIZE, "exceeds the", false);
}

static void truncated_frame_then_eof_closes_that_tenant(void **s) {
  uint8_t b[WIRE__HDR_LEN + 3];
  wire__hdr hd = {1, WIRE__K_CALL, 0, 100, 0, 1};
  wire__hdr_encode(b, &hd);
  bad_bytes_after_handshake(b, sizeof(b), WIRE_ECLOSED, "closed", true);
}

static void reply_kind_from_guest_closes_that_tenant(void **s) {
  uint8_t b[WIRE__HDR_LEN];
  wire__hdr hd = {1, WIRE__K_REPLY, 0, 0, 0, 1};
  wire__hdr_encode(b, &hd);
  bad_bytes_after_handshake(b, sizeof(b), -EPROTO, "not allowed", false);
}

static void note_kind_from_guest_closes_that_tenant(void **s) {
  uint8_t b[WIRE__HDR_LEN + WIRE__NOTE_LEN] = {0};
  wire__hdr hd = {1, WIRE__K_NOTE, 0, WIRE__NOTE_LEN, 0, 0};
  wire__hdr_encode(b, &hd);
  bad_bytes_after_handshake(b, sizeof(b), -EPROTO, "not allowed", false);
}

/* A fake daemon on TCP: answers the HELLO with a WELCOME granting notes,
 * then sends a NOTE of 3 bytes and reads until the guest hangs up. */
static void *short_note_daemon(void *arg) {
  int lfd = *(int *)arg, fd;
  uint8_t hb[WIRE__HDR_LEN], body[WIRE__HELLO_MAX], junk[256];
  wire__hdr h;
  wire__welcome w = {.version = WIRE_VERSION, .caps = WIRE__CAP_NOTE, .heartbeat_ms = 500,
                     .dead_after_ms = 5000, .max_msg_len = 1u << 20};
  wire_buf_t b, f;
  char why[128];

  fd = accept(lfd, NULL, NULL);
  if (fd < 0)
    return NULL;
  if (read(fd, hb, sizeof(hb)) == (ssize_t)sizeof(hb) &&
      wire__hdr_decode(hb, 0, &h, why, sizeof(why)) == 0 && h.len <= sizeof(body) &&
      read(fd, body, h.len) == (ssize_t)h.len) {
    wire_buf_init(&b);
    wire_buf_init(&f);
    wire__welcome_encode(&b, &w);
    wire__frame_put(&f, 1, WIRE__K_WELCOME, 0, b.data, b.len);
    wire__frame_put(&f, WIRE_VERSION, WIRE__K_NOTE, 0, "abc", 3);
    if (write(fd, f.data, f.len) == (ssize_t)f.len)
      while (read(fd, junk, sizeof(junk)) > 0)
        ;
    wire_buf_close(&b);
    wire_buf_close(&f);
  }
  close(fd);
  return NULL;
}

static void short_note_from_daemon_fails_the_connection(void **s) {
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof(sa);
  int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  pthread_t th;
  char url[64];
  wire_conn_t *c;
  int rc;

  assert_true(lfd >= 0);
  assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(lfd, 1), 0);
  assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
  snprintf(url, sizeof(url), "tcp://127.0.0.1:%u", ntohs(sa.sin_port));
  assert_int_equal(pthread_create(&th, NULL, short_note_daemon, &lfd), 0);
  c = connect_to(url, NULL);
  rc = wire_conn_call(c, NULL, 0, NULL, 0, NULL);
  assert_int_equal(rc, -EPROTO);
  if (strstr(wire_conn_why(c), "NOTE of 3 bytes") == NULL)
    fail_msg("reason \"%s\" does not name the short NOTE", wire_conn_why(c));
  wire_conn_close(c);
  assert_int_equal(pthread_join(th, NULL), 0);
  close(lfd);
}

static void oversized_hello_is_refused_before_allocation(void **s) {
  harness h;
  uint8_t b[WIRE__HDR_LEN];
  wire__hdr hd = {1, WIRE__K_HELLO, 0, WIRE__FRAME_MAX, 0, 0};
  int fd;

  assert_int_equal(harness_start(&h, NULL), 0);
  fd = raw_tcp(&h);
  wire__hdr_encode(b, &hd);
  assert_int_equal(write(fd, b, sizeof(b)), (ssize_t)sizeof(b));
  assert_true(reads_to_eof(fd));
  close(fd);
  assert_int_equal(atomic_load(&h.closes), 0); /* never accepted: no on_close */
  harness_stop(&h);
}

static void version_mismatch_is_refused_naming_both_ranges(void **s) {
  harness h;
  wire__welcome w;
  char why[256] = "";
  int fd, got;

  assert_int_equal(harness_start(&h, NULL), 0);
  fd = raw_tcp(&h);
  send_hello(fd, 7, 9, NULL);
  assert_int_equal(wire__handshake_read(fd, 2000, &w, NULL, 0, &got, why, sizeof(why)),
                   WIRE_EVERSION);
  assert_non_null(strstr(why, "daemon speaks versions 1..1, tenant offered 7..9"));
  close(fd);
  /* Same over the UNIX socket. */
  fd = raw_unix(&h);
  send_hello(fd, 2, 3, NULL);
  why[0] = 0;
  assert_int_equal(wire__handshake_read(fd, 2000, &w, NULL, 0, &got, why, sizeof(why)),
                   WIRE_EVERSION);
  assert_non_null(strstr(why, "tenant offered 2..3"));
  close(fd);
  harness_stop(&h);
}

static void token_mismatch_is_refused_saying_what_is_expected(void **s) {
  harness h;
  wire_server_opts_t o = {.token = "s3cret"};
  wire_hello_t hello = {.tenant = "net", .prio = WIRE_PRIO_BEST_EFFORT, .token = "wrong"};
  wire_conn_t *c = NULL;
  char err[256];

  assert_int_equal(harness_start(&h, &o), 0);
  assert_int_equal(wire_conn_open(&c, h.url_tcp, &hello, NULL, err, sizeof(err)), WIRE_ETOKEN);
  assert_non_null(strstr(err, "token refused"));
  hello.token = NULL;
  assert_int_equal(wire_conn_open(&c, h.url_tcp, &hello, NULL, err, sizeof(err)), WIRE_ETOKEN);
  assert_non_null(strstr(err, "token missing"));
  hello.token = "s3cret";
  assert_int_equal(wire_conn_open(&c, h.url_tcp, &hello, NULL, err, sizeof(err)), 0);
  wire_conn_close(c);
  /* Local shared-memory tenants are identified by SO_PEERCRED instead. */
  hello.token = NULL;
  assert_int_equal(wire_conn_open(&c, h.url_shm, &hello, NULL, err, sizeof(err)), 0);
  wire_conn_close(c);
  harness_stop(&h);
}

/* A raw shared-memory guest: handshake by hand, then write into the ring. */
typedef struct raw_shm {
  int sock, fds[4];
  uint8_t *mem;
  size_t size;
  wire__shm_dir g2d, d2g;
} raw_shm;

static void raw_shm_open(harness *h, raw_shm *r) {
  wire__welcome w;
  char why[256] = "";
  int got;

  r->sock = raw_unix(h);
  send_hello(r->sock, 1, 1, NULL);
  assert_int_equal(wire__handshake_read(r->sock, 2000, &w, r->fds, 4, &got, why, sizeof(why)), 0);
  assert_int_equal(got, 4);
  r->size = wire__shm_size(w.ring_bytes, w.data_bytes);
  r->mem = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fds[0], 0);
  assert_true(r->mem != MAP_FAILED);
  wire__shm_bind(r->mem, w.ring_bytes, w.data_bytes, &r->g2d, &r->d2g);
}

static void raw_shm_close(raw_shm *r) {
  int i;
  munmap(r->mem, r->size);
  for (i = 0; i < 4; i++)
    close(r->fds[i]);
  close(r->sock);
}

static void shm_check_closed(harness *h, raw_shm *r, int closes, int want, const char *part) {
  assert_true(wait_change(&h->closes, closes) < BOUND_MS);
  assert_int_equal(atomic_load(&h->last_close_status), want);
  if (strstr(h->last_why, part) == NULL)
    fail_msg("close reason \"%s\" lacks \"%s\"", h->last_why, part);
  assert_true(reads_to_eof(r->sock));
}

static void shm_garbage_in_ring_closes_only_that_tenant(void **s) {
  harness h;
  raw_shm r;
  wire_conn_t *other;
  int closes;
  uint64_t head;

  assert_int_equal(harness_start(&h, NULL), 0);
  other = connect_to(h.url_tcp, NULL);
  raw_shm_open(&h, &r);
  closes = atomic_load(&h.closes);
  memcpy(r.g2d.ring, "NOT A FRAME AT ALL......", 24);
  head = 24;
  __atomic_store_n((uint64_t *)(r.g2d.ctl + WIRE__SHM_HEAD), head, __ATOMIC_RELEASE);
  wire__efd_ring(r.fds[1]);
  shm_check_closed(&h, &r, closes, -EPROTO, "bad frame magic");
  raw_shm_close(&r);
  assert_int_equal(wire_conn_call(other, NULL, 0, NULL, 0, NULL), 0);
  wire_conn_close(other);
  harness_stop(&h);
}

static void shm_impossible_head_closes_that_tenant(void **s) {
  harness h;
  raw_shm r;
  int closes;

  assert_int_equal(harness_start(&h, NULL), 0);
  raw_shm_open(&h, &r);
  closes = atomic_load(&h.closes);
  __atomic_store_n((uint64_t *)(r.g2d.ctl + WIRE__SHM_HEAD), (uint64_t)1 << 40, __ATOMIC_RELEASE);
  wire__efd_ring(r.fds[1]);
  shm_check_closed(&h, &r, closes, -EPROTO, "impossible ring head");
  raw_shm_close(&r);
  harness_stop(&h);
}

static void shm_descriptor_outside_region_closes_that_tenant(void **s) {
  harness h;
  raw_shm r;
  int closes;
  uint8_t f[WIRE__HDR_LEN + WIRE__SHMDESC_LEN] = {0};
  wire__hdr hd = {1, WIRE__K_CALL, WIRE__F_SHMDATA, WIRE__SHMDESC_LEN, 0, 1};
  uint64_t pos = 0;
  uint32_t len = 0x7fffffff;

  assert_int_equal(harness_start(&h, NULL), 0);
  raw_shm_open(&h, &r);
  closes = atomic_load(&h.closes);
  wire__hdr_encode(f, &hd);
  memcpy(f + WIRE__HDR_LEN, &pos, 8);
  memcpy(f + WIRE__HDR_LEN + 8, &len, 4);
  memcpy(r.g2d.ring, f, sizeof(f));
  __atomic_store_n((uint64_t *)(r.g2d.ctl + WIRE__SHM_HEAD), (uint64_t)sizeof(f), __ATOMIC_RELEASE);
  wire__efd_ring(r.fds[1]);
  shm_check_closed(&h, &r, closes, -EPROTO, "outside the region");
  raw_shm_close(&r);
  harness_stop(&h);
}

static void shm_bytes_on_socket_after_handshake_close_that_tenant(void **s) {
  harness h;
  raw_shm r;
  int closes;

  assert_int_equal(harness_start(&h, NULL), 0);
  raw_shm_open(&h, &r);
  closes = atomic_load(&h.closes);
  assert_int_equal(write(r.sock, "x", 1), 1);
  shm_check_closed(&h, &r, closes, -EPROTO, "on the socket after the handshake");
  raw_shm_close(&r);
  harness_stop(&h);
}

static void shm_fd_frame_without_a_descriptor_closes_that_tenant(void **s) {
  harness h;
  raw_shm r;
  int closes;
  uint8_t f[WIRE__HDR_LEN + 8] = {0};
  wire__hdr hd = {1, WIRE__K_FD, 0, 8, 0, 1};

  assert_int_equal(harness_start(&h, NULL), 0);
  raw_shm_open(&h, &r);
  closes = atomic_load(&h.closes);
  wire__hdr_encode(f, &hd);
  memcpy(r.g2d.ring, f, sizeof(f));
  __atomic_store_n((uint64_t *)(r.g2d.ctl + WIRE__SHM_HEAD), (uint64_t)sizeof(f), __ATOMIC_RELEASE);
  wire__efd_ring(r.fds[1]);
  shm_check_closed(&h, &r, closes, -EPROTO, "without a descriptor");
  raw_shm_close(&r);
  harness_stop(&h);
  assert_int_equal(atomic_load(&h.fds), 0);
}

int main(void) {
  /* Watchdog: a hang (a bug that keeps a call waiting) fails the program
   * after 120 s instead of stalling make check; the suite takes seconds. */
  alarm(120);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shm_daemon_killed_fails_the_next_call),
      cmocka_unit_test(note_kind_from_guest_closes_that_tenant),
      cmocka_unit_test(shm_fd_frame_without_a_descriptor_closes_that_tenant),
      cmocka_unit_test(tcp_daemon_killed_fails_the_next_call),
      cmocka_unit_test(shm_daemon_frozen_times_out_by_heartbeat),
      cmocka_unit_test(tcp_daemon_frozen_times_out_by_heartbeat),
      cmocka_unit_test(shm_blocked_sender_gives_up_when_daemon_freezes),
      cmocka_unit_test(tcp_blocked_sender_gives_up_when_daemon_freezes),
      cmocka_unit_test(shm_guest_killed_is_closed_at_once),
      cmocka_unit_test(tcp_guest_killed_is_closed_at_once),
      cmocka_unit_test(shm_guest_frozen_times_out_by_heartbeat),
      cmocka_unit_test(tcp_guest_frozen_times_out_by_heartbeat),
      cmocka_unit_test(garbage_frame_closes_only_that_tenant),
      cmocka_unit_test(oversized_frame_closes_only_that_tenant),
      cmocka_unit_test(oversized_message_closes_only_that_tenant),
      cmocka_unit_test(truncated_frame_then_eof_closes_that_tenant),
      cmocka_unit_test(reply_kind_from_guest_closes_that_tenant),
      cmocka_unit_test(oversized_hello_is_refused_before_allocation),
      cmocka_unit_test(version_mismatch_is_refused_naming_both_ranges),
      cmocka_unit_test(token_mismatch_is_refused_saying_what_is_expected),
      cmocka_unit_test(shm_garbage_in_ring_closes_only_that_tenant),
      cmocka_unit_test(shm_impossible_head_closes_that_tenant),
      cmocka_unit_test(shm_descriptor_outside_region_closes_that_tenant),
      cmocka_unit_test(shm_bytes_on_socket_after_handshake_close_that_tenant),
      cmocka_unit_test(short_note_from_daemon_fails_the_connection),
  };
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests_name("wire-peer", tests, NULL, NULL);
}
