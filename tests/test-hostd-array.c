/* test-hostd-array.c: tallyd's CUDA arrays, copies with an array side,
 * texture and surface objects (hostd/exec-array.c) on the recording
 * device, driven with requests encoded by the call vocabulary.
 *
 * Round trips (host -> array -> device -> array -> host, 3-D boxes at
 * offsets), texture objects over an array, linear and pitched memory,
 * surface objects; ownership (another tenant's array, texture or surface,
 * or memory it does not own, is refused); everything freed when the tenant
 * goes; hostile requests (bad formats and flags, huge and zero sizes,
 * boxes past the array, byte counts that disagree, truncated requests)
 * refused without harm.  Never GPU coverage.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hostd/guard.h"
#include "hostd/tenant-int.h"
#include "tests/hostd-call-fixture.h"

/* A w x h x d array of float channels c (h, d 0: fewer dimensions). */
static uint32_t array_new(hostd_tenant_t *t, uint64_t w, uint64_t h, uint64_t d, uint32_t c,
                          uint32_t flags, uint64_t *out) {
  call_array_new_req_t q = {.width = w, .height = h, .depth = d, .format = CU_AD_FORMAT_FLOAT,
                            .channels = c, .flags = flags};
  call_array_new_rep_t a = {0};
  uint32_t r = hc_call(t, CALL_OP_ARRAY_NEW, &q);
  if (r == CUDA_SUCCESS) {
    assert_int_equal(hc_reply(&reply, CALL_OP_ARRAY_NEW, &a), 0);
    *out = a.array;
  }
  return r;
}

static uint64_t alloc(hostd_tenant_t *t, uint64_t size) {
  call_mem_alloc_req_t q = {.size = size};
  call_mem_alloc_rep_t a;
  hc_call_ok(t, CALL_OP_MEM_ALLOC, &q, &a);
  return a.ptr;
}

/* Host bytes (w x h x d packed) into array a at (x, y, z). */
static uint32_t to_array(hostd_tenant_t *t, uint64_t a, uint64_t x, uint64_t y, uint64_t z,
                         const void *p, uint64_t w, uint64_t h, uint64_t d) {
  call_array_copy_req_t q = {.skind = CALL_SIDE_HOST, .dkind = CALL_SIDE_ARRAY, .dst = a,
                             .dx = x, .dy = y, .dz = z, .width = w, .height = h, .depth = d,
                             .bytes = {p, w * h * d}};
  return hc_call(t, CALL_OP_ARRAY_COPY, &q);
}

/* Array a's box at (x, y, z) back to p (w x h x d packed). */
static uint32_t from_array(hostd_tenant_t *t, uint64_t a, uint64_t x, uint64_t y, uint64_t z,
                           void *p, uint64_t w, uint64_t h, uint64_t d) {
  call_array_copy_req_t q = {.skind = CALL_SIDE_ARRAY, .dkind = CALL_SIDE_HOST, .src = a,
                             .sx = x, .sy = y, .sz = z, .width = w, .height = h, .depth = d};
  call_array_copy_rep_t rep;
  uint32_t r = hc_call(t, CALL_OP_ARRAY_COPY, &q);
  if (r == CUDA_SUCCESS) {
    assert_int_equal(hc_reply(&reply, CALL_OP_ARRAY_COPY, &rep), 0);
    assert_int_equal(rep.bytes.len, w * h * d);
    memcpy(p, rep.bytes.p, rep.bytes.len);
  }
  return r;
}

static uint32_t tex_new(hostd_tenant_t *t, call_tex_new_req_t *q, uint64_t *out) {
  call_tex_new_rep_t a = {0};
  uint32_t r = hc_call(t, CALL_OP_TEX_NEW, q);
  if (r == CUDA_SUCCESS) {
    assert_int_equal(hc_reply(&reply, CALL_OP_TEX_NEW, &a), 0);
    *out = a.tex;
  }
  return r;
}

