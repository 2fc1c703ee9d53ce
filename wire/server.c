/* server.c: wire_server and wire_tenant, the daemon side, on a libuv loop.
 *
 * Listeners (server-tcp.c, server-shm.c) make a tenant per connection and
 * feed its bytes here; this file runs the per-tenant state machine:
 *   HELLO   only a HELLO frame (<= WIRE__HELLO_MAX) is accepted; it is
 *           checked (versions, token for network transports), on_connect
 *           decides, and WELCOME or REFUSE goes back;
 *   OPEN    CALL/POST go to on_msg in arrival order; BLOB_HAVE/BLOB_PUT are
 *           answered here through blob_has/blob_put; HEARTBEAT only proves
 *           life; BYE closes with status 0;
 *   CLOSED  on_close has run; the transport closes its handles and then
 *           wire__tenant_release drops the server's reference.
 * Any bad byte closes only that tenant, with -EPROTO/-EMSGSIZE and a reason
 * carrying an escaped sample, and a BYE telling the guest why.
 * Lock story: everything runs on the loop thread except wire_tenant_reply_mt,
 * wire_tenant_resume and ref/unref, which touch only mt_mu-guarded fields
 * (mt queue, closed flag), the tenant's tx_mu-guarded fields (outstanding
 * call ids, tx_closed) and the atomic refcount, and wake the loop with
 * mt_async.  wire_tenant_reply_mt sends directly from the calling thread
 * when the transport can (shm: send_direct, under tx_mu, which tenant_close
 * also takes before closing the transport); otherwise, or when the reply
 * cannot go out whole at once, it queues it for the loop thread as before.
 * One heartbeat timer per server checks every tenant.
 */
#include "wire/wire-int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

enum tenant_state { T_HELLO, T_OPEN, T_CLOSED };

typedef struct mt_item {
  wire_tenant_t *t; /* holds a ref */
  uint64_t id;
  void *buf; /* owned */
  size_t len;
  struct mt_item *next;
} mt_item;

struct wire_tenant {
  wire_server_t *s;
  const struct wire__stp_ops *ops;
  void *tp;                        /* transport state (loop thread) */
  wire_tenant_info_t info;         /* filled by transport (peer) and HELLO */
  void *data;                      /* caller's */
  enum tenant_state state;         /* loop thread */
  bool need_token;                 /* network transport */
  bool paused;                     /* on_msg paused delivery (loop thread) */
  bool note_ok;                    /* the guest offered WIRE__CAP_NOTE (loop thread) */
  bool note_set;                   /* note holds a published word (loop thread) */
  uint32_t note;                   /* the last word published (loop thread) */
  bool closed_mt;                  /* mt_mu: no more mt replies */
  bool resume_queued;              /* mt_mu: on the server's resume list */
  struct wire_tenant *resume_next; /* mt_mu */
  wire__rx rx;                     /* loop thread */
  pthread_mutex_t tx_mu;           /* guards calls/ncalls/capcalls and tx_closed */
  bool tx_closed;                  /* tx_mu: the transport is (being) closed */
  uint64_t *calls;                 /* outstanding CALL ids (tx_mu) */
  size_t ncalls, capcalls;
  uint64_t last_rx_ns, last_tx_ns; /* loop thread */
  uint64_t born_ns;                /* accepted (the handshake deadline counts from here) */
  char key[48];                    /* admission key (wire__tenant_admit); "" = none */
  _Atomic int refs;
  wire_direct_t *_Atomic direct; /* the ring's direct reader (shm.h), set at WELCOME */
  /* Frees deferred past a close while paused: a worker may still read the
   * paused payload until its last unref (at most 4: rx + transport). */
  void (*defer_fn[4])(void *);
  void *defer_arg[4];
  int ndefer;
  struct wire_tenant *next, *prev; /* server's list (loop thread) */
};

struct wire_server {
  uv_loop_t *loop;
  wire_server_opts_t opts;
  wire_server_cb_t cb;
  void *user;
  void *tcp;  /* listener or NULL */
  void *shm;  /* listener or NULL */
  void *rdma; /* listener or NULL */
  wire_tenant_t *tenants;
  uv_timer_t timer;
  uv_async_t mt_async;
  pthread_mutex_t mt_mu; /* guards mt_head/mt_tail and tenants' closed_mt */
  mt_item *mt_head, *mt_tail;
  wire_tenant_t *resume_head; /* mt_mu: tenants to resume (each holds a ref) */
  int open_handles;           /* timer + async still to close */
  bool closing;
  /* 1 for the loop handles + 1 per tenant still in memory: workers that
   * hold a tenant ref may call reply_mt/resume after wire_server_close. */
  _Atomic int refs;
};

static void server_unref(wire_server_t *s) {
  if (atomic_fetch_sub(&s->refs, 1) == 1) {
    pthread_mutex_destroy(&s->mt_mu);
    free(s);
  }
}

/* --------------------------------------------------------------- helpers */

static void tenant_unref_mem(wire_tenant_t *t) {
  if (atomic_fetch_sub(&t->refs, 1) == 1) {
    wire_server_t *s = t->s;
    int i;
    for (i = 0; i < t->ndefer; i++)
      t->defer_fn[i](t->defer_arg[i]);
    if (t->direct)
      wire__direct_unref(t->direct);
    pthread_mutex_destroy(&t->tx_mu);
    free(t->calls);
    free(t);
    server_unref(s);
  }
}

