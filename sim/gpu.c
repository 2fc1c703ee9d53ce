/* gpu.c: the model of one GPU: SMs, launches, streams and block dispatch.
 *
 * What it models, and the hardware fact behind each rule:
 *  - An SM holds blocks while its free threads, registers (allocated per
 *    warp in units of 256), shared memory and block slots allow: the CUDA
 *    occupancy rules.
 *  - A launch becomes visible launch_ns after the call; it becomes eligible
 *    when it is also the head of its stream (one stream per tenant; the next
 *    kernel starts kernel_gap_ns after the previous one ends).
 *  - Dispatch is by stream priority, then launch order, and happens only
 *    when an SM frees resources or a launch becomes eligible; running blocks
 *    are never preempted (on the H200 stream priority is block-level, not
 *    preemptive: docs/h200.md).  A later launch may fill what an earlier one
 *    cannot use.
 *  - Sliced launches are ordinary launches of a block range whose blocks
 *    cost slice_overhead_ppm more; PTB launches start `workers` blocks that
 *    each take logical blocks in order, one at a time (ptb_overhead_ppm more
 *    each) and exit when none is left or the preemption flag is visible
 *    (flag_ns after it was raised) at the end of a logical block.  Workers
 *    not yet dispatched when the flag shows exit without running.
 *  - FLUSH launches are sliced launches (flush_overhead_ppm more per block)
 *    whose blocks give up at a flag: flag_ns + flush_poll_ns after it was
 *    raised, every running block that has not committed (a block commits
 *    flush_commit_ppm millionths into its run: its first global effect;
 *    1000000, the default, is a block that writes only at its end) frees its
 *    SM at once and counts as given up, with the time it ran counted as
 *    wasted; committed blocks run to their end; blocks not yet dispatched
 *    give up without running.  The completion says how many finished and
 *    how many gave up; a redo launch (pol_action_t.redo) runs that many of
 *    the submission's given-up blocks again (all blocks of a kernel are
 *    alike here, so which ones does not matter).
 *  - A partition (be_sms > 0, tallyd --be-sms): low-priority launches
 *    dispatch only on the last be_sms SMs, high-priority ones on any; the
 *    residency the policy is told for a BE kernel is that of the partition.
 *    Green contexts split SMs by count, so which SMs does not matter here.
 * What it does not model: interference between co-resident blocks (memory
 * bandwidth, caches), clocks, and the driver's context switches.
 */
#include "sim/sim.h"
#include "sim/sim-int.h"

#include "policy/pol-gpu.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void sim_gpu_config_init(sim_gpu_config_t *c) {
  memset(c, 0, sizeof(*c));
  /* H200 (policy/pol-gpu.h): per SM 2048 threads, 64 Ki registers, 228 KiB
   * shared memory, 32 blocks; 132 SMs. */
  c->sm_count = POL_GPU_SM_COUNT;
  c->sm_threads = POL_GPU_SM_THREADS;
  c->sm_regs = POL_GPU_SM_REGS;
  c->sm_shmem_bytes = POL_GPU_SM_SHMEM_BYTES;
  c->sm_blocks = POL_GPU_SM_BLOCKS;
  /* Launch + stream sync of an empty kernel: 9.3 us p50; a full-GPU kernel
   * of 5 us blocks completes in 14.7 us (14.7 - 5 = 9.7 ~ 9.3).  We split
   * the round trip into 5.0 us call -> first block and 4.3 us end -> host. */
  c->launch_ns = 5000;
  c->notify_ns = POL_GPU_LAUNCH_SYNC_NS - c->launch_ns;
  /* The policy acts on a completion as soon as the host sees it: the
   * launch+sync round trip is then the whole gap between two dependent
   * launches.  A daemon adds its own (event polling, thread hand-offs);
   * tally-sim --sched-delay-us sets it. */
  c->sched_ns = 0;
  /* Back-to-back kernels already queued on one stream: ~1 us between them.
   * ASSUMPTION, not measured here. */
  c->kernel_gap_ns = 1000;
  /* Flag set by an async copy on a high-priority stream, signal -> kernel
   * done 27.7 us p50. */
  c->flag_ns = POL_GPU_FLAG_NS;
  /* ASSUMPTIONS, not measured here: a sliced block recomputes its index
   * (~1%); a PTB worker pays an atomic and a flag load per logical block
   * (~3%).  tallyd's profiles measure the real figures. */
  c->slice_overhead_ppm = 10000;
  c->ptb_overhead_ppm = 30000;
  /* ASSUMPTIONS, not measured here: a FLUSH block recomputes its index like
   * a sliced one and polls the flag every 64th backward branch (~2% in
   * all); it sees the flag at its next poll, POL_GPU_FLUSH_POLL_NS (the
   * figure policy/'s give-up time uses); and it commits at its end (writes
   * only its result; tally-sim --flush-commit sets another fraction). */
  c->flush_overhead_ppm = 20000;
  c->flush_poll_ns = POL_GPU_FLUSH_POLL_NS;
  c->flush_commit_ppm = 1000000;
}

