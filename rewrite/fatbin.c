/* fatbin.c: recognises device-code images and walks their entries.
 *
 * An image is one of: a raw fatbin (what cudart registers and what
 * cuModuleLoadData/cuLibraryLoadData most often receive), a cubin, PTX text,
 * or a host ELF whose .nv_fatbin section holds fatbins back to back.  The
 * cursor presents all four as a flat list of entries; byte layouts are the
 * tables in fatbin-int.h.  Decompression lives in fatbin-extract.c.
 *
 * Invariants: fb->pos always lies in [fb->start, fb->end]; every header is
 * read only after checking that its bytes are present; a malformed header
 * stops the walk with -EPROTO and a reason, and the cursor stays stopped.
 * The image is borrowed, never copied, never written.  The one function that
 * follows a pointer stored in memory (rw_fatbin_image_size, for the guest's
 * own __fatBinC_Wrapper_t) says so and is not used on bytes from the wire.
 */
#include "rewrite/rw.h"
#include "rewrite/fatbin-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct rw_fatbin {
  const unsigned char *image; /* borrowed image */
  size_t len;                 /* its size */
  rw_image_kind_t kind;       /* what the image is */
  size_t start, end;          /* fatbin region: [start, end) of image (whole image if not ELF) */
  size_t pos;                 /* next fatbin header or entry header, start <= pos <= end */
  size_t fat_end;             /* end of the current fatbin's entries; 0 before the first */
  unsigned container;         /* index of the current fatbin, counted from 0 */
  unsigned index;             /* entries returned so far */
  int error;                  /* sticky error, 0 while the walk is healthy */
  rw_diag_t error_diag;       /* the reason for it */
};

/* PTX text starts (after optional whitespace and comments) with a "//"
 * comment or a ".version" directive; nvcc and NVRTC always emit one of the
 * two first.  A NUL is never inside PTX text. */
