/* thrust-bykey.cu: Thrust's keyed algorithms -- reduce_by_key,
 * inclusive_scan_by_key, sort_by_key, stable_sort_by_key with a custom
 * comparator -- on device_vector, keys with runs.  Split from
 * thrust-algos.cu to keep each harness program's JIT time moderate.
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

template <typename K, typename V> static void thrust_by_key(void) {
  size_t n = corpus_size(1, 1000000);
  std::vector<K> hk = corpus_host_runs<K>(n, 500);
  std::vector<V> hv = corpus_host_random<V>(n);
  thrust::device_vector<K> k(hk.begin(), hk.end()), ko(n);
  thrust::device_vector<V> v(hv.begin(), hv.end()), vo(n);
  thrust::reduce_by_key(k.begin(), k.end(), v.begin(), ko.begin(), vo.begin());
  thrust::inclusive_scan_by_key(k.begin(), k.end(), v.begin(), vo.begin());
  thrust::sort_by_key(k.begin(), k.end(), v.begin());
  thrust::stable_sort_by_key(v.begin(), v.end(), k.begin(), greater_op());
}
CORPUS_CASE(thrust_by_key_int_int) {
  thrust_by_key<int, int>();
}
CORPUS_CASE(thrust_by_key_ll_float) {
  thrust_by_key<long long, float>();
}
