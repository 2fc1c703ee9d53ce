/* server-shm.c: the daemon's UNIX-socket listener and shared-memory
 * transport.
 *
 * A guest connects to the UNIX socket and sends its HELLO there; the daemon
 * learns its uid/pid with SO_PEERCRED, and on acceptance makes the memfd
 * region (shm.h) and three eventfds and sends them with the WELCOME
 * (SCM_RIGHTS).  From then on the socket carries nothing but descriptors the
 * guest passes (wire_conn_send_fd: one byte + one fd each, paired in order
 * with FD frames from the ring); any other byte on it is a protocol error,
 * EOF means the guest process is gone (the kernel closes the socket when a
 * process dies, however it dies), so death is seen at once.  After WELCOME
 * the socket is watched by a uv_poll on a dup of it (libuv's pipe reads
 * would drop SCM_RIGHTS descriptors).
 * Messages arrive in the g2d ring; libuv watches the daemon's doorbell
 * eventfd and drains the ring in place (payloads are delivered without a copy
 * when contiguous).  While a tenant is paused its ring tail is not published,
 * so the payload stays valid and the guest is held back by ring space.
 * Replies go into the d2g ring directly; when it is full they are copied to
 * an out queue (bounded by WIRE__OUT_MAX) that drains when the guest rings
 * our doorbell after consuming.  d2g_mu makes the d2g producer (ring head,
 * data head, out queue) usable from a worker thread too: a reply from
 * wire_tenant_reply_mt goes straight into the ring when it fits whole and
 * nothing is queued (send_direct), saving the uv_async hop to the loop.  The loop never blocks on a
 * guest, and one drain consumes at most DRAIN_BUDGET bytes before letting other tenants run.
 * Optional spinning (shm_spin_us > 0): a uv_idle handle keeps polling every ring for a while after
 * traffic, with the sleeping flags at 0; with lc_poll it polls without end while a
 * latency-critical tenant is open (spinning()).
 * With lc_direct such a tenant's ring is handed to its executor whenever it
 * is empty and comes back at a frame the executor does not take (direct.c,
 * the rules in shm.h); while it is out the loop only flushes queued replies.
 */
#include "wire/shm.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

typedef struct shm_stp shm_stp;

/* One per server.  The idle handle is the spin: while it is active libuv
 * polls with a zero timeout and on_idle drains every open tenant's ring, and
 * the tenants' sleeping flags stay 0 so their guests ring no doorbell. */
typedef struct shm_listener {
  uv_pipe_t h;
  uv_idle_t idle;
  bool idle_on;
  int handles;        /* pipe + idle still to close */
  uint64_t active_ns; /* last time a ring had data */
  uint64_t spin_ns;   /* 0 = never spin */
  int lc_open;        /* latency-critical tenants open under lc_poll: spin without end */
  shm_stp *open;      /* tenants past WELCOME (loop thread) */
  wire_server_t *s;
  bool adopted; /* the socket was inherited: never unlink its path */
  char path[108];
} shm_listener;

typedef struct out_msg {
  wire__shm_tx tx;
  struct iovec v; /* the owned copy */
  struct out_msg *next;
} out_msg;

struct shm_stp {
  uv_pipe_t sock;
  shm_listener *l;
  shm_stp *next_open, *prev_open; /* l->open list */
  bool linked;
  uv_poll_t poll; /* on efd_d, after WELCOME */
  bool poll_init;
  uv_poll_t spoll; /* on sockfd, after WELCOME */
  bool spoll_init;
  int sockfd;                  /* dup of the socket (after WELCOME), else -1 */
  int fdq[WIRE__FD_QUEUE_MAX]; /* received descriptors (or -EMFILE: lost) */
  int fdq_head, fdq_n;         /* ring of fdq_n entries from fdq_head */
  int handles;                 /* still to close */
  wire_tenant_t *t;
  int efd_d, efd_rx, efd_tx;
  uint8_t *mem;
  size_t size;
  wire__shm_dir g2d, d2g;
  pthread_mutex_t d2g_mu; /* d2g producer side and out_* (loop + reply_mt threads) */
  bool open;              /* WELCOME sent */
  bool lc;                /* counted in l->lc_open */
  bool held;              /* paused: g2d tail not published */
  wire_direct_t *dr;      /* lc_direct: the ring's direct reader (shm.h), or NULL */
  bool dr_out;            /* handed to the reader: we read it only once given back */
  uint64_t dr_tail, dr_tail_at; /* dr_out: the reader's tail, and since when it stood still
                                   with bytes waiting (0: none waiting) */
  uint8_t hbuf[WIRE__HDR_LEN + WIRE__HELLO_MAX];
  out_msg *out_head, *out_tail;
  size_t out_bytes; /* queued, <= WIRE__OUT_MAX */
};

static void drain(shm_stp *c);
static void spin_start(shm_listener *l);

/* Whether the loop keeps polling: within spin_ns of the last traffic, or
 * always while a latency-critical tenant is open under lc_poll. */
static bool spinning(const shm_listener *l, uint64_t now) {
  return l->lc_open > 0 || (l->spin_ns && wire__since(now, l->active_ns) < l->spin_ns);
}

/* ----------------------------------------------------------------- sending */

