/* device.c: device queries and occupancy, answered from the connect snapshot.
 *
 * tallyd sends each device's name, UUID, memory size and every attribute
 * once, at hello (wire/call.def); cudart asks ~80 of them at start-up and
 * PyTorch polls some in hot paths, so none of these functions crosses the
 * wire (docs/decisions.md, D3).  Occupancy is computed here from the snapshot and
 * the function attributes that came with its module; the formula is the
 * CUDA occupancy calculator's (threads, registers, shared memory and block
 * limits per SM), without the per-architecture allocation granularities the
 * driver also applies, so it may round differently for exotic shapes.
 */
#include "guestlib/guest.h"

#include <stdio.h>
#include <string.h>

static const call_snapshot_t *dev_of(CUdevice d) {
  if (!guest__g.inited || d < 0 || d >= guest__g.ndev)
    return NULL;
  return &guest__g.dev[d];
}

GUEST_EXPORT CUresult cuDeviceGetCount(int *count) {
  if (!count)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  *count = guest__g.ndev;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (!device)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= guest__g.ndev)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  const call_snapshot_t *d = dev_of(dev);
  if (!name || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return guest__g.inited ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
  snprintf(name, (size_t)len, "%s", d->name);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  const call_snapshot_t *d = dev_of(dev);
  if (!uuid)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return guest__g.inited ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
  memcpy(uuid->bytes, d->uuid, 16);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
  return cuDeviceGetUuid_v2(uuid, dev);
}

GUEST_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  const call_snapshot_t *d = dev_of(dev);
  if (!bytes)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return guest__g.inited ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
  *bytes = d->total_mem;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
  size_t b = 0;
  CUresult r = cuDeviceTotalMem_v2(&b, dev);
  if (r == CUDA_SUCCESS)
    *bytes = b > 0xffffffffu ? 0xffffffffu : (unsigned int)b;
  return r;
}

/* Attributes run from 1 to CU_DEVICE_ATTRIBUTE_MAX - 1; the driver refuses
 * the rest with CUDA_ERROR_INVALID_VALUE (the H200's driver did, for 148 to
 * 159), though the snapshot has room beyond them. */
_Static_assert(CU_DEVICE_ATTRIBUTE_MAX <= CALL_ATTR_MAX, "snapshot attributes (wire/call.h)");
GUEST_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  const call_snapshot_t *d = dev_of(dev);
  if (!pi || (int)attrib < 1 || (int)attrib >= CU_DEVICE_ATTRIBUTE_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return guest__g.inited ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
  *pi = d->attr[attrib];
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
  CUresult r;
  if (!major || !minor)
    return CUDA_ERROR_INVALID_VALUE;
  r = cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  if (r == CUDA_SUCCESS)
    r = cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  return r;
}

GUEST_EXPORT CUresult cuDeviceGetProperties(CUdevprop *p, CUdevice dev) {
  const call_snapshot_t *d = dev_of(dev);
  if (!p)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return guest__g.inited ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
  memset(p, 0, sizeof(*p));
  p->maxThreadsPerBlock = d->attr[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
  p->maxThreadsDim[0] = d->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X];
  p->maxThreadsDim[1] = d->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y];
  p->maxThreadsDim[2] = d->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z];
  p->maxGridSize[0] = d->attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X];
  p->maxGridSize[1] = d->attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y];
  p->maxGridSize[2] = d->attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z];
  p->sharedMemPerBlock = d->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK];
  p->totalConstantMemory = d->attr[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY];
  p->SIMDWidth = d->attr[CU_DEVICE_ATTRIBUTE_WARP_SIZE];
  p->memPitch = d->attr[CU_DEVICE_ATTRIBUTE_MAX_PITCH];
  p->regsPerBlock = d->attr[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK];
  p->clockRate = d->attr[CU_DEVICE_ATTRIBUTE_CLOCK_RATE];
  p->textureAlign = d->attr[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT];
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  const call_snapshot_t *d = dev_of(dev);
  if (!pciBusId || len <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return guest__g.inited ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
  snprintf(pciBusId, (size_t)len, "%08x:%02x:%02x.0", d->attr[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID],
           d->attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID], d->attr[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID]);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId) {
  unsigned dom = 0, bus = 0, devno = 0;
  if (!dev || !pciBusId)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__g.inited)
    return CUDA_ERROR_NOT_INITIALIZED;
  if (sscanf(pciBusId, "%x:%x:%x", &dom, &bus, &devno) != 3) {
    dom = 0;
    if (sscanf(pciBusId, "%x:%x", &bus, &devno) != 2)
      return CUDA_ERROR_INVALID_VALUE;
  }
  for (int i = 0; i < guest__g.ndev; i++) {
    const int32_t *a = guest__g.dev[i].attr;
    if ((unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID] == dom &&
        (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] == bus &&
        (unsigned)a[CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID] == devno) {
      *dev = i;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_DEVICE;
}

GUEST_EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  if (!can)
    return CUDA_ERROR_INVALID_VALUE;
  if (!dev_of(dev) || !dev_of(peer))
    return guest__g.inited ? CUDA_ERROR_INVALID_DEVICE : CUDA_ERROR_NOT_INITIALIZED;
  *can = 0; /* peer access between tenants' views is not offered yet */
  return CUDA_SUCCESS;
}

