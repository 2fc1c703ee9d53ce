/* forward-bench.cu: the forwarding costs that forward-bench reports.
 *
 * One process measures, on one stream, with the CUDA runtime API as an application uses it:
 *   launch_ns       cost of one cudaLaunchKernel call of an empty kernel as the application
 *                   sees it (wall time of the call; batches of LAUNCH_BATCH calls, each batch
 *                   followed by an untimed synchronize so the launch queue never fills)
 *   launch_sync_us  launch + cudaStreamSynchronize round trip of an empty kernel
 *   h2d_gbps/d2h_gbps  cudaMemcpyAsync + synchronize of 64 MiB from/to pinned host memory
 *                   (10^9 bytes per second, from the median of COPY_REPS copies)
 *   chain_ms        1000 dependent single-block kernels launched back to back, then one
 *                   synchronize (median of CHAIN_REPS)
 * It prints "key value" lines (p50 and p99 where a distribution is meaningful) and a
 * checksum of the chain's result, which must be the same natively and through Tally.
 * tests/bench/forward-bench runs it natively and through tallyd and prints the table.
 *
 * usage: forward-bench-bin [--null-stream] [--scale F]
 *   --null-stream  use the legacy default stream instead of a created non-blocking stream
 *   --scale F      multiply every repetition count by F (default 1)
 */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "e2e-common.h" /* e2e_report_driver: names the libcuda.so.1 in use on stderr */

#define LAUNCH_BATCH   50   /* well below the ~1024-entry launch queue */
#define LAUNCH_BATCHES 200  /* 10,000 timed launches */
#define SYNC_REPS      5000 /* launch + sync samples: enough for a stable p99 */
#define COPY_BYTES     (64u << 20)
#define COPY_REPS      20
#define CHAIN_LEN      1000
#define CHAIN_REPS     20
#define WARMUP         200

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (call);                                                                       \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "forward-bench: %s failed: %s\n", #call, cudaGetErrorName(e_));              \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

__global__ void empty_kernel(void) {}

