/* ctx.c: contexts as the tenant sees them, kept in the guest.
 *
 * tallyd runs every tenant in the one primary context of each GPU
 * (docs/decisions.md, D4), so a tenant's contexts are bookkeeping: which device the
 * calling thread works on, the push/pop stack, primary-context retain
 * counts and flags, limits.  None of these calls crosses the wire, except
 * three limits.  A context handle points at a guest_ctx below; primary
 * contexts are static, created ones are allocated by cuCtxCreate and freed
 * by cuCtxDestroy.
 *
 * Limits: the per-thread stack, the printf FIFO and the malloc heap sizes
 * are the shared context's, set and read in tallyd (CTX_LIMIT,
 * wire/call.def; a set there only grows the value, hostd/exec.c, "the
 * context's limits"), because kernels fail without them.  The other limits
 * and the cache configuration would change the context for every tenant;
 * they are stored here and read back, and change nothing on the GPU.
 */
#include "guestlib/guest.h"

#include <cudaProfiler.h>
#include <stdlib.h>
#include <string.h>

#define CTX_MAGIC     0x7a11c7c7u
#define CTX_STACK_MAX 64 /* deeper push nesting than any runtime uses */

typedef struct guest_ctx {
  uint32_t magic;     /* CTX_MAGIC while valid */
  int device;         /* ordinal */
  int primary;        /* 1 for the per-device primary context */
  unsigned int flags; /* CU_CTX_* */
  uint64_t id;        /* cuCtxGetId */
} guest_ctx_t;

/* Primary contexts and their retain counts.  Lock: guest__g.lock. */
static guest_ctx_t primaries[CALL_MAX_DEVICES];
static int primary_refs[CALL_MAX_DEVICES];
static uint64_t next_ctx_id = 1;
/* What this process last set for each limit (0: nothing, the default is
 * answered); the answer to cuCtxGetLimit for the limits kept here.  Relaxed
 * atomics, one word each: the last set wins, as on the driver. */
static size_t limits[CU_LIMIT_MAX];

/* The calling thread's context stack; [depth-1] is current. */
static __thread guest_ctx_t *stack[CTX_STACK_MAX];
static __thread int depth;

static guest_ctx_t *primary_of(int dev) {
  guest_ctx_t *c = &primaries[dev];
  if (c->magic != CTX_MAGIC) {
    c->magic = CTX_MAGIC;
    c->device = dev;
    c->primary = 1;
    c->id = __atomic_fetch_add(&next_ctx_id, 1, __ATOMIC_RELAXED);
  }
  return c;
}

static guest_ctx_t *ctx_of(CUcontext h) {
  guest_ctx_t *c = (guest_ctx_t *)h;
  if (!c)
    return NULL;
  for (int i = 0; i < CALL_MAX_DEVICES; i++)
    if (c == &primaries[i])
      return c->magic == CTX_MAGIC ? c : NULL;
  return c->magic == CTX_MAGIC ? c : NULL;
}

uint32_t guest__thread_index(void) {
  static uint32_t next_index;    /* atomic */
  static __thread uint32_t mine; /* 0 until this thread first asks */
  if (!mine)
    mine = __atomic_add_fetch(&next_index, 1, __ATOMIC_RELAXED);
  return mine;
}

int guest__cur_device(void) {
  return depth > 0 && stack[depth - 1] ? stack[depth - 1]->device : 0;
}

/* A launch on a thread with no current context leaves the primary context
 * of device 0 current there.  On the real driver a kernel launch through
 * cudart on a new thread does (measured on the H200: cuCtxGetCurrent is NULL
 * before and the primary context after), without a cuCtxSetCurrent the
 * guest would see; PyTorch relies on it (its autograd threads launch, then
 * ask cuCtxGetCurrent before creating a cuBLAS handle).  A driver-API
 * program that launches with no current context gets CUDA_ERROR_INVALID_CONTEXT
 * natively; here its launch runs on device 0 as before and binds the
 * context as well.  Thread-local: no lock on the launch path but the first. */
void guest__ctx_adopt_primary(void) {
  if (depth > 0)
    return;
  pthread_mutex_lock(&guest__g.lock);
  stack[0] = primary_of(0);
  pthread_mutex_unlock(&guest__g.lock);
  depth = 1;
}