static void ring_guest_if_sleeping(shm_stp *c, bool published) {
  if (published && wire__shm_consumer_sleeps(&c->d2g))
    wire__efd_ring(c->efd_rx);
}

/* d2g on_chunk: each span of a chunked reply wakes a sleeping guest. */
static void on_d2g_chunk(void *ctx) {
  ring_guest_if_sleeping(ctx, true);
}

/* Pushes queued replies; stops at the first that lacks space. */
static int flush_out(shm_stp *c) {
  while (c->out_head) {
    out_msg *m = c->out_head;
    bool pub;
    int rc = wire__shm_tx_step(&c->d2g, &m->tx, &pub);
    ring_guest_if_sleeping(c, pub);
    if (rc == -EAGAIN) {
      wire__shm_wait_set(&c->d2g, true);
      rc = wire__shm_tx_step(&c->d2g, &m->tx, &pub);
      ring_guest_if_sleeping(c, pub);
      if (rc == -EAGAIN)
        return 0; /* the guest rings our doorbell when it frees space */
    }
    wire__shm_wait_set(&c->d2g, false);
    if (rc)
      return rc;
    c->out_head = m->next;
    if (c->out_head == NULL)
      c->out_tail = NULL;
    c->out_bytes -= m->v.iov_len;
    free(m->v.iov_base);
    free(m);
  }
  return 0;
}

/* Before WELCOME (a REFUSE) the socket is the only channel.  The frame is
 * small (<= WIRE__HELLO_MAX) and the socket buffer empty: one send. */
