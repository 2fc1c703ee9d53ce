/* sim.h: the public API of sim/, Tally's discrete-event GPU simulator.
 *
 * sim/ replays kernel traces and arrival traces under each scheduling policy
 * and drives policy/ through the same interface tallyd uses.  Everything is
 * deterministic for a given seed: no wall clock, no hash of a pointer, no
 * libc random number reaches the output.
 *
 * Pieces: rng.c (random numbers), trace.c (kernel trace text format, its
 * table is in that file's top comment), arrivals.c (Azure Functions 2021 CSV,
 * Poisson and bursty generators), gpu.c (the GPU model), engine.c (the event
 * loop, tenants' host threads, policy glue, metrics), report.c (tables, CSV,
 * gnuplot), main.c (tally-sim).
 */
#ifndef TALLY_SIM_H
#define TALLY_SIM_H

#include "policy/pol.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A small, fast, seedable RNG (splitmix64 seeding xoshiro256**). The state is
 * owned by the caller; one per simulation keeps runs reproducible. */
typedef struct sim_rng {
  uint64_t s[4];
} sim_rng_t;

void sim_rng_init(sim_rng_t *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng_t *r);
/* Uniform double in [0, 1). */
double sim_rng_uniform(sim_rng_t *r);
/* Exponential with the given mean (> 0). */
double sim_rng_exp(sim_rng_t *r, double mean);

/* ---------------------------------------------------------------- GPU model */

typedef struct sim_gpu_config {
  uint32_t sm_count;           /* streaming multiprocessors */
  uint32_t sm_threads;         /* resident threads per SM */
  uint32_t sm_regs;            /* 32-bit registers per SM */
  uint32_t sm_shmem_bytes;     /* shared memory per SM */
  uint32_t sm_blocks;          /* resident blocks per SM */
  uint64_t launch_ns;          /* launch call -> its first block may dispatch */
  uint64_t notify_ns;          /* device completion -> the host sees it */
  uint64_t sched_ns;           /* ... and the scheduler acts on it this much later (the
                                  daemon's event polling and hand-offs; 0: at once) */
  uint64_t kernel_gap_ns;      /* end of a kernel -> next queued kernel on its stream */
  uint64_t flag_ns;            /* preemption flag raised -> workers see it */
  uint32_t slice_overhead_ppm; /* extra time per block in the sliced form */
  uint32_t ptb_overhead_ppm;   /* extra time per logical block in the PTB form */
  uint32_t flush_overhead_ppm; /* extra time per block in the FLUSH form */
  uint64_t flush_poll_ns;      /* FLUSH: flag visible -> running blocks have polled it */
  uint32_t flush_commit_ppm;   /* FLUSH: a block commits (can no longer give up) this far
                                  into its run, in millionths (1000000: at its end) */
  uint32_t be_sms;             /* > 0: low-priority (BE) launches dispatch only on the last
                                  be_sms SMs, a partition (tallyd --be-sms); high-priority ones
                                  on any SM; 0: no partition */
} sim_gpu_config_t;

/* H200 defaults (reasons in gpu.c). */
void sim_gpu_config_init(sim_gpu_config_t *c);
/* 0 or -EINVAL with *why. */
int sim_gpu_config_check(const sim_gpu_config_t *c, const char **why);

/* ---------------------------------------------------------------- traces */

typedef struct sim_kernel {
  uint64_t kernel_id;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t regs_per_thread;
  uint32_t shmem_bytes;
  uint64_t block_ns; /* duration of one block running alone on the GPU */
  uint64_t gap_ns;   /* host time between the previous submit and this one */
  uint32_t variants; /* POL_VAR_* */
} sim_kernel_t;

#define SIM_NAME_MAX 48
#define SIM_MAX_TENANTS 8

typedef struct sim_trace {
  char name[SIM_NAME_MAX]; /* workload name (the tenant field) */
  sim_kernel_t *k;
  size_t n;
} sim_trace_t;

/* Limits: what a trace may ask of the parser before it refuses. */
#define SIM_TRACE_MAX_KERNELS 1000000
#define SIM_TRACE_MAX_BYTES   (256u << 20)

/* Parses the kernel trace text format (table in trace.c).  On error returns
 * -EPROTO (or -ENOMEM) and writes "line N: reason" to err; *out untouched. */
