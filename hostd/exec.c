/* exec.c: the execution of a tenant's requests, one handler per op.
 *
 * hostd__exec decodes the request bytes with the op's entry of the call
 * vocabulary (wire/call.def) into its struct, then calls the op's handler
 * from a table indexed by op, as Redis and nginx dispatch commands.  A
 * request that does not decode (truncated, a tail over its limit, bytes
 * after the last field), an op not in the table, a post of an op that must
 * be answered, or an op answered elsewhere is a protocol error: the reason
 * names the op and field, and server.c closes only this tenant and logs it
 * (docs/decisions.md, D7).  Handlers check every handle and range against
 * the tenant's tables (tenant.c) before the GPU backend sees it
 * (docs/decisions.md, D2) and write results through the op's reply struct.
 * Work reaches a stream only through hostd__stream_lookup_enter; a launch
 * only through exec_launch.
 */
#include "hostd/guard.h"
#include "hostd/tenant-int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct exec {
  hostd_tenant_t *t;
  wire_buf_t *out; /* results (after the reply header) */
  const char *why; /* malformed: reason */
} exec_t;

/* A reply struct's encoding appended to the results. */
#define PUT_REPLY(name, x, ...)                                                                    \
  do {                                                                                             \
    call_##name##_rep_t rep_ = {__VA_ARGS__};                                                      \
    (void)call_##name##_rep_put(&rep_, (x)->out);                                                  \
  } while (0)

/* ---- memory ---- */

static CUresult exec_mem_alloc(exec_t *x, const call_mem_alloc_req_t *q) {
  uint64_t p;
  CUresult r;
  if (q->size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  /* --tenant-mem-limit: over it, what the driver says when memory runs out. */
  if ((r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_MEM, q->size)) != CUDA_SUCCESS)
    return r;
  r = hostd__gpu.mem_alloc(&p, q->size);
  /* The tenant's frees still in flight were done at their return natively (D16). */
  if (r == CUDA_ERROR_OUT_OF_MEMORY && hostd__frees_wait(x->t))
    r = hostd__gpu.mem_alloc(&p, q->size);
  if (r == CUDA_SUCCESS && hostd__range_add(x->t, p, q->size, RANGE_ALLOC, 0) != 0) {
    (void)hostd__gpu.mem_free(p);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) {
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, q->size);
    return r;
  }
  PUT_REPLY(mem_alloc, x, .ptr = p);
  return CUDA_SUCCESS;
}

static CUresult exec_mem_free(exec_t *x, const call_mem_free_req_t *q) {
  hostd_tenant_t *t = x->t;
  size_t i = hostd__range_upper(t, q->ptr);
  CUresult r;
  /* cuMemFree frees stream-ordered allocations too (after their stream). */
  if (i == 0 || t->ranges[i - 1].base != q->ptr ||
      (t->ranges[i - 1].kind != RANGE_ALLOC && t->ranges[i - 1].kind != RANGE_ASYNC))
    return CUDA_ERROR_INVALID_VALUE;
  /* Held launches may use it: they go out first, as launched work would.
   * The driver's free would wait for every tenant's work in flight. */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  r = hostd__free_ordered(t, q->ptr);
  if (r == CUDA_SUCCESS) {
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, t->ranges[i - 1].size);
    hostd__range_del_at(t, i - 1);
  }
  return r;
}

static CUresult exec_mem_info(exec_t *x, const call_mem_info_req_t *q) {
  uint64_t free_b = 0, total_b = 0;
  CUresult r = hostd__gpu.mem_info(&free_b, &total_b);
  (void)q;
  PUT_REPLY(mem_info, x, .free_b = free_b, .total_b = total_b);
  return r;
}

/* [p, p + n) is device memory of the tenant (hostd__owns_dev); else false,
 * with the range named at debug level: what a framework's failing call
 * pointed at. */
static bool dev_ok(const exec_t *x, const char *what, uint64_t p, uint64_t n) {
  size_t i;
  const range_t *r;
  if (hostd__owns_dev(x->t, p, n))
    return true;
  i = hostd__range_upper(x->t, p);
  r = i ? &x->t->ranges[i - 1] : NULL;
  hostd__log(HOSTD_LOG_DEBUG,
             "tenant %u: %s %#llx (%llu bytes) is not memory of this tenant (the range below it: "
             "%#llx, %llu bytes, kind %d)",
             x->t->id, what, (unsigned long long)p, (unsigned long long)n,
             (unsigned long long)(r ? r->base : 0), (unsigned long long)(r ? r->size : 0),
             r ? r->kind : 0);
  return false;
}

static CUresult exec_htod(exec_t *x, const call_htod_req_t *q) {
  tstream_t *ts;
  CUresult r;
  if (!dev_ok(x, "HTOD dst", q->dst, q->bytes.len))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__stream_lookup_enter(x->t, q->stream, &ts)) != CUDA_SUCCESS)
    return r;
  /* The bytes live in this request only: a graph must not keep their address. */
  if (hostd__stream_capturing(x->t, ts))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return hostd__gpu.htod(q->dst, q->bytes.p, q->bytes.len, ts->handle, (int)q->async);
}

/* The bytes go straight into the reply (its only field, a REST run). */
static CUresult exec_dtoh(exec_t *x, const call_dtoh_req_t *q) {
  tstream_t *ts;
  CUresult r;
  if (q->len > CALL_MAX_LEN || !dev_ok(x, "DTOH src", q->src, q->len))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__stream_lookup_enter(x->t, q->stream, &ts)) != CUDA_SUCCESS)
    return r;
  if (wire_buf_reserve(x->out, q->len) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  r = hostd__gpu.dtoh(x->out->data + x->out->len, q->src, q->len, ts->handle);
  if (r == CUDA_SUCCESS)
    x->out->len += q->len;
  return r;
}

static CUresult exec_dtod(exec_t *x, const call_dtod_req_t *q) {
  tstream_t *ts;
  CUresult r;
  if (!dev_ok(x, "DTOD dst", q->dst, q->len) || !dev_ok(x, "DTOD src", q->src, q->len))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__stream_lookup_enter(x->t, q->stream, &ts)) != CUDA_SUCCESS)
    return r;
  return hostd__gpu.dtod(q->dst, q->src, q->len, ts->handle, 1);
}

