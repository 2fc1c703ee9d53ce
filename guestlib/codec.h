/* codec.h: bounds-checked little-endian readers and writers for call.h bodies.
 *
 * Header-only so guestlib/ and hostd/ share one implementation without a
 * link dependency.  A reader never reads past its end: every get returns
 * -EPROTO on underrun and leaves the output zeroed, so a decoder can chain
 * gets and check once (the reader stays failed after the first underrun).
 * A writer grows its buffer (doubling) and reports -ENOMEM once; later puts
 * are no-ops.  x86-64 and aarch64 are little-endian, which is the wire order,
 * so values are copied with memcpy; a big-endian port would swap here.
 */
#ifndef TALLY_GUEST_CODEC_H
#define TALLY_GUEST_CODEC_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct guest_rd {
  const uint8_t *p; /* next byte */
  size_t left;      /* bytes remaining */
  int err;          /* 0, or -EPROTO after an underrun */
} guest_rd_t;

typedef struct guest_wr {
  uint8_t *buf; /* owned, grown with realloc */
  size_t len;   /* bytes written */
  size_t cap;   /* bytes allocated */
  int err;      /* 0, or -ENOMEM */
} guest_wr_t;

static inline void guest_rd_init(guest_rd_t *r, const void *p, size_t len) {
  r->p = (const uint8_t *)p;
  r->left = len;
  r->err = 0;
}

static inline int guest_rd_bytes(guest_rd_t *r, void *out, size_t n) {
  if (r->err || r->left < n) {
    r->err = -EPROTO;
    if (out)
      memset(out, 0, n);
    return -EPROTO;
  }
  if (out)
    memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return 0;
}

/* Returns a pointer to the next n bytes inside the buffer (no copy), or NULL. */
static inline const uint8_t *guest_rd_view(guest_rd_t *r, size_t n) {
  const uint8_t *p = r->p;
  if (guest_rd_bytes(r, NULL, n))
    return NULL;
  return p;
}

static inline uint32_t guest_rd_u32(guest_rd_t *r) {
  uint32_t v;
  guest_rd_bytes(r, &v, 4);
  return v;
}

static inline uint64_t guest_rd_u64(guest_rd_t *r) {
  uint64_t v;
  guest_rd_bytes(r, &v, 8);
  return v;
}

static inline int guest_wr_reserve(guest_wr_t *w, size_t n) {
  if (w->err)
    return w->err;
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n)
      cap *= 2;
    uint8_t *nb = (uint8_t *)realloc(w->buf, cap);
    if (!nb) {
      w->err = -ENOMEM;
      return w->err;
    }
    w->buf = nb;
    w->cap = cap;
  }
  return 0;
}

static inline void guest_wr_bytes(guest_wr_t *w, const void *p, size_t n) {
  if (n == 0 || guest_wr_reserve(w, n))
    return;
  memcpy(w->buf + w->len, p, n);
  w->len += n;
}

static inline void guest_wr_u32(guest_wr_t *w, uint32_t v) {
  guest_wr_bytes(w, &v, 4);
}
static inline void guest_wr_u64(guest_wr_t *w, uint64_t v) {
  guest_wr_bytes(w, &v, 8);
}

static inline void guest_wr_free(guest_wr_t *w) {
  free(w->buf);
  memset(w, 0, sizeof(*w));
}

#endif /* TALLY_GUEST_CODEC_H */
