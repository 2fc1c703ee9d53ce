/* test-wire-rdma-fake.c: a simulated RDMA device for tests, linked with -Wl,--wrap.
 *
 * No machine of this project has an RDMA device or the soft-RoCE module, so
 * tests/test-wire-rdma-fake links the unchanged wire library against this
 * file instead of the device: every rdma_cm and verbs entry point the
 * library calls is wrapped (__wrap_*), and the inline verbs (post_send,
 * post_recv, poll_cq, req_notify_cq) reach it through a fake ibv_context's
 * ops.  It models what the transport relies on, strictly enough to catch
 * its bugs: reliable-connection ordering (a queue pair's work requests run
 * in post order; a SEND waits, RNR-style, until the peer posts a receive,
 * and everything behind it waits too), RDMA WRITE checked against the
 * target's registered memory (rkey, protection domain, REMOTE_WRITE access,
 * bounds: a violation completes with IBV_WC_REM_ACCESS_ERR and breaks the
 * queue pair), local keys checked on every scatter/gather entry, send-queue
 * depth (a post beyond max_send_wr unretired requests fails, as on
 * hardware; unsignaled requests retire only when a later signaled one is
 * polled), CQ overflow (aborts: a real CQ overrun is fatal), completion
 * channels that fire once per arming, and rdma_cm events through pipes.
 * It is a model, not a device: no timing, no packet loss, no MTU.  One
 * global mutex serialises it; guest and daemon run in the same process.
 */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t fk_mu = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context fk_ctx;
static struct ibv_device *fk_dev = (struct ibv_device *)&fk_ctx; /* never dereferenced */
static uint32_t fk_seq = 100;
/* What ran, printed at exit: proof of which path the transport took. */
static unsigned long long fk_sends, fk_writes, fk_write_bytes, fk_small_writes;

/* ------------------------------------------------------------- channels */

typedef struct fk_cq fk_cq;

typedef struct fk_chan {
  struct ibv_comp_channel ch;
  int wfd;
  fk_cq *cq; /* the one CQ the wire library attaches */
} fk_chan;

typedef struct fk_cqe {
  struct ibv_wc wc;
  struct fk_qp *qp; /* send completions: their queue pair and ticket */
  uint64_t ticket;
} fk_cqe;

struct fk_cq {
  struct ibv_cq cq;
  fk_cqe *q;
  int cap, head, n;
  bool armed;
};

typedef struct fk_mr {
  struct ibv_mr mr;
  int access;
  struct fk_mr *next;
} fk_mr;
static fk_mr *fk_mrs;

typedef struct fk_op {
  struct fk_op *next;
  enum ibv_wr_opcode opcode;
  uint64_t wr_id, ticket;
  bool signaled;
  uint8_t *data;
  size_t len;
  uint64_t raddr;
  uint32_t rkey;
} fk_op;

typedef struct fk_rq {
  uint64_t wr_id, addr;
  uint32_t len;
} fk_rq;

#define FK_RQ 256

typedef struct fk_qp {
  struct ibv_qp qp;
  struct fk_qp *peer;
  fk_cq *scq, *rcq;
  uint32_t max_send_wr;
  uint64_t posted, retired; /* send tickets */
  fk_rq rq[FK_RQ];
  int rq_head, rq_n;
  fk_op *out_h, *out_t;
  bool err;
} fk_qp;

static void chan_ring(int wfd) {
  char b = 1;
  if (write(wfd, &b, 1) != 1)
    abort();
}

static bool chan_take(int rfd) {
  char b;
  return read(rfd, &b, 1) == 1;
}

static void cq_push(fk_cq *c, const struct ibv_wc *wc, fk_qp *qp, uint64_t ticket) {
  fk_cqe *e;
  if (c->n == c->cap) {
    fprintf(stderr, "rdma-fake: CQ overrun (%d entries): fatal on hardware\n", c->cap);
    abort();
  }
  e = &c->q[(c->head + c->n) % c->cap];
  e->wc = *wc;
  e->qp = qp;
  e->ticket = ticket;
  c->n++;
  if (c->armed && c->cq.channel) {
    c->armed = false;
    chan_ring(((fk_chan *)c->cq.channel)->wfd);
  }
}

