/* compat.c: the driver's older names whose signature is their successor's.
 *
 * The driver still exports each symbol under its first name, and a library
 * that binds a name with dlsym() (the frameworks' helper libraries bind
 * cuCtxPushCurrent this way) gets that one, not the suffixed one cuda.h
 * maps to.  Where the parameters are the same types, the old name is the
 * same call here.  Old names whose types differ (32-bit CUdeviceptr_v1 and
 * sizes of cuMemAlloc and the copies, the _v1 descriptor structs) stay stubs:
 * no program built against a header of the last fifteen years calls them.
 */
#include "guestlib/guest.h"

GUEST_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  return cuCtxCreate_v2(pctx, flags, dev);
}

GUEST_EXPORT CUresult cuCtxDestroy(CUcontext ctx) {
  return cuCtxDestroy_v2(ctx);
}

GUEST_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) {
  return cuCtxPushCurrent_v2(ctx);
}

GUEST_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) {
  return cuCtxPopCurrent_v2(pctx);
}

GUEST_EXPORT CUresult cuStreamDestroy(CUstream s) {
  return cuStreamDestroy_v2(s);
}

GUEST_EXPORT CUresult cuEventDestroy(CUevent e) {
  return cuEventDestroy_v2(e);
}

GUEST_EXPORT CUresult cuMemHostRegister(void *p, size_t size, unsigned int flags) {
  return cuMemHostRegister_v2(p, size, flags);
}

GUEST_EXPORT CUresult cuLinkCreate(unsigned int n, CUjit_option *opts, void **vals,
                                   CUlinkState *st) {
  return cuLinkCreate_v2(n, opts, vals, st);
}

GUEST_EXPORT CUresult cuLinkAddData(CUlinkState st, CUjitInputType type, void *data, size_t size,
                                    const char *name, unsigned int n, CUjit_option *opts,
                                    void **vals) {
  return cuLinkAddData_v2(st, type, data, size, name, n, opts, vals);
}

GUEST_EXPORT CUresult cuLinkAddFile(CUlinkState st, CUjitInputType type, const char *path,
                                    unsigned int n, CUjit_option *opts, void **vals) {
  return cuLinkAddFile_v2(st, type, path, n, opts, vals);
}
