/* tenant.c: one tenant's tables and the execution of its requests.
 *
 * A tenant owns what it created and nothing else: allocations (a sorted
 * range table), streams, events, modules and their functions (hash maps).
 * Every handle and pointer range in a request is checked against these
 * tables before the GPU backend sees it; a copy, memset or free that
 * touches memory the tenant does not own fails with
 * CUDA_ERROR_INVALID_VALUE, a foreign handle with CUDA_ERROR_INVALID_HANDLE
 * (BRIEF decision 2: pointers are identity-mapped, so the check is all that
 * separates tenants).  Launch arguments are not checked: a kernel may still
 * dereference anything, as on a shared GPU.
 *
 * Streams: host streams are created with the tenant class's priority
 * (latency-critical the greatest, best-effort the least).  Stream 0 and
 * CU_STREAM_LEGACY name the tenant's own emulated legacy stream, and
 * CU_STREAM_PER_THREAD its per-thread default stream (one per tenant: the
 * guest does not say which of its threads called).  Legacy semantics are
 * emulated with events: work on the legacy stream waits for earlier work of
 * every blocking stream of this tenant and vice versa (epochs below), never
 * for other tenants.
 *
 * Errors of fire-and-forget requests are kept (the first one) and returned
 * by the next request flagged GUEST_CALL_SYNCPOINT, then cleared.
 *
 * Sticky errors.  A kernel fault (illegal address, ...) corrupts the CUDA
 * context, and all tenants share one (BRIEF decision 4); worse, on the real
 * driver the error poisons the whole PROCESS: even a reset primary context
 * cannot be retained again (error 700, measured on the H200).  So when any
 * call returns a context-corrupting error (ctx_fatal), recover() marks every
 * live tenant lost with that error (every later call of theirs returns it:
 * the faulting tenant sees it at its next synchronising call, as natively,
 * the others at their next call), forgets their tables without touching the
 * GPU, and raises the fault (restart.c): the server then refuses new tenants
 * with "come back later" and tallyd re-executes itself once they have gone.
 * A tenant created after the fault in this process is lost from the start.
 * Known limitation (hostd/README.md): a fault ends every tenant on that GPU,
 * as under MPS.
 *
 * Lock story: a tenant's tables are touched only by its worker thread, except
 * by recover(), which holds ctx_lock for writing while every request holds it
 * for reading (so no request runs while tenants are marked lost).  `lost` and
 * the live list (reg_lock, taken after ctx_lock) are written under the write
 * lock; the fault record (restart.c) is raised under it too.
 */
#include "hostd/hostd-int.h"
#include "hostd/gpu.h"
#include "hostd/map.h"
#include "hostd/sched.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define STREAM_LEGACY_ID     1u   /* CU_STREAM_LEGACY */
#define STREAM_PER_THREAD_ID 2u   /* CU_STREAM_PER_THREAD */
#define PTDS_MAX             4096 /* per-thread default streams per tenant: one per thread */
#define KIND_MODULE          0
#define KIND_LIBRARY         1
#define KIND_VIEW            2 /* a library's module view: dies with the library */
#define RANGE_ALLOC          1 /* from MEM_ALLOC: may be freed */
#define RANGE_GLOBAL         2 /* a module global: may be copied, not freed */

unsigned long hostd__op_count[GUEST_OP_COUNT];

typedef struct range {
  uint64_t base, size;
  int kind;
  uint64_t module; /* for globals: the module they die with */
} range_t;

/* A tenant stream (also the emulated legacy and per-thread ones). */
/* Pinned host memory a guest shared as a memfd (server.c maps it in on_fd):
 * copies from and to it are DMA on the tenant's stream, no bytes on the wire. */
typedef struct pinned {
  uint8_t *addr;
  size_t size;
  bool registered; /* cuMemHostRegister succeeded (else copies stage, still correct) */
} pinned_t;

typedef struct tstream {
  uint64_t handle;      /* host stream */
  uint64_t event;       /* for implicit synchronisation with the legacy stream */
  bool blocking;        /* created without CU_STREAM_NON_BLOCKING */
  uint64_t epoch;       /* bumped by each op on this stream */
  uint64_t seen;        /* blocking stream: legacy epoch it has waited for;
                           legacy stream: unused */
  uint64_t legacy_seen; /* legacy's view of this stream's epoch */
  hostd_sched_stream_t *ss; /* the scheduler's state, made at its first launch (sched.h) */
} tstream_t;

struct hostd_tenant {
  uint32_t id;
  bool tcp;            /* came over TCP: the token is checked at hello */
  bool hello;          /* hello done */
  int prio;            /* host stream priority of this tenant's class */
  tstream_t *legacy;   /* lazily created */
  hostd_map_t ptds;    /* guest thread key (2 | N << 32) -> its default stream */
  hostd_map_t streams; /* handle -> tstream_t* */
  hostd_map_t events;  /* handle -> 1 */
  hostd_map_t modules; /* handle -> kind */
  hostd_map_t funcs;   /* handle -> module handle */
  hostd_map_t views;   /* library -> its module view (cuLibraryGetModule) */
  hostd_map_t pinned;  /* guest tag -> pinned_t*: memfd mappings (PINNED_COPY) */
  hostd_map_t modids;  /* module or library handle -> content id (kernel ids) */
  hostd_map_t kids;    /* function handle -> stable kernel id (sched.h) */
  hostd_sched_tenant_t *sched; /* NULL: launches go straight to the GPU */
  hostd_hostfn_t *hf;  /* host functions (hostfn.c); NULL when not served by server.c */
  range_t *ranges;     /* sorted by base */
  size_t nranges, capranges;
  CUresult deferred;           /* first error of a fire-and-forget request, until reported */
  CUresult lost;               /* context-corrupting error that took everything (recover) */
  bool ctx_err_logged;         /* a context-level error was logged (once per tenant) */
  hostd_tenant_t *prev, *next; /* live list (reg_lock) */
};

/* Writer-preferring: a recovery must not wait behind a stream of new requests. */
static pthread_rwlock_t ctx_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static hostd_tenant_t *live; /* every tenant not yet freed */
/* Whether this thread made the context current; every worker thread does
 * before its first request. */
static __thread bool entered;

guest_dev_snapshot_t hostd__snapshot;
int hostd__ndev;
char hostd__token[256];

hostd_tenant_t *hostd__tenant_new(uint32_t id, bool tcp) {
  hostd_tenant_t *t = calloc(1, sizeof(*t));
  if (!t)
    return NULL;
  t->id = id;
  t->tcp = tcp;
  t->prio = hostd__snapshot.prio_least;
  hostd__map_init(&t->streams);
  hostd__map_init(&t->events);
  hostd__map_init(&t->modules);
  hostd__map_init(&t->funcs);
  hostd__map_init(&t->ptds);
  hostd__map_init(&t->views);
  hostd__map_init(&t->pinned);
  hostd__map_init(&t->modids);
  hostd__map_init(&t->kids);
  pthread_rwlock_rdlock(&ctx_lock);
  /* After a fault this process serves nobody until it restarts. */
  t->lost = (CUresult)hostd__fault_pending(NULL);
  pthread_mutex_lock(&reg_lock);
  t->next = live;
  if (live)
    live->prev = t;
  live = t;
  pthread_mutex_unlock(&reg_lock);
  pthread_rwlock_unlock(&ctx_lock);
  return t;
}

