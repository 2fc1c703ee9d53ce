/* call.c: the one encoder and the one decoder of the call vocabulary.
 *
 * wire/call.def expands here into a field descriptor array per message
 * (kind, offset in its struct, count, limit); call_encode and call_decode
 * walk those arrays, so a layout is written once, in the table, and every
 * message is decoded with the same bounds checks (docs/decisions.md, D7):
 * a fixed field needs its bytes, a tail's length field is checked against
 * its limit and then against the bytes left, and nothing may follow the
 * last field.  A failure names the message and the field.  Integers are
 * read and written byte-wise little-endian (wire-int.h), so any alignment
 * of the frame is fine.  Pure: no allocation except call_put's buffer.
 */
#include "wire/call.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "wire/wire-int.h"

enum { K_U32, K_U64, K_RAW, K_PAD, K_TAIL, K_REST };

typedef struct call_field {
  uint8_t kind;
  uint32_t off;    /* in the struct */
  uint32_t n;      /* U32: values; RAW: bytes; TAIL: bytes per element */
  uint32_t max;    /* TAIL: elements; REST: bytes */
  uint32_t lenoff; /* TAIL: offset of its u32 length field in the struct */
  const char *name;
} call_field_t;

struct call_msg {
  const char *name;
  const call_field_t *f;
  uint32_t nf;
  uint32_t fixed;
};

#define D_U32(M, f, a, b, c)   {K_U32, offsetof(M, f), 1, 0, 0, #f},
#define D_I32(M, f, a, b, c)   {K_U32, offsetof(M, f), 1, 0, 0, #f},
#define D_F32(M, f, a, b, c)   {K_U32, offsetof(M, f), 1, 0, 0, #f},
#define D_U64(M, f, a, b, c)   {K_U64, offsetof(M, f), 1, 0, 0, #f},
#define D_U32X(M, f, a, b, c)  {K_U32, offsetof(M, f), a, 0, 0, #f},
#define D_I32X(M, f, a, b, c)  {K_U32, offsetof(M, f), a, 0, 0, #f},
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
  const call_msg_t call_msg_##name = {#NAME, f_##name, NF(f_##name), CALL_##NAME##_FIXED};
#include "wire/call.def"
#undef CALL_REC

typedef struct op_info {
  call_msg_t req, rep;
  unsigned modes;
  int by;
} op_info_t;

static const op_info_t ops[CALL_OP_COUNT] = {
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  [number] = {{#NAME " request", f_##name##_req, NF(f_##name##_req), CALL_##NAME##_REQ_FIXED},     \
              {#NAME " reply", f_##name##_rep, NF(f_##name##_rep), CALL_##NAME##_REP_FIXED},       \
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

/* The tail f of `in`, checked against its length field and limit. */
static int tail_check(const call_field_t *f, const uint8_t *in, const call_view_t *v) {
  uint32_t count;
  if (v->len && !v->p)
    return -EINVAL;
  if (f->kind == K_REST)
    return v->len <= f->max ? 0 : -EINVAL;
  memcpy(&count, in + f->lenoff, 4);
  if (count > f->max || v->len != (size_t)count * f->n)
    return -EINVAL;
  return 0;
}

int call_encode(const call_msg_t *m, const void *in_, uint8_t *out, call_view_t *tails) {
  const uint8_t *in = in_;
  int nt = 0;
  for (uint32_t i = 0; i < m->nf; i++) {
    const call_field_t *f = &m->f[i];
    uint32_t v32;
    uint64_t v64;
    switch (f->kind) {
    case K_U32:
      for (uint32_t k = 0; k < f->n; k++, out += 4) {
        memcpy(&v32, in + f->off + 4 * k, 4);
        wire__wr32(out, v32);
      }
      break;
    case K_U64:
      memcpy(&v64, in + f->off, 8);
      wire__wr64(out, v64);
      out += 8;
      break;
    case K_RAW:
      memcpy(out, in + f->off, f->n);
      out += f->n;
      break;
    case K_PAD:
      wire__wr32(out, 0);
      out += 4;
      break;
    default: /* tails: after every fixed field (call.def) */
      memcpy(&tails[nt], in + f->off, sizeof(call_view_t));
      if (tail_check(f, in, &tails[nt]) != 0)
        return -EINVAL;
      nt++;
      break;
    }
  }
  return nt;
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

int call_decode(const call_msg_t *m, const void *p_, size_t len, void *out_, size_t *used,
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
    need = f->kind == K_U32 ? 4 * (size_t)f->n : f->kind == K_U64 ? 8 : f->kind == K_RAW ? f->n : 4;
    if (need > left)
      return fail(why, m, "truncated at field ", f->name);
    switch (f->kind) {
    case K_U32:
      for (uint32_t k = 0; k < f->n; k++) {
        v32 = wire__rd32(p + 4 * k);
        memcpy(out + f->off + 4 * k, &v32, 4);
      }
      break;
    case K_U64:
      v64 = wire__rd64(p);
      memcpy(out + f->off, &v64, 8);
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
