/* thrust-algos.cu: Thrust algorithms as applications call them, on
 * device_vector (whose own fill/copy kernels join the corpus): sort,
 * sort_by_key, reduce, transform_reduce, inclusive/exclusive scan, copy_if,
 * unique, merge, set_intersection, transform (CUB's
 * DeviceTransform, which uses bulk copies on sm_90), sequence, count_if.
 */
#include "cub-common.cuh"

#include <thrust/copy.h>
#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/host_vector.h>
#include <thrust/merge.h>
#include <thrust/reduce.h>
#include <thrust/scan.h>
#include <thrust/sequence.h>
#include <thrust/set_operations.h>
#include <thrust/sort.h>
#include <thrust/transform.h>
#include <thrust/transform_reduce.h>
#include <thrust/unique.h>

template <typename T> struct affine {
  __host__ __device__ T operator()(const T &a) const { return a * T(3) + T(1); }
};
template <typename T> struct add2 {
  __host__ __device__ T operator()(const T &a, const T &b) const { return a + b; }
};

template <typename T> static void thrust_all(void) {
  size_t n = corpus_size(1, 2000000);
  std::vector<T> h = corpus_host_random<T>(n);
  thrust::device_vector<T> d(h.begin(), h.end()), e(n), f(n);
  thrust::transform(d.begin(), d.end(), e.begin(), affine<T>());
  thrust::transform(d.begin(), d.end(), e.begin(), f.begin(), add2<T>());
  T mx = thrust::reduce(d.begin(), d.end(), h[0], max_op());
  corpus_check(mx == *std::max_element(h.begin(), h.end()), "thrust::reduce max");
  (void)thrust::transform_reduce(d.begin(), d.end(), affine<T>(), T(0), max_op());
  thrust::inclusive_scan(d.begin(), d.end(), e.begin(), max_op());
  thrust::exclusive_scan(d.begin(), d.end(), e.begin(), T(0), min_op());
  auto end = thrust::copy_if(d.begin(), d.end(), e.begin(), is_positive());
  corpus_check((size_t)(end - e.begin()) ==
                   (size_t)std::count_if(h.begin(), h.end(), [](T x) { return x > T(0); }),
               "thrust::copy_if");
  (void)thrust::count_if(d.begin(), d.end(), mod3_is_zero());
  thrust::sort(d.begin(), d.end());
  thrust::host_vector<T> s = d;
  std::vector<T> ref = h;
  std::sort(ref.begin(), ref.end());
  corpus_check(memcmp(s.data(), ref.data(), n * sizeof(T)) == 0, "thrust::sort");
  thrust::sequence(e.begin(), e.end(), T(0), T(2));
  thrust::device_vector<T> m(2 * n);
  thrust::merge(d.begin(), d.end(), e.begin(), e.end(), m.begin());
  (void)thrust::set_intersection(d.begin(), d.end(), e.begin(), e.end(), f.begin());
  (void)thrust::unique(d.begin(), d.end());
}
CORPUS_CASE(thrust_int) {
  thrust_all<int>();
}
CORPUS_CASE(thrust_ll) {
  thrust_all<long long>();
}
CORPUS_CASE(thrust_double) {
  thrust_all<double>();
}
