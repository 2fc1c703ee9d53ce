/* test-blas-split.c: libtally-blas.so over a fake cuBLAS/cuBLASLt/driver
 * (tests/tblas-fake.c, linked after it, so the interposer's RTLD_NEXT
 * reaches the fake).  The fake records every GEMM it is asked for and
 * computes nothing; these tests check what the interposer asks for: the
 * pieces of a split GEMM (operand addresses and leading dimensions for N
 * and T of each operand, strided batches, pointer arrays cut by batch
 * only), and every case that must reach the library untouched.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>

#include <cmocka.h>

#include "blas/tblas.h"
#include "tests/tblas-fake.h"

#define H ((cublasHandle_t)0x4a4a)
#define BASE_A 0x10000000000ull
#define BASE_B 0x20000000000ull
#define BASE_C 0x30000000000ull
#define BASE_X 0x40000000000ull

/* A fresh fake and interposer, with this budget (0: variable unset). */
static void start(long budget_us) {
  char v[32];
  fake_reset();
  unsetenv(TBLAS_ENV_SPLIT);
  unsetenv(TBLAS_ENV_LOG);
  if (budget_us > 0) {
    snprintf(v, sizeof(v), "%ld", budget_us);
    setenv(TBLAS_ENV_BUDGET, v, 1);
  } else {
    unsetenv(TBLAS_ENV_BUDGET);
  }
  tblas_reset();
}

static int sgemm(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc) {
  static const float one = 1, zero = 0;
  return cublasSgemm_v2(H, ta, tb, m, n, k, &one, (const float *)BASE_A, lda,
                        (const float *)BASE_B, ldb, &zero, (float *)BASE_C, ldc);
}

/* Tile coverage of an m x n output (tiles of 128), for partition checks. */
static void check_partition(int m, int n, int ldc, int ta, int tb, int lda, int ldb, size_t esz,
                            int first) {
  int gm = (m + 127) / 128, gn = (n + 127) / 128;
  unsigned char *seen = calloc((size_t)gm * gn, 1);
  int64_t area = 0;
  for (int i = first; i < fake.ncalls; i++) {
    const fake_call_t *c = &fake.calls[i];
    uint64_t off = (c->c - BASE_C) / esz;
    int64_t r0 = (int64_t)(off % (uint64_t)ldc), c0 = (int64_t)(off / (uint64_t)ldc);
    assert_int_equal((c->c - BASE_C) % esz, 0);
    assert_int_equal(c->ldc, ldc);
    assert_int_equal(c->lda, lda);
    assert_int_equal(c->ldb, ldb);
    assert_int_equal(r0 % 128, 0);
    assert_int_equal(c0 % 128, 0);
    assert_true(c->m >= 1 && r0 + c->m <= m);
    assert_true(c->n >= 1 && c0 + c->n <= n);
    /* op(A) row r0 and op(B) column c0 */
    assert_int_equal(c->a, BASE_A + (uint64_t)(ta == CUBLAS_OP_N ? r0 : r0 * lda) * esz);
    assert_int_equal(c->b, BASE_B + (uint64_t)(tb == CUBLAS_OP_N ? c0 * ldb : c0) * esz);
    for (int64_t r = r0 / 128; r < (r0 + c->m + 127) / 128; r++)
      for (int64_t q = c0 / 128; q < (c0 + c->n + 127) / 128; q++) {
        assert_int_equal(seen[r * gn + q], 0);
        seen[r * gn + q] = 1;
      }
    area += c->m * c->n;
  }
  assert_int_equal(area, (int64_t)m * n);
  free(seen);
}

/* Two timed whole runs, then the split: 1024 x 1024 on 4 SMs is 64 tiles,
 * 16 waves of 62.5 us in 1 ms; a 100 us budget fits one wave: 16 pieces
 * of 4 tiles, for every transpose of A and B, with padded leading
 * dimensions. */
