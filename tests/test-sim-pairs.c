/* test-sim-pairs.c: the pair benchmark's arithmetic (sim/pairs.h).
 *
 * Arrival generators (rate and coefficient of variation of the gaps), the
 * Azure CSV replay's errors, the LC/BE/manifest CSV readers (a malformed
 * line is named by number), the statistics (nearest-rank percentiles, the
 * BE window rate) and the report writer (ratios to the alone row, failed
 * rows, system throughput).  Statistical checks use fixed seeds and many
 * samples, with tolerances several standard errors wide.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim/pairs.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void gap_moments(const sim_arrivals_t *a, double *mean, double *cv) {
  double s = 0, s2 = 0;
  size_t n = a->n - 1;
  for (size_t i = 1; i < a->n; i++) {
    double g = (double)(a->t_ns[i] - a->t_ns[i - 1]);
    s += g;
    s2 += g * g;
  }
  *mean = s / (double)n;
  *cv = sqrt(s2 / (double)n - *mean * *mean) / *mean;
}

static void poisson_has_rate_and_cv_one(void **state) {
  (void)state;
  sim_rng_t r;
  sim_arrivals_t a;
  double mean, cv;
  sim_rng_init(&r, 7);
  assert_int_equal(sim_arrivals_poisson(&a, &r, 1000, 200000000000ull), 0);
  assert_true(a.n > 190000 && a.n < 210000);
  gap_moments(&a, &mean, &cv);
  assert_true(fabs(mean - 1e6) < 0.02 * 1e6);
  assert_true(fabs(cv - 1.0) < 0.03);
  sim_arrivals_close(&a);
}

static void gamma_bursty_has_rate_and_cv_two(void **state) {
  (void)state;
  sim_rng_t r;
  sim_arrivals_t a;
  double mean, cv;
  sim_rng_init(&r, 11);
  assert_int_equal(sim_pairs_gamma(&a, &r, 500, 2.0, 400000000000ull), 0);
  assert_true(a.n > 180000 && a.n < 220000);
  gap_moments(&a, &mean, &cv);
  assert_true(fabs(mean - 2e6) < 0.05 * 2e6);
  assert_true(fabs(cv - 2.0) < 0.12);
  for (size_t i = 1; i < a.n; i++)
    assert_true(a.t_ns[i] >= a.t_ns[i - 1]);
  assert_true(a.t_ns[a.n - 1] < 400000000000ull);
  sim_arrivals_close(&a);
}

static void gamma_refuses_bad_parameters(void **state) {
  (void)state;
  sim_rng_t r;
  sim_arrivals_t a;
  sim_rng_init(&r, 1);
  assert_int_equal(sim_pairs_gamma(&a, &r, 0, 2.0, 1000000), -EINVAL);
  assert_int_equal(sim_pairs_gamma(&a, &r, 100, 0, 1000000), -EINVAL);
  assert_int_equal(sim_pairs_gamma(&a, &r, NAN, 2.0, 1000000), -EINVAL);
  assert_int_equal(sim_pairs_gamma(&a, &r, 100, 2.0, 0), -EINVAL);
}

static void gamma_is_deterministic_per_seed(void **state) {
  (void)state;
  sim_rng_t r1, r2;
  sim_arrivals_t a, b;
  sim_rng_init(&r1, 5);
  sim_rng_init(&r2, 5);
  assert_int_equal(sim_pairs_gamma(&a, &r1, 300, 2.0, 2000000000ull), 0);
  assert_int_equal(sim_pairs_gamma(&b, &r2, 300, 2.0, 2000000000ull), 0);
  assert_int_equal(a.n, b.n);
  assert_memory_equal(a.t_ns, b.t_ns, a.n * sizeof(*a.t_ns));
  sim_arrivals_close(&a);
  sim_arrivals_close(&b);
}

static void azure_sample_scales_to_rate(void **state) {
  (void)state;
  char path[4096], err[200];
  const char *src = getenv("TALLY_SRCDIR");
  snprintf(path, sizeof(path), "%s/tests/bench/pairs/azure-sample.csv", src ? src : "..");
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  static char buf[1 << 20];
  size_t len = fread(buf, 1, sizeof(buf), f);
  fclose(f);
  sim_arrivals_t a;
  assert_int_equal(sim_arrivals_azure(&a, buf, len, NULL, 200, 50000000000ull, err, sizeof(err)),
                   0);
  /* 50 s at 200/s: the scaled pattern repeats until the duration is full. */
  assert_true(a.n > 9000 && a.n < 11000);
  sim_arrivals_close(&a);
}

