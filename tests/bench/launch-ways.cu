/* launch-ways: what a kernel launch costs the host, launched each way tallyd or an
 * application may launch it, in one plain process (no Tally).
 *
 * forward-bench's 1000-kernel chain is bound by the thread that launches: a chain_step
 * kernel runs in far less time than a launch call takes, so the chain's time is about
 * 1000 launch calls.  Through tallyd those calls are made by the tenant's worker thread,
 * with cuLaunchKernel and the arguments in one buffer (CU_LAUNCH_PARAM_BUFFER_POINTER),
 * on a stream of the tenant class's priority, while other tallyd threads poll, and after
 * a hand-off from the thread that read the request.  This program times the same chain
 * with each of those differences alone, so that a gap between tallyd's chain and the
 * native one can be put on one of them, or on the host's own variation (each variant runs
 * twice, in two passes, to show it).
 *
 * Variants (each: 30 chains of 1000 dependent launches after one warm-up chain, median):
 *   <<<>>>                    cudart's launch, the application's way
 *   cuLaunchKernel params     the driver API with a kernelParams array
 *   cuLaunchKernel extra      the driver API with one argument buffer (tallyd's way)
 *   cuLaunchKernelEx extra    the same through a launch config (tallyd's way with attributes)
 *   ... on streams of default, highest and lowest priority
 *   + N spinners              while N other threads spin (a sched_yield every 1024 turns,
 *                             as tallyd's polling threads do), N = 1, 2, 4, ... up to ARG
 *   handoff thread            the launches made by a second thread that polls a counter
 *                             the first one raises (the loop thread -> worker hand-off)
 *   handoff, poster asleep    the same, but the first thread sleeps on a semaphore until
 *                             the second has made them all instead of spinning: if this
 *                             row is as fast as the direct one, a hand-off costs through
 *                             the second busy core, not through the thread that launches
 *   + after: ...              what the launching thread does between two launches, as a
 *                             daemon's bookkeeping would: N locked atomic additions on a
 *                             line of its own, the same on a line another thread keeps
 *                             reading, one full fence, a read-lock and unlock of a
 *                             pthread rwlock, or about as much plain work (no locked
 *                             instruction) as the locked rows take
 * Prints per variant: chain_ms (1000 launches then a stream sync, median) and enqueue_us
 * (the launch calls alone per launch, median; for the hand-off, until the second thread
 * made them all); for the "after" rows also alone_us, the in-between work's own time per
 * launch with no launch (once, after the chains).
 *
 * usage: launch-ways [MAX_SPINNERS]   (default 4; needs a GPU)
 * LAUNCH_WAYS_ONLY=a,b runs only the variants whose names contain a or b.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "launch-ways: %s: %s\n", #x, cudaGetErrorString(e_));                        \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)
#define CD(x)                                                                                      \
  do {                                                                                             \
    CUresult e_ = (x);                                                                             \
    if (e_ != CUDA_SUCCESS) {                                                                      \
      fprintf(stderr, "launch-ways: %s: error %d\n", #x, (int)e_);                                 \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

enum { CHAIN_LEN = 1000, REPS = 30 };
enum { VIA_CUDART, VIA_PARAMS, VIA_EXTRA, VIA_EX_EXTRA };

/* forward-bench's chain step: each launch depends on the previous one's result. */
__global__ void chain_step(uint32_t *p) {
  p[threadIdx.x] = p[threadIdx.x] * 3u + 1u + threadIdx.x;
}

static CUfunction step_fn;
static uint32_t *dbuf;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return v[n / 2];
}

