/* xform-apply.c: builds the sliced and the persistent-thread-block copies of
 * an entry (calling conventions and control block: rw.h).
 *
 * The new entry shares the original's unchanged statements and gets:
 *   - a prologue that loads the original grid dims and decomposes an
 *     original linear block index L into virtual %ctaid.{x,y,z}: 1-D grids
 *     take L itself, others use 32-bit div/rem (grids of 2^32 blocks or
 *     more trap: see rw.h);
 *   - every %ctaid.c / %nctaid.c operand replaced by a %tally_ register;
 *   - for PTB, the worker loop around the body (a worker's static index
 *     first, with no memory access; then thread 0 reads next and the
 *     preempt flag with one load and takes the next index with one atomic,
 *     published through a double-buffered shared slot and the loop's one
 *     barrier per index), ret/exit turned into branches to that per-index
 *     epilogue (emit_ptb_head has the layout and the argument for one
 *     barrier).  The body's own barriers stay as they are: xform-check.c
 *     refuses bodies in which a thread can finish while others still reach
 *     a CTA-wide barrier.
 * Measured before this loop (H200, rewrite-bench, 155 kernels, median of 7
 * timings each): the PTB variant's median overhead was 21%; same-address
 * atomics serialize in L2 (tall_grid: 196605 blocks + 4224 final takes took
 * 289 us more than native, about 1.4 ns per atomic if they account for it),
 * and a grid that fit in one wave still paid two atomics, two volatile
 * loads and three barriers per worker.
 * Withdrawn design, for the record: such bodies once got "unified
 * synchronization" by emulation (body barriers became barrier.red.popc with
 * a false predicate; finished threads spun in the epilogue on
 * barrier.red.popc with a true one until all were done).  It failed on an
 * H200 (rw-diff-stress, early_return_then_barrier<2>: odd threads' output
 * never written; <3>: CUDA_ERROR_MISALIGNED_ADDRESS).  PTX ISA 9.0 says a
 * barrier instruction "causes executing thread to wait for all non-exited
 * threads from its warp and marks warps' arrival at barrier": lanes of one
 * warp cannot arrive from two different barrier instructions.  In the SASS
 * ptxas made of it (cuobjdump), the finished lanes wait at the BSYNC that
 * reconverges the early-return branch while the other lanes run the body
 * barrier through a BRA.DIV / WARPSYNC.COLLECTIVE sequence meant for whole
 * warps, so barrier arrivals and counts come out wrong.
 * Blocks that give up (FLUSH, rw.h has the contract): the slicing prologue
 * with the index taken from a redo list when there is one, a barrier after
 * thread 0 clears the block's state word; then, in the body, a poll before
 * every backward branch (every loop has one: a cycle in the control flow
 * needs an edge to an earlier statement), a commit before every instruction
 * with an effect outside the block, and a check after every CTA barrier
 * and warp-synchronous instruction.  The state word goes 0 (running) -> 1
 * (given up) or 0 -> 2 (committed) by compare-and-swap, once: so either
 * some thread committed and nobody gives up, or nothing committed and
 * every thread exits before its first effect.  The checks after barriers
 * and warp-synchronous instructions keep a thread from going on with data
 * a thread that gave up never wrote (PTX ISA: an exited thread no longer
 * holds a barrier or a shfl.sync up, so those complete without it).
 * Generated code is PTX text run through the same parser: the IR never holds
 * hand-assembled tokens.  Analysis first (xform-check.c), so a refused entry
 * leaves the module untouched.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int make_param(rw_ptx_module_t *m, const char *text, rw__param_t *p, rw_diag_t *d) {
  rw__tok_t *t;
  size_t n;
  int rc = rw__lex(&m->arena, text, strlen(text), &t, &n, d);
  if (rc < 0)
    return rc;
  p->toks = t;
  p->ntoks = n - 1; /* without EOF */
  for (size_t i = 0; i < p->ntoks; i++)
    if (t[i].kind == RW__TOK_IDENT)
      p->name = t[i].text;
  return 0;
}

static const char *sreg_name(const rw__tok_t *t, const rw__tok_t *nx) {
  static const char *const names[2][3] = {
      {"%tally_ctaid_x", "%tally_ctaid_y", "%tally_ctaid_z"},
      {"%tally_nctaid_x", "%tally_nctaid_y", "%tally_nctaid_z"}};
  int which;
  if (t->kind != RW__TOK_IDENT || nx == NULL || nx->kind != RW__TOK_DOTWORD || nx->space)
    return NULL;
  if (rw__tok_is(t, "%ctaid"))
    which = 0;
  else if (rw__tok_is(t, "%nctaid"))
    which = 1;
  else
    return NULL;
  if (rw__tok_is(nx, ".x"))
    return names[which][0];
  if (rw__tok_is(nx, ".y"))
    return names[which][1];
  if (rw__tok_is(nx, ".z"))
    return names[which][2];
  return NULL;
}

