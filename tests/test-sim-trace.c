/* test-sim-trace.c: the kernel trace format and the arrival sources.
 *
 * The trace parser is checked against the field table in sim/trace.c (each
 * field's range, each error with its line number), the writer round trips,
 * and the bundled traces parse.  Arrivals: Poisson and bursty generators
 * hit their mean rate; the Azure Functions CSV reader picks a function,
 * derives arrivals and scales them, and refuses malformed rows.
 */
#include "sim/sim.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static int parse(const char *text, sim_trace_t *t, char *err) {
  return sim_trace_parse(text, strlen(text), t, err, 160);
}

static void trace_parses_documented_example(void **state) {
  (void)state;
  sim_trace_t t;
  char err[160];
  assert_int_equal(parse("# comment\n\nbert-b1 0x1f00a3 36,1,1 256,1,1 128 32768 8000 0 o\n"
                         "bert-b1 7 12 64,2 32 0 1500   # defaults: gap 0, variants osp\n",
                         &t, err),
                   0);
  assert_string_equal(t.name, "bert-b1");
  assert_int_equal(t.n, 2);
  assert_int_equal(t.k[0].kernel_id, 0x1f00a3);
  assert_int_equal(t.k[0].grid[0], 36);
  assert_int_equal(t.k[0].block[0], 256);
  assert_int_equal(t.k[0].regs_per_thread, 128);
  assert_int_equal(t.k[0].shmem_bytes, 32768);
  assert_int_equal(t.k[0].block_ns, 8000);
  assert_int_equal(t.k[0].variants, POL_VAR_ORIGINAL);
  assert_int_equal(t.k[1].grid[1], 1);
  assert_int_equal(t.k[1].block[1], 2);
  assert_int_equal(t.k[1].gap_ns, 0);
  assert_int_equal(t.k[1].variants, POL_VAR_ALL);
  assert_int_equal(sim_kernel_blocks(&t.k[0]), 36);
  sim_trace_close(&t);
}

static void expect_error(const char *text, const char *part) {
  sim_trace_t t = {0};
  char err[160] = "";
  assert_int_equal(parse(text, &t, err), -EPROTO);
  if (!strstr(err, part))
    fail_msg("error '%s' lacks '%s'", err, part);
  assert_null(t.k);
}

static void trace_rejects_each_bad_field_with_line(void **state) {
  (void)state;
  const char *ok = "a 1 2 32 0 0 1000\n";
  char buf[256];
  expect_error("a 1 2 32 0 0\n", "line 1: expected 7 to 9 fields");
  expect_error("a 1 2 32 0 0 1000 0 osp extra\n", "expected 7 to 9");
  expect_error("a/b 1 2 32 0 0 1000\n", "tenant");
  expect_error("a 0xg 2 32 0 0 1000\n", "kernel id");
  expect_error("a 99999999999999999999 2 32 0 0 1000\n", "kernel id");
  expect_error("a 1 0 32 0 0 1000\n", "grid");
  expect_error("a 1 2,2,2,2 32 0 0 1000\n", "grid");
  expect_error("a 1 2,,2 32 0 0 1000\n", "grid");
  expect_error("a 1 2 1025 0 0 1000\n", "block");
  expect_error("a 1 2 64,32 0 0 1000\n", "block");
  expect_error("a 1 2 32 256 0 1000\n", "registers");
  expect_error("a 1 2 32 0 16777217 1000\n", "shared memory");
  expect_error("a 1 2 32 0 0 0\n", "block_ns");
  expect_error("a 1 2 32 0 0 1000 -5\n", "gap_ns");
  expect_error("a 1 2 32 0 0 1000 0 x\n", "variants");
  expect_error("a 1 65536,65536,65536 32 0 0 1000\n", "2^40");
  expect_error("# nothing\n", "no kernels");
  snprintf(buf, sizeof(buf), "%s%sb 1 2 32 0 0 1000\n", ok, ok);
  expect_error(buf, "line 3: tenant differs");
}

