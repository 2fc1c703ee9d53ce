/* shm.c: shared-memory ring and data-region primitives for both sides.
 *
 * The layout and the memory-ordering rules are in shm.h's table.  Producers
 * write bytes, then publish head with a release store; consumers read head
 * with an acquire load and validate it before trusting it (head - rd must not
 * exceed the ring: a hostile peer may write anything into the control
 * block).  Sleeping and waiting flags use the Dekker pattern (store flag,
 * full fence, re-read the other side's index) so no wakeup is lost.  A
 * message travels inline when small; otherwise its payload is copied into
 * the data region, in chunks of D/4 when it exceeds D/2 so that the consumer
 * can drain one chunk while the producer fills the next.  No syscalls here
 * except the eventfd helpers at the end.
 */
#include "wire/shm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define LOAD_ACQ(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define STORE_REL(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define FENCE()         __atomic_thread_fence(__ATOMIC_SEQ_CST)

size_t wire__shm_size(uint64_t r, uint64_t d) {
  return WIRE__SHM_CTL + 2 * r + 2 * d;
}

void wire__shm_bind(uint8_t *base, uint64_t r, uint64_t d, wire__shm_dir *g2d, wire__shm_dir *d2g) {
  memset(g2d, 0, sizeof(*g2d));
  memset(d2g, 0, sizeof(*d2g));
  g2d->ctl = base + 1024;
  d2g->ctl = base + 2048;
  g2d->ring = base + WIRE__SHM_CTL;
  d2g->ring = base + WIRE__SHM_CTL + r;
  g2d->data = base + WIRE__SHM_CTL + 2 * r;
  d2g->data = base + WIRE__SHM_CTL + 2 * r + d;
  g2d->r = d2g->r = r;
  g2d->d = d2g->d = d;
}

void wire__shm_init(uint8_t *base, uint64_t r, uint64_t d) {
  uint32_t v = 1, r32 = (uint32_t)r;

  memset(base, 0, WIRE__SHM_CTL);
  memcpy(base, WIRE__SHM_MAGIC, 8);
  memcpy(base + 8, &v, 4);
  memcpy(base + 12, &r32, 4);
  memcpy(base + 16, &d, 8);
  /* Both consumers start asleep: the first message rings the doorbell. */
  *(uint32_t *)(base + 1024 + WIRE__SHM_SLEEPING) = 1;
  *(uint32_t *)(base + 2048 + WIRE__SHM_SLEEPING) = 1;
}

int wire__shm_check(const uint8_t *base, size_t size, uint64_t r, uint64_t d) {
  uint32_t v, r32;
  uint64_t d64;

  if (size < wire__shm_size(r, d) || memcmp(base, WIRE__SHM_MAGIC, 8) != 0)
    return -EPROTO;
  memcpy(&v, base + 8, 4);
  memcpy(&r32, base + 12, 4);
  memcpy(&d64, base + 16, 8);
  if (v != 1 || r32 != r || d64 != d || r == 0 || (r & (r - 1)) != 0)
    return -EPROTO;
  return 0;
}

static void ring_write(wire__shm_dir *d, uint64_t pos, const void *src, size_t n) {
  size_t at = (size_t)(pos & (d->r - 1)), first = d->r - at < n ? d->r - at : n;

  if (n == 0)
    return; /* src may be NULL (an empty payload) */
  memcpy(d->ring + at, src, first);
  if (n > first)
    memcpy(d->ring, (const uint8_t *)src + first, n - first);
}

void wire__shm_copy_out(const wire__shm_dir *d, uint64_t pos, void *dst, size_t n) {
  size_t at = (size_t)(pos & (d->r - 1)), first = d->r - at < n ? d->r - at : n;

  memcpy(dst, d->ring + at, first);
  if (n > first)
    memcpy((uint8_t *)dst + first, d->ring, n - first);
}

static void ring_write_iov(wire__shm_dir *d, uint64_t pos, const struct iovec *iov, int cnt) {
  int i;

  for (i = 0; i < cnt; i++) {
    ring_write(d, pos, iov[i].iov_base, iov[i].iov_len);
    pos += iov[i].iov_len;
  }
}