/* Returns s, or a copy of s whose %ctaid/%nctaid operands read registers. */
static int subst_sregs(rw_ptx_module_t *m, rw__stmt_t *s, rw__stmt_t **out) {
  *out = s;
  if (s->kind != RW__ST_INSN)
    return 0;
  bool any = false;
  for (size_t o = 0; o < s->nops && !any; o++)
    for (size_t k = 0; k + 1 < s->ops[o].ntoks; k++)
      if (sreg_name(&s->ops[o].toks[k], &s->ops[o].toks[k + 1]) != NULL)
        any = true;
  if (!any)
    return 0;
  rw__stmt_t *c = rw__alloc(&m->arena, sizeof(*c));
  rw__opnd_t *ops = rw__alloc(&m->arena, s->nops * sizeof(*ops));
  if (c == NULL || ops == NULL)
    return -ENOMEM;
  *c = *s;
  c->ops = ops;
  for (size_t o = 0; o < s->nops; o++) {
    const rw__opnd_t *src = &s->ops[o];
    ops[o] = *src;
    rw__tok_t *t = rw__alloc(&m->arena, src->ntoks * sizeof(*t));
    if (t == NULL)
      return -ENOMEM;
    size_t n = 0;
    for (size_t k = 0; k < src->ntoks; k++) {
      const char *r = k + 1 < src->ntoks ? sreg_name(&src->toks[k], &src->toks[k + 1]) : NULL;
      t[n] = src->toks[k];
      if (r != NULL) {
        t[n].text = r;
        k++; /* the component is folded into the register name */
      }
      n++;
    }
    ops[o].toks = t;
    ops[o].ntoks = n;
    if (ops[o].kind == RW__OP_EXPR && n == 1)
      ops[o].kind = RW__OP_REG;
  }
  *out = c;
  return 0;
}

/* Registers both kinds use.  Only what the body reads (%tally_ctaid_*,
 * %tally_nctaid_*) stays live across
 * it; everything else is recomputed from parameters (constant bank) each
 * iteration, so the transformation adds little register pressure. */
static void emit_decls(rw__buf_t *b) {
  rw__buf_puts(b, ".reg .u32 %tally_ctaid_x, %tally_ctaid_y, %tally_ctaid_z, %tally_nctaid_x, "
                  "%tally_nctaid_y, %tally_nctaid_z, %tally_l32, %tally_t32, %tally_n;\n"
                  ".reg .u64 %tally_idx, %tally_total, %tally_q, %tally_ctl;\n"
                  ".reg .pred %tally_p, %tally_1d, %tally_32, %tally_t0;\n");
}

/* Grid dims, total block count, and the predicates that choose how to
 * decompose L. */
static void emit_grid(rw__buf_t *b) {
  rw__buf_puts(b, "ld.param.u32 %tally_nctaid_x, [tally_gx];\n"
                  "ld.param.u32 %tally_nctaid_y, [tally_gy];\n"
                  "ld.param.u32 %tally_nctaid_z, [tally_gz];\n"
                  /* gy, gz <= 65535 (CUDA grid limits), so gy*gz fits in 32 bits */
                  "mul.lo.u32 %tally_t32, %tally_nctaid_y, %tally_nctaid_z;\n"
                  "setp.eq.u32 %tally_1d, %tally_t32, 1;\n"
                  "mul.wide.u32 %tally_total, %tally_nctaid_x, %tally_t32;\n"
                  "setp.le.u64 %tally_32, %tally_total, 4294967295;\n");
}

/* %tally_idx (L, < total) -> %tally_ctaid_{x,y,z}.  1-D grids take L
 * itself; other grids use 32-bit div/rem.  Grids of 2^32 blocks or more
 * trap (rw.h: the daemon launches the original for them): 64-bit division
 * would cost every transformed kernel about 8 more registers (ptxas -v on a
 * vector add: 20 instead of 12), which can lower occupancy for nothing.
 * The branches are uniform (parameters only) but written as plain bra:
 * after a non-aligned barrier a warp need not be converged, and bra.uni
 * would promise it is. */
static void emit_decompose(rw__buf_t *b) {
  rw__buf_puts(b, "@%tally_1d bra $tally_d1;\n"
                  "@%tally_32 bra $tally_d32;\n"
                  "trap;\n"
                  "$tally_d32:\n"
                  "cvt.u32.u64 %tally_l32, %tally_idx;\n"
                  "rem.u32 %tally_ctaid_x, %tally_l32, %tally_nctaid_x;\n"
                  "div.u32 %tally_l32, %tally_l32, %tally_nctaid_x;\n"
                  "rem.u32 %tally_ctaid_y, %tally_l32, %tally_nctaid_y;\n"
                  "div.u32 %tally_ctaid_z, %tally_l32, %tally_nctaid_y;\n"
                  "bra $tally_dd;\n"
                  "$tally_d1:\n"
                  "cvt.u32.u64 %tally_ctaid_x, %tally_idx;\n"
                  "mov.u32 %tally_ctaid_y, 0;\n"
                  "mov.u32 %tally_ctaid_z, 0;\n"
                  "$tally_dd:\n");
}

