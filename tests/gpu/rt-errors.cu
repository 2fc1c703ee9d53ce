/* rt-errors.cu: error behaviour of the runtime API that does NOT poison the context.
 *
 * Each case makes one invalid call and prints the error name that came back, then the next
 * cudaGetLastError / cudaPeekAtLastError answers, then proves the context still works with a
 * fresh kernel.  The runner diffs these names against the real driver's.  Cases: invalid
 * device ordinal, an allocation far larger than the GPU, a free and a copy of pointers the
 * program never allocated, launch configurations the device refuses (too many threads, too
 * much shared memory, a zero-sized grid), elapsed time on an unrecorded event, and a
 * non-existent symbol.  Sticky errors (a kernel fault) live in rt-sticky.cu, in their own
 * process, because they destroy the context.
 */
#include <cuda_runtime.h>

#include "e2e-common.h"

__global__ void fill_kernel(uint32_t *p, uint32_t v, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = v + (uint32_t)i;
}

/* Prints the result of one call and the last-error state right after it. */
static void report(const char *what, cudaError_t e) {
  cudaError_t peek = cudaPeekAtLastError();
  cudaError_t last = cudaGetLastError();
  cudaError_t after = cudaGetLastError();
  printf("%s: %s (peek %s, last %s, then %s)\n", what, cudaGetErrorName(e), cudaGetErrorName(peek),
         cudaGetErrorName(last), cudaGetErrorName(after));
}

/* A kernel and copy that must still work after an error. */
static void healthy(const char *label) {
  const int n = 1024;
  uint32_t *d = NULL, h[1024];
  E2E_RT(cudaMalloc(&d, n * sizeof(uint32_t)));
  fill_kernel<<<n / 128, 128>>>(d, 0x1000u, n);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  E2E_RT(cudaFree(d));
  e2e_print_sum(label, h, sizeof(h));
}

int main(void) {
  int count = 0;
  E2E_RT(cudaGetDeviceCount(&count));
  E2E_RT(cudaSetDevice(0));
  healthy("healthy at start");

  report("set device out of range", cudaSetDevice(count + 3));
  report("set device negative", cudaSetDevice(-1));

  {
    void *p = NULL;
    /* 1 PiB: more than any GPU has. */
    cudaError_t e = cudaMalloc(&p, (size_t)1 << 50);
    report("malloc 1 PiB", e);
    printf("malloc 1 PiB pointer stays NULL: %s\n", p == NULL ? "yes" : "no");
  }
  report("malloc NULL out pointer", cudaMalloc(NULL, 16));

  {
    /* An address in the device VA range that this program never allocated: 1 byte past a
     * fresh 2 MiB allocation rounded up to the next 1 GiB boundary is far from anything the
     * runtime or Tally hands out for a program this small. */
    char *d = NULL, host[64];
    E2E_RT(cudaMalloc(&d, 2u << 20));
    char *stray = (char *)((((uintptr_t)d) + (1ull << 40)) & ~((1ull << 30) - 1));
    report("free of a never-allocated pointer", cudaFree(stray));
    report("free of an interior pointer", cudaFree(d + 4096));
    report("memcpy d2h from never-allocated memory",
           cudaMemcpy(host, stray, sizeof(host), cudaMemcpyDeviceToHost));
    report("memcpy d2h with size 0", cudaMemcpy(host, d, 0, cudaMemcpyDeviceToHost));
    report("memcpy with invalid kind", cudaMemcpy(host, d, 8, (cudaMemcpyKind)42));
    E2E_RT(cudaFree(d));
    report("double free", cudaFree(d));
  }

  {
    uint32_t *d = NULL;
    E2E_RT(cudaMalloc(&d, 4096));
    fill_kernel<<<1, 4096>>>(d, 1, 1024); /* 4096 threads > 1024 per block */
    report("launch 4096 threads per block", cudaSuccess);
    fill_kernel<<<1, 32, 1u << 20>>>(d, 1, 32); /* 1 MiB dynamic shared memory */
    report("launch 1 MiB dynamic smem", cudaSuccess);
    fill_kernel<<<0, 32>>>(d, 1, 32);
    report("launch zero blocks", cudaSuccess);
    fill_kernel<<<dim3(1, 1u << 17), 32>>>(d, 1, 32); /* grid y > 65535 */
    report("launch grid y too large", cudaSuccess);
    E2E_RT(cudaFree(d));
  }

  {
    cudaEvent_t a, b;
    float ms = 0;
    E2E_RT(cudaEventCreate(&a));
    E2E_RT(cudaEventCreate(&b));
    report("elapsed time of unrecorded events", cudaEventElapsedTime(&ms, a, b));
    report("query of an unrecorded event", cudaEventQuery(a));
    E2E_RT(cudaEventDestroy(a));
    E2E_RT(cudaEventDestroy(b));
  }

  {
    int least = 0, greatest = 0, prio = 0;
    cudaStream_t s;
    E2E_RT(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    /* Out-of-range priorities are clamped, not refused. */
    E2E_RT(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest - 100));
    E2E_RT(cudaStreamGetPriority(s, &prio));
    printf("priority clamped to greatest: %s\n", prio == greatest ? "yes" : "no");
    E2E_RT(cudaStreamDestroy(s));
    report("stream create with bad flags", cudaStreamCreateWithFlags(&s, 0x80));
  }

  {
    size_t sz = 0;
    /* A host variable is not a device symbol. */
    static int not_a_symbol;
    report("symbol size of a host variable", cudaGetSymbolSize(&sz, &not_a_symbol));
  }

  printf("error string of invalid value: %s\n", cudaGetErrorString(cudaErrorInvalidValue));
  healthy("healthy at end");
  E2E_RT(cudaDeviceSynchronize());
  return e2e_finish();
}
