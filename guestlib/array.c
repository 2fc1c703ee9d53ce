/* array.c: CUDA arrays, copies into and out of them, texture and surface
 * objects, forwarded to tallyd (its array handlers).
 *
 * Arrays, texture and surface objects are made by tallyd and their handles
 * are the driver's own (docs/decisions.md, D2): a texture or surface object
 * is a 64-bit value the tenant's kernels receive as a parameter, so the
 * value returned here must be the one the driver reads.  What the
 * application described is kept here per handle (array descriptors, the
 * resource, texture and view descriptors of objects), which answers the
 * get-descriptor queries locally.
 *
 * Copies with an array on either side (cuMemcpy2D/3D and their async
 * forms, cuMemcpy{HtoA,AtoH,AtoD,DtoA,AtoA}) are ARRAY_COPY requests of a
 * box: between an array and device memory or another array in one request
 * (fire-and-forget when async); with host memory the box is cut into slabs
 * of whole rows (or pieces of a row) of at most CALL_CHUNK bytes, packed
 * here and carried in the request (to an array) or the reply (from one),
 * each a round trip.  Mipmapped arrays are not offered (stubs).
 */
#include "guestlib/guest.h"
#include "wire/u64map.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- local tables: handle -> malloc'd description (guarded by lock) ---- */

typedef struct tex_desc {
  CUDA_RESOURCE_DESC res;
  CUDA_TEXTURE_DESC tex;
  CUDA_RESOURCE_VIEW_DESC view;
  bool has_view, surf;
} tex_desc_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static u64map_t arrays; /* CUarray -> CUDA_ARRAY3D_DESCRIPTOR* */
static u64map_t objs;   /* texture or surface object -> tex_desc_t* */

static int table_put(u64map_t *m, uint64_t h, void *v) {
  int rc;
  pthread_mutex_lock(&lock);
  rc = u64map_put(m, h, (uint64_t)(uintptr_t)v);
  pthread_mutex_unlock(&lock);
  return rc;
}

/* Copies h's entry (size bytes) to out; false when h is unknown. */
static bool table_get(u64map_t *m, uint64_t h, void *out, size_t size) {
  uint64_t v;
  bool ok;
  pthread_mutex_lock(&lock);
  ok = h && u64map_get(m, h, &v);
  if (ok)
    memcpy(out, (void *)(uintptr_t)v, size);
  pthread_mutex_unlock(&lock);
  return ok;
}

static void table_del(u64map_t *m, uint64_t h) {
  uint64_t v;
  pthread_mutex_lock(&lock);
  if (u64map_get(m, h, &v)) {
    free((void *)(uintptr_t)v);
    u64map_del(m, h);
  }
  pthread_mutex_unlock(&lock);
}

/* ---- arrays ---- */

