/* call.h: the CUDA call vocabulary spoken between guestlib/ and hostd/.
 *
 * wire/ carries frames and knows no CUDA; this header says what is inside a
 * frame, expanded from the one table wire/call.def (ops, their requests and
 * replies, the records inside them).  guestlib/ encodes requests and decodes
 * replies with it, hostd/ the other way round; neither includes the other.
 * No CUDA header here: CUDA values travel as fixed-width integers.
 *
 * One tenant has one ordered channel: the guest sends requests in program
 * order, the host executes them in that order and answers every request
 * that is not CALL_ASYNC, in order, so no sequence number is needed.
 * Fire-and-forget requests (launches, async copies and memsets, event
 * records) are batched by the guest and sent ahead of the next synchronous
 * request; their errors are kept by the host and returned by the next
 * request flagged CALL_SYNCPOINT, as CUDA reports asynchronous errors
 * (docs/decisions.md, D3).  Each request is one wire payload: a CALL_HDR
 * record (16 bytes) then its arguments; each reply a CALL_REPLY_HDR record
 * (8 bytes) then its results.
 *
 * Use: fill a call_<op>_req_t and call_<op>_req_encode() it into its fixed
 * bytes plus up to two tails (views the caller sends as they are: no copy);
 * the receiver call_<op>_req_decode()s the bytes into the same struct, its
 * tails views into the frame.  Every decode is bounds-checked; a failure
 * returns -EPROTO with a reason naming the message and field
 * ("LAUNCH request: truncated at field grid") (docs/decisions.md, D7).
 */
#ifndef TALLY_WIRE_CALL_H
#define TALLY_WIRE_CALL_H

#include <stddef.h>
#include <stdint.h>

#include "wire/wire.h"

#define CALL_ASYNC         1u
#define CALL_SYNCPOINT     2u
#define CALL_HDR_LEN       16
#define CALL_REPLY_HDR_LEN 8
/* One frame holds at most 16 MiB of arguments: copies are cut into chunks of
 * CALL_CHUNK so neither side ever buffers a whole large transfer, and a
 * decoder can refuse a larger length before allocating. */
#define CALL_MAX_LEN          (16u << 20)
#define CALL_CHUNK            (8u << 20)
#define CALL_BLOB_MAX         (1u << 30) /* 1 GiB: cuBLASLt's largest fatbins are far below */
#define CALL_PROTO_VERSION    13 /* 2: 16 function attributes; 3: VMM and pool ops; 4: graphs;
                                    5: arrays, textures, surfaces; 6: tensor maps; 7: LINK;
                                    8: GRAPH_DOT, FUNC_ATTRS, library kernels described
                                    without attributes; 9: CTX_LIMIT; 10: GRAPH_EXEC_NODE,
                                    GRAPH_SET, GRAPH_MEM, GRAPH_CLONE, GRAPH_FIND;
                                    11: CALL_FD_ELSEWHERE, GRAPH_NODE,
                                    GRAPH_ENABLE, memory nodes,
                                    GRAPH_ATTR, CAPTURE_DEPS;
                                    12: GRAPH_UNDEP, GRAPH_NODE_DEL;
                                    13: BLASLT_LAYOUT */
/* A descriptor of shared host memory the guest passes (wire_conn_send_fd,
 * tag = its address in the guest) is answered 0 when tallyd mapped it at that
 * same address, so the address is a device address there as well, and
 * CALL_FD_ELSEWHERE when it is mapped at another (copies naming the tag work;
 * a kernel or a device-side call given the guest's address would not);
 * a negative errno when it was refused. */
