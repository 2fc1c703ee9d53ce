/* test-sim-determinism.c: same seed, same bytes; and the simulator against
 * a closed form.
 *
 * Determinism: the whole comparison (service time, arrivals, LC alone, BE
 * alone, every policy) is run twice with one seed and its CSV compared byte
 * for byte; another seed must change it.
 * M/D/1: one tenant, one deterministic kernel per request (service S),
 * Poisson arrivals at rate rho/S, FIFO: the mean wait in queue is
 * rho*S / (2*(1-rho)) (Pollaczek-Khinchine with zero service variance).
 * Launch, notify and inter-kernel latencies are set to 0 so a request's
 * service is exactly one block's duration.
 * A mean gap: the comparison's arrivals come at 1 / gap, whatever the LC's
 * service time, and the Poisson generator gives other gaps than the bursty.
 */
#include "sim/sim.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *lc_text = "lc 1 64 256 32 0 8000 0 o\n"
                             "lc 2 96 128 32 0 5000 0 o\n"
                             "lc 3 200 256 64 16384 12000 0 o\n";
static const char *be_text = "be 10 4000 256 32 0 6000 0 osp\n"
                             "be 11 2000 256 64 32768 20000 0 osp\n"
                             "be 12 600 256 128 0 60000 0 os\n"
                             "be 14 300 256 32 0 100000 0 o\n";

static char *compare_csv(uint64_t seed) {
  sim_trace_t lc, be;
  sim_compare_config_t cc;
  sim_row_t *rows = NULL;
  size_t nrows = 0, len = 0;
  char err[160], *buf = NULL;
  const char *why = NULL;
  assert_int_equal(sim_trace_parse(lc_text, strlen(lc_text), &lc, err, sizeof(err)), 0);
  assert_int_equal(sim_trace_parse(be_text, strlen(be_text), &be, err, sizeof(err)), 0);
  sim_compare_config_init(&cc);
  cc.duration_ns = 100000000;
  cc.seed = seed;
  if (sim_compare_pair(&cc, &lc, &be, &rows, &nrows, &why) != 0)
    fail_msg("compare: %s", why);
  assert_int_equal(nrows, 1 + POL_KIND_COUNT);
  FILE *f = open_memstream(&buf, &len);
  assert_non_null(f);
  sim_report_csv(f, rows, nrows);
  sim_report_table(f, rows, nrows);
  fclose(f);
  sim_rows_free(rows, nrows);
  sim_trace_close(&lc);
  sim_trace_close(&be);
  return buf;
}

/* LC requests completed alone in a comparison of duration_ns. */
static size_t alone_requests(bool poisson, double mean_gap_us, uint64_t duration_ns) {
  sim_trace_t lc, be;
  sim_compare_config_t cc;
  sim_row_t *rows = NULL;
  size_t nrows = 0;
  char err[160];
  const char *why = NULL;
  assert_int_equal(sim_trace_parse(lc_text, strlen(lc_text), &lc, err, sizeof(err)), 0);
  assert_int_equal(sim_trace_parse(be_text, strlen(be_text), &be, err, sizeof(err)), 0);
  sim_compare_config_init(&cc);
  cc.duration_ns = duration_ns;
  cc.poisson = poisson;
  cc.mean_gap_us = mean_gap_us;
  memset(cc.kinds, 0, sizeof(cc.kinds));
  cc.kinds[POL_KIND_TALLY] = true;
  if (sim_compare_pair(&cc, &lc, &be, &rows, &nrows, &why) != 0)
    fail_msg("compare: %s", why);
  assert_int_equal(nrows, 2);
  assert_int_equal(rows[0].kind, POL_KIND_COUNT);
  size_t n = rows[0].nlat;
  sim_rows_free(rows, nrows);
  sim_trace_close(&lc);
  sim_trace_close(&be);
  return n;
}

static void a_mean_gap_sets_the_arrival_rate(void **state) {
  (void)state;
  /* 1 ms apart on average for 0.5 s: about 500 requests, under both
   * generators; at the default load 0.5 of a ~50 us service, thousands. */
  size_t poisson = alone_requests(true, 1000, 500000000);
  size_t bursty = alone_requests(false, 1000, 500000000);
  size_t by_load = alone_requests(false, 0, 500000000);
  print_message("requests: poisson %zu, bursty %zu, load 0.5 %zu\n", poisson, bursty, by_load);
  assert_true(poisson > 400 && poisson < 600);
  assert_true(bursty > 300 && bursty < 700);
  assert_true(by_load > 2000);
  assert_int_not_equal(poisson, bursty);
}

