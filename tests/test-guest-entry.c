/* test-guest-entry.c: the built libcuda.so.1 loads and answers like a driver.
 *
 * Loads $TALLY_BUILDDIR/guestlib/libcuda.so.1 with dlopen, as cudart does.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

static void *lib;

static int load(void **state) {
  char path[4096];
  const char *b = getenv("TALLY_BUILDDIR");
  (void)state;
  snprintf(path, sizeof(path), "%s/guestlib/libcuda.so.1", b ? b : ".");
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    fprintf(stderr, "dlopen: %s\n", dlerror());
  return lib ? 0 : -1;
}

static int unload(void **state) {
  (void)state;
  return dlclose(lib);
}

static void driver_version_is_13_0(void **state) {
  (void)state;
  CUresult (*f)(int *) = (CUresult(*)(int *))dlsym(lib, "cuDriverGetVersion");
  int v = 0;
  assert_non_null(f);
  assert_int_equal(f(&v), CUDA_SUCCESS);
  assert_int_equal(v, 13000);
  assert_int_equal(f(NULL), CUDA_ERROR_INVALID_VALUE);
}

static void internal_symbols_are_hidden(void **state) {
  (void)state;
  assert_null(dlsym(lib, "wire_strerror"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(driver_version_is_13_0),
      cmocka_unit_test(internal_symbols_are_hidden),
  };
  return cmocka_run_group_tests_name("guest-entry", tests, load, unload);
}
