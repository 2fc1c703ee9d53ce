/* test-guest-array.c: CUDA arrays, copies with an array side, texture and
 * surface objects through the guest library (guestlib/array.c) against
 * tallyd's server in this process on the recording device.
 *
 * cuMemcpy2D/3D between host memory (with pitches), linear device memory
 * and arrays, the 1-D forms (HtoA, AtoH, AtoD, DtoA, AtoA), a copy larger
 * than one chunk (cut into slabs), descriptors answered locally, a texture
 * object over an array and over linear memory whose handle a kernel
 * receives and the device reads (the recording device's tex_copy kernel),
 * surface objects, and handles this tenant never made.  Never GPU coverage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/guest-daemon-harness.h"

static const char img[] = "TALLYREC\nkernel tex_copy 8,8,8\n";
static CUmodule mod;
static CUfunction tex_copy;

static int setup(void **state) {
  (void)state;
  if (gd_start("array", -1) != 0 || cuModuleLoadData(&mod, img) != CUDA_SUCCESS ||
      cuModuleGetFunction(&tex_copy, mod, "tex_copy") != CUDA_SUCCESS)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return gd_stop();
}

static CUarray array2d(size_t w, size_t h, unsigned flags) {
  CUDA_ARRAY3D_DESCRIPTOR d = {.Width = w, .Height = h, .Format = CU_AD_FORMAT_FLOAT,
                               .NumChannels = 1, .Flags = flags};
  CUarray a = NULL;
  assert_int_equal(cuArray3DCreate(&a, &d), CUDA_SUCCESS);
  return a;
}

/* Host (pitched) -> array -> device -> array -> host, and the descriptors. */
static void copies_2d_and_descriptors(void **state) {
  enum { W = 8, H = 5, HP = 48 }; /* floats; host pitch in bytes */
  uint8_t host[HP * H], back[HP * H];
  float dense[W * H];
  CUarray a = array2d(W, H, 0), b;
  CUDA_ARRAY_DESCRIPTOR d2 = {.Width = W, .Height = H, .Format = CU_AD_FORMAT_FLOAT,
                              .NumChannels = 1}, got2;
  CUDA_ARRAY3D_DESCRIPTOR got3;
  CUdeviceptr dev;
  size_t pitch;
  (void)state;
  for (size_t i = 0; i < sizeof(host); i++)
    host[i] = (uint8_t)(i * 13 + 5);
  assert_int_equal(cuArrayCreate(&b, &d2), CUDA_SUCCESS);
  assert_int_equal(cuArrayGetDescriptor(&got2, b), CUDA_SUCCESS);
  assert_int_equal(got2.Width, W);
  assert_int_equal(got2.Height, H);
  assert_int_equal(got2.Format, CU_AD_FORMAT_FLOAT);
  assert_int_equal(cuArray3DGetDescriptor(&got3, b), CUDA_SUCCESS);
  assert_int_equal(got3.Depth, 0);
  CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = HP,
                     .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a,
                     .WidthInBytes = W * 4, .Height = H};
  assert_int_equal(cuMemcpy2D(&c), CUDA_SUCCESS);
  assert_int_equal(cuMemAllocPitch(&dev, &pitch, W * 4, H, 4), CUDA_SUCCESS);
  c = (CUDA_MEMCPY2D){.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a,
                      .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = dev, .dstPitch = pitch,
                      .WidthInBytes = W * 4, .Height = H};
  assert_int_equal(cuMemcpy2DAsync(&c, NULL), CUDA_SUCCESS);
  c = (CUDA_MEMCPY2D){.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = dev, .srcPitch = pitch,
                      .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = b,
                      .WidthInBytes = W * 4, .Height = H};
  assert_int_equal(cuMemcpy2D(&c), CUDA_SUCCESS);
  memset(back, 0xee, sizeof(back));
  c = (CUDA_MEMCPY2D){.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = b,
                      .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = HP,
                      .WidthInBytes = W * 4, .Height = H};
  assert_int_equal(cuMemcpy2D(&c), CUDA_SUCCESS);
  for (size_t y = 0; y < H; y++) {
    assert_memory_equal(back + y * HP, host + y * HP, W * 4);
    assert_int_equal(back[y * HP + W * 4], 0xee); /* the pitch's padding untouched */
  }
  /* The 1-D forms on the first row, and a dense read. */
  float row[W] = {1, 2, 3, 4, 5, 6, 7, 8}, out[W] = {0};
  assert_int_equal(cuMemcpyHtoA(a, 4 * sizeof(float), row, 4 * sizeof(float)), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyAtoA(b, 0, a, 0, W * 4), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyAtoD(dev, b, 0, W * 4), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoA(a, 0, dev, W * 4), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyAtoH(out, a, 0, W * 4), CUDA_SUCCESS);
  assert_memory_equal(out, host, 4 * sizeof(float));
  assert_memory_equal(out + 4, row, 4 * sizeof(float));
  c = (CUDA_MEMCPY2D){.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a,
                      .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = dense,
                      .WidthInBytes = W * 4, .Height = H};
  assert_int_equal(cuMemcpy2D(&c), CUDA_SUCCESS);
  assert_memory_equal(dense, out, sizeof(out));
  assert_memory_equal(dense + W, host + HP, W * 4);
  assert_int_equal(cuArrayDestroy(a), CUDA_SUCCESS);
  assert_int_equal(cuArrayDestroy(b), CUDA_SUCCESS);
  assert_int_equal(cuArrayGetDescriptor(&got2, b), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuMemFree(dev), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_objects(), 0);
}

