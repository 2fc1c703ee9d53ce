/* test-sim-flush.c: the FLUSH form end to end in the simulator (sim/gpu.c's
 * model driven by policy/, as tallyd would drive it).
 *
 * A BE kernel of one wave of 1 ms blocks that offers FLUSH runs next to an
 * LC tenant whose requests arrive at fixed times.  Checked: when the LC
 * arrives, the BE blocks that had not committed give up and free their SMs
 * (the LC waits about the flag latency, not a block); the given-up blocks
 * run again in redo launches, so every BE step still finishes all of its
 * blocks, and the device time accounts for each block once as work plus
 * the time lost by those that gave up; without FLUSH the LC waits for a
 * whole block (the check has teeth); blocks that commit at their start
 * never give up while running, and the policy learns that they drain
 * slowly.  The trace format's `f` letter is read and written.  Virtual
 * time only: no wall clock is measured.
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

#define BLOCK_NS    1000000ull /* the BE's blocks */
#define GRID        1056       /* one wave: 8 blocks of 256 threads on each of 132 SMs */
#define DURATION_NS 40000000ull

/* One LC request: two kernels of 25 us blocks over the whole GPU. */
static const char *lc_text = "lc 1 1056 256 32 0 25000 0 o\n"
                             "lc 1 1056 256 32 0 25000 0 o\n";

/* LC arrivals: a few, far apart, each landing inside a BE block. */
static uint64_t arrival_ns[] = {3500000, 9250000, 15600000, 22100000, 30300000};

static void load(const char *text, sim_trace_t *t) {
  char err[160];
  if (sim_trace_parse(text, strlen(text), t, err, sizeof(err)) != 0)
    fail_msg("%s", err);
}

/* Runs the pair with the BE's kernel offering variants (trace letters)
 * and blocks committing commit_ppm into their run. */
static void run_pair(const char *variants, uint32_t commit_ppm, sim_result_t *res) {
  char be_text[96];
  sim_trace_t lc, be;
  sim_run_config_t rc;
  const char *why = NULL;
  sim_arrivals_t arr = {.t_ns = arrival_ns, .n = sizeof(arrival_ns) / sizeof(arrival_ns[0])};
  snprintf(be_text, sizeof(be_text), "be 2 %d 256 32 0 %llu 0 %s\n", GRID,
           (unsigned long long)BLOCK_NS, variants);
  load(lc_text, &lc);
  load(be_text, &be);
  memset(&rc, 0, sizeof(rc));
  sim_gpu_config_init(&rc.gpu);
  rc.gpu.flush_commit_ppm = commit_ppm;
  pol_config_init(&rc.pol);
  rc.kind = POL_KIND_TALLY;
  rc.duration_ns = DURATION_NS;
  rc.ntenants = 2;
  rc.tenants[0] =
      (sim_tenant_spec_t){.trace = &lc, .cls = POL_CLASS_LC, .weight = 1, .arrivals = &arr};
  rc.tenants[1] = (sim_tenant_spec_t){.trace = &be, .cls = POL_CLASS_BE, .weight = 1};
  if (sim_run(&rc, res, &why) != 0)
    fail_msg("sim_run: %s", why);
  sim_trace_close(&lc);
  sim_trace_close(&be);
}

static void given_up_blocks_run_again_and_every_block_is_counted(void **state) {
  (void)state;
  sim_result_t res;
  run_pair("osf", 1000000, &res);
  /* Every request was served, and each waited about the flag latency
   * (flag 27.7 us + one poll 2 us), never a 1 ms block. */
  assert_int_equal(res.t[0].requests, sizeof(arrival_ns) / sizeof(arrival_ns[0]));
  assert_true(res.t[0].max_wait_ns < 100000);
  /* Blocks gave up, the policy saw every one of them and ran them again. */
  assert_true(res.pol.preempts >= 1);
  assert_true(res.flush_given_up > 0);
  assert_int_equal(res.pol.blocks_given_up, res.flush_given_up);
  assert_true(res.pol.redo_launches >= 1);
  /* Each step completed only with all of its blocks finished: the work
   * finished is its steps' blocks plus part of the step running at the
   * end; given-up blocks are not work. */
  uint64_t steps = res.t[1].requests;
  uint64_t finished = (uint64_t)(res.t[1].work_ns / (double)BLOCK_NS + 0.5);
  assert_true(steps >= 20);
  assert_true(finished >= steps * GRID);
  assert_true(finished < (steps + 1) * GRID);
  /* The time lost: blocks that gave up had run some of their 1.02 ms. */
  assert_true(res.flush_wasted_ns > 0);
  assert_true(res.flush_wasted_ns <= (double)res.flush_given_up * (double)BLOCK_NS * 1.02);
  sim_result_close(&res);
}

