/* test-rw-ptx-parse.c: the PTX tokenizer and parser build the right IR and
 * refuse bad input with the line and column of the offending token. */
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

static rw__func_t *func(const rw_ptx_module_t *m, const char *name) {
  rw__func_t *f = rw__find_func(m, name);
  assert_non_null(f);
  return f;
}

/* The n-th instruction of f whose opcode is op (0-based). */
static const rw__stmt_t *insn(const rw__func_t *f, const char *op, int n) {
  for (size_t i = 0; i < f->body.n; i++) {
    const rw__stmt_t *s = f->body.v[i];
    if (s->kind == RW__ST_INSN && strcmp(s->opcode, op) == 0 && n-- == 0)
      return s;
  }
  fail_msg("no %s", op);
  return NULL;
}

static void op_text(const rw__opnd_t *op, char *buf, size_t len) {
  rw__buf_t b = {0};
  rw__print_toks(&b, op->toks, op->ntoks, false);
  assert_int_equal(b.err, 0);
  snprintf(buf, len, "%s", b.p);
  free(b.p);
}

static void parse_builds_functions_params_and_decls(void **state) {
  (void)state;
  size_t len;
  char *text = load("features.ptx", &len);
  rw_ptx_module_t *m;
  rw_diag_t d = {0};
  assert_int_equal(rw_ptx_parse(text, len, &m, &d), 0);
  assert_int_equal(rw_ptx_entry_count(m), 1);
  assert_string_equal(rw_ptx_entry_name(m, 0), "features");
  assert_null(rw_ptx_entry_name(m, 1));

  rw__func_t *f = func(m, "features");
  assert_true(f->is_entry);
  assert_int_equal(f->nparams, 3);
  assert_string_equal(f->params[0].name, "features_param_0");
  assert_string_equal(f->params[1].name, "features_param_1");
  assert_int_equal(f->nperf_toks, 8); /* .maxntid 256 , 1 , 1 .minnctapersm 2 */
  rw__func_t *g = func(m, "addone");
  assert_false(g->is_entry);
  assert_true(g->has_ret);
  assert_int_equal(g->nrets, 1);
  assert_string_equal(g->rets[0].name, "func_retval0");

  /* top level: directives, declarations, the extern prototype */
  int decls = 0, funcs = 0, dirs = 0;
  for (size_t i = 0; i < m->top.n; i++) {
    decls += m->top.v[i]->kind == RW__ST_DECL;
    funcs += m->top.v[i]->kind == RW__ST_FUNC;
    dirs += m->top.v[i]->kind == RW__ST_DIRECTIVE;
  }
  assert_int_equal(decls, 8);
  assert_int_equal(funcs, 3);
  assert_int_equal(dirs, 3);

  /* body: register ranges, scopes balanced, the pragma */
  int open = 0, close = 0, pragmas = 0, regs = 0;
  for (size_t i = 0; i < f->body.n; i++) {
    const rw__stmt_t *s = f->body.v[i];
    open += s->kind == RW__ST_OPEN;
    close += s->kind == RW__ST_CLOSE;
    pragmas += s->kind == RW__ST_DIRECTIVE && strcmp(s->name, ".pragma") == 0;
    regs += s->kind == RW__ST_DECL && strcmp(s->name, ".reg") == 0;
  }
  assert_int_equal(open, 3);
  assert_int_equal(close, 3);
  assert_int_equal(pragmas, 1);
  assert_int_equal(regs, 9); /* 7 at the top, one per nested scope */
  free(text);
  rw_ptx_free(m);
}

