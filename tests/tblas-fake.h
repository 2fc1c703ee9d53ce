/* tblas-fake.h: the fake cuBLAS, cuBLASLt and driver of test-blas-split
 * (tests/tblas-fake.c, built as libtblas-fake.so and linked after
 * libtally-blas.so, so the interposer's RTLD_NEXT finds it).  Every GEMM is
 * recorded, nothing is computed; events finish when the test says so. */
#ifndef TALLY_TESTS_TBLAS_FAKE_H
#define TALLY_TESTS_TBLAS_FAKE_H

#include <stdint.h>

#define FAKE_MAX_CALLS 4096

typedef struct {
  int entry; /* tblas_entry_t of the function called */
  int transa, transb;
  int64_t m, n, k, batch;
  uintptr_t a, b, c, d;
  int64_t lda, ldb, ldc, ldd;
  int64_t sa, sb, sc, sd;
  uintptr_t alpha, beta, bias, aux;
  int64_t algo; /* cuBLASLt: algo->data[0], -1 for NULL; classic: the algo enum */
} fake_call_t;

typedef struct {
  /* what the test sets */
  int tally_table;         /* answer Tally's export table */
  unsigned tally_budget_us;
  int tally_priority;
  int tally_no_lc;         /* the LC slot answers 0: no latency-critical tenant */
  int tally_old;           /* a table of 3 slots (an older guest library) */
  int events_ready;        /* cuEventQuery answers SUCCESS (else NOT_READY) */
  float elapsed_ms;        /* cuEventElapsedTime's answer */
  int capturing;           /* cuStreamIsCapturing answers ACTIVE */
  int sms;                 /* multiprocessor count */
  int pointer_mode;        /* cublasGetPointerMode's answer */
  int algo_check_fails;    /* cublasLtMatmulAlgoCheck answers NOT_SUPPORTED */
  /* what the fake saw */
  int ncalls;
  fake_call_t calls[FAKE_MAX_CALLS];
  int events_live, events_created, event_records;
  int layouts_created, layouts_destroyed, layout_inits, heuristics, checks;
} fake_state_t;

extern fake_state_t fake;

/* Forgets everything seen; the settings go back to their defaults. */
void fake_reset(void);

#endif
