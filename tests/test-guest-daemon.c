/* test-guest-daemon.c: the guest library driven against tallyd on the
 * recording device.
 *
 * This process is a tenant (linked against guestlib/libcuda.so.1, calling
 * the driver API) and also runs tallyd's server in a thread, with the
 * recording GPU backend (hostd/gpu-record.c): host memory at fake device
 * addresses, kernels that only count, except fill_u32 and fault.  Other
 * tenants are child processes (tests/guest-tenant-helper).  What is checked:
 * local answers never cross the wire, fire-and-forget batching, deferred
 * error surfacing, handle and range validation across tenants, module
 * images sent once, priorities by class, cleanup after a tenant dies, the
 * order of work enqueued by threads one after another (shm and TCP).
 * Never GPU coverage: the GPU tests are in tests/gpu/.
 */
#include <cuda.h>
#include <cudaProfiler.h>
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "guestlib/tally-ext.h"
#include "hostd/hostd-int.h"
#include "policy/pol.h"
#include "tests/guest-daemon-harness.h"

static const char module_text[] = "TALLYREC\n"
                                  "kernel fill_u32 8,4,8\n"
                                  "kernel fault\n"
                                  "kernel pair 4,8\n"
                                  "global table 256\n";

static int setup(void **state) {
  (void)state;
  /* The sticky-fault test leaves this process's own tenant connected after
   * the fault: no grace period may close it under the test. */
  return gd_start("test-guest-daemon", 60000);
}

static int teardown(void **state) {
  (void)state;
  return gd_stop();
}

/* Attribute requests of either form (one attribute, or all at once). */
static unsigned long attr_asks(void) {
  return ops(CALL_OP_FUNC_ATTR) + ops(CALL_OP_FUNC_ATTRS);
}

static unsigned long ops_total(void) {
  unsigned long n = 0;
  for (int i = 0; i < CALL_OP_COUNT; i++)
    n += __atomic_load_n(&hostd__op_count[i], __ATOMIC_RELAXED);
  return n;
}

/* ---------------------------------------------------------------- tests */

static void init_gives_the_daemons_device_snapshot(void **state) {
  int n = 0, major = 0, sms = 0;
  char name[128];
  (void)state;
  assert_int_equal(cuDeviceGetCount(&n), CUDA_SUCCESS);
  assert_int_equal(n, 1);
  assert_int_equal(cuDeviceGetName(name, sizeof(name), 0), CUDA_SUCCESS);
  assert_string_equal(name, "Tally recording device (no GPU)");
  assert_int_equal(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0),
                   CUDA_SUCCESS);
  assert_int_equal(major, 9);
  assert_int_equal(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0),
                   CUDA_SUCCESS);
  assert_int_equal(sms, 132);
  assert_int_equal(cuInit(0), CUDA_SUCCESS); /* a second cuInit is a no-op */
}

/* Attribute numbers outside 1..CU_DEVICE_ATTRIBUTE_MAX - 1 are refused, as
 * the driver refuses them, though the snapshot has room beyond. */
static void unknown_device_attributes_are_refused(void **state) {
  int v = 7;
  (void)state;
  assert_int_equal(cuDeviceGetAttribute(&v, (CUdevice_attribute)0, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuDeviceGetAttribute(&v, (CUdevice_attribute)(CALL_ATTR_MAX - 1), 0),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuDeviceGetAttribute(&v, (CUdevice_attribute)-1, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(v, 7);
  assert_int_equal(
      cuDeviceGetAttribute(&v, (CUdevice_attribute)(CU_DEVICE_ATTRIBUTE_MAX - 1), 0),
      CUDA_SUCCESS);
}

static void local_queries_never_cross_the_wire(void **state) {
  unsigned long before = ops_total();
  CUcontext c;
  CUdevice d;
  CUuuid u;
  size_t mem;
  int v, least, greatest, active;
  unsigned flags;
  CUstreamCaptureStatus cs;
  (void)state;
  for (int i = 0; i < 1000; i++) {
    assert_int_equal(cuDeviceGetAttribute(&v, (CUdevice_attribute)(1 + i % 100), 0), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetDevice(&d), CUDA_SUCCESS);
  }
  assert_int_equal(cuDeviceGetUuid(&u, 0), CUDA_SUCCESS);
  assert_int_equal(cuDeviceTotalMem(&mem, 0), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
  assert_int_equal(cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
  assert_int_equal(active, 1);
  assert_int_equal(cuStreamIsCapturing(NULL, &cs), CUDA_SUCCESS);
  assert_int_equal(cs, CU_STREAM_CAPTURE_STATUS_NONE);
  assert_ptr_equal(c, ctx);
  assert_int_equal(ops_total(), before);
}

static void copies_move_bytes_through_the_daemon(void **state) {
  CUdeviceptr p;
  uint32_t in[1024], out[1024];
  (void)state;
  for (int i = 0; i < 1024; i++)
    in[i] = (uint32_t)i * 2654435761u;
  assert_int_equal(cuMemAlloc(&p, sizeof(in)), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyHtoD(p, in, sizeof(in)), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out, p, sizeof(out)), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof(in));
  assert_int_equal(cuMemsetD32(p + 16, 0xabcdef01u, 4), CUDA_SUCCESS);
  assert_int_equal(cuMemcpy((CUdeviceptr)(uintptr_t)out, p, sizeof(out)), CUDA_SUCCESS);
  assert_int_equal(out[4], 0xabcdef01u);
  assert_int_equal(out[8], in[8]);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

static void large_copy_is_chunked_and_intact(void **state) {
  size_t n = (size_t)20 << 20; /* 2.5 chunks of CALL_CHUNK */
  uint8_t *in = malloc(n), *out = malloc(n);
  CUdeviceptr p;
  unsigned long before = ops(CALL_OP_HTOD);
  (void)state;
  assert_non_null(in);
  assert_non_null(out);
  for (size_t i = 0; i < n; i++)
    in[i] = (uint8_t)(i * 131 + (i >> 16));
  assert_int_equal(cuMemAlloc(&p, n), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyHtoD(p, in, n), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_HTOD) - before, 3);
  assert_int_equal(cuMemcpyDtoH(out, p, n), CUDA_SUCCESS);
  assert_memory_equal(in, out, n);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  free(in);
  free(out);
}

static void module_functions_and_layouts_are_local(void **state) {
  CUmodule m;
  CUfunction f, g;
  size_t off, size;
  unsigned long before;
  const char *name;
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  before = ops_total();
  assert_int_equal(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuFuncGetParamInfo(f, 1, &off, &size), CUDA_SUCCESS);
  assert_int_equal(off, 8);
  assert_int_equal(size, 4);
  assert_int_equal(cuFuncGetParamInfo(f, 2, &off, &size), CUDA_SUCCESS);
  assert_int_equal(off, 16);
  assert_int_equal(cuFuncGetParamInfo(f, 3, &off, &size), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuFuncGetName(&name, f), CUDA_SUCCESS);
  assert_string_equal(name, "fill_u32");
  assert_int_equal(cuModuleGetFunction(&g, m, "nope"), CUDA_ERROR_NOT_FOUND);
  assert_int_equal(ops_total(), before);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  assert_int_equal(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);
}

static void launches_are_fire_and_forget(void **state) {
  CUmodule m;
  CUfunction f;
  CUdeviceptr p;
  uint32_t out[64];
  unsigned long launches, calls;
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&p, sizeof(out)), CUDA_SUCCESS);
  launches = ops(CALL_OP_LAUNCH);
  calls = hostd_server_calls(srv);
  for (uint32_t i = 0; i < 100; i++) {
    uint64_t n = 64;
    void *args[] = {&p, &i, &n};
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 64, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
  }
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
  /* 100 launches executed, two synchronous requests answered: the limits
   * the first launch is checked against (a module's function lacks its
   * thread limit before its load; asked once) and the sync. */
  assert_int_equal(ops(CALL_OP_LAUNCH) - launches, 100);
  assert_int_equal(hostd_server_calls(srv) - calls, 2);
  assert_int_equal(cuMemcpyDtoH(out, p, sizeof(out)), CUDA_SUCCESS);
  for (int i = 0; i < 64; i++)
    assert_int_equal(out[i], 99); /* the last launch wins: order was kept */
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
}

static void launch_error_surfaces_at_next_sync(void **state) {
  CUmodule m;
  CUfunction f;
  CUdeviceptr p;
  uint64_t n = 1;
  uint32_t v = 0;
  void *args[3];
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&p, 64), CUDA_SUCCESS);
  args[0] = &p, args[1] = &v, args[2] = &n;
  /* A foreign stream is only known to the daemon: the launch is
   * fire-and-forget, so it succeeds here and fails at the next sync. */
  assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)0xdead0, args, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS); /* reported once */
  /* A bad shape is refused at the call, as the driver does. */
  assert_int_equal(cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  /* A launch through an unknown handle is refused at once, in the guest. */
  assert_int_equal(cuLaunchKernel((CUfunction)0x4242, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
}

/* cuStreamQuery and cuEventQuery are answered by the daemon's driver, after
 * the tenant's earlier fire-and-forget requests (GPU run 2: a local answer
 * would say CUDA_SUCCESS while a kernel still runs). */
static void queries_return_the_daemons_answer_in_order(void **state) {
  CUmodule m;
  CUfunction f;
  CUstream s;
  CUevent e;
  CUdeviceptr p;
  uint64_t n = 1;
  uint32_t v = 0;
  void *args[3];
  unsigned long calls;
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&p, 64), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&e, CU_EVENT_DEFAULT), CUDA_SUCCESS);
  args[0] = &p, args[1] = &v, args[2] = &n;
  assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL), CUDA_SUCCESS);
  assert_int_equal(cuEventRecord(e, s), CUDA_SUCCESS);
  hostd_record_inject(CUDA_ERROR_NOT_READY); /* the device says: still running */
  calls = hostd_server_calls(srv);
  assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  assert_int_equal(cuEventQuery(e), CUDA_ERROR_NOT_READY);
  assert_int_equal(hostd_server_calls(srv) - calls, 2); /* both asked the daemon */
  hostd_record_inject(CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(cuEventQuery(e), CUDA_SUCCESS);
  /* A post before the query is executed first: its error is the answer. */
  assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)0xdead0, args, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy(e), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
}

static void copies_outside_own_allocations_are_refused(void **state) {
  CUdeviceptr p;
  uint8_t buf[64] = {0};
  (void)state;
  assert_int_equal(cuMemAlloc(&p, 64), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyHtoD(p + 32, buf, 64), CUDA_ERROR_INVALID_VALUE); /* runs past the end */
  assert_int_equal(cuMemcpyDtoH(buf, p - 8, 8), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemsetD8(p, 0, 65), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemFree(p + 8), CUDA_ERROR_INVALID_VALUE); /* not a base */
  assert_int_equal(cuMemcpyDtoD(p, p + 32, 32), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyPeer(p, ctx, p + 32, ctx, 32), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(p), CUDA_ERROR_INVALID_VALUE); /* twice */
}

static void another_tenants_memory_is_refused(void **state) {
  pid_t pid;
  int to_child;
  unsigned long long other = 0;
  FILE *f = helper("alloc-wait", &pid, &to_child, NULL);
  uint8_t buf[16] = {0};
  CUdeviceptr mine;
  (void)state;
  assert_non_null(f);
  assert_int_equal(fscanf(f, "ptr %llx", &other), 1);
  assert_true(other != 0);
  assert_int_equal(cuMemcpyHtoD((CUdeviceptr)other, buf, sizeof(buf)), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemcpyDtoH(buf, (CUdeviceptr)other, sizeof(buf)), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemsetD8((CUdeviceptr)other, 1, 16), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemAlloc(&mine, 16), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoD(mine, (CUdeviceptr)other, 16), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemFree((CUdeviceptr)other), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemFree(mine), CUDA_SUCCESS);
  close(to_child);
  fclose(f);
  assert_true(WIFEXITED(wait_exit(pid)));
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
}