static CUresult array_new(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  call_array_new_rep_t a = {0};
  CUDA_ARRAY3D_DESCRIPTOR *keep;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!out || !d)
    return CUDA_ERROR_INVALID_VALUE;
  call_array_new_req_t q = {.width = d->Width,
                            .height = d->Height,
                            .depth = d->Depth,
                            .format = (uint32_t)d->Format,
                            .channels = d->NumChannels,
                            .flags = d->Flags};
  if ((r = guest__rpc(CALL_OP_ARRAY_NEW, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  if (!(keep = malloc(sizeof(*keep))) || table_put(&arrays, a.array, keep) != 0) {
    call_array_del_req_t f = {.array = a.array};
    free(keep);
    (void)guest__rpc(CALL_OP_ARRAY_DEL, 0, &f, NULL);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *keep = *d;
  *out = (CUarray)(uintptr_t)a.array;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuArrayCreate_v2(CUarray *out, const CUDA_ARRAY_DESCRIPTOR *d) {
  if (!d)
    return CUDA_ERROR_INVALID_VALUE;
  CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = d->Width,
                                .Height = d->Height,
                                .Format = d->Format,
                                .NumChannels = d->NumChannels};
  return array_new(out, &d3);
}

GUEST_EXPORT CUresult cuArray3DCreate_v2(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  return array_new(out, d);
}

GUEST_EXPORT CUresult cuArrayDestroy(CUarray a) {
  call_array_del_req_t q = {.array = (uint64_t)(uintptr_t)a};
  CUresult r = guest__ready();
  if (r == CUDA_SUCCESS && (r = guest__rpc(CALL_OP_ARRAY_DEL, 0, &q, NULL)) == CUDA_SUCCESS)
    table_del(&arrays, q.array);
  return r;
}

GUEST_EXPORT CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *out, CUarray a) {
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  return table_get(&arrays, (uint64_t)(uintptr_t)a, out, sizeof(*out))
             ? CUDA_SUCCESS
             : CUDA_ERROR_INVALID_HANDLE;
}

GUEST_EXPORT CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *out, CUarray a) {
  CUDA_ARRAY3D_DESCRIPTOR d;
  if (!out)
    return CUDA_ERROR_INVALID_VALUE;
  if (!table_get(&arrays, (uint64_t)(uintptr_t)a, &d, sizeof(d)))
    return CUDA_ERROR_INVALID_HANDLE;
  *out = (CUDA_ARRAY_DESCRIPTOR){
      .Width = d.Width, .Height = d.Height, .Format = d.Format, .NumChannels = d.NumChannels};
  return CUDA_SUCCESS;
}

/* ---- copies ---- */

/* One side of a copy as the application gave it. */
typedef struct side {
  uint32_t kind; /* CALL_SIDE_* */
  uint64_t handle;   /* array or device address */
  uint8_t *host;     /* HOST */
  uint64_t x, y, z, pitch, height;
} side_t;

static side_t side_of(CUmemorytype t, const void *host, CUdeviceptr dev, CUarray arr, size_t x,
                      size_t y, size_t z, size_t pitch, size_t height, size_t w, size_t h) {
  side_t s = {.x = x, .y = y, .z = z, .pitch = pitch ? pitch : w, .height = height ? height : h};
  guest_mem_kind_t k;
  if (t == CU_MEMORYTYPE_UNIFIED) { /* the address is in the device field either way */
    host = (const void *)(uintptr_t)dev;
    t = guest__mem_find(dev, NULL, NULL, &k) && k == GUEST_MEM_DEVICE ? CU_MEMORYTYPE_DEVICE
                                                                      : CU_MEMORYTYPE_HOST;
  }
  if (t == CU_MEMORYTYPE_ARRAY)
    s.kind = CALL_SIDE_ARRAY, s.handle = (uint64_t)(uintptr_t)arr;
  else if (t == CU_MEMORYTYPE_DEVICE)
    s.kind = CALL_SIDE_DEVICE, s.handle = dev;
  else
    s.kind = CALL_SIDE_HOST, s.host = (uint8_t *)(uintptr_t)host;
  return s;
}

static void req_side(call_array_copy_req_t *q, const side_t *s, bool dst) {
  uint64_t pitch = s->kind == CALL_SIDE_DEVICE ? s->pitch : 0;
  uint64_t height = s->kind == CALL_SIDE_DEVICE ? s->height : 0;
  if (dst) {
    q->dkind = s->kind, q->dst = s->handle, q->dx = s->x, q->dy = s->y, q->dz = s->z;
    q->dpitch = pitch, q->dheight = height;
  } else {
    q->skind = s->kind, q->src = s->handle, q->sx = s->x, q->sy = s->y, q->sz = s->z;
    q->spitch = pitch, q->sheight = height;
  }
}

/* Address of host row (y, z) of side s, at byte x0 of the box. */
static uint8_t *host_row(const side_t *s, uint64_t x0, uint64_t y, uint64_t z) {
  return s->host + ((s->z + z) * s->height + s->y + y) * s->pitch + s->x + x0;
}

/* One piece of a copy with a host side: box [x0, x0+w) x [y0, y0+h) of
 * slice z, packed into buf. */
static CUresult host_piece(const side_t *src, const side_t *dst, uint64_t x0, uint64_t w,
                           uint64_t y0, uint64_t h, uint64_t z, uint64_t s, uint8_t *buf) {
  call_array_copy_req_t q = {.width = w, .height = h, .depth = 1, .stream = s};
  const side_t *host = src->kind == CALL_SIDE_HOST ? src : dst;
  side_t other = src->kind == CALL_SIDE_HOST ? *dst : *src;
  size_t got = 0;
  CUresult res = CUDA_SUCCESS;
  int rc;
  other.x += x0, other.y += y0, other.z += z;
  req_side(&q, &other, host == src);
  if (host == src) {
    for (uint64_t y = 0; y < h; y++)
      memcpy(buf + y * w, host_row(host, x0, y0 + y, z), w);
    q.skind = CALL_SIDE_HOST;
    q.bytes = (call_view_t){buf, w * h};
    rc = guest__call(CALL_OP_ARRAY_COPY, CALL_SYNCPOINT, &q, &res, NULL, 0, NULL, NULL);
  } else {
    q.dkind = CALL_SIDE_HOST;
    rc = guest__call(CALL_OP_ARRAY_COPY, CALL_SYNCPOINT, &q, &res, buf, w * h, &got, NULL);
  }
  if (rc)
    return guest__cu_error(rc);
  if (res != CUDA_SUCCESS)
    return res;
  if (host == dst) {
    if (got != w * h)
      return guest__cu_error(-EPROTO);
    for (uint64_t y = 0; y < h; y++)
      memcpy(host_row(host, x0, y0 + y, z), buf + y * w, w);
  }
  return CUDA_SUCCESS;
}

static CUresult host_copy(const side_t *src, const side_t *dst, uint64_t w, uint64_t h,
                          uint64_t d, uint64_t s) {
  uint64_t pw = w < CALL_CHUNK ? w : CALL_CHUNK, rows = CALL_CHUNK / pw;
  uint8_t *buf = malloc(pw * (rows < h ? rows : h));
  CUresult r = buf ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  for (uint64_t z = 0; z < d && r == CUDA_SUCCESS; z++)
    for (uint64_t y = 0; y < h && r == CUDA_SUCCESS; y += rows)
      for (uint64_t x = 0; x < w && r == CUDA_SUCCESS; x += pw)
        r = host_piece(src, dst, x, w - x < pw ? w - x : pw, y, h - y < rows ? h - y : rows, z, s,
                       buf);
  free(buf);
  return r;
}

static CUresult array_copy(const side_t *src, const side_t *dst, uint64_t w, uint64_t h,
                           uint64_t d, uint64_t s, int async) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (w == 0 || h == 0 || d == 0)
    return CUDA_SUCCESS;
  if (src->kind == CALL_SIDE_HOST && dst->kind == CALL_SIDE_HOST)
    return CUDA_ERROR_INVALID_VALUE;
  if (src->kind == CALL_SIDE_HOST || dst->kind == CALL_SIDE_HOST)
    return host_copy(src, dst, w, h, d, s);
  call_array_copy_req_t q = {
      .width = w, .height = h, .depth = d, .stream = s, .async = (uint32_t)async};
  req_side(&q, src, false);
  req_side(&q, dst, true);
  if (async) {
    return guest__post_cu(CALL_OP_ARRAY_COPY, &q);
  }
  /* Its reply may carry bytes (a tail), so guest__rpc cannot take it. */
  CUresult res = CUDA_SUCCESS;
  int rc = guest__call(CALL_OP_ARRAY_COPY, CALL_SYNCPOINT, &q, &res, NULL, 0, NULL, NULL);
  return rc ? guest__cu_error(rc) : res;
}

