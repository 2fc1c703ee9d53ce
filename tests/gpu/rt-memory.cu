/* rt-memory.cu: memory through the CUDA runtime API.
 *
 * Device alloc/free; pinned host memory from cudaMallocHost and cudaHostAlloc (default and
 * portable flags: not mapped, because a tenant's host memory is not reachable by a remote
 * host's GPU); pageable host memory; memcpy and memset, sync and async, in every direction
 * (H2D, D2H, D2D, D2H into pageable memory, cudaMemcpyDefault); 2D and 3D copies and memsets
 * with pitched allocations; pointer attributes of the program's own allocations; the program's
 * own memory registered with cudaHostRegister (page-aligned, and from malloc with partial pages
 * at its ends), copied sync and async both ways, kept by registration, unregistration and a
 * child of fork() writing into it.
 *
 * Every result goes through a device round trip and is printed as a checksum; the expected
 * host-side value is also computed on the CPU and compared ("check ...: ok"), so a wrong copy
 * shows up even if the native run had the same bug.
 */
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e-common.h"

#define N_WORDS (1u << 20) /* 4 MiB: spans many pages and several DMA chunks */

__global__ void xor_words(uint32_t *p, uint32_t k, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n)
    p[i] ^= k;
}

static void test_linear(void) {
  const size_t bytes = N_WORDS * sizeof(uint32_t);
  uint32_t *pin = NULL, *pin2 = NULL, *port = NULL;
  uint32_t *page = (uint32_t *)malloc(bytes);
  uint32_t *expect = (uint32_t *)malloc(bytes);
  uint32_t *d1 = NULL, *d2 = NULL;
  cudaStream_t s;

  E2E_RT(cudaMallocHost((void **)&pin, bytes));
  E2E_RT(cudaHostAlloc((void **)&pin2, bytes, cudaHostAllocDefault));
  E2E_RT(cudaHostAlloc((void **)&port, bytes, cudaHostAllocPortable));
  E2E_RT(cudaMalloc((void **)&d1, bytes));
  E2E_RT(cudaMalloc((void **)&d2, bytes));
  E2E_RT(cudaStreamCreate(&s));
  if (pin == NULL || pin2 == NULL || port == NULL || d1 == NULL || d2 == NULL) {
    printf("linear tests skipped: an allocation failed\n");
    return;
  }

  /* sync H2D from pageable memory, kernel, D2D, sync D2H into pinned memory */
  e2e_fill_u32(page, N_WORDS, 1);
  memcpy(expect, page, bytes);
  for (size_t i = 0; i < N_WORDS; i++)
    expect[i] ^= 0x5a5a5a5au;
  E2E_RT(cudaMemcpy(d1, page, bytes, cudaMemcpyHostToDevice));
  xor_words<<<N_WORDS / 256, 256>>>(d1, 0x5a5a5a5au, N_WORDS);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpy(d2, d1, bytes, cudaMemcpyDeviceToDevice));
  E2E_RT(cudaMemcpy(pin, d2, bytes, cudaMemcpyDeviceToHost));
  e2e_check(memcmp(pin, expect, bytes) == 0, "sync h2d/d2d/d2h");
  e2e_print_sum("sync copies", pin, bytes);

  /* async H2D from pinned memory on a stream, kernel on the stream, async D2H */
  e2e_fill_u32(pin2, N_WORDS, 2);
  memcpy(expect, pin2, bytes);
  for (size_t i = 0; i < N_WORDS; i++)
    expect[i] ^= 0x01020304u;
  E2E_RT(cudaMemcpyAsync(d1, pin2, bytes, cudaMemcpyHostToDevice, s));
  xor_words<<<N_WORDS / 256, 256, 0, s>>>(d1, 0x01020304u, N_WORDS);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpyAsync(d2, d1, bytes, cudaMemcpyDeviceToDevice, s));
  E2E_RT(cudaMemcpyAsync(port, d2, bytes, cudaMemcpyDeviceToHost, s));
  E2E_RT(cudaStreamSynchronize(s));
  e2e_check(memcmp(port, expect, bytes) == 0, "async h2d/d2d/d2h");
  e2e_print_sum("async copies", port, bytes);

  /* async D2H into pageable memory (cudart stages it; the call returns after the copy) */
  memset(page, 0, bytes);
  E2E_RT(cudaMemcpyAsync(page, d2, bytes, cudaMemcpyDeviceToHost, s));
  E2E_RT(cudaStreamSynchronize(s));
  e2e_check(memcmp(page, expect, bytes) == 0, "async d2h to pageable");

  /* cudaMemcpyDefault infers the direction from unified addressing */
  E2E_RT(cudaMemcpy(d1, pin, bytes, cudaMemcpyDefault));
  memset(page, 0, bytes);
  E2E_RT(cudaMemcpy(page, d1, bytes, cudaMemcpyDefault));
  e2e_check(memcmp(page, pin, bytes) == 0, "memcpy default direction");

  /* memset sync and async, partial ranges with odd offsets and lengths */
  E2E_RT(cudaMemset(d1, 0xab, bytes));
  E2E_RT(cudaMemset((char *)d1 + 3, 0x11, 1001));
  E2E_RT(cudaMemsetAsync((char *)d1 + 65536, 0x22, 4097, s));
  E2E_RT(cudaStreamSynchronize(s));
  E2E_RT(cudaMemcpy(page, d1, bytes, cudaMemcpyDeviceToHost));
  {
    unsigned char *e = (unsigned char *)expect;
    memset(e, 0xab, bytes);
    memset(e + 3, 0x11, 1001);
    memset(e + 65536, 0x22, 4097);
    e2e_check(memcmp(page, expect, bytes) == 0, "memset sync and async");
  }
  e2e_print_sum("memset", page, bytes);

  /* pointer attributes of our own allocations */
  {
    cudaPointerAttributes a;
    E2E_RT(cudaPointerGetAttributes(&a, d1));
    printf("attr device ptr: type=%d device=%d same=%s\n", (int)a.type, a.device,
           a.devicePointer == (void *)d1 ? "yes" : "no");
    E2E_RT(cudaPointerGetAttributes(&a, pin));
    printf("attr pinned ptr: type=%d\n", (int)a.type);
    E2E_RT(cudaPointerGetAttributes(&a, page));
    printf("attr pageable ptr: type=%d\n", (int)a.type);
  }

  E2E_RT(cudaStreamDestroy(s));
  E2E_RT(cudaFree(d1));
  E2E_RT(cudaFree(d2));
  E2E_RT(cudaFreeHost(pin));
  E2E_RT(cudaFreeHost(pin2));
  E2E_RT(cudaFreeHost(port));
  free(page);
  free(expect);
}

