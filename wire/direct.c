/* direct.c: a latency-critical tenant's ring or socket read by its own
 * executor.
 *
 * The loop thread reads every tenant's ring or socket and hands each
 * message to the tenant's worker; for a polling latency-critical tenant
 * that hand-off is the one step between the guest's write and the driver
 * call that no work needs.  Here the worker reads the bytes itself while
 * the loop lets it (the ownership rules are in shm.h): it takes only whole
 * plain frames of calls, posts and batches, copies each out before reading
 * a field (the guest can still write the ring; a socket's bytes are peeked
 * and consumed only once the frame is claimed), and gives the ring or
 * socket back to the loop, unconsumed, at anything else.  Loop-side
 * hand-off: server-shm.c, server-tcp.c.  Why (docs/decisions.md, D20).
 */
#include "wire/shm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* A reader over dups of efd_tx (shared memory) or fd (TCP): the transport
 * may close its own copies while the reader still holds the struct. */
static wire_direct_t *direct_new(wire_tenant_t *t, int efd_tx, int fd, uint8_t version,
                                 int (*add_call)(wire_tenant_t *t, uint64_t id)) {
  wire_direct_t *d = calloc(1, sizeof(*d));

  if (d == NULL)
    return NULL;
  d->buf = malloc(WIRE__HDR_LEN + WIRE_DIRECT_MAX);
  d->efd_tx = efd_tx >= 0 ? fcntl(efd_tx, F_DUPFD_CLOEXEC, 0) : -1;
  d->fd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
  if (d->buf == NULL || (efd_tx >= 0 && d->efd_tx < 0) || (fd >= 0 && d->fd < 0)) {
    if (d->efd_tx >= 0)
      close(d->efd_tx);
    if (d->fd >= 0)
      close(d->fd);
    free(d->buf);
    free(d);
    return NULL;
  }
  atomic_init(&d->owner, WIRE__DR_LOOP);
  atomic_init(&d->refs, 1);
  d->t = t;
  d->add_call = add_call;
  d->version = version;
  d->stuck_ns = WIRE__DR_STUCK_NS;
  return d;
}

wire_direct_t *wire__direct_new(wire_tenant_t *t, const wire__shm_dir *g2d, int efd_tx,
                                uint8_t version, int (*add_call)(wire_tenant_t *t, uint64_t id)) {
  wire_direct_t *d = direct_new(t, efd_tx, -1, version, add_call);

  if (d != NULL)
    d->g2d = *g2d;
  return d;
}

wire_direct_t *wire__direct_new_tcp(wire_tenant_t *t, int fd, uint8_t version,
                                    int (*add_call)(wire_tenant_t *t, uint64_t id)) {
  return fd < 0 ? NULL : direct_new(t, -1, fd, version, add_call);
}

void wire__direct_hand_over(wire_direct_t *d) {
  /* A new generation (shm.h): only the loop writes it, so a load is enough. */
  atomic_store_explicit(
      &d->owner,
      ((atomic_load_explicit(&d->owner, memory_order_relaxed) & ~7u) + 8u) | WIRE__DR_READER,
      memory_order_release);
}

bool wire__direct_reclaim(wire_direct_t *d) {
  unsigned o = atomic_load_explicit(&d->owner, memory_order_acquire);

  if ((wire__dr_state(o) != WIRE__DR_READER && wire__dr_state(o) != WIRE__DR_RUNNING) ||
      !atomic_compare_exchange_strong_explicit(&d->owner, &o, wire__dr_word(o, WIRE__DR_LOOP),
                                               memory_order_acq_rel, memory_order_acquire))
    return wire__dr_state(o) == WIRE__DR_LOOP;
  atomic_fetch_add_explicit(&d->given, 1, memory_order_relaxed);
  return true;
}

void wire__direct_unref(wire_direct_t *d) {
  if (d == NULL || atomic_fetch_sub(&d->refs, 1) != 1)
    return;
  if (d->map)
    munmap(d->map, d->map_len);
  if (d->efd_tx >= 0)
    close(d->efd_tx);
  if (d->fd >= 0)
    close(d->fd);
  free(d->buf);
  free(d);
}

wire_direct_t *wire__direct_take(wire_direct_t *d) {
  atomic_fetch_add(&d->refs, 1);
  return d;
}

void wire_direct_release(wire_direct_t *d) {
  wire__direct_unref(d);
}

void wire_direct_counts(const wire_direct_t *d, uint64_t *read, uint64_t *given_back) {
  *read = d ? atomic_load_explicit(&d->frames, memory_order_relaxed) : 0;
  *given_back = d ? atomic_load_explicit(&d->given, memory_order_relaxed) : 0;
}

static uint64_t ring_head(const wire_direct_t *d) {
  return __atomic_load_n(wire__shm_u64(&d->g2d, WIRE__SHM_HEAD), __ATOMIC_ACQUIRE);
}

/* TCP: whether the socket holds bytes nobody read yet (FIONREAD). */
static bool sock_unread(const wire_direct_t *d) {
  int v = 0;
  return ioctl(d->fd, FIONREAD, &v) == 0 && v > 0;
}

