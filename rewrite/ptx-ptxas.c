/* ptx-ptxas.c: runs ptxas on PTX text and compares the machine code of two
 * cubins, for tally-ptx, the tests, and the compile cache's CPU callback.
 *
 * ptxas runs as a child process (fork + execv, no shell) on temporary files
 * under $TMPDIR; its stderr is kept for the caller's diagnostic.  The ELF
 * reader is deliberately tiny and libelf-free: it walks the section header
 * table of an ELF64 little-endian cubin, bounds-checking every offset, and
 * compares the SHT_PROGBITS sections named .text.<kernel> byte for byte.
 * Those hold the SASS; everything else (symbols, debug, .nv.info) may differ
 * in ways that do not change what runs.
 *
 * ELF64 layout used (System V gABI):
 *   header: off 0x28 u64 e_shoff, 0x3a u16 e_shentsize, 0x3c u16 e_shnum,
 *           0x3e u16 e_shstrndx
 *   section header (64 bytes): off 0 u32 sh_name, 4 u32 sh_type,
 *           0x18 u64 sh_offset, 0x20 u64 sh_size
 */
#include "rewrite/rw.h"
#include "rewrite/rw-int.h"

#include "wire/wire-le.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static int write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

int rw__read_file(const char *path, char **out, size_t *out_len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  int rc = 0;
  char *p = NULL;
  size_t n = 0;
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) < 0) {
    rc = -errno;
    goto out;
  }
  if (st.st_size < 0 || (unsigned long long)st.st_size > RW_PTX_MAX_LEN) {
    rc = -EFBIG;
    goto out;
  }
  p = malloc((size_t)st.st_size + 1);
  if (p == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  while (n < (size_t)st.st_size) {
    ssize_t r = read(fd, p + n, (size_t)st.st_size - n);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      rc = -errno;
      goto out;
    }
    if (r == 0)
      break;
    n += (size_t)r;
  }
  p[n] = 0;
  *out = p;
  *out_len = n;
  p = NULL;
out:
  free(p);
  close(fd);
  return rc;
}

int rw__ptxas_run(const char *ptxas, const char *arch, const char *ptx, size_t len, void **cubin,
                  size_t *cubin_len, char *err, size_t errlen) {
  char dir[] = "/tmp/tally-ptxas-XXXXXX";
  const char *tmp = getenv("TMPDIR");
  char in[4096], outp[4096], errp[4096], archopt[64];
  int rc, status, fd;
  pid_t pid;

  if (err && errlen)
    err[0] = 0;
  char tdir[4000]; /* leaves room for "/out.cubin" in the 4096-byte paths */
  if (snprintf(tdir, sizeof(tdir), "%s/tally-ptxas-XXXXXX", tmp && *tmp ? tmp : "/tmp") >=
      (int)sizeof(tdir))
    snprintf(tdir, sizeof(tdir), "%s", dir);
  if (mkdtemp(tdir) == NULL) {
    if (mkdtemp(dir) == NULL)
      return -errno;
    snprintf(tdir, sizeof(tdir), "%s", dir);
  }
  snprintf(in, sizeof(in), "%s/in.ptx", tdir);
  snprintf(outp, sizeof(outp), "%s/out.cubin", tdir);
  snprintf(errp, sizeof(errp), "%s/err.txt", tdir);
  snprintf(archopt, sizeof(archopt), "-arch=%s", arch);
  fd = open(in, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    rc = -errno;
    goto out;
  }
  rc = write_all(fd, ptx, len);
  close(fd);
  if (rc < 0)
    goto out;
  pid = fork();
  if (pid < 0) {
    rc = -errno;
    goto out;
  }
  if (pid == 0) {
    int efd = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (efd >= 0) {
      dup2(efd, 1);
      dup2(efd, 2);
    }
    char *argv[] = {(char *)ptxas, archopt, "-o", outp, in, NULL};
    execv(ptxas, argv);
    _exit(127);
  }
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      rc = -errno;
      goto out;
    }
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char *e = NULL;
    size_t elen = 0;
    if (err && errlen && rw__read_file(errp, &e, &elen) == 0) {
      snprintf(err, errlen, "%s", e);
      free(e);
    }
    rc = -EPROTO;
    goto out;
  }
  if (cubin != NULL) {
    char *c;
    if ((rc = rw__read_file(outp, &c, cubin_len)) < 0)
      goto out;
    *cubin = c;
  }
  rc = 0;