CUresult guest__array_copy3d(const CUDA_MEMCPY3D *c, uint64_t s, int async) {
  side_t src = side_of(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcArray, c->srcXInBytes,
                       c->srcY, c->srcZ, c->srcPitch, c->srcHeight, c->WidthInBytes, c->Height);
  side_t dst = side_of(c->dstMemoryType, c->dstHost, c->dstDevice, c->dstArray, c->dstXInBytes,
                       c->dstY, c->dstZ, c->dstPitch, c->dstHeight, c->WidthInBytes, c->Height);
  return array_copy(&src, &dst, c->WidthInBytes, c->Height, c->Depth ? c->Depth : 1, s, async);
}

/* The 1-D forms: n bytes at a byte offset of an array (its first row). */
static side_t arr1(CUarray a, size_t off, size_t n) {
  return (side_t){.kind = CALL_SIDE_ARRAY, .handle = (uint64_t)(uintptr_t)a, .x = off, .pitch = n};
}
static side_t host1(const void *p, size_t n) {
  return (side_t){.kind = CALL_SIDE_HOST, .host = (uint8_t *)(uintptr_t)p, .pitch = n, .height = 1};
}
static side_t dev1(CUdeviceptr p, size_t n) {
  return (side_t){.kind = CALL_SIDE_DEVICE, .handle = p, .pitch = n, .height = 1};
}
static CUresult copy1(side_t src, side_t dst, size_t n, uint64_t s, int async) {
  return array_copy(&src, &dst, n, 1, 1, s, async);
}

