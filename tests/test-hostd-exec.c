/* test-hostd-exec.c: hostd's request execution on the recording device,
 * driven directly (no guest, no wire).
 *
 * Checks the decoder against malformed and random requests (the same body
 * as the libFuzzer target tests/fuzz/fuzz-hostd-exec.c, here on 3000
 * deterministic pseudo-random inputs: no crash, only 0 or -EPROTO, no
 * leaked device memory), and a few contracts of tenant.c: nothing before
 * hello, unknown images are asked for, freeing a tenant frees its memory,
 * a context-corrupting error (injected) loses every live tenant's state
 * and raises one fault (the process is poisoned: tallyd re-executes itself,
 * tests/test-hostd-restart.sh), tenants made after the fault are lost too,
 * and after what the re-exec does (a fresh device, the fault forgotten)
 * tenants work without naming any handle or address from before (the
 * recording device refuses and counts such a use, HOSTD_RECORD_STALE, as
 * the real driver answers CUDA_ERROR_CONTEXT_IS_DESTROYED).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hostd/gpu.h"
#include "hostd/hostd-int.h"

int hostd_fuzz_exec_one(const uint8_t *data, size_t size);

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next(void) { /* xorshift64*: deterministic, so failures replay */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (uint32_t)((rng * 0x2545f4914f6cdd1dull) >> 32);
}

static void random_requests_never_crash_or_leak(void **state) {
  uint8_t buf[1024];
  (void)state;
  for (int iter = 0; iter < 3000; iter++) {
    size_t n = 0;
    while (n + 10 + 64 < sizeof(buf) && (next() % 8)) {
      uint32_t op = next() % (GUEST_OP_COUNT + 2), flags = next() % 4;
      uint16_t len = (uint16_t)(next() % 64);
      memcpy(buf + n, &op, 4);
      memcpy(buf + n + 4, &flags, 4);
      memcpy(buf + n + 8, &len, 2);
      n += 10;
      for (uint16_t i = 0; i < len; i++) /* small values hit sizes and handles */
        buf[n + i] = (uint8_t)(next() % 4 == 0 ? next() : next() % 3);
      n += len;
    }
    (void)hostd_fuzz_exec_one(buf, n); /* aborts on a crash-worthy result */
  }
}

static void requests_before_hello_are_refused(void **state) {
  hostd_tenant_t *t = hostd__tenant_new(7, false);
  guest_wr_t reply = {0};
  uint64_t size = 64;
  const char *why = NULL;
  (void)state;
  assert_non_null(t);
  assert_int_equal(hostd__tenant_exec(t, GUEST_OP_MEM_ALLOC, 0, (uint8_t *)&size, 8, &reply, &why),
                   -EPROTO);
  assert_non_null(why);
  hostd__tenant_free(t);
  guest_wr_free(&reply);
}

static hostd_tenant_t *tenant_after_hello(guest_wr_t *reply) {
  uint8_t hello[4 + 4 + 64 + 64] = {0};
  uint32_t ver = GUEST_PROTO_VERSION;
  const char *why;
  hostd_tenant_t *t = hostd__tenant_new(8, false);
  memcpy(hello, &ver, 4);
  assert_int_equal(hostd__tenant_exec(t, GUEST_OP_HELLO, 0, hello, sizeof(hello), reply, &why), 0);
  return t;
}

static uint32_t result_of(const guest_wr_t *reply) {
  uint32_t r;
  memcpy(&r, reply->buf, 4);
  return r;
}

static void unknown_module_id_asks_for_the_bytes(void **state) {
  guest_wr_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  uint8_t args[16] = {0x11, 0x22}; /* an id nobody offered, kind 0, no bytes */
  const char *why;
  (void)state;
  assert_int_equal(hostd__tenant_exec(t, GUEST_OP_MODULE_LOAD, 0, args, sizeof(args), &reply, &why),
                   0);
  assert_int_equal(result_of(&reply), CUDA_ERROR_FILE_NOT_FOUND);
  hostd__tenant_free(t);
  guest_wr_free(&reply);
}

