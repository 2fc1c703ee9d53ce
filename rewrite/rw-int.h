/* rw-int.h: declarations shared by rewrite/'s own .c files (not public).
 *
 * The PTX IR.  A module is a flat array of top-level statements; a function
 * body is a flat array of body statements in which scopes are explicit
 * OPEN/CLOSE statements.  Every statement keeps the tokens it was parsed from
 * (each token remembers whether whitespace or a newline preceded it), so the
 * printer can reproduce directives, declarations and debug sections without
 * knowing every one of them; instructions are printed from their structure
 * (predicate, opcode, modifiers, operands) because transformations edit them.
 *
 * Memory: everything a module points to lives in its arena and is freed at
 * once by rw_ptx_free().  Transformations never modify a token; they build
 * new statements (often by parsing PTX text they generate, with the same
 * parser) and share unchanged ones between the original and the copy.
 */
#ifndef TALLY_RW_INT_H
#define TALLY_RW_INT_H

#include "rewrite/rw.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- arena ---- */
typedef struct rw__chunk rw__chunk_t;
typedef struct rw__arena {
  rw__chunk_t *head; /* newest chunk first */
} rw__arena_t;

void *rw__alloc(rw__arena_t *a, size_t n); /* zeroed, 16-aligned; NULL on ENOMEM */
char *rw__strndup(rw__arena_t *a, const char *s, size_t n);
void rw__arena_free(rw__arena_t *a);

/* ---- tokens ---- */
typedef enum rw__tok_kind {
  RW__TOK_IDENT,   /* foo, %r1, $L__BB0_1, _ */
  RW__TOK_DOTWORD, /* .u32, .shared::cta, .x */
  RW__TOK_NUMBER,  /* 12, 0x1f, 0f3F800000, 1.5 */
  RW__TOK_STRING,  /* "text" (quotes kept) */
  RW__TOK_PUNCT,   /* , ; : [ ] { } ( ) + - @ ! < > = | etc. */
  RW__TOK_RAWLINE, /* a whole @@DWARF line */
  RW__TOK_EOF
} rw__tok_kind_t;

typedef struct rw__tok {
  uint8_t kind;  /* rw__tok_kind_t */
  uint8_t space; /* whitespace or a comment preceded it */
  uint8_t nl;    /* a newline preceded it */
  int line, col; /* 1-based position in the parsed text */
  const char *text;
} rw__tok_t;

/* Tokenizes text; *toks (arena) ends with an RW__TOK_EOF token. */
int rw__lex(rw__arena_t *a, const char *text, size_t len, rw__tok_t **toks, size_t *ntoks,
            rw_diag_t *d);

static inline bool rw__tok_is(const rw__tok_t *t, const char *s) {
  const char *p = t->text;
  while (*s && *p == *s)
    p++, s++;
  return *s == 0 && *p == 0;
}

/* ---- statements ---- */
typedef enum rw__opnd_kind {
  RW__OP_REG,  /* %r1, %ctaid.x, %p1|%p2 */
  RW__OP_IMM,  /* 1, -4, 0f3F800000 */
  RW__OP_SYM,  /* a label, function or variable name, maybe sym+4 */
  RW__OP_ADDR, /* [ ... ] */
  RW__OP_VEC,  /* { ... } */
  RW__OP_LIST, /* ( ... ) call argument list */
  RW__OP_NOT,  /* !%p1 */
  RW__OP_EXPR  /* anything else that is balanced */
} rw__opnd_kind_t;

typedef struct rw__opnd {
  int kind;        /* rw__opnd_kind_t */
  size_t ntoks;    /* tokens of this operand */
  rw__tok_t *toks; /* arena */
} rw__opnd_t;

typedef enum rw__stmt_kind {
  RW__ST_INSN,      /* instruction */
  RW__ST_LABEL,     /* name: */
  RW__ST_DECL,      /* .reg/.local/.shared/.param/.global/.const ... ; */
  RW__ST_DIRECTIVE, /* tokens: .version/.target/.loc/.pragma/.file/.section/@@DWARF... */
  RW__ST_OPEN,      /* { */
  RW__ST_CLOSE,     /* } */
  RW__ST_FUNC       /* .entry / .func (top level only) */
} rw__stmt_kind_t;

typedef struct rw__func rw__func_t;

typedef struct rw__stmt {
  int kind;      /* rw__stmt_kind_t */
  int line, col; /* where it started (0 for generated statements) */
  size_t ntoks;  /* LABEL, DECL, DIRECTIVE: tokens printed verbatim */
  rw__tok_t *toks;
  /* RW__ST_LABEL: the label's name. RW__ST_DECL: state space (".reg"...).
   * RW__ST_DIRECTIVE: the directive (".loc", "@@DWARF"...). */
  const char *name;
  /* RW__ST_INSN */
  const char *pred;   /* predicate register or NULL */
  bool pred_neg;      /* @!p */
  const char *opcode; /* "ld" */
  size_t nmods;       /* modifiers incl. the dot: ".param", ".u64" */
  const char **mods;
  size_t nops;
  rw__opnd_t *ops;
  rw__func_t *func; /* RW__ST_FUNC */
} rw__stmt_t;

typedef struct rw__stmt_vec {
  size_t n, cap;
  rw__stmt_t **v; /* malloc'd array (freed with the module) of arena statements */
} rw__stmt_vec_t;