int sim_trace_parse(const char *text, size_t len, sim_trace_t *out, char *err, size_t errlen);
int sim_trace_load(const char *path, sim_trace_t *out, char *err, size_t errlen);
void sim_trace_close(sim_trace_t *t);
/* Writes t in the text format. 0 or -EIO. */
int sim_trace_write(const sim_trace_t *t, FILE *f);
/* Logical blocks of kernel i. */
uint64_t sim_kernel_blocks(const sim_kernel_t *k);

/* ---------------------------------------------------------------- whole-run traces */

/* A whole-run trace is what `tallyd --trace` writes: every kernel of every
 * tenant of a run, with class and host times in a comment (table in
 * runtrace.c).  One record per submission, its slices and PTB launches
 * merged. */
typedef struct sim_run_kernel {
  sim_kernel_t k;   /* gap_ns as recorded; block_ns summed over the pieces */
  uint32_t tenant;  /* index into sim_runtrace_t.tenants */
  uint64_t submit_ns, start_ns, end_ns; /* CLOCK_MONOTONIC of the machine */
  uint64_t issue_ns; /* tallyd issued it to the driver; 0: not in the line */
  /* false: tallyd had no start event for it (an LC launch): its start= is
   * its end= as tallyd saw it and its block time is not a measurement
   * (see sim_runtrace_estimate_untimed). */
  bool timed;
} sim_run_kernel_t;

typedef struct sim_run_tenant {
  char name[SIM_NAME_MAX];
  pol_class_t cls;
  size_t kernels; /* submissions */
} sim_run_tenant_t;

typedef struct sim_runtrace {
  sim_run_tenant_t tenants[SIM_MAX_TENANTS];
  uint32_t ntenants;
  sim_run_kernel_t *k; /* by submit time */
  size_t n;
  size_t pieces;   /* kernel lines read (>= n) */
  size_t preempts; /* `# preempt` lines */
  size_t untimed;  /* submissions with timed == false */
} sim_runtrace_t;

/* 0, -EPROTO with "line N: reason" in err, -ENOMEM; *out untouched on error. */
int sim_runtrace_parse(const char *text, size_t len, sim_runtrace_t *out, char *err,
                       size_t errlen);
int sim_runtrace_load(const char *path, sim_runtrace_t *out, char *err, size_t errlen);
void sim_runtrace_close(sim_runtrace_t *rt);

/* A measured request (LC) or step (BE): the pair benchmark's CSV row. */
typedef struct sim_span {
  uint64_t arrival_ns, start_ns, end_ns; /* BE: arrival = start */
} sim_span_t;

/* One tenant's kernels cut into units: its requests or its steps. */
typedef struct sim_units {
  sim_trace_t *u; /* one trace per unit, gaps from the submit times */
  size_t n;
  uint64_t *arrival_ns; /* per unit: its window's arrival, or its first submit */
  size_t *win_index;    /* per unit: its window (NULL when none were given) */
  size_t dropped;       /* kernels outside every window (warm-up) */
} sim_units_t;

/* Cuts the kernels of the one tenant of class cls into units.  With windows
 * (sorted by start; the measured requests or steps, same clock): a kernel
 * belongs to the window holding its submit time; windows without kernels
 * give no unit; kernels outside all are dropped.  Without (win NULL): a
 * kernel starts a new unit when it was submitted after every earlier kernel
 * of the tenant had ended (the host had synchronised).  Every launch of a
 * kernel signature (id, grid, block, shmem) gets the signature's
 * 10th-percentile block time.  0, -ENOENT (no such kernels), -EINVAL (two
 * tenants of the class, bad windows), -ENOMEM; err says why. */
int sim_runtrace_split(const sim_runtrace_t *rt, pol_class_t cls, const sim_span_t *win,
                       size_t nwin, sim_units_t *out, char *err, size_t errlen);
void sim_units_close(sim_units_t *u);

/* ---------------------------------------------------------------- arrivals */

typedef struct sim_arrivals {
  uint64_t *t_ns; /* sorted arrival times */
  size_t n;
} sim_arrivals_t;

