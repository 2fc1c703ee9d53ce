/* error.c: wire_strerror(), the one place wire/ turns a status into words.
 *
 * Our own codes come from WIRE_ERRNO_MAP in wire.h (one list generates the
 * enum and these strings); anything else negative is taken as -errno and
 * described by strerror_r.  Results are static or thread-local, so callers on
 * any thread may use them without freeing.
 */
#include "wire/wire.h"

#include <stdio.h>
#include <string.h>

const char *wire_strerror(int status) {
  static __thread char buf[128];

  if (status == 0)
    return "success";
  switch (status) {
#define WIRE__CASE(name, value, msg)                                                               \
  case name:                                                                                       \
    return msg;
    WIRE_ERRNO_MAP(WIRE__CASE)
#undef WIRE__CASE
  default:
    break;
  }
  if (status < 0 && status > -4000) {
    /* GNU strerror_r may return a static string instead of filling buf. */
    const char *s = strerror_r(-status, buf, sizeof(buf));
    return s ? s : "unknown error";
  }
  snprintf(buf, sizeof(buf), "unknown status %d", status);
  return buf;
}
