/* restart.c: tallyd re-executes itself after a GPU fault poisons the process.
 *
 * On the real driver a context-corrupting error (illegal address, ...) is
 * sticky for the whole PROCESS: even after cuDevicePrimaryCtxReset,
 * cuDevicePrimaryCtxRetain answers 700 (H200; docs/decisions.md, D4).  So tallyd
 * restarts, keeping its pid and listening sockets:
 *   1. tenant.c (recover) marks every tenant lost and raises the fault here
 *      (hostd__fault_raise): the first one is recorded, the server's hook
 *      wakes its loop.
 *   2. server.c refuses new tenants with -EAGAIN, waits for the last tenant
 *      or --restart-grace-ms, and returns HOSTD_SERVER_RESTART.
 *   3. main.c calls hostd__restart_exec: every descriptor but 0-2 and the
 *      listening sockets becomes close-on-exec, the sockets' numbers go into
 *      TALLY_LISTEN_FDS ("unix:N,tcp:M"), /proc/self/exe runs with the same
 *      argv.  Connections arriving meanwhile wait in the backlog.
 *   4. The new image adopts them (hostd__restart_inherit, wire_server_new).
 * Caches that must survive are on disk already.
 *
 * Lock story: fault_lock guards the fault record and the hook (written by
 * worker threads and the server, read by any thread).
 */
#include "hostd/hostd-int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;
static int fault_err;         /* the first context-corrupting CUresult; 0 = none */
static uint32_t fault_tenant; /* the tenant whose call returned it */
static void (*fault_cb)(void *);
static void *fault_cb_arg;

int hostd__fault_raise(uint32_t tenant, int err) {
  void (*cb)(void *) = NULL;
  void *arg = NULL;
  int first = 0;

  pthread_mutex_lock(&fault_lock);
  if (fault_err == 0 && err != 0) {
    fault_err = err;
    fault_tenant = tenant;
    cb = fault_cb;
    arg = fault_cb_arg;
    first = 1;
  }
  pthread_mutex_unlock(&fault_lock);
  if (cb)
    cb(arg);
  return first;
}

int hostd__fault_pending(uint32_t *tenant) {
  int err;
  pthread_mutex_lock(&fault_lock);
  err = fault_err;
  if (tenant)
    *tenant = fault_tenant;
  pthread_mutex_unlock(&fault_lock);
  return err;
}

void hostd__fault_on_raise(void (*cb)(void *), void *arg) {
  pthread_mutex_lock(&fault_lock);
  fault_cb = cb;
  fault_cb_arg = arg;
  pthread_mutex_unlock(&fault_lock);
}

void hostd__fault_forget(void) {
  pthread_mutex_lock(&fault_lock);
  fault_err = 0;
  fault_tenant = 0;
  pthread_mutex_unlock(&fault_lock);
}

/* ---- the listening sockets across exec ---- */

/* Parses one decimal descriptor number of at most 7 digits (far above any
 * RLIMIT_NOFILE) ending at a ',' or the end.  Returns the number or -1. */
static int parse_fd(const char **p) {
  long v = 0;
  int digits = 0;
  while (**p >= '0' && **p <= '9' && digits < 8) {
    v = v * 10 + (**p - '0');
    (*p)++;
    digits++;
  }
  if (digits == 0 || digits > 7 || (**p != ',' && **p != 0))
    return -1;
  return (int)v;
}

int hostd__restart_parse_fds(const char *s, int *unix_fd, int *tcp_fd) {
  const char *p = s;
  int u = 0, t = 0;

  *unix_fd = *tcp_fd = 0;
  if (!s || !*s)
    return -EINVAL;
  while (*p) {
    int *slot, v;
    if (strncmp(p, "unix:", 5) == 0)
      slot = &u, p += 5;
    else if (strncmp(p, "tcp:", 4) == 0)
      slot = &t, p += 4;
    else
      return -EINVAL;
    /* 0-2 are stdin/out/err, never one of our sockets; each name once. */
    if (*slot != 0 || (v = parse_fd(&p)) < 3)
      return -EINVAL;
    *slot = v;
    if (*p == ',' && *++p == 0)
      return -EINVAL; /* trailing comma */
  }
  *unix_fd = u;
  *tcp_fd = t;
  return 0;
}

/* 0 when fd is a listening stream socket of one of the families given. */
static int check_listener(int fd, int fam1, int fam2) {
  struct sockaddr_storage sa;
  socklen_t sl = sizeof(sa);
  int on = 0;
  socklen_t ol = sizeof(on);
  struct stat st;

  if (fstat(fd, &st) != 0)
    return -errno;
  if (!S_ISSOCK(st.st_mode))
    return -ENOTSOCK;
  if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &ol) != 0)
    return -errno;
  if (!on)
    return -EINVAL;
  if (getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
    return -errno;
  if (sa.ss_family != fam1 && sa.ss_family != fam2)
    return -EAFNOSUPPORT;
  return 0;
}

