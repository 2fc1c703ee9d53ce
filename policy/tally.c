/* tally.c: our priority-aware policy, and our reading of the Tally paper's.
 *
 * The LC tenant's kernels are launched the moment they arrive, unchanged, on
 * the high-priority stream.  BE kernels are launched only while the LC
 * tenant is idle, in the form (original, sliced into launches of k blocks,
 * PTB workers that stop at a flag, or FLUSH: a block range whose running
 * blocks give up at a flag) that maximizes their estimated throughput
 * subject to the TURNAROUND BUDGET:
 *
 *   sum over BE launches in flight of their turnaround <= threshold,
 *
 * where the turnaround of a launch is how long it can keep the GPU from the
 * LC tenant once LC work arrives: the whole launch for the original and
 * sliced forms (ceil(blocks / resident) waves), the flag latency plus one
 * logical block for PTB, and for FLUSH the larger of flush_giveup_ns (flag
 * latency plus one poll interval) and the drain its profile measured on
 * earlier preemptions (flags are raised at once when LC work arrives).
 * Stream priority means an LC kernel also waits for at most one resident BE
 * block before its own blocks dispatch; the budget bounds what follows.
 *
 * FLUSH (ours).  A FLUSH launch is charged its flag turnaround whatever its
 * length, so a kernel whose blocks are longer than the threshold (1 ms
 * blocks) runs whole, one wave or many, while the LC is idle, and gives its
 * SMs back within about the flag latency when the LC arrives: the blocks
 * that had not committed give up and run again later.  Its cost is that
 * re-run work: its estimated device time is the plain form's
 * (ceil(blocks / resident) x wave_ns, measured on FLUSH launches like on
 * sliced ones) plus half a wave, the expected loss of one preemption
 * (blocks running when the flag comes are half done on average).  It is
 * considered after the other forms and must beat them strictly, so a form
 * that fits the budget and loses nothing on preemption wins a tie.  It is
 * always a whole rest of the submission (a preemptible launch gains nothing
 * from being cut).  REDO RULE: the blocks that gave up (pol.h) are the
 * submission's next launch, a FLUSH redo of all of them, before any other
 * piece of it and anything later of its tenant (sched.c keeps the tenant
 * from issuing while a FLUSH launch is in flight, like PTB); the redo
 * follows the same rules as a FLUSH launch (LC idle, budget, preempted when
 * the LC arrives), and the unprofiled rule when its kernel has no wave time.
 * Never while the LC is active under SHARING, never as a DEPTH launch.
 *
 * "Idle" (ours): no LC kernel pending or in flight, and none completed in the
 * last resume_idle_ns; a timer wakes the policy when the window ends.
 *
 * UNPROFILED RULE (ours): a kernel whose profile is not known is launched
 * only when (1) the LC tenant is idle, (2) no other BE launch is in flight,
 * and (3) in its least-risk form: FLUSH if it has it and its wave time is
 * not known (the rest of the submission, stopped by the flag within the
 * give-up time, however long its blocks), else PTB if it has one (stopped by
 * the flag after one logical block), else a single wave of blocks (no BE
 * block enters after it, so an LC kernel waits at most one block), else,
 * only for an original-only kernel of several waves, the original (counted
 * as a fallback launch).  Why: with no measurement nothing bounds a
 * launch's length except its shape; these forms bound the LC tenant's wait
 * to the flag latency (FLUSH), or one block of the kernel plus the flag
 * latency, the least any launch can, and (2) keeps the risk from adding to
 * another launch's.  The measurement itself comes from the completion
 * timestamps.  PTB is explored after FLUSH only while it could be used: a
 * kernel that has FLUSH and whose measured wave (about one block) is longer
 * than the threshold never fits the budget in PTB form (a logical block
 * plus the flag latency), so it is not explored, which would risk one such
 * block of the LC's wait per sample.
 *
 * SHARING (ours, off by default): with share_block_ns > 0, BE kernels whose
 * profile says a block takes at most share_block_ns keep running while the
 * LC is active, in non-PTB forms under the same budget; each LC kernel then
 * waits at most one such block (stream priority).  Unprofiled kernels and
 * longer blocks still wait for the LC to go idle.
 *
 * DEPTH (ours, off by default: be_depth = 1).  With be_depth N > 1, while
 * the LC is idle, a BE launch of a profiled kernel whose block (wave) time
 * is at most the threshold goes in its original form (the unissued rest,
 * sliced, if it was cut before) charged by ITS BLOCK TIME, not its length,
 * and up to N such "deep" launches may be in flight, queued on the BE's
 * low-priority stream so the GPU never idles for the host's turnaround
 * between two of them.  Unprofiled, PTB and fallback launches keep the
 * rules above, and nothing but a deep launch joins deep launches in flight
 * (so a fallback is still alone, and an exploration still alone).
 *   Why the LC's wait stays bounded: the LC's kernels go on the
 * high-priority stream, and stream priority acts at block dispatch: once an
 * LC kernel is eligible no further BE block dispatches ahead of its blocks,
 * whether that BE block belongs to a running launch or a queued one.  So
 *
 *   INVARIANT (DEPTH): when an LC kernel becomes eligible with deep launches
 *   in flight, it waits for at most the longest remaining BE block running,
 *   <= max over in-flight deep launches of their block time <= threshold
 *   (profiled, so an estimate; drift re-profiles and a re-explored kernel
 *   goes alone again).  Deep launches never coexist with a non-deep BE
 *   launch, so the two budgets never add.
 *
 * What it does not bound: after an LC kernel ends, BE blocks of the queued
 * deep launches fill the SMs the LC leaves free until its next kernel is
 * eligible, so each LC kernel of a request may wait one BE block (as with
 * sharing), for as long as queued deep work remains: at most the summed
 * device time of N launches.  With N = 1 that exposure is one launch's
 * turnaround, as before.
 *
 * A BE kernel no known form can fit (a block longer than the threshold) is
 * launched in its least-turnaround form only when no other BE launch is in
 * flight (a "fallback launch").  BE tenants share the budget by weight:
 * the tenant with the least weighted device time charged goes first, and
 * if its next launch does not fit, nobody jumps ahead of it.
 *
 * PARTITION (ours, off by default: be_partitioned).  When the caller runs
 * every BE launch on SMs the LC tenant does not share (tallyd --be-sms with
 * --be-sms-hold 0: a green context), the SMs left out protect the LC and
 * holding BE work back would only idle the partition: BE launches go as they
 * come, whole, while the LC is active or idle, at most POL_NO_LC_INFLIGHT in
 * flight, BE tenants by weight (the rule for a GPU with no LC tenant).  What
 * the LC may still wait for: a kernel of its that needs more blocks than the
 * free SMs hold at once finds the partition's SMs busy until their BE blocks
 * end (stream priority: no further BE block dispatches ahead of its blocks
 * there).  So the LC's bound is its own: how much of the GPU its kernels
 * need.  The turnaround budget and the forms are not used.  Except: a
 * launch the caller must run outside the partition (POL_VAR_WHOLE_GPU: the
 * partition cannot host it) shares the LC's SMs, so while the LC is active
 * it waits, and its tenant's later launches with it (FIFO), until the idle
 * window ends, as without a partition.  So does, with part_block_ns > 0, a
 * kernel whose profiled block (wave) time is longer than that: an LC kernel
 * that needs the partition's SMs waits for the BE blocks running there, and
 * this bounds those blocks (unprofiled kernels go, and are profiled).  And
 * with part_flight_ns > 0, the launches in flight are also bounded by their
 * estimated device time (a shape not yet profiled at the wave time of its
 * kernel's profiled shapes, a kernel with none as the whole bound; one
 * launch may always go): some driver calls wait for every kernel of the
 * context, the partition's included, and an LC's such call then waits for
 * about that much BE work, not for POL_NO_LC_INFLIGHT long launches.
 *
 * PAPER (our reading of arXiv 2410.07381, not its code): the same forms and
 * threshold, but BE resumes as soon as no LC kernel is in flight (no idle
 * window), the threshold applies to each launch alone (one launch in flight
 * per BE tenant), unprofiled kernels are explored whenever LC is idle, and
 * BE tenants take turns without weights.
 */