#define HTOA(pt) copy1(host1(src, n), arr1(dst, off, n), n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyHtoA_v2, (CUarray dst, size_t off, const void *src, size_t n), HTOA)
#define ATOH(pt) copy1(arr1(src, off, n), host1(dst, n), n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyAtoH_v2, (void *dst, CUarray src, size_t off, size_t n), ATOH)
#define ATOD(pt) copy1(arr1(src, off, n), dev1(dst, n), n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyAtoD_v2, (CUdeviceptr dst, CUarray src, size_t off, size_t n), ATOD)
#define DTOA(pt) copy1(dev1(src, n), arr1(dst, off, n), n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyDtoA_v2, (CUarray dst, size_t off, CUdeviceptr src, size_t n), DTOA)
#define ATOA(pt) copy1(arr1(src, soff, n), arr1(dst, doff, n), n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyAtoA_v2, (CUarray dst, size_t doff, CUarray src, size_t soff, size_t n), ATOA)
#define HTOAA(pt) copy1(host1(src, n), arr1(dst, off, n), n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpyHtoAAsync_v2, (CUarray dst, size_t off, const void *src, size_t n, CUstream s),
           HTOAA)
#define ATOHA(pt) copy1(arr1(src, off, n), host1(dst, n), n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpyAtoHAsync_v2, (void *dst, CUarray src, size_t off, size_t n, CUstream s), ATOHA)

/* ---- texture and surface objects ---- */

static CUresult tex_req(call_tex_new_req_t *q, const CUDA_RESOURCE_DESC *res,
                        const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view) {
  static int mip_logged;
  q->rtype = (uint32_t)res->resType;
  switch (res->resType) {
  case CU_RESOURCE_TYPE_ARRAY:
    q->res = (uint64_t)(uintptr_t)res->res.array.hArray;
    break;
  case CU_RESOURCE_TYPE_LINEAR:
    q->res = res->res.linear.devPtr, q->format = (uint32_t)res->res.linear.format;
    q->channels = res->res.linear.numChannels, q->width = res->res.linear.sizeInBytes;
    break;
  case CU_RESOURCE_TYPE_PITCH2D:
    q->res = res->res.pitch2D.devPtr, q->format = (uint32_t)res->res.pitch2D.format;
    q->channels = res->res.pitch2D.numChannels, q->width = res->res.pitch2D.width;
    q->height = res->res.pitch2D.height, q->pitch = res->res.pitch2D.pitchInBytes;
    break;
  case CU_RESOURCE_TYPE_MIPMAPPED_ARRAY:
    return guest__unsupported("a texture over a mipmapped array", &mip_logged);
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (int i = 0; tex && i < 3; i++)
    q->addr[i] = (uint32_t)tex->addressMode[i];
  if (tex) {
    q->filter = (uint32_t)tex->filterMode, q->flags = tex->flags;
    q->aniso = tex->maxAnisotropy, q->mip_filter = (uint32_t)tex->mipmapFilterMode;
    q->mip_bias = tex->mipmapLevelBias, q->min_clamp = tex->minMipmapLevelClamp;
    q->max_clamp = tex->maxMipmapLevelClamp;
    memcpy(q->border, tex->borderColor, sizeof(q->border));
  }
  if (view) {
    q->has_view = 1, q->v_format = (uint32_t)view->format;
    q->v_width = view->width, q->v_height = view->height, q->v_depth = view->depth;
    q->v_first_mip = view->firstMipmapLevel, q->v_last_mip = view->lastMipmapLevel;
    q->v_first_layer = view->firstLayer, q->v_last_layer = view->lastLayer;
  }
  return CUDA_SUCCESS;
}

/* Records what made object h; on failure destroys it (op TEX_DEL / SURF_DEL). */
static CUresult obj_keep(uint64_t h, const tex_desc_t *d, uint32_t del_op) {
  tex_desc_t *keep = malloc(sizeof(*keep));
  if (keep && table_put(&objs, h, keep) == 0) {
    *keep = *d;
    return CUDA_SUCCESS;
  }
  free(keep);
  call_tex_del_req_t td = {.tex = h};
  call_surf_del_req_t sd = {.surf = h};
  (void)guest__rpc(del_op, 0, del_op == CALL_OP_TEX_DEL ? (const void *)&td : (const void *)&sd,
                   NULL);
  return CUDA_ERROR_OUT_OF_MEMORY;
}

GUEST_EXPORT CUresult cuTexObjectCreate(CUtexObject *out, const CUDA_RESOURCE_DESC *res,
                                        const CUDA_TEXTURE_DESC *tex,
                                        const CUDA_RESOURCE_VIEW_DESC *view) {
  call_tex_new_req_t q;
  call_tex_new_rep_t a = {0};
  tex_desc_t d;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!out || !res || !tex)
    return CUDA_ERROR_INVALID_VALUE;
  memset(&q, 0, sizeof(q));
  if ((r = tex_req(&q, res, tex, view)) != CUDA_SUCCESS ||
      (r = guest__rpc(CALL_OP_TEX_NEW, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  memset(&d, 0, sizeof(d));
  d.res = *res, d.tex = *tex, d.has_view = view != NULL;
  if (view)
    d.view = *view;
  if ((r = obj_keep(a.tex, &d, CALL_OP_TEX_DEL)) == CUDA_SUCCESS)
    *out = (CUtexObject)a.tex;
  return r;
}

GUEST_EXPORT CUresult cuTexObjectDestroy(CUtexObject t) {
  call_tex_del_req_t q = {.tex = t};
  CUresult r = guest__ready();
  if (r == CUDA_SUCCESS && (r = guest__rpc(CALL_OP_TEX_DEL, 0, &q, NULL)) == CUDA_SUCCESS)
    table_del(&objs, t);
  return r;
}

/* The description of object h (a texture unless surf). */
static CUresult obj_get(uint64_t h, bool surf, tex_desc_t *d) {
  return table_get(&objs, h, d, sizeof(*d)) && d->surf == surf ? CUDA_SUCCESS
                                                                 : CUDA_ERROR_INVALID_VALUE;
}

GUEST_EXPORT CUresult cuTexObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUtexObject t) {
  tex_desc_t d;
  CUresult r = out ? obj_get(t, false, &d) : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS)
    *out = d.res;
  return r;
}

GUEST_EXPORT CUresult cuTexObjectGetTextureDesc(CUDA_TEXTURE_DESC *out, CUtexObject t) {
  tex_desc_t d;
  CUresult r = out ? obj_get(t, false, &d) : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS)
    *out = d.tex;
  return r;
}

