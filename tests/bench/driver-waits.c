/* driver-waits.c: which driver calls wait for unrelated work in flight.
 *
 * tallyd serves every tenant from one CUDA context, so a driver call that
 * waits for all work in the context makes one tenant wait for another's
 * kernels (docs/decisions.md, D16).  This program launches a spinning kernel
 * on a low-priority stream (of the primary context, then of a green context
 * of 96 SMs, then with many blocks) and times each call of a list on the
 * host while it runs.  A call near the kernel's length waited for it.
 * Module and library loads, a function's lookup and its first launch are
 * timed too: under lazy loading (the driver's default) a function is loaded
 * when it is first used.
 *
 *   tests/bench/driver-waits      (GPU host; make gpu-programs builds it)
 *
 * Prints one table per placement; exits 1 when the GPU or a call fails.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int failed;

static void ck(CUresult r, const char *what) {
  const char *s = "?";
  if (r == CUDA_SUCCESS)
    return;
  (void)cuGetErrorName(r, &s);
  printf("  %s: %s\n", what, s);
  failed = 1;
}
#define CK(x) ck((x), #x)

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* spin(ns): each thread loops on %globaltimer for ns; tiny(): nothing. */
static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry spin(.param .u64 n) {\n .reg .pred %p; .reg .b64 %r<5>;\n"
    " ld.param.u64 %r1, [n];\n mov.u64 %r2, %globaltimer;\n"
    " L: mov.u64 %r3, %globaltimer; sub.u64 %r4, %r3, %r2; setp.lt.u64 %p, %r4, %r1;\n"
    " @%p bra L;\n ret;\n}\n"
    ".visible .entry tiny() { ret; }\n";
static CUfunction spin, tiny;

#define TIMED(label, stmt)                                                                         \
  do {                                                                                             \
    double t0_ = now_ms();                                                                         \
    stmt;                                                                                          \
    printf("  %-36s %9.3f ms\n", label, now_ms() - t0_);                                           \
  } while (0)

/* Times each call while spin(ns) x blocks runs on bg; lc is another stream. */
static void probe(const char *where, CUstream bg, unsigned blocks, unsigned long long ns,
                  CUstream lc) {
  CUdeviceptr p = 0, q = 0, big = 0;
  CUstream s2 = NULL;
  CUevent e = NULL;
  CUmodule m2 = NULL;
  CUfunction f2 = NULL;
  CUlibrary lib = NULL;
  CUkernel k = NULL;
  void *h = NULL, *reg = NULL, *args[] = {&ns};
  double t0;
  printf("%s (kernel of %u blocks spinning %llu ms each):\n", where, blocks, ns / 1000000);
  CK(cuMemAlloc(&q, 4096));
  CK(cuMemAlloc(&big, 1 << 20));
  CK(cuStreamSynchronize(lc));
  CK(cuLaunchKernel(spin, blocks, 1, 1, 128, 1, 1, 0, bg, args, NULL));
  t0 = now_ms();
  TIMED("small kernel + its stream's sync", {
    CK(cuLaunchKernel(tiny, 1, 1, 1, 32, 1, 1, 0, lc, NULL, NULL));
    CK(cuStreamSynchronize(lc));
  });
  TIMED("cuMemAlloc 4 KiB", CK(cuMemAlloc(&p, 4096)));
  TIMED("cuMemFree 4 KiB", CK(cuMemFree(p)));
  TIMED("cuMemFreeAsync of a cuMemAlloc 4 KiB", CK(cuMemFreeAsync(q, lc)));
  TIMED("  then its stream's sync", CK(cuStreamSynchronize(lc)));
  TIMED("cuMemFree 1 MiB", CK(cuMemFree(big)));
  TIMED("cuMemHostAlloc 4 KiB", CK(cuMemHostAlloc(&h, 4096, 0)));
  TIMED("cuMemFreeHost 4 KiB", CK(cuMemFreeHost(h)));
  if (posix_memalign(&reg, 65536, 65536) == 0) { /* what tallyd does with a guest's memfd */
    TIMED("cuMemHostRegister 64 KiB", CK(cuMemHostRegister(reg, 65536,
                                                            CU_MEMHOSTREGISTER_DEVICEMAP |
                                                                CU_MEMHOSTREGISTER_PORTABLE)));
    TIMED("cuMemHostUnregister 64 KiB", CK(cuMemHostUnregister(reg)));
    free(reg);
  }
  TIMED("cuStreamCreate", CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING)));
  TIMED("cuStreamDestroy", CK(cuStreamDestroy(s2)));
  TIMED("cuEventCreate", CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING)));
  TIMED("cuEventDestroy", CK(cuEventDestroy(e)));
  TIMED("cuModuleLoadData", CK(cuModuleLoadData(&m2, ptx)));
  /* Under lazy loading a function is loaded at its first use: the driver
   * may synchronise the context for it. */
  TIMED("cuModuleGetFunction (not loaded yet)", CK(cuModuleGetFunction(&f2, m2, "tiny")));
  TIMED("its first launch + its stream's sync", {
    CK(cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, lc, NULL, NULL));
    CK(cuStreamSynchronize(lc));
  });
  TIMED("its second launch + its stream's sync", {
    CK(cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, lc, NULL, NULL));
    CK(cuStreamSynchronize(lc));
  });
  TIMED("cuModuleUnload (a module not running)", CK(cuModuleUnload(m2)));
  TIMED("cuLibraryLoadData", CK(cuLibraryLoadData(&lib, ptx, NULL, NULL, 0, NULL, NULL, 0)));
  TIMED("cuLibraryGetKernel", CK(cuLibraryGetKernel(&k, lib, "tiny")));
  TIMED("a library kernel's first launch + sync", {
    CK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, lc, NULL, NULL));
    CK(cuStreamSynchronize(lc));
  });
  TIMED("cuLibraryUnload", CK(cuLibraryUnload(lib)));
  printf("  (%.1f ms since the kernel's launch)\n", now_ms() - t0);
  CK(cuCtxSynchronize());
}

