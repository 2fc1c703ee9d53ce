/* guest-tcp.c: the guest's TCP transport (tcp://host:port).
 *
 * TCP_NODELAY so a small call leaves at once as one segment (the tx plan hands
 * header and payload to one sendmsg); posts are already batched above us, so
 * Nagle would only add latency.  Reads go into a 256 KiB buffer the
 * assembler reads in place; peek/consume let it keep a partial frame there
 * until the rest arrives.  The daemon's death shows as EOF or ECONNRESET, and
 * a silent network partition as missing heartbeats (guest.c).
 */
#include "wire/wire-int.h"
#include "wire/shm.h" /* wire__spin_us */

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Receive buffer: one TCP chunk, so a whole chunk can be read in place. */
#define TCP_RBUF (WIRE__TCP_CHUNK + WIRE__HDR_LEN)

typedef struct tcp_gtp {
  wire__gtp base;
  int fd;
  uint8_t *buf;       /* TCP_RBUF bytes */
  size_t off, end;    /* unconsumed bytes are buf[off..end) */
  atomic_bool big_tx; /* the last send was bulk: its reply is far off */
} tcp_gtp;

/* Sends above this are bulk: polling for their reply would only contend
 * with the daemon's reading on the loopback socket (with the spin,
 * wire-bench's 1 MiB TCP sends fell to 0.60-0.68x the raw copy on the GPU
 * host, against 0.85-0.88x before TCP spun at all; tests/bench/RESULTS.md). */
#define TCP_SPIN_TX_MAX ((size_t)64 << 10)

static int tcp_send(wire__gtp *t, const struct iovec *iov, int cnt) {
  atomic_store_explicit(&((tcp_gtp *)t)->big_tx, wire__iov_len(iov, cnt) > TCP_SPIN_TX_MAX,
                        memory_order_relaxed);
  return wire__write_all(((tcp_gtp *)t)->fd, iov, cnt, t);
}

static int tcp_peek(wire__gtp *t, const uint8_t **p, size_t *n, int timeout_ms) {
  tcp_gtp *g = (tcp_gtp *)t;
  ssize_t r;

  if (g->off < g->end) {
    *p = g->buf + g->off;
    *n = g->end - g->off;
    return 0;
  }
  g->off = g->end = 0;
  /* Spin first (hosts with idle cores): non-blocking reads until the reply
   * is there or the budget is spent, which saves this thread's wakeup.
   * Then one syscall per reply: a blocking recv bounded by SO_RCVTIMEO (the
   * reader's slice, set at open) instead of poll + recv.  timeout 0 (the
   * background thread's look) does not block at all. */
  bool nothing = true; /* no bytes and no error yet */
  if (timeout_ms != 0 && g->base.spin_ns != 0 &&
      !atomic_load_explicit(&g->big_tx, memory_order_relaxed)) {
    uint64_t start = wire__now_ns();
    unsigned spins = 0;
    do {
      r = recv(g->fd, g->buf, TCP_RBUF, MSG_DONTWAIT);
      nothing = r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
      /* A daemon thread on this CPU runs at once.  Every other read: if
       * the kernel put this thread on the CPU of tallyd's polling loop
       * (after the application slept), the loop reads our request only
       * while we yield.  With one yield per 16 reads (~10 us) tallyd's
       * loop read an open-loop request 7-11 us after it was written
       * (forward-bench --hops on the H200), about one such interval,
       * against 2 us in launch + sync, where the application never
       * sleeps; the cause is inferred, not measured. */
      if ((++spins & 1) == 0)
        sched_yield();
    } while (nothing && wire__now_ns() - start < g->base.spin_ns);
  }
  if (nothing)
    do
      r = recv(g->fd, g->buf, TCP_RBUF, timeout_ms == 0 ? MSG_DONTWAIT : 0);
    while (r < 0 && errno == EINTR);
  if (r == 0)
    return WIRE_ECLOSED;
  if (r < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return -ETIMEDOUT;
    return errno == ECONNRESET ? -ECONNRESET : -errno;
  }
  g->end = (size_t)r;
  *p = g->buf;
  *n = g->end;
  return 0;
}

static void tcp_consume(wire__gtp *t, size_t n) {
  tcp_gtp *g = (tcp_gtp *)t;
  g->off += n;
}

static void tcp_close(wire__gtp *t) {
  tcp_gtp *g = (tcp_gtp *)t;

  if (g == NULL)
    return;
  if (g->fd >= 0)
    close(g->fd);
  free(g->buf);
  free(g);
}

/* wire_conn_forget: no shutdown(), which would end the parent's connection. */
static void tcp_forget(wire__gtp *t) {
  tcp_gtp *g = (tcp_gtp *)t;

  if (g->fd >= 0)
    close(g->fd);
  g->fd = -1;
}

