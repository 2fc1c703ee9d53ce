/* gstage.c: graph copy nodes naming host memory tallyd's GPU cannot reach.
 *
 * A copy node may name host memory natively: pageable memory, or pinned
 * memory of a process whose GPU is on another host (TCP).  tallyd's driver
 * cannot reach it, so such a node is made as a device copy to or from a
 * staging buffer in this tenant's device memory (a "stage", one per node),
 * and the guest moves the bytes: before each launch of an exec holding
 * stages, the host bytes of every upload go to their stage in stream order
 * (posts ahead of the launch: the bytes as they are at cuGraphLaunch, where
 * the driver reads them when the node runs); after it, each download is
 * read back into the host memory at the first synchronisation that covers
 * the launch's stream (its own, the legacy stream's or the context's), as
 * mirror.c reads back device mirrors.  What differs from native: a download
 * reaches the host at that synchronisation, not when the node runs (a host
 * node of the same graph reading it, or an event's synchronisation, sees
 * the old bytes); two execs of one graph launched at once share the graph's
 * stages.
 *
 * An asynchronous copy of such memory made on a capturing stream is a
 * stage too (its bytes cannot travel with the request: the capture would
 * keep tallyd's transient copy of them): a device copy through a new stage
 * is captured, owned by the capture (GUEST_STAGE_CAPTURE | its id) until
 * cuStreamEndCapture hands it to the graph, or drops it with a capture
 * that failed.
 *
 * Stages belong to a graph or an exec (owner); an exec made from a graph
 * shares the graph's stage buffers (its nodes copy to and from the same
 * device addresses) and gets entries of its own, updated by
 * cuGraphExecMemcpyNodeSetParams.  A buffer is freed with the last entry
 * naming it.  A graph holding stages is refused as a child graph and by
 * cuGraphExecUpdate (graph.c): their nodes would copy to buffers no entry
 * describes.
 *
 * Lock story: mu guards the table; the copies are made with it held (only
 * launches of execs with stages, and synchronisations while a download is
 * pending, come here; ndirty lets every other synchronisation skip).
 */
#include "guestlib/guest.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct stage {
  uint64_t owner, node; /* a graph or an exec; its copy node */
  uint64_t dev;         /* the stage: this tenant's device memory, len bytes */
  uint8_t *host;        /* the application's side of the copy */
  size_t len;
  int dir;              /* GUEST_STAGE_UP: host to device; GUEST_STAGE_DOWN: device to host */
  bool dirty;           /* a download launched since its last read-back */
  uint64_t stream;      /* the stream of that launch */
} stage_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static stage_t *stages;
static size_t nstages, capstages;
static atomic_int ndirty; /* entries with dirty set: 0 = synchronisations skip this file */
static atomic_size_t nall; /* nstages, read without the lock: 0 = no launch looks here */

/* Drops entry i, freeing its buffer when no other entry names it.  Lock held. */
static void drop_at(size_t i) {
  uint64_t dev = stages[i].dev;
  bool shared = false;
  if (stages[i].dirty)
    atomic_fetch_sub(&ndirty, 1);
  stages[i] = stages[--nstages];
  atomic_store(&nall, nstages);
  for (size_t k = 0; k < nstages && !shared; k++)
    shared = stages[k].dev == dev;
  if (!shared)
    (void)guest__dev_free(dev); /* failing, it goes with the tenant */
}

static stage_t *find(uint64_t owner, uint64_t node) {
  for (size_t i = 0; i < nstages; i++)
    if (stages[i].owner == owner && stages[i].node == node)
      return &stages[i];
  return NULL;
}

/* Appends e.  Lock held.  0 or -1 (no memory). */
static int append(const stage_t *e) {
  if (nstages == capstages) {
    size_t cap = capstages ? capstages * 2 : 16;
    stage_t *n = realloc(stages, cap * sizeof(*n));
    if (!n)
      return -1;
    stages = n;
    capstages = cap;
  }
  stages[nstages] = *e;
  stages[nstages].dirty = false;
  nstages++;
  atomic_store(&nall, nstages);
  return 0;
}

CUresult guest__gstage_buffer(size_t len, uint64_t *dev) {
  return len ? guest__dev_alloc(dev, len) : CUDA_ERROR_INVALID_VALUE;
}

