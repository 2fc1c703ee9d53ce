/* test-rw-ptb-model.c: the PTB launch protocol (rewrite/rw.h), host side
 * rw_ptb_plan() against a step-by-step model of the worker loop that
 * rewrite/xform-apply.c emits, under random interleavings of workers,
 * preemption at random moments and relaunches with random worker counts,
 * batch sizes and with or without statics.
 *
 * What it proves and what it does not.  The model follows the emitted PTX
 * step for step at block granularity (every decision in the loop is
 * block-uniform; thread 0's global accesses are the steps other blocks can
 * interleave with): static index first, then at each epilogue "every index
 * static: exit", thread 0's batch (C, E), the {next, flag} load, the
 * batch-size rule, the atomic, the index >= total exit.  It checks that every
 * index runs exactly once, that after each drain exactly the indices below
 * word 0 have run (what a relaunch relies on), that a grid that fits in the
 * workers touches the control block zero times, and that no worker takes an
 * index after it saw the flag.  It is a model: that the PTX matches it is
 * what tests/test-rw-xform-apply.c checks line by line and what the GPU
 * differential tests (tests/gpu/rw-diff-*) check on hardware.
 */
#include "rewrite/rw.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* The control block (rw.h: word 0 next, flag at 8). */
typedef struct ctl {
  uint64_t next;
  uint32_t flag;
  unsigned loads, atomics; /* accesses by workers, for the counts below */
} ctl_t;

/* One worker block's position in the emitted loop. */
enum { W_START, W_EPI, W_TAKE, W_RUN, W_DONE };

typedef struct worker {
  int pc;
  uint64_t idx;     /* index to run (W_RUN) */
  uint64_t c, e;    /* thread 0's last index and batch end (tally_slot[16..31]) */
  uint64_t seen;    /* next as thread 0 loaded it (W_TAKE) */
  int saw_flag;     /* the flag was set when thread 0 loaded it */
  unsigned batch_b; /* batch size computed from the load */
} worker_t;

typedef struct launch {
  uint64_t total, first;
  uint32_t nstatic, batch, workers;
} launch_t;

static uint64_t rng_state;
static uint64_t rnd(void) {
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 0x2545F4914F6CDD1DULL;
}

/* One step of worker w (w is its %ctaid.x); runs[] counts executions. */
static void step(worker_t *wk, uint32_t w, const launch_t *l, ctl_t *c, unsigned *runs) {
  switch (wk->pc) {
  case W_START: /* prologue: thread 0 clears (C, E); static index? */
    wk->c = wk->e = 0;
    wk->idx = l->first + w;
    wk->pc = (w < l->nstatic && wk->idx < l->total) ? W_RUN : W_EPI;
    return;
  case W_EPI: /* every index static: exit without touching the control block */
    if (l->first + l->nstatic >= l->total) {
      wk->pc = W_DONE;
      return;
    }
    if (wk->c + 1 < wk->e) { /* the batch has another index */
      wk->c++;
      wk->idx = wk->c;
      wk->pc = W_RUN;
      return;
    }
    /* the 16-byte ld.volatile of {next, flag} */
    c->loads++;
    wk->seen = c->next;
    wk->saw_flag = c->flag != 0;
    if (wk->saw_flag || wk->seen >= l->total) {
      wk->pc = W_DONE; /* ~0 published: every thread exits */
      return;
    }
    {
      uint32_t left = (uint32_t)(l->total - wk->seen), b = left / l->workers / 2;
      uint32_t cap = l->batch > 1 ? l->batch : 1;
      b = b > 1 ? b : 1;
      wk->batch_b = b < cap ? b : cap;
    }
    wk->pc = W_TAKE;
    return;
  case W_TAKE: { /* atom.global.add.u64 next, b (another block may have run between) */
    uint64_t i = c->next;
    c->atomics++;
    c->next += wk->batch_b;
    wk->c = i;
    wk->e = i + wk->batch_b < l->total ? i + wk->batch_b : l->total;
    wk->idx = i;
    wk->pc = i >= l->total ? W_DONE : W_RUN;
    return;
  }
  case W_RUN:
    assert_true(wk->idx < l->total);
    runs[wk->idx]++;
    wk->pc = W_EPI;
    return;
  }
}