void wire__tenant_defer(wire_tenant_t *t, void (*fn)(void *), void *arg) {
  if (t->paused && t->ndefer < 4) {
    t->defer_fn[t->ndefer] = fn;
    t->defer_arg[t->ndefer] = arg;
    t->ndefer++;
  } else {
    fn(arg);
  }
}

void wire__tenant_set_direct(wire_tenant_t *t, wire_direct_t *d) {
  atomic_store_explicit(&t->direct, d, memory_order_release);
}

bool wire__tenant_rx_idle(const wire_tenant_t *t) {
  return !t->paused && wire__rx_idle(&t->rx);
}

wire_direct_t *wire_tenant_direct(wire_tenant_t *t) {
  wire_direct_t *d = t ? atomic_load_explicit(&t->direct, memory_order_acquire) : NULL;
  return d ? wire__direct_take(d) : NULL;
}

static void rx_free(void *arg) {
  wire__rx_close(arg);
}

void wire_tenant_ref(wire_tenant_t *t) {
  atomic_fetch_add(&t->refs, 1);
}
void wire_tenant_unref(wire_tenant_t *t) {
  if (t)
    tenant_unref_mem(t);
}

static int send_status(wire_tenant_t *t, uint8_t kind, int status, const char *why) {
  wire_buf_t b;
  struct iovec v;
  int rc;

  wire_buf_init(&b);
  wire__status_encode(&b, status, why);
  if ((rc = wire_buf_status(&b)) == 0) {
    v.iov_base = b.data;
    v.iov_len = b.len;
    rc = t->ops->send(t, kind, 0, &v, 1, b.len);
  }
  wire_buf_close(&b);
  return rc;
}

static int send_frame_raw(wire_tenant_t *t, uint8_t kind, uint64_t id, const void *p, size_t n) {
  struct iovec v = {(void *)p, n};
  int rc = t->ops->send(t, kind, id, &v, 1, n);

  t->last_tx_ns = wire__now_ns();
  return rc;
}

static int send_note(wire_tenant_t *t) {
  uint8_t b[WIRE__NOTE_LEN];

  wire_le_wr32(b, t->note);
  return send_frame_raw(t, WIRE__K_NOTE, 0, b, sizeof(b));
}

int wire_tenant_note(wire_tenant_t *t, uint32_t word) {
  if (t == NULL)
    return -EINVAL;
  if (t->state == T_CLOSED)
    return -ECONNRESET;
  if (!t->note_ok)
    return -EOPNOTSUPP;
  if (t->note_set && t->note == word)
    return 0; /* the guest has it (or gets it right after its WELCOME) */
  t->note = word;
  t->note_set = true;
  return t->state == T_OPEN ? send_note(t) : 0;
}

/* tx_mu held (take_call, add_call, find_call). */
static bool find_call(wire_tenant_t *t, uint64_t id) {
  size_t i;

  for (i = 0; i < t->ncalls; i++)
    if (t->calls[i] == id)
      return true;
  return false;
}

static bool take_call(wire_tenant_t *t, uint64_t id) {
  size_t i;

  for (i = 0; i < t->ncalls; i++) {
    if (t->calls[i] == id) {
      t->calls[i] = t->calls[--t->ncalls];
      return true;
    }
  }
  return false;
}

static int add_call(wire_tenant_t *t, uint64_t id) {
  size_t i;

  for (i = 0; i < t->ncalls; i++)
    if (t->calls[i] == id)
      return -EPROTO; /* duplicate outstanding id */
  if (t->ncalls == t->capcalls) {
    /* One outstanding call per guest thread: 1024 is far past any real
     * process and bounds what a tenant can make us hold. */
    size_t cap = t->capcalls ? t->capcalls * 2 : 16;
    uint64_t *n;
    if (cap > 1024)
      return -EPROTO;
    n = realloc(t->calls, cap * sizeof(*n));
    if (n == NULL)
      return -ENOMEM;
    t->calls = n;
    t->capcalls = cap;
  }
  t->calls[t->ncalls++] = id;
  return 0;
}

int wire__tenant_add_call(wire_tenant_t *t, uint64_t id) {
  int rc;

  pthread_mutex_lock(&t->tx_mu);
  rc = t->tx_closed ? -ECONNRESET : add_call(t, id);
  pthread_mutex_unlock(&t->tx_mu);
  return rc;
}

/* ------------------------------------------------------------ tenant life */

static int on_frame(void *ctx, const wire__msg *m);

