/* rdma.c: verbs resources and the frame-per-SEND primitives shared by the
 * RDMA guest and daemon, and the verbs half of bulk transfers (landing
 * region, bounce buffer, release word; the rules are in rbulk.c).  See
 * rdma.h for the design; no I/O policy here (blocking or loop-driven waits
 * belong to the callers).  Functions that post to the send queue or reap its
 * CQ take r->mu when the caller set one (the guest, whose sender and reader
 * threads both post).
 */
#include "wire/rdma.h"

#include <endian.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static void lock(wire__rdma *r) {
  if (r->mu)
    pthread_mutex_lock(r->mu);
}

static void unlock(wire__rdma *r) {
  if (r->mu)
    pthread_mutex_unlock(r->mu);
}

static void bulk_free(wire__rdma_bulk *b);
static int post_release_locked(wire__rdma *r);

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
  r->scq = ibv_create_cq(id->verbs, WIRE__RDMA_SQ_DEPTH, NULL, r->sch, 0);
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
  qa.cap.max_send_wr = WIRE__RDMA_SQ_DEPTH;
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
  bulk_free(r->bulk); /* after the QP: no work request uses it any more */
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

static int reap_locked(wire__rdma *r) {
  struct ibv_wc wc[WIRE__RDMA_SQ_DEPTH];
  int n = ibv_poll_cq(r->scq, WIRE__RDMA_SQ_DEPTH, wc), i;

  if (n < 0)
    return -EIO;
  for (i = 0; i < n; i++) {
    /* A failed bulk WRITE (bad rkey or address from the peer, or a broken
     * link) fails here too: the QP is in error, only this connection dies. */
    if (wc[i].status != IBV_WC_SUCCESS)
      return -ECONNRESET;
    if (wc[i].wr_id < WIRE__RDMA_NBUF && !r->sfree[wc[i].wr_id]) {
      r->sfree[wc[i].wr_id] = true;
      r->nfree++;
    } else if (wc[i].wr_id == WIRE__RDMA_WR_RELEASE && r->bulk) {
      r->bulk->rel_inflight = false;
    }
  }
  /* A newer release position waited for the one in flight. */
  if (r->bulk && !r->bulk->rel_inflight) {
    int rc = post_release_locked(r);
    if (rc)
      return rc;
  }
  return n;
}

int wire__rdma_reap_sends(wire__rdma *r) {
  int rc;

  lock(r);
  rc = reap_locked(r);
  unlock(r);
  return rc;
}

