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
 * the real driver answers CUDA_ERROR_CONTEXT_IS_DESTROYED), and that a
 * latency-critical tenant's completion word is written right behind its
 * launch, with no event record between (the scheduler running for it).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "hostd/gpu.h"
#include "hostd/guard.h"
#include "hostd/hostd-int.h"
#include "hostd/tenant-int.h"
#include "tests/hostd-call-harness.h"

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
      uint32_t op = next() % (CALL_OP_COUNT + 2), flags = next() % 4;
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

/* The fuzz body decodes through the call table: a well-formed request of
 * every op (all fields 0, empty tails; posted when the op may only be
 * posted) is never a protocol error.  HOSTFN_WAIT is the loop thread's. */
typedef union any_req {
#define CALL_OP(NAME, name, number, modes, by) call_##name##_req_t name;
#include "wire/call.def"
#undef CALL_OP
} any_req_t;

static void every_op_encoded_by_the_table_passes_the_fuzz_body(void **state) {
  (void)state;
  for (uint32_t op = 1; op < CALL_OP_COUNT; op++) {
    any_req_t zero;
    wire_buf_t in, req;
    uint32_t flags = call_op_modes(op) & CALL_M_CALL ? 0 : CALL_ASYNC;
    if (op == CALL_OP_HOSTFN_WAIT)
      continue;
    memset(&zero, 0, sizeof(zero));
    wire_buf_init(&in);
    wire_buf_init(&req);
    assert_int_equal(call_put(call_req_msg(op), &zero, &req), 0);
    /* The fuzz input's framing: u32 op, u32 flags, u16 length, bytes. */
    assert_int_equal(wire_buf_put_u32(&in, op), 0);
    assert_int_equal(wire_buf_put_u32(&in, flags), 0);
    assert_int_equal(wire_buf_put_u16(&in, (uint16_t)req.len), 0);
    assert_int_equal(wire_buf_put_bytes(&in, req.data, req.len), 0);
    assert_int_equal(hostd_fuzz_exec_one(in.data, in.len), 0); /* 1: a protocol error */
    wire_buf_close(&in);
    wire_buf_close(&req);
  }
}

static void requests_before_hello_are_refused(void **state) {
  hostd_tenant_t *t = hostd__tenant_new(7, false);
  wire_buf_t reply = {0};
  call_mem_alloc_req_t q = {.size = 64};
  const char *why = NULL;
  (void)state;
  assert_non_null(t);
  assert_int_equal(hc_exec(t, CALL_OP_MEM_ALLOC, 0, &q, &reply, &why), -EPROTO);
  assert_non_null(why);
  hostd__tenant_free(t);
  wire_buf_close(&reply);
}

static hostd_tenant_t *tenant_after_hello(wire_buf_t *reply) {
  hostd_tenant_t *t = hc_tenant(8, reply);
  assert_non_null(t);
  return t;
}

/* Executes q of op on t (must not be a protocol error); its CUresult. */
static uint32_t call(hostd_tenant_t *t, uint32_t op, uint32_t flags, const void *q,
                     wire_buf_t *reply) {
  assert_int_equal(hc_exec(t, op, flags, q, reply, NULL), 0);
  return hc_result(reply);
}

static void unknown_module_id_asks_for_the_bytes(void **state) {
  wire_buf_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  call_module_load_req_t q = {.id = 0x2211}; /* an id nobody offered, kind 0, no bytes */
  (void)state;
  assert_int_equal(call(t, CALL_OP_MODULE_LOAD, 0, &q, &reply), CUDA_ERROR_FILE_NOT_FOUND);
  hostd__tenant_free(t);
  wire_buf_close(&reply);
}

/* FUNC_ATTRS: a library's kernels are described without attributes; one
 * request then answers all sixteen (the recording device's kernel: 32
 * registers, 1024 threads); a handle the tenant does not own is refused. */
static void function_attributes_all_at_once(void **state) {
  static const char img[] = "TALLYREC\nkernel pair 4,8\n";
  wire_buf_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  call_module_load_req_t q = {.kind = 1, .id = XXH3_64bits(img, sizeof(img))};
  call_module_load_rep_t lr;
  call_func_t fr;
  call_func_attrs_req_t aq;
  call_func_attrs_rep_t ar;
  size_t used = 0;
  (void)state;
  assert_int_equal(hostd__modcache_put(q.id, img, sizeof(img)), 0);
  assert_int_equal(call(t, CALL_OP_MODULE_LOAD, 0, &q, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_MODULE_LOAD, &lr), 0);
  assert_int_equal(lr.nfunc, 1);
  assert_int_equal(call_func_decode(lr.funcs.p, lr.funcs.len, &fr, &used, NULL), 0);
  assert_int_equal(fr.valid, 0); /* a library's kernel: no attribute at load */
  aq.func = fr.handle;
  assert_int_equal(call(t, CALL_OP_FUNC_ATTRS, 0, &aq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_FUNC_ATTRS, &ar), 0);
  assert_int_equal(ar.valid, (1u << CALL_FUNC_ATTRS) - 1);
  assert_int_equal(ar.attr[CU_FUNC_ATTRIBUTE_NUM_REGS], 32);
  assert_int_equal(ar.attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK], 1024);
  aq.func = fr.handle + 0x1000;
  assert_int_equal(call(t, CALL_OP_FUNC_ATTRS, 0, &aq, &reply), CUDA_ERROR_INVALID_HANDLE);
  hostd__tenant_free(t);
  wire_buf_close(&reply);
}

