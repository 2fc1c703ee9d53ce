/* test-hostd-graph.c: stream capture and CUDA graphs in hostd
 * (exec-graph.c) on the recording device, driven directly with requests
 * encoded by the call table, with the scheduler running (tenants are
 * best-effort, so their launches normally go through its queue).
 *
 * Checks that work captured and replayed leaves memory as the same work
 * run eagerly (kernels, copies, memsets; across streams joined by events),
 * that nothing captured runs and no captured launch enters the scheduler's
 * queue while a replay enters it as one launch, the capture status during
 * a capture and a capture invalidated by a synchronising call, the
 * worker's capture mode, explicit graphs (dependencies, child graphs,
 * kernel parameters of an exec, a child graph node of an exec given another
 * child graph, exec update refusing a changed topology), an exec's copy,
 * memset and event nodes given new parameters, a graph's nodes given new
 * parameters (execs made before keep theirs), the device's graph memory,
 * a clone, a graph's host node answering its own function after its exec's
 * copy took another,
 * a capture into a graph the tenant made (cuStreamBeginCaptureToGraph),
 * that another tenant's graph, node and exec handles are refused, that
 * closing a tenant destroys its graphs, execs and open captures, and that
 * malformed requests are protocol errors.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "hostd/guard.h"
#include "hostd/tenant-int.h"
#include "tests/hostd-call-fixture.h"

#define N 64 /* u32 words per buffer */

static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";

/* The shared fixture, the device entered on this thread and the tally scheduler. */
static int setup(void **state) {
  hostd_sched_config_t cfg;
  hostd__sched_config_init(&cfg);
  if (hc_fixture_setup(state) != 0 || hostd__gpu.thread_enter() != CUDA_SUCCESS ||
      hostd__sched_parse_policy(&cfg, "tally") != 0 || hostd__sched_init(&cfg) != 0)
    return -1;
  return 0;
}

static int teardown(void **state) {
  hostd__sched_shutdown();
  return hc_fixture_teardown(state);
}

static uint64_t alloc(hostd_tenant_t *t) {
  call_mem_alloc_req_t q = {.size = N * 4};
  call_mem_alloc_rep_t a;
  hc_call_ok(t, CALL_OP_MEM_ALLOC, &q, &a);
  return a.ptr;
}

static uint64_t stream(hostd_tenant_t *t) {
  call_stream_new_req_t q = {.flags = CU_STREAM_NON_BLOCKING};
  call_stream_new_rep_t a;
  hc_call_ok(t, CALL_OP_STREAM_NEW, &q, &a);
  return a.stream;
}

static uint64_t event(hostd_tenant_t *t) {
  call_event_new_req_t q = {.flags = 0};
  call_event_new_rep_t a;
  hc_call_ok(t, CALL_OP_EVENT_NEW, &q, &a);
  return a.event;
}

/* Loads the fill_u32(ptr, value, count) module; its function. */
static uint64_t fill_func(hostd_tenant_t *t) {
  call_module_load_req_t q = {.id = wire_content_id(img, sizeof(img) - 1), .has_image = 1,
                              .image = {(const uint8_t *)img, sizeof(img) - 1}};
  call_module_load_rep_t a;
  call_func_t f;
  size_t used;
  hc_call_ok(t, CALL_OP_MODULE_LOAD, &q, &a);
  assert_int_equal(a.nfunc, 1);
  assert_int_equal(call_func_decode(a.funcs.p, a.funcs.len, &f, &used, NULL), 0);
  return f.handle;
}

static void fill_args(uint8_t args[24], uint64_t p, uint32_t v, uint64_t n) {
  memset(args, 0, 24);
  memcpy(args, &p, 8);
  memcpy(args + 8, &v, 4);
  memcpy(args + 16, &n, 8);
}

static uint32_t fill(hostd_tenant_t *t, uint64_t f, uint64_t s, uint64_t p, uint32_t v,
                     uint64_t n) {
  uint8_t args[24];
  fill_args(args, p, v, n);
  call_launch_req_t q = {.func = f, .grid = {1, 1, 1}, .block = {32, 1, 1}, .stream = s,
                         .argbytes = 24, .args = {args, 24}};
  return hc_call(t, CALL_OP_LAUNCH, &q);
}

static uint32_t memset32(hostd_tenant_t *t, uint64_t s, uint64_t p, uint32_t v, uint64_t n) {
  call_memset_req_t q = {.dst = p, .value = v, .elem = 4, .count = n, .stream = s};
  return hc_call(t, CALL_OP_MEMSET, &q);
}

static uint32_t dtod(hostd_tenant_t *t, uint64_t s, uint64_t dst, uint64_t src, uint64_t len) {
  call_dtod_req_t q = {.dst = dst, .src = src, .len = len, .stream = s};
  return hc_call(t, CALL_OP_DTOD, &q);
}

static void read_back(hostd_tenant_t *t, uint64_t s, uint64_t p, uint32_t out[N]) {
  call_stream_sync_req_t sq = {.stream = s};
  call_dtoh_req_t q = {.src = p, .len = N * 4, .stream = s};
  assert_int_equal(hc_call(t, CALL_OP_STREAM_SYNC, &sq), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_DTOH, &q), CUDA_SUCCESS);
  memcpy(out, reply.data + CALL_REPLY_HDR_LEN, N * 4);
}

static call_capture_info_rep_t info(hostd_tenant_t *t, uint64_t s) {
  call_capture_info_req_t q = {.stream = s};
  call_capture_info_rep_t a;
  hc_call_ok(t, CALL_OP_CAPTURE_INFO, &q, &a);
  return a;
}

static uint32_t begin(hostd_tenant_t *t, uint64_t s, uint32_t mode) {
  call_capture_begin_req_t q = {.stream = s, .mode = mode};
  return hc_call(t, CALL_OP_CAPTURE_BEGIN, &q);
}

static uint64_t end(hostd_tenant_t *t, uint64_t s, uint32_t want) {
  call_capture_end_req_t q = {.stream = s};
  call_capture_end_rep_t a = {0};
  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_END, &q), want);
  if (want == CUDA_SUCCESS)
    assert_int_equal(hc_reply(&reply, CALL_OP_CAPTURE_END, &a), 0);
  return a.graph;
}

static uint64_t instantiate(hostd_tenant_t *t, uint64_t g) {
  call_graph_instantiate_req_t q = {.graph = g};
  call_graph_instantiate_rep_t a;
  hc_call_ok(t, CALL_OP_GRAPH_INSTANTIATE, &q, &a);
  return a.exec;
}

static uint32_t launch_graph(hostd_tenant_t *t, uint64_t e, uint64_t s) {
  call_graph_launch_req_t q = {.exec = e, .stream = s};
  return hc_call(t, CALL_OP_GRAPH_LAUNCH, &q);
}

