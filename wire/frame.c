/* frame.c: frame headers and wire__rx, the incremental message assembler.
 *
 * Every receiver (guest, daemon, the fuzzer) pushes bytes in whatever pieces
 * the transport produced, down to one byte at a time; wire__rx turns them into
 * whole messages.  Invariants it keeps, in this order, before touching any
 * payload: the header is complete and valid (magic, version, kind accepted
 * from this peer, flags known, len <= WIRE__FRAME_MAX); a multi-frame message
 * announces its total in aux and that total is <= max_msg before anything is
 * allocated; continuation frames repeat kind, id and total and never overrun
 * it; zstd is accepted only when negotiated and must inflate to exactly the
 * announced raw length; a BATCH is walked completely before its first record
 * is delivered, so a bad batch delivers nothing.  Any violation returns
 * -EPROTO or -EMSGSIZE with a reason in rx->why and the stream is dead.
 * Payloads wholly inside one fed piece are delivered in place (no copy).
 * Format tables: wire/proto.h; spec: wire/PROTOCOL.md.
 */
#include "wire/wire-int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

void wire__hdr_encode(uint8_t out[WIRE__HDR_LEN], const wire__hdr *h) {
  wire_le_wr32(out, WIRE__MAGIC);
  out[4] = h->version;
  out[5] = h->kind;
  out[6] = (uint8_t)h->flags;
  out[7] = (uint8_t)(h->flags >> 8);
  wire_le_wr32(out + 8, h->len);
  wire_le_wr32(out + 12, h->aux);
  wire_le_wr32(out + 16, (uint32_t)h->id);
  wire_le_wr32(out + 20, (uint32_t)(h->id >> 32));
}

int wire__hdr_decode(const uint8_t in[WIRE__HDR_LEN], uint8_t want_version, wire__hdr *h, char *why,
                     size_t why_len) {
  char sample[80];

  if (wire_le_rd32(in) != WIRE__MAGIC) {
    wire__escape(sample, sizeof(sample), in, 8);
    snprintf(why, why_len, "bad frame magic (expected \"TALY\", got \"%s\")", sample);
    return -EPROTO;
  }
  h->version = in[4];
  h->kind = in[5];
  h->flags = (uint16_t)(in[6] | in[7] << 8);
  h->len = wire_le_rd32(in + 8);
  h->aux = wire_le_rd32(in + 12);
  h->id = wire_le_rd64(in + 16);
  if (want_version && h->version != want_version) {
    snprintf(why, why_len, "frame version %u, expected %u", h->version, want_version);
    return -EPROTO;
  }
  if (h->kind < 1 || h->kind > WIRE__K_MAX) {
    snprintf(why, why_len, "unknown frame kind %u", h->kind);
    return -EPROTO;
  }
  if (h->flags & ~WIRE__F_ALL) {
    snprintf(why, why_len, "unknown frame flags 0x%x", h->flags);
    return -EPROTO;
  }
  if (h->len > WIRE__FRAME_MAX) {
    snprintf(why, why_len, "frame payload of %u bytes exceeds the %u-byte limit", h->len,
             WIRE__FRAME_MAX);
    return -EMSGSIZE;
  }
  return 0;
}

void wire__escape(char *out, size_t out_len, const uint8_t *p, size_t n) {
  size_t i, o = 0;

  if (out_len == 0)
    return;
  out[0] = 0;
  for (i = 0; i < n && i < 16; i++) {
    int w;
    if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '"' && p[i] != '\\')
      w = snprintf(out + o, out_len - o, "%c", p[i]);
    else
      w = snprintf(out + o, out_len - o, "\\x%02x", p[i]);
    if (w < 0 || (size_t)w >= out_len - o)
      break;
    o += (size_t)w;
  }
}

int wire__frame_put(wire_buf_t *b, uint8_t version, uint8_t kind, uint64_t id, const void *p,
                    size_t n) {
  uint8_t hb[WIRE__HDR_LEN];
  wire__hdr h = {.version = version, .kind = kind, .len = (uint32_t)n, .id = id};

  if (n > WIRE__FRAME_MAX)
    return -EMSGSIZE;
  wire__hdr_encode(hb, &h);
  wire_buf_put_bytes(b, hb, sizeof(hb));
  return wire_buf_put_bytes(b, p, n);
}

