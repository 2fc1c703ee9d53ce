/* test-pol-flush.c: the FLUSH form in policy/ (pol.h, policy/tally.c),
 * driven by hand on virtual time.
 *
 * A FLUSH launch's running blocks give up when its flag shows; its
 * completion says how many finished and how many gave up, and the policy
 * runs the given-up ones again as a "redo" before anything later of the
 * tenant.  Here: FLUSH is the form chosen for a kernel of long blocks while
 * the LC is idle (and the least-risk form of an unprofiled one without PTB);
 * an LC arrival preempts it; the given-up blocks come back as redo launches
 * of the right count, before the tenant's next kernel, until every block
 * finished; malformed completions are refused without changing anything;
 * a measured drain longer than the threshold stops FLUSH from fitting; and
 * the reference policies never choose it.  tests/test-sim-flush.c checks
 * the same end to end in simulation.
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

#define LONG_ID  9 /* 1 ms blocks: nothing but FLUSH fits the threshold */
#define WAVES    8 /* waves per submission */
#define GRID     (132 * WAVES)
#define BLOCK_NS 1000000 /* one wave's time */

static pol_kernel_t kern(uint64_t id, uint32_t grid, uint32_t variants) {
  pol_kernel_t k = {.kernel_id = id,
                    .grid = {grid, 1, 1},
                    .block = {256, 1, 1},
                    .variants = variants,
                    .resident_blocks = 132};
  return k;
}

#define OSF (POL_VAR_ORIGINAL | POL_VAR_SLICED | POL_VAR_FLUSH)

/* Completes a FLUSH launch a: done blocks finished, given_up gave up. */
static int complete_flush(fx_t *f, const pol_action_t *a, uint64_t dur_ns, uint64_t done,
                          uint64_t given_up) {
  pol_event_t ev = {.type = POL_EV_COMPLETED,
                    .now_ns = f->now,
                    .launch_id = a->launch_id,
                    .dev_start_ns = f->now - dur_ns,
                    .dev_end_ns = f->now,
                    .blocks_done = done,
                    .blocks_given_up = given_up};
  int rc = pol_sched_event(f->s, &ev);
  f->n = rc == 0 ? pol_sched_actions(f->s, f->a, 256) : 0;
  return rc;
}

/* Profiles LONG_ID: submissions explored (FLUSH, least risk) until the
 * wave time is known, each run to its end with nothing given up. */
static void profile_long(fx_t *f, uint64_t *sid) {
  for (int i = 0; i < 2; i++) {
    submit(f, BE, (*sid)++, kern(LONG_ID, GRID, OSF));
    assert_int_equal(f->n, 1);
    pol_action_t a = f->a[0];
    assert_int_equal(a.form, POL_FORM_FLUSH);
    assert_int_equal(a.block_count, GRID);
    assert_true(a.timed);
    f->now += WAVES * BLOCK_NS + 10000;
    assert_int_equal(complete_flush(f, &a, WAVES * BLOCK_NS, GRID, 0), 0);
    assert_int_equal(f->n, 0);
  }
  pol_profile_key_t key = {.kernel_id = LONG_ID, .grid = {GRID, 1, 1}, .block = {256, 1, 1}};
  const pol_profile_t *p = pol_profiles_find(pol_sched_profiles(f->s), &key);
  assert_non_null(p);
  assert_int_equal(p->wave_ns, BLOCK_NS);
  assert_int_equal(p->wave_samples, 2);
}

/* A policy tally at time 1000 with LONG_ID profiled. */
static void fx_profiled(fx_t *f, uint64_t *sid) {
  fx_init(f, POL_KIND_TALLY, NULL);
  f->now = 1000;
  profile_long(f, sid);
}

/* Submits LONG_ID as sid; the policy launches it in FLUSH form at once. */
static pol_action_t submit_long(fx_t *f, uint64_t sid) {
  submit(f, BE, sid, kern(LONG_ID, GRID, OSF));
  assert_true(f->n >= 1);
  assert_int_equal(f->a[0].form, POL_FORM_FLUSH);
  return f->a[0];
}

