/* cublas.c: the classic cuBLAS GEMM entry points, interposed.
 *
 * Every entry point fills one call_t (the arguments, normalised) and goes
 * through classic(): pass through, time, or split.  Plain and strided
 * batched forms are described to the planner (C is D, in place, so beta
 * never needs to be known); a piece is the same call with m, n, the batch
 * count and the operand addresses of the piece, every leading dimension,
 * stride, scalar, compute type and algo unchanged.  Pointer-array forms
 * (cublas*Batched) are cut along the batch only, by offsetting the three
 * pointer arrays: the matrices themselves are never looked at.
 * Each real function is called through a runner of its own signature
 * (the table `runners`).  __half is a C++ type: the H forms take uint16_t
 * pointers here, the same ABI.
 */
#include "blas/tblas.h"

#include <cublas_v2.h>
#include <stdbool.h>
#include <string.h>

typedef enum { FORM_PLAIN, FORM_STRIDED, FORM_ARRAY } form_t;

typedef struct {
  int entry, form;
  cublasHandle_t h;
  cublasOperation_t ta, tb;
  int m, n, k, batch;
  const void *alpha, *beta;
  const void *A, *B;
  void *C; /* for FORM_ARRAY: the pointer arrays */
  int atype, btype, ctype, lda, ldb, ldc;
  long long sa, sb, sc;
  int compute, algo;
} call_t;

/* ---- the real functions ---- */

static void *real_fns[TBLAS_ENTRY_COUNT];

static void *real_fn(int entry) {
  void *f = __atomic_load_n(&real_fns[entry], __ATOMIC_ACQUIRE);
  if (!f && (f = tblas_real(tblas_entry_name(entry), 0)) != NULL)
    __atomic_store_n(&real_fns[entry], f, __ATOMIC_RELEASE);
  return f;
}

static void *real_named(const char *name, void **cache) {
  void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
  if (!f && (f = tblas_real(name, 0)) != NULL)
    __atomic_store_n(cache, f, __ATOMIC_RELEASE);
  return f;
}

/* ---- runners, one per signature family ---- */

#define TYPED_RUNNERS(S, T)                                                                        \
  static cublasStatus_t run_##S##gemm(const call_t *c) {                                           \
    cublasStatus_t (*f)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,       \
                        const T *, const T *, int, const T *, int, const T *, T *, int) =          \
        real_fn(c->entry);                                                                          \
    if (!f)                                                                                         \
      return CUBLAS_STATUS_NOT_INITIALIZED;                                                         \
    return f(c->h, c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->A, c->lda, c->B, c->ldb, c->beta,   \
             c->C, c->ldc);                                                                         \
  }                                                                                                 \
  static cublasStatus_t run_##S##gemm_sb(const call_t *c) {                                        \
    cublasStatus_t (*f)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,       \
                        const T *, const T *, int, long long, const T *, int, long long,           \
                        const T *, T *, int, long long, int) = real_fn(c->entry);                  \
    if (!f)                                                                                         \
      return CUBLAS_STATUS_NOT_INITIALIZED;                                                         \
    return f(c->h, c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->A, c->lda, c->sa, c->B, c->ldb,     \
             c->sb, c->beta, c->C, c->ldc, c->sc, c->batch);                                        \
  }                                                                                                 \
  static cublasStatus_t run_##S##gemm_b(const call_t *c) {                                         \
    cublasStatus_t (*f)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,       \
                        const T *, const T *const *, int, const T *const *, int, const T *,        \
                        T *const *, int, int) = real_fn(c->entry);                                 \
    if (!f)                                                                                         \
      return CUBLAS_STATUS_NOT_INITIALIZED;                                                         \
    return f(c->h, c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->A, c->lda, c->B, c->ldb, c->beta,   \
             c->C, c->ldc, c->batch);                                                               \
  }
TYPED_RUNNERS(s, float)
TYPED_RUNNERS(d, double)
TYPED_RUNNERS(h, uint16_t)

