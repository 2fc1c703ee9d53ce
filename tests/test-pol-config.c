/* test-pol-config.c: policy configuration defaults and validation. */
#include "policy/pol.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

static void config_default_threshold_is_paper_value(void **state) {
  (void)state;
  pol_config_t c;
  pol_config_init(&c);
  assert_int_equal(c.threshold_ns, 31600);
  assert_int_equal(pol_config_check(&c, NULL), 0);
}

static void config_rejects_threshold_out_of_range(void **state) {
  (void)state;
  pol_config_t c;
  const char *why = NULL;
  pol_config_init(&c);
  c.threshold_ns = 10;
  assert_int_equal(pol_config_check(&c, &why), -EINVAL);
  assert_non_null(why);
  c.threshold_ns = 2000000000ull;
  assert_int_equal(pol_config_check(&c, &why), -EINVAL);
}

static void config_rejects_timeslice_switch_longer_than_slice(void **state) {
  (void)state;
  pol_config_t c;
  const char *why = NULL;
  pol_config_init(&c);
  assert_int_equal(c.timeslice_ns, 2000000);
  assert_int_equal(c.ts_switch_ns, 190000);
  c.ts_switch_ns = c.timeslice_ns + 1;
  assert_int_equal(pol_config_check(&c, &why), -EINVAL);
  assert_non_null(why);
  pol_config_init(&c);
  c.ts_idle_ns = c.timeslice_ns + 1;
  assert_int_equal(pol_config_check(&c, &why), -EINVAL);
}

/* The partition's block bound: off by default, at most 1 s. */
static void config_partition_block_bound(void **state) {
  (void)state;
  pol_config_t c;
  const char *why = NULL;
  pol_config_init(&c);
  assert_int_equal(c.part_block_ns, 0);
  c.part_block_ns = 1000000000ull;
  assert_int_equal(pol_config_check(&c, NULL), 0);
  c.part_block_ns++;
  assert_int_equal(pol_config_check(&c, &why), -EINVAL);
  assert_string_equal(why, "partition block bound must be at most 1 s");
}

/* The partition's in-flight bound: 2 ms by default, 0 (off) to 1 s. */
static void config_partition_flight_bound(void **state) {
  (void)state;
  pol_config_t c;
  const char *why = NULL;
  pol_config_init(&c);
  assert_int_equal(c.part_flight_ns, 2000000);
  c.part_flight_ns = 0;
  assert_int_equal(pol_config_check(&c, NULL), 0);
  c.part_flight_ns = 1000000000ull;
  assert_int_equal(pol_config_check(&c, NULL), 0);
  c.part_flight_ns++;
  assert_int_equal(pol_config_check(&c, &why), -EINVAL);
  assert_string_equal(why, "partition in-flight bound must be at most 1 s");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(config_default_threshold_is_paper_value),
      cmocka_unit_test(config_rejects_threshold_out_of_range),
      cmocka_unit_test(config_rejects_timeslice_switch_longer_than_slice),
      cmocka_unit_test(config_partition_block_bound),
      cmocka_unit_test(config_partition_flight_bound),
  };
  return cmocka_run_group_tests_name("pol-config", tests, NULL, NULL);
}
