/* stress-mma.cu: tensor-core kernels -- warp-level mma.sync through the
 * wmma API (f16 -> f32, bf16 -> f32, s8 -> s32) and a warpgroup wgmma
 * (sm_90a only: built with -arch=sm_90a / compute_90a).  Tensor-core
 * results are deterministic for a given kernel, so variants must match the
 * original bit for bit; the CPU check covers the wmma f16 case.
 */
#include "corpus.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

/* One warp per 16x16 output tile of C = A (MxK, row) * B (KxN, col). */
template <typename In, typename Acc>
__global__ void wmma_gemm(const In *a, const In *b, Acc *c, int m, int n, int k) {
  int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  int tiles_n = n / 16, tm = warp / tiles_n, tn = warp % tiles_n;
  if (tm >= m / 16)
    return;
  wmma::fragment<wmma::matrix_a, 16, 16, 16, In, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, In, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, Acc> fc;
  wmma::fill_fragment(fc, Acc(0));
  for (int kk = 0; kk < k; kk += 16) {
    wmma::load_matrix_sync(fa, a + (size_t)tm * 16 * k + kk, k);
    wmma::load_matrix_sync(fb, b + (size_t)tn * 16 * k + kk, k);
    wmma::mma_sync(fc, fa, fb, fc);
  }
  wmma::store_matrix_sync(c + (size_t)tm * 16 * n + tn * 16, fc, n, wmma::mem_row_major);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HAVE_WGMMA 1
#endif

/* wgmma.mma_async m64n8k16 f32 += f16*f16, both operands from shared
 * memory through descriptors without swizzle (PTX ISA 9.0, "Matrix
 * Descriptor Format": start address, leading and stride byte offsets, all
 * >> 4).  One warpgroup (128 threads) per block; each block multiplies its
 * own 64x16 by 16x8 slice and writes 64x8 floats. */
__global__ void wgmma_m64n8k16(const __half *a, const __half *b, float *c) {
#ifdef HAVE_WGMMA
  __shared__ __align__(128) __half sa[64 * 16];
  __shared__ __align__(128) __half sb[16 * 8];
  int t = threadIdx.x;
  for (int i = t; i < 64 * 16; i += 128)
    sa[i] = a[blockIdx.x * 64 * 16 + i];
  if (t < 16 * 8)
    sb[t] = b[blockIdx.x * 16 * 8 + t];
  __syncthreads();
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  unsigned long long da = 0, db = 0;
  unsigned sa_addr = (unsigned)__cvta_generic_to_shared(sa);
  unsigned sb_addr = (unsigned)__cvta_generic_to_shared(sb);
  /* core matrices 8 rows x 16 bytes: leading offset 128 B, stride 256 B */
  da = (unsigned long long)((sa_addr & 0x3FFFF) >> 4) | (128ull >> 4) << 16 | (256ull >> 4) << 32;
  db = (unsigned long long)((sb_addr & 0x3FFFF) >> 4) | (128ull >> 4) << 16 | (256ull >> 4) << 32;
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile(
      "wgmma.fence.sync.aligned;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0,%1,%2,%3}, %4, %5, 0, 1, 1, 0, "
      "0;\n"
      "wgmma.commit_group.sync.aligned;\n"
      "wgmma.wait_group.sync.aligned 0;\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "l"(da), "l"(db)
      : "memory");
  float *o = c + blockIdx.x * 64 * 8 + t * 4;
  o[0] = d0;
  o[1] = d1;
  o[2] = d2;
  o[3] = d3;
#endif
}

static void fill_half(std::vector<__half> &v) {
  for (auto &x : v)
    x = __float2half((float)((int)(corpus_rand() % 17) - 8) / 4.0f);
}

CORPUS_CASE(mma_wmma_f16) {
  int m = 16 * (int)corpus_size(1, 16), n = 16 * (int)corpus_size(1, 16),
      k = 16 * (int)corpus_size(1, 8);
  std::vector<__half> ha((size_t)m * k), hb((size_t)n * k);
  fill_half(ha);
  fill_half(hb);
  __half *a = corpus_to_device(ha), *b = corpus_to_device(hb);
  float *c = corpus_device_zero<float>((size_t)m * n);
  int warps = (m / 16) * (n / 16);
  wmma_gemm<__half, float><<<(warps + 3) / 4, 128>>>(a, b, c, m, n, k);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<float> o = corpus_to_host(c, (size_t)m * n);
  bool ok = true;
  for (int i = 0; i < m && ok; i += 7)
    for (int j = 0; j < n && ok; j += 5) {
      float s = 0; /* small exact values: any summation order is exact */
      for (int kk = 0; kk < k; kk++)
        s += __half2float(ha[(size_t)i * k + kk]) * __half2float(hb[(size_t)j * k + kk]);
      ok = o[(size_t)i * n + j] == s;
    }
  corpus_check(ok, "wmma_gemm f16");
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}

CORPUS_CASE(mma_wmma_bf16_s8) {
  int m = 16 * (int)corpus_size(1, 8), n = 16 * (int)corpus_size(1, 8),
      k = 16 * (int)corpus_size(1, 8);
  std::vector<__nv_bfloat16> ha((size_t)m * k), hb((size_t)n * k);
  for (auto &x : ha)
    x = __float2bfloat16((float)((int)(corpus_rand() % 9) - 4));
  for (auto &x : hb)
    x = __float2bfloat16((float)((int)(corpus_rand() % 9) - 4));
  __nv_bfloat16 *a = corpus_to_device(ha), *b = corpus_to_device(hb);
  float *c = corpus_device_zero<float>((size_t)m * n);
  int warps = (m / 16) * (n / 16);
  wmma_gemm<__nv_bfloat16, float><<<(warps + 1) / 2, 64>>>(a, b, c, m, n, k);
  std::vector<signed char> sa((size_t)m * k), sb((size_t)n * k);
  for (auto &x : sa)
    x = (signed char)corpus_rand();
  for (auto &x : sb)
    x = (signed char)corpus_rand();
  signed char *a8 = corpus_to_device(sa), *b8 = corpus_to_device(sb);
  int *c32 = corpus_device_zero<int>((size_t)m * n);
  wmma_gemm<signed char, int><<<warps, 32>>>(a8, b8, c32, m, n, k);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  cudaFree(a8);
  cudaFree(b8);
  cudaFree(c32);
}

CORPUS_CASE(mma_wgmma) {
  int blocks = (int)corpus_size(1, 500);
  std::vector<__half> ha((size_t)blocks * 64 * 16), hb((size_t)blocks * 16 * 8);
  fill_half(ha);
  fill_half(hb);
  __half *a = corpus_to_device(ha), *b = corpus_to_device(hb);
  float *c = corpus_device_zero<float>((size_t)blocks * 64 * 8);
  wgmma_m64n8k16<<<blocks, 128>>>(a, b, c);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
}
