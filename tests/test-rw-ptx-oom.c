/* test-rw-ptx-oom.c: every allocation of the parser, printer and
 * transformations may fail: the call returns -ENOMEM, frees what it took,
 * and leaves a module it was given usable (cf. libuv test-loop-oom.c).
 *
 * malloc/calloc/realloc/free are wrapped (-Wl,--wrap): while `armed`, the
 * fail_at-th allocation fails and live allocations are counted, so a leak
 * on an error path shows as a nonzero balance.
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

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static bool armed;   /* count and fail only inside the call under test */
static long fail_at; /* index of the allocation to fail, -1 none */
static long seen;    /* allocations made while armed */
static long live;    /* allocations minus frees while armed */

static bool should_fail(void) {
  return armed && seen++ == fail_at;
}

void *__wrap_malloc(size_t n) {
  if (should_fail())
    return NULL;
  void *p = __real_malloc(n);
  if (armed && p)
    live++;
  return p;
}

void *__wrap_calloc(size_t n, size_t m) {
  if (should_fail())
    return NULL;
  void *p = __real_calloc(n, m);
  if (armed && p)
    live++;
  return p;
}

void *__wrap_realloc(void *p, size_t n) {
  if (should_fail())
    return NULL;
  void *q = __real_realloc(p, n);
  if (armed && q && p == NULL)
    live++;
  return q;
}

void __wrap_free(void *p) {
  if (armed && p)
    live--;
  __real_free(p);
}

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

static void parse_and_print_fail_cleanly_at_every_allocation(void **state) {
  (void)state;
  for (fail_at = 0;; fail_at++) {
    rw_ptx_module_t *m = NULL;
    rw_diag_t d = {0};
    char *out = NULL;
    seen = live = 0;
    armed = true;
    int rc = rw_ptx_parse(src, sizeof(src) - 1, &m, &d);
    if (rc == 0)
      rc = rw_ptx_print(m, &out, NULL);
    __wrap_free(out);
    rw_ptx_free(m);
    armed = false;
    assert_int_equal(live, 0);
    if (rc == 0 && seen <= fail_at)
      break; /* no allocation left to fail */
    assert_int_equal(rc, -ENOMEM);
  }
  assert_true(fail_at > 3);
}

static void transform_fails_cleanly_and_keeps_the_module(void **state) {
  (void)state;
  for (int kind = 0; kind < RW_XFORM_KIND_COUNT; kind++) {
    for (fail_at = 0;; fail_at++) {
      rw_ptx_module_t *m = NULL;
      rw_diag_t d = {0};
      assert_int_equal(rw_ptx_parse(src, sizeof(src) - 1, &m, &d), 0);
      seen = 0;
      armed = true;
      int rc = rw_xform_apply(m, "k", (rw_xform_kind_t)kind, &d);
      armed = false;
      /* whatever happened, the module still prints and holds k */
      char *out;
      assert_int_equal(rw_ptx_print(m, &out, NULL), 0);
      assert_non_null(strstr(out, ".entry k("));
      if (rc == 0) {
        assert_non_null(strstr(out, kind == RW_XFORM_SLICE ? "k__tally_slice" : "k__tally_ptb"));
      } else {
        assert_int_equal(rc, -ENOMEM);
        assert_null(strstr(out, "__tally_"));
      }
      __real_free(out);
      rw_ptx_free(m);
      if (rc == 0 && seen <= fail_at)
        break;
    }
    assert_true(fail_at > 3);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_and_print_fail_cleanly_at_every_allocation),
      cmocka_unit_test(transform_fails_cleanly_and_keeps_the_module),
  };
  return cmocka_run_group_tests_name("rw-ptx-oom", tests, NULL, NULL);
}
