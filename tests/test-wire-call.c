/* test-wire-call.c: the call vocabulary (wire/call.def) round-trips.
 *
 * For every request, reply and record of the table, with every field at its
 * limits (all zero with empty tails; all ones, UINT64_MAX, the longest tails
 * the table allows; pseudo-random values and lengths): the encoder's bytes
 * decode into the same struct.  Every truncation of every encoding is
 * refused with a reason naming the message, except inside a trailing REST
 * run, where a shorter run is itself a valid message; a tail over its limit
 * is refused by the encoder and, written by hand, by the decoder; a byte
 * after the last field is refused.  The fields are walked with the same
 * X-macro table, so a new op is tested without touching this file.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "wire/call.h"

static uint8_t *pool; /* tail bytes: CALL_MAX_LEN of a pattern */
static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t next(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

enum { LOW, HIGH, RANDOM };

static uint64_t value(int mode) {
  return mode == LOW ? 0 : mode == HIGH ? UINT64_MAX : next();
}

/* Elements a tail gets: 0, its limit, or a random count up to 64. */
static uint32_t count(int mode, uint32_t max) {
  uint32_t lim = max < 64 ? max : 64;
  return mode == LOW ? 0 : mode == HIGH ? max : (uint32_t)(next() % (lim + 1));
}

#define FILL_U32(x, f, a, b, c) (x)->f = (uint32_t)value(mode);
#define FILL_I32(x, f, a, b, c) (x)->f = (int32_t)value(mode);
#define FILL_U64(x, f, a, b, c) (x)->f = value(mode);
#define FILL_F32(x, f, a, b, c) (x)->f = mode == LOW ? 0.0f : mode == HIGH ? 3.4e38f : 1.5f;
#define FILL_U32X(x, f, a, b, c)                                                                   \
  for (int k = 0; k < (a); k++)                                                                    \
    (x)->f[k] = (uint32_t)value(mode);
#define FILL_I32X(x, f, a, b, c)                                                                   \
  for (int k = 0; k < (a); k++)                                                                    \
    (x)->f[k] = (int32_t)value(mode);
#define FILL_U64X(x, f, a, b, c)                                                                   \
  for (int k = 0; k < (a); k++)                                                                    \
    (x)->f[k] = value(mode);
#define FILL_CHARS(x, f, a, b, c) memset((x)->f, mode == LOW ? 0 : 0x7f, a);
#define FILL_BYTES(x, f, a, b, c) memset((x)->f, mode == LOW ? 0 : 0xff, a);
#define FILL_PAD(x, f, a, b, c)   (x)->f = 0;
#define FILL_TAIL(x, f, a, b, c)                                                                   \
  (x)->a = count(mode, c);                                                                         \
  (x)->f.p = pool + (next() % 7);                                                                  \
  (x)->f.len = (size_t)(x)->a * (b);
#define FILL_REST(x, f, a, b, c)                                                                   \
  (x)->f.p = pool;                                                                                 \
  (x)->f.len = mode == LOW ? 0 : mode == HIGH ? (size_t)(a) : (size_t)(next() % 300);
#define FILL(x, K, f, a, b, c) FILL_##K(x, f, a, b, c)

#define SAME_SCALAR(x, y, f) assert_true((x)->f == (y)->f);
#define SAME_U32(x, y, f, a) SAME_SCALAR(x, y, f)
#define SAME_I32(x, y, f, a) SAME_SCALAR(x, y, f)
#define SAME_U64(x, y, f, a) SAME_SCALAR(x, y, f)
#define SAME_F32(x, y, f, a) SAME_SCALAR(x, y, f)
#define SAME_PAD(x, y, f, a) assert_int_equal((y)->f, 0);
#define SAME_ARR(x, y, f, a) assert_memory_equal((x)->f, (y)->f, sizeof((x)->f));
#define SAME_U32X            SAME_ARR
#define SAME_I32X            SAME_ARR
#define SAME_U64X            SAME_ARR
#define SAME_CHARS           SAME_ARR
#define SAME_BYTES           SAME_ARR
#define SAME_VIEW(x, y, f, a)                                                                      \
  assert_int_equal((x)->f.len, (y)->f.len);                                                        \
  if ((x)->f.len)                                                                                  \
    assert_memory_equal((x)->f.p, (y)->f.p, (x)->f.len);
#define SAME_TAIL               SAME_VIEW
#define SAME_REST               SAME_VIEW
#define SAME(xy, K, f, a, b, c) SAME_##K(&xy[0], &xy[1], f, a)

#define IS_REST(M, K, f, a, b, c) +IS_REST_##K
#define IS_REST_U32               0
#define IS_REST_I32               0
#define IS_REST_U64               0
#define IS_REST_F32               0
#define IS_REST_U32X              0
#define IS_REST_I32X              0
#define IS_REST_U64X              0
#define IS_REST_CHARS             0
#define IS_REST_BYTES             0
#define IS_REST_PAD               0
#define IS_REST_TAIL              0
#define IS_REST_REST              1

/* Encodes x (call_put), checks the decode, every truncation and a trailing
 * byte.  has_rest: truncations past the fixed part are valid. */
static void check_message(const call_msg_t *m, const void *x, void *y, size_t ysize, int has_rest,
                          wire_buf_t *bp) {
  wire_buf_t b;
  call_why_t why;
  size_t lim;

  wire_buf_init(&b);
  assert_int_equal(call_put(m, x, &b), 0);
  assert_true(b.len >= call_msg_fixed(m));
  memset(y, 0xa5, ysize);
  assert_int_equal(call_decode(m, b.data, b.len, y, NULL, &why), 0);
  /* Every shorter prefix: refused with a reason, or (inside a REST run) a
   * shorter valid message. */
  lim = has_rest ? call_msg_fixed(m) : b.len;
  for (size_t n = 0; n < lim; n++) {
    uint8_t *cut = malloc(n ? n : 1); /* exact size: ASan sees an over-read */
    assert_non_null(cut);
    memcpy(cut, b.data, n);
    why.text[0] = 0;
    assert_int_equal(call_decode(m, cut, n, y, NULL, &why), -EPROTO);
    assert_non_null(strstr(why.text, "truncated at field "));
    free(cut);
  }
  assert_int_equal(wire_buf_put_u8(&b, 0), 0);
  if (!has_rest) {
    why.text[0] = 0;
    assert_int_equal(call_decode(m, b.data, b.len, y, NULL, &why), -EPROTO);
    assert_non_null(strstr(why.text, "after the last field"));
  }
  /* Decoded last, so y's views point into b, which the caller keeps. */
  b.len--;
  assert_int_equal(call_decode(m, b.data, b.len, y, NULL, &why), 0);
  *bp = b;
}

#define CALL_OP(NAME, name, number, modes, by)                                                     \
  static void roundtrip_##name(int mode) {                                                         \
    call_##name##_req_t q[2];                                                                      \
    call_##name##_rep_t r[2];                                                                      \
    wire_buf_t n;                                                                                  \
    (void)mode;                                                                                    \
    memset(q, 0, sizeof(q));                                                                       \
    memset(r, 0, sizeof(r));                                                                       \
    CALL_REQ_##NAME(FILL, &q[0]) CALL_REP_##NAME(FILL, &r[0]);                                     \
    check_message(call_req_msg(number), &q[0], &q[1], sizeof(q[1]), 0 CALL_REQ_##NAME(IS_REST, _), \
                  &n);                                                                             \
    CALL_REQ_##NAME(SAME, q);                                                                      \
    wire_buf_close(&n);                                                                            \
    check_message(call_rep_msg(number), &r[0], &r[1], sizeof(r[1]), 0 CALL_REP_##NAME(IS_REST, _), \
                  &n);                                                                             \
    CALL_REP_##NAME(SAME, r);                                                                      \
    wire_buf_close(&n);                                                                            \
  }
