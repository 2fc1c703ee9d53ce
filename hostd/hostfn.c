/* hostfn.c: stream-ordered host functions (cuLaunchHostFunc, cuStreamAddCallback).
 *
 * The function lives in the guest, so the daemon turns each one into a gate
 * on the real stream: a driver host function that tells the guest "your
 * function seq is reached", followed by a wait that keeps the stream blocked
 * until the guest says it ran (hostd__gpu.host_fn / gate_open; on the real
 * GPU a cuStreamWaitValue32 on a pinned host word, see gpu-cuda.c).  The
 * guest's host-function thread long-polls with HOSTFN_WAIT calls, which are
 * handled here on the loop thread and never queued for the tenant's worker:
 * the worker may be blocked in a synchronisation waiting for exactly that
 * host function (wire/call.def, HOSTFN_WAIT).  Reached functions are handed out in the
 * order the streams reach them; a HOSTFN_WAIT with done 1 opens the gate of
 * the one it was last given.
 *
 * Slots: a tenant has at most HOSTFN_SLOTS host functions enqueued and not
 * yet finished (one gate word each); past that HOSTFN fails with
 * CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES.  Below that, --tenant-hostfns is
 * the tenant's quota (guard.h, HOSTD_QUOTA_HOSTFNS): exec.c charges one
 * unit before hostd__hostfn_enqueue, the slot remembers it, and the unit
 * is given back when the slot is freed (its gate opened, by the guest's
 * "done" or by the tenant's close), so a tenant over its quota gets
 * CUDA_ERROR_OUT_OF_MEMORY and nobody else waits.  The quota belongs to
 * the worker: hostd__hostfn_drop_gate (the tenant's cleanup, on the
 * worker) forgets it under mu, so a late driver callback never touches it.  Slot states: FREE -> ENQUEUED
 * (worker) -> REACHED (driver thread) -> HANDED (loop thread, given to the
 * guest) -> FREE (done, or the tenant closed).
 *
 * The cue: a reached host function is how a framework learns that its work
 * is done (XLA ends each step with one), and its next requests usually
 * follow within tens of microseconds.  reached() calls the cue the server
 * set (hostd__hostfn_set_cue), after the guest's answer, so the tenant's
 * worker, asleep while the GPU ran, wakes while the guest does and polls
 * for them instead of paying a wake-up after they arrive.  The cue is
 * called under mu and cleared under mu before the worker goes, so it never
 * runs on a freed worker.
 *
 * Graphs: a host node of a tenant's graph (and a host function captured
 * into one) is a driver host node and a wait on a gate word, made by
 * exec-graph.c; before each launch of an exec, hostd__hostfn_arm takes a
 * slot for each of them, as a HOSTFN does, and the exec's nodes are pointed
 * at it.  The guest keeps such a function across replays: its seq is handed
 * out with HOSTD_HOSTFN_KEEP, and once no graph or exec of the tenant holds
 * it any more hostd__hostfn_drop queues it for a HOSTFN_WAIT answer with
 * HOSTD_HOSTFN_DROP (nothing ran; the guest forgets the function).
 *
 * Reach words (--hostfn-word, hostd__hostfn_set_word): the stream also
 * writes the slot's value into a reach word just before the driver's
 * callback (gpu.h, host_fn's word), and the tenant's worker, polling
 * between requests, reads the words of the slots it watches
 * (hostd__hostfn_poll): whichever of the poll and the callback comes first
 * reaches the function, the other finds it reached (or, the slot reused,
 * another value) and does nothing but, for the callback, drop its
 * reference.  So a function is handed to the guest as soon as the GPU
 * wrote the word, not when the driver's callback thread runs.
 *
 * Hand-off times (--hops, hostd__hostfn_set_hops): each function's enqueue,
 * reach, hand-over and done are stamped in its slot and recorded when the
 * guest reports it done (hops.c's F lines), under mu.
 *
 * Tenant death: hostd__hostfn_close (loop thread, on_close) opens every gate
 * of a reached function at once, and one reached later is opened as soon as
 * it is reached, so no stream stays blocked and the worker's cleanup
 * (stream synchronisations) finishes.
 *
 * Lock story: `mu` guards the slots, the FIFO and the parked call; gate_open
 * and wire replies are made after dropping it.  The object is refcounted:
 * the worker holds one reference, every enqueued host function one (dropped
 * by its reached callback), so a driver callback after the tenant is gone
 * touches live memory.  `inflight` (atomic) counts HOSTFN posts seen by
 * on_msg whose gates are not yet open: while it is not 0 the server copies
 * large payloads instead of pausing the tenant, because a paused tenant
 * could not deliver the HOSTFN_WAIT that unblocks its own worker.
 */
