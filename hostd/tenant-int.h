/* tenant-int.h: what tenant.c (a tenant's tables, ranges, streams,
 * recovery) and exec.c (the execution of its requests) share.
 *
 * Nothing here is seen outside those two files.  The tables are touched by
 * the tenant's worker thread only, inside the read side of tenant.c's
 * context lock (see tenant.c's lock story); exec.c's handlers run there.
 */
#ifndef TALLY_HOSTD_TENANT_INT_H
#define TALLY_HOSTD_TENANT_INT_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "hostd/sched.h"
#include "wire/u64map.h"

#define STREAM_LEGACY_ID     1u   /* CU_STREAM_LEGACY */
#define STREAM_PER_THREAD_ID 2u   /* CU_STREAM_PER_THREAD */
#define PTDS_MAX             4096 /* per-thread default streams per tenant: one per thread */
#define KIND_MODULE          0
#define KIND_LIBRARY         1
#define KIND_VIEW            2 /* a library's module view: dies with the library */
#define RANGE_ALLOC          1 /* from MEM_ALLOC: may be freed */
#define RANGE_GLOBAL         2 /* a module global: may be copied, not freed */
#define RANGE_MAPPED         3 /* VMM: mapped onto physical handle `module` (exec-vmm.c) */
#define RANGE_ASYNC          4 /* from MEM_ALLOC_ASYNC out of pool `module` (exec-pool.c) */

typedef struct range {
  uint64_t base, size;
  int kind;
  uint64_t module; /* globals: the module they die with; RANGE_MAPPED: the
                      physical handle; RANGE_ASYNC: the pool */
} range_t;

/* Pinned host memory a guest shared as a memfd (server.c maps it in on_fd):
 * copies from and to it are DMA on the tenant's stream, no bytes on the wire. */
typedef struct pinned {
  uint8_t *addr;
  size_t size;
  bool registered; /* cuMemHostRegister succeeded (else copies stage, still correct) */
} pinned_t;

/* A tenant stream (also the emulated legacy and per-thread ones). */
typedef struct tstream {
  uint64_t handle;      /* host stream */
  uint64_t event;       /* for implicit synchronisation with the legacy stream */
  bool blocking;        /* created without CU_STREAM_NON_BLOCKING */
  uint64_t epoch;       /* bumped by each op on this stream */
  uint64_t seen;        /* blocking stream: legacy epoch it has waited for;
                           legacy stream: unused */
  uint64_t legacy_seen; /* legacy's view of this stream's epoch */
  uint64_t free_seen;   /* the epoch the tenant's free stream last waited for */
  hostd_sched_stream_t *ss; /* the scheduler's state, made at its first launch (sched.h) */
} tstream_t;

struct hostd_tenant {
  uint32_t id;
  bool tcp;            /* came over TCP: the token is checked at hello */
  bool hello;          /* hello done */
  int prio;            /* host stream priority of this tenant's class */
  tstream_t *legacy;   /* lazily created */
  uint64_t free_stream; /* host stream of its frees (hostd__free_ordered); 0: not made yet */
  bool frees_pending;   /* frees queued on it since it was last synchronised */
  u64map_t ptds;    /* guest thread key (2 | N << 32) -> its default stream */
  u64map_t streams; /* handle -> tstream_t* */
  u64map_t events;  /* handle -> 1 */
  u64map_t modules; /* handle -> kind */
  u64map_t funcs;   /* handle -> module handle */
  u64map_t views;   /* library -> its module view (cuLibraryGetModule) */
  u64map_t pinned;  /* guest tag -> pinned_t*: memfd mappings (PINNED_COPY) */
  u64map_t unpinned; /* guest tag -> size: mappings PINNED_FREE handed to the release
                        thread that may not be unmapped yet (hostd__tenant_pinned_add) */
  u64map_t modids;  /* module or library handle -> content id (kernel ids) */
  u64map_t kids;    /* function handle -> stable kernel id (sched.h) */
  u64map_t vmh;     /* VMM physical handle -> vmm_phys_t* (exec-vmm.c) */
  u64map_t vas;     /* reserved address range base -> its size (exec-vmm.c) */
  u64map_t pools;   /* the tenant's memory pools -> 1, its default pool 2 (exec-pool.c) */
  uint64_t pool_default, pool_cur; /* 0: not made yet / the default one */
  u64map_t graphs;   /* the tenant's graphs -> 1 (exec-graph.c) */
  u64map_t gnodes;   /* node handle -> the graph it belongs to */
  u64map_t gexecs;   /* the tenant's instantiated graphs -> 1 */
  u64map_t captures; /* host stream of each capture begun and not ended -> 1 */
  /* A host function of a graph or exec (exec-graph.c, "host functions"):
   * owner the graph or exec holding it, its host node and wait node, the
   * guest's seq.  An exec holds copies of its graph's at instantiation. */
  struct ghost {
    uint64_t owner, rnode, wnode, seq;
  } *ghosts;
  size_t nghosts, capghosts;
  u64map_t arrays;   /* CUDA array handle -> tarray_t* (exec-array.c) */
  u64map_t texs;     /* texture object -> 1; surface object -> 2 (exec-array.c) */
  hostd_sched_tenant_t *sched; /* NULL: launches go straight to the GPU (sched.h) */
  /* A stream synchronisation's "its launches are done" for the scheduler
   * (hostd__sched_synced), given after the request's reply went out
   * (hostd__tenant_replied) so the reply does not wait for the scheduler's
   * lock; NULL when none is pending.  The worker's alone. */
  hostd_sched_stream_t *synced;
  hostd_hostfn_t *hf;  /* host functions (hostfn.c); NULL when not served by server.c */
  range_t *ranges;     /* sorted by base */
  size_t nranges, capranges;
  CUresult deferred;           /* first error of a fire-and-forget request, until reported */
  CUresult lost;               /* context-corrupting error that took everything (recover) */
  bool ctx_err_logged;         /* a context-level error was logged (once per tenant) */
  bool limit_logged;           /* a context limit over its bound was logged (once per tenant) */
  call_why_t why;              /* the last protocol error's reason (hostd__tenant_exec) */
  hostd_tenant_t *prev, *next; /* live list (reg_lock) */
};

