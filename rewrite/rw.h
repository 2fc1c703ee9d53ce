/* rw.h: the public API of rewrite/: fatbins, PTX parsing and printing, and
 * the kernel transformations that make best-effort kernels sliceable and
 * preemptible.  Parsers and transforms refuse with a reason in an rw_diag,
 * never abort: their input comes from tenants.
 */
#ifndef TALLY_RW_H
#define TALLY_RW_H

#include <stddef.h>

/* Why a parse or transform refused: position and text. */
typedef struct rw_diag {
  int line;       /* 1-based line of the input, 0 if not positional */
  int column;     /* 1-based column, 0 if unknown */
  int code;       /* negative errno value (-EPROTO for bad input) */
  char text[256]; /* human-readable reason */
} rw_diag_t;

/* Records a refusal in *d (may be NULL) and returns code. printf-style. */
int rw_diag_set(rw_diag_t *d, int code, int line, int column, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Formats *d as "line:col: text" into buf (always NUL-terminated). */
void rw_diag_format(const rw_diag_t *d, char *buf, size_t len);

/* ---- fatbin reader (rewrite/fatbin*.c) ---- */

/* ---- PTX IR, parser, printer (rewrite/ptx-*.c) ---- */

/* ---- transformations (rewrite/xform-*.c) ---- */

#endif /* TALLY_RW_H */
