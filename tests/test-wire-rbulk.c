/* test-wire-rbulk.c: the device-free half of RDMA bulk (wire/rbulk.c).
 *
 * RDMA READ/WRITE cannot run on this machine (no RDMA device, no soft-RoCE
 * module), so everything that decides what bytes go where is a pure
 * function, tested here: the REGION announcement against its offset table
 * (proto.h), its rejection rules, the check that a REGION is a SEND of its
 * own, the writer's span placement in the peer's region, the reader's
 * descriptor bounds check, and whole messages through wire__rbulk_send with
 * the RDMA WRITE played by a memcpy into a landing buffer and the reader
 * being the real assembler (wire__rx) with the real resolver: one-span
 * messages are read in place, large ones joined, a full region falls back
 * to chunked SENDs without losing a byte.  Malformed announcements and
 * descriptors from a pseudo-random generator (fixed seed) never crash and
 * are accepted only when they satisfy every invariant.  Nothing sleeps:
 * the tests pass no wait hook, so a full region falls back at once.
 */
#include "wire/wire-int.h"

#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

/* Smallest region a peer may announce: 1 MiB keeps the tests small while
 * exercising one-span (<= 512 KiB) and quarter-region (256 KiB) pieces. */
#define D WIRE__RBULK_REGION_MIN

/* ----------------------------------------------------------- the channel */

/* One writer, one reader, the RDMA WRITE played by memcpy into land[]. */
typedef struct chan {
  uint8_t *land; /* the reader's landing region (D bytes) */
  wire__rbulk_tx tx;
  wire__rbulk_rx rx;
  uint64_t word; /* the writer's release word */
  bool hold;     /* reader does not release (a paused reader) */
  wire__rx asm_; /* the reader's assembler */
  int frames, desc_frames, writes;
  /* last message delivered */
  uint8_t kind;
  uint64_t id;
  uint8_t *got;
  size_t got_len;
  const uint8_t *got_ptr;
  int delivered;
} chan;

static int ch_write(void *arg, uint64_t pos, const struct iovec *iov, int cnt, size_t off,
                    size_t n) {
  chan *c = arg;
  /* The reader's resolver must never see a span outside the region: this
   * asserts the writer's side of the same rule. */
  assert_true(pos % D + n <= D);
  wire__iov_copy_out(c->land + pos % D, iov, cnt, off, n);
  c->writes++;
  return 0;
}

static uint64_t ch_released(void *arg) {
  return ((chan *)arg)->word;
}

static const wire__rbulk_ops ch_ops = {ch_write, ch_released, NULL};

static const uint8_t *ch_resolve(void *ctx, uint64_t pos, uint32_t len) {
  return wire__rbulk_resolve(&((chan *)ctx)->rx, pos, len);
}

static int ch_deliver(void *ctx, const wire__msg *m) {
  chan *c = ctx;
  c->kind = m->kind;
  c->id = m->id;
  c->got_ptr = m->data;
  free(c->got);
  c->got = malloc(m->len ? m->len : 1);
  assert_non_null(c->got);
  memcpy(c->got, m->data, m->len);
  c->got_len = m->len;
  c->delivered++;
  return 0;
}

/* The frame reaches the reader (one SEND); then the reader releases what
 * it consumed, as the transport does after feeding a receive buffer. */
static int ch_emit(void *arg, const struct iovec *iov, int cnt) {
  chan *c = arg;
  size_t n = wire__iov_len(iov, cnt), used;
  uint8_t *buf = malloc(n);
  wire__hdr h;
  char why[128];
  uint64_t v;
  int rc;

  assert_non_null(buf);
  wire__iov_copy_out(buf, iov, cnt, 0, n);
  assert_int_equal(wire__hdr_decode(buf, 1, &h, why, sizeof(why)), 0);
  assert_int_equal(WIRE__HDR_LEN + h.len, n); /* one frame per SEND */
  assert_true(n <= WIRE__TCP_CHUNK + WIRE__HDR_LEN);
  c->frames++;
  if (h.flags & WIRE__F_SHMDATA)
    c->desc_frames++;
  rc = wire__rx_feed(&c->asm_, buf, n, &used);
  free(buf);
  if (rc)
    return rc;
  if (!c->hold && wire__rbulk_release_due(&c->rx, &v))
    c->word = v;
  return 0;
}

