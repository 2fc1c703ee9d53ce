/* cub-reduce.cu: CUB DeviceReduce -- Sum, Min, Max, ArgMin, ArgMax, custom
 * Reduce, ReduceByKey, TransformReduce -- over integer and floating types
 * (DeviceReduce's fixed even-share grid makes float sums deterministic).
 */
#include "cub-common.cuh"

struct square {
  template <typename T> __host__ __device__ T operator()(const T &a) const { return a * a; }
};

template <typename T> static void reduce_all(void) {
  int n = (int)corpus_size(1, 4000000);
  std::vector<T> h = corpus_host_random<T>(n);
  T *in = corpus_to_device(h), *out = corpus_device_zero<T>(4);
  cub_run([&](void *t, size_t &b) { return cub::DeviceReduce::Max(t, b, in, out, n); });
  corpus_check(corpus_to_host(out, 1)[0] == *std::max_element(h.begin(), h.end()),
               "DeviceReduce::Max");
  cub_run([&](void *t, size_t &b) { return cub::DeviceReduce::Min(t, b, in, out + 1, n); });
  cub_run([&](void *t, size_t &b) { return cub::DeviceReduce::Sum(t, b, in, out + 2, n); });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceReduce::Reduce(t, b, in, out + 3, n, max_op(), T(-1000000));
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceReduce::TransformReduce(t, b, in, out + 3, n, max_op(), square(), T(0));
  });
  cudaFree(in);
  cudaFree(out);
}
CORPUS_CASE(cub_reduce_int) {
  reduce_all<int>();
}
CORPUS_CASE(cub_reduce_unsigned) {
  reduce_all<unsigned>();
}
CORPUS_CASE(cub_reduce_ll) {
  reduce_all<long long>();
}
CORPUS_CASE(cub_reduce_float) {
  reduce_all<float>();
}
CORPUS_CASE(cub_reduce_double) {
  reduce_all<double>();
}
CORPUS_CASE(cub_reduce_uchar) {
  reduce_all<unsigned char>();
}

template <typename T> static void reduce_arg(void) {
  int n = (int)corpus_size(1, 3000000);
  std::vector<T> h = corpus_host_random<T>(n);
  T *in = corpus_to_device(h), *val = corpus_device_zero<T>(2);
  long long *idx = corpus_device_zero<long long>(2);
  cub_run([&](void *t, size_t &b) { return cub::DeviceReduce::ArgMin(t, b, in, val, idx, n); });
  cub_run(
      [&](void *t, size_t &b) { return cub::DeviceReduce::ArgMax(t, b, in, val + 1, idx + 1, n); });
  long long want = std::max_element(h.begin(), h.end()) - h.begin();
  corpus_check(corpus_to_host(idx, 2)[1] == want, "DeviceReduce::ArgMax");
  cudaFree(in);
  cudaFree(val);
  cudaFree(idx);
}
CORPUS_CASE(cub_reduce_arg_int) {
  reduce_arg<int>();
}
CORPUS_CASE(cub_reduce_arg_float) {
  reduce_arg<float>();
}
CORPUS_CASE(cub_reduce_arg_double) {
  reduce_arg<double>();
}

template <typename K, typename V> static void reduce_by_key(void) {
  int n = (int)corpus_size(1, 2000000);
  std::vector<K> hk = corpus_host_runs<K>(n, 1000);
  K *k = corpus_to_device(hk), *uk = corpus_device_zero<K>(n);
  V *v = corpus_to_device(corpus_host_random<V>(n)), *agg = corpus_device_zero<V>(n);
  int *nruns = corpus_device_zero<int>(1);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceReduce::ReduceByKey(t, b, k, uk, v, agg, nruns, max_op(), n);
  });
  int runs = 1;
  for (int i = 1; i < n; i++)
    runs += hk[i] != hk[i - 1];
  corpus_check(corpus_to_host(nruns, 1)[0] == runs, "DeviceReduce::ReduceByKey runs");
  cudaFree(k);
  cudaFree(uk);
  cudaFree(v);
  cudaFree(agg);
  cudaFree(nruns);
}
CORPUS_CASE(cub_reduce_by_key_int_int) {
  reduce_by_key<int, int>();
}
CORPUS_CASE(cub_reduce_by_key_ll_float) {
  reduce_by_key<long long, float>();
}
CORPUS_CASE(cub_reduce_by_key_short_double) {
  reduce_by_key<short, double>();
}
