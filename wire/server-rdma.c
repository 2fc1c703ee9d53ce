/* server-rdma.c: the daemon's RDMA verbs listener and per-tenant transport.
 *
 * The rdma_cm event channel's fd sits in a uv_poll: a CONNECT_REQUEST gets a
 * QP and buffers (rdma.h), a tenant (token checked like TCP) and an accept;
 * DISCONNECTED is the guest's death or close.  Each tenant's receive and
 * send completion channels sit in uv_polls too: receive completions are fed
 * to wire__tenant_feed in place (a paused tenant keeps its buffer until
 * resume), send completions free send buffers and push the out queue, which
 * holds copies of frames that found every send buffer in flight (bounded by
 * WIRE__OUT_MAX).  The listener outlives its tenants (their cm ids belong to
 * its event channel): it is freed when the last of them is gone.
 * Bulk (WIRE__CAP_RDMA_BULK granted, PROTOCOL.md section 12): with the
 * WELCOME the daemon registers this tenant's landing region (the only
 * memory this guest may WRITE, remote write only) and sends its REGION; the
 * guest's REGION is taken here before the assembler.  Descriptors the guest
 * sends are resolved inside that region only (rbulk.c bounds checks) and
 * the span is released once the payload has been fed (after resume when
 * the tenant paused).  Replies of >= WIRE__RDMA_BULK_MIN bytes are WRITTEN
 * into the guest's region when nothing is queued and it has room, else sent
 * as SENDs: the loop thread never waits.  A bad REGION, descriptor or
 * release word, or a WRITE the guest's NIC refuses, closes this tenant only.
 * Never run on a device (none on the development or GPU host).
 */
#include "wire/rdma.h"

#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct rdma_listener {
  uv_poll_t poll;
  wire_server_t *s;
  struct rdma_event_channel *ec;
  struct rdma_cm_id *id;
  int refs; /* 1 while listening + 1 per tenant (loop thread) */
} rdma_listener;

typedef struct frame_q {
  struct frame_q *next;
  size_t len;
  uint8_t bytes[];
} frame_q;

typedef struct rdma_stp {
  uv_poll_t spoll, rpoll;
  int handles;
  rdma_listener *l;
  wire_tenant_t *t;
  struct rdma_cm_id *id;
  wire__rdma r;
  bool ready; /* resources made */
  int held;   /* paused: receive buffer index kept, -1 none */
  uint32_t held_off, held_len;
  frame_q *qh, *qt;
  size_t qbytes;
  wire__zstate zs; /* compression memory (loop thread) */
  bool bulk_cap;   /* WIRE__CAP_RDMA_BULK granted: a REGION may arrive */
} rdma_stp;

static void listener_unref(rdma_listener *l);

/* ----------------------------------------------------------------- sending */

static int push_queue(rdma_stp *c) {
  int rc;

  if ((rc = wire__rdma_reap_sends(&c->r)) < 0)
    return rc;
  while (c->qh) {
    frame_q *f = c->qh;
    struct iovec v = {f->bytes, f->len};
    rc = wire__rdma_send_frame(&c->r, &v, 1);
    if (rc == -EAGAIN)
      return 0; /* a send completion will call us again */
    if (rc)
      return rc;
    c->qh = f->next;
    if (c->qh == NULL)
      c->qt = NULL;
    c->qbytes -= f->len;
    free(f);
  }
  return 0;
}

static int emit_frame(void *arg, const struct iovec *iov, int cnt) {
  rdma_stp *c = arg;
  size_t len = wire__iov_len(iov, cnt);
  frame_q *f;
  int rc;

  if (c->qh == NULL) {
    /* A failed completion found here (a bulk WRITE the guest's NIC
     * refused) fails this send, and the caller closes the tenant. */
    if ((rc = wire__rdma_reap_sends(&c->r)) < 0)
      return rc;
    rc = wire__rdma_send_frame(&c->r, iov, cnt);
    if (rc != -EAGAIN)
      return rc;
  }
  if (c->qbytes + len > WIRE__OUT_MAX)
    return -ENOBUFS;
  f = malloc(sizeof(*f) + len);
  if (f == NULL)
    return -ENOMEM;
  f->next = NULL;
  f->len = len;
  wire__iov_copy_out(f->bytes, iov, cnt, 0, len);
  if (c->qt)
    c->qt->next = f;
  else
    c->qh = f;
  c->qt = f;
  c->qbytes += len;
  return 0;
}

