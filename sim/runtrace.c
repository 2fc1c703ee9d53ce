/* runtrace.c: whole-run traces (tallyd --trace): reader, and the split of a
 * tenant's kernels into its requests or training steps.
 *
 * tallyd writes one line per completed launch, in completion order: the
 * kernel fields of trace.c's table, then a comment of key=value words:
 *
 *   KEY      FORM                    MEANING
 *   class    lc | be                 the tenant's class (required)
 *   submit   u64 ns                  tallyd received the launch (required)
 *   start    u64 ns                  the launch started on the GPU (required)
 *   end      u64 ns, >= start        tallyd saw it end (required)
 *   form     original|sliced|ptb     how it ran (optional)
 *   blocks   B+C                     the logical blocks of this launch (optional)
 *   held     0 | 1                   1: the policy issued the submission's first
 *                                    piece in a later scheduler pass than the one
 *                                    that received it (optional)
 *   graph    0 | 1                   1: a CUDA graph launched as one unit (optional)
 *   issue    u64 ns                  tallyd issued it to the driver (optional)
 *
 * A launch tallyd did not time (no start event: LC launches are never
 * profiled) has start == end: tallyd writes start = end - device time with
 * no device time.  Such a line is "untimed": its start - submit is
 * submit -> completion seen, not a launch latency, and its block time (1) is
 * no measurement; sim_runtrace_launch and sim_runtrace_estimate_untimed
 * handle them.
 * All times are tallyd's CLOCK_MONOTONIC, the clock of the pair benchmark's
 * CSVs on the same machine.  Comment-only lines (`# preempt ...`, the
 * header, the turnaround summary, `# kernel 0xID NAME` naming a kernel id)
 * are skipped; `# preempt` ones counted.  tallyd writes a preempted PTB
 * launch's `# preempt` line right before that launch's own line.
 *
 * Invariants after parsing: one record per submission (the slices and PTB
 * launches of one submission, which share tenant, kernel id and submit
 * time, are merged: start is the first's, end the last's, block_ns the sum
 * of theirs, since tallyd divides each piece's time by the waves of the
 * whole grid; timed when any piece is); records sorted by submit time; at
 * most SIM_MAX_TENANTS tenants, each of one class.
 */
#include "sim/sim.h"
#include "sim/sim-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- reader */

typedef struct kv {
  const char *p;
  size_t n;
} kv_t;

/* The value of key in the comment c[0..n) (words separated by blanks). */
static bool comment_get(const char *c, size_t n, const char *key, kv_t *out) {
  size_t kl = strlen(key);
  for (size_t i = 0; i < n;) {
    while (i < n && (c[i] == ' ' || c[i] == '\t' || c[i] == '\r'))
      i++;
    size_t s = i;
    while (i < n && c[i] != ' ' && c[i] != '\t' && c[i] != '\r')
      i++;
    if (i - s > kl && memcmp(c + s, key, kl) == 0 && c[s + kl] == '=') {
      out->p = c + s + kl + 1;
      out->n = i - s - kl - 1;
      return true;
    }
  }
  return false;
}

static bool kv_u64(const kv_t *v, uint64_t *out) {
  uint64_t x = 0;
  if (v->n == 0 || v->n > 20)
    return false;
  for (size_t i = 0; i < v->n; i++) {
    unsigned d = (unsigned)((unsigned char)v->p[i] - '0');
    if (d > 9 || x > (UINT64_MAX - d) / 10)
      return false;
    x = x * 10 + d;
  }
  *out = x;
  return true;
}

static bool kv_is(const kv_t *v, const char *s) {
  return v->n == strlen(s) && memcmp(v->p, s, v->n) == 0;
}

static int tenant_of(sim_runtrace_t *rt, const char *name, pol_class_t cls, size_t line,
                     uint32_t *out, char *err, size_t errlen) {
  for (uint32_t i = 0; i < rt->ntenants; i++) {
    if (strcmp(rt->tenants[i].name, name) != 0)
      continue;
    if (rt->tenants[i].cls != cls)
      return sim__line_err(err, errlen, line, "tenant %s changes class", name);
    *out = i;
    return 0;
  }
  if (rt->ntenants >= SIM_MAX_TENANTS)
    return sim__line_err(err, errlen, line, "more than %d tenants", SIM_MAX_TENANTS);
  snprintf(rt->tenants[rt->ntenants].name, SIM_NAME_MAX, "%s", name);
  rt->tenants[rt->ntenants].cls = cls;
  *out = rt->ntenants++;
  return 0;
}

