/* rt-sticky.cu: a kernel fault is a sticky error, reported at the next synchronizing call.
 *
 * A kernel writes through a pointer far outside any allocation.  The launch itself succeeds
 * (launches are asynchronous); the fault surfaces at the next synchronizing call
 * (cudaDeviceSynchronize) as cudaErrorIllegalAddress, and from then on every call that needs
 * the context returns the same error, including cudaGetLastError, which cannot clear it.
 *
 * This must run in its own process: the fault destroys the process's context.  Under Tally
 * it must destroy only THIS tenant's view: the runner checks that tallyd and other tenants
 * carry on after it (the "after-sticky" lines of tests/gpu/e2e-run).
 */
#include <cuda_runtime.h>

#include "e2e-common.h"

__global__ void fill_kernel(uint32_t *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = (uint32_t)i * 7u;
}

/* Writes 1 TiB past the allocation: nothing is mapped there on any current GPU. */
__global__ void oob_kernel(uint32_t *p) {
  volatile uint32_t *bad = p + (1ull << 38);
  *bad = 0xdeadbeefu;
}

int main(void) {
  const int n = 4096;
  uint32_t *d = NULL, h[4096];
  cudaError_t e;

  E2E_RT(cudaSetDevice(0));
  E2E_RT(cudaMalloc(&d, n * sizeof(uint32_t)));
  fill_kernel<<<n / 256, 256>>>(d, n);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  e2e_print_sum("before fault", h, sizeof(h));

  oob_kernel<<<1, 1>>>(d);
  printf("launch of faulting kernel: %s\n", cudaGetErrorName(cudaGetLastError()));
  e = cudaDeviceSynchronize();
  printf("next synchronize: %s\n", cudaGetErrorName(e));
  printf("peek after fault: %s\n", cudaGetErrorName(cudaPeekAtLastError()));
  printf("get last error after fault: %s\n", cudaGetErrorName(cudaGetLastError()));
  printf("get last error again (sticky): %s\n", cudaGetErrorName(cudaGetLastError()));
  {
    void *p = NULL;
    printf("malloc after fault: %s\n", cudaGetErrorName(cudaMalloc(&p, 16)));
  }
  printf("memcpy after fault: %s\n",
         cudaGetErrorName(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost)));
  fill_kernel<<<1, 32>>>(d, 32);
  printf("launch after fault: %s\n", cudaGetErrorName(cudaGetLastError()));
  printf("synchronize again: %s\n", cudaGetErrorName(cudaDeviceSynchronize()));
  /* Every call above was expected to fail; the program's own checks are the printed names. */
  e2e_check(e == cudaErrorIllegalAddress, "fault reported as illegal address");
  return e2e_finish();
}
