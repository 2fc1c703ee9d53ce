/* exec-tmap.c: a tenant's tensor-map requests (cuTensorMapEncodeTiled,
 * cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2colWide,
 * cuTensorMapReplaceAddress).
 *
 * A CUtensorMap is 128 opaque bytes the driver encodes on the host; a
 * kernel receives it by value as a parameter and the GPU's copy engine
 * reads the global address inside it.  The guest cannot build one (the
 * layout is the driver's), so it sends the arguments and gets the bytes
 * back.  Nothing is kept here: a map holds no driver resource.
 *
 * Checked before the backend sees a request: the kind, the rank (1..5
 * tiled, 3..5 im2col, as cuda.h documents), every enum against the range
 * cuda.h defines, and array entries past the rank all 0 (the guest sends
 * them so; anything else is a malformed request).  The driver checks the
 * rest (alignment, strides, box sizes) and its CUresult goes back as is.
 * The global address is not checked against the tenant's allocations: it
 * is the host's own address (docs/decisions.md, D2), and a map gives a
 * kernel no access that a raw pointer parameter does not already give.
 */
#include "hostd/tenant-int.h"

#include <string.h>

/* Entries from n on of an array of cap values are all 0. */
static bool zero_from_u32(const uint32_t *v, unsigned n, unsigned cap) {
  for (unsigned i = n; i < cap; i++)
    if (v[i])
      return false;
  return true;
}

static bool zero_from_i32(const int32_t *v, unsigned n, unsigned cap) {
  for (unsigned i = n; i < cap; i++)
    if (v[i])
      return false;
  return true;
}

static bool zero_from_u64(const uint64_t *v, unsigned n, unsigned cap) {
  for (unsigned i = n; i < cap; i++)
    if (v[i])
      return false;
  return true;
}

static bool enums_ok(const call_tensor_map_req_t *q) {
  return q->dtype <= CU_TENSOR_MAP_DATA_TYPE_16U6_ALIGN16B &&
         q->interleave <= CU_TENSOR_MAP_INTERLEAVE_32B &&
         q->swizzle <= CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B &&
         q->l2promo <= CU_TENSOR_MAP_L2_PROMOTION_L2_256B &&
         q->oobfill <= CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA &&
         (q->kind == CALL_TMAP_IM2COL_WIDE ? q->mode <= CU_TENSOR_MAP_IM2COL_WIDE_MODE_W128
                                           : q->mode == 0);
}

/* The fields q->kind does not use, and entries past the rank, are 0. */
static bool unused_zero(const call_tensor_map_req_t *q) {
  const unsigned R = CALL_TMAP_RANK_MAX, rank = q->rank;
  unsigned corners = q->kind == CALL_TMAP_IM2COL ? rank - 2 : q->kind == CALL_TMAP_IM2COL_WIDE;
  if (!zero_from_u64(q->dims, rank, R) || !zero_from_u64(q->strides, rank - 1, R - 1) ||
      !zero_from_u32(q->estrides, rank, R) ||
      !zero_from_u32(q->box, q->kind == CALL_TMAP_TILED ? rank : 0, R) ||
      !zero_from_i32(q->lower, corners, R - 2) || !zero_from_i32(q->upper, corners, R - 2))
    return false;
  return q->kind != CALL_TMAP_TILED || (q->channels == 0 && q->pixels == 0);
}

static CUresult tmap_check(const call_tensor_map_req_t *q) {
  unsigned lo = q->kind == CALL_TMAP_TILED ? 1 : 3;
  if (q->kind >= CALL_TMAP_KINDS || q->rank < lo || q->rank > CALL_TMAP_RANK_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  return enums_ok(q) && unused_zero(q) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult hostd__exec_tensor_map(hostd_tenant_t *t, wire_buf_t *out,
                                const call_tensor_map_req_t *q) {
  call_tensor_map_rep_t rep;
  CUresult r;
  (void)t;
  if ((r = tmap_check(q)) != CUDA_SUCCESS)
    return r;
  memset(&rep, 0, sizeof(rep));
  if ((r = hostd__gpu.tensor_map(rep.map, q)) != CUDA_SUCCESS)
    return r;
  return call_tensor_map_rep_put(&rep, out) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}

CUresult hostd__exec_tensor_map_addr(hostd_tenant_t *t, wire_buf_t *out,
                                     const call_tensor_map_addr_req_t *q) {
  call_tensor_map_addr_rep_t rep;
  CUresult r;
  (void)t;
  memcpy(rep.map, q->map, sizeof(rep.map));
  if ((r = hostd__gpu.tensor_map_addr(rep.map, q->addr)) != CUDA_SUCCESS)
    return r;
  return call_tensor_map_addr_rep_put(&rep, out) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}