int wire__shm_tx_step(wire__shm_dir *d, wire__shm_tx *tx, bool *published) {
  *published = false;
  while (!tx->done) {
    uint64_t tail = LOAD_ACQ(wire__shm_u64(d, WIRE__SHM_TAIL));
    uint64_t used = d->head - tail, ring_free;
    uint8_t hb[WIRE__HDR_LEN];
    wire__hdr h = {tx->version, tx->kind, 0, 0, tx->aux, tx->id};

    if (used > d->r)
      return -EPROTO; /* the consumer wrote an impossible tail */
    ring_free = d->r - used;
    if (tx->len <= WIRE__SHM_INLINE && tx->len + WIRE__HDR_LEN <= d->r / 2) {
      if (ring_free < WIRE__HDR_LEN + tx->len)
        return -EAGAIN;
      h.len = (uint32_t)tx->len;
      wire__hdr_encode(hb, &h);
      ring_write(d, d->head, hb, sizeof(hb));
      ring_write_iov(d, d->head + WIRE__HDR_LEN, tx->iov, tx->cnt);
      d->head += WIRE__HDR_LEN + tx->len;
      STORE_REL(wire__shm_u64(d, WIRE__SHM_HEAD), d->head);
      *published = true;
      tx->done = true;
      break;
    }
    {
      size_t chunk = tx->len <= d->d / 2 ? tx->len : d->d / 4;
      if (d->chunk_max != 0 && chunk > d->chunk_max)
        chunk = d->chunk_big != 0 && tx->len >= 8 * d->chunk_big && d->chunk_big <= chunk
                    ? d->chunk_big
                    : d->chunk_max;
      size_t n = tx->len - tx->off < chunk ? tx->len - tx->off : chunk;
      bool multi = tx->len > chunk;
      uint64_t dtail = LOAD_ACQ(wire__shm_u64(d, WIRE__SHM_DATA_TAIL));
      uint64_t pos = d->data_head;
      uint8_t desc[WIRE__SHMDESC_LEN];
      uint32_t n32 = (uint32_t)n, zero = 0;

      if (ring_free < WIRE__HDR_LEN + WIRE__SHMDESC_LEN)
        return -EAGAIN;
      if (dtail == d->data_head) {
        /* All released: start over at offset 0, where the pages are warm. */
        if (pos % d->d != 0)
          pos += d->d - pos % d->d;
      } else {
        if ((pos % d->d) + n > d->d)
          pos += d->d - pos % d->d; /* never wrap a span: start over at 0 */
        if (pos + n - dtail > d->d)
          return -EAGAIN;
      }
      if (pos % d->d + n > d->hiwater)
        d->hiwater = pos % d->d + n;
      if (pos % d->d + n > WIRE__SHM_DATA_WARM)
        d->high_ns = wire__now_ns();
      if (d->copy)
        d->copy(d->copy_ctx, d->data + pos % d->d, tx->iov, tx->cnt, tx->off, n);
      else
        wire__iov_copy_out(d->data + pos % d->d, tx->iov, tx->cnt, tx->off, n);
      h.flags = WIRE__F_SHMDATA | (multi && tx->off + n < tx->len ? WIRE__F_MORE : 0);
      h.len = WIRE__SHMDESC_LEN;
      h.aux = multi ? (uint32_t)tx->len : tx->aux;
      wire__hdr_encode(hb, &h);
      memcpy(desc, &pos, 8); /* little-endian hosts only: see PROTOCOL.md */
      memcpy(desc + 8, &n32, 4);
      memcpy(desc + 12, &zero, 4);
      ring_write(d, d->head, hb, sizeof(hb));
      ring_write(d, d->head + WIRE__HDR_LEN, desc, sizeof(desc));
      d->head += WIRE__HDR_LEN + WIRE__SHMDESC_LEN;
      d->data_head = pos + n;
      STORE_REL(wire__shm_u64(d, WIRE__SHM_HEAD), d->head);
      *published = true;
      if (multi && d->on_chunk)
        d->on_chunk(d->chunk_ctx);
      tx->off += n;
      if (tx->off >= tx->len)
        tx->done = true;
    }
  }
  return 0;
}

int wire__shm_trim(wire__shm_dir *d, uint64_t now_ns) {
  uint64_t dtail = LOAD_ACQ(wire__shm_u64(d, WIRE__SHM_DATA_TAIL));

  if (d->hiwater <= WIRE__SHM_DATA_WARM || dtail != d->data_head ||
      now_ns - d->high_ns < WIRE__SHM_TRIM_IDLE_NS)
    return 0;
  /* The consumer released every span and only we write here: nobody reads
   * or writes these pages now.  MADV_REMOVE punches a hole in the memfd, so
   * the pages go for both processes; they read as zeros if reused. */
  if (madvise(d->data + WIRE__SHM_DATA_WARM, (size_t)(d->hiwater - WIRE__SHM_DATA_WARM),
              MADV_REMOVE) != 0)
    return -errno;
  d->hiwater = WIRE__SHM_DATA_WARM;
  return 1;
}

