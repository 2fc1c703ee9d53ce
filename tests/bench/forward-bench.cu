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
 *   req_us          open-loop requests of a latency-critical service: REQ_KERNELS kernels of
 *                   REQ_KERNEL_US each (spinning on the GPU's globaltimer, so 25 us of real
 *                   GPU time) then a stream synchronize, arrivals REQ_GAP_US apart on average
 *                   (Poisson: exponential gaps, fixed seed); time from the request's start
 *                   (after the host woke for it) to the synchronize's return
 *   req_first_us, req_issue_us   the same requests: time to the first launch call's
 *                   return, and to the last one's (what the application spends before it
 *                   synchronises), p50
 *   idle_cpu_pct    CPU time per second of wall time while the process sits idle for
 *                   IDLE_S seconds after the requests (getrusage), and the same for the
 *                   process named by FB_TALLYD_PID (tallyd, from /proc/PID/stat) when set
 *   tcp_rtt_us      round trip of 64 bytes over TCP loopback between two threads of this
 *                   process, the yardstick for the TCP column's overhead
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
#include <math.h>
#include <pthread.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "e2e-common.h" /* e2e_report_driver: names the libcuda.so.1 in use on stderr */

#define LAUNCH_BATCH   50   /* well below the ~1024-entry launch queue */
#define LAUNCH_BATCHES 200  /* 10,000 timed launches */
#define SYNC_REPS      5000 /* launch + sync samples: enough for a stable p99 */
#define COPY_BYTES     (64u << 20)
#define COPY_REPS      20
#define CHAIN_LEN      1000
#define CHAIN_REPS     100 /* ~0.3 s of chains: a burst of host noise moves the median little */
#define WARMUP         200
#define REQ_N          1500 /* open-loop requests (3 s at 2 ms gaps) */
#define REQ_KERNELS    8
#define REQ_KERNEL_US  25
#define REQ_GAP_US     2000
#define IDLE_S         2
#define RTT_REPS       5000

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

/* Spins until ns of GPU wall time (globaltimer) have passed: a kernel of a fixed real
 * duration, whatever the clocks. */
__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
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

/* Sleeps until the absolute CLOCK_MONOTONIC time at_ns. */
static void sleep_until(double at_ns) {
  struct timespec ts;
  ts.tv_sec = (time_t)(at_ns / 1e9);
  ts.tv_nsec = (long)(at_ns - (double)ts.tv_sec * 1e9);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
    ;
}

/* CPU seconds (user + system) of this process, or of pid from /proc/PID/stat (-1: none). */
static double cpu_s(long pid) {
  if (pid <= 0) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
  }
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f)
    return -1;
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  char *p = strrchr(buf, ')');
  unsigned long ut = 0, st = 0;
  /* after ")": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
    return -1;
  return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The TCP loopback yardstick: an echo thread and RTT_REPS 64-byte round trips. */
static void *echo_main(void *arg) {
  int fd = *(int *)arg, one = 1;
  char b[64];
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  for (;;) {
    ssize_t n = recv(fd, b, sizeof(b), MSG_WAITALL);
    if (n <= 0 || send(fd, b, (size_t)n, 0) != n)
      break;
  }
  close(fd);
  return NULL;
}

static double tcp_rtt_p50_us(int reps) {
  struct sockaddr_in a;
  socklen_t al = sizeof(a);
  int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), s = -1, one = 1;
  pthread_t th;
  char b[64] = {0};
  double *v = (double *)malloc((size_t)reps * sizeof(double)), r = -1;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (!v || l < 0 || c < 0 || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
      getsockname(l, (struct sockaddr *)&a, &al) || connect(c, (struct sockaddr *)&a, sizeof(a)) ||
      (s = accept(l, NULL, NULL)) < 0 || pthread_create(&th, NULL, echo_main, &s))
    goto out;
  setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  for (int i = 0; i < reps; i++) {
    double t0 = now_ns();
    if (send(c, b, sizeof(b), 0) != (ssize_t)sizeof(b) ||
        recv(c, b, sizeof(b), MSG_WAITALL) != (ssize_t)sizeof(b))
      break;
    v[i] = now_ns() - t0;
    if (i + 1 == reps)
      r = quantile(v, (size_t)reps, 0.5) / 1e3;
  }
  shutdown(c, SHUT_RDWR);
  pthread_join(th, NULL);
out:
  if (c >= 0)
    close(c);
  if (l >= 0)
    close(l);
  free(v);
  return r;
}

/* The open-loop request workload (req_us) and the idle phase after it (idle_cpu_pct). */
static void open_loop(cudaStream_t s, double scale) {
  const int n = (int)(REQ_N * scale) + 1;
  double *v = (double *)malloc((size_t)n * sizeof(double));
  double *v1 = (double *)malloc((size_t)n * sizeof(double)); /* the first launch call */
  double *vk = (double *)malloc((size_t)n * sizeof(double)); /* every launch call */
  double at;
  uint64_t rng = 88172645463325252ull; /* xorshift64: the same arrivals in every run */
  const char *tp = getenv("FB_TALLYD_PID");
  long tpid = tp ? atol(tp) : 0;
  if (!v || !v1 || !vk)
    exit(1);
  for (int i = 0; i < 20; i++) /* warm-up */
    spin_kernel<<<1, 32, 0, s>>>(REQ_KERNEL_US * 1000ull);
  CK(cudaStreamSynchronize(s));
  at = now_ns();
  for (int r = 0; r < n; r++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    double u = ((double)(rng >> 11) + 0.5) / 9007199254740992.0;
    at += -log(u) * REQ_GAP_US * 1e3;
    sleep_until(at);
    double t0 = now_ns();
    for (int k = 0; k < REQ_KERNELS; k++) {
      spin_kernel<<<1, 32, 0, s>>>(REQ_KERNEL_US * 1000ull);
      if (k == 0)
        v1[r] = now_ns() - t0;
    }
    vk[r] = now_ns() - t0;
    CK(cudaStreamSynchronize(s));
    v[r] = now_ns() - t0;
  }
  CK(cudaGetLastError());
  printf("req_us_p50 %.2f\n", quantile(v, (size_t)n, 0.5) / 1e3);
  printf("req_us_p99 %.2f\n", quantile(v, (size_t)n, 0.99) / 1e3);
  printf("req_first_us_p50 %.2f\n", quantile(v1, (size_t)n, 0.5) / 1e3);
  printf("req_issue_us_p50 %.2f\n", quantile(vk, (size_t)n, 0.5) / 1e3);
  free(v);
  free(v1);
  free(vk);
  {
    double w0 = now_ns(), g0 = cpu_s(0), d0 = tpid > 0 ? cpu_s(tpid) : -1;
    sleep(IDLE_S);
    double w = (now_ns() - w0) / 1e9, g1 = cpu_s(0), d1 = tpid > 0 ? cpu_s(tpid) : -1;
    printf("guest_idle_cpu_pct %.1f\n", 100.0 * (g1 - g0) / w);
    if (d0 >= 0 && d1 >= 0)
      printf("tallyd_idle_cpu_pct %.1f\n", 100.0 * (d1 - d0) / w);
  }
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

  /* 5. open-loop requests, then the CPU an idle tenant costs */
  open_loop(s, scale);

  /* 6. the TCP loopback round trip (no CUDA) */
  {
    double rtt = tcp_rtt_p50_us((int)(RTT_REPS * scale) + 1);
    if (rtt >= 0)
      printf("tcp_rtt_us_p50 %.2f\n", rtt);
  }
  if (!use_null)
    CK(cudaStreamDestroy(s));
  free(t);
  e2e_report_driver();
  return 0;
}
