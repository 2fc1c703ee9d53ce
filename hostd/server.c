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
 * After a GPU fault (a tenant's call returned a context-corrupting error:
 * tenant.c marks every tenant lost and raises it, restart.c) the process is
 * poisoned for good, so the server restarts it: new tenants are refused
 * with -EAGAIN ("come back later"), and once the last tenant has left, or
 * --restart-grace-ms has passed and the rest were closed with a reason
 * naming the fault, the loop stops without closing the listening sockets
 * and hostd_server_run returns HOSTD_SERVER_RESTART (main.c re-executes).
 *
 * Lock story: `lock` guards the live count, the worker list and
 * `async_open`; each worker's `mu` guards its queue and flags (loop thread
 * enqueues, worker dequeues).  The wire tenant is kept alive for the worker
 * with wire_tenant_ref.  The restart state is the loop thread's.
 */
#include "hostd/gpu.h"
#include "hostd/guard.h"
#include "hostd/hostd-int.h"
#include "hostd/sched.h"

#include <errno.h>
#include <grp.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>
#include <xxhash.h>

#include "wire/wire.h"

/* Payloads up to this size are copied into the worker's queue; larger ones
 * (bulk copies, up to 8 MiB) stay in wire's buffer while the tenant is
 * paused, so a 64 MiB copy is not copied twice on the host. */
#define COPY_MAX (64u << 10)

/* A queued message that is not the guest's: a memfd the loop thread mapped
 * in on_fd, for the worker to record (data: a fd_map_t). */
#define MSG_FD_MAP 0

/* No allocation per request on the common path: a request of up to
 * MSG_SMALL bytes (a launch, a synchronisation) is copied into a message of
 * that capacity, which the worker hands back through its pool (a ring of
 * MSG_POOL, the worker the only producer and the loop thread the only
 * consumer) for the loop to take for the next one.  An empty pool means
 * malloc, a full one free.  MSG_POOL covers a burst the loop queues ahead of
 * the worker: a 1000-kernel chain arrives in about 0.4 ms and runs for 2.5,
 * so it queues some 850 launches; with a smaller pool the rest were each
 * malloc'd by the loop and freed by the worker, under the loop's arena lock.
 * The pool keeps at most MSG_POOL x (MSG_SMALL + a header), about 580 KiB, for a
 * tenant that queued that deep, until it goes.  A reply of up to
 * REPLY_KEEP bytes is sent from the worker's own buffer
 * (wire_tenant_reply_mt_copy); a larger one is handed to wire, so a worker
 * never keeps a large buffer. */
#define MSG_SMALL  512
#define MSG_POOL   1024
#define REPLY_KEEP (64u << 10)

typedef struct fd_map {
  uint64_t tag;
  void *addr;
  size_t size;
} fd_map_t;

/* Largest pinned allocation a guest may share: the daemon maps all of it. */
#define PINNED_MAX ((size_t)64 << 30)

/* The bytes of a queued message the worker fetches ahead while it runs the
 * one before (a launch's header and request fit). */
#define MSG_PREFETCH 256

typedef struct msg {
  int kind; /* wire_msg_kind_t, or MSG_FD_MAP */
  uint64_t at_ns; /* read by the loop (monotonic; latency-critical tenants or --hops) */
  uint64_t id;
  uint8_t *data; /* owned copy, or wire's buffer when paused */
  size_t len;
  bool paused; /* data is wire's: resume the tenant when done */
  bool pooled; /* copy[] holds MSG_SMALL bytes: back to the worker's pool */
  struct msg *next;
  uint8_t copy[]; /* a copied payload (data points here) */
} msg_t;

typedef struct worker {
  hostd_server_t *srv;
  wire_tenant_t *wt;
  uint32_t id;
  char name[WIRE_TENANT_MAX + 1]; /* the tenant's name, for the restart's log lines */
  struct worker *prev, *next;     /* the server's list of workers, under srv->lock */
  bool closed;        /* on_close ran, under mu */
  bool broken;        /* a malformed request: ignore the rest, under mu */
  hostd_hostfn_t *hf; /* host functions; made by the loop thread at first use
                         (on_msg), read by the worker under mu */
  /* For quotas and the operator's view (guard.h); counters are atomics. */
  hostd_quota_t quota;
  wire_tenant_info_t info; /* a copy: the view reads it without the loop */
  int64_t since;           /* connected at (epoch seconds) */
  hostd_lat_t *lat;        /* latency-critical only: its requests (latency.c) */
  bool poll;               /* latency-critical under --lc-poll: never sleeps on cv */
  bool want_dr;            /* poll and --lc-direct: read the ring itself once wire has it */
  int cpu;                 /* the CPU it is pinned to (--lc-poll-cpu), -1 = none; atomic */
  wire_direct_t *dr;       /* the tenant's ring, read by this worker (wire_tenant_direct) */
  uint64_t wake_until;     /* atomic: poll the queue until then (monotonic ns) instead of
                              sleeping; set by a reached host function (hostfn_cue) */
  hostd_hops_t *hops;      /* --hops: this tenant's hand-off times (worker), or NULL */
  /* What the loop thread writes per request, on cache lines of its own, and
   * below it what the worker writes per request on others: a launch burst
   * queued by one and executed by the other moves no line back and forth
   * but the queue's.  Each counter has one writer (no atomic add). */
  _Alignas(64) pthread_mutex_t mu;
  pthread_cond_t cv;
  msg_t *head, *tail; /* queue, under mu */
  uint64_t enqueued;  /* requests queued (loop thread) */
  _Atomic uint32_t pool_tail;
  _Alignas(64) uint64_t executed; /* requests taken from the queue (worker); the difference
                                     is the queue's length */
  uint64_t kernels;               /* launches executed */
  uint64_t calls;                 /* synchronous requests answered, counted before the reply */
  uint64_t rx_bytes;              /* payload bytes of the requests it read itself (direct) */
  uint32_t pool_put;       /* the worker's own head: pool_head trails it by < POOL_PUBLISH */
  uint32_t pool_tail_seen; /* pool_tail when the worker last looked */
  /* On a line of its own: the loop reads it at every message it queues, and
   * the worker's counters above are written at every request. */
  _Alignas(64) _Atomic uint32_t pool_head;
  /* Free small messages (MSG_SMALL): the worker puts them at pool_put and
   * publishes pool_head, the loop thread takes them at pool_tail; each index
   * is written by one side only.  Emptied by worker_done. */
  _Alignas(64) msg_t *pool[MSG_POOL];
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
  unsigned long calls;     /* synchronous requests answered by departed tenants, under
                              lock (the live ones count their own: worker_t.calls) */
  /* Payload bytes of every request (tests count them): those the loop read
   * (loop thread only), those of departed workers' own reading (under lock);
   * a live worker counts its own (worker_t.rx_bytes).  No shared counter:
   * a locked addition on the launch path costs a launch (launch-ways). */
  uint64_t rx_bytes;
  uint64_t rx_bytes_gone;
  uint64_t spin_ns;        /* a worker polls its queue this long before sleeping (worker_spin_us) */
  bool lc_poll;            /* --lc-poll resolved: the LC worker polls without end */
  bool lc_direct;          /* lc_poll and --lc-direct: the LC worker reads its own ring */
  bool lc_direct_tcp;      /* and its own TCP socket (--lc-direct yes, not shm) */
  bool hostfn_word;        /* --hostfn-word: workers poll their host functions' reach words */
  int dev;                 /* the GPU ordinal served */
  cpu_set_t cpus;          /* tallyd's affinity at start: what --lc-poll-cpu auto picks from */
  cpu_set_t pinned;        /* CPUs given to polling workers (under lock) */
  int16_t core_of[CPU_SETSIZE]; /* each CPU's core (hostd__pin_cores), read at start */
  uint64_t test_gap_ns;    /* TALLYD_TEST_DIRECT_GAP_US (tests only): the worker waits this
                              long between choosing its ring and reading it */
  uint64_t hostfn_wake_ns; /* --hostfn-wake-us resolved (0 = no cue) */
  unsigned long hostfn_wakes; /* cues given to sleeping or busy workers (tests count them) */
  /* Restart after a GPU fault (loop thread, except as noted). */
  uv_async_t restart_async; /* a fault was raised or the last tenant left */
  uv_timer_t grace_timer;   /* --restart-grace-ms, then the drain bound */
  bool async_open;          /* restart_async may be sent to (under lock) */
  int grace_ms;
  enum { RESTART_NONE, RESTART_PENDING, RESTART_CLOSING, RESTART_DUE } restart;
  worker_t *workers;    /* every worker not yet finished (under lock) */
  int lc_tenants;       /* latency-critical tenants connected (loop thread) */
  char fault_what[192]; /* the fault, named when the restart became pending */
  /* Production guards (guard.h). */
  hostd_config_t cfg;                /* a copy: quotas are set up per tenant from it */
  char token[WIRE_TOKEN_MAX + 1];    /* "" = none */
  hostd_ctl_t *ctl;                  /* control socket and /metrics, or NULL */
  int64_t started;
};

/* ---- worker thread ---- */

/* A worker's queue lock, taken by the loop thread once per message and by
 * the worker once per batch.  Adaptive: when the worker is awake (polling
 * or cued) the two meet on it at message rate, and a default mutex would
 * put the loser to sleep in the kernel for a critical section of a few
 * dozen nanoseconds; this one spins a little first. */
