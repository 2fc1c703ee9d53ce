/* report.c: the comparison as a table, as CSV, and as a PNG through gnuplot.
 *
 * Numbers are printed with fixed precision from doubles computed the same
 * way on every run, so the same seed gives the same bytes (tested in
 * tests/test-sim-determinism.c).  The plot writes its data and a gnuplot
 * script to a private temporary folder, runs gnuplot with an argument vector
 * (no shell, so no quoting of the user's path), and removes the folder.
 */
#include "sim/sim.h"

#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *row_policy(const sim_row_t *r) {
  return r->kind == POL_KIND_COUNT ? "alone" : pol_kind_name(r->kind);
}

void sim_report_table(FILE *f, const sim_row_t *rows, size_t n) {
  const char *last = "";
  fprintf(f, "%-34s %-10s %8s %8s %9s %8s %9s %7s %7s %7s\n", "pair (LC/BE)", "policy", "p50 ms",
          "p99 ms", "p99 vs", "exec p99", "exec p99", "BE tput", "LC tput", "system");
  fprintf(f, "%-34s %-10s %8s %8s %9s %8s %9s %7s %7s %7s\n", "", "", "", "", "alone", "ms",
          "vs alone", "/alone", "/alone", "tput");
  for (size_t i = 0; i < n; i++) {
    const sim_row_t *r = &rows[i];
    bool same = strcmp(last, r->pair) == 0;
    if (r->kind == POL_KIND_COUNT) {
      fprintf(f, "%-34s %-10s %8.3f %8.3f %9s %8.3f %9s %7s %7s %7s\n", same ? "" : r->pair,
              row_policy(r), r->lc_p50_ms, r->lc_p99_ms, "-", r->exec_p99_ms, "-", "-", "1.00",
              "-");
    } else {
      fprintf(f, "%-34s %-10s %8.3f %8.3f %+8.1f%% %8.3f %+8.1f%% %7.2f %7.2f %7.2f\n",
              same ? "" : r->pair, row_policy(r), r->lc_p50_ms, r->lc_p99_ms,
              r->lc_p99_overhead_pct, r->exec_p99_ms, r->exec_p99_overhead_pct, r->be_tput,
              r->lc_tput, r->sys_tput);
    }
    last = r->pair;
  }
  /* FLUSH launches' give-ups, for the rows that had any (none: no lines). */
  for (size_t i = 0; i < n; i++) {
    const sim_row_t *r = &rows[i];
    if (r->flush_given_up == 0)
      continue;
    fprintf(f,
            "FLUSH %s %s: %" PRIu64 " blocks gave up, %" PRIu64
            " redo launches; %.1f%% of the BE's block time was lost\n",
            r->pair, row_policy(r), r->flush_given_up, r->redo_launches,
            r->flush_lost_frac * 100.0);
  }
  /* The LC's context-wide waits (--lc-ctx-wait-every), for the rows that had any. */
  for (size_t i = 0; i < n; i++) {
    const sim_row_t *r = &rows[i];
    if (r->ctx_waits == 0)
      continue;
    fprintf(f, "CTX %s %s: %" PRIu64 " requests began with a context-wide wait, the longest %.3f ms\n",
            r->pair, row_policy(r), r->ctx_waits, r->max_ctx_wait_ms);
  }
}

