/* exec-pool.c: a tenant's stream-ordered allocations and memory pools
 * (cuMemAllocAsync, cuMemFreeAsync, cuMemPoolCreate, ...).
 *
 * Every tenant has pools of its own and never sees another's: "the device's
 * default pool" a tenant asks for (cuDeviceGetDefaultMemPool) is a pool
 * made for it at its first ask, and "the device's current pool"
 * (cuDeviceGetMemPool / SetMemPool) is a per-tenant choice kept here, so
 * one tenant's release threshold, trims or statistics never touch
 * another's memory.  The driver's real default pool is never used.
 *
 * The address of a stream-ordered allocation is known when the request
 * returns: MEM_ALLOC_ASYNC is one round trip (cuMemAllocFromPoolAsync on
 * the tenant's stream, after every earlier request of the tenant), and the
 * allocation joins the range table (RANGE_ASYNC, `module` = its pool), so
 * copies into it are checked as for cuMemAlloc.  It counts against the
 * device-memory quota from its allocation to its free; memory a pool keeps
 * cached after a free is the driver's and not counted.  MEM_FREE_ASYNC is
 * a post: stream-ordered on the driver, forgotten here at once.  On a
 * capturing stream the driver makes an allocation node and a free node
 * instead: the address is the graph's, which allocates and frees it at
 * every replay, so the range (and the charge) lasts from the captured
 * allocation to the captured free, as for any other (the recording device
 * keeps such memory until the last graph or exec holding the free node
 * goes).
 *
 * Invariants: t->pools holds every pool of the tenant (value 2 for its
 * default pool, which cannot be destroyed); pool_cur is 0 or one of them.
 * A destroyed pool's outstanding allocations stay valid until freed (the
 * driver keeps the pool until then).
 */
#include "hostd/guard.h"
#include "hostd/tenant-int.h"

#define POOL_MADE    1
#define POOL_DEFAULT 2