static void ch_open(chan *c) {
  memset(c, 0, sizeof(*c));
  c->land = calloc(1, D);
  assert_non_null(c->land);
  c->tx.d = D;
  c->rx.base = c->land;
  c->rx.d = D;
  wire__rx_init(&c->asm_, (size_t)1 << 30, 1u << WIRE__K_CALL | 1u << WIRE__K_REPLY, ch_deliver, c);
  c->asm_.resolve = ch_resolve;
  c->asm_.resolve_ctx = c;
}

static void ch_close(chan *c) {
  wire__rx_close(&c->asm_);
  free(c->land);
  free(c->got);
}

static uint8_t *pattern(size_t n, unsigned seed) {
  uint8_t *p = malloc(n ? n : 1);
  size_t i;
  assert_non_null(p);
  for (i = 0; i < n; i++)
    p[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 12));
  return p;
}

static int ch_send(chan *c, uint64_t id, const uint8_t *p, size_t n) {
  struct iovec v = {(void *)p, n};
  return wire__rbulk_send(&c->tx, &ch_ops, 1, WIRE__K_CALL, id, &v, 1, n, NULL, ch_emit, c);
}

/* ------------------------------------------------------------------ REGION */

static void region_encodes_to_its_offset_table(void **state) {
  wire__rbulk_region r = {0x1122334455667788ull, 0x2000000, 0xA1B2C3D4, 0x0F0E0D0C,
                          0x7F00000000001000ull};
  wire__rbulk_region back;
  uint8_t b[WIRE__RBULK_REGION_LEN];
  char why[128];
  (void)state;
  wire__rbulk_region_encode(b, &r);
  /* proto.h: off 0 addr, 8 len, 16 rkey, 20 ctl_rkey, 24 ctl_addr, LE */
  assert_int_equal(b[0], 0x88);
  assert_int_equal(b[7], 0x11);
  assert_int_equal(b[8], 0x00);
  assert_int_equal(b[11], 0x02);
  assert_int_equal(b[16], 0xD4);
  assert_int_equal(b[19], 0xA1);
  assert_int_equal(b[20], 0x0C);
  assert_int_equal(b[24], 0x00);
  assert_int_equal(b[25], 0x10);
  assert_int_equal(b[31], 0x7F);
  assert_int_equal(wire__rbulk_region_decode(b, sizeof(b), &back, why, sizeof(why)), 0);
  assert_memory_equal(&back, &r, sizeof(r));
}

static void region_decode_rejects_wrong_length(void **state) {
  wire__rbulk_region r = {4096, D, 1, 2, 8192}, back;
  uint8_t b[WIRE__RBULK_REGION_LEN + 1];
  char why[128];
  (void)state;
  wire__rbulk_region_encode(b, &r);
  assert_int_equal(wire__rbulk_region_decode(b, 31, &back, why, sizeof(why)), -EPROTO);
  assert_int_equal(wire__rbulk_region_decode(b, 33, &back, why, sizeof(why)), -EPROTO);
  assert_non_null(strstr(why, "expected 32"));
}

static void region_decode_rejects_sizes_outside_limits(void **state) {
  uint64_t bad[] = {0, 4096, WIRE__RBULK_REGION_MIN - 1, WIRE__RBULK_REGION_MAX + 1, UINT64_MAX};
  wire__rbulk_region r = {4096, 0, 1, 2, 8192}, back;
  uint8_t b[WIRE__RBULK_REGION_LEN];
  char why[128];
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    r.len = bad[i];
    wire__rbulk_region_encode(b, &r);
    assert_int_equal(wire__rbulk_region_decode(b, sizeof(b), &back, why, sizeof(why)), -EPROTO);
    assert_non_null(strstr(why, "outside"));
  }
  r.len = WIRE__RBULK_REGION_MAX;
  wire__rbulk_region_encode(b, &r);
  assert_int_equal(wire__rbulk_region_decode(b, sizeof(b), &back, why, sizeof(why)), 0);
}

static void region_decode_rejects_wrapping_address_range(void **state) {
  wire__rbulk_region r = {UINT64_MAX - D + 2, D, 1, 2, 8192}, back;
  uint8_t b[WIRE__RBULK_REGION_LEN];
  char why[128];
  (void)state;
  wire__rbulk_region_encode(b, &r);
  assert_int_equal(wire__rbulk_region_decode(b, sizeof(b), &back, why, sizeof(why)), -EPROTO);
  assert_non_null(strstr(why, "wraps"));
}

