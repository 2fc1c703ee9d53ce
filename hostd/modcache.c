/* modcache.c: module images by content id, in memory and in the state dir,
 * each bounded, least recently used first out.
 *
 * Tenants name an image by the XXH3-64 of its bytes (docs/decisions.md, D5)
 * and send the bytes only when tallyd lacks them; every tenant loading the
 * same fatbin shares one copy here (each still gets its own CUmodule, since
 * module globals must not be shared between tenants).  Images are also
 * written to STATE_DIR/modules/<id>.img, so a restarted daemon does not ask
 * again.
 *
 * On-disk record: the raw image bytes, nothing else; the file name is the id
 * in 16 hex digits.  A file is written with pol_file_replace (a temporary
 * name, fsync, rename, fsync of the folder) and trusted only if its bytes
 * hash to its name (a torn or tampered file is ignored, never loaded).
 *
 * Bounds (hostd__modcache_limits; 0 = none): the images in memory, and the
 * files on disk, each evicted least recently used first.  Invariant:
 * mem_bytes (the listed images) <= mem_max and disk_bytes <= disk_max; an
 * image larger than a bound is not kept there.  Beyond the bound live only
 * images evicted while pinned: at most one per thread, until its next get.
 * A memory miss reads the file again; a disk miss makes the guest send the
 * image again (the blob exchange asks first), so eviction costs time, never
 * correctness.
 *
 * Pins: hostd__modcache_get's pointer must survive until the caller has
 * handed the bytes to the driver, while other workers insert and evict.
 * Each thread holds at most one pin, the image its last get returned; the
 * next get (or hostd__modcache_unpin) drops it.  An image evicted while
 * pinned leaves the list at once and is freed with its last pin.
 * Lock story: cache_lock guards every list, counter and pin count.
 */
#include "hostd/guard.h"
#include "hostd/hostd-int.h"
#include "policy/pol-file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

typedef struct image {
  uint64_t id;
  size_t len;
  unsigned pins;              /* threads holding it (cache_lock) */
  bool evicted;               /* off the list; freed with its last pin */
  struct image *prev, *next;  /* LRU list, most recent first */
  unsigned char bytes[];
} image_t;

/* A file in STATE_DIR/modules (the disk LRU: stamp = last use). */
typedef struct disk_file {
  uint64_t id, size, stamp;
} disk_file_t;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static image_t *head, *tail;
static uint64_t mem_bytes, mem_max, disk_bytes, disk_max, clock_stamp;
static uint64_t evicted_mem, evicted_disk, n_images;
static disk_file_t *files;
static size_t n_files, cap_files;
static char dir[4096]; /* "" = memory only */
static __thread image_t *pinned;

/* ---- disk index ---- */

static disk_file_t *file_find(uint64_t id) {
  for (size_t i = 0; i < n_files; i++)
    if (files[i].id == id)
      return &files[i];
  return NULL;
}

static void file_add(uint64_t id, uint64_t size) {
  disk_file_t *f = file_find(id);
  if (!f) {
    if (n_files == cap_files) {
      size_t cap = cap_files ? cap_files * 2 : 64;
      disk_file_t *n = realloc(files, cap * sizeof(*n));
      if (!n)
        return; /* unindexed: only the bound's accounting misses it */
      files = n;
      cap_files = cap;
    }
    f = &files[n_files++];
    f->id = id;
    f->size = 0;
  }
  disk_bytes += size - f->size;
  f->size = size;
  f->stamp = ++clock_stamp;
}

static void file_path(char *out, size_t cap, uint64_t id) {
  snprintf(out, cap, "%s/%016" PRIx64 ".img", dir, id);
}

/* Unlinks the least recently used files until need more bytes fit. */
static void disk_evict(uint64_t need) {
  while (disk_max && n_files && disk_bytes + need > disk_max) {
    size_t old = 0;
    char path[4200];
    for (size_t i = 1; i < n_files; i++)
      if (files[i].stamp < files[old].stamp)
        old = i;
    file_path(path, sizeof(path), files[old].id);
    unlink(path);
    disk_bytes -= files[old].size;
    files[old] = files[--n_files];
    evicted_disk++;
  }
}

/* Indexes the files a previous run left, oldest modification first used. */
static void disk_scan(void) {
  DIR *d = opendir(dir);
  struct dirent *e;
  if (!d)
    return;
  while ((e = readdir(d)) != NULL) {
    char path[4400];
    struct stat st;
    uint64_t id;
    int used = 0;
    if (sscanf(e->d_name, "%16" SCNx64 ".img%n", &id, &used) != 1 || used != 20 ||
        e->d_name[20])
      continue;
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
      file_add(id, (uint64_t)st.st_size);
  }
  closedir(d);
}

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
  pthread_mutex_lock(&cache_lock);
  if (dir[0])
    disk_scan();
  pthread_mutex_unlock(&cache_lock);
}

void hostd__modcache_limits(uint64_t mem, uint64_t disk) {
  pthread_mutex_lock(&cache_lock);
  mem_max = mem;
  disk_max = disk;
  if (dir[0])
    disk_evict(0);
  pthread_mutex_unlock(&cache_lock);
}

/* ---- memory LRU (cache_lock held) ---- */

static void lru_unlink(image_t *i) {
  if (i->prev)
    i->prev->next = i->next;
  else
    head = i->next;
  if (i->next)
    i->next->prev = i->prev;
  else
    tail = i->prev;
  i->prev = i->next = NULL;
}