static void trace_parser_needs_no_nul(void **state) {
  (void)state;
  /* The buffer ends mid-line with no NUL after it (fuzz-style input). */
  char *p = malloc(17);
  memcpy(p, "a 1 2 32 0 0 1000", 17);
  sim_trace_t t;
  char err[160];
  assert_int_equal(sim_trace_parse(p, 17, &t, err, sizeof(err)), 0);
  assert_int_equal(t.k[0].block_ns, 1000);
  sim_trace_close(&t);
  assert_int_equal(sim_trace_parse(p, 16, &t, err, sizeof(err)), 0);
  assert_int_equal(t.k[0].block_ns, 100);
  sim_trace_close(&t);
  free(p);
}

static void trace_write_round_trips(void **state) {
  (void)state;
  sim_trace_t t, u;
  char err[160], *buf = NULL;
  size_t len = 0;
  assert_int_equal(parse("w 0xabc 3,2,1 32,4 40 1024 5000 77 sp\nw 5 1 1 0 0 1 0 -\n", &t, err), 0);
  FILE *f = open_memstream(&buf, &len);
  assert_int_equal(sim_trace_write(&t, f), 0);
  fclose(f);
  assert_int_equal(sim_trace_parse(buf, len, &u, err, sizeof(err)), 0);
  assert_int_equal(u.n, 2);
  assert_memory_equal(t.k, u.k, 2 * sizeof(*t.k));
  free(buf);
  sim_trace_close(&t);
  sim_trace_close(&u);
}

static void load_and_fit(const char *src, const char *file, const sim_gpu_config_t *g) {
  char path[4096], err[256];
  sim_trace_t t;
  snprintf(path, sizeof(path), "%s/sim/traces/%s", src, file);
  if (sim_trace_load(path, &t, err, sizeof(err)) != 0)
    fail_msg("%s: %s", path, err);
  for (size_t k = 0; k < t.n; k++)
    assert_true(sim_gpu_resident(g, &t.k[k]) > 0);
  sim_trace_close(&t);
}

static void bundled_traces_parse_and_fit(void **state) {
  (void)state;
  const char *src = getenv("TALLY_SRCDIR");
  sim_gpu_config_t g;
  sim_gpu_config_init(&g);
  if (!src)
    skip();
  for (size_t i = 0; i < sim_bundled_npairs; i++) {
    load_and_fit(src, sim_bundled_pairs[i].lc_file, &g);
    load_and_fit(src, sim_bundled_pairs[i].be_file, &g);
  }
  /* Bundled but not in the default pairs (for --lc). */
  load_and_fit(src, "bert-b1-infer.ktr", &g);
  load_and_fit(src, "resnet50-b1-infer.ktr", &g);
}

static void poisson_and_bursty_hit_mean_rate(void **state) {
  (void)state;
  sim_rng_t r;
  sim_arrivals_t a;
  sim_rng_init(&r, 3);
  assert_int_equal(sim_arrivals_poisson(&a, &r, 10000, 10000000000ull), 0);
  /* 10^5 expected; Poisson sd ~316: 2% is ~6 sd. */
  assert_true(a.n > 98000 && a.n < 102000);
  for (size_t i = 1; i < a.n; i++)
    assert_true(a.t_ns[i] >= a.t_ns[i - 1]);
  sim_arrivals_close(&a);
  assert_int_equal(sim_arrivals_bursty(&a, &r, 1000, 100000000000ull), 0);
  /* 10^5 expected over 100 s = ~400 burst/calm cycles: 5% covers them. */
  assert_true(a.n > 95000 && a.n < 105000);
  sim_arrivals_close(&a);
  assert_int_equal(sim_arrivals_poisson(&a, &r, -1, 1000), -EINVAL);
}

static void bursty_is_burstier_than_poisson(void **state) {
  (void)state;
  sim_rng_t r;
  sim_arrivals_t a;
  sim_rng_init(&r, 5);
  /* Count arrivals per 10 ms window: the variance-to-mean ratio (index of
   * dispersion) is 1 for Poisson, > 1 for the modulated process. */
  assert_int_equal(sim_arrivals_bursty(&a, &r, 2000, 50000000000ull), 0);
  size_t nw = 5000;
  double *c = calloc(nw, sizeof(*c)), m = 0, v = 0;
  for (size_t i = 0; i < a.n; i++)
    c[a.t_ns[i] / 10000000]++;
  for (size_t i = 0; i < nw; i++)
    m += c[i];
  m /= (double)nw;
  for (size_t i = 0; i < nw; i++)
    v += (c[i] - m) * (c[i] - m);
  v /= (double)(nw - 1);
  assert_true(v / m > 2.0);
  free(c);
  sim_arrivals_close(&a);
}

