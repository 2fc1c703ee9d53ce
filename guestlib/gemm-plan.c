/* gemm-plan.c: the GEMM split planner (see gemm-plan.h).
 *
 * Three steps: check the description (every size, leading dimension and
 * stride, with every address range computed in checked arithmetic, so a
 * hostile description is refused and never overflows); refuse what a split
 * would change (reducing epilogues, max-|D|, block scales, alpha vectors,
 * outputs overlapping inputs); then pick the split with the fewest pieces
 * that fit the budget, the squarest among equals, and write the pieces.
 *
 * Invariants of a plan, which tests/test-gemm-plan.c checks element by
 * element:
 *   - the pieces' blocks [row0, row0+m) x [col0, col0+n) x [batch0,
 *     batch0+batch) partition [0, M) x [0, N) x [0, BATCH);
 *   - row0 and col0 are multiples of the tile; so are m and n except for
 *     the last piece of a row or column of pieces;
 *   - every address is the whole's address plus the offset of element
 *     (row0, col0) of matrix batch0 in that operand's layout, which lies
 *     inside the range checked in step one.
 */
#include "guestlib/gemm-plan.h"

#include <stdbool.h>

#define DIM_MAX INT32_MAX /* cuBLAS's m, n, k, batch and ld are ints */
#define TILE_MAX 65536

static const unsigned type_bits[GEMM_PLAN_TYPE_COUNT] = {
#define GEMM_PLAN_TYPE_BITS(name, bits) [GEMM_PLAN_##name] = bits,
    GEMM_PLAN_TYPES(GEMM_PLAN_TYPE_BITS)
#undef GEMM_PLAN_TYPE_BITS
};

unsigned gemm_plan_type_bits(int type) {
  if (type < 0 || type >= GEMM_PLAN_TYPE_COUNT) return 0;
  return type_bits[type];
}

static const char *const reason_names[GEMM_PLAN_REASON_COUNT] = {
#define GEMM_PLAN_REASON_NAME(name, text) [GEMM_PLAN_##name] = #name,
    GEMM_PLAN_REASONS(GEMM_PLAN_REASON_NAME)
#undef GEMM_PLAN_REASON_NAME
};
static const char *const reason_texts[GEMM_PLAN_REASON_COUNT] = {
#define GEMM_PLAN_REASON_TEXT(name, text) [GEMM_PLAN_##name] = text,
    GEMM_PLAN_REASONS(GEMM_PLAN_REASON_TEXT)
#undef GEMM_PLAN_REASON_TEXT
};

const char *gemm_plan_reason_name(int reason) {
  if (reason < 0 || reason >= GEMM_PLAN_REASON_COUNT) return "UNKNOWN";
  return reason_names[reason];
}

const char *gemm_plan_reason_text(int reason) {
  if (reason < 0 || reason >= GEMM_PLAN_REASON_COUNT) return "unknown reason";
  return reason_texts[reason];
}

/* What each epilogue touches besides A, B, C and D. */
enum {
  EPI_BIAS = 1,    /* reads one bias value per row or column of D */
  EPI_AUX_OUT = 2, /* writes an m x n aux matrix */
  EPI_AUX_IN = 4,  /* reads an m x n aux matrix */
  EPI_REDUCES = 8, /* writes a reduction across the output: never split */
};
static const unsigned char epi_flags[GEMM_PLAN_EPI_COUNT] = {
    [GEMM_PLAN_EPI_DEFAULT] = 0,
    [GEMM_PLAN_EPI_RELU] = 0,
    [GEMM_PLAN_EPI_GELU] = 0,
    [GEMM_PLAN_EPI_BIAS] = EPI_BIAS,
    [GEMM_PLAN_EPI_RELU_BIAS] = EPI_BIAS,
    [GEMM_PLAN_EPI_GELU_BIAS] = EPI_BIAS,
    [GEMM_PLAN_EPI_RELU_AUX] = EPI_AUX_OUT,
    [GEMM_PLAN_EPI_GELU_AUX] = EPI_AUX_OUT,
    [GEMM_PLAN_EPI_RELU_AUX_BIAS] = EPI_AUX_OUT | EPI_BIAS,
    [GEMM_PLAN_EPI_GELU_AUX_BIAS] = EPI_AUX_OUT | EPI_BIAS,
    [GEMM_PLAN_EPI_DRELU] = EPI_AUX_IN,
    [GEMM_PLAN_EPI_DGELU] = EPI_AUX_IN,
    [GEMM_PLAN_EPI_DRELU_BGRAD] = EPI_AUX_IN | EPI_REDUCES,
    [GEMM_PLAN_EPI_DGELU_BGRAD] = EPI_AUX_IN | EPI_REDUCES,
    [GEMM_PLAN_EPI_BGRADA] = EPI_REDUCES,
    [GEMM_PLAN_EPI_BGRADB] = EPI_REDUCES,
};

