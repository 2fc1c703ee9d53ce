/* lt.c: cublasLtMatmul, interposed.
 *
 * The shape comes from the four layouts (rows, columns, batch count) and
 * the descriptor's transposes; everything else the planner needs is read
 * only when the shape is predicted longer than the budget: pointer mode,
 * scale type, epilogue with its bias and aux (pointers, types, leading
 * dimension, batch strides), scale pointers and modes, max-|D| outputs,
 * layout orders and strided batch offsets.  Anything outside what this file
 * knows runs whole: a non-column order, a planar complex offset, a pointer
 * mode other than host or device, an emulation descriptor, a lower or
 * upper fill mode, a transposed C, or any descriptor or layout attribute
 * whose value differs from a fresh descriptor's while this file does not
 * read it (so an attribute added by a later cuBLASLt is never ignored).
 *
 * Pieces: layouts for the piece shapes are initialised in storage on this
 * function's stack (cublasLtMatrixLayoutInit_internal, no allocation, so
 * nothing to destroy), with the whole's types, leading dimensions and
 * strided batch offsets.  The caller's descriptor is used for every piece;
 * when the epilogue has a bias or aux matrix, its pointers are set to the
 * piece's and put back before returning.  The caller's algo was chosen for
 * the whole shape: for each piece shape it is checked once
 * (cublasLtMatmulAlgoCheck, with the caller's workspace size) and kept when
 * it applies; otherwise the heuristic's first answer for the piece shape
 * is used.  Either is cached per (handle, shape, piece shape, caller's
 * algo) in a bounded table.  A NULL algo stays NULL (cuBLASLt picks one).
 */
#include "blas/tblas.h"

#include <cublasLt.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

typedef cublasStatus_t (*matmul_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *,
                                    const void *, cublasLtMatrixLayout_t, const void *,
                                    cublasLtMatrixLayout_t, const void *, const void *,
                                    cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,
                                    const cublasLtMatmulAlgo_t *, void *, size_t, cudaStream_t);
typedef cublasStatus_t (*desc_get_fn)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t, void *,
                                      size_t, size_t *);
typedef cublasStatus_t (*desc_set_fn)(cublasLtMatmulDesc_t, cublasLtMatmulDescAttributes_t,
                                      const void *, size_t);
typedef cublasStatus_t (*layout_get_fn)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                                        void *, size_t, size_t *);
typedef cublasStatus_t (*layout_set_fn)(cublasLtMatrixLayout_t, cublasLtMatrixLayoutAttribute_t,
                                        const void *, size_t);
typedef cublasStatus_t (*layout_init_fn)(cublasLtMatrixLayout_t, size_t, cudaDataType, uint64_t,
                                         uint64_t, int64_t);
typedef cublasStatus_t (*desc_init_fn)(cublasLtMatmulDesc_t, size_t, cublasComputeType_t,
                                       cudaDataType_t);
typedef cublasStatus_t (*pref_init_fn)(cublasLtMatmulPreference_t, size_t);
typedef cublasStatus_t (*pref_set_fn)(cublasLtMatmulPreference_t,
                                      cublasLtMatmulPreferenceAttributes_t, const void *, size_t);
typedef cublasStatus_t (*check_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                   cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                   cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *,
                                   cublasLtMatmulHeuristicResult_t *);
typedef cublasStatus_t (*heur_fn)(cublasLtHandle_t, cublasLtMatmulDesc_t, cublasLtMatrixLayout_t,
                                  cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,
                                  cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,
                                  cublasLtMatmulHeuristicResult_t[], int *);