static void flush_is_chosen_for_long_blocks_while_lc_idle(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  pol_stats_t st;
  fx_profiled(&f, &sid);
  pol_sched_stats(f.s, &st);
  uint64_t explored = st.explore_launches;
  submit(&f, BE, sid++, kern(LONG_ID, GRID, OSF));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].type, POL_ACT_LAUNCH);
  assert_int_equal(f.a[0].form, POL_FORM_FLUSH);
  assert_int_equal(f.a[0].block_begin, 0);
  assert_int_equal(f.a[0].block_count, GRID); /* the whole kernel, 8 ms */
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_LOW);
  assert_false(f.a[0].redo);
  pol_sched_stats(f.s, &st);
  assert_int_equal(st.explore_launches, explored); /* planned */
  assert_int_equal(st.fallback_launches, 0);       /* it fits the budget */
  pol_sched_free(f.s);
}

/* The same kernel without FLUSH: no form fits, so each launch is a
 * fallback (the reason FLUSH exists). */
static void without_flush_long_blocks_are_fallbacks(void **state) {
  (void)state;
  fx_t f;
  pol_stats_t st;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  for (uint64_t sid = 1; sid <= 4; sid++) {
    submit(&f, BE, sid, kern(LONG_ID, GRID, POL_VAR_ORIGINAL | POL_VAR_SLICED));
    while (f.n > 0) {
      pol_action_t a = f.a[0];
      assert_int_equal(f.n, 1);
      assert_int_not_equal(a.form, POL_FORM_FLUSH);
      uint64_t dur = (a.block_count + 131) / 132 * BLOCK_NS;
      f.now += dur + 10000;
      complete(&f, &a, dur, a.block_count);
    }
  }
  pol_sched_stats(f.s, &st);
  assert_true(st.fallback_launches > 0);
  pol_sched_free(f.s);
}

static void unprofiled_kernel_with_flush_and_no_ptb_goes_flush_alone(void **state) {
  (void)state;
  fx_t f;
  pol_stats_t st;
  fx_init(&f, POL_KIND_TALLY, NULL);
  assert_int_equal(pol_sched_tenant_add(f.s, BE2, POL_CLASS_BE, 1), 0);
  f.now = 1000;
  submit(&f, BE, 1, kern(LONG_ID, GRID, OSF));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].form, POL_FORM_FLUSH);
  assert_int_equal(f.a[0].block_count, GRID); /* bounded by the flag, not by its length */
  pol_sched_stats(f.s, &st);
  assert_int_equal(st.explore_launches, 1);
  assert_int_equal(st.fallback_launches, 0);
  /* Unprofiled rule (2): another unprofiled kernel waits for it. */
  submit(&f, BE2, 2, kern(10, GRID, OSF));
  assert_int_equal(f.n, 0);
  /* With PTB offered too, FLUSH still goes first: the flag alone bounds it,
   * where PTB waits for a logical block of unknown length. */
  fx_t g;
  fx_init(&g, POL_KIND_TALLY, NULL);
  g.now = 1000;
  submit(&g, BE, 1, kern(11, GRID, POL_VAR_ALL | POL_VAR_FLUSH));
  assert_int_equal(g.n, 1);
  assert_int_equal(g.a[0].form, POL_FORM_FLUSH);
  pol_sched_free(g.s);
  /* Unprofiled, never while the LC is active. */
  fx_t h;
  fx_init(&h, POL_KIND_TALLY, NULL);
  h.now = 1000;
  submit(&h, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  submit(&h, BE, 2, kern(12, GRID, OSF));
  assert_int_equal(h.n, 0);
  pol_sched_free(h.s);
  pol_sched_free(f.s);
}

