/* test-gemm-plan.c: the GEMM split planner (guestlib/gemm-plan.h).
 *
 * The central check runs a naive CPU GEMM of every planned piece, through
 * the piece's own addresses, and compares the result with the naive GEMM
 * of the whole, bit for bit, over the whole output buffer (padding past m
 * included, so a piece that writes outside its block is caught).  Inputs
 * are small integers, so float sums are exact in any order; the padding of
 * A, B and C is NaN, so a piece that reads outside the matrix is caught.
 * A coverage count checks that every output element belongs to exactly
 * one piece, and each piece's addresses are checked against the element
 * they must point at.  The epilogue functions here are stand-ins (the
 * planner looks only at which elements an epilogue reads and writes).
 */
#include "guestlib/gemm-plan.h"

#include <math.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define F32 GEMM_PLAN_F32

static float *fptr(uint64_t a) { return (float *)(uintptr_t)a; }
static uint64_t addr(const void *p) { return (uint64_t)(uintptr_t)p; }

/* The reference GEMM, as cuBLAS/cuBLASLt define it, on F32 matrices. */
static int aux_bit(uint64_t aux, uint64_t idx) {
  return (((const uint8_t *)(uintptr_t)aux)[idx / 8] >> (idx % 8)) & 1;
}
static void set_aux_bit(uint64_t aux, uint64_t idx, int v) {
  uint8_t *p = (uint8_t *)(uintptr_t)aux + idx / 8;
  *p = (uint8_t)((*p & ~(1u << (idx % 8))) | ((unsigned)v << (idx % 8)));
}

static float epilogue(const gemm_plan_gemm_t *g, int64_t i, int64_t j, int64_t b, float v) {
  int e = g->epi;
  bool has_bias = e == GEMM_PLAN_EPI_BIAS || e == GEMM_PLAN_EPI_RELU_BIAS ||
                  e == GEMM_PLAN_EPI_GELU_BIAS || e == GEMM_PLAN_EPI_RELU_AUX_BIAS ||
                  e == GEMM_PLAN_EPI_GELU_AUX_BIAS;
  bool relu = e == GEMM_PLAN_EPI_RELU || e == GEMM_PLAN_EPI_RELU_BIAS ||
              e == GEMM_PLAN_EPI_RELU_AUX || e == GEMM_PLAN_EPI_RELU_AUX_BIAS;
  bool gelu = e == GEMM_PLAN_EPI_GELU || e == GEMM_PLAN_EPI_GELU_BIAS ||
              e == GEMM_PLAN_EPI_GELU_AUX || e == GEMM_PLAN_EPI_GELU_AUX_BIAS;
  bool aux_out = e == GEMM_PLAN_EPI_RELU_AUX || e == GEMM_PLAN_EPI_RELU_AUX_BIAS ||
                 e == GEMM_PLAN_EPI_GELU_AUX || e == GEMM_PLAN_EPI_GELU_AUX_BIAS;
  uint64_t ai = (uint64_t)(i + j * g->aux_ld + b * g->aux_stride);
  if (has_bias) v += fptr(g->bias)[b * g->bias_stride + (g->bias_per_col ? j : i)];
  if (aux_out) {
    if (g->aux_type == GEMM_PLAN_BIT) set_aux_bit(g->aux, ai, v > 0);
    else fptr(g->aux)[ai] = v;
  }
  if (relu) v = v > 0 ? v : 0;
  if (gelu) v = v < 0 ? v * 0.5f : v;
  if (e == GEMM_PLAN_EPI_DRELU) v = aux_bit(g->aux, ai) ? v : 0;
  if (e == GEMM_PLAN_EPI_DGELU) v = v * fptr(g->aux)[ai];
  return v;
}

static void run_gemm(const gemm_plan_gemm_t *g, float alpha, float beta) {
  const float *A = fptr(g->a), *B = fptr(g->b), *C = fptr(g->c);
  float *D = fptr(g->d);
  for (int64_t b = 0; b < g->batch; b++)
    for (int64_t j = 0; j < g->n; j++)
      for (int64_t i = 0; i < g->m; i++) {
        float acc = 0;
        for (int64_t p = 0; p < g->k; p++) {
          float av = g->transa == GEMM_PLAN_OP_N ? A[b * g->stride_a + i + p * g->lda]
                                                 : A[b * g->stride_a + p + i * g->lda];
          float bv = g->transb == GEMM_PLAN_OP_N ? B[b * g->stride_b + p + j * g->ldb]
                                                 : B[b * g->stride_b + j + p * g->ldb];
          acc += av * bv;
        }
        float v = alpha * acc;
        if (!g->beta_zero) v += beta * C[b * g->stride_c + i + j * g->ldc];
        D[b * g->stride_d + i + j * g->ldd] = epilogue(g, i, j, b, v);
      }
}

/* A test case: shape, layout and epilogue. */
enum { C_SEPARATE, C_IN_PLACE, C_NONE };
typedef struct {
  int transa, transb;
  int64_t m, n, k, batch;
  int64_t pad;      /* added to every minimum leading dimension */
  int c_mode;
  int epi;
  int bias_per_col;
  int aux_type;
  int broadcast_a;  /* stride_a = 0 */
} case_t;