out:
  unlink(in);
  unlink(outp);
  unlink(errp);
  rmdir(tdir);
  return rc;
}

typedef struct text_sec {
  const char *name;
  const unsigned char *data;
  uint64_t size;
} text_sec_t;

/* Lists the .text.* sections of an ELF64 LE image (at most max). */
static int elf_texts(const unsigned char *e, size_t len, text_sec_t *out, size_t max, size_t *n) {
  *n = 0;
  if (len < 64 || memcmp(e, "\177ELF", 4) != 0 || e[4] != 2 || e[5] != 1)
    return -EPROTO;
  uint64_t shoff = wire_le_rd64(e + 0x28);
  uint16_t shentsize = wire_le_rd16(e + 0x3a), shnum = wire_le_rd16(e + 0x3c), shstrndx = wire_le_rd16(e + 0x3e);
  if (shentsize < 64 || shoff > len || (uint64_t)shnum * shentsize > len - shoff ||
      shstrndx >= shnum)
    return -EPROTO;
  const unsigned char *strh = e + shoff + (uint64_t)shstrndx * shentsize;
  uint64_t stroff = wire_le_rd64(strh + 0x18), strsize = wire_le_rd64(strh + 0x20);
  if (stroff > len || strsize > len - stroff || strsize == 0 || e[stroff + strsize - 1] != 0)
    return -EPROTO;
  for (uint16_t i = 0; i < shnum; i++) {
    const unsigned char *sh = e + shoff + (uint64_t)i * shentsize;
    uint32_t name = wire_le_rd32(sh), type = wire_le_rd32(sh + 4);
    uint64_t off = wire_le_rd64(sh + 0x18), size = wire_le_rd64(sh + 0x20);
    if (name >= strsize)
      return -EPROTO;
    const char *nm = (const char *)e + stroff + name;
    if (type != 1 /* SHT_PROGBITS */ || strncmp(nm, ".text.", 6) != 0)
      continue;
    if (off > len || size > len - off)
      return -EPROTO;
    if (*n == max)
      return -E2BIG;
    out[*n].name = nm;
    out[*n].data = e + off;
    out[*n].size = size;
    ++*n;
  }
  return 0;
}

/* 0 if both cubins hold the same .text.* sections with the same bytes;
 * -EPROTO (bad ELF) or 1 (different: why says which) otherwise. */
int rw__cubin_text_cmp(const void *a, size_t alen, const void *b, size_t blen, char *why,
                       size_t whylen) {
  enum { MAX_TEXTS = 4096 };
  text_sec_t *ta = calloc(MAX_TEXTS, sizeof(*ta)), *tb = calloc(MAX_TEXTS, sizeof(*tb));
  size_t na, nb;
  int rc;
  if (ta == NULL || tb == NULL) {
    rc = -ENOMEM;
    goto out;
  }
  if ((rc = elf_texts(a, alen, ta, MAX_TEXTS, &na)) < 0 ||
      (rc = elf_texts(b, blen, tb, MAX_TEXTS, &nb)) < 0)
    goto out;
  rc = 0;
  if (na != nb) {
    snprintf(why, whylen, "%zu vs %zu .text sections", na, nb);
    rc = 1;
    goto out;
  }
  for (size_t i = 0; i < na; i++) {
    size_t j;
    for (j = 0; j < nb; j++)
      if (strcmp(ta[i].name, tb[j].name) == 0)
        break;
    if (j == nb) {
      snprintf(why, whylen, "%s missing", ta[i].name);
      rc = 1;
      goto out;
    }
    if (ta[i].size != tb[j].size || memcmp(ta[i].data, tb[j].data, ta[i].size) != 0) {
      snprintf(why, whylen, "%s differs", ta[i].name);
      rc = 1;
      goto out;
    }
  }
out:
  free(ta);
  free(tb);
  return rc;
}
