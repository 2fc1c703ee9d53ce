/* stream.c: streams, events and synchronisation.
 *
 * Stream and event handles are tallyd's real ones.  Creating, destroying and
 * querying go one round trip each; recording an event and waiting on one
 * are fire-and-forget (their errors surface at the next synchronising call,
 * wire/call.def).  Synchronising calls carry CALL_SYNCPOINT, which is
 * where the host reports deferred errors.  Stream capture is in graph.c.
 *
 * Priorities are virtualised: the host stream's real priority is decided by
 * the tenant's class (latency-critical the greatest, best-effort the least;
 * the daemon decides), but the application sees what it asked for.  Each stream
 * this process created is kept here with its flags and its requested
 * priority clamped to the device's range, as the driver clamps it, so
 * cuStreamGetPriority and cuStreamGetFlags answer locally and as natively.
 *
 * Stream attributes (cuStreamSetAttribute / GetAttribute / CopyAttributes)
 * are kept here too, checked as the driver checks them, and answered back:
 * the priority is the one cuStreamGetPriority answers; an L2 access-policy
 * window, the synchronisation policy and the memory-synchronisation domains
 * are performance hints that tallyd's real stream does not take (the shared
 * context's persisting-L2 set-aside is never grown for a tenant, so a window
 * could not persist lines there; a tenant's synchronisations are the guest's
 * own waits).  Results are the same either way.  The default streams share
 * one set of attributes.
 */
#include "guestlib/guest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Streams of this process: handle -> (flags, priority).  Lock story:
 * stream_lock guards the array; never held across a round trip. */
typedef struct stream_attrs {
  CUaccessPolicyWindow window;
  CUsynchronizationPolicy sync;
  CUlaunchMemSyncDomainMap domain_map;
  CUlaunchMemSyncDomain domain;
} stream_attrs_t;

typedef struct stream_info {
  uint64_t handle;
  unsigned flags;
  int prio;
  stream_attrs_t attrs;
} stream_info_t;

/* What a stream has before any cuStreamSetAttribute, as natively: the
 * driver (580, H200) answers -1 for a synchronisation policy never set. */
#define SYNC_POLICY_UNSET ((CUsynchronizationPolicy)-1)
#define ATTRS_DEFAULT                                                                              \
  {.sync = SYNC_POLICY_UNSET, .domain_map = {.default_ = 0, .remote = 1},                       \
   .domain = CU_LAUNCH_MEM_SYNC_DOMAIN_DEFAULT}

static pthread_mutex_t stream_lock = PTHREAD_MUTEX_INITIALIZER;
static stream_info_t *streams;
static size_t nstreams, capstreams;
/* The default streams' (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD). */
static stream_info_t default_stream = {.attrs = ATTRS_DEFAULT};

static int stream_remember(uint64_t h, unsigned flags, int prio) {
  int rc = 0;
  pthread_mutex_lock(&stream_lock);
  if (nstreams == capstreams) {
    size_t cap = capstreams ? capstreams * 2 : 32;
    stream_info_t *n = realloc(streams, cap * sizeof(*n));
    if (!n)
      rc = -ENOMEM;
    else
      streams = n, capstreams = cap;
  }
  if (rc == 0)
    streams[nstreams++] = (stream_info_t){h, flags, prio, ATTRS_DEFAULT};
  pthread_mutex_unlock(&stream_lock);
  return rc;
}

static void stream_forget(uint64_t h) {
  pthread_mutex_lock(&stream_lock);
  for (size_t i = 0; i < nstreams; i++)
    if (streams[i].handle == h) {
      streams[i] = streams[--nstreams];
      break;
    }
  pthread_mutex_unlock(&stream_lock);
}

/* Flags and priority of stream s as the application created it.  The
 * default streams (NULL, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) are
 * blocking streams of priority 0, as natively. */
