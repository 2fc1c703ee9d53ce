/* server-tcp.c: the daemon's TCP listener and per-tenant TCP transport.
 *
 * libuv reads into one per-tenant buffer (a TCP chunk plus a header, so a
 * whole chunk frame can be assembled in place) and the bytes go straight to
 * wire__tenant_feed.  When on_msg pauses the tenant, reading stops and the
 * unconsumed tail of that buffer is kept; resume feeds it again first.
 * Outgoing messages are framed by wire__send_frames into one malloc'd block
 * handed to uv_write (libuv writes at once when its queue is empty; the block
 * is freed in the write callback).  TCP_NODELAY: replies are latency-bound.
 * A worker thread's reply (wire_tenant_reply_mt) of at most TCP_FAST_MAX
 * bytes is written by that thread itself when no write of the loop is
 * pending (send_direct), saving the hop to the loop thread: wmu serialises
 * every write on the socket, and `queued` counts the uv_write requests not
 * yet called back (and a parked tail), during which libuv writes on its own
 * and workers keep out.  A direct write the socket takes only in part never
 * waits: its rest is parked on the tenant, the listener's async handle wakes
 * the loop, and the loop writes it before anything else.
 * Token checks happen in server.c (need_token = true for every TCP tenant).
 * Spinning (tcp_spin_us, auto on hosts with >= 4 CPUs): after a read the
 * loop keeps polling with a zero timeout for a while, so a tenant's next
 * request is picked up without a wakeup from epoll_wait; the guest spins on
 * its reply the same way (guest-tcp.c).
 */
#include "wire/wire-int.h"
#include "wire/shm.h" /* wire__spin_us, the direct reader */

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define TCP_RBUF (WIRE__TCP_CHUNK + WIRE__HDR_LEN)

/* One per server.  The idle handle is the spin (as in server-shm.c): while
 * it is active libuv polls its descriptors with a zero timeout instead of
 * sleeping in epoll_wait, so a tenant's next request is read without the
 * daemon's wakeup.  It starts on TCP traffic and stops spin_ns after the
 * last byte read. */
typedef struct tcp_listener {
  uv_tcp_t h;
  wire_server_t *s;
  uv_idle_t *idle;    /* NULL = never spin */
  uint64_t active_ns; /* last read */
  uint64_t spin_ns;
  int lc_open; /* latency-critical tenants open under lc_poll: spin without end */
  unsigned spins; /* on_spin passes (its yields are spaced while lc_open) */
  /* Tenants whose direct reply left a tail for the loop (tail_mu; any
   * thread adds, the loop takes them in on_wake).  wake NULL: no direct
   * replies at all (out of memory at start). */
  uv_async_t *wake;
  pthread_mutex_t tail_mu;
  struct tcp_stp *tails;
  /* Latency-critical tenants whose worker may read the socket itself
   * (lc_direct_tcp; dr_next), and when the loop last looked at the sockets
   * their readers hold. */
  struct tcp_stp *drs;
  uint64_t dr_polled_ns;
} tcp_listener;

typedef struct write_req_t write_req_t;