int sim_gpu_config_check(const sim_gpu_config_t *c, const char **why) {
  const char *bad = NULL;
  if (c->sm_count < 1 || c->sm_count > 4096)
    bad = "SM count must be 1..4096";
  else if (c->sm_threads < 32 || c->sm_regs < 256 || c->sm_blocks < 1)
    bad = "SM limits too small";
  else if (c->launch_ns > 1000000000ull || c->notify_ns > 1000000000ull ||
           c->sched_ns > 1000000000ull || c->kernel_gap_ns > 1000000000ull ||
           c->flag_ns > 1000000000ull || c->flush_poll_ns > 1000000000ull)
    bad = "latencies must be at most 1 s";
  else if (c->slice_overhead_ppm > 10000000 || c->ptb_overhead_ppm > 10000000 ||
           c->flush_overhead_ppm > 10000000)
    bad = "overheads must be at most 10x";
  else if (c->flush_commit_ppm > 1000000)
    bad = "FLUSH commit point must be a fraction of a block (at most 1)";
  else if (c->be_sms >= c->sm_count)
    bad = "the BE partition must leave SMs out (fewer SMs than the GPU has)";
  if (bad) {
    if (why)
      *why = bad;
    return -EINVAL;
  }
  return 0;
}

static uint32_t threads_of(const sim_kernel_t *k) {
  return k->block[0] * k->block[1] * k->block[2];
}

/* Registers one block takes: per warp, rounded up to the 256-register unit. */
static uint32_t regs_of(const sim_kernel_t *k) {
  uint32_t warps = (threads_of(k) + 31) / 32;
  uint32_t per_warp = ((k->regs_per_thread * 32 + 255) / 256) * 256;
  return warps * per_warp;
}

static uint32_t fit(const sim__sm_t *sm, uint32_t threads, uint32_t regs, uint32_t shmem) {
  uint32_t n = sm->blocks;
  uint32_t t = sm->threads / threads;
  if (t < n)
    n = t;
  if (regs && sm->regs / regs < n)
    n = sm->regs / regs;
  if (shmem && sm->shmem / shmem < n)
    n = sm->shmem / shmem;
  return n;
}

uint64_t sim_gpu_resident(const sim_gpu_config_t *g, const sim_kernel_t *k) {
  sim__sm_t sm = {g->sm_threads, g->sm_regs, g->sm_shmem_bytes, g->sm_blocks};
  uint32_t th = threads_of(k);
  if (th == 0 || th > g->sm_threads)
    return 0;
  return (uint64_t)fit(&sm, th, regs_of(k), k->shmem_bytes) * g->sm_count;
}

int sim__gpu_init(sim__ctx_t *c) {
  c->sms = calloc(c->g->sm_count, sizeof(*c->sms));
  if (!c->sms)
    return -ENOMEM;
  for (uint32_t i = 0; i < c->g->sm_count; i++) {
    c->sms[i].threads = c->g->sm_threads;
    c->sms[i].regs = c->g->sm_regs;
    c->sms[i].shmem = c->g->sm_shmem_bytes;
    c->sms[i].blocks = c->g->sm_blocks;
  }
  return 0;
}

void sim__gpu_fini(sim__ctx_t *c) {
  free(c->sms);
  free(c->groups);
  free(c->slots);
  free(c->launches);
  free(c->active);
}