int main(int argc, char **argv) {
  CUdevice d;
  CUcontext c;
  CUmodule m;
  CUstream bg, lc, gs;
  CUdevResource all, got, rest;
  CUdevResourceDesc desc;
  CUgreenCtx g;
  CUmoduleLoadingMode mode = CU_MODULE_EAGER_LOADING;
  unsigned n = 1;
  int lo, hi;
  (void)argv;
  if (argc != 1) {
    fprintf(stderr, "usage: driver-waits (no arguments; needs a GPU)\n");
    return 2;
  }
  CK(cuInit(0));
  CK(cuDeviceGet(&d, 0));
  CK(cuDevicePrimaryCtxRetain(&c, d));
  CK(cuCtxSetCurrent(c));
  CK(cuModuleLoadData(&m, ptx));
  CK(cuModuleGetFunction(&spin, m, "spin"));
  CK(cuModuleGetFunction(&tiny, m, "tiny"));
  CK(cuModuleGetLoadingMode(&mode));
  printf("module loading: %s\n", mode == CU_MODULE_LAZY_LOADING ? "lazy" : "eager");
  CK(cuCtxGetStreamPriorityRange(&lo, &hi));
  CK(cuStreamCreateWithPriority(&lc, CU_STREAM_NON_BLOCKING, hi));
  CK(cuStreamCreateWithPriority(&bg, CU_STREAM_NON_BLOCKING, lo));
  if (failed)
    return 1;
  probe("a stream of the primary context", bg, 96, 300000000ull, lc);
  CK(cuDeviceGetDevResource(d, &all, CU_DEV_RESOURCE_TYPE_SM));
  CK(cuDevSmResourceSplitByCount(&got, &n, &all, &rest, 0, 96));
  CK(cuDevResourceGenerateDesc(&desc, &got, 1));
  CK(cuGreenCtxCreate(&g, desc, d, CU_GREEN_CTX_DEFAULT_STREAM));
  CK(cuGreenCtxStreamCreate(&gs, g, CU_STREAM_NON_BLOCKING, lo));
  CK(cuCtxSetCurrent(c));
  if (failed)
    return 1;
  probe("a stream of a green context of 96 SMs", gs, 96, 300000000ull, lc);
  probe("the same, many blocks", gs, 10000, 20000000ull, lc);
  return failed;
}
