/* graph.c: stream capture and CUDA graphs, forwarded to tallyd (its graph
 * handlers), where captures run on the tenant's real streams and
 * graphs are real driver graphs: a replay is one fire-and-forget request.
 *
 * Capture status: this process knows every capture it began and has not
 * ended, so while there is none a stream's status is answered here (none,
 * as the driver would); while one is open, cuStreamIsCapturing and
 * cuStreamGetCaptureInfo ask tallyd, which asks the driver, so streams that
 * joined a capture through an event and captures a prohibited call
 * invalidated are answered exactly.  A query is a synchronising request:
 * errors kept from earlier posts come back through it, as they would from
 * the driver's own call.
 *
 * cuThreadExchangeStreamCaptureMode keeps each thread's mode here and
 * sends it when it changes (a post, in program order): tallyd runs every
 * request of this process on one thread, whose mode it sets.
 *
 * Graph, node and exec handles are tallyd's; node parameters travel as
 * fixed fields (wire/call.def, GRAPH_ADD).  Offered: kernel nodes (packed
 * as launches), 1-D copies between device memory and pinned memory shared
 * with tallyd (which maps it at the same address) or other host memory
 * (through staging buffers, gstage.c), memsets, empty, event
 * record and wait, child graphs (each also through cuGraphAddNode's tagged union),
 * dependencies, cuGraphGetNodes, a graph's nodes given new parameters
 * (GRAPH_SET) and an exec's updates of each of those kinds (posted:
 * GRAPH_EXEC_KERNEL, _CHILD, _NODE); host nodes, whose functions hostfn.c
 * keeps across replays (tallyd makes each a driver host node and a gate),
 * their functions changed in a graph or an exec; what a node is, asked of
 * tallyd for nodes this process did not add (cuGraphNodeGetType, the
 * getters of kernel, memset, event and host nodes: GRAPH_NODE); an exec's
 * node enabled or not (GRAPH_ENABLE); allocation and free nodes (the
 * graph's device memory, recorded here as device memory from the
 * allocation node to a free node or cuMemFreeAsync); an exec's flags,
 * kept here; copies other than 1-D (and their getter) answer
 * CUDA_ERROR_NOT_SUPPORTED with a log line.
 */
#include "guestlib/guest.h"
#include "wire/u64map.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static atomic_int captures;                   /* begun here and not ended */
static __thread int thr_mode;                 /* this thread's CUstreamCaptureMode */
static __thread uint64_t *deps_buf;           /* cuStreamGetCaptureInfo's dependencies */
static __thread size_t deps_cap;

#define H(x) ((uint64_t)(uintptr_t)(x))

bool guest__capture_open(void) {
  return atomic_load_explicit(&captures, memory_order_relaxed) > 0;
}
/* add_kernel's and exec_kernel's arguments from function handle h and a
 * kernel node's parameters (CUDA_KERNEL_NODE_PARAMS v1, v2 and v3 share
 * these fields); a v2 or v3 node names its function or its CUkernel. */
#define KERNEL_NODE(p, h)                                                                          \
  (h), (const unsigned[3]){(p)->gridDimX, (p)->gridDimY, (p)->gridDimZ},                           \
      (const unsigned[3]){(p)->blockDimX, (p)->blockDimY, (p)->blockDimZ}, (p)->sharedMemBytes,    \
      (p)->kernelParams, (p)->extra
#define FUNC_OR_KERN(p) ((p)->func ? H((p)->func) : H((p)->kern))

/* ---- what this process knows of nodes ----
 *
 * cuGraphNodeGetType is answered here for every node made by a cuGraphAdd*
 * call of this process (XLA asks it of the dependencies it passes); a node
 * known only to tallyd (from a capture, through cuGraphGetNodes) is asked of
 * tallyd once (GRAPH_NODE).  A node's entry also holds the storage
 * cuGraphKernelNodeGetParams hands out (its kernelParams point there, as
 * the driver's point into the node: nt_store).  Open addressing on the node handle,
 * linear probing; a graph's nodes leave with cuGraphDestroy (the table is
 * rebuilt without them, their storage freed): those added here and those
 * cuGraphGetNodes or cuGraphGetRootNodes listed (type NT_UNKNOWN until
 * asked); other nodes' entries (graph 0) stay.  Invariant: count < cap / 2
 * whenever cap > 0. */
#define NT_UNKNOWN 0xff
typedef struct {
  uint64_t node, graph; /* node 0: free slot */
  uint8_t type;         /* CUgraphNodeType, or NT_UNKNOWN */
  void *params;         /* malloc'd nstore_t: what getters handed out, or NULL */
} ntype_t;
static pthread_mutex_t nt_mu = PTHREAD_MUTEX_INITIALIZER;
static ntype_t *nt;
static size_t nt_cap, nt_count;

static size_t nt_slot(const ntype_t *tab, size_t cap, uint64_t node) {
  size_t i = (size_t)((node * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
  while (tab[i].node && tab[i].node != node)
    i = (i + 1) & (cap - 1);
  return i;
}

/* Rehashes into cap slots, leaving out the nodes of graph drop (0: none). */
static int nt_rebuild(size_t cap, uint64_t drop) {
  ntype_t *tab = calloc(cap, sizeof(*tab));
  size_t n = 0;
  if (!tab)
    return -1;
  for (size_t i = 0; i < nt_cap; i++)
    if (nt[i].node && (!drop || nt[i].graph != drop)) {
      tab[nt_slot(tab, cap, nt[i].node)] = nt[i];
      n++;
    } else if (nt[i].node) {
      free(nt[i].params);
    }
  free(nt);
  nt = tab, nt_cap = cap, nt_count = n;
  return 0;
}

/* The entry of node, made (graph 0, type unknown) if it has none; NULL
 * without memory.  nt_mu held. */
static ntype_t *nt_entry(uint64_t node) {
  size_t i;
  if ((nt_count + 1) * 2 > nt_cap && nt_rebuild(nt_cap ? nt_cap * 2 : 256, 0) != 0)
    return NULL;
  i = nt_slot(nt, nt_cap, node);
  if (!nt[i].node) {
    nt_count++;
    nt[i] = (ntype_t){.node = node, .type = NT_UNKNOWN};
  }
  return &nt[i];
}

/* node belongs to graph (0: unknown) and has type (NT_UNKNOWN: keep what
 * is known). */
static void nt_put(uint64_t node, uint64_t graph, unsigned type) {
  pthread_mutex_lock(&nt_mu);
  ntype_t *e = nt_entry(node);
  if (e) { /* out of memory: the node's type is not known here */
    if (graph)
      e->graph = graph;
    if (type != NT_UNKNOWN)
      e->type = (uint8_t)type;
  }
  pthread_mutex_unlock(&nt_mu);
}

static bool nt_get(uint64_t node, CUgraphNodeType *type) {
  bool found = false;
  pthread_mutex_lock(&nt_mu);
  if (nt_cap) {
    size_t i = nt_slot(nt, nt_cap, node);
    if ((found = nt[i].node != 0 && nt[i].type != NT_UNKNOWN))
      *type = (CUgraphNodeType)nt[i].type;
  }
  pthread_mutex_unlock(&nt_mu);
  return found;
}

/* The graph node belongs to, 0 when not known here. */
static uint64_t nt_graph(uint64_t node) {
  uint64_t g = 0;
  pthread_mutex_lock(&nt_mu);
  if (nt_cap) {
    size_t i = nt_slot(nt, nt_cap, node);
    if (nt[i].node)
      g = nt[i].graph;
  }
  pthread_mutex_unlock(&nt_mu);
  return g;
}

/* Storage for what a getter hands out about node, size bytes: the node's
 * current one when it has that size (so what an earlier query handed out
 * stays valid, as the driver's pointers into the node do), else a new one
 * replacing it.  NULL without memory. */
typedef struct {
  size_t size;
  max_align_t mem[];
} nstore_t;
static void *nt_store(uint64_t node, size_t size) {
  nstore_t *st = NULL;
  pthread_mutex_lock(&nt_mu);
  ntype_t *e = nt_entry(node);
  if (e && e->params && ((nstore_t *)e->params)->size == size) {
    st = e->params;
  } else if (e && (st = malloc(sizeof(*st) + size))) {
    st->size = size;
    free(e->params);
    e->params = st;
  }
  pthread_mutex_unlock(&nt_mu);
  return st ? st->mem : NULL;
}

static void nt_drop_graph(uint64_t graph) {
  pthread_mutex_lock(&nt_mu);
  if (nt_cap)
    (void)nt_rebuild(nt_cap, graph); /* out of memory: stale entries stay, harmless */
  pthread_mutex_unlock(&nt_mu);
}

/* node is gone: its entry keeps the slot (open addressing) but names
 * neither graph nor type, and its storage is freed. */
static void nt_forget(uint64_t node) {
  pthread_mutex_lock(&nt_mu);
  if (nt_cap) {
    size_t i = nt_slot(nt, nt_cap, node);
    if (nt[i].node) {
      nt[i].graph = 0, nt[i].type = NT_UNKNOWN;
      free(nt[i].params);
      nt[i].params = NULL;
    }
  }
  pthread_mutex_unlock(&nt_mu);
}

/* What tallyd says node is (GRAPH_NODE): *a, its args a view into *rep
 * (malloc'd, the caller frees). */
static CUresult node_info(uint64_t node, call_graph_node_rep_t *a, void **rep) {
  call_graph_node_req_t q = {.node = node};
  size_t len = 0;
  CUresult rc = guest__ready();
  int err;
  *rep = NULL;
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!node)
    return CUDA_ERROR_INVALID_VALUE;
  if ((err = guest__call(CALL_OP_GRAPH_NODE, 0, &q, &rc, NULL, 0, &len, rep)) != 0)
    return guest__cu_error(err);
  memset(a, 0, sizeof(*a));
  if (rc == CUDA_SUCCESS && call_graph_node_rep_decode(*rep, len, a, NULL) != 0)
    rc = CUDA_ERROR_UNKNOWN;
  if (rc == CUDA_SUCCESS)
    nt_put(node, 0, a->type <= CU_GRAPH_NODE_TYPE_CONDITIONAL ? a->type : NT_UNKNOWN);
  return rc;
}

GUEST_EXPORT CUresult cuGraphNodeGetType(CUgraphNode node, CUgraphNodeType *type) {
  call_graph_node_rep_t a;
  void *rep;
  CUresult r;
  if (!node || !type)
    return CUDA_ERROR_INVALID_VALUE;
  if (nt_get(H(node), type))
    return CUDA_SUCCESS;
  if ((r = node_info(H(node), &a, &rep)) == CUDA_SUCCESS)
    *type = (CUgraphNodeType)a.type;
  free(rep);
  return r;
}

/* ---- capture ---- */

static bool edges_fold(const CUgraphEdgeData *ed, size_t n);

/* A capture into a new graph (g NULL) or into g after its n nodes deps. */
static CUresult begin(CUstream s, CUstreamCaptureMode mode, CUgraph g, const CUgraphNode *deps,
                      size_t n, int ptds) {
  call_capture_begin_req_t q = {.stream = guest__stream(s, ptds), .mode = (uint32_t)mode,
                                .ndeps = (uint32_t)n, .graph = H(g),
                                .deps = {(const uint8_t *)deps, n * sizeof(*deps)}};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED || (n && (!g || !deps)) ||
      n > CALL_GRAPH_DEPS_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__rpc(CALL_OP_CAPTURE_BEGIN, 0, &q, NULL);
  if (r == CUDA_SUCCESS)
    atomic_fetch_add(&captures, 1);
  return r;
}

GUEST_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode) {
  return begin(s, mode, NULL, NULL, 0, 0);
}
GUEST_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode) {
  return begin(s, mode, NULL, NULL, 0, 1);
}
GUEST_EXPORT CUresult cuStreamBeginCapture(CUstream s) {
  return begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL, 0, 0);
}
GUEST_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s) {
  return begin(s, CU_STREAM_CAPTURE_MODE_GLOBAL, NULL, NULL, 0, 1);
}

