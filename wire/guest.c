/* guest.c: wire_conn, the guest (client) side over any guest transport.
 *
 * One connection is ONE ordered channel: every send of every thread goes
 * through tx_mu, so a thread's requests reach the daemon in the order it
 * made them.  Posts up to WIRE__POST_INLINE_MAX bytes are appended to a BATCH
 * in the calling thread's SLOT (a slot lock, a number from one atomic
 * counter, a memcpy, an unlock: the whole fire-and-forget cost).  Threads
 * get slots round-robin, so up to WIRE__SLOTS threads post without sharing
 * a lock (one shared tx_mu cost 813 ns per post with 4 threads on a 16-CPU
 * host).  Every flush takes ALL non-empty slots at once (each swapped with
 * its out buffer under tx_mu) and sends their records merged in post-number
 * order: before any call of any thread, before a large post, when a slot
 * reaches batch_bytes, on wire_conn_flush, or from the background thread
 * once a batch has waited WIRE__FLUSH_US; with post_now, also when nothing
 * was sent for WIRE__POST_HOLD_US (so a post after a quiet spell goes at
 * once) and from the background thread after WIRE__POST_HOLD_US; with
 * post_after_reply on a ring, also for the first post after a call's reply;
 * with post_when_drained on a ring, also whenever the daemon has taken all
 * that was sent (it is busy launching it, and finds the next piece waiting).
 * Order invariant: a post that returned before another post or call began
 * (in any thread: a join, a lock, a condition variable in between) reaches
 * the daemon before it, as CUDA orders work on a stream by the order of the
 * API calls.  Why it holds: post numbers grow in that order; a flush locks
 * the slots it takes and then re-reads `pending` until no new slot shows up,
 * so when it takes a post it also takes every earlier post still queued (an
 * earlier post set its slot's bit before it returned, and only a flush,
 * under tx_mu, clears bits); flushes are serialised by tx_mu.  Sending one
 * slot alone, or slots in index order, broke it: a thread's post made after
 * another thread's was joined went out first.
 * Calls register a waiter first, then send, then wait.
 * Receiving uses a leader/follower scheme without a receive thread: whichever
 * waiting thread finds no reader becomes the reader (rx role), reads frames
 * and hands each REPLY to its waiter by correlation id; the others sleep on
 * rx_cv.  So replies may complete out of order and a long call does not block
 * shorter ones.  The single background thread sends heartbeats, flushes stale
 * batches and, when nobody is reading, takes the rx role briefly so daemon
 * heartbeats are consumed and its death is noticed within dead_after_ms.
 * A sender blocked on a full ring or socket does the same look itself every
 * 100 ms (tx_check), so a frozen daemon fails it instead of hanging it.
 * Lock order: tx_mu before a slot's mu, and tx_mu before rx_mu; never the
 * reverse (a post holds only its slot's mu).
 */
#include "wire/wire-int.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A post waits at most this long in the batch when no call follows: 200 us
 * keeps GPU queues fed while costing the background thread ~5k wakeups/s
 * only while posts are flowing. */
#define WIRE__FLUSH_US 200
/* post_now (a latency-critical tenant): a post made when nothing was sent
 * for this long goes out at once, so a polling daemon starts on it while the
 * next is made; posts right behind it wait in the batch until this long
 * after that send (or the next call), so a burst costs one send per
 * WIRE__POST_HOLD_US instead of one per post (a TCP send is ~4 us). */
#define WIRE__POST_HOLD_US 20

/* Post slots per connection: 16 covers the submitting threads of any real
 * CUDA program (more threads share slots, which stays correct). */
#define WIRE__SLOTS 16

/* One thread group's post batch.  mu guards b, seq, n, cap and since_ns;
 * the out_* fields (a batch taken by a flush) belong to the tx_mu holder.
 * The padding keeps two slots' hot fields off a shared cache line (false
 * sharing is what the slots remove) without asking calloc for more than its
 * 16-byte alignment: >= 64 cold bytes separate them whatever the base
 * address. */
typedef struct post_slot {
  pthread_mutex_t mu;
  wire_buf_t b;      /* BATCH payload being built: records u32 len | bytes */
  uint64_t *seq;     /* seq[i]: post number of record i (c->post_seq) */
  uint32_t n, cap;   /* records in b; room in seq */
  uint64_t since_ns; /* when its first record was added */
  wire_buf_t out;    /* taken by a flush: sent, then emptied */
  uint64_t *out_seq;
  uint32_t out_n, out_cap;
  char pad[128]; /* cold */
} post_slot;

/* Next slot index to hand out; each thread takes one on its first post and
 * keeps it (thread_slot) for every connection.  Atomic, any thread. */
static _Atomic unsigned slot_seq;
static _Thread_local unsigned thread_slot = ~0u; /* this thread's; ~0u = none yet */

static unsigned my_slot(void) {
  if (thread_slot == ~0u)
    thread_slot = atomic_fetch_add_explicit(&slot_seq, 1, memory_order_relaxed) % WIRE__SLOTS;
  return thread_slot;
}

typedef struct waiter {
  uint64_t id;
  const struct iovec *rep; /* caller's buffers (NULL when alloc) */
  int rep_cnt;
  bool alloc;        /* wire allocates: abuf */
  void *abuf;        /* malloc'd reply when alloc */
  struct iovec aiov; /* abuf as the destination of a placed reply */
  size_t len;        /* reply's full length */
  int status;        /* 0 or error */
  bool done;         /* set by the reader under rx_mu */
  bool placing;      /* the reader copies a multi-frame reply straight into rep */
  int fd;            /* FD call: the descriptor sent out of band first; else -1 */
  struct waiter *next;
} waiter;

struct wire_conn {
  wire__gtp *tp;
  uint8_t version;
  uint32_t caps;
  uint32_t heartbeat_ms;
  uint32_t dead_after_ms;
  size_t batch_bytes;
  uint64_t hold_ns; /* post_now: WIRE__POST_HOLD_US; 0: posts wait for batch_bytes */
  bool fresh_ok;    /* post_after_reply on a ring transport */
  _Atomic bool fresh; /* fresh_ok: a call's reply came and no post followed yet */
  bool drain_ok;      /* post_when_drained on a transport that can tell (shm) */
  size_t max_msg;
  bool fd_ok;      /* the daemon granted WIRE__CAP_FD (FD frames) */
  bool note_ok;    /* the daemon granted WIRE__CAP_NOTE (NOTE frames) */
  _Atomic uint32_t note; /* the last NOTE word received (0 before any) */
  bool slots_init; /* slots' mutexes initialised (for wire_conn_close) */
  /* fd_mu: one wire_conn_send_fd at a time, so at most one descriptor waits
   * in the daemon's queue (it allows WIRE__FD_QUEUE_MAX); passing one is
   * rare (a pinned allocation), so serialising costs nothing. */
  pthread_mutex_t fd_mu;

