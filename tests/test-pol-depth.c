/* test-pol-depth.c: the DEPTH rule of policy `tally` (pol_config_t.be_depth),
 * driven by hand on virtual time.
 *
 * be_depth = 1 is the summed turnaround budget alone (tests/test-pol-sched.c
 * checks it, unchanged).  Here: with N > 1, while the LC is idle, up to N
 * launches of profiled BE kernels whose block fits the threshold are in
 * flight, whole; none go while the LC is active; a kernel whose block is
 * longer than the threshold still goes alone; weights still split the GPU;
 * and the invariant of policy/tally.c holds on a random run: whenever an LC
 * kernel arrives with more than one BE launch in flight, every one of them
 * is of a kernel whose block takes at most the threshold, so the LC's wait
 * for running BE blocks is at most the threshold.
 */
#include "policy/pol.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/pol-harness.h"

#define SHORT_ID 9  /* 10 us blocks: fits the 31.6 us threshold */
#define LONG_ID  10 /* 40 us blocks: no form fits */
#define GRID     (132 * 4)

/* Policy `tally` with be_depth = depth, the rest as configured by default. */
static void fx_depth(fx_t *f, uint32_t depth) {
  pol_config_t c;
  pol_config_init(&c);
  c.be_depth = depth;
  fx_init(f, POL_KIND_TALLY, &c);
}

static pol_kernel_t kern(uint64_t id, uint32_t grid) {
  pol_kernel_t k = {.kernel_id = id,
                    .grid = {grid, 1, 1},
                    .block = {256, 1, 1},
                    .variants = POL_VAR_ORIGINAL, /* SASS-only, as tallyd sees cuBLAS */
                    .resident_blocks = 132};
  return k;
}

static uint64_t waves(const pol_action_t *a) {
  return (a->block_count + 131) / 132;
}

/* Profiles a kernel: submits it alone 4 times, completing every launch
 * (wave_ns per wave) before the next submission. */
static void profile(fx_t *f, uint64_t id, uint64_t wave_ns, uint64_t *sid) {
  for (int i = 0; i < 4; i++) {
    submit(f, BE, (*sid)++, kern(id, GRID));
    while (f->n > 0) {
      pol_action_t a = f->a[0];
      assert_int_equal(f->n, 1);
      f->now += waves(&a) * wave_ns + 10000;
      complete(f, &a, waves(&a) * wave_ns, a.block_count);
    }
  }
}

static void depth_one_keeps_the_summed_budget(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  pol_config_t c;
  pol_config_init(&c);
  assert_int_equal(c.be_depth, 1); /* the default */
  fx_depth(&f, 1);
  f.now = 1000;
  profile(&f, SHORT_ID, 10000, &sid);
  pol_stats_t st0, st1;
  pol_sched_stats(f.s, &st0);
  /* Four 10 us waves (40 us) do not fit 31.6 us and the kernel has no
   * slices: one fallback launch at a time, as before. */
  size_t launched = 0;
  pol_action_t first = {0};
  for (int i = 0; i < 4; i++) {
    submit(&f, BE, sid++, kern(SHORT_ID, GRID));
    if (f.n > 0 && launched == 0)
      first = f.a[0];
    launched += f.n;
  }
  assert_int_equal(launched, 1);
  assert_int_equal(first.block_count, GRID);
  pol_sched_stats(f.s, &st1);
  assert_int_equal(st1.fallback_launches, st0.fallback_launches + 1);
  f.now += 40000;
  complete(&f, &first, 40000, first.block_count);
  assert_int_equal(f.n, 1); /* the next, alone again */
  pol_sched_free(f.s);
}

static void depth_n_queues_up_to_n_short_block_launches_while_lc_idle(void **state) {
  (void)state;
  for (uint32_t depth = 2; depth <= 8; depth *= 2) {
    fx_t f;
    uint64_t sid = 1;
    fx_depth(&f, depth);
    f.now = 1000;
    profile(&f, SHORT_ID, 10000, &sid);
    pol_action_t q[64];
    size_t nq = 0;
    for (int i = 0; i < 12; i++) {
      submit(&f, BE, sid++, kern(SHORT_ID, GRID));
      for (size_t j = 0; j < f.n; j++)
        q[nq++] = f.a[j];
    }
    assert_int_equal(nq, depth); /* N in flight, no more */
    for (size_t j = 0; j < nq; j++) {
      assert_int_equal(q[j].form, POL_FORM_ORIGINAL);
      assert_int_equal(q[j].block_count, GRID); /* whole: charged by its block */
      assert_int_equal(q[j].stream_priority, POL_PRIO_LOW);
    }
    /* One completes: exactly one more goes. */
    f.now += 40000;
    complete(&f, &q[0], 40000, q[0].block_count);
    assert_int_equal(f.n, 1);
    assert_int_equal(f.a[0].block_count, GRID);
    pol_sched_free(f.s);
  }
}

