/* rdma.h: RDMA verbs connection resources shared by guest-rdma.c and
 * server-rdma.c (built only when configure finds rdma-core).
 *
 * One reliable-connection QP per tenant, set up with rdma_cm.  Frames travel
 * exactly as on TCP (proto.h), one frame per SEND: large messages are cut
 * into WIRE__TCP_CHUNK chunks by wire__send_frames, so a receive buffer of
 * WIRE__RDMA_BUF bytes always holds a whole frame.  Flow control is the
 * hardware's: rnr_retry_count 7 makes a sender retry until the receiver has
 * reposted a buffer.  Separate send and receive CQs (each with its own
 * completion channel) let the guest's sending thread and its reading thread
 * work without stealing each other's completions.
 * Bulk (capability WIRE__CAP_RDMA_BULK, PROTOCOL.md section 12): each side
 * registers a landing region of WIRE__RDMA_REGION_BYTES that only its peer
 * may RDMA WRITE into (its own MR, IBV_ACCESS_REMOTE_WRITE), a bounce
 * buffer of the same size for its own WRITE sources (local access only),
 * and an 8-byte release word the peer writes its consumed position into.
 * A payload of >= WIRE__RDMA_BULK_MIN bytes is copied into the bounce
 * buffer at the span rbulk.c places, WRITTEN (unsignaled) to the same
 * offset of the peer's region, and announced by a descriptor SEND posted
 * right after it on the same QP: an RC responder executes them in order, so
 * the receive completion of the SEND means the data is in place.  The
 * verbs-free rules (placement, bounds, the fallback to SENDs when the
 * region is full) live in rbulk.c and are unit-tested there; this code has
 * never run on a device.
 * Sharing: the guest's sending thread and its reading thread (which posts
 * release WRITEs) both post to the send queue and reap its CQ, so the guest
 * sets `mu`; the daemon (one loop thread) leaves it NULL.
 */
#ifndef TALLY_WIRE_RDMA_H
#define TALLY_WIRE_RDMA_H

#include "wire/wire-int.h"

#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>

#define WIRE__RDMA_BUF (WIRE__TCP_CHUNK + WIRE__HDR_LEN)
/* 16 buffers per direction: 4 MiB registered each way per tenant; enough to
 * keep a 100 Gb/s link busy with 256 KiB frames. */
#define WIRE__RDMA_NBUF 16
/* Send-queue (and send CQ) depth: each send buffer's frame may be preceded
 * by one unsignaled bulk WRITE, which holds its slot until a later signaled
 * completion is reaped (2 x NBUF); the daemon may post the WRITEs of one
 * message whose descriptors then wait in its queue (at most 4: a region
 * holds 4 quarter pieces), plus one release WRITE: 4 x NBUF covers it with
 * room to spare, far below any device's limit (thousands). */
#define WIRE__RDMA_SQ_DEPTH (4 * WIRE__RDMA_NBUF)
/* Landing region per direction per connection: 32 MiB of pinned memory on
 * each side (plus as much for the bounce buffer).  Messages up to 16 MiB
 * are one span read in place; larger ones go in 8 MiB pieces joined by the
 * receiver.  Pinning is the cost that bounds it: the daemon pins 64 MiB per
 * RDMA tenant this way. */
#define WIRE__RDMA_REGION_BYTES ((uint64_t)32 << 20)
/* wr_id values beyond the send buffers' indexes. */
#define WIRE__RDMA_WR_BULK    0x10000u /* unsignaled bulk WRITE (completes only on error) */
#define WIRE__RDMA_WR_RELEASE 0x10001u /* release-word WRITE */

/* Bulk state of one connection (NULL in wire__rdma: bulk off).  Lock story:
 * rx belongs to the reading thread (guest rx role / daemon loop), tx to the
 * sending thread (guest tx lock / daemon loop); peer and tx.d are written
 * once, before `ready` is stored with release; rel_* change only under
 * wire__rdma.mu (guest) or on the loop thread (daemon). */
