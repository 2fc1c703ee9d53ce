/* test-rw-xform-apply.c: slicing and PTB transformations add entries with
 * the documented calling convention, keep the original, virtualize %ctaid
 * and %nctaid, make early returns reach the worker loop's epilogue, keep
 * the body's barriers, refuse PTB where a thread can finish before others
 * reach a CTA-wide barrier, and every transformed module assembles with
 * ptxas; the FLUSH form (blocks that give up) polls in loops, commits
 * before effects, checks after barriers, and refuses what it cannot
 * leave halfway. */
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
  assert_int_equal(f->nparams, 8);
  assert_string_equal(f->params[1].name, "tally_gx");
  assert_string_equal(f->params[4].name, "tally_ctl");
  assert_string_equal(f->params[5].name, "tally_first");
  assert_string_equal(f->params[6].name, "tally_nstatic");
  assert_string_equal(f->params[7].name, "tally_batch");
  char *s = print_func(m, "named__tally_ptb");
  assert_non_null(strstr(s, ".param .u64 tally_ctl,\n\t.param .u64 tally_first,\n"
                            "\t.param .u32 tally_nstatic,\n\t.param .u32 tally_batch\n)"));
  /* next (offset 0) and the flag (offset 8) are read by one 16-byte load
   * before the take at offset 0, and the take depends on both */
  char *flag = strstr(s, "@%tally_p ld.volatile.global.v2.u64 \t{%tally_q, %tally_b}, "
                         "[%tally_ctl];\n\tcvt.u32.u64 \t%tally_t32, %tally_b;\n"
                         "\tsetp.eq.and.u32 \t%tally_p, %tally_t32, 0, %tally_p;\n"
                         "\tsetp.lt.and.u64 \t%tally_p, %tally_q, %tally_total, %tally_p;\n");
  char *take = strstr(s, "@%tally_p atom.global.add.u64 \t%tally_q, [%tally_ctl], %tally_b;");
  assert_non_null(flag);
  assert_non_null(take);
  assert_true(flag < take);
  assert_int_equal(count(s, "atom."), 1);
  assert_int_equal(count(s, "ld.volatile"), 1);
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
  /* the loop's own two: "every index was static" and "no index taken" */
  assert_int_equal(count(s, "exit;"), 2);
  assert_int_equal(count(s, "@%tally_p exit;"), 2);
  assert_int_equal(count(s, "@%p2 bra \t$tally_epi;"), 1);
  /* exit, ret, and the end of the body */
  assert_int_equal(count(s, "\tbra \t$tally_epi;"), 3);
  assert_non_null(strstr(s, "\tbra \t$tally_epi;\n}"));
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
   * (non-aligned: threads come from divergent returns), once per index */
  assert_int_equal(count(s, "barrier.sync \t0;"), 1);
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
  /* ids 0, 1, 3 are the body's: the loop takes 2 */
  assert_int_equal(count(s, "barrier.sync \t2;"), 1);
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

/* The worker loop's code between $tally_epi and $tally_run, which runs
 * once per dynamically taken index: one 16-byte volatile load, at most one
 * atomic, one barrier that both ends the previous index and publishes the
 * next one through a double-buffered slot (rewrite/xform-apply.c says why
 * thread 0 may write it before the barrier), and no barrier.red that the
 * original did not have.  "Every index was static" exits before any of it. */
