/* test-guest-async.c: stream-ordered host functions and pinned host memory
 * shared with tallyd, on the recording device.
 *
 * Like test-guest-daemon.c, this process is a tenant (linked against
 * guestlib/libcuda.so.1) and runs tallyd's server in a thread on the
 * recording GPU backend, whose streams queue work behind a host-function
 * gate (hostd/gpu-record.c).  Host functions here block on semaphores the
 * test posts, so "the stream is still blocked" is a state the test holds,
 * never a timing guess.  What is checked: work behind a host function waits
 * for it, a query says NOT_READY meanwhile, a synchronisation waits for it,
 * other streams go on, a tenant killed with a pending host function is
 * cleaned up; pinned memory is shared as a memfd, so copies move no payload
 * bytes, async D2H lands when the stream runs, and the daemon refuses ranges
 * past an allocation and other tenants' tags, and unregisters on free and
 * death.  Never GPU coverage: tests/gpu/ has those.
 */
#include <cuda.h>
#include <errno.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "hostd/hostd-int.h"
#include "tests/guest-daemon-harness.h"
#include "tests/hostd-call-harness.h"
#include "wire/wire.h"

static CUmodule mod;
static CUfunction fill;

static const char module_text[] = "TALLYREC\n"
                                  "kernel fill_u32 8,4,8\n";

static int setup(void **state) {
  (void)state;
  if (gd_start("test-guest-async", -1) != 0)
    return -1;
  if (cuModuleLoadData(&mod, module_text) != CUDA_SUCCESS ||
      cuModuleGetFunction(&fill, mod, "fill_u32") != CUDA_SUCCESS)
    return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  return gd_stop();
}

/* fill_u32(p, v, n) on stream s. */
static CUresult fill_on(CUstream s, CUdeviceptr p, uint32_t v, uint64_t n) {
  void *args[] = {&p, &v, &n};
  return cuLaunchKernel(fill, 1, 1, 1, 32, 1, 1, 0, s, args, NULL);
}

static uint32_t first_word(CUdeviceptr p) {
  uint32_t v = 0;
  assert_int_equal(cuMemcpyDtoH(&v, p, 4), CUDA_SUCCESS);
  return v;
}

/* A host function that waits until the test posts `go`, then counts. */
typedef struct gated_fn {
  sem_t go;
  int ran;
} gated_fn_t;

static void gated(void *data) {
  gated_fn_t *g = data;
  while (sem_wait(&g->go) != 0 && errno == EINTR)
    ;
  __atomic_fetch_add(&g->ran, 1, __ATOMIC_SEQ_CST);
}

/* ------------------------------------------------------ host functions */

static void host_function_blocks_later_work_until_it_ran(void **state) {
  CUstream s, other;
  CUdeviceptr p;
  uint32_t seen = 0;
  gated_fn_t g = {.ran = 0};
  (void)state;
  assert_int_equal(sem_init(&g.go, 0, 0), 0);
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&p, 128), CUDA_SUCCESS);
  assert_int_equal(fill_on(s, p, 1, 32), CUDA_SUCCESS);
  /* Returns at once (the function cannot run before `go`). */
  assert_int_equal(cuLaunchHostFunc(s, gated, &g), CUDA_SUCCESS);
  assert_int_equal(fill_on(s, p, 2, 32), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  /* Read through another stream: the kernel before ran, the one after not. */
  assert_int_equal(cuMemcpyDtoHAsync(&seen, p, 4, other), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(other), CUDA_SUCCESS);
  assert_int_equal(seen, 1);
  assert_int_equal(__atomic_load_n(&g.ran, __ATOMIC_SEQ_CST), 0);
  assert_int_equal(sem_post(&g.go), 0);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(__atomic_load_n(&g.ran, __ATOMIC_SEQ_CST), 1);
  assert_int_equal(cuStreamQuery(s), CUDA_SUCCESS);
  assert_int_equal(first_word(p), 2);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(other), CUDA_SUCCESS);
  sem_destroy(&g.go);
}

static gated_fn_t *sync_gate;
static int sync_entered;
static void *post_when_main_syncs(void *arg) {
  (void)arg;
  while (!__atomic_load_n(&sync_entered, __ATOMIC_SEQ_CST))
    sched_yield();
  sem_post(&sync_gate->go);
  return NULL;
}

