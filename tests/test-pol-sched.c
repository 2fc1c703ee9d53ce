/* test-pol-sched.c: the policies' decisions, driven by hand on virtual time.
 *
 * No simulator here: each test feeds pol_sched_event() the events tallyd
 * would, and checks the actions that come back (launch now, in which form,
 * at which priority; preempt; hold).  tests/test-sim-decisions.c checks the
 * same rules end to end in simulation.
 */
#include "policy/pol.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/pol-harness.h"

static pol_kernel_t kern(uint64_t id, uint32_t grid, uint32_t variants) {
  pol_kernel_t k = {.kernel_id = id,
                    .grid = {grid, 1, 1},
                    .block = {256, 1, 1},
                    .variants = variants,
                    .resident_blocks = 132};
  return k;
}

/* Submits kernel id n times with the LC idle and completes every launch
 * (oldest first) whole after wave_ns per wave (per logical block round for
 * PTB); counts the launches of each form in forms (NULL: not counted). */
static void run_whole(fx_t *f, uint64_t id, uint32_t grid, uint32_t variants, uint64_t wave_ns,
                      int n, uint64_t *sid, unsigned forms[POL_FORM_FLUSH + 1]) {
  pol_action_t q[512];
  size_t nq = 0;
  for (int i = 0; i < n; i++) {
    submit(f, BE, (*sid)++, kern(id, grid, variants));
    for (;;) {
      for (size_t j = 0; j < f->n; j++)
        q[nq++] = f->a[j];
      f->n = 0;
      if (nq == 0)
        break;
      pol_action_t a = q[0];
      memmove(q, q + 1, (--nq) * sizeof(*q));
      assert_int_equal(a.type, POL_ACT_LAUNCH);
      if (forms)
        forms[a.form]++;
      uint64_t waves = (a.block_count + 131) / 132;
      uint64_t dur = a.form == POL_FORM_PTB
                         ? ((a.block_count + a.ptb_workers - 1) / a.ptb_workers) * wave_ns
                         : waves * wave_ns;
      f->now += dur + 10000;
      complete(f, &a, dur, a.block_count);
    }
  }
}

/* Makes kernel id known: run_whole 8 times. */
static void profile_kernel(fx_t *f, uint64_t id, uint32_t grid, uint32_t variants, uint64_t wave_ns,
                           uint64_t *sid) {
  run_whole(f, id, grid, variants, wave_ns, 8, sid, NULL);
}

static void lc_kernel_is_launched_at_once_at_high_priority(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  submit(&f, LC, 1, kern(7, 4096, POL_VAR_ALL));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].type, POL_ACT_LAUNCH);
  assert_int_equal(f.a[0].form, POL_FORM_ORIGINAL);
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_HIGH);
  assert_int_equal(f.a[0].block_count, 4096);
  assert_int_equal(f.a[0].tenant, LC);
  pol_sched_free(f.s);
}

static void be_is_held_while_lc_active_and_resumes_after_idle_window(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  pol_action_t lc = f.a[0];
  submit(&f, BE, 2, kern(9, 132, POL_VAR_ALL));
  assert_int_equal(f.n, 0); /* held: LC busy */
  f.now = 20000;
  complete(&f, &lc, 10000, 64);
  assert_int_equal(f.n, 0); /* held: inside the idle window */
  uint64_t t = pol_sched_next_timer_ns(f.s);
  assert_int_equal(t, 20000 + 50000); /* default resume_idle 50 us */
  f.now = t;
  timer(&f);
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].tenant, BE);
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_LOW);
  pol_sched_free(f.s);
}

static void unprofiled_kernel_is_explored_preemptible_and_alone(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TALLY, NULL);
  assert_int_equal(pol_sched_tenant_add(f.s, BE2, POL_CLASS_BE, 1), 0);
  f.now = 1000;
  submit(&f, BE, 1, kern(9, 10000, POL_VAR_ALL));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].form, POL_FORM_PTB); /* least-risk form */
  assert_true(f.a[0].ptb_workers <= 132);
  /* A second unprofiled kernel waits: nothing else may be in flight. */
  submit(&f, BE2, 2, kern(10, 10000, POL_VAR_ALL));
  assert_int_equal(f.n, 0);
  pol_stats_t st;
  pol_sched_stats(f.s, &st);
  assert_int_equal(st.explore_launches, 1);
  pol_sched_free(f.s);
}

/* With FLUSH offered, an unprofiled kernel is explored in FLUSH first (the
 * LC waits for the flag alone, however long the blocks); PTB is explored
 * next only when a wave fits the threshold, since a longer one could never
 * fit the budget in PTB form and each sample would risk a whole block of
 * the LC's wait. */
static void flush_is_explored_first_and_ptb_only_for_short_blocks(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  unsigned longb[POL_FORM_FLUSH + 1] = {0}, shortb[POL_FORM_FLUSH + 1] = {0};
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  submit(&f, BE, sid++, kern(9, 1056, POL_VAR_ALL | POL_VAR_FLUSH));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].form, POL_FORM_FLUSH);
  f.now += 8000000;
  complete(&f, &f.a[0], 8000000, 1056);
  run_whole(&f, 9, 1056, POL_VAR_ALL | POL_VAR_FLUSH, 1000000, 12, &sid, longb); /* 1 ms blocks */
  run_whole(&f, 10, 1056, POL_VAR_ALL | POL_VAR_FLUSH, 10000, 12, &sid, shortb); /* 10 us */
  print_message("1 ms blocks: %u FLUSH, %u PTB; 10 us blocks: %u FLUSH, %u PTB, %u sliced\n",
                longb[POL_FORM_FLUSH], longb[POL_FORM_PTB], shortb[POL_FORM_FLUSH],
                shortb[POL_FORM_PTB], shortb[POL_FORM_SLICED]);
  assert_int_equal(longb[POL_FORM_PTB], 0);
  assert_true(longb[POL_FORM_FLUSH] >= 12);
  assert_true(shortb[POL_FORM_PTB] >= 1);
  pol_sched_free(f.s);
}

