/* pairs-report.c: rows and tables of the measured pair benchmark.
 *
 * sim_pairs_rows() reads each manifest entry's LC and BE CSVs, computes the
 * entry's statistics and sets its ratios against the pair's native "alone"
 * entry (LC alone and BE alone, run by the harness first), and for tallyd
 * rows against "tallyd-alone:POLICY" of the same policy.  A missing or bad
 * CSV turns that row into "failed: ..." and the others go on.  The writers
 * print one Markdown row / CSV row per entry, in manifest order; a value
 * that does not exist is "-" (Markdown) or empty (CSV).
 */
#include "sim/pairs.h"
#include "sim/sim-int.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define PAIRS_MAX_FILE (1u << 30)

static int read_file(const char *base, const char *name, char **buf, size_t *len) {
  char path[2 * SIM_PAIRS_FIELD_MAX + 2];
  if (name[0] == '/' || !base)
    snprintf(path, sizeof(path), "%s", name);
  else
    snprintf(path, sizeof(path), "%s/%s", base, name);
  return sim__read_file(path, PAIRS_MAX_FILE, buf, len);
}

static void fail_row(sim_pairs_row_t *r, const char *file, const char *why) {
  snprintf(r->status, sizeof(r->status), "failed: %.100s: %.120s", file, why);
}

static bool load_lc(sim_pairs_row_t *r, const char *base) {
  char *buf, err[160];
  size_t len, n;
  sim_pairs_req_t *req;
  int rc = read_file(base, r->e->lc_csv, &buf, &len);
  if (rc < 0) {
    fail_row(r, r->e->lc_csv, strerror(-rc));
    return false;
  }
  rc = sim_pairs_lc_parse(buf, len, &req, &n, err, sizeof(err));
  free(buf);
  if (rc < 0) {
    fail_row(r, r->e->lc_csv, rc == -EPROTO ? err : strerror(-rc));
    return false;
  }
  rc = sim_pairs_lc_stats(req, n, &r->lc);
  free(req);
  if (rc < 0) {
    fail_row(r, r->e->lc_csv, rc == -EINVAL ? "no completed request" : strerror(-rc));
    return false;
  }
  r->have_lc = true;
  return true;
}

/* BE rate in the LC's window when the row has an LC, else over its span. */
static bool load_be(sim_pairs_row_t *r, const char *base) {
  char *buf, err[160];
  size_t len, n;
  sim_pairs_iter_t *it;
  int rc = read_file(base, r->e->be_csv, &buf, &len);
  if (rc < 0) {
    fail_row(r, r->e->be_csv, strerror(-rc));
    return false;
  }
  rc = sim_pairs_be_parse(buf, len, &it, &n, err, sizeof(err));
  free(buf);
  if (rc < 0) {
    fail_row(r, r->e->be_csv, rc == -EPROTO ? err : strerror(-rc));
    return false;
  }
  bool alone = strcmp(r->e->mode, "alone") == 0 || strncmp(r->e->mode, "tallyd-alone", 12) == 0;
  if (r->have_lc && !alone)
    r->be_rate = sim_pairs_be_rate(it, n, r->lc.first_ns, r->lc.last_ns);
  else
    r->be_rate = sim_pairs_be_rate(it, n, 0, 0);
  free(it);
  if (r->be_rate < 0) {
    r->be_rate = 0; /* no iteration at all: the BE made no progress */
    if (!r->have_lc && n == 0) {
      fail_row(r, r->e->be_csv, "no iteration");
      return false;
    }
  }
  r->have_be = true;
  return true;
}

static const sim_pairs_row_t *find(const sim_pairs_row_t *rows, size_t n, const char *pair,
                                   const char *mode) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(rows[i].e->pair, pair) == 0 && strcmp(rows[i].e->mode, mode) == 0)
      return &rows[i];
  return NULL;
}

static double ratio(double v, double ref) { return ref > 0 ? v / ref : NAN; }

