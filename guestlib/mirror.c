/* mirror.c: device mirrors of small pinned host allocations tallyd's GPU
 * cannot reach.
 *
 * Natively a kernel may take a pointer into pinned host memory and write
 * there (XLA's autotuner hands its redzone checker an 8-byte result in
 * cuMemHostAlloc'd memory, reads it after a synchronisation).  Over TCP
 * tallyd's GPU cannot reach this process's memory (docs/decisions.md, D2),
 * so such a launch faulted or was refused.  Instead, an allocation of at
 * most MIRROR_MAX bytes that a launch names gets a mirror in device memory
 * (an ordinary MEM_ALLOC, freed with the tenant): before the launch its
 * bytes are copied there in stream order (HTOD) and the kernel's argument
 * words are pointed at the mirror; after a synchronisation that covers the
 * launch's stream (the stream's own, the legacy stream's, the context's)
 * the mirror is read back (DTOH) and the bytes that changed on the device
 * are written into the allocation.  Only changed bytes: the host may have
 * written other bytes of the allocation meanwhile.
 * (A successful query of that stream counts as its synchronisation.)
 * What differs from native: the kernel's writes reach the host at that
 * synchronisation, not while it runs (a host thread polling a flag a kernel
 * sets would wait for ever), nor at an event's synchronisation.  A larger
 * allocation, a graph's kernel node, or a launch while a stream capture is
 * open (it may be captured; the copies would not be replayed) is still
 * refused (module.c, graph.c).
 * Lock story: mu guards the list; it is held across the copies (rare path:
 * only launches that name unreachable host memory, and the synchronisations
 * after them, come here; ndirty lets every other synchronisation skip).
 */
#include "guestlib/guest.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct mirror {
  uint64_t host, size; /* the pinned allocation (a record of tables.c) */
  uint64_t dev;        /* its mirror, device memory of this tenant */
  uint8_t *snap;       /* what the mirror held after the last push or read-back */
  uint64_t stream;     /* the stream of the last launch that used it */
  bool dirty;          /* used by a launch since the last covering synchronisation */
  struct mirror *next;
} mirror_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static mirror_t *mirrors;
static atomic_int ndirty; /* mirrors with dirty set: 0 = synchronisations skip this file */

static mirror_t *find(uint64_t host) {
  for (mirror_t *m = mirrors; m; m = m->next)
    if (m->host == host)
      return m;
  return NULL;
}

/* A new mirror of [host, host + size), or NULL with *r set.  Lock held. */
static mirror_t *make(uint64_t host, uint64_t size, CUresult *r) {
  mirror_t *m = calloc(1, sizeof(*m));
  uint8_t *snap = malloc(size);
  uint64_t dev = 0;
  *r = !m || !snap ? CUDA_ERROR_OUT_OF_MEMORY
                   /* Recorded as the tenant's device memory, so a word naming
                    * it is never taken for host memory again (tables.c). */
                   : guest__dev_alloc(&dev, size);
  if (*r != CUDA_SUCCESS) {
    free(m);
    free(snap);
    return NULL;
  }
  *m = (mirror_t){.host = host, .size = size, .dev = dev, .snap = snap, .next = mirrors};
  mirrors = m;
  return m;
}

CUresult guest__mirror_args(uint8_t *args, size_t n, uint64_t stream) {
  size_t off;
  uint64_t val, base, size;
  unsigned flags;
  CUresult r = CUDA_SUCCESS;

  pthread_mutex_lock(&mu);
  /* One word at a time: a rewritten word names device memory, so the next
   * look finds the next unreachable one. */
  while (r == CUDA_SUCCESS && guest__mem_args_unreachable(args, n, &off, &val)) {
    mirror_t *m;
    if (!guest__mem_find_host(val, &base, &size, &flags) || size > GUEST_MIRROR_MAX) {
      r = CUDA_ERROR_NOT_SUPPORTED;
      break;
    }
    if (!(m = find(base)) && !(m = make(base, size, &r)))
      break;
    /* The allocation's bytes as they are now, in stream order before the
     * launch (both are posts of this thread). */
    memcpy(m->snap, (const void *)(uintptr_t)base, size);
    if ((r = guest__copy_htod(m->dev, m->snap, size, stream)) != CUDA_SUCCESS)
      break;
    if (!m->dirty)
      atomic_fetch_add(&ndirty, 1);
    m->dirty = true;
    m->stream = stream;
    val = m->dev + (val - base);
    memcpy(args + off, &val, sizeof(val));
  }
  pthread_mutex_unlock(&mu);
  return r;
}

/* Reads m back on stream s and writes what changed on the device into the
 * allocation.  Lock held. */
static CUresult read_back(mirror_t *m, uint64_t s) {
  uint8_t *now = malloc(m->size), *host = (uint8_t *)(uintptr_t)m->host;
  CUresult r;
  if (!now)
    return CUDA_ERROR_OUT_OF_MEMORY;
  r = guest__copy_dtoh(now, m->dev, m->size, s);
  if (r == CUDA_SUCCESS) {
    for (uint64_t i = 0; i < m->size; i++)
      if (now[i] != m->snap[i])
        host[i] = now[i];
    free(m->snap);
    m->snap = now;
  } else {
    free(now);
  }
  return r;
}

void guest__mirror_synced(uint32_t op, uint64_t stream) {
  bool all = op == CALL_OP_CTX_SYNC || (op == CALL_OP_STREAM_SYNC && stream == 0);

  if (atomic_load_explicit(&ndirty, memory_order_acquire) == 0)
    return;
  pthread_mutex_lock(&mu);
  for (mirror_t *m = mirrors; m; m = m->next) {
    if (!m->dirty || !(all || m->stream == stream))
      continue;
    /* After the context's synchronisation on the legacy stream (the
     * launch's may be gone since); else on the launch's (a legacy-stream
     * synchronisation does not cover non-blocking streams: the copy waits
     * for it).  A failed read-back keeps the mirror for the next one. */
    if (read_back(m, op == CALL_OP_CTX_SYNC ? 0 : m->stream) == CUDA_SUCCESS) {
      m->dirty = false;
      atomic_fetch_sub(&ndirty, 1);
    }
  }
  pthread_mutex_unlock(&mu);
}

void guest__mirror_forget(uint64_t host) {
  mirror_t **pp, *m = NULL;
  pthread_mutex_lock(&mu);
  for (pp = &mirrors; *pp; pp = &(*pp)->next)
    if ((*pp)->host == host) {
      m = *pp;
      *pp = m->next;
      break;
    }
  pthread_mutex_unlock(&mu);
  if (!m)
    return;
  if (m->dirty)
    atomic_fetch_sub(&ndirty, 1);
  (void)guest__dev_free(m->dev); /* failing, it goes with the tenant */
  free(m->snap);
  free(m);
}
