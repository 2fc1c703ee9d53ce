/* guest-tenant-helper.c: a second tenant process for test-guest-daemon.
 *
 * usage: guest-tenant-helper ACTION   (TALLY_HOST etc. from the environment)
 *   init        print cuInit's result ("init N") and exit
 *   alloc-wait  allocate 4 KiB, print "ptr 0x..", wait until stdin closes
 *   die         allocate 1 MiB, create a stream and an event, load a module,
 *               print "ready", then kill itself with SIGKILL (no cleanup)
 *   stream      create a stream, print "stream ok", exit
 *   alloc-wait-sync  as alloc-wait, then synchronise and allocate again and
 *               print both results ("after SYNC ALLOC")
 *   healthy     allocate 4 KiB and print "ptr 0x..", then memset, copy back,
 *               check, free: print "healthy N" (N the first failing CUresult,
 *               0 when all worked)
 *   stray-memset  allocate 4 KiB and print "ptr 0x..", memset the 4 bytes
 *               just past it, print "memset N" (its CUresult)
 *   pinned-ops  allocate 4 KiB of pinned host memory and 4 KiB of device
 *               memory; memset part of the pinned memory on a stream (as a
 *               device address), copy it to the device and back into the
 *               pinned memory with device-to-device copies, read it with
 *               cuMemcpyDtoH: print "pinned N" (the first failing CUresult,
 *               0 when every byte is right)
 *   pinned-kernel  allocate 4 KiB of pinned host memory, launch fill_u32
 *               with a pointer into it, write word 10 from the host,
 *               synchronise the context; launch again into its middle on a
 *               non-blocking stream, synchronise that stream; launch on a
 *               stream destroyed before the context's synchronisation;
 *               launch into it while a stream captures; launch into 128 KiB
 *               of pinned memory; free both: print "launch L sync S value V
 *               kept K second 9 gone 11 capture C big L2 free F" (V the first
 *               word, 7 when the kernel ran; K word 10; "second 9" when the
 *               second fill landed where it should and nowhere else; "gone
 *               11" when the third did; C and L2 the captured and the large
 *               launch's CUresults)
 *   fault       allocate 4 KiB and print "ptr 0x..", launch the recording
 *               device's "fault" kernel, print "sync N" (cuCtxSynchronize:
 *               the fault, as natively) and "after N" (a later cuMemAlloc:
 *               still the fault, sticky)
 *   hostfn-die  allocate, create a stream, enqueue a host function that
 *               kills the process (SIGKILL) and behind it a memset and a
 *               second host function, print "ready", synchronise: dies with
 *               the stream blocked on its host function
 *   graph-hostfn-die  as hostfn-die, the functions and the memset being a
 *               graph's nodes, the graph launched
 *   pinned-reuse  allocate 256 KiB of pinned host memory, free it, allocate
 *               256 KiB again (at the same address here, usually) and launch
 *               fill_u32 into it: prints "launch L value V" (L the launch's or
 *               the synchronisation's CUresult, V the first word, 7)
 *   pinned-die  allocate 1 MiB of pinned host memory (shared with tallyd
 *               over shm), print "ready", kill itself with SIGKILL
 *   copy-loop   allocate 16 MiB, print "copying", then copy 16 MiB host to
 *               device over and over until killed (a death mid-copy)
 *   lc-requests 10 requests, each 3 launches of fill_u32 3 ms apart then
 *               cuCtxSynchronize; prints "done", waits until stdin closes
 *               (tallyd's request latency of each is at least 6 ms)
 *   hostfn-quota  on one stream, a host function that waits until stdin
 *               closes and 11 that count; a call, then "ready"; then
 *               synchronise and print "sync N ran M"; then 8 more counting
 *               ones and "again N ran M" (tallyd's --tenant-hostfns 8: the
 *               first sync says out of memory and 7 ran, the second 0 and 15)
 *   blaslt-layout  cuBLASLt's handshake (private table 1734dc26): slot 3 as
 *               cuBLASLt calls it, print "slot3 N" (its CUresult)
 *   sync-word   (latency-critical; sync-reply: the same with
 *               TALLY_LC_SYNC_WORD=0, the word off) on a
 *               stream held 30 ms by a host function, launch fill_u32 then
 *               cuStreamSynchronize: print "held H value V" (H 1 when the
 *               synchronisation returned after the host function, V the
 *               kernel's word); 20 rounds of launch + sync reading back each
 *               value: "rounds BAD"; a launch on a stream only tallyd
 *               refuses, then a synchronisation: "error E" (its CUresult)
 *               and "after A" (the next synchronisation's)
 *   hostfn-ctxsync  a host function holding the NULL stream 30 ms, then
 *               cuCtxSynchronize (a call its worker waits in, for the host
 *               function's answer): print "ctxsync held H" (H 1 when it
 *               returned after the host function), 5 rounds
 *   hostfn-wait  20 rounds of cuLaunchHostFunc on the NULL stream, the
 *               application then waiting for its function with no driver
 *               call (as XLA learns a step ended): "hostfn-wait R of 20 ran"
 *   order       cross-thread stream order: 64 rounds on the NULL stream, each
 *               a short-lived thread enqueuing value 2r+1 into one word (a
 *               launch of fill_u32 on even rounds, an async copy from
 *               pageable memory on odd ones), joined, then this thread
 *               enqueuing 2r+2 the same way and reading the word back:
 *               prints "order BAD of 64" (BAD: rounds that read 2r+1, the
 *               earlier value, as if the two were run in reverse)
 *   spaced      posts sent apart: 512 rounds of cuMemsetD32Async of 2r+1
 *               into one word, a sleep of 30-135 us (long enough for the
 *               post to go out alone), the same with 2r+2, then a read back:
 *               prints "spaced BAD of 512" (BAD: rounds that read 2r+1)
 *   graph-pinned  a graph copying N words from pinned host memory to the
 *               device and back into other pinned memory, replayed; the
 *               first copy given another pinned source and replayed; the
 *               same with pageable memory on both sides, its source changed
 *               between replays: prints "add A copied B updated U pageable
 *               P" (A the first node's CUresult, B, U and P the words that
 *               came back wrong, P a failing CUresult negated), or just
 *               "add A" when A is not 0
 *   fork        allocate 4 KiB, then fork(): the child tries cuMemAlloc,
 *               cuInit and cuCtxSynchronize and prints "child A I S" (their
 *               CUresults), then waits until stdin closes; the parent, once
 *               the child has printed, memsets and reads back its allocation
 *               and prints "parent N" (0 when every word came back right)
 *               and exits, leaving the child running
 *   registered  register three buffers of this process's own memory: 4 pages
 *               from aligned_alloc (whole pages), 3 pages + 100 bytes from
 *               malloc (partial pages at its ends) and 2 pages of a shared
 *               anonymous mapping; copy the first to the device and back
 *               into the second at an offset, synchronously; the second to
 *               the device and into the third asynchronously on a stream;
 *               launch fill_u32 into the first; fork a child that writes
 *               into each and exits; unregister, register the first again,
 *               unregister: prints "registered R kept K copied C async A
 *               kernel V fork F again G" (R, G the first failing CUresult;
 *               K the bytes registration changed; C, A the bytes that came
 *               back wrong; V the kernel's word, 7; F the bytes of this
 *               process the child's writes changed)
 *   limits      the shared context's malloc heap size (cuCtxGetLimit), a set of
 *               it to 64 MiB, the heap size again and this process's L2 fetch
 *               granularity: prints "heap H set S after A l2 L" (S the set's
 *               CUresult; L the guest's own value, never another tenant's)
 * Linked against guestlib/libcuda.so.1, as an application would be.  Used by
 * test-guest-daemon and test-guest-async (tallyd in-process) and by
 * test-hostd-restart.sh (tallyd-record): the first allocation of a fresh
 * daemon always gets the device's first address, which "ptr" shows.
 */
