/* pin.c: which CPU a polling latency-critical worker runs on (--lc-poll-cpu).
 *
 * A worker that polls without end owns a core. Left to the kernel it can be moved between
 * CPUs or land next to the thread that feeds it; pinned, a 1000-kernel burst through tallyd
 * ran closer to native on an H100 host (docs/lc-path.md has the figures and how weak they
 * are). With `auto` (the default) each polling worker gets a CPU of its own from tallyd's
 * affinity mask, counting down from the highest: the low CPUs are where interrupts and most
 * processes land. One tallyd serves one GPU, so tallyd for GPU k starts k CPUs lower, and two
 * daemons on one host do not pick the same CPU for their first latency-critical tenant. Where
 * a core runs two hardware threads (SMT), a second worker goes to another core while one is
 * free: two pollers on one core would share its execution units.
 *
 * Invariants: a CPU is never given to two workers of one tallyd; at most a quarter of the
 * allowed CPUs are given out; with fewer than 4 allowed CPUs nothing is pinned (there the
 * worker does not poll either, unless forced, and a pinned spinner would starve the guest).
 */
#include "hostd/hostd-int.h"

#include <sched.h>
#include <stdio.h>

void hostd__pin_cores(const cpu_set_t *allowed, int16_t *core_of) {
  for (int c = 0; c < CPU_SETSIZE; c++) {
    char path[96];
    FILE *f;
    int first = c;
    core_of[c] = (int16_t)c;
    if (!CPU_ISSET(c, allowed))
      continue;
    snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list",
             c);
    /* "0,64" or "0-1": the lowest sibling comes first and names the core */
    if ((f = fopen(path, "r")) != NULL) {
      if (fscanf(f, "%d", &first) != 1 || first < 0 || first >= CPU_SETSIZE)
        first = c;
      fclose(f);
    }
    core_of[c] = (int16_t)first;
  }
}

int hostd__pin_pick(const cpu_set_t *allowed, const cpu_set_t *taken, const int16_t *core_of,
                    int skip) {
  int n = CPU_COUNT(allowed), given = 0;
  cpu_set_t cores; /* the cores (their lowest CPU) of the CPUs taken */

  if (n < 4 || skip < 0)
    return -1;
  CPU_ZERO(&cores);
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, taken)) {
      CPU_SET(core_of ? core_of[c] : c, &cores);
      given += CPU_ISSET(c, allowed) ? 1 : 0;
    }
  if (given >= n / 4)
    return -1;
  skip %= n; /* more GPUs than CPUs: wrap rather than give up */
  /* A free CPU on a core with nothing taken, from the start down, then from the top; then
   * any free CPU, the same two ways. */
  for (int pass = 0; pass < 4; pass++) {
    bool own_core = pass < 2, from_start = pass % 2 == 0;
    int seen = 0;
    for (int c = CPU_SETSIZE - 1; c >= 0; c--) {
      if (!CPU_ISSET(c, allowed))
        continue;
      if (from_start && seen++ < skip)
        continue;
      if (!CPU_ISSET(c, taken) && (!own_core || !CPU_ISSET(core_of ? core_of[c] : c, &cores)))
        return c;
    }
  }
  return -1;
}
