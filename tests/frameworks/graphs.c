/* graphs.c: a CUDA C driver-API program using stream capture and explicit
 * CUDA graphs, as frameworks' graph modes do.
 *
 * usage: graphs capture|explicit
 *   capture   the work (a kernel filling x, a memset of y on a second
 *             stream joined to the capture through events, y = a*x + y,
 *             a device copy z = y, a memset of z's first words) run eagerly,
 *             then captured (status and capture id checked on both streams
 *             during the capture and after it) and replayed three times
 *   explicit  the same work as an explicit graph (memset and kernel nodes,
 *             a copy node, a child graph, an event record node, an added
 *             dependency), replayed, a kernel node's parameters changed
 *             in the exec, replayed, then an exec update from the graph
 * Prints checksums (deterministic) and "done"; exit 1 on any error, with
 * the call and its result.
 */
#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *n_ = NULL;                                                                       \
      cuGetErrorName(r_, &n_);                                                                     \
      printf("FAIL %s: %s (%d)\n", #x, n_ ? n_ : "?", (int)r_);                                    \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

#define N     (1u << 20)
#define BLOCK 256

/* fill_u32(p, v, n): p[i] = v; axpy_u32(y, x, a, n): y[i] = a * x[i] + y[i]. */
static const char ptx[] =
    ".version 8.0\n.target sm_90\n.address_size 64\n"
    ".visible .entry fill_u32(.param .u64 p0, .param .u32 p1, .param .u64 p2)\n{\n"
    " .reg .pred %p<2>; .reg .b32 %r<5>; .reg .b64 %rd<9>;\n"
    " ld.param.u64 %rd2, [p0]; ld.param.u32 %r1, [p1]; ld.param.u64 %rd3, [p2];\n"
    " mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mul.wide.u32 %rd4, %r2, %r3;\n"
    " mov.u32 %r4, %tid.x; cvt.u64.u32 %rd5, %r4; add.s64 %rd1, %rd4, %rd5;\n"
    " setp.ge.u64 %p1, %rd1, %rd3; @%p1 bra DONE;\n"
    " cvta.to.global.u64 %rd6, %rd2; shl.b64 %rd7, %rd1, 2; add.s64 %rd8, %rd6, %rd7;\n"
    " st.global.u32 [%rd8], %r1;\nDONE:\n ret;\n}\n"
    ".visible .entry axpy_u32(.param .u64 q0, .param .u64 q1, .param .u32 q2, .param .u64 q3)\n{\n"
    " .reg .pred %p<2>; .reg .b32 %r<8>; .reg .b64 %rd<12>;\n"
    " ld.param.u64 %rd2, [q0]; ld.param.u64 %rd3, [q1]; ld.param.u32 %r1, [q2];\n"
    " ld.param.u64 %rd4, [q3];\n"
    " mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mul.wide.u32 %rd5, %r2, %r3;\n"
    " mov.u32 %r4, %tid.x; cvt.u64.u32 %rd6, %r4; add.s64 %rd1, %rd5, %rd6;\n"
    " setp.ge.u64 %p1, %rd1, %rd4; @%p1 bra DONE2;\n"
    " cvta.to.global.u64 %rd7, %rd2; cvta.to.global.u64 %rd8, %rd3; shl.b64 %rd9, %rd1, 2;\n"
    " add.s64 %rd10, %rd8, %rd9; ld.global.u32 %r5, [%rd10]; add.s64 %rd11, %rd7, %rd9;\n"
    " ld.global.u32 %r6, [%rd11]; mad.lo.s32 %r7, %r5, %r1, %r6; st.global.u32 [%rd11], %r7;\n"
    "DONE2:\n ret;\n}\n";

static CUfunction fill, axpy;
static CUcontext ctx; /* the nodes' context */
static CUdeviceptr x, y, z;
static uint32_t host[N];

/* Sum of z's words (read back after the stream is synchronised). */
static uint64_t checksum(CUstream s) {
  uint64_t sum = 0;
  CK(cuStreamSynchronize(s));
  CK(cuMemcpyDtoH(host, z, sizeof(host)));
  for (uint32_t i = 0; i < N; i++)
    sum += host[i] * (uint64_t)(i % 7 + 1);
  return sum;
}

static void launch_fill(CUstream s, CUdeviceptr p, uint32_t v) {
  uint64_t n = N;
  void *args[] = {&p, &v, &n};
  CK(cuLaunchKernel(fill, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, s, args, NULL));
}

static void launch_axpy(CUstream s, uint32_t a) {
  uint64_t n = N;
  void *args[] = {&y, &x, &a, &n};
  CK(cuLaunchKernel(axpy, N / BLOCK, 1, 1, BLOCK, 1, 1, 0, s, args, NULL));
}

/* The work on s, with y's memset on s2 (forked and joined through events). */
static void work(CUstream s, CUstream s2, CUevent fork, CUevent join) {
  CK(cuEventRecord(fork, s));
  CK(cuStreamWaitEvent(s2, fork, 0));
  CK(cuMemsetD32Async(y, 1, N, s2));
  CK(cuEventRecord(join, s2));
  launch_fill(s, x, 3);
  CK(cuStreamWaitEvent(s, join, 0));
  launch_axpy(s, 2);
  CK(cuMemcpyDtoDAsync(z, y, N * 4, s));
  CK(cuMemsetD32Async(z, 9, 16, s));
}

static void reset(CUstream s) {
  CK(cuMemsetD32Async(x, 0, N, s));
  CK(cuMemsetD32Async(y, 0, N, s));
  CK(cuMemsetD32Async(z, 0, N, s));
  CK(cuStreamSynchronize(s));
}

static int capture(void) {
  CUstream s, s2;
  CUevent fork, join;
  CUgraph g;
  CUgraphExec e;
  CUstreamCaptureStatus st, st2;
  cuuint64_t id = 0, id2 = 0;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  reset(s);
  work(s, s2, fork, join);
  printf("eager sum %llu\n", (unsigned long long)checksum(s));
  reset(s);

  CK(cuStreamIsCapturing(s, &st));
  printf("before capture: status %d\n", (int)st);
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  work(s, s2, fork, join);
  CK(cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL));
  CK(cuStreamGetCaptureInfo(s2, &st2, &id2, NULL, NULL, NULL, NULL));
  printf("during capture: status %d and %d, same capture %d\n", (int)st, (int)st2, id == id2);
  CK(cuStreamEndCapture(s, &g));
  CK(cuStreamIsCapturing(s2, &st2));
  printf("after capture: status %d\n", (int)st2);
  printf("captured work ran: %d\n", checksum(s) != 0);
  CK(cuGraphInstantiate(&e, g, 0));
  for (int i = 0; i < 3; i++) {
    CK(cuGraphLaunch(e, s));
    printf("replay %d sum %llu\n", i, (unsigned long long)checksum(s));
    reset(s);
  }
  CK(cuGraphExecDestroy(e));
  CK(cuGraphDestroy(g));
  CK(cuEventDestroy(fork));
  CK(cuEventDestroy(join));
  CK(cuStreamDestroy(s2));
  CK(cuStreamDestroy(s));
  return 0;
}

