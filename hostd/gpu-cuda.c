/* gpu-cuda.c: the real GPU backend of tallyd, on the CUDA driver API.
 *
 * One device, one context: the device's primary context, retained at init
 * and made current on every tenant worker thread before its first request
 * (thread_enter, called by tenant.c), so kernels of all tenants share it
 * and can overlap (docs/decisions.md, D4).  There is no in-process reset: after
 * a context-corrupting error the driver refuses even a reset context to
 * this process (cuDevicePrimaryCtxRetain answers 700, measured on the
 * H200), so tallyd re-executes itself instead (hostd/restart.c).
 * Streams are created CU_STREAM_NON_BLOCKING: the real legacy NULL stream
 * is never used, so no tenant's work serialises another's; each tenant's
 * legacy stream is emulated by hostd/tenant.c.  Every function returns the
 * driver's CUresult unchanged.
 *
 * Module functions are enumerated with cuModuleEnumerateFunctions /
 * cuLibraryEnumerateKernels (CUDA 12.4+) and described with
 * cuFuncGetParamInfo / cuKernelGetParamInfo and every CU_FUNC_ATTRIBUTE_*,
 * so the guest packs launch arguments and answers cuFuncGetAttribute without
 * asking again.  Functions are not loaded for this: with lazy loading (the
 * default since CUDA 12.2) three attributes (max threads per block, const
 * bytes, max dynamic shared bytes) answer CUDA_ERROR_FUNCTION_NOT_LOADED and
 * are marked invalid; a later query of one loads that function (cuFuncLoad),
 * so a cuBLAS library of thousands of kernels is not loaded whole.
 */
#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "wire/u64map.h"

#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Every driver function this backend calls, resolved at init through the
 * driver's own cuGetProcAddress (so each gets the CUDA 13.0 version of its
 * entry point, as cudart would): tallyd does not link libcuda, so --help
 * works without a driver and a missing driver is one clear log line.
 * The lookup is by the name as written here, not by cuda.h's macros: the
 * name "cuGraphInstantiate" is the CUDA 11 five-argument entry point at
 * every version (cuda.h maps only the C name to the flags form), so the
 * flags form is listed by its own name. */
#define CUDA_FNS(X)                                                                                \
  X(cuCtxGetLimit)                                                                                 \
  X(cuCtxGetStreamPriorityRange)                                                                   \
  X(cuCtxSetLimit)                                                                                 \
  X(cuCtxSetCurrent)                                                                               \
  X(cuCtxFromGreenCtx)                                                                             \
  X(cuCtxPopCurrent)                                                                               \
  X(cuCtxPushCurrent)                                                                              \
  X(cuDevResourceGenerateDesc)                                                                     \
  X(cuDevSmResourceSplitByCount)                                                                   \
  X(cuDeviceGetDevResource)                                                                        \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetAttribute)                                                                          \
  X(cuDeviceGetName)                                                                               \
  X(cuDeviceGetUuid)                                                                               \
  X(cuDevicePrimaryCtxRelease)                                                                     \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuDeviceTotalMem)                                                                              \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy)                                                                                \
  X(cuEventElapsedTime)                                                                            \
  X(cuEventQuery)                                                                                  \
  X(cuEventRecordWithFlags)                                                                        \
  X(cuEventSynchronize)                                                                            \
  X(cuFuncGetAttribute)                                                                            \
  X(cuGreenCtxCreate)                                                                              \
  X(cuGreenCtxStreamCreate)                                                                        \
  X(cuFuncGetName)                                                                                 \
  X(cuFuncGetParamInfo)                                                                            \
  X(cuFuncLoad)                                                                                    \
  X(cuFuncSetAttribute)                                                                            \
  X(cuFuncSetCacheConfig)                                                                          \
  X(cuInit)                                                                                        \
  X(cuKernelGetAttribute)                                                                          \
  X(cuKernelGetFunction)                                                                           \
  X(cuKernelGetName)                                                                               \
  X(cuKernelGetParamInfo)                                                                          \
  X(cuKernelSetAttribute)                                                                          \
  X(cuKernelSetCacheConfig)                                                                        \
  X(cuLaunchHostFunc)                                                                              \
  X(cuLaunchKernel)                                                                                \
  X(cuLaunchKernelEx)                                                                              \
  X(cuLinkAddData)                                                                                 \
  X(cuLinkComplete)                                                                                \
  X(cuLinkCreate)                                                                                  \
  X(cuLinkDestroy)                                                                                 \
  X(cuLibraryEnumerateKernels)                                                                     \
  X(cuLibraryGetGlobal)                                                                            \
  X(cuLibraryGetKernelCount)                                                                       \
  X(cuLibraryGetModule)                                                                            \
  X(cuLibraryLoadData)                                                                             \
  X(cuLibraryUnload)                                                                               \
  X(cuMemAlloc)                                                                                    \
  X(cuMemFree)                                                                                     \
  X(cuMemFreeHost)                                                                                 \
  X(cuMemHostAlloc)                                                                                \
  X(cuMemHostGetDevicePointer)                                                                     \
  X(cuMemHostRegister)                                                                             \
  X(cuMemHostUnregister)                                                                           \
  X(cuMemGetInfo)                                                                                  \
  X(cuMemcpyDtoDAsync)                                                                             \
  X(cuMemcpyDtoHAsync)                                                                             \
  X(cuMemcpyHtoDAsync)                                                                             \
  X(cuMemsetD16Async)                                                                              \
  X(cuMemsetD32Async)                                                                              \
  X(cuMemsetD8Async)                                                                               \
  X(cuModuleEnumerateFunctions)                                                                    \
  X(cuModuleGetFunctionCount)                                                                      \
  X(cuModuleGetGlobal)                                                                             \
  X(cuModuleLoadData)                                                                              \
  X(cuModuleUnload)                                                                                \
  X(cuOccupancyMaxActiveClusters)                                                                  \
  X(cuOccupancyMaxPotentialClusterSize)                                                            \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                                   \
  X(cuStreamCreateWithPriority)                                                                    \
  X(cuStreamDestroy)                                                                               \
  X(cuStreamQuery)                                                                                 \
  X(cuStreamSynchronize)                                                                           \
  X(cuStreamWaitEvent)                                                                             \
  X(cuStreamWaitValue32)                                                                           \
  X(cuStreamWriteValue64)                                                                          \
  X(cuStreamWriteValue32)                                                                          \
  X(cuMemGetAllocationGranularity)                                                                 \
  X(cuMemCreate)                                                                                   \
  X(cuMemRelease)                                                                                  \
  X(cuMemAddressReserve)                                                                           \
  X(cuMemAddressFree)                                                                              \
  X(cuMemMap)                                                                                      \
  X(cuMemUnmap)                                                                                    \
  X(cuMemSetAccess)                                                                                \
  X(cuMemRetainAllocationHandle)                                                                   \
  X(cuMemPoolCreate)                                                                               \
  X(cuMemPoolDestroy)                                                                              \
  X(cuMemPoolGetAttribute)                                                                         \
  X(cuMemPoolSetAttribute)                                                                         \
  X(cuMemPoolTrimTo)                                                                               \
  X(cuMemAllocFromPoolAsync)                                                                       \
  X(cuMemFreeAsync)                                                                                \
  X(cuStreamBeginCapture)                                                                          \
  X(cuStreamBeginCaptureToGraph)                                                                   \
  X(cuGraphGetRootNodes)                                                                           \
  X(cuGraphExecChildGraphNodeSetParams)                                                            \
  X(cuGraphNodeGetDependencies)                                                                    \
  X(cuGraphNodeGetDependentNodes)                                                                  \
  X(cuStreamEndCapture)                                                                            \
  X(cuStreamGetCaptureInfo)                                                                        \
  X(cuThreadExchangeStreamCaptureMode)                                                             \
  X(cuGraphCreate)                                                                                 \
  X(cuGraphDebugDotPrint)                                                                          \
  X(cuGraphDestroy)                                                                                \
  X(cuGraphAddEmptyNode)                                                                           \
  X(cuGraphAddKernelNode)                                                                          \
  X(cuGraphAddMemcpyNode)                                                                          \
  X(cuGraphAddMemsetNode)                                                                          \
  X(cuGraphAddEventRecordNode)                                                                     \
  X(cuGraphAddEventWaitNode)                                                                       \
  X(cuGraphAddChildGraphNode)                                                                      \
  X(cuGraphAddDependencies)                                                                        \
  X(cuGraphRemoveDependencies)                                                                     \
  X(cuGraphDestroyNode)                                                                            \
  X(cuGraphInstantiateWithFlags)                                                                   \
  X(cuGraphLaunch)                                                                                 \
  X(cuGraphUpload)                                                                                 \
  X(cuGraphExecDestroy)                                                                            \
  X(cuGraphExecUpdate)                                                                             \
  X(cuGraphExecKernelNodeSetParams)                                                                \
  X(cuGraphExecMemcpyNodeSetParams)                                                                \
  X(cuGraphExecMemsetNodeSetParams)                                                                \
  X(cuGraphExecEventRecordNodeSetEvent)                                                            \
  X(cuGraphExecEventWaitNodeSetEvent)                                                              \
  X(cuGraphKernelNodeSetParams)                                                                    \
  X(cuGraphMemcpyNodeSetParams)                                                                    \
  X(cuGraphMemsetNodeSetParams)                                                                    \
  X(cuGraphEventRecordNodeSetEvent)                                                                \
  X(cuGraphEventWaitNodeSetEvent)                                                                  \
  X(cuDeviceGraphMemTrim)                                                                          \
  X(cuGraphAddHostNode)                                                                            \
  X(cuGraphClone)                                                                                  \
  X(cuGraphNodeFindInClone)                                                                        \
  X(cuGraphNodeGetType)                                                                            \
  X(cuGraphKernelNodeGetParams)                                                                    \
  X(cuGraphMemsetNodeGetParams)                                                                    \
  X(cuGraphEventRecordNodeGetEvent)                                                                \
  X(cuGraphEventWaitNodeGetEvent)                                                                  \
  X(cuGraphNodeSetEnabled)                                                                         \
  X(cuGraphAddMemAllocNode)                                                                        \
  X(cuGraphAddMemFreeNode)                                                                         \
  X(cuGraphMemAllocNodeGetParams)                                                                  \
  X(cuGraphMemcpyNodeGetParams)                                                                    \
  X(cuGraphKernelNodeGetAttribute)                                                                 \
  X(cuStreamUpdateCaptureDependencies)                                                             \
  X(cuGraphKernelNodeSetAttribute)                                                                 \
  X(cuGraphKernelNodeCopyAttributes)                                                               \
  X(cuGraphMemFreeNodeGetParams)                                                                   \
  X(cuGraphNodeGetEnabled)                                                                         \
  X(cuGraphAddBatchMemOpNode)                                                                      \
  X(cuGraphExecHostNodeSetParams)                                                                  \
  X(cuGraphExecBatchMemOpNodeSetParams)                                                            \
  X(cuDeviceGetGraphMemAttribute)                                                                  \
  X(cuDeviceSetGraphMemAttribute)                                                                  \
  X(cuGraphGetNodes)                                                                               \
  X(cuArray3DCreate)                                                                               \
  X(cuArrayDestroy)                                                                                \
  X(cuMemcpy3DAsync)                                                                               \
  X(cuTexObjectCreate)                                                                             \
  X(cuTexObjectDestroy)                                                                            \
  X(cuSurfObjectCreate)                                                                            \
  X(cuSurfObjectDestroy)                                                                           \
  X(cuTensorMapEncodeTiled)                                                                        \
  X(cuTensorMapEncodeIm2col)                                                                       \
  X(cuTensorMapEncodeIm2colWide)                                                                   \
  X(cuTensorMapReplaceAddress)

static struct {
#define X(n) __typeof__(&n) n;
  CUDA_FNS(X)
#undef X
  CUresult (*cuGetExportTable)(const void **table, const CUuuid *id);
  CUresult (*cuGetErrorName)(CUresult error, const char **name); /* optional: NULL */
} D; /* written once by load_driver, before any tenant */