static void freeing_a_tenant_frees_its_memory(void **state) {
  guest_wr_t reply = {0};
  uint64_t live = hostd_record_live_bytes(), size = 1 << 20;
  hostd_tenant_t *t = tenant_after_hello(&reply);
  const char *why;
  (void)state;
  for (int i = 0; i < 5; i++) {
    assert_int_equal(
        hostd__tenant_exec(t, GUEST_OP_MEM_ALLOC, 0, (uint8_t *)&size, 8, &reply, &why), 0);
    assert_int_equal(result_of(&reply), CUDA_SUCCESS);
  }
  assert_int_equal(hostd_record_live_bytes() - live, 5u << 20);
  hostd__tenant_free(t);
  assert_int_equal(hostd_record_live_bytes(), live);
  guest_wr_free(&reply);
}

static void async_error_is_kept_for_the_next_syncpoint(void **state) {
  guest_wr_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  uint64_t rec[3] = {0xbad0, 0, 0}; /* EVENT_RECORD of an unknown event */
  uint64_t s = 0;
  const char *why;
  (void)state;
  assert_int_equal(hostd__tenant_exec(t, GUEST_OP_EVENT_RECORD, GUEST_CALL_ASYNC, (uint8_t *)rec,
                                      sizeof(rec), &reply, &why),
                   0);
  assert_int_equal(reply.len, 0); /* no reply to a post */
  assert_int_equal(hostd__tenant_exec(t, GUEST_OP_MEM_INFO, 0, NULL, 0, &reply, &why), 0);
  assert_int_equal(result_of(&reply), CUDA_SUCCESS); /* not a synchronising call */
  assert_int_equal(hostd__tenant_exec(t, GUEST_OP_STREAM_SYNC, GUEST_CALL_SYNCPOINT, (uint8_t *)&s,
                                      8, &reply, &why),
                   0);
  assert_int_equal(result_of(&reply), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(hostd__tenant_exec(t, GUEST_OP_STREAM_SYNC, GUEST_CALL_SYNCPOINT, (uint8_t *)&s,
                                      8, &reply, &why),
                   0);
  assert_int_equal(result_of(&reply), CUDA_SUCCESS); /* reported once */
  hostd__tenant_free(t);
  guest_wr_free(&reply);
}

static uint32_t call(hostd_tenant_t *t, uint32_t op, uint32_t flags, const void *args, size_t len,
                     guest_wr_t *reply) {
  const char *why = NULL;
  assert_int_equal(hostd__tenant_exec(t, op, flags, args, len, reply, &why), 0);
  return result_of(reply);
}

static void context_corrupting_error_loses_every_tenant_and_raises_one_fault(void **state) {
  static const int fatal[] = {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED,
                              CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_ASSERT,
                              CUDA_ERROR_HARDWARE_STACK_ERROR};
  guest_wr_t reply = {0};
  uint64_t size = 4096, s = 0;
  uint32_t who = 0;
  (void)state;
  for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
    hostd_tenant_t *a = tenant_after_hello(&reply), *b = tenant_after_hello(&reply), *c;
    assert_int_equal(hostd__fault_pending(NULL), 0);
    assert_int_equal(call(a, GUEST_OP_MEM_ALLOC, 0, &size, 8, &reply), CUDA_SUCCESS);
    assert_int_equal(call(b, GUEST_OP_MEM_ALLOC, 0, &size, 8, &reply), CUDA_SUCCESS);
    assert_non_null(hostd__ctx_fatal(fatal[i]));
    hostd_record_inject(fatal[i]);
    /* a synchronises first: it is told, and the fault is raised, naming a. */
    assert_int_equal(call(a, GUEST_OP_CTX_SYNC, GUEST_CALL_SYNCPOINT, NULL, 0, &reply), fatal[i]);
    assert_int_equal(hostd__fault_pending(&who), fatal[i]);
    assert_int_equal(who, hostd__tenant_id(a));
    /* Both stay lost: every call returns the same error; still a's fault. */
    assert_int_equal(call(a, GUEST_OP_MEM_ALLOC, 0, &size, 8, &reply), fatal[i]);
    assert_int_equal(call(b, GUEST_OP_MEM_ALLOC, 0, &size, 8, &reply), fatal[i]);
    assert_int_equal(call(b, GUEST_OP_STREAM_SYNC, GUEST_CALL_SYNCPOINT, &s, 8, &reply), fatal[i]);
    assert_int_equal(hostd__fault_pending(&who), fatal[i]);
    assert_int_equal(who, hostd__tenant_id(a));
    /* The process is poisoned: a tenant made now is lost from the start
     * (the server refuses such tenants before they get here). */
    c = tenant_after_hello(&reply);
    assert_int_equal(call(c, GUEST_OP_MEM_ALLOC, 0, &size, 8, &reply), fatal[i]);
    hostd__tenant_free(a);
    hostd__tenant_free(b);
    hostd__tenant_free(c);
    /* What tallyd's re-exec does (hostd/restart.c): a fresh device, no
     * fault.  Tenants made afterwards work, naming only new handles. */
    hostd__gpu.shutdown();
    assert_int_equal(hostd__gpu.init(0, &hostd__snapshot), CUDA_SUCCESS);
    hostd__fault_forget();
    assert_int_equal(hostd_record_live_bytes(), 0);
    c = tenant_after_hello(&reply);
    assert_int_equal(call(c, GUEST_OP_MEM_ALLOC, 0, &size, 8, &reply), CUDA_SUCCESS);
    assert_int_equal(call(c, GUEST_OP_STREAM_SYNC, GUEST_CALL_SYNCPOINT, &s, 8, &reply),
                     CUDA_SUCCESS);
    {
      uint32_t sargs[2] = {0, 0}, eflags = 0;
      uint64_t st, ev, rec[3];
      assert_int_equal(call(c, GUEST_OP_STREAM_NEW, 0, sargs, 8, &reply), CUDA_SUCCESS);
      memcpy(&st, reply.buf + GUEST_REPLY_HDR_LEN, 8);
      assert_int_equal(call(c, GUEST_OP_EVENT_NEW, 0, &eflags, 4, &reply), CUDA_SUCCESS);
      memcpy(&ev, reply.buf + GUEST_REPLY_HDR_LEN, 8);
      rec[0] = ev, rec[1] = 0, rec[2] = 0; /* on the legacy stream: waits for st */
      assert_int_equal(call(c, GUEST_OP_EVENT_RECORD, 0, rec, sizeof(rec), &reply), CUDA_SUCCESS);
      assert_int_equal(call(c, GUEST_OP_STREAM_SYNC, GUEST_CALL_SYNCPOINT, &st, 8, &reply),
                       CUDA_SUCCESS);
      assert_int_equal(call(c, GUEST_OP_CTX_SYNC, GUEST_CALL_SYNCPOINT, NULL, 0, &reply),
                       CUDA_SUCCESS);
    }
    assert_int_equal(hostd_record_count(HOSTD_RECORD_STALE), 0);
    hostd__tenant_free(c);
    assert_int_equal(hostd_record_live_bytes(), 0);
  }
  guest_wr_free(&reply);
}

