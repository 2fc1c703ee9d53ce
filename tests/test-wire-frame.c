/* test-wire-frame.c: frame headers, the message assembler, the argument
 * codec, content ids and the handshake bodies, checked against the tables
 * in wire/proto.h and PROTOCOL.md.
 *
 * The assembler tests build a byte stream holding every message kind (a
 * call, a batch of posts, a chunked message, a zstd-compressed chunk, a
 * heartbeat) and feed it whole, split at every byte boundary, and one byte at
 * a time: the deliveries must be identical.  Malformed streams must be
 * refused with -EPROTO or -EMSGSIZE, a reason, and no delivery.
 */
#include "wire/wire-int.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define ALL_KINDS 0xffffffffu

/* ------------------------------------------------------- delivery record */

typedef struct rec {
  wire_buf_t log; /* kind u8 | id u64 | len u32 | bytes, per message */
  int count;
  int stop_after; /* deliver returns 1 after this many (0 = never) */
  /* placement (rx->place = place_in_pieces): three odd-sized pieces */
  uint8_t pbuf[16384];
  struct iovec piov[3];
  int placed;
} rec;

static int place_in_pieces(void *ctx, uint8_t kind, uint64_t id, size_t total,
                           const struct iovec **iov, int *cnt) {
  rec *r = ctx;
  size_t a = total / 3 + 1, b = total / 5;
  (void)kind, (void)id;
  if (total > sizeof(r->pbuf) - 32)
    return 0;
  memset(r->pbuf, 0xee, sizeof(r->pbuf));
  /* Gaps between the pieces: bytes written outside them would show. */
  r->piov[0] = (struct iovec){r->pbuf, a};
  r->piov[1] = (struct iovec){r->pbuf + a + 8, b};
  r->piov[2] = (struct iovec){r->pbuf + a + b + 16, total - a - b + 5};
  *iov = r->piov;
  *cnt = 3;
  return 1;
}

static int record(void *ctx, const wire__msg *m) {
  rec *r = ctx;
  wire_buf_put_u8(&r->log, m->kind);
  wire_buf_put_u64(&r->log, m->id);
  wire_buf_put_u32(&r->log, (uint32_t)m->len);
  if (m->placed) {
    size_t a = r->piov[0].iov_len, b = r->piov[1].iov_len;
    assert_null(m->data);
    wire_buf_put_bytes(&r->log, r->pbuf, a);
    assert_int_equal(r->pbuf[a], 0xee);
    wire_buf_put_bytes(&r->log, r->pbuf + a + 8, b);
    assert_int_equal(r->pbuf[a + 8 + b], 0xee);
    wire_buf_put_bytes(&r->log, r->pbuf + a + b + 16, m->len - a - b);
    assert_int_equal(r->pbuf[a + b + 16 + (m->len - a - b)], 0xee);
    r->placed++;
  } else {
    wire_buf_put_bytes(&r->log, m->data, m->len);
  }
  r->count++;
  return r->stop_after && r->count % r->stop_after == 0 ? 1 : 0;
}