static cublasStatus_t run_gemm_ex(const call_t *c) {
  cublasStatus_t (*f)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                      const void *, const void *, cudaDataType, int, const void *, cudaDataType,
                      int, const void *, void *, cudaDataType, int, cublasComputeType_t,
                      cublasGemmAlgo_t) = real_fn(c->entry);
  if (!f)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  return f(c->h, c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->A, c->atype, c->lda, c->B, c->btype,
           c->ldb, c->beta, c->C, c->ctype, c->ldc, c->compute, c->algo);
}

static cublasStatus_t run_gemm_sb_ex(const call_t *c) {
  cublasStatus_t (*f)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                      const void *, const void *, cudaDataType, int, long long, const void *,
                      cudaDataType, int, long long, const void *, void *, cudaDataType, int,
                      long long, int, cublasComputeType_t, cublasGemmAlgo_t) = real_fn(c->entry);
  if (!f)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  return f(c->h, c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->A, c->atype, c->lda, c->sa, c->B,
           c->btype, c->ldb, c->sb, c->beta, c->C, c->ctype, c->ldc, c->sc, c->batch, c->compute,
           c->algo);
}

static cublasStatus_t run_gemm_b_ex(const call_t *c) {
  cublasStatus_t (*f)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                      const void *, const void *const *, cudaDataType, int, const void *const *,
                      cudaDataType, int, const void *, void *const *, cudaDataType, int, int,
                      cublasComputeType_t, cublasGemmAlgo_t) = real_fn(c->entry);
  if (!f)
    return CUBLAS_STATUS_NOT_INITIALIZED;
  return f(c->h, c->ta, c->tb, c->m, c->n, c->k, c->alpha, c->A, c->atype, c->lda, c->B, c->btype,
           c->ldb, c->beta, c->C, c->ctype, c->ldc, c->batch, c->compute, c->algo);
}

static cublasStatus_t (*const runners[TBLAS_ENTRY_COUNT])(const call_t *) = {
    [TBLAS_GEMM_EX] = run_gemm_ex,     [TBLAS_SGEMM] = run_sgemm,
    [TBLAS_DGEMM] = run_dgemm,         [TBLAS_HGEMM] = run_hgemm,
    [TBLAS_GEMM_SB_EX] = run_gemm_sb_ex, [TBLAS_SGEMM_SB] = run_sgemm_sb,
    [TBLAS_DGEMM_SB] = run_dgemm_sb,   [TBLAS_HGEMM_SB] = run_hgemm_sb,
    [TBLAS_GEMM_B_EX] = run_gemm_b_ex, [TBLAS_SGEMM_B] = run_sgemm_b,
    [TBLAS_DGEMM_B] = run_dgemm_b,     [TBLAS_HGEMM_B] = run_hgemm_b,
};

/* The real call, with nested calls passed through. */
static cublasStatus_t run(const call_t *c) {
  cublasStatus_t r;
  tblas_depth++;
  r = runners[c->entry](c);
  tblas_depth--;
  return r;
}

/* ---- description ---- */

static int is_complex(int t) {
  return t == CUDA_C_16F || t == CUDA_C_32F || t == CUDA_C_64F || t == CUDA_C_16BF ||
         t == CUDA_C_8I || t == CUDA_C_32I;
}

/* Bytes of alpha (and beta) for a compute type and C type; 0 if unknown. */
static unsigned scalar_bytes(int compute, int ctype) {
  unsigned b;
  switch (compute) {
  case CUBLAS_COMPUTE_16F:
  case CUBLAS_COMPUTE_16F_PEDANTIC: b = 2; break;
  case CUBLAS_COMPUTE_32F:
  case CUBLAS_COMPUTE_32F_PEDANTIC:
  case CUBLAS_COMPUTE_32F_FAST_16F:
  case CUBLAS_COMPUTE_32F_FAST_16BF:
  case CUBLAS_COMPUTE_32F_FAST_TF32:
  case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
  case CUBLAS_COMPUTE_32I:
  case CUBLAS_COMPUTE_32I_PEDANTIC: b = 4; break;
  case CUBLAS_COMPUTE_64F:
  case CUBLAS_COMPUTE_64F_PEDANTIC:
  case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT: b = 8; break;
  default: return 0;
  }
  return is_complex(ctype) ? 2 * b : b;
}