static void region_decode_rejects_unaligned_release_word(void **state) {
  uint64_t bad[] = {8193, 8196, UINT64_MAX - 7, UINT64_MAX};
  wire__rbulk_region r = {4096, D, 1, 2, 0}, back;
  uint8_t b[WIRE__RBULK_REGION_LEN];
  char why[128];
  size_t i;
  (void)state;
  for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    r.ctl_addr = bad[i];
    wire__rbulk_region_encode(b, &r);
    assert_int_equal(wire__rbulk_region_decode(b, sizeof(b), &back, why, sizeof(why)), -EPROTO);
    assert_non_null(strstr(why, "release word"));
  }
}

static void region_frame(uint8_t *f) {
  wire__rbulk_region r = {4096, D, 1, 2, 8192};
  wire__rbulk_region_frame(f, 1, &r);
}

static void classify_passes_every_other_frame_to_the_assembler(void **state) {
  wire_buf_t b;
  wire__rbulk_region r;
  char why[128];
  (void)state;
  wire_buf_init(&b);
  assert_int_equal(wire__frame_put(&b, 1, WIRE__K_REPLY, 7, "abc", 3), 0);
  assert_int_equal(wire__rbulk_classify(b.data, b.len, 1, &r, why, sizeof(why)), 0);
  /* Short or foreign bytes are the assembler's to judge, too. */
  assert_int_equal(wire__rbulk_classify(b.data, 10, 1, &r, why, sizeof(why)), 0);
  assert_int_equal(wire__rbulk_classify((const uint8_t *)"nonsense bytes that are long", 28, 1, &r,
                                        why, sizeof(why)),
                   0);
  wire_buf_close(&b);
}

static void classify_decodes_a_region_frame(void **state) {
  uint8_t f[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN];
  wire__rbulk_region r;
  char why[128];
  (void)state;
  region_frame(f);
  assert_int_equal(wire__rbulk_classify(f, sizeof(f), 1, &r, why, sizeof(why)), 1);
  assert_int_equal(r.addr, 4096);
  assert_int_equal(r.len, D);
  assert_int_equal(r.ctl_addr, 8192);
}

static void classify_rejects_region_frame_sharing_its_send(void **state) {
  uint8_t f[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN + 24];
  wire__rbulk_region r;
  char why[128];
  (void)state;
  region_frame(f);
  memcpy(f + WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN, f, 24);
  assert_int_equal(wire__rbulk_classify(f, sizeof(f), 1, &r, why, sizeof(why)), -EPROTO);
  assert_non_null(strstr(why, "not alone"));
  /* Truncated: the header says 32 bytes, the SEND holds fewer. */
  assert_int_equal(wire__rbulk_classify(f, WIRE__HDR_LEN + 8, 1, &r, why, sizeof(why)), -EPROTO);
}

static void classify_rejects_region_frame_with_bad_header_fields(void **state) {
  uint8_t f[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN];
  wire__rbulk_region r;
  char why[128];
  int field;
  (void)state;
  for (field = 0; field < 5; field++) {
    region_frame(f);
    switch (field) {
    case 0:
      f[4] = 2;
      break; /* version other than chosen */
    case 1:
      f[6] = WIRE__F_MORE;
      break; /* flags */
    case 2:
      f[12] = 1;
      break; /* aux */
    case 3:
      f[16] = 9;
      break; /* id */
    default:
      f[8] = 31;
      break; /* len */
    }
    assert_int_equal(wire__rbulk_classify(f, sizeof(f), 1, &r, why, sizeof(why)), -EPROTO);
  }
}

/* ------------------------------------------------------------------ writer */

static void place_starts_over_at_zero_once_all_is_released(void **state) {
  wire__rbulk_tx tx = {D, 0};
  uint64_t pos;
  (void)state;
  assert_int_equal(wire__rbulk_place(&tx, 0, 1000, &pos), 0);
  assert_int_equal(pos, 0);
  assert_int_equal(wire__rbulk_place(&tx, 0, 1000, &pos), 0);
  assert_int_equal(pos, 1000);
  /* Reader released everything: next span at the next multiple of D. */
  assert_int_equal(wire__rbulk_place(&tx, 2000, 500, &pos), 0);
  assert_int_equal(pos, D);
  assert_int_equal(pos % D, 0);
}

