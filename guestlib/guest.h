/* guest.h: the internal-public header of guestlib/, the guest library.
 *
 * guestlib/ is installed as libcuda.so.1: its public API is the CUDA driver
 * API itself (cuda.h), under the names the real driver exports.  We therefore
 * see cuda.h as the driver does (__CUDA_API_VERSION_INTERNAL): cuMemAlloc is
 * the legacy 32-bit entry point and cuMemAlloc_v2 the one applications reach.
 * This header carries what the library's files share: the export macro, the
 * environment names, the process-wide guest state and its lock story, the
 * channel to tallyd (chan.c), the local tables of allocations and functions
 * (tables.c) and the one table that turns our own failures into CUresult.
 */
#ifndef TALLY_GUEST_H
#define TALLY_GUEST_H

#ifndef __CUDA_API_VERSION_INTERNAL
#define __CUDA_API_VERSION_INTERNAL 1
#endif
#include <cuda.h>
#include <cudaProfiler.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/call.h"

/* Only cu* entry points are visible outside libcuda.so.1 (-fvisibility=hidden
 * elsewhere), so tenant programs' own zstd/xxHash never collide with ours. */
#define GUEST_EXPORT __attribute__((visibility("default")))

/* An entry point and its per-thread-default-stream twin (name##_ptds, or
 * name##_ptsz for the async forms): `call(pt)` is their body, pt 1 in the
 * twin (guest__stream then reads stream 0 as the thread's own). */
#define GUEST_PT_TWINS(name, twin, params, call)                                                   \
  GUEST_EXPORT CUresult name params {                                                              \
    return call(0);                                                                                \
  }                                                                                                \
  GUEST_EXPORT CUresult twin params {                                                              \
    return call(1);                                                                                \
  }
#define GUEST_PTDS(name, params, call) GUEST_PT_TWINS(name, name##_ptds, params, call)
#define GUEST_PTSZ(name, params, call) GUEST_PT_TWINS(name, name##_ptsz, params, call)

/* Driver version we report: CUDA 13.0. */
#define GUEST_DRIVER_VERSION 13000

#define GUEST_ENV_HOST       "TALLY_HOST"     /* unset: local UNIX socket; tcp://h:p */
#define GUEST_ENV_PRIORITY   "TALLY_PRIORITY" /* latency-critical | best-effort */
#define GUEST_ENV_NAME       "TALLY_NAME"
#define GUEST_ENV_TOKEN      "TALLY_TOKEN"
#define GUEST_ENV_LOG        "TALLY_LOG" /* "debug" logs every call */
#define GUEST_DEFAULT_SOCKET "/run/tally/tallyd.sock"

/* Async copies up to half of wire's 64 KiB post batch go fire-and-forget;
 * larger ones take a round trip per CALL_CHUNK. */
#define GUEST_BATCH_FLUSH (64u << 10)

/* Process-wide guest state.  Lock story: `lock` serialises cuInit and the
 * primary-context bookkeeping; it is never held across a round trip (the
 * channel, wire_conn, is thread-safe on its own).  `inited` and the snapshot
 * are written once under `lock` by cuInit and only read afterwards; `lost`
 * is set atomically by chan.c. */
typedef struct guest_state {
  pthread_mutex_t lock;
  bool inited;        /* cuInit succeeded */
  CUresult init_rc;   /* result of the first cuInit, returned by later ones */
  bool lost;          /* the channel broke: every call fails from now on */
  bool forked;        /* this process is a fork() of a connected tenant (chan.c) */
  uint32_t tenant_id; /* assigned by tallyd */
  uint32_t priority;  /* sent at HELLO: 0 latency-critical, 1 best-effort */
  int ndev;
  call_snapshot_t dev[CALL_MAX_DEVICES];
  char addr[512]; /* address tried, for messages */
} guest_state_t;

extern guest_state_t guest__g;

/* ---- errors: our own failures (negative errno / wire codes) -> CUresult ---- */
CUresult guest__cu_error(int status);
void guest__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A number from the environment in 0..max, else dflt (chan.c). */
long guest__env_long(const char *name, long dflt, long max);
bool guest__debug(void);
/* Logs "NAME is not supported" once per *logged flag; returns NOT_SUPPORTED. */
CUresult guest__unsupported(const char *name, int *logged);
/* Logs "NAME: WHY" once per *logged flag; returns NOT_SUPPORTED (a call
 * Tally refuses by design, with the reason). */
