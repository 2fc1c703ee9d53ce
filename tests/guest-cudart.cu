// guest-cudart.cu: a runtime-API program for tests/test-guest-cudart.sh.
//
// Built with nvcc twice (static cudart, the default, and -cudart shared) and
// run through tally-run against tallyd on the recording device: cudart must
// initialise through our cuGetProcAddress and export tables, and memory
// must round-trip through the daemon, pinned memory and host functions
// included.  No kernel is launched (the recording
// device cannot run real SASS); kernels are covered by tests/gpu/.
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e)); return 1; } } while (0)
static int seen = -1;
static void CUDART_CB host_read(void *p) { seen = static_cast<int *>(p)[516]; }
int main() {
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("devices %d name %s sm %d.%d mp %d\n", n, p.name, p.major, p.minor, p.multiProcessorCount);
  int *d = nullptr, h[256], back[256];
  for (int i = 0; i < 256; i++) h[i] = i * 3;
  CK(cudaMalloc(&d, sizeof(h)));
  CK(cudaMemcpy(d, h, sizeof(h), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(back, d, sizeof(h), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 256; i++) if (back[i] != h[i]) { printf("mismatch at %d\n", i); return 1; }
  CK(cudaMemset(d, 0, sizeof(h)));
  CK(cudaMemcpy(back, d, sizeof(h), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 256; i++) if (back[i] != 0) { printf("memset mismatch at %d\n", i); return 1; }
  cudaStream_t s; cudaEvent_t a, b;
  CK(cudaStreamCreate(&s));
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  CK(cudaMemcpyAsync(d, h, sizeof(h), cudaMemcpyHostToDevice, s));
  CK(cudaEventRecord(b, s));
  CK(cudaStreamSynchronize(s));
  float ms; CK(cudaEventElapsedTime(&ms, a, b));
  // Pinned memory (shared with tallyd over shm, plain memory over TCP) and a
  // host function that must run after the async D2H before it, in stream order.
  int *ph; CK(cudaMallocHost(&ph, 4096));
  for (int i = 0; i < 1024; i++) ph[i] = i + 1;
  CK(cudaMemcpyAsync(d, ph, sizeof(h), cudaMemcpyHostToDevice, s));
  CK(cudaMemsetAsync(d, 0, 16, s));
  CK(cudaMemcpyAsync(ph + 512, d, sizeof(h), cudaMemcpyDeviceToHost, s));
  CK(cudaLaunchHostFunc(s, host_read, ph));
  CK(cudaStreamSynchronize(s));
  if (ph[512] != 0 || ph[516] != 5 || ph[767] != 256 || seen != 5) {
    printf("pinned/host function mismatch: %d %d %d seen %d\n", ph[512], ph[516], ph[767], seen);
    return 1;
  }
  CK(cudaFreeHost(ph));
  CK(cudaFree(d));
  CK(cudaDeviceSynchronize());
  printf("ok\n");
  return 0;
}