/* Host -> 3-D array -> linear memory (pitched) -> another array -> host. */
static void copies_round_trip(void **state) {
  hostd_tenant_t *t = hc_tenant(1, &reply);
  uint64_t a, b, dev;
  uint8_t in[16 * 3 * 2], out[sizeof(in)], whole[64 * 4 * 3];
  (void)state;
  for (size_t i = 0; i < sizeof(in); i++)
    in[i] = (uint8_t)(i * 7 + 1);
  assert_int_equal(array_new(t, 16, 4, 3, 1, 0, &a), CUDA_SUCCESS); /* rows of 64 bytes */
  assert_int_equal(array_new(t, 16, 4, 3, 1, 0, &b), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_bytes(), 2 * sizeof(whole));
  /* 16 bytes x 3 rows x 2 slices at byte 8, row 1, slice 1. */
  assert_int_equal(to_array(t, a, 8, 1, 1, in, 16, 3, 2), CUDA_SUCCESS);
  assert_int_equal(from_array(t, a, 0, 0, 0, whole, 64, 4, 3), CUDA_SUCCESS);
  for (size_t z = 0; z < 3; z++)
    for (size_t y = 0; y < 4; y++)
      for (size_t x = 0; x < 64; x++) {
        bool inside = z >= 1 && y >= 1 && x >= 8 && x < 24;
        uint8_t want = inside ? in[((z - 1) * 3 + (y - 1)) * 16 + (x - 8)] : 0;
        assert_int_equal(whole[(z * 4 + y) * 64 + x], want);
      }
  /* Array -> pitched linear memory (pitch 32, 4 rows a slice) -> array b. */
  dev = alloc(t, 32 * 4 * 2);
  call_array_copy_req_t q = {.skind = CALL_SIDE_ARRAY, .dkind = CALL_SIDE_DEVICE, .src = a,
                             .sx = 8, .sy = 1, .sz = 1, .dst = dev, .dpitch = 32, .dheight = 4,
                             .width = 16, .height = 3, .depth = 2};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &q), CUDA_SUCCESS);
  q = (call_array_copy_req_t){.skind = CALL_SIDE_DEVICE, .dkind = CALL_SIDE_ARRAY, .src = dev,
                              .spitch = 32, .sheight = 4, .dst = b, .width = 16, .height = 3,
                              .depth = 2};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &q), CUDA_SUCCESS);
  assert_int_equal(from_array(t, b, 0, 0, 0, out, 16, 3, 2), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof(in));
  /* Array to array, async (a post's form). */
  q = (call_array_copy_req_t){.skind = CALL_SIDE_ARRAY, .dkind = CALL_SIDE_ARRAY, .src = b,
                              .dst = a, .width = 64, .height = 4, .depth = 3, .async = 1};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &q), CUDA_SUCCESS);
  assert_int_equal(from_array(t, a, 0, 0, 0, out, 16, 3, 2), CUDA_SUCCESS);
  assert_memory_equal(in, out, sizeof(in));
  call_array_del_req_t d = {.array = a};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_DEL, &d), CUDA_SUCCESS);
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_DEL, &d), CUDA_ERROR_INVALID_HANDLE); /* gone */
  hostd__tenant_free(t);
  assert_int_equal(hostd_record_live_bytes(), 0);
  assert_int_equal(hostd_record_live_objects(), 0);
}