CUresult guest__gstage_bind(uint64_t owner, uint64_t node, uint64_t dev, void *host, size_t len,
                            int dir) {
  stage_t e = {.owner = owner, .node = node, .dev = dev, .host = host, .len = len, .dir = dir};
  stage_t *old;
  int rc;
  pthread_mutex_lock(&mu);
  if ((old = find(owner, node)))
    drop_at((size_t)(old - stages));
  rc = append(&e);
  pthread_mutex_unlock(&mu);
  if (rc != 0) {
    (void)guest__dev_free(dev);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

void guest__gstage_unbind(uint64_t owner, uint64_t node) {
  stage_t *e;
  pthread_mutex_lock(&mu);
  if ((e = find(owner, node)))
    drop_at((size_t)(e - stages));
  pthread_mutex_unlock(&mu);
}

void guest__gstage_drop(uint64_t owner) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nstages;)
    if (stages[i].owner == owner)
      drop_at(i);
    else
      i++;
  pthread_mutex_unlock(&mu);
}

bool guest__gstage_host(uint64_t owner, uint64_t node, void **host, int *dir) {
  stage_t *e;
  pthread_mutex_lock(&mu);
  if ((e = find(owner, node))) {
    *host = e->host;
    *dir = e->dir;
  }
  pthread_mutex_unlock(&mu);
  return e != NULL;
}

bool guest__gstage_any_captured(void) {
  bool any = false;
  if (atomic_load_explicit(&nall, memory_order_relaxed) == 0)
    return false;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nstages && !any; i++)
    any = (stages[i].owner & GUEST_STAGE_CAPTURE) != 0;
  pthread_mutex_unlock(&mu);
  return any;
}

CUresult guest__gstage_captured_copy(uint64_t dev, void *host, size_t n, uint64_t s, int dir,
                                     uint64_t id) {
  uint64_t stage;
  CUresult r = guest__gstage_buffer(n, &stage);
  if (r != CUDA_SUCCESS)
    return r;
  r = dir == GUEST_STAGE_UP ? guest__copy_dtod(dev, stage, n, s)
                            : guest__copy_dtod(stage, dev, n, s);
  if (r != CUDA_SUCCESS) {
    (void)guest__dev_free(stage);
    return r;
  }
  /* Named by its buffer: a captured node is never named by the application here. */
  return guest__gstage_bind(GUEST_STAGE_CAPTURE | id, stage, stage, host, n, dir);
}

bool guest__gstage_any(uint64_t owner) {
  bool any = false;
  if (atomic_load_explicit(&nall, memory_order_relaxed) == 0)
    return false;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nstages && !any; i++)
    any = stages[i].owner == owner;
  pthread_mutex_unlock(&mu);
  return any;
}

CUresult guest__gstage_copy(uint64_t from, uint64_t to, uint64_t (*rename)(uint64_t, void *),
                            void *arg) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  for (size_t i = 0, n = nstages; i < n && r == CUDA_SUCCESS; i++) {
    if (stages[i].owner != from)
      continue;
    stage_t e = stages[i];
    e.owner = to;
    if (rename && !(e.node = rename(e.node, arg)))
      r = CUDA_ERROR_INVALID_VALUE;
    else if (append(&e) != 0)
      r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_unlock(&mu);
  if (r != CUDA_SUCCESS)
    guest__gstage_drop(to);
  return r;
}

CUresult guest__gstage_before(uint64_t exec, uint64_t stream) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nstages && r == CUDA_SUCCESS; i++)
    if (stages[i].owner == exec && stages[i].dir == GUEST_STAGE_UP)
      r = guest__copy_htod(stages[i].dev, stages[i].host, stages[i].len, stream);
  pthread_mutex_unlock(&mu);
  return r;
}

void guest__gstage_after(uint64_t exec, uint64_t stream) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nstages; i++) {
    stage_t *e = &stages[i];
    if (e->owner != exec || e->dir != GUEST_STAGE_DOWN)
      continue;
    if (!e->dirty)
      atomic_fetch_add(&ndirty, 1);
    e->dirty = true;
    e->stream = stream;
  }
  pthread_mutex_unlock(&mu);
}

void guest__gstage_synced(uint32_t op, uint64_t stream) {
  bool all = op == CALL_OP_CTX_SYNC || (op == CALL_OP_STREAM_SYNC && stream == 0);
  if (atomic_load_explicit(&ndirty, memory_order_acquire) == 0)
    return;
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < nstages; i++) {
    stage_t *e = &stages[i];
    if (!e->dirty || !(all || e->stream == stream))
      continue;
    /* As mirror.c: on the legacy stream after the context's synchronisation,
     * else on the launch's; a failed read-back waits for the next one. */
    if (guest__copy_dtoh(e->host, e->dev, e->len, op == CALL_OP_CTX_SYNC ? 0 : e->stream) ==
        CUDA_SUCCESS) {
      e->dirty = false;
      atomic_fetch_sub(&ndirty, 1);
    }
  }
  pthread_mutex_unlock(&mu);
}