/* The work both runs do: kernels, a copy and memsets over buffers a, b. */
static void work(hostd_tenant_t *t, uint64_t f, uint64_t s, uint64_t a, uint64_t b) {
  assert_int_equal(memset32(t, s, a, 0x11111111, N), CUDA_SUCCESS);
  assert_int_equal(fill(t, f, s, a, 7, 16), CUDA_SUCCESS);
  assert_int_equal(dtod(t, s, b, a, N * 4), CUDA_SUCCESS);
  assert_int_equal(fill(t, f, s, b + 128, 9, 8), CUDA_SUCCESS);
  assert_int_equal(memset32(t, s, a + 192, 5, 4), CUDA_SUCCESS);
}

static void capture_then_replay_matches_eager(void **state) {
  hostd_tenant_t *t = hc_tenant(1, &reply);
  uint64_t f = fill_func(t), s = stream(t), a = alloc(t), b = alloc(t);
  uint32_t ea[N], eb[N], ga[N], gb[N], zero[N] = {0};
  hostd_sched_stats_t st0, st1;
  unsigned long captured;
  (void)state;
  assert_non_null(t->sched); /* best-effort, scheduled */
  work(t, f, s, a, b);
  read_back(t, s, a, ea);
  read_back(t, s, b, eb);
  assert_int_equal(ea[0], 7);
  assert_int_equal(eb[32], 9);
  assert_int_equal(memset32(t, s, a, 0, N), CUDA_SUCCESS);
  assert_int_equal(memset32(t, s, b, 0, N), CUDA_SUCCESS);

  assert_int_equal(info(t, s).status, CU_STREAM_CAPTURE_STATUS_NONE);
  captured = hostd_record_count(HOSTD_RECORD_CAPTURED);
  assert_int_equal(begin(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  /* After the begin: it fenced the stream, so the two memsets above (queued
   * like launches) have been taken by the scheduler. */
  hostd__sched_stats(&st0);
  call_capture_info_rep_t ci = info(t, s);
  assert_int_equal(ci.status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(ci.ndeps, 0);
  assert_int_not_equal(ci.id, 0);
  work(t, f, s, a, b);
  ci = info(t, s);
  assert_int_equal(ci.ndeps, 1); /* the last node captured */
  assert_int_equal(hostd_record_count(HOSTD_RECORD_CAPTURED), captured + 5);
  hostd__sched_stats(&st1);
  assert_int_equal(st1.submitted, st0.submitted); /* captured launches bypass the queue */
  /* A copy carrying bytes cannot be captured (the bytes die with the request). */
  uint32_t word = 3;
  call_htod_req_t h = {.dst = a, .stream = s, .async = 1, .bytes = {(uint8_t *)&word, 4}};
  assert_int_equal(hc_call(t, CALL_OP_HTOD, &h), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  uint64_t g = end(t, s, CUDA_SUCCESS);
  assert_int_not_equal(g, 0);
  assert_int_equal(info(t, s).status, CU_STREAM_CAPTURE_STATUS_NONE);
  read_back(t, s, a, ga); /* nothing captured ran */
  assert_memory_equal(ga, zero, sizeof(zero));

  /* PyTorch counts the captured nodes; a page of them can be named after. */
  call_graph_nodes_req_t gq = {.graph = g, .first = 3, .cap = 4};
  call_graph_nodes_rep_t gn;
  hc_call_ok(t, CALL_OP_GRAPH_NODES, &gq, &gn);
  assert_int_equal(gn.total, 5);
  assert_int_equal(gn.n, 2);
  uint64_t last;
  memcpy(&last, gn.nodes.p + 8, 8);
  assert_true(u64map_get(&t->gnodes, last, NULL));

  uint64_t e = instantiate(t, g);
  for (int round = 0; round < 2; round++) {
    hostd__sched_stats(&st0);
    assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
    read_back(t, s, a, ga);
    read_back(t, s, b, gb);
    assert_memory_equal(ga, ea, sizeof(ea));
    assert_memory_equal(gb, eb, sizeof(eb));
    hostd__sched_stats(&st1);
    assert_int_equal(st1.held, st0.held + 1); /* one replay, one unit for the policy */
    assert_int_equal(memset32(t, s, a, 0, N), CUDA_SUCCESS);
    read_back(t, s, a, ga); /* the memset (queued like a launch) ran before the next round */
    assert_memory_equal(ga, zero, sizeof(zero));
  }
  hostd__tenant_free(t);
}

/* A synchronising call on a capturing stream fails and invalidates it. */
static void sync_invalidates_a_capture(void **state) {
  hostd_tenant_t *t = hc_tenant(2, &reply);
  uint64_t s = stream(t), a = alloc(t);
  call_stream_sync_req_t sq = {.stream = s};
  (void)state;
  assert_int_equal(begin(t, s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
  assert_int_equal(begin(t, s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_ERROR_ILLEGAL_STATE);
  assert_int_equal(memset32(t, s, a, 1, N), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_STREAM_SYNC, &sq), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  assert_int_equal(info(t, s).status, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  assert_int_equal(memset32(t, s, a, 1, N), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  end(t, s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  assert_int_equal(info(t, s).status, CU_STREAM_CAPTURE_STATUS_NONE);
  end(t, s, CUDA_ERROR_ILLEGAL_STATE); /* no capture any more */
  /* The legacy stream cannot capture. */
  assert_int_equal(begin(t, 0, CU_STREAM_CAPTURE_MODE_GLOBAL),
                   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  hostd__tenant_free(t);
}

/* Capture modes: tallyd captures in relaxed mode whatever the tenant asked,
 * so calls the worker makes during a capture (here an allocation, with the
 * worker's mode global or relaxed) do not invalidate it. */
static void capture_is_relaxed_on_the_worker(void **state) {
  hostd_tenant_t *t = hc_tenant(3, &reply);
  uint64_t s = stream(t);
  call_mem_alloc_req_t q = {.size = 256};
  call_capture_mode_req_t relaxed = {.mode = CU_STREAM_CAPTURE_MODE_RELAXED};
  call_capture_mode_req_t global = {.mode = CU_STREAM_CAPTURE_MODE_GLOBAL};
  (void)state;
  assert_int_equal(begin(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_MEM_ALLOC, &q), CUDA_SUCCESS);
  assert_int_equal(info(t, s).status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(hc_exec(t, CALL_OP_CAPTURE_MODE, CALL_ASYNC, &relaxed, &reply, NULL), 0);
  assert_int_equal(hc_call(t, CALL_OP_MEM_ALLOC, &q), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_MODE, &global), CUDA_SUCCESS);
  global.mode = 3;
  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_MODE, &global), CUDA_ERROR_INVALID_VALUE);
  uint64_t g = end(t, s, CUDA_SUCCESS);
  assert_int_not_equal(g, 0);
  assert_int_equal(hc_call(t, CALL_OP_MEM_ALLOC, &q), CUDA_SUCCESS);
  hostd__tenant_free(t);
}

/* A second stream joins through an event and is joined back the same way. */
static void cross_stream_capture(void **state) {
  hostd_tenant_t *t = hc_tenant(4, &reply);
  uint64_t s1 = stream(t), s2 = stream(t), e1 = event(t), e2 = event(t), a = alloc(t);
  uint32_t got[N];
  (void)state;
  assert_int_equal(begin(t, s1, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(memset32(t, s1, a, 1, N / 2), CUDA_SUCCESS);
  call_event_record_req_t r1 = {.event = e1, .stream = s1};
  assert_int_equal(hc_call(t, CALL_OP_EVENT_RECORD, &r1), CUDA_SUCCESS);
  assert_int_equal(info(t, s2).status, CU_STREAM_CAPTURE_STATUS_NONE);
  call_stream_wait_req_t w2 = {.stream = s2, .event = e1};
  assert_int_equal(hc_call(t, CALL_OP_STREAM_WAIT, &w2), CUDA_SUCCESS);
  assert_int_equal(info(t, s2).status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(memset32(t, s2, a + N * 2, 2, N / 2), CUDA_SUCCESS);
  call_event_record_req_t r2 = {.event = e2, .stream = s2};
  assert_int_equal(hc_call(t, CALL_OP_EVENT_RECORD, &r2), CUDA_SUCCESS);
  call_stream_wait_req_t w1 = {.stream = s1, .event = e2};
  assert_int_equal(hc_call(t, CALL_OP_STREAM_WAIT, &w1), CUDA_SUCCESS);
  assert_int_equal(info(t, s1).ndeps, 2);
  uint64_t g = end(t, s1, CUDA_SUCCESS);
  assert_int_equal(info(t, s2).status, CU_STREAM_CAPTURE_STATUS_NONE);
  uint64_t e = instantiate(t, g);
  assert_int_equal(launch_graph(t, e, s1), CUDA_SUCCESS);
  read_back(t, s1, a, got);
  assert_int_equal(got[0], 1);
  assert_int_equal(got[N / 2 - 1], 1);
  assert_int_equal(got[N / 2], 2);
  assert_int_equal(got[N - 1], 2);
  hostd__tenant_free(t);
}

static uint64_t add_node(hostd_tenant_t *t, call_graph_add_req_t *q, const uint64_t *deps,
                         uint32_t ndeps, uint32_t want) {
  call_graph_add_rep_t a = {0};
  q->ndeps = ndeps;
  q->deps = (call_view_t){(const uint8_t *)deps, ndeps * 8u};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_ADD, q), want);
  if (want == CUDA_SUCCESS)
    assert_int_equal(hc_reply(&reply, CALL_OP_GRAPH_ADD, &a), 0);
  return a.node;
}

static uint64_t new_graph(hostd_tenant_t *t) {
  call_graph_new_req_t q = {0};
  call_graph_new_rep_t a;
  hc_call_ok(t, CALL_OP_GRAPH_NEW, &q, &a);
  return a.graph;
}

/* In g, a chain: q[0] sets the N words at a to 4, q[1] launches fill_u32
 * (function f) with args (8 words of 8 at a) in k's grid, block and shared
 * memory, q[2] copies a to b; their nodes in n. */
static void memset_fill_copy(hostd_tenant_t *t, uint64_t g, uint64_t f, uint64_t a, uint64_t b,
                             uint8_t args[24], const call_graph_add_req_t *k,
                             call_graph_add_req_t q[3], uint64_t n[3]) {
  fill_args(args, a, 8, 8);
  q[0] = (call_graph_add_req_t){.graph = g, .kind = CALL_GNODE_MEMSET, .dst = a, .value = 4,
                                .elem = 4, .width = N, .height = 1};
  q[1] = (call_graph_add_req_t){.graph = g, .kind = CALL_GNODE_KERNEL, .handle = f,
                                .shmem = k->shmem, .argbytes = 24, .args = {args, 24}};
  memcpy(q[1].grid, k->grid, sizeof(q[1].grid));
  memcpy(q[1].block, k->block, sizeof(q[1].block));
  q[2] = (call_graph_add_req_t){.graph = g, .kind = CALL_GNODE_MEMCPY, .dst = b, .src = a,
                                .width = N * 4};
  n[0] = add_node(t, &q[0], NULL, 0, CUDA_SUCCESS);
  n[1] = add_node(t, &q[1], &n[0], 1, CUDA_SUCCESS);
  n[2] = add_node(t, &q[2], &n[1], 1, CUDA_SUCCESS);
}

/* memset -> kernel -> copy, a child graph, an edge added afterwards; then
 * a kernel node's parameters changed in the exec, and an update refused. */
static void explicit_graph(void **state) {
  hostd_tenant_t *t = hc_tenant(5, &reply);
  uint64_t f = fill_func(t), s = stream(t), a = alloc(t), b = alloc(t), g = new_graph(t);
  uint8_t args[24];
  uint32_t got[N];
  call_graph_add_req_t q[3], shape = {.grid = {1, 1, 1}, .block = {32, 1, 1}};
  uint64_t n[3];
  (void)state;
  memset_fill_copy(t, g, f, a, b, args, &shape, q, n);
  call_graph_add_req_t ms = q[0], cp = q[2];
  uint64_t n2 = n[1], n3 = n[2];
  /* A child graph setting the last word of b, after the copy (an edge added later). */
  uint64_t c = new_graph(t);
  call_graph_add_req_t cms = {.graph = c, .kind = CALL_GNODE_MEMSET, .dst = b + (N - 1) * 4,
                              .value = 6, .elem = 4, .width = 1, .height = 1};
  (void)add_node(t, &cms, NULL, 0, CUDA_SUCCESS);
  call_graph_add_req_t ch = {.graph = g, .kind = CALL_GNODE_CHILD, .handle = c};
  uint64_t n4 = add_node(t, &ch, NULL, 0, CUDA_SUCCESS);
  call_graph_deps_req_t d = {.graph = g, .n = 1, .nto = 1, .from = {(uint8_t *)&n3, 8},
                             .to = {(uint8_t *)&n4, 8}};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_DEPS, &d), CUDA_SUCCESS);
  /* Ownership and shape checks before the driver sees anything. */
  call_graph_add_req_t bad = cp;
  bad.width = N * 4 + 4; /* past the allocation */
  (void)add_node(t, &bad, NULL, 0, CUDA_ERROR_INVALID_VALUE);
  bad = ms;
  bad.elem = 3;
  (void)add_node(t, &bad, NULL, 0, CUDA_ERROR_INVALID_VALUE);
  uint64_t nc = 0x12345670; /* not a node of g */
  (void)add_node(t, &ms, &nc, 1, CUDA_ERROR_INVALID_VALUE);
  call_graph_add_req_t host = {.graph = g, .kind = CALL_GNODE_HOST, .handle = 1};
  (void)add_node(t, &host, NULL, 0, CUDA_ERROR_NOT_SUPPORTED);

  uint64_t e = instantiate(t, g);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, b, got);
  assert_int_equal(got[0], 8);
  assert_int_equal(got[7], 8);
  assert_int_equal(got[8], 4);
  assert_int_equal(got[N - 1], 6);

  fill_args(args, a, 10, 16);
  call_graph_exec_kernel_req_t ek = {.exec = e, .node = n2, .func = f, .grid = {1, 1, 1},
                                     .block = {32, 1, 1}, .argbytes = 24, .args = {args, 24}};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_KERNEL, &ek), CUDA_SUCCESS);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, b, got);
  assert_int_equal(got[15], 10);
  assert_int_equal(got[16], 4);

  /* The child node replays another child graph of the same shape from now on. */
  uint64_t c2 = new_graph(t);
  call_graph_add_req_t cms2 = cms;
  cms2.graph = c2, cms2.value = 11;
  (void)add_node(t, &cms2, NULL, 0, CUDA_SUCCESS);
  call_graph_exec_child_req_t xc = {.exec = e, .node = n4, .graph = c2};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_CHILD, &xc), CUDA_SUCCESS);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, b, got);
  assert_int_equal(got[N - 1], 11);
  call_graph_exec_child_req_t bad_xc = xc;
  bad_xc.graph = 0x12345670; /* not a graph of the tenant */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_CHILD, &bad_xc), CUDA_ERROR_INVALID_VALUE);
  bad_xc = xc;
  bad_xc.node = n2; /* a kernel node, not a child graph node */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_CHILD, &bad_xc), CUDA_ERROR_INVALID_VALUE);

  /* An update from the graph itself takes its parameters back (child included). */
  call_graph_exec_update_req_t same = {.exec = e, .graph = g};
  call_graph_exec_update_rep_t sa;
  hc_call_ok(t, CALL_OP_GRAPH_EXEC_UPDATE, &same, &sa);
  assert_int_equal(sa.status, CUDA_SUCCESS);
  assert_int_equal(sa.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, b, got);
  assert_int_equal(got[7], 8);
  assert_int_equal(got[8], 4);
  assert_int_equal(got[N - 1], 6);
  /* An update from a graph of another shape is refused, with the reason. */
  call_graph_exec_update_req_t up = {.exec = e, .graph = c};
  call_graph_exec_update_rep_t ua;
  hc_call_ok(t, CALL_OP_GRAPH_EXEC_UPDATE, &up, &ua);
  assert_int_equal(ua.status, CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
  assert_int_equal(ua.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
  call_graph_exec_del_req_t ed = {.exec = e};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_DEL, &ed), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_DEL, &ed), CUDA_ERROR_INVALID_VALUE);
  call_graph_del_req_t gd = {.graph = g};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_DEL, &gd), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_DEPS, &d), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(t);
}

