/* test-rw-xform-flow.c: the control-flow and uniformity analysis tells
 * whether threads can finish the body while others still reach a given
 * instruction (here: bar.sync), and is conservative where unsure. */
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

static bool is_bar(const rw__stmt_t *s, void *ctx) {
  (void)ctx;
  return strcmp(s->opcode, "bar") == 0;
}

/* Wraps body in an entry with parameter n, runs the analysis. */
static int analyze(const char *body, bool *risk, int *line) {
  char src[4096];
  rw_ptx_module_t *m;
  rw_diag_t d = {0};
  const rw__stmt_t *at;
  snprintf(src, sizeof(src),
           ".version 8.0\n.target sm_90\n.address_size 64\n"
           ".visible .entry k(.param .u32 n, .param .u64 p)\n{\n"
           ".reg .pred %%p<4>;\n.reg .b32 %%r<8>;\n.reg .b64 %%rd<4>;\n%s}\n",
           body);
  if (rw_ptx_parse(src, strlen(src), &m, &d) != 0)
    fail_msg("%d:%d: %s", d.line, d.column, d.text);
  int rc = rw__flow_finish_before(rw__find_func(m, "k"), is_bar, NULL, risk, &at);
  *line = rc == 0 && *risk ? at->line : 0;
  rw_ptx_free(m);
  return rc;
}

static void divergent_return_before_barrier_is_a_risk(void **state) {
  (void)state;
  bool risk;
  int line;
  assert_int_equal(analyze("mov.u32 %r1, %tid.x;\nsetp.ge.u32 %p1, %r1, 7;\n@%p1 ret;\n"
                           "bar.sync 0;\nret;\n",
                           &risk, &line),
                   0);
  assert_true(risk);
  assert_int_equal(line, 11); /* the @%p1 ret */
}

static void uniform_return_before_barrier_is_not(void **state) {
  (void)state;
  bool risk;
  int line;
  /* %ctaid, %ntid, parameters and arithmetic on them are the same for the block */
  assert_int_equal(analyze("mov.u32 %r1, %ctaid.x;\nld.param.u32 %r2, [n];\n"
                           "mov.u32 %r3, %ntid.x;\nmad.lo.s32 %r4, %r1, %r3, 5;\n"
                           "setp.ge.u32 %p1, %r4, %r2;\n@%p1 bra $L_end;\nbar.sync 0;\n"
                           "$L_end:\nret;\n",
                           &risk, &line),
                   0);
  assert_false(risk);
}

static void divergent_branch_after_last_barrier_is_not(void **state) {
  (void)state;
  bool risk;
  int line;
  assert_int_equal(analyze("bar.sync 0;\nmov.u32 %r1, %tid.x;\nsetp.ne.u32 %p1, %r1, 0;\n"
                           "@%p1 bra $L_end;\nld.param.u64 %rd1, [p];\n"
                           "st.global.u32 [%rd1], %r1;\n$L_end:\nret;\n",
                           &risk, &line),
                   0);
  assert_false(risk);
}

static void return_in_loop_reaches_barrier_of_next_iteration(void **state) {
  (void)state;
  bool risk;
  int line;
  /* the barrier is textually before the return, but the loop brings it back */
  assert_int_equal(analyze("mov.u32 %r1, 0;\n$L_top:\nbar.sync 0;\nld.param.u64 %rd1, [p];\n"
                           "mov.u32 %r3, %tid.x;\nmul.wide.u32 %rd2, %r3, 4;\n"
                           "add.s64 %rd1, %rd1, %rd2;\n"
                           "ld.global.u32 %r2, [%rd1];\nsetp.gt.u32 %p1, %r2, 9;\n@%p1 ret;\n"
                           "add.u32 %r1, %r1, 1;\nsetp.lt.u32 %p2, %r1, 8;\n"
                           "@%p2 bra $L_top;\nret;\n",
                           &risk, &line),
                   0);
  assert_true(risk); /* loaded from a per-thread address */
}

/* CUB's segmented kernels: if (end[blockIdx.x] - begin[blockIdx.x] < 1)
 * return; -- a weak load from a block-uniform address is the same for the
 * whole block (a racing write would make it undefined, PTX memory model),
 * so that return is uniform.  Strong, volatile, local and generic loads are
 * not trusted. */
static void weak_load_from_uniform_address_is_uniform(void **state) {
  (void)state;
  static const char *const cases[][2] = {
      {"ld.global.u32", "0"},
      {"ld.global.nc.u32", "0"},
      {"ld.shared.u32", "0"},
      {"ldu.global.u32", "0"},
      {"ld.volatile.global.u32", "1"},
      {"ld.relaxed.gpu.global.u32", "1"},
      {"ld.acquire.gpu.global.u32", "1"},
      {"ld.global.cv.u32", "1"},
      {"ld.local.u32", "1"},
      {"ld.u32", "1"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char body[1024];
    bool risk;
    int line;
    snprintf(body, sizeof(body),
             "ld.param.u64 %%rd1, [p];\nmov.u32 %%r1, %%ctaid.x;\nmul.wide.u32 %%rd2, %%r1, 4;\n"
             "add.s64 %%rd3, %%rd1, %%rd2;\n%s %%r2, [%%rd3];\nsetp.lt.s32 %%p1, %%r2, 1;\n"
             "@%%p1 bra $L_end;\nbar.sync 0;\n$L_end:\nret;\n",
             cases[i][0]);
    assert_int_equal(analyze(body, &risk, &line), 0);
    if (risk != (cases[i][1][0] == '1'))
      fail_msg("%s: risk %d", cases[i][0], risk);
  }
}

static void values_that_depend_on_tid_taint_through_arithmetic(void **state) {
  (void)state;
  bool risk;
  int line;
  assert_int_equal(analyze("mov.u32 %r1, %tid.x;\nshr.u32 %r2, %r1, 5;\nadd.u32 %r3, %r2, 1;\n"
                           "setp.eq.u32 %p1, %r3, 2;\n@%p1 bra $L_end;\nbar.sync 0;\n"
                           "$L_end:\nret;\n",
                           &risk, &line),
                   0);
  assert_true(risk);
}

static void branch_to_unknown_label_is_not_guessed(void **state) {
  (void)state;
  bool risk;
  int line;
  assert_int_equal(analyze("bar.sync 0;\nbra $L_nowhere;\nret;\n", &risk, &line), -ENOTSUP);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(divergent_return_before_barrier_is_a_risk),
      cmocka_unit_test(uniform_return_before_barrier_is_not),
      cmocka_unit_test(divergent_branch_after_last_barrier_is_not),
      cmocka_unit_test(return_in_loop_reaches_barrier_of_next_iteration),
      cmocka_unit_test(values_that_depend_on_tid_taint_through_arithmetic),
      cmocka_unit_test(weak_load_from_uniform_address_is_uniform),
      cmocka_unit_test(branch_to_unknown_label_is_not_guessed),
  };
  return cmocka_run_group_tests_name("rw-xform-flow", tests, NULL, NULL);
}