/* A FLUSH launch whose flag the caller raised on its own (an LC worker,
 * before the policy heard of the LC): its drain is measured from that
 * raise, the earlier of the two, whether or not a PREEMPT followed. */
static void flush_drain_counts_from_the_callers_own_raise(void **state) {
  (void)state;
  fx_t f;
  pol_profile_key_t key = {.kernel_id = 9, .grid = {1056, 1, 1}, .block = {256, 1, 1}};
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000000;
  submit(&f, BE, 1, kern(9, 1056, POL_VAR_ALL | POL_VAR_FLUSH));
  assert_int_equal(f.n, 1);
  pol_action_t a = f.a[0];
  assert_int_equal(a.form, POL_FORM_FLUSH);
  f.now += 500000; /* raised by the caller at now - 40 us; no PREEMPT action came */
  pol_event_t ev = {.type = POL_EV_COMPLETED, .launch_id = a.launch_id,
                    .dev_start_ns = f.now - 500000, .dev_end_ns = f.now,
                    .blocks_done = 528, .blocks_given_up = 528, .flag_ns = f.now - 40000};
  feed(&f, ev);
  const pol_profile_t *p = pol_profiles_find(pol_sched_profiles(f.s), &key);
  assert_non_null(p);
  assert_int_equal(p->flush_drain_samples, 1);
  assert_int_equal(p->flush_drain_ns, 40000);
  pol_sched_free(f.s);
}

static void unprofiled_kernel_without_ptb_goes_as_one_wave(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  submit(&f, BE, 1, kern(9, 10000, POL_VAR_ORIGINAL | POL_VAR_SLICED));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].form, POL_FORM_SLICED);
  assert_int_equal(f.a[0].block_count, 132); /* one wave */
  pol_sched_free(f.s);
}

static void unprofiled_kernel_is_never_launched_while_lc_active(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  for (uint64_t i = 0; i < 20; i++) {
    f.now += 1000;
    submit(&f, BE, 10 + i, kern(100 + i, 50000, POL_VAR_ORIGINAL));
    assert_int_equal(f.n, 0);
  }
  pol_sched_free(f.s);
}

static void running_ptb_is_preempted_when_lc_arrives(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  submit(&f, BE, 1, kern(9, 100000, POL_VAR_ALL));
  pol_action_t ptb = f.a[0];
  assert_int_equal(ptb.form, POL_FORM_PTB);
  f.now = 5000;
  submit(&f, LC, 2, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 2);
  assert_int_equal(f.a[0].type, POL_ACT_LAUNCH);
  assert_int_equal(f.a[1].type, POL_ACT_PREEMPT);
  assert_int_equal(f.a[1].launch_id, ptb.launch_id);
  /* It stops after 500 logical blocks; the rest is launched again later. */
  pol_action_t lc = f.a[0];
  f.now = 40000;
  complete(&f, &ptb, 30000, 500);
  assert_int_equal(f.n, 0);
  f.now = 50000;
  complete(&f, &lc, 10000, 64);
  f.now = 50000 + 50000;
  timer(&f);
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].block_begin, 500);
  assert_int_equal(f.a[0].block_begin + f.a[0].block_count <= 100000, 1);
  pol_sched_free(f.s);
}

static void profiled_kernel_gets_best_form_within_threshold(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  /* 10 us waves, 50 waves: the original would take 500 us. */
  profile_kernel(&f, 9, 132 * 50, POL_VAR_ORIGINAL | POL_VAR_SLICED, 10000, &sid);
  submit(&f, BE, sid++, kern(9, 132 * 50, POL_VAR_ORIGINAL | POL_VAR_SLICED));
  assert_true(f.n >= 1);
  assert_int_equal(f.a[0].form, POL_FORM_SLICED);
  /* Largest slice whose waves fit 31.6 us at 10 us a wave: 2 waves; the
   * 11.6 us left of the budget then takes one more wave, and no more. */
  assert_int_equal(f.a[0].block_count, 264);
  assert_int_equal(f.n, 2);
  assert_int_equal(f.a[1].block_count, 132);
  pol_sched_free(f.s);
}

static void long_block_kernel_falls_back_only_when_nothing_else_in_flight(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  /* 200 us waves: no form fits 31.6 us. */
  profile_kernel(&f, 9, 132 * 4, POL_VAR_ORIGINAL | POL_VAR_SLICED, 200000, &sid);
  pol_stats_t st;
  pol_sched_stats(f.s, &st);
  assert_true(st.fallback_launches > 0);
  submit(&f, BE, sid++, kern(9, 132 * 4, POL_VAR_ORIGINAL | POL_VAR_SLICED));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].block_count, 132); /* the least-turnaround form: one wave */
  pol_sched_free(f.s);
}