static void big_sgemm_becomes_wave_pieces(void **state) {
  (void)state;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      int m = 1024, n = 1024, k = 512;
      int lda = (ta == CUBLAS_OP_N ? m : k) + 3, ldb = (tb == CUBLAS_OP_N ? k : n) + 5,
          ldc = m + 7;
      start(100);
      assert_int_equal(sgemm(ta, tb, m, n, k, lda, ldb, ldc), CUBLAS_STATUS_SUCCESS);
      assert_int_equal(sgemm(ta, tb, m, n, k, lda, ldb, ldc), CUBLAS_STATUS_SUCCESS);
      assert_int_equal(fake.ncalls, 2); /* timed whole */
      assert_int_equal(fake.event_records, 4);
      assert_int_equal(fake.calls[0].m, m);
      assert_int_equal(sgemm(ta, tb, m, n, k, lda, ldb, ldc), CUBLAS_STATUS_SUCCESS);
      assert_int_equal(fake.ncalls, 2 + 16);
      for (int i = 2; i < fake.ncalls; i++) {
        assert_int_equal(fake.calls[i].entry, TBLAS_SGEMM);
        assert_int_equal(fake.calls[i].k, k);
        assert_int_equal(fake.calls[i].m * fake.calls[i].n, 4 * 128 * 128);
      }
      check_partition(m, n, ldc, ta, tb, lda, ldb, 4, 2);
      assert_int_equal(fake.events_live, 0); /* destroyed once measured */
    }
}

/* A shape whose whole run fits the budget passes untouched, forever. */
static void small_gemm_passes_untouched(void **state) {
  (void)state;
  start(100);
  fake.elapsed_ms = 0.05f;
  for (int i = 0; i < 5; i++)
    assert_int_equal(sgemm(CUBLAS_OP_N, CUBLAS_OP_T, 1024, 1024, 64, 1024, 1024, 1024),
                     CUBLAS_STATUS_SUCCESS);
  assert_int_equal(fake.ncalls, 5);
  for (int i = 0; i < 5; i++) {
    assert_int_equal(fake.calls[i].m, 1024);
    assert_int_equal(fake.calls[i].n, 1024);
    assert_int_equal(fake.calls[i].a, BASE_A);
    assert_int_equal(fake.calls[i].c, BASE_C);
  }
  assert_int_equal(fake.event_records, 4); /* only the two samples */
}

/* Until the events say done the shape runs whole, and the caller is never
 * made to wait; a captured stream is never timed. */
static void unmeasured_or_captured_runs_whole(void **state) {
  (void)state;
  start(100);
  fake.events_ready = 0;
  for (int i = 0; i < 4; i++)
    sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1024, 512, 1024);
  assert_int_equal(fake.ncalls, 4);
  assert_int_equal(fake.event_records, 2); /* one timing in flight at a time */
  start(100);
  fake.capturing = 1;
  for (int i = 0; i < 4; i++)
    sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1024, 512, 1024);
  assert_int_equal(fake.ncalls, 4);
  assert_int_equal(fake.event_records, 0);
}

/* TALLY_GEMM_SPLIT=0, no budget anywhere, a budget of 0 from Tally, or a
 * latency-critical tenant: everything passes through, nothing is timed. */
static void pass_through_cases(void **state) {
  (void)state;
  for (int c = 0; c < 5; c++) {
    start(c == 0 ? 100 : 0);
    if (c == 0)
      setenv(TBLAS_ENV_SPLIT, "0", 1);
    if (c >= 2) {
      fake.tally_table = 1;
      fake.tally_budget_us = c == 2 ? 0 : 100;
      fake.tally_priority = c == 3 ? 0 : 1;
    }
    tblas_reset();
    for (int i = 0; i < 4; i++)
      sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1024, 512, 1024);
    if (c == 4) { /* best-effort under Tally with a budget: split */
      assert_int_equal(fake.ncalls, 2 + 16 + 16);
      continue;
    }
    assert_int_equal(fake.ncalls, 4);
    assert_int_equal(fake.events_created, 0);
    for (int i = 0; i < 4; i++)
      assert_int_equal(fake.calls[i].m, 1024);
  }
}