static void worker_mutex_init(pthread_mutex_t *mu) {
  pthread_mutexattr_t a;
  bool adaptive = false;
  if (pthread_mutexattr_init(&a) == 0) {
    adaptive = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP) == 0 &&
               pthread_mutex_init(mu, &a) == 0;
    pthread_mutexattr_destroy(&a);
  }
  if (!adaptive)
    pthread_mutex_init(mu, NULL); /* cannot fail on glibc; a plain mutex works too */
}

/* n more in a counter that only the calling thread writes (others read
 * it): a plain addition, published whole, instead of a locked add. */
static inline void count_add(uint64_t *c, uint64_t n) {
  __atomic_store_n(c, *c + n, __ATOMIC_RELAXED);
}

static inline void count(uint64_t *c) {
  count_add(c, 1);
}

/* The loop thread's side of the pool: a free small message, or NULL. */
static msg_t *pool_take(worker_t *w) {
  uint32_t t = atomic_load_explicit(&w->pool_tail, memory_order_relaxed);
  msg_t *m;
  if (t == atomic_load_explicit(&w->pool_head, memory_order_acquire))
    return NULL;
  m = w->pool[t % MSG_POOL];
  atomic_store_explicit(&w->pool_tail, t + 1, memory_order_release);
  return m;
}

/* The worker publishes the messages it gave back in groups of this many, and
 * whenever it runs out of requests (pool_publish): the loop reads pool_head
 * at every pool_take, so each store to it is a write to a line another core
 * just read, at every launch of a burst the loop queued. */
#define POOL_PUBLISH 16

/* The worker's side: the loop sees what it gave back. */
static void pool_publish(worker_t *w) {
  if (atomic_load_explicit(&w->pool_head, memory_order_relaxed) != w->pool_put)
    atomic_store_explicit(&w->pool_head, w->pool_put, memory_order_release);
}

/* The worker's side: false when the pool is full (the caller frees m). */
static bool pool_give(worker_t *w, msg_t *m) {
  uint32_t h = w->pool_put;
  if (h - w->pool_tail_seen >= MSG_POOL) { /* full when last seen: look again */
    w->pool_tail_seen = atomic_load_explicit(&w->pool_tail, memory_order_acquire);
    if (h - w->pool_tail_seen >= MSG_POOL)
      return false;
  }
  w->pool[h % MSG_POOL] = m;
  w->pool_put = h + 1;
  if (w->pool_put - atomic_load_explicit(&w->pool_head, memory_order_relaxed) >= POOL_PUBLISH)
    atomic_store_explicit(&w->pool_head, w->pool_put, memory_order_release);
  return true;
}

static void msg_free(worker_t *w, msg_t *m) {
  if (m->kind == MSG_FD_MAP && m->data) { /* never executed: the tenant left */
    fd_map_t *f = (fd_map_t *)m->data;
    munmap(f->addr, f->size);
    free(f);
  } else if (m->paused) {
    wire_tenant_resume(w->wt);
  } /* else: a copied payload lives inside m */
  if (!m->pooled || !pool_give(w, m))
    free(m);
}

/* The latency-critical tenant's request of op was executed and, for a call,
 * its reply went out (so this clock read is not on the guest's way): h is
 * the reply's header, NULL for a post (latency.c says what a request is). */
static void note_latency(worker_t *w, const msg_t *m, uint32_t op, const call_reply_hdr_t *h) {
  if (!w->lat)
    return;
  hostd__lat_request(w->lat, op, m->at_ns);
  if (h)
    hostd__lat_answered(w->lat, op, h->result, hostd__mono_ns());
}

/* --hostfn-word: while it polls, the worker also reaches its tenant's host
 * functions whose words the GPU wrote (hostfn.c). */
static void poll_hostfns(const worker_t *w) {
  hostd_hostfn_t *hf;
  if (w->srv->hostfn_word && (hf = __atomic_load_n(&w->hf, __ATOMIC_ACQUIRE)))
    (void)hostd__hostfn_poll(hf);
}

/* Polls w's queue for up to ns: true when a request is there, false when
 * the time passed or the tenant closed first. */
static bool poll_head(const worker_t *w, uint64_t ns) {
  uint64_t end = hostd__mono_ns() + ns;
  while (!__atomic_load_n(&w->head, __ATOMIC_ACQUIRE) && !(w->dr && wire_direct_ready(w->dr))) {
    if (__atomic_load_n(&w->closed, __ATOMIC_ACQUIRE) || hostd__mono_ns() >= end)
      return false;
    poll_hostfns(w);
  }
  return true;
}

/* next_batch's answer when the queue is empty and the tenant's ring, which
 * this worker reads itself, holds a request (direct_step runs it). */
static msg_t direct_mark;

/* Waits for the worker's next requests and takes them all (one lock round
 * per batch, not per request: a launch burst arrives hundreds at a time;
 * hostd-bench).  NULL once the tenant is closed and its queue drained. */
static msg_t *next_batch(worker_t *w, hostd_tenant_t *t) {
  hostd_server_t *s = w->srv;
  msg_t *batch;
  if (w->poll) {
    /* --lc-poll: the latency-critical worker owns a core and never sleeps
     * while its tenant is connected, so a request after an idle gap costs
     * no futex wakeup.  A yield now and then lets a forced --lc-poll yes
     * on a small host still make progress. */
    unsigned spins = 0;
    while (!__atomic_load_n(&w->head, __ATOMIC_ACQUIRE) &&
           !__atomic_load_n(&w->closed, __ATOMIC_ACQUIRE)) {
      /* The queue first: what the loop read before it handed the ring over. */
      if (w->dr && wire_direct_ready(w->dr))
        return &direct_mark;
      poll_hostfns(w);
      if ((++spins & 1023) == 0) {
        if (w->want_dr && !w->dr)
          w->dr = wire_tenant_direct(w->wt); /* wire has it once the WELCOME went */
        sched_yield();
      }
    }
  } else if (s->spin_ns) {
    /* Bounded poll (worker_spin_us) saves the condition-variable wakeup
     * when the tenant's next request follows closely (launch + sync). */
    (void)poll_head(w, s->spin_ns);
  }
  pthread_mutex_lock(&w->mu);
  while (!w->head && !w->closed) {
    /* A host function of the tenant was reached (hostfn_cue): its next
     * requests are on their way; poll for them rather than sleep. */
    uint64_t until = __atomic_exchange_n(&w->wake_until, 0, __ATOMIC_ACQ_REL), now = hostd__mono_ns();
    if (until > now) {
      pthread_mutex_unlock(&w->mu);
      (void)poll_head(w, until - now);
      pthread_mutex_lock(&w->mu);
      continue;
    }
    pthread_cond_wait(&w->cv, &w->mu);
  }
  batch = w->head;
  w->head = w->tail = NULL;
  if (w->hf && t)
    hostd__tenant_set_hostfn(t, w->hf); /* made by on_msg before any HOSTFN */
  pthread_mutex_unlock(&w->mu);
  return batch;
}

/* A polling (--lc-poll) worker that ran out of requests waits up to this
 * long for the next before its quiet point: when a synchronisation follows
 * closely (launch + sync, a request's last kernel then its sync), the wait
 * itself tells the scheduler the launches are done (hostd__sched_synced),
 * and the quiet point's event record, which would have delayed it, is not
 * needed. */
#define QUIET_WAIT_NS 10000

static bool more_soon(const worker_t *w) {
  return w->poll && poll_head(w, QUIET_WAIT_NS);
}

/* A request failed or was malformed: ignore the rest and have the loop
 * close the tenant with why. */
static void ask_close(worker_t *w, const char *why) {
  hostd_server_t *s = w->srv;
  struct close_req *c = calloc(1, sizeof(*c));
  pthread_mutex_lock(&w->mu);
  __atomic_store_n(&w->broken, true, __ATOMIC_RELEASE); /* read by this thread only now */
  pthread_mutex_unlock(&w->mu);
  if (!c)
    return;
  wire_tenant_ref(w->wt);
  c->wt = w->wt;
  snprintf(c->why, sizeof(c->why), "%s", why ? why : "request failed");
  pthread_mutex_lock(&s->lock);
  c->next = s->to_close;
  s->to_close = c;
  pthread_mutex_unlock(&s->lock);
  uv_async_send(&s->close_async);
}

/* The CPU worker_pin took for w is free again. */
static void worker_unpin(worker_t *w, int cpu) {
  pthread_mutex_lock(&w->srv->lock);
  CPU_CLR(cpu, &w->srv->pinned);
  pthread_mutex_unlock(&w->srv->lock);
}

