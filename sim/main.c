/* main.c: tally-sim, the command-line front end of the simulator.
 *
 * With no arguments it is Tally's main job on a machine without a GPU: it
 * runs the bundled SYNTHETIC workload pairs under every policy and prints the
 * comparison (its first line says so).  Options pick other traces, an Azure
 * Functions 2021 CSV, policies, load, duration, seed, CSV output and a PNG
 * plot.  Progress goes to stderr; results to stdout.  Exit 0, 1 on a run
 * error, 2 on a usage error.
 */
#include "config.h"

#include "sim/sim.h"
#include "sim/sim-int.h"
#include "policy/pol-gpu.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIM_STR_(x) #x
#define SIM_STR(x)  SIM_STR_(x)
#ifndef SIM_TRACE_DIR
#define SIM_TRACE_DIR "sim/traces"
#endif
#ifndef SIM_INSTALLED_TRACE_DIR
#define SIM_INSTALLED_TRACE_DIR SIM_TRACE_DIR
#endif

static void usage(FILE *f) {
  fprintf(f,
          "usage: tally-sim [options]\n"
          "Simulates one GPU (H200 constants by default) shared by a latency-critical (LC)\n"
          "tenant and a best-effort (BE) tenant under each scheduling policy and prints\n"
          "LC p50/p99 and overhead against alone, BE throughput against alone, and system\n"
          "throughput.  With no options: the bundled SYNTHETIC pairs, every policy.\n"
          "\n"
          "  --lc FILE --be FILE   one pair of kernel traces (format: sim/trace.c)\n"
          "  --run-trace FILE      a whole run recorded by tallyd --trace (all tenants;\n"
          "                        format: sim/runtrace.c): the LC's requests and the\n"
          "                        BE's steps are cut from it and replayed on the run's\n"
          "                        own arrivals (load and --azure ignored)\n"
          "  --lc-csv FILE         with --run-trace: the LC's measured requests\n"
          "                        (req,arrival_ns,start_ns,end_ns) cut the requests and\n"
          "                        give the arrivals\n"
          "  --be-csv FILE         with --run-trace: the BE's steps (iter,start_ns,end_ns)\n"
          "  --arrivals FILE       with --run-trace, no --lc-csv: arrival offsets in ns,\n"
          "                        one a line (default: each request's first submit)\n"
          "  --launch-from-trace   with --run-trace: the launch latency is the one the\n"
          "                        trace shows (median start - submit of the LC's timed\n"
          "                        launches on an idle stream; when it has none, tallyd's\n"
          "                        issue - submit plus the BE's start - issue); the\n"
          "                        report line says which\n"
          "  --traces DIR          folder of the bundled traces (default $TALLY_SIM_TRACES,\n"
          "                        else %s if present,\n"
          "                        else %s)\n"
          "  --azure FILE          LC arrivals from an Azure Functions 2021 CSV\n"
          "                        (app,func,end_timestamp,duration); default: the bundled\n"
          "                        SYNTHETIC bursty generator\n"
          "  --func NAME           function to take from the CSV (default: busiest)\n"
          "  --policy LIST         comma list of tally,paper,timeslice,mps,mps-prio,tgs\n"
          "  --load X              LC load, fraction of its alone capacity (default 0.5)\n"
          "  --poisson             generated arrivals with exponential gaps (Poisson) in\n"
          "                        place of the bursty generator\n"
          "  --mean-gap-us X       generated arrivals X us apart on average (the rate\n"
          "                        1 / X, in place of --load)\n"
          "  --duration S          simulated seconds per run (default 2)\n"
          "  --seed N              seed of the arrival process (default 1)\n"
          "  --threshold-us X      our turnaround threshold (default 31.6)\n"
          "  --resume-idle-us X    our LC idle window before BE resumes (default 50)\n"
          "  --share-block-us X    ours: BE blocks up to X us may run while the LC is\n"
          "                        active (default 0: hold all BE)\n"
          "  --be-depth N          ours: while the LC is idle, up to N BE launches whose\n"
          "                        profiled blocks fit the threshold may be in flight\n"
          "                        (default 1)\n"
          "  --be-original-only    offer the BE's kernels in their original form only\n"
          "                        (SASS-only kernels, or tallyd --variants off; not\n"
          "                        with --run-trace, whose lines say their forms)\n"
          "  --be-flush            also offer the FLUSH form (blocks that give up at the\n"
          "                        flag) for every BE kernel that offers the sliced form\n"
          "                        (has PTX); not with --run-trace\n"
          "  --be-no-flush         never offer the BE's kernels in the FLUSH form (the\n"
          "                        three forms tallyd builds); not with --run-trace\n"
          "  --flush-commit F      a FLUSH block commits (can no longer give up) after\n"
          "                        this fraction of its run, 0..1 (default 1: blocks\n"
          "                        write only at their end)\n"
          "  --flush-giveup-us X   ours: the least turnaround a FLUSH launch is charged\n"
          "                        (default 29.7: flag latency + one poll interval)\n"
          "  --sched-delay-us X    a completion reaches the policy X us after the host\n"
          "                        sees it (a daemon's event polling; default 0: the\n"
          "                        9.3 us launch+sync round trip is the whole gap\n"
          "                        between two dependent launches)\n"
          "  --ts-slice-us X       time-slicing: slice length (default 2000)\n"
          "  --ts-switch-us X      time-slicing: context switch time (default 190)\n"
          "  --ts-idle-us X        time-slicing: owner idle this long ends its slice\n"
          "                        (default 50)\n"
          "  --sms N               SMs (default " SIM_STR(POL_GPU_SM_COUNT) ")\n"
          "  --be-sms N            BE launches run on N of the SMs only (a partition, as\n"
          "                        tallyd --be-sms; default 0: all of them)\n"
          "  --be-sms-hold 0|1     with --be-sms, ours: 1 (default) BE work is still held\n"
          "                        while the LC is active; 0, it is not (tallyd\n"
          "                        --be-sms-hold 0)\n"
          "  --be-sms-block-us X   with --be-sms-hold 0, ours: BE kernels whose profiled\n"
          "                        blocks take longer than X us are still held while the\n"
          "                        LC is active (default 0: none)\n"
          "  --be-sms-inflight-us X  with --be-sms-hold 0, ours: BE launches in flight at\n"
          "                        most X us of profiled device time (default 2000; 0: up\n"
          "                        to " SIM_STR(POL_NO_LC_INFLIGHT) " launches)\n"
          "  --lc-ctx-wait-every N every Nth LC request (the first included) begins with a\n"
          "                        driver call that waits for every BE launch issued by\n"
          "                        then, as some calls do in a context shared by tenants\n"
          "                        (docs/decisions.md, D16; default 0: none); a CTX line\n"
          "                        per run gives their count and the longest\n"
          "  --profiles FILE       ours: load profiles before, save after\n"
          "  --csv                 CSV on stdout instead of the table\n"
          "  --plot FILE.png       write latency CDFs and the trade-off (needs gnuplot)\n"
          "  --quiet               no progress on stderr\n"
          "  -h, --help            this text\n"
          "  --version             tally-sim's version\n",
          SIM_TRACE_DIR, SIM_INSTALLED_TRACE_DIR);
}