/* The driver's first names of calls whose signature did not change
 * (cuCtxPushCurrent, ...), as a library binding them with dlsym() gets
 * them: the same calls as their _v2 successors. */
static void old_names_are_their_successors(void **state) {
  CUresult (*pop)(CUcontext *) = (CUresult(*)(CUcontext *))dlsym(RTLD_DEFAULT, "cuCtxPopCurrent");
  CUresult (*push)(CUcontext) = (CUresult(*)(CUcontext))dlsym(RTLD_DEFAULT, "cuCtxPushCurrent");
  CUresult (*sdel)(CUstream) = (CUresult(*)(CUstream))dlsym(RTLD_DEFAULT, "cuStreamDestroy");
  CUresult (*edel)(CUevent) = (CUresult(*)(CUevent))dlsym(RTLD_DEFAULT, "cuEventDestroy");
  CUcontext got = NULL, cur = NULL;
  CUstream st;
  CUevent ev;
  (void)state;
  assert_non_null(pop);
  assert_non_null(push);
  assert_non_null(sdel);
  assert_non_null(edel);
  assert_int_equal(pop(&got), CUDA_SUCCESS);
  assert_ptr_equal(got, ctx);
  assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_null(cur);
  assert_int_equal(push(got), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_ptr_equal(cur, ctx);
  assert_int_equal(cuStreamCreate(&st, 0), CUDA_SUCCESS);
  assert_int_equal(sdel(st), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&ev, 0), CUDA_SUCCESS);
  assert_int_equal(edel(ev), CUDA_SUCCESS);
  assert_int_equal(edel(ev), CUDA_ERROR_INVALID_HANDLE); /* gone, as with cuEventDestroy_v2 */
}

/* Stream attributes are kept in the guest, checked as the driver checks
 * them and answered back (no request reaches tallyd); the priority is the
 * one cuStreamGetPriority answers; copies take all of them. */
static void stream_attributes_are_kept_and_checked(void **state) {
  CUstream s, t;
  CUstreamAttrValue v, got;
  CUcontext c = NULL;
  CUgreenCtx green = (CUgreenCtx)1;
  int prio = 0, least = 0, greatest = 0;
  (void)state;
  assert_int_equal(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&t, 0), CUDA_SUCCESS);
  unsigned long before = hostd_server_calls(srv);
  memset(&got, 0xff, sizeof(got));
  assert_int_equal(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got),
                   CUDA_SUCCESS);
  assert_int_equal((int)got.syncPolicy, -1); /* never set: the driver's answer */
  assert_int_equal(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP, &got),
                   CUDA_SUCCESS);
  assert_int_equal(got.memSyncDomainMap.default_, 0);
  assert_int_equal(got.memSyncDomainMap.remote, 1);
  memset(&v, 0, sizeof(v));
  v.accessPolicyWindow.base_ptr = (void *)0x1000;
  v.accessPolicyWindow.num_bytes = 1 << 20;
  v.accessPolicyWindow.hitRatio = 0.6f;
  v.accessPolicyWindow.hitProp = CU_ACCESS_PROPERTY_PERSISTING;
  v.accessPolicyWindow.missProp = CU_ACCESS_PROPERTY_STREAMING;
  assert_int_equal(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v),
                   CUDA_SUCCESS);
  memset(&got, 0, sizeof(got));
  assert_int_equal(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got),
                   CUDA_SUCCESS);
  assert_memory_equal(&got.accessPolicyWindow, &v.accessPolicyWindow, sizeof(v.accessPolicyWindow));
  /* A priority beyond the device's range is clamped, as at creation. */
  memset(&v, 0, sizeof(v));
  v.priority = -100;
  assert_int_equal(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v), CUDA_SUCCESS);
  assert_int_equal(cuStreamGetPriority(s, &prio), CUDA_SUCCESS);
  assert_int_equal(prio, greatest);
  /* Copies take everything, the priority included. */
  assert_int_equal(cuStreamCopyAttributes(t, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamGetAttribute(t, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &got),
                   CUDA_SUCCESS);
  assert_true(got.accessPolicyWindow.num_bytes == 1 << 20);
  assert_int_equal(cuStreamGetPriority(t, &prio), CUDA_SUCCESS);
  assert_int_equal(prio, greatest);
  /* The default stream has attributes of its own. */
  memset(&v, 0, sizeof(v));
  v.syncPolicy = CU_SYNC_POLICY_BLOCKING_SYNC;
  assert_int_equal(cuStreamSetAttribute(NULL, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v),
                   CUDA_SUCCESS);
  assert_int_equal(
      cuStreamGetAttribute(CU_STREAM_LEGACY, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got),
      CUDA_SUCCESS);
  assert_int_equal(got.syncPolicy, CU_SYNC_POLICY_BLOCKING_SYNC);
  assert_int_equal(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &got),
                   CUDA_SUCCESS);
  assert_int_equal((int)got.syncPolicy, -1);
  /* Refused: values the driver refuses, attributes that are not a stream's,
   * streams that are not this process's. */
  memset(&v, 0, sizeof(v));
  v.accessPolicyWindow.hitRatio = 1.5f;
  assert_int_equal(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v),
                   CUDA_ERROR_INVALID_VALUE);
  v.accessPolicyWindow.hitRatio = 0.5f;
  v.accessPolicyWindow.num_bytes = (size_t)1 << 40;
  assert_int_equal(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, &v),
                   CUDA_ERROR_INVALID_VALUE);
  memset(&v, 0, sizeof(v));
  v.syncPolicy = (CUsynchronizationPolicy)9;
  assert_int_equal(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuStreamSetAttribute(s, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, &v),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuStreamGetAttribute((CUstream)0xdead0, CU_LAUNCH_ATTRIBUTE_PRIORITY, &got),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuStreamGetAttribute(s, CU_LAUNCH_ATTRIBUTE_PRIORITY, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  /* No green context is a tenant's: the stream's is none. */
  assert_int_equal(cuStreamGetCtx_v2(s, &c, &green), CUDA_SUCCESS);
  assert_ptr_equal(c, ctx);
  assert_null(green);
  assert_int_equal(hostd_server_calls(srv), before);
  memset(&v, 0, sizeof(v));
  v.syncPolicy = CU_SYNC_POLICY_AUTO;
  assert_int_equal(cuStreamSetAttribute(NULL, CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY, &v),
                   CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(t), CUDA_SUCCESS);
}

static void foreign_handles_are_refused(void **state) {
  CUevent e;
  float ms;
  (void)state;
  assert_int_equal(cuStreamSynchronize((CUstream)0xdead0), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuStreamDestroy((CUstream)0xdead0), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuEventSynchronize((CUevent)0xbeef0), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuEventCreate(&e, 0), CUDA_SUCCESS);
  assert_int_equal(cuEventElapsedTime(&ms, e, (CUevent)0xbeef0), CUDA_ERROR_INVALID_HANDLE);
  /* A record on a foreign stream is fire-and-forget: refused at the next sync. */
  assert_int_equal(cuEventRecord(e, (CUstream)0xdead0), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuEventDestroy(e), CUDA_SUCCESS);
}

static void streams_events_and_legacy_ordering(void **state) {
  CUstream s;
  CUevent a, b;
  float ms = 0;
  unsigned long waits = hostd_record_count(HOSTD_RECORD_WAIT);
  CUdeviceptr p;
  (void)state;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS); /* blocking stream */
  assert_int_equal(cuEventCreate(&a, 0), CUDA_SUCCESS);
  assert_int_equal(cuEventCreate(&b, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&p, 64), CUDA_SUCCESS);
  assert_int_equal(cuEventRecord(a, s), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD8Async(p, 1, 64, s), CUDA_SUCCESS);
  assert_int_equal(cuEventRecord(b, s), CUDA_SUCCESS);
  /* Legacy-stream work after blocking-stream work waits for it. */
  assert_int_equal(cuMemsetD8Async(p, 2, 64, NULL), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_true(hostd_record_count(HOSTD_RECORD_WAIT) > waits);
  assert_int_equal(cuEventSynchronize(b), CUDA_SUCCESS);
  assert_int_equal(cuEventElapsedTime(&ms, a, b), CUDA_SUCCESS);
  assert_true(ms > 0);
  assert_int_equal(cuStreamWaitEvent(NULL, b, 0), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy(a), CUDA_SUCCESS);
  assert_int_equal(cuEventDestroy(b), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

static void module_image_is_sent_once(void **state) {
  size_t n = 100 << 10; /* above the 64 KiB inline limit */
  char *img = malloc(n + 1), path[600];
  CUmodule m1, m2;
  unsigned long before;
  struct stat st;
  int files = 0;
  (void)state;
  assert_non_null(img);
  /* Comment lines of 64 bytes pad it; the pid makes the image unique. */
  memset(img, '#', n);
  for (size_t i = 63; i < n; i += 64)
    img[i] = '\n';
  memcpy(img, module_text, strlen(module_text));
  snprintf(img + strlen(module_text), 32, "# unique %d", (int)getpid());
  img[strlen(img)] = '#';
  img[n] = 0;
  before = hostd_server_blob_puts(srv);
  assert_int_equal(cuModuleLoadData(&m1, img), CUDA_SUCCESS);
  assert_int_equal(hostd_server_blob_puts(srv) - before, 1); /* the bytes, once */
  assert_int_equal(cuModuleLoadData(&m2, img), CUDA_SUCCESS);
  assert_int_equal(hostd_server_blob_puts(srv) - before, 1); /* the id only */
  assert_true(m1 != m2);                                     /* own module per load */
  snprintf(path, sizeof(path), "%s/state/modules", dir);
  assert_int_equal(stat(path, &st), 0);
  {
    FILE *ls;
    char cmd[700], line[256];
    snprintf(cmd, sizeof(cmd), "ls '%s'", path);
    ls = popen(cmd, "r");
    while (ls && fgets(line, sizeof(line), ls))
      files += strstr(line, ".img") != NULL;
    if (ls)
      pclose(ls);
  }
  assert_true(files >= 1);
  assert_int_equal(cuModuleUnload(m1), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m2), CUDA_SUCCESS);
  free(img);
}

static void huge_module_image_loads(void **state) {
  size_t n = (size_t)20 << 20; /* over one frame's 16 MiB */
  char *img = malloc(n + 1);
  CUmodule m;
  CUfunction f;
  unsigned long before = hostd_server_blob_puts(srv);
  (void)state;
  assert_non_null(img);
  memset(img, '#', n);
  for (size_t i = 63; i < n; i += 64)
    img[i] = '\n';
  memcpy(img, module_text, strlen(module_text));
  img[n] = 0;
  assert_int_equal(cuModuleLoadData(&m, img), CUDA_SUCCESS);
  assert_int_equal(hostd_server_blob_puts(srv) - before, 1);
  assert_int_equal(cuModuleGetFunction(&f, m, "pair"), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  free(img);
}

static void module_globals_are_copyable_by_their_tenant(void **state) {
  CUmodule m;
  CUdeviceptr g;
  size_t bytes;
  uint32_t v = 7, back = 0;
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetGlobal(&g, &bytes, m, "table"), CUDA_SUCCESS);
  assert_int_equal(bytes, 256);
  assert_int_equal(cuMemcpyHtoD(g + 4, &v, 4), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(&back, g + 4, 4), CUDA_SUCCESS);
  assert_int_equal(back, 7);
  assert_int_equal(cuMemFree(g), CUDA_ERROR_INVALID_VALUE); /* globals are not freed */
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyHtoD(g + 4, &v, 4), CUDA_ERROR_INVALID_VALUE); /* gone with it */
}

static void library_kernels_and_module_view(void **state) {
  CUlibrary lib, got = NULL;
  CUkernel k, ks[8];
  CUmodule view, m;
  CUfunction f, mf;
  CUdeviceptr p;
  unsigned n = 0;
  uint32_t v = 5, out[4];
  uint64_t cnt = 4;
  void *args[] = {&p, &v, &cnt};
  (void)state;
  assert_int_equal(cuLibraryLoadData(&lib, module_text, NULL, NULL, 0, NULL, NULL, 0),
                   CUDA_SUCCESS);
  assert_int_equal(cuLibraryGetKernelCount(&n, lib), CUDA_SUCCESS);
  assert_int_equal(n, 3);
  assert_int_equal(cuLibraryEnumerateKernels(ks, 8, lib), CUDA_SUCCESS);
  assert_int_equal(cuLibraryGetKernel(&k, lib, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuLibraryGetModule(&view, lib), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, view, "fill_u32"), CUDA_SUCCESS);
  assert_true((void *)f != (void *)k); /* the view has its own CUfunctions */
  /* A kernel names its library; a function of the view or of a module is no kernel. */
  assert_int_equal(cuKernelGetLibrary(&got, k), CUDA_SUCCESS);
  assert_ptr_equal(got, lib);
  assert_int_equal(cuKernelGetLibrary(&got, ks[n - 1]), CUDA_SUCCESS);
  assert_ptr_equal(got, lib);
  assert_int_equal(cuKernelGetLibrary(&got, (CUkernel)f), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&mf, m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuKernelGetLibrary(&got, (CUkernel)mf), CUDA_ERROR_INVALID_HANDLE);
  /* A function names the module it was got from; a kernel its library. */
  CUmodule fm = NULL;
  assert_int_equal(cuFuncGetModule(&fm, mf), CUDA_SUCCESS);
  assert_ptr_equal(fm, m);
  assert_int_equal(cuFuncGetModule(&fm, f), CUDA_SUCCESS);
  assert_ptr_equal(fm, view);
  assert_int_equal(cuFuncGetModule(&fm, (CUfunction)k), CUDA_SUCCESS);
  assert_ptr_equal(fm, (CUmodule)lib);
  assert_int_equal(cuFuncGetModule(NULL, mf), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  assert_int_equal(cuFuncGetModule(&fm, mf), CUDA_ERROR_INVALID_HANDLE); /* unloaded */
  assert_int_equal(cuKernelGetLibrary(NULL, k), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuMemAlloc(&p, sizeof(out)), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 4, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out, p, sizeof(out)), CUDA_SUCCESS);
  assert_int_equal(out[3], 5);
  v = 6;
  assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 4, 1, 1, 0, NULL, args, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out, p, sizeof(out)), CUDA_SUCCESS);
  assert_int_equal(out[0], 6);
  assert_int_equal(cuModuleUnload(view), CUDA_ERROR_INVALID_HANDLE); /* owned by the library */
  assert_int_equal(cuLibraryUnload(lib), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 4, 1, 1, 0, NULL, args, NULL),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuKernelGetLibrary(&got, k), CUDA_ERROR_INVALID_HANDLE); /* unloaded */
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