/* The tenant is gone and everything it owned freed: leave the server. */
static void worker_done(worker_t *w) {
  hostd_server_t *s = w->srv;
  bool idle;
  if (w->dr) {
    uint64_t read, given;
    wire_direct_counts(w->dr, &read, &given);
    hostd__log(HOSTD_LOG_INFO,
               "tenant %u cleaned up (its worker read %llu frames from its ring itself; %llu "
               "went to the loop)",
               w->id, (unsigned long long)read, (unsigned long long)given);
    wire_direct_release(w->dr);
  } else {
    hostd__log(HOSTD_LOG_INFO, "tenant %u cleaned up", w->id);
  }
  wire_tenant_unref(w->wt);
  pthread_mutex_lock(&s->lock);
  if (w->cpu >= 0)
    CPU_CLR(w->cpu, &s->pinned);
  if (w->prev)
    w->prev->next = w->next;
  else
    s->workers = w->next;
  if (w->next)
    w->next->prev = w->prev;
  s->live--;
  s->calls += __atomic_load_n(&w->calls, __ATOMIC_RELAXED);
  s->rx_bytes_gone += __atomic_load_n(&w->rx_bytes, __ATOMIC_RELAXED);
  idle = s->live == 0;
  pthread_cond_broadcast(&s->changed);
  if (s->live == 0 && s->async_open)
    uv_async_send(&s->restart_async); /* a pending restart may go now */
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_destroy(&w->mu);
  pthread_cond_destroy(&w->cv);
  pool_publish(w);
  for (msg_t *m; (m = pool_take(w)) != NULL;) /* no on_msg can run for it now */
    free(m);
  free(w->lat);
  free(w);
  /* Every worker thread had its own malloc arena; with no tenant left,
   * give their free pages back, so the daemon's memory returns to its
   * baseline after a burst of tenants. */
  if (idle)
    malloc_trim(0);
}

/* Executes one queued request of tenant t: its reply goes to wire; a
 * malformed or failed one closes the tenant with the reason. */
static void worker_exec(worker_t *w, hostd_tenant_t *t, msg_t *m, wire_buf_t *reply,
                        uint64_t taken) {
  const char *why = NULL;
  uint32_t op = 0;
  int rc = -EPROTO;
  hostd_hop_t hop = {m->id, 0, m->kind == WIRE_MSG_CALL, {m->at_ns, taken, 0, 0, 0}};
  call_reply_hdr_t rh;
  bool answered = false; /* rh holds the reply's header */

  if (m->len >= CALL_HDR_LEN) {
    call_hdr_t h;
    call_hdr_read(m->data, &h);
    op = h.op;
    /* A post must say ASYNC and a call must not: the guest's framing. */
    if (h.len == m->len - CALL_HDR_LEN && ((h.flags & CALL_ASYNC) != 0) == (m->kind == WIRE_MSG_POST)) {
      hop.t[2] = w->hops ? hostd__mono_ns() : 0;
      rc = hostd__tenant_exec(t, op, h.flags, m->data + CALL_HDR_LEN, h.len, reply, &why);
      hop.t[3] = w->hops ? hostd__mono_ns() : 0;
    } else
      why = "request header does not match its wire message";
    if (rc == 0 && op == CALL_OP_LAUNCH)
      count(&w->kernels);
  } else {
    why = "request shorter than its header";
  }
  if (rc == 0 && m->kind == WIRE_MSG_CALL) {
    int e;
    if (w->lat && reply->len >= CALL_REPLY_HDR_LEN) {
      call_reply_hdr_read(reply->data, &rh);
      answered = true;
    }
    /* Counted before the reply, on the worker's own line: whoever reads the
     * count after the answer came sees it. */
    count(&w->calls);
    if (reply->cap <= REPLY_KEEP) { /* sent from our buffer, kept for the next */
      e = wire_tenant_reply_mt_copy(w->wt, m->id, reply->data, reply->len);
      wire_buf_reset(reply);
    } else { /* wire takes the large buffer; the next reply grows a new one */
      e = wire_tenant_reply_mt(w->wt, m->id, reply->data, reply->len);
      wire_buf_init(reply);
    }
    if (e != 0)
      hostd__log(HOSTD_LOG_DEBUG, "tenant %u: reply dropped (%s)", w->id, wire_strerror(e));
    hop.t[4] = w->hops ? hostd__mono_ns() : 0;
  } else if (rc != 0) {
    hostd__log(HOSTD_LOG_INFO, "tenant %u: %s request (op %u): %s; closing it", w->id,
               rc == -EPROTO ? "malformed" : "failed", op, why ? why : wire_strerror(rc));
    ask_close(w, why);
  }
  if (rc == 0)
    note_latency(w, m, op, answered ? &rh : NULL);
  hostd__tenant_replied(t); /* after the reply: what need not delay it */
  if (w->hops) {
    hop.op = op;
    hostd__hops_add(w->hops, &hop);
  }
}

/* ---- direct reading: the worker reads its tenant's ring (wire.h) ---- */

/* The ops the loop thread must see when it reads them (loop_handles); the
 * worker's own reading of the ring (direct_ok) leaves them to it. */
static bool loop_sees(uint32_t op) {
  return op == CALL_OP_GRAPH_ADD || op == CALL_OP_HOSTFN_WAIT || op == CALL_OP_HOSTFN;
}

typedef struct direct_ctx {
  worker_t *w;
  hostd_tenant_t *t;
  wire_buf_t *reply;
} direct_ctx_t;

/* What the loop must see stays the loop's (loop_sees): host functions and
 * graphs with host nodes.  Everything else runs here as it would after the
 * hand-off, but none while the worker's queue holds requests: the loop read
 * those before it last handed the ring over, so they come first.  wire asks
 * after its look at the ring's owner and before its claim, so a hand-over
 * that follows a queueing (the loop queues, then hands over) is seen with
 * the queued request; the frame goes back to the loop, which queues it
 * behind them. */
static bool direct_ok(void *ctx, const wire_msg_t *m) {
  const direct_ctx_t *d = ctx;
  call_hdr_t h;
  if (m->len < CALL_HDR_LEN || __atomic_load_n(&d->w->head, __ATOMIC_ACQUIRE))
    return false; /* the loop's path says what is wrong with it, or queues it */
  call_hdr_read(m->data, &h);
  return !loop_sees(h.op);
}

static void direct_run(void *ctx, const wire_msg_t *wm) {
  direct_ctx_t *d = ctx;
  worker_t *w = d->w;
  msg_t m = {.kind = (int)wm->kind,
             .at_ns = w->hops || w->lat ? wm->rx_ns : 0,
             .id = wm->id,
             .data = (uint8_t *)(uintptr_t)wm->data, /* wire's copy, ours until we return */
             .len = wm->len};
  count_add(&w->rx_bytes, wm->len);
  if (__atomic_load_n(&w->closed, __ATOMIC_ACQUIRE) ||
      __atomic_load_n(&w->broken, __ATOMIC_ACQUIRE) || !d->t)
    return; /* nothing more is executed for this tenant */
  worker_exec(w, d->t, &m, d->reply, w->hops ? hostd__mono_ns() : 0);
}

/* Runs the next frame of the tenant's ring, when wire lets this worker
 * read it (else the loop does and queues it). */
static void direct_step(worker_t *w, hostd_tenant_t *t, wire_buf_t *reply) {
  direct_ctx_t d = {w, t, reply};
  if (w->srv->test_gap_ns) /* TALLYD_TEST_DIRECT_GAP_US: widen the window for tests */
    for (uint64_t end = hostd__mono_ns() + w->srv->test_gap_ns; hostd__mono_ns() < end;)
      ;
  (void)wire_direct_read(w->dr, direct_ok, direct_run, &d);
}

/* --lc-poll-cpu: a polling latency-critical worker runs on CPU N, or (auto)
 * on one pin.c picks; N goes to one worker at a time, the others get what
 * auto would give them, so no CPU polls for two tenants. worker_done gives
 * the CPU back. */
static void worker_pin(worker_t *w) {
  hostd_server_t *s = w->srv;
  int want = s->cfg.lc_poll_cpu, cpu, rc;
  cpu_set_t set;
  if (!w->poll || want == -1)
    return;
  pthread_mutex_lock(&s->lock);
  if (want >= 0 && !CPU_ISSET(want, &s->pinned))
    cpu = want;
  else
    cpu = hostd__pin_pick(&s->cpus, &s->pinned, s->core_of, s->dev);
  if (cpu >= 0)
    CPU_SET(cpu, &s->pinned);
  pthread_mutex_unlock(&s->lock);
  if (cpu < 0) {
    hostd__log(HOSTD_LOG_INFO, "tenant %u: its polling worker is not pinned (--lc-poll-cpu: "
               "fewer than 4 CPUs allowed, or a quarter of them pinned already)", w->id);
    return;
  }
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if ((rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set)) != 0) {
    hostd__log(HOSTD_LOG_WARN, "tenant %u: cannot pin its worker to CPU %d (--lc-poll-cpu): %s",
               w->id, cpu, strerror(rc));
    worker_unpin(w, cpu);
    return;
  }
  __atomic_store_n(&w->cpu, cpu, __ATOMIC_RELAXED); /* the operator's view reads it */
  hostd__log(HOSTD_LOG_INFO, "tenant %u: its polling worker runs on CPU %d", w->id, cpu);
}