static CUresult load_driver(void) {
  PFN_cuGetProcAddress_v12000 gpa;
  CUdriverProcAddressQueryResult st;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    hostd__log(HOSTD_LOG_ERROR, "cannot load the CUDA driver: %s", dlerror());
    return CUDA_ERROR_NO_DEVICE;
  }
  gpa = (PFN_cuGetProcAddress_v12000)dlsym(lib, "cuGetProcAddress_v2");
  D.cuGetExportTable = (CUresult(*)(const void **, const CUuuid *))dlsym(lib, "cuGetExportTable");
  if (!gpa || D.cuGetExportTable == NULL) {
    hostd__log(HOSTD_LOG_ERROR, "libcuda.so.1 has no cuGetProcAddress_v2: driver too old");
    return CUDA_ERROR_NO_DEVICE;
  }
#define X(n)                                                                                       \
  if (gpa(#n, (void **)&D.n, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &st) != CUDA_SUCCESS) {    \
    hostd__log(HOSTD_LOG_ERROR, "the CUDA driver lacks %s (needs CUDA %d)", #n, CUDA_VERSION);     \
    return CUDA_ERROR_NOT_FOUND;                                                                   \
  }
  CUDA_FNS(X)
#undef X
  /* Only for log lines: a driver without it still serves. */
  if (gpa("cuGetErrorName", (void **)&D.cuGetErrorName, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,
          &st) != CUDA_SUCCESS)
    D.cuGetErrorName = NULL;
  return CUDA_SUCCESS;
}

/* Every attribute we describe must exist in the driver's header. */
_Static_assert(CALL_FUNC_ATTRS <= CU_FUNC_ATTRIBUTE_MAX, "CALL_FUNC_ATTRS past cuda.h");

static CUcontext ctx;   /* the primary context; written once by init */
static CUdevice device; /* the served device */
static bool host_ptr_direct; /* registered host memory has the CPU's address on the device */

/* cuBLAS asks the driver's private context table (21318c60) for an object
 * of the context (slot 51: ctx, 0, &obj) and then a value for it (slot 39:
 * ctx, obj, &value); on an H200 with driver 580 the value is 7 (meaning
 * undocumented).  The guest emulates the table, so the daemon asks its own
 * driver once for the primary context and ships the answer in the snapshot;
 * -1 when the driver has no such table or slot. */
static int32_t ident_slot39(CUcontext c) {
  static const CUuuid id = {CALL_UUID_CTX_IDENT};
  const void *const *t = NULL;
  void *obj = NULL;
  uint64_t value = 0; /* 8 bytes: the driver writes at least the low 4 */
  if (D.cuGetExportTable((const void **)&t, &id) != CUDA_SUCCESS || t == NULL ||
      (uintptr_t)t[0] < 52 * sizeof(void *) || t[51] == NULL || t[39] == NULL)
    return -1;
  CUresult (*get_obj)(CUcontext, unsigned long long, void **) =
      (CUresult(*)(CUcontext, unsigned long long, void **))t[51];
  CUresult (*query)(CUcontext, void *, void *) = (CUresult(*)(CUcontext, void *, void *))t[39];
  if (get_obj(c, 0, &obj) != CUDA_SUCCESS || obj == NULL || query(c, obj, &value) != CUDA_SUCCESS)
    return -1;
  return (int32_t)(uint32_t)value;
}

/* cuBLASLt's handshake with the driver (private table 1734dc26): slot 3
 * (the table's word 4), given two result pointers and the table itself,
 * hands back two heap objects whose first bytes describe the GPU's TPCs in
 * its GPCs (a group number per unit, each unit's index in its group).
 * cuBLASLt orders a GEMM's clusters by them and without them keeps launch
 * order: the same results, a BERT-base CUDA graph 2% slower on an H100
 * (tests/bench/RESULTS.md).  Slot 12, which cuBLASLt calls next on the
 * objects, is not needed for the order: a native process given copies of
 * the objects and slot 12 answered without the driver launched the same
 * kernel arguments.  So the daemon asks once, here, and the guest serves
 * slot 3 with copies (guestlib/export.c).  The objects stay the driver's
 * and are held here (layout_objs): no slot that frees them is known. */
static bool layout_ok;
static uint8_t layout_a[CALL_BLASLT_LAYOUT_BYTES], layout_b[CALL_BLASLT_LAYOUT_BYTES];
static void *volatile layout_objs[2]; /* the driver's objects, held for the process's life */

static void blaslt_layout_read(void) {
  static const CUuuid id = {CALL_UUID_BLASLT};
  const void *const *t = NULL;
  void *a = NULL, *b = NULL;
  CUresult r;
  const char *env = getenv("TALLYD_BLASLT_LAYOUT");
  layout_ok = false;
  if (env && strcmp(env, "0") == 0) { /* a driver whose slot misbehaves: never called */
    hostd__log(HOSTD_LOG_INFO, "cuBLASLt's layout objects not read (TALLYD_BLASLT_LAYOUT=0): "
                               "its GEMMs keep launch order");
    return;
  }
  if (D.cuGetExportTable((const void **)&t, &id) != CUDA_SUCCESS || t == NULL ||
      (uintptr_t)t[0] < 5 * sizeof(void *) || t[4] == NULL) {
    hostd__log(HOSTD_LOG_DEBUG, "private table 1734dc26 slot 3: not in this driver");
    return;
  }
  CUresult (*slot3)(void **, void **, const void *, void *, void *) =
      (CUresult(*)(void **, void **, const void *, void *, void *))t[4];
  if ((r = slot3(&a, &b, t, NULL, NULL)) != CUDA_SUCCESS || a == NULL || b == NULL) {
    hostd__log(HOSTD_LOG_DEBUG, "private table 1734dc26 slot 3: answered %d", (int)r);
    return;
  }
  layout_objs[0] = a;
  layout_objs[1] = b;
  memcpy(layout_a, a, sizeof(layout_a));
  memcpy(layout_b, b, sizeof(layout_b));
  layout_ok = true;
  hostd__log(HOSTD_LOG_DEBUG, "private table 1734dc26 slot 3: two objects, served to cuBLASLt");
}

static CUresult cuda_blaslt_layout(uint8_t a[CALL_BLASLT_LAYOUT_BYTES],
                                   uint8_t b[CALL_BLASLT_LAYOUT_BYTES]) {
  if (!layout_ok)
    return CUDA_ERROR_NOT_SUPPORTED;
  memcpy(a, layout_a, CALL_BLASLT_LAYOUT_BYTES);
  memcpy(b, layout_b, CALL_BLASLT_LAYOUT_BYTES);
  return CUDA_SUCCESS;
}

static void params_init(void); /* arguments as an array, below */
static void params_close(void);

/* The first stream-ordered free of a context took 11 ms on the H200 (the
 * later ones 10 us); tenants' frees are stream-ordered (tenant.c,
 * hostd__free_ordered), so that cost is paid here, not by the first tenant
 * that frees.  A failure only leaves the cost where it was. */
static void free_async_warm(void) {
  CUdeviceptr p = 0;
  CUstream s = NULL;
  CUresult r = D.cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0);
  if (r == CUDA_SUCCESS && (r = D.cuMemAlloc(&p, 256)) == CUDA_SUCCESS &&
      (r = D.cuMemFreeAsync(p, s)) != CUDA_SUCCESS)
    (void)D.cuMemFree(p);
  if (s) {
    (void)D.cuStreamSynchronize(s);
    (void)D.cuStreamDestroy(s);
  }
  if (r != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_DEBUG, "warming the stream-ordered free: CUresult %d", (int)r);
}

static CUresult cuda_init(int ordinal, call_snapshot_t *snap) {
  CUresult r;
  int least = 0, greatest = 0;

  if ((r = load_driver()) != CUDA_SUCCESS)
    return r;
  if ((r = D.cuInit(0)) != CUDA_SUCCESS || (r = D.cuDeviceGet(&device, ordinal)) != CUDA_SUCCESS)
    return r;
  if ((r = D.cuDevicePrimaryCtxRetain(&ctx, device)) != CUDA_SUCCESS ||
      (r = D.cuCtxSetCurrent(ctx)) != CUDA_SUCCESS)
    return r;
  memset(snap, 0, sizeof(*snap));
  if ((r = D.cuDeviceGetName(snap->name, sizeof(snap->name), device)) != CUDA_SUCCESS)
    return r;
  CUuuid u;
  if ((r = D.cuDeviceGetUuid(&u, device)) != CUDA_SUCCESS)
    return r;
  memcpy(snap->uuid, u.bytes, 16);
  size_t total = 0;
  if ((r = D.cuDeviceTotalMem(&total, device)) != CUDA_SUCCESS)
    return r;
  snap->total_mem = total;
  snap->primary_ctx = (uint64_t)(uintptr_t)ctx;
  for (int a = 1; a < CALL_ATTR_MAX && a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
    int v = 0;
    /* Attributes this driver does not know stay 0, as the real answer would be an error. */
    if (D.cuDeviceGetAttribute(&v, (CUdevice_attribute)a, device) == CUDA_SUCCESS)
      snap->attr[a] = v;
  }
  host_ptr_direct = snap->attr[CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM] == 1;
  params_init();
  if ((r = D.cuCtxGetStreamPriorityRange(&least, &greatest)) != CUDA_SUCCESS)
    return r;
  snap->prio_least = least;
  snap->prio_greatest = greatest;
  snap->ident_s39 = ident_slot39(ctx);
  hostd__log(HOSTD_LOG_DEBUG, "private table 21318c60 slot 39: %d", (int)snap->ident_s39);
  blaslt_layout_read();
  free_async_warm();
  return CUDA_SUCCESS;
}

static void cuda_shutdown(void) {
  params_close();
  if (ctx)
    (void)D.cuDevicePrimaryCtxRelease(device);
  ctx = NULL;
}

/* Makes the primary context current on the calling thread.  ctx is written
 * only by init and shutdown, while no request runs. */
static CUresult cuda_thread_enter(void) {
  CUresult r = D.cuCtxSetCurrent(ctx);
  if (r != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_INFO, "cuCtxSetCurrent(%p) on a worker thread: %d", (void *)ctx, (int)r);
  return r;
}

static CUresult cuda_mem_alloc(uint64_t *p, uint64_t size) {
  CUdeviceptr d = 0;
  CUresult r = D.cuMemAlloc(&d, size);
  *p = d;
  return r;
}

static CUresult cuda_mem_free(uint64_t p) {
  return D.cuMemFree(p);
}

static CUresult cuda_mem_info(uint64_t *f, uint64_t *t) {
  size_t a = 0, b = 0;
  CUresult r = D.cuMemGetInfo(&a, &b);
  *f = a;
  *t = b;
  return r;
}

#define S(s) ((CUstream)(uintptr_t)(s))
#define E(e) ((CUevent)(uintptr_t)(e))

/* Pageable source: cuMemcpyHtoDAsync stages it before returning, so the
 * caller may free src at once (CUDA programming guide, "Asynchronous
 * concurrent execution": copies from pageable memory are synchronous with
 * respect to the host until staged). */
static CUresult cuda_htod(uint64_t dst, const void *src, size_t n, uint64_t s, int async) {
  CUresult r = D.cuMemcpyHtoDAsync(dst, src, n, S(s));
  if (r == CUDA_SUCCESS && !async)
    r = D.cuStreamSynchronize(S(s));
  return r;
}

static CUresult cuda_dtoh(void *dst, uint64_t src, size_t n, uint64_t s) {
  CUresult r = D.cuMemcpyDtoHAsync(dst, src, n, S(s));
  if (r == CUDA_SUCCESS)
    r = D.cuStreamSynchronize(S(s));
  return r;
}

static CUresult cuda_dtod(uint64_t dst, uint64_t src, size_t n, uint64_t s, int async) {
  CUresult r = D.cuMemcpyDtoDAsync(dst, src, n, S(s));
  if (r == CUDA_SUCCESS && !async)
    r = D.cuStreamSynchronize(S(s));
  return r;
}