static void place_never_wraps_a_span(void **state) {
  wire__rbulk_tx tx = {D, 0};
  uint64_t pos;
  (void)state;
  assert_int_equal(wire__rbulk_place(&tx, 0, D - 100, &pos), 0);
  /* 100 bytes left before the end: a 200-byte span starts over at 0, and
   * that is only allowed once the first span is released. */
  assert_int_equal(wire__rbulk_place(&tx, 0, 200, &pos), -EAGAIN);
  assert_int_equal(wire__rbulk_place(&tx, 50, 200, &pos), -EAGAIN);
  assert_int_equal(wire__rbulk_place(&tx, 300, 200, &pos), 0);
  assert_int_equal(pos, D);
  assert_true(pos % D + 200 <= D);
}

static void place_refuses_to_overwrite_unreleased_bytes(void **state) {
  wire__rbulk_tx tx = {D, 0};
  uint64_t pos, head;
  (void)state;
  assert_int_equal(wire__rbulk_place(&tx, 0, D / 2, &pos), 0);
  assert_int_equal(wire__rbulk_place(&tx, 0, D / 2, &pos), 0);
  head = tx.head;
  assert_int_equal(wire__rbulk_place(&tx, 0, 1, &pos), -EAGAIN);
  assert_int_equal(tx.head, head); /* a refusal moves nothing */
  assert_int_equal(wire__rbulk_place(&tx, D / 2, D / 2, &pos), 0);
  assert_int_equal(pos, D);
}

static void place_rejects_impossible_release_and_oversized_span(void **state) {
  wire__rbulk_tx tx = {D, 0}, off = {0, 0};
  uint64_t pos;
  (void)state;
  assert_int_equal(wire__rbulk_place(&tx, 0, 10, &pos), 0);
  assert_int_equal(wire__rbulk_place(&tx, 11, 10, &pos), -EPROTO);
  assert_int_equal(wire__rbulk_place(&tx, 10, D + 1, &pos), -EMSGSIZE);
  assert_int_equal(wire__rbulk_place(&off, 0, 10, &pos), -EMSGSIZE);
}

static void piece_is_whole_up_to_half_region_then_quarters(void **state) {
  wire__rbulk_tx tx = {D, 0}, off = {0, 0};
  (void)state;
  assert_int_equal(wire__rbulk_piece(&tx, WIRE__RDMA_BULK_MIN - 1), 0);
  assert_int_equal(wire__rbulk_piece(&tx, WIRE__RDMA_BULK_MIN), WIRE__RDMA_BULK_MIN);
  assert_int_equal(wire__rbulk_piece(&tx, D / 2), D / 2);
  assert_int_equal(wire__rbulk_piece(&tx, D / 2 + 1), D / 4);
  assert_int_equal(wire__rbulk_piece(&off, D), 0);
}

/* ------------------------------------------------------------------ reader */

static void resolve_maps_spans_inside_the_region(void **state) {
  static uint8_t land[D];
  wire__rbulk_rx rx = {land, D, 0, 0};
  (void)state;
  assert_ptr_equal(wire__rbulk_resolve(&rx, 0, 100), land);
  assert_ptr_equal(wire__rbulk_resolve(&rx, 100, D - 100), land + 100);
  assert_int_equal(rx.end, D);
  assert_ptr_equal(wire__rbulk_resolve(&rx, 3 * (uint64_t)D + 5, 7), land + 5);
}

static void resolve_rejects_spans_past_the_region(void **state) {
  static uint8_t land[D];
  wire__rbulk_rx rx = {land, D, 0, 0};
  (void)state;
  assert_null(wire__rbulk_resolve(&rx, 0, 0));
  assert_null(wire__rbulk_resolve(&rx, 0, (uint32_t)D + 1));
  assert_null(wire__rbulk_resolve(&rx, D - 10, 11));
  assert_null(wire__rbulk_resolve(&rx, 2 * (uint64_t)D - 1, 2));
  assert_null(wire__rbulk_resolve(&rx, UINT64_MAX - 3, 8));
  assert_int_equal(rx.end, 0); /* refusals record nothing */
}

static void resolve_rejects_positions_going_backwards(void **state) {
  static uint8_t land[D];
  wire__rbulk_rx rx = {land, D, 0, 0};
  (void)state;
  assert_non_null(wire__rbulk_resolve(&rx, 1000, 10));
  assert_null(wire__rbulk_resolve(&rx, 1009, 10));
  assert_null(wire__rbulk_resolve(&rx, 0, 10));
  assert_non_null(wire__rbulk_resolve(&rx, 1010, 10));
}