/* cuStreamBeginCaptureToGraph: the captured work joins a graph the tenant
 * made, after the nodes it names; the graph stays its own. */
static void capture_into_a_given_graph(void **state) {
  hostd_tenant_t *t = hc_tenant(11, &reply), *o = hc_tenant(12, &reply);
  uint64_t f = fill_func(t), s = stream(t), a = alloc(t), g = new_graph(t), og = new_graph(o);
  uint32_t got[N];
  (void)state;
  call_graph_add_req_t ms = {.graph = g, .kind = CALL_GNODE_MEMSET, .dst = a, .value = 4,
                             .elem = 4, .width = N, .height = 1};
  uint64_t n1 = add_node(t, &ms, NULL, 0, CUDA_SUCCESS), stray = 0x12345670;
  call_capture_begin_req_t q = {.stream = s, .mode = CU_STREAM_CAPTURE_MODE_GLOBAL,
                                .ndeps = 1, .graph = g, .deps = {(uint8_t *)&n1, 8}};
  call_capture_begin_req_t bad = q;
  bad.graph = og; /* another tenant's graph */
  bad.ndeps = 0;
  bad.deps = (call_view_t){NULL, 0};
  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_BEGIN, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = q;
  bad.deps = (call_view_t){(uint8_t *)&stray, 8}; /* not a node of g */
  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_BEGIN, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = q;
  bad.graph = 0; /* dependencies without a graph */
  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_BEGIN, &bad), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(info(t, s).status, CU_STREAM_CAPTURE_STATUS_NONE);

  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_BEGIN, &q), CUDA_SUCCESS);
  call_capture_info_rep_t ci = info(t, s);
  assert_int_equal(ci.status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  assert_int_equal(ci.graph, g);
  assert_int_equal(ci.ndeps, 1);
  assert_int_equal(fill(t, f, s, a, 7, 16), CUDA_SUCCESS);
  assert_int_equal(end(t, s, CUDA_SUCCESS), g);
  call_graph_nodes_req_t gq = {.graph = g, .cap = 4};
  call_graph_nodes_rep_t gn;
  hc_call_ok(t, CALL_OP_GRAPH_NODES, &gq, &gn);
  assert_int_equal(gn.total, 2);
  gq.which = CALL_GNODES_ROOTS;
  hc_call_ok(t, CALL_OP_GRAPH_NODES, &gq, &gn);
  assert_int_equal(gn.total, 1);
  assert_memory_equal(gn.nodes.p, &n1, 8);
  call_graph_nodes_req_t dq = {.which = CALL_GNODES_DEPENDENTS, .node = n1, .cap = 4};
  hc_call_ok(t, CALL_OP_GRAPH_NODES, &dq, &gn);
  assert_int_equal(gn.total, 1); /* the captured fill */
  dq.which = 9;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_NODES, &dq), CUDA_ERROR_INVALID_VALUE);
  dq.which = CALL_GNODES_DEPS;
  dq.node = stray; /* not a node of the tenant */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_NODES, &dq), CUDA_ERROR_INVALID_VALUE);

  uint64_t e = instantiate(t, g);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, a, got); /* the memset node first, then the captured fill after it */
  assert_int_equal(got[0], 7);
  assert_int_equal(got[15], 7);
  assert_int_equal(got[16], 4);
  assert_int_equal(got[N - 1], 4);

  /* Invalidated, the capture leaves the tenant's graph to it. */
  q.ndeps = 0;
  q.deps = (call_view_t){NULL, 0};
  assert_int_equal(hc_call(t, CALL_OP_CAPTURE_BEGIN, &q), CUDA_SUCCESS);
  call_stream_sync_req_t sq = {.stream = s};
  assert_int_equal(hc_call(t, CALL_OP_STREAM_SYNC, &sq), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  (void)end(t, s, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  call_graph_del_req_t gd = {.graph = g};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_DEL, &gd), CUDA_SUCCESS);
  hostd__tenant_free(t);
  hostd__tenant_free(o);
}

