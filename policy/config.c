/* config.c: defaults and validation of the policy's configuration, and the
 * names of the policy kinds.
 *
 * A policy configuration comes from tallyd's flags and config file or
 * tally-sim's flags, so it is outside input: every field is checked here, once, before
 * any scheduler sees it.  Each default below carries its reason; the
 * measured ones are the H200's, from policy/pol-gpu.h (docs/h200.md).
 */
#include "policy/pol.h"
#include "policy/pol-gpu.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#define POL__STR2(x) #x
#define POL__STR(x) POL__STR2(x)

static const char *const kind_names[POL_KIND_COUNT] = {
    [POL_KIND_TALLY] = "tally",         [POL_KIND_PAPER] = "paper",
    [POL_KIND_TIMESLICE] = "timeslice", [POL_KIND_MPS] = "mps",
    [POL_KIND_MPS_PRIO] = "mps-prio",   [POL_KIND_TGS] = "tgs",
};

void pol_config_init(pol_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->threshold_ns = POL_DEFAULT_THRESHOLD_NS;
  /* An eager tenant's next launch follows the previous one within a launch
   * call (4.2 us p50) plus framework overhead; 50 us (about 5x the 9.3 us
   * launch+sync round trip) keeps BE out of the gaps inside one request
   * while costing BE little between requests. */
  cfg->resume_idle_ns = 50000;
  /* Flag in device memory set by an async copy on a high-priority stream:
   * signal -> kernel done 27.7 us p50. */
  cfg->flag_latency_ns = POL_GPU_FLAG_NS;
  /* A launch issued when the previous one's completion reaches the host
   * leaves the device idle about one launch+sync round trip: 9.3 us p50. */
  cfg->launch_gap_ns = POL_GPU_LAUNCH_SYNC_NS;
  /* Cross-process time-slicing on the H200: ~2 ms slices. */
  cfg->timeslice_ns = POL_GPU_TIMESLICE_NS;
  /* A switch between contexts: the shortest wait measured for a kernel
   * behind another process's kernel was 0.19 ms (of 0.19-2.3 ms); the
   * residual of a slice can be ~0, so we read the 0.19 ms as the switch
   * itself (save + restore).  Fitted, see policy/ref-timeslice.c. */
  cfg->ts_switch_ns = POL_GPU_TIMESLICE_WAIT_NS;
  /* Assumed, not measured: the driver cannot tell a pause between two
   * launches of one host thread (4.2 us per call, ~8-20 us in eager
   * frameworks) from the end of the work; we take ~5 launch+sync round
   * trips (9.3 us each), the same 50 us as resume_idle_ns. */
  cfg->ts_idle_ns = 50000;
  /* TGS-like controller: 5 ms intervals hold ~2-5 LC requests of ~1-2 ms,
   * enough to see a delay; 50 us of queueing is well above the ~5 us launch
   * latency an unloaded GPU shows, so noise does not trigger a back-off. */
  cfg->tgs_interval_ns = 5000000;
  cfg->tgs_delay_ns = 50000;
  /* One block per SM of an H200 (132 SMs): the least a kernel can hold. */
  cfg->default_resident = POL_GPU_SM_COUNT;
  /* Kernel times vary a few percent run to run; a 50% jump three times in a
   * row is a change of input or clocks, not noise. */
  cfg->drift_pct = 50;
  cfg->drift_samples = 3;
  /* Two samples: the first launch of a kernel also pays cold caches. */
  cfg->min_samples = 2;
  /* Off: BE is held while the LC is active, the strictest promise. */
  cfg->share_block_ns = 0;
  /* One: the summed turnaround budget alone, until a deeper queue is
   * measured on the GPU (tally.c, "DEPTH"). */
  cfg->be_depth = 1;
  /* A settled profile (min_samples + drift_samples samples) needs samples
   * only to notice drift; timing every launch costs the caller two timed
   * events per launch. 1 in 16 still sees a drift (drift_samples drifted
   * samples in a row) within about fifty launches of the kernel. */
  cfg->time_every = 16;
  /* A FLUSH block sees the flag at its next poll (every 64th backward
   * branch, POL_GPU_FLUSH_POLL_NS, assumed) once the flag is visible
   * (POL_GPU_FLAG_NS, measured for PTB): 29.7 us, under the default
   * threshold, so a FLUSH launch fits an empty budget. */
  cfg->flush_giveup_ns = POL_GPU_FLAG_NS + POL_GPU_FLUSH_POLL_NS;
  /* Off: with a partition not held, every BE launch goes (as measured on
   * the H200); a bound is the operator's choice until one is measured. */
  cfg->part_block_ns = 0;
  /* Some driver calls wait for every kernel of the context, the partition's
   * included (docs/decisions.md, D16): 2 ms of BE work in flight bounds
   * what such a call of the LC's can cost while still keeping two launches
   * of 1 ms, or one longer launch, on the partition's SMs. */
  cfg->part_flight_ns = 2000000;
}

