/* test-guest-graph.c: stream capture and CUDA graphs through the guest
 * library (guestlib/graph.c) against tallyd's server in this process on
 * the recording device.
 *
 * The driver-API sequence of PyTorch's CUDAGraph (capture mode exchange,
 * begin, capture status and info during capture, kernels, copies and
 * memsets captured, end, instantiate, replays) and of an explicit graph
 * (memset and kernel nodes with a dependency, kernel parameters changed in
 * the exec, an update), XLA's updates of an exec's memset, copy and event
 * nodes, a graph's nodes given new parameters, the device's graph memory,
 * host nodes and captured host functions run at every replay, a clone, a capture
 * into a graph the application made (cuStreamBeginCaptureToGraph), a graph
 * printed in DOT (cuGraphDebugDotPrint),
 * checking that the capture status costs no request
 * while nothing captures, that a replay is one request, and that replayed
 * memory equals what the same work did eagerly.  Never GPU coverage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/guest-daemon-harness.h"

#define N 64

/* cudart 12's entry point, which CUDA 13's cuda.h no longer declares. */
CUresult cuStreamGetCaptureInfo_v2(CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id,
                                   CUgraph *g, const CUgraphNode **deps, size_t *ndeps);
/* The driver's first names, which cuda.h maps to their _v2. */
#undef cuGraphKernelNodeGetParams
CUresult cuGraphKernelNodeGetParams(CUgraphNode node, CUDA_KERNEL_NODE_PARAMS_v1 *p);
#undef cuGraphGetEdges
CUresult cuGraphGetEdges(CUgraph g, CUgraphNode *from, CUgraphNode *to, size_t *n);

static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
static CUmodule mod;
static CUfunction fill;

static int setup(void **state) {
  (void)state;
  if (gd_start("graph", -1) != 0 || cuModuleLoadData(&mod, img) != CUDA_SUCCESS ||
      cuModuleGetFunction(&fill, mod, "fill_u32") != CUDA_SUCCESS)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return gd_stop();
}

static void work(CUstream s, CUdeviceptr a, CUdeviceptr b) {
  uint32_t v = 7;
  uint64_t n = 16;
  void *params[] = {&a, &v, &n};
  assert_int_equal(cuMemsetD32Async(a, 0x11111111, N, s), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoDAsync(b, a, N * 4, s), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32Async(b + 200, 3, 2, s), CUDA_SUCCESS);
}

static void read2(CUstream s, CUdeviceptr a, CUdeviceptr b, uint32_t out[2 * N]) {
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out, a, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out + N, b, N * 4), CUDA_SUCCESS);
}

/* PyTorch's CUDAGraph: capture_begin / capture_end / replay. */
static void torch_cuda_graph_sequence(void **state) {
  CUstream s;
  CUdeviceptr a, b;
  CUgraph g;
  CUgraphExec e;
  CUstreamCaptureStatus st;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  cuuint64_t id = 0;
  const CUgraphNode *deps = NULL;
  const CUgraphEdgeData *edges = (const CUgraphEdgeData *)1;
  size_t ndeps = 9;
  uint32_t eager[2 * N], got[2 * N];
  unsigned long info0, launches0, replays0;
  (void)state;
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&a, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&b, N * 4), CUDA_SUCCESS);
  work(s, a, b);
  read2(s, a, b, eager);
  assert_int_equal(eager[0], 7);
  assert_int_equal(eager[N + 50], 3);
  assert_int_equal(cuMemsetD32(a, 0, N), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32(b, 0, N), CUDA_SUCCESS);

  /* Nothing captures: answered here. */
  info0 = ops(CALL_OP_CAPTURE_INFO);
  assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
  assert_int_equal(ops(CALL_OP_CAPTURE_INFO), info0);

  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(cuStreamGetCaptureInfo_v2(s, &st, &id, &g, &deps, &ndeps), CUDA_SUCCESS);
  assert_int_not_equal(id, 0);
  assert_int_equal(ndeps, 0);
  /* The allocator's guard around cudaMalloc during a capture. */
  assert_int_equal(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
  assert_int_equal(mode, CU_STREAM_CAPTURE_MODE_GLOBAL);
  CUdeviceptr extra;
  assert_int_equal(cuMemAlloc(&extra, 256), CUDA_SUCCESS);
  assert_int_equal(cuThreadExchangeStreamCaptureMode(&mode), CUDA_SUCCESS);
  assert_int_equal(mode, CU_STREAM_CAPTURE_MODE_RELAXED);
  work(s, a, b);
  assert_int_equal(cuStreamGetCaptureInfo_v3(s, &st, &id, NULL, &deps, &edges, &ndeps),
                   CUDA_SUCCESS);
  assert_int_equal(ndeps, 1);
  assert_non_null(deps);
  assert_null(edges);
  assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  assert_non_null(g);
  assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);

  size_t count = 0;
  CUgraphNode nodes[6];
  assert_int_equal(cuGraphGetNodes(g, NULL, &count), CUDA_SUCCESS);
  assert_int_equal(count, 4); /* memset, kernel, copy, memset */
  count = 6;
  assert_int_equal(cuGraphGetNodes(g, nodes, &count), CUDA_SUCCESS);
  assert_int_equal(count, 4);
  assert_null(nodes[4]);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  launches0 = ops(CALL_OP_LAUNCH);
  replays0 = ops(CALL_OP_GRAPH_LAUNCH);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
    read2(s, a, b, got);
    assert_memory_equal(got, eager, sizeof(eager));
    assert_int_equal(cuMemsetD32Async(a, 0, N, s), CUDA_SUCCESS);
  }
  assert_int_equal(ops(CALL_OP_GRAPH_LAUNCH), replays0 + 3); /* one request per replay */
  assert_int_equal(ops(CALL_OP_LAUNCH), launches0);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(extra), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(b), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A synchronisation inside a capture fails and invalidates it, as natively. */
static void sync_during_capture_invalidates(void **state) {
  CUstream s;
  CUgraph g = (CUgraph)1;
  CUstreamCaptureStatus st;
  (void)state;
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_null(g);
  assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Launches e on s, waits, and reads the N words at a into got. */
static void replay(CUgraphExec e, CUstream s, CUdeviceptr a, uint32_t got[N]) {
  assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(got, a, N * sizeof(uint32_t)), CUDA_SUCCESS);
}

