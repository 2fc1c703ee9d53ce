/* txplan.c: cutting one outgoing message into frames, and iovec helpers.
 *
 * A message of up to `chunk` bytes is one frame: header + the caller's iovecs,
 * handed to the transport in one emit (one writev, so one TCP segment for a
 * small call).  Larger messages become a run of frames with flag MORE and
 * the total length in aux; the chunks of one message are never interleaved
 * with another message (the caller holds the transport's send lock).
 * zstd (only when negotiated): a chunk of at least WIRE__ZSTD_MIN bytes is
 * compressed at level 1 and sent compressed only if that at least halves it
 * (wire-bench: fp16 weights shrink ~20%, and compressing them at ~0.4 GB/s
 * made loopback TCP 2.5x slower; zeros and sparse data halve easily);
 * after the first chunk that does not pay, the rest of the message goes raw
 * and the next 1, 2, 4 ... 64 messages skip the trial (wire__zstate), so
 * incompressible data costs a trial now and then, not one per message.
 * This file does no I/O: emit does.
 */
#include "wire/wire-int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

/* Below 4 KiB a zstd frame's own overhead and the call cost eat the gain. */
#define WIRE__ZSTD_MIN 4096
/* Level 1: the fastest standard level; bulk links here are >= 1 GB/s, where
 * higher levels cost more time than they save. */
#define WIRE__ZSTD_LEVEL 1

uint64_t wire__now_ns(void) {
  struct timespec ts;

  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

size_t wire__iov_len(const struct iovec *iov, int cnt) {
  size_t n = 0;
  int i;

  for (i = 0; i < cnt; i++)
    n += iov[i].iov_len;
  return n;
}

void wire__iov_copy_out(void *dst, const struct iovec *iov, int cnt, size_t off, size_t n) {
  uint8_t *d = dst;
  int i;

  for (i = 0; i < cnt && n > 0; i++) {
    size_t l = iov[i].iov_len, take;
    if (off >= l) {
      off -= l;
      continue;
    }
    take = l - off < n ? l - off : n;
    memcpy(d, (const uint8_t *)iov[i].iov_base + off, take);
    d += take;
    n -= take;
    off = 0;
  }
}

size_t wire__iov_copy_in(const struct iovec *iov, int cnt, size_t off, const void *src, size_t n) {
  const uint8_t *s = src;
  size_t done = 0;
  int i;

  for (i = 0; i < cnt && n > 0; i++) {
    size_t l = iov[i].iov_len, take;
    if (off >= l) {
      off -= l;
      continue;
    }
    take = l - off < n ? l - off : n;
    memcpy((uint8_t *)iov[i].iov_base + off, s, take);
    s += take;
    n -= take;
    done += take;
    off = 0;
  }
  return done;
}

int wire__iov_slice(struct iovec *out, int max, const struct iovec *iov, int cnt, size_t off,
                    size_t n) {
  int i, k = 0;

  for (i = 0; i < cnt && n > 0; i++) {
    size_t l = iov[i].iov_len, take;
    if (off >= l) {
      off -= l;
      continue;
    }
    take = l - off < n ? l - off : n;
    if (k == max)
      return -1;
    out[k].iov_base = (uint8_t *)iov[i].iov_base + off;
    out[k].iov_len = take;
    k++;
    n -= take;
    off = 0;
  }
  return k;
}

/* Most callers pass 1-3 iovecs; 62 slices + header fit a 64-entry array. */
#define WIRE__SLICES 64

int wire__emit_frame(uint8_t version, uint8_t kind, uint64_t id, uint16_t flags, uint32_t aux,
                     const struct iovec *iov, int cnt, size_t off, size_t n, wire__emit_fn emit,
                     void *arg) {
  uint8_t hb[WIRE__HDR_LEN];
  struct iovec v[WIRE__SLICES];
  wire__hdr h = {version, kind, flags, (uint32_t)n, aux, id};
  int k;

  wire__hdr_encode(hb, &h);
  v[0].iov_base = hb;
  v[0].iov_len = sizeof(hb);
  k = wire__iov_slice(v + 1, WIRE__SLICES - 1, iov, cnt, off, n);
  if (k >= 0)
    return emit(arg, v, k + 1);
  /* Pathologically fragmented input: gather it first. */
  {
    void *tmp = malloc(n ? n : 1);
    int rc;
    if (tmp == NULL)
      return -ENOMEM;
    wire__iov_copy_out(tmp, iov, cnt, off, n);
    v[1].iov_base = tmp;
    v[1].iov_len = n;
    rc = emit(arg, v, 2);
    free(tmp);
    return rc;
  }
}

int wire__emit_to_buf(void *arg, const struct iovec *iov, int cnt) {
  wire_buf_t *b = arg;
  int i;

  for (i = 0; i < cnt; i++)
    wire_buf_put_bytes(b, iov[i].iov_base, iov[i].iov_len);
  return wire_buf_status(b);
}

int wire__send_frames(uint8_t version, uint8_t kind, uint64_t id, const struct iovec *iov, int cnt,
                      size_t len, uint32_t chunk, wire__zstate *z, wire__emit_fn emit, void *arg) {
  size_t off = 0;
  bool multi = len > chunk;
  bool zstd = z != NULL && multi;
  uint32_t aux = multi ? (uint32_t)len : 0;
  uint8_t *raw = NULL, *zb = NULL;
  size_t zcap = 0;
  int rc = 0;

  if (len > UINT32_MAX)
    return -EMSGSIZE;
  if (zstd && z->skip > 0) {
    z->skip--; /* recent data did not compress: do not even try */
    zstd = false;
  }
  if (zstd) {
    zcap = 4 + ZSTD_compressBound(chunk);
    raw = malloc(chunk);
    zb = malloc(zcap);
    if (raw == NULL || zb == NULL)
      zstd = false; /* compression is an optimisation: go raw */
  }
  do {
    size_t n = len - off < chunk ? len - off : chunk;
    uint16_t flags = (off + n < len) ? WIRE__F_MORE : 0;
    if (zstd && n >= WIRE__ZSTD_MIN) {
      size_t r;
      wire__iov_copy_out(raw, iov, cnt, off, n);
      r = ZSTD_compress(zb + 4, zcap - 4, raw, n, WIRE__ZSTD_LEVEL);
      if (!ZSTD_isError(r) && r + 4 <= n / 2) {
        struct iovec zi = {zb, r + 4};
        zb[0] = (uint8_t)n;
        zb[1] = (uint8_t)(n >> 8);
        zb[2] = (uint8_t)(n >> 16);
        zb[3] = (uint8_t)(n >> 24);
        rc = wire__emit_frame(version, kind, id, flags | WIRE__F_ZSTD, aux, &zi, 1, 0, r + 4, emit,
                              arg);
        off += n;
        z->backoff = 0;
        continue;
      }
      zstd = false; /* did not pay: stop trying for this message... */
      z->backoff = z->backoff ? (z->backoff < 64 ? z->backoff * 2 : 64) : 1;
      z->skip = z->backoff; /* ...and for the next few */
    }
    rc = wire__emit_frame(version, kind, id, flags, aux, iov, cnt, off, n, emit, arg);
    off += n;
  } while (rc == 0 && off < len);
  free(raw);
  free(zb);
  return rc;
}
