/* hops-report.c: where a request's time goes, from the hand-off times that
 * the guest (TALLY_HOPS=FILE, wire/hops.c) and tallyd (--hops FILE,
 * hostd/hops.c) append to their files.
 *
 * usage: hops-report [--last N] [--skip-last N] [--op OP] [--ops] [--gaps] FILE...
 *   Reads G (guest) and D (daemon) lines from every FILE (both sides may
 *   share one), joins each guest call with the daemon's record of it by
 *   tenant name and call id, and prints p50/p99 in microseconds of every
 *   hop: guest call -> in the ring or socket -> read by tallyd's loop ->
 *   taken by the tenant's worker -> handler entered -> handler returned (a
 *   synchronisation returns when the GPU work completed) -> reply handed to
 *   wire -> guest woke.  Posts (daemon side only) get their own rows.
 *   --last N keeps each tenant's last N joined calls (a benchmark's final
 *   phase); --skip-last N leaves them out instead (the phases before it);
 *   --op keeps one op, by call.def number or name (STREAM_SYNC, any case).  --ops
 *   adds, per tenant
 *   and op, how many calls and posts tallyd executed, the handler's
 *   p50/p99/max and the sum of its times, most frequent first: which
 *   requests a framework makes, how many of them are round trips, and
 *   where a tenant's time in tallyd went, one slow call included (daemon
 *   records only, so any host).  Host functions (F lines) get their own
 *   rows: enqueued -> reached (the stream's work before it) -> handed to the
 *   guest -> the guest's host-function thread woke (its HOSTFN_WAIT call's
 *   G line) -> reported done, the function run; left out under --op.
 *   Synchronisations the GPU answered by writing a word (a latency-critical
 *   tenant over shared memory: no call, G lines of id 0) get their own rows,
 *   joined with tallyd's STREAM_MARK post by time: guest sync -> its mark in
 *   the ring -> read by tallyd -> taken by the worker -> handler (the GPU's
 *   write queued) -> the guest saw the word; kept under --op STREAM_SYNC or
 *   STREAM_MARK, --last/--skip-last counting them apart from the calls.
 *   --gaps adds what a tenant's worker spends between two posts of one op
 *   (any op, or --op's) that follow each other closely, a burst's launches:
 *   from one handler's return to the next handler's entry (reading the
 *   next request, its tables, the scheduler's bookkeeping), against the
 *   handler itself (the driver call); pairs more than GAP_MAX_NS apart are
 *   idle time, not counted.  A burst issued by tallyd takes N x (gap +
 *   handler) against N x the application's own launch call natively.
 *   Both sides must share
 *   CLOCK_MONOTONIC, i.e. run on one host (shm, or TCP over loopback).
 *   Exit 0 when at least one call or synchronisation was joined, 1 otherwise,
 *   2 for bad usage.
 */
#include "wire/call.h" /* call_op_name */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strcasecmp */

#define NAME_MAX_ 64

typedef struct rec {
  char name[NAME_MAX_ + 1];
  uint64_t id;
  unsigned op;
  char kind; /* 'c' call, 'p' post (D lines); 'g' for G lines */
  uint64_t t[5];
} rec_t;

typedef struct vec {
  rec_t *v;
  size_t n, cap;
} vec_t;

/* tallyd's hops file names one op that is no request (hostd/hops.c):
 * a shared pinned allocation registered by the tenant's worker. */
#define OP_PINNED_MAP 4294967295u

static const char *op_name(uint32_t op) {
  if (op == OP_PINNED_MAP)
    return "PINNED_MAP";
  return call_op_name(op) ? call_op_name(op) : "?";
}

static int push(vec_t *a, const rec_t *r) {
  if (a->n == a->cap) {
    size_t c = a->cap ? a->cap * 2 : 4096;
    rec_t *v = realloc(a->v, c * sizeof(*v));
    if (!v)
      return -1;
    a->v = v;
    a->cap = c;
  }
  a->v[a->n++] = *r;
  return 0;
}

/* Sorts v's records; an empty v has no array to hand qsort. */
static void sort_recs(vec_t *v, int (*cmp)(const void *, const void *)) {
  if (v->n > 1)
    qsort(v->v, v->n, sizeof(rec_t), cmp);
}

/* The record orders: by tenant, then by one number of each record. */
static int by_name_then(const rec_t *a, const rec_t *b, uint64_t x, uint64_t y) {
  int c = strcmp(a->name, b->name);
  if (c)
    return c;
  return x < y ? -1 : x > y;
}

