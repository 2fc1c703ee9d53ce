/* test-guest-vmm.c: virtual memory management, stream-ordered allocation
 * and memory pools through the guest library (guestlib/vmm.c) against
 * tallyd's server in this process on the recording device.
 *
 * The driver-API sequences frameworks use (PyTorch's expandable segments:
 * granularity, create, reserve, map, set access, unmap, release; its
 * cudaMallocAsync backend: default pool, attributes, alloc/free on a
 * stream, trim), that data reaches mapped and pool memory and comes back
 * (cuMemcpy's direction from the local table), what is answered locally
 * (allocation properties, pool access) and what is refused (export,
 * host-located pools).  Never GPU coverage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "tests/guest-daemon-harness.h"

static int setup(void **state) {
  (void)state;
  return gd_start("vmm", -1);
}

static int teardown(void **state) {
  (void)state;
  return gd_stop();
}

static CUmemAllocationProp device_prop(void) {
  CUmemAllocationProp p;
  memset(&p, 0, sizeof(p));
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = 0;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

/* PyTorch's expandable segment: one large reservation, handles mapped into it. */
static void expandable_segment_sequence(void **state) {
  CUmemAllocationProp p = device_prop(), got;
  CUmemAccessDesc acc;
  CUmemGenericAllocationHandle h[2], back;
  CUdeviceptr va;
  size_t g = 0;
  uint32_t in[4] = {1, 2, 3, 4}, out[4] = {0};
  (void)state;
  assert_int_equal(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM), 0);
  assert_int_equal(g, 2u << 20);
  assert_int_equal(cuMemAddressReserve(&va, 8 * g, 0, 0, 0), CUDA_SUCCESS);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(cuMemCreate(&h[i], g, &p, 0), CUDA_SUCCESS);
    assert_int_equal(cuMemMap(va + (CUdeviceptr)i * g, g, 0, h[i], 0), CUDA_SUCCESS);
  }
  memset(&acc, 0, sizeof(acc));
  acc.location = p.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  assert_int_equal(cuMemSetAccess(va, 2 * g, &acc, 1), CUDA_SUCCESS);
  acc.location.id = 3; /* no such device */
  assert_int_equal(cuMemSetAccess(va, 2 * g, &acc, 1), CUDA_ERROR_INVALID_DEVICE);

  /* cuMemcpy finds the direction from the guest's table. */
  assert_int_equal(cuMemcpy(va + g + 32, (CUdeviceptr)(uintptr_t)in, sizeof(in)), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out, va + g + 32, sizeof(out)), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof(in));
  CUmemorytype mt = 0;
  assert_int_equal(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + g), 0);
  assert_int_equal(mt, CU_MEMORYTYPE_DEVICE);

  assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, h[1]), CUDA_SUCCESS);
  assert_int_equal(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  assert_int_equal(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  assert_int_equal(cuMemRetainAllocationHandle(&back, (void *)(uintptr_t)(va + g)), CUDA_SUCCESS);
  assert_int_equal(back, h[1]);
  assert_int_equal(cuMemRelease(back), CUDA_SUCCESS);
  int fd = -1;
  assert_int_equal(cuMemExportToShareableHandle(&fd, h[0], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                0),
                   CUDA_ERROR_NOT_SUPPORTED);

  /* Unmapped one by one, as PyTorch does when it shrinks a segment. */
  for (int i = 1; i >= 0; i--) {
    assert_int_equal(cuMemUnmap(va + (CUdeviceptr)i * g, g), CUDA_SUCCESS);
    assert_int_equal(cuMemRelease(h[i]), CUDA_SUCCESS);
  }
  assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, h[0]), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemcpyHtoD(va + 32, in, sizeof(in)), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemAddressFree(va, 8 * g), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* CUDA IPC and shareable handles: refused both ways (PyTorch's CUDA tensor
 * sharing between processes, cudaIpc*), never answered with a handle that
 * names nothing; the device memory stays usable. */
static void ipc_and_imports_are_refused(void **state) {
  CUdeviceptr d, got = 0;
  CUipcMemHandle mh;
  CUipcEventHandle eh;
  CUevent e, ge = NULL;
  CUmemGenericAllocationHandle h = 0;
  CUmemoryPool pool = NULL;
  CUmemPoolPtrExportData pd;
  uint8_t b[8] = {1, 2, 3, 4, 5, 6, 7, 8}, o[8];
  int fd = 3;
  (void)state;
  memset(&mh, 0, sizeof(mh));
  memset(&eh, 0, sizeof(eh));
  memset(&pd, 0, sizeof(pd));
  assert_int_equal(cuMemAlloc(&d, 4096), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&e, CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING),
                   CUDA_SUCCESS);
  assert_int_equal(cuIpcGetMemHandle(&mh, d), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuIpcGetEventHandle(&eh, e), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuIpcOpenMemHandle(&got, mh, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                   CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(got, 0);
  assert_int_equal(cuIpcOpenEventHandle(&ge, eh), CUDA_ERROR_NOT_SUPPORTED);
  assert_null(ge);
  assert_int_equal(cuIpcCloseMemHandle(d), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fd,
                                                  CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuMemPoolImportFromShareableHandle(&pool, (void *)(intptr_t)fd,
                                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
                   CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuMemPoolImportPointer(&got, pool, &pd), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuMemcpyHtoD(d, b, sizeof(b)), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(o, d, sizeof(o)), CUDA_SUCCESS);
  assert_memory_equal(b, o, sizeof(b));
  assert_int_equal(cuEventDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(d), CUDA_SUCCESS);
}

/* PyTorch's cudaMallocAsync backend, through the driver calls cudart makes. */
static void stream_ordered_allocation_sequence(void **state) {
  CUmemoryPool pool, cur;
  CUstream s;
  CUdeviceptr d;
  cuuint64_t thr = UINT64_MAX, used = 0;
  uint32_t in[2] = {7, 9}, out[2];
  CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemAccess_flags fl;
  (void)state;
  assert_int_equal(cuDeviceGetDefaultMemPool(&pool, 0), CUDA_SUCCESS);
  assert_int_equal(cuDeviceGetMemPool(&cur, 0), CUDA_SUCCESS);
  assert_ptr_equal(pool, cur);
  assert_int_equal(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), 0);
  thr = 0;
  assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr), 0);
  assert_true(thr == UINT64_MAX);
  assert_int_equal(cuMemPoolGetAccess(&fl, pool, &loc), CUDA_SUCCESS);
  assert_int_equal(fl, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);

  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAllocAsync(&d, 4096, s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyHtoDAsync(d, in, sizeof(in), s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyAsync((CUdeviceptr)(uintptr_t)out, d, sizeof(out), s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof(in));
  assert_int_equal(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used), 0);
  assert_true(used == 4096);
  assert_int_equal(cuMemFreeAsync(d, s), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeAsync(d, s), CUDA_ERROR_INVALID_VALUE); /* already gone */
  assert_int_equal(cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);

  /* A pool of its own, made current, then destroyed. */
  CUmemPoolProps pp;
  CUmemoryPool mine;
  memset(&pp, 0, sizeof(pp));
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.location = loc;
  assert_int_equal(cuMemPoolCreate(&mine, &pp), CUDA_SUCCESS);
  assert_int_equal(cuDeviceSetMemPool(0, mine), CUDA_SUCCESS);
  assert_int_equal(cuMemGetMemPool(&cur, &loc, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
  assert_ptr_equal(cur, mine);
  assert_int_equal(cuMemAllocFromPoolAsync(&d, 512, mine, s), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeAsync(d, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(cuMemPoolDestroy(mine), CUDA_SUCCESS);
  assert_int_equal(cuDeviceGetMemPool(&cur, 0), CUDA_SUCCESS);
  assert_ptr_equal(cur, pool);
  loc.type = CU_MEM_LOCATION_TYPE_HOST;
  pp.location = loc;
  assert_int_equal(cuMemPoolCreate(&mine, &pp), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(expandable_segment_sequence),
      cmocka_unit_test(stream_ordered_allocation_sequence),
      cmocka_unit_test(ipc_and_imports_are_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
