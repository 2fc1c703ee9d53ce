/* tblas-fake.c: a fake cuBLAS, cuBLASLt and CUDA driver for
 * tests/test-blas-split.c (see tblas-fake.h).
 *
 * Descriptors and layouts are plain records kept in a table keyed by their
 * address, so the interposer's layouts in caller-provided storage
 * (cublasLtMatrixLayoutInit_internal) work like created ones.  Attribute 9
 * of both is "a future attribute" this fake knows and the interposer does
 * not (4 bytes, default 0).
 */
#include "tests/tblas-fake.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda.h>
#include <stdlib.h>
#include <string.h>

#include "blas/tblas.h"
#include "guestlib/tally-ext.h"

#define EXPORT __attribute__((visibility("default")))

EXPORT fake_state_t fake;

EXPORT void fake_reset(void) {
  memset(&fake, 0, sizeof(fake));
  fake.events_ready = 1;
  fake.elapsed_ms = 1.0f;
  fake.sms = 4;
}

/* ---- attribute records ---- */

#define NATTR 40
typedef struct {
  const void *addr;
  int64_t v[NATTR];
} rec_t;
static rec_t recs[256];

static rec_t *rec_of(const void *addr, int create) {
  int free_slot = -1;
  for (int i = 0; i < 256; i++) {
    if (recs[i].addr == addr)
      return &recs[i];
    if (!recs[i].addr && free_slot < 0)
      free_slot = i;
  }
  if (!create || free_slot < 0)
    return NULL;
  recs[free_slot].addr = addr;
  return &recs[free_slot];
}

static void rec_drop(const void *addr) {
  rec_t *r = rec_of(addr, 0);
  if (r)
    memset(r, 0, sizeof(*r));
}

/* Sizes of the descriptor's attributes (0: none), and of the layout's. */
static size_t desc_size(int a) {
  switch (a) {
  case CUBLASLT_MATMUL_DESC_BIAS_POINTER: case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE:
  case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE: case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER:
  case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER:
  case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER: case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR:
    return 8;
  case CUBLASLT_MATMUL_DESC_FAST_ACCUM:
    return 1;
  case 16: case 27: case 28: case 29: case 30:
    return 0;
  default:
    return a < NATTR && a <= CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR ? 4 : 0;
  }
}

static size_t layout_size(int a) {
  switch (a) {
  case CUBLASLT_MATRIX_LAYOUT_ROWS: case CUBLASLT_MATRIX_LAYOUT_COLS: case CUBLASLT_MATRIX_LAYOUT_LD:
  case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET:
    return 8;
  default:
    return a <= 9 ? 4 : 0;
  }
}

static cublasStatus_t get(const void *o, int a, size_t sz, void *buf, size_t n, size_t *w) {
  rec_t *r = rec_of(o, 0);
  if (!r || sz == 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (w)
    *w = sz;
  if (n < sz)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (sz == 8) { int64_t v = r->v[a]; memcpy(buf, &v, 8); }
  else if (sz == 4) { int32_t v = (int32_t)r->v[a]; memcpy(buf, &v, 4); }
  else { int8_t v = (int8_t)r->v[a]; memcpy(buf, &v, 1); }
  return CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t set(const void *o, int a, size_t sz, const void *buf, size_t n) {
  rec_t *r = rec_of(o, 0);
  if (!r || sz == 0 || n != sz)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (sz == 8) { int64_t v; memcpy(&v, buf, 8); r->v[a] = v; }
  else if (sz == 4) { int32_t v; memcpy(&v, buf, 4); r->v[a] = v; }
  else { int8_t v; memcpy(&v, buf, 1); r->v[a] = v; }
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t d,
                                                     cublasLtMatmulDescAttributes_t a, void *buf,
                                                     size_t n, size_t *w) {
  return get(d, a, desc_size(a), buf, n, w);
}
EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                                     cublasLtMatmulDescAttributes_t a,
                                                     const void *buf, size_t n) {
  return set(d, a, desc_size(a), buf, n);
}
EXPORT cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t l,
                                                       cublasLtMatrixLayoutAttribute_t a,
                                                       void *buf, size_t n, size_t *w) {
  return get(l, a, layout_size(a), buf, n, w);
}
EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                       cublasLtMatrixLayoutAttribute_t a,
                                                       const void *buf, size_t n) {
  return set(l, a, layout_size(a), buf, n);
}