static int bulk_write_d(void *arg, uint64_t pos, const struct iovec *iov, int cnt, size_t off,
                        size_t n) {
  return wire__rdma_bulk_write(&((rdma_stp *)arg)->r, pos, iov, cnt, off, n);
}

static uint64_t bulk_released_d(void *arg) {
  return wire__rdma_bulk_released(&((rdma_stp *)arg)->r);
}

/* No wait hook: the loop thread never waits for the guest to release room;
 * a piece that does not fit goes as SENDs. */
static const wire__rbulk_ops dbulk_ops = {bulk_write_d, bulk_released_d, NULL};

static int rdma_send(wire_tenant_t *t, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
                     size_t len) {
  rdma_stp *c = wire__tenant_tp(t);
  const wire_tenant_info_t *info = wire_tenant_info(t);
  uint8_t version = (uint8_t)(info->version ? info->version : 1);
  wire__zstate *z = (info->caps & WIRE_CAP_ZSTD) ? &c->zs : NULL;

  /* WRITE only when nothing waits in the out queue: a queued frame must not
   * be overtaken, and it bounds the WRITEs posted ahead of their
   * descriptors (rdma.h, WIRE__RDMA_SQ_DEPTH). */
  if (wire__rdma_bulk_ready(&c->r) && c->qh == NULL)
    return wire__rbulk_send(&c->r.bulk->tx, &dbulk_ops, version, kind, id, iov, cnt, len, z,
                            emit_frame, c);
  return wire__send_frames(version, kind, id, iov, cnt, len, WIRE__TCP_CHUNK, z, emit_frame, c);
}

static int rdma_welcome(wire_tenant_t *t, const void *frame, size_t len) {
  rdma_stp *c = wire__tenant_tp(t);
  const uint8_t *f = frame;
  struct iovec v = {(void *)frame, len};
  uint8_t rf[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN];
  struct iovec rv = {rf, sizeof(rf)};
  wire__rbulk_region reg;
  int rc;

  if ((rc = emit_frame(c, &v, 1)) != 0)
    return rc;
  /* server.c built this WELCOME (proto.h table): version at payload offset
   * 0, capabilities granted at 4.  A REFUSE never comes here. */
  if (len < WIRE__HDR_LEN + WIRE__WELCOME_LEN ||
      !(wire_le_rd32(f + WIRE__HDR_LEN + 4) & WIRE__CAP_RDMA_BULK))
    return 0;
  c->bulk_cap = true;
  /* Registered only now, for an authenticated tenant: a flood of connect
   * requests pins no landing regions.  Failure (pinned-memory limit) only
   * means this guest gets no REGION and sends its bulk as SENDs. */
  if (wire__rdma_bulk_setup(&c->r) != 0)
    return 0;
  wire__tenant_set_resolve(t, wire__rdma_bulk_resolve, &c->r);
  wire__rdma_bulk_region(&c->r, &reg);
  wire__rbulk_region_frame(rf, (uint8_t)(f[WIRE__HDR_LEN] | f[WIRE__HDR_LEN + 1] << 8), &reg);
  return emit_frame(c, &rv, 1);
}

static void on_send_done(uv_poll_t *p, int status, int events) {
  rdma_stp *c = p->data;

  wire__rdma_rearm(c->r.sch);
  if (push_queue(c) < 0)
    wire__tenant_lost(c->t, -ECONNRESET, "RDMA send failed (queue pair broken)");
}

/* --------------------------------------------------------------- receiving */

/* Hands the landing-region spans fed so far back to the guest (the payload
 * was delivered and the tenant did not pause on it).  0, or <0 with the
 * tenant closed. */
static int release(rdma_stp *c) {
  /* The release reaps send completions too: frames queued behind buffers
   * it freed go now, as on_send_done would send them. */
  if (wire__rdma_bulk_release(&c->r) != 0) {
    wire__tenant_lost(c->t, -ECONNRESET, "RDMA release write failed (queue pair broken)");
    return -ECONNRESET;
  }
  if (c->qh != NULL && push_queue(c) < 0) {
    wire__tenant_lost(c->t, -ECONNRESET, "RDMA send failed (queue pair broken)");
    return -ECONNRESET;
  }
  return 0;
}