/* Buffers of a case: one set of inputs, two of outputs (whole, split). */
typedef struct {
  gemm_plan_gemm_t g;  /* pointing at the "whole" outputs */
  float *A, *B, *C, *D[2], *bias;
  uint8_t *aux[2];
  size_t nd, aux_bytes;
} fx_t;

static size_t span(int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  if (rows == 0 || cols == 0) return 1; /* k = 0: A or B is never read */
  return (size_t)((cols - 1) * ld + rows + (batch - 1) * stride);
}

static float *filled(size_t n, bool nan_pad, unsigned *seed) {
  float *p = malloc((n + 1) * sizeof(float));
  assert_non_null(p);
  for (size_t i = 0; i <= n; i++) {
    *seed = *seed * 1103515245u + 12345u;
    p[i] = nan_pad ? NAN : (float)((int)(*seed >> 16) % 7 - 3);
  }
  return p;
}

/* Fills the used elements of a padded matrix batch with small integers. */
static void fill_used(float *p, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                      int64_t stride, unsigned *seed) {
  for (int64_t b = 0; b < batch; b++)
    for (int64_t j = 0; j < cols; j++)
      for (int64_t i = 0; i < rows; i++) {
        *seed = *seed * 1103515245u + 12345u;
        p[b * stride + i + j * ld] = (float)((int)(*seed >> 16) % 7 - 3);
      }
}

static void fx_make(fx_t *f, const case_t *c) {
  gemm_plan_gemm_t *g = &f->g;
  unsigned seed = (unsigned)(c->m * 131 + c->n * 17 + c->k);
  memset(f, 0, sizeof(*f));
  g->transa = c->transa;
  g->transb = c->transb;
  g->m = c->m;
  g->n = c->n;
  g->k = c->k;
  g->batch = c->batch;
  g->atype = g->btype = g->ctype = g->dtype = F32;
  int64_t ra = c->transa == GEMM_PLAN_OP_N ? c->m : c->k, ca = c->transa == GEMM_PLAN_OP_N ? c->k : c->m;
  int64_t rb = c->transb == GEMM_PLAN_OP_N ? c->k : c->n, cb = c->transb == GEMM_PLAN_OP_N ? c->n : c->k;
  g->lda = ra + c->pad;
  g->ldb = rb + c->pad;
  g->ldd = c->m + c->pad;
  g->ldc = c->c_mode == C_IN_PLACE ? g->ldd : c->m + 2 * c->pad + 1;
  g->stride_a = c->broadcast_a ? 0 : g->lda * ca + 5;
  g->stride_b = g->ldb * cb + 3;
  g->stride_c = g->ldc * c->n + 1;
  g->stride_d = g->ldd * c->n + 7;
  size_t na = span(ra, ca, g->lda, c->batch, g->stride_a);
  size_t nb = span(rb, cb, g->ldb, c->batch, g->stride_b);
  f->A = filled(na, true, &seed);
  fill_used(f->A, ra, ca, g->lda, c->batch, g->stride_a, &seed);
  f->B = filled(nb, true, &seed);
  fill_used(f->B, rb, cb, g->ldb, c->batch, g->stride_b, &seed);
  f->nd = span(c->m, c->n, g->ldd, c->batch, g->stride_d) + 8;
  f->D[0] = filled(f->nd, false, &seed); /* D's padding: values a stray write would change */
  fill_used(f->D[0], c->m, c->n, g->ldd, c->batch, g->stride_d, &seed);
  f->D[1] = malloc(f->nd * sizeof(float) + sizeof(float));
  assert_non_null(f->D[1]);
  memcpy(f->D[1], f->D[0], f->nd * sizeof(float));
  g->a = addr(f->A);
  g->b = addr(f->B);
  g->d = addr(f->D[0]);
  if (c->c_mode == C_SEPARATE) {
    f->C = filled(span(c->m, c->n, g->ldc, c->batch, g->stride_c), true, &seed);
    fill_used(f->C, c->m, c->n, g->ldc, c->batch, g->stride_c, &seed);
    g->c = addr(f->C);
  } else if (c->c_mode == C_IN_PLACE) {
    g->c = g->d;
    g->stride_c = g->stride_d;
  } else {
    g->beta_zero = 1;
  }
  g->epi = c->epi;
  g->bias_per_col = c->bias_per_col;
  g->bias_type = F32;
  int64_t blen = c->bias_per_col ? c->n : c->m;
  g->bias_stride = blen + 2;
  f->bias = filled(span(blen, 1, blen, c->batch, g->bias_stride), true, &seed);
  fill_used(f->bias, blen, 1, blen, c->batch, g->bias_stride, &seed);
  g->bias = addr(f->bias);
  g->aux_type = c->aux_type ? c->aux_type : F32;
  unsigned bits = gemm_plan_type_bits(g->aux_type);
  g->aux_ld = g->aux_type == GEMM_PLAN_BIT ? (c->m + 15) / 8 * 8 : c->m + c->pad;
  g->aux_stride = g->aux_type == GEMM_PLAN_BIT ? g->aux_ld * c->n + 8 : g->aux_ld * c->n + 1;
  f->aux_bytes = (span(c->m, c->n, g->aux_ld, c->batch, g->aux_stride) * bits + 7) / 8 + 4;
  for (int w = 0; w < 2; w++) {
    f->aux[w] = malloc(f->aux_bytes);
    assert_non_null(f->aux[w]);
  }
  for (size_t i = 0; i < f->aux_bytes; i++) {
    seed = seed * 1103515245u + 12345u;
    f->aux[0][i] = (uint8_t)(seed >> 24);
    if (g->aux_type == F32 && i % 4 == 3) f->aux[0][i] = 0x40; /* small finite floats */
  }
  memcpy(f->aux[1], f->aux[0], f->aux_bytes);
  g->aux = addr(f->aux[0]);
}