#include "hostd/gpu.h"
#include "hostd/guard.h"
#include "hostd/hostd-int.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

/* 256 pending host functions per tenant: far more than any program keeps
 * in flight (PyTorch has none; cudart tests a handful), and the gate is
 * then one KiB of pinned memory. */
#define HOSTFN_SLOTS 256

enum { SLOT_FREE = 0, SLOT_ENQUEUED, SLOT_REACHED, SLOT_HANDED };

typedef struct hostfn_slot {
  hostd_hostfn_t *hf; /* back pointer: the reached callback's argument is the slot */
  uint64_t seq;       /* the guest's number for the function */
  uint32_t value;     /* the gate value that opens it; grows by 1 per use of the slot */
  int state;
  bool charged;       /* holds one unit of hf->quota (HOSTD_QUOTA_HOSTFNS) */
  /* --hops (hf->hops set): when it was enqueued, reached and handed to the
   * guest, and the HOSTFN_WAIT call that handed it (hostd_fn_hop_t). */
  uint64_t t_enq, t_reached, t_handed, handed_id;
} hostfn_slot_t;

struct hostd_hostfn {
  pthread_mutex_t mu;
  int refs;
  wire_tenant_t *wt; /* referenced; NULL: no guest (tests), so nothing is answered */
  void *gate;        /* the backend's gate; made by the worker at the first host function */
  bool closed;       /* the tenant is gone: open gates as soon as reached */
  bool parked;       /* a HOSTFN_WAIT is waiting for a reached function */
  uint64_t park_id;  /* its wire call id */
  int handed;        /* slot given to the guest by the last HOSTFN_WAIT, or -1 */
  uint32_t fifo[HOSTFN_SLOTS]; /* reached slots in reach order (ring) */
  uint32_t fifo_head, fifo_len;
  int inflight; /* atomic: see the lock story */
  hostd_hostfn_cue_fn cue; /* under mu: called when a function is reached, or NULL */
  void *cue_arg;
  hostd_quota_t *quota; /* the worker's (charged slots give back here), under mu; NULL once gone */
  hostd_hops_t *hops;   /* --hops: the worker's, under mu; NULL when off or once it went */
  bool word;            /* --hostfn-word: ask for reach words (set before any function) */
  /* Slots whose reach word is armed and not yet reached (atomic bits): set
   * by the worker (slot_take), cleared when reached, or by the worker when
   * the word was not armed; read by the worker's poll. */
  _Atomic uint64_t watch[HOSTFN_SLOTS / 64];
  unsigned long by_word, by_cb; /* under mu: how the functions were reached */
  uint64_t *drops;      /* graph host functions the guest may forget (hostd__hostfn_drop) */
  size_t ndrops, capdrops;
  uint64_t *later;      /* ... once their slots of a launch still in flight are free */
  size_t nlater, caplater;
  hostfn_slot_t slot[HOSTFN_SLOTS];
};

hostd_hostfn_t *hostd__hostfn_new(wire_tenant_t *wt) {
  hostd_hostfn_t *h = calloc(1, sizeof(*h));
  if (!h)
    return NULL;
  pthread_mutex_init(&h->mu, NULL);
  h->refs = 1;
  h->handed = -1;
  h->wt = wt;
  if (wt)
    wire_tenant_ref(wt);
  for (int i = 0; i < HOSTFN_SLOTS; i++)
    h->slot[i].hf = h;
  return h;
}

void hostd__hostfn_unref(hostd_hostfn_t *h) {
  int left;
  if (!h)
    return;
  pthread_mutex_lock(&h->mu);
  left = --h->refs;
  pthread_mutex_unlock(&h->mu);
  if (left)
    return;
  if (h->gate) /* hostd__hostfn_drop_gate did not run: no CUDA call here (a driver thread?) */
    hostd__gpu.gate_del(h->gate, 0);
  free(h->drops);
  free(h->later);
  wire_tenant_unref(h->wt);
  pthread_mutex_destroy(&h->mu);
  free(h);
}