static CUresult cuda_memset(uint64_t p, uint32_t v, uint32_t elem, size_t count, uint64_t s) {
  switch (elem) {
  case 1:
    return D.cuMemsetD8Async(p, (unsigned char)v, count, S(s));
  case 2:
    return D.cuMemsetD16Async(p, (unsigned short)v, count, S(s));
  case 4:
    return D.cuMemsetD32Async(p, v, count, S(s));
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

static CUresult cuda_stream_new(uint64_t *s, unsigned flags, int prio) {
  CUstream st = NULL;
  CUresult r = D.cuStreamCreateWithPriority(&st, flags | CU_STREAM_NON_BLOCKING, prio);
  *s = (uint64_t)(uintptr_t)st;
  return r;
}

static CUresult cuda_stream_del(uint64_t s) {
  return D.cuStreamDestroy(S(s));
}
static CUresult cuda_stream_sync(uint64_t s) {
  return D.cuStreamSynchronize(S(s));
}
static CUresult cuda_stream_query(uint64_t s) {
  return D.cuStreamQuery(S(s));
}
static CUresult cuda_stream_wait(uint64_t s, uint64_t e, unsigned flags) {
  return D.cuStreamWaitEvent(S(s), E(e), flags);
}

static CUresult cuda_event_new(uint64_t *e, unsigned flags) {
  CUevent ev = NULL;
  CUresult r = D.cuEventCreate(&ev, flags);
  *e = (uint64_t)(uintptr_t)ev;
  return r;
}

static CUresult cuda_event_del(uint64_t e) {
  return D.cuEventDestroy(E(e));
}
static CUresult cuda_event_record(uint64_t e, uint64_t s, unsigned flags) {
  return D.cuEventRecordWithFlags(E(e), S(s), flags);
}
static CUresult cuda_event_sync(uint64_t e) {
  return D.cuEventSynchronize(E(e));
}
static CUresult cuda_event_query(uint64_t e) {
  return D.cuEventQuery(E(e));
}
static CUresult cuda_event_time(float *ms, uint64_t a, uint64_t b) {
  return D.cuEventElapsedTime(ms, E(a), E(b));
}

static CUresult cuda_module_load(uint64_t *h, int kind, const void *image, size_t len) {
  CUresult r;
  (void)len;
  if (kind == 0) {
    CUmodule m = NULL;
    r = D.cuModuleLoadData(&m, image);
    *h = (uint64_t)(uintptr_t)m;
  } else {
    CUlibrary l = NULL;
    r = D.cuLibraryLoadData(&l, image, NULL, NULL, 0, NULL, NULL, 0);
    *h = (uint64_t)(uintptr_t)l;
  }
  return r;
}

static CUresult cuda_module_unload(uint64_t h, int kind) {
  return kind == 0 ? D.cuModuleUnload((CUmodule)(uintptr_t)h)
                   : D.cuLibraryUnload((CUlibrary)(uintptr_t)h);
}

/* Attribute attr of a function (kind 0) or a library's kernel, as the
 * driver answers it now (a lazily loaded function may not be able to). */
static CUresult func_attr_once(uint64_t f, int kind, int attr, int *v) {
  return kind == 0 ? D.cuFuncGetAttribute(v, (CUfunction_attribute)attr, (CUfunction)(uintptr_t)f)
                   : D.cuKernelGetAttribute(v, (CUfunction_attribute)attr, (CUkernel)(uintptr_t)f,
                                            device);
}

/* Where describing a module's functions spends its time, kept only under
 * --log-level debug (the module-load line says the whole; this says which
 * driver queries: names, parameter layouts or attributes). */
typedef struct {
  uint64_t name_ns, params_ns, attrs_ns;
} describe_cost_t;

static uint64_t describe_clock(const describe_cost_t *c) {
  return c ? hostd__mono_ns() : 0;
}

/* Describes one function or kernel and hands it to cb (adding its query
 * times to *cost when cost is not NULL). */
static CUresult describe(uint64_t h, int kind, bool attrs, hostd_func_cb cb, void *arg,
                         describe_cost_t *cost) {
  hostd_func_info_t fi;
  uint32_t off[CALL_MAX_PARAMS], size[CALL_MAX_PARAMS];
  const char *name = NULL;
  uint64_t t0 = describe_clock(cost), t1, t2;
  CUresult r;

  memset(&fi, 0, sizeof(fi));
  fi.handle = h;
  r = kind == 0 ? D.cuFuncGetName(&name, (CUfunction)(uintptr_t)h)
                : D.cuKernelGetName(&name, (CUkernel)(uintptr_t)h);
  if (r != CUDA_SUCCESS)
    return r;
  fi.name = name;
  t1 = describe_clock(cost);
  for (uint32_t i = 0; i < CALL_MAX_PARAMS; i++) {
    size_t o = 0, s = 0;
    r = kind == 0 ? D.cuFuncGetParamInfo((CUfunction)(uintptr_t)h, i, &o, &s)
                  : D.cuKernelGetParamInfo((CUkernel)(uintptr_t)h, i, &o, &s);
    if (r != CUDA_SUCCESS)
      break; /* CUDA_ERROR_INVALID_VALUE past the last parameter */
    off[i] = (uint32_t)o;
    size[i] = (uint32_t)s;
    fi.nparams = i + 1;
  }
  t2 = describe_clock(cost);
  for (int a = 0; attrs && a < CALL_FUNC_ATTRS; a++) {
    int v = 0;
    if (func_attr_once(h, kind, a, &v) == CUDA_SUCCESS) {
      fi.attr[a] = v;
      fi.attr_valid |= 1u << a;
    }
  }
  if (cost) {
    cost->name_ns += t1 - t0;
    cost->params_ns += t2 - t1;
    cost->attrs_ns += describe_clock(cost) - t2;
  }
  fi.off = off;
  fi.size = size;
  return cb(arg, &fi) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

static CUresult cuda_module_functions(uint64_t h, int kind, bool attrs, hostd_func_cb cb,
                                      void *arg) {
  describe_cost_t c = {0, 0, 0}, *cost = hostd__log_level >= HOSTD_LOG_DEBUG ? &c : NULL;
  unsigned int n = 0;
  void **list;
  CUresult r;

  r = kind == 0 ? D.cuModuleGetFunctionCount(&n, (CUmodule)(uintptr_t)h)
                : D.cuLibraryGetKernelCount(&n, (CUlibrary)(uintptr_t)h);
  if (r != CUDA_SUCCESS)
    return r;
  list = calloc(n ? n : 1, sizeof(void *));
  if (!list)
    return CUDA_ERROR_OUT_OF_MEMORY;
  r = kind == 0 ? D.cuModuleEnumerateFunctions((CUfunction *)list, n, (CUmodule)(uintptr_t)h)
                : D.cuLibraryEnumerateKernels((CUkernel *)list, n, (CUlibrary)(uintptr_t)h);
  for (unsigned i = 0; r == CUDA_SUCCESS && i < n; i++)
    r = describe((uint64_t)(uintptr_t)list[i], kind, attrs, cb, arg, cost);
  free(list);
  if (cost && r == CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_DEBUG,
               "%s %016llx: %u functions described: names %llu us, parameter layouts %llu us, "
               "attributes %llu us",
               kind == 0 ? "module" : "library", (unsigned long long)h, n,
               (unsigned long long)(c.name_ns / 1000), (unsigned long long)(c.params_ns / 1000),
               (unsigned long long)(c.attrs_ns / 1000));
  return r;
}

static CUresult cuda_module_global(uint64_t h, int kind, const char *name, uint64_t *p,
                                   uint64_t *size) {
  CUdeviceptr d = 0;
  size_t s = 0;
  CUresult r = kind == 0 ? D.cuModuleGetGlobal(&d, &s, (CUmodule)(uintptr_t)h, name)
                         : D.cuLibraryGetGlobal(&d, &s, (CUlibrary)(uintptr_t)h, name);
  *p = d;
  *size = s;
  return r;
}

static CUresult cuda_library_module(uint64_t lib, uint64_t *mod) {
  CUmodule m = NULL;
  CUresult r = D.cuLibraryGetModule(&m, (CUlibrary)(uintptr_t)lib);
  *mod = (uint64_t)(uintptr_t)m;
  return r;
}

static const char *cuda_error_name(CUresult r) {
  const char *name = NULL;
  return D.cuGetErrorName && D.cuGetErrorName(r, &name) == CUDA_SUCCESS ? name : NULL;
}

/* ---- arguments as an array of pointers (TALLYD_LAUNCH_PARAMS=array) ----
 * A launch's arguments reach tallyd as the packed image of the kernel's
 * parameters the guest made, and cuda_launch hands the driver that buffer
 * (CU_LAUNCH_PARAM_BUFFER_POINTER), where cudart gives it an array of
 * pointers (kernelParams).  With TALLYD_LAUNCH_PARAMS=array in tallyd's
 * environment it gives an array too, of pointers into the same buffer at
 * the offsets cuFuncGetParamInfo reports (asked once per function, kept in
 * params_map under params_lock): a diagnostic, to compare the two ways on
 * the GPU.  A function the driver cannot describe, or whose parameters do
 * not fit the buffer, keeps the buffer.  Graph kernel nodes made
 * explicitly keep the buffer either way. */
typedef struct param_offs {
  uint32_t n;
  uint32_t off[];
} param_offs_t;

static bool params_array; /* read at init, before any launch */
static pthread_mutex_t params_lock = PTHREAD_MUTEX_INITIALIZER;
static u64map_t params_map; /* CUfunction -> param_offs_t *, or 1: keep the buffer */

static void params_init(void) {
  const char *env = getenv("TALLYD_LAUNCH_PARAMS");
  params_array = env && strcmp(env, "array") == 0;
  if (params_array)
    hostd__log(HOSTD_LOG_INFO, "launches pass their arguments as an array of pointers "
                               "(TALLYD_LAUNCH_PARAMS=array)");
}

static void params_close(void) {
  pthread_mutex_lock(&params_lock);
  for (size_t i = 0; i < params_map.cap; i++)
    if (params_map.keys[i] && params_map.vals[i] > 1)
      free((void *)(uintptr_t)params_map.vals[i]);
  u64map_close(&params_map);
  pthread_mutex_unlock(&params_lock);
}

/* Parameter i of f, a function or a library's kernel launched as one. */
static CUresult param_info(CUfunction f, bool kernel, uint32_t i, size_t *o, size_t *sz) {
  return kernel ? D.cuKernelGetParamInfo((CUkernel)f, i, o, sz)
                : D.cuFuncGetParamInfo(f, i, o, sz);
}

/* Function f's parameter offsets, described on first use; NULL: keep the buffer. */
static const param_offs_t *params_of(CUfunction f, size_t argbytes) {
  uint64_t v = 0;
  param_offs_t *p = NULL;
  uint32_t n = 0;
  pthread_mutex_lock(&params_lock);
  if (!u64map_get(&params_map, (uint64_t)(uintptr_t)f, &v)) {
    size_t o = 0, sz = 0;
    bool kernel = D.cuFuncGetParamInfo(f, 0, &o, &sz) != CUDA_SUCCESS;
    while (n < CALL_MAX_PARAMS && param_info(f, kernel, n, &o, &sz) == CUDA_SUCCESS)
      n++;
    if (n > 0 && (p = malloc(sizeof(*p) + n * sizeof(p->off[0])))) {
      p->n = n;
      for (uint32_t i = 0; i < n; i++)
        if (param_info(f, kernel, i, &o, &sz) != CUDA_SUCCESS || o + sz > argbytes ||
            o > UINT32_MAX) {
          free(p);
          p = NULL;
          break;
        } else {
          p->off[i] = (uint32_t)o;
        }
    }
    v = p ? (uint64_t)(uintptr_t)p : 1;
    if (u64map_put(&params_map, (uint64_t)(uintptr_t)f, v) != 0) { /* no memory: not kept */
      free(p);
      v = 1;
    }
    hostd__log(HOSTD_LOG_DEBUG, "launch arguments of function %p: %s (%u parameters)", (void *)f,
               v > 1 ? "an array of pointers" : "the buffer", n);
  }
  pthread_mutex_unlock(&params_lock);
  return v > 1 ? (const param_offs_t *)(uintptr_t)v : NULL;
}

static CUresult cuda_launch(uint64_t f, const uint32_t grid[3], const uint32_t block[3],
                            uint32_t shmem, uint64_t s, const CUlaunchAttribute *attrs,
                            uint32_t nattr, void *args, size_t argbytes) {
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, args, CU_LAUNCH_PARAM_BUFFER_SIZE, &argbytes,
                   CU_LAUNCH_PARAM_END};
  void **kp = NULL, *kpbuf[64];
  const param_offs_t *po;
  CUlaunchConfig c;
  CUresult r;
  if (params_array && argbytes && (po = params_of((CUfunction)(uintptr_t)f, argbytes))) {
    if (po->n > sizeof(kpbuf) / sizeof(kpbuf[0]) && !(kp = malloc(po->n * sizeof(*kp))))
      return CUDA_ERROR_OUT_OF_MEMORY;
    if (!kp)
      kp = kpbuf;
    for (uint32_t i = 0; i < po->n; i++)
      kp[i] = (uint8_t *)args + po->off[i];
  }
  /* Without attributes, the plain entry point: no launch config for the
   * driver to walk on the path every launch of a kernel chain takes. */
  if (nattr == 0) {
    r = D.cuLaunchKernel((CUfunction)(uintptr_t)f, grid[0], grid[1], grid[2], block[0], block[1],
                         block[2], shmem, S(s), kp, kp || !argbytes ? NULL : extra);
    if (kp != kpbuf)
      free(kp);
    return r;
  }
  memset(&c, 0, sizeof(c));
  c.gridDimX = grid[0], c.gridDimY = grid[1], c.gridDimZ = grid[2];
  c.blockDimX = block[0], c.blockDimY = block[1], c.blockDimZ = block[2];
  c.sharedMemBytes = shmem;
  c.hStream = S(s);
  c.attrs = (CUlaunchAttribute *)attrs;
  c.numAttrs = nattr;
  r = D.cuLaunchKernelEx(&c, (CUfunction)(uintptr_t)f, kp, kp || !argbytes ? NULL : extra);
  if (kp != kpbuf)
    free(kp);
  return r;
}

/* Loads a lazily loaded function (a kernel through its function in the
 * current context). */
static CUresult func_load(uint64_t f, int kind) {
  CUfunction fn = (CUfunction)(uintptr_t)f;
  CUresult r;
  if (kind != 0 && (r = D.cuKernelGetFunction(&fn, (CUkernel)(uintptr_t)f)) != CUDA_SUCCESS)
    return r;
  return D.cuFuncLoad(fn);
}

static CUresult cuda_func_attr(uint64_t f, int kind, int attr, int *v) {
  CUresult r = func_attr_once(f, kind, attr, v);
  if (r != CUDA_ERROR_FUNCTION_NOT_LOADED)
    return r;
  if ((r = func_load(f, kind)) != CUDA_SUCCESS)
    return r;
  return func_attr_once(f, kind, attr, v);
}

static CUresult func_set_attr_once(uint64_t f, int kind, int attr, int v) {
  return kind == 0 ? D.cuFuncSetAttribute((CUfunction)(uintptr_t)f, (CUfunction_attribute)attr, v)
                   : D.cuKernelSetAttribute((CUfunction_attribute)attr, v, (CUkernel)(uintptr_t)f,
                                            device);
}

/* cuda.h documents FUNCTION_NOT_LOADED for queries only; handled here too. */
static CUresult cuda_func_set_attr(uint64_t f, int kind, int attr, int v) {
  CUresult r = func_set_attr_once(f, kind, attr, v);
  if (r != CUDA_ERROR_FUNCTION_NOT_LOADED)
    return r;
  if ((r = func_load(f, kind)) != CUDA_SUCCESS)
    return r;
  return func_set_attr_once(f, kind, attr, v);
}

static CUresult cuda_func_cache(uint64_t f, int kind, int config) {
  return kind == 0 ? D.cuFuncSetCacheConfig((CUfunction)(uintptr_t)f, (CUfunc_cache)config)
                   : D.cuKernelSetCacheConfig((CUkernel)(uintptr_t)f, (CUfunc_cache)config, device);
}

/* A library's CUkernel is asked through its function in the current context. */
static CUresult cuda_occupancy(uint64_t f, int kind, int which, const CUlaunchConfig *cfg, int *v) {
  CUfunction fn = (CUfunction)(uintptr_t)f;
  CUresult r;
  if (kind != 0 && (r = D.cuKernelGetFunction(&fn, (CUkernel)(uintptr_t)f)) != CUDA_SUCCESS)
    return r;
  if (which == HOSTD_OCC_BLOCKS_PER_SM)
    return D.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        v, fn, (int)(cfg->blockDimX * cfg->blockDimY * cfg->blockDimZ), cfg->sharedMemBytes);
  return which == 0 ? D.cuOccupancyMaxActiveClusters(v, fn, cfg)
                    : D.cuOccupancyMaxPotentialClusterSize(v, fn, cfg);
}

/* The worker's current context is the shared one (thread_enter). */
static CUresult cuda_ctx_limit_get(int limit, uint64_t *v) {
  size_t n = 0;
  CUresult r = D.cuCtxGetLimit(&n, (CUlimit)limit);
  *v = n;
  return r;
}

static CUresult cuda_ctx_limit_set(int limit, uint64_t v) {
  return D.cuCtxSetLimit((CUlimit)limit, (size_t)v);
}

/* ---- host-function gates ----
 * A gate is nslots u32 words of pinned, device-mapped host memory, and as
 * many reach words after them (host_fn's word: cuStreamWriteValue32 of the
 * slot's value before the trampoline, which a poller reads).  A host
 * function becomes cuLaunchHostFunc(trampoline) + cuStreamWaitValue32(word
 * >= value, GEQ: a slot's values only grow, hostd/hostfn.c): the stream is
 * held by the GPU's front end, no driver thread blocks, and opening the gate
 * is one store from the loop thread.  Where
 * stream memory operations are refused (probed once at the first gate), or
 * with TALLYD_HOSTFN_GATE=block in the environment, the trampoline itself
 * waits on a condition variable until the word is set: correct, but it
 * holds the driver's callback thread, so other tenants' host functions
 * wait behind this one. */
typedef struct cuda_gate {
  volatile uint32_t *words;
  CUdeviceptr dptr;
  uint32_t n;
  pthread_mutex_t mu; /* with cv: the blocking fallback */
  pthread_cond_t cv;
} cuda_gate_t;

typedef struct tramp {
  hostd_reached_cb reached;
  void *arg;
  cuda_gate_t *g;
  uint32_t slot, value;
} tramp_t;

/* 0 unknown, 1 cuStreamWaitValue32, 2 blocking trampolines; written by the
 * first gate_new (worker thread) under gate_mode_lock. */
static int gate_mode;
static pthread_mutex_t gate_mode_lock = PTHREAD_MUTEX_INITIALIZER;

static int probe_gate_mode(cuda_gate_t *g) {
  const char *env = getenv("TALLYD_HOSTFN_GATE");
  CUstream st = NULL;
  CUresult r;
  if (env && strcmp(env, "block") == 0)
    return 2;
  if (D.cuStreamCreateWithPriority(&st, CU_STREAM_NON_BLOCKING, 0) != CUDA_SUCCESS)
    return 2;
  /* The word is 0: a wait for >= 0 completes at once when the driver takes it. */
  r = D.cuStreamWaitValue32(st, g->dptr, 0, CU_STREAM_WAIT_VALUE_GEQ);
  if (r == CUDA_SUCCESS)
    r = D.cuStreamSynchronize(st);
  (void)D.cuStreamDestroy(st);
  hostd__log(HOSTD_LOG_INFO, "host functions: %s (probe %d)",
             r == CUDA_SUCCESS ? "cuStreamWaitValue32 gates" : "blocking callbacks", (int)r);
  return r == CUDA_SUCCESS ? 1 : 2;
}

static CUresult cuda_gate_new(void **out, uint32_t nslots) {
  cuda_gate_t *g = calloc(1, sizeof(*g));
  void *p = NULL;
  CUresult r;
  if (!g)
    return CUDA_ERROR_OUT_OF_MEMORY;
  r = D.cuMemHostAlloc(&p, (size_t)nslots * 8,
                       CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r == CUDA_SUCCESS)
    r = D.cuMemHostGetDevicePointer(&g->dptr, p, 0);
  if (r != CUDA_SUCCESS) {
    if (p)
      (void)D.cuMemFreeHost(p);
    free(g);
    return r;
  }
  memset(p, 0, (size_t)nslots * 8);
  g->words = p;
  g->n = nslots;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  pthread_mutex_lock(&gate_mode_lock);
  if (gate_mode == 0)
    gate_mode = probe_gate_mode(g);
  pthread_mutex_unlock(&gate_mode_lock);
  *out = g;
  return CUDA_SUCCESS;
}

static void cuda_gate_del(void *gp, int gpu) {
  cuda_gate_t *g = gp;
  if (!g)
    return;
  /* The context died (a fault): a driver thread may still run a trampoline
   * that names g, and tallyd re-executes itself soon (hostd/README.md): leak it. */
  if (!gpu)
    return;
  (void)D.cuMemFreeHost((void *)g->words);
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

/* Whether the word at w holds value or a later one (a slot's values only
 * grow, wrapping: hostfn.c). */
static bool word_passed(const volatile uint32_t *w, uint32_t value) {
  return (int32_t)(__atomic_load_n(w, __ATOMIC_ACQUIRE) - value) >= 0;
}

/* The driver's host function: tells hostfn.c, then (fallback) waits. */
static void CUDA_CB trampoline(void *arg) {
  tramp_t *t = arg;
  cuda_gate_t *g = t->g;
  uint32_t slot = t->slot, value = t->value;
  int block = __atomic_load_n(&gate_mode, __ATOMIC_RELAXED) == 2;
  t->reached(t->arg, value);
  free(t);
  if (!block)
    return;
  pthread_mutex_lock(&g->mu);
  while (!word_passed(&g->words[slot], value))
    pthread_cond_wait(&g->cv, &g->mu);
  pthread_mutex_unlock(&g->mu);
}

static CUresult cuda_host_fn(uint64_t s, void *gp, uint32_t slot, uint32_t value,
                             hostd_reached_cb reached, void *arg, int *word) {
  cuda_gate_t *g = gp;
  tramp_t *t = malloc(sizeof(*t));
  CUresult r;
  if (!t)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (slot >= g->n) {
    free(t);
    return CUDA_ERROR_INVALID_VALUE;
  }
  /* The reach word: where stream memory operations work (gate mode 1); a
   * refusal leaves the driver's callback alone to tell. */
  if (*word)
    *word = gate_mode == 1 && D.cuStreamWriteValue32(S(s), g->dptr + 4u * (g->n + slot), value,
                                                      0) == CUDA_SUCCESS;
  *t = (tramp_t){reached, arg, g, slot, value};
  r = D.cuLaunchHostFunc(S(s), trampoline, t);
  if (r != CUDA_SUCCESS) {
    free(t);
    return r;
  }
  if (gate_mode == 1)
    r = D.cuStreamWaitValue32(S(s), g->dptr + 4u * slot, value, CU_STREAM_WAIT_VALUE_GEQ);
  /* On failure the trampoline still runs (and t is its own): the function
   * is then not gated, and the error surfaces as the op's deferred error. */
  return r;
}

static bool cuda_gate_reached(void *gp, uint32_t slot, uint32_t value) {
  const cuda_gate_t *g = gp;
  return g && slot < g->n && word_passed(&g->words[g->n + slot], value);
}

static void cuda_gate_open(void *gp, uint32_t slot, uint32_t value) {
  cuda_gate_t *g = gp;
  if (!g || slot >= g->n)
    return;
  pthread_mutex_lock(&g->mu);
  __atomic_store_n(&g->words[slot], value, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&g->cv);
  pthread_mutex_unlock(&g->mu);
}

/* ---- pinned host memory a guest shared ---- */

static CUresult cuda_dtoh_async(void *dst, uint64_t src, size_t n, uint64_t s) {
  return D.cuMemcpyDtoHAsync(dst, src, n, S(s));
}

static CUresult cuda_host_register(void *p, size_t n) {
  return D.cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
}

static CUresult cuda_host_unregister(void *p) {
  return D.cuMemHostUnregister(p);
}

/* ---- the best-effort partition: one green context, made on first use ----
 * Made under part_lock by the first worker that asks; never destroyed
 * before the process ends (streams of it may live as long as tallyd). */
static pthread_mutex_t part_lock = PTHREAD_MUTEX_INITIALIZER;
static CUgreenCtx part;
static CUcontext part_ctx;
static uint32_t part_sms;

/* One group of at least sms SMs from all, split with flags. */
static CUresult part_split(CUdevResource *got, CUdevResource *all, unsigned flags, uint32_t sms) {
  CUdevResource rest;
  unsigned n = 1;
  CUresult r = D.cuDevSmResourceSplitByCount(got, &n, all, &rest, flags, sms);
  return r == CUDA_SUCCESS && n != 1 ? CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION : r;
}

/* The group is asked to host the largest clusters the device allows
 * (compute capability 9.0 and later; Hopper's library GEMMs launch
 * clusters, which a group made without it refused on the H200); where that
 * split is refused, the default one.  A launch it still cannot host runs on
 * the whole GPU (hostd/sched.c, issue_whole). */
static CUresult part_make(uint32_t sms) {
  CUdevResource all, got;
  CUdevResourceDesc desc;
  bool clusters = true;
  CUresult r = D.cuDeviceGetDevResource(device, &all, CU_DEV_RESOURCE_TYPE_SM);
  if (r == CUDA_SUCCESS &&
      part_split(&got, &all, CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE, sms) !=
          CUDA_SUCCESS) {
    clusters = false;
    r = part_split(&got, &all, 0, sms);
  }
  if (r == CUDA_SUCCESS)
    r = D.cuDevResourceGenerateDesc(&desc, &got, 1);
  if (r == CUDA_SUCCESS)
    r = D.cuGreenCtxCreate(&part, desc, device, CU_GREEN_CTX_DEFAULT_STREAM);
  if (r == CUDA_SUCCESS)
    r = D.cuCtxFromGreenCtx(&part_ctx, part);
  if (r != CUDA_SUCCESS) {
    hostd__log(HOSTD_LOG_WARN, "best-effort partition of %u SMs: CUresult %d; using the whole GPU",
               sms, (int)r);
    return r;
  }
  part_sms = got.sm.smCount;
  hostd__log(HOSTD_LOG_INFO, "best-effort partition: a green context of %u of %u SMs%s", part_sms,
             all.sm.smCount, clusters ? ", grouped for the largest clusters" : "");
  return CUDA_SUCCESS;
}

static CUresult cuda_part_stream_new(uint64_t *s, int prio, uint32_t sms, uint32_t *got) {
  CUstream st = NULL;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&part_lock);
  if (!part)
    r = part_make(sms);
  pthread_mutex_unlock(&part_lock);
  if (r != CUDA_SUCCESS)
    return r;
  r = D.cuGreenCtxStreamCreate(&st, part, CU_STREAM_NON_BLOCKING, prio);
  *s = (uint64_t)(uintptr_t)st;
  *got = part_sms;
  return r;
}

/* Once per synchronisation of a tenant that uses it: where the device
 * reaches registered host memory at the CPU's address (host_ptr_direct,
 * read at init) no lookup is made. */
static CUresult cuda_stream_write64(uint64_t s, void *host, uint64_t value) {
  CUdeviceptr d = (CUdeviceptr)(uintptr_t)host;
  CUresult r = host_ptr_direct ? CUDA_SUCCESS : D.cuMemHostGetDevicePointer(&d, host, 0);
  return r != CUDA_SUCCESS ? r : D.cuStreamWriteValue64((CUstream)(uintptr_t)s, d, value, 0);
}

static CUresult cuda_word_write(uint64_t p, uint32_t v, uint64_t s) {
  return D.cuStreamWriteValue32(S(s), (CUdeviceptr)p, v, 0);
}

static CUresult cuda_part_event_new(uint64_t *e, unsigned flags) {
  CUevent ev = NULL;
  CUcontext prev;
  CUresult r;
  if (!part_ctx)
    return CUDA_ERROR_INVALID_CONTEXT;
  if ((r = D.cuCtxPushCurrent(part_ctx)) != CUDA_SUCCESS)
    return r;
  r = D.cuEventCreate(&ev, flags);
  (void)D.cuCtxPopCurrent(&prev);
  *e = (uint64_t)(uintptr_t)ev;
  return r;
}

/* ---- virtual memory management and pools ---- */

/* The driver's properties for p: pinned memory on the served device. */
static CUmemAllocationProp alloc_prop(const hostd_mem_prop_t *p) {
  CUmemAllocationProp a;
  memset(&a, 0, sizeof(a));
  a.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  a.requestedHandleTypes = (CUmemAllocationHandleType)p->handle_types;
  a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  a.location.id = device;
  a.allocFlags.compressionType = (unsigned char)p->compression;
  a.allocFlags.gpuDirectRDMACapable = (unsigned char)p->rdma;
  a.allocFlags.usage = (unsigned short)p->usage;
  return a;
}

static CUresult cuda_mem_granularity(uint64_t *g, const hostd_mem_prop_t *p, int option) {
  CUmemAllocationProp a = alloc_prop(p);
  size_t v = 0;
  CUresult r = D.cuMemGetAllocationGranularity(&v, &a, (CUmemAllocationGranularity_flags)option);
  *g = v;
  return r;
}

static CUresult cuda_mem_create(uint64_t *h, uint64_t size, const hostd_mem_prop_t *p) {
  CUmemAllocationProp a = alloc_prop(p);
  CUmemGenericAllocationHandle v = 0;
  CUresult r = D.cuMemCreate(&v, size, &a, 0);
  *h = v;
  return r;
}

static CUresult cuda_mem_release(uint64_t h) {
  return D.cuMemRelease(h);
}

static CUresult cuda_mem_reserve(uint64_t *p, uint64_t size, uint64_t align, uint64_t hint) {
  CUdeviceptr v = 0;
  CUresult r = D.cuMemAddressReserve(&v, size, align, hint, 0);
  *p = v;
  return r;
}

static CUresult cuda_mem_unreserve(uint64_t p, uint64_t size) {
  return D.cuMemAddressFree(p, size);
}

static CUresult cuda_mem_map(uint64_t p, uint64_t size, uint64_t off, uint64_t h) {
  return D.cuMemMap(p, size, off, h, 0);
}

static CUresult cuda_mem_unmap(uint64_t p, uint64_t size) {
  return D.cuMemUnmap(p, size);
}

static CUresult cuda_mem_set_access(uint64_t p, uint64_t size, unsigned flags) {
  CUmemAccessDesc d;
  memset(&d, 0, sizeof(d));
  d.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  d.location.id = device;
  d.flags = (CUmemAccess_flags)flags;
  return D.cuMemSetAccess(p, size, &d, 1);
}

static CUresult cuda_mem_retain(uint64_t *h, uint64_t p) {
  CUmemGenericAllocationHandle v = 0;
  CUresult r = D.cuMemRetainAllocationHandle(&v, (void *)(uintptr_t)p);
  *h = v;
  return r;
}

static CUresult cuda_pool_new(uint64_t *pool, const hostd_mem_prop_t *p, uint64_t max_size) {
  CUmemPoolProps pp;
  CUmemoryPool v = NULL;
  CUresult r;
  memset(&pp, 0, sizeof(pp));
  pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  pp.handleTypes = (CUmemAllocationHandleType)p->handle_types;
  pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  pp.location.id = device;
  pp.maxSize = max_size;
  r = D.cuMemPoolCreate(&v, &pp);
  *pool = (uint64_t)(uintptr_t)v;
  return r;
}

static CUresult cuda_pool_del(uint64_t pool) {
  return D.cuMemPoolDestroy((CUmemoryPool)(uintptr_t)pool);
}

/* The first three attributes are ints, the rest cuuint64_t (cuda.h). */
static CUresult cuda_pool_attr(uint64_t pool, int attr, int set, uint64_t *v) {
  CUmemoryPool mp = (CUmemoryPool)(uintptr_t)pool;
  int iv = (int)*v;
  cuuint64_t uv = *v;
  void *val = attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES ? (void *)&iv : (void *)&uv;
  CUresult r = set ? D.cuMemPoolSetAttribute(mp, (CUmemPool_attribute)attr, val)
                   : D.cuMemPoolGetAttribute(mp, (CUmemPool_attribute)attr, val);
  *v = val == (void *)&iv ? (uint64_t)(int64_t)iv : uv;
  return r;
}

static CUresult cuda_pool_trim(uint64_t pool, uint64_t keep) {
  return D.cuMemPoolTrimTo((CUmemoryPool)(uintptr_t)pool, keep);
}

static CUresult cuda_mem_alloc_async(uint64_t *p, uint64_t size, uint64_t pool, uint64_t s) {
  CUdeviceptr v = 0;
  CUresult r = D.cuMemAllocFromPoolAsync(&v, size, (CUmemoryPool)(uintptr_t)pool,
                                         (CUstream)(uintptr_t)s);
  *p = v;
  return r;
}

static CUresult cuda_mem_free_async(uint64_t p, uint64_t s) {
  return D.cuMemFreeAsync(p, (CUstream)(uintptr_t)s);
}

/* Inputs -> one cubin through the driver's JIT linker, for the context
 * current on this thread (the primary one).  The driver's error log is
 * logged, prefixed with what: whose link it was. */
static CUresult link_inputs(const hostd_link_input_t *in, size_t k, void **image,
                            size_t *image_len, const char *what) {
  char errlog[2048] = "";
  CUjit_option opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *val[2] = {errlog, (void *)(uintptr_t)sizeof(errlog)};
  CUlinkState ls = NULL;
  void *cubin = NULL;
  size_t n = 0;
  CUresult r = D.cuLinkCreate(2, opt, val, &ls);
  *image = NULL;
  if (r != CUDA_SUCCESS)
    return r;
  for (size_t i = 0; i < k && r == CUDA_SUCCESS; i++)
    r = D.cuLinkAddData(ls, (CUjitInputType)in[i].type, (void *)in[i].data, in[i].len,
                        in[i].name, 0, NULL, NULL);
  if (r == CUDA_SUCCESS)
    r = D.cuLinkComplete(ls, &cubin, &n);
  if (r == CUDA_SUCCESS && !(*image = malloc(n ? n : 1)))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    memcpy(*image, cubin, n); /* cubin belongs to the link state */
    *image_len = n;
  } else if (errlog[0]) {
    hostd__log(HOSTD_LOG_WARN, "%s: the driver's linker refused: %.400s", what, errlog);
  }
  (void)D.cuLinkDestroy(ls);
  return r;
}