#define CALL_FD_ELSEWHERE     1
#define CALL_NAME_MAX         256
#define CALL_ATTR_MAX         160 /* > CU_DEVICE_ATTRIBUTE_MAX of CUDA 13.0 (148) */
#define CALL_MAX_DEVICES      16
#define CALL_MAX_PARAMS       1024 /* kernel parameters per function */
#define CALL_FUNC_NAME_MAX    4096 /* names are shorter than this */
#define CALL_FUNC_ATTRS       16   /* CU_FUNC_ATTRIBUTE_MAX of CUDA 13.0 */
#define CALL_SNAPSHOT_SIZE    944
#define CALL_LAUNCH_ATTR_SIZE 72 /* sizeof(CUlaunchAttribute) on x86-64 and aarch64 */
#define CALL_ATTR_VALUE_SIZE  64 /* sizeof(CUlaunchAttributeValue) */
#define CALL_LAUNCH_ATTRS_MAX 64
#define CALL_LAUNCH_ARGS_MAX  32768
#define CALL_TAILS_MAX        2
#define CALL_GRAPH_DEPS_MAX   4096 /* nodes a graph node or capture depends on */
#define CALL_GRAPH_NODES_MAX  8192 /* nodes one GRAPH_NODES reply lists (more: pages) */
/* The word tallyd publishes to each best-effort tenant (wire_tenant_note;
 * 0 until one arrives, and with a daemon that publishes none):
 *   bit 0 NO_LC  no latency-critical tenant is connected, so the tenant's
 *                work need not be cut to the scheduler's budget (the
 *                interposed cuBLAS runs GEMMs whole while it is set)
 * Other bits are zero. */
#define CALL_NOTE_NO_LC 1u
/* LINK (wire/call.def): one input's record, the most inputs in one link */
#define CALL_LINK_INPUT_SIZE 16
#define CALL_LINK_INPUTS_MAX 256
/* GRAPH_ADD kinds (wire/call.def) */
#define CALL_GNODE_EMPTY      0
#define CALL_GNODE_KERNEL     1
#define CALL_GNODE_MEMCPY     2
#define CALL_GNODE_MEMSET     3
#define CALL_GNODE_EVENT_REC  4
#define CALL_GNODE_EVENT_WAIT 5
#define CALL_GNODE_CHILD      6
#define CALL_GNODE_HOST       7
#define CALL_GNODE_MEM_ALLOC  8
#define CALL_GNODE_MEM_FREE   9
#define CALL_GNODE_KINDS      10
/* TENSOR_MAP (wire/call.def): the kinds, the largest rank, the map's size */
#define CALL_TMAP_TILED       0
#define CALL_TMAP_IM2COL      1
#define CALL_TMAP_IM2COL_WIDE 2
#define CALL_TMAP_KINDS       3
#define CALL_TMAP_RANK_MAX    5
#define CALL_TMAP_BYTES       128 /* sizeof(CUtensorMap) */
/* BLASLT_LAYOUT (wire/call.def): bytes of each of the two objects */
#define CALL_BLASLT_LAYOUT_BYTES 64
/* ARRAY_COPY sides (wire/call.def) */
#define CALL_SIDE_HOST   0
#define CALL_SIDE_DEVICE 1
#define CALL_SIDE_ARRAY  2

/* UUID of the driver's private context table, 21318c60-9714-3248-8ca6-41ff7324c8f2:
 * the guest emulates it (guestlib/export.c), tallyd asks its own driver for
 * the snapshot's ident_s39 (hostd/gpu-cuda.c). */
#define CALL_UUID_CTX_IDENT                                                                        \
  { 0x21, 0x31, 0x8c, 0x60, 0x97, 0x14, 0x32, 0x48, 0x8c, 0xa6, 0x41, 0xff, 0x73, 0x24, 0xc8, 0xf2 }

/* UUID of cuBLASLt's private driver table, 1734dc26-800d-4745-8726-c0f1e7dd8bca:
 * the guest serves its slots 3 and 12 (guestlib/export.c), tallyd asks its own
 * driver's slot 3 for BLASLT_LAYOUT (hostd/gpu-cuda.c). */
#define CALL_UUID_BLASLT                                                                           \
  { 0x17, 0x34, 0xdc, 0x26, 0x80, 0x0d, 0x47, 0x45, 0x87, 0x26, 0xc0, 0xf1, 0xe7, 0xdd, 0x8b, 0xca }

/* Modes and answering side of an op (call.def). */
#define CALL_M_CALL      1u
#define CALL_M_POST      2u
#define CALL_M_SYNCPOINT 4u
#define CALL_M_PROMPT    8u /* a post the guest sends at once, not batched (call.def) */
#define CALL_BY_WORKER   0
#define CALL_BY_LOOP     1