#include "policy/pol.h"
#include "policy/pol-int.h"

#include <stdlib.h>
#include <string.h>

typedef struct choice {
  pol_form_t form;
  uint64_t count;
  uint32_t workers;
  uint64_t turn_ns;
  uint64_t dur_ns; /* estimated device time, for the fair share */
  bool explore;
  bool fallback;
} choice_t;

static uint64_t ceil_div(uint64_t a, uint64_t b) {
  return (a + b - 1) / b;
}

/* Turnaround charged to a FLUSH launch of the kernel profiled by pr (NULL:
 * unknown): the give-up time, or the drain measured if longer. */
static uint64_t flush_turn(const pol_sched_t *s, const pol_profile_t *pr) {
  uint64_t t = s->cfg.flush_giveup_ns;
  if (pr && pr->flush_drain_samples > 0 && pr->flush_drain_ns > t)
    t = pr->flush_drain_ns;
  return t;
}

static bool lc_active(const pol_sched_t *s) {
  if (s->lc < 0)
    return false;
  const pol__tenant_t *lc = &s->tenants[s->lc];
  if (pol__tenant_busy(lc))
    return true;
  if (s->kind == POL_KIND_PAPER || !s->lc_seen_done)
    return false;
  return s->now_ns < s->lc_last_done_ns + s->cfg.resume_idle_ns;
}