static int group_alloc(sim__ctx_t *c, uint32_t *out) {
  return SIM__POOL_TAKE(c->groups, c->ngroups, c->group_free, next_free, 1024, out);
}

static void group_release(sim__ctx_t *c, uint32_t gi) {
  c->groups[gi].live = false;
  SIM__POOL_PUT(c->groups, c->group_free, next_free, gi);
}

static int slot_alloc(sim__ctx_t *c, uint32_t *out) {
  return SIM__POOL_TAKE(c->slots, c->nslots, c->slot_free, next, 4096, out);
}

static void slot_release(sim__ctx_t *c, uint32_t si) {
  SIM__POOL_PUT(c->slots, c->slot_free, next, si);
}

/* Records n blocks (resources already taken) of launch li on SM s as
 * starting now: they join the launch's group opened at this instant, or open
 * one with its completion event. */
static int add_blocks(sim__ctx_t *c, uint32_t li, uint32_t s, uint32_t n) {
  uint32_t si, gi;
  int rc = slot_alloc(c, &si);
  if (rc < 0)
    return rc;
  c->slots[si].sm = s;
  c->slots[si].n = n;
  c->slots[si].next = 0;
  sim__launch_t *l = &c->launches[li];
  if (l->open_group && l->open_ns == c->now) {
    gi = l->open_group - 1;
  } else {
    rc = group_alloc(c, &gi);
    if (rc < 0) {
      slot_release(c, si);
      return rc;
    }
    c->groups[gi].launch = li;
    c->groups[gi].head = c->groups[gi].tail = 0;
    c->groups[gi].start_ns = c->now;
    c->groups[gi].live = true;
    c->groups[gi].dead = false;
    rc = sim__push(c, c->now + l->block_ns, SIM__EV_GROUP_DONE, gi);
    if (rc < 0) {
      group_release(c, gi);
      slot_release(c, si);
      return rc;
    }
    l->resident++;
    l->open_group = gi + 1;
    l->open_ns = c->now;
  }
  sim__group_t *g = &c->groups[gi];
  if (g->tail)
    c->slots[g->tail - 1].next = si + 1;
  else
    g->head = si + 1;
  g->tail = si + 1;
  return 0;
}

static int launch_alloc(sim__ctx_t *c, uint32_t *out) {
  return SIM__POOL_TAKE(c->launches, c->nlaunches, c->launch_free, next_free, 256, out);
}

void sim__gpu_release(sim__ctx_t *c, uint32_t li) {
  c->launches[li].in_use = false;
  SIM__POOL_PUT(c->launches, c->launch_free, next_free, li);
}

static int active_insert(sim__ctx_t *c, uint32_t li) {
  if (c->nactive == c->capactive) {
    uint32_t n = c->capactive ? c->capactive * 2 : 64;
    uint32_t *a = realloc(c->active, (size_t)n * sizeof(*a));
    if (!a)
      return -ENOMEM;
    c->active = a;
    c->capactive = n;
  }
  const sim__launch_t *l = &c->launches[li];
  uint32_t i = c->nactive;
  while (i > 0) {
    const sim__launch_t *p = &c->launches[c->active[i - 1]];
    if (p->prio < l->prio || (p->prio == l->prio && p->seq < l->seq))
      break;
    c->active[i] = c->active[i - 1];
    i--;
  }
  c->active[i] = li;
  c->nactive++;
  return 0;
}

static void active_remove(sim__ctx_t *c, uint32_t li) {
  for (uint32_t i = 0; i < c->nactive; i++) {
    if (c->active[i] == li) {
      memmove(c->active + i, c->active + i + 1, (c->nactive - i - 1) * sizeof(*c->active));
      c->nactive--;
      return;
    }
  }
}

static void all_dispatched(sim__ctx_t *c, uint32_t li) {
  sim__launch_t *l = &c->launches[li];
  const sim__tenant_t *t = &c->tenants[l->tenant];
  if (t->spec->cls == POL_CLASS_LC)
    sim__on_lc_wait(c, l->tenant, l->last_dispatch_ns - l->ready_ns);
}