  /* tx_mu: serialises every send; guards spare and the slots' out_*. */
  pthread_mutex_t tx_mu;
  wire_buf_t spare;          /* the merge of several slots' batches, sent */
  /* A call's flush on a stream transport (TCP, where each send is a system
   * call of several us) keeps its last BATCH frame back here and sends it in
   * the same write as the call's first frame: the bytes and their order on
   * the socket are what two sends give.  lead_ok: a call's flush is running;
   * nlead: iovecs held (header in lead_hdr, records in spare or a slot's out
   * buffer, untouched until the write, all under tx_mu). */
  bool lead_ok;
  int nlead;
  struct iovec lead[2];
  uint8_t lead_hdr[WIRE__HDR_LEN];
  _Atomic uint32_t pending;  /* bit i: slot i holds posts (set/cleared under its mu) */
  _Atomic uint64_t post_seq; /* the next post's number (the order invariant) */
  post_slot slots[WIRE__SLOTS];
  _Atomic uint64_t last_tx_ns;
  _Atomic uint64_t sends; /* messages and batches handed to the transport */
  _Atomic uint64_t next_id;
  _Atomic uint32_t timed_ms; /* the first call's deadline (opts.timed_ms); 0 once it went */
  wire__hops *hops;          /* TALLY_HOPS: each call's hand-off times, or NULL (hops.c) */

  /* rx_mu: guards waiters, reading, rx (through the rx role), err/why. */
  pthread_mutex_t rx_mu;
  pthread_cond_t rx_cv;
  bool reading;    /* some thread holds the rx role */
  waiter *waiters; /* registered calls */
  wire__rx rx;     /* touched only by the rx role holder */
  _Atomic uint64_t last_rx_ns;
  _Atomic int err; /* sticky connection error (0 = healthy) */
  char why[256];   /* reason for err */

  /* background thread: bg_mu guards stopping and bg_idle */
  pthread_t bg;
  bool bg_started;
  pthread_mutex_t bg_mu;
  pthread_cond_t bg_cv;
  bool stopping;
  _Atomic bool bg_idle; /* bg sleeps a whole heartbeat: wake it on a post */
  /* split work (wire__gtp.par), under bg_mu: the job the bg thread may
   * help with, its generation (the bg thread helps each job once), whether
   * the bg thread is inside it, and the cv the publisher waits on for it */
  wire__par *par;
  uint64_t par_gen, par_helped;
  bool par_helping;
  pthread_cond_t par_cv;
};

/* ------------------------------------------------------------------ errors */

/* Records the first connection error; wakes every waiter. rx_mu held. */
static void set_err_locked(wire_conn_t *c, int status, const char *why) {
  if (atomic_load(&c->err) == 0) {
    /* why first: readers see err != 0 only after why is complete. */
    snprintf(c->why, sizeof(c->why), "%s", why ? why : wire_strerror(status));
    atomic_store(&c->err, status);
  }
  pthread_cond_broadcast(&c->rx_cv);
}

static void set_err(wire_conn_t *c, int status, const char *why) {
  pthread_mutex_lock(&c->rx_mu);
  set_err_locked(c, status, why);
  pthread_mutex_unlock(&c->rx_mu);
}

/* ---------------------------------------------------------------- sending */

/* Writes the held BATCH frame alone.  tx_mu held. */
static int send_lead(wire_conn_t *c) {
  int rc = c->tp->ops->send(c->tp, c->lead, c->nlead);
  c->nlead = 0;
  return rc;
}

/* emit for a call's frames: the held BATCH frame, if any, goes in the same
 * write as the first.  tx_mu held. */
static int emit_lead(void *arg, const struct iovec *iov, int cnt) {
  wire_conn_t *c = arg;
  struct iovec v[2 + 64];
  int rc, n = c->nlead;
  if (n == 0)
    return c->tp->ops->send(c->tp, iov, cnt);
  if (cnt > 64) {
    if ((rc = send_lead(c)) != 0)
      return rc;
    return c->tp->ops->send(c->tp, iov, cnt);
  }
  memcpy(v, c->lead, (size_t)n * sizeof(v[0]));
  memcpy(v + n, iov, (size_t)cnt * sizeof(v[0]));
  c->nlead = 0;
  return c->tp->ops->send(c->tp, v, n + cnt);
}

/* After a send (rc its result): a failure is the connection's; the time and
 * the count of sends are noted.  tx_mu held. */
static int sent(wire_conn_t *c, int rc) {
  if (rc)
    set_err(c, rc, NULL);
  atomic_store_explicit(&c->last_tx_ns, wire__now_ns(), memory_order_relaxed);
  atomic_fetch_add_explicit(&c->sends, 1, memory_order_relaxed);
  return rc;
}

/* Sends one message.  tx_mu held. */
static int send_locked(wire_conn_t *c, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
                       size_t len) {
  int rc;

  if ((rc = atomic_load(&c->err)) != 0)
    return rc;
  if (c->tp->ops->send_msg)
    rc = c->tp->ops->send_msg(c->tp, c->version, kind, id, iov, cnt, len);
  else
    rc = wire__send_frames(c->version, kind, id, iov, cnt, len, WIRE__TCP_CHUNK,
                           c->tp->zstd ? &c->tp->zs : NULL, emit_lead, c);
  return sent(c, rc);
}

/* Sends n records (bytes v) as one BATCH (on a stream transport during a
 * call's flush, held to go with the call).  tx_mu held. */
static int send_batch(wire_conn_t *c, const void *data, size_t len, uint32_t n) {
  struct iovec v = {(void *)data, len};
  wire__hdr h;
  int rc;

  if ((rc = atomic_load(&c->err)) != 0)
    return rc;
  if (c->tp->ops->send_msg) {
    /* shm: the ring takes a BATCH like any message; aux carries the count. */
    rc = c->tp->ops->send_msg(c->tp, c->version, WIRE__K_BATCH, n, &v, 1, len);
  } else {
    /* An earlier frame held back goes first: one frame is held at most. */
    if (c->nlead && (rc = send_lead(c)) != 0)
      return sent(c, rc);
    h = (wire__hdr){c->version, WIRE__K_BATCH, 0, (uint32_t)len, n, 0};
    wire__hdr_encode(c->lead_hdr, &h);
    c->lead[0] = (struct iovec){c->lead_hdr, sizeof(c->lead_hdr)};
    c->lead[1] = v;
    c->nlead = 2;
    if (c->lead_ok)
      return 0; /* counted as a send when written, with the call */
    rc = send_lead(c);
  }
  return sent(c, rc);
}