static void emit_slice_head(rw__buf_t *b) {
  emit_decls(b);
  emit_grid(b);
  rw__buf_puts(b, "ld.param.u64 %tally_idx, [tally_block_offset];\n"
                  "mov.u32 %tally_t32, %ctaid.x;\n"
                  "cvt.u64.u32 %tally_q, %tally_t32;\n"
                  "add.u64 %tally_idx, %tally_idx, %tally_q;\n"
                  "setp.ge.u64 %tally_p, %tally_idx, %tally_total;\n"
                  "@%tally_p exit;\n");
  emit_decompose(b);
}

/* Sets %tally_t0 = (this thread is (0,0,0)). */
static void emit_thread0(rw__buf_t *b) {
  rw__buf_puts(b, "mov.u32 %tally_t32, %tid.x;\n"
                  "mov.u32 %tally_n, %tid.y;\n"
                  "or.b32 %tally_t32, %tally_t32, %tally_n;\n"
                  "mov.u32 %tally_n, %tid.z;\n"
                  "or.b32 %tally_t32, %tally_t32, %tally_n;\n"
                  "setp.eq.u32 %tally_t0, %tally_t32, 0;\n");
}

/* The PTB prologue and worker loop (rw.h has the contract; the layout
 * below is what the PTX looks like):
 *
 *   prologue   grid dims; thread 0 clears its batch state; static =
 *              %ctaid.x < tally_nstatic and L = tally_first + %ctaid.x <
 *              total;  @static bra $tally_run
 *   $tally_epi every thread of the block meets here after each index (and
 *              non-static workers come here first):
 *              if tally_first + tally_nstatic >= total, no index is left to
 *              take (word 0 started there): exit, no memory access at all;
 *              thread 0: the next index of its batch if one is left, else
 *              one 16-byte ld.volatile of {next, flag} and, if the flag is
 *              clear and next < total, one atom.add of the batch size;
 *              publishes the index (or ~0) in tally_slot[par]; ONE barrier;
 *              everyone reads tally_slot[par], flips par; index >= total:
 *              exit
 *   $tally_run decompose L into %tally_ctaid_*, run the body; ret/exit and
 *              the end of the body branch to $tally_epi
 *
 * Shared memory tally_slot (32 bytes): [0] and [8] the published index
 * (double-buffered), [16] thread 0's last index C and [24] its batch end E
 * (only thread 0 reads or writes those two).
 *
 * One barrier per index: the epilogue barrier both ends the previous index
 * (no thread starts index k+1 while another still uses index k's shared
 * memory) and publishes the next index.  The slot is double-buffered by the
 * block-uniform predicate %tally_par so thread 0 can write the next index
 * before that barrier: slot[par] was last read right after the barrier
 * that started the index before the previous one, and every thread passed
 * the barrier that started the previous index before thread 0 writes.
 * Reading next first saves the last atomic of every worker (next only
 * grows, so a value >= total seen once stays true); the flag and next share
 * one 16-byte load, so a take costs two dependent global accesses.
 *
 * Batches: one atomic takes b = min(max(tally_batch, 1), max((total -
 * next) / W / 2, 1)) indices [i, i + b), all of which this worker runs (a
 * taken index always runs to its end), so the flag is read once per batch.
 * The cap by what is left (guided self-scheduling) keeps the last batches
 * single blocks, so no worker is left with several blocks while the others
 * are done.  Same-address atomics serialize in L2 (about 1.4 ns each on an
 * H200, xform-apply.c's header), which bounds short blocks of long grids;
 * the daemon picks tally_batch so that a batch stays short (rw.h).
 *
 * Thread 0's work is predicated, not branched around; the barriers are the
 * non-aligned barrier.sync where PTX has it (6.0+), because threads reach
 * the epilogue from divergent returns. */