/* The planner's description of a plain or strided call; false: run whole. */
static bool describe(const call_t *c, gemm_plan_gemm_t *g, tblas_call_t *t) {
  cublasPointerMode_t pm = CUBLAS_POINTER_MODE_HOST;
  static void *get_pm;
  cublasStatus_t (*gpm)(cublasHandle_t, cublasPointerMode_t *) =
      real_named("cublasGetPointerMode_v2", &get_pm);
  memset(g, 0, sizeof(*g));
  if (!gpm || gpm(c->h, &pm) != CUBLAS_STATUS_SUCCESS ||
      (pm != CUBLAS_POINTER_MODE_HOST && pm != CUBLAS_POINTER_MODE_DEVICE)) {
    t->why = "unknown pointer mode";
    return false;
  }
  g->scalar_bytes = scalar_bytes(c->compute, c->ctype);
  g->atype = tblas_plan_type(c->atype);
  g->btype = tblas_plan_type(c->btype);
  g->ctype = g->dtype = tblas_plan_type(c->ctype);
  if (!g->scalar_bytes || g->atype < 0 || g->btype < 0 || g->ctype < 0) {
    t->why = "unknown compute or data type";
    return false;
  }
  g->transa = c->ta == CUBLAS_OP_N ? GEMM_PLAN_OP_N : c->ta == CUBLAS_OP_T ? GEMM_PLAN_OP_T
            : c->ta == CUBLAS_OP_C ? GEMM_PLAN_OP_C : -1;
  g->transb = c->tb == CUBLAS_OP_N ? GEMM_PLAN_OP_N : c->tb == CUBLAS_OP_T ? GEMM_PLAN_OP_T
            : c->tb == CUBLAS_OP_C ? GEMM_PLAN_OP_C : -1;
  g->m = c->m;
  g->n = c->n;
  g->k = c->k;
  g->batch = c->batch;
  g->a = (uint64_t)(uintptr_t)c->A;
  g->b = (uint64_t)(uintptr_t)c->B;
  g->c = g->d = (uint64_t)(uintptr_t)c->C; /* C is read and written in place */
  g->lda = c->lda;
  g->ldb = c->ldb;
  g->ldc = g->ldd = c->ldc;
  g->stride_a = c->sa;
  g->stride_b = c->sb;
  g->stride_c = g->stride_d = c->sc;
  g->scalar_mode = pm == CUBLAS_POINTER_MODE_DEVICE ? GEMM_PLAN_SCALAR_DEVICE : GEMM_PLAN_SCALAR_HOST;
  g->alpha = (uint64_t)(uintptr_t)c->alpha;
  g->beta = (uint64_t)(uintptr_t)c->beta;
  g->epi = GEMM_PLAN_EPI_DEFAULT;
  g->scale_mode = GEMM_PLAN_SCALE_NONE;
  return true;
}

static cublasStatus_t split_array(const call_t *c, tblas_call_t *t) {
  int64_t group = tblas_batch_group(t, c->m, c->n, c->k, c->batch);
  cublasStatus_t r = CUBLAS_STATUS_SUCCESS;
  if (group == 0) {
    tblas_log(t, 1);
    return run(c);
  }
  tblas_log(t, (size_t)((c->batch + group - 1) / group));
  for (int64_t b0 = 0; b0 < c->batch && r == CUBLAS_STATUS_SUCCESS; b0 += group) {
    call_t p = *c;
    p.A = (const void *const *)c->A + b0;
    p.B = (const void *const *)c->B + b0;
    p.C = (void *)((void *const *)c->C + b0);
    p.batch = (int)(c->batch - b0 < group ? c->batch - b0 : group);
    r = run(&p);
  }
  return r;
}

