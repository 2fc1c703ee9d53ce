/* test-sim-oom.c: every allocation of a simulation fails once, cleanly.
 *
 * malloc, calloc, realloc and free are wrapped at link time; allocation N
 * fails, N = 0, 1, 2, ... until the scenario (parse two traces, generate
 * arrivals, run the pair under our policy, which also drives policy/) runs
 * through.  Each failure must surface as -ENOMEM from the call that needed
 * memory and leak nothing (the loop of tests/oom-harness.h).
 */
#include "sim/sim.h"

#include <string.h>

#include "tests/oom-harness.h"

static const char *lc_text = "lc 1 64 256 32 0 8000 0 o\nlc 2 96 128 32 0 5000 0 o\n";
static const char *be_text = "be 10 4000 256 32 0 6000 0 osp\n"
                             "be 11 2000 256 64 32768 20000 0 os\n"
                             "be 14 300 256 32 0 100000 0 o\n";

static int scenario(void) {
  sim_trace_t lc = {0}, be = {0};
  sim_arrivals_t arr = {0};
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t res;
  char err[160];
  int e = sim_trace_parse(lc_text, strlen(lc_text), &lc, err, sizeof(err));
  if (e == 0)
    e = sim_trace_parse(be_text, strlen(be_text), &be, err, sizeof(err));
  sim_rng_init(&r, 1);
  if (e == 0)
    e = sim_arrivals_bursty(&arr, &r, 3000, 30000000);
  if (e == 0) {
    memset(&rc, 0, sizeof(rc));
    sim_gpu_config_init(&rc.gpu);
    pol_config_init(&rc.pol);
    rc.kind = POL_KIND_TALLY;
    rc.duration_ns = 30000000;
    rc.record_waits = true;
    rc.bucket_ns = 1000000;
    rc.ntenants = 2;
    rc.tenants[0] =
        (sim_tenant_spec_t){.trace = &lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
    rc.tenants[1] = (sim_tenant_spec_t){.trace = &be, .cls = POL_CLASS_BE, .weight = 1};
    e = sim_run(&rc, &res, NULL);
    if (e == 0) {
      assert_true(res.t[0].nlat > 10);
      sim_result_close(&res);
    }
  }
  if (e < 0)
    assert_int_equal(e, -ENOMEM);
  sim_arrivals_close(&arr);
  sim_trace_close(&lc);
  sim_trace_close(&be);
  return e;
}

static void every_allocation_failure_is_enomem_without_leak(void **state) {
  (void)state;
  oom_every_failure(scenario, 11); /* the scenario really allocates */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_allocation_failure_is_enomem_without_leak),
  };
  return cmocka_run_group_tests_name("sim-oom", tests, NULL, NULL);
}