#include <cuda.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wire/call.h" /* CALL_UUID_BLASLT */

/* Set once "ready" was printed: a host function may run as soon as it is
 * enqueued (tallyd gets it at once, as the driver would run it), so
 * die_now waits for the line to be out first. */
static atomic_bool said_ready;

static void die_now(void *data) {
  (void)data;
  while (!atomic_load(&said_ready))
    usleep(1000);
  raise(SIGKILL);
}

static void never_runs(void *data) {
  (void)data;
  printf("second host function ran\n");
  fflush(stdout);
}

static int counted;

static void hold_until_stdin_closes(void *data) {
  char c;
  (void)data;
  while (read(0, &c, 1) > 0)
    ;
}

static void count_one(void *data) {
  (void)data;
  __atomic_fetch_add(&counted, 1, __ATOMIC_RELAXED);
}

/* lc-requests (see the usage above). */
static int lc_requests(void) {
  static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
  CUmodule m;
  CUfunction f;
  CUdeviceptr p;
  unsigned v = 7;
  unsigned long long n = 16;
  void *args[] = {&p, &v, &n};
  char c;
  if (cuMemAlloc(&p, 4096) || cuModuleLoadData(&m, img) || cuModuleGetFunction(&f, m, "fill_u32"))
    return 13;
  for (int r = 0; r < 10; r++) {
    for (int k = 0; k < 3; k++) {
      if (k)
        usleep(3000);
      if (cuLaunchKernel(f, 1, 1, 1, 16, 1, 1, 0, NULL, args, NULL))
        return 13;
    }
    if (cuCtxSynchronize())
      return 13;
  }
  printf("done\n");
  fflush(stdout);
  while (read(0, &c, 1) > 0)
    ;
  return 0;
}

/* hostfn-quota (see the usage above). */
static int hostfn_quota(void) {
  CUstream s;
  CUdeviceptr p;
  CUresult r;
  if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
      cuLaunchHostFunc(s, hold_until_stdin_closes, NULL))
    return 12;
  for (int i = 0; i < 11; i++)
    if (cuLaunchHostFunc(s, count_one, NULL))
      return 12;
  if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS) /* a call: every post before it was executed */
    return 12;
  printf("ready\n");
  fflush(stdout);
  r = cuStreamSynchronize(s);
  printf("sync %d ran %d\n", (int)r, __atomic_load_n(&counted, __ATOMIC_RELAXED));
  for (int i = 0; i < 8; i++)
    if (cuLaunchHostFunc(s, count_one, NULL))
      return 12;
  r = cuStreamSynchronize(s);
  printf("again %d ran %d\n", (int)r, __atomic_load_n(&counted, __ATOMIC_RELAXED));
  return 0;
}

static int held_done;
static void hold_30ms(void *arg) {
  struct timespec ts = {0, 30000000};
  (void)arg;
  nanosleep(&ts, NULL);
  __atomic_store_n(&held_done, 1, __ATOMIC_RELEASE);
}

