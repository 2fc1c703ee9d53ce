/* buf.c: little-endian argument writer (wire_buf_t) and bounds-checked
 * reader (wire_rd_t), plus content ids.
 *
 * Both sides encode their call arguments with these, so every integer on the
 * wire is little-endian whatever the host.  The writer grows geometrically and
 * keeps its first allocation failure (sticky -ENOMEM) so callers may put a
 * whole argument list and check once.  The reader never reads past len: each
 * get checks the bytes left first, and after one failure every later get fails
 * with -EPROTO and zeroes its output, so a decoder of untrusted bytes can
 * check once at the end without acting on garbage in between.
 * Content ids are XXH3-64 with seed 0, inlined (XXH_INLINE_ALL) so that the
 * guest library exports and imports nothing of xxHash.
 */
#include "wire/wire.h"

#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t wire_content_id(const void *data, size_t len) {
  return XXH3_64bits(data, len);
}

void wire_buf_init(wire_buf_t *b) {
  memset(b, 0, sizeof(*b));
}

void wire_buf_close(wire_buf_t *b) {
  if (b == NULL)
    return;
  free(b->data);
  memset(b, 0, sizeof(*b));
}

void wire_buf_reset(wire_buf_t *b) {
  b->len = 0;
  b->err = 0;
}

int wire_buf_status(const wire_buf_t *b) {
  return b->err;
}

int wire_buf_reserve(wire_buf_t *b, size_t extra) {
  size_t need, cap;
  uint8_t *p;

  if (b->err)
    return b->err;
  if (extra > SIZE_MAX - b->len)
    goto nomem;
  need = b->len + extra;
  if (need <= b->cap)
    return 0;
  /* 64 bytes covers most argument lists in one allocation. */
  cap = b->cap ? b->cap : 64;
  while (cap < need)
    cap = cap > SIZE_MAX / 2 ? need : cap * 2;
  p = realloc(b->data, cap);
  if (p == NULL)
    goto nomem;
  b->data = p;
  b->cap = cap;
  return 0;
nomem:
  b->err = -ENOMEM;
  return b->err;
}

int wire_buf_put_bytes(wire_buf_t *b, const void *p, size_t n) {
  int rc = wire_buf_reserve(b, n);

  if (rc)
    return rc;
  if (n)
    memcpy(b->data + b->len, p, n);
  b->len += n;
  return 0;
}

static int put_le(wire_buf_t *b, uint64_t v, size_t n) {
  uint8_t tmp[8];
  size_t i;

  for (i = 0; i < n; i++)
    tmp[i] = (uint8_t)(v >> (8 * i));
  return wire_buf_put_bytes(b, tmp, n);
}

int wire_buf_put_u8(wire_buf_t *b, uint8_t v) {
  return put_le(b, v, 1);
}
int wire_buf_put_u16(wire_buf_t *b, uint16_t v) {
  return put_le(b, v, 2);
}
int wire_buf_put_u32(wire_buf_t *b, uint32_t v) {
  return put_le(b, v, 4);
}
int wire_buf_put_u64(wire_buf_t *b, uint64_t v) {
  return put_le(b, v, 8);
}
int wire_buf_put_i32(wire_buf_t *b, int32_t v) {
  return put_le(b, (uint32_t)v, 4);
}
int wire_buf_put_i64(wire_buf_t *b, int64_t v) {
  return put_le(b, (uint64_t)v, 8);
}

int wire_buf_put_f64(wire_buf_t *b, double v) {
  uint64_t u;

  memcpy(&u, &v, sizeof(u));
  return put_le(b, u, 8);
}

int wire_buf_put_blob(wire_buf_t *b, const void *p, size_t n) {
  int rc;

  if (n > UINT32_MAX) {
    b->err = b->err ? b->err : -EMSGSIZE;
    return b->err;
  }
  rc = wire_buf_put_u32(b, (uint32_t)n);
  return rc ? rc : wire_buf_put_bytes(b, p, n);
}

int wire_buf_put_str(wire_buf_t *b, const char *s) {
  return wire_buf_put_blob(b, s, strlen(s));
}

/* ------------------------------------------------------------------ reader */

void wire_rd_init(wire_rd_t *r, const void *data, size_t len) {
  r->data = data;
  r->len = data ? len : 0;
  r->off = 0;
  r->err = 0;
}

int wire_rd_status(const wire_rd_t *r) {
  return r->err;
}

size_t wire_rd_left(const wire_rd_t *r) {
  return r->err ? 0 : r->len - r->off;
}

/* At entry: r->off <= r->len always holds (only this function moves off). */
static const uint8_t *take(wire_rd_t *r, size_t n) {
  const uint8_t *p;

  if (r->err || n > r->len - r->off) {
    r->err = -EPROTO;
    return NULL;
  }
  p = r->data + r->off;
  r->off += n;
  return p;
}

static int get_le(wire_rd_t *r, uint64_t *v, size_t n) {
  const uint8_t *p = take(r, n);
  uint64_t x = 0;
  size_t i;

  if (p == NULL) {
    *v = 0;
    return -EPROTO;
  }
  for (i = 0; i < n; i++)
    x |= (uint64_t)p[i] << (8 * i);
  *v = x;
  return 0;
}

#define WIRE__GET(name, type, n)                                                                   \
  int wire_rd_get_##name(wire_rd_t *r, type *v) {                                                  \
    uint64_t x;                                                                                    \
    int rc = get_le(r, &x, n);                                                                     \
    *v = (type)x;                                                                                  \
    return rc;                                                                                     \
  }
WIRE__GET(u8, uint8_t, 1)
WIRE__GET(u16, uint16_t, 2)
WIRE__GET(u32, uint32_t, 4)
WIRE__GET(u64, uint64_t, 8)
WIRE__GET(i32, int32_t, 4)
WIRE__GET(i64, int64_t, 8)
#undef WIRE__GET

int wire_rd_get_f64(wire_rd_t *r, double *v) {
  uint64_t x;
  int rc = get_le(r, &x, 8);

  memcpy(v, &x, sizeof(*v));
  return rc;
}

int wire_rd_get_bytes(wire_rd_t *r, void *dst, size_t n) {
  const uint8_t *p = take(r, n);

  if (p == NULL) {
    if (n)
      memset(dst, 0, n);
    return -EPROTO;
  }
  if (n)
    memcpy(dst, p, n);
  return 0;
}

int wire_rd_get_blob(wire_rd_t *r, const void **p, size_t *n) {
  uint32_t len;
  const uint8_t *q;

  *p = NULL;
  *n = 0;
  if (wire_rd_get_u32(r, &len))
    return -EPROTO;
  q = take(r, len);
  if (q == NULL)
    return -EPROTO;
  *p = q;
  *n = len;
  return 0;
}

int wire_rd_get_str(wire_rd_t *r, const char **s, size_t *n, size_t max_len) {
  const void *p;
  size_t len;

  *s = NULL;
  *n = 0;
  if (wire_rd_get_blob(r, &p, &len))
    return -EPROTO;
  if (len > max_len || memchr(p, 0, len) != NULL) {
    r->err = -EPROTO;
    return -EPROTO;
  }
  *s = p;
  *n = len;
  return 0;
}