wire_tenant_t *wire__tenant_new(wire_server_t *s, const struct wire__stp_ops *ops, void *tp,
                                bool need_token) {
  wire_tenant_t *t = calloc(1, sizeof(*t));

  if (t == NULL)
    return NULL;
  t->s = s;
  t->ops = ops;
  t->tp = tp;
  t->need_token = need_token;
  t->state = T_HELLO;
  t->info.transport = ops->name;
  t->info.uid = (uid_t)-1;
  t->last_rx_ns = t->last_tx_ns = t->born_ns = wire__now_ns();
  pthread_mutex_init(&t->tx_mu, NULL);
  atomic_store(&t->refs, 1);
  atomic_fetch_add(&s->refs, 1);
  /* Before the handshake only one small HELLO frame: nothing larger than
   * WIRE__HELLO_MAX is buffered for an unauthenticated peer. */
  wire__rx_init(&t->rx, WIRE__HELLO_MAX, 1u << WIRE__K_HELLO, on_frame, t);
  t->rx.frame_max = WIRE__HELLO_MAX;
  t->next = s->tenants;
  if (s->tenants)
    s->tenants->prev = t;
  s->tenants = t;
  return t;
}

void *wire__tenant_tp(const wire_tenant_t *t) {
  return t->tp;
}
wire_tenant_info_t *wire__tenant_info_mut(wire_tenant_t *t) {
  return &t->info;
}
wire_server_t *wire__tenant_server(const wire_tenant_t *t) {
  return t->s;
}
bool wire__tenant_paused(const wire_tenant_t *t) {
  return t->paused;
}

void wire__tenant_set_resolve(wire_tenant_t *t, wire__rx_resolve_fn fn, void *ctx) {
  t->rx.resolve = fn;
  t->rx.resolve_ctx = ctx;
}

static void tenant_close(wire_tenant_t *t, int status, const char *why, bool tell_guest) {
  wire_server_t *s = t->s;
  bool was_open = t->state == T_OPEN;

  if (t->state == T_CLOSED)
    return;
  if (tell_guest)
    send_status(t, WIRE__K_BYE, status, why);
  t->state = T_CLOSED;
  pthread_mutex_lock(&s->mt_mu);
  t->closed_mt = true;
  pthread_mutex_unlock(&s->mt_mu);
  /* Waits for a direct reply in progress on another thread; none starts
   * after this, so the transport may close. */
  pthread_mutex_lock(&t->tx_mu);
  t->tx_closed = true;
  pthread_mutex_unlock(&t->tx_mu);
  if (t->prev)
    t->prev->next = t->next;
  else
    s->tenants = t->next;
  if (t->next)
    t->next->prev = t->prev;
  t->next = t->prev = NULL;
  if (was_open && s->cb.on_close)
    s->cb.on_close(s, t, status, why);
  else if (!was_open && s->cb.on_refuse)
    s->cb.on_refuse(s, &t->info, t->key, status, why ? why : "");
  t->ops->close(t);
}

/* ------------------------------------------------------------- admission
 *
 * Invariant: at most halfopen_max tenants are in T_HELLO, and at most
 * halfopen_per_peer of them share a key.  A new connection is always taken
 * in; to keep the invariant the OLDEST half-open one (the list is newest
 * first, so the last match) is closed.  A peer that completes its HELLO at
 * once is therefore never the one shed, however many slow ones arrive. */

/* The oldest half-open tenant other than self, with key (NULL: any). */
static wire_tenant_t *oldest_halfopen(wire_server_t *s, wire_tenant_t *self, const char *key,
                                      unsigned *count) {
  wire_tenant_t *old = NULL;
  *count = 0;
  for (wire_tenant_t *t = s->tenants; t != NULL; t = t->next) {
    if (t == self || t->state != T_HELLO || (key && strcmp(t->key, key) != 0))
      continue;
    ++*count;
    old = t;
  }
  return old;
}

/* A shed guest is told "come back later" (-EAGAIN, which guest libraries
 * retry), in case it was a slow but honest one. */
static void shed(wire_tenant_t *t, const char *what, unsigned cap) {
  char why[160];
  snprintf(why, sizeof(why), "too many connections without a completed handshake (%s limit %u); "
           "the oldest is closed; retry", what, cap);
  send_status(t, WIRE__K_REFUSE, -EAGAIN, why);
  tenant_close(t, -EBUSY, why, false);
}

void wire__tenant_admit(wire_tenant_t *t, const char *key) {
  wire_server_t *s = t->s;
  wire_tenant_t *old;
  unsigned n;

  snprintf(t->key, sizeof(t->key), "%s", key ? key : "");
  while (t->key[0] && (old = oldest_halfopen(s, t, t->key, &n)) != NULL &&
         n >= s->opts.halfopen_per_peer)
    shed(old, "per-peer", s->opts.halfopen_per_peer);
  while ((old = oldest_halfopen(s, t, NULL, &n)) != NULL && n >= s->opts.halfopen_max)
    shed(old, "total", s->opts.halfopen_max);
}

void wire__tenant_lost(wire_tenant_t *t, int status, const char *why) {
  tenant_close(t, status, why, false);
}

void wire__tenant_release(wire_tenant_t *t) {
  wire__tenant_defer(t, rx_free, &t->rx);
  tenant_unref_mem(t);
}

void wire_tenant_close(wire_tenant_t *t, int status, const char *why) {
  tenant_close(t, status, why, true);
}

/* --------------------------------------------------------------- handshake */