/* The comment of one kernel line: class, submit, start, end (required). */
static int parse_comment(const char *c, size_t n, size_t line, pol_class_t *cls,
                         sim_run_kernel_t *r, char *err, size_t errlen) {
  static const char *const need[] = {"submit", "start", "end"};
  uint64_t *dst[] = {&r->submit_ns, &r->start_ns, &r->end_ns};
  kv_t v;
  if (!comment_get(c, n, "class", &v))
    return sim__line_err(err, errlen, line,
                         "no '# class=lc|be submit= start= end=' comment: not a whole-run "
                         "trace line (tallyd --trace)");
  if (kv_is(&v, "lc"))
    *cls = POL_CLASS_LC;
  else if (kv_is(&v, "be"))
    *cls = POL_CLASS_BE;
  else
    return sim__line_err(err, errlen, line, "class must be lc or be");
  for (int i = 0; i < 3; i++) {
    if (!comment_get(c, n, need[i], &v))
      return sim__line_err(err, errlen, line, "no %s= in the comment", need[i]);
    if (!kv_u64(&v, dst[i]))
      return sim__line_err(err, errlen, line, "%s= is not an unsigned integer", need[i]);
  }
  if (r->end_ns < r->start_ns)
    return sim__line_err(err, errlen, line, "end= before start=");
  if (comment_get(c, n, "issue", &v) && !kv_u64(&v, &r->issue_ns))
    return sim__line_err(err, errlen, line, "issue= is not an unsigned integer");
  r->timed = r->end_ns > r->start_ns;
  if (comment_get(c, n, "form", &v) && !kv_is(&v, "original") && !kv_is(&v, "sliced") &&
      !kv_is(&v, "ptb"))
    return sim__line_err(err, errlen, line, "form must be original, sliced or ptb");
  static const char *const flags[] = {"held", "graph"};
  for (int i = 0; i < 2; i++)
    if (comment_get(c, n, flags[i], &v) && !kv_is(&v, "0") && !kv_is(&v, "1"))
      return sim__line_err(err, errlen, line, "%s= must be 0 or 1", flags[i]);
  return 0;
}

static int cmp_submission(const void *a, const void *b) {
  const sim_run_kernel_t *x = a, *y = b;
  if (x->submit_ns != y->submit_ns)
    return x->submit_ns < y->submit_ns ? -1 : 1;
  if (x->tenant != y->tenant)
    return x->tenant < y->tenant ? -1 : 1;
  if (x->k.kernel_id != y->k.kernel_id)
    return x->k.kernel_id < y->k.kernel_id ? -1 : 1;
  return x->start_ns < y->start_ns ? -1 : x->start_ns > y->start_ns;
}

/* Merges the pieces of one submission (adjacent after sorting). */
static void merge_pieces(sim_runtrace_t *rt) {
  size_t w = 0;
  for (size_t i = 0; i < rt->n; i++) {
    sim_run_kernel_t *p = w ? &rt->k[w - 1] : NULL, *q = &rt->k[i];
    if (p && p->submit_ns == q->submit_ns && p->tenant == q->tenant &&
        p->k.kernel_id == q->k.kernel_id) {
      if (q->end_ns > p->end_ns)
        p->end_ns = q->end_ns;
      p->k.block_ns += q->k.block_ns;
      p->timed = p->timed || q->timed;
      continue;
    }
    rt->k[w++] = *q;
  }
  rt->n = w;
  for (uint32_t t = 0; t < rt->ntenants; t++)
    rt->tenants[t].kernels = 0;
  rt->untimed = 0;
  for (size_t i = 0; i < rt->n; i++) {
    rt->tenants[rt->k[i].tenant].kernels++;
    rt->untimed += !rt->k[i].timed;
  }
}