static void depth_n_issues_nothing_while_lc_active(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_depth(&f, 4);
  f.now = 1000;
  profile(&f, SHORT_ID, 10000, &sid);
  submit(&f, LC, sid++, kern(7, 64));
  assert_int_equal(f.n, 1);
  pol_action_t lc = f.a[0];
  for (int i = 0; i < 6; i++) {
    submit(&f, BE, sid++, kern(SHORT_ID, GRID));
    assert_int_equal(f.n, 0); /* LC busy */
  }
  f.now += 20000;
  complete(&f, &lc, 20000, lc.block_count);
  assert_int_equal(f.n, 0); /* inside the idle window */
  f.now = pol_sched_next_timer_ns(f.s);
  timer(&f);
  assert_int_equal(f.n, 4); /* idle: N deep */
  pol_action_t be[4];
  memcpy(be, f.a, sizeof(be));
  /* The LC comes back: it goes at once, and no BE launch joins the ones
   * in flight, even when some complete. */
  submit(&f, LC, sid++, kern(7, 64));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_HIGH);
  lc = f.a[0];
  for (int i = 0; i < 4; i++) {
    f.now += 40000;
    complete(&f, &be[i], 40000, be[i].block_count);
    assert_int_equal(f.n, 0);
  }
  f.now += 1000;
  complete(&f, &lc, 1000, lc.block_count);
  assert_int_equal(f.n, 0);
  f.now = pol_sched_next_timer_ns(f.s);
  timer(&f);
  assert_int_equal(f.n, 2); /* the two left */
  pol_sched_free(f.s);
}

static void long_block_fallback_still_goes_alone(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_depth(&f, 4);
  f.now = 1000;
  profile(&f, SHORT_ID, 10000, &sid);
  profile(&f, LONG_ID, 40000, &sid);
  /* Stream order: short, short, LONG, short, short. */
  pol_action_t s[2];
  for (int i = 0; i < 2; i++) {
    submit(&f, BE, sid++, kern(SHORT_ID, GRID));
    assert_int_equal(f.n, 1);
    s[i] = f.a[0];
  }
  submit(&f, BE, sid++, kern(LONG_ID, GRID));
  assert_int_equal(f.n, 0); /* the long one waits for the deep ones */
  submit(&f, BE, sid++, kern(SHORT_ID, GRID));
  submit(&f, BE, sid++, kern(SHORT_ID, GRID));
  assert_int_equal(f.n, 0); /* stream order: nothing jumps the long one */
  f.now += 40000;
  complete(&f, &s[0], 40000, s[0].block_count);
  assert_int_equal(f.n, 0); /* one deep launch still in flight */
  pol_stats_t st0, st1;
  pol_sched_stats(f.s, &st0);
  f.now += 40000;
  complete(&f, &s[1], 40000, s[1].block_count);
  assert_int_equal(f.n, 1); /* now alone */
  pol_action_t lg = f.a[0];
  pol_sched_stats(f.s, &st1);
  assert_int_equal(st1.fallback_launches, st0.fallback_launches + 1);
  /* While it runs, no short one joins it. */
  f.now += 1000;
  timer(&f);
  assert_int_equal(f.n, 0);
  f.now += 160000;
  complete(&f, &lg, 160000, lg.block_count);
  assert_int_equal(f.n, 2); /* then the short ones go deep again */
  assert_int_equal(f.a[0].block_count, GRID);
  assert_int_equal(f.a[1].block_count, GRID);
  pol_sched_free(f.s);
}

static void weights_still_split_the_gpu(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  uint64_t served[3] = {0};
  fx_depth(&f, 4);
  assert_int_equal(pol_sched_tenant_add(f.s, BE2, POL_CLASS_BE, 3), 0);
  f.now = 1000;
  profile(&f, SHORT_ID, 10000, &sid);
  pol_action_t q[512];
  size_t nq = 0;
  for (int i = 0; i < 100; i++) {
    submit(&f, BE, sid++, kern(SHORT_ID, GRID));
    for (size_t j = 0; j < f.n; j++)
      q[nq++] = f.a[j];
    submit(&f, BE2, sid++, kern(SHORT_ID, GRID));
    for (size_t j = 0; j < f.n; j++)
      q[nq++] = f.a[j];
  }
  assert_int_equal(nq, 4);
  for (int round = 0; round < 100 && nq > 0; round++) {
    pol_action_t a = q[0];
    memmove(q, q + 1, (--nq) * sizeof(*q));
    served[a.tenant] += a.block_count;
    f.now += 40000;
    complete(&f, &a, 40000, a.block_count);
    for (size_t j = 0; j < f.n; j++)
      q[nq++] = f.a[j];
    assert_true(nq <= 4);
  }
  double ratio = (double)served[BE2] / (double)served[BE];
  assert_true(ratio > 2.7 && ratio < 3.3);
  pol_sched_free(f.s);
}

