/* guest-rdma.c: the guest's RDMA verbs transport ("rdma://host:port").
 *
 * rdma_cm resolves the address and route and connects a reliable-connection
 * QP (rdma.h); after that the HELLO goes out as the first SEND and the
 * WELCOME or REFUSE comes back as the first RECV, then frames flow exactly as
 * on TCP, one per SEND.  Blocking waits poll the completion channel's fd with
 * a timeout together with the rdma_cm event channel, whose DISCONNECTED event
 * is how the daemon's death or close shows up.  Sends and receives use
 * separate CQs, so the sending thread (tx lock) and the reading thread (rx
 * role) never take each other's completions.  Built only with rdma-core.
 */
#include "wire/rdma.h"

#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct rdma_gtp {
  wire__gtp base;
  struct rdma_event_channel *ec;
  struct rdma_cm_id *id;
  wire__rdma r;
  int cur;          /* receive buffer being consumed, -1 none */
  uint32_t cur_off; /* bytes of it consumed */
  uint32_t cur_len; /* bytes in it */
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
  }
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
  free(g);
}

static const struct wire__gtp_ops rdma_ops = {
    .name = "rdma",
    .send = rdma_send,
    .peek = rdma_peek,
    .consume = rdma_consume,
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
