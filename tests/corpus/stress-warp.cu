/* stress-warp.cu: warp-level primitives -- shuffles (idx/up/down/xor),
 * votes (ballot/any/all), match.any/match.all, redux.sync, activemask under
 * divergence.  Each result depends only on the warp's own data, so it is
 * the same whichever worker or slice runs the block.
 */
#include "corpus.cuh"

template <typename T> __global__ void shuffle_all(const T *in, T *out, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x, lane = threadIdx.x & 31;
  T v = g < n ? in[g] : T(0);
  T a = __shfl_sync(0xffffffffu, v, (lane * 7) & 31);
  T b = __shfl_up_sync(0xffffffffu, v, 3);
  T c = __shfl_down_sync(0xffffffffu, v, 5);
  T d = __shfl_xor_sync(0xffffffffu, v, 9);
  if (g < n)
    out[g] = a + b * T(2) + c * T(3) + d * T(4);
}

template <typename T> __global__ void warp_reduce_tree(const T *in, T *out, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  T v = g < n ? in[g] : T(0);
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_down_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0)
    out[g / 32] = v;
}

__global__ void votes(const int *in, unsigned *out, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int v = g < n ? in[g] : 0;
  unsigned b = __ballot_sync(0xffffffffu, v > 0);
  int any = __any_sync(0xffffffffu, v > 990);
  int all = __all_sync(0xffffffffu, v > -990);
  if (g < n)
    out[g] = b ^ (unsigned)(any << 1 | all);
}

__global__ void match_any_all(const int *in, unsigned *out, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int v = g < n ? in[g] % 4 : 0;
  int pred;
  unsigned m = __match_any_sync(0xffffffffu, v);
  unsigned a = __match_all_sync(0xffffffffu, v & 0x100, &pred);
  if (g < n)
    out[g] = m + a + (unsigned)pred;
}

__global__ void redux_sync(const unsigned *in, unsigned *out, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v = g < n ? in[g] : 0;
  unsigned s = __reduce_add_sync(0xffffffffu, v);
  unsigned mx = __reduce_max_sync(0xffffffffu, v);
  unsigned x = __reduce_xor_sync(0xffffffffu, v);
  if (g < n)
    out[g] = s ^ mx ^ x;
}

/* Diverged half-warps shuffle among themselves under __activemask(). */
__global__ void divergent_activemask(const int *in, int *out, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int v = g < n ? in[g] : 0;
  if (threadIdx.x & 16) {
    unsigned m = __activemask();
    v += __shfl_sync(m, v, (threadIdx.x & 31) ^ 1);
  } else {
    unsigned m = __activemask();
    v -= __popc(m) + __shfl_xor_sync(m, v, 2);
  }
  if (g < n)
    out[g] = v;
}

template <typename T> static void run_shuffle(void) {
  int n = (int)corpus_size(32, 600000);
  T *in = corpus_to_device(corpus_host_random<T>(n)), *out = corpus_device_zero<T>(n);
  shuffle_all<T><<<(n + 127) / 128, 128>>>(in, out, n);
  T *red = corpus_device_zero<T>(n / 32 + 64);
  warp_reduce_tree<T><<<(n + 255) / 256, 256>>>(in, red, n);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
  cudaFree(red);
}
CORPUS_CASE(warp_shuffle_int) {
  run_shuffle<int>();
}
CORPUS_CASE(warp_shuffle_float) {
  run_shuffle<float>();
}
CORPUS_CASE(warp_shuffle_double) {
  run_shuffle<double>();
}
CORPUS_CASE(warp_shuffle_ll) {
  run_shuffle<long long>();
}

CORPUS_CASE(warp_votes_match_redux) {
  int n = (int)corpus_size(32, 600000);
  std::vector<int> h = corpus_host_random<int>(n);
  int *in = corpus_to_device(h);
  unsigned *o1 = corpus_device_zero<unsigned>(n), *o2 = corpus_device_zero<unsigned>(n);
  unsigned *o3 = corpus_device_zero<unsigned>(n);
  int *o4 = corpus_device_zero<int>(n);
  votes<<<(n + 255) / 256, 256>>>(in, o1, n);
  match_any_all<<<(n + 255) / 256, 256>>>(in, o2, n);
  redux_sync<<<(n + 63) / 64, 64>>>((const unsigned *)in, o3, n);
  divergent_activemask<<<(n + 95) / 96, 96>>>(in, o4, n);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(o1);
  cudaFree(o2);
  cudaFree(o3);
  cudaFree(o4);
}
