/* proc.c: cuGetProcAddress, how cudart 12+ and frameworks find the driver.
 *
 * cudart dlopens libcuda.so.1 itself and then asks cuGetProcAddress for ~350
 * symbols by base name, the CUDA version it was built for and a flags word
 * (facts/getprocaddress.txt).  The generated table guestlib/driver-proc.def
 * says, for every base name, which real symbol serves each version
 * (cuMemAlloc: 2000 -> cuMemAlloc, 3020 -> cuMemAlloc_v2) and which one
 * serves per-thread-default-stream requests (_ptds/_ptsz).  A request takes
 * the row with the highest version not above the one asked for; below the
 * first version the answer is VERSION_NOT_SUFFICIENT, an unknown name
 * SYMBOL_NOT_FOUND, both with CUDA_ERROR_NOT_FOUND, as the driver answers.
 * Names without a PFN typedef (none in 13.0 that cudart asks for) fall back
 * to an exact match among the exported symbols.
 */
#include "guestlib/guest.h"

#include <string.h>

typedef struct proc_row {
  const char *name;
  int version;
  int per_thread;
  void *fn;
} proc_row_t;

static const proc_row_t rows[] = {
#define GUEST_PROC(name, version, pt, sym) {name, version, pt, (void *)&sym},
#include "guestlib/driver-proc.def"
#undef GUEST_PROC
};

typedef struct sym_row {
  const char *name;
  void *fn;
} sym_row_t;

static const sym_row_t syms[] = {
#define GUEST_API_IMPL(name, kind, ret, params) {#name, (void *)&name},
#define GUEST_API_STUB(name, ret, params)       {#name, (void *)&name},
#include "guestlib/driver-api.def"
#undef GUEST_API_IMPL
#undef GUEST_API_STUB
};

/* First row whose name is >= name (rows are sorted by name, then version). */
static size_t first_row(const char *name) {
  size_t lo = 0, hi = sizeof(rows) / sizeof(rows[0]);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (strcmp(rows[mid].name, name) < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

CUresult guest__proc_lookup(const char *symbol, int version, cuuint64_t flags, void **pfn,
                            CUdriverProcAddressQueryResult *status) {
  size_t n = sizeof(rows) / sizeof(rows[0]), i = first_row(symbol);
  int want_pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  void *best = NULL, *best_legacy = NULL;
  int found = 0, bv = -1, blv = -1;

  for (; i < n && strcmp(rows[i].name, symbol) == 0; i++) {
    found = 1;
    if (rows[i].version > version)
      continue;
    if (rows[i].per_thread && rows[i].version >= bv) {
      best = rows[i].fn;
      bv = rows[i].version;
    } else if (!rows[i].per_thread && rows[i].version >= blv) {
      best_legacy = rows[i].fn;
      blv = rows[i].version;
    }
  }
  /* A per-thread row older than the newest legacy one is superseded
   * (cuMemcpyHtoD_v2_ptds is 7000; a 2000 request gets cuMemcpyHtoD). */
  if (!want_pt || !best || bv < blv)
    best = best_legacy;
  if (!found)
    for (size_t k = 0; k < sizeof(syms) / sizeof(syms[0]); k++)
      if (strcmp(syms[k].name, symbol) == 0) {
        best = syms[k].fn;
        found = 1;
        break;
      }
  *pfn = guest__trace_twin(best);
  if (status)
    *status = best    ? CU_GET_PROC_ADDRESS_SUCCESS
              : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  if (guest__debug())
    guest__log("cuGetProcAddress(%s, %d, %llu) -> %s", symbol, version, (unsigned long long)flags,
               best ? "found" : "not found");
  return best ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

GUEST_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                          cuuint64_t flags,
                                          CUdriverProcAddressQueryResult *status) {
  if (!symbol || !pfn)
    return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                            CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  return guest__proc_lookup(symbol, version, flags, pfn, status);
}

GUEST_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                       cuuint64_t flags) {
  return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