/* Under Tally's budget, while tallyd says no latency-critical tenant is
 * connected, a GEMM over the budget runs whole (and is profiled), and is cut
 * at the first call after one connected.  The variable's budget, or an
 * older guest library's table without the slot, always cuts. */
static void whole_while_no_latency_critical_tenant(void **state) {
  (void)state;
  for (int c = 0; c < 3; c++) {
    start(c == 1 ? 100 : 0);
    fake.tally_table = 1;
    fake.tally_budget_us = 100;
    fake.tally_priority = 1;
    fake.tally_no_lc = 1;
    fake.tally_old = c == 2;
    tblas_reset();
    for (int i = 0; i < 4; i++)
      sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1024, 512, 1024);
    if (c > 0) { /* as pass_through_cases' case 4: timed twice, then cut */
      assert_int_equal(fake.ncalls, 2 + 16 + 16);
      continue;
    }
    assert_int_equal(fake.ncalls, 4);
    for (int i = 0; i < 4; i++)
      assert_int_equal(fake.calls[i].m, 1024);
    assert_true(fake.events_created > 0); /* the profile was taken */
    fake.tally_no_lc = 0;
    sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1024, 512, 1024);
    assert_int_equal(fake.ncalls, 4 + 16);
    fake.tally_no_lc = 1;
    sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1024, 512, 1024);
    assert_int_equal(fake.ncalls, 4 + 16 + 1);
  }
}

/* Strided batches: 8 matrices of one tile on 1 SM (100 us each); a 250 us
 * budget takes 2 matrices per piece. */
static void strided_batches_are_grouped(void **state) {
  static const float one = 1;
  (void)state;
  start(250);
  fake.sms = 1;
  fake.elapsed_ms = 0.8f;
  for (int i = 0; i < 3; i++)
    assert_int_equal(cublasSgemmStridedBatched(H, CUBLAS_OP_T, CUBLAS_OP_N, 128, 128, 64, &one,
                                               (const float *)BASE_A, 64, 10000,
                                               (const float *)BASE_B, 64, 20000, &one,
                                               (float *)BASE_C, 128, 30000, 8),
                     CUBLAS_STATUS_SUCCESS);
  assert_int_equal(fake.ncalls, 2 + 4);
  for (int i = 0; i < 4; i++) {
    const fake_call_t *c = &fake.calls[2 + i];
    assert_int_equal(c->batch, 2);
    assert_int_equal(c->m, 128);
    assert_int_equal(c->n, 128);
    assert_int_equal(c->a, BASE_A + 4ull * 10000 * 2 * i);
    assert_int_equal(c->b, BASE_B + 4ull * 20000 * 2 * i);
    assert_int_equal(c->c, BASE_C + 4ull * 30000 * 2 * i);
    assert_int_equal(c->sa, 10000);
    assert_int_equal(c->sc, 30000);
  }
}

/* Pointer arrays: only the batch is cut, by offsetting the arrays; m and n
 * stay whole even when one matrix is longer than the budget. */
static void pointer_arrays_split_by_batch_only(void **state) {
  static const double one = 1;
  (void)state;
  start(100);
  for (int i = 0; i < 3; i++)
    assert_int_equal(cublasDgemmBatched(H, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 256, &one,
                                        (const double *const *)BASE_A, 1024,
                                        (const double *const *)BASE_B, 256, &one,
                                        (double *const *)BASE_C, 1024, 6),
                     CUBLAS_STATUS_SUCCESS);
  assert_int_equal(fake.ncalls, 2 + 6);
  for (int i = 0; i < 6; i++) {
    const fake_call_t *c = &fake.calls[2 + i];
    assert_int_equal(c->entry, TBLAS_DGEMM_B);
    assert_int_equal(c->m, 1024);
    assert_int_equal(c->n, 1024);
    assert_int_equal(c->batch, 1);
    assert_int_equal(c->a, BASE_A + sizeof(void *) * i);
    assert_int_equal(c->b, BASE_B + sizeof(void *) * i);
    assert_int_equal(c->c, BASE_C + sizeof(void *) * i);
  }
}

