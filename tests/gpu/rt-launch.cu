/* rt-launch.cu: kernel launches through the CUDA runtime API.
 *
 * The fatbin nvcc embeds here is registered by cudart (__cudaRegisterFatBinary and friends,
 * which reach the driver as cuLibraryLoadData / cuModuleLoadData of the fatbin), so this
 * program checks that Tally loads cudart-registered modules and finds every kernel and
 * variable in them.  Launch forms: the <<<>>> syntax with scalars of every width, a struct by
 * value and a 3D grid; cudaLaunchKernel with an argument array; cudaLaunchKernelExC with
 * launch attributes (cluster dimension, priority); cudaLaunchCooperativeKernel; dynamic
 * shared memory beyond 48 KiB after cudaFuncSetAttribute; __constant__ and __device__
 * variables through the symbol API; templates (mangled names).  Function attributes and
 * occupancy answers are printed as well: they depend only on the binary and the device.
 */
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "e2e-common.h"

namespace cg = cooperative_groups;

struct params {
  int8_t c;
  int16_t s;
  int32_t i;
  int64_t l;
  float f;
  double d;
  uint32_t arr[5];
};

__constant__ uint32_t c_table[64];
__device__ uint32_t g_counter;
__device__ uint64_t g_result[8];

__global__ void scalars_kernel(int8_t c, int16_t s, int32_t i, int64_t l, float f, double d,
                               uint64_t *out) {
  out[0] = (uint64_t)(int64_t)c;
  out[1] = (uint64_t)(int64_t)s;
  out[2] = (uint64_t)(int64_t)i;
  out[3] = (uint64_t)l;
  out[4] = (uint64_t)(int64_t)(f * 1000.0f);
  out[5] = (uint64_t)(int64_t)(d * 1000000.0);
}

__global__ void struct_kernel(params p, uint64_t *out) {
  uint64_t acc = (uint64_t)(int64_t)p.c + (uint64_t)(int64_t)p.s + (uint64_t)(int64_t)p.i +
                 (uint64_t)p.l + (uint64_t)(int64_t)(p.f * 8.0f) + (uint64_t)(int64_t)(p.d * 8.0);
  for (int k = 0; k < 5; k++)
    acc = acc * 31u + p.arr[k];
  out[6] = acc;
}

/* 3D grid and block: each thread writes its linearised id mixed with the constant table. */
__global__ void grid3d_kernel(uint32_t *out) {
  uint32_t bx = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  uint32_t tx = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  uint32_t id = bx * (blockDim.x * blockDim.y * blockDim.z) + tx;
  out[id] = id * 2654435761u ^ c_table[id & 63];
  atomicAdd(&g_counter, 1u);
}

/* Uses dynamic shared memory: reverses each block's slice through shared memory. */
__global__ void smem_kernel(const uint32_t *in, uint32_t *out, int words_per_block) {
  extern __shared__ uint32_t buf[];
  const uint32_t *src = in + (size_t)blockIdx.x * words_per_block;
  uint32_t *dst = out + (size_t)blockIdx.x * words_per_block;
  for (int k = threadIdx.x; k < words_per_block; k += blockDim.x)
    buf[k] = src[k];
  __syncthreads();
  for (int k = threadIdx.x; k < words_per_block; k += blockDim.x)
    dst[k] = buf[words_per_block - 1 - k] + (uint32_t)k;
}

template <typename T, int SCALE> __global__ void scale_kernel(T *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = p[i] * (T)SCALE + (T)i;
}

/* Cluster launch (sm_90): every block writes its rank inside its cluster and the cluster size. */
__global__ void cluster_kernel(uint32_t *out) {
  cg::cluster_group cl = cg::this_cluster();
  if (threadIdx.x == 0)
    out[blockIdx.x] = (cl.block_rank() << 8) | cl.num_blocks();
  cl.sync();
}

/* Cooperative launch: a grid-wide barrier between two phases.  Phase 2 reads what another
 * block wrote in phase 1 (into a separate buffer, so no thread reads a value being updated). */
__global__ void coop_kernel(uint32_t *a, uint32_t *b, int n) {
  cg::grid_group g = cg::this_grid();
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    a[i] = (uint32_t)i * 3u;
  g.sync();
  if (i < n)
    b[i] = a[i] + a[n - 1 - i];
}

