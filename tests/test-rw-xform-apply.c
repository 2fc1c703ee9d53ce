/* test-rw-xform-apply.c: slicing and PTB transformations add entries with
 * the documented calling convention, keep the original, virtualize %ctaid
 * and %nctaid, make early returns reach the worker loop's epilogue, keep
 * the body's barriers, refuse PTB where a thread can finish before others
 * reach a CTA-wide barrier, and every transformed module assembles with
 * ptxas. */
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

static rw_ptx_module_t *parse_file(const char *name) {
  size_t len;
  char *text = load(name, &len);
  rw_ptx_module_t *m;
  rw_diag_t d = {0};
  if (rw_ptx_parse(text, len, &m, &d) != 0)
    fail_msg("%s:%d:%d: %s", name, d.line, d.column, d.text);
  free(text);
  return m;
}

/* Prints one function (for before/after comparisons and text searches). */
static char *print_func(const rw_ptx_module_t *m, const char *name) {
  rw__buf_t b = {0};
  for (size_t i = 0; i < m->top.n; i++)
    if (m->top.v[i]->kind == RW__ST_FUNC && strcmp(m->top.v[i]->func->name, name) == 0)
      rw__print_stmt(&b, m->top.v[i]);
  assert_int_equal(b.err, 0);
  assert_non_null(b.p);
  return b.p;
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
    n++;
  return n;
}

static void assemble(const char *text, size_t len) {
  const char *ptxas = getenv("PTXAS");
  char err[4096];
  if (ptxas == NULL || *ptxas == 0)
    skip();
  if (rw__ptxas_run(ptxas, "sm_90", text, len, NULL, NULL, err, sizeof(err)) != 0)
    fail_msg("ptxas: %s", err);
}

static void slice_adds_entry_with_grid_params_and_keeps_original(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  rw_diag_t d = {0};
  char *before = print_func(m, "cta_wide");
  assert_int_equal(rw_xform_apply(m, "cta_wide", RW_XFORM_SLICE, &d), 0);
  char *after = print_func(m, "cta_wide");
  assert_string_equal(before, after);
  rw__func_t *f = rw__find_func(m, "cta_wide__tally_slice");
  assert_non_null(f);
  assert_true(f->is_entry);
  const char *want[] = {"cta_wide_param_0", "cta_wide_param_1", "tally_gx",
                        "tally_gy",         "tally_gz",         "tally_block_offset"};
  assert_int_equal(f->nparams, 6);
  for (size_t i = 0; i < 6; i++)
    assert_string_equal(f->params[i].name, want[i]);
  assert_int_equal(rw_ptx_entry_count(m), 4); /* 3 originals + 1 */
  char *s = print_func(m, "cta_wide__tally_slice");
  /* only the prologue reads the real %ctaid.x; the body reads registers */
  assert_int_equal(count(s, "%ctaid."), 1);
  assert_int_equal(count(s, "%nctaid."), 0);
  assert_int_equal(count(s, "mov.u32 \t%r6, %tally_ctaid_y;"), 1);
  assert_int_equal(count(s, "mov.u32 \t%r7, %tally_nctaid_x;"), 1);
  assert_non_null(strstr(s, ".param .u64 tally_block_offset\n)"));
  /* slicing keeps the body's barriers and exits as they are */
  assert_int_equal(count(s, "barrier.sync \t0;"), 1);
  assert_int_equal(count(s, "@%p1 exit;"), 1);
  free(s);
  free(before);
  free(after);
  rw_ptx_free(m);
}

static void ptb_adds_entry_with_control_block_param(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_PTB, NULL), 0);
  rw__func_t *f = rw__find_func(m, "named__tally_ptb");
  assert_non_null(f);
  assert_int_equal(f->nparams, 5);
  assert_string_equal(f->params[4].name, "tally_ctl");
  char *s = print_func(m, "named__tally_ptb");
  assert_non_null(strstr(s, ".param .u64 tally_ctl\n)"));
  /* the flag at offset 8 is read before the take at offset 0 */
  char *flag = strstr(s, "ld.volatile.global.u32 \t%tally_t32, [%tally_ctl+8];");
  char *take = strstr(s, "atom.global.add.u64 \t%tally_idx, [%tally_ctl], 1;");
  assert_non_null(flag);
  assert_non_null(take);
  assert_true(flag < take);
  free(s);
  rw_ptx_free(m);
}

