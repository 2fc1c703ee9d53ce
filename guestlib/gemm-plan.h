/* gemm-plan.h: the GEMM split planner (pure C, no CUDA).
 *
 * Cuts one GEMM, described as cuBLAS/cuBLASLt see it (column-major,
 * D = epilogue(alpha * op(A) * op(B) + beta * C)), into sub-GEMMs whose
 * output regions partition D exactly and each of which fits a budget, so
 * that a best-effort tenant's long library GEMM becomes several short
 * launches.  Or it refuses, with a reason, what cannot be split exactly;
 * the caller then runs the GEMM whole.
 *
 * A sub-GEMM keeps k, the operation, the types, every leading dimension and
 * every batch stride of the whole; only m, n, the batch count and the
 * operand addresses change.  Addresses are plain integers: the planner
 * never dereferences them.
 *
 * Prefix gemm_plan_; nothing else is exported.  See guestlib/README.md.
 */
#ifndef TALLY_GEMM_PLAN_H
#define TALLY_GEMM_PLAN_H

#include <stddef.h>
#include <stdint.h>

/* op(X): as stored, transposed, or conjugate-transposed (same layout as T). */
typedef enum { GEMM_PLAN_OP_N, GEMM_PLAN_OP_T, GEMM_PLAN_OP_C } gemm_plan_op_t;

/* Element types of the matrices, the bias and the aux output.  BIT is the
 * one-bit-per-element mask cuBLASLt's ReLU aux output uses. */
#define GEMM_PLAN_TYPES(X) \
  X(F16, 16)  X(BF16, 16) X(F32, 32)  X(F64, 64) \
  X(C16F, 32) X(C32F, 64) X(C64F, 128) \
  X(I8, 8)    X(U8, 8)    X(I32, 32) \
  X(E4M3, 8)  X(E5M2, 8)  X(BIT, 1)
typedef enum {
#define GEMM_PLAN_TYPE_ENUM(name, bits) GEMM_PLAN_##name,
  GEMM_PLAN_TYPES(GEMM_PLAN_TYPE_ENUM)
#undef GEMM_PLAN_TYPE_ENUM
  GEMM_PLAN_TYPE_COUNT
} gemm_plan_type_t;

/* Element size in bits; 0 for a value outside the enum. */
unsigned gemm_plan_type_bits(int type);

/* Epilogues, named after cuBLASLt's.  Bias epilogues read one bias value
 * per row or per column of D; AUX epilogues write a second m x n output
 * (pre-activation values, or a ReLU bit mask); DRELU/DGELU read one; the
 * BGRAD epilogues reduce across the output and are never split. */
typedef enum {
  GEMM_PLAN_EPI_DEFAULT, GEMM_PLAN_EPI_RELU, GEMM_PLAN_EPI_GELU,
  GEMM_PLAN_EPI_BIAS, GEMM_PLAN_EPI_RELU_BIAS, GEMM_PLAN_EPI_GELU_BIAS,
  GEMM_PLAN_EPI_RELU_AUX, GEMM_PLAN_EPI_GELU_AUX,
  GEMM_PLAN_EPI_RELU_AUX_BIAS, GEMM_PLAN_EPI_GELU_AUX_BIAS,
  GEMM_PLAN_EPI_DRELU, GEMM_PLAN_EPI_DGELU,
  GEMM_PLAN_EPI_DRELU_BGRAD, GEMM_PLAN_EPI_DGELU_BGRAD,
  GEMM_PLAN_EPI_BGRADA, GEMM_PLAN_EPI_BGRADB,
  GEMM_PLAN_EPI_COUNT
} gemm_plan_epi_t;

/* Where alpha and beta live.  DEVICE: one scalar each at the addresses
 * given (read by every piece).  DEVICE_VECTOR: cuBLASLt's per-row alpha
 * vector, which the planner does not split. */
typedef enum {
  GEMM_PLAN_SCALAR_HOST, GEMM_PLAN_SCALAR_DEVICE, GEMM_PLAN_SCALAR_DEVICE_VECTOR
} gemm_plan_scalar_mode_t;

/* Scale factors of narrow types.  TENSOR: one scalar per operand, applied
 * elementwise, the same for every piece.  BLOCK: per-block or per-vector
 * scale tensors, not split. */
typedef enum {
  GEMM_PLAN_SCALE_NONE, GEMM_PLAN_SCALE_TENSOR, GEMM_PLAN_SCALE_BLOCK
} gemm_plan_scale_mode_t;