/* XLA's command buffers capture into a graph they made.  Edge data folds
 * as for cuGraphAddDependencies_v2 (below). */
static CUresult begin_to(CUstream s, CUgraph g, const CUgraphNode *deps,
                         const CUgraphEdgeData *ed, size_t n, CUstreamCaptureMode mode,
                         int ptds) {
  static int logged;
  if (!g)
    return CUDA_ERROR_INVALID_VALUE;
  if (!edges_fold(ed, n))
    return guest__unsupported("cuStreamBeginCaptureToGraph (edge data)", &logged);
  return begin(s, mode, g, deps, n, ptds);
}

GUEST_EXPORT CUresult cuStreamBeginCaptureToGraph(CUstream s, CUgraph g, const CUgraphNode *deps,
                                                  const CUgraphEdgeData *ed, size_t n,
                                                  CUstreamCaptureMode mode) {
  return begin_to(s, g, deps, ed, n, mode, 0);
}
GUEST_EXPORT CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream s, CUgraph g,
                                                       const CUgraphNode *deps,
                                                       const CUgraphEdgeData *ed, size_t n,
                                                       CUstreamCaptureMode mode) {
  return begin_to(s, g, deps, ed, n, mode, 1);
}

CUstreamCaptureStatus guest__stream_capture(uint64_t s, uint64_t *id) {
  call_capture_info_req_t q = {.stream = s};
  call_capture_info_rep_t a;
  void *rep = NULL;
  size_t len = 0;
  CUresult rc = CUDA_SUCCESS;
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  if (atomic_load(&captures) == 0)
    return st;
  /* Not a synchronising call: errors kept from earlier posts stay kept. */
  if (guest__call(CALL_OP_CAPTURE_INFO, 0, &q, &rc, NULL, 0, &len, &rep) != 0)
    return st;
  if (rc == CUDA_SUCCESS && call_capture_info_rep_decode(rep, len, &a, NULL) == 0 &&
      a.status != CU_STREAM_CAPTURE_STATUS_NONE) {
    st = (CUstreamCaptureStatus)a.status;
    *id = a.id;
  }
  free(rep);
  return st;
}

/* The capture's staged host copies (gstage.c) go to its graph, or with it. */
static CUresult end(CUstream s, CUgraph *pg, int ptds) {
  call_capture_end_req_t q = {.stream = guest__stream(s, ptds)};
  call_capture_end_rep_t a = {0};
  uint64_t id = 0;
  bool staged;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pg)
    return CUDA_ERROR_INVALID_VALUE;
  staged = guest__gstage_any_captured() &&
           guest__stream_capture(q.stream, &id) != CU_STREAM_CAPTURE_STATUS_NONE;
  r = guest__rpc(CALL_OP_CAPTURE_END, 0, &q, &a);
  if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    atomic_fetch_sub(&captures, 1); /* the capture is over either way */
  *pg = r == CUDA_SUCCESS ? (CUgraph)(uintptr_t)a.graph : NULL;
  if (staged) {
    if (r == CUDA_SUCCESS && guest__gstage_copy(GUEST_STAGE_CAPTURE | id, a.graph, NULL, NULL) !=
                                 CUDA_SUCCESS) {
      (void)cuGraphDestroy(*pg);
      *pg = NULL;
      r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    guest__gstage_drop(GUEST_STAGE_CAPTURE | id);
  }
  return r;
}

GUEST_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph *pg) {
  return end(s, pg, 0);
}
GUEST_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph *pg) {
  return end(s, pg, 1);
}

/* cuStreamUpdateCaptureDependencies: nodes of the capture's graph (added
 * by this process, or listed by capture info) the next captured work
 * depends on as well (flags ADD) or alone (SET).  Edge data folds as for
 * cuGraphAddDependencies_v2. */
static CUresult capture_deps(CUstream s, int ptds, CUgraphNode *deps, const CUgraphEdgeData *ed,
                             size_t n, unsigned flags) {
  static int logged;
  call_capture_deps_req_t q = {.stream = guest__stream(s, ptds), .set = flags,
                               .ndeps = (uint32_t)n,
                               .deps = {(const uint8_t *)deps, n * sizeof(*deps)}};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (flags > CU_STREAM_SET_CAPTURE_DEPENDENCIES || (n && !deps) || n > CALL_GRAPH_DEPS_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!edges_fold(ed, n))
    return guest__unsupported("cuStreamUpdateCaptureDependencies (edge data)", &logged);
  return guest__rpc(CALL_OP_CAPTURE_DEPS, 0, &q, NULL);
}

GUEST_EXPORT CUresult cuStreamUpdateCaptureDependencies(CUstream s, CUgraphNode *deps, size_t n,
                                                        unsigned int flags) {
  return capture_deps(s, 0, deps, NULL, n, flags);
}
GUEST_EXPORT CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream s, CUgraphNode *deps,
                                                             size_t n, unsigned int flags) {
  return capture_deps(s, 1, deps, NULL, n, flags);
}
GUEST_EXPORT CUresult cuStreamUpdateCaptureDependencies_v2(CUstream s, CUgraphNode *deps,
                                                           const CUgraphEdgeData *ed, size_t n,
                                                           unsigned int flags) {
  return capture_deps(s, 0, deps, ed, n, flags);
}
GUEST_EXPORT CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(CUstream s, CUgraphNode *deps,
                                                                const CUgraphEdgeData *ed,
                                                                size_t n, unsigned int flags) {
  return capture_deps(s, 1, deps, ed, n, flags);
}

/* The capture status of s and, while active, its id, graph and current
 * dependencies (kept per thread until its next query, as the driver keeps
 * them until the stream's next capture call). */
static CUresult info(CUstream s, int ptds, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps) {
  call_capture_info_req_t q = {.stream = guest__stream(s, ptds)};
  call_capture_info_rep_t a;
  void *rep = NULL;
  size_t len = 0;
  CUresult r = guest__ready(), rc;
  int err;
  if (r != CUDA_SUCCESS)
    return r;
  if (!st)
    return CUDA_ERROR_INVALID_VALUE;
  memset(&a, 0, sizeof(a));
  if (atomic_load(&captures) > 0) {
    err = guest__call(CALL_OP_CAPTURE_INFO, CALL_SYNCPOINT, &q, &rc, NULL, 0, &len, &rep);
    if (err)
      return guest__cu_error(err);
    if (rc == CUDA_SUCCESS && call_capture_info_rep_decode(rep, len, &a, NULL) != 0)
      rc = CUDA_ERROR_UNKNOWN;
    if (rc == CUDA_SUCCESS && a.ndeps > deps_cap) {
      uint64_t *n = realloc(deps_buf, a.ndeps * sizeof(*n));
      if (!n)
        rc = CUDA_ERROR_OUT_OF_MEMORY;
      else
        deps_buf = n, deps_cap = a.ndeps;
    }
    if (rc == CUDA_SUCCESS && a.ndeps)
      memcpy(deps_buf, a.deps.p, (size_t)a.ndeps * 8);
    free(rep);
    if (rc != CUDA_SUCCESS)
      return rc;
  }
  *st = (CUstreamCaptureStatus)a.status;
  if (id)
    *id = a.id;
  if (g)
    *g = (CUgraph)(uintptr_t)a.graph;
  if (deps)
    *deps = a.ndeps ? (const CUgraphNode *)deps_buf : NULL;
  if (edges)
    *edges = NULL; /* every edge is a default one */
  if (ndeps)
    *ndeps = a.ndeps;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus *st) {
  return info(s, 0, st, NULL, NULL, NULL, NULL, NULL);
}
GUEST_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus *st) {
  return info(s, 1, st, NULL, NULL, NULL, NULL, NULL);
}
GUEST_EXPORT CUresult cuStreamGetCaptureInfo_v3(CUstream s, CUstreamCaptureStatus *st,
                                                cuuint64_t *id, CUgraph *graph,
                                                const CUgraphNode **deps,
                                                const CUgraphEdgeData **edges, size_t *ndeps) {
  return info(s, 0, st, id, graph, deps, edges, ndeps);
}
GUEST_EXPORT CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream s, CUstreamCaptureStatus *st,
                                                     cuuint64_t *id, CUgraph *graph,
                                                     const CUgraphNode **deps,
                                                     const CUgraphEdgeData **edges, size_t *ndeps) {
  return info(s, 1, st, id, graph, deps, edges, ndeps);
}
GUEST_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *st,
                                                cuuint64_t *id, CUgraph *graph,
                                                const CUgraphNode **deps, size_t *ndeps) {
  return info(s, 0, st, id, graph, deps, NULL, ndeps);
}
GUEST_EXPORT CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream s, CUstreamCaptureStatus *st,
                                                     cuuint64_t *id, CUgraph *graph,
                                                     const CUgraphNode **deps, size_t *ndeps) {
  return info(s, 1, st, id, graph, deps, NULL, ndeps);
}
GUEST_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus *st,
                                             cuuint64_t *id) {
  return info(s, 0, st, id, NULL, NULL, NULL, NULL);
}
GUEST_EXPORT CUresult cuStreamGetCaptureInfo_ptsz(CUstream s, CUstreamCaptureStatus *st,
                                                  cuuint64_t *id) {
  return info(s, 1, st, id, NULL, NULL, NULL, NULL);
}

GUEST_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
  call_capture_mode_req_t q;
  int old = thr_mode, rc;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!mode || (unsigned)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  q.mode = (uint32_t)*mode;
  if ((int)*mode != old && (rc = guest__post(CALL_OP_CAPTURE_MODE, &q)) != 0)
    return guest__cu_error(rc);
  thr_mode = (int)*mode;
  *mode = (CUstreamCaptureMode)old;
  return CUDA_SUCCESS;
}

/* ---- graphs ---- */

GUEST_EXPORT CUresult cuGraphCreate(CUgraph *pg, unsigned int flags) {
  call_graph_new_req_t q = {.flags = flags};
  call_graph_new_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pg)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__rpc(CALL_OP_GRAPH_NEW, 0, &q, &a);
  if (r == CUDA_SUCCESS)
    *pg = (CUgraph)(uintptr_t)a.graph;
  return r;
}