static void *worker_main(void *arg) {
  worker_t *w = arg;
  hostd_tenant_t *t = hostd__tenant_new(w->id, wire_tenant_info(w->wt)->local == false);
  wire_buf_t reply;
  /* The context is made current by the first request (hostd__tenant_exec),
   * under the lock that keeps a reset from running at the same time. */
  bool ok = t != NULL;

  msg_t *batch = NULL; /* taken from the queue, not yet executed */

  wire_buf_init(&reply);

  hostd__quota_self = &w->quota; /* tenant.c's handlers charge through it */
  worker_pin(w);
  if (!ok)
    hostd__log(HOSTD_LOG_ERROR, "tenant %u: cannot set up (out of memory)", w->id);
  for (;;) {
    msg_t *m;

    if (!batch)
      pool_publish(w); /* out of requests: the loop gets every message back */
    if (!batch && ok && !more_soon(w))
      hostd__tenant_quiet(t); /* LC launches get their completion event here */
    if (!batch && !(batch = next_batch(w, t)))
      break; /* closed and drained */
    if (batch == &direct_mark) {
      batch = NULL;
      direct_step(w, ok ? t : NULL, &reply);
      continue;
    }
    m = batch;
    batch = m->next;
    if (batch) /* the loop wrote it on its core: on its way here while m runs */
      for (unsigned off = 0; off < MSG_PREFETCH; off += 64)
        __builtin_prefetch((const uint8_t *)batch + off);
    count(&w->executed);
    if (__atomic_load_n(&w->closed, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&w->broken, __ATOMIC_ACQUIRE) || !ok) {
      msg_free(w, m); /* nothing more is executed for this tenant */
      continue;
    }
    if (m->kind == MSG_FD_MAP) {
      fd_map_t *f = (fd_map_t *)m->data;
      /* In the hops as a post of its own op: the registration is no request,
       * but the tenant's next request waits behind it. */
      hostd_hop_t hop = {0, HOSTD_HOP_PINNED_MAP, false, {m->at_ns, 0, 0, 0, 0}};
      hop.t[1] = hop.t[2] = w->hops ? hostd__mono_ns() : 0;
      int e = hostd__tenant_pinned_add(t, f->tag, f->addr, f->size); /* owns the mapping */
      if (w->hops) {
        hop.t[3] = hostd__mono_ns();
        hostd__hops_add(w->hops, &hop);
      }
      if (e)
        hostd__log(HOSTD_LOG_INFO, "tenant %u: shared pinned memory %#llx: %s", w->id,
                   (unsigned long long)f->tag, strerror(-e));
      free(f);
      m->data = NULL;
      msg_free(w, m);
      continue;
    }
    worker_exec(w, t, m, &reply, w->hops ? hostd__mono_ns() : 0);
    msg_free(w, m);
  }
  /* The tenant is gone: free everything it owned on the GPU. */
  hostd__tenant_free(t);
  hostd__modcache_unpin();
  hostd__quota_self = NULL;
  if (w->srv->hostfn_word && w->hf) {
    unsigned long by_word, by_cb;
    hostd__hostfn_counts(w->hf, &by_word, &by_cb);
    hostd__log(HOSTD_LOG_INFO, "tenant %u: host functions reached %lu by their word, %lu by the "
               "driver's callback", w->id, by_word, by_cb);
  }
  hostd__hostfn_set_cue(w->hf, NULL, NULL); /* a late driver callback must not touch w */
  hostd__hostfn_set_hops(w->hf, NULL);        /* ... nor the hops freed below */
  hostd__hostfn_unref(w->hf); /* on_close has run: nothing reaches it from the loop now */
  hostd__hops_free(w->hops);
  wire_buf_close(&reply);
  worker_done(w);
  return NULL;
}

/* ---- wire callbacks (loop thread) ---- */

/* --max-tenants reached?  Loop thread. */
static bool tenants_full(hostd_server_t *s) {
  bool full;
  pthread_mutex_lock(&s->lock);
  full = s->cfg.max_tenants > 0 && s->live >= s->cfg.max_tenants;
  pthread_mutex_unlock(&s->lock);
  return full;
}

/* Every connection that ended before its handshake: one rate-limited line
 * per peer (log.c).  A peer that merely left is logged at debug only. */
static void on_refuse(wire_server_t *ws, const wire_tenant_info_t *info, const char *key,
                      int status, const char *why) {
  (void)ws;
  if (status == WIRE_ECLOSED || status == -ECONNRESET || status == -ECANCELED) {
    hostd__log(HOSTD_LOG_DEBUG, "peer %s left before its handshake", info->peer);
    return;
  }
  hostd__log_refusal(key, info->peer[0] ? info->peer : "?", info->local ? (long)info->uid : -1,
                     status == -EBUSY       ? "shed"
                     : status == -ETIMEDOUT ? "handshake deadline"
                     : status == WIRE_ETOKEN ? "token"
                                             : wire_strerror(status),
                     why);
}

/* What the best-effort tenants are told (wire_tenant_note): whether a
 * latency-critical tenant is connected.  Loop thread. */
static uint32_t be_note(const hostd_server_t *s) {
  return s->lc_tenants == 0 ? CALL_NOTE_NO_LC : 0;
}

/* A latency-critical tenant came or went: tell every best-effort tenant
 * still open.  A worker whose tenant is not closed holds its tenant ref
 * (it finishes only after on_close, which runs on this thread).  A guest
 * that takes no notes keeps the conservative default.  Loop thread. */
static void publish_be_note(hostd_server_t *s) {
  uint32_t word = be_note(s);
  pthread_mutex_lock(&s->lock);
  for (worker_t *w = s->workers; w; w = w->next)
    if (w->info.prio != WIRE_PRIO_LATENCY_CRITICAL && !__atomic_load_n(&w->closed, __ATOMIC_ACQUIRE))
      (void)wire_tenant_note(w->wt, word);
  pthread_mutex_unlock(&s->lock);
}

static int on_connect(wire_server_t *ws, wire_tenant_t *wt, const wire_tenant_info_t *info,
                      char *why, size_t why_len) {
  hostd_server_t *s = wire_server_data(ws);
  /* Aligned, so that the per-thread groups of worker_t are on lines apart. */
  worker_t *w = aligned_alloc(_Alignof(worker_t), sizeof(*w));
  pthread_t th;
  pthread_attr_t attr;

  if (w)
    memset(w, 0, sizeof(*w));
  if (w && !s->stopping && (s->restart != RESTART_NONE || hostd__fault_pending(NULL))) {
    /* The process is poisoned; the guest retries (TALLY_CONNECT_WAIT_MS)
     * and is accepted by the restarted daemon on the same socket. */
    snprintf(why, why_len, "tallyd is restarting after a GPU fault; retry");
    free(w);
    return -EAGAIN;
  }
  if (!w || s->stopping) {
    snprintf(why, why_len, "%s", w ? "tallyd is shutting down" : "out of memory");
    free(w);
    return WIRE_EREFUSED;
  }
  if (tenants_full(s)) {
    snprintf(why, why_len, "tallyd serves its maximum of %d tenants (--max-tenants); retry",
             s->cfg.max_tenants);
    free(w);
    return -EAGAIN;
  }
  w->srv = s;
  w->wt = wt;
  w->cpu = -1;
  snprintf(w->name, sizeof(w->name), "%s", info->name);
  w->info = *info;
  w->since = (int64_t)time(NULL);
  hostd__quota_setup(&w->quota, &s->cfg, info->name, (int)info->prio);
  if (info->prio == WIRE_PRIO_LATENCY_CRITICAL) {
    w->lat = calloc(1, sizeof(*w->lat)); /* NULL: no latency shown, nothing else */
    w->poll = s->lc_poll;
    w->want_dr = s->lc_direct;
  }
  w->hops = hostd__hops_new(info->name); /* NULL unless --hops */
  worker_mutex_init(&w->mu);
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
    hostd__hops_free(w->hops);
    free(w->lat);
    free(w);
    snprintf(why, why_len, "no thread for this tenant");
    return WIRE_EREFUSED;
  }
  pthread_attr_destroy(&attr);
  pthread_mutex_lock(&s->lock);
  w->next = s->workers;
  if (s->workers)
    s->workers->prev = w;
  s->workers = w;
  s->live++;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  if (info->prio == WIRE_PRIO_LATENCY_CRITICAL) {
    if (s->lc_tenants++ == 0)
      publish_be_note(s);
  } else {
    (void)wire_tenant_note(wt, be_note(s)); /* follows the WELCOME */
  }
  {
    char name[WIRE_TENANT_MAX * 4 + 1];
    hostd__log(HOSTD_LOG_INFO, "tenant %u '%s' connected (%s, %s)", w->id,
               hostd__escape(name, sizeof(name), info->name), info->transport, info->peer);
  }
  return 0;
}

/* hostfn.c's cue (a driver thread, under the host-function lock): one of
 * the tenant's host functions was reached, which is how frameworks learn
 * their work is done; the requests that follow come after the guest's own
 * wake-up and callback, so the worker is woken now, in parallel with that,
 * and polls --hostfn-wake-us for them (next_batch).  The signal is sent
 * without the worker's mutex: when it is lost to a worker about to sleep,
 * only the head start is lost, as the request still wakes it. */
static void hostfn_cue(void *arg) {
  worker_t *w = arg;
  hostd_server_t *s = w->srv;
  __atomic_store_n(&w->wake_until, hostd__mono_ns() + s->hostfn_wake_ns, __ATOMIC_RELEASE);
  __atomic_fetch_add(&s->hostfn_wakes, 1, __ATOMIC_RELAXED);
  pthread_cond_signal(&w->cv);
}

/* The tenant's host-function state, made at first use.  Loop thread. */
static hostd_hostfn_t *hostfn_of(worker_t *w) {
  if (!w->hf) {
    hostd_hostfn_t *h = hostd__hostfn_new(w->wt);
    if (h && !w->poll && w->srv->hostfn_wake_ns) /* a polling worker is awake anyway */
      hostd__hostfn_set_cue(h, hostfn_cue, w);
    hostd__hostfn_set_hops(h, w->hops);
    hostd__hostfn_set_word(h, w->srv->hostfn_word);
    pthread_mutex_lock(&w->mu);
    __atomic_store_n(&w->hf, h, __ATOMIC_RELEASE); /* the worker's poll reads it unlocked */
    pthread_mutex_unlock(&w->mu);
  }
  return w->hf;
}