static void synchronize_waits_for_the_host_function(void **state) {
  CUstream s;
  pthread_t th;
  gated_fn_t g = {.ran = 0};
  (void)state;
  assert_int_equal(sem_init(&g.go, 0, 0), 0);
  sync_gate = &g;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  assert_int_equal(cuLaunchHostFunc(s, gated, &g), CUDA_SUCCESS);
  assert_int_equal(pthread_create(&th, NULL, post_when_main_syncs, NULL), 0);
  __atomic_store_n(&sync_entered, 1, __ATOMIC_SEQ_CST);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(__atomic_load_n(&g.ran, __ATOMIC_SEQ_CST), 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  /* The context-wide synchronisation also waits (through the legacy stream). */
  g.ran = 0;
  assert_int_equal(cuLaunchHostFunc(NULL, gated, &g), CUDA_SUCCESS);
  assert_int_equal(sem_post(&g.go), 0);
  assert_int_equal(cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(g.ran, 1);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  sem_destroy(&g.go);
}

static void other_streams_go_on_while_one_waits(void **state) {
  CUstream a, b;
  CUdeviceptr p, q;
  gated_fn_t g = {.ran = 0};
  (void)state;
  assert_int_equal(sem_init(&g.go, 0, 0), 0);
  assert_int_equal(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&p, 128), CUDA_SUCCESS);
  assert_int_equal(cuMemAlloc(&q, 128), CUDA_SUCCESS);
  assert_int_equal(cuLaunchHostFunc(a, gated, &g), CUDA_SUCCESS);
  assert_int_equal(fill_on(a, p, 5, 32), CUDA_SUCCESS);
  assert_int_equal(fill_on(b, q, 7, 32), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(b), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
  assert_int_equal(first_word(q), 7);
  assert_int_equal(sem_post(&g.go), 0);
  assert_int_equal(cuStreamSynchronize(a), CUDA_SUCCESS);
  assert_int_equal(first_word(p), 5);
  assert_int_equal(g.ran, 1);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(q), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(a), CUDA_SUCCESS);
  assert_int_equal(cuStreamDestroy(b), CUDA_SUCCESS);
  sem_destroy(&g.go);
}

static int order[8], norder;
static void record_order(void *data) {
  order[norder++] = (int)(intptr_t)data;
}

static CUstream cb_stream;
static CUresult cb_status = CUDA_ERROR_UNKNOWN;
static void stream_cb(CUstream s, CUresult status, void *data) {
  cb_stream = s;
  cb_status = status;
  record_order(data);
}

static void host_functions_run_in_stream_order_one_poll_each(void **state) {
  CUstream s;
  unsigned long polls = ops(CALL_OP_HOSTFN_WAIT);
  (void)state;
  norder = 0;
  assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
  for (int i = 1; i <= 3; i++)
    assert_int_equal(cuLaunchHostFunc(s, record_order, (void *)(intptr_t)i), CUDA_SUCCESS);
  assert_int_equal(cuStreamAddCallback(s, stream_cb, (void *)(intptr_t)4, 0), CUDA_SUCCESS);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(norder, 4);
  for (int i = 0; i < 4; i++)
    assert_int_equal(order[i], i + 1);
  assert_ptr_equal(cb_stream, s);
  assert_int_equal(cb_status, CUDA_SUCCESS);
  /* Each function costs one long-poll round trip (it reports the previous
   * one done); the thread's poll now parked is the fifth. */
  assert_true(ops(CALL_OP_HOSTFN_WAIT) - polls <= 5);
  assert_int_equal(cuStreamAddCallback(s, stream_cb, NULL, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuLaunchHostFunc(s, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
}

/* A tenant killed by its own host function (helper ACTION: "hostfn-die" on
 * a stream, "graph-hostfn-die" a graph's host node) while the stream holds
 * a memset and a second host function behind it. */
static void killed_by_a_host_function(const char *action) {
  pid_t pid;
  char line[64] = {0};
  uint64_t before = hostd_record_live_bytes();
  FILE *f = helper(action, &pid, NULL, NULL);
  int st;
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  assert_string_equal(line, "ready\n");
  st = wait_exit(pid);
  assert_true(WIFSIGNALED(st));
  /* The second host function never ran: the first killed the process. */
  assert_null(fgets(line, sizeof(line), f));
  fclose(f);
  /* Its worker was blocked in the stream synchronisation: the gate opened
   * at on_close, the queued memset ran, and everything was freed. */
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  assert_int_equal(hostd_record_live_bytes(), before);
}

static void tenant_killed_with_a_pending_host_function_is_cleaned_up(void **state) {
  (void)state;
  killed_by_a_host_function("hostfn-die");
}

static void tenant_killed_by_a_graphs_host_function_is_cleaned_up(void **state) {
  (void)state;
  killed_by_a_host_function("graph-hostfn-die");
}

/* A tenant speaking the call protocol without libcuda, to send what
 * libcuda never would (tests the loop thread's handling of HOSTFN_WAIT):
 * request q of op encoded by the call table; out gets a HOSTFN_WAIT seq. */
static uint32_t raw_call(wire_conn_t *c, uint32_t op, const void *q, uint64_t *out) {
  uint8_t hdr[CALL_HDR_LEN], fixed[CALL_REQ_FIXED_MAX];
  call_view_t tails[CALL_TAILS_MAX];
  const call_msg_t *m = call_req_msg(op);
  size_t n = call_msg_fixed(m), got = 0;
  struct iovec iov[2] = {{hdr, sizeof(hdr)}, {fixed, n}};
  call_reply_hdr_t rh;
  void *buf = NULL;
  assert_int_equal(call_encode(m, q, fixed, tails), 0);
  call_hdr_write(hdr, op, 0, (uint32_t)n);
  if (wire_conn_call_alloc(c, iov, n ? 2 : 1, &buf, &got) != 0 || got < CALL_REPLY_HDR_LEN) {
    free(buf);
    return 0xffffffffu;
  }
  call_reply_hdr_read(buf, &rh);
  if (out && rh.result == CUDA_SUCCESS) {
    call_hostfn_wait_rep_t rep;
    assert_int_equal(call_hostfn_wait_rep_decode((uint8_t *)buf + CALL_REPLY_HDR_LEN,
                                                 got - CALL_REPLY_HDR_LEN, &rep, NULL),
                     0);
    *out = rep.seq;
  }
  free(buf);
  return rh.result;
}

static wire_conn_t *raw_tenant(void) {
  wire_conn_t *c = NULL;
  wire_hello_t h = {.tenant = "raw", .prio = WIRE_PRIO_BEST_EFFORT};
  wire_conn_opts_t o = {.no_thread = true};
  call_hello_req_t hello;
  char url[160];
  snprintf(url, sizeof(url), "unix:%s", sock);
  assert_int_equal(wire_conn_open(&c, url, &h, &o, NULL, 0), 0);
  memset(&hello, 0, sizeof(hello));
  hello.version = CALL_PROTO_VERSION;
  assert_int_equal(raw_call(c, CALL_OP_HELLO, &hello, NULL), CUDA_SUCCESS);
  return c;
}

static wire_conn_t *parked_conn;
static uint32_t parked_result = 1;
static uint64_t parked_seq = 99;
static void *park_a_poll(void *arg) {
  call_hostfn_wait_req_t done = {.done = 0};
  (void)arg;
  parked_result = raw_call(parked_conn, CALL_OP_HOSTFN_WAIT, &done, &parked_seq);
  return NULL;
}

static void host_function_polls_are_answered_by_the_loop_thread(void **state) {
  wire_conn_t *c = raw_tenant();
  call_hostfn_wait_req_t args = {.done = 0};
  uint64_t seq = 99;
  unsigned long polls = ops(CALL_OP_HOSTFN_WAIT);
  pthread_t th;
  (void)state;
  parked_conn = c;
  assert_int_equal(pthread_create(&th, NULL, park_a_poll, NULL), 0);
  while (ops(CALL_OP_HOSTFN_WAIT) == polls) /* counted when the loop thread parks it */
    sched_yield();
  /* One poll at a time; unknown "done" values are refused. */
  assert_int_equal(raw_call(c, CALL_OP_HOSTFN_WAIT, &args, &seq), CUDA_ERROR_INVALID_VALUE);
  args.done = 7;
  assert_int_equal(raw_call(c, CALL_OP_HOSTFN_WAIT, &args, &seq), CUDA_ERROR_INVALID_VALUE);
  /* done 2 (stop) answers the parked poll and this one with seq 0. */
  args.done = 2;
  assert_int_equal(raw_call(c, CALL_OP_HOSTFN_WAIT, &args, &seq), CUDA_SUCCESS);
  assert_int_equal(seq, 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(parked_result, CUDA_SUCCESS);
  assert_int_equal(parked_seq, 0);
  /* As a post it is a protocol error: that tenant is closed, others go on. */
  {
    uint8_t hdr[CALL_HDR_LEN];
    struct iovec iov = {hdr, sizeof(hdr)};
    call_hdr_write(hdr, CALL_OP_HOSTFN_WAIT, CALL_ASYNC, 0);
    assert_int_equal(wire_conn_post(c, &iov, 1), 0);
    assert_int_equal(wire_conn_flush(c), 0);
  }
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  wire_conn_close(c);
  assert_int_equal(cuStreamQuery(NULL), CUDA_SUCCESS); /* this tenant carries on */
}

/* ---------------------------------------------- pinned memory over shm */

/* Host ranges registered now, once the daemon's release thread has made
 * the unregistrations queued so far (PINNED_FREE returns before it does). */
static long registered_now(void) {
  hostd__release_drain();
  return hostd__record_registered;
}

static void pinned_copies_move_no_payload_bytes(void **state) {
  size_t n = (size_t)4 << 20;
  uint8_t *in, *out;
  CUdeviceptr p;
  long registered = registered_now();
  unsigned long htod = ops(CALL_OP_HTOD), dtoh = ops(CALL_OP_DTOH);
  unsigned long pc = ops(CALL_OP_PINNED_COPY), rx;
  (void)state;
  assert_int_equal(cuMemHostAlloc((void **)&in, n, 0), CUDA_SUCCESS);
  assert_int_equal(cuMemAllocHost((void **)&out, n), CUDA_SUCCESS);
  for (size_t i = 0; i < n; i++)
    in[i] = (uint8_t)(i * 131 + 7);
  memset(out, 0, n);
  assert_int_equal(cuMemAlloc(&p, n), CUDA_SUCCESS);
  rx = hostd_server_rx_bytes(srv);
  assert_int_equal(cuMemcpyHtoD(p, in, n), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoH(out, p, n), CUDA_SUCCESS);
  assert_memory_equal(in, out, n);
  /* Registered by the worker in order with the tenant's requests (on_fd
   * only maps and queues), so certainly before these copies ran. */
  assert_int_equal(registered_now() - registered, 2);
  /* 8 MiB moved; two requests of 64 bytes crossed the wire. */
  assert_true(hostd_server_rx_bytes(srv) - rx < 1024);
  assert_int_equal(ops(CALL_OP_PINNED_COPY) - pc, 2);
  assert_int_equal(ops(CALL_OP_HTOD), htod);
  assert_int_equal(ops(CALL_OP_DTOH), dtoh);
  /* Inside the allocation too, at an offset; async on a stream. */
  {
    CUstream s;
    assert_int_equal(cuStreamCreate(&s, 0), CUDA_SUCCESS);
    memset(out, 0, n);
    assert_int_equal(cuMemcpyHtoDAsync(p + 100, in + 4096, 5000, s), CUDA_SUCCESS);
    assert_int_equal(cuMemcpyDtoHAsync(out + 8192, p + 100, 5000, s), CUDA_SUCCESS);
    assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
    assert_memory_equal(out + 8192, in + 4096, 5000);
    assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  }
  /* The device pointer of mapped pinned memory is its address. */
  {
    CUdeviceptr d = 0;
    assert_int_equal(cuMemHostGetDevicePointer(&d, in + 64, 0), CUDA_SUCCESS);
    assert_int_equal(d, (CUdeviceptr)(uintptr_t)(in + 64));
    d = 0;
    assert_int_equal(cuPointerGetAttribute(&d, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                           (CUdeviceptr)(uintptr_t)(in + 64)),
                     CUDA_SUCCESS);
    assert_int_equal(d, (CUdeviceptr)(uintptr_t)(in + 64));
  }
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeHost(in), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeHost(out), CUDA_SUCCESS);
  assert_int_equal(registered_now(), registered);
}

static void async_dtoh_into_pinned_memory_lands_when_the_stream_runs(void **state) {
  CUstream s;
  CUdeviceptr p;
  uint32_t *h;
  gated_fn_t g = {.ran = 0};
  (void)state;
  assert_int_equal(sem_init(&g.go, 0, 0), 0);
  assert_int_equal(cuMemHostAlloc((void **)&h, 4096, 0), CUDA_SUCCESS);
  h[0] = 0xdeadbeef;
  assert_int_equal(cuMemAlloc(&p, 4096), CUDA_SUCCESS);
  assert_int_equal(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(fill_on(s, p, 42, 1024), CUDA_SUCCESS);
  assert_int_equal(cuLaunchHostFunc(s, gated, &g), CUDA_SUCCESS);
  assert_int_equal(cuMemcpyDtoHAsync(h, p, 4096, s), CUDA_SUCCESS);
  assert_int_equal(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  assert_int_equal(h[0], 0xdeadbeef); /* not yet: the copy waits behind the host function */
  assert_int_equal(sem_post(&g.go), 0);
  assert_int_equal(cuStreamSynchronize(s), CUDA_SUCCESS);
  assert_int_equal(h[0], 42);
  assert_int_equal(h[1023], 42);
  assert_int_equal(cuStreamDestroy(s), CUDA_SUCCESS);
  assert_int_equal(cuMemFree(p), CUDA_SUCCESS);
  assert_int_equal(cuMemFreeHost(h), CUDA_SUCCESS);
  sem_destroy(&g.go);
}

static void dead_tenants_pinned_memory_is_unregistered(void **state) {
  pid_t pid;
  char line[32] = {0};
  long registered = registered_now();
  FILE *f = helper("pinned-die", &pid, NULL, NULL);
  (void)state;
  assert_non_null(f);
  assert_non_null(fgets(line, sizeof(line), f));
  assert_string_equal(line, "ready\n");
  assert_true(WIFSIGNALED(wait_exit(pid)));
  fclose(f);
  assert_int_equal(hostd_server_wait_tenants(srv, 1, GD_SETTLE_MS), 0);
  assert_int_equal(registered_now(), registered);
}

/* The daemon side, driven directly: ranges past the allocation and tags of
 * other tenants are refused with CUDA_ERROR_INVALID_VALUE. */
static hostd_tenant_t *tenant_after_hello(uint32_t id, wire_buf_t *reply) {
  hostd_tenant_t *t = hc_tenant(id, reply);
  assert_non_null(t);
  return t;
}

static uint32_t pinned_copy(hostd_tenant_t *t, wire_buf_t *reply, uint64_t p, uint64_t tag,
                            uint64_t off, uint64_t len, uint32_t dir) {
  call_pinned_copy_req_t q = {.dev = p, .tag = tag, .off = off, .len = len, .dir = dir};
  assert_int_equal(hc_exec(t, CALL_OP_PINNED_COPY, CALL_SYNCPOINT, &q, reply, NULL), 0);
  return hc_result(reply);
}

static void daemon_refuses_straddling_ranges_and_foreign_tags(void **state) {
  wire_buf_t reply = {0};
  hostd_tenant_t *a = tenant_after_hello(91, &reply), *b = tenant_after_hello(92, &reply);
  size_t size = 8192;
  uint8_t *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint64_t dev, alloc = 16384, tag = 0x7000000000ull;
  call_mem_alloc_req_t aq = {.size = 16384};
  call_mem_alloc_rep_t ar;
  long registered = registered_now();
  (void)state;
  assert_true(m != MAP_FAILED);
  for (size_t i = 0; i < size; i++)
    m[i] = (uint8_t)i;
  assert_int_equal(hostd__tenant_pinned_add(a, tag, m, size), 0);
  assert_int_equal(registered_now() - registered, 1);
  assert_int_equal(hc_exec(a, CALL_OP_MEM_ALLOC, 0, &aq, &reply, NULL), 0);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &ar), 0);
  dev = ar.ptr;
  assert_int_equal(pinned_copy(a, &reply, dev, tag, 0, size, 0), CUDA_SUCCESS);
  assert_int_equal(pinned_copy(a, &reply, dev, tag, 4096, 4097, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(pinned_copy(a, &reply, dev, tag, 8193, 0, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(pinned_copy(a, &reply, dev, tag, UINT64_MAX, 2, 1), CUDA_ERROR_INVALID_VALUE);
  /* Device range past a's allocation. */
  assert_int_equal(pinned_copy(a, &reply, dev + alloc - 100, tag, 0, 200, 1),
                   CUDA_ERROR_INVALID_VALUE);
  /* b knows neither the tag nor the device memory. */
  assert_int_equal(pinned_copy(b, &reply, dev, tag, 0, 16, 1), CUDA_ERROR_INVALID_VALUE);
  /* A tag shared twice is refused (the second mapping is unmapped). */
  {
    uint8_t *m2 = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(m2 != MAP_FAILED);
    assert_int_equal(hostd__tenant_pinned_add(a, tag, m2, 4096), -EEXIST);
  }
  /* Round trip through the device: D2H into the mapping's second page. */
  assert_int_equal(pinned_copy(a, &reply, dev, tag, 4096, 4096, 1), CUDA_SUCCESS);
  for (size_t i = 0; i < 4096; i++)
    assert_int_equal(m[4096 + i], (uint8_t)i);
  hostd__tenant_free(a); /* unregisters and unmaps */
  hostd__tenant_free(b);
  assert_int_equal(registered_now(), registered);
  wire_buf_close(&reply);
}

static uint32_t call_sync(hostd_tenant_t *t, wire_buf_t *reply, uint32_t op, const void *q) {
  assert_int_equal(hc_exec(t, op, CALL_SYNCPOINT, q, reply, NULL), 0);
  return hc_result(reply);
}

/* Pinned memory shared at the guest's own address is device memory by
 * unified addressing, as natively: a memset or a device copy may name it;
 * past its end, or in a mapping tallyd placed elsewhere, it is refused. */
static void pinned_memory_at_its_own_address_is_device_accessible(void **state) {
  wire_buf_t reply = {0};
  hostd_tenant_t *a = tenant_after_hello(93, &reply);
  size_t size = 8192;
  uint8_t *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint8_t *o = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint64_t base, other = 0x7100000000ull;
  call_mem_alloc_req_t aq = {.size = 4096};
  call_mem_alloc_rep_t ar;
  (void)state;
  assert_true(m != MAP_FAILED && o != MAP_FAILED);
  base = (uint64_t)(uintptr_t)m;
  assert_int_equal(hostd__tenant_pinned_add(a, base, m, size), 0);
  assert_int_equal(hostd__tenant_pinned_add(a, other, o, 4096), 0); /* tag != address */
  call_memset_req_t ms = {.dst = base + 100, .value = 0xab, .elem = 1, .count = 16};
  assert_int_equal(call_sync(a, &reply, CALL_OP_MEMSET, &ms), CUDA_SUCCESS);
  for (size_t i = 0; i < 16; i++)
    assert_int_equal(m[100 + i], 0xab);
  assert_int_equal(m[99], 0);
  assert_int_equal(m[116], 0);
  ms.dst = base + size - 8, ms.count = 9; /* one byte past the end */
  assert_int_equal(call_sync(a, &reply, CALL_OP_MEMSET, &ms), CUDA_ERROR_INVALID_VALUE);
  ms.dst = (uint64_t)(uintptr_t)o, ms.count = 1; /* mapped elsewhere than its tag */
  assert_int_equal(call_sync(a, &reply, CALL_OP_MEMSET, &ms), CUDA_ERROR_INVALID_VALUE);
  ms.dst = other;
  assert_int_equal(call_sync(a, &reply, CALL_OP_MEMSET, &ms), CUDA_ERROR_INVALID_VALUE);
  /* A device copy from pinned memory into an allocation and back. */
  assert_int_equal(hc_exec(a, CALL_OP_MEM_ALLOC, 0, &aq, &reply, NULL), 0);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &ar), 0);
  call_dtod_req_t dd = {.dst = ar.ptr, .src = base + 100, .len = 16};
  assert_int_equal(call_sync(a, &reply, CALL_OP_DTOD, &dd), CUDA_SUCCESS);
  dd = (call_dtod_req_t){.dst = base + 4096, .src = ar.ptr, .len = 16};
  assert_int_equal(call_sync(a, &reply, CALL_OP_DTOD, &dd), CUDA_SUCCESS);
  for (size_t i = 0; i < 16; i++)
    assert_int_equal(m[4096 + i], 0xab);
  hostd__tenant_free(a); /* unregisters and unmaps both */
  wire_buf_close(&reply);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(host_function_blocks_later_work_until_it_ran),
      cmocka_unit_test(synchronize_waits_for_the_host_function),
      cmocka_unit_test(other_streams_go_on_while_one_waits),
      cmocka_unit_test(host_functions_run_in_stream_order_one_poll_each),
      cmocka_unit_test(tenant_killed_with_a_pending_host_function_is_cleaned_up),
      cmocka_unit_test(tenant_killed_by_a_graphs_host_function_is_cleaned_up),
      cmocka_unit_test(host_function_polls_are_answered_by_the_loop_thread),
      cmocka_unit_test(pinned_copies_move_no_payload_bytes),
      cmocka_unit_test(async_dtoh_into_pinned_memory_lands_when_the_stream_runs),
      cmocka_unit_test(dead_tenants_pinned_memory_is_unregistered),
      cmocka_unit_test(daemon_refuses_straddling_ranges_and_foreign_tags),
      cmocka_unit_test(pinned_memory_at_its_own_address_is_device_accessible),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
