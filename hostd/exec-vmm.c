/* exec-vmm.c: a tenant's virtual memory management requests (cuMemCreate,
 * cuMemAddressReserve, cuMemMap, ...), and what it still holds when it goes.
 *
 * Three kinds of object, all the tenant's own and checked as such before
 * the GPU backend sees them (docs/decisions.md, D2):
 *   physical handles   t->vmh: handle -> vmm_phys_t (size, references,
 *                      mappings); created memory counts against the
 *                      tenant's device-memory quota until the last
 *                      reference and the last mapping are gone, as the
 *                      driver frees it then;
 *   reservations       t->vas: base -> size, whole address ranges;
 *   mappings           the range table (RANGE_MAPPED, `module` = the
 *                      handle), so copies and memsets into mapped memory
 *                      are checked as for cuMemAlloc, and mappings placed
 *                      back to back count as one range (tenant.c,
 *                      hostd__owns).
 * Invariants: every mapping lies inside one reservation and names a handle
 * of t->vmh; a handle leaves t->vmh when it has neither references nor
 * mappings; a reservation is freed only with nothing mapped in it.  Each
 * reference the tenant holds (cuMemCreate, cuMemRetainAllocationHandle)
 * is one reference of the driver's, so releasing them all on close frees
 * exactly what the tenant made.  Handles are never exported
 * (cuMemExportToShareableHandle is refused by the guest): a handle of one
 * tenant means nothing to another.
 */
#include "hostd/guard.h"
#include "hostd/tenant-int.h"

#include <stdlib.h>

typedef struct vmm_phys {
  uint64_t size;
  uint32_t refs; /* the tenant's references (create + retains - releases) */
  uint32_t maps; /* its mappings in the range table */
} vmm_phys_t;

static vmm_phys_t *phys_of(const hostd_tenant_t *t, uint64_t h) {
  uint64_t v;
  return h && u64map_get(&t->vmh, h, &v) ? (vmm_phys_t *)(uintptr_t)v : NULL;
}

/* Forgets h once nothing of the tenant refers to it (the driver has freed it). */
static void phys_settle(hostd_tenant_t *t, uint64_t h, vmm_phys_t *ph) {
  if (ph->refs || ph->maps)
    return;
  hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, ph->size);
  u64map_del(&t->vmh, h);
  free(ph);
}

/* The shareable handle types a tenant may ask for: a POSIX file descriptor
 * (PyTorch) and fabric (XLA asks for both).  Nothing is ever exported (the
 * guest refuses cuMemExportToShareableHandle), so they only matter to the
 * driver's choice of granularity and placement; the Windows types are
 * refused. */
#define SHAREABLE_OK                                                                               \
  ((uint32_t)(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR | CU_MEM_HANDLE_TYPE_FABRIC))

static CUresult prop_of(hostd_mem_prop_t *p, uint32_t types, uint32_t compression, uint32_t rdma,
                        uint32_t usage) {
  if (types & ~SHAREABLE_OK)
    return CUDA_ERROR_NOT_SUPPORTED;
  *p = (hostd_mem_prop_t){types, compression, rdma, usage};
  return CUDA_SUCCESS;
}

/* Fabric handles need a fabric (IMEX) the driver may refuse on this host;
 * a handle here is never exported, so memory is created without it and
 * the tenant's allocation works as on a host where fabric is offered. */
static void strip_fabric(hostd_mem_prop_t *p) {
  p->handle_types &= ~(uint32_t)CU_MEM_HANDLE_TYPE_FABRIC;
}

/* True when [p, p+n) lies inside one of the tenant's reservations. */
static bool reserved(const hostd_tenant_t *t, uint64_t p, uint64_t n) {
  for (size_t i = 0; i < t->vas.cap; i++) {
    uint64_t b = t->vas.keys[i], sz = t->vas.vals[i];
    if (b && p >= b && p - b <= sz && n <= sz - (p - b))
      return true;
  }
  return false;
}

/* True when no range of the table meets [p, p+n). */
static bool range_free(const hostd_tenant_t *t, uint64_t p, uint64_t n) {
  size_t i = hostd__range_upper(t, p);
  if (i > 0 && t->ranges[i - 1].base + t->ranges[i - 1].size > p)
    return false;
  return i >= t->nranges || t->ranges[i].base >= p + n;
}