static CUresult cuda_jit(const char *ptx, size_t len, void **image, size_t *image_len) {
  hostd_link_input_t in = {CU_JIT_INPUT_PTX, ptx, len + 1, "tally-variants"};
  return link_inputs(&in, 1, image, image_len, "variants: a transformed module");
}

static CUresult cuda_link(const hostd_link_input_t *in, size_t n, void **image,
                          size_t *image_len) {
  return link_inputs(in, n, image, image_len, "a tenant's cuLinkComplete");
}


/* ---- stream capture and graphs ---- */

#define G(g)  ((CUgraph)(uintptr_t)(g))
#define GN(n) ((CUgraphNode)(uintptr_t)(n))
#define GE(e) ((CUgraphExec)(uintptr_t)(e))

static CUresult cuda_capture_begin(uint64_t s, int mode, uint64_t graph, const uint64_t *deps,
                                   size_t ndeps) {
  if (!graph)
    return D.cuStreamBeginCapture(S(s), (CUstreamCaptureMode)mode);
  return D.cuStreamBeginCaptureToGraph(S(s), G(graph), (const CUgraphNode *)deps, NULL, ndeps,
                                       (CUstreamCaptureMode)mode);
}

static CUresult cuda_capture_end(uint64_t s, uint64_t *graph) {
  CUgraph g = NULL;
  CUresult r = D.cuStreamEndCapture(S(s), &g);
  *graph = (uint64_t)(uintptr_t)g;
  return r;
}

