/* guest-gpu-cublas.cu: cuBLAS through Tally, for tests/test-guest-gpu.sh.
 *
 * cublasCreate is where cuBLAS 13 loads its own fatbins (cuLibraryLoadData),
 * asks for private driver tables (cuGetExportTable) and probes kernels and
 * limits through the driver API; GPU run 2 saw CUBLAS_STATUS_INTERNAL_ERROR
 * there through Tally while it works natively.  Then one SGEMM
 * C = A * B (N x N, column-major) on the handle's default stream.
 *
 * A and B hold small integers (-3..3), so every product and every partial
 * sum of a row-column dot product is an integer far below 2^24 and is exact
 * in float: the result, and so the printed checksum, is the same for every
 * summation order cuBLAS may pick (split-K, tensor cores with TF32 off by
 * default for cublasSgemm), and native and Tally runs print identical lines.
 * Each step prints its status, so a failure names the step.  Ends with
 * "done" on success (the runner requires it).
 */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#define N 256 /* large enough that cuBLAS picks a real GEMM kernel, small enough to be instant */

static int check_rt(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    printf("%s: %s\n", what, cudaGetErrorName(e));
    return 1;
  }
  return 0;
}

int main(void) {
  cublasHandle_t h;
  cublasStatus_t st;
  float *a, *b, *c, *da = NULL, *db = NULL, *dc = NULL;
  const float one = 1.0f, zero = 0.0f;
  size_t bytes = (size_t)N * N * sizeof(float);
  double sum = 0, wsum = 0;

  a = (float *)malloc(bytes);
  b = (float *)malloc(bytes);
  c = (float *)malloc(bytes);
  if (!a || !b || !c)
    return 1;
  for (int i = 0; i < N * N; i++) {
    a[i] = (float)(i % 7 - 3);
    b[i] = (float)((i * 5 + i / N) % 7 - 3);
  }
  st = cublasCreate(&h);
  printf("cublasCreate: %d\n", (int)st);
  if (st != CUBLAS_STATUS_SUCCESS)
    return 1;
  if (check_rt(cudaMalloc((void **)&da, bytes), "cudaMalloc A") ||
      check_rt(cudaMalloc((void **)&db, bytes), "cudaMalloc B") ||
      check_rt(cudaMalloc((void **)&dc, bytes), "cudaMalloc C") ||
      check_rt(cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice), "copy A") ||
      check_rt(cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice), "copy B"))
    return 1;
  st = cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, da, N, db, N, &zero, dc, N);
  printf("cublasSgemm: %d\n", (int)st);
  if (st != CUBLAS_STATUS_SUCCESS)
    return 1;
  if (check_rt(cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost), "copy C") ||
      check_rt(cudaDeviceSynchronize(), "synchronize"))
    return 1;
  for (int i = 0; i < N * N; i++) {
    sum += c[i];
    wsum += c[i] * (double)(i % 31 + 1); /* position-weighted: catches transposed results */
  }
  printf("sgemm %dx%d checksum %.0f weighted %.0f c[0]=%.0f c[last]=%.0f\n", N, N, sum, wsum, c[0],
         c[N * N - 1]);
  st = cublasDestroy(h);
  printf("cublasDestroy: %d\n", (int)st);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  free(a);
  free(b);
  free(c);
  printf("done\n");
  return st != CUBLAS_STATUS_SUCCESS;
}
