/* test-pol-oom.c: every allocation of policy/ fails once, cleanly.
 *
 * malloc, calloc, realloc and free are wrapped at link time
 * (-Wl,--wrap=...); allocation number N fails, N = 0, 1, 2, ... until the
 * whole scenario runs without a failure.  Each failure must come back as
 * -ENOMEM from the call that needed memory, leave the scheduler or table
 * usable and freeable, and leak nothing (outstanding allocations return to
 * their count before the scenario).  The pattern follows libuv's
 * test/test-loop-oom.c.
 */
#include "policy/pol.h"

#include <string.h>

#include "tests/oom-harness.h"

/* Returns 0 when every step succeeded, -ENOMEM when one ran out. */
static int scenario(void) {
  pol_config_t cfg;
  pol_sched_t *s = NULL;
  pol_action_t a[512];
  int rc;
  pol_config_init(&cfg);
  rc = pol_sched_new(POL_KIND_TALLY, &cfg, &s);
  if (rc < 0) {
    assert_int_equal(rc, -ENOMEM);
    return rc;
  }
  assert_int_equal(pol_sched_tenant_add(s, 0, POL_CLASS_LC, 1), 0);
  assert_int_equal(pol_sched_tenant_add(s, 1, POL_CLASS_BE, 1), 0);
  uint64_t now = 0;
  /* 100 BE kernels of 4 shapes; complete every launch; LC now and then. */
  for (uint64_t i = 0; i < 100 && rc == 0; i++) {
    pol_event_t ev = {
        .type = POL_EV_SUBMIT, .now_ns = now, .tenant = (i % 10 == 0) ? 0 : 1, .submit_id = i};
    ev.kernel = (pol_kernel_t){.kernel_id = i % 4,
                               .grid = {132 * (1 + (uint32_t)(i % 3)), 1, 1},
                               .block = {128, 1, 1},
                               .variants = POL_VAR_ALL,
                               .resident_blocks = 132};
    rc = pol_sched_event(s, &ev);
    while (rc == 0) {
      size_t n = pol_sched_actions(s, a, 512);
      if (n == 0)
        break;
      for (size_t j = 0; j < n && rc == 0; j++) {
        if (a[j].type != POL_ACT_LAUNCH)
          continue;
        now += 20000;
        pol_event_t c = {.type = POL_EV_COMPLETED,
                         .now_ns = now,
                         .launch_id = a[j].launch_id,
                         .dev_start_ns = now - 15000,
                         .dev_end_ns = now - 5000,
                         .blocks_done = a[j].block_count};
        rc = pol_sched_event(s, &c);
      }
      now += 100000;
      pol_event_t t = {.type = POL_EV_TIMER, .now_ns = now};
      if (rc == 0)
        rc = pol_sched_event(s, &t);
    }
  }
  if (rc == 0) {
    /* Round trip the profiles through memory. */
    pol_profiles_t *p = pol_sched_profiles(s), *q = NULL;
    size_t need = 0;
    (void)pol_profiles_encode(p, NULL, 0, &need);
    uint8_t *buf = malloc(need);
    if (!buf) {
      rc = -ENOMEM;
    } else {
      assert_int_equal(pol_profiles_encode(p, buf, need, &need), 0);
      rc = pol_profiles_new(&q);
      if (rc == 0) {
        rc = pol_profiles_decode(q, buf, need, NULL);
        if (rc == 0)
          assert_int_equal(pol_profiles_count(q), pol_profiles_count(p));
      }
      pol_profiles_free(q);
      free(buf);
    }
  }
  if (rc < 0)
    assert_int_equal(rc, -ENOMEM);
  pol_sched_free(s);
  return rc;
}

static void every_allocation_failure_is_enomem_without_leak(void **state) {
  (void)state;
  oom_every_failure(scenario, 11); /* the scenario really allocates */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_allocation_failure_is_enomem_without_leak),
  };
  return cmocka_run_group_tests_name("pol-oom", tests, NULL, NULL);
}
