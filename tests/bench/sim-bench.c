/* sim-bench.c: how fast the simulator runs and how much memory it needs.
 *
 * Part 1, speed: simulated (logical) blocks per second of CPU time on one
 * core, for the heaviest bundled pair (BERT batch-1 inference next to GPT-2
 * training, our policy) and for GPT-2 training alone under MPS.  Target:
 * >= 1,000,000 blocks/s.
 * Part 2, memory: peak resident set (getrusage) after simulating a
 * 10-minute arrival trace: Poisson LC requests of the bundled ResNet-50
 * batch-1 trace at 50% load, alone, so memory that grows with the trace
 * (latency samples, arrivals) shows; the GPU state itself is bounded.
 * Usage: tests/bench/sim-bench [speed_seconds (default 2)] [memory_minutes (default 10)]
 * CPU time is per process (CLOCK_PROCESS_CPUTIME_ID), so other jobs on the
 * machine do not inflate the figure much.
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#ifndef SIM_TRACE_DIR
#define SIM_TRACE_DIR "sim/traces"
#endif

static double cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int load(const char *file, sim_trace_t *t) {
  char path[4096], err[256];
  const char *dir = getenv("TALLY_SIM_TRACES");
  snprintf(path, sizeof(path), "%s/%s", dir ? dir : SIM_TRACE_DIR, file);
  if (sim_trace_load(path, t, err, sizeof(err)) != 0) {
    fprintf(stderr, "sim-bench: %s: %s\n", path, err);
    return -1;
  }
  return 0;
}

static int speed(const char *label, pol_kind_t kind, sim_tenant_spec_t *ts, uint32_t n,
                 uint64_t dur_ns) {
  sim_run_config_t rc;
  sim_result_t res;
  const char *why = NULL;
  memset(&rc, 0, sizeof(rc));
  sim_gpu_config_init(&rc.gpu);
  pol_config_init(&rc.pol);
  rc.kind = kind;
  rc.duration_ns = dur_ns;
  rc.ntenants = n;
  memcpy(rc.tenants, ts, n * sizeof(*ts));
  double t0 = cpu_s();
  if (sim_run(&rc, &res, &why) != 0) {
    fprintf(stderr, "sim-bench: %s: %s\n", label, why);
    return -1;
  }
  double dt = cpu_s() - t0;
  printf("%-44s %12llu blocks %10llu events %7.2f s CPU %11.0f blocks/s %10.0f events/s\n", label,
         (unsigned long long)res.blocks, (unsigned long long)res.events, dt,
         (double)res.blocks / dt, (double)res.events / dt);
  sim_result_close(&res);
  return 0;
}

int main(int argc, char **argv) {
  double speed_s = argc > 1 ? atof(argv[1]) : 2.0;
  double mem_min = argc > 2 ? atof(argv[2]) : 10.0;
  sim_trace_t bert, gpt2, resnet;
  sim_arrivals_t arr;
  sim_rng_t rng;
  if (speed_s <= 0 || mem_min <= 0) {
    fprintf(stderr, "usage: sim-bench [speed_seconds] [memory_minutes]\n");
    return 2;
  }
  if (load("bert-b1-infer.ktr", &bert) || load("gpt2-train.ktr", &gpt2) ||
      load("resnet50-b1-infer.ktr", &resnet))
    return 1;
  printf("sim-bench: simulator speed and memory (SYNTHETIC bundled traces)\n");
  printf("reproduce: %s %g %g\n\n", argv[0], speed_s, mem_min);
  uint64_t dur = (uint64_t)(speed_s * 1e9);

  /* Part 1. */
  sim_rng_init(&rng, 1);
  /* BERT batch-1 alone takes ~0.43 ms: 50% load is ~1150 requests/s. */
  if (sim_arrivals_poisson(&arr, &rng, 1150, dur) != 0)
    return 1;
  sim_tenant_spec_t ts[2] = {
      {.trace = &bert, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr},
      {.trace = &gpt2, .cls = POL_CLASS_BE, .weight = 1},
  };
  if (speed("bert-b1 + gpt2-train, policy tally", POL_KIND_TALLY, ts, 2, dur) ||
      speed("bert-b1 + gpt2-train, policy mps-prio", POL_KIND_MPS_PRIO, ts, 2, dur) ||
      speed("gpt2-train alone, mps", POL_KIND_MPS, ts + 1, 1, dur))
    return 1;
  sim_arrivals_close(&arr);

  /* Part 2. */
  uint64_t mem_dur = (uint64_t)(mem_min * 60e9);
  sim_rng_init(&rng, 2);
  /* ResNet-50 batch-1 alone takes ~0.35 ms: 50% load is ~1400 requests/s. */
  if (sim_arrivals_poisson(&arr, &rng, 1400, mem_dur) != 0)
    return 1;
  ts[0].trace = &resnet;
  char label[96];
  snprintf(label, sizeof(label), "%g-minute LC trace (%zu requests)", mem_min, arr.n);
  if (speed(label, POL_KIND_TALLY, ts, 1, mem_dur))
    return 1;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("\npeak memory (max RSS of this process, all parts): %.1f MiB\n",
         (double)ru.ru_maxrss / 1024.0);
  sim_arrivals_close(&arr);
  sim_trace_close(&bert);
  sim_trace_close(&gpt2);
  sim_trace_close(&resnet);
  return 0;
}