/* The least-risk form for a kernel without a usable profile (rule above). */
static void explore_form(const pol_sched_t *s, const pol__sub_t *u, const pol_profile_t *pr,
                         choice_t *c) {
  uint64_t r = pol__resident(s, &u->k), left = u->total - u->next;
  memset(c, 0, sizeof(*c));
  c->explore = true;
  c->turn_ns = s->cfg.threshold_ns; /* unknown: charge the whole budget */
  c->dur_ns = s->cfg.threshold_ns;
  bool ptb_known = pr && pr->ptb_samples >= s->cfg.min_samples;
  bool wave_known = pr && pr->wave_samples >= s->cfg.min_samples && pr->wave_ns > 0;
  if ((u->k.variants & POL_VAR_FLUSH) && !wave_known) {
    c->form = POL_FORM_FLUSH;
    c->count = left;
  } else if ((u->k.variants & POL_VAR_PTB) && !ptb_known) {
    c->form = POL_FORM_PTB;
    c->count = left;
    c->workers = (uint32_t)(left < r ? left : r);
  } else if (u->k.variants & POL_VAR_FLUSH) {
    c->form = POL_FORM_FLUSH;
    c->count = left;
  } else if (u->k.variants & POL_VAR_SLICED) {
    c->form = POL_FORM_SLICED;
    c->count = left < r ? left : r;
  } else if (u->next == 0) {
    c->form = POL_FORM_ORIGINAL;
    c->count = left;
    c->fallback = left > r; /* several waves: nothing bounds it but its length */
  } else {
    c->form = POL_FORM_SLICED; /* remainder of a preempted launch */
    c->count = left;
  }
}

/* Picks the best known form under the budget left; false if none fits.
 * With nothing else in flight and nothing fitting, picks the least-turnaround
 * form (fallback).  no_flag: neither PTB nor FLUSH (the forms a flag stops). */
