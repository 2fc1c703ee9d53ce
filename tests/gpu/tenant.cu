/* tenant.cu: the workload of one tenant in the two-tenant test of tests/gpu/e2e-run.
 *
 * "tenant lc" plays the latency-critical tenant: many small request-like iterations (copy a
 * 4 KiB input in, run a small kernel, copy the answer out, synchronize), each checked against
 * a CPU model.  "tenant be" plays the best-effort tenant: long compute kernels over 64 MiB,
 * synchronized only at the end.  The runner starts both at once on one GPU through tallyd,
 * one with --priority latency-critical and one with --priority best-effort, and both must
 * print exactly what they print when run natively.  No timing is printed.
 *
 * "tenant hold" plays a tenant that dies: it allocates and fills HOLD_MIB of device memory,
 * prints "holding N MiB pid P" and then waits for end of input on stdin.  The runner kills
 * it with SIGKILL while it waits and checks that the GPU memory comes back and that other
 * tenants carry on.
 */
#include <cuda_runtime.h>
#include <unistd.h>

#include "e2e-common.h"

#define LC_ITERS 3000       /* ~tens of ms natively: overlaps the best-effort tenant's run */
#define LC_WORDS 1024       /* 4 KiB request */
#define BE_WORDS (16 << 20) /* 64 MiB of 32-bit words */
#define BE_ITERS 40
/* Hash rounds per element per kernel: 16M elements x 4096 dependent rounds is ~10 ms of
 * integer work per kernel on an H200 (estimate from its issue rate), ~0.4 s for all 40, so the
 * lc tenant runs while be keeps the GPU busy; each block still finishes in tens of us. */
#define BE_ROUNDS 4096

__device__ __host__ static uint32_t mix(uint32_t x, uint32_t k) {
  x ^= k;
  x *= 0x9e3779b1u;
  x ^= x >> 15;
  return x;
}

__global__ void lc_kernel(const uint32_t *in, uint32_t *out, uint32_t k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < LC_WORDS)
    out[i] = mix(in[i], k);
}

__global__ void be_kernel(uint32_t *p, uint32_t k) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < BE_WORDS) {
    uint32_t x = p[i];
    for (int r = 0; r < BE_ROUNDS; r++)
      x = mix(x, k + (uint32_t)r);
    p[i] = x;
  }
}

static int run_lc(void) {
  uint32_t *hin = NULL, *hout = NULL, *din = NULL, *dout = NULL;
  uint64_t acc = E2E_FNV_OFFSET;
  int bad = 0;
  cudaStream_t s;
  E2E_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  E2E_RT(cudaMallocHost(&hin, LC_WORDS * 4));
  E2E_RT(cudaMallocHost(&hout, LC_WORDS * 4));
  E2E_RT(cudaMalloc(&din, LC_WORDS * 4));
  E2E_RT(cudaMalloc(&dout, LC_WORDS * 4));
  if (hin == NULL || hout == NULL)
    return e2e_finish();
  for (int it = 0; it < LC_ITERS; it++) {
    e2e_fill_u32(hin, LC_WORDS, (uint32_t)it);
    E2E_RT(cudaMemcpyAsync(din, hin, LC_WORDS * 4, cudaMemcpyHostToDevice, s));
    lc_kernel<<<LC_WORDS / 256, 256, 0, s>>>(din, dout, (uint32_t)it);
    E2E_RT(cudaMemcpyAsync(hout, dout, LC_WORDS * 4, cudaMemcpyDeviceToHost, s));
    E2E_RT(cudaStreamSynchronize(s));
    for (int i = 0; i < LC_WORDS; i++)
      bad += hout[i] != mix(hin[i], (uint32_t)it);
    acc = (acc ^ e2e_fnv1a(hout, LC_WORDS * 4)) * E2E_FNV_PRIME;
  }
  printf("lc iterations: %d, mismatches: %d, checksum %016llx\n", LC_ITERS, bad,
         (unsigned long long)acc);
  e2e_check(bad == 0, "every lc answer matches the CPU");
  E2E_RT(cudaFree(din));
  E2E_RT(cudaFree(dout));
  E2E_RT(cudaFreeHost(hin));
  E2E_RT(cudaFreeHost(hout));
  E2E_RT(cudaStreamDestroy(s));
  return e2e_finish();
}

static int run_be(void) {
  uint32_t *h = (uint32_t *)malloc((size_t)BE_WORDS * 4), *d = NULL;
  e2e_fill_u32(h, BE_WORDS, 77);
  E2E_RT(cudaMalloc(&d, (size_t)BE_WORDS * 4));
  E2E_RT(cudaMemcpy(d, h, (size_t)BE_WORDS * 4, cudaMemcpyHostToDevice));
  for (int it = 0; it < BE_ITERS; it++)
    be_kernel<<<BE_WORDS / 256, 256>>>(d, (uint32_t)it * 1000u);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(h, d, (size_t)BE_WORDS * 4, cudaMemcpyDeviceToHost));
  /* spot-check element 0 on the CPU: all iterations of all rounds */
  {
    uint32_t x[1];
    e2e_fill_u32(x, 1, 77); /* element 0 of the same stream */
    for (int it = 0; it < BE_ITERS; it++)
      for (int r = 0; r < BE_ROUNDS; r++)
        x[0] = mix(x[0], (uint32_t)it * 1000u + (uint32_t)r);
    e2e_check(h[0] == x[0], "be element 0 matches the CPU");
  }
  e2e_print_sum("be result", h, (size_t)BE_WORDS * 4);
  E2E_RT(cudaFree(d));
  free(h);
  return e2e_finish();
}

#define HOLD_MIB 4096 /* far above any noise in the GPU's used-memory figure */

static int run_hold(void) {
  void *d = NULL;
  E2E_RT(cudaMalloc(&d, (size_t)HOLD_MIB << 20));
  E2E_RT(cudaMemset(d, 0x3c, (size_t)HOLD_MIB << 20));
  E2E_RT(cudaDeviceSynchronize());
  printf("holding %d MiB pid %ld\n", d != NULL ? HOLD_MIB : 0, (long)getpid());
  fflush(stdout);
  while (getchar() != EOF) {
  }
  E2E_RT(cudaFree(d));
  return e2e_finish();
}

int main(int argc, char **argv) {
  if (argc != 2 ||
      (strcmp(argv[1], "lc") != 0 && strcmp(argv[1], "be") != 0 && strcmp(argv[1], "hold") != 0)) {
    fprintf(stderr, "usage: tenant lc|be|hold\n");
    return 2;
  }
  E2E_RT(cudaSetDevice(0));
  if (strcmp(argv[1], "hold") == 0)
    return run_hold();
  return strcmp(argv[1], "lc") == 0 ? run_lc() : run_be();
}