static int fk_poll_cq(struct ibv_cq *cq, int num, struct ibv_wc *wc) {
  fk_cq *c = (fk_cq *)cq;
  int k = 0;
  pthread_mutex_lock(&fk_mu);
  while (k < num && c->n > 0) {
    fk_cqe *e = &c->q[c->head];
    wc[k++] = e->wc;
    /* A polled send completion retires its request and every earlier one
     * (unsignaled requests free their slots this way). */
    if (e->qp && e->ticket + 1 > e->qp->retired)
      e->qp->retired = e->ticket + 1;
    c->head = (c->head + 1) % c->cap;
    c->n--;
  }
  pthread_mutex_unlock(&fk_mu);
  return k;
}

static int fk_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
  (void)solicited_only;
  pthread_mutex_lock(&fk_mu);
  ((fk_cq *)cq)->armed = true;
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

/* ------------------------------------------------------------------ MRs */

static fk_mr *mr_find_lkey(uint32_t lkey, uint64_t addr, size_t len) {
  fk_mr *m;
  for (m = fk_mrs; m; m = m->next)
    if (m->mr.lkey == lkey && addr >= (uintptr_t)m->mr.addr &&
        addr + len <= (uintptr_t)m->mr.addr + m->mr.length)
      return m;
  return NULL;
}

static fk_mr *mr_find_remote(struct ibv_pd *pd, uint32_t rkey, uint64_t addr, size_t len) {
  fk_mr *m;
  for (m = fk_mrs; m; m = m->next)
    if (m->mr.rkey == rkey && m->mr.pd == pd && (m->access & IBV_ACCESS_REMOTE_WRITE) &&
        addr >= (uintptr_t)m->mr.addr && addr + len >= addr &&
        addr + len <= (uintptr_t)m->mr.addr + m->mr.length)
      return m;
  return NULL;
}

/* ----------------------------------------------------------- queue pairs */

static void flush(fk_qp *q);

/* The request at the head failed: report it, then flush the rest. */
static void qp_fail(fk_qp *q, fk_op *op, enum ibv_wc_status st) {
  struct ibv_wc wc = {.wr_id = op->wr_id, .status = st, .qp_num = q->qp.qp_num};
  q->err = true;
  cq_push(q->scq, &wc, q, op->ticket);
  q->out_h = op->next;
  if (q->out_h == NULL)
    q->out_t = NULL;
  free(op->data);
  free(op);
  flush(q);
}

/* A queue pair in error completes every queued request with
 * IBV_WC_WR_FLUSH_ERR, signaled or not, as hardware does. */
static void flush(fk_qp *q) {
  while (q->out_h) {
    fk_op *op = q->out_h;
    struct ibv_wc wc = {.wr_id = op->wr_id, .status = IBV_WC_WR_FLUSH_ERR, .qp_num = q->qp.qp_num};
    cq_push(q->scq, &wc, q, op->ticket);
    q->out_h = op->next;
    free(op->data);
    free(op);
  }
  q->out_t = NULL;
}

