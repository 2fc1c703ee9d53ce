/* guest-rdma.c: the guest's RDMA verbs transport ("rdma://host:port").
 *
 * rdma_cm resolves the address and route and connects a reliable-connection
 * QP (rdma.h); after that the HELLO goes out as the first SEND and the
 * WELCOME or REFUSE comes back as the first RECV, then frames flow exactly as
 * on TCP, one per SEND.  Blocking waits poll the completion channel's fd with
 * a timeout together with the rdma_cm event channel, whose DISCONNECTED event
 * is how the daemon's death or close shows up.  Sends and receives use
 * separate CQs, so the sending thread (tx lock) and the reading thread (rx
 * role) never take each other's receive completions; both post to the send
 * queue (the reader posts release WRITEs), so rdma.c serialises posting and
 * reaping with `mu`.  Bulk (WIRE__CAP_RDMA_BULK granted): right after the
 * WELCOME the guest registers its landing region and sends its REGION; the
 * daemon's REGION arrives as a SEND of its own and is taken here, never
 * shown to guest.c.  From then on messages of >= WIRE__RDMA_BULK_MIN bytes
 * are RDMA-WRITTEN into the daemon's region (rbulk.c plans them; a full
 * region waits up to 2 ms, then falls back to SENDs), and replies the daemon
 * WROTE into ours are resolved in place and released once consumed.
 * Built only with rdma-core; never run on a device (none here).
 */
#include "wire/rdma.h"

#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct rdma_gtp {
  wire__gtp base;
  struct rdma_event_channel *ec;
  struct rdma_cm_id *id;
  wire__rdma r;
  int cur;            /* receive buffer being consumed, -1 none */
  uint32_t cur_off;   /* bytes of it consumed */
  uint32_t cur_len;   /* bytes in it */
  pthread_mutex_t mu; /* r.mu: send queue and send CQ (sender and reader) */
  bool bulk_cap;      /* WIRE__CAP_RDMA_BULK granted: REGION frames expected */
  uint8_t version;    /* chosen in the handshake */
} rdma_gtp;

/* Waits for fd or a cm event: 0 = fd ready, WIRE_ECLOSED = disconnected. */
static int wait2(rdma_gtp *g, int fd, int timeout_ms) {
  struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = g->ec->fd, .events = POLLIN}};
  int r;

  do
    r = poll(p, 2, timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r < 0)
    return -errno;
  if (r == 0)
    return -ETIMEDOUT;
  if (p[1].revents) {
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(g->ec, &ev) == 0) {
      int type = ev->event;
      rdma_ack_cm_event(ev);
      if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL)
        return WIRE_ECLOSED;
    }
  }
  return 0;
}

static int rdma_send(wire__gtp *t, const struct iovec *iov, int cnt) {
  rdma_gtp *g = (rdma_gtp *)t;
  int rc;

  for (;;) {
    if ((rc = wire__rdma_reap_sends(&g->r)) < 0)
      return rc;
    rc = wire__rdma_send_frame(&g->r, iov, cnt);
    if (rc != -EAGAIN)
      return rc;
    rc = wait2(g, g->r.sch->fd, 100);
    if (rc < 0 && rc != -ETIMEDOUT)
      return rc;
    if (rc == -ETIMEDOUT && t->check && (rc = t->check(t->check_ctx)) != 0)
      return rc; /* declared dead by its silence */
    wire__rdma_rearm(g->r.sch);
  }
}

static int rdma_peek(wire__gtp *t, const uint8_t **p, size_t *n, int timeout_ms) {
  rdma_gtp *g = (rdma_gtp *)t;
  int rc, idx;
  uint32_t len;

  if (g->cur >= 0 && g->cur_off < g->cur_len) {
    *p = g->r.rbuf + (size_t)g->cur * WIRE__RDMA_BUF + g->cur_off;
    *n = g->cur_len - g->cur_off;
    return 0;
  }
  for (;;) {
    rc = wire__rdma_poll_recv(&g->r, &idx, &len);
    if (rc == 0)
      break;
    if (rc != -EAGAIN)
      return rc;
    if (timeout_ms == 0)
      return -ETIMEDOUT;
    rc = wait2(g, g->r.rch->fd, timeout_ms);
    if (rc)
      return rc;
    wire__rdma_rearm(g->r.rch); /* then poll again: no completion is missed */
  }
  if (len == 0) { /* an empty SEND carries nothing: recycle it */
    wire__rdma_post_recv(&g->r, idx);
    return -EAGAIN;
  }
  if (g->bulk_cap) {
    const uint8_t *b = g->r.rbuf + (size_t)idx * WIRE__RDMA_BUF;
    wire__rbulk_region reg;
    char why[160];
    rc = wire__rbulk_classify(b, len, g->version, &reg, why, sizeof(why));
    if (rc == 1) { /* the daemon's REGION: the transport's, not guest.c's */
      rc = wire__rdma_bulk_peer(&g->r, &reg);
      wire__rdma_post_recv(&g->r, idx);
      return rc ? rc : -EAGAIN;
    }
    if (rc < 0) {
      wire__rdma_post_recv(&g->r, idx);
      return rc;
    }
  }
  g->cur = idx;
  g->cur_off = 0;
  g->cur_len = len;
  *p = g->r.rbuf + (size_t)idx * WIRE__RDMA_BUF;
  *n = len;
  return 0;
}