/* GemmEx keeps its algo enum and types; an output overlapping an input
 * (the planner's ALIAS) runs whole. */
static void gemm_ex_pieces_and_alias(void **state) {
  static const float one = 1;
  (void)state;
  start(100);
  for (int i = 0; i < 3; i++)
    cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, &one, (const void *)BASE_A,
                 CUDA_R_16BF, 1024, (const void *)BASE_B, CUDA_R_16BF, 512, &one,
                 (void *)BASE_C, CUDA_R_16BF, 1024, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
  assert_int_equal(fake.ncalls, 2 + 16);
  for (int i = 2; i < fake.ncalls; i++)
    assert_int_equal(fake.calls[i].algo, CUBLAS_GEMM_DEFAULT_TENSOR_OP);
  check_partition(1024, 1024, 1024, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 512, 2, 2);
  start(100);
  for (int i = 0; i < 3; i++) /* C is A */
    cublasGemmEx(H, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, &one, (const void *)BASE_C,
                 CUDA_R_16BF, 1024, (const void *)BASE_B, CUDA_R_16BF, 512, &one,
                 (void *)BASE_C, CUDA_R_16BF, 1024, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  assert_int_equal(fake.ncalls, 3);
}

/* ---- cuBLASLt ---- */

typedef struct {
  cublasLtMatmulDesc_t d;
  cublasLtMatrixLayout_t l[4];
} lt_t;

static void lt_new(lt_t *x, int ta, int tb, int m, int n, int k, int batch) {
  int32_t b = batch;
  int64_t stride[4] = {(int64_t)m * k + 64, (int64_t)k * n + 64, 0, 0};
  stride[2] = stride[3] = (int64_t)(m + 8) * n;
  assert_int_equal(cublasLtMatmulDescCreate(&x->d, CUBLAS_COMPUTE_32F, CUDA_R_32F), 0);
  cublasLtMatmulDescSetAttribute(x->d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, 4);
  cublasLtMatmulDescSetAttribute(x->d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, 4);
  cublasLtMatrixLayoutCreate(&x->l[0], CUDA_R_16BF, ta == CUBLAS_OP_N ? m : k,
                             ta == CUBLAS_OP_N ? k : m, (ta == CUBLAS_OP_N ? m : k) + 8);
  cublasLtMatrixLayoutCreate(&x->l[1], CUDA_R_16BF, tb == CUBLAS_OP_N ? k : n,
                             tb == CUBLAS_OP_N ? n : k, (tb == CUBLAS_OP_N ? k : n) + 8);
  cublasLtMatrixLayoutCreate(&x->l[2], CUDA_R_16BF, m, n, m + 8);
  cublasLtMatrixLayoutCreate(&x->l[3], CUDA_R_16BF, m, n, m + 8);
  for (int i = 0; i < 4; i++) {
    cublasLtMatrixLayoutSetAttribute(x->l[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &b, 4);
    cublasLtMatrixLayoutSetAttribute(x->l[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                     &stride[i], 8);
  }
}

static void lt_free(lt_t *x) {
  cublasLtMatmulDescDestroy(x->d);
  for (int i = 0; i < 4; i++)
    cublasLtMatrixLayoutDestroy(x->l[i]);
}

static int lt_run(lt_t *x, const cublasLtMatmulAlgo_t *algo) {
  static const float one = 1, zero = 0;
  return cublasLtMatmul((cublasLtHandle_t)0x1717, x->d, &one, (const void *)BASE_A, x->l[0],
                        (const void *)BASE_B, x->l[1], &zero, (const void *)BASE_C, x->l[2],
                        (void *)BASE_C, x->l[3], algo, (void *)BASE_X, 1 << 20,
                        (cudaStream_t)0x5701);
}

/* Bias epilogue, every transpose: pieces partition D, read A and B where
 * they must, get their own bias pointer; the descriptor gets the caller's
 * back; layouts for the pieces live in the interposer's storage (none
 * created on the heap, so none to destroy). */
static void lt_bias_pieces(void **state) {
  (void)state;
  for (int ta = 0; ta < 2; ta++)
    for (int tb = 0; tb < 2; tb++) {
      lt_t x;
      int32_t epi = CUBLASLT_EPILOGUE_RELU_BIAS;
      void *bias = (void *)BASE_X + 4096, *got = NULL;
      size_t w;
      start(100);
      lt_new(&x, ta, tb, 1024, 1024, 512, 1);
      cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4);
      cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, 8);
      int created = fake.layouts_created;
      for (int i = 0; i < 3; i++)
        assert_int_equal(lt_run(&x, NULL), CUBLAS_STATUS_SUCCESS);
      assert_int_equal(fake.ncalls, 2 + 16);
      assert_int_equal(fake.layouts_created, created);
      int lda = (ta == CUBLAS_OP_N ? 1024 : 512) + 8, ldb = (tb == CUBLAS_OP_N ? 512 : 1024) + 8;
      check_partition(1024, 1024, 1032, ta, tb, lda, ldb, 2, 2);
      for (int i = 2; i < fake.ncalls; i++) {
        const fake_call_t *c = &fake.calls[i];
        uint64_t r0 = ((c->d - BASE_C) / 2) % 1032;
        assert_int_equal(c->bias, (uintptr_t)bias + 2 * r0);
        assert_int_equal(c->d, c->c);
        assert_int_equal(c->algo, -1);
      }
      cublasLtMatmulDescGetAttribute(x.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &got, 8, &w);
      assert_ptr_equal(got, bias);
      lt_free(&x);
      assert_int_equal(fake.layouts_created, fake.layouts_destroyed);
    }
}

/* Strided batches through cuBLASLt: batch groups keep the strides. */
static void lt_batches(void **state) {
  lt_t x;
  (void)state;
  start(250);
  fake.sms = 1;
  fake.elapsed_ms = 0.8f;
  lt_new(&x, CUBLAS_OP_N, CUBLAS_OP_N, 128, 128, 64, 8);
  for (int i = 0; i < 3; i++)
    lt_run(&x, NULL);
  assert_int_equal(fake.ncalls, 2 + 4);
  for (int i = 0; i < 4; i++) {
    const fake_call_t *c = &fake.calls[2 + i];
    assert_int_equal(c->batch, 2);
    assert_int_equal(c->sa, 128 * 64 + 64);
    assert_int_equal(c->a, BASE_A + 2ull * (128 * 64 + 64) * 2 * i);
    assert_int_equal(c->d, BASE_C + 2ull * (136 * 128) * 2 * i);
  }
  lt_free(&x);
}

/* The caller's algo is kept where cublasLtMatmulAlgoCheck accepts it for
 * the piece shape, else the heuristic's, asked once per piece shape. */
static void lt_algo_per_piece_shape(void **state) {
  lt_t x;
  cublasLtMatmulAlgo_t algo;
  (void)state;
  memset(&algo, 0, sizeof(algo));
  algo.data[0] = 0x1234;
  start(100);
  lt_new(&x, CUBLAS_OP_N, CUBLAS_OP_T, 1024, 1024, 512, 1);
  for (int i = 0; i < 3; i++)
    lt_run(&x, &algo);
  assert_int_equal(fake.ncalls, 2 + 16);
  for (int i = 2; i < fake.ncalls; i++)
    assert_int_equal(fake.calls[i].algo, 0x1234);
  start(100);
  fake.algo_check_fails = 1;
  for (int i = 0; i < 4; i++)
    lt_run(&x, &algo);
  assert_int_equal(fake.ncalls, 2 + 16 + 16);
  for (int i = 2; i < fake.ncalls; i++)
    assert_int_equal(fake.calls[i].algo, 0xbeef);
  assert_int_equal(fake.heuristics, 1); /* one piece shape, cached */
  lt_free(&x);
}

/* What must run whole: bias-gradient epilogues, a row-major layout, an
 * attribute the interposer does not know (the fake's number 9), a
 * max-|D| output, a per-row alpha vector. */
static void lt_refusals_run_whole(void **state) {
  (void)state;
  for (int c = 0; c < 6; c++) {
    lt_t x;
    start(100);
    lt_new(&x, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1);
    int32_t v;
    void *p = (void *)BASE_X;
    switch (c) {
    case 0: v = CUBLASLT_EPILOGUE_BGRADB;
      cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &v, 4);
      cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p, 8);
      break;
    case 1: v = CUBLASLT_EPILOGUE_DRELU_BGRAD;
      cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &v, 4);
      break;
    case 2: v = CUBLASLT_ORDER_ROW;
      cublasLtMatrixLayoutSetAttribute(x.l[1], CUBLASLT_MATRIX_LAYOUT_ORDER, &v, 4);
      break;
    case 3: v = 1;
      cublasLtMatmulDescSetAttribute(x.d, (cublasLtMatmulDescAttributes_t)9, &v, 4);
      break;
    case 4:
      cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &p, 8);
      break;
    case 5: v = CUBLASLT_POINTER_MODE_DEVICE_VECTOR;
      cublasLtMatmulDescSetAttribute(x.d, CUBLASLT_MATMUL_DESC_POINTER_MODE, &v, 4);
      break;
    }
    if (c == 3) { /* an unknown layout attribute too */
      lt_t y;
      lt_new(&y, CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 256, 1);
      cublasLtMatrixLayoutSetAttribute(y.l[2], (cublasLtMatrixLayoutAttribute_t)9, &v, 4);
      for (int i = 0; i < 3; i++)
        lt_run(&y, NULL);
      assert_int_equal(fake.ncalls, 3);
      lt_free(&y);
      fake.ncalls = 0;
    }
    for (int i = 0; i < 3; i++)
      assert_int_equal(lt_run(&x, NULL), CUBLAS_STATUS_SUCCESS);
    assert_int_equal(fake.ncalls, 3);
    for (int i = 0; i < 3; i++) {
      assert_int_equal(fake.calls[i].m, 1024);
      assert_int_equal(fake.calls[i].n, 1024);
    }
    lt_free(&x);
  }
}

