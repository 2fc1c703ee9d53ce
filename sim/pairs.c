/* pairs.c: arrivals, raw-CSV readers, statistics and the report of the
 * measured pair benchmark (API and formats in sim/pairs.h).
 *
 * Definitions (also in tests/bench/README.md):
 *  - execution latency = end - start (first launch -> synchronisation
 *    returned); end-to-end = end - arrival (queueing included);
 *  - percentiles are nearest-rank over the completed requests;
 *  - LC throughput = completed / (last end - first arrival); normalised
 *    by the same figure alone;
 *  - BE throughput = iterations per second inside the LC's window [first
 *    arrival, last end), an iteration counting with the fraction of it that
 *    lies in the window; normalised by the BE's rate alone (its own span);
 *  - system throughput = LC normalised + BE normalised (the Tally paper's
 *    sum of normalised throughputs).
 * The readers walk a byte buffer line by line with explicit lengths; a field
 * is at most 20 digits and checked for overflow; nothing is read past len.
 */
#include "sim/pairs.h"
#include "sim/sim-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- arrivals */

static double std_normal(sim_rng_t *r) {
  double u1 = sim_rng_uniform(r), u2 = sim_rng_uniform(r);
  if (u1 < 1e-300)
    u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Gamma(shape, 1): Marsaglia and Tsang (2000); shape < 1 through
 * Gamma(shape + 1) * U^(1/shape). */
static double gamma_draw(sim_rng_t *r, double shape) {
  double boost = 1.0;
  if (shape < 1.0) {
    double u = sim_rng_uniform(r);
    if (u < 1e-300)
      u = 1e-300;
    boost = pow(u, 1.0 / shape);
    shape += 1.0;
  }
  double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
  for (;;) {
    double x = std_normal(r), v = 1.0 + c * x;
    if (v <= 0)
      continue;
    v = v * v * v;
    double u = sim_rng_uniform(r);
    if (u < 1e-300)
      continue;
    if (log(u) < 0.5 * x * x + d - d * v + d * log(v))
      return d * v * boost;
  }
}

int sim_pairs_gamma(sim_arrivals_t *a, sim_rng_t *r, double rate_per_s, double cv,
                    uint64_t duration_ns) {
  memset(a, 0, sizeof(*a));
  if (!(rate_per_s > 0 && rate_per_s <= 1e9) || !(cv > 0.01 && cv <= 100) || duration_ns == 0 ||
      rate_per_s * ((double)duration_ns / 1e9) > 2e8)
    return -EINVAL;
  double shape = 1.0 / (cv * cv), scale = (1e9 / rate_per_s) / shape, t = 0;
  size_t cap = 0;
  for (;;) {
    t += gamma_draw(r, shape) * scale;
    if (t >= (double)duration_ns)
      return 0;
    if (a->n == cap) {
      size_t c = cap ? cap * 2 : 1024;
      uint64_t *p = realloc(a->t_ns, c * sizeof(*p));
      if (!p) {
        sim_arrivals_close(a);
        return -ENOMEM;
      }
      a->t_ns = p;
      cap = c;
    }
    a->t_ns[a->n++] = (uint64_t)t;
  }
}

/* ---------------------------------------------------------------- lines */

#define MAXF 8

typedef struct field {
  const char *p;
  size_t n;
} field_t;

/* Walks text line by line.  next_line() returns false at the end; else the
 * line's fields (at most MAXF kept, *nf counts all). */
typedef struct lines {
  const char *text;
  size_t len, pos, line;
} lines_t;

static bool next_line(lines_t *l, field_t *f, int *nf, bool *skip) {
  if (l->pos >= l->len)
    return false;
  size_t end = l->pos;
  while (end < l->len && l->text[end] != '\n')
    end++;
  size_t stop = end;
  if (stop > l->pos && l->text[stop - 1] == '\r')
    stop--;
  l->line++;
  *skip = stop == l->pos || l->text[l->pos] == '#';
  *nf = 0;
  size_t s = l->pos;
  for (size_t i = l->pos; i <= stop; i++) {
    if (i == stop || l->text[i] == ',') {
      if (*nf < MAXF) {
        f[*nf].p = l->text + s;
        f[*nf].n = i - s;
      }
      (*nf)++;
      s = i + 1;
    }
  }
  l->pos = end + 1;
  return true;
}

static bool parse_u64(const field_t *f, uint64_t *out) {
  uint64_t v = 0;
  if (f->n == 0 || f->n > 20)
    return false;
  for (size_t i = 0; i < f->n; i++) {
    unsigned d = (unsigned char)f->p[i] - '0';
    if (d > 9 || v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

static bool is_header(const field_t *f, int nf, const char *const *names, int k) {
  if (nf != k)
    return false;
  for (int i = 0; i < k; i++)
    if (f[i].n != strlen(names[i]) || memcmp(f[i].p, names[i], f[i].n) != 0)
      return false;
  return true;
}

static int grow(void **v, size_t *cap, size_t n, size_t size) {
  if (n < *cap)
    return 0;
  size_t c = *cap ? *cap * 2 : 256;
  void *p = realloc(*v, c * size);
  if (!p)
    return -ENOMEM;
  *v = p;
  *cap = c;
  return 0;
}

/* The one CSV reader: a header line `names` (k columns), then rows of k
 * fields, at most max_rows; each row goes to row(), which fills dst or
 * refuses the row with a reason.  Errors are "line N: reason". */
typedef struct table {
  const char *const *names;
  int k;
  size_t max_rows, size;
  const char *(*row)(const field_t *f, const char *const *names, void *dst, char *why);
} table_t;

#define WHY_MAX 96 /* room for row()'s reason when it formats one */

static int parse_table(const char *text, size_t len, const table_t *t, void **out, size_t *nout,
                       char *err, size_t errlen) {
  lines_t l = {text, len, 0, 0};
  field_t f[MAXF];
  int nf, rc = 0;
  bool skip, header = false;
  void *v = NULL;
  size_t n = 0, cap = 0;
  while (next_line(&l, f, &nf, &skip)) {
    if (skip)
      continue;
    if (!header) {
      if (!is_header(f, nf, t->names, t->k)) {
        rc = sim__line_err(err, errlen, l.line, "expected the header line %s,%s,...",
                           t->names[0], t->names[1]);
        goto fail;
      }
      header = true;
      continue;
    }
    if (nf != t->k) {
      rc = sim__line_err(err, errlen, l.line, "expected %d comma-separated fields, found %d",
                         t->k, nf);
      goto fail;
    }
    if (n >= t->max_rows) {
      rc = -E2BIG;
      sim__line_err(err, errlen, l.line, "more than %zu rows", t->max_rows);
      goto fail;
    }
    if ((rc = grow(&v, &cap, n, t->size)) < 0)
      goto fail;
    char buf[WHY_MAX];
    const char *why = t->row(f, t->names, (char *)v + n * t->size, buf);
    if (why) {
      rc = sim__line_err(err, errlen, l.line, "%s", why);
      goto fail;
    }
    n++;
  }
  if (!header) {
    rc = sim__line_err(err, errlen, l.line, "no header line");
    goto fail;
  }
  *out = v;
  *nout = n;
  return 0;
fail:
  free(v);
  return rc;
}

/* Fields 0..k-1 as unsigned integers, or the reason one is not. */
static const char *u64_fields(const field_t *f, const char *const *names, int k, uint64_t *v,
                              char *why) {
  for (int i = 0; i < k; i++)
    if (!parse_u64(&f[i], &v[i])) {
      snprintf(why, WHY_MAX, "field %d (%s) is not an unsigned integer", i + 1, names[i]);
      return why;
    }
  return NULL;
}

static const char *lc_row(const field_t *f, const char *const *names, void *dst, char *buf) {
  sim_pairs_req_t *r = dst;
  uint64_t v[4];
  const char *why = u64_fields(f, names, 4, v, buf);
  if (why)
    return why;
  r->arrival_ns = v[1];
  r->start_ns = v[2];
  r->end_ns = v[3];
  if (r->end_ns < r->start_ns)
    return "end_ns before start_ns";
  if (r->end_ns < r->arrival_ns)
    return "end_ns before arrival_ns";
  return NULL;
}

static const char *be_row(const field_t *f, const char *const *names, void *dst, char *buf) {
  sim_pairs_iter_t *it = dst;
  uint64_t v[3];
  const char *why = u64_fields(f, names, 3, v, buf);
  if (why)
    return why;
  it->start_ns = v[1];
  it->end_ns = v[2];
  return it->end_ns < it->start_ns ? "end_ns before start_ns" : NULL;
}

int sim_pairs_lc_parse(const char *text, size_t len, sim_pairs_req_t **out, size_t *n, char *err,
                       size_t errlen) {
  static const char *const names[] = {"req", "arrival_ns", "start_ns", "end_ns"};
  static const table_t t = {names, 4, SIM_PAIRS_MAX_ROWS, sizeof(**out), lc_row};
  return parse_table(text, len, &t, (void **)out, n, err, errlen);
}

int sim_pairs_be_parse(const char *text, size_t len, sim_pairs_iter_t **out, size_t *n, char *err,
                       size_t errlen) {
  static const char *const names[] = {"iter", "start_ns", "end_ns"};
  static const table_t t = {names, 3, SIM_PAIRS_MAX_ROWS, sizeof(**out), be_row};
  return parse_table(text, len, &t, (void **)out, n, err, errlen);
}

/* ---------------------------------------------------------------- manifest */

static bool copy_field(char *dst, const field_t *f) {
  if (f->n >= SIM_PAIRS_FIELD_MAX)
    return false;
  memcpy(dst, f->p, f->n);
  dst[f->n] = '\0';
  if (strcmp(dst, "-") == 0)
    dst[0] = '\0';
  return memchr(f->p, '\0', f->n) == NULL;
}

static const char *manifest_row(const field_t *f, const char *const *names, void *dst,
                                char *why) {
  sim_pairs_entry_t *e = dst;
  (void)names;
  if (!copy_field(e->pair, &f[0]) || !copy_field(e->mode, &f[1]) ||
      !copy_field(e->status, &f[2]) || !copy_field(e->lc_csv, &f[3]) ||
      !copy_field(e->be_csv, &f[4])) {
    snprintf(why, WHY_MAX, "a field is longer than %d bytes or holds NUL",
             SIM_PAIRS_FIELD_MAX - 1);
    return why;
  }
  if (!e->pair[0] || !e->mode[0] || !e->status[0])
    return "empty pair, mode or status";
  return NULL;
}

int sim_pairs_manifest_parse(const char *text, size_t len, sim_pairs_entry_t **out, size_t *nout,
                             char *err, size_t errlen) {
  static const char *const names[] = {"pair", "mode", "status", "lc_csv", "be_csv"};
  static const table_t t = {names, 5, SIM_PAIRS_MAX_ENTRIES, sizeof(**out), manifest_row};
  return parse_table(text, len, &t, (void **)out, nout, err, errlen);
}

/* ---------------------------------------------------------------- statistics */

int sim_pairs_lc_stats(const sim_pairs_req_t *r, size_t n, sim_pairs_lc_stats_t *s) {
  memset(s, 0, sizeof(*s));
  if (n == 0)
    return -EINVAL;
  uint64_t *ex = malloc(n * sizeof(*ex)), *ee = malloc(n * sizeof(*ee));
  if (!ex || !ee) {
    free(ex);
    free(ee);
    return -ENOMEM;
  }
  double sx = 0, se = 0;
  s->first_ns = UINT64_MAX;
  for (size_t i = 0; i < n; i++) {
    ex[i] = r[i].end_ns - r[i].start_ns;
    ee[i] = r[i].end_ns - r[i].arrival_ns;
    sx += (double)ex[i];
    se += (double)ee[i];
    if (r[i].arrival_ns < s->first_ns)
      s->first_ns = r[i].arrival_ns;
    if (r[i].end_ns > s->last_ns)
      s->last_ns = r[i].end_ns;
  }
  s->n = n;
  s->exec_mean_ms = sx / (double)n / 1e6;
  s->e2e_mean_ms = se / (double)n / 1e6;
  s->exec_p50_ms = (double)sim_percentile(ex, n, 50) / 1e6;
  s->exec_p99_ms = (double)sim_percentile(ex, n, 99) / 1e6;
  s->e2e_p50_ms = (double)sim_percentile(ee, n, 50) / 1e6;
  s->e2e_p99_ms = (double)sim_percentile(ee, n, 99) / 1e6;
  double span = (double)(s->last_ns - s->first_ns);
  s->tput_per_s = span > 0 ? (double)n / (span / 1e9) : 0;
  free(ex);
  free(ee);
  return 0;
}

double sim_pairs_be_rate(const sim_pairs_iter_t *it, size_t n, uint64_t from, uint64_t to) {
  if (from == 0 && to == 0 && n > 0) {
    from = UINT64_MAX;
    for (size_t i = 0; i < n; i++) {
      if (it[i].start_ns < from)
        from = it[i].start_ns;
      if (it[i].end_ns > to)
        to = it[i].end_ns;
    }
  }
  if (n == 0 || to <= from)
    return -1;
  double done = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t s = it[i].start_ns > from ? it[i].start_ns : from;
    uint64_t e = it[i].end_ns < to ? it[i].end_ns : to;
    if (e <= s) {
      /* A zero-length iteration inside the window counts whole. */
      if (it[i].start_ns == it[i].end_ns && it[i].start_ns >= from && it[i].start_ns < to)
        done += 1;
      continue;
    }
    done += (double)(e - s) / (double)(it[i].end_ns - it[i].start_ns);
  }
  return done / ((double)(to - from) / 1e9);
}
