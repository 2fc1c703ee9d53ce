/* sched.c: the scheduler core every policy shares.
 *
 * It owns the bookkeeping that does not depend on the policy: tenants and
 * their FIFOs of submitted kernels, the table of launches in flight (ids are
 * slot index + generation, so a stale or forged id is rejected in O(1)), the
 * queue of actions, the profile samples taken from completion timestamps, and
 * the LC/BE counters the policies read.  After every event it calls the
 * policy's pump(), which decides what to launch now (policy/tally.c,
 * policy/ref-*.c).  Invariants (a)-(e) are listed in policy/pol-int.h.
 *
 * Events come from tallyd or sim/, trusted code that may be wrong:
 * unknown tenants, unknown launch ids and malformed kernels get -EINVAL and
 * change nothing.
 */
#include "policy/pol.h"
#include "policy/pol-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Largest grid product accepted: 2^31-1 x 65535 x 65535 is CUDA's limit;
 * 2^40 blocks keeps every product and sum of ours far from overflow. */
#define POL__MAX_BLOCKS (1ull << 40)

static pol__tenant_t *tenant_find(pol_sched_t *s, uint32_t id) {
  for (uint32_t i = 0; i < s->ntenants; i++)
    if (s->tenants[i].used && s->tenants[i].id == id)
      return &s->tenants[i];
  return NULL;
}

int pol_sched_new(pol_kind_t kind, const pol_config_t *cfg, pol_sched_t **out) {
  int rc;
  pol_sched_t *s;
  if ((unsigned)kind >= POL_KIND_COUNT || pol_config_check(cfg, NULL) != 0)
    return -EINVAL;
  s = calloc(1, sizeof(*s));
  if (!s)
    return -ENOMEM;
  s->kind = kind;
  s->cfg = *cfg;
  s->lc = -1;
  s->ts_owner = -1;
  s->ts_next = -1;
  s->ts_idle_since = UINT64_MAX;
  s->timer_ns = UINT64_MAX;
  s->tgs_window = 8; /* TGS-like: start with a few kernels in flight, then adapt */
  s->tgs_next_ns = UINT64_MAX;
  s->rng = 0x9e3779b97f4a7c15ull; /* fixed: a run's choices repeat */
  switch (kind) {
  case POL_KIND_TALLY:
  case POL_KIND_PAPER:
    s->ops = &pol__ops_tally;
    break;
  case POL_KIND_TIMESLICE:
    s->ops = &pol__ops_timeslice;
    break;
  case POL_KIND_MPS:
  case POL_KIND_MPS_PRIO:
    s->ops = &pol__ops_mps;
    break;
  default:
    s->ops = &pol__ops_tgs;
    break;
  }
  rc = pol_profiles_new(&s->profiles);
  if (rc < 0)
    goto fail_sched;
  *out = s;
  return 0;
fail_sched:
  free(s);
  return rc;
}

void pol_sched_free(pol_sched_t *s) {
  if (!s)
    return;
  for (uint32_t i = 0; i < s->ntenants; i++) {
    pol__sub_t *u = s->tenants[i].head;
    while (u) {
      pol__sub_t *n = u->fifo_next;
      free(u);
      u = n;
    }
  }
  pol_profiles_free(s->profiles);
  free(s->launches);
  free(s->actq);
  free(s);
}

int pol_sched_tenant_add(pol_sched_t *s, uint32_t tenant, pol_class_t cls, uint32_t weight) {
  if ((cls != POL_CLASS_LC && cls != POL_CLASS_BE) || weight < 1 || weight > 1000)
    return -EINVAL;
  if (cls == POL_CLASS_LC && s->lc >= 0)
    return -EINVAL;
  if (tenant_find(s, tenant))
    return -EEXIST;
  uint32_t slot = 0;
  while (slot < s->ntenants && (s->tenants[slot].used || s->tenants[slot].closing))
    slot++; /* a slot freed by pol_sched_tenant_del is taken again */
  if (slot >= POL_MAX_TENANTS)
    return -ENOSPC;
  pol__tenant_t *t = &s->tenants[slot];
  memset(t, 0, sizeof(*t));
  t->used = true;
  t->id = tenant;
  t->cls = cls;
  t->weight = weight;
  t->idle = true;
  if (cls == POL_CLASS_LC)
    s->lc = (int)slot;
  if (slot == s->ntenants)
    s->ntenants++;
  return 0;
}