/* A random run: BE kernels of several block times (some longer than the
 * threshold, some never profiled), LC kernels arriving at random; the
 * device completes BE launches in order.  At every LC arrival, the wait the
 * invariant bounds is the longest block of the BE launches in flight. */
static void lc_wait_is_bounded_by_the_longest_running_block(void **state) {
  (void)state;
  static const uint64_t block_ns[] = {4000, 10000, 25000, 31600, 40000, 90000};
  const size_t nk = sizeof(block_ns) / sizeof(block_ns[0]);
  const uint64_t threshold = POL_DEFAULT_THRESHOLD_NS;
  for (uint32_t depth = 1; depth <= 8; depth *= 2) {
    fx_t f;
    uint64_t sid = 1, rng = 12345 + depth;
    uint64_t worst_multi = 0, lc_arrivals = 0, multi_arrivals = 0;
    fx_depth(&f, depth);
    f.now = 1000;
    struct {
      pol_action_t a;
      uint64_t block_ns;
    } fl[256];
    size_t nfl = 0;
    static uint64_t kid_block[8192];
    memset(kid_block, 0, sizeof(kid_block));
    bool lc_busy = false;
    pol_action_t lc = {0};
    for (int step = 0; step < 4000; step++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      unsigned r = (unsigned)(rng >> 33);
      /* Record the launches the last event produced. */
      for (size_t j = 0; j < f.n; j++) {
        if (f.a[j].type != POL_ACT_LAUNCH)
          continue;
        if (f.a[j].tenant == LC) {
          lc = f.a[j];
          continue;
        }
        assert_true(nfl < 256);
        fl[nfl].a = f.a[j];
        fl[nfl].block_ns = kid_block[f.a[j].submit_id % 8192];
        nfl++;
      }
      f.n = 0;
      if (r % 8 == 0 && !lc_busy) {
        /* An LC kernel arrives: what it may wait for is in flight now. */
        uint64_t longest = 0;
        for (size_t j = 0; j < nfl; j++)
          if (fl[j].block_ns > longest)
            longest = fl[j].block_ns;
        lc_arrivals++;
        if (nfl > 1) {
          multi_arrivals++;
          if (longest > worst_multi)
            worst_multi = longest;
        }
        submit(&f, LC, sid++, kern(7, 64));
        assert_int_equal(f.n, 1);
        lc_busy = true;
      } else if (r % 8 == 1 && lc_busy) {
        f.now += 5000;
        complete(&f, &lc, 5000, lc.block_count);
        lc_busy = false;
      } else if (r % 8 < 5) {
        /* A BE kernel: one of the block times; kernel ids 100+ never repeat
         * (unprofiled). */
        size_t k = (r >> 4) % (nk + 1);
        uint64_t id = k < nk ? 20 + k : 100 + (uint64_t)step;
        uint64_t b = k < nk ? block_ns[k] : 50000;
        kid_block[sid % 8192] = b;
        submit(&f, BE, sid++, kern(id, GRID));
      } else if (nfl > 0) {
        /* The device completes the oldest BE launch. */
        uint64_t dur = ((fl[0].a.block_count + 131) / 132) * fl[0].block_ns;
        f.now += dur;
        complete(&f, &fl[0].a, dur, fl[0].a.block_count);
        memmove(fl, fl + 1, (--nfl) * sizeof(fl[0]));
      } else {
        f.now += 30000;
        timer(&f);
      }
      assert_true(nfl <= (depth > 1 ? depth : POL_NO_LC_INFLIGHT));
    }
    assert_true(lc_arrivals > 100);
    /* With several BE launches in flight, every one has a block within the
     * threshold: the LC waits at most that for running blocks. */
    assert_true(worst_multi <= threshold);
    if (depth > 1)
      assert_true(multi_arrivals > 0); /* the case was exercised */
    pol_sched_free(f.s);
  }
}

static void bad_depth_is_refused(void **state) {
  (void)state;
  pol_config_t c;
  pol_config_init(&c);
  c.be_depth = 0;
  assert_int_equal(pol_config_check(&c, NULL), -EINVAL);
  c.be_depth = POL_MAX_BE_DEPTH + 1;
  assert_int_equal(pol_config_check(&c, NULL), -EINVAL);
  c.be_depth = POL_MAX_BE_DEPTH;
  assert_int_equal(pol_config_check(&c, NULL), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(depth_one_keeps_the_summed_budget),
      cmocka_unit_test(depth_n_queues_up_to_n_short_block_launches_while_lc_idle),
      cmocka_unit_test(depth_n_issues_nothing_while_lc_active),
      cmocka_unit_test(long_block_fallback_still_goes_alone),
      cmocka_unit_test(weights_still_split_the_gpu),
      cmocka_unit_test(lc_wait_is_bounded_by_the_longest_running_block),
      cmocka_unit_test(bad_depth_is_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