typedef struct tcp_stp {
  uv_tcp_t h;
  wire_tenant_t *t;
  tcp_listener *l;
  uint8_t *buf;              /* TCP_RBUF bytes, libuv reads here */
  size_t hold_off, hold_end; /* paused: unconsumed bytes buf[hold_off..hold_end) */
  bool reading;
  wire__zstate zs; /* compression memory (loop thread) */
  bool lc;         /* counted in l->lc_open */
  /* The framing buffer of large replies, kept between them: a fresh
   * multi-MiB malloc per reply is fresh mmap'd pages, and their faults cost
   * more than the copy (wire-bench's daemon->guest figure: 16 MiB replies
   * went from 1.1 to 2.8 GB/s on the 2-CPU VM).  Kept up to SPARE_MAX
   * bytes; one above SPARE_KEEP goes back after SPARE_IDLE_NS unused
   * (tcp_idle), as the shm data region's high pages do.  NULL while a
   * write holds it. */
  write_req_t *spare;
  uint64_t spare_ns; /* when the spare was last returned */
  /* wmu: every write on the socket, the loop's (tcp_send, the welcome) and a
   * worker's (tcp_send_direct); queued: uv_write requests not yet called
   * back (changed under wmu, or by on_write on the loop thread); fd: the
   * socket, fixed while the tenant is open. */
  pthread_mutex_t wmu;
  _Atomic unsigned queued;
  int fd;
  /* The rest of a direct reply the socket took in part (wmu), handed to
   * libuv by the loop before any other byte; counted in queued while parked.
   * tail_next and tail_listed: l->tails (l->tail_mu). */
  write_req_t *tail;
  struct tcp_stp *tail_next;
  bool tail_listed;
  /* lc_direct_tcp: the socket's direct reader (shm.h's rules), whether it
   * holds the socket (dr_out: libuv does not read it then), whether the loop
   * took it back and libuv has not read it since (dr_unread: what the reader
   * gave back is still in the socket, so it is not handed over again), the
   * frames it had read when the loop first saw bytes waiting for it, and
   * since when (0: none waiting); dr_next: l->drs. */
  wire_direct_t *dr;
  bool dr_out, dr_unread;
  uint64_t dr_frames, dr_wait_at;
  struct tcp_stp *dr_next;
} tcp_stp;

#define SPARE_MAX     (((size_t)512 << 20) + ((size_t)1 << 20))
#define SPARE_KEEP    (((size_t)64 << 20) + ((size_t)1 << 20))
#define SPARE_IDLE_NS (5ull * 1000000000ull)

struct write_req_t {
  uv_write_t req;
  wire_buf_t b;
  tcp_stp *c;    /* the tenant it is written for (its queued count) */
  tcp_stp *keep; /* non-NULL: return to keep->spare when written */
};

/* keep: the tenant whose spare this becomes when written (NULL = none). */
static write_req_t *write_req_new(tcp_stp *keep) {
  write_req_t *w = malloc(sizeof(*w));

  if (w == NULL)
    return NULL;
  wire_buf_init(&w->b);
  w->c = NULL;
  w->keep = keep;
  return w;
}

static void on_write(uv_write_t *req, int status) {
  write_req_t *w = (write_req_t *)req;

  (void)status;
  if (w->c != NULL)
    atomic_fetch_sub(&w->c->queued, 1);
  if (w->keep != NULL && w->keep->spare == NULL && w->b.cap <= SPARE_MAX && w->b.err == 0) {
    wire_buf_reset(&w->b);
    w->keep->spare = w;
    w->keep->spare_ns = wire__now_ns();
    return;
  }
  wire_buf_close(&w->b);
  free(w);
}

/* Loop thread, wmu held. */
static int write_block(tcp_stp *c, write_req_t *w) {
  uv_buf_t ub = uv_buf_init((char *)w->b.data, (unsigned)w->b.len);
  int rc;

  w->c = c;
  atomic_fetch_add(&c->queued, 1);
  rc = uv_write(&w->req, (uv_stream_t *)&c->h, &ub, 1, on_write);
  if (rc) {
    atomic_fetch_sub(&c->queued, 1);
    wire_buf_close(&w->b);
    free(w);
  }
  return rc;
}

/* Loop thread, wmu held: a parked tail goes to libuv first (counted as the
 * uv_write it becomes before its parked count is dropped).  0, or the
 * uv_write error. */
static int flush_tail(tcp_stp *c) {
  write_req_t *w = c->tail;
  int rc;

  if (w == NULL)
    return 0;
  c->tail = NULL;
  rc = write_block(c, w);
  atomic_fetch_sub(&c->queued, 1); /* the parked tail's count */
  return rc;
}

/* The unwritten rest p[0..n) of a frame, copied into a write request (any
 * thread: the frame's bytes die with the caller's stack); NULL when out of
 * memory. */
