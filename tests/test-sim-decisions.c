/* test-sim-decisions.c: the policy's promises, checked end to end in the
 * simulator (policy/ driven by sim/ exactly as tallyd drives it).
 *
 *  - the LC tenant never waits behind BE work longer than the threshold
 *    plus one block of the BE kernel (ours and the paper's; MPS breaks it,
 *    which shows the check can fail);
 *  - BE tenants progress whenever the LC tenant is idle;
 *  - BE tenants share by weight;
 *  - unprofiled kernels never break the bound, even when every BE kernel is
 *    new and some have long blocks and no slicing or PTB variant.
 * An LC kernel's wait is the time from when its stream could start it to
 * when its last block was dispatched; the LC kernels here fit in one wave,
 * so alone that wait is 0.
 */
#include "sim/sim.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* Four LC kernels that each fit in one wave, CUDA-graph style. */
static const char *lc_text = "lc 1 64 256 32 0 8000 0 o\n"
                             "lc 2 96 128 32 0 5000 0 o\n"
                             "lc 3 32 256 64 16384 12000 0 o\n"
                             "lc 4 64 256 32 0 4000 0 o\n";

/* BE kernels: short and long blocks, with and without slicing/PTB. */
static const char *be_text = "be 10 4000 256 32 0 6000 0 osp\n"
                             "be 11 2000 256 64 32768 20000 0 osp\n"
                             "be 12 2000 256 128 0 60000 0 os\n"
                             "be 13 800 128 32 0 9000 0 op\n"
                             "be 14 300 256 32 0 100000 0 o\n"
                             "be 15 5000 256 32 0 3000 0 osp\n";

static void load(const char *text, sim_trace_t *t) {
  char err[160];
  if (sim_trace_parse(text, strlen(text), t, err, sizeof(err)) != 0)
    fail_msg("%s", err);
}

static void base_config(sim_run_config_t *rc, pol_kind_t kind, uint64_t duration_ns) {
  memset(rc, 0, sizeof(*rc));
  sim_gpu_config_init(&rc->gpu);
  pol_config_init(&rc->pol);
  rc->kind = kind;
  rc->duration_ns = duration_ns;
  rc->record_waits = true;
}

/* Runs LC + BE under kind; returns the worst LC wait minus the bound
 * (threshold + longest BE block), so <= 0 means the promise held. */
static int64_t excess_wait(pol_kind_t kind, const char *be, uint64_t seed, double rate,
                           pol_stats_t *stats) {
  sim_trace_t lc, bt;
  sim_arrivals_t arr;
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t res;
  const char *why = NULL;
  load(lc_text, &lc);
  load(be, &bt);
  sim_rng_init(&r, seed);
  assert_int_equal(sim_arrivals_poisson(&arr, &r, rate, 300000000), 0);
  base_config(&rc, kind, 300000000);
  rc.ntenants = 2;
  rc.tenants[0] =
      (sim_tenant_spec_t){.trace = &lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
  rc.tenants[1] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = 1};
  if (sim_run(&rc, &res, &why) != 0)
    fail_msg("sim_run: %s", why);
  assert_true(res.t[0].nwaits > 1000);
  assert_true(res.t[1].work_ns > 0);
  int64_t excess =
      (int64_t)res.t[0].max_wait_ns - (int64_t)(rc.pol.threshold_ns + res.max_be_block_ns);
  if (stats)
    *stats = res.pol;
  sim_result_close(&res);
  sim_arrivals_close(&arr);
  sim_trace_close(&lc);
  sim_trace_close(&bt);
  return excess;
}

static void lc_wait_is_bounded_by_threshold_plus_one_block_ours(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 3; seed++)
    assert_true(excess_wait(POL_KIND_TALLY, be_text, seed, 2000, NULL) <= 0);
}