static void drifted_profile_is_reset_and_reexplored(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  profile_kernel(&f, 9, 132, POL_VAR_ORIGINAL | POL_VAR_SLICED, 10000, &sid);
  /* Now every run takes 5x longer. */
  profile_kernel(&f, 9, 132, POL_VAR_ORIGINAL | POL_VAR_SLICED, 50000, &sid);
  pol_stats_t st;
  pol_sched_stats(f.s, &st);
  assert_true(st.reprofiles >= 1);
  pol_profile_key_t key = {.kernel_id = 9, .grid = {132, 1, 1}, .block = {256, 1, 1}};
  const pol_profile_t *p = pol_profiles_find(pol_sched_profiles(f.s), &key);
  assert_non_null(p);
  /* Re-learned: the estimate follows the new time. */
  assert_true(p->wave_ns > 40000 && p->wave_ns < 60000);
  pol_sched_free(f.s);
}

static void saved_profiles_spare_a_restarted_scheduler_exploration(void **state) {
  (void)state;
  fx_t f, g;
  uint64_t sid = 1;
  char path[] = "/tmp/test-pol-sched-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  profile_kernel(&f, 9, 132 * 50, POL_VAR_ORIGINAL | POL_VAR_SLICED, 10000, &sid);
  assert_int_equal(pol_profiles_save(pol_sched_profiles(f.s), path), 0);
  pol_sched_free(f.s);
  /* "Restart": a new scheduler loads the file and plans at once. */
  fx_init(&g, POL_KIND_TALLY, NULL);
  assert_int_equal(pol_profiles_load(pol_sched_profiles(g.s), path, NULL), 0);
  g.now = 1000;
  submit(&g, BE, 1, kern(9, 132 * 50, POL_VAR_ORIGINAL | POL_VAR_SLICED));
  assert_int_equal(g.n, 2);
  assert_int_equal(g.a[0].block_count, 264); /* planned, not a one-wave exploration */
  pol_stats_t st;
  pol_sched_stats(g.s, &st);
  assert_int_equal(st.explore_launches, 0);
  pol_sched_free(g.s);
  unlink(path);
}

static void sharing_lets_only_short_profiled_blocks_run_next_to_lc(void **state) {
  (void)state;
  pol_config_t c;
  fx_t f;
  uint64_t sid = 1;
  pol_config_init(&c);
  c.share_block_ns = 5000;
  fx_init(&f, POL_KIND_TALLY, &c);
  f.now = 1000;
  profile_kernel(&f, 9, 132 * 8, POL_VAR_ORIGINAL | POL_VAR_SLICED, 4000, &sid);  /* short */
  profile_kernel(&f, 10, 132 * 8, POL_VAR_ORIGINAL | POL_VAR_SLICED, 9000, &sid); /* long */
  submit(&f, LC, sid++, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1);
  submit(&f, BE, sid++, kern(9, 132 * 8, POL_VAR_ORIGINAL | POL_VAR_SLICED));
  assert_true(f.n >= 1); /* 4 us blocks: runs next to the busy LC */
  assert_int_equal(f.a[0].form, POL_FORM_SLICED);
  pol_action_t a[8];
  size_t n = f.n;
  memcpy(a, f.a, n * sizeof(*a));
  for (size_t i = 0; i < n; i++) {
    f.now += 10000;
    complete(&f, &a[i], 4000, a[i].block_count);
  }
  /* Drain kernel 9, then kernel 10 (9 us blocks) must wait. */
  for (int guard = 0; guard < 20 && f.n > 0; guard++) {
    pol_action_t b = f.a[0];
    f.now += 10000;
    complete(&f, &b, 4000, b.block_count);
  }
  submit(&f, BE, sid++, kern(10, 132 * 8, POL_VAR_ORIGINAL | POL_VAR_SLICED));
  assert_int_equal(f.n, 0);
  /* An unprofiled kernel waits too, however short. */
  submit(&f, BE, sid++, kern(11, 132, POL_VAR_ALL));
  assert_int_equal(f.n, 0);
  pol_sched_free(f.s);
  /* The shared block time may not exceed the threshold. */
  c.share_block_ns = c.threshold_ns + 1;
  assert_int_equal(pol_config_check(&c, NULL), -EINVAL);
}

static void weights_share_budget_by_device_time(void **state) {
  (void)state;
  fx_t f;
  uint64_t sid = 1;
  uint64_t served[3] = {0};
  fx_init(&f, POL_KIND_TALLY, NULL);
  assert_int_equal(pol_sched_tenant_add(f.s, BE2, POL_CLASS_BE, 3), 0);
  f.now = 1000;
  profile_kernel(&f, 9, 132, POL_VAR_ORIGINAL | POL_VAR_SLICED, 10000, &sid);
  /* Both tenants always have 100 kernels queued. */
  pol_action_t inflight[256];
  size_t nin = 0;
  for (int i = 0; i < 100; i++) {
    submit(&f, BE, sid++, kern(9, 132, POL_VAR_ORIGINAL | POL_VAR_SLICED));
    for (size_t j = 0; j < f.n; j++)
      inflight[nin++] = f.a[j];
    submit(&f, BE2, sid++, kern(9, 132, POL_VAR_ORIGINAL | POL_VAR_SLICED));
    for (size_t j = 0; j < f.n; j++)
      inflight[nin++] = f.a[j];
  }
  f.n = 0;
  /* Collect what is in flight, complete it oldest first, repeat; stop at
   * 100 launches, while both tenants still have work queued. */
  for (int round = 0; round < 100; round++) {
    for (size_t i = 0; i < f.n; i++)
      inflight[nin++] = f.a[i];
    f.n = 0;
    if (nin == 0)
      break;
    pol_action_t a = inflight[0];
    memmove(inflight, inflight + 1, (--nin) * sizeof(*inflight));
    served[a.tenant] += a.block_count;
    f.now += 10000;
    complete(&f, &a, 10000, a.block_count);
  }
  /* Weight 3 vs 1: expect a 3:1 split of the work, within 10%. */
  double ratio = (double)served[BE2] / (double)served[BE];
  assert_true(ratio > 2.7 && ratio < 3.3);
  pol_sched_free(f.s);
}

