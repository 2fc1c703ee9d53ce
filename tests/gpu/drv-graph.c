/* drv-graph.c: graph node updates, graph memory, stream attributes and the driver's first
 * names, through the CUDA driver API.
 *
 * An explicit graph of a memset, a copy and an event record: replayed; its exec's memset,
 * copy and event given new parameters (as XLA's command buffers update theirs) and replayed;
 * the graph's own nodes given new parameters and instantiated again (the first exec keeps
 * its own); cuGraphExecNodeSetParams through the tagged union; the device's graph memory
 * (trim, a high watermark read and reset) and allocation and free nodes replayed; a stream's
 * attributes (L2 window, sync policy, priority, copy to another stream) and
 * cuStreamGetCtx_v2; cuCtxPushCurrent / PopCurrent bound by their first names with dlsym;
 * host nodes and a host function captured into a graph, run at every replay between the work
 * around them.  With the argument "pinned":
 * copy nodes between device memory and cuMemAllocHost memory, replayed and given another
 * host source, then the same with pageable memory, and a pinned round trip captured from a
 * stream (over TCP, and for pageable memory, Tally stages these copies in device memory around
 * each launch).  Only deterministic facts are printed.
 */
#include <cuda.h>
#include <dlfcn.h>

#include "e2e-common.h"

enum { N = 4096 }; /* u32 words per buffer */

static void sum_of(const char *label, CUdeviceptr d) {
  static uint32_t h[N];
  E2E_CU(cuMemcpyDtoH(h, d, sizeof(h)));
  e2e_print_sum(label, h, sizeof(h));
}

static CUDA_MEMCPY3D copy1d(CUmemorytype st, const void *sh, CUdeviceptr sd, CUmemorytype dt,
                            void *dh, CUdeviceptr dd, size_t n) {
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof(c));
  c.srcMemoryType = st, c.srcHost = sh, c.srcDevice = sd;
  c.dstMemoryType = dt, c.dstHost = dh, c.dstDevice = dd;
  c.WidthInBytes = n, c.Height = 1, c.Depth = 1;
  return c;
}

static CUDA_MEMSET_NODE_PARAMS memset32(CUdeviceptr d, uint32_t v, size_t n) {
  CUDA_MEMSET_NODE_PARAMS m;
  memset(&m, 0, sizeof(m));
  m.dst = d, m.value = v, m.elementSize = 4, m.width = n, m.height = 1;
  return m;
}

static void test_updates(CUstream s) {
  CUdeviceptr a, b, c;
  CUgraph g;
  CUgraphExec e, e2;
  CUgraphNode ms, cp, rec;
  CUevent ev1, ev2;
  E2E_CU(cuMemAlloc(&a, N * 4));
  E2E_CU(cuMemAlloc(&b, N * 4));
  E2E_CU(cuMemAlloc(&c, N * 4));
  E2E_CU(cuMemsetD32(b, 1, N));
  E2E_CU(cuMemsetD32(c, 2, N));
  E2E_CU(cuEventCreate(&ev1, 0));
  E2E_CU(cuEventCreate(&ev2, 0));
  E2E_CU(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS m = memset32(a, 7, N);
  E2E_CU(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, NULL));
  CUDA_MEMCPY3D cpy = copy1d(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_DEVICE, NULL, b, N * 4);
  E2E_CU(cuGraphAddMemcpyNode(&cp, g, &ms, 1, &cpy, NULL));
  E2E_CU(cuGraphAddEventRecordNode(&rec, g, &cp, 1, ev1));
  E2E_CU(cuGraphInstantiateWithFlags(&e, g, 0));
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  sum_of("replay b", b);

  /* The exec's nodes: a memset of half, a copy into c, another event. */
  m = memset32(a, 9, N / 2);
  E2E_CU(cuGraphExecMemsetNodeSetParams(e, ms, &m, NULL));
  cpy = copy1d(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_DEVICE, NULL, c, N * 2);
  E2E_CU(cuGraphExecMemcpyNodeSetParams(e, cp, &cpy, NULL));
  E2E_CU(cuGraphExecEventRecordNodeSetEvent(e, rec, ev2));
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  printf("ev2 after replay: %s\n", e2e_cu_name(cuEventQuery(ev2)));
  sum_of("exec update b", b);
  sum_of("exec update c", c);

  /* Through the tagged union. */
  CUgraphNodeParams p;
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_MEMSET;
  p.memset.dst = a, p.memset.value = 11, p.memset.elementSize = 4;
  p.memset.width = N, p.memset.height = 1;
  E2E_CU(cuGraphExecNodeSetParams(e, ms, &p));
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  sum_of("union update c", c);

  /* The graph's own nodes; a new exec takes them, the first keeps its own. */
  m = memset32(a, 13, N);
  E2E_CU(cuGraphMemsetNodeSetParams(ms, &m));
  cpy = copy1d(CU_MEMORYTYPE_DEVICE, NULL, a, CU_MEMORYTYPE_DEVICE, NULL, b, N * 4);
  E2E_CU(cuGraphMemcpyNodeSetParams(cp, &cpy));
  E2E_CU(cuGraphEventRecordNodeSetEvent(rec, ev1));
  E2E_CU(cuGraphInstantiateWithFlags(&e2, g, 0));
  E2E_CU(cuGraphLaunch(e2, s));
  E2E_CU(cuStreamSynchronize(s));
  sum_of("graph set b", b);
  E2E_CU(cuMemsetD32(c, 2, N));
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  sum_of("first exec c", c);

  E2E_CU(cuGraphExecDestroy(e));
  E2E_CU(cuGraphExecDestroy(e2));
  E2E_CU(cuGraphDestroy(g));
  E2E_CU(cuEventDestroy(ev1));
  E2E_CU(cuEventDestroy(ev2));
  E2E_CU(cuMemFree(a));
  E2E_CU(cuMemFree(b));
  E2E_CU(cuMemFree(c));
}