/* Requests the loop thread handles itself instead of queueing them: true
 * when m was consumed.  HOSTFN_WAIT must not wait behind the worker, which
 * may be blocked on exactly the host function the guest is about to finish. */
static bool loop_handles(worker_t *w, wire_tenant_t *wt, const wire_msg_t *m, uint32_t op) {
  hostd_hostfn_t *h;
  if (!loop_sees(op))
    return false;
  if (op == CALL_OP_GRAPH_ADD) { /* a host node's function is served as a HOSTFN's */
    if (!hostfn_of(w))
      wire_tenant_close(wt, -ENOMEM, "out of memory for host functions");
    return !w->hf;
  }
  if (!(h = hostfn_of(w))) {
    wire_tenant_close(wt, -ENOMEM, "out of memory for host functions");
    return true;
  }
  if (op == CALL_OP_HOSTFN) {
    hostd__hostfn_note_post(h); /* then queued like any post */
    return false;
  }
  if (m->kind != WIRE_MSG_CALL) {
    wire_tenant_close(wt, -EPROTO, "HOSTFN_WAIT sent as a post");
    return true;
  }
  if (hostd__op_count_on)
    __atomic_fetch_add(&hostd__op_count[CALL_OP_HOSTFN_WAIT], 1, __ATOMIC_RELAXED);
  hostd__hostfn_wait(h, m->id, m->data + CALL_HDR_LEN, m->len - CALL_HDR_LEN);
  return true;
}