/* hostfn-ctxsync (see the usage above). */
static int hostfn_ctxsync(void) {
  int held = 1;
  for (int r = 0; r < 5; r++) {
    __atomic_store_n(&held_done, 0, __ATOMIC_RELEASE);
    if (cuLaunchHostFunc(NULL, hold_30ms, NULL) || cuCtxSynchronize())
      return 16;
    held &= __atomic_load_n(&held_done, __ATOMIC_ACQUIRE);
  }
  printf("ctxsync held %d\n", held);
  return 0;
}

/* hostfn-wait (see the usage above). */
static int ran_round;

static void note_round(void *data) {
  __atomic_store_n(&ran_round, (int)(intptr_t)data, __ATOMIC_RELEASE);
}

static int hostfn_wait(void) {
  int ran = 0;
  for (int r = 1; r <= 20; r++) {
    if (cuLaunchHostFunc(NULL, note_round, (void *)(intptr_t)r))
      return 16;
    for (int i = 0; i < 2000000 && __atomic_load_n(&ran_round, __ATOMIC_ACQUIRE) != r; i++)
      usleep(5);
    ran += __atomic_load_n(&ran_round, __ATOMIC_ACQUIRE) == r;
  }
  printf("hostfn-wait %d of 20 ran\n", ran);
  return 0;
}

/* sync-word (see the usage above). */
static int sync_word(int off) {
  static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
  CUmodule m;
  CUfunction f;
  CUstream st;
  CUdeviceptr p;
  unsigned v = 7, got = 0;
  unsigned long long n = 4;
  void *args[] = {&p, &v, &n};
  int bad = 0, held;
  CUresult e, a;
  if (off)
    setenv("TALLY_LC_SYNC_WORD", "0", 1);
  setenv("TALLY_LC_SPIN_US", "1000000", 1); /* the word, not the fallback, answers */
  if (cuModuleLoadData(&m, img) || cuModuleGetFunction(&f, m, "fill_u32") ||
      cuMemAlloc(&p, 4096) || cuStreamCreate(&st, CU_STREAM_NON_BLOCKING) ||
      cuLaunchHostFunc(st, hold_30ms, NULL) ||
      cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, args, NULL) || cuStreamSynchronize(st))
    return 15;
  held = __atomic_load_n(&held_done, __ATOMIC_ACQUIRE);
  if (cuMemcpyDtoH(&got, p, sizeof(got)))
    return 15;
  printf("held %d value %u\n", held, got);
  for (v = 100; v < 120; v++)
    if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, args, NULL) || cuStreamSynchronize(st) ||
        cuMemcpyDtoH(&got, p, sizeof(got)) || got != v)
      bad++;
  printf("rounds %d\n", bad);
  /* A stream only tallyd can refuse: the launch is a post, its error kept
   * for the next synchronisation, which the word cannot answer. */
  e = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, (CUstream)0xdead0, args, NULL);
  if (e == CUDA_SUCCESS)
    e = cuStreamSynchronize(st);
  a = cuStreamSynchronize(st);
  printf("error %d after %d\n", (int)e, (int)a);
  return 0;
}

/* order (see the usage above): one round's enqueue of v into *p. */
typedef struct order_post {
  CUcontext ctx;
  CUfunction fill;
  CUdeviceptr p;
  unsigned v;
  int copy; /* 0: a launch, 1: a copy */
  CUresult r;
} order_post_t;

static CUresult order_enqueue(order_post_t *o) {
  unsigned long long n = 1;
  unsigned v = o->v;
  void *args[] = {&o->p, &v, &n};
  if (!o->copy)
    return cuLaunchKernel(o->fill, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
  /* The caller may reuse v at once: pageable memory, taken by the call. */
  return cuMemcpyHtoDAsync(o->p, &v, sizeof(v), NULL);
}

static void *order_thread(void *arg) {
  order_post_t *o = arg;
  o->r = cuCtxSetCurrent(o->ctx);
  if (o->r == CUDA_SUCCESS)
    o->r = order_enqueue(o);
  return NULL;
}

/* spaced (see the usage above). */
static int spaced(void) {
  CUcontext c;
  CUdeviceptr p;
  int bad = 0, rounds = 512;
  if (cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c) || cuMemAlloc(&p, 4096))
    return 14;
  for (int r = 0; r < rounds; r++) {
    unsigned got = 0;
    for (unsigned v = 2u * (unsigned)r + 1; v <= 2u * (unsigned)r + 2; v++) {
      struct timespec pause = {0, (30 + (r % 8) * 15) * 1000L};
      if (cuMemsetD32Async(p, v, 1, NULL))
        return 14;
      nanosleep(&pause, NULL); /* asleep: the daemon's threads keep the CPUs */
    }
    if (cuMemcpyDtoH(&got, p, sizeof(got)))
      return 14;
    if (got != 2u * (unsigned)r + 2)
      bad++;
  }
  printf("spaced %d of %d\n", bad, rounds);
  return 0;
}

