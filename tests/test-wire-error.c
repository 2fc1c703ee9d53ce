/* test-wire-error.c: wire_strerror() covers every status we can return. */
#include "wire/wire.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

static void strerror_names_every_own_code(void **state) {
  (void)state;
#define CHECK(name, value, msg) assert_string_equal(wire_strerror(name), msg);
  WIRE_ERRNO_MAP(CHECK)
#undef CHECK
}

static void strerror_describes_errno_values(void **state) {
  (void)state;
  assert_string_equal(wire_strerror(0), "success");
  assert_string_equal(wire_strerror(-EPROTO), strerror(EPROTO));
}

static void strerror_survives_unknown_codes(void **state) {
  (void)state;
  assert_non_null(strstr(wire_strerror(-99999), "unknown status -99999"));
  assert_non_null(strstr(wire_strerror(7), "unknown status 7"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(strerror_names_every_own_code),
      cmocka_unit_test(strerror_describes_errno_values),
      cmocka_unit_test(strerror_survives_unknown_codes),
  };
  return cmocka_run_group_tests_name("wire-error", tests, NULL, NULL);
}