static void inflight_flush_is_preempted_when_lc_arrives(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_profiled(&f, &sid);
  pol_action_t fl = submit_long(&f, sid++);
  f.now += 300000;
  submit(&f, LC, 100, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 2);
  assert_int_equal(f.a[0].type, POL_ACT_LAUNCH);
  assert_int_equal(f.a[0].tenant, LC);
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_HIGH);
  assert_int_equal(f.a[1].type, POL_ACT_PREEMPT);
  assert_int_equal(f.a[1].launch_id, fl.launch_id);
  assert_int_equal(f.a[1].form, POL_FORM_FLUSH);
  /* Raised once: a second LC kernel raises nothing more. */
  submit(&f, LC, 101, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].type, POL_ACT_LAUNCH);
  pol_stats_t st;
  pol_sched_stats(f.s, &st);
  assert_int_equal(st.preempts, 1);
  pol_sched_free(f.s);
}

/* The flow of one preempted FLUSH launch: given-up blocks come back as a
 * redo (twice, the first redo being preempted too), each before the
 * tenant's next kernel, until every block of the submission finished. */
static void given_up_blocks_are_redone_before_the_next_kernel(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  pol_stats_t st;
  fx_profiled(&f, &sid);
  uint64_t first = sid++, second = sid++;
  submit(&f, BE, first, kern(LONG_ID, GRID, OSF));
  pol_action_t fl = f.a[0];
  assert_int_equal(fl.form, POL_FORM_FLUSH);
  submit(&f, BE, second, kern(LONG_ID, GRID, OSF));
  assert_int_equal(f.n, 0); /* nothing after a FLUSH launch in flight */
  /* The LC arrives 2.5 waves in: 264 blocks finished, the 132 running and
   * the 660 not started give up. */
  f.now += 2500000;
  submit(&f, LC, 100, kern(7, 64, POL_VAR_ORIGINAL));
  pol_action_t lc = f.a[0];
  assert_int_equal(f.a[1].type, POL_ACT_PREEMPT);
  f.now += 30000;
  assert_int_equal(complete_flush(&f, &fl, 2530000, 264, GRID - 264), 0);
  assert_int_equal(f.n, 0); /* the LC is busy */
  f.now += 10000;
  complete(&f, &lc, 10000, 64);
  assert_int_equal(f.n, 0);
  f.now = pol_sched_next_timer_ns(f.s);
  timer(&f);
  /* The redo, of exactly the given-up blocks, and nothing else. */
  assert_int_equal(f.n, 1);
  pol_action_t r1 = f.a[0];
  assert_int_equal(r1.type, POL_ACT_LAUNCH);
  assert_int_equal(r1.form, POL_FORM_FLUSH);
  assert_true(r1.redo);
  assert_int_equal(r1.redo_of, fl.launch_id);
  assert_int_equal(r1.submit_id, first);
  assert_int_equal(r1.block_begin, 0);
  assert_int_equal(r1.block_count, GRID - 264);
  /* Preempted again: 100 finish, 692 give up; the next redo names it. */
  f.now += 500000;
  submit(&f, LC, 101, kern(7, 64, POL_VAR_ORIGINAL));
  lc = f.a[0];
  assert_int_equal(f.a[1].type, POL_ACT_PREEMPT);
  assert_int_equal(f.a[1].launch_id, r1.launch_id);
  f.now += 30000;
  assert_int_equal(complete_flush(&f, &r1, 530000, 100, GRID - 264 - 100), 0);
  f.now += 10000;
  complete(&f, &lc, 10000, 64);
  f.now = pol_sched_next_timer_ns(f.s);
  timer(&f);
  assert_int_equal(f.n, 1);
  pol_action_t r2 = f.a[0];
  assert_true(r2.redo);
  assert_int_equal(r2.redo_of, r1.launch_id);
  assert_int_equal(r2.submit_id, first);
  assert_int_equal(r2.block_count, GRID - 364);
  /* The last redo finishes everything: only now the next kernel goes. */
  f.now += 6000000;
  assert_int_equal(complete_flush(&f, &r2, 6000000, GRID - 364, 0), 0);
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].submit_id, second);
  assert_false(f.a[0].redo);
  assert_int_equal(f.a[0].block_begin, 0);
  assert_int_equal(f.a[0].block_count, GRID);
  pol_action_t next = f.a[0];
  /* The finished launches are gone: reporting one again is refused. */
  assert_int_equal(complete_flush(&f, &r2, 1000, GRID - 364, 0), -EINVAL);
  f.now += WAVES * BLOCK_NS;
  assert_int_equal(complete_flush(&f, &next, WAVES * BLOCK_NS, GRID, 0), 0);
  assert_int_equal(f.n, 0); /* every block of both kernels done: nothing left */
  pol_sched_stats(f.s, &st);
  assert_int_equal(st.redo_launches, 2);
  assert_int_equal(st.blocks_given_up, (GRID - 264) + (GRID - 364));
  pol_sched_free(f.s);
}

