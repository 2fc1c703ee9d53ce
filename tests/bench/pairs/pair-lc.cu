/* pair-lc.cu: the latency-critical half of the CUDA C pair.
 *
 * Open-loop requests: the harness gives arrival offsets (ns from the start,
 * one per line, from `tally-pairs arrivals`); each request is --kernels
 * launches of a kernel that fills the whole GPU for --kernel-us (blocks spin
 * on %globaltimer), then one stream synchronisation.  A request starts when
 * it is due and the previous one is done (one server, FIFO); the process
 * sleeps between requests (no busy thread).  Writes the LC CSV of the pair
 * benchmark: `req,arrival_ns,start_ns,end_ns` (CLOCK_MONOTONIC; execution =
 * end - start, end-to-end = end - arrival).  All-zero offsets make a closed
 * loop (the harness's calibration of the mean service time).  With --ready
 * and --go it creates READY after its warm-up and starts its arrival clock
 * only when the file GO exists (pair_ready_then_go: the harness's start
 * handshake).
 * Built with compute_90 PTX embedded, so tallyd can transform its kernel.
 *
 *   pair-lc --arrivals FILE --out CSV [--kernels 8] [--kernel-us 25]
 *           [--threads 256] [--warmup 50] [--deadline-s S] [--ready FILE --go FILE]
 */
#include "pair-common.h"

#include <vector>

__global__ void pair_lc_kernel(uint64_t ns, uint64_t *sink) {
  __shared__ uint64_t t0;
  if (threadIdx.x == 0)
    t0 = pair_gtimer();
  __syncthreads();
  uint64_t spins = 0;
  while (pair_gtimer() - t0 < ns)
    spins++;
  if (spins == ~0ull) /* never true; keeps the loop */
    *sink = spins;
}

struct lc_opts {
  const char *arrivals = nullptr, *out = nullptr, *ready = nullptr, *go = nullptr;
  int kernels = 8, threads = 256, warmup = 50;
  double kernel_us = 25, deadline_s = 0;
};

static const char lc_usage[] =
    "usage: pair-lc --arrivals FILE --out CSV [--kernels 8] [--kernel-us 25]\n"
    "               [--threads 256] [--warmup 50] [--deadline-s S] [--ready FILE --go FILE]\n";

static lc_opts parse(int argc, char **argv) {
  lc_opts o;
  const pair_opt opts[] = {{"--arrivals", &o.arrivals, nullptr, nullptr},
                           {"--out", &o.out, nullptr, nullptr},
                           {"--kernels", nullptr, nullptr, &o.kernels},
                           {"--kernel-us", nullptr, &o.kernel_us, nullptr},
                           {"--threads", nullptr, nullptr, &o.threads},
                           {"--warmup", nullptr, nullptr, &o.warmup},
                           {"--deadline-s", nullptr, &o.deadline_s, nullptr},
                           {"--ready", &o.ready, nullptr, nullptr},
                           {"--go", &o.go, nullptr, nullptr},
                           {nullptr, nullptr, nullptr, nullptr}};
  pair_parse(argc, argv, opts, lc_usage);
  if (!o.arrivals || !o.out || o.kernels < 1 || o.threads < 32 || o.threads > 1024)
    pair_usage(lc_usage);
  return o;
}

int main(int argc, char **argv) {
  pair_prog = "pair-lc";
  lc_opts o = parse(argc, argv);
  std::vector<uint64_t> off = pair_read_offsets(o.arrivals);
  uint64_t *sink;
  cudaStream_t s;
  PAIR_CHECK(cudaMalloc(&sink, sizeof(*sink)));
  PAIR_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int grid = pair_full_grid(pair_lc_kernel, o.threads);
  uint64_t ns = (uint64_t)(o.kernel_us * 1000.0);
  auto request = [&]() {
    for (int k = 0; k < o.kernels; k++)
      pair_lc_kernel<<<grid, o.threads, 0, s>>>(ns, sink);
    PAIR_CHECK(cudaGetLastError());
    PAIR_CHECK(cudaStreamSynchronize(s));
  };
  for (int i = 0; i < o.warmup; i++)
    request();
  pair_ready_then_go(o.ready, o.go);
  pair_served r = pair_serve(off, o.deadline_s, request);
  double mean_us = pair_write_lc(o.out, r);
  fprintf(stderr, "pair-lc: %zu of %zu requests done, grid %d x %d, mean execution %.1f us\n",
          r.arr.size(), off.size(), grid, o.threads, mean_us);
  return 0;
}
