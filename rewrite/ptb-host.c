/* ptb-host.c: the host's side of a persistent-thread-block launch (the
 * calling convention and control block are in rw.h): what goes into the
 * control block's word 0 and which static range the launch gets, for a
 * fresh launch and for a relaunch after a preempted launch drained.
 *
 * The invariant the worker loop (xform-apply.c) keeps and this plan relies
 * on: after a launch drains, every index below word 0 has run exactly once
 * and none at or above it has run.  A plan moves word 0 past the static
 * range [first, first + S) it hands to workers 0..S-1, who run it without
 * touching the control block, so the invariant holds again once that
 * launch drains (a launched block always runs, and S <= workers).
 * tests/test-rw-ptb-model.c checks the plan against a model of the loop.
 */
#include "rewrite/rw.h"

#include <errno.h>

int rw_ptb_plan(uint64_t total, uint64_t next, uint32_t workers, int statics,
                rw_ptb_launch_t *out) {
  uint64_t left;
  if (out == NULL || workers == 0 || total == 0)
    return -EINVAL;
  if (next >= total)
    return 1; /* complete: nothing to launch */
  left = total - next;
  out->first = next;
  out->nstatic = statics ? (uint32_t)(left < workers ? left : workers) : 0;
  out->word0 = next + out->nstatic;
  return 0;
}
