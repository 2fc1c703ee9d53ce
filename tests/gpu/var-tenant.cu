/* var-tenant.cu: the tenants of tests/gpu/variants-run, which checks that the sliced and PTB
 * variants tallyd builds of a best-effort tenant's PTX kernels compute exactly what the
 * originals compute.
 *
 * Built with `-gencode arch=compute_90,code=compute_90` only, so the image carries PTX and no
 * SASS: the driver JIT-compiles it, and tallyd can transform every kernel (rewrite/).
 *
 * "var-tenant be ROUNDS" runs ROUNDS rounds of five kernels of many blocks each, every round
 * reading what the previous one wrote, then prints an FNV-1a checksum of every output buffer.
 * The kernels cover what the transforms must keep: a 1-D grid with a grid-stride loop
 * (%nctaid.x), a 3-D grid (%ctaid and %nctaid in x, y and z), static shared memory with
 * barriers, 96 KiB of dynamic shared memory (opened with cudaFuncSetAttribute), and shared
 * and global integer atomics.  All arithmetic is integer, so the result does not depend on the
 * order in which blocks run: sliced, PTB, preempted and resumed runs must print the native
 * output byte for byte.  A few values are also checked against the CPU.
 *
 * "var-tenant lc STOPFILE MAXSEC" plays the latency-critical tenant: bursts of 8 short kernels
 * and a synchronisation, separated by 1-3 ms of sleep, until STOPFILE exists or MAXSEC seconds
 * passed.  Its bursts make tallyd's policy hold, slice and preempt the best-effort work.  It
 * checks its own answers and prints how many bursts went wrong (0), never a timing.
 */
#include <cuda_runtime.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "e2e-common.h"

#define N_STRIDE (8u << 20)   /* grid-stride kernel: 8 M words */
#define STRIDE_GRID 4096      /* ~4 waves of 256-thread blocks on an H200, N_STRIDE / 8 threads */
#define STRIDE_ROUNDS 96
#define G3_X 48
#define G3_Y 24
#define G3_Z 12               /* 13824 blocks of 8 x 8 x 4 threads */
#define N_G3 ((size_t)G3_X * G3_Y * G3_Z * 256)
#define RED_BLOCKS 8192       /* block sums: 1024 words per block */
#define DYN_BLOCKS 1024      /* ~4 waves at 2 blocks per SM */
#define DYN_TILES 320        /* input tiles: DYN_TILES * DYN_WORDS <= N_STRIDE words */
#define DYN_WORDS 24576       /* 96 KiB of dynamic shared memory per block */
#define HIST_BLOCKS 4096
#define HIST_BINS 256
#define LC_WORDS 4096

__device__ __host__ static uint32_t mix(uint32_t x, uint32_t k) {
  x ^= k;
  x *= 0x9e3779b1u;
  x ^= x >> 15;
  return x;
}

/* 1-D grid, grid-stride loop over more words than threads. */
__global__ void k_stride(uint32_t *a, uint32_t n, uint32_t k) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    uint32_t x = a[i];
    for (int r = 0; r < STRIDE_ROUNDS; r++)
      x = mix(x, k + (uint32_t)r);
    a[i] = x;
  }
}

/* 3-D grid and 3-D blocks: the linear index from every %ctaid and %nctaid component. */
__global__ void k_grid3d(const uint32_t *in, uint32_t *out, uint32_t k) {
  uint32_t bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
  uint32_t block = (bz * gridDim.y + by) * gridDim.x + bx;
  uint32_t t = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  size_t i = (size_t)block * (blockDim.x * blockDim.y * blockDim.z) + t;
  uint32_t shape = gridDim.x * 65536u + gridDim.y * 256u + gridDim.z;
  out[i] = mix(in[i], k ^ (bx << 20) ^ (by << 10) ^ bz) + shape;
}