static void on_msg(wire_server_t *ws, wire_tenant_t *wt, const wire_msg_t *m) {
  worker_t *w = wire_tenant_data(wt);
  hostd_hostfn_t *hf;
  msg_t *q;
  uint32_t op = 0;

  if (!w) {
    wire_tenant_close(wt, -ENOMEM, "request for a tenant without a worker");
    return;
  }
  count_add(&w->srv->rx_bytes, m->len);
  if (m->len >= CALL_HDR_LEN) {
    call_hdr_t h;
    call_hdr_read(m->data, &h); /* read once; the worker re-reads its own copy */
    op = h.op;
    if (loop_handles(w, wt, m, op))
      return;
  }
  hf = w->hf;
  (void)ws;
  /* Never pause while host functions are pending: the paused tenant could
   * not deliver the HOSTFN_WAIT that unblocks its worker (hostfn.c). */
  bool pause = m->len > COPY_MAX && !hostd__hostfn_busy(hf);
  /* One block per request: the header and, unless paused, the payload (a
   * launch's 100-odd bytes; per-launch cost matters, hostd-bench); a small
   * one comes from the worker's pool, so nothing is allocated. */
  bool small = !pause && m->len <= MSG_SMALL;
  q = small ? pool_take(w) : NULL;
  if (!q)
    q = malloc(sizeof(*q) + (small ? MSG_SMALL : pause ? 0 : m->len));
  if (!q) {
    wire_tenant_close(wt, -ENOMEM, "out of memory queueing a request");
    return;
  }
  count(&w->enqueued);
  /* When the loop read it: the stamp of the read or drain that brought it
   * (a batch's posts and the call behind them share one), so the time this
   * loop spends on the messages before it counts toward the worker's hop. */
  q->at_ns = w->hops || w->lat ? (m->rx_ns ? m->rx_ns : hostd__mono_ns()) : 0;
  q->kind = m->kind;
  q->id = m->id;
  q->len = m->len;
  q->next = NULL;
  q->paused = pause;
  q->pooled = small;
  if (pause) {
    wire_tenant_pause(wt); /* the worker resumes it after using the bytes */
    q->data = (uint8_t *)m->data;
  } else {
    q->data = q->copy;
    memcpy(q->copy, m->data, m->len);
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
  if (w->info.prio == WIRE_PRIO_LATENCY_CRITICAL && --w->srv->lc_tenants == 0)
    publish_be_note(w->srv);
  hostd__hostfn_close(w->hf); /* open every host-function gate: no stream stays blocked */
  pthread_mutex_lock(&w->mu);
  __atomic_store_n(&w->closed, true, __ATOMIC_RELEASE); /* read by a polling worker */
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* A guest shared pinned host memory (a memfd, tag = its address there).
 * Mapped here, at the guest's address when that range is free here too
 * (so device pointers of mapped pinned memory agree on both sides), and
 * handed to the worker, in order with the tenant's requests, to register
 * and record.  Answers 0, or CALL_FD_ELSEWHERE when mapped at another
 * address (the worker may still move it there, hostd__tenant_pinned_add:
 * the guest is told the safe answer).  Loop thread; owns fd. */
static int on_fd(wire_server_t *ws, wire_tenant_t *wt, uint64_t tag, int fd) {
  worker_t *w = wire_tenant_data(wt);
  struct stat st;
  void *want = (void *)(uintptr_t)tag, *p;
  fd_map_t *f = NULL;
  msg_t *q = NULL;
  long page = sysconf(_SC_PAGESIZE);
  bool elsewhere = false;
  (void)ws;

  if (!w || fstat(fd, &st) != 0 || st.st_size <= 0 || (size_t)st.st_size > PINNED_MAX || tag == 0 ||
      tag % (uint64_t)page != 0) {
    close(fd);
    return -EINVAL;
  }
  p = mmap(want, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd,
           0);
  if (p != MAP_FAILED && p != want) { /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
    munmap(p, (size_t)st.st_size);
    p = MAP_FAILED;
  }
  if (p == MAP_FAILED) { /* the range is taken here: any address will do */
    elsewhere = true;
    p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    hostd__log(HOSTD_LOG_DEBUG,
               "tenant %u: pinned memory %#llx mapped elsewhere here: its device pointer "
               "differs from the guest's address",
               w->id, (unsigned long long)tag);
  }
  close(fd);
  if (p == MAP_FAILED)
    return -ENOMEM;
  f = malloc(sizeof(*f));
  q = calloc(1, sizeof(*q));
  if (!f || !q) {
    free(f);
    free(q);
    munmap(p, (size_t)st.st_size);
    return -ENOMEM;
  }
  *f = (fd_map_t){tag, p, (size_t)st.st_size};
  count(&w->enqueued);
  q->kind = MSG_FD_MAP;
  q->data = (uint8_t *)f;
  q->len = sizeof(*f);
  q->at_ns = w->hops ? hostd__mono_ns() : 0;
  pthread_mutex_lock(&w->mu);
  if (w->tail)
    w->tail->next = q;
  else
    __atomic_store_n(&w->head, q, __ATOMIC_RELEASE);
  w->tail = q;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
  return elsewhere ? CALL_FD_ELSEWHERE : 0;
}

static bool blob_has(wire_server_t *ws, wire_tenant_t *wt, uint64_t id) {
  size_t len;
  (void)ws, (void)wt;
  return hostd__modcache_get(id, &len) != NULL;
}

/* Module bytes count against the tenant's --tenant-upload: over it the
 * guest's module load fails with out of memory, and nothing is cached. */
static int blob_put(wire_server_t *ws, wire_tenant_t *wt, uint64_t id, const void *data,
                    size_t len) {
  hostd_server_t *s = wire_server_data(ws);
  worker_t *w = wire_tenant_data(wt);
  if (w && hostd__quota_charge(&w->quota, HOSTD_QUOTA_UPLOAD, len) != CUDA_SUCCESS) {
    char name[WIRE_TENANT_MAX * 4 + 1];
    hostd__log(HOSTD_LOG_INFO, "tenant %u \"%s\": module of %zu bytes refused: over its "
               "--tenant-upload of %llu bytes", w->id, hostd__escape(name, sizeof(name), w->name),
               len, (unsigned long long)w->quota.limit[HOSTD_QUOTA_UPLOAD]);
    return -ENOMEM;
  }
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
  pthread_mutex_lock(&s->lock);
  s->async_open = false; /* workers may still finish: they must not send */
  pthread_mutex_unlock(&s->lock);
  uv_close((uv_handle_t *)&s->restart_async, NULL);
  uv_close((uv_handle_t *)&s->grace_timer, NULL);
  hostd__fault_on_raise(NULL, NULL);
  hostd__ctl_close(s->ctl);
  s->ctl = NULL;
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

/* ---- restart after a GPU fault ---- */

/* After the grace period the remaining tenants are closed; their workers
 * then only free host memory.  The restart waits this long for them (so
 * each guest's socket gets its close reason before the exec), then goes
 * anyway: a worker stuck in the poisoned driver must not hold it back. */
#define RESTART_DRAIN_MS 1000

/* Any thread (tenant.c's recover, through restart.c): wake the loop. */
static void on_fault_raised(void *arg) {
  hostd_server_t *s = arg;
  pthread_mutex_lock(&s->lock);
  if (s->async_open)
    uv_async_send(&s->restart_async);
  pthread_mutex_unlock(&s->lock);
}

/* "tenant 3 'train' hit CUDA_ERROR_ILLEGAL_ADDRESS (700)", for log lines
 * and the reason the grace period's closes give. */
static void describe_fault(hostd_server_t *s, char *buf, size_t len) {
  uint32_t id = 0;
  int err = hostd__fault_pending(&id);
  const char *name = NULL;
  pthread_mutex_lock(&s->lock);
  for (worker_t *w = s->workers; w && !name; w = w->next)
    if (w->id == id)
      name = w->name;
  snprintf(buf, len, "tenant %u%s%s%s hit %s (%d)", id, name ? " '" : "", name ? name : "",
           name ? "'" : "", hostd__ctx_fatal(err) ? hostd__ctx_fatal(err) : "a GPU fault", err);
  pthread_mutex_unlock(&s->lock);
}

static void restart_now(hostd_server_t *s, const char *why) {
  uv_timer_stop(&s->grace_timer);
  s->restart = RESTART_DUE;
  hostd__log(HOSTD_LOG_WARN, "restarting: %s", why);
  uv_stop(&s->loop); /* hostd_server_run returns HOSTD_SERVER_RESTART */
}

static void on_grace(uv_timer_t *h);

/* Moves the restart on: from a fault to pending, and from pending (or
 * closing) to due when no tenant is left.  Loop thread. */
static void restart_step(hostd_server_t *s) {
  int live;

  if (s->stopping || s->restart == RESTART_DUE || !hostd__fault_pending(NULL))
    return;
  pthread_mutex_lock(&s->lock);
  live = s->live;
  pthread_mutex_unlock(&s->lock);
  if (s->restart == RESTART_NONE) {
    s->restart = RESTART_PENDING;
    describe_fault(s, s->fault_what, sizeof(s->fault_what));
    hostd__log(HOSTD_LOG_WARN,
               "restart pending: %s, which poisons this process's CUDA context; new tenants are "
               "told to retry; tallyd re-executes itself when the %d live tenant(s) have left, or "
               "closes them after %d ms",
               s->fault_what, live, s->grace_ms);
    uv_timer_start(&s->grace_timer, on_grace, (uint64_t)s->grace_ms, 0);
  }
  if (live == 0)
    restart_now(s, s->restart == RESTART_CLOSING ? "the remaining tenants were closed"
                                                 : "every tenant has left");
}

static void on_restart_async(uv_async_t *h) {
  restart_step(h->data);
}

/* The grace period is over: closes every tenant still connected, with a
 * reason naming the fault; or, on the drain bound, restarts anyway. */
static void on_grace(uv_timer_t *h) {
  hostd_server_t *s = h->data;
  char why[256];
  wire_tenant_t **wts = NULL;
  size_t n = 0;

  if (s->stopping)
    return;
  if (s->restart == RESTART_CLOSING) {
    restart_now(s, "tenant workers did not finish in time");
    return;
  }
  snprintf(why, sizeof(why), "tallyd restarts: %s, which ends every tenant on this GPU",
           s->fault_what);
  /* Refs first, closes outside the lock: on_close takes each worker's mu. */
  pthread_mutex_lock(&s->lock);
  if (s->live > 0 && (wts = calloc((size_t)s->live, sizeof(*wts))) != NULL)
    for (worker_t *w = s->workers; w && n < (size_t)s->live; w = w->next) {
      wire_tenant_ref(w->wt);
      wts[n++] = w->wt;
    }
  pthread_mutex_unlock(&s->lock);
  hostd__log(HOSTD_LOG_WARN, "restart grace period (%d ms) over: closing %zu tenant(s)",
             s->grace_ms, n);
  for (size_t i = 0; i < n; i++) {
    wire_tenant_close(wts[i], -ECONNABORTED, why); /* a no-op for one already closed */
    wire_tenant_unref(wts[i]);
  }
  free(wts);
  s->restart = RESTART_CLOSING;
  uv_timer_start(&s->grace_timer, on_grace, RESTART_DRAIN_MS, 0);
  restart_step(s);
}

int hostd_server_listen_fds(const hostd_server_t *s, int *unix_fd, int *tcp_fd) {
  if (unix_fd)
    *unix_fd = -1;
  if (tcp_fd)
    *tcp_fd = -1;
  if (!s || !s->ws)
    return -EINVAL;
  return wire_server_listen_fds(s->ws, unix_fd, tcp_fd);
}

/* How long a worker polls its queue before sleeping on its condition
 * variable, and the loop its rings and sockets after traffic: a tenant at
 * work (docs/lc-path.md, "A tenant at work").  A framework's next requests
 * follow its previous ones within a GPU step: XLA dispatches a jit step,
 * waits for the step's host function, then dispatches the next, so a
 * worker that slept meanwhile paid a futex wake-up (15-40 us on the H200
 * host) before the next step could reach the GPU.  1000 us covers steps of
 * up to a millisecond; a tenant quiet for that long costs nothing.  The
 * cost: a tenant making a request at least every millisecond keeps its
 * worker's core busy, and the loop's core stays busy while any tenant made
 * traffic in the last millisecond.  Only with 4 or more CPUs online: on
 * fewer, a spinning thread competes with the guest and the other threads
 * for the cores they wait on (wire-bench measured shm polling 6x slower on
 * a loaded 2-CPU host).  --worker-spin-us and --spin-us override;
 * --spin-us alone keeps its old meaning for the worker too; without
 * --spin-us, TALLY_WIRE_SPIN_US in tallyd's environment still sets the
 * loop's (wire's rule). */
#define ACTIVE_SPIN_US       1000
#define WORKER_SPIN_MIN_CPUS 4
static bool spin_host(void) {
  return sysconf(_SC_NPROCESSORS_ONLN) >= WORKER_SPIN_MIN_CPUS;
}

static int worker_spin_us(const hostd_config_t *cfg) {
  if (cfg->worker_spin_us >= 0)
    return cfg->worker_spin_us;
  if (cfg->spin_us > 0)
    return cfg->spin_us;
  return spin_host() ? ACTIVE_SPIN_US : 0;
}

/* The loop's spin in wire's terms (0 = wire's rule, < 0 = never). */
static int32_t loop_spin_us(const hostd_config_t *cfg) {
  const char *e = getenv("TALLY_WIRE_SPIN_US");
  if (cfg->spin_us == 0)
    return -1;
  if (cfg->spin_us > 0)
    return cfg->spin_us;
  return (e && *e) || !spin_host() ? 0 : ACTIVE_SPIN_US;
}

/* --lc-poll resolved: auto is on where a core can be given to it (as the
 * spins above: 4 or more CPUs online). */
static bool lc_poll(const hostd_config_t *cfg) {
  if (cfg->lc_poll >= 0)
    return cfg->lc_poll != 0;
  return spin_host();
}

/* The CPU tallyd may spend polling, as resolved (docs/lc-path.md): an
 * operator sees what a busy or an idle tenant costs without reading the
 * rules. */
static void log_spins(const hostd_server_t *s, const hostd_config_t *cfg) {
  int32_t loop = loop_spin_us(cfg);
  const char *e = getenv("TALLY_WIRE_SPIN_US");
  char l[96];
  if (loop > 0)
    snprintf(l, sizeof(l), "%d us", (int)loop);
  else if (loop == 0 && e && *e) /* wire reads it (at most 1000) */
    snprintf(l, sizeof(l), "TALLY_WIRE_SPIN_US=%.16s us", e);
  else
    snprintf(l, sizeof(l), "never");
  hostd__log(HOSTD_LOG_INFO,
             "polling: the loop after traffic %s; a worker after its tenant's last request %d us; "
             "a latency-critical tenant's loop and worker %s%s (%ld CPUs online)",
             l, (int)(s->spin_ns / 1000u),
             s->lc_poll ? "without end while it is connected" : "the same",
             !s->lc_direct       ? ""
             : s->lc_direct_tcp ? ", its worker reading its shared-memory ring or TCP socket itself"
                                : ", its worker reading its shared-memory ring itself",
             sysconf(_SC_NPROCESSORS_ONLN));
}

/* What must hold before tallyd listens (hostd.h: config checks): a token
 * where one is needed, a private state folder, the socket's folder.  The
 * reasons go to the log.  0 or a negative errno. */
static int check_setup(hostd_server_t *s, const hostd_config_t *cfg) {
  char warn[512], *msg = NULL;
  size_t len = 0;
  FILE *err = open_memstream(&msg, &len);
  int rc;
  if (!err)
    return -ENOMEM;
  rc = hostd_config_check(cfg, err);
  if (rc == 0 && cfg->token_file[0])
    rc = hostd_config_read_token(cfg->token_file, s->token, sizeof(s->token), warn, sizeof(warn),
                                 err);
  if (rc == 0 && cfg->state_dir[0])
    rc = hostd_config_state_dir(cfg->state_dir, err);
  if (rc == 0 && cfg->unix_path[0] && cfg->unix_listen_fd <= 0)
    rc = hostd_config_check_unix_dir(cfg->unix_path, "--listen-unix", err);
  fclose(err);
  if (rc != 0) {
    msg[strcspn(msg, "\n")] = 0;
    hostd__log(HOSTD_LOG_ERROR, "%s", strncmp(msg, "tallyd: ", 8) == 0 ? msg + 8 : msg);
  } else if (cfg->token_file[0] && warn[0]) {
    hostd__log(HOSTD_LOG_WARN, "%s", warn);
  } else if (cfg->tcp_addr[0] && !cfg->token_file[0]) {
    hostd__log(HOSTD_LOG_WARN, "--listen-tcp %s without --token-file: every process that can "
               "reach this address is admitted%s", cfg->tcp_addr,
               cfg->insecure_no_token ? " (--insecure-no-token)" : " (loopback only)");
  }
  free(msg);
  return rc;
}

/* The group named by --unix-group (a name or a number). */
static int unix_group(const char *name, gid_t *gid) {
  struct group gr, *res = NULL;
  char buf[4096], *end = NULL;
  unsigned long n = strtoul(name, &end, 10);
  if (end && end != name && !*end) {
    *gid = (gid_t)n;
    return 0;
  }
  if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) != 0 || !res) {
    hostd__log(HOSTD_LOG_ERROR, "--unix-group %s: no such group", name);
    return -EINVAL;
  }
  *gid = res->gr_gid;
  return 0;
}

/* wire's options from ours. */
static int wire_opts(hostd_server_t *s, const hostd_config_t *cfg, wire_server_opts_t *o) {
  memset(o, 0, sizeof(*o));
  o->unix_listen_fd = cfg->unix_listen_fd;
  o->tcp_listen_fd = cfg->tcp_listen_fd;
  o->unix_path = cfg->unix_path[0] ? cfg->unix_path : NULL;
  o->tcp_addr = cfg->tcp_addr[0] ? cfg->tcp_addr : NULL;
  o->token = s->token[0] ? s->token : NULL;
  o->shm_spin_us = loop_spin_us(cfg);
  o->tcp_spin_us = o->shm_spin_us;
  o->handshake_ms = (uint32_t)cfg->handshake_ms;
  o->halfopen_max = (uint32_t)cfg->halfopen_max;
  o->halfopen_per_peer = (uint32_t)cfg->halfopen_per_peer;
  o->unix_mode = cfg->unix_mode;
  o->lc_poll = s->lc_poll;
  o->lc_direct = s->lc_direct;
  o->lc_direct_tcp = s->lc_direct_tcp;
  if (cfg->unix_group[0]) {
    o->unix_gid_set = true;
    return unix_group(cfg->unix_group, &o->unix_gid);
  }
  return 0;
}

static const wire_server_cb_t server_cb = {
    .on_connect = on_connect,
    .on_msg = on_msg,
    .on_close = on_close,
    .blob_has = blob_has,
    .blob_put = blob_put,
    .on_fd = on_fd,
    .on_refuse = on_refuse,
};

static int view_fill(void *arg, hostd_view_t *v);

/* The loop's own handles, the wire server, the signals, the control
 * socket.  0, or a negative errno with everything opened closed again. */
static int start_loop(hostd_server_t *s, const hostd_config_t *cfg, bool handle_signals) {
  wire_server_opts_t opts;
  int rc;
  if ((rc = uv_loop_init(&s->loop)) != 0)
    return rc;
  uv_async_init(&s->loop, &s->stop_async, on_stop);
  uv_async_init(&s->loop, &s->close_async, on_close_requests);
  s->stop_async.data = s->close_async.data = s;
  uv_async_init(&s->loop, &s->restart_async, on_restart_async);
  uv_timer_init(&s->loop, &s->grace_timer);
  s->restart_async.data = s->grace_timer.data = s;
  s->grace_ms = cfg->restart_grace_ms;
  s->async_open = true;
  s->spin_ns = (uint64_t)worker_spin_us(cfg) * 1000u;
  s->lc_poll = lc_poll(cfg);
  s->lc_direct = s->lc_poll && cfg->lc_direct != 0;
  s->lc_direct_tcp = s->lc_direct && cfg->lc_direct != HOSTD_LC_DIRECT_SHM;
  /* What worker_pin picks from, read only where a worker will poll and may be pinned
   * (s is calloc'd: with nothing read, cpus is empty and pin.c pins nothing). */
  if (s->lc_poll && cfg->lc_poll_cpu != -1 &&
      sched_getaffinity(0, sizeof(s->cpus), &s->cpus) == 0)
    hostd__pin_cores(&s->cpus, s->core_of);
  s->hostfn_word = cfg->hostfn_word != 0;
  {
    const char *gap = getenv("TALLYD_TEST_DIRECT_GAP_US");
    s->test_gap_ns = gap ? strtoull(gap, NULL, 10) % 1000000u * 1000u : 0; /* under 1 s */
  }
  /* --hostfn-wake-us: the worker's poll after one of its tenant's host
   * functions was reached, at most that long of a core per host function.
   * Off by default: measured on the H200 (a JAX jit step, alternated runs
   * with 0 and 200 us) it changed nothing beyond the runs' own spread. */
  s->hostfn_wake_ns = cfg->hostfn_wake_us > 0 ? (uint64_t)cfg->hostfn_wake_us * 1000u : 0;
  hostd__hops_setup(cfg->hops);
  if ((rc = wire_opts(s, cfg, &opts)) == 0 &&
      (rc = wire_server_new(&s->ws, &s->loop, &opts, &server_cb, s)) != 0)
    hostd__log(HOSTD_LOG_ERROR, "cannot listen on%s%s%s%s: %s", opts.unix_path ? " unix:" : "",
               opts.unix_path ? opts.unix_path : "", opts.tcp_addr ? " tcp:" : "",
               opts.tcp_addr ? opts.tcp_addr : "", wire_strerror(rc));
  if (rc == 0 && (rc = hostd__ctl_new(&s->ctl, &s->loop, cfg, view_fill, s)) != 0) {
    wire_server_close(s->ws);
    s->ws = NULL;
  }
  if (rc != 0) {
    uv_close((uv_handle_t *)&s->stop_async, NULL);
    uv_close((uv_handle_t *)&s->close_async, NULL);
    uv_close((uv_handle_t *)&s->restart_async, NULL);
    uv_close((uv_handle_t *)&s->grace_timer, NULL);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    return rc;
  }
  if (handle_signals) {
    s->signals = true;
    uv_signal_init(&s->loop, &s->sigterm);
    uv_signal_init(&s->loop, &s->sigint);
    s->sigterm.data = s->sigint.data = s;
    uv_signal_start(&s->sigterm, on_signal, SIGTERM);
    uv_signal_start(&s->sigint, on_signal, SIGINT);
  }
  return 0;
}

/* Starts the scheduler (hostd/sched.c) for the served GPU.  Profiles are
 * kept per GPU model: the file name carries a hash of the device's name,
 * multiprocessor count and compute capability, so another model never
 * reuses them. */
static int sched_start(const hostd_config_t *cfg) {
  hostd_sched_config_t sc;
  const int32_t *a = hostd__snapshot.attr;
  char key[320];
  hostd__sched_config_init(&sc);
  if (hostd__sched_parse_policy(&sc, cfg->policy[0] ? cfg->policy : "tally") != 0)
    return -EINVAL;
  if (cfg->threshold_us >= 0)
    sc.pol.threshold_ns = (uint64_t)cfg->threshold_us * 1000u;
  if (cfg->resume_idle_us >= 0)
    sc.pol.resume_idle_ns = (uint64_t)cfg->resume_idle_us * 1000u;
  if (cfg->be_depth > 0)
    sc.pol.be_depth = (uint32_t)cfg->be_depth;
  if (cfg->share_block_us > 0)
    sc.pol.share_block_ns = (uint64_t)cfg->share_block_us * 1000u;
  sc.be_alone = cfg->be_alone != 0;
  sc.flag_memset = cfg->flag_memset != 0;
  if (cfg->time_every > 0)
    sc.pol.time_every = (uint32_t)cfg->time_every;
  sc.be_sms = cfg->be_sms > 0 ? (uint32_t)cfg->be_sms : 0;
  if (cfg->be_sms_pct > 0) /* a share of the device's SMs, rounded up */
    sc.be_sms = ((uint32_t)a[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] * (uint32_t)cfg->be_sms_pct +
                 99u) / 100u;
  sc.be_sms_hold = cfg->be_sms_hold != 0;
  if (cfg->be_sms_block_us > 0)
    sc.pol.part_block_ns = (uint64_t)cfg->be_sms_block_us * 1000u;
  if (cfg->be_sms_inflight_us >= 0 && sc.be_sms_hold) {
    hostd__log(HOSTD_LOG_ERROR, "--be-sms-inflight-us needs --be-sms-hold 0 (held best-effort "
                                "work is bounded by the threshold instead)");
    return -EINVAL;
  }
  if (cfg->be_sms_inflight_us >= 0)
    sc.pol.part_flight_ns = (uint64_t)cfg->be_sms_inflight_us * 1000u;
  if (a[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] > 0)
    sc.pol.default_resident = (uint32_t)a[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT];
  snprintf(sc.trace, sizeof(sc.trace), "%s", cfg->trace);
  /* Variants: PTX for this device's arch, compiled images cached per arch. */
  if (hostd__var_parse(cfg->variants[0] ? cfg->variants : "all", &sc.var.forms) != 0)
    return -EINVAL;
  sc.var.arch = (unsigned)(a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] * 10 +
                           a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR]);
  snprintf(sc.var.tag, sizeof(sc.var.tag), "sm_%u %s", sc.var.arch, hostd__gpu.name);
  if (cfg->state_dir[0] && snprintf(sc.var.cache_dir, sizeof(sc.var.cache_dir), "%s/variants",
                                    cfg->state_dir) >= (int)sizeof(sc.var.cache_dir))
    sc.var.cache_dir[0] = 0;
  snprintf(key, sizeof(key), "%s/%d/%d.%d", hostd__snapshot.name,
           a[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT],
           a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR],
           a[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR]);
  if (cfg->state_dir[0] &&
      snprintf(sc.profiles, sizeof(sc.profiles), "%s/profiles-%016llx.bin", cfg->state_dir,
               (unsigned long long)XXH3_64bits(key, strlen(key))) >= (int)sizeof(sc.profiles))
    sc.profiles[0] = 0; /* a state folder that long keeps no profiles */
  /* Advertised to tenants in the snapshot (before any HELLO is answered):
   * the interposed cuBLAS of a best-effort tenant cuts its GEMMs to this. */
  hostd__snapshot.be_budget_us =
      sc.on ? (uint32_t)(sc.pol.threshold_ns / 1000u) : 0;
  return hostd__sched_init(&sc);
}