static void resolve_refuses_without_a_region(void **state) {
  wire__rbulk_rx rx = {NULL, 0, 0, 0};
  (void)state;
  assert_null(wire__rbulk_resolve(&rx, 0, 1));
}

static void release_is_due_only_when_consumption_advanced(void **state) {
  static uint8_t land[D];
  wire__rbulk_rx rx = {land, D, 0, 0};
  uint64_t v = 0;
  (void)state;
  assert_false(wire__rbulk_release_due(&rx, &v));
  assert_non_null(wire__rbulk_resolve(&rx, 0, 10));
  assert_true(wire__rbulk_release_due(&rx, &v));
  assert_int_equal(v, 10);
  assert_false(wire__rbulk_release_due(&rx, &v));
}

/* --------------------------------------------------- whole messages */

static void one_span_message_is_written_once_and_read_in_place(void **state) {
  chan c;
  size_t n = 300 << 10;
  uint8_t *p = pattern(n, 1);
  (void)state;
  ch_open(&c);
  assert_int_equal(ch_send(&c, 5, p, n), 0);
  assert_int_equal(c.delivered, 1);
  assert_int_equal(c.frames, 1);
  assert_int_equal(c.desc_frames, 1);
  assert_int_equal(c.writes, 1);
  assert_int_equal(c.kind, WIRE__K_CALL);
  assert_int_equal(c.id, 5);
  assert_int_equal(c.got_len, n);
  assert_memory_equal(c.got, p, n);
  /* In place: the payload pointer is inside the landing region. */
  assert_true(c.got_ptr >= c.land && c.got_ptr + n <= c.land + D);
  assert_int_equal(c.word, n); /* released after consumption */
  free(p);
  ch_close(&c);
}

static void large_message_goes_in_quarter_region_pieces_and_is_joined(void **state) {
  chan c;
  size_t n = ((size_t)3 << 20) + 5;
  uint8_t *p = pattern(n, 2);
  (void)state;
  ch_open(&c);
  assert_int_equal(ch_send(&c, 6, p, n), 0);
  assert_int_equal(c.delivered, 1);
  assert_int_equal(c.writes, (int)((n + D / 4 - 1) / (D / 4)));
  assert_int_equal(c.desc_frames, c.frames);
  assert_int_equal(c.got_len, n);
  assert_memory_equal(c.got, p, n);
  free(p);
  ch_close(&c);
}

static void small_messages_go_as_sends(void **state) {
  chan c;
  size_t n = WIRE__RDMA_BULK_MIN - 1;
  uint8_t *p = pattern(n, 3);
  (void)state;
  ch_open(&c);
  assert_int_equal(ch_send(&c, 7, p, n), 0);
  assert_int_equal(c.writes, 0);
  assert_int_equal(c.desc_frames, 0);
  assert_memory_equal(c.got, p, n);
  free(p);
  ch_close(&c);
}

static void no_region_from_peer_means_sends(void **state) {
  chan c;
  size_t n = 600 << 10;
  uint8_t *p = pattern(n, 4);
  (void)state;
  ch_open(&c);
  c.tx.d = 0; /* the peer announced no REGION */
  assert_int_equal(ch_send(&c, 8, p, n), 0);
  assert_int_equal(c.writes, 0);
  assert_int_equal(c.frames, 3); /* 256 KiB chunks */
  assert_memory_equal(c.got, p, n);
  free(p);
  ch_close(&c);
}

