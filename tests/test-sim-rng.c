/* test-sim-rng.c: the simulator's RNG is deterministic and uniform. */
#include "sim/sim.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static void rng_same_seed_same_sequence(void **state) {
  (void)state;
  sim_rng_t a, b;
  sim_rng_init(&a, 42);
  sim_rng_init(&b, 42);
  for (int i = 0; i < 1000; i++)
    assert_int_equal(sim_rng_next(&a), sim_rng_next(&b));
}

static void rng_different_seeds_differ(void **state) {
  (void)state;
  sim_rng_t a, b;
  sim_rng_init(&a, 1);
  sim_rng_init(&b, 2);
  assert_int_not_equal(sim_rng_next(&a), sim_rng_next(&b));
}

static void rng_uniform_mean_is_half(void **state) {
  (void)state;
  sim_rng_t r;
  double sum = 0;
  sim_rng_init(&r, 7);
  for (int i = 0; i < 100000; i++) {
    double u = sim_rng_uniform(&r);
    assert_true(u >= 0.0 && u < 1.0);
    sum += u;
  }
  /* Standard error of the mean is 1/sqrt(12 * 1e5) ~ 0.0009; 0.01 is ~11 sigma. */
  assert_true(sum / 100000 > 0.49 && sum / 100000 < 0.51);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rng_same_seed_same_sequence),
      cmocka_unit_test(rng_different_seeds_differ),
      cmocka_unit_test(rng_uniform_mean_is_half),
  };
  return cmocka_run_group_tests_name("sim-rng", tests, NULL, NULL);
}