static int do_hello(wire_tenant_t *t, const wire__msg *m) {
  wire_server_t *s = t->s;
  wire__hello h;
  wire__welcome w = {0};
  wire_buf_t body, frame;
  char why[256] = "";
  uint16_t version = 0;
  int rc;

  rc = wire__hello_decode(m->data, m->len, &h, why, sizeof(why));
  if (rc == 0)
    rc = wire__hello_check(&h, s->opts.token, t->need_token, &version, why, sizeof(why));
  if (rc == 0) {
    snprintf(t->info.name, sizeof(t->info.name), "%s", h.tenant);
    t->info.prio = (wire_prio_t)h.prio;
    t->info.caps = h.caps & WIRE_CAP_ZSTD;
    t->info.version = version;
    t->note_ok = (h.caps & WIRE__CAP_NOTE) != 0; /* on_connect may publish already */
    if (s->cb.on_connect)
      rc = s->cb.on_connect(s, t, &t->info, why, sizeof(why));
    if (rc && why[0] == 0)
      snprintf(why, sizeof(why), "daemon refused tenant \"%s\": %s", h.tenant, wire_strerror(rc));
  }
  if (rc) {
    /* Refuse: tell the guest exactly why, then close without on_close. */
    /* -EAGAIN is "come back later" (e.g. a daemon restarting after a sticky
     * GPU error): the guest returns it as is so its caller may retry. */
    send_status(t, WIRE__K_REFUSE,
                rc == WIRE_ETOKEN || rc == WIRE_EVERSION || rc == -EAGAIN ? rc : WIRE_EREFUSED,
                why);
    tenant_close(t, rc, why, false);
    return rc;
  }
  w.version = version;
  w.caps = t->info.caps;
  if (t->ops->take_fd && (h.caps & WIRE__CAP_FD))
    w.caps |= WIRE__CAP_FD; /* FD frames understood (shm only) */
  if (strcmp(t->ops->name, "rdma") == 0 && (h.caps & WIRE__CAP_RDMA_BULK))
    w.caps |= WIRE__CAP_RDMA_BULK; /* REGION frames and WRITE bulk (server-rdma.c) */
  if (t->note_ok)
    w.caps |= WIRE__CAP_NOTE; /* NOTE frames may follow (wire_tenant_note) */
  w.heartbeat_ms = s->opts.heartbeat_ms;
  w.dead_after_ms = s->opts.dead_after_ms;
  w.max_msg_len = s->opts.max_msg_len;
  if (strcmp(t->ops->name, "shm") == 0) {
    w.ring_bytes = (uint32_t)s->opts.shm_ring_bytes;
    w.data_bytes = s->opts.shm_data_bytes;
  }
  wire_buf_init(&body);
  wire_buf_init(&frame);
  wire__welcome_encode(&body, &w);
  rc = wire_buf_status(&body);
  if (rc == 0)
    rc = wire__frame_put(&frame, 1, WIRE__K_WELCOME, 0, body.data, body.len);
  if (rc == 0)
    rc = wire_buf_status(&frame);
  if (rc == 0)
    rc = t->ops->welcome(t, frame.data, frame.len);
  wire_buf_close(&body);
  wire_buf_close(&frame);
  if (rc) {
    /* on_connect accepted it: on_close is owed (once per accepted tenant),
     * or the caller keeps what it set up for a guest that died during its
     * handshake. */
    t->state = T_OPEN;
    tenant_close(t, rc, "cannot send WELCOME (guest gone during its handshake?)", false);
    return rc;
  }
  t->last_tx_ns = wire__now_ns();
  t->state = T_OPEN;
  t->rx.version = (uint8_t)version;
  t->rx.max_msg = s->opts.max_msg_len;
  t->rx.frame_max = WIRE__FRAME_MAX;
  t->rx.zstd_ok = (t->info.caps & WIRE_CAP_ZSTD) != 0;
  if (t->note_set)
    send_note(t); /* published by on_connect, before the WELCOME could go */
  t->rx.kinds = 1u << WIRE__K_CALL | 1u << WIRE__K_POST | 1u << WIRE__K_BATCH |
                1u << WIRE__K_HEARTBEAT | 1u << WIRE__K_BYE | 1u << WIRE__K_BLOB_HAVE |
                1u << WIRE__K_BLOB_PUT | 1u << WIRE__K_FD;
  return 0;
}

/* -------------------------------------------------------------- messages */