/* A stream with every message kind the assembler delivers. */
static void build_stream(wire_buf_t *b, bool zstd) {
  uint8_t payload[700], big[3000];
  struct iovec v = {payload, sizeof(payload)}, bv = {big, sizeof(big)};
  wire_buf_t batch;
  uint8_t hb[WIRE__HDR_LEN];
  wire__hdr h;
  size_t i;

  for (i = 0; i < sizeof(payload); i++)
    payload[i] = (uint8_t)(i * 3);
  memset(big, 0, sizeof(big)); /* compressible */
  big[7] = 9;
  wire__send_frames(1, WIRE__K_CALL, 42, &v, 1, sizeof(payload), WIRE__FRAME_MAX, NULL,
                    wire__emit_to_buf, b);
  /* A batch of three posts (lengths 0, 5, 700). */
  wire_buf_init(&batch);
  wire_buf_put_u32(&batch, 0);
  wire_buf_put_blob(&batch, "hello", 5);
  wire_buf_put_blob(&batch, payload, sizeof(payload));
  h = (wire__hdr){1, WIRE__K_BATCH, 0, (uint32_t)batch.len, 3, 0};
  wire__hdr_encode(hb, &h);
  wire_buf_put_bytes(b, hb, sizeof(hb));
  wire_buf_put_bytes(b, batch.data, batch.len);
  wire_buf_close(&batch);
  /* Chunked: 700 bytes in 256-byte chunks. */
  wire__send_frames(1, WIRE__K_POST, 0, &v, 1, sizeof(payload), 256, NULL, wire__emit_to_buf, b);
  /* Chunked with zstd (chunks of 8 KiB? no: 3000 in 1024-byte chunks are
   * below the zstd minimum, so use 4096-byte chunks of a 9000-byte body). */
  {
    uint8_t *z = calloc(1, 9000);
    struct iovec zv = {z, 9000};
    z[100] = 1;
    wire__zstate zs = {0};
    wire__send_frames(1, WIRE__K_REPLY, 7, &zv, 1, 9000, 4096, zstd ? &zs : NULL, wire__emit_to_buf,
                      b);
    free(z);
  }
  wire__send_frames(1, WIRE__K_HEARTBEAT, 0, NULL, 0, 0, WIRE__FRAME_MAX, NULL, wire__emit_to_buf,
                    b);
  wire__send_frames(1, WIRE__K_POST, 0, &bv, 1, sizeof(big), WIRE__FRAME_MAX, NULL,
                    wire__emit_to_buf, b);
}

static void rx_setup(wire__rx *rx, rec *r) {
  memset(r, 0, sizeof(*r));
  wire_buf_init(&r->log);
  wire__rx_init(rx, 1 << 20, ALL_KINDS, record, r);
  rx->zstd_ok = true;
}

static void frame_header_matches_the_table(void **state) {
  wire__hdr h = {.version = 1,
                 .kind = WIRE__K_CALL,
                 .flags = WIRE__F_MORE,
                 .len = 0x01020304,
                 .aux = 0x0a0b0c0d,
                 .id = 0x1122334455667788ull};
  uint8_t b[WIRE__HDR_LEN];
  const uint8_t want[WIRE__HDR_LEN] = {'T',  'A',  'L',  'Y',  1,    4,    1,    0,
                                       0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b, 0x0a,
                                       0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11};
  wire__hdr d;
  char why[128];

  (void)state;
  wire__hdr_encode(b, &h);
  assert_memory_equal(b, want, sizeof(want));
  h.len = 100;
  wire__hdr_encode(b, &h);
  assert_int_equal(wire__hdr_decode(b, 1, &d, why, sizeof(why)), 0);
  assert_int_equal(d.kind, h.kind);
  assert_int_equal(d.flags, h.flags);
  assert_int_equal(d.len, 100);
  assert_int_equal(d.aux, h.aux);
  assert_true(d.id == h.id);
}

static void stream_delivers_every_kind(void **state) {
  wire_buf_t s;
  wire__rx rx;
  rec r;
  size_t used;

  (void)state;
  wire_buf_init(&s);
  build_stream(&s, true);
  rx_setup(&rx, &r);
  assert_int_equal(wire__rx_feed(&rx, s.data, s.len, &used), 0);
  assert_int_equal(used, s.len);
  /* call, 3 posts, chunked post, zstd reply, heartbeat, post */
  assert_int_equal(r.count, 8);
  {
    /* The stream really carries a compressed chunk: it is shorter than the
     * same stream built without zstd. */
    wire_buf_t plain;
    wire_buf_init(&plain);
    build_stream(&plain, false);
    assert_true(s.len < plain.len);
    wire_buf_close(&plain);
  }
  wire__rx_close(&rx);
  wire_buf_close(&r.log);
  wire_buf_close(&s);
}