/* cuLibraryLoadFromFile and cuModuleLoad read the file in the guest and
 * load its bytes as the Data calls do; a missing file is FILE_NOT_FOUND. */
static void libraries_and_modules_load_from_files(void **state) {
  char path[] = "/tmp/tally-test-lib-XXXXXX";
  int fd = mkstemp(path);
  CUlibrary lib;
  CUmodule m;
  CUkernel k;
  CUfunction f;
  unsigned n = 0;
  (void)state;
  assert_true(fd >= 0);
  assert_int_equal(write(fd, module_text, strlen(module_text)), (ssize_t)strlen(module_text));
  close(fd);
  assert_int_equal(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS);
  assert_int_equal(cuLibraryGetKernelCount(&n, lib), CUDA_SUCCESS);
  assert_int_equal(n, 3);
  assert_int_equal(cuLibraryGetKernel(&k, lib, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuLibraryUnload(lib), CUDA_SUCCESS);
  assert_int_equal(cuModuleLoad(&m, path), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  unlink(path);
  assert_int_equal(cuLibraryLoadFromFile(&lib, path, NULL, NULL, 0, NULL, NULL, 0),
                   CUDA_ERROR_FILE_NOT_FOUND);
  assert_int_equal(cuModuleLoad(&m, path), CUDA_ERROR_FILE_NOT_FOUND);
  assert_int_equal(cuLibraryLoadFromFile(&lib, NULL, NULL, NULL, 0, NULL, NULL, 0),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuLibraryLoadFromFile(NULL, path, NULL, NULL, 0, NULL, NULL, 0),
                   CUDA_ERROR_INVALID_VALUE);
}

/* Peer access: no device can reach another's memory through tallyd
 * (cuDeviceCanAccessPeer says 0), so enabling it answers as the driver does
 * for such a pair, after its checks of the contexts and the flags; nothing
 * crosses the wire. */
static void peer_access_is_refused_as_for_devices_that_cannot(void **state) {
  CUcontext cur, other;
  CUdevice dev;
  int can = -1;
  (void)state;
  assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_int_equal(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  assert_int_equal(cuDeviceCanAccessPeer(&can, dev, dev), CUDA_SUCCESS);
  assert_int_equal(can, 0);
  assert_int_equal(cuCtxCreate(&other, NULL, 0, dev), CUDA_SUCCESS); /* now current */
  assert_int_equal(cuCtxEnablePeerAccess(cur, 0), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(cuCtxEnablePeerAccess(cur, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxEnablePeerAccess(other, 0), CUDA_ERROR_INVALID_CONTEXT); /* itself */
  assert_int_equal(cuCtxEnablePeerAccess(NULL, 0), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(cuCtxDisablePeerAccess(cur), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
  assert_int_equal(cuCtxDisablePeerAccess(other), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(cuCtxDestroy(other), CUDA_SUCCESS);
  assert_int_equal(cuCtxSetCurrent(cur), CUDA_SUCCESS);
}

/* cuProfilerStart / Stop answer as natively with no profiler attached:
 * success with a current context, INVALID_CONTEXT without one; nothing
 * crosses the wire. */
static void profiler_start_and_stop_check_the_context(void **state) {
  CUcontext cur, popped;
  (void)state;
  unsigned long before = hostd_server_calls(srv);
  assert_int_equal(cuProfilerStart(), CUDA_SUCCESS);
  assert_int_equal(cuProfilerStop(), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
  assert_int_equal(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  assert_ptr_equal(popped, cur);
  assert_int_equal(cuProfilerStart(), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(cuProfilerStop(), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(cuCtxPushCurrent(cur), CUDA_SUCCESS);
  assert_int_equal(hostd_server_calls(srv), before);
}

/* A library's kernels come without attributes (describing them would load
 * them); a module's function without those that need its load.  Occupancy
 * asks for what it lacks (one FUNC_ATTRS brings them all) and then answers
 * locally; the
 * recording device's kernels: 32 registers, 1024 threads, no static shared
 * memory, so 256-thread blocks fit 8 to an SM (2048 threads, 65536 regs). */
static void occupancy_asks_for_the_attributes_it_lacks(void **state) {
  CUlibrary lib;
  CUkernel k;
  CUmodule m;
  CUfunction f;
  int n = -1, v = -1, grid = 0, block = 0;
  unsigned long asked;
  (void)state;
  assert_int_equal(cuLibraryLoadData(&lib, module_text, NULL, NULL, 0, NULL, NULL, 0),
                   CUDA_SUCCESS);
  assert_int_equal(cuLibraryGetKernel(&k, lib, "pair"), CUDA_SUCCESS);
  asked = attr_asks();
  assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, (CUfunction)k, 256, 0),
                   CUDA_SUCCESS);
  assert_int_equal(n, 8);
  assert_int_equal(attr_asks(), asked + 1); /* one FUNC_ATTRS brought them all */
  assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, (CUfunction)k, 256, 0),
                   CUDA_SUCCESS);
  assert_int_equal(n, 8);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)k),
                   CUDA_SUCCESS);
  assert_int_equal(v, 32);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, (CUfunction)k),
                   CUDA_SUCCESS);
  assert_int_equal(v, 90);
  assert_int_equal(attr_asks(), asked + 1); /* all kept */
  assert_int_equal(cuLibraryUnload(lib), CUDA_SUCCESS);

  /* A module's function lacks only its thread limit before its load. */
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "pair"), CUDA_SUCCESS);
  asked = attr_asks();
  assert_int_equal(cuOccupancyMaxPotentialBlockSize(&grid, &block, f, NULL, 0, 0), CUDA_SUCCESS);
  assert_int_equal(attr_asks(), asked + 1);
  assert_true(block >= 32 && block <= 1024);
  assert_int_equal(grid % 132, 0); /* whole waves of the 132 SMs */
  assert_true(grid > 0);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  /* An unknown function is refused before anything is asked. */
  asked = attr_asks();
  assert_int_equal(cuOccupancyMaxActiveBlocksPerMultiprocessor(&n, (CUfunction)0xf00d0, 256, 0),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(attr_asks(), asked);
}

/* Natively a launch beyond the function's limits fails at the call.  A
 * library's kernels come without attributes, so the first launch asks for
 * them (one FUNC_ATTRS, kept) and checks against them; on the old guest the
 * 1 MiB launch was posted and its error came back at the next
 * synchronisation instead. */
static void library_kernel_launch_is_checked_at_the_call(void **state) {
  CUlibrary lib;
  CUkernel k;
  CUdeviceptr p;
  uint32_t v = 7, out[4] = {0};
  uint64_t cnt = 4;
  void *args[] = {&p, &v, &cnt};
  unsigned long asked;
  (void)state;
  assert_int_equal(cuLibraryLoadData(&lib, module_text, NULL, NULL, 0, NULL, NULL, 0),
                   CUDA_SUCCESS);
  assert_int_equal(cuLibraryGetKernel(&k, lib, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&p, sizeof(out)), CUDA_SUCCESS);
  asked = attr_asks();
  assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 4, 1, 1, 1u << 20, NULL, args, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(attr_asks(), asked + 1);
  assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 4, 1, 1, 65536, NULL, args, NULL),
                   CUDA_ERROR_INVALID_VALUE); /* above the 48 KiB default */
  assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 4, 1, 1, 0, NULL, args, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out, p, sizeof(out)), CUDA_SUCCESS);
  assert_int_equal(out[3], 7);
  assert_int_equal(attr_asks(), asked + 1); /* kept: asked once */
  /* Raised by the application, the limit it set is the one checked. */
  assert_int_equal(cuFuncSetAttribute((CUfunction)k, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                      65536),
                   CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel((CUfunction)k, 1, 1, 1, 4, 1, 1, 65536, NULL, args, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(attr_asks(), asked + 1);
  /* While a capture is open nothing is asked (tallyd might have to load the
   * function inside the capture): the first launch of "pair" is captured
   * unchecked, as a posted launch. */
  {
    CUkernel k2;
    CUstream s;
    CUgraph g = NULL;
    uint32_t a = 1;
    uint64_t b = 2;
    void *args2[] = {&a, &b};
    assert_int_equal(cuLibraryGetKernel(&k2, lib, "pair"), CUDA_SUCCESS);
    assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    assert_int_equal(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel((CUfunction)k2, 1, 1, 1, 32, 1, 1, 0, s, args2, NULL),
                     CUDA_SUCCESS);
    assert_int_equal(cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    assert_non_null(g);
    assert_int_equal(attr_asks(), asked + 1);
    assert_int_equal(cuGraphDestroy(g), CUDA_SUCCESS);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  }
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuLibraryUnload(lib), CUDA_SUCCESS);
}

static void function_attributes_local_and_remote(void **state) {
  CUmodule m;
  CUfunction f;
  int v = -1;
  unsigned long asked, asked_all;
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "pair"), CUDA_SUCCESS);
  /* Known at load: answered locally, every CU_FUNC_ATTRIBUTE_* up to 15. */
  asked = attr_asks();
  asked_all = ops(CALL_OP_FUNC_ATTRS);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_NUM_REGS, f), CUDA_SUCCESS);
  assert_int_equal(v, 32);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, f),
                   CUDA_SUCCESS);
  assert_int_equal(v, -1);
  v = -1;
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET, f),
                   CUDA_SUCCESS);
  assert_int_equal(v, 0);
  assert_int_equal(attr_asks(), asked);
  /* Needs the (lazily loaded) function: one round trip loads it and brings
   * every attribute, all kept. */
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
                   CUDA_SUCCESS);
  assert_int_equal(v, 1024);
  assert_int_equal(ops(CALL_OP_FUNC_ATTRS), asked_all + 1);
  assert_int_equal(attr_asks(), asked + 1);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f),
                   CUDA_SUCCESS);
  assert_int_equal(v, 1024);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, f), CUDA_SUCCESS);
  assert_int_equal(attr_asks(), asked + 1);
  /* Set forwards and updates the local copy. */
  assert_int_equal(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000),
                   CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_FUNC_SET_ATTR) > 0, 1);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f),
                   CUDA_SUCCESS);
  assert_int_equal(v, 100000);
  assert_int_equal(attr_asks(), asked + 1);
  /* The same value again (libraries set it before every launch): no request. */
  asked = ops(CALL_OP_FUNC_SET_ATTR);
  assert_int_equal(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000),
                   CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_FUNC_SET_ATTR), asked);
  assert_int_equal(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 50000),
                   CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_FUNC_SET_ATTR), asked + 1);
  asked = ops(CALL_OP_FUNC_ATTR);
  /* The function's cache preference reaches the driver (posted: seen after
   * the next synchronising call); a value outside CUfunc_cache is refused here. */
  assert_int_equal(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_SHARED), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(hostd_record_func_cache((uint64_t)(uintptr_t)f), CU_FUNC_CACHE_PREFER_SHARED);
  assert_int_equal(cuKernelSetCacheConfig((CUkernel)f, CU_FUNC_CACHE_PREFER_L1, 0), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(hostd_record_func_cache((uint64_t)(uintptr_t)f), CU_FUNC_CACHE_PREFER_L1);
  /* A preference the function has already is not sent again. */
  asked = ops(CALL_OP_FUNC_CACHE);
  assert_int_equal(cuFuncSetCacheConfig(f, CU_FUNC_CACHE_PREFER_L1), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_FUNC_CACHE), asked);
  assert_int_equal(cuFuncSetCacheConfig(f, (CUfunc_cache)7), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuFuncSetCacheConfig((CUfunction)(uintptr_t)0x1234, CU_FUNC_CACHE_PREFER_L1),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  /* A new load of the same image reports what the host now knows. */
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "pair"), CUDA_SUCCESS);
  assert_int_equal(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_BINARY_VERSION, f), CUDA_SUCCESS);
  assert_int_equal(v, 90);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
}