/* A run of bytes inside a frame (decoded) or the caller's memory (encoded). */
typedef struct call_view {
  const uint8_t *p;
  size_t len;
} call_view_t;

/* Why a decode failed: a message and field name, for the daemon's log. */
typedef struct call_why {
  char text[96];
} call_why_t;

typedef enum call_op {
#define CALL_OP(NAME, name, number, modes, by) CALL_OP_##NAME = (number),
#include "wire/call.def"
#undef CALL_OP
  CALL_OP_COUNT
} call_op_t;

/* ---- structs: call_<op>_req_t, call_<op>_rep_t, call_<rec>_t ---- */
#define CALL__M_U32(f, a)              uint32_t f;
#define CALL__M_I32(f, a)              int32_t f;
#define CALL__M_U64(f, a)              uint64_t f;
#define CALL__M_F32(f, a)              float f;
#define CALL__M_U32X(f, a)             uint32_t f[a];
#define CALL__M_I32X(f, a)             int32_t f[a];
#define CALL__M_U64X(f, a)             uint64_t f[a];
#define CALL__M_CHARS(f, a)            char f[a];
#define CALL__M_BYTES(f, a)            uint8_t f[a];
#define CALL__M_PAD(f, a)              uint32_t f;
#define CALL__M_TAIL(f, a)             call_view_t f;
#define CALL__M_REST(f, a)             call_view_t f;
#define CALL__MEMBER(M, K, f, a, b, c) CALL__M_##K(f, a)
/* Bytes of the fixed part (everything before the tails). */
#define CALL__S_U32(a)               4
#define CALL__S_I32(a)               4
#define CALL__S_U64(a)               8
#define CALL__S_F32(a)               4
#define CALL__S_U32X(a)              4 * (a)
#define CALL__S_I32X(a)              4 * (a)
#define CALL__S_U64X(a)              8 * (a)
#define CALL__S_CHARS(a)             (a)
#define CALL__S_BYTES(a)             (a)
#define CALL__S_PAD(a)               4
#define CALL__S_TAIL(a)              0
#define CALL__S_REST(a)              0
#define CALL__SIZE(M, K, f, a, b, c) +CALL__S_##K(a)

/* An empty message still gets one (unused) member: ISO C has no empty struct. */
#define CALL_REC(NAME, name)                                                                       \
  typedef struct call_##name {                                                                     \
    CALL_REC_##NAME(CALL__MEMBER, _) char call__end_;                                              \
  } call_##name##_t;                                                                               \
  enum { CALL_##NAME##_FIXED = 0 CALL_REC_##NAME(CALL__SIZE, _) };
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  typedef struct call_##name##_req {                                                               \
    CALL_REQ_##NAME(CALL__MEMBER, _) char call__end_;                                              \
  } call_##name##_req_t;                                                                           \
  typedef struct call_##name##_rep {                                                               \
    CALL_REP_##NAME(CALL__MEMBER, _) char call__end_;                                              \
  } call_##name##_rep_t;                                                                           \
  enum {                                                                                           \
    CALL_##NAME##_REQ_FIXED = 0 CALL_REQ_##NAME(CALL__SIZE, _),                                    \
    CALL_##NAME##_REP_FIXED = 0 CALL_REP_##NAME(CALL__SIZE, _)                                     \
  };
#include "wire/call.def"
#undef CALL_OP
#undef CALL_REC

_Static_assert(CALL_SNAPSHOT_FIXED == CALL_SNAPSHOT_SIZE, "snapshot layout (call.def)");
_Static_assert(CALL_HDR_FIXED == CALL_HDR_LEN, "request header (call.def)");
_Static_assert(CALL_REPLY_HDR_FIXED == CALL_REPLY_HDR_LEN, "reply header (call.def)");