/* TALLY_GEMM_SPLIT_LOG: one line per decision, the split's piece count. */
static void decisions_are_logged(void **state) {
  char path[] = "/tmp/tblas-log-XXXXXX", line[512];
  int fd = mkstemp(path), lines = 0, split = 0;
  (void)state;
  assert_true(fd >= 0);
  close(fd);
  start(100);
  setenv(TBLAS_ENV_LOG, path, 1);
  tblas_reset();
  for (int i = 0; i < 3; i++)
    sgemm(CUBLAS_OP_N, CUBLAS_OP_N, 1024, 1024, 512, 1024, 512, 1024);
  tblas_reset(); /* closes the log */
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  while (fgets(line, sizeof(line), f)) {
    lines++;
    assert_non_null(strstr(line, "cublasSgemm_v2 m=1024 n=1024 k=512"));
    if (strstr(line, "pieces=16 reason=split"))
      split++;
  }
  fclose(f);
  unlink(path);
  assert_int_equal(lines, 3);
  assert_int_equal(split, 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(big_sgemm_becomes_wave_pieces),
      cmocka_unit_test(small_gemm_passes_untouched),
      cmocka_unit_test(unmeasured_or_captured_runs_whole),
      cmocka_unit_test(pass_through_cases),
      cmocka_unit_test(whole_while_no_latency_critical_tenant),
      cmocka_unit_test(strided_batches_are_grouped),
      cmocka_unit_test(pointer_arrays_split_by_batch_only),
      cmocka_unit_test(gemm_ex_pieces_and_alias),
      cmocka_unit_test(lt_bias_pieces),
      cmocka_unit_test(lt_batches),
      cmocka_unit_test(lt_algo_per_piece_shape),
      cmocka_unit_test(lt_refusals_run_whole),
      cmocka_unit_test(decisions_are_logged),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
