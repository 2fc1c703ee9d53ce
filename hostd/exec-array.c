/* exec-array.c: a tenant's CUDA arrays, copies into and out of them, and
 * texture and surface objects (cuArray3DCreate, cuMemcpy3D with an array
 * side, cuTexObjectCreate, cuSurfObjectCreate), and what it still holds
 * when it goes.
 *
 * Everything is the tenant's own and checked as such before the GPU
 * backend sees it (docs/decisions.md, D2):
 *   arrays     t->arrays: handle -> tarray_t (its shape, for the bounds of
 *              every copy, and its bytes, charged to the tenant's
 *              device-memory quota until it is destroyed);
 *   objects    t->texs: texture object -> OBJ_TEX, surface object ->
 *              OBJ_SURF.  Their handles are the driver's: a kernel of the
 *              tenant receives one as a parameter and the driver reads it,
 *              so the value the tenant holds must be the real one.
 * A texture's resource is the tenant's array, or linear / pitched memory
 * lying inside one of its ranges (tenant.c, hostd__owns); a copy's linear
 * side likewise, every byte it touches.  Invariant: every handle in these
 * tables was made by this tenant and not yet destroyed.  Destroying an
 * array that a texture still reads is allowed, as natively (the texture
 * then reads undefined data, never another tenant's array: arrays are not
 * reused while the driver holds the texture).
 */
#include "hostd/guard.h"
#include "hostd/tenant-int.h"

#include <stdlib.h>
#include <string.h>

#define OBJ_TEX  1
#define OBJ_SURF 2
/* Array flags offered: layered, surface load/store, cubemap, texture
 * gather, depth texture, colour attachment (not sparse, deferred mapping or
 * video: they need calls not offered). */
#define ARRAY_FLAGS_OK                                                                             \
  (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_SURFACE_LDST | CUDA_ARRAY3D_CUBEMAP |                       \
   CUDA_ARRAY3D_TEXTURE_GATHER | CUDA_ARRAY3D_DEPTH_TEXTURE | CUDA_ARRAY3D_COLOR_ATTACHMENT)
/* Beyond any device's limits (an H200's largest 3-D array is 16384 per
 * side): refused before any product can overflow. */
#define ARRAY_DIM_MAX (1ull << 20)

typedef struct tarray {
  uint64_t row, rows, slices; /* bytes per row; height and depth, 0 counted as 1 */
  uint64_t bytes;
} tarray_t;

static tarray_t *array_of(const hostd_tenant_t *t, uint64_t h) {
  uint64_t v;
  return h && u64map_get(&t->arrays, h, &v) ? (tarray_t *)(uintptr_t)v : NULL;
}

static bool channels_ok(uint32_t c) {
  return c == 1 || c == 2 || c == 4;
}