/* Stream ss was synchronised: its scheduler notice is given after the
 * reply (hostd__tenant_replied), or at once when another stream's is pending. */
void hostd__tenant_synced(hostd_tenant_t *t, hostd_sched_stream_t *ss);
/* The error t's next syncpoint returns: a failed post's, else a held
 * launch's failure (taken from the scheduler and kept); CUDA_SUCCESS when
 * there is none.  Worker thread. */
CUresult hostd__tenant_kept_error(hostd_tenant_t *t);

/* ---- ranges (tenant.c) ---- */
/* Index of the first range whose base is above p. */
size_t hostd__range_upper(const hostd_tenant_t *t, uint64_t p);
/* Adds [base, base+size) (a global asked for twice is kept once); 0 or -ENOMEM. */
int hostd__range_add(hostd_tenant_t *t, uint64_t base, uint64_t size, int kind, uint64_t module);
/* True when [p, p+n) lies inside one range of the tenant. */
bool hostd__owns(const hostd_tenant_t *t, uint64_t p, uint64_t n);
/* hostd__owns, or [p, p + n) inside one of the tenant's shared pinned
 * allocations that tallyd registered at the guest's own address: host memory
 * the device reaches by unified addressing, as the guest's pinned memory is
 * natively (a memset or copy may name it as a device pointer). */
bool hostd__owns_dev(const hostd_tenant_t *t, uint64_t p, uint64_t n);
void hostd__range_del_at(hostd_tenant_t *t, size_t i);

/* ---- streams (tenant.c) ---- */
tstream_t *hostd__stream_make(hostd_tenant_t *t, unsigned flags, CUresult *r);
/* Synchronises and frees a tenant stream. */
void hostd__stream_drop(tstream_t *s);
/* Resolves guest stream value s (creating the emulated ones on first use),
 * without ordering anything on it; NULL with *r set when not the tenant's. */
tstream_t *hostd__stream_of(hostd_tenant_t *t, uint64_t s, CUresult *r);
/* Orders the next op on ts after the legacy-stream rules and counts it;
 * first fences ts behind its launches held by the scheduler (sched.h). */
CUresult hostd__stream_enter(hostd_tenant_t *t, tstream_t *ts);
/* The same for a launch, which the scheduler orders itself: no fence. */
CUresult hostd__stream_enter_launch(hostd_tenant_t *t, tstream_t *ts);
/* Resolves s and enters it: the one path by which work reaches a tenant
 * stream.  *out is the stream on CUDA_SUCCESS. */
CUresult hostd__stream_lookup_enter(hostd_tenant_t *t, uint64_t s, tstream_t **out);
/* Synchronises every stream of the tenant: legacy, per-thread, created.
 * stop: return the first error (CTX_SYNC); else sync all, ignore errors. */
CUresult hostd__streams_sync_all(hostd_tenant_t *t, bool stop);
/* Frees device memory p (cuMemAlloc'd or stream-ordered) once the work
 * the tenant made so far on every stream of its own is done, without
 * waiting on the host and without waiting for other tenants' work: a
 * stream-ordered free on the tenant's free stream, behind an event on each
 * of its streams that had work since the last free (docs/decisions.md,
 * D16).  The caller flushed the tenant's held launches. */