static write_req_t *rest_of(const uint8_t *p, size_t n) {
  write_req_t *w = write_req_new(NULL);

  if (w != NULL && wire_buf_put_bytes(&w->b, p, n)) {
    wire_buf_close(&w->b);
    free(w);
    w = NULL;
  }
  return w;
}

/* Small messages: framed on the stack and written at once when the socket
 * takes them whole (the common case for replies), with no allocation. */
#define TCP_FAST_MAX 4096

/* Frames a message of len <= TCP_FAST_MAX bytes into b; its size. */
static size_t frame_small(uint8_t *b, uint8_t version, uint8_t kind, uint64_t id,
                          const struct iovec *iov, int cnt, size_t len) {
  wire__hdr h = {version, kind, 0, (uint32_t)len, 0, id};

  wire__hdr_encode(b, &h);
  wire__iov_copy_out(b + WIRE__HDR_LEN, iov, cnt, 0, len);
  return WIRE__HDR_LEN + len;
}

/* The tenant's protocol version as frames carry it. */
static uint8_t version_of(wire_tenant_t *t) {
  const wire_tenant_info_t *info = wire_tenant_info(t);
  return (uint8_t)(info->version ? info->version : 1);
}

static int tcp_send_fast(tcp_stp *c, uint8_t version, uint8_t kind, uint64_t id,
                         const struct iovec *iov, int cnt, size_t len) {
  uint8_t b[WIRE__HDR_LEN + TCP_FAST_MAX];
  uv_buf_t ub;
  int r;

  if (uv_stream_get_write_queue_size((uv_stream_t *)&c->h) != 0)
    return 1; /* keep order behind queued writes */
  ub = uv_buf_init((char *)b, (unsigned)frame_small(b, version, kind, id, iov, cnt, len));
  r = uv_try_write((uv_stream_t *)&c->h, &ub, 1);
  if (r == (int)ub.len)
    return 0;
  if (r < 0 && r != UV_EAGAIN)
    return r;
  {
    /* Partly written: queue the rest. */
    size_t done = r > 0 ? (size_t)r : 0;
    write_req_t *w = rest_of(b + done, ub.len - done);
    return w == NULL ? -ENOMEM : write_block(c, w);
  }
}

/* Loop thread, wmu held. */
static int send_locked(wire_tenant_t *t, uint8_t kind, uint64_t id, const struct iovec *iov,
                       int cnt, size_t len) {
  tcp_stp *c = wire__tenant_tp(t);
  write_req_t *w;
  const wire_tenant_info_t *info = wire_tenant_info(t);
  int rc;

  if ((rc = flush_tail(c)) != 0)
    return rc;
  if (len <= TCP_FAST_MAX) {
    rc = tcp_send_fast(c, version_of(t), kind, id, iov, cnt, len);
    if (rc <= 0)
      return rc;
  }
  /* A guest that sends but never reads must not make us queue without
   * bound: past this backlog the reply fails and the tenant is closed. */
  if (uv_stream_get_write_queue_size((uv_stream_t *)&c->h) > WIRE__OUT_MAX)
    return -ENOBUFS;
  if (c->spare != NULL) {
    w = c->spare;
    c->spare = NULL;
  } else if ((w = write_req_new(c)) == NULL) {
    return -ENOMEM;
  }
  /* One header per chunk: reserving them too spares a realloc (a copy of
   * the whole reply) midway. */
  wire_buf_reserve(&w->b, len + WIRE__HDR_LEN * (len / WIRE__TCP_CHUNK + 2));
  rc = wire__send_frames(version_of(t), kind, id, iov, cnt, len,
                         WIRE__TCP_CHUNK, (info->caps & WIRE_CAP_ZSTD) ? &c->zs : NULL,
                         wire__emit_to_buf, &w->b);
  if (rc) {
    wire_buf_close(&w->b);
    free(w);
    return rc;
  }
  return write_block(c, w);
}

static int tcp_send(wire_tenant_t *t, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
                    size_t len) {
  tcp_stp *c = wire__tenant_tp(t);
  int rc;

  pthread_mutex_lock(&c->wmu);
  rc = send_locked(t, kind, id, iov, cnt, len);
  pthread_mutex_unlock(&c->wmu);
  return rc;
}