static void ptb_turns_ret_and_exit_into_branches_to_the_epilogue(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_PTB, NULL), 0);
  char *s = print_func(m, "named__tally_ptb");
  /* the body had: exit, @%p2 ret, ret */
  assert_int_equal(count(s, "\tret;"), 0);
  assert_int_equal(count(s, "exit;"), 1); /* the loop's own "@%tally_p exit" */
  assert_int_equal(count(s, "@%tally_p exit;"), 1);
  assert_int_equal(count(s, "@%p2 bra \t$tally_epi;"), 1);
  assert_int_equal(count(s, "\tbra \t$tally_epi;"), 2);
  free(s);
  rw_ptx_free(m);
}

static void ptb_leaves_counted_barriers_and_uses_a_free_id(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_PTB, NULL), 0);
  char *s = print_func(m, "named__tally_ptb");
  assert_int_equal(count(s, "bar.sync \t1, 128;"), 1);
  assert_int_equal(count(s, "bar.arrive \t1, 128;"), 1);
  assert_int_equal(count(s, "bar.red.popc.u32 \t%r7, 2, 64, %p2;"), 1);
  /* no CTA-wide body barrier: the loop uses the lowest free id, 0
   * (non-aligned: threads come from divergent returns), at its head and in
   * a plain epilogue */
  assert_int_equal(count(s, "barrier.sync \t0;"), 2);
  assert_null(strstr(s, "$tally_spin"));
  free(s);
  rw_ptx_free(m);

  const char *src = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".visible .entry k(.param .u64 p)\n{\n.reg .pred %p<2>;\n.reg .b32 %r<2>;\n"
                    "mov.u32 %r1, %tid.x;\nsetp.eq.u32 %p1, %r1, 0;\n"
                    "bar.sync 0, 64;\nbar.sync 1;\nbar.arrive 3, 64;\n@%p1 exit;\nret;\n}\n";
  assert_int_equal(rw_ptx_parse(src, strlen(src), &m, NULL), 0);
  assert_int_equal(rw_xform_apply(m, "k", RW_XFORM_PTB, NULL), 0);
  s = print_func(m, "k__tally_ptb");
  /* ids 0, 1, 3 are the body's: the loop takes 2, at its head and epilogue */
  assert_int_equal(count(s, "barrier.sync \t2;"), 2);
  assert_int_equal(count(s, "\tbar.sync \t1;"), 1);
  free(s);
  rw_ptx_free(m);
}

/* The H200 failure (rewrite/xform-apply.c): early_return_then_barrier<2>,
 * where even threads return and odd ones then wait at bar.sync 0.  PTB is
 * refused, with the module left as it was; slicing
 * still transforms it, and the slice assembles. */
static void ptb_refuses_cta_barrier_after_divergent_return(void **state) {
  (void)state;
  size_t len, olen;
  char *text = load("early-return.ptx", &len), *out;
  rw_ptx_module_t *m = parse_file("early-return.ptx");
  rw_diag_t d = {0};
  rw_refusal_t why = RW_REFUSE_NONE;
  assert_int_equal(rw_xform_check(m, "early_return_k2", RW_XFORM_PTB, &why, &d), -ENOTSUP);
  assert_int_equal(why, RW_REFUSE_BARRIER);
  /* the divergent decision the flow analysis names: the first on the way,
   * @%p1 bra $L__BB5_2 (g >= n; from there on threads are not uniform) */
  assert_int_equal(d.line, 31);
  assert_non_null(strstr(d.text, "CTA-wide barrier"));
  assert_int_equal(rw_xform_apply(m, "early_return_k2", RW_XFORM_PTB, &d), -ENOTSUP);
  assert_int_equal(rw_ptx_entry_count(m), 1);
  assert_null(rw__find_func(m, "early_return_k2__tally_ptb"));
  rw_ptx_free(m);

  /* the same kernels in barriers.ptx: exit or ret before barrier.sync and
   * before bar.red (__syncthreads_count/and/or) */
  m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_check(m, "cta_wide", RW_XFORM_PTB, &why, &d), -ENOTSUP);
  assert_int_equal(why, RW_REFUSE_BARRIER);
  assert_int_equal(rw_xform_check(m, "reductions", RW_XFORM_PTB, &why, &d), -ENOTSUP);
  assert_int_equal(why, RW_REFUSE_BARRIER);
  rw_ptx_free(m);

  rw_xform_report_t r;
  assert_int_equal(rw_transform_ptx(text, len, RW_XFORM_MASK_ALL, &out, &olen, &r), 0);
  assert_int_equal(r.n_entries, 1);
  assert_int_equal(r.entries[0].status[RW_XFORM_SLICE], 0);
  assert_int_equal(r.entries[0].why[RW_XFORM_PTB], RW_REFUSE_BARRIER);
  assert_non_null(strstr(out, ".entry early_return_k2__tally_slice("));
  assert_null(strstr(out, "__tally_ptb"));
  /* no emulated barrier is generated anywhere */
  assert_null(strstr(out, "barrier.red"));
  rw_xform_report_free(&r);
  free(text);
  assemble(out, olen);
  free(out);
}