/* A memset on a stream the scheduler queues launches of goes into that
 * queue as one unit, in stream order (sched.h): a fence here would stop the
 * tenant's worker until every launch before it was issued.  Its profile is
 * its size class (log2 of the bytes). */
static CUresult memset_scheduled(tstream_t *ts, const call_memset_req_t *q, uint64_t bytes) {
  hostd_sched_launch_t l = {
      .grid = {1, 1, 1},
      .block = {1, 1, 1},
      .memset = {.dst = q->dst, .count = q->count, .value = q->value, .elem = q->elem}};
  l.kernel_id = hostd__sched_kernel_id((uint64_t)(64 - __builtin_clzll(bytes)), "memset");
  hostd__sched_trace_kernel(l.kernel_id, "memset");
  return hostd__sched_launch(ts->ss, &l);
}

static CUresult exec_memset(exec_t *x, const call_memset_req_t *q) {
  tstream_t *ts;
  CUresult r;
  if ((q->elem != 1 && q->elem != 2 && q->elem != 4) || q->count > UINT64_MAX / 4)
    return CUDA_ERROR_INVALID_VALUE;
  uint64_t bytes = q->count * q->elem;
  if (!dev_ok(x, "MEMSET dst", q->dst, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  if (!(ts = hostd__stream_of(x->t, q->stream, &r)))
    return r;
  if (q->count && ts->ss && !hostd__stream_capturing(x->t, ts)) {
    if ((r = hostd__stream_enter_launch(x->t, ts)) != CUDA_SUCCESS)
      return r;
    return memset_scheduled(ts, q, bytes);
  }
  if ((r = hostd__stream_enter(x->t, ts)) != CUDA_SUCCESS)
    return r;
  return hostd__gpu.memset(q->dst, q->value, q->elem, q->count, ts->handle);
}

/* The tenant's shared pinned allocation tag when [off, off + len) lies in
 * it, else NULL (another tenant's tag, or a range past its end). */
static const pinned_t *pinned_range(const exec_t *x, uint64_t tag, uint64_t off, uint64_t len) {
  const pinned_t *pin;
  uint64_t v;
  if (!u64map_get(&x->t->pinned, tag, &v))
    return NULL;
  pin = (const pinned_t *)(uintptr_t)v;
  return off > pin->size || len > pin->size - off ? NULL : pin;
}

/* PINNED_COPY: between the tenant's device memory and its shared pinned
 * allocation `tag`, from the daemon's mapping of it: real DMA on the
 * tenant's stream when registered.  A range outside either side is
 * CUDA_ERROR_INVALID_VALUE (the guest sends only copies that fit). */
static CUresult exec_pinned_copy(exec_t *x, const call_pinned_copy_req_t *q) {
  const pinned_t *pin;
  tstream_t *ts;
  CUresult r;
  if (q->dir > 1 || !(pin = pinned_range(x, q->tag, q->off, q->len)) ||
      !dev_ok(x, "PINNED_COPY dev", q->dev, q->len))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__stream_lookup_enter(x->t, q->stream, &ts)) != CUDA_SUCCESS)
    return r;
  if (q->dir == 0)
    return hostd__gpu.htod(q->dev, pin->addr + q->off, q->len, ts->handle, q->async != 0);
  return q->async ? hostd__gpu.dtoh_async(pin->addr + q->off, q->dev, q->len, ts->handle)
                  : hostd__gpu.dtoh(pin->addr + q->off, q->dev, q->len, ts->handle);
}

/* STREAM_MARK: the guest's completion word (call.def).  The stream is
 * fenced as for a query (its held launches issued; the legacy stream's
 * order entered, as its synchronisation does), then the GPU writes value
 * behind its work.  The word is written at once, with bit 63 set, when the
 * guest must make the real synchronising call instead: the tenant has a
 * kept error to report (it stays kept), the stream is capturing (where a
 * synchronisation is an error, as natively), the allocation could not be
 * registered, or the driver refuses the write.  A bad tag, offset or value
 * is the post's own error, kept like any post's. */
static CUresult exec_stream_mark(exec_t *x, const call_stream_mark_req_t *q) {
  const pinned_t *pin;
  tstream_t *ts;
  uint64_t *word;
  bool now, direct;
  CUresult r;
  if (q->value >> 63 || q->off % 8 || !(pin = pinned_range(x, q->tag, q->off, 8)))
    return CUDA_ERROR_INVALID_VALUE;
  word = (uint64_t *)(void *)(pin->addr + q->off);
  if (!(ts = hostd__stream_of(x->t, q->stream, &r)))
    return r;
  now = hostd__tenant_kept_error(x->t) != CUDA_SUCCESS || !pin->registered ||
        hostd__stream_capturing(x->t, ts);
  /* A latency-critical stream's launches are on it already: the word's write
   * goes first and the quiet point's event record (its fence) after it, off
   * the synchronisation's path; the record then covers the write too. */
  direct = hostd__sched_direct(ts->ss);
  if (!now) {
    if ((!direct && (r = hostd__sched_fence(ts->ss)) != CUDA_SUCCESS) ||
        (ts == x->t->legacy && (r = hostd__stream_enter(x->t, ts)) != CUDA_SUCCESS))
      return r;
    r = hostd__gpu.stream_write64(ts->handle, word, q->value);
    if (direct)
      (void)hostd__sched_fence(ts->ss); /* a quiet point: nothing to fail */
    if (r != CUDA_SUCCESS) {
      /* Not the application's error: its synchronisation goes the usual way. */
      static int logged;
      if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        hostd__log(HOSTD_LOG_INFO, "tenant %u: the GPU cannot write a completion word (CUresult "
                   "%d); its synchronisations are calls", x->t->id, (int)r);
      now = true;
    }
  }
  if (now)
    __atomic_store_n(word, q->value | 1ull << 63, __ATOMIC_RELEASE);
  return CUDA_SUCCESS;
}