/* Static shared memory and barriers: each block sums 1024 words (no early exit). */
__global__ void k_reduce(const uint32_t *in, uint32_t *sums, uint32_t k) {
  __shared__ uint32_t s[256];
  const uint32_t *p = in + (size_t)blockIdx.x * 1024;
  uint32_t v = 0;
  for (int j = 0; j < 4; j++)
    v += mix(p[threadIdx.x + 256 * j], k);
  s[threadIdx.x] = v;
  __syncthreads();
  for (unsigned w = 128; w > 0; w >>= 1) {
    if (threadIdx.x < w)
      s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    sums[blockIdx.x] = s[0] ^ blockIdx.x;
}

/* 96 KiB of dynamic shared memory: each block reverses its tile through it. */
__global__ void k_dyn(const uint32_t *in, uint32_t *out, uint32_t k) {
  extern __shared__ uint32_t tile[];
  const uint32_t *p = in + (size_t)(blockIdx.x % DYN_TILES) * DYN_WORDS;
  uint32_t *q = out + (size_t)blockIdx.x * DYN_WORDS;
  for (uint32_t j = threadIdx.x; j < DYN_WORDS; j += blockDim.x)
    tile[j] = mix(p[j], k + blockIdx.x);
  __syncthreads();
  for (uint32_t j = threadIdx.x; j < DYN_WORDS; j += blockDim.x)
    q[j] = tile[DYN_WORDS - 1 - j];
}

/* Atomics: a histogram in shared memory, merged into global bins; a global maximum. */
__global__ void k_hist(const uint32_t *in, uint32_t *bins, uint32_t *maxv, uint32_t k) {
  __shared__ uint32_t h[HIST_BINS];
  h[threadIdx.x] = 0;
  __syncthreads();
  const uint32_t *p = in + (size_t)blockIdx.x * 1024;
  uint32_t m = 0;
  for (int j = 0; j < 4; j++) {
    uint32_t x = mix(p[threadIdx.x + 256 * j], k);
    atomicAdd(&h[x & (HIST_BINS - 1)], 1u);
    m = x > m ? x : m;
  }
  atomicMax(maxv, m);
  __syncthreads();
  atomicAdd(&bins[threadIdx.x], h[threadIdx.x]);
}

__global__ void k_lc(const uint32_t *in, uint32_t *out, uint32_t k) {
  uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < LC_WORDS) {
    uint32_t x = in[i];
    for (int r = 0; r < 256; r++)
      x = mix(x, k + (uint32_t)r);
    out[i] = x;
  }
}