/* Runs q's queued requests in order while the peer can take them. */
static void pump(fk_qp *q) {
  if (q->err)
    flush(q);
  while (q->out_h && q->peer && !q->err) {
    fk_op *op = q->out_h;
    fk_qp *p = q->peer;
    struct ibv_wc wc = {.wr_id = op->wr_id, .status = IBV_WC_SUCCESS, .qp_num = q->qp.qp_num};
    if (op->opcode == IBV_WR_SEND) {
      fk_rq *r;
      struct ibv_wc rw = {.status = IBV_WC_SUCCESS, .opcode = IBV_WC_RECV, .qp_num = p->qp.qp_num};
      if (p->rq_n == 0)
        return; /* receiver not ready: retried (rnr_retry_count 7) */
      r = &p->rq[p->rq_head];
      if (op->len > r->len) {
        qp_fail(q, op, IBV_WC_REM_INV_REQ_ERR);
        return;
      }
      memcpy((void *)(uintptr_t)r->addr, op->data, op->len);
      rw.wr_id = r->wr_id;
      rw.byte_len = (uint32_t)op->len;
      p->rq_head = (p->rq_head + 1) % FK_RQ;
      p->rq_n--;
      cq_push(p->rcq, &rw, NULL, 0);
      wc.opcode = IBV_WC_SEND;
      fk_sends++;
    } else if (op->opcode == IBV_WR_RDMA_WRITE) {
      if (mr_find_remote(p->qp.pd, op->rkey, op->raddr, op->len) == NULL) {
        fprintf(stderr, "rdma-fake: remote access error (rkey 0x%x, addr 0x%llx, %zu bytes)\n",
                op->rkey, (unsigned long long)op->raddr, op->len);
        qp_fail(q, op, IBV_WC_REM_ACCESS_ERR);
        return;
      }
      if (op->len == 8 && (op->raddr & 7) == 0) {
        /* An aligned 8-byte WRITE lands as one unit (one PCIe write),
         * which the release word relies on. */
        uint64_t v;
        memcpy(&v, op->data, 8);
        __atomic_store_n((uint64_t *)(uintptr_t)op->raddr, v, __ATOMIC_RELEASE);
      } else {
        memcpy((void *)(uintptr_t)op->raddr, op->data, op->len);
      }
      wc.opcode = IBV_WC_RDMA_WRITE;
      fk_writes++;
      fk_write_bytes += op->len;
      if (op->len <= 8)
        fk_small_writes++;
    } else {
      qp_fail(q, op, IBV_WC_LOC_QP_OP_ERR);
      return;
    }
    if (op->signaled)
      cq_push(q->scq, &wc, q, op->ticket);
    q->out_h = op->next;
    if (q->out_h == NULL)
      q->out_t = NULL;
    free(op->data);
    free(op);
  }
}

static int fk_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad) {
  fk_qp *q = (fk_qp *)qp;
  int rc = 0;
  pthread_mutex_lock(&fk_mu);
  for (; wr; wr = wr->next) {
    fk_op *op;
    size_t len = 0, off = 0;
    int i;
    if (q->posted - q->retired >= q->max_send_wr) {
      fprintf(stderr, "rdma-fake: send queue full (%u requests unretired)\n", q->max_send_wr);
      rc = ENOMEM;
      break;
    }
    for (i = 0; i < wr->num_sge; i++)
      len += wr->sg_list[i].length;
    op = calloc(1, sizeof(*op));
    op->data = malloc(len ? len : 1);
    if (op == NULL || op->data == NULL)
      abort();
    for (i = 0; i < wr->num_sge; i++) {
      const struct ibv_sge *s = &wr->sg_list[i];
      if (mr_find_lkey(s->lkey, s->addr, s->length) == NULL) {
        fprintf(stderr, "rdma-fake: local protection error (lkey 0x%x)\n", s->lkey);
        abort(); /* our own bug, never a peer's */
      }
      /* The source is read at post time; the transport never changes it
       * before the completion, so this equals reading it later. */
      memcpy(op->data + off, (void *)(uintptr_t)s->addr, s->length);
      off += s->length;
    }
    op->opcode = wr->opcode;
    op->wr_id = wr->wr_id;
    op->signaled = (wr->send_flags & IBV_SEND_SIGNALED) != 0;
    op->len = len;
    op->raddr = wr->wr.rdma.remote_addr;
    op->rkey = wr->wr.rdma.rkey;
    op->ticket = q->posted++;
    if (q->out_t)
      q->out_t->next = op;
    else
      q->out_h = op;
    q->out_t = op;
  }
  if (rc && bad)
    *bad = wr;
  pump(q);
  pthread_mutex_unlock(&fk_mu);
  return rc;
}