CUresult hostd__exec_array_new(hostd_tenant_t *t, wire_buf_t *out, const call_array_new_req_t *q) {
  unsigned eb = hostd__array_elem_bytes(q->format);
  tarray_t *a;
  uint64_t h = 0;
  CUresult r;
  if (q->flags & ~(uint32_t)ARRAY_FLAGS_OK)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (!eb || !channels_ok(q->channels) || q->width == 0 || q->width > ARRAY_DIM_MAX ||
      q->height > ARRAY_DIM_MAX || q->depth > ARRAY_DIM_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(a = calloc(1, sizeof(*a))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  a->row = q->width * eb * q->channels; /* < 2^24 */
  a->rows = q->height ? q->height : 1;
  a->slices = q->depth ? q->depth : 1;
  if (__builtin_mul_overflow(a->row, a->rows, &a->bytes) ||
      __builtin_mul_overflow(a->bytes, a->slices, &a->bytes)) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if ((r = hostd__quota_charge(hostd__quota_self, HOSTD_QUOTA_MEM, a->bytes)) != CUDA_SUCCESS) {
    free(a);
    return r;
  }
  CUDA_ARRAY3D_DESCRIPTOR d = {.Width = q->width,
                               .Height = q->height,
                               .Depth = q->depth,
                               .Format = (CUarray_format)q->format,
                               .NumChannels = q->channels,
                               .Flags = q->flags};
  r = hostd__gpu.array_new(&h, &d);
  if (r == CUDA_SUCCESS && u64map_put(&t->arrays, h, (uint64_t)(uintptr_t)a) != 0) {
    (void)hostd__gpu.array_del(h);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (r != CUDA_SUCCESS) {
    hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, a->bytes);
    free(a);
    return r;
  }
  call_array_new_rep_t rep = {.array = h};
  (void)call_array_new_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_array_del(hostd_tenant_t *t, wire_buf_t *out, const call_array_del_req_t *q) {
  tarray_t *a = array_of(t, q->array);
  CUresult r;
  (void)out;
  if (!a)
    return CUDA_ERROR_INVALID_HANDLE;
  /* Held launches may read it: they go out first, as launched work would. */
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS ||
      (r = hostd__gpu.array_del(q->array)) != CUDA_SUCCESS)
    return r;
  hostd__quota_release(hostd__quota_self, HOSTD_QUOTA_MEM, a->bytes);
  u64map_del(&t->arrays, q->array);
  free(a);
  return CUDA_SUCCESS;
}

/* Checks one side of a copy of width x height x depth against the tenant's
 * tables and fills *sd (HOST: its memory is set by the caller). */
static CUresult side_check(const hostd_tenant_t *t, hostd_copy_side_t *sd, uint32_t kind,
                           uint64_t handle, const uint64_t xyz[3], uint64_t pitch, uint64_t lh,
                           uint64_t w, uint64_t h, uint64_t d) {
  *sd = (hostd_copy_side_t){.kind = (int)kind, .handle = handle, .x = xyz[0], .y = xyz[1],
                            .z = xyz[2], .pitch = pitch, .height = lh};
  if (kind == CALL_SIDE_HOST) { /* packed bytes of the request or reply */
    *sd = (hostd_copy_side_t){.kind = CALL_SIDE_HOST, .pitch = w, .height = h};
    return CUDA_SUCCESS;
  }
  if (kind == CALL_SIDE_ARRAY) {
    const tarray_t *a = array_of(t, handle);
    if (!a)
      return CUDA_ERROR_INVALID_HANDLE;
    return xyz[0] <= a->row && w <= a->row - xyz[0] && xyz[1] <= a->rows &&
                   h <= a->rows - xyz[1] && xyz[2] <= a->slices && d <= a->slices - xyz[2]
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  }
  /* DEVICE: [first, last) of the linear memory must be the tenant's. */
  uint64_t first, last, rows_before, z_last, y_last, xw;
  if ((h > 1 || d > 1) && pitch < w)
    return CUDA_ERROR_INVALID_VALUE;
  if (d > 1 && lh < h)
    return CUDA_ERROR_INVALID_VALUE;
  if (__builtin_add_overflow(xyz[0], w, &xw) || __builtin_add_overflow(xyz[2], d - 1, &z_last) ||
      __builtin_add_overflow(xyz[1], h - 1, &y_last) ||
      __builtin_mul_overflow(z_last, lh, &rows_before) ||
      __builtin_add_overflow(rows_before, y_last, &rows_before) ||
      __builtin_mul_overflow(rows_before, pitch, &last) ||
      __builtin_add_overflow(last, xw, &last))
    return CUDA_ERROR_INVALID_VALUE;
  first = (xyz[2] * lh + xyz[1]) * pitch + xyz[0]; /* <= last, no overflow */
  if (handle > UINT64_MAX - last || !hostd__owns(t, handle + first, last - first))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult hostd__exec_array_copy(hostd_tenant_t *t, wire_buf_t *out,
                                const call_array_copy_req_t *q) {
  const uint64_t sxyz[3] = {q->sx, q->sy, q->sz}, dxyz[3] = {q->dx, q->dy, q->dz};
  hostd_copy_side_t src, dst;
  uint64_t total;
  tstream_t *ts;
  CUresult r;
  if (q->skind > CALL_SIDE_ARRAY || q->dkind > CALL_SIDE_ARRAY ||
      (q->skind != CALL_SIDE_ARRAY && q->dkind != CALL_SIDE_ARRAY) || q->width == 0 ||
      q->height == 0 || q->depth == 0 || __builtin_mul_overflow(q->width, q->height, &total) ||
      __builtin_mul_overflow(total, q->depth, &total))
    return CUDA_ERROR_INVALID_VALUE;
  if ((q->skind == CALL_SIDE_HOST && q->bytes.len != total) ||
      (q->skind != CALL_SIDE_HOST && q->bytes.len != 0) ||
      (q->dkind == CALL_SIDE_HOST && total > CALL_MAX_LEN))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = side_check(t, &src, q->skind, q->src, sxyz, q->spitch, q->sheight, q->width, q->height,
                      q->depth)) != CUDA_SUCCESS ||
      (r = side_check(t, &dst, q->dkind, q->dst, dxyz, q->dpitch, q->dheight, q->width, q->height,
                      q->depth)) != CUDA_SUCCESS)
    return r;
  if ((r = hostd__stream_lookup_enter(t, q->stream, &ts)) != CUDA_SUCCESS)
    return r;
  /* Host bytes live in this request or reply only: a graph must not keep them. */
  if ((q->skind == CALL_SIDE_HOST || q->dkind == CALL_SIDE_HOST) &&
      hostd__stream_capturing(t, ts))
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  src.host = (void *)(uintptr_t)q->bytes.p;
  if (q->dkind == CALL_SIDE_HOST) {
    if (wire_buf_reserve(out, total) != 0)
      return CUDA_ERROR_OUT_OF_MEMORY;
    dst.host = out->data + out->len;
  }
  r = hostd__gpu.array_copy(&src, &dst, q->width, q->height, q->depth, ts->handle, (int)q->async);
  if (r == CUDA_SUCCESS && q->dkind == CALL_SIDE_HOST)
    out->len += total;
  return r;
}

/* Destroys object h of kind k (OBJ_TEX, OBJ_SURF) on the GPU. */
static CUresult obj_gpu_del(uint64_t h, uint64_t k) {
  return k == OBJ_TEX ? hostd__gpu.tex_del(h) : hostd__gpu.surf_del(h);
}

/* Records the new object h of kind k as the tenant's; destroys it when it
 * cannot. */
static CUresult obj_keep(hostd_tenant_t *t, uint64_t h, uint64_t k) {
  if (u64map_put(&t->texs, h, k) == 0)
    return CUDA_SUCCESS;
  (void)obj_gpu_del(h, k);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

/* The resource of a texture: the tenant's array, or its linear memory. */
static CUresult tex_resource(const hostd_tenant_t *t, const call_tex_new_req_t *q,
                             CUDA_RESOURCE_DESC *res) {
  unsigned eb = hostd__array_elem_bytes(q->format);
  uint64_t n;
  memset(res, 0, sizeof(*res));
  res->resType = (CUresourcetype)q->rtype;
  switch (q->rtype) {
  case CU_RESOURCE_TYPE_ARRAY:
    res->res.array.hArray = (CUarray)(uintptr_t)q->res;
    return array_of(t, q->res) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
  case CU_RESOURCE_TYPE_LINEAR:
    if (!eb || !channels_ok(q->channels) || q->width == 0 || !hostd__owns(t, q->res, q->width))
      return CUDA_ERROR_INVALID_VALUE;
    res->res.linear.devPtr = q->res;
    res->res.linear.format = (CUarray_format)q->format;
    res->res.linear.numChannels = q->channels;
    res->res.linear.sizeInBytes = q->width;
    return CUDA_SUCCESS;
  case CU_RESOURCE_TYPE_PITCH2D:
    if (!eb || !channels_ok(q->channels) || q->width == 0 || q->height == 0 ||
        q->width > ARRAY_DIM_MAX || q->pitch < q->width * eb * q->channels ||
        __builtin_mul_overflow(q->pitch, q->height, &n) || !hostd__owns(t, q->res, n))
      return CUDA_ERROR_INVALID_VALUE;
    res->res.pitch2D.devPtr = q->res;
    res->res.pitch2D.format = (CUarray_format)q->format;
    res->res.pitch2D.numChannels = q->channels;
    res->res.pitch2D.width = q->width;
    res->res.pitch2D.height = q->height;
    res->res.pitch2D.pitchInBytes = q->pitch;
    return CUDA_SUCCESS;
  case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
    return CUDA_ERROR_NOT_SUPPORTED; /* mipmapped arrays are not offered */
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult hostd__exec_tex_new(hostd_tenant_t *t, wire_buf_t *out, const call_tex_new_req_t *q) {
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  CUDA_RESOURCE_VIEW_DESC view;
  uint64_t h = 0;
  CUresult r;
  if ((r = tex_resource(t, q, &res)) != CUDA_SUCCESS)
    return r;
  if (q->addr[0] > CU_TR_ADDRESS_MODE_BORDER || q->addr[1] > CU_TR_ADDRESS_MODE_BORDER ||
      q->addr[2] > CU_TR_ADDRESS_MODE_BORDER || q->filter > CU_TR_FILTER_MODE_LINEAR ||
      q->mip_filter > CU_TR_FILTER_MODE_LINEAR)
    return CUDA_ERROR_INVALID_VALUE;
  memset(&tex, 0, sizeof(tex));
  for (int i = 0; i < 3; i++)
    tex.addressMode[i] = (CUaddress_mode)q->addr[i];
  tex.filterMode = (CUfilter_mode)q->filter;
  tex.flags = q->flags;
  tex.maxAnisotropy = q->aniso;
  tex.mipmapFilterMode = (CUfilter_mode)q->mip_filter;
  tex.mipmapLevelBias = q->mip_bias;
  tex.minMipmapLevelClamp = q->min_clamp;
  tex.maxMipmapLevelClamp = q->max_clamp;
  memcpy(tex.borderColor, q->border, sizeof(tex.borderColor));
  memset(&view, 0, sizeof(view));
  view.format = (CUresourceViewFormat)q->v_format;
  view.width = q->v_width, view.height = q->v_height, view.depth = q->v_depth;
  view.firstMipmapLevel = q->v_first_mip, view.lastMipmapLevel = q->v_last_mip;
  view.firstLayer = q->v_first_layer, view.lastLayer = q->v_last_layer;
  if ((r = hostd__gpu.tex_new(&h, &res, &tex, q->has_view ? &view : NULL)) != CUDA_SUCCESS ||
      (r = obj_keep(t, h, OBJ_TEX)) != CUDA_SUCCESS)
    return r;
  call_tex_new_rep_t rep = {.tex = h};
  (void)call_tex_new_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

/* Destroys the tenant's object h of kind k (OBJ_TEX, OBJ_SURF). */
static CUresult obj_del(hostd_tenant_t *t, uint64_t h, uint64_t k) {
  uint64_t v;
  CUresult r;
  if (!h || !u64map_get(&t->texs, h, &v) || v != k)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = hostd__sched_tenant_flush(t->sched)) != CUDA_SUCCESS ||
      (r = obj_gpu_del(h, k)) != CUDA_SUCCESS)
    return r;
  u64map_del(&t->texs, h);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_tex_del(hostd_tenant_t *t, wire_buf_t *out, const call_tex_del_req_t *q) {
  (void)out;
  return obj_del(t, q->tex, OBJ_TEX);
}

CUresult hostd__exec_surf_new(hostd_tenant_t *t, wire_buf_t *out, const call_surf_new_req_t *q) {
  uint64_t h = 0;
  CUresult r;
  if (!array_of(t, q->array))
    return CUDA_ERROR_INVALID_HANDLE;
  if ((r = hostd__gpu.surf_new(&h, q->array)) != CUDA_SUCCESS ||
      (r = obj_keep(t, h, OBJ_SURF)) != CUDA_SUCCESS)
    return r;
  call_surf_new_rep_t rep = {.surf = h};
  (void)call_surf_new_rep_put(&rep, out);
  return CUDA_SUCCESS;
}

CUresult hostd__exec_surf_del(hostd_tenant_t *t, wire_buf_t *out, const call_surf_del_req_t *q) {
  (void)out;
  return obj_del(t, q->surf, OBJ_SURF);
}

void hostd__array_release(hostd_tenant_t *t, bool gpu) {
  for (size_t i = 0; gpu && i < t->texs.cap; i++) {
    uint64_t h = t->texs.keys[i];
    if (h)
      (void)obj_gpu_del(h, t->texs.vals[i]);
  }
  for (size_t i = 0; i < t->arrays.cap; i++) {
    tarray_t *a = (tarray_t *)(uintptr_t)t->arrays.vals[i];
    if (!t->arrays.keys[i])
      continue;
    if (gpu) /* the tenant's quota counters go with it */
      (void)hostd__gpu.array_del(t->arrays.keys[i]);
    free(a);
  }
  u64map_close(&t->texs);
  u64map_init(&t->texs);
  u64map_close(&t->arrays);
  u64map_init(&t->arrays);
}
