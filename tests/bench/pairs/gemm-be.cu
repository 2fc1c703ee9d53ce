/* gemm-be.cu: the best-effort half of the cuBLAS GEMM pair.
 *
 * As pair-be.cu (ready file, SIGTERM, the same CSV `iter,start_ns,end_ns`),
 * but each iteration is one cublasGemmEx of --size^3 bf16 (fp32 compute),
 * two kept queued.  Under tally-run --priority best-effort the interposed
 * cuBLAS (libtally-blas.so) cuts each into pieces within tallyd's budget;
 * with TALLY_GEMM_SPLIT=0 it runs whole (one kernel of about 1.4 ms on an
 * H200 at 8192^3).
 *
 *   gemm-be --out CSV [--size 8192] [--warmup 5] [--ready FILE] [--max-seconds 600]
 */
#include "gemm-common.h"

int main(int argc, char **argv) {
  pair_prog = "gemm-be";
  const char *out = nullptr, *ready = nullptr;
  int size = 8192, warmup = 5;
  double max_s = 600;
  static const char usage[] = "usage: gemm-be --out CSV [--size 8192] [--warmup 5] [--ready FILE]\n"
                              "               [--max-seconds 600]\n";
  const pair_opt opts[] = {{"--out", &out, nullptr, nullptr},
                           {"--ready", &ready, nullptr, nullptr},
                           {"--size", nullptr, nullptr, &size},
                           {"--warmup", nullptr, nullptr, &warmup},
                           {"--max-seconds", nullptr, &max_s, nullptr},
                           {nullptr, nullptr, nullptr, nullptr}};
  pair_parse(argc, argv, opts, usage);
  if (!out || size < 16)
    pair_usage(usage);
  pair_catch_stop();
  void *a, *b, *c;
  pair_gemm_operands(size, &a, &b, &c);
  cudaStream_t s;
  cudaEvent_t ev[2];
  cublasHandle_t h;
  PAIR_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 2; i++)
    PAIR_CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
  PAIR_BLAS_CHECK(cublasCreate(&h));
  PAIR_BLAS_CHECK(cublasSetStream(h, s));
  auto launch = [&](int k) {
    pair_gemm(h, size, a, b, c);
    PAIR_CHECK(cudaEventRecord(ev[k & 1], s));
  };
  for (int i = 0; i < warmup; i++) {
    launch(i);
    PAIR_CHECK(cudaStreamSynchronize(s)); /* lets the interposer read its timings */
  }
  pair_ready(ready);
  uint64_t begin;
  std::vector<uint64_t> ends = pair_run_be(s, ev, max_s, &begin, launch);
  double secs = pair_write_be(out, begin, ends);
  fprintf(stderr, "gemm-be: %zu GEMMs of %d^3 in %.2f s (%.1f/s)\n", ends.size(), size, secs,
          secs > 0 ? ends.size() / secs : 0.0);
  return 0;
}