uint32_t hostd__tenant_id(const hostd_tenant_t *t) {
  return t->id;
}

void hostd__tenant_set_hostfn(hostd_tenant_t *t, hostd_hostfn_t *h) {
  t->hf = h;
}

int hostd__tenant_pinned_add(hostd_tenant_t *t, uint64_t tag, void *addr, size_t size) {
  pinned_t *p;
  CUresult r;
  if (tag == 0 || hostd__map_get(&t->pinned, tag, NULL)) {
    munmap(addr, size);
    return -EEXIST;
  }
  p = calloc(1, sizeof(*p));
  if (!p || hostd__map_put(&t->pinned, tag, (uint64_t)(uintptr_t)p) != 0) {
    free(p);
    munmap(addr, size);
    return -ENOMEM;
  }
  p->addr = addr;
  p->size = size;
  pthread_rwlock_rdlock(&ctx_lock);
  r = t->lost;
  if (r == CUDA_SUCCESS && !entered) { /* as in hostd__tenant_exec */
    r = hostd__gpu.thread_enter();
    entered = r == CUDA_SUCCESS;
  }
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.host_register(addr, size);
  pthread_rwlock_unlock(&ctx_lock);
  p->registered = r == CUDA_SUCCESS;
  hostd__log(HOSTD_LOG_DEBUG, "tenant %u: shared pinned memory %#llx, %zu bytes, mapped %s", t->id,
             (unsigned long long)tag, size,
             (uint64_t)(uintptr_t)addr == tag ? "at the same address" : "elsewhere");
  if (!p->registered)
    hostd__log(HOSTD_LOG_INFO,
               "tenant %u: cuMemHostRegister of %zu shared bytes: %d (copies will stage)", t->id,
               size, (int)r);
  return 0;
}

/* Unregisters (gpu: the context is alive) and unmaps one shared allocation. */
static void pinned_drop(pinned_t *p, bool gpu) {
  if (gpu && p->registered)
    (void)hostd__gpu.host_unregister(p->addr);
  munmap(p->addr, p->size);
  free(p);
}

/* ---- ranges ---- */

