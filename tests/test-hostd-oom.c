/* test-hostd-oom.c: every allocation of a tenant's life fails once, cleanly.
 *
 * malloc, calloc, realloc and free are wrapped at link time
 * (tests/oom-harness.h); allocation number N fails, N = 0, 1, 2, ... until
 * the whole scenario runs through.  The scenario creates a tenant and
 * executes a request of most ops on the recording device (memory, streams,
 * events, a module with its functions, globals, launches, copies,
 * synchronisations), then frees the tenant.  Each failure must come back as
 * a clean error: NULL from hostd__tenant_new, -ENOMEM from
 * hostd__tenant_exec (the reply could not be built), or
 * CUDA_ERROR_OUT_OF_MEMORY in the reply (now, or kept from a post until the
 * next syncpoint); nothing may leak, in host memory or device memory.
 *
 * A second scenario does the same over the newer ops on one tenant: CUDA
 * arrays (2-D ones, copies host -> array -> device and back to the host),
 * texture objects over the array and over linear memory, a surface object,
 * VMM (reserve, create, map, set access, unmap, release, free), a pool of
 * its own and the default pool with stream-ordered allocations and frees,
 * a stream capture of a memset instantiated and launched, and an explicit
 * graph with one node; the tenant goes with an array, a texture, a
 * mapping, pools, graphs, execs and an open capture still alive.  There,
 * besides, every failure must give back the device-memory quota it charged.
 */
#include <cuda.h>
#include <string.h>

#include "hostd/gpu.h"
#include "hostd/guard.h"
#include "hostd/hostd-int.h"
#include "tests/hostd-call-harness.h"
#include "tests/oom-harness.h"

static const char image[] = "TALLYREC\nkernel k 8,4\nglobal g 64\n";
static uint64_t image_id;
static wire_buf_t req; /* encoded outside the countdown: the test's own bytes */

/* Executes q of op; 0 on success, -ENOMEM on a clean out-of-memory. */
static int run(hostd_tenant_t *t, uint32_t op, uint32_t flags, const void *q, wire_buf_t *reply) {
  const char *why = NULL;
  long at = oom_fail_at;
  int rc;
  wire_buf_reset(&req);
  oom_fail_at = -1; /* the encoding is not hostd's */
  assert_int_equal(call_put(call_req_msg(op), q, &req), 0);
  oom_fail_at = at;
  rc = hostd__tenant_exec(t, op, flags, req.data, req.len, reply, &why);
  if (rc == -ENOMEM)
    return rc;
  assert_int_equal(rc, 0);
  if (flags & CALL_ASYNC)
    return 0;
  if (hc_result(reply) == CUDA_ERROR_OUT_OF_MEMORY)
    return -ENOMEM;
  assert_int_equal(hc_result(reply), CUDA_SUCCESS);
  return 0;
}

#define RUN(op, flags, q)                                                                          \
  do {                                                                                             \
    if ((rc = run(t, op, flags, q, &reply)) != 0)                                                  \
      goto out;                                                                                    \
  } while (0)