static struct {
  int loaded; /* 1 all found, -1 something missing */
  matmul_fn matmul;
  desc_get_fn desc_get;
  desc_set_fn desc_set;
  layout_get_fn layout_get;
  layout_set_fn layout_set;
  layout_init_fn layout_init;
  desc_init_fn desc_init;
  pref_init_fn pref_init;
  pref_set_fn pref_set;
  check_fn check;
  heur_fn heur;
} lt;
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static void lt_load(void) {
  struct {
    void **slot;
    const char *name;
  } want[] = {
      {(void **)&lt.matmul, "cublasLtMatmul"},
      {(void **)&lt.desc_get, "cublasLtMatmulDescGetAttribute"},
      {(void **)&lt.desc_set, "cublasLtMatmulDescSetAttribute"},
      {(void **)&lt.layout_get, "cublasLtMatrixLayoutGetAttribute"},
      {(void **)&lt.layout_set, "cublasLtMatrixLayoutSetAttribute"},
      {(void **)&lt.layout_init, "cublasLtMatrixLayoutInit_internal"},
      {(void **)&lt.desc_init, "cublasLtMatmulDescInit_internal"},
      {(void **)&lt.pref_init, "cublasLtMatmulPreferenceInit_internal"},
      {(void **)&lt.pref_set, "cublasLtMatmulPreferenceSetAttribute"},
      {(void **)&lt.check, "cublasLtMatmulAlgoCheck"},
      {(void **)&lt.heur, "cublasLtMatmulAlgoGetHeuristic"},
  };
  lt.loaded = 1;
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    if ((*want[i].slot = tblas_real(want[i].name, 1)) == NULL)
      lt.loaded = -1;
}

/* ---- reading attributes ---- */

/* One attribute of exactly `size` bytes; false if it cannot be read. */
static bool dget(cublasLtMatmulDesc_t d, int attr, void *v, size_t size) {
  size_t w = 0;
  return lt.desc_get(d, (cublasLtMatmulDescAttributes_t)attr, v, size, &w) ==
             CUBLAS_STATUS_SUCCESS &&
         w == size;
}

static bool lget(cublasLtMatrixLayout_t l, int attr, void *v, size_t size) {
  size_t w = 0;
  return lt.layout_get(l, (cublasLtMatrixLayoutAttribute_t)attr, v, size, &w) ==
             CUBLAS_STATUS_SUCCESS &&
         w == size;
}

typedef struct {
  int32_t type, order, batch_mode;
  uint64_t rows, cols;
  int64_t ld, stride, plane;
  int32_t batch;
} layout_t;

static bool read_layout(cublasLtMatrixLayout_t l, layout_t *o) {
  uint32_t type = 0;
  memset(o, 0, sizeof(*o));
  if (!l || !lget(l, CUBLASLT_MATRIX_LAYOUT_TYPE, &type, 4) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_ORDER, &o->order, 4) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_ROWS, &o->rows, 8) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_COLS, &o->cols, 8) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_LD, &o->ld, 8) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &o->batch, 4) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &o->stride, 8) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET, &o->plane, 8) ||
      !lget(l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &o->batch_mode, 4))
    return false;
  o->type = (int32_t)type;
  return true;
}

/* Attribute numbers this file reads (the rest must hold their defaults). */
static const int desc_known[] = {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, CUBLASLT_MATMUL_DESC_SCALE_TYPE,
    CUBLASLT_MATMUL_DESC_POINTER_MODE, CUBLASLT_MATMUL_DESC_TRANSA,
    CUBLASLT_MATMUL_DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSC,
    CUBLASLT_MATMUL_DESC_FILL_MODE, CUBLASLT_MATMUL_DESC_EPILOGUE,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE,
    CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, CUBLASLT_MATMUL_DESC_C_SCALE_POINTER,
    CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, CUBLASLT_MATMUL_DESC_FAST_ACCUM,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
    CUBLASLT_MATMUL_DESC_B_SCALE_MODE, CUBLASLT_MATMUL_DESC_C_SCALE_MODE,
    CUBLASLT_MATMUL_DESC_D_SCALE_MODE, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE,
    CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE,
    CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR,
};
#define ATTR_SCAN 64 /* attribute numbers compared with a fresh object's */

static bool in(const int *set, size_t n, int v) {
  for (size_t i = 0; i < n; i++)
    if (set[i] == v)
      return true;
  return false;
}

/* The two attribute readers under one type, so that one comparison serves
 * descriptors and layouts (both handles point to opaque objects). */