CUresult guest__refused(const char *name, const char *why, int *logged);
/* What every call answers in the child of a fork() made after cuInit:
 * CUDA_ERROR_NOT_INITIALIZED, as the driver does; logs one line the first
 * time (entry.c). */
CUresult guest__forked_error(void);

/* ---- channel (chan.c, over wire/) ---- */
/* Connects to url ("unix:/p", "/p", "tcp://h:p") and does wire's handshake.
 * Returns 0 or a negative status (wire_strerror); err gets wire's reason. */
int guest__chan_open(const char *url, const char *name, int latency_critical, const char *token,
                     char *err, size_t errlen);
void guest__chan_close(void);
/* True on a shared-memory connection (pinned memory can then be shared). */
bool guest__chan_shm(void);
/* A latency-critical tenant's reply spin in wire's terms (us; 0: the
 * transport's rule, < 0: never): TALLY_LC_SPIN_US, else 50000 on a host of 4
 * or more CPUs. */
int32_t guest__lc_spin_us(void);
/* size bytes (a whole number of pages) of a memfd mapped here and shared
 * with tallyd, which maps and registers it (tag = this address); NULL when
 * sharing is not possible (TCP, no memfd, the daemon refused).  *flags (may
 * be NULL) gets GUEST_HOST_SHARED, with GUEST_HOST_ELSEWHERE when tallyd
 * mapped it at another address. */
void *guest__shared_alloc(size_t size, unsigned *flags);
/* Registered host memory over shared memory (hostreg.c).  Moves the whole
 * pages inside [base, base + size) onto a memfd tallyd maps and registers
 * (tag = *lo); 0 with [*lo, *hi) set and *how as guest__shared_alloc's
 * *flags, or a negative errno when the range stays as it is (TCP,
 * TALLY_SHARE_REGISTERED=0, no whole page, not private anonymous memory,
 * tallyd refused). */
int guest__hostreg_share(uint64_t base, uint64_t size, uint64_t *lo, uint64_t *hi, unsigned *how);
/* The shared pages of the registration at base; false when it has none. */
bool guest__hostreg_find(uint64_t base, uint64_t *lo, uint64_t *hi);
/* Releases them in tallyd (after the tenant's copies) and moves the bytes
 * back onto private pages. */
void guest__hostreg_unshare(uint64_t base);
/* cuStreamSynchronize's fast path for a latency-critical tenant over shared
 * memory (syncword.c): true when the GPU answered it (the stream's work is
 * done, nothing kept to report), false when the caller must make the real
 * call. */
bool guest__sync_word(uint64_t stream);
/* The word tallyd last published to this tenant (CALL_NOTE_* in wire/call.h)
 * into *word: 0 when it said one, -EOPNOTSUPP when the daemon publishes
 * none, -ENOTCONN before the connection or after it was lost. */
int guest__chan_note(uint32_t *word);
/* Hands fd to the daemon under tag (wire_conn_send_fd); returns its status. */
int guest__send_fd(int fd, uint64_t tag);
/* Makes the daemon hold data (sent only if it lacks it); *id = its XXH3-64. */
int guest__blob_offer(const void *data, size_t len, uint64_t *id);
/* Requests are structs of the call vocabulary: q is op's call_<op>_req_t,
 * encoded by wire/call.c (no layout is written in guestlib/).
 * Queues q as a post (CALL_ASYNC).  Returns 0, or a negative status if the
 * channel is lost (or -EINVAL / -EMSGSIZE: q does not encode).  No lock held. */
int guest__post(uint32_t op, const void *q);
/* A synchronisation was answered without a reply (syncword.c): the next
 * post goes out at once, as after a call's reply (wire_conn_answered). */
void guest__answered(void);
/* TALLY_HOPS: whether hand-off times are kept, and those of a post answered
 * without a reply (syncword.c; wire_conn_hops_answered). */
bool guest__hops_on(void);
void guest__hops_answered(uint64_t t_call, uint64_t t_sent, uint64_t t_woke);
/* guest__post as the CUresult a posting driver entry point returns. */
CUresult guest__post_cu(uint32_t op, const void *q);
/* Sends q as a call (after the pending batch) and reads its reply.  *rc
 * gets the CUresult; the result bytes are copied into out (out_cap bytes; a
 * longer reply is an error) or, when out_alloc is not NULL, returned
 * malloc'd there (caller frees); decode them with call_<op>_rep_decode.
 * Returns 0 or a negative status (channel lost). */
int guest__call(uint32_t op, uint32_t flags, const void *q, CUresult *rc, void *out, size_t out_cap,
                size_t *out_len, void **out_alloc);
