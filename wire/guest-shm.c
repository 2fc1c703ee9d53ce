/* guest-shm.c: the guest's shared-memory transport ("unix:/path").
 *
 * The UNIX socket carries only the handshake: the HELLO goes out, the WELCOME
 * comes back with the memfd and three eventfds (SCM_RIGHTS).  After that the
 * socket stays open and silent; its hang-up is how the guest learns at once
 * that the daemon died, so every blocking wait polls it too.  Calls and posts
 * go into the g2d ring (large payloads through the data region, shm.h); the
 * daemon's doorbell is rung only when it said it sleeps.  Waiting for a reply
 * spins first (wire__spin_us: 50 us on hosts with >= 4 CPUs, 20 us on
 * smaller ones, TALLY_WIRE_SPIN_US overrides; a daemon answer usually lands
 * within it), then sleeps on the rx eventfd.  Waiting for ring space sleeps on the
 * tx eventfd, so a reader and a writer thread never steal each other's
 * wakeups.
 */
#include "wire/shm.h"

#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* On small hosts 20 us of spinning: above the daemon's typical turnaround
 * for a small call (wire-bench shm p50), far below a scheduler time slice. */
#define WIRE__SHM_SPIN_SMALL_US 20

enum { FD_MEM, FD_DAEMON, FD_RX, FD_TX, FD_N };

typedef struct shm_gtp {
  wire__gtp base;
  int sock;
  int fds[FD_N];
  uint8_t *mem;
  size_t size;
  wire__shm_dir g2d, d2g;
} shm_gtp;