static CUresult cuda_capture_info(uint64_t s, int *status, uint64_t *id, uint64_t *graph,
                                  uint64_t *deps, size_t cap, size_t *ndeps) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t cid = 0;
  CUgraph g = NULL;
  const CUgraphNode *d = NULL;
  size_t n = 0;
  CUresult r = D.cuStreamGetCaptureInfo(S(s), &st, &cid, &g, &d, NULL, &n);
  *status = (int)st;
  *id = cid;
  *graph = (uint64_t)(uintptr_t)g;
  *ndeps = n;
  for (size_t i = 0; r == CUDA_SUCCESS && i < n && i < cap; i++)
    deps[i] = (uint64_t)(uintptr_t)d[i];
  return r;
}

static CUresult cuda_capture_mode(int *mode) {
  CUstreamCaptureMode m = (CUstreamCaptureMode)*mode;
  CUresult r = D.cuThreadExchangeStreamCaptureMode(&m);
  *mode = (int)m;
  return r;
}

static CUresult cuda_graph_new(uint64_t *g) {
  CUgraph v = NULL;
  CUresult r = D.cuGraphCreate(&v, 0);
  *g = (uint64_t)(uintptr_t)v;
  return r;
}

static CUresult cuda_graph_del(uint64_t g) {
  return D.cuGraphDestroy(G(g));
}

