/* test-guest-exports.c: libcuda.so.1 exports the driver's surface and finds
 * symbols the way cudart asks for them.
 *
 * Loads $TALLY_BUILDDIR/guestlib/libcuda.so.1 with dlopen, as cudart does.
 * Checks: every symbol cuda.h declares is exported (read from the generated
 * guestlib/driver-api.def), nothing but cu* is, stubs answer
 * CUDA_ERROR_NOT_SUPPORTED, cuGetProcAddress resolves versions and
 * per-thread flags like the driver (facts/getprocaddress.txt), and
 * cuGetExportTable serves the tables cudart needs with the sizes measured
 * on the real driver (facts/export-tables.txt).  No daemon is needed.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/guest-dlopen-harness.h"

typedef CUresult (*proc_v2_t)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*export_t)(const void **, const CUuuid *);

static void every_declared_symbol_is_exported(void **state) {
  char path[4096], line[4096];
  const char *s = getenv("TALLY_SRCDIR");
  FILE *f;
  int n = 0, missing = 0;
  (void)state;
  snprintf(path, sizeof(path), "%s/guestlib/driver-api.def", s ? s : "..");
  f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof(line), f)) {
    char name[256];
    if (sscanf(line, "GUEST_API_IMPL(%255[^,]", name) != 1 &&
        sscanf(line, "GUEST_API_STUB(%255[^,]", name) != 1)
      continue;
    n++;
    if (!dlsym(lib, name)) {
      fprintf(stderr, "not exported: %s\n", name);
      missing++;
    }
  }
  fclose(f);
  assert_int_equal(missing, 0);
  assert_true(n > 600); /* CUDA 13.0 declares 637 driver symbols */
}

static void internal_symbols_are_hidden(void **state) {
  (void)state;
  assert_null(dlsym(lib, "wire_strerror"));
  assert_null(dlsym(lib, "guest__g"));
  assert_null(dlsym(lib, "guest__log"));
  assert_null(dlsym(lib, "XXH3_64bits"));
}