static void freeing_a_tenant_frees_its_memory(void **state) {
  wire_buf_t reply = {0};
  uint64_t live = hostd_record_live_bytes();
  call_mem_alloc_req_t q = {.size = 1 << 20};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  (void)state;
  for (int i = 0; i < 5; i++)
    assert_int_equal(call(t, CALL_OP_MEM_ALLOC, 0, &q, &reply), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes() - live, 5u << 20);
  hostd__tenant_free(t);
  assert_int_equal(hostd_record_live_bytes(), live);
  wire_buf_close(&reply);
}

static void reached_nothing(void *arg, uint32_t value) {
  (void)arg, (void)value;
}

/* A new stream of t, held behind a closed gate (*g): the work queued on it
 * waits until the test opens the gate, as work in flight on the GPU. */
static uint64_t gated_stream(hostd_tenant_t *t, wire_buf_t *reply, void **g) {
  call_stream_new_req_t q = {.flags = CU_STREAM_NON_BLOCKING};
  call_stream_new_rep_t r;
  assert_int_equal(call(t, CALL_OP_STREAM_NEW, 0, &q, reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(reply, CALL_OP_STREAM_NEW, &r), 0);
  assert_int_equal(hostd__gpu.gate_new(g, 1), CUDA_SUCCESS);
  int word = 0;
  assert_int_equal(hostd__gpu.host_fn(r.stream, *g, 0, 1, reached_nothing, NULL, &word),
                   CUDA_SUCCESS);
  return r.stream;
}

/* MEM_FREE returns at once and the memory goes when the tenant's own
 * streams reach the free: after its queued work, before other tenants' work
 * in flight is done (the driver's cuMemFree waits for all of it). */
static void a_free_waits_for_its_own_tenants_work_only(void **state) {
  wire_buf_t reply = {0};
  hostd_tenant_t *a = tenant_after_hello(&reply), *b = tenant_after_hello(&reply);
  call_mem_alloc_req_t aq = {.size = 4096};
  call_mem_alloc_rep_t ar;
  void *ga, *gb;
  uint64_t sb, live;
  (void)state;
  (void)gated_stream(a, &reply, &ga); /* the other tenant's work, in flight all along */
  sb = gated_stream(b, &reply, &gb);
  assert_int_equal(call(b, CALL_OP_MEM_ALLOC, 0, &aq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &ar), 0);
  live = hostd_record_live_bytes();
  call_memset_req_t mq = {.dst = ar.ptr, .value = 7, .elem = 4, .count = 1024, .stream = sb};
  assert_int_equal(call(b, CALL_OP_MEMSET, 0, &mq, &reply), CUDA_SUCCESS);
  call_mem_free_req_t fq = {.ptr = ar.ptr};
  assert_int_equal(call(b, CALL_OP_MEM_FREE, CALL_SYNCPOINT, &fq, &reply), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), live); /* the memset still uses it */
  assert_int_equal(call(b, CALL_OP_MEM_FREE, CALL_SYNCPOINT, &fq, &reply),
                   CUDA_ERROR_INVALID_VALUE); /* the tenant's own: gone at once */
  hostd__gpu.gate_open(gb, 0, 1);
  assert_int_equal(hostd_record_live_bytes(), live - 4096); /* a's gate is still closed */
  /* With nothing queued anywhere of its own, the next free is immediate. */
  assert_int_equal(call(b, CALL_OP_MEM_ALLOC, 0, &aq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &ar), 0);
  fq.ptr = ar.ptr;
  assert_int_equal(call(b, CALL_OP_MEM_FREE, CALL_SYNCPOINT, &fq, &reply), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), live - 4096);
  hostd__gpu.gate_open(ga, 0, 1);
  hostd__tenant_free(a);
  hostd__tenant_free(b);
  hostd__gpu.gate_del(ga, 1);
  hostd__gpu.gate_del(gb, 1);
  wire_buf_close(&reply);
}

