/* profile-file.c: profiles on disk, so tallyd (in its state folder) and
 * tally-sim (--profiles) keep them across runs.
 *
 * The file is outside input (a crash, a disk error or another program may
 * have written it), so the decoder checks every length against the bytes
 * present and a cap before it allocates, checks every field, and swaps the
 * new table in only when the whole file is good.  All integers are
 * little-endian.
 *
 *   OFFSET  SIZE   FIELD
 *        0     8   magic "TALLYPRF"
 *        8     4   version: 2 (written), 1 (still read)
 *       12     4   record count N (at most POL__FILE_MAX_RECORDS)
 *       16     4   record size R: 80 in version 2, 64 in version 1
 *       20     4   reserved, 0
 *       24   N*R   records, below
 *   24+N*R     8   FNV-1a 64 of bytes [0, 24+N*R)
 *
 * Record (R = 80 bytes; version 1's are the first 64, the FLUSH figures
 * then read as 0, unknown):
 *        0     8   kernel id
 *        8    12   grid x, y, z (each >= 1)
 *       20    12   block x, y, z (each >= 1, product <= 1024)
 *       32     4   shared memory bytes
 *       36     8   wave_ns
 *       44     4   wave samples
 *       48     8   ptb_block_ns
 *       56     4   ptb samples
 *       60     4   drifted count (< 1000)
 *       64     8   flush_drain_ns                      (version 2)
 *       72     4   flush drain samples                 (version 2)
 *       76     4   reserved, 0                         (version 2)
 * tests/test-pol-profile.c checks the code against this table, and reads a
 * version 1 file.
 */
#include "policy/pol.h"
#include "policy/pol-int.h"

#include "policy/pol-file.h"
#include "wire/wire-le.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define POL__FILE_HDR     24
#define POL__FILE_VERSION 2
#define POL__FILE_REC     80 /* version 2 */
#define POL__FILE_REC_V1  64
#define POL__FILE_SUM     8
/* 1 Mi records (80 MiB) is far more kernel shapes than any workload has; it
 * bounds what a corrupt count can make us allocate. */
#define POL__FILE_MAX_RECORDS (1u << 20)
#define POL__FILE_MAX_BYTES   (POL__FILE_HDR + (size_t)POL__FILE_MAX_RECORDS * POL__FILE_REC + 8)

static const uint8_t magic[8] = {'T', 'A', 'L', 'L', 'Y', 'P', 'R', 'F'};