static void emit_ptb_head(rw__buf_t *b, const rw__xinfo_t *xi) {
  emit_decls(b);
  rw__buf_puts(b, ".reg .u64 %tally_e, %tally_b;\n"
                  ".reg .pred %tally_par, %tally_c;\n"
                  ".shared .align 16 .b8 tally_slot[32];\n");
  emit_grid(b);
  emit_thread0(b);
  rw__buf_puts(b, "mov.u64 %tally_e, 0;\n"
                  "@%tally_t0 st.shared.v2.u64 [tally_slot+16], {%tally_e, %tally_e};\n"
                  /* contract (rw.h): tally_nstatic <= workers, else statics would be lost */
                  "ld.param.u32 %tally_n, [tally_nstatic];\n"
                  "mov.u32 %tally_t32, %nctaid.x;\n"
                  "setp.gt.u32 %tally_p, %tally_n, %tally_t32;\n"
                  "@%tally_p trap;\n"
                  "mov.u32 %tally_t32, %ctaid.x;\n"
                  "ld.param.u64 %tally_idx, [tally_first];\n"
                  "cvt.u64.u32 %tally_q, %tally_t32;\n"
                  "add.u64 %tally_idx, %tally_idx, %tally_q;\n"
                  "setp.lt.u64 %tally_p, %tally_idx, %tally_total;\n"
                  "setp.lt.and.u32 %tally_p, %tally_t32, %tally_n, %tally_p;\n"
                  "setp.ne.u32 %tally_par, %tally_n, %tally_n;\n" /* false: slot 0 first */
                  "@%tally_p bra $tally_run;\n"
                  "$tally_epi:\n");
  emit_grid(b);
  rw__buf_puts(b, "ld.param.u64 %tally_q, [tally_first];\n"
                  "ld.param.u32 %tally_n, [tally_nstatic];\n"
                  "cvt.u64.u32 %tally_idx, %tally_n;\n"
                  "add.u64 %tally_q, %tally_q, %tally_idx;\n"
                  "setp.ge.u64 %tally_p, %tally_q, %tally_total;\n"
                  "@%tally_p exit;\n"
                  "ld.param.u64 %tally_ctl, [tally_ctl];\n"
                  "cvta.to.global.u64 %tally_ctl, %tally_ctl;\n");
  emit_thread0(b);
  rw__buf_printf(b,
                 /* thread 0: C + 1 < E means the batch has another index */
                 "mov.u64 %%tally_idx, 0;\n"
                 "mov.u64 %%tally_e, 0;\n"
                 "@%%tally_t0 ld.shared.v2.u64 {%%tally_idx, %%tally_e}, [tally_slot+16];\n"
                 "add.u64 %%tally_idx, %%tally_idx, 1;\n"
                 "setp.lt.u64 %%tally_c, %%tally_idx, %%tally_e;\n"
                 "not.pred %%tally_p, %%tally_c;\n"
                 "and.pred %%tally_p, %%tally_p, %%tally_t0;\n"
                 /* else a take: {next, flag} in one load */
                 "mov.u64 %%tally_q, 0xFFFFFFFFFFFFFFFF;\n"
                 "mov.u64 %%tally_b, 1;\n"
                 "@%%tally_p ld.volatile.global.v2.u64 {%%tally_q, %%tally_b}, [%%tally_ctl];\n"
                 "cvt.u32.u64 %%tally_t32, %%tally_b;\n" /* the u32 flag at offset 8 */
                 "setp.eq.and.u32 %%tally_p, %%tally_t32, 0, %%tally_p;\n"
                 "setp.lt.and.u64 %%tally_p, %%tally_q, %%tally_total, %%tally_p;\n"
                 /* batch size; 32 bits suffice: next < total < 2^32 when it is used
                  * (bigger grids trap before their first index runs) */
                 "cvt.u32.u64 %%tally_n, %%tally_total;\n"
                 "cvt.u32.u64 %%tally_t32, %%tally_q;\n"
                 "sub.u32 %%tally_n, %%tally_n, %%tally_t32;\n"
                 "mov.u32 %%tally_t32, %%nctaid.x;\n"
                 "div.u32 %%tally_n, %%tally_n, %%tally_t32;\n"
                 "shr.u32 %%tally_n, %%tally_n, 1;\n"
                 "max.u32 %%tally_n, %%tally_n, 1;\n"
                 "ld.param.u32 %%tally_t32, [tally_batch];\n"
                 "max.u32 %%tally_t32, %%tally_t32, 1;\n"
                 "min.u32 %%tally_n, %%tally_n, %%tally_t32;\n"
                 "cvt.u64.u32 %%tally_b, %%tally_n;\n"
                 "@%%tally_p atom.global.add.u64 %%tally_q, [%%tally_ctl], %%tally_b;\n"
                 "@!%%tally_p mov.u64 %%tally_q, 0xFFFFFFFFFFFFFFFF;\n"
                 "add.u64 %%tally_b, %%tally_q, %%tally_b;\n"
                 "min.u64 %%tally_b, %%tally_b, %%tally_total;\n"
                 "@!%%tally_c mov.u64 %%tally_idx, %%tally_q;\n"
                 "@!%%tally_c mov.u64 %%tally_e, %%tally_b;\n"
                 "@%%tally_t0 st.shared.v2.u64 [tally_slot+16], {%%tally_idx, %%tally_e};\n"
                 /* publish through slot[par] and the loop's one barrier */
                 "mov.u32 %%tally_l32, tally_slot;\n"
                 "selp.u32 %%tally_t32, 8, 0, %%tally_par;\n"
                 "add.u32 %%tally_l32, %%tally_l32, %%tally_t32;\n"
                 "@%%tally_t0 st.shared.u64 [%%tally_l32], %%tally_idx;\n"
                 "%s %d;\n"
                 "ld.shared.u64 %%tally_idx, [%%tally_l32];\n"
                 "not.pred %%tally_par, %%tally_par;\n"
                 "setp.ge.u64 %%tally_p, %%tally_idx, %%tally_total;\n"
                 "@%%tally_p exit;\n"
                 "$tally_run:\n",
                 xi->ptx60 ? "barrier.sync" : "bar.sync", xi->loop_bar);
  emit_decompose(b);
}

