/* rt-stream.cu: streams, stream priorities, events and host functions (runtime API).
 *
 * Streams: created with flags and priorities, read back, ordered by events across streams
 * (cudaStreamWaitEvent), the legacy NULL stream's implicit ordering with blocking streams,
 * per-thread default stream (cudaStreamPerThread), cudaStreamQuery before and after work.
 * Events: record, synchronize, query, elapsed time (only "elapsed >= 0" is printed, never the
 * value), events created with cudaEventDisableTiming, an elapsed-time query on such an event.
 * Host functions: cudaLaunchHostFunc and cudaStreamAddCallback run in stream order; the order
 * they ran in and the data they saw are printed.
 *
 * "Not ready" answers are made deterministic with a kernel that spins on the GPU clock for
 * SPIN_MS, far longer than any query round trip, so a query issued right after the launch
 * always finds the work unfinished.
 */
#include <cuda_runtime.h>

#include "e2e-common.h"

/* 300 ms: long enough that a query sent right after the launch (over TCP too, with the
 * module loaded on first use) still finds the kernel running. */
#define SPIN_MS 300

__global__ void spin_kernel(long long cycles, int *out) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
  if (out)
    *out = 1;
}

__global__ void step_kernel(unsigned *p, int n, unsigned mul, unsigned add) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = p[i] * mul + add;
}

/* Host function log, written only from host callbacks, which CUDA runs one at a time per
 * stream and which this program issues on one stream at a time. */
static int hf_order[16];
static int hf_count;
static unsigned hf_seen;

static void CUDART_CB host_fn(void *arg) {
  int id = (int)(intptr_t)arg;
  if (hf_count < 16)
    hf_order[hf_count++] = id;
}

/* Reads the device buffer that the previous kernel wrote: the host function must run after it
 * (stream order), but it may not call CUDA, so the kernel result is mirrored to pinned memory
 * by an async copy issued before it. */
static unsigned *hf_pinned;
static void CUDART_CB host_fn_read(void *arg) {
  (void)arg;
  hf_seen = hf_pinned[0];
}

static void CUDART_CB stream_cb(cudaStream_t s, cudaError_t status, void *arg) {
  (void)s;
  int id = (int)(intptr_t)arg;
  if (status == cudaSuccess && hf_count < 16)
    hf_order[hf_count++] = id;
}