int pol_config_check(const pol_config_t *cfg, const char **why) {
  const char *bad = NULL;
  /* Below ~1 us no launch can meet the threshold (launch alone is ~4 us on
   * the H200, docs/h200.md); above 1 s the "latency-critical" promise is void. */
  if (cfg->threshold_ns < 1000 || cfg->threshold_ns > 1000000000ull)
    bad = "threshold must be between 1 us and 1 s";
  else if (cfg->resume_idle_ns > 1000000000ull)
    bad = "resume idle time must be at most 1 s";
  else if (cfg->flag_latency_ns > 1000000000ull || cfg->launch_gap_ns > 1000000000ull)
    bad = "flag latency and launch gap must be at most 1 s";
  else if (cfg->flush_giveup_ns > 1000000000ull)
    bad = "FLUSH give-up time must be at most 1 s";
  else if (cfg->timeslice_ns < 1000 || cfg->timeslice_ns > 10000000000ull)
    bad = "time slice must be between 1 us and 10 s";
  else if (cfg->ts_switch_ns > cfg->timeslice_ns || cfg->ts_idle_ns > cfg->timeslice_ns)
    bad = "time-slice switch and idle times must not exceed the slice";
  else if (cfg->tgs_interval_ns < 1000 || cfg->tgs_interval_ns > 10000000000ull)
    bad = "TGS interval must be between 1 us and 10 s";
  else if (cfg->default_resident < 1 || cfg->default_resident > (1u << 20))
    bad = "default resident blocks must be between 1 and 2^20";
  else if (cfg->drift_pct < 1 || cfg->drift_pct > 1000)
    bad = "drift percent must be between 1 and 1000";
  else if (cfg->drift_samples < 1 || cfg->drift_samples > 1000)
    bad = "drift samples must be between 1 and 1000";
  else if (cfg->min_samples < 1 || cfg->min_samples > 1000)
    bad = "min samples must be between 1 and 1000";
  else if (cfg->share_block_ns > cfg->threshold_ns)
    bad = "shared block time must not exceed the threshold";
  else if (cfg->be_depth < 1 || cfg->be_depth > POL_MAX_BE_DEPTH)
    bad = "BE depth must be between 1 and " POL__STR(POL_MAX_BE_DEPTH);
  else if (cfg->time_every < 1 || cfg->time_every > 65536)
    bad = "time-every must be between 1 and 65536";
  else if (cfg->part_block_ns > 1000000000ull)
    bad = "partition block bound must be at most 1 s";
  else if (cfg->part_flight_ns > 1000000000ull)
    bad = "partition in-flight bound must be at most 1 s";
  if (bad) {
    if (why)
      *why = bad;
    return -EINVAL;
  }
  return 0;
}

const char *pol_kind_name(pol_kind_t kind) {
  if ((unsigned)kind >= POL_KIND_COUNT)
    return "unknown";
  return kind_names[kind];
}

int pol_kind_parse(const char *name, pol_kind_t *kind) {
  for (int k = 0; k < POL_KIND_COUNT; k++) {
    if (strcmp(name, kind_names[k]) == 0) {
      *kind = (pol_kind_t)k;
      return 0;
    }
  }
  return -EINVAL;
}