EXPORT cublasStatus_t cublasLtMatmulDescInit_internal(cublasLtMatmulDesc_t d, size_t size,
                                                      cublasComputeType_t c, cudaDataType_t s) {
  rec_t *r = rec_of(d, 1);
  (void)size;
  if (!r)
    return CUBLAS_STATUS_ALLOC_FAILED;
  memset(r->v, 0, sizeof(r->v));
  r->v[CUBLASLT_MATMUL_DESC_COMPUTE_TYPE] = c;
  r->v[CUBLASLT_MATMUL_DESC_SCALE_TYPE] = s;
  r->v[CUBLASLT_MATMUL_DESC_FILL_MODE] = CUBLAS_FILL_MODE_FULL;
  r->v[CUBLASLT_MATMUL_DESC_EPILOGUE] = CUBLASLT_EPILOGUE_DEFAULT;
  r->v[CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE] = -1;
  r->v[CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE] = -1;
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t c,
                                               cudaDataType_t s) {
  *d = calloc(1, sizeof(**d));
  return cublasLtMatmulDescInit_internal(*d, sizeof(**d), c, s);
}
EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  rec_drop(d);
  free(d);
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatrixLayoutInit_internal(cublasLtMatrixLayout_t l, size_t size,
                                                        cudaDataType t, uint64_t rows,
                                                        uint64_t cols, int64_t ld) {
  rec_t *r = rec_of(l, 1);
  (void)size;
  if (!r)
    return CUBLAS_STATUS_ALLOC_FAILED;
  memset(r->v, 0, sizeof(r->v));
  r->v[CUBLASLT_MATRIX_LAYOUT_TYPE] = t;
  r->v[CUBLASLT_MATRIX_LAYOUT_ROWS] = (int64_t)rows;
  r->v[CUBLASLT_MATRIX_LAYOUT_COLS] = (int64_t)cols;
  r->v[CUBLASLT_MATRIX_LAYOUT_LD] = ld;
  r->v[CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT] = 1;
  fake.layout_inits++;
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType t,
                                                 uint64_t rows, uint64_t cols, int64_t ld) {
  *l = calloc(1, sizeof(**l));
  fake.layouts_created++;
  return cublasLtMatrixLayoutInit_internal(*l, sizeof(**l), t, rows, cols, ld);
}
EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  rec_drop(l);
  free(l);
  fake.layouts_destroyed++;
  return CUBLAS_STATUS_SUCCESS;
}