static void fx_free(fx_t *f) {
  free(f->A);
  free(f->B);
  free(f->C);
  free(f->D[0]);
  free(f->D[1]);
  free(f->bias);
  free(f->aux[0]);
  free(f->aux[1]);
}

/* Checks the pieces' blocks, tile alignment and addresses. */
static void check_pieces(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud,
                         const gemm_plan_piece_t *p, size_t np) {
  size_t total = (size_t)(g->m * g->n * g->batch);
  unsigned char *cover = calloc(total, 1);
  assert_non_null(cover);
  for (size_t q = 0; q < np; q++) {
    const gemm_plan_piece_t *x = &p[q];
    assert_true(x->m >= 1 && x->n >= 1 && x->batch >= 1);
    assert_int_equal(x->row0 % bud->tile, 0);
    assert_int_equal(x->col0 % bud->tile, 0);
    if (x->row0 + x->m < g->m) assert_int_equal(x->m % bud->tile, 0);
    if (x->col0 + x->n < g->n) assert_int_equal(x->n % bud->tile, 0);
    for (int64_t b = x->batch0; b < x->batch0 + x->batch; b++)
      for (int64_t j = x->col0; j < x->col0 + x->n; j++)
        for (int64_t i = x->row0; i < x->row0 + x->m; i++) {
          assert_true(b < g->batch && j < g->n && i < g->m);
          cover[(size_t)((b * g->n + j) * g->m + i)]++;
        }
    /* op(A)(row0, 0), op(B)(0, col0), C and D at (row0, col0), of matrix batch0 */
    int64_t b0 = x->batch0;
    int64_t ea = g->transa == GEMM_PLAN_OP_N ? x->row0 : x->row0 * g->lda;
    int64_t eb = g->transb == GEMM_PLAN_OP_N ? x->col0 * g->ldb : x->col0;
    if (g->k > 0) {
      assert_true(x->a == g->a + 4 * (uint64_t)(ea + b0 * g->stride_a));
      assert_true(x->b == g->b + 4 * (uint64_t)(eb + b0 * g->stride_b));
    }
    assert_true(x->d == g->d + 4 * (uint64_t)(x->row0 + x->col0 * g->ldd + b0 * g->stride_d));
    if (g->c != 0)
      assert_true(x->c == g->c + 4 * (uint64_t)(x->row0 + x->col0 * g->ldc + b0 * g->stride_c));
  }
  for (size_t e = 0; e < total; e++) assert_int_equal(cover[e], 1);
  free(cover);
}

static gemm_plan_gemm_t piece_gemm(const gemm_plan_gemm_t *g, const gemm_plan_piece_t *x) {
  gemm_plan_gemm_t s = *g;
  s.m = x->m;
  s.n = x->n;
  s.batch = x->batch;
  s.a = x->a;
  s.b = x->b;
  s.c = x->c;
  s.d = x->d;
  s.bias = x->bias;
  s.aux = x->aux;
  return s;
}

/* Plans case c under bud, runs whole and pieces, compares; returns the
 * piece count. */
static size_t check_case(const case_t *c, const gemm_plan_budget_t *bud) {
  fx_t f;
  gemm_plan_piece_t pieces[4096];
  size_t np = 99;
  fx_make(&f, c);
  /* the split runs on the second set of outputs */
  gemm_plan_gemm_t gs = f.g;
  gs.d = addr(f.D[1]);
  if (c->c_mode == C_IN_PLACE) gs.c = gs.d;
  if (f.g.aux) gs.aux = addr(f.aux[1]);
  gemm_plan_reason_t r = gemm_plan_split(&gs, bud, pieces, 4096, &np);
  if (r != GEMM_PLAN_OK)
    fail_msg("m=%lld n=%lld k=%lld: %s", (long long)c->m, (long long)c->n, (long long)c->k,
             gemm_plan_reason_name(r));
  check_pieces(&gs, bud, pieces, np);
  run_gemm(&f.g, 2.0f, 3.0f);
  for (size_t q = 0; q < np; q++) {
    gemm_plan_gemm_t s = piece_gemm(&gs, &pieces[q]);
    run_gemm(&s, 2.0f, 3.0f);
  }
  assert_memory_equal(f.D[0], f.D[1], f.nd * sizeof(float));
  assert_memory_equal(f.aux[0], f.aux[1], f.aux_bytes);
  fx_free(&f);
  return np;
}

