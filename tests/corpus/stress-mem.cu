/* stress-mem.cu: shared memory (static, dynamic, both) and atomics (global
 * and shared, int and 64-bit, add/max/min/CAS/exch/and/or/xor).  Results
 * are order-independent (integer atomics), so every variant must produce
 * the same bytes whatever order its blocks run in.
 */
#include "corpus.cuh"

template <typename T, int N> __global__ void static_smem_reverse(const T *in, T *out) {
  __shared__ T s[N];
  int t = threadIdx.x, b = blockIdx.x;
  s[t] = in[b * N + t];
  __syncthreads();
  out[b * N + t] = s[N - 1 - t];
}

template <typename T> __global__ void dynamic_smem_rotate(const T *in, T *out, int shift) {
  extern __shared__ unsigned char dsm[];
  T *s = (T *)dsm;
  int t = threadIdx.x, n = blockDim.x, b = blockIdx.x;
  s[t] = in[b * n + t];
  __syncthreads();
  /* shift is in [0, 97): the host once passed (int)rand() % 97, negative half
   * the time, so s[] was read out of bounds and the output depended on stale
   * shared memory (the H200 run flagged every variant, the untransformed PTX
   * included). */
  out[b * n + t] = s[(t + shift) % n];
}

/* Static and dynamic shared memory in one kernel. */
__global__ void static_and_dynamic_smem(const int *in, int *out) {
  __shared__ int st[128];
  extern __shared__ int dy[];
  int t = threadIdx.x, b = blockIdx.x;
  st[t] = in[b * 128 + t];
  dy[t] = in[b * 128 + (t * 7) % 128];
  __syncthreads();
  out[b * 128 + t] = st[(t + 3) % 128] - dy[(t + 5) % 128];
}

/* Shared-memory histogram then global merge. */
template <int BINS> __global__ void smem_histogram(const unsigned *in, unsigned *hist, int n) {
  __shared__ unsigned h[BINS];
  for (int i = threadIdx.x; i < BINS; i += blockDim.x)
    h[i] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&h[in[i] % BINS], 1u);
  __syncthreads();
  for (int i = threadIdx.x; i < BINS; i += blockDim.x)
    atomicAdd(&hist[i], h[i]);
}

template <typename T> __global__ void global_atomics(const T *in, T *acc, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n)
    return;
  T v = in[g];
  atomicAdd(&acc[0], v);
  atomicMax(&acc[1], v);
  atomicMin(&acc[2], v);
  atomicAnd(&acc[3], v | (T)0x0F0F);
  atomicOr(&acc[4], v & (T)0x1111);
  atomicXor(&acc[5], v);
}

/* CAS loop computing a per-bucket maximum of (value * 3) -- a custom op. */
__global__ void cas_loop(const int *in, int *buckets, int n, int nb) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g >= n)
    return;
  int *p = &buckets[(unsigned)in[g] % nb], v = in[g] * 3, old = *p, assumed;
  do {
    assumed = old;
    if (assumed >= v)
      break;
    old = atomicCAS(p, assumed, v);
  } while (old != assumed);
}

/* atomicInc wraps: counts per block, order-independent total. */
__global__ void atomic_inc_count(unsigned *ctr, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  if (g < n)
    atomicInc(&ctr[blockIdx.x % 16], 0xffffffffu);
}

template <typename T, int N> static void run_static(void) {
  int blocks = (int)corpus_size(1, 5000);
  std::vector<T> h = corpus_host_random<T>((size_t)blocks * N);
  T *in = corpus_to_device(h), *out = corpus_device_zero<T>((size_t)blocks * N);
  static_smem_reverse<T, N><<<blocks, N>>>(in, out);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<T> o = corpus_to_host(out, (size_t)blocks * N);
  bool ok = true;
  for (size_t i = 0; i < o.size() && ok; i++)
    ok = memcmp(&o[i], &h[(i / N) * N + N - 1 - i % N], sizeof(T)) == 0;
  corpus_check(ok, "static_smem_reverse");
  cudaFree(in);
  cudaFree(out);
}
CORPUS_CASE(smem_static_int128) {
  run_static<int, 128>();
}
CORPUS_CASE(smem_static_float256) {
  run_static<float, 256>();
}
CORPUS_CASE(smem_static_double512) {
  run_static<double, 512>();
}
CORPUS_CASE(smem_static_char1024) {
  run_static<unsigned char, 1024>();
}

template <typename T> static void run_dynamic(void) {
  int blocks = (int)corpus_size(1, 4000), threads = 32 * (int)corpus_size(1, 32);
  T *in = corpus_to_device(corpus_host_random<T>((size_t)blocks * threads));
  T *out = corpus_device_zero<T>((size_t)blocks * threads);
  dynamic_smem_rotate<T>
      <<<blocks, threads, threads * sizeof(T)>>>(in, out, (int)(corpus_rand() % 97));
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
}
CORPUS_CASE(smem_dynamic_int) {
  run_dynamic<int>();
}
CORPUS_CASE(smem_dynamic_double) {
  run_dynamic<double>();
}
CORPUS_CASE(smem_dynamic_short) {
  run_dynamic<short>();
}

CORPUS_CASE(smem_static_and_dynamic) {
  int blocks = (int)corpus_size(1, 3000);
  int *in = corpus_to_device(corpus_host_random<int>(blocks * 128));
  int *out = corpus_device_zero<int>(blocks * 128);
  static_and_dynamic_smem<<<blocks, 128, 128 * sizeof(int)>>>(in, out);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
}

template <int BINS> static void run_hist(void) {
  int n = (int)corpus_size(1000, 1000000);
  std::vector<unsigned> h = corpus_host_random<unsigned>(n);
  unsigned *in = corpus_to_device(h), *hist = corpus_device_zero<unsigned>(BINS);
  smem_histogram<BINS><<<(int)corpus_size(1, 600), 256>>>(in, hist, n);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned> o = corpus_to_host(hist, BINS), ref(BINS, 0);
  for (int i = 0; i < n; i++)
    ref[h[i] % BINS]++;
  corpus_check(o == ref, "smem_histogram");
  cudaFree(in);
  cudaFree(hist);
}
CORPUS_CASE(atomics_smem_hist64) {
  run_hist<64>();
}
CORPUS_CASE(atomics_smem_hist1000) {
  run_hist<1000>();
}

template <typename T> static void run_global_atomics(void) {
  int n = (int)corpus_size(100, 500000);
  std::vector<T> h = corpus_host_random<T>(n);
  T *in = corpus_to_device(h);
  std::vector<T> init = {0, h[0], h[0], (T) ~(T)0, 0, 0};
  T *acc = corpus_to_device(init);
  global_atomics<T><<<(n + 127) / 128, 128>>>(in, acc, n);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(acc);
}
CORPUS_CASE(atomics_global_int) {
  run_global_atomics<int>();
}
CORPUS_CASE(atomics_global_unsigned) {
  run_global_atomics<unsigned>();
}
CORPUS_CASE(atomics_global_ull) {
  run_global_atomics<unsigned long long>();
}

CORPUS_CASE(atomics_cas_inc) {
  int n = (int)corpus_size(100, 500000), nb = (int)corpus_size(1, 4096);
  int *in = corpus_to_device(corpus_host_random<int>(n));
  std::vector<int> b0(nb, -100000);
  int *b = corpus_to_device(b0);
  cas_loop<<<(n + 255) / 256, 256>>>(in, b, n, nb);
  unsigned *ctr = corpus_device_zero<unsigned>(16);
  atomic_inc_count<<<(n + 255) / 256, 256>>>(ctr, n);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(b);
  cudaFree(ctr);
}