/* ---------------------------------------------------------------- assembler */

void wire__rx_init(wire__rx *rx, size_t max_msg, uint32_t kinds, wire__rx_deliver_fn deliver,
                   void *ctx) {
  memset(rx, 0, sizeof(*rx));
  rx->max_msg = max_msg;
  rx->frame_max = WIRE__FRAME_MAX;
  rx->version = 1;
  rx->kinds = kinds;
  rx->deliver = deliver;
  rx->ctx = ctx;
}

void wire__rx_close(wire__rx *rx) {
  if (rx == NULL)
    return;
  free(rx->fbuf);
  free(rx->mbuf);
  free(rx->zbuf);
  ZSTD_freeDCtx(rx->zctx);
  rx->fbuf = rx->mbuf = rx->zbuf = NULL;
  rx->mcap = 0;
  rx->zctx = NULL;
}

bool wire__rx_pending(const wire__rx *rx) {
  return rx->batch_n > 0;
}

bool wire__rx_idle(const wire__rx *rx) {
  return rx->hdr_have == 0 && !rx->in_payload && !rx->in_multi && rx->batch_n == 0;
}

static int fail(wire__rx *rx, int status, const char *fmt, unsigned long long a,
                unsigned long long b) {
  snprintf(rx->why, sizeof(rx->why), fmt, a, b);
  return status;
}

/* After a multi-frame message its buffer is kept for the next one: a fresh
 * buffer costs a page fault per 4 KiB (wire-bench: 256 MiB shm calls ran at
 * 1 GB/s with a fresh buffer each).  wire__rx_trim gives it back when the
 * connection goes idle. */
void wire__rx_trim(wire__rx *rx) {
  if (rx->in_multi || rx->batch_n > 0)
    return;
  free(rx->mbuf);
  rx->mbuf = NULL;
  rx->mcap = 0;
}

/* Delivers the batch records left in rx->batch_*; returns 0, 1 (paused) or <0. */
static int batch_run(wire__rx *rx) {
  while (rx->batch_n > 0) {
    wire__msg m = {.kind = WIRE__K_POST};
    uint32_t len = 0;
    int rc;

    /* batch_start validated every length, but over shm the payload is
     * memory the guest can still write: each length is read once and
     * checked again against what is left, or a length changed after
     * validation would walk past the frame (and the mapping). */
    rc = wire__batch_rec(&rx->batch_p, &rx->batch_left, &m.data, &len);
    if (rc == -1)
      return fail(rx, -EPROTO, "batch changed while read (%llu records, %llu bytes left)",
                  rx->batch_n, rx->batch_left);
    if (rc == -2)
      return fail(rx, -EPROTO, "batch record length %llu changed while read (%llu bytes left)", len,
                  rx->batch_left - 4);
    m.len = len;
    rx->batch_n--;
    rc = rx->deliver(rx->ctx, &m);
    if (rc)
      return rc;
  }
  return 0;
}

static int batch_start(wire__rx *rx, const uint8_t *p, size_t n, uint32_t count) {
  const uint8_t *q = p;
  size_t left = n;
  uint32_t i;

  if (count == 0)
    return fail(rx, -EPROTO, "empty batch (%llu records in %llu bytes)", 0, n);
  for (i = 0; i < count; i++) {
    const uint8_t *data;
    uint32_t len = 0;
    int rc = wire__batch_rec(&q, &left, &data, &len);
    if (rc == -1)
      return fail(rx, -EPROTO, "batch record %llu header past the frame end (%llu bytes left)", i,
                  left);
    if (rc == -2)
      return fail(rx, -EPROTO, "batch record length %llu past the frame end (%llu bytes left)", len,
                  left - 4);
  }
  if (left != 0)
    return fail(rx, -EPROTO, "%llu trailing bytes after %llu batch records", left, count);
  rx->batch_p = p;
  rx->batch_left = n;
  rx->batch_n = count;
  return batch_run(rx);
}