int wire__shm_readable(wire__shm_dir *d, const uint8_t **p1, size_t *n1, const uint8_t **p2,
                       size_t *n2) {
  uint64_t head = LOAD_ACQ(wire__shm_u64(d, WIRE__SHM_HEAD));
  uint64_t n = head - d->rd;
  size_t at = (size_t)(d->rd & (d->r - 1));

  if (n > d->r)
    return -EPROTO;
  *p1 = d->ring + at;
  *n1 = d->r - at < n ? d->r - at : (size_t)n;
  *p2 = d->ring;
  *n2 = (size_t)n - *n1;
  return 0;
}

const uint8_t *wire__shm_resolve(wire__shm_dir *d, uint64_t pos, uint32_t len) {
  uint64_t at = pos % d->d;

  if (len > d->d || at + len > d->d)
    return NULL;
  d->data_end = pos + len;
  return d->data + at;
}

bool wire__shm_release(wire__shm_dir *d) {
  STORE_REL(wire__shm_u64(d, WIRE__SHM_TAIL), d->rd);
  STORE_REL(wire__shm_u64(d, WIRE__SHM_DATA_TAIL), d->data_end);
  FENCE();
  return __atomic_load_n(wire__shm_u32(d, WIRE__SHM_WAITING), __ATOMIC_RELAXED) != 0;
}

bool wire__shm_sleep_prepare(wire__shm_dir *d) {
  __atomic_store_n(wire__shm_u32(d, WIRE__SHM_SLEEPING), 1, __ATOMIC_RELAXED);
  FENCE();
  if (LOAD_ACQ(wire__shm_u64(d, WIRE__SHM_HEAD)) != d->rd) {
    __atomic_store_n(wire__shm_u32(d, WIRE__SHM_SLEEPING), 0, __ATOMIC_RELAXED);
    return true;
  }
  return false;
}

void wire__shm_sleep_done(wire__shm_dir *d) {
  __atomic_store_n(wire__shm_u32(d, WIRE__SHM_SLEEPING), 0, __ATOMIC_RELAXED);
}

bool wire__shm_consumer_sleeps(wire__shm_dir *d) {
  FENCE();
  return __atomic_load_n(wire__shm_u32(d, WIRE__SHM_SLEEPING), __ATOMIC_RELAXED) != 0;
}

void wire__shm_wait_set(wire__shm_dir *d, bool on) {
  __atomic_store_n(wire__shm_u32(d, WIRE__SHM_WAITING), on ? 1u : 0u, __ATOMIC_RELAXED);
  FENCE();
}

bool wire__par_enabled(void) {
  const char *e = getenv("TALLY_WIRE_PAR_COPY");

  /* On with >= 4 CPUs: on the 16-CPU GPU host the split copy ran 1.8-2.1x
   * faster at 64 MiB and 1.14-1.16x at 256 MiB (12.2-13.1 GB/s against
   * 10.5-11.3 single); on the 2-CPU development VM it lost 5-13% at
   * 256 MiB, where the helper competes with the daemon (wire/README.md). */
  if (e && *e)
    return strtol(e, NULL, 10) != 0;
  return sysconf(_SC_NPROCESSORS_ONLN) >= 4;
}

int wire__spin_us(int small_host_us) {
  const char *e = getenv("TALLY_WIRE_SPIN_US");
  long v;

  if (e && *e) {
    v = strtol(e, NULL, 10);
    /* 1 ms: far past any useful spin, and bounds a typo's damage. */
    return v < 0 ? 0 : v > 1000 ? 1000 : (int)v;
  }
  return sysconf(_SC_NPROCESSORS_ONLN) >= 4 ? WIRE__SPIN_US_AUTO : small_host_us;
}

int wire__efd_ring(int fd) {
  uint64_t one = 1;
  ssize_t w;

  do
    w = write(fd, &one, sizeof(one));
  while (w < 0 && errno == EINTR);
  /* EAGAIN: the counter is saturated, so the peer is woken anyway. */
  return w < 0 && errno != EAGAIN ? -errno : 0;
}

void wire__efd_drain(int fd) {
  uint64_t v;
  ssize_t r;

  do
    r = read(fd, &v, sizeof(v));
  while (r < 0 && errno == EINTR);
}