static int scenario(void) {
  wire_buf_t reply = {0};
  uint64_t live = hostd_record_live_bytes();
  hostd_tenant_t *t = hostd__tenant_new(3, false);
  call_hello_req_t hello = {.version = CALL_PROTO_VERSION};
  call_mem_alloc_req_t ma = {.size = 4096};
  call_mem_alloc_rep_t mr;
  call_stream_new_req_t sn = {0};
  call_stream_new_rep_t sr;
  call_event_new_req_t en = {0};
  call_event_new_rep_t er;
  call_module_load_req_t ml = {.id = image_id};
  call_module_load_rep_t lr;
  call_func_t fr;
  call_module_global_req_t mg = {.name = {(const uint8_t *)"g", 1}};
  call_ctx_sync_req_t cs;
  uint8_t bytes[256] = {1, 2, 3}, args[16] = {0};
  int rc = 0;

  if (!t)
    return -ENOMEM;
  RUN(CALL_OP_HELLO, 0, &hello);
  RUN(CALL_OP_MEM_ALLOC, 0, &ma);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &mr), 0);
  RUN(CALL_OP_STREAM_NEW, 0, &sn);
  assert_int_equal(hc_reply(&reply, CALL_OP_STREAM_NEW, &sr), 0);
  RUN(CALL_OP_EVENT_NEW, 0, &en);
  assert_int_equal(hc_reply(&reply, CALL_OP_EVENT_NEW, &er), 0);
  RUN(CALL_OP_MODULE_LOAD, 0, &ml);
  assert_int_equal(hc_reply(&reply, CALL_OP_MODULE_LOAD, &lr), 0);
  assert_int_equal(lr.nfunc, 1);
  assert_int_equal(call_func_decode(lr.funcs.p, lr.funcs.len, &fr, NULL, NULL), 0);
  mg.module = lr.module;
  RUN(CALL_OP_MODULE_GLOBAL, 0, &mg);
  {
    call_htod_req_t h = {.dst = mr.ptr, .stream = sr.stream, .async = 1, .bytes = {bytes, 256}};
    call_launch_req_t l = {.func = fr.handle,
                           .grid = {1, 1, 1},
                           .block = {1, 1, 1},
                           .stream = 0, /* the legacy stream, made on first use */
                           .argbytes = 16,
                           .args = {args, 16}};
    call_event_record_req_t ev = {.event = er.event, .stream = sr.stream};
    call_stream_wait_req_t sw = {.stream = 0, .event = er.event};
    call_dtoh_req_t d = {.src = mr.ptr, .len = 256, .stream = sr.stream};
    call_memset_req_t ms = {.dst = mr.ptr, .value = 7, .elem = 4, .count = 16, .stream = 0};
    RUN(CALL_OP_HTOD, CALL_ASYNC, &h);
    RUN(CALL_OP_EVENT_RECORD, CALL_ASYNC, &ev);
    RUN(CALL_OP_STREAM_WAIT, CALL_ASYNC, &sw);
    RUN(CALL_OP_LAUNCH, CALL_ASYNC, &l);
    RUN(CALL_OP_MEMSET, CALL_ASYNC, &ms);
    RUN(CALL_OP_DTOH, CALL_SYNCPOINT, &d); /* reports a post's out-of-memory, if any */
  }
  RUN(CALL_OP_CTX_SYNC, CALL_SYNCPOINT, &cs);
out:
  hostd__tenant_free(t);
  wire_buf_close(&reply);
  assert_int_equal(hostd_record_live_bytes(), live); /* no device memory left behind */
  return rc;
}

static void every_allocation_of_a_tenant_fails_cleanly(void **state) {
  (void)state;
  oom_every_failure(scenario, 10);
}

/* ---- the newer ops: arrays, textures, surfaces, VMM, pools, graphs ---- */

#define MB2 (2ull << 20) /* the recording device's VMM granularity */

/* As RUN, in a part of the second scenario: the tenant owns everything made
 * so far, so a part returns at once. */
#define PART_RUN(op, flags, q)                                                                     \
  do {                                                                                             \
    if ((rc = run(t, op, flags, q, rp)) != 0)                                                      \
      return rc;                                                                                   \
  } while (0)
#define PART_REPLY(op, rep) assert_int_equal(hc_reply(rp, op, rep), 0)

/* Two 2-D arrays, host -> array -> device and array -> host, textures over
 * the array and over linear memory, a surface; one array and its texture
 * live on. */