/* After the body: falling off its end is a return. */
static void emit_ptb_tail(rw__buf_t *b) {
  rw__buf_puts(b, "bra $tally_epi;\n");
}

/* ---- blocks that give up (FLUSH) ---- */

/* Polls per thread: once every FLUSH_POLL_EVERY backward branches (a power
 * of two), so a tight loop pays a counter and a branch, and a poll's
 * volatile load at most once per 64 iterations. */
#define FLUSH_POLL_EVERY 64

static void emit_flush_head(rw__buf_t *b) {
  emit_decls(b);
  rw__buf_puts(b, ".reg .u32 %tally_fc, %tally_ft;\n"
                  ".reg .u64 %tally_fa;\n"
                  ".reg .pred %tally_fq, %tally_cm;\n"
                  ".shared .align 4 .u32 tally_fstate;\n");
  emit_grid(b);
  rw__buf_puts(b, "ld.param.u64 %tally_fa, [tally_redo];\n"
                  "setp.ne.u64 %tally_fq, %tally_fa, 0;\n"
                  "mov.u32 %tally_t32, %ctaid.x;\n"
                  "@%tally_fq bra $tally_fr;\n"
                  "ld.param.u64 %tally_idx, [tally_block_offset];\n"
                  "cvt.u64.u32 %tally_q, %tally_t32;\n"
                  "add.u64 %tally_idx, %tally_idx, %tally_q;\n"
                  "bra $tally_fl;\n"
                  "$tally_fr:\n"
                  "cvta.to.global.u64 %tally_fa, %tally_fa;\n"
                  "ld.global.u32 %tally_n, [%tally_fa+4];\n"
                  "setp.ge.u32 %tally_p, %tally_t32, %tally_n;\n"
                  "@%tally_p exit;\n"
                  "mul.wide.u32 %tally_q, %tally_t32, 4;\n"
                  "add.u64 %tally_q, %tally_fa, %tally_q;\n"
                  "ld.global.u32 %tally_l32, [%tally_q+16];\n"
                  "cvt.u64.u32 %tally_idx, %tally_l32;\n"
                  "$tally_fl:\n"
                  "setp.ge.u64 %tally_p, %tally_idx, %tally_total;\n"
                  "@%tally_p exit;\n");
  emit_thread0(b);
  /* every thread of the block is here (the exits above are block-uniform) */
  rw__buf_puts(b, "mov.u32 %tally_fc, 0;\n"
                  "@%tally_t0 st.shared.u32 [tally_fstate], %tally_fc;\n"
                  "bar.sync 0;\n"
                  "setp.ne.u32 %tally_cm, %tally_fc, 0;\n");
  emit_decompose(b);
}

/* Falling off the body's end returns; then the give-up path: the thread
 * whose compare-and-swap gave the block up records its index and exits. */
static void emit_flush_tail(rw__buf_t *b) {
  rw__buf_puts(b, "ret;\n"
                  "$tally_fgive:\n"
                  "ld.param.u64 %tally_fa, [tally_redo];\n"
                  "setp.ne.u64 %tally_fq, %tally_fa, 0;\n"
                  "mov.u32 %tally_t32, %ctaid.x;\n"
                  "ld.param.u64 %tally_idx, [tally_block_offset];\n"
                  "cvt.u64.u32 %tally_q, %tally_t32;\n"
                  "add.u64 %tally_idx, %tally_idx, %tally_q;\n"
                  "cvt.u32.u64 %tally_l32, %tally_idx;\n"
                  "@!%tally_fq bra $tally_fg;\n"
                  "cvta.to.global.u64 %tally_fa, %tally_fa;\n"
                  "mul.wide.u32 %tally_q, %tally_t32, 4;\n"
                  "add.u64 %tally_q, %tally_fa, %tally_q;\n"
                  "ld.global.u32 %tally_l32, [%tally_q+16];\n"
                  "$tally_fg:\n"
                  "ld.param.u64 %tally_fa, [tally_ctl];\n"
                  "cvta.to.global.u64 %tally_fa, %tally_fa;\n"
                  "atom.global.add.u32 %tally_ft, [%tally_fa+4], 1;\n"
                  "mul.wide.u32 %tally_q, %tally_ft, 4;\n"
                  "add.u64 %tally_q, %tally_fa, %tally_q;\n"
                  "st.global.u32 [%tally_q+16], %tally_l32;\n"
                  "exit;\n");
}

