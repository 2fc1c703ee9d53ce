/* cub-sort.cu: CUB DeviceRadixSort (keys, pairs, descending, DoubleBuffer,
 * bit ranges) and DeviceMergeSort (keys, pairs, stable) over several key and
 * value types.  Sorting is stable, so outputs are fully determined.
 */
#include "cub-common.cuh"

template <typename K, typename V> static void radix(void) {
  int n = (int)corpus_size(1, 3000000);
  std::vector<K> hk = corpus_host_random<K>(n);
  K *k = corpus_to_device(hk), *ko = corpus_device_zero<K>(n);
  V *v = corpus_to_device(corpus_host_random<V>(n)), *vo = corpus_device_zero<V>(n);
  cub_run(
      [&](void *t, size_t &b) { return cub::DeviceRadixSort::SortPairs(t, b, k, ko, v, vo, n); });
  std::vector<K> ref = hk, o = corpus_to_host(ko, n);
  std::stable_sort(ref.begin(), ref.end());
  corpus_check(memcmp(o.data(), ref.data(), n * sizeof(K)) == 0, "DeviceRadixSort::SortPairs");
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceRadixSort::SortPairsDescending(t, b, k, ko, v, vo, n);
  });
  cub_run([&](void *t, size_t &b) { return cub::DeviceRadixSort::SortKeys(t, b, k, ko, n); });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceRadixSort::SortKeysDescending(t, b, k, ko, n, 0, (int)sizeof(K) * 8 - 3);
  });
  /* DoubleBuffer form: dispatches the upsweep/scan/downsweep kernels. */
  cub::DoubleBuffer<K> dk(k, ko);
  cub::DoubleBuffer<V> dv(v, vo);
  cub_run([&](void *t, size_t &b) { return cub::DeviceRadixSort::SortPairs(t, b, dk, dv, n); });
  cudaFree(k);
  cudaFree(ko);
  cudaFree(v);
  cudaFree(vo);
}
CORPUS_CASE(cub_radix_uint_int) {
  radix<unsigned, int>();
}
CORPUS_CASE(cub_radix_int_float) {
  radix<int, float>();
}
CORPUS_CASE(cub_radix_float_int) {
  radix<float, int>();
}
CORPUS_CASE(cub_radix_ull_uchar) {
  radix<unsigned long long, unsigned char>();
}
CORPUS_CASE(cub_radix_double_ll) {
  radix<double, long long>();
}
CORPUS_CASE(cub_radix_short_short) {
  radix<short, short>();
}

template <typename K, typename V> static void merge(void) {
  int n = (int)corpus_size(1, 1000000);
  std::vector<K> hk = corpus_host_random<K>(n);
  K *k = corpus_to_device(hk), *ko = corpus_device_zero<K>(n);
  V *v = corpus_to_device(corpus_host_random<V>(n));
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceMergeSort::SortPairs(t, b, k, v, n, less_op());
  });
  std::vector<K> ref = hk, o = corpus_to_host(k, n);
  std::stable_sort(ref.begin(), ref.end());
  corpus_check(memcmp(o.data(), ref.data(), n * sizeof(K)) == 0, "DeviceMergeSort::SortPairs");
  K *k2 = corpus_to_device(hk);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceMergeSort::StableSortKeys(t, b, k2, n, greater_op());
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceMergeSort::SortKeysCopy(t, b, k2, ko, n, less_op());
  });
  cudaFree(k);
  cudaFree(k2);
  cudaFree(ko);
  cudaFree(v);
}
CORPUS_CASE(cub_merge_int_int) {
  merge<int, int>();
}
CORPUS_CASE(cub_merge_ll_float) {
  merge<long long, float>();
}
CORPUS_CASE(cub_merge_uint_double) {
  merge<unsigned, double>();
}