static int send_on_socket(shm_stp *c, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
                          size_t len) {
  wire_buf_t b;
  ssize_t w;
  int fd, rc;

  if (len > WIRE__HELLO_MAX || uv_fileno((uv_handle_t *)&c->sock, &fd) != 0)
    return -EINVAL;
  wire_buf_init(&b);
  rc = wire__send_frames(1, kind, id, iov, cnt, len, WIRE__FRAME_MAX, NULL, wire__emit_to_buf, &b);
  if (rc == 0) {
    do
      w = send(fd, b.data, b.len, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    rc = w == (ssize_t)b.len ? 0 : w < 0 ? -errno : -EIO;
  }
  wire_buf_close(&b);
  return rc;
}

/* Queues m (tx progress kept) and pushes the queue. */
static int enqueue(shm_stp *c, out_msg *m) {
  if (c->out_tail)
    c->out_tail->next = m;
  else
    c->out_head = m;
  c->out_tail = m;
  c->out_bytes += m->v.iov_len;
  return flush_out(c);
}

static int send_owned_locked(wire_tenant_t *t, uint8_t kind, uint64_t id, void *buf, size_t len) {
  shm_stp *c = wire__tenant_tp(t);
  uint8_t version = (uint8_t)wire_tenant_info(t)->version;
  out_msg *m = calloc(1, sizeof(*m));
  bool pub;
  int rc;

  if (m == NULL || !c->open || c->out_bytes + len > WIRE__OUT_MAX) {
    rc = m == NULL ? -ENOMEM : !c->open ? -ENOTCONN : -ENOBUFS;
    free(m);
    free(buf);
    return rc;
  }
  m->v.iov_base = buf;
  m->v.iov_len = len;
  m->tx = (wire__shm_tx){version, kind, id, 0, &m->v, 1, len, 0, false};
  if (c->out_head == NULL) {
    rc = wire__shm_tx_step(&c->d2g, &m->tx, &pub);
    ring_guest_if_sleeping(c, pub);
    if (rc != -EAGAIN) {
      free(buf);
      free(m);
      return rc;
    }
  }
  /* No copy: the queue keeps the caller's buffer and the progress so far. */
  return enqueue(c, m);
}

static int send_locked(wire_tenant_t *t, uint8_t kind, uint64_t id, const struct iovec *iov,
                       int cnt, size_t len) {
  shm_stp *c = wire__tenant_tp(t);
  uint8_t version = (uint8_t)wire_tenant_info(t)->version;
  wire__shm_tx tx = {version, kind, id, 0, iov, cnt, len, 0, false};
  out_msg *m;
  bool pub;
  int rc;

  if (!c->open)
    return send_on_socket(c, kind, id, iov, cnt, len);
  if (c->out_head == NULL) {
    rc = wire__shm_tx_step(&c->d2g, &tx, &pub);
    ring_guest_if_sleeping(c, pub);
    if (rc != -EAGAIN)
      return rc;
  }
  /* No room now: keep an owned copy (the caller's iov dies on return),
   * within the per-tenant backlog bound. */
  if (c->out_bytes + len > WIRE__OUT_MAX)
    return -ENOBUFS;
  m = calloc(1, sizeof(*m));
  if (m == NULL)
    return -ENOMEM;
  m->v.iov_len = len;
  m->v.iov_base = malloc(len ? len : 1);
  if (m->v.iov_base == NULL) {
    free(m);
    return -ENOMEM;
  }
  wire__iov_copy_out(m->v.iov_base, iov, cnt, 0, len);
  m->tx = tx;
  m->tx.iov = &m->v;
  m->tx.cnt = 1;
  return enqueue(c, m);
}

static int shm_send_owned(wire_tenant_t *t, uint8_t kind, uint64_t id, void *buf, size_t len) {
  shm_stp *c = wire__tenant_tp(t);
  int rc;

  pthread_mutex_lock(&c->d2g_mu);
  rc = send_owned_locked(t, kind, id, buf, len);
  pthread_mutex_unlock(&c->d2g_mu);
  return rc;
}

static int shm_send(wire_tenant_t *t, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
                    size_t len) {
  shm_stp *c = wire__tenant_tp(t);
  int rc;

  pthread_mutex_lock(&c->d2g_mu);
  rc = send_locked(t, kind, id, iov, cnt, len);
  pthread_mutex_unlock(&c->d2g_mu);
  return rc;
}

/* Any thread (server.c holds the tenant's tx lock, so c is alive and open).
 * Only a reply that one tx step publishes whole (inline, or one data-region
 * span) and that no queued reply precedes: anything else returns -EAGAIN
 * having published nothing, and takes the loop thread's path. */
static int shm_send_direct(wire_tenant_t *t, uint64_t id, const void *buf, size_t len) {
  shm_stp *c = wire__tenant_tp(t);
  struct iovec v = {(void *)buf, len};
  wire__shm_tx tx = {
      (uint8_t)wire_tenant_info(t)->version, WIRE__K_REPLY, id, 0, &v, 1, len, 0, false};
  bool pub = false;
  int rc = -EAGAIN;

  pthread_mutex_lock(&c->d2g_mu);
  if (c->open && c->out_head == NULL &&
      ((len <= WIRE__SHM_INLINE && len + WIRE__HDR_LEN <= c->d2g.r / 2) ||
       (len <= c->d2g.d / 2 && len <= c->d2g.chunk_max))) {
    rc = wire__shm_tx_step(&c->d2g, &tx, &pub);
    ring_guest_if_sleeping(c, pub);
  }
  pthread_mutex_unlock(&c->d2g_mu);
  return rc;
}

/* --------------------------------------------------------------- receiving */

static const uint8_t *resolve_g2d(void *ctx, uint64_t pos, uint32_t len) {
  shm_stp *c = ctx;
  return wire__shm_resolve(&c->g2d, pos, len);
}

static void publish(shm_stp *c) {
  if (wire__shm_release(&c->g2d))
    wire__efd_ring(c->efd_tx);
}

/* Drains the g2d ring until empty, paused or closed.  Spinning (the
 * listener's idle handle runs): the sleeping flag stays 0 and on_idle comes
 * back; otherwise the flag is set with the Dekker re-check. */
/* Bytes one drain may consume before yielding the loop to other tenants
 * (cf. Redis dictRehash's bounded steps): 1 MiB is ~0.1-0.3 ms of on_msg
 * work for small posts, one large message otherwise. */
#define DRAIN_BUDGET ((size_t)1 << 20)

/* Direct reading (shm.h): the ring goes to the tenant's reader when it is
 * empty, our framing idle and a reader exists; it comes back when the
 * reader stores LOOP (a frame it does not take). */
static void hand_over(shm_stp *c) {
  wire_direct_t *d = c->dr;
  if (!d || c->dr_out || c->held || atomic_load_explicit(&d->refs, memory_order_acquire) < 2 ||
      !wire__tenant_rx_idle(c->t))
    return;
  __atomic_store_n(&d->g2d.rd, c->g2d.rd, __ATOMIC_RELAXED); /* see direct.c */
  d->g2d.data_end = c->g2d.data_end;
  c->dr_out = true;
  wire__direct_hand_over(d);
}

/* True when the ring is ours again (we read it from where the reader
 * stopped), false while the reader holds it. */
static bool take_back(shm_stp *c) {
  if (wire__dr_state(atomic_load_explicit(&c->dr->owner, memory_order_acquire)) != WIRE__DR_LOOP)
    return false;
  c->g2d.rd = c->dr->g2d.rd;
  c->g2d.data_end = c->dr->g2d.data_end;
  c->dr_out = false;
  c->dr_tail_at = 0;
  return true;
}

/* The reader holds the ring: take it back when bytes have waited unread
 * for WIRE__DR_STUCK_NS (shm.h; force: at once), the reader being busy.
 * True when the ring is ours now. */
static bool reclaim(shm_stp *c, bool force) {
  wire_direct_t *d = c->dr;
  uint64_t head = __atomic_load_n(wire__shm_u64(&c->g2d, WIRE__SHM_HEAD), __ATOMIC_ACQUIRE);
  uint64_t tail = __atomic_load_n(wire__shm_u64(&c->g2d, WIRE__SHM_TAIL), __ATOMIC_ACQUIRE);
  uint64_t now;
  if (head == tail && !force) {
    c->dr_tail_at = 0;
    return false;
  }
  now = wire__now_ns();
  if (!force && (c->dr_tail_at == 0 || tail != c->dr_tail)) {
    c->dr_tail = tail;
    c->dr_tail_at = now;
    return false;
  }
  if (!force && now - c->dr_tail_at < d->stuck_ns)
    return false;
  return wire__direct_reclaim(d);
}

static void drain(shm_stp *c) {
  wire_tenant_t *t = c->t;
  shm_listener *l = c->l;
  bool got = false;
  size_t done = 0;
  int rc0;

  if (!c->open || c->held)
    return;
  pthread_mutex_lock(&c->d2g_mu);
  rc0 = flush_out(c);
  pthread_mutex_unlock(&c->d2g_mu);
  if (rc0 < 0) {
    wire__tenant_lost(t, -EPROTO, "guest corrupted the reply ring's indices");
    return;
  }
  wire__shm_sleep_done(&c->g2d);
  if (c->dr_out && !take_back(c))
    return; /* the reader has it */
  for (;;) {
    const uint8_t *p1, *p2;
    size_t n1, n2, used;
    int rc = wire__shm_readable(&c->g2d, &p1, &n1, &p2, &n2);

    if (rc) {
      wire_tenant_close(t, -EPROTO, "guest wrote an impossible ring head");
      return;
    }
    if (n1 == 0) {
      if (l->spin_ns || l->lc_open) {
        if (got)
          l->active_ns = wire__now_ns();
        hand_over(c);
        spin_start(l);
        return;
      }
      if (wire__shm_sleep_prepare(&c->g2d))
        continue; /* data arrived while we were going to sleep */
      return;
    }
    got = true;
    rc = wire__tenant_feed(t, p1, n1, &used);
    c->g2d.rd += used;
    if (rc < 0)
      return; /* t closed; c lives until its handles close */
    if (rc == 1) {
      c->held = true;
      return;
    }
    publish(c);
    done += used;
    if (done >= DRAIN_BUDGET) {
      /* Come back after the other tenants' events: ring our own doorbell
       * (the guest does not, our sleeping flag being 0). */
      wire__efd_ring(c->efd_d);
      return;
    }
  }
}

/* Longest a single on_idle call polls the rings before giving the loop back
 * (new connections, sockets, timers, replies from other threads): 20 us
 * bounds their extra latency while sparing most of the loop's per-pass
 * epoll_wait syscalls (~1 us each on a VM). */
#define IDLE_SLICE_NS 20000u

static bool ring_has_data(shm_stp *c) {
  if (c->dr_out) { /* the reader's, unless it gave it back or is stuck */
    unsigned o = wire__dr_state(atomic_load_explicit(&c->dr->owner, memory_order_acquire));
    return c->open && (o == WIRE__DR_LOOP ||
                       ((o == WIRE__DR_READER || o == WIRE__DR_RUNNING) && reclaim(c, false)));
  }
  return c->open && !c->held &&
         __atomic_load_n(wire__shm_u64(&c->g2d, WIRE__SHM_HEAD), __ATOMIC_ACQUIRE) != c->g2d.rd;
}

/* While a latency-critical tenant is open (lc_poll, a host with cores to
 * spare) the poll yields the CPU once per this many looks instead of once
 * per 32: a sched_yield is a system call during which no ring is read. */
#define LC_YIELD_MASK 1023u

static void on_idle(uv_idle_t *h) {
  shm_listener *l = h->data;
  shm_stp *c, *next;
  uint64_t now = wire__now_ns(), t0 = now;
  unsigned spins = 0;

  /* Poll every ring in place (no syscall) until one has data, the slice
   * is over or the spin budget since the last traffic is spent.  With a
   * latency-critical tenant open, a ring with data is drained here and the
   * poll goes on until the slice is over, so the message right behind
   * (a launch's synchronisation) does not wait for a pass through libuv
   * (its epoll_wait is a system call); without one, it returns as before. */
  for (;;) {
    bool any = false;
    for (c = l->open; c != NULL && !any; c = c->next_open)
      any = ring_has_data(c);
    if (any) {
      if (l->lc_open == 0)
        break;
      for (c = l->open; c != NULL; c = next) {
        next = c->next_open; /* drain may close c and unlink it */
        drain(c);
      }
      if (wire__now_ns() - t0 >= IDLE_SLICE_NS)
        break;
      continue;
    }
    if ((++spins & 31) == 0) {
      now = wire__now_ns();
      if (now - t0 >= IDLE_SLICE_NS || !spinning(l, now))
        break;
      /* A guest that shares our CPU (a loaded host) must get to run, or our
       * spin delays its reply by the whole budget (59 us p50 measured on a
       * loaded 2-CPU VM without this); on an idle CPU it returns at once. */
      if (l->lc_open == 0 || (spins & LC_YIELD_MASK) == 0)
        sched_yield();
    }
    wire__cpu_relax();
  }
  for (c = l->open; c != NULL; c = next) {
    next = c->next_open; /* drain may close c and unlink it */
    drain(c);
  }
  /* Read the clock AFTER the drains: they move active_ns forward, and an
   * earlier `now` made now - active_ns wrap around, which stopped the spin
   * after every message (which once made shm_spin_us measure 6x slower). */
  now = wire__now_ns();
  if (spinning(l, now))
    return;
  /* Spin budget spent: every ring goes to sleep; one that got data in the
   * meantime keeps us spinning. */
  for (c = l->open; c != NULL; c = c->next_open)
    if (c->open && !c->held && !c->dr_out && wire__shm_sleep_prepare(&c->g2d))
      l->active_ns = now;
  if (l->active_ns != now) {
    uv_idle_stop(&l->idle);
    l->idle_on = false;
  }
}

static void spin_start(shm_listener *l) {
  if (l->idle_on)
    return;
  l->active_ns = wire__now_ns();
  if (uv_idle_start(&l->idle, on_idle) == 0)
    l->idle_on = true;
}

static void link_open(shm_stp *c) {
  shm_listener *l = c->l;
  c->next_open = l->open;
  c->prev_open = NULL;
  if (l->open)
    l->open->prev_open = c;
  l->open = c;
  c->linked = true;
}

static void unlink_open(shm_stp *c) {
  if (!c->linked)
    return;
  if (c->prev_open)
    c->prev_open->next_open = c->next_open;
  else
    c->l->open = c->next_open;
  if (c->next_open)
    c->next_open->prev_open = c->prev_open;
  c->linked = false;
}

static void shm_resume(wire_tenant_t *t) {
  shm_stp *c = wire__tenant_tp(t);
  size_t used;
  int rc = wire__tenant_feed(t, NULL, 0, &used); /* finishes a paused batch */

  if (rc != 0)
    return;
  c->held = false;
  publish(c);
  drain(c);
}

static void on_doorbell(uv_poll_t *p, int status, int events) {
  shm_stp *c = p->data;

  wire__efd_drain(c->efd_d);
  drain(c);
}

/* ------------------------------------------------------ descriptor passing */

/* Reads what the guest sent on the socket since WELCOME: only FD bytes each
 * with one descriptor may come (proto.h).  Returns 0, WIRE_ECLOSED at EOF,
 * or -EPROTO with why filled.  Loop thread. */
static int sock_read_fds(shm_stp *c, char *why, size_t why_len) {
  for (;;) {
    uint8_t b[WIRE__FD_QUEUE_MAX];
    union {
      struct cmsghdr h;
      char b[CMSG_SPACE(sizeof(int) * WIRE__FD_QUEUE_MAX)];
    } cb;
    struct iovec v = {b, sizeof(b)};
    struct msghdr mh = {
        .msg_iov = &v, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
    struct cmsghdr *cm;
    int got[WIRE__FD_QUEUE_MAX], ngot = 0, i;
    bool bad = false;
    ssize_t r;

    do
      r = recvmsg(c->sockfd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    while (r < 0 && errno == EINTR);
    if (r < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : WIRE_ECLOSED;
    if (r == 0)
      return WIRE_ECLOSED;
    for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
      int k, j;
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
        continue;
      k = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
      for (j = 0; j < k; j++) {
        int f;
        memcpy(&f, CMSG_DATA(cm) + (size_t)j * sizeof(int), sizeof(int));
        if (ngot < WIRE__FD_QUEUE_MAX)
          got[ngot++] = f;
        else
          close(f);
      }
    }
    /* Truncated control data: we ran out of descriptors (EMFILE); the
     * missing ones answer their FD frames with -EMFILE. */
    while ((mh.msg_flags & MSG_CTRUNC) && ngot < (int)r)
      got[ngot++] = -EMFILE;
    for (i = 0; i < (int)r; i++)
      if (b[i] != WIRE__FD_BYTE)
        bad = true;
    if (bad || ngot != (int)r || c->fdq_n + ngot > WIRE__FD_QUEUE_MAX) {
      snprintf(why, why_len,
               "tenant \"%s\" (%s): %zd bytes on the socket after the handshake with %d "
               "descriptors (%d waiting)",
               wire_tenant_info(c->t)->name, wire_tenant_info(c->t)->peer, r, ngot, c->fdq_n);
      for (i = 0; i < ngot; i++)
        if (got[i] >= 0)
          close(got[i]);
      return -EPROTO;
    }
    for (i = 0; i < ngot; i++)
      c->fdq[(c->fdq_head + c->fdq_n++) % WIRE__FD_QUEUE_MAX] = got[i];
  }
}

static int shm_take_fd(wire_tenant_t *t, int *fd, char *why, size_t why_len) {
  shm_stp *c = wire__tenant_tp(t);
  int rc;

  *fd = -1;
  /* The guest sent the descriptor before publishing the frame, so it is in
   * the socket now even if its poll event has not been seen yet.  EOF is
   * left to the socket's own callback. */
  rc = sock_read_fds(c, why, why_len);
  if (rc == -EPROTO)
    return rc;
  if (c->fdq_n == 0) {
    snprintf(why, why_len, "FD message without a descriptor on the socket");
    return -EPROTO;
  }
  rc = c->fdq[c->fdq_head];
  c->fdq_head = (c->fdq_head + 1) % WIRE__FD_QUEUE_MAX;
  c->fdq_n--;
  if (rc < 0)
    return rc;
  *fd = rc;
  return 0;
}

static void on_sock_gone(shm_stp *c, int status, const char *what) {
  char why[512];

  /* A guest that said BYE and closed may have left its BYE in the ring:
   * read the ring first so an orderly close is reported as one.  A direct
   * reader's ring is taken back first (at once, unless the reader is in the
   * middle of taking a frame, a few stores: waited for, bounded). */
  if (c->dr_out) {
    uint64_t until = wire__now_ns() + 2000000u;
    while (c->open && !reclaim(c, true) && wire__now_ns() < until)
      sched_yield();
  }
  if (c->open && !c->held)
    drain(c);
  if (!c->open)
    return; /* closed while draining (BYE or bad bytes) */
  snprintf(why, sizeof(why), "tenant \"%s\" (%s): socket %s (process gone)",
           wire_tenant_info(c->t)->name, wire_tenant_info(c->t)->peer, what);
  wire__tenant_lost(c->t, status, why);
}

static void on_sock_poll(uv_poll_t *p, int status, int events) {
  shm_stp *c = p->data;
  char why[512];
  int rc;

  if (!c->open)
    return;
  if (status < 0) {
    on_sock_gone(c, -ECONNRESET, uv_strerror(status));
    return;
  }
  rc = sock_read_fds(c, why, sizeof(why));
  if (rc == -EPROTO)
    wire_tenant_close(c->t, -EPROTO, why);
  else if (rc == WIRE_ECLOSED || (events & UV_DISCONNECT))
    on_sock_gone(c, WIRE_ECLOSED, "closed");
}

/* After WELCOME: stop libuv's reads of the socket and watch a dup of it. */
static int sock_watch(shm_stp *c, int fd) {
  int rc;

  uv_read_stop((uv_stream_t *)&c->sock);
  c->sockfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (c->sockfd < 0)
    return -errno;
  rc = uv_poll_init(wire__server_loop(wire__tenant_server(c->t)), &c->spoll, c->sockfd);
  if (rc)
    return rc;
  c->spoll.data = c;
  c->spoll_init = true;
  c->handles++;
  return uv_poll_start(&c->spoll, UV_READABLE | UV_DISCONNECT, on_sock_poll);
}

/* ---------------------------------------------------------------- handshake */

static int shm_welcome(wire_tenant_t *t, const void *frame, size_t len) {
  shm_stp *c = wire__tenant_tp(t);
  wire_server_t *s = wire__tenant_server(t);
  const wire_server_opts_t *o = wire__server_opts(s);
  int fds[4] = {-1, -1, -1, -1}, memfd = -1, rc, fd;
  union {
    struct cmsghdr h;
    char b[CMSG_SPACE(sizeof(fds))];
  } cb;
  struct iovec v = {(void *)frame, len};
  struct msghdr mh = {
      .msg_iov = &v, .msg_iovlen = 1, .msg_control = cb.b, .msg_controllen = sizeof(cb.b)};
  struct cmsghdr *cm;
  ssize_t w;

  if (uv_fileno((uv_handle_t *)&c->sock, &fd) != 0)
    return -EBADF;
  c->size = wire__shm_size(o->shm_ring_bytes, o->shm_data_bytes);
  memfd = memfd_create("tally-wire", MFD_CLOEXEC);
  if (memfd < 0 || ftruncate(memfd, (off_t)c->size) < 0) {
    rc = -errno;
    goto fail;
  }
  c->mem = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (c->mem == MAP_FAILED) {
    c->mem = NULL;
    rc = -errno;
    goto fail;
  }
  wire__shm_init(c->mem, o->shm_ring_bytes, o->shm_data_bytes);
  wire__shm_bind(c->mem, o->shm_ring_bytes, o->shm_data_bytes, &c->g2d, &c->d2g);
  c->d2g.chunk_max = WIRE__SHM_D2G_CHUNK;
  c->d2g.chunk_big = WIRE__SHM_D2G_CHUNK_BIG;
  c->d2g.on_chunk = on_d2g_chunk;
  c->d2g.chunk_ctx = c;
  c->efd_d = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  c->efd_rx = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  c->efd_tx = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (c->efd_d < 0 || c->efd_rx < 0 || c->efd_tx < 0) {
    rc = -errno;
    goto fail;
  }
  fds[0] = memfd;
  fds[1] = c->efd_d;
  fds[2] = c->efd_rx;
  fds[3] = c->efd_tx;
  cm = CMSG_FIRSTHDR(&mh);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(fds));
  memcpy(CMSG_DATA(cm), fds, sizeof(fds));
  /* A 64-byte WELCOME always fits an empty socket buffer: no partial send. */
  do
    w = sendmsg(fd, &mh, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w != (ssize_t)len) {
    rc = w < 0 ? -errno : -EIO;
    goto fail;
  }
  close(memfd); /* the mapping keeps the region alive */
  memfd = -1;
  wire__tenant_set_resolve(t, resolve_g2d, c);
  rc = uv_poll_init(wire__server_loop(s), &c->poll, c->efd_d);
  if (rc)
    goto fail;
  c->poll.data = c;
  c->poll_init = true;
  c->handles++;
  rc = uv_poll_start(&c->poll, UV_READABLE, on_doorbell);
  if (rc == 0)
    rc = sock_watch(c, fd);
  if (rc)
    goto fail;
  c->open = true;
  link_open(c);
  if (o->lc_poll && wire_tenant_info(t)->prio == WIRE_PRIO_LATENCY_CRITICAL) {
    c->lc = true;
    c->l->lc_open++;
    spin_start(c->l);
    /* Without memory for it the loop keeps reading the ring: no error. */
    if (o->lc_direct &&
        (c->dr = wire__direct_new(t, &c->g2d, c->efd_tx,
                                  (uint8_t)wire_tenant_info(t)->version,
                                  wire__tenant_add_call)) != NULL) {
      c->dr->stuck_ns = o->lc_direct_stuck_us ? (uint64_t)o->lc_direct_stuck_us * 1000u
                                              : WIRE__DR_STUCK_NS;
      wire__tenant_set_direct(t, c->dr); /* t holds its reference */
    }
  }
  return 0;
fail:
  if (memfd >= 0)
    close(memfd);
  return rc;
}

/* --------------------------------------------------------------- lifetime */

typedef struct region {
  void *mem;
  size_t size;
} region;

static void region_unmap(void *arg) {
  region *r = arg;
  munmap(r->mem, r->size);
  free(r);
}

static void on_closed(uv_handle_t *h) {
  shm_stp *c = h->data;
  wire_tenant_t *t = c->t;

  if (--c->handles > 0)
    return;
  while (c->out_head) {
    out_msg *m = c->out_head;
    c->out_head = m->next;
    free(m->v.iov_base);
    free(m);
  }
  if (c->mem && c->dr) { /* the reader may still look at the ring: unmapped at its last ref */
    c->dr->map = c->mem;
    c->dr->map_len = c->size;
    c->mem = NULL;
  }
  if (c->mem) {
    region *r = malloc(sizeof(*r));
    if (r == NULL || t == NULL) {
      munmap(c->mem, c->size); /* no memory to defer with: unmap now */
      free(r);
    } else {
      r->mem = c->mem;
      r->size = c->size;
      wire__tenant_defer(t, region_unmap, r);
    }
  }
  while (c->fdq_n > 0) {
    int f = c->fdq[c->fdq_head];
    if (f >= 0)
      close(f);
    c->fdq_head = (c->fdq_head + 1) % WIRE__FD_QUEUE_MAX;
    c->fdq_n--;
  }
  if (c->sockfd >= 0)
    close(c->sockfd);
  pthread_mutex_destroy(&c->d2g_mu);
  if (c->efd_d >= 0)
    close(c->efd_d);
  if (c->efd_rx >= 0)
    close(c->efd_rx);
  if (c->efd_tx >= 0)
    close(c->efd_tx);
  free(c);
  if (t)
    wire__tenant_release(t);
}

static void shm_close(wire_tenant_t *t) {
  shm_stp *c = wire__tenant_tp(t);

  c->open = false;
  if (c->dr) /* the reader stops reading; the region stays mapped for it (on_closed) */
    atomic_store_explicit(&c->dr->owner, WIRE__DR_CLOSED, memory_order_release);
  unlink_open(c);
  if (c->lc) {
    c->lc = false;
    c->l->lc_open--;
  }
  if (c->poll_init)
    uv_close((uv_handle_t *)&c->poll, on_closed);
  if (c->spoll_init)
    uv_close((uv_handle_t *)&c->spoll, on_closed);
  uv_close((uv_handle_t *)&c->sock, on_closed);
}

static void shm_idle(wire_tenant_t *t, uint64_t now_ns) {
  shm_stp *c = wire__tenant_tp(t);

  if (!c->open)
    return;
  pthread_mutex_lock(&c->d2g_mu);
  /* Queued replies still need the space; a failing madvise only leaves the
   * pages resident. */
  if (c->out_head == NULL)
    (void)wire__shm_trim(&c->d2g, now_ns);
  pthread_mutex_unlock(&c->d2g_mu);
}

static const struct wire__stp_ops shm_ops = {
    .name = "shm",
    .welcome = shm_welcome,
    .send = shm_send,
    .send_owned = shm_send_owned,
    .resume = shm_resume,
    .close = shm_close,
    .take_fd = shm_take_fd,
    .send_direct = shm_send_direct,
    .idle = shm_idle,
};

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  shm_stp *c = h->data;
  *buf = uv_buf_init((char *)c->hbuf, sizeof(c->hbuf));
}

static void on_sock_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  shm_stp *c = st->data;
  size_t used;
  char why[512];

  if (nread == 0)
    return;
  if (nread < 0) {
    /* A guest that said BYE and closed may have left its BYE in the ring:
     * read the ring first so an orderly close is reported as one. */
    if (c->open && !c->held)
      drain(c);
    if (!c->open && c->poll_init)
      return; /* closed while draining (BYE or bad bytes) */
    snprintf(why, sizeof(why), "tenant \"%s\" (%s): socket %s (process gone)",
             wire_tenant_info(c->t)->name, wire_tenant_info(c->t)->peer,
             nread == UV_EOF ? "closed" : uv_strerror((int)nread));
    wire__tenant_lost(c->t, nread == UV_EOF ? WIRE_ECLOSED : -ECONNRESET, why);
    return;
  }
  if (c->open) {
    snprintf(why, sizeof(why), "tenant \"%s\" (%s): %zd bytes on the socket after the handshake",
             wire_tenant_info(c->t)->name, wire_tenant_info(c->t)->peer, nread);
    wire_tenant_close(c->t, -EPROTO, why);
    return;
  }
  wire__tenant_feed(c->t, c->hbuf, (size_t)nread, &used);
}