/* The test stream and what one whole feed of it delivers (the reference). */
static void build_reference(wire_buf_t *s, rec *whole) {
  wire__rx rx;
  size_t used;

  wire_buf_init(s);
  build_stream(s, true);
  rx_setup(&rx, whole);
  assert_int_equal(wire__rx_feed(&rx, s->data, s->len, &used), 0);
  wire__rx_close(&rx);
}

static void stream_split_at_every_byte_delivers_the_same(void **state) {
  wire_buf_t s;
  wire__rx rx;
  rec whole, r;
  size_t used, cut, i;

  (void)state;
  build_reference(&s, &whole);
  for (cut = 0; cut <= s.len; cut++) {
    rx_setup(&rx, &r);
    assert_int_equal(wire__rx_feed(&rx, s.data, cut, &used), 0);
    assert_int_equal(used, cut);
    assert_int_equal(wire__rx_feed(&rx, s.data + cut, s.len - cut, &used), 0);
    assert_int_equal(r.log.len, whole.log.len);
    assert_memory_equal(r.log.data, whole.log.data, whole.log.len);
    wire__rx_close(&rx);
    wire_buf_close(&r.log);
  }
  /* One byte at a time (partial reads of 1). */
  rx_setup(&rx, &r);
  for (i = 0; i < s.len; i++)
    assert_int_equal(wire__rx_feed(&rx, s.data + i, 1, &used), 0);
  assert_memory_equal(r.log.data, whole.log.data, whole.log.len);
  wire__rx_close(&rx);
  wire_buf_close(&r.log);
  wire_buf_close(&whole.log);
  wire_buf_close(&s);
}

/* Placement: multi-frame messages (plain and zstd chunks) copied straight
 * into the owner's pieces deliver the same bytes as joining, at every cut,
 * and write nothing outside the pieces. */
static void placed_chunks_deliver_the_same_bytes(void **state) {
  wire_buf_t s;
  wire__rx rx;
  rec whole, *r = calloc(1, sizeof(*r));
  size_t used, cut;

  (void)state;
  build_reference(&s, &whole);
  for (cut = 0; cut <= s.len; cut += 7) {
    rx_setup(&rx, r);
    rx.place = place_in_pieces;
    assert_int_equal(wire__rx_feed(&rx, s.data, cut, &used), 0);
    assert_int_equal(wire__rx_feed(&rx, s.data + cut, s.len - cut, &used), 0);
    assert_int_equal(r->placed, 2); /* the chunked POST and the zstd REPLY */
    assert_int_equal(r->log.len, whole.log.len);
    assert_memory_equal(r->log.data, whole.log.data, whole.log.len);
    wire__rx_close(&rx);
    wire_buf_close(&r->log);
  }
  wire_buf_close(&whole.log);
  wire_buf_close(&s);
  free(r);
}

static void pause_stops_after_message_and_resumes_inside_batch(void **state) {
  wire_buf_t s;
  wire__rx rx;
  rec whole, r;
  size_t used, off = 0;
  int rc, rounds = 0;

  (void)state;
  wire_buf_init(&s);
  build_stream(&s, true);
  rx_setup(&rx, &whole);
  wire__rx_feed(&rx, s.data, s.len, &used);
  wire__rx_close(&rx);
  rx_setup(&rx, &r);
  r.stop_after = 1; /* pause after every message, batch records included */
  do {
    rc = wire__rx_feed(&rx, s.data + off, s.len - off, &used);
    assert_true(rc == 0 || rc == 1);
    off += used;
    rounds++;
  } while (rc == 1 || off < s.len);
  assert_int_equal(r.count, whole.count);
  assert_memory_equal(r.log.data, whole.log.data, whole.log.len);
  assert_true(rounds >= whole.count);
  wire__rx_close(&rx);
  wire_buf_close(&r.log);
  wire_buf_close(&whole.log);
  wire_buf_close(&s);
}