/* Blocks on efd (or a daemon hang-up) up to timeout_ms. */
static int wait_doorbell(shm_gtp *g, int efd, int timeout_ms) {
  struct pollfd p[2] = {{.fd = efd, .events = POLLIN}, {.fd = g->sock, .events = POLLIN}};
  int r;

  do
    r = poll(p, 2, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return -errno;
  if (p[1].revents)
    return WIRE_ECLOSED; /* the daemon never writes after WELCOME: EOF/HUP */
  if (r == 0)
    return -ETIMEDOUT;
  wire__efd_drain(efd);
  return 0;
}

/* The g2d data region's copy hook (shm.h); tx lock held. */
static void shm_copy(void *ctx, uint8_t *dst, const struct iovec *iov, int cnt, size_t off,
                     size_t n) {
  wire__par_iov_copy(&((shm_gtp *)ctx)->base, dst, NULL, iov, cnt, off, n);
}

static int shm_send_msg(wire__gtp *t, uint8_t version, uint8_t kind, uint64_t id,
                        const struct iovec *iov, int cnt, size_t len) {
  shm_gtp *g = (shm_gtp *)t;
  wire__shm_tx tx = {version, kind, id, 0, iov, cnt, len, 0, false};
  bool pub;
  int rc;

  if (kind == WIRE__K_BATCH) {
    tx.aux = (uint32_t)id; /* guest.c passes the record count as id */
    tx.id = 0;
  }
  for (;;) {
    rc = wire__shm_tx_step(&g->g2d, &tx, &pub);
    if (pub && wire__shm_consumer_sleeps(&g->g2d))
      wire__efd_ring(g->fds[FD_DAEMON]);
    if (rc != -EAGAIN)
      return rc;
    /* Out of space: say so, re-check (the daemon may have freed some
     * between our step and the flag), then sleep until it rings us. */
    wire__shm_wait_set(&g->g2d, true);
    rc = wire__shm_tx_step(&g->g2d, &tx, &pub);
    if (pub && wire__shm_consumer_sleeps(&g->g2d))
      wire__efd_ring(g->fds[FD_DAEMON]);
    if (rc == -EAGAIN)
      rc = wait_doorbell(g, g->fds[FD_TX], 100);
    wire__shm_wait_set(&g->g2d, false);
    /* A paused daemon may hold space for long: keep waiting, unless its
     * silence says it is dead. */
    if (rc == -ETIMEDOUT)
      rc = t->check ? t->check(t->check_ctx) : 0;
    if (rc < 0 || tx.done)
      return rc;
  }
}

static int shm_peek(wire__gtp *t, const uint8_t **p, size_t *n, int timeout_ms) {
  shm_gtp *g = (shm_gtp *)t;
  const uint8_t *p2;
  size_t n2;
  uint64_t start = 0;
  unsigned spins = 0;
  int rc;

  for (;;) {
    rc = wire__shm_readable(&g->d2g, p, n, &p2, &n2);
    if (rc)
      return rc;
    if (*n > 0)
      return 0;
    if (timeout_ms == 0)
      return -ETIMEDOUT;
    if (g->base.spin_ns == 0)
      break;
    /* Spin first; read the clock only every 64 pauses. */
    if ((spins++ & 63) == 0) {
      uint64_t now = wire__now_ns();
      if (start == 0)
        start = now;
      else if (now - start >= g->base.spin_ns)
        break;
      /* Let a daemon that the scheduler woke on this CPU run at once
       * instead of after our spin (wake-affine placement). */
      sched_yield();
    }
    wire__cpu_relax();
  }
  for (;;) {
    if (!wire__shm_sleep_prepare(&g->d2g)) {
      rc = wait_doorbell(g, g->fds[FD_RX], timeout_ms);
      wire__shm_sleep_done(&g->d2g);
      /* A daemon that closes us writes its reason into the ring just
       * before the socket goes: read what the ring holds before the loss
       * (without this a guest that never spins lost the reason). */
      if (rc && (wire__shm_readable(&g->d2g, p, n, &p2, &n2) != 0 || *n == 0))
        return rc;
    }
    rc = wire__shm_readable(&g->d2g, p, n, &p2, &n2);
    if (rc || *n > 0)
      return rc;
  }
}

static void shm_consume(wire__gtp *t, size_t n) {
  shm_gtp *g = (shm_gtp *)t;

  g->d2g.rd += n;
  if (wire__shm_release(&g->d2g))
    wire__efd_ring(g->fds[FD_DAEMON]);
}

static const uint8_t *shm_resolve(wire__gtp *t, uint64_t pos, uint32_t len) {
  return wire__shm_resolve(&((shm_gtp *)t)->d2g, pos, len);
}

static void shm_close(wire__gtp *t) {
  shm_gtp *g = (shm_gtp *)t;
  int i;

  if (g == NULL)
    return;
  if (g->mem)
    munmap(g->mem, g->size);
  for (i = 0; i < FD_N; i++)
    if (g->fds[i] >= 0)
      close(g->fds[i]);
  if (g->sock >= 0)
    close(g->sock);
  free(g);
}

/* wire_conn_forget: system calls only (a fork's child handler). */
static void shm_forget(wire__gtp *t) {
  shm_gtp *g = (shm_gtp *)t;
  int i;

  if (g->mem)
    munmap(g->mem, g->size);
  g->mem = NULL;
  for (i = 0; i < FD_N; i++)
    if (g->fds[i] >= 0)
      close(g->fds[i]);
  for (i = 0; i < FD_N; i++)
    g->fds[i] = -1;
  if (g->sock >= 0)
    close(g->sock);
  g->sock = -1;
}

/* One byte with one descriptor (proto.h, WIRE__FD_BYTE).  The socket is
 * otherwise silent after WELCOME and its buffer empty, so the send does not
 * block; EBADF/EINVAL (a bad fd) is the caller's, not the connection's. */
static int shm_send_fd(wire__gtp *t, int fd) {
  shm_gtp *g = (shm_gtp *)t;
  char b = WIRE__FD_BYTE;
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(int))];
  } cb;
  struct iovec v = {&b, 1};
  struct msghdr mh = {
      .msg_iov = &v, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
  ssize_t w;

  memset(cb.b, 0, sizeof(cb.b));
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  do
    w = sendmsg(g->sock, &mh, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w < 0)
    return errno == EPIPE ? WIRE_ECLOSED : -errno;
  return w == 1 ? 0 : -EIO;
}

static void shm_idle(wire__gtp *t, uint64_t now_ns) {
  /* A failing madvise only leaves the pages resident: nothing to report. */
  (void)wire__shm_trim(&((shm_gtp *)t)->g2d, now_ns);
}

static bool shm_drained(wire__gtp *t) {
  shm_gtp *g = (shm_gtp *)t;
  return __atomic_load_n(wire__shm_u64(&g->g2d, WIRE__SHM_TAIL), __ATOMIC_ACQUIRE) ==
             __atomic_load_n(wire__shm_u64(&g->g2d, WIRE__SHM_HEAD), __ATOMIC_RELAXED) &&
         __atomic_load_n(wire__shm_u32(&g->g2d, WIRE__SHM_SLEEPING), __ATOMIC_RELAXED) == 0;
}

static const struct wire__gtp_ops shm_ops = {
    .name = "shm",
    .send_msg = shm_send_msg,
    .peek = shm_peek,
    .consume = shm_consume,
    .resolve = shm_resolve,
    .close = shm_close,
    .send_fd = shm_send_fd,
    .idle = shm_idle,
    .drained = shm_drained,
    .forget = shm_forget,
};