#include "wire/call.def"
#undef CALL_OP

#define CALL_REC(NAME, name)                                                                       \
  static void roundtrip_rec_##name(int mode) {                                                     \
    call_##name##_t x[2];                                                                          \
    wire_buf_t n;                                                                                  \
    (void)mode;                                                                                    \
    memset(x, 0, sizeof(x));                                                                       \
    CALL_REC_##NAME(FILL, &x[0]);                                                                  \
    check_message(&call_msg_##name, &x[0], &x[1], sizeof(x[1]), 0 CALL_REC_##NAME(IS_REST, _),     \
                  &n);                                                                             \
    CALL_REC_##NAME(SAME, x);                                                                      \
    wire_buf_close(&n);                                                                            \
  }
#include "wire/call.def"
#undef CALL_REC

static void every_op_round_trips_at_its_limits(void **state) {
  (void)state;
  for (int mode = LOW; mode <= RANDOM; mode++) {
#define CALL_OP(NAME, name, number, modes, by) roundtrip_##name(mode);
#include "wire/call.def"
#undef CALL_OP
  }
  for (int i = 0; i < 50; i++) {
#define CALL_OP(NAME, name, number, modes, by) roundtrip_##name(RANDOM);
#include "wire/call.def"
#undef CALL_OP
  }
}

