/* call.c: the encoder and the decoder of the call vocabulary.
 *
 * wire/call.def expands here twice.  Into straight-line code per message
 * (the path every message takes: one length check for the fixed part, each
 * field read or written in place, then each tail's length field checked
 * against its limit and against the bytes left; nothing may follow the
 * last field), and into a field descriptor array per message (kind, offset
 * in its struct, count, limit) that a generic decoder walks to say why
 * bytes were refused, naming the message and the field; it runs only after
 * the fast path refused (docs/decisions.md, D7).  So a layout is written
 * once, in the table.  Integers are read and written byte-wise
 * little-endian (wire-int.h), so any alignment of the frame is fine.  Pure:
 * no allocation except call_put's buffer.
 */
#include "wire/call.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "wire/wire-int.h"

enum { K_U32, K_U64, K_RAW, K_PAD, K_TAIL, K_REST };

typedef struct call_field {
  uint8_t kind;
  uint32_t off;    /* in the struct */
  uint32_t n;      /* U32, U64: values; RAW: bytes; TAIL: bytes per element */
  uint32_t max;    /* TAIL: elements; REST: bytes */
  uint32_t lenoff; /* TAIL: offset of its u32 length field in the struct */
  const char *name;
} call_field_t;

typedef int (*call_enc_fn)(const void *in, uint8_t *out, call_view_t *tails);
typedef int (*call_dec_fn)(const uint8_t *p, size_t len, void *out, size_t *used);

struct call_msg {
  const char *name;
  const call_field_t *f;
  uint32_t nf;
  uint32_t fixed;
  call_enc_fn enc;
  call_dec_fn dec;
};

/* ---- the fast path: straight-line code per message ---- */

/* Fixed fields, read from p (the length was checked once). */
#define R_U32(f, a, b, c) o->f = wire_le_rd32(p), p += 4;
#define R_I32(f, a, b, c) o->f = (int32_t)wire_le_rd32(p), p += 4;
#define R_F32(f, a, b, c)                                                                          \
  {                                                                                                \
    uint32_t v_ = wire_le_rd32(p);                                                                   \
    memcpy(&o->f, &v_, 4);                                                                         \
    p += 4;                                                                                        \
  }
#define R_U64(f, a, b, c) o->f = wire_le_rd64(p), p += 8;
#define R_U32X(f, a, b, c)                                                                         \
  for (int k_ = 0; k_ < (a); k_++, p += 4)                                                         \
    o->f[k_] = wire_le_rd32(p);
#define R_I32X(f, a, b, c)                                                                         \
  for (int k_ = 0; k_ < (a); k_++, p += 4)                                                         \
    o->f[k_] = (int32_t)wire_le_rd32(p);
#define R_U64X(f, a, b, c)                                                                         \
  for (int k_ = 0; k_ < (a); k_++, p += 8)                                                         \
    o->f[k_] = wire_le_rd64(p);
#define R_CHARS(f, a, b, c) memcpy(o->f, p, a), p += (a);
#define R_BYTES(f, a, b, c) memcpy(o->f, p, a), p += (a);
#define R_PAD(f, a, b, c)   o->f = 0, p += 4;
#define R_TAIL(f, a, b, c)
#define R_REST(f, a, b, c)
#define READ(T, K, f, a, b, c) R_##K(f, a, b, c)
/* Tails, after every fixed field. */
#define RT_TAIL(f, a, b, c)                                                                        \
  if (o->a > (c) || (size_t)o->a * (b) > (size_t)(end - p))                                        \
    return -EPROTO;                                                                                \
  o->f.p = p, o->f.len = (size_t)o->a * (b), p += o->f.len;
#define RT_REST(f, a, b, c)                                                                        \
  if ((size_t)(end - p) > (a))                                                                     \
    return -EPROTO;                                                                                \
  o->f.p = p, o->f.len = (size_t)(end - p), p = end;
#define RT_U32(f, a, b, c)
#define RT_I32(f, a, b, c)
#define RT_F32(f, a, b, c)
#define RT_U64(f, a, b, c)
#define RT_U32X(f, a, b, c)
#define RT_I32X(f, a, b, c)
#define RT_U64X(f, a, b, c)
#define RT_CHARS(f, a, b, c)
#define RT_BYTES(f, a, b, c)
#define RT_PAD(f, a, b, c)
#define READ_TAIL(T, K, f, a, b, c) RT_##K(f, a, b, c)
/* Fixed fields, written to q. */
#define W_U32(f, a, b, c) wire_le_wr32(q, i->f), q += 4;
#define W_I32(f, a, b, c) wire_le_wr32(q, (uint32_t)i->f), q += 4;
#define W_F32(f, a, b, c)                                                                          \
  {                                                                                                \
    uint32_t v_;                                                                                   \
    memcpy(&v_, &i->f, 4);                                                                         \
    wire_le_wr32(q, v_);                                                                             \
    q += 4;                                                                                        \
  }