static int do_blob(wire_tenant_t *t, const wire__msg *m) {
  wire_server_t *s = t->s;
  wire_rd_t r;
  uint64_t id;
  uint8_t out[4];
  int32_t st = 0;

  wire_rd_init(&r, m->data, m->len);
  if (wire_rd_get_u64(&r, &id)) {
    snprintf(t->rx.why, sizeof(t->rx.why), "blob message of %zu bytes has no content id", m->len);
    return -EPROTO;
  }
  if (m->kind == WIRE__K_BLOB_HAVE) {
    out[0] = s->cb.blob_has ? (uint8_t)s->cb.blob_has(s, t, id) : 0;
    return send_frame_raw(t, WIRE__K_REPLY, m->id, out, 1);
  }
  if (s->cb.blob_put) {
    /* Hash and store the SAME bytes: over shm the payload is memory the
     * guest can still write, and bytes changed between the hash check and
     * blob_put would poison the host-wide cache under a valid id.  Blobs
     * cross once per host, so the private copy costs little. */
    size_t n = m->len - 8;
    uint8_t *copy = malloc(n ? n : 1);
    if (copy == NULL) {
      st = -ENOMEM;
    } else {
      memcpy(copy, m->data + 8, n);
      if (wire_content_id(copy, n) != id) {
        free(copy);
        snprintf(t->rx.why, sizeof(t->rx.why),
                 "blob bytes (%zu) do not hash to their content id %016llx", n,
                 (unsigned long long)id);
        return -EPROTO;
      }
      st = s->cb.blob_put(s, t, id, copy, n);
      free(copy);
    }
  } else if (wire_content_id(m->data + 8, m->len - 8) != id) {
    snprintf(t->rx.why, sizeof(t->rx.why),
             "blob bytes (%zu) do not hash to their content id %016llx", m->len - 8,
             (unsigned long long)id);
    return -EPROTO;
  }
  out[0] = (uint8_t)st;
  out[1] = (uint8_t)((uint32_t)st >> 8);
  out[2] = (uint8_t)((uint32_t)st >> 16);
  out[3] = (uint8_t)((uint32_t)st >> 24);
  return send_frame_raw(t, WIRE__K_REPLY, m->id, out, 4);
}

/* A FD frame: pairs it with the descriptor that came out of band, hands
 * that to on_fd and answers with its status (i32). */
static int do_fd(wire_tenant_t *t, const wire__msg *m) {
  wire_server_t *s = t->s;
  wire_rd_t r;
  uint64_t tag;
  uint8_t out[4];
  int32_t st;
  int fd = -1;

  wire_rd_init(&r, m->data, m->len);
  if (m->id == 0 || wire_rd_get_u64(&r, &tag) || wire_rd_left(&r) != 0) {
    snprintf(t->rx.why, sizeof(t->rx.why), "FD message of %zu bytes (want 8) or without an id",
             m->len);
    return -EPROTO;
  }
  if (t->ops->take_fd == NULL) {
    snprintf(t->rx.why, sizeof(t->rx.why), "FD message over %s (shm only)", t->ops->name);
    return -EPROTO;
  }
  st = t->ops->take_fd(t, &fd, t->rx.why, sizeof(t->rx.why));
  if (st == -EPROTO)
    return -EPROTO;
  if (st == 0 && s->cb.on_fd) {
    st = s->cb.on_fd(s, t, tag, fd); /* owns fd from here, also on error */
    if (t->state != T_OPEN)
      return -ECANCELED; /* on_fd closed the tenant */
  } else if (st == 0) {
    close(fd);
    st = -EOPNOTSUPP;
  }
  out[0] = (uint8_t)st;
  out[1] = (uint8_t)((uint32_t)st >> 8);
  out[2] = (uint8_t)((uint32_t)st >> 16);
  out[3] = (uint8_t)((uint32_t)st >> 24);
  return send_frame_raw(t, WIRE__K_REPLY, m->id, out, 4);
}

static int on_frame(void *ctx, const wire__msg *m) {
  wire_tenant_t *t = ctx;
  wire_server_t *s = t->s;
  wire_msg_t um;
  int32_t st;
  char why[256];
  int rc;

  if (t->state == T_HELLO)
    return do_hello(t, m) ? -ECANCELED : 0;
  if (t->state != T_OPEN)
    return -ECANCELED;
  switch (m->kind) {
  case WIRE__K_HEARTBEAT:
    return 0;
  case WIRE__K_BYE:
    if (wire__status_decode(m->data, m->len, &st, why, sizeof(why)))
      snprintf(why, sizeof(why), "guest closed (malformed BYE)");
    tenant_close(t, 0, why, false);
    return -ECANCELED;
  case WIRE__K_BLOB_HAVE:
  case WIRE__K_BLOB_PUT:
    if (m->id == 0) {
      snprintf(t->rx.why, sizeof(t->rx.why), "blob request without a correlation id");
      return -EPROTO;
    }
    return do_blob(t, m);
  case WIRE__K_FD:
    return do_fd(t, m);
  case WIRE__K_CALL:
    if (m->id == 0) {
      snprintf(t->rx.why, sizeof(t->rx.why), "CALL without a correlation id");
      return -EPROTO;
    }
    pthread_mutex_lock(&t->tx_mu);
    rc = add_call(t, m->id);
    pthread_mutex_unlock(&t->tx_mu);
    if (rc != 0) {
      snprintf(t->rx.why, sizeof(t->rx.why),
               "CALL id %llu already outstanding, or more than 1024 calls outstanding",
               (unsigned long long)m->id);
      return rc;
    }
    um.kind = WIRE_MSG_CALL;
    break;
  case WIRE__K_POST:
    um.kind = WIRE_MSG_POST;
    break;
  default:
    snprintf(t->rx.why, sizeof(t->rx.why), "frame kind %u not expected from a guest", m->kind);
    return -EPROTO;
  }
  um.id = m->kind == WIRE__K_CALL ? m->id : 0;
  um.data = m->data;
  um.len = m->len;
  um.rx_ns = t->last_rx_ns; /* stamped by wire__tenant_feed */
  s->cb.on_msg(s, t, &um);
  if (t->state != T_OPEN)
    return -ECANCELED; /* on_msg closed the tenant */
  return t->paused ? 1 : 0;
}

