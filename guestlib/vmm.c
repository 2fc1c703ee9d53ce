/* vmm.c: virtual memory management, stream-ordered allocation and memory
 * pools, forwarded to tallyd (its VMM and pool handlers).
 *
 * Every request is a round trip except cuMemFreeAsync (a post, in program
 * order): addresses and handles are the driver's own (docs/decisions.md,
 * D2), so the guest must have them when the call returns.  Mapped ranges
 * and stream-ordered allocations join the local allocation table as device
 * memory, so cuMemcpy's direction and pointer attributes are answered as
 * for cuMemAlloc.  Allocation properties are kept per handle here (with
 * the number of references the tenant holds: cuMemCreate and
 * cuMemRetainAllocationHandle add one, cuMemRelease takes one), which
 * answers cuMemGetAllocationPropertiesFromHandle locally.
 *
 * One device is served: every location must name it (device 0 of the
 * tenant).  Pools are the tenant's own on the daemon, the "default" one too;
 * nothing is exported (shareable handles and pointer export are refused:
 * a handle means nothing outside this tenant).
 */
#include "guestlib/guest.h"
#include "wire/u64map.h"

#include <string.h>

/* ---- handle properties: handle -> packed properties | references << 40 ---- */

static pthread_mutex_t props_lock = PTHREAD_MUTEX_INITIALIZER;
static u64map_t props; /* guarded by props_lock */

#define PROP_REF_SHIFT 40

static uint64_t prop_pack(const CUmemAllocationProp *p) {
  return (uint64_t)(p->requestedHandleTypes & 0xff) | (uint64_t)p->allocFlags.compressionType << 8 |
         (uint64_t)p->allocFlags.gpuDirectRDMACapable << 16 | (uint64_t)p->allocFlags.usage << 24;
}

/* Adds d references to h (props: its packed properties when new); an entry
 * with none left is forgotten.  Returns false when h is unknown. */
static bool prop_ref(uint64_t h, int d, uint64_t packed) {
  uint64_t v;
  bool known;
  pthread_mutex_lock(&props_lock);
  known = u64map_get(&props, h, &v);
  if (!known)
    v = packed;
  v += (uint64_t)(int64_t)d << PROP_REF_SHIFT;
  if ((v >> PROP_REF_SHIFT) == 0)
    u64map_del(&props, h);
  else if (u64map_put(&props, h, v) != 0)
    known = false;
  pthread_mutex_unlock(&props_lock);
  return known;
}

/* The served device as a location (one device: ordinal 0 of the tenant). */
static bool loc_ok(const CUmemLocation *l) {
  return l && l->type == CU_MEM_LOCATION_TYPE_DEVICE && l->id >= 0 && l->id < guest__g.ndev;
}

static CUresult prop_check(const CUmemAllocationProp *p) {
  if (!p || p->type != CU_MEM_ALLOCATION_TYPE_PINNED)
    return CUDA_ERROR_INVALID_VALUE;
  return loc_ok(&p->location) ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- virtual memory management ---- */

GUEST_EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const CUmemAllocationProp *p,
                                                    CUmemAllocationGranularity_flags option) {
  call_mem_granularity_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!g)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = prop_check(p)) != CUDA_SUCCESS)
    return r;
  call_mem_granularity_req_t q = {.option = (uint32_t)option,
                                  .handle_types = (uint32_t)p->requestedHandleTypes,
                                  .compression = p->allocFlags.compressionType,
                                  .rdma = p->allocFlags.gpuDirectRDMACapable,
                                  .usage = p->allocFlags.usage};
  if ((r = guest__rpc(CALL_OP_MEM_GRANULARITY, 0, &q, &a)) == CUDA_SUCCESS)
    *g = (size_t)a.granularity;
  return r;
}