static void parse_classifies_operands(void **state) {
  (void)state;
  size_t len;
  char *text = load("features.ptx", &len);
  rw_ptx_module_t *m;
  char buf[128];
  assert_int_equal(rw_ptx_parse(text, len, &m, NULL), 0);
  rw__func_t *f = func(m, "features");

  const rw__stmt_t *s = insn(f, "shfl", 0);
  assert_int_equal(s->nmods, 3);
  assert_string_equal(s->mods[1], ".bfly");
  assert_int_equal(s->nops, 5);
  assert_int_equal(s->ops[0].kind, RW__OP_REG);
  op_text(&s->ops[0], buf, sizeof(buf));
  assert_string_equal(buf, "%r7|%p2");
  assert_int_equal(s->ops[4].kind, RW__OP_IMM); /* -1 */

  s = insn(f, "bra", 1); /* @!%p3 bra $L__BB0_2 */
  assert_string_equal(s->pred, "%p3");
  assert_true(s->pred_neg);
  assert_int_equal(s->ops[0].kind, RW__OP_SYM);

  s = insn(f, "ld", 5); /* ld.shared.v2.u32 {%r12, %r13}, [%r11+-8] */
  assert_int_equal(s->ops[0].kind, RW__OP_VEC);
  assert_int_equal(s->ops[1].kind, RW__OP_ADDR);
  op_text(&s->ops[1], buf, sizeof(buf));
  assert_string_equal(buf, "[%r11+-8]");

  s = insn(f, "fma", 0);
  assert_int_equal(s->ops[3].kind, RW__OP_IMM);
  op_text(&s->ops[3], buf, sizeof(buf));
  assert_string_equal(buf, "0f3F800000");

  s = insn(f, "call", 0); /* call.uni (retval0), addone, (param0) across lines */
  assert_int_equal(s->nops, 3);
  assert_int_equal(s->ops[0].kind, RW__OP_LIST);
  assert_int_equal(s->ops[1].kind, RW__OP_SYM);
  assert_string_equal(s->ops[1].toks[0].text, "addone");

  s = insn(f, "mov", 2); /* mov.u32 %r2, %ctaid.x: the component is a token */
  assert_int_equal(s->ops[1].ntoks, 2);
  assert_string_equal(s->ops[1].toks[1].text, ".x");

  s = insn(f, "ld", 8); /* ld.global.nc.L1::no_allocate.u32 */
  assert_string_equal(s->mods[2], ".L1::no_allocate");
  free(text);
  rw_ptx_free(m);
}

/* Each bad input, and where (line:col) and why it must be refused. */
static const struct bad_case {
  const char *text;
  int line, col;
  const char *why;
} bad_cases[] = {
    {".version 8.0\n.target sm_90\n.entry k()\n{\n\tmov.u32 %r1 %r2;\n}\n", 5, 14,
     "malformed operand"},
    {".version 8.0\n.entry k()\n{\n\tret\n}\n", 5, 1, "unbalanced"},
    {".version 8.0\n\n.entry k()\n{\n\tret;\n", 6, 1, "unterminated function body"},
    {".version 8.0\n.global .u32 x = \"abc;\n", 2, 18, "unterminated string"},
    {"#include <x>\n", 1, 1, "preprocessor"},
    {".version 8.0\n.bogus 1;\n", 2, 1, "unknown directive"},
    {".version 8.0\n.entry k()\n{\n\t.frob 1;\n}\n", 4, 2, "unknown directive in a function body"},
    {".entry k(.param .u32 a b)\n{\n}\n", 1, 24, "two names"},
    {".entry k()\n{\n\t@ 1 bra L;\n}\n", 3, 4, "predicate"},
    {".reg .b32 %r<x>;\n", 1, 14, "register count"},
    {".entry k()\n{\n\tadd.s32 %r1, %r2,;\n}\n", 3, 19, "expected an operand"},
    {".entry k()\n{\n\tld.u32 %r1, [%r2;\n}\n", 3, 18, "unbalanced"},
    {".entry k()\n{\n\tmov.u32 %r1, 1;\x01\n}\n", 3, 17, "unexpected byte 0x01"},
    {"/* open comment\n.entry", 1, 1, "unterminated comment"},
    {".entry k()\n.maxntid 1\n", 3, 1, "expected '{' or ';'"},
    {".section .debug_info { .b8 1\n", 2, 1, "unterminated section"},
    {".version 8.0\n.pragma \"a\x01"
     "b\";\n",
     2, 11, "byte 0x01 in a string"},
};

static void parse_reports_line_column_and_reason(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
    const struct bad_case *c = &bad_cases[i];
    rw_ptx_module_t *m = (rw_ptx_module_t *)0x1;
    rw_diag_t d = {0};
    int rc = rw_ptx_parse(c->text, strlen(c->text), &m, &d);
    if (rc != -EPROTO || d.line != c->line || d.column != c->col || !strstr(d.text, c->why))
      fail_msg("case %zu: rc %d at %d:%d '%s', want %d:%d '%s'", i, rc, d.line, d.column, d.text,
               c->line, c->col, c->why);
    assert_null(m);
  }
}

static void parse_refuses_text_over_the_size_limit(void **state) {
  (void)state;
  rw_ptx_module_t *m;
  rw_diag_t d = {0};
  /* the length is checked before a byte is read */
  assert_int_equal(rw_ptx_parse("", (size_t)RW_PTX_MAX_LEN + 1, &m, &d), -EMSGSIZE);
  assert_null(m);
}

/* Every prefix of a real module, in a buffer of exactly that size (so the
 * sanitizer sees any read past it), parses or is refused with EPROTO. */