/* The tenant's default pool, made at the first ask. */
static CUresult default_pool(hostd_tenant_t *t, uint64_t *pool) {
  hostd_mem_prop_t p = {0, 0, 0, 0};
  uint64_t h = 0;
  CUresult r;
  if (t->pool_default) {
    *pool = t->pool_default;
    return CUDA_SUCCESS;
  }
  if ((r = hostd__gpu.pool_new(&h, &p, 0)) != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->pools, h, POOL_DEFAULT) != 0) {
    (void)hostd__gpu.pool_del(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pool = t->pool_default = h;
  return CUDA_SUCCESS;
}

/* Resolves a pool value of a request: 0 is the tenant's current pool. */
static CUresult pool_of(hostd_tenant_t *t, uint64_t v, uint64_t *pool) {
  if (v == 0 && t->pool_cur)
    v = t->pool_cur;
  if (v == 0)
    return default_pool(t, pool);
  if (!u64map_get(&t->pools, v, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  *pool = v;
  return CUDA_SUCCESS;
}

CUresult hostd__exec_mem_alloc_async(hostd_tenant_t *t, wire_buf_t *out,
                                     const call_mem_alloc_async_req_t *q) {
  uint64_t pool, p = 0;
  tstream_t *ts;
  CUresult r;
  if (q->size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = pool_of(t, q->pool, &pool)) != CUDA_SUCCESS ||
      (r = hostd__stream_lookup_enter(t, q->stream, &ts)) != CUDA_SUCCESS)
    return r;
  if ((r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_MEM, q->size)) != CUDA_SUCCESS)
    return r;
  r = hostd__gpu.mem_alloc_async(&p, q->size, pool, ts->handle);
  if (r == CUDA_SUCCESS && hostd__range_add(t, p, q->size, RANGE_ASYNC, pool) != 0) {
    (void)hostd__gpu.mem_free_async(p, ts->handle);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) {
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, q->size);
    return r;
  }
  call_mem_alloc_async_rep_t rep = {.ptr = p};
  (void)call_mem_alloc_async_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_mem_free_async(hostd_tenant_t *t, wire_buf_t *out,
                                    const call_mem_free_async_req_t *q) {
  size_t i = hostd__range_upper(t, q->ptr);
  tstream_t *ts;
  CUresult r;
  (void)out;
  if (i == 0 || t->ranges[i - 1].base != q->ptr ||
      (t->ranges[i - 1].kind != RANGE_ASYNC && t->ranges[i - 1].kind != RANGE_ALLOC))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__stream_lookup_enter(t, q->stream, &ts)) != CUDA_SUCCESS)
    return r;
  /* cuMemFreeAsync frees cuMemAlloc memory too, in stream order. */
  if ((r = hostd__gpu.mem_free_async(q->ptr, ts->handle)) != CUDA_SUCCESS)
    return r;
  hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, t->ranges[i - 1].size);
  hostd__range_del_at(t, i - 1);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_pool_new(hostd_tenant_t *t, wire_buf_t *out, const call_pool_new_req_t *q) {
  /* Nothing leaves the process: fabric is accepted and dropped, as for
   * cuMemCreate (exec-vmm.c); the Windows types are refused. */
  hostd_mem_prop_t p = {q->handle_types & ~(uint32_t)CU_MEM_HANDLE_TYPE_FABRIC, 0, 0, 0};
  uint64_t h = 0;
  CUresult r;
  if (p.handle_types & ~(uint32_t)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return CUDA_ERROR_NOT_SUPPORTED;
  if ((r = hostd__gpu.pool_new(&h, &p, q->max_size)) != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->pools, h, POOL_MADE) != 0) {
    (void)hostd__gpu.pool_del(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  call_pool_new_rep_t rep = {.pool = h};
  (void)call_pool_new_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_pool_del(hostd_tenant_t *t, wire_buf_t *out, const call_pool_del_req_t *q) {
  uint64_t kind;
  CUresult r;
  (void)out;
  if (!q->pool || !u64map_get(&t->pools, q->pool, &kind) || kind == POOL_DEFAULT)
    return CUDA_ERROR_INVALID_VALUE; /* the driver refuses to destroy a default pool */
  if ((r = hostd__gpu.pool_del(q->pool)) != CUDA_SUCCESS)
    return r;
  u64map_del(&t->pools, q->pool);
  if (t->pool_cur == q->pool)
    t->pool_cur = 0;
  return CUDA_SUCCESS;
}

CUresult hostd__exec_pool_attr(hostd_tenant_t *t, wire_buf_t *out, const call_pool_attr_req_t *q) {
  uint64_t v = q->value;
  CUresult r;
  if (q->set > 1 || q->attr < CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES ||
      q->attr > CU_MEMPOOL_ATTR_USED_MEM_HIGH || !q->pool || !u64map_get(&t->pools, q->pool, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.pool_attr(q->pool, (int)q->attr, (int)q->set, &v)) != CUDA_SUCCESS)
    return r;
  call_pool_attr_rep_t rep = {.value = v};
  (void)call_pool_attr_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_pool_trim(hostd_tenant_t *t, wire_buf_t *out, const call_pool_trim_req_t *q) {
  (void)out;
  if (!q->pool || !u64map_get(&t->pools, q->pool, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  return hostd__gpu.pool_trim(q->pool, q->keep);
}

CUresult hostd__exec_pool_current(hostd_tenant_t *t, wire_buf_t *out,
                                  const call_pool_current_req_t *q) {
  uint64_t pool = 0;
  CUresult r;
  if (q->which > 1 || q->set > 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (q->set) {
    uint64_t kind;
    if (!q->pool || !u64map_get(&t->pools, q->pool, &kind))
      return CUDA_ERROR_INVALID_VALUE;
    t->pool_cur = kind == POOL_DEFAULT ? 0 : q->pool;
  }
  if (q->which == 1 && t->pool_cur)
    pool = t->pool_cur;
  else if ((r = default_pool(t, &pool)) != CUDA_SUCCESS)
    return r;
  call_pool_current_rep_t rep = {.pool = pool};
  (void)call_pool_current_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

/* Frees every stream-ordered allocation the tenant still holds (its streams
 * are drained: a plain free), then destroys its pools. */
void hostd__pool_release(hostd_tenant_t *t, bool gpu) {
  for (size_t i = 0; gpu && i < t->nranges; i++)
    if (t->ranges[i].kind == RANGE_ASYNC)
      (void)hostd__gpu.mem_free(t->ranges[i].base);
  for (size_t i = 0; gpu && i < t->pools.cap; i++)
    if (t->pools.keys[i])
      (void)hostd__gpu.pool_del(t->pools.keys[i]);
  u64map_close(&t->pools);
  u64map_init(&t->pools);
  t->pool_default = t->pool_cur = 0;
}