/* A byte range [lo, hi) an operand may touch. */
typedef struct {
  uint64_t lo, hi;
} range_t;

/* The range of a batch of column-major rows x cols matrices (rows, cols,
 * batch >= 1) of bits-bit elements; false when it overflows 64 bits or
 * wraps the address space. */
static bool range_of(uint64_t ptr, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                     int64_t stride, unsigned bits, range_t *r) {
  uint64_t last, t, nbits;
  if (ptr == 0 || bits == 0 || rows < 1 || cols < 1 || ld < rows || batch < 1 || stride < 0) return false;
  if (__builtin_mul_overflow((uint64_t)(cols - 1), (uint64_t)ld, &last)) return false;
  if (__builtin_add_overflow(last, (uint64_t)(rows - 1), &last)) return false;
  if (__builtin_mul_overflow((uint64_t)(batch - 1), (uint64_t)stride, &t)) return false;
  if (__builtin_add_overflow(last, t, &last)) return false;
  if (__builtin_add_overflow(last, 1, &t)) return false;
  if (__builtin_mul_overflow(t, (uint64_t)bits, &nbits)) return false;
  r->lo = ptr;
  return !__builtin_add_overflow(ptr, nbits / 8 + (nbits % 8 != 0), &r->hi);
}

static bool overlap(const range_t *x, const range_t *y) {
  return x->lo < y->hi && y->lo < x->hi;
}

static bool op_ok(int op) { return op >= GEMM_PLAN_OP_N && op <= GEMM_PLAN_OP_C; }

/* A matrix type: any but the one-bit mask. */
static unsigned matrix_bits(int type) {
  return type == GEMM_PLAN_BIT ? 0 : gemm_plan_type_bits(type);
}

/* Step one, the parts that need no address arithmetic. */
static gemm_plan_reason_t check_shape(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud) {
  if (!op_ok(g->transa) || !op_ok(g->transb)) return GEMM_PLAN_INVALID;
  if (g->m < 0 || g->n < 0 || g->k < 0 || g->batch < 0 || g->m > DIM_MAX || g->n > DIM_MAX ||
      g->k > DIM_MAX || g->batch > DIM_MAX)
    return GEMM_PLAN_INVALID;
  if (!matrix_bits(g->atype) || !matrix_bits(g->btype) || !matrix_bits(g->ctype) ||
      !matrix_bits(g->dtype))
    return GEMM_PLAN_INVALID;
  if (g->lda < 1 || g->ldb < 1 || g->ldd < 1 || g->stride_a < 0 || g->stride_b < 0 ||
      g->stride_c < 0 || g->stride_d < 0)
    return GEMM_PLAN_INVALID;
  if (g->scalar_mode < GEMM_PLAN_SCALAR_HOST || g->scalar_mode > GEMM_PLAN_SCALAR_DEVICE_VECTOR)
    return GEMM_PLAN_INVALID;
  if (g->scale_mode < GEMM_PLAN_SCALE_NONE || g->scale_mode > GEMM_PLAN_SCALE_BLOCK)
    return GEMM_PLAN_INVALID;
  if (bud == NULL || bud->tile < 1 || bud->tile > TILE_MAX || bud->max_tiles < 0)
    return GEMM_PLAN_INVALID;
  if (g->m == 0 || g->n == 0 || g->batch == 0) return GEMM_PLAN_EMPTY;
  if (g->epi < 0 || g->epi >= GEMM_PLAN_EPI_COUNT) return GEMM_PLAN_EPI_UNKNOWN;
  if (epi_flags[g->epi] & EPI_REDUCES) return GEMM_PLAN_EPI_REDUCES;
  if (g->amax_d != 0) return GEMM_PLAN_AMAX;
  if (g->scale_mode == GEMM_PLAN_SCALE_BLOCK) return GEMM_PLAN_BLOCK_SCALE;
  if (g->scalar_mode == GEMM_PLAN_SCALAR_DEVICE_VECTOR) return GEMM_PLAN_ALPHA_VECTOR;
  return GEMM_PLAN_OK;
}

