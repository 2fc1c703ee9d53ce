/* pair-common.h: shared bits of the CUDA C pair (pair-lc.cu, pair-be.cu).
 *
 * Host clock: CLOCK_MONOTONIC in ns, the clock every workload of the pair
 * benchmark writes, so the LC's and the BE's CSVs share one time axis.
 * Device: a block spins on %globaltimer (ns, independent of the SM clock)
 * for the asked time, so a kernel's length does not depend on clock speed.
 * The kernels live in the .cu files (their own names, so a trace tells them
 * apart); this header holds the device timer read and the option parser.
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

#endif