static int arrays_part(hostd_tenant_t *t, wire_buf_t *rp, uint64_t dev, uint64_t s) {
  call_array_new_req_t an = {.width = 16,
                             .height = 4,
                             .format = CU_AD_FORMAT_FLOAT,
                             .channels = 1,
                             .flags = CUDA_ARRAY3D_SURFACE_LDST};
  call_array_new_rep_t a, a2;
  call_tex_new_rep_t tr;
  call_surf_new_rep_t sr;
  uint8_t bytes[64 * 4];
  int rc;
  for (size_t i = 0; i < sizeof(bytes); i++)
    bytes[i] = (uint8_t)i;
  PART_RUN(CALL_OP_ARRAY_NEW, 0, &an); /* 16 floats x 4 rows: 64-byte rows */
  PART_REPLY(CALL_OP_ARRAY_NEW, &a);
  PART_RUN(CALL_OP_ARRAY_NEW, 0, &an);
  PART_REPLY(CALL_OP_ARRAY_NEW, &a2);
  call_array_copy_req_t in = {.skind = CALL_SIDE_HOST,
                              .dkind = CALL_SIDE_ARRAY,
                              .dst = a.array,
                              .width = 64,
                              .height = 4,
                              .depth = 1,
                              .stream = s,
                              .bytes = {bytes, sizeof(bytes)}};
  call_array_copy_req_t out = {.skind = CALL_SIDE_ARRAY,
                               .dkind = CALL_SIDE_DEVICE,
                               .src = a.array,
                               .dst = dev,
                               .dpitch = 64,
                               .dheight = 4,
                               .width = 64,
                               .height = 4,
                               .depth = 1,
                               .stream = s};
  call_array_copy_req_t back = {.skind = CALL_SIDE_ARRAY,
                                .dkind = CALL_SIDE_HOST,
                                .src = a.array,
                                .width = 64,
                                .height = 4,
                                .depth = 1,
                                .stream = s};
  call_array_copy_rep_t got;
  PART_RUN(CALL_OP_ARRAY_COPY, 0, &in);
  PART_RUN(CALL_OP_ARRAY_COPY, 0, &out);
  PART_RUN(CALL_OP_ARRAY_COPY, 0, &back); /* the reply grows to hold the bytes */
  PART_REPLY(CALL_OP_ARRAY_COPY, &got);
  assert_int_equal(got.bytes.len, sizeof(bytes));
  assert_memory_equal(got.bytes.p, bytes, sizeof(bytes));
  call_tex_new_req_t ta = {.rtype = CU_RESOURCE_TYPE_ARRAY, .res = a.array, .filter = 1};
  call_tex_new_req_t tl = {.rtype = CU_RESOURCE_TYPE_LINEAR,
                           .res = dev,
                           .format = CU_AD_FORMAT_FLOAT,
                           .channels = 1,
                           .width = sizeof(bytes)};
  PART_RUN(CALL_OP_TEX_NEW, 0, &ta); /* lives on */
  PART_RUN(CALL_OP_TEX_NEW, 0, &tl);
  PART_REPLY(CALL_OP_TEX_NEW, &tr);
  call_tex_del_req_t td = {.tex = tr.tex};
  PART_RUN(CALL_OP_TEX_DEL, 0, &td);
  call_surf_new_req_t sn = {.array = a.array};
  PART_RUN(CALL_OP_SURF_NEW, 0, &sn);
  PART_REPLY(CALL_OP_SURF_NEW, &sr);
  call_surf_del_req_t sd = {.surf = sr.surf};
  PART_RUN(CALL_OP_SURF_DEL, 0, &sd);
  call_array_del_req_t ad = {.array = a2.array};
  PART_RUN(CALL_OP_ARRAY_DEL, 0, &ad);
  return 0;
}

/* One reservation through its whole life (reserve, create, map, set
 * access, unmap, release, free); a second one left mapped, its handle
 * released (the mapping holds the memory). */