/* The most bytes one slot's batch holds (it goes out once it reaches
 * batch_bytes; a record is at most 4 + WIRE__POST_INLINE_MAX), so the most
 * one BATCH frame of a merge carries: within a TCP/RDMA chunk (open). */
static size_t batch_max(const wire_conn_t *c) {
  return c->batch_bytes + 4 + WIRE__POST_INLINE_MAX;
}

/* Sends the records of the taken slots (bits of `taken`, their out
 * buffers) in post-number order, as BATCH frames of at most batch_max
 * bytes.  tx_mu held. */
static int send_merged(wire_conn_t *c, uint32_t taken) {
  size_t pos[WIRE__SLOTS] = {0};
  uint32_t idx[WIRE__SLOTS] = {0}, n = 0;
  int rc = 0;

  wire_buf_reset(&c->spare);
  for (;;) {
    unsigned best = WIRE__SLOTS;
    uint32_t len;
    for (uint32_t p = taken; p != 0; p &= p - 1) {
      unsigned i = (unsigned)__builtin_ctz(p);
      const post_slot *sl = &c->slots[i];
      if (idx[i] < sl->out_n &&
          (best == WIRE__SLOTS || sl->out_seq[idx[i]] < c->slots[best].out_seq[idx[best]]))
        best = i;
    }
    if (best == WIRE__SLOTS)
      break;
    len = wire_le_rd32(c->slots[best].out.data + pos[best]);
    if (n > 0 && c->spare.len + 4 + len > batch_max(c)) {
      if ((rc = send_batch(c, c->spare.data, c->spare.len, n)) != 0)
        return rc;
      wire_buf_reset(&c->spare);
      n = 0;
    }
    if (wire_buf_put_bytes(&c->spare, c->slots[best].out.data + pos[best], 4 + (size_t)len)) {
      set_err(c, -ENOMEM, "out of memory while merging posts");
      return -ENOMEM; /* the posts are lost with the connection */
    }
    pos[best] += 4 + (size_t)len;
    idx[best]++;
    n++;
  }
  return n > 0 ? send_batch(c, c->spare.data, c->spare.len, n) : 0;
}

/* Takes slot i's batch into its out buffer.  Its mu held, tx_mu held. */
static void take_slot(wire_conn_t *c, unsigned i) {
  post_slot *sl = &c->slots[i];
  wire_buf_t b = sl->out;
  uint64_t *q = sl->out_seq;
  uint32_t cap = sl->out_cap;

  sl->out = sl->b;
  sl->out_seq = sl->seq;
  sl->out_n = sl->n;
  sl->out_cap = sl->cap;
  sl->b = b;
  sl->seq = q;
  sl->cap = cap;
  sl->n = 0;
  atomic_fetch_and(&c->pending, ~(1u << i));
}

/* Sends every queued post, in post-number order (the order invariant,
 * above).  tx_mu held. */
static int flush_locked(wire_conn_t *c) {
  uint32_t locked = 0, fresh, taken = 0;
  int rc;

  /* Lock every slot holding posts, then look again: a post queued
   * meanwhile in another slot may precede one already locked here. */
  while ((fresh = atomic_load(&c->pending) & ~locked) != 0) {
    for (uint32_t p = fresh; p != 0; p &= p - 1)
      pthread_mutex_lock(&c->slots[__builtin_ctz(p)].mu);
    locked |= fresh;
  }
  for (uint32_t p = locked; p != 0; p &= p - 1) {
    unsigned i = (unsigned)__builtin_ctz(p);
    if (c->slots[i].n > 0) {
      take_slot(c, i);
      taken |= 1u << i;
    }
    pthread_mutex_unlock(&c->slots[i].mu);
  }
  if (taken == 0)
    return atomic_load(&c->err);
  if ((taken & (taken - 1)) == 0) { /* one slot: its buffer as it is */
    post_slot *sl = &c->slots[__builtin_ctz(taken)];
    rc = send_batch(c, sl->out.data, sl->out.len, sl->out_n);
  } else {
    rc = send_merged(c, taken);
  }
  for (uint32_t p = taken; p != 0; p &= p - 1) {
    post_slot *sl = &c->slots[__builtin_ctz(p)];
    wire_buf_reset(&sl->out);
    sl->out_n = 0;
  }
  return rc ? rc : atomic_load(&c->err);
}

/* How old a batch the background thread flushes: WIRE__POST_HOLD_US with
 * post_now, else WIRE__FLUSH_US. */
static uint64_t stale_ns(const wire_conn_t *c) {
  return c->hold_ns ? c->hold_ns : (uint64_t)WIRE__FLUSH_US * 1000u;
}

/* True if some slot's first post has waited at least stale_ns. */
static bool batch_stale(wire_conn_t *c, uint64_t now) {
  uint32_t p = atomic_load(&c->pending);
  bool stale = false;

  while (p != 0 && !stale) {
    unsigned i = (unsigned)__builtin_ctz(p);
    p &= p - 1;
    pthread_mutex_lock(&c->slots[i].mu);
    stale = c->slots[i].n > 0 && wire__since(now, c->slots[i].since_ns) >= stale_ns(c);
    pthread_mutex_unlock(&c->slots[i].mu);
  }
  return stale;
}

/* ---------------------------------------------------------------- receiving */

/* wire__rx placement (rx role holder's thread): a multi-frame reply whose
 * caller gave buffers big enough is copied there chunk by chunk, so the
 * daemon's next chunk and our copy of this one overlap and the reply is
 * copied once instead of joined and copied again.  w->placing keeps the
 * waiter (and the caller's buffers) in place even if the connection fails
 * meanwhile: wait_reply does not return while the reader may still write
 * into them. */
static int on_place(void *ctx, uint8_t kind, uint64_t id, size_t total, const struct iovec **iov,
                    int *cnt) {
  wire_conn_t *c = ctx;
  waiter *w;
  int ok = 0;

  if (kind != WIRE__K_REPLY)
    return 0;
  pthread_mutex_lock(&c->rx_mu);
  for (w = c->waiters; w != NULL; w = w->next)
    if (w->id == id && !w->done)
      break;
  if (w != NULL && w->alloc && (w->abuf = malloc(total)) != NULL) {
    /* wire_conn_call_alloc: the reply's own buffer, made now. */
    w->aiov = (struct iovec){w->abuf, total};
    w->placing = true;
    *iov = &w->aiov;
    *cnt = 1;
    ok = 1;
  } else if (w != NULL && !w->alloc && wire__iov_len(w->rep, w->rep_cnt) >= total) {
    w->placing = true;
    *iov = w->rep;
    *cnt = w->rep_cnt;
    ok = 1;
  }
  pthread_mutex_unlock(&c->rx_mu);
  return ok;
}