static void unimplemented_entry_point_returns_not_supported(void **state) {
  typedef CUresult (*child_of_t)(CUgraphNode, CUgraph *);
  child_of_t f = (child_of_t)dlsym(lib, "cuGraphChildGraphNodeGetGraph");
  CUgraph g;
  (void)state;
  assert_non_null(f);
  assert_int_equal(f(NULL, &g), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(f(NULL, &g), CUDA_ERROR_NOT_SUPPORTED); /* logged once, still refused */
}

static void *proc(const char *name, int version, cuuint64_t flags, CUresult *r,
                  CUdriverProcAddressQueryResult *st) {
  proc_v2_t p = (proc_v2_t)dlsym(lib, "cuGetProcAddress_v2");
  void *fn = NULL;
  assert_non_null(p);
  *r = p(name, &fn, version, flags, st);
  return fn;
}

static void get_proc_address_picks_the_newest_version_not_above_the_request(void **state) {
  CUresult r;
  CUdriverProcAddressQueryResult st;
  (void)state;
  assert_ptr_equal(proc("cuMemAlloc", 3020, 0, &r, &st), dlsym(lib, "cuMemAlloc_v2"));
  assert_int_equal(r, CUDA_SUCCESS);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
  assert_ptr_equal(proc("cuMemAlloc", 2000, 0, &r, &st), dlsym(lib, "cuMemAlloc"));
  assert_ptr_equal(proc("cuCtxSynchronize", 13000, 0, &r, &st), dlsym(lib, "cuCtxSynchronize_v2"));
  assert_ptr_equal(proc("cuCtxSynchronize", 12090, 0, &r, &st), dlsym(lib, "cuCtxSynchronize"));
  assert_ptr_equal(proc("cuStreamGetCaptureInfo", 12030, 0, &r, &st),
                   dlsym(lib, "cuStreamGetCaptureInfo_v3"));
  assert_ptr_equal(proc("cuDeviceGet", 13000, 0, &r, &st), dlsym(lib, "cuDeviceGet"));
  assert_ptr_equal(proc("cuGetProcAddress", 12000, 0, &r, &st), dlsym(lib, "cuGetProcAddress_v2"));
}

static void get_proc_address_honours_the_per_thread_flag(void **state) {
  CUresult r;
  CUdriverProcAddressQueryResult st;
  (void)state;
  assert_ptr_equal(
      proc("cuMemcpyHtoD", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &r, &st),
      dlsym(lib, "cuMemcpyHtoD_v2_ptds"));
  assert_ptr_equal(proc("cuMemcpyHtoD", 7000, 0, &r, &st), dlsym(lib, "cuMemcpyHtoD_v2"));
  assert_ptr_equal(
      proc("cuLaunchKernel", 7000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &r, &st),
      dlsym(lib, "cuLaunchKernel_ptsz"));
  /* No per-thread variant exists: the legacy one serves. */
  assert_ptr_equal(proc("cuMemAlloc", 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &r, &st),
                   dlsym(lib, "cuMemAlloc_v2"));
}

static void get_proc_address_reports_unknown_and_too_old(void **state) {
  CUresult r;
  CUdriverProcAddressQueryResult st;
  (void)state;
  assert_null(proc("cuNoSuchThing", 13000, 0, &r, &st));
  assert_int_equal(r, CUDA_ERROR_NOT_FOUND);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
  assert_null(proc("cuLaunchKernelEx", 11000, 0, &r, &st)); /* exists since 11.6 */
  assert_int_equal(r, CUDA_ERROR_NOT_FOUND);
  assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  assert_null(proc("cuMemAlloc", 3020, 1u << 7, &r, &st)); /* unknown flag bit */
  assert_int_equal(r, CUDA_ERROR_INVALID_VALUE);
}

static void get_proc_address_finds_every_symbol_cudart_asks_for(void **state) {
  char path[4096], line[512];
  const char *s = getenv("TALLY_SRCDIR");
  FILE *f;
  int asked = 0, missing = 0;
  (void)state;
  /* The measured list (tests/data/facts/README.md). */
  snprintf(path, sizeof(path), "%s/tests/data/facts/getprocaddress.txt", s ? s : "..");
  f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof(line), f)) {
    char name[256];
    int v;
    unsigned long long fl;
    CUresult r;
    CUdriverProcAddressQueryResult st;
    if (sscanf(line, "%255s v=%d flags=%llu", name, &v, &fl) != 3 || name[0] == '#')
      continue;
    /* Graphics interop lives in cudaGL.h, cudaEGL.h and cudaVDPAU.h, not
     * cuda.h; cudart runs without it (it only asks). */
    if (strncmp(name, "cuGL", 4) == 0 || strncmp(name, "cuEGL", 5) == 0 ||
        strncmp(name, "cuVDPAU", 7) == 0 || strncmp(name, "cuGraphicsGL", 12) == 0 ||
        strncmp(name, "cuGraphicsEGL", 13) == 0 || strncmp(name, "cuGraphicsVDPAU", 15) == 0 ||
        strcmp(name, "cuGraphicsResourceGetMappedEglFrame") == 0)
      continue;
    asked++;
    if (!proc(name, v, fl, &r, &st)) {
      fprintf(stderr, "cuGetProcAddress(%s, %d, %llu) not found\n", name, v, fl);
      missing++;
    }
  }
  fclose(f);
  assert_true(asked > 400);
  assert_int_equal(missing, 0);
}

static const void *table(const char *hex) {
  export_t e = (export_t)dlsym(lib, "cuGetExportTable");
  CUuuid u;
  const void *t = NULL;
  for (int i = 0; i < 16; i++) {
    unsigned b;
    sscanf(hex + 2 * i, "%2x", &b);
    u.bytes[i] = (char)b;
  }
  assert_non_null(e);
  return e(&t, &u) == CUDA_SUCCESS ? t : NULL;
}

