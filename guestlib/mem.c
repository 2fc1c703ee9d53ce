/* mem.c: memory: allocation, pinned host memory, copies, memsets, pointers.
 *
 * Device memory is allocated by tallyd and its address is the real one
 * (identity-mapped, docs/decisions.md, D2); the guest records each allocation so
 * pointer attributes and cuMemcpy's direction are answered locally.
 *
 * Pinned host memory (cuMemHostAlloc, cuMemAllocHost) over shared memory is
 * a memfd mapped here and handed to tallyd (wire_conn_send_fd, tag = its
 * address here), which maps it too (at the same address when it can) and
 * registers it with the driver.  A copy whose host side lies entirely in
 * such an allocation sends only (tag, offset, length): PINNED_COPY, done by
 * the daemon as real DMA on the stream, so async copies read and write the
 * host buffer when they execute, as in CUDA.  Over TCP (or if sharing
 * fails) pinned memory is plain memory of this process; a memset or copy
 * that names it where the device side belongs (natively valid by unified
 * addressing) is done here after synchronising its stream (host_only).
 *
 * Other copies carry their bytes in the request (H2D) or the reply (D2H), cut into
 * CALL_CHUNK pieces.  A small asynchronous H2D copy or memset is fire-
 * and-forget; larger ones and every D2H copy take a round trip per chunk (the
 * bytes must be in the application's buffer when the call or the stream
 * synchronisation returns, and a round trip is the simplest way to know).
 * 2D/3D copies between host and linear device memory are split into rows;
 * those with a CUDA array on either side go to array.c.  Per-thread-default-stream variants (_ptds,
 * _ptsz) differ only in what stream 0 means (guest__stream).
 */
#include "guestlib/guest.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* ---- allocation ---- */

CUresult guest__dev_alloc(uint64_t *ptr, size_t size) {
  call_mem_alloc_req_t q = {.size = size};
  call_mem_alloc_rep_t a = {0};
  CUresult r = guest__rpc(CALL_OP_MEM_ALLOC, 0, &q, &a);
  if (r != CUDA_SUCCESS)
    return r;
  if (guest__mem_add(a.ptr, size, GUEST_MEM_DEVICE, 0) != 0) {
    call_mem_free_req_t f = {.ptr = a.ptr};
    (void)guest__rpc(CALL_OP_MEM_FREE, 0, &f, NULL);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *ptr = a.ptr;
  return CUDA_SUCCESS;
}

CUresult guest__dev_free(uint64_t ptr) {
  call_mem_free_req_t q = {.ptr = ptr};
  CUresult r = guest__rpc(CALL_OP_MEM_FREE, CALL_SYNCPOINT, &q, NULL);
  if (r == CUDA_SUCCESS)
    (void)guest__mem_del(ptr, GUEST_MEM_DEVICE, NULL);
  return r;
}

GUEST_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t size) {
  uint64_t p;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!dptr || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = guest__dev_alloc(&p, size)) == CUDA_SUCCESS)
    *dptr = (CUdeviceptr)p;
  return r;
}

GUEST_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                         size_t height, unsigned int elem) {
  /* CUDA pitches rows to the texture pitch alignment (512 B on Hopper). */
  size_t align = 512, pw;
  CUresult r;
  if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  pw = (width + align - 1) / align * align;
  r = cuMemAlloc_v2(dptr, pw * height);
  if (r == CUDA_SUCCESS)
    *pitch = pw;
  return r;
}

GUEST_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  return dptr == 0 ? CUDA_SUCCESS : guest__dev_free(dptr);
}

GUEST_EXPORT CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b) {
  call_mem_info_req_t q;
  call_mem_info_rep_t out;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!free_b || !total_b)
    return CUDA_ERROR_INVALID_VALUE;
  r = guest__rpc(CALL_OP_MEM_INFO, 0, &q, &out);
  if (r == CUDA_SUCCESS) {
    *free_b = out.free_b;
    *total_b = out.total_b;
  }
  return r;
}

GUEST_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  uint64_t b, s;
  guest_mem_kind_t k;
  if (!guest__mem_find(p, &b, &s, &k) || k != GUEST_MEM_DEVICE)
    return CUDA_ERROR_NOT_FOUND;
  if (base)
    *base = b;
  if (size)
    *size = s;
  return CUDA_SUCCESS;
}