static void full_region_falls_back_to_sends_without_losing_bytes(void **state) {
  chan c;
  size_t n = 400 << 10, big = (size_t)2 << 20;
  uint8_t *a = pattern(n, 5), *b = pattern(n, 6), *x = pattern(n, 7), *g = pattern(big, 8);
  (void)state;
  ch_open(&c);
  c.hold = true; /* a paused reader: nothing is released */
  assert_int_equal(ch_send(&c, 1, a, n), 0);
  assert_int_equal(ch_send(&c, 2, b, n), 0);
  assert_int_equal(c.writes, 2);
  assert_memory_equal(c.got, b, n);
  /* No room for a third span: the message goes as two SEND frames. */
  assert_int_equal(ch_send(&c, 3, x, n), 0);
  assert_int_equal(c.writes, 2);
  assert_int_equal(c.delivered, 3);
  assert_memory_equal(c.got, x, n);
  /* A multi-piece message with no room: every piece as SEND frames of the
   * same message, joined intact. */
  c.frames = c.desc_frames = 0;
  assert_int_equal(ch_send(&c, 4, g, big), 0);
  assert_int_equal(c.desc_frames, 0);
  assert_int_equal(c.frames, (int)(big / WIRE__TCP_CHUNK));
  assert_int_equal(c.got_len, big);
  assert_memory_equal(c.got, g, big);
  /* The reader catches up: WRITEs resume. */
  c.hold = false;
  {
    uint64_t v;
    assert_true(wire__rbulk_release_due(&c.rx, &v));
    c.word = v;
  }
  assert_int_equal(ch_send(&c, 5, a, n), 0);
  assert_int_equal(c.writes, 3);
  assert_memory_equal(c.got, a, n);
  free(a);
  free(b);
  free(x);
  free(g);
  ch_close(&c);
}

static void partly_full_region_mixes_written_and_sent_pieces(void **state) {
  chan c;
  size_t big = (size_t)3 << 20;
  uint8_t *g = pattern(big, 9);
  (void)state;
  ch_open(&c);
  c.hold = true; /* four quarter pieces fit, the rest go as SENDs */
  assert_int_equal(ch_send(&c, 9, g, big), 0);
  assert_int_equal(c.writes, 4);
  assert_true(c.frames > c.desc_frames);
  assert_int_equal(c.got_len, big);
  assert_memory_equal(c.got, g, big);
  free(g);
  ch_close(&c);
}

/* --------------------------------------------------- hostile peers */

static int feed_desc(chan *c, uint16_t flags, uint32_t aux, uint64_t pos, uint32_t len) {
  uint8_t f[WIRE__HDR_LEN + WIRE__SHMDESC_LEN];
  wire__hdr h = {1, WIRE__K_CALL, (uint16_t)(WIRE__F_SHMDATA | flags), WIRE__SHMDESC_LEN, aux, 1};
  size_t used;
  wire__hdr_encode(f, &h);
  wire_le_wr64(f + WIRE__HDR_LEN, pos);
  wire_le_wr32(f + WIRE__HDR_LEN + 8, (uint32_t)len);
  memset(f + WIRE__HDR_LEN + 12, 0, 4);
  return wire__rx_feed(&c->asm_, f, sizeof(f), &used);
}

static void descriptor_past_the_region_closes_the_stream(void **state) {
  chan c;
  (void)state;
  ch_open(&c);
  assert_int_equal(feed_desc(&c, 0, 0, D - 4, 8), -EPROTO);
  assert_non_null(strstr(c.asm_.why, "outside the region"));
  assert_int_equal(c.delivered, 0);
  ch_close(&c);
}

static void descriptor_going_backwards_closes_the_stream(void **state) {
  chan c;
  (void)state;
  ch_open(&c);
  assert_int_equal(feed_desc(&c, 0, 0, 4096, 100), 0);
  assert_int_equal(c.delivered, 1);
  assert_int_equal(feed_desc(&c, 0, 0, 0, 100), -EPROTO);
  assert_int_equal(c.delivered, 1);
  ch_close(&c);
}

static void descriptor_pieces_overrunning_their_message_close_the_stream(void **state) {
  chan c;
  (void)state;
  ch_open(&c);
  assert_int_equal(feed_desc(&c, WIRE__F_MORE, 150, 0, 100), 0);
  assert_int_equal(feed_desc(&c, 0, 150, 100, 100), -EPROTO);
  assert_int_equal(c.delivered, 0);
  ch_close(&c);
}