/* C is D itself (in place, same layout): each piece reads only what it
 * writes, so the split stays exact. */
static bool c_is_d(const gemm_plan_gemm_t *g) {
  return g->c == g->d && g->ldc == g->ldd && g->ctype == g->dtype &&
         (g->batch == 1 || g->stride_c == g->stride_d);
}

/* Step one's ranges, then the aliasing rule: nothing a piece writes (D,
 * an aux output) may overlap anything another piece reads (A, B, C unless
 * it is D itself, bias, aux input, device alpha/beta), nor each other, nor
 * itself across batches. */
static gemm_plan_reason_t check_ranges(const gemm_plan_gemm_t *g) {
  range_t rd[8], wr[2];
  int nr = 0, nw = 0;
  unsigned fl = epi_flags[g->epi];
  bool a_n = g->transa == GEMM_PLAN_OP_N, b_n = g->transb == GEMM_PLAN_OP_N;
  if (g->k > 0) {
    if (!range_of(g->a, a_n ? g->m : g->k, a_n ? g->k : g->m, g->lda, g->batch, g->stride_a,
                  matrix_bits(g->atype), &rd[nr++]))
      return GEMM_PLAN_INVALID;
    if (!range_of(g->b, b_n ? g->k : g->n, b_n ? g->n : g->k, g->ldb, g->batch, g->stride_b,
                  matrix_bits(g->btype), &rd[nr++]))
      return GEMM_PLAN_INVALID;
  }
  if (!range_of(g->d, g->m, g->n, g->ldd, g->batch, g->stride_d, matrix_bits(g->dtype), &wr[nw++]))
    return GEMM_PLAN_INVALID;
  if (g->batch > 1 && (uint64_t)g->stride_d < (uint64_t)(g->n - 1) * (uint64_t)g->ldd + (uint64_t)g->m)
    return GEMM_PLAN_ALIAS;
  if (g->c == 0) {
    if (!g->beta_zero) return GEMM_PLAN_INVALID;
  } else {
    range_t rc;
    if (!range_of(g->c, g->m, g->n, g->ldc, g->batch, g->stride_c, matrix_bits(g->ctype), &rc))
      return GEMM_PLAN_INVALID;
    if (!g->beta_zero && !c_is_d(g)) rd[nr++] = rc;
  }
  if (fl & EPI_BIAS) {
    int64_t len = g->bias_per_col ? g->n : g->m;
    if (g->bias_stride < 0 || g->bias_type == GEMM_PLAN_BIT ||
        !range_of(g->bias, len, 1, len, g->batch, g->bias_stride,
                  gemm_plan_type_bits(g->bias_type), &rd[nr++]))
      return GEMM_PLAN_INVALID;
  }
  if (fl & (EPI_AUX_IN | EPI_AUX_OUT)) {
    range_t ra;
    if (g->aux_stride < 0 || !range_of(g->aux, g->m, g->n, g->aux_ld, g->batch, g->aux_stride,
                                       gemm_plan_type_bits(g->aux_type), &ra))
      return GEMM_PLAN_INVALID;
    if (fl & EPI_AUX_IN) {
      rd[nr++] = ra;
    } else {
      if (g->batch > 1 &&
          (uint64_t)g->aux_stride < (uint64_t)(g->n - 1) * (uint64_t)g->aux_ld + (uint64_t)g->m)
        return GEMM_PLAN_ALIAS;
      wr[nw++] = ra;
    }
  }
  if (g->scalar_mode == GEMM_PLAN_SCALAR_DEVICE) {
    if (g->scalar_bytes < 1 || g->scalar_bytes > 16) return GEMM_PLAN_INVALID;
    if (!range_of(g->alpha, 1, 1, 1, 1, 0, g->scalar_bytes * 8, &rd[nr++]))
      return GEMM_PLAN_INVALID;
    if (!g->beta_zero && !range_of(g->beta, 1, 1, 1, 1, 0, g->scalar_bytes * 8, &rd[nr++]))
      return GEMM_PLAN_INVALID;
  }
  for (int w = 0; w < nw; w++) {
    for (int r = 0; r < nr; r++)
      if (overlap(&wr[w], &rd[r])) return GEMM_PLAN_ALIAS;
    for (int v = w + 1; v < nw; v++)
      if (overlap(&wr[w], &wr[v])) return GEMM_PLAN_ALIAS;
  }
  return GEMM_PLAN_OK;
}

