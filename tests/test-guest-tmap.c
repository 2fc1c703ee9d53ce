/* test-guest-tmap.c: tensor maps through the guest library (guestlib/tmap.c)
 * against tallyd's server in this process on the recording device, and the
 * allocation properties XLA asks for (guestlib/vmm.c, hostd/exec-vmm.c).
 *
 * cuTensorMapEncodeTiled/Im2col/Im2colWide with every argument at its
 * limit come back as the recording device encoded them (its readable
 * layout: hostd/gpu-record.c); cuTensorMapReplaceAddress changes the
 * address alone; the map passed by value as a 128-byte parameter at offset
 * 64 (a __grid_constant__ CUtensorMap after a pointer) reaches the kernel
 * intact through kernelParams, an extra buffer and cuLaunchKernelEx (the
 * recording device's tmap_copy kernel writes what it received); bad
 * arguments fail with a CUDA error and the tenant goes on; a repeated
 * encode is answered from the guest's memo without a request.  The granularity
 * query with fabric and POSIX fd handle types succeeds, memory made with
 * them works and is still never exported.  Never GPU coverage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/guest-daemon-harness.h"

/* tmap_copy(u64 out, CUtensorMap map): the map 64-byte aligned, as nvcc lays
 * out a __grid_constant__ const CUtensorMap parameter. */
static const char img[] = "TALLYREC\nkernel tmap_copy 8,128@64\n";
static CUmodule mod;
static CUfunction tmap_copy;

static int setup(void **state) {
  (void)state;
  if (gd_start("tmap", -1) != 0 || cuModuleLoadData(&mod, img) != CUDA_SUCCESS ||
      cuModuleGetFunction(&tmap_copy, mod, "tmap_copy") != CUDA_SUCCESS)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return gd_stop();
}

static uint64_t u64_at(const void *m, size_t off) {
  uint64_t v;
  memcpy(&v, (const uint8_t *)m + off, 8);
  return v;
}