static void without_flush_the_lc_waits_for_a_block(void **state) {
  (void)state;
  sim_result_t res;
  run_pair("osp", 1000000, &res);
  assert_int_equal(res.t[0].requests, sizeof(arrival_ns) / sizeof(arrival_ns[0]));
  assert_true(res.t[0].max_wait_ns > 300000); /* a 1 ms block ran on */
  assert_int_equal(res.flush_given_up, 0);
  assert_int_equal(res.pol.redo_launches, 0);
  assert_true(res.t[1].requests >= 20);
  sim_result_close(&res);
}

static void blocks_committed_at_start_run_on_and_drain_slowly(void **state) {
  (void)state;
  sim_result_t res;
  run_pair("osf", 0, &res);
  /* No running block can give up (only ones that had not started). */
  assert_true(res.flush_wasted_ns == 0);
  assert_true(res.t[0].max_wait_ns > 300000);
  /* The policy measured the slow drain: FLUSH no longer fits the budget,
   * so the kernel's launches go alone, as fallbacks. */
  assert_true(res.pol.fallback_launches > 0);
  assert_true(res.t[1].requests >= 20);
  sim_result_close(&res);
}

static void runs_repeat_exactly(void **state) {
  (void)state;
  sim_result_t a, b;
  run_pair("osf", 1000000, &a);
  run_pair("osf", 1000000, &b);
  assert_int_equal(a.events, b.events);
  assert_int_equal(a.blocks, b.blocks);
  assert_int_equal(a.flush_given_up, b.flush_given_up);
  assert_true(a.flush_wasted_ns == b.flush_wasted_ns);
  assert_true(a.t[1].work_ns == b.t[1].work_ns);
  sim_result_close(&a);
  sim_result_close(&b);
}

static void trace_letter_f_is_flush(void **state) {
  (void)state;
  sim_trace_t t;
  char err[160], buf[512];
  const char *text = "be 2 1056 256 32 0 1000000 0 ospf\n"
                     "be 3 1056 256 32 0 1000000 0 of\n";
  assert_int_equal(sim_trace_parse(text, strlen(text), &t, err, sizeof(err)), 0);
  assert_int_equal(t.k[0].variants, POL_VAR_ALL | POL_VAR_FLUSH);
  assert_int_equal(t.k[1].variants, POL_VAR_ORIGINAL | POL_VAR_FLUSH);
  FILE *f = fmemopen(buf, sizeof(buf), "w");
  assert_non_null(f);
  assert_int_equal(sim_trace_write(&t, f), 0);
  assert_int_equal(fclose(f), 0);
  assert_non_null(strstr(buf, " ospf\n"));
  assert_non_null(strstr(buf, " of\n"));
  sim_trace_close(&t);
  assert_int_equal(sim_trace_parse("be 2 8 256 32 0 1000 0 opx\n", 27, &t, err, sizeof(err)),
                   -EPROTO);
  assert_non_null(strstr(err, "variants"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(given_up_blocks_run_again_and_every_block_is_counted),
      cmocka_unit_test(without_flush_the_lc_waits_for_a_block),
      cmocka_unit_test(blocks_committed_at_start_run_on_and_drain_slowly),
      cmocka_unit_test(runs_repeat_exactly),
      cmocka_unit_test(trace_letter_f_is_flush),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