static void kernel_params(CUDA_KERNEL_NODE_PARAMS *k, const hostd_gnode_t *n, void **extra) {
  memset(k, 0, sizeof(*k));
  if (n->fkind == 0)
    k->func = (CUfunction)(uintptr_t)n->handle;
  else
    k->kern = (CUkernel)(uintptr_t)n->handle, k->ctx = ctx;
  k->gridDimX = n->grid[0], k->gridDimY = n->grid[1], k->gridDimZ = n->grid[2];
  k->blockDimX = n->block[0], k->blockDimY = n->block[1], k->blockDimZ = n->block[2];
  k->sharedMemBytes = n->shmem;
  k->extra = n->argbytes ? extra : NULL;
}

/* A MEMCPY node's copy: 1-D, each side device memory or host memory (a
 * tenant's shared pinned memory, mapped and registered here at its address). */
static void memcpy_params(CUDA_MEMCPY3D *c, const hostd_gnode_t *n) {
  memset(c, 0, sizeof(*c));
  c->srcMemoryType = n->src_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  c->dstMemoryType = n->dst_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  if (n->src_host)
    c->srcHost = (const void *)(uintptr_t)n->src;
  else
    c->srcDevice = n->src;
  if (n->dst_host)
    c->dstHost = (void *)(uintptr_t)n->dst;
  else
    c->dstDevice = n->dst;
  c->WidthInBytes = n->width, c->Height = 1, c->Depth = 1;
}

static void memset_params(CUDA_MEMSET_NODE_PARAMS *m, const hostd_gnode_t *n) {
  memset(m, 0, sizeof(*m));
  m->dst = n->dst, m->pitch = n->pitch, m->value = n->value, m->elementSize = n->elem;
  m->width = n->width, m->height = n->height;
}

/* One node of each kind; deps are the driver's node handles. */
static CUresult cuda_graph_add(uint64_t *node, uint64_t g, const uint64_t *deps, size_t ndeps,
                               const hostd_gnode_t *n) {
  const CUgraphNode *d = (const CUgraphNode *)deps;
  size_t argbytes = n->argbytes;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, n->args, CU_LAUNCH_PARAM_BUFFER_SIZE, &argbytes,
                   CU_LAUNCH_PARAM_END};
  CUDA_KERNEL_NODE_PARAMS k;
  CUDA_MEMCPY3D c;
  CUDA_MEMSET_NODE_PARAMS m;
  CUgraphNode v = NULL;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  _Static_assert(sizeof(CUgraphNode) == sizeof(uint64_t), "node handles travel as u64");
  switch (n->kind) {
  case CALL_GNODE_EMPTY:
    r = D.cuGraphAddEmptyNode(&v, G(g), d, ndeps);
    break;
  case CALL_GNODE_KERNEL:
    kernel_params(&k, n, extra);
    r = D.cuGraphAddKernelNode(&v, G(g), d, ndeps, &k);
    break;
  case CALL_GNODE_MEMCPY:
    memcpy_params(&c, n);
    r = D.cuGraphAddMemcpyNode(&v, G(g), d, ndeps, &c, ctx);
    break;
  case CALL_GNODE_MEMSET:
    memset_params(&m, n);
    r = D.cuGraphAddMemsetNode(&v, G(g), d, ndeps, &m, ctx);
    break;
  case CALL_GNODE_EVENT_REC:
    r = D.cuGraphAddEventRecordNode(&v, G(g), d, ndeps, (CUevent)(uintptr_t)n->handle);
    break;
  case CALL_GNODE_EVENT_WAIT:
    r = D.cuGraphAddEventWaitNode(&v, G(g), d, ndeps, (CUevent)(uintptr_t)n->handle);
    break;
  case CALL_GNODE_CHILD:
    r = D.cuGraphAddChildGraphNode(&v, G(g), d, ndeps, G(n->handle));
    break;
  case CALL_GNODE_MEM_ALLOC: {
    /* Device memory of the served device; the owning device has access. */
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof(a));
    a.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    a.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.poolProps.location.id = device;
    a.bytesize = n->width;
    r = D.cuGraphAddMemAllocNode(&v, G(g), d, ndeps, &a);
    *n->dptr = a.dptr;
    break;
  }
  case CALL_GNODE_MEM_FREE:
    r = D.cuGraphAddMemFreeNode(&v, G(g), d, ndeps, n->dst);
    break;
  default:
    break;
  }
  *node = (uint64_t)(uintptr_t)v;
  return r;
}

static CUresult cuda_graph_deps(uint64_t g, const uint64_t *from, const uint64_t *to, size_t n,
                                int remove) {
  const CUgraphNode *f = (const CUgraphNode *)from, *t = (const CUgraphNode *)to;
  return remove ? D.cuGraphRemoveDependencies(G(g), f, t, NULL, n)
                : D.cuGraphAddDependencies(G(g), f, t, NULL, n);
}

static CUresult cuda_graph_node_del(uint64_t node) {
  return D.cuGraphDestroyNode((CUgraphNode)(uintptr_t)node);
}

static CUresult cuda_graph_instantiate(uint64_t *exec, uint64_t g, uint64_t flags) {
  CUgraphExec e = NULL;
  CUresult r = D.cuGraphInstantiateWithFlags(&e, G(g), flags);
  *exec = (uint64_t)(uintptr_t)e;
  return r;
}

static CUresult cuda_graph_launch(uint64_t exec, uint64_t s, int upload) {
  return upload ? D.cuGraphUpload(GE(exec), S(s)) : D.cuGraphLaunch(GE(exec), S(s));
}

static CUresult cuda_graph_exec_del(uint64_t exec) {
  return D.cuGraphExecDestroy(GE(exec));
}

static CUresult cuda_graph_exec_update(uint64_t exec, uint64_t g, int *result,
                                       uint64_t *error_node) {
  CUgraphExecUpdateResultInfo info;
  CUresult r;
  memset(&info, 0, sizeof(info));
  r = D.cuGraphExecUpdate(GE(exec), G(g), &info);
  *result = (int)info.result;
  *error_node = (uint64_t)(uintptr_t)info.errorNode;
  return r;
}

/* Node's parameters from n: in exec (graph_exec_set), or with exec 0 in
 * its graph (graph_set; no child graph there). */
