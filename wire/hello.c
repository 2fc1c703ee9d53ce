/* hello.c: the handshake bodies (HELLO, WELCOME, REFUSE/BYE) and the
 * daemon's decision on a HELLO.
 *
 * The guest offers a range of protocol versions [vmin, vmax]; the daemon
 * picks the highest version in both ranges or refuses with a message naming
 * both ranges.  Network tenants must present the daemon's token; the
 * comparison takes the same time whatever the token's content (no early exit)
 * so a remote peer cannot learn it byte by byte.  Decoders check every length
 * against the bytes present and the limits in wire.h; a HELLO body is at most
 * WIRE__HELLO_MAX bytes, enforced by the transports before they buffer it.
 * Tables: wire/proto.h; spec: wire/PROTOCOL.md, "Handshake".
 */
#include "wire/wire-int.h"

#include <stdio.h>
#include <string.h>

int wire__hello_encode(wire_buf_t *b, const wire__hello *h) {
  wire_buf_put_u16(b, h->vmin);
  wire_buf_put_u16(b, h->vmax);
  wire_buf_put_u8(b, h->prio);
  wire_buf_put_bytes(b, "\0\0\0", 3);
  wire_buf_put_u32(b, h->caps);
  wire_buf_put_str(b, h->tenant);
  return wire_buf_put_str(b, h->token);
}

static int copy_str(wire_rd_t *r, char *dst, size_t max_len) {
  const char *s;
  size_t n;

  if (wire_rd_get_str(r, &s, &n, max_len))
    return -EPROTO;
  memcpy(dst, s, n);
  dst[n] = 0;
  return 0;
}

int wire__hello_decode(const uint8_t *p, size_t n, wire__hello *h, char *why, size_t why_len) {
  wire_rd_t r;
  uint8_t pad[3];

  memset(h, 0, sizeof(*h));
  wire_rd_init(&r, p, n);
  wire_rd_get_u16(&r, &h->vmin);
  wire_rd_get_u16(&r, &h->vmax);
  wire_rd_get_u8(&r, &h->prio);
  wire_rd_get_bytes(&r, pad, sizeof(pad));
  wire_rd_get_u32(&r, &h->caps);
  if (wire_rd_status(&r)) {
    snprintf(why, why_len, "HELLO of %zu bytes is shorter than its 12-byte fixed part", n);
    return -EPROTO;
  }
  if (copy_str(&r, h->tenant, WIRE_TENANT_MAX)) {
    snprintf(why, why_len, "HELLO tenant name missing, too long (max %d bytes) or has a NUL",
             WIRE_TENANT_MAX);
    return -EPROTO;
  }
  if (copy_str(&r, h->token, WIRE_TOKEN_MAX)) {
    snprintf(why, why_len, "HELLO token missing, too long (max %d bytes) or has a NUL",
             WIRE_TOKEN_MAX);
    return -EPROTO;
  }
  if (wire_rd_left(&r) != 0) {
    snprintf(why, why_len, "HELLO has %zu trailing bytes", wire_rd_left(&r));
    return -EPROTO;
  }
  if (h->tenant[0] == 0) {
    snprintf(why, why_len, "HELLO tenant name is empty");
    return -EPROTO;
  }
  if (h->prio > WIRE_PRIO_BEST_EFFORT) {
    snprintf(why, why_len, "HELLO priority class %u unknown (0 latency-critical, 1 best-effort)",
             h->prio);
    return -EPROTO;
  }
  if (h->vmin > h->vmax) {
    snprintf(why, why_len, "HELLO version range %u..%u is empty", h->vmin, h->vmax);
    return -EPROTO;
  }
  return 0;
}

/* Constant-time equality of two NUL-terminated strings of at most
 * WIRE_TOKEN_MAX bytes: always walks WIRE_TOKEN_MAX + 1 bytes of both. */
static bool token_equal(const char *a, const char *b) {
  unsigned diff = 0;
  bool a_end = false, b_end = false;
  size_t i;

  for (i = 0; i <= WIRE_TOKEN_MAX; i++) {
    unsigned ca = a_end ? 0 : (unsigned char)a[i];
    unsigned cb = b_end ? 0 : (unsigned char)b[i];
    diff |= ca ^ cb;
    a_end = a_end || ca == 0;
    b_end = b_end || cb == 0;
  }
  return diff == 0;
}

