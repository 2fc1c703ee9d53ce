/* engine.c: the simulation's event loop, the tenants' host threads, and the
 * glue that drives policy/ exactly as tallyd does.
 *
 * Host model.  Each tenant has one host thread and one stream.  A tenant
 * runs its trace as an iteration: kernel j is submitted gap_ns after kernel
 * j-1 (gap 0: all at once, as a CUDA graph does), then the thread waits for
 * every kernel of the iteration (a synchronize).  The LC tenant runs one
 * iteration per request, in arrival order, starting each at max(arrival,
 * end of the previous): request latency = end - arrival, so queueing counts.
 * BE tenants are closed loops: the next step starts when the last ends.
 *
 * Policy glue.  Every submit becomes POL_EV_SUBMIT at the submit time; every
 * launch's end reaches the policy notify_ns + sched_ns later as POL_EV_COMPLETED with
 * device timestamps (and, for FLUSH launches, the blocks that gave up); the
 * policy's timer becomes POL_EV_TIMER.  Actions are applied at once: LAUNCH
 * creates a launch (gpu.c; a redo runs given-up blocks again), PREEMPT
 * raises a flag.
 *
 * The run measures BE work in [0, duration) and keeps simulating (BE still
 * running) until every LC request that arrived before `duration` is done,
 * or until 2 x duration.
 */
#include "sim/sim.h"
#include "sim/sim-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- heap */

static bool ev_less(const sim__ev_t *a, const sim__ev_t *b) {
  return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

int sim__push(sim__ctx_t *c, uint64_t t, uint32_t type, uint32_t a) {
  if (c->nheap == c->capheap) {
    size_t n = c->capheap ? c->capheap * 2 : 4096;
    sim__ev_t *h = realloc(c->heap, n * sizeof(*h));
    if (!h)
      return -ENOMEM;
    c->heap = h;
    c->capheap = n;
  }
  sim__ev_t e = {.t = t, .seq = c->seq++, .type = type, .a = a};
  size_t i = c->nheap++;
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (!ev_less(&e, &c->heap[p]))
      break;
    c->heap[i] = c->heap[p];
    i = p;
  }
  c->heap[i] = e;
  return 0;
}

static sim__ev_t pop(sim__ctx_t *c) {
  sim__ev_t top = c->heap[0];
  sim__ev_t last = c->heap[--c->nheap];
  size_t i = 0, n = c->nheap;
  for (;;) {
    size_t l = 2 * i + 1, m;
    if (l >= n)
      break;
    m = (l + 1 < n && ev_less(&c->heap[l + 1], &c->heap[l])) ? l + 1 : l;
    if (!ev_less(&c->heap[m], &last))
      break;
    c->heap[i] = c->heap[m];
    i = m;
  }
  if (n > 0)
    c->heap[i] = last;
  return top;
}

/* ---------------------------------------------------------------- helpers */

static int grow_u64(uint64_t **v, size_t *n, size_t *cap, uint64_t x) {
  if (*n == *cap) {
    size_t c = *cap ? *cap * 2 : 1024;
    uint64_t *p = realloc(*v, c * sizeof(*p));
    if (!p)
      return -ENOMEM;
    *v = p;
    *cap = c;
  }
  (*v)[(*n)++] = x;
  return 0;
}

typedef struct run_caps {
  size_t lat[SIM_MAX_TENANTS], exec[SIM_MAX_TENANTS], waits[SIM_MAX_TENANTS];
} run_caps_t;

static run_caps_t *caps_of(sim__ctx_t *c);

static void fail(sim__ctx_t *c, int rc) {
  if (c->err == 0)
    c->err = rc;
}

static int sub_alloc(sim__ctx_t *c, uint32_t *out) {
  return SIM__POOL_TAKE(c->subs, c->nsubs, c->sub_free, next_free, 1024, out);
}

static void sub_release(sim__ctx_t *c, uint32_t si) {
  c->subs[si].in_use = false;
  SIM__POOL_PUT(c->subs, c->sub_free, next_free, si);
}

/* ---------------------------------------------------------------- policy glue */

