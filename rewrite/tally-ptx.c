/* tally-ptx.c: the command-line face of rewrite/.
 *
 *   tally-ptx check FILE.ptx        parse, print, re-parse; with ptxas, also
 *                                   compare the SASS of original and printed
 *   tally-ptx transform --slice|--ptb|--flush|--all FILE.ptx [-o OUT]
 *   tally-ptx corpus DIR            every .ptx under DIR: round trip, both
 *                                   transformations, ptxas on each output;
 *                                   prints a table (kernels, transformed per
 *                                   kind, refused per reason, failures)
 *   tally-ptx fatbin ...            the fatbin lister/extractor (cmd-fatbin.c)
 *
 * ptxas is $PTXAS if set, else the one configure found; "none" disables it.
 * ptxas runs once per module for the original, once for the printed text and
 * once for all transformed variants together, never once per kernel, so a
 * corpus of hundreds of kernels takes minutes on two cores.
 * Exit status: 0 all good, 1 a failure (round trip or assembly), 2 usage.
 */
#include "config.h"

#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef TALLY_PTXAS
#define TALLY_PTXAS "ptxas"
#endif

/* The SASS architecture every check assembles for: the H200 we run on.
 * PTX whose .target is an architecture-specific variant of it (sm_90a:
 * wgmma, setmaxnreg) is assembled for that variant instead. */
#define CHECK_ARCH "sm_90"

static void pick_arch(const rw_ptx_module_t *m, char *arch, size_t len) {
  snprintf(arch, len, "%s", CHECK_ARCH);
  for (size_t i = 0; i < m->top.n; i++) {
    const rw__stmt_t *s = m->top.v[i];
    if (s->kind == RW__ST_DIRECTIVE && strcmp(s->name, ".target") == 0 && s->ntoks >= 2) {
      if (strcmp(s->toks[1].text, "sm_90a") == 0)
        snprintf(arch, len, "%s", s->toks[1].text);
      return;
    }
  }
}

static const char *ptxas_path(void) {
  const char *p = getenv("PTXAS");
  if (p == NULL || *p == 0)
    p = TALLY_PTXAS;
  if (strcmp(p, "none") == 0 || strcmp(p, "no") == 0 || access(p, X_OK) != 0)
    return NULL;
  return p;
}

static void usage(FILE *f) {
  fprintf(f, "usage: tally-ptx check FILE.ptx\n"
             "       tally-ptx transform (--slice|--ptb|--flush|--all) FILE.ptx [-o OUT]\n"
             "       tally-ptx corpus [-v] [-j N] [--no-sass] DIR\n"
             "       tally-ptx fatbin [ARGS...]   (see tally-ptx fatbin --help)\n"
             "       tally-ptx --help | --version\n"
             "ptxas: $PTXAS, else the configured one; PTXAS=none skips assembly.\n");
}

static bool want_help(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
      return true;
  return false;
}