static stream_info_t *stream_find_locked(CUstream s) {
  uint64_t h = (uint64_t)(uintptr_t)s;
  if (s == NULL || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
    return &default_stream;
  for (size_t i = 0; i < nstreams; i++)
    if (streams[i].handle == h)
      return &streams[i];
  return NULL;
}

static CUresult stream_lookup(CUstream s, unsigned *flags, int *prio) {
  CUresult r = CUDA_ERROR_INVALID_HANDLE;
  stream_info_t *si;
  pthread_mutex_lock(&stream_lock);
  if ((si = stream_find_locked(s))) {
    *flags = si->flags;
    *prio = si->prio;
    r = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&stream_lock);
  return r;
}

/* A priority clamped to the device's range, as the driver clamps it
 * (greatest is numerically lower). */
static int prio_clamp(int prio) {
  const call_snapshot_t *d = &guest__g.dev[guest__cur_device()];
  if (prio < d->prio_greatest)
    prio = d->prio_greatest;
  if (prio > d->prio_least)
    prio = d->prio_least;
  return prio;
}

static CUresult stream_new(CUstream *ps, unsigned int flags, int prio) {
  call_stream_new_req_t q;
  call_stream_new_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!ps)
    return CUDA_ERROR_INVALID_VALUE;
  prio = prio_clamp(prio);
  q.flags = flags;
  q.priority = prio;
  r = guest__rpc(CALL_OP_STREAM_NEW, 0, &q, &a);
  if (r != CUDA_SUCCESS)
    return r;
  if (stream_remember(a.stream, flags, prio) != 0) {
    call_stream_del_req_t d = {.stream = a.stream};
    (void)guest__rpc(CALL_OP_STREAM_DEL, 0, &d, NULL);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ps = (CUstream)(uintptr_t)a.stream;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuStreamCreate(CUstream *ps, unsigned int flags) {
  return stream_new(ps, flags, 0);
}

GUEST_EXPORT CUresult cuStreamCreateWithPriority(CUstream *ps, unsigned int flags, int prio) {
  return stream_new(ps, flags, prio);
}

GUEST_EXPORT CUresult cuStreamDestroy_v2(CUstream s) {
  call_stream_del_req_t q = {.stream = (uint64_t)(uintptr_t)s};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  r = guest__rpc(CALL_OP_STREAM_DEL, 0, &q, NULL);
  if (r == CUDA_SUCCESS)
    stream_forget(q.stream);
  return r;
}

static CUresult stream_op(uint32_t op, CUstream s, int ptds) {
  call_stream_sync_req_t sq = {.stream = guest__stream(s, ptds)};
  call_stream_query_req_t qq = {.stream = sq.stream};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (op == CALL_OP_STREAM_SYNC && guest__sync_word(sq.stream)) {
    guest__synced(op, sq.stream); /* the GPU answered: as after the call */
    return CUDA_SUCCESS;
  }
  return guest__rpc(op, CALL_SYNCPOINT, op == CALL_OP_STREAM_SYNC ? (const void *)&sq : &qq, NULL);
}

GUEST_EXPORT CUresult cuStreamSynchronize(CUstream s) {
  return stream_op(CALL_OP_STREAM_SYNC, s, 0);
}
GUEST_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s) {
  return stream_op(CALL_OP_STREAM_SYNC, s, 1);
}
GUEST_EXPORT CUresult cuStreamQuery(CUstream s) {
  return stream_op(CALL_OP_STREAM_QUERY, s, 0);
}
GUEST_EXPORT CUresult cuStreamQuery_ptsz(CUstream s) {
  return stream_op(CALL_OP_STREAM_QUERY, s, 1);
}

static CUresult ctx_sync(void) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  call_ctx_sync_req_t q;
  return guest__rpc(CALL_OP_CTX_SYNC, CALL_SYNCPOINT, &q, NULL);
}

GUEST_EXPORT CUresult cuCtxSynchronize(void) {
  return ctx_sync();
}
GUEST_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  (void)ctx; /* every context of the tenant is the device's one context */
  return ctx_sync();
}

GUEST_EXPORT CUresult cuStreamGetPriority(CUstream s, int *prio) {
  unsigned flags;
  if (!prio)
    return CUDA_ERROR_INVALID_VALUE;
  return stream_lookup(s, &flags, prio);
}
GUEST_EXPORT CUresult cuStreamGetPriority_ptsz(CUstream s, int *prio) {
  return cuStreamGetPriority(s, prio);
}

GUEST_EXPORT CUresult cuStreamGetFlags(CUstream s, unsigned int *flags) {
  int prio;
  if (!flags)
    return CUDA_ERROR_INVALID_VALUE;
  return stream_lookup(s, flags, &prio);
}
GUEST_EXPORT CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *flags) {
  return cuStreamGetFlags(s, flags);
}