/* A rank-5 tiled map over buf with every argument at its limit. */
static CUresult tiled(CUtensorMap *m, CUdeviceptr buf) {
  cuuint64_t dims[5] = {1ull << 32, 1, 1, 1, 1};
  cuuint64_t strides[4] = {(1ull << 40) - 16, 16, 32, 48};
  cuuint32_t box[5] = {256, 256, 1, 1, 256}, es[5] = {8, 1, 2, 4, 8};
  return cuTensorMapEncodeTiled(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 5, (void *)(uintptr_t)buf,
                                dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
}

static void encoded_on_the_host_at_the_limits(void **state) {
  CUtensorMap m;
  CUdeviceptr buf;
  uint32_t d0;
  uint16_t box4;
  (void)state;
  assert_int_equal(cuMemAlloc(&buf, 4096), CUDA_SUCCESS);
  memset(&m, 0, sizeof(m));
  assert_int_equal(tiled(&m, buf), CUDA_SUCCESS);
  assert_memory_equal(&m, "TMAP", 4);
  assert_int_equal(((uint8_t *)&m)[5], CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  assert_int_equal(((uint8_t *)&m)[6], 5);
  assert_int_equal(((uint8_t *)&m)[8], CU_TENSOR_MAP_SWIZZLE_128B);
  assert_int_equal(u64_at(&m, 16), buf); /* the tenant's address, untranslated (D2) */
  memcpy(&d0, (uint8_t *)&m + 24, 4);
  assert_int_equal((uint64_t)d0 + 1, 1ull << 32);
  memcpy(&box4, (uint8_t *)&m + 50 + 8, 2);
  assert_int_equal(box4, 256);
  assert_int_equal(u64_at(&m, 72), (1ull << 40) - 16);
  assert_int_equal(u64_at(&m, 96), 48);

  /* Readdressed: only the address changes. */
  CUtensorMap before = m;
  assert_int_equal(cuTensorMapReplaceAddress(&m, (void *)(uintptr_t)(buf + 1024)), CUDA_SUCCESS);
  assert_int_equal(u64_at(&m, 16), buf + 1024);
  assert_memory_equal(&m, &before, 16);
  assert_memory_equal((uint8_t *)&m + 24, (uint8_t *)&before + 24, sizeof(m) - 24);
  assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
}

static void im2col_kinds(void **state) {
  CUtensorMap m;
  CUdeviceptr buf;
  cuuint64_t dims[5] = {64, 8, 8, 8, 2}, strides[4] = {128, 1024, 8192, 65536};
  cuuint32_t es[5] = {1, 1, 1, 1, 1};
  int lower[3] = {-16, -16, -16}, upper[3] = {15, 15, 15};
  int16_t lo;
  uint16_t cp[2];
  (void)state;
  assert_int_equal(cuMemAlloc(&buf, 1 << 20), CUDA_SUCCESS);
  assert_int_equal(
      cuTensorMapEncodeIm2col(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 5, (void *)(uintptr_t)buf, dims,
                              strides, lower, upper, 256, 1024, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      CUDA_SUCCESS);
  assert_int_equal(((uint8_t *)&m)[4], CALL_TMAP_IM2COL);
  for (int i = 0; i < 3; i++) {
    memcpy(&lo, (uint8_t *)&m + 60 + 2 * i, 2);
    assert_int_equal(lo, -16);
  }
  memcpy(cp, (uint8_t *)&m + 12, 4);
  assert_int_equal(cp[0], 256);
  assert_int_equal(cp[1], 1024);
  assert_int_equal(cuTensorMapEncodeIm2colWide(
                       &m, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3, (void *)(uintptr_t)buf, dims,
                       strides, -32768, 32767, 64, 128, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                       CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                   CUDA_SUCCESS);
  assert_int_equal(((uint8_t *)&m)[4], CALL_TMAP_IM2COL_WIDE);
  assert_int_equal(((uint8_t *)&m)[11], CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128);
  memcpy(&lo, (uint8_t *)&m + 60, 2);
  assert_int_equal(lo, -32768);
  assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
}

/* The 128 bytes the kernel received, read back from out. */
static void received(CUdeviceptr out, const CUtensorMap *m) {
  uint8_t got[128];
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(got, out, sizeof(got)), CUDA_SUCCESS);
  assert_memory_equal(got, m, sizeof(got));
  assert_int_equal(cuMemsetD8(out, 0, sizeof(got)), CUDA_SUCCESS);
}

static void map_reaches_the_kernel_by_value(void **state) {
  CUtensorMap m;
  CUdeviceptr buf, out;
  size_t off = 0, size = 0;
  (void)state;
  assert_int_equal(cuFuncGetParamInfo(tmap_copy, 1, &off, &size), CUDA_SUCCESS);
  assert_int_equal(off, 64);
  assert_int_equal(size, 128);
  assert_int_equal(cuMemAlloc(&buf, 4096), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&out, 128), CUDA_SUCCESS);
  assert_int_equal(tiled(&m, buf), CUDA_SUCCESS);

  void *params[] = {&out, &m};
  assert_int_equal(cuLaunchKernel(tmap_copy, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL),
                   CUDA_SUCCESS);
  received(out, &m);

  /* An extra buffer laid out by the caller: pointer at 0, map at 64. */
  _Alignas(64) uint8_t argbuf[192];
  size_t argsize = sizeof(argbuf);
  memset(argbuf, 0, sizeof(argbuf));
  memcpy(argbuf, &out, 8);
  memcpy(argbuf + 64, &m, 128);
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, argbuf, CU_LAUNCH_PARAM_BUFFER_SIZE, &argsize,
                   CU_LAUNCH_PARAM_END};
  assert_int_equal(cuLaunchKernel(tmap_copy, 1, 1, 1, 128, 1, 1, 0, NULL, NULL, extra),
                   CUDA_SUCCESS);
  received(out, &m);

  /* cuLaunchKernelEx with an attribute (Triton launches with one). */
  CUlaunchAttribute at = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY};
  CUlaunchConfig c = {.gridDimX = 1,
                      .gridDimY = 1,
                      .gridDimZ = 1,
                      .blockDimX = 128,
                      .blockDimY = 1,
                      .blockDimZ = 1,
                      .attrs = &at,
                      .numAttrs = 1};
  assert_int_equal(cuLaunchKernelEx(&c, tmap_copy, params, NULL), CUDA_SUCCESS);
  received(out, &m);
  assert_int_equal(cuMemFree(out), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
}

static void bad_arguments_fail_cleanly(void **state) {
  CUtensorMap m;
  CUdeviceptr buf;
  cuuint64_t dims[5] = {16, 16, 16, 16, 16}, strides[4] = {64, 1024, 16384, 262144};
  cuuint32_t box[5] = {8, 8, 8, 8, 8}, es[5] = {1, 1, 1, 1, 1};
  int lower[3] = {0}, upper[3] = {1};
  (void)state;
  assert_int_equal(cuMemAlloc(&buf, 1 << 20), CUDA_SUCCESS);
  void *a = (void *)(uintptr_t)buf;
#define TILED(mp, rank, addr, d, s, b, e)                                                          \
  cuTensorMapEncodeTiled(mp, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, rank, addr, d, s, b, e,              \
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,                \
                         CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
  assert_int_equal(TILED(NULL, 2, a, dims, strides, box, es), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(TILED(&m, 0, a, dims, strides, box, es), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(TILED(&m, 6, a, dims, strides, box, es), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(TILED(&m, 2, a, NULL, strides, box, es), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(TILED(&m, 2, a, dims, NULL, box, es), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(TILED(&m, 2, a, dims, strides, NULL, es), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(TILED(&m, 1, a, dims, NULL, box, es), CUDA_SUCCESS); /* rank 1: no strides */
  /* Refused by tallyd or its device: misaligned, an enum past cuda.h's. */
  assert_int_equal(TILED(&m, 2, (void *)(uintptr_t)(buf + 8), dims, strides, box, es),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, a, dims, strides,
                                          box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                          (CUtensorMapSwizzle)99, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                   CUDA_ERROR_INVALID_VALUE);
  /* im2col needs rank 3..5. */
  assert_int_equal(cuTensorMapEncodeIm2col(
                       &m, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, a, dims, strides, lower, upper, 8, 8,
                       es, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                       CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                   CUDA_ERROR_INVALID_VALUE);
  memset(&m, 0x5a, sizeof(m)); /* not a map */
  assert_int_equal(cuTensorMapReplaceAddress(&m, a), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuTensorMapReplaceAddress(NULL, a), CUDA_ERROR_INVALID_VALUE);
#undef TILED
  /* The tenant goes on. */
  assert_int_equal(tiled(&m, buf), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
}

/* A map encoded before comes from the guest's memo, byte for byte, without a
 * request; any other argument asks again, and a refusal is not remembered. */
static void repeats_need_no_request(void **state) {
  CUtensorMap m1, m2, m3;
  CUdeviceptr buf;
  unsigned long n0;
  (void)state;
  assert_int_equal(cuMemAlloc(&buf, 4096), CUDA_SUCCESS);
  n0 = ops(CALL_OP_TENSOR_MAP);
  assert_int_equal(tiled(&m1, buf), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_TENSOR_MAP), n0 + 1);
  memset(&m2, 0, sizeof(m2));
  for (int i = 0; i < 5; i++)
    assert_int_equal(tiled(&m2, buf), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_TENSOR_MAP), n0 + 1);
  assert_memory_equal(&m1, &m2, sizeof(m1));
  /* Another address is another map. */
  assert_int_equal(tiled(&m3, buf + 1024), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_TENSOR_MAP), n0 + 2);
  assert_int_equal(u64_at(&m3, 16), buf + 1024);
  assert_int_equal(tiled(&m2, buf), CUDA_SUCCESS);
  assert_memory_equal(&m1, &m2, sizeof(m1));
  /* A refusal (misaligned) is asked for each time. */
  cuuint64_t dims[2] = {16, 16}, strides[1] = {64};
  cuuint32_t box[2] = {8, 8}, es[2] = {1, 1};
  for (int i = 0; i < 2; i++)
    assert_int_equal(cuTensorMapEncodeTiled(&m2, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2,
                                            (void *)(uintptr_t)(buf + 8), dims, strides, box, es,
                                            CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_NONE,
                                            CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                     CUDA_ERROR_INVALID_VALUE);
  assert_true(ops(CALL_OP_TENSOR_MAP) >= n0 + 4);
  assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
}

/* A working set of maps far larger than a step's all stay remembered: two
 * hundred maps encoded, then asked again in the same and in reverse order,
 * make no request (a direct-mapped memo of 256 loses some to collisions). */
static void many_maps_stay_remembered(void **state) {
  enum { N = 200 };
  CUtensorMap m, first;
  CUdeviceptr buf;
  unsigned long n0;
  (void)state;
  assert_int_equal(cuMemAlloc(&buf, N * 256), CUDA_SUCCESS);
  n0 = ops(CALL_OP_TENSOR_MAP);
  for (int i = 0; i < N; i++)
    assert_int_equal(tiled(i ? &m : &first, buf + (CUdeviceptr)i * 256), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_TENSOR_MAP), n0 + N);
  for (int i = 0; i < N; i++) {
    assert_int_equal(tiled(&m, buf + (CUdeviceptr)i * 256), CUDA_SUCCESS);
    assert_int_equal(u64_at(&m, 16), buf + (CUdeviceptr)i * 256);
  }
  for (int i = N - 1; i >= 0; i--)
    assert_int_equal(tiled(&m, buf + (CUdeviceptr)i * 256), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_TENSOR_MAP), n0 + N);
  assert_memory_equal(&m, &first, sizeof(m));
  assert_int_equal(cuMemFree(buf), CUDA_SUCCESS);
}

/* XLA's device allocator: granularity with fabric + POSIX fd, then memory. */
static void fabric_and_posix_fd_allocation(void **state) {
  CUmemAllocationProp p;
  CUmemAllocationProp got;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va;
  size_t g = 0, gmin = 0;
  int fd = -1;
  (void)state;
  memset(&p, 0, sizeof(p));
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.requestedHandleTypes = (CUmemAllocationHandleType)(CU_MEM_HANDLE_TYPE_FABRIC |
                                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  assert_int_equal(cuMemGetAllocationGranularity(&g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
                   CUDA_SUCCESS);
  assert_int_equal(cuMemGetAllocationGranularity(&gmin, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
                   CUDA_SUCCESS);
  assert_int_equal(g, 2u << 20);
  assert_int_equal(gmin, 2u << 20);
  assert_int_equal(cuMemCreate(&h, g, &p, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemGetAllocationPropertiesFromHandle(&got, h), CUDA_SUCCESS);
  assert_int_equal(got.requestedHandleTypes, p.requestedHandleTypes); /* as asked */
  assert_int_equal(cuMemAddressReserve(&va, g, 0, 0, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemMap(va, g, 0, h, 0), CUDA_SUCCESS);
  CUmemAccessDesc acc = {.location = p.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  assert_int_equal(cuMemSetAccess(va, g, &acc, 1), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32(va, 7, g / 4), CUDA_SUCCESS);
  uint32_t w = 0;
  assert_int_equal(cuMemcpyDtoH(&w, va + g - 4, 4), CUDA_SUCCESS);
  assert_int_equal(w, 7);
  /* Still never exported. */
  assert_int_equal(
      cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
      CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuMemUnmap(va, g), CUDA_SUCCESS);
  assert_int_equal(cuMemAddressFree(va, g), CUDA_SUCCESS);
  assert_int_equal(cuMemRelease(h), CUDA_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encoded_on_the_host_at_the_limits),
      cmocka_unit_test(im2col_kinds),
      cmocka_unit_test(map_reaches_the_kernel_by_value),
      cmocka_unit_test(bad_arguments_fail_cleanly),
      cmocka_unit_test(repeats_need_no_request),
      cmocka_unit_test(many_maps_stay_remembered),
      cmocka_unit_test(fabric_and_posix_fd_allocation),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