GUEST_EXPORT CUresult cuGraphDestroy(CUgraph g) {
  call_graph_del_req_t q = {.graph = H(g)};
  CUresult r = guest__ready();
  if (r == CUDA_SUCCESS && (r = guest__rpc(CALL_OP_GRAPH_DEL, 0, &q, NULL)) == CUDA_SUCCESS) {
    nt_drop_graph(H(g));
    guest__gstage_drop(H(g));
    guest__uobj_drop(H(g), false);
  }
  return r;
}

/* The node of clone *(uint64_t *)arg copied from node, 0 if none. */
static uint64_t in_clone(uint64_t node, void *arg) {
  call_graph_find_req_t q = {.node = node, .clone = *(const uint64_t *)arg};
  call_graph_find_rep_t a = {0};
  return guest__rpc(CALL_OP_GRAPH_FIND, 0, &q, &a) == CUDA_SUCCESS ? a.node : 0;
}

/* A copy of g (GRAPH_CLONE); its nodes are named through
 * cuGraphNodeFindInClone, whose answer keeps the original's type here. */
GUEST_EXPORT CUresult cuGraphClone(CUgraph *pc, CUgraph g) {
  call_graph_clone_req_t q = {.graph = H(g)};
  call_graph_clone_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pc || !g)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__rpc(CALL_OP_GRAPH_CLONE, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  *pc = (CUgraph)(uintptr_t)a.graph;
  /* The clone's copy nodes name the same stages as the original's; it
   * holds the original's user objects too. */
  if ((guest__gstage_any(H(g)) &&
       (r = guest__gstage_copy(H(g), a.graph, in_clone, &a.graph)) != CUDA_SUCCESS) ||
      (r = guest__uobj_copy(H(g), a.graph)) != CUDA_SUCCESS) {
    (void)cuGraphDestroy(*pc);
    *pc = NULL;
  }
  return r;
}

GUEST_EXPORT CUresult cuGraphNodeFindInClone(CUgraphNode *pn, CUgraphNode orig, CUgraph clone) {
  call_graph_find_req_t q = {.node = H(orig), .clone = H(clone)};
  call_graph_find_rep_t a = {0};
  CUgraphNodeType type;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pn || !orig || !clone)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__rpc(CALL_OP_GRAPH_FIND, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  *pn = (CUgraphNode)(uintptr_t)a.node;
  if (nt_get(H(orig), &type))
    nt_put(a.node, H(clone), type);
  return CUDA_SUCCESS;
}

/* GRAPH_ADD: q's kind fields set by the caller; graph and dependencies
 * here; *ptr (may be NULL) gets an allocation node's address. */
static CUresult add_ptr(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps, size_t n,
                        call_graph_add_req_t *q, uint64_t *ptr) {
  call_graph_add_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pn || !g || (n && !deps) || n > CALL_GRAPH_DEPS_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  q->graph = H(g);
  q->ndeps = (uint32_t)n;
  q->deps = (call_view_t){(const uint8_t *)deps, n * sizeof(*deps)};
  r = guest__rpc(CALL_OP_GRAPH_ADD, 0, q, &a);
  if (r == CUDA_SUCCESS) {
    static const CUgraphNodeType kinds[CALL_GNODE_KINDS] = {
        [CALL_GNODE_EMPTY] = CU_GRAPH_NODE_TYPE_EMPTY,
        [CALL_GNODE_KERNEL] = CU_GRAPH_NODE_TYPE_KERNEL,
        [CALL_GNODE_MEMCPY] = CU_GRAPH_NODE_TYPE_MEMCPY,
        [CALL_GNODE_MEMSET] = CU_GRAPH_NODE_TYPE_MEMSET,
        [CALL_GNODE_EVENT_REC] = CU_GRAPH_NODE_TYPE_EVENT_RECORD,
        [CALL_GNODE_EVENT_WAIT] = CU_GRAPH_NODE_TYPE_WAIT_EVENT,
        [CALL_GNODE_CHILD] = CU_GRAPH_NODE_TYPE_GRAPH,
        [CALL_GNODE_HOST] = CU_GRAPH_NODE_TYPE_HOST,
        [CALL_GNODE_MEM_ALLOC] = CU_GRAPH_NODE_TYPE_MEM_ALLOC,
        [CALL_GNODE_MEM_FREE] = CU_GRAPH_NODE_TYPE_MEM_FREE};
    *pn = (CUgraphNode)(uintptr_t)a.node;
    if (ptr)
      *ptr = a.ptr;
    if (q->kind < CALL_GNODE_KINDS)
      nt_put(a.node, H(g), kinds[q->kind]);
  }
  return r;
}

static CUresult add(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps, size_t n,
                    call_graph_add_req_t *q) {
  return add_ptr(pn, g, deps, n, q, NULL);
}

/* ---- memory nodes: the graph's device memory, on tallyd's device ---- */

/* An allocation node: device memory of the tenant's device, which the
 * owning device reaches; access descriptors may name it (no other device
 * is offered); no shareable handle, as the driver requires.  The address
 * joins this process's table as device memory until a free node or
 * cuMemFreeAsync takes it out. */
static CUresult add_mem_alloc(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps, size_t n,
                              const CUmemPoolProps *pp, const CUmemAccessDesc *acc, size_t nacc,
                              size_t bytes, CUdeviceptr *dptr) {
  call_graph_add_req_t q;
  uint64_t p = 0;
  CUresult r;
  if (!pp || !dptr || bytes == 0 || (nacc && !acc) ||
      pp->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || pp->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
    return CUDA_ERROR_INVALID_VALUE;
  if (pp->location.type != CU_MEM_LOCATION_TYPE_DEVICE || pp->location.id != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  for (size_t i = 0; i < nacc; i++)
    if (acc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || acc[i].location.id != 0)
      return CUDA_ERROR_INVALID_DEVICE;
  memset(&q, 0, sizeof(q));
  q.kind = CALL_GNODE_MEM_ALLOC;
  q.width = bytes;
  if ((r = add_ptr(pn, g, deps, n, &q, &p)) != CUDA_SUCCESS)
    return r;
  if (guest__mem_add(p, bytes, GUEST_MEM_DEVICE, 0) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY; /* the node stays; its address is not recorded here */
  *dptr = (CUdeviceptr)p;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                             size_t n, CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  return p ? add_mem_alloc(pn, g, deps, n, &p->poolProps, p->accessDescs, p->accessDescCount,
                           p->bytesize, &p->dptr)
           : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuGraphAddMemFreeNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                            size_t n, CUdeviceptr dptr) {
  call_graph_add_req_t q;
  CUresult r;
  memset(&q, 0, sizeof(q));
  q.kind = CALL_GNODE_MEM_FREE;
  q.dst = dptr;
  if ((r = add(pn, g, deps, n, &q)) == CUDA_SUCCESS)
    (void)guest__mem_del(dptr, GUEST_MEM_DEVICE, NULL);
  return r;
}

/* A kernel node's fields of q (args packed into small or *body). */
static CUresult kernel_fields(call_graph_add_req_t *q, uint64_t h, const unsigned grid[3],
                              const unsigned block[3], unsigned shmem, void **params, void **extra,
                              uint8_t *small, size_t cap, uint8_t **body) {
  const guest_func_t *f = guest__func_find(h);
  const void *src = NULL;
  uint32_t argbytes = 0;
  CUresult r;
  if (!f)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__kernel_args(f, params, extra, small, cap, body, &src, &argbytes, NULL);
  if (r != CUDA_SUCCESS)
    return r;
  q->kind = CALL_GNODE_KERNEL;
  q->handle = h;
  memcpy(q->grid, grid, sizeof(q->grid));
  memcpy(q->block, block, sizeof(q->block));
  q->shmem = shmem;
  q->argbytes = argbytes;
  q->args = (call_view_t){src, argbytes};
  return CUDA_SUCCESS;
}

static CUresult add_kernel(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps, size_t n,
                           uint64_t h, const unsigned grid[3], const unsigned block[3],
                           unsigned shmem, void **params, void **extra) {
  call_graph_add_req_t q;
  uint8_t small[1024], *body = NULL;
  CUresult r;
  memset(&q, 0, sizeof(q));
  r = kernel_fields(&q, h, grid, block, shmem, params, extra, small, sizeof(small), &body);
  if (r == CUDA_SUCCESS)
    r = add(pn, g, deps, n, &q);
  free(body);
  return r;
}

GUEST_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                              size_t n, const CUDA_KERNEL_NODE_PARAMS *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  return add_kernel(pn, g, deps, n, KERNEL_NODE(p, FUNC_OR_KERN(p)));
}

GUEST_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                           size_t n, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  return add_kernel(pn, g, deps, n, KERNEL_NODE(p, H(p->func)));
}

/* Whether [p, p + n) lies in pinned memory of this process that tallyd
 * maps at the same address (shared memory): a graph's copy may name it. */
static bool shared_pinned(uint64_t p, size_t n) {
  uint64_t base, size;
  unsigned flags;
  return n && guest__mem_find_host(p, &base, &size, &flags) && GUEST_HOST_REACHABLE(flags) &&
         n <= size - (p - base);
}

/* A side of a copy node n bytes wide: its address when it names device
 * memory or shared pinned memory, else 0 with *host set when it names
 * other host memory (pageable memory, pinned memory over TCP: staged,
 * gstage.c), NULL for what it cannot be (arrays). */
static uint64_t copy_side(CUmemorytype t, CUdeviceptr d, const void *h, size_t x, size_t n,
                          void **host) {
  uint64_t base, size, p = (t == CU_MEMORYTYPE_HOST ? (uint64_t)(uintptr_t)h : d) + x;
  guest_mem_kind_t kind;
  *host = NULL;
  if (t == CU_MEMORYTYPE_DEVICE)
    return p;
  if (t == CU_MEMORYTYPE_UNIFIED && guest__mem_find(d, &base, &size, &kind) &&
      kind == GUEST_MEM_DEVICE)
    return p;
  if ((t == CU_MEMORYTYPE_HOST || t == CU_MEMORYTYPE_UNIFIED) && shared_pinned(p, n))
    return p;
  if ((t == CU_MEMORYTYPE_HOST || t == CU_MEMORYTYPE_UNIFIED) && p)
    *host = (void *)(uintptr_t)p;
  return 0;
}

/* What a copy node needs staged (gstage.c): dir GUEST_STAGE_UP or _DOWN
 * and the host side, or dir -1. */
typedef struct {
  int dir;
  void *host;
  size_t len;
} stage_req_t;

/* A copy node's fields (q zeroed by the caller): a 1-D copy between device
 * memory and shared pinned memory (either side either), or between device
 * memory and other host memory (*st says which side; the caller names a
 * stage there); else NOT_SUPPORTED, logged once as what. */
static CUresult memcpy_fields(call_graph_add_req_t *q, const CUDA_MEMCPY3D *c, stage_req_t *st,
                              const char *fn, int *logged) {
  char what[160];
  void *dh, *sh;
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  q->kind = CALL_GNODE_MEMCPY;
  q->dst = copy_side(c->dstMemoryType, c->dstDevice, c->dstHost, c->dstXInBytes,
                     c->WidthInBytes, &dh);
  q->src = copy_side(c->srcMemoryType, c->srcDevice, c->srcHost, c->srcXInBytes,
                     c->WidthInBytes, &sh);
  q->width = c->WidthInBytes;
  *st = (stage_req_t){.dir = -1, .len = c->WidthInBytes};
  if (q->dst && !q->src && sh)
    st->dir = GUEST_STAGE_UP, st->host = sh;
  else if (q->src && !q->dst && dh)
    st->dir = GUEST_STAGE_DOWN, st->host = dh;
  if ((!(q->dst && q->src) && st->dir < 0) || c->Height > 1 || c->Depth > 1 || c->srcY ||
      c->dstY || c->srcZ || c->dstZ || (st->dir >= 0 && guest__capture_open())) {
    snprintf(what, sizeof(what), "%s (other than a 1-D copy between device memory and host "
             "memory, made outside a stream capture)", fn);
    return guest__unsupported(what, logged);
  }
  return CUDA_SUCCESS;
}

/* A stage buffer for st, named in q in place of the host side. */
static CUresult stage_fields(call_graph_add_req_t *q, const stage_req_t *st, uint64_t *dev) {
  CUresult r;
  *dev = 0;
  if (st->dir < 0)
    return CUDA_SUCCESS;
  if ((r = guest__gstage_buffer(st->len, dev)) != CUDA_SUCCESS)
    return r;
  if (st->dir == GUEST_STAGE_UP)
    q->src = *dev;
  else
    q->dst = *dev;
  return CUDA_SUCCESS;
}

/* After tallyd answered r for node of owner made or set from q and st:
 * the stage is recorded, or dropped with the answer. */
static CUresult stage_done(CUresult r, uint64_t owner, uint64_t node, const stage_req_t *st,
                           uint64_t dev) {
  if (r != CUDA_SUCCESS) {
    if (dev)
      (void)guest__dev_free(dev);
    return r;
  }
  if (!dev) {
    guest__gstage_unbind(owner, node);
    return CUDA_SUCCESS;
  }
  return guest__gstage_bind(owner, node, dev, st->host, st->len, st->dir);
}

/* A memset node's fields (q zeroed by the caller). */
static CUresult memset_fields(call_graph_add_req_t *q, const CUDA_MEMSET_NODE_PARAMS *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  q->kind = CALL_GNODE_MEMSET;
  q->dst = p->dst, q->pitch = p->pitch, q->value = p->value, q->elem = p->elementSize;
  q->width = p->width, q->height = p->height;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuGraphAddMemcpyNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                           size_t n, const CUDA_MEMCPY3D *c, CUcontext ctx) {
  static int logged;
  call_graph_add_req_t q;
  stage_req_t st;
  uint64_t dev;
  CUresult r;
  (void)ctx;
  memset(&q, 0, sizeof(q));
  if ((r = memcpy_fields(&q, c, &st, "cuGraphAddMemcpyNode", &logged)) != CUDA_SUCCESS ||
      (r = stage_fields(&q, &st, &dev)) != CUDA_SUCCESS)
    return r;
  r = add(pn, g, deps, n, &q);
  return stage_done(r, H(g), r == CUDA_SUCCESS ? H(*pn) : 0, &st, dev);
}

GUEST_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                           size_t n, const CUDA_MEMSET_NODE_PARAMS *p,
                                           CUcontext ctx) {
  call_graph_add_req_t q;
  CUresult r;
  (void)ctx;
  memset(&q, 0, sizeof(q));
  r = memset_fields(&q, p);
  return r == CUDA_SUCCESS ? add(pn, g, deps, n, &q) : r;
}

