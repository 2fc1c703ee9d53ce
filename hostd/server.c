/* server.c: tallyd's front door: wire/ server, tenant threads, shutdown.
 *
 * A libuv loop runs wire's server (shared memory over the UNIX socket, TCP)
 * and the signals.  Each accepted tenant gets a worker thread of its own;
 * wire delivers the tenant's requests on the loop thread (on_msg), in
 * order, and we queue them for that worker, which executes them with
 * hostd__tenant_exec and answers calls with wire_tenant_reply_mt.  One
 * thread per tenant because CUDA calls block: a stream synchronisation must
 * stall its own tenant, never the loop or the other tenants.  Large payloads
 * are not copied: the tenant is paused until its worker is done with them.
 * When a tenant leaves, dies or breaks the protocol, wire calls on_close;
 * the worker then frees everything the tenant owned and exits, and the
 * other tenants go on.  SIGTERM/SIGINT (or hostd_server_stop) close wire's
 * server, which closes every tenant; hostd_server_run returns when every
 * worker has cleaned up.
 *
 * Lock story: `lock` guards the live count; each worker's `mu` guards its
 * queue and flags (loop thread enqueues, worker dequeues).  The wire tenant
 * is kept alive for the worker with wire_tenant_ref.
 */
#include "hostd/gpu.h"
#include "hostd/hostd-int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "wire/wire.h"

/* Payloads up to this size are copied into the worker's queue; larger ones
 * (bulk copies, up to 8 MiB) stay in wire's buffer while the tenant is
 * paused, so a 64 MiB copy is not copied twice on the host. */
#define COPY_MAX (64u << 10)

typedef struct msg {
  wire_msg_kind_t kind;
  uint64_t id;
  uint8_t *data; /* owned copy, or wire's buffer when paused */
  size_t len;
  bool paused; /* data is wire's: resume the tenant when done */
  struct msg *next;
} msg_t;

typedef struct worker {
  hostd_server_t *srv;
  wire_tenant_t *wt;
  uint32_t id;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  msg_t *head, *tail; /* queue, under mu */
  bool closed;        /* on_close ran, under mu */
  bool broken;        /* a malformed request: ignore the rest, under mu */
} worker_t;

struct hostd_server {
  uv_loop_t loop;
  wire_server_t *ws;
  uv_signal_t sigterm, sigint;
  uv_async_t stop_async, close_async;
  bool signals, stopping;
  pthread_mutex_t lock;
  pthread_cond_t changed; /* a tenant came or went */
  int live;               /* tenants whose worker has not finished */
  uint32_t next_id;
  /* Tenants a worker wants closed (malformed input); the loop closes them. */
  struct close_req {
    wire_tenant_t *wt;
    char why[160];
    struct close_req *next;
  } * to_close;
  unsigned long blob_puts; /* images received (tests count them) */
  unsigned long calls;     /* synchronous requests answered (tests count them) */
  uint64_t spin_ns;        /* --spin-us: a worker polls its queue this long before sleeping */
};