EXPORT cublasStatus_t cublasLtMatmulPreferenceInit_internal(cublasLtMatmulPreference_t p,
                                                            size_t size) {
  (void)p, (void)size;
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                           cublasLtMatmulPreferenceAttributes_t a,
                                                           const void *buf, size_t n) {
  (void)p, (void)a, (void)buf, (void)n;
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulAlgoCheck(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd,
                                              const cublasLtMatmulAlgo_t *algo,
                                              cublasLtMatmulHeuristicResult_t *res) {
  (void)h, (void)d, (void)a, (void)b, (void)c, (void)dd, (void)algo;
  fake.checks++;
  memset(res, 0, sizeof(*res));
  return fake.algo_check_fails ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int want,
    cublasLtMatmulHeuristicResult_t res[], int *got) {
  (void)h, (void)d, (void)a, (void)b, (void)c, (void)dd, (void)p;
  fake.heuristics++;
  if (want < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  memset(&res[0], 0, sizeof(res[0]));
  res[0].algo.data[0] = 0xbeef;
  res[0].state = CUBLAS_STATUS_SUCCESS;
  *got = 1;
  return CUBLAS_STATUS_SUCCESS;
}

static fake_call_t *next_call(int entry) {
  fake_call_t *c = fake.ncalls < FAKE_MAX_CALLS ? &fake.calls[fake.ncalls++] : &fake.calls[0];
  memset(c, 0, sizeof(*c));
  c->entry = entry;
  return c;
}

EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                                     const void *A, cublasLtMatrixLayout_t Ad, const void *B,
                                     cublasLtMatrixLayout_t Bd, const void *beta, const void *C,
                                     cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
                                     const cublasLtMatmulAlgo_t *algo, void *ws, size_t wss,
                                     cudaStream_t s) {
  rec_t *rd = rec_of(d, 0), *ra = rec_of(Ad, 0), *rb = rec_of(Bd, 0), *rc = rec_of(Cd, 0),
        *rdd = rec_of(Dd, 0);
  (void)h, (void)ws, (void)wss, (void)s;
  if (!rd || !ra || !rb || !rc || !rdd)
    return CUBLAS_STATUS_INVALID_VALUE;
  fake_call_t *c = next_call(TBLAS_LT_MATMUL);
  c->transa = (int)rd->v[CUBLASLT_MATMUL_DESC_TRANSA];
  c->transb = (int)rd->v[CUBLASLT_MATMUL_DESC_TRANSB];
  c->m = rdd->v[CUBLASLT_MATRIX_LAYOUT_ROWS];
  c->n = rdd->v[CUBLASLT_MATRIX_LAYOUT_COLS];
  c->k = c->transa == CUBLAS_OP_N ? ra->v[CUBLASLT_MATRIX_LAYOUT_COLS]
                                  : ra->v[CUBLASLT_MATRIX_LAYOUT_ROWS];
  c->batch = rdd->v[CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT];
  c->a = (uintptr_t)A, c->b = (uintptr_t)B, c->c = (uintptr_t)C, c->d = (uintptr_t)D;
  c->lda = ra->v[CUBLASLT_MATRIX_LAYOUT_LD], c->ldb = rb->v[CUBLASLT_MATRIX_LAYOUT_LD];
  c->ldc = rc->v[CUBLASLT_MATRIX_LAYOUT_LD], c->ldd = rdd->v[CUBLASLT_MATRIX_LAYOUT_LD];
  c->sa = ra->v[CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET];
  c->sb = rb->v[CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET];
  c->sc = rc->v[CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET];
  c->sd = rdd->v[CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET];
  c->alpha = (uintptr_t)alpha, c->beta = (uintptr_t)beta;
  c->bias = (uintptr_t)rd->v[CUBLASLT_MATMUL_DESC_BIAS_POINTER];
  c->aux = (uintptr_t)rd->v[CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER];
  c->algo = algo ? (int64_t)algo->data[0] : -1;
  return CUBLAS_STATUS_SUCCESS;
}

/* ---- classic cuBLAS ---- */

EXPORT cublasStatus_t cublasGetStream_v2(cublasHandle_t h, cudaStream_t *s) {
  (void)h;
  *s = (cudaStream_t)0x5700;
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGetPointerMode_v2(cublasHandle_t h, cublasPointerMode_t *m) {
  (void)h;
  *m = (cublasPointerMode_t)fake.pointer_mode;
  return CUBLAS_STATUS_SUCCESS;
}

static void classic(int entry, int ta, int tb, int m, int n, int k, const void *alpha,
                    const void *A, int lda, long long sa, const void *B, int ldb, long long sb,
                    const void *beta, void *C, int ldc, long long sc, int batch, int algo) {
  fake_call_t *c = next_call(entry);
  c->transa = ta, c->transb = tb, c->m = m, c->n = n, c->k = k, c->batch = batch;
  c->a = (uintptr_t)A, c->b = (uintptr_t)B, c->c = c->d = (uintptr_t)C;
  c->lda = lda, c->ldb = ldb, c->ldc = c->ldd = ldc;
  c->sa = sa, c->sb = sb, c->sc = c->sd = sc;
  c->alpha = (uintptr_t)alpha, c->beta = (uintptr_t)beta;
  c->algo = algo;
}

#define FAKE_TYPED(S, T, PLAIN, NAME)                                                              \
  EXPORT cublasStatus_t NAME(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,  \
                             int n, int k, const T *al, const T *A, int lda, const T *B, int ldb,  \
                             const T *be, T *C, int ldc) {                                         \
    (void)h;                                                                                       \
    classic(PLAIN, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, C, ldc, 0, 1, 0);                \
    return CUBLAS_STATUS_SUCCESS;                                                                  \
  }                                                                                                \
  EXPORT cublasStatus_t cublas##S##gemmStridedBatched(                                            \
      cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,          \
      const T *al, const T *A, int lda, long long sa, const T *B, int ldb, long long sb,          \
      const T *be, T *C, int ldc, long long sc, int batch) {                                       \
    (void)h;                                                                                       \
    classic(PLAIN + 4, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, batch, 0);     \
    return CUBLAS_STATUS_SUCCESS;                                                                  \
  }                                                                                                \
  EXPORT cublasStatus_t cublas##S##gemmBatched(                                                   \
      cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,          \
      const T *al, const T *const A[], int lda, const T *const B[], int ldb, const T *be,         \
      T *const C[], int ldc, int batch) {                                                          \
    (void)h;                                                                                       \
    classic(PLAIN + 8, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, (void *)C, ldc, 0, batch,    \
            0);                                                                                    \
    return CUBLAS_STATUS_SUCCESS;                                                                  \
  }