/* A host node's fields (q zeroed here): its function kept here across
 * replays (hostfn.c), named to tallyd by the entry's seq.  The caller
 * forgets q->handle when tallyd refuses the node. */
static CUresult host_fields(call_graph_add_req_t *q, const CUDA_HOST_NODE_PARAMS *p) {
  uint64_t seq = 0;
  CUresult r;
  memset(q, 0, sizeof(*q));
  if (!p || !p->fn)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__hostfn_keep((void *)p->fn, p->userData, &seq)) != CUDA_SUCCESS)
    return r;
  q->kind = CALL_GNODE_HOST;
  q->handle = seq;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuGraphAddHostNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                         size_t n, const CUDA_HOST_NODE_PARAMS *p) {
  call_graph_add_req_t q;
  CUresult r = host_fields(&q, p);
  if (r == CUDA_SUCCESS && (r = add(pn, g, deps, n, &q)) != CUDA_SUCCESS)
    guest__hostfn_forget(q.handle);
  return r;
}

static CUresult add_handle(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps, size_t n,
                           uint32_t kind, uint64_t h) {
  call_graph_add_req_t q;
  memset(&q, 0, sizeof(q));
  q.kind = kind;
  q.handle = h;
  return add(pn, g, deps, n, &q);
}

GUEST_EXPORT CUresult cuGraphAddEmptyNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                          size_t n) {
  return add_handle(pn, g, deps, n, CALL_GNODE_EMPTY, 0);
}
GUEST_EXPORT CUresult cuGraphAddEventRecordNode(CUgraphNode *pn, CUgraph g,
                                                const CUgraphNode *deps, size_t n, CUevent e) {
  return add_handle(pn, g, deps, n, CALL_GNODE_EVENT_REC, H(e));
}
GUEST_EXPORT CUresult cuGraphAddEventWaitNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                              size_t n, CUevent e) {
  return add_handle(pn, g, deps, n, CALL_GNODE_EVENT_WAIT, H(e));
}
/* A child copying host memory is refused: its stages are its own (gstage.c). */
static CUresult child_staged(CUgraph child) {
  static int logged;
  return guest__gstage_any(H(child))
             ? guest__unsupported("a child graph copying host memory", &logged)
             : CUDA_SUCCESS;
}

/* The parent holds the child's user objects too (its copy is the parent's). */
GUEST_EXPORT CUresult cuGraphAddChildGraphNode(CUgraphNode *pn, CUgraph g,
                                               const CUgraphNode *deps, size_t n, CUgraph child) {
  CUresult r = child_staged(child);
  if (r == CUDA_SUCCESS && (r = add_handle(pn, g, deps, n, CALL_GNODE_CHILD, H(child))) ==
                               CUDA_SUCCESS)
    r = guest__uobj_copy(H(child), H(g));
  return r;
}

/* GRAPH_DEPS (op) or GRAPH_UNDEP: the edges from[i] -> to[i] of g. */
static CUresult edges_change(uint32_t op, CUgraph g, const CUgraphNode *from,
                             const CUgraphNode *to, size_t n) {
  call_graph_deps_req_t q = {.graph = H(g), .n = (uint32_t)n, .nto = (uint32_t)n};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (n == 0)
    return CUDA_SUCCESS;
  if (!from || !to || n > CALL_GRAPH_DEPS_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  q.from = (call_view_t){(const uint8_t *)from, n * sizeof(*from)};
  q.to = (call_view_t){(const uint8_t *)to, n * sizeof(*to)};
  return guest__rpc(op, 0, &q, NULL);
}

GUEST_EXPORT CUresult cuGraphAddDependencies(CUgraph g, const CUgraphNode *from,
                                             const CUgraphNode *to, size_t n) {
  return edges_change(CALL_OP_GRAPH_DEPS, g, from, to, n);
}

GUEST_EXPORT CUresult cuGraphRemoveDependencies(CUgraph g, const CUgraphNode *from,
                                                const CUgraphNode *to, size_t n) {
  return edges_change(CALL_OP_GRAPH_UNDEP, g, from, to, n);
}

/* Edge data: a programmatic edge (or a launch-order port) lets the
 * downstream kernel start before the upstream one ends; a full dependency
 * is the stricter order, so it is kept as one (correct, without the
 * overlap: a kernel's cudaGridDependencySynchronize then returns at once).
 * false for what is not such an edge (unknown types, ports or reserved
 * bytes), which the caller refuses. */
static bool edges_fold(const CUgraphEdgeData *ed, size_t n) {
  for (size_t i = 0; ed && i < n; i++) {
    static const unsigned char zero[sizeof(ed->reserved)];
    if (ed[i].type > CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC || ed[i].to_port != 0 ||
        ed[i].from_port > CU_GRAPH_KERNEL_NODE_PORT_LAUNCH_ORDER ||
        memcmp(ed[i].reserved, zero, sizeof(zero)) != 0)
      return false;
  }
  return true;
}

GUEST_EXPORT CUresult cuGraphAddDependencies_v2(CUgraph g, const CUgraphNode *from,
                                                const CUgraphNode *to, const CUgraphEdgeData *ed,
                                                size_t n) {
  static int logged;
  if (!edges_fold(ed, n))
    return guest__unsupported("cuGraphAddDependencies_v2 (edge data)", &logged);
  return cuGraphAddDependencies(g, from, to, n);
}

/* Edge data folded as cuGraphAddDependencies_v2 folds it, so an edge is
 * removed with the data it was added with. */
GUEST_EXPORT CUresult cuGraphRemoveDependencies_v2(CUgraph g, const CUgraphNode *from,
                                                   const CUgraphNode *to,
                                                   const CUgraphEdgeData *ed, size_t n) {
  static int logged;
  if (!edges_fold(ed, n))
    return guest__unsupported("cuGraphRemoveDependencies_v2 (edge data)", &logged);
  return cuGraphRemoveDependencies(g, from, to, n);
}

/* cuGraphDestroyNode: tallyd removes the node and its edges (a host
 * function's two nodes together; a memory node is refused, NOT_SUPPORTED);
 * what the guest keeps of it (type, getter storage, a staging entry) goes. */
GUEST_EXPORT CUresult cuGraphDestroyNode(CUgraphNode node) {
  call_graph_node_del_req_t q = {.node = H(node)};
  uint64_t g = nt_graph(H(node));
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!node)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__rpc(CALL_OP_GRAPH_NODE_DEL, 0, &q, NULL)) != CUDA_SUCCESS)
    return r;
  nt_forget(H(node));
  if (g)
    guest__gstage_unbind(g, H(node));
  return CUDA_SUCCESS;
}

/* The tagged unions' (cuGraphAddNode, cuGraphNodeSetParams,
 * cuGraphExecNodeSetParams) common pieces: a memset's fields in the v1
 * struct, and NOT_SUPPORTED for a node type logged once per type. */
#define TYPE_LOGS (CU_GRAPH_NODE_TYPE_CONDITIONAL + 2)
static CUDA_MEMSET_NODE_PARAMS memset_v1(const CUDA_MEMSET_NODE_PARAMS_v2 *m) {
  return (CUDA_MEMSET_NODE_PARAMS){.dst = m->dst, .pitch = m->pitch, .value = m->value,
                                   .elementSize = m->elementSize, .width = m->width,
                                   .height = m->height};
}