/* Round trip of one module's text: 0 ok, 1 failure (msg says why), <0 error. */
static int round_trip(const char *text, size_t len, const char *ptxas, size_t *nentries, char *msg,
                      size_t msglen, bool *orig_bad, char *arch, size_t archlen) {
  rw_ptx_module_t *m = NULL, *m2 = NULL;
  rw_diag_t d = {0};
  char *p1 = NULL, *p2 = NULL, err[2048];
  size_t l1, l2, c1len, c2len;
  void *c1 = NULL, *c2 = NULL;
  int rc;

  *orig_bad = false;
  if ((rc = rw_ptx_parse(text, len, &m, &d)) < 0) {
    rw_diag_format(&d, msg, msglen);
    rc = 1;
    goto out;
  }
  *nentries = rw_ptx_entry_count(m);
  pick_arch(m, arch, archlen);
  if ((rc = rw_ptx_print(m, &p1, &l1)) < 0)
    goto out;
  if ((rc = rw_ptx_parse(p1, l1, &m2, &d)) < 0) {
    char where[300];
    rw_diag_format(&d, where, sizeof(where));
    snprintf(msg, msglen, "printed text does not parse: %s", where);
    rc = 1;
    goto out;
  }
  if ((rc = rw_ptx_print(m2, &p2, &l2)) < 0)
    goto out;
  if (l1 != l2 || memcmp(p1, p2, l1) != 0) {
    snprintf(msg, msglen, "printing is not a fixpoint");
    rc = 1;
    goto out;
  }
  rc = 0;
  if (ptxas == NULL)
    goto out;
  if (rw__ptxas_run(ptxas, arch, text, len, &c1, &c1len, err, sizeof(err)) < 0) {
    *orig_bad = true; /* e.g. PTX for sm_100a: not ours to judge */
    snprintf(msg, msglen, "original does not assemble for %s", arch);
    goto out;
  }
  if (rw__ptxas_run(ptxas, arch, p1, l1, &c2, &c2len, err, sizeof(err)) < 0) {
    snprintf(msg, msglen, "printed text does not assemble: %.400s", err);
    rc = 1;
    goto out;
  }
  rc = rw__cubin_text_cmp(c1, c1len, c2, c2len, err, sizeof(err));
  if (rc != 0)
    snprintf(msg, msglen, "SASS differs: %.200s", err);
  if (rc > 0)
    rc = 1;
out:
  free(c1);
  free(c2);
  free(p1);
  free(p2);
  rw_ptx_free(m);
  rw_ptx_free(m2);
  return rc;
}

static int cmd_check(int argc, char **argv) {
  char *text;
  size_t len, n = 0;
  char msg[1024] = "";
  bool orig_bad;
  char arch[32] = CHECK_ARCH;
  if (argc != 2 || want_help(argc, argv)) {
    usage(argc == 2 ? stdout : stderr);
    return argc == 2 ? 0 : 2;
  }
  int rc = rw__read_file(argv[1], &text, &len);
  if (rc < 0) {
    fprintf(stderr, "tally-ptx: %s: %s\n", argv[1], strerror(-rc));
    return 1;
  }
  const char *ptxas = ptxas_path();
  rc = round_trip(text, len, ptxas, &n, msg, sizeof(msg), &orig_bad, arch, sizeof(arch));
  free(text);
  if (rc < 0) {
    fprintf(stderr, "tally-ptx: %s: %s\n", argv[1], strerror(-rc));
    return 1;
  }
  if (rc > 0) {
    printf("%s: FAIL: %s\n", argv[1], msg);
    return 1;
  }
  printf("%s: ok: %zu entries; printed text re-parses to itself; %s%s%s\n", argv[1], n,
         ptxas == NULL ? "SASS not compared (no ptxas)"
         : orig_bad    ? msg
                       : "SASS identical (",
         ptxas && !orig_bad ? arch : "", ptxas && !orig_bad ? ")" : "");
  return 0;
}

static void print_report(FILE *f, const rw_xform_report_t *r) {
  for (size_t i = 0; i < r->n_entries; i++) {
    const rw_xform_entry_report_t *e = &r->entries[i];
    for (int k = 0; k < RW_XFORM_KIND_COUNT; k++) {
      if (e->status[k] == 1)
        continue;
      if (e->status[k] == 0)
        fprintf(f, "%s: added %s%s\n", e->name, e->name, rw_xform_suffix((rw_xform_kind_t)k));
      else
        fprintf(f, "%s: %s refused (%s): %s\n", e->name, rw_xform_suffix((rw_xform_kind_t)k) + 8,
                rw_refusal_name(e->why[k]), e->reason[k]);
    }
  }
}

