/* gemm-common.h: what the cuBLAS GEMM pair (gemm-lc.cu, gemm-be.cu) shares
 * beyond pair-common.h: the cuBLAS check, the operands and the GEMM itself
 * (size^3, bf16 in and out, fp32 compute, on the handle's stream).  Kept
 * apart so that the CUDA C pair needs no cuBLAS header.
 */
#ifndef TALLY_GEMM_COMMON_H
#define TALLY_GEMM_COMMON_H

#include "pair-common.h"

#include <cublas_v2.h>

/* Exits 1 with a message when a cuBLAS call fails. */
#define PAIR_BLAS_CHECK(call)                                                                 \
  do {                                                                                        \
    cublasStatus_t s_ = (call);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      fprintf(stderr, "%s: %s failed: %d\n", pair_prog, #call, (int)s_);                      \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

/* Three device buffers of size^2 bf16 values each (*a, *b, *c of a GEMM);
 * a and b filled with the byte 0x3c (every value about 0.0115). */
static inline void pair_gemm_operands(int size, void **a, void **b, void **c) {
  size_t bytes = (size_t)size * size * 2;
  PAIR_CHECK(cudaMalloc(a, bytes));
  PAIR_CHECK(cudaMalloc(b, bytes));
  PAIR_CHECK(cudaMalloc(c, bytes));
  PAIR_CHECK(cudaMemset(*a, 0x3c, bytes));
  PAIR_CHECK(cudaMemset(*b, 0x3c, bytes));
}

/* Queues c = a * b (size^3) on h's stream; exits 1 when cuBLAS refuses. */
static inline void pair_gemm(cublasHandle_t h, int size, const void *a, const void *b, void *c) {
  static const float one = 1, zero = 0;
  PAIR_BLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &one, a,
                               CUDA_R_16BF, size, b, CUDA_R_16BF, size, &zero, c, CUDA_R_16BF,
                               size, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

#endif
