/* exec-graph.c: a tenant's stream captures and CUDA graphs (cuStreamBeginCapture,
 * cuGraphCreate, cuGraphAdd*Node, cuGraphInstantiate, cuGraphLaunch, ...).
 *
 * tallyd builds real graphs: a capture runs on the tenant's real stream,
 * so every request captured is recorded by the driver itself, and a replay
 * is one GRAPH_LAUNCH request.  Graphs, their nodes and instantiated
 * graphs are the tenant's objects: every handle a request names is looked
 * up in the tenant's tables first (docs/decisions.md, D2) and they are
 * destroyed with the tenant.
 *
 * Capture and the scheduler (docs/scheduler.md): before a capture begins,
 * the stream is fenced and every launch of the tenant the scheduler holds
 * is issued, so nothing the scheduler does later lands on the capturing
 * stream (it never touches a latency-critical stream; that stream's worker
 * records its completion events at the fence before any other work, so
 * before a capture begins on it or it joins one through a wait); while a
 * stream takes part in a capture (the driver's answer: streams also join
 * through events), launches on it go straight onto it.  A graph launch is
 * one unit for the policy: held and released as one launch of a
 * best-effort tenant, made at once for the latency-critical one.
 *
 * Capture modes: tallyd begins every capture in relaxed mode, whatever the
 * tenant asked.  The worker that runs the tenant's requests also makes
 * calls of its own while a capture is open (pinned-memory registration,
 * module loads, the scheduler's bookkeeping); under a thread-local capture
 * one of them invalidated PyTorch's capture of BERT on the H200, which the
 * same capture in relaxed mode survives.  The cost: a tenant's own
 * potentially unsafe call during a global or thread-local capture (an
 * allocation, say) succeeds here where the driver would refuse it; what
 * is illegal on the capturing stream itself (a synchronisation, host
 * bytes) still fails and invalidates the capture.  The guest's
 * cuThreadExchangeStreamCaptureMode still reaches the worker (CAPTURE_MODE).
 *
 * Host functions (cuGraphAddHostNode, cuLaunchHostFunc during a capture):
 * the function lives in the guest, so each is a driver host node followed by
 * a wait on the tenant's host-function gate (hostfn.c, "Graphs"), the wait
 * being the node the tenant is told of.  Before every launch of an exec
 * holding any, each is armed with a slot of its own (charged to the tenant's
 * host-function quota) and the exec's two nodes are pointed at it; such an
 * exec is launched at once, never held by the scheduler (its nodes could not
 * be re-armed for a second launch held behind the first), and is refused on
 * a capturing stream, in a child graph node and by cuGraphExecUpdate.  The
 * guest keeps the function until no graph or exec holds its seq.
 *
 * The graph of a capture open on one of the tenant's streams takes new
 * nodes too (open_capture_graph), and cuStreamUpdateCaptureDependencies
 * makes later captured work depend on them (CAPTURE_DEPS): NCCL hangs its
 * host nodes on a captured collective so.
 *
 * Memory nodes (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode): an
 * allocation node's address joins the tenant's ranges and memory charge as
 * a stream-ordered allocation (RANGE_ASYNC), so the graph's other nodes and
 * the tenant's copies may name it, until a free node (or a
 * cuMemFreeAsync) takes it out (add_mem).
 *
 * Invariants: t->gnodes maps every node the tenant was told of to a graph
 * in t->graphs; t->captures holds the stream of each capture begun here
 * and not yet ended; every t->ghosts owner is a graph in t->graphs, an exec
 * in t->gexecs, or the graph of a capture still open.
 */
#include "hostd/guard.h"
#include "hostd/tenant-int.h"

#include <stdlib.h>
#include <string.h>

bool hostd__stream_capturing(hostd_tenant_t *t, const tstream_t *ts) {
  int st = CU_STREAM_CAPTURE_STATUS_NONE;
  uint64_t id, g;
  size_t n;
  if (!t->captures.len)
    return false;
  return hostd__gpu.capture_info(ts->handle, &st, &id, &g, NULL, 0, &n) == CUDA_SUCCESS &&
         st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* ---- host functions of graphs and execs ---- */

static bool ghosts_of(const hostd_tenant_t *t, uint64_t owner) {
  for (size_t i = 0; i < t->nghosts; i++)
    if (t->ghosts[i].owner == owner)
      return true;
  return false;
}

static CUresult ghost_add(hostd_tenant_t *t, uint64_t owner, uint64_t rnode, uint64_t wnode,
                          uint64_t seq) {
  if (t->nghosts == t->capghosts) {
    size_t cap = t->capghosts ? t->capghosts * 2 : 8;
    struct ghost *n = realloc(t->ghosts, cap * sizeof(*n));
    if (!n)
      return CUDA_ERROR_OUT_OF_MEMORY;
    t->ghosts = n, t->capghosts = cap;
  }
  t->ghosts[t->nghosts++] = (struct ghost){owner, rnode, wnode, seq};
  return CUDA_SUCCESS;
}

/* The guest may forget seq once no graph or exec holds it. */
static void seq_release(hostd_tenant_t *t, uint64_t seq) {
  for (size_t k = 0; k < t->nghosts; k++)
    if (t->ghosts[k].seq == seq)
      return;
  if (t->hf)
    hostd__hostfn_drop(t->hf, seq);
}

/* owner (a graph or exec) is gone: its host functions go. */
static void ghosts_forget(hostd_tenant_t *t, uint64_t owner) {
  for (size_t i = 0; i < t->nghosts;) {
    uint64_t seq = t->ghosts[i].seq;
    if (t->ghosts[i].owner != owner) {
      i++;
      continue;
    }
    t->ghosts[i] = t->ghosts[--t->nghosts];
    seq_release(t, seq);
  }
}

/* The index of owner's host function at node (the wait named to the tenant,
 * or its host node), or -1.  An exec's copies keep its graph's node handles,
 * so the owner tells them apart. */
static ssize_t ghost_at(const hostd_tenant_t *t, uint64_t owner, uint64_t node) {
  for (size_t i = 0; i < t->nghosts; i++) {
    const struct ghost *gh = &t->ghosts[i];
    if (gh->owner == owner && (gh->wnode == node || gh->rnode == node))
      return (ssize_t)i;
  }
  return -1;
}

/* cuGraphHostNodeSetParams / cuGraphExecHostNodeSetParams: owner's host
 * function at node becomes guest function seq. */
static CUresult ghost_rebind(hostd_tenant_t *t, uint64_t owner, uint64_t node, uint64_t seq) {
  ssize_t i;
  uint64_t old;
  if (seq == 0 || (seq & (HOSTD_HOSTFN_KEEP | HOSTD_HOSTFN_DROP)))
    return CUDA_ERROR_INVALID_VALUE;
  if ((i = ghost_at(t, owner, node)) < 0)
    return CUDA_ERROR_INVALID_VALUE; /* not a host node of owner */
  old = t->ghosts[i].seq;
  t->ghosts[i].seq = seq;
  if (old != seq)
    seq_release(t, old);
  return CUDA_SUCCESS;
}

/* The exec's copies of graph g's host functions. */
static CUresult ghosts_copy(hostd_tenant_t *t, uint64_t g, uint64_t exec) {
  size_t n = t->nghosts;
  CUresult r = CUDA_SUCCESS;
  for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++)
    if (t->ghosts[i].owner == g)
      r = ghost_add(t, exec, t->ghosts[i].rnode, t->ghosts[i].wnode, t->ghosts[i].seq);
  return r;
}

