/* rw-diff-hook.c: the interposition half of the GPU differential harness.
 *
 * Defines, inside the harness executable, the cudart entry points a CUDA
 * program's own code calls (see rw-diff.h for why this catches them):
 * __cudaRegisterFatBinary/__cudaRegisterFunction/__cudaGetKernel to learn
 * each kernel's name and fatbin, cudaMalloc/cudaFree(+Async) to know which
 * device memory a kernel can touch, and the three launch calls, which go to
 * rwd_test_launch().  The real functions are found with dlsym(RTLD_NEXT).
 * It also loads each fatbin's PTX -- extracted through the cudart wrapper
 * with rw_fatbin_image_size()/rw_fatbin_ptx() -- transforms it with
 * rw_transform_ptx() when the transformations are linked in (a weak
 * reference: without them every variant is reported "unavailable"), and
 * prints the per-kernel summary at exit.
 *
 * Everything runs on the program's single thread; see rw-diff.h.
 */
#include "tests/gpu/rw-diff.h"

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The transformations' entry points, weak so the harness links (and says "variant
 * unavailable") before they exist; the link rule adds -u when the library
 * has them so the archive member is pulled in. */
#pragma weak rw_transform_ptx
#pragma weak rw_xform_report_free

rwd_config_t rwd_cfg;
rwd_alloc_t *rwd_allocs;
rwd_kernel_t *rwd_kernels;
rwd_fatbin_t *rwd_fatbins;
int rwd_sm_count, rwd_arch;

/* host stub -> (name, fatbin), from __cudaRegisterFunction */
typedef struct func_rec {
  const void *host_fun;
  const char *name;
  rwd_fatbin_t *fb;
  rwd_kernel_t *k;
  struct func_rec *next;
} func_rec_t;
static func_rec_t *funcs;

/* cudaKernel_t -> host stub, from __cudaGetKernel */
typedef struct kern_rec {
  cudaKernel_t kernel;
  const void *host_fun;
  struct kern_rec *next;
} kern_rec_t;
static kern_rec_t *kerns;

static int configured;

/* ---- real entry points ---- */

#define REAL(ret, name, args)                                                                      \
  static ret(*real_##name) args;                                                                   \
  static void resolve_##name(void) {                                                               \
    if (real_##name == NULL) {                                                                     \
      real_##name = (ret(*) args)dlsym(RTLD_NEXT, #name);                                          \
      if (real_##name == NULL) {                                                                   \
        fprintf(stderr, "rw-diff: cannot resolve %s: %s\n", #name, dlerror());                     \
        _exit(1);                                                                                  \
      }                                                                                            \
    }                                                                                              \
  }

REAL(void **, __cudaRegisterFatBinary, (void *))
REAL(void, __cudaRegisterFunction,
     (void **, const char *, char *, const char *, int, uint3 *, uint3 *, dim3 *, dim3 *, int *))
REAL(cudaError_t, __cudaGetKernel, (cudaKernel_t *, const void *))
REAL(cudaError_t, __cudaLaunchKernel, (cudaKernel_t, dim3, dim3, void **, size_t, cudaStream_t))
REAL(cudaError_t, cudaLaunchKernel, (const void *, dim3, dim3, void **, size_t, cudaStream_t))
REAL(cudaError_t, cudaLaunchKernelExC, (const cudaLaunchConfig_t *, const void *, void **))
REAL(cudaError_t, cudaMalloc, (void **, size_t))
REAL(cudaError_t, cudaFree, (void *))
REAL(cudaError_t, cudaMallocAsync, (void **, size_t, cudaStream_t))
REAL(cudaError_t, cudaFreeAsync, (void *, cudaStream_t))

/* Our own prototypes for cudart's internal registration calls (they live
 * in crt/host_runtime.h and crt/device_functions.h, C++ only). */
void **__cudaRegisterFatBinary(void *fat);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize);
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *host_fun);
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 grid, dim3 block, void **args, size_t shmem,
                               cudaStream_t stream);

double rwd_now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int rwd_cu(CUresult r, const char *what) {
  if (r != CUDA_SUCCESS) {
    const char *s = NULL;
    cuGetErrorName(r, &s);
    fprintf(stderr, "rw-diff: %s failed: %s\n", what, s ? s : "?");
    return -1;
  }
  return 0;
}

