// guest-gpu.cu: a runtime-API program for tests/test-guest-gpu.sh (GPU only).
//
// Touches what forwarding covers through cudart: device properties, malloc and
// free, pinned host memory, sync/async H2D/D2H/D2D copies, memset, 2D copy,
// streams with priorities, events and elapsed time, a __device__ symbol
// (cudaMemcpyToSymbol: a module global), kernel launches with several
// argument types, function attributes, occupancy, a host function, and the
// error of a bad launch.  It prints only deterministic values, so its
// output under Tally must equal its output without Tally, byte for byte.
#include <cstdio>
#include <cstring>
#include <cuda_runtime.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      printf("FAIL %s:%d %s -> %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));             \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

__device__ int scale_by;

__global__ void axpy(float a, const float *x, float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + y[i] * scale_by;
}

struct Pair {
  int a;
  double b;
};

__global__ void mix(Pair p, char c, unsigned long long *out) {
  out[threadIdx.x] = (unsigned long long)(p.a * 1000 + (int)p.b) * c + threadIdx.x;
}

static int hostfn_ran;
static void CUDART_CB on_host(void *arg) { hostfn_ran = *(int *)arg; }

int main() {
  const int n = 1 << 20;
  int count = 0;
  CK(cudaGetDeviceCount(&count));
  cudaDeviceProp p;
  CK(cudaGetDeviceProperties(&p, 0));
  printf("devices>=1 %d cc %d.%d warp %d\n", count >= 1, p.major, p.minor, p.warpSize);

  float *hx, *hy, *dx, *dy;
  CK(cudaMallocHost(&hx, n * sizeof(float)));
  CK(cudaHostAlloc(&hy, n * sizeof(float), cudaHostAllocDefault));
  for (int i = 0; i < n; i++) {
    hx[i] = (float)(i % 1000) * 0.5f;
    hy[i] = (float)(i % 7);
  }
  CK(cudaMalloc(&dx, n * sizeof(float)));
  CK(cudaMalloc(&dy, n * sizeof(float)));
  int two = 2;
  CK(cudaMemcpyToSymbol(scale_by, &two, sizeof(two)));
  cudaStream_t s;
  int least, greatest;
  CK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  CK(cudaMemcpyAsync(dx, hx, n * sizeof(float), cudaMemcpyHostToDevice, s));
  CK(cudaMemcpyAsync(dy, hy, n * sizeof(float), cudaMemcpyHostToDevice, s));
  CK(cudaEventRecord(e0, s));
  for (int k = 0; k < 10; k++)
    axpy<<<(n + 255) / 256, 256, 0, s>>>(1.5f, dx, dy, n);
  CK(cudaGetLastError());
  CK(cudaEventRecord(e1, s));
  int token = 42;
  CK(cudaLaunchHostFunc(s, on_host, &token));
  CK(cudaMemcpyAsync(hy, dy, n * sizeof(float), cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  float ms = -1;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  double sum = 0;
  for (int i = 0; i < n; i++)
    sum += hy[i];
  printf("axpy sum %.6e hostfn %d elapsed>=0 %d\n", sum, hostfn_ran, ms >= 0);

  // D2D, memset and a 2D copy on the legacy default stream.
  float *dz;
  size_t pitch;
  CK(cudaMallocPitch(&dz, &pitch, 100 * sizeof(float), 50));
  CK(cudaMemset2D(dz, pitch, 0, 100 * sizeof(float), 50));
  CK(cudaMemcpy2D(dz, pitch, dy, 100 * sizeof(float), 100 * sizeof(float), 50,
                  cudaMemcpyDeviceToDevice));
  static float back[5000];
  CK(cudaMemcpy2D(back, 100 * sizeof(float), dz, pitch, 100 * sizeof(float), 50,
                  cudaMemcpyDeviceToHost));
  double s2 = 0;
  for (int i = 0; i < 5000; i++)
    s2 += back[i];
  printf("2d sum %.6e\n", s2);

  unsigned long long *dout, hout[64];
  CK(cudaMalloc(&dout, sizeof(hout)));
  Pair pr = {7, 3.0};
  mix<<<1, 64>>>(pr, 3, dout);
  CK(cudaMemcpy(hout, dout, sizeof(hout), cudaMemcpyDeviceToHost));
  printf("mix %llu %llu\n", hout[0], hout[63]);

  cudaFuncAttributes fa;
  CK(cudaFuncGetAttributes(&fa, axpy));
  int blocks = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, axpy, 256, 0));
  printf("attr maxthreads %d occupancy>0 %d\n", fa.maxThreadsPerBlock, blocks > 0);

  axpy<<<1, 4096>>>(1.0f, dx, dy, n); // too many threads per block
  cudaError_t bad = cudaGetLastError();
  printf("bad launch: %s\n", cudaGetErrorName(bad));
  CK(cudaDeviceSynchronize());

  CK(cudaFree(dz));
  CK(cudaFree(dout));
  CK(cudaFree(dx));
  CK(cudaFree(dy));
  CK(cudaFreeHost(hx));
  CK(cudaFreeHost(hy));
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  CK(cudaStreamDestroy(s));
  printf("done\n");
  return 0;
}
