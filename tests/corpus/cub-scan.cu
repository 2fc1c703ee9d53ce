/* cub-scan.cu: CUB DeviceScan instantiations -- inclusive/exclusive sums,
 * max scans and custom-operator scans, and the by-key variants, over
 * several key and value types.  Each case checks against a CPU scan.
 */
#include "cub-common.cuh"

template <typename T> static void scan_sums(void) {
  int n = (int)corpus_size(1, 3000000);
  std::vector<T> h = corpus_host_random<T>(n);
  T *in = corpus_to_device(h), *out = corpus_device_zero<T>(n);
  cub_run([&](void *t, size_t &b) { return cub::DeviceScan::InclusiveSum(t, b, in, out, n); });
  std::vector<T> o = corpus_to_host(out, n), ref(n);
  std::partial_sum(h.begin(), h.end(), ref.begin());
  corpus_check(o == ref, "DeviceScan::InclusiveSum");
  cub_run([&](void *t, size_t &b) { return cub::DeviceScan::ExclusiveSum(t, b, in, out, n); });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceScan::InclusiveScan(t, b, in, out, max_op(), n);
  });
  o = corpus_to_host(out, n);
  T m = h[0];
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    m = std::max(m, h[i]);
    ok = o[i] == m;
  }
  corpus_check(ok, "DeviceScan::InclusiveScan max");
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceScan::ExclusiveScan(t, b, in, out, xor_op(), T(0x55), n);
  });
  cudaFree(in);
  cudaFree(out);
}
CORPUS_CASE(cub_scan_int) {
  scan_sums<int>();
}
CORPUS_CASE(cub_scan_unsigned) {
  scan_sums<unsigned>();
}
CORPUS_CASE(cub_scan_ll) {
  scan_sums<long long>();
}
CORPUS_CASE(cub_scan_ull) {
  scan_sums<unsigned long long>();
}
CORPUS_CASE(cub_scan_short) {
  scan_sums<short>();
}

template <typename T> static void scan_float_max(void) {
  int n = (int)corpus_size(1, 2000000);
  T *in = corpus_to_device(corpus_host_random<T>(n)), *out = corpus_device_zero<T>(n);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceScan::InclusiveScan(t, b, in, out, max_op(), n);
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceScan::ExclusiveScan(t, b, in, out, min_op(), T(1e30), n);
  });
  cudaFree(in);
  cudaFree(out);
}
CORPUS_CASE(cub_scan_float_max) {
  scan_float_max<float>();
}
CORPUS_CASE(cub_scan_double_max) {
  scan_float_max<double>();
}

template <typename K, typename V> static void scan_by_key(void) {
  int n = (int)corpus_size(1, 2000000);
  std::vector<K> hk = corpus_host_runs<K>(n, 50);
  std::vector<V> hv = corpus_host_random<V>(n);
  K *k = corpus_to_device(hk);
  V *v = corpus_to_device(hv), *out = corpus_device_zero<V>(n);
  cub_run(
      [&](void *t, size_t &b) { return cub::DeviceScan::InclusiveSumByKey(t, b, k, v, out, n); });
  std::vector<V> o = corpus_to_host(out, n);
  V s = 0;
  bool ok = true;
  for (int i = 0; i < n && ok; i++) {
    s = (i > 0 && hk[i] == hk[i - 1]) ? V(s + hv[i]) : hv[i];
    ok = o[i] == s;
  }
  corpus_check(ok, "DeviceScan::InclusiveSumByKey");
  cub_run(
      [&](void *t, size_t &b) { return cub::DeviceScan::ExclusiveSumByKey(t, b, k, v, out, n); });
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceScan::InclusiveScanByKey(t, b, k, v, out, max_op(), n);
  });
  cudaFree(k);
  cudaFree(v);
  cudaFree(out);
}
CORPUS_CASE(cub_scan_by_key_int_int) {
  scan_by_key<int, int>();
}
CORPUS_CASE(cub_scan_by_key_char_ll) {
  scan_by_key<unsigned char, long long>();
}
CORPUS_CASE(cub_scan_by_key_ll_unsigned) {
  scan_by_key<long long, unsigned>();
}