typedef struct rw__param {
  size_t ntoks; /* ".param .u64 .ptr .align 8 name" */
  rw__tok_t *toks;
  const char *name;
} rw__param_t;

struct rw__func {
  bool is_entry;
  size_t nlink; /* linkage tokens (.visible/.extern/.weak) */
  rw__tok_t *link;
  bool has_ret; /* .func with a return parameter list */
  size_t nrets;
  rw__param_t *rets;
  const char *name;
  bool has_params; /* a parameter list was written, even empty */
  size_t nparams;
  rw__param_t *params;
  size_t nperf_toks; /* performance directives, verbatim (.maxntid 256, 1, 1) */
  rw__tok_t *perf_toks;
  bool has_body;       /* false: declaration ending in ';' */
  rw__stmt_vec_t body; /* between the outer braces */
};

/* Statements own no memory of their own besides the vector arrays, which
 * the module tracks so rw_ptx_free() can release them. */
struct rw_ptx_module {
  rw__arena_t arena;
  rw__stmt_vec_t top; /* top-level statements */
  size_t nvecs, capvecs;
  rw__stmt_vec_t **vecs; /* every body vector ever allocated (to free) */
};

int rw__vec_push(rw__stmt_vec_t *v, rw__stmt_t *s);
int rw__vec_insert(rw__stmt_vec_t *v, size_t at, rw__stmt_t *const *s, size_t n);
int rw__module_track(rw_ptx_module_t *m, rw__stmt_vec_t *v);

/* Parses statements of a function body (no outer braces) from text into
 * out, allocating in m's arena.  Used by transformations to build code. */
int rw__parse_body_text(rw_ptx_module_t *m, const char *text, rw__stmt_vec_t *out, rw_diag_t *d);

/* Finds an entry or function with a body by name; NULL if none. */
rw__func_t *rw__find_func(const rw_ptx_module_t *m, const char *name);

/* Printing helpers for diagnostics and tests. */
typedef struct rw__buf {
  char *p;
  size_t len, cap;
  int err; /* sticky -ENOMEM */
} rw__buf_t;
void rw__buf_puts(rw__buf_t *b, const char *s);
void rw__buf_printf(rw__buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rw__print_stmt(rw__buf_t *b, const rw__stmt_t *s);
void rw__print_toks(rw__buf_t *b, const rw__tok_t *t, size_t n, bool keep_newlines);

/* True if op is a PTX ISA instruction name we know (ptx-opcodes.c). */
bool rw__opcode_known(const char *op);
size_t rw__opcode_table(const char *const **out); /* for tests */

/* ---- transformations ---- */

/* What the analysis of an entry found, for the transformation to use. */
typedef struct rw__xinfo {
  unsigned bar_used; /* bit i: the entry body names barrier i */
  int loop_bar;      /* barrier id the worker loop uses (free in the body) */
  bool ptx60;        /* .version >= 6.0: barrier.sync/barrier.red non-aligned exist */
} rw__xinfo_t;

/* Decides whether f can be transformed with kind (see rw_xform_check). */
int rw__xform_analyze(const rw_ptx_module_t *m, const rw__func_t *f, rw_xform_kind_t kind,
                      rw__xinfo_t *xi, rw_refusal_t *why, rw_diag_t *d);

/* xform-flow.c: sets *result if some threads of a block can finish f's
 * body (ret/exit) while other threads of the block can still reach an
 * instruction for which is_target() is true; *at is the divergent decision
 * that allows it.  0, -ENOMEM, or -ENOTSUP (a branch to an unknown label). */
int rw__flow_finish_before(const rw__func_t *f, bool (*is_target)(const rw__stmt_t *, void *),
                           void *ctx, bool *result, const rw__stmt_t **at);

/* Barrier instruction classification shared by analysis and rewriting. */
typedef enum rw__bar_kind {
  RW__BAR_NONE, /* not a CTA barrier */
  RW__BAR_SYNC, /* bar.sync / bar / barrier.sync (.aligned) */
  RW__BAR_ARRIVE,
  RW__BAR_RED
} rw__bar_kind_t;
rw__bar_kind_t rw__bar_classify(const rw__stmt_t *s, bool *counted);

/* ---- tools (ptx-ptxas.c) ---- */

/* Reads a whole file (at most RW_PTX_MAX_LEN bytes) into a malloc'd,
 * NUL-terminated buffer. */
int rw__read_file(const char *path, char **out, size_t *out_len);

/* Runs `ptxas -arch=ARCH -o OUT IN` on a copy of ptx in a temporary
 * directory.  0 and a malloc'd cubin (if cubin != NULL); -EPROTO with
 * ptxas' messages in err when it fails; other negative errno. */
int rw__ptxas_run(const char *ptxas, const char *arch, const char *ptx, size_t len, void **cubin,
                  size_t *cubin_len, char *err, size_t errlen);

/* 0 if two cubins have identical .text.* sections, 1 if not (why says
 * which), negative errno if one is not a well-formed ELF64. */
int rw__cubin_text_cmp(const void *a, size_t alen, const void *b, size_t blen, char *why,
                       size_t whylen);

/* The tally-ptx fatbin subcommand (rewrite/cmd-fatbin.c). */
int rw__cmd_fatbin(int argc, char **argv);

#endif /* TALLY_RW_INT_H */