/* A call whose reply has no tail: decoded into rep (op's call_<op>_rep_t;
 * NULL to ignore it).  Channel failures become a CUresult. */
CUresult guest__rpc(uint32_t op, uint32_t flags, const void *q, void *rep);

/* Ensures cuInit ran (cudart calls in order, but driver-API programs may
 * not): returns CUDA_ERROR_NOT_INITIALIZED when it has not. */
CUresult guest__ready(void);

/* ---- local tables (tables.c) ---- */
typedef enum guest_mem_kind { GUEST_MEM_DEVICE = 1, GUEST_MEM_HOST = 2 } guest_mem_kind_t;
int guest__mem_add(uint64_t base, uint64_t size, guest_mem_kind_t kind, unsigned flags);
int guest__mem_del(uint64_t base, guest_mem_kind_t kind, uint64_t *size);
/* Finds the allocation holding p; returns true and fills base/size/kind. */
bool guest__mem_find(uint64_t p, uint64_t *base, uint64_t *size, guest_mem_kind_t *kind);
/* Host allocation flags: the range was registered by cuMemHostRegister; is
 * a memfd shared with tallyd (copies then go by PINNED_COPY, tag = its
 * base); or, registered, has its whole pages but not all of it shared
 * (hostreg.c: copies name those pages, the rest travels). */
#define GUEST_HOST_REGISTERED 0x80000000u
#define GUEST_HOST_SHARED     0x40000000u
#define GUEST_HOST_INTERIOR   0x20000000u
/* Shared, but mapped at another address in tallyd (CALL_FD_ELSEWHERE):
 * copies name it, the address is not a device address there. */
#define GUEST_HOST_ELSEWHERE  0x10000000u
/* Whether tallyd's GPU reaches a host range with these flags at its
 * address here (kernels and device-side calls may name it). */
#define GUEST_HOST_REACHABLE(flags) \
  (((flags) & (GUEST_HOST_SHARED | GUEST_HOST_ELSEWHERE)) == GUEST_HOST_SHARED)
/* Like guest__mem_find, for host allocations, with their flags. */
bool guest__mem_find_host(uint64_t p, uint64_t *base, uint64_t *size, unsigned *flags);
/* Whether one of the n/8 aligned 8-byte words at args names an address in a
 * host range tallyd's GPU cannot reach (not GUEST_HOST_SHARED); the first
 * such word's offset and value in *off and *val.  Answers false at once
 * while no such range exists. */
bool guest__mem_args_unreachable(const void *args, size_t n, size_t *off, uint64_t *val);
/* Whether any such range exists (no lock: a fast "no" for the copy paths). */
bool guest__mem_any_unreachable(void);
/* Device memory of this tenant, recorded in the table (mem.c: cuMemAlloc and
 * cuMemFree without their argument checks). */
CUresult guest__dev_alloc(uint64_t *ptr, size_t size);
CUresult guest__dev_free(uint64_t ptr);
/* Stream-ordered copies as cuMemcpyHtoDAsync / cuMemcpyDtoH on guest stream
 * value s (mem.c), for mirror.c. */
CUresult guest__copy_htod(uint64_t dst, const void *src, size_t n, uint64_t s);
CUresult guest__copy_dtoh(void *dst, uint64_t src, size_t n, uint64_t s);
/* A posted device-to-device copy on guest stream value s. */
CUresult guest__copy_dtod(uint64_t dst, uint64_t src, size_t n, uint64_t s);

/* ---- device mirrors of unreachable pinned host memory (mirror.c) ---- */
/* The largest host allocation a launch's arguments may name over a link
 * without shared memory: 64 KiB (copied before each such launch and read
 * back at the covering synchronisation). */
#define GUEST_MIRROR_MAX ((uint64_t)64 << 10)
/* Points every word of the n argument bytes (ours to rewrite) that names
 * unreachable host memory at that allocation's device mirror, after
 * copying the allocation there on guest stream value `stream`.
 * CUDA_ERROR_NOT_SUPPORTED when one is larger than GUEST_MIRROR_MAX. */
CUresult guest__mirror_args(uint8_t *args, size_t n, uint64_t stream);
/* A synchronisation (op STREAM_SYNC or STREAM_QUERY of `stream`, or
 * CTX_SYNC) succeeded: the mirrors it covers are read back into their
 * allocations (the bytes the device changed).  Free while none is pending. */
