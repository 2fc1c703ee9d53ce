/* xform-check.c: decides whether an entry can be sliced or turned into
 * preemptible persistent thread blocks, and says why not.
 *
 * The entry body and every function it can call (direct calls, or every
 * .func of the module after an indirect call) are scanned.  Refused, with
 * the position of the first offending token:
 *   - cooperative launches / grid sync: %envreg reads (the grid workspace
 *     pointer cg::this_grid().sync() uses) and the cudaCG* runtime calls;
 *   - clusters: %cluster_* / %clusterid / %nclusterid / %is_explicit_cluster,
 *     barrier.cluster, mapa, getctarank, .multicast::cluster, and the
 *     .reqnctapercluster / .explicitcluster / .maxclusterrank directives;
 *   - %smid / %nsmid / %gridid (a worker runs many blocks on one SM);
 *   - dynamic parallelism: calls to cudaLaunchDevice*, cudaGetParameterBuffer*
 *     and the __cudaCDP2* entry points nvcc 13 emits;
 *   - anything not fully understood: an opcode outside ptx-opcodes.c, or
 *     %ctaid/%nctaid without a .x/.y/.z component;
 *   - callees that read %ctaid/%nctaid (they would see the worker's ids) or,
 *     for PTB, that exit or hold CTA barriers;
 *   - PTB barrier patterns the worker loop cannot work around: barrier ids
 *     in registers (the loop needs an id the body never names), all 16 ids
 *     in use;
 *   - PTB when some threads can finish the body while others of the block
 *     can still reach a CTA-wide barrier or a warp-synchronous instruction
 *     with an immediate member mask (shfl/vote/match/redux/elect.sync,
 *     bar.warp.sync, or a call to a function holding one), as decided by
 *     xform-flow.c.  PTX ISA 9.0: warp-synchronous instructions wait for the
 *     "non-exited" threads of the mask, and a barrier instruction "causes
 *     executing thread to wait for all non-exited threads from its warp";
 *     under the worker loop a finished thread has not exited, it waits in
 *     the epilogue, so neither can be kept (xform-apply.c tells how an
 *     emulation of the barriers failed on the GPU);
 *   - names that clash with the tally_ names the transformation adds;
 *   - for FLUSH (blocks that give up, rw.h), in the entry body: barriers
 *     with a thread count, and the asynchronous pipelines a block cannot
 *     leave halfway (mbarrier, wgmma, setmaxnreg, griddepcontrol, tcgen05).
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* PTX ISA 9.0, bar/barrier: barrier ids are 0..15. */
#define NUM_BARRIERS 16

static const char *const refusal_names[] = {
#define RW__REFUSAL_TEXT(name, text) text,
    RW_REFUSAL_MAP(RW__REFUSAL_TEXT)
#undef RW__REFUSAL_TEXT
};

const char *rw_refusal_name(rw_refusal_t r) {
  return (unsigned)r < RW_REFUSE_COUNT ? refusal_names[r] : "unknown";
}

const char *rw_xform_suffix(rw_xform_kind_t kind) {
  switch (kind) {
  case RW_XFORM_SLICE:
    return "__tally_slice";
  case RW_XFORM_PTB:
    return "__tally_ptb";
  case RW_XFORM_FLUSH:
    return "__tally_flush";
  default:
    return NULL;
  }
}

typedef struct scan {
  const rw_ptx_module_t *m;
  rw_xform_kind_t kind;
  rw__xinfo_t *xi;
  rw_refusal_t why;
  rw_diag_t *d;
  bool indirect_call;
  bool has_ctaid_sreg; /* unused by the decision; kept for tests' sake */
  unsigned fullcta;    /* ids of CTA-wide (count-less) barriers in the entry */
  unsigned counted;    /* ids of barriers with a thread count in the entry */
  bool callee_warp;    /* a callee has a warp-sync instruction with a fixed mask */
  size_t ncalled, capcalled;
  const char **called; /* callee names, in discovery order */
} scan_t;

