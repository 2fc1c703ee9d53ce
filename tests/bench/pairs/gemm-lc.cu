/* gemm-lc.cu: the latency-critical half of the cuBLAS GEMM pair.
 *
 * As pair-lc.cu (arrival offsets from the harness, one request at a time,
 * the same CSV `req,arrival_ns,start_ns,end_ns`), but each request is
 * --gemms cublasGemmEx calls of --size^3 bf16 (fp32 compute) on one
 * stream, then a stream synchronisation.  cuBLAS is linked shared, as a
 * framework's is.  --ready/--go: the harness's start handshake, as pair-lc.
 *
 *   gemm-lc --arrivals FILE --out CSV [--gemms 8] [--size 2048] [--warmup 20] [--deadline-s S]
 *           [--ready FILE --go FILE]
 */
#include "gemm-common.h"

int main(int argc, char **argv) {
  pair_prog = "gemm-lc";
  const char *arrivals = nullptr, *out = nullptr, *ready = nullptr, *go = nullptr;
  int gemms = 8, size = 2048, warmup = 20;
  double deadline_s = 0;
  static const char usage[] = "usage: gemm-lc --arrivals FILE --out CSV [--gemms 8] [--size 2048]\n"
                              "               [--warmup 20] [--deadline-s S]\n"
                              "               [--ready FILE --go FILE]\n";
  const pair_opt opts[] = {{"--arrivals", &arrivals, nullptr, nullptr},
                           {"--out", &out, nullptr, nullptr},
                           {"--gemms", nullptr, nullptr, &gemms},
                           {"--size", nullptr, nullptr, &size},
                           {"--warmup", nullptr, nullptr, &warmup},
                           {"--deadline-s", nullptr, &deadline_s, nullptr},
                           {"--ready", &ready, nullptr, nullptr},
                           {"--go", &go, nullptr, nullptr},
                           {nullptr, nullptr, nullptr, nullptr}};
  pair_parse(argc, argv, opts, usage);
  if (!arrivals || !out || gemms < 1 || size < 16)
    pair_usage(usage);
  std::vector<uint64_t> off = pair_read_offsets(arrivals);
  void *a, *b, *c;
  pair_gemm_operands(size, &a, &b, &c);
  cudaStream_t s;
  cublasHandle_t h;
  PAIR_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PAIR_BLAS_CHECK(cublasCreate(&h));
  PAIR_BLAS_CHECK(cublasSetStream(h, s));
  auto request = [&]() {
    for (int g = 0; g < gemms; g++)
      pair_gemm(h, size, a, b, c);
    PAIR_CHECK(cudaStreamSynchronize(s));
  };
  for (int i = 0; i < warmup; i++)
    request();
  pair_ready_then_go(ready, go);
  pair_served r = pair_serve(off, deadline_s, request);
  double mean_us = pair_write_lc(out, r);
  fprintf(stderr, "gemm-lc: %zu of %zu requests done, %d GEMMs of %d^3, mean execution %.1f us\n",
          r.arr.size(), off.size(), gemms, size, mean_us);
  return 0;
}
