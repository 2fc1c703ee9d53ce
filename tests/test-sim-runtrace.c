/* test-sim-runtrace.c: whole-run traces (tallyd --trace) in the simulator.
 *
 * A synthetic run written the way tallyd writes it (completion order, one
 * line per launch, a sliced submission in two lines, `# preempt` and
 * header comments): N LC requests of K kernels and a BE loop of S steps of
 * 3 kernels.  Cut by the synchronisation rule and by the measured CSV
 * windows it gives N requests and S steps with the right kernels, gaps and
 * block times; the measured arrivals come back as offsets; with the LC's
 * lines untimed (as tallyd writes LC launches) the launch latency and the
 * LC's block times come from host times instead; malformed lines
 * are refused with their line number; the simulation runs on the result.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sim/sim.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_REQ   25
#define K_LC    4
#define N_STEPS 40
#define T0      1000000000ull

typedef struct rec {
  uint64_t end;
  char line[320];
} rec_t;

typedef struct run {
  rec_t r[N_REQ * K_LC + N_STEPS * 4];
  size_t n;
  char lc_csv[8192], be_csv[8192];
} run_t;

/* true: the LC lines are written as tallyd writes a launch it did not time
 * (no start event): start = end, block time 1. */
static bool g_untimed;

static int cmp_rec(const void *a, const void *b) {
  const rec_t *x = a, *y = b;
  return x->end < y->end ? -1 : x->end > y->end;
}

static void add(run_t *u, uint64_t end, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(u->r[u->n].line, sizeof(u->r[u->n].line), fmt, ap);
  va_end(ap);
  u->r[u->n++].end = end;
}

/* LC request i arrives at T0 + i ms (+ 0.1 ms every third), its K kernels
 * are submitted 2 us apart and run 30 us each back to back.  BE step j:
 * 3 kernels of 400 us (the second sliced in two launches), the next step
 * 10 us after the last ends. */
static char *make_run(run_t *u, size_t *len) {
  size_t lo = 0, bo = 0;
  lo += (size_t)snprintf(u->lc_csv + lo, sizeof(u->lc_csv) - lo, "req,arrival_ns,start_ns,end_ns\n");
  for (int i = 0; i < N_REQ; i++) {
    uint64_t arr = T0 + (uint64_t)i * 1000000 + (uint64_t)(i % 3) * 100000, s = arr + 5000,
             end = s + 8000;
    for (int k = 0; k < K_LC; k++) {
      uint64_t sub = s + 2000ull * (uint64_t)k, st = sub + 6000 > end ? sub + 6000 : end;
      end = st + 30000;
      add(u, end,
          "lc 0x%x 132,1,1 256,1,1 0 0 %d %d osp # class=lc form=original blocks=0+132 "
          "submit=%" PRIu64 " issue=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64,
          0x100 + k, g_untimed ? 1 : k == 2 && i == 7 ? 90000 : 30000, k ? 2000 : 0, sub,
          sub + 500, g_untimed ? end : st, end);
    }
    lo += (size_t)snprintf(u->lc_csv + lo, sizeof(u->lc_csv) - lo,
                           "%d,%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n", i, arr, s, end + 4000);
  }
  bo += (size_t)snprintf(u->be_csv + bo, sizeof(u->be_csv) - bo, "iter,start_ns,end_ns\n");
  uint64_t t = T0 - 2000000;
  for (int j = 0; j < N_STEPS; j++) {
    uint64_t s = t, end = s;
    for (int k = 0; k < 3; k++) {
      uint64_t sub = s + 1000ull * (uint64_t)k, st = sub + 5000 > end ? sub + 5000 : end;
      end = st + 400000;
      if (k == 1) {
        add(u, st + 150000,
            "be 0x201 264,1,1 128,1,1 0 0 150000 1000 os # class=be form=sliced "
            "blocks=0+132 submit=%" PRIu64 " issue=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64,
            sub, sub, st, st + 150000);
        add(u, end,
            "be 0x201 264,1,1 128,1,1 0 0 250000 1000 os # class=be form=sliced "
            "blocks=132+132 submit=%" PRIu64 " issue=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64,
            sub, sub, st + 150000, end);
      } else {
        add(u, end,
            "be 0x%x 264,1,1 128,1,1 0 0 400000 %d os # class=be form=original blocks=0+264 "
            "submit=%" PRIu64 " issue=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64,
            0x200 + k, k ? 1000 : 0, sub, sub, st, end);
      }
    }
    bo += (size_t)snprintf(u->be_csv + bo, sizeof(u->be_csv) - bo,
                           "%d,%" PRIu64 ",%" PRIu64 "\n", j, s, end + 3000);
    t = end + 10000;
  }
  qsort(u->r, u->n, sizeof(u->r[0]), cmp_rec);
  size_t cap = u->n * 330 + 512, o = 0;
  char *text = malloc(cap);
  assert_non_null(text);
  o += (size_t)snprintf(text, cap, "# tallyd kernel trace (tally-sim format), policy tally\n");
  for (size_t i = 0; i < u->n; i++) {
    o += (size_t)snprintf(text + o, cap - o, "%s\n", u->r[i].line);
    if (i == 10)
      o += (size_t)snprintf(text + o, cap - o,
                            "# preempt tenant=be launch=7 blocks_done=10/264 turnaround_ns=1\n");
  }
  o += (size_t)snprintf(text + o, cap - o, "# preemption turnaround: n=1 p50_ns=1\n");
  *len = o;
  return text;
}