static void on_conn(uv_stream_t *srv, int status) {
  shm_listener *l = srv->data;
  shm_stp *c;
  wire_tenant_info_t *info;
  struct ucred cr;
  socklen_t crl = sizeof(cr);
  char key[32] = "";
  int fd;

  if (status < 0)
    return;
  c = calloc(1, sizeof(*c));
  if (c == NULL)
    return;
  c->efd_d = c->efd_rx = c->efd_tx = c->sockfd = -1;
  c->l = l;
  pthread_mutex_init(&c->d2g_mu, NULL);
  uv_pipe_init(srv->loop, &c->sock, 0);
  c->sock.data = c;
  c->handles = 1;
  if (uv_accept(srv, (uv_stream_t *)&c->sock) != 0) {
    uv_close((uv_handle_t *)&c->sock, on_closed);
    return;
  }
  c->t = wire__tenant_new(l->s, &shm_ops, c, false);
  if (c->t == NULL) {
    uv_close((uv_handle_t *)&c->sock, on_closed);
    return;
  }
  info = wire__tenant_info_mut(c->t);
  info->local = true;
  if (uv_fileno((uv_handle_t *)&c->sock, &fd) == 0 &&
      getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0) {
    info->uid = cr.uid;
    info->pid = cr.pid;
    snprintf(info->peer, sizeof(info->peer), "pid %d uid %u", (int)cr.pid, (unsigned)cr.uid);
    snprintf(key, sizeof(key), "uid %u", (unsigned)cr.uid);
  }
  wire__tenant_admit(c->t, key); /* may close older half-open ones, never this one */
  if (uv_read_start((uv_stream_t *)&c->sock, on_alloc, on_sock_read) != 0)
    wire__tenant_lost(c->t, -EIO, "cannot read the tenant's socket");
}