static bool plan(const pol_sched_t *s, const pol__sub_t *u, const pol_profile_t *pr,
                 uint64_t budget_left, bool alone, bool no_flag, bool deep, choice_t *best) {
  uint64_t r = pol__resident(s, &u->k), left = u->total - u->next;
  bool wave_known = pr && pr->wave_samples >= s->cfg.min_samples && pr->wave_ns > 0;
  bool ptb_known = pr && pr->ptb_samples >= s->cfg.min_samples && pr->ptb_block_ns > 0;
  bool have = false, have_any = false;
  double best_rate = -1;
  choice_t least = {0};
  choice_t c;
  uint64_t gap = s->cfg.launch_gap_ns;

#define CONSIDER()                                                                                 \
  do {                                                                                             \
    double rate = (double)c.count / (double)(c.dur_ns + gap);                                      \
    if (!have_any || c.turn_ns < least.turn_ns)                                                    \
      least = c;                                                                                   \
    have_any = true;                                                                               \
    if (c.turn_ns <= budget_left && rate > best_rate) {                                            \
      best_rate = rate;                                                                            \
      *best = c;                                                                                   \
      have = true;                                                                                 \
    }                                                                                              \
  } while (0)

  if (wave_known) {
    memset(&c, 0, sizeof(c));
    if (u->next == 0) {
      c.form = POL_FORM_ORIGINAL;
      c.count = left;
      c.dur_ns = c.turn_ns = ceil_div(left, r) * pr->wave_ns;
      if (deep)
        c.turn_ns = pr->wave_ns; /* DEPTH: charged by its block time */
      CONSIDER();
    }
    if ((u->k.variants & POL_VAR_SLICED) || u->next > 0) {
      /* Slices of 1, 2, 4, ... waves, and the whole rest. */
      for (uint64_t k = r;; k *= 2) {
        memset(&c, 0, sizeof(c));
        c.form = POL_FORM_SLICED;
        c.count = k < left ? k : left;
        c.dur_ns = c.turn_ns = ceil_div(c.count, r) * pr->wave_ns;
        if (deep)
          c.turn_ns = pr->wave_ns;
        CONSIDER();
        if (k >= left || !(u->k.variants & POL_VAR_SLICED))
          break;
      }
    }
  }
  if (ptb_known && (u->k.variants & POL_VAR_PTB) && !no_flag) {
    memset(&c, 0, sizeof(c));
    c.form = POL_FORM_PTB;
    c.count = left;
    c.workers = (uint32_t)(left < r ? left : r);
    c.dur_ns = ceil_div(left, c.workers) * pr->ptb_block_ns;
    c.turn_ns = s->cfg.flag_latency_ns + pr->ptb_block_ns;
    CONSIDER();
  }
  if (wave_known && (u->k.variants & POL_VAR_FLUSH) && !no_flag) {
    /* Last, so it must beat the others strictly (FLUSH, above). */
    memset(&c, 0, sizeof(c));
    c.form = POL_FORM_FLUSH;
    c.count = left;
    c.dur_ns = ceil_div(left, r) * pr->wave_ns + pr->wave_ns / 2;
    c.turn_ns = flush_turn(s, pr);
    CONSIDER();
  }
#undef CONSIDER
  if (have)
    return true;
  if (have_any && alone) {
    *best = least;
    best->fallback = true;
    return true;
  }
  return false;
}

/* DEPTH (above): may a launch of the kernel profiled by pr go deep now? */
static bool deep_ok(const pol_sched_t *s, const pol_profile_t *pr, bool shadow) {
  return s->kind == POL_KIND_TALLY && s->cfg.be_depth > 1 && !shadow && pr &&
         pr->wave_samples >= s->cfg.min_samples && pr->wave_ns > 0 &&
         pr->wave_ns <= s->cfg.threshold_ns && s->be_deep_inflight == s->be_inflight &&
         s->be_inflight < s->cfg.be_depth;
}

/* Issues u's pending redo (REDO RULE above); 1 if issued, 0 if t must
 * wait, <0 error.  It waits, as a FLUSH launch would, while the LC is
 * active, while deep launches are in flight, and for the budget unless
 * nothing else is in flight; without a wave time it is an exploration. */