static int vmm_part(hostd_tenant_t *t, wire_buf_t *rp) {
  call_mem_reserve_req_t rq = {.size = MB2};
  call_mem_create_req_t cq = {.size = MB2};
  call_mem_reserve_rep_t va;
  call_mem_create_rep_t ph;
  int rc;
  for (int keep = 0; keep < 2; keep++) {
    PART_RUN(CALL_OP_MEM_RESERVE, 0, &rq);
    PART_REPLY(CALL_OP_MEM_RESERVE, &va);
    PART_RUN(CALL_OP_MEM_CREATE, 0, &cq);
    PART_REPLY(CALL_OP_MEM_CREATE, &ph);
    call_mem_map_req_t mq = {.ptr = va.ptr, .size = MB2, .handle = ph.handle};
    call_mem_set_access_req_t sa = {
        .ptr = va.ptr, .size = MB2, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    call_mem_unmap_req_t uq = {.ptr = va.ptr, .size = MB2};
    call_mem_release_req_t lq = {.handle = ph.handle};
    call_mem_unreserve_req_t fq = {.ptr = va.ptr, .size = MB2};
    PART_RUN(CALL_OP_MEM_MAP, 0, &mq);
    PART_RUN(CALL_OP_MEM_SET_ACCESS, 0, &sa);
    if (!keep)
      PART_RUN(CALL_OP_MEM_UNMAP, CALL_SYNCPOINT, &uq);
    PART_RUN(CALL_OP_MEM_RELEASE, 0, &lq);
    if (!keep)
      PART_RUN(CALL_OP_MEM_UNRESERVE, 0, &fq);
  }
  return 0;
}

/* A pool of its own (an allocation from it, freed in stream order, then
 * the pool destroyed) and the tenant's default pool, whose allocation
 * lives on. */
static int pool_part(hostd_tenant_t *t, wire_buf_t *rp, uint64_t s) {
  call_pool_new_req_t pn = {0};
  call_pool_new_rep_t pool;
  call_mem_alloc_async_rep_t p;
  int rc;
  PART_RUN(CALL_OP_POOL_NEW, 0, &pn);
  PART_REPLY(CALL_OP_POOL_NEW, &pool);
  call_mem_alloc_async_req_t aq = {.size = 4096, .pool = pool.pool, .stream = s};
  PART_RUN(CALL_OP_MEM_ALLOC_ASYNC, 0, &aq);
  PART_REPLY(CALL_OP_MEM_ALLOC_ASYNC, &p);
  call_mem_free_async_req_t fq = {.ptr = p.ptr, .stream = s};
  PART_RUN(CALL_OP_MEM_FREE_ASYNC, CALL_ASYNC, &fq);
  call_pool_del_req_t pd = {.pool = pool.pool};
  PART_RUN(CALL_OP_POOL_DEL, 0, &pd);
  aq.pool = 0; /* the tenant's default pool, made now */
  PART_RUN(CALL_OP_MEM_ALLOC_ASYNC, 0, &aq);
  return 0;
}

/* A capture of a memset on stream s, instantiated and launched; a graph
 * with one memset node, instantiated.  Both graphs and execs live on. */
static int graph_part(hostd_tenant_t *t, wire_buf_t *rp, uint64_t dev, uint64_t s) {
  call_capture_begin_req_t cb = {.stream = s, .mode = CU_STREAM_CAPTURE_MODE_GLOBAL};
  call_memset_req_t ms = {.dst = dev, .value = 9, .elem = 4, .count = 16, .stream = s};
  call_capture_end_req_t ce = {.stream = s};
  call_capture_end_rep_t g;
  call_graph_instantiate_rep_t e;
  call_graph_new_req_t gn = {0};
  call_graph_new_rep_t g2;
  int rc;
  PART_RUN(CALL_OP_CAPTURE_BEGIN, 0, &cb);
  PART_RUN(CALL_OP_MEMSET, 0, &ms);
  PART_RUN(CALL_OP_CAPTURE_END, 0, &ce);
  PART_REPLY(CALL_OP_CAPTURE_END, &g);
  call_graph_instantiate_req_t gi = {.graph = g.graph};
  PART_RUN(CALL_OP_GRAPH_INSTANTIATE, 0, &gi);
  PART_REPLY(CALL_OP_GRAPH_INSTANTIATE, &e);
  call_graph_launch_req_t gl = {.exec = e.exec, .stream = s};
  call_stream_sync_req_t ss = {.stream = s};
  PART_RUN(CALL_OP_GRAPH_LAUNCH, CALL_ASYNC, &gl);
  PART_RUN(CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &ss); /* reports the launch's failure */
  PART_RUN(CALL_OP_GRAPH_NEW, 0, &gn);
  PART_REPLY(CALL_OP_GRAPH_NEW, &g2);
  call_graph_add_req_t na = {.graph = g2.graph,
                             .kind = CALL_GNODE_MEMSET,
                             .dst = dev,
                             .value = 5,
                             .elem = 4,
                             .width = 16,
                             .height = 1};
  PART_RUN(CALL_OP_GRAPH_ADD, 0, &na);
  gi.graph = g2.graph;
  PART_RUN(CALL_OP_GRAPH_INSTANTIATE, 0, &gi);
  return 0;
}

static int scenario_newer(void) {
  wire_buf_t reply = {0};
  uint64_t live = hostd_record_live_bytes();
  size_t objects = hostd_record_live_objects();
  hostd_quota_t quota = {0}; /* no limits: counts what the tenant holds */
  hostd_tenant_t *t = hostd__tenant_new(4, false);
  call_hello_req_t hello = {.version = CALL_PROTO_VERSION};
  call_mem_alloc_req_t ma = {.size = 4096};
  call_mem_alloc_rep_t mr;
  call_stream_new_req_t sn = {.flags = CU_STREAM_NON_BLOCKING};
  call_stream_new_rep_t sr;
  call_ctx_sync_req_t cs;
  int rc = 0;

  if (!t)
    return -ENOMEM;
  hostd__quota_self = &quota;
  RUN(CALL_OP_HELLO, 0, &hello);
  RUN(CALL_OP_MEM_ALLOC, 0, &ma);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &mr), 0);
  RUN(CALL_OP_STREAM_NEW, 0, &sn);
  assert_int_equal(hc_reply(&reply, CALL_OP_STREAM_NEW, &sr), 0);
  if ((rc = arrays_part(t, &reply, mr.ptr, sr.stream)) != 0 || (rc = vmm_part(t, &reply)) != 0 ||
      (rc = pool_part(t, &reply, sr.stream)) != 0 ||
      (rc = graph_part(t, &reply, mr.ptr, sr.stream)) != 0)
    goto out;
  RUN(CALL_OP_CTX_SYNC, CALL_SYNCPOINT, &cs);
  {
    call_dtoh_req_t d = {.src = mr.ptr, .len = 256, .stream = sr.stream};
    call_capture_begin_req_t cb = {.stream = sr.stream, .mode = CU_STREAM_CAPTURE_MODE_GLOBAL};
    const uint8_t *got = reply.data + CALL_REPLY_HDR_LEN;
    uint32_t word;
    RUN(CALL_OP_DTOH, CALL_SYNCPOINT, &d);
    /* The replayed capture's memset over the array's first row, copied out. */
    for (size_t i = 0; i < 256; i += 4) {
      memcpy(&word, got + i, 4);
      assert_int_equal(word,
                       i < 64 ? 9 : (uint32_t)i | (i + 1) << 8 | (i + 2) << 16 | (i + 3) << 24);
    }
    RUN(CALL_OP_CAPTURE_BEGIN, 0, &cb); /* open when the tenant goes */
  }
  /* Ran through: the array and its texture live on, and the memory of the
   * allocation, the array, the kept mapping and the stream-ordered one. */
  assert_int_equal(hostd_record_live_objects(), objects + 2);
  assert_int_equal(hostd__quota_used(&quota, HOSTD_QUOTA_MEM), 4096 + 256 + MB2 + 4096);
