/* gemm-split.c: libtally-blas.so's split GEMMs against whole ones, on the GPU.
 *
 *   LD_PRELOAD=BUILDDIR/blas/libtally-blas.so TALLY_GEMM_BUDGET_US=50 \
 *     TALLY_GEMM_SPLIT_LOG=LOG gemm-split-bin LOG          (tests/gpu/gemm-split-run.sh)
 *
 * Runs natively, without tallyd: no Tally table answers, so the budget of
 * TALLY_GEMM_BUDGET_US applies.  For each interposed entry point, random
 * inputs (fixed seed); the reference is the real library's own symbol
 * (dlsym on libcublas/libcublasLt, which the preload does not reach); the
 * checked result is the same call through the interposer, made three
 * times (two timed whole runs, then the split one, with C reset before it
 * as beta is not 0).  The log must say the third call was split.
 *
 * Tolerance, per element: |split - whole| <= 2 k u_acc amax bmax |alpha|
 * + 2 u_out |whole| + tiny, where u_acc is the unit roundoff of the
 * accumulation (2^-24 fp32, 2^-53 fp64, 2^-11 fp16 compute) and u_out of
 * the output type (2^-8 bf16, 2^-11 fp16, else u_acc): a piece may run
 * another kernel (tile shape, split-k) than the whole, so sums may be
 * ordered differently (at most k roundings each), and a 16-bit output may
 * round to the neighbouring value.  Identical bits are reported, not
 * required.  Prints one line per entry point and
 * "gemm-split: N passed, M failed"; exit 0 when all passed, 77 without a GPU.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *log_path;
static int passed, failed;

#define CK(x)                                                                                      \
  do {                                                                                             \
    int e_ = (int)(x);                                                                             \
    if (e_ != 0) {                                                                                 \
      fprintf(stderr, "gemm-split: %s failed: %d (line %d)\n", #x, e_, __LINE__);                   \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(void) { /* uniform in [-1, 1) */
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return (float)((rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

/* fp32 <-> 16-bit encodings on the host. */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
static float from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
/* Truncating fp32 -> fp16 (inputs only need to be some fp16 value). */
static uint16_t to_f16(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  int e = (int)((x >> 23) & 255) - 127 + 15;
  uint32_t m = x & 0x7fffff;
  if (e >= 31)
    return sign | 0x7bff;
  if (e <= 0) {
    if (e < -10)
      return sign;
    return sign | (uint16_t)((m | 0x800000) >> (14 - e));
  }
  return sign | (uint16_t)(e << 10) | (uint16_t)(m >> 13);
}
static float from_f16(uint16_t h) {
  int e = (h >> 10) & 31, m = h & 1023;
  float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
  return (h & 0x8000) ? -v : v;
}

typedef enum { T_F32, T_F64, T_F16, T_BF16 } ty_t;
static size_t tsize(ty_t t) { return t == T_F64 ? 8 : t == T_F32 ? 4 : 2; }

/* A device buffer of n random values of type t (values exact in the type). */
static void *rand_buf(ty_t t, size_t n, void **host_copy) {
  size_t sz = tsize(t) * n;
  unsigned char *h = malloc(sz);
  void *d;
  for (size_t i = 0; i < n; i++) {
    float v = urand();
    switch (t) {
    case T_F32: memcpy(h + 4 * i, &v, 4); break;
    case T_F64: { double x = v; memcpy(h + 8 * i, &x, 8); } break;
    case T_BF16: { uint16_t x = to_bf16(v); memcpy(h + 2 * i, &x, 2); } break;
    case T_F16: { uint16_t x = to_f16(v); memcpy(h + 2 * i, &x, 2); } break;
    }
  }
  CK(cudaMalloc(&d, sz));
  CK(cudaMemcpy(d, h, sz, cudaMemcpyHostToDevice));
  if (host_copy)
    *host_copy = h;
  else
    free(h);
  return d;
}

static double val(ty_t t, const void *p, size_t i) {
  switch (t) {
  case T_F32: { float f; memcpy(&f, (const char *)p + 4 * i, 4); return f; }
  case T_F64: { double f; memcpy(&f, (const char *)p + 8 * i, 8); return f; }
  case T_BF16: { uint16_t h; memcpy(&h, (const char *)p + 2 * i, 2); return from_bf16(h); }
  default: { uint16_t h; memcpy(&h, (const char *)p + 2 * i, 2); return from_f16(h); }
  }
}

/* Pieces the interposer logged for its last decision on `entry`. */
static int last_pieces(const char *entry) {
  FILE *f = fopen(log_path, "r");
  char line[1024];
  int pieces = 0;
  if (!f)
    return 0;
  while (fgets(line, sizeof(line), f)) {
    const char *p = strstr(line, "pieces=");
    if (strncmp(line, entry, strlen(entry)) == 0 && line[strlen(entry)] == ' ' && p)
      pieces = atoi(p + 7);
  }
  fclose(f);
  return pieces;
}

/* Compares n results of type t, element by element, within the tolerance. */
static void report(const char *entry, ty_t t, double u_acc, int k, const void *whole,
                   const void *split, size_t n) {
  double u_out = t == T_BF16 ? 0x1p-8 : t == T_F16 ? 0x1p-11 : u_acc;
  double worst = 0, maxdiff = 0;
  int pieces = last_pieces(entry);
  int identical = memcmp(whole, split, n * tsize(t)) == 0;
  for (size_t i = 0; i < n; i++) {
    double w = val(t, whole, i), s = val(t, split, i);
    double tol = 2.0 * k * u_acc + 2.0 * u_out * fabs(w) + 1e-30;
    double d = fabs(w - s);
    if (!(d <= tol) || isnan(s))
      worst = d > worst ? d : worst;
    maxdiff = d > maxdiff ? d : maxdiff;
  }
  int ok = worst == 0 && pieces > 1;
  printf("%s %-28s pieces=%d identical=%s max|diff|=%.3g%s\n", ok ? "PASS" : "FAIL", entry,
         pieces, identical ? "yes" : "no", maxdiff,
         pieces > 1 ? "" : " (not split: is libtally-blas.so preloaded?)");
  if (ok)
    passed++;
  else
    failed++;
}

/* The real library's own function (the preload does not reach it). */
static void *real(const char *name, int lt) {
  static void *h[2];
  if (!h[lt])
    h[lt] = dlopen(lt ? "libcublasLt.so.13" : "libcublas.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (!h[lt])
    h[lt] = dlopen(lt ? "libcublasLt.so.13" : "libcublas.so.13", RTLD_NOW);
  void *f = h[lt] ? dlsym(h[lt], name) : NULL;
  if (!f) {
    fprintf(stderr, "gemm-split: %s not found in the real library\n", name);
    exit(1);
  }
  return f;
}

typedef struct {
  const char *name;
  ty_t t;
  int m, n, k, batch, ta, tb;
  int form; /* 0 plain, 1 strided, 2 pointer arrays, 3 Ex (bf16), 4 strided Ex, 5 arrays Ex */
} case_t;

static cublasHandle_t H;

/* Runs case c: the real library's function (real_call) or whatever the
 * name resolves to in this process (the interposer, when preloaded). */
static void run_classic(const case_t *c, int real_call, void *A, void *B, void *C, void **pa,
                        void **pb, void **pc) {
  double a64 = 1.0, b64 = 0.5;
  float a32 = 1.0f, b32 = 0.5f;
  uint16_t a16 = 0x3c00, b16 = 0x3800; /* fp16 1.0, 0.5 */
  int lda = c->ta == CUBLAS_OP_N ? c->m : c->k, ldb = c->tb == CUBLAS_OP_N ? c->k : c->n;
  long long sa = (long long)c->m * c->k, sb = (long long)c->k * c->n, sc = (long long)c->m * c->n;
  const void *al = c->t == T_F64 ? (void *)&a64 : c->t == T_F16 && c->form < 3 ? (void *)&a16 : (void *)&a32;
  const void *be = c->t == T_F64 ? (void *)&b64 : c->t == T_F16 && c->form < 3 ? (void *)&b16 : (void *)&b32;
  cudaDataType dt = c->t == T_BF16 ? CUDA_R_16BF : c->t == T_F16 ? CUDA_R_16F : c->t == T_F64 ? CUDA_R_64F : CUDA_R_32F;
  cublasComputeType_t ct = c->t == T_F64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const char *nm = c->name;
  void *f = real_call ? real(nm, 0) : dlsym(RTLD_DEFAULT, nm);
  typedef cublasStatus_t st;
  switch (c->form) {
  case 0:
    CK(((st(*)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int,
               const void *, int, const void *, void *, int))f)(H, c->ta, c->tb, c->m, c->n, c->k,
                                                               al, A, lda, B, ldb, be, C, c->m));
    break;
  case 1:
    CK(((st(*)(cublasHandle_t, int, int, int, int, int, const void *, const void *, int, long long,
               const void *, int, long long, const void *, void *, int, long long,
               int))f)(H, c->ta, c->tb, c->m, c->n, c->k, al, A, lda, sa, B, ldb, sb, be, C, c->m,
                       sc, c->batch));
    break;
  case 2:
    CK(((st(*)(cublasHandle_t, int, int, int, int, int, const void *, void **, int, void **, int,
               const void *, void **, int, int))f)(H, c->ta, c->tb, c->m, c->n, c->k, al, pa, lda,
                                                   pb, ldb, be, pc, c->m, c->batch));
    break;
  case 3:
    CK(((st(*)(cublasHandle_t, int, int, int, int, int, const void *, const void *, cudaDataType,
               int, const void *, cudaDataType, int, const void *, void *, cudaDataType, int,
               cublasComputeType_t, cublasGemmAlgo_t))f)(H, c->ta, c->tb, c->m, c->n, c->k, al, A,
                                                         dt, lda, B, dt, ldb, be, C, dt, c->m, ct,
                                                         CUBLAS_GEMM_DEFAULT));
    break;
  case 4:
    CK(((st(*)(cublasHandle_t, int, int, int, int, int, const void *, const void *, cudaDataType,
               int, long long, const void *, cudaDataType, int, long long, const void *, void *,
               cudaDataType, int, long long, int, cublasComputeType_t,
               cublasGemmAlgo_t))f)(H, c->ta, c->tb, c->m, c->n, c->k, al, A, dt, lda, sa, B, dt,
                                    ldb, sb, be, C, dt, c->m, sc, c->batch, ct,
                                    CUBLAS_GEMM_DEFAULT));
    break;
  case 5:
    CK(((st(*)(cublasHandle_t, int, int, int, int, int, const void *, void **, cudaDataType, int,
               void **, cudaDataType, int, const void *, void **, cudaDataType, int, int,
               cublasComputeType_t, cublasGemmAlgo_t))f)(H, c->ta, c->tb, c->m, c->n, c->k, al,
                                                         pa, dt, lda, pb, dt, ldb, be, pc, dt,
                                                         c->m, c->batch, ct, CUBLAS_GEMM_DEFAULT));
    break;
  }
}

static void one_classic(const case_t *c) {
  size_t na = (size_t)c->m * c->k * c->batch, nb = (size_t)c->k * c->n * c->batch,
         nc = (size_t)c->m * c->n * c->batch, es = tsize(c->t);
  void *c0h;
  void *A = rand_buf(c->t, na, NULL), *B = rand_buf(c->t, nb, NULL), *C = rand_buf(c->t, nc, &c0h);
  void **pa = NULL, **pb = NULL, **pc = NULL;
  if (c->form == 2 || c->form == 5) {
    void *ha[64], *hb[64], *hc[64];
    for (int i = 0; i < c->batch; i++) {
      ha[i] = (char *)A + es * (size_t)c->m * c->k * i;
      hb[i] = (char *)B + es * (size_t)c->k * c->n * i;
      hc[i] = (char *)C + es * (size_t)c->m * c->n * i;
    }
    CK(cudaMalloc((void **)&pa, sizeof(void *) * c->batch));
    CK(cudaMalloc((void **)&pb, sizeof(void *) * c->batch));
    CK(cudaMalloc((void **)&pc, sizeof(void *) * c->batch));
    CK(cudaMemcpy(pa, ha, sizeof(void *) * c->batch, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pb, hb, sizeof(void *) * c->batch, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(pc, hc, sizeof(void *) * c->batch, cudaMemcpyHostToDevice));
  }
  void *whole = malloc(nc * es), *split = malloc(nc * es);
  run_classic(c, 1, A, B, C, pa, pb, pc);
  CK(cudaMemcpy(whole, C, nc * es, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 3; i++) {
    CK(cudaMemcpy(C, c0h, nc * es, cudaMemcpyHostToDevice));
    run_classic(c, 0, A, B, C, pa, pb, pc);
    CK(cudaDeviceSynchronize()); /* lets the interposer read its timing events */
  }
  CK(cudaMemcpy(split, C, nc * es, cudaMemcpyDeviceToHost));
  double u_acc = c->t == T_F64 ? 0x1p-53 : (c->t == T_F16 && c->form < 3) ? 0x1p-11 : 0x1p-24;
  report(c->name, c->t, u_acc, c->k, whole, split, nc);
  free(whole), free(split), free(c0h);
  cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(pa), cudaFree(pb), cudaFree(pc);
}

/* cublasLtMatmul, bf16 in and out, fp32 compute, bias epilogue, the
 * heuristic's algo for the whole passed explicitly. */
static void one_lt(void) {
  int m = 4096, n = 4096, k = 4096;
  cublasLtHandle_t lh;
  cublasLtMatmulDesc_t d;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulPreference_t pref;
  cublasLtMatmulHeuristicResult_t res;
  int got = 0, ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  int32_t epi = CUBLASLT_EPILOGUE_BIAS;
  size_t wss = 32 << 20;
  float al = 1.0f, be = 0.0f;
  void *ws, *c0h;
  void *A = rand_buf(T_BF16, (size_t)m * k, NULL), *B = rand_buf(T_BF16, (size_t)k * n, NULL);
  void *C = rand_buf(T_BF16, (size_t)m * n, &c0h), *bias = rand_buf(T_BF16, (size_t)m, NULL);
  CK(cudaMalloc(&ws, wss));
  CK(cublasLtCreate(&lh));
  CK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, 4));
  CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, 4));
  CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, 4));
  CK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  CK(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
  CK(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
  CK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_16BF, m, n, m));
  CK(cublasLtMatmulPreferenceCreate(&pref));
  CK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wss,
                                          sizeof(wss)));
  CK(cublasLtMatmulAlgoGetHeuristic(lh, d, la, lb, lc, lc, pref, 1, &res, &got));
  if (got < 1) {
    fprintf(stderr, "gemm-split: no cuBLASLt algo\n");
    exit(1);
  }
  cublasStatus_t (*realmm)(cublasLtHandle_t, cublasLtMatmulDesc_t, const void *, const void *,
                           cublasLtMatrixLayout_t, const void *, cublasLtMatrixLayout_t,
                           const void *, const void *, cublasLtMatrixLayout_t, void *,
                           cublasLtMatrixLayout_t, const cublasLtMatmulAlgo_t *, void *, size_t,
                           cudaStream_t) = real("cublasLtMatmul", 1);
  size_t nc = (size_t)m * n;
  void *whole = malloc(nc * 2), *split = malloc(nc * 2);
  CK(realmm(lh, d, &al, A, la, B, lb, &be, C, lc, C, lc, &res.algo, ws, wss, 0));
  CK(cudaMemcpy(whole, C, nc * 2, cudaMemcpyDeviceToHost));
  for (int i = 0; i < 3; i++) {
    CK(cudaMemcpy(C, c0h, nc * 2, cudaMemcpyHostToDevice));
    CK(cublasLtMatmul(lh, d, &al, A, la, B, lb, &be, C, lc, C, lc, &res.algo, ws, wss, 0));
    CK(cudaDeviceSynchronize());
  }
  CK(cudaMemcpy(split, C, nc * 2, cudaMemcpyDeviceToHost));
  report("cublasLtMatmul", T_BF16, 0x1p-24, k, whole, split, nc);
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(la), cublasLtMatrixLayoutDestroy(lb), cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatmulDescDestroy(d);
  cublasLtDestroy(lh);
  free(whole), free(split), free(c0h);
  cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(bias), cudaFree(ws);
}