static int refuse(scan_t *sc, rw_refusal_t why, int line, int col, const char *fmt, const char *a) {
  sc->why = why;
  rw_diag_set(sc->d, -ENOTSUP, line, col, fmt, a);
  return -ENOTSUP;
}

static bool has_prefix(const char *s, const char *p) {
  return strncmp(s, p, strlen(p)) == 0;
}

rw__bar_kind_t rw__bar_classify(const rw__stmt_t *s, bool *counted) {
  size_t k = 0;
  rw__bar_kind_t kind;
  *counted = false;
  if (s->kind != RW__ST_INSN || (strcmp(s->opcode, "bar") != 0 && strcmp(s->opcode, "barrier")))
    return RW__BAR_NONE;
  if (k < s->nmods && strcmp(s->mods[k], ".cta") == 0)
    k++;
  if (k == s->nmods)
    kind = strcmp(s->opcode, "bar") == 0 ? RW__BAR_SYNC : RW__BAR_NONE;
  else if (strcmp(s->mods[k], ".sync") == 0)
    kind = RW__BAR_SYNC;
  else if (strcmp(s->mods[k], ".arrive") == 0)
    kind = RW__BAR_ARRIVE;
  else if (strcmp(s->mods[k], ".red") == 0)
    kind = RW__BAR_RED;
  else
    return RW__BAR_NONE; /* bar.warp.sync, barrier.cluster.* */
  *counted = kind == RW__BAR_ARRIVE || (kind == RW__BAR_SYNC && s->nops >= 2) ||
             (kind == RW__BAR_RED && s->nops >= 4);
  return kind;
}

static bool is_dynpar(const char *name) {
  return has_prefix(name, "cudaLaunchDevice") || has_prefix(name, "cudaGetParameterBuffer") ||
         has_prefix(name, "__cudaCDP") || strstr(name, "cudaLaunchDevice") != NULL ||
         strstr(name, "GetParameterBuffer") != NULL;
}

static bool is_coop_call(const char *name) {
  return strstr(name, "cudaCG") != NULL;
}

static int note_call(scan_t *sc, const char *name) {
  for (size_t i = 0; i < sc->ncalled; i++)
    if (strcmp(sc->called[i], name) == 0)
      return 0;
  if (sc->ncalled == sc->capcalled) {
    size_t cap = sc->capcalled ? sc->capcalled * 2 : 16;
    const char **v = realloc(sc->called, cap * sizeof(*v));
    if (v == NULL)
      return -ENOMEM;
    sc->called = v;
    sc->capcalled = cap;
  }
  sc->called[sc->ncalled++] = name;
  return 0;
}