int wire__tenant_feed(wire_tenant_t *t, const uint8_t *p, size_t n, size_t *used) {
  int rc;

  *used = 0;
  if (t->state == T_CLOSED)
    return -ECANCELED;
  t->last_rx_ns = wire__now_ns();
  wire_tenant_ref(t);
  rc = wire__rx_feed(&t->rx, p, n, used);
  if (rc < 0 && rc != -ECANCELED && t->state != T_CLOSED) {
    char why[640], sample[80];
    size_t off = *used < n ? *used : 0;
    wire__escape(sample, sizeof(sample), p + off, n - off < 16 ? n - off : 16);
    snprintf(why, sizeof(why), "tenant \"%s\" (%s): %s [bytes: \"%s\"]", t->info.name, t->info.peer,
             t->rx.why[0] ? t->rx.why : wire_strerror(rc), sample);
    tenant_close(t, rc, why, true);
  }
  tenant_unref_mem(t);
  return rc;
}

/* ---------------------------------------------------------------- public */

const wire_tenant_info_t *wire_tenant_info(const wire_tenant_t *t) {
  return &t->info;
}
void wire_tenant_set_data(wire_tenant_t *t, void *data) {
  t->data = data;
}
void *wire_tenant_data(const wire_tenant_t *t) {
  return t->data;
}
void *wire_server_data(const wire_server_t *s) {
  return s->user;
}
struct uv_loop_s *wire__server_loop(const wire_server_t *s) {
  return s->loop;
}
const wire_server_opts_t *wire__server_opts(const wire_server_t *s) {
  return &s->opts;
}

/* owned: NULL, or a malloc'd buffer equal to iov[0] that the transport may
 * keep instead of copying (send_owned); freed here in every other case. */
static int reply(wire_tenant_t *t, uint64_t id, const struct iovec *iov, int cnt, void *owned) {
  size_t len;
  bool found;
  int rc;

  if (t->state != T_OPEN) {
    free(owned);
    return -ECONNRESET;
  }
  pthread_mutex_lock(&t->tx_mu);
  found = take_call(t, id);
  pthread_mutex_unlock(&t->tx_mu);
  if (!found) {
    free(owned);
    return -ENOENT;
  }
  len = wire__iov_len(iov, cnt);
  if (owned && t->ops->send_owned) {
    rc = t->ops->send_owned(t, WIRE__K_REPLY, id, owned, len);
  } else {
    rc = t->ops->send(t, WIRE__K_REPLY, id, iov, cnt, len);
    free(owned);
  }
  t->last_tx_ns = wire__now_ns();
  if (rc)
    tenant_close(t, rc, "cannot send a reply", false);
  return rc;
}

int wire_tenant_reply(wire_tenant_t *t, uint64_t id, const struct iovec *iov, int cnt) {
  return reply(t, id, iov, cnt, NULL);
}

static void mt_push(wire_server_t *s, mt_item *it) {
  it->next = NULL;
  if (s->mt_tail)
    s->mt_tail->next = it;
  else
    s->mt_head = it;
  s->mt_tail = it;
}

/* The direct path of wire_tenant_reply_mt(_copy): 0 = sent, -EAGAIN = take
 * the loop thread's path, -ECONNRESET = tenant closed.  buf is the caller's
 * in every case (the transports copy what they send). */
static int reply_direct(wire_tenant_t *t, uint64_t id, const void *buf, size_t len) {
  int rc = -EAGAIN;

  if (t->ops->send_direct == NULL)
    return -EAGAIN;
  pthread_mutex_lock(&t->tx_mu);
  if (t->tx_closed) {
    rc = -ECONNRESET;
  } else if (find_call(t, id)) {
    /* Unknown ids go the loop thread's way, which reports them (-ENOENT)
     * exactly as before. */
    rc = t->ops->send_direct(t, id, buf, len);
    if (rc == 0)
      take_call(t, id);
    else
      rc = -EAGAIN; /* ring full or replies queued: keep their order */
  }
  pthread_mutex_unlock(&t->tx_mu);
  return rc;
}

/* The loop thread's path: buf (owned) is queued for it. */
static int reply_queue(wire_tenant_t *t, uint64_t id, void *buf, size_t len) {
  wire_server_t *s = t->s;
  mt_item *it;
  int rc = 0;

  it = malloc(sizeof(*it));
  if (it == NULL) {
    free(buf);
    return -ENOMEM;
  }
  pthread_mutex_lock(&s->mt_mu);
  if (t->closed_mt) {
    rc = -ECONNRESET;
  } else {
    wire_tenant_ref(t);
    *it = (mt_item){.t = t, .id = id, .buf = buf, .len = len};
    mt_push(s, it);
    /* Under mt_mu: the loop closes the async handle only after marking
     * every tenant closed under mt_mu, so this never hits a closed handle. */
    uv_async_send(&s->mt_async);
  }
  pthread_mutex_unlock(&s->mt_mu);
  if (rc) {
    free(it);
    free(buf);
    return rc;
  }
  return 0;
}

int wire_tenant_reply_mt(wire_tenant_t *t, uint64_t id, void *buf, size_t len) {
  int rc = reply_direct(t, id, buf, len);

  if (rc != -EAGAIN) {
    free(buf);
    return rc;
  }
  return reply_queue(t, id, buf, len);
}