static void *open_gate_later(void *g) {
  struct timespec ts = {0, 50 * 1000 * 1000};
  nanosleep(&ts, NULL);
  hostd__gpu.gate_open(g, 0, 1);
  return NULL;
}

/* A tenant that frees and allocates again where memory runs out: natively
 * the free was done when it returned, so an allocation that finds no room
 * waits for the tenant's frees in flight and tries once more. */
static void an_allocation_out_of_memory_waits_for_the_tenants_frees(void **state) {
  enum { MAX = 8 };
  wire_buf_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  call_mem_alloc_req_t aq = {.size = 1ull << 30}; /* the recording device's largest */
  call_mem_alloc_rep_t ar;
  call_mem_free_req_t fq;
  uint64_t chunk[MAX], s;
  int n = 0;
  void *g;
  pthread_t opener;
  (void)state;
  while (n < MAX && call(t, CALL_OP_MEM_ALLOC, 0, &aq, &reply) == CUDA_SUCCESS) {
    assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &ar), 0);
    chunk[n++] = ar.ptr;
  }
  assert_true(n > 0 && n < MAX); /* the device's memory ran out */
  s = gated_stream(t, &reply, &g);
  call_memset_req_t mq = {.dst = chunk[0], .value = 1, .elem = 4, .count = 16, .stream = s};
  assert_int_equal(call(t, CALL_OP_MEMSET, 0, &mq, &reply), CUDA_SUCCESS);
  fq.ptr = chunk[0];
  assert_int_equal(call(t, CALL_OP_MEM_FREE, CALL_SYNCPOINT, &fq, &reply), CUDA_SUCCESS);
  assert_int_equal(pthread_create(&opener, NULL, open_gate_later, g), 0);
  assert_int_equal(call(t, CALL_OP_MEM_ALLOC, 0, &aq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &ar), 0);
  chunk[0] = ar.ptr;
  assert_int_equal(pthread_join(opener, NULL), 0);
  for (int i = 0; i < n; i++) {
    fq.ptr = chunk[i];
    assert_int_equal(call(t, CALL_OP_MEM_FREE, CALL_SYNCPOINT, &fq, &reply), CUDA_SUCCESS);
  }
  hostd__tenant_free(t);
  hostd__gpu.gate_del(g, 1);
  wire_buf_close(&reply);
}

/* Pinned memory the guest gives back and takes again at the same address
 * (its allocator does) while the release thread may still hold the old
 * mapping there: the new one, mapped elsewhere for that reason, moves to
 * the guest's address, registered, with its bytes. */
static void pinned_memory_taken_again_keeps_the_guests_address(void **state) {
  wire_buf_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  size_t n = 4 * (size_t)sysconf(_SC_PAGESIZE);
  uint8_t *a = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint8_t *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  uint64_t tag = (uint64_t)(uintptr_t)a, v = 0;
  call_pinned_free_req_t fq = {.tag = tag};
  (void)state;
  assert_true(a != MAP_FAILED && b != MAP_FAILED);
  b[0] = 42;
  assert_int_equal(hostd__release_start(), 0);
  assert_int_equal(hostd__tenant_pinned_add(t, tag, a, n), 0);
  assert_int_equal(call(t, CALL_OP_PINNED_FREE, 0, &fq, &reply), CUDA_SUCCESS);
  assert_int_equal(hostd__tenant_pinned_add(t, tag, b, n), 0);
  assert_true(u64map_get(&t->pinned, tag, &v));
  pinned_t *p = (pinned_t *)(uintptr_t)v;
  assert_ptr_equal(p->addr, a);
  assert_true(p->registered);
  assert_int_equal(p->addr[0], 42);
  hostd__tenant_free(t);
  hostd__release_stop();
  wire_buf_close(&reply);
}

