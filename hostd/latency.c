/* latency.c: the latency-critical tenant's request latency over the last
 * minute, as `tallyctl status` and /metrics show it (p50, p99).
 *
 * What a request is, seen from tallyd (which cannot see the application's
 * own notion of one):
 *   - it begins when tallyd receives the tenant's first LAUNCH after the
 *     previous request ended (or after it connected): the time the loop
 *     thread queued that launch for the worker;
 *   - it ends when tallyd answers the next call that waits for the GPU:
 *     STREAM_SYNC, CTX_SYNC, EVENT_SYNC or a synchronous DTOH (whatever
 *     its result), or a STREAM_QUERY / EVENT_QUERY that answers
 *     CUDA_SUCCESS (the work is done; a NOT_READY answer does not end it).
 * Its latency is the difference: the time the GPU work of one inference
 * took in tallyd, from its first kernel's arrival to the reply that tells
 * the tenant it is done, queueing behind best-effort work included.  It
 * leaves out the guest's own time before its first launch and the
 * transport of that launch and of the final reply (microseconds over
 * shared memory).  Calls and copies with no launch before them open no
 * request.
 *
 * Threads: one writer, the tenant's worker (hostd__lat_request /
 * _answered); any thread reads (hostd__lat_quantiles).  Each finished
 * request is one 64-bit atomic store of (end second << 32 | microseconds)
 * into a ring of HOSTD_LAT_RING entries, so a reader sees whole entries and
 * at worst misses the one being written.  At more than HOSTD_LAT_RING
 * requests a minute the window is the last HOSTD_LAT_RING requests.
 */
#include "hostd/guard.h"

#include <stdlib.h>

#include <cuda.h>

#include "wire/call.h"

bool hostd__lat_ends(uint32_t op, uint32_t result) {
  switch (op) {
  case CALL_OP_STREAM_SYNC:
  case CALL_OP_CTX_SYNC:
  case CALL_OP_EVENT_SYNC:
  case CALL_OP_DTOH:
    return true;
  case CALL_OP_STREAM_QUERY:
  case CALL_OP_EVENT_QUERY:
    return result == CUDA_SUCCESS;
  default:
    return false;
  }
}

void hostd__lat_request(hostd_lat_t *l, uint32_t op, uint64_t at_ns) {
  if (l && op == CALL_OP_LAUNCH && !l->open_ns && at_ns)
    l->open_ns = at_ns;
}

void hostd__lat_answered(hostd_lat_t *l, uint32_t op, uint32_t result, uint64_t now_ns) {
  uint64_t us;
  if (!l || !l->open_ns || !hostd__lat_ends(op, result))
    return;
  us = now_ns > l->open_ns ? (now_ns - l->open_ns) / 1000 : 0;
  __atomic_store_n(&l->ring[l->next++ % HOSTD_LAT_RING],
                   (now_ns / 1000000000u) << 32 | (us > UINT32_MAX ? UINT32_MAX : us),
                   __ATOMIC_RELAXED);
  l->open_ns = 0;
}

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

void hostd__lat_quantiles(const hostd_lat_t *l, uint64_t now_ns, int64_t *p50, int64_t *p99) {
  uint64_t now_s = now_ns / 1000000000u;
  uint32_t *us;
  size_t n = 0;
  *p50 = *p99 = -1;
  if (!l || !(us = malloc(HOSTD_LAT_RING * sizeof(*us))))
    return;
  for (size_t i = 0; i < HOSTD_LAT_RING; i++) {
    uint64_t e = __atomic_load_n(&l->ring[i], __ATOMIC_RELAXED);
    if (e && now_s - (e >> 32) < HOSTD_LAT_WINDOW_S)
      us[n++] = (uint32_t)e;
  }
  if (n) {
    qsort(us, n, sizeof(us[0]), cmp_u32);
    *p50 = us[(n - 1) / 2];
    *p99 = us[(n * 99 + 99) / 100 - 1];
  }
  free(us);
}
