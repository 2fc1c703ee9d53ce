/* drv-context.c: device queries, contexts and memory through the CUDA driver API.
 *
 * Devices: count, name, total memory, attributes, UUID, compute capability.  Primary
 * contexts: state before retain (inactive), retain, set flags, state after, make current,
 * release, reset.  Created contexts: cuCtxCreate (CUDA 13 signature), push/pop, current
 * context and device, API version, flags, destroy; a context's allocations stay usable while
 * it is current.  Memory: cuMemAlloc/Free, pitched allocations, cuMemAllocHost/cuMemHostAlloc,
 * copies HtoD/DtoH/DtoD sync and async, memsets of 8/16/32-bit values (sync, async and 2D),
 * cuMemcpy2D and cuMemcpy3D, address ranges and pointer attributes of the program's own
 * allocations.  fork() after cuInit: what the child's calls answer, and that the parent's
 * context goes on.  Only deterministic facts are printed.
 */
#include <cuda.h>
#include <errno.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e-common.h"

static void test_device(CUdevice dev) {
  char name[256];
  size_t total = 0;
  int major = 0, minor = 0, v = 0;
  CUuuid uuid;
  E2E_CU(cuDeviceGetName(name, sizeof(name), dev));
  printf("name: %s\n", name);
  E2E_CU(cuDeviceTotalMem(&total, dev));
  printf("total mem: %zu\n", total);
  E2E_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  E2E_CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
  printf("compute capability: %d.%d\n", major, minor);
  /* Every attribute the header knows, one line each so a diff names the one that differs:
   * the guest answers these from its snapshot, errors included.  Clock rates are reported,
   * not measured, so they are as stable as the rest. */
  {
    int answered = 0;
    for (int a = 1; a < CU_DEVICE_ATTRIBUTE_MAX; a++) {
      CUresult r = cuDeviceGetAttribute(&v, (CUdevice_attribute)a, dev);
      if (r == CUDA_SUCCESS) {
        answered++;
        printf("attribute %d: %d\n", a, v);
      } else {
        printf("attribute %d: %s\n", a, e2e_cu_name(r));
      }
    }
    printf("attributes answered: %d\n", answered);
  }
  E2E_CU(cuDeviceGetUuid(&uuid, dev));
  printf("uuid: ");
  for (int i = 0; i < 16; i++)
    printf("%02x", (unsigned char)uuid.bytes[i]);
  printf("\n");
}