/* A 3-D copy of more than one chunk: slabs of rows, both ways. */
static void large_3d_copy_is_cut_into_slabs(void **state) {
  enum { W = 4096, H = 600, D = 2 }; /* 16 KiB rows: 18.75 MiB in all */
  size_t n = (size_t)W * 4 * H * D;
  uint8_t *in = malloc(n), *out = malloc(n);
  CUDA_ARRAY3D_DESCRIPTOR d = {.Width = W, .Height = H, .Depth = D,
                               .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1};
  CUarray a;
  (void)state;
  assert_non_null(in);
  assert_non_null(out);
  for (size_t i = 0; i < n; i++)
    in[i] = (uint8_t)(i ^ (i >> 13));
  assert_int_equal(cuArray3DCreate(&a, &d), CUDA_SUCCESS);
  unsigned long before = ops(CALL_OP_ARRAY_COPY);
  CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = in,
                     .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a,
                     .WidthInBytes = W * 4, .Height = H, .Depth = D};
  assert_int_equal(cuMemcpy3D(&c), CUDA_SUCCESS);
  assert_true(ops(CALL_OP_ARRAY_COPY) - before >= 4); /* 2 slices of > 8 MiB each */
  c = (CUDA_MEMCPY3D){.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a,
                      .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out,
                      .WidthInBytes = W * 4, .Height = H, .Depth = D};
  assert_int_equal(cuMemcpy3DAsync(&c, NULL), CUDA_SUCCESS);
  assert_memory_equal(in, out, n);
  assert_int_equal(cuArrayDestroy(a), CUDA_SUCCESS);
  free(in);
  free(out);
}

/* The kernel receives the texture handle the guest got, and the device
 * reads the texture's resource through it. */
