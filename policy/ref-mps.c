/* ref-mps.c: the MPS reference policies, behind the same interface.
 *
 * MPS: every kernel of every tenant is launched the moment it is submitted,
 * unchanged, all on streams of one priority; the hardware then dispatches
 * blocks in launch order, so an LC kernel waits behind every BE block
 * launched before it.  MPS-PRIO ("MPS with client priority"): the same, but
 * the LC tenant's stream has the high priority, so its blocks dispatch ahead
 * of queued BE blocks (never ahead of resident ones: no preemption).
 * Nothing is held, nothing is reshaped (never PTB or FLUSH), no profile is
 * used.
 */
#include "policy/pol.h"
#include "policy/pol-int.h"

static int pump(pol_sched_t *s) {
  for (uint32_t i = 0; i < s->ntenants; i++) {
    pol__tenant_t *t = &s->tenants[i];
    int prio =
        (s->kind == POL_KIND_MPS_PRIO && t->cls == POL_CLASS_LC) ? POL_PRIO_HIGH : POL_PRIO_LOW;
    int rc = pol__issue_all(s, t, prio, UINT32_MAX);
    if (rc < 0)
      return rc;
  }
  return 0;
}

const struct pol__ops pol__ops_mps = {.pump = pump};