static void mps_launches_everything_at_once(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_MPS, NULL);
  submit(&f, BE, 1, kern(9, 100000, POL_VAR_ALL));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].block_count, 100000);
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_LOW);
  submit(&f, LC, 2, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_LOW); /* MPS: no priority */
  pol_sched_free(f.s);
  fx_init(&f, POL_KIND_MPS_PRIO, NULL);
  submit(&f, LC, 2, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.a[0].stream_priority, POL_PRIO_HIGH);
  pol_sched_free(f.s);
}

static void timeslice_holds_other_tenant_until_slice_ends(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TIMESLICE, NULL);
  f.now = 0;
  submit(&f, BE, 1, kern(9, 1000, POL_VAR_ALL));
  assert_int_equal(f.n, 1);
  pol_action_t be = f.a[0];
  f.now = 100000;
  submit(&f, LC, 2, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 0); /* BE owns the slice */
  assert_int_equal(pol_sched_next_timer_ns(f.s), 2000000);
  f.now = 2000000;
  timer(&f);
  assert_int_equal(f.n, 0); /* draining BE's launch */
  f.now = 2100000;
  complete(&f, &be, 2000000, 1000);
  assert_int_equal(f.n, 0); /* the switch takes ts_switch_ns from the boundary */
  assert_int_equal(pol_sched_next_timer_ns(f.s), 2000000 + 190000);
  f.now = 2190000;
  timer(&f);
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].tenant, LC);
  pol_sched_free(f.s);
}

/* A tiny device for the time-slicing tests: every launch runs dur_ns of
 * its tenant (BE 50 us, LC 30 us) from when it is issued; events are fed in
 * time order (completions, then the policy's timer, then a submit). */
typedef struct ts_dev {
  fx_t f;
  pol_action_t fl[64]; /* launches in flight */
  uint64_t end[64];
  size_t nfl;
  uint64_t first_launch[3]; /* per tenant, first launch time after `watch_from` */
  uint64_t watch_from;
} ts_dev_t;

static void ts_take(ts_dev_t *d) {
  for (size_t i = 0; i < d->f.n; i++) {
    pol_action_t a = d->f.a[i];
    assert_int_equal(a.type, POL_ACT_LAUNCH);
    assert_true(d->nfl < 64);
    d->fl[d->nfl] = a;
    d->end[d->nfl++] = d->f.now + (a.tenant == LC ? 30000 : 50000);
    if (d->f.now >= d->watch_from && d->first_launch[a.tenant] == UINT64_MAX)
      d->first_launch[a.tenant] = d->f.now;
  }
  d->f.n = 0;
}

/* Runs the device until `until`, submitting `sub` (tenant, kernel) at sub_at
 * if sub_at < UINT64_MAX. */
static void ts_run(ts_dev_t *d, uint64_t until, uint64_t sub_at, uint32_t tenant, uint64_t sid) {
  for (;;) {
    size_t first = 0;
    uint64_t t = UINT64_MAX;
    for (size_t i = 0; i < d->nfl; i++)
      if (d->end[i] < t) {
        t = d->end[i];
        first = i;
      }
    uint64_t tm = pol_sched_next_timer_ns(d->f.s);
    uint64_t next = t < tm ? t : tm;
    if (sub_at < next)
      next = sub_at;
    if (next > until)
      return;
    d->f.now = next;
    if (next == t) {
      pol_action_t a = d->fl[first];
      d->fl[first] = d->fl[--d->nfl];
      d->end[first] = d->end[d->nfl];
      complete(&d->f, &a, a.tenant == LC ? 30000 : 50000, a.block_count);
    } else if (next == tm) {
      timer(&d->f);
    } else {
      submit(&d->f, tenant, sid, kern(tenant == LC ? 7 : 9, 132, POL_VAR_ORIGINAL));
      sub_at = UINT64_MAX;
    }
    ts_take(d);
  }
}

/* Records each tenant's first launch at or after `from`. */
static void ts_watch(ts_dev_t *d, uint64_t from) {
  d->watch_from = from;
  for (int i = 0; i < 3; i++)
    d->first_launch[i] = UINT64_MAX;
}

static void ts_dev_init(ts_dev_t *d) {
  memset(d, 0, sizeof(*d));
  fx_init(&d->f, POL_KIND_TIMESLICE, NULL);
  ts_watch(d, UINT64_MAX);
}

/* BE has owned the GPU alone for many slices (its slices renew at
 * boundaries nobody waits at).  An LC kernel that comes waits for the end of
 * the current slice (boundaries every 2 ms from BE's start) plus the switch,
 * never a fresh full slice: at most one slice + switch. */