/* The first state space named among s's modifiers, or NULL. */
static const char *state_space(const rw__stmt_t *s) {
  static const char *const spaces[] = {".global", ".shared", ".local", ".param", ".const"};
  for (size_t k = 0; k < s->nmods; k++)
    for (size_t i = 0; i < sizeof(spaces) / sizeof(spaces[0]); i++)
      if (strncmp(s->mods[k], spaces[i], strlen(spaces[i])) == 0)
        return spaces[i];
  return NULL;
}

/* Whether s can change something outside its block: stores and atomics
 * that are not to shared, local or parameter space (generic ones may be
 * global), surface writes, copies whose destination is global, multimem,
 * discard, tensormap writes, calls (whatever the callee does). */
static bool flush_effect(const rw__stmt_t *s) {
  static const char *const always[] = {"sust", "sured", "call", "multimem", "discard",
                                       "tensormap"};
  const char *sp;
  if (s->kind != RW__ST_INSN)
    return false;
  for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
    if (strcmp(s->opcode, always[i]) == 0)
      return true;
  sp = state_space(s);
  if (strcmp(s->opcode, "st") == 0 || strcmp(s->opcode, "atom") == 0 ||
      strcmp(s->opcode, "red") == 0)
    return sp == NULL || strcmp(sp, ".global") == 0;
  if (strcmp(s->opcode, "wmma") == 0 || strcmp(s->opcode, "cp") == 0) {
    bool store = strcmp(s->opcode, "cp") == 0;
    for (size_t k = 0; k < s->nmods && !store; k++)
      store = strcmp(s->mods[k], ".store") == 0;
    return store && (strcmp(s->opcode, "cp") == 0 ? sp != NULL && strcmp(sp, ".global") == 0
                                                  : sp == NULL || strcmp(sp, ".global") == 0);
  }
  return false;
}

/* A CTA-wide barrier or a warp-synchronous instruction: a thread that gave
 * up no longer holds it up, so the others check the block's state after. */
static bool flush_meets(const rw__stmt_t *s) {
  static const char *const warp[] = {"shfl", "vote", "match", "redux", "elect"};
  bool counted;
  rw__bar_kind_t k = rw__bar_classify(s, &counted);
  if (k == RW__BAR_SYNC || k == RW__BAR_RED)
    return true;
  if (s->kind != RW__ST_INSN)
    return false;
  for (size_t i = 0; i < sizeof(warp) / sizeof(warp[0]); i++)
    if (strcmp(s->opcode, warp[i]) == 0)
      return true;
  if (strcmp(s->opcode, "bar") == 0 || strcmp(s->opcode, "barrier") == 0)
    return true; /* bar.warp.sync */
  return false;
}

typedef struct label_pos {
  const char *name;
  size_t at;
} label_pos_t;

static int cmp_label(const void *a, const void *b) {
  return strcmp(((const label_pos_t *)a)->name, ((const label_pos_t *)b)->name);
}

/* back[i]: statement i of f's body may jump to a statement at index <= i
 * (a bra to an earlier label, or brx.idx, whose table may name any).
 * Labels are sorted once, so a body of n statements costs n log n. */
static int flush_backward_map(const rw__func_t *f, bool **out) {
  size_t n = f->body.n, nl = 0;
  label_pos_t *ls = malloc((n ? n : 1) * sizeof(*ls));
  bool *back = calloc(n ? n : 1, sizeof(*back));
  if (ls == NULL || back == NULL) {
    free(ls);
    free(back);
    return -ENOMEM;
  }
  for (size_t i = 0; i < n; i++)
    if (f->body.v[i]->kind == RW__ST_LABEL)
      ls[nl++] = (label_pos_t){f->body.v[i]->name, i};
  qsort(ls, nl, sizeof(*ls), cmp_label);
  for (size_t i = 0; i < n; i++) {
    const rw__stmt_t *s = f->body.v[i];
    if (s->kind != RW__ST_INSN)
      continue;
    if (strcmp(s->opcode, "brx") == 0) {
      back[i] = true;
    } else if (strcmp(s->opcode, "bra") == 0 && s->nops >= 1 && s->ops[0].kind == RW__OP_SYM) {
      label_pos_t key = {s->ops[0].toks[0].text, 0};
      const label_pos_t *at = bsearch(&key, ls, nl, sizeof(*ls), cmp_label);
      back[i] = at != NULL && at->at <= i;
    }
  }
  free(ls);
  *out = back;
  return 0;
}

/* FLUSH rewrite of body statement i (s, after sreg substitution; back:
 * it may branch backward). */