/* Tenant b names a's graph, node and exec: each refused; a's still work. */
/* An exec's copy, memset and event nodes take new parameters
 * (GRAPH_EXEC_NODE, as XLA updates a command buffer's), checked as
 * GRAPH_ADD's; a node of another kind and memory or events not the tenant's
 * are refused. */
static void exec_copy_memset_and_event_nodes_take_new_parameters(void **state) {
  hostd_tenant_t *t = hc_tenant(13, &reply);
  uint64_t f = fill_func(t), s = stream(t), a = alloc(t), b = alloc(t), c = alloc(t);
  uint64_t g = new_graph(t), ev1 = event(t), ev2 = event(t);
  uint8_t args[24];
  uint32_t got[N];
  (void)state;
  call_graph_add_req_t ms = {.graph = g, .kind = CALL_GNODE_MEMSET, .dst = a, .value = 4,
                             .elem = 4, .width = N, .height = 1};
  uint64_t n1 = add_node(t, &ms, NULL, 0, CUDA_SUCCESS);
  call_graph_add_req_t cp = {.graph = g, .kind = CALL_GNODE_MEMCPY, .dst = b, .src = a,
                             .width = N * 4};
  uint64_t n2 = add_node(t, &cp, &n1, 1, CUDA_SUCCESS);
  call_graph_add_req_t er = {.graph = g, .kind = CALL_GNODE_EVENT_REC, .handle = ev1};
  uint64_t n3 = add_node(t, &er, &n2, 1, CUDA_SUCCESS);
  fill_args(args, c, 5, N);
  call_graph_add_req_t k = {.graph = g, .kind = CALL_GNODE_KERNEL, .handle = f,
                            .grid = {1, 1, 1}, .block = {32, 1, 1}, .argbytes = 24,
                            .args = {args, 24}};
  uint64_t n4 = add_node(t, &k, &n3, 1, CUDA_SUCCESS);
  uint64_t e = instantiate(t, g);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, b, got);
  assert_int_equal(got[0], 4);
  assert_int_equal(got[N - 1], 4);

  /* The memset now writes 9 over the first half of a. */
  call_graph_exec_node_req_t xm = {.exec = e, .node = n1, .kind = CALL_GNODE_MEMSET, .dst = a,
                                   .value = 9, .elem = 4, .width = N / 2, .height = 1};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &xm), CUDA_SUCCESS);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, b, got);
  assert_int_equal(got[0], 9);
  assert_int_equal(got[N / 2 - 1], 9);
  assert_int_equal(got[N / 2], 4);
  /* The copy now lands in c, after the kernel's 5s of the last replay... */
  call_graph_exec_node_req_t xc = {.exec = e, .node = n2, .kind = CALL_GNODE_MEMCPY, .dst = c,
                                   .src = a, .width = N * 2};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &xc), CUDA_SUCCESS);
  assert_int_equal(memset32(t, s, b, 1, N), CUDA_SUCCESS);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, b, got);
  assert_int_equal(got[0], 1); /* b no longer written */
  read_back(t, s, c, got);
  assert_int_equal(got[0], 5); /* the kernel, after the copy, fills all of c */
  /* ...and the event node records ev2. */
  call_graph_exec_node_req_t xe = {.exec = e, .node = n3, .kind = CALL_GNODE_EVENT_REC,
                                   .handle = ev2};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &xe), CUDA_SUCCESS);
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);

  /* Refused: another kind than the node's, a kind with no such update,
   * memory and events that are not the tenant's, an unknown node. */
  call_graph_exec_node_req_t bad = xm;
  bad.node = n4; /* a kernel node */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = xe;
  bad.node = n1; /* a memset node */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = xm;
  bad.kind = CALL_GNODE_KERNEL;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = xm;
  bad.width = N + 1; /* past the allocation */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = xc;
  bad.src = 0x7000000000ull; /* not the tenant's */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = xe;
  bad.handle = 0xbeef0;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_HANDLE);
  bad = xm;
  bad.node = 0x12345670;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = xm;
  bad.exec = 0x12345670;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &bad), CUDA_ERROR_INVALID_VALUE);
  /* The exec still replays its last good parameters. */
  assert_int_equal(launch_graph(t, e, s), CUDA_SUCCESS);
  read_back(t, s, c, got);
  assert_int_equal(got[N - 1], 5);
  hostd__tenant_free(t);
}

