/* fuzz-rw-ptx.c: libFuzzer harness for the PTX parser, printer and
 * transformations.
 *
 * Arbitrary bytes go to rw_ptx_parse (the path every tenant's PTX takes).
 * Whatever parses must print, the printed text must parse again and print
 * to the same bytes (a printer that emits what the parser refuses would lose
 * kernels), and rw_transform_ptx must transform or refuse every entry
 * without crashing.  Seeds: tests/fuzz/corpus/rw-ptx/ (small PTX modules);
 * crashes found are added there under a name saying what broke, and
 * `make check` replays every file through this function
 * (test-rw-ptx-replay).
 */
#include "rewrite/rw.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rw_ptx_module_t *m = NULL, *m2 = NULL;
  char *p1 = NULL, *p2 = NULL, *t = NULL;
  size_t l1, l2, tl;
  rw_xform_report_t r;

  if (rw_ptx_parse((const char *)data, size, &m, NULL) != 0)
    return 0;
  if (rw_ptx_print(m, &p1, &l1) == 0) {
    /* the printer's output is always valid input with the same meaning */
    if (rw_ptx_parse(p1, l1, &m2, NULL) != 0)
      abort();
    if (rw_ptx_print(m2, &p2, &l2) == 0 && (l1 != l2 || memcmp(p1, p2, l1) != 0))
      abort();
  }
  if (rw_transform_ptx((const char *)data, size, RW_XFORM_MASK_ALL, &t, &tl, &r) == 0) {
    rw_ptx_module_t *m3 = NULL;
    if (rw_ptx_parse(t, tl, &m3, NULL) != 0) /* transformed text parses too */
      abort();
    rw_ptx_free(m3);
  }
  rw_xform_report_free(&r);
  free(t);
  free(p1);
  free(p2);
  rw_ptx_free(m);
  rw_ptx_free(m2);
  return 0;
}