int wire__rdma_send_frame(wire__rdma *r, const struct iovec *iov, int cnt) {
  size_t len = wire__iov_len(iov, cnt);
  struct ibv_sge sge;
  struct ibv_send_wr wr, *bad;
  int i, rc = 0;

  if (len > WIRE__RDMA_BUF)
    return -EMSGSIZE;
  lock(r);
  if (r->nfree == 0) {
    rc = -EAGAIN;
    goto out;
  }
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
  if (ibv_post_send(r->id->qp, &wr, &bad) != 0) {
    rc = -ECONNRESET;
    goto out;
  }
  r->sfree[i] = false;
  r->nfree--;
out:
  unlock(r);
  return rc;
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

/* ------------------------------------------------------------------ bulk */

static void bulk_free(wire__rdma_bulk *b) {
  if (b == NULL)
    return;
  if (b->land_mr)
    ibv_dereg_mr(b->land_mr);
  if (b->bounce_mr)
    ibv_dereg_mr(b->bounce_mr);
  if (b->word_mr)
    ibv_dereg_mr(b->word_mr);
  if (b->src_mr)
    ibv_dereg_mr(b->src_mr);
  free(b->land);
  free(b->bounce);
  free(b->ctl);
  free(b);
}

int wire__rdma_bulk_setup(wire__rdma *r) {
  size_t d = (size_t)WIRE__RDMA_REGION_BYTES;
  wire__rdma_bulk *b = calloc(1, sizeof(*b));
  void *land = NULL, *bounce = NULL, *ctl = NULL;
  int rc = -ENOMEM;

  if (b == NULL)
    return -ENOMEM;
  /* Page-aligned regions (registration pins whole pages anyway); the
   * control block on its own cache line. */
  if (posix_memalign(&land, 4096, d) != 0 || posix_memalign(&bounce, 4096, d) != 0 ||
      posix_memalign(&ctl, 64, 128) != 0) {
    free(land);
    free(bounce);
    free(ctl);
    free(b);
    return -ENOMEM;
  }
  b->land = land;
  b->bounce = bounce;
  b->ctl = ctl;
  memset(b->ctl, 0, 128);
  /* The only memory a peer may touch: its own landing region and release
   * word, WRITE only (no REMOTE_READ anywhere). */
  b->land_mr = ibv_reg_mr(r->pd, b->land, d, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  b->word_mr = ibv_reg_mr(r->pd, b->ctl, 8, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  b->bounce_mr = ibv_reg_mr(r->pd, b->bounce, d, IBV_ACCESS_LOCAL_WRITE);
  b->src_mr = ibv_reg_mr(r->pd, b->ctl + 64, 8, IBV_ACCESS_LOCAL_WRITE);
  if (b->land_mr == NULL || b->word_mr == NULL || b->bounce_mr == NULL || b->src_mr == NULL) {
    rc = errno ? -errno : -ENOMEM;
    bulk_free(b);
    return rc;
  }
  b->rx.base = b->land;
  b->rx.d = d;
  r->bulk = b;
  return 0;
}

void wire__rdma_bulk_region(const wire__rdma *r, wire__rbulk_region *out) {
  const wire__rdma_bulk *b = r->bulk;

  out->addr = (uint64_t)(uintptr_t)b->land;
  out->len = b->rx.d;
  out->rkey = b->land_mr->rkey;
  out->ctl_rkey = b->word_mr->rkey;
  out->ctl_addr = (uint64_t)(uintptr_t)b->ctl;
}

int wire__rdma_bulk_peer(wire__rdma *r, const wire__rbulk_region *peer) {
  wire__rdma_bulk *b = r->bulk;

  if (r->peer_region)
    return -EPROTO;
  r->peer_region = true;
  if (b == NULL)
    return 0; /* we cannot write (no bounce buffer): SENDs only */
  /* Positions are taken modulo the RECEIVER's D (PROTOCOL.md 12a), and a
   * span sits at the same offset in our bounce buffer: a peer region larger
   * than our bounce buffer gets SENDs only (ours are all 32 MiB). */
  if (peer->len > b->rx.d)
    return 0;
  b->peer = *peer;
  b->tx.d = peer->len;
  __atomic_store_n(&b->ready, 1, __ATOMIC_RELEASE);
  return 0;
}

bool wire__rdma_bulk_ready(const wire__rdma *r) {
  return r->bulk != NULL && __atomic_load_n(&r->bulk->ready, __ATOMIC_ACQUIRE) != 0;
}

int wire__rdma_bulk_write(void *arg, uint64_t pos, const struct iovec *iov, int cnt, size_t off,
                          size_t n) {
  wire__rdma *r = arg;
  wire__rdma_bulk *b = r->bulk;
  uint64_t at = pos % b->tx.d;
  struct ibv_sge sge;
  struct ibv_send_wr wr, *bad;
  int rc = 0;

  /* rbulk.c placed the span inside both regions: at + n <= tx.d. */
  wire__iov_copy_out(b->bounce + at, iov, cnt, off, n);
  sge.addr = (uintptr_t)(b->bounce + at);
  sge.length = (uint32_t)n;
  sge.lkey = b->bounce_mr->lkey;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = WIRE__RDMA_WR_BULK;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = 0; /* unsignaled: the descriptor SEND right after it is */
  wr.wr.rdma.remote_addr = b->peer.addr + at;
  wr.wr.rdma.rkey = b->peer.rkey;
  lock(r);
  if (ibv_post_send(r->id->qp, &wr, &bad) != 0)
    rc = -ECONNRESET;
  unlock(r);
  return rc;
}

uint64_t wire__rdma_bulk_released(void *arg) {
  wire__rdma *r = arg;
  uint64_t v;

  /* The peer's NIC places the aligned 8-byte word in one PCIe write; we
   * read it once, whole. */
  v = __atomic_load_n((const uint64_t *)(const void *)r->bulk->ctl, __ATOMIC_ACQUIRE);
  return le64toh(v);
}

const uint8_t *wire__rdma_bulk_resolve(void *ctx, uint64_t pos, uint32_t len) {
  wire__rdma *r = ctx;

  return r->bulk ? wire__rbulk_resolve(&r->bulk->rx, pos, len) : NULL;
}

/* Posts the newest release position if none is in flight.  Lock held. */
static int post_release_locked(wire__rdma *r) {
  wire__rdma_bulk *b = r->bulk;
  uint64_t le;
  struct ibv_sge sge;
  struct ibv_send_wr wr, *bad;

  /* Without the peer's REGION there is no release word: a peer that
   * WRITES without announcing one only starves itself. */
  if (b == NULL || b->rel_inflight || b->rel_want == b->rel_sent ||
      !__atomic_load_n(&b->ready, __ATOMIC_ACQUIRE))
    return 0;
  le = htole64(b->rel_want);
  memcpy(b->ctl + 64, &le, 8); /* unchanged until this WRITE completes */
  sge.addr = (uintptr_t)(b->ctl + 64);
  sge.length = 8;
  sge.lkey = b->src_mr->lkey;
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = WIRE__RDMA_WR_RELEASE;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = b->peer.ctl_addr;
  wr.wr.rdma.rkey = b->peer.ctl_rkey;
  if (ibv_post_send(r->id->qp, &wr, &bad) != 0)
    return -ECONNRESET;
  b->rel_inflight = true;
  b->rel_sent = b->rel_want;
  return 0;
}

int wire__rdma_bulk_release(wire__rdma *r) {
  wire__rdma_bulk *b = r->bulk;
  uint64_t v;
  int rc;

  if (b == NULL || !wire__rbulk_release_due(&b->rx, &v))
    return 0;
  lock(r);
  b->rel_want = v;
  rc = reap_locked(r); /* clears a finished release, posts this one */
  if (rc >= 0)
    rc = post_release_locked(r);
  unlock(r);
  return rc < 0 ? rc : 0;
}