static int order(void) {
  static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
  order_post_t o = {0};
  CUmodule m;
  int bad = 0, rounds = 64;
  if (cuCtxGetCurrent(&o.ctx) ||
      (!o.ctx && (cuDevicePrimaryCtxRetain(&o.ctx, 0) || cuCtxSetCurrent(o.ctx))) ||
      cuMemAlloc(&o.p, 4096) || cuModuleLoadData(&m, img) ||
      cuModuleGetFunction(&o.fill, m, "fill_u32") || cuMemsetD32Async(o.p, 0, 1, NULL))
    return 14; /* the memset: this thread posts first, so later threads get later slots */
  for (int r = 0; r < rounds; r++) {
    pthread_t th;
    unsigned got = 0;
    o.v = 2u * (unsigned)r + 1;
    o.copy = r & 1;
    if (pthread_create(&th, NULL, order_thread, &o) != 0 || pthread_join(th, NULL) != 0 ||
        o.r != CUDA_SUCCESS)
      return 14;
    o.v++; /* the join orders the thread's enqueue before this one */
    if (order_enqueue(&o) || cuMemcpyDtoH(&got, o.p, sizeof(got)))
      return 14;
    if (got != o.v)
      bad++;
  }
  printf("order %d of %d\n", bad, rounds);
  return 0;
}

/* One 1-D copy of n bytes as a graph copy node's parameters. */
static CUDA_MEMCPY3D copy1d(CUmemorytype st, const void *sh, CUdeviceptr sd, CUmemorytype dt,
                            void *dh, CUdeviceptr dd, size_t n) {
  CUDA_MEMCPY3D c;
  memset(&c, 0, sizeof(c));
  c.srcMemoryType = st, c.srcHost = sh, c.srcDevice = sd;
  c.dstMemoryType = dt, c.dstHost = dh, c.dstDevice = dd;
  c.WidthInBytes = n, c.Height = 1, c.Depth = 1;
  return c;
}

/* "registered": see the usage above. */
static int registered(void) {
  static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
  const size_t page = (size_t)sysconf(_SC_PAGESIZE), na = 4 * page, nb = 3 * page + 100,
               nc = 2 * page;
  uint8_t *a = aligned_alloc(page, na), *b = malloc(nb), *want = malloc(na), *sb = malloc(nb),
          sc0;
  uint8_t *c = mmap(NULL, nc, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CUdeviceptr d = 0, hp;
  CUstream st = NULL;
  CUmodule m;
  CUfunction f;
  uint32_t v = 7, word = 0;
  uint64_t n = 4;
  void *args[] = {&hp, &v, &n};
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY, again = CUDA_ERROR_UNKNOWN;
  size_t kept = 0, copied = 0, async = 0, forked = 0;
  pid_t pid;
  int status;
  if (!a || !b || !want || !sb || c == MAP_FAILED) {
    printf("registered %d\n", (int)r);
    return 1;
  }
  for (size_t i = 0; i < na; i++)
    a[i] = want[i] = (uint8_t)(i * 7 + 3);
  memset(b, 0, nb);
  memset(c, 0, nc);
  r = cuMemHostRegister(a, na, 0);
  if (r == CUDA_SUCCESS)
    r = cuMemHostRegister(b, nb, 0);
  if (r == CUDA_SUCCESS)
    r = cuMemHostRegister(c, nc, 0);
  for (size_t i = 0; i < na; i++)
    kept += a[i] != want[i];
  if (r == CUDA_SUCCESS)
    r = cuMemAlloc(&d, na);
  if (r == CUDA_SUCCESS)
    r = cuMemcpyHtoD(d, a, na);
  if (r == CUDA_SUCCESS)
    r = cuMemcpyDtoH(b, d + 5, nb);
  for (size_t i = 0; r == CUDA_SUCCESS && i < nb; i++)
    copied += b[i] != want[i + 5];
  if (r == CUDA_SUCCESS)
    r = cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS)
    r = cuMemsetD8(d, 0, na);
  if (r == CUDA_SUCCESS)
    r = cuMemcpyHtoDAsync(d + 1, b, nb, st);
  if (r == CUDA_SUCCESS)
    r = cuMemcpyDtoHAsync(c, d + page, nc, st);
  if (r == CUDA_SUCCESS)
    r = cuStreamSynchronize(st);
  for (size_t i = 0; r == CUDA_SUCCESS && i < nc; i++)
    async += c[i] != b[page - 1 + i];
  hp = (CUdeviceptr)(uintptr_t)a;
  if (r == CUDA_SUCCESS && (r = cuModuleLoadData(&m, img)) == CUDA_SUCCESS &&
      (r = cuModuleGetFunction(&f, m, "fill_u32")) == CUDA_SUCCESS &&
      (r = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL)) == CUDA_SUCCESS &&
      (r = cuCtxSynchronize()) == CUDA_SUCCESS)
    memcpy(&word, a, sizeof(word));
  /* The child's writes: a and b are this process's private memory (its own
   * again after the fork, as natively), c is shared memory (the parent sees
   * the write, as natively). */
  memcpy(want, a, na);
  memcpy(sb, b, nb);
  sc0 = (uint8_t)(c[0] ^ 0xff); /* what the child writes there */
  fflush(stdout);
  if ((pid = fork()) == 0) {
    a[0] ^= 0xff, a[na - 1] ^= 0xff, b[page] ^= 0xff, c[0] ^= 0xff;
    _exit(0);
  }
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
    forked = na;
  for (size_t i = 0; i < na; i++)
    forked += a[i] != want[i];
  for (size_t i = 0; i < nb; i++)
    forked += b[i] != sb[i];
  forked += c[0] != sc0;
  if (r == CUDA_SUCCESS)
    r = cuMemHostUnregister(a);
  if (r == CUDA_SUCCESS)
    r = cuMemHostUnregister(b);
  if (r == CUDA_SUCCESS)
    r = cuMemHostUnregister(c);
  for (size_t i = 0; i < na; i++)
    kept += a[i] != want[i];
  again = cuMemHostRegister(a, na, 0);
  if (again == CUDA_SUCCESS)
    again = cuMemHostUnregister(a);
  printf("registered %d kept %zu copied %zu async %zu kernel %u fork %zu again %d\n", (int)r, kept,
         copied, async, word, forked, (int)again);
  free(a), free(b), free(want), free(sb);
  munmap(c, nc);
  return 0;
}