static void azure_csv_picks_function_and_scales(void **state) {
  (void)state;
  const char *csv = "app,func,end_timestamp,duration\n"
                    "a1,f1,10.0,1.0\n" /* arrival 9 */
                    "a1,f1,12.5,0.5\n" /* arrival 12 */
                    "a1,f1,15,0\n"     /* arrival 15 */
                    "a2,f2,3.0,1.0\n"
                    "a2,f2,4,1\n"
                    "a1,f1,18.0,0.0\r\n"; /* arrival 18; CRLF ok */
  sim_arrivals_t a;
  char err[160];
  /* Busiest function f1: arrivals 9,12,15,18 -> gaps 3 s, rate 1/3 per s.
   * At 1000/s the gaps scale to 1 ms; the pattern repeats to fill 10 ms. */
  assert_int_equal(sim_arrivals_azure(&a, csv, strlen(csv), NULL, 1000, 10000000, err, 160), 0);
  assert_int_equal(a.n, 10);
  assert_int_equal(a.t_ns[0], 0);
  assert_int_equal(a.t_ns[1], 1000000);
  assert_int_equal(a.t_ns[3], 3000000);
  assert_int_equal(a.t_ns[4], 4000000); /* next repeat after one mean gap */
  sim_arrivals_close(&a);
  assert_int_equal(sim_arrivals_azure(&a, csv, strlen(csv), "f2", 1000, 10000000, err, 160), 0);
  assert_int_equal(a.t_ns[1], 1000000);
  sim_arrivals_close(&a);
}

static void azure_csv_rejects_bad_rows(void **state) {
  (void)state;
  sim_arrivals_t a;
  char err[160];
  const char *cases[][2] = {
      {"app,func,end,duration\n", "header"},
      {"app,func,end_timestamp,duration\na,f,1\n", "line 2: expected 4"},
      {"app,func,end_timestamp,duration\na,f,x,1\n", "seconds"},
      {"app,func,end_timestamp,duration\na,f,1,2\n", "longer"},
      {"app,func,end_timestamp,duration\na,,3,1\n", "empty func"},
      {"app,func,end_timestamp,duration\na,f,3,1\n", "2 invocations"},
      {"app,func,end_timestamp,duration\na,f,3,1\na,f,3,1\n", "one instant"},
      {"app,func,end_timestamp,duration\n", "no invocations"},
      {"app,func,end_timestamp,duration\na,f,1e9,1\n", "seconds"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    err[0] = '\0';
    assert_int_equal(
        sim_arrivals_azure(&a, cases[i][0], strlen(cases[i][0]), NULL, 100, 1000000000, err, 160),
        -EPROTO);
    if (!strstr(err, cases[i][1]))
      fail_msg("case %zu: '%s' lacks '%s'", i, err, cases[i][1]);
    assert_null(a.t_ns);
  }
  const char *two = "app,func,end_timestamp,duration\na,f,3,1\na,f,4,1\n";
  assert_int_equal(sim_arrivals_azure(&a, two, strlen(two), "nope", 100, 1000000000, err, 160),
                   -EPROTO);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(trace_parses_documented_example),
      cmocka_unit_test(trace_rejects_each_bad_field_with_line),
      cmocka_unit_test(trace_parser_needs_no_nul),
      cmocka_unit_test(trace_write_round_trips),
      cmocka_unit_test(bundled_traces_parse_and_fit),
      cmocka_unit_test(poisson_and_bursty_hit_mean_rate),
      cmocka_unit_test(bursty_is_burstier_than_poisson),
      cmocka_unit_test(azure_csv_picks_function_and_scales),
      cmocka_unit_test(azure_csv_rejects_bad_rows),
  };
  return cmocka_run_group_tests_name("sim-trace", tests, NULL, NULL);
}