static int cmd_transform(int argc, char **argv) {
  unsigned mask = 0;
  const char *in = NULL, *outp = NULL;
  if (want_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--slice") == 0)
      mask |= RW_XFORM_MASK(RW_XFORM_SLICE);
    else if (strcmp(argv[i], "--ptb") == 0)
      mask |= RW_XFORM_MASK(RW_XFORM_PTB);
    else if (strcmp(argv[i], "--flush") == 0)
      mask |= RW_XFORM_MASK(RW_XFORM_FLUSH);
    else if (strcmp(argv[i], "--all") == 0)
      mask |= RW_XFORM_MASK_ALL;
    else if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
      outp = argv[++i];
    else if (in == NULL && argv[i][0] != '-')
      in = argv[i];
    else {
      usage(stderr);
      return 2;
    }
  }
  if (mask == 0 || in == NULL) {
    usage(stderr);
    return 2;
  }
  char *text, *out;
  size_t len, olen;
  rw_xform_report_t r;
  int rc = rw__read_file(in, &text, &len);
  if (rc < 0) {
    fprintf(stderr, "tally-ptx: %s: %s\n", in, strerror(-rc));
    return 1;
  }
  rc = rw_transform_ptx(text, len, mask, &out, &olen, &r);
  free(text);
  if (rc < 0) {
    char where[300];
    rw_diag_format(&r.parse_diag, where, sizeof(where));
    fprintf(stderr, "tally-ptx: %s:%s\n", in, r.parse_status ? where : strerror(-rc));
    rw_xform_report_free(&r);
    return 1;
  }
  print_report(stderr, &r);
  rw_xform_report_free(&r);
  FILE *f = outp ? fopen(outp, "w") : stdout;
  if (f == NULL) {
    fprintf(stderr, "tally-ptx: %s: %s\n", outp, strerror(errno));
    free(out);
    return 1;
  }
  bool ok = fwrite(out, 1, olen, f) == olen;
  if (outp)
    ok = fclose(f) == 0 && ok;
  free(out);
  return ok ? 0 : 1;
}

/* ---- corpus ---- */

/* What a corpus run counts; workers send theirs to the parent as bytes. */
typedef struct counts {
  size_t modules, parse_fail, entries, rt_fail, orig_noasm, asm_fail, asm_ok;
  size_t added[RW_XFORM_KIND_COUNT];
  size_t refused[RW_XFORM_KIND_COUNT][RW_REFUSE_COUNT];
} counts_t;

typedef struct corpus {
  char **paths;
  size_t n, cap;
  bool verbose, sass;
  int jobs; /* worker processes (-j N) */
  const char *ptxas;
  counts_t k;
} corpus_t;