/* Runs one launch to its drain; the flag is set after `flag_at` steps
 * (never if 0).  Returns the steps taken. */
static unsigned run_launch(const launch_t *l, ctl_t *c, unsigned *runs, unsigned flag_at) {
  worker_t *wk = calloc(l->workers, sizeof(*wk));
  unsigned live = l->workers, steps = 0;
  assert_non_null(wk);
  while (live > 0) {
    uint32_t w = (uint32_t)(rnd() % l->workers);
    if (wk[w].pc == W_DONE)
      continue;
    if (flag_at != 0 && ++steps == flag_at)
      c->flag = 1;
    step(&wk[w], w, l, c, runs);
    /* a worker that saw the flag takes nothing more */
    if (wk[w].saw_flag)
      assert_int_equal(wk[w].pc, W_DONE);
    if (wk[w].pc == W_DONE)
      live--;
  }
  free(wk);
  return steps;
}

/* Drives a kernel of `total` indices to completion as a daemon would:
 * fresh launch, preemptions, relaunches from word 0.  Checks the drain
 * invariant after every launch and exactly-once at the end. */
static void drive(uint64_t total, int preempt, unsigned *launches_out, ctl_t *ctl_out) {
  unsigned *runs = calloc(total, sizeof(*runs));
  ctl_t c = {0};
  uint64_t next = 0;
  unsigned launches = 0;
  assert_non_null(runs);
  for (;;) {
    rw_ptb_launch_t pl;
    launch_t l;
    int rc;
    l.workers = 1 + (uint32_t)(rnd() % 9);
    rc = rw_ptb_plan(total, next, l.workers, launches == 0 || (rnd() & 1), &pl);
    if (rc == 1)
      break;
    assert_int_equal(rc, 0);
    assert_true(pl.nstatic <= l.workers);
    l.total = total;
    l.first = pl.first;
    l.nstatic = pl.nstatic;
    l.batch = (uint32_t)(rnd() % 5); /* 0 counts as 1 */
    c.next = pl.word0;
    c.flag = 0;
    run_launch(&l, &c, runs, preempt && launches < 3 ? 1 + (unsigned)(rnd() % 40) : 0);
    launches++;
    assert_true(launches < total + 8);
    /* drained: exactly the indices below word 0 have run, once each */
    next = c.next;
    for (uint64_t i = 0; i < total; i++)
      assert_int_equal(runs[i], i < next ? 1u : 0u);
  }
  for (uint64_t i = 0; i < total; i++)
    assert_int_equal(runs[i], 1);
  free(runs);
  if (launches_out)
    *launches_out = launches;
  if (ctl_out)
    *ctl_out = c;
}

static void ptb_runs_every_index_once_across_preemptions_and_relaunches(void **state) {
  (void)state;
  unsigned preempted = 0;
  rng_state = 0x5EED5EED12345678ULL;
  for (unsigned trial = 0; trial < 3000; trial++) {
    unsigned launches = 0;
    drive(1 + rnd() % 60, 1, &launches, NULL);
    preempted += launches > 1;
  }
  /* the random flag moments did land mid-kernel in many trials */
  assert_true(preempted > 500);
}

