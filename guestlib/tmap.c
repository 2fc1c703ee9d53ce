/* tmap.c: tensor maps (cuTensorMapEncodeTiled, cuTensorMapEncodeIm2col,
 * cuTensorMapEncodeIm2colWide, cuTensorMapReplaceAddress), forwarded to
 * tallyd.
 *
 * A CUtensorMap is 128 bytes whose layout is the driver's and is not
 * documented; Triton and XLA build one on the host and pass it to a kernel
 * by value (a __grid_constant__ parameter).  So the guest never encodes
 * one: the arguments go to tallyd (TENSOR_MAP, wire/call.def), its driver
 * encodes, and the bytes come back into the caller's map unchanged.  The
 * global address inside is a device address of the daemon's own, the same
 * value the tenant holds (docs/decisions.md, D2), so a kernel launched with
 * the map reads the right memory.
 *
 * Encoding is a pure function of the arguments (a map holds no driver
 * resource), and frameworks encode the same maps again and again: XLA
 * re-encodes about twenty per training step of the same buffers.  So the
 * maps the driver encoded successfully are remembered here, by the whole
 * request (TMAP_SETS x TMAP_WAYS entries, the set chosen by its content id):
 * a repeat is a copy, not a round trip.  Errors are not remembered (asked
 * again).
 *
 * Checked here only what must be to read the caller's arrays (the map and
 * array pointers, the rank bounding them); tallyd and its driver check the
 * rest, and their CUresult is returned.
 */
#include "guestlib/guest.h"

#include <pthread.h>
#include <string.h>

_Static_assert(sizeof(CUtensorMap) == CALL_TMAP_BYTES, "TENSOR_MAP map (call.def)");

/* The fields every kind shares: rank, dims, strides, element strides, enums. */
static CUresult tmap_common(call_tensor_map_req_t *q, uint32_t kind, CUtensorMapDataType dtype,
                            cuuint32_t rank, void *addr, const cuuint64_t *dims,
                            const cuuint64_t *strides, const cuuint32_t *estrides,
                            CUtensorMapInterleave il, CUtensorMapSwizzle sw,
                            CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  unsigned lo = kind == CALL_TMAP_TILED ? 1 : 3;
  if (rank < lo || rank > CALL_TMAP_RANK_MAX || !dims || !estrides || (rank > 1 && !strides))
    return CUDA_ERROR_INVALID_VALUE;
  memset(q, 0, sizeof(*q));
  q->kind = kind;
  q->dtype = (uint32_t)dtype;
  q->rank = rank;
  q->interleave = (uint32_t)il;
  q->swizzle = (uint32_t)sw;
  q->l2promo = (uint32_t)l2;
  q->oobfill = (uint32_t)oob;
  q->addr = (uint64_t)(uintptr_t)addr;
  for (unsigned i = 0; i < rank; i++) {
    q->dims[i] = dims[i];
    q->estrides[i] = estrides[i];
  }
  for (unsigned i = 0; i + 1 < rank; i++)
    q->strides[i] = strides[i];
  return CUDA_SUCCESS;
}

#define TMAP_SETS 128 /* remembered maps: TMAP_SETS x TMAP_WAYS (about 320 KiB) */
#define TMAP_WAYS 8

/* Set-associative, least recently used way replaced: a direct-mapped memo of
 * 256 maps lost one map per XLA step to a collision (two of a step's maps on
 * one slot evict each other every step, a round trip each time).
 * Invariant: a used entry's map is what the driver returned for its request. */
static struct {
  pthread_mutex_t mu;
  uint64_t tick; /* last use, for the replacement */
  struct {
    uint64_t used; /* 0: free; else the tick of its last use */
    call_tensor_map_req_t q; /* every byte set: tmap_common zeroes the request first */
    uint8_t map[CALL_TMAP_BYTES];
  } e[TMAP_SETS][TMAP_WAYS];
} memo = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The map remembered for q into m; false if none. */
static bool memo_get(size_t set, const call_tensor_map_req_t *q, CUtensorMap *m) {
  bool hit = false;
  pthread_mutex_lock(&memo.mu);
  for (unsigned w = 0; w < TMAP_WAYS && !hit; w++)
    if (memo.e[set][w].used && memcmp(&memo.e[set][w].q, q, sizeof(*q)) == 0) {
      memcpy(m, memo.e[set][w].map, sizeof(*m));
      memo.e[set][w].used = ++memo.tick;
      hit = true;
    }
  pthread_mutex_unlock(&memo.mu);
  return hit;
}