/* ---- watchdog ---- */

static char rwd_watch_what[512];

static void on_alarm(int sig) {
  static const char pre[] = "HANG (watchdog): ";
  (void)sig;
  /* async-signal-safe: write() and _exit() only */
  if (write(2, pre, sizeof(pre) - 1) < 0 ||
      write(2, rwd_watch_what, strnlen(rwd_watch_what, sizeof(rwd_watch_what))) < 0 ||
      write(2, "\n", 1) < 0)
    _exit(1);
  _exit(1);
}

void rwd_watch(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rwd_watch_what, sizeof(rwd_watch_what), fmt, ap);
  va_end(ap);
  alarm(rwd_cfg.timeout_s);
}

void rwd_unwatch(void) {
  alarm(0);
}

/* ---- configuration ---- */

static unsigned env_uint(const char *name, unsigned dflt) {
  const char *v = getenv(name);
  return v && *v ? (unsigned)strtoul(v, NULL, 0) : dflt;
}

static void configure(void) {
  const char *mode = getenv("RW_DIFF_MODE"), *seed = getenv("RW_DIFF_SEED");
  struct sigaction sa;

  if (configured)
    return;
  configured = 1;
  rwd_cfg.mode = RWD_MODE_DIFF;
  if (mode && strcmp(mode, "bench") == 0)
    rwd_cfg.mode = RWD_MODE_BENCH;
  else if (mode && strcmp(mode, "off") == 0)
    rwd_cfg.mode = RWD_MODE_OFF;
  rwd_cfg.launches = env_uint("RW_DIFF_LAUNCHES", rwd_cfg.mode == RWD_MODE_BENCH ? 1 : 2);
  rwd_cfg.timeout_s = env_uint("RW_DIFF_TIMEOUT", 60);
  /* make check-gpu stops a test at 300 s.  Measured on an H200: the JIT of
   * one transformed module takes up to 39 s (cub-sort: 32 entries, 5 MB of
   * PTX), and one variant run may take the watchdog's 60 s before it is
   * called a hang, so a tested launch starts no later than 150 s in:
   * 150 + 39 + 60 = 249 s, with room for the native tail of the program. */
  rwd_cfg.budget_s = env_uint("RW_DIFF_BUDGET", 150);
  rwd_cfg.start_us = rwd_now_us();
  rwd_cfg.bench_reps = env_uint("RW_BENCH_REPS", 21);
  rwd_cfg.require_variants = env_uint("RW_DIFF_REQUIRE_VARIANTS", 0) != 0;
  rwd_cfg.seed =
      seed && *seed ? strtoull(seed, NULL, 0) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
}

uint64_t rwdiff_seed(void) {
  configure();
  return rwd_cfg.seed;
}

/* ---- registration ---- */

void **__cudaRegisterFatBinary(void *fat) {
  rwd_fatbin_t *fb;
  void **h;

  configure();
  resolve___cudaRegisterFatBinary();
  h = real___cudaRegisterFatBinary(fat);
  fb = calloc(1, sizeof(*fb));
  if (fb != NULL) {
    fb->wrapper = fat;
    fb->handle = h;
    fb->next = rwd_fatbins;
    rwd_fatbins = fb;
  }
  return h;
}

void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize) {
  func_rec_t *f = calloc(1, sizeof(*f));
  rwd_fatbin_t *fb;

  resolve___cudaRegisterFunction();
  if (f != NULL) {
    f->host_fun = host_fun;
    f->name = device_fun;
    for (fb = rwd_fatbins; fb != NULL; fb = fb->next)
      if (fb->handle == handle)
        f->fb = fb;
    f->next = funcs;
    funcs = f;
  }
  real___cudaRegisterFunction(handle, host_fun, device_fun, device_name, thread_limit, tid, bid,
                              bdim, gdim, wsize);
}

cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *host_fun) {
  cudaError_t r;

  resolve___cudaGetKernel();
  r = real___cudaGetKernel(k, host_fun);
  if (r == cudaSuccess) {
    kern_rec_t *kr = calloc(1, sizeof(*kr));
    if (kr != NULL) {
      kr->kernel = *k;
      kr->host_fun = host_fun;
      kr->next = kerns;
      kerns = kr;
    }
  }
  return r;
}