static void async_error_is_kept_for_the_next_syncpoint(void **state) {
  wire_buf_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  call_event_record_req_t rec = {.event = 0xbad0}; /* an unknown event */
  call_mem_info_req_t info;
  call_stream_sync_req_t sync = {.stream = 0};
  (void)state;
  assert_int_equal(hc_exec(t, CALL_OP_EVENT_RECORD, CALL_ASYNC, &rec, &reply, NULL), 0);
  assert_int_equal(reply.len, 0); /* no reply to a post */
  assert_int_equal(call(t, CALL_OP_MEM_INFO, 0, &info, &reply), CUDA_SUCCESS); /* not a syncpoint */
  assert_int_equal(call(t, CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &sync, &reply),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(call(t, CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &sync, &reply),
                   CUDA_SUCCESS); /* reported once */
  hostd__tenant_free(t);
  wire_buf_close(&reply);
}

/* Every truncation of a valid request is a protocol error whose reason
 * names the op and the field, and the tenant's resources stay releasable. */
static void truncated_requests_are_protocol_errors_with_a_reason(void **state) {
  wire_buf_t reply = {0}, b = {0};
  call_launch_req_t q = {.func = 1, .grid = {1, 1, 1}, .block = {1, 1, 1}};
  call_mem_alloc_req_t a = {.size = 64};
  uint64_t live = hostd_record_live_bytes();
  const char *why = NULL;
  (void)state;
  assert_int_equal(call_launch_req_put(&q, &b), 0);
  for (size_t n = 0; n < b.len; n++) {
    hostd_tenant_t *t = tenant_after_hello(&reply);
    assert_int_equal(call(t, CALL_OP_MEM_ALLOC, 0, &a, &reply), CUDA_SUCCESS);
    why = NULL;
    assert_int_equal(hostd__tenant_exec(t, CALL_OP_LAUNCH, CALL_ASYNC, b.data, n, &reply, &why),
                     -EPROTO);
    assert_non_null(why);
    assert_non_null(strstr(why, "LAUNCH request: truncated at field "));
    hostd__tenant_free(t);
  }
  assert_int_equal(hostd_record_live_bytes(), live);
  /* A call of a post-only op is fine; a post of an op that must answer is not. */
  {
    hostd_tenant_t *t = tenant_after_hello(&reply);
    assert_int_equal(hc_exec(t, CALL_OP_MEM_ALLOC, CALL_ASYNC, &a, &reply, &why), -EPROTO);
    assert_non_null(strstr(why, "MEM_ALLOC"));
    hostd__tenant_free(t);
  }
  wire_buf_close(&b);
  wire_buf_close(&reply);
}

static void context_corrupting_error_loses_every_tenant_and_raises_one_fault(void **state) {
  static const int fatal[] = {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED,
                              CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_ASSERT,
                              CUDA_ERROR_HARDWARE_STACK_ERROR};
  wire_buf_t reply = {0};
  call_mem_alloc_req_t size = {.size = 4096};
  call_stream_sync_req_t s0 = {.stream = 0};
  call_ctx_sync_req_t cs;
  uint32_t who = 0;
  (void)state;
  for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++) {
    hostd_tenant_t *a = tenant_after_hello(&reply), *b = tenant_after_hello(&reply), *c;
    assert_int_equal(hostd__fault_pending(NULL), 0);
    assert_int_equal(call(a, CALL_OP_MEM_ALLOC, 0, &size, &reply), CUDA_SUCCESS);
    assert_int_equal(call(b, CALL_OP_MEM_ALLOC, 0, &size, &reply), CUDA_SUCCESS);
    assert_non_null(hostd__ctx_fatal(fatal[i]));
    hostd_record_inject(fatal[i]);
    /* a synchronises first: it is told, and the fault is raised, naming a. */
    assert_int_equal(call(a, CALL_OP_CTX_SYNC, CALL_SYNCPOINT, &cs, &reply), fatal[i]);
    assert_int_equal(hostd__fault_pending(&who), fatal[i]);
    assert_int_equal(who, hostd__tenant_id(a));
    /* Both stay lost: every call returns the same error; still a's fault. */
    assert_int_equal(call(a, CALL_OP_MEM_ALLOC, 0, &size, &reply), fatal[i]);
    assert_int_equal(call(b, CALL_OP_MEM_ALLOC, 0, &size, &reply), fatal[i]);
    assert_int_equal(call(b, CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &s0, &reply), fatal[i]);
    assert_int_equal(hostd__fault_pending(&who), fatal[i]);
    assert_int_equal(who, hostd__tenant_id(a));
    /* The process is poisoned: a tenant made now is lost from the start
     * (the server refuses such tenants before they get here). */
    c = tenant_after_hello(&reply);
    assert_int_equal(call(c, CALL_OP_MEM_ALLOC, 0, &size, &reply), fatal[i]);
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
    assert_int_equal(call(c, CALL_OP_MEM_ALLOC, 0, &size, &reply), CUDA_SUCCESS);
    assert_int_equal(call(c, CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &s0, &reply), CUDA_SUCCESS);
    {
      call_stream_new_req_t sn = {0};
      call_event_new_req_t en = {0};
      call_stream_new_rep_t sr;
      call_event_new_rep_t er;
      call_event_record_req_t rec = {0};
      call_stream_sync_req_t ss = {0};
      assert_int_equal(call(c, CALL_OP_STREAM_NEW, 0, &sn, &reply), CUDA_SUCCESS);
      assert_int_equal(hc_reply(&reply, CALL_OP_STREAM_NEW, &sr), 0);
      assert_int_equal(call(c, CALL_OP_EVENT_NEW, 0, &en, &reply), CUDA_SUCCESS);
      assert_int_equal(hc_reply(&reply, CALL_OP_EVENT_NEW, &er), 0);
      rec.event = er.event; /* on the legacy stream: waits for sr.stream */
      assert_int_equal(call(c, CALL_OP_EVENT_RECORD, 0, &rec, &reply), CUDA_SUCCESS);
      ss.stream = sr.stream;
      assert_int_equal(call(c, CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &ss, &reply), CUDA_SUCCESS);
      assert_int_equal(call(c, CALL_OP_CTX_SYNC, CALL_SYNCPOINT, &cs, &reply), CUDA_SUCCESS);
    }
    assert_int_equal(hostd_record_count(HOSTD_RECORD_STALE), 0);
    hostd__tenant_free(c);
    assert_int_equal(hostd_record_live_bytes(), 0);
  }
  wire_buf_close(&reply);
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
  wire_buf_t reply = {0};
  call_hello_req_t hello = {.version = CALL_PROTO_VERSION};
  call_mem_alloc_req_t size = {.size = 256};
  call_stream_sync_req_t s0 = {.stream = 0};
  hostd_tenant_t *e = hostd__tenant_new(10, false);
  (void)arg;
  worker_r[0] = worker_r[1] = worker_r[2] = 999;
  if (hc_exec(e, CALL_OP_HELLO, 0, &hello, &reply, NULL) == 0)
    worker_r[0] = hc_result(&reply);
  if (hc_exec(e, CALL_OP_MEM_ALLOC, 0, &size, &reply, NULL) == 0)
    worker_r[1] = hc_result(&reply);
  if (hc_exec(e, CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &s0, &reply, NULL) == 0)
    worker_r[2] = hc_result(&reply);
  hostd__tenant_free(e);
  wire_buf_close(&reply);
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
  wire_buf_t reply = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply);
  call_mem_free_req_t bad = {.ptr = 0x1234};
  call_mem_alloc_req_t size = {.size = 64};
  (void)state;
  assert_null(hostd__ctx_fatal(CUDA_ERROR_INVALID_VALUE));
  assert_null(hostd__ctx_fatal(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)); /* not sticky */
  assert_int_equal(call(t, CALL_OP_MEM_FREE, 0, &bad, &reply), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(call(t, CALL_OP_MEM_ALLOC, 0, &size, &reply), CUDA_SUCCESS);
  assert_int_equal(hostd__fault_pending(NULL), 0);
  hostd__tenant_free(t);
  wire_buf_close(&reply);
}