void guest__mirror_synced(uint32_t op, uint64_t stream);
/* Such a synchronisation succeeded, by a call or the completion word
 * (chan.c): what it covers is read back, mirrors and graph stages. */
void guest__synced(uint32_t op, uint64_t stream);
/* The allocation at host is going: its mirror, if any, is freed. */
void guest__mirror_forget(uint64_t host);
/* trace.c: fn's tracing twin under TALLY_LOG=debug (fn itself otherwise or
 * when it has none). */
void *guest__trace_twin(void *fn);

/* ---- host functions (hostfn.c) ---- */
/* Enqueues fn(data) (kind 0, CUhostFn) or cb(stream, status, data) (kind 1,
 * CUstreamCallback) on guest stream value s, stream-ordered. */
CUresult guest__hostfn(uint64_t s, CUstream app_stream, int kind, void *fn, void *data);
/* A graph host node's function (hostfn.c): an entry kept across replays,
 * its seq in *seq; guest__hostfn_forget takes it back (the node was refused). */
CUresult guest__hostfn_keep(void *fn, void *data, uint64_t *seq);
void guest__hostfn_forget(uint64_t seq);
/* The function and data of the entry kept under seq; false when unknown. */
bool guest__hostfn_params(uint64_t seq, void **fn, void **data);

typedef struct guest_func {
  uint64_t handle;
  uint64_t module;
  uint64_t owner; /* what unloading frees it: the module, or the library of a view */
  uint32_t nparams;
  uint32_t argbytes;             /* offset+size of the last parameter */
  uint32_t *off;                 /* nparams offsets */
  uint32_t *size;                /* nparams sizes */
  uint32_t attr_valid;           /* bit a: attr[a] is known (wire/call.def) */
  bool attrs_asked;              /* FUNC_ATTRS was answered (or failed) once */
  int32_t attr[CALL_FUNC_ATTRS]; /* cuFuncGetAttribute by number, updated by Set */
  uint32_t cache;                /* the function's cache preference as last set here
                                    (CU_FUNC_CACHE_PREFER_NONE, the driver's, at load) */
  char *name;
} guest_func_t;
/* Records the functions of a MODULE_LOAD reply (FUNC records, decoded by
 * wire/call.c): all of them, or none (0, -ENOMEM, -EPROTO). */
int guest__module_add(uint64_t module, uint64_t owner, const uint8_t *recs, size_t len,
                      uint32_t nfunc);
/* Forgets every function whose module or owner is h. */
void guest__module_del(uint64_t h);
/* Lookups return the table's entry; it lives until its module is unloaded.
 * guest__func_find_mut is for cuFuncSetAttribute (lock held by the table). */
const guest_func_t *guest__func_find(uint64_t handle);
void guest__func_set_attr(uint64_t handle, int attr, int32_t value);
/* The attributes of valid (bit a: attr[a]) that handle does not know yet;
 * marks the function as asked (valid 0 when the request failed). */
void guest__func_learn_attrs(uint64_t handle, uint32_t valid, const int32_t *attr);
/* True when attribute attr (or, with attr GUEST_FUNC_CACHE, the cache
 * preference) of handle is known to be value already: setting it again is
 * a no-op natively, so it costs no request. */
#define GUEST_FUNC_CACHE (-1)
bool guest__func_is(uint64_t handle, int attr, int32_t value);
void guest__func_set_cache(uint64_t handle, uint32_t cfg);
const guest_func_t *guest__func_by_name(uint64_t module, const char *name);
/* Writes up to cap handles of module's functions to out (may be NULL);
 * returns how many the module has. */
unsigned guest__module_funcs(uint64_t module, uint64_t *out, unsigned cap);
/* A kernel's parameter buffer from kernelParams or an extra buffer (module.c):
 * small (cap bytes) or a malloc'd *body the caller frees; a CUresult.
 * Words naming host memory tallyd cannot reach are pointed at device
 * mirrors copied on *stream (mirror.c); with stream NULL (a graph's node)
 * such a launch is refused. */
CUresult guest__kernel_args(const guest_func_t *f, void **params, void **extra, uint8_t *small,
                            size_t cap, uint8_t **body, const void **src, uint32_t *argbytes,
                            const uint64_t *stream);

/* Whether a stream capture this process began is still open (graph.c). */
bool guest__capture_open(void);
/* The capture status of guest stream value s, asked of tallyd only while a
 * capture this process began is open (else NONE); *id the capture's id
 * when it has one (active or invalidated). */
CUstreamCaptureStatus guest__stream_capture(uint64_t s, uint64_t *id);