static void malformed_completions_are_refused(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_profiled(&f, &sid);
  pol_action_t fl = submit_long(&f, sid++);
  f.now += 100000;
  /* FLUSH: done + given up must be the launch's count, no more, no less. */
  assert_int_equal(complete_flush(&f, &fl, 1000, 10, 10), -EINVAL);
  assert_int_equal(complete_flush(&f, &fl, 1000, 10, GRID), -EINVAL);
  assert_int_equal(complete_flush(&f, &fl, 1000, 0, 0), -EINVAL);
  assert_int_equal(complete_flush(&f, &fl, 1000, 1, UINT64_MAX), -EINVAL); /* no sum overflows */
  assert_int_equal(complete_flush(&f, &fl, 1000, GRID + 1, 0), -EINVAL);
  assert_int_equal(complete_flush(&f, &fl, 1000, UINT64_MAX, 1), -EINVAL);
  /* Nothing changed: the right completion is still taken, and the redo
   * counts what it says. */
  assert_int_equal(complete_flush(&f, &fl, 100000, GRID - 7, 7), 0);
  assert_int_equal(f.n, 1);
  assert_true(f.a[0].redo);
  assert_int_equal(f.a[0].block_count, 7);
  pol_action_t r = f.a[0];
  /* A redo is a FLUSH launch: the same rule. */
  assert_int_equal(complete_flush(&f, &r, 1000, 7, 1), -EINVAL);
  assert_int_equal(complete_flush(&f, &r, 1000, 7, 0), 0);
  /* Other forms give nothing up. */
  submit(&f, BE, sid++, kern(20, 132, POL_VAR_ORIGINAL | POL_VAR_SLICED));
  assert_int_equal(f.n, 1);
  pol_action_t sl = f.a[0];
  assert_int_not_equal(sl.form, POL_FORM_FLUSH);
  assert_int_equal(complete_flush(&f, &sl, 1000, 132, 1), -EINVAL);
  assert_int_equal(complete_flush(&f, &sl, 1000, 131, 1), -EINVAL);
  assert_int_equal(complete_flush(&f, &sl, 1000, 132, 0), 0);
  submit(&f, BE, sid++, kern(21, 1000, POL_VAR_ALL));
  assert_int_equal(f.n, 1);
  pol_action_t ptb = f.a[0];
  assert_int_equal(ptb.form, POL_FORM_PTB);
  assert_int_equal(complete_flush(&f, &ptb, 1000, 500, 500), -EINVAL);
  assert_int_equal(complete_flush(&f, &ptb, 1000, 1000, 0), 0);
  /* LC launches too. */
  submit(&f, LC, 500, kern(7, 64, POL_VAR_ORIGINAL | POL_VAR_FLUSH));
  assert_int_equal(f.a[0].form, POL_FORM_ORIGINAL); /* never reshaped */
  pol_action_t lc = f.a[0];
  assert_int_equal(complete_flush(&f, &lc, 1000, 64, 1), -EINVAL);
  assert_int_equal(complete_flush(&f, &lc, 1000, 64, 0), 0);
  pol_sched_free(f.s);
}

/* A kernel whose blocks commit early drains slowly: a preemption that
 * took 400 us is remembered, and its FLUSH launches no longer fit the
 * budget (they go only alone, as fallbacks). */