/* Frees t's slot once nothing of it is queued or in flight. */
static void tenant_reap(pol_sched_t *s, pol__tenant_t *t) {
  int idx = (int)(t - s->tenants);
  if (!t->closing || t->head)
    return;
  t->closing = false;
  t->used = false;
  t->cls = POL_CLASS_BE; /* an empty BE slot is skipped by every policy */
  t->idle = true;
  if (s->lc == idx)
    s->lc = -1;
  if (s->ts_owner == idx)
    s->ts_owner = -1;
  if (s->ts_next == idx)
    s->ts_next = -1;
}

int pol_sched_tenant_del(pol_sched_t *s, uint32_t tenant) {
  pol__tenant_t *t = tenant_find(s, tenant);
  pol__sub_t **pu;
  if (!t)
    return -EINVAL;
  t->used = false; /* unknown to tenant_find from now on: its id may come back */
  t->closing = true;
  for (pu = &t->head; *pu;) {
    pol__sub_t *u = *pu;
    if (u->inflight == 0) {
      *pu = u->fifo_next;
      t->nsubs--;
      free(u);
      continue;
    }
    u->next = u->total; /* nothing more of it is issued */
    u->redo = 0;
    pu = &u->fifo_next;
  }
  t->tail = NULL;
  for (pol__sub_t *u = t->head; u; u = u->fifo_next)
    t->tail = u;
  tenant_reap(s, t);
  s->timer_ns = UINT64_MAX;
  return s->ops->pump(s);
}

pol_kind_t pol_sched_kind(const pol_sched_t *s) {
  return s->kind;
}
pol_profiles_t *pol_sched_profiles(pol_sched_t *s) {
  return s->profiles;
}
uint64_t pol_sched_next_timer_ns(const pol_sched_t *s) {
  return s->timer_ns;
}
void pol_sched_stats(const pol_sched_t *s, pol_stats_t *out) {
  *out = s->stats;
}

size_t pol_sched_actions(pol_sched_t *s, pol_action_t *out, size_t cap) {
  size_t n = s->actn - s->acth;
  if (n > cap)
    n = cap;
  if (n == 0)
    return 0; /* the queue may not exist yet: no memcpy from NULL */
  memcpy(out, s->actq + s->acth, n * sizeof(*out));
  s->acth += n;
  if (s->acth == s->actn)
    s->acth = s->actn = 0;
  return n;
}

static int action_push(pol_sched_t *s, const pol_action_t *a) {
  if (s->actn == s->actcap) {
    if (s->acth > 0) { /* compact before growing */
      memmove(s->actq, s->actq + s->acth, (s->actn - s->acth) * sizeof(*s->actq));
      s->actn -= s->acth;
      s->acth = 0;
    } else {
      size_t cap = s->actcap ? s->actcap * 2 : 64;
      pol_action_t *q = realloc(s->actq, cap * sizeof(*q));
      if (!q)
        return -ENOMEM;
      s->actq = q;
      s->actcap = cap;
    }
  }
  s->actq[s->actn++] = *a;
  return 0;
}

static uint64_t launch_id_of(const pol_sched_t *s, const pol__launch_t *l) {
  return ((uint64_t)l->gen << 32) | (uint64_t)(l - s->launches + 1);
}

static pol__launch_t *launch_lookup(pol_sched_t *s, uint64_t id) {
  uint64_t slot = id & 0xffffffffu;
  if (slot == 0 || slot > s->nslots)
    return NULL;
  pol__launch_t *l = &s->launches[slot - 1];
  if (!l->in_use || l->gen != (uint32_t)(id >> 32))
    return NULL;
  return l;
}