int hostd__restart_inherit(int *unix_fd, int *tcp_fd) {
  const char *env = getenv(HOSTD_LISTEN_FDS_ENV);
  int u, t, rc;

  *unix_fd = *tcp_fd = 0;
  if (!env)
    return 0;
  rc = hostd__restart_parse_fds(env, &u, &t);
  if (rc == 0 && u && (rc = check_listener(u, AF_UNIX, AF_UNIX)) != 0)
    hostd__log(HOSTD_LOG_WARN, "%s=%s: descriptor %d is not a listening UNIX socket (%s)",
               HOSTD_LISTEN_FDS_ENV, env, u, strerror(-rc));
  else if (rc == 0 && t && (rc = check_listener(t, AF_INET, AF_INET6)) != 0)
    hostd__log(HOSTD_LOG_WARN, "%s=%s: descriptor %d is not a listening TCP socket (%s)",
               HOSTD_LISTEN_FDS_ENV, env, t, strerror(-rc));
  else if (rc != 0)
    hostd__log(HOSTD_LOG_WARN, "%s=%s: expected unix:N,tcp:M", HOSTD_LISTEN_FDS_ENV, env);
  if (rc == 0) {
    /* Ours again until the next restart: no child may inherit them. */
    if (u)
      (void)fcntl(u, F_SETFD, FD_CLOEXEC);
    if (t)
      (void)fcntl(t, F_SETFD, FD_CLOEXEC);
    *unix_fd = u;
    *tcp_fd = t;
  }
  unsetenv(HOSTD_LISTEN_FDS_ENV);
  return rc == 0 ? (u || t) : rc;
}

/* Marks every open descriptor above 2 close-on-exec, except keep1/keep2
 * (0 = none), which are cleared of it.  The driver, libuv, wire's shared
 * memory and a tenant's socket must not survive: a leaked /dev/nvidia*
 * descriptor would keep the poisoned context's memory.  Returns 0 or a
 * negative errno (the keep descriptors could not be prepared). */
static int cloexec_all_but(int keep1, int keep2) {
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int self;

  if (!d)
    return -errno;
  self = dirfd(d);
  while ((e = readdir(d)) != NULL) {
    char *end = NULL;
    long fd = strtol(e->d_name, &end, 10);
    int fl;
    if (!end || *end || e->d_name[0] == '.' || fd <= 2 || fd == self || fd == keep1 || fd == keep2)
      continue;
    fl = fcntl((int)fd, F_GETFD);
    if (fl >= 0 && !(fl & FD_CLOEXEC))
      (void)fcntl((int)fd, F_SETFD, fl | FD_CLOEXEC);
  }
  closedir(d);
  for (int i = 0; i < 2; i++) {
    int fd = i == 0 ? keep1 : keep2;
    int fl;
    if (fd <= 0)
      continue;
    fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC) != 0)
      return -errno;
  }
  return 0;
}

int hostd__restart_exec(char *const argv[], int unix_fd, int tcp_fd) {
  char val[64];
  sigset_t stop;
  int rc;

  if (unix_fd < 0)
    unix_fd = 0;
  if (tcp_fd < 0)
    tcp_fd = 0;
  val[0] = 0;
  if (unix_fd)
    snprintf(val, sizeof(val), "unix:%d", unix_fd);
  if (tcp_fd)
    snprintf(val + strlen(val), sizeof(val) - strlen(val), "%stcp:%d", unix_fd ? "," : "", tcp_fd);
  if ((rc = cloexec_all_but(unix_fd, tcp_fd)) != 0)
    return rc;
  if (val[0] ? setenv(HOSTD_LISTEN_FDS_ENV, val, 1) : unsetenv(HOSTD_LISTEN_FDS_ENV))
    return -errno;
  /* The mask and pending signals survive exec; handlers do not.  SIGTERM
   * and SIGINT stay blocked until the new image has its watchers
   * (main.c), so one sent while it starts (cuInit can take seconds) ends
   * it cleanly instead of killing it.  Everything else is unblocked. */
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_SETMASK, &stop, NULL);
  hostd__log(HOSTD_LOG_WARN, "re-executing /proc/self/exe (pid %d) with %s=%s", (int)getpid(),
             HOSTD_LISTEN_FDS_ENV, val[0] ? val : "(none)");
  fflush(stderr);
  execv("/proc/self/exe", argv);
  rc = -errno;
  unsetenv(HOSTD_LISTEN_FDS_ENV);
  return rc;
}