static int by_key(const void *x, const void *y) {
  const rec_t *a = x, *b = y;
  return by_name_then(a, b, a->id, b->id);
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* Prints one row: p50 and p99 of v[0..n) (ns) in us. */
static void row(const char *label, uint64_t *v, size_t n) {
  if (n == 0) {
    printf("| %s | - | - |\n", label);
    return;
  }
  qsort(v, n, sizeof(*v), cmp_u64);
  printf("| %s | %.2f | %.2f |\n", label, (double)v[(n - 1) / 2] / 1e3,
         (double)v[(size_t)((double)(n - 1) * 0.99 + 0.5)] / 1e3);
}

/* F lines go to fn as kind 'f': id the HOSTFN_WAIT call, t[0..3] enqueued,
 * reached, handed, done (hostd/hops.c), t[4] the function's seq; G lines of
 * id 0 (synchronisations the GPU answered, wire/hops.c) go to ans. */
static int load(const char *path, vec_t *g, vec_t *d, vec_t *fn, vec_t *ans) {
  FILE *f = fopen(path, "r");
  char line[512];
  if (!f) {
    perror(path);
    return -1;
  }
  while (fgets(line, sizeof(line), f)) {
    rec_t r;
    unsigned long long id, t[5];
    char kind;
    memset(&r, 0, sizeof(r));
    if (sscanf(line, "G %64s %llu %llu %llu %llu", r.name, &id, &t[0], &t[1], &t[2]) == 5) {
      r.id = id, r.kind = 'g';
      for (int i = 0; i < 3; i++)
        r.t[i] = t[i];
      if (push(id ? g : ans, &r)) /* id 0: a post answered without a reply */
        break;
    } else if (sscanf(line, "D %64s %llu %u %c %llu %llu %llu %llu %llu", r.name, &id, &r.op,
                      &kind, &t[0], &t[1], &t[2], &t[3], &t[4]) == 9) {
      r.id = id, r.kind = kind;
      for (int i = 0; i < 5; i++)
        r.t[i] = t[i];
      if (push(d, &r))
        break;
    } else if (sscanf(line, "F %64s %llu %llu %llu %llu %llu %llu", r.name, &id, &t[4], &t[0],
                      &t[1], &t[2], &t[3]) == 7) {
      r.id = id, r.kind = 'f';
      for (int i = 0; i < 5; i++)
        r.t[i] = t[i];
      if (push(fn, &r))
        break;
    }
  }
  fclose(f);
  return 0;
}

/* --last N / --skip-last N: whether record j of v (grouped by tenant) is
 * among its tenant's last N (kept, or left out); *end, one past the
 * tenant's last record, is found when j reaches it (start it at 0). */
static int kept(const vec_t *v, size_t j, size_t *end, long last, long skip) {
  if (j >= *end) /* the first record of a tenant: find its last */
    for (*end = j + 1; *end < v->n && !strcmp(v->v[*end].name, v->v[j].name); (*end)++)
      ;
  if (last >= 0 && *end - j > (size_t)last) /* keep the tenant's last N only */
    return 0;
  return skip < 0 || *end - j > (size_t)skip; /* leave the tenant's last N out */
}

/* Differences b - a that are not torn (a, b set and in order). */
static void add(uint64_t *v, size_t *n, uint64_t a, uint64_t b) {
  if (a && b && b >= a)
    v[(*n)++] = b - a;
}

/* A hop from one process to the other: the sender stamps after its send
 * returns, so on a busy machine the receiver may have read the message
 * first; that hop took no time the sender could see, and counts as 0. */
static void add_cross(uint64_t *v, size_t *n, uint64_t a, uint64_t b) {
  if (a && b)
    v[(*n)++] = b >= a ? b - a : 0;
}

/* One --ops row: a tenant's op and kind, how many, handler p50/p99/max and
 * the sum of its handler times (ns; has_t: some record had both stamps). */
typedef struct oprow {
  const char *name;
  unsigned op;
  char kind;
  size_t n;
  int has_t;
  uint64_t p50, p99, max, sum;
} oprow_t;

static int by_op(const void *x, const void *y) {
  const rec_t *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  if (c)
    return c;
  if (a->op != b->op)
    return a->op < b->op ? -1 : 1;
  return a->kind - b->kind;
}

static int by_count(const void *x, const void *y) {
  const oprow_t *a = x, *b = y;
  int c = strcmp(a->name, b->name);
  if (c)
    return c;
  return a->n > b->n ? -1 : a->n < b->n;
}

/* --ops: d sorted by tenant, op and kind here; h is scratch of d->n. */
static void ops_table(vec_t *d, uint64_t *h) {
  oprow_t *rows = malloc((d->n + 1) * sizeof(*rows));
  size_t nr = 0;
  if (!rows)
    return;
  sort_recs(d, by_op);
  for (size_t j = 0; j < d->n;) {
    size_t e = j, k = 0;
    uint64_t sum = 0;
    for (; e < d->n && by_op(&d->v[j], &d->v[e]) == 0; e++)
      add(h, &k, d->v[e].t[2], d->v[e].t[3]);
    qsort(h, k, sizeof(*h), cmp_u64);
    for (size_t i = 0; i < k; i++)
      sum += h[i];
    rows[nr++] = (oprow_t){d->v[j].name, d->v[j].op, d->v[j].kind, e - j, k > 0,
                           k ? h[(k - 1) / 2] : 0,
                           k ? h[(size_t)((double)(k - 1) * 0.99 + 0.5)] : 0,
                           k ? h[k - 1] : 0, sum};
    j = e;
  }
  qsort(rows, nr, sizeof(*rows), by_count);
  printf("\n| tenant | op | call or post | count | handler p50 us | handler p99 us | handler max us "
         "| handler total ms |\n|---|---|---|---:|---:|---:|---:|---:|\n");
  for (size_t r = 0; r < nr; r++) {
    printf("| %s | %s | %s | %zu | ", rows[r].name, op_name(rows[r].op),
           rows[r].kind == 'c' ? "call" : "post", rows[r].n);
    if (rows[r].has_t)
      printf("%.2f | %.2f | %.2f | %.3f |\n", (double)rows[r].p50 / 1e3,
             (double)rows[r].p99 / 1e3, (double)rows[r].max / 1e3, (double)rows[r].sum / 1e6);
    else
      printf("- | - | - | - |\n");
  }
  free(rows);
}

/* Host functions' way back: f's records, joined with the guest's HOSTFN_WAIT
 * calls in g (sorted by key); h[0..4] scratch of f->n, k[0..4] zeroed here. */
static void fn_table(const vec_t *f, const vec_t *g, uint64_t **h, size_t *k) {
  size_t joined = 0;
  for (int i = 0; i < 5; i++)
    k[i] = 0;
  for (size_t j = 0; j < f->n; j++) {
    const rec_t *r = &f->v[j], *c = g->n ? bsearch(r, g->v, g->n, sizeof(rec_t), by_key) : NULL;
    add(h[0], &k[0], r->t[0], r->t[1]);
    add(h[1], &k[1], r->t[1], r->t[2]);
    add(h[4], &k[4], r->t[1], r->t[3]);
    if (!c)
      continue;
    joined++;
    add_cross(h[2], &k[2], r->t[2], c->t[2]);
    add_cross(h[3], &k[3], c->t[2], r->t[3]);
  }
  printf("\n| hop (%zu host functions, %zu joined with the guest's wait) | p50 us | p99 us |\n"
         "|---|---|---|\n", f->n, joined);
  row("enqueued by the worker -> reached (the stream's work before it)", h[0], k[0]);
  row("reached (the driver's callback) -> handed to the guest", h[1], k[1]);
  row("-> the guest's host-function thread woke", h[2], k[2]);
  row("-> reported done (the function ran, the next poll read)", h[3], k[3]);
  row("reached -> done (the stream held for it)", h[4], k[4]);
}

static int by_time(const void *x, const void *y) {
  const rec_t *a = x, *b = y;
  return by_name_then(a, b, a->t[0], b->t[0]);
}

/* Synchronisations the GPU answered through a word: each of ans's records
 * (the guest's sync, its STREAM_MARK post in the ring, the word seen) joined
 * with the first STREAM_MARK post tallyd read from that tenant after the
 * sync began and before its word was seen.  last/skip as for calls; h[0..6]
 * scratch of ans->n, k[0..6] zeroed here.  Returns how many were joined. */
static size_t word_table(vec_t *ans, const vec_t *d, long last, long skip, uint64_t **h,
                         size_t *k) {
  vec_t mk = {0};
  size_t joined = 0, m = 0;
  for (int i = 0; i < 7; i++)
    k[i] = 0;
  for (size_t j = 0; j < d->n; j++)
    if (d->v[j].kind == 'p' && d->v[j].op == CALL_OP_STREAM_MARK && push(&mk, &d->v[j]))
      break;
  sort_recs(&mk, by_time);
  sort_recs(ans, by_time);
  for (size_t j = 0, end = 0; j < ans->n; j++) {
    const rec_t *a = &ans->v[j], *s;
    while (m < mk.n && (strcmp(mk.v[m].name, a->name) < 0 ||
                        (!strcmp(mk.v[m].name, a->name) && mk.v[m].t[0] < a->t[0])))
      m++;
    if (!kept(ans, j, &end, last, skip))
      continue;
    if (m == mk.n || strcmp(mk.v[m].name, a->name) || mk.v[m].t[0] > a->t[2])
      continue;
    s = &mk.v[m++];
    joined++;
    add(h[0], &k[0], a->t[0], a->t[1]);
    add_cross(h[1], &k[1], a->t[1], s->t[0]);
    add(h[2], &k[2], s->t[0], s->t[1]);
    add(h[3], &k[3], s->t[1], s->t[2]);
    add(h[4], &k[4], s->t[2], s->t[3]);
    add_cross(h[5], &k[5], s->t[3], a->t[2]);
    add(h[6], &k[6], a->t[0], a->t[2]);
  }
  printf("\n| hop (%zu synchronisations the GPU answered by a word, %zu joined) | p50 us | p99 us |\n"
         "|---|---|---|\n", ans->n, joined);
  row("guest sync -> STREAM_MARK in the ring", h[0], k[0]);
  row("-> read by tallyd", h[1], k[1]);
  row("-> taken by the tenant's worker", h[2], k[2]);
  row("-> handler entered", h[3], k[3]);
  row("handler (stream fenced, the GPU's write queued)", h[4], k[4]);
  row("-> guest saw the word (the stream's work, then the write)", h[5], k[5]);
  row("total (guest sync -> word seen)", h[6], k[6]);
  free(mk.v);
  return joined;
}

/* --gaps: two posts further apart than this are not one burst. */
#define GAP_MAX_NS 20000u

static int by_entry(const void *x, const void *y) {
  const rec_t *a = x, *b = y;
  return by_name_then(a, b, a->t[2], b->t[2]);
}

/* --gaps: d sorted here by tenant and handler entry; h[0..1] scratch of
 * d->n. */
static void gaps_table(vec_t *d, long op, uint64_t **h) {
  size_t pairs = 0;
  uint64_t sum = 0;
  sort_recs(d, by_entry);
  for (size_t j = 1; j < d->n; j++) {
    const rec_t *a = &d->v[j - 1], *b = &d->v[j];
    if (strcmp(a->name, b->name) != 0 || a->kind != 'p' || b->kind != 'p' || a->op != b->op ||
        (op >= 0 && b->op != (unsigned)op) || (op < 0 && b->op == OP_PINNED_MAP) ||
        !a->t[3] || !b->t[2] || !b->t[3] || b->t[2] < a->t[3] || b->t[3] < b->t[2] ||
        b->t[2] - a->t[3] > GAP_MAX_NS)
      continue;
    h[0][pairs] = b->t[2] - a->t[3];
    h[1][pairs] = b->t[3] - b->t[2];
    sum += h[0][pairs];
    pairs++;
  }
  printf("\n| worker between back-to-back posts (%zu pairs, mean gap %.0f ns) | p50 us | p99 us "
         "|\n|---|---|---|\n",
         pairs, pairs ? (double)sum / (double)pairs : 0.0);
  row("handler returned -> next handler entered", h[0], pairs);
  row("next handler (driver call)", h[1], pairs);
}

/* An op by call.def number or name; -1 when it names none. */
static long op_arg(const char *a) {
  char *end;
  long n = strtol(a, &end, 10);
  if (*a && !*end)
    return n >= 0 && n < CALL_OP_COUNT ? n : -1;
  for (uint32_t o = 0; o < CALL_OP_COUNT; o++)
    if (call_op_name(o) && strcasecmp(call_op_name(o), a) == 0)
      return o;
  return strcasecmp(a, "PINNED_MAP") == 0 ? (long)OP_PINNED_MAP : -1;
}

#define USAGE "usage: hops-report [--last N] [--skip-last N] [--op OP] [--ops] [--gaps] FILE...\n"

int main(int argc, char **argv) {
  vec_t g = {0}, d = {0}, f = {0}, ans = {0};
  long last = -1, skip = -1, op = -1;
  int i, nfiles = 0, ops = 0, gaps = 0;
  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--last") == 0 && i + 1 < argc)
      last = atol(argv[++i]);
    else if (strcmp(argv[i], "--skip-last") == 0 && i + 1 < argc)
      skip = atol(argv[++i]);
    else if (strcmp(argv[i], "--op") == 0 && i + 1 < argc) {
      if ((op = op_arg(argv[++i])) < 0) {
        fprintf(stderr, "hops-report: --op %s: no such op (a call.def number or name)\n", argv[i]);
        return 2;
      }
    } else if (strcmp(argv[i], "--ops") == 0)
      ops = 1;
    else if (strcmp(argv[i], "--gaps") == 0)
      gaps = 1;
    else if (argv[i][0] == '-') {
      fprintf(stderr, USAGE);
      return 2;
    } else if (load(argv[i], &g, &d, &f, &ans) == 0)
      nfiles++;
  }
  if (nfiles == 0) {
    fprintf(stderr, USAGE);
    return 2;
  }
  size_t m = g.n + d.n + f.n + ans.n + 1, k[9] = {0}, joined = 0, posts = 0, words = 0;
  uint64_t *h[9];
  for (i = 0; i < 9; i++)
    if (!(h[i] = malloc(m * sizeof(uint64_t))))
      return 1;
  sort_recs(&d, by_key);
  sort_recs(&g, by_key); /* per tenant, in call order (ids grow) */
  for (size_t j = 0, end = 0; j < g.n; j++) {
    const rec_t *c = &g.v[j], *s;
    if (!kept(&g, j, &end, last, skip))
      continue;
    s = d.n ? bsearch(c, d.v, d.n, sizeof(rec_t), by_key) : NULL;
    if (!s || s->kind != 'c' || (op >= 0 && s->op != (unsigned)op))
      continue;
    joined++;
    add(h[0], &k[0], c->t[0], c->t[1]);
    add_cross(h[1], &k[1], c->t[1], s->t[0]);
    add(h[2], &k[2], s->t[0], s->t[1]);
    add(h[3], &k[3], s->t[1], s->t[2]);
    add(h[4], &k[4], s->t[2], s->t[3]);
    add(h[5], &k[5], s->t[3], s->t[4]);
    add_cross(h[6], &k[6], s->t[4], c->t[2]);
    add(h[7], &k[7], c->t[0], c->t[2]);
  }
  printf("hops: %zu calls joined (%zu guest, %zu daemon records)\n\n", joined, g.n, d.n);
  printf("| hop (calls) | p50 us | p99 us |\n|---|---|---|\n");
  row("guest call -> request in ring/socket (flush, send)", h[0], k[0]);
  row("-> read by tallyd's loop", h[1], k[1]);
  row("-> taken by the tenant's worker", h[2], k[2]);
  row("-> handler entered", h[3], k[3]);
  row("handler (driver call; a sync returns at completion)", h[4], k[4]);
  row("-> reply handed to wire", h[5], k[5]);
  row("-> guest woke with the reply", h[6], k[6]);
  row("total (guest call -> guest woke)", h[7], k[7]);
  for (i = 0; i < 9; i++)
    k[i] = 0;
  for (size_t j = 0; j < d.n; j++) {
    const rec_t *s = &d.v[j];
    if (s->kind != 'p' || (op >= 0 && s->op != (unsigned)op) ||
        (op < 0 && s->op == OP_PINNED_MAP)) /* no post: only when asked for */
      continue;
    posts++;
    add(h[0], &k[0], s->t[0], s->t[1]);
    add(h[1], &k[1], s->t[1], s->t[2]);
    add(h[2], &k[2], s->t[2], s->t[3]);
  }
  printf("\n| hop (%zu posts, daemon side) | p50 us | p99 us |\n|---|---|---|\n", posts);
  row("read by the loop -> taken by the worker", h[0], k[0]);
  row("-> handler entered", h[1], k[1]);
  row("handler (driver call)", h[2], k[2]);
  if (ans.n > 0 && (op < 0 || op == CALL_OP_STREAM_SYNC || op == CALL_OP_STREAM_MARK))
    words = word_table(&ans, &d, last, skip, h, k);
  if (op < 0 && f.n > 0)
    fn_table(&f, &g, h, k);
  if (ops)
    ops_table(&d, h[0]);
  if (gaps)
    gaps_table(&d, op, h);
  for (i = 0; i < 9; i++)
    free(h[i]);
  free(g.v);
  free(d.v);
  free(f.v);
  free(ans.v);
  return joined || words ? 0 : 1;
}
