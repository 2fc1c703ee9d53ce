/* fuzz-wire-rbulk.c: libFuzzer target for what an RDMA peer controls in
 * bulk transfers (wire/rbulk.c, PROTOCOL.md section 12).
 *
 * Input: byte 0 selects (mod 3):
 *   0  one received SEND -> wire__rbulk_classify (is it a REGION? is the
 *      REGION valid?); an accepted REGION must satisfy every rule;
 *   1  a frame stream from the guest after the handshake -> the daemon's
 *      assembler with its resolver pointed at a 1 MiB landing region, as
 *      server-rdma.c configures it; every delivered payload must lie inside
 *      that region or in the assembler's own buffers, and is read whole;
 *   2  the writer facing a hostile release word: 12-byte records
 *      (u64 released | u32 n) -> wire__rbulk_place; every placed span must
 *      lie inside the region and never behind the writer's head.
 * Invariant violations abort (a fuzzer finding), never bad input.
 * Seeds: tests/fuzz/corpus/wire-rbulk/ (replayed by test-wire-fuzz-replay).
 */
#include "wire/wire-int.h"

#include <stdlib.h>
#include <string.h>

#define LAND WIRE__RBULK_REGION_MIN

static uint8_t land[LAND];

static void must(int ok) {
  if (!ok)
    abort();
}

static const uint8_t *resolve(void *ctx, uint64_t pos, uint32_t len) {
  const uint8_t *p = wire__rbulk_resolve(ctx, pos, len);
  if (p != NULL)
    must(p >= land && (size_t)(p - land) + len <= LAND);
  return p;
}

static int touch(void *ctx, const wire__msg *m) {
  unsigned *sum = ctx;
  size_t i;
  for (i = 0; i < m->len; i++)
    *sum += m->data[i];
  return 0;
}

int wire_fuzz_rbulk_one(const uint8_t *data, size_t size);

int wire_fuzz_rbulk_one(const uint8_t *data, size_t size) {
  char why[256];

  if (size < 1)
    return 0;
  switch (data[0] % 3) {
  case 0: {
    wire__rbulk_region r;
    int rc = wire__rbulk_classify(data + 1, size - 1, 1, &r, why, sizeof(why));
    must(rc == 0 || rc == 1 || rc == -EPROTO);
    if (rc == 1) {
      must(size - 1 == WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN);
      must(r.len >= WIRE__RBULK_REGION_MIN && r.len <= WIRE__RBULK_REGION_MAX);
      must(r.addr <= UINT64_MAX - r.len && (r.ctl_addr & 7) == 0);
    }
    break;
  }
  case 1: {
    wire__rbulk_rx brx = {land, LAND, 0, 0};
    wire__rx rx;
    unsigned sum = 0;
    size_t used;
    uint64_t v;
    wire__rx_init(&rx, (size_t)4 << 20,
                  1u << WIRE__K_CALL | 1u << WIRE__K_POST | 1u << WIRE__K_BATCH |
                      1u << WIRE__K_HEARTBEAT | 1u << WIRE__K_BYE | 1u << WIRE__K_BLOB_PUT,
                  touch, &sum);
    rx.resolve = resolve;
    rx.resolve_ctx = &brx;
    wire__rx_feed(&rx, data + 1, size - 1, &used);
    if (wire__rbulk_release_due(&brx, &v))
      must(v == brx.end && v == brx.released);
    wire__rx_close(&rx);
    break;
  }
  default: {
    wire__rbulk_tx tx = {LAND, 0};
    size_t off = 1;
    while (off + 12 <= size) {
      uint64_t released = wire_le_rd64(data + off), pos, head = tx.head;
      uint32_t n = (uint32_t)data[off + 8] | (uint32_t)data[off + 9] << 8 |
                   (uint32_t)data[off + 10] << 16 | (uint32_t)data[off + 11] << 24;
      int rc;
      rc = wire__rbulk_place(&tx, released, n, &pos);
      must(rc == 0 || rc == -EAGAIN || rc == -EMSGSIZE || rc == -EPROTO);
      if (rc == 0) {
        must(pos >= head && pos % LAND + n <= LAND && tx.head == pos + n);
        must(released == head || pos + n - released <= LAND);
      } else {
        must(tx.head == head);
      }
      off += 12;
    }
    break;
  }
  }
  return 0;
}

#ifndef WIRE_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return wire_fuzz_rbulk_one(data, size);
}
#endif