static void test_2d_3d(void) {
  /* 2D: a 300 x 77 byte region (odd sizes, so the pitch differs from the width) */
  const size_t w = 300, h = 77;
  unsigned char *host = (unsigned char *)malloc(w * h);
  unsigned char *back = (unsigned char *)malloc(w * h);
  unsigned char *expect = (unsigned char *)malloc(w * h);
  void *d = NULL;
  size_t pitch = 0;

  e2e_fill_u32((uint32_t *)expect, w * h / 4, 3);
  memcpy(host, expect, w * h);
  E2E_RT(cudaMallocPitch(&d, &pitch, w, h));
  e2e_check(pitch >= w, "pitch >= width");
  E2E_RT(cudaMemset2D(d, pitch, 0x7f, w, h));
  E2E_RT(cudaMemcpy2D(d, pitch, host, w, w / 2, h, cudaMemcpyHostToDevice));
  E2E_RT(cudaMemcpy2D(back, w, d, pitch, w, h, cudaMemcpyDeviceToHost));
  for (size_t y = 0; y < h; y++)
    memset(expect + y * w + w / 2, 0x7f, w - w / 2);
  e2e_check(memcmp(back, expect, w * h) == 0, "memcpy2d and memset2d");
  e2e_print_sum("2d", back, w * h);

  /* 2D async, device to device into a second pitched allocation, rows shifted by one */
  {
    cudaStream_t s;
    void *d2 = NULL;
    size_t pitch2 = 0;
    E2E_RT(cudaMallocPitch(&d2, &pitch2, w, h));
    E2E_RT(cudaStreamCreate(&s));
    E2E_RT(cudaMemset2DAsync(d2, pitch2, 0x01, w, 1, s));
    E2E_RT(cudaMemcpy2DAsync((char *)d2 + pitch2, pitch2, d, pitch, w, h - 1,
                             cudaMemcpyDeviceToDevice, s));
    E2E_RT(cudaMemcpy2DAsync(back, w, d2, pitch2, w, h, cudaMemcpyDeviceToHost, s));
    E2E_RT(cudaStreamSynchronize(s));
    E2E_RT(cudaStreamDestroy(s));
    E2E_RT(cudaFree(d2));
    {
      int ok = 1;
      for (size_t x = 0; x < w; x++)
        ok &= back[x] == 0x01;
      ok &= memcmp(back + w, expect, w * (h - 1)) == 0;
      e2e_check(ok, "memcpy2d async d2d");
    }
    e2e_print_sum("2d async d2d", back, w * h);
  }
  E2E_RT(cudaFree(d));

  /* 3D: a 64 x 20 x 9 byte box inside a pitched 3D allocation */
  {
    const size_t W = 64, H = 20, D = 9;
    cudaExtent ext = make_cudaExtent(W, H, D);
    cudaPitchedPtr dp;
    unsigned char *h3 = (unsigned char *)malloc(W * H * D);
    unsigned char *b3 = (unsigned char *)malloc(W * H * D);
    cudaMemcpy3DParms p;

    e2e_fill_u32((uint32_t *)h3, W * H * D / 4, 4);
    E2E_RT(cudaMalloc3D(&dp, ext));
    E2E_RT(cudaMemset3D(dp, 0x33, ext));

    /* copy only the inner box [8,40) x [2,18) x [1,8) of the host volume */
    memset(&p, 0, sizeof(p));
    p.srcPtr = make_cudaPitchedPtr(h3, W, W, H);
    p.srcPos = make_cudaPos(8, 2, 1);
    p.dstPtr = dp;
    p.dstPos = make_cudaPos(8, 2, 1);
    p.extent = make_cudaExtent(32, 16, 7);
    p.kind = cudaMemcpyHostToDevice;
    E2E_RT(cudaMemcpy3D(&p));

    memset(&p, 0, sizeof(p));
    p.srcPtr = dp;
    p.dstPtr = make_cudaPitchedPtr(b3, W, W, H);
    p.extent = ext;
    p.kind = cudaMemcpyDeviceToHost;
    E2E_RT(cudaMemcpy3D(&p));

    {
      int ok = 1;
      for (size_t z = 0; z < D; z++)
        for (size_t y = 0; y < H; y++)
          for (size_t x = 0; x < W; x++) {
            size_t i = (z * H + y) * W + x;
            int inner = x >= 8 && x < 40 && y >= 2 && y < 18 && z >= 1 && z < 8;
            if (b3[i] != (inner ? h3[i] : 0x33))
              ok = 0;
          }
      e2e_check(ok, "memcpy3d and memset3d");
    }
    e2e_print_sum("3d", b3, W * H * D);

    /* 3D async device to host of the whole volume again */
    {
      cudaStream_t s;
      memset(b3, 0, W * H * D);
      E2E_RT(cudaStreamCreate(&s));
      E2E_RT(cudaMemset3DAsync(dp, 0x44, make_cudaExtent(W, H, 1), s));
      memset(&p, 0, sizeof(p));
      p.srcPtr = dp;
      p.dstPtr = make_cudaPitchedPtr(b3, W, W, H);
      p.extent = ext;
      p.kind = cudaMemcpyDeviceToHost;
      E2E_RT(cudaMemcpy3DAsync(&p, s));
      E2E_RT(cudaStreamSynchronize(s));
      E2E_RT(cudaStreamDestroy(s));
      e2e_print_sum("3d async", b3, W * H * D);
    }
    E2E_RT(cudaFree(dp.ptr));
    free(h3);
    free(b3);
  }
  free(host);
  free(back);
  free(expect);
}

