/* syncword.c: a latency-critical tenant's stream synchronisation answered by
 * the GPU itself (docs/lc-path.md, "A synchronisation the GPU answers").
 *
 * For a latency-critical tenant over shared memory (TALLY_LC_SYNC_WORD=0
 * turns it off), cuStreamSynchronize posts STREAM_MARK (wire/call.def):
 * tallyd has the GPU write a fresh value into a word of a pinned page this
 * process shares with it, behind everything the stream was given, and the
 * caller spins on the word instead of waiting for a reply.  The request's trip to tallyd overlaps the stream's work, and the
 * answer comes from the GPU's own write, as the driver's synchronisation
 * does natively, instead of tallyd's return from cuStreamSynchronize and its
 * reply.  Whenever the word cannot say "done and nothing to report" (tallyd
 * set bit 63: a kept error, a capturing stream, an unregistered page) or
 * does not come within the reply spin (TALLY_LC_SPIN_US: a long kernel, a
 * fault that stopped the stream), the caller makes the real call, which
 * waits and returns what it returns natively.  Off where the tenant's
 * replies do not spin (fewer than 4 CPUs and no TALLY_LC_SPIN_US, or
 * TALLY_LC_SPIN_US=0).
 *
 * Words: SLOTS of 8 bytes, one per synchronisation in flight, chosen by a
 * counter whose value is also the one written, so a slot's earlier value
 * never matches a later wait (the counter stays below 2^63).
 */
#include "guestlib/guest.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS   512
#define PAGE    (SLOTS * 8)
#define ERR_BIT (1ull << 63)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static uint64_t *words;          /* the shared page, NULL: the fast path is off */
static uint64_t spin_ns;         /* how long a wait spins on its word */
static _Atomic uint64_t counter; /* the last value handed out */

static void setup(void) {
  int32_t spin_us = guest__lc_spin_us();
  if (guest__env_long("TALLY_LC_SYNC_WORD", 1, 1) != 1 || guest__g.priority != 0 ||
      !guest__chan_shm() || spin_us <= 0)
    return;
  spin_ns = (uint64_t)spin_us * 1000u;
  words = guest__shared_alloc(PAGE, NULL);
  if (!words && guest__debug())
    guest__log("TALLY_LC_SYNC_WORD: no page shared with tallyd; synchronisations are calls");
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool guest__sync_word(uint64_t stream) {
  uint64_t n, end, v, t_call = 0, t_sent = 0;
  unsigned spins = 0;
  bool hops;
  pthread_once(&once, setup);
  if (!words)
    return false;
  if ((hops = guest__hops_on()))
    t_call = mono_ns();
  n = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed) + 1;
  if (n & ERR_BIT)
    return false;
  uint64_t *w = &words[n % SLOTS];
  call_stream_mark_req_t q = {
      .stream = stream, .tag = (uint64_t)(uintptr_t)words, .off = (n % SLOTS) * 8, .value = n};
  if (guest__post(CALL_OP_STREAM_MARK, &q) != 0)
    return false;
  t_sent = mono_ns(); /* the mark is in the ring (posted at once) */
  end = t_sent + spin_ns;
  for (;;) {
    v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
    if (v == n) {
      uint64_t t_woke = hops ? mono_ns() : 0;
      guest__answered(); /* the next launch goes at once, as after a reply */
      if (hops)
        guest__hops_answered(t_call, t_sent, t_woke);
      return true;
    }
    if (v == (n | ERR_BIT))
      return false;
    if ((++spins & 63) == 0) {
      if (mono_ns() >= end)
        return false;
      sched_yield(); /* a tallyd thread sharing this CPU must run */
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}