/* Answers wire call id with CUresult r and, on success, seq. */
static void answer(hostd_hostfn_t *h, uint64_t id, CUresult r, uint64_t seq) {
  call_hostfn_wait_rep_t rep = {.seq = seq};
  wire_buf_t b;
  wire_buf_init(&b);
  (void)wire_buf_reserve(&b, CALL_REPLY_HDR_LEN);
  b.len = b.err ? 0 : CALL_REPLY_HDR_LEN;
  if (r == CUDA_SUCCESS)
    (void)call_hostfn_wait_rep_put(&rep, &b);
  if (b.err) {
    /* Maybe on a driver thread, where the tenant cannot be closed: the
     * guest's host-function thread then waits until the tenant goes. */
    hostd__log(HOSTD_LOG_ERROR, "out of memory answering a host-function poll");
    wire_buf_close(&b);
    return;
  }
  call_reply_hdr_write(b.data, (uint32_t)r, (uint32_t)(b.len - CALL_REPLY_HDR_LEN));
  /* Fails only once the tenant is closed: nothing left to tell; wire owns b. */
  (void)wire_tenant_reply_mt(h->wt, id, b.data, b.len);
}

/* Appends x to the array *v of *n (capacity *cap); false when out of memory. */
static bool push_u64(uint64_t **v, size_t *n, size_t *cap, uint64_t x) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 16;
    uint64_t *p = realloc(*v, c * sizeof(*p));
    if (!p)
      return false;
    *v = p, *cap = c;
  }
  (*v)[(*n)++] = x;
  return true;
}

/* Whether a slot not yet free holds graph function seq (mu held). */
static bool seq_in_flight(const hostd_hostfn_t *h, uint64_t seq) {
  for (int k = 0; k < HOSTFN_SLOTS; k++)
    if (h->slot[k].state != SLOT_FREE && h->slot[k].seq == (seq | HOSTD_HOSTFN_KEEP))
      return true;
  return false;
}

/* Frees slot i and counts its post finished; a graph function waiting for
 * its last slot to be dropped goes to the drop queue.  mu held; the caller
 * opens the gate (value returned) after dropping mu. */
static uint32_t slot_finish(hostd_hostfn_t *h, int i) {
  uint64_t seq = h->slot[i].seq & ~HOSTD_HOSTFN_KEEP;
  h->slot[i].state = SLOT_FREE;
  for (size_t k = 0; (h->slot[i].seq & HOSTD_HOSTFN_KEEP) && k < h->nlater; k++)
    if (h->later[k] == seq && !seq_in_flight(h, seq)) {
      h->later[k] = h->later[--h->nlater];
      (void)push_u64(&h->drops, &h->ndrops, &h->capdrops, seq); /* else: kept (a few bytes) */
      break;
    }
  if (h->slot[i].charged)
    hostd__quota_release(h->quota, HOSTD_QUOTA_HOSTFNS, 1);
  h->slot[i].charged = false;
  __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_RELAXED);
  return h->slot[i].value;
}

static void watch_clear(hostd_hostfn_t *h, int i) {
  atomic_fetch_and_explicit(&h->watch[i / 64], ~(1ull << (i % 64)), memory_order_release);
}

/* The stream reached slot s's host function of gate value v: by the
 * driver's callback (by_cb) or by its reach word (the worker's poll).  No
 * CUDA call.  Nothing when s holds no enqueued function of value v any
 * more: the other way reached it first, and the slot may since be reused. */
static void reach(hostfn_slot_t *s, uint32_t v, bool by_cb) {
  hostd_hostfn_t *h = s->hf;
  int i = (int)(s - h->slot);
  uint64_t id = 0, seq = 0;
  bool reply = false, open = false, cued;
  uint32_t value = 0;
  void *gate;

  pthread_mutex_lock(&h->mu);
  if (s->state != SLOT_ENQUEUED || s->value != v) {
    pthread_mutex_unlock(&h->mu);
    return;
  }
  watch_clear(h, i);
  if (by_cb)
    h->by_cb++;
  else
    h->by_word++;
  gate = h->gate; /* read under mu: a recovery may drop it */
  cued = h->cue && !h->closed;
  s->t_reached = h->hops ? hostd__mono_ns() : 0;
  if (h->closed) {
    value = slot_finish(h, i);
    open = true;
  } else if (h->parked && h->handed < 0) {
    h->parked = false;
    id = h->park_id;
    seq = s->seq;
    s->state = SLOT_HANDED;
    h->handed = i;
    s->handed_id = id;
    s->t_handed = s->t_reached;
    reply = true;
  } else {
    s->state = SLOT_REACHED;
    h->fifo[(h->fifo_head + h->fifo_len++) % HOSTFN_SLOTS] = (uint32_t)i;
  }
  pthread_mutex_unlock(&h->mu);
  if (open)
    hostd__gpu.gate_open(gate, (uint32_t)i, value);
  if (reply)
    answer(h, id, CUDA_SUCCESS, seq);
  /* The cue after the answer: the guest, whose wake-up is on the path, is
   * told first; the worker's wake-up overlaps with it.  Checked again under
   * mu (the worker may have gone meanwhile); no second lock round without
   * a cue (--hostfn-wake-us off, the default). */
  if (cued) {
    pthread_mutex_lock(&h->mu);
    if (h->cue && !h->closed)
      h->cue(h->cue_arg);
    pthread_mutex_unlock(&h->mu);
  }
}