static void parse_merges_pieces_and_sorts(void **state) {
  (void)state;
  static run_t u;
  size_t len;
  char *text = make_run(&u, &len), err[200];
  sim_runtrace_t rt;
  assert_int_equal(sim_runtrace_parse(text, len, &rt, err, sizeof(err)), 0);
  assert_int_equal(rt.ntenants, 2);
  assert_int_equal(rt.pieces, N_REQ * K_LC + N_STEPS * 4);
  assert_int_equal(rt.n, N_REQ * K_LC + N_STEPS * 3); /* the slices merged */
  assert_int_equal(rt.preempts, 1);
  for (size_t i = 1; i < rt.n; i++)
    assert_true(rt.k[i].submit_ns >= rt.k[i - 1].submit_ns);
  for (size_t i = 0; i < rt.n; i++)
    if (rt.k[i].k.kernel_id == 0x201)
      assert_int_equal(rt.k[i].k.block_ns, 400000); /* 150 us + 250 us */
  sim_runtrace_close(&rt);
  free(text);
}

static void check_units(const sim_units_t *lc, const sim_units_t *be) {
  assert_int_equal(lc->n, N_REQ);
  assert_int_equal(be->n, N_STEPS);
  for (size_t i = 0; i < lc->n; i++) {
    assert_int_equal(lc->u[i].n, K_LC);
    assert_string_equal(lc->u[i].name, "lc");
    assert_int_equal(lc->u[i].k[0].gap_ns, 0);
    assert_int_equal(lc->u[i].k[1].gap_ns, 2000);
    /* One slow run (request 7, kernel 2) does not set the kernel's time. */
    assert_int_equal(lc->u[i].k[2].block_ns, 30000);
  }
  for (size_t i = 0; i < be->n; i++) {
    assert_int_equal(be->u[i].n, 3);
    assert_int_equal(be->u[i].k[1].kernel_id, 0x201);
    assert_int_equal(be->u[i].k[1].block_ns, 400000);
  }
}

static void split_by_synchronisation(void **state) {
  (void)state;
  static run_t u;
  size_t len;
  char *text = make_run(&u, &len), err[200];
  sim_runtrace_t rt;
  sim_units_t lc, be;
  assert_int_equal(sim_runtrace_parse(text, len, &rt, err, sizeof(err)), 0);
  assert_int_equal(sim_runtrace_split(&rt, POL_CLASS_LC, NULL, 0, &lc, err, sizeof(err)), 0);
  assert_int_equal(sim_runtrace_split(&rt, POL_CLASS_BE, NULL, 0, &be, err, sizeof(err)), 0);
  check_units(&lc, &be);
  assert_null(lc.win_index);
  assert_int_equal(lc.dropped, 0);
  /* Without windows a request's arrival is its first submit. */
  assert_int_equal(lc.arrival_ns[1], T0 + 1000000 + 100000 + 5000);
  sim_launch_t l;
  assert_int_equal(sim_runtrace_launch(&rt, POL_CLASS_LC, &l), 0);
  assert_int_equal(l.src, SIM_LAUNCH_TIMED);
  assert_int_equal(l.ns, 8000);
  assert_int_equal(l.untimed, 0);
  sim_units_close(&lc);
  sim_units_close(&be);
  sim_runtrace_close(&rt);
  free(text);
}