/* wire__rx copy_in: a placed chunk of at least WIRE__PAR_COPY_MIN bytes
 * (the daemon sends shm replies of >= 64 MiB in such chunks) is copied by
 * this thread and the background thread together, as large sends are
 * (guest-shm.c).  par_run is safe from any thread, the bg thread included
 * (it then copies every slice itself). */
static void on_copy_in(void *ctx, const struct iovec *iov, int cnt, size_t off, const uint8_t *src,
                       size_t n) {
  wire__par_iov_copy(((wire_conn_t *)ctx)->tp, NULL, src, iov, cnt, off, n);
}

/* wire__rx delivery on the rx role holder's thread. */
static int on_frame(void *ctx, const wire__msg *m) {
  wire_conn_t *c = ctx;
  waiter *w;
  int32_t st;
  char why[256];

  switch (m->kind) {
  case WIRE__K_HEARTBEAT:
    return 0;
  case WIRE__K_NOTE:
    if (m->len != WIRE__NOTE_LEN) {
      snprintf(c->rx.why, sizeof(c->rx.why), "NOTE of %zu bytes (%d expected)", m->len,
               WIRE__NOTE_LEN);
      return -EPROTO;
    }
    atomic_store_explicit(&c->note, wire_le_rd32(m->data), memory_order_release);
    return 0;
  case WIRE__K_BYE:
    if (wire__status_decode(m->data, m->len, &st, why, sizeof(why)))
      snprintf(why, sizeof(why), "daemon closed the connection (malformed BYE)");
    set_err(c, st ? st : WIRE_ECLOSED, why[0] ? why : "daemon closed the connection");
    return 0;
  case WIRE__K_REPLY:
    break;
  default:
    snprintf(c->rx.why, sizeof(c->rx.why), "unexpected frame kind %u from the daemon", m->kind);
    return -EPROTO;
  }
  pthread_mutex_lock(&c->rx_mu);
  for (w = c->waiters; w != NULL; w = w->next)
    if (w->id == m->id && !w->done)
      break;
  if (w == NULL) {
    pthread_mutex_unlock(&c->rx_mu);
    snprintf(c->rx.why, sizeof(c->rx.why), "reply to unknown call id %llu",
             (unsigned long long)m->id);
    return -EPROTO;
  }
  w->len = m->len;
  if (m->placed) {
    /* Already in rep (on_place checked that it fits). */
  } else if (w->alloc) {
    w->abuf = m->len ? malloc(m->len) : NULL;
    if (m->len && w->abuf == NULL)
      w->status = -ENOMEM;
    else if (m->len)
      memcpy(w->abuf, m->data, m->len);
  } else {
    size_t fit = wire__iov_copy_in(w->rep, w->rep_cnt, 0, m->data, m->len);
    if (fit < m->len)
      w->status = -EMSGSIZE;
  }
  w->done = true;
  w->placing = false;
  pthread_cond_broadcast(&c->rx_cv);
  pthread_mutex_unlock(&c->rx_mu);
  return 0;
}

/* Holds the rx role (rx_mu NOT held): reads what is there within timeout_ms.
 * Returns 0 or the connection error it hit. */
static int read_some(wire_conn_t *c, int timeout_ms) {
  const uint8_t *p;
  size_t n, used;
  int rc;

  rc = c->tp->ops->peek(c->tp, &p, &n, timeout_ms);
  if (rc == -ETIMEDOUT || rc == -EINTR || rc == -EAGAIN) {
    uint64_t idle_ms = wire__since(wire__now_ns(), atomic_load(&c->last_rx_ns)) / 1000000u;
    if (idle_ms >= c->dead_after_ms) {
      char why[128];
      snprintf(why, sizeof(why), "no byte from the daemon for %llu ms (limit %u ms)",
               (unsigned long long)idle_ms, c->dead_after_ms);
      set_err(c, WIRE_EPEERDEAD, why);
      return WIRE_EPEERDEAD;
    }
    return 0;
  }
  if (rc) {
    set_err(c, rc, rc == WIRE_ECLOSED ? "daemon closed the connection (process gone?)" : NULL);
    return rc;
  }
  atomic_store_explicit(&c->last_rx_ns, wire__now_ns(), memory_order_relaxed);
  rc = wire__rx_feed(&c->rx, p, n, &used);
  c->tp->ops->consume(c->tp, used);
  if (rc < 0) {
    char why[300];
    snprintf(why, sizeof(why), "protocol error from the daemon: %s", c->rx.why);
    set_err(c, rc, why);
    return rc;
  }
  return 0;
}

/* The transport's check hook: a sender blocked on space (tx_mu held) asks
 * whether to go on.  If nobody reads, it takes the rx role for a
 * non-blocking look (heartbeats refresh last_rx; silence past dead_after
 * declares the daemon dead).  Lock order tx_mu -> rx_mu holds. */
static int tx_check(void *arg) {
  wire_conn_t *c = arg;

  pthread_mutex_lock(&c->rx_mu);
  if (!c->reading && atomic_load(&c->err) == 0) {
    c->reading = true;
    pthread_mutex_unlock(&c->rx_mu);
    read_some(c, 0);
    pthread_mutex_lock(&c->rx_mu);
    c->reading = false;
    pthread_cond_broadcast(&c->rx_cv);
  }
  pthread_mutex_unlock(&c->rx_mu);
  return atomic_load(&c->err);
}

/* Waits until w is done or the connection fails, or until timed_ms (> 0)
 * have passed: then the connection fails with -ETIMEDOUT.  w is registered. */
static int wait_reply(wire_conn_t *c, waiter *w, uint32_t timed_ms) {
  int rc;
  int slice_ms = (int)(c->heartbeat_ms < 100 ? c->heartbeat_ms : 100);
  uint64_t deadline = timed_ms ? wire__now_ns() + (uint64_t)timed_ms * 1000000u : 0;

  pthread_mutex_lock(&c->rx_mu);
  for (;;) {
    if (w->done) {
      rc = w->status;
      break;
    }
    if ((rc = atomic_load(&c->err)) != 0) {
      /* A reader placing our reply may still be writing into rep: it
       * clears reading when read_some returns. */
      if (w->placing && c->reading) {
        pthread_cond_wait(&c->rx_cv, &c->rx_mu);
        continue;
      }
      break;
    }
    if (deadline && wire__now_ns() >= deadline) {
      char why[96];
      snprintf(why, sizeof(why), "no reply to the first call within %u ms", timed_ms);
      set_err_locked(c, -ETIMEDOUT, why);
      continue; /* the error branch above ends the wait */
    }
    if (!c->reading) {
      c->reading = true;
      pthread_mutex_unlock(&c->rx_mu);
      read_some(c, slice_ms);
      pthread_mutex_lock(&c->rx_mu);
      c->reading = false;
      pthread_cond_broadcast(&c->rx_cv);
    } else {
      pthread_cond_wait(&c->rx_cv, &c->rx_mu);
    }
  }
  /* Unlink w. */
  {
    waiter **pp = &c->waiters;
    while (*pp != w)
      pp = &(*pp)->next;
    *pp = w->next;
  }
  pthread_mutex_unlock(&c->rx_mu);
  if (rc && w->alloc) {
    free(w->abuf);
    w->abuf = NULL;
  }
  return rc;
}