static CUresult type_unsupported(const char *fn, CUgraphNodeType type, int logged[TYPE_LOGS]) {
  char what[64];
  unsigned t = (unsigned)type;
  snprintf(what, sizeof(what), "%s (node type %u)", fn, t);
  return guest__unsupported(what, &logged[t <= CU_GRAPH_NODE_TYPE_CONDITIONAL
                                              ? t
                                              : CU_GRAPH_NODE_TYPE_CONDITIONAL + 1]);
}

/* cuGraphAddNode: the node kinds offered above, from the tagged union; the
 * others answer NOT_SUPPORTED naming the type once. */
static CUresult add_generic(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps, size_t n,
                            CUgraphNodeParams *p) {
  static int logged[TYPE_LOGS];
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL:
    return add_kernel(pn, g, deps, n, KERNEL_NODE(&p->kernel, FUNC_OR_KERN(&p->kernel)));
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    return cuGraphAddMemcpyNode(pn, g, deps, n, &p->memcpy.copyParams, p->memcpy.copyCtx);
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS v1 = memset_v1(&p->memset);
    return cuGraphAddMemsetNode(pn, g, deps, n, &v1, p->memset.ctx);
  }
  case CU_GRAPH_NODE_TYPE_EMPTY:
    return cuGraphAddEmptyNode(pn, g, deps, n);
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    return cuGraphAddEventRecordNode(pn, g, deps, n, p->eventRecord.event);
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    return cuGraphAddEventWaitNode(pn, g, deps, n, p->eventWait.event);
  case CU_GRAPH_NODE_TYPE_GRAPH:
    return cuGraphAddChildGraphNode(pn, g, deps, n, p->graph.graph);
  case CU_GRAPH_NODE_TYPE_HOST: {
    CUDA_HOST_NODE_PARAMS h = {.fn = p->host.fn, .userData = p->host.userData};
    return cuGraphAddHostNode(pn, g, deps, n, &h);
  }
  case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
    return add_mem_alloc(pn, g, deps, n, &p->alloc.poolProps, p->alloc.accessDescs,
                         p->alloc.accessDescCount, p->alloc.bytesize, &p->alloc.dptr);
  case CU_GRAPH_NODE_TYPE_MEM_FREE:
    return cuGraphAddMemFreeNode(pn, g, deps, n, p->free.dptr);
  default:
    return type_unsupported("cuGraphAddNode", p->type, logged);
  }
}

GUEST_EXPORT CUresult cuGraphAddNode(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                     size_t n, CUgraphNodeParams *p) {
  return add_generic(pn, g, deps, n, p);
}

GUEST_EXPORT CUresult cuGraphAddNode_v2(CUgraphNode *pn, CUgraph g, const CUgraphNode *deps,
                                        const CUgraphEdgeData *ed, size_t n,
                                        CUgraphNodeParams *p) {
  static int logged;
  if (!edges_fold(ed, n))
    return guest__unsupported("cuGraphAddNode_v2 (edge data)", &logged);
  return add_generic(pn, g, deps, n, p);
}

/* The graph as tallyd's driver prints it (GRAPH_DOT), written to path here:
 * the application's file is on the application's host.  A file that cannot
 * be written is CUDA_ERROR_OPERATING_SYSTEM, as the driver answers. */
GUEST_EXPORT CUresult cuGraphDebugDotPrint(CUgraph g, const char *path, unsigned int flags) {
  call_graph_dot_req_t q = {.graph = H(g), .flags = flags};
  call_graph_dot_rep_t a;
  void *rep = NULL;
  size_t len = 0;
  CUresult rc = guest__ready();
  FILE *f;
  int err;
  if (rc != CUDA_SUCCESS)
    return rc;
  if (!path || !g)
    return CUDA_ERROR_INVALID_VALUE;
  if ((err = guest__call(CALL_OP_GRAPH_DOT, 0, &q, &rc, NULL, 0, &len, &rep)) != 0)
    return guest__cu_error(err);
  if (rc == CUDA_SUCCESS && call_graph_dot_rep_decode(rep, len, &a, NULL) != 0)
    rc = CUDA_ERROR_UNKNOWN;
  if (rc == CUDA_SUCCESS) {
    if (!(f = fopen(path, "w"))) {
      rc = CUDA_ERROR_OPERATING_SYSTEM;
    } else {
      size_t wrote = a.text.len ? fwrite(a.text.p, 1, a.text.len, f) : 0;
      if (fclose(f) != 0 || wrote != a.text.len)
        rc = CUDA_ERROR_OPERATING_SYSTEM;
    }
  }
  free(rep);
  return rc;
}

/* One GRAPH_NODES page of list which (CALL_GNODES_*, of g or of node):
 * *total, and up to cap nodes from first into out. */
static CUresult nodes_page(uint32_t which, CUgraph g, CUgraphNode node, uint32_t first,
                           uint32_t cap, CUgraphNode *out, size_t *got, uint64_t *total) {
  call_graph_nodes_req_t q = {.graph = H(g), .first = first, .cap = cap, .which = which,
                              .node = H(node)};
  call_graph_nodes_rep_t a;
  void *rep = NULL;
  size_t len = 0;
  CUresult rc;
  int err = guest__call(CALL_OP_GRAPH_NODES, 0, &q, &rc, NULL, 0, &len, &rep);
  if (err)
    return guest__cu_error(err);
  memset(&a, 0, sizeof(a));
  if (rc == CUDA_SUCCESS && call_graph_nodes_rep_decode(rep, len, &a, NULL) != 0)
    rc = CUDA_ERROR_UNKNOWN;
  if (rc == CUDA_SUCCESS) {
    if (a.n) /* a count query passes no array */
      memcpy(out, a.nodes.p, (size_t)a.n * sizeof(*out));
    *got = a.n;
    *total = a.total;
  }
  free(rep);
  return rc;
}

/* A node list as the driver answers it: the count (nodes NULL), or up to
 * *n of them (the rest of the caller's array NULL) and how many were
 * written; pages of CALL_GRAPH_NODES_MAX.  Edge data (ed), where asked,
 * is all default: the edges tallyd's graphs hold. */
static CUresult nodes_list(uint32_t which, CUgraph g, CUgraphNode node, CUgraphNode *nodes,
                           CUgraphEdgeData *ed, size_t *n) {
  size_t done = 0, got = 0;
  uint64_t total = 0;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!n || (ed && !nodes))
    return CUDA_ERROR_INVALID_VALUE;
  if (!nodes) {
    r = nodes_page(which, g, node, 0, 0, NULL, &got, &total);
    if (r == CUDA_SUCCESS)
      *n = (size_t)total;
    return r;
  }
  do {
    size_t cap = *n - done > CALL_GRAPH_NODES_MAX ? CALL_GRAPH_NODES_MAX : *n - done;
    if (done > UINT32_MAX)
      return CUDA_ERROR_INVALID_VALUE;
    r = nodes_page(which, g, node, (uint32_t)done, (uint32_t)cap, nodes + done, &got, &total);
    done += got;
  } while (r == CUDA_SUCCESS && got > 0 && done < *n && done < total);
  if (r != CUDA_SUCCESS)
    return r;
  for (size_t i = done; i < *n; i++)
    nodes[i] = NULL;
  if (ed)
    memset(ed, 0, *n * sizeof(*ed));
  *n = done;
  if (g) /* whatever is kept of them goes with g */
    for (size_t i = 0; i < done; i++)
      nt_put(H(nodes[i]), H(g), NT_UNKNOWN);
  return CUDA_SUCCESS;
}

/* cuGraphGetEdges: every node's dependencies, as pairs (edge data all
 * default): the count (from and to NULL), or up to *n pairs, the rest of
 * the caller's arrays NULL and *n how many were written. */
static CUresult edges(CUgraph g, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *ed,
                      size_t *n) {
  CUgraphNode *nodes = NULL, *deps = NULL;
  size_t nn = 0, total = 0, cap, capdeps = 0;
  CUresult r;
  if (!n || !g || (!from) != (!to) || (ed && !from))
    return CUDA_ERROR_INVALID_VALUE;
  cap = from ? *n : 0;
  if ((r = nodes_list(CALL_GNODES_ALL, g, NULL, NULL, NULL, &nn)) != CUDA_SUCCESS)
    return r;
  if (nn && !(nodes = calloc(nn, sizeof(*nodes))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (nn)
    r = nodes_list(CALL_GNODES_ALL, g, NULL, nodes, NULL, &nn);
  for (size_t i = 0; i < nn && r == CUDA_SUCCESS; i++) {
    size_t nd = 0;
    if ((r = nodes_list(CALL_GNODES_DEPS, NULL, nodes[i], NULL, NULL, &nd)) != CUDA_SUCCESS ||
        nd == 0)
      continue;
    if (nd > capdeps) {
      CUgraphNode *d = realloc(deps, nd * sizeof(*d));
      if (!d) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        break;
      }
      deps = d, capdeps = nd;
    }
    if ((r = nodes_list(CALL_GNODES_DEPS, NULL, nodes[i], deps, NULL, &nd)) != CUDA_SUCCESS)
      break;
    for (size_t k = 0; k < nd; k++, total++)
      if (total < cap)
        from[total] = deps[k], to[total] = nodes[i];
  }
  free(nodes);
  free(deps);
  if (r != CUDA_SUCCESS)
    return r;
  if (!from) {
    *n = total;
    return CUDA_SUCCESS;
  }
  for (size_t i = total; i < cap; i++)
    from[i] = to[i] = NULL;
  if (ed)
    memset(ed, 0, cap * sizeof(*ed));
  *n = total < cap ? total : cap;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuGraphGetEdges(CUgraph g, CUgraphNode *from, CUgraphNode *to, size_t *n) {
  CUresult r = guest__ready();
  return r != CUDA_SUCCESS ? r : edges(g, from, to, NULL, n);
}

GUEST_EXPORT CUresult cuGraphGetEdges_v2(CUgraph g, CUgraphNode *from, CUgraphNode *to,
                                         CUgraphEdgeData *ed, size_t *n) {
  CUresult r = guest__ready();
  return r != CUDA_SUCCESS ? r : edges(g, from, to, ed, n);
}

GUEST_EXPORT CUresult cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
  return nodes_list(CALL_GNODES_ALL, g, NULL, nodes, NULL, n);
}
GUEST_EXPORT CUresult cuGraphGetRootNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
  return nodes_list(CALL_GNODES_ROOTS, g, NULL, nodes, NULL, n);
}
GUEST_EXPORT CUresult cuGraphNodeGetDependencies(CUgraphNode node, CUgraphNode *deps, size_t *n) {
  return nodes_list(CALL_GNODES_DEPS, NULL, node, deps, NULL, n);
}
GUEST_EXPORT CUresult cuGraphNodeGetDependencies_v2(CUgraphNode node, CUgraphNode *deps,
                                                    CUgraphEdgeData *ed, size_t *n) {
  return nodes_list(CALL_GNODES_DEPS, NULL, node, deps, ed, n);
}
GUEST_EXPORT CUresult cuGraphNodeGetDependentNodes(CUgraphNode node, CUgraphNode *after,
                                                   size_t *n) {
  return nodes_list(CALL_GNODES_DEPENDENTS, NULL, node, after, NULL, n);
}
GUEST_EXPORT CUresult cuGraphNodeGetDependentNodes_v2(CUgraphNode node, CUgraphNode *after,
                                                      CUgraphEdgeData *ed, size_t *n) {
  return nodes_list(CALL_GNODES_DEPENDENTS, NULL, node, after, ed, n);
}

