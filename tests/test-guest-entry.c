/* test-guest-entry.c: the built libcuda.so.1 loads and answers like a driver.
 *
 * Loads $TALLY_BUILDDIR/guestlib/libcuda.so.1 with dlopen, as cudart does,
 * and the unversioned libcuda.so link beside it, as numba does.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tests/guest-dlopen-harness.h"

static void internal_symbols_are_hidden(void **state) {
  (void)state;
  assert_null(dlsym(lib, "wire_strerror"));
}

/* numba dlopens the unversioned name first: it must be this library. */
static void unversioned_name_loads_the_guest(void **state) {
  char path[4096];
  void *h;
  (void)state;
  gdl_path(path, sizeof(path), "libcuda.so");
  h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(h);
  assert_ptr_equal(h, lib); /* the same object, reached through the link */
  assert_ptr_equal(dlsym(h, "cuDriverGetVersion"), dlsym(lib, "cuDriverGetVersion"));
  dlclose(h);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(driver_version_is_13_0),
      cmocka_unit_test(internal_symbols_are_hidden),
      cmocka_unit_test(unversioned_name_loads_the_guest),
  };
  return cmocka_run_group_tests_name("guest-entry", tests, gdl_load, gdl_unload);
}