/* BLASLT_LAYOUT: every tenant gets the device's layout objects, the same
 * bytes (the recording device's: 8 groups of 8 units); a device without
 * them answers CUDA_ERROR_NOT_SUPPORTED and the tenant stays; a posted one
 * is a protocol error (it must be answered). */
static void blaslt_layout_is_the_devices(void **state) {
  wire_buf_t reply = {0}, r2 = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply), *u = tenant_after_hello(&r2);
  call_blaslt_layout_req_t q = {0};
  call_blaslt_layout_rep_t a, b;
  const char *why = NULL;
  (void)state;
  assert_int_equal(call(t, CALL_OP_BLASLT_LAYOUT, 0, &q, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_BLASLT_LAYOUT, &a), 0);
  assert_int_equal(call(u, CALL_OP_BLASLT_LAYOUT, 0, &q, &r2), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&r2, CALL_OP_BLASLT_LAYOUT, &b), 0);
  for (unsigned i = 0; i < CALL_BLASLT_LAYOUT_BYTES; i++) {
    assert_int_equal(a.a[i], i % 8);
    assert_int_equal(a.b[i], i / 8);
  }
  assert_memory_equal(a.a, b.a, sizeof(a.a));
  assert_memory_equal(a.b, b.b, sizeof(a.b));
  hostd__record_no_layout = true;
  assert_int_equal(call(t, CALL_OP_BLASLT_LAYOUT, 0, &q, &reply), CUDA_ERROR_NOT_SUPPORTED);
  hostd__record_no_layout = false;
  assert_int_equal(call(t, CALL_OP_BLASLT_LAYOUT, 0, &q, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_exec(u, CALL_OP_BLASLT_LAYOUT, CALL_ASYNC, &q, &r2, &why), -EPROTO);
  assert_non_null(why);
  assert_non_null(strstr(why, "BLASLT_LAYOUT"));
  hostd__tenant_free(t);
  hostd__tenant_free(u);
  wire_buf_close(&reply);
  wire_buf_close(&r2);
}

/* CTX_LIMIT (exec.c, "the context's limits"): a limit of tenant t; *value
 * gets the context's value when it succeeded.  Never a protocol error. */