/* ---- occupancy ---- */

/* f's record with the attributes occupancy reads.  A function may come
 * without some (a library's kernels are described without attributes, a
 * lazily loaded module function lacks those that need its load): asked
 * through cuFuncGetAttribute, whose first miss brings every attribute in
 * one request (FUNC_ATTRS; tallyd loads the function), all kept.  NULL
 * with *r set when f is unknown or an answer failed. */
static const guest_func_t *occupancy_func(CUfunction f, CUresult *r) {
  static const CUfunction_attribute need[] = {CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                              CU_FUNC_ATTRIBUTE_NUM_REGS,
                                              CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES};
  uint64_t h = (uint64_t)(uintptr_t)f;
  const guest_func_t *fn = guest__func_find(h);
  *r = CUDA_ERROR_INVALID_HANDLE;
  if (!fn)
    return NULL;
  for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
    int v;
    if (fn->attr_valid & (1u << need[i]))
      continue;
    if ((*r = cuFuncGetAttribute(&v, need[i], f)) != CUDA_SUCCESS)
      return NULL;
  }
  *r = CUDA_SUCCESS;
  return fn;
}

static int occupancy(const guest_func_t *f, int device, int block, size_t dyn_smem) {
  const call_snapshot_t *d = dev_of(device);
  int warp, warps, by_threads, by_blocks, by_regs, by_smem, n;
  long regs_per_block, smem;

  if (!d || block <= 0)
    return 0;
  warp = d->attr[CU_DEVICE_ATTRIBUTE_WARP_SIZE] > 0 ? d->attr[CU_DEVICE_ATTRIBUTE_WARP_SIZE] : 32;
  warps = (block + warp - 1) / warp;
  by_threads = d->attr[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR] / (warps * warp);
  by_blocks = d->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR];
  /* Registers are allocated per warp in units of 256 (all architectures since sm_50). */
  regs_per_block = (long)((f->attr[CU_FUNC_ATTRIBUTE_NUM_REGS] * warp + 255) / 256 * 256) * warps;
  by_regs =
      regs_per_block > 0
          ? (int)(d->attr[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR] / regs_per_block)
          : by_blocks;
  /* The driver reserves 1 KiB of shared memory per block on sm_80 and later. */
  smem = (long)f->attr[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES] + (long)dyn_smem + 1024;
  by_smem = (int)(d->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] / smem);
  n = by_threads;
  if (by_blocks < n)
    n = by_blocks;
  if (by_regs < n)
    n = by_regs;
  if (by_smem < n)
    n = by_smem;
  return n < 0 ? 0 : n;
}

GUEST_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *num, CUfunction f,
                                                                           int block,
                                                                           size_t dyn_smem,
                                                                           unsigned int flags) {
  const guest_func_t *fn;
  CUresult r;
  (void)flags;
  if (!num || block <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(fn = occupancy_func(f, &r)))
    return r;
  if (block > fn->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK]) {
    *num = 0;
    return CUDA_SUCCESS;
  }
  *num = occupancy(fn, guest__cur_device(), block, dyn_smem);
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *num, CUfunction f, int block,
                                                                  size_t dyn_smem) {
  return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(num, f, block, dyn_smem, 0);
}

GUEST_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *min_grid, int *block_out,
                                                                CUfunction f,
                                                                CUoccupancyB2DSize smem_of_block,
                                                                size_t dyn_smem, int limit,
                                                                unsigned int flags) {
  const guest_func_t *fn;
  const call_snapshot_t *d = dev_of(guest__cur_device());
  int best_block = 0, best_active = -1, max_block;
  CUresult r;
  (void)flags;
  if (!min_grid || !block_out)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!(fn = occupancy_func(f, &r)))
    return r;
  max_block = fn->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK];
  if (limit > 0 && limit < max_block)
    max_block = limit;
  for (int b = 32; b <= max_block; b += 32) {
    size_t smem = smem_of_block ? smem_of_block(b) : dyn_smem;
    int active = occupancy(fn, guest__cur_device(), b, smem) * b;
    if (active > best_active) {
      best_active = active;
      best_block = b;
    }
  }
  if (best_block == 0)
    return CUDA_ERROR_INVALID_VALUE;
  *block_out = best_block;
  *min_grid = best_active / best_block * d->attr[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT];
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block_out, CUfunction f,
                                                       CUoccupancyB2DSize smem_of_block,
                                                       size_t dyn_smem, int limit) {
  return cuOccupancyMaxPotentialBlockSizeWithFlags(min_grid, block_out, f, smem_of_block, dyn_smem,
                                                   limit, 0);
}

GUEST_EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *out, CUfunction f,
                                                              int nblocks, int block) {
  const guest_func_t *fn;
  const call_snapshot_t *d = dev_of(guest__cur_device());
  long per;
  CUresult r;
  if (!out || nblocks <= 0 || block <= 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!d)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!(fn = occupancy_func(f, &r)))
    return r;
  per = d->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] / nblocks - 1024 -
        fn->attr[CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES];
  if (per > d->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN])
    per = d->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN];
  *out = per > 0 ? (size_t)per : 0;
  return CUDA_SUCCESS;
}