/* The driver's callback (gpu.h: driver thread; no CUDA call). */
static void reached(void *arg, uint32_t value) {
  hostfn_slot_t *s = arg;
  hostd_hostfn_t *h = s->hf;
  reach(s, value, true);
  hostd__hostfn_unref(h); /* the reference taken by slot_take */
}

int hostd__hostfn_poll(hostd_hostfn_t *h) {
  int due[8], n = 0;
  uint32_t v[8];
  bool any = false;
  if (!h)
    return 0;
  for (int k = 0; k < HOSTFN_SLOTS / 64 && !any; k++)
    any = atomic_load_explicit(&h->watch[k], memory_order_acquire) != 0;
  if (!any)
    return 0;
  /* Under mu: a recovery on another worker may drop the gate (drop_gate). */
  pthread_mutex_lock(&h->mu);
  for (int k = 0; h->gate && k < HOSTFN_SLOTS / 64 && n < 8; k++)
    for (uint64_t bits = atomic_load_explicit(&h->watch[k], memory_order_relaxed); bits && n < 8;
         bits &= bits - 1) {
      int i = k * 64 + __builtin_ctzll(bits);
      if (hostd__gpu.gate_reached(h->gate, (uint32_t)i, h->slot[i].value)) {
        due[n] = i;
        v[n++] = h->slot[i].value;
      }
    }
  pthread_mutex_unlock(&h->mu);
  for (int j = 0; j < n; j++)
    reach(&h->slot[due[j]], v[j], false);
  return n;
}

void hostd__hostfn_set_word(hostd_hostfn_t *h, bool on) {
  if (h)
    h->word = on;
}

void hostd__hostfn_counts(hostd_hostfn_t *h, unsigned long *by_word, unsigned long *by_cb) {
  *by_word = *by_cb = 0;
  if (!h)
    return;
  pthread_mutex_lock(&h->mu);
  *by_word = h->by_word;
  *by_cb = h->by_cb;
  pthread_mutex_unlock(&h->mu);
}

void hostd__hostfn_set_hops(hostd_hostfn_t *h, hostd_hops_t *hops) {
  if (!h)
    return;
  pthread_mutex_lock(&h->mu);
  h->hops = hops;
  pthread_mutex_unlock(&h->mu);
}

void hostd__hostfn_set_cue(hostd_hostfn_t *h, hostd_hostfn_cue_fn fn, void *arg) {
  if (!h)
    return;
  pthread_mutex_lock(&h->mu);
  h->cue = fn;
  h->cue_arg = arg;
  pthread_mutex_unlock(&h->mu);
}

void hostd__hostfn_note_post(hostd_hostfn_t *h) {
  __atomic_fetch_add(&h->inflight, 1, __ATOMIC_RELAXED);
}

void hostd__hostfn_post_failed(hostd_hostfn_t *h) {
  __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_RELAXED);
}

bool hostd__hostfn_busy(hostd_hostfn_t *h) {
  return h && __atomic_load_n(&h->inflight, __ATOMIC_RELAXED) > 0;
}

void *hostd__hostfn_gate(hostd_hostfn_t *h, int *r) {
  *r = CUDA_SUCCESS;
  if (!h->gate) {
    /* Only this worker creates the gate; others read it after mu. */
    void *g = NULL;
    if ((*r = (int)hostd__gpu.gate_new(&g, HOSTFN_SLOTS)) != CUDA_SUCCESS)
      return NULL;
    pthread_mutex_lock(&h->mu);
    h->gate = g;
    pthread_mutex_unlock(&h->mu);
  }
  return h->gate;
}