/* ---- memory tracking ---- */

static void track(void *p, size_t n) {
  rwd_alloc_t *a = calloc(1, sizeof(*a));
  if (a == NULL)
    return;
  a->ptr = (CUdeviceptr)p;
  a->size = n;
  a->next = rwd_allocs;
  rwd_allocs = a;
}

static void untrack(void *p) {
  rwd_alloc_t **pp, *a;
  for (pp = &rwd_allocs; (a = *pp) != NULL; pp = &a->next) {
    if (a->ptr == (CUdeviceptr)p) {
      *pp = a->next;
      if (a->before)
        cuMemFree(a->before);
      if (a->ref)
        cuMemFree(a->ref);
      free(a->host_ref);
      free(a->host_out);
      free(a->mask);
      free(a);
      return;
    }
  }
}

/* Marks the tracked allocation that starts at p as scratch (rw-diff.h). */
void rwdiff_mark_scratch(const void *p) {
  for (rwd_alloc_t *a = rwd_allocs; a != NULL; a = a->next)
    if (a->ptr == (CUdeviceptr)p)
      a->scratch = 1;
}

cudaError_t cudaMalloc(void **p, size_t n) {
  cudaError_t r;
  resolve_cudaMalloc();
  r = real_cudaMalloc(p, n);
  if (r == cudaSuccess && n > 0)
    track(*p, n);
  return r;
}

cudaError_t cudaFree(void *p) {
  resolve_cudaFree();
  if (p != NULL)
    untrack(p);
  return real_cudaFree(p);
}

cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s) {
  cudaError_t r;
  resolve_cudaMallocAsync();
  r = real_cudaMallocAsync(p, n, s);
  if (r == cudaSuccess && n > 0)
    track(*p, n);
  return r;
}

cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
  resolve_cudaFreeAsync();
  if (p != NULL)
    untrack(p);
  return real_cudaFreeAsync(p, s);
}

/* ---- launches ---- */

cudaError_t rwd_native(const rwd_launch_t *l) {
  switch (l->how) {
  case RWD_VIA_KERNEL:
    resolve___cudaLaunchKernel();
    return real___cudaLaunchKernel(l->kernel, l->grid, l->block, l->args, l->shmem, l->stream);
  case RWD_VIA_EX:
    resolve_cudaLaunchKernelExC();
    return real_cudaLaunchKernelExC(l->config, l->func, l->args);
  default:
    resolve_cudaLaunchKernel();
    return real_cudaLaunchKernel(l->func, l->grid, l->block, l->args, l->shmem, l->stream);
  }
}

static rwd_kernel_t *kernel_of(const void *host_fun) {
  func_rec_t *f;
  for (f = funcs; f != NULL; f = f->next) {
    if (f->host_fun != host_fun)
      continue;
    if (f->k == NULL) {
      rwd_kernel_t *k;
      for (k = rwd_kernels; k != NULL; k = k->next)
        if (strcmp(k->name, f->name) == 0 && k->fb == f->fb)
          break;
      if (k == NULL) {
        k = calloc(1, sizeof(*k));
        if (k == NULL)
          return NULL;
        k->name = strdup(f->name);
        k->fb = f->fb;
        /* keep the report in first-seen order */
        rwd_kernel_t **pp = &rwd_kernels;
        while (*pp)
          pp = &(*pp)->next;
        *pp = k;
      }
      f->k = k;
    }
    return f->k;
  }
  return NULL;
}

static cudaError_t dispatch(const rwd_launch_t *l) {
  rwd_kernel_t *k;

  configure();
  k = rwd_cfg.mode == RWD_MODE_OFF ? NULL : kernel_of(l->func);
  if (k == NULL)
    return rwd_native(l);
  k->launches++;
  if (k->tested >= rwd_cfg.launches)
    return rwd_native(l);
  if (rwd_now_us() - rwd_cfg.start_us > rwd_cfg.budget_s * 1e6) {
    k->over_budget++;
    return rwd_native(l);
  }
  return rwd_test_launch(k, l);
}

cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                             cudaStream_t stream) {
  rwd_launch_t l = {RWD_VIA_LAUNCH, func, NULL, NULL, grid, block, shmem, stream, args};
  return dispatch(&l);
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args,
                               size_t shmem, cudaStream_t stream) {
  rwd_launch_t l = {RWD_VIA_KERNEL, NULL, kernel, NULL, grid, block, shmem, stream, args};
  kern_rec_t *kr;
  for (kr = kerns; kr != NULL; kr = kr->next)
    if (kr->kernel == kernel)
      l.func = kr->host_fun;
  return dispatch(&l);
}

cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t *config, const void *func, void **args) {
  rwd_launch_t l = {RWD_VIA_EX,
                    func,
                    NULL,
                    config,
                    config->gridDim,
                    config->blockDim,
                    config->dynamicSmemBytes,
                    config->stream,
                    args};
  return dispatch(&l);
}

/* ---- modules ---- */

static int load_ptx(const char *ptx, CUmodule *mod, double *ms, char *why, size_t why_len) {
  char log[8192] = "";
  CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *val[2] = {log, (void *)(uintptr_t)sizeof(log)};
  double t0 = rwd_now_us();
  CUresult r = cuModuleLoadDataEx(mod, ptx, 2, opt, val);

  *ms = (rwd_now_us() - t0) / 1e3;
  if (r != CUDA_SUCCESS) {
    const char *s = NULL;
    cuGetErrorName(r, &s);
    snprintf(why, why_len, "cuModuleLoadDataEx: %s: %.150s", s ? s : "?", log);
    *mod = NULL;
    return -1;
  }
  return 0;
}