/* The largest fixed part of any request: an encoder's stack buffer. */
#define CALL_REQ_FIXED_MAX 192
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  _Static_assert(CALL_##NAME##_REQ_FIXED <= CALL_REQ_FIXED_MAX, #NAME ": CALL_REQ_FIXED_MAX");
#include "wire/call.def"
#undef CALL_OP

/* ---- the generic codec (call.c) ---- */
typedef struct call_msg call_msg_t; /* one message's field descriptors */

/* Request, reply of op (NULL for an op number not in the table); records. */
const call_msg_t *call_req_msg(uint32_t op);
const call_msg_t *call_rep_msg(uint32_t op);
extern const call_msg_t call_msg_hdr, call_msg_reply_hdr, call_msg_snapshot, call_msg_func;
/* The op's name ("LAUNCH"), modes (CALL_M_*) and answering side; "?" / 0. */
const char *call_op_name(uint32_t op);
unsigned call_op_modes(uint32_t op);
int call_op_by(uint32_t op);
/* Bytes of m's fixed part; its number of tails. */
size_t call_msg_fixed(const call_msg_t *m);
int call_msg_ntails(const call_msg_t *m);

/* Writes m's fixed part from the struct `in` to out (call_msg_fixed bytes)
 * and points tails[] at in's tails, in wire order.  Returns the number of
 * tails, or -EINVAL when a tail disagrees with its length field or exceeds
 * its limit (nothing to send then). */
int call_encode(const call_msg_t *m, const void *in, uint8_t *out, call_view_t *tails);
/* Appends the whole encoding of `in` to b.  0, -EINVAL (as above), -ENOMEM. */
int call_put(const call_msg_t *m, const void *in, wire_buf_t *b);
/* Decodes the struct `out` from p[0..len).  With used NULL every byte must
 * belong to the message; else *used gets the bytes it took (a record in a
 * sequence).  Tails are views into p.  Returns 0 or -EPROTO with *why filled
 * (out is then partly written; why may be NULL). */
int call_decode(const call_msg_t *m, const void *p, size_t len, void *out, size_t *used,
                call_why_t *why);

/* Typed wrappers, one set per op and record:
 *   call_<op>_req_encode(in, out, tails), call_<op>_req_put(in, b),
 *   call_<op>_req_decode(p, len, out, why), the same for _rep,
 *   call_<rec>_put(in, b), call_<rec>_decode(p, len, out, used, why). */
#define CALL__WRAP(pre, msg)                                                                       \
  static inline int pre##_encode(const pre##_t *in, uint8_t *out, call_view_t *tails) {            \
    return call_encode(msg, in, out, tails);                                                       \
  }                                                                                                \
  static inline int pre##_put(const pre##_t *in, wire_buf_t *b) {                                  \
    return call_put(msg, in, b);                                                                   \
  }                                                                                                \
  static inline int pre##_decode(const void *p, size_t len, pre##_t *out, call_why_t *why) {       \
    return call_decode(msg, p, len, out, NULL, why);                                               \
  }
#define CALL_OP(NAME, name, number, modes, by)                                                     \
  CALL__WRAP(call_##name##_req, call_req_msg(number))                                              \
  CALL__WRAP(call_##name##_rep, call_rep_msg(number))
#include "wire/call.def"
#undef CALL_OP
#define CALL_REC(NAME, name)                                                                       \
  static inline int call_##name##_put(const call_##name##_t *in, wire_buf_t *b) {                  \
    return call_put(&call_msg_##name, in, b);                                                      \
  }                                                                                                \
  static inline int call_##name##_decode(const void *p, size_t len, call_##name##_t *out,          \
                                         size_t *used, call_why_t *why) {                          \
    return call_decode(&call_msg_##name, p, len, out, used, why);                                  \
  }
#include "wire/call.def"
#undef CALL_REC

/* Headers: fixed, so written and read in place (hot path, no allocation). */
void call_hdr_write(uint8_t out[CALL_HDR_LEN], uint32_t op, uint32_t flags, uint32_t len);
void call_hdr_read(const uint8_t in[CALL_HDR_LEN], call_hdr_t *h);
void call_reply_hdr_write(uint8_t out[CALL_REPLY_HDR_LEN], uint32_t result, uint32_t len);
void call_reply_hdr_read(const uint8_t in[CALL_REPLY_HDR_LEN], call_reply_hdr_t *h);

#endif /* TALLY_WIRE_CALL_H */