/* A graph's nodes take new parameters (GRAPH_SET): execs instantiated after
 * replay them, one instantiated before keeps its own; refused as GRAPH_EXEC_NODE's. */
static void graph_nodes_take_new_parameters(void **state) {
  hostd_tenant_t *t = hc_tenant(14, &reply);
  uint64_t f = fill_func(t), s = stream(t), a = alloc(t), g = new_graph(t), ev = event(t);
  uint8_t args[24];
  uint32_t got[N];
  (void)state;
  call_graph_add_req_t ms = {.graph = g, .kind = CALL_GNODE_MEMSET, .dst = a, .value = 4,
                             .elem = 4, .width = N, .height = 1};
  uint64_t n1 = add_node(t, &ms, NULL, 0, CUDA_SUCCESS);
  fill_args(args, a, 8, 8);
  call_graph_add_req_t k = {.graph = g, .kind = CALL_GNODE_KERNEL, .handle = f,
                            .grid = {1, 1, 1}, .block = {32, 1, 1}, .argbytes = 24,
                            .args = {args, 24}};
  uint64_t n2 = add_node(t, &k, &n1, 1, CUDA_SUCCESS);
  call_graph_add_req_t er = {.graph = g, .kind = CALL_GNODE_EVENT_REC, .handle = ev};
  uint64_t n3 = add_node(t, &er, &n2, 1, CUDA_SUCCESS);
  uint64_t before = instantiate(t, g);

  call_graph_set_req_t sm = {.node = n1, .kind = CALL_GNODE_MEMSET, .dst = a, .value = 6,
                             .elem = 4, .width = N, .height = 1};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &sm), CUDA_SUCCESS);
  fill_args(args, a, 3, 16);
  call_graph_set_req_t sk = {.node = n2, .kind = CALL_GNODE_KERNEL, .handle = f,
                             .grid = {1, 1, 1}, .block = {32, 1, 1}, .argbytes = 24,
                             .args = {args, 24}};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &sk), CUDA_SUCCESS);
  call_graph_set_req_t se = {.node = n3, .kind = CALL_GNODE_EVENT_REC, .handle = event(t)};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &se), CUDA_SUCCESS);
  uint64_t after = instantiate(t, g);
  assert_int_equal(launch_graph(t, after, s), CUDA_SUCCESS);
  read_back(t, s, a, got);
  assert_int_equal(got[15], 3);
  assert_int_equal(got[16], 6);
  assert_int_equal(launch_graph(t, before, s), CUDA_SUCCESS);
  read_back(t, s, a, got);
  assert_int_equal(got[7], 8);
  assert_int_equal(got[8], 4);

  call_graph_set_req_t bad = sm;
  bad.node = n2; /* a kernel node */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = sm;
  bad.kind = CALL_GNODE_CHILD, bad.handle = g; /* no graph-level child update */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = sm;
  bad.width = N + 1; /* past the allocation */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = sm;
  bad.node = 0x12345670;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &bad), CUDA_ERROR_INVALID_VALUE);
  bad = sk;
  bad.handle = 0xf00d0; /* not a function of the tenant */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &bad), CUDA_ERROR_INVALID_HANDLE);
  bad = se;
  bad.handle = 0xbeef0;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &bad), CUDA_ERROR_INVALID_HANDLE);
  hostd__tenant_free(t);
}

/* The device's graph memory: trimmed, read, the high watermarks reset;
 * what the driver refuses is refused. */
