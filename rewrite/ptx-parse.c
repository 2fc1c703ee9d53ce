/* ptx-parse.c: recursive-descent parser from PTX tokens to the IR of
 * rw-int.h.
 *
 * Grammar (PTX ISA 9.0 sections 4-5, 10-11), as this parser reads it:
 *   module    := { line-directive | section | pragma | decl | function }
 *   line-dir  := (.version | .target | .address_size | .file | .loc) tokens-to-end-of-line
 *   section   := .section NAME { balanced tokens }        (debug data, verbatim)
 *   decl      := linkage* space { attr } item { , item } ;
 *   item      := NAME [ < N > ] { [ [N] ] } [ = balanced-initializer ]
 *   function  := linkage* (.entry | .func) [ ( params ) ] NAME [ ( params ) ]
 *                { perf-directive } ( ; | { body } )
 *   body      := { { | } | label : | decl | .loc... | .pragma ...; | .callprototype ...;
 *                | [ @ [!] PRED ] OPCODE { .mod } [ operand { , operand } ] ; }
 *   operand   := balanced tokens up to a top-level , or ;
 * Anything else is refused with the line and column of the offending token.
 * The parser never recurses on input structure (scopes are OPEN/CLOSE
 * statements, operand nesting is a counter), so deep nesting cannot exhaust
 * the stack; depths are capped to keep diagnostics meaningful.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Deepest { } nesting accepted in a function body: nvcc nests call
 * sequences and inline asm a few levels; 256 is far past any real code. */
#define MAX_SCOPE_DEPTH 256
/* Deepest bracket nesting inside one operand or initializer ([ { ( ). */
#define MAX_OPERAND_DEPTH 64

typedef struct parser {
  rw_ptx_module_t *m;
  rw__tok_t *t;
  size_t n, i; /* t[n-1] is the EOF token; i < n always */
  rw_diag_t *d;
} parser_t;

static rw__tok_t *cur(parser_t *p) {
  return &p->t[p->i];
}
static rw__tok_t *ahead(parser_t *p, size_t k) {
  return p->i + k < p->n ? &p->t[p->i + k] : &p->t[p->n - 1];
}
static void next(parser_t *p) {
  if (p->i + 1 < p->n)
    p->i++;
}
static bool at_punct(parser_t *p, const char *s) {
  return cur(p)->kind == RW__TOK_PUNCT && rw__tok_is(cur(p), s);
}
static bool at_dot(parser_t *p, const char *s) {
  return cur(p)->kind == RW__TOK_DOTWORD && rw__tok_is(cur(p), s);
}

static int fail(parser_t *p, const rw__tok_t *t, const char *what) {
  if (t->kind == RW__TOK_EOF)
    return rw_diag_set(p->d, -EPROTO, t->line, t->col, "%s at end of input", what);
  return rw_diag_set(p->d, -EPROTO, t->line, t->col, "%s, found '%.40s'", what, t->text);
}

static rw__stmt_t *new_stmt(parser_t *p, int kind, size_t first) {
  rw__stmt_t *s = rw__alloc(&p->m->arena, sizeof(*s));
  if (s == NULL)
    return NULL;
  s->kind = kind;
  s->line = p->t[first].line;
  s->col = p->t[first].col;
  s->toks = &p->t[first];
  s->ntoks = p->i - first;
  return s;
}

static bool is_linkage(const rw__tok_t *t) {
  return t->kind == RW__TOK_DOTWORD && (rw__tok_is(t, ".visible") || rw__tok_is(t, ".extern") ||
                                        rw__tok_is(t, ".weak") || rw__tok_is(t, ".common"));
}

static bool is_space(const rw__tok_t *t) {
  static const char *const spaces[] = {".reg",    ".sreg",    ".const",     ".global",
                                       ".local",  ".param",   ".shared",    ".tex",
                                       ".texref", ".surfref", ".samplerref"};
  if (t->kind != RW__TOK_DOTWORD)
    return false;
  for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++)
    if (rw__tok_is(t, spaces[i]))
      return true;
  return false;
}

/* Directives that run to the end of their line (no ';'). */
static bool is_line_directive(const rw__tok_t *t) {
  return t->kind == RW__TOK_DOTWORD &&
         (rw__tok_is(t, ".version") || rw__tok_is(t, ".target") || rw__tok_is(t, ".address_size") ||
          rw__tok_is(t, ".file") || rw__tok_is(t, ".loc"));
}