typedef cublasStatus_t (*attr_get_fn)(void *o, int a, void *v, size_t size, size_t *w);
static cublasStatus_t desc_attr(void *o, int a, void *v, size_t size, size_t *w) {
  return lt.desc_get((cublasLtMatmulDesc_t)o, (cublasLtMatmulDescAttributes_t)a, v, size, w);
}
static cublasStatus_t layout_attr(void *o, int a, void *v, size_t size, size_t *w) {
  return lt.layout_get((cublasLtMatrixLayout_t)o, (cublasLtMatrixLayoutAttribute_t)a, v, size, w);
}

/* An attribute is "set" when reading it answers otherwise than it does on
 * a fresh object (status, size or bytes). */
static bool same_attr(attr_get_fn get, void *x, void *y, int a) {
  unsigned char bx[64], by[64];
  size_t wx = 0, wy = 0;
  cublasStatus_t rx, ry;
  memset(bx, 0, sizeof(bx));
  memset(by, 0, sizeof(by));
  rx = get(x, a, bx, sizeof(bx), &wx);
  ry = get(y, a, by, sizeof(by), &wy);
  return rx == ry && wx == wy && memcmp(bx, by, sizeof(bx)) == 0;
}

/* No attribute outside what this file reads is set on the descriptor or
 * on any layout. */
static bool nothing_unknown(cublasLtMatmulDesc_t d, int32_t compute, int32_t scale,
                            cublasLtMatrixLayout_t const l[4], const layout_t lo[4]) {
  static const int layout_known[] = {
      CUBLASLT_MATRIX_LAYOUT_TYPE,  CUBLASLT_MATRIX_LAYOUT_ORDER,
      CUBLASLT_MATRIX_LAYOUT_ROWS,  CUBLASLT_MATRIX_LAYOUT_COLS,
      CUBLASLT_MATRIX_LAYOUT_LD,    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
      CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET,
      CUBLASLT_MATRIX_LAYOUT_BATCH_MODE,
  };
  cublasLtMatmulDescOpaque_t fresh_d;
  cublasLtMatrixLayoutOpaque_t fresh_l;
  if (lt.desc_init(&fresh_d, sizeof(fresh_d), (cublasComputeType_t)compute,
                   (cudaDataType_t)scale) != CUBLAS_STATUS_SUCCESS)
    return false;
  for (int a = 0; a < ATTR_SCAN; a++)
    if (!in(desc_known, sizeof(desc_known) / sizeof(desc_known[0]), a) &&
        !same_attr(desc_attr, d, &fresh_d, a))
      return false;
  for (int i = 0; i < 4; i++) {
    if (lt.layout_init(&fresh_l, sizeof(fresh_l), (cudaDataType)lo[i].type, lo[i].rows,
                       lo[i].cols, lo[i].ld) != CUBLAS_STATUS_SUCCESS)
      return false;
    for (int a = 0; a < ATTR_SCAN; a++)
      if (!in(layout_known, sizeof(layout_known) / sizeof(layout_known[0]), a) &&
          !same_attr(layout_attr, l[i], &fresh_l, a))
        return false;
  }
  return true;
}

/* cuBLASLt epilogue -> planner epilogue, -1 if unknown. */
static int plan_epi(int32_t e) {
  static const struct {
    int32_t lt;
    int plan;
  } map[] = {
      {CUBLASLT_EPILOGUE_DEFAULT, GEMM_PLAN_EPI_DEFAULT},
      {CUBLASLT_EPILOGUE_RELU, GEMM_PLAN_EPI_RELU},
      {CUBLASLT_EPILOGUE_GELU, GEMM_PLAN_EPI_GELU},
      {CUBLASLT_EPILOGUE_BIAS, GEMM_PLAN_EPI_BIAS},
      {CUBLASLT_EPILOGUE_RELU_BIAS, GEMM_PLAN_EPI_RELU_BIAS},
      {CUBLASLT_EPILOGUE_GELU_BIAS, GEMM_PLAN_EPI_GELU_BIAS},
      {CUBLASLT_EPILOGUE_RELU_AUX, GEMM_PLAN_EPI_RELU_AUX},
      {CUBLASLT_EPILOGUE_GELU_AUX, GEMM_PLAN_EPI_GELU_AUX},
      {CUBLASLT_EPILOGUE_RELU_AUX_BIAS, GEMM_PLAN_EPI_RELU_AUX_BIAS},
      {CUBLASLT_EPILOGUE_GELU_AUX_BIAS, GEMM_PLAN_EPI_GELU_AUX_BIAS},
      {CUBLASLT_EPILOGUE_DRELU, GEMM_PLAN_EPI_DRELU},
      {CUBLASLT_EPILOGUE_DGELU, GEMM_PLAN_EPI_DGELU},
      {CUBLASLT_EPILOGUE_DRELU_BGRAD, GEMM_PLAN_EPI_DRELU_BGRAD},
      {CUBLASLT_EPILOGUE_DGELU_BGRAD, GEMM_PLAN_EPI_DGELU_BGRAD},
      {CUBLASLT_EPILOGUE_BGRADA, GEMM_PLAN_EPI_BGRADA},
      {CUBLASLT_EPILOGUE_BGRADB, GEMM_PLAN_EPI_BGRADB},
  };
  for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
    if (map[i].lt == e)
      return map[i].plan;
  return -1;
}