static int complete_if_done(sim__ctx_t *c, uint32_t li) {
  sim__launch_t *l = &c->launches[li];
  if (l->complete || l->dispatched < l->units || l->resident > 0)
    return 0;
  l->complete = true;
  l->end_ns = c->now;
  if (l->first_ns == UINT64_MAX)
    l->first_ns = c->now;
  c->subs[l->sub].redo_pending += l->given_up; /* a redo launch takes them */
  c->res->flush_given_up += l->given_up;
  sim__tenant_t *t = &c->tenants[l->tenant];
  /* Pop the stream; its next launch may start after the inter-kernel gap. */
  t->stream_head = l->stream_next;
  if (t->stream_head == 0) {
    t->stream_tail = 0;
  } else {
    sim__launch_t *n = &c->launches[t->stream_head - 1];
    uint64_t at = c->now + c->g->kernel_gap_ns;
    if (n->visible_ns > at)
      at = n->visible_ns;
    int rc = sim__push(c, at, SIM__EV_ELIGIBLE, t->stream_head - 1);
    if (rc < 0)
      return rc;
  }
  sim__on_launch_done(c, li);
  return 0;
}

/* Dispatches what fits on SM s, by priority then launch order. */
static int dispatch_sm(sim__ctx_t *c, uint32_t s) {
  sim__sm_t *sm = &c->sms[s];
  bool removed = false;
  for (uint32_t i = 0; i < c->nactive && sm->blocks > 0; i++) {
    uint32_t li = c->active[i];
    sim__launch_t *l = &c->launches[li];
    uint64_t left = l->units - l->dispatched;
    if (left == 0)
      continue;
    if (c->g->be_sms && l->prio == POL_PRIO_LOW && s < c->g->sm_count - c->g->be_sms)
      continue; /* outside the BE partition */
    uint32_t n = fit(sm, l->threads, l->regs, l->shmem);
    if (n == 0)
      continue;
    if (n > left)
      n = (uint32_t)left;
    if (l->form == POL_FORM_PTB) {
      uint64_t logical_left = l->count - l->logical_next;
      if (l->flag_ns <= c->now || logical_left == 0) {
        l->dispatched = l->units; /* the rest exit at once */
        removed = true;
        int rc = complete_if_done(c, li);
        if (rc < 0)
          return rc;
        continue;
      }
      if (n > logical_left)
        n = (uint32_t)logical_left;
      l->logical_next += n;
    } else if (l->form == POL_FORM_FLUSH && l->flag_ns <= c->now) {
      l->given_up += left; /* they start, poll and give up: nothing runs */
      l->dispatched = l->units;
      removed = true;
      int rc = complete_if_done(c, li);
      if (rc < 0)
        return rc;
      continue;
    }
    sm->threads -= n * l->threads;
    sm->regs -= n * l->regs;
    sm->shmem -= n * l->shmem;
    sm->blocks -= n;
    if (l->first_ns == UINT64_MAX)
      l->first_ns = c->now;
    l->last_dispatch_ns = c->now;
    l->dispatched += n;
    int rc = add_blocks(c, li, s, n);
    if (rc < 0)
      return rc;
    l = &c->launches[li];
    if (l->dispatched == l->units) {
      removed = true;
      all_dispatched(c, li);
    }
  }
  if (removed) {
    uint32_t j = 0;
    for (uint32_t i = 0; i < c->nactive; i++) {
      sim__launch_t *l = &c->launches[c->active[i]];
      if (l->dispatched < l->units)
        c->active[j++] = c->active[i];
    }
    c->nactive = j;
  }
  return 0;
}

static int dispatch_all(sim__ctx_t *c) {
  for (uint32_t s = 0; s < c->g->sm_count && c->nactive > 0; s++) {
    if (c->sms[s].blocks == 0)
      continue;
    int rc = dispatch_sm(c, s);
    if (rc < 0)
      return rc;
  }
  return 0;
}