static const int64_t shapes[][3] = {
    {1, 1, 1}, {5, 3, 2}, {37, 29, 7}, {70, 45, 9}, {120, 9, 5}, {9, 120, 5}, {48, 48, 1}, {33, 40, 0},
};

static void every_layout_and_shape_partitions_exactly(void **state) {
  (void)state;
  static const int64_t budgets[] = {1, 2, 3, 5, 8, 1000};
  size_t split_runs = 0;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (int cm = 0; cm < 3; cm++)
          for (size_t bi = 0; bi < sizeof(budgets) / sizeof(budgets[0]); bi++) {
            case_t c = {.transa = ta ? GEMM_PLAN_OP_T : GEMM_PLAN_OP_N,
                        .transb = tb ? GEMM_PLAN_OP_T : GEMM_PLAN_OP_N,
                        .m = shapes[s][0], .n = shapes[s][1], .k = shapes[s][2],
                        .batch = 1, .pad = (int64_t)(s % 3) * 2 + (ta ^ tb), .c_mode = cm};
            gemm_plan_budget_t bud = {.tile = 8, .max_tiles = budgets[bi]};
            if (check_case(&c, &bud) > 1) split_runs++;
          }
  assert_true(split_runs > 100); /* the check is not vacuous */
}

static void strided_batches_partition_exactly(void **state) {
  (void)state;
  static const int64_t budgets[] = {1, 4, 6, 12, 30, 100};
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++)
      for (int bc = 0; bc < 2; bc++)
        for (size_t bi = 0; bi < sizeof(budgets) / sizeof(budgets[0]); bi++) {
          case_t c = {.transa = ta ? GEMM_PLAN_OP_T : GEMM_PLAN_OP_N,
                      .transb = tb ? GEMM_PLAN_OP_T : GEMM_PLAN_OP_N,
                      .m = 19, .n = 13, .k = 4, .batch = 5, .pad = 3,
                      .c_mode = C_SEPARATE, .broadcast_a = bc};
          gemm_plan_budget_t bud = {.tile = 4, .max_tiles = budgets[bi]};
          check_case(&c, &bud);
        }
}

/* 19 x 13 with tile 4 is 5 x 4 = 20 tiles a matrix. */
static void batches_group_before_matrices_are_cut(void **state) {
  (void)state;
  case_t c = {.m = 19, .n = 13, .k = 4, .batch = 5, .pad = 1, .c_mode = C_IN_PLACE};
  gemm_plan_budget_t bud = {.tile = 4, .max_tiles = 40}; /* two matrices a piece */
  assert_int_equal(check_case(&c, &bud), 3);
  bud.max_tiles = 100;
  assert_int_equal(check_case(&c, &bud), 1);
  bud.max_tiles = 10; /* half a matrix: 2 pieces each */
  assert_int_equal(check_case(&c, &bud), 10);
}

static void epilogues_split_exactly(void **state) {
  (void)state;
  static const struct {
    int epi, per_col, aux_type;
  } epis[] = {
      {GEMM_PLAN_EPI_RELU, 0, 0},          {GEMM_PLAN_EPI_GELU, 0, 0},
      {GEMM_PLAN_EPI_BIAS, 0, 0},          {GEMM_PLAN_EPI_BIAS, 1, 0},
      {GEMM_PLAN_EPI_RELU_BIAS, 0, 0},     {GEMM_PLAN_EPI_GELU_BIAS, 1, 0},
      {GEMM_PLAN_EPI_RELU_AUX, 0, GEMM_PLAN_BIT},
      {GEMM_PLAN_EPI_RELU_AUX_BIAS, 1, GEMM_PLAN_BIT},
      {GEMM_PLAN_EPI_GELU_AUX, 0, F32},    {GEMM_PLAN_EPI_GELU_AUX_BIAS, 0, F32},
      {GEMM_PLAN_EPI_DRELU, 0, GEMM_PLAN_BIT}, {GEMM_PLAN_EPI_DGELU, 0, F32},
  };
  for (size_t e = 0; e < sizeof(epis) / sizeof(epis[0]); e++)
    for (int64_t batch = 1; batch <= 3; batch += 2)
      for (int t = 0; t < 2; t++) {
        case_t c = {.transa = t ? GEMM_PLAN_OP_T : GEMM_PLAN_OP_N, .transb = GEMM_PLAN_OP_N,
                    .m = 45, .n = 21, .k = 3, .batch = batch, .pad = 2, .c_mode = C_SEPARATE,
                    .epi = epis[e].epi, .bias_per_col = epis[e].per_col,
                    .aux_type = epis[e].aux_type};
        gemm_plan_budget_t bud = {.tile = 8, .max_tiles = 4};
        assert_true(check_case(&c, &bud) > 1);
      }
}

