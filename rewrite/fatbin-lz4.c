/* fatbin-lz4.c: a bounds-checked decoder for raw LZ4 blocks.
 *
 * nvcc 13's --compress-mode=speed stores fatbin entries as one LZ4 block
 * (flag 0x2000) with no frame header; the entry header gives both sizes.
 * liblz4's headers are not a dependency of this project, and the block
 * format is small, so it is decoded here.  Spec: lz4/doc/lz4_Block_format.md.
 *
 * A block is a run of sequences.  Each sequence:
 *   1 byte  token: high nibble literal length L, low nibble match length M-4
 *   if L == 15: more bytes, each added to L, until one is not 255
 *   L bytes literals
 *   -- the last sequence ends here (input exhausted) --
 *   2 bytes match offset (little-endian, 1..bytes already produced)
 *   if M-4 == 15: more bytes, added as for L
 * A match copies M bytes from offset bytes back; it may overlap its own
 * output (offset < M repeats a pattern), so it is copied byte by byte.
 *
 * Invariants: never read past src+src_len, never write past dst+dst_len,
 * never read dst before its start; the output must be exactly dst_len bytes.
 */
#include "rewrite/fatbin-int.h"

#include <errno.h>
#include <string.h>

/* Reads an LZ4 length extension starting at *ip.  Adds to *n; fails on
 * running out of input or on a length that would pass `limit`. */
static int read_ext(const unsigned char **ip, const unsigned char *end, size_t *n, size_t limit) {
  unsigned char b;

  do {
    if (*ip >= end)
      return -EPROTO;
    b = *(*ip)++;
    *n += b;
    if (*n > limit)
      return -EPROTO;
  } while (b == 255);
  return 0;
}

int rw__lz4_block_decode(const unsigned char *src, size_t src_len, unsigned char *dst,
                         size_t dst_len) {
  const unsigned char *ip = src, *iend = src + src_len;
  unsigned char *op = dst, *oend = dst + dst_len;

  while (ip < iend) {
    unsigned token = *ip++;
    size_t lit = token >> 4, mlen = (token & 15u) + 4, off;

    if (lit == 15 && read_ext(&ip, iend, &lit, dst_len) < 0)
      return -EPROTO;
    if (lit > (size_t)(iend - ip) || lit > (size_t)(oend - op))
      return -EPROTO;
    memcpy(op, ip, lit);
    ip += lit;
    op += lit;
    if (ip == iend)
      break; /* last sequence: literals only */
    if (iend - ip < 2)
      return -EPROTO;
    off = rw__le16(ip);
    ip += 2;
    if (off == 0 || off > (size_t)(op - dst))
      return -EPROTO;
    if ((token & 15u) == 15 && read_ext(&ip, iend, &mlen, dst_len) < 0)
      return -EPROTO;
    if (mlen > (size_t)(oend - op))
      return -EPROTO;
    /* At this point off <= op - dst, so m >= dst; byte order matters when
     * the match overlaps its own output. */
    const unsigned char *m = op - off;
    for (size_t i = 0; i < mlen; i++)
      op[i] = m[i];
    op += mlen;
  }
  return op == oend ? 0 : -EPROTO;
}
