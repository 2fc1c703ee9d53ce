/* fuzz-wire-direct.c: libFuzzer target for the bytes a latency-critical
 * guest puts in its ring, or its TCP socket, when tallyd's worker reads it
 * itself (wire/direct.c, the rules in wire/shm.h).
 *
 * Input: byte 0 picks the reader's refusals (bit 0: refuse calls, bit 1:
 * refuse every third message, bit 2: the call table refuses ids) and, bit 3,
 * TCP: the bytes after byte 9 are written into a loopback TCP connection
 * whose other end the reader reads (what it consumes is whole frames at the
 * front of what was written, a frame it gives back is still in the socket,
 * and it never consumes past what was written); otherwise bytes
 * 1..8 a head offset the guest claims past what it wrote (little endian,
 * most of the time 0), the rest the ring's bytes from position 0 of a 4 KiB
 * ring, wrapping, written at a start position given by byte 9.  The reader
 * reads until it takes nothing more.  Invariants (abort, a finding, never
 * bad input): what it consumes is whole frames inside what was published;
 * a refused frame is not consumed; every message it runs lies inside its
 * copy of the frame, is a call or a post, and is read whole; it never
 * consumes past the head the guest published (bytes it claims and never
 * wrote are ring memory like any other), and gives back at a head it
 * cannot trust.
 * Seeds: tests/fuzz/corpus/wire-direct/ (replayed by test-wire-fuzz-replay).
 */
#include "wire/shm.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define RING 4096u

static uint8_t region[2048 + RING] __attribute__((aligned(64)));

static void must(int ok) {
  if (!ok)
    abort();
}

typedef struct fz {
  wire_direct_t *d;
  unsigned mode, seen;
  size_t ran;
} fz;

static int add_call(wire_tenant_t *t, uint64_t id) {
  fz *f = (fz *)(void *)t;
  return (f->mode & 4) && id % 2 ? -EPROTO : 0;
}

static bool ok(void *ctx, const wire_msg_t *m) {
  fz *f = ctx;
  if ((f->mode & 1) && m->kind == WIRE_MSG_CALL)
    return false;
  return !((f->mode & 2) && ++f->seen % 3 == 0);
}

static void run(void *ctx, const wire_msg_t *m) {
  fz *f = ctx;
  const uint8_t *lo = f->d->buf + WIRE__HDR_LEN, *hi = lo + WIRE_DIRECT_MAX;
  unsigned sum = 0;
  must(m->kind == WIRE_MSG_CALL || m->kind == WIRE_MSG_POST);
  must(m->len == 0 || (m->data >= lo && m->data + m->len <= hi));
  for (size_t i = 0; i < m->len; i++)
    sum += m->data[i];
  (void)sum;
  f->ran++;
}

/* A loopback TCP connection: ends[0] the guest's, ends[1] the reader's.  0
 * or -1 (no network: the input is skipped). */
static int tcp_pair(int ends[2]) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

  ends[0] = ends[1] = -1;
  if (l < 0)
    return -1;
  if (bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(l, 1) == 0 &&
      getsockname(l, (struct sockaddr *)&a, &al) == 0 &&
      (ends[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
      connect(ends[0], (struct sockaddr *)&a, sizeof(a)) == 0)
    ends[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
  close(l);
  if (ends[1] < 0) {
    if (ends[0] >= 0)
      close(ends[0]);
    return -1;
  }
  (void)setsockopt(ends[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return 0;
}

static size_t unread(int fd) {
  int v = 0;
  must(ioctl(fd, FIONREAD, &v) == 0);
  return (size_t)v;
}

static int tcp_one(fz *f, const uint8_t *data, size_t n) {
  static int ends[2] = {-1, -1};
  uint8_t sink[4096];
  size_t left;

  if (ends[0] < 0 && tcp_pair(ends) != 0)
    return 0;
  if (write(ends[0], data, n) != (ssize_t)n) {
    close(ends[0]); /* a reader that shut the stream down: a new connection next time */
    close(ends[1]);
    ends[0] = ends[1] = -1;
    return 0;
  }
  for (int i = 0; i < 100000 && unread(ends[1]) < n; i++)
    ; /* loopback delivers within the write; a bounded wait all the same */
  must(unread(ends[1]) == n);
  f->d = wire__direct_new_tcp((wire_tenant_t *)(void *)f, ends[1], 1, add_call);
  if (f->d == NULL)
    return 0;
  atomic_store(&f->d->owner, WIRE__DR_READER);
  for (left = n;;) {
    size_t before = f->ran;
    int got = wire_direct_read(f->d, ok, run, f);
    size_t now = unread(ends[1]);
    if (wire__dr_state(atomic_load(&f->d->owner)) != WIRE__DR_READER) {
      must(got == 0 && now == left && f->ran == before); /* given back whole */
      break;
    }
    if (got == 0) {
      must(now == left && left == 0);
      break;
    }
    must(left - now >= WIRE__HDR_LEN && now < left);
    must(f->ran - before == (size_t)got);
    left = now;
  }
  wire__direct_unref(f->d);
  while (left > 0) { /* the next input starts on an empty socket */
    ssize_t r = read(ends[1], sink, left < sizeof(sink) ? left : sizeof(sink));
    must(r > 0);
    left -= (size_t)r;
  }
  return 0;
}

int wire_fuzz_direct_one(const uint8_t *data, size_t size);

int wire_fuzz_direct_one(const uint8_t *data, size_t size) {
  static int efd = -1;
  fz f = {0};
  wire__shm_dir g = {0};
  uint64_t extra = 0, start, head;
  size_t n;

  if (size < 10)
    return 0;
  if (efd < 0 && (efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0)
    return 0;
  f.mode = data[0];
  memcpy(&extra, data + 1, 8);
  extra = extra % 16 == 0 ? extra : 0; /* mostly an honest head */
  start = (uint64_t)data[9] * 61u;
  data += 10;
  size -= 10;
  n = size < RING ? size : RING;
  if (f.mode & 8)
    return tcp_one(&f, data, n);
  memset(region, 0, sizeof(region));
  g.ctl = region;
  g.ring = region + 2048;
  g.r = RING;
  for (size_t i = 0; i < n; i++)
    g.ring[(start + i) % RING] = data[i];
  head = start + n + extra;
  __atomic_store_n(wire__shm_u64(&g, WIRE__SHM_HEAD), head, __ATOMIC_RELEASE);
  g.rd = start;
  f.d = wire__direct_new((wire_tenant_t *)(void *)&f, &g, efd, 1, add_call);
  if (f.d == NULL)
    return 0;
  atomic_store(&f.d->owner, WIRE__DR_READER);
  for (;;) {
    uint64_t rd = f.d->g2d.rd;
    size_t before = f.ran;
    int got = wire_direct_read(f.d, ok, run, &f);
    if (wire__dr_state(atomic_load(&f.d->owner)) != WIRE__DR_READER) {
      must(got == 0 && f.d->g2d.rd == rd && f.ran == before); /* given back whole */
      break;
    }
    if (got == 0) {
      must(f.d->g2d.rd == rd);
      break;
    }
    must(f.d->g2d.rd - rd >= WIRE__HDR_LEN && f.d->g2d.rd <= head);
    must(f.ran - before == (size_t)got);
    must(__atomic_load_n(wire__shm_u64(&g, WIRE__SHM_TAIL), __ATOMIC_ACQUIRE) == f.d->g2d.rd);
  }
  wire__direct_unref(f.d);
  return 0;
}

#ifndef WIRE_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return wire_fuzz_direct_one(data, size);
}
#endif
