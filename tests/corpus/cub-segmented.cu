/* cub-segmented.cu: CUB segmented algorithms -- DeviceSegmentedReduce (Sum,
 * Max, ArgMin), DeviceSegmentedRadixSort (pairs, keys descending) and
 * DeviceSegmentedSort (stable pairs, keys) -- on random segment offsets,
 * empty segments included.
 */
#include "cub-common.cuh"

template <typename T> static void seg_reduce(void) {
  int n = (int)corpus_size(1, 2000000), segs = (int)corpus_size(1, 5000);
  std::vector<T> h = corpus_host_random<T>(n);
  std::vector<int> off = corpus_offsets(segs, n);
  T *in = corpus_to_device(h), *out = corpus_device_zero<T>(segs);
  int *o = corpus_to_device(off);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSegmentedReduce::Max(t, b, in, out, segs, o, o + 1);
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSegmentedReduce::Reduce(t, b, in, out, segs, o, o + 1, min_op(), T(1000000));
  });
  std::vector<T> r = corpus_to_host(out, segs);
  bool ok = true;
  for (int s = 0; s < segs && ok; s++) {
    T m = T(1000000);
    for (int i = off[s]; i < off[s + 1]; i++)
      m = std::min(m, h[i]);
    ok = r[s] == m;
  }
  corpus_check(ok, "DeviceSegmentedReduce::Reduce min");
  cudaFree(in);
  cudaFree(out);
  cudaFree(o);
}
CORPUS_CASE(cub_segreduce_int) {
  seg_reduce<int>();
}
CORPUS_CASE(cub_segreduce_float) {
  seg_reduce<float>();
}
CORPUS_CASE(cub_segreduce_ll) {
  seg_reduce<long long>();
}

template <typename K, typename V> static void seg_sort(void) {
  int n = (int)corpus_size(1, 1000000), segs = (int)corpus_size(1, 3000);
  std::vector<int> off = corpus_offsets(segs, n);
  K *k = corpus_to_device(corpus_host_random<K>(n)), *ko = corpus_device_zero<K>(n);
  V *v = corpus_to_device(corpus_host_random<V>(n)), *vo = corpus_device_zero<V>(n);
  int *o = corpus_to_device(off);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSegmentedRadixSort::SortPairs(t, b, k, ko, v, vo, n, segs, o, o + 1);
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSegmentedRadixSort::SortKeysDescending(t, b, k, ko, n, segs, o, o + 1);
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSegmentedSort::StableSortPairs(t, b, k, ko, v, vo, n, segs, o, o + 1);
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSegmentedSort::SortKeys(t, b, k, ko, n, segs, o, o + 1);
  });
  cudaFree(k);
  cudaFree(ko);
  cudaFree(v);
  cudaFree(vo);
  cudaFree(o);
}
CORPUS_CASE(cub_segsort_int_int) {
  seg_sort<int, int>();
}
CORPUS_CASE(cub_segsort_float_ll) {
  seg_sort<float, long long>();
}