static size_t range_upper(const hostd_tenant_t *t, uint64_t p) {
  size_t lo = 0, hi = t->nranges;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (t->ranges[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static int range_add(hostd_tenant_t *t, uint64_t base, uint64_t size, int kind, uint64_t module) {
  size_t i;
  if (t->nranges == t->capranges) {
    size_t cap = t->capranges ? t->capranges * 2 : 64;
    range_t *n = realloc(t->ranges, cap * sizeof(*n));
    if (!n)
      return -ENOMEM;
    t->ranges = n;
    t->capranges = cap;
  }
  i = range_upper(t, base);
  if (i > 0 && t->ranges[i - 1].base == base)
    return 0; /* a global asked for twice */
  memmove(&t->ranges[i + 1], &t->ranges[i], (t->nranges - i) * sizeof(*t->ranges));
  t->ranges[i] = (range_t){base, size, kind, module};
  t->nranges++;
  return 0;
}

/* True when [p, p+n) lies inside one range of the tenant. */
static bool owns(const hostd_tenant_t *t, uint64_t p, uint64_t n) {
  size_t i = range_upper(t, p);
  const range_t *r;
  if (i == 0)
    return false;
  r = &t->ranges[i - 1];
  return p - r->base <= r->size && n <= r->size - (p - r->base);
}

static void range_del_at(hostd_tenant_t *t, size_t i) {
  memmove(&t->ranges[i], &t->ranges[i + 1], (t->nranges - i - 1) * sizeof(*t->ranges));
  t->nranges--;
}

/* ---- streams ---- */

static tstream_t *stream_make(hostd_tenant_t *t, unsigned flags, CUresult *r) {
  tstream_t *s = calloc(1, sizeof(*s));
  if (!s) {
    *r = CUDA_ERROR_OUT_OF_MEMORY;
    return NULL;
  }
  s->blocking = !(flags & CU_STREAM_NON_BLOCKING);
  *r = hostd__gpu.stream_new(&s->handle, flags, t->prio);
  if (*r == CUDA_SUCCESS)
    *r = hostd__gpu.event_new(&s->event, CU_EVENT_DISABLE_TIMING);
  if (*r != CUDA_SUCCESS) {
    if (s->handle)
      (void)hostd__gpu.stream_del(s->handle);
    free(s);
    return NULL;
  }
  return s;
}

/* Frees a tenant stream; gpu false: its host objects died with the context. */
static void stream_release(tstream_t *s, bool gpu) {
  if (!s)
    return;
  if (!gpu) {
    free(s);
    return;
  }
  (void)hostd__sched_fence(s->ss);
  (void)hostd__gpu.stream_sync(s->handle);
  hostd__sched_stream_free(s->ss);
  (void)hostd__gpu.event_del(s->event);
  (void)hostd__gpu.stream_del(s->handle);
  free(s);
}

static void stream_drop(tstream_t *s) {
  stream_release(s, true);
}

/* Resolves a guest stream value; creates the emulated ones on first use.
 * Returns NULL with *r set for a stream the tenant does not own. */
static tstream_t *stream_of(hostd_tenant_t *t, uint64_t s, CUresult *r) {
  uint64_t v;
  *r = CUDA_SUCCESS;
  if (s == 0 || s == STREAM_LEGACY_ID) {
    if (!t->legacy)
      t->legacy = stream_make(t, 0, r);
    return t->legacy;
  }
  if ((s & 0xffffffffu) == STREAM_PER_THREAD_ID) {
    /* One default stream per guest thread, made on first use.  No host
     * handle has these low bits: handles are aligned pointers. */
    tstream_t *ts;
    if (hostd__map_get(&t->ptds, s, &v))
      return (tstream_t *)(uintptr_t)v;
    if (t->ptds.len >= PTDS_MAX) {
      *r = CUDA_ERROR_OUT_OF_MEMORY;
      return NULL;
    }
    ts = stream_make(t, 0, r);
    if (ts && hostd__map_put(&t->ptds, s, (uint64_t)(uintptr_t)ts) != 0) {
      stream_drop(ts);
      *r = CUDA_ERROR_OUT_OF_MEMORY;
      return NULL;
    }
    return ts;
  }
  if (hostd__map_get(&t->streams, s, &v))
    return (tstream_t *)(uintptr_t)v;
  *r = CUDA_ERROR_INVALID_HANDLE;
  return NULL;
}

/* Orders an op on stream s after the legacy-stream rules, then counts it.
 * Work on the legacy stream waits for all earlier work of blocking streams;
 * work on a blocking stream waits for earlier legacy work. */
static CUresult stream_enter_op(hostd_tenant_t *t, tstream_t *s, bool launch) {
  CUresult r = launch ? CUDA_SUCCESS : hostd__sched_fence(s->ss);
  if (r != CUDA_SUCCESS)
    return r;
  if (s == t->legacy) {
    /* Every created stream, then every per-thread default stream. */
    for (size_t i = 0; i < t->streams.cap + t->ptds.cap && r == CUDA_SUCCESS; i++) {
      const hostd_map_t *m = i < t->streams.cap ? &t->streams : &t->ptds;
      size_t j = i < t->streams.cap ? i : i - t->streams.cap;
      tstream_t *b;
      if (!m->keys[j])
        continue;
      b = (tstream_t *)(uintptr_t)m->vals[j];
      if (!b->blocking || b->legacy_seen == b->epoch)
        continue;
      r = hostd__sched_fence(b->ss);
      if (r == CUDA_SUCCESS)
        r = hostd__gpu.event_record(b->event, b->handle, 0);
      if (r == CUDA_SUCCESS)
        r = hostd__gpu.stream_wait(s->handle, b->event, 0);
      b->legacy_seen = b->epoch;
    }
  } else if (s->blocking && t->legacy && s->seen != t->legacy->epoch) {
    r = hostd__sched_fence(t->legacy->ss);
    if (r == CUDA_SUCCESS)
      r = hostd__gpu.event_record(t->legacy->event, t->legacy->handle, 0);
    if (r == CUDA_SUCCESS)
      r = hostd__gpu.stream_wait(s->handle, t->legacy->event, 0);
    s->seen = t->legacy->epoch;
  }
  s->epoch++;
  return r;
}

static CUresult stream_enter(hostd_tenant_t *t, tstream_t *s) {
  return stream_enter_op(t, s, false);
}

/* Fences stream s for a synchronisation of it (sched.h). */
static CUresult stream_fence(tstream_t *s) {
  return s ? hostd__sched_fence(s->ss) : CUDA_SUCCESS;
}

/* ---- teardown ---- */

static void module_forget(hostd_tenant_t *t, uint64_t h) {
  for (size_t i = 0; i < t->funcs.cap; i++)
    if (t->funcs.keys[i] && t->funcs.vals[i] == h) {
      hostd__map_del(&t->funcs, t->funcs.keys[i]);
      i--; /* backward shift may have moved another entry here */
    }
  for (size_t i = 0; i < t->nranges;)
    if (t->ranges[i].kind == RANGE_GLOBAL && t->ranges[i].module == h)
      range_del_at(t, i);
    else
      i++;
}

/* Frees everything the tenant owns and empties its tables; gpu false: the
 * objects died with the context (recover), so only our memory is freed. */
static void tenant_release(hostd_tenant_t *t, bool gpu) {
  /* Held launches are dropped and the fences opened, so streams can drain. */
  hostd__sched_tenant_close(t->sched);
  /* Streams first: their pending work may still use memory and modules. */
  stream_release(t->legacy, gpu);
  t->legacy = NULL;
  for (size_t i = 0; i < t->ptds.cap; i++)
    if (t->ptds.keys[i])
      stream_release((tstream_t *)(uintptr_t)t->ptds.vals[i], gpu);
  for (size_t i = 0; i < t->streams.cap; i++)
    if (t->streams.keys[i])
      stream_release((tstream_t *)(uintptr_t)t->streams.vals[i], gpu);
  for (size_t i = 0; gpu && i < t->events.cap; i++)
    if (t->events.keys[i])
      (void)hostd__gpu.event_del(t->events.keys[i]);
  for (size_t i = 0; gpu && i < t->nranges; i++)
    if (t->ranges[i].kind == RANGE_ALLOC)
      (void)hostd__gpu.mem_free(t->ranges[i].base);
  for (size_t i = 0; gpu && i < t->modules.cap; i++)
    if (t->modules.keys[i] && t->modules.vals[i] != KIND_VIEW)
      (void)hostd__gpu.module_unload(t->modules.keys[i], (int)t->modules.vals[i]);
  /* The streams are drained (or dead): no copy uses a mapping, no host
   * function its gate. */
  for (size_t i = 0; i < t->pinned.cap; i++)
    if (t->pinned.keys[i])
      pinned_drop((pinned_t *)(uintptr_t)t->pinned.vals[i], gpu);
  hostd__hostfn_drop_gate(t->hf, gpu);
  hostd__sched_tenant_free(t->sched);
  t->sched = NULL;
  hostd_map_t *maps[] = {&t->streams, &t->events, &t->modules, &t->funcs, &t->ptds,
                         &t->views,   &t->pinned, &t->modids, &t->kids};
  for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
    hostd__map_close(maps[i]);
    hostd__map_init(maps[i]);
  }
  t->nranges = 0;
}

void hostd__tenant_free(hostd_tenant_t *t) {
  if (!t)
    return;
  pthread_rwlock_rdlock(&ctx_lock); /* not during a recovery */
  pthread_mutex_lock(&reg_lock);
  if (t->prev)
    t->prev->next = t->next;
  else
    live = t->next;
  if (t->next)
    t->next->prev = t->prev;
  pthread_mutex_unlock(&reg_lock);
  tenant_release(t, t->lost == CUDA_SUCCESS);
  pthread_rwlock_unlock(&ctx_lock);
  hostd_map_t *maps[] = {&t->streams, &t->events, &t->modules, &t->funcs, &t->ptds,
                         &t->views,   &t->pinned, &t->modids, &t->kids};
  for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
    hostd__map_close(maps[i]);
  free(t->ranges);
  free(t);
}

/* ---- recovery from context-corrupting errors ---- */

/* The name of r when it is one of the errors after which the driver refuses
 * every further call in the context (cuda.h: "This leaves the process in an
 * inconsistent state and any further CUDA work will return the same error"). */
const char *hostd__ctx_fatal(int r) {
  switch (r) {
#define FATAL(e)                                                                                   \
  case e:                                                                                          \
    return #e;
    FATAL(CUDA_ERROR_ECC_UNCORRECTABLE)
    FATAL(CUDA_ERROR_ILLEGAL_ADDRESS)
    FATAL(CUDA_ERROR_LAUNCH_TIMEOUT)
    FATAL(CUDA_ERROR_ASSERT)
    FATAL(CUDA_ERROR_HARDWARE_STACK_ERROR)
    FATAL(CUDA_ERROR_ILLEGAL_INSTRUCTION)
    FATAL(CUDA_ERROR_MISALIGNED_ADDRESS)
    FATAL(CUDA_ERROR_INVALID_ADDRESS_SPACE)
    FATAL(CUDA_ERROR_INVALID_PC)
    FATAL(CUDA_ERROR_LAUNCH_FAILED)
    FATAL(CUDA_ERROR_EXTERNAL_DEVICE)
#undef FATAL
  default:
    return NULL;
  }
}

/* Called by tenant t's worker, outside ctx_lock, after one of its calls
 * returned the context-corrupting error err.  Does nothing when a fault was
 * raised already (every tenant is lost since). */
static void recover(hostd_tenant_t *t, CUresult err) {
  unsigned n = 0;

  pthread_rwlock_wrlock(&ctx_lock);
  if (!hostd__fault_raise(t->id, (int)err)) {
    pthread_rwlock_unlock(&ctx_lock);
    return;
  }
  pthread_mutex_lock(&reg_lock);
  for (hostd_tenant_t *u = live; u; u = u->next) {
    u->lost = err;
    u->deferred = CUDA_SUCCESS;
    tenant_release(u, false);
    n++;
  }
  pthread_mutex_unlock(&reg_lock);
  hostd__log(HOSTD_LOG_ERROR,
             "tenant %u: %s (%d) corrupted the GPU's shared CUDA context; all %u live "
             "tenant(s) lost their memory, streams, events and modules and get this error on "
             "every further call; the driver keeps this process poisoned, so tallyd restarts "
             "once they have gone (hostd/README.md)",
             t->id, hostd__ctx_fatal(err), (int)err, n);
  pthread_rwlock_unlock(&ctx_lock);
}

/* The name of r when it says the daemon's context itself is unusable
 * (stale after a reset, never made current, driver gone): never caused by
 * the tenant, always worth a line in the log. */
static const char *ctx_error(CUresult r) {
  switch (r) {
  case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
  case CUDA_ERROR_INVALID_CONTEXT:
    return "CUDA_ERROR_INVALID_CONTEXT";
  case CUDA_ERROR_NOT_INITIALIZED:
    return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_DEINITIALIZED:
    return "CUDA_ERROR_DEINITIALIZED";
  case CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE:
    return "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE";
  default:
    return NULL;
  }
}

/* ---- requests ---- */

typedef struct exec {
  hostd_tenant_t *t;
  guest_rd_t rd;
  guest_wr_t *out; /* results (after the reply header) */
  const char *why; /* malformed: reason */
} exec_t;

static int func_rec(void *arg, const hostd_func_info_t *f) {
  exec_t *x = arg;
  uint32_t nlen = (uint32_t)strnlen(f->name, GUEST_FUNC_NAME_MAX - 1);
  guest_wr_u64(x->out, f->handle);
  guest_wr_u32(x->out, f->nparams);
  guest_wr_u32(x->out, nlen);
  guest_wr_u32(x->out, f->attr_valid);
  for (int a = 0; a < GUEST_FUNC_ATTRS; a++)
    guest_wr_u32(x->out, (uint32_t)f->attr[a]);
  guest_wr_bytes(x->out, f->name, nlen);
  for (uint32_t i = 0; i < f->nparams; i++) {
    guest_wr_u32(x->out, f->off[i]);
    guest_wr_u32(x->out, f->size[i]);
  }
  return x->out->err;
}

static CUresult do_hello(exec_t *x) {
  uint32_t ver = guest_rd_u32(&x->rd), prio = guest_rd_u32(&x->rd);
  char name[65], token[65];
  guest_rd_bytes(&x->rd, name, 64);
  guest_rd_bytes(&x->rd, token, 64);
  name[64] = token[64] = 0;
  if (x->rd.err)
    return CUDA_ERROR_INVALID_VALUE;
  if (ver != GUEST_PROTO_VERSION) {
    hostd__log(HOSTD_LOG_INFO, "tenant %u speaks call protocol %u, we speak %u", x->t->id, ver,
               GUEST_PROTO_VERSION);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  /* The token was checked by wire's handshake (network tenants only). */
  x->t->prio = prio == 0 ? hostd__snapshot.prio_greatest : hostd__snapshot.prio_least;
  x->t->hello = true;
  if (!x->t->sched)
    x->t->sched = hostd__sched_tenant_new(x->t->id, name, prio == 0 ? 0 : 1, 1);
  hostd__log(HOSTD_LOG_INFO, "tenant %u '%s' joined as %s", x->t->id, name,
             prio == 0 ? "latency-critical" : "best-effort");
  guest_wr_u32(x->out, x->t->id);
  guest_wr_u32(x->out, (uint32_t)hostd__ndev);
  guest_wr_bytes(x->out, &hostd__snapshot, sizeof(hostd__snapshot));
  return CUDA_SUCCESS;
}

/* Writes u64 h, u32 nfunc and the function records of module h to the reply
 * and registers every function handle as the tenant's.  On failure the
 * caller forgets the functions registered so far (module_forget). */
static CUresult describe_functions(exec_t *x, uint64_t h, int kind, uint64_t content_id) {
  size_t count_at, before;
  uint32_t n = 0;
  CUresult r;
  guest_rd_t rd;

  guest_wr_u64(x->out, h);
  count_at = x->out->len;
  guest_wr_u32(x->out, 0);
  before = x->out->len;
  r = hostd__gpu.module_functions(h, kind, func_rec, x);
  if (r == CUDA_SUCCESS && x->out->err)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  guest_rd_init(&rd, x->out->buf + before, r == CUDA_SUCCESS ? x->out->len - before : 0);
  while (r == CUDA_SUCCESS && rd.left > 0) {
    uint64_t fh = guest_rd_u64(&rd);
    uint32_t np = guest_rd_u32(&rd), nl = guest_rd_u32(&rd);
    const uint8_t *nm;
    char name[GUEST_FUNC_NAME_MAX];
    guest_rd_bytes(&rd, NULL, 4 + GUEST_FUNC_ATTRS * 4);
    nm = guest_rd_view(&rd, nl);
    guest_rd_bytes(&rd, NULL, (size_t)np * 8);
    if (!rd.err && nl < sizeof(name)) {
      memcpy(name, nm, nl);
      name[nl] = 0;
    } else {
      name[0] = 0;
    }
    if (rd.err || hostd__map_put(&x->t->funcs, fh, h) != 0 ||
        (x->t->sched &&
         hostd__map_put(&x->t->kids, fh, hostd__sched_kernel_id(content_id, name)) != 0))
      r = CUDA_ERROR_OUT_OF_MEMORY;
    n++;
  }
  if (r == CUDA_SUCCESS)
    memcpy(x->out->buf + count_at, &n, 4);
  return r;
}

static CUresult do_module_load(exec_t *x) {
  uint64_t id = guest_rd_u64(&x->rd), h = 0;
  uint32_t kind = guest_rd_u32(&x->rd), has = guest_rd_u32(&x->rd);
  const void *img;
  size_t len;
  CUresult r;

  if (x->rd.err || kind > KIND_LIBRARY)
    return CUDA_ERROR_INVALID_VALUE;
  if (has) {
    len = x->rd.left;
    img = guest_rd_view(&x->rd, len);
    if (hostd__modcache_put(id, img, len) != 0)
      return CUDA_ERROR_INVALID_IMAGE; /* the id does not match the bytes */
  }
  img = hostd__modcache_get(id, &len);
  if (!img)
    return CUDA_ERROR_FILE_NOT_FOUND; /* the guest must offer the blob first */
  r = hostd__gpu.module_load(&h, (int)kind, img, len);
  if (r != CUDA_SUCCESS)
    return r;
  if (hostd__map_put(&x->t->modules, h, kind) != 0) {
    (void)hostd__gpu.module_unload(h, (int)kind);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (hostd__map_put(&x->t->modids, h, id) != 0)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  else
    r = describe_functions(x, h, (int)kind, id);
  if (r != CUDA_SUCCESS) {
    module_forget(x->t, h);
    hostd__map_del(&x->t->modules, h);
    hostd__map_del(&x->t->modids, h);
    (void)hostd__gpu.module_unload(h, (int)kind);
  }
  return r;
}

static CUresult do_library_module(exec_t *x) {
  uint64_t lib = guest_rd_u64(&x->rd), mod = 0, kind, cid = 0;
  CUresult r;
  if (x->rd.err || !hostd__map_get(&x->t->modules, lib, &kind) || kind != KIND_LIBRARY)
    return CUDA_ERROR_INVALID_HANDLE;
  (void)hostd__map_get(&x->t->modids, lib, &cid);
  if (hostd__map_get(&x->t->views, lib, &mod))
    return describe_functions(x, mod, KIND_MODULE, cid); /* asked before: the same view */
  r = hostd__gpu.library_module(lib, &mod);
  if (r != CUDA_SUCCESS)
    return r;
  if (hostd__map_put(&x->t->views, lib, mod) != 0 ||
      hostd__map_put(&x->t->modules, mod, KIND_VIEW) != 0) {
    hostd__map_del(&x->t->views, lib);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r = describe_functions(x, mod, KIND_MODULE, cid);
  if (r != CUDA_SUCCESS) {
    module_forget(x->t, mod);
    hostd__map_del(&x->t->modules, mod);
    hostd__map_del(&x->t->views, lib);
  }
  return r;
}

static CUresult do_launch(exec_t *x) {
  uint64_t f = guest_rd_u64(&x->rd), s, mod;
  uint32_t grid[3], block[3], shmem, nattr, argbytes;
  const CUlaunchAttribute *attrs;
  uint8_t *args;
  tstream_t *ts;
  CUresult r;

  guest_rd_bytes(&x->rd, grid, 12);
  guest_rd_bytes(&x->rd, block, 12);
  shmem = guest_rd_u32(&x->rd);
  nattr = guest_rd_u32(&x->rd);
  s = guest_rd_u64(&x->rd);
  argbytes = guest_rd_u32(&x->rd);
  (void)guest_rd_u32(&x->rd);
  if (x->rd.err || nattr > 64 || argbytes > 32768)
    return CUDA_ERROR_INVALID_VALUE;
  attrs =
      (const CUlaunchAttribute *)guest_rd_view(&x->rd, (size_t)nattr * sizeof(CUlaunchAttribute));
  args = (uint8_t *)guest_rd_view(&x->rd, argbytes);
  if (x->rd.err)
    return CUDA_ERROR_INVALID_VALUE;
  if (!hostd__map_get(&x->t->funcs, f, &mod))
    return CUDA_ERROR_INVALID_HANDLE;
  for (uint32_t i = 0; i < nattr; i++) {
    /* An event attribute names a handle: it must be the tenant's own. */
    CUlaunchAttribute a;
    memcpy(&a, &attrs[i], sizeof(a));
    if ((a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
         a.id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) &&
        !hostd__map_get(&x->t->events, (uint64_t)(uintptr_t)a.value.programmaticEvent.event, NULL))
      return CUDA_ERROR_INVALID_HANDLE;
  }
  ts = stream_of(x->t, s, &r);
  if (!ts)
    return r;
  r = stream_enter_op(x->t, ts, true);
  if (r != CUDA_SUCCESS)
    return r;
  /* Copy to aligned storage: the view into the frame may be unaligned. */
  {
    CUlaunchAttribute al[64];
    uint64_t argbuf[32768 / 8];
    memcpy(al, attrs, (size_t)nattr * sizeof(CUlaunchAttribute));
    memcpy(argbuf, args, argbytes);
    if (!x->t->sched)
      return hostd__gpu.launch(f, grid, block, shmem, ts->handle, al, nattr, argbuf, argbytes);
    if (!ts->ss && !(ts->ss = hostd__sched_stream_new(x->t->sched, ts->handle, &r)))
      return r;
    hostd_sched_launch_t l = {.f = f, .shmem = shmem, .attrs = al, .nattr = nattr,
                              .args = argbuf, .argbytes = argbytes};
    (void)hostd__map_get(&x->t->kids, f, &l.kernel_id);
    memcpy(l.grid, grid, sizeof(l.grid));
    memcpy(l.block, block, sizeof(l.block));
    return hostd__sched_launch(ts->ss, &l);
  }
}

/* cuOccupancyMaxActiveClusters / cuOccupancyMaxPotentialClusterSize: the
 * function must be the tenant's own; the launch config is rebuilt here from
 * fixed fields, so no attribute but the two cluster ones reaches the driver. */
static CUresult do_occupancy(exec_t *x) {
  uint64_t f = guest_rd_u64(&x->rd), mod, kind;
  uint32_t which = guest_rd_u32(&x->rd), grid[3], block[3], cluster[3];
  CUlaunchAttribute at[2];
  CUlaunchConfig c;
  int32_t policy;
  int v = 0;
  CUresult r;

  guest_rd_bytes(&x->rd, grid, 12);
  guest_rd_bytes(&x->rd, block, 12);
  memset(&c, 0, sizeof(c));
  c.sharedMemBytes = guest_rd_u32(&x->rd);
  guest_rd_bytes(&x->rd, cluster, 12);
  policy = (int32_t)guest_rd_u32(&x->rd);
  if (x->rd.err || which > 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (!hostd__map_get(&x->t->funcs, f, &mod) || !hostd__map_get(&x->t->modules, mod, &kind))
    return CUDA_ERROR_INVALID_HANDLE;
  c.gridDimX = grid[0], c.gridDimY = grid[1], c.gridDimZ = grid[2];
  c.blockDimX = block[0], c.blockDimY = block[1], c.blockDimZ = block[2];
  memset(at, 0, sizeof(at));
  if (cluster[0] || cluster[1] || cluster[2]) {
    at[c.numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at[c.numAttrs].value.clusterDim.x = cluster[0];
    at[c.numAttrs].value.clusterDim.y = cluster[1];
    at[c.numAttrs].value.clusterDim.z = cluster[2];
    c.numAttrs++;
  }
  if (policy >= 0) {
    at[c.numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    at[c.numAttrs].value.clusterSchedulingPolicyPreference = (CUclusterSchedulingPolicy)policy;
    c.numAttrs++;
  }
  c.attrs = c.numAttrs ? at : NULL;
  r = hostd__gpu.occupancy(f, kind == KIND_VIEW ? KIND_MODULE : (int)kind, (int)which, &c, &v);
  guest_wr_u32(x->out, (uint32_t)v);
  return r;
}

/* PINNED_COPY: between the tenant's device memory and its shared pinned
 * allocation `tag`, from the daemon's mapping of it: real DMA on the
 * tenant's stream when registered.  A range outside either side is
 * CUDA_ERROR_INVALID_VALUE (the guest sends only copies that fit). */
static CUresult do_pinned_copy(exec_t *x) {
  uint64_t p = guest_rd_u64(&x->rd), tag = guest_rd_u64(&x->rd), off = guest_rd_u64(&x->rd);
  uint64_t len = guest_rd_u64(&x->rd), s = guest_rd_u64(&x->rd), v;
  uint32_t dir = guest_rd_u32(&x->rd), async = guest_rd_u32(&x->rd);
  const pinned_t *pin;
  tstream_t *ts;
  CUresult r;

  if (x->rd.err || dir > 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (!hostd__map_get(&x->t->pinned, tag, &v))
    return CUDA_ERROR_INVALID_VALUE; /* not this tenant's */
  pin = (const pinned_t *)(uintptr_t)v;
  if (off > pin->size || len > pin->size - off || !owns(x->t, p, len))
    return CUDA_ERROR_INVALID_VALUE;
  if (!(ts = stream_of(x->t, s, &r)) || (r = stream_enter(x->t, ts)) != CUDA_SUCCESS)
    return r;
  if (dir == 0)
    return hostd__gpu.htod(p, pin->addr + off, len, ts->handle, async != 0);
  return async ? hostd__gpu.dtoh_async(pin->addr + off, p, len, ts->handle)
               : hostd__gpu.dtoh(pin->addr + off, p, len, ts->handle);
}

/* Executes one request; results go to x->out.  Returns the CUresult, or sets
 * x->why (malformed request) and returns CUDA_ERROR_INVALID_VALUE. */
static CUresult dispatch(exec_t *x, uint32_t op) {
  hostd_tenant_t *t = x->t;
  guest_rd_t *rd = &x->rd;
  tstream_t *ts;
  CUresult r;
  uint64_t a, b, c, d;

  if (op != GUEST_OP_HELLO && !t->hello) {
    x->why = "request before hello";
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  switch (op) {
  case GUEST_OP_HELLO:
    return do_hello(x);
  case GUEST_OP_MEM_ALLOC:
    a = guest_rd_u64(rd);
    if (rd->err || a == 0)
      return CUDA_ERROR_INVALID_VALUE;
    r = hostd__gpu.mem_alloc(&b, a);
    if (r != CUDA_SUCCESS)
      return r;
    if (range_add(t, b, a, RANGE_ALLOC, 0) != 0) {
      (void)hostd__gpu.mem_free(b);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    guest_wr_u64(x->out, b);
    return CUDA_SUCCESS;
  case GUEST_OP_MEM_FREE: {
    size_t i;
    a = guest_rd_u64(rd);
    i = range_upper(t, a);
    if (rd->err || i == 0 || t->ranges[i - 1].base != a || t->ranges[i - 1].kind != RANGE_ALLOC)
      return CUDA_ERROR_INVALID_VALUE;
    /* Held launches may use it: they go out first, as launched work would. */
    if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
      return r;
    r = hostd__gpu.mem_free(a);
    if (r == CUDA_SUCCESS)
      range_del_at(t, i - 1);
    return r;
  }
  case GUEST_OP_MEM_INFO:
    r = hostd__gpu.mem_info(&a, &b);
    guest_wr_u64(x->out, a);
    guest_wr_u64(x->out, b);
    return r;
  case GUEST_OP_HTOD: {
    const uint8_t *bytes;
    a = guest_rd_u64(rd);
    b = guest_rd_u64(rd);
    c = guest_rd_u64(rd); /* async */
    d = rd->left;
    bytes = guest_rd_view(rd, d);
    if (rd->err)
      return CUDA_ERROR_INVALID_VALUE;
    if (!owns(t, a, d))
      return CUDA_ERROR_INVALID_VALUE;
    if (!(ts = stream_of(t, b, &r)) || (r = stream_enter(t, ts)) != CUDA_SUCCESS)
      return r;
    return hostd__gpu.htod(a, bytes, d, ts->handle, (int)c);
  }
  case GUEST_OP_DTOH: {
    a = guest_rd_u64(rd);
    b = guest_rd_u64(rd);
    c = guest_rd_u64(rd);
    if (rd->err || b > GUEST_CALL_MAX_LEN)
      return CUDA_ERROR_INVALID_VALUE;
    if (!owns(t, a, b))
      return CUDA_ERROR_INVALID_VALUE;
    if (!(ts = stream_of(t, c, &r)) || (r = stream_enter(t, ts)) != CUDA_SUCCESS)
      return r;
    if (guest_wr_reserve(x->out, b) != 0)
      return CUDA_ERROR_OUT_OF_MEMORY;
    r = hostd__gpu.dtoh(x->out->buf + x->out->len, a, b, ts->handle);
    if (r == CUDA_SUCCESS)
      x->out->len += b;
    return r;
  }
  case GUEST_OP_DTOD:
    a = guest_rd_u64(rd);
    b = guest_rd_u64(rd);
    c = guest_rd_u64(rd);
    d = guest_rd_u64(rd);
    if (rd->err || !owns(t, a, c) || !owns(t, b, c))
      return CUDA_ERROR_INVALID_VALUE;
    if (!(ts = stream_of(t, d, &r)) || (r = stream_enter(t, ts)) != CUDA_SUCCESS)
      return r;
    return hostd__gpu.dtod(a, b, c, ts->handle, 1);
  case GUEST_OP_MEMSET: {
    uint32_t v, elem;
    a = guest_rd_u64(rd);
    v = guest_rd_u32(rd);
    elem = guest_rd_u32(rd);
    b = guest_rd_u64(rd);
    c = guest_rd_u64(rd);
    if (rd->err || (elem != 1 && elem != 2 && elem != 4) || b > (UINT64_MAX / 4))
      return CUDA_ERROR_INVALID_VALUE;
    if (!owns(t, a, b * elem))
      return CUDA_ERROR_INVALID_VALUE;
    if (!(ts = stream_of(t, c, &r)) || (r = stream_enter(t, ts)) != CUDA_SUCCESS)
      return r;
    return hostd__gpu.memset(a, v, elem, b, ts->handle);
  }
  case GUEST_OP_STREAM_NEW: {
    uint32_t flags = guest_rd_u32(rd);
    (void)guest_rd_u32(rd); /* the tenant's own priority: its class decides */
    if (rd->err)
      return CUDA_ERROR_INVALID_VALUE;
    ts = stream_make(t, flags, &r);
    if (!ts)
      return r;
    if (hostd__map_put(&t->streams, ts->handle, (uint64_t)(uintptr_t)ts) != 0) {
      stream_drop(ts);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    guest_wr_u64(x->out, ts->handle);
    return CUDA_SUCCESS;
  }
  case GUEST_OP_STREAM_DEL:
    a = guest_rd_u64(rd);
    if (rd->err || !hostd__map_get(&t->streams, a, &b))
      return CUDA_ERROR_INVALID_HANDLE;
    hostd__map_del(&t->streams, a);
    if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
      return r;
    stream_drop((tstream_t *)(uintptr_t)b);
    return CUDA_SUCCESS;
  case GUEST_OP_STREAM_SYNC:
  case GUEST_OP_STREAM_QUERY:
    a = guest_rd_u64(rd);
    if (rd->err)
      return CUDA_ERROR_INVALID_VALUE;
    if (!(ts = stream_of(t, a, &r)) || (r = stream_fence(ts)) != CUDA_SUCCESS)
      return r;
    if (ts == t->legacy && (r = stream_enter(t, ts)) != CUDA_SUCCESS)
      return r; /* syncing the legacy stream also waits for blocking streams */
    return op == GUEST_OP_STREAM_SYNC ? hostd__gpu.stream_sync(ts->handle)
                                      : hostd__gpu.stream_query(ts->handle);
  case GUEST_OP_CTX_SYNC:
    /* The tenant's streams only: the context is shared with other tenants.
     * The legacy stream always (made if need be), so a corrupted context is
     * reported even to a tenant that never used a stream, as natively. */
    if (!(ts = stream_of(t, 0, &r)))
      return r;
    if ((r = stream_fence(ts)) == CUDA_SUCCESS)
      r = hostd__gpu.stream_sync(ts->handle);
    for (size_t i = 0; r == CUDA_SUCCESS && i < t->ptds.cap + t->streams.cap; i++) {
      const hostd_map_t *m = i < t->ptds.cap ? &t->ptds : &t->streams;
      size_t j = i < t->ptds.cap ? i : i - t->ptds.cap;
      if (!m->keys[j])
        continue;
      ts = (tstream_t *)(uintptr_t)m->vals[j];
      if ((r = stream_fence(ts)) == CUDA_SUCCESS)
        r = hostd__gpu.stream_sync(ts->handle);
    }
    return r;
  case GUEST_OP_EVENT_NEW: {
    uint32_t flags = guest_rd_u32(rd);
    if (rd->err)
      return CUDA_ERROR_INVALID_VALUE;
    r = hostd__gpu.event_new(&a, flags);
    if (r != CUDA_SUCCESS)
      return r;
    if (hostd__map_put(&t->events, a, 1) != 0) {
      (void)hostd__gpu.event_del(a);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    guest_wr_u64(x->out, a);
    return CUDA_SUCCESS;
  }
  case GUEST_OP_EVENT_DEL:
    a = guest_rd_u64(rd);
    if (rd->err || !hostd__map_del(&t->events, a))
      return CUDA_ERROR_INVALID_HANDLE;
    return hostd__gpu.event_del(a);
  case GUEST_OP_EVENT_RECORD:
    a = guest_rd_u64(rd);
    b = guest_rd_u64(rd);
    c = guest_rd_u64(rd);
    if (rd->err || !hostd__map_get(&t->events, a, NULL))
      return CUDA_ERROR_INVALID_HANDLE;
    if (!(ts = stream_of(t, b, &r)) || (r = stream_enter(t, ts)) != CUDA_SUCCESS)
      return r;
    return hostd__gpu.event_record(a, ts->handle, (unsigned)c);
  case GUEST_OP_EVENT_SYNC:
  case GUEST_OP_EVENT_QUERY:
    a = guest_rd_u64(rd);
    if (rd->err || !hostd__map_get(&t->events, a, NULL))
      return CUDA_ERROR_INVALID_HANDLE;
    return op == GUEST_OP_EVENT_SYNC ? hostd__gpu.event_sync(a) : hostd__gpu.event_query(a);
  case GUEST_OP_EVENT_TIME: {
    float ms = 0;
    a = guest_rd_u64(rd);
    b = guest_rd_u64(rd);
    if (rd->err || !hostd__map_get(&t->events, a, NULL) || !hostd__map_get(&t->events, b, NULL))
      return CUDA_ERROR_INVALID_HANDLE;
    r = hostd__gpu.event_time(&ms, a, b);
    guest_wr_bytes(x->out, &ms, sizeof(ms));
    return r;
  }
  case GUEST_OP_STREAM_WAIT:
    a = guest_rd_u64(rd);
    b = guest_rd_u64(rd);
    c = guest_rd_u64(rd);
    if (rd->err || !hostd__map_get(&t->events, b, NULL))
      return CUDA_ERROR_INVALID_HANDLE;
    if (!(ts = stream_of(t, a, &r)) || (r = stream_enter(t, ts)) != CUDA_SUCCESS)
      return r;
    return hostd__gpu.stream_wait(ts->handle, b, (unsigned)c);
  case GUEST_OP_MODULE_LOAD:
    return do_module_load(x);
  case GUEST_OP_MODULE_UNLOAD: {
    uint32_t kind;
    a = guest_rd_u64(rd);
    kind = guest_rd_u32(rd);
    if (rd->err || !hostd__map_get(&t->modules, a, &b) || b != kind)
      return CUDA_ERROR_INVALID_HANDLE;
    if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
      return r;
    r = hostd__gpu.module_unload(a, (int)kind);
    if (r == CUDA_SUCCESS) {
      module_forget(t, a);
      hostd__map_del(&t->modules, a);
      if (kind == KIND_LIBRARY && hostd__map_get(&t->views, a, &c)) {
        module_forget(t, c); /* the view died with its library */
        hostd__map_del(&t->modules, c);
        hostd__map_del(&t->views, a);
      }
    }
    return r;
  }
  case GUEST_OP_MODULE_GLOBAL: {
    uint32_t kind;
    char name[GUEST_FUNC_NAME_MAX];
    a = guest_rd_u64(rd);
    kind = guest_rd_u32(rd);
    d = rd->left;
    if (rd->err || d >= sizeof(name))
      return CUDA_ERROR_INVALID_VALUE;
    guest_rd_bytes(rd, name, d);
    name[d] = 0;
    if (!hostd__map_get(&t->modules, a, &b) || b != kind)
      return CUDA_ERROR_INVALID_HANDLE;
    r = hostd__gpu.module_global(a, (int)kind, name, &b, &c);
    if (r != CUDA_SUCCESS)
      return r;
    if (range_add(t, b, c, RANGE_GLOBAL, a) != 0)
      return CUDA_ERROR_OUT_OF_MEMORY;
    guest_wr_u64(x->out, b);
    guest_wr_u64(x->out, c);
    return CUDA_SUCCESS;
  }
  case GUEST_OP_LAUNCH:
    return do_launch(x);
  case GUEST_OP_LIBRARY_MODULE:
    return do_library_module(x);
  case GUEST_OP_FUNC_ATTR:
  case GUEST_OP_FUNC_SET_ATTR: {
    int32_t attr, v = 0;
    a = guest_rd_u64(rd);
    attr = (int32_t)guest_rd_u32(rd);
    if (op == GUEST_OP_FUNC_SET_ATTR)
      v = (int32_t)guest_rd_u32(rd);
    if (rd->err)
      return CUDA_ERROR_INVALID_VALUE;
    if (!hostd__map_get(&t->funcs, a, &b) || !hostd__map_get(&t->modules, b, &c))
      return CUDA_ERROR_INVALID_HANDLE;
    if (c == KIND_VIEW)
      c = KIND_MODULE;
    if (op == GUEST_OP_FUNC_SET_ATTR)
      return hostd__gpu.func_set_attr(a, (int)c, attr, v);
    r = hostd__gpu.func_attr(a, (int)c, attr, &v);
    guest_wr_u32(x->out, (uint32_t)v);
    return r;
  }
  case GUEST_OP_OCCUPANCY:
    return do_occupancy(x);
  case GUEST_OP_HOSTFN:
    a = guest_rd_u64(rd);
    b = guest_rd_u64(rd);
    if (rd->err || b == 0)
      r = CUDA_ERROR_INVALID_VALUE;
    else if (!t->hf)
      r = CUDA_ERROR_NOT_SUPPORTED; /* driven without server.c (tests) */
    else if ((ts = stream_of(t, a, &r)) && (r = stream_enter(t, ts)) == CUDA_SUCCESS)
      return (CUresult)hostd__hostfn_enqueue(t->hf, ts->handle, b);
    if (t->hf)
      hostd__hostfn_post_failed(t->hf);
    return r;
  case GUEST_OP_HOSTFN_WAIT:
    x->why = "HOSTFN_WAIT is answered by the loop thread, never queued";
    return CUDA_ERROR_INVALID_VALUE;
  case GUEST_OP_PINNED_COPY:
    return do_pinned_copy(x);
  case GUEST_OP_PINNED_FREE: {
    pinned_t *pin;
    a = guest_rd_u64(rd);
    if (rd->err || !hostd__map_get(&t->pinned, a, &b))
      return CUDA_ERROR_INVALID_VALUE;
    pin = (pinned_t *)(uintptr_t)b;
    /* cuMemFreeHost: earlier copies of this tenant may still use it. */
    for (size_t i = 0; i < t->streams.cap; i++)
      if (t->streams.keys[i])
        (void)hostd__gpu.stream_sync(t->streams.keys[i]);
    for (size_t i = 0; i < t->ptds.cap; i++)
      if (t->ptds.keys[i])
        (void)hostd__gpu.stream_sync(((tstream_t *)(uintptr_t)t->ptds.vals[i])->handle);
    if (t->legacy)
      (void)hostd__gpu.stream_sync(t->legacy->handle);
    hostd__map_del(&t->pinned, a);
    pinned_drop(pin, true);
    return CUDA_SUCCESS;
  }
  default:
    x->why = "unknown op";
    return CUDA_ERROR_INVALID_VALUE;
  }
}

int hostd__tenant_exec(hostd_tenant_t *t, uint32_t op, uint32_t flags, const uint8_t *args,
                       size_t len, guest_wr_t *reply, const char **why) {
  exec_t x;
  uint8_t hdr[GUEST_REPLY_HDR_LEN] = {0};
  CUresult r, lost;
  uint32_t res, rlen;

  memset(&x, 0, sizeof(x));
  x.t = t;
  guest_rd_init(&x.rd, args, len);
  reply->len = 0;
  reply->err = 0;
  guest_wr_bytes(reply, hdr, sizeof(hdr)); /* filled below */
  x.out = reply;
  if (op < GUEST_OP_COUNT)
    __atomic_fetch_add(&hostd__op_count[op], 1, __ATOMIC_RELAXED);
  pthread_rwlock_rdlock(&ctx_lock);
  lost = t->lost; /* read under the lock: recover() writes it */
  r = CUDA_SUCCESS;
  if (!entered) {
    /* First request of this thread: the shared context becomes current. */
    r = hostd__gpu.thread_enter();
    entered = r == CUDA_SUCCESS;
  }
  if (lost != CUDA_SUCCESS && op != GUEST_OP_HELLO)
    r = lost; /* everything it had is gone: every call fails, as natively */
  else if (r == CUDA_SUCCESS)
    r = dispatch(&x, op);
  pthread_rwlock_unlock(&ctx_lock);
  if (!x.why && ctx_error(r) && !t->ctx_err_logged) {
    /* A context-level error is never a tenant's mistake: say so once. */
    t->ctx_err_logged = true;
    hostd__log(HOSTD_LOG_INFO, "tenant %u: op %u failed with %s (%d) from the driver", t->id, op,
               ctx_error(r), (int)r);
  }
  if (!x.why && lost == CUDA_SUCCESS && hostd__ctx_fatal(r))
    recover(t, r); /* a no-op when another tenant's call recovered first */
  if (x.why) {
    *why = x.why;
    return -EPROTO;
  }
  if (flags & GUEST_CALL_ASYNC) {
    if (r != CUDA_SUCCESS && t->deferred == CUDA_SUCCESS) {
      /* Surfaces at the tenant's next GUEST_CALL_SYNCPOINT request. */
      t->deferred = r;
      hostd__log(HOSTD_LOG_DEBUG, "tenant %u: async op %u failed with %d (deferred)", t->id, op, r);
    }
    reply->len = 0;
    return 0;
  }
  if (r != CUDA_SUCCESS)
    reply->len = sizeof(hdr); /* no results with an error */
  if ((flags & GUEST_CALL_SYNCPOINT) && t->deferred == CUDA_SUCCESS && t->sched)
    t->deferred = hostd__sched_take_error(t->sched); /* a held launch's failure */
  if ((flags & GUEST_CALL_SYNCPOINT) && t->deferred != CUDA_SUCCESS) {
    if (r == CUDA_SUCCESS) {
      r = t->deferred;
      reply->len = sizeof(hdr);
    }
    t->deferred = CUDA_SUCCESS;
  }
  if (reply->err)
    return reply->err;
  res = (uint32_t)r;
  rlen = (uint32_t)(reply->len - sizeof(hdr));
  memcpy(reply->buf, &res, 4);
  memcpy(reply->buf + 4, &rlen, 4);
  return 0;
}