static void azure_malformed_line_is_named(void **state) {
  (void)state;
  const char *csv = "app,func,end_timestamp,duration\n"
                    "a,f,1.5,0.1\n"
                    "a,f,2.5\n";
  char err[200];
  sim_arrivals_t a;
  assert_int_equal(sim_arrivals_azure(&a, csv, strlen(csv), NULL, 10, 1000000000, err, sizeof(err)),
                   -EPROTO);
  assert_non_null(strstr(err, "line 3:"));
}

static void lc_csv_parses_rows(void **state) {
  (void)state;
  const char *csv = "# made by a test\nreq,arrival_ns,start_ns,end_ns\n0,100,150,250\n\n"
                    "1,300,300,420\r\n";
  sim_pairs_req_t *r;
  size_t n;
  char err[200];
  assert_int_equal(sim_pairs_lc_parse(csv, strlen(csv), &r, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 2);
  assert_int_equal(r[1].arrival_ns, 300);
  assert_int_equal(r[1].end_ns, 420);
  free(r);
}

static void lc_csv_errors_name_the_line(void **state) {
  (void)state;
  static const struct {
    const char *csv, *want;
  } cases[] = {
      {"req,arrival_ns,start_ns,end_ns\n0,1,2,3\n1,2,x,4\n", "line 3: field 3"},
      {"req,arrival_ns,start_ns,end_ns\n0,1,2\n", "line 2: expected 4"},
      {"req,arrival_ns,start_ns,end_ns\n0,1,5,3\n", "line 2: end_ns before start_ns"},
      {"req,arrival_ns,start_ns,end_ns\n0,9,2,3\n", "line 2: end_ns before arrival_ns"},
      {"req,arrival_ns,start_ns,end_ns\n0,1,2,99999999999999999999\n", "line 2: field 4"},
      {"iter,start_ns,end_ns\n", "line 1: expected the header"},
      {"", "line 0: no header"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    sim_pairs_req_t *r = NULL;
    size_t n = 0;
    char err[200] = "";
    assert_int_equal(sim_pairs_lc_parse(cases[i].csv, strlen(cases[i].csv), &r, &n, err,
                                        sizeof(err)),
                     -EPROTO);
    if (!strstr(err, cases[i].want))
      fail_msg("case %zu: got \"%s\", want \"%s\"", i, err, cases[i].want);
    assert_null(r);
  }
}

static void lc_csv_reader_stops_at_len(void **state) {
  (void)state;
  /* No NUL and no newline at the end: the last row ends at len. */
  const char csv[] = "req,arrival_ns,start_ns,end_ns\n0,1,2,37777";
  sim_pairs_req_t *r;
  size_t n;
  char err[200];
  assert_int_equal(sim_pairs_lc_parse(csv, sizeof(csv) - 3, &r, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 1);
  assert_int_equal(r[0].end_ns, 377);
  free(r);
}

static void be_csv_and_window_rate(void **state) {
  (void)state;
  const char *csv = "iter,start_ns,end_ns\n0,0,1000000000\n1,1000000000,2000000000\n"
                    "2,2000000000,4000000000\n";
  sim_pairs_iter_t *it;
  size_t n;
  char err[200];
  assert_int_equal(sim_pairs_be_parse(csv, strlen(csv), &it, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 3);
  /* Own span: 3 iterations in 4 s. */
  assert_true(fabs(sim_pairs_be_rate(it, n, 0, 0) - 0.75) < 1e-9);
  /* [0.5 s, 3 s): half of #0, all of #1, half of #2 = 2 iterations in 2.5 s. */
  assert_true(fabs(sim_pairs_be_rate(it, n, 500000000, 3000000000ull) - 0.8) < 1e-9);
  /* A window after all of them: none. */
  assert_true(fabs(sim_pairs_be_rate(it, n, 5000000000ull, 6000000000ull)) < 1e-12);
  assert_true(sim_pairs_be_rate(it, n, 7, 7) < 0);
  free(it);
}

static void percentiles_are_nearest_rank(void **state) {
  (void)state;
  sim_pairs_req_t r[200];
  /* exec of request i = (i + 1) ms, arrival 1 ms before start. */
  for (int i = 0; i < 200; i++) {
    r[i].start_ns = (uint64_t)i * 1000000000ull + 1000000;
    r[i].arrival_ns = r[i].start_ns - 1000000;
    r[i].end_ns = r[i].start_ns + (uint64_t)(i + 1) * 1000000;
  }
  sim_pairs_lc_stats_t s;
  assert_int_equal(sim_pairs_lc_stats(r, 200, &s), 0);
  assert_int_equal(s.n, 200);
  assert_true(fabs(s.exec_p50_ms - 100) < 1e-9); /* ceil(0.50 * 200) = 100th */
  assert_true(fabs(s.exec_p99_ms - 198) < 1e-9); /* ceil(0.99 * 200) = 198th */
  assert_true(fabs(s.e2e_p99_ms - 199) < 1e-9);
  assert_true(fabs(s.exec_mean_ms - 100.5) < 1e-9);
  assert_int_equal(s.first_ns, 0);
  assert_int_equal(s.last_ns, 199000000000ull + 1000000 + 200000000);
  assert_int_equal(sim_pairs_lc_stats(r, 0, &s), -EINVAL);
}

static void manifest_errors_name_the_line(void **state) {
  (void)state;
  const char *bad = "pair,mode,status,lc_csv,be_csv\np,alone,ok,a.csv,b.csv\np,mps,ok\n";
  sim_pairs_entry_t *e = NULL;
  size_t n;
  char err[200];
  assert_int_equal(sim_pairs_manifest_parse(bad, strlen(bad), &e, &n, err, sizeof(err)), -EPROTO);
  assert_non_null(strstr(err, "line 3:"));
  const char *good = "pair,mode,status,lc_csv,be_csv\np,alone,ok,a.csv,-\n";
  assert_int_equal(sim_pairs_manifest_parse(good, strlen(good), &e, &n, err, sizeof(err)), 0);
  assert_int_equal(n, 1);
  assert_string_equal(e[0].lc_csv, "a.csv");
  assert_string_equal(e[0].be_csv, "");
  free(e);
  /* The same reader as the CSVs: the same header and field errors. */
  const char *hdr = "pair,mode\n";
  assert_int_equal(sim_pairs_manifest_parse(hdr, strlen(hdr), &e, &n, err, sizeof(err)), -EPROTO);
  assert_non_null(strstr(err, "line 1: expected the header line pair,mode,..."));
  const char *empty = "pair,mode,status,lc_csv,be_csv\n\np,,ok,-,-\n";
  assert_int_equal(sim_pairs_manifest_parse(empty, strlen(empty), &e, &n, err, sizeof(err)),
                   -EPROTO);
  assert_non_null(strstr(err, "line 3: empty pair, mode or status"));
  /* More rows than the bound: refused, naming the first row too many. */
  size_t cap = 64 + (SIM_PAIRS_MAX_ENTRIES + 1) * 16, o = 0;
  char *big = malloc(cap);
  assert_non_null(big);
  o += (size_t)snprintf(big, cap, "pair,mode,status,lc_csv,be_csv\n");
  for (unsigned i = 0; i <= SIM_PAIRS_MAX_ENTRIES; i++)
    o += (size_t)snprintf(big + o, cap - o, "p,m%u,ok,-,-\n", i);
  assert_int_equal(sim_pairs_manifest_parse(big, o, &e, &n, err, sizeof(err)), -E2BIG);
  char want[64];
  snprintf(want, sizeof(want), "line %u: more than %u rows", SIM_PAIRS_MAX_ENTRIES + 2,
           SIM_PAIRS_MAX_ENTRIES);
  assert_string_equal(err, want);
  assert_int_equal(sim_pairs_manifest_parse(big, o - strlen("p,m4096,ok,-,-\n"), &e, &n, err,
                                            sizeof(err)),
                   0);
  assert_int_equal(n, SIM_PAIRS_MAX_ENTRIES);
  free(e);
  free(big);
}

/* Writes the CSVs of one pair into a temporary folder and reports it. */
static char tmpdir[64];

static void put(const char *name, const char *text) {
  char path[160];
  snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *report(const char *manifest, bool md) {
  sim_pairs_entry_t *e;
  sim_pairs_row_t *rows;
  size_t n, blen = 0;
  char err[200], *buf = NULL;
  assert_int_equal(sim_pairs_manifest_parse(manifest, strlen(manifest), &e, &n, err, sizeof(err)),
                   0);
  assert_int_equal(sim_pairs_rows(e, n, tmpdir, &rows), 0);
  FILE *f = open_memstream(&buf, &blen);
  assert_non_null(f);
  assert_int_equal(md ? sim_pairs_report_md(f, rows, n) : sim_pairs_report_csv(f, rows, n), 0);
  fclose(f);
  free(rows);
  free(e);
  return buf;
}

static void report_rows_have_ratios_to_alone(void **state) {
  (void)state;
  strcpy(tmpdir, "/tmp/tally-pairs-XXXXXX");
  assert_non_null(mkdtemp(tmpdir));
  /* Alone: 2 requests of 1 ms over 10 s; BE 10 iterations/s.  Paired: 2 ms
   * each (p99 +100%), same window; BE 5/s in that window (0.50). */
  put("lc-alone.csv", "req,arrival_ns,start_ns,end_ns\n0,0,0,1000000\n1,9999000000,9999000000,"
                      "10000000000\n");
  put("be-alone.csv", "iter,start_ns,end_ns\n0,0,100000000\n1,100000000,1000000000\n");
  put("lc-mps.csv", "req,arrival_ns,start_ns,end_ns\n0,0,0,2000000\n1,9998000000,9998000000,"
                    "10000000000\n");
  put("be-mps.csv", "iter,start_ns,end_ns\n0,0,10000000000\n1,10000000000,10000000001\n"
                    "2,2000000000,2000000000\n");
  put("broken.csv", "req,arrival_ns,start_ns,end_ns\n0,1\n");
  const char *m = "pair,mode,status,lc_csv,be_csv\n"
                  "p,alone,ok,lc-alone.csv,be-alone.csv\n"
                  "p,mps,ok,lc-mps.csv,be-mps.csv\n"
                  "p,mps-prio,unsupported: no MPS here,-,-\n"
                  "p,timeslice,ok,broken.csv,be-mps.csv\n"
                  "p,tallyd:none,ok,missing.csv,be-mps.csv\n";
  char *md = report(m, true);
  assert_non_null(strstr(md, "| p | alone | 1.000 | 1.000 | +0% |"));
  /* mps: exec p50 and p99 2 ms, +100% against alone. */
  assert_non_null(strstr(md, "| p | mps | 2.000 | 2.000 | +100% |"));
  assert_non_null(strstr(md, "unsupported: no MPS here |"));
  assert_non_null(strstr(md, "failed: broken.csv: line 2: expected 4"));
  assert_non_null(strstr(md, "failed: missing.csv:"));
  free(md);
  char *csv = report(m, false);
  /* BE alone: 2 iterations in 1 s = 2/s.  BE paired in [0, 10 s): #0 whole
   * (10 s inside), #1 outside, #2 zero-length inside = 2 in 10 s = 0.2/s,
   * normalised 0.1; LC kept 1.0; system 1.1. */
  assert_non_null(strstr(csv, "p,mps,ok,2,2,2,2,2,2,0.2,0.2,2,2,2,,1,0.1,1.1\n"));
  assert_non_null(strstr(csv, "p,alone,ok,2,1,1,1,1,1,0.2,2,1,1,1,,1,1,\n"));
  free(csv);
  const char *names[] = {"lc-alone.csv", "be-alone.csv", "lc-mps.csv", "be-mps.csv", "broken.csv"};
  for (size_t i = 0; i < 5; i++) {
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
    unlink(path);
  }
  rmdir(tmpdir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(poisson_has_rate_and_cv_one),
      cmocka_unit_test(gamma_bursty_has_rate_and_cv_two),
      cmocka_unit_test(gamma_refuses_bad_parameters),
      cmocka_unit_test(gamma_is_deterministic_per_seed),
      cmocka_unit_test(azure_sample_scales_to_rate),
      cmocka_unit_test(azure_malformed_line_is_named),
      cmocka_unit_test(lc_csv_parses_rows),
      cmocka_unit_test(lc_csv_errors_name_the_line),
      cmocka_unit_test(lc_csv_reader_stops_at_len),
      cmocka_unit_test(be_csv_and_window_rate),
      cmocka_unit_test(percentiles_are_nearest_rank),
      cmocka_unit_test(manifest_errors_name_the_line),
      cmocka_unit_test(report_rows_have_ratios_to_alone),
  };
  return cmocka_run_group_tests_name("sim-pairs", tests, NULL, NULL);
}