_Atomic size_t wire__tcp_direct_cut;

/* Any thread (server.c holds the tenant's tx lock, so c is alive and open).
 * 0: written, whole or with its rest parked for the loop (or, out of memory
 * for that, the connection shut down: the loop then sees it closed);
 * -EAGAIN: nothing written, take the loop thread's path (too large, a loop
 * write pending, the socket full). */
static int tcp_send_direct(wire_tenant_t *t, uint64_t id, const void *buf, size_t len) {
  tcp_stp *c = wire__tenant_tp(t);
  uint8_t b[WIRE__HDR_LEN + TCP_FAST_MAX];
  struct iovec v = {(void *)buf, len};
  size_t n, done = 0;
  int rc = 0;

  if (len > TCP_FAST_MAX || c->l->wake == NULL)
    return -EAGAIN;
  n = frame_small(b, version_of(t), WIRE__K_REPLY, id, &v, 1, len);
  pthread_mutex_lock(&c->wmu);
  if (atomic_load(&c->queued) != 0 || c->fd < 0) {
    pthread_mutex_unlock(&c->wmu);
    return -EAGAIN;
  }
  while (done < n) {
    size_t cut = atomic_load_explicit(&wire__tcp_direct_cut, memory_order_relaxed);
    size_t lim = cut > 0 && cut < n ? cut : n;
    ssize_t r;
    if (done >= lim) {
      r = -1;
      errno = EAGAIN;
    } else {
      r = send(c->fd, b + done, lim - done, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    if (r > 0) {
      done += (size_t)r;
      continue;
    }
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && done == 0) {
      rc = -EAGAIN;
      break;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
        (c->tail = rest_of(b + done, n - done)) != NULL) {
      /* Taken in part: the loop writes the rest before anything else. */
      atomic_fetch_add(&c->queued, 1);
      pthread_mutex_lock(&c->l->tail_mu);
      if (!c->tail_listed) {
        c->tail_listed = true;
        c->tail_next = c->l->tails;
        c->l->tails = c;
      }
      pthread_mutex_unlock(&c->l->tail_mu);
      uv_async_send(c->l->wake);
      break;
    }
    /* An error, or no memory for the rest: the frame is torn, so the
     * stream is; shutting it down has the loop see the tenant gone. */
    (void)shutdown(c->fd, SHUT_RDWR);
    break;
  }
  pthread_mutex_unlock(&c->wmu);
  return rc;
}

/* The listener's async handle (loop thread): every parked tail goes out. */
static void on_wake(uv_async_t *a) {
  tcp_listener *l = a->data;
  tcp_stp *c, *next;

  pthread_mutex_lock(&l->tail_mu);
  c = l->tails;
  l->tails = NULL;
  for (tcp_stp *x = c; x != NULL; x = x->tail_next)
    x->tail_listed = false;
  pthread_mutex_unlock(&l->tail_mu);
  for (; c != NULL; c = next) {
    next = c->tail_next;
    pthread_mutex_lock(&c->wmu);
    if (flush_tail(c) != 0)
      (void)shutdown(c->fd, SHUT_RDWR); /* the loop sees the tenant gone */
    pthread_mutex_unlock(&c->wmu);
  }
}

static void spin_touch(tcp_listener *l);

/* lc_poll: a latency-critical tenant keeps the loop polling while it is
 * open, and its socket busy-polls the device queue (SO_BUSY_POLL; refused
 * without CAP_NET_ADMIN above net.core.busy_read, and of no use on
 * loopback, so best effort). */
static void lc_start(tcp_stp *c, wire_tenant_t *t) {
  const wire_server_opts_t *o = wire__server_opts(c->l->s);
  int fd, us = o->lc_busy_poll_us ? (int)o->lc_busy_poll_us : 50;

  if (!o->lc_poll || c->l->idle == NULL || wire_tenant_info(t)->prio != WIRE_PRIO_LATENCY_CRITICAL)
    return;
  if (uv_fileno((uv_handle_t *)&c->h, &fd) == 0)
    (void)setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &us, sizeof(us));
  c->lc = true;
  c->l->lc_open++;
  spin_touch(c->l);
  /* Without memory or a descriptor for it the loop keeps reading: no error. */
  if (o->lc_direct && o->lc_direct_tcp &&
      (c->dr = wire__direct_new_tcp(t, c->fd, (uint8_t)wire_tenant_info(t)->version,
                                    wire__tenant_add_call)) != NULL) {
    if (o->lc_direct_stuck_us)
      c->dr->stuck_ns = (uint64_t)o->lc_direct_stuck_us * 1000u;
    wire__tenant_set_direct(t, c->dr); /* t holds its reference */
    c->dr_next = c->l->drs;
    c->l->drs = c;
  }
}