void sim_report_csv(FILE *f, const sim_row_t *rows, size_t n) {
  fprintf(f, "pair,policy,lc_p50_ms,lc_p99_ms,lc_mean_ms,lc_p99_overhead_pct,lc_tput,be_tput,"
             "sys_tput,exec_p50_ms,exec_p99_ms,exec_p99_overhead_pct\n");
  for (size_t i = 0; i < n; i++) {
    const sim_row_t *r = &rows[i];
    bool alone = r->kind == POL_KIND_COUNT;
    fprintf(f, "%s,%s,%.4f,%.4f,%.4f,%.2f,%.4f,%.4f,%.4f,%.4f,%.4f,%.2f\n", r->pair, row_policy(r),
            r->lc_p50_ms, r->lc_p99_ms, r->lc_mean_ms, alone ? 0.0 : r->lc_p99_overhead_pct,
            r->lc_tput, r->be_tput, r->sys_tput, r->exec_p50_ms, r->exec_p99_ms,
            alone ? 0.0 : r->exec_p99_overhead_pct);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Writes the CDF of r's latencies (at most ~2000 points) to path. */
static int write_cdf(const char *path, const sim_row_t *r) {
  FILE *f = fopen(path, "w");
  if (!f)
    return -errno;
  uint64_t *s = malloc((r->nlat ? r->nlat : 1) * sizeof(*s));
  if (!s) {
    fclose(f);
    return -ENOMEM;
  }
  memcpy(s, r->lat_ns, r->nlat * sizeof(*s));
  qsort(s, r->nlat, sizeof(*s), cmp_u64);
  size_t step = r->nlat / 2000 + 1;
  for (size_t i = 0; i < r->nlat; i += step)
    fprintf(f, "%.6f %.6f\n", (double)s[i] / 1e6, (double)(i + 1) / (double)r->nlat);
  if (r->nlat)
    fprintf(f, "%.6f 1.0\n", (double)s[r->nlat - 1] / 1e6);
  free(s);
  return fclose(f) == 0 ? 0 : -EIO;
}

static int run_gnuplot(const char *script) {
  pid_t pid;
  int status;
  char *argv[] = {"gnuplot", (char *)script, NULL};
  int rc = posix_spawnp(&pid, "gnuplot", NULL, NULL, argv, environ);
  if (rc != 0) {
    if (rc == ENOENT)
      fprintf(stderr, "tally-sim: gnuplot not found; no plot written (apt-get install gnuplot)\n");
    return -rc;
  }
  if (waitpid(pid, &status, 0) < 0)
    return -errno;
  return (WIFEXITED(status) && WEXITSTATUS(status) == 0) ? 0 : -EIO;
}

int sim_report_plot(const char *png_path, const sim_row_t *rows, size_t n) {
  char dir[] = "/tmp/tally-sim-plot-XXXXXX";
  char path[4096];
  int rc = 0;
  size_t npairs = 0;
  if (!mkdtemp(dir))
    return -errno;
  for (size_t i = 0; i < n && rc == 0; i++) {
    snprintf(path, sizeof(path), "%s/cdf%zu.dat", dir, i);
    rc = write_cdf(path, &rows[i]);
    if (i == 0 || strcmp(rows[i].pair, rows[i - 1].pair) != 0)
      npairs++;
  }
  snprintf(path, sizeof(path), "%s/plot.gp", dir);
  FILE *g = rc == 0 ? fopen(path, "w") : NULL;
  if (!g && rc == 0)
    rc = -errno;
  if (g) {
    fprintf(g, "set terminal pngcairo size 1400,%zu font ',10'\n", 420 * npairs);
    fprintf(g, "set output '");
    for (const char *p = png_path; *p; p++) /* gnuplot single quotes: '' is a quote */
      fputs(*p == '\'' ? "''" : (char[]){*p, 0}, g);
    fprintf(g, "'\nset multiplot layout %zu,2\n", npairs);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j < n && strcmp(rows[j].pair, rows[i].pair) == 0)
        j++;
      fprintf(g, "set title 'LC latency CDF: %s (SYNTHETIC traces)' noenhanced\n", rows[i].pair);
      fprintf(g, "set logscale x\nset xlabel 'request latency (ms)'\nset ylabel 'CDF'\n"
                 "set key bottom right\nset yrange [0:1]\nset autoscale x\n");
      fprintf(g, "plot ");
      for (size_t k = i; k < j; k++)
        fprintf(g, "%s'%s/cdf%zu.dat' with lines lw 2 title '%s'", k > i ? ", " : "", dir, k,
                row_policy(&rows[k]));
      fprintf(g, "\nunset logscale x\n");
      fprintf(g, "set title 'Trade-off: %s' noenhanced\n", rows[i].pair);
      fprintf(g, "set logscale x\nset xlabel 'LC p99 latency (ms; alone marked by the line)'\n"
                 "set ylabel 'BE throughput vs alone'\nset yrange [0:1.1]\nset key top right\n");
      fprintf(g, "$pts%zu << EOD\n", i);
      for (size_t k = i; k < j; k++)
        if (rows[k].kind != POL_KIND_COUNT)
          fprintf(g, "%.4f %.4f %s\n", rows[k].lc_p99_ms, rows[k].be_tput, row_policy(&rows[k]));
      fprintf(g, "EOD\nset arrow from %.4f,0 to %.4f,1.1 nohead dt 2\n", rows[i].alone_p99_ms,
              rows[i].alone_p99_ms);
      fprintf(g,
              "plot $pts%zu using 1:2 with points pt 7 ps 1.5 notitle, "
              "'' using 1:2:3 with labels offset 1,1 notitle\nunset arrow\nunset logscale x\n",
              i);
      i = j;
    }
    fprintf(g, "unset multiplot\n");
    if (fclose(g) != 0)
      rc = -EIO;
    if (rc == 0)
      rc = run_gnuplot(path);
  }
  for (size_t i = 0; i < n; i++) {
    snprintf(path, sizeof(path), "%s/cdf%zu.dat", dir, i);
    unlink(path);
  }
  snprintf(path, sizeof(path), "%s/plot.gp", dir);
  unlink(path);
  rmdir(dir);
  return rc;
}