static void launch_one(CUstream st, int via) {
  uint64_t arg = (uint64_t)(uintptr_t)dbuf;
  size_t argbytes = sizeof(arg);
  void *params[] = {&dbuf};
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &arg, CU_LAUNCH_PARAM_BUFFER_SIZE, &argbytes,
                   CU_LAUNCH_PARAM_END};
  CUlaunchConfig c;

  switch (via) {
  case VIA_CUDART:
    chain_step<<<1, 32, 0, (cudaStream_t)st>>>(dbuf);
    return;
  case VIA_PARAMS:
    CD(cuLaunchKernel(step_fn, 1, 1, 1, 32, 1, 1, 0, st, params, NULL));
    return;
  case VIA_EXTRA:
    CD(cuLaunchKernel(step_fn, 1, 1, 1, 32, 1, 1, 0, st, NULL, extra));
    return;
  default:
    memset(&c, 0, sizeof(c));
    c.gridDimX = c.gridDimY = c.gridDimZ = 1;
    c.blockDimX = 32, c.blockDimY = c.blockDimZ = 1;
    c.hStream = st;
    CD(cuLaunchKernelEx(&c, step_fn, NULL, extra));
  }
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* ---------------------------------------------------------------- spinners */

static int spin_stop;

static void *spinner(void *arg) {
  unsigned long turns = 0;
  (void)arg;
  while (!__atomic_load_n(&spin_stop, __ATOMIC_RELAXED))
    if ((++turns & 1023) == 0)
      sched_yield();
  return NULL;
}

/* ---------------------------------------------------------------- between launches */

enum { AFTER_NONE, AFTER_LOCKED, AFTER_SHARED, AFTER_FENCE, AFTER_RWLOCK, AFTER_PLAIN, AFTER_N };
static const char *after_name[] = {"", "4 locked adds", "4 locked adds, line read elsewhere",
                                   "1 full fence", "rwlock read-lock + unlock",
                                   "plain work, 200 loop steps"};
/* Each counter on a line of its own; `shared` is the one a reader thread polls. */
static struct {
  alignas(64) unsigned long own;
  alignas(64) unsigned long shared;
} ctr;
static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static int reader_stop;

static void *reader(void *arg) {
  unsigned long sum = 0, turns = 0;
  (void)arg;
  while (!__atomic_load_n(&reader_stop, __ATOMIC_RELAXED)) {
    sum += __atomic_load_n(&ctr.shared, __ATOMIC_RELAXED);
    if ((++turns & 1023) == 0)
      sched_yield();
  }
  return (void *)(uintptr_t)(sum & 1);
}

static void after_launch(int after) {
  volatile unsigned long x = 1;
  switch (after) {
  case AFTER_LOCKED:
    for (int i = 0; i < 4; i++)
      __atomic_fetch_add(&ctr.own, 1, __ATOMIC_SEQ_CST);
    break;
  case AFTER_SHARED:
    for (int i = 0; i < 4; i++)
      __atomic_fetch_add(&ctr.shared, 1, __ATOMIC_SEQ_CST);
    break;
  case AFTER_FENCE:
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    break;
  case AFTER_RWLOCK:
    if (pthread_rwlock_rdlock(&rw) == 0)
      pthread_rwlock_unlock(&rw);
    break;
  case AFTER_PLAIN:
    for (int i = 0; i < 200; i++)
      x = x * 6364136223846793005ul + 1442695040888963407ul;
    break;
  default:
    break;
  }
}

/* ---------------------------------------------------------------- hand-off */

/* The first thread raises `posted` once per launch; the launcher makes that many
 * launches and publishes how many it made in `made`. */
static long posted, made, wanted;
static int launcher_stop;
static int launcher_wakes; /* the poster sleeps: post all_made once `made` reaches `wanted` */
static sem_t all_made;
static CUstream launcher_stream;
static int launcher_via;

static void *launcher(void *arg) {
  CUcontext ctx;
  long seen = 0;
  unsigned turns = 0;
  (void)arg;
  CD(cuDevicePrimaryCtxRetain(&ctx, 0));
  CD(cuCtxSetCurrent(ctx));
  while (!__atomic_load_n(&launcher_stop, __ATOMIC_ACQUIRE)) {
    long p = __atomic_load_n(&posted, __ATOMIC_ACQUIRE);
    if (p == seen) {
      if ((++turns & 1023) == 0)
        sched_yield();
      cpu_relax();
      continue;
    }
    for (; seen < p; seen++)
      launch_one(launcher_stream, launcher_via);
    __atomic_store_n(&made, seen, __ATOMIC_RELEASE);
    if (launcher_wakes && seen == __atomic_load_n(&wanted, __ATOMIC_ACQUIRE) &&
        sem_post(&all_made) != 0) {
      fprintf(stderr, "launch-ways: sem_post failed\n");
      exit(1);
    }
  }
  CD(cuDevicePrimaryCtxRelease(0));
  return NULL;
}