static void lc_wait_is_bounded_by_threshold_plus_one_block_paper(void **state) {
  (void)state;
  assert_true(excess_wait(POL_KIND_PAPER, be_text, 1, 2000, NULL) <= 0);
}

static void mps_breaks_the_bound_so_the_check_has_teeth(void **state) {
  (void)state;
  int64_t e = excess_wait(POL_KIND_MPS, be_text, 1, 2000, NULL);
  assert_true(e > 0);
}

static void unprofiled_kernels_never_break_the_bound(void **state) {
  (void)state;
  /* 120 distinct kernels, each seen for the first time in this run, a
   * third with long blocks and only the original form. */
  char *text = malloc(120 * 64);
  size_t off = 0;
  for (int i = 0; i < 120; i++) {
    const char *var = (i % 3 == 0) ? "o" : (i % 3 == 1) ? "os" : "osp";
    unsigned blk =
        (i % 3 == 0) ? 80000 + 1000 * (unsigned)(i % 7) : 2000 + 500 * (unsigned)(i % 11);
    off += (size_t)snprintf(text + off, 120 * 64 - off, "be %d %d 256 32 0 %u 0 %s\n", 1000 + i,
                            132 * (1 + i % 5), blk, var);
  }
  pol_stats_t st;
  for (uint64_t seed = 1; seed <= 2; seed++)
    assert_true(excess_wait(POL_KIND_TALLY, text, seed, 3000, &st) <= 0);
  assert_true(st.explore_launches >= 100); /* the kernels really were new */
  free(text);
}

static void be_progresses_whenever_lc_idle(void **state) {
  (void)state;
  sim_trace_t lc, bt;
  sim_run_config_t rc;
  sim_result_t res, alone;
  const char *why = NULL;
  /* LC requests only during the first 100 ms of 400 ms. */
  uint64_t t[200];
  for (int i = 0; i < 200; i++)
    t[i] = (uint64_t)i * 500000;
  sim_arrivals_t arr = {.t_ns = t, .n = 200};
  load(lc_text, &lc);
  load(be_text, &bt);
  base_config(&rc, POL_KIND_MPS, 400000000);
  rc.bucket_ns = 10000000;
  rc.ntenants = 1;
  rc.tenants[0] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = 1};
  assert_int_equal(sim_run(&rc, &alone, &why), 0);
  rc.kind = POL_KIND_TALLY;
  rc.ntenants = 2;
  rc.tenants[0] =
      (sim_tenant_spec_t){.trace = &lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
  rc.tenants[1] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = 1};
  assert_int_equal(sim_run(&rc, &res, &why), 0);
  /* Every 10 ms bucket after the LC went quiet does BE work at no less
   * than 40% of its alone rate (the turnaround budget costs the rest),
   * and during LC activity BE still progresses between requests. */
  for (size_t b = 11; b < 40; b++)
    assert_true(res.t[1].work_buckets[b] > 0.4 * alone.t[0].work_buckets[b]);
  for (size_t b = 0; b < 10; b++)
    assert_true(res.t[1].work_buckets[b] > 0);
  sim_result_close(&res);
  sim_result_close(&alone);
  sim_trace_close(&lc);
  sim_trace_close(&bt);
}

/* A partition (tallyd --be-sms 96 --be-sms-hold 0): BE work runs on 96 SMs
 * while the LC is active, so over the same arrivals it does more than when
 * held for the LC; the LC's kernels (at most 96 blocks of at most 256
 * threads) fit on the 36 SMs left out, so none of them waits for BE. */