static cublasStatus_t classic(const call_t *c) {
  static void *get_stream;
  tblas_call_t t;
  cudaStream_t stream = NULL;
  gemm_plan_gemm_t g;
  const gemm_plan_piece_t *pc;
  size_t n;
  cublasStatus_t r = CUBLAS_STATUS_SUCCESS;
  cublasStatus_t (*gs)(cublasHandle_t, cudaStream_t *);

  if (tblas_depth || !tblas_enabled())
    return run(c);
  gs = real_named("cublasGetStream_v2", &get_stream);
  if (!gs || gs(c->h, &stream) != CUBLAS_STATUS_SUCCESS)
    return run(c);
  memset(&t, 0, sizeof(t));
  t.key.entry = c->entry;
  t.key.transa = c->ta;
  t.key.transb = c->tb;
  t.key.atype = c->atype;
  t.key.btype = c->btype;
  t.key.ctype = t.key.dtype = c->ctype;
  t.key.compute = c->compute;
  t.key.m = c->m;
  t.key.n = c->n;
  t.key.k = c->k;
  t.key.batch = c->batch;
  switch (tblas_decide(&t, (CUstream)stream)) {
  case TBLAS_WHOLE:
    tblas_log(&t, 1);
    return run(c);
  case TBLAS_TIME:
    tblas_time_begin(&t, (CUstream)stream);
    r = run(c);
    tblas_time_end(&t, (CUstream)stream);
    tblas_log(&t, 1);
    return r;
  case TBLAS_SPLIT:
    break;
  }
  if (c->form == FORM_ARRAY)
    return split_array(c, &t);
  if (!describe(c, &g, &t) || (n = tblas_plan(&t, &g, &pc)) == 0) {
    tblas_log(&t, 1);
    return run(c);
  }
  tblas_log(&t, n);
  for (size_t i = 0; i < n && r == CUBLAS_STATUS_SUCCESS; i++) {
    call_t p = *c;
    p.m = (int)pc[i].m;
    p.n = (int)pc[i].n;
    p.batch = (int)pc[i].batch;
    p.A = (const void *)(uintptr_t)pc[i].a;
    p.B = (const void *)(uintptr_t)pc[i].b;
    p.C = (void *)(uintptr_t)pc[i].d;
    r = run(&p);
  }
  return r;
}

/* ---- the exported entry points ---- */

#define TYPED_ENTRIES(S, T, CT, COMPUTE, PLAIN, PLAIN_NAME)                                        \
  TBLAS_EXPORT cublasStatus_t PLAIN_NAME(cublasHandle_t h, cublasOperation_t ta,                   \
                                         cublasOperation_t tb, int m, int n, int k,                 \
                                         const T *alpha, const T *A, int lda, const T *B, int ldb,  \
                                         const T *beta, T *C, int ldc) {                            \
    call_t c = {.entry = PLAIN, .form = FORM_PLAIN, .h = h, .ta = ta, .tb = tb, .m = m, .n = n,     \
                .k = k, .batch = 1, .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C,           \
                .atype = CT, .btype = CT, .ctype = CT, .lda = lda, .ldb = ldb, .ldc = ldc,          \
                .compute = COMPUTE};                                                                \
    return classic(&c);                                                                             \
  }                                                                                                 \
  TBLAS_EXPORT cublasStatus_t cublas##S##gemmStridedBatched(                                       \
      cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,           \
      const T *alpha, const T *A, int lda, long long sa, const T *B, int ldb, long long sb,         \
      const T *beta, T *C, int ldc, long long sc, int batch) {                                      \
    call_t c = {.entry = PLAIN + 4, .form = FORM_STRIDED, .h = h, .ta = ta, .tb = tb, .m = m,       \
                .n = n, .k = k, .batch = batch, .alpha = alpha, .beta = beta, .A = A, .B = B,       \
                .C = C, .atype = CT, .btype = CT, .ctype = CT, .lda = lda, .ldb = ldb, .ldc = ldc,  \
                .sa = sa, .sb = sb, .sc = sc, .compute = COMPUTE};                                  \
    return classic(&c);                                                                             \
  }                                                                                                 \
  TBLAS_EXPORT cublasStatus_t cublas##S##gemmBatched(                                              \
      cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,           \
      const T *alpha, const T *const A[], int lda, const T *const B[], int ldb, const T *beta,     \
      T *const C[], int ldc, int batch) {                                                           \
    call_t c = {.entry = PLAIN + 8, .form = FORM_ARRAY, .h = h, .ta = ta, .tb = tb, .m = m,         \
                .n = n, .k = k, .batch = batch, .alpha = alpha, .beta = beta, .A = A, .B = B,       \
                .C = (void *)C, .atype = CT, .btype = CT, .ctype = CT, .lda = lda, .ldb = ldb,      \
                .ldc = ldc, .compute = COMPUTE};                                                    \
    return classic(&c);                                                                             \
  }
