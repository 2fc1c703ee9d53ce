/* rw-diff.h: shared state of the GPU differential harness (tests/gpu/rw-diff-*.c).
 *
 * How it works.  A harness program (tests/gpu/rw-diff-main.cu linked with
 * one or more tests/corpus/ sources) runs workloads exactly as an application
 * would: <<<>>> launches of our stress kernels, CUB device algorithms,
 * Thrust.  It is linked with -cudart shared and with this hook, which
 * defines cudaLaunchKernel, __cudaLaunchKernel, cudaLaunchKernelExC,
 * cudaMalloc/cudaFree(+Async) and the __cudaRegister* calls itself, so the
 * program's own calls land here first (dlsym(RTLD_NEXT) reaches cudart).
 * For each launch of a kernel (the first RW_DIFF_LAUNCHES launches of each),
 * the hook:
 *   1. syncs, snapshots every live cudaMalloc allocation ("before");
 *   2. runs the native launch, snapshots the result ("ref"), and runs it a
 *      second time to mask bytes that differ between two native runs
 *      (counted and reported; zero for every deterministic kernel);
 *   3. for each variant -- the original entry JIT-compiled from the PTX
 *      that cudart registered (extracted with rw_fatbin_*), NAME__tally_slice
 *      at several slice sizes, NAME__tally_ptb at several worker counts with
 *      preemption injected at random moments and resumed by relaunch --
 *      restores "before", runs it with cuLaunchKernel, and compares every
 *      allocation byte for byte with "ref".  Allocations the program marked
 *      as scratch (rwdiff_mark_scratch: CUB's d_temp_storage, whose
 *      decoupled look-back tile status holds partial aggregates that depend
 *      on the order blocks ran in) are compared too, but a difference there
 *      is reported on a SCRATCH line, not counted as a failure;
 *   4. restores "ref", so the program continues as if it ran natively once.
 * A watchdog (SIGALRM) turns a hang into a failure naming kernel and variant.
 * In bench mode (RW_DIFF_MODE=bench) step 3 times variants instead and
 * measures preemption latency; see rw-diff-variants.c.
 *
 * Threading: harness programs are single-threaded; every global below is
 * touched only from the program's main thread (the SIGALRM handler reads
 * rwd_watch_what, a fixed buffer, and only to print it).
 */
#ifndef TALLY_RW_DIFF_H
#define TALLY_RW_DIFF_H

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "rewrite/rw.h"

/* One fatbin cudart registered (one per translation unit). */
typedef struct rwd_fatbin {
  const void *wrapper;      /* __fatBinC_Wrapper_t the program passed */
  void **handle;            /* cudart's handle for it */
  int loaded;               /* 0 not yet tried, 1 tried (mod may still be NULL) */
  CUmodule mod;             /* transformed module (originals + variants), or originals only */
  int have_xform;           /* mod holds __tally_ variants */
  char why[256];            /* why variants are unavailable, when they are */
  rw_xform_report_t report; /* per-entry outcome of the transformation */
  size_t ptx_len;           /* bytes of the original PTX */
  unsigned entries;         /* .entry count in the report */
  double transform_ms;      /* rw_transform_ptx time */
  double jit_ms;            /* cuModuleLoadData time of mod */
  double jit_orig_ms;       /* bench mode: JIT time of the untransformed PTX */
  struct rwd_fatbin *next;
} rwd_fatbin_t;

/* A launch as the program made it, enough to replay it natively. */
typedef struct rwd_launch {
  int how;                          /* RWD_VIA_* */
  const void *func;                 /* host stub */
  cudaKernel_t kernel;              /* RWD_VIA_KERNEL */
  const cudaLaunchConfig_t *config; /* RWD_VIA_EX */
  dim3 grid, block;
  size_t shmem;
  cudaStream_t stream;
  void **args;
} rwd_launch_t;

enum { RWD_VIA_LAUNCH = 0, RWD_VIA_KERNEL = 1, RWD_VIA_EX = 2 };