/* Feeds bytes; expects the status, a reason, and no delivery. */
static void expect_refused(const uint8_t *p, size_t n, int want, const char *why_part, bool zstd) {
  wire__rx rx;
  rec r;
  size_t used;

  rx_setup(&rx, &r);
  rx.zstd_ok = zstd;
  rx.max_msg = 4096;
  assert_int_equal(wire__rx_feed(&rx, p, n, &used), want);
  assert_int_equal(r.count, 0);
  if (strstr(rx.why, why_part) == NULL)
    fail_msg("reason \"%s\" lacks \"%s\"", rx.why, why_part);
  wire__rx_close(&rx);
  wire_buf_close(&r.log);
}

static void hdr(uint8_t *b, uint8_t kind, uint16_t flags, uint32_t len, uint32_t aux) {
  wire__hdr h = {1, kind, flags, len, aux, 1};
  wire__hdr_encode(b, &h);
}

static void malformed_frames_are_refused_with_a_reason(void **state) {
  uint8_t b[256];

  (void)state;
  memset(b, 0, sizeof(b));
  memcpy(b, "GET / HTTP/1.1\r\n\r\n......", 24);
  expect_refused(b, 24, -EPROTO, "bad frame magic", false);
  hdr(b, 99, 0, 0, 0);
  expect_refused(b, 24, -EPROTO, "unknown frame kind 99", false);
  hdr(b, WIRE__K_CALL, 0x80, 0, 0);
  expect_refused(b, 24, -EPROTO, "unknown frame flags", false);
  hdr(b, WIRE__K_CALL, 0, WIRE__FRAME_MAX + 1, 0);
  expect_refused(b, 24, -EMSGSIZE, "exceeds", false);
  b[4] = 2; /* version */
  expect_refused(b, 24, -EPROTO, "frame version 2, expected 1", false);
  hdr(b, WIRE__K_CALL, WIRE__F_MORE, 10, 1 << 20); /* total above max_msg 4096 */
  expect_refused(b, 34, -EMSGSIZE, "exceeds the 4096-byte limit", false);
  hdr(b, WIRE__K_CALL, WIRE__F_ZSTD, 10, 0);
  expect_refused(b, 34, -EPROTO, "zstd frame without", false);
  hdr(b, WIRE__K_CALL, WIRE__F_ZSTD, 10, 0);
  memset(b + 24, 0x11, 10);
  expect_refused(b, 34, -EMSGSIZE, "zstd raw length", true);
  hdr(b, WIRE__K_CALL, WIRE__F_ZSTD, 10, 0);
  memset(b + 24, 0, 10);
  b[24] = 5;
  expect_refused(b, 34, -EPROTO, "does not inflate", true);
  hdr(b, WIRE__K_BATCH, 0, 8, 1); /* record says 100 bytes, 4 present */
  memset(b + 24, 0, 8);
  b[24] = 100;
  expect_refused(b, 32, -EPROTO, "batch record length", false);
  hdr(b, WIRE__K_BATCH, 0, 8, 0);
  expect_refused(b, 32, -EPROTO, "empty batch", false);
  hdr(b, WIRE__K_BATCH, 0, 8, 1); /* one empty record and 4 trailing bytes */
  memset(b + 24, 0, 8);
  expect_refused(b, 32, -EPROTO, "trailing bytes", false);
  hdr(b, WIRE__K_CALL, 0, 0, 5);
  expect_refused(b, 24, -EPROTO, "aux 5 on a single-frame", false);
  hdr(b, WIRE__K_CALL, WIRE__F_SHMDATA, 16, 0);
  expect_refused(b, 40, -EPROTO, "descriptor on a transport without one", false);
  /* Chunks: a message of 20 announced, 30 sent. */
  hdr(b, WIRE__K_CALL, WIRE__F_MORE, 10, 20);
  hdr(b + 34, WIRE__K_CALL, WIRE__F_MORE, 10, 20);
  hdr(b + 68, WIRE__K_CALL, 0, 10, 20);
  expect_refused(b, 102, -EPROTO, "overruns", false);
  /* Ended short: 20 announced, 10 + 5 sent. */
  hdr(b, WIRE__K_CALL, WIRE__F_MORE, 10, 20);
  hdr(b + 34, WIRE__K_CALL, 0, 5, 20);
  expect_refused(b, 63, -EPROTO, "ended after 15 of its 20", false);
  /* Continuation of another kind. */
  hdr(b, WIRE__K_CALL, WIRE__F_MORE, 10, 20);
  hdr(b + 34, WIRE__K_POST, 0, 10, 20);
  expect_refused(b, 68, -EPROTO, "inside a message", false);
}

