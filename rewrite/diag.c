/* diag.c: refusal reasons for rewrite/.
 *
 * Every parser and transform in rewrite/ reports why it refused through an
 * rw_diag (cf. Redis's anet "char *err").  The text is truncated, never
 * overflowed, so a hostile PTX line cannot grow a diagnostic without bound.
 */
#include "rewrite/rw.h"

#include <stdarg.h>
#include <stdio.h>

int rw_diag_set(rw_diag_t *d, int code, int line, int column, const char *fmt, ...) {
  va_list ap;

  if (d == NULL)
    return code;
  d->code = code;
  d->line = line;
  d->column = column;
  va_start(ap, fmt);
  vsnprintf(d->text, sizeof(d->text), fmt, ap);
  va_end(ap);
  return code;
}

void rw_diag_format(const rw_diag_t *d, char *buf, size_t len) {
  if (len == 0)
    return;
  if (d->line > 0)
    snprintf(buf, len, "%d:%d: %s", d->line, d->column, d->text);
  else
    snprintf(buf, len, "%s", d->text);
}