/* graph-pinned's pageable part: a graph copying W words from pageable
 * memory to d and back into other pageable memory, replayed after the
 * source changed (synchronising the context), and after the exec's upload
 * was given another source (synchronising the stream); the words that came
 * back wrong, or a failing CUresult negated. */
static int graph_pageable(CUdeviceptr d, CUstream s) {
  enum { W = 256 };
  static uint32_t src[W], src2[W], dst[W];
  CUgraph g;
  CUgraphExec e;
  CUgraphNode up, down;
  CUresult r;
  int wrong = 0;
  for (int i = 0; i < W; i++)
    src[i] = (uint32_t)i * 3, src2[i] = (uint32_t)i * 7, dst[i] = 0;
  CUDA_MEMCPY3D c = copy1d(CU_MEMORYTYPE_HOST, src, 0, CU_MEMORYTYPE_DEVICE, NULL, d, W * 4);
  if ((r = cuGraphCreate(&g, 0)) != CUDA_SUCCESS ||
      (r = cuGraphAddMemcpyNode(&up, g, NULL, 0, &c, NULL)) != CUDA_SUCCESS)
    return -(int)r;
  c = copy1d(CU_MEMORYTYPE_DEVICE, NULL, d, CU_MEMORYTYPE_HOST, dst, 0, W * 4);
  if ((r = cuGraphAddMemcpyNode(&down, g, &up, 1, &c, NULL)) != CUDA_SUCCESS ||
      (r = cuGraphInstantiateWithFlags(&e, g, 0)) != CUDA_SUCCESS ||
      (r = cuGraphLaunch(e, s)) != CUDA_SUCCESS || (r = cuStreamSynchronize(s)) != CUDA_SUCCESS)
    return -(int)r;
  for (int i = 0; i < W; i++)
    wrong += dst[i] != src[i], src[i] += 1;
  if ((r = cuGraphLaunch(e, s)) != CUDA_SUCCESS || (r = cuCtxSynchronize()) != CUDA_SUCCESS)
    return -(int)r;
  for (int i = 0; i < W; i++)
    wrong += dst[i] != src[i];
  c = copy1d(CU_MEMORYTYPE_HOST, src2, 0, CU_MEMORYTYPE_DEVICE, NULL, d, W * 4);
  if ((r = cuGraphExecMemcpyNodeSetParams(e, up, &c, NULL)) != CUDA_SUCCESS ||
      (r = cuGraphLaunch(e, s)) != CUDA_SUCCESS || (r = cuStreamSynchronize(s)) != CUDA_SUCCESS)
    return -(int)r;
  for (int i = 0; i < W; i++)
    wrong += dst[i] != src2[i];
  if ((r = cuGraphExecDestroy(e)) != CUDA_SUCCESS || (r = cuGraphDestroy(g)) != CUDA_SUCCESS)
    return -(int)r;
  return wrong;
}

/* "graph-pinned": see the usage above. */
static int graph_pinned(void) {
  enum { W = 256 };
  uint32_t *in, *in2, *out;
  CUdeviceptr d;
  CUstream s;
  CUgraph g;
  CUgraphExec e;
  CUgraphNode up, down;
  CUresult r;
  int wrong = 0, wrong2 = 0;
  if (cuMemAllocHost((void **)&in, W * 4) != CUDA_SUCCESS ||
      cuMemAllocHost((void **)&in2, W * 4) != CUDA_SUCCESS ||
      cuMemAllocHost((void **)&out, W * 4) != CUDA_SUCCESS ||
      cuMemAlloc(&d, W * 4) != CUDA_SUCCESS ||
      cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      cuGraphCreate(&g, 0) != CUDA_SUCCESS)
    return 4;
  for (int i = 0; i < W; i++)
    in[i] = (uint32_t)i + 1, in2[i] = (uint32_t)i + 1000, out[i] = 0;
  CUDA_MEMCPY3D c = copy1d(CU_MEMORYTYPE_HOST, in, 0, CU_MEMORYTYPE_DEVICE, NULL, d, W * 4);
  if ((r = cuGraphAddMemcpyNode(&up, g, NULL, 0, &c, NULL)) != CUDA_SUCCESS) {
    printf("add %d\n", (int)r);
    return 0;
  }
  c = copy1d(CU_MEMORYTYPE_DEVICE, NULL, d, CU_MEMORYTYPE_UNIFIED, NULL,
             (CUdeviceptr)(uintptr_t)out, W * 4);
  if (cuGraphAddMemcpyNode(&down, g, &up, 1, &c, NULL) != CUDA_SUCCESS ||
      cuGraphInstantiateWithFlags(&e, g, 0) != CUDA_SUCCESS ||
      cuGraphLaunch(e, s) != CUDA_SUCCESS || cuStreamSynchronize(s) != CUDA_SUCCESS)
    return 5;
  for (int i = 0; i < W; i++)
    wrong += out[i] != in[i];
  c = copy1d(CU_MEMORYTYPE_HOST, in2, 0, CU_MEMORYTYPE_DEVICE, NULL, d, W * 4);
  if (cuGraphExecMemcpyNodeSetParams(e, up, &c, NULL) != CUDA_SUCCESS ||
      cuGraphLaunch(e, s) != CUDA_SUCCESS || cuStreamSynchronize(s) != CUDA_SUCCESS)
    return 6;
  for (int i = 0; i < W; i++)
    wrong2 += out[i] != in2[i];
  printf("add 0 copied %d updated %d pageable %d\n", wrong, wrong2, graph_pageable(d, s));
  return cuGraphExecDestroy(e) == CUDA_SUCCESS && cuGraphDestroy(g) == CUDA_SUCCESS ? 0 : 7;
}