static int fk_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad) {
  fk_qp *q = (fk_qp *)qp;
  int rc = 0;
  pthread_mutex_lock(&fk_mu);
  for (; wr; wr = wr->next) {
    fk_rq *r;
    if (q->rq_n == FK_RQ || wr->num_sge != 1 ||
        mr_find_lkey(wr->sg_list[0].lkey, wr->sg_list[0].addr, wr->sg_list[0].length) == NULL) {
      rc = ENOMEM;
      if (bad)
        *bad = wr;
      break;
    }
    r = &q->rq[(q->rq_head + q->rq_n) % FK_RQ];
    r->wr_id = wr->wr_id;
    r->addr = wr->sg_list[0].addr;
    r->len = wr->sg_list[0].length;
    q->rq_n++;
  }
  if (q->peer)
    pump(q->peer);
  pthread_mutex_unlock(&fk_mu);
  return rc;
}

/* ----------------------------------------------------------------- verbs */

__attribute__((destructor)) static void fk_report(void) {
  if (fk_sends || fk_writes)
    fprintf(stderr,
            "rdma-fake: %llu SENDs, %llu RDMA WRITEs (%llu bytes; %llu of them release "
            "words)\n",
            fk_sends, fk_writes, fk_write_bytes, fk_small_writes);
}

static void fk_init(void) {
  fk_ctx.ops.poll_cq = fk_poll_cq;
  fk_ctx.ops.req_notify_cq = fk_req_notify_cq;
  fk_ctx.ops.post_send = fk_post_send;
  fk_ctx.ops.post_recv = fk_post_recv;
}

struct ibv_device **__wrap_ibv_get_device_list(int *n);
struct ibv_device **__wrap_ibv_get_device_list(int *n) {
  struct ibv_device **l = calloc(2, sizeof(*l));
  fk_init();
  l[0] = fk_dev;
  if (n)
    *n = 1;
  return l;
}

void __wrap_ibv_free_device_list(struct ibv_device **l);
void __wrap_ibv_free_device_list(struct ibv_device **l) {
  free(l);
}

struct ibv_pd *__wrap_ibv_alloc_pd(struct ibv_context *ctx);
struct ibv_pd *__wrap_ibv_alloc_pd(struct ibv_context *ctx) {
  struct ibv_pd *pd = calloc(1, sizeof(*pd));
  pd->context = ctx;
  return pd;
}

int __wrap_ibv_dealloc_pd(struct ibv_pd *pd);
int __wrap_ibv_dealloc_pd(struct ibv_pd *pd) {
  free(pd);
  return 0;
}

struct ibv_comp_channel *__wrap_ibv_create_comp_channel(struct ibv_context *ctx);
struct ibv_comp_channel *__wrap_ibv_create_comp_channel(struct ibv_context *ctx) {
  fk_chan *c = calloc(1, sizeof(*c));
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    abort();
  c->ch.context = ctx;
  c->ch.fd = p[0];
  c->wfd = p[1];
  return &c->ch;
}

int __wrap_ibv_destroy_comp_channel(struct ibv_comp_channel *ch);
int __wrap_ibv_destroy_comp_channel(struct ibv_comp_channel *ch) {
  fk_chan *c = (fk_chan *)ch;
  close(c->ch.fd);
  close(c->wfd);
  free(c);
  return 0;
}

struct ibv_cq *__wrap_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                    struct ibv_comp_channel *ch, int vec);
struct ibv_cq *__wrap_ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
                                    struct ibv_comp_channel *ch, int vec) {
  fk_cq *c = calloc(1, sizeof(*c));
  (void)vec;
  c->cq.context = ctx;
  c->cq.channel = ch;
  c->cq.cq_context = cq_context;
  c->cq.cqe = cqe;
  c->cap = cqe;
  c->q = calloc((size_t)cqe, sizeof(*c->q));
  if (ch)
    ((fk_chan *)ch)->cq = c;
  return &c->cq;
}

int __wrap_ibv_destroy_cq(struct ibv_cq *cq);
int __wrap_ibv_destroy_cq(struct ibv_cq *cq) {
  fk_cq *c = (fk_cq *)cq;
  free(c->q);
  free(c);
  return 0;
}