/* ---- instantiated graphs ---- */

/* ---- instantiation ---- */

/* Each exec's instantiation flags (cuGraphExecGetFlags): exec -> flags | 1 << 63. */
static pthread_mutex_t xf_mu = PTHREAD_MUTEX_INITIALIZER;
static u64map_t xflags;

static void xflags_put(uint64_t exec, unsigned long long flags) {
  pthread_mutex_lock(&xf_mu);
  (void)u64map_put(&xflags, exec, flags | (1ull << 63)); /* no memory: not answered */
  pthread_mutex_unlock(&xf_mu);
}

static void xflags_del(uint64_t exec) {
  pthread_mutex_lock(&xf_mu);
  u64map_del(&xflags, exec);
  pthread_mutex_unlock(&xf_mu);
}

GUEST_EXPORT CUresult cuGraphExecGetFlags(CUgraphExec e, cuuint64_t *flags) {
  uint64_t v = 0;
  bool known;
  if (!e || !flags)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&xf_mu);
  known = u64map_get(&xflags, H(e), &v);
  pthread_mutex_unlock(&xf_mu);
  if (!known)
    return CUDA_ERROR_INVALID_VALUE;
  *flags = v & ~(1ull << 63);
  return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *pe, CUgraph g, unsigned long long flags) {
  call_graph_instantiate_req_t q = {.graph = H(g), .flags = flags};
  call_graph_instantiate_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pe)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__rpc(CALL_OP_GRAPH_INSTANTIATE, 0, &q, &a);
  if (r != CUDA_SUCCESS)
    return r;
  *pe = (CUgraphExec)(uintptr_t)a.exec;
  xflags_put(a.exec, flags);
  /* The exec's copy nodes name the graph's stages; it holds the graph's
   * user objects too. */
  if ((guest__gstage_any(H(g)) &&
       (r = guest__gstage_copy(H(g), a.exec, NULL, NULL)) != CUDA_SUCCESS) ||
      (r = guest__uobj_copy(H(g), a.exec)) != CUDA_SUCCESS) {
    (void)cuGraphExecDestroy(*pe);
    *pe = NULL;
  }
  return r;
}

GUEST_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g,
                                                  unsigned long long flags) {
  return instantiate(pe, g, flags);
}

GUEST_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *pe, CUgraph g, CUgraphNode *err_node,
                                            char *log, size_t logsize) {
  if (err_node)
    *err_node = NULL;
  if (log && logsize)
    log[0] = 0;
  return instantiate(pe, g, 0);
}
GUEST_EXPORT CUresult cuGraphInstantiate(CUgraphExec *pe, CUgraph g, CUgraphNode *err_node,
                                         char *log, size_t logsize) {
  return cuGraphInstantiate_v2(pe, g, err_node, log, logsize);
}

/* An exec with stages (gstage.c): its uploads' bytes go first, its
 * downloads are read back after; it cannot be launched into a capture (the
 * staging copies would not be captured with it). */
static CUresult graph_launch(CUgraphExec e, CUstream s, int ptds, uint32_t upload) {
  static int logged;
  call_graph_launch_req_t q = {.exec = H(e), .stream = guest__stream(s, ptds), .upload = upload};
  bool staged;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!e)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(staged = !upload && guest__gstage_any(q.exec)))
    return guest__post_cu(CALL_OP_GRAPH_LAUNCH, &q);
  if (guest__capture_open())
    return guest__unsupported("cuGraphLaunch of a graph copying host memory, while a stream "
                              "capture is open", &logged);
  if ((r = guest__gstage_before(q.exec, q.stream)) != CUDA_SUCCESS ||
      (r = guest__post_cu(CALL_OP_GRAPH_LAUNCH, &q)) != CUDA_SUCCESS)
    return r;
  guest__gstage_after(q.exec, q.stream);
  return CUDA_SUCCESS;
}

/* Upload (flag CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) goes as a separate post. */
static CUresult instantiate_params(CUgraphExec *pe, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p,
                                   int ptds) {
  CUresult r;
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  p->hErrNode_out = NULL;
  r = instantiate(pe, g, p->flags & ~(cuuint64_t)CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD);
  if (r == CUDA_SUCCESS)
    xflags_put(H(*pe), p->flags); /* as the application gave them */
  p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
  if (r == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
    r = graph_launch(*pe, p->hUploadStream, ptds, 1);
  return r;
}

GUEST_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *pe, CUgraph g,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return instantiate_params(pe, g, p, 0);
}
GUEST_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *pe, CUgraph g,
                                                        CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
  return instantiate_params(pe, g, p, 1);
}

GUEST_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s) {
  return graph_launch(e, s, 0, 0);
}
GUEST_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s) {
  return graph_launch(e, s, 1, 0);
}
GUEST_EXPORT CUresult cuGraphUpload(CUgraphExec e, CUstream s) {
  return graph_launch(e, s, 0, 1);
}
GUEST_EXPORT CUresult cuGraphUpload_ptsz(CUgraphExec e, CUstream s) {
  return graph_launch(e, s, 1, 1);
}

GUEST_EXPORT CUresult cuGraphExecDestroy(CUgraphExec e) {
  call_graph_exec_del_req_t q = {.exec = H(e)};
  CUresult r = guest__ready();
  if (r == CUDA_SUCCESS && (r = guest__rpc(CALL_OP_GRAPH_EXEC_DEL, 0, &q, NULL)) == CUDA_SUCCESS) {
    guest__gstage_drop(H(e));
    guest__uobj_drop(H(e), true);
    xflags_del(H(e));
  }
  return r;
}

GUEST_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec e, CUgraph g,
                                           CUgraphExecUpdateResultInfo *info) {
  call_graph_exec_update_req_t q = {.exec = H(e), .graph = H(g)};
  call_graph_exec_update_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!info)
    return CUDA_ERROR_INVALID_VALUE;
  if (guest__gstage_any(H(e)) || guest__gstage_any(H(g))) {
    /* Their copy nodes would name stages no entry describes (gstage.c). */
    static int logged;
    memset(info, 0, sizeof(*info));
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED;
    (void)guest__unsupported("cuGraphExecUpdate (of graphs copying host memory)", &logged);
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  r = guest__rpc(CALL_OP_GRAPH_EXEC_UPDATE, 0, &q, &a);
  if (r == CUDA_SUCCESS)
    r = (CUresult)a.status; /* the driver's answer */
  memset(info, 0, sizeof(*info));
  info->result = r == CUDA_SUCCESS ? CU_GRAPH_EXEC_UPDATE_SUCCESS
                                   : a.result ? (CUgraphExecUpdateResult)a.result
                                              : CU_GRAPH_EXEC_UPDATE_ERROR;
  info->errorNode = (CUgraphNode)(uintptr_t)a.error_node;
  return r;
}

GUEST_EXPORT CUresult cuGraphExecUpdate(CUgraphExec e, CUgraph g, CUgraphNode *err_node,
                                        CUgraphExecUpdateResult *res) {
  CUgraphExecUpdateResultInfo info;
  CUresult r = cuGraphExecUpdate_v2(e, g, &info);
  if (err_node)
    *err_node = info.errorNode;
  if (res)
    *res = info.result;
  return r;
}

/* XLA updates a command buffer's nested one (a child graph node) in place.
 * Updates of an exec are posted, as launches are: the daemon applies them in
 * order before any later launch of the exec, and an error is kept for the
 * next syncpoint (XLA updates a score of nodes before every replay, and a
 * round trip each cost it more than the replay). */
GUEST_EXPORT CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                         CUgraph child) {
  call_graph_exec_child_req_t q = {.exec = H(e), .node = H(node), .graph = H(child)};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!e || !node || !child)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = child_staged(child)) != CUDA_SUCCESS)
    return r;
  return guest__post_cu(CALL_OP_GRAPH_EXEC_CHILD, &q);
}

static CUresult exec_kernel(CUgraphExec e, CUgraphNode node, uint64_t h, const unsigned grid[3],
                            const unsigned block[3], unsigned shmem, void **params, void **extra) {
  call_graph_add_req_t k;
  call_graph_exec_kernel_req_t q;
  uint8_t small[1024], *body = NULL;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  memset(&k, 0, sizeof(k));
  r = kernel_fields(&k, h, grid, block, shmem, params, extra, small, sizeof(small), &body);
  if (r == CUDA_SUCCESS) {
    memset(&q, 0, sizeof(q));
    q.exec = H(e), q.node = H(node), q.func = h;
    memcpy(q.grid, k.grid, sizeof(q.grid));
    memcpy(q.block, k.block, sizeof(q.block));
    q.shmem = k.shmem;
    q.argbytes = k.argbytes;
    q.args = k.args;
    r = guest__post_cu(CALL_OP_GRAPH_EXEC_KERNEL, &q);
  }
  free(body);
  return r;
}

GUEST_EXPORT CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec e, CUgraphNode node,
                                                        const CUDA_KERNEL_NODE_PARAMS *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  return exec_kernel(e, node, KERNEL_NODE(p, FUNC_OR_KERN(p)));
}

GUEST_EXPORT CUresult cuGraphExecKernelNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                     const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  return exec_kernel(e, node, KERNEL_NODE(p, H(p->func)));
}

/* ---- graph memory of the device (GRAPH_MEM) ----
 * tallyd's answer for its one shared context: the amounts count every
 * tenant's graphs, and a trim releases what any of them holds unused. */

static CUresult graph_mem(CUdevice dev, uint32_t what, CUgraphMem_attribute attr, void *value) {
  call_graph_mem_req_t q = {.what = what, .attr = (uint32_t)attr};
  call_graph_mem_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (dev < 0 || dev >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  if (what && !value)
    return CUDA_ERROR_INVALID_VALUE;
  if (what == 2)
    memcpy(&q.value, value, sizeof(q.value));
  r = guest__rpc(CALL_OP_GRAPH_MEM, 0, &q, &a);
  if (r == CUDA_SUCCESS && what == 1)
    memcpy(value, &a.value, sizeof(a.value));
  return r;
}

GUEST_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev) {
  return graph_mem(dev, 0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, NULL);
}

GUEST_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr,
                                                   void *value) {
  return graph_mem(dev, 1, attr, value);
}

GUEST_EXPORT CUresult cuDeviceSetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr,
                                                   void *value) {
  return graph_mem(dev, 2, attr, value);
}

/* ---- a graph's nodes given new parameters (GRAPH_SET) ---- */

/* node (of one of this tenant's graphs) takes a's kind fields: a round trip,
 * as graph construction is. */