GUEST_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size,
                                  const CUmemAllocationProp *p, unsigned long long flags) {
  call_mem_create_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!h || size == 0 || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = prop_check(p)) != CUDA_SUCCESS)
    return r;
  call_mem_create_req_t q = {.size = size,
                             .handle_types = (uint32_t)p->requestedHandleTypes,
                             .compression = p->allocFlags.compressionType,
                             .rdma = p->allocFlags.gpuDirectRDMACapable,
                             .usage = p->allocFlags.usage};
  if ((r = guest__rpc(CALL_OP_MEM_CREATE, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  (void)prop_ref(a.handle, 1, prop_pack(p));
  *h = a.handle;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  call_mem_release_req_t q = {.handle = h};
  CUresult r = guest__ready();
  if (r == CUDA_SUCCESS && (r = guest__rpc(CALL_OP_MEM_RELEASE, 0, &q, NULL)) == CUDA_SUCCESS)
    (void)prop_ref(h, -1, 0);
  return r;
}

GUEST_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *h, void *addr) {
  call_mem_retain_req_t q = {.ptr = (uint64_t)(uintptr_t)addr};
  call_mem_retain_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!h)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__rpc(CALL_OP_MEM_RETAIN, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  (void)prop_ref(a.handle, 1, 0);
  *h = a.handle;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *p,
                                                             CUmemGenericAllocationHandle h) {
  uint64_t v;
  bool known;
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&props_lock);
  known = u64map_get(&props, h, &v);
  pthread_mutex_unlock(&props_lock);
  if (!known)
    return CUDA_ERROR_INVALID_VALUE;
  memset(p, 0, sizeof(*p));
  p->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p->location.id = 0;
  p->requestedHandleTypes = (CUmemAllocationHandleType)(v & 0xff);
  p->allocFlags.compressionType = (unsigned char)(v >> 8);
  p->allocFlags.gpuDirectRDMACapable = (unsigned char)(v >> 16);
  p->allocFlags.usage = (unsigned short)(v >> 24);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align,
                                          CUdeviceptr addr, unsigned long long flags) {
  call_mem_reserve_req_t q = {.size = size, .align = align, .addr = addr, .flags = flags};
  call_mem_reserve_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!ptr)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__rpc(CALL_OP_MEM_RESERVE, 0, &q, &a)) == CUDA_SUCCESS)
    *ptr = a.ptr;
  return r;
}

GUEST_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  call_mem_unreserve_req_t q = {.ptr = ptr, .size = size};
  CUresult r = guest__ready();
  return r != CUDA_SUCCESS ? r : guest__rpc(CALL_OP_MEM_UNRESERVE, 0, &q, NULL);
}

GUEST_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                               CUmemGenericAllocationHandle h, unsigned long long flags) {
  call_mem_map_req_t q = {.ptr = ptr, .size = size, .offset = offset, .handle = h, .flags = flags};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS || (r = guest__rpc(CALL_OP_MEM_MAP, 0, &q, NULL)) != CUDA_SUCCESS)
    return r;
  if (guest__mem_add(ptr, size, GUEST_MEM_DEVICE, 0) != 0) {
    call_mem_unmap_req_t u = {.ptr = ptr, .size = size};
    (void)guest__rpc(CALL_OP_MEM_UNMAP, 0, &u, NULL);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

/* Whole mappings, back to back: each leaves the local table. */
GUEST_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  call_mem_unmap_req_t q = {.ptr = ptr, .size = size};
  CUresult r = guest__ready();
  uint64_t at = ptr, n;
  if (r != CUDA_SUCCESS ||
      (r = guest__rpc(CALL_OP_MEM_UNMAP, CALL_SYNCPOINT, &q, NULL)) != CUDA_SUCCESS)
    return r;
  while (at - ptr < size && guest__mem_del(at, GUEST_MEM_DEVICE, &n) == 0 && n)
    at += n;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                     size_t count) {
  call_mem_set_access_req_t q = {.ptr = ptr, .size = size};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!desc || count == 0)
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) { /* one device: the last word for it wins */
    if (!loc_ok(&desc[i].location))
      return CUDA_ERROR_INVALID_DEVICE;
    q.flags = (uint32_t)desc[i].flags;
  }
  return guest__rpc(CALL_OP_MEM_SET_ACCESS, 0, &q, NULL);
}

/* Sharing with other processes, refused with its reason logged once per
 * call site.  Exports: a tenant's memory lives in tallyd and is its own.
 * Imports: a handle made by another process names memory or an event this
 * tenant does not own (under Tally, another tenant's, or a native process's
 * on another driver), so it is never opened. */
static const char refused_export_why[] =
    "a Tally tenant's memory, pools and events are never exported to other processes";
static const char refused_import_why[] =
    "a Tally tenant opens no memory or event of another process; share through host memory "
    "instead";

static CUresult refused(const char *name, int *logged) {
  return guest__refused(name, refused_export_why, logged);
}

static CUresult refused_import(const char *name, int *logged) {
  return guest__refused(name, refused_import_why, logged);
}

/* ---- CUDA IPC: refused both ways, with the reason logged once each ---- */

GUEST_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *h, CUdeviceptr p) {
  static int logged;
  (void)h, (void)p;
  return refused("cuIpcGetMemHandle", &logged);
}

GUEST_EXPORT CUresult cuIpcGetEventHandle(CUipcEventHandle *h, CUevent e) {
  static int logged;
  (void)h, (void)e;
  return refused("cuIpcGetEventHandle", &logged);
}

static CUresult ipc_open_mem(void) {
  static int logged;
  return refused_import("cuIpcOpenMemHandle", &logged);
}