/* One line: 0 (a kernel kept), 1 (nothing), or an error. */
static int runtrace_line(sim_runtrace_t *rt, const char *p, size_t n, size_t line, size_t *cap,
                         char *err, size_t errlen) {
  const char *hash = memchr(p, '#', n);
  size_t body = hash ? (size_t)(hash - p) : n;
  char name[SIM_NAME_MAX];
  sim_run_kernel_t r = {0};
  pol_class_t cls = POL_CLASS_LC;
  int rc = sim__trace_line(p, body, line, name, &r.k, err, errlen);
  if (rc == 1) {
    static const char pre[] = "# preempt ";
    if (hash && n - body >= sizeof(pre) - 1 && memcmp(hash, pre, sizeof(pre) - 1) == 0)
      rt->preempts++;
    return 1;
  }
  if (rc < 0)
    return rc;
  rc = parse_comment(hash ? hash + 1 : p + n, hash ? n - body - 1 : 0, line, &cls, &r, err,
                     errlen);
  if (rc < 0 || (rc = tenant_of(rt, name, cls, line, &r.tenant, err, errlen)) < 0)
    return rc;
  if (rt->n >= SIM_TRACE_MAX_KERNELS)
    return sim__line_err(err, errlen, line, "more than %d kernels", SIM_TRACE_MAX_KERNELS);
  if (rt->n == *cap) {
    size_t c = *cap ? *cap * 2 : 1024;
    sim_run_kernel_t *k = realloc(rt->k, c * sizeof(*k));
    if (!k)
      return -ENOMEM;
    rt->k = k;
    *cap = c;
  }
  rt->k[rt->n++] = r;
  rt->pieces++;
  return 0;
}

int sim_runtrace_parse(const char *text, size_t len, sim_runtrace_t *out, char *err,
                       size_t errlen) {
  sim_runtrace_t rt = {0};
  size_t cap = 0, line = 0, pos = 0;
  int rc = 0;
  if (len > SIM_TRACE_MAX_BYTES)
    return sim__line_err(err, errlen, 0, "trace larger than %u bytes", SIM_TRACE_MAX_BYTES);
  while (pos < len) {
    size_t end = pos;
    while (end < len && text[end] != '\n')
      end++;
    rc = runtrace_line(&rt, text + pos, end - pos, ++line, &cap, err, errlen);
    if (rc < 0)
      goto fail;
    pos = end + 1;
  }
  if (rt.n == 0) {
    rc = sim__line_err(err, errlen, line, "no kernels");
    goto fail;
  }
  qsort(rt.k, rt.n, sizeof(*rt.k), cmp_submission);
  merge_pieces(&rt);
  *out = rt;
  return 0;
fail:
  free(rt.k);
  return rc;
}

int sim_runtrace_load(const char *path, sim_runtrace_t *out, char *err, size_t errlen) {
  size_t len;
  char *buf = NULL;
  int rc = sim__read_trace_file(path, &buf, &len, err, errlen);
  if (rc < 0)
    return rc;
  rc = sim_runtrace_parse(buf, len, out, err, errlen);
  free(buf);
  return rc;
}

void sim_runtrace_close(sim_runtrace_t *rt) {
  if (!rt)
    return;
  free(rt->k);
  rt->k = NULL;
  rt->n = 0;
}

/* ---------------------------------------------------------------- launch latency */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Median of the values x(k) over the kernels of class cls (timed or
 * untimed as asked) submitted when every earlier kernel of the class had
 * ended (an idle stream); *n how many.  -ENOMEM. */
typedef uint64_t (*part_fn)(const sim_run_kernel_t *k, bool *ok);

static uint64_t host_part(const sim_run_kernel_t *k, bool *ok) {
  *ok = k->issue_ns >= k->submit_ns && k->issue_ns != 0;
  return *ok ? k->issue_ns - k->submit_ns : 0;
}

static uint64_t driver_part(const sim_run_kernel_t *k, bool *ok) {
  *ok = k->issue_ns != 0 && k->start_ns >= k->issue_ns;
  return *ok ? k->start_ns - k->issue_ns : 0;
}

static uint64_t whole_part(const sim_run_kernel_t *k, bool *ok) {
  *ok = k->start_ns >= k->submit_ns;
  return *ok ? k->start_ns - k->submit_ns : 0;
}