/* On a terminal: one updating line.  Elsewhere (logs, CI): one line per
 * run, so the log stays readable. */
static void progress(void *arg, const char *what, uint64_t now, uint64_t end) {
  static const char *last; /* main thread only: the run last announced */
  (void)arg;
  if (isatty(STDERR_FILENO)) {
    fprintf(stderr, "\r  %-60s %3u%%", what, (unsigned)(now * 100 / (end ? end : 1)));
  } else if (last != what) {
    fprintf(stderr, "tally-sim: running %s\n", what);
    last = what;
  }
  fflush(stderr);
}

static int parse_policies(const char *s, bool kinds[POL_KIND_COUNT]) {
  char buf[256];
  if (strlen(s) >= sizeof(buf))
    return -EINVAL;
  strcpy(buf, s);
  for (int k = 0; k < POL_KIND_COUNT; k++)
    kinds[k] = false;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    pol_kind_t k;
    if (pol_kind_parse(t, &k) < 0)
      return -EINVAL;
    kinds[k] = true;
  }
  return 0;
}

/* 4 GiB: larger than any MAF2 day. */
static char *read_file(const char *path, size_t *len) {
  char *b;
  return sim__read_file(path, (size_t)1 << 32, &b, len) < 0 ? NULL : b;
}

typedef struct whole_opts {
  const char *trace, *lc_csv, *be_csv, *arrivals;
  bool launch_from_trace;
} whole_opts_t;

