/* cub-common.cuh: running a CUB device algorithm the way applications do
 * (size query, cudaMalloc of temp storage, run), for the corpus cases.
 * The temp storage is marked as scratch for the differential harness.
 * Deterministic operators only: integer sums, min/max, xor.  Floating-point
 * sums through decoupled look-back scans may associate differently from run
 * to run, so floats appear with min/max only.
 */
#ifndef TALLY_CUB_COMMON_CUH
#define TALLY_CUB_COMMON_CUH

#include "corpus.cuh"

#include <algorithm>
#include <cub/cub.cuh>
#include <functional>
#include <numeric>

/* The differential harness (tests/gpu/rw-diff-hook.c) defines this; in
 * other builds the weak reference stays NULL. */
extern "C" void rwdiff_mark_scratch(const void *p) __attribute__((weak));

template <class F> static inline void cub_run(F f) {
  void *tmp = 0;
  size_t bytes = 0;
  CORPUS_CUDA(f(tmp, bytes));
  CORPUS_CUDA(cudaMalloc(&tmp, bytes + 16));
  /* d_temp_storage: CUB's decoupled look-back tile status keeps partial
   * aggregates whose values depend on the order blocks ran in, so the
   * harness compares it but does not fail on it */
  if (rwdiff_mark_scratch)
    rwdiff_mark_scratch(tmp);
  CORPUS_CUDA(f(tmp, bytes));
  CORPUS_CUDA(cudaDeviceSynchronize());
  CORPUS_CUDA(cudaFree(tmp));
}

struct xor_op {
  template <typename T> __host__ __device__ T operator()(const T &a, const T &b) const {
    return a ^ b;
  }
};
struct max_op {
  template <typename T> __host__ __device__ T operator()(const T &a, const T &b) const {
    return a < b ? b : a;
  }
};
struct min_op {
  template <typename T> __host__ __device__ T operator()(const T &a, const T &b) const {
    return b < a ? b : a;
  }
};
struct less_op {
  template <typename T> __host__ __device__ bool operator()(const T &a, const T &b) const {
    return a < b;
  }
};
struct greater_op {
  template <typename T> __host__ __device__ bool operator()(const T &a, const T &b) const {
    return b < a;
  }
};
struct is_positive {
  template <typename T> __host__ __device__ bool operator()(const T &a) const { return a > T(0); }
};
struct mod3_is_zero {
  template <typename T> __host__ __device__ bool operator()(const T &a) const {
    return ((long long)a % 3) == 0;
  }
};

/* Small-range keys so that runs, uniques and segments actually occur. */
template <typename T> static inline std::vector<T> corpus_host_runs(size_t n, int range) {
  std::vector<T> v(n);
  T cur = T(0);
  for (size_t i = 0; i < n; i++) {
    if (corpus_rand() % 4 == 0)
      cur = (T)(corpus_rand() % range);
    v[i] = cur;
  }
  return v;
}

static inline std::vector<int> corpus_offsets(int segments, int n) {
  std::vector<int> off(segments + 1);
  off[0] = 0;
  for (int i = 1; i < segments; i++)
    off[i] = (int)(corpus_rand() % (n + 1));
  off[segments] = n;
  std::sort(off.begin(), off.end());
  return off;
}

#endif