int wire_tenant_reply_mt_copy(wire_tenant_t *t, uint64_t id, const void *buf, size_t len) {
  int rc = reply_direct(t, id, buf, len);
  void *copy;

  if (rc != -EAGAIN)
    return rc;
  /* Only the loop thread's path keeps the bytes past this call. */
  copy = malloc(len ? len : 1);
  if (copy == NULL)
    return -ENOMEM;
  memcpy(copy, buf, len);
  return reply_queue(t, id, copy, len);
}

void wire_tenant_pause(wire_tenant_t *t) {
  t->paused = true;
}

void wire_tenant_resume(wire_tenant_t *t) {
  wire_server_t *s = t->s;

  /* No allocation: the tenant itself is the list node, so a resume can
   * never be lost to an out-of-memory condition. */
  pthread_mutex_lock(&s->mt_mu);
  if (!t->closed_mt && !t->resume_queued) {
    t->resume_queued = true;
    wire_tenant_ref(t);
    t->resume_next = s->resume_head;
    s->resume_head = t;
    uv_async_send(&s->mt_async); /* under mt_mu: see wire_tenant_reply_mt */
  }
  pthread_mutex_unlock(&s->mt_mu);
}

static void on_mt_async(uv_async_t *a) {
  wire_server_t *s = a->data;
  mt_item *it, *next;

  wire_tenant_t *rt, *rnext;

  pthread_mutex_lock(&s->mt_mu);
  it = s->mt_head;
  s->mt_head = s->mt_tail = NULL;
  rt = s->resume_head;
  s->resume_head = NULL;
  for (rnext = rt; rnext != NULL; rnext = rnext->resume_next)
    rnext->resume_queued = false;
  pthread_mutex_unlock(&s->mt_mu);
  for (; rt != NULL; rt = rnext) {
    rnext = rt->resume_next;
    if (rt->state == T_OPEN && rt->paused) {
      rt->paused = false;
      rt->ops->resume(rt);
    }
    tenant_unref_mem(rt);
  }
  for (; it != NULL; it = next) {
    wire_tenant_t *t = it->t;
    next = it->next;
    {
      /* The buffer is ours: a transport that has to queue it (a full ring)
       * keeps it instead of copying a possibly huge reply. */
      struct iovec v = {it->buf, it->len};
      reply(t, it->id, &v, 1, it->buf);
    }
    free(it);
    tenant_unref_mem(t);
  }
}

static void on_timer(uv_timer_t *tm) {
  wire_server_t *s = tm->data;
  wire_tenant_t *t, *next;
  uint64_t now = wire__now_ns();
  uint64_t hb = (uint64_t)s->opts.heartbeat_ms * 1000000u;
  uint64_t dead = (uint64_t)s->opts.dead_after_ms * 1000000u;
  uint64_t hs = (uint64_t)s->opts.handshake_ms * 1000000u;

  for (t = s->tenants; t != NULL; t = next) {
    next = t->next;
    if (t->state == T_HELLO && wire__since(now, t->born_ns) >= hs) {
      char why[128];
      snprintf(why, sizeof(why), "no complete HELLO within %u ms of connecting",
               s->opts.handshake_ms);
      tenant_close(t, -ETIMEDOUT, why, true);
      continue;
    }
    /* A paused tenant is not read, so its silence is ours, not its death;
     * so is that of a ring its direct reader holds unread (shm.h). */
    if (t->direct)
      t->last_rx_ns = wire__direct_rx_ns(t->direct, t->last_rx_ns, now);
    if (!t->paused && wire__since(now, t->last_rx_ns) >= dead) {
      char why[512];
      snprintf(why, sizeof(why), "tenant \"%s\" (%s): no byte for %llu ms (limit %u ms)",
               t->info.name, t->info.peer,
               (unsigned long long)(wire__since(now, t->last_rx_ns) / 1000000u),
               s->opts.dead_after_ms);
      tenant_close(t, WIRE_EPEERDEAD, why, true);
      continue;
    }
    if (t->state == T_OPEN && wire__since(now, t->last_tx_ns) >= hb)
      send_frame_raw(t, WIRE__K_HEARTBEAT, 0, NULL, 0);
    if (t->state == T_OPEN && t->ops->idle)
      t->ops->idle(t, now);
    /* Idle for two heartbeats: give back the large-message buffer. */
    if (!t->paused && wire__since(now, t->last_rx_ns) >= 2 * hb)
      wire__rx_trim(&t->rx);
  }
}

static void on_handle_closed(uv_handle_t *h) {
  wire_server_t *s = h->data;

  if (--s->open_handles == 0)
    server_unref(s);
}

/* Zero means default; the default half-open cap leaves three quarters of
 * the descriptors to tenants that finished their handshake. */