/* Arms every host function of exec for one launch; on failure, disarms
 * those it armed.  *narmed: how many (to disarm after a failed launch). */
static CUresult ghosts_arm(hostd_tenant_t *t, uint64_t exec, hostd_hostfn_armed_t *armed,
                           size_t *narmed) {
  CUresult r = CUDA_SUCCESS;
  *narmed = 0;
  for (size_t i = 0; i < t->nghosts && r == CUDA_SUCCESS; i++) {
    const struct ghost *gh = &t->ghosts[i];
    hostd_hostfn_armed_t *a = &armed[*narmed];
    if (gh->owner != exec)
      continue;
    if ((r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_HOSTFNS, 1)) != CUDA_SUCCESS)
      break;
    if ((r = (CUresult)hostd__hostfn_arm(t->hf, gh->seq, hostd__quota_self, a)) != CUDA_SUCCESS) {
      hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_HOSTFNS, 1);
      break;
    }
    (*narmed)++;
    r = hostd__gpu.graph_exec_host(exec, gh->rnode, gh->wnode, a->gate, a->slot, a->value,
                                   a->cb, a->arg);
  }
  return r;
}

static void ghosts_disarm(hostd_tenant_t *t, const hostd_hostfn_armed_t *armed, size_t n) {
  for (size_t i = 0; i < n; i++) {
    hostd__hostfn_disarm(t->hf, &armed[i]);
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_HOSTFNS, 1);
  }
}

static size_t ghosts_count(const hostd_tenant_t *t, uint64_t owner) {
  size_t n = 0;
  for (size_t i = 0; i < t->nghosts; i++)
    n += t->ghosts[i].owner == owner;
  return n;
}

CUresult hostd__capture_hostfn(hostd_tenant_t *t, tstream_t *ts, uint64_t seq) {
  uint64_t id = 0, g = 0, rn = 0, wn = 0;
  size_t n = 0;
  int st = CU_STREAM_CAPTURE_STATUS_NONE, gr;
  void *gate;
  CUresult r;
  if (!t->hf)
    return CUDA_ERROR_NOT_SUPPORTED; /* driven without server.c (tests) */
  if (!(gate = hostd__hostfn_gate(t->hf, &gr)))
    return (CUresult)gr;
  if ((r = hostd__gpu.capture_info(ts->handle, &st, &id, &g, NULL, 0, &n)) != CUDA_SUCCESS)
    return r;
  if (st != CU_STREAM_CAPTURE_STATUS_ACTIVE || !g)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if ((r = hostd__gpu.capture_host(ts->handle, gate, &rn, &wn)) != CUDA_SUCCESS)
    return r;
  return ghost_add(t, g, rn, wn, seq);
}

/* ---- capture ---- */

/* n node handles from a tail (maybe unaligned) into out, each a node of g. */
static bool nodes_of(const hostd_tenant_t *t, uint64_t g, call_view_t v, uint64_t *out) {
  uint64_t owner;
  for (size_t i = 0; i < v.len / 8; i++) {
    memcpy(&out[i], v.p + i * 8, 8);
    if (!u64map_get(&t->gnodes, out[i], &owner) || owner != g)
      return false;
  }
  return true;
}

/* A capture into a new graph, or (q->graph != 0) into a graph of the
 * tenant after q->ndeps nodes of it. */
