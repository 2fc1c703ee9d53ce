/* tenant.c: one tenant's tables, ranges, streams and recovery.
 *
 * The execution of its requests is exec.c (a handler per op); this file
 * owns what they act on and the frame around each request (locking, kept
 * errors, the reply header).
 *
 * A tenant owns what it created and nothing else: allocations (a sorted
 * range table), streams, events, modules and their functions (hash maps).
 * Every handle and pointer range in a request is checked against these
 * tables before the GPU backend sees it; a copy, memset or free that
 * touches memory the tenant does not own fails with
 * CUDA_ERROR_INVALID_VALUE, a foreign handle with CUDA_ERROR_INVALID_HANDLE
 * (docs/decisions.md, D2: pointers are identity-mapped, so the check is all
 * that separates tenants).  Launch arguments are not checked: a kernel may still
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
 * by the next request flagged CALL_SYNCPOINT, then cleared (docs/decisions.md,
 * D3).
 *
 * Sticky errors.  A kernel fault (illegal address, ...) corrupts the CUDA
 * context, and all tenants share one (docs/decisions.md, D4); worse, on the real
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
 * by recover(), which holds the context lock (ctxlock.c) for writing while
 * every request holds it for reading (so no request runs while tenants are
 * marked lost).  `lost` and the live list (reg_lock, taken after the context
 * lock) are written under the write lock; the fault record (restart.c) is
 * raised under it too.
 */
#include "hostd/tenant-int.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

bool hostd__op_count_on;
unsigned long hostd__op_count[CALL_OP_COUNT];

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static hostd_tenant_t *live; /* every tenant not yet freed */
/* Whether this thread made the context current; every worker thread does
 * before its first request. */
static __thread bool entered;

call_snapshot_t hostd__snapshot;
int hostd__ndev;

hostd_tenant_t *hostd__tenant_new(uint32_t id, bool tcp) {
  hostd_tenant_t *t = calloc(1, sizeof(*t));
  if (!t)
    return NULL;
  t->id = id;
  t->tcp = tcp;
  t->prio = hostd__snapshot.prio_least;
  u64map_init(&t->streams);
  u64map_init(&t->events);
  u64map_init(&t->modules);
  u64map_init(&t->funcs);
  u64map_init(&t->ptds);
  u64map_init(&t->views);
  u64map_init(&t->pinned);
  u64map_init(&t->unpinned);
  u64map_init(&t->modids);
  u64map_init(&t->kids);
  u64map_init(&t->vmh);
  u64map_init(&t->vas);
  u64map_init(&t->pools);
  u64map_init(&t->graphs);
  u64map_init(&t->gnodes);
  u64map_init(&t->gexecs);
  u64map_init(&t->captures);
  u64map_init(&t->arrays);
  u64map_init(&t->texs);
  hostd__ctxlock_rd();
  /* After a fault this process serves nobody until it restarts. */
  t->lost = (CUresult)hostd__fault_pending(NULL);
  pthread_mutex_lock(&reg_lock);
  t->next = live;
  if (live)
    live->prev = t;
  live = t;
  pthread_mutex_unlock(&reg_lock);
  hostd__ctxlock_rd_done();
  return t;
}

uint32_t hostd__tenant_id(const hostd_tenant_t *t) {
  return t->id;
}

void hostd__tenant_set_hostfn(hostd_tenant_t *t, hostd_hostfn_t *h) {
  t->hf = h;
}

/* Whether [tag, tag + size) meets a mapping of t's that PINNED_FREE handed
 * to the release thread (its `unpinned` table). */
static bool unpinned_meets(const hostd_tenant_t *t, uint64_t tag, size_t size) {
  for (size_t i = 0; i < t->unpinned.cap; i++) {
    uint64_t k = t->unpinned.keys[i];
    if (k && k < tag + size && tag < k + t->unpinned.vals[i])
      return true;
  }
  return false;
}