static void timeslice_newcomer_waits_at_most_one_slice(void **state) {
  (void)state;
  static const uint64_t arrivals[] = {10300000, 11999000, 12001000, 17777000};
  static const uint64_t boundary[] = {12000000, 12000000, 14000000, 18000000};
  for (size_t i = 0; i < sizeof(arrivals) / sizeof(arrivals[0]); i++) {
    ts_dev_t d;
    ts_dev_init(&d);
    for (uint64_t k = 0; k < 1000; k++) { /* 2 x 50 us in flight: busy for 25 ms */
      submit(&d.f, BE, 1000 + k, kern(9, 132, POL_VAR_ORIGINAL));
      ts_take(&d);
    }
    assert_int_equal(d.nfl, 2); /* TS_DEPTH */
    ts_run(&d, arrivals[i] - 1, UINT64_MAX, 0, 0);
    ts_watch(&d, arrivals[i]);
    ts_run(&d, arrivals[i] + 3000000, arrivals[i], LC, 1);
    uint64_t lc_at = d.first_launch[LC];
    assert_int_equal(lc_at, boundary[i] + 190000);
    assert_true(lc_at - arrivals[i] <= 2000000 + 190000);
    assert_true(lc_at - arrivals[i] >= 190000);
    pol_sched_free(d.f.s);
  }
}

/* The LC owns the GPU; BE waits.  When the LC has had no work for
 * ts_idle_ns (50 us) its slice ends early and BE gets the GPU after the
 * switch (190 us), long before the 2 ms boundary. */
static void timeslice_idle_owner_ends_its_slice_early(void **state) {
  (void)state;
  ts_dev_t d;
  ts_dev_init(&d);
  submit(&d.f, LC, 1, kern(7, 132, POL_VAR_ORIGINAL)); /* LC owns from 0, done at 30 us */
  ts_take(&d);
  ts_watch(&d, 0);
  ts_run(&d, 1000000, 10000, BE, 2); /* BE waits from 10 us */
  assert_int_equal(d.first_launch[BE], 30000 + 50000 + 190000);
  pol_sched_free(d.f.s);
}

/* A pause shorter than ts_idle_ns (an eager tenant between two launches)
 * does not cost the owner its slice: the LC's next kernel goes at once. */
static void timeslice_short_pause_keeps_the_slice(void **state) {
  (void)state;
  ts_dev_t d;
  ts_dev_init(&d);
  submit(&d.f, LC, 1, kern(7, 132, POL_VAR_ORIGINAL)); /* done at 30 us */
  ts_take(&d);
  ts_run(&d, 15000, 10000, BE, 2); /* BE waits from 10 us */
  ts_watch(&d, 60000);
  ts_run(&d, 70000, 60000, LC, 3); /* 30 us after the LC went idle */
  assert_int_equal(d.first_launch[LC], 60000);
  assert_int_equal(d.first_launch[BE], UINT64_MAX);
  pol_sched_free(d.f.s);
}

static void tgs_window_halves_when_lc_delayed(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TGS, NULL);
  f.now = 0;
  for (int i = 0; i < 20; i++)
    submit(&f, BE, 100 + i, kern(9, 132, POL_VAR_ALL));
  /* Initial window: 8 BE launches in flight. */
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  pol_action_t lc = f.a[0];
  assert_int_equal(lc.tenant, LC);
  f.now = 1000000;
  pol_event_t ev = {.type = POL_EV_COMPLETED,
                    .launch_id = lc.launch_id,
                    .dev_start_ns = 900000,
                    .dev_end_ns = 1000000,
                    .blocks_done = 64};
  feed(&f, ev); /* LC waited 900 us */
  f.now = 5000000;
  timer(&f);
  /* Window now 4: more BE submits launch nothing (8 already in flight). */
  submit(&f, BE, 500, kern(9, 132, POL_VAR_ALL));
  assert_int_equal(f.n, 0);
  pol_sched_free(f.s);
}

/* No LC tenant: BE kernels, profiled or not, go at once, up to
 * POL_NO_LC_INFLIGHT in flight; the next goes when one completes. */
static void without_lc_be_goes_at_once_up_to_a_bound(void **state) {
  fx_t f;
  pol_config_t c;
  (void)state;
  pol_config_init(&c);
  memset(&f, 0, sizeof(f));
  assert_int_equal(pol_sched_new(POL_KIND_TALLY, &c, &f.s), 0);
  assert_int_equal(pol_sched_tenant_add(f.s, BE, POL_CLASS_BE, 1), 0);
  pol_action_t first = {0};
  size_t launched = 0;
  for (uint64_t i = 1; i <= POL_NO_LC_INFLIGHT + 3; i++) {
    submit(&f, BE, i, kern(7, 4000, POL_VAR_ORIGINAL));
    for (size_t j = 0; j < f.n; j++) {
      assert_int_equal(f.a[j].type, POL_ACT_LAUNCH);
      assert_int_equal(f.a[j].form, POL_FORM_ORIGINAL);
      assert_int_equal(f.a[j].stream_priority, POL_PRIO_LOW);
      if (launched++ == 0)
        first = f.a[j];
    }
  }
  assert_int_equal(launched, POL_NO_LC_INFLIGHT);
  complete(&f, &first, 500000, first.block_count);
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].submit_id, POL_NO_LC_INFLIGHT + 1);
  pol_sched_free(f.s);
}

/* PARTITION: with the BE on SMs the LC does not share, BE launches go while
 * the LC is busy, whole, even unprofiled and of long blocks, up to the
 * bound, and a running PTB launch is not preempted for the LC. */