GUEST_EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
  (void)p, (void)h, (void)flags;
  return ipc_open_mem();
}

GUEST_EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h, unsigned int flags) {
  (void)p, (void)h, (void)flags;
  return ipc_open_mem();
}

GUEST_EXPORT CUresult cuIpcOpenEventHandle(CUevent *e, CUipcEventHandle h) {
  static int logged;
  (void)e, (void)h;
  return refused_import("cuIpcOpenEventHandle", &logged);
}

/* Nothing was ever opened, so nothing can be closed. */
GUEST_EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  (void)p;
  return CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *h, void *os,
                                                     CUmemAllocationHandleType type) {
  static int logged;
  (void)h, (void)os, (void)type;
  return refused_import("cuMemImportFromShareableHandle", &logged);
}

GUEST_EXPORT CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool, void *h,
                                                         CUmemAllocationHandleType type,
                                                         unsigned long long flags) {
  static int logged;
  (void)pool, (void)h, (void)type, (void)flags;
  return refused_import("cuMemPoolImportFromShareableHandle", &logged);
}

GUEST_EXPORT CUresult cuMemPoolImportPointer(CUdeviceptr *p, CUmemoryPool pool,
                                             CUmemPoolPtrExportData *data) {
  static int logged;
  (void)p, (void)pool, (void)data;
  return refused_import("cuMemPoolImportPointer", &logged);
}

GUEST_EXPORT CUresult cuMemExportToShareableHandle(void *out, CUmemGenericAllocationHandle h,
                                                   CUmemAllocationHandleType type,
                                                   unsigned long long flags) {
  static int logged;
  (void)out, (void)h, (void)type, (void)flags;
  return refused("cuMemExportToShareableHandle", &logged);
}

GUEST_EXPORT CUresult cuMemPoolExportToShareableHandle(void *out, CUmemoryPool pool,
                                                       CUmemAllocationHandleType type,
                                                       unsigned long long flags) {
  static int logged;
  (void)out, (void)pool, (void)type, (void)flags;
  return refused("cuMemPoolExportToShareableHandle", &logged);
}

GUEST_EXPORT CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *out, CUdeviceptr ptr) {
  static int logged;
  (void)out, (void)ptr;
  return refused("cuMemPoolExportPointer", &logged);
}

/* ---- stream-ordered allocation ---- */

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, uint64_t s) {
  call_mem_alloc_async_req_t q = {.size = size, .pool = (uint64_t)(uintptr_t)pool, .stream = s};
  call_mem_alloc_async_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!dptr || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__rpc(CALL_OP_MEM_ALLOC_ASYNC, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  if (guest__mem_add(a.ptr, size, GUEST_MEM_DEVICE, 0) != 0) {
    call_mem_free_async_req_t f = {.ptr = a.ptr, .stream = s};
    (void)guest__post(CALL_OP_MEM_FREE_ASYNC, &f);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *dptr = a.ptr;
  return CUDA_SUCCESS;
}

/* A post: the daemon frees it in stream order; an error surfaces at the
 * next synchronising call, as a stream error does. */
static CUresult free_async(CUdeviceptr p, uint64_t s) {
  call_mem_free_async_req_t q = {.ptr = p, .stream = s};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (guest__mem_del(p, GUEST_MEM_DEVICE, NULL) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  return guest__post_cu(CALL_OP_MEM_FREE_ASYNC, &q);
}

GUEST_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t size, CUstream s) {
  return alloc_async(dptr, size, NULL, guest__stream(s, 0));
}
GUEST_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t size, CUstream s) {
  return alloc_async(dptr, size, NULL, guest__stream(s, 1));
}
GUEST_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
                                              CUstream s) {
  return pool ? alloc_async(dptr, size, pool, guest__stream(s, 0)) : CUDA_ERROR_INVALID_VALUE;
}
GUEST_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t size,
                                                   CUmemoryPool pool, CUstream s) {
  return pool ? alloc_async(dptr, size, pool, guest__stream(s, 1)) : CUDA_ERROR_INVALID_VALUE;
}
GUEST_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  return free_async(p, guest__stream(s, 0));
}
GUEST_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
  return free_async(p, guest__stream(s, 1));
}

/* ---- memory pools ---- */

GUEST_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *pp) {
  call_pool_new_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pool || !pp || pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
    return CUDA_ERROR_INVALID_VALUE;
  if (!loc_ok(&pp->location))
    return CUDA_ERROR_NOT_SUPPORTED; /* host pools are not offered */
  call_pool_new_req_t q = {.max_size = pp->maxSize, .handle_types = (uint32_t)pp->handleTypes};
  if ((r = guest__rpc(CALL_OP_POOL_NEW, 0, &q, &a)) == CUDA_SUCCESS)
    *pool = (CUmemoryPool)(uintptr_t)a.pool;
  return r;
}