static pol__launch_t *launch_alloc(pol_sched_t *s) {
  if (s->free_head == 0) {
    uint32_t n = s->nslots ? s->nslots * 2 : 64;
    pol__launch_t *a = realloc(s->launches, (size_t)n * sizeof(*a));
    if (!a)
      return NULL;
    memset(a + s->nslots, 0, (size_t)(n - s->nslots) * sizeof(*a));
    for (uint32_t i = s->nslots; i < n; i++)
      a[i].next_free = (i + 1 < n) ? i + 2 : 0;
    s->free_head = s->nslots + 1;
    s->launches = a;
    s->nslots = n;
  }
  pol__launch_t *l = &s->launches[s->free_head - 1];
  s->free_head = l->next_free;
  uint32_t gen = l->gen + 1;
  memset(l, 0, sizeof(*l));
  l->gen = gen ? gen : 1;
  l->in_use = true;
  return l;
}

static void launch_release(pol_sched_t *s, pol__launch_t *l) {
  l->in_use = false;
  l->next_free = s->free_head;
  s->free_head = (uint32_t)(l - s->launches + 1);
}

uint64_t pol__resident(const pol_sched_t *s, const pol_kernel_t *k) {
  return k->resident_blocks ? k->resident_blocks : s->cfg.default_resident;
}

pol__sub_t *pol__tenant_issuable(pol__tenant_t *t) {
  if (t->ptb_inflight > 0 || t->flush_inflight > 0)
    return NULL; /* invariants (b), (e): what it returns may still change */
  for (pol__sub_t *u = t->head; u; u = u->fifo_next)
    if (u->redo > 0 || u->next < u->total)
      return u;
  return NULL;
}

bool pol__tenant_busy(const pol__tenant_t *t) {
  return t->head != NULL;
}

void pol__timer_at(pol_sched_t *s, uint64_t at_ns) {
  if (at_ns < s->timer_ns)
    s->timer_ns = at_ns;
}

/* Whether a BE launch asks for device times: always while its kernel's
 * profile still needs them (none yet, too few samples to notice a drift, an
 * explored, sliced or PTB launch), else 1 in time_every at random (a fixed
 * pattern could alias with a training step's launch sequence and never
 * sample some kernels again). */
static bool wants_times(pol_sched_t *s, const pol__tenant_t *t, const pol__sub_t *sub,
                        pol_form_t form, bool explore) {
  pol_profile_key_t key;
  const pol_profile_t *pr;
  if (t->cls == POL_CLASS_LC)
    return false; /* never profiled (pol__profile_sample) */
  if (explore || form != POL_FORM_ORIGINAL || s->cfg.time_every <= 1)
    return true;
  pol__key_of(&sub->k, &key);
  pr = pol_profiles_find(s->profiles, &key);
  if (!pr || pr->wave_samples < s->cfg.min_samples + s->cfg.drift_samples)
    return true;
  s->rng ^= s->rng << 13;
  s->rng ^= s->rng >> 7;
  s->rng ^= s->rng << 17;
  return s->rng % s->cfg.time_every == 0;
}

/* Queues one LAUNCH of blocks [begin, +count) of sub (a redo when redo_of is
 * not 0: count given-up blocks, sub->next unchanged) and books it. */
static int issue_launch(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *sub, pol_form_t form,
                        uint64_t count, uint32_t workers, int prio, uint64_t turn_ns,
                        unsigned flags, uint64_t redo_of, uint64_t flight_ns) {
  bool explore = (flags & POL__ISSUE_EXPLORE) != 0;
  bool deep = (flags & POL__ISSUE_DEEP) != 0 && t->cls == POL_CLASS_BE;
  bool redo = redo_of != 0;
  pol__launch_t *l = launch_alloc(s);
  if (!l)
    return -ENOMEM;
  l->t = t;
  l->sub = sub;
  l->form = form;
  l->begin = redo ? 0 : sub->next;
  l->count = count;
  l->workers = workers;
  l->turn_ns = turn_ns;
  l->flight_ns = t->cls == POL_CLASS_BE ? flight_ns : 0;
  l->issue_ns = s->now_ns;
  l->explore = explore;
  l->deep = deep;
  l->redo = redo;
  pol_action_t a = {.type = POL_ACT_LAUNCH,
                    .launch_id = launch_id_of(s, l),
                    .submit_id = sub->submit_id,
                    .tenant = t->id,
                    .stream_priority = prio,
                    .form = form,
                    .block_begin = l->begin,
                    .block_count = count,
                    .ptb_workers = form == POL_FORM_PTB ? workers : 0,
                    .timed = wants_times(s, t, sub, form, explore),
                    .redo = redo,
                    .redo_of = redo_of};
  int rc = action_push(s, &a);
  if (rc < 0) {
    launch_release(s, l);
    return rc;
  }
  if (redo) {
    sub->redo = 0; /* invariant (e): all of it, at once */
    sub->redo_of = 0;
    s->stats.redo_launches++;
  } else {
    sub->next += count;
  }
  sub->inflight++;
  t->inflight++;
  t->issued_blocks += count;
  if (form == POL_FORM_PTB)
    t->ptb_inflight++;
  if (form == POL_FORM_FLUSH)
    t->flush_inflight++;
  if (t->cls == POL_CLASS_LC) {
    s->lc_inflight++;
  } else {
    s->be_inflight++;
    s->be_budget_ns += turn_ns;
    s->be_flight_ns += l->flight_ns;
    if (deep)
      s->be_deep_inflight++;
  }
  s->stats.launches++;
  if (explore)
    s->stats.explore_launches++;
  return 0;
}