static void graph_memory_of_the_device(void **state) {
  hostd_tenant_t *t = hc_tenant(15, &reply);
  call_graph_mem_rep_t a = {.value = 99};
  (void)state;
  call_graph_mem_req_t trim = {.what = 0};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_MEM, &trim), CUDA_SUCCESS);
  call_graph_mem_req_t get = {.what = 1, .attr = CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT};
  hc_call_ok(t, CALL_OP_GRAPH_MEM, &get, &a);
  assert_int_equal(a.value, 0); /* the recording device has no allocation nodes */
  call_graph_mem_req_t set = {.what = 2, .attr = CU_GRAPH_MEM_ATTR_USED_MEM_HIGH};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_MEM, &set), CUDA_SUCCESS);
  set.value = 5;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_MEM, &set), CUDA_ERROR_INVALID_VALUE);
  set.value = 0, set.attr = CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_MEM, &set), CUDA_ERROR_INVALID_VALUE);
  get.attr = 77;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_MEM, &get), CUDA_ERROR_INVALID_VALUE);
  get.what = 3;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_MEM, &get), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(t);
}

/* A clone: a graph of the tenant's with nodes of its own, found through the
 * original's; changing one leaves the original as it was. */
static void a_clone_is_a_graph_of_its_own(void **state) {
  hostd_tenant_t *t = hc_tenant(16, &reply);
  uint64_t s = stream(t), a = alloc(t), g = new_graph(t);
  uint32_t got[N];
  (void)state;
  call_graph_add_req_t ms = {.graph = g, .kind = CALL_GNODE_MEMSET, .dst = a, .value = 4,
                             .elem = 4, .width = N, .height = 1};
  uint64_t n1 = add_node(t, &ms, NULL, 0, CUDA_SUCCESS);
  call_graph_clone_req_t cq = {.graph = g};
  call_graph_clone_rep_t ca;
  hc_call_ok(t, CALL_OP_GRAPH_CLONE, &cq, &ca);
  assert_true(ca.graph != 0 && ca.graph != g);
  call_graph_find_req_t fq = {.node = n1, .clone = ca.graph};
  call_graph_find_rep_t fa;
  hc_call_ok(t, CALL_OP_GRAPH_FIND, &fq, &fa);
  assert_true(fa.node != 0 && fa.node != n1);
  call_graph_set_req_t sm = {.node = fa.node, .kind = CALL_GNODE_MEMSET, .dst = a, .value = 6,
                             .elem = 4, .width = N, .height = 1};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_SET, &sm), CUDA_SUCCESS);
  assert_int_equal(launch_graph(t, instantiate(t, ca.graph), s), CUDA_SUCCESS);
  read_back(t, s, a, got);
  assert_int_equal(got[0], 6);
  assert_int_equal(launch_graph(t, instantiate(t, g), s), CUDA_SUCCESS);
  read_back(t, s, a, got);
  assert_int_equal(got[0], 4);
  fq.node = 0x12345670; /* not a node of the tenant */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_FIND, &fq), CUDA_ERROR_INVALID_VALUE);
  fq.node = n1, fq.clone = 0x12345670;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_FIND, &fq), CUDA_ERROR_INVALID_VALUE);
  cq.graph = 0x12345670;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_CLONE, &cq), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(t);
}

/* GRAPH_NODE: what a node of the tenant's is, from the driver: a kernel
 * node's function, shape and packed arguments, a memset's fields, a 1-D
 * copy's; another tenant's node, or one never told of, refused. */
static void a_node_describes_itself(void **state) {
  hostd_tenant_t *t = hc_tenant(17, &reply), *o = hc_tenant(18, &reply);
  uint64_t f = fill_func(t), a = alloc(t), b = alloc(t), g = new_graph(t), n[3];
  uint8_t args[24];
  call_graph_add_req_t made[3], shape = {.grid = {3, 1, 1}, .block = {32, 2, 1}, .shmem = 64};
  (void)state;
  memset_fill_copy(t, g, f, a, b, args, &shape, made, n);
  uint64_t n1 = n[0], n2 = n[1], n3 = n[2];
  call_graph_node_req_t q = {.node = n2};
  call_graph_node_rep_t r;
  hc_call_ok(t, CALL_OP_GRAPH_NODE, &q, &r);
  assert_int_equal(r.type, CU_GRAPH_NODE_TYPE_KERNEL);
  assert_int_equal(r.kind, CALL_GNODE_KERNEL);
  assert_int_equal(r.handle, f);
  assert_int_equal(r.fkind, 0);
  assert_int_equal(r.grid[0], 3);
  assert_int_equal(r.block[1], 2);
  assert_int_equal(r.shmem, 64);
  assert_int_equal(r.args.len, 24);
  assert_memory_equal(r.args.p, args, 24);
  q.node = n1;
  hc_call_ok(t, CALL_OP_GRAPH_NODE, &q, &r);
  assert_int_equal(r.type, CU_GRAPH_NODE_TYPE_MEMSET);
  assert_int_equal(r.kind, CALL_GNODE_MEMSET);
  assert_int_equal(r.dst, a);
  assert_int_equal(r.value, 4);
  assert_int_equal(r.elem, 4);
  assert_int_equal(r.width, N);
  assert_int_equal(r.height, 1);
  assert_int_equal(r.args.len, 0);
  q.node = n3;
  hc_call_ok(t, CALL_OP_GRAPH_NODE, &q, &r);
  assert_int_equal(r.type, CU_GRAPH_NODE_TYPE_MEMCPY);
  assert_int_equal(r.kind, CALL_GNODE_MEMCPY);
  assert_int_equal(r.dst, b);
  assert_int_equal(r.src, a);
  assert_int_equal(r.width, N * 4);
  assert_int_equal(r.elem, 0); /* device memory both sides */
  assert_int_equal(hc_call(o, CALL_OP_GRAPH_NODE, &q), CUDA_ERROR_INVALID_VALUE);
  q.node = 0x12345670;
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_NODE, &q), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(o);
  hostd__tenant_free(t);
}