/* Plays a hostile shm guest: while the first record of a BATCH is being
 * delivered, the second record's length (already validated) grows past the
 * frame, as a guest writing its ring at that moment could make it. */
typedef struct tamper {
  uint8_t *second_len; /* where the second record's u32 length lives */
  int delivered;
} tamper;

static int deliver_and_tamper(void *ctx, const wire__msg *m) {
  tamper *t = ctx;
  (void)m;
  if (t->delivered++ == 0)
    memset(t->second_len, 0xff, 4);
  return 0;
}

static void batch_length_changed_after_validation_is_refused(void **state) {
  uint8_t b[WIRE__HDR_LEN + 2 * (4 + 8)] = {0};
  tamper t = {.second_len = b + WIRE__HDR_LEN + 4 + 8};
  wire__rx rx;
  size_t used;

  (void)state;
  hdr(b, WIRE__K_BATCH, 0, 2 * (4 + 8), 2);
  b[WIRE__HDR_LEN] = 8;
  b[WIRE__HDR_LEN + 4 + 8] = 8;
  wire__rx_init(&rx, 1 << 20, ALL_KINDS, deliver_and_tamper, &t);
  rx.version = 1;
  assert_int_equal(wire__rx_feed(&rx, b, sizeof(b), &used), -EPROTO);
  assert_int_equal(t.delivered, 1);
  assert_non_null(strstr(rx.why, "changed while read"));
  wire__rx_close(&rx);
}

static void kind_not_allowed_in_direction_is_refused(void **state) {
  uint8_t b[24];
  wire__rx rx;
  rec r;
  size_t used;

  (void)state;
  rx_setup(&rx, &r);
  rx.kinds = 1u << WIRE__K_REPLY;
  hdr(b, WIRE__K_CALL, 0, 0, 0);
  assert_int_equal(wire__rx_feed(&rx, b, sizeof(b), &used), -EPROTO);
  assert_non_null(strstr(rx.why, "not allowed"));
  wire__rx_close(&rx);
  wire_buf_close(&r.log);
}

static void truncated_frame_delivers_nothing(void **state) {
  wire_buf_t s;
  wire__rx rx;
  rec r;
  size_t used;
  uint8_t p[100] = {0};
  struct iovec v = {p, sizeof(p)};

  (void)state;
  wire_buf_init(&s);
  wire__send_frames(1, WIRE__K_CALL, 3, &v, 1, sizeof(p), WIRE__FRAME_MAX, NULL, wire__emit_to_buf,
                    &s);
  rx_setup(&rx, &r);
  assert_int_equal(wire__rx_feed(&rx, s.data, s.len - 1, &used), 0);
  assert_int_equal(r.count, 0); /* the transport's EOF then closes the peer */
  assert_int_equal(wire__rx_feed(&rx, s.data + s.len - 1, 1, &used), 0);
  assert_int_equal(r.count, 1);
  wire__rx_close(&rx);
  wire_buf_close(&r.log);
  wire_buf_close(&s);
}

/* ------------------------------------------------------------------ codec */

