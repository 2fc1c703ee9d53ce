/* modcache.c: module images by content id, in memory and in the state dir.
 *
 * Tenants name an image by the XXH3-64 of its bytes (docs/decisions.md, D5) and
 * send the bytes only when tallyd lacks them; every tenant loading the same
 * fatbin shares one copy here (each still gets its own CUmodule, since module
 * globals must not be shared between tenants).  Images are also written to
 * STATE_DIR/modules/<id>.img, so a restarted daemon does not ask again.
 *
 * On-disk record: the raw image bytes, nothing else; the file name is the id
 * in 16 hex digits.  A file is written to a temporary name and renamed, and
 * it is trusted only if its bytes hash to its name (a torn or tampered file
 * is ignored, never loaded).  Images are never evicted in this version.
 * Lock story: cache_lock guards the list; entries are immutable once listed.
 */
#include "hostd/hostd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

typedef struct image {
  uint64_t id;
  size_t len;
  struct image *next;
  unsigned char bytes[];
} image_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static image_t *images;
static char dir[4096]; /* "" = memory only */

void hostd__modcache_init(const char *state_dir) {
  dir[0] = 0;
  if (!state_dir || !*state_dir)
    return;
  if (snprintf(dir, sizeof(dir), "%s/modules", state_dir) >= (int)sizeof(dir))
    dir[0] = 0;
  else if ((mkdir(state_dir, 0700) != 0 && errno != EEXIST) ||
           (mkdir(dir, 0700) != 0 && errno != EEXIST)) {
    hostd__log(HOSTD_LOG_WARN, "module cache: cannot create %s (%s); caching in memory only", dir,
               strerror(errno));
    dir[0] = 0;
  }
}

void hostd__modcache_close(void) {
  pthread_mutex_lock(&cache_lock);
  while (images) {
    image_t *i = images;
    images = i->next;
    free(i);
  }
  pthread_mutex_unlock(&cache_lock);
}

static image_t *lookup(uint64_t id) {
  for (image_t *i = images; i; i = i->next)
    if (i->id == id)
      return i;
  return NULL;
}

/* Adds an image to the list (lock held); returns it or NULL. */
static image_t *insert(uint64_t id, const void *data, size_t len) {
  image_t *i = lookup(id);
  if (i)
    return i;
  i = malloc(sizeof(*i) + len);
  if (!i)
    return NULL;
  i->id = id;
  i->len = len;
  memcpy(i->bytes, data, len);
  i->next = images;
  images = i;
  return i;
}

static void write_file(uint64_t id, const void *data, size_t len) {
  char path[4200], tmp[4220];
  FILE *f;
  if (!dir[0])
    return;
  snprintf(path, sizeof(path), "%s/%016llx.img", dir, (unsigned long long)id);
  snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
  f = fopen(tmp, "wb");
  if (!f)
    return;
  if (fwrite(data, 1, len, f) != len || fclose(f) != 0 || rename(tmp, path) != 0) {
    hostd__log(HOSTD_LOG_WARN, "module cache: cannot write %s", path);
    unlink(tmp);
  }
}

static image_t *read_file(uint64_t id) {
  char path[4200];
  struct stat st;
  image_t *i = NULL;
  void *buf;
  FILE *f;
  if (!dir[0])
    return NULL;
  snprintf(path, sizeof(path), "%s/%016llx.img", dir, (unsigned long long)id);
  f = fopen(path, "rb");
  if (!f)
    return NULL;
  /* The same bound a tenant's message has. */
  if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && (size_t)st.st_size <= CALL_MAX_LEN &&
      (buf = malloc((size_t)st.st_size)) != NULL) {
    if (fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size &&
        XXH3_64bits(buf, (size_t)st.st_size) == id)
      i = insert(id, buf, (size_t)st.st_size);
    else
      hostd__log(HOSTD_LOG_WARN, "module cache: %s does not match its id; ignored", path);
    free(buf);
  }
  fclose(f);
  return i;
}

const void *hostd__modcache_get(uint64_t id, size_t *len) {
  image_t *i;
  pthread_mutex_lock(&cache_lock);
  i = lookup(id);
  if (!i)
    i = read_file(id);
  pthread_mutex_unlock(&cache_lock);
  if (i)
    *len = i->len;
  return i ? i->bytes : NULL;
}

int hostd__modcache_put(uint64_t id, const void *data, size_t len) {
  image_t *i;
  int fresh;
  if (XXH3_64bits(data, len) != id)
    return -EINVAL;
  pthread_mutex_lock(&cache_lock);
  fresh = lookup(id) == NULL;
  i = insert(id, data, len);
  pthread_mutex_unlock(&cache_lock);
  if (!i)
    return -ENOMEM;
  if (fresh)
    write_file(id, data, len);
  return 0;
}