/* Takes a free slot for seq (charged to q when not NULL) and a reference
 * for its reached callback; the slot's index, or -1 when all are taken. */
static int slot_take(hostd_hostfn_t *h, uint64_t seq, hostd_quota_t *q, bool watch) {
  int i = -1;
  pthread_mutex_lock(&h->mu);
  for (int k = 0; k < HOSTFN_SLOTS && i < 0; k++)
    if (h->slot[k].state == SLOT_FREE)
      i = k;
  if (i >= 0) {
    /* Each slot's values only grow (its word holds the last one opened, 0
     * at first), and the stream waits for word >= value: a later function
     * reusing the slot can never leave an earlier waiter behind, however
     * late the GPU reads the word. */
    h->slot[i].seq = seq;
    h->slot[i].value++;
    h->slot[i].state = SLOT_ENQUEUED;
    h->slot[i].charged = q != NULL;
    h->slot[i].t_enq = h->hops ? hostd__mono_ns() : 0;
    /* Watched before the stream can reach it: the poll reads the value
     * only while the bit is set, and the word holds at most value - 1. */
    if (watch)
      atomic_fetch_or_explicit(&h->watch[i / 64], 1ull << (i % 64), memory_order_release);
    if (q)
      h->quota = q;
    h->refs++;
  }
  pthread_mutex_unlock(&h->mu);
  return i;
}

/* A taken slot whose callback will never run: free again, its unit not
 * charged (the caller gives it back). */
static void slot_untake(hostd_hostfn_t *h, int i) {
  pthread_mutex_lock(&h->mu);
  watch_clear(h, i);
  h->slot[i].state = SLOT_FREE;
  h->slot[i].charged = false;
  h->refs--; /* never the last: the worker holds one */
  pthread_mutex_unlock(&h->mu);
}

int hostd__hostfn_enqueue(hostd_hostfn_t *h, uint64_t stream, uint64_t seq, hostd_quota_t *q) {
  int i = -1, r;

  if (!hostd__hostfn_gate(h, &r))
    goto fail;
  if ((i = slot_take(h, seq, q, h->word)) < 0) {
    r = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    goto fail;
  }
  int word = h->word;
  r = (int)hostd__gpu.host_fn(stream, h->gate, (uint32_t)i, h->slot[i].value, reached,
                             &h->slot[i], &word);
  if (r == CUDA_SUCCESS) {
    if (!word) /* not armed: the callback alone tells (slot_take watched it) */
      watch_clear(h, i);
    return r;
  }
  slot_untake(h, i);
fail:
  __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_RELAXED);
  return r;
}

int hostd__hostfn_arm(hostd_hostfn_t *h, uint64_t seq, hostd_quota_t *q, hostd_hostfn_armed_t *a) {
  int i, r;
  if (!hostd__hostfn_gate(h, &r))
    return r;
  if ((i = slot_take(h, seq | HOSTD_HOSTFN_KEEP, q, false)) < 0)
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  __atomic_fetch_add(&h->inflight, 1, __ATOMIC_RELAXED); /* until its gate opens */
  *a = (hostd_hostfn_armed_t){.gate = h->gate, .slot = (uint32_t)i, .value = h->slot[i].value,
                              .cb = reached, .arg = &h->slot[i], .index = i};
  return CUDA_SUCCESS;
}

void hostd__hostfn_disarm(hostd_hostfn_t *h, const hostd_hostfn_armed_t *a) {
  slot_untake(h, a->index);
  __atomic_fetch_sub(&h->inflight, 1, __ATOMIC_RELAXED);
}

void hostd__hostfn_drop(hostd_hostfn_t *h, uint64_t seq) {
  uint64_t id = 0;
  bool answer_now = false;
  pthread_mutex_lock(&h->mu);
  if (h->closed) {
    pthread_mutex_unlock(&h->mu);
    return;
  }
  if (h->parked && h->handed < 0 && h->fifo_len == 0 && !seq_in_flight(h, seq)) {
    h->parked = false;
    id = h->park_id;
    answer_now = true;
  } else {
    /* A launch still in flight may reach it: dropped when its slot is free.
     * Out of memory: the guest keeps the function's entry (a few bytes). */
    if (seq_in_flight(h, seq))
      (void)push_u64(&h->later, &h->nlater, &h->caplater, seq);
    else
      (void)push_u64(&h->drops, &h->ndrops, &h->capdrops, seq);
  }
  pthread_mutex_unlock(&h->mu);
  if (answer_now)
    answer(h, id, CUDA_SUCCESS, seq | HOSTD_HOSTFN_DROP);
}

