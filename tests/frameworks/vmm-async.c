/* vmm-async.c: a CUDA C driver-API program using virtual memory management
 * and stream-ordered allocation from memory pools, as frameworks do.
 *
 * usage: vmm-async vmm|async
 *   vmm    granularity, reserve 4 granules, two physical handles mapped
 *          back to back, access set, one copy across the boundary, read
 *          back, retain through the address, unmap, release, free
 *   async  the default pool's release threshold, cuMemAllocAsync and
 *          cuMemAllocFromPoolAsync on a stream, copies in and out, used
 *          memory from the pool's attribute, cuMemFreeAsync, trim, a pool
 *          of its own made current and destroyed
 * Prints what it saw (deterministic) and "done"; exit 1 on any error, with
 * the call and its result.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *n_ = NULL;                                                                       \
      cuGetErrorName(r_, &n_);                                                                     \
      printf("FAIL %s: %s (%d)\n", #x, n_ ? n_ : "?", (int)r_);                                    \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static int vmm(void) {
  CUmemAllocationProp p;
  CUmemAccessDesc acc;
  CUmemGenericAllocationHandle h[2], back;
  CUdeviceptr va;
  size_t g = 0;
  uint32_t in[1024], out[1024];
  memset(&p, 0, sizeof(p));
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CK(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  printf("granularity %zu\n", g);
  CK(cuMemAddressReserve(&va, 4 * g, 0, 0, 0));
  for (int i = 0; i < 2; i++) {
    CK(cuMemCreate(&h[i], g, &p, 0));
    CK(cuMemMap(va + (CUdeviceptr)i * g, g, 0, h[i], 0));
  }
  memset(&acc, 0, sizeof(acc));
  acc.location = p.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(va, 2 * g, &acc, 1));
  for (int i = 0; i < 1024; i++)
    in[i] = (uint32_t)i * 2654435761u;
  /* Across the boundary of the two mappings. */
  CK(cuMemcpyHtoD(va + g - 2048, in, sizeof(in)));
  CK(cuMemsetD32(va + g + 4096, 0x01020304, 16));
  CK(cuMemcpyDtoH(out, va + g - 2048, sizeof(out)));
  printf("across mappings %s\n", memcmp(in, out, sizeof(in)) ? "differs" : "equal");
  CK(cuMemcpyDtoH(out, va + g + 4096, 64));
  printf("memset word %08x\n", out[15]);
  CK(cuMemRetainAllocationHandle(&back, (void *)(uintptr_t)(va + g)));
  printf("retained handle %s\n", back == h[1] ? "same" : "other");
  CK(cuMemRelease(back));
  CK(cuMemUnmap(va, 2 * g));
  for (int i = 0; i < 2; i++)
    CK(cuMemRelease(h[i]));
  CK(cuMemAddressFree(va, 4 * g));
  return 0;
}

static int async(void) {
  CUmemoryPool pool, mine, cur;
  CUmemPoolProps pp;
  CUstream s;
  CUdeviceptr a, b;
  cuuint64_t thr = UINT64_MAX, used = 0;
  uint64_t in[512], out[512];
  CK(cuDeviceGetDefaultMemPool(&pool, 0));
  CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (int i = 0; i < 512; i++)
    in[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
  CK(cuMemAllocAsync(&a, sizeof(in), s));
  CK(cuMemAllocAsync(&b, sizeof(in), s));
  CK(cuMemcpyHtoDAsync(a, in, sizeof(in), s));
  CK(cuMemcpyDtoDAsync(b, a, sizeof(in), s));
  CK(cuMemcpyDtoHAsync(out, b, sizeof(out), s));
  CK(cuStreamSynchronize(s));
  printf("async copy %s\n", memcmp(in, out, sizeof(in)) ? "differs" : "equal");
  CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
  printf("pool in use >= 8 KiB: %s\n", used >= 2 * sizeof(in) ? "yes" : "no");
  CK(cuMemFreeAsync(a, s));
  CK(cuMemFreeAsync(b, s));
  CK(cuStreamSynchronize(s));
  CK(cuMemPoolTrimTo(pool, 0));
  memset(&pp, 0, sizeof(pp));
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pp.location.id = 0;
  CK(cuMemPoolCreate(&mine, &pp));
  CK(cuDeviceSetMemPool(0, mine));
  CK(cuDeviceGetMemPool(&cur, 0));
  printf("current pool is the new one: %s\n", cur == mine ? "yes" : "no");
  CK(cuMemAllocFromPoolAsync(&a, 1 << 20, mine, s));
  CK(cuMemsetD8Async(a, 0x5a, 1 << 20, s));
  CK(cuMemcpyDtoHAsync(out, a + (1 << 19), 8, s));
  CK(cuStreamSynchronize(s));
  printf("pool memset %016llx\n", (unsigned long long)out[0]);
  CK(cuMemFreeAsync(a, s));
  CK(cuStreamSynchronize(s));
  CK(cuDeviceSetMemPool(0, pool));
  CK(cuMemPoolDestroy(mine));
  CK(cuStreamDestroy(s));
  return 0;
}

int main(int argc, char **argv) {
  CUcontext ctx;
  CUdevice dev;
  if (argc != 2)
    return 2;
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  if (strcmp(argv[1], "vmm") == 0)
    vmm();
  else if (strcmp(argv[1], "async") == 0)
    async();
  else
    return 2;
  CK(cuCtxSynchronize());
  puts("done");
  return 0;
}
