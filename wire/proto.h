/* proto.h: the Tally wire format as tables (internal to wire/ and its tests).
 *
 * wire/PROTOCOL.md is the normative text; this header carries the same
 * numbers in one place for the code, and tests/test-wire-frame.c checks the
 * encoder against the tables below byte by byte.  All integers little-endian.
 *
 * Frame header, WIRE__HDR_LEN = 24 bytes:
 *   off size field    meaning
 *   0   4    magic    'T' 'A' 'L' 'Y' (0x594C4154 as u32)
 *   4   1    version  protocol version of this frame (HELLO: 1)
 *   5   1    kind     WIRE__K_* below
 *   6   2    flags    WIRE__F_* below; unknown bits are an error
 *   8   4    len      payload bytes that follow this header (<= WIRE__FRAME_MAX)
 *   12  4    aux      BATCH: record count; multi-frame message: total length;
 *                     otherwise 0
 *   16  8    id       correlation id: CALL/REPLY/BLOB_* pair up by it; else 0
 *
 * BATCH payload: aux records, each  u32 len | len bytes  (a POST body each).
 * SHM descriptor payload (flag SHMDATA): u64 pos | u32 len | u32 zero; the
 *   bytes are at data-region offset pos % region_size, contiguous.
 * ZSTD payload (flag ZSTD): u32 raw_len | zstd frame of raw_len bytes.
 */
#ifndef TALLY_WIRE_PROTO_H
#define TALLY_WIRE_PROTO_H

#include <stdint.h>

#define WIRE__MAGIC   0x594C4154u /* "TALY" read as a little-endian u32 */
#define WIRE__HDR_LEN 24

/* One frame's payload at most: 1 MiB keeps per-frame buffers modest while
 * making the 24-byte header overhead negligible (< 0.003%). */
#define WIRE__FRAME_MAX ((uint32_t)1 << 20)
/* TCP chunk size for messages above it: 256 KiB, measured in wire-bench to
 * be past the knee of loopback throughput while keeping zstd's per-chunk
 * decision fine-grained. */
#define WIRE__TCP_CHUNK ((uint32_t)256 << 10)
/* HELLO/WELCOME/REFUSE payloads are tiny; refuse anything past 4 KiB before
 * authentication (cf. Redis's pre-auth length cap). */
#define WIRE__HELLO_MAX 4096
/* Daemon-side backlog of unsent bytes per tenant (a guest that does not
 * read its replies): 1.25 GiB leaves room for one maximal reply plus small
 * ones, and bounds what one tenant can pin in daemon memory. */
#define WIRE__OUT_MAX (((size_t)5 << 30) / 4)
/* Posts up to this size go into the batch; larger ones are sent alone. */
#define WIRE__POST_INLINE_MAX 4096

enum wire__kind {
  WIRE__K_HELLO = 1,      /* g->d: versions, tenant, prio, caps, token */
  WIRE__K_WELCOME = 2,    /* d->g: chosen version, caps, timers, limits */
  WIRE__K_REFUSE = 3,     /* d->g: i32 status | str why; then close */
  WIRE__K_CALL = 4,       /* g->d: synchronous request, id != 0 */
  WIRE__K_REPLY = 5,      /* d->g: answer to CALL/BLOB_* with the same id */
  WIRE__K_POST = 6,       /* g->d: fire-and-forget request */
  WIRE__K_BATCH = 7,      /* g->d: aux POST bodies in one frame */
  WIRE__K_HEARTBEAT = 8,  /* both: sent after heartbeat_ms of silence */
  WIRE__K_BYE = 9,        /* both: orderly close; i32 status | str why */
  WIRE__K_BLOB_HAVE = 10, /* g->d: u64 content id; REPLY: u8 has */
  WIRE__K_BLOB_PUT = 11,  /* g->d: u64 content id | bytes; REPLY: i32 status */
  WIRE__K_FD = 12,        /* g->d (shm only): u64 tag; the descriptor rode the UNIX
                             socket just before (SCM_RIGHTS); REPLY: i32 status */
  WIRE__K_REGION = 13,    /* both (RDMA only, capability WIRE__CAP_RDMA_BULK): the
                             sender's landing region, WIRE__RBULK_REGION_LEN bytes
                             (table below); a SEND of its own, at most once */
  WIRE__K_NOTE = 14,      /* d->g (capability WIRE__CAP_NOTE): u32 word the daemon
                             publishes for the guest (wire_tenant_note); no reply */
  WIRE__K_MAX = 14,
};

enum wire__flag {
  WIRE__F_MORE = 1u << 0,    /* another frame of this message follows */
  WIRE__F_ZSTD = 1u << 1,    /* payload is u32 raw_len | zstd frame */
  WIRE__F_SHMDATA = 1u << 2, /* payload is a data-region descriptor */
  WIRE__F_ALL = 0x7u,
};

#define WIRE__SHMDESC_LEN 16

