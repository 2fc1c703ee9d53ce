/* pair-be.cu: the best-effort half of the CUDA C pair.
 *
 * Back-to-back launches of a kernel whose blocks each spin --block-us on
 * %globaltimer (default 1 ms), --waves full waves of the GPU per launch.
 * Two launches are kept queued so the GPU never waits for the host; the
 * host observes each launch's completion through an event and writes the
 * BE CSV of the pair benchmark, `iter,start_ns,end_ns` (CLOCK_MONOTONIC;
 * iteration k spans the completions of launches k-1 and k).  After
 * --warmup launches it creates the --ready file; it stops at SIGTERM or
 * SIGINT, or after --max-seconds, then writes the CSV.
 * Built with compute_90 PTX embedded, so tallyd can transform its kernel.
 *
 *   pair-be --out CSV [--block-us 1000] [--waves 1] [--threads 256]
 *           [--warmup 5] [--ready FILE] [--max-seconds 600]
 */
#include "pair-common.h"

#include <vector>

__global__ void pair_be_kernel(uint64_t ns, uint64_t *sink) {
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

struct be_opts {
  const char *out = nullptr, *ready = nullptr;
  double block_us = 1000, max_s = 600;
  int waves = 1, threads = 256, warmup = 5;
};

static const char be_usage[] =
    "usage: pair-be --out CSV [--block-us 1000] [--waves 1] [--threads 256]\n"
    "               [--warmup 5] [--ready FILE] [--max-seconds 600]\n";

static be_opts parse(int argc, char **argv) {
  be_opts o;
  const pair_opt opts[] = {{"--out", &o.out, nullptr, nullptr},
                           {"--ready", &o.ready, nullptr, nullptr},
                           {"--block-us", nullptr, &o.block_us, nullptr},
                           {"--waves", nullptr, nullptr, &o.waves},
                           {"--threads", nullptr, nullptr, &o.threads},
                           {"--warmup", nullptr, nullptr, &o.warmup},
                           {"--max-seconds", nullptr, &o.max_s, nullptr},
                           {nullptr, nullptr, nullptr, nullptr}};
  pair_parse(argc, argv, opts, be_usage);
  if (!o.out || o.waves < 1 || o.threads < 32 || o.threads > 1024)
    pair_usage(be_usage);
  return o;
}

int main(int argc, char **argv) {
  pair_prog = "pair-be";
  be_opts o = parse(argc, argv);
  pair_catch_stop();
  uint64_t *sink;
  cudaStream_t s;
  cudaEvent_t ev[2];
  PAIR_CHECK(cudaMalloc(&sink, sizeof(*sink)));
  PAIR_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int i = 0; i < 2; i++)
    PAIR_CHECK(cudaEventCreateWithFlags(&ev[i], cudaEventDisableTiming));
  int grid = pair_full_grid(pair_be_kernel, o.threads) * o.waves;
  uint64_t ns = (uint64_t)(o.block_us * 1000.0);
  auto launch = [&](int k) {
    pair_be_kernel<<<grid, o.threads, 0, s>>>(ns, sink);
    PAIR_CHECK(cudaGetLastError());
    PAIR_CHECK(cudaEventRecord(ev[k & 1], s));
  };
  for (int i = 0; i < o.warmup; i++)
    launch(i);
  PAIR_CHECK(cudaStreamSynchronize(s));
  pair_ready(o.ready);
  uint64_t begin;
  std::vector<uint64_t> ends = pair_run_be(s, ev, o.max_s, &begin, launch);
  double secs = pair_write_be(o.out, begin, ends);
  fprintf(stderr, "pair-be: %zu launches of %d x %d blocks in %.2f s (%.1f/s)\n", ends.size(),
          grid, o.threads, secs, secs > 0 ? ends.size() / secs : 0.0);
  return 0;
}
