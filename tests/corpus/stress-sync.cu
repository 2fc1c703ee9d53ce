/* stress-sync.cu: barrier patterns a preemptible transformation must keep
 * deadlock-free -- __syncthreads after divergent returns, named barriers
 * with thread counts and bar.arrive producer/consumer pairs, barrier
 * reductions (bar.red.popc/and/or), barriers inside loops whose trip count
 * varies per block, and blocks long enough (about 200 us each) that only a
 * block that gives up in the middle frees its SM sooner.  Every kernel writes a value per thread that depends on
 * the barrier having worked, so a lost or extra arrival changes the output.
 */
#include "corpus.cuh"

/* Threads whose index is a multiple of K return before the barrier; on
 * sm_70+ exited threads count as arrived (PTX ISA, bar.sync: "exited
 * threads are treated as arrived"). */
template <int K> __global__ void early_return_then_barrier(const int *in, int *out, int n) {
  __shared__ int s[1024];
  int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
  s[t] = g < n ? in[g] : 0;
  if (t % K == 0)
    return;
  __syncthreads();
  int v = s[(t + 1) % blockDim.x] + s[(t + blockDim.x - 1) % blockDim.x];
  if (g < n)
    out[g] = v;
}

/* The whole tail of the block returns when its data runs out (the last
 * block is partial), then the rest loops with barriers. */
__global__ void tail_return_loop_barrier(const int *in, int *out, int n, int rounds) {
  __shared__ int s[512];
  int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
  if (g >= n)
    return;
  s[t] = in[g];
  for (int r = 0; r < rounds + (int)(blockIdx.x % 3); r++) {
    __syncthreads();
    int live = min((int)blockDim.x, n - (int)(blockIdx.x * blockDim.x));
    int v = s[(t + r + 1) % live];
    __syncthreads();
    s[t] = v + r;
  }
  out[g] = s[t];
}

/* Named barrier 1 with a thread count: warps 0-1 produce, warps 2-3
 * consume (bar.arrive / bar.sync pair, PTX ISA "bar, barrier"). */
__global__ void named_barrier_producer_consumer(const int *in, int *out) {
  __shared__ int buf[64];
  int t = threadIdx.x, base = blockIdx.x * 128;
  for (int round = 0; round < 4; round++) {
    if (t < 64) {
      buf[t] = in[base + (t + round * 17) % 128] * (round + 1);
      asm volatile("bar.arrive 1, 128;" ::: "memory");
      asm volatile("bar.sync 2, 128;" ::: "memory");
    } else {
      asm volatile("bar.sync 1, 128;" ::: "memory");
      out[base * 4 + round * 128 + t] = buf[t - 64] + t;
      asm volatile("bar.arrive 2, 128;" ::: "memory");
    }
  }
}

/* Named barriers split the block in two independent halves. */
__global__ void named_barrier_halves(const int *in, int *out) {
  __shared__ int s[256];
  int t = threadIdx.x, g = blockIdx.x * 256 + t;
  s[t] = in[g];
  if (t < 128) {
    asm volatile("bar.sync 3, 128;" ::: "memory");
    out[g] = s[127 - t] + 1;
  } else {
    asm volatile("bar.sync 4, 128;" ::: "memory");
    out[g] = s[383 - t] - 1;
  }
}

/* Barrier reductions: __syncthreads_count/and/or lower to bar.red. */
__global__ void barrier_reductions(const int *in, int *out, int n) {
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  int v = g < n ? in[g] : 0;
  int c = __syncthreads_count(v > 0);
  int a = __syncthreads_and(v > -900);
  int o = __syncthreads_or(v > 990);
  if (g < n)
    out[g] = c * 4 + a * 2 + o;
}

/* Divergent return inside a loop, barrier after the loop. */
__global__ void return_in_loop(const int *in, int *out, int n) {
  __shared__ int s[256];
  int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
  int acc = 0;
  s[t] = 0; /* neighbours read s[t ^ 1] even when thread t returned */
  __syncthreads();
  for (int i = 0; i < 8; i++) {
    int v = in[(g * 8 + i) % n];
    if (v > 995)
      return; /* rare, data-dependent */
    acc += v;
  }
  s[t] = acc;
  __syncthreads();
  out[g] = s[t] + s[t ^ 1];
}