static int looks_like_ptx(const unsigned char *p, size_t len) {
  size_t i = 0;

  while (i < len && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r'))
    i++;
  if (len - i >= 2 && p[i] == '/' && (p[i + 1] == '/' || p[i + 1] == '*'))
    return 1;
  return len - i >= 8 && memcmp(p + i, ".version", 8) == 0;
}

int rw_fatbin_open(const void *image, size_t len, rw_fatbin_t **out, rw_diag_t *diag) {
  const unsigned char *p = image;
  rw_fatbin_t *fb;
  size_t off = 0, sec_len = len;
  rw_image_kind_t kind;
  int rc;

  if (image == NULL || out == NULL)
    return rw_diag_set(diag, -EINVAL, 0, 0, "NULL image");
  *out = NULL;
  if (len >= 4 && wire_le_rd32(p) == RW__FATBIN_MAGIC) {
    kind = RW_IMAGE_FATBIN;
  } else if (rw__elf_is_elf64(p, len) && rw__elf_machine(p) == RW__EM_CUDA) {
    kind = RW_IMAGE_CUBIN;
  } else if (rw__elf_is_elf64(p, len)) {
    kind = RW_IMAGE_HOST_ELF;
    rc = rw__elf_section(p, len, ".nv_fatbin", &off, &sec_len, diag);
    if (rc == -ENOENT) {
      /* A host binary without device code is valid: it just has no entries. */
      off = 0;
      sec_len = 0;
    } else if (rc < 0) {
      return rc;
    }
  } else if (len >= 4 && wire_le_rd32(p) == RW__FATBINC_MAGIC) {
    return rw_diag_set(diag, -EPROTO, 0, 0,
                       "a __fatBinC_Wrapper_t holds a pointer: resolve it in-process with "
                       "rw_fatbin_image_size() and pass the fatbin");
  } else if (looks_like_ptx(p, len)) {
    kind = RW_IMAGE_PTX;
  } else {
    return rw_diag_set(diag, -EPROTO, 0, 0,
                       "not a fatbin, cubin, PTX or ELF image (first bytes %02x %02x %02x %02x)",
                       len > 0 ? p[0] : 0, len > 1 ? p[1] : 0, len > 2 ? p[2] : 0,
                       len > 3 ? p[3] : 0);
  }
  fb = calloc(1, sizeof(*fb));
  if (fb == NULL)
    return rw_diag_set(diag, -ENOMEM, 0, 0, "out of memory");
  fb->image = p;
  fb->len = len;
  fb->kind = kind;
  fb->start = off;
  fb->end = off + sec_len;
  fb->pos = off;
  *out = fb;
  return 0;
}

void rw_fatbin_free(rw_fatbin_t *fb) {
  free(fb);
}

rw_image_kind_t rw_fatbin_image_kind(const rw_fatbin_t *fb) {
  return fb->kind;
}

const unsigned char *rw__fatbin_bytes(const rw_fatbin_t *fb, size_t *len) {
  *len = fb->len;
  return fb->image;
}

void rw_fatbin_rewind(rw_fatbin_t *fb) {
  fb->pos = fb->start;
  fb->fat_end = 0;
  fb->container = 0;
  fb->index = 0;
  fb->error = 0;
}

static int fail(rw_fatbin_t *fb, rw_diag_t *diag, int code, const char *what, size_t at) {
  rw_diag_set(&fb->error_diag, code, 0, 0, "%s at byte %zu", what, at);
  fb->error = code;
  if (diag != NULL)
    *diag = fb->error_diag;
  return code;
}

/* The SM number of a PTX text's ".target sm_XX" directive, 0 if absent.
 * Scans directive tokens at line starts only (PTX ISA, "PTX Module
 * Directives": .version then .target precede any function), within the
 * first 64 KiB, which holds the module header of anything nvcc emits. */
static unsigned ptx_target_arch(const unsigned char *p, size_t len) {
  size_t i = 0, lim = len < 65536 ? len : 65536;

  while (i < lim) {
    while (i < lim && (p[i] == ' ' || p[i] == '\t'))
      i++;
    if (lim - i > 11 && memcmp(p + i, ".target", 7) == 0 && (p[i + 7] == ' ' || p[i + 7] == '\t')) {
      unsigned arch = 0;
      i += 7;
      while (i < lim && (p[i] == ' ' || p[i] == '\t'))
        i++;
      if (lim - i < 4 || memcmp(p + i, "sm_", 3) != 0)
        return 0;
      for (i += 3; i < lim && p[i] >= '0' && p[i] <= '9' && arch < 10000; i++)
        arch = arch * 10 + (unsigned)(p[i] - '0');
      return arch;
    }
    while (i < lim && p[i] != '\n')
      i++;
    i++;
  }
  return 0;
}

/* The single entry of a cubin or PTX image. */
static int next_whole(rw_fatbin_t *fb, rw_fatbin_entry_t *e) {
  if (fb->index > 0)
    return 0;
  memset(e, 0, sizeof(*e));
  e->stored_size = e->size = fb->len;
  if (fb->kind == RW_IMAGE_CUBIN) {
    e->kind = RW_FATBIN_KIND_ELF;
    e->arch = rw__elf_cubin_arch(fb->image, fb->len);
  } else {
    e->kind = RW_FATBIN_KIND_PTX;
    e->arch = ptx_target_arch(fb->image, fb->len);
    e->size = strnlen((const char *)fb->image, fb->len);
    e->stored_size = e->size;
  }
  fb->index = 1;
  return 1;
}

/* Moves to the next fatbin header, skipping zero padding.  Returns 1 with
 * fb->pos past the header and fb->fat_end set, 0 when the region is done. */
static int next_container(rw_fatbin_t *fb, rw_diag_t *diag) {
  const unsigned char *p = fb->image;
  unsigned hsize;
  uint64_t fat;

  /* Fatbins in .nv_fatbin start 8-aligned relative to the section; the gap
   * holds zeros.  Anything else there is corruption. */
  while (fb->pos < fb->end && p[fb->pos] == 0)
    fb->pos++;
  if (fb->pos == fb->end)
    return 0;
  if (fb->end - fb->pos < RW__FATBIN_HDR_MIN)
    return fail(fb, diag, -EPROTO, "truncated fatbin header", fb->pos);
  if (wire_le_rd32(p + fb->pos) != RW__FATBIN_MAGIC)
    return fail(fb, diag, -EPROTO, "bad fatbin magic", fb->pos);
  hsize = wire_le_rd16(p + fb->pos + 6);
  fat = wire_le_rd64(p + fb->pos + 8);
  if (hsize < RW__FATBIN_HDR_MIN || hsize > fb->end - fb->pos)
    return fail(fb, diag, -EPROTO, "fatbin header size out of range", fb->pos);
  if (fat > fb->end - fb->pos - hsize)
    return fail(fb, diag, -EPROTO, "fatbin size runs past the image", fb->pos);
  if (fb->fat_end != 0)
    fb->container++;
  fb->pos += hsize;
  fb->fat_end = fb->pos + (size_t)fat;
  return 1;
}

int rw_fatbin_next(rw_fatbin_t *fb, rw_fatbin_entry_t *e, rw_diag_t *diag) {
  const unsigned char *h;
  unsigned ehsize;
  uint64_t payload, csize, usize;
  int rc;

  if (fb == NULL || e == NULL)
    return rw_diag_set(diag, -EINVAL, 0, 0, "NULL argument");
  if (fb->error != 0) {
    if (diag != NULL)
      *diag = fb->error_diag;
    return fb->error;
  }
  if (fb->kind == RW_IMAGE_CUBIN || fb->kind == RW_IMAGE_PTX)
    return next_whole(fb, e);

  /* At this point pos is either at a fatbin header (fat_end == 0 or
   * pos == fat_end) or at an entry header inside [pos, fat_end). */
  while (fb->fat_end == 0 || fb->pos >= fb->fat_end) {
    if (fb->fat_end != 0)
      fb->pos = fb->fat_end;
    rc = next_container(fb, diag);
    if (rc <= 0)
      return rc;
  }
  if (fb->fat_end - fb->pos < RW__FATBIN_ENTRY_MIN)
    return fail(fb, diag, -EPROTO, "truncated fatbin entry header", fb->pos);
  h = fb->image + fb->pos;
  ehsize = wire_le_rd32(h + 4);
  payload = wire_le_rd64(h + 8);
  csize = wire_le_rd32(h + 16);
  usize = wire_le_rd64(h + 56);
  if (ehsize < RW__FATBIN_ENTRY_MIN || ehsize > RW__FATBIN_ENTRY_MAX ||
      ehsize > fb->fat_end - fb->pos)
    return fail(fb, diag, -EPROTO, "fatbin entry header size out of range", fb->pos);
  if (payload > fb->fat_end - fb->pos - ehsize)
    return fail(fb, diag, -EPROTO, "fatbin entry payload runs past its fatbin", fb->pos);

  memset(e, 0, sizeof(*e));
  e->index = fb->index;
  e->container = fb->container;
  e->kind = wire_le_rd16(h);
  e->version_minor = wire_le_rd16(h + 24);
  e->version_major = wire_le_rd16(h + 26);
  e->arch = wire_le_rd32(h + 28);
  e->flags = wire_le_rd64(h + 40);
  e->payload_offset = fb->pos + ehsize;
  if ((e->flags & RW_FATBIN_FLAG_LZ4) && (e->flags & RW_FATBIN_FLAG_ZSTD))
    return fail(fb, diag, -EPROTO, "fatbin entry claims both LZ4 and ZSTD", fb->pos);
  if (e->flags & (RW_FATBIN_FLAG_LZ4 | RW_FATBIN_FLAG_ZSTD)) {
    e->comp = (e->flags & RW_FATBIN_FLAG_LZ4) ? RW_FATBIN_COMP_LZ4 : RW_FATBIN_COMP_ZSTD;
    if (csize == 0 || csize > payload)
      return fail(fb, diag, -EPROTO, "compressed size outside the payload", fb->pos);
    if (usize > SIZE_MAX / 2)
      return fail(fb, diag, -EPROTO, "uncompressed size out of range", fb->pos);
    e->stored_size = (size_t)csize;
    e->size = (size_t)usize;
  } else {
    e->comp = RW_FATBIN_COMP_NONE;
    e->stored_size = e->size = (size_t)payload;
  }
  fb->pos += ehsize + (size_t)payload;
  fb->index++;
  return 1;
}

int rw_fatbin_image_size(const void *image, const void **data, size_t *len) {
  const unsigned char *p = image;

  if (image == NULL || data == NULL || len == NULL)
    return -EINVAL;
  if (wire_le_rd32(p) == RW__FATBINC_MAGIC) {
    /* __fatBinC_Wrapper_t: the fatbin pointer sits at offset 8 (versions 1
     * and 2 alike).  We are in the tenant's own process: follow it. */
    const unsigned char *fat;
    memcpy(&fat, p + 8, sizeof(fat));
    if (fat == NULL || wire_le_rd32(fat) != RW__FATBIN_MAGIC)
      return -EPROTO;
    p = fat;
  }
  *data = p;
  if (wire_le_rd32(p) == RW__FATBIN_MAGIC) {
    uint64_t fat = wire_le_rd64(p + 8);
    unsigned hsize = wire_le_rd16(p + 6);
    if (hsize < RW__FATBIN_HDR_MIN || fat > (1ull << 40))
      return -EPROTO;
    *len = hsize + (size_t)fat;
    return 0;
  }
  if (memcmp(p,
             "\x7f"
             "ELF",
             4) == 0) {
    if (p[4] != 2 || p[5] != 1)
      return -EPROTO;
    return rw__elf_image_size(p, len);
  }
  /* PTX text is NUL-terminated, as cuModuleLoadData requires. */
  *len = strlen((const char *)p) + 1;
  return 0;
}

const char *rw_fatbin_kind_name(unsigned kind) {
  switch (kind) {
  case RW_FATBIN_KIND_PTX:
    return "PTX";
  case RW_FATBIN_KIND_ELF:
    return "ELF";
  default:
    return "other";
  }
}

const char *rw_fatbin_comp_name(rw_fatbin_comp_t comp) {
  switch (comp) {
  case RW_FATBIN_COMP_NONE:
    return "none";
  case RW_FATBIN_COMP_LZ4:
    return "lz4";
  case RW_FATBIN_COMP_ZSTD:
    return "zstd";
  }
  return "unknown";
}

const char *rw_image_kind_name(rw_image_kind_t kind) {
  switch (kind) {
  case RW_IMAGE_FATBIN:
    return "fatbin";
  case RW_IMAGE_CUBIN:
    return "cubin";
  case RW_IMAGE_PTX:
    return "ptx";
  case RW_IMAGE_HOST_ELF:
    return "host-elf";
  case RW_IMAGE_UNKNOWN:
    break;
  }
  return "unknown";
}
