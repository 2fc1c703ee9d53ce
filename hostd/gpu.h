/* gpu.h: the GPU backend interface of tallyd.
 *
 * hostd/ never calls the CUDA driver directly outside one file: everything a
 * tenant asks of the GPU goes through hostd__gpu, an ops table with two
 * sibling implementations chosen at link time (as libuv picks
 * src/unix/linux.c): gpu-cuda.c (the real driver, linked into tallyd) and
 * gpu-record.c (a recording device for unit tests: host memory stands in for
 * device memory at fake addresses, kernels run nothing, every call is
 * counted; it proves host logic and never counts as GPU coverage).
 *
 * Handles and pointers are u64 (the driver's own values, identity-mapped to
 * tenants).  Every op returns the driver's CUresult unchanged.  Ops are
 * called from tenant worker threads; a backend makes the served device's one
 * context current on a thread in thread_enter.  `kind` is 0 for modules and
 * their CUfunctions, 1 for libraries and their CUkernels.
 */
#ifndef TALLY_HOSTD_GPU_H
#define TALLY_HOSTD_GPU_H

#include <cuda.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire/call.h"

/* One function of a loaded module, as hostd__gpu.module_functions reports it. */
typedef struct hostd_func_info {
  uint64_t handle;
  const char *name;
  uint32_t nparams;
  const uint32_t *off, *size; /* nparams each */
  uint32_t attr_valid;        /* bit a: attr[a] was answered (wire/call.def, FUNC) */
  int32_t attr[CALL_FUNC_ATTRS];
} hostd_func_info_t;

typedef int (*hostd_func_cb)(void *arg, const hostd_func_info_t *f);

/* Allocation properties of VMM memory and pools (wire/call.def, MEM_CREATE):
 * the location is always the served device, the type pinned. */
typedef struct hostd_mem_prop {
  uint32_t handle_types; /* CUmemAllocationHandleType bits */
  uint32_t compression;  /* allocFlags.compressionType */
  uint32_t rdma;         /* allocFlags.gpuDirectRDMACapable */
  uint32_t usage;        /* allocFlags.usage */
} hostd_mem_prop_t;

/* One input of gpu.link. */
typedef struct hostd_link_input {
  int type; /* CUjitInputType */
  const void *data;
  size_t len;
  const char *name;
} hostd_link_input_t;

/* Called when a stream reaches a host function (hostd/hostfn.c), with the
 * gate value it was enqueued with: on a driver thread or wherever the
 * backend runs stream work; it must call no CUDA function (cuda.h,
 * cuLaunchHostFunc). */
typedef void (*hostd_reached_cb)(void *arg, uint32_t value);

/* One graph node as hostd/exec-graph.c asks for it (wire/call.def,
 * GRAPH_ADD): kind CALL_GNODE_*; only the kind's fields are read. */
typedef struct hostd_gnode {
  int kind;
  uint64_t handle; /* KERNEL: function (fkind 0) or kernel (1); event; child graph */
  int fkind;
  uint64_t dst, src, pitch, width, height; /* MEMCPY: dst, src, width bytes; MEMSET */
  bool dst_host, src_host; /* MEMCPY: that side is host memory mapped here at its address */
  uint32_t value, elem;
  uint32_t grid[3], block[3], shmem;
  void *args; /* KERNEL: the parameter buffer, argbytes long */
  size_t argbytes;
  uint64_t *dptr; /* MEM_ALLOC (graph_add): where the allocation's address is written */
} hostd_gnode_t;

/* One side of an array copy (wire/call.def, ARRAY_COPY): kind CALL_SIDE_*;
 * HOST: host memory at `host` laid out with pitch and height; DEVICE:
 * linear memory at `handle` with pitch and height; ARRAY: array `handle`.
 * x in bytes, y rows, z slices. */
typedef struct hostd_copy_side {
  int kind;
  void *host;
  uint64_t handle;
  uint64_t x, y, z, pitch, height;
} hostd_copy_side_t;

