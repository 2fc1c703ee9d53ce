/* corpus.cuh: what every corpus source shares -- case registration, random
 * inputs, sanity checks.
 *
 * Each tests/corpus/*.cu holds kernels (ours, or CUB/Thrust instantiations)
 * and, for each, a host "case" that makes fresh random inputs, launches the
 * work exactly as an application would (<<<>>>, CUB dispatch, Thrust), and
 * checks the result against a CPU reference where one is cheap.  Compiled
 * with -ptx the host code is ignored and the file yields corpus PTX; linked
 * into a tests/gpu/rw-diff-* program, every launch the cases make is
 * intercepted by tests/gpu/rw-diff-hook.c, which reruns it as the original
 * PTX, sliced and PTB variants and compares the bytes (see that file).
 *
 * The CPU reference checks are a sanity net for the harness itself: the
 * differential comparison against the native launch is the real test.
 */
#ifndef TALLY_CORPUS_CUH
#define TALLY_CORPUS_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

typedef void (*corpus_fn)(void);

struct corpus_case {
  const char *name;
  corpus_fn fn;
  corpus_case *next;
};

/* Defined once, in tests/gpu/rw-diff-main.cu; main runs the list in order. */
extern corpus_case *corpus_cases;
extern int corpus_failures;

struct corpus_reg {
  corpus_reg(corpus_case *c) {
    corpus_case **p = &corpus_cases;
    while (*p)
      p = &(*p)->next;
    *p = c;
  }
};

#define CORPUS_CASE(fn)                                                                            \
  static void fn(void);                                                                            \
  static corpus_case fn##_case = {#fn, fn, 0};                                                     \
  static corpus_reg fn##_reg(&fn##_case);                                                          \
  static void fn(void)

/* xorshift64*: the seed comes from RW_DIFF_SEED or the clock (main prints it). */
extern uint64_t corpus_seed_state;
static inline uint64_t corpus_rand64(void) {
  uint64_t x = corpus_seed_state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  corpus_seed_state = x;
  return x * 0x2545F4914F6CDD1DULL;
}
static inline uint32_t corpus_rand(void) {
  return (uint32_t)(corpus_rand64() >> 32);
}

#define CORPUS_CUDA(call)                                                                          \
  do {                                                                                             \
    cudaError_t err_ = (call);                                                                     \
    if (err_ != cudaSuccess) {                                                                     \
      printf("CUDA error %s at %s:%d: %s\n", cudaGetErrorName(err_), __FILE__, __LINE__, #call);   \
      corpus_failures++;                                                                           \
    }                                                                                              \
  } while (0)

static inline void corpus_check(bool ok, const char *what) {
  if (!ok) {
    printf("SANITY FAIL: %s\n", what);
    corpus_failures++;
  }
}

/* Random values of each type, in a range that keeps integer sums exact. */
template <typename T> static inline T corpus_value(void);
template <> inline int corpus_value<int>(void) {
  return (int)(corpus_rand() % 2001) - 1000;
}
template <> inline unsigned corpus_value<unsigned>(void) {
  return corpus_rand();
}
template <> inline long long corpus_value<long long>(void) {
  return (long long)(corpus_rand64() >> 20) - (1LL << 43);
}
template <> inline unsigned long long corpus_value<unsigned long long>(void) {
  return corpus_rand64();
}
template <> inline short corpus_value<short>(void) {
  return (short)(corpus_rand() % 200 - 100);
}
template <> inline unsigned char corpus_value<unsigned char>(void) {
  return (unsigned char)corpus_rand();
}
template <> inline float corpus_value<float>(void) {
  return (float)(int)(corpus_rand() % 20001 - 10000) / 64.0f;
}
template <> inline double corpus_value<double>(void) {
  return (double)(long long)(corpus_rand64() % 2000001 - 1000000) / 1024.0;
}

template <typename T> static inline std::vector<T> corpus_host_random(size_t n) {
  std::vector<T> v(n);
  for (size_t i = 0; i < n; i++)
    v[i] = corpus_value<T>();
  return v;
}

/* Device copy of a host vector (cudaMalloc: the hook tracks it). */
template <typename T> static inline T *corpus_to_device(const std::vector<T> &v) {
  T *d = 0;
  CORPUS_CUDA(cudaMalloc((void **)&d, v.size() * sizeof(T) + 16));
  CORPUS_CUDA(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return d;
}

template <typename T> static inline T *corpus_device_zero(size_t n) {
  T *d = 0;
  CORPUS_CUDA(cudaMalloc((void **)&d, n * sizeof(T) + 16));
  CORPUS_CUDA(cudaMemset(d, 0, n * sizeof(T) + 16));
  return d;
}

template <typename T> static inline std::vector<T> corpus_to_host(const T *d, size_t n) {
  std::vector<T> v(n);
  CORPUS_CUDA(cudaMemcpy(v.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}

/* A random size in [lo, hi]. */
static inline size_t corpus_size(size_t lo, size_t hi) {
  return lo + corpus_rand64() % (hi - lo + 1);
}

#endif /* TALLY_CORPUS_CUH */