/* Consumes the rest of the current line (tokens not preceded by a newline). */
static int line_directive(parser_t *p, rw__stmt_vec_t *out) {
  size_t first = p->i;
  next(p);
  while (cur(p)->kind != RW__TOK_EOF && !cur(p)->nl) {
    if (cur(p)->kind == RW__TOK_RAWLINE || at_punct(p, ";") || at_punct(p, "{") || at_punct(p, "}"))
      return fail(p, cur(p), "unexpected token in a line directive");
    next(p);
  }
  rw__stmt_t *s = new_stmt(p, RW__ST_DIRECTIVE, first);
  if (s == NULL)
    return -ENOMEM;
  s->name = p->t[first].text;
  return rw__vec_push(out, s);
}

/* Consumes balanced tokens up to (not including) a top-level ',' or ';'
 * (and, when stop_paren, a top-level ')').  Refuses empty runs, unbalanced
 * brackets, end of input and raw lines. */
static int balanced(parser_t *p, bool stop_paren, const char *what) {
  int depth = 0;
  size_t first = p->i;
  for (;;) {
    rw__tok_t *t = cur(p);
    if (t->kind == RW__TOK_EOF || t->kind == RW__TOK_RAWLINE)
      return fail(p, t, "unterminated statement");
    if (t->kind == RW__TOK_PUNCT) {
      if (depth == 0 &&
          (rw__tok_is(t, ",") || rw__tok_is(t, ";") || (stop_paren && rw__tok_is(t, ")"))))
        break;
      if (rw__tok_is(t, ";"))
        return fail(p, t, "unbalanced brackets");
      if (rw__tok_is(t, "[") || rw__tok_is(t, "{") || rw__tok_is(t, "(")) {
        if (++depth > MAX_OPERAND_DEPTH)
          return fail(p, t, "brackets nested too deep");
      } else if (rw__tok_is(t, "]") || rw__tok_is(t, "}") || rw__tok_is(t, ")")) {
        if (--depth < 0)
          return fail(p, t, "unbalanced brackets");
      }
    }
    next(p);
  }
  if (p->i == first)
    return fail(p, cur(p), what);
  return 0;
}

/* decl (see the grammar above); p->i is at the state space, first at the
 * first linkage token. */
static int decl(parser_t *p, size_t first, rw__stmt_vec_t *out) {
  const char *space = cur(p)->text;
  int rc;
  next(p);
  while (cur(p)->kind == RW__TOK_DOTWORD) {
    if (at_dot(p, ".align")) {
      next(p);
      if (cur(p)->kind != RW__TOK_NUMBER)
        return fail(p, cur(p), "expected a number after .align");
      next(p);
    } else if (at_dot(p, ".attribute")) {
      next(p);
      if (!at_punct(p, "("))
        return fail(p, cur(p), "expected '(' after .attribute");
      next(p);
      if ((rc = balanced(p, true, "expected an attribute")) < 0)
        return rc;
      if (!at_punct(p, ")"))
        return fail(p, cur(p), "expected ')'");
      next(p);
    } else {
      next(p);
    }
  }
  for (;;) {
    if (cur(p)->kind != RW__TOK_IDENT)
      return fail(p, cur(p), "expected a name in a declaration");
    next(p);
    if (at_punct(p, "<")) {
      next(p);
      if (cur(p)->kind != RW__TOK_NUMBER)
        return fail(p, cur(p), "expected a register count");
      next(p);
      if (!at_punct(p, ">"))
        return fail(p, cur(p), "expected '>'");
      next(p);
    }
    while (at_punct(p, "[")) {
      next(p);
      if (cur(p)->kind == RW__TOK_NUMBER)
        next(p);
      if (!at_punct(p, "]"))
        return fail(p, cur(p), "expected ']'");
      next(p);
    }
    if (at_punct(p, "=")) {
      next(p);
      if ((rc = balanced(p, false, "expected an initializer")) < 0)
        return rc;
    }
    if (at_punct(p, ";"))
      break;
    if (!at_punct(p, ","))
      return fail(p, cur(p), "expected ',' or ';' in a declaration");
    next(p);
  }
  next(p); /* ; */
  rw__stmt_t *s = new_stmt(p, RW__ST_DECL, first);
  if (s == NULL)
    return -ENOMEM;
  s->name = space;
  return rw__vec_push(out, s);
}

