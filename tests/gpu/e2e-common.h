/* e2e-common.h: helpers shared by the GPU end-to-end programs under tests/gpu/.
 *
 * Every e2e program prints only deterministic facts on stdout (checksums of results, error
 * names, counts, yes/no answers), never timings or addresses, so that tests/gpu/e2e-run can
 * diff the output of a native run against runs through Tally (shared memory and TCP).
 * Diagnostics go to stderr, which is not diffed.
 *
 * At exit each program writes one line "e2e-driver: PATH" to stderr naming the libcuda.so.1
 * that is mapped into the process (from /proc/self/maps).  The runner uses it to prove that a
 * run "through Tally" really loaded the guest library and not the real driver.
 *
 * This header is included from both C (driver API programs) and CUDA C++ (.cu) files, so it
 * keeps to the common subset and makes every function static.
 */
#ifndef TALLY_E2E_COMMON_H
#define TALLY_E2E_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Not every program uses every helper. */
#define E2E_UNUSED __attribute__((unused))

/* FNV-1a 64-bit: a stable byte checksum that needs no library (offset basis and prime are
 * the published FNV constants). */
#define E2E_FNV_OFFSET 0xcbf29ce484222325ULL
#define E2E_FNV_PRIME  0x100000001b3ULL

static E2E_UNUSED uint64_t e2e_fnv1a(const void *buf, size_t len) {
  const unsigned char *p = (const unsigned char *)buf;
  uint64_t h = E2E_FNV_OFFSET;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= E2E_FNV_PRIME;
  }
  return h;
}

/* Prints "label: len=N fnv=HEX" for a host buffer. */
static E2E_UNUSED void e2e_print_sum(const char *label, const void *buf, size_t len) {
  printf("%s: len=%zu fnv=%016llx\n", label, len, (unsigned long long)e2e_fnv1a(buf, len));
}

/* Deterministic fill: a 32-bit LCG (Numerical Recipes constants) seeded per buffer, so inputs
 * are the same on every run and differ between buffers. */
static E2E_UNUSED void e2e_fill_u32(uint32_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed;
  for (size_t i = 0; i < n; i++) {
    x = x * 1664525u + 1013904223u;
    p[i] = x;
  }
}

/* Counts failed checks; the program's exit status is 1 if any failed.  A failed check also
 * prints a line on stdout, so the diff against the native run shows it too. */
static E2E_UNUSED int e2e_failures;

static E2E_UNUSED void e2e_check(int ok, const char *what) {
  printf("check %s: %s\n", what, ok ? "ok" : "FAILED");
  if (!ok)
    e2e_failures++;
}

/* Writes "e2e-driver: PATH" (the mapped libcuda.so.1, or "none") to stderr. */
static E2E_UNUSED void e2e_report_driver(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  char found[4096] = "none";
  if (f == NULL) {
    fprintf(stderr, "e2e-driver: unknown (cannot open /proc/self/maps)\n");
    return;
  }
  while (fgets(line, sizeof(line), f) != NULL) {
    char *path = strchr(line, '/');
    if (path == NULL || strstr(path, "libcuda.so") == NULL)
      continue;
    path[strcspn(path, "\n")] = '\0';
    snprintf(found, sizeof(found), "%s", path);
    break;
  }
  fclose(f);
  fprintf(stderr, "e2e-driver: %s\n", found);
}

/* Ends a program: reports the driver and turns the failure count into the exit status. */
static E2E_UNUSED int e2e_finish(void) {
  printf("failures: %d\n", e2e_failures);
  fflush(stdout);
  e2e_report_driver();
  return e2e_failures == 0 ? 0 : 1;
}

/* Runtime API checks: print the call, its error name, and count a failure if it is not
 * cudaSuccess.  Only compiled in CUDA sources. */
#ifdef __CUDACC__
#define E2E_RT(call)                                                                               \
  do {                                                                                             \
    cudaError_t e2e_err_ = (call);                                                                 \
    if (e2e_err_ != cudaSuccess) {                                                                 \
      printf("error %s at %s:%d: %s\n", cudaGetErrorName(e2e_err_), __FILE__, __LINE__, #call);    \
      e2e_failures++;                                                                              \
    }                                                                                              \
  } while (0)
#endif

/* Driver API checks, same contract as E2E_RT. */
#ifdef CUDA_VERSION
static E2E_UNUSED const char *e2e_cu_name(CUresult r) {
  const char *s = NULL;
  if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == NULL)
    return "CUDA_ERROR_<unknown>";
  return s;
}
#define E2E_CU(call)                                                                               \
  do {                                                                                             \
    CUresult e2e_res_ = (call);                                                                    \
    if (e2e_res_ != CUDA_SUCCESS) {                                                                \
      printf("error %s at %s:%d: %s\n", e2e_cu_name(e2e_res_), __FILE__, __LINE__, #call);         \
      e2e_failures++;                                                                              \
    }                                                                                              \
  } while (0)
#endif

#endif /* TALLY_E2E_COMMON_H */