GUEST_EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext *pctx) {
  (void)s;
  return cuCtxGetCurrent(pctx);
}
GUEST_EXPORT CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *pctx) {
  return cuStreamGetCtx(s, pctx);
}
/* No green contexts are offered to tenants: the stream's is always none. */
GUEST_EXPORT CUresult cuStreamGetCtx_v2(CUstream s, CUcontext *pctx, CUgreenCtx *pgreen) {
  if (!pgreen)
    return CUDA_ERROR_INVALID_VALUE;
  *pgreen = NULL;
  return cuStreamGetCtx(s, pctx);
}
GUEST_EXPORT CUresult cuStreamGetCtx_v2_ptsz(CUstream s, CUcontext *pctx, CUgreenCtx *pgreen) {
  return cuStreamGetCtx_v2(s, pctx, pgreen);
}

/* ---- stream attributes (kept here; see the top of this file) ---- */

/* v is a value the driver would take for attr on this device. */
static CUresult attr_check(CUstreamAttrID attr, const CUstreamAttrValue *v) {
  const int32_t *a = guest__g.dev[guest__cur_device()].attr;
  const CUaccessPolicyWindow *w = &v->accessPolicyWindow;
  switch ((int)attr) {
  case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
    return w->num_bytes <= (size_t)a[CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE] &&
                   w->hitRatio >= 0.0f && w->hitRatio <= 1.0f &&
                   (unsigned)w->hitProp <= CU_ACCESS_PROPERTY_PERSISTING &&
                   (unsigned)w->missProp <= CU_ACCESS_PROPERTY_PERSISTING
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    return v->syncPolicy >= CU_SYNC_POLICY_AUTO && v->syncPolicy <= CU_SYNC_POLICY_BLOCKING_SYNC
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    return CUDA_SUCCESS; /* clamped, as at creation */
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
    return v->memSyncDomainMap.default_ < a[CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT] &&
                   v->memSyncDomainMap.remote < a[CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT]
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    return (unsigned)v->memSyncDomain <= CU_LAUNCH_MEM_SYNC_DOMAIN_REMOTE
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

/* Reads (set false) or writes (set true) attr of s through *v. */
static CUresult stream_attr(CUstream s, CUstreamAttrID attr, CUstreamAttrValue *v, bool set) {
  CUresult r = guest__ready();
  stream_info_t *si;
  if (r != CUDA_SUCCESS)
    return r;
  if (!v)
    return CUDA_ERROR_INVALID_VALUE;
  if (set && (r = attr_check(attr, v)) != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&stream_lock);
  if (!(si = stream_find_locked(s))) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    stream_attrs_t *a = &si->attrs;
    switch ((int)attr) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
      set ? (void)(a->window = v->accessPolicyWindow) : (void)(v->accessPolicyWindow = a->window);
      break;
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
      set ? (void)(a->sync = v->syncPolicy) : (void)(v->syncPolicy = a->sync);
      break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
      set ? (void)(si->prio = prio_clamp(v->priority)) : (void)(v->priority = si->prio);
      break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
      set ? (void)(a->domain_map = v->memSyncDomainMap)
          : (void)(v->memSyncDomainMap = a->domain_map);
      break;
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
      set ? (void)(a->domain = v->memSyncDomain) : (void)(v->memSyncDomain = a->domain);
      break;
    default:
      r = CUDA_ERROR_INVALID_VALUE;
    }
  }
  pthread_mutex_unlock(&stream_lock);
  return r;
}

GUEST_EXPORT CUresult cuStreamSetAttribute(CUstream s, CUstreamAttrID attr,
                                           const CUstreamAttrValue *v) {
  CUstreamAttrValue copy;
  if (!v)
    return CUDA_ERROR_INVALID_VALUE;
  copy = *v;
  return stream_attr(s, attr, &copy, true);
}
GUEST_EXPORT CUresult cuStreamSetAttribute_ptsz(CUstream s, CUstreamAttrID attr,
                                                const CUstreamAttrValue *v) {
  return cuStreamSetAttribute(s, attr, v);
}

GUEST_EXPORT CUresult cuStreamGetAttribute(CUstream s, CUstreamAttrID attr, CUstreamAttrValue *v) {
  return stream_attr(s, attr, v, false);
}
GUEST_EXPORT CUresult cuStreamGetAttribute_ptsz(CUstream s, CUstreamAttrID attr,
                                                CUstreamAttrValue *v) {
  return cuStreamGetAttribute(s, attr, v);
}