/* The tallyd-alone mode of a tallyd row's policy, or "" when it has none. */
static void tallyd_ref(const char *mode, char *out, size_t len) {
  const char *colon = strchr(mode, ':');
  out[0] = '\0';
  if (colon && strncmp(mode, "tallyd", 6) == 0 && strncmp(mode, "tallyd-alone", 12) != 0)
    snprintf(out, len, "tallyd-alone%s", colon);
}

static void set_ratios(sim_pairs_row_t *r, const sim_pairs_row_t *rows, size_t n) {
  const sim_pairs_row_t *a = find(rows, n, r->e->pair, "alone");
  bool la = a && a->have_lc && r->have_lc, ba = a && a->have_be && r->have_be;
  r->exec_p50_ratio = la ? ratio(r->lc.exec_p50_ms, a->lc.exec_p50_ms) : NAN;
  r->exec_p99_ratio = la ? ratio(r->lc.exec_p99_ms, a->lc.exec_p99_ms) : NAN;
  r->e2e_p99_ratio = la ? ratio(r->lc.e2e_p99_ms, a->lc.e2e_p99_ms) : NAN;
  r->lc_tput = la ? ratio(r->lc.tput_per_s, a->lc.tput_per_s) : NAN;
  r->be_tput = ba ? ratio(r->be_rate, a->be_rate) : NAN;
  bool pair = strcmp(r->e->mode, "alone") != 0 && strncmp(r->e->mode, "tallyd-alone", 12) != 0;
  r->sys_tput = pair && !isnan(r->lc_tput) && !isnan(r->be_tput) ? r->lc_tput + r->be_tput : NAN;
  char ref[SIM_PAIRS_FIELD_MAX + 16];
  tallyd_ref(r->e->mode, ref, sizeof(ref));
  const sim_pairs_row_t *t = ref[0] ? find(rows, n, r->e->pair, ref) : NULL;
  r->exec_p99_vs_tallyd_alone =
      t && t->have_lc && r->have_lc ? ratio(r->lc.exec_p99_ms, t->lc.exec_p99_ms) : NAN;
}

int sim_pairs_rows(const sim_pairs_entry_t *e, size_t n, const char *base, sim_pairs_row_t **out) {
  sim_pairs_row_t *rows = calloc(n ? n : 1, sizeof(*rows));
  if (!rows)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    sim_pairs_row_t *r = &rows[i];
    r->e = &e[i];
    snprintf(r->status, sizeof(r->status), "%s", e[i].status);
    if (strcmp(e[i].status, "ok") != 0)
      continue;
    if (e[i].lc_csv[0] && !load_lc(r, base))
      continue;
    if (e[i].be_csv[0])
      load_be(r, base);
  }
  for (size_t i = 0; i < n; i++)
    set_ratios(&rows[i], rows, n);
  *out = rows;
  return 0;
}

/* ---------------------------------------------------------------- writers */

static void fmt_ms(char *b, size_t n, bool have, double v) {
  if (have)
    snprintf(b, n, "%.3f", v);
  else
    snprintf(b, n, "-");
}

/* A ratio r as an overhead: +137% for 2.37. */
static void fmt_pct(char *b, size_t n, double r) {
  if (isnan(r))
    snprintf(b, n, "-");
  else
    snprintf(b, n, "%+.0f%%", (r - 1.0) * 100.0);
}

static void fmt_x(char *b, size_t n, double r) {
  if (isnan(r))
    snprintf(b, n, "-");
  else
    snprintf(b, n, "%.2f", r);
}

/* Markdown must not see a '|' inside a cell. */
static void cell(FILE *f, const char *s) {
  for (; *s; s++)
    fputc(*s == '|' ? '/' : *s, f);
}

