/* test-rw-xform-refuse.c: every refusal reason, with the position of the
 * token that caused it (tests/data/ptx/refusals.ptx, one entry per reason). */
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

static char *text;
static size_t text_len;
static rw_ptx_module_t *mod;

static int setup(void **state) {
  const char *src = getenv("TALLY_SRCDIR");
  char path[4096];
  (void)state;
  snprintf(path, sizeof(path), "%s/tests/data/ptx/refusals.ptx", src ? src : ".");
  if (rw__read_file(path, &text, &text_len) != 0 || rw_ptx_parse(text, text_len, &mod, NULL))
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  rw_ptx_free(mod);
  free(text);
  return 0;
}

/* Line and column of the first occurrence of token after the line that
 * holds `after` (or from the top when after is NULL). */
static void locate(const char *after, const char *token, int *line, int *col) {
  const char *p = text;
  if (after != NULL) {
    p = strstr(text, after);
    assert_non_null(p);
  }
  p = strstr(p, token);
  assert_non_null(p);
  *line = 1;
  const char *bol = text;
  for (const char *q = text; q < p; q++)
    if (*q == '\n') {
      ++*line;
      bol = q + 1;
    }
  *col = (int)(p - bol) + 1;
}

static const struct refusal_case {
  const char *entry;
  rw_refusal_t slice, ptb; /* RW_REFUSE_NONE: accepted */
  bool in_entry;           /* the token is in the entry (else in a callee) */
  const char *token;       /* what the diagnostic points at; NULL: no position */
} cases[] = {
    {"grid_sync", RW_REFUSE_COOPERATIVE, RW_REFUSE_COOPERATIVE, true, "%envreg2"},
    {"cluster_sreg", RW_REFUSE_CLUSTER, RW_REFUSE_CLUSTER, true, "%cluster_ctarank"},
    {"cluster_barrier", RW_REFUSE_CLUSTER, RW_REFUSE_CLUSTER, true, "barrier.cluster"},
    {"cluster_dims", RW_REFUSE_CLUSTER, RW_REFUSE_CLUSTER, true, ".reqnctapercluster"},
    {"dsmem", RW_REFUSE_CLUSTER, RW_REFUSE_CLUSTER, true, "mapa"},
    {"uses_smid", RW_REFUSE_SMID, RW_REFUSE_SMID, true, "%smid"},
    {"uses_nsmid", RW_REFUSE_SMID, RW_REFUSE_SMID, true, "%nsmid"},
    {"uses_gridid", RW_REFUSE_SMID, RW_REFUSE_SMID, true, "%gridid"},
    {"dynpar", RW_REFUSE_DYNPAR, RW_REFUSE_DYNPAR, true, "cudaGetParameterBufferV2"},
    {"unknown_op", RW_REFUSE_UNPARSED, RW_REFUSE_UNPARSED, true, "frobnicate"},
    {"callee_ctaid", RW_REFUSE_CALLEE, RW_REFUSE_CALLEE, false, "%ctaid"},
    {"name_clash", RW_REFUSE_NAME_CLASH, RW_REFUSE_NAME_CLASH, true, "%tally_x"},
    {"ctaid_vector", RW_REFUSE_UNPARSED, RW_REFUSE_UNPARSED, true, "%ctaid"},
    {"callee_exit", RW_REFUSE_NONE, RW_REFUSE_CALLEE, false, "exit;"},
    {"bar_reg_id", RW_REFUSE_NONE, RW_REFUSE_BARRIER, true, "bar.sync %r1"},
    {"bar_mixed_count", RW_REFUSE_NONE, RW_REFUSE_BARRIER, true, "@%p1 exit"},
    {"two_cta_ids", RW_REFUSE_NONE, RW_REFUSE_BARRIER, true, "@%p1 exit"},
    {"warp_after_return", RW_REFUSE_NONE, RW_REFUSE_WARPSYNC, true, "@%p1 bra $L_end"},
    {"ok_plain", RW_REFUSE_NONE, RW_REFUSE_NONE, true, NULL},
};

static void check_kind(const struct refusal_case *c, rw_xform_kind_t kind, rw_refusal_t want) {
  rw_refusal_t why = RW_REFUSE_COUNT;
  rw_diag_t d = {0};
  int rc = rw_xform_check(mod, c->entry, kind, &why, &d);
  if (want == RW_REFUSE_NONE) {
    if (rc != 0)
      fail_msg("%s %s: refused: %s", c->entry, rw_xform_suffix(kind), d.text);
    assert_int_equal(why, RW_REFUSE_NONE);
    return;
  }
  if (rc != -ENOTSUP || why != want)
    fail_msg("%s %s: rc %d why %s (%s), want %s", c->entry, rw_xform_suffix(kind), rc,
             rw_refusal_name(why), d.text, rw_refusal_name(want));
  assert_int_equal(d.code, -ENOTSUP);
  if (c->token != NULL) {
    char hdr[128];
    int line, col;
    snprintf(hdr, sizeof(hdr), ".entry %s(", c->entry);
    locate(c->in_entry ? hdr : NULL, c->token, &line, &col);
    if (d.line != line || d.column != col)
      fail_msg("%s: diag at %d:%d (%s), token '%s' at %d:%d", c->entry, d.line, d.column, d.text,
               c->token, line, col);
  }
  /* a refusal leaves the module as it was */
  assert_int_equal(rw_xform_apply(mod, c->entry, kind, NULL), rc);
}

static void each_reason_is_refused_at_its_token(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    check_kind(&cases[i], RW_XFORM_SLICE, cases[i].slice);
    check_kind(&cases[i], RW_XFORM_PTB, cases[i].ptb);
  }
}

static void refusal_names_come_from_one_list(void **state) {
  (void)state;
  assert_string_equal(rw_refusal_name(RW_REFUSE_SMID), "%smid/%nsmid/%gridid dependence");
  assert_string_equal(rw_refusal_name(RW_REFUSE_NONE), "none");
  assert_string_equal(rw_refusal_name(RW_REFUSE_COUNT), "unknown");
  for (int r = 0; r < RW_REFUSE_COUNT; r++)
    assert_true(strlen(rw_refusal_name((rw_refusal_t)r)) > 0);
}

static void cluster_and_grid_sync_refused_inside_callees_too(void **state) {
  (void)state;
  const char *src = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".func helper()\n{\n.reg .b32 %r<2>;\nmov.u32 %r1, %smid;\nret;\n}\n"
                    ".visible .entry k(.param .u64 p)\n{\ncall.uni helper, ();\nret;\n}\n";
  rw_ptx_module_t *m;
  rw_refusal_t why;
  rw_diag_t d = {0};
  assert_int_equal(rw_ptx_parse(src, strlen(src), &m, NULL), 0);
  assert_int_equal(rw_xform_check(m, "k", RW_XFORM_SLICE, &why, &d), -ENOTSUP);
  assert_int_equal(why, RW_REFUSE_SMID);
  assert_int_equal(d.line, 7);
  rw_ptx_free(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(each_reason_is_refused_at_its_token),
      cmocka_unit_test(refusal_names_come_from_one_list),
      cmocka_unit_test(cluster_and_grid_sync_refused_inside_callees_too),
  };
  return cmocka_run_group_tests_name("rw-xform-refuse", tests, setup, teardown);
}