static CUresult exec_pinned_free(exec_t *x, const call_pinned_free_req_t *q) {
  uint64_t v;
  if (!u64map_get(&x->t->pinned, q->tag, &v))
    return CUDA_ERROR_INVALID_VALUE;
  pinned_t *p = (pinned_t *)(uintptr_t)v;
  /* cuMemFreeHost: earlier copies of this tenant may still use it.  The
   * unregistration would wait for every tenant's work: made elsewhere. */
  (void)hostd__streams_sync_all(x->t, false);
  u64map_del(&x->t->pinned, q->tag);
  if ((uint64_t)(uintptr_t)p->addr == q->tag)
    hostd__tenant_unpinned(x->t, q->tag, p->size);
  hostd__release_host(p->addr, p->size, p->registered);
  free(p);
  return CUDA_SUCCESS;
}

/* ---- streams and events ---- */

static CUresult exec_stream_new(exec_t *x, const call_stream_new_req_t *q) {
  CUresult r;
  tstream_t *ts;
  if ((r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_STREAMS, 1)) != CUDA_SUCCESS)
    return r;
  /* q->priority is the tenant's own wish: its class decides. */
  if (!(ts = hostd__stream_make(x->t, q->flags, &r))) {
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_STREAMS, 1);
    return r;
  }
  if (u64map_put(&x->t->streams, ts->handle, (uint64_t)(uintptr_t)ts) != 0) {
    hostd__stream_drop(ts);
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_STREAMS, 1);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  PUT_REPLY(stream_new, x, .stream = ts->handle);
  return CUDA_SUCCESS;
}

static CUresult exec_stream_del(exec_t *x, const call_stream_del_req_t *q) {
  uint64_t v;
  CUresult r;
  if (!u64map_get(&x->t->streams, q->stream, &v))
    return CUDA_ERROR_INVALID_HANDLE;
  if ((r = hostd__sched_tenant_flush(x->t->sched)) != CUDA_SUCCESS)
    return r;
  u64map_del(&x->t->streams, q->stream);
  hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_STREAMS, 1);
  hostd__stream_drop((tstream_t *)(uintptr_t)v);
  return CUDA_SUCCESS;
}

/* Syncing (or querying) the legacy stream also waits for blocking streams. */
static CUresult stream_wait_for(exec_t *x, uint64_t s, bool sync) {
  CUresult r;
  tstream_t *ts = hostd__stream_of(x->t, s, &r);
  if (!ts ||
      (r = sync ? hostd__sched_fence_sync(ts->ss) : hostd__sched_fence(ts->ss)) != CUDA_SUCCESS)
    return r;
  if (ts == x->t->legacy && (r = hostd__stream_enter(x->t, ts)) != CUDA_SUCCESS)
    return r;
  if (!sync)
    return hostd__gpu.stream_query(ts->handle);
  if ((r = hostd__gpu.stream_sync(ts->handle)) == CUDA_SUCCESS)
    hostd__tenant_synced(x->t, ts->ss); /* after the reply */
  return r;
}

static CUresult exec_stream_sync(exec_t *x, const call_stream_sync_req_t *q) {
  return stream_wait_for(x, q->stream, true);
}

static CUresult exec_stream_query(exec_t *x, const call_stream_query_req_t *q) {
  return stream_wait_for(x, q->stream, false);
}

/* The tenant's streams only: the context is shared with other tenants.  The
 * legacy stream always (made if need be), so a corrupted context is
 * reported even to a tenant that never used a stream, as natively. */
static CUresult exec_ctx_sync(exec_t *x, const call_ctx_sync_req_t *q) {
  CUresult r;
  (void)q;
  if (!hostd__stream_of(x->t, 0, &r))
    return r;
  return hostd__streams_sync_all(x->t, true);
}

/* ---- the context's limits ----
 * CTX_LIMIT (call.def): cuCtxSetLimit / cuCtxGetLimit.  Every tenant runs
 * in the one context (docs/decisions.md, D4), so a limit is the context's,
 * for every tenant's kernels.  The rules:
 *   (a) Only CU_LIMIT_STACK_SIZE, CU_LIMIT_PRINTF_FIFO_SIZE and
 *       CU_LIMIT_MALLOC_HEAP_SIZE are applied: without them a recursive
 *       kernel overflows its stack, device mallocs fail and printf output
 *       is lost, and a larger value changes nothing for a kernel that does
 *       not use it.  The others (L2 fetch granularity, persisting L2 cache
 *       size, the device runtime's depth and pending launches) would change
 *       every tenant's work, or reserve device memory for one tenant's device
 *       launches; they stay as they were, kept and answered by the guest
 *       (guestlib/ctx.c), and are refused here like a limit past cuda.h's.
 *   (b) A set only ever grows the context's value: one at or below it
 *       succeeds without a driver call, since another tenant may rely on
 *       the larger value.  The reply is the context's value after the call.
 *   (c) A stack or heap size above its bound (--max-stack-bytes,
 *       --max-heap-bytes; 0: none) is refused with CUDA_ERROR_INVALID_VALUE
 *       and one log line per tenant.  Checked before (b), so whether a
 *       request is refused never depends on what other tenants asked.  The
 *       printf FIFO has no bound of its own: what the driver cannot back it
 *       refuses.
 *   (d) The driver's error is returned as is: CUDA_ERROR_INVALID_VALUE for
 *       a heap (printf FIFO) size set after a kernel that uses malloc
 *       (printf) was launched, by this tenant or any other (cuda.h,
 *       cuCtxSetLimit).  A stack size set waits for the work on the GPU,
 *       every tenant's (cuda.h again): rare, as values only grow.
 * Lock story: limit_lock serialises reading and growing a value, so two
 * tenants that grow one at once cannot shrink it (the smaller set landing
 * last).  limit_bound is written by hostd__limit_bounds before any tenant
 * and only read afterwards. */