static void partitioned_be_runs_beside_the_lc_which_never_waits(void **state) {
  sim_trace_t lc, bt;
  sim_arrivals_t arr;
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t held, part;
  const char *why = NULL;
  (void)state;
  load(lc_text, &lc);
  load(be_text, &bt);
  sim_rng_init(&r, 1);
  assert_int_equal(sim_arrivals_poisson(&arr, &r, 2000, 200000000), 0);
  base_config(&rc, POL_KIND_TALLY, 200000000);
  rc.ntenants = 2;
  rc.tenants[0] =
      (sim_tenant_spec_t){.trace = &lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
  rc.tenants[1] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = 1};
  assert_int_equal(sim_run(&rc, &held, &why), 0);
  rc.gpu.be_sms = 96;
  rc.pol.be_partitioned = true;
  if (sim_run(&rc, &part, &why) != 0)
    fail_msg("sim_run: %s", why);
  assert_true(part.t[0].nwaits > 1000);
  assert_int_equal(part.t[0].max_wait_ns, 0);
  assert_true(held.t[0].max_wait_ns > 0); /* without it the LC did wait */
  assert_true(part.t[1].work_ns > held.t[1].work_ns);
  sim_result_close(&held);
  sim_result_close(&part);
  rc.gpu.be_sms = 132; /* no SM left out: refused before anything is allocated */
  assert_int_not_equal(sim_run(&rc, &part, &why), 0);
  sim_arrivals_close(&arr);
  sim_trace_close(&lc);
  sim_trace_close(&bt);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Policy tally, 400 ms, the LC (lc, arrivals arr) next to the BE (bt) on a
 * partition of 96 SMs, not held (tallyd --be-sms 96 --be-sms-hold 0). */
static void partition_pair(sim_run_config_t *rc, const sim_trace_t *lc, const sim_trace_t *bt,
                           const sim_arrivals_t *arr) {
  base_config(rc, POL_KIND_TALLY, 400000000);
  rc->ntenants = 2;
  rc->tenants[0] =
      (sim_tenant_spec_t){.trace = lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = arr};
  rc->tenants[1] = (sim_tenant_spec_t){.trace = bt, .cls = POL_CLASS_BE, .weight = 1};
  rc->gpu.be_sms = 96;
  rc->pol.be_partitioned = true;
}

/* The partition not held, with and without a block bound (tallyd
 * --be-sms-block-us): the LC's four kernels each fill the GPU for 25 us,
 * the BE's blocks take 1 ms (sliced, PTB and FLUSH offered).  Not held,
 * every LC request finds the partition's SMs taken and runs on the SMs
 * left out; with a bound of 100 us the 1 ms kernel goes by the rules
 * without a partition (held while the LC is active, in a form the LC's
 * arrival stops), so requests have the whole GPU: the LC's median
 * execution is under two thirds of the other, and the BE still
 * progresses. */
static void partition_block_bound_holds_long_blocks_for_the_lc(void **state) {
  static const char *lc_big = "lc 1 1056 256 32 0 25000 0 o\nlc 1 1056 256 32 0 25000 0 o\n"
                              "lc 1 1056 256 32 0 25000 0 o\nlc 1 1056 256 32 0 25000 0 o\n";
  static const char *be_long = "be 20 1056 256 32 0 1000000 0 ospf\n";
  sim_trace_t lc, bt;
  sim_arrivals_t arr;
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t res[2];
  uint64_t med[2];
  const char *why = NULL;
  (void)state;
  load(lc_big, &lc);
  load(be_long, &bt);
  sim_rng_init(&r, 1);
  assert_int_equal(sim_arrivals_poisson(&arr, &r, 500, 400000000), 0);
  for (int i = 0; i < 2; i++) {
    partition_pair(&rc, &lc, &bt, &arr);
    rc.pol.part_block_ns = i ? 100000 : 0;
    if (sim_run(&rc, &res[i], &why) != 0)
      fail_msg("sim_run: %s", why);
    assert_true(res[i].t[0].nexec > 100);
    assert_true(res[i].t[1].work_ns > 0);
    qsort(res[i].t[0].exec_ns, res[i].t[0].nexec, sizeof(uint64_t), cmp_u64);
    med[i] = res[i].t[0].exec_ns[res[i].t[0].nexec / 2];
  }
  print_message("LC execution p50: not held %llu ns, bound %llu ns\n", (unsigned long long)med[0],
                (unsigned long long)med[1]);
  assert_true(med[1] * 3 < med[0] * 2);
  sim_result_close(&res[0]);
  sim_result_close(&res[1]);
  sim_arrivals_close(&arr);
  sim_trace_close(&lc);
  sim_trace_close(&bt);
}

/* A driver call of the LC's that waits for every kernel in the context
 * (lc_ctx_wait_every): with the partition not held, the BE's launches in
 * flight are what it waits for.  The BE queues 40 kernels of one 0.5 ms
 * wave each at a time; bounded by count only, up to 32 of them (16 ms) are
 * in flight; bounded by 2 ms of measured device time, about 4 (unmeasured
 * kernels go one at a time).  The longest wait is then at most the bound
 * plus one kernel, the BE's work the same within 5%. */
static void partition_flight_bound_bounds_a_context_wide_wait(void **state) {
  static const char *lc_small = "lc 1 32 256 32 0 20000 0 o\n";
  char be_many[40 * 40];
  sim_trace_t lc, bt;
  sim_arrivals_t arr;
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t res[2];
  const char *why = NULL;
  size_t n = 0;
  (void)state;
  for (int i = 0; i < 40; i++)
    n += (size_t)snprintf(be_many + n, sizeof(be_many) - n, "be 20 96 256 32 0 500000 0 o\n");
  load(lc_small, &lc);
  load(be_many, &bt);
  sim_rng_init(&r, 3);
  assert_int_equal(sim_arrivals_poisson(&arr, &r, 200, 400000000), 0);
  for (int i = 0; i < 2; i++) {
    partition_pair(&rc, &lc, &bt, &arr);
    rc.pol.part_flight_ns = i ? 2000000 : 0;
    rc.lc_ctx_wait_every = 1;
    if (sim_run(&rc, &res[i], &why) != 0)
      fail_msg("sim_run: %s", why);
    assert_true(res[i].t[0].ctx_waits > 20);
    assert_true(res[i].t[1].work_ns > 0);
  }
  print_message("longest context-wide wait: by count %llu ns, by device time %llu ns; BE work "
                "%.0f / %.0f ns\n",
                (unsigned long long)res[0].t[0].max_ctx_wait_ns,
                (unsigned long long)res[1].t[0].max_ctx_wait_ns, res[0].t[1].work_ns,
                res[1].t[1].work_ns);
  assert_true(res[1].t[0].max_ctx_wait_ns <= 2000000 + 500000 + 100000);
  assert_true(res[0].t[0].max_ctx_wait_ns > 2 * res[1].t[0].max_ctx_wait_ns);
  assert_true(res[1].t[1].work_ns > 0.95 * res[0].t[1].work_ns);
  sim_result_close(&res[0]);
  sim_result_close(&res[1]);
  sim_arrivals_close(&arr);
  sim_trace_close(&lc);
  sim_trace_close(&bt);
}

/* Time-slicing end to end: a BE tenant keeps the GPU busy with 50 us
 * kernels; LC requests (one 100 us wave) arrive at random.  Each request's
 * execution waits the residual of BE's free-running 2 ms slice plus the
 * 0.19 ms switch (and a drain of at most two BE kernels): never more than
 * one slice, never less than the switch, about half a slice on average (a
 * model that handed BE a fresh full slice would make every wait ~2 ms). */
static void timeslice_request_waits_at_most_one_slice_plus_switch(void **state) {
  (void)state;
  sim_trace_t lc, bt;
  sim_arrivals_t arr;
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t res;
  const char *why = NULL;
  load("lc 1 132 256 32 0 100000 0 o\n", &lc);
  load("be 10 264 256 32 0 50000 0 o\n", &bt);
  sim_rng_init(&r, 5);
  assert_int_equal(sim_arrivals_poisson(&arr, &r, 100, 1000000000), 0);
  base_config(&rc, POL_KIND_MPS_PRIO, 1000000000);
  rc.ntenants = 1;
  rc.tenants[0] =
      (sim_tenant_spec_t){.trace = &lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
  assert_int_equal(sim_run(&rc, &res, &why), 0);
  uint64_t service = res.t[0].exec_ns[0]; /* alone: launch + 100 us + notify */
  for (size_t i = 0; i < res.t[0].nexec; i++)
    assert_int_equal(res.t[0].exec_ns[i], service);
  sim_result_close(&res);
  rc.kind = POL_KIND_TIMESLICE;
  rc.ntenants = 2;
  rc.tenants[1] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = 1};
  assert_int_equal(sim_run(&rc, &res, &why), 0);
  assert_true(res.t[0].nexec > 50);
  /* Two BE kernels (50 us + launch and stream gaps) may still drain. */
  uint64_t drain = 2 * (50000 + rc.gpu.launch_ns + rc.gpu.kernel_gap_ns);
  double sum = 0;
  size_t n = 0;
  uint64_t prev_end = 0;
  for (size_t i = 0; i < res.t[0].nexec; i++) { /* FIFO: completion order = arrival order */
    uint64_t e = res.t[0].exec_ns[i], end = arr.t_ns[i] + res.t[0].lat_ns[i];
    assert_true(e <= service + rc.pol.timeslice_ns + rc.pol.ts_switch_ns + drain);
    /* A request that found BE owning the GPU (it did not queue behind the
     * previous one, and BE had time to take over since) waits the switch. */
    bool be_owned = end - e == arr.t_ns[i] &&
                    arr.t_ns[i] > prev_end + rc.pol.ts_idle_ns + rc.pol.ts_switch_ns + drain;
    if (be_owned) {
      assert_true(e >= service + rc.pol.ts_switch_ns);
      sum += (double)(e - service);
      n++;
    }
    prev_end = end;
  }
  assert_true(n > 50);
  double mean = sum / (double)n;
  assert_true(mean > 0.25 * (double)rc.pol.timeslice_ns);
  assert_true(mean < 0.75 * (double)rc.pol.timeslice_ns + (double)rc.pol.ts_switch_ns);
  assert_true(res.t[1].work_ns > 0);
  sim_result_close(&res);
  sim_arrivals_close(&arr);
  sim_trace_close(&lc);
  sim_trace_close(&bt);
}

static double weighted_ratio(pol_kind_t kind, uint32_t w1, uint32_t w2) {
  sim_trace_t bt;
  sim_run_config_t rc;
  sim_result_t res;
  const char *why = NULL;
  load(be_text, &bt);
  base_config(&rc, kind, 200000000);
  rc.ntenants = 2;
  rc.tenants[0] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = w1};
  rc.tenants[1] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = w2};
  assert_int_equal(sim_run(&rc, &res, &why), 0);
  double ratio = res.t[1].work_ns / res.t[0].work_ns;
  sim_result_close(&res);
  sim_trace_close(&bt);
  return ratio;
}

