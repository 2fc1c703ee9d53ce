/* trace.c: the failure trace.  Under TALLY_LOG=debug, cuGetProcAddress hands
 * out a tracing twin of every implemented driver function that returns a
 * CUresult; the twin calls the function and, when the answer is an error,
 * logs the function's name and the result (the first 4 times per function).
 * Answers made in the guest are covered as much as forwarded ones, so when a
 * library fails through Tally but not natively, the call it gave up after is
 * named.  Libraries reach the driver through cuGetProcAddress (cudart asks
 * for every symbol there); direct calls of exported symbols are not traced.
 * The twins are generated from guestlib/driver-trace.def (one source:
 * scripts/gen-driver-api.py). */
#include "guestlib/guest.h"

static void trace_fail(const char *name, CUresult r, unsigned *seen) {
  const char *text = NULL;
  if (__atomic_fetch_add(seen, 1, __ATOMIC_RELAXED) >= 4)
    return;
  cuGetErrorName(r, &text);
  guest__log("trace: %s answered %d (%s)", name, (int)r, text ? text : "?");
}

#define GUEST_TRACE(name, params, args)                                                            \
  static CUresult trace_##name params {                                                            \
    static unsigned seen;                                                                          \
    CUresult r = name args;                                                                        \
    if (r != CUDA_SUCCESS)                                                                         \
      trace_fail(#name, r, &seen);                                                                 \
    return r;                                                                                      \
  }
#include "guestlib/driver-trace.def"
#undef GUEST_TRACE

static const struct {
  void *fn, *twin;
} twins[] = {
#define GUEST_TRACE(name, params, args) {(void *)&name, (void *)&trace_##name},
#include "guestlib/driver-trace.def"
#undef GUEST_TRACE
};

void *guest__trace_twin(void *fn) {
  if (!fn || !guest__debug())
    return fn;
  for (size_t i = 0; i < sizeof(twins) / sizeof(twins[0]); i++)
    if (twins[i].fn == fn)
      return twins[i].twin;
  return fn;
}