static void buf_and_reader_round_trip_every_type(void **state) {
  wire_buf_t b;
  wire_rd_t r;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  int32_t i32;
  int64_t i64;
  double f;
  const void *p;
  const char *s;
  size_t n;
  uint8_t raw[3];

  (void)state;
  wire_buf_init(&b);
  wire_buf_put_u8(&b, 0xab);
  wire_buf_put_u16(&b, 0xbeef);
  wire_buf_put_u32(&b, 0xdeadbeef);
  wire_buf_put_u64(&b, 0x0123456789abcdefull);
  wire_buf_put_i32(&b, -5);
  wire_buf_put_i64(&b, -6);
  wire_buf_put_f64(&b, 2.5);
  wire_buf_put_blob(&b, "xyz", 3);
  wire_buf_put_str(&b, "tenant");
  wire_buf_put_bytes(&b, "abc", 3);
  assert_int_equal(wire_buf_status(&b), 0);
  /* Little-endian on the wire whatever the host. */
  assert_int_equal(b.data[1], 0xef);
  assert_int_equal(b.data[2], 0xbe);
  wire_rd_init(&r, b.data, b.len);
  wire_rd_get_u8(&r, &u8);
  wire_rd_get_u16(&r, &u16);
  wire_rd_get_u32(&r, &u32);
  wire_rd_get_u64(&r, &u64);
  wire_rd_get_i32(&r, &i32);
  wire_rd_get_i64(&r, &i64);
  wire_rd_get_f64(&r, &f);
  assert_int_equal(wire_rd_get_blob(&r, &p, &n), 0);
  assert_int_equal(n, 3);
  assert_memory_equal(p, "xyz", 3);
  assert_int_equal(wire_rd_get_str(&r, &s, &n, 64), 0);
  assert_int_equal(n, 6);
  assert_memory_equal(s, "tenant", 6);
  assert_int_equal(wire_rd_get_bytes(&r, raw, 3), 0);
  assert_int_equal(wire_rd_status(&r), 0);
  assert_int_equal(wire_rd_left(&r), 0);
  assert_int_equal(u8, 0xab);
  assert_int_equal(u16, 0xbeef);
  assert_int_equal(u32, 0xdeadbeef);
  assert_true(u64 == 0x0123456789abcdefull);
  assert_int_equal(i32, -5);
  assert_true(i64 == -6);
  assert_true(f == 2.5);
  wire_buf_close(&b);
}

static void reader_rejects_reads_past_the_end_and_stays_failed(void **state) {
  const uint8_t d[6] = {10, 0, 0, 0, 'a', 'b'};
  wire_rd_t r;
  const void *p;
  size_t n;
  uint32_t u;
  uint64_t v = 1;

  (void)state;
  wire_rd_init(&r, d, sizeof(d));
  assert_int_equal(wire_rd_get_blob(&r, &p, &n), -EPROTO); /* says 10, has 2 */
  assert_null(p);
  assert_int_equal(wire_rd_get_u32(&r, &u), -EPROTO); /* sticky */
  assert_int_equal(u, 0);
  assert_int_equal(wire_rd_left(&r), 0);
  wire_rd_init(&r, d, 3);
  assert_int_equal(wire_rd_get_u64(&r, &v), -EPROTO);
  assert_true(v == 0);
  /* Strings: embedded NUL and over-long are refused. */
  {
    const uint8_t z[7] = {3, 0, 0, 0, 'a', 0, 'b'};
    const char *s;
    wire_rd_init(&r, z, sizeof(z));
    assert_int_equal(wire_rd_get_str(&r, &s, &n, 64), -EPROTO);
    wire_rd_init(&r, z, sizeof(z));
    assert_int_equal(wire_rd_get_str(&r, &s, &n, 2), -EPROTO);
  }
}

static void content_id_is_xxh3_64(void **state) {
  (void)state;
  /* XXH3-64 of the empty input, seed 0 (xxHash reference value). */
  assert_true(wire_content_id("", 0) == 0x2D06800538D394C2ull);
  assert_true(wire_content_id("a", 1) != wire_content_id("b", 1));
}

/* ---------------------------------------------------------------- handshake */