static void ptb_takes_an_index_with_one_barrier_and_one_atomic(void **state) {
  (void)state;
  const char *names[] = {"named", "cta_wide", "reductions"};
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_PTB, NULL), 0);
  char *s = print_func(m, "named__tally_ptb");
  char *epi = strstr(s, "$tally_epi:\n"), *run = strstr(s, "$tally_run:\n");
  assert_non_null(epi);
  assert_non_null(run);
  assert_true(epi < run);
  *run = 0; /* s[epi, run) is the take */
  assert_int_equal(count(epi, "atom."), 1);
  assert_int_equal(count(epi, "ld.volatile"), 1);
  assert_int_equal(count(epi, "barrier"), 1);
  assert_int_equal(count(epi, "bar."), 0);
  char *done = strstr(epi, "add.u64 \t%tally_q, %tally_q, %tally_idx;\n"
                           "\tsetp.ge.u64 \t%tally_p, %tally_q, %tally_total;\n"
                           "\t@%tally_p exit;\n");
  char *load = strstr(epi, "ld.volatile");
  assert_non_null(done);
  assert_true(done < load);
  char *take = strstr(epi, "atom.global.add.u64");
  char *pub = strstr(epi, "mov.u32 \t%tally_l32, tally_slot;\n"
                          "\tselp.u32 \t%tally_t32, 8, 0, %tally_par;\n"
                          "\tadd.u32 \t%tally_l32, %tally_l32, %tally_t32;\n"
                          "\t@%tally_t0 st.shared.u64 \t[%tally_l32], %tally_idx;\n"
                          "\tbarrier.sync \t0;\n"
                          "\tld.shared.u64 \t%tally_idx, [%tally_l32];\n"
                          "\tnot.pred \t%tally_par, %tally_par;\n"
                          "\tsetp.ge.u64 \t%tally_p, %tally_idx, %tally_total;\n"
                          "\t@%tally_p exit;\n");
  assert_non_null(take);
  assert_non_null(pub);
  assert_true(take < pub);
  *run = '$';
  assert_non_null(strstr(s, ".shared .align 16 .b8 tally_slot[32];"));
  assert_null(strstr(s, "barrier.red"));
  free(s);
  for (size_t i = 1; i < 3; i++)
    assert_int_equal(rw_xform_apply(m, names[i], RW_XFORM_PTB, NULL), -ENOTSUP);
  rw_ptx_free(m);
}

/* Batches (rw.h): thread 0 keeps its last index C and batch end E in
 * tally_slot[16..31]; while C + 1 < E the next index is C + 1 with no global
 * access (the flag load and the atomic are predicated on "no index left in
 * the batch"); a take adds b = min(max(tally_batch, 1), max((total - next) /
 * W / 2, 1)) and the batch ends at min(i + b, total). */
static void ptb_batch_continues_without_global_access_and_shrinks_at_the_end(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_PTB, NULL), 0);
  char *s = print_func(m, "named__tally_ptb");
  char *state_ld =
      strstr(s, "@%tally_t0 ld.shared.v2.u64 \t{%tally_idx, %tally_e}, [tally_slot+16];\n"
                "\tadd.u64 \t%tally_idx, %tally_idx, 1;\n"
                "\tsetp.lt.u64 \t%tally_c, %tally_idx, %tally_e;\n"
                "\tnot.pred \t%tally_p, %tally_c;\n"
                "\tand.pred \t%tally_p, %tally_p, %tally_t0;\n");
  char *flag = strstr(s, "@%tally_p ld.volatile.global.v2.u64");
  char *size =
      strstr(s, "sub.u32 \t%tally_n, %tally_n, %tally_t32;\n"
                "\tmov.u32 \t%tally_t32, %nctaid.x;\n"
                "\tdiv.u32 \t%tally_n, %tally_n, %tally_t32;\n"
                "\tshr.u32 \t%tally_n, %tally_n, 1;\n"
                "\tmax.u32 \t%tally_n, %tally_n, 1;\n"
                "\tld.param.u32 \t%tally_t32, [tally_batch];\n"
                "\tmax.u32 \t%tally_t32, %tally_t32, 1;\n"
                "\tmin.u32 \t%tally_n, %tally_n, %tally_t32;\n"
                "\tcvt.u64.u32 \t%tally_b, %tally_n;\n"
                "\t@%tally_p atom.global.add.u64 \t%tally_q, [%tally_ctl], %tally_b;\n"
                "\t@!%tally_p mov.u64 \t%tally_q, 0xFFFFFFFFFFFFFFFF;\n"
                "\tadd.u64 \t%tally_b, %tally_q, %tally_b;\n"
                "\tmin.u64 \t%tally_b, %tally_b, %tally_total;\n"
                "\t@!%tally_c mov.u64 \t%tally_idx, %tally_q;\n"
                "\t@!%tally_c mov.u64 \t%tally_e, %tally_b;\n"
                "\t@%tally_t0 st.shared.v2.u64 \t[tally_slot+16], {%tally_idx, %tally_e};\n");
  assert_non_null(state_ld);
  assert_non_null(flag);
  assert_non_null(size);
  assert_true(state_ld < flag);
  assert_true(flag < size);
  free(s);
  rw_ptx_free(m);
}