int main(int argc, char **argv) {
  int ndev = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: gemm-split-bin SPLIT_LOG (run by tests/gpu/gemm-split)\n");
    return 2;
  }
  log_path = argv[1];
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
    printf("skipped: no GPU\n");
    return 77;
  }
  CK(cublasCreate(&H));
  static const case_t cases[] = {
      {"cublasSgemm_v2", T_F32, 2048, 2048, 1024, 1, CUBLAS_OP_N, CUBLAS_OP_T, 0},
      {"cublasDgemm_v2", T_F64, 2048, 2048, 1024, 1, CUBLAS_OP_T, CUBLAS_OP_N, 0},
      {"cublasHgemm", T_F16, 8192, 8192, 1024, 1, CUBLAS_OP_N, CUBLAS_OP_N, 0},
      {"cublasGemmEx", T_BF16, 4096, 4096, 4096, 1, CUBLAS_OP_T, CUBLAS_OP_T, 3},
      {"cublasSgemmStridedBatched", T_F32, 1024, 1024, 512, 8, CUBLAS_OP_N, CUBLAS_OP_N, 1},
      {"cublasDgemmStridedBatched", T_F64, 1024, 1024, 512, 8, CUBLAS_OP_T, CUBLAS_OP_T, 1},
      {"cublasHgemmStridedBatched", T_F16, 4096, 4096, 512, 8, CUBLAS_OP_N, CUBLAS_OP_T, 1},
      {"cublasGemmStridedBatchedEx", T_BF16, 2048, 2048, 2048, 8, CUBLAS_OP_N, CUBLAS_OP_N, 4},
      {"cublasSgemmBatched", T_F32, 1024, 1024, 512, 8, CUBLAS_OP_T, CUBLAS_OP_N, 2},
      {"cublasDgemmBatched", T_F64, 1024, 1024, 512, 8, CUBLAS_OP_N, CUBLAS_OP_N, 2},
      {"cublasHgemmBatched", T_F16, 4096, 4096, 512, 8, CUBLAS_OP_N, CUBLAS_OP_N, 2},
      {"cublasGemmBatchedEx", T_BF16, 2048, 2048, 2048, 8, CUBLAS_OP_T, CUBLAS_OP_N, 5},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
    one_classic(&cases[i]);
  one_lt();
  printf("gemm-split: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