static pthread_mutex_t limit_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t limit_bound[CU_LIMIT_MALLOC_HEAP_SIZE + 1] = {
    [CU_LIMIT_STACK_SIZE] = HOSTD_DEFAULT_MAX_STACK_BYTES,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = HOSTD_DEFAULT_MAX_HEAP_BYTES,
};

void hostd__limit_bounds(uint64_t stack_max, uint64_t heap_max) {
  limit_bound[CU_LIMIT_STACK_SIZE] = stack_max;
  limit_bound[CU_LIMIT_MALLOC_HEAP_SIZE] = heap_max;
}

/* cuda.h's name of an applied limit (rule (a)), NULL for any other. */
static const char *limit_name(uint32_t limit) {
  switch (limit) {
  case CU_LIMIT_STACK_SIZE:
    return "CU_LIMIT_STACK_SIZE";
  case CU_LIMIT_PRINTF_FIFO_SIZE:
    return "CU_LIMIT_PRINTF_FIFO_SIZE";
  case CU_LIMIT_MALLOC_HEAP_SIZE:
    return "CU_LIMIT_MALLOC_HEAP_SIZE";
  default:
    return NULL;
  }
}

static CUresult exec_ctx_limit(exec_t *x, const call_ctx_limit_req_t *q) {
  const char *name = limit_name(q->limit);
  uint64_t bound, was = 0, now = 0;
  CUresult r;
  if (!name || q->set > 1)
    return CUDA_ERROR_INVALID_VALUE;
  bound = q->limit == CU_LIMIT_PRINTF_FIFO_SIZE ? 0 : limit_bound[q->limit];
  if (q->set && bound && q->value > bound) {
    if (!x->t->limit_logged) {
      x->t->limit_logged = true;
      hostd__log(HOSTD_LOG_INFO,
                 "tenant %u: cuCtxSetLimit(%s, %llu) refused: above --max-%s-bytes %llu (logged "
                 "once per tenant)",
                 x->t->id, name, (unsigned long long)q->value,
                 q->limit == CU_LIMIT_STACK_SIZE ? "stack" : "heap", (unsigned long long)bound);
    }
    return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&limit_lock);
  r = hostd__gpu.ctx_limit_get((int)q->limit, &was);
  now = was;
  if (r == CUDA_SUCCESS && q->set && q->value > was &&
      (r = hostd__gpu.ctx_limit_set((int)q->limit, q->value)) == CUDA_SUCCESS)
    r = hostd__gpu.ctx_limit_get((int)q->limit, &now);
  pthread_mutex_unlock(&limit_lock);
  if (r != CUDA_SUCCESS)
    return r;
  if (now != was) /* every tenant's kernels see it from now on */
    hostd__log(HOSTD_LOG_INFO, "tenant %u grew the context's %s from %llu to %llu", x->t->id, name,
               (unsigned long long)was, (unsigned long long)now);
  PUT_REPLY(ctx_limit, x, .value = now);
  return CUDA_SUCCESS;
}

/* BLASLT_LAYOUT (call.def): the device's, the same for every tenant; the
 * backend read it from its driver at init. */
static CUresult exec_blaslt_layout(exec_t *x, const call_blaslt_layout_req_t *q) {
  call_blaslt_layout_rep_t a;
  CUresult r;
  (void)q;
  if ((r = hostd__gpu.blaslt_layout(a.a, a.b)) != CUDA_SUCCESS)
    return r;
  (void)call_blaslt_layout_rep_put(&a, x->out);
  return CUDA_SUCCESS;
}

/* An op between an event and a stream: the event must be the tenant's, the
 * stream is looked up and entered. */
static CUresult event_and_stream(exec_t *x, uint64_t event, uint64_t stream, tstream_t **ts) {
  if (!u64map_get(&x->t->events, event, NULL))
    return CUDA_ERROR_INVALID_HANDLE;
  return hostd__stream_lookup_enter(x->t, stream, ts);
}

static CUresult exec_stream_wait(exec_t *x, const call_stream_wait_req_t *q) {
  tstream_t *ts;
  CUresult r = event_and_stream(x, q->event, q->stream, &ts);
  return r != CUDA_SUCCESS ? r : hostd__gpu.stream_wait(ts->handle, q->event, (unsigned)q->flags);
}

static CUresult exec_event_new(exec_t *x, const call_event_new_req_t *q) {
  uint64_t e;
  CUresult r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_EVENTS, 1);
  if (r != CUDA_SUCCESS)
    return r;
  if ((r = hostd__gpu.event_new(&e, q->flags)) == CUDA_SUCCESS &&
      u64map_put(&x->t->events, e, 1) != 0) {
    (void)hostd__gpu.event_del(e);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) {
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_EVENTS, 1);
    return r;
  }
  PUT_REPLY(event_new, x, .event = e);
  return CUDA_SUCCESS;
}

static CUresult exec_event_del(exec_t *x, const call_event_del_req_t *q) {
  if (!u64map_del(&x->t->events, q->event))
    return CUDA_ERROR_INVALID_HANDLE;
  hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_EVENTS, 1);
  return hostd__gpu.event_del(q->event);
}

static CUresult exec_event_record(exec_t *x, const call_event_record_req_t *q) {
  tstream_t *ts;
  CUresult r = event_and_stream(x, q->event, q->stream, &ts);
  return r != CUDA_SUCCESS ? r : hostd__gpu.event_record(q->event, ts->handle, (unsigned)q->flags);
}

static CUresult exec_event_sync(exec_t *x, const call_event_sync_req_t *q) {
  if (!u64map_get(&x->t->events, q->event, NULL))
    return CUDA_ERROR_INVALID_HANDLE;
  return hostd__gpu.event_sync(q->event);
}

static CUresult exec_event_query(exec_t *x, const call_event_query_req_t *q) {
  if (!u64map_get(&x->t->events, q->event, NULL))
    return CUDA_ERROR_INVALID_HANDLE;
  return hostd__gpu.event_query(q->event);
}