/* Every PTB copy: the epilogue is the loop barrier, reached before the
 * branch back to the take (thread 0 rewrites the broadcast slot only after
 * every thread has read it), and no barrier.red appears that the original
 * did not have. */
static void ptb_epilogue_is_one_plain_barrier_before_the_next_take(void **state) {
  (void)state;
  const char *names[] = {"named", "cta_wide", "reductions"};
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_PTB, NULL), 0);
  char *s = print_func(m, "named__tally_ptb");
  assert_non_null(strstr(s, "$tally_epi:\n\tbarrier.sync \t0;\n\tbra \t$tally_loop;\n}"));
  char *take = strstr(s, "atom.global.add.u64");
  char *pub = strstr(s, "st.shared.u64 \t[tally_slot], %tally_idx;\n\tbarrier.sync \t0;\n"
                        "\tld.shared.u64 \t%tally_idx, [tally_slot];");
  assert_non_null(take);
  assert_non_null(pub);
  assert_true(take < pub);
  assert_null(strstr(s, "barrier.red"));
  assert_null(strstr(s, "%tally_pf"));
  free(s);
  for (size_t i = 1; i < 3; i++)
    assert_int_equal(rw_xform_apply(m, names[i], RW_XFORM_PTB, NULL), -ENOTSUP);
  rw_ptx_free(m);
}

static void ptb_keeps_barriers_when_no_thread_finishes_early(void **state) {
  (void)state;
  const char *src = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".visible .entry k(.param .u64 p)\n{\n.reg .pred %p<2>;\n.reg .b32 %r<3>;\n"
                    "mov.u32 %r1, %tid.x;\nsetp.eq.u32 %p1, %r1, 0;\n@%p1 bra $L1;\n"
                    "add.u32 %r1, %r1, 1;\n$L1:\nbar.sync 0;\n"
                    "bar.red.popc.u32 %r2, 0, %p1;\nshfl.sync.idx.b32 %r1, %r2, 0, 31, -1;\n"
                    "ret;\n}\n";
  rw_ptx_module_t *m;
  assert_int_equal(rw_ptx_parse(src, strlen(src), &m, NULL), 0);
  assert_int_equal(rw_xform_apply(m, "k", RW_XFORM_PTB, NULL), 0);
  char *s = print_func(m, "k__tally_ptb");
  assert_int_equal(count(s, "\tbar.sync \t0;"), 1);
  assert_int_equal(count(s, "bar.red.popc.u32 \t%r2, 0, %p1;"), 1);
  assert_null(strstr(s, "barrier.red")); /* no emulated rounds */
  assert_null(strstr(s, "$tally_spin"));
  assert_int_equal(count(s, "barrier.sync \t1;"), 2); /* loop head and epilogue */
  free(s);
  rw_ptx_free(m);
}

static void applying_twice_fails_and_unknown_entry_is_enoent(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  rw_diag_t d = {0};
  rw_refusal_t why;
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_SLICE, &d), 0);
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_SLICE, &d), -EEXIST);
  assert_int_equal(rw_xform_apply(m, "nothere", RW_XFORM_PTB, &d), -ENOENT);
  assert_int_equal(rw_xform_check(m, "nothere", RW_XFORM_PTB, &why, &d), -ENOENT);
  assert_int_equal(why, RW_REFUSE_NO_ENTRY);
  /* a transformed entry is not transformed again: its tally_ names clash */
  assert_int_equal(rw_xform_check(m, "named__tally_slice", RW_XFORM_PTB, &why, &d), -ENOTSUP);
  assert_int_equal(why, RW_REFUSE_NAME_CLASH);
  assert_int_equal(rw_xform_apply(m, "named", (rw_xform_kind_t)7, &d), -EINVAL);
  rw_ptx_free(m);
}

static void transformed_modules_assemble_with_ptxas(void **state) {
  (void)state;
  const char *files[] = {"features.ptx", "barriers.ptx", "debug.ptx"};
  for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
    size_t len, olen;
    char *text = load(files[i], &len), *out;
    rw_xform_report_t r;
    assert_int_equal(rw_transform_ptx(text, len, RW_XFORM_MASK_ALL, &out, &olen, &r), 0);
    for (size_t e = 0; e < r.n_entries; e++) {
      for (int k = 0; k < RW_XFORM_KIND_COUNT; k++) {
        /* features: threads can skip to the end past a full-mask shfl.sync;
         * cta_wide, reductions: past CTA-wide barriers */
        const char *n = r.entries[e].name;
        if (k == RW_XFORM_PTB &&
            ((strcmp(n, "features") == 0 && r.entries[e].why[k] == RW_REFUSE_WARPSYNC) ||
             ((strcmp(n, "cta_wide") == 0 || strcmp(n, "reductions") == 0) &&
              r.entries[e].why[k] == RW_REFUSE_BARRIER)))
          continue;
        if (r.entries[e].status[k] != 0)
          fail_msg("%s %s: %s", files[i], r.entries[e].name, r.entries[e].reason[k]);
      }
    }
    rw_xform_report_free(&r);
    free(text);
    assemble(out, olen);
    free(out);
  }
}