/* Bias and aux addresses of a piece, against the element they must hold. */
static void bias_and_aux_addresses(void **state) {
  (void)state;
  gemm_plan_gemm_t g = {.m = 512, .n = 256, .k = 64, .batch = 2,
                        .atype = GEMM_PLAN_BF16, .btype = GEMM_PLAN_BF16,
                        .ctype = GEMM_PLAN_BF16, .dtype = GEMM_PLAN_BF16,
                        .a = 0x100000000, .b = 0x200000000, .d = 0x300000000, .beta_zero = 1,
                        .lda = 512, .ldb = 64, .ldd = 520, .stride_a = 512 * 64,
                        .stride_b = 64 * 256, .stride_d = 520 * 256,
                        .epi = GEMM_PLAN_EPI_RELU_AUX_BIAS, .bias = 0x400000000,
                        .bias_type = GEMM_PLAN_F32, .bias_stride = 512,
                        .aux = 0x500000000, .aux_type = GEMM_PLAN_BIT, .aux_ld = 640,
                        .aux_stride = 640 * 256};
  gemm_plan_budget_t bud = {.tile = 128, .max_tiles = 2};
  gemm_plan_piece_t p[64];
  size_t n;
  for (int per_col = 0; per_col < 2; per_col++) {
    g.bias_per_col = per_col;
    assert_int_equal(gemm_plan_split(&g, &bud, p, 64, &n), GEMM_PLAN_OK);
    assert_int_equal(n, 2 * 4); /* 8 tiles a matrix, 2 a piece */
    for (size_t q = 0; q < n; q++) {
      uint64_t bi = (uint64_t)((per_col ? p[q].col0 : p[q].row0) + p[q].batch0 * 512);
      assert_true(p[q].bias == g.bias + 4 * bi);
      uint64_t ai = (uint64_t)(p[q].row0 + p[q].col0 * 640 + p[q].batch0 * 640 * 256);
      assert_true(p[q].aux == g.aux + ai / 8);
      assert_true(p[q].d == g.d + 2 * (uint64_t)(p[q].row0 + p[q].col0 * 520 +
                                                 p[q].batch0 * 520 * 256));
    }
  }
}

/* The fewest pieces, the squarest among them, no split when it fits. */
static void split_is_minimal_and_square(void **state) {
  (void)state;
  gemm_plan_gemm_t g = {.m = 4096, .n = 4096, .k = 4096, .batch = 1,
                        .atype = GEMM_PLAN_BF16, .btype = GEMM_PLAN_BF16,
                        .ctype = GEMM_PLAN_BF16, .dtype = GEMM_PLAN_BF16,
                        .a = 0x10000000000, .b = 0x20000000000, .c = 0x30000000000,
                        .d = 0x30000000000, .lda = 4096, .ldb = 4096, .ldc = 4096, .ldd = 4096};
  gemm_plan_budget_t bud = {.tile = 128, .max_tiles = 256};
  static gemm_plan_piece_t p[4096];
  size_t n;
  assert_int_equal(gemm_plan_split(&g, &bud, p, 4096, &n), GEMM_PLAN_OK);
  assert_int_equal(n, 4);
  for (size_t q = 0; q < n; q++) {
    assert_int_equal(p[q].m, 2048);
    assert_int_equal(p[q].n, 2048);
  }
  bud.max_tiles = 1024; /* whole: one piece, the GEMM itself */
  assert_int_equal(gemm_plan_split(&g, &bud, p, 4096, &n), GEMM_PLAN_OK);
  assert_int_equal(n, 1);
  assert_true(p[0].a == g.a && p[0].b == g.b && p[0].c == g.c && p[0].d == g.d);
  assert_int_equal(p[0].m, 4096);
  /* against a brute force over every pair of steps, on uneven shapes */
  for (int64_t m = 128; m <= 3000; m += 347)
    for (int64_t nn = 100; nn <= 2500; nn += 411)
      for (int64_t mt = 1; mt <= 40; mt += 3) {
        g.m = m;
        g.n = nn;
        g.ldc = g.ldd = g.lda = m;
        bud.max_tiles = mt;
        assert_int_equal(gemm_plan_split(&g, &bud, p, 4096, &n), GEMM_PLAN_OK);
        int64_t gm = (m + 127) / 128, gn = (nn + 127) / 128, best = INT64_MAX;
        for (int64_t sm = 1; sm <= gm; sm++)
          for (int64_t sn = 1; sn <= gn; sn++)
            if (sm * sn <= mt) {
              int64_t cnt = ((gm + sm - 1) / sm) * ((gn + sn - 1) / sn);
              if (cnt < best) best = cnt;
            }
        assert_int_equal(n, best);
        for (size_t q = 0; q < n; q++)
          assert_true(((p[q].m + 127) / 128) * ((p[q].n + 127) / 128) <= mt);
      }
}

/* A cost function instead of a tile count: flops of the piece. */
static uint64_t flops(int64_t m, int64_t n, int64_t k, int64_t batch, void *user) {
  (*(int *)user)++;
  return (uint64_t)(2 * m * n * k * batch);
}

