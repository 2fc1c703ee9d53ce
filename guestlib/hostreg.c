/* hostreg.c: cuMemHostRegister'ed memory shared with tallyd over shared memory.
 *
 * Natively registration pins the application's own pages so the GPU copies
 * to and from them directly.  Over shared memory the guest does the same
 * through tallyd: the whole pages inside the registered range are moved
 * onto a memfd (its bytes copied there, then the memfd mapped over the
 * pages in one mremap), which tallyd maps and registers as it does a
 * cuMemHostAlloc buffer (mem.c).  Copies whose host side lies in those pages
 * then send (tag, offset, length) instead of the bytes, and an asynchronous
 * copy reads or writes the memory when it executes, as in CUDA.  The partial
 * pages at either end are not moved (other objects of the application may
 * live there): the bytes of a copy that fall on them still travel.
 *
 * Only private anonymous read-write memory is moved (the heap, malloc'd or
 * mmap'd buffers, thread stacks); a file mapping, shared memory, the main
 * stack or huge pages keep today's path, as does every registration when
 * TALLY_SHARE_REGISTERED=0.  What differs from native is written in
 * docs/decisions.md, D18: a write another thread makes to the moved pages
 * while cuMemHostRegister copies them is lost; unregistering moves the bytes
 * back onto private pages (a copy again); a child of fork() gets private
 * copies of every moved range (pthread_atfork), as it would natively.
 *
 * Lock story: mu guards regs/nreg; the fork prepare handler takes it so the
 * child sees a whole table, and the child handler uses it without locking.
 */
#include "guestlib/guest.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct reg {
  uint64_t base;   /* the registration as the application made it */
  uint64_t lo, hi; /* its whole pages, on the memfd tallyd maps (tag = lo) */
} reg_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static reg_t *regs;
static size_t nreg, capreg;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

/* Moves the bytes of [lo, lo + len) onto fresh private anonymous pages at
 * the same address.  0, or -errno (the shared mapping is then kept). */
static int make_private(uint64_t lo, size_t len) {
  void *at = (void *)(uintptr_t)lo;
  void *tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (tmp == MAP_FAILED)
    return -errno;
  memcpy(tmp, at, len);
  if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) {
    int e = errno;
    munmap(tmp, len);
    return -e;
  }
  return 0;
}

static void fork_prepare(void) {
  pthread_mutex_lock(&mu);
}

static void fork_parent(void) {
  pthread_mutex_unlock(&mu);
}

/* The child owns no CUDA (chan.c) and must not share the application's
 * memory with its parent: every moved range becomes private again.  System
 * calls and copies only; a range that cannot be copied stays shared. */
static void fork_child(void) {
  for (size_t i = 0; i < nreg; i++)
    (void)make_private(regs[i].lo, (size_t)(regs[i].hi - regs[i].lo));
  nreg = 0;
  pthread_mutex_unlock(&mu);
}

static void fork_register(void) {
  if (pthread_atfork(fork_prepare, fork_parent, fork_child) != 0)
    guest__log("pthread_atfork failed: a child of fork() would share registered host memory "
               "with its parent");
}

/* Whether /proc/self/maps shows [lo, hi) as private anonymous read-write
 * memory from end to end (no file, no shared mapping, not the main
 * stack). */
static bool anonymous_private(uint64_t lo, uint64_t hi) {
  FILE *f = fopen("/proc/self/maps", "re");
  char line[4096];
  uint64_t at = lo;
  if (!f)
    return false;
  while (at < hi && fgets(line, sizeof(line), f)) {
    uint64_t a, b, inode;
    char perms[8], name[256] = "";
    unsigned dmaj, dmin;
    unsigned long long off;
    int n = sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %llx %x:%x %" SCNu64 " %255s", &a, &b, perms,
                   &off, &dmaj, &dmin, &inode, name);
    if (n < 7 || b <= at)
      continue;
    if (a > at || strcmp(perms, "rw-p") != 0 || inode != 0 ||
        (name[0] && strcmp(name, "[heap]") != 0 && strncmp(name, "[anon:", 6) != 0))
      break; /* a hole, or memory of another kind */
    at = b;
  }
  fclose(f);
  return at >= hi;
}

