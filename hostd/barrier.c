/* barrier.c: an asymmetric barrier for a Dekker pair with one hot side.
 *
 * The latency-critical worker, right after each driver launch, stores its
 * launch count and then loads a flag the scheduler thread clears at the end
 * of a burst (sched.c, invariant (d)).  A store followed by a load of
 * another word needs a full barrier between them, and every locked
 * instruction there cost the 1000-kernel chain several times its own price
 * (tests/bench/launch-ways: it waits for the launch's stores to drain).  The
 * other side runs once per burst.  So the hot side only keeps the compiler
 * from reordering (hostd__barrier_light) and the rare side calls
 * membarrier(2), which makes every running thread of the process execute a
 * full barrier before it returns (hostd__barrier_heavy): either the hot
 * side's store is visible to the loads after it, or the hot side's load
 * comes after that barrier and sees the rare side's store.
 *
 * Where the kernel lacks the expedited command (before Linux 4.14) or a
 * seccomp filter refuses it, hostd__barrier_init says no and the callers
 * keep their locked instructions.
 */
#include "hostd/hostd-int.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

static bool asym; /* set once by hostd__barrier_init, before any thread uses it */

static long membarrier(int cmd) {
  return syscall(__NR_membarrier, cmd, 0, 0);
}

bool hostd__barrier_init(void) {
  long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  asym = cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
         membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  return asym;
}

bool hostd__barrier_asym(void) {
  return asym;
}

void hostd__barrier_heavy(void) {
  /* Registered at init, so the command does not fail.  Without asym the
   * callers do not call it (both their sides are sequentially consistent);
   * the fence keeps it at least a full barrier of this thread. */
  if (!asym || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