/* Checks one token of an operand (with its successor for components). */
static int scan_tok(scan_t *sc, const rw__tok_t *t, const rw__tok_t *nx, bool in_entry) {
  static const char *const cluster_sregs[] = {
      "%clusterid",       "%nclusterid",       "%cluster_ctaid",      "%cluster_nctaid",
      "%cluster_ctarank", "%cluster_nctarank", "%is_explicit_cluster"};
  if (t->kind != RW__TOK_IDENT)
    return 0;
  if (t->text[0] == '%') {
    for (size_t i = 0; i < sizeof(cluster_sregs) / sizeof(cluster_sregs[0]); i++)
      if (strcmp(t->text, cluster_sregs[i]) == 0)
        return refuse(sc, RW_REFUSE_CLUSTER, t->line, t->col, "reads %s", t->text);
    if (rw__tok_is(t, "%smid") || rw__tok_is(t, "%nsmid") || rw__tok_is(t, "%gridid"))
      return refuse(sc, RW_REFUSE_SMID, t->line, t->col, "reads %s", t->text);
    if (has_prefix(t->text, "%envreg"))
      return refuse(sc, RW_REFUSE_COOPERATIVE, t->line, t->col, "reads %s (grid sync workspace)",
                    t->text);
    if (rw__tok_is(t, "%ctaid") || rw__tok_is(t, "%nctaid")) {
      if (!in_entry)
        return refuse(sc, RW_REFUSE_CALLEE, t->line, t->col, "a called function reads %s", t->text);
      if (nx == NULL || nx->kind != RW__TOK_DOTWORD || nx->space ||
          !(rw__tok_is(nx, ".x") || rw__tok_is(nx, ".y") || rw__tok_is(nx, ".z")))
        return refuse(sc, RW_REFUSE_UNPARSED, t->line, t->col, "%s without .x/.y/.z", t->text);
      sc->has_ctaid_sreg = true;
    }
    if (in_entry && has_prefix(t->text, "%tally_"))
      return refuse(sc, RW_REFUSE_NAME_CLASH, t->line, t->col, "uses the name %s", t->text);
  } else if (in_entry && (has_prefix(t->text, "$tally_") || has_prefix(t->text, "tally_"))) {
    return refuse(sc, RW_REFUSE_NAME_CLASH, t->line, t->col, "uses the name %s", t->text);
  }
  if (is_dynpar(t->text))
    return refuse(sc, RW_REFUSE_DYNPAR, t->line, t->col, "uses %s", t->text);
  if (is_coop_call(t->text))
    return refuse(sc, RW_REFUSE_COOPERATIVE, t->line, t->col, "uses %s", t->text);
  return 0;
}

/* Two CTA-wide ids, or one id used both CTA-wide and with a count. */
static int scan_barrier(scan_t *sc, const rw__stmt_t *s, bool in_entry) {
  bool counted;
  rw__bar_kind_t kind = rw__bar_classify(s, &counted);
  if (kind == RW__BAR_NONE || sc->kind != RW_XFORM_PTB)
    return 0;
  if (!in_entry)
    return refuse(sc, RW_REFUSE_BARRIER, s->line, s->col, "a called function holds %s",
                  "a CTA barrier");
  size_t idop = kind == RW__BAR_RED ? 1 : 0;
  if (s->nops <= idop || s->ops[idop].kind != RW__OP_IMM || s->ops[idop].ntoks != 1)
    return refuse(sc, RW_REFUSE_BARRIER, s->line, s->col, "%s with a barrier id in a register",
                  s->opcode);
  char *end;
  unsigned long id = strtoul(s->ops[idop].toks[0].text, &end, 0);
  if (*end != 0 || id >= NUM_BARRIERS)
    return refuse(sc, RW_REFUSE_BARRIER, s->line, s->col, "barrier id %s out of range",
                  s->ops[idop].toks[0].text);
  if (kind == RW__BAR_RED && !counted) {
    const char *op = NULL;
    for (size_t k = 0; k < s->nmods; k++)
      if (!strcmp(s->mods[k], ".popc") || !strcmp(s->mods[k], ".and") || !strcmp(s->mods[k], ".or"))
        op = s->mods[k];
    if (op == NULL || s->nops != 3)
      return refuse(sc, RW_REFUSE_UNPARSED, s->line, s->col, "%s.red of an unknown form",
                    s->opcode);
  }
  if (counted)
    sc->counted |= 1u << id;
  else
    sc->fullcta |= 1u << id;
  return 0;
}

/* shfl.sync, vote.sync, match.sync, redux.sync, elect.sync (member mask
 * last) and bar.warp.sync (mask only) with the mask written as a number. */
static bool is_imm_mask_warp_sync(const rw__stmt_t *s) {
  static const char *const ops[] = {"shfl", "vote", "match", "redux", "elect"};
  bool sync = false, warp = false;
  for (size_t k = 0; k < s->nmods; k++) {
    sync |= strcmp(s->mods[k], ".sync") == 0;
    warp |= strcmp(s->mods[k], ".warp") == 0;
  }
  if (!sync || s->nops == 0 || s->ops[s->nops - 1].kind != RW__OP_IMM)
    return false;
  if (strcmp(s->opcode, "bar") == 0 || strcmp(s->opcode, "barrier") == 0)
    return warp;
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
    if (strcmp(s->opcode, ops[i]) == 0)
      return true;
  return false;
}