static void rdma_consume(wire__gtp *t, size_t n) {
  rdma_gtp *g = (rdma_gtp *)t;

  g->cur_off += (uint32_t)n;
  if (g->cur >= 0 && g->cur_off >= g->cur_len) {
    wire__rdma_post_recv(&g->r, g->cur);
    g->cur = -1;
    /* guest.c copied any reply it resolved in our landing region before
     * consuming: hand the span back.  A failure means a broken queue pair,
     * which the next send or receive reports. */
    (void)wire__rdma_bulk_release(&g->r);
  }
}

static int emit_g(void *arg, const struct iovec *iov, int cnt) {
  return rdma_send(arg, iov, cnt);
}

static int bulk_write_g(void *arg, uint64_t pos, const struct iovec *iov, int cnt, size_t off,
                        size_t n) {
  return wire__rdma_bulk_write(&((rdma_gtp *)arg)->r, pos, iov, cnt, off, n);
}

static uint64_t bulk_released_g(void *arg) {
  return wire__rdma_bulk_released(&((rdma_gtp *)arg)->r);
}

/* The daemon's release is a one-sided WRITE into our memory: no completion
 * or event tells us about it, so a sender facing a full region looks again
 * every 20 us (a quarter of a 100 Gb/s D/4 piece's transfer time is ~170 us;
 * 20 us keeps the added latency small and the CPU mostly idle), for at most
 * WIRE__RBULK_ROOM_WAIT_NS before rbulk.c falls back to SENDs. */
static int bulk_wait_g(void *arg) {
  struct timespec ts = {0, 20000};

  (void)arg;
  nanosleep(&ts, NULL);
  return 0;
}

static const wire__rbulk_ops gbulk_ops = {bulk_write_g, bulk_released_g, bulk_wait_g};

/* Every message: BATCH as one frame (guest.c passes the record count as id,
 * as for shm), large ones through the daemon's region when it announced
 * one, the rest as frames over SENDs (zstd when negotiated and it pays). */
static int rdma_send_msg(wire__gtp *t, uint8_t version, uint8_t kind, uint64_t id,
                         const struct iovec *iov, int cnt, size_t len) {
  rdma_gtp *g = (rdma_gtp *)t;
  wire__zstate *z = t->zstd ? &t->zs : NULL;

  if (kind == WIRE__K_BATCH)
    return wire__emit_frame(version, kind, 0, 0, (uint32_t)id, iov, cnt, 0, len, emit_g, g);
  if (!wire__rdma_bulk_ready(&g->r))
    return wire__send_frames(version, kind, id, iov, cnt, len, WIRE__TCP_CHUNK, z, emit_g, g);
  return wire__rbulk_send(&g->r.bulk->tx, &gbulk_ops, version, kind, id, iov, cnt, len, z, emit_g,
                          g);
}

static const uint8_t *rdma_resolve(wire__gtp *t, uint64_t pos, uint32_t len) {
  return wire__rdma_bulk_resolve(&((rdma_gtp *)t)->r, pos, len);
}

static void rdma_close(wire__gtp *t) {
  rdma_gtp *g = (rdma_gtp *)t;

  if (g == NULL)
    return;
  if (g->id) {
    rdma_disconnect(g->id);
    wire__rdma_teardown(&g->r);
    rdma_destroy_id(g->id);
  }
  if (g->ec)
    rdma_destroy_event_channel(g->ec);
  pthread_mutex_destroy(&g->mu);
  free(g);
}

static const struct wire__gtp_ops rdma_ops = {
    .name = "rdma",
    .send = rdma_send,
    .send_msg = rdma_send_msg,
    .peek = rdma_peek,
    .consume = rdma_consume,
    .resolve = rdma_resolve,
    .close = rdma_close,
};

static int wait_cm(rdma_gtp *g, enum rdma_cm_event_type want, uint32_t timeout_ms) {
  struct pollfd p = {.fd = g->ec->fd, .events = POLLIN};
  struct rdma_cm_event *ev;
  int type, r;

  do
    r = poll(&p, 1, (int)timeout_ms);
  while (r < 0 && errno == EINTR);
  if (r <= 0)
    return r == 0 ? -ETIMEDOUT : -errno;
  if (rdma_get_cm_event(g->ec, &ev) != 0)
    return -errno;
  type = ev->event;
  rdma_ack_cm_event(ev);
  if (type == (int)want)
    return 0;
  return type == RDMA_CM_EVENT_REJECTED ? -ECONNREFUSED : -EHOSTUNREACH;
}