/* Textures over an array, linear and pitched memory; a surface. */
static void texture_and_surface_objects(void **state) {
  hostd_tenant_t *t = hc_tenant(2, &reply);
  uint64_t a, plain, dev, tx[3], sf;
  (void)state;
  assert_int_equal(array_new(t, 8, 8, 0, 4, CUDA_ARRAY3D_SURFACE_LDST, &a), CUDA_SUCCESS);
  assert_int_equal(array_new(t, 8, 0, 0, 1, 0, &plain), CUDA_SUCCESS);
  dev = alloc(t, 4096);
  call_tex_new_req_t q = {.rtype = CU_RESOURCE_TYPE_ARRAY, .res = a, .filter = 1,
                          .addr = {CU_TR_ADDRESS_MODE_CLAMP, CU_TR_ADDRESS_MODE_WRAP, 0},
                          .flags = CU_TRSF_NORMALIZED_COORDINATES};
  assert_int_equal(tex_new(t, &q, &tx[0]), CUDA_SUCCESS);
  q = (call_tex_new_req_t){.rtype = CU_RESOURCE_TYPE_LINEAR, .res = dev + 256,
                           .format = CU_AD_FORMAT_FLOAT, .channels = 1, .width = 1024};
  assert_int_equal(tex_new(t, &q, &tx[1]), CUDA_SUCCESS);
  q.width = 4096; /* past the allocation */
  assert_int_equal(tex_new(t, &q, &tx[2]), CUDA_ERROR_INVALID_VALUE);
  q = (call_tex_new_req_t){.rtype = CU_RESOURCE_TYPE_PITCH2D, .res = dev, .format =
                           CU_AD_FORMAT_UNSIGNED_INT8, .channels = 4, .width = 16, .height = 8,
                           .pitch = 64};
  assert_int_equal(tex_new(t, &q, &tx[2]), CUDA_SUCCESS);
  q.pitch = 32; /* narrower than a row */
  assert_int_equal(hc_call(t, CALL_OP_TEX_NEW, &q), CUDA_ERROR_INVALID_VALUE);
  q = (call_tex_new_req_t){.rtype = CU_RESOURCE_TYPE_MIPMAPPED_ARRAY, .res = a};
  assert_int_equal(hc_call(t, CALL_OP_TEX_NEW, &q), CUDA_ERROR_NOT_SUPPORTED);
  q = (call_tex_new_req_t){.rtype = CU_RESOURCE_TYPE_ARRAY, .res = a, .addr = {9, 0, 0}};
  assert_int_equal(hc_call(t, CALL_OP_TEX_NEW, &q), CUDA_ERROR_INVALID_VALUE);
  call_surf_new_req_t s = {.array = a};
  call_surf_new_rep_t sa;
  hc_call_ok(t, CALL_OP_SURF_NEW, &s, &sa);
  sf = sa.surf;
  s.array = plain; /* made without the surface flag: the device refuses */
  assert_int_equal(hc_call(t, CALL_OP_SURF_NEW, &s), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hostd_record_live_objects(), 6);
  /* A texture is no surface and the other way round. */
  call_tex_del_req_t td = {.tex = sf};
  call_surf_del_req_t sd = {.surf = tx[0]};
  assert_int_equal(hc_call(t, CALL_OP_TEX_DEL, &td), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hc_call(t, CALL_OP_SURF_DEL, &sd), CUDA_ERROR_INVALID_VALUE);
  td.tex = tx[1];
  assert_int_equal(hc_call(t, CALL_OP_TEX_DEL, &td), CUDA_SUCCESS);
  assert_int_equal(hostd_record_live_objects(), 5);
  hostd__tenant_free(t); /* the rest goes with the tenant */
  assert_int_equal(hostd_record_live_objects(), 0);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* Nothing of one tenant can be named by another. */
static void another_tenants_objects_are_refused(void **state) {
  hostd_tenant_t *a = hc_tenant(3, &reply), *b = hc_tenant(4, &reply);
  uint64_t arr, tex, mine, dev;
  uint8_t buf[64] = {0};
  (void)state;
  assert_int_equal(array_new(a, 16, 0, 0, 1, CUDA_ARRAY3D_SURFACE_LDST, &arr), CUDA_SUCCESS);
  call_tex_new_req_t q = {.rtype = CU_RESOURCE_TYPE_ARRAY, .res = arr};
  assert_int_equal(tex_new(a, &q, &tex), CUDA_SUCCESS);
  dev = alloc(a, 4096);
  assert_int_equal(array_new(b, 16, 0, 0, 1, 0, &mine), CUDA_SUCCESS);
  /* b names a's array, texture, memory. */
  assert_int_equal(to_array(b, arr, 0, 0, 0, buf, 64, 1, 1), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(from_array(b, arr, 0, 0, 0, buf, 64, 1, 1), CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(tex_new(b, &q, &tex), CUDA_ERROR_INVALID_HANDLE);
  call_surf_new_req_t s = {.array = arr};
  assert_int_equal(hc_call(b, CALL_OP_SURF_NEW, &s), CUDA_ERROR_INVALID_HANDLE);
  call_tex_del_req_t td = {.tex = tex};
  assert_int_equal(hc_call(b, CALL_OP_TEX_DEL, &td), CUDA_ERROR_INVALID_VALUE);
  call_array_del_req_t d = {.array = arr};
  assert_int_equal(hc_call(b, CALL_OP_ARRAY_DEL, &d), CUDA_ERROR_INVALID_HANDLE);
  call_array_copy_req_t c = {.skind = CALL_SIDE_DEVICE, .dkind = CALL_SIDE_ARRAY, .src = dev,
                             .spitch = 64, .sheight = 1, .dst = mine, .width = 64, .height = 1,
                             .depth = 1};
  assert_int_equal(hc_call(b, CALL_OP_ARRAY_COPY, &c), CUDA_ERROR_INVALID_VALUE);
  q = (call_tex_new_req_t){.rtype = CU_RESOURCE_TYPE_LINEAR, .res = dev,
                           .format = CU_AD_FORMAT_FLOAT, .channels = 1, .width = 64};
  assert_int_equal(hc_call(b, CALL_OP_TEX_NEW, &q), CUDA_ERROR_INVALID_VALUE);
  /* a's objects are untouched, and a still uses them. */
  assert_int_equal(to_array(a, arr, 0, 0, 0, buf, 64, 1, 1), CUDA_SUCCESS);
  hostd__tenant_free(b);
  assert_int_equal(hostd_record_live_objects(), 2);
  hostd__tenant_free(a);
  assert_int_equal(hostd_record_live_objects(), 0);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* Bad formats, flags, sizes and boxes: a CUDA error, nothing made. */
static void hostile_requests_are_refused(void **state) {
  hostd_tenant_t *t = hc_tenant(5, &reply);
  uint64_t a;
  uint8_t buf[256] = {0};
  (void)state;
  call_array_new_req_t q = {.width = 4, .format = 0x77, .channels = 1};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_NEW, &q), CUDA_ERROR_INVALID_VALUE); /* format */
  q.format = CU_AD_FORMAT_FLOAT, q.channels = 3;
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_NEW, &q), CUDA_ERROR_INVALID_VALUE); /* channels */
  q.channels = 1, q.flags = CUDA_ARRAY3D_SPARSE;
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_NEW, &q), CUDA_ERROR_NOT_SUPPORTED);
  q.flags = 0, q.width = 0;
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_NEW, &q), CUDA_ERROR_INVALID_VALUE); /* empty */
  q.width = UINT64_MAX, q.height = UINT64_MAX, q.depth = UINT64_MAX;
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_NEW, &q), CUDA_ERROR_INVALID_VALUE); /* huge */
  q.width = 1u << 20, q.height = 1u << 16, q.depth = 0; /* 256 GiB: over the device */
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_NEW, &q), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(hostd_record_live_objects(), 0);
  assert_int_equal(array_new(t, 16, 2, 0, 1, 0, &a), CUDA_SUCCESS); /* 64 x 2 bytes */
  /* Boxes past the array, zero and overflowing extents, lying byte counts. */
  assert_int_equal(to_array(t, a, 1, 0, 0, buf, 64, 1, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(to_array(t, a, 0, 2, 0, buf, 64, 1, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(to_array(t, a, 0, 0, 1, buf, 64, 1, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(to_array(t, a, 0, 0, 0, buf, 0, 1, 1), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(from_array(t, a, UINT64_MAX, 0, 0, buf, 2, 1, 1), CUDA_ERROR_INVALID_VALUE);
  call_array_copy_req_t c = {.skind = CALL_SIDE_HOST, .dkind = CALL_SIDE_ARRAY, .dst = a,
                             .width = 64, .height = 2, .depth = 1, .bytes = {buf, 64}};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &c), CUDA_ERROR_INVALID_VALUE); /* 64 != 128 */
  c = (call_array_copy_req_t){.skind = CALL_SIDE_ARRAY, .dkind = CALL_SIDE_HOST, .src = a,
                              .width = 1ull << 32, .height = 1ull << 32, .depth = 16};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &c), CUDA_ERROR_INVALID_VALUE); /* overflow */
  c = (call_array_copy_req_t){.skind = CALL_SIDE_DEVICE, .dkind = CALL_SIDE_DEVICE,
                              .width = 1, .height = 1, .depth = 1};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &c), CUDA_ERROR_INVALID_VALUE); /* no array */
  c = (call_array_copy_req_t){.skind = 7, .dkind = CALL_SIDE_ARRAY, .dst = a, .width = 1,
                              .height = 1, .depth = 1};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &c), CUDA_ERROR_INVALID_VALUE); /* kind */
  c = (call_array_copy_req_t){.skind = CALL_SIDE_DEVICE, .dkind = CALL_SIDE_ARRAY,
                              .src = UINT64_MAX - 8, .spitch = UINT64_MAX, .sheight = 2,
                              .dst = a, .width = 64, .height = 2, .depth = 1};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_COPY, &c), CUDA_ERROR_INVALID_VALUE); /* wraps */
  /* Truncated or overlong requests close the tenant (a protocol error). */
  static const uint32_t ops[] = {CALL_OP_ARRAY_NEW, CALL_OP_ARRAY_COPY, CALL_OP_TEX_NEW,
                                 CALL_OP_SURF_NEW};
  uint8_t zero[256] = {0};
  for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
    size_t fixed = call_msg_fixed(call_req_msg(ops[i]));
    const char *why = NULL;
    assert_int_equal(hostd__tenant_exec(t, ops[i], 0, zero, fixed - 1, &reply, &why), -EPROTO);
    assert_non_null(why);
  }
  hostd__tenant_free(t);
  assert_int_equal(hostd_record_live_objects(), 0);
  assert_int_equal(hostd_record_live_bytes(), 0);
}