static void cost_function_budget(void **state) {
  (void)state;
  int calls = 0;
  case_t c = {.m = 100, .n = 60, .k = 10, .batch = 2, .pad = 1, .c_mode = C_SEPARATE};
  gemm_plan_budget_t bud = {.tile = 16, .cost = flops, .cost_user = &calls,
                            .max_cost = 2 * 32 * 48 * 10};
  fx_t f;
  fx_make(&f, &c);
  gemm_plan_piece_t p[256];
  size_t n;
  assert_int_equal(gemm_plan_split(&f.g, &bud, p, 256, &n), GEMM_PLAN_OK);
  assert_true(calls > 0);
  for (size_t q = 0; q < n; q++)
    assert_true(flops(p[q].m, p[q].n, 10, p[q].batch, &calls) <= bud.max_cost);
  fx_free(&f);
  assert_int_equal(check_case(&c, &bud), n);
  /* not even one tile fits: single tiles, still an exact partition */
  bud.max_cost = 1;
  assert_int_equal(check_case(&c, &bud), 7 * 4 * 2);
}

/* A valid in-place GEMM to damage one field at a time. */
static gemm_plan_gemm_t base(void) {
  gemm_plan_gemm_t g = {.transa = GEMM_PLAN_OP_N, .transb = GEMM_PLAN_OP_T,
                        .m = 256, .n = 256, .k = 64, .batch = 1,
                        .atype = F32, .btype = F32, .ctype = F32, .dtype = F32,
                        .a = 0x1000000, .b = 0x2000000, .c = 0x3000000, .d = 0x3000000,
                        .lda = 256, .ldb = 256, .ldc = 256, .ldd = 256,
                        .bias_type = F32, .bias = 0x4000000, .aux_type = F32,
                        .aux = 0x5000000, .aux_ld = 256};
  return g;
}

static int plan(const gemm_plan_gemm_t *g) {
  gemm_plan_budget_t bud = {.tile = 64, .max_tiles = 4};
  gemm_plan_piece_t p[64];
  size_t n = 77;
  int r = gemm_plan_split(g, &bud, p, 64, &n);
  if (r != GEMM_PLAN_OK) assert_int_equal(n, 0);
  return r;
}

