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
 */
#include <cuda.h>
#include <string.h>

#include "hostd/gpu.h"
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
  };
  return cmocka_run_group_tests_name("hostd-oom", tests, setup, teardown);
}
