/* ptx-print.c: prints the IR back as PTX text.
 *
 * Instructions are printed from their structure (predicate, opcode,
 * modifiers, operands), one per line; everything else from its tokens, with
 * a space wherever the source had whitespace (so tokens never merge) and,
 * in .section bodies and performance directives, a newline wherever the
 * source had one (debug data in sections is line-oriented).  Comments are
 * not kept.  The result means the same to ptxas as the input did.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void rw__print_toks(rw__buf_t *b, const rw__tok_t *t, size_t n, bool keep_newlines) {
  for (size_t i = 0; i < n; i++) {
    if (i > 0) {
      if (keep_newlines && t[i].nl)
        rw__buf_puts(b, "\n");
      else if (t[i].space || t[i].nl)
        rw__buf_puts(b, " ");
    }
    rw__buf_puts(b, t[i].text);
  }
}

static void print_insn(rw__buf_t *b, const rw__stmt_t *s) {
  rw__buf_puts(b, "\t");
  if (s->pred != NULL) {
    rw__buf_puts(b, s->pred_neg ? "@!" : "@");
    rw__buf_puts(b, s->pred);
    rw__buf_puts(b, " ");
  }
  rw__buf_puts(b, s->opcode);
  for (size_t i = 0; i < s->nmods; i++)
    rw__buf_puts(b, s->mods[i]);
  for (size_t i = 0; i < s->nops; i++) {
    rw__buf_puts(b, i == 0 ? " \t" : ", ");
    rw__print_toks(b, s->ops[i].toks, s->ops[i].ntoks, false);
  }
  rw__buf_puts(b, ";\n");
}

static void print_params(rw__buf_t *b, const rw__param_t *v, size_t n, bool one_per_line) {
  rw__buf_puts(b, "(");
  for (size_t i = 0; i < n; i++) {
    rw__buf_puts(b, one_per_line ? "\n\t" : "");
    rw__print_toks(b, v[i].toks, v[i].ntoks, false);
    if (i + 1 < n)
      rw__buf_puts(b, one_per_line ? "," : ", ");
  }
  rw__buf_puts(b, one_per_line && n ? "\n)" : ")");
}

static void print_func(rw__buf_t *b, const rw__func_t *f) {
  if (f->nlink) {
    rw__print_toks(b, f->link, f->nlink, false);
    rw__buf_puts(b, " ");
  }
  rw__buf_puts(b, f->is_entry ? ".entry " : ".func ");
  if (f->has_ret) {
    print_params(b, f->rets, f->nrets, false);
    rw__buf_puts(b, " ");
  }
  rw__buf_puts(b, f->name);
  if (f->has_params)
    print_params(b, f->params, f->nparams, true);
  if (f->nperf_toks) {
    rw__buf_puts(b, "\n");
    rw__print_toks(b, f->perf_toks, f->nperf_toks, true);
  }
  if (!f->has_body) {
    rw__buf_puts(b, "\n;\n");
    return;
  }
  rw__buf_puts(b, "\n{\n");
  for (size_t i = 0; i < f->body.n; i++)
    rw__print_stmt(b, f->body.v[i]);
  rw__buf_puts(b, "}\n");
}

void rw__print_stmt(rw__buf_t *b, const rw__stmt_t *s) {
  switch (s->kind) {
  case RW__ST_INSN:
    print_insn(b, s);
    break;
  case RW__ST_LABEL:
    rw__buf_puts(b, s->name);
    rw__buf_puts(b, ":\n");
    break;
  case RW__ST_OPEN:
    rw__buf_puts(b, "\t{\n");
    break;
  case RW__ST_CLOSE:
    rw__buf_puts(b, "\t}\n");
    break;
  case RW__ST_FUNC:
    print_func(b, s->func);
    break;
  case RW__ST_DECL:
  case RW__ST_DIRECTIVE:
  default:
    rw__buf_puts(b, "\t");
    rw__print_toks(b, s->toks, s->ntoks, strcmp(s->name, ".section") == 0);
    rw__buf_puts(b, "\n");
    break;
  }
}

int rw_ptx_print(const rw_ptx_module_t *m, char **out, size_t *out_len) {
  rw__buf_t b = {0};
  for (size_t i = 0; i < m->top.n; i++) {
    const rw__stmt_t *s = m->top.v[i];
    if (s->kind == RW__ST_FUNC)
      rw__buf_puts(&b, "\n");
    rw__print_stmt(&b, s);
  }
  rw__buf_puts(&b, ""); /* a NUL even for an empty module */
  if (b.err) {
    free(b.p);
    return b.err;
  }
  *out = b.p;
  if (out_len)
    *out_len = b.len;
  return 0;
}