CUresult hostd__free_ordered(hostd_tenant_t *t, uint64_t p);
/* Waits until t's stream-ordered frees so far are done; true when there
 * were any (an allocation that ran out of memory may then be retried: the
 * driver's own free would have been done at its return). */
bool hostd__frees_wait(hostd_tenant_t *t);

/* ---- modules and pinned memory (tenant.c) ---- */
/* Forgets module h's functions and globals (not the module entry). */
void hostd__module_forget(hostd_tenant_t *t, uint64_t h);
void hostd__pinned_drop(pinned_t *p, bool gpu);
/* PINNED_FREE handed t's mapping at guest address tag to the release
 * thread: remembered until a new mapping of t's may need its address. */
void hostd__tenant_unpinned(hostd_tenant_t *t, uint64_t tag, size_t size);

/* ---- virtual memory, pools, graphs, arrays, tensor maps (exec-vmm.c,
 * exec-pool.c, exec-graph.c, exec-array.c, exec-tmap.c) ----
 * Request handlers called from exec.c's table; results go to out.  The
 * release functions free what the tenant still holds (gpu false: it died
 * with the context, only our memory is freed); tenant.c calls them after
 * the tenant's streams are drained. */
#define HOSTD_EXEC_ELSEWHERE(X)                                                                    \
  X(mem_granularity) X(mem_create) X(mem_release) X(mem_reserve) X(mem_unreserve) X(mem_map)       \
  X(mem_unmap) X(mem_set_access) X(mem_retain) X(mem_alloc_async) X(mem_free_async) X(pool_new)    \
  X(pool_del) X(pool_attr) X(pool_trim) X(pool_current) X(capture_begin) X(capture_end)            \
  X(capture_info) X(capture_mode) X(capture_deps) X(graph_new) X(graph_del) X(graph_add)          \
  X(graph_deps) X(graph_instantiate) X(graph_launch) X(graph_exec_del) X(graph_exec_update)        \
  X(graph_exec_kernel) X(graph_exec_child) X(graph_exec_node) X(graph_set) X(graph_mem)            \
  X(graph_clone) X(graph_find) X(graph_node) X(graph_enable) X(graph_attr) X(graph_nodes)         \
  X(graph_undep) X(graph_node_del)                                                                 \
  X(array_new) X(array_del) X(array_copy) X(tex_new) X(tex_del) X(surf_new) X(surf_del)            \
  X(tensor_map) X(tensor_map_addr) X(link) X(graph_dot)
#define HOSTD_EXEC_DECL(name)                                                                      \
  CUresult hostd__exec_##name(hostd_tenant_t *t, wire_buf_t *out, const call_##name##_req_t *q);
HOSTD_EXEC_ELSEWHERE(HOSTD_EXEC_DECL)
#undef HOSTD_EXEC_DECL
void hostd__vmm_release(hostd_tenant_t *t, bool gpu);
void hostd__pool_release(hostd_tenant_t *t, bool gpu);
/* Texture and surface objects, then arrays: after the streams are drained. */
void hostd__array_release(hostd_tenant_t *t, bool gpu);
/* Captures still open end (their graphs destroyed): before the streams go. */
void hostd__capture_release(hostd_tenant_t *t, bool gpu);
/* Execs, then graphs: after the streams are drained. */
void hostd__graph_release(hostd_tenant_t *t, bool gpu);
/* Whether ts takes part in a capture now (the driver's answer; false at
 * once while the tenant has none open).  Work on it then goes straight to
 * the stream, never through the scheduler's queue (docs/scheduler.md). */
bool hostd__stream_capturing(hostd_tenant_t *t, const tstream_t *ts);
/* A HOSTFN on stream ts, which takes part in a capture: the capture's graph
 * gets the guest's function seq as a host function (exec-graph.c). */
CUresult hostd__capture_hostfn(hostd_tenant_t *t, tstream_t *ts, uint64_t seq);

/* ---- execution (exec.c) ---- */
/* Decodes args as op's request and runs its handler; results go to out.
 * Returns the CUresult, or CUDA_ERROR_INVALID_VALUE with *why set when the
 * request is malformed (the tenant is then closed). */
CUresult hostd__exec(hostd_tenant_t *t, uint32_t op, uint32_t flags, const uint8_t *args,
                     size_t len, wire_buf_t *out, const char **why);

#endif /* TALLY_HOSTD_TENANT_INT_H */