/* cudart's export table (export.c) asks for the primary context this way. */
CUresult guest__primary_ctx(CUcontext *pctx, CUdevice dev) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&guest__g.lock);
  *pctx = (CUcontext)primary_of(dev);
  pthread_mutex_unlock(&guest__g.lock);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  CUresult r = guest__primary_ctx(pctx, dev);
  if (r == CUDA_SUCCESS)
    __atomic_fetch_add(&primary_refs[dev], 1, __ATOMIC_RELAXED);
  return r;
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (dev < 0 || dev >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  if (__atomic_load_n(&primary_refs[dev], __ATOMIC_RELAXED) <= 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  __atomic_fetch_sub(&primary_refs[dev], 1, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  return cuDevicePrimaryCtxRelease_v2(dev);
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!flags || !active)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  *flags = primaries[dev].flags;
  *active = __atomic_load_n(&primary_refs[dev], __ATOMIC_RELAXED) > 0;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (dev < 0 || dev >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&guest__g.lock);
  primary_of(dev)->flags = flags;
  pthread_mutex_unlock(&guest__g.lock);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (dev < 0 || dev >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  /* Resetting would free every allocation of the tenant; tallyd does that
   * when the tenant leaves.  Here only the retain count goes back to 0. */
  __atomic_store_n(&primary_refs[dev], 0, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
  return cuDevicePrimaryCtxReset_v2(dev);
}

GUEST_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  *pctx = depth > 0 ? (CUcontext)stack[depth - 1] : NULL;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  guest_ctx_t *c = ctx_of(ctx);
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx && !c)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (!ctx) {
    if (depth > 0)
      depth--;
    return CUDA_SUCCESS;
  }
  if (depth == 0)
    depth = 1;
  stack[depth - 1] = c;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  guest_ctx_t *c = ctx_of(ctx);
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!c)
    return CUDA_ERROR_INVALID_CONTEXT;
  if (depth >= CTX_STACK_MAX)
    return CUDA_ERROR_OUT_OF_MEMORY;
  stack[depth++] = c;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (depth == 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  depth--;
  if (pctx)
    *pctx = (CUcontext)stack[depth];
  return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  guest_ctx_t *c;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pctx)
    return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  if (depth >= CTX_STACK_MAX)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c = calloc(1, sizeof(*c));
  if (!c)
    return CUDA_ERROR_OUT_OF_MEMORY;
  c->magic = CTX_MAGIC;
  c->device = dev;
  c->flags = flags;
  c->id = __atomic_fetch_add(&next_ctx_id, 1, __ATOMIC_RELAXED);
  stack[depth++] = c;
  *pctx = (CUcontext)c;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
  return ctx_create(pctx, flags, dev);
}

GUEST_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                     CUdevice dev) {
  if (params && (params->execAffinityParams || params->cigParams))
    return CUDA_ERROR_NOT_SUPPORTED;
  return ctx_create(pctx, flags, dev);
}

GUEST_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  guest_ctx_t *c = ctx_of(ctx);
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (!c || c->primary)
    return CUDA_ERROR_INVALID_CONTEXT;
  for (int i = 0; i < depth; i++)
    if (stack[i] == c) {
      memmove(&stack[i], &stack[i + 1], (depth - i - 1) * sizeof(stack[0]));
      depth--;
      i--;
    }
  c->magic = 0;
  free(c);
  return CUDA_SUCCESS;
}

static CUresult cur_ctx(guest_ctx_t **out) {
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (depth == 0 || !stack[depth - 1])
    return CUDA_ERROR_INVALID_CONTEXT;
  *out = stack[depth - 1];
  return CUDA_SUCCESS;
}

/* cuProfilerStart / cuProfilerStop: natively they only switch a profiler
 * attached to the process on and off, and succeed with none attached.  A
 * tenant's process runs no GPU work of its own, so no profiler attached to
 * it would see any; the calls check the context as the driver does and
 * change nothing (an application bracketing a region with them, as
 * torch.cuda.profiler does, runs on). */
static CUresult profiler_switch(void) {
  guest_ctx_t *c;
  return cur_ctx(&c);
}

GUEST_EXPORT CUresult cuProfilerStart(void) { return profiler_switch(); }

GUEST_EXPORT CUresult cuProfilerStop(void) { return profiler_switch(); }

/* Peer access: no device tallyd serves may reach another's memory
 * (cuDeviceCanAccessPeer answers 0), so enabling it is refused as the
 * driver refuses a pair that cannot (CUDA_ERROR_INVALID_DEVICE), after the
 * driver's own checks (a current context, a valid peer that is not the
 * current one, flags 0), and disabling answers that it was never enabled.
 * Frameworks ask cuDeviceCanAccessPeer first; these answer the ones that
 * do not. */