/* A graph's host function: appends its tag to a log (no CUDA call, as the driver requires). */
static char host_log[64];
static int host_len;
static void CUDA_CB log_tag(void *arg) {
  if (host_len < (int)sizeof(host_log) - 1)
    host_log[host_len++] = *(const char *)arg;
}

static void test_host_functions(CUstream s) {
  static const char tag_a = 'a', tag_b = 'b', tag_c = 'c';
  CUdeviceptr d;
  CUgraph g, cg;
  CUgraphExec e, ce;
  CUgraphNode ms, h1, h2, cp;
  CUdeviceptr d2;
  E2E_CU(cuMemAlloc(&d, N * 4));
  E2E_CU(cuMemAlloc(&d2, N * 4));
  E2E_CU(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS m = memset32(d, 21, N);
  E2E_CU(cuGraphAddMemsetNode(&ms, g, NULL, 0, &m, NULL));
  CUDA_HOST_NODE_PARAMS ha = {.fn = log_tag, .userData = (void *)&tag_a};
  E2E_CU(cuGraphAddHostNode(&h1, g, &ms, 1, &ha));
  CUgraphNodeParams p;
  memset(&p, 0, sizeof(p));
  p.type = CU_GRAPH_NODE_TYPE_HOST;
  p.host.fn = log_tag, p.host.userData = (void *)&tag_b;
  E2E_CU(cuGraphAddNode_v2(&h2, g, &h1, NULL, 1, &p));
  CUDA_MEMCPY3D cpy = copy1d(CU_MEMORYTYPE_DEVICE, NULL, d, CU_MEMORYTYPE_DEVICE, NULL, d2, N * 4);
  E2E_CU(cuGraphAddMemcpyNode(&cp, g, &h2, 1, &cpy, NULL));
  E2E_CU(cuGraphInstantiateWithFlags(&e, g, 0));
  for (int i = 0; i < 3; i++)
    E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  host_log[host_len] = 0;
  printf("host nodes ran: %s\n", host_log);
  sum_of("after host nodes", d2);

  host_len = 0;
  E2E_CU(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  E2E_CU(cuMemsetD32Async(d, 22, N, s));
  E2E_CU(cuLaunchHostFunc(s, log_tag, (void *)&tag_c));
  E2E_CU(cuMemcpyDtoDAsync(d2, d, N * 4, s));
  E2E_CU(cuStreamEndCapture(s, &cg));
  host_log[host_len] = 0;
  printf("captured host function ran at capture: %s\n", host_len ? "yes" : "no");
  E2E_CU(cuGraphInstantiateWithFlags(&ce, cg, 0));
  E2E_CU(cuGraphLaunch(ce, s));
  E2E_CU(cuGraphLaunch(ce, s));
  E2E_CU(cuStreamSynchronize(s));
  host_log[host_len] = 0;
  printf("captured host function ran: %s\n", host_log);
  sum_of("after captured host function", d2);
  E2E_CU(cuGraphExecDestroy(ce));
  E2E_CU(cuGraphDestroy(cg));
  E2E_CU(cuGraphExecDestroy(e));
  E2E_CU(cuGraphDestroy(g));
  E2E_CU(cuMemFree(d));
  E2E_CU(cuMemFree(d2));
}

/* Nodes and edges removed: a memset of 7 cut loose from the memset of 2
 * before it and destroyed, a host node added after an empty one by an edge
 * and destroyed with it; counts and the replayed bytes printed. */
static void test_node_removal(CUstream s) {
  CUdeviceptr d;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode two, seven, em, host, deps[4];
  size_t n = 4;
  char tag_d = 'd';
  E2E_CU(cuMemAlloc(&d, N * 4));
  E2E_CU(cuGraphCreate(&g, 0));
  CUDA_MEMSET_NODE_PARAMS m2 = memset32(d, 2, N), m7 = memset32(d, 7, N);
  E2E_CU(cuGraphAddMemsetNode(&two, g, NULL, 0, &m2, NULL));
  E2E_CU(cuGraphAddMemsetNode(&seven, g, &two, 1, &m7, NULL));
  E2E_CU(cuGraphAddEmptyNode(&em, g, NULL, 0));
  CUDA_HOST_NODE_PARAMS hp = {.fn = log_tag, .userData = (void *)&tag_d};
  E2E_CU(cuGraphAddHostNode(&host, g, NULL, 0, &hp));
  E2E_CU(cuGraphAddDependencies(g, &em, &host, NULL, 1));
  E2E_CU(cuGraphNodeGetDependencies(host, deps, NULL, &n));
  printf("host node's dependencies: %zu, the empty node: %s\n", n,
         n && deps[0] == em ? "yes" : "no");
  for (int i = 0; i < 2; i++)
    printf("remove the edge%s: %s\n", i ? " again" : "",
           e2e_cu_name(cuGraphRemoveDependencies(g, &two, &seven, NULL, 1)));
  printf("destroy the memset: %s\n", e2e_cu_name(cuGraphDestroyNode(seven)));
  printf("destroy the host node: %s\n", e2e_cu_name(cuGraphDestroyNode(host)));
  n = 0;
  E2E_CU(cuGraphGetNodes(g, NULL, &n));
  printf("nodes left: %zu\n", n);
  n = 0;
  E2E_CU(cuGraphNodeGetDependentNodes(em, NULL, NULL, &n));
  printf("the empty node's dependents: %zu\n", n);
  host_len = 0;
  E2E_CU(cuGraphInstantiateWithFlags(&e, g, 0));
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  host_log[host_len] = 0;
  printf("host functions ran: \"%s\"\n", host_log);
  sum_of("after the removals", d);
  E2E_CU(cuGraphExecDestroy(e));
  E2E_CU(cuGraphDestroy(g));
  E2E_CU(cuMemFree(d));
}

/* An allocation node, a memset of it, a copy out and a free node, replayed twice.
 * The memset and copy name the context: the driver cannot find one from an
 * address that is not mapped until the graph runs (it answers
 * CUDA_ERROR_INVALID_VALUE for a NULL context there). */
static void test_memory_nodes(CUstream s) {
  CUdeviceptr q;
  CUcontext ctx;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode an, ms, cp, fn;
  CUDA_MEM_ALLOC_NODE_PARAMS ap;
  CUDA_MEMSET_NODE_PARAMS mp;
  uint32_t got[N];
  E2E_CU(cuCtxGetCurrent(&ctx));
  E2E_CU(cuMemAlloc(&q, N * 4));
  E2E_CU(cuGraphCreate(&g, 0));
  memset(&ap, 0, sizeof(ap));
  ap.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  ap.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  ap.bytesize = N * 4;
  printf("allocation node: %s\n", e2e_cu_name(cuGraphAddMemAllocNode(&an, g, NULL, 0, &ap)));
  memset(&mp, 0, sizeof(mp));
  mp.dst = ap.dptr, mp.value = 0x2a, mp.elementSize = 4, mp.width = N, mp.height = 1;
  E2E_CU(cuGraphAddMemsetNode(&ms, g, &an, 1, &mp, ctx));
  CUDA_MEMCPY3D c = copy1d(CU_MEMORYTYPE_DEVICE, NULL, ap.dptr, CU_MEMORYTYPE_DEVICE, NULL, q,
                           N * 4);
  E2E_CU(cuGraphAddMemcpyNode(&cp, g, &ms, 1, &c, ctx));
  printf("free node: %s\n", e2e_cu_name(cuGraphAddMemFreeNode(&fn, g, &cp, 1, ap.dptr)));
  E2E_CU(cuGraphInstantiateWithFlags(&e, g, 0));
  for (int i = 0; i < 2; i++) {
    E2E_CU(cuMemsetD32(q, 0, N));
    E2E_CU(cuGraphLaunch(e, s));
    E2E_CU(cuStreamSynchronize(s));
    E2E_CU(cuMemcpyDtoH(got, q, sizeof(got)));
    e2e_check(got[0] == 0x2a && got[N - 1] == 0x2a, "memory nodes replayed");
  }
  E2E_CU(cuGraphExecDestroy(e));
  E2E_CU(cuGraphDestroy(g));
  E2E_CU(cuMemFree(q));
}

static void test_graph_memory(void) {
  cuuint64_t v = 1, zero = 0;
  printf("graph mem trim: %s\n", e2e_cu_name(cuDeviceGraphMemTrim(0)));
  printf("graph mem used high: %s\n",
         e2e_cu_name(cuDeviceGetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &v)));
  printf("graph mem reset high: %s\n",
         e2e_cu_name(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH, &zero)));
  printf("graph mem set current: %s\n",
         e2e_cu_name(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT, &zero)));
}