GUEST_EXPORT CUresult cuTexObjectGetResourceViewDesc(CUDA_RESOURCE_VIEW_DESC *out, CUtexObject t) {
  tex_desc_t d;
  CUresult r = out ? obj_get(t, false, &d) : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && !d.has_view)
    r = CUDA_ERROR_INVALID_VALUE; /* made without a view */
  if (r == CUDA_SUCCESS)
    *out = d.view;
  return r;
}

GUEST_EXPORT CUresult cuSurfObjectCreate(CUsurfObject *out, const CUDA_RESOURCE_DESC *res) {
  call_surf_new_rep_t a = {0};
  tex_desc_t d;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!out || !res || res->resType != CU_RESOURCE_TYPE_ARRAY)
    return CUDA_ERROR_INVALID_VALUE;
  call_surf_new_req_t q = {.array = (uint64_t)(uintptr_t)res->res.array.hArray};
  if ((r = guest__rpc(CALL_OP_SURF_NEW, 0, &q, &a)) != CUDA_SUCCESS)
    return r;
  memset(&d, 0, sizeof(d));
  d.res = *res, d.surf = true;
  if ((r = obj_keep(a.surf, &d, CALL_OP_SURF_DEL)) == CUDA_SUCCESS)
    *out = (CUsurfObject)a.surf;
  return r;
}

GUEST_EXPORT CUresult cuSurfObjectDestroy(CUsurfObject sf) {
  call_surf_del_req_t q = {.surf = sf};
  CUresult r = guest__ready();
  if (r == CUDA_SUCCESS && (r = guest__rpc(CALL_OP_SURF_DEL, 0, &q, NULL)) == CUDA_SUCCESS)
    table_del(&objs, sf);
  return r;
}

GUEST_EXPORT CUresult cuSurfObjectGetResourceDesc(CUDA_RESOURCE_DESC *out, CUsurfObject sf) {
  tex_desc_t d;
  CUresult r = out ? obj_get(sf, true, &d) : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS)
    *out = d.res;
  return r;
}