static bool relu_mask(int epi) {
  return epi == GEMM_PLAN_EPI_RELU_AUX || epi == GEMM_PLAN_EPI_RELU_AUX_BIAS ||
         epi == GEMM_PLAN_EPI_DRELU || epi == GEMM_PLAN_EPI_DRELU_BGRAD;
}

static int op_of(int32_t t) {
  return t == CUBLAS_OP_N ? GEMM_PLAN_OP_N : t == CUBLAS_OP_T ? GEMM_PLAN_OP_T
       : t == CUBLAS_OP_C ? GEMM_PLAN_OP_C : -1;
}

/* The shape: m, n, k and batch from the layouts and transposes; false if
 * the layouts disagree or cannot be read. */
static bool read_shape(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t const l[4], layout_t lo[4],
                       tblas_key_t *k) {
  int32_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  if (!d || !dget(d, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &k->compute, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_TRANSA, &k->transa, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_TRANSB, &k->transb, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4))
    return false;
  for (int i = 0; i < 4; i++)
    if (!read_layout(l[i], &lo[i]))
      return false;
  k->epi = epi;
  k->atype = lo[0].type;
  k->btype = lo[1].type;
  k->ctype = lo[2].type;
  k->dtype = lo[3].type;
  k->m = (int64_t)lo[3].rows;
  k->n = (int64_t)lo[3].cols;
  k->k = (int64_t)(k->transa == CUBLAS_OP_N ? lo[0].cols : lo[0].rows);
  k->batch = lo[3].batch;
  return true;
}

/* The planner's description (step two, only for a shape worth splitting);
 * false with t->why: run whole. */
