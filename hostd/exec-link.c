/* exec-link.c: a tenant's cuLinkComplete of several inputs (LINK).
 *
 * A link of one PTX or cubin input is the guest's own business (the image
 * is the input); several inputs, or ones that only a linker takes (objects,
 * libraries, LTO-IR), are linked here by the driver for the served device.
 * The inputs arrive as blobs (wire's have/put, kept in the module cache by
 * content id), so a second link of the same library sends no bytes.  The
 * linked image goes back to the guest, which hands it to its caller; the
 * caller then loads it with cuModuleLoadData like any image.  Nothing is
 * kept here: a link holds no driver resource once it returns.
 *
 * Checked before the backend sees a request: the record count against the
 * tail, each input type (0..5, CU_JIT_INPUT_CUBIN..NVVM), the reserved word
 * zero, and each input's bytes present in the cache.
 */
#include "hostd/tenant-int.h"
#include "hostd/guard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire-le.h"

/* One input's name in the driver's messages: "input-N". */
typedef char link_name_t[24];

/* The input records checked and their bytes copied out of the cache (it
 * keeps one image per thread: the next get may drop the last one). */
static CUresult gather(const call_link_req_t *q, hostd_link_input_t *in, link_name_t *names) {
  for (uint32_t i = 0; i < q->ninput; i++) {
    const uint8_t *rec = q->inputs.p + (size_t)i * CALL_LINK_INPUT_SIZE;
    uint32_t type = wire_le_rd32(rec + 8);
    const void *img;
    size_t len;
    void *copy;
    if (type >= CU_JIT_NUM_INPUT_TYPES || wire_le_rd32(rec + 12) != 0)
      return CUDA_ERROR_INVALID_VALUE;
    if (!(img = hostd__modcache_get(wire_le_rd64(rec), &len)))
      return CUDA_ERROR_FILE_NOT_FOUND; /* the guest must offer the blob first */
    if (!(copy = malloc(len ? len : 1)))
      return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(copy, img, len);
    snprintf(names[i], sizeof(names[i]), "input-%u", i);
    in[i] = (hostd_link_input_t){(int)type, copy, len, names[i]};
  }
  return CUDA_SUCCESS;
}

CUresult hostd__exec_link(hostd_tenant_t *t, wire_buf_t *out, const call_link_req_t *q) {
  hostd_link_input_t *in;
  link_name_t *names;
  call_link_rep_t rep;
  void *image = NULL;
  size_t len = 0;
  CUresult r;
  (void)t;

  if (q->ninput == 0 || q->ninput > CALL_LINK_INPUTS_MAX ||
      q->inputs.len != (size_t)q->ninput * CALL_LINK_INPUT_SIZE)
    return CUDA_ERROR_INVALID_VALUE;
  /* Per link, not per thread: links are rare, and tallyd has a thread per
   * tenant. */
  in = calloc(q->ninput, sizeof(*in));
  names = calloc(q->ninput, sizeof(*names));
  r = in && names ? gather(q, in, names) : CUDA_ERROR_OUT_OF_MEMORY;
  hostd__modcache_unpin();
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.link(in, q->ninput, &image, &len);
  for (uint32_t i = 0; in && i < q->ninput; i++)
    free((void *)in[i].data);
  free(in);
  free(names);
  if (r != CUDA_SUCCESS)
    return r;
  if (len > CALL_MAX_LEN - 8) {
    free(image);
    return CUDA_ERROR_OUT_OF_MEMORY; /* larger than one reply carries */
  }
  rep.image = (call_view_t){image, len};
  r = call_link_rep_put(&rep, out) < 0 ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
  free(image);
  return r;
}