static void cluster_occupancy_crosses_the_wire_once(void **state) {
  CUmodule m;
  CUfunction f;
  CUlaunchAttribute at[3];
  CUlaunchConfig c;
  unsigned long asked;
  int v = -1;
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "pair"), CUDA_SUCCESS);
  memset(&c, 0, sizeof(c));
  memset(at, 0, sizeof(at));
  c.gridDimX = 4, c.gridDimY = 1, c.gridDimZ = 1;
  c.blockDimX = 128, c.blockDimY = 1, c.blockDimZ = 1;
  at[0].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  at[0].value.clusterDim.x = 2, at[0].value.clusterDim.y = 1, at[0].value.clusterDim.z = 1;
  at[1].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE;
  at[1].value.clusterSchedulingPolicyPreference = CU_CLUSTER_SCHEDULING_POLICY_SPREAD;
  c.attrs = at;
  c.numAttrs = 2;
  asked = ops(CALL_OP_OCCUPANCY);
  assert_int_equal(cuOccupancyMaxActiveClusters(&v, f, &c), CUDA_SUCCESS);
  assert_int_equal(v, 1); /* the recording device's answer */
  assert_int_equal(ops(CALL_OP_OCCUPANCY), asked + 1);
  /* The daemon rebuilt both cluster attributes from the wire. */
  assert_int_equal(hostd__record_last_cluster[0], 2);
  assert_int_equal(hostd__record_last_cluster[1], 1);
  assert_int_equal(hostd__record_last_cluster[2], 1);
  assert_int_equal(hostd__record_last_cluster[3], CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
  v = -1;
  c.numAttrs = 0;
  assert_int_equal(cuOccupancyMaxPotentialClusterSize(&v, f, &c), CUDA_SUCCESS);
  assert_int_equal(v, 8);
  assert_int_equal(ops(CALL_OP_OCCUPANCY), asked + 2);
  assert_int_equal(hostd__record_last_cluster[0], 0);
  assert_int_equal(hostd__record_last_cluster[3], -1);
  /* Attributes that only order or prioritise the launch are passed over:
   * the query is asked with the cluster attributes alone. */
  c.numAttrs = 4;
  CUlaunchAttribute more[4];
  memcpy(more, at, 2 * sizeof(at[0]));
  memset(&more[2], 0, 2 * sizeof(more[0]));
  more[2].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  more[2].value.programmaticStreamSerializationAllowed = 1;
  more[3].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  c.attrs = more;
  hostd__record_last_cluster[0] = 0;
  assert_int_equal(cuOccupancyMaxActiveClusters(&v, f, &c), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_OCCUPANCY), asked + 3);
  assert_int_equal(hostd__record_last_cluster[0], 2);
  assert_int_equal(hostd__record_last_cluster[3], CU_CLUSTER_SCHEDULING_POLICY_SPREAD);
  /* One that changes where blocks fit is refused in the guest, not guessed at. */
  more[3].id = CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
  assert_int_equal(cuOccupancyMaxActiveClusters(&v, f, &c), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ops(CALL_OP_OCCUPANCY), asked + 3);
  c.attrs = at;
  c.numAttrs = 1;
  assert_int_equal(cuOccupancyMaxActiveClusters(NULL, f, &c), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuOccupancyMaxActiveClusters(&v, f, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  /* A handle this tenant does not own (unloaded, or never given) is refused
   * by the daemon before it reaches the device. */
  hostd__record_last_cluster[0] = 77;
  assert_int_equal(cuOccupancyMaxActiveClusters(&v, f, &c), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuOccupancyMaxPotentialClusterSize(&v, (CUfunction)0xf00d0, &c),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(ops(CALL_OP_OCCUPANCY), asked + 5);
  assert_int_equal(hostd__record_last_cluster[0], 77);
}

/* cuBLAS's first GEMM asks private table 21318c60 for an object of the
 * context (slot 51) and a value for it (slot 39); the value is the daemon
 * driver's own answer, carried in the connect-time snapshot (no request). */
static void context_table_object_and_value_come_from_the_daemon(void **state) {
  static const CUuuid id = {{0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff,
                             0x73, 0x24, 0xc8, 0xf2}};
  const void *const *t = NULL;
  void *obj = NULL, *obj2 = NULL;
  uint32_t value = 0;
  unsigned long before = hostd_server_calls(srv);
  (void)state;
  assert_int_equal(cuGetExportTable((const void **)&t, &id), CUDA_SUCCESS);
  CUresult (*get_obj)(CUcontext, unsigned long long, void **) =
      (CUresult(*)(CUcontext, unsigned long long, void **))t[51];
  CUresult (*query)(CUcontext, const void *, uint32_t *) =
      (CUresult(*)(CUcontext, const void *, uint32_t *))t[39];
  assert_int_equal(get_obj(ctx, 0, &obj), CUDA_SUCCESS);
  assert_non_null(obj);
  assert_ptr_equal(((void *const *)obj)[2], ctx);          /* shaped like the driver's */
  assert_int_equal(get_obj(NULL, 0, &obj2), CUDA_SUCCESS); /* NULL: the current context */
  assert_ptr_equal(obj2, obj);
  assert_int_equal(query(ctx, obj, &value), CUDA_SUCCESS);
  assert_int_equal(value, HOSTD_RECORD_IDENT_S39);
  assert_int_equal(hostd_server_calls(srv), before); /* answered locally */
  /* Bad input is refused, never dereferenced. */
  assert_int_equal(get_obj(ctx, 0, NULL), CUDA_ERROR_INVALID_VALUE);
  /* cublasGemmEx passes a pointer to its own record as the second argument
   * (natively answered like 0): the same object. */
  uint64_t record[4] = {(uint64_t)(uintptr_t)obj, 0, 0, 0xa1};
  obj2 = NULL;
  assert_int_equal(get_obj(ctx, (unsigned long long)(uintptr_t)record, &obj2), CUDA_SUCCESS);
  assert_ptr_equal(obj2, obj);
  assert_int_equal(get_obj((CUcontext)0x1234, 0, &obj2), CUDA_ERROR_INVALID_CONTEXT);
  assert_int_equal(query(ctx, &value, &value), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(query(ctx, NULL, &value), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(query(ctx, obj, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* Tally's own table: the scheduler's budget as tallyd advertised it in the
 * snapshot (its default policy's threshold, in whole us) and this tenant's
 * class; both answered locally. */
/* cuFFT's table 6e163fbe, slot 7: the module's functions, one callback each
 * (the callback's argument first, then the function and the module), the
 * answer their count; an unknown module or no callback is refused with
 * CUDA_ERROR_INVALID_HANDLE, never 1 (the slot's native success). */
typedef struct {
  int calls;
  CUfunction seen[8];
  uint64_t module;
} fn_seen_t;

static void note_fn(void *arg, void *func, uint64_t module) {
  fn_seen_t *x = arg;
  if (x->calls < 8)
    x->seen[x->calls] = (CUfunction)func;
  x->calls++;
  x->module = module;
}

static void tools_module_table_hands_out_the_module_functions(void **state) {
  static const CUuuid id = {{0x6e, 0x16, 0x3f, 0xbe, 0xb9, 0x58, 0x44, 0x4d, 0x83, 0x5c, 0xe1,
                             0x82, 0xaf, 0xf1, 0x99, 0x1e}};
  typedef uint64_t (*slot7_fn)(uint64_t, uint64_t, uint64_t, uint64_t);
  const void *const *t = NULL;
  CUmodule m;
  CUfunction f[3];
  fn_seen_t x = {0};
  (void)state;
  assert_int_equal(cuGetExportTable((const void **)&t, &id), CUDA_SUCCESS);
  assert_int_equal((uintptr_t)t[0], 99 * sizeof(void *));
  slot7_fn slot7 = (slot7_fn)t[7];
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f[0], m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f[1], m, "fault"), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f[2], m, "pair"), CUDA_SUCCESS);
  unsigned long before = hostd_server_calls(srv);
  assert_int_equal(slot7(0, (uint64_t)(uintptr_t)m, (uint64_t)(uintptr_t)note_fn,
                         (uint64_t)(uintptr_t)&x),
                   3);
  assert_int_equal(hostd_server_calls(srv), before); /* answered locally */
  assert_int_equal(x.calls, 3);
  assert_int_equal(x.module, (uint64_t)(uintptr_t)m);
  for (int i = 0; i < 3; i++) {
    int found = 0;
    for (int j = 0; j < 3; j++)
      found += x.seen[j] == f[i];
    assert_int_equal(found, 1);
  }
  x.calls = 0;
  assert_int_equal(slot7(0, 0x1234, (uint64_t)(uintptr_t)note_fn, (uint64_t)(uintptr_t)&x),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(slot7(0, (uint64_t)(uintptr_t)m, 0, (uint64_t)(uintptr_t)&x),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(x.calls, 0);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  assert_int_equal(slot7(0, (uint64_t)(uintptr_t)m, (uint64_t)(uintptr_t)note_fn,
                         (uint64_t)(uintptr_t)&x),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(x.calls, 0);
}

/* cuLink*: two inputs are linked by tallyd (one LINK request; on the
 * recording device their kernels joined) and the image loads with both
 * modules' kernels; a lone cubin is its own image (no request); a lone
 * object goes to tallyd's linker; bad input types, input after completion
 * and images the linker refuses fail as the driver would. */
static void link_of_several_inputs_is_done_by_tallyd(void **state) {
  static const char a[] = "TALLYREC\nkernel first 8\n", b[] = "TALLYREC\nkernel second 4,4";
  CUlinkState ls;
  void *img;
  size_t n;
  CUmodule m;
  CUfunction f;
  unsigned long links = ops(CALL_OP_LINK);
  (void)state;
  assert_int_equal(cuLinkCreate(0, NULL, NULL, &ls), CUDA_SUCCESS);
  assert_int_equal(cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, (void *)a, sizeof(a) - 1, "a", 0, NULL,
                                 NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuLinkAddData(ls, CU_JIT_INPUT_OBJECT, (void *)b, sizeof(b) - 1, "b", 0, NULL,
                                 NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuLinkAddData(ls, (CUjitInputType)CU_JIT_NUM_INPUT_TYPES, (void *)b,
                                 sizeof(b), "c", 0, NULL, NULL),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuLinkComplete(ls, &img, &n), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_LINK), links + 1);
  assert_int_equal(cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, (void *)a, sizeof(a), "a", 0, NULL, NULL),
                   CUDA_ERROR_ILLEGAL_STATE);
  assert_int_equal(cuModuleLoadData(&m, img), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "first"), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "second"), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  assert_int_equal(cuLinkDestroy(ls), CUDA_SUCCESS);

  assert_int_equal(cuLinkCreate(0, NULL, NULL, &ls), CUDA_SUCCESS);
  assert_int_equal(cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, (void *)a, sizeof(a) - 1, "a", 0, NULL,
                                 NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuLinkComplete(ls, &img, &n), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_LINK), links + 1); /* its own image */
  assert_int_equal(n, sizeof(a));
  assert_memory_equal(img, a, sizeof(a));
  assert_int_equal(cuLinkDestroy(ls), CUDA_SUCCESS);

  assert_int_equal(cuLinkCreate(0, NULL, NULL, &ls), CUDA_SUCCESS);
  assert_int_equal(cuLinkAddData(ls, CU_JIT_INPUT_LIBRARY, (void *)b, sizeof(b) - 1, "b", 0, NULL,
                                 NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuLinkComplete(ls, &img, &n), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_LINK), links + 2);
  assert_int_equal(cuLinkDestroy(ls), CUDA_SUCCESS);

  assert_int_equal(cuLinkCreate(0, NULL, NULL, &ls), CUDA_SUCCESS);
  assert_int_equal(cuLinkAddData(ls, CU_JIT_INPUT_CUBIN, (void *)a, sizeof(a) - 1, "a", 0, NULL,
                                 NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuLinkAddData(ls, CU_JIT_INPUT_OBJECT, (void *)"\x7f" "ELF junk", 8, "x", 0,
                                 NULL, NULL),
                   CUDA_SUCCESS);
  assert_int_equal(cuLinkComplete(ls, &img, &n), CUDA_ERROR_INVALID_IMAGE);
  assert_int_equal(cuLinkDestroy(ls), CUDA_SUCCESS);
  assert_int_equal(cuLinkComplete(NULL, &img, &n), CUDA_ERROR_INVALID_VALUE);
}

static void tally_table_gives_budget_and_class(void **state) {
  static const CUuuid id = {TALLY_EXT_UUID};
  const void *const *t = NULL;
  unsigned long before = hostd_server_calls(srv);
  (void)state;
  assert_int_equal(cuGetExportTable((const void **)&t, &id), CUDA_SUCCESS);
  assert_non_null(t);
  assert_true((uintptr_t)t[0] >= TALLY_EXT_SLOTS * sizeof(void *));
  tally_ext_be_budget_us_fn budget = (tally_ext_be_budget_us_fn)t[TALLY_EXT_SLOT_BUDGET];
  tally_ext_priority_fn prio = (tally_ext_priority_fn)t[TALLY_EXT_SLOT_PRIORITY];
  assert_int_equal(budget(), POL_DEFAULT_THRESHOLD_NS / 1000);
  assert_int_equal(prio(), 1); /* the harness's tenant is best-effort */
  assert_int_equal(hostd_server_calls(srv), before);
}

/* A new tenant process calls slot 3 as cuBLASLt does and prints its result. */
static void blaslt_helper_says(const char *want) {
  char line[64] = "";
  pid_t pid;
  FILE *f = helper("blaslt-layout", &pid, NULL, NULL);
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  assert_string_equal(line, want);
  fclose(f);
  assert_int_equal(wait_exit(pid), 0);
}

/* cuBLASLt's handshake (private table 1734dc26): slot 3 hands back fresh
 * copies of the layout objects tallyd read from its device (the recording
 * device's: 8 groups of 8 units), the driver's size, zero past what tallyd
 * sent; tallyd is asked once per process; slot 12 succeeds and changes
 * nothing.  A tenant whose tallyd has no layout (a driver without the slot)
 * gets slot 3 refused, as before the layout was served. */
static void blaslt_table_serves_the_layout_objects(void **state) {
  static const CUuuid id = {CALL_UUID_BLASLT};
  typedef CUresult (*slot3_fn)(void **, void **, const void *, void *, void *);
  typedef CUresult (*slot12_fn)(void *, void *, uint64_t, uint64_t, void *, void *);
  const void *const *t = NULL;
  uint8_t *a = NULL, *b = NULL, *a2 = NULL, *b2 = NULL, before[72];
  (void)state;
  assert_int_equal(cuGetExportTable((const void **)&t, &id), CUDA_SUCCESS);
  assert_int_equal((uintptr_t)t[0], 17 * sizeof(void *));
  slot3_fn slot3 = (slot3_fn)t[4];
  slot12_fn slot12 = (slot12_fn)t[13];
  assert_int_equal(slot3((void **)&a, (void **)&b, t, NULL, NULL), CUDA_SUCCESS);
  assert_non_null(a);
  assert_non_null(b);
  for (unsigned i = 0; i < CALL_BLASLT_LAYOUT_BYTES; i++) {
    assert_int_equal(a[i], i % 8);
    assert_int_equal(b[i], i / 8);
  }
  for (unsigned i = CALL_BLASLT_LAYOUT_BYTES; i < 72; i++)
    assert_int_equal(a[i] | b[i], 0);
  unsigned long calls = hostd_server_calls(srv);
  assert_int_equal(slot3((void **)&a2, (void **)&b2, (void *)1, (void *)3, a), CUDA_SUCCESS);
  assert_int_equal(hostd_server_calls(srv), calls); /* kept from the first ask */
  assert_true(a2 != a && b2 != b);
  assert_memory_equal(a2, a, 72);
  assert_memory_equal(b2, b, 72);
  memcpy(before, a, sizeof(before));
  assert_int_equal(slot12(a, b, 0x40, 7, before, NULL), CUDA_SUCCESS);
  assert_memory_equal(a, before, sizeof(before));
  free(a), free(b), free(a2), free(b2);

  hostd__record_no_layout = true;
  blaslt_helper_says("slot3 801\n"); /* CUDA_ERROR_NOT_SUPPORTED */
  hostd__record_no_layout = false;
  blaslt_helper_says("slot3 0\n");
}

/* Slot 3 follows what tallyd publishes: this best-effort tenant hears
 * that no latency-critical tenant is connected, that one is while a
 * latency-critical helper is, and that none is once it left; each answer
 * is local (the word arrives with replies: a synchronisation first). */
static void tally_table_says_whether_a_latency_critical_tenant_is_connected(void **state) {
  static const CUuuid id = {TALLY_EXT_UUID};
  const void *const *t = NULL;
  unsigned long long other = 0;
  int to_child;
  pid_t pid;
  FILE *f;
  (void)state;
  assert_int_equal(cuGetExportTable((const void **)&t, &id), CUDA_SUCCESS);
  tally_ext_lc_present_fn lc = (tally_ext_lc_present_fn)t[TALLY_EXT_SLOT_LC];
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(lc(), 0);
  f = helper("alloc-wait", &pid, &to_child, "TALLY_PRIORITY=latency-critical");
  assert_non_null(f);
  assert_int_equal(fscanf(f, "ptr %llx", &other), 1); /* connected */
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(lc(), 1);
  unsigned long before = hostd_server_calls(srv);
  assert_int_equal(lc(), 1);
  assert_int_equal(hostd_server_calls(srv), before);
  close(to_child);
  fclose(f);
  assert_int_equal(wait_exit(pid), 0);
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(lc(), 0);
}

/* The recording device's live bytes once the daemon's release thread has
 * made what it was given (a module's globals go with its deferred unload). */
static uint64_t live_bytes(void) {
  hostd__release_drain();
  return hostd_record_live_bytes();
}

static void dead_tenant_is_cleaned_up(void **state) {
  pid_t pid;
  char line[32] = {0};
  uint64_t before = live_bytes();
  unsigned long streams_del = hostd_record_count(HOSTD_RECORD_STREAM_DEL);
  unsigned long modules_del = hostd_record_count(HOSTD_RECORD_MODULE_DEL);
  FILE *f = helper("die", &pid, NULL, NULL);
  int st;
  (void)state;
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  assert_string_equal(line, "ready\n");
  st = wait_exit(pid);
  assert_true(WIFSIGNALED(st));
  fclose(f);
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  assert_int_equal(live_bytes(), before);
  assert_true(hostd_record_count(HOSTD_RECORD_STREAM_DEL) > streams_del);
  assert_true(hostd_record_count(HOSTD_RECORD_MODULE_DEL) > modules_del);
}

static void latency_critical_tenant_gets_the_greatest_priority(void **state) {
  pid_t pid;
  char line[32] = {0};
  FILE *f;
  CUstream s;
  (void)state;
  f = helper("stream", &pid, NULL, "TALLY_PRIORITY=latency-critical");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  assert_string_equal(line, "stream ok\n");
  assert_int_equal(hostd__record_last_prio, -5); /* the recording device's greatest */
  fclose(f);
  wait_exit(pid);
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS); /* this tenant is best-effort */
  assert_int_equal(hostd__record_last_prio, 0);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
}

/* Runs the helper's sync-word (word off: sync-reply) as a latency-critical
 * tenant over shared memory: every synchronisation returns after the
 * stream's work and reads its value, and the kept error comes back once;
 * *marks and *syncs get the STREAM_MARK and STREAM_SYNC requests it made. */
static void sync_helper(const char *action, unsigned long *marks, unsigned long *syncs) {
  pid_t pid;
  char l1[64] = {0}, l2[64] = {0}, l3[64] = {0};
  unsigned long m0 = hostd__op_count[CALL_OP_STREAM_MARK];
  unsigned long s0 = hostd__op_count[CALL_OP_STREAM_SYNC];
  FILE *f = helper(action, &pid, NULL, "TALLY_PRIORITY=latency-critical");
  assert_non_null(f);
  if (!fgets(l1, sizeof(l1), f) || !fgets(l2, sizeof(l2), f) || !fgets(l3, sizeof(l3), f))
    fail_msg("the helper said '%s' '%s' '%s' (exit %d)", l1, l2, l3, wait_exit(pid));
  fclose(f);
  assert_int_equal(wait_exit(pid), 0);
  assert_string_equal(l1, "held 1 value 7\n");
  assert_string_equal(l2, "rounds 0\n");
  assert_string_equal(l3, "error 400 after 0\n"); /* CUDA_ERROR_INVALID_HANDLE, then clean */
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  *marks = hostd__op_count[CALL_OP_STREAM_MARK] - m0;
  *syncs = hostd__op_count[CALL_OP_STREAM_SYNC] - s0;
}

/* By default a latency-critical tenant's stream synchronisations over
 * shared memory are STREAM_MARK posts answered by the device's write of a
 * shared word, and return only once the stream's work ran (behind a host
 * function holding the stream 30 ms); a kept error makes the real call,
 * which returns it, once (the write's place right behind the launch:
 * test-hostd-exec, where no quiet point of the worker can come between).
 * TALLY_LC_SYNC_WORD=0: every one is the real call, with the same results. */
static void sync_word_answers_stream_synchronisations(void **state) {
  unsigned long marks, syncs;
  (void)state;
  sync_helper("sync-word", &marks, &syncs);
  /* 1 + 20 + 2 answered by the word or the marked fallback, one real call */
  assert_true(marks >= 23);
  assert_int_equal(syncs, 1);
  sync_helper("sync-reply", &marks, &syncs);
  assert_int_equal(marks, 0);
  assert_int_equal(syncs, 23);
}

/* Runs the helper's ACTION over shared memory, then over TCP; each run must
 * print exactly its line (want_shm, want_tcp) and exit 0. */
static void helper_says_both_ways(const char *action, const char *want_shm, const char *want_tcp) {
  const char *env[] = {NULL, gd_tcp_env}, *want[] = {want_shm, want_tcp};
  for (int i = 0; i < 2; i++) {
    pid_t pid;
    char line[128] = {0};
    FILE *f = helper(action, &pid, NULL, env[i]);
    assert_non_null(f);
    if (!fgets(line, sizeof(line), f))
      fail_msg("no answer from the helper over %s (exit status %d)", i ? "tcp" : "shm",
               wait_exit(pid));
    fclose(f);
    assert_int_equal(wait_exit(pid), 0);
    if (strcmp(line, want[i]) != 0)
      fail_msg("over %s: '%s', want '%s'", i ? "tcp" : "shm", line, want[i]);
  }
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
}

/* A tenant that forks: the child's CUDA calls answer NOT_INITIALIZED, as the
 * driver's do in a child, without touching the parent's channel (the parent
 * reads its memory back right afterwards), and tallyd sees the tenant leave
 * when the parent exits although the child, which shared its socket, lives
 * on.  Over shared memory and over TCP. */
static void forked_child_gets_no_cuda_and_does_not_keep_the_tenant(void **state) {
  const char *env[] = {NULL, gd_tcp_env};
  (void)state;
  for (int i = 0; i < 2; i++) {
    pid_t pid;
    int to_child, a = 0, in = 0, sy = 0, parent = -1;
    FILE *f = helper("fork", &pid, &to_child, env[i]);
    assert_non_null(f);
    assert_int_equal(fscanf(f, "child %d %d %d", &a, &in, &sy), 3);
    assert_int_equal(a, CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(in, CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(sy, CUDA_ERROR_NOT_INITIALIZED);
    assert_int_equal(fscanf(f, " parent %d", &parent), 1);
    assert_int_equal(parent, 0);
    assert_int_equal(wait_exit(pid), 0);
    /* the child still waits on its stdin here */
    assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
    close(to_child);
    fclose(f);
  }
}

/* A graph's copy nodes naming host memory (an upload, a download, an
 * exec's upload given another source), pinned and pageable: over shared
 * memory tallyd maps pinned memory at the tenant's address, so those copies
 * name it directly; pageable memory, and pinned memory over TCP, go through
 * stages in device memory the guest fills before each launch and reads
 * back at the synchronisation after it.  The same words both ways. */
static void graph_copies_name_host_memory_both_ways(void **state) {
  (void)state;
  helper_says_both_ways("graph-pinned", "add 0 copied 0 updated 0 pageable 0\n",
                        "add 0 copied 0 updated 0 pageable 0\n");
}

/* Pinned memory freed and allocated again at the same address, which tallyd
 * still holds (its release is queued, and the recording device's
 * unregistration made as slow as the driver's can be), then named by a kernel: over shared
 * memory the guest shares the new allocation at another address tallyd can
 * match, so the kernel reaches it directly (256 KiB is past what a mirror
 * takes: had it stayed where tallyd maps it elsewhere, the launch would be
 * refused); over TCP it is refused, as any pinned memory past a mirror. */
static void pinned_memory_allocated_where_it_was_freed_stays_reachable(void **state) {
  (void)state;
  /* As slow as the driver's can be: the H200's took up to 398 ms. */
  __atomic_store_n(&hostd__record_unregister_ms, 300, __ATOMIC_RELAXED);
  helper_says_both_ways("pinned-reuse", "launch 0 value 7\n", "launch 801 value 0\n");
  __atomic_store_n(&hostd__record_unregister_ms, 0, __ATOMIC_RELAXED);
}

/* The application's own memory, registered (whole pages, partial pages at
 * both ends, a shared mapping): copies both ways, synchronous and on a
 * stream, and a kernel writing into it give the same bytes over shared
 * memory (where its whole pages are moved onto memory tallyd maps) and over
 * TCP (where its bytes travel); registration and unregistration keep what
 * it holds; a child of fork() writing into it leaves the parent's private
 * memory alone and its shared mapping shared, as natively. */
static void registered_memory_works_the_same_both_ways(void **state) {
  (void)state;
  helper_says_both_ways("registered",
                        "registered 0 kept 0 copied 0 async 0 kernel 7 fork 0 again 0\n",
                        "registered 0 kept 0 copied 0 async 0 kernel 7 fork 0 again 0\n");
}

/* Requests of each copy kind made by fn(arg), the context synchronised
 * after it (posts are counted when tallyd executes them). */
typedef struct copy_ops {
  unsigned long pinned, htod, dtoh;
} copy_ops_t;

static copy_ops_t copy_ops_of(CUresult (*fn)(void *), void *arg) {
  copy_ops_t b = {ops(CALL_OP_PINNED_COPY), ops(CALL_OP_HTOD), ops(CALL_OP_DTOH)};
  assert_int_equal(fn(arg), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  return (copy_ops_t){ops(CALL_OP_PINNED_COPY) - b.pinned, ops(CALL_OP_HTOD) - b.htod,
                      ops(CALL_OP_DTOH) - b.dtoh};
}

typedef struct reg_copy {
  CUdeviceptr d;
  void *h;
  size_t n;
  CUstream s;
} reg_copy_t;

static CUresult reg_htod(void *arg) {
  reg_copy_t *c = arg;
  return c->s ? cuMemcpyHtoDAsync(c->d, c->h, c->n, c->s) : cuMemcpyHtoD(c->d, c->h, c->n);
}

static CUresult reg_dtoh(void *arg) {
  reg_copy_t *c = arg;
  return c->s ? cuMemcpyDtoHAsync(c->h, c->d, c->n, c->s) : cuMemcpyDtoH(c->h, c->d, c->n);
}

#define ASSERT_OPS(o, p, h, d)                                                                     \
  do {                                                                                             \
    copy_ops_t o_ = (o);                                                                           \
    assert_int_equal(o_.pinned, (p));                                                              \
    assert_int_equal(o_.htod, (h));                                                                \
    assert_int_equal(o_.dtoh, (d));                                                                \
  } while (0)

/* Whether /proc/self/maps names a mapping "tally-registered" that meets
 * [p, p + n). */
static bool on_registered_memfd(const void *p, size_t n) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[4096];
  bool on = false;
  assert_non_null(f);
  while (!on && fgets(line, sizeof(line), f)) {
    unsigned long a, b;
    if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a < (uintptr_t)p + n && (uintptr_t)p < b)
      on = strstr(line, "tally-registered") != NULL;
  }
  fclose(f);
  return on;
}

/* Registered memory of this (shared-memory) tenant: a copy names the whole
 * pages inside the registration (one PINNED_COPY) and sends the bytes of the
 * partial pages at its ends (an HTOD or DTOH each), synchronously and on a
 * stream; memory that cannot move (a shared mapping, no whole page inside,
 * TALLY_SHARE_REGISTERED=0) sends all its bytes; unregistering moves the
 * bytes back onto private pages, tells tallyd, and keeps them; the driver's
 * errors for a double registration and for unregistering what is not a
 * registration. */
static void registered_memory_copies_name_its_whole_pages_over_shm(void **state) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), n = 3 * page + 100;
  uint8_t *x = aligned_alloc(page, 8 * page), *b = x + 16, *sh, *pin;
  uint8_t *a = mmap(NULL, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  reg_copy_t c = {0};
  CUstream st;
  unsigned long frees;
  (void)state;
  assert_non_null(x);
  assert_ptr_not_equal(a, MAP_FAILED);
  sh = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_ptr_not_equal(sh, MAP_FAILED);
  for (size_t i = 0; i < 4 * page; i++)
    a[i] = (uint8_t)(i * 13 + 1);
  assert_int_equal(cuMemAlloc(&c.d, 4 * page), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);

  /* Whole pages: moved, its bytes kept, every copy one PINNED_COPY. */
  assert_int_equal(cuMemHostRegister(a, 4 * page, 0), CUDA_SUCCESS);
  assert_true(on_registered_memfd(a, 4 * page));
  for (size_t i = 0; i < 4 * page; i++)
    assert_int_equal(a[i], (uint8_t)(i * 13 + 1));
  c.h = a, c.n = 4 * page;
  ASSERT_OPS(copy_ops_of(reg_htod, &c), 1, 0, 0);
  c.s = st;
  ASSERT_OPS(copy_ops_of(reg_dtoh, &c), 1, 0, 0);
  /* tallyd shares this process, where the address is taken: it maps the
   * pages elsewhere and says so, so a kernel given the address is pointed
   * at a mirror, as over TCP, instead of faulting in the shared context. */
  {
    static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
    CUmodule m;
    CUfunction f;
    CUdeviceptr hp = (CUdeviceptr)(uintptr_t)(a + 8);
    uint32_t v = 7, w[4];
    uint64_t nw = 4;
    void *args[] = {&hp, &v, &nw};
    assert_int_equal(cuModuleLoadData(&m, img), CUDA_SUCCESS);
    assert_int_equal(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
    memcpy(w, a + 8, sizeof(w));
    for (int i = 0; i < 4; i++)
      assert_int_equal(w[i], 7);
    assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
    for (size_t i = 8; i < 24; i++) /* as it was, for the checks below */
      a[i] = (uint8_t)(i * 13 + 1);
    c.s = NULL;
    ASSERT_OPS(copy_ops_of(reg_htod, &c), 1, 0, 0);
  }

  /* Partial pages at both ends: the middle named, the ends sent. */
  assert_int_equal(cuMemHostRegister(b, n, 0), CUDA_SUCCESS);
  assert_true(on_registered_memfd(x + page, 2 * page));
  assert_false(on_registered_memfd(x, page));
  assert_false(on_registered_memfd(x + 3 * page, page));
  c.h = b, c.n = n, c.s = NULL;
  ASSERT_OPS(copy_ops_of(reg_dtoh, &c), 1, 0, 2);
  assert_memory_equal(b, a, n);
  memset(b, 0x77, n);
  c.s = st;
  ASSERT_OPS(copy_ops_of(reg_htod, &c), 1, 2, 0);
  c.h = a, c.n = 4 * page;
  ASSERT_OPS(copy_ops_of(reg_dtoh, &c), 1, 0, 0);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(a[i], 0x77);
  /* A copy of its head alone never meets the shared pages: sent whole. */
  c.h = b, c.n = 100, c.s = NULL;
  ASSERT_OPS(copy_ops_of(reg_htod, &c), 0, 1, 0);

  /* Memory that does not move: a shared mapping, no whole page inside, the
   * tenant's choice. */
  assert_int_equal(cuMemHostRegister(sh, page, 0), CUDA_SUCCESS);
  c.h = sh, c.n = page;
  ASSERT_OPS(copy_ops_of(reg_htod, &c), 0, 1, 0);
  assert_int_equal(cuMemHostRegister(x + 5 * page + 8, page - 16, 0), CUDA_SUCCESS);
  c.h = x + 5 * page + 8, c.n = page - 16;
  ASSERT_OPS(copy_ops_of(reg_htod, &c), 0, 1, 0);
  setenv("TALLY_SHARE_REGISTERED", "0", 1);
  assert_int_equal(cuMemHostRegister(x + 6 * page, 2 * page, 0), CUDA_SUCCESS);
  unsetenv("TALLY_SHARE_REGISTERED");
  assert_false(on_registered_memfd(x + 6 * page, 2 * page));
  c.h = x + 6 * page, c.n = 2 * page;
  ASSERT_OPS(copy_ops_of(reg_htod, &c), 0, 1, 0);

  /* The driver's answers for what is not a new registration, or not one. */
  assert_int_equal(cuMemHostRegister(a + page, page, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  assert_int_equal(cuMemHostRegister(x, 2 * page, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  assert_int_equal(cuMemHostUnregister(a + page), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  assert_int_equal(cuMemHostAlloc((void **)&pin, page, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemHostUnregister(pin), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  assert_int_equal(cuMemFreeHost(pin), CUDA_SUCCESS);

  /* Unregistered: private pages again, bytes kept, tallyd told. */
  frees = ops(CALL_OP_PINNED_FREE);
  assert_int_equal(cuMemHostUnregister(a), CUDA_SUCCESS);
  assert_int_equal(cuMemHostUnregister(b), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_PINNED_FREE) - frees, 2);
  assert_false(on_registered_memfd(a, 4 * page));
  assert_false(on_registered_memfd(x, 8 * page));
  for (size_t i = 0; i < 4 * page; i++)
    assert_int_equal(a[i], i < n ? 0x77 : (uint8_t)(i * 13 + 1));
  assert_int_equal(cuMemHostUnregister(a), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  assert_int_equal(cuMemHostUnregister(sh), CUDA_SUCCESS);
  assert_int_equal(cuMemHostUnregister(x + 5 * page + 8), CUDA_SUCCESS);
  assert_int_equal(cuMemHostUnregister(x + 6 * page), CUDA_SUCCESS);
  assert_int_equal(ops(CALL_OP_PINNED_FREE) - frees, 2);
  assert_int_equal(cuStreamDestroy(st), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(c.d), CUDA_SUCCESS);
  munmap(a, 4 * page);
  munmap(sh, page);
  free(x);
}

/* The helper's "order": each round a thread enqueues on the NULL stream,
 * is joined, and the main thread enqueues behind it and reads back; the
 * second value must win, over shared memory and over TCP (it lost in 60
 * rounds of 64 on both when posts went out slot by slot). */
static void posts_of_joined_threads_run_in_call_order(void **state) {
  (void)state;
  helper_says_both_ways("order", "order 0 of 64\n", "order 0 of 64\n");
}

/* Pinned host memory named as a device address by memsets and device
 * copies (valid natively by unified addressing, what XLA's autotuner does):
 * over shared memory tallyd reaches it at its address; over TCP the guest
 * does the work itself in stream order.  Same bytes both ways. */
static void pinned_memory_as_device_address_over_shm_and_tcp(void **state) {
  (void)state;
  helper_says_both_ways("pinned-ops", "pinned 0\n", "pinned 0\n");
}

/* A kernel given a pointer into pinned host memory: over shared memory the
 * memory is tallyd's too and the kernel fills it; over TCP the GPU cannot
 * reach it, so the guest points the kernel at a device mirror of the
 * allocation and writes back what the kernel changed at the synchronisation
 * that covers it (the context's, then the launch stream's, then the
 * context's after the launch's stream was destroyed): the host's own write
 * meanwhile is kept, a pointer into the middle works; a launch while
 * a capture is open (it may be captured without its copies) and an
 * allocation over the mirror's 64 KiB are refused in the guest instead of
 * faulting in the context every tenant shares. */
static void kernel_pointer_to_unreachable_host_memory_is_mirrored(void **state) {
  (void)state;
  helper_says_both_ways("pinned-kernel",
                        "launch 0 sync 0 value 7 kept 5 second 9 gone 11 capture 0 big 0 free 0\n",
                        "launch 0 sync 0 value 7 kept 5 second 9 gone 11 capture 801 big 801 "
                        "free 0\n");
}

static void stream_priority_and_flags_are_what_the_app_asked(void **state) {
  CUstream hi, lo;
  int least = 1, greatest = 1, prio = 99;
  unsigned flags = 99;
  unsigned long before;
  (void)state;
  assert_int_equal(cuCtxGetStreamPriorityRange(&least, &greatest), CUDA_SUCCESS);
  assert_int_equal(least, 0);
  assert_int_equal(greatest, -5);
  /* Below the greatest: clamped to it, as the driver does. */
  assert_int_equal(cuStreamCreateWithPriority(&hi, CU_STREAM_NON_BLOCKING, -100), CUDA_SUCCESS);
  assert_int_equal(hostd__record_last_prio, 0); /* the host stream has the tenant's class */
  assert_int_equal(cuStreamCreateWithPriority(&lo, CU_STREAM_DEFAULT, 7), CUDA_SUCCESS);
  before = ops_total();
  assert_int_equal(cuStreamGetPriority(hi, &prio), CUDA_SUCCESS);
  assert_int_equal(prio, -5);
  assert_int_equal(cuStreamGetFlags(hi, &flags), CUDA_SUCCESS);
  assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
  assert_int_equal(cuStreamGetPriority(lo, &prio), CUDA_SUCCESS);
  assert_int_equal(prio, 0); /* above the least: clamped to it */
  assert_int_equal(cuStreamGetFlags(lo, &flags), CUDA_SUCCESS);
  assert_int_equal(flags, 0);
  assert_int_equal(cuStreamGetPriority(NULL, &prio), CUDA_SUCCESS);
  assert_int_equal(prio, 0);
  assert_int_equal(cuStreamGetFlags(CU_STREAM_PER_THREAD, &flags), CUDA_SUCCESS);
  assert_int_equal(flags, 0);
  assert_int_equal(ops_total(), before); /* answered locally */
  assert_int_equal(cuStreamDestroy(hi), CUDA_SUCCESS);
  assert_int_equal(cuStreamGetPriority(hi, &prio), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuStreamDestroy(lo), CUDA_SUCCESS);
}

static void unreachable_daemon_gives_no_device(void **state) {
  pid_t pid;
  char line[32] = {0};
  FILE *f;
  (void)state;
  f = helper("init", &pid, NULL, "TALLY_HOST=unix:/nonexistent/tally.sock");
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  assert_int_equal(atoi(line + 5), CUDA_ERROR_NO_DEVICE);
  fclose(f);
  wait_exit(pid);
}

static void malformed_request_closes_only_that_tenant(void **state) {
  struct sockaddr_un sa;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  uint8_t junk[16];
  char c;
  CUdeviceptr p;
  (void)state;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  memset(junk, 0xff, sizeof(junk)); /* length 0xffffffff: over the limit */
  assert_int_equal(write(fd, junk, sizeof(junk)), sizeof(junk));
  /* The daemon may say why (a REFUSE frame), then hangs up. */
  while (read(fd, &c, 1) > 0)
    ;
  close(fd);
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  assert_int_equal(cuMemAlloc(&p, 16), CUDA_SUCCESS); /* this tenant carries on */
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

static void pointer_attributes_of_own_allocations_are_local(void **state) {
  CUdeviceptr p, base;
  CUmemorytype t;
  size_t size;
  void *h;
  unsigned long before;
  (void)state;
  assert_int_equal(cuMemAlloc(&p, 1000), CUDA_SUCCESS);
  assert_int_equal(cuMemAllocHost(&h, 4096), CUDA_SUCCESS);
  before = ops_total();
  assert_int_equal(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 10),
                   CUDA_SUCCESS);
  assert_int_equal(t, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(
      cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)h),
      CUDA_SUCCESS);
  assert_int_equal(t, CU_MEMORYTYPE_HOST);
  assert_int_equal(cuMemGetAddressRange(&base, &size, p + 999), CUDA_SUCCESS);
  assert_int_equal(base, p);
  assert_int_equal(size, 1000);
  assert_int_equal(cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 4096),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ops_total(), before);
  ((char *)h)[4095] = 1; /* real memory of this process */
  assert_int_equal(cuMemFreeHost(h), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

static void *per_thread_stream_user(void *arg) {
  CUdeviceptr p = *(CUdeviceptr *)arg;
  uintptr_t rc;
  cuCtxSetCurrent(ctx);
  rc = cuMemsetD8Async(p, 1, 64, CU_STREAM_PER_THREAD);
  if (rc == CUDA_SUCCESS)
    rc = cuStreamSynchronize(CU_STREAM_PER_THREAD);
  return (void *)rc;
}

/* A launch on a thread with no current context leaves the primary context
 * current there (as cudart's launches do on the real driver); a thread that
 * chose a context keeps it. */
static void *launch_on_a_new_thread(void *arg) {
  CUfunction f = *(CUfunction *)arg;
  CUcontext before = (CUcontext)1, after = NULL, primary = NULL;
  CUdeviceptr p;
  uint32_t i = 7;
  uint64_t n = 1;
  void *args[] = {&p, &i, &n};
  if (cuCtxGetCurrent(&before) != CUDA_SUCCESS || before != NULL ||
      cuMemAlloc(&p, 4) != CUDA_SUCCESS || cuCtxGetCurrent(&after) != CUDA_SUCCESS || after)
    return (void *)1; /* an allocation does not bind */
  if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL) != CUDA_SUCCESS ||
      cuCtxGetCurrent(&after) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&primary, 0) ||
      after != primary || cuDevicePrimaryCtxRelease(0) != CUDA_SUCCESS)
    return (void *)2;
  if (cuStreamSynchronize(NULL) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS)
    return (void *)3;
  return NULL;
}

static void a_launch_binds_the_primary_context_on_a_new_thread(void **state) {
  CUmodule m;
  CUfunction f;
  CUcontext mine, cur = NULL;
  pthread_t th;
  void *rc = (void *)9;
  (void)state;
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "fill_u32"), CUDA_SUCCESS);
  assert_int_equal(pthread_create(&th, NULL, launch_on_a_new_thread, &f), 0);
  assert_int_equal(pthread_join(th, &rc), 0);
  assert_null(rc);
  /* This thread's own current context is left alone by its launches. */
  assert_int_equal(cuCtxCreate(&mine, NULL, 0, 0), CUDA_SUCCESS);
  {
    CUdeviceptr p;
    uint32_t i = 1;
    uint64_t n = 1;
    void *args[] = {&p, &i, &n};
    assert_int_equal(cuMemAlloc(&p, 4), CUDA_SUCCESS);
    assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_SUCCESS);
    assert_int_equal(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    assert_ptr_equal(cur, mine);
    assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
    assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  }
  assert_int_equal(cuCtxDestroy(mine), CUDA_SUCCESS);
  assert_int_equal(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
}

static void each_thread_gets_its_own_default_stream(void **state) {
  CUdeviceptr p;
  pthread_t th[2];
  void *rc;
  unsigned long before = hostd_record_count(HOSTD_RECORD_STREAM);
  (void)state;
  assert_int_equal(cuMemAlloc(&p, 64), CUDA_SUCCESS);
  for (int i = 0; i < 2; i++) {
    assert_int_equal(pthread_create(&th[i], NULL, per_thread_stream_user, &p), 0);
    assert_int_equal(pthread_join(th[i], &rc), 0);
    assert_int_equal((uintptr_t)rc, CUDA_SUCCESS);
  }
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STREAM) - before, 2);
  assert_ptr_equal(per_thread_stream_user(&p), (void *)CUDA_SUCCESS);
  assert_ptr_equal(per_thread_stream_user(&p), (void *)CUDA_SUCCESS); /* reused */
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STREAM) - before, 3);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

static void stream_ordered_allocation_round_trips(void **state) {
  CUdeviceptr p;
  uint64_t before = live_bytes();
  (void)state;
  assert_int_equal(cuMemAllocAsync(&p, 4096, NULL), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD8Async(p, 0, 4096, NULL), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeAsync(p, NULL), CUDA_SUCCESS);
  /* A post, freed in stream order: gone once the stream is synchronised. */
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
  assert_int_equal(live_bytes(), before);
}

/* The stack, printf FIFO and malloc heap sizes are the shared context's, in
 * tallyd: a set grows the context's value and a get reads it back, also in
 * another tenant, whose smaller set succeeds without shrinking it (and
 * without a driver call); a heap size above --max-heap-bytes (1 GiB by
 * default) and the driver's refusal (a heap size after a kernel that uses
 * malloc was launched: the recording device's uses_malloc) come back as the
 * tenant's error.  The L2 fetch granularity stays in each process, and
 * the argument checks are made before anything is sent. */
static void context_limits_are_the_shared_contexts_and_only_grow(void **state) {
  static const char img[] = "TALLYREC\nkernel uses_malloc\nkernel uses_printf\n";
  unsigned long sets = hostd_record_count(HOSTD_RECORD_LIMIT), asks;
  size_t v = 0, heap = 0, after = 0, l2 = 0;
  CUmodule m;
  CUfunction fm, fp;
  char line[128] = {0};
  int set_r = -1;
  pid_t pid;
  FILE *other;
  (void)state;
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 8u << 20); /* CUDA's default on Hopper (the recording device's) */
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 256u << 20), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 256u << 20);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_LIMIT), sets + 1);
  /* Smaller: accepted, the context keeps the larger value, the driver is not asked. */
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 16u << 20), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 256u << 20);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_LIMIT), sets + 1);
  /* Another tenant reads the context's value; its smaller set shrinks nothing. */
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_MAX_L2_FETCH_GRANULARITY, 64), CUDA_SUCCESS);
  other = helper("limits", &pid, NULL, NULL);
  assert_non_null(other);
  assert_non_null(fgets(line, sizeof(line), other));
  assert_int_equal(sscanf(line, "heap %zu set %d after %zu l2 %zu", &heap, &set_r, &after, &l2), 4);
  assert_int_equal(heap, 256u << 20);
  assert_int_equal(set_r, CUDA_SUCCESS);
  assert_int_equal(after, 256u << 20);
  assert_int_equal(l2, 128); /* its own, the default: this process's 64 stayed here */
  fclose(other);
  assert_int_equal(WEXITSTATUS(wait_exit(pid)), 0);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_LIMIT), sets + 1);
  /* Above tallyd's bound: refused before the driver is asked. */
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, (size_t)2 << 30),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 256u << 20);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 65537), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 8192), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_STACK_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 8192);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 4u << 20), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_PRINTF_FIFO_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 4u << 20);
  /* After kernels that use malloc and printf: the driver's refusal, as is. */
  assert_int_equal(cuModuleLoadData(&m, img), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&fm, m, "uses_malloc"), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&fp, m, "uses_printf"), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(fm, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(fp, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 512u << 20), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, 8u << 20), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_MALLOC_HEAP_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 256u << 20);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 128u << 20), CUDA_SUCCESS);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_STACK_SIZE, 16384), CUDA_SUCCESS); /* still grows */
  assert_int_equal(cuModuleUnload(m), CUDA_SUCCESS);
  /* Kept in the guest: no request.  Argument checks first, as before. */
  asks = ops(CALL_OP_CTX_LIMIT);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_MAX_L2_FETCH_GRANULARITY), CUDA_SUCCESS);
  assert_int_equal(v, 64);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 1 << 20), CUDA_SUCCESS);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_PERSISTING_L2_CACHE_SIZE), CUDA_SUCCESS);
  assert_int_equal(v, 1 << 20);
  assert_int_equal(cuCtxGetLimit(NULL, CU_LIMIT_STACK_SIZE), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxGetLimit(&v, CU_LIMIT_MAX), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxGetLimit(&v, (CUlimit)-1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuCtxSetLimit(CU_LIMIT_MAX, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ops(CALL_OP_CTX_LIMIT), asks);
}

static int host_fn_calls;
static void host_fn(void *data) {
  host_fn_calls += *(int *)data;
}

static void host_function_runs_after_earlier_work(void **state) {
  CUdeviceptr p;
  int three = 3;
  unsigned long wakes = hostd_server_hostfn_wakes(srv);
  (void)state;
  assert_int_equal(cuMemAlloc(&p, 64), CUDA_SUCCESS);
  assert_int_equal(cuMemsetD8Async(p, 1, 64, NULL), CUDA_SUCCESS);
  assert_int_equal(cuLaunchHostFunc(NULL, host_fn, &three), CUDA_SUCCESS);
  /* Stream-ordered (test-guest-async.c has the details): done by the sync. */
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_SUCCESS);
  assert_int_equal(host_fn_calls, 3);
  /* Reaching it woke this (best-effort, sleeping) tenant's worker ahead of
   * the requests that follow it (--hostfn-wake-us, set by the harness);
   * the cue comes right after the guest's answer, so it may trail the sync. */
  for (int i = 0; i < 2000 && hostd_server_hostfn_wakes(srv) == wakes; i++)
    usleep(1000);
  assert_int_equal(hostd_server_hostfn_wakes(srv) - wakes, 1);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
}