/* 1-D grids take L itself, others divide in 32 bits, 2^32+ blocks trap */
static void prologue_decomposes_linear_index_and_traps_on_huge_grids(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "cta_wide", RW_XFORM_SLICE, NULL), 0);
  char *s = print_func(m, "cta_wide__tally_slice");
  assert_non_null(strstr(s, "add.u64 \t%tally_idx, %tally_idx, %tally_q;\n"
                            "\tsetp.ge.u64 \t%tally_p, %tally_idx, %tally_total;\n"
                            "\t@%tally_p exit;\n"));
  assert_non_null(strstr(s, "setp.le.u64 \t%tally_32, %tally_total, 4294967295;"));
  assert_non_null(strstr(s, "\t@%tally_1d bra \t$tally_d1;\n\t@%tally_32 bra \t$tally_d32;\n"
                            "\ttrap;\n$tally_d32:\n"));
  assert_non_null(strstr(s, "rem.u32 \t%tally_ctaid_x, %tally_l32, %tally_nctaid_x;"));
  assert_non_null(strstr(s, "$tally_d1:\n\tcvt.u32.u64 \t%tally_ctaid_x, %tally_idx;"));
  assert_null(strstr(s, "div.u64"));
  free(s);
  rw_ptx_free(m);
}

static void report_lists_added_and_refused_entries(void **state) {
  (void)state;
  size_t len, olen;
  char *text = load("refusals.ptx", &len), *out;
  rw_xform_report_t r;
  assert_int_equal(rw_transform_ptx(text, len, RW_XFORM_MASK(RW_XFORM_PTB), &out, &olen, &r), 0);
  assert_int_equal(r.parse_status, 0);
  assert_int_equal(r.n_entries, 19);
  int added = 0;
  for (size_t e = 0; e < r.n_entries; e++) {
    assert_int_equal(r.entries[e].status[RW_XFORM_SLICE], 1); /* not asked */
    if (r.entries[e].status[RW_XFORM_PTB] == 0) {
      assert_string_equal(r.entries[e].name, "ok_plain");
      added++;
    } else {
      assert_true(r.entries[e].why[RW_XFORM_PTB] != RW_REFUSE_NONE);
      assert_true(strlen(r.entries[e].reason[RW_XFORM_PTB]) > 0);
    }
  }
  assert_int_equal(added, 1);
  assert_non_null(strstr(out, ".entry ok_plain__tally_ptb("));
  rw_xform_report_free(&r);
  free(out);
  free(text);

  /* bad PTX: the call fails with the parse position */
  const char *bad = ".version 8.0\n.entry k(\n";
  assert_int_equal(rw_transform_ptx(bad, strlen(bad), RW_XFORM_MASK_ALL, &out, &olen, &r), -EPROTO);
  assert_null(out);
  assert_int_equal(r.parse_status, -EPROTO);
  assert_int_equal(r.parse_diag.line, 3);
  rw_xform_report_free(&r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(slice_adds_entry_with_grid_params_and_keeps_original),
      cmocka_unit_test(ptb_adds_entry_with_control_block_param),
      cmocka_unit_test(ptb_turns_ret_and_exit_into_branches_to_the_epilogue),
      cmocka_unit_test(ptb_leaves_counted_barriers_and_uses_a_free_id),
      cmocka_unit_test(ptb_refuses_cta_barrier_after_divergent_return),
      cmocka_unit_test(ptb_epilogue_is_one_plain_barrier_before_the_next_take),
      cmocka_unit_test(ptb_keeps_barriers_when_no_thread_finishes_early),
      cmocka_unit_test(applying_twice_fails_and_unknown_entry_is_enoent),
      cmocka_unit_test(transformed_modules_assemble_with_ptxas),
      cmocka_unit_test(prologue_decomposes_linear_index_and_traps_on_huge_grids),
      cmocka_unit_test(report_lists_added_and_refused_entries),
  };
  return cmocka_run_group_tests_name("rw-xform-apply", tests, NULL, NULL);
}