/* Flow targets: warp-synchronous instructions with a fixed mask, and calls
 * when some callee has one; CTA-wide barriers. */
static bool is_warp_target(const rw__stmt_t *s, void *ctx) {
  const bool *callee_warp = ctx;
  return is_imm_mask_warp_sync(s) || (*callee_warp && strcmp(s->opcode, "call") == 0);
}

static bool is_cta_barrier(const rw__stmt_t *s, void *ctx) {
  bool counted;
  rw__bar_kind_t k = rw__bar_classify(s, &counted);
  (void)ctx;
  return (k == RW__BAR_SYNC || k == RW__BAR_RED) && !counted;
}

/* FLUSH: what a block that gives up cannot leave halfway (entry body only:
 * a callee runs after its caller committed, and then nobody gives up). */
static int scan_flush(scan_t *sc, const rw__stmt_t *s) {
  static const char *const pipelines[] = {"mbarrier", "wgmma", "setmaxnreg", "griddepcontrol",
                                          "tcgen05"};
  bool counted;
  if (rw__bar_classify(s, &counted) != RW__BAR_NONE && counted)
    return refuse(sc, RW_REFUSE_BARRIER, s->line, s->col, "%s with a thread count (a thread "
                  "that gave up would never arrive)", s->opcode);
  for (size_t i = 0; i < sizeof(pipelines) / sizeof(pipelines[0]); i++)
    if (has_prefix(s->opcode, pipelines[i]))
      return refuse(sc, RW_REFUSE_FLUSH, s->line, s->col, "%s", s->opcode);
  for (size_t k = 0; k < s->nmods; k++)
    if (strstr(s->mods[k], "mbarrier") != NULL)
      return refuse(sc, RW_REFUSE_FLUSH, s->line, s->col, "%s completing on an mbarrier",
                    s->opcode);
  return 0;
}

static int scan_stmt(scan_t *sc, const rw__stmt_t *s, bool in_entry) {
  int rc;
  if (s->kind == RW__ST_INSN) {
    if (!rw__opcode_known(s->opcode))
      return refuse(sc, RW_REFUSE_UNPARSED, s->line, s->col, "unknown instruction '%s'", s->opcode);
    if (in_entry && sc->kind == RW_XFORM_FLUSH && (rc = scan_flush(sc, s)) < 0)
      return rc;
    if (strcmp(s->opcode, "mapa") == 0 || strcmp(s->opcode, "getctarank") == 0)
      return refuse(sc, RW_REFUSE_CLUSTER, s->line, s->col, "%s (distributed shared memory)",
                    s->opcode);
    if (strcmp(s->opcode, "barrier") == 0 && s->nmods > 0 && strcmp(s->mods[0], ".cluster") == 0)
      return refuse(sc, RW_REFUSE_CLUSTER, s->line, s->col, "%s.cluster", s->opcode);
    for (size_t k = 0; k < s->nmods; k++)
      if (strstr(s->mods[k], "multicast::cluster") != NULL)
        return refuse(sc, RW_REFUSE_CLUSTER, s->line, s->col, "%s to a cluster", s->mods[k]);
    if (strcmp(s->opcode, "exit") == 0 && !in_entry && sc->kind == RW_XFORM_PTB)
      return refuse(sc, RW_REFUSE_CALLEE, s->line, s->col, "a called function %ss", "exit");
    if ((rc = scan_barrier(sc, s, in_entry)) < 0)
      return rc;
    if (!in_entry && is_imm_mask_warp_sync(s))
      sc->callee_warp = true;
    for (size_t o = 0; o < s->nops; o++) {
      const rw__opnd_t *op = &s->ops[o];
      for (size_t k = 0; k < op->ntoks; k++)
        if ((rc = scan_tok(sc, &op->toks[k], k + 1 < op->ntoks ? &op->toks[k + 1] : NULL,
                           in_entry)) < 0)
          return rc;
    }
    if (strcmp(s->opcode, "call") == 0) {
      /* call{.uni} [(ret),] target, [(args)][, proto]: the target is the first
       * operand that is not a parenthesized list. */
      for (size_t o = 0; o < s->nops; o++) {
        if (s->ops[o].kind == RW__OP_LIST)
          continue;
        if (s->ops[o].kind == RW__OP_SYM)
          rc = note_call(sc, s->ops[o].toks[0].text);
        else
          sc->indirect_call = true, rc = 0;
        if (rc < 0)
          return rc;
        break;
      }
    }
    if (in_entry && s->pred != NULL && has_prefix(s->pred, "%tally_"))
      return refuse(sc, RW_REFUSE_NAME_CLASH, s->line, s->col, "uses the name %s", s->pred);
    return 0;
  }
  if (s->kind == RW__ST_DECL || s->kind == RW__ST_LABEL || s->kind == RW__ST_DIRECTIVE) {
    if (s->kind == RW__ST_DIRECTIVE && strcmp(s->name, "@@DWARF") == 0)
      return 0;
    for (size_t k = 0; k < s->ntoks; k++)
      if ((rc = scan_tok(sc, &s->toks[k], k + 1 < s->ntoks ? &s->toks[k + 1] : NULL, in_entry)) < 0)
        return rc;
  }
  return 0;
}