static void test_primary_context(CUdevice dev) {
  unsigned flags = 0;
  int active = -1;
  CUcontext pctx = NULL, cur = NULL;
  CUdevice cdev = -1;

  E2E_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("primary ctx before retain: active=%d\n", active);
  E2E_CU(cuDevicePrimaryCtxSetFlags(dev, CU_CTX_SCHED_BLOCKING_SYNC));
  E2E_CU(cuDevicePrimaryCtxRetain(&pctx, dev));
  E2E_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
  printf("primary ctx after retain: active=%d sched=%s\n", active,
         (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_BLOCKING_SYNC ? "blocking-sync" : "other");
  E2E_CU(cuCtxSetCurrent(pctx));
  E2E_CU(cuCtxGetCurrent(&cur));
  printf("current is primary: %s\n", cur == pctx ? "yes" : "no");
  E2E_CU(cuCtxGetDevice(&cdev));
  printf("current device: %d\n", (int)cdev);
  {
    unsigned ver = 0;
    E2E_CU(cuCtxGetApiVersion(pctx, &ver));
    printf("primary ctx api version: %u\n", ver);
  }
}

/* Copies and memsets through every driver-API form, checked against a CPU model. */
static void test_memory(void) {
  enum { N = 1 << 18 }; /* 1 MiB of 32-bit words */
  uint32_t *pin = NULL, *pin2 = NULL, *exp = malloc(N * 4);
  CUdeviceptr d1 = 0, d2 = 0;
  CUstream s = NULL;

  E2E_CU(cuMemAllocHost((void **)&pin, N * 4));
  E2E_CU(cuMemHostAlloc((void **)&pin2, N * 4, CU_MEMHOSTALLOC_PORTABLE));
  E2E_CU(cuMemAlloc(&d1, N * 4));
  E2E_CU(cuMemAlloc(&d2, N * 4));
  E2E_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  if (pin == NULL || pin2 == NULL || d1 == 0 || d2 == 0 || s == NULL)
    return;

  e2e_fill_u32(pin, N, 9);
  memcpy(exp, pin, N * 4);
  E2E_CU(cuMemcpyHtoD(d1, pin, N * 4));
  E2E_CU(cuMemcpyDtoD(d2, d1, N * 4));
  E2E_CU(cuMemsetD32(d2 + 4 * 100, 0xcafef00du, 50));
  E2E_CU(cuMemsetD16(d2 + 4 * 1000, 0xbeef, 33));
  E2E_CU(cuMemsetD8(d2 + 4 * 2000 + 1, 0x5c, 77));
  for (int i = 100; i < 150; i++)
    exp[i] = 0xcafef00du;
  for (int i = 0; i < 33; i++)
    memcpy((char *)exp + 4 * 1000 + 2 * i, &(uint16_t){0xbeef}, 2);
  memset((char *)exp + 4 * 2000 + 1, 0x5c, 77);
  memset(pin2, 0, N * 4);
  E2E_CU(cuMemcpyDtoH(pin2, d2, N * 4));
  e2e_check(memcmp(pin2, exp, N * 4) == 0, "sync copies and memsets");
  e2e_print_sum("sync copies and memsets", pin2, N * 4);

  /* async versions on a stream */
  E2E_CU(cuMemsetD32Async(d1, 0x01010101u, N, s));
  E2E_CU(cuMemsetD16Async(d1 + 2, 0x0202, 3, s));
  E2E_CU(cuMemsetD8Async(d1 + 11, 0x03, 5, s));
  E2E_CU(cuMemcpyDtoDAsync(d2, d1, N * 4, s));
  E2E_CU(cuMemcpyHtoDAsync(d2 + 4 * 64, pin, 4 * 64, s));
  E2E_CU(cuMemcpyDtoHAsync(pin2, d2, N * 4, s));
  E2E_CU(cuStreamSynchronize(s));
  {
    unsigned char *e = (unsigned char *)exp;
    memset(e, 0x01, N * 4);
    for (int i = 0; i < 3; i++)
      memcpy(e + 2 + 2 * i, &(uint16_t){0x0202}, 2);
    memset(e + 11, 0x03, 5);
    memcpy(e + 4 * 64, pin, 4 * 64);
    e2e_check(memcmp(pin2, exp, N * 4) == 0, "async copies and memsets");
  }
  e2e_print_sum("async copies and memsets", pin2, N * 4);

  /* pitched allocation, 2D memset and copies */
  {
    CUdeviceptr pd = 0;
    size_t pitch = 0;
    const size_t w = 200, h = 50; /* bytes x rows */
    unsigned char *hb = (unsigned char *)pin2, *src = (unsigned char *)pin;
    CUDA_MEMCPY2D c;
    E2E_CU(cuMemAllocPitch(&pd, &pitch, w, h, 4));
    E2E_CU(cuMemsetD2D32(pd, pitch, 0x11111111u, w / 4, h));
    E2E_CU(cuMemsetD2D8(pd + 3, pitch, 0x22, 10, h / 2));
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = src;
    c.srcPitch = w;
    c.srcXInBytes = 50;
    c.srcY = 1;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = pd;
    c.dstPitch = pitch;
    c.dstXInBytes = 100;
    c.dstY = 30;
    c.WidthInBytes = 60;
    c.Height = 15;
    E2E_CU(cuMemcpy2D(&c));
    memset(&c, 0, sizeof(c));
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = pd;
    c.srcPitch = pitch;
    c.dstMemoryType = CU_MEMORYTYPE_HOST;
    c.dstHost = hb;
    c.dstPitch = w;
    c.WidthInBytes = w;
    c.Height = h;
    E2E_CU(cuMemcpy2DAsync(&c, s));
    E2E_CU(cuStreamSynchronize(s));
    {
      int ok = 1;
      for (size_t y = 0; y < h; y++)
        for (size_t x = 0; x < w; x++) {
          unsigned char want = 0x11;
          if (y < h / 2 && x >= 3 && x < 13)
            want = 0x22;
          if (y >= 30 && y < 45 && x >= 100 && x < 160)
            want = src[(y - 30 + 1) * w + (x - 100 + 50)];
          ok &= hb[y * w + x] == want;
        }
      e2e_check(ok, "2d memset and copies");
    }
    e2e_print_sum("2d", hb, w * h);

    /* 3D copy: the pitched 2D allocation seen as a 200 x 10 x 5 volume, device to host */
    {
      CUDA_MEMCPY3D c3;
      memset(&c3, 0, sizeof(c3));
      memset(hb, 0, w * h);
      c3.srcMemoryType = CU_MEMORYTYPE_DEVICE;
      c3.srcDevice = pd;
      c3.srcPitch = pitch;
      c3.srcHeight = 10;
      c3.dstMemoryType = CU_MEMORYTYPE_HOST;
      c3.dstHost = hb;
      c3.dstPitch = w;
      c3.dstHeight = 10;
      c3.WidthInBytes = w;
      c3.Height = 10;
      c3.Depth = 5;
      E2E_CU(cuMemcpy3D(&c3));
      e2e_print_sum("3d", hb, w * h);
    }
    E2E_CU(cuMemFree(pd));
  }

  /* address ranges and pointer attributes */
  {
    CUdeviceptr base = 0;
    size_t size = 0;
    unsigned mtype = 0;
    E2E_CU(cuMemGetAddressRange(&base, &size, d1 + 12345));
    printf("address range: base is start=%s size=%zu\n", base == d1 ? "yes" : "no", size);
    E2E_CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d1));
    printf("device pointer memory type: %u\n", mtype);
    E2E_CU(cuPointerGetAttribute(&mtype, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)pin));
    printf("pinned pointer memory type: %u\n", mtype);
  }
  {
    size_t freeb = 0, total = 0, dtotal = 0;
    CUdevice dev;
    E2E_CU(cuCtxGetDevice(&dev));
    E2E_CU(cuMemGetInfo(&freeb, &total));
    E2E_CU(cuDeviceTotalMem(&dtotal, dev));
    printf("mem info total equals device total: %s\n", total == dtotal ? "yes" : "no");
  }

  E2E_CU(cuStreamDestroy(s));
  E2E_CU(cuMemFree(d1));
  E2E_CU(cuMemFree(d2));
  E2E_CU(cuMemFreeHost(pin));
  E2E_CU(cuMemFreeHost(pin2));
  free(exp);
}