/* Puts [lo, hi) on a memfd and hands it to tallyd.  0, CALL_FD_ELSEWHERE
 * or -errno. */
static int move_to_memfd(uint64_t lo, uint64_t hi) {
  size_t len = (size_t)(hi - lo);
  void *at = (void *)(uintptr_t)lo, *tmp;
  int fd = memfd_create("tally-registered", MFD_CLOEXEC), rc;
  if (fd < 0)
    return -errno;
  if (ftruncate(fd, (off_t)len) != 0) {
    rc = -errno;
    close(fd);
    return rc;
  }
  tmp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (tmp == MAP_FAILED) {
    rc = -errno;
    close(fd);
    return rc;
  }
  memcpy(tmp, at, len);
  if (mremap(tmp, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == MAP_FAILED) {
    rc = -errno;
    munmap(tmp, len);
    close(fd);
    return rc;
  }
  rc = guest__send_fd(fd, lo);
  close(fd); /* tallyd has its own; the mapping keeps ours */
  if (rc < 0 && make_private(lo, len) != 0)
    guest__log("registered memory %#" PRIx64 " stays on shared pages after tallyd refused it",
               lo);
  return rc;
}

int guest__hostreg_share(uint64_t base, uint64_t size, uint64_t *lo, uint64_t *hi, unsigned *how) {
  uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), l, h;
  reg_t *n;
  int rc;
  if (!guest__chan_shm() || guest__env_long("TALLY_SHARE_REGISTERED", 1, 1) == 0)
    return -EOPNOTSUPP;
  if (base > UINT64_MAX - size - page)
    return -EINVAL;
  l = (base + page - 1) / page * page;
  h = (base + size) / page * page;
  if (h <= l)
    return -ERANGE; /* no whole page inside */
  pthread_once(&fork_once, fork_register);
  pthread_mutex_lock(&mu);
  if (nreg == capreg) {
    size_t cap = capreg ? capreg * 2 : 8;
    if (!(n = realloc(regs, cap * sizeof(*n)))) {
      pthread_mutex_unlock(&mu);
      return -ENOMEM;
    }
    regs = n;
    capreg = cap;
  }
  if (!anonymous_private(l, h)) {
    pthread_mutex_unlock(&mu);
    if (guest__debug())
      guest__log("registered memory %#" PRIx64 " is not private anonymous memory: its copies "
                 "carry their bytes", base);
    return -EPERM;
  }
  rc = move_to_memfd(l, h);
  if (rc >= 0) {
    regs[nreg++] = (reg_t){base, l, h};
    *lo = l;
    *hi = h;
    *how = GUEST_HOST_SHARED | (rc == CALL_FD_ELSEWHERE ? GUEST_HOST_ELSEWHERE : 0);
    rc = 0;
  } else if (guest__debug()) {
    guest__log("sharing registered memory %#" PRIx64 " with tallyd failed (%d): its copies "
               "carry their bytes", base, rc);
  }
  pthread_mutex_unlock(&mu);
  return rc;
}

bool guest__hostreg_find(uint64_t base, uint64_t *lo, uint64_t *hi) {
  bool found = false;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nreg && !found; i++) {
    if (regs[i].base == base) {
      *lo = regs[i].lo;
      *hi = regs[i].hi;
      found = true;
    }
  }
  pthread_mutex_unlock(&mu);
  return found;
}

void guest__hostreg_unshare(uint64_t base) {
  reg_t r = {0, 0, 0};
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nreg; i++) {
    if (regs[i].base == base) {
      r = regs[i];
      regs[i] = regs[--nreg];
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  if (r.hi == 0)
    return;
  /* tallyd finishes this tenant's copies, then unregisters and unmaps. */
  call_pinned_free_req_t f = {.tag = r.lo};
  CUresult res = guest__rpc(CALL_OP_PINNED_FREE, 0, &f, NULL);
  if (res != CUDA_SUCCESS && guest__debug())
    guest__log("tallyd could not release registered memory %#" PRIx64 ": %d", base, (int)res);
  if (make_private(r.lo, (size_t)(r.hi - r.lo)) != 0)
    guest__log("registered memory %#" PRIx64 " stays on shared pages after cuMemHostUnregister "
               "(no memory for a private copy)", base);
}
