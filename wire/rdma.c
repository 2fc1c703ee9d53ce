/* rdma.c: verbs resources and the frame-per-SEND primitives shared by the
 * RDMA guest and daemon.  See rdma.h for the design; no I/O policy here
 * (blocking or loop-driven waits belong to the callers).
 */
#include "wire/rdma.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

struct rdma_conn_param wire__rdma_conn_param(void) {
  struct rdma_conn_param p;

  memset(&p, 0, sizeof(p));
  p.initiator_depth = 1;
  p.responder_resources = 1;
  p.retry_count = 7;     /* transport retries before the QP errors out */
  p.rnr_retry_count = 7; /* 7 = retry forever while the peer has no buffer */
  return p;
}

int wire__rdma_post_recv(wire__rdma *r, int i) {
  struct ibv_sge sge = {(uintptr_t)(r->rbuf + (size_t)i * WIRE__RDMA_BUF), WIRE__RDMA_BUF,
                        r->rmr->lkey};
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;

  return -ibv_post_recv(r->id->qp, &wr, &bad);
}

int wire__rdma_setup(wire__rdma *r, struct rdma_cm_id *id) {
  struct ibv_qp_init_attr qa;
  size_t bytes = (size_t)WIRE__RDMA_NBUF * WIRE__RDMA_BUF;
  int i, rc;

  memset(r, 0, sizeof(*r));
  r->id = id;
  r->pd = ibv_alloc_pd(id->verbs);
  r->sch = ibv_create_comp_channel(id->verbs);
  r->rch = ibv_create_comp_channel(id->verbs);
  if (r->pd == NULL || r->sch == NULL || r->rch == NULL)
    return -ENOMEM;
  /* Non-blocking channels: the daemon polls their fds from libuv, the
   * guest with poll() and a timeout. */
  if (fcntl(r->sch->fd, F_SETFL, fcntl(r->sch->fd, F_GETFL) | O_NONBLOCK) < 0 ||
      fcntl(r->rch->fd, F_SETFL, fcntl(r->rch->fd, F_GETFL) | O_NONBLOCK) < 0)
    return -errno;
  r->scq = ibv_create_cq(id->verbs, WIRE__RDMA_NBUF, NULL, r->sch, 0);
  r->rcq = ibv_create_cq(id->verbs, WIRE__RDMA_NBUF, NULL, r->rch, 0);
  if (r->scq == NULL || r->rcq == NULL)
    return -ENOMEM;
  if (ibv_req_notify_cq(r->scq, 0) || ibv_req_notify_cq(r->rcq, 0))
    return -EIO;
  r->sbuf = malloc(bytes);
  r->rbuf = malloc(bytes);
  if (r->sbuf == NULL || r->rbuf == NULL)
    return -ENOMEM;
  r->smr = ibv_reg_mr(r->pd, r->sbuf, bytes, IBV_ACCESS_LOCAL_WRITE);
  r->rmr = ibv_reg_mr(r->pd, r->rbuf, bytes, IBV_ACCESS_LOCAL_WRITE);
  if (r->smr == NULL || r->rmr == NULL)
    return -ENOMEM;
  memset(&qa, 0, sizeof(qa));
  qa.send_cq = r->scq;
  qa.recv_cq = r->rcq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = WIRE__RDMA_NBUF;
  qa.cap.max_recv_wr = WIRE__RDMA_NBUF;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  if (rdma_create_qp(id, r->pd, &qa) != 0)
    return -errno;
  r->qp = true;
  for (i = 0; i < WIRE__RDMA_NBUF; i++) {
    r->sfree[i] = true;
    if ((rc = wire__rdma_post_recv(r, i)) != 0)
      return rc;
  }
  r->nfree = WIRE__RDMA_NBUF;
  return 0;
}

void wire__rdma_teardown(wire__rdma *r) {
  if (r->qp)
    rdma_destroy_qp(r->id);
  if (r->smr)
    ibv_dereg_mr(r->smr);
  if (r->rmr)
    ibv_dereg_mr(r->rmr);
  if (r->scq)
    ibv_destroy_cq(r->scq);
  if (r->rcq)
    ibv_destroy_cq(r->rcq);
  if (r->sch)
    ibv_destroy_comp_channel(r->sch);
  if (r->rch)
    ibv_destroy_comp_channel(r->rch);
  if (r->pd)
    ibv_dealloc_pd(r->pd);
  free(r->sbuf);
  free(r->rbuf);
  memset(r, 0, sizeof(*r));
}

int wire__rdma_reap_sends(wire__rdma *r) {
  struct ibv_wc wc[WIRE__RDMA_NBUF];
  int n = ibv_poll_cq(r->scq, WIRE__RDMA_NBUF, wc), i;

  if (n < 0)
    return -EIO;
  for (i = 0; i < n; i++) {
    if (wc[i].status != IBV_WC_SUCCESS)
      return -ECONNRESET;
    if (wc[i].wr_id < WIRE__RDMA_NBUF && !r->sfree[wc[i].wr_id]) {
      r->sfree[wc[i].wr_id] = true;
      r->nfree++;
    }
  }
  return n;
}

int wire__rdma_send_frame(wire__rdma *r, const struct iovec *iov, int cnt) {
  size_t len = wire__iov_len(iov, cnt);
  struct ibv_sge sge;
  struct ibv_send_wr wr, *bad;
  int i;

  if (len > WIRE__RDMA_BUF)
    return -EMSGSIZE;
  if (r->nfree == 0)
    return -EAGAIN;
  for (i = 0; i < WIRE__RDMA_NBUF && !r->sfree[i]; i++)
    ;
  wire__iov_copy_out(r->sbuf + (size_t)i * WIRE__RDMA_BUF, iov, cnt, 0, len);
  sge.addr = (uintptr_t)(r->sbuf + (size_t)i * WIRE__RDMA_BUF);
  sge.length = (uint32_t)len;
  sge.lkey = r->smr->lkey;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = (uint64_t)i;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  if (ibv_post_send(r->id->qp, &wr, &bad) != 0)
    return -ECONNRESET;
  r->sfree[i] = false;
  r->nfree--;
  return 0;
}

int wire__rdma_poll_recv(wire__rdma *r, int *idx, uint32_t *len) {
  struct ibv_wc wc;
  int n = ibv_poll_cq(r->rcq, 1, &wc);

  if (n < 0)
    return -EIO;
  if (n == 0)
    return -EAGAIN;
  if (wc.status != IBV_WC_SUCCESS || wc.wr_id >= WIRE__RDMA_NBUF)
    return -ECONNRESET;
  *idx = (int)wc.wr_id;
  *len = wc.byte_len;
  return 0;
}

void wire__rdma_rearm(struct ibv_comp_channel *ch) {
  struct ibv_cq *cq;
  void *ctx;

  while (ibv_get_cq_event(ch, &cq, &ctx) == 0) {
    ibv_ack_cq_events(cq, 1);
    ibv_req_notify_cq(cq, 0);
  }
}