/* Inflates a ZSTD payload (u32 raw_len | frame) into dst[0..cap). */
static int inflate(wire__rx *rx, const uint8_t *p, size_t n, uint8_t *dst, size_t cap,
                   size_t *out) {
  uint32_t raw;
  size_t r;

  if (n < 4)
    return fail(rx, -EPROTO, "zstd payload of %llu bytes has no length (%llu)", n, 0);
  raw = wire_le_rd32(p);
  if (raw > cap)
    return fail(rx, -EMSGSIZE, "zstd raw length %llu exceeds room %llu", raw, cap);
  if (rx->zctx == NULL && (rx->zctx = ZSTD_createDCtx()) == NULL)
    return fail(rx, -ENOMEM, "zstd context: out of memory (%llu %llu)", 0, 0);
  r = ZSTD_decompressDCtx(rx->zctx, dst, raw, p + 4, n - 4);
  if (ZSTD_isError(r) || r != raw)
    return fail(rx, -EPROTO, "zstd payload does not inflate to its %llu announced bytes (%llu)",
                raw, ZSTD_isError(r) ? 0 : r);
  *out = raw;
  return 0;
}

/* Starts the multi-frame message frame h opens, or checks that h continues
 * the one in progress.  Returns 0 or a failure. */
static int multi_enter(wire__rx *rx, const wire__hdr *h) {
  if (h->kind == WIRE__K_BATCH)
    return fail(rx, -EPROTO, "batch frames cannot be chunked (%llu %llu)", 0, 0);
  if (!rx->in_multi) {
    if (h->aux > rx->max_msg)
      return fail(rx, -EMSGSIZE, "message of %llu bytes exceeds the %llu-byte limit", h->aux,
                  rx->max_msg);
    if (h->aux == 0)
      return fail(rx, -EPROTO, "multi-frame message announces %llu bytes (%llu)", 0, 0);
    rx->pcnt = 0;
    if (rx->place && rx->place(rx->ctx, h->kind, h->id, h->aux, &rx->piov, &rx->pcnt) != 1)
      rx->pcnt = 0;
    if (rx->pcnt == 0 && rx->mcap < h->aux) {
      /* Grow only: a fresh mmap'd buffer per message costs a page fault
       * per 4 KiB, which wire-bench showed halving TCP bulk throughput. */
      free(rx->mbuf);
      rx->mcap = 0;
      rx->mbuf = malloc(h->aux);
      if (rx->mbuf != NULL)
        rx->mcap = h->aux;
    }
    if (rx->pcnt == 0 && rx->mbuf == NULL)
      return fail(rx, -ENOMEM, "out of memory for a %llu-byte message (%llu)", h->aux, 0);
    rx->mlen = h->aux;
    rx->mhave = 0;
    rx->mkind = h->kind;
    rx->mid = h->id;
    rx->in_multi = true;
  } else if (h->kind != rx->mkind || h->id != rx->mid || h->aux != rx->mlen) {
    return fail(rx, -EPROTO,
                "continuation frame of kind %llu does not match its message (kind %llu)", h->kind,
                rx->mkind);
  }
  return 0;
}

/* Appends len raw bytes to the message in progress (the caller checked that
 * they fit): into the placed buffers or the join buffer. */
static void multi_append(wire__rx *rx, const uint8_t *data, size_t len) {
  if (rx->pcnt > 0 && rx->copy_in != NULL)
    rx->copy_in(rx->ctx, rx->piov, rx->pcnt, rx->mhave, data, len);
  else if (rx->pcnt > 0)
    wire__iov_copy_in(rx->piov, rx->pcnt, rx->mhave, data, len);
  else
    memcpy(rx->mbuf + rx->mhave, data, len);
  rx->mhave += len;
}

/* After frame h's bytes are appended: delivers the message if h was its
 * last frame. */
static int multi_leave(wire__rx *rx, const wire__hdr *h) {
  wire__msg m = {0};

  if (h->flags & WIRE__F_MORE)
    return 0;
  if (rx->mhave != rx->mlen)
    return fail(rx, -EPROTO, "message ended after %llu of its %llu bytes", rx->mhave, rx->mlen);
  rx->in_multi = false;
  m.kind = rx->mkind;
  m.id = rx->mid;
  m.placed = rx->pcnt > 0;
  m.data = m.placed ? NULL : rx->mbuf;
  m.len = rx->mlen;
  rx->pcnt = 0;
  /* mbuf stays: it holds a paused payload, or serves the next message. */
  return rx->deliver(rx->ctx, &m);
}