static uint32_t ctx_limit(hostd_tenant_t *t, uint32_t limit, uint32_t set, uint64_t v,
                          uint64_t *value, wire_buf_t *reply) {
  call_ctx_limit_req_t q = {.limit = limit, .set = set, .value = v};
  call_ctx_limit_rep_t a = {0};
  uint32_t r = call(t, CALL_OP_CTX_LIMIT, 0, &q, reply);
  if (r == CUDA_SUCCESS) {
    assert_int_equal(hc_reply(reply, CALL_OP_CTX_LIMIT, &a), 0);
    *value = a.value;
  }
  return r;
}

/* The three limits tallyd applies start at CUDA's defaults and only grow,
 * for every tenant; a request at or below the value makes no driver call;
 * the stack and heap stop at their bounds (0: none) before the driver is
 * asked; the driver's refusal (a heap size after a kernel that uses malloc
 * was launched) comes back as is; any other limit, a limit past cuda.h's
 * list, a set other than 0 or 1 is CUDA_ERROR_INVALID_VALUE and the tenant
 * stays; a posted CTX_LIMIT is a protocol error (it must be answered). */
static void context_limits_grow_only_within_their_bounds(void **state) {
  static const char img[] = "TALLYREC\nkernel uses_malloc\n";
  wire_buf_t reply = {0}, r2 = {0};
  hostd_tenant_t *t = tenant_after_hello(&reply), *u = tenant_after_hello(&r2);
  call_module_load_req_t lq = {.id = XXH3_64bits(img, sizeof(img))};
  call_module_load_rep_t lr;
  call_func_t fr;
  call_launch_req_t launch;
  const char *why = NULL;
  unsigned long sets = hostd_record_count(HOSTD_RECORD_LIMIT);
  size_t used = 0;
  uint64_t v = 0;
  (void)state;
  assert_int_equal(ctx_limit(t, CU_LIMIT_STACK_SIZE, 0, 0, &v, &reply), CUDA_SUCCESS);
  assert_int_equal(v, 1024);
  assert_int_equal(ctx_limit(t, CU_LIMIT_PRINTF_FIFO_SIZE, 0, 0, &v, &reply), CUDA_SUCCESS);
  assert_int_equal(v, 1u << 20);
  assert_int_equal(ctx_limit(t, CU_LIMIT_MALLOC_HEAP_SIZE, 0, 0, &v, &reply), CUDA_SUCCESS);
  assert_int_equal(v, 8u << 20);
  /* Grown by t: u sees it, and u's smaller request succeeds without the driver. */
  assert_int_equal(ctx_limit(t, CU_LIMIT_MALLOC_HEAP_SIZE, 1, 256u << 20, &v, &reply),
                   CUDA_SUCCESS);
  assert_int_equal(v, 256u << 20);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_LIMIT), sets + 1);
  assert_int_equal(ctx_limit(u, CU_LIMIT_MALLOC_HEAP_SIZE, 0, 0, &v, &r2), CUDA_SUCCESS);
  assert_int_equal(v, 256u << 20);
  assert_int_equal(ctx_limit(u, CU_LIMIT_MALLOC_HEAP_SIZE, 1, 64u << 20, &v, &r2), CUDA_SUCCESS);
  assert_int_equal(v, 256u << 20);
  assert_int_equal(ctx_limit(u, CU_LIMIT_MALLOC_HEAP_SIZE, 1, 256u << 20, &v, &r2), CUDA_SUCCESS);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_LIMIT), sets + 1);
  /* Bounds: the default 1 GiB heap and 64 KiB stack, inclusive; 0 lifts one. */
  assert_int_equal(ctx_limit(t, CU_LIMIT_MALLOC_HEAP_SIZE, 1, (1ull << 30) + 1, &v, &reply),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, CU_LIMIT_MALLOC_HEAP_SIZE, 1, UINT64_MAX, &v, &reply),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, CU_LIMIT_STACK_SIZE, 1, 65537, &v, &reply),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_LIMIT), sets + 1);
  assert_int_equal(ctx_limit(t, CU_LIMIT_STACK_SIZE, 1, 65536, &v, &reply), CUDA_SUCCESS);
  assert_int_equal(v, 65536);
  hostd__limit_bounds(HOSTD_DEFAULT_MAX_STACK_BYTES, 0);
  assert_int_equal(ctx_limit(t, CU_LIMIT_MALLOC_HEAP_SIZE, 1, 2ull << 30, &v, &reply),
                   CUDA_SUCCESS);
  assert_int_equal(v, 2ull << 30);
  hostd__limit_bounds(HOSTD_DEFAULT_MAX_STACK_BYTES, HOSTD_DEFAULT_MAX_HEAP_BYTES);
  /* Above the bound now, though no more than the context has: refused all the same. */
  assert_int_equal(ctx_limit(t, CU_LIMIT_MALLOC_HEAP_SIZE, 1, 2ull << 30, &v, &reply),
                   CUDA_ERROR_INVALID_VALUE);
  /* The printf FIFO has no bound of its own. */
  assert_int_equal(ctx_limit(t, CU_LIMIT_PRINTF_FIFO_SIZE, 1, 4ull << 30, &v, &reply),
                   CUDA_SUCCESS);
  assert_int_equal(v, 4ull << 30);
  /* The driver's refusal once a kernel that uses malloc was launched. */
  assert_int_equal(hostd__modcache_put(lq.id, img, sizeof(img)), 0);
  assert_int_equal(call(t, CALL_OP_MODULE_LOAD, 0, &lq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_MODULE_LOAD, &lr), 0);
  assert_int_equal(call_func_decode(lr.funcs.p, lr.funcs.len, &fr, &used, NULL), 0);
  memset(&launch, 0, sizeof(launch));
  launch.func = fr.handle;
  launch.grid[0] = launch.grid[1] = launch.grid[2] = 1;
  launch.block[0] = launch.block[1] = launch.block[2] = 1;
  assert_int_equal(hc_exec(t, CALL_OP_LAUNCH, CALL_ASYNC, &launch, &reply, NULL), 0);
  assert_int_equal(ctx_limit(t, CU_LIMIT_MALLOC_HEAP_SIZE, 1, 64u << 20, &v, &reply),
                   CUDA_SUCCESS); /* at or below: no driver call, no refusal */
  hostd__limit_bounds(HOSTD_DEFAULT_MAX_STACK_BYTES, 0);
  assert_int_equal(ctx_limit(u, CU_LIMIT_MALLOC_HEAP_SIZE, 1, 3ull << 30, &v, &r2),
                   CUDA_ERROR_INVALID_VALUE);
  hostd__limit_bounds(HOSTD_DEFAULT_MAX_STACK_BYTES, HOSTD_DEFAULT_MAX_HEAP_BYTES);
  assert_int_equal(ctx_limit(u, CU_LIMIT_MALLOC_HEAP_SIZE, 0, 0, &v, &r2), CUDA_SUCCESS);
  assert_int_equal(v, 2ull << 30);
  /* What tallyd does not apply, and what cuda.h does not list. */
  assert_int_equal(ctx_limit(t, CU_LIMIT_MAX_L2_FETCH_GRANULARITY, 1, 64, &v, &reply),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, CU_LIMIT_PERSISTING_L2_CACHE_SIZE, 0, 0, &v, &reply),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, CU_LIMIT_MAX, 0, 0, &v, &reply), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, UINT32_MAX, 1, 1, &v, &reply), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, CU_LIMIT_STACK_SIZE, 2, 1, &v, &reply), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, CU_LIMIT_STACK_SIZE, UINT32_MAX, 1, &v, &reply),
                   CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(ctx_limit(t, CU_LIMIT_STACK_SIZE, 0, 0, &v, &reply), CUDA_SUCCESS);
  assert_int_equal(v, 65536);
  {
    call_ctx_limit_req_t q = {.limit = CU_LIMIT_STACK_SIZE, .set = 1, .value = 2048};
    assert_int_equal(hc_exec(u, CALL_OP_CTX_LIMIT, CALL_ASYNC, &q, &r2, &why), -EPROTO);
    assert_non_null(why);
    assert_non_null(strstr(why, "CTX_LIMIT"));
  }
  hostd__tenant_free(t);
  hostd__tenant_free(u);
  wire_buf_close(&reply);
  wire_buf_close(&r2);
}