static void texture_objects_reach_kernels(void **state) {
  float vals[16], got[16];
  CUarray a = array2d(4, 4, 0);
  CUdeviceptr lin, outp;
  CUtexObject tex[2];
  CUDA_RESOURCE_DESC res, rback;
  CUDA_TEXTURE_DESC td, tback;
  CUDA_RESOURCE_VIEW_DESC vback;
  (void)state;
  for (int i = 0; i < 16; i++)
    vals[i] = (float)i * 0.5f;
  CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = vals,
                     .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a,
                     .WidthInBytes = 16, .Height = 4};
  assert_int_equal(cuMemcpy2D(&c), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&lin, sizeof(vals)), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&outp, sizeof(vals)), CUDA_SUCCESS);
  for (int i = 0; i < 16; i++)
    vals[i] = 100.0f + (float)i;
  assert_int_equal(cuMemcpyHtoD(lin, vals, sizeof(vals)), CUDA_SUCCESS);
  memset(&res, 0, sizeof(res));
  memset(&td, 0, sizeof(td));
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = a;
  td.addressMode[0] = CU_TR_ADDRESS_MODE_CLAMP;
  td.filterMode = CU_TR_FILTER_MODE_LINEAR;
  td.flags = CU_TRSF_NORMALIZED_COORDINATES;
  td.borderColor[2] = 0.25f;
  assert_int_equal(cuTexObjectCreate(&tex[0], &res, &td, NULL), CUDA_SUCCESS);
  res.resType = CU_RESOURCE_TYPE_LINEAR;
  res.res.linear.devPtr = lin;
  res.res.linear.format = CU_AD_FORMAT_FLOAT;
  res.res.linear.numChannels = 1;
  res.res.linear.sizeInBytes = sizeof(vals);
  assert_int_equal(cuTexObjectCreate(&tex[1], &res, &td, NULL), CUDA_SUCCESS);
  assert_int_not_equal(tex[0], tex[1]);
  /* Queries answered from what was given. */
  assert_int_equal(cuTexObjectGetResourceDesc(&rback, tex[1]), CUDA_SUCCESS);
  assert_int_equal(rback.res.linear.devPtr, lin);
  assert_int_equal(cuTexObjectGetTextureDesc(&tback, tex[0]), CUDA_SUCCESS);
  assert_true(tback.borderColor[2] == 0.25f);
  assert_int_equal(cuTexObjectGetResourceViewDesc(&vback, tex[0]), CUDA_ERROR_INVALID_VALUE);
  /* tex_copy(tex, out, n) on the device: the handle as a plain parameter. */
  for (int k = 0; k < 2; k++) {
    uint64_t t = tex[k], o = outp, n = k ? sizeof(vals) : 16;
    void *params[] = {&t, &o, &n};
    memset(got, 0, sizeof(got));
    assert_int_equal(cuMemsetD8(outp, 0, sizeof(vals)), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(tex_copy, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoH(got, outp, sizeof(got)), CUDA_SUCCESS);
    if (k)
      assert_memory_equal(got, vals, sizeof(vals));
    else
      assert_true(got[1] == 0.5f && got[3] == 1.5f);
  }
  assert_int_equal(cuTexObjectDestroy(tex[0]), CUDA_SUCCESS);
  assert_int_equal(cuTexObjectDestroy(tex[1]), CUDA_SUCCESS);
  assert_int_equal(cuTexObjectGetResourceDesc(&rback, tex[1]), CUDA_ERROR_INVALID_VALUE);
  /* Mipmapped arrays are not offered. */
  res.resType = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY;
  assert_int_equal(cuTexObjectCreate(&tex[0], &res, &td, NULL), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuArrayDestroy(a), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(lin), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(outp), CUDA_SUCCESS);
}

static void surface_objects_and_strangers(void **state) {
  CUarray a = array2d(4, 4, CUDA_ARRAY3D_SURFACE_LDST), plain = array2d(4, 0, 0);
  CUsurfObject sf = 0;
  CUDA_RESOURCE_DESC res, back;
  (void)state;
  memset(&res, 0, sizeof(res));
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = a;
  assert_int_equal(cuSurfObjectCreate(&sf, &res), CUDA_SUCCESS);
  assert_int_equal(cuSurfObjectGetResourceDesc(&back, sf), CUDA_SUCCESS);
  assert_ptr_equal(back.res.array.hArray, a);
  res.res.array.hArray = plain; /* no surface flag */
  assert_int_not_equal(cuSurfObjectCreate(&sf, &res), CUDA_SUCCESS);
  /* Handles this tenant never made: refused by tallyd. */
  CUarray stranger = (CUarray)(uintptr_t)0x7777770;
  float x[4] = {0};
  assert_int_equal(cuMemcpyHtoA(stranger, 0, x, sizeof(x)), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuArrayDestroy(stranger), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuTexObjectDestroy(0x7777770), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuSurfObjectDestroy(sf), CUDA_SUCCESS);
  assert_int_equal(cuArrayDestroy(a), CUDA_SUCCESS);
  assert_int_equal(cuArrayDestroy(plain), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_objects(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(copies_2d_and_descriptors),
      cmocka_unit_test(large_3d_copy_is_cut_into_slabs),
      cmocka_unit_test(texture_objects_reach_kernels),
      cmocka_unit_test(surface_objects_and_strangers),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
