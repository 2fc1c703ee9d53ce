/* test-rw-ptx-roundtrip.c: parse then print loses no meaning.
 *
 * For each PTX input under tests/data/ptx/: the printed text parses again
 * and prints to the same bytes, and (with $PTXAS, which the harness sets)
 * ptxas -arch=sm_90 of the printed text gives byte-identical .text.<kernel>
 * sections (the SASS) to ptxas of the original.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static char *load(const char *name, size_t *len) {
  const char *src = getenv("TALLY_SRCDIR");
  char path[4096];
  char *text;
  snprintf(path, sizeof(path), "%s/tests/data/ptx/%s", src ? src : ".", name);
  assert_int_equal(rw__read_file(path, &text, len), 0);
  return text;
}

static void print_is_fixpoint(const char *text, size_t len, char **printed, size_t *plen) {
  rw_ptx_module_t *m, *m2;
  rw_diag_t d = {0};
  char *p2;
  size_t l2;
  if (rw_ptx_parse(text, len, &m, &d) != 0)
    fail_msg("%d:%d: %s", d.line, d.column, d.text);
  assert_int_equal(rw_ptx_print(m, printed, plen), 0);
  if (rw_ptx_parse(*printed, *plen, &m2, &d) != 0)
    fail_msg("printed: %d:%d: %s", d.line, d.column, d.text);
  assert_int_equal(rw_ptx_print(m2, &p2, &l2), 0);
  assert_int_equal(l2, *plen);
  assert_memory_equal(p2, *printed, l2);
  free(p2);
  rw_ptx_free(m);
  rw_ptx_free(m2);
}

static void same_sass(const char *name) {
  size_t len, plen, c1len, c2len;
  char *text = load(name, &len), *printed, err[2048], why[256];
  void *c1, *c2;
  const char *ptxas = getenv("PTXAS");
  print_is_fixpoint(text, len, &printed, &plen);
  if (ptxas == NULL || *ptxas == 0) {
    free(text);
    free(printed);
    skip();
  }
  if (rw__ptxas_run(ptxas, "sm_90", text, len, &c1, &c1len, err, sizeof(err)) != 0)
    fail_msg("original: %s", err);
  if (rw__ptxas_run(ptxas, "sm_90", printed, plen, &c2, &c2len, err, sizeof(err)) != 0)
    fail_msg("printed: %s", err);
  if (rw__cubin_text_cmp(c1, c1len, c2, c2len, why, sizeof(why)) != 0)
    fail_msg("%s: %s", name, why);
  free(c1);
  free(c2);
  free(text);
  free(printed);
}

static void features_ptx_prints_to_identical_sass(void **state) {
  (void)state;
  same_sass("features.ptx");
}

static void barriers_ptx_prints_to_identical_sass(void **state) {
  (void)state;
  same_sass("barriers.ptx");
}

static void debug_sections_and_loc_print_to_identical_sass(void **state) {
  (void)state;
  same_sass("debug.ptx");
}

/* refusals.ptx holds an unknown opcode, so ptxas would refuse it: text only. */
static void refusals_ptx_print_is_a_fixpoint(void **state) {
  (void)state;
  size_t len, plen;
  char *text = load("refusals.ptx", &len), *printed;
  print_is_fixpoint(text, len, &printed, &plen);
  free(text);
  free(printed);
}

static void cubin_compare_reports_a_changed_kernel(void **state) {
  (void)state;
  const char *ptxas = getenv("PTXAS");
  const char *a = ".version 8.0\n.target sm_90\n.address_size 64\n"
                  ".visible .entry k(.param .u64 p)\n{\n.reg .b64 %rd<2>;\n.reg .b32 %r<2>;\n"
                  "ld.param.u64 %rd1, [p];\nmov.u32 %r1, 1;\nst.u32 [%rd1], %r1;\nret;\n}\n";
  char *b = strdup(a), why[256] = "";
  void *c1, *c2;
  size_t l1, l2;
  if (ptxas == NULL || *ptxas == 0) {
    free(b);
    skip();
  }
  *strstr(b, "mov.u32 %r1, 1") = 0;
  char *b2;
  assert_true(asprintf(&b2, "%smov.u32 %%r1, 2%s", b, strstr(a, ";\nst.u32")) > 0);
  assert_int_equal(rw__ptxas_run(ptxas, "sm_90", a, strlen(a), &c1, &l1, NULL, 0), 0);
  assert_int_equal(rw__ptxas_run(ptxas, "sm_90", b2, strlen(b2), &c2, &l2, NULL, 0), 0);
  assert_int_equal(rw__cubin_text_cmp(c1, l1, c1, l1, why, sizeof(why)), 0);
  assert_int_equal(rw__cubin_text_cmp(c1, l1, c2, l2, why, sizeof(why)), 1);
  assert_string_equal(why, ".text.k differs");
  assert_int_equal(rw__cubin_text_cmp(c1, 10, c2, l2, why, sizeof(why)), -EPROTO);
  free(c1);
  free(c2);
  free(b);
  free(b2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(features_ptx_prints_to_identical_sass),
      cmocka_unit_test(barriers_ptx_prints_to_identical_sass),
      cmocka_unit_test(debug_sections_and_loc_print_to_identical_sass),
      cmocka_unit_test(refusals_ptx_print_is_a_fixpoint),
      cmocka_unit_test(cubin_compare_reports_a_changed_kernel),
  };
  return cmocka_run_group_tests_name("rw-ptx-roundtrip", tests, NULL, NULL);
}