static int call_kind(wire_conn_t *c, uint8_t kind, const struct iovec *req, int req_cnt,
                     waiter *w) {
  size_t len = wire__iov_len(req, req_cnt);
  uint64_t t_call = c->hops ? wire__now_ns() : 0, t_sent = 0;
  int rc;

  if (len > c->max_msg)
    return -EMSGSIZE;
  w->id = atomic_fetch_add(&c->next_id, 1);
  w->done = false;
  w->placing = false;
  w->status = 0;
  pthread_mutex_lock(&c->rx_mu);
  w->next = c->waiters;
  c->waiters = w;
  pthread_mutex_unlock(&c->rx_mu);

  pthread_mutex_lock(&c->tx_mu);
  c->lead_ok = kind == WIRE__K_CALL && !c->tp->ops->send_msg;
  rc = flush_locked(c);
  c->lead_ok = false;
  if (rc == 0 && kind == WIRE__K_FD) {
    /* The descriptor goes first, on the socket: when the daemon meets the
     * FD frame in the ring the descriptor is already waiting there.  A
     * refused descriptor (EBADF...) fails this call only; the ring is
     * untouched, so the connection stays usable. */
    int frc = c->tp->ops->send_fd(c->tp, w->fd);
    if (frc) {
      pthread_mutex_unlock(&c->tx_mu);
      pthread_mutex_lock(&c->rx_mu);
      w->done = true;
      w->status = frc;
      pthread_mutex_unlock(&c->rx_mu);
      return wait_reply(c, w, 0);
    }
  }
  if (rc == 0)
    rc = send_locked(c, kind, w->id, req, req_cnt, len);
  if (c->nlead) { /* not taken by a frame (the call failed first): alone */
    int lrc = send_lead(c);
    rc = rc ? rc : sent(c, lrc);
  }
  pthread_mutex_unlock(&c->tx_mu);
  if (c->hops)
    t_sent = wire__now_ns();
  if (rc)
    set_err(c, rc, NULL); /* wait_reply then returns it and unlinks w */
  rc = wait_reply(c, w, atomic_exchange(&c->timed_ms, 0));
  if (c->fresh_ok)
    atomic_store_explicit(&c->fresh, true, memory_order_relaxed);
  if (c->hops && rc == 0)
    wire__hops_add(c->hops, w->id, t_call, t_sent, wire__now_ns());
  return rc;
}

/* ------------------------------------------------------------ background */

/* wire__gtp.par: publishes job for the background thread, works on it,
 * then withdraws it and waits only while the bg thread is inside a slice
 * it claimed.  A bg thread busy elsewhere (reading, flushing) claims
 * nothing, and the caller does every slice itself.  Called by a sender
 * (tx_mu held) or by the rx role holder placing a reply (on_copy_in),
 * possibly both at once: a second job replaces the first in c->par, whose
 * owner then does the rest itself, and each owner waits while the bg thread
 * helps with any job, so none returns while its job may still be touched.
 * The bg thread never blocks on tx_mu (trylock) and cannot hold the rx
 * role while a caller places, so this cannot deadlock; if the bg thread is
 * itself the caller, it helps no one and copies everything. */
static void par_run(void *ctx, wire__par *job) {
  wire_conn_t *c = ctx;

  pthread_mutex_lock(&c->bg_mu);
  c->par = job;
  c->par_gen++;
  pthread_cond_signal(&c->bg_cv);
  pthread_mutex_unlock(&c->bg_mu);
  wire__par_work(job);
  pthread_mutex_lock(&c->bg_mu);
  c->par = NULL;
  while (c->par_helping)
    pthread_cond_wait(&c->par_cv, &c->bg_mu);
  pthread_mutex_unlock(&c->bg_mu);
}

/* bg thread, bg_mu held: helps with a published job once. */
static void par_help(wire_conn_t *c) {
  wire__par *job = c->par;

  c->par_helped = c->par_gen;
  c->par_helping = true;
  pthread_mutex_unlock(&c->bg_mu);
  wire__par_work(job);
  pthread_mutex_lock(&c->bg_mu);
  c->par_helping = false;
  pthread_cond_broadcast(&c->par_cv);
}

static bool par_pending(const wire_conn_t *c) {
  return c->par != NULL && c->par_helped != c->par_gen;
}

static void *bg_main(void *arg) {
  wire_conn_t *c = arg;
  uint64_t hb_ns = (uint64_t)c->heartbeat_ms * 1000000u;

  pthread_mutex_lock(&c->bg_mu);
  while (!c->stopping) {
    struct timespec ts;
    uint64_t now = wire__now_ns(), wait_ns;
    bool have_batch, idle;

    if (par_pending(c)) {
      par_help(c);
      continue;
    }

    pthread_mutex_unlock(&c->bg_mu);
    /* trylock: a thread holding tx_mu is sending (so no heartbeat is due),
     * possibly blocked on a full ring; never queue behind it, or the
     * liveness look below would wait for it. */
    have_batch = false;
    if (pthread_mutex_trylock(&c->tx_mu) == 0) {
      have_batch = atomic_load(&c->pending) != 0;
      if (have_batch && batch_stale(c, now))
        flush_locked(c);
      else if (!have_batch && wire__since(now, atomic_load(&c->last_tx_ns)) >= hb_ns)
        send_locked(c, WIRE__K_HEARTBEAT, 0, NULL, 0, 0);
      if (c->tp->ops->idle)
        c->tp->ops->idle(c->tp, now);
      have_batch = atomic_load(&c->pending) != 0;
      pthread_mutex_unlock(&c->tx_mu);
    }

    /* Take the rx role if free: consumes daemon heartbeats, notices death. */
    pthread_mutex_lock(&c->rx_mu);
    if (!c->reading && atomic_load(&c->err) == 0) {
      c->reading = true;
      pthread_mutex_unlock(&c->rx_mu);
      read_some(c, 0);
      /* Nobody waits and nothing came for two heartbeats: give back the
       * large-reply buffer (the rx role makes this safe). */
      if (wire__since(now, atomic_load(&c->last_rx_ns)) >= 2 * hb_ns)
        wire__rx_trim(&c->rx);
      pthread_mutex_lock(&c->rx_mu);
      c->reading = false;
      pthread_cond_broadcast(&c->rx_cv);
    }
    pthread_mutex_unlock(&c->rx_mu);

    /* Sleep a flush interval while posts flow, else a heartbeat quarter. */
    idle = !have_batch && wire__since(wire__now_ns(), atomic_load(&c->last_tx_ns)) > hb_ns / 4;
    wait_ns = idle ? hb_ns / 4 : stale_ns(c);
    pthread_mutex_lock(&c->bg_mu);
    if (c->stopping)
      break;
    atomic_store(&c->bg_idle, idle);
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += (long)(wait_ns % 1000000000u);
    ts.tv_sec += (time_t)(wait_ns / 1000000000u) + ts.tv_nsec / 1000000000;
    ts.tv_nsec %= 1000000000;
    /* A job published while we were busy: help now (its signal came
     * before this wait and would be lost). */
    if (!par_pending(c))
      pthread_cond_timedwait(&c->bg_cv, &c->bg_mu, &ts);
    atomic_store(&c->bg_idle, false);
  }
  pthread_mutex_unlock(&c->bg_mu);
  return NULL;
}

