/* fuzz-wire-frame.c: libFuzzer target for wire__rx, the frame assembler every
 * receiver runs on untrusted bytes.
 *
 * Input: byte 0 = piece size - 1 (the stream is fed in pieces of that size,
 * exercising every split), byte 1 = options (bit 0: zstd negotiated; bit 1:
 * pause after every message and resume; bit 2: 4 KiB message limit; bit 3:
 * multi-frame messages up to 64 KiB are placed into two pieces of a
 * buffer, as the guest places replies), then the byte stream.  SHMDATA descriptors resolve into a
 * 64 KiB fake region with the transport's bounds rule.  Every delivered byte is read, so ASan sees
 * any out-of-bounds pointer.  Seeds: tests/fuzz/corpus/wire-frame/, replayed by make check
 * (tests/test-wire-fuzz-replay.c).
 */
#include "wire/wire-int.h"

#include <stdlib.h>
#include <string.h>

#define REGION (64u << 10)

static uint8_t region[REGION];

static uint8_t placed[REGION + 64];
static struct iovec pieces[2];

static int place(void *ctx, uint8_t kind, uint64_t id, size_t total, const struct iovec **iov,
                 int *cnt) {
  (void)ctx, (void)kind, (void)id;
  if (total > REGION)
    return 0;
  /* Two pieces with a gap; the second is 7 bytes longer than needed. */
  pieces[0] = (struct iovec){placed, total / 2};
  pieces[1] = (struct iovec){placed + total / 2 + 32, total - total / 2 + 7};
  *iov = pieces;
  *cnt = 2;
  return 1;
}

static int touch(void *ctx, const wire__msg *m) {
  unsigned *sum = ctx;
  size_t i;
  if (m->placed) {
    if (m->data != NULL || m->len > REGION)
      abort(); /* placed messages carry no pointer and fit their pieces */
    for (i = 0; i < m->len; i++)
      *sum += i < m->len / 2 ? placed[i] : placed[i + 32];
  }
  for (i = 0; i < m->len && !m->placed; i++)
    *sum += m->data[i];
  *sum += m->kind;
  return (*sum & 0x80000000u) ? 1 : 0; /* the caller sets the bit to pause */
}

static const uint8_t *resolve(void *ctx, uint64_t pos, uint32_t len) {
  uint64_t at = pos % REGION;
  (void)ctx;
  if (len > REGION || at + len > REGION)
    return NULL;
  return region + at;
}

int wire_fuzz_frame_one(const uint8_t *data, size_t size);

int wire_fuzz_frame_one(const uint8_t *data, size_t size) {
  wire__rx rx;
  unsigned sum = 0;
  size_t piece, off = 0, used;
  uint8_t opt;
  int rc = 0;

  if (size < 2)
    return 0;
  piece = (size_t)data[0] + 1;
  opt = data[1];
  data += 2;
  size -= 2;
  wire__rx_init(&rx, (opt & 4) ? 4096 : (1u << 20), 0xffffffffu, touch, &sum);
  rx.zstd_ok = (opt & 1) != 0;
  rx.resolve = resolve;
  if (opt & 8)
    rx.place = place;
  while (off < size && rc >= 0) {
    size_t n = size - off < piece ? size - off : piece, done = 0;
    do {
      if (opt & 2)
        sum |= 0x80000000u; /* pause after the next message */
      rc = wire__rx_feed(&rx, data + off + done, n - done, &used);
      sum &= 0x7fffffffu;
      done += used;
    } while (rc == 1 && (done < n || wire__rx_pending(&rx)));
    off += n;
  }
  wire__rx_close(&rx);
  return 0;
}

#ifndef WIRE_FUZZ_NO_ENTRY
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  return wire_fuzz_frame_one(data, size);
}
#endif