static int flush_stmt(rw_ptx_module_t *m, bool back, size_t i, rw__stmt_t *s, rw__stmt_vec_t *out,
                      rw_diag_t *d) {
  rw__buf_t b = {0};
  int rc = 0;
  if (back)
    rw__buf_printf(&b,
                   "@%%tally_cm bra $tally_fp%zu;\n"
                   "add.u32 %%tally_fc, %%tally_fc, 1;\n"
                   "and.b32 %%tally_ft, %%tally_fc, %d;\n"
                   "setp.ne.u32 %%tally_fq, %%tally_ft, 0;\n"
                   "@%%tally_fq bra $tally_fp%zu;\n"
                   "ld.param.u64 %%tally_fa, [tally_ctl];\n"
                   "cvta.to.global.u64 %%tally_fa, %%tally_fa;\n"
                   "ld.volatile.global.u32 %%tally_ft, [%%tally_fa];\n"
                   "setp.eq.u32 %%tally_fq, %%tally_ft, 0;\n"
                   "@%%tally_fq bra $tally_fp%zu;\n"
                   "atom.shared.cas.b32 %%tally_ft, [tally_fstate], 0, 1;\n"
                   "setp.eq.u32 %%tally_fq, %%tally_ft, 0;\n"
                   "@%%tally_fq bra $tally_fgive;\n"
                   "setp.eq.u32 %%tally_fq, %%tally_ft, 1;\n"
                   "@%%tally_fq exit;\n"
                   "setp.eq.u32 %%tally_cm, %%tally_ft, 2;\n"
                   "$tally_fp%zu:\n",
                   i, FLUSH_POLL_EVERY - 1, i, i, i);
  else if (flush_effect(s))
    rw__buf_printf(&b,
                   "@%%tally_cm bra $tally_fc%zu;\n"
                   "atom.shared.cas.b32 %%tally_ft, [tally_fstate], 0, 2;\n"
                   "setp.eq.u32 %%tally_fq, %%tally_ft, 1;\n"
                   "@%%tally_fq exit;\n"
                   "setp.ne.u32 %%tally_cm, %%tally_ft, 1;\n"
                   "$tally_fc%zu:\n",
                   i, i);
  if (b.err)
    return b.err;
  if (b.len && (rc = rw__parse_body_text(m, b.p, out, d)) < 0)
    goto out;
  if (back && strcmp(s->opcode, "bra") == 0) {
    /* the poll may have sent some threads away: not uniform any more */
    bool uni = false;
    for (size_t k = 0; k < s->nmods; k++)
      uni |= strcmp(s->mods[k], ".uni") == 0;
    if (uni) {
      b.len = 0;
      rw__buf_printf(&b, "%s%s%s%sbra %s;\n", s->pred ? "@" : "", s->pred && s->pred_neg ? "!" : "",
                     s->pred ? s->pred : "", s->pred ? " " : "", s->ops[0].toks[0].text);
      if (b.err)
        rc = b.err;
      else
        rc = rw__parse_body_text(m, b.p, out, d);
      goto out;
    }
  }
  if ((rc = rw__vec_push(out, s)) < 0)
    goto out;
  if (flush_meets(s)) {
    b.len = 0;
    rw__buf_printf(&b,
                   "@%%tally_cm bra $tally_fb%zu;\n"
                   "ld.volatile.shared.u32 %%tally_ft, [tally_fstate];\n"
                   "setp.eq.u32 %%tally_fq, %%tally_ft, 1;\n"
                   "@%%tally_fq exit;\n"
                   "$tally_fb%zu:\n",
                   i, i);
    rc = b.err ? b.err : rw__parse_body_text(m, b.p, out, d);
  }
out:
  free(b.p);
  return rc < 0 ? rc : 0;
}

/* PTB rewrite of one body statement (after sreg substitution) into out:
 * ret/exit become branches to the epilogue; the rest stays. */
static int ptb_stmt(rw_ptx_module_t *m, rw__stmt_t *s, rw__stmt_vec_t *out, rw_diag_t *d) {
  char text[128];
  char pred[80] = "";

  if (s->kind != RW__ST_INSN || (strcmp(s->opcode, "ret") != 0 && strcmp(s->opcode, "exit") != 0))
    return rw__vec_push(out, s);
  if (s->pred != NULL)
    snprintf(pred, sizeof(pred), "@%s%s ", s->pred_neg ? "!" : "", s->pred);
  snprintf(text, sizeof(text), "%sbra $tally_epi;", pred);
  return rw__parse_body_text(m, text, out, d);
}