int hostd_server_new(hostd_server_t **out, const hostd_config_t *cfg, bool handle_signals) {
  hostd_server_t *s = calloc(1, sizeof(*s));
  int dev = 0, rc;
  CUresult r;

  if (!s)
    return -ENOMEM;
  hostd__log_level = cfg->log_level;
  s->cfg = *cfg;
  s->started = (int64_t)time(NULL);
  if (cfg->gpus[0])
    dev = atoi(cfg->gpus); /* config.c accepts one ordinal: one GPU per tallyd */
  s->dev = dev;
  if ((rc = check_setup(s, cfg)) != 0)
    goto fail_token;
  r = hostd__gpu.init(dev, &hostd__snapshot);
  if (r != CUDA_SUCCESS) {
    hostd__log(HOSTD_LOG_ERROR, "GPU %d (%s backend) cannot be used: CUresult %d", dev,
               hostd__gpu.name, (int)r);
    rc = -ENODEV;
    goto fail_token;
  }
  hostd__ndev = 1;
  (void)hostd__release_start(); /* without it releases wait on the workers (logged) */
  hostd__modcache_init(cfg->state_dir);
  hostd__modcache_limits(cfg->modcache_mem, cfg->modcache_disk);
  hostd__limit_bounds(cfg->max_stack_bytes, cfg->max_heap_bytes);
  if ((rc = sched_start(cfg)) != 0) {
    hostd__modcache_close();
    hostd__release_stop();
    hostd__gpu.shutdown();
    goto fail_token;
  }
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->changed, NULL);
  if ((rc = start_loop(s, cfg, handle_signals)) != 0)
    goto fail_loop;
  hostd__fault_on_raise(on_fault_raised, s);
  hostd__log(HOSTD_LOG_INFO, "serving %s (%s backend) on%s%s%s%s (port %d)", hostd__snapshot.name,
             hostd__gpu.name, cfg->unix_path[0] ? " unix:" : "", cfg->unix_path,
             cfg->tcp_addr[0] ? " tcp:" : "", cfg->tcp_addr, wire_server_tcp_port(s->ws));
  log_spins(s, cfg);
  *out = s;
  return 0;