static void shared_forget(void *p) {
  call_pinned_free_req_t f = {.tag = (uint64_t)(uintptr_t)p};
  (void)guest__rpc(CALL_OP_PINNED_FREE, 0, &f, NULL);
}

/* A page-aligned address at random in [2^44, 2^46): free in tallyd too,
 * almost surely. */
static void *random_hint(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
    r = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&r;
  return (void *)(uintptr_t)(((1ull << 44) + r % (3ull << 44)) & ~(uint64_t)0xfffff);
}

/* tallyd mapped memfd fd (here at p) elsewhere: most often p is the
 * address of this tenant's last free, whose mapping tallyd is still
 * releasing, or an address tallyd's own mappings happen to hold.  First
 * one more try where the kernel puts it (p kept meanwhile, so this one
 * differs), then a few at random addresses; the first mapping tallyd has
 * at the same address wins.  Returns where the memory is here, *rc what
 * tallyd said of it. */
static void *shared_again(int fd, void *p, size_t size, int *rc) {
  for (int attempt = 0; attempt < 4; attempt++) {
    void *want = attempt ? random_hint() : NULL, *q;
    int r;
    q = mmap(want, size, PROT_READ | PROT_WRITE, MAP_SHARED | (want ? MAP_FIXED_NOREPLACE : 0),
             fd, 0);
    if (q == MAP_FAILED)
      continue;
    if (want && q != want) { /* a kernel without MAP_FIXED_NOREPLACE took it as a hint */
      munmap(q, size);
      continue;
    }
    if ((r = guest__send_fd(fd, (uint64_t)(uintptr_t)q)) == 0) {
      shared_forget(p);
      munmap(p, size);
      *rc = 0;
      return q;
    }
    if (r >= 0)
      shared_forget(q);
    munmap(q, size);
    if (r < 0)
      break;
  }
  return p;
}

/* A memfd of size bytes mapped here and shared with tallyd; NULL when
 * sharing is not possible (TCP, no memfd, the daemon refused). */
void *guest__shared_alloc(size_t size, unsigned *flags) {
  void *p;
  int fd, rc;
  if (flags)
    *flags = 0;
  if (!guest__chan_shm())
    return NULL;
  fd = memfd_create("tally-pinned", MFD_CLOEXEC);
  if (fd < 0)
    return NULL;
  if (ftruncate(fd, (off_t)size) != 0) {
    close(fd);
    return NULL;
  }
  p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return NULL;
  }
  rc = guest__send_fd(fd, (uint64_t)(uintptr_t)p);
  if (rc == CALL_FD_ELSEWHERE)
    p = shared_again(fd, p, size, &rc);
  close(fd); /* the daemon has its own copy; the mapping keeps ours alive */
  if (rc < 0) {
    if (guest__debug())
      guest__log("sharing %zu bytes of pinned memory failed (%d): plain memory", size, rc);
    munmap(p, size);
    return NULL;
  }
  if (flags)
    *flags = GUEST_HOST_SHARED | (rc == CALL_FD_ELSEWHERE ? GUEST_HOST_ELSEWHERE : 0);
  return p;
}

