/* drv-module.c: modules, libraries and launches through the CUDA driver API.
 *
 * Loads drv-kernels.{ptx,cubin,fatbin} (built beside this program from drv-kernels.cu) every
 * way an application can: cuModuleLoadData of PTX (driver JIT), cuModuleLoadDataEx of PTX
 * with JIT options, cuModuleLoadData of the cubin and of the fatbin, cuModuleLoadFatBinary,
 * cuLibraryLoadData of the fatbin and of PTX (cuLibraryGetKernel, cuKernelGetFunction,
 * cuLibraryGetGlobal, cuLibraryGetModule).  Every image must give the same checksum.
 * Launches: cuLaunchKernel with a parameter array and with CU_LAUNCH_PARAM_BUFFER_POINTER,
 * cuLaunchKernelEx with attributes (priority, cluster dimension), dynamic shared memory;
 * parameter layouts from cuFuncGetParamInfo.  Streams with priorities, events (record,
 * query, synchronize, elapsed time: only "elapsed >= 0" is printed), cuStreamWaitEvent and
 * host functions (cuLaunchHostFunc).  Errors: a missing function or global, a garbage image.
 *
 * The image directory is the directory of this executable, or argv[1] when given.
 */
#include <cuda.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>

#include "e2e-common.h"

#define N_WORDS 65536 /* 256 blocks of 256 threads */

static char img_dir[PATH_MAX];