static uint32_t *dev_fill(size_t n, uint32_t seed) {
  uint32_t *h = (uint32_t *)malloc(n * 4), *d = NULL;
  if (!h) {
    e2e_check(0, "host memory");
    return NULL;
  }
  e2e_fill_u32(h, n, seed);
  E2E_RT(cudaMalloc(&d, n * 4));
  E2E_RT(cudaMemcpy(d, h, n * 4, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

static void print_dev(const char *label, const uint32_t *d, size_t n, uint32_t *first) {
  uint32_t *h = (uint32_t *)malloc(n * 4);
  if (!h) {
    e2e_check(0, "host memory");
    return;
  }
  E2E_RT(cudaMemcpy(h, d, n * 4, cudaMemcpyDeviceToHost));
  e2e_print_sum(label, h, n * 4);
  if (first)
    *first = h[0];
  free(h);
}

static int run_be(int rounds) {
  cudaStream_t s;
  uint32_t *a = dev_fill(N_STRIDE, 1), *g3in = dev_fill(N_G3, 2), *g3out = dev_fill(N_G3, 3);
  uint32_t *sums = dev_fill(RED_BLOCKS, 4), *dynout = dev_fill((size_t)DYN_BLOCKS * DYN_WORDS, 5);
  uint32_t *bins = NULL, *maxv = NULL, a0 = 0, sum0 = 0;
  const size_t dyn_bytes = DYN_WORDS * 4;
  E2E_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  E2E_RT(cudaMalloc(&bins, HIST_BINS * 4));
  E2E_RT(cudaMalloc(&maxv, 4));
  E2E_RT(cudaMemset(bins, 0, HIST_BINS * 4));
  E2E_RT(cudaMemset(maxv, 0, 4));
  E2E_RT(cudaFuncSetAttribute(k_dyn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)dyn_bytes));
  uint32_t a0_ref;
  e2e_fill_u32(&a0_ref, 1, 1);
  for (int r = 0; r < rounds; r++) {
    uint32_t k = (uint32_t)r * 7919u;
    k_stride<<<STRIDE_GRID, 256, 0, s>>>(a, N_STRIDE, k);
    k_grid3d<<<dim3(G3_X, G3_Y, G3_Z), dim3(8, 8, 4), 0, s>>>(r % 2 ? g3out : g3in,
                                                              r % 2 ? g3in : g3out, k);
    k_reduce<<<RED_BLOCKS, 256, 0, s>>>(a, sums, k);
    k_dyn<<<DYN_BLOCKS, 1024, dyn_bytes, s>>>(a, dynout, k);
    k_hist<<<HIST_BLOCKS, HIST_BINS, 0, s>>>(a, bins, maxv, k);
    E2E_RT(cudaGetLastError());
    for (int j = 0; j < STRIDE_ROUNDS; j++)
      a0_ref = mix(a0_ref, k + (uint32_t)j);
    if (r % 16 == 15) /* a synchronising call now and then, as real programs make */
      E2E_RT(cudaStreamSynchronize(s));
  }
  E2E_RT(cudaStreamSynchronize(s));
  print_dev("stride", a, N_STRIDE, &a0);
  print_dev("grid3d-a", g3in, N_G3, NULL);
  print_dev("grid3d-b", g3out, N_G3, NULL);
  print_dev("reduce", sums, RED_BLOCKS, &sum0);
  print_dev("dynsmem", dynout, (size_t)DYN_BLOCKS * DYN_WORDS, NULL);
  print_dev("hist", bins, HIST_BINS, NULL);
  print_dev("max", maxv, 1, NULL);
  e2e_check(a0 == a0_ref, "stride word 0 matches the CPU");
  {
    /* bins: every round adds HIST_BLOCKS * 1024 counts */
    uint32_t *h = (uint32_t *)malloc(HIST_BINS * 4);
    uint64_t total = 0;
    E2E_RT(cudaMemcpy(h, bins, HIST_BINS * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; h && i < HIST_BINS; i++)
      total += h[i];
    e2e_check(total == (uint64_t)rounds * HIST_BLOCKS * 1024, "histogram counts every word");
    free(h);
  }
  (void)sum0;
  E2E_RT(cudaFree(a));
  E2E_RT(cudaFree(g3in));
  E2E_RT(cudaFree(g3out));
  E2E_RT(cudaFree(sums));
  E2E_RT(cudaFree(dynout));
  E2E_RT(cudaFree(bins));
  E2E_RT(cudaFree(maxv));
  E2E_RT(cudaStreamDestroy(s));
  return e2e_finish();
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int run_lc(const char *stopfile, double maxsec) {
  cudaStream_t s;
  uint32_t *hin = NULL, *hout = NULL, *din = NULL, *dout = NULL;
  struct stat st;
  double t0 = now_s();
  int bursts = 0, bad = 0;
  E2E_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  E2E_RT(cudaMallocHost(&hin, LC_WORDS * 4));
  E2E_RT(cudaMallocHost(&hout, LC_WORDS * 4));
  E2E_RT(cudaMalloc(&din, LC_WORDS * 4));
  E2E_RT(cudaMalloc(&dout, LC_WORDS * 4));
  if (!hin || !hout)
    return e2e_finish();
  while (stat(stopfile, &st) != 0 && now_s() - t0 < maxsec) {
    uint32_t k = (uint32_t)bursts;
    e2e_fill_u32(hin, LC_WORDS, k);
    E2E_RT(cudaMemcpyAsync(din, hin, LC_WORDS * 4, cudaMemcpyHostToDevice, s));
    for (int j = 0; j < 8; j++) /* the last one writes dout from din */
      k_lc<<<LC_WORDS / 128, 128, 0, s>>>(din, dout, k);
    E2E_RT(cudaMemcpyAsync(hout, dout, LC_WORDS * 4, cudaMemcpyDeviceToHost, s));
    E2E_RT(cudaStreamSynchronize(s));
    {
      uint32_t x = hin[LC_WORDS - 1];
      for (int r = 0; r < 256; r++)
        x = mix(x, k + (uint32_t)r);
      bad += hout[LC_WORDS - 1] != x;
    }
    bursts++;
    usleep(1000 + (unsigned)(bursts % 3) * 1000);
  }
  fprintf(stderr, "var-tenant lc: %d bursts\n", bursts);
  printf("lc bursts with a wrong answer: %d\n", bad);
  e2e_check(bad == 0, "every lc burst matches the CPU");
  E2E_RT(cudaFree(din));
  E2E_RT(cudaFree(dout));
  E2E_RT(cudaFreeHost(hin));
  E2E_RT(cudaFreeHost(hout));
  E2E_RT(cudaStreamDestroy(s));
  return e2e_finish();
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "be") == 0 && atoi(argv[2]) > 0) {
    E2E_RT(cudaSetDevice(0));
    return run_be(atoi(argv[2]));
  }
  if (argc == 4 && strcmp(argv[1], "lc") == 0 && atof(argv[3]) > 0) {
    E2E_RT(cudaSetDevice(0));
    return run_lc(argv[2], atof(argv[3]));
  }
  fprintf(stderr, "usage: var-tenant be ROUNDS | var-tenant lc STOPFILE MAXSEC\n");
  return 2;
}