static void same_seed_gives_identical_bytes(void **state) {
  (void)state;
  char *a = compare_csv(7), *b = compare_csv(7);
  assert_string_equal(a, b);
  char *c = compare_csv(8);
  assert_string_not_equal(a, c);
  free(a);
  free(b);
  free(c);
}

/* Mean wait in queue from the simulator, for load rho and service S. */
static double md1_mean_wait(double rho, uint64_t s_ns, uint64_t duration_ns, uint64_t seed) {
  sim_trace_t t;
  sim_arrivals_t arr;
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t res;
  char text[128], err[160];
  const char *why = NULL;
  snprintf(text, sizeof(text), "md1 1 1 32 0 0 %llu 0 o\n", (unsigned long long)s_ns);
  assert_int_equal(sim_trace_parse(text, strlen(text), &t, err, sizeof(err)), 0);
  sim_rng_init(&r, seed);
  assert_int_equal(sim_arrivals_poisson(&arr, &r, rho * 1e9 / (double)s_ns, duration_ns), 0);
  memset(&rc, 0, sizeof(rc));
  sim_gpu_config_init(&rc.gpu);
  rc.gpu.launch_ns = rc.gpu.notify_ns = rc.gpu.kernel_gap_ns = 0;
  pol_config_init(&rc.pol);
  rc.kind = POL_KIND_MPS_PRIO;
  rc.duration_ns = duration_ns;
  rc.ntenants = 1;
  rc.tenants[0] =
      (sim_tenant_spec_t){.trace = &t, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
  if (sim_run(&rc, &res, &why) != 0)
    fail_msg("sim_run: %s", why);
  assert_int_equal(res.t[0].nlat, arr.n);
  assert_int_equal(res.t[0].nexec, arr.n);
  double sum = 0;
  for (size_t i = 0; i < res.t[0].nlat; i++) {
    /* Execution latency leaves out the queueing: exactly the service time. */
    assert_int_equal(res.t[0].exec_ns[i], s_ns);
    assert_true(res.t[0].lat_ns[i] >= s_ns);
    sum += (double)(res.t[0].lat_ns[i] - s_ns);
  }
  double mean = sum / (double)res.t[0].nlat;
  sim_result_close(&res);
  sim_arrivals_close(&arr);
  sim_trace_close(&t);
  return mean;
}

static void md1_mean_wait_matches_closed_form(void **state) {
  (void)state;
  const uint64_t s = 100000; /* 100 us */
  const double rhos[] = {0.3, 0.5, 0.7};
  for (size_t i = 0; i < 3; i++) {
    double rho = rhos[i];
    double expect = rho * (double)s / (2 * (1 - rho));
    /* 500 s simulated: 1.5-3.5 million requests; the sample mean's error
     * (autocorrelated near rho = 0.7) measured well inside 1% here. */
    double got = md1_mean_wait(rho, s, 500000000000ull, 11 + i);
    print_message("# M/D/1 rho=%.1f: simulated %.1f ns, closed form %.1f ns (%+.2f%%)\n", rho, got,
                  expect, (got / expect - 1) * 100);
    assert_true(fabs(got / expect - 1) < 0.02);
  }
}

static void percentile_is_nearest_rank(void **state) {
  (void)state;
  uint64_t v[100];
  for (int i = 0; i < 100; i++)
    v[i] = (uint64_t)(100 - i); /* unsorted on purpose */
  assert_int_equal(sim_percentile(v, 100, 50), 50);
  assert_int_equal(sim_percentile(v, 100, 99), 99);
  assert_int_equal(sim_percentile(v, 100, 100), 100);
  assert_int_equal(sim_percentile(v, 100, 0), 1);
  assert_int_equal(sim_percentile(v, 0, 50), 0);
  uint64_t one = 7;
  assert_int_equal(sim_percentile(&one, 1, 99), 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(same_seed_gives_identical_bytes),
      cmocka_unit_test(a_mean_gap_sets_the_arrival_rate),
      cmocka_unit_test(md1_mean_wait_matches_closed_form),
      cmocka_unit_test(percentile_is_nearest_rank),
  };
  return cmocka_run_group_tests_name("sim-determinism", tests, NULL, NULL);
}