static CUgraphNode kernel_node(CUgraph g, const CUgraphNode *deps, size_t n, CUfunction f,
                               void **args) {
  CUDA_KERNEL_NODE_PARAMS kp;
  CUgraphNode node;
  memset(&kp, 0, sizeof(kp));
  kp.func = f;
  kp.gridDimX = N / BLOCK, kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = BLOCK, kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = args;
  CK(cuGraphAddKernelNode(&node, g, deps, n, &kp));
  return node;
}

static CUgraphNode memset_node(CUgraph g, const CUgraphNode *deps, size_t n, CUdeviceptr p,
                               uint32_t v, size_t width) {
  CUDA_MEMSET_NODE_PARAMS mp;
  CUgraphNode node;
  memset(&mp, 0, sizeof(mp));
  mp.dst = p, mp.value = v, mp.elementSize = 4, mp.width = width, mp.height = 1;
  CK(cuGraphAddMemsetNode(&node, g, deps, n, &mp, ctx));
  return node;
}

static int explicit_graph(void) {
  CUstream s;
  CUevent done;
  CUgraph g, child;
  CUgraphExec e;
  CUgraphNode ms, kf, ka, cp, ch, ev, deps[2];
  CUDA_MEMCPY3D c;
  CUDA_KERNEL_NODE_PARAMS kp;
  CUgraphExecUpdateResultInfo ui;
  uint32_t three = 3, a = 2;
  uint64_t n = N;
  void *fargs[] = {&x, &three, &n}, *aargs[] = {&y, &x, &a, &n};
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  reset(s);
  CK(cuGraphCreate(&g, 0));
  ms = memset_node(g, NULL, 0, y, 1, N);
  kf = kernel_node(g, NULL, 0, fill, fargs);
  deps[0] = ms, deps[1] = kf;
  ka = kernel_node(g, deps, 2, axpy, aargs);
  memset(&c, 0, sizeof(c));
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.srcDevice = y, c.dstDevice = z, c.WidthInBytes = N * 4, c.Height = 1, c.Depth = 1;
  CK(cuGraphAddMemcpyNode(&cp, g, NULL, 0, &c, ctx));
  CK(cuGraphAddDependencies(g, &ka, &cp, NULL, 1)); /* an edge added afterwards */
  CK(cuGraphCreate(&child, 0));
  (void)memset_node(child, NULL, 0, z, 9, 16);
  CK(cuGraphAddChildGraphNode(&ch, g, &cp, 1, child));
  CK(cuGraphAddEventRecordNode(&ev, g, &ch, 1, done));
  CK(cuGraphInstantiateWithFlags(&e, g, 0));
  CK(cuGraphLaunch(e, s));
  CK(cuEventSynchronize(done));
  printf("explicit sum %llu\n", (unsigned long long)checksum(s));
  reset(s);
  a = 5;
  memset(&kp, 0, sizeof(kp));
  kp.func = axpy;
  kp.gridDimX = N / BLOCK, kp.gridDimY = kp.gridDimZ = 1;
  kp.blockDimX = BLOCK, kp.blockDimY = kp.blockDimZ = 1;
  kp.kernelParams = aargs;
  CK(cuGraphExecKernelNodeSetParams(e, ka, &kp));
  CK(cuGraphLaunch(e, s));
  printf("a=5 sum %llu\n", (unsigned long long)checksum(s));
  reset(s);
  CK(cuGraphExecUpdate(e, g, &ui)); /* back to the graph's a = 2 */
  printf("update result %d\n", (int)ui.result);
  CK(cuGraphLaunch(e, s));
  printf("updated sum %llu\n", (unsigned long long)checksum(s));
  CK(cuGraphExecDestroy(e));
  CK(cuGraphDestroy(child));
  CK(cuGraphDestroy(g));
  CK(cuEventDestroy(done));
  CK(cuStreamDestroy(s));
  return 0;
}

int main(int argc, char **argv) {
  CUdevice dev;
  CUmodule mod;
  int rc;
  if (argc != 2) {
    fprintf(stderr, "usage: graphs capture|explicit\n");
    return 2;
  }
  CK(cuInit(0));
  CK(cuDeviceGet(&dev, 0));
  CK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CK(cuCtxSetCurrent(ctx));
  CK(cuModuleLoadData(&mod, ptx));
  CK(cuModuleGetFunction(&fill, mod, "fill_u32"));
  CK(cuModuleGetFunction(&axpy, mod, "axpy_u32"));
  CK(cuMemAlloc(&x, N * 4));
  CK(cuMemAlloc(&y, N * 4));
  CK(cuMemAlloc(&z, N * 4));
  if (strcmp(argv[1], "capture") == 0)
    rc = capture();
  else if (strcmp(argv[1], "explicit") == 0)
    rc = explicit_graph();
  else
    return 2;
  CK(cuMemFree(x));
  CK(cuMemFree(y));
  CK(cuMemFree(z));
  CK(cuModuleUnload(mod));
  if (rc == 0)
    printf("done\n");
  return rc;
}
