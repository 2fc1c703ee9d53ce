/* stress-async.cu: asynchronous copies into shared memory -- cp.async
 * (sm_80 LDGSTS, through the __pipeline_* intrinsics, multi-stage),
 * cp.async.bulk (sm_90 bulk copy completing on an mbarrier) and TMA tensor
 * loads (cp.async.bulk.tensor.2d with a CUtensorMap passed as a
 * __grid_constant__ parameter).  mbarrier phases restart per block, so a
 * persistent worker that runs several blocks must re-initialise them the
 * way the original block does -- which is what these kernels exercise.
 */
#include "corpus.cuh"

#include <cuda.h>
#include <cuda_pipeline.h>

/* Double-buffered cp.async: stage i+1 loads while stage i is summed. */
template <int TILE> __global__ void cp_async_pipeline(const float4 *in, float4 *out, int tiles) {
  __shared__ float4 buf[2][TILE];
  int t = threadIdx.x;
  float4 acc = make_float4(0, 0, 0, 0);
  const float4 *base = in + (size_t)blockIdx.x * tiles * TILE;
  __pipeline_memcpy_async(&buf[0][t], &base[t], sizeof(float4));
  __pipeline_commit();
  for (int i = 0; i < tiles; i++) {
    if (i + 1 < tiles)
      __pipeline_memcpy_async(&buf[(i + 1) & 1][t], &base[(size_t)(i + 1) * TILE + t],
                              sizeof(float4));
    __pipeline_commit();
    __pipeline_wait_prior(1);
    __syncthreads();
    float4 v = buf[i & 1][(t + i) % TILE];
    acc.x += v.x;
    acc.y += v.y;
    acc.z += v.z;
    acc.w += v.w;
    __syncthreads();
  }
  out[blockIdx.x * TILE + t] = acc;
}

/* 1-D bulk copy of `bytes` into shared memory, completion on an mbarrier. */
__global__ void bulk_copy_mbarrier(const int4 *in, int4 *out, int per_block) {
  extern __shared__ __align__(128) int4 sm[];
  __shared__ __align__(8) unsigned long long bar;
  unsigned bar_a = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned sm_a = (unsigned)__cvta_generic_to_shared(sm);
  unsigned bytes = per_block * 16u;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_a));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_a), "r"(bytes)
                 : "memory");
    asm volatile(
        "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            sm_a),
        "l"(in + (size_t)blockIdx.x * per_block), "r"(bytes), "r"(bar_a)
        : "memory");
  }
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 "
                 "%0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar_a)
                 : "memory");
  for (int i = threadIdx.x; i < per_block; i += blockDim.x) {
    int4 v = sm[per_block - 1 - i];
    out[(size_t)blockIdx.x * per_block + i] = make_int4(v.w, v.z, v.y, v.x + (int)blockIdx.x);
  }
}

/* TMA: a 32x32 float tile per block from a 2-D tensor map. */
__global__ void tma_tile_load(const __grid_constant__ CUtensorMap map, float *out, int tiles_x) {
  __shared__ __align__(128) float tile[32 * 32];
  __shared__ __align__(8) unsigned long long bar;
  unsigned bar_a = (unsigned)__cvta_generic_to_shared(&bar);
  unsigned t_a = (unsigned)__cvta_generic_to_shared(tile);
  int tx = blockIdx.x % tiles_x, ty = blockIdx.x / tiles_x;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_a));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_a), "r"(4096)
                 : "memory");
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes [%0], "
        "[%1, {%2, %3}], [%4];" ::"r"(t_a),
        "l"(&map), "r"(tx * 32), "r"(ty * 32), "r"(bar_a)
        : "memory");
  }
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0; selp.u32 "
                 "%0, 1, 0, p; }"
                 : "=r"(done)
                 : "r"(bar_a)
                 : "memory");
  for (int i = threadIdx.x; i < 1024; i += blockDim.x)
    out[(size_t)blockIdx.x * 1024 + i] = tile[i] * 2.0f + (float)(i & 31);
}

template <int TILE> static void run_cp_async(void) {
  int blocks = (int)corpus_size(1, 2000), tiles = (int)corpus_size(1, 12);
  std::vector<float> h = corpus_host_random<float>((size_t)blocks * tiles * TILE * 4);
  float4 *in = (float4 *)corpus_to_device(h);
  float4 *out = (float4 *)corpus_device_zero<float>((size_t)blocks * TILE * 4);
  cp_async_pipeline<TILE><<<blocks, TILE>>>(in, out, tiles);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
}
CORPUS_CASE(async_cp_async_64) {
  run_cp_async<64>();
}
CORPUS_CASE(async_cp_async_256) {
  run_cp_async<256>();
}

CORPUS_CASE(async_bulk_copy) {
  int blocks = (int)corpus_size(1, 3000), per_block = 16 * (int)corpus_size(1, 64);
  std::vector<int> h = corpus_host_random<int>((size_t)blocks * per_block * 4);
  int4 *in = (int4 *)corpus_to_device(h);
  int4 *out = (int4 *)corpus_device_zero<int>((size_t)blocks * per_block * 4);
  bulk_copy_mbarrier<<<blocks, 128, per_block * 16>>>(in, out, per_block);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<int> o = corpus_to_host((int *)out, (size_t)blocks * per_block * 4);
  size_t last = (size_t)blocks * per_block - 1; /* block blocks-1, i = per_block-1 -> sm[0] */
  const int *src = &h[((size_t)(blocks - 1) * per_block) * 4];
  corpus_check(o[last * 4] == src[3] && o[last * 4 + 3] == src[0] + blocks - 1,
               "bulk_copy_mbarrier");
  cudaFree(in);
  cudaFree(out);
}

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                    const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave, CUtensorMapSwizzle,
                                    CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

CORPUS_CASE(async_tma_2d) {
  int tiles_x = (int)corpus_size(1, 20), tiles_y = (int)corpus_size(1, 50);
  size_t w = tiles_x * 32, h = tiles_y * 32;
  float *in = corpus_to_device(corpus_host_random<float>(w * h));
  float *out = corpus_device_zero<float>(w * h);
  void *fn = 0;
  cudaDriverEntryPointQueryResult q;
  CORPUS_CUDA(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                               cudaEnableDefault, &q));
  if (fn == 0) {
    corpus_check(false, "cuTensorMapEncodeTiled unavailable");
    return;
  }
  CUtensorMap map;
  cuuint64_t dims[2] = {w, h}, strides[1] = {w * sizeof(float)};
  cuuint32_t box[2] = {32, 32}, estr[2] = {1, 1};
  CUresult r =
      ((encode_tiled_fn)fn)(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, in, dims, strides, box, estr,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  corpus_check(r == CUDA_SUCCESS, "cuTensorMapEncodeTiled");
  tma_tile_load<<<tiles_x * tiles_y, 128>>>(map, out, tiles_x);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
}