static int apply_actions(sim__ctx_t *c) {
  pol_action_t acts[64];
  size_t n;
  while ((n = pol_sched_actions(c->pol, acts, 64)) > 0) {
    for (size_t i = 0; i < n; i++) {
      int rc = acts[i].type == POL_ACT_LAUNCH ? sim__gpu_launch(c, &acts[i])
                                              : sim__gpu_preempt(c, acts[i].launch_id);
      if (rc < 0)
        return rc;
    }
  }
  uint64_t nt = pol_sched_next_timer_ns(c->pol);
  if (nt != UINT64_MAX && nt != c->timer_at) {
    c->timer_at = nt;
    return sim__push(c, nt > c->now ? nt : c->now, SIM__EV_TIMER, 0);
  }
  return 0;
}

static int pol_feed(sim__ctx_t *c, pol_event_t *ev) {
  ev->now_ns = c->now;
  int rc = pol_sched_event(c->pol, ev);
  if (rc < 0)
    return rc;
  return apply_actions(c);
}

/* ---------------------------------------------------------------- callbacks */

void sim__on_blocks_done(sim__ctx_t *c, sim__launch_t *l, uint64_t n) {
  sim__sub_t *u = &c->subs[l->sub];
  c->res->blocks += n;
  u->done += n;
  if (c->tenants[l->tenant].spec->cls == POL_CLASS_BE && c->now <= c->cfg->duration_ns) {
    sim_tenant_result_t *r = &c->res->t[l->tenant];
    r->work_ns += (double)n * (double)l->nominal_ns;
    if (r->work_buckets && c->now / c->cfg->bucket_ns < r->nbuckets)
      r->work_buckets[c->now / c->cfg->bucket_ns] += (double)n * (double)l->nominal_ns;
  }
  if (u->done == u->total) {
    int rc = sim__push(c, c->now + c->g->notify_ns, SIM__EV_SUB_DONE, l->sub);
    if (rc < 0)
      fail(c, rc);
  }
}

void sim__on_launch_done(sim__ctx_t *c, uint32_t li) {
  sim__launch_t *l = &c->launches[li];
  int rc = sim__push(c, c->now + c->g->notify_ns + c->g->sched_ns, SIM__EV_POL_DONE, li);
  if (rc < 0)
    fail(c, rc);
  if (l->ctx_waited) { /* the last one ends the LC's context-wide wait */
    l->ctx_waited = false;
    if (--c->ctx_wait_left == 0) {
      sim__tenant_t *t = &c->tenants[c->ctx_waiter];
      sim_tenant_result_t *r = &c->res->t[c->ctx_waiter];
      t->ctx_waiting = false;
      t->last_submit_ns = c->now; /* its first kernel goes now */
      if (c->now - t->iter_start_ns > r->max_ctx_wait_ns)
        r->max_ctx_wait_ns = c->now - t->iter_start_ns;
      if ((rc = sim__push(c, c->now, SIM__EV_HOST, c->ctx_waiter)) < 0)
        fail(c, rc);
    }
  }
}

/* lc_ctx_wait_every: LC tenant ti's request begins with a driver call that
 * waits for every BE launch issued by now (queued or running).  Marks them;
 * true when there are any (the host thread then waits), false otherwise. */
static bool ctx_wait_begin(sim__ctx_t *c, uint32_t ti) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < c->nlaunches; i++) {
    sim__launch_t *l = &c->launches[i];
    if (l->in_use && !l->complete && c->tenants[l->tenant].spec->cls == POL_CLASS_BE) {
      l->ctx_waited = true;
      n++;
    }
  }
  c->res->t[ti].ctx_waits++;
  if (n == 0)
    return false;
  c->ctx_wait_left = n;
  c->ctx_waiter = ti;
  c->tenants[ti].ctx_waiting = true;
  return true;
}

void sim__on_lc_wait(sim__ctx_t *c, uint32_t tenant, uint64_t wait_ns) {
  sim_tenant_result_t *r = &c->res->t[tenant];
  r->kernel_waits++;
  if (wait_ns > r->max_wait_ns)
    r->max_wait_ns = wait_ns;
  if (c->cfg->record_waits) {
    int rc = grow_u64(&r->waits_ns, &r->nwaits, &caps_of(c)->waits[tenant], wait_ns);
    if (rc < 0)
      fail(c, rc);
  }
}

/* ---------------------------------------------------------------- host threads */