static void test_scalars_and_struct(void) {
  uint64_t *d = NULL, h[8];
  params p;
  E2E_RT(cudaMalloc(&d, sizeof(h)));
  E2E_RT(cudaMemset(d, 0, sizeof(h)));
  scalars_kernel<<<1, 1>>>((int8_t)-5, (int16_t)-3000, -70000, -5000000000LL, 3.25f, -2.5e-3, d);
  E2E_RT(cudaGetLastError());
  memset(&p, 0, sizeof(p));
  p.c = 7;
  p.s = -2;
  p.i = 123456;
  p.l = 1LL << 40;
  p.f = 0.5f;
  p.d = 1.25;
  for (int k = 0; k < 5; k++)
    p.arr[k] = 0x1000u * (uint32_t)(k + 1);
  struct_kernel<<<1, 1>>>(p, d);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  printf("scalars:");
  for (int k = 0; k < 6; k++)
    printf(" %lld", (long long)h[k]);
  printf("\nstruct by value: %llu\n", (unsigned long long)h[6]);
  E2E_RT(cudaFree(d));
}

static void test_grid3d_and_symbols(void) {
  const dim3 grid(5, 3, 2), block(8, 4, 2);
  const size_t n = 5 * 3 * 2 * 8 * 4 * 2;
  uint32_t table[64], zero = 0, count = 0, *d = NULL;
  uint32_t *h = (uint32_t *)malloc(n * sizeof(uint32_t));
  void *sym = NULL;
  size_t sym_size = 0;

  e2e_fill_u32(table, 64, 11);
  E2E_RT(cudaMemcpyToSymbol(c_table, table, sizeof(table)));
  E2E_RT(cudaMemcpyToSymbol(g_counter, &zero, sizeof(zero)));
  E2E_RT(cudaMalloc(&d, n * sizeof(uint32_t)));
  grid3d_kernel<<<grid, block>>>(d);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(h, d, n * sizeof(uint32_t), cudaMemcpyDeviceToHost));
  E2E_RT(cudaMemcpyFromSymbol(&count, g_counter, sizeof(count)));
  e2e_print_sum("grid3d", h, n * sizeof(uint32_t));
  printf("grid3d threads counted: %u\n", count);

  E2E_RT(cudaGetSymbolSize(&sym_size, g_result));
  E2E_RT(cudaGetSymbolAddress(&sym, g_result));
  printf("symbol size g_result: %zu\n", sym_size);
  /* The symbol's address is a device pointer the program may copy through directly. */
  {
    uint64_t v[8];
    for (int k = 0; k < 8; k++)
      v[k] = 0x0101010101010101ULL * (uint64_t)k;
    E2E_RT(cudaMemcpy(sym, v, sizeof(v), cudaMemcpyHostToDevice));
    memset(v, 0, sizeof(v));
    E2E_RT(cudaMemcpyFromSymbol(v, g_result, sizeof(v)));
    e2e_print_sum("symbol round trip", v, sizeof(v));
  }
  E2E_RT(cudaFree(d));
  free(h);
}

static void test_launch_apis(void) {
  const int n = 1 << 14;
  int *d = NULL, *h = (int *)malloc(n * sizeof(int));
  int nn = n;
  void *args[2];
  cudaStream_t s;

  for (int k = 0; k < n; k++)
    h[k] = k - n / 2;
  E2E_RT(cudaStreamCreate(&s));
  E2E_RT(cudaMalloc(&d, n * sizeof(int)));
  E2E_RT(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));

  /* cudaLaunchKernel with an argument array */
  args[0] = &d;
  args[1] = &nn;
  E2E_RT(
      cudaLaunchKernel((const void *)scale_kernel<int, 3>, dim3(n / 128), dim3(128), args, 0, s));
  /* cudaLaunchKernelExC with a priority attribute */
  {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    int least = 0, greatest = 0;
    E2E_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest));

    cfg.gridDim = dim3(n / 256);
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributePriority;
    attr[0].val.priority = greatest;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    E2E_RT(cudaLaunchKernelExC(&cfg, (const void *)scale_kernel<int, 5>, args));
  }
  /* a second template instance: a different mangled name in the same module */
  scale_kernel<int, 7><<<n / 64, 64, 0, s>>>(d, n);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpyAsync(h, d, n * sizeof(int), cudaMemcpyDeviceToHost, s));
  E2E_RT(cudaStreamSynchronize(s));
  e2e_print_sum("launch apis", h, n * sizeof(int));

  /* cluster dimension attribute: 4 blocks per cluster, 16 blocks */
  {
    uint32_t *dc = NULL, hc[16];
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    void *cargs[1];
    E2E_RT(cudaMalloc(&dc, sizeof(hc)));

    cfg.gridDim = dim3(16);
    cfg.blockDim = dim3(32);
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 4;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cargs[0] = &dc;
    E2E_RT(cudaLaunchKernelExC(&cfg, (const void *)cluster_kernel, cargs));
    E2E_RT(cudaMemcpyAsync(hc, dc, sizeof(hc), cudaMemcpyDeviceToHost, s));
    E2E_RT(cudaStreamSynchronize(s));
    printf("cluster ranks:");
    for (int k = 0; k < 16; k++)
      printf(" %x", hc[k]);
    printf("\n");
    E2E_RT(cudaFree(dc));
  }

  /* cooperative launch with a grid barrier: 8 blocks fit on any sm_90 part */
  {
    uint32_t *da = NULL, *dc = NULL, *hc = NULL;
    int cn = 8 * 128;
    void *cargs[3];
    hc = (uint32_t *)malloc(cn * sizeof(uint32_t));
    E2E_RT(cudaMalloc(&da, cn * sizeof(uint32_t)));
    E2E_RT(cudaMalloc(&dc, cn * sizeof(uint32_t)));
    cargs[0] = &da;
    cargs[1] = &dc;
    cargs[2] = &cn;
    E2E_RT(cudaLaunchCooperativeKernel((const void *)coop_kernel, dim3(8), dim3(128), cargs, 0, s));
    E2E_RT(cudaMemcpyAsync(hc, dc, cn * sizeof(uint32_t), cudaMemcpyDeviceToHost, s));
    E2E_RT(cudaStreamSynchronize(s));
    {
      int ok = 1;
      for (int k = 0; k < cn; k++)
        ok &= hc[k] == (uint32_t)k * 3u + (uint32_t)(cn - 1 - k) * 3u;
      e2e_check(ok, "cooperative grid sync");
    }
    E2E_RT(cudaFree(da));
    E2E_RT(cudaFree(dc));
    free(hc);
  }
  E2E_RT(cudaStreamDestroy(s));
  E2E_RT(cudaFree(d));
  free(h);
}

