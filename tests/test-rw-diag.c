/* test-rw-diag.c: refusal diagnostics are positional and bounded. */
#include "rewrite/rw.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void diag_formats_line_and_column(void **state) {
  (void)state;
  rw_diag_t d;
  char buf[64];
  assert_int_equal(rw_diag_set(&d, -EPROTO, 3, 7, "bad %s", "opcode"), -EPROTO);
  rw_diag_format(&d, buf, sizeof(buf));
  assert_string_equal(buf, "3:7: bad opcode");
}

static void diag_truncates_long_text(void **state) {
  (void)state;
  rw_diag_t d;
  char big[1000];
  memset(big, 'x', sizeof(big) - 1);
  big[sizeof(big) - 1] = 0;
  rw_diag_set(&d, -EPROTO, 0, 0, "%s", big);
  assert_int_equal(strlen(d.text), sizeof(d.text) - 1);
}

static void diag_accepts_null(void **state) {
  (void)state;
  assert_int_equal(rw_diag_set(NULL, -ENOMEM, 1, 1, "x"), -ENOMEM);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(diag_formats_line_and_column),
      cmocka_unit_test(diag_truncates_long_text),
      cmocka_unit_test(diag_accepts_null),
  };
  return cmocka_run_group_tests_name("rw-diag", tests, NULL, NULL);
}