/* Handles one complete frame whose payload is p[0..h.len).  Returns 0, 1 or <0. */
static int frame_done(wire__rx *rx, const uint8_t *p) {
  const wire__hdr *h = &rx->h;
  const uint8_t *data = p;
  size_t len = h->len;
  bool multi = (h->flags & WIRE__F_MORE) || rx->in_multi;
  wire__msg m = {0};

  if (h->flags & WIRE__F_SHMDATA) {
    uint64_t pos;
    uint32_t dlen;
    if (rx->resolve == NULL)
      return fail(rx, -EPROTO, "shared-memory descriptor on a transport without one (%llu %llu)", 0,
                  0);
    if (len != WIRE__SHMDESC_LEN)
      return fail(rx, -EPROTO, "shared-memory descriptor of %llu bytes, expected %llu", len,
                  WIRE__SHMDESC_LEN);
    pos = wire_le_rd64(p);
    dlen = wire_le_rd32(p + 8);
    data = rx->resolve(rx->resolve_ctx, pos, dlen);
    if (data == NULL)
      return fail(rx, -EPROTO, "shared-memory descriptor (pos %llu, len %llu) outside the region",
                  pos, dlen);
    len = dlen;
  }
  if (!multi) {
    if (h->kind == WIRE__K_BATCH) {
      if (h->flags & WIRE__F_ZSTD)
        return fail(rx, -EPROTO, "compressed batch frames are not allowed (%llu %llu)", 0, 0);
      return batch_start(rx, data, len, h->aux);
    }
    if (h->aux != 0)
      return fail(rx, -EPROTO, "aux %llu on a single-frame message of kind %llu", h->aux, h->kind);
    if (h->flags & WIRE__F_ZSTD) {
      size_t raw;
      int rc;
      /* A single compressed frame inflates to at most one frame's bytes, into
       * its own buffer: data may point into fbuf (a split frame). */
      if (rx->zbuf == NULL && (rx->zbuf = malloc(WIRE__FRAME_MAX)) == NULL)
        return fail(rx, -ENOMEM, "out of memory (%llu %llu)", 0, 0);
      rc = inflate(rx, data, len, rx->zbuf, WIRE__FRAME_MAX, &raw);
      if (rc)
        return rc;
      data = rx->zbuf;
      len = raw;
    }
    m.kind = h->kind;
    m.id = h->id;
    m.data = data;
    m.len = len;
    return rx->deliver(rx->ctx, &m);
  }
  /* Part of a multi-frame message. */
  {
    int rc = multi_enter(rx, h);
    if (rc)
      return rc;
  }
  if (h->flags & WIRE__F_ZSTD) {
    size_t raw, left = rx->mlen - rx->mhave;
    int rc;
    if (rx->pcnt > 0) {
      /* Inflate into zbuf (a chunk's raw bytes fit one frame), then place. */
      if (rx->zbuf == NULL && (rx->zbuf = malloc(WIRE__FRAME_MAX)) == NULL)
        return fail(rx, -ENOMEM, "out of memory (%llu %llu)", 0, 0);
      rc = inflate(rx, data, len, rx->zbuf, left < WIRE__FRAME_MAX ? left : WIRE__FRAME_MAX, &raw);
      if (rc)
        return rc;
      wire__iov_copy_in(rx->piov, rx->pcnt, rx->mhave, rx->zbuf, raw);
    } else {
      rc = inflate(rx, data, len, rx->mbuf + rx->mhave, left, &raw);
      if (rc)
        return rc;
    }
    rx->mhave += raw;
  } else {
    if (len > rx->mlen - rx->mhave)
      return fail(rx, -EPROTO, "chunk overruns its message: %llu bytes with %llu left", len,
                  rx->mlen - rx->mhave);
    multi_append(rx, data, len);
  }
  return multi_leave(rx, h);
}