static void test_stream_attributes(void) {
  CUstream s, t;
  CUstreamAttrValue v, got;
  CUcontext c = NULL, cur = NULL;
  CUgreenCtx green = (CUgreenCtx)1;
  int least = 0, greatest = 0, prio = 1;
  E2E_CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  E2E_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  E2E_CU(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
  memset(&got, 0, sizeof(got));
  E2E_CU(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got));
  printf("default sync policy: %d\n", (int)got.syncPolicy);
  memset(&v, 0, sizeof(v));
  v.accessPolicyWindow.num_bytes = 1 << 20;
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  printf("set window: %s\n",
         e2e_cu_name(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v)));
  memset(&got, 0, sizeof(got));
  E2E_CU(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got));
  printf("window: bytes %zu ratio %.2f props %d/%d\n", got.accessPolicyWindow.num_bytes,
         (double)got.accessPolicyWindow.hitRatio, (int)got.accessPolicyWindow.hitProp,
         (int)got.accessPolicyWindow.missProp);
  v.accessPolicyWindow.hitRatio = 2.0f;
  printf("set window ratio 2: %s\n",
         e2e_cu_name(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v)));
  memset(&v, 0, sizeof(v));
  v.priority = greatest;
  printf("set priority: %s\n",
         e2e_cu_name(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v)));
  E2E_CU(cuStreamGetPriority(s, &prio));
  printf("priority is the greatest: %s\n", prio == greatest ? "yes" : "no");
  E2E_CU(cuStreamCopyAttributes(t, s));
  memset(&got, 0, sizeof(got));
  E2E_CU(cuStreamGetAttribute(t, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got));
  printf("copied window bytes: %zu\n", got.accessPolicyWindow.num_bytes);
  E2E_CU(cuCtxGetCurrent(&cur));
  E2E_CU(cuStreamGetCtx_v2(s, &c, &green));
  printf("stream ctx is current: %s, green ctx: %s\n", c == cur ? "yes" : "no",
         green ? "some" : "none");
  E2E_CU(cuStreamDestroy(s));
  E2E_CU(cuStreamDestroy(t));
}

