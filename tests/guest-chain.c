/* guest-chain.c: a driver-API program for tests/test-guest-chain.sh.
 *
 * Loads a TALLYREC module (the recording device's format), runs fill_u32
 * through cuLaunchKernel and cuLaunchKernelEx on the module and on a
 * library's kernel and module view, copies back, checks every value, and
 * runs a host function between two kernels and copies through pinned
 * memory, and prints "ok".  Run through two daemons in a chain, it drives tallyd's real
 * CUDA backend (hostd/gpu-cuda.c) with our own libcuda.so.1 standing in for
 * the driver, so that backend's logic runs on CPU-only machines.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      printf("FAIL line %d: %s -> %d\n", __LINE__, #x, (int)r_);                                   \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\nkernel other 4\nglobal g 64\n";

static int check(CUdeviceptr p, uint32_t want) {
  uint32_t out[256];
  if (cuMemcpyDtoH(out, p, sizeof(out)) != CUDA_SUCCESS)
    return 0;
  for (int i = 0; i < 256; i++)
    if (out[i] != want)
      return 0;
  return 1;
}

static int host_fn_saw;
static void host_fn(void *data) {
  *(int *)data += 1;
}

int main(void) {
  CUcontext ctx;
  CUmodule m, view;
  CUlibrary lib;
  CUkernel k;
  CUfunction f, fv;
  CUdeviceptr p, g;
  CUstream s;
  CUevent a, b;
  size_t gsize, off, size;
  uint32_t v = 7;
  uint64_t n = 256;
  void *args[] = {&p, &v, &n};
  float ms;

  CK(cuInit(0));
  CK(cuDevicePrimaryCtxRetain(&ctx, 0));
  CK(cuCtxSetCurrent(ctx));
  CK(cuMemAlloc(&p, 1024));
  CK(cuModuleLoadData(&m, img));
  CK(cuModuleGetFunction(&f, m, "fill_u32"));
  CK(cuFuncGetParamInfo(f, 2, &off, &size));
  if (off != 16 || size != 8)
    return printf("FAIL param layout %zu %zu\n", off, size), 1;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&a, 0));
  CK(cuEventCreate(&b, 0));
  CK(cuEventRecord(a, s));
  CK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
  CK(cuEventRecord(b, s));
  CK(cuStreamSynchronize(s));
  CK(cuEventElapsedTime(&ms, a, b));
  if (!check(p, 7))
    return printf("FAIL launch\n"), 1;
  CUlaunchConfig cfg = {0};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = cfg.blockDimZ = 1;
  v = 8;
  CK(cuLaunchKernelEx(&cfg, f, args, NULL));
  CK(cuCtxSynchronize());
  if (!check(p, 8))
    return printf("FAIL launch ex\n"), 1;
  CK(cuModuleGetGlobal(&g, &gsize, m, "g"));
  CK(cuMemsetD32(g, 3, 16));
  CK(cuLibraryLoadData(&lib, img, NULL, NULL, 0, NULL, NULL, 0));
  CK(cuLibraryGetKernel(&k, lib, "fill_u32"));
  v = 9;
  CK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  CK(cuStreamSynchronize(NULL));
  if (!check(p, 9))
    return printf("FAIL library kernel\n"), 1;
  CK(cuLibraryGetModule(&view, lib));
  CK(cuModuleGetFunction(&fv, view, "fill_u32"));
  v = 10;
  CK(cuLaunchKernel(fv, 1, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  CK(cuStreamSynchronize(NULL));
  if (!check(p, 10))
    return printf("FAIL module view\n"), 1;
  /* A host function between two kernels, then pinned-memory copies: on the
   * front tallyd these are gpu-cuda.c's gate (its blocking fallback: our
   * driver has no stream memory operations) and its host registration. */
  v = 11;
  CK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
  CK(cuLaunchHostFunc(s, host_fn, &host_fn_saw));
  v = 12;
  CK(cuLaunchKernel(f, 1, 1, 1, 256, 1, 1, 0, s, args, NULL));
  CK(cuStreamSynchronize(s));
  if (host_fn_saw != 1 || !check(p, 12))
    return printf("FAIL host function (%d)\n", host_fn_saw), 1;
  {
    uint32_t *h;
    CK(cuMemHostAlloc((void **)&h, 1024, 0));
    for (int i = 0; i < 256; i++)
      h[i] = 13;
    CK(cuMemcpyHtoDAsync(p, h, 1024, s));
    CK(cuMemsetD32Async(p, 14, 128, s));
    CK(cuMemcpyDtoHAsync(h, p, 1024, s));
    CK(cuStreamSynchronize(s));
    if (h[0] != 14 || h[127] != 14 || h[128] != 13 || h[255] != 13)
      return printf("FAIL pinned copies %u %u\n", h[0], h[255]), 1;
    CK(cuMemFreeHost(h));
  }
  CK(cuLibraryUnload(lib));
  CK(cuModuleUnload(m));
  CK(cuEventDestroy(a));
  CK(cuEventDestroy(b));
  CK(cuStreamDestroy(s));
  CK(cuMemFree(p));
  printf("ok\n");
  return 0;
}
