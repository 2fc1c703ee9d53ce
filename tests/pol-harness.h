/* pol-harness.h: drives one policy/ scheduler by hand on virtual time, as
 * tallyd would: events in (submit, completed, timer), the actions that come
 * back collected.  Header-only, for cmocka tests that link policy/ (include
 * it after <cmocka.h>).  Tenant ids: LC 0, BE 1 (added by fx_init), BE2 2.
 */
#ifndef TALLY_TESTS_POL_HARNESS_H
#define TALLY_TESTS_POL_HARNESS_H

#include <stdint.h>
#include <string.h>

#include "policy/pol.h"

#define LC  0
#define BE  1
#define BE2 2

typedef struct fx {
  pol_sched_t *s;
  pol_action_t a[256];
  size_t n;
  uint64_t now;
} fx_t;

/* A scheduler of kind under cfg (NULL: the defaults) with the LC and one BE tenant. */
static inline void fx_init(fx_t *f, pol_kind_t kind, const pol_config_t *cfg) {
  pol_config_t c;
  memset(f, 0, sizeof(*f));
  if (!cfg) {
    pol_config_init(&c);
    cfg = &c;
  }
  assert_int_equal(pol_sched_new(kind, cfg, &f->s), 0);
  assert_int_equal(pol_sched_tenant_add(f->s, LC, POL_CLASS_LC, 1), 0);
  assert_int_equal(pol_sched_tenant_add(f->s, BE, POL_CLASS_BE, 1), 0);
}

/* Feeds an event at f->now and collects the actions. */
static inline void feed(fx_t *f, pol_event_t ev) {
  ev.now_ns = f->now;
  assert_int_equal(pol_sched_event(f->s, &ev), 0);
  f->n = pol_sched_actions(f->s, f->a, 256);
}

static inline void submit(fx_t *f, uint32_t tenant, uint64_t sid, pol_kernel_t k) {
  pol_event_t ev = {.type = POL_EV_SUBMIT, .tenant = tenant, .submit_id = sid, .kernel = k};
  feed(f, ev);
}

/* Launch a ended now after dur_ns on the device, done blocks of it done. */
static inline void complete(fx_t *f, const pol_action_t *a, uint64_t dur_ns, uint64_t done) {
  pol_event_t ev = {.type = POL_EV_COMPLETED,
                    .launch_id = a->launch_id,
                    .dev_start_ns = f->now > dur_ns ? f->now - dur_ns : 0,
                    .dev_end_ns = f->now,
                    .blocks_done = done};
  if (ev.dev_start_ns == 0)
    ev.dev_end_ns = dur_ns;
  feed(f, ev);
}

static inline void timer(fx_t *f) {
  pol_event_t ev = {.type = POL_EV_TIMER};
  feed(f, ev);
}

#endif