typedef struct hostd_gpu_ops {
  const char *name; /* "cuda" or "record" */
  /* Initialises the backend for device ordinal `device`; fills the snapshot. */
  CUresult (*init)(int device, call_snapshot_t *snap);
  void (*shutdown)(void);
  /* The driver's name of a result (CUDA_ERROR_...), or NULL where it has none. */
  const char *(*error_name)(CUresult r);
  CUresult (*thread_enter)(void);
  CUresult (*mem_alloc)(uint64_t *p, uint64_t size);
  CUresult (*mem_free)(uint64_t p);
  CUresult (*mem_info)(uint64_t *free_b, uint64_t *total_b);
  CUresult (*htod)(uint64_t dst, const void *src, size_t n, uint64_t s, int async);
  CUresult (*dtoh)(void *dst, uint64_t src, size_t n, uint64_t s);
  CUresult (*dtod)(uint64_t dst, uint64_t src, size_t n, uint64_t s, int async);
  CUresult (*memset)(uint64_t p, uint32_t v, uint32_t elem, size_t count, uint64_t s);
  CUresult (*stream_new)(uint64_t *s, unsigned flags, int prio);
  CUresult (*stream_del)(uint64_t s);
  CUresult (*stream_sync)(uint64_t s);
  CUresult (*stream_query)(uint64_t s);
  CUresult (*stream_wait)(uint64_t s, uint64_t e, unsigned flags);
  CUresult (*event_new)(uint64_t *e, unsigned flags);
  CUresult (*event_del)(uint64_t e);
  CUresult (*event_record)(uint64_t e, uint64_t s, unsigned flags);
  CUresult (*event_sync)(uint64_t e);
  CUresult (*event_query)(uint64_t e);
  CUresult (*event_time)(float *ms, uint64_t a, uint64_t b);
  CUresult (*module_load)(uint64_t *h, int kind, const void *image, size_t len);
  CUresult (*module_unload)(uint64_t h, int kind);
  /* Calls cb for every function; a non-zero cb return stops and is returned
   * as CUDA_ERROR_OUT_OF_MEMORY.  With attrs false no attribute is asked
   * (attr_valid 0): asking a library kernel's attributes loads it. */
  CUresult (*module_functions)(uint64_t h, int kind, bool attrs, hostd_func_cb cb, void *arg);
  CUresult (*module_global)(uint64_t h, int kind, const char *name, uint64_t *p, uint64_t *size);
  /* The module view of a library (cuLibraryGetModule); owned by the library. */
  CUresult (*library_module)(uint64_t lib, uint64_t *mod);
  CUresult (*launch)(uint64_t f, const uint32_t grid[3], const uint32_t block[3], uint32_t shmem,
                     uint64_t s, const CUlaunchAttribute *attrs, uint32_t nattr, void *args,
                     size_t argbytes);
  /* Loads a lazily loaded function first when the attribute needs it. */
  CUresult (*func_attr)(uint64_t f, int kind, int attr, int *v);
  CUresult (*func_set_attr)(uint64_t f, int kind, int attr, int v);
  /* cuFuncSetCacheConfig (kind 0) / cuKernelSetCacheConfig (kind 1). */
  CUresult (*func_cache)(uint64_t f, int kind, int config);
  /* which 0: cuOccupancyMaxActiveClusters, 1: cuOccupancyMaxPotentialClusterSize
   * of f under cfg (tenant.c passes hStream NULL and only the two cluster attributes);
   * HOSTD_OCC_BLOCKS_PER_SM: cuOccupancyMaxActiveBlocksPerMultiprocessor for
   * cfg's block size and sharedMemBytes (the scheduler's residency). */
#define HOSTD_OCC_BLOCKS_PER_SM 2
  CUresult (*occupancy)(uint64_t f, int kind, int which, const CUlaunchConfig *cfg, int *v);
  /* ---- the limits of the served context (exec.c, CTX_LIMIT) ----
   * cuCtxGetLimit / cuCtxSetLimit of limit, a CUlimit.  The driver may round
   * or clamp a value it is given (cuda.h, cuCtxSetLimit): exec.c asks again
   * after a set.  A set of the heap or printf FIFO size after a kernel that
   * uses malloc or printf was launched is CUDA_ERROR_INVALID_VALUE. */
  CUresult (*ctx_limit_get)(int limit, uint64_t *v);
  CUresult (*ctx_limit_set)(int limit, uint64_t v);
  /* ---- cuBLASLt's layout objects (exec.c, BLASLT_LAYOUT) ----
   * The first CALL_BLASLT_LAYOUT_BYTES of the two objects the driver's slot 3
   * of private table 1734dc26 hands a process (read once at init);
   * CUDA_ERROR_NOT_SUPPORTED when the driver gave none. */
  CUresult (*blaslt_layout)(uint8_t a[CALL_BLASLT_LAYOUT_BYTES],
                            uint8_t b[CALL_BLASLT_LAYOUT_BYTES]);
  /* ---- stream-ordered host functions (hostd/hostfn.c) ----
   * A gate is nslots u32 words that a stream can wait on and the host sets,
   * and nslots reach words the stream writes (host_fn's word).
   * gate_new: worker thread; gate_del: gpu 0 when the memory died with the
   * context (only host-side state is freed). */
  CUresult (*gate_new)(void **g, uint32_t nslots);
  void (*gate_del)(void *g, int gpu);
  /* Enqueues on s: reached(arg, value) when s gets there, then a wait that
   * keeps s blocked until slot holds value or a later one, (int32_t)(word -
   * value) >= 0 (gate_open).  *word 1 asks for the stream to write value
   * into the slot's reach word first (gate_reached tells), so a poller can
   * learn of it before reached runs; *word says whether it was enqueued. */
  CUresult (*host_fn)(uint64_t s, void *g, uint32_t slot, uint32_t value, hostd_reached_cb reached,
                      void *arg, int *word);
  /* Whether the stream wrote value (or a later one) into slot's reach word.
   * Any thread, no CUDA call. */
  bool (*gate_reached)(void *g, uint32_t slot, uint32_t value);
  /* Sets slot to value: the stream waiting for it goes on.  Any thread,
   * calls no CUDA function (the loop thread opens gates). */
  void (*gate_open)(void *g, uint32_t slot, uint32_t value);
  /* ---- pinned host memory shared by a guest (memfd mapping) ---- */
  /* Stream-ordered D2H into host memory that stays valid (a pinned mapping). */
  CUresult (*dtoh_async)(void *dst, uint64_t src, size_t n, uint64_t s);
  /* cuMemHostRegister (DEVICEMAP | PORTABLE) / cuMemHostUnregister. */
  CUresult (*host_register)(void *p, size_t n);
  CUresult (*host_unregister)(void *p);
  /* ---- the best-effort partition (hostd/sched.c, docs/scheduler.md) ----
   * A stream in a partition of the GPU's multiprocessors: a green context
   * of at least `sms` of them (rounded up to what the device can split),
   * made at the first call and shared by every later one; *got says how
   * many it has.  Functions of the shared context launch on it.  Events
   * recorded on such a stream come from part_event_new (an event and the
   * stream it is recorded on must share a context). */
  CUresult (*part_stream_new)(uint64_t *s, int prio, uint32_t sms, uint32_t *got);
  /* Stream-ordered write of value into the 8 bytes at host, host memory
   * registered with host_register (cuStreamWriteValue64 at its device
   * address): the guest's completion word (exec.c, STREAM_MARK). */
  CUresult (*stream_write64)(uint64_t s, void *host, uint64_t value);
  /* Stream-ordered write of the 32-bit value v at device address p by the
   * GPU's front end (cuStreamWriteValue32), which needs no SM: it lands
   * while best-effort blocks fill every SM (the preemption flags). */
  CUresult (*word_write)(uint64_t p, uint32_t v, uint64_t s);
  CUresult (*part_event_new)(uint64_t *e, unsigned flags);
  /* ---- virtual memory management (hostd/exec-vmm.c) ----
   * cuMemGetAllocationGranularity, cuMemCreate, cuMemRelease,
   * cuMemAddressReserve / Free, cuMemMap / Unmap, cuMemSetAccess (the served
   * device; flags CUmemAccess_flags), cuMemRetainAllocationHandle. */
  CUresult (*mem_granularity)(uint64_t *g, const hostd_mem_prop_t *p, int option);
  CUresult (*mem_create)(uint64_t *h, uint64_t size, const hostd_mem_prop_t *p);
  CUresult (*mem_release)(uint64_t h);
  CUresult (*mem_reserve)(uint64_t *p, uint64_t size, uint64_t align, uint64_t hint);
  CUresult (*mem_unreserve)(uint64_t p, uint64_t size);
  CUresult (*mem_map)(uint64_t p, uint64_t size, uint64_t off, uint64_t h);
  CUresult (*mem_unmap)(uint64_t p, uint64_t size);
  CUresult (*mem_set_access)(uint64_t p, uint64_t size, unsigned flags);
  CUresult (*mem_retain)(uint64_t *h, uint64_t p);
  /* ---- memory pools and stream-ordered allocation (hostd/exec-pool.c) ----
   * pool_attr: get (set 0) or set (set 1) CUmemPool_attribute attr, its
   * value widened to u64 (the int ones too). */
  CUresult (*pool_new)(uint64_t *pool, const hostd_mem_prop_t *p, uint64_t max_size);
  CUresult (*pool_del)(uint64_t pool);
  CUresult (*pool_attr)(uint64_t pool, int attr, int set, uint64_t *v);
  CUresult (*pool_trim)(uint64_t pool, uint64_t keep);
  CUresult (*mem_alloc_async)(uint64_t *p, uint64_t size, uint64_t pool, uint64_t s);
  CUresult (*mem_free_async)(uint64_t p, uint64_t s);
  /* ---- transformed variants (hostd/variants.c) ----
   * Compiles PTX text (len bytes, NUL-terminated) for the served device into
   * an image module_load accepts: *image is malloc'd, the caller frees it.
   * On the real driver, cuLinkCreate / cuLinkAddData / cuLinkComplete. */
  CUresult (*jit)(const char *ptx, size_t len, void **image, size_t *image_len);
  /* Links n inputs (type a CUjitInputType, the bytes, a name for the
   * driver's messages) into one image for the served device: *image is
   * malloc'd, the caller frees it.  On the real driver cuLinkCreate,
   * cuLinkAddData per input, cuLinkComplete; the driver's error log is
   * logged.  The recording device joins TALLYREC inputs. */
  CUresult (*link)(const hostd_link_input_t *in, size_t n, void **image, size_t *image_len);
  /* ---- stream capture and graphs (hostd/exec-graph.c) ----
   * capture_begin: cuStreamBeginCapture_v2 with mode (CUstreamCaptureMode),
   * or with graph != 0 cuStreamBeginCaptureToGraph into that graph after
   * its ndeps nodes deps (default edges);
   * capture_info: cuStreamGetCaptureInfo, status a CUstreamCaptureStatus,
   * and while active the id, graph and up to cap dependencies (*ndeps all
   * of them); capture_mode: cuThreadExchangeStreamCaptureMode of the calling
   * thread.  graph_launch: cuGraphLaunch, or cuGraphUpload when upload. */
  CUresult (*capture_begin)(uint64_t s, int mode, uint64_t graph, const uint64_t *deps,
                            size_t ndeps);
  CUresult (*capture_end)(uint64_t s, uint64_t *graph);
  CUresult (*capture_info)(uint64_t s, int *status, uint64_t *id, uint64_t *graph, uint64_t *deps,
                           size_t cap, size_t *ndeps);
  CUresult (*capture_mode)(int *mode);
  CUresult (*graph_new)(uint64_t *g);
  CUresult (*graph_del)(uint64_t g);
  CUresult (*graph_add)(uint64_t *node, uint64_t g, const uint64_t *deps, size_t ndeps,
                        const hostd_gnode_t *n);
  /* graph_deps: the edges from[i] -> to[i] are added (remove 0) or removed (1). */
  CUresult (*graph_deps)(uint64_t g, const uint64_t *from, const uint64_t *to, size_t n,
                         int remove);
  CUresult (*graph_node_del)(uint64_t node); /* a node and its edges */
  CUresult (*graph_instantiate)(uint64_t *exec, uint64_t g, uint64_t flags);
  CUresult (*graph_launch)(uint64_t exec, uint64_t s, int upload);
  CUresult (*graph_exec_del)(uint64_t exec);
  CUresult (*graph_exec_update)(uint64_t exec, uint64_t g, int *result, uint64_t *error_node);
  /* graph_exec_set: the parameters of node in exec from n, a node of the
   * same kind: KERNEL, CHILD (cuGraphExecChildGraphNodeSetParams with
   * n->handle), MEMCPY, MEMSET, EVENT_REC or EVENT_WAIT (n->handle the
   * event); another kind, or a node of another kind, CUDA_ERROR_INVALID_VALUE. */
  CUresult (*graph_exec_set)(uint64_t exec, uint64_t node, const hostd_gnode_t *n);
  /* graph_set: the parameters of node, in its graph, from n, a node of the
   * same kind: KERNEL, MEMCPY, MEMSET, EVENT_REC or EVENT_WAIT; another
   * kind, or a node of another kind, CUDA_ERROR_INVALID_VALUE. */
  CUresult (*graph_set)(uint64_t node, const hostd_gnode_t *n);
  /* graph_mem: the device's graph memory (wire/call.def, GRAPH_MEM): what 0
   * trims it, 1 reads attr into *value, 2 sets attr to *value. */
  CUresult (*graph_mem)(uint32_t what, uint32_t attr, uint64_t *value);
  /* A graph's host functions (hostd/hostfn.c, "Graphs").  graph_add_host:
   * in g after deps, a host node (*rnode) and behind it a wait on gate
   * (*wnode, what later nodes depend on; 0 with the blocking fallback, and
   * the recording device's one node is both), neither armed yet.
   * capture_host: the same two at the end of stream s's capture.
   * graph_exec_host: for exec's next launch, rnode calls cb(arg) and wnode
   * waits until gate's word slot reaches value. */
  /* graph_clone: cuGraphClone of g into *clone; graph_find: the node of
   * clone copied from node (cuGraphNodeFindInClone). */
  CUresult (*graph_clone)(uint64_t *clone, uint64_t g);
  CUresult (*graph_find)(uint64_t *out, uint64_t node, uint64_t clone);
  /* graph_node: what node is (wire/call.def, GRAPH_NODE): *type its
   * CUgraphNodeType; n->kind the CALL_GNODE_* whose fields are filled
   * (KERNEL, MEMSET, EVENT_REC, EVENT_WAIT, EMPTY, MEM_ALLOC, MEM_FREE, MEMCPY
   * of 1-D with elem's host bits), else CALL_GNODE_KINDS; a
   * kernel's parameters packed into n->args (cap bytes; more is
   * CUDA_ERROR_INVALID_VALUE), n->argbytes long. */
  CUresult (*graph_node)(uint64_t node, int *type, hostd_gnode_t *n, size_t cap);
  /* graph_enable: cuGraphNodeSetEnabled (set) of node in exec to *enabled,
   * or cuGraphNodeGetEnabled into *enabled. */
  CUresult (*graph_enable)(uint64_t exec, uint64_t node, int set, unsigned *enabled);
  /* graph_attr: a kernel node's attribute attr into value (what 0), from it
   * (1; the driver may write back into value), or every attribute of node
   * src copied to node (2).  value: CALL_ATTR_VALUE_SIZE bytes. */
  CUresult (*graph_attr)(uint64_t node, uint64_t src, uint32_t what, uint32_t attr, void *value);
  /* capture_deps: cuStreamUpdateCaptureDependencies of stream s with the n
   * nodes deps, set (1) or added (0). */
  CUresult (*capture_deps)(uint64_t s, const uint64_t *deps, size_t n, int set);
  CUresult (*graph_add_host)(uint64_t *rnode, uint64_t *wnode, uint64_t g, const uint64_t *deps,
                             size_t ndeps, void *gate);
  CUresult (*capture_host)(uint64_t s, void *gate, uint64_t *rnode, uint64_t *wnode);
  CUresult (*graph_exec_host)(uint64_t exec, uint64_t rnode, uint64_t wnode, void *gate,
                              uint32_t slot, uint32_t value, hostd_reached_cb cb, void *arg);
  /* cuGraphGetNodes: *total nodes, the first min(cap, *total) into nodes. */
  /* graph_nodes: which CALL_GNODES_*: g's nodes or roots, or node's
   * dependencies or dependents; *total all of them, up to cap into nodes. */
  CUresult (*graph_nodes)(uint64_t g, uint32_t which, uint64_t node, uint64_t *nodes, size_t cap,
                          size_t *total);
  /* graph_dot: cuGraphDebugDotPrint of g with flags, the text in *text
   * (malloc'd, *len bytes, the caller frees). */
  CUresult (*graph_dot)(uint64_t g, uint32_t flags, char **text, size_t *len);
  /* ---- CUDA arrays, texture and surface objects (hostd/exec-array.c) ----
   * array_new: cuArray3DCreate; array_copy: cuMemcpy3DAsync of a box of
   * width bytes x height x depth on s, then a wait for s unless async (a
   * HOST side is read or written before it returns either way: its memory
   * is the request's or the reply's); tex_new: cuTexObjectCreate (view may
   * be NULL); surf_new: cuSurfObjectCreate over an array. */
  CUresult (*array_new)(uint64_t *a, const CUDA_ARRAY3D_DESCRIPTOR *d);
  CUresult (*array_del)(uint64_t a);
  CUresult (*array_copy)(const hostd_copy_side_t *src, const hostd_copy_side_t *dst, uint64_t width,
                         uint64_t height, uint64_t depth, uint64_t s, int async);
  CUresult (*tex_new)(uint64_t *t, const CUDA_RESOURCE_DESC *res, const CUDA_TEXTURE_DESC *tex,
                      const CUDA_RESOURCE_VIEW_DESC *view);
  CUresult (*tex_del)(uint64_t t);
  CUresult (*surf_new)(uint64_t *sf, uint64_t a);
  CUresult (*surf_del)(uint64_t sf);
  /* ---- tensor maps (hostd/exec-tmap.c) ----
   * tensor_map: cuTensorMapEncode{Tiled,Im2col,Im2colWide} by q->kind into
   * map (q checked by the caller: kind, rank and enums in range);
   * tensor_map_addr: cuTensorMapReplaceAddress on map, in place.  The map is
   * the driver's 128 bytes, copied to an aligned CUtensorMap around the call. */
  CUresult (*tensor_map)(uint8_t map[CALL_TMAP_BYTES], const call_tensor_map_req_t *q);
  CUresult (*tensor_map_addr)(uint8_t map[CALL_TMAP_BYTES], uint64_t addr);
} hostd_gpu_ops_t;

/* The backend this binary was linked with. */
extern const hostd_gpu_ops_t hostd__gpu;

/* Bytes of one channel of an array element of CUarray_format f; 0 for a
 * format arrays are not offered in (exec-array.c refuses it, gpu-record.c
 * sizes its arrays with it). */
static inline unsigned hostd__array_elem_bytes(uint32_t f) {
  switch (f) {
  case CU_AD_FORMAT_UNSIGNED_INT8:
  case CU_AD_FORMAT_SIGNED_INT8:
    return 1;
  case CU_AD_FORMAT_UNSIGNED_INT16:
  case CU_AD_FORMAT_SIGNED_INT16:
  case CU_AD_FORMAT_HALF:
    return 2;
  case CU_AD_FORMAT_UNSIGNED_INT32:
  case CU_AD_FORMAT_SIGNED_INT32:
  case CU_AD_FORMAT_FLOAT:
    return 4;
  default:
    return 0;
  }
}

#endif /* TALLY_HOSTD_GPU_H */