static CUresult exec_event_time(exec_t *x, const call_event_time_req_t *q) {
  float ms = 0;
  CUresult r;
  if (!u64map_get(&x->t->events, q->start, NULL) || !u64map_get(&x->t->events, q->end, NULL))
    return CUDA_ERROR_INVALID_HANDLE;
  r = hostd__gpu.event_time(&ms, q->start, q->end);
  PUT_REPLY(event_time, x, .ms = ms);
  return r;
}

/* ---- modules ---- */

/* Appends one FUNC record and registers its handle as the tenant's
 * (module x->t's current one, passed through arg). */
typedef struct funcs_ctx {
  exec_t *x;
  uint64_t module;
  uint64_t content_id; /* the module image's id: kernel ids (sched.h) */
  uint32_t n;
  bool oom;
  wire_buf_t params; /* one record's (offset, size) pairs, reused */
} funcs_ctx_t;

static int func_rec(void *arg, const hostd_func_info_t *f) {
  funcs_ctx_t *c = arg;
  call_func_t rec;
  size_t nlen = strnlen(f->name, CALL_FUNC_NAME_MAX - 1);
  uint32_t np = f->nparams > CALL_MAX_PARAMS ? CALL_MAX_PARAMS : f->nparams;
  wire_buf_t *pbuf = &c->params;
  int rc;

  memset(&rec, 0, sizeof(rec));
  rec.handle = f->handle;
  rec.nparams = np;
  rec.name_len = (uint32_t)nlen;
  rec.valid = f->attr_valid;
  memcpy(rec.attr, f->attr, sizeof(rec.attr));
  rec.name = (call_view_t){(const uint8_t *)f->name, nlen};
  /* (offset, size) pairs, little-endian, as the record's params tail. */
  wire_buf_reset(pbuf);
  for (uint32_t i = 0; i < np; i++) {
    (void)wire_buf_put_u32(pbuf, f->off[i]);
    (void)wire_buf_put_u32(pbuf, f->size[i]);
  }
  rec.params = (call_view_t){pbuf->data, pbuf->len};
  rc = wire_buf_status(pbuf) ? -ENOMEM : call_func_put(&rec, c->x->out);
  if (rc == 0 && u64map_put(&c->x->t->funcs, f->handle, c->module) != 0)
    rc = -ENOMEM;
  if (rc == 0 && c->x->t->sched) {
    uint64_t kid = hostd__sched_kernel_id(c->content_id, f->name);
    if (u64map_put(&c->x->t->kids, f->handle, kid) != 0)
      rc = -ENOMEM;
    hostd__sched_trace_kernel(kid, f->name);
  }
  c->n++;
  c->oom = rc != 0;
  return rc;
}

/* Writes the MODULE_LOAD / LIBRARY_MODULE reply of module h (its handle,
 * its functions) and registers every function handle as the tenant's.  On
 * failure the caller forgets the functions registered so far. */
static CUresult describe_functions(exec_t *x, uint64_t h, int kind, uint64_t content_id,
                                   uint32_t *nfunc) {
  funcs_ctx_t c = {x, h, content_id, 0, false, {NULL, 0, 0, 0}};
  call_module_load_rep_t rep;
  call_view_t tails[CALL_TAILS_MAX];
  size_t at = x->out->len;
  CUresult r;

  if (wire_buf_reserve(x->out, CALL_MODULE_LOAD_REP_FIXED) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  x->out->len += CALL_MODULE_LOAD_REP_FIXED; /* filled below */
  /* A library's kernels are described without their attributes, which the
   * guest asks (FUNC_ATTRS) when it needs them: sixteen driver calls a
   * kernel, about 9 us on the H200, for every kernel of every library a
   * tenant loads, nearly all never launched (docs/decisions.md, D12).  A
   * module's functions answer what they can unloaded
   * (CUDA_ERROR_FUNCTION_NOT_LOADED otherwise). */
  r = hostd__gpu.module_functions(h, kind, kind == KIND_MODULE, func_rec, &c);
  wire_buf_close(&c.params);
  if (r == CUDA_SUCCESS && (c.oom || x->out->err))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r != CUDA_SUCCESS)
    return r;
  memset(&rep, 0, sizeof(rep));
  rep.module = h;
  rep.nfunc = c.n;
  if (nfunc)
    *nfunc = c.n;
  rep.funcs = (call_view_t){x->out->data + at + CALL_MODULE_LOAD_REP_FIXED,
                            x->out->len - at - CALL_MODULE_LOAD_REP_FIXED};
  return call_module_load_rep_encode(&rep, x->out->data + at, tails) < 0 ? CUDA_ERROR_OUT_OF_MEMORY
                                                                         : CUDA_SUCCESS;
}