static CUresult peer_check(CUcontext peer) {
  guest_ctx_t *c, *p;
  CUresult r = cur_ctx(&c);
  if (r != CUDA_SUCCESS)
    return r;
  if (!(p = ctx_of(peer)) || p == c)
    return CUDA_ERROR_INVALID_CONTEXT;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  CUresult r = peer_check(peer);
  if (r != CUDA_SUCCESS)
    return r;
  return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_DEVICE;
}

GUEST_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  CUresult r = peer_check(peer);
  return r != CUDA_SUCCESS ? r : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}

GUEST_EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
  guest_ctx_t *c;
  CUresult r;
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  r = cur_ctx(&c);
  if (r == CUDA_SUCCESS)
    *device = c->device;
  return r;
}

GUEST_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
  guest_ctx_t *c = ctx ? ctx_of(ctx) : NULL;
  if (!ctx)
    return cuCtxGetDevice(device);
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!c)
    return CUDA_ERROR_INVALID_CONTEXT;
  *device = c->device;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxGetFlags(unsigned int *flags) {
  guest_ctx_t *c;
  CUresult r;
  if (!flags)
    return CUDA_ERROR_INVALID_VALUE;
  r = cur_ctx(&c);
  if (r == CUDA_SUCCESS)
    *flags = c->flags;
  return r;
}

GUEST_EXPORT CUresult cuCtxSetFlags(unsigned int flags) {
  guest_ctx_t *c;
  CUresult r = cur_ctx(&c);
  if (r == CUDA_SUCCESS)
    c->flags = flags;
  return r;
}

GUEST_EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id) {
  guest_ctx_t *c = NULL;
  CUresult r = CUDA_SUCCESS;
  if (!id)
    return CUDA_ERROR_INVALID_VALUE;
  if (ctx)
    c = ctx_of(ctx);
  else
    r = cur_ctx(&c);
  if (r != CUDA_SUCCESS)
    return r;
  if (!c)
    return CUDA_ERROR_INVALID_CONTEXT;
  *id = c->id;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
  if (!version)
    return CUDA_ERROR_INVALID_VALUE;
  if (ctx && !ctx_of(ctx))
    return CUDA_ERROR_INVALID_CONTEXT;
  *version = 3020; /* every context since CUDA 3.2 reports the 3.2 API */
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  int dev = guest__cur_device();
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (least)
    *least = guest__g.dev[dev].prio_least;
  if (greatest)
    *greatest = guest__g.dev[dev].prio_greatest;
  return CUDA_SUCCESS;
}

/* Under TALLY_LOG=debug, a setting of the context that this process keeps
 * to itself (the context in tallyd is every tenant's, and the setting is
 * not applied there) is logged the first time each function sets each
 * limit or configuration, so that a difference from a native run can be
 * traced to it.  what: the limit, or 0; value: what was asked. */
enum { KEPT_LIMIT, KEPT_CACHE, KEPT_SHMEM };
static void kept_log(int fn, int what, size_t value) {
  static const char *const name[] = {"cuCtxSetLimit", "cuCtxSetCacheConfig",
                                     "cuCtxSetSharedMemConfig"};
  static uint64_t seen; /* atomic: bit 16 * fn + what */
  int bit = 16 * fn + (what & 15);
  if (!guest__debug() || (__atomic_fetch_or(&seen, 1ull << bit, __ATOMIC_RELAXED) >> bit & 1))
    return;
  guest__log("%s(%d, %zu) kept in this process: the context in tallyd is every tenant's, where "
             "it is not applied",
             name[fn], what, value);
}

/* Whether limit is the shared context's, set and read in tallyd (top comment). */
static bool limit_in_tallyd(CUlimit limit) {
  return limit == CU_LIMIT_STACK_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE ||
         limit == CU_LIMIT_MALLOC_HEAP_SIZE;
}

/* The context's value of each limit in tallyd, as its last reply to this
 * process said (0: not asked yet).  A framework may read a limit often, so
 * only the first read of each asks tallyd; a set refreshes it.  A growth by
 * another tenant afterwards is not seen here: the kernels have at least the
 * value answered. */
static uint64_t ctx_limits[CU_LIMIT_MALLOC_HEAP_SIZE + 1];