static int split(const char *s, char *host, size_t hl, char *port, size_t pl) {
  const char *c = strrchr(s, ':');
  size_t n;

  if (s[0] == '[') {
    const char *rb = strchr(s, ']');
    if (rb == NULL || rb[1] != ':')
      return -EINVAL;
    s++;
    c = rb + 1;
    n = (size_t)(rb - s);
  } else {
    if (c == NULL)
      return -EINVAL;
    n = (size_t)(c - s);
  }
  if (n == 0 || n >= hl || strlen(c + 1) == 0 || strlen(c + 1) >= pl)
    return -EINVAL;
  memcpy(host, s, n);
  host[n] = 0;
  snprintf(port, pl, "%s", c + 1);
  return 0;
}

int wire__gtp_rdma_open(wire__gtp **out, const char *hostport, const uint8_t *hello_frame,
                        size_t hello_len, uint32_t timeout_ms, wire__welcome *w, char *why,
                        size_t why_len) {
  char host[256], port[16];
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *ai = NULL;
  struct ibv_device **devs;
  struct rdma_conn_param cp = wire__rdma_conn_param();
  struct iovec v = {(void *)hello_frame, hello_len};
  rdma_gtp *g;
  int ndev = 0, rc;

  *out = NULL;
  devs = ibv_get_device_list(&ndev);
  if (devs)
    ibv_free_device_list(devs);
  if (ndev == 0) {
    snprintf(why, why_len, "no RDMA device on this host");
    return -ENODEV;
  }
  if (split(hostport, host, sizeof(host), port, sizeof(port)) ||
      getaddrinfo(host, port, &hints, &ai) != 0) {
    snprintf(why, why_len, "bad or unresolvable RDMA address \"%s\"", hostport);
    return -EINVAL;
  }
  g = calloc(1, sizeof(*g));
  if (g == NULL) {
    freeaddrinfo(ai);
    return -ENOMEM;
  }
  g->base.ops = &rdma_ops;
  g->cur = -1;
  pthread_mutex_init(&g->mu, NULL);
  g->ec = rdma_create_event_channel();
  if (g->ec == NULL || rdma_create_id(g->ec, &g->id, g, RDMA_PS_TCP) != 0) {
    rc = -errno;
    goto fail;
  }
  if (rdma_resolve_addr(g->id, NULL, ai->ai_addr, (int)timeout_ms) != 0) {
    rc = -errno;
    goto fail;
  }
  if ((rc = wait_cm(g, RDMA_CM_EVENT_ADDR_RESOLVED, timeout_ms)) != 0)
    goto fail;
  if (rdma_resolve_route(g->id, (int)timeout_ms) != 0) {
    rc = -errno;
    goto fail;
  }
  if ((rc = wait_cm(g, RDMA_CM_EVENT_ROUTE_RESOLVED, timeout_ms)) != 0)
    goto fail;
  if ((rc = wire__rdma_setup(&g->r, g->id)) != 0)
    goto fail;
  g->r.mu = &g->mu;
  if (rdma_connect(g->id, &cp) != 0) {
    rc = -errno;
    goto fail;
  }
  if ((rc = wait_cm(g, RDMA_CM_EVENT_ESTABLISHED, timeout_ms)) != 0)
    goto fail;
  if ((rc = rdma_send(&g->base, &v, 1)) != 0)
    goto fail;
  {
    const uint8_t *p;
    size_t n;
    wire__hdr h;
    int32_t st;
    rc = rdma_peek(&g->base, &p, &n, (int)timeout_ms);
    if (rc == 0)
      rc = n >= WIRE__HDR_LEN ? wire__hdr_decode(p, 0, &h, why, why_len) : -EPROTO;
    if (rc == 0 && (h.len > WIRE__HELLO_MAX || n != WIRE__HDR_LEN + h.len))
      rc = -EPROTO;
    if (rc == 0 && h.kind == WIRE__K_REFUSE) {
      rc = wire__status_decode(p + WIRE__HDR_LEN, h.len, &st, why, why_len);
      if (rc == 0)
        rc = st < 0 ? st : WIRE_EREFUSED;
    } else if (rc == 0 && h.kind == WIRE__K_WELCOME) {
      rc = wire__welcome_decode(p + WIRE__HDR_LEN, h.len, w, why, why_len);
    } else if (rc == 0) {
      rc = -EPROTO;
    }
    rdma_consume(&g->base, n);
  }
  if (rc == 0 && (w->caps & WIRE__CAP_RDMA_BULK)) {
    /* Our landing region, announced before any other frame.  Without it
     * (registration failed: pinned-memory limit?) the daemon replies with
     * SENDs only; we still take its REGION and may write to it. */
    g->bulk_cap = true;
    g->version = (uint8_t)w->version;
    if (wire__rdma_bulk_setup(&g->r) == 0) {
      uint8_t f[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN];
      struct iovec fv = {f, sizeof(f)};
      wire__rbulk_region reg;
      wire__rdma_bulk_region(&g->r, &reg);
      wire__rbulk_region_frame(f, g->version, &reg);
      rc = rdma_send(&g->base, &fv, 1);
    }
  }
  if (rc)
    goto fail;
  freeaddrinfo(ai);
  *out = &g->base;
  return 0;
fail:
  if (why[0] == 0)
    snprintf(why, why_len, "RDMA connect to %s failed: %s", hostport, wire_strerror(rc));
  freeaddrinfo(ai);
  rdma_close(&g->base);
  return rc;
}