/* The model the test above relies on: after a shutdown (a restart), any
 * handle or address from before is refused. */
static void recording_device_refuses_what_predates_a_restart(void **state) {
  uint64_t st = 0, p = 0, q = 0;
  unsigned long stale = hostd_record_count(HOSTD_RECORD_STALE);
  (void)state;
  assert_int_equal(hostd__gpu.thread_enter(), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_new(&st, 0, 0), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_alloc(&p, 64), CUDA_SUCCESS);
  hostd__gpu.shutdown();
  assert_int_equal(hostd__gpu.init(0, &hostd__snapshot), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.stream_sync(st), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  assert_int_equal(hostd__gpu.memset(p, 0, 1, 64, 0), CUDA_ERROR_CONTEXT_IS_DESTROYED);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STALE), stale + 2);
  assert_int_equal(hostd__gpu.mem_alloc(&q, 64), CUDA_SUCCESS);
  assert_int_equal(hostd__gpu.mem_free(q), CUDA_SUCCESS);
  hostd_record_reset(); /* counters back to 0 for the other tests */
}

/* A worker thread makes the context current before its first request: the
 * recording device counts a call from a thread that did not (STALE). */
static uint32_t worker_r[3];

static void *other_worker(void *arg) {
  guest_wr_t reply = {0};
  uint32_t hello[34] = {GUEST_PROTO_VERSION};
  uint64_t size = 256, s = 0;
  const char *why;
  hostd_tenant_t *e = hostd__tenant_new(10, false);
  (void)arg;
  worker_r[0] = worker_r[1] = worker_r[2] = 999;
  if (hostd__tenant_exec(e, GUEST_OP_HELLO, 0, (uint8_t *)hello, sizeof(hello), &reply, &why) == 0)
    worker_r[0] = result_of(&reply);
  if (hostd__tenant_exec(e, GUEST_OP_MEM_ALLOC, 0, (uint8_t *)&size, 8, &reply, &why) == 0)
    worker_r[1] = result_of(&reply);
  if (hostd__tenant_exec(e, GUEST_OP_STREAM_SYNC, GUEST_CALL_SYNCPOINT, (uint8_t *)&s, 8, &reply,
                         &why) == 0)
    worker_r[2] = result_of(&reply);
  hostd__tenant_free(e);
  guest_wr_free(&reply);
  return NULL;
}