/* "fork": see the usage above. */
static int fork_child(void) {
  CUdeviceptr p, q;
  uint32_t back[64];
  int done[2], bad = 0;
  char c;
  pid_t pid;
  if (cuMemAlloc(&p, sizeof(back)) != CUDA_SUCCESS || pipe(done) != 0)
    return 4;
  fflush(stdout);
  if ((pid = fork()) < 0)
    return 5;
  if (pid == 0) {
    CUresult a = cuMemAlloc(&q, 64), i = cuInit(0), s = cuCtxSynchronize();
    char line[64]; /* on the stack: no stdio buffer to allocate in a child */
    int n = snprintf(line, sizeof(line), "child %d %d %d\n", (int)a, (int)i, (int)s);
    if (write(1, line, (size_t)n) != n)
      _exit(7);
    close(done[1]);
    while (read(0, &c, 1) > 0)
      ;
    _exit(0);
  }
  close(done[1]);
  while (read(done[0], &c, 1) > 0)
    ;
  if (cuMemsetD32(p, 0x5a5a5a5au, 64) != CUDA_SUCCESS ||
      cuMemcpyDtoH(back, p, sizeof(back)) != CUDA_SUCCESS)
    bad = -1;
  for (int k = 0; bad == 0 && k < 64; k++)
    bad = back[k] != 0x5a5a5a5au;
  printf("parent %d\n", bad);
  return cuMemFree(p) == CUDA_SUCCESS ? 0 : 6;
}

