/* fatbin-extract.c: turns a fatbin entry into its plain bytes, and picks
 * the PTX a device should get.
 *
 * Payloads are stored plain, as one raw LZ4 block (flag 0x2000, nvcc
 * --compress-mode=speed) or as one zstd frame (flag 0x8000, modes default,
 * balance and size); fatbin-int.h has the measurements.  Both are decoded
 * by their libraries (liblz4's LZ4_decompress_safe and libzstd), whose safe
 * decoders never read or write outside the buffers they are given.  The decompressed
 * size comes from the entry header and is checked against the caller's
 * maximum before anything is allocated; the decoders are then held to
 * exactly that many bytes, so a lying header yields -EPROTO, not an
 * overflow.  PTX payloads end in NUL padding, which is dropped from the
 * reported length; every returned buffer has one NUL after its bytes so PTX
 * can go straight to cuModuleLoadData.
 */
#include "rewrite/rw.h"
#include "rewrite/fatbin-int.h"

#include <errno.h>
#include <stdlib.h>
#include <limits.h>
#include <lz4.h>
#include <string.h>
#include <zstd.h>

int rw__lz4_block_decode(const unsigned char *src, size_t src_len, unsigned char *dst,
                         size_t dst_len) {
  if (src_len > INT_MAX || dst_len > INT_MAX)
    return -EPROTO;
  int got = LZ4_decompress_safe((const char *)src, (char *)dst, (int)src_len, (int)dst_len);
  return got >= 0 && (size_t)got == dst_len ? 0 : -EPROTO;
}

int rw_fatbin_extract(const rw_fatbin_t *fb, const rw_fatbin_entry_t *e, size_t max_size,
                      void **out, size_t *out_len, rw_diag_t *diag) {
  const unsigned char *src;
  unsigned char *buf;
  size_t n;
  int rc = 0;

  if (fb == NULL || e == NULL || out == NULL || out_len == NULL)
    return rw_diag_set(diag, -EINVAL, 0, 0, "NULL argument");
  *out = NULL;
  *out_len = 0;
  /* The entry came from rw_fatbin_next() on this image, but it is a plain
   * struct the caller could have altered: recheck its span. */
  {
    size_t image_len;
    const unsigned char *image = rw__fatbin_bytes(fb, &image_len);
    if (e->payload_offset > image_len || e->stored_size > image_len - e->payload_offset)
      return rw_diag_set(diag, -EINVAL, 0, 0, "entry %u lies outside the image", e->index);
    src = image + e->payload_offset;
  }
  if (max_size == 0)
    max_size = RW_FATBIN_DEFAULT_MAX_ENTRY;
  n = e->size;
  if (n > max_size)
    return rw_diag_set(diag, -EFBIG, 0, 0, "entry %u is %zu bytes decompressed, over the %zu limit",
                       e->index, n, max_size);
  buf = malloc(n + 1);
  if (buf == NULL)
    return rw_diag_set(diag, -ENOMEM, 0, 0, "out of memory for %zu bytes", n + 1);

  switch (e->comp) {
  case RW_FATBIN_COMP_NONE:
    if (n != e->stored_size) {
      rc = rw_diag_set(diag, -EINVAL, 0, 0, "entry %u: sizes disagree", e->index);
      goto fail;
    }
    memcpy(buf, src, n);
    break;
  case RW_FATBIN_COMP_LZ4:
    if (rw__lz4_block_decode(src, e->stored_size, buf, n) < 0) {
      rc = rw_diag_set(diag, -EPROTO, 0, 0, "entry %u: corrupt LZ4 block (%zu -> %zu bytes)",
                       e->index, e->stored_size, n);
      goto fail;
    }
    break;
  case RW_FATBIN_COMP_ZSTD: {
    size_t got = ZSTD_decompress(buf, n, src, e->stored_size);
    if (ZSTD_isError(got) || got != n) {
      rc = rw_diag_set(diag, -EPROTO, 0, 0, "entry %u: corrupt zstd frame (%s)", e->index,
                       ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short output");
      goto fail;
    }
    break;
  }
  default:
    rc = rw_diag_set(diag, -EINVAL, 0, 0, "entry %u: unknown compression", e->index);
    goto fail;
  }
  buf[n] = 0;
  if (e->kind == RW_FATBIN_KIND_PTX)
    n = strnlen((const char *)buf, n);
  *out = buf;
  *out_len = n;
  return 0;

fail:
  free(buf);
  return rc;
}

int rw_fatbin_ptx(const void *image, size_t len, unsigned arch, char **ptx, size_t *ptx_len,
                  unsigned *ptx_arch, rw_diag_t *diag) {
  rw_fatbin_t *fb = NULL;
  rw_fatbin_entry_t e, best;
  int rc, have = 0;
  void *buf = NULL;

  if (ptx == NULL || ptx_len == NULL)
    return rw_diag_set(diag, -EINVAL, 0, 0, "NULL argument");
  *ptx = NULL;
  *ptx_len = 0;
  if (ptx_arch != NULL)
    *ptx_arch = 0;
  rc = rw_fatbin_open(image, len, &fb, diag);
  if (rc < 0)
    return rc;
  while ((rc = rw_fatbin_next(fb, &e, diag)) == 1) {
    if (e.kind != RW_FATBIN_KIND_PTX || (arch != 0 && e.arch > arch))
      continue;
    if (!have || e.arch > best.arch) {
      best = e;
      have = 1;
    }
  }
  if (rc < 0)
    goto out;
  if (!have) {
    rw_diag_set(diag, 0, 0, 0, "no PTX: not transformable");
    goto out;
  }
  rc = rw_fatbin_extract(fb, &best, 0, &buf, ptx_len, diag);
  if (rc < 0)
    goto out;
  *ptx = buf;
  if (ptx_arch != NULL)
    *ptx_arch = best.arch;
out:
  rw_fatbin_free(fb);
  return rc < 0 ? rc : 0;
}