static int try_redo(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *u, const pol_profile_t *pr,
                    bool shadow) {
  bool paper = s->kind == POL_KIND_PAPER;
  bool wave_known = pr && pr->wave_samples >= s->cfg.min_samples && pr->wave_ns > 0;
  uint64_t turn, dur;
  unsigned flags = 0;
  if (shadow || s->be_deep_inflight > 0)
    return 0;
  if (wave_known) {
    turn = flush_turn(s, pr);
    dur = ceil_div(u->redo, pol__resident(s, &u->k)) * pr->wave_ns;
    uint64_t budget =
        paper
            ? s->cfg.threshold_ns
            : (s->be_budget_ns >= s->cfg.threshold_ns ? 0 : s->cfg.threshold_ns - s->be_budget_ns);
    bool alone = paper ? t->inflight == 0 : s->be_inflight == 0;
    if (turn > budget && !alone)
      return 0;
    if (turn > budget)
      s->stats.fallback_launches++;
  } else {
    if (!paper && s->be_inflight > 0)
      return 0; /* unprofiled rule (2) */
    turn = dur = s->cfg.threshold_ns;
    flags = POL__ISSUE_EXPLORE;
  }
  int rc = pol__issue_redo(s, t, u, POL_PRIO_LOW, turn, flags);
  if (rc < 0)
    return rc;
  t->vtime += (double)dur / (double)t->weight;
  return 1;
}

/* Issues at most one launch for t; 1 if issued, 0 if t must wait, <0 error.
 * shadow: the LC is active and only sharing (see above) may go. */
static int try_issue(pol_sched_t *s, pol__tenant_t *t, bool shadow) {
  pol__sub_t *u = pol__tenant_issuable(t);
  pol_profile_key_t key;
  choice_t c;
  bool paper = s->kind == POL_KIND_PAPER;
  if (!u || t->ptb_inflight > 0 || t->flush_inflight > 0 || (paper && t->inflight > 0))
    return 0;
  pol__key_of(&u->k, &key);
  const pol_profile_t *pr = pol_profiles_find(s->profiles, &key);
  if (u->redo > 0)
    return try_redo(s, t, u, pr, shadow);
  bool wave_known = pr && pr->wave_samples >= s->cfg.min_samples;
  bool ptb_known = pr && pr->ptb_samples >= s->cfg.min_samples;
  bool need_explore = !wave_known && !(ptb_known && (u->k.variants & POL_VAR_PTB));
  /* Explore PTB too when it is offered and unmeasured, so the plan can
   * compare it; that launch is preemptible, so it is as safe as any, but
   * not where FLUSH is offered and a wave is longer than the threshold: PTB
   * would never fit the budget (unprofiled rule). */
  if (!need_explore && (u->k.variants & POL_VAR_PTB) && !ptb_known &&
      !((u->k.variants & POL_VAR_FLUSH) && wave_known && pr->wave_ns > s->cfg.threshold_ns))
    need_explore = true;
  /* Slices, originals and FLUSH are compared only once the wave time is known. */
  if (!need_explore && !wave_known && (u->k.variants & (POL_VAR_SLICED | POL_VAR_FLUSH)))
    need_explore = true;
  if (shadow && (need_explore || !wave_known || pr->wave_ns > s->cfg.share_block_ns))
    return 0; /* unprofiled rule (1); long blocks wait for the LC to go idle */
  bool deep = !need_explore && deep_ok(s, pr, shadow);
  if (!deep && s->be_deep_inflight > 0)
    return 0; /* DEPTH: only deep launches join deep launches */
  if (need_explore) {
    if (!paper && s->be_inflight > 0)
      return 0; /* unprofiled rule (2) */
    explore_form(s, u, pr, &c);
  } else if (deep) {
    /* Each deep launch's block fits the threshold, so the max of them does;
     * PTB and FLUSH (their own flag rule) only when nothing else is in flight. */
    if (!plan(s, u, pr, s->cfg.threshold_ns, false, s->be_inflight > 0, true, &c))
      return 0;
    deep = c.form != POL_FORM_PTB && c.form != POL_FORM_FLUSH;
  } else {
    uint64_t budget =
        paper
            ? s->cfg.threshold_ns
            : (s->be_budget_ns >= s->cfg.threshold_ns ? 0 : s->cfg.threshold_ns - s->be_budget_ns);
    bool alone = !shadow && (paper ? t->inflight == 0 : s->be_inflight == 0);
    if (!plan(s, u, pr, budget, alone, shadow, false, &c))
      return 0;
  }
  if (c.fallback)
    s->stats.fallback_launches++;
  unsigned flags = (c.explore ? POL__ISSUE_EXPLORE : 0) | (deep ? POL__ISSUE_DEEP : 0);
  int rc = pol__issue(s, t, u, c.form, c.count, c.workers, POL_PRIO_LOW, c.turn_ns, flags);
  if (rc < 0)
    return rc;
  t->vtime += (double)c.dur_ns / (double)t->weight;
  return 1;
}