static void measured_slow_drain_is_charged(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  pol_stats_t st;
  fx_profiled(&f, &sid);
  submit(&f, BE, sid++, kern(LONG_ID, GRID, OSF));
  pol_action_t fl = f.a[0];
  f.now += 600000;
  submit(&f, LC, 100, kern(7, 64, POL_VAR_ORIGINAL));
  pol_action_t lc = f.a[0];
  f.now += 400000; /* the running wave committed and ran to its end */
  assert_int_equal(complete_flush(&f, &fl, 1000000, 132, GRID - 132), 0);
  pol_profile_key_t key = {.kernel_id = LONG_ID, .grid = {GRID, 1, 1}, .block = {256, 1, 1}};
  const pol_profile_t *p = pol_profiles_find(pol_sched_profiles(f.s), &key);
  assert_non_null(p);
  assert_int_equal(p->flush_drain_ns, 400000);
  assert_int_equal(p->flush_drain_samples, 1);
  assert_int_equal(p->wave_samples, 2); /* a launch that gave up is no wave sample */
  complete(&f, &lc, 10000, 64);
  f.now = pol_sched_next_timer_ns(f.s);
  timer(&f);
  assert_int_equal(f.n, 1);
  assert_true(f.a[0].redo);
  pol_sched_stats(f.s, &st);
  assert_int_equal(st.fallback_launches, 1); /* 400 us > 31.6 us: alone only */
  pol_sched_free(f.s);
}

/* The drain the caller timed on the device (pol_event_t.drain_ns) is the
 * sample, not end minus raise on the host clock: here the host saw the end
 * 400 us after the flag, the device says the SMs were free after 20 us. */
static void device_timed_drain_is_the_sample(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_profiled(&f, &sid);
  submit(&f, BE, sid++, kern(LONG_ID, GRID, OSF));
  pol_action_t fl = f.a[0];
  f.now += 600000;
  submit(&f, LC, 100, kern(7, 64, POL_VAR_ORIGINAL));
  f.now += 400000;
  pol_event_t ev = {.type = POL_EV_COMPLETED,
                    .launch_id = fl.launch_id,
                    .dev_start_ns = f.now - 1000000,
                    .dev_end_ns = f.now,
                    .blocks_done = 132,
                    .blocks_given_up = GRID - 132,
                    .drain_ns = 20000};
  feed(&f, ev);
  pol_profile_key_t key = {.kernel_id = LONG_ID, .grid = {GRID, 1, 1}, .block = {256, 1, 1}};
  const pol_profile_t *p = pol_profiles_find(pol_sched_profiles(f.s), &key);
  assert_non_null(p);
  assert_int_equal(p->flush_drain_ns, 20000);
  assert_int_equal(p->flush_drain_samples, 1);
  pol_sched_free(f.s);
}

/* A drain measured longer than the kernel's whole run in its original form
 * makes the original the least-turnaround form, so FLUSH stops, and with it
 * the samples that could lower the figure.  Each timed launch in the
 * original or sliced form moves it 1/8 of the way down to the give-up time, so FLUSH is tried
 * again: here a one-wave kernel (1 ms) after a drain of 2 ms, on the 7th
 * launch ((7/8)^6 of the excess is under 1 ms). */
static void a_long_drain_does_not_stop_flush_for_good(void **state) {
  (void)state;
  fx_t f;
  pol_config_t cfg;
  pol_config_init(&cfg);
  cfg.time_every = 1;
  fx_init(&f, POL_KIND_TALLY, &cfg);
  f.now = 1000;
  pol_profile_t rec = {.key = {.kernel_id = LONG_ID, .grid = {132, 1, 1}, .block = {256, 1, 1}},
                       .wave_ns = BLOCK_NS,
                       .wave_samples = cfg.min_samples,
                       .flush_drain_ns = 2 * BLOCK_NS,
                       .flush_drain_samples = 1};
  assert_int_equal(pol_profiles_put(pol_sched_profiles(f.s), &rec), 0);
  int launches = 0;
  for (uint64_t sid = 1; sid <= 20; sid++) {
    submit(&f, BE, sid, kern(LONG_ID, 132, OSF));
    assert_int_equal(f.n, 1);
    launches++;
    if (f.a[0].form == POL_FORM_FLUSH)
      break;
    assert_int_equal(f.a[0].form, POL_FORM_ORIGINAL);
    pol_action_t a = f.a[0];
    f.now += BLOCK_NS;
    complete(&f, &a, BLOCK_NS, 132);
  }
  assert_int_equal(launches, 7);
  pol_sched_free(f.s);
}