static void every_record_round_trips_at_its_limits(void **state) {
  (void)state;
  for (int mode = LOW; mode <= RANDOM; mode++) {
#define CALL_REC(NAME, name) roundtrip_rec_##name(mode);
#include "wire/call.def"
#undef CALL_REC
  }
}

static void every_op_number_has_a_request_and_a_reply(void **state) {
  (void)state;
  assert_null(call_req_msg(0));
  assert_null(call_req_msg(CALL_OP_COUNT));
  assert_string_equal(call_op_name(CALL_OP_COUNT + 5), "?");
  for (uint32_t op = 1; op < CALL_OP_COUNT; op++) {
    assert_non_null(call_req_msg(op));
    assert_non_null(call_rep_msg(op));
    assert_true(call_msg_fixed(call_req_msg(op)) <= CALL_REQ_FIXED_MAX);
    assert_true(call_msg_ntails(call_req_msg(op)) <= CALL_TAILS_MAX);
    assert_true(call_op_modes(op) & (CALL_M_CALL | CALL_M_POST));
  }
  assert_int_equal(call_op_by(CALL_OP_HOSTFN_WAIT), CALL_BY_LOOP);
  assert_int_equal(call_op_by(CALL_OP_LAUNCH), CALL_BY_WORKER);
  assert_int_equal(call_op_modes(CALL_OP_LAUNCH), CALL_M_POST);
  assert_int_equal(call_op_modes(CALL_OP_HOSTFN), CALL_M_POST | CALL_M_PROMPT);
}

/* The LAUNCH bytes as both sides have spoken them (the layout the table
 * writes down): a fixed part of 56 bytes, then attributes, then arguments. */
static void launch_layout_is_the_one_on_the_wire(void **state) {
  call_launch_req_t q = {.func = 0x1122334455667788ull,
                         .grid = {1, 2, 3},
                         .block = {4, 5, 6},
                         .shmem = 7,
                         .nattr = 1,
                         .stream = 0x99,
                         .argbytes = 4};
  uint8_t fixed[CALL_LAUNCH_REQ_FIXED];
  call_view_t tails[CALL_TAILS_MAX];
  uint8_t attr[CALL_LAUNCH_ATTR_SIZE] = {0}, args[4] = {9, 9, 9, 9};
  (void)state;
  q.attrs = (call_view_t){attr, sizeof(attr)};
  q.args = (call_view_t){args, sizeof(args)};
  assert_int_equal(CALL_LAUNCH_REQ_FIXED, 56);
  assert_int_equal(call_launch_req_encode(&q, fixed, tails), 2);
  assert_int_equal(fixed[0], 0x88);
  assert_int_equal(fixed[8], 1);     /* grid x */
  assert_int_equal(fixed[20], 4);    /* block x */
  assert_int_equal(fixed[32], 7);    /* shared bytes */
  assert_int_equal(fixed[36], 1);    /* nattr */
  assert_int_equal(fixed[40], 0x99); /* stream */
  assert_int_equal(fixed[48], 4);    /* argbytes */
  assert_ptr_equal(tails[0].p, attr);
  assert_ptr_equal(tails[1].p, args);
}