static void test_created_context(CUdevice dev) {
  CUcontext ctx = NULL, cur = NULL, popped = NULL, prim = NULL;
  CUdeviceptr d = 0;
  uint32_t v[4] = {1, 2, 3, 4}, back[4] = {0, 0, 0, 0};
  unsigned flags = 0;

  E2E_CU(cuCtxGetCurrent(&prim));
  CUctxCreateParams params;
  memset(&params, 0, sizeof(params)); /* no affinity, no CIG: a plain context */
  E2E_CU(cuCtxCreate(&ctx, &params, CU_CTX_SCHED_SPIN, dev));
  E2E_CU(cuCtxGetCurrent(&cur));
  printf("created ctx is current: %s\n", cur == ctx && ctx != NULL ? "yes" : "no");
  E2E_CU(cuCtxGetFlags(&flags));
  printf("created ctx sched spin: %s\n",
         (flags & CU_CTX_SCHED_MASK) == CU_CTX_SCHED_SPIN ? "yes" : "no");
  E2E_CU(cuMemAlloc(&d, sizeof(v)));
  E2E_CU(cuMemcpyHtoD(d, v, sizeof(v)));
  E2E_CU(cuCtxPopCurrent(&popped));
  printf("popped the created ctx: %s\n", popped == ctx ? "yes" : "no");
  E2E_CU(cuCtxGetCurrent(&cur));
  printf("primary current again after pop: %s\n", cur == prim ? "yes" : "no");
  E2E_CU(cuCtxPushCurrent(ctx));
  E2E_CU(cuMemcpyDtoH(back, d, sizeof(back)));
  printf("created ctx memory after push: %u %u %u %u\n", back[0], back[1], back[2], back[3]);
  E2E_CU(cuMemFree(d));
  E2E_CU(cuCtxSynchronize());
  E2E_CU(cuCtxDestroy(ctx));
  E2E_CU(cuCtxGetCurrent(&cur));
  printf("primary current after destroy: %s\n", cur == prim ? "yes" : "no");
}

/* A child of fork() made after cuInit: its calls' answers (the driver's own
 * in a child, which Tally's guest gives too), then the parent's memory. */
static void test_fork(void) {
  CUdeviceptr d = 0;
  int st = 0;
  pid_t pid;
  fflush(stdout);
  pid = fork();
  if (pid < 0) {
    e2e_check(0, "fork");
    return;
  }
  if (pid == 0) {
    CUdeviceptr x = 0;
    alarm(30); /* a hang in the child fails the line below, not the run */
    printf("fork child: alloc %s\n", e2e_cu_name(cuMemAlloc(&x, 256)));
    printf("fork child: init %s\n", e2e_cu_name(cuInit(0)));
    printf("fork child: ctx sync %s\n", e2e_cu_name(cuCtxSynchronize()));
    fflush(stdout);
    _exit(0);
  }
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
    ;
  printf("fork child exited: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
  printf("fork parent alloc: %s\n", e2e_cu_name(cuMemAlloc(&d, 256)));
  if (d)
    E2E_CU(cuMemFree(d));
}

int main(void) {
  int count = 0, ver = 0;
  CUdevice dev;

  E2E_CU(cuDriverGetVersion(&ver));
  printf("driver version: %d\n", ver);
  printf("device count before init: %s\n", e2e_cu_name(cuDeviceGetCount(&count)));
  E2E_CU(cuInit(0));
  E2E_CU(cuDeviceGetCount(&count));
  printf("device count: %d\n", count);
  if (count < 1) {
    e2e_check(0, "a device");
    return e2e_finish();
  }
  E2E_CU(cuDeviceGet(&dev, 0));
  printf("device get out of range: %s\n", e2e_cu_name(cuDeviceGet(&dev, count)));
  E2E_CU(cuDeviceGet(&dev, 0));
  test_device(dev);
  test_primary_context(dev);
  test_memory();
  test_created_context(dev);
  test_fork();
  E2E_CU(cuDevicePrimaryCtxRelease(dev));
  {
    unsigned flags = 0;
    int active = -1;
    E2E_CU(cuDevicePrimaryCtxReset(dev));
    E2E_CU(cuDevicePrimaryCtxGetState(dev, &flags, &active));
    printf("primary ctx after reset: active=%d\n", active);
  }
  return e2e_finish();
}