int rw_xform_apply(rw_ptx_module_t *m, const char *entry, rw_xform_kind_t kind, rw_diag_t *d) {
  rw__xinfo_t xi;
  rw__func_t *f;
  rw__buf_t b = {0};
  rw__stmt_vec_t head = {0}, tail = {0};
  size_t fidx = 0;
  bool *back = NULL;
  int rc;

  if ((unsigned)kind >= RW_XFORM_KIND_COUNT)
    return rw_diag_set(d, -EINVAL, 0, 0, "unknown transformation %d", (int)kind);
  f = entry != NULL ? rw__find_func(m, entry) : NULL;
  if (f == NULL || !f->is_entry)
    return rw_diag_set(d, -ENOENT, 0, 0, "no entry named %s", entry ? entry : "(null)");
  if ((rc = rw__xform_analyze(m, f, kind, &xi, NULL, d)) < 0)
    return rc;
  for (size_t i = 0; i < m->top.n; i++)
    if (m->top.v[i]->kind == RW__ST_FUNC && m->top.v[i]->func == f)
      fidx = i;

  rw__buf_printf(&b, "%s%s", f->name, rw_xform_suffix(kind));
  if (b.err)
    return b.err;
  for (size_t i = 0; i < m->top.n; i++) {
    if (m->top.v[i]->kind == RW__ST_FUNC && strcmp(m->top.v[i]->func->name, b.p) == 0) {
      rc = rw_diag_set(d, -EEXIST, 0, 0, "%s already exists", b.p);
      goto out;
    }
  }
  rw__func_t *nf = rw__alloc(&m->arena, sizeof(*nf));
  rw__stmt_t *fs = rw__alloc(&m->arena, sizeof(*fs));
  char *name = rw__strndup(&m->arena, b.p, b.len);
  static const char *const extra[RW_XFORM_KIND_COUNT][7] = {
      {".param .u32 tally_gx", ".param .u32 tally_gy", ".param .u32 tally_gz",
       ".param .u64 tally_block_offset"},
      {".param .u32 tally_gx", ".param .u32 tally_gy", ".param .u32 tally_gz",
       ".param .u64 tally_ctl", ".param .u64 tally_first", ".param .u32 tally_nstatic",
       ".param .u32 tally_batch"},
      {".param .u32 tally_gx", ".param .u32 tally_gy", ".param .u32 tally_gz",
       ".param .u64 tally_block_offset", ".param .u64 tally_ctl", ".param .u64 tally_redo"}};
  static const size_t nextras[RW_XFORM_KIND_COUNT] = {4, 7, 6}; /* rw.h: what each kind adds */
  size_t nextra = nextras[kind];
  rw__param_t *params = rw__alloc(&m->arena, (f->nparams + nextra) * sizeof(*params));
  if (nf == NULL || fs == NULL || name == NULL || params == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  *nf = *f;
  nf->name = name;
  nf->has_params = true;
  nf->body = (rw__stmt_vec_t){0};
  if (f->nparams)
    memcpy(params, f->params, f->nparams * sizeof(*params));
  for (size_t i = 0; i < nextra; i++)
    if ((rc = make_param(m, extra[kind][i], &params[f->nparams + i], d)) < 0)
      goto out;
  nf->params = params;
  nf->nparams = f->nparams + nextra;

  /* head and tail code */
  b.len = 0;
  if (kind == RW_XFORM_SLICE)
    emit_slice_head(&b);
  else if (kind == RW_XFORM_PTB)
    emit_ptb_head(&b, &xi);
  else
    emit_flush_head(&b);
  if (b.err) {
    rc = b.err;
    goto out;
  }
  if ((rc = rw__parse_body_text(m, b.p, &head, d)) < 0)
    goto out;
  if (kind != RW_XFORM_SLICE) {
    b.len = 0;
    if (kind == RW_XFORM_PTB)
      emit_ptb_tail(&b);
    else
      emit_flush_tail(&b);
    if (b.err) {
      rc = b.err;
      goto out;
    }
    if ((rc = rw__parse_body_text(m, b.p, &tail, d)) < 0)
      goto out;
  }

  if (kind == RW_XFORM_FLUSH && (rc = flush_backward_map(f, &back)) < 0)
    goto out;
  if ((rc = rw__module_track(m, &nf->body)) < 0)
    goto out;
  if ((rc = rw__vec_insert(&nf->body, 0, head.v, head.n)) < 0)
    goto out;
  for (size_t i = 0; i < f->body.n; i++) {
    rw__stmt_t *s;
    if ((rc = subst_sregs(m, f->body.v[i], &s)) < 0)
      goto out;
    if (kind == RW_XFORM_PTB)
      rc = ptb_stmt(m, s, &nf->body, d);
    else if (kind == RW_XFORM_FLUSH)
      rc = flush_stmt(m, back[i], i, s, &nf->body, d);
    else
      rc = rw__vec_push(&nf->body, s);
    if (rc < 0)
      goto out;
  }
  if ((rc = rw__vec_insert(&nf->body, nf->body.n, tail.v, tail.n)) < 0)
    goto out;
  fs->kind = RW__ST_FUNC;
  fs->func = nf;
  fs->name = nf->name;
  if ((rc = rw__vec_insert(&m->top, fidx + 1, &fs, 1)) < 0)
    goto out;
  rc = 0;
out:
  /* On failure nf's body vector stays tracked (freed with m) but unreachable. */
  if (rc == -ENOMEM)
    rw_diag_set(d, -ENOMEM, 0, 0, "out of memory");
  free(head.v);
  free(tail.v);
  free(back);
  free(b.p);
  return rc;
}