static CUresult set_node(CUgraphNode node, const call_graph_add_req_t *a) {
  call_graph_set_req_t q;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!node)
    return CUDA_ERROR_INVALID_VALUE;
  memset(&q, 0, sizeof(q));
  q.node = H(node), q.kind = a->kind, q.handle = a->handle, q.dst = a->dst, q.src = a->src;
  q.pitch = a->pitch, q.width = a->width, q.height = a->height, q.value = a->value;
  q.elem = a->elem, q.shmem = a->shmem, q.argbytes = a->argbytes, q.args = a->args;
  memcpy(q.grid, a->grid, sizeof(q.grid));
  memcpy(q.block, a->block, sizeof(q.block));
  return guest__rpc(CALL_OP_GRAPH_SET, 0, &q, NULL);
}

static CUresult set_kernel(CUgraphNode node, uint64_t h, const unsigned grid[3],
                           const unsigned block[3], unsigned shmem, void **params, void **extra) {
  call_graph_add_req_t a;
  uint8_t small[1024], *body = NULL;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  memset(&a, 0, sizeof(a));
  r = kernel_fields(&a, h, grid, block, shmem, params, extra, small, sizeof(small), &body);
  if (r == CUDA_SUCCESS)
    r = set_node(node, &a);
  free(body);
  return r;
}

/* The node's graph must be known here for a stage (it was added here or
 * listed); execs made before keep theirs. */
static CUresult set_memcpy(CUgraphNode node, const CUDA_MEMCPY3D *c) {
  static int logged;
  call_graph_add_req_t a;
  stage_req_t st;
  uint64_t dev, g = nt_graph(H(node));
  CUresult r;
  memset(&a, 0, sizeof(a));
  if ((r = memcpy_fields(&a, c, &st, "cuGraphMemcpyNodeSetParams", &logged)) != CUDA_SUCCESS)
    return r;
  if (st.dir >= 0 && !g)
    return guest__unsupported("cuGraphMemcpyNodeSetParams (host memory, of a node whose graph "
                              "this process does not know)", &logged);
  if ((r = stage_fields(&a, &st, &dev)) != CUDA_SUCCESS)
    return r;
  r = set_node(node, &a);
  return g ? stage_done(r, g, H(node), &st, dev) : r;
}

static CUresult set_memset(CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p) {
  call_graph_add_req_t a;
  CUresult r;
  memset(&a, 0, sizeof(a));
  r = memset_fields(&a, p);
  return r == CUDA_SUCCESS ? set_node(node, &a) : r;
}

static CUresult set_event(CUgraphNode node, uint32_t kind, CUevent ev) {
  call_graph_add_req_t a;
  memset(&a, 0, sizeof(a));
  a.kind = kind;
  a.handle = H(ev);
  return ev ? set_node(node, &a) : CUDA_ERROR_INVALID_VALUE;
}

/* A copy, memset, event or host node of an exec from a's fields
 * (GRAPH_EXEC_NODE): posted as the other updates are, or with wait a round
 * trip (its refusal then comes back here). */
static CUresult exec_node(CUgraphExec e, CUgraphNode node, const call_graph_add_req_t *a,
                          bool wait) {
  call_graph_exec_node_req_t q = {.exec = H(e), .node = H(node), .kind = a->kind,
                                  .elem = a->elem, .handle = a->handle, .dst = a->dst,
                                  .src = a->src, .pitch = a->pitch, .width = a->width,
                                  .height = a->height, .value = a->value};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!e || !node)
    return CUDA_ERROR_INVALID_VALUE;
  return wait ? guest__rpc(CALL_OP_GRAPH_EXEC_NODE, 0, &q, NULL)
              : guest__post_cu(CALL_OP_GRAPH_EXEC_NODE, &q);
}

/* A host node's new function: a new entry kept here; the old one goes when
 * tallyd says nothing holds it. */
static CUresult set_host(CUgraphNode node, CUgraphExec e, const CUDA_HOST_NODE_PARAMS *p) {
  call_graph_add_req_t a;
  CUresult r = host_fields(&a, p);
  if (r != CUDA_SUCCESS)
    return r;
  /* In an exec, a round trip, so a refusal frees the entry. */
  r = e ? exec_node(e, node, &a, true) : set_node(node, &a);
  if (r != CUDA_SUCCESS)
    guest__hostfn_forget(a.handle);
  return r;
}

GUEST_EXPORT CUresult cuGraphHostNodeSetParams(CUgraphNode node, const CUDA_HOST_NODE_PARAMS *p) {
  return set_host(node, NULL, p);
}

GUEST_EXPORT CUresult cuGraphExecHostNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                   const CUDA_HOST_NODE_PARAMS *p) {
  return e ? set_host(node, e, p) : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode node,
                                                    const CUDA_KERNEL_NODE_PARAMS *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  return set_kernel(node, KERNEL_NODE(p, FUNC_OR_KERN(p)));
}

GUEST_EXPORT CUresult cuGraphKernelNodeSetParams(CUgraphNode node,
                                                 const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  return set_kernel(node, KERNEL_NODE(p, H(p->func)));
}

GUEST_EXPORT CUresult cuGraphMemcpyNodeSetParams(CUgraphNode node, const CUDA_MEMCPY3D *c) {
  return set_memcpy(node, c);
}

GUEST_EXPORT CUresult cuGraphMemsetNodeSetParams(CUgraphNode node,
                                                 const CUDA_MEMSET_NODE_PARAMS *p) {
  return set_memset(node, p);
}

GUEST_EXPORT CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode node, CUevent ev) {
  return set_event(node, CALL_GNODE_EVENT_REC, ev);
}

GUEST_EXPORT CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode node, CUevent ev) {
  return set_event(node, CALL_GNODE_EVENT_WAIT, ev);
}

/* ---- a node of an exec enabled or not (GRAPH_ENABLE) ---- */

/* Posted, as the exec's other updates (XLA turns its barrier nodes off
 * this way); an error comes back from the next synchronising call. */
GUEST_EXPORT CUresult cuGraphNodeSetEnabled(CUgraphExec e, CUgraphNode node, unsigned int on) {
  call_graph_enable_req_t q = {.exec = H(e), .node = H(node), .set = 1, .enabled = on != 0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  return e && node ? guest__post_cu(CALL_OP_GRAPH_ENABLE, &q) : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuGraphNodeGetEnabled(CUgraphExec e, CUgraphNode node, unsigned int *on) {
  call_graph_enable_req_t q = {.exec = H(e), .node = H(node)};
  call_graph_enable_rep_t a = {0};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!e || !node || !on)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__rpc(CALL_OP_GRAPH_ENABLE, 0, &q, &a)) == CUDA_SUCCESS)
    *on = a.enabled;
  return r;
}

/* ---- a kernel node's attributes (GRAPH_ATTR) ---- */

static CUresult node_attr(CUgraphNode node, CUgraphNode src, uint32_t what,
                          CUkernelNodeAttrID attr, CUkernelNodeAttrValue *value) {
  call_graph_attr_req_t q = {.node = H(node), .src = H(src), .what = what, .attr = (uint32_t)attr};
  call_graph_attr_rep_t a;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!node || (what < 2 && !value) || (what == 2 && !src))
    return CUDA_ERROR_INVALID_VALUE;
  _Static_assert(sizeof(*value) == sizeof(q.value), "an attribute value travels whole");
  if (what == 1)
    memcpy(q.value, value, sizeof(q.value));
  if ((r = guest__rpc(CALL_OP_GRAPH_ATTR, 0, &q, &a)) == CUDA_SUCCESS && what == 0)
    memcpy(value, a.value, sizeof(a.value));
  return r;
}

GUEST_EXPORT CUresult cuGraphKernelNodeGetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                                    CUkernelNodeAttrValue *value) {
  return node_attr(node, NULL, 0, attr, value);
}

/* The driver may write into the value it was given (a device-updatable
 * node's handle); the answer is copied back into the caller's, as there. */
GUEST_EXPORT CUresult cuGraphKernelNodeSetAttribute(CUgraphNode node, CUkernelNodeAttrID attr,
                                                    const CUkernelNodeAttrValue *value) {
  call_graph_attr_req_t q = {.node = H(node), .what = 1, .attr = (uint32_t)attr};
  call_graph_attr_rep_t a;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!node || !value)
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(q.value, value, sizeof(q.value));
  if ((r = guest__rpc(CALL_OP_GRAPH_ATTR, 0, &q, &a)) == CUDA_SUCCESS &&
      memcmp(a.value, value, sizeof(a.value)) != 0)
    memcpy((void *)(uintptr_t)value, a.value, sizeof(a.value));
  return r;
}

GUEST_EXPORT CUresult cuGraphKernelNodeCopyAttributes(CUgraphNode dst, CUgraphNode src) {
  return node_attr(dst, src, 2, (CUkernelNodeAttrID)0, NULL);
}

/* ---- getters: what tallyd's driver says (GRAPH_NODE) ---- */

/* node's fields as tallyd answers them for a node of type want (kind
 * their CALL_GNODE_*), or CUDA_ERROR_INVALID_VALUE (a node of another type,
 * as the driver answers); one tallyd did not describe is NOT_SUPPORTED,
 * logged once. */
static CUresult node_of_kind(CUgraphNode node, CUgraphNodeType want, uint32_t kind,
                             call_graph_node_rep_t *a, void **rep) {
  static int logged;
  CUresult r = node_info(H(node), a, rep);
  if (r != CUDA_SUCCESS)
    return r;
  if (a->type != (uint32_t)want)
    return CUDA_ERROR_INVALID_VALUE;
  return a->kind == kind ? CUDA_SUCCESS
                         : guest__unsupported("a getter of a graph node's parameters", &logged);
}

/* node_of_kind for a getter of fixed fields into out (NULL: refused as the
 * driver refuses it); a->args is not kept. */
static CUresult node_fields(CUgraphNode node, CUgraphNodeType want, uint32_t kind, const void *out,
                            call_graph_node_rep_t *a) {
  void *rep = NULL;
  CUresult r = out ? node_of_kind(node, want, kind, a, &rep) : CUDA_ERROR_INVALID_VALUE;
  free(rep);
  a->args = (call_view_t){NULL, 0};
  return r;
}

/* A kernel node's parameters (v2 with kern and ctx when k2 is not NULL):
 * kernelParams point into storage kept with the node until the next query
 * or its graph's destruction; for a function whose parameters this
 * process does not know, extra names the packed buffer instead. */