static void hello_round_trips_and_checks(void **state) {
  wire__hello h = {.vmin = 1, .vmax = 1, .prio = 1, .caps = WIRE_CAP_ZSTD}, d;
  wire_buf_t b;
  char why[256];
  uint16_t v = 0;

  (void)state;
  strcpy(h.tenant, "bert");
  strcpy(h.token, "s3cret");
  wire_buf_init(&b);
  wire__hello_encode(&b, &h);
  assert_int_equal(wire__hello_decode(b.data, b.len, &d, why, sizeof(why)), 0);
  assert_string_equal(d.tenant, "bert");
  assert_string_equal(d.token, "s3cret");
  assert_int_equal(d.prio, 1);
  assert_int_equal(wire__hello_check(&d, "s3cret", true, &v, why, sizeof(why)), 0);
  assert_int_equal(v, WIRE_VERSION);
  /* Token mismatch names what is expected. */
  assert_int_equal(wire__hello_check(&d, "other", true, &v, why, sizeof(why)), WIRE_ETOKEN);
  assert_non_null(strstr(why, "token refused"));
  d.token[0] = 0;
  assert_int_equal(wire__hello_check(&d, "other", true, &v, why, sizeof(why)), WIRE_ETOKEN);
  assert_non_null(strstr(why, "token missing"));
  /* Local transports skip the token. */
  assert_int_equal(wire__hello_check(&d, "other", false, &v, why, sizeof(why)), 0);
  /* Version mismatch names both ranges. */
  d.vmin = 7;
  d.vmax = 9;
  assert_int_equal(wire__hello_check(&d, NULL, false, &v, why, sizeof(why)), WIRE_EVERSION);
  assert_non_null(strstr(why, "daemon speaks versions 1..1, tenant offered 7..9"));
  /* Every truncation of a valid HELLO is refused. */
  {
    size_t n;
    for (n = 0; n < b.len; n++)
      assert_int_equal(wire__hello_decode(b.data, n, &d, why, sizeof(why)), -EPROTO);
  }
  wire_buf_close(&b);
}

static void welcome_and_status_round_trip(void **state) {
  wire__welcome w = {1, WIRE_CAP_ZSTD, 500, 5000, 1 << 30, 1 << 20, 64 << 20}, d;
  wire_buf_t b;
  char why[64];
  int32_t st;

  (void)state;
  wire_buf_init(&b);
  wire__welcome_encode(&b, &w);
  assert_int_equal(b.len, WIRE__WELCOME_LEN);
  assert_int_equal(wire__welcome_decode(b.data, b.len, &d, why, sizeof(why)), 0);
  assert_true(d.max_msg_len == w.max_msg_len && d.data_bytes == w.data_bytes);
  b.data[0] = 9;
  assert_int_equal(wire__welcome_decode(b.data, b.len, &d, why, sizeof(why)), WIRE_EVERSION);
  wire_buf_reset(&b);
  wire__status_encode(&b, -EPERM, "go away");
  assert_int_equal(wire__status_decode(b.data, b.len, &st, why, sizeof(why)), 0);
  assert_int_equal(st, -EPERM);
  assert_string_equal(why, "go away");
  assert_int_equal(wire__status_decode(b.data, b.len - 1, &st, why, sizeof(why)), -EPROTO);
  wire_buf_close(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(frame_header_matches_the_table),
      cmocka_unit_test(stream_delivers_every_kind),
      cmocka_unit_test(stream_split_at_every_byte_delivers_the_same),
      cmocka_unit_test(placed_chunks_deliver_the_same_bytes),
      cmocka_unit_test(pause_stops_after_message_and_resumes_inside_batch),
      cmocka_unit_test(malformed_frames_are_refused_with_a_reason),
      cmocka_unit_test(kind_not_allowed_in_direction_is_refused),
      cmocka_unit_test(batch_length_changed_after_validation_is_refused),
      cmocka_unit_test(truncated_frame_delivers_nothing),
      cmocka_unit_test(buf_and_reader_round_trip_every_type),
      cmocka_unit_test(reader_rejects_reads_past_the_end_and_stays_failed),
      cmocka_unit_test(content_id_is_xxh3_64),
      cmocka_unit_test(hello_round_trips_and_checks),
      cmocka_unit_test(welcome_and_status_round_trip),
  };
  return cmocka_run_group_tests_name("wire-frame", tests, NULL, NULL);
}
