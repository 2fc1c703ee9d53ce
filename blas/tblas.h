/* tblas.h: what the files of libtally-blas.so share (prefix tblas_).
 *
 * libtally-blas.so is preloaded into a best-effort tenant (tally-run) and
 * exports the real names of cuBLAS's and cuBLASLt's GEMM entry points.  Each
 * call is described as a gemm_plan_gemm_t (guestlib/gemm-plan.h), timed
 * whole the first times its shape is seen, and from then on cut into
 * sub-GEMMs that each fit the scheduler's budget, run through the real
 * library on the caller's stream.  Anything not understood runs whole.
 *
 * Files: core.c (configuration, the budget, the driver functions, shape
 * profiles and their timing, the cost model, planning, the decision log),
 * cublas.c (the classic cuBLAS entry points), lt.c (cublasLtMatmul).
 * May call: guestlib/gemm-plan.h, the CUDA driver API and cuBLAS/cuBLASLt
 * through symbols resolved at run time (never linked), libc, libdl,
 * libpthread.  blas/README.md has the rules.
 */
#ifndef TALLY_BLAS_TBLAS_H
#define TALLY_BLAS_TBLAS_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "guestlib/gemm-plan.h"

#define TBLAS_EXPORT __attribute__((visibility("default")))

/* Environment. */
#define TBLAS_ENV_SPLIT  "TALLY_GEMM_SPLIT"     /* 0: pass everything through; 1 (default) */
#define TBLAS_ENV_BUDGET "TALLY_GEMM_BUDGET_US" /* overrides the advertised budget */
#define TBLAS_ENV_LOG    "TALLY_GEMM_SPLIT_LOG" /* FILE: one line per decision */

/* Pieces are multiples of this many rows and columns; the cost model counts
 * output tiles of this edge. */
#define TBLAS_TILE 128
/* Most pieces one GEMM may become (more: it runs whole). */
#define TBLAS_MAX_PIECES 256
/* Whole runs timed per shape before it may be split (the least counts: the
 * first run of a shape may include loading its kernel). */
#define TBLAS_SAMPLES 2

/* The entry points, in the order of the profile key's `entry`. */
#define TBLAS_ENTRIES(X) \
  X(LT_MATMUL, "cublasLtMatmul") \
  X(GEMM_EX, "cublasGemmEx") \
  X(SGEMM, "cublasSgemm_v2") \
  X(DGEMM, "cublasDgemm_v2") \
  X(HGEMM, "cublasHgemm") \
  X(GEMM_SB_EX, "cublasGemmStridedBatchedEx") \
  X(SGEMM_SB, "cublasSgemmStridedBatched") \
  X(DGEMM_SB, "cublasDgemmStridedBatched") \
  X(HGEMM_SB, "cublasHgemmStridedBatched") \
  X(GEMM_B_EX, "cublasGemmBatchedEx") \
  X(SGEMM_B, "cublasSgemmBatched") \
  X(DGEMM_B, "cublasDgemmBatched") \
  X(HGEMM_B, "cublasHgemmBatched")
typedef enum {
#define TBLAS_ENTRY_ENUM(id, name) TBLAS_##id,
  TBLAS_ENTRIES(TBLAS_ENTRY_ENUM)
#undef TBLAS_ENTRY_ENUM
  TBLAS_ENTRY_COUNT
} tblas_entry_t;
const char *tblas_entry_name(int entry);

/* What a profile is keyed by.  Zero it before filling (it is hashed and
 * compared as bytes). */
typedef struct {
  int32_t entry;
  int32_t transa, transb, epi;
  int32_t atype, btype, ctype, dtype, compute;
  int32_t pad;
  int64_t m, n, k, batch;
} tblas_key_t;

/* Set while a call of this thread is inside the real library: nested calls
 * (cuBLAS calling its own entry points) pass straight through. */
extern __thread int tblas_depth;

/* Resolves name in the real cuBLAS (lt = 0) or cuBLASLt (lt = 1): the next
 * object after this one, else libcublas(Lt).so.13.  NULL if absent. */
void *tblas_real(const char *name, int lt);

/* The verdict for one call. */
typedef enum {
  TBLAS_WHOLE, /* pass through untouched */
  TBLAS_TIME,  /* pass through, bracketed by tblas_time_begin/end */
  TBLAS_SPLIT, /* predicted longer than the budget: describe it and plan */
} tblas_verdict_t;

/* A call in flight: what tblas_decide found, for the calls after it. */
typedef struct {
  tblas_key_t key;
  int slot;          /* profile slot, -1 if none */
  uint64_t whole_ns; /* predicted time of the whole (TBLAS_SPLIT) */
  uint64_t budget_ns;
  const char *why;   /* the reason logged for a whole run */
} tblas_call_t;

/* Splitting is on for this process (TALLY_GEMM_SPLIT, Tally's table, the
 * budget): cheap after the first call. */
int tblas_enabled(void);
/* Looks c->key up in the profiles (c->key filled by the caller). */
tblas_verdict_t tblas_decide(tblas_call_t *c, CUstream stream);
void tblas_time_begin(const tblas_call_t *c, CUstream stream);
void tblas_time_end(const tblas_call_t *c, CUstream stream);
/* Plans g for c (TBLAS_SPLIT): returns the piece count (>= 2) with the
 * pieces in *out (this thread's buffer, valid until its next call), or 0
 * with c->why set: run whole. */
size_t tblas_plan(tblas_call_t *c, const gemm_plan_gemm_t *g, const gemm_plan_piece_t **out);
/* Batch groups for pointer-array forms (only the batch may be cut): the
 * matrices per piece, or 0 with c->why set: run whole. */
int64_t tblas_batch_group(tblas_call_t *c, int64_t m, int64_t n, int64_t k, int64_t batch);
/* Logs the decision (TALLY_GEMM_SPLIT_LOG): pieces 1 = whole, with why. */
void tblas_log(const tblas_call_t *c, size_t pieces);

/* cudaDataType -> gemm_plan_type_t, -1 if the planner does not know it. */
int tblas_plan_type(int cuda_type);

/* Forgets lt.c's cache of algos for piece shapes (tblas_reset calls it). */
void tblas_lt_forget(void);

/* Test hook: forgets the configuration and every profile (events
 * destroyed), so a test can change the environment between cases. */
TBLAS_EXPORT void tblas_reset(void);

#endif