/* Must run last: this process's tenant stays lost, as a process whose
 * context faulted does natively, and the fault stays raised (tallyd would
 * re-execute itself once its tenants have gone: tests/test-hostd-restart.sh
 * runs that on tallyd-record). */
static void sticky_fault_loses_every_tenant_and_asks_new_ones_to_retry(void **state) {
  CUmodule m;
  CUfunction f;
  CUdeviceptr p;
  pid_t pid;
  int to_child, sync_r = -1, alloc_r = -1;
  char line[64] = {0};
  FILE *other;
  (void)state;
  /* Another tenant, live with memory of its own on the same GPU. */
  other = helper("alloc-wait-sync", &pid, &to_child, NULL);
  assert_non_null(other);
  assert_non_null(fgets(line, sizeof(line), other));
  assert_memory_equal(line, "ptr ", 4);
  assert_int_equal(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  assert_int_equal(cuModuleLoadData(&m, module_text), CUDA_SUCCESS);
  assert_int_equal(cuModuleGetFunction(&f, m, "fault"), CUDA_SUCCESS);
  assert_int_equal(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), CUDA_SUCCESS);
  /* The faulting tenant learns at its next synchronisation, as natively. */
  assert_int_equal(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(hostd__fault_pending(NULL), CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(cuStreamSynchronize(NULL), CUDA_ERROR_ILLEGAL_ADDRESS); /* sticky */
  assert_int_equal(cuMemAlloc(&p, 4096), CUDA_ERROR_ILLEGAL_ADDRESS);
  /* The other live tenant lost its memory too: its calls fail the same way. */
  close(to_child);
  assert_non_null(fgets(line, sizeof(line), other));
  assert_int_equal(sscanf(line, "after %d %d", &sync_r, &alloc_r), 2);
  assert_int_equal(sync_r, CUDA_ERROR_ILLEGAL_ADDRESS);
  assert_int_equal(alloc_r, CUDA_ERROR_ILLEGAL_ADDRESS);
  fclose(other);
  wait_exit(pid);
  /* A tenant that comes now is told to come back later; allowed no wait,
   * it gets CUDA_ERROR_NO_DEVICE (100) at once. */
  other = helper("init", &pid, NULL, "TALLY_CONNECT_WAIT_MS=0");
  assert_non_null(other);
  assert_non_null(fgets(line, sizeof(line), other));
  assert_string_equal(line, "init 100\n");
  fclose(other);
  wait_exit(pid);
  /* Nothing from before the fault was named after it, on any worker thread. */
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STALE), 0);
  assert_int_equal(cuMemAlloc(&p, 4096), CUDA_ERROR_ILLEGAL_ADDRESS); /* this tenant stays lost */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(init_gives_the_daemons_device_snapshot),
      cmocka_unit_test(unknown_device_attributes_are_refused),
      cmocka_unit_test(local_queries_never_cross_the_wire),
      cmocka_unit_test(copies_move_bytes_through_the_daemon),
      cmocka_unit_test(large_copy_is_chunked_and_intact),
      cmocka_unit_test(module_functions_and_layouts_are_local),
      cmocka_unit_test(launches_are_fire_and_forget),
      cmocka_unit_test(a_launch_binds_the_primary_context_on_a_new_thread),
      cmocka_unit_test(launch_error_surfaces_at_next_sync),
      cmocka_unit_test(queries_return_the_daemons_answer_in_order),
      cmocka_unit_test(copies_outside_own_allocations_are_refused),
      cmocka_unit_test(another_tenants_memory_is_refused),
      cmocka_unit_test(foreign_handles_are_refused),
      cmocka_unit_test(old_names_are_their_successors),
      cmocka_unit_test(stream_attributes_are_kept_and_checked),
      cmocka_unit_test(streams_events_and_legacy_ordering),
      cmocka_unit_test(module_image_is_sent_once),
      cmocka_unit_test(huge_module_image_loads),
      cmocka_unit_test(module_globals_are_copyable_by_their_tenant),
      cmocka_unit_test(library_kernels_and_module_view),
      cmocka_unit_test(libraries_and_modules_load_from_files),
      cmocka_unit_test(peer_access_is_refused_as_for_devices_that_cannot),
      cmocka_unit_test(profiler_start_and_stop_check_the_context),
      cmocka_unit_test(function_attributes_local_and_remote),
      cmocka_unit_test(occupancy_asks_for_the_attributes_it_lacks),
      cmocka_unit_test(library_kernel_launch_is_checked_at_the_call),
      cmocka_unit_test(cluster_occupancy_crosses_the_wire_once),
      cmocka_unit_test(context_table_object_and_value_come_from_the_daemon),
      cmocka_unit_test(tally_table_gives_budget_and_class),
      cmocka_unit_test(blaslt_table_serves_the_layout_objects),
      cmocka_unit_test(tools_module_table_hands_out_the_module_functions),
      cmocka_unit_test(link_of_several_inputs_is_done_by_tallyd),
      cmocka_unit_test(tally_table_says_whether_a_latency_critical_tenant_is_connected),
      cmocka_unit_test(dead_tenant_is_cleaned_up),
      cmocka_unit_test(latency_critical_tenant_gets_the_greatest_priority),
      cmocka_unit_test(sync_word_answers_stream_synchronisations),
      cmocka_unit_test(posts_of_joined_threads_run_in_call_order),
      cmocka_unit_test(pinned_memory_as_device_address_over_shm_and_tcp),
      cmocka_unit_test(kernel_pointer_to_unreachable_host_memory_is_mirrored),
      cmocka_unit_test(stream_priority_and_flags_are_what_the_app_asked),
      cmocka_unit_test(unreachable_daemon_gives_no_device),
      cmocka_unit_test(malformed_request_closes_only_that_tenant),
      cmocka_unit_test(pointer_attributes_of_own_allocations_are_local),
      cmocka_unit_test(host_function_runs_after_earlier_work),
      cmocka_unit_test(each_thread_gets_its_own_default_stream),
      cmocka_unit_test(stream_ordered_allocation_round_trips),
      cmocka_unit_test(context_limits_are_the_shared_contexts_and_only_grow),
      cmocka_unit_test(forked_child_gets_no_cuda_and_does_not_keep_the_tenant),
      cmocka_unit_test(graph_copies_name_host_memory_both_ways),
      cmocka_unit_test(pinned_memory_allocated_where_it_was_freed_stays_reachable),
      cmocka_unit_test(registered_memory_works_the_same_both_ways),
      cmocka_unit_test(registered_memory_copies_name_its_whole_pages_over_shm),
      cmocka_unit_test(sticky_fault_loses_every_tenant_and_asks_new_ones_to_retry),
  };
  signal(SIGPIPE, SIG_IGN);
  return cmocka_run_group_tests_name("guest-daemon", tests, setup, teardown);
}
