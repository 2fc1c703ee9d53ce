/* pin.c: which CPU a polling latency-critical worker runs on (--lc-poll-cpu).
 *
 * A worker that polls without end owns a core. Left to the kernel it can be moved between
 * CPUs or land next to the thread that feeds it; pinned, a 1000-kernel burst through tallyd
 * ran closer to native on an H100 host (docs/lc-path.md has the figures and how weak they
 * are). With `auto` (the default) each polling worker gets a CPU of its own from tallyd's
 * affinity mask, counting down from the highest: the low CPUs are where interrupts and most
 * processes land. One tallyd serves one GPU, so tallyd for GPU k starts k CPUs lower, and two
 * daemons on one host do not pick the same CPU for their first latency-critical tenant.
 *
 * Invariants: a CPU is never given to two workers of one tallyd; at most a quarter of the
 * allowed CPUs are given out; with fewer than 4 allowed CPUs nothing is pinned (there the
 * worker does not poll either, unless forced, and a pinned spinner would starve the guest).
 */
#include "hostd/hostd-int.h"

#include <sched.h>

int hostd__pin_pick(const cpu_set_t *allowed, const cpu_set_t *taken, int skip) {
  int n = CPU_COUNT(allowed), given = 0, seen = 0;

  if (n < 4 || skip < 0)
    return -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, allowed) && CPU_ISSET(c, taken))
      given++;
  if (given >= n / 4)
    return -1;
  skip %= n; /* more GPUs than CPUs: wrap rather than give up */
  for (int c = CPU_SETSIZE - 1; c >= 0; c--) {
    if (!CPU_ISSET(c, allowed))
      continue;
    if (seen++ < skip)
      continue;
    if (!CPU_ISSET(c, taken))
      return c;
  }
  /* everything below the start is taken: try above it */
  for (int c = CPU_SETSIZE - 1; c >= 0; c--)
    if (CPU_ISSET(c, allowed) && !CPU_ISSET(c, taken))
      return c;
  return -1;
}
