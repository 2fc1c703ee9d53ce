/* test-wire-le.c: the little-endian helpers of wire/wire-le.h, which every
 * byte format of Tally uses. */
#include "wire/wire-le.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

static void le_stores_low_byte_first_and_reads_back(void **state) {
  (void)state;
  uint8_t b[8];
  wire_le_wr16(b, 0x0102);
  assert_int_equal(b[0], 0x02);
  assert_int_equal(wire_le_rd16(b), 0x0102);
  wire_le_wr32(b, 0x01020304u);
  assert_int_equal(b[0], 0x04);
  assert_int_equal(b[3], 0x01);
  assert_int_equal(wire_le_rd32(b), 0x01020304u);
  wire_le_wr64(b, 0x0102030405060708ull);
  assert_int_equal(b[0], 0x08);
  assert_int_equal(b[7], 0x01);
  assert_true(wire_le_rd64(b) == 0x0102030405060708ull);
}

static void le_reads_at_any_alignment(void **state) {
  (void)state;
  uint8_t b[16] = {0};
  wire_le_wr64(b + 3, UINT64_MAX - 1);
  assert_true(wire_le_rd64(b + 3) == UINT64_MAX - 1);
  assert_int_equal(b[2], 0);
  assert_int_equal(b[11], 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(le_stores_low_byte_first_and_reads_back),
      cmocka_unit_test(le_reads_at_any_alignment),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