/* Poisson arrivals at rate_per_s over [0, duration_ns). 0, -EINVAL, -ENOMEM. */
int sim_arrivals_poisson(sim_arrivals_t *a, sim_rng_t *r, double rate_per_s, uint64_t duration_ns);
/* Bursty arrivals (SYNTHETIC; a two-state Markov-modulated Poisson process,
 * see arrivals.c) with long-run mean rate_per_s. */
int sim_arrivals_bursty(sim_arrivals_t *a, sim_rng_t *r, double rate_per_s, uint64_t duration_ns);
/* Azure Functions 2021 CSV (app,func,end_timestamp,duration; seconds).
 * Picks func (NULL: the busiest), takes arrival = end - duration, and scales
 * inter-arrival gaps so the mean rate is rate_per_s; keeps [0, duration_ns).
 * -EPROTO with "line N: reason" in err on bad input. */
int sim_arrivals_azure(sim_arrivals_t *a, const char *text, size_t len, const char *func,
                       double rate_per_s, uint64_t duration_ns, char *err, size_t errlen);
/* Arrival offsets in ns, one per line, sorted ('#' lines and blank lines
 * skipped): what `tally-pairs arrivals` writes.  0, -EPROTO with "line N:
 * reason", -ENOMEM, -E2BIG (more than SIM_TRACE_MAX_KERNELS). */
int sim_arrivals_parse(sim_arrivals_t *a, const char *text, size_t len, char *err,
                       size_t errlen);
void sim_arrivals_close(sim_arrivals_t *a);

/* The launch latency a whole-run trace shows for one class (submit -> the
 * launch starts on the GPU, on a stream with nothing else of the class
 * unfinished), and where it came from. */
typedef enum sim_launch_src {
  SIM_LAUNCH_NONE,  /* nothing to measure it on: ns is 0 */
  SIM_LAUNCH_TIMED, /* median start - submit of the class's timed launches */
  /* the class's launches are untimed (start= is when tallyd saw the end):
   * median issue - submit of them (tallyd's part) + median start - issue of
   * the other class's timed launches (the driver's part) */
  SIM_LAUNCH_HOST_DRIVER,
} sim_launch_src_t;

typedef struct sim_launch {
  uint64_t ns;
  sim_launch_src_t src;
  uint64_t host_ns, driver_ns; /* SIM_LAUNCH_HOST_DRIVER: the two parts */
  size_t n;                    /* launches the (first) median is over */
  size_t n_driver;             /* SIM_LAUNCH_HOST_DRIVER: those of the driver part */
  size_t untimed;              /* the class's untimed launches (never start - submit) */
} sim_launch_t;

/* The launch latency of class cls in rt.  0 or -ENOMEM. */
int sim_runtrace_launch(const sim_runtrace_t *rt, pol_class_t cls, sim_launch_t *out);

/* A measured run ready for sim_compare_units (wholerun.c): tallyd's
 * whole-run trace cut into requests and steps (by the CSVs' rows when
 * given), the run's arrivals, and its LC launch latency. */
typedef struct sim_wholerun {
  sim_runtrace_t rt;
  sim_units_t lc, be;       /* requests, steps */
  sim_arrivals_t arrivals;  /* offsets from the first */
  sim_launch_t launch;      /* the LC's launch latency and where it came from */
  char label[2 * SIM_NAME_MAX + 2];
} sim_wholerun_t;

/* trace: tallyd --trace FILE; lc_csv, be_csv, arrivals: NULL or the pair
 * benchmark's files of the same run.  0 or a negative errno with err set
 * (a reader's "line N: reason" prefixed by the file). */
int sim_wholerun_load(const char *trace, const char *lc_csv, const char *be_csv,
                      const char *arrivals, sim_wholerun_t *w, char *err, size_t errlen);
void sim_wholerun_close(sim_wholerun_t *w);

/* Block times of the untimed submissions (timed == false), estimated from
 * host times: a launch's device time is its end minus the later of the
 * tenant's previous end and its issue + driver_ns (its submit when issue=
 * is missing), divided by its waves of sm_count blocks, as tallyd divides
 * the timed ones.  Timed submissions are left alone. */
void sim_runtrace_estimate_untimed(sim_runtrace_t *rt, uint64_t driver_ns, uint32_t sm_count);

/* Writes "launch latency ...": the value and which source it came from
 * (for tally-sim's report line). */
void sim_launch_describe(const sim_launch_t *l, char *buf, size_t len);

