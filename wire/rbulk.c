/* rbulk.c: the verbs-free rules of RDMA bulk transfers (PROTOCOL.md §12).
 *
 * With capability WIRE__CAP_RDMA_BULK each side registers a landing region
 * and announces it once in a REGION frame; the peer then moves a large
 * payload with one-sided RDMA WRITE into that region and announces it with
 * an ordinary frame whose payload is a data-region descriptor (flag SHMDATA,
 * u64 pos | u32 len | u32 0), exactly as on shared memory.  The reader
 * consumes the span in place and RDMA-WRITEs its consumed position into the
 * writer's release word.  Everything here is a pure function on bytes and
 * positions, so each rule about what the peer sends is tested without a
 * device (tests/test-wire-rbulk.c): the REGION codec and the check that a
 * REGION is a SEND of its own, the reader's descriptor bounds check, the
 * writer's span placement (never outside the announced region, never over
 * unreleased bytes), and the per-message plan with its fallback to chunked
 * SENDs when the region is full.  rdma.c supplies the verbs behind
 * wire__rbulk_ops; this file does no I/O.
 */
#include "wire/wire-int.h"

#include <stdio.h>
#include <string.h>

/* ------------------------------------------------------------------ REGION */

void wire__rbulk_region_encode(uint8_t out[WIRE__RBULK_REGION_LEN], const wire__rbulk_region *r) {
  wire_le_wr64(out, r->addr);
  wire_le_wr64(out + 8, r->len);
  wire_le_wr32(out + 16, r->rkey);
  wire_le_wr32(out + 20, r->ctl_rkey);
  wire_le_wr64(out + 24, r->ctl_addr);
}

int wire__rbulk_region_decode(const uint8_t *p, size_t n, wire__rbulk_region *r, char *why,
                              size_t why_len) {
  if (n != WIRE__RBULK_REGION_LEN) {
    snprintf(why, why_len, "REGION payload of %zu bytes, expected %d", n, WIRE__RBULK_REGION_LEN);
    return -EPROTO;
  }
  r->addr = wire_le_rd64(p);
  r->len = wire_le_rd64(p + 8);
  r->rkey = wire_le_rd32(p + 16);
  r->ctl_rkey = wire_le_rd32(p + 20);
  r->ctl_addr = wire_le_rd64(p + 24);
  if (r->len < WIRE__RBULK_REGION_MIN || r->len > WIRE__RBULK_REGION_MAX) {
    snprintf(why, why_len, "REGION of %llu bytes outside %llu..%llu", (unsigned long long)r->len,
             (unsigned long long)WIRE__RBULK_REGION_MIN,
             (unsigned long long)WIRE__RBULK_REGION_MAX);
    return -EPROTO;
  }
  /* Remote addresses are only ever used as WRITE targets on the peer's own
   * memory (its NIC checks them against the rkey), but a range that wraps
   * around the address space is nonsense we refuse rather than compute on. */
  if (r->addr > UINT64_MAX - r->len) {
    snprintf(why, why_len, "REGION address range wraps (addr 0x%llx, %llu bytes)",
             (unsigned long long)r->addr, (unsigned long long)r->len);
    return -EPROTO;
  }
  /* 8-aligned: the release word must be written as one aligned 8-byte
   * unit so the writer never reads half of an update. */
  if ((r->ctl_addr & 7) != 0 || r->ctl_addr > UINT64_MAX - 8) {
    snprintf(why, why_len, "REGION release word at 0x%llx is not an aligned 8-byte word",
             (unsigned long long)r->ctl_addr);
    return -EPROTO;
  }
  return 0;
}

void wire__rbulk_region_frame(uint8_t out[WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN], uint8_t version,
                              const wire__rbulk_region *r) {
  wire__hdr h = {version, WIRE__K_REGION, 0, WIRE__RBULK_REGION_LEN, 0, 0};

  wire__hdr_encode(out, &h);
  wire__rbulk_region_encode(out + WIRE__HDR_LEN, r);
}

int wire__rbulk_classify(const uint8_t *p, size_t n, uint8_t version, wire__rbulk_region *r,
                         char *why, size_t why_len) {
  wire__hdr h;
  int rc;

  /* Not a REGION frame's start: the assembler judges these bytes. */
  if (n < WIRE__HDR_LEN || wire_le_rd32(p) != WIRE__MAGIC || p[5] != WIRE__K_REGION)
    return 0;
  if ((rc = wire__hdr_decode(p, version, &h, why, why_len)) != 0)
    return -EPROTO;
  if (h.flags != 0 || h.aux != 0 || h.id != 0 || h.len != WIRE__RBULK_REGION_LEN) {
    snprintf(why, why_len, "REGION frame with flags 0x%x, aux %u, id %llu, len %u", h.flags, h.aux,
             (unsigned long long)h.id, h.len);
    return -EPROTO;
  }
  /* One frame per SEND is the transport's rule; a REGION sharing its SEND
   * with other bytes would let a frame boundary be forged mid-stream. */
  if (n != WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN) {
    snprintf(why, why_len, "REGION frame not alone in its SEND (%zu bytes, expected %d)", n,
             WIRE__HDR_LEN + WIRE__RBULK_REGION_LEN);
    return -EPROTO;
  }
  if ((rc = wire__rbulk_region_decode(p + WIRE__HDR_LEN, h.len, r, why, why_len)) != 0)
    return rc;
  return 1;
}

