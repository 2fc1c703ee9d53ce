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
#include "pair-common.h"

#include <cublas_v2.h>
#include <vector>

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) {
  (void)sig;
  stop_flag = 1;
}

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
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  size_t n = (size_t)size * size;
  void *a, *b, *c;
  PAIR_CHECK(cudaMalloc(&a, n * 2));
  PAIR_CHECK(cudaMalloc(&b, n * 2));
  PAIR_CHECK(cudaMalloc(&c, n * 2));
  PAIR_CHECK(cudaMemset(a, 0x3c, n * 2));
  PAIR_CHECK(cudaMemset(b, 0x3c, n * 2));
  cudaStream_t s;
  cudaEvent_t ev[2];
  cublasHandle_t h;
  PAIR_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 2; i++)
    PAIR_CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "gemm-be: cuBLAS handle failed\n");
    return 1;
  }
  float one = 1, zero = 0;
  auto launch = [&](int k) {
    if (cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, size, size, size, &one, a, CUDA_R_16BF, size, b,
                     CUDA_R_16BF, size, &zero, c, CUDA_R_16BF, size, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS) {
      fprintf(stderr, "gemm-be: cublasGemmEx failed\n");
      exit(1);
    }
    PAIR_CHECK(cudaEventRecord(ev[k & 1], s));
  };
  for (int i = 0; i < warmup; i++) {
    launch(i);
    PAIR_CHECK(cudaStreamSynchronize(s)); /* lets the interposer read its timings */
  }
  if (ready) {
    FILE *r = fopen(ready, "w");
    if (!r || fclose(r) != 0) {
      fprintf(stderr, "gemm-be: %s: cannot create\n", ready);
      return 1;
    }
  }
  std::vector<uint64_t> ends;
  uint64_t begin = pair_now_ns(), last = begin, limit = begin + (uint64_t)(max_s * 1e9);
  launch(0);
  for (int k = 1; !stop_flag && last < limit; k++) {
    launch(k);
    PAIR_CHECK(cudaEventSynchronize(ev[(k - 1) & 1]));
    last = pair_now_ns();
    ends.push_back(last);
  }
  PAIR_CHECK(cudaStreamSynchronize(s));
  FILE *f = fopen(out, "w");
  if (!f) {
    fprintf(stderr, "gemm-be: %s: %s\n", out, strerror(errno));
    return 1;
  }
  fprintf(f, "iter,start_ns,end_ns\n");
  uint64_t prev = begin;
  for (size_t i = 0; i < ends.size(); i++) {
    fprintf(f, "%zu,%llu,%llu\n", i, (unsigned long long)prev, (unsigned long long)ends[i]);
    prev = ends[i];
  }
  if (fclose(f) != 0)
    return 1;
  double secs = (double)(prev - begin) / 1e9;
  fprintf(stderr, "gemm-be: %zu GEMMs of %d^3 in %.2f s (%.1f/s)\n", ends.size(), size, secs,
          secs > 0 ? ends.size() / secs : 0.0);
  return 0;
}