static bool describe(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t const l[4],
                     const layout_t lo[4], const void *alpha, const void *A, const void *B,
                     const void *beta, const void *C, void *D, gemm_plan_gemm_t *g,
                     tblas_call_t *t) {
  const tblas_key_t *k = &t->key;
  int32_t scale = 0, pm = 0, transc = 0, fill = 0, bias_type = -1, aux_type = -1;
  int32_t mode[6] = {0};
  void *bias = NULL, *aux = NULL, *amax = NULL, *aux_amax = NULL, *dout = NULL, *emu = NULL;
  void *sp[4] = {NULL};
  int64_t bias_stride = 0, aux_ld = 0, aux_stride = 0;
  static const int mode_attr[6] = {
      CUBLASLT_MATMUL_DESC_A_SCALE_MODE, CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
      CUBLASLT_MATMUL_DESC_C_SCALE_MODE, CUBLASLT_MATMUL_DESC_D_SCALE_MODE,
      CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE, CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE};
  static const int sp_attr[4] = {
      CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
      CUBLASLT_MATMUL_DESC_C_SCALE_POINTER, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER};
  t->why = "a descriptor attribute cannot be read";
  if (!dget(d, CUBLASLT_MATMUL_DESC_SCALE_TYPE, &scale, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_TRANSC, &transc, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_FILL_MODE, &fill, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)) ||
      !dget(d, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &bias_stride, 8) ||
      !dget(d, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)) ||
      !dget(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, 8) ||
      !dget(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE, &aux_stride, 8) ||
      !dget(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, &aux_type, 4) ||
      !dget(d, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &amax, sizeof(amax)) ||
      !dget(d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER, &aux_amax, sizeof(aux_amax)) ||
      !dget(d, CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER, &dout, sizeof(dout)) ||
      !dget(d, CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR, &emu, sizeof(emu)))
    return false;
  for (int i = 0; i < 6; i++)
    if (!dget(d, mode_attr[i], &mode[i], 4))
      return false;
  for (int i = 0; i < 4; i++)
    if (!dget(d, sp_attr[i], &sp[i], sizeof(sp[i])))
      return false;
  t->why = "layout or descriptor outside what is split (order, planes, batch mode, fill, "
           "transposed C, emulation, pointer mode)";
  for (int i = 0; i < 4; i++)
    if (lo[i].order != CUBLASLT_ORDER_COL || lo[i].plane != 0 || lo[i].batch_mode != 0 ||
        lo[i].batch != lo[3].batch)
      return false;
  if (transc != CUBLAS_OP_N || fill != CUBLAS_FILL_MODE_FULL || emu != NULL ||
      (pm != CUBLASLT_POINTER_MODE_HOST && pm != CUBLASLT_POINTER_MODE_DEVICE &&
       pm != CUBLASLT_POINTER_MODE_DEVICE_VECTOR &&
       pm != CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO &&
       pm != CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST))
    return false;
  /* The layouts must describe op(A) m x k, op(B) k x n, C and D m x n. */
  t->why = "layouts do not agree on the shape";
  if ((int64_t)(k->transa == CUBLAS_OP_N ? lo[0].rows : lo[0].cols) != k->m ||
      (int64_t)(k->transb == CUBLAS_OP_N ? lo[1].rows : lo[1].cols) != k->k ||
      (int64_t)(k->transb == CUBLAS_OP_N ? lo[1].cols : lo[1].rows) != k->n ||
      (int64_t)lo[2].rows != k->m || (int64_t)lo[2].cols != k->n)
    return false;
  t->why = "unknown type, epilogue or scalar";
  memset(g, 0, sizeof(*g));
  g->transa = op_of(k->transa);
  g->transb = op_of(k->transb);
  g->m = k->m;
  g->n = k->n;
  g->k = k->k;
  g->batch = k->batch;
  g->atype = tblas_plan_type(lo[0].type);
  g->btype = tblas_plan_type(lo[1].type);
  g->ctype = tblas_plan_type(lo[2].type);
  g->dtype = tblas_plan_type(lo[3].type);
  g->epi = plan_epi(k->epi);
  unsigned sbits = gemm_plan_type_bits(tblas_plan_type(scale));
  if (g->transa < 0 || g->transb < 0 || g->atype < 0 || g->btype < 0 || g->ctype < 0 ||
      g->dtype < 0 || g->epi < 0 || sbits == 0)
    return false;
  g->a = (uint64_t)(uintptr_t)A;
  g->b = (uint64_t)(uintptr_t)B;
  g->c = (uint64_t)(uintptr_t)C;
  g->d = (uint64_t)(uintptr_t)D;
  g->lda = lo[0].ld;
  g->ldb = lo[1].ld;
  g->ldc = lo[2].ld;
  g->ldd = lo[3].ld;
  g->stride_a = lo[0].stride;
  g->stride_b = lo[1].stride;
  g->stride_c = lo[2].stride;
  g->stride_d = lo[3].stride;
  g->scalar_bytes = sbits / 8;
  g->alpha = (uint64_t)(uintptr_t)alpha;
  g->beta = (uint64_t)(uintptr_t)beta;
  if (pm == CUBLASLT_POINTER_MODE_HOST) {
    static const unsigned char zero[16];
    g->scalar_mode = GEMM_PLAN_SCALAR_HOST;
    g->beta_zero = beta != NULL && memcmp(beta, zero, g->scalar_bytes) == 0;
  } else {
    g->scalar_mode = pm == CUBLASLT_POINTER_MODE_DEVICE ? GEMM_PLAN_SCALAR_DEVICE
                                                        : GEMM_PLAN_SCALAR_DEVICE_VECTOR;
    g->beta_zero = pm == CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_ZERO;
  }
  g->bias = (uint64_t)(uintptr_t)bias;
  g->bias_type = tblas_plan_type(bias_type == -1 ? lo[3].type : bias_type);
  g->bias_per_col = 0; /* one value per row of D */
  g->bias_stride = bias_stride;
  g->aux = (uint64_t)(uintptr_t)aux;
  g->aux_type = relu_mask(g->epi) ? GEMM_PLAN_BIT
                                  : tblas_plan_type(aux_type == -1 ? lo[3].type : aux_type);
  g->aux_ld = aux_ld;
  g->aux_stride = aux_stride;
  g->scale_mode = GEMM_PLAN_SCALE_NONE;
  for (int i = 0; i < 4; i++)
    if (sp[i])
      g->scale_mode = GEMM_PLAN_SCALE_TENSOR;
  for (int i = 0; i < 6; i++)
    if (mode[i] != CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
      g->scale_mode = GEMM_PLAN_SCALE_BLOCK;
  if (dout)
    g->scale_mode = GEMM_PLAN_SCALE_BLOCK;
  g->amax_d = (uint64_t)(uintptr_t)(amax ? amax : aux_amax);
  if (g->bias_type < 0 && g->epi >= 0 && g->bias)
    return false;
  t->why = "a descriptor or layout attribute this interposer does not know is set";
  if (!nothing_unknown(d, k->compute, scale, l, lo))
    return false;
  return true;
}

