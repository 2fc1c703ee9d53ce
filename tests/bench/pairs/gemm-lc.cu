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
#include "pair-common.h"

#include <cublas_v2.h>
#include <vector>

#define BLAS_CHECK(call)                                                                      \
  do {                                                                                        \
    cublasStatus_t s_ = (call);                                                               \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                        \
      fprintf(stderr, "%s: %s failed: %d\n", pair_prog, #call, (int)s_);                      \
      exit(1);                                                                                \
    }                                                                                         \
  } while (0)

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
  std::vector<uint64_t> off;
  FILE *af = fopen(arrivals, "r");
  if (!af) {
    fprintf(stderr, "gemm-lc: %s: %s\n", arrivals, strerror(errno));
    return 1;
  }
  unsigned long long x;
  while (fscanf(af, "%llu", &x) == 1)
    off.push_back(x);
  fclose(af);
  size_t n = (size_t)size * size;
  void *a, *b, *c;
  PAIR_CHECK(cudaMalloc(&a, n * 2));
  PAIR_CHECK(cudaMalloc(&b, n * 2));
  PAIR_CHECK(cudaMalloc(&c, n * 2));
  PAIR_CHECK(cudaMemset(a, 0x3c, n * 2));
  PAIR_CHECK(cudaMemset(b, 0x3c, n * 2));
  cudaStream_t s;
  cublasHandle_t h;
  PAIR_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  BLAS_CHECK(cublasCreate(&h));
  BLAS_CHECK(cublasSetStream(h, s));
  float one = 1, zero = 0;
  auto request = [&]() {
    for (int g = 0; g < gemms; g++)
      BLAS_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &one, a, CUDA_R_16BF,
                              size, b, CUDA_R_16BF, size, &zero, c, CUDA_R_16BF, size,
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    PAIR_CHECK(cudaStreamSynchronize(s));
  };
  for (int i = 0; i < warmup; i++)
    request();
  pair_ready_then_go(ready, go);
  std::vector<uint64_t> arr, st, en;
  uint64_t t0 = pair_now_ns() + 1000000;
  uint64_t stop = deadline_s > 0 ? t0 + (uint64_t)(deadline_s * 1e9) : UINT64_MAX;
  for (size_t i = 0; i < off.size(); i++) {
    uint64_t due = t0 + off[i];
    if (due >= stop || pair_now_ns() >= stop)
      break;
    pair_sleep_until(due);
    uint64_t s0 = pair_now_ns();
    request();
    arr.push_back(due);
    st.push_back(s0);
    en.push_back(pair_now_ns());
  }
  FILE *f = fopen(out, "w");
  if (!f) {
    fprintf(stderr, "gemm-lc: %s: %s\n", out, strerror(errno));
    return 1;
  }
  fprintf(f, "req,arrival_ns,start_ns,end_ns\n");
  double sum = 0;
  for (size_t i = 0; i < arr.size(); i++) {
    fprintf(f, "%zu,%llu,%llu,%llu\n", i, (unsigned long long)arr[i], (unsigned long long)st[i],
            (unsigned long long)en[i]);
    sum += (double)(en[i] - st[i]);
  }
  if (fclose(f) != 0)
    return 1;
  fprintf(stderr, "gemm-lc: %zu of %zu requests done, %d GEMMs of %d^3, mean execution %.1f us\n",
          arr.size(), off.size(), gemms, size, arr.empty() ? 0.0 : sum / arr.size() / 1e3);
  return 0;
}