/* For the limits in tallyd, the context's value: what a native process
 * reads too, which may be more than it asked, as the driver rounds a value
 * up and grows the stack for a kernel that needs more (cuda.h,
 * cuCtxSetLimit).  Through tallyd it may also be more because another
 * tenant grew it: that larger value is what this tenant's kernels run with,
 * so it is the true answer (the recorded one would understate a stack its
 * kernels already have).  With TALLY_LOG=debug such an answer is logged,
 * once per limit, for whoever compares a run with a native one. */
GUEST_EXPORT CUresult cuCtxGetLimit(size_t *value, CUlimit limit) {
  if (!value || (int)limit < 0 || limit >= CU_LIMIT_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (limit_in_tallyd(limit)) {
    static int logged[CU_LIMIT_MALLOC_HEAP_SIZE + 1]; /* atomic */
    call_ctx_limit_req_t q = {.limit = (uint32_t)limit, .set = 0};
    call_ctx_limit_rep_t a = {0};
    size_t asked = __atomic_load_n(&limits[limit], __ATOMIC_RELAXED);
    CUresult r;
    if ((a.value = __atomic_load_n(&ctx_limits[limit], __ATOMIC_RELAXED)) != 0) {
      *value = (size_t)a.value;
      return CUDA_SUCCESS;
    }
    if ((r = guest__rpc(CALL_OP_CTX_LIMIT, 0, &q, &a)) != CUDA_SUCCESS)
      return r;
    __atomic_store_n(&ctx_limits[limit], a.value, __ATOMIC_RELAXED);
    if (asked && a.value > asked && guest__debug() &&
        !__atomic_exchange_n(&logged[limit], 1, __ATOMIC_RELAXED))
      guest__log("cuCtxGetLimit(%d): the shared context has %llu, this process set %zu (tallyd "
                 "grows a limit and never shrinks it; another tenant or the driver grew it)",
                 (int)limit, (unsigned long long)a.value, asked);
    *value = (size_t)a.value;
    return CUDA_SUCCESS;
  }
  if (__atomic_load_n(&limits[limit], __ATOMIC_RELAXED) == 0) {
    /* CUDA's defaults on Hopper: 1 KiB stack, 1 MiB printf FIFO, 8 MiB heap. */
    static const size_t defaults[CU_LIMIT_MAX] = {
        [CU_LIMIT_STACK_SIZE] = 1024,
        [CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20,
        [CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20,
        [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
        [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
        [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 128,
    };
    *value = defaults[limit];
  } else {
    *value = __atomic_load_n(&limits[limit], __ATOMIC_RELAXED);
  }
  return CUDA_SUCCESS;
}

/* For the limits in tallyd, one round trip whose result is returned as is:
 * a value above tallyd's bound, or a heap (printf FIFO) size after a kernel
 * that uses malloc (printf) ran in the shared context, is
 * CUDA_ERROR_INVALID_VALUE.  The value is recorded only when it was
 * accepted. */
GUEST_EXPORT CUresult cuCtxSetLimit(CUlimit limit, size_t value) {
  if ((int)limit < 0 || limit >= CU_LIMIT_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (limit_in_tallyd(limit)) {
    call_ctx_limit_req_t q = {.limit = (uint32_t)limit, .set = 1, .value = value};
    call_ctx_limit_rep_t a = {0};
    CUresult r = guest__rpc(CALL_OP_CTX_LIMIT, 0, &q, &a);
    if (r != CUDA_SUCCESS)
      return r;
    __atomic_store_n(&ctx_limits[limit], a.value, __ATOMIC_RELAXED);
  } else {
    kept_log(KEPT_LIMIT, (int)limit, value);
  }
  __atomic_store_n(&limits[limit], value, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

static CUfunc_cache cache_config = CU_FUNC_CACHE_PREFER_NONE;

GUEST_EXPORT CUresult cuCtxGetCacheConfig(CUfunc_cache *cfg) {
  if (!cfg)
    return CUDA_ERROR_INVALID_VALUE;
  *cfg = cache_config;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxSetCacheConfig(CUfunc_cache cfg) {
  kept_log(KEPT_CACHE, 0, (size_t)cfg);
  cache_config = cfg;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxGetSharedMemConfig(CUsharedconfig *cfg) {
  if (!cfg)
    return CUDA_ERROR_INVALID_VALUE;
  *cfg = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuCtxSetSharedMemConfig(CUsharedconfig cfg) {
  kept_log(KEPT_SHMEM, 0, (size_t)cfg);
  return CUDA_SUCCESS;
}
