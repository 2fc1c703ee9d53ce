/* cache.c: the compile cache of transformed kernel images.
 *
 * Compiling transformed PTX (driver JIT or nvPTXCompiler) takes tens of
 * milliseconds to seconds per module; the daemon sees the same modules again
 * after every restart and for every tenant running the same framework, so
 * images are kept in the state directory, one file per (tag, source):
 *
 *   <dir>/<16 hex digits of key>.img     key = XXH3-64(source, seed = XXH3-64(tag))
 *
 * Record format (little-endian):
 *
 *   offset size  meaning
 *   0      8     magic "TLYCACH1"
 *   8      8     key (must match the file name's key)
 *   16     8     source length in bytes (guards against key collisions
 *                between sources of different lengths)
 *   24     8     image length N
 *   32     8     XXH3-64 of the image bytes
 *   40     N     the image
 *
 * A file that is short, long, has another magic, key or source length, or
 * whose image hash does not match is corrupt: it is ignored, the image is
 * compiled again, and the new record replaces it.  Writes go through
 * pol_file_replace (temporary file, fsync, rename(2), fsync of the
 * directory), so a reader sees a whole old record or a whole new one, never
 * a torn one.  Several daemons may share a directory; the last rename wins,
 * and both wrote the same bytes.
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include "policy/pol-file.h"
#include "wire/wire-le.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define REC_MAGIC      "TLYCACH1"
#define REC_HEADER_LEN 40
/* Largest image accepted from disk: cubins of whole frameworks stay far
 * below 1 GiB; a bigger length field is corruption. */
#define MAX_IMAGE_LEN (1ull << 30)

struct rw_cache {
  char *dir; /* owned; no lock: a cache handle belongs to one thread */
};

int rw_cache_open(const char *dir, rw_cache_t **out) {
  rw_cache_t *c;
  *out = NULL;
  if (mkdir(dir, 0700) < 0 && errno != EEXIST)
    return -errno;
  c = calloc(1, sizeof(*c));
  if (c == NULL)
    return -ENOMEM;
  c->dir = strdup(dir);
  if (c->dir == NULL) {
    free(c);
    return -ENOMEM;
  }
  *out = c;
  return 0;
}

void rw_cache_close(rw_cache_t *c) {
  if (c == NULL)
    return;
  free(c->dir);
  free(c);
}

static uint64_t cache_key(const void *src, size_t len, const char *tag) {
  return XXH3_64bits_withSeed(src, len, XXH3_64bits(tag, strlen(tag)));
}

/* Reads and verifies a record; 0 with *image on success, -ENOENT if absent,
 * -EPROTO if corrupt. */
static int read_record(const char *path, uint64_t key, size_t src_len, void **image,
                       size_t *image_len) {
  char *p;
  size_t n;
  int rc = rw__read_file(path, &p, &n);
  if (rc == -EFBIG)
    return -EPROTO;
  if (rc < 0)
    return rc == -ENOENT ? -ENOENT : -EPROTO;
  const unsigned char *u = (const unsigned char *)p;
  rc = -EPROTO;
  if (n < REC_HEADER_LEN || memcmp(u, REC_MAGIC, 8) != 0 || wire_le_rd64(u + 8) != key ||
      wire_le_rd64(u + 16) != src_len)
    goto out;
  uint64_t ilen = wire_le_rd64(u + 24);
  if (ilen > MAX_IMAGE_LEN || ilen != n - REC_HEADER_LEN)
    goto out;
  if (XXH3_64bits(u + REC_HEADER_LEN, ilen) != wire_le_rd64(u + 32))
    goto out;
  void *img = malloc(ilen ? ilen : 1);
  if (img == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  memcpy(img, u + REC_HEADER_LEN, ilen);
  *image = img;
  *image_len = ilen;
  rc = 0;
out:
  free(p);
  return rc;
}

static int write_record(const char *path, uint64_t key, size_t src_len, const void *image,
                        size_t image_len) {
  unsigned char h[REC_HEADER_LEN];
  memcpy(h, REC_MAGIC, 8);
  wire_le_wr64(h + 8, key);
  wire_le_wr64(h + 16, src_len);
  wire_le_wr64(h + 24, image_len);
  wire_le_wr64(h + 32, XXH3_64bits(image, image_len));
  struct iovec parts[2] = {{.iov_base = h, .iov_len = sizeof(h)},
                           {.iov_base = (void *)image, .iov_len = image_len}};
  return pol_file_replace(path, parts, 2, 0644);
}

int rw_cache_get(rw_cache_t *c, const void *src, size_t len, const char *tag,
                 rw_cache_compile_fn compile, void *ctx, void **image, size_t *image_len,
                 int *hit) {
  char path[4096];
  uint64_t key;
  int rc;

  *image = NULL;
  *image_len = 0;
  if (hit)
    *hit = 0;
  if (tag == NULL)
    tag = "";
  key = cache_key(src, len, tag);
  if (snprintf(path, sizeof(path), "%s/%016llx.img", c->dir, (unsigned long long)key) >=
      (int)sizeof(path))
    return -ENAMETOOLONG;
  rc = read_record(path, key, len, image, image_len);
  if (rc == 0) {
    if (hit)
      *hit = 1;
    return 0;
  }
  if (rc == -ENOMEM)
    return rc;
  /* absent or corrupt: compile, then store (a failed store still returns
   * the image: the cache is an optimization, not a requirement) */
  if ((rc = compile(ctx, src, len, image, image_len)) < 0)
    return rc;
  (void)write_record(path, key, len, *image, *image_len);
  return 0;
}