/* A worker whose %ctaid.x < tally_nstatic runs index tally_first + %ctaid.x
 * first: from the entry to the body it touches no global or shared memory
 * and meets no barrier; more statics than workers trap (rw.h). */
static void ptb_static_index_reaches_the_body_without_memory_or_barrier(void **state) {
  (void)state;
  rw_ptx_module_t *m = parse_file("barriers.ptx");
  assert_int_equal(rw_xform_apply(m, "named", RW_XFORM_PTB, NULL), 0);
  char *s = print_func(m, "named__tally_ptb");
  char *epi = strstr(s, "$tally_epi:\n");
  assert_non_null(epi);
  *epi = 0; /* s[0, epi) is the prologue */
  assert_non_null(strstr(s, "ld.param.u32 \t%tally_n, [tally_nstatic];\n"
                            "\tmov.u32 \t%tally_t32, %nctaid.x;\n"
                            "\tsetp.gt.u32 \t%tally_p, %tally_n, %tally_t32;\n"
                            "\t@%tally_p trap;\n"));
  assert_non_null(strstr(s, "ld.param.u64 \t%tally_idx, [tally_first];\n"
                            "\tcvt.u64.u32 \t%tally_q, %tally_t32;\n"
                            "\tadd.u64 \t%tally_idx, %tally_idx, %tally_q;\n"
                            "\tsetp.lt.u64 \t%tally_p, %tally_idx, %tally_total;\n"
                            "\tsetp.lt.and.u32 \t%tally_p, %tally_t32, %tally_n, %tally_p;\n"));
  assert_non_null(strstr(s, "@%tally_p bra \t$tally_run;\n"));
  assert_null(strstr(s, "atom."));
  assert_null(strstr(s, "ld.volatile"));
  assert_null(strstr(s, ".global"));
  assert_null(strstr(s, "ld.shared"));
  assert_null(strstr(s, "bar"));
  /* the one store: thread 0 clears its own batch state (C, E) = (0, 0) */
  assert_int_equal(count(s, "st.shared"), 1);
  assert_non_null(strstr(s,
                         "mov.u64 \t%tally_e, 0;\n"
                         "\t@%tally_t0 st.shared.v2.u64 \t[tally_slot+16], {%tally_e, %tally_e};"));
  free(s);
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
  assert_int_equal(count(s, "barrier.sync \t1;"), 1); /* the epilogue's, once per index */
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
        /* named: barriers with a thread count, which FLUSH refuses */
        if (k == RW_XFORM_FLUSH && strcmp(n, "named") == 0 &&
            r.entries[e].why[k] == RW_REFUSE_BARRIER)
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

/* A loop that polls, a shared store and a global store: only the global one
 * commits; a barrier and a shfl.sync are checked after; bra.uni back is no
 * longer promised uniform. */
static const char flush_ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry spin(.param .u64 out, .param .u32 n)\n{\n"
    ".reg .pred %p<3>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<4>;\n"
    ".shared .align 4 .b32 buf[32];\n"
    "ld.param.u64 %rd1, [out];\nld.param.u32 %r1, [n];\nmov.u32 %r2, 0;\n"
    "mov.u32 %r5, %tid.x;\n"
    "$L_loop:\n"
    "add.u32 %r2, %r2, 1;\n"
    "setp.lt.u32 %p1, %r2, %r1;\n"
    "@%p1 bra.uni $L_loop;\n"
    "st.shared.u32 [buf], %r2;\n"
    "bar.sync 0;\n"
    "shfl.sync.bfly.b32 %r3, %r2, 1, 31, -1;\n"
    "cvta.to.global.u64 %rd2, %rd1;\n"
    "st.global.u32 [%rd2], %r3;\n"
    "atom.shared.add.u32 %r4, [buf], 1;\n"
    "red.global.add.u32 [%rd2], 1;\n"
    "ret;\n}\n";

static void flush_instruments_loops_effects_and_barriers(void **state) {
  (void)state;
  rw_ptx_module_t *m;
  rw_diag_t d = {0};
  assert_int_equal(rw_ptx_parse(flush_ptx, sizeof(flush_ptx) - 1, &m, &d), 0);
  assert_int_equal(rw_xform_apply(m, "spin", RW_XFORM_FLUSH, &d), 0);
  rw__func_t *f = rw__find_func(m, "spin__tally_flush");
  assert_non_null(f);
  const char *want[] = {"out", "n", "tally_gx", "tally_gy", "tally_gz", "tally_block_offset",
                        "tally_ctl", "tally_redo"};
  assert_int_equal(f->nparams, 8);
  for (size_t i = 0; i < 8; i++)
    assert_string_equal(f->params[i].name, want[i]);
  char *s = print_func(m, "spin__tally_flush");
  /* one poll (the loop's backward branch), one give-up CAS in it */
  assert_int_equal(count(s, "ld.volatile.global.u32"), 1);
  assert_int_equal(count(s, "atom.shared.cas.b32 \t%tally_ft, [tally_fstate], 0, 1;"), 1);
  assert_int_equal(count(s, "and.b32 \t%tally_ft, %tally_fc, 63;"), 1);
  /* commits before the global store and the global reduction, not the shared ones */
  assert_int_equal(count(s, "atom.shared.cas.b32 \t%tally_ft, [tally_fstate], 0, 2;"), 2);
  /* checks after the barrier and the shfl.sync */
  assert_int_equal(count(s, "ld.volatile.shared.u32"), 2);
  /* the branch back is plain now; the head's barrier is the only extra one */
  assert_int_equal(count(s, "bra.uni"), 0);
  assert_int_equal(count(s, "bar.sync \t0;"), 2);
  /* the give-up path records the block's index */
  assert_int_equal(count(s, "atom.global.add.u32 \t%tally_ft, [%tally_fa+4], 1;"), 1);
  assert_int_equal(count(s, "st.global.u32 \t[%tally_q+16], %tally_l32;"), 1);
  free(s);
  rw__buf_t b = {0};
  assert_int_equal(rw_ptx_print(m, &b.p, &b.len), 0);
  assemble(b.p, b.len);
  free(b.p);
  rw_ptx_free(m);
}

/* A thread that gave up never arrives at a counted barrier, and an mbarrier
 * or wgmma pipeline cannot be left halfway: refused, with the reason. */
static void flush_refuses_counted_barriers_and_pipelines(void **state) {
  (void)state;
  static const char *const bodies[] = {"bar.sync 1, 64;\n", "bar.arrive 1, 64;\n",
                                       "mbarrier.init.shared.b64 [mb], 32;\n"};
  static const rw_refusal_t whys[] = {RW_REFUSE_BARRIER, RW_REFUSE_BARRIER, RW_REFUSE_FLUSH};
  for (size_t i = 0; i < 3; i++) {
    char text[1024];
    rw_ptx_module_t *m;
    rw_diag_t d = {0};
    rw_refusal_t why = RW_REFUSE_NONE;
    snprintf(text, sizeof(text),
             ".version 8.0\n.target sm_90\n.address_size 64\n"
             ".visible .entry k()\n{\n.shared .align 8 .b64 mb;\n%sret;\n}\n",
             bodies[i]);
    assert_int_equal(rw_ptx_parse(text, strlen(text), &m, &d), 0);
    assert_int_equal(rw_xform_check(m, "k", RW_XFORM_FLUSH, &why, &d), -ENOTSUP);
    assert_int_equal(why, whys[i]);
    assert_int_equal(rw_xform_check(m, "k", RW_XFORM_SLICE, &why, &d), 0);
    rw_ptx_free(m);
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
      cmocka_unit_test(ptb_takes_an_index_with_one_barrier_and_one_atomic),
      cmocka_unit_test(ptb_static_index_reaches_the_body_without_memory_or_barrier),
      cmocka_unit_test(ptb_batch_continues_without_global_access_and_shrinks_at_the_end),
      cmocka_unit_test(ptb_keeps_barriers_when_no_thread_finishes_early),
      cmocka_unit_test(applying_twice_fails_and_unknown_entry_is_enoent),
      cmocka_unit_test(transformed_modules_assemble_with_ptxas),
      cmocka_unit_test(prologue_decomposes_linear_index_and_traps_on_huge_grids),
      cmocka_unit_test(report_lists_added_and_refused_entries),
      cmocka_unit_test(flush_instruments_loops_effects_and_barriers),
      cmocka_unit_test(flush_refuses_counted_barriers_and_pipelines),
  };
  return cmocka_run_group_tests_name("rw-xform-apply", tests, NULL, NULL);
}