static int tcp_welcome(wire_tenant_t *t, const void *frame, size_t len) {
  tcp_stp *c = wire__tenant_tp(t);
  write_req_t *w = write_req_new(NULL);
  int rc;

  if (w == NULL)
    return -ENOMEM;
  if (wire_buf_put_bytes(&w->b, frame, len)) {
    free(w);
    return -ENOMEM;
  }
  pthread_mutex_lock(&c->wmu);
  rc = write_block(c, w);
  pthread_mutex_unlock(&c->wmu);
  if (rc == 0)
    lc_start(c, t);
  return rc;
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf) {
  tcp_stp *c = h->data;
  *buf = uv_buf_init((char *)c->buf, TCP_RBUF);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

/* How often the loop looks at the sockets their readers hold (one poll(2)
 * each): for bytes that wait for a busy reader, and for the connection's
 * end, which the reader sees only when it looks. */
#define DR_POLL_NS 20000u

/* Direct reading, loop side (the rules in shm.h): the socket goes to its
 * reader when libuv reads it, nothing is held or half-framed and a reader
 * exists; it comes back when the reader stores LOOP (bytes it does not
 * take, the connection's end), or when bytes waited stuck_ns for a busy
 * reader, or at once when the guest hung up. */
static void dr_hand_over(tcp_stp *c) {
  if (!c->reading || c->dr_unread || c->hold_off != c->hold_end ||
      atomic_load_explicit(&c->dr->refs, memory_order_acquire) < 2 ||
      !wire__tenant_rx_idle(c->t) || uv_read_stop((uv_stream_t *)&c->h) != 0)
    return;
  c->reading = false;
  c->dr_out = true;
  c->dr_wait_at = 0;
  wire__direct_hand_over(c->dr);
}

static void dr_take_back(tcp_stp *c) {
  c->dr_out = false;
  c->dr_unread = true;
  if (uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) == 0)
    c->reading = true;
  else
    wire__tenant_lost(c->t, -EIO, "cannot read the socket its worker gave back");
}

/* The reader holds c's socket: takes it back when the guest hung up, or
 * when bytes have waited unread (the reader's count standing still) for
 * stuck_ns. */