/* One step of the chain: each launch depends on the previous one's result (stream order). */
__global__ void chain_step(uint32_t *p) {
  p[threadIdx.x] = p[threadIdx.x] * 3u + 1u + threadIdx.x;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Sorts v and returns the value at quantile q (nearest rank). */
static double quantile(double *v, size_t n, double q) {
  size_t i;
  qsort(v, n, sizeof(double), cmp_double);
  i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

int main(int argc, char **argv) {
  cudaStream_t s = 0;
  int use_null = 0;
  double scale = 1.0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--null-stream") == 0) {
      use_null = 1;
    } else if (strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
      scale = atof(argv[++i]);
      if (scale <= 0)
        scale = 1.0;
    } else {
      fprintf(stderr, "usage: forward-bench-bin [--null-stream] [--scale F]\n");
      return 2;
    }
  }
  const int batches = (int)(LAUNCH_BATCHES * scale) + 1;
  const int sync_reps = (int)(SYNC_REPS * scale) + 1;
  const int copy_reps = (int)(COPY_REPS * scale) + 1;
  const int chain_reps = (int)(CHAIN_REPS * scale) + 1;
  size_t nmax = (size_t)batches * LAUNCH_BATCH;
  if ((size_t)sync_reps > nmax)
    nmax = (size_t)sync_reps;
  double *t = (double *)malloc(nmax * sizeof(double));
  if (t == NULL)
    return 1;

  CK(cudaSetDevice(0));
  if (!use_null)
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  printf("stream %s\n", use_null ? "null" : "created");

  /* warm-up: module load, first launch, queues */
  for (int i = 0; i < WARMUP; i++)
    empty_kernel<<<1, 1, 0, s>>>();
  CK(cudaStreamSynchronize(s));

  /* 1. launch cost */
  {
    size_t k = 0;
    for (int b = 0; b < batches; b++) {
      for (int i = 0; i < LAUNCH_BATCH; i++) {
        double t0 = now_ns();
        empty_kernel<<<1, 1, 0, s>>>();
        t[k++] = now_ns() - t0;
      }
      CK(cudaStreamSynchronize(s));
    }
    CK(cudaGetLastError());
    printf("launch_ns_p50 %.0f\n", quantile(t, k, 0.5));
    printf("launch_ns_p99 %.0f\n", quantile(t, k, 0.99));
    printf("launch_samples %zu\n", k);
  }

  /* 2. launch + synchronize round trip */
  {
    for (int i = 0; i < sync_reps; i++) {
      double t0 = now_ns();
      empty_kernel<<<1, 1, 0, s>>>();
      CK(cudaStreamSynchronize(s));
      t[i] = now_ns() - t0;
    }
    printf("launch_sync_us_p50 %.2f\n", quantile(t, sync_reps, 0.5) / 1e3);
    printf("launch_sync_us_p99 %.2f\n", quantile(t, sync_reps, 0.99) / 1e3);
  }

  /* 3. 64 MiB copies from and to pinned memory */
  {
    void *h = NULL, *d = NULL;
    CK(cudaMallocHost(&h, COPY_BYTES));
    CK(cudaMalloc(&d, COPY_BYTES));
    memset(h, 0x5a, COPY_BYTES);
    for (int dir = 0; dir < 2; dir++) {
      double *v = (double *)malloc((size_t)copy_reps * sizeof(double));
      for (int i = -2; i < copy_reps; i++) { /* two untimed warm-up copies */
        double t0 = now_ns();
        if (dir == 0)
          CK(cudaMemcpyAsync(d, h, COPY_BYTES, cudaMemcpyHostToDevice, s));
        else
          CK(cudaMemcpyAsync(h, d, COPY_BYTES, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        if (i >= 0)
          v[i] = now_ns() - t0;
      }
      printf("%s_gbps %.2f\n", dir == 0 ? "h2d" : "d2h",
             (double)COPY_BYTES / quantile(v, copy_reps, 0.5));
      free(v);
    }
    {
      /* the data made the round trip intact */
      unsigned char *c = (unsigned char *)h;
      size_t bad = 0;
      for (size_t i = 0; i < COPY_BYTES; i += 4096)
        bad += c[i] != 0x5a;
      printf("copy_ok %d\n", bad == 0);
    }
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
  }

  /* 4. chain of 1000 dependent small kernels */
  {
    uint32_t *d = NULL, out[32];
    double *v = (double *)malloc((size_t)chain_reps * sizeof(double));
    CK(cudaMalloc(&d, sizeof(out)));
    for (int r = -1; r < chain_reps; r++) { /* one untimed warm-up chain */
      CK(cudaMemsetAsync(d, 0, sizeof(out), s));
      CK(cudaStreamSynchronize(s));
      double t0 = now_ns();
      for (int i = 0; i < CHAIN_LEN; i++)
        chain_step<<<1, 32, 0, s>>>(d);
      CK(cudaStreamSynchronize(s));
      if (r >= 0)
        v[r] = now_ns() - t0;
    }
    CK(cudaGetLastError());
    CK(cudaMemcpy(out, d, sizeof(out), cudaMemcpyDeviceToHost));
    {
      uint32_t want[32];
      int ok = 1;
      for (int k = 0; k < 32; k++) {
        want[k] = 0;
        for (int i = 0; i < CHAIN_LEN; i++)
          want[k] = want[k] * 3u + 1u + (uint32_t)k;
        ok &= want[k] == out[k];
      }
      printf("chain_ok %d\n", ok);
    }
    printf("chain_ms_p50 %.3f\n", quantile(v, chain_reps, 0.5) / 1e6);
    CK(cudaFree(d));
    free(v);
  }
  if (!use_null)
    CK(cudaStreamDestroy(s));
  free(t);
  e2e_report_driver();
  return 0;
}