static void partitioned_be_is_not_held_while_lc_active(void **state) {
  fx_t f;
  pol_config_t c;
  size_t launched = 0;
  (void)state;
  pol_config_init(&c);
  c.be_partitioned = true;
  c.part_flight_ns = 0; /* the launch-count bound alone (see the next tests) */
  fx_init(&f, POL_KIND_TALLY, &c);
  f.now = 1000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].tenant, LC);
  for (uint64_t i = 0; i < POL_NO_LC_INFLIGHT + 2; i++) {
    f.now += 1000;
    submit(&f, BE, 10 + i, kern(100 + i, 50000, POL_VAR_ALL));
    for (size_t j = 0; j < f.n; j++) {
      assert_int_equal(f.a[j].type, POL_ACT_LAUNCH);
      assert_int_equal(f.a[j].tenant, BE);
      assert_int_equal(f.a[j].form, POL_FORM_ORIGINAL);
      assert_int_equal(f.a[j].block_count, 50000);
      assert_int_equal(f.a[j].stream_priority, POL_PRIO_LOW);
      launched++;
    }
  }
  assert_int_equal(launched, POL_NO_LC_INFLIGHT); /* the LC is busy all along */
  f.now += 1000;
  submit(&f, LC, 2, kern(7, 64, POL_VAR_ORIGINAL)); /* no preemption, LC at once */
  assert_int_equal(f.n, 1);
  assert_int_equal(f.a[0].type, POL_ACT_LAUNCH);
  assert_int_equal(f.a[0].tenant, LC);
  pol_sched_free(f.s);
  /* The same submissions without the partition: held while the LC is busy. */
  fx_init(&f, POL_KIND_TALLY, NULL);
  f.now = 1000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  f.n = 0;
  submit(&f, BE, 10, kern(100, 50000, POL_VAR_ALL));
  assert_int_equal(f.n, 0);
  pol_sched_free(f.s);
}

/* PARTITION: a launch the caller must run outside the partition
 * (POL_VAR_WHOLE_GPU) waits while the LC is active, and its tenant's next
 * launch behind it (FIFO); once the LC's idle window has passed (the timer
 * the policy asked for) both go. */
static void partitioned_be_holds_what_runs_outside_the_partition(void **state) {
  fx_t f;
  pol_config_t c;
  pol_action_t lc;
  uint64_t when;
  (void)state;
  pol_config_init(&c);
  c.be_partitioned = true;
  c.part_flight_ns = 0; /* the launch-count bound alone (see the next tests) */
  fx_init(&f, POL_KIND_TALLY, &c);
  f.now = 1000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1);
  lc = f.a[0];
  submit(&f, BE, 10, kern(100, 500, POL_VAR_ORIGINAL | POL_VAR_WHOLE_GPU));
  assert_int_equal(f.n, 0); /* the LC is busy */
  submit(&f, BE, 11, kern(101, 500, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 0); /* behind it */
  f.now += 20000;
  complete(&f, &lc, 20000, 64);
  assert_int_equal(f.n, 0); /* the LC is idle, within its window */
  when = pol_sched_next_timer_ns(f.s);
  assert_int_equal(when, f.now + c.resume_idle_ns);
  f.now = when;
  timer(&f);
  assert_int_equal(f.n, 2);
  assert_int_equal(f.a[0].submit_id, 10);
  assert_int_equal(f.a[1].submit_id, 11);
  assert_int_equal(f.a[0].form, POL_FORM_ORIGINAL);
  pol_sched_free(f.s);
}

/* PARTITION with part_block_ns: a BE kernel whose profiled block takes
 * longer than the bound goes by the rules without a partition: while the LC
 * is active it waits (and its tenant's later launches), and when the LC is
 * idle its 1 ms blocks fit no budget, so it goes alone (a fallback launch)
 * once the BE's other launches are done; one within the bound, or
 * unprofiled, goes beside the LC. */