/* Default shared-memory data region per direction: 1 GiB of SPARSE memfd
 * (only touched pages cost memory, and pages above the first 64 MiB go back
 * after 5 s idle: shm.h).  Messages up to half of it travel as one span with
 * no join copy: 256 MiB reached 10 GB/s with a 1 GiB region where 64 MiB
 * (chunks joined by the receiver) gave 3.0-3.2 GB/s on the GPU host. */
#define WIRE__SHM_DATA_DEFAULT ((uint64_t)1 << 30)

/* FD passing (shm only): the guest sends ONE byte, WIRE__FD_BYTE, with ONE
 * descriptor in SCM_RIGHTS on the UNIX socket, then publishes a FD frame in
 * the g2d ring; the daemon pairs FD frames with received descriptors in
 * order.  At most WIRE__FD_QUEUE_MAX descriptors may wait on the daemon's
 * side for their frame: one per guest thread in wire_conn_send_fd is far
 * below it, and it bounds what a hostile guest can make the daemon hold. */
#define WIRE__FD_BYTE 'F'
/* Capability bit the guest always offers and a daemon that understands FD
 * frames grants over shm (PROTOCOL.md section 4): an older daemon ignores
 * it, and wire_conn_send_fd then answers -EOPNOTSUPP instead of sending a
 * kind that daemon would reject.  High bit: WIRE_CAP_* (wire.h) grow from
 * bit 0 for capabilities callers choose. */
#define WIRE__CAP_FD (1u << 31)
/* Capability the guest always offers and a daemon grants on RDMA tenants
 * only: both sides may announce a landing region (REGION frame) and move
 * bulk payloads with one-sided RDMA WRITE into the peer's region
 * (PROTOCOL.md section 12).  Internal like WIRE__CAP_FD. */
#define WIRE__CAP_RDMA_BULK (1u << 30)
#define WIRE__FD_QUEUE_MAX  64
/* Capability the guest always offers and a daemon that publishes notes
 * grants on every transport: the daemon may send NOTE frames (kind 14, a
 * 4-byte payload) at any time after WELCOME.  An older guest does not
 * offer it and gets none; an older daemon does not grant it, and
 * wire_conn_note then answers -EOPNOTSUPP.  Internal like WIRE__CAP_FD. */
#define WIRE__CAP_NOTE (1u << 29)
#define WIRE__NOTE_LEN 4
#define WIRE__CAPS_INTERNAL (WIRE__CAP_FD | WIRE__CAP_RDMA_BULK | WIRE__CAP_NOTE)

/* HELLO payload:
 *   off size field
 *   0   2    version_min offered
 *   2   2    version_max offered
 *   4   1    prio (0 latency-critical, 1 best-effort)
 *   5   3    zero
 *   8   4    caps offered
 *   12  4+n  tenant name (u32 n, 1..WIRE_TENANT_MAX bytes, no NUL)
 *   ..  4+m  token (u32 m, 0..WIRE_TOKEN_MAX bytes)
 * WELCOME payload:
 *   0   2    version chosen
 *   2   2    zero
 *   4   4    caps granted
 *   8   4    heartbeat_ms
 *   12  4    dead_after_ms
 *   16  8    max_msg_len
 *   24  4    shm ring bytes per direction (0 over TCP)
 *   28  4    zero
 *   32  8    shm data-region bytes per direction (0 over TCP)
 *   (shm: the memfd and the two eventfds ride along as SCM_RIGHTS)
 * REFUSE / BYE payload:  i32 status | u32 n | n bytes of text
 */
#define WIRE__WELCOME_LEN 40

/* REGION payload (kind 13, RDMA only), WIRE__RBULK_REGION_LEN = 32 bytes:
 *   off size field
 *   0   8    addr      virtual address of the sender's landing region
 *   8   8    len       D: landing-region bytes, WIRE__RBULK_REGION_MIN..MAX
 *   16  4    rkey      rkey of the landing region (remote WRITE only)
 *   20  4    ctl_rkey  rkey of the release word (remote WRITE only)
 *   24  8    ctl_addr  address of the 8-byte release word (8-aligned)
 * The peer RDMA-WRITEs payloads to addr + pos % D and announces each with a
 * data-region descriptor frame (flag SHMDATA, the 16-byte SHM descriptor
 * above: u64 pos | u32 len | u32 zero); the receiver RDMA-WRITEs the
 * position it has consumed up to (u64, little-endian) into the writer's
 * release word. */
#define WIRE__RBULK_REGION_LEN 32
/* 1 MiB..1 GiB: a region below 1 MiB could hold no span worth a WRITE
 * (WIRE__RDMA_BULK_MIN is 64 KiB), and above 1 GiB positions modulo D and
 * u32 span lengths would need more care than any sane pinning budget. */
#define WIRE__RBULK_REGION_MIN ((uint64_t)1 << 20)
#define WIRE__RBULK_REGION_MAX ((uint64_t)1 << 30)

#endif /* TALLY_WIRE_PROTO_H */