static int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0); }

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* Whether a rows x cols x batch piece fits the budget. */
static bool fits(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud, int64_t rows,
                 int64_t cols, int64_t batch) {
  if (bud->max_tiles > 0) {
    uint64_t t;
    if (__builtin_mul_overflow((uint64_t)ceil_div(rows, bud->tile),
                               (uint64_t)ceil_div(cols, bud->tile), &t) ||
        __builtin_mul_overflow(t, (uint64_t)batch, &t) || t > (uint64_t)bud->max_tiles)
      return false;
  }
  return bud->cost == NULL || bud->cost(rows, cols, g->k, batch, bud->cost_user) <= bud->max_cost;
}

/* The chosen split: steps in granules (tiles) for rows and columns, in
 * matrices for the batch. */
typedef struct {
  int64_t sm, sn, sb;
  uint64_t count;
} split_t;

/* Whether step s fits along one axis: s granules of columns next to a
 * fixed number of rows, or s whole matrices. */
enum { AXIS_COLS, AXIS_BATCH };
static bool fits_step(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud, int axis,
                      int64_t rows, int64_t s) {
  if (axis == AXIS_COLS) return fits(g, bud, rows, min64(s * bud->tile, g->n), 1);
  return fits(g, bud, g->m, g->n, s);
}

/* The largest step in [1, hi] that fits, given that 1 does; a binary
 * search, exact because fits() is monotone. */
