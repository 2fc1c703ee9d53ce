/* pairs-main.c: tally-pairs, the C side of scripts/bench-pairs.
 *
 *   tally-pairs arrivals --kind poisson|bursty|azure --rate R --duration S
 *                        [--seed N] [--cv C] [--azure FILE [--func NAME]]
 *       arrival offsets in ns from 0, one per line (bursty: gamma gaps, CV 2
 *       unless --cv; azure: the CSV's function scaled to rate R)
 *   tally-pairs service LC.csv
 *       the mean execution time of the requests in ns (for the load setting)
 *   tally-pairs report --manifest FILE [--md OUT] [--csv OUT]
 *       the Markdown table and the summary CSV (default: both to stdout)
 * Exit 0, 1 on bad input (message names the file and line), 2 on usage.
 */
#include "sim/pairs.h"
#include "sim/sim-int.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

static int usage(FILE *f, int rc) {
  fprintf(f, "usage: tally-pairs arrivals --kind poisson|bursty|azure --rate R --duration S\n"
             "                            [--seed N] [--cv C] [--azure FILE [--func NAME]]\n"
             "       tally-pairs service LC.csv\n"
             "       tally-pairs report --manifest FILE [--md OUT] [--csv OUT]\n"
             "Formats and metrics: tests/bench/README.md.\n");
  return rc;
}

static char *slurp(const char *path, size_t *len) {
  char *b;
  int rc = sim__read_file(path, 1u << 30, &b, len);
  if (rc < 0) {
    fprintf(stderr, "tally-pairs: %s: %s\n", path,
            rc == -EFBIG ? "larger than 1 GiB" : strerror(-rc));
    return NULL;
  }
  return b;
}

static bool num(const char *s, double *out) {
  char *end;
  errno = 0;
  *out = strtod(s, &end);
  return errno == 0 && end != s && *end == '\0';
}

typedef struct arr_opts {
  const char *kind, *azure, *func;
  double rate, duration, cv;
  uint64_t seed;
} arr_opts_t;

static int gen(const arr_opts_t *o, sim_arrivals_t *a) {
  sim_rng_t r;
  sim_rng_init(&r, o->seed);
  uint64_t dur = (uint64_t)(o->duration * 1e9);
  if (strcmp(o->kind, "poisson") == 0)
    return sim_arrivals_poisson(a, &r, o->rate, dur);
  if (strcmp(o->kind, "bursty") == 0)
    return sim_pairs_gamma(a, &r, o->rate, o->cv, dur);
  if (strcmp(o->kind, "azure") != 0 || !o->azure) {
    fprintf(stderr, "tally-pairs: --kind must be poisson, bursty or azure (with --azure FILE)\n");
    return -EINVAL;
  }
  size_t len;
  char err[200], *text = slurp(o->azure, &len);
  if (!text)
    return -EIO;
  int rc = sim_arrivals_azure(a, text, len, o->func, o->rate, dur, err, sizeof(err));
  free(text);
  if (rc == -EPROTO)
    fprintf(stderr, "tally-pairs: %s: %s\n", o->azure, err);
  return rc;
}

static int cmd_arrivals(int argc, char **argv) {
  static const struct option opts[] = {
      {"kind", 1, 0, 'k'}, {"rate", 1, 0, 'r'},  {"duration", 1, 0, 'd'}, {"seed", 1, 0, 's'},
      {"cv", 1, 0, 'c'},   {"azure", 1, 0, 'a'}, {"func", 1, 0, 'f'},     {0, 0, 0, 0}};
  arr_opts_t o = {"bursty", NULL, NULL, 0, 0, 2.0, 1};
  double seed = 1;
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    bool ok = true;
    switch (c) {
    case 'k': o.kind = optarg; break;
    case 'r': ok = num(optarg, &o.rate); break;
    case 'd': ok = num(optarg, &o.duration); break;
    case 's': ok = num(optarg, &seed) && seed >= 0; break;
    case 'c': ok = num(optarg, &o.cv); break;
    case 'a': o.azure = optarg; break;
    case 'f': o.func = optarg; break;
    default: return usage(stderr, 2);
    }
    if (!ok) {
      fprintf(stderr, "tally-pairs: bad number: %s\n", optarg);
      return 2;
    }
  }
  if (!(o.rate > 0) || !(o.duration > 0) || o.duration > 86400)
    return usage(stderr, 2);
  if (o.azure && strcmp(o.kind, "bursty") == 0)
    o.kind = "azure";
  o.seed = (uint64_t)seed;
  sim_arrivals_t a;
  int rc = gen(&o, &a);
  if (rc < 0) {
    if (rc != -EPROTO && rc != -EIO)
      fprintf(stderr, "tally-pairs: arrivals: %s\n", strerror(-rc));
    return 1;
  }
  for (size_t i = 0; i < a.n; i++)
    printf("%llu\n", (unsigned long long)a.t_ns[i]);
  sim_arrivals_close(&a);
  return fflush(stdout) == 0 ? 0 : 1;
}