static void ptb_grid_within_the_workers_touches_the_control_block_never(void **state) {
  (void)state;
  rw_ptb_launch_t pl;
  unsigned runs[64] = {0};
  ctl_t c = {0};
  launch_t l = {.total = 64, .workers = 64, .batch = 4};
  rng_state = 42;
  assert_int_equal(rw_ptb_plan(64, 0, 64, 1, &pl), 0);
  assert_int_equal(pl.nstatic, 64);
  assert_int_equal(pl.word0, 64);
  l.first = pl.first;
  l.nstatic = pl.nstatic;
  c.next = pl.word0;
  run_launch(&l, &c, runs, 0);
  assert_int_equal(c.loads, 0);
  assert_int_equal(c.atomics, 0);
  for (unsigned i = 0; i < 64; i++)
    assert_int_equal(runs[i], 1);
  /* more workers than blocks (a caller that did not clamp): statics cover
   * the grid, the extra workers exit at once, still no access */
  memset(runs, 0, sizeof(runs));
  memset(&c, 0, sizeof(c));
  assert_int_equal(rw_ptb_plan(40, 0, 64, 1, &pl), 0);
  assert_int_equal(pl.nstatic, 40);
  l = (launch_t){.total = 40, .workers = 64, .batch = 1, .first = 0, .nstatic = pl.nstatic};
  c.next = pl.word0;
  run_launch(&l, &c, runs, 0);
  assert_int_equal(c.loads + c.atomics, 0);
}

/* Long grid: with batches, atomics fall well below one per index, and the
 * last batches are single indices (guided by what is left). */
static void ptb_batches_cut_atomics_on_long_grids(void **state) {
  (void)state;
  enum { TOTAL = 4000, W = 8 };
  static unsigned runs[TOTAL];
  rw_ptb_launch_t pl;
  ctl_t c = {0};
  launch_t l = {.total = TOTAL, .workers = W, .batch = 1};
  rng_state = 7;
  assert_int_equal(rw_ptb_plan(TOTAL, 0, W, 1, &pl), 0);
  l.first = pl.first;
  l.nstatic = pl.nstatic;
  c.next = pl.word0;
  run_launch(&l, &c, runs, 0);
  /* B = 1: one atomic per dynamic index, plus at most one past the end per
   * worker (a worker that loads next >= total issues none) */
  assert_true(c.atomics >= TOTAL - W && c.atomics <= TOTAL - W + W);
  unsigned one = c.atomics;
  memset(runs, 0, sizeof(runs));
  memset(&c, 0, sizeof(c));
  l.batch = 8;
  c.next = pl.word0;
  run_launch(&l, &c, runs, 0);
  for (unsigned i = 0; i < TOTAL; i++)
    assert_int_equal(runs[i], 1);
  assert_true(c.atomics * 5 < one); /* 8 per take while plenty is left */
}

static void ptb_plan_rejects_bad_arguments_and_reports_completion(void **state) {
  (void)state;
  rw_ptb_launch_t pl;
  assert_int_equal(rw_ptb_plan(10, 0, 0, 1, &pl), -EINVAL);
  assert_int_equal(rw_ptb_plan(0, 0, 4, 1, &pl), -EINVAL);
  assert_int_equal(rw_ptb_plan(10, 0, 4, 1, NULL), -EINVAL);
  assert_int_equal(rw_ptb_plan(10, 10, 4, 1, &pl), 1);
  assert_int_equal(rw_ptb_plan(10, 12, 4, 1, &pl), 1);
  assert_int_equal(rw_ptb_plan(10, 7, 4, 1, &pl), 0);
  assert_int_equal(pl.first, 7);
  assert_int_equal(pl.nstatic, 3);
  assert_int_equal(pl.word0, 10);
  assert_int_equal(rw_ptb_plan(10, 7, 4, 0, &pl), 0);
  assert_int_equal(pl.nstatic, 0);
  assert_int_equal(pl.word0, 7);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ptb_runs_every_index_once_across_preemptions_and_relaunches),
      cmocka_unit_test(ptb_grid_within_the_workers_touches_the_control_block_never),
      cmocka_unit_test(ptb_batches_cut_atomics_on_long_grids),
      cmocka_unit_test(ptb_plan_rejects_bad_arguments_and_reports_completion),
  };
  return cmocka_run_group_tests_name("rw-ptb-model", tests, NULL, NULL);
}