int sim__gpu_launch(sim__ctx_t *c, const pol_action_t *a) {
  uint32_t li;
  uint32_t si = (uint32_t)(a->submit_id & 0xffffffffu);
  if (si >= c->nsubs || !c->subs[si].in_use || a->tenant >= c->res->ntenants)
    return -EINVAL;
  sim__sub_t *u = &c->subs[si];
  const sim_kernel_t *k = u->k;
  if (a->redo) {
    /* Only a FLUSH redo, of blocks the submission gave up (pol.h). */
    if (a->form != POL_FORM_FLUSH || a->block_count == 0 || a->block_count > u->redo_pending ||
        a->block_begin != 0)
      return -EINVAL;
  } else if (a->block_count == 0 || a->block_begin + a->block_count > u->total ||
             (unsigned)a->form > POL_FORM_FLUSH) {
    return -EINVAL;
  }
  int rc = launch_alloc(c, &li);
  if (rc < 0)
    return rc;
  sim__launch_t *l = &c->launches[li];
  uint32_t nf = l->next_free;
  memset(l, 0, sizeof(*l));
  l->next_free = nf;
  l->in_use = true;
  l->pol_id = a->launch_id;
  l->sub = si;
  l->tenant = u->tenant;
  l->prio = a->stream_priority;
  l->seq = c->launch_seq++;
  l->form = a->form;
  l->begin = a->block_begin;
  l->count = a->block_count;
  l->units = l->count;
  l->redo = a->redo;
  if (a->redo)
    u->redo_pending -= a->block_count;
  uint64_t ppm = 0;
  if (a->form == POL_FORM_PTB) {
    uint64_t w = a->ptb_workers ? a->ptb_workers : 1;
    l->units = w < l->count ? w : l->count;
    ppm = c->g->ptb_overhead_ppm;
  } else if (a->form == POL_FORM_SLICED) {
    ppm = c->g->slice_overhead_ppm;
  } else if (a->form == POL_FORM_FLUSH) {
    ppm = c->g->flush_overhead_ppm;
  }
  l->nominal_ns = k->block_ns;
  l->block_ns = k->block_ns + (k->block_ns * ppm) / 1000000;
  l->threads = threads_of(k);
  l->regs = regs_of(k);
  l->shmem = k->shmem_bytes;
  l->visible_ns = c->now + c->g->launch_ns;
  l->first_ns = UINT64_MAX;
  l->flag_ns = UINT64_MAX;
  if (c->tenants[u->tenant].spec->cls == POL_CLASS_BE && l->block_ns > c->res->max_be_block_ns)
    c->res->max_be_block_ns = l->block_ns;
  sim__tenant_t *t = &c->tenants[u->tenant];
  if (t->stream_tail) {
    c->launches[t->stream_tail - 1].stream_next = li + 1;
    t->stream_tail = li + 1;
    return 0; /* eligible when its predecessor ends */
  }
  t->stream_head = t->stream_tail = li + 1;
  return sim__push(c, l->visible_ns, SIM__EV_ELIGIBLE, li);
}

int sim__gpu_preempt(sim__ctx_t *c, uint64_t pol_id) {
  for (uint32_t i = 0; i < c->nlaunches; i++) {
    sim__launch_t *l = &c->launches[i];
    if (!l->in_use || l->pol_id != pol_id)
      continue;
    if (l->form != POL_FORM_PTB && l->form != POL_FORM_FLUSH)
      return -EINVAL;
    if (l->complete || l->flag_ns != UINT64_MAX)
      return 0;
    l->flag_ns = c->now + c->g->flag_ns;
    if (l->form == POL_FORM_FLUSH)
      l->flag_ns += c->g->flush_poll_ns; /* its blocks see it at their next poll */
    return sim__push(c, l->flag_ns, SIM__EV_FLAG, i);
  }
  return -EINVAL;
}

int sim__gpu_on_eligible(sim__ctx_t *c, uint32_t li) {
  sim__launch_t *l = &c->launches[li];
  l->eligible = true;
  l->ready_ns = c->now;
  if (l->form == POL_FORM_PTB && l->flag_ns <= c->now) {
    l->dispatched = l->units; /* flagged before it began: nothing runs */
    return complete_if_done(c, li);
  }
  if (l->form == POL_FORM_FLUSH && l->flag_ns <= c->now) {
    l->given_up += l->units; /* every block gives up at its first poll */
    l->dispatched = l->units;
    return complete_if_done(c, li);
  }
  int rc = active_insert(c, li);
  if (rc < 0)
    return rc;
  return dispatch_all(c);
}