/* ------------------------------------------------------------------ public */

static const uint8_t *resolve_tp(void *ctx, uint64_t pos, uint32_t len) {
  wire__gtp *t = ctx;
  return t->ops->resolve(t, pos, len);
}

static int parse_prio(wire_prio_t p) {
  return p == WIRE_PRIO_LATENCY_CRITICAL || p == WIRE_PRIO_BEST_EFFORT;
}

int wire_conn_open(wire_conn_t **out, const char *url, const wire_hello_t *hello,
                   const wire_conn_opts_t *opts, char *errbuf, size_t errlen) {
  wire_conn_opts_t o = {0};
  wire_conn_t *c = NULL;
  wire__hello h;
  wire__welcome w;
  wire_buf_t hb, frame;
  char why[256] = "";
  pthread_condattr_t ca;
  int rc, i;

  *out = NULL;
  wire_buf_init(&hb);
  wire_buf_init(&frame);
  if (opts)
    o = *opts;
  if (url == NULL || hello == NULL || hello->tenant == NULL || hello->tenant[0] == 0 ||
      strlen(hello->tenant) > WIRE_TENANT_MAX || !parse_prio(hello->prio) ||
      (hello->token && strlen(hello->token) > WIRE_TOKEN_MAX)) {
    snprintf(why, sizeof(why), "bad url or hello (tenant 1..%d bytes, token <= %d bytes)",
             WIRE_TENANT_MAX, WIRE_TOKEN_MAX);
    rc = -EINVAL;
    goto fail;
  }
  memset(&h, 0, sizeof(h));
  h.vmin = WIRE_VERSION_MIN;
  h.vmax = WIRE_VERSION;
  h.prio = (uint8_t)hello->prio;
  /* Internal capabilities the guest always offers: FD frames (granted on
   * shm), RDMA bulk (granted on RDMA) and notes; the caller's bits stay its
   * own. */
  h.caps = (hello->caps & ~WIRE__CAPS_INTERNAL) | WIRE__CAPS_INTERNAL;
  snprintf(h.tenant, sizeof(h.tenant), "%s", hello->tenant);
  snprintf(h.token, sizeof(h.token), "%s", hello->token ? hello->token : "");
  wire__hello_encode(&hb, &h);
  if ((rc = wire_buf_status(&hb)) != 0)
    goto fail;
  rc = wire__frame_put(&frame, 1, WIRE__K_HELLO, 0, hb.data, hb.len);
  if (rc == 0)
    rc = wire_buf_status(&frame);
  if (rc)
    goto fail;

  c = calloc(1, sizeof(*c));
  if (c == NULL) {
    rc = -ENOMEM;
    goto fail;
  }
  {
    uint32_t tmo = o.connect_timeout_ms ? o.connect_timeout_ms : 5000;
    if (strncmp(url, "tcp://", 6) == 0)
      rc = wire__gtp_tcp_open(&c->tp, url + 6, frame.data, frame.len, tmo, &w, why, sizeof(why));
    else if (strncmp(url, "rdma://", 7) == 0)
      rc = wire__gtp_rdma_open(&c->tp, url + 7, frame.data, frame.len, tmo, &w, why, sizeof(why));
    else if (strncmp(url, "unix:", 5) == 0)
      rc = wire__gtp_shm_open(&c->tp, url + 5, frame.data, frame.len, tmo, &w, why, sizeof(why));
    else if (url[0] == '/' || url[0] == '.')
      rc = wire__gtp_shm_open(&c->tp, url, frame.data, frame.len, tmo, &w, why, sizeof(why));
    else {
      snprintf(why, sizeof(why), "unsupported url \"%s\" (unix:/path, /path or tcp://host:port)",
               url);
      rc = -EINVAL;
    }
  }
  if (rc)
    goto fail;
  c->tp->check = tx_check;
  c->tp->check_ctx = c;
  if (o.spin_us)
    c->tp->spin_ns = o.spin_us < 0 ? 0 : (uint64_t)(o.spin_us > 1000000 ? 1000000 : o.spin_us) * 1000u;
  if (o.busy_poll_us && strncmp(url, "tcp://", 6) == 0 && wire__gtp_tcp_busy_poll(c->tp, o.busy_poll_us))
    o.busy_poll_us = 0; /* not allowed here (EPERM): the spin still polls */
  atomic_store(&c->timed_ms, o.timed_ms);
  c->hops = wire__hops_new(hello->tenant);
  c->version = (uint8_t)w.version;
  c->caps = w.caps & hello->caps & ~WIRE__CAPS_INTERNAL;
  c->fd_ok = (w.caps & WIRE__CAP_FD) != 0;
  c->note_ok = (w.caps & WIRE__CAP_NOTE) != 0;
  c->tp->zstd = (c->caps & WIRE_CAP_ZSTD) != 0;
  c->heartbeat_ms = o.heartbeat_ms ? o.heartbeat_ms : w.heartbeat_ms;
  c->dead_after_ms = o.dead_after_ms ? o.dead_after_ms : w.dead_after_ms;
  c->batch_bytes = o.batch_bytes ? o.batch_bytes : 64 << 10;
  c->hold_ns = o.post_now ? (uint64_t)WIRE__POST_HOLD_US * 1000u : 0;
  /* A ring send is a memory write; a socket's is a system call of several
   * us, which a launch + sync would then pay twice. */
  c->fresh_ok = o.post_now && o.post_after_reply && c->tp->ops->send_msg != NULL;
  c->drain_ok = o.post_now && o.post_when_drained && c->tp->ops->drained != NULL;
  /* A batch is one frame: keep it within a TCP/RDMA chunk. */
  if (c->batch_bytes > WIRE__TCP_CHUNK - WIRE__POST_INLINE_MAX - 8)
    c->batch_bytes = WIRE__TCP_CHUNK - WIRE__POST_INLINE_MAX - 8;
  c->max_msg = w.max_msg_len;
  {
    /* Adaptive: posts hold tx_mu for tens of ns, so a contending thread
     * spins briefly instead of sleeping in the kernel. */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&c->tx_mu, &ma);
    pthread_mutexattr_destroy(&ma);
  }
  pthread_mutex_init(&c->rx_mu, NULL);
  pthread_mutex_init(&c->fd_mu, NULL);
  pthread_cond_init(&c->rx_cv, NULL);
  pthread_mutex_init(&c->bg_mu, NULL);
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->bg_cv, &ca);
  pthread_cond_init(&c->par_cv, NULL);
  pthread_condattr_destroy(&ca);
  wire_buf_init(&c->spare);
  for (i = 0; i < WIRE__SLOTS; i++) {
    pthread_mutex_init(&c->slots[i].mu, NULL);
    wire_buf_init(&c->slots[i].b);
    wire_buf_init(&c->slots[i].out);
  }
  c->slots_init = true;
  atomic_store(&c->next_id, 1);
  atomic_store(&c->last_rx_ns, wire__now_ns());
  atomic_store(&c->last_tx_ns, wire__now_ns());
  wire__rx_init(&c->rx, c->max_msg,
                1u << WIRE__K_REPLY | 1u << WIRE__K_HEARTBEAT | 1u << WIRE__K_BYE |
                    (c->note_ok ? 1u << WIRE__K_NOTE : 0),
                on_frame, c);
  c->rx.version = c->version;
  c->rx.zstd_ok = c->tp->zstd;
  c->rx.place = on_place;
  c->rx.copy_in = on_copy_in;
  if (c->tp->ops->resolve) {
    c->rx.resolve = resolve_tp;
    c->rx.resolve_ctx = c->tp;
  }
  if (!o.no_thread) {
    /* The heartbeat thread lives inside the tenant's process: it must never
     * run the application's signal handlers, so it starts with every signal
     * blocked (the mask is inherited at creation). */
    sigset_t all, old;
    int prc;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    prc = pthread_create(&c->bg, NULL, bg_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (prc != 0) {
      rc = -EAGAIN;
      snprintf(why, sizeof(why), "cannot start the heartbeat thread");
      wire_conn_close(c);
      c = NULL;
      goto fail;
    }
    c->bg_started = true;
    if (wire__par_enabled()) {
      c->tp->par = par_run;
      c->tp->par_ctx = c;
    }
  }
  wire_buf_close(&hb);
  wire_buf_close(&frame);
  *out = c;
  return 0;
fail:
  if (c) {
    if (c->tp)
      c->tp->ops->close(c->tp);
    free(c);
  }
  wire_buf_close(&hb);
  wire_buf_close(&frame);
  if (errbuf && errlen)
    snprintf(errbuf, errlen, "%s", why[0] ? why : wire_strerror(rc));
  return rc;
}