static int64_t largest(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud, int axis,
                       int64_t rows, int64_t hi) {
  int64_t lo = 1;
  while (lo < hi) {
    int64_t mid = hi - (hi - lo) / 2;
    if (fits_step(g, bud, axis, rows, mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/* The piece shape of a row step of sm granules: the best column step that
 * fits, balanced so pieces are as equal as the tile allows.  False when not
 * even one granule of columns fits. */
static bool try_rows(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud, int64_t gm,
                     int64_t gn, int64_t sm, split_t *s) {
  int64_t G = bud->tile, rows, sn;
  int64_t pm = ceil_div(gm, sm);
  sm = ceil_div(gm, pm);
  rows = min64(sm * G, g->m);
  if (!fits(g, bud, rows, min64(G, g->n), 1)) return false;
  sn = largest(g, bud, AXIS_COLS, rows, gn);
  int64_t pn = ceil_div(gn, sn);
  s->sm = sm;
  s->sn = ceil_div(gn, pn);
  s->sb = 1;
  s->count = (uint64_t)pm * (uint64_t)pn;
  return true;
}

/* max(r, c) / min(r, c) of a split's first (largest) piece. */
static double aspect(const gemm_plan_gemm_t *g, int64_t G, const split_t *s) {
  double r = (double)min64(s->sm * G, g->m), c = (double)min64(s->sn * G, g->n);
  return r > c ? r / c : c / r;
}

/* Step three: the fewest pieces that fit, the squarest among equals.  A
 * whole matrix that fits is never cut: the batch is grouped instead.  When
 * not even one tile fits, the pieces are single tiles (the nearest the
 * budget can be met; k is never split). */
static void choose(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud, split_t *best) {
  int64_t G = bud->tile, gm = ceil_div(g->m, G), gn = ceil_div(g->n, G);
  best->sm = gm;
  best->sn = gn;
  if (fits(g, bud, g->m, g->n, g->batch)) {
    best->sb = g->batch;
    best->count = 1;
    return;
  }
  if (fits(g, bud, g->m, g->n, 1)) {
    int64_t pb = ceil_div(g->batch, largest(g, bud, AXIS_BATCH, g->m, g->batch));
    best->sb = ceil_div(g->batch, pb);
    best->count = (uint64_t)pb;
    return;
  }
  /* Every row step ceil(gm / p) is either at most R or one of the first R
   * values of p (R * R >= gm): 2R candidates cover them all. */
  int64_t R = 1;
  while (R * R < gm) R++;
  bool found = false;
  for (int64_t i = 1; i <= 2 * R; i++) {
    int64_t sm = i <= R ? i : ceil_div(gm, i - R);
    split_t s;
    if (sm > gm || !try_rows(g, bud, gm, gn, sm, &s)) continue;
    if (!found || s.count < best->count ||
        (s.count == best->count && aspect(g, G, &s) < aspect(g, G, best))) {
      *best = s;
      found = true;
    }
  }
  if (!found) {
    best->sm = best->sn = 1;
    best->count = (uint64_t)gm * (uint64_t)gn;
  }
  best->sb = 1;
  /* cannot overflow (D's checked range holds m * n * batch elements), but saturate anyway */
  if (__builtin_mul_overflow(best->count, (uint64_t)g->batch, &best->count))
    best->count = UINT64_MAX;
}

/* Address of element index idx (in elements of bits bits) past p; idx lies
 * inside a range checked by check_ranges, so nothing overflows. */
static uint64_t at(uint64_t p, uint64_t idx, unsigned bits) {
  return p + idx * bits / 8;
}

static bool fill(const gemm_plan_gemm_t *g, int64_t r0, int64_t c0, int64_t b0,
                 gemm_plan_piece_t *p) {
  uint64_t ub0 = (uint64_t)b0, ur0 = (uint64_t)r0, uc0 = (uint64_t)c0;
  unsigned fl = epi_flags[g->epi];
  p->a = g->a;
  p->b = g->b;
  if (g->k > 0) {
    uint64_t ia = g->transa == GEMM_PLAN_OP_N ? ur0 : ur0 * (uint64_t)g->lda;
    uint64_t ib = g->transb == GEMM_PLAN_OP_N ? uc0 * (uint64_t)g->ldb : uc0;
    p->a = at(g->a, ia + ub0 * (uint64_t)g->stride_a, matrix_bits(g->atype));
    p->b = at(g->b, ib + ub0 * (uint64_t)g->stride_b, matrix_bits(g->btype));
  }
  p->c = g->c == 0 ? 0
                   : at(g->c, ur0 + uc0 * (uint64_t)g->ldc + ub0 * (uint64_t)g->stride_c,
                        matrix_bits(g->ctype));
  p->d = at(g->d, ur0 + uc0 * (uint64_t)g->ldd + ub0 * (uint64_t)g->stride_d,
            matrix_bits(g->dtype));
  p->bias = g->bias;
  if (fl & EPI_BIAS)
    p->bias = at(g->bias, (g->bias_per_col ? uc0 : ur0) + ub0 * (uint64_t)g->bias_stride,
                 gemm_plan_type_bits(g->bias_type));
  p->aux = g->aux;
  if (fl & (EPI_AUX_IN | EPI_AUX_OUT)) {
    unsigned bits = gemm_plan_type_bits(g->aux_type);
    uint64_t idx = ur0 + uc0 * (uint64_t)g->aux_ld + ub0 * (uint64_t)g->aux_stride;
    if (idx * bits % 8 != 0) return false;
    p->aux = at(g->aux, idx, bits);
  }
  return true;
}

gemm_plan_reason_t gemm_plan_split(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud,
                                   gemm_plan_piece_t *out, size_t cap, size_t *count) {
  gemm_plan_reason_t why;
  split_t s;
  size_t n = 0;
  if (count == NULL) return GEMM_PLAN_INVALID;
  *count = 0;
  if (g == NULL) return GEMM_PLAN_INVALID;
  if ((why = check_shape(g, bud)) != GEMM_PLAN_OK) return why;
  if ((why = check_ranges(g)) != GEMM_PLAN_OK) return why;
  choose(g, bud, &s);
  if (s.count > cap || out == NULL) return GEMM_PLAN_TOO_MANY;
  int64_t rstep = s.sm * bud->tile, cstep = s.sn * bud->tile;
  for (int64_t b0 = 0; b0 < g->batch; b0 += s.sb)
    for (int64_t c0 = 0; c0 < g->n; c0 += cstep)
      for (int64_t r0 = 0; r0 < g->m; r0 += rstep) {
        if (n >= cap) return GEMM_PLAN_TOO_MANY; /* cannot happen: count was exact */
        gemm_plan_piece_t *p = &out[n++];
        p->row0 = r0;
        p->col0 = c0;
        p->batch0 = b0;
        p->m = min64(rstep, g->m - r0);
        p->n = min64(cstep, g->n - c0);
        p->batch = min64(s.sb, g->batch - b0);
        if (!fill(g, r0, c0, b0, p)) return GEMM_PLAN_AUX_UNALIGNED;
      }
  *count = n;
  return GEMM_PLAN_OK;
}