static void dr_watch(tcp_stp *c, uint64_t now) {
  struct pollfd p = {.fd = c->fd, .events = POLLIN | POLLRDHUP};
  uint64_t frames = atomic_load_explicit(&c->dr->frames, memory_order_relaxed);
  bool force;

  if (poll(&p, 1, 0) <= 0) {
    c->dr_wait_at = 0;
    return;
  }
  force = (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
  if (!force && (c->dr_wait_at == 0 || frames != c->dr_frames)) {
    c->dr_frames = frames;
    c->dr_wait_at = now;
    return;
  }
  if ((force || now - c->dr_wait_at >= c->dr->stuck_ns) && wire__direct_reclaim(c->dr))
    dr_take_back(c);
}

static void dr_pass(tcp_listener *l) {
  uint64_t now = 0;
  bool look = false;

  for (tcp_stp *c = l->drs; c != NULL; c = c->dr_next) {
    if (!c->dr_out) {
      dr_hand_over(c);
      continue;
    }
    if (wire__dr_state(atomic_load_explicit(&c->dr->owner, memory_order_acquire)) ==
        WIRE__DR_LOOP) {
      dr_take_back(c); /* given back: libuv reads the bytes left in the socket */
      continue;
    }
    if (now == 0) {
      now = wire__now_ns();
      look = now - l->dr_polled_ns >= DR_POLL_NS;
      if (look)
        l->dr_polled_ns = now;
    }
    if (look)
      dr_watch(c, now);
  }
}

static void on_spin(uv_idle_t *h) {
  tcp_listener *l = h->data;

  if (l->drs)
    dr_pass(l);
  if (l->lc_open == 0 && wire__since(wire__now_ns(), l->active_ns) >= l->spin_ns)
    uv_idle_stop(h);
  else if (l->lc_open == 0 || (++l->spins & 31) == 0)
    sched_yield(); /* a guest woken on this CPU runs at once; with a
                      latency-critical tenant open (lc_poll: cores to
                      spare) once per 32 passes, each a system call during
                      which no socket is read */
}

static void spin_touch(tcp_listener *l) {
  if (l->idle == NULL)
    return;
  l->active_ns = wire__now_ns();
  if (!uv_is_active((uv_handle_t *)l->idle))
    uv_idle_start(l->idle, on_spin);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  tcp_stp *c = st->data;
  wire_tenant_t *t = c->t;
  size_t used;
  int rc;

  c->dr_unread = false; /* read, or found empty (0) */
  if (nread == 0)
    return;
  spin_touch(c->l);
  if (nread < 0) {
    char why[512];
    snprintf(why, sizeof(why), "tenant \"%s\" (%s): connection %s", wire_tenant_info(t)->name,
             wire_tenant_info(t)->peer, nread == UV_EOF ? "closed" : uv_strerror((int)nread));
    wire__tenant_lost(t, nread == UV_EOF ? WIRE_ECLOSED : -ECONNRESET, why);
    return;
  }
  rc = wire__tenant_feed(t, c->buf, (size_t)nread, &used);
  if (rc == 1) {
    c->hold_off = used;
    c->hold_end = (size_t)nread;
    uv_read_stop(st);
    c->reading = false;
  }
}

static void tcp_resume(wire_tenant_t *t) {
  tcp_stp *c = wire__tenant_tp(t);
  size_t used;
  int rc;

  /* Held bytes first (an empty feed finishes a paused batch). */
  rc = wire__tenant_feed(t, c->buf + c->hold_off, c->hold_end - c->hold_off, &used);
  if (rc < 0)
    return;
  c->hold_off += used;
  if (rc == 1)
    return; /* paused again: keep the rest */
  c->hold_off = c->hold_end = 0;
  if (!c->reading && !c->dr_out && uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) == 0)
    c->reading = true;
}

static void on_tenant_closed(uv_handle_t *h) {
  tcp_stp *c = h->data;
  wire_tenant_t *t = c->t;

  /* Every write callback has run (libuv cancels them before this). */
  if (c->spare != NULL) {
    wire_buf_close(&c->spare->b);
    free(c->spare);
  }
  wire__tenant_defer(t, free, c->buf);
  if (c->tail != NULL) {
    wire_buf_close(&c->tail->b);
    free(c->tail);
  }
  pthread_mutex_destroy(&c->wmu);
  free(c);
  wire__tenant_release(t);
}

static void tcp_close(wire_tenant_t *t) {
  tcp_stp *c = wire__tenant_tp(t);

  /* No direct reply starts any more (server.c set tx_closed under the
   * tenant's tx lock); a tail still parked goes with the connection. */
  if (c->l->wake != NULL) {
    pthread_mutex_lock(&c->l->tail_mu);
    if (c->tail_listed) {
      tcp_stp **pp = &c->l->tails;
      while (*pp != c)
        pp = &(*pp)->tail_next;
      *pp = c->tail_next;
      c->tail_listed = false;
    }
    pthread_mutex_unlock(&c->l->tail_mu);
  }

  if (c->lc) {
    c->lc = false;
    c->l->lc_open--;
  }
  if (c->dr) {
    /* The reader stops reading; its dup of the socket would keep the
     * connection open, so the guest is told of the end now. */
    tcp_stp **pp = &c->l->drs;
    while (*pp != c)
      pp = &(*pp)->dr_next;
    *pp = c->dr_next;
    atomic_store_explicit(&c->dr->owner, WIRE__DR_CLOSED, memory_order_release);
    (void)shutdown(c->fd, SHUT_RDWR);
    c->dr = NULL; /* t's reference, released with t */
  }
  uv_close((uv_handle_t *)&c->h, on_tenant_closed);
}