/* --run-trace: the measured run's requests, steps and arrivals. */
static int run_whole(sim_compare_config_t *cc, const whole_opts_t *o, sim_row_t **rows,
                     size_t *nrows) {
  sim_wholerun_t w;
  char err[512];
  const char *why = NULL;
  int rc = sim_wholerun_load(o->trace, o->lc_csv, o->be_csv, o->arrivals, &w, err, sizeof(err));
  if (rc < 0) {
    fprintf(stderr, "tally-sim: %s\n", err);
    return rc;
  }
  size_t klc = 0, kbe = 0;
  for (size_t i = 0; i < w.lc.n; i++)
    klc += w.lc.u[i].n;
  for (size_t i = 0; i < w.be.n; i++)
    kbe += w.be.u[i].n;
  char lat[400];
  sim_launch_describe(&w.launch, lat, sizeof(lat));
  if (o->launch_from_trace && w.launch.ns > 0)
    cc->gpu.launch_ns = w.launch.ns;
  cc->arrivals = &w.arrivals;
  cc->duration_ns = w.arrivals.t_ns[w.arrivals.n - 1] + 1000000;
  fprintf(stderr,
          "tally-sim: whole-run trace %s: LC %s: %zu requests (%zu kernels, %zu outside them), "
          "BE %s: %zu steps (%zu kernels, %zu outside them), %zu preemptions; %zu arrivals over "
          "%.3f s; LC %s; simulated %.1f us%s; %zu untimed launches (block times estimated "
          "from host times)\n",
          o->trace, w.lc.u[0].name, w.lc.n, klc, w.lc.dropped, w.be.u[0].name, w.be.n, kbe,
          w.be.dropped, w.rt.preempts, w.arrivals.n, (double)cc->duration_ns / 1e9, lat,
          (double)cc->gpu.launch_ns / 1e3,
          o->launch_from_trace && w.launch.ns > 0 ? " (from the trace)" : " (the model's)",
          w.rt.untimed);
  rc = sim_compare_units(cc, w.label, w.lc.u, w.lc.n, w.be.u, w.be.n, rows, nrows, &why);
  if (rc < 0)
    fprintf(stderr, "\ntally-sim: %s: %s (%s)\n", w.label, why ? why : "failed", strerror(-rc));
  cc->arrivals = NULL;
  sim_wholerun_close(&w);
  return rc;
}

static int load_trace(const char *dir, const char *file, sim_trace_t *t) {
  char path[4096], err[256];
  if (dir)
    snprintf(path, sizeof(path), "%s/%s", dir, file);
  else
    snprintf(path, sizeof(path), "%s", file);
  int rc = sim_trace_load(path, t, err, sizeof(err));
  if (rc < 0)
    fprintf(stderr, "tally-sim: %s: %s\n", path, err);
  return rc;
}