static int idle_median(const sim_runtrace_t *rt, pol_class_t cls, bool timed, part_fn f,
                       uint64_t *med, size_t *n) {
  uint64_t *d = malloc((rt->n ? rt->n : 1) * sizeof(*d)), max_end = 0;
  if (!d)
    return -ENOMEM;
  *n = 0;
  *med = 0;
  for (size_t i = 0; i < rt->n; i++) {
    const sim_run_kernel_t *k = &rt->k[i];
    bool ok;
    if (rt->tenants[k->tenant].cls != cls)
      continue;
    uint64_t x = f(k, &ok);
    if (k->timed == timed && k->submit_ns >= max_end && ok)
      d[(*n)++] = x;
    if (k->end_ns > max_end)
      max_end = k->end_ns;
  }
  if (*n) {
    qsort(d, *n, sizeof(*d), cmp_u64);
    *med = d[(*n - 1) / 2];
  }
  free(d);
  return 0;
}

int sim_runtrace_launch(const sim_runtrace_t *rt, pol_class_t cls, sim_launch_t *out) {
  sim_launch_t l = {0};
  pol_class_t other = cls == POL_CLASS_LC ? POL_CLASS_BE : POL_CLASS_LC;
  int rc;
  for (size_t i = 0; i < rt->n; i++)
    l.untimed += rt->tenants[rt->k[i].tenant].cls == cls && !rt->k[i].timed;
  if ((rc = idle_median(rt, cls, true, whole_part, &l.ns, &l.n)) < 0)
    return rc;
  if (l.n) {
    l.src = SIM_LAUNCH_TIMED;
  } else {
    if ((rc = idle_median(rt, cls, false, host_part, &l.host_ns, &l.n)) < 0 ||
        (rc = idle_median(rt, other, true, driver_part, &l.driver_ns, &l.n_driver)) < 0)
      return rc;
    if (l.n && l.n_driver) {
      l.src = SIM_LAUNCH_HOST_DRIVER;
      l.ns = l.host_ns + l.driver_ns;
    } else {
      l.n = l.n_driver = 0;
      l.host_ns = l.driver_ns = 0;
    }
  }
  *out = l;
  return 0;
}

void sim_launch_describe(const sim_launch_t *l, char *buf, size_t len) {
  switch (l->src) {
  case SIM_LAUNCH_TIMED:
    snprintf(buf, len,
             "launch latency %.1f us (median start - submit of %zu timed launches on an idle "
             "stream; %zu untimed ones not used)",
             (double)l->ns / 1e3, l->n, l->untimed);
    break;
  case SIM_LAUNCH_HOST_DRIVER:
    snprintf(buf, len,
             "launch latency %.1f us = %.1f us tallyd (median issue - submit of %zu untimed "
             "launches: no start event, their start - submit is submit -> completion seen) + "
             "%.1f us driver (median start - issue of %zu timed launches of the other tenant)",
             (double)l->ns / 1e3, (double)l->host_ns / 1e3, l->n, (double)l->driver_ns / 1e3,
             l->n_driver);
    break;
  default:
    snprintf(buf, len,
             "launch latency not measurable (%zu untimed launches and no timed ones, or no "
             "issue= times)",
             l->untimed);
    break;
  }
}

void sim_runtrace_estimate_untimed(sim_runtrace_t *rt, uint64_t driver_ns, uint32_t sm_count) {
  uint64_t prev_end[SIM_MAX_TENANTS] = {0};
  if (sm_count == 0)
    sm_count = 1;
  for (size_t i = 0; i < rt->n; i++) {
    sim_run_kernel_t *k = &rt->k[i];
    uint64_t *pe = &prev_end[k->tenant];
    if (!k->timed) {
      uint64_t from = (k->issue_ns ? k->issue_ns : k->submit_ns) + driver_ns;
      uint64_t blocks = (uint64_t)k->k.grid[0] * k->k.grid[1] * k->k.grid[2];
      uint64_t waves = (blocks + sm_count - 1) / sm_count;
      if (*pe > from)
        from = *pe;
      uint64_t dur = k->end_ns > from ? k->end_ns - from : 0;
      k->k.block_ns = waves && dur / waves ? dur / waves : 1;
    }
    if (k->end_ns > *pe)
      *pe = k->end_ns;
  }
}