static void test_first_names(void) {
  CUresult (*pop)(CUcontext *) = (CUresult(*)(CUcontext *))dlsym(RTLD_DEFAULT, "cuCtxPopCurrent");
  CUresult (*push)(CUcontext) = (CUresult(*)(CUcontext))dlsym(RTLD_DEFAULT, "cuCtxPushCurrent");
  CUcontext cur = NULL, got = NULL, after = NULL;
  if (!pop || !push) {
    e2e_check(0, "cuCtxPushCurrent/PopCurrent by their first names");
    return;
  }
  E2E_CU(cuCtxGetCurrent(&cur));
  printf("pop by first name: %s\n", e2e_cu_name(pop(&got)));
  printf("push by first name: %s\n", e2e_cu_name(push(got)));
  E2E_CU(cuCtxGetCurrent(&after));
  printf("same context after: %s\n", got == cur && after == cur ? "yes" : "no");
}

/* A graph uploading N words from host memory in to the device and downloading them into out,
 * replayed, after in changed and after its exec's upload was given in2; kind names it. */
static void round_trip(CUstream s, const char *kind, uint32_t *in, uint32_t *in2, uint32_t *out) {
  char what[96];
  CUdeviceptr d;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode up, down;
  E2E_CU(cuMemAlloc(&d, N * 4));
  memset(out, 0, N * 4);
  E2E_CU(cuGraphCreate(&g, 0));
  CUDA_MEMCPY3D c = copy1d(CU_MEMORYTYPE_HOST, in, 0, CU_MEMORYTYPE_DEVICE, NULL, d, N * 4);
  printf("%s upload node: %s\n", kind,
         e2e_cu_name(cuGraphAddMemcpyNode(&up, g, NULL, 0, &c, NULL)));
  c = copy1d(CU_MEMORYTYPE_DEVICE, NULL, d, CU_MEMORYTYPE_HOST, out, 0, N * 4);
  printf("%s download node: %s\n", kind,
         e2e_cu_name(cuGraphAddMemcpyNode(&down, g, &up, 1, &c, NULL)));
  E2E_CU(cuGraphInstantiateWithFlags(&e, g, 0));
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  snprintf(what, sizeof(what), "%s round trip", kind);
  e2e_check(memcmp(in, out, N * 4) == 0, what);
  in[0] ^= 0xffffffffu;
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuCtxSynchronize());
  snprintf(what, sizeof(what), "%s round trip after the source changed", kind);
  e2e_check(memcmp(in, out, N * 4) == 0, what);
  c = copy1d(CU_MEMORYTYPE_HOST, in2, 0, CU_MEMORYTYPE_DEVICE, NULL, d, N * 4);
  E2E_CU(cuGraphExecMemcpyNodeSetParams(e, up, &c, NULL));
  E2E_CU(cuGraphLaunch(e, s));
  E2E_CU(cuStreamSynchronize(s));
  snprintf(what, sizeof(what), "%s round trip from another source", kind);
  e2e_check(memcmp(in2, out, N * 4) == 0, what);
  E2E_CU(cuGraphExecDestroy(e));
  E2E_CU(cuGraphDestroy(g));
  E2E_CU(cuMemFree(d));
}

