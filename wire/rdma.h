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
 * Not done: RDMA READ/WRITE of bulk payloads from registered user memory
 * (bulk is chunked SENDs, one copy per side); see wire/README.md.
 */
#ifndef TALLY_WIRE_RDMA_H
#define TALLY_WIRE_RDMA_H

#include "wire/wire-int.h"

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define WIRE__RDMA_BUF (WIRE__TCP_CHUNK + WIRE__HDR_LEN)
/* 16 buffers per direction: 4 MiB registered each way per tenant; enough to
 * keep a 100 Gb/s link busy with 256 KiB frames. */
#define WIRE__RDMA_NBUF 16

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

#endif /* TALLY_WIRE_RDMA_H */