#define REFUSES(reason, field_edit)  \
  do {                               \
    gemm_plan_gemm_t g_ = base();    \
    field_edit;                      \
    assert_int_equal(plan(&g_), GEMM_PLAN_##reason); \
  } while (0)

static void every_refusal_reason(void **state) {
  (void)state;
  REFUSES(OK, (void)0);
  REFUSES(EMPTY, g_.m = 0);
  REFUSES(EMPTY, g_.n = 0);
  REFUSES(EMPTY, g_.batch = 0);
  REFUSES(EPI_UNKNOWN, g_.epi = GEMM_PLAN_EPI_COUNT);
  REFUSES(EPI_UNKNOWN, g_.epi = -1);
  REFUSES(EPI_REDUCES, g_.epi = GEMM_PLAN_EPI_BGRADA);
  REFUSES(EPI_REDUCES, g_.epi = GEMM_PLAN_EPI_BGRADB);
  REFUSES(EPI_REDUCES, g_.epi = GEMM_PLAN_EPI_DRELU_BGRAD);
  REFUSES(EPI_REDUCES, g_.epi = GEMM_PLAN_EPI_DGELU_BGRAD);
  REFUSES(AMAX, g_.amax_d = 0x9000000);
  REFUSES(BLOCK_SCALE, g_.scale_mode = GEMM_PLAN_SCALE_BLOCK);
  REFUSES(OK, g_.scale_mode = GEMM_PLAN_SCALE_TENSOR);
  REFUSES(ALPHA_VECTOR, g_.scalar_mode = GEMM_PLAN_SCALAR_DEVICE_VECTOR);
  /* aliasing */
  REFUSES(ALIAS, g_.d = g_.c = g_.a + 4);                    /* D over A */
  REFUSES(ALIAS, g_.d = g_.c = g_.b + 256 * 64 * 4 - 4);     /* D's first element is B's last */
  REFUSES(OK, g_.d = g_.c = g_.b + 256 * 64 * 4);            /* right after B */
  REFUSES(ALIAS, g_.c = g_.d + 4);                           /* C shifted over D */
  REFUSES(ALIAS, (g_.ldc = 300, g_.c = g_.d));               /* C is D's memory, not its layout */
  REFUSES(OK, (g_.c = g_.d + 4, g_.beta_zero = 1));          /* C not read */
  REFUSES(OK, (g_.c = 0x6000000));                            /* separate C */
  REFUSES(ALIAS, (g_.scalar_mode = GEMM_PLAN_SCALAR_DEVICE, g_.scalar_bytes = 4,
                  g_.alpha = 0x7000000, g_.beta = g_.d + 40));
  REFUSES(OK, (g_.scalar_mode = GEMM_PLAN_SCALAR_DEVICE, g_.scalar_bytes = 4,
               g_.alpha = 0x7000000, g_.beta = 0x7000004));
  REFUSES(ALIAS, (g_.epi = GEMM_PLAN_EPI_GELU_AUX, g_.aux = g_.d + 1024));
  REFUSES(ALIAS, (g_.epi = GEMM_PLAN_EPI_GELU_AUX, g_.aux = g_.a));
  REFUSES(ALIAS, (g_.epi = GEMM_PLAN_EPI_RELU_BIAS, g_.bias = g_.d + 8));
  REFUSES(ALIAS, (g_.batch = 2, g_.stride_a = 256 * 64, g_.stride_b = 256 * 64,
                  g_.stride_c = g_.stride_d = 256 * 255));       /* D batches overlap */
  REFUSES(ALIAS, (g_.epi = GEMM_PLAN_EPI_RELU_AUX, g_.batch = 2, g_.stride_a = 256 * 64,
                  g_.stride_b = 256 * 64, g_.stride_c = g_.stride_d = 256 * 256, g_.d = 0x30000000,
                  g_.c = g_.d, g_.aux_stride = 5));              /* aux batches overlap */
  /* aux pieces must start on a byte: a bit mask cut every 64 rows is, at 4 rows it is not */
  REFUSES(OK, (g_.epi = GEMM_PLAN_EPI_RELU_AUX, g_.aux_type = GEMM_PLAN_BIT));
  {
    gemm_plan_gemm_t g = base();
    g.epi = GEMM_PLAN_EPI_RELU_AUX;
    g.aux_type = GEMM_PLAN_BIT;
    g.m = 12;
    g.aux_ld = 12;
    g.lda = g.ldc = g.ldd = 12;
    gemm_plan_budget_t bud = {.tile = 4, .max_tiles = 1};
    gemm_plan_piece_t p[256];
    size_t n = 5;
    assert_int_equal(gemm_plan_split(&g, &bud, p, 256, &n), GEMM_PLAN_AUX_UNALIGNED);
    assert_int_equal(n, 0);
    /* too many pieces for the caller's room */
    g.epi = GEMM_PLAN_EPI_DEFAULT;
    assert_int_equal(gemm_plan_split(&g, &bud, p, 3 * 64 - 1, &n), GEMM_PLAN_TOO_MANY);
    assert_int_equal(gemm_plan_split(&g, &bud, p, 3 * 64, &n), GEMM_PLAN_OK);
    assert_int_equal(n, 3 * 64);
    assert_int_equal(gemm_plan_split(&g, &bud, p, 0, &n), GEMM_PLAN_TOO_MANY);
    assert_int_equal(gemm_plan_split(&g, &bud, NULL, 10, &n), GEMM_PLAN_TOO_MANY);
  }
  for (int r = 0; r < GEMM_PLAN_REASON_COUNT; r++) {
    assert_non_null(gemm_plan_reason_name(r));
    assert_true(strlen(gemm_plan_reason_text(r)) > 0);
  }
  assert_string_equal(gemm_plan_reason_name(GEMM_PLAN_ALIAS), "ALIAS");
  assert_string_equal(gemm_plan_reason_name(-1), "UNKNOWN");
  assert_string_equal(gemm_plan_reason_name(GEMM_PLAN_REASON_COUNT), "UNKNOWN");
}

static void hostile_descriptions_are_invalid(void **state) {
  (void)state;
  REFUSES(INVALID, g_.transa = 3);
  REFUSES(INVALID, g_.transb = -1);
  REFUSES(INVALID, g_.m = -1);
  REFUSES(INVALID, g_.k = -5);
  REFUSES(INVALID, g_.batch = -2);
  REFUSES(INVALID, g_.m = (int64_t)INT32_MAX + 1);
  REFUSES(INVALID, g_.n = INT64_MAX);
  REFUSES(INVALID, g_.lda = 255);                     /* below m for op N */
  REFUSES(INVALID, g_.ldb = 0);
  REFUSES(INVALID, (g_.transb = GEMM_PLAN_OP_N, g_.ldb = 63)); /* below k */
  REFUSES(OK, (g_.transb = GEMM_PLAN_OP_N, g_.ldb = 64));
  REFUSES(INVALID, g_.ldd = 100);
  REFUSES(INVALID, (g_.c = 0x6000000, g_.ldc = 1));
  REFUSES(INVALID, g_.stride_a = -1);
  REFUSES(INVALID, g_.atype = GEMM_PLAN_BIT);
  REFUSES(INVALID, g_.dtype = 99);
  REFUSES(INVALID, g_.d = g_.c = 0);
  REFUSES(INVALID, g_.a = 0);
  REFUSES(OK, (g_.a = 0, g_.b = 0, g_.k = 0));       /* k = 0: A and B are not read */
  REFUSES(INVALID, (g_.c = 0));                      /* beta may be nonzero */
  REFUSES(INVALID, (g_.epi = GEMM_PLAN_EPI_BIAS, g_.bias = 0));
  REFUSES(INVALID, (g_.epi = GEMM_PLAN_EPI_BIAS, g_.bias_type = GEMM_PLAN_BIT));
  REFUSES(INVALID, (g_.epi = GEMM_PLAN_EPI_BIAS, g_.bias_stride = -1));
  REFUSES(INVALID, (g_.epi = GEMM_PLAN_EPI_DRELU, g_.aux = 0));
  REFUSES(INVALID, (g_.epi = GEMM_PLAN_EPI_DRELU, g_.aux_ld = 10));
  REFUSES(INVALID, (g_.epi = GEMM_PLAN_EPI_DRELU, g_.aux_type = 77));
  REFUSES(INVALID, (g_.scalar_mode = GEMM_PLAN_SCALAR_DEVICE, g_.alpha = 0x7000000,
                    g_.beta = 0x7000004, g_.scalar_bytes = 0));
  REFUSES(INVALID, (g_.scalar_mode = GEMM_PLAN_SCALAR_DEVICE, g_.alpha = 0,
                    g_.beta = 0x7000004, g_.scalar_bytes = 4));
  REFUSES(INVALID, g_.scalar_mode = 9);
  REFUSES(INVALID, g_.scale_mode = -1);
  /* address arithmetic that overflows or wraps */
  REFUSES(INVALID, g_.ldd = g_.ldc = INT64_MAX / 2);
  REFUSES(INVALID, g_.lda = INT64_MAX);
  REFUSES(INVALID, (g_.batch = 3, g_.stride_a = INT64_MAX / 2));
  REFUSES(INVALID, (g_.batch = INT32_MAX, g_.stride_b = INT64_MAX / 4));
  REFUSES(INVALID, g_.a = UINT64_MAX - 100);
  REFUSES(INVALID, g_.d = g_.c = UINT64_MAX - 256 * 256 * 4 + 1);
  REFUSES(OK, g_.d = g_.c = UINT64_MAX - 256 * 256 * 4);
  REFUSES(INVALID, (g_.epi = GEMM_PLAN_EPI_BIAS, g_.batch = 2, g_.stride_a = 1, g_.stride_b = 1,
                    g_.stride_c = g_.stride_d = 65536, g_.bias_stride = INT64_MAX));
  /* bad budgets and arguments */
  gemm_plan_gemm_t g = base();
  gemm_plan_piece_t p[8];
  size_t n;
  gemm_plan_budget_t bad[] = {{.tile = 0, .max_tiles = 1}, {.tile = -128, .max_tiles = 1},
                              {.tile = 65537, .max_tiles = 1}, {.tile = 128, .max_tiles = -1}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(gemm_plan_split(&g, &bad[i], p, 8, &n), GEMM_PLAN_INVALID);
  gemm_plan_budget_t bud = {.tile = 128};
  assert_int_equal(gemm_plan_split(&g, NULL, p, 8, &n), GEMM_PLAN_INVALID);
  assert_int_equal(gemm_plan_split(NULL, &bud, p, 8, &n), GEMM_PLAN_INVALID);
  assert_int_equal(gemm_plan_split(&g, &bud, p, 8, NULL), GEMM_PLAN_INVALID);
  /* no limit at all: the whole */
  assert_int_equal(gemm_plan_split(&g, &bud, p, 8, &n), GEMM_PLAN_OK);
  assert_int_equal(n, 1);
}

/* Largest legal sizes with a budget of one element a piece: the planner
 * answers quickly (too many pieces) instead of searching every step. */
static void huge_sizes_refused_quickly(void **state) {
  (void)state;
  gemm_plan_gemm_t g = base();
  g.m = INT32_MAX;
  g.n = 1;
  g.k = 1;
  g.lda = g.ldc = g.ldd = INT32_MAX;
  g.ldb = 1;
  g.dtype = g.ctype = GEMM_PLAN_F16;
  g.d = g.c = 0x100000000000;
  gemm_plan_budget_t bud = {.tile = 1, .max_tiles = 1};
  gemm_plan_piece_t p[8];
  size_t n;
  assert_int_equal(gemm_plan_split(&g, &bud, p, 8, &n), GEMM_PLAN_TOO_MANY);
  g.n = 2;
  g.transb = GEMM_PLAN_OP_N;
  g.ldb = 1;
  g.batch = INT32_MAX;
  g.m = 1;
  g.lda = g.ldc = g.ldd = 1;
  g.stride_c = g.stride_d = 2;
  assert_int_equal(gemm_plan_split(&g, &bud, p, 8, &n), GEMM_PLAN_TOO_MANY);
  bud.max_tiles = INT64_MAX; /* the whole fits: no overflow in the tile count */
  assert_int_equal(gemm_plan_split(&g, &bud, p, 8, &n), GEMM_PLAN_OK);
  assert_int_equal(n, 1);
}

static void type_sizes(void **state) {
  (void)state;
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_F16), 16);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_BF16), 16);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_F32), 32);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_F64), 64);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_C32F), 64);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_C64F), 128);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_E4M3), 8);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_BIT), 1);
  assert_int_equal(gemm_plan_type_bits(-1), 0);
  assert_int_equal(gemm_plan_type_bits(GEMM_PLAN_TYPE_COUNT), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_layout_and_shape_partitions_exactly),
      cmocka_unit_test(strided_batches_partition_exactly),
      cmocka_unit_test(batches_group_before_matrices_are_cut),
      cmocka_unit_test(epilogues_split_exactly),
      cmocka_unit_test(bias_and_aux_addresses),
      cmocka_unit_test(split_is_minimal_and_square),
      cmocka_unit_test(cost_function_budget),
      cmocka_unit_test(every_refusal_reason),
      cmocka_unit_test(hostile_descriptions_are_invalid),
      cmocka_unit_test(huge_sizes_refused_quickly),
      cmocka_unit_test(type_sizes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