/* A latency-critical tenant's completion word (STREAM_MARK) right behind
 * its launch: the word's write is queued first and the quiet point's event
 * record after it (hostd/exec.c), so no record comes between the launch and
 * the write; the word is written once the work ran.  Here the requests are
 * executed back to back, as a worker that took both in one batch does. */
static void lc_stream_mark_writes_right_behind_the_launch(void **state) {
  static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
  hostd_sched_config_t cfg;
  wire_buf_t reply = {0};
  call_hello_req_t hq = {.version = CALL_PROTO_VERSION, .priority = 0};
  call_module_load_req_t lq = {.id = wire_content_id(img, sizeof(img) - 1), .has_image = 1,
                               .image = {(const uint8_t *)img, sizeof(img) - 1}};
  call_module_load_rep_t lr;
  call_stream_new_req_t sq = {.flags = CU_STREAM_NON_BLOCKING};
  call_stream_new_rep_t sr;
  call_mem_alloc_req_t aq = {.size = 64};
  call_mem_alloc_rep_t ar;
  call_func_t fr;
  size_t used, n = (size_t)sysconf(_SC_PAGESIZE);
  uint8_t args[24] = {0};
  uint32_t v = 7;
  uint64_t cnt = 4;
  (void)state;
  hostd__sched_config_init(&cfg);
  assert_int_equal(hostd__gpu.thread_enter(), CUDA_SUCCESS);
  assert_int_equal(hostd__sched_parse_policy(&cfg, "tally"), 0);
  assert_int_equal(hostd__sched_init(&cfg), 0);
  hostd_tenant_t *t = hostd__tenant_new(12, false);
  assert_non_null(t);
  assert_int_equal(call(t, CALL_OP_HELLO, 0, &hq, &reply), CUDA_SUCCESS);
  uint64_t *word = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(word != MAP_FAILED);
  uint64_t tag = (uint64_t)(uintptr_t)word;
  assert_int_equal(hostd__tenant_pinned_add(t, tag, word, n), 0);
  assert_int_equal(call(t, CALL_OP_MODULE_LOAD, 0, &lq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_MODULE_LOAD, &lr), 0);
  assert_int_equal(call_func_decode(lr.funcs.p, lr.funcs.len, &fr, &used, NULL), 0);
  assert_int_equal(call(t, CALL_OP_STREAM_NEW, 0, &sq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_STREAM_NEW, &sr), 0);
  assert_int_equal(call(t, CALL_OP_MEM_ALLOC, 0, &aq, &reply), CUDA_SUCCESS);
  assert_int_equal(hc_reply(&reply, CALL_OP_MEM_ALLOC, &ar), 0);
  memcpy(args, &ar.ptr, 8);
  memcpy(args + 8, &v, 4);
  memcpy(args + 16, &cnt, 8);
  call_launch_req_t q = {.func = fr.handle, .grid = {1, 1, 1}, .block = {32, 1, 1},
                         .stream = sr.stream, .argbytes = 24, .args = {args, 24}};
  call_stream_mark_req_t mq = {.stream = sr.stream, .tag = tag, .off = 8, .value = 5};
  for (int round = 0; round < 3; round++) {
    unsigned long behind = hostd__record_write64_behind_launch;
    mq.value = 5 + (uint64_t)round;
    assert_int_equal(hc_exec(t, CALL_OP_LAUNCH, CALL_ASYNC, &q, &reply, NULL), 0);
    assert_int_equal(hc_exec(t, CALL_OP_STREAM_MARK, CALL_ASYNC, &mq, &reply, NULL), 0);
    assert_int_equal(hostd__record_write64_behind_launch, behind + 1);
    for (int i = 0; i < 5000 && __atomic_load_n(&word[1], __ATOMIC_ACQUIRE) != mq.value; i++)
      usleep(1000);
    assert_int_equal(__atomic_load_n(&word[1], __ATOMIC_ACQUIRE), mq.value);
  }
  hostd__tenant_free(t);
  hostd__sched_shutdown();
  munmap(word, n);
  wire_buf_close(&reply);
}

