/* ref-timeslice.c: the time-slicing reference policy.
 *
 * Models the driver's cross-process time-slicing (BRIEF: ~2 ms slices, a
 * waiting kernel sees 0.19-2.3 ms) at the launch level: one tenant owns the
 * GPU for a slice; only its kernels are launched, unchanged, at one priority;
 * the others are held.  When the slice ends and another tenant has work, the
 * owner's launches stop, those in flight drain, and ownership passes to the
 * next tenant with work (round robin).  An owner with no work at all hands
 * over at once.
 *
 * Approximation, stated: the driver saves and restores a context mid-kernel;
 * here in-flight kernels finish instead, so a BE owner keeps at most
 * TS_DEPTH launches in flight to keep that drain short.  The LC owner
 * queues all its kernels, as a CUDA graph or an eager loop does.
 */
#include "policy/pol.h"
#include "policy/pol-int.h"

/* Two launches in flight hide the launch gap of back-to-back kernels while
 * bounding the drain at a switch to two kernels. */
#define TS_DEPTH 2

static bool has_work(const pol__tenant_t *t) {
  return pol__tenant_busy(t);
}

static int next_with_work(const pol_sched_t *s, int from) {
  for (uint32_t k = 1; k <= s->ntenants; k++) {
    int i = (int)((from + k) % s->ntenants);
    if (has_work(&s->tenants[i]) && i != from)
      return i;
  }
  return -1;
}

static int pump(pol_sched_t *s) {
  if (s->ntenants == 0)
    return 0;
  if (s->ts_owner < 0) {
    s->ts_owner = next_with_work(s, (int)s->ntenants - 1);
    if (s->ts_owner < 0 && has_work(&s->tenants[s->ntenants - 1]))
      s->ts_owner = (int)s->ntenants - 1;
    if (s->ts_owner < 0)
      return 0;
    s->ts_slice_end_ns = s->now_ns + s->cfg.timeslice_ns;
  }
  pol__tenant_t *o = &s->tenants[s->ts_owner];
  int other = next_with_work(s, s->ts_owner);
  bool expired = s->now_ns >= s->ts_slice_end_ns;
  if (other >= 0 && (expired || !has_work(o))) {
    if (o->inflight > 0)
      return 0; /* draining: the owner launches nothing more */
    s->ts_owner = other;
    s->ts_slice_end_ns = s->now_ns + s->cfg.timeslice_ns;
    o = &s->tenants[other];
  }
  int rc = pol__issue_all(s, o, POL_PRIO_LOW, o->cls == POL_CLASS_LC ? UINT32_MAX : TS_DEPTH);
  if (rc < 0)
    return rc;
  if (next_with_work(s, s->ts_owner) >= 0 && s->now_ns < s->ts_slice_end_ns)
    pol__timer_at(s, s->ts_slice_end_ns);
  return 0;
}

const struct pol__ops pol__ops_timeslice = {.pump = pump};