static uint64_t fnv1a(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

int pol_profiles_encode(const pol_profiles_t *p, uint8_t *buf, size_t cap, size_t *len) {
  size_t n = pol_profiles_count(p);
  size_t need = POL__FILE_HDR + n * POL__FILE_REC + POL__FILE_SUM;
  *len = need;
  if (n > POL__FILE_MAX_RECORDS)
    return -EFBIG;
  if (cap < need)
    return -ENOSPC;
  memcpy(buf, magic, 8);
  wire_le_wr32(buf + 8, POL__FILE_VERSION);
  wire_le_wr32(buf + 12, (uint32_t)n);
  wire_le_wr32(buf + 16, POL__FILE_REC);
  wire_le_wr32(buf + 20, 0);
  uint8_t *r = buf + POL__FILE_HDR;
  size_t cursor = 0;
  const pol_profile_t *e;
  while ((e = pol__profiles_at(p, &cursor)) != NULL) {
    wire_le_wr64(r + 0, e->key.kernel_id);
    for (int i = 0; i < 3; i++) {
      wire_le_wr32(r + 8 + 4 * i, e->key.grid[i]);
      wire_le_wr32(r + 20 + 4 * i, e->key.block[i]);
    }
    wire_le_wr32(r + 32, e->key.shmem_bytes);
    wire_le_wr64(r + 36, e->wave_ns);
    wire_le_wr32(r + 44, e->wave_samples);
    wire_le_wr64(r + 48, e->ptb_block_ns);
    wire_le_wr32(r + 56, e->ptb_samples);
    wire_le_wr32(r + 60, e->drifted);
    wire_le_wr64(r + 64, e->flush_drain_ns);
    wire_le_wr32(r + 72, e->flush_drain_samples);
    wire_le_wr32(r + 76, 0);
    r += POL__FILE_REC;
  }
  wire_le_wr64(r, fnv1a(buf, (size_t)(r - buf)));
  return 0;
}

/* Decodes one record of rec_size bytes (POL__FILE_REC or, version 1,
 * POL__FILE_REC_V1). */
static int decode_record(const uint8_t *r, size_t rec_size, pol_profile_t *e, const char **why) {
  uint64_t threads = 1;
  memset(e, 0, sizeof(*e));
  e->key.kernel_id = wire_le_rd64(r);
  for (int i = 0; i < 3; i++) {
    e->key.grid[i] = wire_le_rd32(r + 8 + 4 * i);
    e->key.block[i] = wire_le_rd32(r + 20 + 4 * i);
    if (e->key.grid[i] == 0 || e->key.block[i] == 0) {
      *why = "record has a zero grid or block dimension";
      return -EPROTO;
    }
    threads *= e->key.block[i];
  }
  if (threads > 1024) {
    *why = "record has more than 1024 threads per block";
    return -EPROTO;
  }
  e->key.shmem_bytes = wire_le_rd32(r + 32);
  e->wave_ns = wire_le_rd64(r + 36);
  e->wave_samples = wire_le_rd32(r + 44);
  e->ptb_block_ns = wire_le_rd64(r + 48);
  e->ptb_samples = wire_le_rd32(r + 56);
  e->drifted = wire_le_rd32(r + 60);
  if (rec_size >= POL__FILE_REC) {
    e->flush_drain_ns = wire_le_rd64(r + 64);
    e->flush_drain_samples = wire_le_rd32(r + 72);
    if (wire_le_rd32(r + 76) != 0) {
      *why = "record has a nonzero reserved field";
      return -EPROTO;
    }
  }
  /* An estimate over an hour per wave is no GPU kernel we can schedule. */
  if (e->wave_ns > 3600000000000ull || e->ptb_block_ns > 3600000000000ull ||
      e->flush_drain_ns > 3600000000000ull) {
    *why = "record has an estimate over one hour";
    return -EPROTO;
  }
  if (e->drifted >= 1000) {
    *why = "record has an impossible drift count";
    return -EPROTO;
  }
  return 0;
}

int pol_profiles_decode(pol_profiles_t *p, const uint8_t *buf, size_t len, const char **why) {
  const char *dummy;
  int rc;
  pol_profiles_t *tmp = NULL;
  if (!why)
    why = &dummy;
  if (len < POL__FILE_HDR + POL__FILE_SUM) {
    *why = "file shorter than its header";
    return -EPROTO;
  }
  if (memcmp(buf, magic, 8) != 0) {
    *why = "bad magic (not a Tally profile file)";
    return -EPROTO;
  }
  uint32_t version = wire_le_rd32(buf + 8);
  if (version != 1 && version != POL__FILE_VERSION) {
    *why = "unsupported version";
    return -EPROTO;
  }
  size_t rec = version == 1 ? POL__FILE_REC_V1 : POL__FILE_REC;
  uint32_t n = wire_le_rd32(buf + 12);
  if (wire_le_rd32(buf + 16) != rec || wire_le_rd32(buf + 20) != 0) {
    *why = "bad record size or reserved field";
    return -EPROTO;
  }
  if (n > POL__FILE_MAX_RECORDS) {
    *why = "record count over the cap";
    return -EPROTO;
  }
  /* Length is checked against the count before anything is allocated. */
  if (len != POL__FILE_HDR + (size_t)n * rec + POL__FILE_SUM) {
    *why = "file length does not match its record count";
    return -EPROTO;
  }
  size_t body = POL__FILE_HDR + (size_t)n * rec;
  if (wire_le_rd64(buf + body) != fnv1a(buf, body)) {
    *why = "checksum mismatch";
    return -EPROTO;
  }
  rc = pol_profiles_new(&tmp);
  if (rc < 0)
    return rc;
  for (uint32_t i = 0; i < n; i++) {
    pol_profile_t e;
    rc = decode_record(buf + POL__FILE_HDR + (size_t)i * rec, rec, &e, why);
    if (rc < 0)
      goto out;
    if (pol_profiles_find(tmp, &e.key)) {
      *why = "duplicate record";
      rc = -EPROTO;
      goto out;
    }
    rc = pol_profiles_put(tmp, &e);
    if (rc < 0)
      goto out;
  }
  pol__profiles_swap(p, tmp);
  rc = 0;
out:
  pol_profiles_free(tmp);
  return rc;
}

/* Durable and atomic: a crash leaves the old file or the new one, never a
 * torn one (pol_file_replace). */
int pol_profiles_save(const pol_profiles_t *p, const char *path) {
  size_t len = 0;
  int rc;
  uint8_t *buf;
  (void)pol_profiles_encode(p, NULL, 0, &len);
  buf = malloc(len);
  if (!buf)
    return -ENOMEM;
  rc = pol_profiles_encode(p, buf, len, &len);
  if (rc == 0) {
    struct iovec part = {.iov_base = buf, .iov_len = len};
    rc = pol_file_replace(path, &part, 1, 0644);
  }
  free(buf);
  return rc;
}

int pol_profiles_load(pol_profiles_t *p, const char *path, const char **why) {
  int rc;
  struct stat st;
  uint8_t *buf = NULL;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) < 0) {
    rc = -errno;
    goto out_fd;
  }
  if (st.st_size < 0 || (uint64_t)st.st_size > POL__FILE_MAX_BYTES) {
    rc = -EFBIG;
    goto out_fd;
  }
  size_t len = (size_t)st.st_size;
  buf = malloc(len ? len : 1);
  if (!buf) {
    rc = -ENOMEM;
    goto out_fd;
  }
  for (size_t off = 0; off < len;) {
    ssize_t r = read(fd, buf + off, len - off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rc = -errno;
      goto out_buf;
    }
    if (r == 0) {
      len = off; /* shrank under us: decode what is there, it will say */
      break;
    }
    off += (size_t)r;
  }
  rc = pol_profiles_decode(p, buf, len, why);
out_buf:
  free(buf);
out_fd:
  close(fd);
  return rc;
}