static int host_step(sim__ctx_t *c, uint32_t ti);

static int iteration_done(sim__ctx_t *c, uint32_t ti) {
  sim__tenant_t *t = &c->tenants[ti];
  sim_tenant_result_t *r = &c->res->t[ti];
  t->in_iter = false;
  r->requests++;
  if (t->spec->cls == POL_CLASS_LC) {
    int rc = grow_u64(&r->lat_ns, &r->nlat, &caps_of(c)->lat[ti],
                      c->now - t->spec->arrivals->t_ns[t->req]);
    if (rc < 0)
      return rc;
    rc = grow_u64(&r->exec_ns, &r->nexec, &caps_of(c)->exec[ti], c->now - t->iter_start_ns);
    if (rc < 0)
      return rc;
    t->req++;
    if (t->req >= t->spec->arrivals->n || t->spec->arrivals->t_ns[t->req] >= c->cfg->duration_ns)
      c->lc_left = false;
  }
  return host_step(c, ti);
}

/* Advances tenant ti's host thread as far as it can at c->now. */
static int host_step(sim__ctx_t *c, uint32_t ti) {
  sim__tenant_t *t = &c->tenants[ti];
  int rc;
  if (!t->in_iter) {
    if (t->spec->cls == POL_CLASS_LC) {
      const sim_arrivals_t *a = t->spec->arrivals;
      if (t->req >= a->n || a->t_ns[t->req] >= c->cfg->duration_ns)
        return 0;
      if (a->t_ns[t->req] > c->now)
        return sim__push(c, a->t_ns[t->req], SIM__EV_HOST, ti);
    } else if (c->now >= 2 * c->cfg->duration_ns) {
      return 0;
    }
    t->in_iter = true;
    t->tr = t->spec->niters ? &t->spec->iters[t->iter % t->spec->niters] : t->spec->trace;
    t->iter++;
    t->next_k = 0;
    t->iter_start_ns = c->now;
    t->last_submit_ns = c->now;
    if (t->spec->cls == POL_CLASS_LC && c->cfg->lc_ctx_wait_every &&
        t->req % c->cfg->lc_ctx_wait_every == 0 && ctx_wait_begin(c, ti))
      return 0; /* sim__on_launch_done wakes it */
  }
  if (t->ctx_waiting)
    return 0;
  const sim_trace_t *tr = t->tr;
  while (t->next_k < tr->n) {
    const sim_kernel_t *k = &tr->k[t->next_k];
    uint64_t due = t->last_submit_ns + (t->next_k == 0 ? 0 : k->gap_ns);
    if (due > c->now)
      return sim__push(c, due, SIM__EV_HOST, ti);
    uint32_t si;
    rc = sub_alloc(c, &si);
    if (rc < 0)
      return rc;
    sim__sub_t *u = &c->subs[si];
    u->in_use = true;
    u->tenant = ti;
    u->k = k;
    u->total = sim_kernel_blocks(k);
    u->done = 0;
    u->gen++;
    t->outstanding++;
    t->next_k++;
    t->last_submit_ns = due;
    pol_event_t ev = {
        .type = POL_EV_SUBMIT, .tenant = ti, .submit_id = ((uint64_t)u->gen << 32) | si};
    ev.kernel.kernel_id = k->kernel_id;
    memcpy(ev.kernel.grid, k->grid, sizeof(k->grid));
    memcpy(ev.kernel.block, k->block, sizeof(k->block));
    ev.kernel.shmem_bytes = k->shmem_bytes;
    ev.kernel.variants = k->variants;
    ev.kernel.resident_blocks = (uint32_t)sim_gpu_resident(c->g, k);
    if (c->g->be_sms && t->spec->cls == POL_CLASS_BE) /* the partition's share */
      ev.kernel.resident_blocks =
          (uint32_t)(ev.kernel.resident_blocks / c->g->sm_count * c->g->be_sms);
    rc = pol_feed(c, &ev);
    if (rc < 0)
      return rc;
  }
  if (t->outstanding == 0)
    return iteration_done(c, ti);
  return 0;
}

static int on_sub_done(sim__ctx_t *c, uint32_t si) {
  uint32_t ti = c->subs[si].tenant;
  sim__tenant_t *t = &c->tenants[ti];
  sub_release(c, si);
  t->outstanding--;
  if (t->outstanding == 0 && t->in_iter && t->next_k == t->tr->n)
    return iteration_done(c, ti);
  return 0;
}