/* The same round trip captured from a stream, pinned memory on both sides: the upload takes
 * the host bytes of each launch, the download lands by the synchronisation. */
static void captured_round_trip(CUstream s, uint32_t *in, uint32_t *out) {
  CUdeviceptr d;
  CUgraph g;
  CUgraphExec e;
  E2E_CU(cuMemAlloc(&d, N * 4));
  memset(out, 0, N * 4);
  E2E_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  E2E_CU(cuMemcpyHtoDAsync(d, in, N * 4, s));
  E2E_CU(cuMemcpyDtoHAsync(out, d, N * 4, s));
  E2E_CU(cuStreamEndCapture(s, &g));
  E2E_CU(cuGraphInstantiateWithFlags(&e, g, 0));
  for (int i = 0; i < 2; i++) {
    in[0] ^= 0xffffffffu;
    E2E_CU(cuGraphLaunch(e, s));
    E2E_CU(cuStreamSynchronize(s));
    e2e_check(memcmp(in, out, N * 4) == 0, "captured pinned round trip");
  }
  E2E_CU(cuGraphExecDestroy(e));
  E2E_CU(cuGraphDestroy(g));
  E2E_CU(cuMemFree(d));
}

/* cuMemAllocHost memory, then pageable memory. */
static void test_host_copies(CUstream s) {
  static uint32_t in[N], in2[N], out[N];
  uint32_t *pin, *pin2, *pout;
  E2E_CU(cuMemAllocHost((void **)&pin, N * 4));
  E2E_CU(cuMemAllocHost((void **)&pin2, N * 4));
  E2E_CU(cuMemAllocHost((void **)&pout, N * 4));
  e2e_fill_u32(pin, N, 1);
  e2e_fill_u32(pin2, N, 2);
  round_trip(s, "pinned", pin, pin2, pout);
  captured_round_trip(s, pin, pout);
  E2E_CU(cuMemFreeHost(pin));
  E2E_CU(cuMemFreeHost(pin2));
  E2E_CU(cuMemFreeHost(pout));
  e2e_fill_u32(in, N, 3);
  e2e_fill_u32(in2, N, 4);
  round_trip(s, "pageable", in, in2, out);
}

int main(int argc, char **argv) {
  CUdevice dev;
  CUcontext ctx;
  CUstream s;
  E2E_CU(cuInit(0));
  E2E_CU(cuDeviceGet(&dev, 0));
  E2E_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  E2E_CU(cuCtxSetCurrent(ctx));
  E2E_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (argc > 1 && strcmp(argv[1], "pinned") == 0) {
    test_host_copies(s);
  } else {
    test_updates(s);
    test_host_functions(s);
    test_graph_memory();
    test_memory_nodes(s);
    test_node_removal(s);
    test_stream_attributes();
    test_first_names();
  }
  E2E_CU(cuStreamDestroy(s));
  E2E_CU(cuDevicePrimaryCtxRelease(dev));
  return e2e_finish();
}