static int cmd_service(int argc, char **argv) {
  if (argc != 2)
    return usage(stderr, 2);
  size_t len, n;
  char err[200], *text = slurp(argv[1], &len);
  sim_pairs_req_t *r;
  sim_pairs_lc_stats_t s;
  if (!text)
    return 1;
  int rc = sim_pairs_lc_parse(text, len, &r, &n, err, sizeof(err));
  free(text);
  if (rc < 0) {
    fprintf(stderr, "tally-pairs: %s: %s\n", argv[1], rc == -EPROTO ? err : strerror(-rc));
    return 1;
  }
  rc = sim_pairs_lc_stats(r, n, &s);
  free(r);
  if (rc < 0) {
    fprintf(stderr, "tally-pairs: %s: no completed request\n", argv[1]);
    return 1;
  }
  printf("%.0f\n", s.exec_mean_ms * 1e6);
  return 0;
}

static int write_to(const char *path, int (*w)(FILE *, const sim_pairs_row_t *, size_t),
                    const sim_pairs_row_t *rows, size_t n) {
  FILE *f = path ? fopen(path, "w") : stdout;
  if (!f) {
    fprintf(stderr, "tally-pairs: %s: %s\n", path, strerror(errno));
    return 1;
  }
  int rc = w(f, rows, n);
  if (path && fclose(f) != 0)
    rc = -EIO;
  if (rc < 0)
    fprintf(stderr, "tally-pairs: %s: write error\n", path ? path : "stdout");
  return rc < 0;
}

static int cmd_report(int argc, char **argv) {
  static const struct option opts[] = {
      {"manifest", 1, 0, 'm'}, {"md", 1, 0, 'o'}, {"csv", 1, 0, 'c'}, {0, 0, 0, 0}};
  const char *manifest = NULL, *md = NULL, *csv = NULL;
  int c;
  while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    if (c == 'm')
      manifest = optarg;
    else if (c == 'o')
      md = optarg;
    else if (c == 'c')
      csv = optarg;
    else
      return usage(stderr, 2);
  }
  if (!manifest)
    return usage(stderr, 2);
  size_t len, n;
  char err[200], *text = slurp(manifest, &len);
  sim_pairs_entry_t *e;
  if (!text)
    return 1;
  int rc = sim_pairs_manifest_parse(text, len, &e, &n, err, sizeof(err));
  free(text);
  if (rc < 0) {
    fprintf(stderr, "tally-pairs: %s: %s\n", manifest, rc == -EPROTO ? err : strerror(-rc));
    return 1;
  }
  char *dir = strdup(manifest);
  sim_pairs_row_t *rows = NULL;
  rc = dir ? sim_pairs_rows(e, n, dirname(dir), &rows) : -ENOMEM;
  int out = 1;
  if (rc == 0) {
    out = write_to(md, sim_pairs_report_md, rows, n);
    if (!md && !csv)
      fputc('\n', stdout);
    out |= write_to(csv, sim_pairs_report_csv, rows, n);
  } else {
    fprintf(stderr, "tally-pairs: report: %s\n", strerror(-rc));
  }
  free(rows);
  free(dir);
  free(e);
  return out;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage(stderr, 2);
  if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
    return usage(stdout, 0);
  if (strcmp(argv[1], "--version") == 0) {
    printf("tally-pairs (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
    return 0;
  }
  if (strcmp(argv[1], "arrivals") == 0)
    return cmd_arrivals(argc - 1, argv + 1);
  if (strcmp(argv[1], "service") == 0)
    return cmd_service(argc - 1, argv + 1);
  if (strcmp(argv[1], "report") == 0)
    return cmd_report(argc - 1, argv + 1);
  return usage(stderr, 2);
}