int sim_pairs_report_md(FILE *f, const sim_pairs_row_t *rows, size_t n) {
  fprintf(f, "| pair | mode | LC exec p50 ms | LC exec p99 ms | exec p99 vs alone | "
             "LC e2e p99 ms | e2e p99 vs alone | exec p99 vs tallyd alone | LC tput kept | "
             "BE tput (norm.) | system tput | status |\n");
  fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  for (size_t i = 0; i < n; i++) {
    const sim_pairs_row_t *r = &rows[i];
    char p50[32], p99[32], o99[32], e99[32], oe[32], ot[32], lt[32], bt[32], st[32];
    fmt_ms(p50, sizeof(p50), r->have_lc, r->lc.exec_p50_ms);
    fmt_ms(p99, sizeof(p99), r->have_lc, r->lc.exec_p99_ms);
    fmt_pct(o99, sizeof(o99), r->exec_p99_ratio);
    fmt_ms(e99, sizeof(e99), r->have_lc, r->lc.e2e_p99_ms);
    fmt_pct(oe, sizeof(oe), r->e2e_p99_ratio);
    fmt_pct(ot, sizeof(ot), r->exec_p99_vs_tallyd_alone);
    fmt_x(lt, sizeof(lt), r->lc_tput);
    fmt_x(bt, sizeof(bt), r->be_tput);
    fmt_x(st, sizeof(st), r->sys_tput);
    fputs("| ", f);
    cell(f, r->e->pair);
    fputs(" | ", f);
    cell(f, r->e->mode);
    fprintf(f, " | %s | %s | %s | %s | %s | %s | %s | %s | %s | ", p50, p99, o99, e99, oe, ot, lt,
            bt, st);
    cell(f, r->status);
    fputs(" |\n", f);
  }
  return ferror(f) ? -EIO : 0;
}

static void csv_num(FILE *f, bool have, double v) {
  if (have && !isnan(v))
    fprintf(f, ",%.6g", v);
  else
    fputs(",", f);
}

/* CSV must not see a ',' or a newline inside a field. */
static void csv_text(FILE *f, const char *s) {
  for (; *s; s++)
    fputc(*s == ',' ? ';' : *s == '\n' ? ' ' : *s, f);
}

int sim_pairs_report_csv(FILE *f, const sim_pairs_row_t *rows, size_t n) {
  fprintf(f, "pair,mode,status,requests,exec_p50_ms,exec_p99_ms,exec_mean_ms,e2e_p50_ms,"
             "e2e_p99_ms,lc_tput_per_s,be_iters_per_s,exec_p50_vs_alone,exec_p99_vs_alone,"
             "e2e_p99_vs_alone,exec_p99_vs_tallyd_alone,lc_tput_norm,be_tput_norm,"
             "system_tput\n");
  for (size_t i = 0; i < n; i++) {
    const sim_pairs_row_t *r = &rows[i];
    csv_text(f, r->e->pair);
    fputc(',', f);
    csv_text(f, r->e->mode);
    fputc(',', f);
    csv_text(f, r->status);
    if (r->have_lc)
      fprintf(f, ",%zu", r->lc.n);
    else
      fputs(",", f);
    csv_num(f, r->have_lc, r->lc.exec_p50_ms);
    csv_num(f, r->have_lc, r->lc.exec_p99_ms);
    csv_num(f, r->have_lc, r->lc.exec_mean_ms);
    csv_num(f, r->have_lc, r->lc.e2e_p50_ms);
    csv_num(f, r->have_lc, r->lc.e2e_p99_ms);
    csv_num(f, r->have_lc, r->lc.tput_per_s);
    csv_num(f, r->have_be, r->be_rate);
    csv_num(f, true, r->exec_p50_ratio);
    csv_num(f, true, r->exec_p99_ratio);
    csv_num(f, true, r->e2e_p99_ratio);
    csv_num(f, true, r->exec_p99_vs_tallyd_alone);
    csv_num(f, true, r->lc_tput);
    csv_num(f, true, r->be_tput);
    csv_num(f, true, r->sys_tput);
    fputc('\n', f);
  }
  return ferror(f) ? -EIO : 0;
}