#define W_U64(f, a, b, c) wire_le_wr64(q, i->f), q += 8;
#define W_U32X(f, a, b, c)                                                                         \
  for (int k_ = 0; k_ < (a); k_++, q += 4)                                                         \
    wire_le_wr32(q, i->f[k_]);
#define W_I32X(f, a, b, c)                                                                         \
  for (int k_ = 0; k_ < (a); k_++, q += 4)                                                         \
    wire_le_wr32(q, (uint32_t)i->f[k_]);
#define W_U64X(f, a, b, c)                                                                         \
  for (int k_ = 0; k_ < (a); k_++, q += 8)                                                         \
    wire_le_wr64(q, i->f[k_]);
#define W_CHARS(f, a, b, c) memcpy(q, i->f, a), q += (a);
#define W_BYTES(f, a, b, c) memcpy(q, i->f, a), q += (a);
#define W_PAD(f, a, b, c)   wire_le_wr32(q, 0), q += 4;
#define W_TAIL(f, a, b, c)
#define W_REST(f, a, b, c)
#define WRITE(T, K, f, a, b, c) W_##K(f, a, b, c)
/* Tails: checked against their length field and limit, returned as views. */
#define WT_TAIL(f, a, b, c)                                                                        \
  if (i->a > (c) || i->f.len != (size_t)i->a * (b) || (i->f.len && !i->f.p))                       \
    return -EINVAL;                                                                                \
  tails[nt++] = i->f;
#define WT_REST(f, a, b, c)                                                                        \
  if (i->f.len > (a) || (i->f.len && !i->f.p))                                                     \
    return -EINVAL;                                                                                \
  tails[nt++] = i->f;
#define WT_U32(f, a, b, c)
#define WT_I32(f, a, b, c)
#define WT_F32(f, a, b, c)
#define WT_U64(f, a, b, c)
#define WT_U32X(f, a, b, c)
#define WT_I32X(f, a, b, c)
#define WT_U64X(f, a, b, c)
#define WT_CHARS(f, a, b, c)
#define WT_BYTES(f, a, b, c)
#define WT_PAD(f, a, b, c)
#define WRITE_TAIL(T, K, f, a, b, c) WT_##K(f, a, b, c)

/* A function, not an expression: an empty message's fixed size is 0. */
static inline bool too_short(size_t len, size_t fixed) {
  return len < fixed;
}

/* enc_X / dec_X of one message: nothing is written when a tail is refused. */
#define FAST(fn, T, LIST, FIXED)                                                                   \
  static int enc_##fn(const void *in, uint8_t *q, call_view_t *tails) {                            \
    const T *i = in;                                                                               \
    int nt = 0;                                                                                    \
    (void)i, (void)q, (void)tails;                                                                 \
    LIST(WRITE_TAIL, T)                                                                            \
    LIST(WRITE, T)                                                                                 \
    return nt;                                                                                     \
  }                                                                                                \
  static int dec_##fn(const uint8_t *p, size_t len, void *out, size_t *used) {                     \
    T *o = out;                                                                                    \
    const uint8_t *start = p, *end = p + len;                                                      \
    (void)o;                                                                                       \
    if (too_short(len, FIXED))                                                                     \
      return -EPROTO;                                                                              \
    LIST(READ, T)                                                                                  \
    LIST(READ_TAIL, T)                                                                             \
    if (used)                                                                                      \
      *used = (size_t)(p - start);                                                                 \
    else if (p != end)                                                                             \
      return -EPROTO;                                                                              \
    return 0;                                                                                      \
  }