void wire_conn_forget(wire_conn_t *c) {
  if (c != NULL && c->tp->ops->forget != NULL)
    c->tp->ops->forget(c->tp);
}

void wire_conn_close(wire_conn_t *c) {
  int i;

  if (c == NULL)
    return;
  if (c->bg_started) {
    pthread_mutex_lock(&c->bg_mu);
    c->stopping = true;
    pthread_cond_signal(&c->bg_cv);
    pthread_mutex_unlock(&c->bg_mu);
    pthread_join(c->bg, NULL);
  }
  pthread_mutex_lock(&c->tx_mu);
  if (atomic_load(&c->err) == 0) {
    wire_buf_t b;
    struct iovec v;
    flush_locked(c);
    wire_buf_init(&b);
    wire__status_encode(&b, 0, "guest closed the connection");
    v.iov_base = b.data;
    v.iov_len = b.len;
    if (wire_buf_status(&b) == 0)
      send_locked(c, WIRE__K_BYE, 0, &v, 1, b.len);
    wire_buf_close(&b);
  }
  pthread_mutex_unlock(&c->tx_mu);
  if (c->hops) {
    wire__hops_write(c->hops);
    free(c->hops);
  }
  c->tp->ops->close(c->tp);
  wire__rx_close(&c->rx);
  wire_buf_close(&c->spare);
  for (i = 0; c->slots_init && i < WIRE__SLOTS; i++) {
    wire_buf_close(&c->slots[i].b);
    wire_buf_close(&c->slots[i].out);
    free(c->slots[i].seq);
    free(c->slots[i].out_seq);
    pthread_mutex_destroy(&c->slots[i].mu);
  }
  pthread_mutex_destroy(&c->tx_mu);
  pthread_mutex_destroy(&c->rx_mu);
  pthread_mutex_destroy(&c->fd_mu);
  pthread_cond_destroy(&c->rx_cv);
  pthread_mutex_destroy(&c->bg_mu);
  pthread_cond_destroy(&c->bg_cv);
  pthread_cond_destroy(&c->par_cv);
  free(c);
}

void wire_conn_hops_write(wire_conn_t *c) {
  if (c && c->hops)
    wire__hops_write(c->hops);
}

bool wire_conn_hops_on(const wire_conn_t *c) {
  return c && c->hops;
}

void wire_conn_hops_answered(wire_conn_t *c, uint64_t t_call, uint64_t t_sent, uint64_t t_woke) {
  if (c && c->hops)
    wire__hops_add(c->hops, 0, t_call, t_sent, t_woke);
}

int wire_conn_call(wire_conn_t *c, const struct iovec *req, int req_cnt, const struct iovec *rep,
                   int rep_cnt, size_t *rep_len) {
  waiter w = {.rep = rep, .rep_cnt = rep_cnt};
  int rc = call_kind(c, WIRE__K_CALL, req, req_cnt, &w);

  if (rep_len)
    *rep_len = w.len;
  return rc;
}

int wire_conn_call_alloc(wire_conn_t *c, const struct iovec *req, int req_cnt, void **rep,
                         size_t *rep_len) {
  waiter w = {.alloc = true};
  int rc = call_kind(c, WIRE__K_CALL, req, req_cnt, &w);

  *rep = w.abuf;
  if (rep_len)
    *rep_len = rc ? 0 : w.len;
  return rc;
}

/* Doubles slot sl's room for post numbers.  Its mu held.  0 or -ENOMEM. */
static int grow_seq(post_slot *sl) {
  uint32_t cap = sl->cap ? sl->cap * 2 : 64;
  uint64_t *q = realloc(sl->seq, cap * sizeof(*q));

  if (q == NULL)
    return -ENOMEM;
  sl->seq = q;
  sl->cap = cap;
  return 0;
}