CUresult hostd__exec_mem_granularity(hostd_tenant_t *t, wire_buf_t *out,
                                     const call_mem_granularity_req_t *q) {
  hostd_mem_prop_t p;
  uint64_t g = 0;
  CUresult r;
  (void)t;
  if (q->option > CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = prop_of(&p, q->handle_types, q->compression, q->rdma, q->usage)) != CUDA_SUCCESS)
    return r;
  /* The driver's answer for the types asked; where it refuses fabric, the
   * answer for what MEM_CREATE will make (fabric stripped). */
  r = hostd__gpu.mem_granularity(&g, &p, (int)q->option);
  if (r != CUDA_SUCCESS && (p.handle_types & CU_MEM_HANDLE_TYPE_FABRIC)) {
    strip_fabric(&p);
    r = hostd__gpu.mem_granularity(&g, &p, (int)q->option);
  }
  if (r != CUDA_SUCCESS)
    return r;
  call_mem_granularity_rep_t rep = {.granularity = g};
  return call_mem_granularity_rep_put(&rep, out) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult hostd__exec_mem_create(hostd_tenant_t *t, wire_buf_t *out,
                                const call_mem_create_req_t *q) {
  hostd_mem_prop_t p;
  vmm_phys_t *ph;
  uint64_t h = 0;
  CUresult r;
  if (q->size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = prop_of(&p, q->handle_types, q->compression, q->rdma, q->usage)) != CUDA_SUCCESS)
    return r;
  strip_fabric(&p);
  if (!(ph = calloc(1, sizeof(*ph))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if ((r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_MEM, q->size)) != CUDA_SUCCESS) {
    free(ph);
    return r;
  }
  r = hostd__gpu.mem_create(&h, q->size, &p);
  if (r == CUDA_SUCCESS && u64map_put(&t->vmh, h, (uint64_t)(uintptr_t)ph) != 0) {
    (void)hostd__gpu.mem_release(h);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) {
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, q->size);
    free(ph);
    return r;
  }
  *ph = (vmm_phys_t){q->size, 1, 0};
  call_mem_create_rep_t rep = {.handle = h};
  (void)call_mem_create_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_mem_release(hostd_tenant_t *t, wire_buf_t *out,
                                 const call_mem_release_req_t *q) {
  vmm_phys_t *ph = phys_of(t, q->handle);
  CUresult r;
  (void)out;
  if (!ph || ph->refs == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.mem_release(q->handle)) != CUDA_SUCCESS)
    return r;
  ph->refs--;
  phys_settle(t, q->handle, ph);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_mem_reserve(hostd_tenant_t *t, wire_buf_t *out,
                                 const call_mem_reserve_req_t *q) {
  uint64_t p = 0;
  CUresult r;
  if (q->size == 0 || q->flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  /* The hint is only a wish: the driver never hands out a range twice. */
  if ((r = hostd__gpu.mem_reserve(&p, q->size, q->align, q->addr)) != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->vas, p, q->size) != 0) {
    (void)hostd__gpu.mem_unreserve(p, q->size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  call_mem_reserve_rep_t rep = {.ptr = p};
  (void)call_mem_reserve_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_mem_unreserve(hostd_tenant_t *t, wire_buf_t *out,
                                   const call_mem_unreserve_req_t *q) {
  uint64_t sz;
  CUresult r;
  (void)out;
  if (!q->ptr || !u64map_get(&t->vas, q->ptr, &sz) || sz != q->size ||
      !range_free(t, q->ptr, q->size))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.mem_unreserve(q->ptr, q->size)) == CUDA_SUCCESS)
    u64map_del(&t->vas, q->ptr);
  return r;
}

CUresult hostd__exec_mem_map(hostd_tenant_t *t, wire_buf_t *out, const call_mem_map_req_t *q) {
  vmm_phys_t *ph = phys_of(t, q->handle);
  CUresult r;
  (void)out;
  if (!ph || ph->refs == 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (q->flags != 0 || q->size == 0 || q->offset > ph->size || q->size > ph->size - q->offset ||
      !reserved(t, q->ptr, q->size) || !range_free(t, q->ptr, q->size))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.mem_map(q->ptr, q->size, q->offset, q->handle)) != CUDA_SUCCESS)
    return r;
  if (hostd__range_add(t, q->ptr, q->size, RANGE_MAPPED, q->handle) != 0) {
    (void)hostd__gpu.mem_unmap(q->ptr, q->size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  ph->maps++;
  return CUDA_SUCCESS;
}

/* [ptr, ptr+size) must be whole mappings of the tenant, back to back. */
CUresult hostd__exec_mem_unmap(hostd_tenant_t *t, wire_buf_t *out, const call_mem_unmap_req_t *q) {
  size_t i = hostd__range_upper(t, q->ptr), first, n = 0;
  uint64_t at = q->ptr;
  CUresult r;
  (void)out;
  if (i == 0 || q->size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  first = i - 1;
  while (first + n < t->nranges && at - q->ptr < q->size && t->ranges[first + n].base == at &&
         t->ranges[first + n].kind == RANGE_MAPPED)
    at += t->ranges[first + n++].size;
  if (n == 0 || at - q->ptr != q->size)
    return CUDA_ERROR_INVALID_VALUE;
  /* Held launches may use it: they go out first, as launched work would. */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS ||
      (r = hostd__gpu.mem_unmap(q->ptr, q->size)) != CUDA_SUCCESS)
    return r;
  while (n--) {
    uint64_t h = t->ranges[first].module;
    vmm_phys_t *ph = phys_of(t, h);
    hostd__range_del_at(t, first);
    if (ph) {
      ph->maps--;
      phys_settle(t, h, ph);
    }
  }
  return CUDA_SUCCESS;
}

CUresult hostd__exec_mem_set_access(hostd_tenant_t *t, wire_buf_t *out,
                                    const call_mem_set_access_req_t *q) {
  (void)out;
  if (q->size == 0 || q->flags > CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
      !reserved(t, q->ptr, q->size) || !hostd__owns(t, q->ptr, q->size))
    return CUDA_ERROR_INVALID_VALUE;
  return hostd__gpu.mem_set_access(q->ptr, q->size, q->flags);
}

CUresult hostd__exec_mem_retain(hostd_tenant_t *t, wire_buf_t *out,
                                const call_mem_retain_req_t *q) {
  size_t i = hostd__range_upper(t, q->ptr);
  const range_t *rg = i ? &t->ranges[i - 1] : NULL;
  vmm_phys_t *ph;
  uint64_t h = 0;
  CUresult r;
  if (!rg || rg->kind != RANGE_MAPPED || q->ptr - rg->base >= rg->size ||
      !(ph = phys_of(t, rg->module)))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.mem_retain(&h, q->ptr)) != CUDA_SUCCESS)
    return r;
  if (h != rg->module) { /* the driver disagrees with our table: keep its count right */
    (void)hostd__gpu.mem_release(h);
    return CUDA_ERROR_INVALID_VALUE;
  }
  ph->refs++;
  call_mem_retain_rep_t rep = {.handle = h};
  (void)call_mem_retain_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

/* Unmaps every mapping, drops every reference and reservation the tenant
 * holds; the range table itself is emptied by tenant.c. */
void hostd__vmm_release(hostd_tenant_t *t, bool gpu) {
  for (size_t i = 0; gpu && i < t->nranges; i++)
    if (t->ranges[i].kind == RANGE_MAPPED)
      (void)hostd__gpu.mem_unmap(t->ranges[i].base, t->ranges[i].size);
  for (size_t i = 0; i < t->vmh.cap; i++) {
    vmm_phys_t *ph = (vmm_phys_t *)(uintptr_t)t->vmh.vals[i];
    if (!t->vmh.keys[i])
      continue;
    for (uint32_t k = 0; gpu && k < ph->refs; k++)
      (void)hostd__gpu.mem_release(t->vmh.keys[i]);
    free(ph);
  }
  for (size_t i = 0; gpu && i < t->vas.cap; i++)
    if (t->vas.keys[i])
      (void)hostd__gpu.mem_unreserve(t->vas.keys[i], t->vas.vals[i]);
  u64map_close(&t->vmh);
  u64map_init(&t->vmh);
  u64map_close(&t->vas);
  u64map_init(&t->vas);
}