/* Per kernel (by name) results, printed at exit. */
typedef struct rwd_kernel {
  char *name;
  rwd_fatbin_t *fb;
  unsigned launches;        /* native launches seen */
  unsigned tested;          /* launches that went through the comparison */
  unsigned variants_ok;     /* variant runs identical to native */
  unsigned variants_bad;    /* variant runs that differed */
  unsigned preemptions;     /* PTB runs stopped by the flag and resumed */
  unsigned given_up;        /* blocks of the FLUSH form that gave up and ran again */
  unsigned nondet;          /* launches whose two native runs differed */
  unsigned scratch_diffs;   /* variant runs that differed only in scratch allocations */
  unsigned over_budget;     /* launches run natively only because RW_DIFF_BUDGET ran out */
  char unavailable[2][300]; /* [kind] why slice/ptb could not run ("" if it could) */
  char first_bad[512];      /* the first mismatch, for the report */
  /* bench mode */
  int benched;
  double native_us, origptx_us, slice_us, ptb_us, block_us;
  unsigned total_blocks, wave_blocks;
  double *preempt_us; /* latency samples */
  unsigned npreempt;
  struct rwd_kernel *next;
} rwd_kernel_t;

/* Live device allocation made through cudaMalloc/cudaMallocAsync. */
typedef struct rwd_alloc {
  CUdeviceptr ptr;
  size_t size;
  CUdeviceptr before, ref;                   /* device snapshots, allocated on first use */
  unsigned char *host_ref, *host_out, *mask; /* host copies; mask: 1 = nondeterministic byte */
  int scratch; /* rwdiff_mark_scratch (CUB temp storage): differences reported, not failed */
  struct rwd_alloc *next;
} rwd_alloc_t;

/* Global configuration, read once from the environment. */
typedef struct rwd_config {
  int mode;             /* RWD_MODE_* */
  unsigned launches;    /* RW_DIFF_LAUNCHES: launches tested per kernel (default 2) */
  unsigned timeout_s;   /* RW_DIFF_TIMEOUT: watchdog per variant run (default 60) */
  unsigned budget_s;    /* RW_DIFF_BUDGET: no new tested launch after this (default 150) */
  double start_us;      /* when the configuration was read (program start) */
  unsigned bench_reps;  /* RW_BENCH_REPS: timed repetitions (default 21) */
  int require_variants; /* RW_DIFF_REQUIRE_VARIANTS=1: unavailable variants fail */
  uint64_t seed;        /* RW_DIFF_SEED or clock: preemption timing */
} rwd_config_t;

enum { RWD_MODE_DIFF = 0, RWD_MODE_BENCH = 1, RWD_MODE_OFF = 2 };

extern rwd_config_t rwd_cfg;
extern rwd_alloc_t *rwd_allocs;
extern rwd_kernel_t *rwd_kernels;
extern rwd_fatbin_t *rwd_fatbins;
extern int rwd_sm_count, rwd_arch;

/* Real cudart entry points (rw-diff-hook.c). */
cudaError_t rwd_native(const rwd_launch_t *l);

/* Runs the comparison (or the benchmark) for one launch; returns what the
 * native launch returned. (rw-diff-variants.c) */
cudaError_t rwd_test_launch(rwd_kernel_t *k, const rwd_launch_t *l);

/* Loads fb's module on first use. (rw-diff-hook.c) */
void rwd_fatbin_load(rwd_fatbin_t *fb);

/* Watchdog: arm before a GPU wait with a description; disarm after. */
void rwd_watch(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rwd_unwatch(void);

/* Monotonic time in microseconds. */
double rwd_now_us(void);

/* Prints "driver call failed" once with its name and result. */
int rwd_cu(CUresult r, const char *what);

/* Program entry points (called from rw-diff-main.cu and, for
 * rwdiff_mark_scratch, from tests/corpus/cub-common.cuh). */
void rwdiff_mark_scratch(const void *p);
int rwdiff_finish(int sanity_failures);
int rwdiff_selftest(void);
uint64_t rwdiff_seed(void);

#endif /* TALLY_RW_DIFF_H */