GUEST_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  call_pool_del_req_t q = {.pool = (uint64_t)(uintptr_t)pool};
  CUresult r = guest__ready();
  return r != CUDA_SUCCESS ? r : guest__rpc(CALL_OP_POOL_DEL, 0, &q, NULL);
}

/* The first three attributes are ints, the others cuuint64_t (cuda.h). */
static CUresult pool_attr(CUmemoryPool pool, CUmemPool_attribute attr, void *value, int set) {
  call_pool_attr_req_t q = {.pool = (uint64_t)(uintptr_t)pool, .attr = (uint32_t)attr, .set = (uint32_t)set};
  call_pool_attr_rep_t a = {0};
  bool is_int = attr <= CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!value)
    return CUDA_ERROR_INVALID_VALUE;
  if (set)
    q.value = is_int ? (uint64_t)(int64_t) * (const int *)value : *(const cuuint64_t *)value;
  if ((r = guest__rpc(CALL_OP_POOL_ATTR, 0, &q, &a)) != CUDA_SUCCESS || set)
    return r;
  if (is_int)
    *(int *)value = (int)a.value;
  else
    *(cuuint64_t *)value = a.value;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                            void *value) {
  return pool_attr(pool, attr, value, 1);
}
GUEST_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                            void *value) {
  return pool_attr(pool, attr, value, 0);
}

GUEST_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  call_pool_trim_req_t q = {.pool = (uint64_t)(uintptr_t)pool, .keep = keep};
  CUresult r = guest__ready();
  return r != CUDA_SUCCESS ? r : guest__rpc(CALL_OP_POOL_TRIM, 0, &q, NULL);
}

/* One device: its pools are readable and writable by it, and by nothing else. */
GUEST_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map,
                                         size_t count) {
  if (!pool || (!map && count))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++)
    if (!loc_ok(&map[i].location) || map[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool pool,
                                         CUmemLocation *loc) {
  if (!flags || !pool || !loc)
    return CUDA_ERROR_INVALID_VALUE;
  *flags = loc_ok(loc) ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

/* which 0: the tenant's default pool, 1: its current one; set: make pool current. */
static CUresult pool_current(CUmemoryPool *out, int which, CUmemoryPool set) {
  call_pool_current_req_t q = {.which = (uint32_t)which, .set = set != NULL,
                               .pool = (uint64_t)(uintptr_t)set};
  call_pool_current_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if ((r = guest__rpc(CALL_OP_POOL_CURRENT, 0, &q, &a)) == CUDA_SUCCESS && out)
    *out = (CUmemoryPool)(uintptr_t)a.pool;
  return r;
}

static bool dev_ok(CUdevice d) {
  return d >= 0 && d < guest__g.ndev;
}

GUEST_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  return dev_ok(dev) ? pool_current(pool, 0, NULL) : CUDA_ERROR_INVALID_DEVICE;
}
GUEST_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  return dev_ok(dev) ? pool_current(pool, 1, NULL) : CUDA_ERROR_INVALID_DEVICE;
}
GUEST_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  return dev_ok(dev) ? pool_current(NULL, 1, pool) : CUDA_ERROR_INVALID_DEVICE;
}

/* The location forms (CUDA 13): device pools of pinned memory only. */
static CUresult loc_pool(const CUmemLocation *loc, CUmemAllocationType type) {
  if (!loc)
    return CUDA_ERROR_INVALID_VALUE;
  return loc_ok(loc) && type == CU_MEM_ALLOCATION_TYPE_PINNED ? CUDA_SUCCESS
                                                              : CUDA_ERROR_NOT_SUPPORTED;
}
GUEST_EXPORT CUresult cuMemGetDefaultMemPool(CUmemoryPool *pool, CUmemLocation *loc,
                                             CUmemAllocationType type) {
  CUresult r = loc_pool(loc, type);
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  return r != CUDA_SUCCESS ? r : pool_current(pool, 0, NULL);
}
GUEST_EXPORT CUresult cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *loc,
                                      CUmemAllocationType type) {
  CUresult r = loc_pool(loc, type);
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  return r != CUDA_SUCCESS ? r : pool_current(pool, 1, NULL);
}
GUEST_EXPORT CUresult cuMemSetMemPool(CUmemLocation *loc, CUmemAllocationType type,
                                      CUmemoryPool pool) {
  CUresult r = loc_pool(loc, type);
  if (!pool)
    return CUDA_ERROR_INVALID_VALUE;
  return r != CUDA_SUCCESS ? r : pool_current(NULL, 1, pool);
}