/* Reads a whole file into a NUL-terminated malloc'd buffer (PTX must end in NUL). */
static void *read_image(const char *name, size_t *len_out) {
  char path[PATH_MAX + 64];
  FILE *f;
  long len;
  char *buf = NULL;
  snprintf(path, sizeof(path), "%s/%s", img_dir, name);
  f = fopen(path, "rb");
  if (f == NULL) {
    printf("cannot open image %s\n", name);
    fprintf(stderr, "drv-module: cannot open %s\n", path);
    e2e_failures++;
    return NULL;
  }
  if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
    buf = malloc((size_t)len + 1);
    if (buf != NULL && fread(buf, 1, (size_t)len, f) == (size_t)len) {
      buf[len] = '\0';
      *len_out = (size_t)len;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  fclose(f);
  if (buf == NULL) {
    printf("cannot read image %s\n", name);
    e2e_failures++;
  }
  return buf;
}

/* Runs drv_saxpy_u32 from the given function and global and prints the checksum. */
static void run_saxpy(const char *label, CUfunction f, CUdeviceptr scale_ptr, size_t scale_size) {
  uint32_t *x = malloc(N_WORDS * 4), *y = malloc(N_WORDS * 4);
  CUdeviceptr dx = 0, dy = 0;
  uint32_t a = 2654435761u, scale = 17;
  int n = N_WORDS;
  void *args[4];

  printf("%s: global size %zu\n", label, scale_size);
  e2e_fill_u32(x, N_WORDS, 100);
  e2e_fill_u32(y, N_WORDS, 200);
  E2E_CU(cuMemAlloc(&dx, N_WORDS * 4));
  E2E_CU(cuMemAlloc(&dy, N_WORDS * 4));
  E2E_CU(cuMemcpyHtoD(dx, x, N_WORDS * 4));
  E2E_CU(cuMemcpyHtoD(dy, y, N_WORDS * 4));
  E2E_CU(cuMemcpyHtoD(scale_ptr, &scale, sizeof(scale)));
  args[0] = &a;
  args[1] = &dx;
  args[2] = &dy;
  args[3] = &n;
  E2E_CU(cuLaunchKernel(f, N_WORDS / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL));
  E2E_CU(cuCtxSynchronize());
  E2E_CU(cuMemcpyDtoH(y, dy, N_WORDS * 4));
  e2e_print_sum(label, y, N_WORDS * 4);
  {
    /* the same computation on the CPU */
    uint32_t *e = malloc(N_WORDS * 4);
    e2e_fill_u32(e, N_WORDS, 200);
    for (int i = 0; i < N_WORDS; i++)
      e[i] = a * x[i] + e[i] + scale;
    e2e_check(memcmp(e, y, N_WORDS * 4) == 0, label);
    free(e);
  }
  E2E_CU(cuMemFree(dx));
  E2E_CU(cuMemFree(dy));
  free(x);
  free(y);
}

static void run_module(const char *label, CUmodule mod) {
  CUfunction f = NULL;
  CUdeviceptr g = 0;
  size_t gsize = 0;
  E2E_CU(cuModuleGetFunction(&f, mod, "drv_saxpy_u32"));
  E2E_CU(cuModuleGetGlobal(&g, &gsize, mod, "drv_global_scale"));
  if (f != NULL && g != 0)
    run_saxpy(label, f, g, gsize);
}

static void test_module_loads(const char *ptx, const char *cubin, const char *fatbin) {
  CUmodule m;

  if (ptx != NULL) {
    E2E_CU(cuModuleLoadData(&m, ptx));
    run_module("ptx via cuModuleLoadData", m);
    E2E_CU(cuModuleUnload(m));
  }
  if (ptx != NULL) {
    char errlog[4096] = "";
    CUjit_option opts[3] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[3] = {(void *)(uintptr_t)3, errlog, (void *)(uintptr_t)sizeof(errlog)};
    E2E_CU(cuModuleLoadDataEx(&m, ptx, 3, opts, vals));
    printf("jit error log empty: %s\n", errlog[0] == '\0' ? "yes" : "no");
    run_module("ptx via cuModuleLoadDataEx", m);
    E2E_CU(cuModuleUnload(m));
  }
  if (cubin != NULL) {
    E2E_CU(cuModuleLoadData(&m, cubin));
    run_module("cubin via cuModuleLoadData", m);
    E2E_CU(cuModuleUnload(m));
  }
  if (fatbin != NULL) {
    E2E_CU(cuModuleLoadData(&m, fatbin));
    run_module("fatbin via cuModuleLoadData", m);
    E2E_CU(cuModuleUnload(m));
    E2E_CU(cuModuleLoadFatBinary(&m, fatbin));
    run_module("fatbin via cuModuleLoadFatBinary", m);
    E2E_CU(cuModuleUnload(m));
  }
}

static void test_libraries(const char *ptx, const char *fatbin) {
  const char *imgs[2] = {fatbin, ptx};
  const char *labels[2] = {"fatbin via cuLibraryLoadData", "ptx via cuLibraryLoadData"};
  for (int k = 0; k < 2; k++) {
    CUlibrary lib = NULL;
    CUkernel kern = NULL;
    CUfunction f = NULL;
    CUmodule mod = NULL;
    CUdeviceptr g = 0;
    size_t gsize = 0;
    unsigned int count = 0;
    if (imgs[k] == NULL)
      continue;
    E2E_CU(cuLibraryLoadData(&lib, imgs[k], NULL, NULL, 0, NULL, NULL, 0));
    if (lib == NULL)
      continue;
    E2E_CU(cuLibraryGetKernelCount(&count, lib));
    printf("%s: kernel count %u\n", labels[k], count);
    E2E_CU(cuLibraryGetKernel(&kern, lib, "drv_saxpy_u32"));
    E2E_CU(cuKernelGetFunction(&f, kern));
    E2E_CU(cuLibraryGetGlobal(&g, &gsize, lib, "drv_global_scale"));
    if (f != NULL && g != 0)
      run_saxpy(labels[k], f, g, gsize);
    /* A CUkernel may be launched directly as a CUfunction (context-independent loading). */
    if (kern != NULL && g != 0)
      run_saxpy("kernel handle launched directly", (CUfunction)kern, g, gsize);
    E2E_CU(cuLibraryGetModule(&mod, lib));
    printf("library module handle present: %s\n", mod != NULL ? "yes" : "no");
    E2E_CU(cuLibraryUnload(lib));
  }
}

static void test_params_and_launch_forms(CUmodule mod) {
  CUfunction f = NULL;
  CUdeviceptr out = 0, table = 0;
  size_t tsize = 0;
  uint64_t h[6];
  uint32_t tab[32];
  uint8_t a = 200;
  uint64_t b = 0x0123456789abcdefULL;
  uint16_t c = 65000;
  double d = -3.5;
  uint32_t e = 37;

  E2E_CU(cuModuleGetFunction(&f, mod, "drv_mixed_params"));
  E2E_CU(cuModuleGetGlobal(&table, &tsize, mod, "drv_global_table"));
  if (f == NULL || table == 0)
    return;
  for (int k = 0; k < 32; k++)
    tab[k] = 1000u + (uint32_t)k;
  E2E_CU(cuMemcpyHtoD(table, tab, sizeof(tab)));
  E2E_CU(cuMemAlloc(&out, sizeof(h)));

  /* Parameter layout as the driver reports it. */
  {
    size_t off = 0, size = 0;
    printf("drv_mixed_params layout:");
    for (size_t k = 0; k < 6; k++) {
      CUresult r = cuFuncGetParamInfo(f, k, &off, &size);
      if (r != CUDA_SUCCESS) {
        printf(" [%zu: %s]", k, e2e_cu_name(r));
        e2e_failures++;
      } else {
        printf(" %zu@%zu", size, off);
      }
    }
    printf("\n");
    printf("param 6 (past the end): %s\n", e2e_cu_name(cuFuncGetParamInfo(f, 6, &off, &size)));
  }

  /* Form 1: kernelParams array. */
  {
    void *args[6] = {&a, &b, &c, &d, &e, &out};
    E2E_CU(cuMemsetD8(out, 0, sizeof(h)));
    E2E_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    E2E_CU(cuMemcpyDtoH(h, out, sizeof(h)));
    printf("params array: %llu %llx %llu %lld %llu %llu\n", (unsigned long long)h[0],
           (unsigned long long)h[1], (unsigned long long)h[2], (long long)h[3],
           (unsigned long long)h[4], (unsigned long long)h[5]);
  }
  /* Form 2: one packed buffer laid out by the natural alignment of each parameter:
   * offset 0 u8, 8 u64, 16 u16, 24 double, 32 u32, 40 pointer; 48 bytes in all. */
  {
    unsigned char buf[48];
    size_t size = sizeof(buf);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    memset(buf, 0, sizeof(buf));
    memcpy(buf + 0, &a, 1);
    memcpy(buf + 8, &b, 8);
    memcpy(buf + 16, &c, 2);
    memcpy(buf + 24, &d, 8);
    memcpy(buf + 32, &e, 4);
    memcpy(buf + 40, &out, 8);
    E2E_CU(cuMemsetD8(out, 0, sizeof(h)));
    E2E_CU(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
    E2E_CU(cuMemcpyDtoH(h, out, sizeof(h)));
    printf("params buffer: %llu %llx %llu %lld %llu %llu\n", (unsigned long long)h[0],
           (unsigned long long)h[1], (unsigned long long)h[2], (long long)h[3],
           (unsigned long long)h[4], (unsigned long long)h[5]);
  }
  E2E_CU(cuMemFree(out));
}

static void test_launch_ex_and_smem(CUmodule mod) {
  CUfunction f = NULL;
  CUdeviceptr in = 0, out = 0;
  CUstream hi = NULL;
  int least = 0, greatest = 0, prio = 0;
  const int n = N_WORDS, block = 256, blocks = N_WORDS / 256;
  uint32_t *h = malloc(n * 4), sums[N_WORDS / 256];

  E2E_CU(cuModuleGetFunction(&f, mod, "drv_block_sum"));
  if (f == NULL)
    return;
  {
    int v = 0;
    E2E_CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    printf("drv_block_sum max threads per block: %d\n", v);
    E2E_CU(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f));
    printf("drv_block_sum static smem: %d\n", v);
  }
  E2E_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  printf("ctx priority range: %d %d\n", least, greatest);
  E2E_CU(cuStreamCreateWithPriority(&hi, CU_STREAM_NON_BLOCKING, greatest));
  E2E_CU(cuStreamGetPriority(hi, &prio));
  printf("stream priority: %d\n", prio);

  e2e_fill_u32(h, n, 300);
  E2E_CU(cuMemAlloc(&in, n * 4));
  E2E_CU(cuMemAlloc(&out, sizeof(sums)));
  E2E_CU(cuMemcpyHtoDAsync(in, h, n * 4, hi));
  {
    CUlaunchConfig cfg;
    CUlaunchAttribute attrs[2];
    void *args[3] = {&in, &out, (void *)&n};
    memset(&cfg, 0, sizeof(cfg));
    memset(attrs, 0, sizeof(attrs));
    cfg.gridDimX = blocks;
    cfg.gridDimY = 1;
    cfg.gridDimZ = 1;
    cfg.blockDimX = block;
    cfg.blockDimY = 1;
    cfg.blockDimZ = 1;
    cfg.sharedMemBytes = block * 4;
    cfg.hStream = hi;
    attrs[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attrs[0].value.priority = greatest;
    attrs[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[1].value.clusterDim.x = 2;
    attrs[1].value.clusterDim.y = 1;
    attrs[1].value.clusterDim.z = 1;
    cfg.attrs = attrs;
    cfg.numAttrs = 2;
    E2E_CU(cuLaunchKernelEx(&cfg, f, args, NULL));
  }
  E2E_CU(cuMemcpyDtoHAsync(sums, out, sizeof(sums), hi));
  E2E_CU(cuStreamSynchronize(hi));
  {
    int ok = 1;
    for (int b = 0; b < blocks; b++) {
      uint32_t s = 0;
      for (int k = 0; k < block; k++)
        s += h[b * block + k];
      ok &= s == sums[b];
    }
    e2e_check(ok, "cuLaunchKernelEx block sums");
  }
  e2e_print_sum("block sums", sums, sizeof(sums));
  E2E_CU(cuMemFree(in));
  E2E_CU(cuMemFree(out));
  E2E_CU(cuStreamDestroy(hi));
  free(h);
}

static double wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Host function log: written only by host functions, which run one at a time per stream. */
static int hf_order[8], hf_count;
static void CUDA_CB host_fn(void *arg) {
  if (hf_count < 8)
    hf_order[hf_count++] = (int)(intptr_t)arg;
}

static void test_streams_events_hostfn(CUmodule mod) {
  CUfunction spin = NULL;
  CUstream s1 = NULL, s2 = NULL;
  CUevent a = NULL, b = NULL;
  CUdeviceptr flag = 0;
  uint32_t hflag = 0;
  int khz = 0;
  long long cycles;
  float ms = -1;
  double t_launch, t_queried;
  CUdevice dev;
  void *args[1];

  E2E_CU(cuModuleGetFunction(&spin, mod, "drv_spin"));
  E2E_CU(cuCtxGetDevice(&dev));
  E2E_CU(cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev));
  if (khz <= 0)
    khz = 2000000;               /* 2 GHz: an upper bound, so the spin only gets longer */
  cycles = (long long)khz * 300; /* 300 ms: far longer than a query round trip over TCP */
  args[0] = &cycles;

  E2E_CU(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
  E2E_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  E2E_CU(cuEventCreate(&a, CU_EVENT_DEFAULT));
  E2E_CU(cuEventCreate(&b, CU_EVENT_DEFAULT));
  E2E_CU(cuMemAlloc(&flag, 4));
  E2E_CU(cuMemsetD32(flag, 0, 1));

  E2E_CU(cuEventRecord(a, s1));
  t_launch = wall_ms();
  E2E_CU(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s1, args, NULL));
  E2E_CU(cuLaunchHostFunc(s1, host_fn, (void *)(intptr_t)1));
  E2E_CU(cuMemsetD32Async(flag, 0xfeed, 1, s1));
  E2E_CU(cuEventRecord(b, s1));
  E2E_CU(cuLaunchHostFunc(s1, host_fn, (void *)(intptr_t)2));
  printf("stream query while spinning: %s\n", e2e_cu_name(cuStreamQuery(s1)));
  printf("event query while spinning: %s\n", e2e_cu_name(cuEventQuery(b)));
  /* The two queries assume they come within the spin's 300 ms: say so when they did not
   * (stderr, not compared), so a difference can be told from a stall on the way. */
  t_queried = wall_ms();
  if (t_queried - t_launch > 250)
    fprintf(stderr, "drv-module: the event query came %.0f ms after the spin's launch\n",
            t_queried - t_launch);
  E2E_CU(cuStreamWaitEvent(s2, b, 0));
  E2E_CU(cuMemcpyDtoHAsync(&hflag, flag, 4, s2));
  E2E_CU(cuStreamSynchronize(s2));
  printf("flag after cross-stream wait: %x\n", hflag);
  E2E_CU(cuEventSynchronize(b));
  E2E_CU(cuStreamSynchronize(s1));
  printf("event query after sync: %s\n", e2e_cu_name(cuEventQuery(b)));
  E2E_CU(cuEventElapsedTime(&ms, a, b));
  printf("elapsed >= 0: %s\n", ms >= 0 ? "yes" : "no");
  printf("host functions ran:");
  for (int i = 0; i < hf_count; i++)
    printf(" %d", hf_order[i]);
  printf("\n");

  E2E_CU(cuMemFree(flag));
  E2E_CU(cuEventDestroy(a));
  E2E_CU(cuEventDestroy(b));
  E2E_CU(cuStreamDestroy(s1));
  E2E_CU(cuStreamDestroy(s2));
}

static void test_errors(CUmodule mod) {
  CUfunction f = NULL;
  CUdeviceptr g = 0;
  size_t gsize = 0;
  CUmodule bad = NULL;
  static const char garbage[] = "this is not a module image";
  printf("missing function: %s\n", e2e_cu_name(cuModuleGetFunction(&f, mod, "no_such_kernel")));
  printf("missing global: %s\n", e2e_cu_name(cuModuleGetGlobal(&g, &gsize, mod, "no_such_var")));
  printf("garbage image: %s\n", e2e_cu_name(cuModuleLoadData(&bad, garbage)));
  printf("launch of NULL function: %s\n",
         e2e_cu_name(cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL)));
  E2E_CU(cuCtxSynchronize());
}

int main(int argc, char **argv) {
  CUdevice dev;
  CUcontext ctx = NULL;
  size_t ptx_len = 0, cubin_len = 0, fatbin_len = 0;
  char *ptx, *cubin, *fatbin;

  if (argc > 1) {
    snprintf(img_dir, sizeof(img_dir), "%s", argv[1]);
  } else {
    ssize_t len = readlink("/proc/self/exe", img_dir, sizeof(img_dir) - 1);
    if (len <= 0) {
      fprintf(stderr, "drv-module: cannot find my own directory; pass it as argv[1]\n");
      return 1;
    }
    img_dir[len] = '\0';
    *strrchr(img_dir, '/') = '\0';
  }
  ptx = read_image("drv-kernels.ptx", &ptx_len);
  cubin = read_image("drv-kernels.cubin", &cubin_len);
  fatbin = read_image("drv-kernels.fatbin", &fatbin_len);

  E2E_CU(cuInit(0));
  E2E_CU(cuDeviceGet(&dev, 0));
  E2E_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  E2E_CU(cuCtxSetCurrent(ctx));
  if (ctx == NULL)
    return e2e_finish();

  test_module_loads(ptx, cubin, fatbin);
  test_libraries(ptx, fatbin);
  if (fatbin != NULL) {
    CUmodule mod = NULL;
    E2E_CU(cuModuleLoadData(&mod, fatbin));
    if (mod != NULL) {
      test_params_and_launch_forms(mod);
      test_launch_ex_and_smem(mod);
      test_streams_events_hostfn(mod);
      test_errors(mod);
      E2E_CU(cuModuleUnload(mod));
    }
  }
  E2E_CU(cuCtxSynchronize());
  E2E_CU(cuDevicePrimaryCtxRelease(dev));
  free(ptx);
  free(cubin);
  free(fatbin);
  return e2e_finish();
}