/* A directive that ends with ';' (.pragma, .alias, .callprototype...). */
static int semi_directive(parser_t *p, rw__stmt_vec_t *out) {
  size_t first = p->i;
  int rc;
  next(p);
  while (!at_punct(p, ";")) {
    if (at_punct(p, ","))
      next(p);
    else if ((rc = balanced(p, false, "expected directive arguments")) < 0)
      return rc;
  }
  next(p);
  rw__stmt_t *s = new_stmt(p, RW__ST_DIRECTIVE, first);
  if (s == NULL)
    return -ENOMEM;
  s->name = p->t[first].text;
  return rw__vec_push(out, s);
}

static int param_list(parser_t *p, rw__param_t **out, size_t *nout) {
  size_t cap = 0, n = 0;
  rw__param_t *v = NULL;
  int rc;
  next(p); /* ( */
  while (!at_punct(p, ")")) {
    size_t first = p->i;
    if (cur(p)->kind != RW__TOK_DOTWORD)
      return fail(p, cur(p), "expected .param or .reg");
    if ((rc = balanced(p, true, "expected a parameter")) < 0)
      return rc;
    const char *name = NULL;
    for (size_t k = first; k < p->i; k++) {
      if (p->t[k].kind == RW__TOK_IDENT) {
        if (name != NULL)
          return fail(p, &p->t[k], "parameter has two names");
        name = p->t[k].text;
      }
    }
    if (name == NULL)
      return fail(p, &p->t[first], "parameter without a name");
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 8;
      rw__param_t *nv = rw__alloc(&p->m->arena, ncap * sizeof(*nv));
      if (nv == NULL)
        return -ENOMEM;
      if (n)
        memcpy(nv, v, n * sizeof(*nv));
      v = nv;
      cap = ncap;
    }
    v[n].toks = &p->t[first];
    v[n].ntoks = p->i - first;
    v[n].name = name;
    n++;
    if (at_punct(p, ","))
      next(p);
    else if (!at_punct(p, ")"))
      return fail(p, cur(p), "expected ',' or ')'");
  }
  next(p); /* ) */
  *out = v;
  *nout = n;
  return 0;
}

/* Checks an operand's tokens against its kind; returns the first token that
 * does not fit, or NULL.  Bracketed operands need only be one balanced group
 * (addresses hold texture tuples, offsets, vectors); the rest follow
 *   REG := %name [.comp] [ | %name ]     IMM := [+|-] NUMBER
 *   SYM := name [ (+|-) NUMBER | '|' name ]   NOT := ! name [.comp]       */
static const rw__tok_t *bad_operand(const rw__opnd_t *op) {
  const rw__tok_t *t = op->toks;
  size_t n = op->ntoks, k = 1;
  int depth = 0;
  switch (op->kind) {
  case RW__OP_ADDR:
  case RW__OP_VEC:
  case RW__OP_LIST:
    for (k = 0; k < n; k++) {
      if (t[k].kind != RW__TOK_PUNCT)
        continue;
      if (rw__tok_is(&t[k], "[") || rw__tok_is(&t[k], "{") || rw__tok_is(&t[k], "("))
        depth++;
      else if ((rw__tok_is(&t[k], "]") || rw__tok_is(&t[k], "}") || rw__tok_is(&t[k], ")")) &&
               --depth == 0)
        break;
    }
    return k + 1 < n ? &t[k + 1] : NULL;
  case RW__OP_NOT:
    if (n < 2 || t[1].kind != RW__TOK_IDENT)
      return &t[n < 2 ? 0 : 1];
    k = 2;
    if (k < n && t[k].kind == RW__TOK_DOTWORD && !t[k].space)
      k++;
    break;
  case RW__OP_REG:
    if (k < n && t[k].kind == RW__TOK_DOTWORD && !t[k].space)
      k++;
    if (k < n && t[k].kind == RW__TOK_PUNCT && rw__tok_is(&t[k], "|")) {
      if (k + 1 >= n || t[k + 1].kind != RW__TOK_IDENT)
        return &t[k];
      k += 2;
    }
    break;
  case RW__OP_IMM:
    k = t[0].kind == RW__TOK_NUMBER ? 1 : 2;
    break;
  case RW__OP_SYM:
    if (k + 1 < n && t[k].kind == RW__TOK_PUNCT && rw__tok_is(&t[k], "|") &&
        t[k + 1].kind == RW__TOK_IDENT) {
      k += 2; /* inline asm registers need no '%': shfl.sync r0|p, ... */
      break;
    }
    if (k + 1 < n && t[k].kind == RW__TOK_PUNCT &&
        (rw__tok_is(&t[k], "+") || rw__tok_is(&t[k], "-")) && t[k + 1].kind == RW__TOK_NUMBER)
      k += 2;
    break;
  default:
    return &t[0];
  }
  return k < n ? &t[k] : NULL;
}