static void test_dynamic_smem_and_attributes(void) {
  /* 96 KiB of dynamic shared memory: above the 48 KiB default, so it needs the opt-in. */
  const int words = 96 * 1024 / 4, blocks = 6;
  const size_t bytes = (size_t)words * blocks * sizeof(uint32_t);
  uint32_t *in = NULL, *out = NULL, *h = (uint32_t *)malloc(bytes);
  cudaFuncAttributes fa;

  e2e_fill_u32(h, (size_t)words * blocks, 21);
  E2E_RT(cudaMalloc(&in, bytes));
  E2E_RT(cudaMalloc(&out, bytes));
  E2E_RT(cudaMemcpy(in, h, bytes, cudaMemcpyHostToDevice));
  E2E_RT(cudaFuncSetAttribute((const void *)smem_kernel,
                              cudaFuncAttributeMaxDynamicSharedMemorySize, words * 4));
  smem_kernel<<<blocks, 256, words * 4>>>(in, out, words);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(h, out, bytes, cudaMemcpyDeviceToHost));
  e2e_print_sum("dynamic smem 96KiB", h, bytes);

  memset(&fa, 0, sizeof(fa));
  E2E_RT(cudaFuncGetAttributes(&fa, (const void *)smem_kernel));
  printf("smem_kernel attrs: maxThreads=%d maxDynSmem=%d binaryVersion=%d ptxVersion=%d\n",
         fa.maxThreadsPerBlock, fa.maxDynamicSharedSizeBytes, fa.binaryVersion, fa.ptxVersion);
  memset(&fa, 0, sizeof(fa));
  E2E_RT(cudaFuncGetAttributes(&fa, (const void *)grid3d_kernel));
  printf("grid3d_kernel attrs: const=%zu local=%zu regs=%d\n", fa.constSizeBytes, fa.localSizeBytes,
         fa.numRegs);
  {
    int blocks_per_sm = -1, min_grid = -1, best_block = -1;
    E2E_RT(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks_per_sm,
                                                         (const void *)grid3d_kernel, 256, 0));
    printf("occupancy grid3d_kernel at 256 threads: %d blocks/SM\n", blocks_per_sm);
    E2E_RT(cudaOccupancyMaxPotentialBlockSize(&min_grid, &best_block, grid3d_kernel, 0, 0));
    printf("potential block size: grid=%d block=%d\n", min_grid, best_block);
  }
  E2E_RT(cudaFree(in));
  E2E_RT(cudaFree(out));
  free(h);
}

int main(void) {
  E2E_RT(cudaSetDevice(0));
  test_scalars_and_struct();
  test_grid3d_and_symbols();
  test_launch_apis();
  test_dynamic_smem_and_attributes();
  E2E_RT(cudaDeviceSynchronize());
  return e2e_finish();
}