static CUresult node_set(uint64_t exec, uint64_t node, const hostd_gnode_t *n) {
  size_t argbytes = n->argbytes;
  void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, n->args, CU_LAUNCH_PARAM_BUFFER_SIZE, &argbytes,
                   CU_LAUNCH_PARAM_END};
  CUevent ev = (CUevent)(uintptr_t)n->handle;
  CUDA_KERNEL_NODE_PARAMS k;
  CUDA_MEMCPY3D c;
  CUDA_MEMSET_NODE_PARAMS m;
  switch (n->kind) {
  case CALL_GNODE_KERNEL:
    kernel_params(&k, n, extra);
    return exec ? D.cuGraphExecKernelNodeSetParams(GE(exec), GN(node), &k)
                : D.cuGraphKernelNodeSetParams(GN(node), &k);
  case CALL_GNODE_CHILD:
    return exec ? D.cuGraphExecChildGraphNodeSetParams(GE(exec), GN(node), G(n->handle))
                : CUDA_ERROR_INVALID_VALUE;
  case CALL_GNODE_MEMCPY:
    memcpy_params(&c, n);
    return exec ? D.cuGraphExecMemcpyNodeSetParams(GE(exec), GN(node), &c, ctx)
                : D.cuGraphMemcpyNodeSetParams(GN(node), &c);
  case CALL_GNODE_MEMSET:
    memset_params(&m, n);
    return exec ? D.cuGraphExecMemsetNodeSetParams(GE(exec), GN(node), &m, ctx)
                : D.cuGraphMemsetNodeSetParams(GN(node), &m);
  case CALL_GNODE_EVENT_REC:
    return exec ? D.cuGraphExecEventRecordNodeSetEvent(GE(exec), GN(node), ev)
                : D.cuGraphEventRecordNodeSetEvent(GN(node), ev);
  case CALL_GNODE_EVENT_WAIT:
    return exec ? D.cuGraphExecEventWaitNodeSetEvent(GE(exec), GN(node), ev)
                : D.cuGraphEventWaitNodeSetEvent(GN(node), ev);
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

static CUresult cuda_graph_exec_set(uint64_t exec, uint64_t node, const hostd_gnode_t *n) {
  return exec ? node_set(exec, node, n) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult cuda_graph_set(uint64_t node, const hostd_gnode_t *n) {
  return node_set(0, node, n);
}

static CUresult cuda_graph_mem(uint32_t what, uint32_t attr, uint64_t *value) {
  cuuint64_t v = *value;
  CUresult r;
  switch (what) {
  case 0:
    return D.cuDeviceGraphMemTrim(device);
  case 1:
    r = D.cuDeviceGetGraphMemAttribute(device, (CUgraphMem_attribute)attr, &v);
    *value = v;
    return r;
  default:
    return D.cuDeviceSetGraphMemAttribute(device, (CUgraphMem_attribute)attr, &v);
  }
}

static CUresult cuda_graph_clone(uint64_t *clone, uint64_t g) {
  CUgraph c = NULL;
  CUresult r = D.cuGraphClone(&c, G(g));
  *clone = (uint64_t)(uintptr_t)c;
  return r;
}

static CUresult cuda_graph_find(uint64_t *out, uint64_t node, uint64_t clone) {
  CUgraphNode n = NULL;
  CUresult r = D.cuGraphNodeFindInClone(&n, GN(node), G(clone));
  *out = (uint64_t)(uintptr_t)n;
  return r;
}

/* A kernel node's parameters packed at their offsets into n->args (cap
 * bytes): from its array of pointers (each parameter as the driver
 * describes the function), or from the buffer it was given. */
static CUresult kernel_args_of(const CUDA_KERNEL_NODE_PARAMS *k, hostd_gnode_t *n, size_t cap) {
  CUfunction f = k->func ? k->func : (CUfunction)k->kern;
  bool kernel = !k->func;
  size_t o = 0, sz = 0;
  const void *buf = NULL;
  n->argbytes = 0;
  if (k->kernelParams) {
    for (uint32_t i = 0; i < CALL_MAX_PARAMS && param_info(f, kernel, i, &o, &sz) == CUDA_SUCCESS;
         i++) {
      if (o > cap || sz > cap - o)
        return CUDA_ERROR_INVALID_VALUE;
      memcpy((uint8_t *)n->args + o, k->kernelParams[i], sz);
      if (o + sz > n->argbytes)
        n->argbytes = o + sz;
    }
    return CUDA_SUCCESS;
  }
  for (void **e = k->extra; e && *e != CU_LAUNCH_PARAM_END; e += 2) {
    if (e[0] == CU_LAUNCH_PARAM_BUFFER_POINTER)
      buf = e[1];
    else if (e[0] == CU_LAUNCH_PARAM_BUFFER_SIZE && e[1])
      n->argbytes = *(const size_t *)e[1];
  }
  if (n->argbytes > cap || (n->argbytes && !buf))
    return CUDA_ERROR_INVALID_VALUE;
  if (n->argbytes)
    memcpy(n->args, buf, n->argbytes);
  return CUDA_SUCCESS;
}

static CUresult cuda_graph_node(uint64_t node, int *type, hostd_gnode_t *n, size_t cap) {
  CUgraphNodeType t;
  CUDA_KERNEL_NODE_PARAMS k;
  CUDA_MEMSET_NODE_PARAMS m;
  CUevent ev = NULL;
  CUresult r = D.cuGraphNodeGetType(GN(node), &t);
  n->kind = CALL_GNODE_KINDS;
  if (r != CUDA_SUCCESS)
    return r;
  *type = (int)t;
  switch (t) {
  case CU_GRAPH_NODE_TYPE_EMPTY:
    n->kind = CALL_GNODE_EMPTY;
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_KERNEL:
    memset(&k, 0, sizeof(k));
    if ((r = D.cuGraphKernelNodeGetParams(GN(node), &k)) != CUDA_SUCCESS ||
        (r = kernel_args_of(&k, n, cap)) != CUDA_SUCCESS)
      return r;
    n->kind = CALL_GNODE_KERNEL;
    n->fkind = k.func ? 0 : 1;
    n->handle = k.func ? (uint64_t)(uintptr_t)k.func : (uint64_t)(uintptr_t)k.kern;
    n->grid[0] = k.gridDimX, n->grid[1] = k.gridDimY, n->grid[2] = k.gridDimZ;
    n->block[0] = k.blockDimX, n->block[1] = k.blockDimY, n->block[2] = k.blockDimZ;
    n->shmem = k.sharedMemBytes;
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEMSET:
    memset(&m, 0, sizeof(m));
    if ((r = D.cuGraphMemsetNodeGetParams(GN(node), &m)) != CUDA_SUCCESS)
      return r;
    n->kind = CALL_GNODE_MEMSET;
    n->dst = m.dst, n->pitch = m.pitch, n->value = m.value, n->elem = m.elementSize;
    n->width = m.width, n->height = m.height;
    return CUDA_SUCCESS;
  case CU_GRAPH_NODE_TYPE_MEMCPY: {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof(c));
    if ((r = D.cuGraphMemcpyNodeGetParams(GN(node), &c)) != CUDA_SUCCESS)
      return r;
    bool dh = c.dstMemoryType == CU_MEMORYTYPE_HOST, sh = c.srcMemoryType == CU_MEMORYTYPE_HOST;
    if (c.Height <= 1 && c.Depth <= 1 && !c.srcY && !c.dstY && !c.srcZ && !c.dstZ &&
        c.dstMemoryType != CU_MEMORYTYPE_ARRAY && c.srcMemoryType != CU_MEMORYTYPE_ARRAY) {
      n->kind = CALL_GNODE_MEMCPY, n->width = c.WidthInBytes;
      n->dst = (dh ? (uint64_t)(uintptr_t)c.dstHost : c.dstDevice) + c.dstXInBytes;
      n->src = (sh ? (uint64_t)(uintptr_t)c.srcHost : c.srcDevice) + c.srcXInBytes;
      n->elem = (dh ? 1u : 0u) | (sh ? 2u : 0u);
    }
    return CUDA_SUCCESS;
  }
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof(a));
    if ((r = D.cuGraphMemAllocNodeGetParams(GN(node), &a)) == CUDA_SUCCESS)
      n->kind = CALL_GNODE_MEM_ALLOC, n->dst = a.dptr, n->width = a.bytesize;
    return r;
  }
  case CU_GRAPH_NODE_TYPE_MEM_FREE: {
    CUdeviceptr p = 0;
    if ((r = D.cuGraphMemFreeNodeGetParams(GN(node), &p)) == CUDA_SUCCESS)
      n->kind = CALL_GNODE_MEM_FREE, n->dst = p;
    return r;
  }
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    r = t == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? D.cuGraphEventRecordNodeGetEvent(GN(node), &ev)
                                             : D.cuGraphEventWaitNodeGetEvent(GN(node), &ev);
    if (r == CUDA_SUCCESS) {
      n->kind = t == CU_GRAPH_NODE_TYPE_EVENT_RECORD ? CALL_GNODE_EVENT_REC : CALL_GNODE_EVENT_WAIT;
      n->handle = (uint64_t)(uintptr_t)ev;
    }
    return r;
  default:
    return CUDA_SUCCESS; /* the type alone */
  }
}

_Static_assert(sizeof(CUkernelNodeAttrValue) == CALL_ATTR_VALUE_SIZE, "attribute value size");

static CUresult cuda_graph_attr(uint64_t node, uint64_t src, uint32_t what, uint32_t attr,
                                void *value) {
  switch (what) {
  case 0:
    return D.cuGraphKernelNodeGetAttribute(GN(node), (CUkernelNodeAttrID)attr, value);
  case 1:
    return D.cuGraphKernelNodeSetAttribute(GN(node), (CUkernelNodeAttrID)attr, value);
  default:
    return D.cuGraphKernelNodeCopyAttributes(GN(node), GN(src));
  }
}

static CUresult cuda_capture_deps(uint64_t s, const uint64_t *deps, size_t n, int set) {
  return D.cuStreamUpdateCaptureDependencies(
      S(s), (CUgraphNode *)(uintptr_t)deps, NULL, n,
      set ? CU_STREAM_SET_CAPTURE_DEPENDENCIES : CU_STREAM_ADD_CAPTURE_DEPENDENCIES);
}

static CUresult cuda_graph_enable(uint64_t exec, uint64_t node, int set, unsigned *enabled) {
  return set ? D.cuGraphNodeSetEnabled(GE(exec), GN(node), *enabled)
             : D.cuGraphNodeGetEnabled(GE(exec), GN(node), enabled);
}

/* ---- a graph's host functions: a host node and a wait node per function ---- */

/* What a graph's host node runs until its exec is armed (never, as hostd
 * arms every launch). */
static void CUDA_CB unarmed(void *arg) {
  (void)arg;
}

/* A batch of one wait: gate word slot >= value. */
static void gate_wait(CUstreamBatchMemOpParams *op, CUDA_BATCH_MEM_OP_NODE_PARAMS *bp,
                      const cuda_gate_t *g, uint32_t slot, uint32_t value) {
  memset(op, 0, sizeof(*op));
  op->waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  op->waitValue.address = g->dptr + 4u * slot;
  op->waitValue.value = value;
  op->waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
  memset(bp, 0, sizeof(*bp));
  bp->ctx = ctx, bp->count = 1, bp->paramArray = op;
}

static CUresult cuda_graph_add_host(uint64_t *rnode, uint64_t *wnode, uint64_t g,
                                    const uint64_t *deps, size_t ndeps, void *gp) {
  CUDA_HOST_NODE_PARAMS hp = {.fn = unarmed, .userData = NULL};
  CUstreamBatchMemOpParams op;
  CUDA_BATCH_MEM_OP_NODE_PARAMS bp;
  CUgraphNode r = NULL, w = NULL;
  CUresult res = D.cuGraphAddHostNode(&r, G(g), (const CUgraphNode *)deps, ndeps, &hp);
  if (res == CUDA_SUCCESS && gate_mode == 1) {
    gate_wait(&op, &bp, gp, 0, 0); /* the word is >= 0: passes until armed */
    res = D.cuGraphAddBatchMemOpNode(&w, G(g), &r, 1, &bp);
  }
  *rnode = (uint64_t)(uintptr_t)r;
  *wnode = (uint64_t)(uintptr_t)w;
  return res;
}

/* The node a capturing stream's last call added. */
static CUresult captured_last(uint64_t s, uint64_t *node) {
  uint64_t id, g;
  size_t n = 0;
  int st;
  CUresult r = cuda_capture_info(s, &st, &id, &g, node, 1, &n);
  if (r == CUDA_SUCCESS && n != 1)
    r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (r != CUDA_SUCCESS)
    *node = 0;
  return r;
}

static CUresult cuda_capture_host(uint64_t s, void *gp, uint64_t *rnode, uint64_t *wnode) {
  cuda_gate_t *g = gp;
  CUresult r = D.cuLaunchHostFunc(S(s), unarmed, NULL);
  *wnode = 0;
  if (r == CUDA_SUCCESS)
    r = captured_last(s, rnode);
  if (r == CUDA_SUCCESS && gate_mode == 1 &&
      (r = D.cuStreamWaitValue32(S(s), g->dptr, 0, CU_STREAM_WAIT_VALUE_GEQ)) == CUDA_SUCCESS)
    r = captured_last(s, wnode);
  return r;
}

/* The trampoline's record is the exec's until the node runs (it frees it);
 * one armed for a launch that then fails is lost (a few bytes). */
static CUresult cuda_graph_exec_host(uint64_t exec, uint64_t rnode, uint64_t wnode, void *gp,
                                     uint32_t slot, uint32_t value, hostd_reached_cb cb,
                                     void *arg) {
  cuda_gate_t *g = gp;
  tramp_t *t = malloc(sizeof(*t));
  CUDA_HOST_NODE_PARAMS hp;
  CUstreamBatchMemOpParams op;
  CUDA_BATCH_MEM_OP_NODE_PARAMS bp;
  CUresult r;
  if (!t)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (!g || slot >= g->n) {
    free(t);
    return CUDA_ERROR_INVALID_VALUE;
  }
  *t = (tramp_t){cb, arg, g, slot, value};
  hp = (CUDA_HOST_NODE_PARAMS){.fn = trampoline, .userData = t};
  if ((r = D.cuGraphExecHostNodeSetParams(GE(exec), GN(rnode), &hp)) != CUDA_SUCCESS) {
    free(t);
    return r;
  }
  if (gate_mode == 1 && wnode) {
    gate_wait(&op, &bp, g, slot, value);
    r = D.cuGraphExecBatchMemOpNodeSetParams(GE(exec), GN(wnode), &bp);
  }
  return r;
}