static void be_tenants_share_by_weight(void **state) {
  (void)state;
  double r = weighted_ratio(POL_KIND_TALLY, 1, 3);
  if (!(r > 2.55 && r < 3.45))
    fail_msg("weights 1:3 gave work ratio %.3f", r);
  r = weighted_ratio(POL_KIND_TALLY, 2, 2);
  if (!(r > 0.85 && r < 1.15))
    fail_msg("weights 2:2 gave work ratio %.3f", r);
}

/* Regression: a PTB launch that ends on its own after its flag was raised
 * but before the flag shows frees its slot; a new launch may take the slot,
 * and the late flag event must not cancel the new launch's blocks (it did:
 * the sliced launch then reported fewer blocks than it had, -EINVAL). */
static void late_flag_does_not_cancel_a_reused_launch(void **state) {
  (void)state;
  sim_trace_t lc, bt;
  sim_arrivals_t arr;
  sim_rng_t r;
  sim_run_config_t rc;
  sim_result_t res;
  const char *why = NULL;
  load(lc_text, &lc);
  /* PTB kernels that end long before their flag shows (the GPU's flag
   * latency is set to 200 us here), then long sliced kernels whose launches
   * take the freed slots; sharing lets them start while the LC is busy. */
  load("be 20 20000 256 32 0 1000 0 op\n"
       "be 21 20000 256 32 0 4000 0 os\n"
       "be 22 20000 256 32 0 1000 0 op\n"
       "be 23 20000 256 32 0 5000 0 os\n",
       &bt);
  for (uint64_t seed = 1; seed <= 4; seed++) {
    sim_rng_init(&r, seed);
    assert_int_equal(sim_arrivals_poisson(&arr, &r, 20000, 100000000), 0);
    base_config(&rc, POL_KIND_TALLY, 100000000);
    rc.pol.share_block_ns = 10000;
    rc.gpu.flag_ns = 200000;
    rc.ntenants = 2;
    rc.tenants[0] =
        (sim_tenant_spec_t){.trace = &lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
    rc.tenants[1] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = 1};
    if (sim_run(&rc, &res, &why) != 0)
      fail_msg("seed %llu: %s", (unsigned long long)seed, why);
    assert_true(res.pol.preempts > 0);
    sim_result_close(&res);
    sim_arrivals_close(&arr);
  }
  sim_trace_close(&lc);
  sim_trace_close(&bt);
}

