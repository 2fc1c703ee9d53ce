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

/* cudart asks at start and loads every registered fatbin when told eager:
 * the guest answers lazy, as the driver does, unless the application's
 * environment asks for eager loading. */
static void loading_mode_follows_the_environment(void **state) {
  CUresult (*f)(CUmoduleLoadingMode *) =
      (CUresult(*)(CUmoduleLoadingMode *))dlsym(lib, "cuModuleGetLoadingMode");
  CUmoduleLoadingMode m = (CUmoduleLoadingMode)0;
  (void)state;
  assert_non_null(f);
  unsetenv("CUDA_MODULE_LOADING");
  assert_int_equal(f(&m), CUDA_SUCCESS);
  assert_int_equal(m, CU_MODULE_LAZY_LOADING);
  setenv("CUDA_MODULE_LOADING", "EAGER", 1);
  assert_int_equal(f(&m), CUDA_SUCCESS);
  assert_int_equal(m, CU_MODULE_EAGER_LOADING);
  setenv("CUDA_MODULE_LOADING", "LAZY", 1);
  assert_int_equal(f(&m), CUDA_SUCCESS);
  assert_int_equal(m, CU_MODULE_LAZY_LOADING);
  unsetenv("CUDA_MODULE_LOADING");
  assert_int_equal(f(NULL), CUDA_ERROR_INVALID_VALUE);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(driver_version_is_13_0),
      cmocka_unit_test(internal_symbols_are_hidden),
      cmocka_unit_test(unversioned_name_loads_the_guest),
      cmocka_unit_test(loading_mode_follows_the_environment),
  };
  return cmocka_run_group_tests_name("guest-entry", tests, gdl_load, gdl_unload);
}
