/* cmd-fatbin.c: the `tally-ptx fatbin FILE [--extract DIR]` subcommand.
 *
 * Reads FILE whole (fatbin, cubin, PTX, or host ELF with .nv_fatbin),
 * prints one line per entry -- index, container, kind, arch, version,
 * flags, compression, stored and decompressed sizes -- and a summary line.
 * With --extract, each entry is written decompressed to
 * DIR/<base>.<index>.sm_<arch>.{ptx,cubin,bin}.  An image without PTX is
 * reported as "no PTX: not transformable" and exits 0: it is a property of
 * the image, not a failure.  Output format is for people and for the
 * corpus scripts, which grep the summary line.
 */
#include "rewrite/rw.h"
#include "rewrite/fatbin-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Cap on input files: fatbins of whole frameworks reach a few GiB, but the
 * command reads the file into memory, and 4 GiB keeps that sane. */
#define CMD_FATBIN_MAX_FILE (4ull << 30)

static int read_file(const char *path, unsigned char **buf, size_t *len) {
  struct stat st;
  unsigned char *b = NULL;
  size_t done = 0;
  int fd, rc = 0;

  fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) < 0) {
    rc = -errno;
    goto out;
  }
  if ((unsigned long long)st.st_size > CMD_FATBIN_MAX_FILE) {
    rc = -EFBIG;
    goto out;
  }
  b = malloc((size_t)st.st_size + 1);
  if (b == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  while (done < (size_t)st.st_size) {
    ssize_t n = read(fd, b + done, (size_t)st.st_size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      rc = n < 0 ? -errno : -EIO;
      goto out;
    }
    done += (size_t)n;
  }
  b[done] = 0;
  *buf = b;
  *len = done;
  b = NULL;
out:
  free(b);
  close(fd);
  return rc;
}

static int write_file(const char *path, const void *data, size_t len) {
  FILE *f = fopen(path, "wb");
  int rc = 0;

  if (f == NULL)
    return -errno;
  if (len > 0 && fwrite(data, 1, len, f) != len)
    rc = -EIO;
  if (fclose(f) != 0 && rc == 0)
    rc = -errno;
  return rc;
}

static const char *ext_of(unsigned kind) {
  return kind == RW_FATBIN_KIND_PTX ? "ptx" : kind == RW_FATBIN_KIND_ELF ? "cubin" : "bin";
}

int rw__cmd_fatbin(int argc, char **argv) {
  const char *file = NULL, *dir = NULL, *base;
  unsigned char *img = NULL;
  size_t len = 0;
  rw_fatbin_t *fb = NULL;
  rw_fatbin_entry_t e;
  rw_diag_t d = {0};
  unsigned n = 0, nptx = 0;
  int rc, status = 1, i, bad = 0;

  for (i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("usage: tally-ptx fatbin FILE [--extract DIR]\n"
             "Lists the device-code entries of FILE (fatbin, cubin, PTX, or an ELF executable,\n"
             "shared object or object with .nv_fatbin): kind, arch, version, flags,\n"
             "compression (none/lz4/zstd), stored and decompressed sizes.  --extract writes each\n"
             "entry, decompressed, to DIR/<file>.<index>.sm_<arch>.{ptx,cubin,bin}.\n"
             "Exit 0 (also when the image has no PTX), 1 bad image, 2 usage.\n");
      return 0;
    }
    if (strcmp(argv[i], "--extract") == 0 && i + 1 < argc)
      dir = argv[++i];
    else if (argv[i][0] != '-' && file == NULL)
      file = argv[i];
    else
      bad = 1;
  }
  if (file == NULL || bad) {
    fprintf(stderr, "usage: tally-ptx fatbin FILE [--extract DIR]\n");
    return 2;
  }
  base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
  rc = read_file(file, &img, &len);
  if (rc < 0) {
    fprintf(stderr, "tally-ptx fatbin: %s: %s\n", file, strerror(-rc));
    return 1;
  }
  rc = rw_fatbin_open(img, len, &fb, &d);
  if (rc < 0) {
    fprintf(stderr, "tally-ptx fatbin: %s: %s\n", file, d.text);
    goto out;
  }
  if (dir != NULL && mkdir(dir, 0777) < 0 && errno != EEXIST) {
    fprintf(stderr, "tally-ptx fatbin: %s: %s\n", dir, strerror(errno));
    goto out;
  }
  printf("%s: %s image, %zu bytes\n", file, rw_image_kind_name(rw_fatbin_image_kind(fb)), len);
  printf("%5s %4s %-4s %6s %7s %8s %-5s %10s %10s\n", "entry", "fb", "kind", "arch", "version",
         "flags", "comp", "stored", "size");
  while ((rc = rw_fatbin_next(fb, &e, &d)) == 1) {
    n++;
    nptx += e.kind == RW_FATBIN_KIND_PTX;
    printf("%5u %4u %-4s %6u %4u.%-2u %8llx %-5s %10zu %10zu\n", e.index, e.container,
           rw_fatbin_kind_name(e.kind), e.arch, e.version_major, e.version_minor,
           (unsigned long long)e.flags, rw_fatbin_comp_name(e.comp), e.stored_size, e.size);
    if (dir != NULL) {
      char path[4096];
      void *out = NULL;
      size_t out_len = 0;
      rc = rw_fatbin_extract(fb, &e, 0, &out, &out_len, &d);
      if (rc < 0) {
        fprintf(stderr, "tally-ptx fatbin: %s: entry %u: %s\n", file, e.index, d.text);
        goto out;
      }
      snprintf(path, sizeof(path), "%s/%s.%u.sm_%u.%s", dir, base, e.index, e.arch, ext_of(e.kind));
      rc = write_file(path, out, out_len);
      free(out);
      if (rc < 0) {
        fprintf(stderr, "tally-ptx fatbin: %s: %s\n", path, strerror(-rc));
        goto out;
      }
    }
  }
  if (rc < 0) {
    fprintf(stderr, "tally-ptx fatbin: %s: %s\n", file, d.text);
    goto out;
  }
  if (nptx == 0)
    printf("%s: %u entries, no PTX: not transformable\n", file, n);
  else
    printf("%s: %u entries, %u PTX\n", file, n, nptx);
  status = 0;
out:
  rw_fatbin_free(fb);
  free(img);
  return status;
}