/* ---------------------------------------------------------------- runs */

typedef struct sim_tenant_spec {
  const sim_trace_t *trace; /* one request (LC) or one training step (BE) */
  /* niters > 0: iteration i (the LC's request i, the BE's step i) runs
   * iters[i % niters] instead of trace (a whole-run trace's own requests and
   * steps, sim_runtrace_split); trace is then ignored. */
  const sim_trace_t *iters;
  size_t niters;
  pol_class_t cls;
  uint32_t weight;                /* BE share, 1..1000 */
  const sim_arrivals_t *arrivals; /* LC: open-loop request arrivals; NULL: closed loop */
} sim_tenant_spec_t;

typedef struct sim_run_config {
  sim_gpu_config_t gpu;
  pol_config_t pol;
  pol_kind_t kind;
  uint64_t duration_ns; /* measure BE work in [0, duration) */
  uint32_t ntenants;
  sim_tenant_spec_t tenants[SIM_MAX_TENANTS];
  bool record_waits;        /* keep every LC kernel's wait (tests) */
  uint32_t lc_ctx_wait_every; /* > 0: every Nth LC request (the first included) begins with a
                                 driver call that returns when every BE launch issued by then
                                 has ended, as some calls do in a context shared by tenants
                                 (0: none) */
  uint64_t bucket_ns;       /* > 0: also count BE work per bucket of time */
  const char *profile_path; /* load before, save after (NULL: none) */
  void (*progress)(void *arg, uint64_t now_ns, uint64_t end_ns); /* may be NULL */
  void *progress_arg;
} sim_run_config_t;

typedef struct sim_tenant_result {
  uint64_t requests; /* LC requests (or BE iterations) completed */
  uint64_t *lat_ns;  /* LC: latency of each completed request, in completion order */
  size_t nlat;
  uint64_t *exec_ns; /* LC: execution latency (start of its iteration -> end), same order */
  size_t nexec;
  double work_ns;        /* BE: nominal block time completed in [0, duration) */
  uint64_t kernel_waits; /* LC: kernels measured */
  uint64_t max_wait_ns;  /* LC: worst wait of one kernel: ready -> last block dispatched */
  uint64_t *waits_ns;    /* record_waits: every LC kernel's wait */
  uint64_t ctx_waits;       /* LC: requests that began with a context-wide wait (lc_ctx_wait_every) */
  uint64_t max_ctx_wait_ns; /* LC: the longest of those waits */
  size_t nwaits;
  double *work_buckets; /* bucket_ns > 0: BE work in [i, i+1) x bucket_ns */
  size_t nbuckets;
} sim_tenant_result_t;

typedef struct sim_result {
  uint32_t ntenants;
  sim_tenant_result_t t[SIM_MAX_TENANTS];
  uint64_t blocks;          /* (logical) blocks simulated */
  uint64_t events;          /* events processed */
  uint64_t end_ns;          /* simulated time at the end */
  uint64_t max_be_block_ns; /* longest BE block (with form overhead) that ever ran */
  uint64_t flush_given_up;  /* blocks of FLUSH launches that gave up (run again later) */
  double flush_wasted_ns;   /* block time those that gave up in [0, duration] had run,
                               summed over blocks (the work lost to preemption; compare
                               with the BE's work_ns) */
  pol_stats_t pol;
} sim_result_t;

/* Runs one simulation.  0, -EINVAL (bad config: *why set if why), -ENOMEM,
 * or a policy error.  *res must be released with sim_result_close(). */
int sim_run(const sim_run_config_t *cfg, sim_result_t *res, const char **why);
void sim_result_close(sim_result_t *res);

/* Percentile p (0..100) of v[0..n), nearest rank; sorts v in place (so it
 * cannot fail for memory).  0 if n == 0. */
uint64_t sim_percentile(uint64_t *v, size_t n, double p);

/* Blocks of k the GPU holds at once (occupancy x SMs); 0 if one never fits. */
uint64_t sim_gpu_resident(const sim_gpu_config_t *g, const sim_kernel_t *k);

/* ---------------------------------------------------------------- reports */