static int scan_func(scan_t *sc, const rw__func_t *f, bool in_entry) {
  int rc;
  for (size_t i = 0; i < f->body.n; i++)
    if ((rc = scan_stmt(sc, f->body.v[i], in_entry)) < 0)
      return rc;
  return 0;
}

static bool ptx_version_at_least_60(const rw_ptx_module_t *m) {
  for (size_t i = 0; i < m->top.n; i++) {
    const rw__stmt_t *s = m->top.v[i];
    if (s->kind == RW__ST_DIRECTIVE && strcmp(s->name, ".version") == 0 && s->ntoks >= 2)
      return strtol(s->toks[1].text, NULL, 10) >= 6;
  }
  return false;
}

int rw__xform_analyze(const rw_ptx_module_t *m, const rw__func_t *f, rw_xform_kind_t kind,
                      rw__xinfo_t *xi, rw_refusal_t *why, rw_diag_t *d) {
  scan_t sc = {.m = m, .kind = kind, .xi = xi, .why = RW_REFUSE_NONE, .d = d};
  int rc;

  memset(xi, 0, sizeof(*xi));
  xi->ptx60 = ptx_version_at_least_60(m);
  for (size_t k = 0; k < f->nperf_toks; k++) {
    const rw__tok_t *t = &f->perf_toks[k];
    if (rw__tok_is(t, ".reqnctapercluster") || rw__tok_is(t, ".explicitcluster") ||
        rw__tok_is(t, ".maxclusterrank")) {
      rc = refuse(&sc, RW_REFUSE_CLUSTER, t->line, t->col, "entry declares %s", t->text);
      goto out;
    }
  }
  for (size_t k = 0; k < f->nparams; k++) {
    if (has_prefix(f->params[k].name, "tally_")) {
      rc = refuse(&sc, RW_REFUSE_NAME_CLASH, f->params[k].toks[0].line, f->params[k].toks[0].col,
                  "parameter %s", f->params[k].name);
      goto out;
    }
  }
  if ((rc = scan_func(&sc, f, true)) < 0)
    goto out;
  /* Callees, transitively: sc.called grows while we walk it. */
  if (sc.indirect_call) {
    for (size_t i = 0; i < m->top.n; i++)
      if (m->top.v[i]->kind == RW__ST_FUNC && !m->top.v[i]->func->is_entry &&
          (rc = note_call(&sc, m->top.v[i]->func->name)) < 0)
        goto out;
  }
  for (size_t i = 0; i < sc.ncalled; i++) {
    const char *name = sc.called[i];
    if (is_dynpar(name) || is_coop_call(name)) {
      rc = refuse(&sc, is_dynpar(name) ? RW_REFUSE_DYNPAR : RW_REFUSE_COOPERATIVE,
                  f->body.n ? f->body.v[0]->line : 0, 0, "calls %s", name);
      goto out;
    }
    const rw__func_t *g = rw__find_func(m, name);
    if (g == NULL || g == f)
      continue; /* an extern (vprintf, malloc...) or recursion into the entry */
    if ((rc = scan_func(&sc, g, false)) < 0)
      goto out;
  }
  if (kind == RW_XFORM_PTB) {
    unsigned used = sc.fullcta | sc.counted;
    xi->bar_used = used;
    xi->loop_bar = -1;
    /* the lowest free id: ptxas reserves barriers up to the highest id
     * used, and a kernel's barrier count can limit its occupancy */
    for (int id = 0; id < NUM_BARRIERS; id++) {
      if (!(used & (1u << id))) {
        xi->loop_bar = id;
        break;
      }
    }
    if (xi->loop_bar < 0) {
      rc = refuse(&sc, RW_REFUSE_BARRIER, 0, 0, "all %s barrier ids are in use", "16");
      goto out;
    }
    bool warp_risk, bar_risk;
    const rw__stmt_t *at, *bat;
    if ((rc = rw__flow_finish_before(f, is_warp_target, &sc.callee_warp, &warp_risk, &at)) < 0 ||
        (rc = rw__flow_finish_before(f, is_cta_barrier, NULL, &bar_risk, &bat)) < 0) {
      if (rc == -ENOTSUP)
        rc = refuse(&sc, RW_REFUSE_UNPARSED, 0, 0, "%s", "a branch to an unknown label");
      goto out;
    }
    if (warp_risk) {
      rc = refuse(&sc, RW_REFUSE_WARPSYNC, at->line, at->col, "%s",
                  "threads may finish here while others still reach a warp-synchronous "
                  "instruction with a fixed member mask");
      goto out;
    }
    if (bar_risk) {
      /* PTX ISA 9.0, barrier: a barrier instruction "causes executing
       * thread to wait for all non-exited threads from its warp and marks
       * warps' arrival".  A worker cannot keep a finished thread alive
       * while the rest of its warp meets a CTA barrier (see the note on the
       * withdrawn emulation in xform-apply.c), and letting it exit would
       * end the worker after one block, which slicing does better. */
      rc = refuse(&sc, RW_REFUSE_BARRIER, bat->line, bat->col, "%s",
                  "threads may finish here while others of their block still reach a CTA-wide "
                  "barrier (slicing handles this kernel)");
      goto out;
    }
  }
  rc = 0;
out:
  free(sc.called);
  if (why != NULL)
    *why = rc == 0 ? RW_REFUSE_NONE : sc.why;
  return rc;
}

int rw_xform_check(const rw_ptx_module_t *m, const char *entry, rw_xform_kind_t kind,
                   rw_refusal_t *why, rw_diag_t *d) {
  rw__xinfo_t xi;
  const rw__func_t *f = entry != NULL ? rw__find_func(m, entry) : NULL;
  if ((unsigned)kind >= RW_XFORM_KIND_COUNT)
    return rw_diag_set(d, -EINVAL, 0, 0, "unknown transformation %d", (int)kind);
  if (f == NULL || !f->is_entry) {
    if (why != NULL)
      *why = RW_REFUSE_NO_ENTRY;
    return rw_diag_set(d, -ENOENT, 0, 0, "no entry named %s", entry ? entry : "(null)");
  }
  return rw__xform_analyze(m, f, kind, &xi, why, d);
}