static int on_pol_done(sim__ctx_t *c, uint32_t li) {
  sim__launch_t *l = &c->launches[li];
  pol_event_t ev = {.type = POL_EV_COMPLETED,
                    .launch_id = l->pol_id,
                    .dev_start_ns = l->first_ns,
                    .dev_end_ns = l->end_ns,
                    .blocks_done = l->done,
                    .blocks_given_up = l->given_up};
  sim__gpu_release(c, li);
  return pol_feed(c, &ev);
}

/* ---------------------------------------------------------------- run */

struct run_state {
  sim__ctx_t c;
  run_caps_t caps;
};

static run_caps_t *caps_of(sim__ctx_t *c) {
  return &((struct run_state *)c)->caps;
}

static int check_config(const sim_run_config_t *cfg, const char **why) {
  int nlc = 0;
  if (sim_gpu_config_check(&cfg->gpu, why) < 0 || pol_config_check(&cfg->pol, why) < 0)
    return -EINVAL;
  if ((unsigned)cfg->kind >= POL_KIND_COUNT) {
    *why = "unknown policy";
    return -EINVAL;
  }
  if (cfg->ntenants < 1 || cfg->ntenants > SIM_MAX_TENANTS) {
    *why = "need 1..8 tenants";
    return -EINVAL;
  }
  if (cfg->duration_ns < 1000 || cfg->duration_ns > (1ull << 62) / 4) {
    *why = "duration out of range";
    return -EINVAL;
  }
  if (cfg->bucket_ns > 0 && cfg->duration_ns / cfg->bucket_ns > 1000000) {
    *why = "more than 10^6 work buckets";
    return -EINVAL;
  }
  for (uint32_t i = 0; i < cfg->ntenants; i++) {
    const sim_tenant_spec_t *s = &cfg->tenants[i];
    size_t ntr = s->niters ? s->niters : 1;
    if (!s->niters && !s->trace) {
      *why = "a tenant has an empty trace";
      return -EINVAL;
    }
    for (size_t j = 0; j < ntr; j++) {
      const sim_trace_t *tr = s->niters ? &s->iters[j] : s->trace;
      if (tr->n == 0) {
        *why = "a tenant has an empty trace";
        return -EINVAL;
      }
      for (size_t q = 0; q < tr->n; q++) {
        if (sim_gpu_resident(&cfg->gpu, &tr->k[q]) == 0) {
          *why = "a kernel's block does not fit on one SM";
          return -EINVAL;
        }
      }
    }
    if (s->cls == POL_CLASS_LC) {
      nlc++;
      if (!s->arrivals) {
        *why = "the LC tenant needs arrivals";
        return -EINVAL;
      }
    }
  }
  if (nlc > 1) {
    *why = "at most one LC tenant";
    return -EINVAL;
  }
  return 0;
}