/* Waves of what pol__issue_rest issues of u next (its redo, else the rest). */
static uint64_t waves_next(const pol_sched_t *s, const pol__sub_t *u) {
  return ceil_div(u->redo > 0 ? u->redo : u->total - u->next, pol__resident(s, &u->k));
}

/* Estimated device time of what pol__issue_rest issues of u next (its redo,
 * else the rest in its original form) into *ns; false, and the threshold in
 * *ns, when u's kernel is unprofiled. */
static bool est_known(const pol_sched_t *s, const pol__sub_t *u, uint64_t *ns) {
  pol_profile_key_t key;
  pol__key_of(&u->k, &key);
  const pol_profile_t *pr = pol_profiles_find(s->profiles, &key);
  if (!pr || pr->wave_samples < s->cfg.min_samples || pr->wave_ns == 0) {
    *ns = s->cfg.threshold_ns;
    return false;
  }
  *ns = waves_next(s, u) * pr->wave_ns;
  return true;
}

/* est_known's figure, known or not: what the fair share charges. */
static uint64_t est_ns(const pol_sched_t *s, const pol__sub_t *u) {
  uint64_t ns;
  (void)est_known(s, u, &ns);
  return ns;
}

/* With no latency-critical tenant and one BE tenant with work, there is
 * nobody to protect and nobody to share with: its kernels go as they come,
 * whole, like on an unscheduled GPU, but at most POL_NO_LC_INFLIGHT
 * launches are in flight, so an LC tenant that joins waits for a bounded
 * amount of queued BE work, not for everything a framework queued.  With
 * several BE tenants the budgeted path below runs, so weights hold.  A redo
 * left by FLUSH launches of a time with an LC goes first, as a redo. */
static int pump_no_lc(pol_sched_t *s) {
  while (s->be_inflight < POL_NO_LC_INFLIGHT) {
    pol__tenant_t *pick = NULL;
    pol__sub_t *u;
    for (uint32_t i = 0; i < s->ntenants; i++) {
      pol__tenant_t *t = &s->tenants[i];
      if (t->cls == POL_CLASS_BE && t->ptb_inflight == 0 && pol__tenant_issuable(t) &&
          (!pick || t->vtime < pick->vtime))
        pick = t;
    }
    if (!pick)
      return 0;
    u = pol__tenant_issuable(pick);
    uint64_t dur = est_ns(s, u);
    int rc = pol__issue_rest(s, pick, u, POL_PRIO_LOW);
    if (rc < 0)
      return rc;
    pick->vtime += (double)dur / (double)pick->weight;
  }
  return 0;
}

/* While the LC is busy, BE launches that can stop early (PTB, FLUSH) are
 * told to. */
static int preempt_be(pol_sched_t *s) {
  for (uint32_t i = 0; i < s->nslots; i++) {
    pol__launch_t *l = &s->launches[i];
    if (l->in_use && (l->form == POL_FORM_PTB || l->form == POL_FORM_FLUSH) &&
        l->t->cls == POL_CLASS_BE) {
      int rc = pol__preempt(s, l);
      if (rc < 0)
        return rc;
    }
  }
  return 0;
}