/* Every attribute of src, its priority included, becomes dst's. */
GUEST_EXPORT CUresult cuStreamCopyAttributes(CUstream dst, CUstream src) {
  CUresult r = guest__ready();
  stream_info_t *d, *from;
  if (r != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&stream_lock);
  d = stream_find_locked(dst);
  from = stream_find_locked(src);
  if (!d || !from) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else {
    d->attrs = from->attrs;
    d->prio = from->prio;
  }
  pthread_mutex_unlock(&stream_lock);
  return r;
}
GUEST_EXPORT CUresult cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src) {
  return cuStreamCopyAttributes(dst, src);
}

GUEST_EXPORT CUresult cuStreamGetId(CUstream s, unsigned long long *id) {
  if (!id)
    return CUDA_ERROR_INVALID_VALUE;
  *id = (unsigned long long)(uintptr_t)s;
  return CUDA_SUCCESS;
}
GUEST_EXPORT CUresult cuStreamGetId_ptsz(CUstream s, unsigned long long *id) {
  return cuStreamGetId(s, id);
}

GUEST_EXPORT CUresult cuStreamGetDevice(CUstream s, CUdevice *dev) {
  (void)s;
  if (!dev)
    return CUDA_ERROR_INVALID_VALUE;
  *dev = guest__cur_device();
  return CUDA_SUCCESS;
}
GUEST_EXPORT CUresult cuStreamGetDevice_ptsz(CUstream s, CUdevice *dev) {
  return cuStreamGetDevice(s, dev);
}

/* ---- events ---- */

GUEST_EXPORT CUresult cuEventCreate(CUevent *pe, unsigned int flags) {
  call_event_new_req_t q = {.flags = flags};
  call_event_new_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pe)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__rpc(CALL_OP_EVENT_NEW, 0, &q, &a);
  if (r == CUDA_SUCCESS)
    *pe = (CUevent)(uintptr_t)a.event;
  return r;
}

GUEST_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
  call_event_del_req_t q = {.event = (uint64_t)(uintptr_t)e};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  return guest__rpc(CALL_OP_EVENT_DEL, 0, &q, NULL);
}

static CUresult event_record(CUevent e, CUstream s, unsigned flags, int ptds) {
  call_event_record_req_t q = {
      .event = (uint64_t)(uintptr_t)e, .stream = guest__stream(s, ptds), .flags = flags};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  return guest__post_cu(CALL_OP_EVENT_RECORD, &q);
}

GUEST_EXPORT CUresult cuEventRecord(CUevent e, CUstream s) {
  return event_record(e, s, 0, 0);
}
GUEST_EXPORT CUresult cuEventRecord_ptsz(CUevent e, CUstream s) {
  return event_record(e, s, 0, 1);
}
GUEST_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int f) {
  return event_record(e, s, f, 0);
}
GUEST_EXPORT CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int f) {
  return event_record(e, s, f, 1);
}

static CUresult event_op(uint32_t op, CUevent e) {
  call_event_sync_req_t sq = {.event = (uint64_t)(uintptr_t)e};
  call_event_query_req_t qq = {.event = sq.event};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  return guest__rpc(op, CALL_SYNCPOINT, op == CALL_OP_EVENT_SYNC ? (const void *)&sq : &qq, NULL);
}

GUEST_EXPORT CUresult cuEventSynchronize(CUevent e) {
  return event_op(CALL_OP_EVENT_SYNC, e);
}
GUEST_EXPORT CUresult cuEventQuery(CUevent e) {
  return event_op(CALL_OP_EVENT_QUERY, e);
}

GUEST_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
  call_event_time_req_t q = {.start = (uint64_t)(uintptr_t)start, .end = (uint64_t)(uintptr_t)end};
  call_event_time_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!ms)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__rpc(CALL_OP_EVENT_TIME, 0, &q, &a);
  if (r == CUDA_SUCCESS)
    *ms = a.ms;
  return r;
}

GUEST_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
  return cuEventElapsedTime_v2(ms, start, end);
}

static CUresult stream_wait(CUstream s, CUevent e, unsigned flags, int ptds) {
  call_stream_wait_req_t q = {
      .stream = guest__stream(s, ptds), .event = (uint64_t)(uintptr_t)e, .flags = flags};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!e)
    return CUDA_ERROR_INVALID_HANDLE;
  return guest__post_cu(CALL_OP_STREAM_WAIT, &q);
}

GUEST_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int f) {
  return stream_wait(s, e, f, 0);
}
GUEST_EXPORT CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int f) {
  return stream_wait(s, e, f, 1);
}
