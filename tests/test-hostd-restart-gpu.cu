/* test-hostd-restart-gpu.cu: the tenants of tests/test-hostd-restart-gpu.sh (GPU machine).
 *
 * usage: test-hostd-restart-gpu ACTION   (run under tally-run; TALLY_HOST from the env)
 *   fault    a kernel writes 1 TiB past its allocation (nothing is mapped there on any
 *            current GPU); prints "sync N" (cudaDeviceSynchronize: 700, illegal address)
 *            and "after N" (a later cudaMalloc: still 700, sticky)
 *   hold     allocates 1 GiB, prints "ready", waits until stdin closes, then prints
 *            "after SYNC MALLOC"
 *   healthy  fills 4096 words with a kernel, copies them back, checks them: "healthy N"
 *            (N the first failing cudaError_t, 0 when all worked)
 * Plain runtime-API CUDA, built with nvcc's default static cudart by the script.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

__global__ void fill(unsigned *p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    p[i] = 7u * (unsigned)i;
}

__global__ void oob(unsigned *p) {
  volatile unsigned *bad = p + (1ull << 38);
  *bad = 0xdeadbeefu;
}

int main(int argc, char **argv) {
  const int n = 4096;
  unsigned *d = NULL;
  void *q = NULL;
  cudaError_t e;
  bool hold = argc == 2 && strcmp(argv[1], "hold") == 0;

  if (argc != 2)
    return 2;
  /* hold: 1 GiB, so the script can see it come back after the restart. */
  e = cudaMalloc(&d, hold ? (size_t)1 << 30 : n * sizeof(unsigned));
  if (e != cudaSuccess) {
    printf("setup %d\n", (int)e);
    return 3;
  }
  if (strcmp(argv[1], "fault") == 0) {
    oob<<<1, 1>>>(d);
    printf("sync %d\n", (int)cudaDeviceSynchronize());
    printf("after %d\n", (int)cudaMalloc(&q, 16));
    return 0;
  }
  if (hold) {
    char c;
    printf("ready\n");
    fflush(stdout);
    while (read(0, &c, 1) > 0)
      ;
    e = cudaDeviceSynchronize();
    printf("after %d %d\n", (int)e, (int)cudaMalloc(&q, 16));
    return 0;
  }
  if (strcmp(argv[1], "healthy") == 0) {
    static unsigned h[4096];
    fill<<<n / 256, 256>>>(d, n);
    e = cudaGetLastError();
    if (e == cudaSuccess)
      e = cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost);
    for (int i = 0; e == cudaSuccess && i < n; i++)
      if (h[i] != 7u * (unsigned)i)
        e = cudaErrorUnknown;
    if (e == cudaSuccess)
      e = cudaFree(d);
    printf("healthy %d\n", (int)e);
    return 0;
  }
  return 2;
}