static int insn(parser_t *p, rw__stmt_vec_t *out) {
  size_t first = p->i;
  const char *pred = NULL;
  bool neg = false;
  int rc;
  if (at_punct(p, "@")) {
    next(p);
    if (at_punct(p, "!")) {
      neg = true;
      next(p);
    }
    if (cur(p)->kind != RW__TOK_IDENT)
      return fail(p, cur(p), "expected a predicate after '@'");
    pred = cur(p)->text;
    next(p);
  }
  if (cur(p)->kind != RW__TOK_IDENT)
    return fail(p, cur(p), "expected an instruction");
  rw__stmt_t *s = new_stmt(p, RW__ST_INSN, first);
  if (s == NULL)
    return -ENOMEM;
  s->pred = pred;
  s->pred_neg = neg;
  s->opcode = cur(p)->text;
  next(p);
  size_t mod0 = p->i;
  while (cur(p)->kind == RW__TOK_DOTWORD && !cur(p)->space)
    next(p);
  s->nmods = p->i - mod0;
  if (s->nmods) {
    s->mods = rw__alloc(&p->m->arena, s->nmods * sizeof(*s->mods));
    if (s->mods == NULL)
      return -ENOMEM;
    for (size_t k = 0; k < s->nmods; k++)
      s->mods[k] = p->t[mod0 + k].text;
  }
  /* operands: count first, then record */
  size_t op0 = p->i, nops = 0;
  while (!at_punct(p, ";")) {
    if ((rc = balanced(p, false, "expected an operand")) < 0)
      return rc;
    nops++;
    if (at_punct(p, ",")) {
      next(p);
      if (at_punct(p, ";"))
        return fail(p, cur(p), "expected an operand");
    }
  }
  s->nops = nops;
  if (nops) {
    s->ops = rw__alloc(&p->m->arena, nops * sizeof(*s->ops));
    if (s->ops == NULL)
      return -ENOMEM;
    size_t k = op0;
    for (size_t o = 0; o < nops; o++) {
      size_t start = k;
      int depth = 0;
      while (!(depth == 0 && p->t[k].kind == RW__TOK_PUNCT &&
               (rw__tok_is(&p->t[k], ",") || rw__tok_is(&p->t[k], ";")))) {
        const rw__tok_t *t = &p->t[k];
        if (t->kind == RW__TOK_PUNCT) {
          if (rw__tok_is(t, "[") || rw__tok_is(t, "{") || rw__tok_is(t, "("))
            depth++;
          else if (rw__tok_is(t, "]") || rw__tok_is(t, "}") || rw__tok_is(t, ")"))
            depth--;
        }
        k++;
      }
      rw__opnd_t *op = &s->ops[o];
      op->toks = &p->t[start];
      op->ntoks = k - start;
      const rw__tok_t *f = op->toks;
      if (f->kind == RW__TOK_PUNCT && rw__tok_is(f, "["))
        op->kind = RW__OP_ADDR;
      else if (f->kind == RW__TOK_PUNCT && rw__tok_is(f, "{"))
        op->kind = RW__OP_VEC;
      else if (f->kind == RW__TOK_PUNCT && rw__tok_is(f, "("))
        op->kind = RW__OP_LIST;
      else if (f->kind == RW__TOK_PUNCT && rw__tok_is(f, "!"))
        op->kind = RW__OP_NOT;
      else if (f->kind == RW__TOK_IDENT && f->text[0] == '%')
        op->kind = RW__OP_REG;
      else if (f->kind == RW__TOK_IDENT)
        op->kind = RW__OP_SYM;
      else if (f->kind == RW__TOK_NUMBER ||
               (f->kind == RW__TOK_PUNCT && (rw__tok_is(f, "-") || rw__tok_is(f, "+")) &&
                op->ntoks == 2 && op->toks[1].kind == RW__TOK_NUMBER))
        op->kind = RW__OP_IMM;
      else
        op->kind = RW__OP_EXPR;
      const rw__tok_t *bad = bad_operand(op);
      if (bad != NULL)
        return fail(p, bad, "malformed operand");
      k++; /* , or ; */
    }
  }
  next(p); /* ; */
  s->ntoks = p->i - first;
  return rw__vec_push(out, s);
}