/* Heartbeat tick (loop thread): a large spare unused for a while goes. */
static void tcp_idle(wire_tenant_t *t, uint64_t now_ns) {
  tcp_stp *c = wire__tenant_tp(t);

  if (c->spare != NULL && c->spare->b.cap > SPARE_KEEP && now_ns - c->spare_ns >= SPARE_IDLE_NS) {
    wire_buf_close(&c->spare->b);
    free(c->spare);
    c->spare = NULL;
  }
}

static const struct wire__stp_ops tcp_ops = {
    .name = "tcp",
    .welcome = tcp_welcome,
    .send = tcp_send,
    .send_direct = tcp_send_direct,
    .resume = tcp_resume,
    .close = tcp_close,
    .idle = tcp_idle,
};

static void on_conn(uv_stream_t *srv, int status) {
  tcp_listener *l = srv->data;
  tcp_stp *c;
  struct sockaddr_storage ss;
  int sl = sizeof(ss);
  char ip[64] = "?";
  wire_tenant_info_t *info;

  if (status < 0)
    return;
  c = calloc(1, sizeof(*c));
  if (c == NULL || (c->buf = malloc(TCP_RBUF)) == NULL) {
    free(c);
    return; /* the pending connection stays in the backlog until memory returns */
  }
  uv_tcp_init(srv->loop, &c->h);
  c->h.data = c;
  if (uv_accept(srv, (uv_stream_t *)&c->h) != 0) {
    uv_close((uv_handle_t *)&c->h, (uv_close_cb)free);
    free(c->buf);
    return;
  }
  uv_tcp_nodelay(&c->h, 1);
  if (uv_fileno((uv_handle_t *)&c->h, &c->fd) != 0)
    c->fd = -1;
  pthread_mutex_init(&c->wmu, NULL);
  c->l = l;
  c->t = wire__tenant_new(l->s, &tcp_ops, c, true);
  if (c->t == NULL) {
    free(c->buf);
    c->buf = NULL;
    pthread_mutex_destroy(&c->wmu);
    uv_close((uv_handle_t *)&c->h, (uv_close_cb)free);
    return;
  }
  info = wire__tenant_info_mut(c->t);
  info->local = false;
  if (uv_tcp_getpeername(&c->h, (struct sockaddr *)&ss, &sl) == 0) {
    int port = 0;
    if (ss.ss_family == AF_INET) {
      uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof(ip));
      port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof(ip));
      port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    snprintf(info->peer, sizeof(info->peer), "%s:%d", ip, port);
  }
  wire__tenant_admit(c->t, ip); /* may close older half-open ones, never this one */
  if (uv_read_start((uv_stream_t *)&c->h, on_alloc, on_read) == 0)
    c->reading = true;
}

static void listener_free(tcp_listener *l) {
  if (l->idle)
    uv_close((uv_handle_t *)l->idle, (uv_close_cb)free);
  if (l->wake) {
    uv_close((uv_handle_t *)l->wake, (uv_close_cb)free);
    pthread_mutex_destroy(&l->tail_mu);
  }
  uv_close((uv_handle_t *)&l->h, (uv_close_cb)free);
}