static void tails_over_their_limit_are_refused(void **state) {
  call_launch_req_t q;
  call_module_global_req_t g;
  uint8_t fixed[CALL_REQ_FIXED_MAX], bytes[CALL_LAUNCH_REQ_FIXED];
  call_view_t tails[CALL_TAILS_MAX];
  call_why_t why;
  (void)state;
  memset(&q, 0, sizeof(q));
  q.nattr = CALL_LAUNCH_ATTRS_MAX + 1;
  q.attrs = (call_view_t){pool, (size_t)q.nattr * CALL_LAUNCH_ATTR_SIZE};
  assert_int_equal(call_launch_req_encode(&q, fixed, tails), -EINVAL);
  q.nattr = 1; /* length field and tail disagree */
  assert_int_equal(call_launch_req_encode(&q, fixed, tails), -EINVAL);
  /* Written by hand: a count past the limit, bytes present or not. */
  q.nattr = 0;
  q.attrs.len = 0;
  assert_int_equal(call_launch_req_encode(&q, bytes, tails), 2);
  bytes[36] = CALL_LAUNCH_ATTRS_MAX + 1;
  assert_int_equal(call_launch_req_decode(bytes, sizeof(bytes), &q, &why), -EPROTO);
  assert_string_equal(why.text, "LAUNCH request: over its limit: field attrs");
  memset(&g, 0, sizeof(g));
  g.name = (call_view_t){pool, CALL_FUNC_NAME_MAX};
  assert_int_equal(call_module_global_req_encode(&g, fixed, tails), -EINVAL);
}

static void headers_round_trip(void **state) {
  uint8_t h[CALL_HDR_LEN], r[CALL_REPLY_HDR_LEN];
  call_hdr_t hd;
  call_reply_hdr_t rd;
  (void)state;
  call_hdr_write(h, CALL_OP_LAUNCH, CALL_ASYNC, 0xfffffffeu);
  call_hdr_read(h, &hd);
  assert_int_equal(hd.op, CALL_OP_LAUNCH);
  assert_int_equal(hd.flags, CALL_ASYNC);
  assert_int_equal(hd.len, 0xfffffffeu);
  assert_int_equal(h[12] | h[13] | h[14] | h[15], 0);
  call_reply_hdr_write(r, 700, 12);
  call_reply_hdr_read(r, &rd);
  assert_int_equal(rd.result, 700);
  assert_int_equal(rd.len, 12);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_op_round_trips_at_its_limits),
      cmocka_unit_test(every_record_round_trips_at_its_limits),
      cmocka_unit_test(every_op_number_has_a_request_and_a_reply),
      cmocka_unit_test(launch_layout_is_the_one_on_the_wire),
      cmocka_unit_test(tails_over_their_limit_are_refused),
      cmocka_unit_test(headers_round_trip),
  };
  int rc;
  pool = malloc(CALL_MAX_LEN + 8);
  if (!pool)
    return 1;
  for (size_t i = 0; i < CALL_MAX_LEN + 8; i++)
    pool[i] = (uint8_t)(i * 131 + 7);
  rc = cmocka_run_group_tests(tests, NULL, NULL);
  free(pool);
  return rc;
}