/* ---- worker thread ---- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void msg_free(worker_t *w, msg_t *m) {
  if (m->paused)
    wire_tenant_resume(w->wt);
  else
    free(m->data);
  free(m);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  hostd_server_t *s = w->srv;
  hostd_tenant_t *t = hostd__tenant_new(w->id, wire_tenant_info(w->wt)->local == false);
  guest_wr_t reply = {0};
  /* The context is made current by the first request (hostd__tenant_exec),
   * under the lock that keeps a reset from running at the same time. */
  bool ok = t != NULL;

  if (!ok)
    hostd__log(HOSTD_LOG_ERROR, "tenant %u: cannot set up (out of memory)", w->id);
  for (;;) {
    msg_t *m;
    const char *why = NULL;
    uint32_t op = 0, flags = 0, len = 0;
    int rc = -EPROTO;

    if (s->spin_ns && !__atomic_load_n(&w->head, __ATOMIC_ACQUIRE)) {
      /* Bounded poll (--spin-us) saves the condition-variable wakeup when
       * the tenant's next request follows closely (launch + sync loops). */
      uint64_t end = now_ns() + s->spin_ns;
      while (!__atomic_load_n(&w->head, __ATOMIC_ACQUIRE) && now_ns() < end)
        ;
    }
    pthread_mutex_lock(&w->mu);
    while (!w->head && !w->closed)
      pthread_cond_wait(&w->cv, &w->mu);
    m = w->head;
    if (m && !(w->head = m->next))
      w->tail = NULL;
    if (m && (w->closed || w->broken || !ok)) {
      pthread_mutex_unlock(&w->mu);
      msg_free(w, m); /* nothing more is executed for this tenant */
      continue;
    }
    pthread_mutex_unlock(&w->mu);
    if (!m)
      break; /* closed and drained */
    if (m->len >= GUEST_CALL_HDR_LEN) {
      memcpy(&op, m->data, 4);
      memcpy(&flags, m->data + 4, 4);
      memcpy(&len, m->data + 8, 4);
      /* A post must say ASYNC and a call must not: the guest's framing. */
      if (len == m->len - GUEST_CALL_HDR_LEN &&
          ((flags & GUEST_CALL_ASYNC) != 0) == (m->kind == WIRE_MSG_POST))
        rc = hostd__tenant_exec(t, op, flags, m->data + GUEST_CALL_HDR_LEN, len, &reply, &why);
      else
        why = "request header does not match its wire message";
    } else {
      why = "request shorter than its header";
    }
    if (rc == 0 && m->kind == WIRE_MSG_CALL) {
      __atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
      /* wire takes the buffer; the next reply grows a new one. */
      if (wire_tenant_reply_mt(w->wt, m->id, reply.buf, reply.len) != 0)
        hostd__log(HOSTD_LOG_DEBUG, "tenant %u: reply after close dropped", w->id);
      memset(&reply, 0, sizeof(reply));
    } else if (rc != 0) {
      struct close_req *c = calloc(1, sizeof(*c));
      hostd__log(HOSTD_LOG_INFO, "tenant %u: %s request (op %u): %s; closing it", w->id,
                 rc == -EPROTO ? "malformed" : "failed", op, why ? why : wire_strerror(rc));
      pthread_mutex_lock(&w->mu);
      w->broken = true;
      pthread_mutex_unlock(&w->mu);
      if (c) {
        wire_tenant_ref(w->wt);
        c->wt = w->wt;
        snprintf(c->why, sizeof(c->why), "%s", why ? why : "request failed");
        pthread_mutex_lock(&s->lock);
        c->next = s->to_close;
        s->to_close = c;
        pthread_mutex_unlock(&s->lock);
        uv_async_send(&s->close_async);
      }
    }
    msg_free(w, m);
  }
  /* The tenant is gone: free everything it owned on the GPU. */
  hostd__tenant_free(t);
  guest_wr_free(&reply);
  hostd__log(HOSTD_LOG_INFO, "tenant %u cleaned up", w->id);
  wire_tenant_unref(w->wt);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  free(w);
  pthread_mutex_lock(&s->lock);
  s->live--;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

/* ---- wire callbacks (loop thread) ---- */

static int on_connect(wire_server_t *ws, wire_tenant_t *wt, const wire_tenant_info_t *info,
                      char *why, size_t why_len) {
  hostd_server_t *s = wire_server_data(ws);
  worker_t *w = calloc(1, sizeof(*w));
  pthread_t th;
  pthread_attr_t attr;

  if (!w || s->stopping) {
    snprintf(why, why_len, "%s", w ? "tallyd is shutting down" : "out of memory");
    free(w);
    return WIRE_EREFUSED;
  }
  w->srv = s;
  w->wt = wt;
  pthread_mutex_init(&w->mu, NULL);
  pthread_cond_init(&w->cv, NULL);
  pthread_mutex_lock(&s->lock);
  w->id = ++s->next_id;
  pthread_mutex_unlock(&s->lock);
  wire_tenant_ref(wt);
  wire_tenant_set_data(wt, w);
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&th, &attr, worker_main, w) != 0) {
    pthread_attr_destroy(&attr);
    wire_tenant_set_data(wt, NULL);
    wire_tenant_unref(wt);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    free(w);
    snprintf(why, why_len, "no thread for this tenant");
    return WIRE_EREFUSED;
  }
  pthread_attr_destroy(&attr);
  pthread_mutex_lock(&s->lock);
  s->live++;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  hostd__log(HOSTD_LOG_INFO, "tenant %u '%s' connected (%s, %s)", w->id, info->name,
             info->transport, info->peer);
  return 0;
}