static long long spin_cycles(void) {
  int khz = 0;
  E2E_RT(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
  if (khz <= 0)
    khz = 2000000; /* 2 GHz: an upper bound on current GPUs, so the spin only gets longer */
  return (long long)khz * SPIN_MS;
}

static void test_priorities(void) {
  int least = 0, greatest = 0, prio = 12345;
  unsigned flags = 0;
  cudaStream_t hi, lo, nb;
  E2E_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  printf("priority range: least=%d greatest=%d\n", least, greatest);
  E2E_RT(cudaStreamCreateWithPriority(&hi, cudaStreamNonBlocking, greatest));
  E2E_RT(cudaStreamCreateWithPriority(&lo, cudaStreamDefault, least));
  E2E_RT(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  E2E_RT(cudaStreamGetPriority(hi, &prio));
  printf("high stream priority: %d\n", prio);
  E2E_RT(cudaStreamGetPriority(lo, &prio));
  printf("low stream priority: %d\n", prio);
  E2E_RT(cudaStreamGetFlags(hi, &flags));
  printf("high stream flags: %u\n", flags);
  E2E_RT(cudaStreamGetFlags(nb, &flags));
  printf("non-blocking stream flags: %u\n", flags);
  E2E_RT(cudaStreamGetFlags(lo, &flags));
  printf("default stream flags: %u\n", flags);

  /* Work on both priorities must complete with correct results. */
  {
    const int n = 1 << 16;
    unsigned *d = NULL, h[2] = {0, 0};
    E2E_RT(cudaMalloc(&d, 2 * n * sizeof(unsigned)));
    E2E_RT(cudaMemsetAsync(d, 0, n * sizeof(unsigned), lo));
    E2E_RT(cudaMemsetAsync(d + n, 0, n * sizeof(unsigned), hi));
    for (int k = 0; k < 10; k++) {
      step_kernel<<<n / 256, 256, 0, lo>>>(d, n, 3u, 1u);
      step_kernel<<<n / 256, 256, 0, hi>>>(d + n, n, 5u, 7u);
    }
    E2E_RT(cudaGetLastError());
    E2E_RT(cudaMemcpyAsync(&h[0], d + n - 1, sizeof(unsigned), cudaMemcpyDeviceToHost, lo));
    E2E_RT(cudaMemcpyAsync(&h[1], d + 2 * n - 1, sizeof(unsigned), cudaMemcpyDeviceToHost, hi));
    E2E_RT(cudaStreamSynchronize(lo));
    E2E_RT(cudaStreamSynchronize(hi));
    printf("priority streams results: %u %u\n", h[0], h[1]);
    E2E_RT(cudaFree(d));
  }
  E2E_RT(cudaStreamDestroy(hi));
  E2E_RT(cudaStreamDestroy(lo));
  E2E_RT(cudaStreamDestroy(nb));
}

static void test_events_and_queries(void) {
  cudaStream_t s1, s2;
  cudaEvent_t a, b, nt;
  float ms = -1.0f;
  int *flag = NULL, hflag = 0;
  const long long cycles = spin_cycles();

  E2E_RT(cudaStreamCreate(&s1));
  E2E_RT(cudaStreamCreate(&s2));
  E2E_RT(cudaEventCreate(&a));
  E2E_RT(cudaEventCreate(&b));
  E2E_RT(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming));
  E2E_RT(cudaMalloc(&flag, sizeof(int)));
  E2E_RT(cudaMemset(flag, 0, sizeof(int)));

  /* A never-recorded event is complete. */
  printf("query unrecorded event: %s\n", cudaGetErrorName(cudaEventQuery(a)));

  E2E_RT(cudaEventRecord(a, s1));
  spin_kernel<<<1, 1, 0, s1>>>(cycles, flag);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaEventRecord(b, s1));
  printf("stream query while spinning: %s\n", cudaGetErrorName(cudaStreamQuery(s1)));
  printf("event query while spinning: %s\n", cudaGetErrorName(cudaEventQuery(b)));

  /* s2 waits for b, then copies the flag the spinning kernel set: it must see 1. */
  E2E_RT(cudaStreamWaitEvent(s2, b, 0));
  E2E_RT(cudaMemcpyAsync(&hflag, flag, sizeof(int), cudaMemcpyDeviceToHost, s2));
  E2E_RT(cudaStreamSynchronize(s2));
  printf("flag seen after cross-stream wait: %d\n", hflag);
  E2E_RT(cudaEventSynchronize(b));
  printf("event query after sync: %s\n", cudaGetErrorName(cudaEventQuery(b)));
  printf("stream query after sync: %s\n", cudaGetErrorName(cudaStreamQuery(s1)));
  E2E_RT(cudaEventElapsedTime(&ms, a, b));
  printf("elapsed >= 0: %s\n", ms >= 0.0f ? "yes" : "no");
  /* The spin lasted SPIN_MS; allow a generous margin below for clock-rate differences. */
  printf("elapsed covers most of the spin: %s\n", ms >= SPIN_MS / 2 ? "yes" : "no");

  /* Elapsed time needs timing on both events. */
  E2E_RT(cudaEventRecord(nt, s1));
  E2E_RT(cudaEventSynchronize(nt));
  printf("elapsed with a no-timing event: %s\n",
         cudaGetErrorName(cudaEventElapsedTime(&ms, a, nt)));
  (void)cudaGetLastError();

  /* Record on the legacy NULL stream; a blocking stream orders behind it. */
  E2E_RT(cudaMemset(flag, 0, sizeof(int)));
  spin_kernel<<<1, 1>>>(cycles / 10, flag);
  E2E_RT(cudaEventRecord(a, 0));
  E2E_RT(cudaMemcpyAsync(&hflag, flag, sizeof(int), cudaMemcpyDeviceToHost, s1));
  E2E_RT(cudaStreamSynchronize(s1));
  printf("blocking stream ordered after NULL stream: %d\n", hflag);
  E2E_RT(cudaEventSynchronize(a));

  /* Per-thread default stream works and is distinct from the legacy one. */
  E2E_RT(cudaMemsetAsync(flag, 0x7, sizeof(int), cudaStreamPerThread));
  E2E_RT(cudaMemcpyAsync(&hflag, flag, sizeof(int), cudaMemcpyDeviceToHost, cudaStreamPerThread));
  E2E_RT(cudaStreamSynchronize(cudaStreamPerThread));
  printf("per-thread stream memset: %08x\n", (unsigned)hflag);

  E2E_RT(cudaEventDestroy(a));
  E2E_RT(cudaEventDestroy(b));
  E2E_RT(cudaEventDestroy(nt));
  E2E_RT(cudaStreamDestroy(s1));
  E2E_RT(cudaStreamDestroy(s2));
  E2E_RT(cudaFree(flag));
}

static void test_host_functions(void) {
  cudaStream_t s;
  unsigned *d = NULL;
  const long long cycles = spin_cycles();
  E2E_RT(cudaStreamCreate(&s));
  E2E_RT(cudaMalloc(&d, sizeof(unsigned)));
  E2E_RT(cudaMallocHost(&hf_pinned, sizeof(unsigned)));
  if (hf_pinned == NULL)
    return;
  hf_pinned[0] = 0;

  /* The spin makes sure the host functions are queued behind unfinished GPU work. */
  spin_kernel<<<1, 1, 0, s>>>(cycles / 10, NULL);
  E2E_RT(cudaLaunchHostFunc(s, host_fn, (void *)(intptr_t)1));
  E2E_RT(cudaMemsetAsync(d, 0, sizeof(unsigned), s));
  step_kernel<<<1, 1, 0, s>>>(d, 1, 1u, 41u);
  E2E_RT(cudaMemcpyAsync(hf_pinned, d, sizeof(unsigned), cudaMemcpyDeviceToHost, s));
  E2E_RT(cudaLaunchHostFunc(s, host_fn_read, NULL));
  E2E_RT(cudaLaunchHostFunc(s, host_fn, (void *)(intptr_t)2));
  E2E_RT(cudaStreamAddCallback(s, stream_cb, (void *)(intptr_t)3, 0));
  E2E_RT(cudaLaunchHostFunc(s, host_fn, (void *)(intptr_t)4));
  E2E_RT(cudaStreamSynchronize(s));
  printf("host functions ran:");
  for (int i = 0; i < hf_count; i++)
    printf(" %d", hf_order[i]);
  printf("\n");
  printf("host function saw kernel result: %u\n", hf_seen);

  E2E_RT(cudaFreeHost(hf_pinned));
  E2E_RT(cudaFree(d));
  E2E_RT(cudaStreamDestroy(s));
}

int main(void) {
  E2E_RT(cudaSetDevice(0));
  test_priorities();
  test_events_and_queries();
  test_host_functions();
  E2E_RT(cudaDeviceSynchronize());
  return e2e_finish();
}