int main(int argc, char **argv) {
  CUdeviceptr p;
  CUresult r;
  if (argc != 2)
    return 2;
  r = cuInit(0);
  if (strcmp(argv[1], "init") == 0) {
    printf("init %d\n", (int)r);
    return 0;
  }
  if (r != CUDA_SUCCESS)
    return 3;
  if (strcmp(argv[1], "blaslt-layout") == 0) {
    static const CUuuid id = {CALL_UUID_BLASLT};
    const void *const *t = NULL;
    void *a = NULL, *b = NULL;
    if (cuGetExportTable((const void **)&t, &id) != CUDA_SUCCESS || !t)
      return 4;
    CUresult (*slot3)(void **, void **, const void *, void *, void *) =
        (CUresult(*)(void **, void **, const void *, void *, void *))t[4];
    printf("slot3 %d\n", (int)slot3(&a, &b, t, NULL, NULL));
    free(a);
    free(b);
    return 0;
  }
  if (strcmp(argv[1], "alloc-wait") == 0 || strcmp(argv[1], "alloc-wait-sync") == 0) {
    char c;
    if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS)
      return 4;
    printf("ptr 0x%llx\n", (unsigned long long)p);
    fflush(stdout);
    while (read(0, &c, 1) > 0)
      ;
    if (strcmp(argv[1], "alloc-wait-sync") == 0) {
      CUresult s = cuCtxSynchronize();
      printf("after %d %d\n", (int)s, (int)cuMemAlloc(&p, 4096));
    }
    return 0;
  }
  if (strcmp(argv[1], "healthy") == 0) {
    unsigned v[64] = {0};
    r = cuMemAlloc(&p, 4096);
    if (r == CUDA_SUCCESS)
      printf("ptr 0x%llx\n", (unsigned long long)p);
    if (r == CUDA_SUCCESS)
      r = cuMemsetD32(p, 7, 64);
    if (r == CUDA_SUCCESS)
      r = cuMemcpyDtoH(v, p, sizeof(v));
    if (r == CUDA_SUCCESS)
      r = cuCtxSynchronize();
    if (r == CUDA_SUCCESS && (v[0] != 7 || v[63] != 7))
      r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS)
      r = cuMemFree(p);
    printf("healthy %d\n", (int)r);
    return 0;
  }
  if (strcmp(argv[1], "stray-memset") == 0) {
    r = cuMemAlloc(&p, 4096);
    if (r == CUDA_SUCCESS) {
      printf("ptr 0x%llx\n", (unsigned long long)p);
      r = cuMemsetD32(p + 4096, 7, 1);
    }
    printf("memset %d\n", (int)r);
    return 0;
  }
  if (strcmp(argv[1], "pinned-ops") == 0) {
    uint8_t *h, out[64];
    CUstream st;
    CUdeviceptr hp;
    r = cuMemHostAlloc((void **)&h, 4096, 0);
    if (r == CUDA_SUCCESS)
      r = cuStreamCreate(&st, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS)
      r = cuMemAlloc(&p, 4096);
    hp = (CUdeviceptr)(uintptr_t)h;
    if (r == CUDA_SUCCESS)
      memset(h, 0, 4096), r = cuMemsetD8Async(hp + 16, 0x5a, 32, st);
    if (r == CUDA_SUCCESS)
      r = cuMemsetD32Async(hp + 48, 0x01020304, 1, st);
    if (r == CUDA_SUCCESS)
      r = cuMemcpyDtoDAsync(p, hp, 64, st);
    if (r == CUDA_SUCCESS)
      r = cuMemcpyDtoDAsync(hp + 1024, p, 64, st);
    if (r == CUDA_SUCCESS)
      r = cuMemcpyDtoH(out, hp + 1024, sizeof(out));
    if (r == CUDA_SUCCESS)
      r = cuStreamSynchronize(st);
    for (int i = 0; r == CUDA_SUCCESS && i < 64; i++) {
      static const uint8_t word[4] = {4, 3, 2, 1};
      uint8_t want = i >= 16 && i < 48 ? 0x5a : i >= 48 && i < 52 ? word[i - 48] : 0;
      if (out[i] != want)
        r = CUDA_ERROR_UNKNOWN;
    }
    printf("pinned %d\n", (int)r);
    return 0;
  }
  if (strcmp(argv[1], "pinned-kernel") == 0) {
    static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
    uint32_t *h = NULL, *big = NULL, v = 7;
    uint64_t n = 4;
    CUdeviceptr hp;
    CUmodule m;
    CUfunction f;
    CUstream st = NULL;
    void *args[] = {&hp, &v, &n};
    CUresult l = CUDA_ERROR_UNKNOWN, sy = CUDA_ERROR_UNKNOWN, l2 = CUDA_ERROR_UNKNOWN,
             lb = CUDA_ERROR_UNKNOWN, fr = CUDA_ERROR_UNKNOWN, lc = CUDA_ERROR_UNKNOWN;
    uint32_t value = 0, kept = 0, second = 0, gone = 0;
    if (cuMemHostAlloc((void **)&h, 4096, 0) == CUDA_SUCCESS &&
        cuModuleLoadData(&m, img) == CUDA_SUCCESS &&
        cuModuleGetFunction(&f, m, "fill_u32") == CUDA_SUCCESS &&
        cuStreamCreate(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
      h[0] = 0;
      hp = (CUdeviceptr)(uintptr_t)h;
      l = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
      h[10] = 5; /* the host's own write while the kernel may run: kept */
      sy = cuCtxSynchronize();
      value = h[0];
      kept = h[10];
      /* Into the middle of the allocation, on another stream, which its
       * own synchronisation covers. */
      v = 9;
      hp = (CUdeviceptr)(uintptr_t)(h + 2);
      l2 = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, args, NULL);
      if (cuStreamSynchronize(st) == CUDA_SUCCESS)
        second = h[2] == 9 && h[5] == 9 && h[1] == 7 && h[6] == 0 ? 9 : h[2];
      /* On a stream destroyed before the context's synchronisation. */
      {
        CUstream st2 = NULL;
        v = 11;
        hp = (CUdeviceptr)(uintptr_t)(h + 8);
        if (cuStreamCreate(&st2, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS &&
            cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st2, args, NULL) == CUDA_SUCCESS &&
            cuStreamDestroy(st2) == CUDA_SUCCESS && cuCtxSynchronize() == CUDA_SUCCESS)
          gone = h[8];
      }
      /* While a capture is open: not mirrored over TCP (the launch may be
       * captured without its copies), refused; over shm captured. */
      if (cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_RELAXED) == CUDA_SUCCESS) {
        CUgraph g = NULL;
        hp = (CUdeviceptr)(uintptr_t)h;
        lc = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, st, args, NULL);
        if (cuStreamEndCapture(st, &g) == CUDA_SUCCESS && g)
          (void)cuGraphDestroy(g);
      }
      /* Larger than any mirror: refused over TCP (shared over shm). */
      if (cuMemHostAlloc((void **)&big, 128 << 10, 0) == CUDA_SUCCESS) {
        hp = (CUdeviceptr)(uintptr_t)big;
        lb = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
        (void)cuCtxSynchronize();
        (void)cuMemFreeHost(big);
      }
      fr = cuMemFreeHost(h);
    }
    printf("launch %d sync %d value %u kept %u second %u gone %u capture %d big %d free %d\n",
           (int)l, (int)sy, value, kept, second, gone, (int)lc, (int)lb, (int)fr);
    (void)l2;
    return 0;
  }
  if (strcmp(argv[1], "fault") == 0) {
    /* The recording device's module format (hostd/gpu-record.c). */
    static const char img[] = "TALLYREC\nkernel fault\n";
    CUmodule m;
    CUfunction f;
    if (cuMemAlloc(&p, 4096) != CUDA_SUCCESS)
      return 4;
    printf("ptr 0x%llx\n", (unsigned long long)p);
    if (cuModuleLoadData(&m, img) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "fault") != CUDA_SUCCESS ||
        cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
      return 4;
    printf("sync %d\n", (int)cuCtxSynchronize());
    printf("after %d\n", (int)cuMemAlloc(&p, 4096));
    return 0;
  }
  if (strcmp(argv[1], "die") == 0) {
    static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\nglobal table 256\n";
    CUstream s;
    CUevent e;
    CUmodule m;
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS || cuStreamCreate(&s, 0) != CUDA_SUCCESS ||
        cuEventCreate(&e, 0) != CUDA_SUCCESS || cuModuleLoadData(&m, img) != CUDA_SUCCESS)
      return 5;
    printf("ready\n");
    fflush(stdout);
    raise(SIGKILL);
    return 6;
  }
  if (strcmp(argv[1], "hostfn-die") == 0) {
    CUstream s;
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuLaunchHostFunc(s, die_now, NULL) || cuMemsetD8Async(p, 1, 1 << 20, s) ||
        cuLaunchHostFunc(s, never_runs, NULL))
      return 7;
    printf("ready\n");
    fflush(stdout);
    atomic_store(&said_ready, true);
    (void)cuStreamSynchronize(s);
    return 8; /* not reached: the host function killed us */
  }
  if (strcmp(argv[1], "graph-hostfn-die") == 0) {
    CUstream s;
    CUgraph g;
    CUgraphExec e;
    CUgraphNode hn, ms, last;
    CUDA_HOST_NODE_PARAMS die = {.fn = die_now}, never = {.fn = never_runs};
    CUDA_MEMSET_NODE_PARAMS m = {.dst = 0, .value = 1, .elementSize = 1, .width = 1 << 20,
                                 .height = 1};
    if (cuMemAlloc(&p, 1 << 20) != CUDA_SUCCESS || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
        cuGraphCreate(&g, 0) || cuGraphAddHostNode(&hn, g, NULL, 0, &die))
      return 7;
    m.dst = p;
    if (cuGraphAddMemsetNode(&ms, g, &hn, 1, &m, NULL) ||
        cuGraphAddHostNode(&last, g, &ms, 1, &never) || cuGraphInstantiateWithFlags(&e, g, 0) ||
        cuGraphLaunch(e, s))
      return 7;
    printf("ready\n");
    fflush(stdout);
    atomic_store(&said_ready, true);
    (void)cuStreamSynchronize(s);
    return 8; /* not reached: the host node's function killed us */
  }
  if (strcmp(argv[1], "pinned-reuse") == 0) {
    static const char img[] = "TALLYREC\nkernel fill_u32 8,4,8\n";
    uint32_t *h1 = NULL, *h2 = NULL, v = 7;
    uint64_t n = 4;
    CUdeviceptr hp;
    CUmodule m;
    CUfunction f;
    void *args[] = {&hp, &v, &n};
    CUresult l = CUDA_ERROR_UNKNOWN;
    if (cuMemHostAlloc((void **)&h1, 256 << 10, 0) != CUDA_SUCCESS || cuMemFreeHost(h1) != 0 ||
        cuMemHostAlloc((void **)&h2, 256 << 10, 0) != CUDA_SUCCESS ||
        cuModuleLoadData(&m, img) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "fill_u32") != CUDA_SUCCESS)
      return 9;
    h2[0] = 0;
    hp = (CUdeviceptr)(uintptr_t)h2;
    l = cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL);
    if (l == CUDA_SUCCESS)
      l = cuCtxSynchronize();
    printf("launch %d value %u\n", (int)l, h2[0]);
    return cuMemFreeHost(h2) == CUDA_SUCCESS ? 0 : 10;
  }
  if (strcmp(argv[1], "pinned-die") == 0) {
    void *h;
    if (cuMemHostAlloc(&h, 1 << 20, 0) != CUDA_SUCCESS)
      return 9;
    memset(h, 0x5a, 1 << 20);
    printf("ready\n");
    fflush(stdout);
    raise(SIGKILL);
    return 6;
  }
  if (strcmp(argv[1], "lc-requests") == 0)
    return lc_requests();
  if (strcmp(argv[1], "hostfn-quota") == 0)
    return hostfn_quota();
  if (strcmp(argv[1], "sync-word") == 0 || strcmp(argv[1], "sync-reply") == 0)
    return sync_word(strcmp(argv[1], "sync-reply") == 0);
  if (strcmp(argv[1], "hostfn-ctxsync") == 0)
    return hostfn_ctxsync();
  if (strcmp(argv[1], "hostfn-wait") == 0)
    return hostfn_wait();
  if (strcmp(argv[1], "order") == 0)
    return order();
  if (strcmp(argv[1], "spaced") == 0)
    return spaced();
  if (strcmp(argv[1], "copy-loop") == 0) {
    static char buf[16 << 20];
    if (cuMemAlloc(&p, sizeof(buf)) != CUDA_SUCCESS)
      return 10;
    printf("copying\n");
    fflush(stdout);
    while (cuMemcpyHtoD(p, buf, sizeof(buf)) == CUDA_SUCCESS)
      ;
    return 11;
  }
  if (strcmp(argv[1], "limits") == 0) {
    size_t heap = 0, after = 0, l2 = 0;
    CUresult g = cuCtxGetLimit(&heap, CU_LIMIT_MALLOC_HEAP_SIZE);
    CUresult s = cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64u << 20);
    if (g != CUDA_SUCCESS || cuCtxGetLimit(&after, CU_LIMIT_MALLOC_HEAP_SIZE) != CUDA_SUCCESS ||
        cuCtxGetLimit(&l2, CU_LIMIT_MAX_L2_FETCH_GRANULARITY) != CUDA_SUCCESS)
      return 12;
    printf("heap %zu set %d after %zu l2 %zu\n", heap, (int)s, after, l2);
    return 0;
  }
  if (strcmp(argv[1], "fork") == 0)
    return fork_child();
  if (strcmp(argv[1], "registered") == 0)
    return registered();
  if (strcmp(argv[1], "graph-pinned") == 0)
    return graph_pinned();
  if (strcmp(argv[1], "stream") == 0) {
    CUstream s;
    r = cuStreamCreate(&s, 0);
    printf("stream %s\n", r == CUDA_SUCCESS ? "ok" : "failed");
    return 0;
  }
  return 2;
}