CUresult hostd__exec_capture_begin(hostd_tenant_t *t, wire_buf_t *out,
                                   const call_capture_begin_req_t *q) {
  uint64_t deps[CALL_GRAPH_DEPS_MAX];
  tstream_t *ts;
  CUresult r;
  (void)out;
  if (q->mode > CU_STREAM_CAPTURE_MODE_RELAXED || (q->ndeps && !q->graph) ||
      (q->graph && !u64map_get(&t->graphs, q->graph, NULL)) ||
      !nodes_of(t, q->graph, q->deps, deps))
    return CUDA_ERROR_INVALID_VALUE;
  if (q->stream == 0 || q->stream == STREAM_LEGACY_ID)
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
  if ((r = hostd__stream_lookup_enter(t, q->stream, &ts)) != CUDA_SUCCESS ||
      (r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  r = hostd__gpu.capture_begin(ts->handle, CU_STREAM_CAPTURE_MODE_RELAXED, q->graph, deps,
                               q->ndeps);
  if (r == CUDA_SUCCESS && u64map_put(&t->captures, ts->handle, 1) != 0) {
    uint64_t g = 0;
    if (hostd__gpu.capture_end(ts->handle, &g) == CUDA_SUCCESS && g && g != q->graph)
      (void)hostd__gpu.graph_del(g);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  return r;
}

CUresult hostd__exec_capture_end(hostd_tenant_t *t, wire_buf_t *out,
                                 const call_capture_end_req_t *q) {
  uint64_t g = 0, cg = 0;
  tstream_t *ts = hostd__stream_of(t, q->stream, &(CUresult){0});
  CUresult r;
  if (!ts)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!u64map_get(&t->captures, ts->handle, NULL))
    return CUDA_ERROR_ILLEGAL_STATE; /* no capture began on it */
  if (t->nghosts) { /* the capture's graph, which holds its host functions */
    int st = CU_STREAM_CAPTURE_STATUS_NONE;
    size_t n = 0;
    uint64_t id = 0;
    if (hostd__gpu.capture_info(ts->handle, &st, &id, &cg, NULL, 0, &n) != CUDA_SUCCESS)
      cg = 0;
  }
  r = hostd__gpu.capture_end(ts->handle, &g);
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    return r; /* the capture goes on (a wrong thread, an unjoined fork) */
  u64map_del(&t->captures, ts->handle);
  if (cg && cg != g && !u64map_get(&t->graphs, cg, NULL))
    ghosts_forget(t, cg); /* the capture failed: its graph is gone */
  if (g && u64map_put(&t->graphs, g, 1) != 0) {
    (void)hostd__gpu.graph_del(g);
    ghosts_forget(t, g);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  call_capture_end_rep_t rep = {.graph = g};
  (void)call_capture_end_rep_put(&rep, out);
  return r;
}

/* The capture's current dependencies become nodes the tenant may name. */
CUresult hostd__exec_capture_info(hostd_tenant_t *t, wire_buf_t *out,
                                  const call_capture_info_req_t *q) {
  tstream_t *ts = hostd__stream_of(t, q->stream, &(CUresult){0});
  uint64_t *deps, id = 0, g = 0;
  size_t n = 0;
  int st = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult r;
  if (!ts)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!(deps = malloc(CALL_GRAPH_DEPS_MAX * sizeof(*deps))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  r = hostd__gpu.capture_info(ts->handle, &st, &id, &g, deps, CALL_GRAPH_DEPS_MAX, &n);
  if (n > CALL_GRAPH_DEPS_MAX)
    n = CALL_GRAPH_DEPS_MAX;
  for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
    if (u64map_put(&t->gnodes, deps[i], g) != 0)
      r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    call_capture_info_rep_t rep = {.status = (uint32_t)st, .ndeps = (uint32_t)n, .id = id,
                                   .graph = g, .deps = {(const uint8_t *)deps, n * 8}};
    if (call_capture_info_rep_put(&rep, out) != 0)
      r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  free(deps);
  return r;
}

/* The graph of the capture open on host stream s, or 0. */
static uint64_t capture_graph(uint64_t s) {
  int st = CU_STREAM_CAPTURE_STATUS_NONE;
  uint64_t id = 0, g = 0;
  size_t n = 0;
  return hostd__gpu.capture_info(s, &st, &id, &g, NULL, 0, &n) == CUDA_SUCCESS &&
                 st == CU_STREAM_CAPTURE_STATUS_ACTIVE
             ? g
             : 0;
}

/* Whether g is the graph of a capture open on one of the tenant's streams:
 * nodes may be added to it (NCCL adds its host nodes so). */
static bool open_capture_graph(const hostd_tenant_t *t, uint64_t g) {
  for (size_t i = 0; g && i < t->captures.cap; i++)
    if (t->captures.keys[i] && capture_graph(t->captures.keys[i]) == g)
      return true;
  return false;
}

CUresult hostd__exec_capture_deps(hostd_tenant_t *t, wire_buf_t *out,
                                  const call_capture_deps_req_t *q) {
  tstream_t *ts = hostd__stream_of(t, q->stream, &(CUresult){0});
  uint64_t *deps = NULL, g, ng = 0;
  CUresult r = CUDA_SUCCESS;
  (void)out;
  if (!ts)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!(g = capture_graph(ts->handle)))
    return CUDA_ERROR_ILLEGAL_STATE; /* the driver's answer on a stream not capturing */
  if (q->set > 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (q->ndeps && !(deps = malloc(q->ndeps * sizeof(*deps))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  for (uint32_t i = 0; i < q->ndeps && r == CUDA_SUCCESS; i++) {
    memcpy(&deps[i], q->deps.p + 8 * i, 8);
    if (!u64map_get(&t->gnodes, deps[i], &ng) || ng != g)
      r = CUDA_ERROR_INVALID_VALUE;
  }
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.capture_deps(ts->handle, deps, q->ndeps, (int)q->set);
  free(deps);
  return r;
}

CUresult hostd__exec_capture_mode(hostd_tenant_t *t, wire_buf_t *out,
                                  const call_capture_mode_req_t *q) {
  int mode = (int)q->mode;
  (void)t, (void)out;
  if (q->mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  return hostd__gpu.capture_mode(&mode);
}

/* ---- graphs and nodes ---- */

CUresult hostd__exec_graph_new(hostd_tenant_t *t, wire_buf_t *out, const call_graph_new_req_t *q) {
  uint64_t g = 0;
  CUresult r;
  if (q->flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.graph_new(&g)) != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->graphs, g, 1) != 0) {
    (void)hostd__gpu.graph_del(g);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  call_graph_new_rep_t rep = {.graph = g};
  (void)call_graph_new_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

/* Forgets the nodes of graph g. */
static void nodes_forget(hostd_tenant_t *t, uint64_t g) {
  for (size_t i = 0; i < t->gnodes.cap; i++)
    if (t->gnodes.keys[i] && t->gnodes.vals[i] == g) {
      u64map_del(&t->gnodes, t->gnodes.keys[i]);
      i--; /* backward shift may have moved another entry here */
    }
}

CUresult hostd__exec_graph_del(hostd_tenant_t *t, wire_buf_t *out, const call_graph_del_req_t *q) {
  CUresult r;
  (void)out;
  if (!u64map_get(&t->graphs, q->graph, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.graph_del(q->graph)) != CUDA_SUCCESS)
    return r;
  u64map_del(&t->graphs, q->graph);
  nodes_forget(t, q->graph);
  ghosts_forget(t, q->graph);
  return CUDA_SUCCESS;
}

/* The kind (0 module, 1 library) of a tenant function, -1 if not its own. */
static int fkind_of(const hostd_tenant_t *t, uint64_t f) {
  uint64_t mod, kind;
  if (!u64map_get(&t->funcs, f, &mod) || !u64map_get(&t->modules, mod, &kind))
    return -1;
  return kind == KIND_LIBRARY ? 1 : 0;
}

/* Checks a GRAPH_ADD's kind-specific fields against the tenant's tables
 * and fills the backend's node description (args: aligned storage). */
static CUresult node_of(const hostd_tenant_t *t, const call_graph_add_req_t *q, void *args,
                        hostd_gnode_t *n) {
  uint64_t span;
  memset(n, 0, sizeof(*n));
  n->kind = (int)q->kind;
  n->handle = q->handle;
  switch (q->kind) {
  case CALL_GNODE_EMPTY:
    return CUDA_SUCCESS;
  case CALL_GNODE_KERNEL:
    if ((n->fkind = fkind_of(t, q->handle)) < 0)
      return CUDA_ERROR_INVALID_HANDLE;
    memcpy(n->grid, q->grid, sizeof(n->grid));
    memcpy(n->block, q->block, sizeof(n->block));
    n->shmem = q->shmem;
    memcpy(args, q->args.p, q->args.len);
    n->args = args, n->argbytes = q->args.len;
    return CUDA_SUCCESS;
  case CALL_GNODE_MEMCPY:
    /* A side outside the tenant's device memory is its shared pinned memory
     * (hostd__owns_dev), which the copy names as host memory. */
    n->dst = q->dst, n->src = q->src, n->width = q->width;
    n->dst_host = !hostd__owns(t, q->dst, q->width);
    n->src_host = !hostd__owns(t, q->src, q->width);
    return q->width && hostd__owns_dev(t, q->dst, q->width) && hostd__owns_dev(t, q->src, q->width)
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CALL_GNODE_MEMSET:
    if ((q->elem != 1 && q->elem != 2 && q->elem != 4) || !q->height || !q->width ||
        q->width > (1ull << 40) || q->height > (1ull << 40) ||
        (q->height > 1 && q->pitch < q->width * q->elem) || q->pitch > (1ull << 40))
      return CUDA_ERROR_INVALID_VALUE;
    span = (q->height - 1) * q->pitch + q->width * q->elem;
    n->dst = q->dst, n->pitch = q->pitch, n->width = q->width, n->height = q->height;
    n->value = q->value, n->elem = q->elem;
    return hostd__owns_dev(t, q->dst, span) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CALL_GNODE_EVENT_REC:
  case CALL_GNODE_EVENT_WAIT:
    return u64map_get(&t->events, q->handle, NULL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  case CALL_GNODE_CHILD:
    return u64map_get(&t->graphs, q->handle, NULL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CALL_GNODE_HOST: /* GRAPH_ADD's own (add_host); no update takes one */
    return CUDA_ERROR_NOT_SUPPORTED;
  case CALL_GNODE_MEM_ALLOC: /* GRAPH_ADD's own (add_mem); no update takes one */
  case CALL_GNODE_MEM_FREE:
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

/* The stream-ordered allocation (the tenant's, or a graph's) at p, or -1. */
static ssize_t async_range(const hostd_tenant_t *t, uint64_t p) {
  size_t i = hostd__range_upper(t, p);
  return i > 0 && t->ranges[i - 1].base == p && t->ranges[i - 1].kind == RANGE_ASYNC
             ? (ssize_t)i - 1
             : -1;
}

/* GRAPH_ADD of a memory node.  An allocation node's memory is the graph's
 * but joins the tenant's ranges and device-memory charge as a
 * stream-ordered allocation does (exec-pool.c: from the allocation to the
 * free, captured or not), so nodes and copies may name it; a free node
 * takes it out. */
static CUresult add_mem(hostd_tenant_t *t, const call_graph_add_req_t *q, const uint64_t *deps,
                        uint64_t *node, uint64_t *ptr) {
  hostd_gnode_t n = {.kind = (int)q->kind, .width = q->width, .dst = q->dst, .dptr = ptr};
  ssize_t i = -1;
  CUresult r;
  if (q->kind == CALL_GNODE_MEM_FREE) {
    if ((i = async_range(t, q->dst)) < 0)
      return CUDA_ERROR_INVALID_VALUE;
    if ((r = hostd__gpu.graph_add(node, q->graph, deps, q->ndeps, &n)) != CUDA_SUCCESS)
      return r;
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, t->ranges[i].size);
    hostd__range_del_at(t, (size_t)i);
    return CUDA_SUCCESS;
  }
  if (q->width == 0 || q->width > (1ull << 48))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_MEM, q->width)) != CUDA_SUCCESS)
    return r;
  r = hostd__gpu.graph_add(node, q->graph, deps, q->ndeps, &n);
  if (r == CUDA_SUCCESS && hostd__range_add(t, *ptr, q->width, RANGE_ASYNC, 0) != 0)
    r = CUDA_ERROR_OUT_OF_MEMORY; /* the node stays in the graph, its memory unnamed */
  if (r != CUDA_SUCCESS)
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, q->width);
  return r;
}

/* GRAPH_ADD of a HOST node: a host node and its wait (see the top). */
static CUresult add_host(hostd_tenant_t *t, const call_graph_add_req_t *q, const uint64_t *deps,
                         uint64_t *node) {
  uint64_t rn = 0, wn = 0;
  int gr;
  void *gate;
  CUresult r;
  if (!t->hf)
    return CUDA_ERROR_NOT_SUPPORTED; /* driven without server.c (tests) */
  if (q->handle == 0 || (q->handle & (HOSTD_HOSTFN_KEEP | HOSTD_HOSTFN_DROP)))
    return CUDA_ERROR_INVALID_VALUE;
  if (!(gate = hostd__hostfn_gate(t->hf, &gr)))
    return (CUresult)gr;
  if ((r = hostd__gpu.graph_add_host(&rn, &wn, q->graph, deps, q->ndeps, gate)) != CUDA_SUCCESS)
    return r;
  *node = wn ? wn : rn;
  return ghost_add(t, q->graph, rn, wn, q->handle);
}

CUresult hostd__exec_graph_add(hostd_tenant_t *t, wire_buf_t *out, const call_graph_add_req_t *q) {
  uint64_t argbuf[CALL_LAUNCH_ARGS_MAX / 8], *deps = NULL, node = 0, ptr = 0;
  hostd_gnode_t n;
  CUresult r;
  if (!u64map_get(&t->graphs, q->graph, NULL) && !open_capture_graph(t, q->graph))
    return CUDA_ERROR_INVALID_VALUE;
  if (q->kind == CALL_GNODE_CHILD && ghosts_of(t, q->handle))
    return CUDA_ERROR_NOT_SUPPORTED; /* its host functions could not be armed in the copy */
  if (q->kind == CALL_GNODE_HOST || q->kind == CALL_GNODE_MEM_ALLOC ||
      q->kind == CALL_GNODE_MEM_FREE) {
    if (q->ndeps && !(deps = malloc(q->ndeps * sizeof(*deps))))
      return CUDA_ERROR_OUT_OF_MEMORY;
    r = !nodes_of(t, q->graph, q->deps, deps) ? CUDA_ERROR_INVALID_VALUE
        : q->kind == CALL_GNODE_HOST          ? add_host(t, q, deps, &node)
                                              : add_mem(t, q, deps, &node, &ptr);
    free(deps);
    goto named;
  }
  if ((r = node_of(t, q, argbuf, &n)) != CUDA_SUCCESS)
    return r;
  if (q->ndeps && !(deps = malloc(q->ndeps * sizeof(*deps))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (!nodes_of(t, q->graph, q->deps, deps))
    r = CUDA_ERROR_INVALID_VALUE;
  else
    r = hostd__gpu.graph_add(&node, q->graph, deps, q->ndeps, &n);
  free(deps);
named:
  if (r != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->gnodes, node, q->graph) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY; /* the node stays in the graph, unnamed */
  call_graph_add_rep_t rep = {.node = node, .ptr = ptr};
  (void)call_graph_add_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

/* A node of one of the tenant's graphs given new parameters, checked as
 * GRAPH_ADD's of its kind. */
CUresult hostd__exec_graph_set(hostd_tenant_t *t, wire_buf_t *out, const call_graph_set_req_t *q) {
  uint64_t argbuf[CALL_LAUNCH_ARGS_MAX / 8], g = 0;
  call_graph_add_req_t a = {.kind = q->kind, .handle = q->handle, .dst = q->dst, .src = q->src,
                            .pitch = q->pitch, .width = q->width, .height = q->height,
                            .value = q->value, .elem = q->elem, .shmem = q->shmem,
                            .argbytes = q->argbytes, .args = q->args};
  hostd_gnode_t n;
  CUresult r;
  (void)out;
  if (q->kind == CALL_GNODE_HOST && u64map_get(&t->gnodes, q->node, &g))
    return ghost_rebind(t, g, q->node, q->handle);
  if (!u64map_get(&t->gnodes, q->node, &g) ||
      (q->kind != CALL_GNODE_KERNEL && q->kind != CALL_GNODE_MEMCPY &&
       q->kind != CALL_GNODE_MEMSET && q->kind != CALL_GNODE_EVENT_REC &&
       q->kind != CALL_GNODE_EVENT_WAIT))
    return CUDA_ERROR_INVALID_VALUE;
  a.graph = g;
  memcpy(a.grid, q->grid, sizeof(a.grid));
  memcpy(a.block, q->block, sizeof(a.block));
  if ((r = node_of(t, &a, argbuf, &n)) != CUDA_SUCCESS)
    return r;
  return hostd__gpu.graph_set(q->node, &n);
}

/* Where an edge into node n of graph g must end: a host function's first
 * node (its driver host node), so that the function runs after the edge's
 * source; any other node is its own. */
static uint64_t node_entry(const hostd_tenant_t *t, uint64_t g, uint64_t n) {
  ssize_t i = ghost_at(t, g, n);
  return i >= 0 ? t->ghosts[i].rnode : n;
}

/* GRAPH_DEPS and GRAPH_UNDEP: edges of one of the tenant's graphs, between
 * its nodes, added or removed. */
static CUresult deps_change(hostd_tenant_t *t, const call_graph_deps_req_t *q, int remove) {
  uint64_t *v;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (!u64map_get(&t->graphs, q->graph, NULL) || q->n == 0 || q->nto != q->n)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(v = malloc(2 * (size_t)q->n * sizeof(*v))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (nodes_of(t, q->graph, q->from, v) && nodes_of(t, q->graph, q->to, v + q->n)) {
    for (uint32_t i = 0; i < q->n; i++) /* a host function waits from its host node on */
      v[q->n + i] = node_entry(t, q->graph, v[q->n + i]);
    r = hostd__gpu.graph_deps(q->graph, v, v + q->n, q->n, remove);
  }
  free(v);
  return r;
}

CUresult hostd__exec_graph_deps(hostd_tenant_t *t, wire_buf_t *out,
                                const call_graph_deps_req_t *q) {
  (void)out;
  return deps_change(t, q, 0);
}

CUresult hostd__exec_graph_undep(hostd_tenant_t *t, wire_buf_t *out,
                                 const call_graph_undep_req_t *q) {
  (void)out;
  return deps_change(t, (const call_graph_deps_req_t *)q, 1);
}

/* cuGraphDestroyNode of a node of one of the tenant's graphs (not of an
 * open capture's).  A host function's two nodes go together, and its seq
 * with the last graph or exec holding it.  Memory nodes are refused: their
 * allocation is charged to the tenant and named from the node's adding on
 * (add_mem), which removing the node would leave wrong. */
CUresult hostd__exec_graph_node_del(hostd_tenant_t *t, wire_buf_t *out,
                                    const call_graph_node_del_req_t *q) {
  uint64_t g = 0;
  hostd_gnode_t n;
  int type = 0;
  ssize_t i;
  CUresult r;
  (void)out;
  if (!u64map_get(&t->gnodes, q->node, &g) || !u64map_get(&t->graphs, g, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if ((i = ghost_at(t, g, q->node)) >= 0) {
    struct ghost gh = t->ghosts[i];
    if (gh.wnode && gh.wnode != gh.rnode &&
        (r = hostd__gpu.graph_node_del(gh.wnode)) != CUDA_SUCCESS)
      return r;
    if ((r = hostd__gpu.graph_node_del(gh.rnode)) != CUDA_SUCCESS)
      return r; /* the wait went: the host node stays, unnamed */
    t->ghosts[i] = t->ghosts[--t->nghosts];
    seq_release(t, gh.seq);
    u64map_del(&t->gnodes, gh.wnode);
    u64map_del(&t->gnodes, gh.rnode);
    return CUDA_SUCCESS;
  }
  memset(&n, 0, sizeof(n));
  if ((r = hostd__gpu.graph_node(q->node, &type, &n, 0)) != CUDA_SUCCESS &&
      r != CUDA_ERROR_INVALID_VALUE) /* a kernel node's arguments do not fit in none */
    return r;
  if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || type == CU_GRAPH_NODE_TYPE_MEM_FREE)
    return CUDA_ERROR_NOT_SUPPORTED;
  if ((r = hostd__gpu.graph_node_del(q->node)) != CUDA_SUCCESS)
    return r;
  u64map_del(&t->gnodes, q->node);
  return CUDA_SUCCESS;
}

/* The tenant's view of driver node n of graph g: a host function is a
 * driver host node followed by its wait, and the tenant knows the wait
 * alone, so the host node is shown as its wait (0 where hide: a list of
 * every node, which holds the wait too).  A backend that makes one node
 * (rnode == wnode, or no wnode) needs no change. */
static uint64_t node_seen(const hostd_tenant_t *t, uint64_t g, uint64_t n, bool hide) {
  ssize_t i = ghost_at(t, g, n);
  const struct ghost *gh = i >= 0 ? &t->ghosts[i] : NULL;
  if (gh && gh->rnode == n && gh->wnode && gh->wnode != n)
    return hide ? 0 : gh->wnode;
  return n;
}

/* The nodes returned become nodes the tenant may name.  The list is read
 * whole, its host functions' driver nodes shown as the tenant knows them
 * (node_seen; a wait's dependencies are its host node's), then paged. */
CUresult hostd__exec_graph_nodes(hostd_tenant_t *t, wire_buf_t *out,
                                 const call_graph_nodes_req_t *q) {
  uint64_t *nodes = NULL, g = q->graph, of = q->node;
  size_t total = 0, got = 0, n = 0;
  CUresult r;
  bool of_node = q->which == CALL_GNODES_DEPS || q->which == CALL_GNODES_DEPENDENTS;
  if (q->which > CALL_GNODES_DEPENDENTS || q->cap > CALL_GRAPH_NODES_MAX ||
      (of_node ? !u64map_get(&t->gnodes, q->node, &g) : !u64map_get(&t->graphs, g, NULL)))
    return CUDA_ERROR_INVALID_VALUE;
  if (q->which == CALL_GNODES_DEPS)
    of = node_entry(t, g, of); /* a wait's own dependency is its host node */
  if ((r = hostd__gpu.graph_nodes(g, q->which, of, NULL, 0, &total)) != CUDA_SUCCESS)
    return r;
  if (total && !(nodes = malloc(total * sizeof(*nodes))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (total && (r = hostd__gpu.graph_nodes(g, q->which, of, nodes, total, &got)) != CUDA_SUCCESS)
    goto done;
  for (size_t i = 0; i < (got < total ? got : total); i++) {
    uint64_t v = node_seen(t, g, nodes[i], q->which == CALL_GNODES_ALL);
    if (v)
      nodes[n++] = v;
  }
  total = n; /* now the tenant's count */
  n = n > q->first ? n - q->first : 0;
  n = n < q->cap ? n : q->cap;
  for (size_t i = 0; i < n; i++)
    if (u64map_put(&t->gnodes, nodes[q->first + i], g) != 0) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
      goto done;
    }
  const uint8_t *first = (const uint8_t *)(n ? nodes + q->first : nodes);
  call_graph_nodes_rep_t rep = {.total = total, .n = (uint32_t)n, .nodes = {first, n * 8}};
  if (call_graph_nodes_rep_put(&rep, out) != 0)
    r = CUDA_ERROR_OUT_OF_MEMORY;
done:
  free(nodes);
  return r;
}

/* A copy of the tenant's graph, its host functions included (their nodes
 * found in the copy). */
CUresult hostd__exec_graph_clone(hostd_tenant_t *t, wire_buf_t *out,
                                 const call_graph_clone_req_t *q) {
  uint64_t c = 0;
  size_t n = t->nghosts;
  CUresult r;
  if (!u64map_get(&t->graphs, q->graph, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.graph_clone(&c, q->graph)) != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->graphs, c, 1) != 0)
    r = CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
    const struct ghost gh = t->ghosts[i];
    uint64_t rn = 0, wn = 0;
    if (gh.owner != q->graph)
      continue;
    if ((r = hostd__gpu.graph_find(&rn, gh.rnode, c)) == CUDA_SUCCESS &&
        (!gh.wnode || (r = hostd__gpu.graph_find(&wn, gh.wnode, c)) == CUDA_SUCCESS))
      r = ghost_add(t, c, rn, wn, gh.seq);
  }
  if (r != CUDA_SUCCESS) {
    ghosts_forget(t, c);
    u64map_del(&t->graphs, c);
    (void)hostd__gpu.graph_del(c);
    return r;
  }
  call_graph_clone_rep_t rep = {.graph = c};
  return call_graph_clone_rep_put(&rep, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The clone's node copied from node: one the tenant may name from now on. */
CUresult hostd__exec_graph_find(hostd_tenant_t *t, wire_buf_t *out,
                                const call_graph_find_req_t *q) {
  uint64_t n = 0;
  CUresult r;
  if (!u64map_get(&t->gnodes, q->node, NULL) || !u64map_get(&t->graphs, q->clone, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.graph_find(&n, q->node, q->clone)) != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->gnodes, n, q->clone) != 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  call_graph_find_rep_t rep = {.node = n};
  return call_graph_find_rep_put(&rep, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* What a node of the tenant's is.  A host function's two nodes answer
 * HOST with its seq in the node's graph (the guest keeps the function). */
CUresult hostd__exec_graph_node(hostd_tenant_t *t, wire_buf_t *out,
                                const call_graph_node_req_t *q) {
  hostd_gnode_t n;
  uint64_t g = 0;
  uint8_t *args;
  int type = 0;
  ssize_t i;
  CUresult r;
  if (!u64map_get(&t->gnodes, q->node, &g))
    return CUDA_ERROR_INVALID_VALUE;
  call_graph_node_rep_t rep;
  memset(&rep, 0, sizeof(rep));
  if ((i = ghost_at(t, g, q->node)) >= 0) {
    rep.type = CU_GRAPH_NODE_TYPE_HOST;
    rep.kind = CALL_GNODE_HOST;
    rep.handle = t->ghosts[i].seq;
    return call_graph_node_rep_put(&rep, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!(args = malloc(CALL_LAUNCH_ARGS_MAX)))
    return CUDA_ERROR_OUT_OF_MEMORY;
  memset(&n, 0, sizeof(n));
  n.args = args;
  if ((r = hostd__gpu.graph_node(q->node, &type, &n, CALL_LAUNCH_ARGS_MAX)) == CUDA_SUCCESS) {
    rep = (call_graph_node_rep_t){.type = (uint32_t)type, .kind = (uint32_t)n.kind,
                                  .handle = n.handle, .dst = n.dst, .src = n.src,
                                  .pitch = n.pitch,
                                  .width = n.width, .height = n.height, .value = n.value,
                                  .elem = n.elem, .shmem = n.shmem, .fkind = (uint32_t)n.fkind,
                                  .args = {args, n.kind == CALL_GNODE_KERNEL ? n.argbytes : 0}};
    memcpy(rep.grid, n.grid, sizeof(rep.grid));
    memcpy(rep.block, n.block, sizeof(rep.block));
    if (call_graph_node_rep_put(&rep, out) != 0)
      r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  free(args);
  return r;
}

/* A node of an exec of the tenant's enabled or not (held launches of the
 * exec run as they were launched), or whether it is. */
CUresult hostd__exec_graph_enable(hostd_tenant_t *t, wire_buf_t *out,
                                  const call_graph_enable_req_t *q) {
  unsigned on = q->enabled != 0;
  CUresult r;
  if (!u64map_get(&t->gexecs, q->exec, NULL) || !u64map_get(&t->gnodes, q->node, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if (q->set)
    return (r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS
               ? r
               : hostd__gpu.graph_enable(q->exec, q->node, 1, &on);
  if ((r = hostd__gpu.graph_enable(q->exec, q->node, 0, &on)) != CUDA_SUCCESS)
    return r;
  call_graph_enable_rep_t rep = {.enabled = on};
  return call_graph_enable_rep_put(&rep, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* A kernel node's attributes (the driver checks the node's kind and the
 * values; they name no handle of the tenant's but addresses, as a launch's). */
CUresult hostd__exec_graph_attr(hostd_tenant_t *t, wire_buf_t *out,
                                const call_graph_attr_req_t *q) {
  call_graph_attr_rep_t rep;
  CUresult r;
  if (!u64map_get(&t->gnodes, q->node, NULL) || q->what > 2 ||
      (q->what == 2 && !u64map_get(&t->gnodes, q->src, NULL)))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(rep.value, q->value, sizeof(rep.value));
  if ((r = hostd__gpu.graph_attr(q->node, q->src, q->what, q->attr, rep.value)) != CUDA_SUCCESS)
    return r;
  return call_graph_attr_rep_put(&rep, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* cuGraphDebugDotPrint: the text, at most one reply's worth. */
CUresult hostd__exec_graph_dot(hostd_tenant_t *t, wire_buf_t *out, const call_graph_dot_req_t *q) {
  call_graph_dot_rep_t rep;
  char *text = NULL;
  size_t len = 0;
  CUresult r;
  if (!u64map_get(&t->graphs, q->graph, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.graph_dot(q->graph, q->flags, &text, &len)) != CUDA_SUCCESS)
    return r;
  if (len > CALL_MAX_LEN - 8) {
    hostd__log(HOSTD_LOG_INFO, "tenant %u: graph %#llx in DOT is %zu bytes, over a reply's %u",
               t->id, (unsigned long long)q->graph, len, (unsigned)(CALL_MAX_LEN - 8));
    free(text);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  rep.text = (call_view_t){(const uint8_t *)text, len};
  r = call_graph_dot_rep_put(&rep, out) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
  free(text);
  return r;
}

/* ---- instantiated graphs ---- */

CUresult hostd__exec_graph_instantiate(hostd_tenant_t *t, wire_buf_t *out,
                                       const call_graph_instantiate_req_t *q) {
  const uint64_t ok = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                      CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
  uint64_t e = 0;
  CUresult r;
  if (!u64map_get(&t->graphs, q->graph, NULL) || (q->flags & ~ok))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.graph_instantiate(&e, q->graph, q->flags)) != CUDA_SUCCESS)
    return r;
  if (u64map_put(&t->gexecs, e, 1) != 0 || ghosts_copy(t, q->graph, e) != CUDA_SUCCESS) {
    u64map_del(&t->gexecs, e);
    ghosts_forget(t, e);
    (void)hostd__gpu.graph_exec_del(e);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  call_graph_instantiate_rep_t rep = {.exec = e};
  (void)call_graph_instantiate_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

/* A replay of an exec holding host functions: armed, then launched at once
 * behind the tenant's held launches (see the top). */
static CUresult launch_armed(hostd_tenant_t *t, uint64_t exec, tstream_t *ts) {
  size_t n = ghosts_count(t, exec), narmed = 0;
  hostd_hostfn_armed_t *armed;
  CUresult r;
  if (hostd__stream_capturing(t, ts))
    return CUDA_ERROR_NOT_SUPPORTED; /* a child graph of the capture could not be re-armed */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  if (!(armed = calloc(n, sizeof(*armed))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if ((r = ghosts_arm(t, exec, armed, &narmed)) == CUDA_SUCCESS)
    r = hostd__gpu.graph_launch(exec, ts->handle, 0);
  if (r != CUDA_SUCCESS)
    ghosts_disarm(t, armed, narmed);
  free(armed);
  return r;
}

/* A replay: through the scheduler as one launch (sched.h), or straight onto
 * a capturing stream (it becomes a child graph of that capture). */
CUresult hostd__exec_graph_launch(hostd_tenant_t *t, wire_buf_t *out,
                                  const call_graph_launch_req_t *q) {
  hostd_sched_launch_t l = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .graph = q->exec};
  tstream_t *ts;
  CUresult r;
  (void)out;
  if (!u64map_get(&t->gexecs, q->exec, NULL) || q->upload > 1)
    return CUDA_ERROR_INVALID_VALUE;
  if (q->upload) {
    if ((r = hostd__stream_lookup_enter(t, q->stream, &ts)) != CUDA_SUCCESS)
      return r;
    return hostd__gpu.graph_launch(q->exec, ts->handle, 1);
  }
  if (!(ts = hostd__stream_of(t, q->stream, &r)) ||
      (r = hostd__stream_enter_launch(t, ts)) != CUDA_SUCCESS)
    return r;
  if (ghosts_of(t, q->exec))
    return launch_armed(t, q->exec, ts);
  if (!t->sched || hostd__stream_capturing(t, ts))
    return hostd__gpu.graph_launch(q->exec, ts->handle, 0);
  if (!ts->ss && !(ts->ss = hostd__sched_stream_new(t->sched, ts->handle, &r)))
    return r;
  l.kernel_id = hostd__sched_kernel_id(q->exec, "graph");
  return hostd__sched_launch(ts->ss, &l);
}

CUresult hostd__exec_graph_exec_del(hostd_tenant_t *t, wire_buf_t *out,
                                    const call_graph_exec_del_req_t *q) {
  CUresult r;
  (void)out;
  if (!u64map_get(&t->gexecs, q->exec, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  /* A held launch of it goes out first (sched.h), as launched work would. */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  if ((r = hostd__gpu.graph_exec_del(q->exec)) != CUDA_SUCCESS)
    return r;
  u64map_del(&t->gexecs, q->exec);
  ghosts_forget(t, q->exec);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_graph_exec_update(hostd_tenant_t *t, wire_buf_t *out,
                                       const call_graph_exec_update_req_t *q) {
  uint64_t node = 0;
  int res = 0;
  CUresult r;
  if (!u64map_get(&t->gexecs, q->exec, NULL) || !u64map_get(&t->graphs, q->graph, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if (ghosts_of(t, q->exec) || ghosts_of(t, q->graph)) { /* their host functions would not follow */
    call_graph_exec_update_rep_t no = {.status = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
                                       .result = CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED};
    return call_graph_exec_update_rep_put(&no, out) == 0 ? CUDA_SUCCESS
                                                          : CUDA_ERROR_OUT_OF_MEMORY;
  }
  /* Held launches of it use the parameters they were launched with. */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  r = hostd__gpu.graph_exec_update(q->exec, q->graph, &res, &node);
  if (node && !u64map_get(&t->gnodes, node, NULL))
    node = 0; /* a node the tenant was never told of */
  call_graph_exec_update_rep_t rep = {.status = (uint32_t)r, .result = (uint32_t)res,
                                      .error_node = node};
  return call_graph_exec_update_rep_put(&rep, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult hostd__exec_graph_exec_kernel(hostd_tenant_t *t, wire_buf_t *out,
                                       const call_graph_exec_kernel_req_t *q) {
  uint64_t argbuf[CALL_LAUNCH_ARGS_MAX / 8];
  hostd_gnode_t n = {.kind = CALL_GNODE_KERNEL, .handle = q->func, .shmem = q->shmem};
  CUresult r;
  (void)out;
  if (!u64map_get(&t->gexecs, q->exec, NULL) || !u64map_get(&t->gnodes, q->node, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if ((n.fkind = fkind_of(t, q->func)) < 0)
    return CUDA_ERROR_INVALID_HANDLE;
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  memcpy(n.grid, q->grid, sizeof(n.grid));
  memcpy(n.block, q->block, sizeof(n.block));
  memcpy(argbuf, q->args.p, q->args.len);
  n.args = argbuf, n.argbytes = q->args.len;
  return hostd__gpu.graph_exec_set(q->exec, q->node, &n);
}

CUresult hostd__exec_graph_exec_child(hostd_tenant_t *t, wire_buf_t *out,
                                      const call_graph_exec_child_req_t *q) {
  hostd_gnode_t n = {.kind = CALL_GNODE_CHILD, .handle = q->graph};
  CUresult r;
  (void)out;
  if (!u64map_get(&t->gexecs, q->exec, NULL) || !u64map_get(&t->gnodes, q->node, NULL) ||
      !u64map_get(&t->graphs, q->graph, NULL))
    return CUDA_ERROR_INVALID_VALUE;
  if (ghosts_of(t, q->graph))
    return CUDA_ERROR_NOT_SUPPORTED;
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  return hostd__gpu.graph_exec_set(q->exec, q->node, &n);
}

/* A copy, memset or event node of an exec: the fields are checked as
 * GRAPH_ADD's of that kind (the tenant's memory and events only). */
CUresult hostd__exec_graph_exec_node(hostd_tenant_t *t, wire_buf_t *out,
                                     const call_graph_exec_node_req_t *q) {
  call_graph_add_req_t a = {.kind = q->kind, .handle = q->handle, .dst = q->dst, .src = q->src,
                            .pitch = q->pitch, .width = q->width, .height = q->height,
                            .value = q->value, .elem = q->elem};
  hostd_gnode_t n;
  CUresult r;
  (void)out;
  if (q->kind == CALL_GNODE_HOST && u64map_get(&t->gexecs, q->exec, NULL))
    return ghost_rebind(t, q->exec, q->node, q->handle); /* armed at each launch */
  if (!u64map_get(&t->gexecs, q->exec, NULL) || !u64map_get(&t->gnodes, q->node, NULL) ||
      (q->kind != CALL_GNODE_MEMCPY && q->kind != CALL_GNODE_MEMSET &&
       q->kind != CALL_GNODE_EVENT_REC && q->kind != CALL_GNODE_EVENT_WAIT))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = node_of(t, &a, NULL, &n)) != CUDA_SUCCESS)
    return r;
  /* Held launches of it use the parameters they were launched with. */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS)
    return r;
  return hostd__gpu.graph_exec_set(q->exec, q->node, &n);
}

/* The device's graph memory: the shared context's, so a trim releases what
 * every tenant's graphs hold unused, and the attributes count them all. */
CUresult hostd__exec_graph_mem(hostd_tenant_t *t, wire_buf_t *out, const call_graph_mem_req_t *q) {
  call_graph_mem_rep_t rep = {.value = q->value};
  CUresult r;
  (void)t;
  if (q->what > 2 || (q->what && q->attr > CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__gpu.graph_mem(q->what, q->attr, &rep.value)) != CUDA_SUCCESS)
    return r;
  return call_graph_mem_rep_put(&rep, out) == 0 ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- release ---- */

void hostd__capture_release(hostd_tenant_t *t, bool gpu) {
  for (size_t i = 0; gpu && i < t->captures.cap; i++) {
    uint64_t g = 0;
    if (t->captures.keys[i] && hostd__gpu.capture_end(t->captures.keys[i], &g) == CUDA_SUCCESS &&
        g)
      (void)hostd__gpu.graph_del(g);
  }
  u64map_close(&t->captures);
  u64map_init(&t->captures);
}

void hostd__graph_release(hostd_tenant_t *t, bool gpu) {
  for (size_t i = 0; gpu && i < t->gexecs.cap; i++)
    if (t->gexecs.keys[i])
      (void)hostd__gpu.graph_exec_del(t->gexecs.keys[i]);
  for (size_t i = 0; gpu && i < t->graphs.cap; i++)
    if (t->graphs.keys[i])
      (void)hostd__gpu.graph_del(t->graphs.keys[i]);
  free(t->ghosts); /* the tenant's host functions went with it (hostfn.c) */
  t->ghosts = NULL;
  t->nghosts = t->capghosts = 0;
  u64map_t *maps[] = {&t->gexecs, &t->graphs, &t->gnodes};
  for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++) {
    u64map_close(maps[i]);
    u64map_init(maps[i]);
  }
}
