/* test-hostd-vmm.c: virtual memory management, stream-ordered allocation
 * and memory pools in hostd (exec-vmm.c, exec-pool.c) on the recording
 * device, driven directly with requests encoded by the call table.
 *
 * Checks ownership (another tenant's physical handle, reservation, mapped
 * address or pool is refused; a mapping must lie in the tenant's own
 * reservation), the range rules (copies into mapped memory are checked as
 * for cuMemAlloc, back-to-back mappings count as one range, partial unmaps
 * and frees of a reservation with mappings are refused), the memory quota
 * (charged at creation, released when the last reference and mapping go),
 * that closing a tenant frees everything it held, and that malformed
 * requests are protocol errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hostd/guard.h"
#include "hostd/tenant-int.h"
#include "tests/hostd-call-fixture.h"

#define MB2 (2ull << 20)

static uint64_t create(hostd_tenant_t *t, uint64_t size) {
  call_mem_create_req_t q = {.size = size};
  call_mem_create_rep_t a;
  hc_call_ok(t, CALL_OP_MEM_CREATE, &q, &a);
  return a.handle;
}

static uint64_t reserve(hostd_tenant_t *t, uint64_t size) {
  call_mem_reserve_req_t q = {.size = size};
  call_mem_reserve_rep_t a;
  hc_call_ok(t, CALL_OP_MEM_RESERVE, &q, &a);
  return a.ptr;
}

static uint32_t map(hostd_tenant_t *t, uint64_t p, uint64_t size, uint64_t off, uint64_t h) {
  call_mem_map_req_t q = {.ptr = p, .size = size, .offset = off, .handle = h};
  return hc_call(t, CALL_OP_MEM_MAP, &q);
}

static uint32_t unmap(hostd_tenant_t *t, uint64_t p, uint64_t size) {
  call_mem_unmap_req_t q = {.ptr = p, .size = size};
  return hc_call(t, CALL_OP_MEM_UNMAP, &q);
}

static void granularity_is_the_devices(void **state) {
  hostd_tenant_t *t = hc_tenant(1, &reply);
  call_mem_granularity_req_t q = {.option = 1};
  call_mem_granularity_rep_t a;
  (void)state;
  hc_call_ok(t, CALL_OP_MEM_GRANULARITY, &q, &a);
  assert_int_equal(a.granularity, MB2);
  q.option = 7;
  assert_int_equal(hc_call(t, CALL_OP_MEM_GRANULARITY, &q), CUDA_ERROR_INVALID_VALUE);
  q.option = 0;
  q.handle_types = CU_MEM_HANDLE_TYPE_WIN32; /* not on this platform */
  assert_int_equal(hc_call(t, CALL_OP_MEM_GRANULARITY, &q), CUDA_ERROR_NOT_SUPPORTED);
  hostd__tenant_free(t);
}

/* XLA asks with fabric and POSIX fd handle types.  The recording device
 * refuses fabric as a driver without a fabric does: the query still
 * answers (for what will be made), and memory and pools are made without
 * fabric; nothing is exported either way. */
static void fabric_is_a_query_not_an_export(void **state) {
  hostd_tenant_t *t = hc_tenant(11, &reply);
  const uint32_t both = CU_MEM_HANDLE_TYPE_FABRIC | CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  call_mem_granularity_req_t q = {.option = 1, .handle_types = both};
  call_mem_granularity_rep_t a = {0};
  call_mem_create_req_t c = {.size = MB2, .handle_types = both};
  call_mem_create_rep_t ca;
  call_pool_new_req_t pn = {.handle_types = CU_MEM_HANDLE_TYPE_FABRIC};
  call_pool_new_rep_t pa;
  call_pool_del_req_t pd;
  call_mem_release_req_t rel;
  (void)state;
  for (uint32_t opt = 0; opt <= 1; opt++) {
    q.option = opt;
    hc_call_ok(t, CALL_OP_MEM_GRANULARITY, &q, &a);
    assert_int_equal(a.granularity, MB2);
  }
  q.handle_types = CU_MEM_HANDLE_TYPE_FABRIC;
  assert_int_equal(hc_call(t, CALL_OP_MEM_GRANULARITY, &q), CUDA_SUCCESS);
  q.handle_types = both | CU_MEM_HANDLE_TYPE_WIN32_KMT;
  assert_int_equal(hc_call(t, CALL_OP_MEM_GRANULARITY, &q), CUDA_ERROR_NOT_SUPPORTED);

  hc_call_ok(t, CALL_OP_MEM_CREATE, &c, &ca);
  assert_int_equal(hostd_record_live_bytes(), MB2);
  rel.handle = ca.handle;
  assert_int_equal(hc_call(t, CALL_OP_MEM_RELEASE, &rel), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), 0);

  hc_call_ok(t, CALL_OP_POOL_NEW, &pn, &pa);
  pd.pool = pa.pool;
  assert_int_equal(hc_call(t, CALL_OP_POOL_DEL, &pd), CUDA_SUCCESS);
  pn.handle_types = CU_MEM_HANDLE_TYPE_WIN32;
  assert_int_equal(hc_call(t, CALL_OP_POOL_NEW, &pn), CUDA_ERROR_NOT_SUPPORTED);
  hostd__tenant_free(t);
}