/* ---------------------------------------------------------------- one variant */

enum { HANDOFF_NONE, HANDOFF_SPIN, HANDOFF_SLEEP };

/* LAUNCH_WAYS_ONLY: a comma-separated list of parts of variant names, or all. */
static bool wanted_variant(const char *name) {
  const char *only = getenv("LAUNCH_WAYS_ONLY");
  char buf[256], *save = NULL;
  if (!only || !*only)
    return true;
  snprintf(buf, sizeof(buf), "%s", only);
  for (char *w = strtok_r(buf, ",", &save); w; w = strtok_r(NULL, ",", &save))
    if (strstr(name, w))
      return true;
  return false;
}

static void run_after(const char *name, CUstream st, int via, int handoff, int after) {
  double chain[REPS], enq[REPS];
  pthread_t th;
  long base = 0;

  if (!wanted_variant(name))
    return;
  if (handoff) {
    launcher_stream = st, launcher_via = via;
    launcher_wakes = handoff == HANDOFF_SLEEP; /* a spinning poster leaves no posts behind */
    __atomic_store_n(&posted, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&made, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&launcher_stop, 0, __ATOMIC_SEQ_CST);
    if (pthread_create(&th, NULL, launcher, NULL) != 0) {
      fprintf(stderr, "launch-ways: pthread_create failed\n");
      exit(1);
    }
  }
  for (int r = -1; r < REPS; r++) { /* one untimed warm-up chain */
    double t0, t1;
    CK(cudaMemsetAsync(dbuf, 0, 32 * sizeof(uint32_t), (cudaStream_t)st));
    CK(cudaStreamSynchronize((cudaStream_t)st));
    t0 = now_ns();
    if (!handoff) {
      for (int i = 0; i < CHAIN_LEN; i++) {
        launch_one(st, via);
        after_launch(after);
      }
    } else {
      __atomic_store_n(&wanted, base + CHAIN_LEN, __ATOMIC_RELEASE);
      for (int i = 0; i < CHAIN_LEN; i++)
        __atomic_fetch_add(&posted, 1, __ATOMIC_RELEASE);
      base += CHAIN_LEN;
      if (handoff == HANDOFF_SLEEP) {
        while (sem_wait(&all_made) != 0) /* EINTR */
          ;
      } else {
        while (__atomic_load_n(&made, __ATOMIC_ACQUIRE) < base)
          cpu_relax();
      }
    }
    t1 = now_ns();
    CK(cudaStreamSynchronize((cudaStream_t)st));
    if (r >= 0) {
      chain[r] = now_ns() - t0;
      enq[r] = (t1 - t0) / CHAIN_LEN;
    }
  }
  if (handoff) {
    __atomic_store_n(&launcher_stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
  }
  CK(cudaGetLastError());
  printf("%-56s chain_ms %.3f  enqueue_us %.3f", name, median(chain, REPS) / 1e6,
         median(enq, REPS) / 1e3);
  if (after != AFTER_NONE) { /* the in-between work alone, per launch */
    double t0 = now_ns();
    for (int i = 0; i < CHAIN_LEN; i++)
      after_launch(after);
    printf("  alone_us %.3f", (now_ns() - t0) / CHAIN_LEN / 1e3);
  }
  printf("\n");
  fflush(stdout);
}

static void run(const char *name, CUstream st, int via, int handoff) {
  run_after(name, st, via, handoff, AFTER_NONE);
}

int main(int argc, char **argv) {
  static const char *via_name[] = {"<<<>>>", "cuLaunchKernel params", "cuLaunchKernel extra",
                                   "cuLaunchKernelEx extra"};
  int max_spin = argc > 1 ? atoi(argv[1]) : 4;
  cudaStream_t s_def, s_hi, s_lo;
  int lo, hi;
  char name[96];

  if (argc > 2 || max_spin < 0 || max_spin > 64) {
    fprintf(stderr, "usage: launch-ways [MAX_SPINNERS (0..64, default 4)]\n");
    return 2;
  }
  if (sem_init(&all_made, 0, 0) != 0) {
    fprintf(stderr, "launch-ways: sem_init failed\n");
    return 1;
  }
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  CK(cudaMalloc(&dbuf, 32 * sizeof(uint32_t)));
  CK(cudaGetFuncBySymbol((cudaFunction_t *)&step_fn, (const void *)chain_step));
  CK(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  CK(cudaStreamCreateWithFlags(&s_def, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithPriority(&s_hi, cudaStreamNonBlocking, hi));
  CK(cudaStreamCreateWithPriority(&s_lo, cudaStreamNonBlocking, lo));
  printf("stream priorities: lowest %d, highest %d\n", lo, hi);
  for (int pass = 0; pass < 2; pass++) {
    printf("-- pass %d\n", pass);
    for (int v = VIA_CUDART; v <= VIA_EX_EXTRA; v++) {
      snprintf(name, sizeof(name), "%s default-prio", via_name[v]);
      run(name, (CUstream)s_def, v, HANDOFF_NONE);
    }
    for (int v = VIA_CUDART; v <= VIA_EX_EXTRA; v++) {
      snprintf(name, sizeof(name), "%s high-prio", via_name[v]);
      run(name, (CUstream)s_hi, v, HANDOFF_NONE);
    }
    run("cuLaunchKernel extra low-prio", (CUstream)s_lo, VIA_EXTRA, HANDOFF_NONE);
    for (int n = 1; n <= max_spin; n *= 2) {
      pthread_t t[64];
      int started = 0;
      __atomic_store_n(&spin_stop, 0, __ATOMIC_SEQ_CST);
      for (; started < n; started++)
        if (pthread_create(&t[started], NULL, spinner, NULL) != 0)
          break;
      snprintf(name, sizeof(name), "extra high-prio + %d spinners", started);
      run(name, (CUstream)s_hi, VIA_EXTRA, HANDOFF_NONE);
      snprintf(name, sizeof(name), "<<<>>> default + %d spinners", started);
      run(name, (CUstream)s_def, VIA_CUDART, HANDOFF_NONE);
      __atomic_store_n(&spin_stop, 1, __ATOMIC_SEQ_CST);
      for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    }
    for (int a = AFTER_NONE + 1; a < AFTER_N; a++) {
      pthread_t rd;
      bool rd_on = false;
      if (a == AFTER_SHARED) {
        __atomic_store_n(&reader_stop, 0, __ATOMIC_SEQ_CST);
        rd_on = pthread_create(&rd, NULL, reader, NULL) == 0;
      }
      snprintf(name, sizeof(name), "extra high-prio + after: %s", after_name[a]);
      run_after(name, (CUstream)s_hi, VIA_EXTRA, HANDOFF_NONE, a);
      if (rd_on) {
        __atomic_store_n(&reader_stop, 1, __ATOMIC_SEQ_CST);
        pthread_join(rd, NULL);
      }
    }
    run("handoff thread, extra high-prio", (CUstream)s_hi, VIA_EXTRA, HANDOFF_SPIN);
    run("handoff thread, params high-prio", (CUstream)s_hi, VIA_PARAMS, HANDOFF_SPIN);
    run("handoff thread, <<<>>> default", (CUstream)s_def, VIA_CUDART, HANDOFF_SPIN);
    run("handoff thread, poster asleep, extra high-prio", (CUstream)s_hi, VIA_EXTRA,
        HANDOFF_SLEEP);
  }
  CK(cudaFree(dbuf));
  return 0;
}