static void write_file(const char *path, const char *text, size_t len) {
  if (len == 0)
    len = strlen(text);
  FILE *f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
}

static void wholerun_uses_the_measured_rows(void **state) {
  (void)state;
  static run_t u;
  size_t len;
  char *text = make_run(&u, &len), err[300];
  char dir[] = "/tmp/test-sim-runtrace-XXXXXX", tr[64], lcp[64], bep[64];
  assert_non_null(mkdtemp(dir));
  snprintf(tr, sizeof(tr), "%s/run.ktr", dir);
  snprintf(lcp, sizeof(lcp), "%s/lc.csv", dir);
  snprintf(bep, sizeof(bep), "%s/be.csv", dir);
  write_file(tr, text, len);
  write_file(lcp, u.lc_csv, strlen(u.lc_csv));
  /* The BE CSV starts at step 5: the steps before are outside (warm-up). */
  char *row5 = u.be_csv;
  for (int i = 0; i < 6; i++)
    row5 = strchr(row5, '\n') + 1;
  char be_tail[8192];
  snprintf(be_tail, sizeof(be_tail), "iter,start_ns,end_ns\n%s", row5);
  write_file(bep, be_tail, strlen(be_tail));

  sim_wholerun_t w;
  assert_int_equal(sim_wholerun_load(tr, lcp, bep, NULL, &w, err, sizeof(err)), 0);
  assert_int_equal(w.lc.n, N_REQ);
  assert_int_equal(w.be.n, N_STEPS - 5);
  assert_int_equal(w.be.dropped, 5 * 3);
  assert_non_null(w.lc.win_index);
  assert_int_equal(w.arrivals.n, N_REQ);
  assert_int_equal(w.arrivals.t_ns[0], 0);
  assert_int_equal(w.arrivals.t_ns[1], 1100000); /* measured arrivals, not submits */
  assert_int_equal(w.arrivals.t_ns[3], 3000000);
  assert_string_equal(w.label, "lc/be");

  /* The simulation runs on it: one row alone, one per policy. */
  sim_compare_config_t cc;
  sim_row_t *rows = NULL;
  size_t nrows = 0;
  const char *why = NULL;
  sim_compare_config_init(&cc);
  for (int k = 0; k < POL_KIND_COUNT; k++)
    cc.kinds[k] = k == POL_KIND_MPS || k == POL_KIND_TALLY;
  cc.arrivals = &w.arrivals;
  cc.duration_ns = w.arrivals.t_ns[w.arrivals.n - 1] + 1000000;
  assert_int_equal(sim_compare_units(&cc, w.label, w.lc.u, w.lc.n, w.be.u, w.be.n, &rows, &nrows,
                                     &why),
                   0);
  assert_int_equal(nrows, 3);
  assert_int_equal(rows[0].nlat, N_REQ);
  for (size_t i = 1; i < nrows; i++) {
    assert_int_equal(rows[i].lc_tput, 1.0);
    assert_true(rows[i].be_tput > 0.3 && rows[i].be_tput <= 1.0);
  }
  sim_rows_free(rows, nrows);
  sim_wholerun_close(&w);

  /* An arrivals file instead of the LC CSV. */
  char ap[64];
  snprintf(ap, sizeof(ap), "%s/arrivals.txt", dir);
  write_file(ap, "0\n500000\n# note\n\n2000000\n", 0);
  assert_int_equal(sim_wholerun_load(tr, NULL, NULL, ap, &w, err, sizeof(err)), 0);
  assert_int_equal(w.lc.n, N_REQ);
  assert_int_equal(w.be.n, N_STEPS);
  assert_int_equal(w.arrivals.n, 3);
  assert_int_equal(w.arrivals.t_ns[2], 2000000);
  sim_wholerun_close(&w);
  write_file(ap, "0\n500000\n400000\n", 0);
  assert_int_equal(sim_wholerun_load(tr, NULL, NULL, ap, &w, err, sizeof(err)), -EPROTO);
  assert_non_null(strstr(err, "line 3: offsets must not decrease"));
  /* A malformed CSV row is named by file and line. */
  write_file(bep, "iter,start_ns,end_ns\n0,5,9\n1,x,9\n", 0);
  assert_int_equal(sim_wholerun_load(tr, lcp, bep, NULL, &w, err, sizeof(err)), -EPROTO);
  assert_non_null(strstr(err, "be.csv: line 3: "));

  unlink(tr);
  unlink(lcp);
  unlink(bep);
  unlink(ap);
  rmdir(dir);
  free(text);
}