/* Feeds receive buffers until none is left, the tenant pauses or closes. */
static void drain(rdma_stp *c) {
  for (;;) {
    int idx, rc;
    uint32_t len;
    size_t used;

    if (c->held >= 0)
      return;
    rc = wire__rdma_poll_recv(&c->r, &idx, &len);
    if (rc == -EAGAIN)
      return;
    if (rc) {
      wire__tenant_lost(c->t, -ECONNRESET, "RDMA receive failed (queue pair broken)");
      return;
    }
    if (c->bulk_cap) {
      wire__rbulk_region reg;
      char why[200];
      rc = wire__rbulk_classify(c->r.rbuf + (size_t)idx * WIRE__RDMA_BUF, len,
                                (uint8_t)wire_tenant_info(c->t)->version, &reg, why, sizeof(why));
      if (rc == 1 && wire__rdma_bulk_peer(&c->r, &reg) != 0) {
        snprintf(why, sizeof(why), "second REGION frame from the guest");
        rc = -EPROTO;
      }
      if (rc < 0) {
        wire__tenant_lost(c->t, -EPROTO, why);
        return;
      }
      if (rc == 1) {
        wire__rdma_post_recv(&c->r, idx);
        continue;
      }
    }
    rc = wire__tenant_feed(c->t, c->r.rbuf + (size_t)idx * WIRE__RDMA_BUF, len, &used);
    if (rc < 0)
      return;
    if (rc == 1) {
      c->held = idx;
      c->held_off = (uint32_t)used;
      c->held_len = len;
      return;
    }
    wire__rdma_post_recv(&c->r, idx);
    if (release(c) != 0)
      return;
  }
}

static void on_recv(uv_poll_t *p, int status, int events) {
  rdma_stp *c = p->data;

  wire__rdma_rearm(c->r.rch);
  drain(c);
}

static void rdma_resume(wire_tenant_t *t) {
  rdma_stp *c = wire__tenant_tp(t);
  uint8_t *b;
  size_t used;
  int rc;

  if (c->held < 0)
    return;
  b = c->r.rbuf + (size_t)c->held * WIRE__RDMA_BUF;
  rc = wire__tenant_feed(t, b + c->held_off, c->held_len - c->held_off, &used);
  if (rc < 0)
    return;
  c->held_off += (uint32_t)used;
  if (rc == 1)
    return;
  wire__rdma_post_recv(&c->r, c->held);
  c->held = -1;
  if (release(c) != 0)
    return;
  drain(c);
}

/* ---------------------------------------------------------------- lifetime */

typedef struct gone {
  wire__rdma r;
  struct rdma_cm_id *id;
  rdma_listener *l;
} gone;

static void gone_free(void *arg) {
  gone *g = arg;
  wire__rdma_teardown(&g->r);
  rdma_destroy_id(g->id);
  listener_unref(g->l);
  free(g);
}

static void on_closed(uv_handle_t *h) {
  rdma_stp *c = h->data;
  wire_tenant_t *t = c->t;
  gone *g;

  if (--c->handles > 0)
    return;
  while (c->qh) {
    frame_q *f = c->qh;
    c->qh = f->next;
    free(f);
  }
  g = malloc(sizeof(*g));
  if (g == NULL) { /* cannot defer: free now */
    wire__rdma_teardown(&c->r);
    rdma_destroy_id(c->id);
    listener_unref(c->l);
  } else {
    g->r = c->r;
    g->id = c->id;
    g->l = c->l;
    /* A paused payload may live in a receive buffer: keep them until the
     * worker's last unref. */
    wire__tenant_defer(t, gone_free, g);
  }
  free(c);
  wire__tenant_release(t);
}

static void rdma_close(wire_tenant_t *t) {
  rdma_stp *c = wire__tenant_tp(t);

  c->id->context = NULL;
  rdma_disconnect(c->id);
  uv_close((uv_handle_t *)&c->spoll, on_closed);
  uv_close((uv_handle_t *)&c->rpoll, on_closed);
}

static const struct wire__stp_ops rdma_ops = {
    .name = "rdma",
    .welcome = rdma_welcome,
    .send = rdma_send,
    .resume = rdma_resume,
    .close = rdma_close,
};

