/* cub-select.cu: CUB stream compaction -- DeviceSelect (If, Flagged,
 * Unique, UniqueByKey), DevicePartition (If, Flagged), DeviceRunLengthEncode
 * (Encode, NonTrivialRuns) -- and DeviceHistogram (Even, Range,
 * MultiHistogramEven on 4-channel pixels).
 */
#include "cub-common.cuh"

#include <type_traits>
#include <typeinfo>

template <typename T> static void select_all(void) {
  int n = (int)corpus_size(1, 3000000);
  std::vector<T> h = corpus_host_runs<T>(n, 100);
  for (auto &x : h)
    x = (corpus_rand() & 1) ? x : T(0) - x;
  T *in = corpus_to_device(h), *out = corpus_device_zero<T>(n);
  int *nsel = corpus_device_zero<int>(1);
  std::vector<unsigned char> hf(n);
  for (auto &f : hf)
    f = corpus_rand() & 1;
  unsigned char *flags = corpus_to_device(hf);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSelect::If(t, b, in, out, nsel, n, is_positive());
  });
  int want = (int)std::count_if(h.begin(), h.end(), [](T x) { return x > T(0); });
  corpus_check(corpus_to_host(nsel, 1)[0] == want, "DeviceSelect::If count");
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSelect::Flagged(t, b, in, flags, out, nsel, n);
  });
  cub_run([&](void *t, size_t &b) { return cub::DeviceSelect::Unique(t, b, in, out, nsel, n); });
  cub_run([&](void *t, size_t &b) {
    return cub::DevicePartition::If(t, b, in, out, nsel, n, mod3_is_zero());
  });
  cub_run([&](void *t, size_t &b) {
    return cub::DevicePartition::Flagged(t, b, in, flags, out, nsel, n);
  });
  cudaFree(in);
  cudaFree(out);
  cudaFree(nsel);
  cudaFree(flags);
}
CORPUS_CASE(cub_select_int) {
  select_all<int>();
}
CORPUS_CASE(cub_select_ll) {
  select_all<long long>();
}
CORPUS_CASE(cub_select_float) {
  select_all<float>();
}
CORPUS_CASE(cub_select_short) {
  select_all<short>();
}

template <typename K, typename V> static void unique_by_key(void) {
  int n = (int)corpus_size(1, 2000000);
  K *k = corpus_to_device(corpus_host_runs<K>(n, 30)), *ko = corpus_device_zero<K>(n);
  V *v = corpus_to_device(corpus_host_random<V>(n)), *vo = corpus_device_zero<V>(n);
  int *nsel = corpus_device_zero<int>(1);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceSelect::UniqueByKey(t, b, k, v, ko, vo, nsel, n);
  });
  cudaFree(k);
  cudaFree(ko);
  cudaFree(v);
  cudaFree(vo);
  cudaFree(nsel);
}
CORPUS_CASE(cub_unique_by_key_int_int) {
  unique_by_key<int, int>();
}
CORPUS_CASE(cub_unique_by_key_ll_double) {
  unique_by_key<long long, double>();
}

template <typename T> static void rle(void) {
  int n = (int)corpus_size(1, 2000000);
  std::vector<T> h = corpus_host_runs<T>(n, 20);
  T *in = corpus_to_device(h), *uniq = corpus_device_zero<T>(n);
  int *counts = corpus_device_zero<int>(n), *offs = corpus_device_zero<int>(n);
  int *nruns = corpus_device_zero<int>(1);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceRunLengthEncode::Encode(t, b, in, uniq, counts, nruns, n);
  });
  int runs = 1;
  for (int i = 1; i < n; i++)
    runs += h[i] != h[i - 1];
  corpus_check(corpus_to_host(nruns, 1)[0] == runs, "DeviceRunLengthEncode::Encode");
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceRunLengthEncode::NonTrivialRuns(t, b, in, offs, counts, nruns, n);
  });
  cudaFree(in);
  cudaFree(uniq);
  cudaFree(counts);
  cudaFree(offs);
  cudaFree(nruns);
}
CORPUS_CASE(cub_rle_int) {
  rle<int>();
}
CORPUS_CASE(cub_rle_uchar) {
  rle<unsigned char>();
}
CORPUS_CASE(cub_rle_double) {
  rle<double>();
}

/* Levels are int for integer samples: an 8-bit LevelT cannot hold the
 * upper bound 256 (CUB's documentation recommends a wider level type). */
template <typename S> static void histogram(void) {
  typedef typename std::conditional<std::is_floating_point<S>::value, S, int>::type L;
  int n = (int)corpus_size(1, 4000000);
  std::vector<S> h(n);
  for (auto &x : h)
    x = (S)(corpus_rand() % 250);
  S *in = corpus_to_device(h);
  int *hist = corpus_device_zero<int>(4 * 257);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceHistogram::HistogramEven(t, b, in, hist, 65, L(0), L(256), n);
  });
  /* CUB's bin for evenly spaced levels (dispatch_histogram.cuh,
   * ScaleTransform): integer common type: (s - lo) * bins / (hi - lo) in 64
   * bits; floating point: (s - lo) * (bins / (hi - lo)); only lo <= s < hi
   * count.  With lo 0, hi 256, 64 bins both give s / 4 for these samples. */
  std::vector<int> o = corpus_to_host(hist, 64), ref(64, 0);
  for (int i = 0; i < n; i++) {
    L s = (L)h[i];
    if (!(s >= L(0) && s < L(256)))
      continue;
    int bin = std::is_floating_point<L>::value
                  ? (int)((double)(s - L(0)) * (double)((L)64 / (L)(256 - 0)))
                  : (int)((unsigned long long)(s - L(0)) * 64ull / 256ull);
    ref[bin]++;
  }
  if (o != ref) {
    long long got = 0;
    int first = 0;
    while (first < 63 && o[first] == ref[first])
      first++;
    for (int b = 0; b < 64; b++)
      got += o[b];
    printf("histogram %s: n=%d, CUB counted %lld samples; bin %d: CUB %d, reference %d\n",
           typeid(S).name(), n, got, first, o[first], ref[first]);
  }
  corpus_check(o == ref, "DeviceHistogram::HistogramEven");
  std::vector<L> lv = {L(0), L(3), L(17), L(40), L(100), L(101), L(200), L(256)};
  L *levels = corpus_to_device(lv);
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceHistogram::HistogramRange(t, b, in, hist, 8, levels, n);
  });
  ::cuda::std::array<int *, 4> hists = {hist, hist + 257, hist + 514, hist + 771};
  ::cuda::std::array<int, 4> nlev = {257, 257, 257, 257};
  ::cuda::std::array<L, 4> lo = {L(0), L(0), L(0), L(0)}, hi = {L(256), L(256), L(256), L(256)};
  cub_run([&](void *t, size_t &b) {
    return cub::DeviceHistogram::MultiHistogramEven<4, 4>(t, b, in, hists, nlev, lo, hi, n / 4);
  });
  cudaFree(in);
  cudaFree(hist);
  cudaFree(levels);
}
CORPUS_CASE(cub_histogram_uchar) {
  histogram<unsigned char>();
}
CORPUS_CASE(cub_histogram_short) {
  histogram<short>();
}
CORPUS_CASE(cub_histogram_float) {
  histogram<float>();
}