static CUresult cuda_graph_list(uint64_t g, uint32_t which, uint64_t node, CUgraphNode *out,
                                size_t *n) {
  switch (which) {
  case CALL_GNODES_ALL:
    return D.cuGraphGetNodes(G(g), out, n);
  case CALL_GNODES_ROOTS:
    return D.cuGraphGetRootNodes(G(g), out, n);
  case CALL_GNODES_DEPS:
    return D.cuGraphNodeGetDependencies(GN(node), out, NULL, n);
  case CALL_GNODES_DEPENDENTS:
    return D.cuGraphNodeGetDependentNodes(GN(node), out, NULL, n);
  }
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult cuda_graph_nodes(uint64_t g, uint32_t which, uint64_t node, uint64_t *nodes,
                                 size_t cap, size_t *total) {
  CUresult r = cuda_graph_list(g, which, node, NULL, total);
  size_t n = cap < *total ? cap : *total;
  if (r == CUDA_SUCCESS && n)
    r = cuda_graph_list(g, which, node, (CUgraphNode *)nodes, &n);
  return r;
}

/* The driver writes DOT only to a path: a private temporary file, read
 * back and removed.  CUDA_ERROR_OPERATING_SYSTEM when the file cannot be
 * made or read. */
static CUresult cuda_graph_dot(uint64_t g, uint32_t flags, char **text, size_t *len) {
  const char *dir = getenv("TMPDIR");
  char path[4096];
  CUresult r = CUDA_ERROR_OPERATING_SYSTEM;
  FILE *f = NULL;
  long n;
  int fd;
  *text = NULL;
  *len = 0;
  snprintf(path, sizeof(path), "%s/tallyd-graph-XXXXXX", dir && *dir ? dir : "/tmp");
  if ((fd = mkstemp(path)) < 0)
    return r;
  close(fd);
  if ((r = D.cuGraphDebugDotPrint(G(g), path, flags)) == CUDA_SUCCESS) {
    r = CUDA_ERROR_OPERATING_SYSTEM;
    if ((f = fopen(path, "rb")) && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
        fseek(f, 0, SEEK_SET) == 0 && (*text = malloc(n ? (size_t)n : 1)) &&
        fread(*text, 1, (size_t)n, f) == (size_t)n) {
      *len = (size_t)n;
      r = CUDA_SUCCESS;
    }
  }
  if (f)
    fclose(f);
  unlink(path);
  if (r != CUDA_SUCCESS) {
    free(*text);
    *text = NULL;
  }
  return r;
}

/* ---- CUDA arrays, texture and surface objects ---- */

#define A(a) ((CUarray)(uintptr_t)(a))

static CUresult cuda_array_new(uint64_t *a, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  CUarray h = NULL;
  CUresult r = D.cuArray3DCreate(&h, d);
  *a = (uint64_t)(uintptr_t)h;
  return r;
}

static CUresult cuda_array_del(uint64_t a) {
  return D.cuArrayDestroy(A(a));
}

static void copy_side(const hostd_copy_side_t *sd, CUmemorytype *t, const void **host,
                      CUdeviceptr *dev, CUarray *arr, size_t *x, size_t *y, size_t *z,
                      size_t *pitch, size_t *height) {
  *t = sd->kind == CALL_SIDE_HOST     ? CU_MEMORYTYPE_HOST
       : sd->kind == CALL_SIDE_DEVICE ? CU_MEMORYTYPE_DEVICE
                                      : CU_MEMORYTYPE_ARRAY;
  *host = sd->host;
  *dev = sd->kind == CALL_SIDE_DEVICE ? (CUdeviceptr)sd->handle : 0;
  *arr = sd->kind == CALL_SIDE_ARRAY ? A(sd->handle) : NULL;
  *x = sd->x, *y = sd->y, *z = sd->z;
  *pitch = sd->kind == CALL_SIDE_ARRAY ? 0 : sd->pitch;
  *height = sd->kind == CALL_SIDE_ARRAY ? 0 : sd->height;
}

/* Pageable host memory: the driver stages a source before returning and
 * completes a copy into it before returning (as cuda_htod, cuda_dtoh), so
 * the request's and reply's bytes may go once this returns. */
static CUresult cuda_array_copy(const hostd_copy_side_t *src, const hostd_copy_side_t *dst,
                                uint64_t width, uint64_t height, uint64_t depth, uint64_t s,
                                int async) {
  CUDA_MEMCPY3D c;
  const void *unused;
  CUresult r;
  memset(&c, 0, sizeof(c));
  copy_side(src, &c.srcMemoryType, &c.srcHost, &c.srcDevice, &c.srcArray, &c.srcXInBytes, &c.srcY,
            &c.srcZ, &c.srcPitch, &c.srcHeight);
  copy_side(dst, &c.dstMemoryType, &unused, &c.dstDevice, &c.dstArray, &c.dstXInBytes, &c.dstY,
            &c.dstZ, &c.dstPitch, &c.dstHeight);
  c.dstHost = dst->host;
  c.WidthInBytes = width, c.Height = height, c.Depth = depth;
  r = D.cuMemcpy3DAsync(&c, S(s));
  if (r == CUDA_SUCCESS && (!async || dst->kind == CALL_SIDE_HOST))
    r = D.cuStreamSynchronize(S(s));
  return r;
}

static CUresult cuda_tex_new(uint64_t *t, const CUDA_RESOURCE_DESC *res,
                             const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view) {
  CUtexObject o = 0;
  CUresult r = D.cuTexObjectCreate(&o, res, tex, view);
  *t = (uint64_t)o;
  return r;
}

static CUresult cuda_tex_del(uint64_t t) {
  return D.cuTexObjectDestroy((CUtexObject)t);
}

static CUresult cuda_surf_new(uint64_t *sf, uint64_t a) {
  CUDA_RESOURCE_DESC res;
  CUsurfObject o = 0;
  CUresult r;
  memset(&res, 0, sizeof(res));
  res.resType = CU_RESOURCE_TYPE_ARRAY;
  res.res.array.hArray = A(a);
  r = D.cuSurfObjectCreate(&o, &res);
  *sf = (uint64_t)o;
  return r;
}

static CUresult cuda_surf_del(uint64_t sf) {
  return D.cuSurfObjectDestroy((CUsurfObject)sf);
}

_Static_assert(sizeof(CUtensorMap) == CALL_TMAP_BYTES, "TENSOR_MAP map (call.def)");

static CUresult cuda_tensor_map(uint8_t map[CALL_TMAP_BYTES], const call_tensor_map_req_t *q) {
  CUtensorMap m;
  CUresult r;
  CUtensorMapDataType t = (CUtensorMapDataType)q->dtype;
  CUtensorMapInterleave il = (CUtensorMapInterleave)q->interleave;
  CUtensorMapSwizzle sw = (CUtensorMapSwizzle)q->swizzle;
  CUtensorMapL2promotion l2 = (CUtensorMapL2promotion)q->l2promo;
  CUtensorMapFloatOOBfill oob = (CUtensorMapFloatOOBfill)q->oobfill;
  void *addr = (void *)(uintptr_t)q->addr;
  const cuuint64_t *dims = (const cuuint64_t *)q->dims, *strides = (const cuuint64_t *)q->strides;
  memset(&m, 0, sizeof(m));
  switch (q->kind) {
  case CALL_TMAP_TILED:
    r = D.cuTensorMapEncodeTiled(&m, t, q->rank, addr, dims, strides, q->box, q->estrides, il, sw,
                                 l2, oob);
    break;
  case CALL_TMAP_IM2COL:
    r = D.cuTensorMapEncodeIm2col(&m, t, q->rank, addr, dims, strides, q->lower, q->upper,
                                  q->channels, q->pixels, q->estrides, il, sw, l2, oob);
    break;
  case CALL_TMAP_IM2COL_WIDE:
    r = D.cuTensorMapEncodeIm2colWide(&m, t, q->rank, addr, dims, strides, q->lower[0], q->upper[0],
                                      q->channels, q->pixels, q->estrides, il,
                                      (CUtensorMapIm2ColWideMode)q->mode, sw, l2, oob);
    break;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  memcpy(map, &m, sizeof(m));
  return r;
}

static CUresult cuda_tensor_map_addr(uint8_t map[CALL_TMAP_BYTES], uint64_t addr) {
  CUtensorMap m;
  CUresult r;
  memcpy(&m, map, sizeof(m));
  r = D.cuTensorMapReplaceAddress(&m, (void *)(uintptr_t)addr);
  memcpy(map, &m, sizeof(m));
  return r;
}

const hostd_gpu_ops_t hostd__gpu = {
    .name = "cuda",
    .init = cuda_init,
    .shutdown = cuda_shutdown,
    .error_name = cuda_error_name,
    .thread_enter = cuda_thread_enter,
    .mem_alloc = cuda_mem_alloc,
    .mem_free = cuda_mem_free,
    .mem_info = cuda_mem_info,
    .htod = cuda_htod,
    .dtoh = cuda_dtoh,
    .dtod = cuda_dtod,
    .memset = cuda_memset,
    .stream_new = cuda_stream_new,
    .stream_del = cuda_stream_del,
    .stream_sync = cuda_stream_sync,
    .stream_query = cuda_stream_query,
    .stream_wait = cuda_stream_wait,
    .event_new = cuda_event_new,
    .event_del = cuda_event_del,
    .event_record = cuda_event_record,
    .event_sync = cuda_event_sync,
    .event_query = cuda_event_query,
    .event_time = cuda_event_time,
    .module_load = cuda_module_load,
    .module_unload = cuda_module_unload,
    .module_functions = cuda_module_functions,
    .module_global = cuda_module_global,
    .library_module = cuda_library_module,
    .launch = cuda_launch,
    .func_attr = cuda_func_attr,
    .func_set_attr = cuda_func_set_attr,
    .func_cache = cuda_func_cache,
    .occupancy = cuda_occupancy,
    .ctx_limit_get = cuda_ctx_limit_get,
    .ctx_limit_set = cuda_ctx_limit_set,
    .blaslt_layout = cuda_blaslt_layout,
    .gate_new = cuda_gate_new,
    .gate_del = cuda_gate_del,
    .host_fn = cuda_host_fn,
    .gate_reached = cuda_gate_reached,
    .gate_open = cuda_gate_open,
    .dtoh_async = cuda_dtoh_async,
    .host_register = cuda_host_register,
    .host_unregister = cuda_host_unregister,
    .part_stream_new = cuda_part_stream_new,
    .stream_write64 = cuda_stream_write64,
    .word_write = cuda_word_write,
    .part_event_new = cuda_part_event_new,
    .mem_granularity = cuda_mem_granularity,
    .mem_create = cuda_mem_create,
    .mem_release = cuda_mem_release,
    .mem_reserve = cuda_mem_reserve,
    .mem_unreserve = cuda_mem_unreserve,
    .mem_map = cuda_mem_map,
    .mem_unmap = cuda_mem_unmap,
    .mem_set_access = cuda_mem_set_access,
    .mem_retain = cuda_mem_retain,
    .pool_new = cuda_pool_new,
    .pool_del = cuda_pool_del,
    .pool_attr = cuda_pool_attr,
    .pool_trim = cuda_pool_trim,
    .mem_alloc_async = cuda_mem_alloc_async,
    .mem_free_async = cuda_mem_free_async,
    .jit = cuda_jit,
    .link = cuda_link,
    .capture_begin = cuda_capture_begin,
    .capture_end = cuda_capture_end,
    .capture_info = cuda_capture_info,
    .capture_mode = cuda_capture_mode,
    .graph_new = cuda_graph_new,
    .graph_del = cuda_graph_del,
    .graph_add = cuda_graph_add,
    .graph_deps = cuda_graph_deps,
    .graph_node_del = cuda_graph_node_del,
    .graph_instantiate = cuda_graph_instantiate,
    .graph_launch = cuda_graph_launch,
    .graph_exec_del = cuda_graph_exec_del,
    .graph_exec_update = cuda_graph_exec_update,
    .graph_exec_set = cuda_graph_exec_set,
    .graph_set = cuda_graph_set,
    .graph_mem = cuda_graph_mem,
    .graph_clone = cuda_graph_clone,
    .graph_find = cuda_graph_find,
    .graph_node = cuda_graph_node,
    .graph_enable = cuda_graph_enable,
    .graph_attr = cuda_graph_attr,
    .capture_deps = cuda_capture_deps,
    .graph_add_host = cuda_graph_add_host,
    .capture_host = cuda_capture_host,
    .graph_exec_host = cuda_graph_exec_host,
    .graph_nodes = cuda_graph_nodes,
    .graph_dot = cuda_graph_dot,
    .array_new = cuda_array_new,
    .array_del = cuda_array_del,
    .array_copy = cuda_array_copy,
    .tex_new = cuda_tex_new,
    .tex_del = cuda_tex_del,
    .surf_new = cuda_surf_new,
    .surf_del = cuda_surf_del,
    .tensor_map = cuda_tensor_map,
    .tensor_map_addr = cuda_tensor_map_addr,
};