typedef struct sim_row {
  char pair[2 * SIM_NAME_MAX + 2];
  pol_kind_t kind; /* POL_KIND_COUNT: the LC alone (reference row) */
  double lc_p50_ms, lc_p99_ms, lc_mean_ms;
  double lc_p99_overhead_pct; /* vs the LC alone */
  double lc_tput;             /* requests completed / alone */
  double be_tput;             /* BE work / BE alone */
  double sys_tput;            /* lc_tput + be_tput */
  double alone_p50_ms, alone_p99_ms;
  /* Execution latency (request start -> end, no queueing before it): what
   * the measured baselines of docs/h200.md report. */
  double exec_p50_ms, exec_p99_ms, alone_exec_p99_ms;
  double exec_p99_overhead_pct; /* vs the LC alone */
  uint64_t flush_given_up;      /* FLUSH blocks that gave up (sim_result_t) */
  uint64_t redo_launches;       /* redo launches that ran them again */
  double flush_lost_frac;       /* of the BE's block time, the part lost by them */
  uint64_t ctx_waits;           /* LC requests that began with a context-wide wait */
  double max_ctx_wait_ms;       /* the longest of those waits */
  uint64_t *lat_ns;             /* owned, for CDF plots */
  size_t nlat;
} sim_row_t;

/* One comparison: the LC trace alone, the BE trace alone, then the pair
 * under each policy asked for.  Arrivals: Azure CSV text if given, else the
 * bundled bursty generator (Poisson with `poisson`), at `load` x (1 / LC
 * service time alone), or one every `mean_gap_us` on average when that is
 * above 0. */
typedef struct sim_compare_config {
  sim_gpu_config_t gpu;
  pol_config_t pol;
  double load; /* 0 < load < 1; the measured baselines: 0.5 */
  uint64_t duration_ns;
  uint64_t seed;
  bool kinds[POL_KIND_COUNT]; /* which policies to run */
  const char *azure_text;     /* NULL: bursty generator */
  size_t azure_len;
  const char *azure_func;   /* NULL: busiest function */
  bool poisson;             /* exponential gaps in place of the bursty ones */
  double mean_gap_us;       /* > 0: the arrival rate is 1 / this, load ignored */
  /* Given arrivals (offsets from 0, sorted): used as they are, load and the
   * generators ignored; e.g. the measured ones of a whole-run trace. */
  const sim_arrivals_t *arrivals;
  const char *profile_path; /* ours: load/save profiles (NULL: none) */
  uint32_t lc_ctx_wait_every; /* sim_run_config_t's, for every run */
  void (*progress)(void *arg, const char *what, uint64_t now_ns, uint64_t end_ns);
  void *progress_arg;
} sim_compare_config_t;

void sim_compare_config_init(sim_compare_config_t *c);
/* Appends rows (alone first) to *rows and *nrows (realloc'd; caller frees with
 * sim_rows_free).  0, -EINVAL with *why, -ENOMEM, or a run's error. */
int sim_compare_pair(const sim_compare_config_t *c, const sim_trace_t *lc, const sim_trace_t *be,
                     sim_row_t **rows, size_t *nrows, const char **why);
/* The same with per-iteration traces (sim_tenant_spec_t.iters): the LC's
 * request i runs lc[i % nlc], the BE's step i be[i % nbe]; label names the
 * pair in the rows. */
int sim_compare_units(const sim_compare_config_t *c, const char *label, const sim_trace_t *lc,
                      size_t nlc, const sim_trace_t *be, size_t nbe, sim_row_t **rows,
                      size_t *nrows, const char **why);
void sim_rows_free(sim_row_t *rows, size_t n);

void sim_report_table(FILE *f, const sim_row_t *rows, size_t n);
void sim_report_csv(FILE *f, const sim_row_t *rows, size_t n);
/* Writes a PNG with latency CDFs and the throughput/latency trade-off, via
 * gnuplot.  0, -ENOENT (no gnuplot: message on stderr), or -errno. */
int sim_report_plot(const char *png_path, const sim_row_t *rows, size_t n);

/* ---------------------------------------------------------------- bundled */

/* The bundled workload pairs: LC trace file, BE trace file (in the
 * sim/traces folder), and a label. */
typedef struct sim_pair {
  const char *label;
  const char *lc_file;
  const char *be_file;
} sim_pair_t;
extern const sim_pair_t sim_bundled_pairs[];
extern const size_t sim_bundled_npairs;

#endif /* TALLY_SIM_H */