typedef struct wire__rdma_bulk {
  uint8_t *land;   /* landing region: the peer WRITEs here */
  uint8_t *bounce; /* our WRITE sources, at the same offsets as the span */
  uint8_t *ctl;    /* 128 bytes: [0, 8) the peer's release word for our
                      spans (u64 LE); [64, 72) source of our release WRITE */
  struct ibv_mr *land_mr, *bounce_mr, *word_mr, *src_mr;
  wire__rbulk_rx rx; /* reader: our landing region (reading side) */
  wire__rbulk_tx tx; /* writer: the peer's region (tx.d = 0 until REGION) */
  wire__rbulk_region peer;
  int ready;         /* tx usable (set with release after the peer's REGION:
                        the guest's reader sets it, its sender reads it) */
  bool rel_inflight; /* a release WRITE is posted and not yet reaped */
  uint64_t rel_want; /* latest position to publish */
  uint64_t rel_sent; /* position of the last release posted */
} wire__rdma_bulk;

typedef struct wire__rdma {
  struct rdma_cm_id *id;
  struct ibv_pd *pd;
  struct ibv_comp_channel *sch, *rch;
  struct ibv_cq *scq, *rcq;
  struct ibv_mr *smr, *rmr;
  uint8_t *sbuf, *rbuf;        /* WIRE__RDMA_NBUF x WIRE__RDMA_BUF each */
  bool sfree[WIRE__RDMA_NBUF]; /* send buffer idle */
  int nfree;                   /* count of sfree */
  bool qp;                     /* rdma_create_qp done */
  wire__rdma_bulk *bulk;       /* NULL: no bulk resources (chunked SENDs) */
  bool peer_region;            /* the peer's REGION arrived (at most one) */
  pthread_mutex_t *mu;         /* guest: serialises posting and reaping */
} wire__rdma;

/* After address resolution (guest) or on a connect request (daemon): makes
 * PD, CQs, QP, buffers, and posts every receive buffer. */
int wire__rdma_setup(wire__rdma *r, struct rdma_cm_id *id);
void wire__rdma_teardown(wire__rdma *r);
int wire__rdma_post_recv(wire__rdma *r, int i);
/* Reaps send completions without blocking; returns how many, or <0 (a
 * failed work request: the connection is broken). */
int wire__rdma_reap_sends(wire__rdma *r);
/* Copies one frame (iov) into a free send buffer and posts it; -EAGAIN
 * when every buffer is in flight. */
int wire__rdma_send_frame(wire__rdma *r, const struct iovec *iov, int cnt);
/* Polls one receive completion: 0 with *idx and *len set, -EAGAIN when none, <0. */
int wire__rdma_poll_recv(wire__rdma *r, int *idx, uint32_t *len);
/* Re-arms a CQ after draining its channel event (comp channel fd readable). */
void wire__rdma_rearm(struct ibv_comp_channel *ch);
struct rdma_conn_param wire__rdma_conn_param(void);

/* Registers the landing region, bounce buffer and release word (after the
 * handshake granted WIRE__CAP_RDMA_BULK).  0, or <0 with r->bulk NULL. */
int wire__rdma_bulk_setup(wire__rdma *r);
/* Our REGION announcement (requires r->bulk). */
void wire__rdma_bulk_region(const wire__rdma *r, wire__rbulk_region *out);
/* The peer's REGION: -EPROTO if one came before; ignored (0) when we have
 * no bulk resources or the peer's region is larger than our bounce buffer.
 * Otherwise, from then on we may WRITE into its region. */
int wire__rdma_bulk_peer(wire__rdma *r, const wire__rbulk_region *peer);
/* True when messages may be WRITTEN to the peer. */
bool wire__rdma_bulk_ready(const wire__rdma *r);
/* wire__rbulk_ops.write and .released over this connection (arg: the
 * wire__rdma); each transport adds its own wait policy. */
int wire__rdma_bulk_write(void *arg, uint64_t pos, const struct iovec *iov, int cnt, size_t off,
                          size_t n);
uint64_t wire__rdma_bulk_released(void *arg);
/* Descriptor resolver for the assembler (ctx: the wire__rdma). */
const uint8_t *wire__rdma_bulk_resolve(void *ctx, uint64_t pos, uint32_t len);
/* Publishes the consumed position to the peer's release word when it
 * advanced (one release WRITE in flight at most; a newer position waits
 * for its completion).  0 or <0 (queue pair broken). */
int wire__rdma_bulk_release(wire__rdma *r);

#endif /* TALLY_WIRE_RDMA_H */