GUEST_EXPORT CUresult cuMemHostAlloc(void **pp, size_t size, unsigned int flags) {
  void *p;
  unsigned shared = 0;
  long page = sysconf(_SC_PAGESIZE);
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!pp || size == 0)
    return CUDA_ERROR_INVALID_VALUE;
  size = (size + (size_t)page - 1) / (size_t)page * (size_t)page;
  p = guest__shared_alloc(size, &shared);
  if (!p)
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (guest__mem_add((uint64_t)(uintptr_t)p, size, GUEST_MEM_HOST, flags | shared) != 0) {
    if (shared)
      shared_forget(p);
    munmap(p, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *pp = p;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t size) {
  return cuMemHostAlloc(pp, size, 0);
}

GUEST_EXPORT CUresult cuMemFreeHost(void *p) {
  uint64_t size = 0, base, tag = (uint64_t)(uintptr_t)p;
  unsigned flags = 0;
  if (!guest__mem_find_host(tag, &base, &size, &flags) || base != tag ||
      (flags & GUEST_HOST_REGISTERED))
    return CUDA_ERROR_INVALID_VALUE;
  guest__mirror_forget(tag);
  if (flags & GUEST_HOST_SHARED) {
    /* The daemon waits for this tenant's copies, then unmaps its side. */
    call_pinned_free_req_t f = {.tag = tag};
    CUresult r = guest__rpc(CALL_OP_PINNED_FREE, 0, &f, NULL);
    if (r != CUDA_SUCCESS && guest__debug())
      guest__log("tallyd could not free shared pinned memory %p: %d", p, (int)r);
  }
  if (guest__mem_del(tag, GUEST_MEM_HOST, &size) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  munmap(p, size);
  return CUDA_SUCCESS;
}

/* Mapped pinned memory has one address on both sides (tallyd maps the
 * memfd at the guest's address when that range is free in the daemon), as
 * unified addressing gives natively. */
GUEST_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *d, void *p, unsigned int flags) {
  uint64_t base, size;
  unsigned fl;
  if (!d || flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__mem_find_host((uint64_t)(uintptr_t)p, &base, &size, &fl))
    return CUDA_ERROR_INVALID_VALUE;
  *d = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemHostGetFlags(unsigned int *flags, void *p) {
  uint64_t base;
  guest_mem_kind_t k;
  if (!flags)
    return CUDA_ERROR_INVALID_VALUE;
  if (!guest__mem_find((uint64_t)(uintptr_t)p, &base, NULL, &k) || k != GUEST_MEM_HOST)
    return CUDA_ERROR_INVALID_VALUE;
  *flags = 0;
  return CUDA_SUCCESS;
}

/* Registration pins pages for DMA.  Over shared memory the range's whole
 * pages are moved onto memory tallyd maps and registers (hostreg.c), so
 * copies name them as they name cuMemHostAlloc buffers; otherwise (TCP,
 * memory that cannot move) registering only makes the range known as host
 * memory, and copies carry its bytes. */
GUEST_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t size, unsigned int flags) {
  uint64_t b = (uint64_t)(uintptr_t)p, lo = 0, hi = 0;
  unsigned how = 0,
           fl = (flags & ~(GUEST_HOST_SHARED | GUEST_HOST_INTERIOR | GUEST_HOST_ELSEWHERE)) |
                GUEST_HOST_REGISTERED;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (!p || size == 0 || size > UINT64_MAX - b)
    return CUDA_ERROR_INVALID_VALUE;
  if (guest__mem_find(b, NULL, NULL, NULL) || guest__mem_find(b + size - 1, NULL, NULL, NULL))
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (!(flags & CU_MEMHOSTREGISTER_IOMEMORY) &&
      guest__hostreg_share(b, size, &lo, &hi, &how) == 0)
    fl |= lo == b && hi == b + size ? how : GUEST_HOST_INTERIOR;
  if (guest__mem_add(b, size, GUEST_MEM_HOST, fl) != 0) {
    if (hi)
      guest__hostreg_unshare(b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

GUEST_EXPORT CUresult cuMemHostUnregister(void *p) {
  uint64_t b = (uint64_t)(uintptr_t)p, base, size;
  unsigned flags;
  if (!guest__mem_find_host(b, &base, &size, &flags) || base != b ||
      !(flags & GUEST_HOST_REGISTERED))
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  guest__mirror_forget(b);
  if (flags & (GUEST_HOST_SHARED | GUEST_HOST_INTERIOR))
    guest__hostreg_unshare(b);
  return guest__mem_del(b, GUEST_MEM_HOST, NULL) == 0 ? CUDA_SUCCESS
                                                      : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* ---- copies ---- */

static CUresult htod_sent(uint64_t dst, const void *src, size_t n, uint64_t s, int async);
static CUresult dtoh_sent(void *dst, uint64_t src, size_t n, uint64_t s);

/* One PINNED_COPY: n bytes between dev and offset off of the shared
 * memory tagged tag; dir 0 is to the device. */
static CUresult pinned_one(uint64_t dev, uint64_t tag, uint64_t off, size_t n, uint64_t s, int dir,
                           int async) {
  call_pinned_copy_req_t q = {.dev = dev,
                              .tag = tag,
                              .off = off,
                              .len = n,
                              .stream = s,
                              .dir = (uint32_t)dir,
                              .async = (uint32_t)async};
  if (async)
    return guest__post_cu(CALL_OP_PINNED_COPY, &q);
  return guest__rpc(CALL_OP_PINNED_COPY, CALL_SYNCPOINT, &q, NULL);
}

/* A copy inside a registration whose whole pages [lo, hi) alone are shared
 * (hostreg.c): the part on them by PINNED_COPY, the ends with their bytes.
 * The ends go first when copying to the host (their round trips complete
 * before the shared part is queued, which an asynchronous copy leaves in
 * flight), last to the device (posted behind it on the stream). */
static CUresult interior_copy(uint64_t dev, uint64_t h, size_t n, uint64_t lo, uint64_t hi,
                              uint64_t s, int dir, int async) {
  uint64_t a = h > lo ? h : lo, e = h + n < hi ? h + n : hi;
  size_t head = (size_t)(a - h), tail = (size_t)(h + n - e);
  uint8_t *p = (uint8_t *)(uintptr_t)h;
  CUresult r = CUDA_SUCCESS;
  if (dir == 1) {
    if (head && (r = dtoh_sent(p, dev, head, s)) != CUDA_SUCCESS)
      return r;
    if (tail && (r = dtoh_sent(p + (n - tail), dev + (n - tail), tail, s)) != CUDA_SUCCESS)
      return r;
    return pinned_one(dev + head, lo, a - lo, (size_t)(e - a), s, 1, async);
  }
  if (head && (r = htod_sent(dev, p, head, s, async)) != CUDA_SUCCESS)
    return r;
  if ((r = pinned_one(dev + head, lo, a - lo, (size_t)(e - a), s, 0, async)) != CUDA_SUCCESS)
    return r;
  return tail ? htod_sent(dev + (n - tail), p + (n - tail), tail, s, async) : CUDA_SUCCESS;
}

/* Copies dev <-> host through the daemon's mapping of shared host memory
 * when [host, host + n) lies inside one shared allocation or registration
 * and meets its shared pages: returns true and the result in *r; false when
 * the bytes must travel (not shared, straddles its end). */
static bool pinned_copy(uint64_t dev, const void *host, size_t n, uint64_t s, int dir, int async,
                        CUresult *r) {
  uint64_t base, size, lo, hi, h = (uint64_t)(uintptr_t)host;
  unsigned flags;
  if (n == 0 || !guest__mem_find_host(h, &base, &size, &flags) || n > size - (h - base))
    return false;
  if (flags & GUEST_HOST_SHARED) {
    *r = pinned_one(dev, base, h - base, n, s, dir, async);
    return true;
  }
  if (!(flags & GUEST_HOST_INTERIOR) || !guest__hostreg_find(base, &lo, &hi) || h + n <= lo ||
      h >= hi)
    return false;
  *r = interior_copy(dev, h, n, lo, hi, s, dir, async);
  return true;
}

/* An asynchronous copy on s naming host memory [h, h + n) that tallyd does
 * not share whole, while s takes part in a capture (*id): its bytes cannot
 * travel with the request (the capture would keep tallyd's copy of them),
 * so the copy goes through a stage (gstage.c). */
static bool captured_staged(const void *h, size_t n, uint64_t s, uint64_t *id) {
  uint64_t base, size, p = (uint64_t)(uintptr_t)h;
  unsigned flags;
  if (!n || !guest__capture_open())
    return false;
  if (guest__mem_find_host(p, &base, &size, &flags) && (flags & GUEST_HOST_SHARED) &&
      n <= size - (p - base))
    return false; /* PINNED_COPY names tallyd's own mapping of it */
  return guest__stream_capture(s, id) == CU_STREAM_CAPTURE_STATUS_ACTIVE;
}

CUresult guest__copy_dtod(uint64_t dst, uint64_t src, size_t n, uint64_t s) {
  call_dtod_req_t q = {.dst = dst, .src = src, .len = n, .stream = s};
  return guest__post_cu(CALL_OP_DTOD, &q);
}

/* Host memory the device reaches natively (unified addressing: pinned or
 * registered host memory is a valid address for copies and memsets) but
 * tallyd cannot: [p, p + n) inside one of this process's pinned or
 * registered ranges that is not shared with tallyd (TCP, or sharing
 * failed).  Such an operation runs here, in stream order: the stream is
 * synchronised first (an asynchronous call blocks; only code that points
 * device operations at host memory takes this path, e.g. XLA's
 * autotuner). */
static bool host_only(uint64_t p, size_t n) {
  uint64_t base, size;
  unsigned flags;
  return n && guest__mem_any_unreachable() && guest__mem_find_host(p, &base, &size, &flags) &&
         !GUEST_HOST_REACHABLE(flags) && n <= size - (p - base);
}

static CUresult host_ordered(uint64_t s) {
  call_stream_sync_req_t q = {.stream = s};
  return guest__rpc(CALL_OP_STREAM_SYNC, CALL_SYNCPOINT, &q, NULL);
}

/* A copy with a host_only side (and the other in this process too). */
static CUresult host_copy(void *dst, const void *src, size_t n, uint64_t s) {
  CUresult r = host_ordered(s);
  if (r == CUDA_SUCCESS)
    memmove(dst, src, n);
  return r;
}

/* The bytes of src to device memory at dst, through the channel. */
static CUresult htod_sent(uint64_t dst, const void *src, size_t n, uint64_t s, int async) {
  const uint8_t *p = src;
  if (async && n <= GUEST_BATCH_FLUSH / 2) {
    call_htod_req_t q = {.dst = dst, .stream = s, .async = 1, .bytes = {src, n}};
    return guest__post_cu(CALL_OP_HTOD, &q);
  }
  do {
    size_t len = n > CALL_CHUNK ? CALL_CHUNK : n;
    call_htod_req_t q = {.dst = dst, .stream = s, .async = (uint64_t)async, .bytes = {p, len}};
    CUresult res = CUDA_SUCCESS;
    int rc = guest__call(CALL_OP_HTOD, async ? 0 : CALL_SYNCPOINT, &q, &res, NULL, 0, NULL, NULL);
    if (rc)
      return guest__cu_error(rc);
    if (res != CUDA_SUCCESS)
      return res;
    dst += len;
    p += len;
    n -= len;
  } while (n > 0);
  return CUDA_SUCCESS;
}

static CUresult htod(uint64_t dst, const void *src, size_t n, uint64_t s, int async) {
  uint64_t id;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (n && !src)
    return CUDA_ERROR_INVALID_VALUE;
  if (host_only(dst, n))
    return host_copy((void *)(uintptr_t)dst, src, n, s);
  if (async && captured_staged(src, n, s, &id))
    return guest__gstage_captured_copy(dst, (void *)(uintptr_t)src, n, s, GUEST_STAGE_UP, id);
  if (pinned_copy(dst, src, n, s, 0, async, &r))
    return r;
  return htod_sent(dst, src, n, s, async);
}

/* mirror.c's copies name its device memory, which may overlap this
 * process's host ranges numerically: no host-side detection (host_only
 * would synchronise, which reads mirrors back, which copies). */
CUresult guest__copy_htod(uint64_t dst, const void *src, size_t n, uint64_t s) {
  return htod_sent(dst, src, n, s, 1);
}

/* Device memory at src into dst, through the channel; completes first. */
static CUresult dtoh_sent(void *dst, uint64_t src, size_t n, uint64_t s) {
  uint8_t *p = dst;
  do {
    size_t len = n > CALL_CHUNK ? CALL_CHUNK : n, got = 0;
    call_dtoh_req_t q = {.src = src, .len = len, .stream = s};
    CUresult res = CUDA_SUCCESS;
    /* The reply is one REST run of bytes (call.def): straight into p. */
    int rc = guest__call(CALL_OP_DTOH, CALL_SYNCPOINT, &q, &res, p, len, &got, NULL);
    if (rc)
      return guest__cu_error(rc);
    if (res != CUDA_SUCCESS)
      return res;
    if (got != len)
      return guest__cu_error(-EPROTO);
    src += len;
    p += len;
    n -= len;
  } while (n > 0);
  return CUDA_SUCCESS;
}

/* async: into shared pinned memory the copy is stream-ordered (the bytes
 * land when it executes); elsewhere D2H always completes before returning. */
static CUresult dtoh(void *dst, uint64_t src, size_t n, uint64_t s, int async) {
  uint64_t id;
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (n && !dst)
    return CUDA_ERROR_INVALID_VALUE;
  if (host_only(src, n))
    return host_copy(dst, (const void *)(uintptr_t)src, n, s);
  if (async && captured_staged(dst, n, s, &id))
    return guest__gstage_captured_copy(src, dst, n, s, GUEST_STAGE_DOWN, id);
  if (pinned_copy(src, dst, n, s, 1, async, &r))
    return r;
  return dtoh_sent(dst, src, n, s);
}

CUresult guest__copy_dtoh(void *dst, uint64_t src, size_t n, uint64_t s) {
  return dtoh_sent(dst, src, n, s);
}

static CUresult dtod(uint64_t dst, uint64_t src, size_t n, uint64_t s, int async) {
  call_dtod_req_t q = {.dst = dst, .src = src, .len = n, .stream = s};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (host_only(src, n))
    return htod(dst, (const void *)(uintptr_t)src, n, s, async);
  if (host_only(dst, n))
    return dtoh((void *)(uintptr_t)dst, src, n, s, async);
  if (async) {
    return guest__post_cu(CALL_OP_DTOD, &q);
  }
  return guest__rpc(CALL_OP_DTOD, CALL_SYNCPOINT, &q, NULL);
}

static bool is_device(uint64_t p) {
  guest_mem_kind_t k;
  return guest__mem_find(p, NULL, NULL, &k) && k == GUEST_MEM_DEVICE;
}

/* Unified copy: direction from the guest's own allocation table. */
static CUresult copy_any(uint64_t dst, uint64_t src, size_t n, uint64_t s, int async) {
  bool dd = is_device(dst), sd = is_device(src);
  if (dd && sd)
    return dtod(dst, src, n, s, async);
  if (dd)
    return htod(dst, (const void *)(uintptr_t)src, n, s, async);
  if (sd)
    return dtoh((void *)(uintptr_t)dst, src, n, s, async);
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}

/* Stream-ordered allocation and pools: vmm.c. */

#define HTOD(pt) htod(dst, src, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyHtoD_v2, (CUdeviceptr dst, const void *src, size_t n), HTOD)
#define DTOH(pt) dtoh(dst, src, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyDtoH_v2, (void *dst, CUdeviceptr src, size_t n), DTOH)
#define DTOD(pt) dtod(dst, src, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyDtoD_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n), DTOD)
#define ANY(pt) copy_any(dst, src, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpy, (CUdeviceptr dst, CUdeviceptr src, size_t n), ANY)
#define HTODA(pt) htod(dst, src, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpyHtoDAsync_v2, (CUdeviceptr dst, const void *src, size_t n, CUstream s), HTODA)
#define DTOHA(pt) dtoh(dst, src, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpyDtoHAsync_v2, (void *dst, CUdeviceptr src, size_t n, CUstream s), DTOHA)
#define DTODA(pt) dtod(dst, src, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpyDtoDAsync_v2, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), DTODA)
#define ANYA(pt) copy_any(dst, src, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpyAsync, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s), ANYA)

/* Peer copies: a tenant sees one device, so both contexts name it. */
#define PEER(pt) dtod(dst, src, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpyPeer, (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
           PEER)
#define PEERA(pt) dtod(dst, src, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpyPeerAsync,
           (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),
           PEERA)

/* ---- 2D / 3D copies (with an array side: array.c) ---- */

static uint64_t side_addr(CUmemorytype t, const void *host, CUdeviceptr dev, int *is_dev) {
  if (t == CU_MEMORYTYPE_UNIFIED) {
    *is_dev = is_device(dev);
    return dev;
  }
  *is_dev = t == CU_MEMORYTYPE_DEVICE;
  return *is_dev ? dev : (uint64_t)(uintptr_t)host;
}

static CUresult copy_rows(CUmemorytype st, const void *sh, CUdeviceptr sdv, size_t sx, size_t sy,
                          size_t sz, size_t spitch, size_t sheight, CUmemorytype dt, void *dh,
                          CUdeviceptr ddv, size_t dx, size_t dy, size_t dz, size_t dpitch,
                          size_t dheight, size_t width, size_t height, size_t depth, uint64_t s,
                          int async) {
  int sdev, ddev;
  uint64_t sbase, dbase;
  sbase = side_addr(st, sh, sdv, &sdev);
  dbase = side_addr(dt, dh, ddv, &ddev);
  for (size_t z = 0; z < depth; z++)
    for (size_t y = 0; y < height; y++) {
      uint64_t so = sbase + ((sz + z) * sheight + sy + y) * spitch + sx;
      uint64_t d = dbase + ((dz + z) * dheight + dy + y) * dpitch + dx;
      CUresult r;
      if (sdev && ddev)
        r = dtod(d, so, width, s, async);
      else if (ddev)
        r = htod(d, (const void *)(uintptr_t)so, width, s, async);
      else if (sdev)
        r = dtoh((void *)(uintptr_t)d, so, width, s, async);
      else {
        memmove((void *)(uintptr_t)d, (const void *)(uintptr_t)so, width);
        r = CUDA_SUCCESS;
      }
      if (r != CUDA_SUCCESS)
        return r;
    }
  return CUDA_SUCCESS;
}

static CUresult copy2d(const CUDA_MEMCPY2D *c, uint64_t s, int async) {
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
    CUDA_MEMCPY3D c3 = {.srcXInBytes = c->srcXInBytes,
                        .srcY = c->srcY,
                        .srcMemoryType = c->srcMemoryType,
                        .srcHost = c->srcHost,
                        .srcDevice = c->srcDevice,
                        .srcArray = c->srcArray,
                        .srcPitch = c->srcPitch,
                        .dstXInBytes = c->dstXInBytes,
                        .dstY = c->dstY,
                        .dstMemoryType = c->dstMemoryType,
                        .dstHost = c->dstHost,
                        .dstDevice = c->dstDevice,
                        .dstArray = c->dstArray,
                        .dstPitch = c->dstPitch,
                        .WidthInBytes = c->WidthInBytes,
                        .Height = c->Height,
                        .Depth = 1};
    return guest__array_copy3d(&c3, s, async);
  }
  return copy_rows(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, 0,
                   c->srcPitch ? c->srcPitch : c->WidthInBytes, 0, c->dstMemoryType, c->dstHost,
                   c->dstDevice, c->dstXInBytes, c->dstY, 0,
                   c->dstPitch ? c->dstPitch : c->WidthInBytes, 0, c->WidthInBytes, c->Height, 1, s,
                   async);
}

static CUresult copy3d(const CUDA_MEMCPY3D *c, uint64_t s, int async) {
  if (!c)
    return CUDA_ERROR_INVALID_VALUE;
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY)
    return guest__array_copy3d(c, s, async);
  return copy_rows(c->srcMemoryType, c->srcHost, c->srcDevice, c->srcXInBytes, c->srcY, c->srcZ,
                   c->srcPitch ? c->srcPitch : c->WidthInBytes, c->srcHeight, c->dstMemoryType,
                   c->dstHost, c->dstDevice, c->dstXInBytes, c->dstY, c->dstZ,
                   c->dstPitch ? c->dstPitch : c->WidthInBytes, c->dstHeight, c->WidthInBytes,
                   c->Height, c->Depth, s, async);
}

#define C2D(pt) copy2d(c, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpy2D_v2, (const CUDA_MEMCPY2D *c), C2D)
GUEST_PTDS(cuMemcpy2DUnaligned_v2, (const CUDA_MEMCPY2D *c), C2D)
#define C2DA(pt) copy2d(c, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpy2DAsync_v2, (const CUDA_MEMCPY2D *c, CUstream s), C2DA)
#define C3D(pt) copy3d(c, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemcpy3D_v2, (const CUDA_MEMCPY3D *c), C3D)
#define C3DA(pt) copy3d(c, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemcpy3DAsync_v2, (const CUDA_MEMCPY3D *c, CUstream s), C3DA)

/* ---- memsets ---- */

static CUresult memset_any(uint64_t p, uint32_t value, uint32_t elem, size_t count, uint64_t s,
                           int async) {
  call_memset_req_t q = {.dst = p, .value = value, .elem = elem, .count = count, .stream = s};
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  if (count <= SIZE_MAX / elem && host_only(p, count * elem)) {
    if ((r = host_ordered(s)) != CUDA_SUCCESS)
      return r;
    for (size_t i = 0; i < count; i++)
      memcpy((uint8_t *)(uintptr_t)p + i * elem, &value, elem); /* little-endian: low bytes */
    return CUDA_SUCCESS;
  }
  if (async) {
    return guest__post_cu(CALL_OP_MEMSET, &q);
  }
  return guest__rpc(CALL_OP_MEMSET, 0, &q, NULL);
}

#define MS8(pt) memset_any(p, v, 1, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemsetD8_v2, (CUdeviceptr p, unsigned char v, size_t n), MS8)
#define MS16(pt) memset_any(p, v, 2, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemsetD16_v2, (CUdeviceptr p, unsigned short v, size_t n), MS16)
#define MS32(pt) memset_any(p, v, 4, n, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemsetD32_v2, (CUdeviceptr p, unsigned int v, size_t n), MS32)
#define MS8A(pt) memset_any(p, v, 1, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemsetD8Async, (CUdeviceptr p, unsigned char v, size_t n, CUstream s), MS8A)
#define MS16A(pt) memset_any(p, v, 2, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemsetD16Async, (CUdeviceptr p, unsigned short v, size_t n, CUstream s), MS16A)
#define MS32A(pt) memset_any(p, v, 4, n, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemsetD32Async, (CUdeviceptr p, unsigned int v, size_t n, CUstream s), MS32A)

/* 2D memsets: one memset per row. */
static CUresult memset2d(uint64_t p, size_t pitch, uint32_t v, uint32_t elem, size_t w, size_t h,
                         uint64_t s, int async) {
  for (size_t y = 0; y < h; y++) {
    CUresult r = memset_any(p + y * pitch, v, elem, w, s, async);
    if (r != CUDA_SUCCESS)
      return r;
  }
  return CUDA_SUCCESS;
}

#define M2D8(pt) memset2d(p, pitch, v, 1, w, h, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemsetD2D8_v2, (CUdeviceptr p, size_t pitch, unsigned char v, size_t w, size_t h),
           M2D8)
