/* test-hostd-tmap.c: tallyd's tensor-map requests (hostd/exec-tmap.c) on
 * the recording device, driven with requests encoded by the call
 * vocabulary.
 *
 * Every argument reaches the backend at its limits (rank 5, dims of 2^32,
 * strides just below 2^40, box 256, element strides 8, 16-bit corners,
 * channels 256, pixels 1024; the recording device's map is readable, its
 * layout at the top of hostd/gpu-record.c); a readdressed map keeps the
 * rest; hostile requests (kind, rank, enums out of range, entries past the
 * rank, truncated or overlong bytes) get a CUDA error or a protocol error
 * and the daemon stays up.  Never GPU coverage.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hostd/tenant-int.h"
#include "tests/hostd-call-fixture.h"

#define ADDR       0x7f0000001000ull /* 16-byte aligned; any address (D2) */
#define DIM_MAX    (1ull << 32)
#define STRIDE_MAX ((1ull << 40) - 16)

/* A tiled rank-5 request with every field at its largest valid value. */
static call_tensor_map_req_t tiled_at_limits(void) {
  call_tensor_map_req_t q;
  memset(&q, 0, sizeof(q));
  q.kind = CALL_TMAP_TILED;
  q.dtype = CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B;
  q.rank = 5;
  q.swizzle = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B;
  q.l2promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
  q.oobfill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA;
  q.addr = ADDR;
  for (int i = 0; i < 5; i++) {
    q.dims[i] = i == 0 ? DIM_MAX : 1;
    q.box[i] = 256;
    q.estrides[i] = 8;
  }
  for (int i = 0; i < 4; i++)
    q.strides[i] = STRIDE_MAX - 16 * (uint64_t)i;
  return q;
}

static void map_of(hostd_tenant_t *t, const call_tensor_map_req_t *q, uint8_t map[128]) {
  call_tensor_map_rep_t a;
  hc_call_ok(t, CALL_OP_TENSOR_MAP, q, &a);
  memcpy(map, a.map, 128);
}

static uint64_t u64_at(const uint8_t *m, size_t off) {
  uint64_t v;
  memcpy(&v, m + off, 8);
  return v;
}

static void tiled_fields_arrive_at_their_limits(void **state) {
  hostd_tenant_t *t = hc_tenant(1, &reply);
  call_tensor_map_req_t q = tiled_at_limits();
  uint8_t m[128];
  uint32_t d0;
  uint16_t box4;
  (void)state;
  hostd_record_reset();
  map_of(t, &q, m);
  assert_int_equal(hostd_record_count(HOSTD_RECORD_TMAP), 1);
  assert_memory_equal(m, "TMAP", 4);
  assert_int_equal(m[4], CALL_TMAP_TILED);
  assert_int_equal(m[5], CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B);
  assert_int_equal(m[6], 5);
  assert_int_equal(m[8], CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B);
  assert_int_equal(m[9], CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  assert_int_equal(m[10], CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  assert_int_equal(u64_at(m, 16), ADDR);
  memcpy(&d0, m + 24, 4);
  assert_int_equal((uint64_t)d0 + 1, DIM_MAX);
  assert_int_equal(m[44 + 4], 8);
  memcpy(&box4, m + 50 + 8, 2);
  assert_int_equal(box4, 256);
  for (int i = 0; i < 4; i++)
    assert_int_equal(u64_at(m, 72 + 8 * (size_t)i), STRIDE_MAX - 16 * (uint64_t)i);
  hostd__tenant_free(t);
}

static void im2col_fields_arrive_at_their_limits(void **state) {
  hostd_tenant_t *t = hc_tenant(2, &reply);
  call_tensor_map_req_t q = tiled_at_limits();
  uint8_t m[128];
  int16_t lo, up;
  uint16_t cp[2];
  (void)state;
  q.kind = CALL_TMAP_IM2COL;
  q.rank = 3;
  memset(q.box, 0, sizeof(q.box));
  memset(&q.dims[3], 0, 2 * sizeof(q.dims[0]));
  memset(&q.strides[2], 0, 2 * sizeof(q.strides[0]));
  memset(&q.estrides[3], 0, 2 * sizeof(q.estrides[0]));
  q.lower[0] = INT16_MIN;
  q.upper[0] = INT16_MAX;
  q.channels = 256;
  q.pixels = 1024;
  map_of(t, &q, m);
  assert_int_equal(m[4], CALL_TMAP_IM2COL);
  assert_int_equal(m[6], 3);
  memcpy(&lo, m + 60, 2);
  memcpy(&up, m + 66, 2);
  assert_int_equal(lo, INT16_MIN);
  assert_int_equal(up, INT16_MAX);
  memcpy(cp, m + 12, 4);
  assert_int_equal(cp[0], 256);
  assert_int_equal(cp[1], 1024);

  /* Wide: one corner pair, and its mode. */
  q.kind = CALL_TMAP_IM2COL_WIDE;
  q.mode = CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128;
  map_of(t, &q, m);
  assert_int_equal(m[4], CALL_TMAP_IM2COL_WIDE);
  assert_int_equal(m[11], CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128);
  memcpy(&lo, m + 60, 2);
  assert_int_equal(lo, INT16_MIN);
  q.lower[1] = 1; /* a second corner is not the wide kind's */
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(t);
}

static void replace_address_keeps_the_rest(void **state) {
  hostd_tenant_t *t = hc_tenant(3, &reply);
  call_tensor_map_req_t q = tiled_at_limits();
  call_tensor_map_addr_req_t r;
  call_tensor_map_addr_rep_t a;
  uint8_t m[128];
  (void)state;
  map_of(t, &q, m);
  memcpy(r.map, m, 128);
  r.addr = ADDR + 0x100000;
  hc_call_ok(t, CALL_OP_TENSOR_MAP_ADDR, &r, &a);
  assert_int_equal(u64_at(a.map, 16), ADDR + 0x100000);
  assert_memory_equal(a.map, m, 16);
  assert_memory_equal(a.map + 24, m + 24, 128 - 24);
  r.addr = ADDR + 8; /* misaligned: the backend's error comes back */
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP_ADDR, &r), CUDA_ERROR_INVALID_VALUE);
  memset(r.map, 0xab, 128); /* not a map: the backend refuses it */
  r.addr = ADDR;
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP_ADDR, &r), CUDA_ERROR_INVALID_VALUE);
  hostd__tenant_free(t);
}