static void export_tables_for_cudart_exist_with_the_drivers_sizes(void **state) {
  static const struct {
    const char *uuid;
    size_t first_word; /* 0: slot 0 is a function */
  } want[] = {
      {"263e88607cd2614392f6bbd5006dfa7e", 120}, {"42d85a8123f6cb478298f6e78a3aecdc", 24},
      {"6bd5fb6c5bf4e74a8987d93912fd9df9", 104}, {"a094798c2e742e7493f20800200c0a66", 56},
      {"c693336e1121df11a8c368f355d89593", 0},   {"d4082055bde6704b8d34ba123c66e1f2", 24},
      {"f8cff95121468b4eb9e2fb469e7c0dd9", 24},  {"21318c60971432488ca641ff7324c8f2", 744},
      {"1734dc26800d47458726c0f1e7dd8bca", 136},
  };
  (void)state;
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    const uintptr_t *t = table(want[i].uuid);
    assert_non_null(t);
    if (want[i].first_word)
      assert_int_equal(t[0], want[i].first_word);
    else
      assert_true(t[0] > 4096); /* a function pointer */
  }
}

/* stderr goes to a temporary file between capture_begin and capture_end,
 * which puts what was written into buf. */
typedef struct capture {
  FILE *log;
  int saved;
} capture_t;

static capture_t capture_begin(void) {
  capture_t c = {tmpfile(), dup(2)};
  assert_non_null(c.log);
  assert_true(c.saved >= 0);
  fflush(stderr);
  assert_true(dup2(fileno(c.log), 2) >= 0);
  return c;
}

static void capture_end(capture_t c, char *buf, size_t cap) {
  size_t n;
  fflush(stderr);
  assert_true(dup2(c.saved, 2) >= 0);
  close(c.saved);
  rewind(c.log);
  n = fread(buf, 1, cap - 1, c.log);
  buf[n] = 0;
  fclose(c.log);
}

/* Runs slot `slot` of table 1734dc26 with stderr captured into buf (its
 * slots are numbered from the first function, after the size word). */
static void blaslt_slot_logged(int slot, char *buf, size_t cap) {
  const uintptr_t *t = table("1734dc26800d47458726c0f1e7dd8bca");
  capture_t c;
  assert_non_null(t);
  void *a = NULL, *b = NULL;
  c = capture_begin();
  /* As cuBLASLt calls slot 3 (two result pointers, the table); a stub
   * ignores the arguments. */
  CUresult r = ((CUresult(*)(void **, void **, const void *, void *, void *))t[slot + 1])(
      &a, &b, t, NULL, NULL);
  capture_end(c, buf, cap);
  assert_int_equal(r, CUDA_ERROR_NOT_SUPPORTED);
  assert_null(a);
  assert_null(b);
}

/* A slot frameworks survive without (table 8 slot 3, refused when no tallyd
 * serves its layout, as here: no cuInit) answers NOT_SUPPORTED like the
 * others but is logged only with TALLY_LOG=debug; another slot is logged at
 * the default level.  (Before the test below calls every slot: each slot
 * logs once per process.) */
static void benign_slot_is_refused_without_a_log_line(void **state) {
  char buf[1024];
  (void)state;
  unsetenv("TALLY_LOG");
  blaslt_slot_logged(3, buf, sizeof(buf));
  assert_null(strstr(buf, "slot 3"));
  blaslt_slot_logged(4, buf, sizeof(buf));
  assert_non_null(strstr(buf, "private driver table 8 (1734dc26...) slot 4 is not emulated"));
  setenv("TALLY_LOG", "debug", 1);
  blaslt_slot_logged(3, buf, sizeof(buf));
  unsetenv("TALLY_LOG");
  assert_non_null(strstr(buf, "slot 3 is not emulated"));
}

/* cuBLASLt's table 1734dc26: slot 12 succeeds (it follows a served slot 3),
 * slot 3 without a tallyd and every other slot answer NOT_SUPPORTED, none is
 * NULL (test-guest-daemon serves slot 3). */