int sim_run(const sim_run_config_t *cfg, sim_result_t *res, const char **why) {
  const char *dummy;
  int rc;
  if (!why)
    why = &dummy;
  memset(res, 0, sizeof(*res));
  rc = check_config(cfg, why);
  if (rc < 0)
    return rc;
  struct run_state *st = calloc(1, sizeof(*st));
  if (!st)
    return -ENOMEM;
  sim__ctx_t *c = &st->c;
  c->cfg = cfg;
  c->g = &cfg->gpu;
  c->res = res;
  c->timer_at = UINT64_MAX;
  res->ntenants = cfg->ntenants;
  rc = sim__gpu_init(c);
  if (rc < 0)
    goto out;
  rc = pol_sched_new(cfg->kind, &cfg->pol, &c->pol);
  if (rc < 0)
    goto out;
  if (cfg->profile_path) {
    const char *pw = NULL;
    rc = pol_profiles_load(pol_sched_profiles(c->pol), cfg->profile_path, &pw);
    if (rc < 0 && rc != -ENOENT) {
      *why = pw ? pw : "cannot read the profile file";
      goto out;
    }
  }
  for (uint32_t i = 0; i < cfg->ntenants; i++) {
    const sim_tenant_spec_t *s = &cfg->tenants[i];
    c->tenants[i].spec = s;
    rc = pol_sched_tenant_add(c->pol, i, s->cls, s->weight ? s->weight : 1);
    if (rc < 0) {
      *why = "bad tenant (weight must be 1..1000)";
      goto out;
    }
    if (s->cls == POL_CLASS_LC && s->arrivals->n > 0 && s->arrivals->t_ns[0] < cfg->duration_ns)
      c->lc_left = true;
    if (cfg->bucket_ns > 0 && s->cls == POL_CLASS_BE) {
      res->t[i].nbuckets = cfg->duration_ns / cfg->bucket_ns + 1;
      res->t[i].work_buckets = calloc(res->t[i].nbuckets, sizeof(double));
      if (!res->t[i].work_buckets) {
        rc = -ENOMEM;
        goto out;
      }
    }
  }
  for (uint32_t i = 0; i < cfg->ntenants; i++) {
    rc = host_step(c, i);
    if (rc < 0)
      goto out;
  }
  uint64_t next_progress = cfg->duration_ns / 20;
  while (c->nheap > 0 && c->err == 0) {
    sim__ev_t e = pop(c);
    if (e.t >= cfg->duration_ns && (!c->lc_left || e.t >= 2 * cfg->duration_ns))
      break;
    c->now = e.t;
    res->events++;
    if (cfg->progress && c->now >= next_progress) {
      cfg->progress(cfg->progress_arg, c->now, cfg->duration_ns);
      next_progress = c->now + cfg->duration_ns / 20;
    }
    switch (e.type) {
    case SIM__EV_GROUP_DONE:
      rc = sim__gpu_on_group_done(c, e.a);
      break;
    case SIM__EV_ELIGIBLE:
      rc = sim__gpu_on_eligible(c, e.a);
      break;
    case SIM__EV_FLAG:
      rc = sim__gpu_on_flag(c, e.a);
      break;
    case SIM__EV_POL_DONE:
      rc = on_pol_done(c, e.a);
      break;
    case SIM__EV_SUB_DONE:
      rc = on_sub_done(c, e.a);
      break;
    case SIM__EV_HOST:
      rc = host_step(c, e.a);
      break;
    case SIM__EV_TIMER:
      rc = 0;
      if (e.t == c->timer_at) {
        c->timer_at = UINT64_MAX;
        pol_event_t ev = {.type = POL_EV_TIMER};
        rc = pol_feed(c, &ev);
      }
      break;
    default:
      rc = -EINVAL;
      break;
    }
    if (rc < 0)
      goto out;
  }
  rc = c->err;
  if (rc < 0)
    goto out;
  res->end_ns = c->now;
  pol_sched_stats(c->pol, &res->pol);
  if (cfg->profile_path) {
    rc = pol_profiles_save(pol_sched_profiles(c->pol), cfg->profile_path);
    if (rc < 0)
      *why = "cannot write the profile file";
  }
out:
  if (rc < 0 && *why == NULL)
    *why = "simulation failed";
  pol_sched_free(c->pol);
  sim__gpu_fini(c);
  free(c->heap);
  free(c->subs);
  free(st);
  if (rc < 0)
    sim_result_close(res);
  return rc;
}

void sim_result_close(sim_result_t *res) {
  for (uint32_t i = 0; i < SIM_MAX_TENANTS; i++) {
    free(res->t[i].lat_ns);
    free(res->t[i].exec_ns);
    free(res->t[i].waits_ns);
    free(res->t[i].work_buckets);
    res->t[i].work_buckets = NULL;
    res->t[i].nbuckets = 0;
    res->t[i].lat_ns = res->t[i].exec_ns = res->t[i].waits_ns = NULL;
    res->t[i].nlat = res->t[i].nexec = res->t[i].nwaits = 0;
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

uint64_t sim_percentile(uint64_t *v, size_t n, double p) {
  if (n == 0)
    return 0;
  qsort(v, n, sizeof(*v), cmp_u64);
  /* Nearest rank: the smallest value with at least p% of samples <= it. */
  double rank = p / 100.0 * (double)n;
  size_t i = (size_t)rank;
  if ((double)i < rank)
    i++;
  if (i > 0)
    i--;
  if (i >= n)
    i = n - 1;
  return v[i];
}