static void on_msg(wire_server_t *ws, wire_tenant_t *wt, const wire_msg_t *m) {
  worker_t *w = wire_tenant_data(wt);
  msg_t *q = calloc(1, sizeof(*q));
  (void)ws;
  if (!w || !q) {
    free(q);
    wire_tenant_close(wt, -ENOMEM, "out of memory queueing a request");
    return;
  }
  q->kind = m->kind;
  q->id = m->id;
  q->len = m->len;
  if (m->len > COPY_MAX) {
    wire_tenant_pause(wt); /* the worker resumes it after using the bytes */
    q->data = (uint8_t *)m->data;
    q->paused = true;
  } else {
    q->data = malloc(m->len ? m->len : 1);
    if (!q->data) {
      free(q);
      wire_tenant_close(wt, -ENOMEM, "out of memory queueing a request");
      return;
    }
    memcpy(q->data, m->data, m->len);
  }
  pthread_mutex_lock(&w->mu);
  if (w->tail)
    w->tail->next = q;
  else
    __atomic_store_n(&w->head, q, __ATOMIC_RELEASE); /* read by a spinning worker */
  w->tail = q;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static void on_close(wire_server_t *ws, wire_tenant_t *wt, int status, const char *why) {
  worker_t *w = wire_tenant_data(wt);
  (void)ws;
  if (!w)
    return;
  if (status == -EPROTO || status == -EMSGSIZE)
    hostd__log(HOSTD_LOG_INFO, "tenant %u sent bad bytes: %s", w->id, why ? why : "?");
  else
    hostd__log(HOSTD_LOG_INFO, "tenant %u left (%s)", w->id,
               status == 0 ? "orderly close" : wire_strerror(status));
  wire_tenant_set_data(wt, NULL);
  pthread_mutex_lock(&w->mu);
  w->closed = true;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

static bool blob_has(wire_server_t *ws, wire_tenant_t *wt, uint64_t id) {
  size_t len;
  (void)ws, (void)wt;
  return hostd__modcache_get(id, &len) != NULL;
}

static int blob_put(wire_server_t *ws, wire_tenant_t *wt, uint64_t id, const void *data,
                    size_t len) {
  hostd_server_t *s = wire_server_data(ws);
  (void)wt;
  __atomic_fetch_add(&s->blob_puts, 1, __ATOMIC_RELAXED);
  return hostd__modcache_put(id, data, len);
}

/* ---- the loop ---- */

static void begin_stop(hostd_server_t *s) {
  if (s->stopping)
    return;
  s->stopping = true;
  wire_server_close(s->ws); /* on_close for every tenant */
  s->ws = NULL;
  if (s->signals) {
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
  }
  uv_close((uv_handle_t *)&s->stop_async, NULL);
  uv_close((uv_handle_t *)&s->close_async, NULL);
}

static void on_signal(uv_signal_t *h, int signum) {
  hostd__log(HOSTD_LOG_INFO, "%s: shutting down", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  begin_stop(h->data);
}

static void on_stop(uv_async_t *h) {
  begin_stop(h->data);
}

static void on_close_requests(uv_async_t *h) {
  hostd_server_t *s = h->data;
  struct close_req *c;
  pthread_mutex_lock(&s->lock);
  c = s->to_close;
  s->to_close = NULL;
  pthread_mutex_unlock(&s->lock);
  while (c) {
    struct close_req *n = c->next;
    if (!s->stopping)
      wire_tenant_close(c->wt, -EPROTO, c->why);
    wire_tenant_unref(c->wt);
    free(c);
    c = n;
  }
}

static int read_token(const char *file, char *out, size_t cap) {
  FILE *f;
  size_t n;
  out[0] = 0;
  if (!file || !*file)
    return 0;
  f = fopen(file, "r");
  if (!f)
    return -errno;
  n = fread(out, 1, cap - 1, f);
  fclose(f);
  out[n] = 0;
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r'))
    out[--n] = 0;
  return 0;
}

int hostd_server_new(hostd_server_t **out, const hostd_config_t *cfg, bool handle_signals) {
  hostd_server_t *s = calloc(1, sizeof(*s));
  wire_server_opts_t opts;
  wire_server_cb_t cb;
  int dev = 0, rc;
  CUresult r;

  if (!s)
    return -ENOMEM;
  hostd__log_level = cfg->log_level;
  if (cfg->gpus[0])
    dev = atoi(cfg->gpus); /* the first listed GPU: one device per daemon in this version */
  if ((rc = read_token(cfg->token_file, hostd__token, sizeof(hostd__token))) != 0) {
    hostd__log(HOSTD_LOG_ERROR, "--token-file %s: %s", cfg->token_file, strerror(-rc));
    goto fail_token;
  }
  r = hostd__gpu.init(dev, &hostd__snapshot);
  if (r != CUDA_SUCCESS) {
    hostd__log(HOSTD_LOG_ERROR, "GPU %d (%s backend) cannot be used: CUresult %d", dev,
               hostd__gpu.name, (int)r);
    rc = -ENODEV;
    goto fail_token;
  }
  hostd__ndev = 1;
  hostd__modcache_init(cfg->state_dir);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->changed, NULL);
  if ((rc = uv_loop_init(&s->loop)) != 0)
    goto fail_loop;
  uv_async_init(&s->loop, &s->stop_async, on_stop);
  uv_async_init(&s->loop, &s->close_async, on_close_requests);
  s->stop_async.data = s->close_async.data = s;
  memset(&opts, 0, sizeof(opts));
  opts.unix_path = cfg->unix_path[0] ? cfg->unix_path : NULL;
  opts.tcp_addr = cfg->tcp_addr[0] ? cfg->tcp_addr : NULL;
  opts.token = hostd__token[0] ? hostd__token : NULL;
  opts.shm_spin_us = cfg->spin_us;
  s->spin_ns = (uint64_t)cfg->spin_us * 1000u;
  memset(&cb, 0, sizeof(cb));
  cb.on_connect = on_connect;
  cb.on_msg = on_msg;
  cb.on_close = on_close;
  cb.blob_has = blob_has;
  cb.blob_put = blob_put;
  if ((rc = wire_server_new(&s->ws, &s->loop, &opts, &cb, s)) != 0) {
    hostd__log(HOSTD_LOG_ERROR, "cannot listen on%s%s%s%s: %s", opts.unix_path ? " unix:" : "",
               opts.unix_path ? opts.unix_path : "", opts.tcp_addr ? " tcp:" : "",
               opts.tcp_addr ? opts.tcp_addr : "", wire_strerror(rc));
    goto fail_listen;
  }
  if (handle_signals) {
    s->signals = true;
    uv_signal_init(&s->loop, &s->sigterm);
    uv_signal_init(&s->loop, &s->sigint);
    s->sigterm.data = s->sigint.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
  }
  hostd__log(HOSTD_LOG_INFO, "serving %s (%s backend) on%s%s%s%s (port %d)", hostd__snapshot.name,
             hostd__gpu.name, opts.unix_path ? " unix:" : "", opts.unix_path ? opts.unix_path : "",
             opts.tcp_addr ? " tcp:" : "", opts.tcp_addr ? opts.tcp_addr : "",
             wire_server_tcp_port(s->ws));
  *out = s;
  return 0;
fail_listen:
  uv_close((uv_handle_t *)&s->stop_async, NULL);
  uv_close((uv_handle_t *)&s->close_async, NULL);
  uv_run(&s->loop, UV_RUN_DEFAULT);
  uv_loop_close(&s->loop);
fail_loop:
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->changed);
  hostd__modcache_close();
  hostd__gpu.shutdown();
fail_token:
  free(s);
  return rc;
}

int hostd_server_tcp_port(const hostd_server_t *s) {
  return s->ws ? wire_server_tcp_port(s->ws) : 0;
}

unsigned long hostd_server_blob_puts(const hostd_server_t *s) {
  return __atomic_load_n(&s->blob_puts, __ATOMIC_RELAXED);
}

unsigned long hostd_server_calls(const hostd_server_t *s) {
  return __atomic_load_n(&s->calls, __ATOMIC_RELAXED);
}

int hostd_server_run(hostd_server_t *s) {
  uv_run(&s->loop, UV_RUN_DEFAULT);
  /* wire's server is closed: wait for every worker to clean its tenant up. */
  pthread_mutex_lock(&s->lock);
  while (s->live > 0)
    pthread_cond_wait(&s->changed, &s->lock);
  pthread_mutex_unlock(&s->lock);
  return 0;
}

void hostd_server_stop(hostd_server_t *s) {
  uv_async_send(&s->stop_async);
}

int hostd_server_wait_tenants(hostd_server_t *s, int n, int timeout_ms) {
  struct timespec ts;
  int rc = 0;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += timeout_ms / 1000;
  ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  pthread_mutex_lock(&s->lock);
  while (s->live != n && rc == 0)
    rc = pthread_cond_timedwait(&s->changed, &s->lock, &ts);
  pthread_mutex_unlock(&s->lock);
  return rc == 0 ? 0 : -ETIMEDOUT;
}

void hostd_server_free(hostd_server_t *s) {
  if (!s)
    return;
  uv_loop_close(&s->loop);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->changed);
  hostd__modcache_close();
  hostd__gpu.shutdown();
  free(s);
}
