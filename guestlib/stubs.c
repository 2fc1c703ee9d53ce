/* stubs.c: every driver entry point Tally does not offer yet.
 *
 * Expanded from guestlib/driver-api.def: each GUEST_API_STUB becomes an
 * exported function that logs its name once and returns
 * CUDA_ERROR_NOT_SUPPORTED, so a program that reaches one gets a clear
 * error, never a crash and never a silent success.  Implemented symbols
 * (GUEST_API_IMPL) live in the other files; a symbol both annotated and
 * missing fails to link (test-guest-exports checks every name).
 */
#include "guestlib/guest.h"

#define GUEST_API_IMPL(name, kind, ret, params)
#define GUEST_API_STUB(name, ret, params)                                                          \
  GUEST_EXPORT ret name params {                                                                   \
    static int logged;                                                                             \
    return guest__unsupported(#name, &logged);                                                     \
  }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "guestlib/driver-api.def"
#pragma GCC diagnostic pop
#undef GUEST_API_IMPL
#undef GUEST_API_STUB