static void admission_defaults(wire_server_opts_t *o) {
  struct rlimit rl;
  if (o->handshake_ms == 0)
    o->handshake_ms = WIRE_HANDSHAKE_MS_DEFAULT;
  if (o->halfopen_per_peer == 0)
    o->halfopen_per_peer = WIRE_HALFOPEN_PEER_DEFAULT;
  if (o->halfopen_max == 0) {
    o->halfopen_max = WIRE_HALFOPEN_MAX_DEFAULT;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 4 < o->halfopen_max)
      o->halfopen_max = rl.rlim_cur / 4 < 8 ? 8 : (uint32_t)(rl.rlim_cur / 4);
  }
  if (o->unix_mode == 0)
    o->unix_mode = 0660;
}

int wire_server_new(wire_server_t **out, struct uv_loop_s *loop, const wire_server_opts_t *opts,
                    const wire_server_cb_t *cb, void *user) {
  wire_server_t *s;
  int rc;

  *out = NULL;
  if (loop == NULL || opts == NULL || cb == NULL || cb->on_msg == NULL ||
      (opts->unix_path == NULL && opts->tcp_addr == NULL && opts->rdma_addr == NULL &&
       opts->unix_listen_fd <= 0 && opts->tcp_listen_fd <= 0))
    return -EINVAL;
  s = calloc(1, sizeof(*s));
  if (s == NULL)
    return -ENOMEM;
  s->loop = loop;
  s->opts = *opts;
  s->cb = *cb;
  s->user = user;
  if (s->opts.heartbeat_ms == 0)
    s->opts.heartbeat_ms = 500;
  if (s->opts.dead_after_ms == 0)
    s->opts.dead_after_ms = 5000;
  if (s->opts.dead_after_ms <= s->opts.heartbeat_ms)
    s->opts.dead_after_ms = 2 * s->opts.heartbeat_ms;
  admission_defaults(&s->opts);
  if (s->opts.max_msg_len == 0 || s->opts.max_msg_len > UINT32_MAX)
    s->opts.max_msg_len = WIRE_MSG_MAX_DEFAULT;
  if (s->opts.shm_ring_bytes == 0)
    s->opts.shm_ring_bytes = 1 << 20;
  if (s->opts.shm_data_bytes == 0)
    s->opts.shm_data_bytes = WIRE__SHM_DATA_DEFAULT;
  if ((s->opts.shm_ring_bytes & (s->opts.shm_ring_bytes - 1)) || s->opts.shm_ring_bytes < 4096 ||
      s->opts.shm_ring_bytes > UINT32_MAX / 2) {
    free(s);
    return -EINVAL;
  }
  pthread_mutex_init(&s->mt_mu, NULL);
  uv_timer_init(loop, &s->timer);
  s->timer.data = s;
  rc = uv_async_init(loop, &s->mt_async, on_mt_async);
  if (rc) {
    uv_close((uv_handle_t *)&s->timer, NULL);
    pthread_mutex_destroy(&s->mt_mu);
    /* the timer handle lives in s: run one loop pass before freeing */
    uv_run(loop, UV_RUN_NOWAIT);
    free(s);
    return rc;
  }
  s->mt_async.data = s;
  s->open_handles = 2;
  atomic_store(&s->refs, 1);
  /* Check at half the heartbeat so a silence is seen within 1.5x. */
  uv_timer_start(&s->timer, on_timer, s->opts.heartbeat_ms / 2 + 1, s->opts.heartbeat_ms / 2 + 1);
  uv_unref((uv_handle_t *)&s->timer);
  uv_unref((uv_handle_t *)&s->mt_async);
  if ((opts->tcp_addr || opts->tcp_listen_fd > 0) &&
      (rc = wire__tcp_listen(s, opts->tcp_addr, &s->tcp)) != 0)
    goto fail;
  if ((opts->unix_path || opts->unix_listen_fd > 0) &&
      (rc = wire__shm_listen(s, opts->unix_path, &s->shm)) != 0)
    goto fail;
  if (opts->rdma_addr && (rc = wire__rdma_listen(s, opts->rdma_addr, &s->rdma)) != 0)
    goto fail;
  *out = s;
  return 0;
fail:
  wire_server_close(s);
  return rc;
}

void wire_server_close(wire_server_t *s) {
  if (s == NULL || s->closing)
    return;
  s->closing = true;
  if (s->tcp)
    wire__tcp_unlisten(s->tcp);
  if (s->shm)
    wire__shm_unlisten(s->shm);
  if (s->rdma)
    wire__rdma_unlisten(s->rdma);
  while (s->tenants)
    tenant_close(s->tenants, -ECANCELED, "daemon shutting down", true);
  on_mt_async(&s->mt_async); /* drop queued replies (their tenants are closed) */
  uv_close((uv_handle_t *)&s->timer, on_handle_closed);
  uv_close((uv_handle_t *)&s->mt_async, on_handle_closed);
}

int wire_server_listen_fds(const wire_server_t *s, int *unix_fd, int *tcp_fd) {
  if (unix_fd)
    *unix_fd = -1;
  if (tcp_fd)
    *tcp_fd = -1;
  if (s == NULL)
    return -EINVAL;
  if (unix_fd && s->shm)
    *unix_fd = wire__shm_listen_fd(s->shm);
  if (tcp_fd && s->tcp)
    *tcp_fd = wire__tcp_listen_fd(s->tcp);
  return 0;
}

int wire_server_tcp_port(const wire_server_t *s) {
  return s->tcp ? wire__tcp_port(s->tcp) : 0;
}