static CUresult exec_module_load(exec_t *x, const call_module_load_req_t *q) {
  bool timed = hostd__log_level >= HOSTD_LOG_DEBUG;
  uint64_t t0 = timed ? hostd__mono_ns() : 0, t1 = 0;
  uint32_t nfunc = 0;
  const void *img;
  uint64_t h = 0;
  size_t len;
  CUresult r;

  if (q->kind > KIND_LIBRARY)
    return CUDA_ERROR_INVALID_VALUE;
  if (q->has_image && hostd__modcache_put(q->id, q->image.p, q->image.len) != 0)
    return CUDA_ERROR_INVALID_IMAGE; /* the id does not match the bytes */
  img = hostd__modcache_get(q->id, &len);
  if (!img)
    return CUDA_ERROR_FILE_NOT_FOUND; /* the guest must offer the blob first */
  r = hostd__gpu.module_load(&h, (int)q->kind, img, len);
  if (r != CUDA_SUCCESS)
    return r;
  if (timed)
    t1 = hostd__mono_ns();
  if (u64map_put(&x->t->modules, h, q->kind) != 0) {
    (void)hostd__gpu.module_unload(h, (int)q->kind);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r = u64map_put(&x->t->modids, h, q->id) != 0
          ? CUDA_ERROR_OUT_OF_MEMORY
          : describe_functions(x, h, (int)q->kind, q->id, &nfunc);
  if (timed) /* where a tenant's module loads spend their time */
    hostd__log(HOSTD_LOG_DEBUG,
               "tenant %u: %s %016llx (%zu bytes): %u functions; loaded in %llu us, described in "
               "%llu us",
               x->t->id, q->kind == KIND_LIBRARY ? "library" : "module", (unsigned long long)q->id,
               len, nfunc, (unsigned long long)((t1 - t0) / 1000u),
               (unsigned long long)((hostd__mono_ns() - t1) / 1000u));
  if (r != CUDA_SUCCESS) {
    hostd__module_forget(x->t, h);
    u64map_del(&x->t->modules, h);
    u64map_del(&x->t->modids, h);
    (void)hostd__gpu.module_unload(h, (int)q->kind);
  } else if (x->t->sched) {
    hostd__var_module_ref(q->id); /* variants are built off this path (variants.h) */
  }
  return r;
}

static CUresult exec_module_unload(exec_t *x, const call_module_unload_req_t *q) {
  hostd_tenant_t *t = x->t;
  uint64_t kind, view, cid;
  CUresult r;
  if (!u64map_get(&t->modules, q->module, &kind) || kind != q->kind)
    return CUDA_ERROR_INVALID_HANDLE;
  /* Held launches of its functions go out first (sched.h).  The driver's
   * unload may wait for every tenant's work: made elsewhere. */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  hostd__release_module(q->module, (int)q->kind);
  hostd__module_forget(t, q->module);
  u64map_del(&t->modules, q->module);
  if (t->sched && u64map_get(&t->modids, q->module, &cid))
    hostd__var_module_unref(cid); /* the reference exec_module_load took */
  u64map_del(&t->modids, q->module);
  if (q->kind == KIND_LIBRARY && u64map_get(&t->views, q->module, &view)) {
    hostd__module_forget(t, view); /* the view died with its library */
    u64map_del(&t->modules, view);
    u64map_del(&t->views, q->module);
  }
  return CUDA_SUCCESS;
}

static CUresult exec_module_global(exec_t *x, const call_module_global_req_t *q) {
  char name[CALL_FUNC_NAME_MAX];
  uint64_t kind, p, size;
  CUresult r;
  memcpy(name, q->name.p, q->name.len); /* <= CALL_FUNC_NAME_MAX - 1 (call.def) */
  name[q->name.len] = 0;
  if (!u64map_get(&x->t->modules, q->module, &kind) || kind != q->kind)
    return CUDA_ERROR_INVALID_HANDLE;
  r = hostd__gpu.module_global(q->module, (int)q->kind, name, &p, &size);
  if (r != CUDA_SUCCESS)
    return r;
  if (hostd__range_add(x->t, p, size, RANGE_GLOBAL, q->module) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  PUT_REPLY(module_global, x, .ptr = p, .size = size);
  return CUDA_SUCCESS;
}

static CUresult exec_library_module(exec_t *x, const call_library_module_req_t *q) {
  hostd_tenant_t *t = x->t;
  uint64_t mod = 0, kind, cid = 0;
  CUresult r;
  if (!u64map_get(&t->modules, q->library, &kind) || kind != KIND_LIBRARY)
    return CUDA_ERROR_INVALID_HANDLE;
  (void)u64map_get(&t->modids, q->library, &cid);
  if (u64map_get(&t->views, q->library, &mod))
    return describe_functions(x, mod, KIND_MODULE, cid, NULL); /* asked before: the same view */
  r = hostd__gpu.library_module(q->library, &mod);
  if (r != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->views, q->library, mod) != 0 || u64map_put(&t->modules, mod, KIND_VIEW) != 0) {
    u64map_del(&t->views, q->library);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  r = describe_functions(x, mod, KIND_MODULE, cid, NULL);
  if (r != CUDA_SUCCESS) {
    hostd__module_forget(t, mod);
    u64map_del(&t->modules, mod);
    u64map_del(&t->views, q->library);
  }
  return r;
}

/* The kind a function's module was loaded as (a view counts as a module);
 * -1 when the function is not the tenant's. */
static int func_kind(const hostd_tenant_t *t, uint64_t f) {
  uint64_t mod, kind;
  if (!u64map_get(&t->funcs, f, &mod) || !u64map_get(&t->modules, mod, &kind))
    return -1;
  return kind == KIND_VIEW ? KIND_MODULE : (int)kind;
}

static CUresult exec_func_attr(exec_t *x, const call_func_attr_req_t *q) {
  int kind = func_kind(x->t, q->func), v = 0;
  CUresult r;
  if (kind < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  r = hostd__gpu.func_attr(q->func, kind, q->attr, &v);
  PUT_REPLY(func_attr, x, .value = v);
  return r;
}

/* All attributes at once: the first one a function cannot answer unloaded
 * loads it (gpu.h), the rest are then a driver call each.  An error only
 * when none was answered (the first one's). */
static CUresult exec_func_attrs(exec_t *x, const call_func_attrs_req_t *q) {
  int kind = func_kind(x->t, q->func);
  call_func_attrs_rep_t rep;
  CUresult first = CUDA_SUCCESS;
  if (kind < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  memset(&rep, 0, sizeof(rep));
  for (int a = 0; a < CALL_FUNC_ATTRS; a++) {
    int v = 0;
    CUresult r = hostd__gpu.func_attr(q->func, kind, a, &v);
    if (r == CUDA_SUCCESS) {
      rep.attr[a] = v;
      rep.valid |= 1u << a;
    } else if (first == CUDA_SUCCESS) {
      first = r;
    }
  }
  if (!rep.valid)
    return first;
  return call_func_attrs_rep_put(&rep, x->out) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

static CUresult exec_func_set_attr(exec_t *x, const call_func_set_attr_req_t *q) {
  int kind = func_kind(x->t, q->func);
  if (kind < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  return hostd__gpu.func_set_attr(q->func, kind, q->attr, q->value);
}

static CUresult exec_func_cache(exec_t *x, const call_func_cache_req_t *q) {
  int kind = func_kind(x->t, q->func);
  if (kind < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if (q->config > CU_FUNC_CACHE_PREFER_EQUAL)
    return CUDA_ERROR_INVALID_VALUE;
  return hostd__gpu.func_cache(q->func, kind, (int)q->config);
}

/* ---- launches ---- */

/* An event attribute names a handle: it must be the tenant's own. */
static bool launch_attrs_ok(const hostd_tenant_t *t, const CUlaunchAttribute *al, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    if ((al[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT ||
         al[i].id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT) &&
        !u64map_get(&t->events, (uint64_t)(uintptr_t)al[i].value.programmaticEvent.event, NULL))
      return false;
  return true;
}

_Static_assert(sizeof(CUlaunchAttribute) == CALL_LAUNCH_ATTR_SIZE, "LAUNCH attrs (call.def)");

/* A launch through the scheduler (hostd/sched.h): it makes the tenant
 * stream's scheduler state at the first launch on it. */
static CUresult launch_scheduled(exec_t *x, tstream_t *ts, const call_launch_req_t *q,
                                 const CUlaunchAttribute *al, const void *args) {
  hostd_sched_launch_t l = {.f = q->func, .shmem = q->shmem, .attrs = al, .nattr = q->nattr,
                            .args = args, .argbytes = (uint32_t)q->args.len};
  CUresult r;
  if (!ts->ss && !(ts->ss = hostd__sched_stream_new(x->t->sched, ts->handle, &r)))
    return r;
  (void)u64map_get(&x->t->kids, q->func, &l.kernel_id);
  memcpy(l.grid, q->grid, sizeof(l.grid));
  memcpy(l.block, q->block, sizeof(l.block));
  return hostd__sched_launch(ts->ss, &l);
}

/* The launch path: the function must be the tenant's, its stream entered;
 * attributes and arguments are copied to aligned storage (the views into
 * the frame may be unaligned), the only copy on this side. */
static CUresult exec_launch(exec_t *x, const call_launch_req_t *q) {
  CUlaunchAttribute al[CALL_LAUNCH_ATTRS_MAX];
  uint64_t argbuf[CALL_LAUNCH_ARGS_MAX / 8];
  tstream_t *ts;
  CUresult r;

  if (!u64map_get(&x->t->funcs, q->func, NULL))
    return CUDA_ERROR_INVALID_HANDLE;
  memcpy(al, q->attrs.p, q->attrs.len);
  if (!launch_attrs_ok(x->t, al, q->nattr))
    return CUDA_ERROR_INVALID_HANDLE;
  if (!(ts = hostd__stream_of(x->t, q->stream, &r)) ||
      (r = hostd__stream_enter_launch(x->t, ts)) != CUDA_SUCCESS)
    return r;
  memcpy(argbuf, q->args.p, q->args.len);
  /* On a capturing stream the scheduler stays out (exec-graph.c). */
  if (!x->t->sched || hostd__stream_capturing(x->t, ts))
    return hostd__gpu.launch(q->func, q->grid, q->block, q->shmem, ts->handle, al, q->nattr,
                             argbuf, q->args.len);
  return launch_scheduled(x, ts, q, al, argbuf);
}

/* cuOccupancyMaxActiveClusters / cuOccupancyMaxPotentialClusterSize: the
 * function must be the tenant's own; the launch config is rebuilt here from
 * fixed fields, so no attribute but the two cluster ones reaches the driver. */
static CUresult exec_occupancy(exec_t *x, const call_occupancy_req_t *q) {
  int kind = func_kind(x->t, q->func), v = 0;
  CUlaunchAttribute at[2];
  CUlaunchConfig c;
  CUresult r;

  if (q->which > 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (kind < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  memset(&c, 0, sizeof(c));
  memset(at, 0, sizeof(at));
  c.gridDimX = q->grid[0], c.gridDimY = q->grid[1], c.gridDimZ = q->grid[2];
  c.blockDimX = q->block[0], c.blockDimY = q->block[1], c.blockDimZ = q->block[2];
  c.sharedMemBytes = q->shmem;
  if (q->cluster[0] || q->cluster[1] || q->cluster[2]) {
    at[c.numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at[c.numAttrs].value.clusterDim.x = q->cluster[0];
    at[c.numAttrs].value.clusterDim.y = q->cluster[1];
    at[c.numAttrs].value.clusterDim.z = q->cluster[2];
    c.numAttrs++;
  }
  if (q->policy >= 0) {
    at[c.numAttrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
    at[c.numAttrs].value.clusterSchedulingPolicyPreference = (CUclusterSchedulingPolicy)q->policy;
    c.numAttrs++;
  }
  c.attrs = c.numAttrs ? at : NULL;
  r = hostd__gpu.occupancy(q->func, kind, (int)q->which, &c, &v);
  if (r != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_DEBUG,
               "tenant %u: occupancy %u of function %#llx (kind %d): grid %ux%ux%u block %ux%ux%u "
               "shmem %u cluster %ux%ux%u policy %d: %d",
               x->t->id, q->which, (unsigned long long)q->func, kind, q->grid[0], q->grid[1],
               q->grid[2], q->block[0], q->block[1], q->block[2], q->shmem, q->cluster[0],
               q->cluster[1], q->cluster[2], q->policy, (int)r);
  PUT_REPLY(occupancy, x, .value = v);
  return r;
}

/* ---- host functions ---- */

static CUresult exec_hostfn(exec_t *x, const call_hostfn_req_t *q) {
  hostd_tenant_t *t = x->t;
  tstream_t *ts;
  CUresult r;
  tstream_t *cs = hostd__stream_of(t, q->stream, &r);
  if (q->seq == 0 || (q->seq & (HOSTD_HOSTFN_KEEP | HOSTD_HOSTFN_DROP)))
    r = CUDA_ERROR_INVALID_VALUE;
  else if (cs && hostd__stream_capturing(t, cs))
    r = hostd__capture_hostfn(t, cs, q->seq); /* the capture's graph holds it */
  else if (!t->hf)
    r = CUDA_ERROR_NOT_SUPPORTED; /* driven without server.c (tests) */
  else if ((r = hostd__stream_lookup_enter(t, q->stream, &ts)) == CUDA_SUCCESS &&
           (r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_HOSTFNS, 1)) == CUDA_SUCCESS) {
    /* The unit comes back when the function's gate opens (hostfn.c). */
    r = (CUresult)hostd__hostfn_enqueue(t->hf, ts->handle, q->seq, hostd__quota_self);
    if (r != CUDA_SUCCESS) /* enqueue counted the post failed itself */
      hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_HOSTFNS, 1);
    return r;
  }
  if (t->hf)
    hostd__hostfn_post_failed(t->hf);
  return r;
}

/* Answered by the loop thread (server.c, hostfn.c): never reaches here. */
static CUresult exec_hostfn_wait(exec_t *x, const call_hostfn_wait_req_t *q) {
  (void)q;
  x->why = "HOSTFN_WAIT is answered by the loop thread, never queued";
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- hello ---- */

static CUresult exec_hello(exec_t *x, const call_hello_req_t *q) {
  char name[65];
  call_hello_rep_t rep;
  call_view_t tails[CALL_TAILS_MAX];
  size_t at = x->out->len;

  if (q->version != CALL_PROTO_VERSION) {
    hostd__log(HOSTD_LOG_INFO, "tenant %u speaks call protocol %u, we speak %u", x->t->id,
               q->version, CALL_PROTO_VERSION);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  memcpy(name, q->name, 64);
  name[64] = 0;
  /* The token was checked by wire's handshake (network tenants only). */
  x->t->prio = q->priority == 0 ? hostd__snapshot.prio_greatest : hostd__snapshot.prio_least;
  x->t->hello = true;
  if (!x->t->sched) {
    hostd_quota_t *qs = hostd__quota_self; /* NULL: driven without a worker */
    x->t->sched = hostd__sched_tenant_new(x->t->id, name, q->priority == 0 ? 0 : 1,
                                          qs && qs->weight ? qs->weight : 1);
    if (x->t->sched && qs) {
      hostd__sched_tenant_count_gpu(x->t->sched, &qs->gpu_ns);
      hostd__sched_tenant_count_forms(x->t->sched, &qs->sliced, &qs->ptb, &qs->flush);
      __atomic_store_n(&qs->scheduled, 1, __ATOMIC_RELEASE);
    }
  }
  hostd__log(HOSTD_LOG_INFO, "tenant %u '%s' joined as %s", x->t->id, name,
             q->priority == 0 ? "latency-critical" : "best-effort");
  if (wire_buf_reserve(x->out, CALL_HELLO_REP_FIXED) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  x->out->len += CALL_HELLO_REP_FIXED;  /* filled below */
  for (int i = 0; i < hostd__ndev; i++) /* one served device (server.c) */
    (void)call_snapshot_put(&hostd__snapshot, x->out);
  if (x->out->err)
    return CUDA_ERROR_OUT_OF_MEMORY;
  memset(&rep, 0, sizeof(rep));
  rep.tenant = x->t->id;
  rep.ndev = (uint32_t)hostd__ndev;
  rep.devs = (call_view_t){x->out->data + at + CALL_HELLO_REP_FIXED,
                           x->out->len - at - CALL_HELLO_REP_FIXED};
  return call_hello_rep_encode(&rep, x->out->data + at, tails) < 0 ? CUDA_ERROR_INVALID_VALUE
                                                                   : CUDA_SUCCESS;
}

/* ---- handlers in other files (exec-vmm.c, exec-pool.c) ---- */

#define ELSEWHERE(name)                                                                            \
  static CUresult exec_##name(exec_t *x, const call_##name##_req_t *q) {                           \
    return hostd__exec_##name(x->t, x->out, q);                                                    \
  }
HOSTD_EXEC_ELSEWHERE(ELSEWHERE)
#undef ELSEWHERE

/* ---- the table ---- */

typedef CUresult (*exec_fn)(exec_t *x, const void *req);

/* One thunk per op turns the decoded union into the handler's own type. */
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  static CUresult thunk_##name(exec_t *x, const void *q) {                                         \
    return exec_##name(x, (const call_##name##_req_t *)q);                                         \
  }
#include "wire/call.def"
#undef CALL_OP

static const exec_fn handlers[CALL_OP_COUNT] = {
#define CALL_OP(NAME, name, number, modes, by) [number] = thunk_##name,
#include "wire/call.def"
#undef CALL_OP
};

/* Every request struct, so one decode target fits any op. */
typedef union any_req {
#define CALL_OP(NAME, name, number, modes, by) call_##name##_req_t name;
#include "wire/call.def"
#undef CALL_OP
} any_req_t;

__thread uint32_t hostd__cur_op = CALL_OP_COUNT;

CUresult hostd__exec(hostd_tenant_t *t, uint32_t op, uint32_t flags, const uint8_t *args,
                     size_t len, wire_buf_t *out, const char **why) {
  exec_t x = {t, out, NULL};
  const call_msg_t *m = call_req_msg(op);
  any_req_t q;
  CUresult r;

  if (!m || !handlers[op]) {
    *why = "unknown op";
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (op != CALL_OP_HELLO && !t->hello) {
    *why = "request before hello";
    return CUDA_ERROR_NOT_INITIALIZED;
  }
  if ((flags & CALL_ASYNC) && !(call_op_modes(op) & CALL_M_POST)) {
    snprintf(t->why.text, sizeof(t->why.text), "%s: posted, but it must be answered",
             call_op_name(op));
    *why = t->why.text;
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (call_decode(m, args, len, &q, NULL, &t->why) != 0) {
    *why = t->why.text;
    return CUDA_ERROR_INVALID_VALUE;
  }
  hostd__cur_op = op;
  r = handlers[op](&x, &q);
  hostd__cur_op = CALL_OP_COUNT;
  if (x.why)
    *why = x.why;
  if (r != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_DEBUG, "tenant %u: %s%s answered %d%s%s", t->id, call_op_name(op),
               (flags & CALL_ASYNC) ? " (posted)" : "", (int)r, x.why ? ": " : "",
               x.why ? x.why : "");
  return r;
}