/* Waits for the releases queued so far: every mapping in t's `unpinned`
 * table is unmapped then, so the table is emptied. */
static void unpinned_forget(hostd_tenant_t *t) {
  hostd__release_drain();
  u64map_close(&t->unpinned);
  u64map_init(&t->unpinned);
}

/* addr was mapped elsewhere because the guest's address `tag` was taken
 * here.  When what took it is a mapping of this tenant's that PINNED_FREE
 * handed to the release thread (the guest's allocator gives the same
 * address back at once), the releases queued so far are made, and the
 * mapping moves to the guest's address, so the device reaches the memory
 * there.  Returns where the mapping is now. */
static void *pinned_move(hostd_tenant_t *t, void *addr, size_t size, uint64_t tag) {
  void *want = (void *)(uintptr_t)tag, *r;
  if (!unpinned_meets(t, tag, size))
    return addr;
  unpinned_forget(t);
  r = mmap(want, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  if (r == MAP_FAILED)
    return addr;
  if (r != want) { /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
    munmap(r, size);
    return addr;
  }
  /* Replaces the reservation just made, nothing else. */
  r = mremap(addr, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, want);
  if (r == MAP_FAILED) {
    munmap(want, size);
    return addr;
  }
  return r;
}

void hostd__tenant_unpinned(hostd_tenant_t *t, uint64_t tag, size_t size) {
  /* Bounded: past 64, the releases are waited for and all are forgotten. */
  if (t->unpinned.len >= 64)
    unpinned_forget(t);
  (void)u64map_put(&t->unpinned, tag, size); /* no memory: only the move is lost */
}

int hostd__tenant_pinned_add(hostd_tenant_t *t, uint64_t tag, void *addr, size_t size) {
  pinned_t *p;
  CUresult r;
  if ((uint64_t)(uintptr_t)addr != tag && tag != 0)
    addr = pinned_move(t, addr, size, tag);
  if (tag == 0 || u64map_get(&t->pinned, tag, NULL)) {
    munmap(addr, size);
    return -EEXIST;
  }
  p = calloc(1, sizeof(*p));
  if (!p || u64map_put(&t->pinned, tag, (uint64_t)(uintptr_t)p) != 0) {
    free(p);
    munmap(addr, size);
    return -ENOMEM;
  }
  p->addr = addr;
  p->size = size;
  hostd__ctxlock_rd();
  r = t->lost;
  if (r == CUDA_SUCCESS && !entered) { /* as in hostd__tenant_exec */
    r = hostd__gpu.thread_enter();
    entered = r == CUDA_SUCCESS;
  }
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.host_register(addr, size);
  hostd__ctxlock_rd_done();
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
void hostd__pinned_drop(pinned_t *p, bool gpu) {
  if (gpu && p->registered)
    (void)hostd__gpu.host_unregister(p->addr);
  munmap(p->addr, p->size);
  free(p);
}

/* ---- ranges ---- */

size_t hostd__range_upper(const hostd_tenant_t *t, uint64_t p) {
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

int hostd__range_add(hostd_tenant_t *t, uint64_t base, uint64_t size, int kind, uint64_t module) {
  size_t i;
  if (t->nranges == t->capranges) {
    size_t cap = t->capranges ? t->capranges * 2 : 64;
    range_t *n = realloc(t->ranges, cap * sizeof(*n));
    if (!n)
      return -ENOMEM;
    t->ranges = n;
    t->capranges = cap;
  }
  i = hostd__range_upper(t, base);
  if (i > 0 && t->ranges[i - 1].base == base)
    return 0; /* a global asked for twice */
  memmove(&t->ranges[i + 1], &t->ranges[i], (t->nranges - i) * sizeof(*t->ranges));
  t->ranges[i] = (range_t){base, size, kind, module};
  t->nranges++;
  return 0;
}

/* True when [p, p+n) lies inside one range of the tenant. */
/* VMM mappings placed back to back count as one range (a tensor may span
 * two mappings of one reservation, as in PyTorch's expandable segments). */
bool hostd__owns(const hostd_tenant_t *t, uint64_t p, uint64_t n) {
  size_t i = hostd__range_upper(t, p);
  const range_t *r;
  if (i == 0)
    return false;
  r = &t->ranges[i - 1];
  if (p - r->base > r->size)
    return false;
  while (n > r->size - (p - r->base)) {
    if (r->kind != RANGE_MAPPED || i >= t->nranges || t->ranges[i].kind != RANGE_MAPPED ||
        t->ranges[i].base != r->base + r->size)
      return false;
    n -= r->size - (p - r->base);
    p = t->ranges[i].base;
    r = &t->ranges[i++];
  }
  return true;
}

bool hostd__owns_dev(const hostd_tenant_t *t, uint64_t p, uint64_t n) {
  if (hostd__owns(t, p, n))
    return true;
  for (size_t i = 0; i < t->pinned.cap; i++) {
    const pinned_t *pin;
    uint64_t base;
    if (!t->pinned.keys[i])
      continue;
    pin = (const pinned_t *)(uintptr_t)t->pinned.vals[i];
    base = (uint64_t)(uintptr_t)pin->addr;
    if (pin->registered && base == t->pinned.keys[i] && p >= base && p - base <= pin->size &&
        n <= pin->size - (p - base))
      return true;
  }
  return false;
}

void hostd__range_del_at(hostd_tenant_t *t, size_t i) {
  memmove(&t->ranges[i], &t->ranges[i + 1], (t->nranges - i - 1) * sizeof(*t->ranges));
  t->nranges--;
}

/* ---- streams ---- */

tstream_t *hostd__stream_make(hostd_tenant_t *t, unsigned flags, CUresult *r) {
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

void hostd__stream_drop(tstream_t *s) {
  stream_release(s, true);
}

/* Resolves a guest stream value; creates the emulated ones on first use.
 * Returns NULL with *r set for a stream the tenant does not own. */
tstream_t *hostd__stream_of(hostd_tenant_t *t, uint64_t s, CUresult *r) {
  uint64_t v;
  *r = CUDA_SUCCESS;
  if (s == 0 || s == STREAM_LEGACY_ID) {
    if (!t->legacy)
      t->legacy = hostd__stream_make(t, 0, r);
    return t->legacy;
  }
  if ((s & 0xffffffffu) == STREAM_PER_THREAD_ID) {
    /* One default stream per guest thread, made on first use.  No host
     * handle has these low bits: handles are aligned pointers. */
    tstream_t *ts;
    if (u64map_get(&t->ptds, s, &v))
      return (tstream_t *)(uintptr_t)v;
    if (t->ptds.len >= PTDS_MAX) {
      *r = CUDA_ERROR_OUT_OF_MEMORY;
      return NULL;
    }
    ts = hostd__stream_make(t, 0, r);
    if (ts && u64map_put(&t->ptds, s, (uint64_t)(uintptr_t)ts) != 0) {
      hostd__stream_drop(ts);
      *r = CUDA_ERROR_OUT_OF_MEMORY;
      return NULL;
    }
    return ts;
  }
  if (u64map_get(&t->streams, s, &v))
    return (tstream_t *)(uintptr_t)v;
  *r = CUDA_ERROR_INVALID_HANDLE;
  return NULL;
}

/* The tenant's created and per-thread default streams, one per call: *i
 * starts at 0; NULL after the last. */
static tstream_t *stream_next(const hostd_tenant_t *t, size_t *i) {
  while (*i < t->streams.cap + t->ptds.cap) {
    size_t k = (*i)++;
    const u64map_t *m = k < t->streams.cap ? &t->streams : &t->ptds;
    size_t j = k < t->streams.cap ? k : k - t->streams.cap;
    if (m->keys[j])
      return (tstream_t *)(uintptr_t)m->vals[j];
  }
  return NULL;
}

/* Orders an op on stream s after the legacy-stream rules, then counts it.
 * Work on the legacy stream waits for all earlier work of blocking streams;
 * work on a blocking stream waits for earlier legacy work. */
static CUresult stream_enter_op(hostd_tenant_t *t, tstream_t *s, bool launch) {
  CUresult r = launch ? CUDA_SUCCESS : hostd__sched_fence(s->ss);
  if (r != CUDA_SUCCESS)
    return r;
  /* A capturing stream has no implicit legacy order: an event from outside
   * would cross the capture's boundary. */
  if (t->captures.len && s != t->legacy && hostd__stream_capturing(t, s)) {
    s->epoch++;
    return CUDA_SUCCESS;
  }
  if (s == t->legacy) {
    tstream_t *b;
    size_t i = 0;
    while (r == CUDA_SUCCESS && (b = stream_next(t, &i))) {
      if (!b->blocking || b->legacy_seen == b->epoch)
        continue;
      if (t->captures.len && hostd__stream_capturing(t, b))
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; /* as the driver's legacy stream */
      r = hostd__sched_fence(b->ss); /* the event goes behind b's held launches */
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

CUresult hostd__stream_enter(hostd_tenant_t *t, tstream_t *s) {
  return stream_enter_op(t, s, false);
}

CUresult hostd__stream_enter_launch(hostd_tenant_t *t, tstream_t *s) {
  return stream_enter_op(t, s, true);
}

CUresult hostd__stream_lookup_enter(hostd_tenant_t *t, uint64_t s, tstream_t **out) {
  CUresult r;
  tstream_t *ts = hostd__stream_of(t, s, &r);
  if (!ts)
    return r;
  r = hostd__stream_enter(t, ts);
  if (r == CUDA_SUCCESS)
    *out = ts;
  return r;
}

static CUresult stream_sync_one(tstream_t *s) {
  CUresult r = hostd__sched_fence_sync(s->ss);
  if (r == CUDA_SUCCESS && (r = hostd__gpu.stream_sync(s->handle)) == CUDA_SUCCESS)
    hostd__sched_synced(s->ss);
  return r;
}

CUresult hostd__streams_sync_all(hostd_tenant_t *t, bool stop) {
  CUresult r = CUDA_SUCCESS, e;
  tstream_t *s;
  size_t i = 0;
  if (t->legacy)
    r = stream_sync_one(t->legacy);
  while ((!stop || r == CUDA_SUCCESS) && (s = stream_next(t, &i))) {
    e = stream_sync_one(s);
    if (r == CUDA_SUCCESS)
      r = e;
  }
  return r;
}

/* Whether t has its free stream, made now if need be. */
static bool free_stream_made(hostd_tenant_t *t) {
  if (!t->free_stream &&
      hostd__gpu.stream_new(&t->free_stream, CU_STREAM_NON_BLOCKING, t->prio) != CUDA_SUCCESS)
    t->free_stream = 0;
  return t->free_stream != 0;
}

/* The tenant's free stream waits for what s holds now.  Capturing streams
 * are left out: their work is recorded into a graph, not run, and an event
 * recorded on one would join the capture. */
static CUresult free_join(hostd_tenant_t *t, tstream_t *s) {
  CUresult r;
  if (s->free_seen == s->epoch || (t->captures.len && hostd__stream_capturing(t, s)))
    return CUDA_SUCCESS;
  if ((r = hostd__sched_fence(s->ss)) == CUDA_SUCCESS &&
      (r = hostd__gpu.event_record(s->event, s->handle, 0)) == CUDA_SUCCESS &&
      (r = hostd__gpu.stream_wait(t->free_stream, s->event, 0)) == CUDA_SUCCESS)
    s->free_seen = s->epoch;
  return r;
}

/* Where the stream-ordered way fails (no stream, an event the driver
 * refused), the driver's own free: it waits for everything, so it is safe. */
CUresult hostd__free_ordered(hostd_tenant_t *t, uint64_t p) {
  CUresult r = CUDA_SUCCESS;
  tstream_t *s;
  size_t i = 0;
  if (!free_stream_made(t))
    return hostd__gpu.mem_free(p);
  if (t->legacy)
    r = free_join(t, t->legacy);
  while (r == CUDA_SUCCESS && (s = stream_next(t, &i)))
    r = free_join(t, s);
  if (r == CUDA_SUCCESS && (r = hostd__gpu.mem_free_async(p, t->free_stream)) == CUDA_SUCCESS) {
    t->frees_pending = true;
    return CUDA_SUCCESS;
  }
  return hostd__gpu.mem_free(p);
}

bool hostd__frees_wait(hostd_tenant_t *t) {
  if (!t->frees_pending)
    return false;
  t->frees_pending = false;
  return hostd__gpu.stream_sync(t->free_stream) == CUDA_SUCCESS;
}

/* ---- teardown ---- */

void hostd__module_forget(hostd_tenant_t *t, uint64_t h) {
  for (size_t i = 0; i < t->funcs.cap; i++)
    if (t->funcs.keys[i] && t->funcs.vals[i] == h) {
      u64map_del(&t->funcs, t->funcs.keys[i]);
      i--; /* backward shift may have moved another entry here */
    }
  for (size_t i = 0; i < t->nranges;)
    if (t->ranges[i].kind == RANGE_GLOBAL && t->ranges[i].module == h)
      hostd__range_del_at(t, i);
    else
      i++;
}

/* Frees everything the tenant owns and empties its tables; gpu false: the
 * objects died with the context (recover), so only our memory is freed. */
static void tenant_release(hostd_tenant_t *t, bool gpu) {
  /* Held launches are dropped and fences released, so streams can drain. */
  hostd__sched_tenant_close(t->sched);
  hostd__capture_release(t, gpu);
  /* Streams first: their pending work may still use memory and modules. */
  tstream_t *s;
  size_t k = 0;
  stream_release(t->legacy, gpu);
  t->legacy = NULL;
  while ((s = stream_next(t, &k)))
    stream_release(s, gpu);
  for (size_t i = 0; gpu && i < t->events.cap; i++)
    if (t->events.keys[i])
      (void)hostd__gpu.event_del(t->events.keys[i]);
  hostd__array_release(t, gpu); /* textures may read linear memory: before it goes */
  /* On the free stream (made now if need be) the frees wait for nothing of
   * other tenants', as hostd__free_ordered's; the sync below waits for them
   * and for the frees the tenant made earlier. */
  if (gpu && t->nranges)
    (void)free_stream_made(t);
  for (size_t i = 0; gpu && i < t->nranges; i++)
    if (t->ranges[i].kind == RANGE_ALLOC &&
        (!t->free_stream ||
         hostd__gpu.mem_free_async(t->ranges[i].base, t->free_stream) != CUDA_SUCCESS))
      (void)hostd__gpu.mem_free(t->ranges[i].base);
  if (gpu && t->free_stream) {
    (void)hostd__gpu.stream_sync(t->free_stream);
    (void)hostd__gpu.stream_del(t->free_stream);
  }
  t->free_stream = 0;
  t->frees_pending = false;
  hostd__graph_release(t, gpu);
  hostd__pool_release(t, gpu);
  hostd__vmm_release(t, gpu);
  for (size_t i = 0; gpu && i < t->modules.cap; i++)
    if (t->modules.keys[i] && t->modules.vals[i] != KIND_VIEW)
      (void)hostd__gpu.module_unload(t->modules.keys[i], (int)t->modules.vals[i]);
  /* The streams are drained (or dead): no copy uses a mapping, no host
   * function its gate. */
  for (size_t i = 0; i < t->pinned.cap; i++)
    if (t->pinned.keys[i])
      hostd__pinned_drop((pinned_t *)(uintptr_t)t->pinned.vals[i], gpu);
  hostd__hostfn_drop_gate(t->hf, gpu);
  for (size_t i = 0; t->sched && i < t->modids.cap; i++)
    if (t->modids.keys[i]) /* the references exec_module_load took (variants.h) */
      hostd__var_module_unref(t->modids.vals[i]);
  hostd__sched_tenant_free(t->sched);
  t->sched = NULL;
  u64map_t *maps[] = {&t->streams, &t->events, &t->modules, &t->funcs, &t->ptds,
                      &t->views,   &t->pinned, &t->unpinned, &t->modids, &t->kids,
                      &t->vmh,     &t->vas,    &t->pools,  &t->graphs, &t->gnodes,
                      &t->gexecs,  &t->captures, &t->arrays, &t->texs};
  for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
    u64map_close(maps[i]);
    u64map_init(maps[i]);
  }
  t->nranges = 0;
}

void hostd__tenant_free(hostd_tenant_t *t) {
  if (!t)
    return;
  hostd__tenant_replied(t); /* its streams are about to go */
  hostd__ctxlock_rd(); /* not during a recovery */
  pthread_mutex_lock(&reg_lock);
  if (t->prev)
    t->prev->next = t->next;
  else
    live = t->next;
  if (t->next)
    t->next->prev = t->prev;
  pthread_mutex_unlock(&reg_lock);
  tenant_release(t, t->lost == CUDA_SUCCESS);
  hostd__ctxlock_rd_done();
  u64map_t *maps[] = {&t->streams, &t->events, &t->modules, &t->funcs, &t->ptds,
                      &t->views,   &t->pinned, &t->unpinned, &t->modids, &t->kids,
                      &t->vmh,     &t->vas,    &t->pools,  &t->graphs, &t->gnodes,
                      &t->gexecs,  &t->captures, &t->arrays, &t->texs};
  for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
    u64map_close(maps[i]);
  free(t->ranges);
  free(t);
}

void hostd__tenant_synced(hostd_tenant_t *t, hostd_sched_stream_t *ss) {
  if (t->synced && t->synced != ss)
    hostd__sched_synced(t->synced);
  t->synced = ss;
}

void hostd__tenant_replied(hostd_tenant_t *t) {
  hostd_sched_stream_t *ss;
  if (!t || !(ss = t->synced))
    return;
  t->synced = NULL;
  /* As when it ran inside the request: not while a recovery resets the
   * context (the notice may hand an event back to the pool). */
  hostd__ctxlock_rd();
  if (t->lost == CUDA_SUCCESS)
    hostd__sched_synced(ss);
  hostd__ctxlock_rd_done();
}

/* The worker ran out of requests: the scheduler's quiet point (sched.h),
 * only when it has something to do, and not while a recovery releases the
 * tenant. */
void hostd__tenant_quiet(hostd_tenant_t *t) {
  hostd__tenant_replied(t);
  if (!t || !hostd__sched_tenant_quiet_due(t->sched))
    return;
  hostd__ctxlock_rd();
  if (t->lost == CUDA_SUCCESS)
    hostd__sched_tenant_quiet(t->sched);
  hostd__ctxlock_rd_done();
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

/* Called by tenant t's worker, outside the context lock, after one of its calls
 * returned the context-corrupting error err.  Does nothing when a fault was
 * raised already (every tenant is lost since). */
static void recover(hostd_tenant_t *t, CUresult err) {
  unsigned n = 0;

  hostd__ctxlock_wr();
  if (!hostd__fault_raise(t->id, (int)err)) {
    hostd__ctxlock_wr_done();
    return;
  }
  /* The variant modules died with the context: forget them before the
   * tenants' releases drop their references (variants.h). */
  hostd__var_reset();
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
  hostd__ctxlock_wr_done();
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

CUresult hostd__tenant_kept_error(hostd_tenant_t *t) {
  if (t->deferred == CUDA_SUCCESS && t->sched)
    t->deferred = hostd__sched_take_error(t->sched); /* a held launch's failure */
  return t->deferred;
}

/* Keeps a post's error for the next syncpoint, or writes the reply header
 * (a kept error replaces a success of a syncpoint; no results with an error). */
static int finish_reply(hostd_tenant_t *t, uint32_t op, uint32_t flags, CUresult r,
                        wire_buf_t *reply) {
  if (flags & CALL_ASYNC) {
    if (r != CUDA_SUCCESS && t->deferred == CUDA_SUCCESS) {
      /* Surfaces at the tenant's next CALL_SYNCPOINT request. */
      t->deferred = r;
      hostd__log(HOSTD_LOG_DEBUG, "tenant %u: async op %u failed with %d (deferred)", t->id, op, r);
    }
    reply->len = 0;
    return 0;
  }
  if (reply->err)
    return reply->err;
  if (r != CUDA_SUCCESS)
    reply->len = CALL_REPLY_HDR_LEN;
  if ((flags & CALL_SYNCPOINT) && hostd__tenant_kept_error(t) != CUDA_SUCCESS) {
    if (r == CUDA_SUCCESS) {
      r = t->deferred;
      reply->len = CALL_REPLY_HDR_LEN;
    }
    t->deferred = CUDA_SUCCESS;
  }
  call_reply_hdr_write(reply->data, (uint32_t)r, (uint32_t)(reply->len - CALL_REPLY_HDR_LEN));
  return 0;
}

/* The frame around one request: the context lock, the thread's context,
 * a lost tenant's error, recovery, kept errors of posts, the reply header. */
int hostd__tenant_exec(hostd_tenant_t *t, uint32_t op, uint32_t flags, const uint8_t *args,
                       size_t len, wire_buf_t *reply, const char **why) {
  const char *bad = NULL;
  CUresult r, lost;

  hostd__tenant_replied(t); /* a caller that did not say the last reply went out */
  wire_buf_reset(reply);
  if (!(flags & CALL_ASYNC)) { /* a post has no reply (and no results: exec.c) */
    (void)wire_buf_reserve(reply, CALL_REPLY_HDR_LEN); /* filled below */
    reply->len = reply->err ? 0 : CALL_REPLY_HDR_LEN;
  }
  if (hostd__op_count_on && op < CALL_OP_COUNT)
    __atomic_fetch_add(&hostd__op_count[op], 1, __ATOMIC_RELAXED);
  hostd__ctxlock_rd();
  lost = t->lost; /* read under the lock: recover() writes it */
  r = CUDA_SUCCESS;
  if (!entered) {
    /* First request of this thread: the shared context becomes current. */
    r = hostd__gpu.thread_enter();
    entered = r == CUDA_SUCCESS;
  }
  if (lost != CUDA_SUCCESS && op != CALL_OP_HELLO)
    r = lost; /* everything it had is gone: every call fails, as natively */
  else if (r == CUDA_SUCCESS)
    r = hostd__exec(t, op, flags, args, len, reply, &bad);
  hostd__ctxlock_rd_done();
  if (!bad && ctx_error(r) && !t->ctx_err_logged) {
    /* A context-level error is never a tenant's mistake: say so once. */
    t->ctx_err_logged = true;
    hostd__log(HOSTD_LOG_INFO, "tenant %u: op %u failed with %s (%d) from the driver", t->id, op,
               ctx_error(r), (int)r);
  }
  if (!bad && lost == CUDA_SUCCESS && hostd__ctx_fatal(r))
    recover(t, r); /* a no-op when another tenant's call recovered first */
  if (bad) {
    *why = bad;
    return -EPROTO;
  }
  return finish_reply(t, op, flags, r, reply);
}
