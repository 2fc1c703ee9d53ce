/* ctxlock.c: the shared context's reader-writer lock (tenant.c takes it).
 *
 * Every request of every tenant holds it for reading; only recover(), after
 * a fault corrupted the context, holds it for writing.  A pthread rwlock
 * costs each request two locked instructions on a line every worker writes,
 * the second right after the driver's launch, where one locked instruction
 * cost the 1000-kernel chain several times its own price
 * (tests/bench/launch-ways).  So, where the asymmetric barrier works
 * (barrier.c), a reader only marks its own slot (a line no other thread
 * writes), puts a compiler barrier between that and its look at the writer's
 * flag, and clears the mark when done; the writer raises the flag, makes
 * every thread execute a full barrier (hostd__barrier_heavy) and waits until
 * no slot is marked.  Either a reader's mark is visible to the writer, or the
 * reader's look comes after the barrier and sees the flag, and backs off
 * until the writer is done.
 *
 * Invariants: a thread has at most one slot, claimed at its first read lock
 * and given back when it exits (a later thread reuses it; the list only
 * grows, to the most threads that ever held the lock at once); a reader
 * nests (a depth count; only the outermost unlock clears the mark); the
 * writer also takes the pthread rwlock for writing, so a reader without a
 * slot (out of memory) or without the barrier takes it for reading and is
 * excluded the same way; each acquisition remembers which way it went, so
 * its release matches it even if the barrier came up in between.  Writers
 * are preferred: a reader that sees the flag waits for the writer's mutex.
 */
#include "hostd/hostd-int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
  _Alignas(64) atomic_int marked; /* the owner is inside a read section */
  atomic_bool used;               /* claimed by a live thread */
  struct slot *next;
} slot_t;

static pthread_rwlock_t rw = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static pthread_mutex_t write_mu = PTHREAD_MUTEX_INITIALIZER; /* held by the writer */
static atomic_bool writing;
static pthread_mutex_t slots_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(slot_t *) slots; /* pushed at the head under slots_mu; never freed */
static pthread_key_t slot_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static bool key_ok;

static __thread slot_t *mine;
static __thread unsigned depth;   /* read sections this thread is in */
static __thread bool via_rw;      /* the outermost one took the rwlock */
static __thread bool wrote_asym;  /* the writer raised the flag */

static void slot_release(void *p) {
  slot_t *s = p;
  atomic_store_explicit(&s->marked, 0, memory_order_release);
  atomic_store_explicit(&s->used, false, memory_order_release);
}

static void key_init(void) {
  key_ok = pthread_key_create(&slot_key, slot_release) == 0;
}

/* This thread's slot, claimed now if need be; NULL without memory. */
static slot_t *my_slot(void) {
  slot_t *s;
  if (mine)
    return mine;
  if (pthread_once(&key_once, key_init) != 0 || !key_ok)
    return NULL;
  pthread_mutex_lock(&slots_mu);
  for (s = atomic_load_explicit(&slots, memory_order_relaxed); s; s = s->next)
    if (!atomic_load_explicit(&s->used, memory_order_acquire))
      break;
  if (!s && (s = aligned_alloc(_Alignof(slot_t), sizeof(*s)))) { /* marked: a line of its own */
    memset(s, 0, sizeof(*s));
    s->next = atomic_load_explicit(&slots, memory_order_relaxed);
    atomic_store_explicit(&slots, s, memory_order_release);
  }
  if (s)
    atomic_store_explicit(&s->used, true, memory_order_relaxed);
  pthread_mutex_unlock(&slots_mu);
  if (s && pthread_setspecific(slot_key, s) != 0) { /* no release at exit: give it back now */
    atomic_store_explicit(&s->used, false, memory_order_release);
    s = NULL;
  }
  return mine = s;
}

void hostd__ctxlock_rd(void) {
  slot_t *s;
  if (depth++ > 0)
    return;
  via_rw = !hostd__barrier_asym() || !(s = my_slot());
  if (via_rw) {
    pthread_rwlock_rdlock(&rw);
    return;
  }
  for (;;) {
    atomic_store_explicit(&s->marked, 1, memory_order_relaxed);
    hostd__barrier_light(); /* the writer's heavy barrier orders the pair */
    if (!atomic_load_explicit(&writing, memory_order_acquire))
      return;
    atomic_store_explicit(&s->marked, 0, memory_order_release);
    pthread_mutex_lock(&write_mu); /* wait for the writer */
    pthread_mutex_unlock(&write_mu);
  }
}

void hostd__ctxlock_rd_done(void) {
  if (--depth > 0)
    return;
  if (via_rw)
    pthread_rwlock_unlock(&rw);
  else
    atomic_store_explicit(&mine->marked, 0, memory_order_release);
}

void hostd__ctxlock_wr(void) {
  pthread_mutex_lock(&write_mu);
  pthread_rwlock_wrlock(&rw);
  wrote_asym = hostd__barrier_asym();
  if (!wrote_asym)
    return;
  atomic_store_explicit(&writing, true, memory_order_seq_cst);
  hostd__barrier_heavy();
  for (slot_t *s = atomic_load_explicit(&slots, memory_order_acquire); s; s = s->next)
    while (atomic_load_explicit(&s->marked, memory_order_acquire))
      sched_yield(); /* a request in flight finishes */
}

void hostd__ctxlock_wr_done(void) {
  if (wrote_asym)
    atomic_store_explicit(&writing, false, memory_order_release);
  pthread_rwlock_unlock(&rw);
  pthread_mutex_unlock(&write_mu);
}