/* The reference policies launch kernels as they are: a kernel that offers
 * FLUSH never gets it, LC or BE. */
static void reference_policies_never_choose_flush(void **state) {
  (void)state;
  static const pol_kind_t kinds[] = {POL_KIND_TIMESLICE, POL_KIND_MPS, POL_KIND_MPS_PRIO,
                                     POL_KIND_TGS};
  for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
    fx_t f;
    fx_init(&f, kinds[k], NULL);
    pol_action_t q[64];
    size_t nq = 0;
    uint64_t launches = 0;
    f.now = 1000;
    for (uint64_t sid = 1; sid <= 6; sid++) {
      submit(&f, sid % 3 == 0 ? LC : BE, sid, kern(30 + sid, GRID, POL_VAR_ALL | POL_VAR_FLUSH));
      for (size_t i = 0; i < f.n; i++)
        q[nq++] = f.a[i];
    }
    while (nq > 0) {
      pol_action_t a = q[0];
      memmove(q, q + 1, (--nq) * sizeof(*q));
      assert_int_equal(a.type, POL_ACT_LAUNCH);
      assert_true(a.form == POL_FORM_ORIGINAL || a.form == POL_FORM_SLICED);
      assert_false(a.redo);
      launches++;
      f.now += 1000000;
      complete(&f, &a, 1000000, a.block_count);
      for (size_t i = 0; i < f.n; i++) {
        if (f.a[i].type == POL_ACT_LAUNCH)
          q[nq++] = f.a[i];
      }
      if (nq == 0 && pol_sched_next_timer_ns(f.s) != UINT64_MAX) {
        f.now = pol_sched_next_timer_ns(f.s);
        timer(&f);
        for (size_t i = 0; i < f.n; i++)
          q[nq++] = f.a[i];
      }
    }
    assert_int_equal(launches, 6);
    pol_sched_free(f.s);
  }
}

/* paper (our reading of the paper) uses the same forms: FLUSH too. */
static void paper_policy_uses_flush_and_redo(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_PAPER, NULL);
  f.now = 1000;
  submit(&f, BE, 1, kern(LONG_ID, GRID, OSF));
  assert_int_equal(f.n, 1);
  pol_action_t fl = f.a[0];
  assert_int_equal(fl.form, POL_FORM_FLUSH);
  f.now += 100000;
  submit(&f, LC, 2, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 2);
  assert_int_equal(f.a[1].type, POL_ACT_PREEMPT);
  pol_action_t lc = f.a[0];
  f.now += 30000;
  assert_int_equal(complete_flush(&f, &fl, 130000, 0, GRID), 0);
  f.now += 10000;
  complete(&f, &lc, 10000, 64);
  /* paper resumes as soon as no LC kernel is in flight. */
  assert_int_equal(f.n, 1);
  assert_true(f.a[0].redo);
  assert_int_equal(f.a[0].block_count, GRID);
  pol_sched_free(f.s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flush_is_chosen_for_long_blocks_while_lc_idle),
      cmocka_unit_test(without_flush_long_blocks_are_fallbacks),
      cmocka_unit_test(unprofiled_kernel_with_flush_and_no_ptb_goes_flush_alone),
      cmocka_unit_test(inflight_flush_is_preempted_when_lc_arrives),
      cmocka_unit_test(given_up_blocks_are_redone_before_the_next_kernel),
      cmocka_unit_test(malformed_completions_are_refused),
      cmocka_unit_test(measured_slow_drain_is_charged),
      cmocka_unit_test(device_timed_drain_is_the_sample),
      cmocka_unit_test(a_long_drain_does_not_stop_flush_for_good),
      cmocka_unit_test(reference_policies_never_choose_flush),
      cmocka_unit_test(paper_policy_uses_flush_and_redo),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
