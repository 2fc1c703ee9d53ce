/* test-wire-u64map.c: the u64 -> u64 hash map both sides use (wire/u64map.h).
 *
 * Random puts, gets and deletes agree with a plain array kept alongside;
 * deleting while iterating (as hostd's module_forget and the guest's
 * module_del do) visits every entry; key 0 is refused.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/u64map.h"

#define N 4096

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t next(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static void agrees_with_a_plain_array(void **state) {
  static uint64_t val[N]; /* key k + 1 -> val[k], 0 = absent */
  u64map_t m;
  size_t live = 0;
  (void)state;
  u64map_init(&m);
  memset(val, 0, sizeof(val));
  for (int i = 0; i < 200000; i++) {
    uint64_t k = next() % N, v = next() | 1, got = 0;
    switch (next() % 3) {
    case 0:
      assert_int_equal(u64map_put(&m, (k + 1) << 4, v), 0); /* aligned, like handles */
      live += val[k] == 0;
      val[k] = v;
      break;
    case 1:
      assert_int_equal(u64map_get(&m, (k + 1) << 4, &got), val[k] != 0);
      if (val[k])
        assert_true(got == val[k]);
      break;
    default:
      assert_int_equal(u64map_del(&m, (k + 1) << 4), val[k] != 0);
      live -= val[k] != 0;
      val[k] = 0;
      break;
    }
    assert_int_equal(m.len, live);
  }
  assert_int_equal(u64map_put(&m, 0, 1), -EINVAL);
  assert_false(u64map_get(&m, 0, NULL));
  u64map_close(&m);
}

static void deleting_while_iterating_visits_everything(void **state) {
  u64map_t m;
  size_t kept = 0;
  (void)state;
  u64map_init(&m);
  for (uint64_t k = 1; k <= 3000; k++)
    assert_int_equal(u64map_put(&m, k * 0x1000, k), 0);
  for (size_t i = 0; i < m.cap; i++)
    if (m.keys[i] && m.vals[i] % 3 != 0) {
      u64map_del(&m, m.keys[i]);
      i--; /* a later entry may have moved here */
    }
  for (size_t i = 0; i < m.cap; i++)
    if (m.keys[i]) {
      assert_int_equal(m.vals[i] % 3, 0);
      kept++;
    }
  assert_int_equal(kept, 1000);
  assert_int_equal(m.len, 1000);
  u64map_close(&m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(agrees_with_a_plain_array),
      cmocka_unit_test(deleting_while_iterating_visits_everything),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