void rwd_fatbin_load(rwd_fatbin_t *fb) {
  const void *data;
  size_t len, ptx_len = 0, out_len = 0;
  char *ptx = NULL, *out = NULL;
  unsigned arch = 0;
  rw_diag_t d = {0};
  CUdevice dev;
  int rc;

  if (fb->loaded)
    return;
  fb->loaded = 1;
  if (rwd_arch == 0 && cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
    int maj = 0, min = 0;
    cuDeviceGetAttribute(&maj, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    cuDeviceGetAttribute(&min, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    cuDeviceGetAttribute(&rwd_sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    rwd_arch = maj * 10 + min;
  }
  /* The path the guest library takes: wrapper -> fatbin bytes -> PTX. */
  if (rw_fatbin_image_size(fb->wrapper, &data, &len) < 0) {
    snprintf(fb->why, sizeof(fb->why), "fatbin wrapper unreadable");
    return;
  }
  rc = rw_fatbin_ptx(data, len, (unsigned)rwd_arch, &ptx, &ptx_len, &arch, &d);
  if (rc < 0 || ptx == NULL) {
    snprintf(fb->why, sizeof(fb->why), "%s", rc < 0 ? d.text : "no PTX: not transformable");
    return;
  }
  fb->ptx_len = ptx_len;
  if (rw_transform_ptx == NULL) {
    snprintf(fb->why, sizeof(fb->why), "variant unavailable: rw_transform_ptx not linked");
  } else {
    double t0 = rwd_now_us();
    rc = rw_transform_ptx(ptx, ptx_len, RW_XFORM_MASK_ALL, &out, &out_len, &fb->report);
    fb->transform_ms = (rwd_now_us() - t0) / 1e3;
    fb->entries = (unsigned)fb->report.n_entries;
    if (rc < 0) {
      snprintf(fb->why, sizeof(fb->why), "variant unavailable: transform failed (%d): %.150s", rc,
               fb->report.parse_diag.text);
      free(out);
      out = NULL;
    }
  }
  if (out != NULL) {
    if (load_ptx(out, &fb->mod, &fb->jit_ms, fb->why, sizeof(fb->why)) == 0)
      fb->have_xform = 1;
    free(out);
  }
  if (rwd_cfg.mode == RWD_MODE_BENCH || fb->mod == NULL) {
    CUmodule m = NULL;
    char why[256] = "";
    if (load_ptx(ptx, &m, &fb->jit_orig_ms, why, sizeof(why)) == 0) {
      if (fb->mod == NULL)
        fb->mod = m;
      else
        cuModuleUnload(m);
    } else if (fb->why[0] == 0) {
      snprintf(fb->why, sizeof(fb->why), "%s", why);
    }
  }
  free(ptx);
}

/* ---- offline self-test ---- */

/* Without a GPU (RW_DIFF_SELFTEST=1): walks every fatbin the program
 * registered, through the wrapper as the guest library will, extracts its
 * PTX, transforms it, checks that every kernel registered from it is an
 * entry of that PTX, and (when $PTXAS is set) assembles the transformed
 * module for the arch the PTX targets.  Returns the number of failures. */
int rwdiff_selftest(void) {
  rwd_fatbin_t *fb;
  int failures = 0, nfb = 0;
  const char *ptxas = getenv("PTXAS");

  configure();
  for (fb = rwd_fatbins; fb != NULL; fb = fb->next) {
    const void *data;
    size_t len, ptx_len = 0, out_len = 0;
    char *ptx = NULL, *out = NULL;
    unsigned arch = 0, nent = 0, nptx = 0, ok[2] = {0, 0}, nfunc = 0, missing = 0;
    rw_fatbin_t *it = NULL;
    rw_fatbin_entry_t e;
    rw_xform_report_t rep;
    rw_diag_t d = {0};
    func_rec_t *f;

    nfb++;
    memset(&rep, 0, sizeof(rep));
    if (rw_fatbin_image_size(fb->wrapper, &data, &len) < 0 ||
        rw_fatbin_open(data, len, &it, &d) < 0) {
      printf("selftest: fatbin %d: unreadable: %s\n", nfb, d.text);
      failures++;
      continue;
    }
    while (rw_fatbin_next(it, &e, &d) == 1) {
      nent++;
      nptx += e.kind == RW_FATBIN_KIND_PTX;
    }
    rw_fatbin_free(it);
    for (f = funcs; f != NULL; f = f->next)
      nfunc += f->fb == fb;
    if (rw_fatbin_ptx(data, len, 0, &ptx, &ptx_len, &arch, &d) < 0) {
      printf("selftest: fatbin %d: %s\n", nfb, d.text);
      failures++;
      continue;
    }
    if (ptx == NULL) {
      printf("selftest: fatbin %d: %zu bytes, %u entries, %u kernels: no PTX: not transformable\n",
             nfb, len, nent, nfunc);
      failures += nfunc > 0;
      continue;
    }
    if (rw_transform_ptx == NULL) {
      printf("selftest: fatbin %d: variant unavailable: rw_transform_ptx not linked\n", nfb);
      free(ptx);
      continue;
    }
    if (rw_transform_ptx(ptx, ptx_len, RW_XFORM_MASK_ALL, &out, &out_len, &rep) < 0) {
      printf("selftest: fatbin %d: transform failed: %s\n", nfb, rep.parse_diag.text);
      failures++;
      free(ptx);
      continue;
    }
    for (size_t i = 0; i < rep.n_entries; i++)
      for (int kind = 0; kind < 2; kind++) {
        if (rep.entries[i].status[kind] == 0)
          ok[kind]++;
        else
          printf("selftest:   refused %s %s: %s\n", kind ? "ptb" : "slice", rep.entries[i].name,
                 rep.entries[i].reason[kind]);
      }
    for (f = funcs; f != NULL; f = f->next) {
      size_t i;
      if (f->fb != fb)
        continue;
      for (i = 0; i < rep.n_entries; i++)
        if (rep.entries[i].name && strcmp(rep.entries[i].name, f->name) == 0)
          break;
      if (i == rep.n_entries) {
        printf("selftest:   registered kernel %s is not an entry of the PTX\n", f->name);
        missing++;
      }
    }
    failures += missing > 0;
    printf("selftest: fatbin %d: %zu bytes, %u entries (%u PTX), PTX sm_%u %zu bytes, %zu kernels "
           "(%u registered, %u missing), slice %u, ptb %u\n",
           nfb, len, nent, nptx, arch, ptx_len, rep.n_entries, nfunc, missing, ok[0], ok[1]);
    if (ptxas && *ptxas) {
      char path[] = "/tmp/rw-diff-selftest-XXXXXX", cmd[600];
      int fd = mkstemp(path);
      if (fd >= 0 && write(fd, out, out_len) == (ssize_t)out_len) {
        snprintf(cmd, sizeof(cmd), "%s -arch=sm_%u%s %s -o /dev/null", ptxas, arch,
                 strstr(ptx, ".target sm_90a") ? "a" : "", path);
        if (system(cmd) != 0) {
          printf("selftest:   ptxas failed on the transformed module\n");
          failures++;
        } else {
          printf("selftest:   transformed module assembles with ptxas\n");
        }
      }
      if (fd >= 0) {
        close(fd);
        unlink(path);
      }
    }
    if (rw_xform_report_free)
      rw_xform_report_free(&rep);
    free(out);
    free(ptx);
  }
  printf("selftest: %d fatbins, %d failures\n", nfb, failures);
  return failures;
}

/* ---- report ---- */

static const char *short_name(const char *n, char *buf, size_t len) {
  size_t l = strlen(n);
  if (l < len)
    return n;
  snprintf(buf, len, "%.*s...%s", (int)(len / 2 - 4), n, n + l - (len / 2 - 4));
  return buf;
}

int rwdiff_finish(int sanity_failures) {
  rwd_kernel_t *k;
  unsigned nk = 0, pass = 0, fail = 0, untested = 0, vok = 0, vbad = 0, pre = 0, gave = 0;
  unsigned unavail = 0;
  unsigned over = 0, sdiff = 0;
  rwd_fatbin_t *fb;

  configure();
  for (fb = rwd_fatbins; fb != NULL; fb = fb->next)
    if (fb->loaded && fb->ptx_len > 0)
      printf("module: %zu bytes PTX, %u entries, transform %.1f ms (%.2f ms/kernel), JIT %.1f ms "
             "(%.1f ms/kernel; untransformed %.1f ms)%s%s\n",
             fb->ptx_len, fb->entries, fb->transform_ms,
             fb->entries ? fb->transform_ms / fb->entries : 0.0, fb->jit_ms,
             fb->entries ? fb->jit_ms / fb->entries : 0.0, fb->jit_orig_ms, fb->why[0] ? "; " : "",
             fb->why);
  for (k = rwd_kernels; k != NULL; k = k->next) {
    char buf[121];
    const char *verdict;
    nk++;
    vok += k->variants_ok;
    vbad += k->variants_bad;
    pre += k->preemptions;
    gave += k->given_up;
    over += k->over_budget;
    sdiff += k->scratch_diffs;
    if (k->tested == 0) {
      verdict = "UNTESTED";
      untested++;
    } else if (k->variants_bad > 0) {
      verdict = "FAIL";
      fail++;
    } else {
      verdict = "PASS";
      pass++;
    }
    if (k->unavailable[0][0] || k->unavailable[1][0])
      unavail++;
    if (rwd_cfg.mode == RWD_MODE_BENCH)
      continue;
    printf("%-8s %s launches=%u tested=%u variants_ok=%u bad=%u preempted=%u given_up=%u "
           "nondet=%u scratch_diffs=%u%s%s%s%s%s%s\n",
           verdict, short_name(k->name, buf, sizeof(buf)), k->launches, k->tested, k->variants_ok,
           k->variants_bad, k->preemptions, k->given_up, k->nondet, k->scratch_diffs,
           k->unavailable[0][0] ? " slice: " : "", k->unavailable[0],
           k->unavailable[1][0] ? " ptb: " : "", k->unavailable[1],
           k->first_bad[0] ? " first mismatch: " : "", k->first_bad);
  }
  if (rwd_cfg.mode == RWD_MODE_BENCH)
    return 0;
  if (over > 0)
    printf("BUDGET   %u launches ran natively only: RW_DIFF_BUDGET=%u s was spent (%.0f s so far); "
           "run with a filter (argv[1]) or a larger budget outside make check-gpu\n",
           over, rwd_cfg.budget_s, (rwd_now_us() - rwd_cfg.start_us) / 1e6);
  printf("TOTAL kernels=%u pass=%u fail=%u untested=%u with-unavailable-variants=%u "
         "variant-runs-identical=%u variant-runs-different=%u scratch-only-differences=%u "
         "preemptions=%u blocks-given-up=%u sanity-failures=%d over-budget-launches=%u "
         "elapsed_s=%.1f seed=%llu\n",
         nk, pass, fail, untested, unavail, vok, vbad, sdiff, pre, gave, sanity_failures, over,
         (rwd_now_us() - rwd_cfg.start_us) / 1e6, (unsigned long long)rwd_cfg.seed);
  if (fail > 0 || sanity_failures > 0)
    return 1;
  if (rwd_cfg.require_variants && unavail > 0)
    return 1;
  return 0;
}