static void blaslt_table_serves_slots_3_and_12_only(void **state) {
  const uintptr_t *t = table("1734dc26800d47458726c0f1e7dd8bca");
  (void)state;
  assert_non_null(t);
  assert_int_equal(t[0], 17 * sizeof(void *));
  for (size_t i = 1; i < t[0] / sizeof(void *); i++) {
    void *a = NULL, *b = NULL;
    assert_true(t[i] != 0);
    assert_int_equal(((CUresult(*)(void **, void **, const void *, void *, void *))t[i])(
                         &a, &b, t, NULL, NULL),
                     i == 13 ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
    assert_null(a);
    assert_null(b);
  }
}

static void unknown_export_table_is_refused(void **state) {
  (void)state;
  assert_null(table("00112233445566778899aabbccddeeff"));
}

/* The table NVML does without is refused like any other, but only an
 * unknown one is logged at the default level, with the library that asked
 * (here this test program), once per table however often it asks. */
static void optional_export_tables_are_refused_without_a_log_line(void **state) {
  char buf[4096] = "";
  FILE *log = tmpfile();
  int saved = dup(2);
  size_t n;
  (void)state;
  assert_non_null(log);
  assert_true(saved >= 0);
  fflush(stderr);
  assert_true(dup2(fileno(log), 2) >= 0);
  const void *a = table("69a28e9f24498b47b030c5da330ea4e9");
  const void *c = table("ffeeddccbbaa99887766554433221100");
  const void *c2 = table("ffeeddccbbaa99887766554433221100");
  const void *d = table("ffeeddccbbaa99887766554433221101");
  fflush(stderr);
  assert_true(dup2(saved, 2) >= 0);
  close(saved);
  rewind(log);
  n = fread(buf, 1, sizeof(buf) - 1, log);
  buf[n] = 0;
  fclose(log);
  assert_null(a);
  assert_null(c);
  assert_null(c2);
  assert_null(d);
  const char *first = strstr(buf, "table ffeeddccbbaa99887766554433221100 (asked by ");
  assert_non_null(first);
  assert_null(strstr(first + 40, "ffeeddccbbaa99887766554433221100")); /* past the uuid */
  assert_non_null(strstr(buf, "table ffeeddccbbaa99887766554433221101 (asked by "));
  assert_non_null(strstr(buf, "test-guest-exports) is not emulated"));
  assert_null(strstr(buf, "69a28e9f"));
}

/* NVRTC's compilation cache (da9151d3): served with the driver's size, an
 * entry per compilation, every lookup a miss, a store accepted, the entry
 * closed once; a foreign entry is refused, never freed. */
typedef CUresult (*nvrtc_open_t)(void **, int, const void *, size_t, const char *, const char *,
                                 const char *, int);
typedef CUresult (*nvrtc_entry_t)(void *, void *, void *, void *);

static void nvrtc_cache_table_misses_every_lookup(void **state) {
  const uintptr_t *t = table("da9151d33ae6cc41a5c04f26d533e328");
  static const unsigned char bitcode[8] = {0x42, 0x43, 0xc0, 0xde};
  unsigned char foreign[64] = {0};
  void *e1 = NULL, *e2 = NULL, *out = NULL;
  int out_n = -1;
  (void)state;
  assert_non_null(t);
  assert_int_equal(t[0], 56); /* 7 slots, as the driver sizes it */
  for (size_t i = 1; i < 7; i++)
    assert_true(t[i] != 0);
  nvrtc_open_t open_ = (nvrtc_open_t)t[1];
  nvrtc_entry_t close_ = (nvrtc_entry_t)t[2], lookup = (nvrtc_entry_t)t[3],
                store = (nvrtc_entry_t)t[4];
  assert_int_equal(open_(NULL, 2, bitcode, sizeof(bitcode), "-arch=compute_90", "HOST64", "", 0),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(open_(&e1, 2, bitcode, sizeof(bitcode), "-arch=compute_90", "HOST64", "", 0),
                   CUDA_SUCCESS);
  assert_int_equal(open_(&e2, 2, bitcode, sizeof(bitcode), "-arch=compute_90", "HOST64", "", 0),
                   CUDA_SUCCESS);
  assert_non_null(e1);
  assert_true(e1 != e2);
  assert_int_equal(lookup(e1, NULL, &out, &out_n), CUDA_ERROR_NOT_FOUND);
  assert_null(out); /* a miss writes nothing */
  assert_int_equal(out_n, -1);
  assert_int_equal(store(e1, NULL, "// PTX", (void *)(uintptr_t)6), CUDA_SUCCESS);
  assert_int_equal(lookup(e1, NULL, &out, &out_n), CUDA_ERROR_NOT_FOUND); /* nothing kept */
  assert_int_equal(close_(e1, NULL, NULL, NULL), CUDA_SUCCESS);
  assert_int_equal(lookup(foreign, NULL, &out, &out_n), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(store(foreign, NULL, "x", (void *)(uintptr_t)1), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(close_(foreign, NULL, NULL, NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(lookup(NULL, NULL, &out, &out_n), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(close_(e2, NULL, NULL, NULL), CUDA_SUCCESS);
  assert_int_equal(((CUresult(*)(void))t[5])(), CUDA_ERROR_NOT_SUPPORTED);
}

/* cuBLAS(Lt) calls slots of 21318c60 past the few we know: none may be NULL,
 * and an unknown one answers CUDA_ERROR_NOT_SUPPORTED (logging its number). */
static void context_table_has_no_null_slot(void **state) {
  const uintptr_t *t = table("21318c60971432488ca641ff7324c8f2");
  (void)state;
  assert_non_null(t);
  for (size_t i = 1; i < t[0] / sizeof(void *); i++)
    assert_true(t[i] != 0);
  assert_int_equal(((CUresult(*)(void))t[52])(), CUDA_ERROR_NOT_SUPPORTED);
  /* Slot 51 is emulated (test-guest-daemon); before cuInit it says so. */
  void *obj = NULL;
  assert_int_equal(((CUresult(*)(CUcontext, unsigned long long, void **))t[51])(NULL, 0, &obj),
                   CUDA_ERROR_NOT_INITIALIZED);
}

static void integrity_digest_of_fixed_versions_matches(void **state) {
  const void *const *t = table("d4082055bde6704b8d34ba123c66e1f2");
  CUresult (*check)(unsigned, unsigned long long, unsigned long long *);
  unsigned long long out[2];
  (void)state;
  assert_non_null(t);
  check = (CUresult(*)(unsigned, unsigned long long, unsigned long long *))t[1];
  assert_int_equal(check(10, 0, out), CUDA_SUCCESS);
  assert_int_equal(out[0], 0x3341181c03cb675cull);
  assert_int_equal(out[1], 0x8ed383aa1f4cd1e8ull);
  assert_int_equal(check(11, 0, NULL), CUDA_ERROR_INVALID_VALUE);
}

static void error_names_and_strings_cover_every_result(void **state) {
  CUresult (*name)(CUresult, const char **) =
      (CUresult(*)(CUresult, const char **))dlsym(lib, "cuGetErrorName");
  CUresult (*str)(CUresult, const char **) =
      (CUresult(*)(CUresult, const char **))dlsym(lib, "cuGetErrorString");
  const char *s = NULL;
  (void)state;
  assert_int_equal(name(CUDA_ERROR_INVALID_VALUE, &s), CUDA_SUCCESS);
  assert_string_equal(s, "CUDA_ERROR_INVALID_VALUE");
  assert_int_equal(name(CUDA_ERROR_ILLEGAL_ADDRESS, &s), CUDA_SUCCESS);
  assert_string_equal(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
  assert_int_equal(str(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
  assert_non_null(strstr(s, "memory"));
  assert_int_equal(name((CUresult)123456, &s), CUDA_ERROR_INVALID_VALUE);
}

static void calls_before_init_report_not_initialized(void **state) {
  CUresult (*count)(int *) = (CUresult(*)(int *))dlsym(lib, "cuDeviceGetCount");
  CUresult (*alloc)(CUdeviceptr *, size_t) =
      (CUresult(*)(CUdeviceptr *, size_t))dlsym(lib, "cuMemAlloc_v2");
  int n;
  CUdeviceptr p;
  (void)state;
  assert_int_equal(count(&n), CUDA_ERROR_NOT_INITIALIZED);
  assert_int_equal(alloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
}

/* Under TALLY_LOG=debug cuGetProcAddress hands out a twin that logs an
 * error answer with the function's name (answers made in the guest too);
 * otherwise the function itself. */
static void failure_trace_names_the_call_under_debug(void **state) {
  CUresult (*gpa)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
      (CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))dlsym(
          lib, "cuGetProcAddress_v2");
  void *plain = dlsym(lib, "cuDeviceGetCount"), *fn = NULL;
  char buf[1024];
  int n;
  capture_t c;
  (void)state;
  unsetenv("TALLY_LOG");
  assert_int_equal(gpa("cuDeviceGetCount", &fn, 13000, 0, NULL), CUDA_SUCCESS);
  assert_ptr_equal(fn, plain);
  setenv("TALLY_LOG", "debug", 1);
  c = capture_begin();
  assert_int_equal(gpa("cuDeviceGetCount", &fn, 13000, 0, NULL), CUDA_SUCCESS);
  assert_ptr_not_equal(fn, plain);
  assert_int_equal(((CUresult(*)(int *))fn)(&n), CUDA_ERROR_NOT_INITIALIZED);
  capture_end(c, buf, sizeof(buf));
  unsetenv("TALLY_LOG");
  assert_non_null(strstr(buf, "trace: cuDeviceGetCount answered 3 (CUDA_ERROR_NOT_INITIALIZED)"));
  /* A success is not logged. */
  setenv("TALLY_LOG", "debug", 1);
  assert_int_equal(gpa("cuDriverGetVersion", &fn, 13000, 0, NULL), CUDA_SUCCESS);
  c = capture_begin();
  assert_int_equal(((CUresult(*)(int *))fn)(&n), CUDA_SUCCESS);
  capture_end(c, buf, sizeof(buf));
  unsetenv("TALLY_LOG");
  assert_null(strstr(buf, "trace:"));
}

/* A context setting the guest keeps to itself (the context in tallyd is
 * every tenant's) is logged under TALLY_LOG=debug, once per function, and
 * not at all otherwise. */
static void context_setting_kept_here_is_logged_under_debug(void **state) {
  CUresult (*set)(CUfunc_cache) = (CUresult(*)(CUfunc_cache))dlsym(lib, "cuCtxSetCacheConfig");
  char buf[1024];
  capture_t c;
  (void)state;
  assert_non_null(set);
  unsetenv("TALLY_LOG");
  c = capture_begin();
  assert_int_equal(set(CU_FUNC_CACHE_PREFER_L1), CUDA_SUCCESS);
  capture_end(c, buf, sizeof(buf));
  assert_null(strstr(buf, "kept in this process"));
  setenv("TALLY_LOG", "debug", 1);
  c = capture_begin();
  assert_int_equal(set(CU_FUNC_CACHE_PREFER_SHARED), CUDA_SUCCESS);
  capture_end(c, buf, sizeof(buf));
  assert_non_null(strstr(buf, "cuCtxSetCacheConfig(0, 1) kept in this process"));
  c = capture_begin();
  assert_int_equal(set(CU_FUNC_CACHE_PREFER_SHARED), CUDA_SUCCESS);
  capture_end(c, buf, sizeof(buf));
  unsetenv("TALLY_LOG");
  assert_null(strstr(buf, "kept in this process"));
  assert_int_equal(set(CU_FUNC_CACHE_PREFER_NONE), CUDA_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_declared_symbol_is_exported),
      cmocka_unit_test(internal_symbols_are_hidden),
      cmocka_unit_test(driver_version_is_13_0),
      cmocka_unit_test(unimplemented_entry_point_returns_not_supported),
      cmocka_unit_test(get_proc_address_picks_the_newest_version_not_above_the_request),
      cmocka_unit_test(get_proc_address_honours_the_per_thread_flag),
      cmocka_unit_test(get_proc_address_reports_unknown_and_too_old),
      cmocka_unit_test(get_proc_address_finds_every_symbol_cudart_asks_for),
      cmocka_unit_test(export_tables_for_cudart_exist_with_the_drivers_sizes),
      cmocka_unit_test(unknown_export_table_is_refused),
      cmocka_unit_test(optional_export_tables_are_refused_without_a_log_line),
      cmocka_unit_test(nvrtc_cache_table_misses_every_lookup),
      cmocka_unit_test(benign_slot_is_refused_without_a_log_line),
      cmocka_unit_test(blaslt_table_serves_slots_3_and_12_only),
      cmocka_unit_test(context_table_has_no_null_slot),
      cmocka_unit_test(integrity_digest_of_fixed_versions_matches),
      cmocka_unit_test(error_names_and_strings_cover_every_result),
      cmocka_unit_test(calls_before_init_report_not_initialized),
      cmocka_unit_test(failure_trace_names_the_call_under_debug),
      cmocka_unit_test(context_setting_kept_here_is_logged_under_debug),
  };
  return cmocka_run_group_tests_name("guest-exports", tests, gdl_load, gdl_unload);
}