/* One body statement.  *depth tracks open scopes; returns 1 when the
 * closing brace of depth 0 was consumed (end of a function body). */
static int body_stmt(parser_t *p, rw__stmt_vec_t *out, int *depth) {
  rw__tok_t *t = cur(p);
  size_t first = p->i;
  rw__stmt_t *s;

  if (t->kind == RW__TOK_PUNCT && rw__tok_is(t, "{")) {
    if (++*depth > MAX_SCOPE_DEPTH)
      return fail(p, t, "scopes nested too deep");
    next(p);
    if ((s = new_stmt(p, RW__ST_OPEN, first)) == NULL)
      return -ENOMEM;
    return rw__vec_push(out, s);
  }
  if (t->kind == RW__TOK_PUNCT && rw__tok_is(t, "}")) {
    if (*depth == 0) {
      next(p);
      return 1;
    }
    --*depth;
    next(p);
    if ((s = new_stmt(p, RW__ST_CLOSE, first)) == NULL)
      return -ENOMEM;
    return rw__vec_push(out, s);
  }
  if (t->kind == RW__TOK_IDENT && ahead(p, 1)->kind == RW__TOK_PUNCT &&
      rw__tok_is(ahead(p, 1), ":")) {
    next(p);
    next(p);
    if ((s = new_stmt(p, RW__ST_LABEL, first)) == NULL)
      return -ENOMEM;
    s->name = t->text;
    return rw__vec_push(out, s);
  }
  if (t->kind == RW__TOK_RAWLINE) {
    next(p);
    if ((s = new_stmt(p, RW__ST_DIRECTIVE, first)) == NULL)
      return -ENOMEM;
    s->name = "@@DWARF";
    return rw__vec_push(out, s);
  }
  if (t->kind == RW__TOK_DOTWORD) {
    if (is_space(t))
      return decl(p, first, out);
    if (is_line_directive(t))
      return line_directive(p, out);
    if (rw__tok_is(t, ".pragma") || rw__tok_is(t, ".callprototype") ||
        rw__tok_is(t, ".branchtargets") || rw__tok_is(t, ".calltargets"))
      return semi_directive(p, out);
    return fail(p, t, "unknown directive in a function body");
  }
  if (t->kind == RW__TOK_IDENT || (t->kind == RW__TOK_PUNCT && rw__tok_is(t, "@")))
    return insn(p, out);
  if (t->kind == RW__TOK_EOF)
    return fail(p, t, "unterminated function body");
  return fail(p, t, "expected a statement");
}

static int function(parser_t *p, size_t first, rw__stmt_vec_t *out) {
  rw__func_t *f = rw__alloc(&p->m->arena, sizeof(*f));
  int rc;
  if (f == NULL)
    return -ENOMEM;
  f->link = &p->t[first];
  f->nlink = p->i - first;
  f->is_entry = at_dot(p, ".entry");
  next(p);
  if (!f->is_entry && at_punct(p, "(")) {
    f->has_ret = true;
    if ((rc = param_list(p, &f->rets, &f->nrets)) < 0)
      return rc;
  }
  if (cur(p)->kind != RW__TOK_IDENT)
    return fail(p, cur(p), "expected a function name");
  f->name = cur(p)->text;
  next(p);
  if (at_punct(p, "(")) {
    f->has_params = true;
    if ((rc = param_list(p, &f->params, &f->nparams)) < 0)
      return rc;
  }
  size_t perf0 = p->i;
  while (cur(p)->kind == RW__TOK_DOTWORD) {
    bool pragma = at_dot(p, ".pragma");
    next(p);
    while (cur(p)->kind == RW__TOK_NUMBER || cur(p)->kind == RW__TOK_STRING || at_punct(p, ","))
      next(p);
    if (pragma) {
      if (!at_punct(p, ";"))
        return fail(p, cur(p), "expected ';' after .pragma");
      next(p);
    }
  }
  f->perf_toks = &p->t[perf0];
  f->nperf_toks = p->i - perf0;
  if (at_punct(p, ";")) {
    next(p);
  } else if (at_punct(p, "{")) {
    int depth = 0;
    f->has_body = true;
    if ((rc = rw__module_track(p->m, &f->body)) < 0)
      return rc;
    next(p);
    while ((rc = body_stmt(p, &f->body, &depth)) == 0)
      ;
    if (rc < 0)
      return rc;
  } else {
    return fail(p, cur(p), "expected '{' or ';' after a function header");
  }
  rw__stmt_t *s = new_stmt(p, RW__ST_FUNC, first);
  if (s == NULL)
    return -ENOMEM;
  s->func = f;
  s->name = f->name;
  return rw__vec_push(out, s);
}

