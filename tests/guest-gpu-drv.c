/* guest-gpu-drv.c: a driver-API program for tests/test-guest-gpu.sh (GPU only).
 *
 * Loads PTX text (JIT by the daemon's driver, as numba's path does), through
 * cuLinkCreate/AddData/Complete then cuModuleLoadDataEx, launches a kernel
 * with cuLaunchKernel and cuLaunchKernelEx, and prints a checksum, every
 * CU_FUNC_ATTRIBUTE_* of the kernel (queried before its first launch: lazy
 * loading) and a priority stream's range-clamped priority and flags.  Its
 * output must be the same with and without Tally.  Given a second PTX file,
 * both are linked (a kernel calling a device function of the other module:
 * only a link of the two resolves it).
 * usage: guest-gpu-drv FILE.ptx [SECOND.ptx]
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *n_ = NULL;                                                                       \
      cuGetErrorName(r_, &n_);                                                                     \
      printf("FAIL %s:%d %s -> %s\n", __FILE__, __LINE__, #x, n_ ? n_ : "?");                      \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(int argc, char **argv) {
  CUdevice dev;
  CUcontext ctx;
  CUlinkState link;
  CUmodule mod;
  CUfunction f;
  CUdeviceptr d;
  void *cubin;
  size_t cubin_size;
  static char ptx[2][1 << 20];
  size_t len[2] = {0, 0};
  FILE *fp;
  int n = 4096;
  unsigned out[4096];

  if (argc < 2 || argc > 3)
    return 2;
  for (int i = 1; i < argc; i++) {
    if (!(fp = fopen(argv[i], "rb")))
      return 2;
    len[i - 1] = fread(ptx[i - 1], 1, sizeof(ptx[0]) - 1, fp);
    fclose(fp);
    ptx[i - 1][len[i - 1]] = 0;
  }
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxPushCurrent(ctx));
  CK(cuLinkCreate(0, NULL, NULL, &link));
  CK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx[0], len[0] + 1, "k.ptx", 0, NULL, NULL));
  if (argc == 3)
    CK(cuLinkAddData(link, CU_JIT_INPUT_PTX, ptx[1], len[1] + 1, "k2.ptx", 0, NULL, NULL));
  CK(cuLinkComplete(link, &cubin, &cubin_size));
  CK(cuModuleLoadDataEx(&mod, cubin, 0, NULL, NULL));
  CK(cuLinkDestroy(link));
  CK(cuModuleGetFunction(&f, mod, "iota_sq"));
  for (int a = 0; a < CU_FUNC_ATTRIBUTE_MAX; a++) {
    int v = -1;
    CUresult r = cuFuncGetAttribute(&v, (CUfunction_attribute)a, f);
    printf("func attr %d: %d (%d)\n", a, v, (int)r);
  }
  {
    int least = 0, greatest = 0, prio = 0;
    unsigned flags = 0;
    CUstream s;
    CK(cuCtxGetStreamPriorityRange(&least, &greatest));
    printf("stream priority range %d..%d\n", least, greatest);
    CK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, greatest - 1));
    CK(cuStreamGetPriority(s, &prio));
    CK(cuStreamGetFlags(s, &flags));
    printf("stream priority %d flags %u\n", prio, flags);
    CK(cuStreamDestroy(s));
  }
  CK(cuMemAlloc(&d, sizeof(out)));
  CK(cuMemsetD32(d, 0, n));
  void *args[] = {&d, &n};
  CK(cuLaunchKernel(f, n / 128, 1, 1, 128, 1, 1, 0, NULL, args, NULL));
  CUlaunchConfig cfg = {0};
  cfg.gridDimX = n / 256, cfg.gridDimY = 1, cfg.gridDimZ = 1;
  cfg.blockDimX = 256, cfg.blockDimY = 1, cfg.blockDimZ = 1;
  CK(cuLaunchKernelEx(&cfg, f, args, NULL));
  CK(cuCtxSynchronize());
  CK(cuMemcpyDtoH(out, d, sizeof(out)));
  unsigned long long sum = 0;
  for (int i = 0; i < n; i++)
    sum += out[i];
  printf("drv sum %llu\n", sum);
  CK(cuMemFree(d));
  CK(cuModuleUnload(mod));
  CK(cuCtxPopCurrent(&ctx));
  CK(cuDevicePrimaryCtxRelease(dev));
  printf("done\n");
  return 0;
}