int main(int argc, char **argv) {
  sim_compare_config_t cc;
  const char *lc_path = NULL, *be_path = NULL, *azure = NULL, *plot = NULL;
  const char *dir = getenv("TALLY_SIM_TRACES");
  whole_opts_t wo = {0};
  bool csv = false, quiet = false, be_original_only = false, be_flush = false, be_no_flush = false;
  bool be_sms_hold = true, flight_set = false;
  char *azure_text = NULL;
  sim_row_t *rows = NULL;
  size_t nrows = 0;
  int status = 0;
  enum {
    O_LC = 256,
    O_BE,
    O_TRACES,
    O_AZURE,
    O_FUNC,
    O_POLICY,
    O_LOAD,
    O_DURATION,
    O_SEED,
    O_THRESH,
    O_IDLE,
    O_SHARE,
    O_TS_SLICE,
    O_TS_SWITCH,
    O_TS_IDLE,
    O_SMS,
    O_PROFILES,
    O_CSV,
    O_PLOT,
    O_QUIET,
    O_HELP,
    O_VERSION,
    O_RUN_TRACE,
    O_LC_CSV,
    O_BE_CSV,
    O_ARRIVALS,
    O_LAUNCH_FROM_TRACE,
    O_BE_DEPTH,
    O_BE_ORIG,
    O_SCHED_DELAY,
    O_BE_FLUSH,
    O_BE_NO_FLUSH,
    O_FLUSH_COMMIT,
    O_FLUSH_GIVEUP,
    O_BE_SMS,
    O_BE_SMS_HOLD,
    O_BE_SMS_BLOCK,
    O_BE_SMS_FLIGHT,
    O_LC_CTX_WAIT,
    O_POISSON,
    O_MEAN_GAP
  };
  static const struct option opts[] = {{"lc", required_argument, 0, O_LC},
                                       {"be", required_argument, 0, O_BE},
                                       {"traces", required_argument, 0, O_TRACES},
                                       {"azure", required_argument, 0, O_AZURE},
                                       {"func", required_argument, 0, O_FUNC},
                                       {"policy", required_argument, 0, O_POLICY},
                                       {"load", required_argument, 0, O_LOAD},
                                       {"duration", required_argument, 0, O_DURATION},
                                       {"seed", required_argument, 0, O_SEED},
                                       {"threshold-us", required_argument, 0, O_THRESH},
                                       {"resume-idle-us", required_argument, 0, O_IDLE},
                                       {"share-block-us", required_argument, 0, O_SHARE},
                                       {"ts-slice-us", required_argument, 0, O_TS_SLICE},
                                       {"ts-switch-us", required_argument, 0, O_TS_SWITCH},
                                       {"ts-idle-us", required_argument, 0, O_TS_IDLE},
                                       {"sms", required_argument, 0, O_SMS},
                                       {"be-sms", required_argument, 0, O_BE_SMS},
                                       {"be-sms-hold", required_argument, 0, O_BE_SMS_HOLD},
                                       {"be-sms-block-us", required_argument, 0, O_BE_SMS_BLOCK},
                                       {"be-sms-inflight-us", required_argument, 0, O_BE_SMS_FLIGHT},
                                       {"lc-ctx-wait-every", required_argument, 0, O_LC_CTX_WAIT},
                                       {"poisson", no_argument, 0, O_POISSON},
                                       {"mean-gap-us", required_argument, 0, O_MEAN_GAP},
                                       {"profiles", required_argument, 0, O_PROFILES},
                                       {"csv", no_argument, 0, O_CSV},
                                       {"plot", required_argument, 0, O_PLOT},
                                       {"quiet", no_argument, 0, O_QUIET},
                                       {"help", no_argument, 0, O_HELP},
                                       {"version", no_argument, 0, O_VERSION},
                                       {"run-trace", required_argument, 0, O_RUN_TRACE},
                                       {"lc-csv", required_argument, 0, O_LC_CSV},
                                       {"be-csv", required_argument, 0, O_BE_CSV},
                                       {"arrivals", required_argument, 0, O_ARRIVALS},
                                       {"launch-from-trace", no_argument, 0, O_LAUNCH_FROM_TRACE},
                                       {"be-depth", required_argument, 0, O_BE_DEPTH},
                                       {"be-original-only", no_argument, 0, O_BE_ORIG},
                                       {"sched-delay-us", required_argument, 0, O_SCHED_DELAY},
                                       {"be-flush", no_argument, 0, O_BE_FLUSH},
                                       {"be-no-flush", no_argument, 0, O_BE_NO_FLUSH},
                                       {"flush-commit", required_argument, 0, O_FLUSH_COMMIT},
                                       {"flush-giveup-us", required_argument, 0, O_FLUSH_GIVEUP},
                                       {0, 0, 0, 0}};
  sim_compare_config_init(&cc);
  if (!dir)
    dir = access(SIM_TRACE_DIR, R_OK) == 0 ? SIM_TRACE_DIR : SIM_INSTALLED_TRACE_DIR;
  int o;
  while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    char *end = NULL;
    double d;
    switch (o) {
    case O_LC:
      lc_path = optarg;
      break;
    case O_BE:
      be_path = optarg;
      break;
    case O_TRACES:
      dir = optarg;
      break;
    case O_AZURE:
      azure = optarg;
      break;
    case O_FUNC:
      cc.azure_func = optarg;
      break;
    case O_POLICY:
      if (parse_policies(optarg, cc.kinds) < 0) {
        fprintf(stderr, "tally-sim: bad --policy '%s'\n", optarg);
        return 2;
      }
      break;
    case O_LOAD:
      cc.load = strtod(optarg, &end);
      if (*end || !(cc.load > 0 && cc.load < 1)) {
        fprintf(stderr, "tally-sim: --load must be in (0, 1)\n");
        return 2;
      }
      break;
    case O_DURATION:
      d = strtod(optarg, &end);
      if (*end || !(d >= 0.001 && d <= 3600)) {
        fprintf(stderr, "tally-sim: --duration must be 0.001..3600 seconds\n");
        return 2;
      }
      cc.duration_ns = (uint64_t)(d * 1e9);
      break;
    case O_SEED:
      cc.seed = strtoull(optarg, &end, 0);
      if (*end) {
        fprintf(stderr, "tally-sim: bad --seed\n");
        return 2;
      }
      break;
    case O_THRESH:
    case O_IDLE:
    case O_SHARE:
    case O_TS_SLICE:
    case O_TS_SWITCH:
    case O_TS_IDLE:
    case O_SCHED_DELAY:
    case O_FLUSH_GIVEUP:
    case O_BE_SMS_BLOCK:
    case O_BE_SMS_FLIGHT:
      d = strtod(optarg, &end);
      if (*end || !(d >= 0 && d <= 1e6)) {
        fprintf(stderr, "tally-sim: bad microseconds '%s'\n", optarg);
        return 2;
      }
      if (o == O_THRESH)
        cc.pol.threshold_ns = (uint64_t)(d * 1000);
      else if (o == O_IDLE)
        cc.pol.resume_idle_ns = (uint64_t)(d * 1000);
      else if (o == O_SHARE)
        cc.pol.share_block_ns = (uint64_t)(d * 1000);
      else if (o == O_TS_SLICE)
        cc.pol.timeslice_ns = (uint64_t)(d * 1000);
      else if (o == O_TS_SWITCH)
        cc.pol.ts_switch_ns = (uint64_t)(d * 1000);
      else if (o == O_SCHED_DELAY)
        cc.gpu.sched_ns = (uint64_t)(d * 1000);
      else if (o == O_FLUSH_GIVEUP)
        cc.pol.flush_giveup_ns = (uint64_t)(d * 1000);
      else if (o == O_BE_SMS_BLOCK)
        cc.pol.part_block_ns = (uint64_t)(d * 1000);
      else if (o == O_BE_SMS_FLIGHT)
        flight_set = true, cc.pol.part_flight_ns = (uint64_t)(d * 1000);
      else
        cc.pol.ts_idle_ns = (uint64_t)(d * 1000);
      break;
    case O_POISSON:
      cc.poisson = true;
      break;
    case O_MEAN_GAP:
      cc.mean_gap_us = strtod(optarg, &end);
      if (*end || !(cc.mean_gap_us >= 1 && cc.mean_gap_us <= 1e9)) {
        fprintf(stderr, "tally-sim: --mean-gap-us must be 1..1e9\n");
        return 2;
      }
      break;
    case O_LC_CTX_WAIT: {
      unsigned long v = strtoul(optarg, &end, 10);
      if (*end || !*optarg || optarg[0] == '-' || v > 1000000) {
        fprintf(stderr, "tally-sim: bad --lc-ctx-wait-every (0..1000000)\n");
        return 2;
      }
      cc.lc_ctx_wait_every = (uint32_t)v;
      break;
    }
    case O_BE_DEPTH:
      cc.pol.be_depth = (uint32_t)strtoul(optarg, &end, 10);
      if (*end || !*optarg) {
        fprintf(stderr, "tally-sim: bad --be-depth\n");
        return 2;
      }
      break;
    case O_BE_ORIG:
      be_original_only = true;
      break;
    case O_BE_FLUSH:
      be_flush = true;
      break;
    case O_BE_NO_FLUSH:
      be_no_flush = true;
      break;
    case O_FLUSH_COMMIT:
      d = strtod(optarg, &end);
      if (*end || !*optarg || !(d >= 0 && d <= 1)) {
        fprintf(stderr, "tally-sim: --flush-commit must be a fraction 0..1\n");
        return 2;
      }
      cc.gpu.flush_commit_ppm = (uint32_t)(d * 1000000 + 0.5);
      break;
    case O_SMS:
      cc.gpu.sm_count = (uint32_t)strtoul(optarg, &end, 10);
      cc.pol.default_resident = cc.gpu.sm_count ? cc.gpu.sm_count : 1;
      if (*end) {
        fprintf(stderr, "tally-sim: bad --sms\n");
        return 2;
      }
      break;
    case O_BE_SMS:
      cc.gpu.be_sms = (uint32_t)strtoul(optarg, &end, 10);
      if (*end || !*optarg) {
        fprintf(stderr, "tally-sim: bad --be-sms\n");
        return 2;
      }
      break;
    case O_BE_SMS_HOLD:
      if (strcmp(optarg, "0") != 0 && strcmp(optarg, "1") != 0) {
        fprintf(stderr, "tally-sim: --be-sms-hold takes 0 or 1\n");
        return 2;
      }
      be_sms_hold = optarg[0] == '1';
      break;
    case O_PROFILES:
      cc.profile_path = optarg;
      break;
    case O_CSV:
      csv = true;
      break;
    case O_PLOT:
      plot = optarg;
      break;
    case O_QUIET:
      quiet = true;
      break;
    case O_HELP:
    case 'h':
      usage(stdout);
      return 0;
    case O_RUN_TRACE:
      wo.trace = optarg;
      break;
    case O_LC_CSV:
      wo.lc_csv = optarg;
      break;
    case O_BE_CSV:
      wo.be_csv = optarg;
      break;
    case O_ARRIVALS:
      wo.arrivals = optarg;
      break;
    case O_LAUNCH_FROM_TRACE:
      wo.launch_from_trace = true;
      break;
    case O_VERSION:
      printf("tally-sim (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
      return 0;
    default:
      usage(stderr);
      return 2;
    }
  }
  if (optind < argc || (!lc_path) != (!be_path) ||
      (wo.trace && (lc_path || azure || be_original_only || be_flush || be_no_flush ||
                    cc.poisson || cc.mean_gap_us > 0)) ||
      (azure && cc.poisson) ||
      (be_flush && be_no_flush) ||
      (!wo.trace && (wo.lc_csv || wo.be_csv || wo.arrivals || wo.launch_from_trace))) {
    usage(stderr);
    return 2;
  }
  if (!be_sms_hold && !cc.gpu.be_sms) {
    fprintf(stderr, "tally-sim: --be-sms-hold 0 needs --be-sms N\n");
    return 2;
  }
  if (be_sms_hold && cc.pol.part_block_ns) {
    fprintf(stderr, "tally-sim: --be-sms-block-us needs --be-sms-hold 0\n");
    return 2;
  }
  if (be_sms_hold && flight_set) {
    fprintf(stderr, "tally-sim: --be-sms-inflight-us needs --be-sms-hold 0\n");
    return 2;
  }
  cc.pol.be_partitioned = !be_sms_hold;
  const char *why = NULL;
  if (sim_gpu_config_check(&cc.gpu, &why) < 0 || pol_config_check(&cc.pol, &why) < 0) {
    fprintf(stderr, "tally-sim: %s\n", why);
    return 2;
  }
  if (azure) {
    azure_text = read_file(azure, &cc.azure_len);
    if (!azure_text) {
      fprintf(stderr, "tally-sim: cannot read %s\n", azure);
      return 1;
    }
    cc.azure_text = azure_text;
  }
  if (!quiet)
    cc.progress = progress;
  if (!csv && wo.trace)
    printf("tally-sim: discrete-event simulation of one GPU (%u SMs, H200 constants) on the\n"
           "whole-run trace %s, with the run's own arrivals.\n"
           "Simulated numbers, not measurements.\n\n",
           cc.gpu.sm_count, wo.trace);
  else if (!csv) {
    char rate[64];
    if (cc.mean_gap_us > 0)
      snprintf(rate, sizeof(rate), "a mean gap of %g us", cc.mean_gap_us);
    else
      snprintf(rate, sizeof(rate), "%.0f%% load", cc.load * 100);
    printf("tally-sim: discrete-event simulation of one GPU (%u SMs, H200 constants) on %s;\n"
           "arrivals: %s at %s, %g s simulated per run, seed %llu.\n"
           "Simulated numbers, not measurements.\n\n",
           cc.gpu.sm_count, lc_path ? "the given kernel traces" : "the bundled SYNTHETIC traces",
           azure        ? "Azure Functions 2021 CSV"
           : cc.poisson ? "Poisson generator"
                        : "bundled SYNTHETIC bursty generator",
           rate, (double)cc.duration_ns / 1e9, (unsigned long long)cc.seed);
  }
  fflush(stdout);
  size_t npairs = wo.trace ? 0 : lc_path ? 1 : sim_bundled_npairs;
  if (wo.trace && run_whole(&cc, &wo, &rows, &nrows) < 0)
    status = 1;
  for (size_t i = 0; i < npairs && status == 0; i++) {
    sim_trace_t lc = {0}, be = {0};
    if (lc_path ? load_trace(NULL, lc_path, &lc) < 0
                : load_trace(dir, sim_bundled_pairs[i].lc_file, &lc) < 0) {
      status = 1;
      break;
    }
    if (be_path ? load_trace(NULL, be_path, &be) < 0
                : load_trace(dir, sim_bundled_pairs[i].be_file, &be) < 0) {
      sim_trace_close(&lc);
      status = 1;
      break;
    }
    for (size_t j = 0; j < be.n; j++) {
      if (be_flush && (be.k[j].variants & POL_VAR_SLICED))
        be.k[j].variants |= POL_VAR_FLUSH;
      if (be_no_flush)
        be.k[j].variants &= ~POL_VAR_FLUSH;
      if (be_original_only)
        be.k[j].variants = POL_VAR_ORIGINAL;
    }
    int rc = sim_compare_pair(&cc, &lc, &be, &rows, &nrows, &why);
    if (rc < 0) {
      fprintf(stderr, "\ntally-sim: %s/%s: %s (%s)\n", lc.name, be.name, why ? why : "failed",
              strerror(-rc));
      status = 1;
    }
    sim_trace_close(&lc);
    sim_trace_close(&be);
  }
  if (!quiet && isatty(STDERR_FILENO))
    fprintf(stderr, "\r%80s\r", "");
  if (status == 0) {
    if (csv)
      sim_report_csv(stdout, rows, nrows);
    else
      sim_report_table(stdout, rows, nrows);
    if (plot) {
      int rc = sim_report_plot(plot, rows, nrows);
      if (rc < 0 && rc != -ENOENT) {
        fprintf(stderr, "tally-sim: plot %s: %s\n", plot, strerror(-rc));
        status = 1;
      } else if (rc == 0 && !csv) {
        printf("\nplot: %s\n", plot);
      }
    }
  }
  if (fflush(stdout) != 0)
    status = 1;
  sim_rows_free(rows, nrows);
  free(azure_text);
  return status;
}