/* A listener with its spin set up; NULL when out of memory. */
static tcp_listener *listener_new(wire_server_t *s) {
  tcp_listener *l = calloc(1, sizeof(*l));
  /* > 0: as asked; < 0: never; 0: auto (wire__spin_us: on with >= 4 CPUs
   * online or as TALLY_WIRE_SPIN_US says, off on small hosts). */
  int32_t us = wire__server_opts(s)->tcp_spin_us;
  bool spin;

  if (l == NULL)
    return NULL;
  l->s = s;
  if (us == 0)
    us = wire__spin_us(0);
  spin = us > 0 || wire__server_opts(s)->lc_poll;
  /* Every allocation first, so a failure leaves no handle to close.  wake:
   * a direct reply's parked tail (tcp_send_direct). */
  if ((spin && (l->idle = malloc(sizeof(*l->idle))) == NULL) ||
      (l->wake = malloc(sizeof(*l->wake))) == NULL) {
    free(l->idle);
    free(l);
    return NULL;
  }
  if (uv_async_init(wire__server_loop(s), l->wake, on_wake) != 0) {
    free(l->wake);
    l->wake = NULL; /* no direct replies then (tcp_send_direct) */
  } else {
    l->wake->data = l;
    pthread_mutex_init(&l->tail_mu, NULL);
  }
  if (spin) {
    l->spin_ns = us > 0 ? (uint64_t)us * 1000u : 0;
    uv_idle_init(wire__server_loop(s), l->idle);
    l->idle->data = l;
  }
  uv_tcp_init(wire__server_loop(s), &l->h);
  l->h.data = l;
  return l;
}

/* After the socket is opened or bound (rc: that step's status): listens,
 * or frees l on any failure. */
static int listener_start(tcp_listener *l, int rc, void **out) {
  if (rc == 0)
    rc = uv_listen((uv_stream_t *)&l->h, 128, on_conn);
  if (rc) {
    listener_free(l);
    return rc;
  }
  *out = l;
  return 0;
}

/* Adopts an already-listening socket (inherited across exec). */
static int tcp_adopt(wire_server_t *s, int fd, void **out) {
  tcp_listener *l = listener_new(s);

  if (l == NULL)
    return -ENOMEM;
  return listener_start(l, uv_tcp_open(&l->h, fd), out);
}

int wire__tcp_listen(wire_server_t *s, const char *addr, void **out) {
  char host[256];
  const char *colon, *h = addr;
  size_t n;
  struct sockaddr_storage ss;
  tcp_listener *l;
  int port;

  *out = NULL;
  if (wire__server_opts(s)->tcp_listen_fd > 0)
    return tcp_adopt(s, wire__server_opts(s)->tcp_listen_fd, out);
  if (addr == NULL)
    return -EINVAL;
  if (addr[0] == '[') {
    const char *rb = strchr(addr, ']');
    if (rb == NULL || rb[1] != ':')
      return -EINVAL;
    h = addr + 1;
    n = (size_t)(rb - h);
    colon = rb + 1;
  } else {
    colon = strrchr(addr, ':');
    if (colon == NULL)
      return -EINVAL;
    n = (size_t)(colon - addr);
  }
  if (n >= sizeof(host))
    return -EINVAL;
  memcpy(host, h, n);
  host[n] = 0;
  port = atoi(colon + 1);
  if (port < 0 || port > 65535)
    return -EINVAL;
  if (n == 0)
    snprintf(host, sizeof(host), "0.0.0.0");
  if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) != 0 &&
      uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) != 0)
    return -EINVAL;
  l = listener_new(s);
  if (l == NULL)
    return -ENOMEM;
  return listener_start(l, uv_tcp_bind(&l->h, (struct sockaddr *)&ss, 0), out);
}

void wire__tcp_unlisten(void *p) {
  listener_free(p);
}

int wire__tcp_listen_fd(void *p) {
  tcp_listener *l = p;
  int fd;

  return uv_fileno((uv_handle_t *)&l->h, &fd) == 0 ? fd : -1;
}

int wire__tcp_port(void *p) {
  tcp_listener *l = p;
  struct sockaddr_storage ss;
  int sl = sizeof(ss);

  if (uv_tcp_getsockname(&l->h, (struct sockaddr *)&ss, &sl) != 0)
    return 0;
  if (ss.ss_family == AF_INET)
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
  return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}