#define CALL_REC(NAME, name) FAST(name, call_##name##_t, CALL_REC_##NAME, CALL_##NAME##_FIXED)
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  FAST(name##_req, call_##name##_req_t, CALL_REQ_##NAME, CALL_##NAME##_REQ_FIXED)                  \
  FAST(name##_rep, call_##name##_rep_t, CALL_REP_##NAME, CALL_##NAME##_REP_FIXED)
#include "wire/call.def"
#undef CALL_OP
#undef CALL_REC

/* ---- descriptors: what the generic decoder walks for a reason ---- */

#define D_U32(M, f, a, b, c)   {K_U32, offsetof(M, f), 1, 0, 0, #f},
#define D_I32(M, f, a, b, c)   {K_U32, offsetof(M, f), 1, 0, 0, #f},
#define D_F32(M, f, a, b, c)   {K_U32, offsetof(M, f), 1, 0, 0, #f},
#define D_U64(M, f, a, b, c)   {K_U64, offsetof(M, f), 1, 0, 0, #f},
#define D_U32X(M, f, a, b, c)  {K_U32, offsetof(M, f), a, 0, 0, #f},
#define D_I32X(M, f, a, b, c)  {K_U32, offsetof(M, f), a, 0, 0, #f},
#define D_U64X(M, f, a, b, c)  {K_U64, offsetof(M, f), a, 0, 0, #f},
#define D_CHARS(M, f, a, b, c) {K_RAW, offsetof(M, f), a, 0, 0, #f},
#define D_BYTES(M, f, a, b, c) {K_RAW, offsetof(M, f), a, 0, 0, #f},
#define D_PAD(M, f, a, b, c)   {K_PAD, offsetof(M, f), 1, 0, 0, #f},
#define D_TAIL(M, f, a, b, c)  {K_TAIL, offsetof(M, f), b, c, offsetof(M, a), #f},
#define D_REST(M, f, a, b, c)  {K_REST, offsetof(M, f), 1, a, 0, #f},
#define DESC(M, K, f, a, b, c) D_##K(M, f, a, b, c)
#define NF(arr)                (uint32_t)(sizeof(arr) / sizeof(arr[0]) - 1)

/* Each array ends with a sentinel so an empty message is still an array. */
#define CALL_REC(NAME, name)                                                                       \
  static const call_field_t f_##name[] = {CALL_REC_##NAME(DESC, call_##name##_t){0, 0, 0, 0, 0, 0}};
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  static const call_field_t f_##name##_req[] = {                                                   \
      CALL_REQ_##NAME(DESC, call_##name##_req_t){0, 0, 0, 0, 0, 0}};                               \
  static const call_field_t f_##name##_rep[] = {                                                   \
      CALL_REP_##NAME(DESC, call_##name##_rep_t){0, 0, 0, 0, 0, 0}};
#include "wire/call.def"
#undef CALL_OP
#undef CALL_REC

#define CALL_REC(NAME, name)                                                                       \
  const call_msg_t call_msg_##name = {#NAME,      f_##name,  NF(f_##name), CALL_##NAME##_FIXED,    \
                                      enc_##name, dec_##name};
#include "wire/call.def"
#undef CALL_REC

typedef struct op_info {
  call_msg_t req, rep;
  unsigned modes;
  int by;
} op_info_t;

static const op_info_t ops[CALL_OP_COUNT] = {
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  [number] = {{#NAME " request", f_##name##_req, NF(f_##name##_req), CALL_##NAME##_REQ_FIXED,      \
               enc_##name##_req, dec_##name##_req},                                                \
              {#NAME " reply", f_##name##_rep, NF(f_##name##_rep), CALL_##NAME##_REP_FIXED,        \
               enc_##name##_rep, dec_##name##_rep},                                                \
              modes,                                                                               \
              by},
#include "wire/call.def"
#undef CALL_OP
};

const call_msg_t *call_req_msg(uint32_t op) {
  return op < CALL_OP_COUNT && ops[op].req.name ? &ops[op].req : NULL;
}

const call_msg_t *call_rep_msg(uint32_t op) {
  return op < CALL_OP_COUNT && ops[op].rep.name ? &ops[op].rep : NULL;
}

const char *call_op_name(uint32_t op) {
  static const char *const names[CALL_OP_COUNT] = {
#define CALL_OP(NAME, name, number, modes, by) [number] = #NAME,
#include "wire/call.def"
#undef CALL_OP
  };
  return op < CALL_OP_COUNT && names[op] ? names[op] : "?";
}

unsigned call_op_modes(uint32_t op) {
  return op < CALL_OP_COUNT ? ops[op].modes : 0;
}

int call_op_by(uint32_t op) {
  return op < CALL_OP_COUNT ? ops[op].by : 0;
}

size_t call_msg_fixed(const call_msg_t *m) {
  return m->fixed;
}

int call_msg_ntails(const call_msg_t *m) {
  int n = 0;
  for (uint32_t i = 0; i < m->nf; i++)
    n += m->f[i].kind == K_TAIL || m->f[i].kind == K_REST;
  return n;
}

/* ---- encoding ---- */

int call_encode(const call_msg_t *m, const void *in, uint8_t *out, call_view_t *tails) {
  return m->enc(in, out, tails);
}

int call_put(const call_msg_t *m, const void *in, wire_buf_t *b) {
  call_view_t tails[CALL_TAILS_MAX];
  int nt, rc;
  if ((rc = wire_buf_reserve(b, m->fixed)) != 0)
    return rc;
  nt = call_encode(m, in, b->data + b->len, tails);
  if (nt < 0)
    return nt;
  b->len += m->fixed;
  for (int i = 0; i < nt; i++)
    if ((rc = wire_buf_put_bytes(b, tails[i].p, tails[i].len)) != 0)
      return rc;
  return 0;
}

/* ---- decoding ---- */

static int fail(call_why_t *why, const call_msg_t *m, const char *what, const char *field) {
  if (why)
    snprintf(why->text, sizeof(why->text), "%s: %s%s", m->name, what, field ? field : "");
  return -EPROTO;
}

/* Reads tail f (its length field already decoded into out). */
static int decode_tail(const call_msg_t *m, const call_field_t *f, uint8_t *out, const uint8_t *p,
                       size_t left, size_t *took, call_why_t *why) {
  call_view_t v = {p, left};
  if (f->kind == K_REST) {
    if (left > f->max)
      return fail(why, m, "over its limit: field ", f->name);
  } else {
    uint32_t count;
    memcpy(&count, out + f->lenoff, 4);
    if (count > f->max)
      return fail(why, m, "over its limit: field ", f->name);
    v.len = (size_t)count * f->n;
    if (v.len > left)
      return fail(why, m, "truncated at field ", f->name);
  }
  memcpy(out + f->off, &v, sizeof(v));
  *took = v.len;
  return 0;
}

/* Walks m's descriptors over the bytes; 0, or -EPROTO with the reason. */
static int decode_why(const call_msg_t *m, const void *p_, size_t len, void *out_, size_t *used,
                      call_why_t *why) {
  const uint8_t *p = p_, *start = p_;
  uint8_t *out = out_;
  for (uint32_t i = 0; i < m->nf; i++) {
    const call_field_t *f = &m->f[i];
    size_t left = len - (size_t)(p - start), need = 4, took = 0;
    uint32_t v32;
    uint64_t v64;
    if (f->kind == K_TAIL || f->kind == K_REST) {
      if (decode_tail(m, f, out, p, left, &took, why) != 0)
        return -EPROTO;
      p += took;
      continue;
    }
    need = f->kind == K_U32   ? 4 * (size_t)f->n
           : f->kind == K_U64 ? 8 * (size_t)f->n
           : f->kind == K_RAW ? f->n
                              : 4;
    if (need > left)
      return fail(why, m, "truncated at field ", f->name);
    switch (f->kind) {
    case K_U32:
      for (uint32_t k = 0; k < f->n; k++) {
        v32 = wire_le_rd32(p + 4 * k);
        memcpy(out + f->off + 4 * k, &v32, 4);
      }
      break;
    case K_U64:
      for (uint32_t k = 0; k < f->n; k++) {
        v64 = wire_le_rd64(p + 8 * k);
        memcpy(out + f->off + 8 * k, &v64, 8);
      }
      break;
    case K_RAW:
      memcpy(out + f->off, p, f->n);
      break;
    default: /* PAD */
      memset(out + f->off, 0, 4);
      break;
    }
    p += need;
  }
  if (used)
    *used = (size_t)(p - start);
  else if ((size_t)(p - start) != len)
    return fail(why, m, "bytes after the last field", NULL);
  return 0;
}

int call_decode(const call_msg_t *m, const void *p, size_t len, void *out, size_t *used,
                call_why_t *why) {
  if (m->dec(p, len, out, used) == 0)
    return 0;
  /* Refused: the descriptors say where (the fast path and they agree:
   * tests/test-wire-call.c checks every truncation of every message). */
  if (decode_why(m, p, len, out, used, why) == 0)
    return fail(why, m, "refused", NULL);
  return -EPROTO;
}

/* ---- headers ---- */

void call_hdr_write(uint8_t out[CALL_HDR_LEN], uint32_t op, uint32_t flags, uint32_t len) {
  call_hdr_t h = {.op = op, .flags = flags, .len = len};
  (void)call_encode(&call_msg_hdr, &h, out, NULL);
}

void call_hdr_read(const uint8_t in[CALL_HDR_LEN], call_hdr_t *h) {
  (void)call_decode(&call_msg_hdr, in, CALL_HDR_LEN, h, NULL, NULL);
}

void call_reply_hdr_write(uint8_t out[CALL_REPLY_HDR_LEN], uint32_t result, uint32_t len) {
  call_reply_hdr_t h = {.result = result, .len = len};
  (void)call_encode(&call_msg_reply_hdr, &h, out, NULL);
}

void call_reply_hdr_read(const uint8_t in[CALL_REPLY_HDR_LEN], call_reply_hdr_t *h) {
  (void)call_decode(&call_msg_reply_hdr, in, CALL_REPLY_HDR_LEN, h, NULL, NULL);
}