FAKE_TYPED(S, float, TBLAS_SGEMM, cublasSgemm_v2)
FAKE_TYPED(D, double, TBLAS_DGEMM, cublasDgemm_v2)
FAKE_TYPED(H, uint16_t, TBLAS_HGEMM, cublasHgemm)

EXPORT cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                   int m, int n, int k, const void *al, const void *A,
                                   cudaDataType at, int lda, const void *B, cudaDataType bt,
                                   int ldb, const void *be, void *C, cudaDataType ct, int ldc,
                                   cublasComputeType_t comp, cublasGemmAlgo_t algo) {
  (void)h, (void)at, (void)bt, (void)ct, (void)comp;
  classic(TBLAS_GEMM_EX, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, C, ldc, 0, 1, algo);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
    const void *al, const void *A, cudaDataType at, int lda, long long sa, const void *B,
    cudaDataType bt, int ldb, long long sb, const void *be, void *C, cudaDataType ct, int ldc,
    long long sc, int batch, cublasComputeType_t comp, cublasGemmAlgo_t algo) {
  (void)h, (void)at, (void)bt, (void)ct, (void)comp;
  classic(TBLAS_GEMM_SB_EX, ta, tb, m, n, k, al, A, lda, sa, B, ldb, sb, be, C, ldc, sc, batch,
          algo);
  return CUBLAS_STATUS_SUCCESS;
}
EXPORT cublasStatus_t cublasGemmBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *al, const void *const A[], cudaDataType at,
                                          int lda, const void *const B[], cudaDataType bt, int ldb,
                                          const void *be, void *const C[], cudaDataType ct,
                                          int ldc, int batch, cublasComputeType_t comp,
                                          cublasGemmAlgo_t algo) {
  (void)h, (void)at, (void)bt, (void)ct, (void)comp;
  classic(TBLAS_GEMM_B_EX, ta, tb, m, n, k, al, A, lda, 0, B, ldb, 0, be, (void *)C, ldc, 0, batch,
          algo);
  return CUBLAS_STATUS_SUCCESS;
}

/* ---- the driver ---- */

static unsigned fake_budget(void) { return fake.tally_budget_us; }
static int fake_priority(void) { return fake.tally_priority; }
static int fake_lc_present(void) { return !fake.tally_no_lc; }
static const void *tally_table[TALLY_EXT_SLOTS] = {
    NULL, (const void *)fake_budget, (const void *)fake_priority, (const void *)fake_lc_present};

EXPORT CUresult cuGetExportTable(const void **t, const CUuuid *id) {
  static const unsigned char tally[16] = TALLY_EXT_UUID;
  if (fake.tally_table && memcmp(id->bytes, tally, 16) == 0) {
    tally_table[0] = (const void *)(uintptr_t)((fake.tally_old ? 3 : TALLY_EXT_SLOTS) * sizeof(void *));
    *t = tally_table;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuEventCreate(CUevent *e, unsigned flags) {
  (void)flags;
  *e = (CUevent)(uintptr_t)(0xe0000 + ++fake.events_created);
  fake.events_live++;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  (void)e, (void)s;
  fake.event_records++;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventQuery(CUevent e) {
  (void)e;
  return fake.events_ready ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}
EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) {
  (void)a, (void)b;
  *ms = fake.elapsed_ms;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  (void)e;
  fake.events_live--;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  (void)s;
  *st = fake.capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
  *d = 0;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetAttribute(int *v, CUdevice_attribute a, CUdevice d) {
  (void)d;
  *v = a == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT ? fake.sms : 0;
  return CUDA_SUCCESS;
}