out:
  /* Every failure gave back what it charged: the quota counts exactly the
   * device memory the tenant holds. */
  assert_int_equal(hostd__quota_used(&quota, HOSTD_QUOTA_MEM), hostd_record_live_bytes() - live);
  hostd__quota_self = NULL;
  hostd__tenant_free(t); /* with an array, a texture, a mapping, pools, graphs, a capture */
  wire_buf_close(&reply);
  assert_int_equal(hostd_record_live_bytes(), live);
  assert_int_equal(hostd_record_live_objects(), objects);
  return rc;
}

static void every_allocation_of_the_newer_ops_fails_cleanly(void **state) {
  (void)state;
  oom_every_failure(scenario_newer, 30);
}

static int setup(void **state) {
  (void)state;
  if (hc_daemon_setup() != 0)
    return -1;
  image_id = wire_content_id(image, sizeof(image));
  if (hostd__modcache_put(image_id, image, sizeof(image)) != 0) /* cached for good: not counted */
    return -1;
  wire_buf_init(&req);
  return wire_buf_reserve(&req, 4096);
}

static int teardown(void **state) {
  (void)state;
  wire_buf_close(&req);
  hostd__gpu.shutdown();
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_allocation_of_a_tenant_fails_cleanly),
      cmocka_unit_test(every_allocation_of_the_newer_ops_fails_cleanly),
  };
  return cmocka_run_group_tests_name("hostd-oom", tests, setup, teardown);
}