int __wrap_ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx);
int __wrap_ibv_get_cq_event(struct ibv_comp_channel *ch, struct ibv_cq **cq, void **ctx) {
  fk_chan *c = (fk_chan *)ch;
  if (!chan_take(c->ch.fd)) {
    errno = EAGAIN;
    return -1;
  }
  *cq = &c->cq->cq;
  *ctx = c->cq->cq.cq_context;
  return 0;
}

void __wrap_ibv_ack_cq_events(struct ibv_cq *cq, unsigned n);
void __wrap_ibv_ack_cq_events(struct ibv_cq *cq, unsigned n) {
  (void)cq;
  (void)n;
}

struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access);
struct ibv_mr *__wrap_ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access) {
  fk_mr *m = calloc(1, sizeof(*m));
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    free(m); /* verbs: remote write requires local write */
    errno = EINVAL;
    return NULL;
  }
  pthread_mutex_lock(&fk_mu);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = ++fk_seq;
  m->mr.rkey = ++fk_seq;
  m->access = access;
  m->next = fk_mrs;
  fk_mrs = m;
  pthread_mutex_unlock(&fk_mu);
  return &m->mr;
}

int __wrap_ibv_dereg_mr(struct ibv_mr *mr);
int __wrap_ibv_dereg_mr(struct ibv_mr *mr) {
  fk_mr **pp;
  pthread_mutex_lock(&fk_mu);
  for (pp = &fk_mrs; *pp; pp = &(*pp)->next)
    if (&(*pp)->mr == mr) {
      fk_mr *m = *pp;
      *pp = m->next;
      free(m);
      break;
    }
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

/* --------------------------------------------------------------- rdma_cm */

typedef struct fk_ev {
  struct rdma_cm_event ev;
  struct fk_ev *next;
} fk_ev;

typedef struct fk_ec {
  struct rdma_event_channel ec;
  int wfd;
  fk_ev *h, *t;
} fk_ec;

typedef struct fk_id {
  struct rdma_cm_id id;
  struct fk_id *peer;
  int port; /* listener: bound port; guest: target port */
  bool listening;
  struct fk_id *next_listener;
} fk_id;
static fk_id *fk_listeners;

static void ev_queue(fk_id *to, enum rdma_cm_event_type type, fk_id *listen) {
  fk_ec *e = (fk_ec *)to->id.channel;
  fk_ev *v = calloc(1, sizeof(*v));
  v->ev.id = &to->id;
  v->ev.listen_id = listen ? &listen->id : NULL;
  v->ev.event = type;
  if (e->t)
    e->t->next = v;
  else
    e->h = v;
  e->t = v;
  chan_ring(e->wfd);
}

struct rdma_event_channel *__wrap_rdma_create_event_channel(void);
struct rdma_event_channel *__wrap_rdma_create_event_channel(void) {
  fk_ec *e = calloc(1, sizeof(*e));
  int p[2];
  if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0)
    abort();
  e->ec.fd = p[0];
  e->wfd = p[1];
  return &e->ec;
}

void __wrap_rdma_destroy_event_channel(struct rdma_event_channel *ec);
void __wrap_rdma_destroy_event_channel(struct rdma_event_channel *ec) {
  fk_ec *e = (fk_ec *)ec;
  while (e->h) {
    fk_ev *v = e->h;
    e->h = v->next;
    free(v);
  }
  close(e->ec.fd);
  close(e->wfd);
  free(e);
}

int __wrap_rdma_create_id(struct rdma_event_channel *ec, struct rdma_cm_id **out, void *ctx,
                          enum rdma_port_space ps);
int __wrap_rdma_create_id(struct rdma_event_channel *ec, struct rdma_cm_id **out, void *ctx,
                          enum rdma_port_space ps) {
  fk_id *f = calloc(1, sizeof(*f));
  f->id.channel = ec;
  f->id.context = ctx;
  f->id.ps = ps;
  *out = &f->id;
  return 0;
}

