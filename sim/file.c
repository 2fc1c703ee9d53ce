/* file.c: reads a whole file into memory, bounded; the one file reader of
 * sim/'s inputs (traces, CSVs, manifests) and its commands. */
#include "sim/sim-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sim__read_file(const char *path, size_t max, char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return -errno;
  size_t cap = 0, n = 0;
  char *b = NULL;
  int rc = 0;
  for (;;) {
    if (n == cap) {
      if (cap > max) {
        rc = -EFBIG;
        break;
      }
      size_t c = cap ? cap * 2 : 65536;
      char *p = realloc(b, c + 1);
      if (!p) {
        rc = -ENOMEM;
        break;
      }
      b = p;
      cap = c;
    }
    size_t k = fread(b + n, 1, cap - n, f);
    n += k;
    if (k == 0) {
      if (ferror(f))
        rc = -EIO;
      break;
    }
  }
  fclose(f);
  if (rc == 0 && n > max)
    rc = -EFBIG;
  if (rc < 0) {
    free(b);
    return rc;
  }
  b[n] = '\0';
  *buf = b;
  *len = n;
  return 0;
}

int sim__read_trace_file(const char *path, char **buf, size_t *len, char *err, size_t errlen) {
  int rc = sim__read_file(path, SIM_TRACE_MAX_BYTES, buf, len);
  if (rc < 0 && err && errlen)
    snprintf(err, errlen, "%s", rc == -EFBIG ? "larger than the trace limit" : strerror(-rc));
  return rc;
}
