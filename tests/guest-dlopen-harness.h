/* guest-dlopen-harness.h: the built guest libcuda.so.1, loaded with dlopen
 * as cudart loads the driver, for the tests that check what the library
 * exports and answers without a daemon (test-guest-entry, -exports).
 *
 * gdl_load and gdl_unload are the cmocka group setup and teardown: `lib` is
 * $TALLY_BUILDDIR/guestlib/libcuda.so.1 (the current directory's guestlib/
 * without TALLY_BUILDDIR) between them.  driver_version_is_13_0 is a test
 * case both programs run.  Include it once per test program, after
 * <cmocka.h>.
 */
#ifndef TALLY_TESTS_GUEST_DLOPEN_HARNESS_H
#define TALLY_TESTS_GUEST_DLOPEN_HARNESS_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *lib;

/* Writes the path of the build tree's guestlib/NAME into buf (n bytes). */
static inline void gdl_path(char *buf, size_t n, const char *name) {
  const char *b = getenv("TALLY_BUILDDIR");
  snprintf(buf, n, "%s/guestlib/%s", b ? b : ".", name);
}

/* Group setup: dlopens the guest library into `lib`.  0, or -1 with
 * dlerror's reason on stderr. */
static inline int gdl_load(void **state) {
  char path[4096];
  (void)state;
  gdl_path(path, sizeof(path), "libcuda.so.1");
  lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    fprintf(stderr, "dlopen: %s\n", dlerror());
  return lib ? 0 : -1;
}

/* Group teardown: dlclose's status. */
static inline int gdl_unload(void **state) {
  (void)state;
  return dlclose(lib);
}

/* cuDriverGetVersion reports 13.0 and refuses a NULL pointer. */
static void driver_version_is_13_0(void **state) {
  (void)state;
  CUresult (*f)(int *) = (CUresult(*)(int *))dlsym(lib, "cuDriverGetVersion");
  int v = 0;
  assert_non_null(f);
  assert_int_equal(f(&v), CUDA_SUCCESS);
  assert_int_equal(v, 13000);
  assert_int_equal(f(NULL), CUDA_ERROR_INVALID_VALUE);
}

#endif /* TALLY_TESTS_GUEST_DLOPEN_HARNESS_H */