int __wrap_rdma_destroy_id(struct rdma_cm_id *id);
int __wrap_rdma_destroy_id(struct rdma_cm_id *id) {
  fk_id *f = (fk_id *)id, **pp;
  fk_ec *e = (fk_ec *)id->channel;
  fk_ev **vp;
  pthread_mutex_lock(&fk_mu);
  if (f->peer)
    f->peer->peer = NULL;
  for (pp = &fk_listeners; *pp; pp = &(*pp)->next_listener)
    if (*pp == f) {
      *pp = f->next_listener;
      break;
    }
  /* librdmacm makes destroy wait until the id's events are acked; the
   * model drops them instead (their pipe bytes then read as "no event"). */
  for (vp = &e->h; *vp;) {
    if ((*vp)->ev.id == id || (*vp)->ev.listen_id == id) {
      fk_ev *v = *vp;
      *vp = v->next;
      free(v);
    } else {
      vp = &(*vp)->next;
    }
  }
  e->t = NULL;
  for (fk_ev *v = e->h; v; v = v->next)
    e->t = v;
  pthread_mutex_unlock(&fk_mu);
  free(f);
  return 0;
}

int __wrap_rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr);
int __wrap_rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr) {
  ((fk_id *)id)->port = ntohs(((struct sockaddr_in *)addr)->sin_port);
  id->verbs = &fk_ctx;
  fk_init();
  return 0;
}

int __wrap_rdma_listen(struct rdma_cm_id *id, int backlog);
int __wrap_rdma_listen(struct rdma_cm_id *id, int backlog) {
  fk_id *f = (fk_id *)id;
  (void)backlog;
  pthread_mutex_lock(&fk_mu);
  f->listening = true;
  f->next_listener = fk_listeners;
  fk_listeners = f;
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

int __wrap_rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                             int ms);
int __wrap_rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src, struct sockaddr *dst,
                             int ms) {
  (void)src;
  (void)ms;
  ((fk_id *)id)->port = ntohs(((struct sockaddr_in *)dst)->sin_port);
  id->verbs = &fk_ctx;
  pthread_mutex_lock(&fk_mu);
  ev_queue((fk_id *)id, RDMA_CM_EVENT_ADDR_RESOLVED, NULL);
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

int __wrap_rdma_resolve_route(struct rdma_cm_id *id, int ms);
int __wrap_rdma_resolve_route(struct rdma_cm_id *id, int ms) {
  (void)ms;
  pthread_mutex_lock(&fk_mu);
  ev_queue((fk_id *)id, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

int __wrap_rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p);
int __wrap_rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *p) {
  fk_id *g = (fk_id *)id, *l, *child;
  struct sockaddr_in *sin;
  (void)p;
  pthread_mutex_lock(&fk_mu);
  for (l = fk_listeners; l && l->port != g->port; l = l->next_listener)
    ;
  if (l == NULL) {
    ev_queue(g, RDMA_CM_EVENT_REJECTED, NULL);
    pthread_mutex_unlock(&fk_mu);
    return 0;
  }
  child = calloc(1, sizeof(*child));
  child->id.channel = l->id.channel;
  child->id.context = l->id.context;
  child->id.verbs = &fk_ctx;
  child->id.ps = l->id.ps;
  sin = (struct sockaddr_in *)&child->id.route.addr.dst_addr;
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  child->peer = g;
  g->peer = child;
  ev_queue(child, RDMA_CM_EVENT_CONNECT_REQUEST, l);
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

int __wrap_rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p);
int __wrap_rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *p) {
  fk_id *c = (fk_id *)id;
  fk_qp *dq = (fk_qp *)id->qp, *gq;
  (void)p;
  pthread_mutex_lock(&fk_mu);
  if (c->peer == NULL || c->peer->id.qp == NULL || dq == NULL) {
    pthread_mutex_unlock(&fk_mu);
    errno = ENOTCONN;
    return -1;
  }
  gq = (fk_qp *)c->peer->id.qp;
  gq->peer = dq;
  dq->peer = gq;
  ev_queue(c->peer, RDMA_CM_EVENT_ESTABLISHED, NULL);
  ev_queue(c, RDMA_CM_EVENT_ESTABLISHED, NULL);
  pump(gq);
  pump(dq);
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

int __wrap_rdma_reject(struct rdma_cm_id *id, const void *pd, uint8_t len);
int __wrap_rdma_reject(struct rdma_cm_id *id, const void *pd, uint8_t len) {
  fk_id *c = (fk_id *)id;
  (void)pd;
  (void)len;
  pthread_mutex_lock(&fk_mu);
  if (c->peer)
    ev_queue(c->peer, RDMA_CM_EVENT_REJECTED, NULL);
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

int __wrap_rdma_disconnect(struct rdma_cm_id *id);
int __wrap_rdma_disconnect(struct rdma_cm_id *id) {
  fk_id *f = (fk_id *)id;
  pthread_mutex_lock(&fk_mu);
  if (f->peer) {
    ev_queue(f->peer, RDMA_CM_EVENT_DISCONNECTED, NULL);
    f->peer->peer = NULL;
    f->peer = NULL;
  }
  if (id->qp) {
    fk_qp *q = (fk_qp *)id->qp;
    if (q->peer)
      q->peer->peer = NULL;
    q->peer = NULL;
  }
  pthread_mutex_unlock(&fk_mu);
  return 0;
}

int __wrap_rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *a);
int __wrap_rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *a) {
  fk_qp *q = calloc(1, sizeof(*q));
  q->qp.context = &fk_ctx;
  q->qp.pd = pd;
  q->qp.send_cq = a->send_cq;
  q->qp.recv_cq = a->recv_cq;
  q->qp.qp_type = a->qp_type;
  pthread_mutex_lock(&fk_mu);
  q->qp.qp_num = ++fk_seq;
  pthread_mutex_unlock(&fk_mu);
  q->scq = (fk_cq *)a->send_cq;
  q->rcq = (fk_cq *)a->recv_cq;
  q->max_send_wr = a->cap.max_send_wr;
  id->qp = &q->qp;
  return 0;
}