int pol__issue(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *sub, pol_form_t form, uint64_t count,
               uint32_t workers, int prio, uint64_t turn_ns, unsigned flags) {
  return issue_launch(s, t, sub, form, count, workers, prio, turn_ns, flags, 0, 0);
}

/* pol__issue_redo, charging flight_ns to be_flight_ns (invariant f). */
static int issue_redo(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *sub, int prio,
                      uint64_t turn_ns, unsigned flags, uint64_t flight_ns) {
  if (sub->redo == 0 || sub->redo_of == 0)
    return -EINVAL; /* nothing gave up: a caller's bug, never a launch of 0 blocks */
  return issue_launch(s, t, sub, POL_FORM_FLUSH, sub->redo, 0, prio, turn_ns, flags, sub->redo_of,
                      flight_ns);
}

int pol__issue_redo(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *sub, int prio, uint64_t turn_ns,
                    unsigned flags) {
  return issue_redo(s, t, sub, prio, turn_ns, flags, 0);
}

int pol__preempt(pol_sched_t *s, pol__launch_t *l) {
  if (l->preempt_raised)
    return 0;
  pol_action_t a = {.type = POL_ACT_PREEMPT,
                    .launch_id = launch_id_of(s, l),
                    .submit_id = l->sub->submit_id,
                    .tenant = l->t->id,
                    .form = l->form};
  int rc = action_push(s, &a);
  if (rc == 0) {
    l->preempt_raised = true;
    l->preempt_ns = s->now_ns;
    s->stats.preempts++;
  }
  return rc;
}

int pol__issue_rest_charged(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *u, int prio,
                            uint64_t flight_ns) {
  if (u->redo > 0)
    return issue_redo(s, t, u, prio, 0, 0, flight_ns);
  pol_form_t f = u->next == 0 ? POL_FORM_ORIGINAL : POL_FORM_SLICED;
  return issue_launch(s, t, u, f, u->total - u->next, 0, prio, 0, 0, 0, flight_ns);
}

int pol__issue_rest(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *u, int prio) {
  return pol__issue_rest_charged(s, t, u, prio, 0);
}