/* ------------------------------------------------------------------ writer */

int wire__rbulk_place(wire__rbulk_tx *tx, uint64_t released, size_t n, uint64_t *pos) {
  uint64_t d = tx->d, p = tx->head;

  if (d == 0 || n > d)
    return -EMSGSIZE;
  if (released > tx->head)
    return -EPROTO;
  if (released == tx->head) {
    /* Everything released: start over at offset 0 (warm pages). */
    if (p % d != 0)
      p += d - p % d;
  } else {
    if (p % d + n > d)
      p += d - p % d; /* a span never wraps: start over at 0 */
    /* At this point p % d + n <= d; the span may not reach bytes the
     * reader still holds, which start at `released`. */
    if (p + n - released > d)
      return -EAGAIN;
  }
  *pos = p;
  tx->head = p + n;
  return 0;
}

size_t wire__rbulk_piece(const wire__rbulk_tx *tx, size_t len) {
  if (tx->d == 0 || len < WIRE__RDMA_BULK_MIN)
    return 0;
  return len <= tx->d / 2 ? len : (size_t)(tx->d / 4);
}

/* ------------------------------------------------------------------ reader */

const uint8_t *wire__rbulk_resolve(wire__rbulk_rx *rx, uint64_t pos, uint32_t len) {
  uint64_t at;

  if (rx->base == NULL || rx->d == 0 || len == 0 || len > rx->d)
    return NULL;
  if (pos < rx->end || pos > UINT64_MAX - len)
    return NULL; /* positions only grow (and never wrap the u64) */
  at = pos % rx->d;
  if (at + len > rx->d)
    return NULL;
  rx->end = pos + len;
  return rx->base + at;
}

bool wire__rbulk_release_due(wire__rbulk_rx *rx, uint64_t *value) {
  if (rx->end <= rx->released)
    return false;
  rx->released = rx->end;
  *value = rx->end;
  return true;
}

/* -------------------------------------------------------------------- plan */

/* Places a piece, waiting (when ops->wait exists) up to
 * WIRE__RBULK_ROOM_WAIT_NS for the reader to release room. */
static int place_wait(wire__rbulk_tx *tx, const wire__rbulk_ops *ops, void *arg, size_t n,
                      uint64_t *pos) {
  uint64_t t0 = 0;
  int rc;

  for (;;) {
    rc = wire__rbulk_place(tx, ops->released(arg), n, pos);
    if (rc != -EAGAIN || ops->wait == NULL)
      return rc;
    if (t0 == 0)
      t0 = wire__now_ns();
    else if (wire__now_ns() - t0 >= WIRE__RBULK_ROOM_WAIT_NS)
      return -EAGAIN;
    if ((rc = ops->wait(arg)) < 0)
      return rc;
  }
}

int wire__rbulk_send(wire__rbulk_tx *tx, const wire__rbulk_ops *ops, uint8_t version, uint8_t kind,
                     uint64_t id, const struct iovec *iov, int cnt, size_t len, wire__zstate *z,
                     wire__emit_fn emit, void *arg) {
  size_t piece = wire__rbulk_piece(tx, len), off = 0;
  bool multi;
  int rc = 0;

  if (len > UINT32_MAX)
    return -EMSGSIZE;
  if (piece == 0 || kind == WIRE__K_BATCH)
    return wire__send_frames(version, kind, id, iov, cnt, len, WIRE__TCP_CHUNK, z, emit, arg);
  multi = len > piece;
  while (rc == 0 && off < len) {
    size_t n = len - off < piece ? len - off : piece;
    bool last = off + n == len;
    uint32_t aux = multi ? (uint32_t)len : 0;
    uint64_t pos;

    rc = place_wait(tx, ops, arg, n, &pos);
    if (rc == 0) {
      uint8_t desc[WIRE__SHMDESC_LEN];
      struct iovec dv = {desc, sizeof(desc)};
      if ((rc = ops->write(arg, pos, iov, cnt, off, n)) != 0)
        break;
      wire_le_wr64(desc, pos);
      wire_le_wr32(desc + 8, (uint32_t)n);
      wire_le_wr32(desc + 12, 0);
      rc = wire__emit_frame(version, kind, id, WIRE__F_SHMDATA | (last ? 0 : WIRE__F_MORE), aux,
                            &dv, 1, 0, sizeof(desc), emit, arg);
    } else if (rc == -EAGAIN && !multi) {
      /* No room for the one span: the whole message as SENDs. */
      return wire__send_frames(version, kind, id, iov, cnt, len, WIRE__TCP_CHUNK, z, emit, arg);
    } else if (rc == -EAGAIN) {
      /* No room for this piece: its bytes as plain frames of the same
       * message (kind, id and total repeat; MORE on all but the end). */
      size_t sub = 0;
      rc = 0;
      while (rc == 0 && sub < n) {
        size_t k = n - sub < WIRE__TCP_CHUNK ? n - sub : WIRE__TCP_CHUNK;
        bool end = last && sub + k == n;
        rc = wire__emit_frame(version, kind, id, end ? 0 : WIRE__F_MORE, aux, iov, cnt, off + sub,
                              k, emit, arg);
        sub += k;
      }
    }
    off += n;
  }
  return rc;
}