/* connect() that cannot hang: a UNIX stream connect blocks for as long as
 * the listener's backlog is full (a daemon that stopped accepting), so it
 * is made non-blocking and retried every millisecond (the kernel answers
 * EAGAIN at once) until timeout_ms; the socket is blocking again after. */
static int unix_connect(int fd, const struct sockaddr_un *sa, uint32_t timeout_ms) {
  uint64_t deadline = wire__now_ns() + (uint64_t)timeout_ms * 1000000u;
  int fl = fcntl(fd, F_GETFL), rc = 0;

  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return -errno;
  for (;;) {
    if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
      break;
    if (errno == EINPROGRESS) { /* not done by AF_UNIX today; handled anyway */
      int err = 0;
      socklen_t el = sizeof(err);
      uint64_t now = wire__now_ns();
      rc = wire__wait_fd(fd, POLLOUT, now >= deadline ? 0 : (int)((deadline - now) / 1000000u));
      if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
        rc = -errno;
      else if (rc == 0)
        rc = -err;
      break;
    }
    if (errno != EAGAIN && errno != EINTR) {
      rc = -errno;
      break;
    }
    if (wire__now_ns() >= deadline) {
      rc = -ETIMEDOUT;
      break;
    }
    if (errno == EAGAIN) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
  }
  if (rc == 0 && fcntl(fd, F_SETFL, fl) < 0)
    rc = -errno;
  return rc;
}

int wire__gtp_shm_open(wire__gtp **out, const char *path, const uint8_t *hello_frame,
                       size_t hello_len, uint32_t timeout_ms, wire__welcome *w, char *why,
                       size_t why_len) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  struct iovec v = {(void *)hello_frame, hello_len};
  struct stat st;
  shm_gtp *g;
  int rc, got = 0, i;

  *out = NULL;
  if (strlen(path) >= sizeof(sa.sun_path)) {
    snprintf(why, why_len, "socket path longer than %zu bytes", sizeof(sa.sun_path) - 1);
    return -ENAMETOOLONG;
  }
  g = calloc(1, sizeof(*g));
  if (g == NULL)
    return -ENOMEM;
  for (i = 0; i < FD_N; i++)
    g->fds[i] = -1;
  g->base.ops = &shm_ops;
  memcpy(sa.sun_path, path, strlen(path));
  g->sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  rc = g->sock < 0 ? -errno : unix_connect(g->sock, &sa, timeout_ms);
  if (rc) {
    if (rc == -ETIMEDOUT)
      snprintf(why, why_len, "cannot connect to %s: its listen backlog stayed full for %u ms "
               "(tallyd not accepting)", path, timeout_ms);
    else
      snprintf(why, why_len, "cannot connect to %s: %s", path, strerror(-rc));
    goto fail;
  }
  rc = wire__write_all(g->sock, &v, 1, NULL);
  if (rc == 0)
    rc = wire__handshake_read(g->sock, timeout_ms, w, g->fds, FD_N, &got, why, why_len);
  if (rc)
    goto fail;
  if (got != FD_N || w->ring_bytes < 4096 || (w->ring_bytes & (w->ring_bytes - 1)) ||
      w->data_bytes < 4096 || w->data_bytes > ((uint64_t)1 << 40) ||
      fstat(g->fds[FD_MEM], &st) < 0 ||
      (uint64_t)st.st_size < wire__shm_size(w->ring_bytes, w->data_bytes)) {
    snprintf(why, why_len, "daemon's shared-memory setup is unusable (%d fds, ring %u, data %llu)",
             got, w->ring_bytes, (unsigned long long)w->data_bytes);
    rc = -EPROTO;
    goto fail;
  }
  g->size = wire__shm_size(w->ring_bytes, w->data_bytes);
  g->mem = mmap(NULL, g->size, PROT_READ | PROT_WRITE, MAP_SHARED, g->fds[FD_MEM], 0);
  if (g->mem == MAP_FAILED) {
    g->mem = NULL;
    rc = -errno;
    snprintf(why, why_len, "cannot map the shared region: %s", strerror(-rc));
    goto fail;
  }
  if (wire__shm_check(g->mem, g->size, w->ring_bytes, w->data_bytes)) {
    snprintf(why, why_len, "shared region header does not match the WELCOME");
    rc = -EPROTO;
    goto fail;
  }
  wire__shm_bind(g->mem, w->ring_bytes, w->data_bytes, &g->g2d, &g->d2g);
  g->g2d.copy = shm_copy;
  g->g2d.copy_ctx = g;
  g->base.spin_ns = (uint64_t)wire__spin_us(WIRE__SHM_SPIN_SMALL_US) * 1000u;
  *out = &g->base;
  return 0;
fail:
  shm_close(&g->base);
  return rc;
}
