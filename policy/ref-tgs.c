/* ref-tgs.c: a TGS-like rate controller (after Wu et al., "Transparent GPU
 * Sharing in Container Clouds for Deep Learning Workloads", NSDI 2023).
 *
 * TGS shares the GPU at the OS level with no stream priority and no kernel
 * changes: it adapts how fast the BE container may submit.  Here: every
 * kernel is launched unchanged at one priority; LC kernels go at once; BE
 * kernels go while fewer than `window` BE launches are in flight.  Every
 * tgs_interval_ns the controller looks at the worst LC queueing delay seen in
 * that interval (device start minus launch, from completion timestamps): above
 * tgs_delay_ns it halves the window, otherwise it adds one (AIMD).
 * This is our simplification of TGS's controller, not its code.  Kernels
 * go in their original form only (the rest of one cut before, sliced):
 * never PTB or FLUSH.
 */
#include "policy/pol.h"
#include "policy/pol-int.h"

/* Enough in flight to keep a GPU busy with training kernels of ~100 us while
 * the host launches every ~5 us; more only deepens the LC's queue. */
#define TGS_MAX_WINDOW 64

static void on_completed(pol_sched_t *s, const pol__launch_t *l, const pol_event_t *ev) {
  if (l->t->cls != POL_CLASS_LC || ev->dev_start_ns < l->issue_ns)
    return;
  uint64_t delay = ev->dev_start_ns - l->issue_ns;
  if (delay > s->tgs_max_delay_ns)
    s->tgs_max_delay_ns = delay;
}

static int pump(pol_sched_t *s) {
  int rc;
  if (s->tgs_next_ns == UINT64_MAX)
    s->tgs_next_ns = s->now_ns + s->cfg.tgs_interval_ns;
  while (s->now_ns >= s->tgs_next_ns) {
    if (s->tgs_max_delay_ns > s->cfg.tgs_delay_ns)
      s->tgs_window = s->tgs_window > 1 ? s->tgs_window / 2 : 1;
    else if (s->tgs_window < TGS_MAX_WINDOW)
      s->tgs_window++;
    s->tgs_max_delay_ns = 0;
    s->tgs_next_ns += s->cfg.tgs_interval_ns;
  }
  for (uint32_t i = 0; i < s->ntenants; i++) {
    pol__tenant_t *t = &s->tenants[i];
    if (t->cls == POL_CLASS_LC) {
      rc = pol__issue_all(s, t, POL_PRIO_LOW, UINT32_MAX);
      if (rc < 0)
        return rc;
    }
  }
  for (uint32_t i = 0; i < s->ntenants; i++) {
    pol__tenant_t *t = &s->tenants[i];
    if (t->cls != POL_CLASS_BE)
      continue;
    pol__sub_t *u;
    while (s->be_inflight < s->tgs_window && (u = pol__tenant_issuable(t)) != NULL) {
      rc = pol__issue_rest(s, t, u, POL_PRIO_LOW);
      if (rc < 0)
        return rc;
    }
  }
  /* Wake for the next control step only while there is something to control. */
  for (uint32_t i = 0; i < s->ntenants; i++)
    if (pol__tenant_busy(&s->tenants[i]))
      pol__timer_at(s, s->tgs_next_ns);
  return 0;
}

const struct pol__ops pol__ops_tgs = {.pump = pump, .on_completed = on_completed};