/* ---- algos for piece shapes ---- */

typedef struct {
  bool used;
  cublasLtHandle_t h;
  tblas_key_t key;
  int64_t m, n, batch;
  cublasLtMatmulAlgo_t given, use;
  size_t workspace;
} algo_entry_t;
#define ALGO_SLOTS 256
static algo_entry_t algos[ALGO_SLOTS];
static pthread_mutex_t algo_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned algo_hash(const algo_entry_t *e) {
  const unsigned char *p = (const unsigned char *)&e->key;
  uint64_t h = 1469598103934665603ull ^ (uint64_t)(uintptr_t)e->h;
  for (size_t i = 0; i < sizeof(e->key); i++)
    h = (h ^ p[i]) * 1099511628211ull;
  h ^= (uint64_t)e->m * 31 + (uint64_t)e->n * 17 + (uint64_t)e->batch;
  h *= 1099511628211ull;
  return (unsigned)(h >> 32) & (ALGO_SLOTS - 1);
}

static bool algo_same(const algo_entry_t *a, const algo_entry_t *b) {
  return a->used && a->h == b->h && memcmp(&a->key, &b->key, sizeof(a->key)) == 0 &&
         a->m == b->m && a->n == b->n && a->batch == b->batch && a->workspace == b->workspace &&
         memcmp(&a->given, &b->given, sizeof(a->given)) == 0;
}

void tblas_lt_forget(void) {
  pthread_mutex_lock(&algo_lock);
  memset(algos, 0, sizeof(algos));
  pthread_mutex_unlock(&algo_lock);
}

/* The algo for a piece (its layouts in pl); false: none applies. */
static bool piece_algo(cublasLtHandle_t h, const tblas_key_t *key, const gemm_plan_piece_t *p,
                       cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t pl[4],
                       const cublasLtMatmulAlgo_t *given, size_t workspace,
                       cublasLtMatmulAlgo_t *use) {
  algo_entry_t want;
  cublasLtMatmulHeuristicResult_t res;
  cublasLtMatmulPreferenceOpaque_t pref;
  int got = 0;
  memset(&want, 0, sizeof(want));
  want.used = true;
  want.h = h;
  want.key = *key;
  want.m = p->m;
  want.n = p->n;
  want.batch = p->batch;
  want.given = *given;
  want.workspace = workspace;
  unsigned s = algo_hash(&want);
  pthread_mutex_lock(&algo_lock);
  if (algo_same(&algos[s], &want)) {
    *use = algos[s].use;
    pthread_mutex_unlock(&algo_lock);
    return true;
  }
  pthread_mutex_unlock(&algo_lock);
  memset(&res, 0, sizeof(res));
  if (lt.check(h, d, pl[0], pl[1], pl[2], pl[3], given, &res) == CUBLAS_STATUS_SUCCESS &&
      res.workspaceSize <= workspace) {
    want.use = *given;
  } else {
    memset(&res, 0, sizeof(res));
    uint64_t ws = workspace;
    if (lt.pref_init(&pref, sizeof(pref)) != CUBLAS_STATUS_SUCCESS ||
        lt.pref_set(&pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)) !=
            CUBLAS_STATUS_SUCCESS ||
        lt.heur(h, d, pl[0], pl[1], pl[2], pl[3], &pref, 1, &res, &got) != CUBLAS_STATUS_SUCCESS ||
        got < 1 || res.state != CUBLAS_STATUS_SUCCESS)
      return false;
    want.use = res.algo;
  }
  *use = want.use;
  pthread_mutex_lock(&algo_lock);
  algos[s] = want;
  pthread_mutex_unlock(&algo_lock);
  return true;
}