/* The entry enum's rows: plain S/D/H, then strided (+4), then arrays (+8). */
_Static_assert(TBLAS_SGEMM_SB == TBLAS_SGEMM + 4 && TBLAS_HGEMM_B == TBLAS_HGEMM + 8 &&
                   TBLAS_GEMM_SB_EX == TBLAS_GEMM_EX + 4 && TBLAS_GEMM_B_EX == TBLAS_GEMM_EX + 8,
               "entry order");
TYPED_ENTRIES(S, float, CUDA_R_32F, CUBLAS_COMPUTE_32F, TBLAS_SGEMM, cublasSgemm_v2)
TYPED_ENTRIES(D, double, CUDA_R_64F, CUBLAS_COMPUTE_64F, TBLAS_DGEMM, cublasDgemm_v2)
TYPED_ENTRIES(H, uint16_t, CUDA_R_16F, CUBLAS_COMPUTE_16F, TBLAS_HGEMM, cublasHgemm)

TBLAS_EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta,
                                         cublasOperation_t tb, int m, int n, int k,
                                         const void *alpha, const void *A, cudaDataType at,
                                         int lda, const void *B, cudaDataType bt, int ldb,
                                         const void *beta, void *C, cudaDataType ct, int ldc,
                                         cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  call_t c = {.entry = TBLAS_GEMM_EX, .form = FORM_PLAIN, .h = h, .ta = ta, .tb = tb, .m = m,
              .n = n, .k = k, .batch = 1, .alpha = alpha, .beta = beta, .A = A, .B = B, .C = C,
              .atype = at, .btype = bt, .ctype = ct, .lda = lda, .ldb = ldb, .ldc = ldc,
              .compute = compute, .algo = algo};
  return classic(&c);
}

TBLAS_EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *alpha, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *beta, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  call_t c = {.entry = TBLAS_GEMM_SB_EX, .form = FORM_STRIDED, .h = h, .ta = ta, .tb = tb,
              .m = m, .n = n, .k = k, .batch = batch, .alpha = alpha, .beta = beta, .A = A,
              .B = B, .C = C, .atype = at, .btype = bt, .ctype = ct, .lda = lda, .ldb = ldb,
              .ldc = ldc, .sa = sa, .sb = sb, .sc = sc, .compute = compute, .algo = algo};
  return classic(&c);
}

TBLAS_EXPORT cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                                cublasOperation_t tb, int m, int n, int k,
                                                const void *alpha, const void *const A[],
                                                cudaDataType at, int lda, const void *const B[],
                                                cudaDataType bt, int ldb, const void *beta,
                                                void *const C[], cudaDataType ct, int ldc,
                                                int batch, cublasComputeType_t compute,
                                                cublasGemmAlgo_t algo) {
  call_t c = {.entry = TBLAS_GEMM_B_EX, .form = FORM_ARRAY, .h = h, .ta = ta, .tb = tb, .m = m,
              .n = n, .k = k, .batch = batch, .alpha = alpha, .beta = beta, .A = A, .B = B,
              .C = (void *)C, .atype = at, .btype = bt, .ctype = ct, .lda = lda, .ldb = ldb,
              .ldc = ldc, .compute = compute, .algo = algo};
  return classic(&c);
}
