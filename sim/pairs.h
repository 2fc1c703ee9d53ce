/* pairs.h: the measured pair benchmark's arithmetic (prefix sim_pairs_).
 *
 * scripts/bench-pairs runs a latency-critical (LC) and a best-effort (BE)
 * program side by side on a real GPU; everything it computes lives here, in
 * C, so `make check` covers it without a GPU: the arrival generators
 * (Poisson, gamma-bursty, Azure replay through sim_arrivals_azure), the
 * readers of the raw CSVs the workloads write, the statistics and the
 * Markdown/CSV report.  The command line is sim/pairs-main.c (tally-pairs).
 * Every reader takes a byte buffer that need not end in NUL, is
 * bounds-checked, and names the line of its first error (fuzzed by
 * tests/fuzz/fuzz-sim-pairs.c).
 */
#ifndef TALLY_SIM_PAIRS_H
#define TALLY_SIM_PAIRS_H

#include "sim/sim.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Renewal process with gamma-distributed gaps: mean 1/rate_per_s, coefficient
 * of variation cv (> 0; cv 1 is Poisson, cv 2 the "bursty" default).  Times
 * in [0, duration_ns), sorted.  0, -EINVAL, -ENOMEM, -E2BIG. */
int sim_pairs_gamma(sim_arrivals_t *a, sim_rng_t *r, double rate_per_s, double cv,
                    uint64_t duration_ns);

/* One LC request, CLOCK_MONOTONIC nanoseconds (shared by the processes of
 * one machine).  Invariant after parsing: arrival <= end, start <= end. */
typedef struct sim_pairs_req {
  uint64_t arrival_ns; /* when the request was due */
  uint64_t start_ns;   /* first launch of the request */
  uint64_t end_ns;     /* its stream synchronisation returned */
} sim_pairs_req_t;

/* One BE iteration.  Invariant: start <= end. */
typedef struct sim_pairs_iter {
  uint64_t start_ns, end_ns;
} sim_pairs_iter_t;

#define SIM_PAIRS_MAX_ROWS 50000000u

/* LC CSV: header `req,arrival_ns,start_ns,end_ns`, then one row per completed
 * request.  BE CSV: header `iter,start_ns,end_ns`.  Blank lines and lines
 * starting with '#' are skipped.  0, -EPROTO with "line N: reason" in err,
 * -ENOMEM, -E2BIG.  *out and *n untouched on error; free() the array. */
int sim_pairs_lc_parse(const char *text, size_t len, sim_pairs_req_t **out, size_t *n, char *err,
                       size_t errlen);
int sim_pairs_be_parse(const char *text, size_t len, sim_pairs_iter_t **out, size_t *n, char *err,
                       size_t errlen);

/* LC statistics.  Percentiles are nearest-rank (sim_percentile): the
 * smallest sample x with at least p% of the samples <= x. */
typedef struct sim_pairs_lc_stats {
  size_t n;
  double exec_p50_ms, exec_p99_ms, exec_mean_ms; /* start -> end */
  double e2e_p50_ms, e2e_p99_ms, e2e_mean_ms;    /* arrival -> end */
  double tput_per_s;                             /* n / (last end - first arrival) */
  uint64_t first_ns, last_ns;                    /* first arrival, last end */
} sim_pairs_lc_stats_t;

/* 0, -EINVAL (n == 0), -ENOMEM. */
int sim_pairs_lc_stats(const sim_pairs_req_t *r, size_t n, sim_pairs_lc_stats_t *s);

/* BE iterations per second inside [from_ns, to_ns): each iteration counts
 * with the fraction of its duration that lies in the window.  from == to ==
 * 0: the window is the data's own span (first start -> last end).  Returns
 * -1 when the window is empty. */
double sim_pairs_be_rate(const sim_pairs_iter_t *it, size_t n, uint64_t from_ns, uint64_t to_ns);

/* The manifest the harness writes: header `pair,mode,status,lc_csv,be_csv`;
 * status "ok" or a reason ("failed: ...", "unsupported: ..."); paths may be
 * empty ("-" also means none).  Mode "alone" is the pair's reference (LC
 * alone and BE alone, native); "tallyd-alone:P" is the same through tallyd. */
#define SIM_PAIRS_FIELD_MAX 256
typedef struct sim_pairs_entry {
  char pair[SIM_PAIRS_FIELD_MAX];
  char mode[SIM_PAIRS_FIELD_MAX];
  char status[SIM_PAIRS_FIELD_MAX];
  char lc_csv[SIM_PAIRS_FIELD_MAX];
  char be_csv[SIM_PAIRS_FIELD_MAX];
} sim_pairs_entry_t;

/* Same errors as the CSV readers (one reader serves all three): "line N:
 * reason", and -E2BIG "line N: more than SIM_PAIRS_MAX_ENTRIES rows". */
#define SIM_PAIRS_MAX_ENTRIES 4096u
int sim_pairs_manifest_parse(const char *text, size_t len, sim_pairs_entry_t **out, size_t *n,
                             char *err, size_t errlen);

/* One row of the report: a pair in one mode, with its numbers. */
typedef struct sim_pairs_row {
  const sim_pairs_entry_t *e;
  char status[SIM_PAIRS_FIELD_MAX]; /* "ok" or why there are no numbers */
  bool have_lc, have_be;
  sim_pairs_lc_stats_t lc;
  double be_rate; /* BE iterations/s in the LC's window (alone: its own span) */
  /* Against the pair's native alone run (NAN when there is none). */
  double exec_p50_ratio, exec_p99_ratio, e2e_p99_ratio; /* value / alone */
  double lc_tput, be_tput, sys_tput;                    /* normalised; sys = lc + be */
  double exec_p99_vs_tallyd_alone; /* tallyd rows: / tallyd-alone of that policy */
} sim_pairs_row_t;

/* Reads every entry's CSVs (paths relative to base_dir unless absolute; NULL
 * base: as given) and computes the rows.  A CSV that cannot be read or
 * parsed makes that row's status "failed: <file>: <reason>"; never fails
 * for that.  0 or -ENOMEM. */
int sim_pairs_rows(const sim_pairs_entry_t *e, size_t n, const char *base_dir,
                   sim_pairs_row_t **rows);

/* Markdown table (one row per entry, in manifest order) and the summary CSV
 * (columns named in its header line).  0 or -EIO. */
int sim_pairs_report_md(FILE *f, const sim_pairs_row_t *rows, size_t n);
int sim_pairs_report_csv(FILE *f, const sim_pairs_row_t *rows, size_t n);

#endif /* TALLY_SIM_PAIRS_H */