static void parse_reads_no_byte_past_len_on_any_prefix(void **state) {
  (void)state;
  size_t len;
  char *text = load("barriers.ptx", &len);
  int ok = 0, refused = 0;
  for (size_t n = 0; n <= len; n++) {
    char *p = malloc(n ? n : 1);
    rw_ptx_module_t *m;
    rw_diag_t d = {0};
    memcpy(p, text, n);
    int rc = rw_ptx_parse(p, n, &m, &d);
    assert_true(rc == 0 || rc == -EPROTO);
    if (rc == 0) {
      char *out;
      assert_int_equal(rw_ptx_print(m, &out, NULL), 0);
      free(out);
      ok++;
    } else {
      assert_true(d.line >= 1);
      refused++;
    }
    rw_ptx_free(m);
    free(p);
  }
  assert_true(ok > 0 && refused > 0);
  free(text);
}

static void lexer_keeps_dotted_words_and_numbers_whole(void **state) {
  (void)state;
  rw__arena_t a = {0};
  rw__tok_t *t;
  size_t n;
  const char *src =
      "cp.async.bulk.tensor.2d.shared::cluster 0f3F800000 1.5e-3 0x1F -4 @@DWARF x y\n";
  assert_int_equal(rw__lex(&a, src, strlen(src), &t, &n, NULL), 0);
  const char *want[] = {"cp",         ".async", ".bulk", ".tensor", ".2d", ".shared::cluster",
                        "0f3F800000", "1.5e-3", "0x1F",  "-",       "4",   "@@DWARF x y"};
  assert_int_equal(n, sizeof(want) / sizeof(want[0]) + 1);
  for (size_t i = 0; i < n - 1; i++)
    assert_string_equal(t[i].text, want[i]);
  assert_int_equal(t[n - 2].kind, RW__TOK_RAWLINE);
  assert_int_equal(t[n - 1].kind, RW__TOK_EOF);
  rw__arena_free(&a);
}

static void printer_writes_predicates_and_operands(void **state) {
  (void)state;
  const char *src = ".version 8.0\n.target sm_90\n.entry k()\n{\n.reg .pred %p<2>;\n"
                    "@!%p1 bra $L1;\n$L1:\nshfl.sync.up.b32 r0|p, %r1, 1, 0, -1;\nret;\n}\n";
  rw_ptx_module_t *m;
  char *out;
  assert_int_equal(rw_ptx_parse(src, strlen(src), &m, NULL), 0);
  assert_int_equal(rw_ptx_print(m, &out, NULL), 0);
  assert_non_null(strstr(out, "\t@!%p1 bra \t$L1;\n$L1:\n"));
  assert_non_null(strstr(out, "\tshfl.sync.up.b32 \tr0|p, %r1, 1, 0, -1;\n"));
  assert_non_null(strstr(out, ".entry k()\n{\n"));
  free(out);
  rw_ptx_free(m);
}

static void trailing_nuls_end_the_text_but_inner_ones_are_refused(void **state) {
  (void)state;
  static const char ok[] = ".version 8.0\n.target sm_90\n\0\0";
  static const char bad[] = ".version 8.0\n\0.target sm_90\n";
  rw_ptx_module_t *m;
  rw_diag_t d = {0};
  assert_int_equal(rw_ptx_parse(ok, sizeof(ok), &m, &d), 0); /* sizeof counts 3 NULs */
  rw_ptx_free(m);
  assert_int_equal(rw_ptx_parse(bad, sizeof(bad) - 1, &m, &d), -EPROTO);
  assert_int_equal(d.line, 2);
  assert_int_equal(d.column, 1);
}

static void opcode_table_is_sorted_and_unique(void **state) {
  (void)state;
  const char *const *v;
  size_t n = rw__opcode_table(&v);
  assert_true(n > 100);
  for (size_t i = 1; i < n; i++)
    if (strcmp(v[i - 1], v[i]) >= 0)
      fail_msg("%s before %s", v[i - 1], v[i]);
  assert_true(rw__opcode_known("wgmma"));
  assert_false(rw__opcode_known("frobnicate"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(parse_builds_functions_params_and_decls),
      cmocka_unit_test(parse_classifies_operands),
      cmocka_unit_test(parse_reports_line_column_and_reason),
      cmocka_unit_test(parse_refuses_text_over_the_size_limit),
      cmocka_unit_test(parse_reads_no_byte_past_len_on_any_prefix),
      cmocka_unit_test(lexer_keeps_dotted_words_and_numbers_whole),
      cmocka_unit_test(printer_writes_predicates_and_operands),
      cmocka_unit_test(trailing_nuls_end_the_text_but_inner_ones_are_refused),
      cmocka_unit_test(opcode_table_is_sorted_and_unique),
  };
  return cmocka_run_group_tests_name("rw-ptx-parse", tests, NULL, NULL);
}