static int setup(void **state) {
  (void)state;
  return hc_daemon_setup();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(requests_before_hello_are_refused),
      cmocka_unit_test(unknown_module_id_asks_for_the_bytes),
      cmocka_unit_test(function_attributes_all_at_once),
      cmocka_unit_test(freeing_a_tenant_frees_its_memory),
      cmocka_unit_test(a_free_waits_for_its_own_tenants_work_only),
      cmocka_unit_test(an_allocation_out_of_memory_waits_for_the_tenants_frees),
      cmocka_unit_test(pinned_memory_taken_again_keeps_the_guests_address),
      cmocka_unit_test(async_error_is_kept_for_the_next_syncpoint),
      cmocka_unit_test(truncated_requests_are_protocol_errors_with_a_reason),
      cmocka_unit_test(context_corrupting_error_loses_every_tenant_and_raises_one_fault),
      cmocka_unit_test(ordinary_errors_raise_no_fault),
      cmocka_unit_test(recording_device_refuses_what_predates_a_restart),
      cmocka_unit_test(every_worker_thread_makes_the_context_current_first),
      cmocka_unit_test(context_limits_grow_only_within_their_bounds),
      cmocka_unit_test(blaslt_layout_is_the_devices),
      cmocka_unit_test(lc_stream_mark_writes_right_behind_the_launch),
      cmocka_unit_test(random_requests_never_crash_or_leak),
      cmocka_unit_test(every_op_encoded_by_the_table_passes_the_fuzz_body),
  };
  return cmocka_run_group_tests_name("hostd-exec", tests, setup, NULL);
}
