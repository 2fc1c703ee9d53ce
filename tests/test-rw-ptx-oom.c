/* test-rw-ptx-oom.c: every allocation of the parser, printer and
 * transformations may fail: the call returns -ENOMEM, frees what it took,
 * and leaves a module it was given usable.  The loop and the wrapped
 * allocator are tests/oom-harness.h's.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include "tests/oom-harness.h"

#include <stdio.h>
#include <string.h>

static const char src[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".global .align 4 .b8 t[4] = {1, 2, 3, 4};\n"
    ".visible .entry k(.param .u64 p, .param .u32 n)\n{\n"
    ".reg .pred %p<2>;\n.reg .b32 %r<4>;\n.reg .b64 %rd<3>;\n"
    "ld.param.u64 %rd1, [p];\nld.param.u32 %r1, [n];\nmov.u32 %r2, %tid.x;\n"
    /* the barrier comes before the early return: PTB refuses a CTA-wide
     * barrier that threads can reach after others finished */
    "bar.sync 0;\nsetp.ge.u32 %p1, %r2, %r1;\n@%p1 ret;\nmov.u32 %r3, %ctaid.x;\n"
    "cvta.to.global.u64 %rd2, %rd1;\nst.global.u32 [%rd2], %r3;\nret;\n}\n";

static int parse_and_print(void) {
  rw_ptx_module_t *m = NULL;
  rw_diag_t d = {0};
  char *out = NULL;
  int rc = rw_ptx_parse(src, sizeof(src) - 1, &m, &d);
  if (rc == 0)
    rc = rw_ptx_print(m, &out, NULL);
  free(out);
  rw_ptx_free(m);
  return rc;
}

static void parse_and_print_fail_cleanly_at_every_allocation(void **state) {
  (void)state;
  oom_every_failure(parse_and_print, 4);
}

static rw_xform_kind_t kind_under_test;

/* Whatever the transformation returned, the module still prints, holds k,
 * and holds a transformed copy exactly when it succeeded.  The checks run
 * with failure injection paused. */
static int transform_keeps_the_module(void) {
  rw_ptx_module_t *m = NULL;
  rw_diag_t d = {0};
  int rc = rw_ptx_parse(src, sizeof(src) - 1, &m, &d);
  if (rc == 0) {
    rc = rw_xform_apply(m, "k", kind_under_test, &d);
    long fail_at = oom_fail_at;
    oom_fail_at = -1;
    char *out;
    assert_int_equal(rw_ptx_print(m, &out, NULL), 0);
    assert_non_null(strstr(out, ".entry k("));
    char copy[64];
    snprintf(copy, sizeof(copy), "k%s(", rw_xform_suffix(kind_under_test));
    assert_true((strstr(out, copy) != NULL) == (rc == 0));
    free(out);
    oom_fail_at = fail_at;
  }
  rw_ptx_free(m);
  return rc;
}

static void transform_fails_cleanly_and_keeps_the_module(void **state) {
  (void)state;
  for (int kind = 0; kind < RW_XFORM_KIND_COUNT; kind++) {
    kind_under_test = (rw_xform_kind_t)kind;
    oom_every_failure(transform_keeps_the_module, 4);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_and_print_fail_cleanly_at_every_allocation),
      cmocka_unit_test(transform_fails_cleanly_and_keeps_the_module),
  };
  return cmocka_run_group_tests_name("rw-ptx-oom", tests, NULL, NULL);
}