/* PARTITION: whether u's profiled block is longer than part_block_ns. */
static bool long_block(const pol_sched_t *s, const pol__sub_t *u) {
  pol_profile_key_t key;
  const pol_profile_t *pr;
  if (s->cfg.part_block_ns == 0)
    return false;
  pol__key_of(&u->k, &key);
  pr = pol_profiles_find(s->profiles, &key);
  return pr && pr->wave_samples >= s->cfg.min_samples && pr->wave_ns > s->cfg.part_block_ns;
}

/* What u adds to be_flight_ns (PARTITION's in-flight bound), given what
 * est_known said of it (known, est): its estimated device time; for a shape
 * not yet profiled, its waves at the wave time of the kernel's profiled
 * shapes (pol__wave_hint), or the whole bound when it has none.  At most the
 * bound + 1 (more only says "alone", as that does), so be_flight_ns cannot
 * overflow. */
static uint64_t flight_charge(const pol_sched_t *s, const pol__sub_t *u, bool known, uint64_t est) {
  uint64_t wave, waves, cap = s->cfg.part_flight_ns + 1;
  if (known)
    return est < cap ? est : cap;
  if ((wave = pol__wave_hint(s, &u->k)) == 0)
    return s->cfg.part_flight_ns;
  waves = waves_next(s, u);
  return waves < cap / wave ? waves * wave : cap;
}

/* PARTITION (above): BE launches as they come, at most POL_NO_LC_INFLIGHT in
 * flight and, with part_flight_ns, at most that much estimated device time
 * (one launch always may), the least weighted device time first; a tenant
 * whose next launch runs outside the partition (POL_VAR_WHOLE_GPU) waits
 * while the LC is active; one whose next launch has long blocks goes by the
 * rules without a partition (try_issue: held while the LC is active, in a
 * form that fits the budget, alone when it fits none, PTB and FLUSH
 * preempted when the LC comes).  A tenant that waits keeps its later
 * launches (FIFO). */
static int pump_partitioned(pol_sched_t *s) {
  bool on = lc_active(s), stuck[POL_MAX_TENANTS] = {false};
  const pol__tenant_t *lc = s->lc >= 0 ? &s->tenants[s->lc] : NULL;
  int rc;
  if (lc && pol__tenant_busy(lc) && s->be_inflight > 0 && (rc = preempt_be(s)) < 0)
    return rc;
  if (on && lc && !pol__tenant_busy(lc))
    pol__timer_at(s, s->lc_last_done_ns + s->cfg.resume_idle_ns);
  while (s->be_inflight < POL_NO_LC_INFLIGHT) {
    pol__tenant_t *pick = NULL;
    pol__sub_t *u;
    uint32_t pi = 0;
    for (uint32_t i = 0; i < s->ntenants; i++) {
      pol__tenant_t *t = &s->tenants[i];
      if (t->cls == POL_CLASS_BE && !stuck[i] && t->ptb_inflight == 0 &&
          pol__tenant_issuable(t) && (!pick || t->vtime < pick->vtime))
        pick = t, pi = i;
    }
    if (!pick)
      return 0;
    u = pol__tenant_issuable(pick);
    if (on && (u->k.variants & POL_VAR_WHOLE_GPU)) {
      stuck[pi] = true;
      continue;
    }
    if (long_block(s, u)) {
      if ((rc = try_issue(s, pick, on)) < 0)
        return rc;
      stuck[pi] = rc == 0;
      continue;
    }
    uint64_t dur, charge = 0;
    bool known = est_known(s, u, &dur); /* one profile look-up for both */
    if (s->cfg.part_flight_ns > 0) {
      charge = flight_charge(s, u, known, dur);
      if (s->be_inflight > 0 && s->be_flight_ns + charge > s->cfg.part_flight_ns) {
        stuck[pi] = true; /* until launches in flight complete */
        if (!u->flight_waited) {
          u->flight_waited = true;
          s->stats.flight_waits++;
        }
        continue;
      }
    }
    if ((rc = pol__issue_rest_charged(s, pick, u, POL_PRIO_LOW, charge)) < 0)
      return rc;
    pick->vtime += (double)dur / (double)pick->weight;
  }
  return 0;
}

