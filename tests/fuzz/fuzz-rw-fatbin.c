/* fuzz-rw-fatbin.c: libFuzzer harness for the fatbin reader.
 *
 * Feeds arbitrary bytes to rw_fatbin_open/next/extract and rw_fatbin_ptx,
 * the path every image from a tenant takes.  Decompression is capped at
 * 4 MiB so the fuzzer explores formats rather than allocators.  The seed
 * corpus (tests/fuzz/corpus/rw-fatbin/) holds small real nvcc outputs, one
 * per --compress-mode, a cubin, a host object and PTX text; crashes found
 * are added there under a name that says what broke, and `make check`
 * replays every file through this same function (test-rw-fatbin-replay).
 */
#include "rewrite/rw.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rw_fatbin_t *fb;
  rw_fatbin_entry_t e;
  char *ptx = NULL;
  size_t n;
  unsigned arch;

  if (rw_fatbin_open(data, size, &fb, NULL) == 0) {
    while (rw_fatbin_next(fb, &e, NULL) == 1) {
      void *out = NULL;
      if (rw_fatbin_extract(fb, &e, 4u << 20, &out, &n, NULL) == 0)
        free(out);
    }
    rw_fatbin_free(fb);
  }
  /* rw_fatbin_ptx uses the default 256 MiB cap, inside libFuzzer's
   * default 2 GiB malloc limit. */
  if (rw_fatbin_ptx(data, size, 0, &ptx, &n, &arch, NULL) == 0)
    free(ptx);
  return 0;
}