/* Remembers q's map in the set's free or least recently used way. */
static void memo_put(size_t set, const call_tensor_map_req_t *q, const uint8_t *map) {
  unsigned v = 0;
  pthread_mutex_lock(&memo.mu);
  for (unsigned w = 1; w < TMAP_WAYS; w++)
    if (memo.e[set][w].used < memo.e[set][v].used)
      v = w;
  memo.e[set][v].used = ++memo.tick;
  memcpy(&memo.e[set][v].q, q, sizeof(*q));
  memcpy(memo.e[set][v].map, map, CALL_TMAP_BYTES);
  pthread_mutex_unlock(&memo.mu);
}

static CUresult tmap_ask(CUtensorMap *m, const call_tensor_map_req_t *q) {
  call_tensor_map_rep_t a;
  CUresult r;
  size_t set = (size_t)(wire_content_id(q, sizeof(*q)) % TMAP_SETS);
  if (memo_get(set, q, m))
    return CUDA_SUCCESS;
  if (guest__debug())
    guest__log("tensor map: kind %u rank %u address 0x%llx dims[0] %llu not remembered; asking",
               q->kind, q->rank, (unsigned long long)q->addr, (unsigned long long)q->dims[0]);
  if ((r = guest__rpc(CALL_OP_TENSOR_MAP, 0, q, &a)) != CUDA_SUCCESS)
    return r;
  memcpy(m, a.map, sizeof(*m));
  memo_put(set, q, a.map);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuTensorMapEncodeTiled(CUtensorMap *m, CUtensorMapDataType dtype,
                                             cuuint32_t rank, void *addr, const cuuint64_t *dims,
                                             const cuuint64_t *strides, const cuuint32_t *box,
                                             const cuuint32_t *estrides, CUtensorMapInterleave il,
                                             CUtensorMapSwizzle sw, CUtensorMapL2promotion l2,
                                             CUtensorMapFloatOOBfill oob) {
  call_tensor_map_req_t q;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!m || !box)
    return CUDA_ERROR_INVALID_VALUE;
  r = tmap_common(&q, CALL_TMAP_TILED, dtype, rank, addr, dims, strides, estrides, il, sw, l2, oob);
  if (r != CUDA_SUCCESS)
    return r;
  for (unsigned i = 0; i < rank; i++)
    q.box[i] = box[i];
  return tmap_ask(m, &q);
}

GUEST_EXPORT CUresult cuTensorMapEncodeIm2col(
    CUtensorMap *m, CUtensorMapDataType dtype, cuuint32_t rank, void *addr, const cuuint64_t *dims,
    const cuuint64_t *strides, const int *lower, const int *upper, cuuint32_t channels,
    cuuint32_t pixels, const cuuint32_t *estrides, CUtensorMapInterleave il, CUtensorMapSwizzle sw,
    CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  call_tensor_map_req_t q;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!m || !lower || !upper)
    return CUDA_ERROR_INVALID_VALUE;
  r = tmap_common(&q, CALL_TMAP_IM2COL, dtype, rank, addr, dims, strides, estrides, il, sw, l2,
                  oob);
  if (r != CUDA_SUCCESS)
    return r;
  for (unsigned i = 0; i + 2 < rank; i++) {
    q.lower[i] = lower[i];
    q.upper[i] = upper[i];
  }
  q.channels = channels;
  q.pixels = pixels;
  return tmap_ask(m, &q);
}

GUEST_EXPORT CUresult cuTensorMapEncodeIm2colWide(
    CUtensorMap *m, CUtensorMapDataType dtype, cuuint32_t rank, void *addr, const cuuint64_t *dims,
    const cuuint64_t *strides, int lower_w, int upper_w, cuuint32_t channels, cuuint32_t pixels,
    const cuuint32_t *estrides, CUtensorMapInterleave il, CUtensorMapIm2ColWideMode mode,
    CUtensorMapSwizzle sw, CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  call_tensor_map_req_t q;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!m)
    return CUDA_ERROR_INVALID_VALUE;
  r = tmap_common(&q, CALL_TMAP_IM2COL_WIDE, dtype, rank, addr, dims, strides, estrides, il, sw, l2,
                  oob);
  if (r != CUDA_SUCCESS)
    return r;
  q.lower[0] = lower_w;
  q.upper[0] = upper_w;
  q.channels = channels;
  q.pixels = pixels;
  q.mode = (uint32_t)mode;
  return tmap_ask(m, &q);
}

GUEST_EXPORT CUresult cuTensorMapReplaceAddress(CUtensorMap *m, void *addr) {
  call_tensor_map_addr_req_t q;
  call_tensor_map_addr_rep_t a;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!m)
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(q.map, m, sizeof(q.map));
  q.addr = (uint64_t)(uintptr_t)addr;
  if ((r = guest__rpc(CALL_OP_TENSOR_MAP_ADDR, 0, &q, &a)) == CUDA_SUCCESS)
    memcpy(m, a.map, sizeof(*m));
  return r;
}