/* Arrays count against the tenant's device-memory quota. */
static void arrays_count_against_the_quota(void **state) {
  hostd_tenant_t *t = hc_tenant(6, &reply);
  hostd_quota_t qs;
  uint64_t a, b;
  (void)state;
  memset(&qs, 0, sizeof(qs));
  qs.limit[HOSTD_QUOTA_MEM] = 8192;
  hostd__quota_self = &qs;
  assert_int_equal(array_new(t, 1024, 0, 0, 1, 0, &a), CUDA_SUCCESS); /* 4 KiB */
  assert_int_equal(array_new(t, 1024, 2, 0, 1, 0, &b), CUDA_ERROR_OUT_OF_MEMORY);
  call_array_del_req_t d = {.array = a};
  assert_int_equal(hc_call(t, CALL_OP_ARRAY_DEL, &d), CUDA_SUCCESS);
  assert_int_equal(array_new(t, 1024, 2, 0, 1, 0, &b), CUDA_SUCCESS); /* 8 KiB fits now */
  hostd__tenant_free(t);
  hostd__quota_self = NULL;
  assert_int_equal(hostd_record_live_bytes(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(copies_round_trip),
      cmocka_unit_test(texture_and_surface_objects),
      cmocka_unit_test(another_tenants_objects_are_refused),
      cmocka_unit_test(hostile_requests_are_refused),
      cmocka_unit_test(arrays_count_against_the_quota),
  };
  return cmocka_run_group_tests(tests, hc_fixture_setup, hc_fixture_teardown);
}
