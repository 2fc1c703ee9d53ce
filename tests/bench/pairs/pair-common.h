/* pair-common.h: shared bits of the CUDA C pair (pair-lc.cu, pair-be.cu).
 *
 * Host clock: CLOCK_MONOTONIC in ns, the clock every workload of the pair
 * benchmark writes, so the LC's and the BE's CSVs share one time axis.
 * Device: a block spins on %globaltimer (ns, independent of the SM clock)
 * for the asked time, so a kernel's length does not depend on clock speed.
 * The kernels live in the .cu files (their own names, so a trace tells them
 * apart); this header holds the device timer read, the option parser and
 * what the LC programs (pair-lc.cu, gemm-lc.cu) and the BE programs
 * (pair-be.cu, gemm-be.cu) share: arrivals, the serving loop, the
 * launch-and-observe loop, the stop signals, the ready file and the CSVs
 * (the GEMM pair's cuBLAS part: gemm-common.h).
 */
#ifndef TALLY_PAIR_COMMON_H
#define TALLY_PAIR_COMMON_H

#include <cuda_runtime.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vector>
#include <unistd.h>

#define PAIR_CHECK(call)                                                                      \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s: %s failed: %s\n", pair_prog, #call, cudaGetErrorString(e_));       \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

static const char *pair_prog = "pair";

static inline uint64_t pair_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Sleeps (no spinning: the LC must not take CPU from the BE's host thread)
 * until the monotonic clock reads t_ns. */
static inline void pair_sleep_until(uint64_t t_ns) {
  struct timespec ts;
  ts.tv_sec = (time_t)(t_ns / 1000000000ull);
  ts.tv_nsec = (long)(t_ns % 1000000000ull);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* The LC's start handshake with the harness: after its warm-up the LC
 * creates `ready` (when given), then sleeps until the file `go` exists (when
 * given; polled every millisecond), and only then starts its arrival clock.
 * The harness creates `go` once both tenants of a step are ready, so their
 * start-ups overlap but nothing is measured before both are warm.  Exits 1
 * when `ready` cannot be created. */
static inline void pair_ready_then_go(const char *ready, const char *go) {
  if (ready) {
    FILE *r = fopen(ready, "w");
    if (!r || fclose(r) != 0) {
      fprintf(stderr, "%s: %s: cannot create\n", pair_prog, ready);
      exit(1);
    }
  }
  while (go && access(go, F_OK) != 0)
    pair_sleep_until(pair_now_ns() + 1000000);
}

static inline __device__ uint64_t pair_gtimer(void) {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/* Blocks that fit on the whole GPU at once for kernel fn with `threads`
 * threads per block: SMs x occupancy. */
template <typename F> static int pair_full_grid(F fn, int threads) {
  int dev, sms, per_sm = 0;
  PAIR_CHECK(cudaGetDevice(&dev));
  PAIR_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  PAIR_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, 0));
  if (per_sm < 1)
    per_sm = 1;
  return sms * per_sm;
}

/* Parses a non-negative number option or exits with usage status 2. */
static inline double pair_num(const char *opt, const char *s) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || v < 0) {
    fprintf(stderr, "%s: %s wants a non-negative number, not '%s'\n", pair_prog, opt, s);
    exit(2);
  }
  return v;
}

/* One option of a pair program: `--name VALUE`, stored as a string, a
 * non-negative number or a non-negative int (exactly one target set). */
struct pair_opt {
  const char *name;
  const char **str;
  double *num;
  int *inum;
};

static inline void pair_usage(const char *usage) {
  fputs(usage, stderr);
  exit(2);
}

/* Parses argv as `--name VALUE` pairs against opts (ended by a null name);
 * an unknown option, a missing value or a bad number: usage, exit 2. */
static inline void pair_parse(int argc, char **argv, const pair_opt *opts, const char *usage) {
  for (int i = 1; i < argc; i += 2) {
    const pair_opt *o = opts;
    while (o->name && strcmp(o->name, argv[i]) != 0)
      o++;
    if (!o->name || i + 1 >= argc)
      pair_usage(usage);
    const char *v = argv[i + 1];
    if (o->str)
      *o->str = v;
    else if (o->num)
      *o->num = pair_num(o->name, v);
    else
      *o->inum = (int)pair_num(o->name, v);
  }
}

/* ---- the latency-critical programs ---- */

/* The arrival offsets of path (ns from the start, one per line); exits 1
 * when it cannot be read or holds something else. */
static inline std::vector<uint64_t> pair_read_offsets(const char *path) {
  std::vector<uint64_t> v;
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "%s: %s: %s\n", pair_prog, path, strerror(errno));
    exit(1);
  }
  unsigned long long x;
  int rc;
  while ((rc = fscanf(f, "%llu", &x)) == 1)
    v.push_back(x);
  if (rc != EOF) {
    fprintf(stderr, "%s: %s: offset %zu is not a number of ns\n", pair_prog, path, v.size() + 1);
    exit(1);
  }
  fclose(f);
  return v;
}

