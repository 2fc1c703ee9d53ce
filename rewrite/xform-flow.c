/* xform-flow.c: control flow and uniformity of an entry body, to decide
 * whether some threads of a block can finish the body while others of the
 * block still have a given instruction ahead of them.
 *
 * Why: under the PTB worker loop a thread that finishes the body does not
 * exit, it waits in the epilogue.  Two kinds of instruction then deadlock
 * where the original ran: a CTA-wide barrier (the original counted exited
 * threads as arrived; an emulation of that failed on the GPU, see
 * xform-apply.c) and a warp-synchronous instruction with a fixed member
 * mask (PTX ISA 9.0: shfl.sync and friends wait for the "non-exited"
 * threads of the mask).  xform-check.c refuses PTB for both.
 *
 * The question "can a thread finish while another can still reach T" is
 * answered on a CFG of the body's instructions (bra, brx, ret, exit):
 * it is yes if some DIVERGENT decision point (a predicated bra/ret/exit or
 * a brx whose predicate or index is not block-uniform) can reach T and can
 * also reach a ret/exit without passing T.  Uniformity is a flow-
 * insensitive taint over register names: values from %ctaid, %nctaid,
 * %ntid, entry parameters, immediates, arithmetic on them, and weak loads
 * from .global/.shared/.const at such an address (is_block_shared_weak_load)
 * are uniform; %tid, other memory loads, atomics, warp ops, call results
 * and anything else are not.  The analysis is conservative: it may report yes
 * where the program is in fact uniform, never no where it is not.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- a string set of non-uniform names (open addressing) ---- */
typedef struct nameset {
  const char **slot;
  size_t cap; /* power of two */
} nameset_t;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  while (*s)
    h = (h ^ (unsigned char)*s++) * 1099511628211ull;
  return h;
}

static bool set_has(const nameset_t *ns, const char *s) {
  for (size_t i = hash_str(s) & (ns->cap - 1);; i = (i + 1) & (ns->cap - 1)) {
    if (ns->slot[i] == NULL)
      return false;
    if (strcmp(ns->slot[i], s) == 0)
      return true;
  }
}

/* Adds s; returns true if it was new.  The set is sized for every token of
 * the body, so it never fills. */
static bool set_add(nameset_t *ns, const char *s) {
  for (size_t i = hash_str(s) & (ns->cap - 1);; i = (i + 1) & (ns->cap - 1)) {
    if (ns->slot[i] == NULL) {
      ns->slot[i] = s;
      return true;
    }
    if (strcmp(ns->slot[i], s) == 0)
      return false;
  }
}

/* Opcodes whose result is uniform when all their inputs are. */
static bool is_pure(const char *op) {
  static const char *const pure[] = {
      "abs",  "add",      "addc",  "and",  "bfe",   "bfi",   "bfind", "bmsk", "brev", "clz",
      "cnot", "copysign", "cos",   "cvt",  "cvta",  "div",   "dp2a",  "dp4a", "ex2",  "fma",
      "fns",  "isspacep", "lg2",   "lop3", "mad",   "mad24", "madc",  "max",  "min",  "mov",
      "mul",  "mul24",    "neg",   "not",  "or",    "popc",  "prmt",  "rcp",  "rem",  "rsqrt",
      "sad",  "selp",     "set",   "setp", "shf",   "shl",   "shr",   "sin",  "slct", "sqrt",
      "sub",  "subc",     "szext", "tanh", "testp", "xor"};
  for (size_t i = 0; i < sizeof(pure) / sizeof(pure[0]); i++)
    if (strcmp(op, pure[i]) == 0)
      return true;
  return false;
}

static bool has_mod(const rw__stmt_t *s, const char *m) {
  for (size_t k = 0; k < s->nmods; k++)
    if (strcmp(s->mods[k], m) == 0)
      return true;
  return false;
}

static bool is_entry_param(const rw__func_t *f, const char *name) {
  for (size_t i = 0; i < f->nparams; i++)
    if (strcmp(f->params[i].name, name) == 0)
      return true;
  return false;
}

/* Special registers that differ between the threads of a block. */
static bool is_varying_sreg(const char *n) {
  static const char *const v[] = {"%tid",
                                  "%laneid",
                                  "%warpid",
                                  "%clock",
                                  "%clock64",
                                  "%globaltimer",
                                  "%lanemask_eq",
                                  "%lanemask_le",
                                  "%lanemask_lt",
                                  "%lanemask_ge",
                                  "%lanemask_gt",
                                  "%globaltimer_lo",
                                  "%globaltimer_hi",
                                  "%pm0",
                                  "%pm1",
                                  "%pm2",
                                  "%pm3"};
  for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
    if (strcmp(n, v[i]) == 0)
      return true;
  return false;
}