static int collect(corpus_t *c, const char *dir, int depth) {
  DIR *d;
  struct dirent *e;
  /* symlink loops aside, corpora are a few levels deep */
  if (depth > 32)
    return 0;
  if ((d = opendir(dir)) == NULL)
    return -errno;
  while ((e = readdir(d)) != NULL) {
    char path[4096];
    struct stat st;
    if (e->d_name[0] == '.')
      continue;
    if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= (int)sizeof(path))
      continue;
    if (stat(path, &st) < 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      collect(c, path, depth + 1);
      continue;
    }
    size_t l = strlen(e->d_name);
    if (!S_ISREG(st.st_mode) || l < 4 || strcmp(e->d_name + l - 4, ".ptx") != 0)
      continue;
    if (c->n == c->cap) {
      size_t cap = c->cap ? c->cap * 2 : 64;
      char **v = realloc(c->paths, cap * sizeof(*v));
      if (v == NULL)
        break;
      c->paths = v;
      c->cap = cap;
    }
    if ((c->paths[c->n] = strdup(path)) != NULL)
      c->n++;
  }
  closedir(d);
  return 0;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static void corpus_one(corpus_t *c, const char *path) {
  char *text = NULL, *out = NULL, msg[1024] = "", err[4096];
  size_t len, olen, n = 0;
  bool orig_bad = false;
  char arch[32] = CHECK_ARCH;
  rw_xform_report_t r = {0};
  int rc;

  c->k.modules++;
  if ((rc = rw__read_file(path, &text, &len)) < 0) {
    printf("%s: cannot read: %s\n", path, strerror(-rc));
    c->k.parse_fail++;
    return;
  }
  rc = round_trip(text, len, c->sass ? c->ptxas : NULL, &n, msg, sizeof(msg), &orig_bad, arch,
                  sizeof(arch));
  c->k.entries += n;
  if (rc != 0) {
    printf("%s: round trip FAIL: %s\n", path, rc < 0 ? strerror(-rc) : msg);
    if (n == 0)
      c->k.parse_fail++;
    c->k.rt_fail++;
  }
  if (orig_bad)
    c->k.orig_noasm++;
  rc = rw_transform_ptx(text, len, RW_XFORM_MASK_ALL, &out, &olen, &r);
  if (rc < 0)
    goto out;
  bool any = false;
  for (size_t i = 0; i < r.n_entries; i++) {
    for (int k = 0; k < RW_XFORM_KIND_COUNT; k++) {
      const rw_xform_entry_report_t *e = &r.entries[i];
      if (e->status[k] == 0) {
        c->k.added[k]++;
        any = true;
      } else {
        c->k.refused[k][e->why[k]]++;
        if (c->verbose)
          printf("%s: %s: %s refused (%s): %s\n", path, e->name,
                 rw_xform_suffix((rw_xform_kind_t)k) + 8, rw_refusal_name(e->why[k]), e->reason[k]);
      }
    }
  }
  if (any && c->ptxas != NULL && !orig_bad) {
    if (rw__ptxas_run(c->ptxas, arch, out, olen, NULL, NULL, err, sizeof(err)) < 0) {
      printf("%s: transformed module does not assemble: %.600s\n", path, err);
      c->k.asm_fail++;
    } else {
      c->k.asm_ok++;
    }
  }
  if (c->verbose)
    printf("%s: %zu entries ok\n", path, n);
out:
  rw_xform_report_free(&r);
  free(out);
  free(text);
}

static void add_counts(counts_t *a, const counts_t *b) {
  const size_t *src = (const size_t *)b;
  size_t *dst = (size_t *)a;
  for (size_t i = 0; i < sizeof(*a) / sizeof(size_t); i++)
    dst[i] += src[i];
}

/* Runs corpus_one over the paths in c->jobs processes (module i goes to
 * worker i % jobs: ptxas dominates, and modules are many); each worker
 * sends its counts back through a pipe.  Lines are printed whole. */