int wire__rx_feed(wire__rx *rx, const uint8_t *p, size_t n, size_t *used) {
  size_t off = 0;
  int rc = 0;

  *used = 0;
  if (rx->batch_n > 0) {
    rc = batch_run(rx);
    if (rc)
      return rc;
  }
  while (off < n) {
    if (!rx->in_payload) {
      size_t take = WIRE__HDR_LEN - rx->hdr_have;
      if (take > n - off)
        take = n - off;
      memcpy(rx->hdr_bytes + rx->hdr_have, p + off, take);
      rx->hdr_have += take;
      off += take;
      if (rx->hdr_have < WIRE__HDR_LEN)
        break;
      rx->hdr_have = 0;
      rc = wire__hdr_decode(rx->hdr_bytes, rx->version, &rx->h, rx->why, sizeof(rx->why));
      if (rc)
        return rc;
      if (rx->h.len > rx->frame_max)
        return fail(rx, -EMSGSIZE, "frame payload of %llu bytes exceeds the %llu-byte limit here",
                    rx->h.len, rx->frame_max);
      /* Refuse an oversized message at its first header, not its payload. */
      if ((rx->h.flags & WIRE__F_MORE) && !rx->in_multi && rx->h.aux > rx->max_msg)
        return fail(rx, -EMSGSIZE, "message of %llu bytes exceeds the %llu-byte limit", rx->h.aux,
                    rx->max_msg);
      if (!(rx->kinds & (1u << rx->h.kind)))
        return fail(rx, -EPROTO, "frame kind %llu not allowed in this direction/state (%llu)",
                    rx->h.kind, 0);
      if ((rx->h.flags & WIRE__F_ZSTD) && !rx->zstd_ok)
        return fail(rx, -EPROTO, "zstd frame without the negotiated capability (%llu %llu)", 0, 0);
      if (rx->in_multi && !(rx->h.kind == rx->mkind))
        return fail(rx, -EPROTO, "frame of kind %llu inside a message of kind %llu", rx->h.kind,
                    rx->mkind);
      rx->in_payload = true;
      rx->fhave = 0;
      rx->streaming = false;
      if (((rx->h.flags & WIRE__F_MORE) || rx->in_multi) &&
          !(rx->h.flags & (WIRE__F_ZSTD | WIRE__F_SHMDATA))) {
        /* A plain chunk: its bytes go straight to the message as they
         * arrive (no frame buffer, one copy), whatever the read sizes. */
        rc = multi_enter(rx, &rx->h);
        if (rc)
          return rc;
        if (rx->h.len > rx->mlen - rx->mhave)
          return fail(rx, -EPROTO, "chunk overruns its message: %llu bytes with %llu left",
                      rx->h.len, rx->mlen - rx->mhave);
        rx->streaming = true;
      }
    }
    if (rx->streaming) {
      /* rx->fhave of this chunk's bytes are appended already. */
      size_t take = rx->h.len - rx->fhave;
      if (take > n - off)
        take = n - off;
      multi_append(rx, p + off, take);
      rx->fhave += take;
      off += take;
      if (rx->fhave < rx->h.len)
        break;
      rx->in_payload = false;
      rx->streaming = false;
      rc = multi_leave(rx, &rx->h);
      if (rc)
        break;
      continue;
    }
    /* At this point: rx->h is a checked header and rx->fhave of its payload
     * bytes sit in rx->fbuf. */
    if (rx->fhave == 0 && n - off >= rx->h.len) {
      const uint8_t *payload = p + off;
      off += rx->h.len;
      rx->in_payload = false;
      rc = frame_done(rx, payload);
    } else {
      size_t take = rx->h.len - rx->fhave;
      if (rx->fcap < rx->h.len) {
        uint8_t *nb = realloc(rx->fbuf, rx->h.len);
        if (nb == NULL)
          return fail(rx, -ENOMEM, "out of memory for a %llu-byte frame (%llu)", rx->h.len, 0);
        rx->fbuf = nb;
        rx->fcap = rx->h.len;
      }
      if (take > n - off)
        take = n - off;
      memcpy(rx->fbuf + rx->fhave, p + off, take);
      rx->fhave += take;
      off += take;
      if (rx->fhave < rx->h.len)
        break;
      rx->in_payload = false;
      rc = frame_done(rx, rx->fbuf);
    }
    if (rc)
      break;
  }
  *used = off;
  return rc;
}