/* A weak load from .global or .shared (PTX ISA memory consistency model: a
 * weak load that races with a write reads an undefined value, so in a
 * well-formed kernel every thread of the block that loads from the same
 * address at the same point reads the same value), .const, or ldu.  Not
 * .local (one copy per thread) nor generic (may be local), and not strong
 * or volatile loads (.volatile, .relaxed, .acquire, .mmio, cache op .cv):
 * those may legitimately race, e.g. CUB's look-back status reads. */
static bool is_block_shared_weak_load(const rw__stmt_t *s) {
  static const char *const strong[] = {".volatile", ".relaxed", ".acquire", ".mmio", ".cv"};
  if (strcmp(s->opcode, "ldu") == 0 || has_mod(s, ".const"))
    return true;
  if (!has_mod(s, ".global") && !has_mod(s, ".shared") && !has_mod(s, ".shared::cta"))
    return false;
  for (size_t i = 0; i < sizeof(strong) / sizeof(strong[0]); i++)
    if (has_mod(s, strong[i]))
      return false;
  return true;
}

/* Does instruction s produce a value that may differ between threads? */
static bool produces_varying(const rw__func_t *f, const nameset_t *nu, const rw__stmt_t *s) {
  bool ld = strcmp(s->opcode, "ld") == 0 || strcmp(s->opcode, "ldu") == 0;
  if (ld) {
    if (is_block_shared_weak_load(s))
      ; /* uniform if its address is: checked below */
    else if (has_mod(s, ".param") && s->nops >= 2 && s->ops[1].kind == RW__OP_ADDR &&
             s->ops[1].ntoks >= 2 && is_entry_param(f, s->ops[1].toks[1].text))
      return false;
    else
      return true;
  } else if (!is_pure(s->opcode)) {
    return true;
  }
  if (s->pred != NULL && set_has(nu, s->pred))
    return true;
  for (size_t o = 1; o < s->nops; o++)
    for (size_t k = 0; k < s->ops[o].ntoks; k++) {
      const rw__tok_t *t = &s->ops[o].toks[k];
      if (t->kind == RW__TOK_IDENT && (set_has(nu, t->text) || is_varying_sreg(t->text)))
        return true;
    }
  return false;
}

typedef struct cfg {
  size_t n;                /* instruction nodes */
  const rw__stmt_t **node; /* node -> statement */
  size_t *succ;            /* up to two successors per node, SIZE_MAX none */
  bool *any_label;         /* brx: may go to every label */
  bool *divergent;         /* a decision the threads of a block may take apart */
  bool *finish;            /* ret/exit (maybe predicated) */
  size_t nlabels;
  size_t *label_node; /* label i -> first node after it */
  const char **label_name;
} cfg_t;

static void cfg_free(cfg_t *g) {
  free(g->node);
  free(g->succ);
  free(g->any_label);
  free(g->divergent);
  free(g->finish);
  free(g->label_node);
  free(g->label_name);
}

static size_t find_label(const cfg_t *g, const char *name) {
  for (size_t i = 0; i < g->nlabels; i++)
    if (strcmp(g->label_name[i], name) == 0)
      return g->label_node[i];
  return SIZE_MAX - 1; /* unknown target */
}