static void every_worker_thread_makes_the_context_current_first(void **state) {
  pthread_t th;
  (void)state;
  hostd_record_reset();
  assert_int_equal(pthread_create(&th, NULL, other_worker, NULL), 0);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(worker_r[0], CUDA_SUCCESS);
  assert_int_equal(worker_r[1], CUDA_SUCCESS);
  assert_int_equal(worker_r[2], CUDA_SUCCESS);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STALE), 0);
}

static void ordinary_errors_raise_no_fault(void **state) {
  guest_wr_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  uint64_t bad = 0x1234, size = 64;
  (void)state;
  assert_null(hostd__ctx_fatal(CUDA_ERROR_INVALID_VALUE));
  assert_null(hostd__ctx_fatal(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)); /* not sticky */
  assert_int_equal(call(t, GUEST_OP_MEM_FREE, 0, &bad, 8, &reply), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(call(t, GUEST_OP_MEM_ALLOC, 0, &size, 8, &reply), CUDA_SUCCESS);
  assert_int_equal(hostd__fault_pending(NULL), 0);
  hostd__tenant_free(t);
  guest_wr_free(&reply);
}

static int setup(void **state) {
  (void)state;
  if (hostd__gpu.init(0, &hostd__snapshot) != CUDA_SUCCESS)
    return -1;
  hostd__ndev = 1;
  hostd__log_level = HOSTD_LOG_ERROR;
  hostd__modcache_init(NULL);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_before_hello_are_refused),
      cmocka_unit_test(unknown_module_id_asks_for_the_bytes),
      cmocka_unit_test(freeing_a_tenant_frees_its_memory),
      cmocka_unit_test(async_error_is_kept_for_the_next_syncpoint),
      cmocka_unit_test(context_corrupting_error_loses_every_tenant_and_raises_one_fault),
      cmocka_unit_test(ordinary_errors_raise_no_fault),
      cmocka_unit_test(recording_device_refuses_what_predates_a_restart),
      cmocka_unit_test(every_worker_thread_makes_the_context_current_first),
      cmocka_unit_test(random_requests_never_crash_or_leak),
  };
  return cmocka_run_group_tests_name("hostd-exec", tests, setup, NULL);
}