/* ---- user objects (uobj.c) ----
 * The references graph or exec owner holds go (the owner was destroyed;
 * exec: the destructors run after the tenant's work queued so far), or
 * are copied from one owner to another (an exec instantiated, a clone, a
 * child graph). */
void guest__uobj_drop(uint64_t owner, bool exec);
CUresult guest__uobj_copy(uint64_t from, uint64_t to);

/* ---- graph copy nodes naming unreachable host memory (gstage.c) ----
 * A stage: a device buffer a copy node of owner (a graph or an exec)
 * names instead of host memory tallyd cannot reach; the guest moves the
 * bytes around each launch. */
#define GUEST_STAGE_UP   0 /* host to device: sent before each launch */
#define GUEST_STAGE_DOWN 1 /* device to host: read back at a covering synchronisation */
/* The owner of a capture's stages until its graph exists: this | its id. */
#define GUEST_STAGE_CAPTURE (1ull << 63)
/* A new stage buffer of len bytes of this tenant's device memory. */
CUresult guest__gstage_buffer(size_t len, uint64_t *dev);
/* node of owner copies through dev (from guest__gstage_buffer; owned from
 * here on, freed with the last entry naming it) to or from host; replaces
 * the node's entry if it had one. */
CUresult guest__gstage_bind(uint64_t owner, uint64_t node, uint64_t dev, void *host, size_t len,
                            int dir);
/* node of owner names no stage any more. */
void guest__gstage_unbind(uint64_t owner, uint64_t node);
/* Every entry of owner goes (a graph or exec destroyed). */
void guest__gstage_drop(uint64_t owner);
bool guest__gstage_any(uint64_t owner);
/* The host side and direction of node's stage in owner; false: none. */
bool guest__gstage_host(uint64_t owner, uint64_t node, void **host, int *dir);
/* Whether some capture has stages (GUEST_STAGE_CAPTURE owners). */
bool guest__gstage_any_captured(void);
/* An asynchronous copy of n bytes between device memory dev and host
 * memory tallyd cannot reach, made on stream s while it takes part in
 * capture id: a device copy through a new stage, captured; the stage
 * joins the capture's graph at its end (dir GUEST_STAGE_UP: host to
 * device). */
CUresult guest__gstage_captured_copy(uint64_t dev, void *host, size_t n, uint64_t s, int dir,
                                     uint64_t id);
/* to gets from's entries (an exec instantiated: rename NULL, the same nodes;
 * a clone: rename(node, arg) gives each node's copy, 0 when it has none). */
CUresult guest__gstage_copy(uint64_t from, uint64_t to, uint64_t (*rename)(uint64_t, void *),
                            void *arg);
/* Around a launch of exec on guest stream value stream: the uploads'
 * bytes sent before it; the downloads marked for read-back after it. */
CUresult guest__gstage_before(uint64_t exec, uint64_t stream);
void guest__gstage_after(uint64_t exec, uint64_t stream);
/* A synchronisation (op CTX_SYNC, STREAM_SYNC or STREAM_QUERY of stream)
 * returned: the downloads it covers are read back. */
void guest__gstage_synced(uint32_t op, uint64_t stream);

/* ---- CUDA arrays (array.c) ---- */
/* A 2-D or 3-D copy with an array on at least one side, on guest stream s. */
CUresult guest__array_copy3d(const CUDA_MEMCPY3D *c, uint64_t s, int async);

/* ---- contexts (ctx.c) ---- */
/* Device of the calling thread's current context (0 if none is current). */
int guest__cur_device(void);
void guest__ctx_adopt_primary(void); /* ctx.c: a launch binds the primary context */

/* ---- stream translation ---- */
/* The calling thread's number, 1.. (the first call numbers the thread). */
uint32_t guest__thread_index(void);

/* Per-thread-default-stream entry points (_ptds/_ptsz) turn a 0 stream into
 * CU_STREAM_PER_THREAD; legacy ones keep 0 (the tenant's legacy stream).
 * CU_STREAM_PER_THREAD goes out as 2 | thread index << 32, so the host gives
 * each guest thread its own default stream (wire/call.def). */
static inline uint64_t guest__stream(CUstream s, int ptds) {
  if ((s == NULL && ptds) || s == CU_STREAM_PER_THREAD)
    return (uint64_t)(uintptr_t)CU_STREAM_PER_THREAD | (uint64_t)guest__thread_index() << 32;
  return (uint64_t)(uintptr_t)s;
}

#endif /* TALLY_GUEST_H */