/* Builds the CFG and the divergence of each decision. */
static int cfg_build(const rw__func_t *f, cfg_t *g) {
  size_t ntoks = 1, nn = 0, nl = 0;
  nameset_t nu = {0};
  int rc = -ENOMEM;

  memset(g, 0, sizeof(*g));
  for (size_t i = 0; i < f->body.n; i++) {
    const rw__stmt_t *s = f->body.v[i];
    nn += s->kind == RW__ST_INSN;
    nl += s->kind == RW__ST_LABEL;
    ntoks += s->ntoks;
  }
  g->n = nn;
  g->node = calloc(nn + 1, sizeof(*g->node));
  g->succ = calloc(2 * nn + 2, sizeof(*g->succ));
  g->any_label = calloc(nn + 1, sizeof(bool));
  g->divergent = calloc(nn + 1, sizeof(bool));
  g->finish = calloc(nn + 1, sizeof(bool));
  g->label_node = calloc(nl + 1, sizeof(size_t));
  g->label_name = calloc(nl + 1, sizeof(char *));
  for (nu.cap = 16; nu.cap < 2 * ntoks; nu.cap *= 2)
    ;
  nu.slot = calloc(nu.cap, sizeof(*nu.slot));
  if (!g->node || !g->succ || !g->any_label || !g->divergent || !g->finish || !g->label_node ||
      !g->label_name || !nu.slot)
    goto out;
  nn = 0;
  for (size_t i = 0; i < f->body.n; i++) {
    const rw__stmt_t *s = f->body.v[i];
    if (s->kind == RW__ST_LABEL) {
      g->label_name[g->nlabels] = s->name;
      g->label_node[g->nlabels++] = nn; /* may be n: falls off the end */
    } else if (s->kind == RW__ST_INSN) {
      g->node[nn++] = s;
    }
  }
  /* uniformity: grow the set of varying names to a fixpoint */
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < g->n; i++) {
      const rw__stmt_t *s = g->node[i];
      if (s->nops == 0 || s->ops[0].kind == RW__OP_ADDR || !produces_varying(f, &nu, s))
        continue;
      for (size_t k = 0; k < s->ops[0].ntoks; k++)
        if (s->ops[0].toks[k].kind == RW__TOK_IDENT)
          changed |= set_add(&nu, s->ops[0].toks[k].text);
    }
  }
  for (size_t i = 0; i < g->n; i++) {
    const rw__stmt_t *s = g->node[i];
    size_t *su = &g->succ[2 * i];
    bool exits = strcmp(s->opcode, "ret") == 0 || strcmp(s->opcode, "exit") == 0;
    bool varying_pred = s->pred != NULL && set_has(&nu, s->pred);
    su[0] = su[1] = SIZE_MAX;
    if (exits) {
      g->finish[i] = true;
      if (s->pred != NULL)
        su[0] = i + 1;
      g->divergent[i] = varying_pred;
    } else if (strcmp(s->opcode, "bra") == 0) {
      if (s->nops < 1 || s->ops[0].kind != RW__OP_SYM) {
        rc = -ENOTSUP;
        goto out;
      }
      su[0] = find_label(g, s->ops[0].toks[0].text);
      if (su[0] == SIZE_MAX - 1) {
        rc = -ENOTSUP;
        goto out;
      }
      if (s->pred != NULL)
        su[1] = i + 1;
      g->divergent[i] = varying_pred;
    } else if (strcmp(s->opcode, "brx") == 0) {
      g->any_label[i] = true;
      if (s->pred != NULL)
        su[0] = i + 1;
      g->divergent[i] = true; /* the index may vary: stay conservative */
    } else {
      su[0] = i + 1;
    }
  }
  rc = 0;
out:
  free(nu.slot);
  if (rc < 0)
    cfg_free(g);
  return rc;
}

/* Forward search from the successors of `from`; does not go past nodes in
 * stop (when given).  True if a node with want[] set is found.  Each node
 * is pushed once (marked when pushed), so stack needs n entries. */
static bool reaches(const cfg_t *g, size_t from, const bool *want, const bool *stop,
                    unsigned char *seen, size_t *stack) {
  size_t sp = 0;
  memset(seen, 0, g->n + 1);
#define PUSH(v)                                                                                    \
  do {                                                                                             \
    size_t v_ = (v);                                                                               \
    if (v_ < g->n && !seen[v_]) {                                                                  \
      seen[v_] = 1;                                                                                \
      stack[sp++] = v_;                                                                            \
    }                                                                                              \
  } while (0)
  PUSH(g->succ[2 * from]);
  PUSH(g->succ[2 * from + 1]);
  if (g->any_label[from])
    for (size_t l = 0; l < g->nlabels; l++)
      PUSH(g->label_node[l]);
  while (sp > 0) {
    size_t v = stack[--sp];
    if (want[v])
      return true;
    if (stop != NULL && stop[v])
      continue;
    PUSH(g->succ[2 * v]);
    PUSH(g->succ[2 * v + 1]);
    if (g->any_label[v])
      for (size_t l = 0; l < g->nlabels; l++)
        PUSH(g->label_node[l]);
  }
#undef PUSH
  return false;
}

int rw__flow_finish_before(const rw__func_t *f, bool (*is_target)(const rw__stmt_t *, void *),
                           void *ctx, bool *result, const rw__stmt_t **at) {
  cfg_t g;
  int rc = cfg_build(f, &g);
  bool *target = NULL;
  unsigned char *seen = NULL;
  size_t *stack = NULL;

  *result = false;
  if (at != NULL)
    *at = NULL;
  if (rc < 0)
    return rc;
  target = calloc(g.n + 1, sizeof(bool));
  seen = calloc(g.n + 1, 1);
  stack = calloc(g.n + 1, sizeof(size_t));
  if (target == NULL || seen == NULL || stack == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  bool any = false;
  for (size_t i = 0; i < g.n; i++)
    any |= target[i] = is_target(g.node[i], ctx);
  for (size_t i = 0; any && i < g.n && !*result; i++) {
    if (!g.divergent[i])
      continue;
    /* some threads go one way: can they finish while others can reach T? */
    bool to_target = reaches(&g, i, target, NULL, seen, stack);
    bool to_finish = g.finish[i] || reaches(&g, i, g.finish, target, seen, stack);
    if (to_target && to_finish) {
      *result = true;
      if (at != NULL)
        *at = g.node[i];
    }
  }
  rc = 0;
out:
  free(target);
  free(seen);
  free(stack);
  cfg_free(&g);
  return rc;
}