/* ---------------------------------------------------------------- split */

typedef struct sig_ref {
  sim_kernel_t *k;
  bool timed;
} sig_ref_t;

/* Sorts kernels by signature (id, grid, block, shmem) then block time. */
static int cmp_sig(const void *a, const void *b) {
  const sim_kernel_t *x = ((const sig_ref_t *)a)->k, *y = ((const sig_ref_t *)b)->k;
  int c = memcmp(x->grid, y->grid, sizeof(x->grid));
  if (x->kernel_id != y->kernel_id)
    return x->kernel_id < y->kernel_id ? -1 : 1;
  if (c == 0)
    c = memcmp(x->block, y->block, sizeof(x->block));
  if (c != 0)
    return c;
  if (x->shmem_bytes != y->shmem_bytes)
    return x->shmem_bytes < y->shmem_bytes ? -1 : 1;
  return x->block_ns < y->block_ns ? -1 : x->block_ns > y->block_ns;
}

static bool same_sig(const sim_kernel_t *x, const sim_kernel_t *y) {
  return x->kernel_id == y->kernel_id && memcmp(x->grid, y->grid, sizeof(x->grid)) == 0 &&
         memcmp(x->block, y->block, sizeof(x->block)) == 0 && x->shmem_bytes == y->shmem_bytes;
}

/* Every launch of one kernel signature gets the signature's 10th-percentile
 * (nearest rank) block time: a run's kernels were timed while the other
 * tenant shared the GPU, and the model adds that sharing itself; the low
 * percentile keeps the runs that were not slowed, without trusting one
 * outlier.  A signature with untimed launches (block times estimated from
 * host times, sim_runtrace_estimate_untimed) gets the median instead: those
 * estimates err both ways (a completion seen late lengthens one launch and
 * shortens the next), and the low end is the early-seen error.
 * timed[i]: the i-th kernel in unit order was timed. */
static int typical_block_times(sim_units_t *u, const bool *timed) {
  size_t n = 0, j = 0;
  for (size_t i = 0; i < u->n; i++)
    n += u->u[i].n;
  sig_ref_t *v = malloc((n ? n : 1) * sizeof(*v));
  if (!v)
    return -ENOMEM;
  for (size_t i = 0; i < u->n; i++)
    for (size_t q = 0; q < u->u[i].n; q++, j++)
      v[j] = (sig_ref_t){&u->u[i].k[q], timed[j]};
  qsort(v, n, sizeof(*v), cmp_sig);
  for (size_t s = 0; s < n;) {
    size_t e = s + 1;
    bool all_timed = v[s].timed;
    for (; e < n && same_sig(v[s].k, v[e].k); e++)
      all_timed = all_timed && v[e].timed;
    /* nearest rank, 0-based: 10th percentile, or the median */
    size_t rank = all_timed ? (e - s) / 10 : (e - s - 1) / 2;
    uint64_t b = v[s + rank].k->block_ns;
    for (size_t i = s; i < e; i++)
      v[i].k->block_ns = b;
    s = e;
  }
  free(v);
  return 0;
}

void sim_units_close(sim_units_t *u) {
  if (!u)
    return;
  for (size_t i = 0; u->u && i < u->n; i++)
    free(u->u[i].k);
  free(u->u);
  free(u->arrival_ns);
  free(u->win_index);
  memset(u, 0, sizeof(*u));
}