/* xorshift64: deterministic, so a failure reproduces. */
static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static void random_announcements_are_accepted_only_when_valid(void **state) {
  uint8_t f[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN + 8];
  uint64_t s = 0x9E3779B97F4A7C15ull;
  int i, accepted = 0, refused = 0;
  (void)state;
  for (i = 0; i < 200000; i++) {
    wire__rbulk_region r;
    char why[128];
    size_t n, k;
    int rc, flips;
    region_frame(f);
    /* Flip 1-4 bytes of a valid frame, sometimes to magic values. */
    flips = 1 + (int)(rng(&s) % 4);
    for (k = 0; k < (size_t)flips; k++) {
      size_t at = rng(&s) % (WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN);
      uint64_t v = rng(&s);
      f[at] = (v & 3) == 0 ? 0xFF : (v & 3) == 1 ? 0 : (uint8_t)(v >> 8);
    }
    n = WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN;
    if (rng(&s) % 16 == 0)
      n = rng(&s) % sizeof(f);
    rc = wire__rbulk_classify(f, n, 1, &r, why, sizeof(why));
    assert_true(rc == 0 || rc == 1 || rc == -EPROTO);
    if (rc == 1) {
      accepted++;
      assert_int_equal(n, WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN);
      assert_true(r.len >= WIRE__RBULK_REGION_MIN && r.len <= WIRE__RBULK_REGION_MAX);
      assert_true(r.addr <= UINT64_MAX - r.len);
      assert_int_equal(r.ctl_addr & 7, 0);
    } else if (rc < 0) {
      refused++;
      assert_true(why[0] != 0);
    }
  }
  /* Both outcomes occurred: the generator reached the interesting cases. */
  assert_true(accepted > 1000);
  assert_true(refused > 1000);
}

static void random_descriptors_never_map_outside_the_region(void **state) {
  static uint8_t land[D];
  uint64_t s = 0xD1B54A32D192ED03ull;
  int i, mapped = 0;
  (void)state;
  for (i = 0; i < 200000; i++) {
    wire__rbulk_rx rx = {land, D, 0, 0};
    uint64_t pos = rng(&s), v = rng(&s);
    uint32_t len = (uint32_t)rng(&s);
    const uint8_t *p;
    rx.end = (v & 1) ? v >> 1 : 0;
    if (v & 2)
      pos %= 4 * (uint64_t)D;
    if (v & 4)
      len %= 2 * (uint32_t)D;
    p = wire__rbulk_resolve(&rx, pos, len);
    if (p != NULL) {
      mapped++;
      assert_true(p >= land && (uint64_t)(p - land) + len <= D);
      assert_true(len > 0 && pos >= ((v & 1) ? v >> 1 : 0));
      assert_int_equal(rx.end, pos + len);
    }
  }
  assert_true(mapped > 1000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(region_encodes_to_its_offset_table),
      cmocka_unit_test(region_decode_rejects_wrong_length),
      cmocka_unit_test(region_decode_rejects_sizes_outside_limits),
      cmocka_unit_test(region_decode_rejects_wrapping_address_range),
      cmocka_unit_test(region_decode_rejects_unaligned_release_word),
      cmocka_unit_test(classify_passes_every_other_frame_to_the_assembler),
      cmocka_unit_test(classify_decodes_a_region_frame),
      cmocka_unit_test(classify_rejects_region_frame_sharing_its_send),
      cmocka_unit_test(classify_rejects_region_frame_with_bad_header_fields),
      cmocka_unit_test(place_starts_over_at_zero_once_all_is_released),
      cmocka_unit_test(place_never_wraps_a_span),
      cmocka_unit_test(place_refuses_to_overwrite_unreleased_bytes),
      cmocka_unit_test(place_rejects_impossible_release_and_oversized_span),
      cmocka_unit_test(piece_is_whole_up_to_half_region_then_quarters),
      cmocka_unit_test(resolve_maps_spans_inside_the_region),
      cmocka_unit_test(resolve_rejects_spans_past_the_region),
      cmocka_unit_test(resolve_rejects_positions_going_backwards),
      cmocka_unit_test(resolve_refuses_without_a_region),
      cmocka_unit_test(release_is_due_only_when_consumption_advanced),
      cmocka_unit_test(one_span_message_is_written_once_and_read_in_place),
      cmocka_unit_test(large_message_goes_in_quarter_region_pieces_and_is_joined),
      cmocka_unit_test(small_messages_go_as_sends),
      cmocka_unit_test(no_region_from_peer_means_sends),
      cmocka_unit_test(full_region_falls_back_to_sends_without_losing_bytes),
      cmocka_unit_test(partly_full_region_mixes_written_and_sent_pieces),
      cmocka_unit_test(descriptor_past_the_region_closes_the_stream),
      cmocka_unit_test(descriptor_going_backwards_closes_the_stream),
      cmocka_unit_test(descriptor_pieces_overrunning_their_message_close_the_stream),
      cmocka_unit_test(random_announcements_are_accepted_only_when_valid),
      cmocka_unit_test(random_descriptors_never_map_outside_the_region),
  };
  return cmocka_run_group_tests_name("wire-rbulk", tests, NULL, NULL);
}