uint64_t wire__direct_rx_ns(wire_direct_t *d, uint64_t loop_rx_ns, uint64_t now) {
  uint64_t rx = atomic_load_explicit(&d->rx_ns, memory_order_relaxed);
  unsigned o = wire__dr_state(atomic_load_explicit(&d->owner, memory_order_acquire));

  if (o != WIRE__DR_LOOP && o != WIRE__DR_CLOSED &&
      (d->fd >= 0 ? sock_unread(d)
                  : ring_head(d) != __atomic_load_n(wire__shm_u64(&d->g2d, WIRE__SHM_TAIL),
                                                    __ATOMIC_ACQUIRE)))
    return now; /* bytes wait for a busy reader: the silence is ours */
  if (rx < loop_rx_ns)
    rx = loop_rx_ns;
  return rx < now ? rx : now; /* stamped after the caller read its clock */
}

/* The loop reads the frame at rd, or the socket's next bytes (and reports
 * whatever is wrong with them). */
static int give_back(wire_direct_t *d, unsigned w) {
  if (atomic_compare_exchange_strong_explicit(&d->owner, &w, wire__dr_word(w, WIRE__DR_LOOP),
                                              memory_order_acq_rel, memory_order_acquire))
    atomic_fetch_add_explicit(&d->given, 1, memory_order_relaxed);
  return 0;
}

/* TCP: up to the socket's next n bytes (n at most the buffer) copied into
 * d->buf and left in the socket: how many (fewer than n: all there is), 0
 * when the socket is empty, -1 at its end or an error (the loop's to
 * report). */
static ssize_t sock_peek(wire_direct_t *d, size_t n) {
  ssize_t got = recv(d->fd, d->buf, n, MSG_PEEK | MSG_DONTWAIT);

  if (got < 0)
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
  return got == 0 ? -1 : got;
}

/* The first peek at a socket's next frame: most frames are a request's few
 * hundred bytes, which it sees whole. */
#define PEEK_FIRST (WIRE__HDR_LEN + 1024)

bool wire_direct_ready(wire_direct_t *d) {
  unsigned w = atomic_load_explicit(&d->owner, memory_order_acquire);
  ssize_t got;

  if (wire__dr_state(w) != WIRE__DR_READER)
    return false;
  if (d->fd < 0)
    return ring_head(d) != __atomic_load_n(&d->g2d.rd, __ATOMIC_RELAXED);
  /* The peek the read would make first, kept for it (peek_w). */
  got = sock_peek(d, PEEK_FIRST);
  d->peek_n = got > 0 ? (size_t)got : 0;
  d->peek_w = w;
  if (got < 0)
    (void)give_back(d, w); /* the end of the connection: the loop sees it */
  return got > 0;
}

/* The messages of a copied frame: one call or post, or a batch's posts.
 * Calls fn on each (stopping at the first false); false also for a batch
 * whose records do not fill it exactly (as frame.c's batch_start checks). */
static bool each_msg(const wire__hdr *h, const uint8_t *p, uint64_t rx_ns,
                     bool (*fn)(void *ctx, const wire_msg_t *m), void *ctx) {
  wire_msg_t m = {.kind = h->kind == WIRE__K_CALL ? WIRE_MSG_CALL : WIRE_MSG_POST,
                  .id = h->kind == WIRE__K_CALL ? h->id : 0,
                  .rx_ns = rx_ns};
  size_t left = h->len;
  uint32_t i;

  if (h->kind != WIRE__K_BATCH) {
    m.data = p;
    m.len = h->len;
    return fn(ctx, &m);
  }
  for (i = 0; i < h->aux; i++) {
    uint32_t len;
    if (wire__batch_rec(&p, &left, &m.data, &len) != 0)
      return false;
    m.len = len;
    if (!fn(ctx, &m))
      return false;
  }
  return h->aux > 0 && left == 0;
}

static bool accept_all(void *ctx, const wire_msg_t *m) {
  (void)ctx, (void)m;
  return true;
}

struct run_ctx {
  void (*run)(void *ctx, const wire_msg_t *m);
  void *ctx;
  int n;
};

static bool run_one(void *ctx, const wire_msg_t *m) {
  struct run_ctx *r = ctx;
  r->run(r->ctx, m);
  r->n++;
  return true;
}

/* Whether the header decoded from d->buf is a frame the reader takes, with
 * avail bytes (header included) published after its start. */
static bool frame_ours(const wire_direct_t *d, wire__hdr *h, uint64_t avail) {
  char why[160];

  return wire__hdr_decode(d->buf, d->version, h, why, sizeof(why)) == 0 && h->flags == 0 &&
         (h->kind == WIRE__K_CALL || h->kind == WIRE__K_POST || h->kind == WIRE__K_BATCH) &&
         h->len <= WIRE_DIRECT_MAX && h->len <= avail - WIRE__HDR_LEN &&
         (h->kind != WIRE__K_BATCH || h->len <= WIRE__DR_BURST_BYTES) &&
         (h->kind != WIRE__K_CALL || h->id != 0) && (h->kind == WIRE__K_BATCH || h->aux == 0);
}