/* One GEMM.  Shapes follow cuBLAS: op(A) is m x k, op(B) is k x n, C and D
 * are m x n; A is stored m x k (lda >= m) when transa is N and k x m
 * (lda >= k) otherwise, B likewise.  Strides count elements between
 * consecutive matrices of a strided batch (0 broadcasts one matrix). */
typedef struct {
  int transa, transb;             /* gemm_plan_op_t */
  int64_t m, n, k;
  int64_t batch;                  /* 1 for a plain GEMM */
  int atype, btype, ctype, dtype; /* gemm_plan_type_t */
  uint64_t a, b, c, d;            /* c may be 0 when beta_zero */
  int64_t lda, ldb, ldc, ldd;
  int64_t stride_a, stride_b, stride_c, stride_d;
  int scalar_mode;                /* gemm_plan_scalar_mode_t */
  uint64_t alpha, beta;           /* device addresses in DEVICE mode */
  unsigned scalar_bytes;          /* size of alpha and beta in DEVICE mode */
  int beta_zero;                  /* beta is known to be 0: C is not read */
  int epi;                        /* gemm_plan_epi_t */
  uint64_t bias;                  /* bias epilogues */
  int bias_type;
  int bias_per_col;               /* 0: one value per row of D (length m); 1: per column (n) */
  int64_t bias_stride;            /* elements between the batches' bias vectors */
  uint64_t aux;                   /* AUX and D* epilogues */
  int aux_type;
  int64_t aux_ld, aux_stride;     /* in elements of aux_type */
  int scale_mode;                 /* gemm_plan_scale_mode_t */
  uint64_t amax_d;                /* address of a max-|D| output, 0 if none */
} gemm_plan_gemm_t;

/* Cost of a piece, in the caller's units; must not decrease when m, n or
 * batch grows (the planner searches on that assumption). */
typedef uint64_t (*gemm_plan_cost_fn)(int64_t m, int64_t n, int64_t k, int64_t batch,
                                      void *user);

/* What one piece may take.  Pieces are multiples of tile rows and columns
 * (except the last in each direction); a piece of r x c x b counts
 * ceil(r/tile) * ceil(c/tile) * b output tiles.  A limit of 0 (or a NULL
 * cost) is no limit. */
typedef struct {
  int64_t tile;          /* 1 .. 65536, e.g. 128 */
  int64_t max_tiles;
  gemm_plan_cost_fn cost;
  void *cost_user;
  uint64_t max_cost;
} gemm_plan_budget_t;

/* One sub-GEMM: the block [row0, row0+m) x [col0, col0+n) of matrices
 * [batch0, batch0+batch) of D, and the addresses its operands start at.
 * k, types, leading dimensions and strides are those of the whole. */
typedef struct {
  int64_t row0, col0, batch0;
  int64_t m, n, batch;
  uint64_t a, b, c, d, bias, aux;
} gemm_plan_piece_t;

/* Why a GEMM is not split.  OK is 0. */
#define GEMM_PLAN_REASONS(X) \
  X(OK, "split") \
  X(INVALID, "invalid description (sizes, leading dimensions, strides, types or pointers)") \
  X(EMPTY, "nothing to compute (m, n or batch is 0)") \
  X(EPI_UNKNOWN, "unknown epilogue") \
  X(EPI_REDUCES, "the epilogue reduces across the output (bias gradient)") \
  X(AMAX, "a max-|D| output reduces across the output") \
  X(BLOCK_SCALE, "block or vector scale factors") \
  X(ALPHA_VECTOR, "per-row alpha vector") \
  X(ALIAS, "an output overlaps an input, or D batches overlap") \
  X(AUX_UNALIGNED, "aux pieces would not start on a byte") \
  X(TOO_MANY, "the budget needs more pieces than the caller allows")
typedef enum {
#define GEMM_PLAN_REASON_ENUM(name, text) GEMM_PLAN_##name,
  GEMM_PLAN_REASONS(GEMM_PLAN_REASON_ENUM)
#undef GEMM_PLAN_REASON_ENUM
  GEMM_PLAN_REASON_COUNT
} gemm_plan_reason_t;

const char *gemm_plan_reason_name(int reason);
const char *gemm_plan_reason_text(int reason);

/* Plans g under bud into out[0 .. cap).  On GEMM_PLAN_OK, *count pieces
 * (1 when the whole fits) partition D; otherwise *count is 0 and the
 * reason says why the GEMM must run whole.  Never reads the addresses. */
gemm_plan_reason_t gemm_plan_split(const gemm_plan_gemm_t *g, const gemm_plan_budget_t *bud,
                                   gemm_plan_piece_t *out, size_t cap, size_t *count);

#endif