/* Appends kernel r to unit `unit` (a new one when unit == u->n). */
static int unit_add(sim_units_t *u, size_t *cap, size_t unit, const sim_runtrace_t *rt,
                    const sim_run_kernel_t *r, uint64_t arrival_ns, uint64_t *last_submit) {
  if (unit == u->n) {
    if (u->n == *cap) {
      size_t c = *cap ? *cap * 2 : 256;
      sim_trace_t *t = realloc(u->u, c * sizeof(*t));
      if (!t)
        return -ENOMEM;
      u->u = t;
      uint64_t *a = realloc(u->arrival_ns, c * sizeof(*a));
      if (!a)
        return -ENOMEM;
      u->arrival_ns = a;
      *cap = c;
    }
    memset(&u->u[u->n], 0, sizeof(u->u[u->n]));
    snprintf(u->u[u->n].name, SIM_NAME_MAX, "%s", rt->tenants[r->tenant].name);
    u->arrival_ns[u->n] = arrival_ns;
    u->n++;
  }
  sim_trace_t *t = &u->u[unit];
  if ((t->n & (t->n - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to double */
    sim_kernel_t *k = realloc(t->k, (t->n ? 2 * t->n : 1) * sizeof(*k));
    if (!k)
      return -ENOMEM;
    t->k = k;
  }
  t->k[t->n] = r->k;
  t->k[t->n].gap_ns = t->n ? r->submit_ns - *last_submit : 0;
  t->n++;
  *last_submit = r->submit_ns;
  return 0;
}

int sim_runtrace_split(const sim_runtrace_t *rt, pol_class_t cls, const sim_span_t *win,
                       size_t nwin, sim_units_t *out, char *err, size_t errlen) {
  sim_units_t u = {0};
  size_t cap = 0, j = 0, cur = SIZE_MAX;
  uint64_t max_end = 0, last_submit = 0;
  bool *timed = NULL;
  size_t ntimed = 0;
  int rc = 0, who = -1;
  const char *cname = cls == POL_CLASS_LC ? "lc" : "be";
  for (uint32_t t = 0; t < rt->ntenants; t++) {
    if (rt->tenants[t].cls != cls)
      continue;
    if (who >= 0) {
      snprintf(err, errlen, "more than one tenant of class %s (%s, %s)", cname,
               rt->tenants[who].name, rt->tenants[t].name);
      return -EINVAL;
    }
    who = (int)t;
  }
  if (who < 0) {
    snprintf(err, errlen, "no kernel of class %s", cname);
    return -ENOENT;
  }
  for (size_t i = 1; i < nwin; i++)
    if (win[i].start_ns < win[i - 1].start_ns || win[i].end_ns < win[i].start_ns) {
      snprintf(err, errlen, "window %zu is out of order or ends before it starts", i + 1);
      return -EINVAL;
    }
  /* Units only grow at the end (windows and submit times both ascend), so
   * the order kernels are added in is the units' order. */
  if (!(timed = malloc((rt->n ? rt->n : 1) * sizeof(*timed)))) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  for (size_t i = 0; i < rt->n; i++) {
    const sim_run_kernel_t *r = &rt->k[i];
    if (r->tenant != (uint32_t)who)
      continue;
    uint64_t arrival = r->submit_ns;
    if (win) {
      while (j < nwin && win[j].end_ns < r->submit_ns)
        j++;
      if (j == nwin || r->submit_ns < win[j].start_ns) {
        u.dropped++;
        continue;
      }
      if (cur == SIZE_MAX || u.win_index[cur] != j) {
        cur = u.n;
        arrival = win[j].arrival_ns;
      }
    } else if (cur == SIZE_MAX || r->submit_ns >= max_end) {
      cur = u.n; /* the host had seen every earlier kernel end: a new unit */
    }
    if (r->end_ns > max_end)
      max_end = r->end_ns;
    size_t n0 = u.n;
    if ((rc = unit_add(&u, &cap, cur, rt, r, arrival, &last_submit)) < 0)
      goto fail;
    timed[ntimed++] = r->timed;
    if (win && u.n > n0) {
      size_t *wi = realloc(u.win_index, u.n * sizeof(*wi));
      if (!wi) {
        rc = -ENOMEM;
        goto fail;
      }
      u.win_index = wi;
      u.win_index[cur] = j;
    }
  }
  if (u.n == 0) {
    snprintf(err, errlen, "no kernel of class %s inside the given windows", cname);
    rc = -ENOENT;
    goto fail;
  }
  if ((rc = typical_block_times(&u, timed)) < 0)
    goto fail;
  free(timed);
  *out = u;
  return 0;
fail:
  if (rc == -ENOMEM)
    snprintf(err, errlen, "out of memory");
  free(timed);
  sim_units_close(&u);
  return rc;
}