fail_loop:
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->changed);
  hostd__sched_shutdown();
  hostd__modcache_close();
  hostd__release_stop();
  hostd__gpu.shutdown();
fail_token:
  free(s);
  return rc;
}

/* ---- the operator's view (guard.h) ---- */

static void row_fill(hostd_row_t *r, worker_t *w) {
  uint64_t executed;
  memset(r, 0, sizeof(*r));
  r->id = w->id;
  snprintf(r->name, sizeof(r->name), "%s", w->name);
  snprintf(r->peer, sizeof(r->peer), "%s", w->info.peer);
  snprintf(r->transport, sizeof(r->transport), "%s", w->info.transport);
  r->prio = (int)w->info.prio;
  r->uid = w->info.local ? (long)w->info.uid : -1;
  r->since = w->since;
  r->mem = hostd__quota_used(&w->quota, HOSTD_QUOTA_MEM);
  r->upload = hostd__quota_used(&w->quota, HOSTD_QUOTA_UPLOAD);
  r->kernels = __atomic_load_n(&w->kernels, __ATOMIC_RELAXED);
  executed = __atomic_load_n(&w->executed, __ATOMIC_RELAXED); /* first: never above enqueued */
  r->queue = __atomic_load_n(&w->enqueued, __ATOMIC_RELAXED) - executed;
  /* -1 under --policy none: only the scheduler sees kernels complete */
  r->gpu_ns = __atomic_load_n(&w->quota.scheduled, __ATOMIC_ACQUIRE)
                  ? (int64_t)__atomic_load_n(&w->quota.gpu_ns, __ATOMIC_RELAXED)
                  : -1;
  r->weight = r->gpu_ns >= 0 ? w->quota.weight : 0;
  r->sliced = __atomic_load_n(&w->quota.sliced, __ATOMIC_RELAXED);
  r->ptb = __atomic_load_n(&w->quota.ptb, __ATOMIC_RELAXED);
  r->flush = __atomic_load_n(&w->quota.flush, __ATOMIC_RELAXED);
  hostd__lat_quantiles(w->lat, hostd__mono_ns(), &r->p50_us, &r->p99_us);
  r->cpu = __atomic_load_n(&w->cpu, __ATOMIC_RELAXED);
}

/* The scheduler's daemon-wide counters (zero under --policy none). */
static void view_sched(hostd_view_sched_t *vs) {
  hostd_sched_stats_t st;
  memset(vs, 0, sizeof(*vs));
  if (!hostd__sched_running())
    return;
  hostd__sched_stats(&st);
  vs->on = 1;
  vs->sliced = st.sliced;
  vs->ptb = st.ptb;
  vs->flush = st.flush;
  vs->given_up = st.given_up;
  vs->whole = st.whole;
  vs->whole_forms = st.whole_forms;
  vs->preempts = st.preempts;
  vs->early_raises = st.early_raises;
  vs->turnarounds = st.turnarounds;
  vs->turn_p50_ns = st.turn_p50_ns;
  vs->turn_p99_ns = st.turn_p99_ns;
  vs->fences_blocked = st.fences_blocked;
  vs->fence_block_ns = st.fence_block_ns;
}

/* Fills v from the live workers; v->rows is malloc'd.  Any thread. */
static int view_fill(void *arg, hostd_view_t *v) {
  hostd_server_t *s = arg;
  size_t n = 0;
  memset(v, 0, sizeof(*v));
  pthread_mutex_lock(&s->lock);
  if (s->live > 0 && !(v->rows = calloc((size_t)s->live, sizeof(*v->rows)))) {
    pthread_mutex_unlock(&s->lock);
    return -ENOMEM;
  }
  for (worker_t *w = s->workers; w && n < (size_t)s->live; w = w->next)
    row_fill(&v->rows[n++], w);
  pthread_mutex_unlock(&s->lock);
  v->n = n;
  v->calls = hostd_server_calls(s);
  v->rx_bytes = hostd_server_rx_bytes(s);
  v->blob_puts = hostd_server_blob_puts(s);
  v->refusals = hostd__refusals();
  v->started = s->started;
  hostd__modcache_stats(&v->mc);
  view_sched(&v->sched);
  return 0;
}

int hostd_server_view(hostd_server_t *s, char **status, char **metrics) {
  hostd_view_t v;
  int rc = view_fill(s, &v);
  if (rc)
    return rc;
  if (status)
    *status = hostd__view_status(&v);
  if (metrics)
    *metrics = hostd__view_metrics(&v);
  free(v.rows);
  return (status && !*status) || (metrics && !*metrics) ? -ENOMEM : 0;
}

int hostd_server_metrics_port(const hostd_server_t *s) {
  return hostd__ctl_http_port(s->ctl);
}

int hostd_server_tcp_port(const hostd_server_t *s) {
  return s->ws ? wire_server_tcp_port(s->ws) : 0;
}

unsigned long hostd_server_blob_puts(const hostd_server_t *s) {
  return __atomic_load_n(&s->blob_puts, __ATOMIC_RELAXED);
}

unsigned long hostd_server_calls(hostd_server_t *s) {
  unsigned long n;
  pthread_mutex_lock(&s->lock);
  n = s->calls;
  for (worker_t *w = s->workers; w; w = w->next)
    n += __atomic_load_n(&w->calls, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&s->lock);
  return n;
}

unsigned long hostd_server_hostfn_wakes(const hostd_server_t *s) {
  return __atomic_load_n(&s->hostfn_wakes, __ATOMIC_RELAXED);
}

unsigned long hostd_server_rx_bytes(hostd_server_t *s) {
  unsigned long n;
  pthread_mutex_lock(&s->lock);
  n = __atomic_load_n(&s->rx_bytes, __ATOMIC_RELAXED) + s->rx_bytes_gone;
  for (worker_t *w = s->workers; w; w = w->next)
    n += __atomic_load_n(&w->rx_bytes, __ATOMIC_RELAXED);
  pthread_mutex_unlock(&s->lock);
  return n;
}

int hostd_server_run(hostd_server_t *s) {
  uv_run(&s->loop, UV_RUN_DEFAULT);
  if (s->restart == RESTART_DUE && !s->stopping)
    return HOSTD_SERVER_RESTART; /* listening sockets open, loop stopped */
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
  if (!s->stopping) { /* after HOSTD_SERVER_RESTART without an exec */
    begin_stop(s);
    (void)hostd_server_run(s);
  }
  uv_loop_close(&s->loop);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->changed);
  hostd__sched_shutdown();
  hostd__modcache_close();
  hostd__release_stop();
  hostd__gpu.shutdown();
  free(s);
}