/* FLUSH: the flag shows: running groups that have not committed give up
 * (their SMs free at once), blocks not dispatched give up without running,
 * committed groups run on.  The freed SMs dispatch only after every group
 * was looked at (dispatch may grow the group pool). */
static int flush_give_up(sim__ctx_t *c, uint32_t li) {
  sim__launch_t *l = &c->launches[li];
  uint64_t commit_ns = (l->block_ns * c->g->flush_commit_ppm) / 1000000;
  bool freed = false;
  if (l->dispatched < l->units) {
    l->given_up += l->units - l->dispatched;
    l->dispatched = l->units;
    active_remove(c, li);
  }
  for (uint32_t gi = 0; gi < c->ngroups; gi++) {
    sim__group_t *g = &c->groups[gi];
    if (!g->live || g->dead || g->launch != li || g->start_ns + commit_ns <= c->now)
      continue;
    for (uint32_t si = g->head; si;) {
      sim__slot_t sl = c->slots[si - 1];
      sim__sm_t *sm = &c->sms[sl.sm];
      slot_release(c, si - 1);
      si = sl.next;
      sm->threads += sl.n * l->threads;
      sm->regs += sl.n * l->regs;
      sm->shmem += sl.n * l->shmem;
      sm->blocks += sl.n;
      l->given_up += sl.n;
      if (c->now <= c->cfg->duration_ns) /* measured as BE work is: in [0, duration] */
        c->res->flush_wasted_ns += (double)sl.n * (double)(c->now - g->start_ns);
    }
    g->head = g->tail = 0;
    g->dead = true; /* its completion event will only release it */
    if (l->open_group == gi + 1)
      l->open_group = 0;
    l->resident--;
    freed = true;
  }
  if (freed) {
    int rc = dispatch_all(c);
    if (rc < 0)
      return rc;
  }
  return complete_if_done(c, li);
}

int sim__gpu_on_flag(sim__ctx_t *c, uint32_t li) {
  sim__launch_t *l = &c->launches[li];
  /* The launch may have ended and its slot gone to another launch since
   * the flag was raised: only the launch whose flag shows now qualifies. */
  if (!l->in_use || (l->form != POL_FORM_PTB && l->form != POL_FORM_FLUSH) ||
      l->flag_ns != c->now || l->complete || !l->eligible)
    return 0;
  if (l->form == POL_FORM_FLUSH)
    return flush_give_up(c, li);
  if (l->dispatched < l->units) {
    l->dispatched = l->units; /* workers not yet running see the flag first */
    active_remove(c, li);
  }
  return complete_if_done(c, li);
}

int sim__gpu_on_group_done(sim__ctx_t *c, uint32_t gi) {
  uint32_t li = c->groups[gi].launch;
  uint32_t si = c->groups[gi].head;
  int rc = 0;
  if (c->groups[gi].dead) {
    group_release(c, gi); /* gave up (flush_give_up): counted and freed then */
    return 0;
  }
  /* Slot by slot, as if each SM's blocks ended one after the other at this
   * instant: count them, keep PTB workers that still have work, free the
   * rest and let that SM dispatch at once. */
  while (si && rc == 0) {
    sim__slot_t sl = c->slots[si - 1];
    sim__launch_t *l = &c->launches[li];
    sim__sm_t *sm = &c->sms[sl.sm];
    uint32_t keep = 0;
    slot_release(c, si - 1);
    si = sl.next;
    l->done += sl.n;
    sim__on_blocks_done(c, l, sl.n);
    if (l->form == POL_FORM_PTB && l->flag_ns > c->now) {
      uint64_t logical_left = l->count - l->logical_next;
      keep = (uint32_t)(logical_left < sl.n ? logical_left : sl.n);
      l->logical_next += keep;
    }
    uint32_t leave = sl.n - keep;
    sm->threads += leave * l->threads;
    sm->regs += leave * l->regs;
    sm->shmem += leave * l->shmem;
    sm->blocks += leave;
    if (keep > 0)
      rc = add_blocks(c, li, sl.sm, keep); /* still resident: no resources taken */
    if (rc == 0 && leave > 0)
      rc = dispatch_sm(c, sl.sm);
  }
  if (rc < 0)
    return rc;
  group_release(c, gi);
  c->launches[li].resident--;
  return complete_if_done(c, li);
}