/* The LC lines untimed, as tallyd writes them: their start - submit is
 * submit -> completion seen (36.5 us for a request's first kernel here),
 * never taken as the launch latency; it is tallyd's issue - submit of the
 * LC (0.5 us) plus the driver's start - issue of the BE on an idle stream
 * (5 us), and the LC's block times come from the completion gaps. */
static void untimed_lc_lines(void **state) {
  (void)state;
  static run_t u;
  size_t len;
  g_untimed = true;
  memset(&u, 0, sizeof(u));
  char *text = make_run(&u, &len), err[300];
  g_untimed = false;
  sim_runtrace_t rt;
  sim_launch_t l;
  assert_int_equal(sim_runtrace_parse(text, len, &rt, err, sizeof(err)), 0);
  assert_int_equal(rt.untimed, N_REQ * K_LC);
  for (size_t i = 0; i < rt.n; i++)
    assert_int_equal(rt.k[i].timed, rt.tenants[rt.k[i].tenant].cls == POL_CLASS_BE);
  assert_int_equal(sim_runtrace_launch(&rt, POL_CLASS_LC, &l), 0);
  assert_int_equal(l.src, SIM_LAUNCH_HOST_DRIVER);
  assert_int_equal(l.host_ns, 500);
  assert_int_equal(l.driver_ns, 5000);
  assert_int_equal(l.ns, 5500);
  assert_int_equal(l.n, N_REQ);
  assert_int_equal(l.untimed, N_REQ * K_LC);
  char d[400];
  sim_launch_describe(&l, d, sizeof(d));
  assert_non_null(strstr(d, "launch latency 5.5 us = 0.5 us tallyd"));
  assert_non_null(strstr(d, "untimed"));
  /* The BE alone is timed: its own latency is start - submit. */
  assert_int_equal(sim_runtrace_launch(&rt, POL_CLASS_BE, &l), 0);
  assert_int_equal(l.src, SIM_LAUNCH_TIMED);
  assert_int_equal(l.ns, 5000);
  sim_runtrace_close(&rt);

  /* Through the whole-run loader: the estimated block times are the
   * device's 30 us, but for the first kernel of a request (32.5 us: its
   * estimated start is issue + driver, 2.5 us before the real one, which
   * this run delays by 3 us after the issue). */
  char dir[] = "/tmp/test-sim-runtrace-XXXXXX", tr[64];
  assert_non_null(mkdtemp(dir));
  snprintf(tr, sizeof(tr), "%s/run.ktr", dir);
  FILE *f = fopen(tr, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  sim_wholerun_t w;
  assert_int_equal(sim_wholerun_load(tr, NULL, NULL, NULL, &w, err, sizeof(err)), 0);
  assert_int_equal(w.launch.src, SIM_LAUNCH_HOST_DRIVER);
  assert_int_equal(w.launch.ns, 5500);
  assert_int_equal(w.lc.n, N_REQ);
  for (size_t i = 0; i < w.lc.n; i++) {
    assert_int_equal(w.lc.u[i].n, K_LC);
    assert_int_equal(w.lc.u[i].k[0].block_ns, 32500);
    for (int k = 1; k < K_LC; k++)
      assert_int_equal(w.lc.u[i].k[k].block_ns, 30000);
  }
  sim_wholerun_close(&w);
  assert_int_equal(unlink(tr), 0);
  assert_int_equal(rmdir(dir), 0);
  free(text);
}

/* The optional held= and graph= fields and `# kernel` name lines (tallyd
 * writes them) are read; a line without them (an older tallyd) still is. */
static void optional_fields_and_names(void **state) {
  (void)state;
  static const char text[] =
      "# tallyd kernel trace (tally-sim format), policy tally\n"
      "# kernel 0x0000000000000201 _Z4stepPfi\n"
      "be 0x201 264,1,1 128,1,1 0 0 1000 0 os # class=be form=sliced blocks=0+132 held=1 "
      "graph=0 submit=10 issue=20 start=30 end=40\n"
      "be 0x201 264,1,1 128,1,1 0 0 1000 0 os # class=be form=sliced blocks=132+132 held=1 "
      "graph=0 submit=10 issue=45 start=50 end=60\n"
      "lc 0x9 1 32 0 0 1000 0 o # class=lc form=original blocks=0+1 held=0 graph=1 "
      "submit=70 issue=71 start=80 end=80\n"
      "lc 0x9 1 32 0 0 1000 0 o # class=lc submit=90 start=95 end=99\n";
  sim_runtrace_t rt;
  char err[200] = "";
  assert_int_equal(sim_runtrace_parse(text, sizeof(text) - 1, &rt, err, sizeof(err)), 0);
  assert_int_equal(rt.ntenants, 2);
  assert_int_equal(rt.pieces, 4);
  assert_int_equal(rt.n, 3); /* the two slices are one submission */
  assert_int_equal(rt.untimed, 1);
  sim_runtrace_close(&rt);
}

static void expect_error(const char *text, const char *want) {
  sim_runtrace_t rt;
  char err[200] = "";
  assert_int_equal(sim_runtrace_parse(text, strlen(text), &rt, err, sizeof(err)), -EPROTO);
  if (!strstr(err, want))
    fail_msg("got \"%s\", want \"%s\"", err, want);
}

#define OK "lc 0x1 1 32 0 0 1000 0 o # class=lc submit=5 start=6 end=9\n"

static void malformed_lines_are_named(void **state) {
  (void)state;
  expect_error("# header\n" OK "lc 0x1 1 32 0 0 1000 0 o\n", "line 3: no '# class=");
  expect_error(OK "lc 0x1 1 32 0 0 1000 0 o # class=xx submit=1 start=2 end=3\n",
               "line 2: class must be lc or be");
  expect_error(OK OK "lc 0x1 1 32 0 0 1000 0 o # class=lc start=2 end=3\n",
               "line 3: no submit= in the comment");
  expect_error(OK "lc 0x1 1 32 0 0 1000 0 o # class=lc submit=1 start=2x end=3\n",
               "line 2: start= is not an unsigned integer");
  expect_error(OK "lc 0x1 1 32 0 0 1000 0 o # class=lc submit=1 start=5 end=3\n",
               "line 2: end= before start=");
  expect_error(OK "lc 0x1 1 32 0 0 1000 0 o # class=be submit=1 start=2 end=3\n",
               "line 2: tenant lc changes class");
  expect_error(OK "lc 0x1 0 32 0 0 1000 0 o # class=lc submit=1 start=2 end=3\n",
               "line 2: bad grid");
  expect_error(OK "lc 0x1 1 32 0 0 1000 0 o # class=lc form=odd submit=1 start=2 end=3\n",
               "line 2: form must be");
  expect_error(OK "lc 0x1 1 32 0 0 1000 0 o # class=lc held=2 submit=1 start=2 end=3\n",
               "line 2: held= must be 0 or 1");
  expect_error(OK "lc 0x1 1 32 0 0 1000 0 o # class=lc graph=yes submit=1 start=2 end=3\n",
               "line 2: graph= must be 0 or 1");
  expect_error("# only comments\n\n", "line 2: no kernels");
  char many[2048] = "";
  for (int i = 0; i < 9; i++) {
    char l[128];
    snprintf(l, sizeof(l), "t%d 0x1 1 32 0 0 1000 0 o # class=be submit=1 start=2 end=3\n", i);
    strcat(many, l);
  }
  expect_error(many, "line 9: more than 8 tenants");
  /* A split of a class with two tenants, or none, says so. */
  sim_runtrace_t rt;
  sim_units_t u;
  char err[200];
  const char *two = "a 0x1 1 32 0 0 1000 0 o # class=be submit=1 start=2 end=3\n"
                    "b 0x1 1 32 0 0 1000 0 o # class=be submit=1 start=2 end=3\n";
  assert_int_equal(sim_runtrace_parse(two, strlen(two), &rt, err, sizeof(err)), 0);
  assert_int_equal(sim_runtrace_split(&rt, POL_CLASS_BE, NULL, 0, &u, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "more than one tenant of class be (a, b)"));
  assert_int_equal(sim_runtrace_split(&rt, POL_CLASS_LC, NULL, 0, &u, err, sizeof(err)), -ENOENT);
  sim_runtrace_close(&rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_merges_pieces_and_sorts),
      cmocka_unit_test(split_by_synchronisation),
      cmocka_unit_test(wholerun_uses_the_measured_rows),
      cmocka_unit_test(untimed_lc_lines),
      cmocka_unit_test(malformed_lines_are_named),
      cmocka_unit_test(optional_fields_and_names),
  };
  return cmocka_run_group_tests_name("sim-runtrace", tests, NULL, NULL);
}
