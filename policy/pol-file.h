/* pol-file.h: replace a file's contents durably and atomically.
 *
 * The one routine for writing a file as a whole: policy's profiles
 * (profile-file.c) and rewrite's compile cache use it, and any other module
 * that writes state files should.  All of them then give the same guarantee: a reader sees the whole old file
 * or the whole new one, and a file reported written survives a power loss.
 * rename(2) is atomic for readers; durability needs the data fsync'd before
 * the rename and the directory fsync'd after it (the rename changes the
 * directory).  Header-only and libc-only, so modules that may not call
 * policy/ (rewrite/) include it without linking anything of policy.
 */
#ifndef TALLY_POL_FILE_H
#define TALLY_POL_FILE_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

static inline int pol__file_write_all(int fd, const struct iovec *parts, int nparts) {
  for (int i = 0; i < nparts; i++) {
    const char *p = parts[i].iov_base;
    size_t off = 0;
    while (off < parts[i].iov_len) {
      ssize_t w = write(fd, p + off, parts[i].iov_len - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w < 0)
        return -errno;
      off += (size_t)w;
    }
  }
  return 0;
}

/* fsync of the directory holding `path` (its part before the last '/'). */
static inline int pol__file_sync_dir(const char *path) {
  char dir[PATH_MAX];
  const char *slash = strrchr(path, '/');
  size_t n = slash ? (size_t)(slash - path) : 0;
  if (!slash)
    dir[n++] = '.';
  else if (n == 0)
    dir[n++] = '/';
  else
    memcpy(dir, path, n);
  dir[n] = '\0';
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = fsync(fd) < 0 ? -errno : 0;
  close(fd);
  return rc;
}

/* Replaces `path` with the concatenation of parts[0..nparts) so that, after
 * a crash at any point, the file holds either its whole old contents or the
 * whole new ones, and once this returns 0 the new contents survive a power
 * loss.  Steps: a unique temporary file in the same directory (mkstemp),
 * every byte written (EINTR and short writes retried), fsync, close,
 * rename(2) over `path`, fsync of the directory.  The file gets permission
 * bits `mode` (not reduced by the umask).  Several writers of one path: the
 * last rename wins.  Returns 0, or a negative errno (-ENAMETOOLONG for a
 * path over 4095 bytes); on failure the temporary file is removed and
 * `path` is untouched, except when only the directory fsync failed: then
 * the new contents are in place but may not survive a power loss. */
static inline int pol_file_replace(const char *path, const struct iovec *parts, int nparts, mode_t mode) {
  char tmp[PATH_MAX];
  if (nparts < 0 || (nparts > 0 && !parts))
    return -EINVAL;
  if (snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path) >= (int)sizeof(tmp))
    return -ENAMETOOLONG;
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0)
    return -errno;
  int rc = pol__file_write_all(fd, parts, nparts);
  if (rc == 0 && fchmod(fd, mode) < 0)
    rc = -errno;
  if (rc == 0 && fsync(fd) < 0)
    rc = -errno;
  if (close(fd) < 0 && rc == 0)
    rc = -errno;
  if (rc == 0 && rename(tmp, path) < 0)
    rc = -errno;
  if (rc < 0) {
    unlink(tmp);
    return rc;
  }
  return pol__file_sync_dir(path);
}

#endif