static void another_tenants_handles_are_refused(void **state) {
  hostd_tenant_t *a = hc_tenant(6, &reply), *b = hc_tenant(7, &reply);
  uint64_t ga = new_graph(a), gb = new_graph(b), sb = stream(b);
  (void)state;
  call_graph_add_req_t em = {.graph = ga, .kind = CALL_GNODE_EMPTY};
  uint64_t na = add_node(a, &em, NULL, 0, CUDA_SUCCESS);
  uint64_t ea = instantiate(a, ga);
  (void)add_node(b, &em, NULL, 0, CUDA_ERROR_INVALID_VALUE); /* a's graph */
  em.graph = gb;
  (void)add_node(b, &em, &na, 1, CUDA_ERROR_INVALID_VALUE); /* a's node */
  call_graph_add_req_t ch = {.graph = gb, .kind = CALL_GNODE_CHILD, .handle = ga};
  (void)add_node(b, &ch, NULL, 0, CUDA_ERROR_INVALID_VALUE);
  call_graph_instantiate_req_t gi = {.graph = ga};
  assert_int_equal(hc_call(b, CALL_OP_GRAPH_INSTANTIATE, &gi), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(launch_graph(b, ea, sb), CUDA_ERROR_INVALID_VALUE);
  call_graph_exec_del_req_t ed = {.exec = ea};
  assert_int_equal(hc_call(b, CALL_OP_GRAPH_EXEC_DEL, &ed), CUDA_ERROR_INVALID_VALUE);
  call_graph_exec_update_req_t up = {.exec = ea, .graph = gb};
  assert_int_equal(hc_call(b, CALL_OP_GRAPH_EXEC_UPDATE, &up), CUDA_ERROR_INVALID_VALUE);
  call_graph_del_req_t gd = {.graph = ga};
  assert_int_equal(hc_call(b, CALL_OP_GRAPH_DEL, &gd), CUDA_ERROR_INVALID_VALUE);
  /* a's stream is not b's either. */
  uint64_t sa = stream(a);
  assert_int_equal(begin(b, sa, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(launch_graph(a, ea, sa), CUDA_SUCCESS);
  assert_int_equal(hc_call(a, CALL_OP_GRAPH_DEL, &gd), CUDA_SUCCESS);
  hostd__tenant_free(a);
  hostd__tenant_free(b);
}

/* The host function exec e holds at node (the graph's node handle), or 0. */
static uint64_t exec_host_seq(const hostd_tenant_t *t, uint64_t e, uint64_t node) {
  for (size_t i = 0; i < t->nghosts; i++)
    if (t->ghosts[i].owner == e && (t->ghosts[i].wnode == node || t->ghosts[i].rnode == node))
      return t->ghosts[i].seq;
  return 0;
}

/* A graph's host node answers GRAPH_NODE with its own function after its
 * exec's copy, which keeps the node's handle, took another; the exec's copy
 * moved ahead of the graph's in the tenant's table when another graph with
 * a host node went. */
static void a_host_node_answers_its_graphs_function(void **state) {
  hostd_tenant_t *t = hc_tenant(19, &reply);
  hostd_hostfn_t *hf = hostd__hostfn_new(NULL);
  const uint64_t fx = 3, fg = 1, fe = 2; /* the guest's numbers for three functions */
  (void)state;
  assert_non_null(hf);
  hostd__tenant_set_hostfn(t, hf);
  uint64_t x = new_graph(t), g = new_graph(t);
  call_graph_add_req_t hx = {.graph = x, .kind = CALL_GNODE_HOST, .handle = fx};
  (void)add_node(t, &hx, NULL, 0, CUDA_SUCCESS);
  call_graph_add_req_t hg = {.graph = g, .kind = CALL_GNODE_HOST, .handle = fg};
  uint64_t n = add_node(t, &hg, NULL, 0, CUDA_SUCCESS);
  uint64_t e = instantiate(t, g);
  call_graph_del_req_t dx = {.graph = x};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_DEL, &dx), CUDA_SUCCESS);
  call_graph_exec_node_req_t xh = {.exec = e, .node = n, .kind = CALL_GNODE_HOST, .handle = fe};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_EXEC_NODE, &xh), CUDA_SUCCESS);
  call_graph_node_req_t q = {.node = n};
  call_graph_node_rep_t r;
  hc_call_ok(t, CALL_OP_GRAPH_NODE, &q, &r);
  assert_int_equal(r.type, CU_GRAPH_NODE_TYPE_HOST);
  assert_int_equal(r.kind, CALL_GNODE_HOST);
  assert_int_equal(r.handle, fg);
  assert_int_equal(exec_host_seq(t, e, n), fe);
  hostd__tenant_free(t);
  hostd__hostfn_unref(hf);
}

/* One GRAPH_NODES list: which of g or of node, whole; its count in *n. */
static void list_nodes(hostd_tenant_t *t, uint32_t which, uint64_t g, uint64_t node,
                       uint64_t *nodes, size_t *n) {
  call_graph_nodes_req_t q = {.graph = g, .which = which, .node = node, .cap = 8};
  call_graph_nodes_rep_t r;
  hc_call_ok(t, CALL_OP_GRAPH_NODES, &q, &r);
  assert_int_equal(r.n, r.total);
  memcpy(nodes, r.nodes.p, r.n * 8u);
  *n = r.n;
}

/* A host node is one node to the tenant, though tallyd's graph holds two
 * (the driver's host node and its wait): the lists of nodes, of roots, of
 * a node's dependencies and dependents name the wait alone, an edge
 * added into it reaches the host node (and is removed from there), and
 * destroying it takes both. */