static void on_connect_request(rdma_listener *l, struct rdma_cm_id *id) {
  struct rdma_conn_param cp = wire__rdma_conn_param();
  uv_loop_t *loop = wire__server_loop(l->s);
  rdma_stp *c = calloc(1, sizeof(*c));
  wire_tenant_info_t *info;
  struct sockaddr *sa;
  char ip[64] = "?";

  if (c == NULL || wire__rdma_setup(&c->r, id) != 0) {
    if (c)
      wire__rdma_teardown(&c->r);
    free(c);
    rdma_reject(id, NULL, 0);
    rdma_destroy_id(id);
    return;
  }
  c->id = id;
  c->l = l;
  c->held = -1;
  c->t = wire__tenant_new(l->s, &rdma_ops, c, true);
  if (c->t == NULL || uv_poll_init(loop, &c->rpoll, c->r.rch->fd) != 0) {
    /* Nothing registered with libuv yet: undo by hand. */
    wire__rdma_teardown(&c->r);
    rdma_reject(id, NULL, 0);
    rdma_destroy_id(id);
    if (c->t)
      wire__tenant_lost(c->t, -ENOMEM, "out of memory accepting an RDMA tenant");
    free(c);
    return;
  }
  uv_poll_init(loop, &c->spoll, c->r.sch->fd);
  c->rpoll.data = c->spoll.data = c;
  c->handles = 2;
  l->refs++;
  id->context = c;
  info = wire__tenant_info_mut(c->t);
  sa = rdma_get_peer_addr(id);
  if (sa && sa->sa_family == AF_INET)
    uv_ip4_name((struct sockaddr_in *)sa, ip, sizeof(ip));
  else if (sa && sa->sa_family == AF_INET6)
    uv_ip6_name((struct sockaddr_in6 *)sa, ip, sizeof(ip));
  snprintf(info->peer, sizeof(info->peer), "rdma %s:%u", ip,
           (unsigned)ntohs(rdma_get_dst_port(id)));
  uv_poll_start(&c->rpoll, UV_READABLE, on_recv);
  uv_poll_start(&c->spoll, UV_READABLE, on_send_done);
  if (rdma_accept(id, &cp) != 0)
    wire__tenant_lost(c->t, -ECONNRESET, "rdma_accept failed");
}

static void on_cm_event(uv_poll_t *p, int status, int events) {
  rdma_listener *l = p->data;
  struct rdma_cm_event *ev;

  while (rdma_get_cm_event(l->ec, &ev) == 0) {
    struct rdma_cm_id *id = ev->id;
    int type = ev->event;
    rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) {
      on_connect_request(l, id);
    } else if (type == RDMA_CM_EVENT_DISCONNECTED || type == RDMA_CM_EVENT_DEVICE_REMOVAL) {
      rdma_stp *c = id->context;
      if (c) /* NULL once we closed it ourselves */
        wire__tenant_lost(c->t, WIRE_ECLOSED, "RDMA peer disconnected (process gone?)");
    }
  }
}

static void on_listener_closed(uv_handle_t *h) {
  listener_unref(h->data);
}

static void listener_unref(rdma_listener *l) {
  if (--l->refs > 0)
    return;
  if (l->id)
    rdma_destroy_id(l->id);
  if (l->ec)
    rdma_destroy_event_channel(l->ec);
  free(l);
}

int wire__rdma_listen(wire_server_t *s, const char *addr, void **out) {
  char host[256], port[16];
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
  const char *c = strrchr(addr, ':');
  rdma_listener *l;
  int rc;

  *out = NULL;
  if (c == NULL || (size_t)(c - addr) >= sizeof(host) || strlen(c + 1) >= sizeof(port))
    return -EINVAL;
  memcpy(host, addr, (size_t)(c - addr));
  host[c - addr] = 0;
  snprintf(port, sizeof(port), "%s", c + 1);
  if (getaddrinfo(host[0] ? host : NULL, port, &hints, &ai) != 0)
    return -EINVAL;
  l = calloc(1, sizeof(*l));
  if (l == NULL) {
    freeaddrinfo(ai);
    return -ENOMEM;
  }
  l->s = s;
  l->refs = 1;
  l->ec = rdma_create_event_channel();
  if (l->ec == NULL || rdma_create_id(l->ec, &l->id, l, RDMA_PS_TCP) != 0 ||
      rdma_bind_addr(l->id, ai->ai_addr) != 0 || rdma_listen(l->id, 128) != 0) {
    rc = errno ? -errno : -ENODEV;
    freeaddrinfo(ai);
    listener_unref(l);
    return rc;
  }
  freeaddrinfo(ai);
  if (fcntl(l->ec->fd, F_SETFL, fcntl(l->ec->fd, F_GETFL) | O_NONBLOCK) < 0 ||
      (rc = uv_poll_init(wire__server_loop(s), &l->poll, l->ec->fd)) != 0) {
    listener_unref(l);
    return -EIO;
  }
  l->poll.data = l;
  uv_poll_start(&l->poll, UV_READABLE, on_cm_event);
  *out = l;
  return 0;
}

void wire__rdma_unlisten(void *p) {
  rdma_listener *l = p;
  uv_close((uv_handle_t *)&l->poll, on_listener_closed);
}