int pol__issue_all(pol_sched_t *s, pol__tenant_t *t, int prio, uint32_t max_inflight) {
  pol__sub_t *u;
  while (t->inflight < max_inflight && (u = pol__tenant_issuable(t)) != NULL) {
    int rc = pol__issue_rest(s, t, u, prio);
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* The logical block count of a valid shape (pol_kernel_check), else 0. */
static uint64_t kernel_blocks(const pol_kernel_t *k) {
  uint64_t g = 1, b = 1;
  for (int i = 0; i < 3; i++) {
    if (k->grid[i] == 0 || k->block[i] == 0)
      return 0;
    g *= k->grid[i];
    b *= k->block[i];
    if (g > POL__MAX_BLOCKS || b > 1024) /* CUDA: at most 1024 threads per block */
      return 0;
  }
  return g;
}

int pol_kernel_check(const pol_kernel_t *k) {
  return k && kernel_blocks(k) ? 0 : -EINVAL;
}

static int on_submit(pol_sched_t *s, const pol_event_t *ev) {
  uint64_t blocks = kernel_blocks(&ev->kernel);
  pol__tenant_t *t = tenant_find(s, ev->tenant);
  if (!t || !blocks)
    return -EINVAL;
  pol__sub_t *u = calloc(1, sizeof(*u));
  if (!u)
    return -ENOMEM;
  u->submit_id = ev->submit_id;
  u->k = ev->kernel;
  u->k.variants |= POL_VAR_ORIGINAL;
  u->total = blocks;
  u->submit_ns = ev->now_ns;
  if (t->tail)
    t->tail->fifo_next = u;
  else
    t->head = u;
  t->tail = u;
  t->nsubs++;
  return 0;
}

static int on_completed(pol_sched_t *s, const pol_event_t *ev) {
  pol__launch_t *l = launch_lookup(s, ev->launch_id);
  if (!l || ev->blocks_done > l->count || ev->dev_end_ns < ev->dev_start_ns)
    return -EINVAL;
  /* Only a PTB launch may stop early (it was preempted); a FLUSH launch
   * accounts for every block, finished or given up (pol.h); no other form
   * gives blocks up. */
  if (l->form == POL_FORM_FLUSH) {
    if (ev->blocks_given_up != l->count - ev->blocks_done)
      return -EINVAL;
  } else if (ev->blocks_given_up != 0 || (l->form != POL_FORM_PTB && ev->blocks_done != l->count)) {
    return -EINVAL;
  }
  pol__tenant_t *t = l->t;
  pol__sub_t *u = l->sub;
  int rc = ev->untimed ? 0 : pol__profile_sample(s, l, ev);
  if (rc < 0)
    return rc;
  if (s->ops->on_completed)
    s->ops->on_completed(s, l, ev);
  u->done += ev->blocks_done;
  if (l->form == POL_FORM_FLUSH) {
    t->flush_inflight--;
    s->stats.blocks_given_up += ev->blocks_given_up;
    if (ev->blocks_given_up > 0 && !t->closing) {
      /* Invariant (e): no redo was pending (it would have been issued
       * before this launch), so these blocks are all there is to redo. */
      u->redo = ev->blocks_given_up;
      u->redo_of = ev->launch_id;
    }
  } else if (ev->blocks_done < l->count) {
    u->next = l->begin + ev->blocks_done; /* invariant (b): suffix returns */
  }
  u->inflight--;
  t->inflight--;
  if (l->form == POL_FORM_PTB)
    t->ptb_inflight--;
  if (t->cls == POL_CLASS_LC) {
    s->lc_inflight--;
    s->lc_last_done_ns = ev->now_ns;
    s->lc_seen_done = true;
  } else {
    s->be_inflight--;
    s->be_budget_ns -= l->turn_ns;
    s->be_flight_ns -= l->flight_ns;
    if (l->deep)
      s->be_deep_inflight--;
  }
  launch_release(s, l);
  /* Completed submissions leave the FIFO in order (stream order); a closing
   * tenant's leave as their last launch ends. */
  while (t->head && t->head->inflight == 0 && (t->closing || t->head->done == t->head->total)) {
    pol__sub_t *h = t->head;
    t->head = h->fifo_next;
    if (!t->head)
      t->tail = NULL;
    t->nsubs--;
    free(h);
  }
  tenant_reap(s, t);
  return 0;
}

int pol_sched_event(pol_sched_t *s, const pol_event_t *ev) {
  int rc;
  if (ev->now_ns > s->now_ns)
    s->now_ns = ev->now_ns;
  switch (ev->type) {
  case POL_EV_SUBMIT:
    rc = on_submit(s, ev);
    break;
  case POL_EV_STARTED:
    rc = launch_lookup(s, ev->launch_id) ? 0 : -EINVAL;
    break;
  case POL_EV_COMPLETED:
    rc = on_completed(s, ev);
    break;
  case POL_EV_TIMER:
    rc = 0;
    break;
  default:
    rc = -EINVAL;
    break;
  }
  if (rc < 0)
    return rc;
  s->timer_ns = UINT64_MAX; /* pump asks again for the timer it still needs */
  return s->ops->pump(s);
}
