/* test-hostd-restart-tenant.c: the tenants of tests/test-hostd-restart.sh.
 *
 * usage: test-hostd-restart-tenant ACTION   (TALLY_HOST etc. from the environment)
 * Every action first allocates 4 KiB and prints "ptr 0x..." (its address).
 *   fault    allocate, launch the recording device's "fault" kernel, print
 *            "sync N" (cuCtxSynchronize: the fault, as natively) and
 *            "after N" (a later cuMemAlloc: still the fault, sticky), exit
 *   hold     allocate, print "ready", wait until stdin closes, then print
 *            "after SYNC ALLOC" (cuCtxSynchronize, cuMemAlloc)
 *   healthy  allocate, memset, copy back, check, free: print "healthy N"
 *            (N the first failing CUresult, 0 when all worked)
 *   init     print cuInit's result ("init N")
 * Linked against guestlib/libcuda.so.1, as an application would be; runs
 * against tallyd-record (the recording device: never GPU coverage).
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The recording device's module format (hostd/gpu-record.c). */
static const char module_text[] = "TALLYREC\nkernel fault\n";

static CUresult context(void) {
  CUcontext ctx;
  CUresult r = cuDevicePrimaryCtxRetain(&ctx, 0);
  return r == CUDA_SUCCESS ? cuCtxSetCurrent(ctx) : r;
}

int main(int argc, char **argv) {
  CUdeviceptr p;
  CUresult r;

  if (argc != 2)
    return 2;
  r = cuInit(0);
  if (strcmp(argv[1], "init") == 0) {
    printf("init %d\n", (int)r);
    return 0;
  }
  if (r != CUDA_SUCCESS || context() != CUDA_SUCCESS || cuMemAlloc(&p, 4096) != CUDA_SUCCESS) {
    printf("setup failed %d\n", (int)r);
    return 3;
  }
  /* The device's first address in a fresh daemon is always the same. */
  printf("ptr 0x%llx\n", (unsigned long long)p);
  if (strcmp(argv[1], "fault") == 0) {
    CUmodule m;
    CUfunction f;
    if (cuModuleLoadData(&m, module_text) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "fault") != CUDA_SUCCESS ||
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
      return 4;
    printf("sync %d\n", (int)cuCtxSynchronize());
    printf("after %d\n", (int)cuMemAlloc(&p, 4096));
    return 0;
  }
  if (strcmp(argv[1], "hold") == 0) {
    char c;
    CUresult s;
    printf("ready\n");
    fflush(stdout);
    while (read(0, &c, 1) > 0)
      ;
    s = cuCtxSynchronize();
    printf("after %d %d\n", (int)s, (int)cuMemAlloc(&p, 4096));
    return 0;
  }
  if (strcmp(argv[1], "healthy") == 0) {
    unsigned v[64] = {0};
    r = cuMemsetD32(p, 7, 64);
    if (r == CUDA_SUCCESS)
      r = cuMemcpyDtoH(v, p, sizeof(v));
    if (r == CUDA_SUCCESS)
      r = cuCtxSynchronize();
    if (r == CUDA_SUCCESS && (v[0] != 7 || v[63] != 7))
      r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS)
      r = cuMemFree(p);
    printf("healthy %d\n", (int)r);
    return 0;
  }
  return 2;
}