/* ---- the entry point ---- */

/* Initialises piece layout `o` like the whole's `w` with rows x cols x batch. */
static bool piece_layout(cublasLtMatrixLayoutOpaque_t *o, const layout_t *w, uint64_t rows,
                         uint64_t cols, int32_t batch) {
  return lt.layout_init(o, sizeof(*o), (cudaDataType)w->type, rows, cols, w->ld) ==
             CUBLAS_STATUS_SUCCESS &&
         lt.layout_set(o, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, 4) ==
             CUBLAS_STATUS_SUCCESS &&
         lt.layout_set(o, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &w->stride, 8) ==
             CUBLAS_STATUS_SUCCESS;
}

static cublasStatus_t real_matmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                                  const void *A, cublasLtMatrixLayout_t Ad, const void *B,
                                  cublasLtMatrixLayout_t Bd, const void *beta, const void *C,
                                  cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
                                  const cublasLtMatmulAlgo_t *algo, void *ws, size_t wss,
                                  cudaStream_t s) {
  cublasStatus_t r;
  tblas_depth++;
  r = lt.matmul(h, d, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wss, s);
  tblas_depth--;
  return r;
}

typedef struct {
  cublasLtMatmulDesc_t d;
  const layout_t *lo;
  const gemm_plan_gemm_t *g;
  cublasLtMatrixLayoutOpaque_t pl[4];
  cublasLtMatrixLayout_t pp[4];
} pieces_t;

/* Piece p's layouts in x->pl, and its bias and aux pointers in the
 * descriptor; false if cuBLASLt refused one. */
static bool prep(pieces_t *x, const gemm_plan_piece_t *p) {
  const gemm_plan_gemm_t *g = x->g;
  bool an = g->transa == GEMM_PLAN_OP_N, bn = g->transb == GEMM_PLAN_OP_N;
  void *pb = (void *)(uintptr_t)p->bias, *pa = (void *)(uintptr_t)p->aux;
  int32_t b = (int32_t)p->batch;
  for (int i = 0; i < 4; i++)
    x->pp[i] = &x->pl[i];
  return piece_layout(&x->pl[0], &x->lo[0], an ? p->m : g->k, an ? g->k : p->m, b) &&
         piece_layout(&x->pl[1], &x->lo[1], bn ? g->k : p->n, bn ? p->n : g->k, b) &&
         piece_layout(&x->pl[2], &x->lo[2], p->m, p->n, b) &&
         piece_layout(&x->pl[3], &x->lo[3], p->m, p->n, b) &&
         (!g->bias || lt.desc_set(x->d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &pb, sizeof(pb)) ==
                          CUBLAS_STATUS_SUCCESS) &&
         (!g->aux || lt.desc_set(x->d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &pa,
                                 sizeof(pa)) == CUBLAS_STATUS_SUCCESS);
}

static void restore(const pieces_t *x) {
  void *bias0 = (void *)(uintptr_t)x->g->bias, *aux0 = (void *)(uintptr_t)x->g->aux;
  if (x->g->bias)
    (void)lt.desc_set(x->d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias0, sizeof(bias0));
  if (x->g->aux)
    (void)lt.desc_set(x->d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux0, sizeof(aux0));
}