static CUresult get_kernel(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1 *k1,
                           CUDA_KERNEL_NODE_PARAMS *k2) {
  call_graph_node_rep_t a;
  const guest_func_t *f;
  void *rep = NULL, **ptrs = NULL, **extra = NULL, *fn;
  size_t n = 0, *size;
  uint8_t *bytes, *store;
  CUresult r = node_of_kind(node, CU_GRAPH_NODE_TYPE_KERNEL, CALL_GNODE_KERNEL, &a, &rep);
  if (r != CUDA_SUCCESS) {
    free(rep);
    return r;
  }
  f = guest__func_find(a.handle);
  n = f && f->argbytes <= a.args.len ? f->nparams : 0;
  /* [pointers or extra][size_t][bytes] */
  if (!(store = nt_store(H(node), (n ? n : 5) * sizeof(void *) + sizeof(size_t) + a.args.len))) {
    free(rep);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  size = (size_t *)(void *)(store + (n ? n : 5) * sizeof(void *));
  bytes = (uint8_t *)(size + 1);
  *size = a.args.len;
  memcpy(bytes, a.args.p, a.args.len);
  if (n) {
    ptrs = (void **)(void *)store;
    for (size_t i = 0; i < n; i++)
      ptrs[i] = bytes + f->off[i];
  } else if (a.args.len) {
    extra = (void **)(void *)store;
    extra[0] = CU_LAUNCH_PARAM_BUFFER_POINTER, extra[1] = bytes;
    extra[2] = CU_LAUNCH_PARAM_BUFFER_SIZE, extra[3] = size, extra[4] = CU_LAUNCH_PARAM_END;
  }
  fn = (void *)(uintptr_t)a.handle;
#define FILL(k)                                                                                    \
  ((k)->gridDimX = a.grid[0], (k)->gridDimY = a.grid[1], (k)->gridDimZ = a.grid[2],                \
   (k)->blockDimX = a.block[0], (k)->blockDimY = a.block[1], (k)->blockDimZ = a.block[2],          \
   (k)->sharedMemBytes = a.shmem, (k)->kernelParams = ptrs, (k)->extra = extra)
  if (k2) {
    memset(k2, 0, sizeof(*k2));
    FILL(k2);
    if (a.fkind == 1)
      k2->kern = (CUkernel)fn, (void)cuCtxGetCurrent(&k2->ctx);
    else
      k2->func = (CUfunction)fn;
  } else {
    memset(k1, 0, sizeof(*k1));
    FILL(k1);
    k1->func = (CUfunction)fn;
  }
#undef FILL
  free(rep);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS *p) {
  return p ? get_kernel(node, NULL, p) : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1 *p) {
  return p ? get_kernel(node, p, NULL) : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuGraphMemsetNodeGetParams(CUgraphNode node, CUDA_MEMSET_NODE_PARAMS *p) {
  call_graph_node_rep_t a;
  CUresult r = node_fields(node, CU_GRAPH_NODE_TYPE_MEMSET, CALL_GNODE_MEMSET, p, &a);
  if (r == CUDA_SUCCESS)
    *p = (CUDA_MEMSET_NODE_PARAMS){.dst = a.dst, .pitch = a.pitch, .value = a.value,
                                   .elementSize = a.elem, .width = a.width, .height = a.height};
  return r;
}

static CUresult get_event(CUgraphNode node, uint32_t kind, CUevent *ev) {
  CUgraphNodeType t = kind == CALL_GNODE_EVENT_REC ? CU_GRAPH_NODE_TYPE_EVENT_RECORD
                                                   : CU_GRAPH_NODE_TYPE_WAIT_EVENT;
  call_graph_node_rep_t a;
  CUresult r = node_fields(node, t, kind, ev, &a);
  if (r == CUDA_SUCCESS)
    *ev = (CUevent)(uintptr_t)a.handle;
  return r;
}

GUEST_EXPORT CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode node, CUevent *ev) {
  return get_event(node, CALL_GNODE_EVENT_REC, ev);
}

GUEST_EXPORT CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode node, CUevent *ev) {
  return get_event(node, CALL_GNODE_EVENT_WAIT, ev);
}

/* A 1-D copy node's copy; a staged side (gstage.c) is the host memory the
 * application named, as the driver would answer. */
GUEST_EXPORT CUresult cuGraphMemcpyNodeGetParams(CUgraphNode node, CUDA_MEMCPY3D *p) {
  call_graph_node_rep_t a;
  void *host = NULL;
  int dir;
  CUresult r = node_fields(node, CU_GRAPH_NODE_TYPE_MEMCPY, CALL_GNODE_MEMCPY, p, &a);
  if (r != CUDA_SUCCESS)
    return r;
  memset(p, 0, sizeof(*p));
  p->WidthInBytes = a.width, p->Height = 1, p->Depth = 1;
  if (guest__gstage_host(nt_graph(H(node)), H(node), &host, &dir)) {
    if (dir == GUEST_STAGE_UP)
      a.src = (uint64_t)(uintptr_t)host, a.elem |= 2u;
    else
      a.dst = (uint64_t)(uintptr_t)host, a.elem |= 1u;
  }
  if (a.elem & 1u)
    p->dstMemoryType = CU_MEMORYTYPE_HOST, p->dstHost = (void *)(uintptr_t)a.dst;
  else
    p->dstMemoryType = CU_MEMORYTYPE_DEVICE, p->dstDevice = a.dst;
  if (a.elem & 2u)
    p->srcMemoryType = CU_MEMORYTYPE_HOST, p->srcHost = (const void *)(uintptr_t)a.src;
  else
    p->srcMemoryType = CU_MEMORYTYPE_DEVICE, p->srcDevice = a.src;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuGraphMemAllocNodeGetParams(CUgraphNode node,
                                                   CUDA_MEM_ALLOC_NODE_PARAMS *p) {
  call_graph_node_rep_t a;
  CUresult r = node_fields(node, CU_GRAPH_NODE_TYPE_MEM_ALLOC, CALL_GNODE_MEM_ALLOC, p, &a);
  if (r != CUDA_SUCCESS)
    return r;
  memset(p, 0, sizeof(*p));
  p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p->bytesize = a.width;
  p->dptr = a.dst;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuGraphMemFreeNodeGetParams(CUgraphNode node, CUdeviceptr *dptr) {
  call_graph_node_rep_t a;
  CUresult r = node_fields(node, CU_GRAPH_NODE_TYPE_MEM_FREE, CALL_GNODE_MEM_FREE, dptr, &a);
  if (r == CUDA_SUCCESS)
    *dptr = a.dst;
  return r;
}

GUEST_EXPORT CUresult cuGraphHostNodeGetParams(CUgraphNode node, CUDA_HOST_NODE_PARAMS *p) {
  call_graph_node_rep_t a;
  void *fn = NULL, *data = NULL;
  CUresult r = node_fields(node, CU_GRAPH_NODE_TYPE_HOST, CALL_GNODE_HOST, p, &a);
  if (r != CUDA_SUCCESS)
    return r;
  if (!guest__hostfn_params(a.handle, &fn, &data))
    return CUDA_ERROR_INVALID_VALUE;
  p->fn = (CUhostFn)fn;
  p->userData = data;
  return CUDA_SUCCESS;
}

/* cuGraphNodeSetParams: the kinds the setters above take, from the tagged
 * union; the others answer NOT_SUPPORTED naming the type once. */
GUEST_EXPORT CUresult cuGraphNodeSetParams(CUgraphNode node, CUgraphNodeParams *p) {
  static int logged[TYPE_LOGS];
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL:
    return set_kernel(node, KERNEL_NODE(&p->kernel, FUNC_OR_KERN(&p->kernel)));
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    return set_memcpy(node, &p->memcpy.copyParams);
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS v1 = memset_v1(&p->memset);
    return set_memset(node, &v1);
  }
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    return set_event(node, CALL_GNODE_EVENT_REC, p->eventRecord.event);
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    return set_event(node, CALL_GNODE_EVENT_WAIT, p->eventWait.event);
  case CU_GRAPH_NODE_TYPE_HOST: {
    CUDA_HOST_NODE_PARAMS h = {.fn = p->host.fn, .userData = p->host.userData};
    return set_host(node, NULL, &h);
  }
  default:
    return type_unsupported("cuGraphNodeSetParams", p->type, logged);
  }
}

/* With a stage, a round trip (the exec's entry is kept only if tallyd
 * took the update); else posted. */
static CUresult exec_memcpy(CUgraphExec e, CUgraphNode node, const CUDA_MEMCPY3D *c) {
  static int logged;
  call_graph_add_req_t a;
  stage_req_t st;
  uint64_t dev;
  CUresult r;
  memset(&a, 0, sizeof(a));
  if ((r = memcpy_fields(&a, c, &st, "cuGraphExecMemcpyNodeSetParams", &logged)) !=
          CUDA_SUCCESS ||
      (r = stage_fields(&a, &st, &dev)) != CUDA_SUCCESS)
    return r;
  r = exec_node(e, node, &a, dev != 0);
  return stage_done(r, H(e), H(node), &st, dev);
}

static CUresult exec_memset(CUgraphExec e, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p) {
  call_graph_add_req_t a;
  CUresult r;
  memset(&a, 0, sizeof(a));
  r = memset_fields(&a, p);
  return r == CUDA_SUCCESS ? exec_node(e, node, &a, false) : r;
}

static CUresult exec_event(CUgraphExec e, CUgraphNode node, uint32_t kind, CUevent ev) {
  call_graph_add_req_t a;
  memset(&a, 0, sizeof(a));
  a.kind = kind;
  a.handle = H(ev);
  return ev ? exec_node(e, node, &a, false) : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                     const CUDA_MEMCPY3D *c, CUcontext ctx) {
  (void)ctx; /* every context of the tenant is the device's one context */
  return exec_memcpy(e, node, c);
}

GUEST_EXPORT CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec e, CUgraphNode node,
                                                     const CUDA_MEMSET_NODE_PARAMS *p,
                                                     CUcontext ctx) {
  (void)ctx;
  return exec_memset(e, node, p);
}

GUEST_EXPORT CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec e, CUgraphNode node,
                                                         CUevent ev) {
  return exec_event(e, node, CALL_GNODE_EVENT_REC, ev);
}

GUEST_EXPORT CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec e, CUgraphNode node,
                                                       CUevent ev) {
  return exec_event(e, node, CALL_GNODE_EVENT_WAIT, ev);
}

/* cuGraphExecNodeSetParams: the node kinds the exec setters above take, from
 * the tagged union; the others answer NOT_SUPPORTED naming the type once. */
GUEST_EXPORT CUresult cuGraphExecNodeSetParams(CUgraphExec e, CUgraphNode node,
                                               CUgraphNodeParams *p) {
  static int logged[TYPE_LOGS];
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  switch (p->type) {
  case CU_GRAPH_NODE_TYPE_KERNEL:
    return exec_kernel(e, node, KERNEL_NODE(&p->kernel, FUNC_OR_KERN(&p->kernel)));
  case CU_GRAPH_NODE_TYPE_MEMCPY:
    return exec_memcpy(e, node, &p->memcpy.copyParams);
  case CU_GRAPH_NODE_TYPE_MEMSET: {
    CUDA_MEMSET_NODE_PARAMS v1 = memset_v1(&p->memset);
    return exec_memset(e, node, &v1);
  }
  case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    return exec_event(e, node, CALL_GNODE_EVENT_REC, p->eventRecord.event);
  case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    return exec_event(e, node, CALL_GNODE_EVENT_WAIT, p->eventWait.event);
  case CU_GRAPH_NODE_TYPE_GRAPH:
    return cuGraphExecChildGraphNodeSetParams(e, node, p->graph.graph);
  case CU_GRAPH_NODE_TYPE_HOST: {
    CUDA_HOST_NODE_PARAMS h = {.fn = p->host.fn, .userData = p->host.userData};
    return cuGraphExecHostNodeSetParams(e, node, &h);
  }
  default:
    return type_unsupported("cuGraphExecNodeSetParams", p->type, logged);
  }
}