/* What an LC program served: request i was due at arr[i], started at st[i]
 * and ended at en[i] (CLOCK_MONOTONIC ns). */
struct pair_served {
  std::vector<uint64_t> arr, st, en;
};

/* Serves one request (request()) per offset, due at t0 + off[i] with t0
 * 1 ms from now: one server, FIFO, sleeping between requests, until the
 * offsets run out or deadline_s (0: none) has passed since t0. */
template <typename F>
static pair_served pair_serve(const std::vector<uint64_t> &off, double deadline_s, F request) {
  pair_served r;
  r.arr.reserve(off.size());
  r.st.reserve(off.size());
  r.en.reserve(off.size());
  uint64_t t0 = pair_now_ns() + 1000000; /* 1 ms to settle */
  uint64_t stop = deadline_s > 0 ? t0 + (uint64_t)(deadline_s * 1e9) : UINT64_MAX;
  for (size_t i = 0; i < off.size(); i++) {
    uint64_t due = t0 + off[i];
    if (due >= stop || pair_now_ns() >= stop)
      break;
    pair_sleep_until(due);
    uint64_t a = pair_now_ns();
    request();
    r.arr.push_back(due);
    r.st.push_back(a);
    r.en.push_back(pair_now_ns());
  }
  return r;
}

/* Writes the LC CSV `req,arrival_ns,start_ns,end_ns` to path and returns
 * the mean execution time (end - start) in us; exits 1 when it cannot. */
static inline double pair_write_lc(const char *path, const pair_served &r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "%s: %s: %s\n", pair_prog, path, strerror(errno));
    exit(1);
  }
  fprintf(f, "req,arrival_ns,start_ns,end_ns\n");
  double sum = 0;
  for (size_t i = 0; i < r.arr.size(); i++) {
    fprintf(f, "%zu,%llu,%llu,%llu\n", i, (unsigned long long)r.arr[i],
            (unsigned long long)r.st[i], (unsigned long long)r.en[i]);
    sum += (double)(r.en[i] - r.st[i]);
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "%s: %s: write error\n", pair_prog, path);
    exit(1);
  }
  return r.arr.empty() ? 0.0 : sum / r.arr.size() / 1e3;
}

/* ---- the best-effort programs ---- */

static volatile sig_atomic_t pair_stopping;

static void pair_on_stop(int sig) {
  (void)sig;
  pair_stopping = 1;
}

/* SIGTERM and SIGINT set pair_stopping (the harness ends a BE that way). */
static inline void pair_catch_stop(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = pair_on_stop;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
}

/* Creates the empty file path (the harness waits for it: warm-up done);
 * nothing when path is null; exits 1 when it cannot. */
static inline void pair_ready(const char *path) {
  if (!path)
    return;
  FILE *r = fopen(path, "w");
  if (!r || fclose(r) != 0) {
    fprintf(stderr, "%s: %s: cannot create\n", pair_prog, path);
    exit(1);
  }
}

/* Launches back to back, two kept queued: launch(k) queues launch k and
 * records ev[k & 1] behind it on stream s.  Each completion is observed
 * through its event, until pair_stopping or max_s seconds; then s is
 * drained.  Returns the completion times; *begin is when it began. */
template <typename F>
static std::vector<uint64_t> pair_run_be(cudaStream_t s, const cudaEvent_t ev[2], double max_s,
                                         uint64_t *begin, F launch) {
  std::vector<uint64_t> ends;
  ends.reserve(1 << 16);
  uint64_t last = *begin = pair_now_ns();
  uint64_t limit = *begin + (uint64_t)(max_s * 1e9);
  launch(0);
  for (int k = 1; !pair_stopping && last < limit; k++) {
    launch(k); /* queued behind k - 1 */
    PAIR_CHECK(cudaEventSynchronize(ev[(k - 1) & 1]));
    last = pair_now_ns();
    ends.push_back(last);
  }
  PAIR_CHECK(cudaStreamSynchronize(s));
  return ends;
}

/* Writes the BE CSV `iter,start_ns,end_ns` to path (iteration k spans the
 * completions of launches k-1 and k, the first from begin) and returns the
 * seconds they span; exits 1 when it cannot. */
static inline double pair_write_be(const char *path, uint64_t begin,
                                   const std::vector<uint64_t> &ends) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "%s: %s: %s\n", pair_prog, path, strerror(errno));
    exit(1);
  }
  fprintf(f, "iter,start_ns,end_ns\n");
  uint64_t prev = begin;
  for (size_t i = 0; i < ends.size(); i++) {
    fprintf(f, "%zu,%llu,%llu\n", i, (unsigned long long)prev, (unsigned long long)ends[i]);
    prev = ends[i];
  }
  if (fclose(f) != 0) {
    fprintf(stderr, "%s: %s: write error\n", pair_prog, path);
    exit(1);
  }
  return (double)(prev - begin) / 1e9;
}

#endif