/* Runs the pieces: first every piece's layouts and algo (so that a piece
 * no algo fits leaves the whole to run, before anything was written), then
 * the pieces in order.  The descriptor's bias and aux pointers are the
 * pieces' while they run and the caller's again after.  Returns false
 * (nothing ran) when the GEMM must run whole. */
static bool run_pieces(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                       const void *beta, const layout_t lo[4], const gemm_plan_gemm_t *g,
                       tblas_call_t *t, const gemm_plan_piece_t *pc, size_t n,
                       const cublasLtMatmulAlgo_t *algo, void *ws, size_t wss, cudaStream_t s,
                       cublasStatus_t *r) {
  static __thread cublasLtMatmulAlgo_t use[TBLAS_MAX_PIECES];
  pieces_t x = {.d = d, .lo = lo, .g = g};
  size_t i;
  for (i = 0; i < n; i++)
    if (!prep(&x, &pc[i]) || (algo && !piece_algo(h, &t->key, &pc[i], d, x.pp, algo, wss, &use[i])))
      break;
  if (i < n) {
    restore(&x);
    t->why = "no algo for a piece shape";
    return false;
  }
  *r = CUBLAS_STATUS_SUCCESS;
  for (i = 0; i < n && *r == CUBLAS_STATUS_SUCCESS; i++) {
    const gemm_plan_piece_t *p = &pc[i];
    if (!prep(&x, p)) {
      *r = CUBLAS_STATUS_INTERNAL_ERROR;
      break;
    }
    *r = real_matmul(h, d, alpha, (const void *)(uintptr_t)p->a, x.pp[0],
                     (const void *)(uintptr_t)p->b, x.pp[1], beta, (const void *)(uintptr_t)p->c,
                     x.pp[2], (void *)(uintptr_t)p->d, x.pp[3], algo ? &use[i] : NULL, ws, wss, s);
  }
  restore(&x);
  return true;
}

TBLAS_EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                           const void *alpha, const void *A,
                                           cublasLtMatrixLayout_t Ad, const void *B,
                                           cublasLtMatrixLayout_t Bd, const void *beta,
                                           const void *C, cublasLtMatrixLayout_t Cd, void *D,
                                           cublasLtMatrixLayout_t Dd,
                                           const cublasLtMatmulAlgo_t *algo, void *ws, size_t wss,
                                           cudaStream_t s) {
  cublasLtMatrixLayout_t l[4] = {Ad, Bd, Cd, Dd};
  layout_t lo[4];
  tblas_call_t t;
  gemm_plan_gemm_t g;
  const gemm_plan_piece_t *pc;
  size_t n;
  cublasStatus_t r;

  pthread_once(&lt_once, lt_load);
  if (lt.loaded < 0 || !lt.matmul)
    return lt.matmul ? lt.matmul(h, d, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wss, s)
                     : CUBLAS_STATUS_NOT_INITIALIZED;
  if (tblas_depth || !tblas_enabled())
    return real_matmul(h, d, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wss, s);
  memset(&t, 0, sizeof(t));
  t.key.entry = TBLAS_LT_MATMUL;
  if (!read_shape(d, l, lo, &t.key))
    return real_matmul(h, d, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wss, s);
  switch (tblas_decide(&t, (CUstream)s)) {
  case TBLAS_WHOLE:
    tblas_log(&t, 1);
    return real_matmul(h, d, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wss, s);
  case TBLAS_TIME:
    tblas_time_begin(&t, (CUstream)s);
    r = real_matmul(h, d, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wss, s);
    tblas_time_end(&t, (CUstream)s);
    tblas_log(&t, 1);
    return r;
  case TBLAS_SPLIT:
    break;
  }
  if (describe(d, l, lo, alpha, A, B, beta, C, D, &g, &t) && (n = tblas_plan(&t, &g, &pc)) > 0 &&
      run_pieces(h, d, alpha, beta, lo, &g, &t, pc, n, algo, ws, wss, s, &r)) {
    tblas_log(&t, n);
    return r;
  }
  tblas_log(&t, 1);
  return real_matmul(h, d, alpha, A, Ad, B, Bd, beta, C, Cd, D, Dd, algo, ws, wss, s);
}