int wire__hello_check(const wire__hello *h, const char *want_token, bool need_token,
                      uint16_t *version, char *why, size_t why_len) {
  uint16_t hi = h->vmax < WIRE_VERSION ? h->vmax : WIRE_VERSION;
  uint16_t lo = h->vmin > WIRE_VERSION_MIN ? h->vmin : WIRE_VERSION_MIN;

  if (lo > hi) {
    snprintf(why, why_len,
             "protocol version mismatch: daemon speaks versions %d..%d, tenant offered %u..%u",
             WIRE_VERSION_MIN, WIRE_VERSION, h->vmin, h->vmax);
    return WIRE_EVERSION;
  }
  if (need_token && want_token != NULL && want_token[0] != 0 &&
      !token_equal(want_token, h->token)) {
    snprintf(why, why_len,
             h->token[0] ? "token refused: the daemon expects the token configured in its "
                           "token file (TALLY_TOKEN on the guest side), and this one differs"
                         : "token missing: this daemon requires a token from network tenants "
                           "(set TALLY_TOKEN on the guest side)");
    return WIRE_ETOKEN;
  }
  *version = hi;
  return 0;
}

int wire__welcome_encode(wire_buf_t *b, const wire__welcome *w) {
  wire_buf_put_u16(b, w->version);
  wire_buf_put_u16(b, 0);
  wire_buf_put_u32(b, w->caps);
  wire_buf_put_u32(b, w->heartbeat_ms);
  wire_buf_put_u32(b, w->dead_after_ms);
  wire_buf_put_u64(b, w->max_msg_len);
  wire_buf_put_u32(b, w->ring_bytes);
  wire_buf_put_u32(b, 0);
  return wire_buf_put_u64(b, w->data_bytes);
}

int wire__welcome_decode(const uint8_t *p, size_t n, wire__welcome *w, char *why, size_t why_len) {
  wire_rd_t r;
  uint16_t pad16;
  uint32_t pad32;

  memset(w, 0, sizeof(*w));
  if (n != WIRE__WELCOME_LEN) {
    snprintf(why, why_len, "WELCOME of %zu bytes, expected %d", n, WIRE__WELCOME_LEN);
    return -EPROTO;
  }
  wire_rd_init(&r, p, n);
  wire_rd_get_u16(&r, &w->version);
  wire_rd_get_u16(&r, &pad16);
  wire_rd_get_u32(&r, &w->caps);
  wire_rd_get_u32(&r, &w->heartbeat_ms);
  wire_rd_get_u32(&r, &w->dead_after_ms);
  wire_rd_get_u64(&r, &w->max_msg_len);
  wire_rd_get_u32(&r, &w->ring_bytes);
  wire_rd_get_u32(&r, &pad32);
  wire_rd_get_u64(&r, &w->data_bytes);
  if (w->version < WIRE_VERSION_MIN || w->version > WIRE_VERSION) {
    snprintf(why, why_len, "daemon chose protocol version %u, we speak %d..%d", w->version,
             WIRE_VERSION_MIN, WIRE_VERSION);
    return WIRE_EVERSION;
  }
  if (w->heartbeat_ms == 0 || w->dead_after_ms <= w->heartbeat_ms || w->max_msg_len == 0) {
    snprintf(why, why_len, "WELCOME timers/limits inconsistent (heartbeat %u ms, dead %u ms)",
             w->heartbeat_ms, w->dead_after_ms);
    return -EPROTO;
  }
  return 0;
}

int wire__status_encode(wire_buf_t *b, int32_t status, const char *why) {
  wire_buf_put_i32(b, status);
  return wire_buf_put_str(b, why ? why : "");
}

int wire__status_decode(const uint8_t *p, size_t n, int32_t *status, char *why, size_t why_len) {
  wire_rd_t r;
  const char *s;
  size_t len;

  wire_rd_init(&r, p, n);
  wire_rd_get_i32(&r, status);
  /* The text is for humans; 1 KiB is plenty and bounds what we copy. */
  if (wire_rd_get_str(&r, &s, &len, 1024) || wire_rd_left(&r) != 0) {
    *status = -EPROTO;
    if (why_len)
      snprintf(why, why_len, "malformed REFUSE/BYE body (%zu bytes)", n);
    return -EPROTO;
  }
  if (why_len) {
    if (len >= why_len)
      len = why_len - 1;
    memcpy(why, s, len);
    why[len] = 0;
  }
  return 0;
}