/* Two handles mapped back to back: data goes in and out of each, a range
 * across both counts as owned, and everything goes back in order. */
static void map_copy_unmap_release(void **state) {
  hostd_tenant_t *t = hc_tenant(2, &reply);
  uint64_t h1 = create(t, MB2), h2 = create(t, MB2), va = reserve(t, 2 * MB2);
  uint32_t word = 0xfeedf00d;
  (void)state;
  assert_int_equal(map(t, va, MB2, 0, h1), CUDA_SUCCESS);
  assert_int_equal(map(t, va + MB2, MB2, 0, h2), CUDA_SUCCESS);
  call_mem_set_access_req_t acc = {.ptr = va, .size = 2 * MB2, .flags = 3};
  assert_int_equal(hc_call(t, CALL_OP_MEM_SET_ACCESS, &acc), CUDA_SUCCESS);
  assert_true(hostd__owns(t, va + MB2 - 8, 16)); /* across the two mappings */
  assert_false(hostd__owns(t, va + 2 * MB2 - 8, 16));

  call_htod_req_t w = {.dst = va + MB2 + 64, .bytes = {(const uint8_t *)&word, 4}};
  assert_int_equal(hc_call(t, CALL_OP_HTOD, &w), CUDA_SUCCESS);
  call_dtoh_req_t r = {.src = va + MB2 + 64, .len = 4};
  assert_int_equal(hc_call(t, CALL_OP_DTOH, &r), CUDA_SUCCESS);
  assert_memory_equal(reply.data + CALL_REPLY_HDR_LEN, &word, 4);

  /* Not a cuMemAlloc allocation: cuMemFree refuses it. */
  call_mem_free_req_t f = {.ptr = va};
  assert_int_equal(hc_call(t, CALL_OP_MEM_FREE, &f), CUDA_ERROR_INVALID_VALUE);
  /* Released while mapped: the memory stays until unmapped, as on the driver. */
  call_mem_release_req_t rel = {.handle = h1};
  assert_int_equal(hc_call(t, CALL_OP_MEM_RELEASE, &rel), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_MEM_RELEASE, &rel), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hostd_record_live_bytes(), 2 * MB2);
  /* Retaining through the address gives the handle back. */
  call_mem_retain_req_t ret = {.ptr = va + 4096};
  call_mem_retain_rep_t reta;
  hc_call_ok(t, CALL_OP_MEM_RETAIN, &ret, &reta);
  assert_int_equal(reta.handle, h1);
  assert_int_equal(hc_call(t, CALL_OP_MEM_RELEASE, &rel), CUDA_SUCCESS);

  /* Partial unmaps and freeing a reservation with mappings are refused. */
  assert_int_equal(unmap(t, va, MB2 / 2), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(unmap(t, va + 4096, MB2), CUDA_ERROR_INVALID_VALUE);
  call_mem_unreserve_req_t ur = {.ptr = va, .size = 2 * MB2};
  assert_int_equal(hc_call(t, CALL_OP_MEM_UNRESERVE, &ur), CUDA_ERROR_INVALID_VALUE);
  /* Both mappings at once. */
  assert_int_equal(unmap(t, va, 2 * MB2), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), MB2); /* h1 went with its mapping */
  assert_false(hostd__owns(t, va + MB2 + 64, 4));
  assert_int_equal(hc_call(t, CALL_OP_HTOD, &w), CUDA_ERROR_INVALID_VALUE);
  rel.handle = h2;
  assert_int_equal(hc_call(t, CALL_OP_MEM_RELEASE, &rel), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_MEM_UNRESERVE, &ur), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), 0);
  hostd__tenant_free(t);
}

