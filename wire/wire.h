/* wire.h: the public API of wire/, the Tally wire protocol.
 *
 * wire/ carries every CUDA call of every tenant between the guest library and
 * tallyd.  It knows no other Tally module and no CUDA header.  Functions
 * return 0 or a negative errno value; codes errno lacks sit far from errno's
 * range (cf. libuv's UV__EOF) and are listed once, in WIRE_ERRNO_MAP.
 */
#ifndef TALLY_WIRE_H
#define TALLY_WIRE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

/* X(name, value, message): our own codes, beyond errno's range. */
#define WIRE_ERRNO_MAP(X)                                                      \
  X(WIRE_EVERSION, -4000, "no protocol version in common with the peer")       \
  X(WIRE_ETOKEN, -4001, "authentication token refused")                        \
  X(WIRE_EPEERDEAD, -4002, "peer stopped answering (heartbeat timeout)")

enum {
#define WIRE__ENUM(name, value, msg) name = (value),
  WIRE_ERRNO_MAP(WIRE__ENUM)
#undef WIRE__ENUM
};

/* Returns a static, human-readable message for a status returned by any
 * wire_ function: 0, a negative errno value or one of WIRE_ERRNO_MAP. Never
 * NULL. */
const char *wire_strerror(int status);

#endif /* TALLY_WIRE_H */