void __wrap_rdma_destroy_qp(struct rdma_cm_id *id);
void __wrap_rdma_destroy_qp(struct rdma_cm_id *id) {
  fk_qp *q = (fk_qp *)id->qp;
  pthread_mutex_lock(&fk_mu);
  if (q->peer)
    q->peer->peer = NULL;
  while (q->out_h) {
    fk_op *op = q->out_h;
    q->out_h = op->next;
    free(op->data);
    free(op);
  }
  pthread_mutex_unlock(&fk_mu);
  free(q);
  id->qp = NULL;
}

int __wrap_rdma_get_cm_event(struct rdma_event_channel *ec, struct rdma_cm_event **out);
int __wrap_rdma_get_cm_event(struct rdma_event_channel *ec, struct rdma_cm_event **out) {
  fk_ec *e = (fk_ec *)ec;
  fk_ev *v;
  pthread_mutex_lock(&fk_mu);
  if (!chan_take(e->ec.fd) || e->h == NULL) {
    pthread_mutex_unlock(&fk_mu);
    errno = EAGAIN;
    return -1;
  }
  v = e->h;
  e->h = v->next;
  if (e->h == NULL)
    e->t = NULL;
  pthread_mutex_unlock(&fk_mu);
  *out = &v->ev;
  return 0;
}

int __wrap_rdma_ack_cm_event(struct rdma_cm_event *ev);
int __wrap_rdma_ack_cm_event(struct rdma_cm_event *ev) {
  free(ev); /* the event is the first member of fk_ev */
  return 0;
}

__be16 __wrap_rdma_get_dst_port(struct rdma_cm_id *id);
__be16 __wrap_rdma_get_dst_port(struct rdma_cm_id *id) {
  (void)id;
  return htons(4242);
}

/* Test hook: every memory region registered so far stops accepting remote
 * WRITEs (as if a peer announced a stale or forged rkey). */
void rdma_fake_revoke_remote_writes(void);
void rdma_fake_revoke_remote_writes(void) {
  fk_mr *m;
  pthread_mutex_lock(&fk_mu);
  for (m = fk_mrs; m; m = m->next)
    m->access &= ~IBV_ACCESS_REMOTE_WRITE;
  pthread_mutex_unlock(&fk_mu);
}