int wire_conn_post(wire_conn_t *c, const struct iovec *req, int req_cnt) {
  size_t len = wire__iov_len(req, req_cnt);
  unsigned si;
  post_slot *sl;
  bool full;
  int rc, i;

  if (len > c->max_msg)
    return -EMSGSIZE;
  if ((rc = atomic_load(&c->err)) != 0)
    return rc;
  if (len > WIRE__POST_INLINE_MAX) {
    /* Sent alone, after every batched post (this thread's included). */
    pthread_mutex_lock(&c->tx_mu);
    rc = flush_locked(c);
    if (rc == 0)
      rc = send_locked(c, WIRE__K_POST, 0, req, req_cnt, len);
    pthread_mutex_unlock(&c->tx_mu);
    goto out;
  }
  si = my_slot();
  sl = &c->slots[si];
  pthread_mutex_lock(&sl->mu);
  if (wire_buf_reserve(&sl->b, 4 + len) || (sl->n == sl->cap && grow_seq(sl) != 0)) {
    pthread_mutex_unlock(&sl->mu);
    rc = -ENOMEM; /* the batches so far are lost with the connection */
    set_err(c, rc, "out of memory while batching posts");
    goto out;
  }
  /* Numbered under the slot's mu, so one slot's records are in order. */
  sl->seq[sl->n] = atomic_fetch_add_explicit(&c->post_seq, 1, memory_order_relaxed);
  if (sl->n == 0) {
    sl->since_ns = wire__now_ns();
    atomic_fetch_or(&c->pending, 1u << si);
  }
  {
    /* The hot path of every fire-and-forget call: u32 length + bytes,
     * written in place (room reserved above). */
    uint8_t *d = sl->b.data + sl->b.len;
    d[0] = (uint8_t)len;
    d[1] = (uint8_t)(len >> 8);
    d[2] = (uint8_t)(len >> 16);
    d[3] = (uint8_t)(len >> 24);
    d += 4;
    for (i = 0; i < req_cnt; i++) {
      if (req[i].iov_len)
        memcpy(d, req[i].iov_base, req[i].iov_len);
      d += req[i].iov_len;
    }
    sl->b.len += 4 + len;
  }
  sl->n++;
  full = sl->b.len >= c->batch_bytes;
  pthread_mutex_unlock(&sl->mu);
  if (!full && c->hold_ns)
    full =
        (c->fresh_ok && atomic_exchange_explicit(&c->fresh, false, memory_order_relaxed)) ||
        wire__since(wire__now_ns(), atomic_load_explicit(&c->last_tx_ns, memory_order_relaxed)) >=
            c->hold_ns ||
        (c->drain_ok && c->tp->ops->drained(c->tp));
  if (full) {
    /* Every slot, not this one alone: older posts of other threads first. */
    pthread_mutex_lock(&c->tx_mu);
    rc = flush_locked(c);
    pthread_mutex_unlock(&c->tx_mu);
  }
out:
  if (rc == 0 && atomic_load_explicit(&c->bg_idle, memory_order_relaxed)) {
    pthread_mutex_lock(&c->bg_mu);
    pthread_cond_signal(&c->bg_cv);
    pthread_mutex_unlock(&c->bg_mu);
  }
  return rc;
}

uint64_t wire__conn_sends(wire_conn_t *c) {
  return atomic_load_explicit(&c->sends, memory_order_relaxed);
}

void wire__conn_set_hold(wire_conn_t *c, uint64_t ns) {
  if (c->hold_ns)
    c->hold_ns = ns;
}

void wire_conn_answered(wire_conn_t *c) {
  if (c->fresh_ok)
    atomic_store_explicit(&c->fresh, true, memory_order_relaxed);
}

int wire_conn_flush(wire_conn_t *c) {
  int rc;

  pthread_mutex_lock(&c->tx_mu);
  rc = flush_locked(c);
  pthread_mutex_unlock(&c->tx_mu);
  return rc;
}

int wire_conn_blob_offer(wire_conn_t *c, const void *data, size_t len, uint64_t *id) {
  uint8_t idb[8], has = 0;
  uint64_t cid = wire_content_id(data, len);
  struct iovec req[2], rep;
  waiter w = {0};
  int32_t st;
  uint8_t stb[4];
  int rc;

  *id = cid;
  wire_le_wr64(idb, cid);
  req[0].iov_base = idb;
  req[0].iov_len = 8;
  rep.iov_base = &has;
  rep.iov_len = 1;
  w.rep = &rep;
  w.rep_cnt = 1;
  rc = call_kind(c, WIRE__K_BLOB_HAVE, req, 1, &w);
  if (rc || has)
    return rc;
  req[1].iov_base = (void *)data;
  req[1].iov_len = len;
  rep.iov_base = stb;
  rep.iov_len = 4;
  memset(&w, 0, sizeof(w));
  w.rep = &rep;
  w.rep_cnt = 1;
  rc = call_kind(c, WIRE__K_BLOB_PUT, req, 2, &w);
  if (rc)
    return rc;
  st = (int32_t)wire_le_rd32(stb);
  return st;
}

int wire_conn_send_fd(wire_conn_t *c, int fd, uint64_t tag) {
  uint8_t tb[8], stb[4] = {0};
  struct iovec req = {tb, 8}, rep = {stb, 4};
  waiter w = {.rep = &rep, .rep_cnt = 1, .fd = fd};
  size_t n;
  int rc;

  if (fd < 0)
    return -EBADF;
  if (c->tp->ops->send_fd == NULL || !c->fd_ok)
    return -EOPNOTSUPP; /* SCM_RIGHTS needs shm's UNIX socket, and a daemon that knows FD */
  wire_le_wr64(tb, tag);
  pthread_mutex_lock(&c->fd_mu);
  rc = call_kind(c, WIRE__K_FD, &req, 1, &w);
  pthread_mutex_unlock(&c->fd_mu);
  n = w.len;
  if (rc)
    return rc;
  if (n != 4)
    return -EPROTO;
  return (int32_t)wire_le_rd32(stb);
}

int wire_conn_note(wire_conn_t *c, uint32_t *word) {
  if (c == NULL || word == NULL)
    return -EINVAL;
  if (!c->note_ok)
    return -EOPNOTSUPP;
  *word = atomic_load_explicit(&c->note, memory_order_acquire);
  return 0;
}

uint32_t wire_conn_caps(const wire_conn_t *c) {
  return c->caps;
}
const char *wire_conn_transport(const wire_conn_t *c) {
  return c->tp->ops->name;
}

const char *wire_conn_why(wire_conn_t *c) {
  /* why is written once, under rx_mu, before err becomes non-zero. */
  return atomic_load(&c->err) ? c->why : "";
}