template <int K> static void run_early_return(void) {
  int n = (int)corpus_size(1000, 300000), threads = 256;
  std::vector<int> h = corpus_host_random<int>(n);
  int *in = corpus_to_device(h), *out = corpus_device_zero<int>(n);
  early_return_then_barrier<K><<<(n + threads - 1) / threads, threads>>>(in, out, n);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<int> o = corpus_to_host(out, n);
  bool ok = true;
  for (int g = 0; g < n && ok; g++) {
    int t = g % threads, b = g - t;
    if (t % K == 0)
      ok = o[g] == 0;
    else {
      int l = b + (t + 1) % threads, r = b + (t + threads - 1) % threads;
      ok = o[g] == (l < n ? h[l] : 0) + (r < n ? h[r] : 0);
    }
  }
  corpus_check(ok, "early_return_then_barrier");
  cudaFree(in);
  cudaFree(out);
}
CORPUS_CASE(early_return_k2) {
  run_early_return<2>();
}
CORPUS_CASE(early_return_k3) {
  run_early_return<3>();
}
CORPUS_CASE(early_return_k32) {
  run_early_return<32>();
}
CORPUS_CASE(early_return_k33) {
  run_early_return<33>();
}

CORPUS_CASE(tail_return) {
  int n = (int)corpus_size(5000, 200000);
  int *in = corpus_to_device(corpus_host_random<int>(n)), *out = corpus_device_zero<int>(n);
  tail_return_loop_barrier<<<(n + 511) / 512, 512>>>(in, out, n, 3);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
}

CORPUS_CASE(named_barriers) {
  int blocks = (int)corpus_size(10, 2000);
  std::vector<int> h = corpus_host_random<int>(blocks * 256);
  int *in = corpus_to_device(h), *out = corpus_device_zero<int>(blocks * 512);
  named_barrier_producer_consumer<<<blocks, 128>>>(in, out);
  named_barrier_halves<<<blocks, 256>>>(in, out);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<int> o = corpus_to_host(out, blocks * 256);
  bool ok = true;
  for (int g = 0; g < blocks * 256 && ok; g++) {
    int t = g % 256, b = g - t;
    ok = o[g] == (t < 128 ? h[b + 127 - t] + 1 : h[b + 383 - t] - 1);
  }
  corpus_check(ok, "named_barrier_halves");
  cudaFree(in);
  cudaFree(out);
}

CORPUS_CASE(barrier_red) {
  int n = (int)corpus_size(1000, 400000);
  int *in = corpus_to_device(corpus_host_random<int>(n)), *out = corpus_device_zero<int>(n);
  barrier_reductions<<<(n + 191) / 192, 192>>>(in, out, n);
  int *out2 = corpus_device_zero<int>(n + 256);
  return_in_loop<<<(n + 255) / 256, 256>>>(in, out2, n);
  CORPUS_CUDA(cudaDeviceSynchronize());
  cudaFree(in);
  cudaFree(out);
  cudaFree(out2);
}

/* Long blocks: each spins about 200 us on %globaltimer and only then does
 * every thread write.  Slicing and PTB stop a kernel only between blocks;
 * the FLUSH form gives such a block up in the middle (rewrite/rw.h). */
__global__ void long_blocks(int *out, unsigned long long ns) {
  __shared__ unsigned long long t0;
  unsigned long long now;
  if (threadIdx.x == 0)
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  __syncthreads();
  do
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - t0 < ns);
  int g = blockIdx.x * blockDim.x + threadIdx.x;
  out[g] = g * 3 + 1;
}

CORPUS_CASE(long_blocks) {
  int blocks = (int)corpus_size(8, 264), threads = 128;
  int *out = corpus_device_zero<int>(blocks * threads);
  long_blocks<<<blocks, threads>>>(out, 200000ull);
  CORPUS_CUDA(cudaDeviceSynchronize());
  std::vector<int> o = corpus_to_host(out, blocks * threads);
  bool ok = true;
  for (int g = 0; g < blocks * threads && ok; g++)
    ok = o[g] == g * 3 + 1;
  corpus_check(ok, "long_blocks");
  cudaFree(out);
}