static uint64_t bytes_sum(const unsigned char *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* The program's own memory, registered: copies both ways through it, sync and async with a
 * kernel in between; what it holds survives registration and unregistration; a child of fork()
 * that writes into it changes the child's copy only (the parent's bytes are checked). */
static void test_registered(void) {
  const size_t bytes = N_WORDS * sizeof(uint32_t), odd = bytes + 100;
  uint32_t *al = NULL, *expect = (uint32_t *)malloc(bytes), *d = NULL;
  unsigned char *um = (unsigned char *)malloc(odd + 8), *u = um + 8; /* not page-aligned */
  cudaStream_t s;
  int status = 0;
  uint64_t usum;
  pid_t pid;
  if (posix_memalign((void **)&al, 4096, bytes) != 0 || !um || !expect) {
    printf("registered tests skipped: no host memory\n");
    return;
  }
  e2e_fill_u32(al, N_WORDS, 7);
  memcpy(expect, al, bytes);
  memset(u, 0x3c, odd);
  E2E_RT(cudaHostRegister(al, bytes, cudaHostRegisterDefault));
  E2E_RT(cudaHostRegister(u, odd, cudaHostRegisterDefault));
  e2e_check(memcmp(al, expect, bytes) == 0, "registration keeps the bytes");
  E2E_RT(cudaMalloc((void **)&d, bytes));
  E2E_RT(cudaStreamCreate(&s));

  /* sync: aligned to the device, back into the unaligned one at an offset of 100 bytes */
  E2E_RT(cudaMemcpy(d, al, bytes, cudaMemcpyHostToDevice));
  E2E_RT(cudaMemcpy(u + 100, d, bytes, cudaMemcpyDeviceToHost));
  e2e_check(memcmp(u + 100, expect, bytes) == 0 && u[0] == 0x3c && u[99] == 0x3c,
            "registered sync copies");
  /* async on a stream: the unaligned one up, a kernel, down into the aligned one */
  for (size_t i = 0; i < N_WORDS; i++)
    expect[i] ^= 0x00ff00ffu;
  E2E_RT(cudaMemcpyAsync(d, u + 100, bytes, cudaMemcpyHostToDevice, s));
  xor_words<<<N_WORDS / 256, 256, 0, s>>>(d, 0x00ff00ffu, N_WORDS);
  E2E_RT(cudaGetLastError());
  E2E_RT(cudaMemcpyAsync(al, d, bytes, cudaMemcpyDeviceToHost, s));
  E2E_RT(cudaStreamSynchronize(s));
  e2e_check(memcmp(al, expect, bytes) == 0, "registered async copies");
  e2e_print_sum("registered", al, bytes);

  usum = bytes_sum(u, odd);
  fflush(stdout);
  pid = fork();
  if (pid == 0) {
    memset(al, 0, bytes);
    memset(u, 0, odd);
    _exit(0);
  }
  e2e_check(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0,
            "fork child ran");
  e2e_check(memcmp(al, expect, bytes) == 0 && bytes_sum(u, odd) == usum,
            "a forked child's writes stay in the child");

  E2E_RT(cudaHostUnregister(al));
  E2E_RT(cudaHostUnregister(u));
  e2e_check(memcmp(al, expect, bytes) == 0 && u[0] == 0x3c, "unregistration keeps the bytes");
  e2e_check(cudaHostUnregister(al) == cudaErrorHostMemoryNotRegistered,
            "unregistering twice is refused");
  (void)cudaGetLastError();
  E2E_RT(cudaStreamDestroy(s));
  E2E_RT(cudaFree(d));
  free(al);
  free(um);
  free(expect);
}

/* Many small allocations freed out of order: the tenant's range table must keep up. */
static void test_alloc_churn(void) {
  enum { K = 64 };
  void *p[K];
  uint32_t acc[K];
  for (int i = 0; i < K; i++) {
    p[i] = NULL;
    E2E_RT(cudaMalloc(&p[i], (size_t)(i + 1) * 4096 + 12));
    E2E_RT(cudaMemset(p[i], i, 4));
  }
  for (int i = 0; i < K; i += 2)
    E2E_RT(cudaFree(p[i]));
  for (int i = 1; i < K; i += 2)
    E2E_RT(cudaMemcpy(&acc[i], p[i], 4, cudaMemcpyDeviceToHost));
  for (int i = 1; i < K; i += 2)
    E2E_RT(cudaFree(p[i]));
  {
    int ok = 1;
    for (int i = 1; i < K; i += 2)
      ok &= acc[i] == 0x01010101u * (uint32_t)i;
    e2e_check(ok, "alloc churn contents");
  }
}

int main(void) {
  E2E_RT(cudaSetDevice(0));
  test_linear();
  test_2d_3d();
  test_alloc_churn();
  test_registered();
  E2E_RT(cudaDeviceSynchronize());
  return e2e_finish();
}