/* A socket file nobody listens on is left by a daemon that died: remove it.
 * One that answers belongs to a live daemon: keep it (bind then fails). */
static void remove_stale_socket(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  struct stat st;
  int fd;

  if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode))
    return;
  memcpy(sa.sun_path, path, strlen(path));
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED)
    unlink(path);
  close(fd);
}

/* The socket file's mode and group, set between bind and listen (nobody
 * can connect yet), so they do not depend on the umask the daemon was
 * started with. */
static int socket_access(const wire_server_opts_t *o, const char *path) {
  if (chmod(path, o->unix_mode & 07777) != 0)
    return -errno;
  if (o->unix_gid_set && chown(path, (uid_t)-1, o->unix_gid) != 0)
    return -errno;
  return 0;
}

static void on_listener_closed(uv_handle_t *h) {
  shm_listener *l = h->data;
  if (--l->handles == 0)
    free(l);
}

int wire__shm_listen(wire_server_t *s, const char *path, void **out) {
  shm_listener *l;
  int rc;

  int adopt_fd = wire__server_opts(s)->unix_listen_fd;

  *out = NULL;
  if (path == NULL)
    path = "";
  if (strlen(path) >= sizeof(l->path))
    return -ENAMETOOLONG;
  l = calloc(1, sizeof(*l));
  if (l == NULL)
    return -ENOMEM;
  l->s = s;
  snprintf(l->path, sizeof(l->path), "%s", path);
  {
    /* > 0: as asked; < 0: never; 0: auto (wire__spin_us: on with >= 4
     * CPUs, TALLY_WIRE_SPIN_US overrides). */
    int32_t us = wire__server_opts(s)->shm_spin_us;
    if (us == 0)
      us = wire__spin_us(0);
    l->spin_ns = us > 0 ? (uint64_t)us * 1000u : 0;
  }
  l->adopted = adopt_fd > 0;
  if (!l->adopted)
    remove_stale_socket(path);
  uv_pipe_init(wire__server_loop(s), &l->h, 0);
  uv_idle_init(wire__server_loop(s), &l->idle);
  l->h.data = l;
  l->idle.data = l;
  l->handles = 2;
  /* An inherited socket is already bound (and listening): its path stays
   * as it is, and connections queued in its backlog while no process
   * accepted are accepted now. */
  rc = l->adopted ? uv_pipe_open(&l->h, adopt_fd) : uv_pipe_bind(&l->h, path);
  if (rc == 0 && !l->adopted && (rc = socket_access(wire__server_opts(s), path)) != 0)
    unlink(path); /* bound by us a moment ago */
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&l->h, 128, on_conn);
  if (rc) {
    uv_close((uv_handle_t *)&l->h, on_listener_closed);
    uv_close((uv_handle_t *)&l->idle, on_listener_closed);
    return rc;
  }
  *out = l;
  return 0;
}

void wire__shm_unlisten(void *p) {
  shm_listener *l = p;

  if (!l->adopted && l->path[0])
    unlink(l->path);
  uv_close((uv_handle_t *)&l->h, on_listener_closed);
  uv_close((uv_handle_t *)&l->idle, on_listener_closed);
}

int wire__shm_listen_fd(void *p) {
  shm_listener *l = p;
  int fd;

  return uv_fileno((uv_handle_t *)&l->h, &fd) == 0 ? fd : -1;
}