static uint32_t busy_be(const pol_sched_t *s) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < s->ntenants; i++)
    if (s->tenants[i].cls == POL_CLASS_BE && pol__tenant_busy(&s->tenants[i]))
      n++;
  return n;
}

static int pump(pol_sched_t *s) {
  int rc;
  if (s->lc < 0 && busy_be(s) <= 1)
    return pump_no_lc(s);
  /* LC first: every LC kernel goes out at once, unchanged, high priority. */
  if (s->lc >= 0) {
    pol__tenant_t *lc = &s->tenants[s->lc];
    rc = pol__issue_all(s, lc, POL_PRIO_HIGH, UINT32_MAX);
    if (rc < 0)
      return rc;
    if (s->kind == POL_KIND_TALLY && s->cfg.be_partitioned)
      return pump_partitioned(s); /* the LC's SMs are its own */
    if (pol__tenant_busy(lc) && s->be_inflight > 0 && (rc = preempt_be(s)) < 0)
      return rc;
  }
  bool shadow = lc_active(s);
  if (shadow) {
    if (s->lc >= 0 && !pol__tenant_busy(&s->tenants[s->lc]))
      pol__timer_at(s, s->lc_last_done_ns + s->cfg.resume_idle_ns);
    if (s->kind != POL_KIND_TALLY || s->cfg.share_block_ns == 0)
      return 0;
  }
  /* A BE tenant coming back from idle starts at the least vtime of those
   * that stayed busy, so an idle spell banks no credit. */
  double vmin = -1;
  for (uint32_t i = 0; i < s->ntenants; i++) {
    pol__tenant_t *t = &s->tenants[i];
    if (t->cls == POL_CLASS_BE && !t->idle && (vmin < 0 || t->vtime < vmin))
      vmin = t->vtime;
  }
  for (uint32_t i = 0; i < s->ntenants; i++) {
    pol__tenant_t *t = &s->tenants[i];
    if (t->cls != POL_CLASS_BE)
      continue;
    if (t->idle && pol__tenant_busy(t)) {
      if (vmin >= 0 && t->vtime < vmin)
        t->vtime = vmin;
      t->idle = false;
    }
  }
  for (;;) {
    pol__tenant_t *pick = NULL;
    if (s->kind == POL_KIND_PAPER) {
      /* Turns, no weights: first issuable tenant after the cursor. */
      for (uint32_t k = 0; k < s->ntenants && !pick; k++) {
        pol__tenant_t *t = &s->tenants[(s->rr + k) % s->ntenants];
        if (t->cls == POL_CLASS_BE && pol__tenant_issuable(t) && t->inflight == 0) {
          pick = t;
          s->rr = (uint32_t)((t - s->tenants + 1) % s->ntenants);
        }
      }
    } else {
      for (uint32_t i = 0; i < s->ntenants; i++) {
        pol__tenant_t *t = &s->tenants[i];
        if (t->cls != POL_CLASS_BE || !pol__tenant_issuable(t))
          continue; /* nothing, or a PTB or FLUSH launch in flight */
        if (!pick || t->vtime < pick->vtime)
          pick = t;
      }
    }
    if (!pick)
      break;
    rc = try_issue(s, pick, shadow);
    if (rc < 0)
      return rc;
    if (rc == 0)
      break; /* the fair-share head waits; nobody jumps ahead */
  }
  for (uint32_t i = 0; i < s->ntenants; i++) {
    pol__tenant_t *t = &s->tenants[i];
    if (t->cls == POL_CLASS_BE && !pol__tenant_busy(t))
      t->idle = true;
  }
  return 0;
}

const struct pol__ops pol__ops_tally = {.pump = pump};