static void partitioned_be_holds_long_blocks_while_lc_active(void **state) {
  fx_t f;
  pol_config_t c;
  pol_action_t lc;
  pol_action_t be[2];
  uint64_t sid = 100, when;
  (void)state;
  pol_config_init(&c);
  c.be_partitioned = true;
  c.part_block_ns = 100000;
  c.part_flight_ns = 0; /* the launch-count bound alone */
  fx_init(&f, POL_KIND_TALLY, &c);
  f.now = 1000;
  profile_kernel(&f, 300, 132, POL_VAR_ORIGINAL, 1000000, &sid); /* 1 ms blocks */
  profile_kernel(&f, 301, 132, POL_VAR_ORIGINAL, 50000, &sid);   /* 50 us blocks */
  f.now += 1000000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1);
  lc = f.a[0];
  submit(&f, BE, 10, kern(301, 132, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1); /* within the bound: beside the LC */
  be[0] = f.a[0];
  submit(&f, BE, 11, kern(302, 132, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1); /* unprofiled: goes, and is profiled */
  be[1] = f.a[0];
  submit(&f, BE, 12, kern(300, 132, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 0); /* 1 ms blocks: waits */
  submit(&f, BE, 13, kern(301, 132, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 0); /* behind it */
  f.now += 20000;
  complete(&f, &lc, 20000, 64);
  assert_int_equal(f.n, 0);
  when = pol_sched_next_timer_ns(f.s);
  assert_int_equal(when, f.now + c.resume_idle_ns);
  f.now = when;
  timer(&f);
  assert_int_equal(f.n, 0); /* idle, but 10 and 11 are in flight: 1 ms fits no budget */
  f.now += 50000;
  complete(&f, &be[0], 50000, 132);
  assert_int_equal(f.n, 0);
  complete(&f, &be[1], 50000, 132);
  assert_int_equal(f.n, 2); /* alone now: the fallback, then the short one beside it */
  assert_int_equal(f.a[0].submit_id, 12);
  assert_int_equal(f.a[0].form, POL_FORM_ORIGINAL);
  assert_int_equal(f.a[1].submit_id, 13);
  pol_sched_free(f.s);
  /* Without the bound every one of them goes beside the LC. */
  c.part_block_ns = 0;
  fx_init(&f, POL_KIND_TALLY, &c);
  sid = 100;
  f.now = 1000;
  profile_kernel(&f, 300, 132, POL_VAR_ORIGINAL, 1000000, &sid);
  f.now += 1000000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  submit(&f, BE, 12, kern(300, 132, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1);
  pol_sched_free(f.s);
}

/* BE launch a (id ida) is issued alone and b (idb) waits behind it; a
 * completes after da ns and b goes; b completes after db ns. */
static void alone_then_next(fx_t *f, uint64_t ida, pol_kernel_t a, uint64_t da, uint64_t idb,
                            pol_kernel_t b, uint64_t db) {
  pol_action_t be;
  submit(f, BE, ida, a);
  assert_int_equal(f->n, 1);
  be = f->a[0];
  submit(f, BE, idb, b);
  assert_int_equal(f->n, 0);
  f->now += da;
  complete(f, &be, da, 132);
  assert_int_equal(f->n, 1);
  assert_int_equal(f->a[0].submit_id, idb);
  be = f->a[0];
  f->now += db;
  complete(f, &be, db, 132);
}

/* PARTITION with part_flight_ns: the BE launches in flight are bounded by
 * their estimated device time, not only by their count.  An unprofiled
 * launch counts as the whole bound (one at a time); profiled ones of 0.5 ms
 * go four at a time under 2 ms, and the next goes when one completes; one
 * longer than the bound goes alone; a shape not profiled yet of a profiled
 * kernel counts its waves at that kernel's wave time.  The LC is busy all along: none of this
 * is about holding for it. */
static void partitioned_be_in_flight_is_bounded_by_device_time(void **state) {
  fx_t f;
  pol_config_t c;
  pol_action_t be[8];
  pol_stats_t st;
  uint64_t sid = 100;
  (void)state;
  pol_config_init(&c);
  c.be_partitioned = true;
  c.part_flight_ns = 2000000;
  fx_init(&f, POL_KIND_TALLY, &c);
  f.now = 1000;
  profile_kernel(&f, 300, 132, POL_VAR_ORIGINAL, 500000, &sid);  /* one wave of 0.5 ms */
  profile_kernel(&f, 301, 132, POL_VAR_ORIGINAL, 5000000, &sid); /* one wave of 5 ms */
  f.now += 1000000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  assert_int_equal(f.n, 1);
  /* Unprofiled: one at a time. */
  alone_then_next(&f, 10, kern(400, 132, POL_VAR_ORIGINAL), 100000, 11,
                  kern(401, 132, POL_VAR_ORIGINAL), 100000);
  assert_int_equal(f.n, 0);
  /* 0.5 ms each: four fit 2 ms; then each completion lets the next one go. */
  size_t nf = 0;
  for (uint64_t i = 0; i < 6; i++) {
    submit(&f, BE, 20 + i, kern(300, 132, POL_VAR_ORIGINAL));
    assert_int_equal(f.n, i < 4 ? 1 : 0);
    if (i < 4)
      be[nf++] = f.a[0];
  }
  for (uint64_t next = 24; nf > 0;) {
    f.now += 500000;
    complete(&f, &be[0], 500000, 132);
    memmove(be, be + 1, --nf * sizeof(*be));
    assert_int_equal(f.n, next < 26 ? 1 : 0);
    if (next < 26) {
      assert_int_equal(f.a[0].submit_id, next++);
      be[nf++] = f.a[0];
    }
  }
  /* 5 ms: longer than the bound, alone. */
  alone_then_next(&f, 30, kern(301, 132, POL_VAR_ORIGINAL), 5000000, 31,
                  kern(300, 132, POL_VAR_ORIGINAL), 500000);
  /* A shape of kernel 300 not profiled yet (two waves): charged at the wave
   * time of its profiled shape, 1 ms, so two go, not one. */
  for (uint64_t i = 0; i < 3; i++) {
    submit(&f, BE, 40 + i, kern(300, 264, POL_VAR_ORIGINAL));
    assert_int_equal(f.n, i < 2 ? 1 : 0);
  }
  pol_sched_stats(f.s, &st);
  assert_int_equal(st.flight_waits, 5); /* 11, 24, 25, 31 and 42, each counted once */
  pol_sched_free(f.s);
  /* Without it (0): the launch count alone bounds them. */
  c.part_flight_ns = 0;
  fx_init(&f, POL_KIND_TALLY, &c);
  f.now = 1000;
  submit(&f, LC, 1, kern(7, 64, POL_VAR_ORIGINAL));
  for (uint64_t i = 0; i < 4; i++) {
    submit(&f, BE, 10 + i, kern(400 + i, 132, POL_VAR_ORIGINAL));
    assert_int_equal(f.n, 1); /* unprofiled, each at once */
  }
  pol_sched_free(f.s);
}

static void bad_events_are_rejected(void **state) {
  (void)state;
  fx_t f;
  fx_init(&f, POL_KIND_TALLY, NULL);
  pol_event_t ev = {.type = POL_EV_SUBMIT, .tenant = 42, .kernel = kern(1, 1, 0)};
  assert_int_equal(pol_sched_event(f.s, &ev), -EINVAL); /* unknown tenant */
  ev.tenant = BE;
  ev.kernel.grid[1] = 0;
  assert_int_equal(pol_sched_event(f.s, &ev), -EINVAL); /* zero grid */
  assert_int_equal(pol_kernel_check(&ev.kernel), -EINVAL); /* what a caller checks first */
  ev.kernel.grid[1] = 1;
  assert_int_equal(pol_kernel_check(&ev.kernel), 0);
  ev.kernel.block[0] = 2048;
  assert_int_equal(pol_sched_event(f.s, &ev), -EINVAL); /* > 1024 threads */
  assert_int_equal(pol_kernel_check(&ev.kernel), -EINVAL);
  ev.kernel.block[0] = 1;
  ev.kernel.grid[0] = 1u << 31, ev.kernel.grid[1] = 1u << 10; /* 2^41 blocks */
  assert_int_equal(pol_kernel_check(&ev.kernel), -EINVAL);
  assert_int_equal(pol_sched_event(f.s, &ev), -EINVAL);
  assert_int_equal(pol_kernel_check(NULL), -EINVAL);
  pol_event_t c = {.type = POL_EV_COMPLETED, .launch_id = 12345};
  assert_int_equal(pol_sched_event(f.s, &c), -EINVAL);                      /* unknown launch */
  assert_int_equal(pol_sched_tenant_add(f.s, 5, POL_CLASS_LC, 1), -EINVAL); /* 2nd LC */
  assert_int_equal(pol_sched_tenant_add(f.s, BE, POL_CLASS_BE, 1), -EEXIST);
  assert_int_equal(pol_sched_tenant_add(f.s, 6, POL_CLASS_BE, 0), -EINVAL);
  /* A non-PTB launch cannot stop early. */
  f.now = 1;
  submit(&f, BE, 1, kern(9, 10, POL_VAR_ORIGINAL));
  pol_event_t d = {.type = POL_EV_COMPLETED,
                   .launch_id = f.a[0].launch_id,
                   .dev_start_ns = 1,
                   .dev_end_ns = 2,
                   .blocks_done = 3};
  assert_int_equal(pol_sched_event(f.s, &d), -EINVAL);
  pol_sched_free(f.s);
}

static void kind_names_round_trip(void **state) {
  (void)state;
  for (int k = 0; k < POL_KIND_COUNT; k++) {
    pol_kind_t out;
    assert_int_equal(pol_kind_parse(pol_kind_name((pol_kind_t)k), &out), 0);
    assert_int_equal(out, k);
  }
  pol_kind_t out;
  assert_int_equal(pol_kind_parse("fifo", &out), -EINVAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lc_kernel_is_launched_at_once_at_high_priority),
      cmocka_unit_test(be_is_held_while_lc_active_and_resumes_after_idle_window),
      cmocka_unit_test(partitioned_be_is_not_held_while_lc_active),
      cmocka_unit_test(partitioned_be_holds_what_runs_outside_the_partition),
      cmocka_unit_test(partitioned_be_holds_long_blocks_while_lc_active),
      cmocka_unit_test(partitioned_be_in_flight_is_bounded_by_device_time),
      cmocka_unit_test(unprofiled_kernel_is_explored_preemptible_and_alone),
      cmocka_unit_test(unprofiled_kernel_without_ptb_goes_as_one_wave),
      cmocka_unit_test(flush_is_explored_first_and_ptb_only_for_short_blocks),
      cmocka_unit_test(flush_drain_counts_from_the_callers_own_raise),
      cmocka_unit_test(unprofiled_kernel_is_never_launched_while_lc_active),
      cmocka_unit_test(running_ptb_is_preempted_when_lc_arrives),
      cmocka_unit_test(profiled_kernel_gets_best_form_within_threshold),
      cmocka_unit_test(long_block_kernel_falls_back_only_when_nothing_else_in_flight),
      cmocka_unit_test(drifted_profile_is_reset_and_reexplored),
      cmocka_unit_test(saved_profiles_spare_a_restarted_scheduler_exploration),
      cmocka_unit_test(sharing_lets_only_short_profiled_blocks_run_next_to_lc),
      cmocka_unit_test(weights_share_budget_by_device_time),
      cmocka_unit_test(mps_launches_everything_at_once),
      cmocka_unit_test(timeslice_holds_other_tenant_until_slice_ends),
      cmocka_unit_test(timeslice_newcomer_waits_at_most_one_slice),
      cmocka_unit_test(timeslice_idle_owner_ends_its_slice_early),
      cmocka_unit_test(timeslice_short_pause_keeps_the_slice),
      cmocka_unit_test(tgs_window_halves_when_lc_delayed),
      cmocka_unit_test(without_lc_be_goes_at_once_up_to_a_bound),
      cmocka_unit_test(bad_events_are_rejected),
      cmocka_unit_test(kind_names_round_trip),
  };
  return cmocka_run_group_tests_name("pol-sched", tests, NULL, NULL);
}