#define M2D32(pt) memset2d(p, pitch, v, 4, w, h, guest__stream(NULL, pt), 0)
GUEST_PTDS(cuMemsetD2D32_v2, (CUdeviceptr p, size_t pitch, unsigned int v, size_t w, size_t h),
           M2D32)
#define M2D8A(pt) memset2d(p, pitch, v, 1, w, h, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemsetD2D8Async,
           (CUdeviceptr p, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s), M2D8A)
#define M2D32A(pt) memset2d(p, pitch, v, 4, w, h, guest__stream(s, pt), 1)
GUEST_PTSZ(cuMemsetD2D32Async,
           (CUdeviceptr p, size_t pitch, unsigned int v, size_t w, size_t h, CUstream s), M2D32A)

/* ---- pointer attributes of the tenant's own allocations ---- */

static CUresult pointer_attr(void *data, CUpointer_attribute attr, CUdeviceptr p) {
  uint64_t base = 0, size = 0;
  guest_mem_kind_t k;
  bool found = guest__mem_find(p, &base, &size, &k);
  bool dev = found && k == GUEST_MEM_DEVICE;

  if (!data)
    return CUDA_ERROR_INVALID_VALUE;
  switch (attr) {
  case CU_POINTER_ATTRIBUTE_CONTEXT: {
    CUcontext c = NULL;
    if (!found)
      return CUDA_ERROR_INVALID_VALUE;
    (void)cuCtxGetCurrent(&c);
    *(CUcontext *)data = c;
    return CUDA_SUCCESS;
  }
  case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    if (!found)
      return CUDA_ERROR_INVALID_VALUE;
    *(CUmemorytype *)data = dev ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
  case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    /* Pinned host memory is mapped at one address for host and device
     * (unified addressing; tallyd maps a shared allocation at the same
     * address, cuMemHostGetDevicePointer); device memory has no host one. */
    if (!found || (attr == CU_POINTER_ATTRIBUTE_HOST_POINTER && dev))
      return CUDA_ERROR_INVALID_VALUE;
    *(void **)data = (void *)(uintptr_t)p;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_IS_MANAGED:
  case CU_POINTER_ATTRIBUTE_MAPPED:
    *(int *)data = attr == CU_POINTER_ATTRIBUTE_MAPPED ? found : 0;
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
    if (!found)
      return CUDA_ERROR_INVALID_VALUE;
    *(int *)data = guest__cur_device();
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    if (!found)
      return CUDA_ERROR_INVALID_VALUE;
    *(CUdeviceptr *)data = base;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    if (!found)
      return CUDA_ERROR_INVALID_VALUE;
    *(size_t *)data = size;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    if (!found)
      return CUDA_ERROR_INVALID_VALUE;
    *(unsigned long long *)data = base;
    return CUDA_SUCCESS;
  case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    *(int *)data = 1;
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

GUEST_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p) {
  return pointer_attr(data, attr, p);
}

GUEST_EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs,
                                             void **data, CUdeviceptr p) {
  if (!attrs || !data)
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; i++) {
    /* Unknown pointers give zeroed values, not an error, as the driver does. */
    if (pointer_attr(data[i], attrs[i], p) != CUDA_SUCCESS && data[i]) {
      if (attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE || attrs[i] == CU_POINTER_ATTRIBUTE_MAPPED ||
          attrs[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED ||
          attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL)
        *(int *)data[i] = attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL ? -2 : 0;
      else
        *(void **)data[i] = NULL;
    }
  }
  return CUDA_SUCCESS;
}