static int run_workers(corpus_t *c) {
  enum { MAX_JOBS = 64 };
  int fds[MAX_JOBS];
  pid_t pids[MAX_JOBS];
  int jobs = c->jobs < 1 ? 1 : c->jobs > MAX_JOBS ? MAX_JOBS : c->jobs, rc = 0;
  if (jobs == 1) {
    for (size_t i = 0; i < c->n; i++) {
      corpus_one(c, c->paths[i]);
      fflush(stdout);
    }
    return 0;
  }
  fflush(stdout);
  for (int j = 0; j < jobs; j++) {
    int p[2];
    if (pipe(p) < 0)
      return -errno;
    pids[j] = fork();
    if (pids[j] < 0)
      return -errno;
    if (pids[j] == 0) {
      close(p[0]);
      setvbuf(stdout, NULL, _IOLBF, 0);
      memset(&c->k, 0, sizeof(c->k));
      for (size_t i = (size_t)j; i < c->n; i += (size_t)jobs)
        corpus_one(c, c->paths[i]);
      fflush(stdout);
      _exit(write(p[1], &c->k, sizeof(c->k)) == (ssize_t)sizeof(c->k) ? 0 : 1);
    }
    close(p[1]);
    fds[j] = p[0];
  }
  for (int j = 0; j < jobs; j++) {
    counts_t k;
    size_t got = 0;
    while (got < sizeof(k)) {
      ssize_t r = read(fds[j], (char *)&k + got, sizeof(k) - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    close(fds[j]);
    int status;
    while (waitpid(pids[j], &status, 0) < 0 && errno == EINTR)
      ;
    if (got == sizeof(k))
      add_counts(&c->k, &k);
    else
      rc = -EPIPE; /* a worker died: its modules are not counted */
  }
  return rc;
}

static int cmd_corpus(int argc, char **argv) {
  corpus_t c = {.sass = true, .jobs = 1};
  const char *dir = NULL;
  if (want_help(argc, argv)) {
    usage(stdout);
    return 0;
  }
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-v") == 0)
      c.verbose = true;
    else if (strcmp(argv[i], "--no-sass") == 0)
      c.sass = false;
    else if (strcmp(argv[i], "-j") == 0 && i + 1 < argc)
      c.jobs = atoi(argv[++i]);
    else if (dir == NULL && argv[i][0] != '-')
      dir = argv[i];
    else {
      usage(stderr);
      return 2;
    }
  }
  if (dir == NULL) {
    usage(stderr);
    return 2;
  }
  c.ptxas = ptxas_path();
  int rc = collect(&c, dir, 0);
  if (rc < 0) {
    fprintf(stderr, "tally-ptx: %s: %s\n", dir, strerror(-rc));
    return 1;
  }
  qsort(c.paths, c.n, sizeof(*c.paths), cmp_str);
  rc = run_workers(&c);
  for (size_t i = 0; i < c.n; i++)
    free(c.paths[i]);
  free(c.paths);
  if (rc < 0) {
    fprintf(stderr, "tally-ptx: corpus workers: %s\n", strerror(-rc));
    return 1;
  }

  printf("\n| corpus %s | count |\n|---|---:|\n", dir);
  printf("| modules (.ptx files) | %zu |\n", c.k.modules);
  printf("| modules that failed to parse | %zu |\n", c.k.parse_fail);
  printf("| kernels (.entry) | %zu |\n", c.k.entries);
  printf("| round-trip failures (modules%s) | %zu |\n",
         c.sass && c.ptxas ? ", text fixpoint + SASS" : ", text fixpoint only", c.k.rt_fail);
  if (c.ptxas)
    printf("| originals ptxas cannot assemble for %s/%sa (skipped) | %zu |\n", CHECK_ARCH,
           CHECK_ARCH, c.k.orig_noasm);
  for (int k = 0; k < RW_XFORM_KIND_COUNT; k++) {
    const char *kind = rw_xform_suffix((rw_xform_kind_t)k) + 8;
    printf("| transformed: %s | %zu |\n", kind, c.k.added[k]);
    for (int w = 1; w < RW_REFUSE_COUNT; w++)
      if (c.k.refused[k][w])
        printf("| refused %s: %s | %zu |\n", kind, rw_refusal_name((rw_refusal_t)w),
               c.k.refused[k][w]);
  }
  if (c.ptxas)
    printf("| transformed modules assembled by ptxas (%s, or %sa per .target) | %zu ok, %zu "
           "failed |\n",
           CHECK_ARCH, CHECK_ARCH, c.k.asm_ok, c.k.asm_fail);
  else
    printf("| transformed modules assembled | not run (no ptxas) |\n");
  return c.k.parse_fail || c.k.rt_fail || c.k.asm_fail ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (strcmp(argv[1], "--version") == 0) {
    printf("tally-ptx (%s) %s\n", PACKAGE_NAME, PACKAGE_VERSION);
    return 0;
  }
  if (strcmp(argv[1], "check") == 0)
    return cmd_check(argc - 1, argv + 1);
  if (strcmp(argv[1], "transform") == 0)
    return cmd_transform(argc - 1, argv + 1);
  if (strcmp(argv[1], "corpus") == 0)
    return cmd_corpus(argc - 1, argv + 1);
  if (strcmp(argv[1], "fatbin") == 0)
    return rw__cmd_fatbin(argc - 1, argv + 1);
  fprintf(stderr, "tally-ptx: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