/* Each bad field alone: refused before the backend sees it (its count stays). */
static void bad_requests_get_a_cuda_error(void **state) {
  hostd_tenant_t *t = hc_tenant(4, &reply);
  call_tensor_map_req_t good = tiled_at_limits(), q;
  (void)state;
#define REFUSED(stmt)                                                                              \
  do {                                                                                             \
    unsigned long before_ = hostd_record_count(HOSTD_RECORD_TMAP);                                 \
    q = good;                                                                                      \
    stmt;                                                                                          \
    assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_ERROR_INVALID_VALUE);                \
    assert_int_equal(hostd_record_count(HOSTD_RECORD_TMAP), before_);                              \
  } while (0)
  REFUSED(q.rank = 0);
  REFUSED(q.rank = 6);
  REFUSED(q.rank = UINT32_MAX);
  REFUSED(q.kind = CALL_TMAP_KINDS);
  REFUSED(q.kind = UINT32_MAX);
  REFUSED((q.kind = CALL_TMAP_IM2COL, q.rank = 2));
  REFUSED(q.dtype = CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B + 1);
  REFUSED(q.interleave = CU_TENSOR_MAP_INTERLEAVE_32B + 1);
  REFUSED(q.swizzle = CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B + 1);
  REFUSED(q.l2promo = CU_TENSOR_MAP_L2_PROMOTION_L2_256B + 1);
  REFUSED(q.oobfill = 2);
  REFUSED(q.mode = 1); /* tiled has no mode */
  REFUSED(q.channels = 1);
#undef REFUSED
  /* Past the rank, each array must be 0 (rank 4 with a fifth dim, ...). */
  q = good;
  q.rank = 4;
  q.dims[4] = 0, q.box[4] = 0, q.estrides[4] = 0, q.strides[3] = 0;
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_SUCCESS);
  q.strides[3] = 16;
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_ERROR_INVALID_VALUE);
  /* What only the driver checks comes back as its error. */
  q = good;
  q.addr = ADDR + 4;
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_ERROR_INVALID_VALUE);
  q = good;
  q.box[2] = 257;
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_ERROR_INVALID_VALUE);
  q = good;
  q.dims[1] = DIM_MAX + 1;
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_ERROR_INVALID_VALUE);
  /* The tenant still works. */
  q = good;
  assert_int_equal(hc_call(t, CALL_OP_TENSOR_MAP, &q), CUDA_SUCCESS);
  hostd__tenant_free(t);
}

/* Truncated and overlong bytes are protocol errors (the connection closes). */
static void malformed_requests_are_protocol_errors(void **state) {
  hostd_tenant_t *t = hc_tenant(5, &reply);
  static const uint32_t ops[] = {CALL_OP_TENSOR_MAP, CALL_OP_TENSOR_MAP_ADDR};
  uint8_t bytes[256];
  const char *why;
  (void)state;
  memset(bytes, 0, sizeof(bytes));
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    size_t fixed = call_msg_fixed(call_req_msg(ops[i]));
    assert_true(fixed + 1 <= sizeof(bytes));
    for (size_t n = 0; n < fixed; n += 7) {
      why = NULL;
      assert_int_equal(hostd__tenant_exec(t, ops[i], 0, bytes, n, &reply, &why), -EPROTO);
      assert_non_null(why);
    }
    why = NULL;
    assert_int_equal(hostd__tenant_exec(t, ops[i], 0, bytes, fixed + 1, &reply, &why), -EPROTO);
    assert_non_null(why);
    /* Posted instead of called: refused, not run. */
    assert_int_equal(hostd__tenant_exec(t, ops[i], CALL_ASYNC, bytes, fixed, &reply, &why),
                     -EPROTO);
  }
  hostd__tenant_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(tiled_fields_arrive_at_their_limits),
      cmocka_unit_test(im2col_fields_arrive_at_their_limits),
      cmocka_unit_test(replace_address_keeps_the_rest),
      cmocka_unit_test(bad_requests_get_a_cuda_error),
      cmocka_unit_test(malformed_requests_are_protocol_errors),
  };
  return cmocka_run_group_tests(tests, hc_fixture_setup, hc_fixture_teardown);
}