/* Moves past the frame just claimed: the ring's consumer index, or the
 * socket's bytes (peeked before, so they are there).  0, or -1 when the
 * socket would not give them (the stream is then shut: nothing reads it
 * out of step). */
static int consume(wire_direct_t *d, uint64_t rd, size_t n) {
  if (d->fd >= 0) {
    if (recv(d->fd, NULL, n, MSG_TRUNC | MSG_DONTWAIT) == (ssize_t)n)
      return 0;
    (void)shutdown(d->fd, SHUT_RDWR);
    return -1;
  }
  d->g2d.rd = rd + n;
  if (wire__shm_release(&d->g2d))
    wire__efd_ring(d->efd_tx); /* the guest waits for ring space */
  return 0;
}

/* The next frame, whole, in d->buf: 1 (h decoded), 0 (nothing there), -1
 * (the loop's: given back).  rd: the ring's consumer index it starts at. */
static int next_frame(wire_direct_t *d, unsigned w, wire__hdr *h, uint64_t *rd) {
  uint64_t head, n;
  ssize_t got;

  if (d->fd >= 0) {
    /* A longer frame than the first peek saw is peeked again at its length.
     * What ready peeked under this very word is still the socket's front. */
    got = d->peek_n && d->peek_w == w ? (ssize_t)d->peek_n : sock_peek(d, PEEK_FIRST);
    d->peek_n = 0;
    if (got == 0)
      return 0;
    /* The header is judged once (its length at most the buffer); the bytes
     * it names are then all there, or the loop's framing waits for them. */
    if (got < (ssize_t)WIRE__HDR_LEN || !frame_ours(d, h, WIRE__HDR_LEN + WIRE_DIRECT_MAX))
      return give_back(d, w) - 1;
    if (h->len > (size_t)got - WIRE__HDR_LEN)
      got = sock_peek(d, WIRE__HDR_LEN + h->len);
    if (got < (ssize_t)(WIRE__HDR_LEN + h->len))
      return give_back(d, w) - 1; /* not yet whole, or the end */
    return 1;
  }
  /* rd is read atomically: a word of an older generation may be read while
   * the loop hands the ring over again (then the claim fails). */
  *rd = __atomic_load_n(&d->g2d.rd, __ATOMIC_RELAXED);
  head = ring_head(d);
  n = head - *rd;
  if (n == 0)
    return 0;
  if (n > d->g2d.r || n < WIRE__HDR_LEN)
    return give_back(d, w) - 1; /* an impossible head, or a frame not yet whole */
  wire__shm_copy_out(&d->g2d, *rd, d->buf, WIRE__HDR_LEN);
  if (!frame_ours(d, h, n))
    return give_back(d, w) - 1;
  wire__shm_copy_out(&d->g2d, *rd + WIRE__HDR_LEN, d->buf + WIRE__HDR_LEN, h->len);
  return 1;
}

int wire_direct_read(wire_direct_t *d, bool (*ok)(void *ctx, const wire_msg_t *m),
                     void (*run)(void *ctx, const wire_msg_t *m), void *ctx) {
  uint64_t now, rd = 0;
  unsigned w, o;
  wire__hdr h;
  struct run_ctx r = {run, ctx, 0};
  const uint8_t *payload = d->buf + WIRE__HDR_LEN;

  w = atomic_load_explicit(&d->owner, memory_order_acquire);
  if (wire__dr_state(w) != WIRE__DR_READER || next_frame(d, w, &h, &rd) != 1)
    return 0;
  /* Every message must be ours and the batch well formed before any runs:
   * the frame is taken whole or not at all. */
  if (!each_msg(&h, payload, 0, ok ? ok : accept_all, ctx))
    return give_back(d, w);
  /* Ours only if the loop did not take the ring back meanwhile (nor hand
   * it over again: the generation in w). */
  o = w;
  if (!atomic_compare_exchange_strong_explicit(&d->owner, &o, wire__dr_word(w, WIRE__DR_TAKING),
                                               memory_order_acq_rel, memory_order_acquire))
    return 0;
  if (h.kind == WIRE__K_CALL && d->add_call(d->t, h.id) != 0) {
    atomic_store_explicit(&d->owner, w, memory_order_release);
    return give_back(d, w);
  }
  if (consume(d, rd, WIRE__HDR_LEN + h.len) != 0) {
    atomic_store_explicit(&d->owner, w, memory_order_release);
    return give_back(d, w); /* the loop finds the stream's end and closes the tenant */
  }
  now = wire__now_ns();
  atomic_store_explicit(&d->rx_ns, now, memory_order_relaxed);
  /* The reader's own count (one writer): no locked addition on its path. */
  atomic_store_explicit(&d->frames, atomic_load_explicit(&d->frames, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  atomic_store_explicit(&d->owner, wire__dr_word(w, WIRE__DR_RUNNING), memory_order_release);
  (void)each_msg(&h, payload, now, run_one, &r);
  o = wire__dr_word(w, WIRE__DR_RUNNING); /* the loop may have taken the ring back meanwhile */
  (void)atomic_compare_exchange_strong_explicit(&d->owner, &o, w, memory_order_acq_rel,
                                                memory_order_acquire);
  return r.n;
}