static int section(parser_t *p, rw__stmt_vec_t *out) {
  size_t first = p->i;
  int depth = 0;
  next(p);
  if (cur(p)->kind != RW__TOK_DOTWORD && cur(p)->kind != RW__TOK_IDENT)
    return fail(p, cur(p), "expected a section name");
  next(p);
  while (at_punct(p, ",") || cur(p)->kind == RW__TOK_STRING || at_punct(p, "@") ||
         (cur(p)->kind == RW__TOK_IDENT && !cur(p)->nl))
    next(p); /* ELF-style flags: , "", @progbits */
  if (!at_punct(p, "{"))
    return fail(p, cur(p), "expected '{' after .section");
  do {
    if (cur(p)->kind == RW__TOK_EOF)
      return fail(p, cur(p), "unterminated section");
    if (at_punct(p, "{") && ++depth > MAX_OPERAND_DEPTH)
      return fail(p, cur(p), "braces nested too deep");
    if (at_punct(p, "}"))
      depth--;
    next(p);
  } while (depth > 0);
  rw__stmt_t *s = new_stmt(p, RW__ST_DIRECTIVE, first);
  if (s == NULL)
    return -ENOMEM;
  s->name = ".section";
  return rw__vec_push(out, s);
}

static int top_stmt(parser_t *p) {
  rw__tok_t *t = cur(p);
  size_t first = p->i;
  if (t->kind == RW__TOK_RAWLINE) {
    next(p);
    rw__stmt_t *s = new_stmt(p, RW__ST_DIRECTIVE, first);
    if (s == NULL)
      return -ENOMEM;
    s->name = "@@DWARF";
    return rw__vec_push(&p->m->top, s);
  }
  if (t->kind != RW__TOK_DOTWORD)
    return fail(p, t, "expected a directive");
  if (is_line_directive(t))
    return line_directive(p, &p->m->top);
  if (rw__tok_is(t, ".section"))
    return section(p, &p->m->top);
  if (rw__tok_is(t, ".pragma") || rw__tok_is(t, ".alias"))
    return semi_directive(p, &p->m->top);
  while (is_linkage(cur(p)))
    next(p);
  if (at_dot(p, ".entry") || at_dot(p, ".func"))
    return function(p, first, &p->m->top);
  if (is_space(cur(p)))
    return decl(p, first, &p->m->top);
  return fail(p, cur(p), "unknown directive");
}

int rw_ptx_parse(const char *text, size_t len, rw_ptx_module_t **out, rw_diag_t *d) {
  parser_t p = {.d = d};
  int rc;
  *out = NULL;
  if (len > RW_PTX_MAX_LEN)
    return rw_diag_set(d, -EMSGSIZE, 0, 0, "PTX of %zu bytes exceeds the %u-byte limit", len,
                       RW_PTX_MAX_LEN);
  p.m = calloc(1, sizeof(*p.m));
  if (p.m == NULL)
    return rw_diag_set(d, -ENOMEM, 0, 0, "out of memory");
  if ((rc = rw__lex(&p.m->arena, text, len, &p.t, &p.n, d)) < 0)
    goto fail;
  while (cur(&p)->kind != RW__TOK_EOF)
    if ((rc = top_stmt(&p)) < 0)
      goto fail;
  *out = p.m;
  return 0;
fail:
  if (rc == -ENOMEM)
    rw_diag_set(d, -ENOMEM, 0, 0, "out of memory");
  rw_ptx_free(p.m);
  return rc;
}

int rw__parse_body_text(rw_ptx_module_t *m, const char *text, rw__stmt_vec_t *out, rw_diag_t *d) {
  parser_t p = {.m = m, .d = d};
  int depth = 0, rc;
  if ((rc = rw__lex(&m->arena, text, strlen(text), &p.t, &p.n, d)) < 0)
    return rc;
  while (cur(&p)->kind != RW__TOK_EOF) {
    rc = body_stmt(&p, out, &depth);
    if (rc == 1)
      return fail(&p, &p.t[p.i - 1], "unbalanced '}'");
    if (rc < 0)
      return rc;
  }
  if (depth != 0)
    return fail(&p, cur(&p), "unclosed '{'");
  return 0;
}