static void bad_run_configs_are_refused(void **state) {
  (void)state;
  sim_trace_t bt;
  sim_run_config_t rc;
  sim_result_t res;
  const char *why = NULL;
  char err[160];
  /* 2048 > 1024 threads: the parser refuses it already. */
  assert_int_equal(sim_trace_parse("be 1 10 2048 32 0 1000\n", 23, &bt, err, sizeof(err)), -EPROTO);
  load("be 1 10 1024 255 0 1000\n", &bt); /* 255 regs x 1024 threads: no SM holds it */
  base_config(&rc, POL_KIND_TALLY, 1000000);
  rc.ntenants = 1;
  rc.tenants[0] = (sim_tenant_spec_t){.trace = &bt, .cls = POL_CLASS_BE, .weight = 1};
  assert_int_equal(sim_run(&rc, &res, &why), -EINVAL);
  assert_non_null(why);
  rc.ntenants = 0;
  assert_int_equal(sim_run(&rc, &res, &why), -EINVAL);
  rc.ntenants = 1;
  rc.tenants[0].cls = POL_CLASS_LC; /* LC without arrivals */
  assert_int_equal(sim_run(&rc, &res, &why), -EINVAL);
  sim_trace_close(&bt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lc_wait_is_bounded_by_threshold_plus_one_block_ours),
      cmocka_unit_test(lc_wait_is_bounded_by_threshold_plus_one_block_paper),
      cmocka_unit_test(mps_breaks_the_bound_so_the_check_has_teeth),
      cmocka_unit_test(unprofiled_kernels_never_break_the_bound),
      cmocka_unit_test(be_progresses_whenever_lc_idle),
      cmocka_unit_test(partitioned_be_runs_beside_the_lc_which_never_waits),
      cmocka_unit_test(partition_block_bound_holds_long_blocks_for_the_lc),
      cmocka_unit_test(partition_flight_bound_bounds_a_context_wide_wait),
      cmocka_unit_test(be_tenants_share_by_weight),
      cmocka_unit_test(timeslice_request_waits_at_most_one_slice_plus_switch),
      cmocka_unit_test(late_flag_does_not_cancel_a_reused_launch),
      cmocka_unit_test(bad_run_configs_are_refused),
  };
  return cmocka_run_group_tests_name("sim-decisions", tests, NULL, NULL);
}