void hostd__hostfn_wait(hostd_hostfn_t *h, uint64_t id, const uint8_t *args, size_t len) {
  call_hostfn_wait_req_t q;
  call_why_t why;
  uint32_t done, value = 0;
  int open = -1;
  bool answer_now = false, refuse = false, stop_parked = false;
  uint64_t seq = 0, parked_id = 0;
  void *gate;

  if (call_hostfn_wait_req_decode(args, len, &q, &why) != 0) {
    hostd__log(HOSTD_LOG_INFO, "malformed request: %s; closing the tenant", why.text);
    wire_tenant_close(h->wt, -EPROTO, why.text);
    return;
  }
  done = q.done;
  if (done > 2) {
    answer(h, id, CUDA_ERROR_INVALID_VALUE, 0);
    return;
  }
  pthread_mutex_lock(&h->mu);
  gate = h->gate;
  if (done == 1 && h->handed >= 0) {
    open = h->handed;
    if (h->hops) {
      const hostfn_slot_t *s = &h->slot[open];
      hostd_fn_hop_t r = {.id = s->handed_id,
                          .seq = s->seq & ~HOSTD_HOSTFN_KEEP,
                          .t = {s->t_enq, s->t_reached, s->t_handed, hostd__mono_ns()}};
      hostd__hops_add_fn(h->hops, &r);
    }
    value = slot_finish(h, open);
    h->handed = -1;
  }
  if (done == 2) {
    stop_parked = h->parked;
    parked_id = h->park_id;
    h->parked = false;
    answer_now = true; /* seq 0: stop */
  } else if (h->parked || h->handed >= 0) {
    refuse = true; /* one poll at a time, one function in the guest's hands at a time */
  } else if (h->fifo_len > 0) {
    int i = (int)h->fifo[h->fifo_head];
    h->fifo_head = (h->fifo_head + 1) % HOSTFN_SLOTS;
    h->fifo_len--;
    h->slot[i].state = SLOT_HANDED;
    h->handed = i;
    h->slot[i].handed_id = id;
    h->slot[i].t_handed = h->hops ? hostd__mono_ns() : 0;
    seq = h->slot[i].seq;
    answer_now = true;
  } else if (h->ndrops > 0) { /* nothing to run: a function the guest may forget */
    seq = h->drops[--h->ndrops] | HOSTD_HOSTFN_DROP;
    answer_now = true;
  } else {
    h->parked = true;
    h->park_id = id;
  }
  pthread_mutex_unlock(&h->mu);
  if (open >= 0)
    hostd__gpu.gate_open(gate, (uint32_t)open, value);
  if (stop_parked)
    answer(h, parked_id, CUDA_SUCCESS, 0);
  if (refuse)
    answer(h, id, CUDA_ERROR_INVALID_VALUE, 0);
  else if (answer_now)
    answer(h, id, CUDA_SUCCESS, seq);
}

void hostd__hostfn_close(hostd_hostfn_t *h) {
  uint32_t open[HOSTFN_SLOTS], value[HOSTFN_SLOTS];
  int n = 0;
  void *gate;
  if (!h)
    return;
  pthread_mutex_lock(&h->mu);
  gate = h->gate;
  h->closed = true;
  h->parked = false;
  h->handed = -1;
  h->fifo_len = 0;
  for (int i = 0; i < HOSTFN_SLOTS; i++)
    if (h->slot[i].state == SLOT_REACHED || h->slot[i].state == SLOT_HANDED) {
      value[n] = slot_finish(h, i);
      open[n++] = (uint32_t)i;
    }
  pthread_mutex_unlock(&h->mu);
  /* Functions not reached yet are opened by reached() (closed is set). */
  for (int k = 0; k < n; k++)
    hostd__gpu.gate_open(gate, open[k], value[k]);
}

void hostd__hostfn_drop_gate(hostd_hostfn_t *h, bool gpu) {
  void *g;
  if (!h)
    return;
  pthread_mutex_lock(&h->mu);
  g = h->gate;
  h->gate = NULL;
  h->quota = NULL; /* the worker's, about to go */
  pthread_mutex_unlock(&h->mu);
  if (g)
    hostd__gpu.gate_del(g, gpu);
}