static void mappings_must_fit_and_not_overlap(void **state) {
  hostd_tenant_t *t = hc_tenant(3, &reply);
  uint64_t h = create(t, 2 * MB2), va = reserve(t, 2 * MB2);
  (void)state;
  assert_int_equal(map(t, va, 4 * MB2, 0, h), CUDA_ERROR_INVALID_VALUE);     /* past the handle */
  assert_int_equal(map(t, va, MB2, 2 * MB2, h), CUDA_ERROR_INVALID_VALUE);   /* offset past it */
  assert_int_equal(map(t, va + MB2, 2 * MB2, 0, h), CUDA_ERROR_INVALID_VALUE); /* past the VA */
  assert_int_equal(map(t, va, MB2, 0, h), CUDA_SUCCESS);
  assert_int_equal(map(t, va, MB2, MB2, h), CUDA_ERROR_INVALID_VALUE); /* already mapped */
  assert_int_equal(map(t, va + MB2, MB2, MB2, h), CUDA_SUCCESS);
  assert_int_equal(map(t, va + MB2, MB2, 0, h + 1), CUDA_ERROR_INVALID_HANDLE);
  call_mem_map_req_t q = {.ptr = va, .size = MB2, .handle = h, .flags = 1};
  assert_int_equal(hc_call(t, CALL_OP_MEM_MAP, &q), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(t);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* Nothing of one tenant can be named by another. */
static void another_tenants_objects_are_refused(void **state) {
  hostd_tenant_t *a = hc_tenant(4, &reply), *b = hc_tenant(5, &reply);
  uint64_t ha = create(a, MB2), va = reserve(a, MB2), hb = create(b, MB2), vb = reserve(b, MB2);
  (void)state;
  assert_int_equal(map(b, va, MB2, 0, hb), CUDA_ERROR_INVALID_VALUE); /* a's address range */
  assert_int_equal(map(b, vb, MB2, 0, ha), CUDA_ERROR_INVALID_HANDLE); /* a's handle */
  assert_int_equal(map(a, va, MB2, 0, ha), CUDA_SUCCESS);
  call_mem_release_req_t rel = {.handle = ha};
  assert_int_equal(hc_call(b, CALL_OP_MEM_RELEASE, &rel), CUDA_ERROR_INVALID_VALUE);
  call_mem_retain_req_t ret = {.ptr = va};
  assert_int_equal(hc_call(b, CALL_OP_MEM_RETAIN, &ret), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(unmap(b, va, MB2), CUDA_ERROR_INVALID_VALUE);
  call_mem_unreserve_req_t ur = {.ptr = va, .size = MB2};
  assert_int_equal(hc_call(b, CALL_OP_MEM_UNRESERVE, &ur), CUDA_ERROR_INVALID_VALUE);
  call_mem_set_access_req_t acc = {.ptr = va, .size = MB2, .flags = 3};
  assert_int_equal(hc_call(b, CALL_OP_MEM_SET_ACCESS, &acc), CUDA_ERROR_INVALID_VALUE);
  uint32_t word = 1;
  call_htod_req_t w = {.dst = va, .bytes = {(const uint8_t *)&word, 4}};
  assert_int_equal(hc_call(b, CALL_OP_HTOD, &w), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hc_call(a, CALL_OP_HTOD, &w), CUDA_SUCCESS);
  hostd__tenant_free(a);
  hostd__tenant_free(b);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* Created memory counts against the quota until it is really freed. */
static void created_memory_counts_against_the_quota(void **state) {
  hostd_quota_t quota;
  hostd_tenant_t *t = hc_tenant(6, &reply);
  (void)state;
  memset(&quota, 0, sizeof(quota));
  quota.limit[HOSTD_QUOTA_MEM] = 2 * MB2;
  hostd__quota_self = &quota;
  uint64_t h = create(t, 2 * MB2), va = reserve(t, 2 * MB2);
  call_mem_create_req_t more = {.size = MB2};
  assert_int_equal(hc_call(t, CALL_OP_MEM_CREATE, &more), CUDA_ERROR_OUT_OF_MEMORY);
  assert_int_equal(map(t, va, 2 * MB2, 0, h), CUDA_SUCCESS);
  call_mem_release_req_t rel = {.handle = h};
  assert_int_equal(hc_call(t, CALL_OP_MEM_RELEASE, &rel), CUDA_SUCCESS);
  assert_int_equal(hostd__quota_used(&quota, HOSTD_QUOTA_MEM), 2 * MB2); /* still mapped */
  assert_int_equal(unmap(t, va, 2 * MB2), CUDA_SUCCESS);
  assert_int_equal(hostd__quota_used(&quota, HOSTD_QUOTA_MEM), 0);
  call_mem_alloc_async_req_t aa = {.size = 3 * MB2};
  assert_int_equal(hc_call(t, CALL_OP_MEM_ALLOC_ASYNC, &aa), CUDA_ERROR_OUT_OF_MEMORY);
  aa.size = MB2;
  assert_int_equal(hc_call(t, CALL_OP_MEM_ALLOC_ASYNC, &aa), CUDA_SUCCESS);
  assert_int_equal(hostd__quota_used(&quota, HOSTD_QUOTA_MEM), MB2);
  hostd__quota_self = NULL;
  hostd__tenant_free(t);
}

/* A tenant that goes with mappings, handles, reservations, stream-ordered
 * allocations and pools left frees them all. */
static void closing_a_tenant_frees_everything(void **state) {
  hostd_tenant_t *t = hc_tenant(7, &reply);
  uint64_t h = create(t, 2 * MB2), va = reserve(t, 4 * MB2);
  (void)state;
  (void)create(t, MB2); /* never mapped */
  assert_int_equal(map(t, va, 2 * MB2, 0, h), CUDA_SUCCESS);
  call_mem_retain_req_t ret = {.ptr = va};
  assert_int_equal(hc_call(t, CALL_OP_MEM_RETAIN, &ret), CUDA_SUCCESS);
  call_pool_new_req_t pn = {0};
  call_pool_new_rep_t pa;
  hc_call_ok(t, CALL_OP_POOL_NEW, &pn, &pa);
  call_mem_alloc_async_req_t aa = {.size = 4096, .pool = pa.pool};
  assert_int_equal(hc_call(t, CALL_OP_MEM_ALLOC_ASYNC, &aa), CUDA_SUCCESS);
  aa.pool = 0;
  assert_int_equal(hc_call(t, CALL_OP_MEM_ALLOC_ASYNC, &aa), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), 3 * MB2 + 2 * 4096);
  hostd__tenant_free(t);
  assert_int_equal(hostd_record_live_bytes(), 0);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_STALE), 0);
}

static void stream_ordered_allocation_and_pools(void **state) {
  hostd_tenant_t *a = hc_tenant(8, &reply), *b = hc_tenant(9, &reply);
  call_pool_current_req_t cur = {.which = 0};
  call_pool_current_rep_t ca, cb;
  call_mem_alloc_async_rep_t p;
  (void)state;
  /* Each tenant's "default pool" is its own. */
  hc_call_ok(a, CALL_OP_POOL_CURRENT, &cur, &ca);
  hc_call_ok(b, CALL_OP_POOL_CURRENT, &cur, &cb);
  assert_true(ca.pool != 0 && cb.pool != 0 && ca.pool != cb.pool);
  call_pool_del_req_t del = {.pool = ca.pool};
  assert_int_equal(hc_call(a, CALL_OP_POOL_DEL, &del), CUDA_ERROR_INVALID_VALUE);

  /* Allocation from another tenant's pool, or with its attributes: refused. */
  call_mem_alloc_async_req_t aa = {.size = 256, .pool = cb.pool};
  assert_int_equal(hc_call(a, CALL_OP_MEM_ALLOC_ASYNC, &aa), CUDA_ERROR_INVALID_VALUE);
  call_pool_attr_req_t at = {.pool = cb.pool, .attr = CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, .set = 1,
                             .value = 1 << 20};
  assert_int_equal(hc_call(a, CALL_OP_POOL_ATTR, &at), CUDA_ERROR_INVALID_VALUE);
  call_pool_trim_req_t tr = {.pool = cb.pool};
  assert_int_equal(hc_call(a, CALL_OP_POOL_TRIM, &tr), CUDA_ERROR_INVALID_VALUE);
  at.pool = ca.pool;
  assert_int_equal(hc_call(a, CALL_OP_POOL_ATTR, &at), CUDA_SUCCESS);
  at.set = 0;
  at.value = 0;
  assert_int_equal(hc_call(a, CALL_OP_POOL_ATTR, &at), CUDA_SUCCESS);
  call_pool_attr_rep_t av;
  assert_int_equal(hc_reply(&reply, CALL_OP_POOL_ATTR, &av), 0);
  assert_int_equal(av.value, 1 << 20);

  /* Allocated, written, read, freed in stream order; then refused. */
  aa.pool = 0;
  hc_call_ok(a, CALL_OP_MEM_ALLOC_ASYNC, &aa, &p);
  uint32_t word = 0x5a5a1234;
  call_htod_req_t w = {.dst = p.ptr + 16, .bytes = {(const uint8_t *)&word, 4}};
  assert_int_equal(hc_call(a, CALL_OP_HTOD, &w), CUDA_SUCCESS);
  assert_int_equal(hc_call(b, CALL_OP_HTOD, &w), CUDA_ERROR_INVALID_VALUE);
  call_mem_free_async_req_t fa = {.ptr = p.ptr};
  assert_int_equal(hc_call(b, CALL_OP_MEM_FREE_ASYNC, &fa), CUDA_ERROR_INVALID_VALUE);
  at.attr = CU_MEMPOOL_ATTR_USED_MEM_CURRENT;
  hc_call_ok(a, CALL_OP_POOL_ATTR, &at, &av);
  assert_int_equal(av.value, 256);
  assert_int_equal(hc_call(a, CALL_OP_MEM_FREE_ASYNC, &fa), CUDA_SUCCESS);
  assert_int_equal(hc_call(a, CALL_OP_MEM_FREE_ASYNC, &fa), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hc_call(a, CALL_OP_HTOD, &w), CUDA_ERROR_INVALID_VALUE);

  /* A created pool becomes the current one; destroying it goes back. */
  call_pool_new_req_t pn = {0};
  call_pool_new_rep_t pa;
  hc_call_ok(a, CALL_OP_POOL_NEW, &pn, &pa);
  call_pool_current_req_t set = {.which = 1, .set = 1, .pool = pa.pool};
  assert_int_equal(hc_call(a, CALL_OP_POOL_CURRENT, &set), CUDA_SUCCESS);
  set.pool = cb.pool;
  assert_int_equal(hc_call(a, CALL_OP_POOL_CURRENT, &set), CUDA_ERROR_INVALID_VALUE);
  cur.which = 1;
  hc_call_ok(a, CALL_OP_POOL_CURRENT, &cur, &ca);
  assert_int_equal(ca.pool, pa.pool);
  del.pool = pa.pool;
  assert_int_equal(hc_call(b, CALL_OP_POOL_DEL, &del), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hc_call(a, CALL_OP_POOL_DEL, &del), CUDA_SUCCESS);
  hc_call_ok(a, CALL_OP_POOL_CURRENT, &cur, &ca);
  assert_true(ca.pool != pa.pool);

  /* cuMemFree takes a stream-ordered allocation too. */
  hc_call_ok(a, CALL_OP_MEM_ALLOC_ASYNC, &aa, &p);
  call_mem_free_req_t f = {.ptr = p.ptr};
  assert_int_equal(hc_call(a, CALL_OP_MEM_FREE, &f), CUDA_SUCCESS);
  hostd__tenant_free(a);
  hostd__tenant_free(b);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* A truncated request or one with bytes after its last field closes the tenant. */
static void malformed_requests_are_protocol_errors(void **state) {
  hostd_tenant_t *t = hc_tenant(10, &reply);
  static const uint32_t ops[] = {CALL_OP_MEM_CREATE, CALL_OP_MEM_MAP, CALL_OP_MEM_UNMAP,
                                 CALL_OP_MEM_ALLOC_ASYNC, CALL_OP_POOL_ATTR};
  (void)state;
  hc_assert_malformed(t, ops, sizeof(ops) / sizeof(ops[0]));
  hostd__tenant_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(granularity_is_the_devices),
      cmocka_unit_test(fabric_is_a_query_not_an_export),
      cmocka_unit_test(map_copy_unmap_release),
      cmocka_unit_test(mappings_must_fit_and_not_overlap),
      cmocka_unit_test(another_tenants_objects_are_refused),
      cmocka_unit_test(created_memory_counts_against_the_quota),
      cmocka_unit_test(closing_a_tenant_frees_everything),
      cmocka_unit_test(stream_ordered_allocation_and_pools),
      cmocka_unit_test(malformed_requests_are_protocol_errors),
  };
  return cmocka_run_group_tests(tests, hc_fixture_setup, hc_fixture_teardown);
}
