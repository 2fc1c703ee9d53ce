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
 *   issue    u64 ns                  tallyd issued it (optional, not used)
 *
 * All times are tallyd's CLOCK_MONOTONIC, the clock of the pair benchmark's
 * CSVs on the same machine.  Comment-only lines (`# preempt ...`, the
 * header, the turnaround summary) are skipped; `# preempt` ones counted.
 *
 * Invariants after parsing: one record per submission (the slices and PTB
 * launches of one submission, which share tenant, kernel id and submit
 * time, are merged: start is the first's, end the last's, block_ns the sum
 * of theirs, since tallyd divides each piece's time by the waves of the
 * whole grid); records sorted by submit time; at most SIM_MAX_TENANTS
 * tenants, each of one class.
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
  if (comment_get(c, n, "form", &v) && !kv_is(&v, "original") && !kv_is(&v, "sliced") &&
      !kv_is(&v, "ptb"))
    return sim__line_err(err, errlen, line, "form must be original, sliced or ptb");
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
      continue;
    }
    rt->k[w++] = *q;
  }
  rt->n = w;
  for (uint32_t t = 0; t < rt->ntenants; t++)
    rt->tenants[t].kernels = 0;
  for (size_t i = 0; i < rt->n; i++)
    rt->tenants[rt->k[i].tenant].kernels++;
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

uint64_t sim_runtrace_launch_ns(const sim_runtrace_t *rt, pol_class_t cls) {
  uint64_t *d = malloc((rt->n ? rt->n : 1) * sizeof(*d)), max_end = 0, med = 0;
  size_t n = 0;
  if (!d)
    return 0;
  for (size_t i = 0; i < rt->n; i++) {
    const sim_run_kernel_t *k = &rt->k[i];
    if (rt->tenants[k->tenant].cls != cls)
      continue;
    if (k->submit_ns >= max_end && k->start_ns >= k->submit_ns)
      d[n++] = k->start_ns - k->submit_ns;
    if (k->end_ns > max_end)
      max_end = k->end_ns;
  }
  if (n) {
    qsort(d, n, sizeof(*d), cmp_u64);
    med = d[(n - 1) / 2];
  }
  free(d);
  return med;
}

/* ---------------------------------------------------------------- split */

/* Sorts kernels by signature (id, grid, block, shmem) then block time. */
static int cmp_sig(const void *a, const void *b) {
  const sim_kernel_t *x = *(sim_kernel_t *const *)a, *y = *(sim_kernel_t *const *)b;
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
 * outlier. */
static int typical_block_times(sim_units_t *u) {
  size_t n = 0, j = 0;
  for (size_t i = 0; i < u->n; i++)
    n += u->u[i].n;
  sim_kernel_t **v = malloc((n ? n : 1) * sizeof(*v));
  if (!v)
    return -ENOMEM;
  for (size_t i = 0; i < u->n; i++)
    for (size_t q = 0; q < u->u[i].n; q++)
      v[j++] = &u->u[i].k[q];
  qsort(v, n, sizeof(*v), cmp_sig);
  for (size_t s = 0; s < n;) {
    size_t e = s + 1;
    while (e < n && same_sig(v[s], v[e]))
      e++;
    size_t rank = (e - s) / 10; /* 10th percentile, nearest rank (0-based) */
    uint64_t b = v[s + rank]->block_ns;
    for (size_t i = s; i < e; i++)
      v[i]->block_ns = b;
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
  if ((rc = typical_block_times(&u)) < 0)
    goto fail;
  *out = u;
  return 0;
fail:
  if (rc == -ENOMEM)
    snprintf(err, errlen, "out of memory");
  sim_units_close(&u);
  return rc;
}