static void a_host_node_is_one_node_in_lists(void **state) {
  hostd_tenant_t *t = hc_tenant(20, &reply);
  hostd_hostfn_t *hf = hostd__hostfn_new(NULL);
  uint64_t v[8];
  size_t n;
  (void)state;
  assert_non_null(hf);
  hostd__tenant_set_hostfn(t, hf);
  uint64_t g = new_graph(t);
  call_graph_add_req_t em = {.graph = g, .kind = CALL_GNODE_EMPTY};
  uint64_t e0 = add_node(t, &em, NULL, 0, CUDA_SUCCESS);
  call_graph_add_req_t hq = {.graph = g, .kind = CALL_GNODE_HOST, .handle = 1};
  uint64_t h = add_node(t, &hq, &e0, 1, CUDA_SUCCESS);
  uint64_t e1 = add_node(t, &em, &h, 1, CUDA_SUCCESS);
  uint64_t h2 = add_node(t, &hq, NULL, 0, CUDA_SUCCESS); /* a root */
  list_nodes(t, CALL_GNODES_ALL, g, 0, v, &n);
  assert_int_equal(n, 4);
  for (size_t i = 0; i < n; i++)
    assert_true(v[i] == e0 || v[i] == h || v[i] == e1 || v[i] == h2);
  list_nodes(t, CALL_GNODES_ROOTS, g, 0, v, &n);
  assert_int_equal(n, 2);
  assert_true((v[0] == e0 && v[1] == h2) || (v[0] == h2 && v[1] == e0));
  list_nodes(t, CALL_GNODES_DEPS, 0, h, v, &n);
  assert_int_equal(n, 1);
  assert_int_equal(v[0], e0);
  list_nodes(t, CALL_GNODES_DEPENDENTS, 0, e0, v, &n);
  assert_int_equal(n, 1);
  assert_int_equal(v[0], h);
  list_nodes(t, CALL_GNODES_DEPS, 0, e1, v, &n);
  assert_int_equal(n, 1);
  assert_int_equal(v[0], h);
  /* An edge added into a host function ends at its host node: the function
   * runs after the edge's source, and the lists show the edge as made. */
  call_graph_deps_req_t d = {.graph = g, .n = 1, .nto = 1, .from = {(uint8_t *)&e1, 8},
                             .to = {(uint8_t *)&h2, 8}};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_DEPS, &d), CUDA_SUCCESS);
  uint64_t rn = 0;
  for (size_t i = 0; i < t->nghosts; i++)
    if (t->ghosts[i].wnode == h2)
      rn = t->ghosts[i].rnode;
  assert_true(rn != 0 && rn != h2);
  assert_int_equal(hostd__gpu.graph_nodes(g, CALL_GNODES_DEPS, rn, v, 8, &n), CUDA_SUCCESS);
  assert_int_equal(n, 1);
  assert_int_equal(v[0], e1); /* the driver's edge reaches the host node itself */
  list_nodes(t, CALL_GNODES_DEPS, 0, h2, v, &n);
  assert_int_equal(n, 1);
  assert_int_equal(v[0], e1);
  list_nodes(t, CALL_GNODES_ROOTS, g, 0, v, &n);
  assert_int_equal(n, 1);
  assert_int_equal(v[0], e0);
  list_nodes(t, CALL_GNODES_DEPENDENTS, 0, e1, v, &n);
  assert_int_equal(n, 1);
  assert_int_equal(v[0], h2);
  call_graph_nodes_req_t pg = {.graph = g, .first = 3, .cap = 2}; /* the last page */
  call_graph_nodes_rep_t r;
  hc_call_ok(t, CALL_OP_GRAPH_NODES, &pg, &r);
  assert_int_equal(r.total, 4);
  assert_int_equal(r.n, 1);
  /* The edge removed (from the host node itself), then refused as gone. */
  call_graph_undep_req_t u = {.graph = g, .n = 1, .nto = 1, .from = {(uint8_t *)&e1, 8},
                              .to = {(uint8_t *)&h2, 8}};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_UNDEP, &u), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.graph_nodes(g, CALL_GNODES_DEPS, rn, v, 8, &n), CUDA_SUCCESS);
  assert_int_equal(n, 0);
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_UNDEP, &u), CUDA_ERROR_INVALID_VALUE);
  /* Destroying the host node takes both of its nodes and its edges. */
  size_t ghosts = t->nghosts;
  call_graph_node_del_req_t del = {.node = h};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_NODE_DEL, &del), CUDA_SUCCESS);
  assert_int_equal(t->nghosts, ghosts - 1);
  assert_int_equal(hostd__gpu.graph_nodes(g, CALL_GNODES_ALL, 0, NULL, 0, &n), CUDA_SUCCESS);
  assert_int_equal(n, 4); /* e0, e1, and h2's two */
  list_nodes(t, CALL_GNODES_ALL, g, 0, v, &n);
  assert_int_equal(n, 3);
  list_nodes(t, CALL_GNODES_DEPS, 0, e1, v, &n);
  assert_int_equal(n, 0);
  call_graph_node_req_t gone = {.node = h};
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_NODE, &gone), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_NODE_DEL, &del), CUDA_ERROR_INVALID_VALUE);
  del.node = e0; /* a plain node */
  assert_int_equal(hc_call(t, CALL_OP_GRAPH_NODE_DEL, &del), CUDA_SUCCESS);
  list_nodes(t, CALL_GNODES_ALL, g, 0, v, &n);
  assert_int_equal(n, 2);
  /* Another tenant's node is not this one's to destroy. */
  hostd_tenant_t *o = hc_tenant(21, &reply);
  del.node = e1;
  assert_int_equal(hc_call(o, CALL_OP_GRAPH_NODE_DEL, &del), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(o);
  hostd__tenant_free(t);
  hostd__hostfn_unref(hf);
}

/* Closing a tenant destroys its graphs and execs and ends its captures. */
static void closing_a_tenant_frees_graphs(void **state) {
  hostd_tenant_t *t = hc_tenant(8, &reply);
  uint64_t g = new_graph(t), s = stream(t), a = alloc(t);
  (void)state;
  call_graph_add_req_t em = {.graph = g, .kind = CALL_GNODE_EMPTY};
  (void)add_node(t, &em, NULL, 0, CUDA_SUCCESS);
  uint64_t e = instantiate(t, g);
  assert_int_equal(begin(t, s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_SUCCESS);
  assert_int_equal(memset32(t, s, a, 1, N), CUDA_SUCCESS);
  hostd__tenant_free(t);
  assert_int_equal(hostd__gpu.graph_exec_del(e), CUDA_ERROR_INVALID_VALUE); /* gone */
  assert_int_equal(hostd__gpu.graph_del(g), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* A truncated request or one with bytes after its last field closes the tenant. */
static void malformed_requests_are_protocol_errors(void **state) {
  hostd_tenant_t *t = hc_tenant(9, &reply);
  static const uint32_t ops[] = {CALL_OP_CAPTURE_BEGIN,   CALL_OP_CAPTURE_INFO,
                                 CALL_OP_GRAPH_ADD,       CALL_OP_GRAPH_DEPS,
                                 CALL_OP_GRAPH_LAUNCH,    CALL_OP_GRAPH_EXEC_KERNEL,
                                 CALL_OP_GRAPH_INSTANTIATE, CALL_OP_GRAPH_NODE,
                                 CALL_OP_GRAPH_ENABLE,      CALL_OP_GRAPH_ATTR,
                                 CALL_OP_CAPTURE_DEPS};
  uint8_t bytes[256];
  const char *why = NULL;
  (void)state;
  hc_assert_malformed(t, ops, sizeof(ops) / sizeof(ops[0]));
  /* More dependencies than a request may carry. */
  call_graph_add_req_t q = {.kind = CALL_GNODE_EMPTY};
  size_t fixed = call_msg_fixed(call_req_msg(CALL_OP_GRAPH_ADD));
  memset(bytes, 0, sizeof(bytes));
  q.ndeps = CALL_GRAPH_DEPS_MAX + 1;
  assert_true(call_graph_add_req_encode(&q, bytes, (call_view_t[2]){{0}}) < 0 ||
              hostd__tenant_exec(t, CALL_OP_GRAPH_ADD, 0, bytes, fixed, &reply, &why) == -EPROTO);
  /* A replay must not be answered as a post-only call's opposite: posted
   * answered-only ops are refused. */
  call_graph_new_req_t gn = {0};
  assert_int_equal(hc_exec(t, CALL_OP_GRAPH_NEW, CALL_ASYNC, &gn, &reply, &why), -EPROTO);
  hostd__tenant_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(capture_then_replay_matches_eager),
      cmocka_unit_test(sync_invalidates_a_capture),
      cmocka_unit_test(capture_is_relaxed_on_the_worker),
      cmocka_unit_test(cross_stream_capture),
      cmocka_unit_test(explicit_graph),
      cmocka_unit_test(exec_copy_memset_and_event_nodes_take_new_parameters),
      cmocka_unit_test(graph_nodes_take_new_parameters),
      cmocka_unit_test(graph_memory_of_the_device),
      cmocka_unit_test(a_clone_is_a_graph_of_its_own),
      cmocka_unit_test(a_node_describes_itself),
      cmocka_unit_test(a_host_node_answers_its_graphs_function),
      cmocka_unit_test(a_host_node_is_one_node_in_lists),
      cmocka_unit_test(capture_into_a_given_graph),
      cmocka_unit_test(another_tenants_handles_are_refused),
      cmocka_unit_test(closing_a_tenant_frees_graphs),
      cmocka_unit_test(malformed_requests_are_protocol_errors),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
