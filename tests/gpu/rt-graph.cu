/* rt-graph.cu: CUDA graphs built by hand and captured, as the CUDA samples' graph programs
 * build them (runtime API).
 *
 * A reduction graph: copy nodes uploading input from cudaMallocHost memory, a memset node, two
 * kernel nodes, a copy node downloading the partial sums back into pinned memory, and a host
 * node summing them on the host; cudaGraphGetNodes; instantiated and launched three times; a
 * clone of it instantiated and launched.  The same work captured from a stream (async copies
 * to and from pinned memory, a memset, the kernels, cudaLaunchHostFunc), replayed.  Printed:
 * the sums the host function computed and checksums, never addresses.  Over Tally, the host
 * node reads what a copy node of its graph downloaded into pinned memory: that needs the memory
 * shared with tallyd, so shared memory only (e2e-run; over TCP the copy is staged and lands at
 * the next synchronisation).
 */
#include <cuda_runtime.h>

#include "e2e-common.h"

#define N       (1 << 16)
#define THREADS 256
#define BLOCKS  64

__global__ void partial_sums(const float *in, double *out, int n) {
  __shared__ double tmp[THREADS];
  double s = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    s += in[i];
  tmp[threadIdx.x] = s;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k /= 2) {
    if (threadIdx.x < k)
      tmp[threadIdx.x] += tmp[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    out[blockIdx.x] = tmp[0];
}

__global__ void fold(double *sums, int n) {
  if (threadIdx.x == 0 && blockIdx.x == 0)
    for (int i = 1; i < n; i++)
      sums[0] += sums[i];
}

typedef struct {
  const double *partial; /* pinned: the downloaded sums */
  double total;
  int runs;
} host_sum_t;

static void CUDART_CB host_sum(void *arg) {
  host_sum_t *h = (host_sum_t *)arg;
  h->total = h->partial[0];
  h->runs++;
}

#define CK(call) E2E_RT(call)

static void build_by_hand(cudaStream_t s, float *in_h, double *out_h, float *in_d,
                          double *sums_d) {
  cudaGraph_t g, clone;
  cudaGraphExec_t e, ce;
  cudaGraphNode_t up, ms, k1, k2, down, host;
  host_sum_t hs = {out_h, 0, 0};
  CK(cudaGraphCreate(&g, 0));
  cudaMemcpy3DParms cp = {};
  cp.srcPtr = make_cudaPitchedPtr(in_h, N * sizeof(float), N, 1);
  cp.dstPtr = make_cudaPitchedPtr(in_d, N * sizeof(float), N, 1);
  cp.extent = make_cudaExtent(N * sizeof(float), 1, 1);
  cp.kind = cudaMemcpyHostToDevice;
  CK(cudaGraphAddMemcpyNode(&up, g, NULL, 0, &cp));
  cudaMemsetParams mp = {};
  mp.dst = sums_d, mp.value = 0, mp.pitch = 0, mp.elementSize = 4;
  mp.width = BLOCKS * 2, mp.height = 1;
  CK(cudaGraphAddMemsetNode(&ms, g, NULL, 0, &mp));
  cudaGraphNode_t deps[2] = {up, ms};
  int n = N;
  void *a1[] = {&in_d, &sums_d, &n};
  cudaKernelNodeParams kp = {};
  kp.func = (void *)partial_sums, kp.gridDim = dim3(BLOCKS), kp.blockDim = dim3(THREADS);
  kp.kernelParams = a1;
  CK(cudaGraphAddKernelNode(&k1, g, deps, 2, &kp));
  int nb = BLOCKS;
  void *a2[] = {&sums_d, &nb};
  kp.func = (void *)fold, kp.gridDim = dim3(1), kp.blockDim = dim3(1), kp.kernelParams = a2;
  CK(cudaGraphAddKernelNode(&k2, g, &k1, 1, &kp));
  cudaMemcpy3DParms dp = {};
  dp.srcPtr = make_cudaPitchedPtr(sums_d, sizeof(double), 1, 1);
  dp.dstPtr = make_cudaPitchedPtr(out_h, sizeof(double), 1, 1);
  dp.extent = make_cudaExtent(sizeof(double), 1, 1);
  dp.kind = cudaMemcpyDeviceToHost;
  CK(cudaGraphAddMemcpyNode(&down, g, &k2, 1, &dp));
  cudaHostNodeParams hp = {};
  hp.fn = host_sum, hp.userData = &hs;
  CK(cudaGraphAddHostNode(&host, g, &down, 1, &hp));
  size_t nodes = 0;
  CK(cudaGraphGetNodes(g, NULL, &nodes));
  printf("nodes: %zu\n", nodes);
  CK(cudaGraphInstantiate(&e, g, 0));
  for (int i = 0; i < 3; i++)
    CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  printf("by hand: host node ran %d times, sum %.1f\n", hs.runs, hs.total);
  CK(cudaGraphClone(&clone, g));
  CK(cudaGraphInstantiate(&ce, clone, 0));
  CK(cudaGraphLaunch(ce, s));
  CK(cudaStreamSynchronize(s));
  printf("clone: host node ran %d times, sum %.1f\n", hs.runs, hs.total);
  CK(cudaGraphExecDestroy(ce));
  CK(cudaGraphDestroy(clone));
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
}

static void captured(cudaStream_t s, float *in_h, double *out_h, float *in_d, double *sums_d) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  host_sum_t hs = {out_h, 0, 0};
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  CK(cudaMemcpyAsync(in_d, in_h, N * sizeof(float), cudaMemcpyHostToDevice, s));
  CK(cudaMemsetAsync(sums_d, 0, BLOCKS * sizeof(double), s));
  partial_sums<<<BLOCKS, THREADS, 0, s>>>(in_d, sums_d, N);
  fold<<<1, 1, 0, s>>>(sums_d, BLOCKS);
  CK(cudaMemcpyAsync(out_h, sums_d, sizeof(double), cudaMemcpyDeviceToHost, s));
  CK(cudaLaunchHostFunc(s, host_sum, &hs));
  CK(cudaStreamEndCapture(s, &g));
  printf("captured: host function ran at capture %d times\n", hs.runs);
  CK(cudaGraphInstantiate(&e, g, 0));
  for (int i = 0; i < 2; i++)
    CK(cudaGraphLaunch(e, s));
  CK(cudaStreamSynchronize(s));
  printf("captured: host function ran %d times, sum %.1f\n", hs.runs, hs.total);
  CK(cudaGraphExecDestroy(e));
  CK(cudaGraphDestroy(g));
}

int main(void) {
  cudaStream_t s;
  float *in_h, *in_d;
  double *out_h, *sums_d;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMallocHost(&in_h, N * sizeof(float)));
  CK(cudaMallocHost(&out_h, sizeof(double)));
  CK(cudaMalloc(&in_d, N * sizeof(float)));
  CK(cudaMalloc(&sums_d, BLOCKS * sizeof(double)));
  for (int i = 0; i < N; i++)
    in_h[i] = (float)(i % 17); /* exact in float and double sums */
  build_by_hand(s, in_h, out_h, in_d, sums_d);
  captured(s, in_h, out_h, in_d, sums_d);
  CK(cudaFree(in_d));
  CK(cudaFree(sums_d));
  CK(cudaFreeHost(in_h));
  CK(cudaFreeHost(out_h));
  CK(cudaStreamDestroy(s));
  return e2e_finish();
}