/* A stream, N words of device memory and an empty graph. */
static void graph_open(CUstream *s, CUdeviceptr *a, CUgraph *g) {
  assert_int_equal(cuStreamCreate(s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(a, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuGraphCreate(g, 0), CUDA_SUCCESS);
}

/* A node of g that sets the N words at a to 2, after deps. */
static void add_memset2(CUgraphNode *node, CUgraph g, const CUgraphNode *deps, size_t ndeps,
                        CUdeviceptr a) {
  CUDA_MEMSET_NODE_PARAMS mp;
  memset(&mp, 0, sizeof(mp));
  mp.dst = a, mp.value = 2, mp.elementSize = 4, mp.width = N, mp.height = 1;
  assert_int_equal(cuGraphAddMemsetNode(node, g, deps, ndeps, &mp, NULL), CUDA_SUCCESS);
}

/* A kernel node of fill_u32 over one block of 32 threads, with params. */
static CUDA_KERNEL_NODE_PARAMS fill_params(void **params) {
  CUDA_KERNEL_NODE_PARAMS kp;
  memset(&kp, 0, sizeof(kp));
  kp.func = fill, kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = 32, kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = params;
  return kp;
}

static void fill_node(CUgraphNode *kn, CUgraph g, const CUgraphNode *dep, void **params) {
  CUDA_KERNEL_NODE_PARAMS kp = fill_params(params);
  assert_int_equal(cuGraphAddKernelNode_v2(kn, g, dep, 1, &kp), CUDA_SUCCESS);
}

/* An explicit graph: memset, then a kernel after it; its parameters changed
 * (a posted update, whose error comes back at the next synchronisation). */
static void explicit_graph_sequence(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode ms, kn;
  uint32_t v = 5, got[N];
  uint64_t n = 8;
  void *params[] = {&a, &v, &n};
  CUDA_KERNEL_NODE_PARAMS kp;
  CUgraphExecUpdateResultInfo ui;
  (void)state;
  graph_open(&s, &a, &g);
  add_memset2(&ms, g, NULL, 0, a);
  kp = fill_params(params);
  assert_int_equal(cuGraphAddKernelNode_v2(&kn, g, &ms, 1, &kp), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[7], 5);
  assert_int_equal(got[8], 2);
  v = 6, n = 12; /* packed at the call, as the driver copies them */
  assert_int_equal(cuGraphExecKernelNodeSetParams_v2(e, kn, &kp), CUDA_SUCCESS);
  v = 99;
  replay(e, s, a, got);
  assert_int_equal(got[11], 6);
  assert_int_equal(got[12], 2);
  /* Updates are posted: one tallyd refuses (a node the tenant never had)
   * returns at once, and its error comes back from the next synchronising
   * call, once. */
  assert_int_equal(cuGraphExecKernelNodeSetParams_v2(e, (CUgraphNode)(uintptr_t)0xdead0, &kp),
                   CUDA_SUCCESS);
  assert_int_not_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  /* The same graph updates cleanly. */
  assert_int_equal(cuGraphExecUpdate_v2(e, g, &ui), CUDA_SUCCESS);
  assert_int_equal(ui.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  /* A 2-D copy naming host memory is not offered. */
  CUDA_MEMCPY3D c;
  CUgraphNode cn;
  memset(&c, 0, sizeof(c));
  c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = got;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = a;
  c.WidthInBytes = 4, c.Height = 2, c.Depth = 1, c.srcPitch = c.dstPitch = 8;
  assert_int_equal(cuGraphAddMemcpyNode(&cn, g, NULL, 0, &c, NULL), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* cuGraphDebugDotPrint: tallyd's driver prints the graph and the guest
 * writes the text to the caller's path (the recording device's DOT names
 * every node and edge); a bad path or graph is refused as the driver does. */
static void graph_printed_as_dot(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g;
  CUgraphNode ms, ms2;
  char path[] = "/tmp/tally-dot-XXXXXX", text[4096];
  FILE *f;
  size_t n;
  int fd;
  (void)state;
  graph_open(&s, &a, &g);
  add_memset2(&ms, g, NULL, 0, a);
  add_memset2(&ms2, g, &ms, 1, a);
  fd = mkstemp(path);
  assert_true(fd >= 0);
  close(fd);
  assert_int_equal(cuGraphDebugDotPrint(g, path, CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE), CUDA_SUCCESS);
  f = fopen(path, "r");
  assert_non_null(f);
  n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = 0;
  assert_non_null(strstr(text, "digraph"));
  assert_non_null(strstr(text, "->")); /* the memsets' edge */
  assert_int_equal(cuGraphDebugDotPrint(g, NULL, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphDebugDotPrint((CUgraph)(uintptr_t)0xdead0, path, 0),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphDebugDotPrint(g, "/nonexistent-dir/graph.dot", 0),
                   CUDA_ERROR_OPERATING_SYSTEM);
  unlink(path);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* XLA's command buffers capture into a graph of their own: a memset node,
 * then a kernel captured after it with a programmatic edge (kept as a full
 * dependency); edge data that cannot be folded is refused.  The graph's
 * roots and a node's dependencies and dependents are then listed. */
static void capture_to_graph(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g, cg = NULL;
  CUgraphExec e;
  CUgraphNode ms;
  CUgraphEdgeData ed;
  CUstreamCaptureStatus st;
  uint32_t v = 9, got[N];
  uint64_t n = 4;
  void *params[] = {&a, &v, &n};
  CUDA_MEMSET_NODE_PARAMS mp;
  (void)state;
  graph_open(&s, &a, &g);
  memset(&mp, 0, sizeof(mp));
  mp.dst = a, mp.value = 3, mp.elementSize = 4, mp.width = N, mp.height = 1;
  assert_int_equal(cuGraphAddMemsetNode(&ms, g, NULL, 0, &mp, NULL), CUDA_SUCCESS);
  memset(&ed, 0, sizeof(ed));
  ed.to_port = 1; /* not an edge the guest can fold */
  assert_int_equal(cuStreamBeginCaptureToGraph(s, g, &ms, &ed, 1, CU_STREAM_CAPTURE_MODE_GLOBAL),
                   CUDA_ERROR_NOT_SUPPORTED);
  ed.to_port = 0, ed.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC;
  assert_int_equal(cuStreamBeginCaptureToGraph(s, g, &ms, &ed, 1, CU_STREAM_CAPTURE_MODE_GLOBAL),
                   CUDA_SUCCESS);
  assert_int_equal(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamEndCapture(s, &cg), CUDA_SUCCESS);
  assert_ptr_equal(cg, g);
  /* XLA then counts the roots; the captured kernel hangs off the memset. */
  CUgraphNode roots[2] = {NULL, NULL}, after[2] = {NULL, NULL}, before[2] = {NULL, NULL};
  CUgraphEdgeData eds[2];
  size_t nr = 0, na = 2, nb = 2;
  assert_int_equal(cuGraphGetRootNodes(g, NULL, &nr), CUDA_SUCCESS);
  assert_int_equal(nr, 1);
  nr = 2;
  assert_int_equal(cuGraphGetRootNodes(g, roots, &nr), CUDA_SUCCESS);
  assert_int_equal(nr, 1);
  assert_ptr_equal(roots[0], ms);
  assert_null(roots[1]);
  assert_int_equal(cuGraphNodeGetDependentNodes(ms, after, NULL, &na), CUDA_SUCCESS);
  assert_int_equal(na, 1);
  memset(eds, 0xff, sizeof(eds));
  assert_int_equal(cuGraphNodeGetDependencies_v2(after[0], before, eds, &nb), CUDA_SUCCESS);
  assert_int_equal(nb, 1);
  assert_ptr_equal(before[0], ms);
  assert_int_equal(eds[0].type, CU_GRAPH_DEPENDENCY_TYPE_DEFAULT);
  nb = 0;
  assert_int_equal(cuGraphNodeGetDependencies(ms, NULL, NULL, &nb), CUDA_SUCCESS);
  assert_int_equal(nb, 0);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[3], 9);
  assert_int_equal(got[4], 3);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* The same graph through cuGraphAddNode's tagged union (XLA's command
 * buffers): memset, kernel after it, parameters changed through
 * cuGraphExecNodeSetParams, node kinds answered by cuGraphNodeGetType; a
 * programmatic edge is kept as a full dependency; unknown edge data and node
 * kinds not offered are refused. */
static void generic_node_api(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode ms, kn, en, bad;
  uint32_t v = 7, got[N];
  uint64_t n = 4;
  void *params[] = {&a, &v, &n};
  CUgraphNodeParams p;
  CUgraphEdgeData ed;
  (void)state;
  graph_open(&s, &a, &g);
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_MEMSET;
  p.memset.dst = a, p.memset.value = 3, p.memset.elementSize = 4;
  p.memset.width = N, p.memset.height = 1;
  assert_int_equal(cuGraphAddNode_v2(&ms, g, NULL, NULL, 0, &p), CUDA_SUCCESS);
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
  p.kernel.func = fill, p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
  p.kernel.blockDimX = 32, p.kernel.blockDimY = p.kernel.blockDimZ = 1;
  p.kernel.kernelParams = params;
  memset(&ed, 0, sizeof(ed));
  assert_int_equal(cuGraphAddNode_v2(&kn, g, &ms, &ed, 1, &p), CUDA_SUCCESS);
  CUgraphNodeParams ep = {.type = CU_GRAPH_NODE_TYPE_EMPTY};
  assert_int_equal(cuGraphAddNode_v2(&en, g, &kn, NULL, 1, &ep), CUDA_SUCCESS);
  /* A programmatic edge is kept as a full dependency (stricter, correct). */
  CUgraphNode pn;
  ed.type = CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC,
  ed.from_port = CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC;
  assert_int_equal(cuGraphAddNode_v2(&pn, g, &kn, &ed, 1, &ep), CUDA_SUCCESS);
  ed.type = (CUgraphDependencyType)7; /* not a type this driver knows */
  assert_int_equal(cuGraphAddNode_v2(&bad, g, &kn, &ed, 1, &ep), CUDA_ERROR_NOT_SUPPORTED);
  CUgraphNodeParams hp = {.type = CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL};
  assert_int_equal(cuGraphAddNode_v2(&bad, g, NULL, NULL, 0, &hp), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphAddNode_v2(&bad, g, NULL, NULL, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  CUgraphNodeParams nofn = {.type = CU_GRAPH_NODE_TYPE_HOST}; /* a host node with no function */
  assert_int_equal(cuGraphAddNode_v2(&bad, g, NULL, NULL, 0, &nofn), CUDA_ERROR_INVALID_VALUE);
  CUgraphNodeType ty;
  assert_int_equal(cuGraphNodeGetType(ms, &ty), CUDA_SUCCESS);
  assert_int_equal(ty, CU_GRAPH_NODE_TYPE_MEMSET);
  assert_int_equal(cuGraphNodeGetType(kn, &ty), CUDA_SUCCESS);
  assert_int_equal(ty, CU_GRAPH_NODE_TYPE_KERNEL);
  assert_int_equal(cuGraphNodeGetType(en, &ty), CUDA_SUCCESS);
  assert_int_equal(ty, CU_GRAPH_NODE_TYPE_EMPTY);
  assert_int_equal(cuGraphNodeGetType(kn, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[3], 7);
  assert_int_equal(got[4], 3);
  v = 9, n = 10;
  assert_int_equal(cuGraphExecNodeSetParams(e, kn, &p), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecNodeSetParams(e, ms, &hp), CUDA_ERROR_NOT_SUPPORTED);
  replay(e, s, a, got);
  assert_int_equal(got[9], 9);
  assert_int_equal(got[10], 3);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  /* The graph's nodes are forgotten with it, here and in tallyd. */
  assert_int_equal(cuGraphNodeGetType(kn, &ty), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* XLA's command-buffer updates: an exec's memset, copy and event nodes take
 * new parameters through posts (no synchronous request), directly and
 * through cuGraphExecNodeSetParams; an update tallyd refuses (a memset's
 * fields for a copy node) comes back from the next synchronisation; copies
 * naming host memory are not offered. */
static void exec_memset_copy_and_event_updates(void **state) {
  CUstream s;
  CUdeviceptr a, b, c;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode ms, cn, rn;
  CUevent ev1, ev2;
  CUDA_MEMCPY3D cp;
  CUDA_MEMSET_NODE_PARAMS mp;
  uint32_t got[N];
  (void)state;
  graph_open(&s, &a, &g);
  assert_int_equal(cuMemAlloc(&b, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&c, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32(c, 1, N), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&ev1, 0), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&ev2, 0), CUDA_SUCCESS);
  add_memset2(&ms, g, NULL, 0, a);
  memset(&cp, 0, sizeof(cp));
  cp.srcMemoryType = cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  cp.srcDevice = a, cp.dstDevice = b, cp.WidthInBytes = N * 4, cp.Height = cp.Depth = 1;
  assert_int_equal(cuGraphAddMemcpyNode(&cn, g, &ms, 1, &cp, NULL), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddEventRecordNode(&rn, g, &cn, 1, ev1), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, b, got);
  assert_int_equal(got[N - 1], 2);

  unsigned long before = hostd_server_calls(srv);
  memset(&mp, 0, sizeof(mp));
  mp.dst = a, mp.value = 8, mp.elementSize = 4, mp.width = N / 2, mp.height = 1;
  assert_int_equal(cuGraphExecMemsetNodeSetParams(e, ms, &mp, NULL), CUDA_SUCCESS);
  cp.dstDevice = c, cp.WidthInBytes = N * 2;
  assert_int_equal(cuGraphExecMemcpyNodeSetParams(e, cn, &cp, NULL), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecEventRecordNodeSetEvent(e, rn, ev2), CUDA_SUCCESS);
  assert_int_equal(hostd_server_calls(srv), before);
  replay(e, s, c, got);
  assert_int_equal(got[0], 8);
  assert_int_equal(got[N / 2 - 1], 8);
  assert_int_equal(got[N / 2], 1); /* past the shorter copy */
  assert_int_equal(cuMemcpyDtoH(got, b, N * 4), CUDA_SUCCESS);
  assert_int_equal(got[0], 2); /* b is no longer written */
  assert_int_equal(cuEventSynchronize(ev2), CUDA_SUCCESS);

  /* The same through the tagged union. */
  CUgraphNodeParams p;
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_MEMSET;
  p.memset.dst = a, p.memset.value = 5, p.memset.elementSize = 4;
  p.memset.width = N, p.memset.height = 1;
  assert_int_equal(cuGraphExecNodeSetParams(e, ms, &p), CUDA_SUCCESS);
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  p.memcpy.copyParams = cp;
  p.memcpy.copyParams.dstDevice = b;
  assert_int_equal(cuGraphExecNodeSetParams(e, cn, &p), CUDA_SUCCESS);
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
  p.eventRecord.event = ev1;
  assert_int_equal(cuGraphExecNodeSetParams(e, rn, &p), CUDA_SUCCESS);
  replay(e, s, b, got);
  assert_int_equal(got[0], 5);
  assert_int_equal(got[N / 2 - 1], 5);
  assert_int_equal(got[N / 2], 2);

  /* Refused by tallyd (memset fields for a copy node): posted, the error
   * comes back once, from the next synchronisation. */
  assert_int_equal(cuGraphExecMemsetNodeSetParams(e, cn, &mp, NULL), CUDA_SUCCESS);
  assert_int_not_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  /* Refused here: a 2-D copy from host memory, no event, no parameters. */
  CUDA_MEMCPY3D hc = cp;
  hc.srcMemoryType = CU_MEMORYTYPE_HOST, hc.srcHost = got;
  hc.Height = 2, hc.srcPitch = hc.dstPitch = hc.WidthInBytes;
  assert_int_equal(cuGraphExecMemcpyNodeSetParams(e, cn, &hc, NULL), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphExecEventRecordNodeSetEvent(e, rn, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphExecMemsetNodeSetParams(e, ms, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  /* The exec still replays its last good parameters. */
  replay(e, s, b, got);
  assert_int_equal(got[0], 5);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy(ev1), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy(ev2), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(b), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(c), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A graph's nodes given new parameters before it is instantiated (what
 * cuDNN does to a graph it populated): memset, kernel (directly and through
 * cuGraphNodeSetParams) and event record nodes; refusals come back at once. */
static void graph_node_setters(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode ms, kn, rn;
  CUevent ev;
  uint32_t v = 5, got[N];
  uint64_t n = 8;
  void *params[] = {&a, &v, &n};
  CUDA_KERNEL_NODE_PARAMS kp;
  CUDA_MEMSET_NODE_PARAMS mp;
  (void)state;
  graph_open(&s, &a, &g);
  assert_int_equal(cuEventCreate(&ev, 0), CUDA_SUCCESS);
  add_memset2(&ms, g, NULL, 0, a);
  kp = fill_params(params);
  assert_int_equal(cuGraphAddKernelNode_v2(&kn, g, &ms, 1, &kp), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddEventRecordNode(&rn, g, &kn, 1, ev), CUDA_SUCCESS);
  memset(&mp, 0, sizeof(mp));
  mp.dst = a, mp.value = 3, mp.elementSize = 4, mp.width = N, mp.height = 1;
  assert_int_equal(cuGraphMemsetNodeSetParams(ms, &mp), CUDA_SUCCESS);
  v = 6, n = 12;
  assert_int_equal(cuGraphKernelNodeSetParams_v2(kn, &kp), CUDA_SUCCESS);
  assert_int_equal(cuGraphEventRecordNodeSetEvent(rn, ev), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[11], 6);
  assert_int_equal(got[12], 3);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  CUgraphNodeParams p;
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_KERNEL;
  p.kernel.func = fill, p.kernel.gridDimX = p.kernel.gridDimY = p.kernel.gridDimZ = 1;
  p.kernel.blockDimX = 32, p.kernel.blockDimY = p.kernel.blockDimZ = 1;
  p.kernel.kernelParams = params;
  v = 7, n = 2;
  assert_int_equal(cuGraphNodeSetParams(kn, &p), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[1], 7);
  assert_int_equal(got[2], 3);
  /* Refused at once: a memset's fields for a kernel node, another
   * tenant's memory, a host node's type. */
  assert_int_equal(cuGraphMemsetNodeSetParams(kn, &mp), CUDA_ERROR_INVALID_VALUE);
  mp.dst = 0x7000000000ull;
  assert_int_equal(cuGraphMemsetNodeSetParams(ms, &mp), CUDA_ERROR_INVALID_VALUE);
  CUgraphNodeParams hp = {.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC};
  assert_int_equal(cuGraphNodeSetParams(ms, &hp), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy(ev), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* cuDeviceGraphMemTrim and the graph memory attributes reach tallyd (an
 * ASR service trims after dropping a graph, and fails if the trim does). */
static void device_graph_memory(void **state) {
  cuuint64_t v = 7, zero = 0;
  (void)state;
  assert_int_equal(cuDeviceGraphMemTrim(0), CUDA_SUCCESS);
  assert_int_equal(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v),
                   CUDA_SUCCESS);
  assert_true(v == 0);
  assert_int_equal(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero),
                   CUDA_SUCCESS);
  assert_int_equal(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuDeviceGraphMemTrim(7), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, NULL),
                   CUDA_ERROR_INVALID_VALUE);
}

/* A graph's host function: counts its runs; the first run of each replay
 * waits `hold` ms, so the stream is seen blocked behind it. */
static atomic_int host_runs;
static int hold_ms;
static void CUDA_CB count_run(void *arg) {
  (void)arg;
  if (hold_ms) {
    struct timespec ts = {0, (long)hold_ms * 1000000L};
    nanosleep(&ts, NULL);
  }
  atomic_fetch_add(&host_runs, 1);
}

static atomic_int other_runs;
static void CUDA_CB count_other(void *arg) {
  (void)arg;
  atomic_fetch_add(&other_runs, 1);
}

/* Host nodes (cuGraphAddHostNode and through cuGraphAddNode) and a host
 * function captured into a graph run at every replay, in graph order (the
 * stream waits for them; the work after them waits too), from every exec of
 * the graph; an exec update, a child graph and a capture into which they
 * would be copied are refused; once graphs and execs are gone, their
 * functions are forgotten (300 made and dropped in a row, past the guest's
 * 256 pending functions). */
static void host_functions_of_graphs_run_at_every_replay(void **state) {
  CUstream s, s2;
  CUdeviceptr a;
  CUgraph g, cg, child, outer;
  CUgraphExec e, e2, ce;
  CUgraphNode ms, hn, hn2, kn, cn;
  CUgraphExecUpdateResultInfo ui;
  uint32_t v = 5, got[N];
  uint64_t n = 8;
  void *params[] = {&a, &v, &n};
  (void)state;
  graph_open(&s, &a, &g);
  assert_int_equal(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  add_memset2(&ms, g, NULL, 0, a);
  CUDA_HOST_NODE_PARAMS hp = {.fn = count_run, .userData = NULL};
  assert_int_equal(cuGraphAddHostNode(&hn, g, &ms, 1, &hp), CUDA_SUCCESS);
  CUgraphNodeParams gp;
  memset(&gp, 0, sizeof(gp));
  gp.type = CU_GRAPH_NODE_TYPE_HOST;
  gp.host.fn = count_run;
  assert_int_equal(cuGraphAddNode_v2(&hn2, g, &hn, NULL, 1, &gp), CUDA_SUCCESS);
  CUgraphNodeType ty;
  assert_int_equal(cuGraphNodeGetType(hn, &ty), CUDA_SUCCESS);
  assert_int_equal(ty, CU_GRAPH_NODE_TYPE_HOST);
  fill_node(&kn, g, &hn2, params);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  atomic_store(&host_runs, 0);
  hold_ms = 50;
  assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY); /* held by the host function */
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  hold_ms = 0;
  assert_int_equal(atomic_load(&host_runs), 2);
  assert_int_equal(cuMemcpyDtoH(got, a, sizeof(got)), CUDA_SUCCESS);
  assert_int_equal(got[7], 5);
  assert_int_equal(got[8], 2);
  for (int i = 0; i < 3; i++) /* kept across replays */
    assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&host_runs), 8);
  /* A second exec of the graph, on another stream. */
  assert_int_equal(cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(e2, s2), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&host_runs), 12);
  /* A host node given another function: in the exec (its next launches),
   * then in the graph (execs made after). */
  CUDA_HOST_NODE_PARAMS op = {.fn = count_other, .userData = NULL};
  atomic_store(&other_runs, 0);
  assert_int_equal(cuGraphExecHostNodeSetParams(e, hn, &op), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&other_runs), 1);
  assert_int_equal(atomic_load(&host_runs), 13); /* hn2 still counts */
  assert_int_equal(cuGraphLaunch(e2, s2), CUDA_SUCCESS); /* e2 keeps count_run */
  assert_int_equal(cuStreamSynchronize(s2), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&host_runs), 15);
  memset(&gp, 0, sizeof(gp));
  gp.type = CU_GRAPH_NODE_TYPE_HOST;
  gp.host.fn = count_other;
  assert_int_equal(cuGraphNodeSetParams(hn2, &gp), CUDA_SUCCESS);
  CUgraphExec e3;
  assert_int_equal(cuGraphInstantiateWithFlags(&e3, g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(e3, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&other_runs), 2);
  assert_int_equal(atomic_load(&host_runs), 16);
  assert_int_equal(cuGraphExecDestroy(e3), CUDA_SUCCESS);
  assert_int_equal(cuGraphHostNodeSetParams(ms, &op), CUDA_ERROR_INVALID_VALUE); /* a memset */
  assert_int_equal(cuGraphExecHostNodeSetParams(e, hn, NULL), CUDA_ERROR_INVALID_VALUE);
  /* Refused: an update, a child graph copy. */
  assert_int_equal(cuGraphExecUpdate_v2(e, g, &ui), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  assert_int_equal(ui.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphCreate(&outer, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddChildGraphNode(&cn, outer, NULL, 0, g), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphDestroy(outer), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecDestroy(e2), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);

  /* Captured: memset, host function, kernel. */
  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32Async(a, 3, N, s), CUDA_SUCCESS);
  assert_int_equal(cuLaunchHostFunc(s, count_run, NULL), CUDA_SUCCESS);
  v = 9, n = 4;
  assert_int_equal(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamEndCapture(s, &cg), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&host_runs), 16); /* captured, not run */
  assert_int_equal(cuGraphInstantiateWithFlags(&ce, cg, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(ce, s), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(ce, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&host_runs), 18);
  assert_int_equal(cuMemcpyDtoH(got, a, sizeof(got)), CUDA_SUCCESS);
  assert_int_equal(got[3], 9);
  assert_int_equal(got[4], 3);
  /* A graph holding one is not launched into another capture. */
  assert_int_equal(cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(ce, s2), CUDA_SUCCESS); /* posted: refused by tallyd */
  CUresult ended = cuStreamEndCapture(s2, &outer), synced = cuCtxSynchronize();
  assert_int_equal(ended, CUDA_SUCCESS); /* an empty capture */
  assert_int_equal(synced, CUDA_ERROR_NOT_SUPPORTED); /* the launch's kept error */
  assert_int_equal(cuGraphDestroy(outer), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecDestroy(ce), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(cg), CUDA_SUCCESS);

  /* A clone: its own nodes (found through the original's), its own
   * parameters, the host functions with it. */
  assert_int_equal(cuGraphCreate(&child, 0), CUDA_SUCCESS);
  add_memset2(&ms, child, NULL, 0, a);
  assert_int_equal(cuGraphAddHostNode(&hn, child, &ms, 1, &hp), CUDA_SUCCESS);
  CUgraph clone;
  CUgraphNode cms;
  assert_int_equal(cuGraphClone(&clone, child), CUDA_SUCCESS);
  assert_int_equal(cuGraphNodeFindInClone(&cms, ms, clone), CUDA_SUCCESS);
  assert_true(cms != ms);
  assert_int_equal(cuGraphNodeGetType(cms, &ty), CUDA_SUCCESS);
  assert_int_equal(ty, CU_GRAPH_NODE_TYPE_MEMSET);
  CUDA_MEMSET_NODE_PARAMS m4;
  memset(&m4, 0, sizeof(m4));
  m4.dst = a, m4.value = 4, m4.elementSize = 4, m4.width = N, m4.height = 1;
  assert_int_equal(cuGraphMemsetNodeSetParams(cms, &m4), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(child), CUDA_SUCCESS); /* the clone keeps its function */
  assert_int_equal(cuGraphInstantiateWithFlags(&ce, clone, 0), CUDA_SUCCESS);
  atomic_store(&host_runs, 0);
  assert_int_equal(cuGraphLaunch(ce, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(atomic_load(&host_runs), 1);
  assert_int_equal(cuMemcpyDtoH(got, a, sizeof(got)), CUDA_SUCCESS);
  assert_int_equal(got[0], 4);
  assert_int_equal(cuGraphNodeFindInClone(&cms, (CUgraphNode)(uintptr_t)0xdead0, clone),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphExecDestroy(ce), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(clone), CUDA_SUCCESS);

  /* Graph and exec destroyed while a launch of it is in flight: its host
   * function still runs (the guest forgets it only after). */
  assert_int_equal(cuGraphCreate(&child, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddHostNode(&hn, child, NULL, 0, &hp), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddHostNode(&hn2, child, &hn, 1, &hp), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&ce, child, 0), CUDA_SUCCESS);
  atomic_store(&host_runs, 0);
  hold_ms = 30;
  assert_int_equal(cuGraphLaunch(ce, s), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecDestroy(ce), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(child), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  hold_ms = 0;
  assert_int_equal(atomic_load(&host_runs), 2);

  /* 300 graphs with a host node, made and destroyed: their functions are
   * dropped (asynchronously, so a make may wait for the drops in flight). */
  for (int i = 0; i < 300; i++) {
    CUresult r = CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    assert_int_equal(cuGraphCreate(&child, 0), CUDA_SUCCESS);
    for (int k = 0; k < 2000 && r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES; k++) {
      if (k)
        usleep(1000);
      r = cuGraphAddHostNode(&hn, child, NULL, 0, &hp);
    }
    assert_int_equal(r, CUDA_SUCCESS);
    assert_int_equal(cuGraphDestroy(child), CUDA_SUCCESS);
  }
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s2), CUDA_SUCCESS);
}

/* A 1-D copy of n bytes between host memory h and device memory d (dir:
 * 0 to the device, 1 to the host). */
static CUDA_MEMCPY3D host_copy(void *h, CUdeviceptr d, size_t n, int dir) {
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof(c));
  if (dir == 0) {
    c.srcMemoryType = CU_MEMORYTYPE_HOST, c.srcHost = h;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = d;
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = d;
    c.dstMemoryType = CU_MEMORYTYPE_HOST, c.dstHost = h;
  }
  c.WidthInBytes = n, c.Height = 1, c.Depth = 1;
  return c;
}

/* Copy nodes naming pageable memory (gstage.c): each launch sends the
 * upload's bytes as they are at the launch (one HTOD) and a download
 * reaches the host at the synchronisation that covers it (one DTOH; not
 * before); the graph destroyed, its exec keeps working; a clone's nodes
 * copy too, and a clone's node given another host buffer; a node turned
 * into a device copy stops staging; what would escape the stages is
 * refused (a child graph, an exec update, a launch while a capture is
 * open); every stage buffer is freed with the last graph or exec naming
 * it. */
static void graph_copies_stage_host_memory(void **state) {
  static uint32_t src[N], dst[N], other[N];
  CUstream s, cs;
  CUdeviceptr a;
  CUgraph g, c, p;
  CUgraphExec e, ec;
  CUgraphNode up, down, cup, child;
  CUDA_MEMCPY3D cp;
  CUgraphExecUpdateResultInfo ui;
  uint64_t live0 = hostd_record_live_bytes();
  (void)state;
  graph_open(&s, &a, &g);
  for (int i = 0; i < N; i++)
    src[i] = (uint32_t)i, dst[i] = 0, other[i] = 500 + (uint32_t)i;
  cp = host_copy(src, a, sizeof(src), 0);
  assert_int_equal(cuGraphAddMemcpyNode(&up, g, NULL, 0, &cp, NULL), CUDA_SUCCESS);
  cp = host_copy(dst, a, sizeof(dst), 1);
  assert_int_equal(cuGraphAddMemcpyNode(&down, g, &up, 1, &cp, NULL), CUDA_SUCCESS);
  /* Their getters answer the host memory named, not the stages. */
  CUDA_MEMCPY3D gp;
  assert_int_equal(cuGraphMemcpyNodeGetParams(up, &gp), CUDA_SUCCESS);
  assert_int_equal(gp.srcMemoryType, CU_MEMORYTYPE_HOST);
  assert_ptr_equal(gp.srcHost, src);
  assert_int_equal(gp.dstMemoryType, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(gp.dstDevice, a);
  assert_int_equal(gp.WidthInBytes, sizeof(src));
  assert_int_equal(cuGraphMemcpyNodeGetParams(down, &gp), CUDA_SUCCESS);
  assert_int_equal(gp.dstMemoryType, CU_MEMORYTYPE_HOST);
  assert_ptr_equal(gp.dstHost, dst);
  assert_int_equal(gp.srcDevice, a);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  unsigned long htod0 = ops(CALL_OP_HTOD), dtoh0 = ops(CALL_OP_DTOH);
  assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
  src[0] = 77; /* after the launch: natively racy, here not sent */
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_HTOD) - htod0, 1);
  assert_int_equal(ops(CALL_OP_DTOH) - dtoh0, 1);
  assert_int_equal(dst[0], 0);
  assert_int_equal(dst[N - 1], N - 1);
  /* Not read back before a covering synchronisation. */
  src[1] = 41;
  assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(cs), CUDA_SUCCESS); /* another stream's: not covering */
  assert_int_equal(dst[1], 1);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(dst[0], 77);
  assert_int_equal(dst[1], 41);

  /* A clone, its upload given another buffer; the original destroyed. */
  assert_int_equal(cuGraphClone(&c, g), CUDA_SUCCESS);
  assert_int_equal(cuGraphNodeFindInClone(&cup, up, c), CUDA_SUCCESS);
  cp = host_copy(other, a, sizeof(other), 0);
  assert_int_equal(cuGraphMemcpyNodeSetParams(cup, &cp), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&ec, c, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(ec, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(dst[5], 505);
  src[2] = 42;
  assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS); /* the original's exec still works */
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(dst[2], 42);
  assert_int_equal(dst[5], 5);

  /* Refused: as a child graph, by an exec update, launched into a capture. */
  assert_int_equal(cuGraphCreate(&p, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddChildGraphNode(&child, p, NULL, 0, c), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphExecUpdate_v2(ec, c, &ui), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  assert_int_equal(ui.result, CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  assert_int_equal(cuGraphLaunch(ec, cs), CUDA_ERROR_NOT_SUPPORTED);
  CUgraph captured;
  assert_int_equal(cuStreamEndCapture(cs, &captured), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(captured), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(p), CUDA_SUCCESS);

  /* The clone's upload made a device copy again: no more staging for the
   * execs made after. */
  CUdeviceptr b;
  assert_int_equal(cuMemAlloc(&b, N * 4), CUDA_SUCCESS);
  memset(&cp, 0, sizeof(cp));
  cp.srcMemoryType = CU_MEMORYTYPE_DEVICE, cp.srcDevice = b;
  cp.dstMemoryType = CU_MEMORYTYPE_DEVICE, cp.dstDevice = a;
  cp.WidthInBytes = N * 4, cp.Height = 1, cp.Depth = 1;
  assert_int_equal(cuGraphMemcpyNodeSetParams(cup, &cp), CUDA_SUCCESS);
  CUgraphExec ec2;
  assert_int_equal(cuGraphInstantiateWithFlags(&ec2, c, 0), CUDA_SUCCESS);
  htod0 = ops(CALL_OP_HTOD);
  assert_int_equal(cuGraphLaunch(ec2, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_HTOD) - htod0, 0);

  assert_int_equal(cuGraphExecDestroy(ec2), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecDestroy(ec), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(c), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(b), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(cs), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), live0); /* every stage buffer freed */
}

/* Asynchronous copies of pageable memory captured into a graph: their
 * bytes cannot travel with the request (the capture would keep tallyd's
 * copy of them), so each goes through a stage: at every launch the upload
 * sends the host bytes as they are then, and the download lands at the
 * synchronisation; the capture's graph holds only device copies; an
 * invalidated capture leaves no stage behind. */
static void captured_host_copies_go_through_stages(void **state) {
  static uint32_t src[N], out[N];
  CUstream s;
  CUdeviceptr q;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode nodes[4];
  size_t count = 4;
  uint64_t live0 = hostd_record_live_bytes();
  (void)state;
  for (int i = 0; i < N; i++)
    src[i] = 100 + (uint32_t)i, out[i] = 0;
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&q, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyHtoDAsync(q, src, N * 4, s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoHAsync(out, q, N * 4, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  assert_int_equal(out[0], 0); /* captured, not run */
  assert_int_equal(cuGraphGetNodes(g, nodes, &count), CUDA_SUCCESS);
  assert_int_equal(count, 2);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  for (int round = 0; round < 2; round++) {
    src[N - 1] = 7 + (uint32_t)round;
    assert_int_equal(cuGraphLaunch(e, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_int_equal(out[0], 100);
    assert_int_equal(out[N - 1], 7 + (uint32_t)round);
  }
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  /* Invalidated: its stage goes with it. */
  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyHtoDAsync(q, src, N * 4, s), CUDA_SUCCESS);
  assert_int_not_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_int_equal(cuMemFree(q), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), live0);
}

static atomic_int destroyed;
static void CUDA_CB destroy_count(void *arg) {
  atomic_fetch_add(&destroyed, *(int *)arg);
}

/* Whether destroyed reaches want within 5 s (the destructors run on a
 * thread of their own). */
static bool destroyed_reaches(int want) {
  for (int i = 0; i < 500 && atomic_load(&destroyed) < want; i++)
    usleep(10000);
  usleep(20000); /* and no more come */
  return atomic_load(&destroyed) == want;
}

/* User objects (NCCL hangs a captured collective's resources on a graph
 * this way): the application's references, a graph's (moved or new), an
 * exec's, a clone's and a parent graph's copies; the destructor runs once,
 * when the last owner goes, on another thread; what the driver refuses. */
static void user_objects_live_as_long_as_their_owners(void **state) {
  static int one = 1, ten = 10;
  CUuserObject o, o2;
  CUgraph g, c, p, child;
  CUgraphExec e;
  CUgraphNode en, cn;
  (void)state;
  atomic_store(&destroyed, 0);
  assert_int_equal(cuUserObjectCreate(&o, &one, destroy_count, 1, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuUserObjectCreate(&o, &one, destroy_count, 0,
                                      CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
                   CUDA_ERROR_INVALID_VALUE);
  /* The application's own references. */
  assert_int_equal(cuUserObjectCreate(&o, &ten, destroy_count, 2,
                                      CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
                   CUDA_SUCCESS);
  assert_int_equal(cuUserObjectRelease(o, 1), CUDA_SUCCESS);
  assert_true(destroyed_reaches(0));
  assert_int_equal(cuUserObjectRetain(o, 2), CUDA_SUCCESS);
  assert_int_equal(cuUserObjectRelease(o, 3), CUDA_SUCCESS);
  assert_true(destroyed_reaches(10));
  /* A graph's (moved), its exec's and its clone's. */
  assert_int_equal(cuUserObjectCreate(&o, &one, destroy_count, 1,
                                      CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
                   CUDA_SUCCESS);
  assert_int_equal(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddEmptyNode(&en, g, NULL, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE), CUDA_SUCCESS);
  assert_int_equal(cuGraphReleaseUserObject(g, o, 2), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphClone(&c, g), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(c), CUDA_SUCCESS);
  assert_true(destroyed_reaches(10));
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_true(destroyed_reaches(11));
  /* New references of a graph, then a parent's copy through a child node. */
  assert_int_equal(cuUserObjectCreate(&o2, &one, destroy_count, 1,
                                      CU_USER_OBJECT_NO_DESTRUCTOR_SYNC),
                   CUDA_SUCCESS);
  assert_int_equal(cuGraphCreate(&child, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddEmptyNode(&en, child, NULL, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphRetainUserObject(child, o2, 1, 0), CUDA_SUCCESS);
  assert_int_equal(cuUserObjectRelease(o2, 1), CUDA_SUCCESS); /* the caller's own */
  assert_int_equal(cuGraphCreate(&p, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddChildGraphNode(&cn, p, NULL, 0, child), CUDA_SUCCESS);
  assert_int_equal(cuGraphReleaseUserObject(child, o2, 1), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(child), CUDA_SUCCESS);
  assert_true(destroyed_reaches(11));
  assert_int_equal(cuGraphDestroy(p), CUDA_SUCCESS);
  assert_true(destroyed_reaches(12));
}

/* A kernel node's attributes: one set is read back, copied to another
 * kernel node; a device-updatable node's handle is written back into the
 * value set, as PyTorch's dynamic graphs expect; a memset node has none. */
static void kernel_node_attributes(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g;
  CUgraphNode ms, k1, k2;
  uint32_t v = 5;
  uint64_t n = 8;
  void *params[] = {&a, &v, &n};
  CUkernelNodeAttrValue val, got;
  (void)state;
  graph_open(&s, &a, &g);
  add_memset2(&ms, g, NULL, 0, a);
  fill_node(&k1, g, &ms, params);
  fill_node(&k2, g, &k1, params);
  memset(&val, 0, sizeof(val));
  val.priority = 3;
  assert_int_equal(cuGraphKernelNodeSetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, &val),
                   CUDA_SUCCESS);
  memset(&got, 0xff, sizeof(got));
  assert_int_equal(cuGraphKernelNodeGetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got),
                   CUDA_SUCCESS);
  assert_int_equal(got.priority, 3);
  assert_int_equal(cuGraphKernelNodeCopyAttributes(k2, k1), CUDA_SUCCESS);
  memset(&got, 0, sizeof(got));
  assert_int_equal(cuGraphKernelNodeGetAttribute(k2, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got),
                   CUDA_SUCCESS);
  assert_int_equal(got.priority, 3);
  memset(&val, 0, sizeof(val));
  val.deviceUpdatableKernelNode.deviceUpdatable = 1;
  assert_int_equal(cuGraphKernelNodeSetAttribute(
                       k2, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &val),
                   CUDA_SUCCESS);
  assert_non_null(val.deviceUpdatableKernelNode.devNode);
  assert_int_equal(cuGraphKernelNodeGetAttribute(ms, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphKernelNodeGetAttribute(k1, CU_LAUNCH_ATTRIBUTE_PRIORITY, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* NCCL's way of hanging its own nodes on a capture: the capture's graph and
 * dependencies from capture info, a node added to that graph after them,
 * then cuStreamUpdateCaptureDependencies so that what is captured next runs
 * after it (set, then added); refused on a stream that does not capture
 * and for a node of another graph. */
static void nodes_added_to_an_open_capture(void **state) {
  CUstream s, other;
  CUdeviceptr a;
  CUgraph g, cg, done, x;
  CUgraphExec e;
  CUgraphNode xn, mn, fn;
  const CUgraphNode *deps = NULL;
  const CUgraphEdgeData *edges = NULL;
  CUstreamCaptureStatus st;
  cuuint64_t id = 0;
  size_t nd = 0;
  uint32_t v = 7, got[N];
  uint64_t n = 8;
  void *params[] = {&a, &v, &n};
  CUDA_MEMSET_NODE_PARAMS mp;
  (void)state;
  graph_open(&s, &a, &g);
  assert_int_equal(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuStreamUpdateCaptureDependencies_v2(s, NULL, NULL, 0, 0),
                   CUDA_ERROR_ILLEGAL_STATE);
  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32Async(a, 1, N, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &edges, &nd), CUDA_SUCCESS);
  assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(nd, 1);
  memset(&mp, 0, sizeof(mp));
  mp.dst = a, mp.value = 5, mp.elementSize = 4, mp.width = N / 2, mp.height = 1;
  assert_int_equal(cuGraphAddMemsetNode(&xn, cg, deps, nd, &mp, NULL), CUDA_SUCCESS);
  assert_int_equal(
      cuStreamUpdateCaptureDependencies_v2(s, &xn, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES),
      CUDA_SUCCESS);
  assert_int_equal(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &edges, &nd), CUDA_SUCCESS);
  assert_int_equal(nd, 1);
  assert_ptr_equal(deps[0], xn);
  assert_int_equal(cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, params, NULL), CUDA_SUCCESS);
  /* Added: the next node depends on the kernel and on a second memset. */
  assert_int_equal(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &edges, &nd), CUDA_SUCCESS);
  fn = deps[0];
  mp.dst = a + (N - 1) * 4, mp.value = 9, mp.width = 1;
  assert_int_equal(cuGraphAddMemsetNode(&mn, cg, &fn, 1, &mp, NULL), CUDA_SUCCESS);
  assert_int_equal(
      cuStreamUpdateCaptureDependencies_v2(s, &mn, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES),
      CUDA_SUCCESS);
  assert_int_equal(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, &edges, &nd), CUDA_SUCCESS);
  assert_int_equal(nd, 2);
  assert_true((deps[0] == fn && deps[1] == mn) || (deps[0] == mn && deps[1] == fn));
  /* The kernel's node depends on the added memset alone. */
  CUgraphNode kd[4];
  size_t nk = 4;
  assert_int_equal(cuGraphNodeGetDependencies_v2(fn, kd, NULL, &nk), CUDA_SUCCESS);
  assert_int_equal(nk, 1);
  assert_ptr_equal(kd[0], xn);
  /* A host node, as NCCL adds one, run at every replay. */
  CUDA_HOST_NODE_PARAMS hp = {.fn = count_run, .userData = NULL};
  CUgraphNode hn;
  assert_int_equal(cuGraphAddHostNode(&hn, cg, &mn, 1, &hp), CUDA_SUCCESS);
  assert_int_equal(
      cuStreamUpdateCaptureDependencies_v2(s, &hn, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES),
      CUDA_SUCCESS);
  assert_int_equal(cuGraphCreate(&x, 0), CUDA_SUCCESS);
  CUgraphNode foreign;
  assert_int_equal(cuGraphAddEmptyNode(&foreign, x, NULL, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamUpdateCaptureDependencies_v2(s, &foreign, NULL, 1, 0),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuStreamEndCapture(s, &done), CUDA_SUCCESS);
  assert_ptr_equal(done, cg);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, done, 0), CUDA_SUCCESS);
  int runs0 = atomic_load(&host_runs);
  replay(e, s, a, got);
  assert_int_equal(atomic_load(&host_runs), runs0 + 1);
  assert_int_equal(got[0], 7);        /* the kernel, after the added memset */
  assert_int_equal(got[8], 5);        /* the added memset, after the captured one */
  assert_int_equal(got[N / 2], 1);    /* the captured memset alone */
  assert_int_equal(got[N - 1], 9);    /* the second added node */
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(done), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(x), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(other), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Two replays of e on s, each after q is cleared: the N words at q are v. */
static void replays_fill(CUgraphExec e, CUstream s, CUdeviceptr q, uint32_t v) {
  uint32_t got[N];
  for (int i = 0; i < 2; i++) {
    assert_int_equal(cuMemsetD32(q, 0, N), CUDA_SUCCESS);
    replay(e, s, q, got);
    assert_int_equal(got[0], v);
    assert_int_equal(got[N - 1], v);
  }
}

/* Memory nodes made by hand (the samples' graphMemoryNodes): an allocation
 * node's memory set and copied out at every replay and freed by a free
 * node after them; through cuGraphAddNode too; their getters; what the
 * driver refuses (no size, a shareable handle, another device); the
 * memory goes with the graph holding the free node. */
static void memory_nodes_made_by_hand(void **state) {
  CUstream s;
  CUdeviceptr q;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode an, ms, cp, fn, bad;
  CUDA_MEM_ALLOC_NODE_PARAMS ap, back;
  CUdeviceptr freed = 0;
  uint64_t live0 = hostd_record_live_bytes();
  (void)state;
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&q, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuGraphCreate(&g, 0), CUDA_SUCCESS);
  memset(&ap, 0, sizeof(ap));
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.bytesize = N * 4;
  assert_int_equal(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap), CUDA_SUCCESS);
  assert_true(ap.dptr != 0);
  add_memset2(&ms, g, &an, 1, ap.dptr);
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof(c));
  c.srcMemoryType = CU_MEMORYTYPE_DEVICE, c.srcDevice = ap.dptr;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE, c.dstDevice = q;
  c.WidthInBytes = N * 4, c.Height = 1, c.Depth = 1;
  assert_int_equal(cuGraphAddMemcpyNode(&cp, g, &ms, 1, &c, NULL), CUDA_SUCCESS);
  CUgraphNodeParams fp = {.type = CU_GRAPH_NODE_TYPE_MEM_FREE};
  fp.free.dptr = ap.dptr;
  assert_int_equal(cuGraphAddNode_v2(&fn, g, &cp, NULL, 1, &fp), CUDA_SUCCESS);
  /* Their getters. */
  assert_int_equal(cuGraphMemAllocNodeGetParams(an, &back), CUDA_SUCCESS);
  assert_int_equal(back.dptr, ap.dptr);
  assert_int_equal(back.bytesize, N * 4);
  assert_int_equal(back.poolProps.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  assert_int_equal(cuGraphMemFreeNodeGetParams(fn, &freed), CUDA_SUCCESS);
  assert_int_equal(freed, ap.dptr);
  assert_int_equal(cuGraphMemFreeNodeGetParams(an, &freed), CUDA_ERROR_INVALID_VALUE);
  CUgraphNodeType ty;
  assert_int_equal(cuGraphNodeGetType(an, &ty), CUDA_SUCCESS);
  assert_int_equal(ty, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
  /* Refused as the driver refuses them. */
  CUDA_MEM_ALLOC_NODE_PARAMS no = ap;
  no.bytesize = 0;
  assert_int_equal(cuGraphAddMemAllocNode(&bad, g, NULL, 0, &no), CUDA_ERROR_INVALID_VALUE);
  no = ap, no.poolProps.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  assert_int_equal(cuGraphAddMemAllocNode(&bad, g, NULL, 0, &no), CUDA_ERROR_INVALID_VALUE);
  no = ap, no.poolProps.location.id = 1;
  assert_int_equal(cuGraphAddMemAllocNode(&bad, g, NULL, 0, &no), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(cuGraphAddMemFreeNode(&bad, g, NULL, 0, q + 4), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY3D gp;
  assert_int_equal(cuGraphMemcpyNodeGetParams(cp, &gp), CUDA_SUCCESS);
  assert_int_equal(gp.srcMemoryType, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(gp.srcDevice, ap.dptr);
  assert_int_equal(gp.dstDevice, q);
  assert_int_equal(cuGraphMemcpyNodeGetParams(an, &gp), CUDA_ERROR_INVALID_VALUE);
  /* Not destroyed: the allocation is the tenant's from the node's adding on. */
  assert_int_equal(cuGraphDestroyNode(an), CUDA_ERROR_NOT_SUPPORTED);
  assert_int_equal(cuGraphDestroyNode(fn), CUDA_ERROR_NOT_SUPPORTED);
  /* Replayed twice; the memory goes with the graph and its exec, whose
   * flags are the ones it was made with. */
  cuuint64_t xf = 0;
  const cuuint64_t auto_free = CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, auto_free), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecGetFlags(e, &xf), CUDA_SUCCESS);
  assert_int_equal(xf, auto_free);
  replays_fill(e, s, q, 2);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecGetFlags(e, &xf), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(q), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), live0);
}

/* cuGraphRemoveDependencies and cuGraphDestroyNode: an edge goes (and is
 * refused once gone), a node goes with its edges and is no longer a node,
 * and the graph replays without it. */
static void nodes_and_edges_removed(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode ms, seven, after, deps[2];
  CUgraphNodeType ty;
  uint32_t got[N];
  size_t n = 2;
  (void)state;
  graph_open(&s, &a, &g);
  add_memset2(&ms, g, NULL, 0, a);
  CUDA_MEMSET_NODE_PARAMS mp;
  memset(&mp, 0, sizeof(mp));
  mp.dst = a, mp.value = 7, mp.elementSize = 4, mp.width = N, mp.height = 1;
  assert_int_equal(cuGraphAddMemsetNode(&seven, g, &ms, 1, &mp, NULL), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddEmptyNode(&after, g, &seven, 1), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddDependencies(g, &ms, &after, NULL, 1), CUDA_SUCCESS);
  assert_int_equal(cuGraphRemoveDependencies(g, &ms, &seven, NULL, 1), CUDA_SUCCESS);
  assert_int_equal(cuGraphNodeGetDependencies(seven, deps, NULL, &n), CUDA_SUCCESS);
  assert_int_equal(n, 0);
  assert_int_equal(cuGraphRemoveDependencies(g, &ms, &seven, NULL, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphRemoveDependencies(g, &ms, &after, NULL, 1), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddDependencies(g, &ms, &after, NULL, 1), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroyNode(seven), CUDA_SUCCESS);
  assert_int_equal(cuGraphNodeGetType(seven, &ty), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphDestroyNode(seven), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphDestroyNode(NULL), CUDA_ERROR_INVALID_VALUE);
  n = 2;
  assert_int_equal(cuGraphGetNodes(g, NULL, &n), CUDA_SUCCESS);
  assert_int_equal(n, 2);
  n = 2;
  assert_int_equal(cuGraphNodeGetDependencies(after, deps, NULL, &n), CUDA_SUCCESS);
  assert_int_equal(n, 1);
  assert_true(deps[0] == ms);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[0], 2); /* the memset of 7 went with its node */
  assert_int_equal(got[N - 1], 2);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* Stream-ordered allocation captured (PyTorch's cudaMallocAsync backend
 * under a CUDA graph): an allocation made and freed inside the capture is
 * the graph's; its exec replays the work on it every launch, after the
 * graph is destroyed too; the memory goes with the last of them. */
static void captured_allocation_belongs_to_the_graph(void **state) {
  CUstream s;
  CUdeviceptr q, p = 0;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode nodes[8];
  size_t count = 8;
  uint64_t live0 = hostd_record_live_bytes();
  (void)state;
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&q, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  assert_int_equal(cuMemAllocAsync(&p, N * 4, s), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32Async(p, 9, N, s), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoDAsync(q, p, N * 4, s), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeAsync(p, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  assert_int_equal(cuGraphGetNodes(g, nodes, &count), CUDA_SUCCESS);
  CUgraphNodeType last;
  assert_int_equal(cuGraphNodeGetType(nodes[count - 1], &last), CUDA_SUCCESS);
  assert_int_equal(last, CU_GRAPH_NODE_TYPE_MEM_FREE);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  replays_fill(e, s, q, 9);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(q), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), live0);
}

/* A graph's edges listed; an exec's nodes turned off and on again
 * (cuGraphNodeSetEnabled, XLA's barriers): a disabled kernel node does not
 * run at the next replay and runs again once enabled; the state is read
 * back; the graph's own node is untouched (a second exec runs it); a node the driver cannot disable (an
 * event record) is refused at the next synchronisation, as an update's
 * error is. */
static void exec_nodes_enabled_and_disabled(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g;
  CUgraphExec e, e2;
  CUgraphNode ms, kn, en;
  CUevent ev;
  uint32_t v = 5, got[N];
  uint64_t n = 8;
  unsigned on = 7;
  void *params[] = {&a, &v, &n};
  (void)state;
  graph_open(&s, &a, &g);
  add_memset2(&ms, g, NULL, 0, a);
  fill_node(&kn, g, &ms, params);
  assert_int_equal(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddEventRecordNode(&en, g, &kn, 1, ev), CUDA_SUCCESS);
  /* Its edges (cuGraphGetEdges): the count, then the pairs. */
  CUgraphNode from[4], to[4];
  CUgraphEdgeData ed[4];
  size_t ne = 0;
  assert_int_equal(cuGraphGetEdges(g, NULL, NULL, &ne), CUDA_SUCCESS);
  assert_int_equal(ne, 2);
  ne = 4;
  memset(ed, 0xff, sizeof(ed));
  assert_int_equal(cuGraphGetEdges_v2(g, from, to, ed, &ne), CUDA_SUCCESS);
  assert_int_equal(ne, 2);
  for (size_t i = 0; i < 2; i++)
    assert_true((from[i] == ms && to[i] == kn) || (from[i] == kn && to[i] == en));
  assert_true(from[0] != from[1]);
  assert_null(from[2]);
  assert_null(to[3]);
  assert_int_equal(ed[0].type, 0);
  ne = 1;
  assert_int_equal(cuGraphGetEdges(g, from, to, &ne), CUDA_SUCCESS);
  assert_int_equal(ne, 1);
  assert_int_equal(cuGraphGetEdges(g, from, NULL, &ne), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphInstantiateWithFlags(&e2, g, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphNodeGetEnabled(e, kn, &on), CUDA_SUCCESS);
  assert_int_equal(on, 1);
  assert_int_equal(cuGraphNodeSetEnabled(e, kn, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphNodeGetEnabled(e, kn, &on), CUDA_SUCCESS);
  assert_int_equal(on, 0);
  replay(e, s, a, got);
  assert_int_equal(got[0], 2); /* the memset ran, the kernel did not */
  replay(e2, s, a, got);
  assert_int_equal(got[0], 5);
  assert_int_equal(cuGraphNodeSetEnabled(e, kn, 1), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32(a, 0, N), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[0], 5);
  assert_int_equal(got[8], 2);
  assert_int_equal(cuGraphNodeSetEnabled(e, en, 0), CUDA_SUCCESS);
  assert_int_not_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuGraphNodeGetEnabled(e, (CUgraphNode)(uintptr_t)0xdead0, &on),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphNodeGetEnabled(NULL, kn, &on), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphExecDestroy(e2), CUDA_SUCCESS);
  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy(ev), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A captured graph's nodes asked what they are, as code that captures then
 * patches a kernel's arguments does: cuGraphGetNodes, cuGraphNodeGetType
 * (tallyd answers for nodes this process did not add), the kernel node's
 * parameters (v1 and v2: function, grid, block, kernelParams pointing at
 * its argument values), the memset's, and an event record node's added
 * after the capture; a kernel
 * node's parameters changed through the pointers it gave and set on the
 * exec take effect; a host node's function and data; a getter of another
 * type is refused as the driver refuses it. */
static void captured_nodes_describe_themselves(void **state) {
  CUstream s;
  CUdeviceptr a;
  CUgraph g, h;
  CUgraphExec e;
  CUevent ev, got_ev = NULL;
  CUgraphNode nodes[8], kn = NULL, mn = NULL, en = NULL, hn;
  size_t count = 8;
  uint32_t v = 9, got[N];
  uint64_t n = 5;
  void *params[] = {&a, &v, &n};
  int kernels = 0, memsets = 0, records = 0;
  CUDA_KERNEL_NODE_PARAMS kp;
  CUDA_KERNEL_NODE_PARAMS_v1 k1;
  CUDA_MEMSET_NODE_PARAMS mp;
  CUDA_HOST_NODE_PARAMS hp = {.fn = count_run, .userData = &count}, hq;
  (void)state;
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&a, N * 4), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING), CUDA_SUCCESS);
  assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD32Async(a, 4, N, s), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(fill, 1, 2, 1, 32, 1, 1, 16, s, params, NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddEventRecordNode(&en, g, NULL, 0, ev), CUDA_SUCCESS);
  assert_int_equal(cuGraphGetNodes(g, nodes, &count), CUDA_SUCCESS);
  assert_int_equal(count, 3);
  for (size_t i = 0; i < count; i++) {
    CUgraphNodeType t;
    assert_int_equal(cuGraphNodeGetType(nodes[i], &t), CUDA_SUCCESS);
    if (t == CU_GRAPH_NODE_TYPE_KERNEL)
      kn = nodes[i], kernels++;
    else if (t == CU_GRAPH_NODE_TYPE_MEMSET)
      mn = nodes[i], memsets++;
    else if (t == CU_GRAPH_NODE_TYPE_EVENT_RECORD && nodes[i] == en)
      records++;
  }
  assert_int_equal(kernels + memsets + records, 3);
  assert_int_equal(kernels * memsets * records, 1);

  /* The kernel node, both versions. */
  assert_int_equal(cuGraphKernelNodeGetParams_v2(kn, &kp), CUDA_SUCCESS);
  assert_ptr_equal(kp.func, fill);
  assert_null(kp.kern);
  assert_int_equal(kp.gridDimY, 2);
  assert_int_equal(kp.blockDimX, 32);
  assert_int_equal(kp.sharedMemBytes, 16);
  assert_null(kp.extra);
  assert_non_null(kp.kernelParams);
  assert_int_equal(*(CUdeviceptr *)kp.kernelParams[0], a);
  assert_int_equal(*(uint32_t *)kp.kernelParams[1], 9);
  assert_int_equal(*(uint64_t *)kp.kernelParams[2], 5);
  assert_int_equal(cuGraphKernelNodeGetParams(kn, &k1), CUDA_SUCCESS);
  assert_ptr_equal(k1.func, fill);
  assert_ptr_equal(k1.kernelParams, kp.kernelParams); /* the node's storage, as natively */
  assert_int_equal(*(uint64_t *)k1.kernelParams[2], 5);
  /* Patched through the pointers it handed out, then set on an exec. */
  assert_int_equal(cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[4], 9);
  assert_int_equal(got[5], 4);
  *(uint32_t *)kp.kernelParams[1] = 12;
  *(uint64_t *)kp.kernelParams[2] = 7;
  assert_int_equal(cuGraphExecKernelNodeSetParams_v2(e, kn, &kp), CUDA_SUCCESS);
  replay(e, s, a, got);
  assert_int_equal(got[6], 12);
  assert_int_equal(got[7], 4);

  /* The memset and the event record. */
  assert_int_equal(cuGraphMemsetNodeGetParams(mn, &mp), CUDA_SUCCESS);
  assert_int_equal(mp.dst, a);
  assert_int_equal(mp.value, 4);
  assert_int_equal(mp.elementSize, 4);
  assert_int_equal(mp.width, N);
  assert_int_equal(mp.height, 1);
  assert_int_equal(cuGraphEventRecordNodeGetEvent(en, &got_ev), CUDA_SUCCESS);
  assert_ptr_equal(got_ev, ev);
  /* Another type's getter: refused, as the driver refuses it. */
  assert_int_equal(cuGraphKernelNodeGetParams_v2(mn, &kp), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphMemsetNodeGetParams(kn, &mp), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphEventWaitNodeGetEvent(en, &got_ev), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuGraphKernelNodeGetParams_v2((CUgraphNode)(uintptr_t)0xdead0, &kp),
                   CUDA_ERROR_INVALID_VALUE);

  /* A host node of a graph made here. */
  assert_int_equal(cuGraphCreate(&h, 0), CUDA_SUCCESS);
  assert_int_equal(cuGraphAddHostNode(&hn, h, NULL, 0, &hp), CUDA_SUCCESS);
  assert_int_equal(cuGraphHostNodeGetParams(hn, &hq), CUDA_SUCCESS);
  assert_ptr_equal(hq.fn, count_run);
  assert_ptr_equal(hq.userData, &count);
  assert_int_equal(cuGraphDestroy(h), CUDA_SUCCESS);

  assert_int_equal(cuGraphExecDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS); /* the storage handed out goes with it */
  assert_int_equal(cuEventDestroy(ev), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(torch_cuda_graph_sequence),
      cmocka_unit_test(sync_during_capture_invalidates),
      cmocka_unit_test(explicit_graph_sequence),
      cmocka_unit_test(capture_to_graph),
      cmocka_unit_test(graph_printed_as_dot),
      cmocka_unit_test(generic_node_api),
      cmocka_unit_test(exec_memset_copy_and_event_updates),
      cmocka_unit_test(graph_node_setters),
      cmocka_unit_test(device_graph_memory),
      cmocka_unit_test(host_functions_of_graphs_run_at_every_replay),
      cmocka_unit_test(captured_nodes_describe_themselves),
      cmocka_unit_test(exec_nodes_enabled_and_disabled),
      cmocka_unit_test(graph_copies_stage_host_memory),
      cmocka_unit_test(captured_allocation_belongs_to_the_graph),
      cmocka_unit_test(memory_nodes_made_by_hand),
      cmocka_unit_test(nodes_and_edges_removed),
      cmocka_unit_test(captured_host_copies_go_through_stages),
      cmocka_unit_test(user_objects_live_as_long_as_their_owners),
      cmocka_unit_test(kernel_node_attributes),
      cmocka_unit_test(nodes_added_to_an_open_capture),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