static void lru_front(image_t *i) {
  i->next = head;
  i->prev = NULL;
  if (head)
    head->prev = i;
  head = i;
  if (!tail)
    tail = i;
}

static void evict(image_t *i) {
  lru_unlink(i);
  mem_bytes -= i->len;
  n_images--;
  evicted_mem++;
  if (i->pins)
    i->evicted = true;
  else
    free(i);
}

/* Evicts images from the cold end until need more bytes fit (a pinned one
 * leaves the list too, and is freed with its last pin). */
static void mem_evict(uint64_t need) {
  while (mem_max && tail && mem_bytes + need > mem_max)
    evict(tail);
}

static void unpin_locked(void) {
  image_t *i = pinned;
  pinned = NULL;
  if (i && --i->pins == 0 && i->evicted)
    free(i);
}

void hostd__modcache_unpin(void) {
  pthread_mutex_lock(&cache_lock);
  unpin_locked();
  pthread_mutex_unlock(&cache_lock);
}

void hostd__modcache_close(void) {
  pthread_mutex_lock(&cache_lock);
  while (head) {
    image_t *i = head;
    head = i->next;
    free(i);
  }
  tail = NULL;
  pinned = NULL;
  mem_bytes = n_images = 0;
  free(files);
  files = NULL;
  n_files = cap_files = 0;
  disk_bytes = 0;
  pthread_mutex_unlock(&cache_lock);
}

static image_t *lookup(uint64_t id) {
  for (image_t *i = head; i; i = i->next)
    if (i->id == id)
      return i;
  return NULL;
}

/* Adds an image (lock held); returns it, or NULL (no memory).  It goes in
 * front; colder images make room.  One larger than the bound is evicted
 * again by hostd__modcache_get right after it is pinned. */
static image_t *insert(uint64_t id, const void *data, size_t len) {
  image_t *i = lookup(id);
  if (i)
    return i;
  mem_evict(len);
  i = malloc(sizeof(*i) + len);
  if (!i)
    return NULL;
  memset(i, 0, sizeof(*i));
  i->id = id;
  i->len = len;
  memcpy(i->bytes, data, len);
  lru_front(i);
  mem_bytes += len;
  n_images++;
  return i;
}

/* ---- files ---- */

/* Lock held: the file costs this process the write, nobody else waits
 * long for an image (loads are rare, images a few MiB). */
static void write_file(uint64_t id, const void *data, size_t len) {
  char path[4200];
  struct iovec part = {.iov_base = (void *)data, .iov_len = len};
  int rc;
  if (!dir[0] || (disk_max && len > disk_max))
    return;
  disk_evict(len);
  file_path(path, sizeof(path), id);
  if ((rc = pol_file_replace(path, &part, 1, 0600)) != 0)
    hostd__log(HOSTD_LOG_WARN, "module cache: cannot write %s (%s)", path, strerror(-rc));
  else
    file_add(id, len);
}

static image_t *read_file(uint64_t id) {
  char path[4200];
  struct stat st;
  image_t *i = NULL;
  void *buf;
  FILE *f;
  if (!dir[0])
    return NULL;
  file_path(path, sizeof(path), id);
  f = fopen(path, "rb");
  if (!f)
    return NULL;
  /* The same bound a tenant's message has. */
  if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && (size_t)st.st_size <= CALL_MAX_LEN &&
      (buf = malloc((size_t)st.st_size)) != NULL) {
    if (fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size &&
        XXH3_64bits(buf, (size_t)st.st_size) == id) {
      i = insert(id, buf, (size_t)st.st_size);
      file_add(id, (uint64_t)st.st_size); /* a use: warmest on disk */
    } else {
      hostd__log(HOSTD_LOG_WARN, "module cache: %s does not match its id; ignored", path);
    }
    free(buf);
  }
  fclose(f);
  return i;
}

const void *hostd__modcache_get(uint64_t id, size_t *len) {
  image_t *i;
  pthread_mutex_lock(&cache_lock);
  unpin_locked();
  i = lookup(id);
  if (i) {
    lru_unlink(i);
    lru_front(i);
  } else {
    i = read_file(id);
  }
  if (i) {
    i->pins++;
    pinned = i;
    *len = i->len;
    mem_evict(0); /* an image over the bound goes once unpinned */
  }
  pthread_mutex_unlock(&cache_lock);
  return i ? i->bytes : NULL;
}

int hostd__modcache_put(uint64_t id, const void *data, size_t len) {
  image_t *i;
  int rc = 0;
  if (XXH3_64bits(data, len) != id)
    return -EINVAL;
  pthread_mutex_lock(&cache_lock);
  if (!lookup(id)) {
    bool on_disk = dir[0] && file_find(id) != NULL;
    i = insert(id, data, len);
    if (!i)
      rc = -ENOMEM;
    else if (!on_disk)
      write_file(id, data, len);
    if (i && mem_max && len > mem_max && dir[0] && file_find(id))
      evict(i); /* kept on disk only; a memory-only cache evicts it at the next insert */
  }
  pthread_mutex_unlock(&cache_lock);
  return rc;
}

void hostd__modcache_stats(hostd_modcache_stats_t *st) {
  pthread_mutex_lock(&cache_lock);
  st->mem_bytes = mem_bytes;
  st->disk_bytes = disk_bytes;
  st->images = n_images;
  st->evicted_mem = evicted_mem;
  st->evicted_disk = evicted_disk;
  pthread_mutex_unlock(&cache_lock);
}