static const struct wire__gtp_ops tcp_ops = {
    .name = "tcp",
    .send = tcp_send,
    .peek = tcp_peek,
    .consume = tcp_consume,
    .close = tcp_close,
    .forget = tcp_forget,
};

/* Splits "host:port" or "[v6]:port" into host and port. */
static int split_hostport(const char *s, char *host, size_t hlen, char *port, size_t plen) {
  const char *colon;
  size_t n;

  if (s[0] == '[') {
    const char *rb = strchr(s, ']');
    if (rb == NULL || rb[1] != ':')
      return -EINVAL;
    n = (size_t)(rb - s - 1);
    colon = rb + 1;
    s++;
  } else {
    colon = strrchr(s, ':');
    if (colon == NULL)
      return -EINVAL;
    n = (size_t)(colon - s);
  }
  if (n == 0 || n >= hlen || strlen(colon + 1) == 0 || strlen(colon + 1) >= plen)
    return -EINVAL;
  memcpy(host, s, n);
  host[n] = 0;
  snprintf(port, plen, "%s", colon + 1);
  return 0;
}

static int connect_timeout(int fd, const struct sockaddr *sa, socklen_t len, uint32_t timeout_ms) {
  int fl = fcntl(fd, F_GETFL), err = 0, rc;
  socklen_t el = sizeof(err);

  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
    return -errno;
  if (connect(fd, sa, len) < 0 && errno != EINPROGRESS)
    return -errno;
  rc = wire__wait_fd(fd, POLLOUT, (int)timeout_ms);
  if (rc)
    return rc;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
    return -errno;
  if (err)
    return -err;
  return 0;
}

int wire__gtp_tcp_busy_poll(wire__gtp *t, uint32_t us) {
  int v = us > INT32_MAX ? INT32_MAX : (int)us;
  if (setsockopt(((tcp_gtp *)t)->fd, SOL_SOCKET, SO_BUSY_POLL, &v, sizeof(v)) < 0)
    return -errno;
  return 0;
}

int wire__gtp_tcp_open(wire__gtp **out, const char *hostport, const uint8_t *hello_frame,
                       size_t hello_len, uint32_t timeout_ms, wire__welcome *welcome, char *why,
                       size_t why_len) {
  char host[256], port[16];
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL, *a;
  tcp_gtp *g = NULL;
  struct iovec v = {(void *)hello_frame, hello_len};
  int one = 1, rc, fd = -1, gai, nfd = 0;

  *out = NULL;
  if (split_hostport(hostport, host, sizeof(host), port, sizeof(port))) {
    snprintf(why, why_len, "bad TCP address \"%s\" (expected host:port or [v6]:port)", hostport);
    return -EINVAL;
  }
  gai = getaddrinfo(host, port, &hints, &ai);
  if (gai != 0) {
    snprintf(why, why_len, "cannot resolve %s: %s", host, gai_strerror(gai));
    return -EHOSTUNREACH;
  }
  rc = -ECONNREFUSED;
  for (a = ai; a != NULL; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      rc = -errno;
      continue;
    }
    rc = connect_timeout(fd, a->ai_addr, a->ai_addrlen, timeout_ms);
    if (rc == 0)
      break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(ai);
  if (fd < 0) {
    snprintf(why, why_len, "cannot connect to %s: %s", hostport, wire_strerror(rc));
    return rc;
  }
  /* Blocking from here on: every wait below is a poll with a timeout. */
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
    rc = -errno;
    goto fail;
  }
  rc = wire__write_all(fd, &v, 1, NULL);
  if (rc == 0)
    rc = wire__handshake_read(fd, timeout_ms, welcome, NULL, 0, &nfd, why, why_len);
  if (rc)
    goto fail;
  {
    /* A reader blocks at most this long per recv, then rechecks liveness
     * (guest.c reads in slices of at most 100 ms). */
    struct timeval tv = {0, 100000};
    /* Sends too: a daemon that stops reading must not block a sender
     * forever (write_all then checks the connection's error). */
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
      rc = -errno;
      goto fail;
    }
  }
  g = calloc(1, sizeof(*g));
  if (g == NULL || (g->buf = malloc(TCP_RBUF)) == NULL) {
    free(g);
    rc = -ENOMEM;
    goto fail;
  }
  g->base.ops = &tcp_ops;
  g->fd = fd;
  /* Only where the auto rule says so: on a small host a spinning guest
   * steals the CPU the daemon needs to answer. */
  g->base.spin_ns = (uint64_t)wire__spin_us(0) * 1000u;
  *out = &g->base;
  return 0;
fail:
  close(fd);
  return rc;
}
