/* gpu-record.c: the recording GPU backend, for unit tests only.
 *
 * Stands in for a GPU so hostd's logic (tables, range checks, deferred
 * errors, cleanup) and the guest library can be tested on machines without
 * one.  Device memory is host memory at fake addresses starting at
 * RECORD_BASE (so a stray host pointer is never mistaken for it); copies and
 * memsets really move bytes, so data paths can be checked end to end.
 * Modules are a tiny text format, one statement per line:
 *     TALLYREC
 *     kernel NAME SIZE[@ALIGN][,...] (parameter sizes, naturally aligned up
 *                                     to 8 bytes unless @ALIGN says)
 *     global NAME BYTES
 * Any other image (a real fatbin from cudart) loads as a module without
 * kernels, so cudart can initialise.  A few kernels do something: "fill_u32(ptr, u32 value, u64
 * count)" writes count values, "tex_copy(u64 tex, ptr out, u64 n)" copies the first n bytes a
 * texture object reads to out, "tmap_copy(ptr out, CUtensorMap map)" copies the 128 bytes
 * of its by-value tensor-map parameter to out, "fault()" makes the next synchronisation fail
 * with CUDA_ERROR_ILLEGAL_ADDRESS (sticky, as a real fault is), and "uses_malloc" and
 * "uses_printf" stand for kernels that call the device's malloc or printf: once one was
 * launched, the context's heap (or printf FIFO) size can no longer be set, as on the driver
 * (the context's limits, below).  Everything else is only counted
 * (hostd_record_count; event records also per stream, and by whether the stream's creating thread
 * made them: hostd_record_stream_records).  Functions load lazily, as with the driver's default
 * CUDA_MODULE_LOADING=LAZY: until a function attribute query loads one, the three attributes that
 * need a loaded function answer CUDA_ERROR_FUNCTION_NOT_LOADED.  This never counts as GPU coverage.
 *
 * Context lifetime is modelled as on the real driver: every thread must
 * thread_enter before its first call, and after shutdown (what a restart
 * of tallyd does to the real context) no stream, event, module, function
 * or address from before may be named again, and the fault is gone.  Such
 * a call answers CUDA_ERROR_CONTEXT_IS_DESTROYED and is counted
 * (HOSTD_RECORD_STALE), so a test fails when hostd uses a handle it should
 * not have kept.  A fault is sticky until shutdown, as a real one is for
 * the whole process (tallyd restarts: hostd/restart.c).
 *
 * Streams are modelled only as far as host functions need (hostd/hostfn.c):
 * work runs at once, except on a stream blocked by a host-function gate,
 * where copies, memsets, launches, event records and further host functions
 * queue (bytes copied) and run, in order, when gate_open opens it.  A
 * synchronisation of such a stream (or of an event recorded behind the
 * gate, or a synchronous copy on it) waits; a query answers
 * CUDA_ERROR_NOT_READY.  Not modelled: a stream made to wait (stream_wait)
 * for an event recorded behind another stream's gate does not wait.
 *
 * Lock story: one mutex guards all state; tenants call in from many threads.
 * `cv` is signalled whenever queued work ran.  Reached callbacks are called
 * without the lock (they may open gates, re-entering gate_open).
 */
#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "rewrite/rw.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RECORD_BASE      0x100000000000ull /* 16 TiB: far from any heap or stack */
#define RECORD_MEM_TOTAL (80ull << 30)     /* what mem_info reports, an H200-like 80 GiB */
#define MAX_KERNELS      64
#define VIEW_BIT         0x4 /* handles are multiples of 0x10: bit 2 marks a view's function */
#define RECORD_MAX_PARAMS 32
#define BLOCK_LOG_MAX     (1u << 16)

/* ---- records and their lists ----
 * Every kind of record the device keeps (allocations, physical memory,
 * reservations and pools, modules, streams, events, graphs, arrays,
 * texture / surface objects) begins with a rec_link_t, so one set of list
 * helpers (below) serves them all.  link.h names the record: its handle, or
 * for an allocation or a reservation its address; no two records of a list
 * share one (handles come from one counter, addresses from one bump).
 * Lists are newest first, and read or changed only with the lock held. */
typedef struct rec_link {
  struct rec_link *next;
  uint64_t h;
} rec_link_t;

/* for each record v (of type T) of list, newest first */
#define REC_EACH(T, v, list) for (T *v = (T *)(list); v; v = (T *)v->link.next)

typedef struct rec_phys rec_phys_t;

typedef struct rec_alloc {
  rec_link_t link;  /* link.h: its address */
  uint64_t size;
  uint8_t *bytes;   /* owned, except for a mapping (phys set) */
  rec_phys_t *phys; /* a VMM mapping: bytes lie in this physical allocation */
  uint64_t pool;    /* a stream-ordered allocation: its pool */
  unsigned gref;    /* graphs and execs holding a captured free of it (OP_GFREE) */
} rec_alloc_t;

/* VMM physical memory: freed when released and unmapped, as on the driver. */
struct rec_phys {
  rec_link_t link;
  uint64_t size;
  uint8_t *bytes;
  uint32_t refs, maps;
};

/* A reserved address range (VMM) or a memory pool: a handle and numbers. */
typedef struct rec_span {
  rec_link_t link; /* link.h: a reservation's address, a pool's handle */
  uint64_t size;   /* a reservation's bytes; a pool's bytes in use */
  uint64_t attr[CU_MEMPOOL_ATTR_USED_MEM_HIGH + 1]; /* pools: attributes by number */
} rec_span_t;

typedef struct rec_kernel {
  char name[64];
  uint32_t nparams, off[RECORD_MAX_PARAMS], size[RECORD_MAX_PARAMS];
  bool loaded;                    /* a query loaded it (lazy loading) */
  int32_t attr[CALL_FUNC_ATTRS]; /* cuFuncGetAttribute values, set by Set */
  int cache;                      /* cuFuncSetCacheConfig's preference (0: none) */
} rec_kernel_t;

/* The attributes the driver answers only for loaded functions (cuda.h,
 * cuFuncGetAttribute). */
static bool needs_load(int attr) {
  return attr == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ||
         attr == CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES ||
         attr == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
}

typedef struct rec_module {
  rec_link_t link;
  uint64_t view; /* the module view of a library (cuLibraryGetModule), or 0;
                    its function handles are the kernel handles | VIEW_BIT */
  int nk;
  rec_kernel_t k[MAX_KERNELS];
  uint64_t kh[MAX_KERNELS]; /* kernel handles */
  char gname[8][64];
  uint64_t gaddr[8], gsize[8];
  int ng;
} rec_module_t;

#define SNAP_PRIO_GREATEST (-5) /* the device's greatest stream priority */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

/* ---- streams, gates and queued work ---- */
typedef struct rec_gate {
  uint32_t n;
  uint32_t *words; /* n gate words, then n reach words (host_fn's word) */
} rec_gate_t;

enum {
  OP_HTOD,
  OP_DTOH,
  OP_DTOD,
  OP_MEMSET,
  OP_LAUNCH,
  OP_RECORD,
  OP_HOSTFN,
  OP_NOP,
  OP_EVWAIT, /* wait until an event's queued records have run */
  OP_CHILD,  /* a graph's child graph (replayed in place) */
  OP_WRITE64, /* stream_write64: b into the 8 host bytes at dst */
  OP_FREE,    /* mem_free_async: allocation a */
  OP_GFREE,   /* mem_free_async captured, or a free node: nothing at a replay; allocation a
                 is the graph's, freed with the last graph or exec holding this node (gref) */
  OP_GALLOC   /* an allocation node: nothing at a replay; allocation a (n bytes) was made
                 with the node and lives until a free node's graph or a free frees it */
};

typedef struct rec_op {
  int kind;
  uint64_t a, b; /* dst/src device addresses, kernel handle, event */
  size_t n;
  uint32_t v, elem;
  uint8_t *bytes; /* owned: H2D bytes or kernel arguments */
  void *dst;      /* D2H destination */
  hostd_reached_cb cb;
  void *arg;
  rec_gate_t *g;
  uint32_t slot, value;
  bool word;                         /* OP_HOSTFN: write the reach word first */
  uint32_t grid[3], block[3], shmem; /* OP_LAUNCH */
  uint64_t pitch, height; /* OP_MEMSET of a graph node: rows (height 0: one) */
  struct rec_op *next;
} rec_op_t;

struct rec_graph;
#define CAP_DEPS 16 /* a capturing stream's current dependencies, at most */

typedef struct rec_stream {
  rec_link_t link;
  bool gated, deleted;
  uint64_t evwait; /* blocked until record evtarget of this event ran (stream_wait), or 0 */
  uint64_t evtarget;
  rec_gate_t *g; /* the gate it waits for while gated */
  uint32_t slot, value;
  rec_op_t *head, *tail;
  int prio;
  bool part;     /* made by part_stream_new: hostd__record_part_cluster_max applies */
  rec_op_t *ptb; /* a held PTB launch: the stream waits until its flag is raised */
  struct rec_graph *cap; /* the capture it takes part in, or NULL */
  uint64_t cap_deps[CAP_DEPS]; /* its current dependencies (nodes) in that capture */
  size_t cap_ndeps;
  pthread_t maker;                 /* the thread that created it */
  unsigned long records, by_maker; /* event records on it: all, and by that thread */
  bool last_launch; /* a launch on it since its last event record or word write */
} rec_stream_t;

/* Records of an event are numbered; a record queued behind a gate runs
 * later.  A wait (stream_wait) is for the record that was the latest when
 * the wait was made, as on the driver, so an event recorded again meanwhile
 * does not move what an earlier wait waits for. */
typedef struct rec_event {
  rec_link_t link;
  uint64_t recorded; /* records made */
  uint64_t done;     /* the highest-numbered record that ran */
  struct rec_graph *cap; /* last recorded in this capture (a captured event), or NULL */
  uint64_t cap_deps[CAP_DEPS]; /* the recording stream's dependencies then */
  size_t cap_ndeps;
} rec_event_t;

static rec_link_t *streams, *events;
/* Stream capture (below): the capture a stream takes part in, work added to it. */
static struct rec_graph *capturing(uint64_t s);
static CUresult cap_add(rec_stream_t *st, rec_op_t *o);
static CUresult cap_refuse(uint64_t s);
static bool unsafe_refused(void);
static rec_link_t *graphs, *gexecs; /* graphs, and instantiated ones (execs) */
static void graph_drop(void *rec);
static __thread bool draining; /* this thread runs drain(): nested gate_opens only set words */
static rec_link_t *allocs, *physs, *reservations, *pools;

/* CUDA arrays and texture / surface objects (see their section below). */
typedef struct rec_array {
  rec_link_t link;
  uint64_t row, rows, slices; /* row: bytes per row */
  unsigned flags;
  uint8_t *bytes;
} rec_array_t;

typedef struct rec_obj { /* a texture (surf false) or surface object */
  rec_link_t link;
  uint64_t array, ptr, size; /* array, or linear memory [ptr, ptr+size) */
  bool surf;
} rec_obj_t;

static rec_link_t *arrays, *objs, *modules;

/* Host memory registered (host_register): reachable by the device at its
 * own address (unified addressing), as on the GPU.  link.h = its address. */
typedef struct rec_reg {
  rec_link_t link;
  size_t size;
} rec_reg_t;
static rec_link_t *regs;
static uint64_t next_addr = RECORD_BASE, next_handle = 0x1000;
static uint64_t used_bytes;
static CUresult sticky; /* a "fault" kernel ran */
static _Atomic unsigned long counts[HOSTD_RECORD_NCOUNT];
static __thread bool entered;         /* thread_enter ran on this thread */
static _Atomic uint64_t handle_floor; /* handles below it died with a shutdown */
static _Atomic uint64_t addr_floor;   /* addresses in [RECORD_BASE, it) died with a shutdown */

unsigned long hostd_record_count(hostd_record_what_t what) {
  return what < HOSTD_RECORD_NCOUNT ? atomic_load(&counts[what]) : 0;
}

void hostd_record_reset(void) {
  pthread_mutex_lock(&lock);
  sticky = CUDA_SUCCESS;
  pthread_mutex_unlock(&lock);
  for (int i = 0; i < HOSTD_RECORD_NCOUNT; i++)
    atomic_store(&counts[i], 0);
}

void hostd_record_inject(int r) {
  pthread_mutex_lock(&lock);
  sticky = (CUresult)r;
  pthread_mutex_unlock(&lock);
}

uint64_t hostd_record_live_bytes(void) {
  uint64_t b;
  pthread_mutex_lock(&lock);
  b = used_bytes;
  pthread_mutex_unlock(&lock);
  return b;
}

static void count(hostd_record_what_t w) {
  atomic_fetch_add(&counts[w], 1);
}

/* CUDA_SUCCESS when the calling thread has the context current and none of
 * the n handles or addresses in v predates the last shutdown. */
static CUresult live(const uint64_t *v, size_t n) {
  bool stale = !entered;
  for (size_t i = 0; i < n; i++)
    stale |= (v[i] >= 0x1000 && v[i] < atomic_load(&handle_floor)) ||
             (v[i] >= RECORD_BASE && v[i] < atomic_load(&addr_floor));
  if (!stale)
    return CUDA_SUCCESS;
  count(HOSTD_RECORD_STALE);
  return CUDA_ERROR_CONTEXT_IS_DESTROYED;
}
#define LIVE(...)                                                                                  \
  do {                                                                                             \
    const uint64_t v_[] = {0, __VA_ARGS__};                                                        \
    CUresult r_ = live(v_, sizeof(v_) / sizeof(v_[0]));                                            \
    if (r_ != CUDA_SUCCESS)                                                                        \
      return r_;                                                                                   \
  } while (0)

/* ---- the record list helpers: the lock held, except where one says it takes it ---- */

/* The link pointing at the record of list named h (to read or unlink it), or NULL. */
static rec_link_t **rec_slot(rec_link_t **list, uint64_t h) {
  for (; *list; list = &(*list)->next)
    if ((*list)->h == h)
      return list;
  return NULL;
}

/* The record of list named h, or NULL. */
static void *rec_find(rec_link_t *list, uint64_t h) {
  rec_link_t **slot = rec_slot(&list, h);
  return slot ? *slot : NULL;
}

/* Unlinks the record *slot points at; returns it. */
static void *rec_unlink(rec_link_t **slot) {
  rec_link_t *r = *slot;
  *slot = r->next;
  return r;
}

/* Unlinks the record of list named h; returns it, or NULL when there is none. */
static void *rec_take(rec_link_t **list, uint64_t h) {
  rec_link_t **slot = rec_slot(list, h);
  return slot ? rec_unlink(slot) : NULL;
}

/* Links rec (a record: a rec_link_t first) at the head of list. */
static void rec_push(rec_link_t **list, void *rec) {
  rec_link_t *r = rec;
  r->next = *list;
  *list = r;
}

/* Names a new record h and links it into list, taking the lock; returns h. */
static uint64_t rec_publish(rec_link_t **list, void *rec, uint64_t h) {
  ((rec_link_t *)rec)->h = h;
  pthread_mutex_lock(&lock);
  rec_push(list, rec);
  pthread_mutex_unlock(&lock);
  return h;
}

/* Taking the lock: whether list has a record named h. */
static bool rec_known(rec_link_t **list, uint64_t h) {
  pthread_mutex_lock(&lock);
  bool known = rec_find(*list, h) != NULL;
  pthread_mutex_unlock(&lock);
  return known;
}

/* Taking the lock: unlinks the record of list named h and hands it to drop
 * (which frees it, the lock held); false when there is none. */
static bool rec_delete(rec_link_t **list, uint64_t h, void (*drop)(void *rec)) {
  pthread_mutex_lock(&lock);
  void *rec = rec_take(list, h);
  bool found = rec != NULL;
  if (found)
    drop(rec);
  pthread_mutex_unlock(&lock);
  return found;
}

/* Unlinks every record of list, handing each to drop (which frees it). */
static void rec_clear(rec_link_t **list, void (*drop)(void *rec)) {
  while (*list)
    drop(rec_unlink(list));
}

/* Finds the allocation holding [p, p+n).  Lock held. */
static uint8_t *find(uint64_t p, uint64_t n) {
  REC_EACH(rec_alloc_t, a, allocs)
    if (p >= a->link.h && n <= a->size && p - a->link.h <= a->size - n)
      return a->bytes + (p - a->link.h);
  REC_EACH(rec_reg_t, g, regs)
    if (p >= g->link.h && n <= g->size && p - g->link.h <= g->size - n)
      return (uint8_t *)(uintptr_t)p;
  return NULL;
}

static void limits_reset(void); /* the context's limits (below) */

static CUresult rec_init(int device, call_snapshot_t *snap) {
  static const uint8_t uuid[16] = {0x74, 0x61, 0x6c, 0x6c, 0x79, 0x2d, 0x72, 0x65,
                                   0x63, 0x6f, 0x72, 0x64, 0x00, 0x00, 0x00, 0x01};
  if (device != 0)
    return CUDA_ERROR_INVALID_DEVICE;
  memset(snap, 0, sizeof(*snap));
  snprintf(snap->name, sizeof(snap->name), "Tally recording device (no GPU)");
  memcpy(snap->uuid, uuid, 16);
  snap->total_mem = RECORD_MEM_TOTAL;
  snap->prio_least = 0;
  snap->prio_greatest = SNAP_PRIO_GREATEST;
  /* Hopper-like values for what cudart and the occupancy code read. */
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE] = 134213632;
  snap->attr[CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT] = 4;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X] = 1024;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y] = 1024;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z] = 64;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X] = 2147483647;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y] = 65535;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z] = 65535;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK] = 49152;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN] = 232448;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR] = 233472;
  snap->attr[CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY] = 65536;
  snap->attr[CU_DEVICE_ATTRIBUTE_WARP_SIZE] = 32;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK] = 65536;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR] = 65536;
  snap->attr[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT] = 132;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR] = 2048;
  snap->attr[CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR] = 32;
  snap->attr[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR] = 9;
  snap->attr[CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR] = 0;
  snap->attr[CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING] = 1;
  snap->attr[CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS] = 1;
  snap->attr[CU_DEVICE_ATTRIBUTE_CLOCK_RATE] = 1980000;
  snap->attr[CU_DEVICE_ATTRIBUTE_PCI_BUS_ID] = 0x1b;
  snap->attr[CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY] = 1;
  snap->attr[CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT] = 512;
  snap->ident_s39 = HOSTD_RECORD_IDENT_S39;
  pthread_mutex_lock(&lock);
  limits_reset();
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

/* How shutdown frees the kinds of record that own more than themselves
 * (host memory only: used_bytes is zeroed at once). */
static void alloc_drop(void *rec) {
  rec_alloc_t *a = rec;
  if (!a->phys)
    free(a->bytes);
  free(a);
}

static void phys_drop(void *rec) {
  free(((rec_phys_t *)rec)->bytes);
  free(rec);
}

static void stream_drop(void *rec) {
  rec_stream_t *st = rec;
  while (st->head) {
    rec_op_t *o = st->head;
    st->head = o->next;
    free(o->bytes);
    free(o);
  }
  if (st->ptb)
    free(st->ptb->bytes);
  free(st->ptb);
  free(st);
}

static void array_drop(void *rec) {
  free(((rec_array_t *)rec)->bytes);
  free(rec);
}

static void rec_shutdown(void) {
  pthread_mutex_lock(&lock);
  rec_clear(&allocs, alloc_drop);
  rec_clear(&physs, phys_drop);
  rec_clear(&reservations, free);
  rec_clear(&pools, free);
  rec_clear(&modules, free);
  rec_clear(&streams, stream_drop);
  rec_clear(&events, free);
  rec_clear(&graphs, graph_drop);
  rec_clear(&gexecs, graph_drop);
  rec_clear(&arrays, array_drop);
  rec_clear(&objs, free);
  rec_clear(&regs, free);
  pthread_cond_broadcast(&cv);
  used_bytes = 0;
  /* As when the process ends: the fault goes, and nothing from before may
   * be named by whatever comes next (a test's "restarted" daemon). */
  sticky = CUDA_SUCCESS;
  atomic_store(&handle_floor, next_handle + 1);
  atomic_store(&addr_floor, next_addr);
  pthread_mutex_unlock(&lock);
}

static CUresult rec_thread_enter(void) {
  entered = true;
  return CUDA_SUCCESS;
}

/* Every allocation (cuMemAlloc, cuMemCreate or a CUDA array) is backed by
 * host memory, so the recording device models a small GPU: at most 1 GiB
 * per allocation and 4 GiB in all.  Tests never need more, and a fuzzed size
 * (fuzz-hostd-exec asked for 3.9 GB) gets the driver's
 * CUDA_ERROR_OUT_OF_MEMORY instead of exhausting the host.
 *
 * backing_new: n zeroed bytes standing for n bytes of device memory, counted
 * in used_bytes; NULL (nothing counted) when over the budget or out of host
 * memory.  backing_free (lock held) gives them back. */
static uint8_t *backing_new(uint64_t n) {
  uint8_t *b;
  pthread_mutex_lock(&lock);
  bool over = n > (1ull << 30) || used_bytes + n > (4ull << 30);
  if (!over)
    used_bytes += n;
  pthread_mutex_unlock(&lock);
  if (over)
    return NULL;
  if (!(b = calloc(1, n ? n : 1))) {
    pthread_mutex_lock(&lock);
    used_bytes -= n;
    pthread_mutex_unlock(&lock);
  }
  return b;
}

static void backing_free(uint8_t *b, uint64_t n) {
  used_bytes -= n;
  free(b);
}

static CUresult rec_mem_alloc(uint64_t *p, uint64_t size) {
  LIVE(0);
  rec_alloc_t *a;
  count(HOSTD_RECORD_ALLOC);
  if (unsafe_refused()) /* cuMemAlloc during a capture this thread began, as the driver */
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (!(a = calloc(1, sizeof(*a))) || !(a->bytes = backing_new(size))) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&lock);
  *p = a->link.h = next_addr;
  a->size = size;
  next_addr += (size + 511) / 512 * 512 + 512; /* 512 B aligned, with a gap */
  rec_push(&allocs, a);
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

/* A mapping is unmapped, never freed. */
static bool freeable(uint64_t p) {
  rec_link_t **slot = rec_slot(&allocs, p);
  return slot && !((rec_alloc_t *)*slot)->phys && !((rec_alloc_t *)*slot)->gref;
}

static CUresult free_locked(uint64_t p) {
  rec_link_t **slot = rec_slot(&allocs, p);
  if (!freeable(p))
    return CUDA_ERROR_INVALID_VALUE;
  rec_alloc_t *a = rec_unlink(slot);
  rec_span_t *sp = a->pool ? rec_find(pools, a->pool) : NULL;
  if (sp) /* a stream-ordered allocation leaves its pool */
    sp->size -= a->size < sp->size ? a->size : sp->size;
  backing_free(a->bytes, a->size);
  free(a);
  return CUDA_SUCCESS;
}

/* One more (d > 0) or one fewer graph holding allocation p through a
 * captured free; the last one frees it.  Lock held. */
static void gref_move(uint64_t p, int d) {
  rec_link_t **slot = rec_slot(&allocs, p);
  rec_alloc_t *a = slot ? (rec_alloc_t *)*slot : NULL;
  if (a && d > 0)
    a->gref++;
  else if (a && a->gref && --a->gref == 0)
    (void)free_locked(p);
}

static CUresult rec_mem_free(uint64_t p) {
  LIVE(p);
  CUresult r;
  count(HOSTD_RECORD_FREE);
  pthread_mutex_lock(&lock);
  r = free_locked(p);
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_mem_info(uint64_t *f, uint64_t *t) {
  LIVE(0);
  pthread_mutex_lock(&lock);
  *t = RECORD_MEM_TOTAL;
  *f = RECORD_MEM_TOTAL - used_bytes;
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

/* ---- streams: queued work behind host-function gates (lock held) ---- */

static rec_stream_t *stream_find(uint64_t s) {
  return rec_find(streams, s);
}

unsigned long hostd_record_stream_records(uint64_t s, bool by_maker) {
  rec_stream_t *st;
  unsigned long n = 0;
  pthread_mutex_lock(&lock);
  if ((st = stream_find(s)))
    n = by_maker ? st->by_maker : st->records;
  pthread_mutex_unlock(&lock);
  return n;
}

static rec_event_t *event_find(uint64_t e) {
  return rec_find(events, e);
}

static bool busy(const rec_stream_t *st) {
  return st && (st->gated || st->evwait || st->head || st->ptb);
}

/* Whether word i of g (a gate word, or at n + slot a reach word) holds
 * value or a later one. */
static bool gate_reached(const rec_gate_t *g, uint32_t i, uint32_t value) {
  return (int32_t)(__atomic_load_n(&g->words[i], __ATOMIC_ACQUIRE) - value) >= 0;
}

/* Whether record `target` of event e has run (a deleted event: yes). */
static bool event_reached(uint64_t e, uint64_t target) {
  rec_event_t *ev = event_find(e);
  return !ev || ev->done >= target;
}

/* Set when queued work ran that may unblock another stream (a record):
 * drain() scans again. */
static bool moved;

/* Queues a copy of *tmpl on stream s when s is busy (taking tmpl->bytes);
 * returns false, touching nothing, when the work may run now. */
static bool defer(uint64_t s, const rec_op_t *tmpl) {
  rec_stream_t *st = stream_find(s);
  rec_op_t *o;
  if (!busy(st))
    return false;
  o = malloc(sizeof(*o));
  if (!o)
    return false; /* run now: out of order, but never lost (tests only) */
  *o = *tmpl;
  o->next = NULL;
  if (st->tail)
    st->tail->next = o;
  else
    st->head = o;
  st->tail = o;
  return true;
}

/* Waits until stream s has run everything queued (the lock is released while waiting). */
static void wait_idle(uint64_t s) {
  rec_stream_t *st;
  while ((st = stream_find(s)) && busy(st))
    pthread_cond_wait(&cv, &lock);
}

static bool launch_effect(rec_stream_t *st, rec_op_t *o);
static bool ptb_go(rec_stream_t *st);
static void tex_copy_effect(uint64_t tex, uint64_t out, uint64_t n);

/* Runs one queued op (not OP_HOSTFN) of stream st. */
static void exec_op(rec_stream_t *st, rec_op_t *o) {
  uint8_t *d, *p;
  switch (o->kind) {
  case OP_HTOD:
    if ((d = find(o->a, o->n)))
      memcpy(d, o->bytes, o->n);
    break;
  case OP_DTOH:
    if ((p = find(o->b, o->n)))
      memcpy(o->dst, p, o->n);
    break;
  case OP_DTOD:
    d = find(o->a, o->n);
    p = find(o->b, o->n);
    if (d && p)
      memmove(d, p, o->n);
    break;
  case OP_MEMSET:
    for (uint64_t row = 0; row < (o->height ? o->height : 1); row++) {
      d = find(o->a + row * o->pitch, (uint64_t)o->n * o->elem);
      for (size_t i = 0; d && i < o->n; i++)
        memcpy(d + i * o->elem, &o->v, o->elem);
    }
    moved = true; /* it may raise a held PTB launch's flag */
    break;
  case OP_LAUNCH:
    if (launch_effect(st, o))
      st->ptb = o; /* held: drain() keeps o */
    break;
  case OP_RECORD: {
    rec_event_t *ev = event_find(o->a);
    if (ev && ev->done < o->b)
      ev->done = o->b;
    moved = true;
    break;
  }
  case OP_WRITE64:
    __atomic_store_n((uint64_t *)o->dst, o->b, __ATOMIC_RELEASE);
    break;
  case OP_FREE:
    (void)free_locked(o->a);
    break;

  default:
    break;
  }
}

/* A host function's callback made late (TALLYD_RECORD_HOSTFN_LATE_US). */
typedef struct late_cb {
  hostd_reached_cb cb;
  void *arg;
  uint32_t value;
  unsigned us;
} late_cb_t;

static void *late_cb_run(void *p) {
  late_cb_t *l = p;
  struct timespec ts = {l->us / 1000000u, (long)(l->us % 1000000u) * 1000};
  nanosleep(&ts, NULL);
  l->cb(l->arg, l->value);
  free(l);
  return NULL;
}

/* The stream reached host function o (no lock held): its reach word first
 * when asked, then its callback, which TALLYD_RECORD_HOSTFN_LATE_US=N makes
 * N us late, from a thread of its own, as a slow driver callback thread
 * would (tests of the reach word). */
static void reach(const rec_op_t *o) {
  static int late_us = -1;
  pthread_t th;
  pthread_attr_t at;
  late_cb_t *l;
  if (o->word)
    __atomic_store_n(&o->g->words[o->g->n + o->slot], o->value, __ATOMIC_RELEASE);
  if (__atomic_load_n(&late_us, __ATOMIC_RELAXED) < 0) {
    const char *e = getenv("TALLYD_RECORD_HOSTFN_LATE_US");
    __atomic_store_n(&late_us, e ? atoi(e) : 0, __ATOMIC_RELAXED);
  }
  if (late_us > 0 && (l = malloc(sizeof(*l)))) {
    *l = (late_cb_t){o->cb, o->arg, o->value, (unsigned)late_us};
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, late_cb_run, l) == 0) {
      pthread_attr_destroy(&at);
      return;
    }
    pthread_attr_destroy(&at);
    free(l);
  }
  o->cb(o->arg, o->value);
}

/* Runs the queued work of every stream whose gate is open, until none can
 * move.  Drops the lock around reached callbacks, so the scan restarts
 * after each one (they may open gates or the list may change). */
static void drain(void) {
  bool again = true;
  draining = true;
  while (again) {
    again = false;
    for (rec_link_t **pst = &streams; *pst && !again;) {
      rec_stream_t *st = (rec_stream_t *)*pst;
      if (st->gated && gate_reached(st->g, st->slot, st->value))
        st->gated = false;
      if (st->evwait && event_reached(st->evwait, st->evtarget))
        st->evwait = 0;
      if (st->ptb && ptb_go(st))
        moved = true;
      while (!st->gated && !st->evwait && !st->ptb && st->head) {
        rec_op_t *o = st->head;
        if (!(st->head = o->next))
          st->tail = NULL;
        if (o->kind == OP_EVWAIT) {
          if (!event_reached(o->a, o->b)) {
            st->evwait = o->a;
            st->evtarget = o->b;
          }
          free(o);
          continue;
        }
        if (o->kind == OP_HOSTFN) {
          st->gated = true;
          st->g = o->g;
          st->slot = o->slot;
          st->value = o->value;
          pthread_mutex_unlock(&lock);
          reach(o);
          pthread_mutex_lock(&lock);
          free(o);
          again = true;
          break;
        }
        exec_op(st, o);
        if (st->ptb != o) {
          free(o->bytes);
          free(o);
        }
      }
      if (again)
        break;
      if (st->deleted && !busy(st)) {
        free(rec_unlink(pst));
        continue;
      }
      pst = &st->link.next;
    }
    if (!again && moved) {
      moved = false;
      again = true;
    }
  }
  draining = false;
  pthread_cond_broadcast(&cv);
}

static CUresult rec_htod(uint64_t dst, const void *src, size_t n, uint64_t s, int async) {
  LIVE(dst, s);
  uint8_t *d;
  count(HOSTD_RECORD_HTOD);
  pthread_mutex_lock(&lock);
  if (find(dst, n) && find((uint64_t)(uintptr_t)src, n)) {
    /* From registered host memory (find reaches it): read when the copy
     * runs, as DMA from pinned memory is. */
    rec_op_t o = {.kind = OP_DTOD, .a = dst, .b = (uint64_t)(uintptr_t)src, .n = n};
    if (capturing(s)) {
      CUresult r = cap_add(stream_find(s), &o);
      pthread_mutex_unlock(&lock);
      return r;
    }
    if (async && defer(s, &o)) {
      pthread_mutex_unlock(&lock);
      return CUDA_SUCCESS;
    }
  }
  if (capturing(s)) {
    rec_op_t o = {.kind = OP_HTOD, .a = dst, .n = n, .bytes = malloc(n ? n : 1)};
    CUresult r = !find(dst, n) ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_OUT_OF_MEMORY;
    if (o.bytes && find(dst, n)) {
      memcpy(o.bytes, src, n);
      r = cap_add(stream_find(s), &o);
    } else {
      free(o.bytes);
    }
    pthread_mutex_unlock(&lock);
    return r;
  }
  if (async && find(dst, n) && busy(stream_find(s))) {
    rec_op_t o = {.kind = OP_HTOD, .a = dst, .n = n, .bytes = malloc(n ? n : 1)};
    if (o.bytes) {
      memcpy(o.bytes, src, n); /* the caller's bytes may be gone when it runs */
      if (defer(s, &o)) {
        pthread_mutex_unlock(&lock);
        return CUDA_SUCCESS;
      }
      free(o.bytes);
    }
  }
  wait_idle(s);
  d = find(dst, n);
  if (d)
    memcpy(d, src, n);
  pthread_mutex_unlock(&lock);
  return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult rec_dtoh(void *dst, uint64_t src, size_t n, uint64_t s) {
  LIVE(src, s);
  uint8_t *p;
  CUresult r;
  count(HOSTD_RECORD_DTOH);
  pthread_mutex_lock(&lock);
  if ((r = cap_refuse(s)) != CUDA_SUCCESS) {
    pthread_mutex_unlock(&lock);
    return r;
  }
  wait_idle(s); /* synchronous: after the stream's earlier work */
  p = find(src, n);
  if (p)
    memcpy(dst, p, n);
  r = sticky ? sticky : p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_unlock(&lock);
  return r;
}

/* Stream-ordered D2H into memory that outlives the call (shared pinned memory). */
static CUresult rec_dtoh_async(void *dst, uint64_t src, size_t n, uint64_t s) {
  LIVE(src, s);
  uint8_t *p;
  rec_op_t o = {.kind = OP_DTOH, .b = src, .n = n, .dst = dst};
  count(HOSTD_RECORD_DTOH);
  pthread_mutex_lock(&lock);
  p = find(src, n);
  if (p && capturing(s)) {
    CUresult r = cap_add(stream_find(s), &o);
    pthread_mutex_unlock(&lock);
    return r;
  }
  if (p && !defer(s, &o))
    memcpy(dst, p, n);
  pthread_mutex_unlock(&lock);
  return p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The GPU's write of a completion word: in stream order, into registered
 * host memory (aligned), as cuStreamWriteValue64; not into a capture. */
_Atomic unsigned long hostd__record_write64_behind_launch;
static CUresult rec_stream_write64(uint64_t s, void *host, uint64_t value) {
  LIVE(s);
  uint8_t *p;
  rec_stream_t *st;
  rec_op_t o = {.kind = OP_WRITE64, .b = value, .dst = host};
  pthread_mutex_lock(&lock);
  p = find((uint64_t)(uintptr_t)host, 8);
  if (!p || (uintptr_t)host % 8 != 0 || capturing(s)) {
    pthread_mutex_unlock(&lock);
    return p ? CUDA_ERROR_NOT_SUPPORTED : CUDA_ERROR_INVALID_VALUE;
  }
  if ((st = stream_find(s)) != NULL && st->last_launch) {
    st->last_launch = false;
    hostd__record_write64_behind_launch++;
  }
  if (!defer(s, &o))
    __atomic_store_n((uint64_t *)host, value, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

static CUresult rec_dtod(uint64_t dst, uint64_t src, size_t n, uint64_t s, int async) {
  LIVE(dst, src, s);
  uint8_t *d, *p;
  rec_op_t o = {.kind = OP_DTOD, .a = dst, .b = src, .n = n};
  count(HOSTD_RECORD_DTOD);
  pthread_mutex_lock(&lock);
  d = find(dst, n);
  p = find(src, n);
  if (d && p && capturing(s)) {
    CUresult r = cap_add(stream_find(s), &o);
    pthread_mutex_unlock(&lock);
    return r;
  }
  if (!async)
    wait_idle(s);
  if (d && p && !defer(s, &o))
    memmove(d, p, n);
  pthread_mutex_unlock(&lock);
  return d && p ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult rec_memset(uint64_t p, uint32_t v, uint32_t elem, size_t n, uint64_t s) {
  LIVE(p, s);
  uint8_t *d;
  rec_stream_t *st;
  rec_op_t o = {.kind = OP_MEMSET, .a = p, .n = n, .v = v, .elem = elem};
  count(HOSTD_RECORD_MEMSET);
  if (elem != 1 && elem != 2 && elem != 4)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  d = find(p, (uint64_t)n * elem);
  st = stream_find(s);
  if (st && st->prio == SNAP_PRIO_GREATEST)
    hostd__record_hi_memsets++;
  if (d && capturing(s)) {
    CUresult r = cap_add(st, &o);
    pthread_mutex_unlock(&lock);
    return r;
  }
  if (d && !defer(s, &o)) {
    for (size_t i = 0; i < n; i++)
      memcpy(d + i * elem, &v, elem);
    hostd__record_memset_prio = st ? st->prio : 0;
    if (!draining) /* a raised PTB flag lets its launch finish */
      drain();
  }
  pthread_mutex_unlock(&lock);
  return d ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The front end's word write: a one-word memset here (counted apart). */
static CUresult rec_word_write(uint64_t p, uint32_t v, uint64_t s) {
  hostd__record_word_writes++;
  return rec_memset(p, v, 4, 1, s);
}

static uint64_t handle(void) {
  uint64_t h;
  pthread_mutex_lock(&lock);
  h = next_handle += 0x10;
  pthread_mutex_unlock(&lock);
  return h;
}

static CUresult sync_result(void) {
  CUresult r;
  count(HOSTD_RECORD_SYNC);
  pthread_mutex_lock(&lock);
  r = sticky;
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_stream_new(uint64_t *s, unsigned flags, int prio) {
  LIVE(0);
  rec_stream_t *st = calloc(1, sizeof(*st));
  (void)flags;
  if (!st)
    return CUDA_ERROR_OUT_OF_MEMORY;
  count(HOSTD_RECORD_STREAM);
  hostd__record_last_prio = prio;
  st->prio = prio;
  st->maker = pthread_self();
  *s = rec_publish(&streams, st, handle());
  return CUDA_SUCCESS;
}
/* As cuStreamDestroy: queued work still runs; the stream goes when idle. */
static CUresult rec_stream_del(uint64_t s) {
  LIVE(s);
  rec_stream_t *st;
  count(HOSTD_RECORD_STREAM_DEL);
  pthread_mutex_lock(&lock);
  if ((st = stream_find(s)) && busy(st))
    st->deleted = true;
  else if (st)
    free(rec_take(&streams, s));
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}
static CUresult rec_stream_sync(uint64_t s) {
  LIVE(s);
  CUresult r;
  pthread_mutex_lock(&lock);
  if ((r = cap_refuse(s)) != CUDA_SUCCESS) {
    pthread_mutex_unlock(&lock);
    return r;
  }
  wait_idle(s);
  pthread_mutex_unlock(&lock);
  return sync_result();
}
static CUresult rec_stream_query(uint64_t s) {
  LIVE(s);
  bool b;
  CUresult r;
  pthread_mutex_lock(&lock);
  if ((r = cap_refuse(s)) != CUDA_SUCCESS) {
    pthread_mutex_unlock(&lock);
    return r;
  }
  b = busy(stream_find(s)) && !sticky; /* a fault answers before NOT_READY */
  pthread_mutex_unlock(&lock);
  return b ? CUDA_ERROR_NOT_READY : sync_result();
}
/* A real cross-stream wait for records queued behind a gate: s blocks until
 * the record that was the event's latest when the wait was made. */
static CUresult rec_stream_wait(uint64_t s, uint64_t e, unsigned flags) {
  LIVE(s, e);
  rec_op_t o = {.kind = OP_EVWAIT, .a = e};
  rec_stream_t *st;
  rec_event_t *ev;
  (void)flags;
  count(HOSTD_RECORD_WAIT);
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  ev = event_find(e);
  o.b = ev ? ev->recorded : 0; /* the latest record, now */
  if (st && ev && ev->cap) { /* joins (or deepens) the event's capture */
    CUresult r = CUDA_SUCCESS;
    if (st->cap && st->cap != ev->cap)
      r = CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    else if (!st->cap)
      st->cap = ev->cap, st->cap_ndeps = 0;
    for (size_t i = 0; r == CUDA_SUCCESS && i < ev->cap_ndeps && st->cap_ndeps < CAP_DEPS; i++)
      st->cap_deps[st->cap_ndeps++] = ev->cap_deps[i];
    pthread_mutex_unlock(&lock);
    return r;
  }
  if (st && st->cap) { /* an event from outside the capture: nothing to wait for in it */
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
  }
  if (st && !defer(s, &o) && !event_reached(e, o.b)) {
    st->evwait = e;
    st->evtarget = o.b;
  }
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}
static CUresult rec_event_new(uint64_t *e, unsigned flags) {
  LIVE(0);
  rec_event_t *ev = calloc(1, sizeof(*ev));
  (void)flags;
  if (!ev)
    return CUDA_ERROR_OUT_OF_MEMORY;
  count(HOSTD_RECORD_EVENT);
  *e = rec_publish(&events, ev, handle());
  return CUDA_SUCCESS;
}
static CUresult rec_event_del(uint64_t e) {
  LIVE(e);
  count(HOSTD_RECORD_EVENT_DEL);
  rec_delete(&events, e, free);
  return CUDA_SUCCESS;
}
static CUresult rec_event_record(uint64_t e, uint64_t s, unsigned flags) {
  LIVE(e, s);
  rec_op_t o = {.kind = OP_RECORD, .a = e};
  rec_event_t *ev;
  (void)flags;
  count(HOSTD_RECORD_RECORD);
  pthread_mutex_lock(&lock);
  ev = event_find(e);
  rec_stream_t *cst = stream_find(s);
  if (cst) {
    cst->last_launch = false;
    cst->records++;
    cst->by_maker += pthread_equal(cst->maker, pthread_self()) != 0;
  }
  if (ev && cst && cst->cap) { /* a captured event: waits on it join the capture */
    ev->cap = cst->cap;
    ev->cap_ndeps = cst->cap_ndeps;
    memcpy(ev->cap_deps, cst->cap_deps, sizeof(ev->cap_deps));
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
  }
  if (ev) {
    ev->cap = NULL;
    o.b = ++ev->recorded;
    if (!defer(s, &o))
      ev->done = o.b; /* ran at once */
  }
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}
static CUresult rec_event_sync(uint64_t e) {
  LIVE(e);
  rec_event_t *ev;
  pthread_mutex_lock(&lock);
  while ((ev = event_find(e)) && ev->done < ev->recorded)
    pthread_cond_wait(&cv, &lock);
  pthread_mutex_unlock(&lock);
  return sync_result();
}
static CUresult rec_event_query(uint64_t e) {
  LIVE(e);
  rec_event_t *ev;
  bool pending;
  pthread_mutex_lock(&lock);
  pending = (ev = event_find(e)) && ev->done < ev->recorded && !sticky;
  pthread_mutex_unlock(&lock);
  return pending ? CUDA_ERROR_NOT_READY : sync_result();
}
static CUresult rec_event_time(float *ms, uint64_t a, uint64_t b) {
  LIVE(a, b);
  (void)a, (void)b;
  *ms = 1.0f;
  return CUDA_SUCCESS;
}

/* Appends a parameter of size bytes to k where the driver puts it: at the
 * first offset from *off on that is a multiple of al (non-zero). */
static void kernel_param(rec_kernel_t *k, uint32_t size, uint32_t al, uint32_t *off) {
  *off = (*off + al - 1) / al * al;
  k->off[k->nparams] = *off;
  k->size[k->nparams++] = size;
  *off += size;
}

/* PTX text: its entries, with their parameters laid out as the driver
 * does (each at its alignment, in order).  Anything else loads without
 * kernels. */
static CUresult parse_ptx(rec_module_t *m, const char *text, size_t len) {
  rw_fatbin_t *fb = NULL;
  rw_ptx_module_t *pm = NULL;
  bool ptx = rw_fatbin_open(text, len, &fb, NULL) == 0 && rw_fatbin_image_kind(fb) == RW_IMAGE_PTX;
  rw_fatbin_free(fb);
  if (!ptx)
    return CUDA_SUCCESS;
  if (rw_ptx_parse(text, strnlen(text, len), &pm, NULL) != 0)
    return CUDA_ERROR_INVALID_PTX;
  for (size_t i = 0; i < rw_ptx_entry_count(pm) && m->nk < MAX_KERNELS; i++) {
    rec_kernel_t *k = &m->k[m->nk];
    uint32_t size[RECORD_MAX_PARAMS], al[RECORD_MAX_PARAMS], off = 0;
    int np = rw_ptx_entry_params(pm, i, size, al, RECORD_MAX_PARAMS);
    if (np < 0 || np > RECORD_MAX_PARAMS) {
      rw_ptx_free(pm);
      return CUDA_ERROR_INVALID_PTX;
    }
    snprintf(k->name, sizeof(k->name), "%s", rw_ptx_entry_name(pm, i));
    for (int j = 0; j < np; j++)
      kernel_param(k, size[j], al[j], &off);
    k->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024;
    k->attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152;
    m->kh[m->nk++] = handle();
  }
  rw_ptx_free(pm);
  return CUDA_SUCCESS;
}

/* Parses the TALLYREC text format; returns CUDA_ERROR_INVALID_IMAGE on anything else. */
static CUresult parse_module(rec_module_t *m, const char *text, size_t len) {
  const char *p = text, *end = text + len;
  char line[256];

  if (len == 0)
    return CUDA_ERROR_INVALID_IMAGE;
  if (len < 8 || memcmp(text, "TALLYREC", 8) != 0)
    return parse_ptx(m, text, len); /* a real fatbin or cubin: no kernels we can run */
  while (p < end && *p) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : strnlen(p, (size_t)(end - p));
    char name[64], sizes[160];
    unsigned long long bytes;
    if (n >= sizeof(line))
      return CUDA_ERROR_INVALID_IMAGE;
    memcpy(line, p, n);
    line[n] = 0;
    p += n + (nl ? 1 : 0);
    if (sscanf(line, "kernel %63s %159s", name, sizes) >= 1 && strncmp(line, "kernel", 6) == 0) {
      rec_kernel_t *k;
      uint32_t off = 0;
      if (m->nk >= MAX_KERNELS)
        return CUDA_ERROR_INVALID_IMAGE;
      k = &m->k[m->nk];
      snprintf(k->name, sizeof(k->name), "%s", name);
      if (sscanf(line, "kernel %*s %159s", sizes) == 1)
        for (char *t = strtok(sizes, ","); t && k->nparams < RECORD_MAX_PARAMS;
             t = strtok(NULL, ",")) {
          char *at;
          uint32_t sz = (uint32_t)strtoul(t, &at, 10);
          uint32_t al = sz >= 8 ? 8 : sz >= 4 ? 4 : sz >= 2 ? 2 : 1;
          if (*at == '@' && (al = (uint32_t)strtoul(at + 1, NULL, 10)) == 0)
            return CUDA_ERROR_INVALID_IMAGE;
          kernel_param(k, sz, al, &off);
        }
      /* Hopper-like values: distinct, so tests see the right one arrive. */
      k->attr[CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK] = 1024;
      k->attr[CU_FUNC_ATTRIBUTE_NUM_REGS] = 32;
      k->attr[CU_FUNC_ATTRIBUTE_PTX_VERSION] = 90;
      k->attr[CU_FUNC_ATTRIBUTE_BINARY_VERSION] = 90;
      k->attr[CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES] = 49152;
      k->attr[CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT] = -1;
      k->attr[CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE] = 0;
      m->kh[m->nk++] = handle();
    } else if (sscanf(line, "global %63s %llu", name, &bytes) == 2 && m->ng < 8) {
      uint64_t addr;
      if (rec_mem_alloc(&addr, bytes) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
      snprintf(m->gname[m->ng], sizeof(m->gname[0]), "%s", name);
      m->gaddr[m->ng] = addr;
      m->gsize[m->ng++] = bytes;
    }
  }
  return CUDA_SUCCESS;
}

static CUresult rec_module_load(uint64_t *h, int kind, const void *image, size_t len) {
  LIVE(0);
  rec_module_t *m = calloc(1, sizeof(*m));
  CUresult r;
  (void)kind;
  count(HOSTD_RECORD_MODULE);
  if (!m)
    return CUDA_ERROR_OUT_OF_MEMORY;
  r = parse_module(m, image, len);
  if (r != CUDA_SUCCESS) {
    for (int i = 0; i < m->ng; i++)
      rec_mem_free(m->gaddr[i]);
    free(m);
    return r;
  }
  *h = rec_publish(&modules, m, handle());
  return CUDA_SUCCESS;
}

static CUresult rec_module_unload(uint64_t h, int kind) {
  LIVE(h);
  rec_module_t *m;
  (void)kind;
  count(HOSTD_RECORD_MODULE_DEL);
  pthread_mutex_lock(&lock);
  m = rec_take(&modules, h);
  pthread_mutex_unlock(&lock);
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  for (int i = 0; i < m->ng; i++)
    rec_mem_free(m->gaddr[i]);
  free(m);
  return CUDA_SUCCESS;
}

/* The module (or library) named h, or whose module view h is. */
static rec_module_t *module_of(uint64_t h) {
  rec_module_t *found = NULL;
  pthread_mutex_lock(&lock);
  REC_EACH(rec_module_t, m, modules)
    if (m->link.h == h || (m->view && m->view == h)) {
      found = m;
      break;
    }
  pthread_mutex_unlock(&lock);
  return found;
}

static CUresult rec_library_module(uint64_t lib, uint64_t *mod) {
  LIVE(lib);
  rec_module_t *m = module_of(lib);
  if (!m || m->link.h != lib)
    return CUDA_ERROR_INVALID_HANDLE;
  pthread_mutex_lock(&lock);
  if (!m->view)
    m->view = (next_handle += 0x10);
  *mod = m->view;
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

static CUresult rec_module_functions(uint64_t h, int kind, bool attrs, hostd_func_cb cb,
                                     void *arg) {
  LIVE(h);
  rec_module_t *m = module_of(h);
  (void)kind;
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  for (int i = 0; i < m->nk; i++) {
    hostd_func_info_t fi;
    memset(&fi, 0, sizeof(fi));
    fi.handle = m->kh[i] | (h == m->view ? VIEW_BIT : 0);
    fi.name = m->k[i].name;
    fi.nparams = m->k[i].nparams;
    fi.off = m->k[i].off;
    fi.size = m->k[i].size;
    pthread_mutex_lock(&lock);
    for (int a = 0; attrs && a < CALL_FUNC_ATTRS; a++)
      if (m->k[i].loaded || !needs_load(a)) {
        fi.attr[a] = m->k[i].attr[a];
        fi.attr_valid |= 1u << a;
      }
    pthread_mutex_unlock(&lock);
    if (cb(arg, &fi))
      return CUDA_ERROR_OUT_OF_MEMORY;
  }
  return CUDA_SUCCESS;
}

static CUresult rec_module_global(uint64_t h, int kind, const char *name, uint64_t *p,
                                  uint64_t *size) {
  LIVE(h);
  rec_module_t *m = module_of(h);
  (void)kind;
  if (!m)
    return CUDA_ERROR_INVALID_HANDLE;
  for (int i = 0; i < m->ng; i++)
    if (strcmp(m->gname[i], name) == 0) {
      *p = m->gaddr[i];
      *size = m->gsize[i];
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

/* Lock held. */
static rec_kernel_t *kernel_of_locked(uint64_t f) {
  REC_EACH(rec_module_t, m, modules)
    for (int i = 0; i < m->nk; i++)
      if (m->kh[i] == (f & ~(uint64_t)VIEW_BIT))
        return &m->k[i];
  return NULL;
}

static rec_kernel_t *kernel_of(uint64_t f) {
  rec_kernel_t *k;
  pthread_mutex_lock(&lock);
  k = kernel_of_locked(f);
  pthread_mutex_unlock(&lock);
  return k;
}

/* ---- what kernels do ----
 * Every launch logs the original linear block indices it runs, in order
 * (hostd_record_blocks): an original launch all of its grid, a
 * NAME__tally_slice launch and a NAME__tally_ptb launch what the calling
 * convention of rewrite/rw.h gives them.  A PTB launch takes its indices
 * from its control block in device memory and stops at its flag, so the
 * block log after a preemption and a resumed launch says whether hostd
 * resumed exactly where the kernel stopped.  With hostd_record_ptb_hold on,
 * a PTB launch runs its static indices and then holds its stream (as a
 * long kernel would) until its flag is raised or the hold is lifted.
 * A NAME__tally_flush launch runs block b as original index offset + b, or
 * with tally_redo the b-th index its redo list names; with the hold on, its
 * first half of blocks finish at once (they committed) and it holds its
 * stream: a raised flag makes the other blocks give up (their indices
 * listed in its control block, n counted, as rewrite/README.md lays out),
 * lifting the hold lets them finish.  A flag raised before it starts makes
 * every block give up. */
static uint64_t block_log[BLOCK_LOG_MAX];
static size_t n_block_log;
static bool ptb_hold;

static void log_block(uint64_t idx) {
  if (n_block_log < BLOCK_LOG_MAX)
    block_log[n_block_log++] = idx;
}

size_t hostd_record_blocks(uint64_t *out, size_t cap) {
  size_t n;
  pthread_mutex_lock(&lock);
  n = n_block_log < cap ? n_block_log : cap;
  if (out)
    memcpy(out, block_log, n * sizeof(*out));
  n = n_block_log;
  n_block_log = 0;
  pthread_mutex_unlock(&lock);
  return n;
}

static bool has_suffix(const char *name, const char *suf) {
  size_t n = strlen(name), m = strlen(suf);
  return n > m && strcmp(name + n - m, suf) == 0;
}

/* Parameter i of k in args (little-endian, as laid out by k's offsets). */
static uint64_t param(const rec_kernel_t *k, const uint8_t *args, size_t argbytes, uint32_t i) {
  uint64_t v = 0;
  if (i < k->nparams && k->off[i] + k->size[i] <= argbytes && k->size[i] <= 8)
    memcpy(&v, args + k->off[i], k->size[i]);
  return v;
}

/* The block count of the original grid a rewritten kernel is passed, as
 * its x, y and z extents in parameters i, i+1 and i+2 (rewrite/rw.h). */
static uint64_t param_blocks(const rec_kernel_t *k, const uint8_t *args, size_t argbytes,
                             uint32_t i) {
  return param(k, args, argbytes, i) * param(k, args, argbytes, i + 1) *
         param(k, args, argbytes, i + 2);
}

/* The dynamic part of a PTB launch: take indices until the flag or the end. */
static void ptb_dynamic(const rec_op_t *o) {
  const rec_kernel_t *k = kernel_of_locked(o->a);
  uint32_t n = k ? k->nparams : 0;
  uint64_t total, ctl;
  uint8_t *cb;
  if (n < 7)
    return;
  total = param_blocks(k, o->bytes, o->n, n - 7);
  ctl = param(k, o->bytes, o->n, n - 4);
  if (!(cb = find(ctl, 16)))
    return;
  for (;;) {
    uint64_t next;
    uint32_t flag;
    memcpy(&flag, cb + 8, 4);
    memcpy(&next, cb, 8);
    if (flag || next >= total)
      break;
    next++;
    memcpy(cb, &next, 8);
    log_block(next - 1);
  }
}

/* FLUSH launch o's blocks from first on: finished (logged), or given up
 * when its flag is up (listed in its control block).  A redo's indices
 * come from the list its tally_redo names. */
static void flush_blocks(const rec_op_t *o, uint64_t first) {
  const rec_kernel_t *k = kernel_of_locked(o->a);
  uint32_t n = k ? k->nparams : 0, flag = 0, given = 0, nprev = 0;
  uint64_t ctl, off, redo, count = o->grid[0];
  uint8_t *cb, *prev = NULL, *at;
  if (n < 6 || !(cb = find(ctl = param(k, o->bytes, o->n, n - 2), 16)))
    return;
  off = param(k, o->bytes, o->n, n - 3);
  redo = param(k, o->bytes, o->n, n - 1);
  if (redo && (prev = find(redo, 16)) != NULL)
    memcpy(&nprev, prev + 4, 4);
  memcpy(&flag, cb, 4);
  memcpy(&given, cb + 4, 4);
  for (uint64_t b = first; b < count; b++) {
    uint32_t idx = (uint32_t)(off + b);
    if (prev && (b >= nprev || !(at = find(redo + 16 + 4 * b, 4))))
      break;
    if (prev)
      memcpy(&idx, at, 4);
    if (!flag) {
      log_block(idx);
      continue;
    }
    if (!(at = find(ctl + 16 + 4ull * given, 4)))
      break;
    memcpy(at, &idx, 4);
    given++;
  }
  memcpy(cb + 4, &given, 4);
}

/* Whether the flag of launch o (PTB: word 2 of its control block; FLUSH:
 * word 0) is raised; *has: whether o has a control block at all. */
static bool flag_up(const rec_op_t *o, bool *has) {
  const rec_kernel_t *k = kernel_of_locked(o->a);
  uint32_t n = k ? k->nparams : 0, flag = 0;
  bool flush = k && has_suffix(k->name, "__tally_flush");
  uint8_t *cb = n >= (flush ? 6u : 7u) ? find(param(k, o->bytes, o->n, flush ? n - 2 : n - 4), 16)
                                       : NULL;
  if (cb)
    memcpy(&flag, cb + (flush ? 0 : 8), 4);
  *has = cb != NULL;
  return flag != 0;
}

/* A held launch of st (PTB, or FLUSH) goes on when its flag is up or the
 * hold is lifted. */
static bool ptb_go(rec_stream_t *st) {
  const rec_kernel_t *k = kernel_of_locked(st->ptb->a);
  bool has, up = flag_up(st->ptb, &has);
  if (has && !up && ptb_hold)
    return false;
  if (k && has_suffix(k->name, "__tally_flush"))
    flush_blocks(st->ptb, st->ptb->grid[0] / 2);
  else
    ptb_dynamic(st->ptb);
  free(st->ptb->bytes);
  free(st->ptb);
  st->ptb = NULL;
  return true;
}

void hostd_record_ptb_hold(bool on) {
  pthread_mutex_lock(&lock);
  ptb_hold = on;
  if (!draining)
    drain();
  pthread_mutex_unlock(&lock);
}

static void fill_effect(const rec_kernel_t *k, const uint8_t *args, size_t argbytes) {
  uint64_t p, n;
  uint32_t v;
  uint8_t *d;
  memcpy(&p, args + k->off[0], 8);
  memcpy(&v, args + k->off[1], 4);
  memcpy(&n, args + k->off[2], 8);
  d = n <= (1ull << 30) ? find(p, n * 4) : NULL;
  for (uint64_t i = 0; d && i < n; i++)
    memcpy(d + i * 4, &v, 4);
  if (!d)
    sticky = CUDA_ERROR_ILLEGAL_ADDRESS; /* an out-of-bounds kernel faults */
  (void)argbytes;
}

/* What launch o does on the recording device (lock held).  Returns true
 * when it is a PTB launch that now holds its stream (st->ptb takes o). */
static bool launch_effect(rec_stream_t *st, rec_op_t *o) {
  const rec_kernel_t *k = kernel_of_locked(o->a);
  const uint8_t *a = o->bytes;
  uint32_t n;
  if (!k)
    return false;
  n = k->nparams;
  if (strcmp(k->name, "fault") == 0) {
    sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
  } else if (strcmp(k->name, "fill_u32") == 0 && n == 3 && o->n >= 24) {
    fill_effect(k, a, o->n);
  } else if (strcmp(k->name, "tex_copy") == 0 && n == 3) {
    tex_copy_effect(param(k, a, o->n, 0), param(k, a, o->n, 1), param(k, a, o->n, 2));
  } else if (strcmp(k->name, "tmap_copy") == 0 && n == 2 && k->size[1] == CALL_TMAP_BYTES &&
             k->off[1] + CALL_TMAP_BYTES <= o->n) {
    uint8_t *d = find(param(k, a, o->n, 0), CALL_TMAP_BYTES);
    if (d)
      memcpy(d, a + k->off[1], CALL_TMAP_BYTES);
  } else if (has_suffix(k->name, "__tally_slice") && n >= 4) {
    uint64_t total = param_blocks(k, a, o->n, n - 4);
    uint64_t off = param(k, a, o->n, n - 1);
    for (uint64_t b = 0; b < o->grid[0]; b++)
      if (off + b < total)
        log_block(off + b);
    return false;
  } else if (has_suffix(k->name, "__tally_flush") && n >= 6) {
    bool has;
    if (!(ptb_hold && st) || flag_up(o, &has)) { /* runs through (or gives up) at once */
      flush_blocks(o, 0);
      return false;
    }
    /* the first half commit and finish; the rest wait for the flag or the hold */
    rec_op_t half = *o;
    half.grid[0] = o->grid[0] / 2;
    flush_blocks(&half, 0);
    return true;
  } else if (has_suffix(k->name, "__tally_ptb") && n >= 7) {
    uint64_t total = param_blocks(k, a, o->n, n - 7);
    uint64_t first = param(k, a, o->n, n - 3), ns = param(k, a, o->n, n - 2);
    for (uint64_t w = 0; w < ns && w < o->grid[0]; w++)
      if (first + w < total)
        log_block(first + w);
    if (ptb_hold && st)
      return true;
    ptb_dynamic(o);
    return false;
  }
  for (uint64_t b = 0; b < (uint64_t)o->grid[0] * o->grid[1] * o->grid[2]; b++)
    log_block(b);
  return false;
}

/* ---- the context's limits ----
 * One value per CUlimit for the one context (device 0, the only one served),
 * CUDA's defaults on Hopper until set (cuda.h; guestlib/ctx.c answers the
 * same ones).  As on the driver (cuda.h, cuCtxSetLimit): once a kernel that
 * uses the device's malloc ("uses_malloc") or printf ("uses_printf") was
 * launched, a set of the heap (or printf FIFO) size answers
 * CUDA_ERROR_INVALID_VALUE, and a limit past cuda.h's list is refused the
 * same way.  Values are kept as given (the driver may round them).  Reset
 * by init: a new context has the defaults again.  Lock held for all of it. */
static const uint64_t limit_defaults[CU_LIMIT_MAX] = {
    [CU_LIMIT_STACK_SIZE] = 1024,
    [CU_LIMIT_PRINTF_FIFO_SIZE] = 1u << 20,
    [CU_LIMIT_MALLOC_HEAP_SIZE] = 8u << 20,
    [CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2,
    [CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048,
    [CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 128,
};
static uint64_t limits[CU_LIMIT_MAX];
static bool heap_used, fifo_used; /* a uses_malloc / uses_printf kernel was launched */

/* Lock held. */
static void limits_reset(void) {
  memcpy(limits, limit_defaults, sizeof(limits));
  heap_used = fifo_used = false;
}

/* A launch of kernel k: does it fix the heap or the FIFO?  Lock held. */
static void limits_note_launch(const rec_kernel_t *k) {
  if (strcmp(k->name, "uses_malloc") == 0)
    heap_used = true;
  else if (strcmp(k->name, "uses_printf") == 0)
    fifo_used = true;
}

static CUresult rec_ctx_limit_get(int limit, uint64_t *v) {
  LIVE(0);
  if (limit < 0 || limit >= CU_LIMIT_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  *v = limits[limit];
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

static CUresult rec_ctx_limit_set(int limit, uint64_t v) {
  CUresult r = CUDA_SUCCESS;
  LIVE(0);
  count(HOSTD_RECORD_LIMIT);
  if (limit < 0 || limit >= CU_LIMIT_MAX)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if ((limit == CU_LIMIT_MALLOC_HEAP_SIZE && heap_used) ||
      (limit == CU_LIMIT_PRINTF_FIFO_SIZE && fifo_used))
    r = CUDA_ERROR_INVALID_VALUE;
  else
    limits[limit] = v;
  pthread_mutex_unlock(&lock);
  return r;
}

uint32_t hostd__record_part_cluster_max;
_Atomic unsigned long hostd__record_part_launches;
_Atomic unsigned long hostd__record_word_writes;

/* A launch on a partition stream whose cluster (a launch attribute) has
 * more blocks than hostd__record_part_cluster_max (0: no limit) is refused
 * as the driver refuses a cluster the partition's SMs cannot co-schedule. */
static bool part_refuses_cluster(const rec_stream_t *st, const CUlaunchAttribute *attrs,
                                 uint32_t nattr) {
  if (!st || !st->part || !hostd__record_part_cluster_max)
    return false;
  for (uint32_t i = 0; i < nattr; i++)
    if (attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION &&
        (uint64_t)attrs[i].value.clusterDim.x * attrs[i].value.clusterDim.y *
                attrs[i].value.clusterDim.z >
            hostd__record_part_cluster_max)
      return true;
  return false;
}

static CUresult rec_launch(uint64_t f, const uint32_t grid[3], const uint32_t block[3],
                           uint32_t shmem, uint64_t s, const CUlaunchAttribute *attrs,
                           uint32_t nattr, void *args, size_t argbytes) {
  LIVE(f, s);
  const rec_kernel_t *k = kernel_of(f);
  rec_op_t o = {.kind = OP_LAUNCH, .a = f, .n = argbytes, .grid = {grid[0], grid[1], grid[2]},
                .block = {block[0], block[1], block[2]}, .shmem = shmem};
  rec_stream_t *st;
  count(HOSTD_RECORD_LAUNCH);
  if (!k)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!grid[0] || !grid[1] || !grid[2] || !block[0] || !block[1] || !block[2] ||
      (uint64_t)block[0] * block[1] * block[2] > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  if (st)
    st->last_launch = true;
  if (st && st->prio == SNAP_PRIO_GREATEST)
    hostd__record_hi_launch_memsets = hostd__record_hi_memsets;
  if (part_refuses_cluster(st, attrs, nattr)) {
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  }
  if (st && st->part)
    hostd__record_part_launches++;
  if ((o.bytes = malloc(argbytes ? argbytes : 1)) == NULL) {
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memcpy(o.bytes, args, argbytes);
  if (st && st->cap) {
    CUresult r = cap_add(st, &o);
    pthread_mutex_unlock(&lock);
    return r;
  }
  limits_note_launch(k);
  if (busy(st) && defer(s, &o)) {
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
  }
  if (launch_effect(st, &o) && (st->ptb = malloc(sizeof(o))) != NULL) {
    *st->ptb = o; /* held: the stream waits for its flag */
  } else {
    if (st && st->ptb == NULL && has_suffix(k->name, "__tally_ptb") && ptb_hold)
      ptb_dynamic(&o); /* no memory to hold it: it runs through */
    else if (st && st->ptb == NULL && has_suffix(k->name, "__tally_flush") && ptb_hold)
      flush_blocks(&o, o.grid[0] / 2);
    free(o.bytes);
  }
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

/* PTX "compiled" for the recording device: the text itself (parse_module
 * reads PTX), counted so tests see the JIT happen. */
static CUresult rec_jit(const char *ptx, size_t len, void **image, size_t *image_len) {
  LIVE(0);
  count(HOSTD_RECORD_JIT);
  if (!(*image = malloc(len + 1)))
    return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(*image, ptx, len);
  ((char *)*image)[len] = 0;
  *image_len = len + 1;
  return CUDA_SUCCESS;
}

/* Joins TALLYREC inputs into one TALLYREC image: each input's lines after
 * its own TALLYREC line, up to its end or a NUL.  Anything else is not an
 * image this device can link. */
static CUresult rec_link(const hostd_link_input_t *in, size_t n, void **image, size_t *image_len) {
  wire_buf_t b;
  LIVE(0);
  count(HOSTD_RECORD_LINK);
  *image = NULL;
  if (n == 0)
    return CUDA_ERROR_INVALID_VALUE;
  wire_buf_init(&b);
  wire_buf_put_bytes(&b, "TALLYREC\n", 9);
  for (size_t i = 0; i < n; i++) {
    const char *p = in[i].data, *nl;
    size_t len = strnlen(p, in[i].len);
    if (len < 8 || memcmp(p, "TALLYREC", 8) != 0) {
      wire_buf_close(&b);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    if ((nl = memchr(p, '\n', len)) != NULL && (size_t)(nl + 1 - p) < len) {
      wire_buf_put_bytes(&b, nl + 1, len - (size_t)(nl + 1 - p));
      if (p[len - 1] != '\n')
        wire_buf_put_bytes(&b, "\n", 1);
    }
  }
  wire_buf_put_bytes(&b, "", 1); /* NUL-terminated, as module_load reads it */
  if (wire_buf_status(&b) != 0) {
    wire_buf_close(&b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *image = b.data; /* malloc'd storage, now the caller's */
  *image_len = b.len;
  return CUDA_SUCCESS;
}

/* ---- host-function gates ---- */

static CUresult rec_gate_new(void **out, uint32_t nslots) {
  rec_gate_t *g = calloc(1, sizeof(*g));
  if (g)
    g->words = calloc((size_t)nslots * 2, sizeof(uint32_t));
  if (!g || !g->words) {
    free(g);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  g->n = nslots;
  *out = g;
  return CUDA_SUCCESS;
}

static void rec_gate_del(void *gp, int gpu) {
  rec_gate_t *g = gp;
  (void)gpu;
  if (g)
    free(g->words);
  free(g);
}

static CUresult rec_host_fn(uint64_t s, void *gp, uint32_t slot, uint32_t value,
                            hostd_reached_cb reached, void *arg, int *word) {
  LIVE(s);
  rec_gate_t *g = gp;
  rec_op_t o = {.kind = OP_HOSTFN, .cb = reached, .arg = arg, .g = g, .slot = slot, .value = value,
                .word = *word != 0};
  rec_stream_t *st;
  if (!g || slot >= g->n)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  if (!st || st->cap) {
    CUresult r = st ? cap_refuse(s) : CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_unlock(&lock);
    return r;
  }
  if (defer(s, &o)) {
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
  }
  /* The stream is idle: reached now, then blocked until the gate opens. */
  st->gated = true;
  st->g = g;
  st->slot = slot;
  st->value = value;
  pthread_mutex_unlock(&lock);
  reach(&o);
  return CUDA_SUCCESS;
}

static bool rec_gate_reached(void *gp, uint32_t slot, uint32_t value) {
  const rec_gate_t *g = gp;
  return g && slot < g->n && gate_reached(g, g->n + slot, value);
}

static void rec_gate_open(void *gp, uint32_t slot, uint32_t value) {
  rec_gate_t *g = gp;
  if (!g || slot >= g->n)
    return;
  pthread_mutex_lock(&lock);
  g->words[slot] = value;
  if (!draining) /* else the drain running on this thread rescans */
    drain();
  pthread_mutex_unlock(&lock);
}

/* The best-effort partition: an ordinary stream here; the SMs asked for
 * are kept so tests see what hostd asked (rounded up to 8, as on Hopper). */
uint32_t hostd__record_part_sms;

static CUresult rec_part_stream_new(uint64_t *s, int prio, uint32_t sms, uint32_t *got) {
  CUresult r = rec_stream_new(s, CU_STREAM_NON_BLOCKING, prio);
  rec_stream_t *st;
  if (r != CUDA_SUCCESS)
    return r;
  *got = hostd__record_part_sms = (sms + 7) / 8 * 8;
  pthread_mutex_lock(&lock);
  if ((st = stream_find(*s)) != NULL)
    st->part = true;
  pthread_mutex_unlock(&lock);
  return r;
}


static CUresult rec_part_event_new(uint64_t *e, unsigned flags) {
  return rec_event_new(e, flags);
}

/* Host registration: nothing to pin; the range becomes device-accessible at
 * its own address (find), and is counted so tests see it happen. */
static CUresult rec_host_register(void *p, size_t n) {
  LIVE(0);
  rec_reg_t *g;
  if (!p || !n)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(g = calloc(1, sizeof(*g))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  g->size = n;
  rec_publish(&regs, g, (uint64_t)(uintptr_t)p);
  atomic_fetch_add(&hostd__record_registered, 1);
  return CUDA_SUCCESS;
}

static CUresult rec_host_unregister(void *p) {
  int ms = atomic_load(&hostd__record_unregister_ms);
  LIVE(0);
  if (ms > 0)
    usleep((useconds_t)ms * 1000u);
  if (!rec_delete(&regs, (uint64_t)(uintptr_t)p, free))
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  atomic_fetch_sub(&hostd__record_registered, 1);
  return CUDA_SUCCESS;
}

/* Reads attribute attr of function f into *get, or (get NULL) sets it to
 * set.  As gpu-cuda.c: a query loads the function when the attribute needs it. */
static CUresult func_attr_io(uint64_t f, int attr, int *get, int set) {
  rec_kernel_t *k = kernel_of(f);
  if (!k)
    return CUDA_ERROR_INVALID_HANDLE;
  if (attr < 0 || attr >= CALL_FUNC_ATTRS)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if (get) {
    k->loaded = true;
    *get = k->attr[attr];
  } else {
    k->attr[attr] = set;
  }
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

static CUresult rec_func_attr(uint64_t f, int kind, int attr, int *v) {
  LIVE(f);
  (void)kind;
  return func_attr_io(f, attr, v, 0);
}

static CUresult rec_func_set_attr(uint64_t f, int kind, int attr, int v) {
  LIVE(f);
  (void)kind;
  return func_attr_io(f, attr, NULL, v);
}

/* The preference is recorded per function (hostd_record_func_cache). */
static CUresult rec_func_cache(uint64_t f, int kind, int config) {
  LIVE(f);
  (void)kind;
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  rec_kernel_t *k = kernel_of_locked(f);
  if (k)
    k->cache = config;
  pthread_mutex_unlock(&lock);
  return k ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

int hostd_record_func_cache(uint64_t f) {
  pthread_mutex_lock(&lock);
  const rec_kernel_t *k = kernel_of_locked(f);
  int c = k ? k->cache : -1;
  pthread_mutex_unlock(&lock);
  return c;
}

/* cuBLASLt's layout objects: 8 groups of 8 units, each unit's index in its
 * group in a and its group in b (the driver's shape, not any GPU's); none
 * while hostd__record_no_layout (a driver without the slot). */
bool hostd__record_no_layout;
static CUresult rec_blaslt_layout(uint8_t a[CALL_BLASLT_LAYOUT_BYTES],
                                  uint8_t b[CALL_BLASLT_LAYOUT_BYTES]) {
  if (__atomic_load_n(&hostd__record_no_layout, __ATOMIC_RELAXED))
    return CUDA_ERROR_NOT_SUPPORTED;
  for (unsigned i = 0; i < CALL_BLASLT_LAYOUT_BYTES; i++) {
    a[i] = (uint8_t)(i % 8);
    b[i] = (uint8_t)(i / 8);
  }
  return CUDA_SUCCESS;
}

/* Deterministic answers: 1 active cluster, a potential cluster size of 8
 * (the portable maximum), hostd__record_blocks_per_sm blocks per SM (0 by
 * default: the device models no occupancy); the config's cluster
 * attributes are kept for tests. */
int hostd__record_blocks_per_sm;
static CUresult rec_occupancy(uint64_t f, int kind, int which, const CUlaunchConfig *cfg, int *v) {
  LIVE(f);
  (void)kind;
  if (!kernel_of(f))
    return CUDA_ERROR_INVALID_HANDLE;
  if (which == HOSTD_OCC_BLOCKS_PER_SM) {
    *v = hostd__record_blocks_per_sm;
    return CUDA_SUCCESS;
  }
  pthread_mutex_lock(&lock);
  hostd__record_last_cluster[0] = hostd__record_last_cluster[1] = hostd__record_last_cluster[2] = 0;
  hostd__record_last_cluster[3] = -1;
  for (unsigned i = 0; i < cfg->numAttrs; i++)
    if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
      hostd__record_last_cluster[0] = (int)cfg->attrs[i].value.clusterDim.x;
      hostd__record_last_cluster[1] = (int)cfg->attrs[i].value.clusterDim.y;
      hostd__record_last_cluster[2] = (int)cfg->attrs[i].value.clusterDim.z;
    } else if (cfg->attrs[i].id == CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE) {
      hostd__record_last_cluster[3] = (int)cfg->attrs[i].value.clusterSchedulingPolicyPreference;
    }
  pthread_mutex_unlock(&lock);
  *v = which == 0 ? 1 : 8;
  return CUDA_SUCCESS;
}

/* ---- virtual memory management (as the driver: 2 MiB granularity) ----
 * As a driver on a host without a fabric (no IMEX channel): the fabric
 * handle type is refused by the granularity query and by cuMemCreate, so
 * tests see tallyd handle a driver that will not make such memory. */

#define REC_GRANULE (2ull << 20)

static CUresult rec_mem_granularity(uint64_t *g, const hostd_mem_prop_t *p, int option) {
  LIVE(0);
  (void)option;
  if (p->handle_types & CU_MEM_HANDLE_TYPE_FABRIC)
    return CUDA_ERROR_NOT_SUPPORTED;
  *g = REC_GRANULE;
  return CUDA_SUCCESS;
}

/* Frees ph once it is released and unmapped.  Lock held. */
static void phys_settle(rec_phys_t *ph) {
  if (ph->refs || ph->maps)
    return;
  rec_take(&physs, ph->link.h);
  backing_free(ph->bytes, ph->size);
  free(ph);
}

static CUresult rec_mem_create(uint64_t *h, uint64_t size, const hostd_mem_prop_t *p) {
  LIVE(0);
  rec_phys_t *ph = NULL;
  count(HOSTD_RECORD_ALLOC);
  if (p->handle_types & CU_MEM_HANDLE_TYPE_FABRIC)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (size % REC_GRANULE)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(ph = calloc(1, sizeof(*ph))) || !(ph->bytes = backing_new(size))) {
    free(ph);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  ph->size = size;
  ph->refs = 1;
  *h = rec_publish(&physs, ph, handle());
  return CUDA_SUCCESS;
}

static CUresult rec_mem_release(uint64_t h) {
  LIVE(h);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  count(HOSTD_RECORD_FREE);
  pthread_mutex_lock(&lock);
  rec_phys_t *ph = rec_find(physs, h);
  if (ph && ph->refs) {
    ph->refs--;
    phys_settle(ph);
    r = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_mem_reserve(uint64_t *p, uint64_t size, uint64_t align, uint64_t hint) {
  LIVE(0);
  rec_span_t *sp;
  uint64_t a = align > REC_GRANULE ? align : REC_GRANULE;
  (void)hint; /* a hint, as on the driver */
  if (size % REC_GRANULE || (a & (a - 1)) || size > (1ull << 40))
    return CUDA_ERROR_INVALID_VALUE;
  if (!(sp = calloc(1, sizeof(*sp))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  *p = sp->link.h = (next_addr + a - 1) & ~(a - 1);
  sp->size = size;
  next_addr = sp->link.h + size + REC_GRANULE; /* a gap after it */
  rec_push(&reservations, sp);
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

static CUresult rec_mem_unreserve(uint64_t p, uint64_t size) {
  LIVE(p);
  rec_span_t *sp;
  pthread_mutex_lock(&lock);
  bool ok = (sp = rec_find(reservations, p)) && sp->size == size;
  if (ok)
    free(rec_take(&reservations, p));
  pthread_mutex_unlock(&lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* True when [p, p+n) lies inside one reservation.  Lock held. */
static bool in_reservation(uint64_t p, uint64_t n) {
  REC_EACH(rec_span_t, sp, reservations)
    if (p >= sp->link.h && n <= sp->size && p - sp->link.h <= sp->size - n)
      return true;
  return false;
}

static CUresult rec_mem_map(uint64_t p, uint64_t size, uint64_t off, uint64_t h) {
  LIVE(p, h);
  rec_alloc_t *a = calloc(1, sizeof(*a));
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (!a)
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  rec_phys_t *ph = rec_find(physs, h);
  if (ph && ph->refs && in_reservation(p, size) && off <= ph->size && size <= ph->size - off &&
      !find(p, 1) && !find(p + size - 1, 1) && (p | size | off) % REC_GRANULE == 0) {
    *a = (rec_alloc_t){{NULL, p}, size, ph->bytes + off, ph, 0};
    rec_push(&allocs, a);
    ph->maps++;
    r = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&lock);
  if (r != CUDA_SUCCESS)
    free(a);
  return r;
}

static CUresult rec_mem_unmap(uint64_t p, uint64_t size) {
  LIVE(p);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  for (rec_link_t **pa = &allocs; *pa;) {
    rec_alloc_t *a = (rec_alloc_t *)*pa;
    if (a->phys && a->link.h >= p && a->link.h - p < size) {
      rec_unlink(pa);
      a->phys->maps--;
      phys_settle(a->phys);
      free(a);
      r = CUDA_SUCCESS;
    } else {
      pa = &a->link.next;
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_mem_set_access(uint64_t p, uint64_t size, unsigned flags) {
  LIVE(p);
  pthread_mutex_lock(&lock);
  bool ok = in_reservation(p, size) && flags <= CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  pthread_mutex_unlock(&lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult rec_mem_retain(uint64_t *h, uint64_t p) {
  LIVE(p);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  REC_EACH(rec_alloc_t, a, allocs)
    if (a->phys && p >= a->link.h && p - a->link.h < a->size) {
      a->phys->refs++;
      *h = a->phys->link.h;
      r = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&lock);
  return r;
}

/* ---- memory pools: allocations from them are plain allocations that
 * remember their pool; a free on a stream happens at once (stream order is
 * not modelled for it) ---- */

static CUresult rec_pool_new(uint64_t *pool, const hostd_mem_prop_t *p, uint64_t max_size) {
  LIVE(0);
  rec_span_t *sp;
  (void)max_size;
  if (p->handle_types & CU_MEM_HANDLE_TYPE_FABRIC)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (!(sp = calloc(1, sizeof(*sp))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  *pool = rec_publish(&pools, sp, handle());
  return CUDA_SUCCESS;
}

static CUresult rec_pool_del(uint64_t pool) {
  LIVE(pool);
  return rec_delete(&pools, pool, free) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Attributes are kept as set; the used-memory ones follow allocations. */
static CUresult rec_pool_attr(uint64_t pool, int attr, int set, uint64_t *v) {
  LIVE(pool);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  rec_span_t *sp = rec_find(pools, pool);
  if (sp && attr >= CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES &&
      attr <= CU_MEMPOOL_ATTR_USED_MEM_HIGH) {
    r = CUDA_SUCCESS;
    if (attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT || attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
      r = set ? CUDA_ERROR_INVALID_VALUE : (*v = sp->size, CUDA_SUCCESS);
    else if (set)
      sp->attr[attr] = *v;
    else
      *v = sp->attr[attr];
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_pool_trim(uint64_t pool, uint64_t keep) {
  LIVE(pool);
  (void)keep;
  return rec_known(&pools, pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult rec_mem_alloc_async(uint64_t *p, uint64_t size, uint64_t pool, uint64_t s) {
  LIVE(pool, s);
  CUresult r;
  rec_alloc_t *a;
  if (!rec_known(&pools, pool))
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = rec_mem_alloc(p, size)) != CUDA_SUCCESS)
    return r;
  pthread_mutex_lock(&lock);
  if ((a = rec_find(allocs, *p)))
    a->pool = pool;
  rec_span_t *sp = rec_find(pools, pool);
  if (sp) {
    sp->size += size;
    if (sp->size > sp->attr[CU_MEMPOOL_ATTR_USED_MEM_HIGH])
      sp->attr[CU_MEMPOOL_ATTR_USED_MEM_HIGH] = sp->size;
  }
  pthread_mutex_unlock(&lock);
  return CUDA_SUCCESS;
}

/* Stream-ordered: behind the work queued on s (after a wait for an event,
 * after that event's record), as the driver frees it when s reaches it. */
static CUresult rec_mem_free_async(uint64_t p, uint64_t s) {
  LIVE(p, s);
  rec_op_t o = {.kind = OP_FREE, .a = p};
  CUresult r = CUDA_SUCCESS;
  count(HOSTD_RECORD_FREE);
  pthread_mutex_lock(&lock);
  if (!freeable(p)) {
    r = CUDA_ERROR_INVALID_VALUE;
  } else if (capturing(s)) { /* a free node: the memory is the graph's from here on */
    o.kind = OP_GFREE;
    if ((r = cap_add(stream_find(s), &o)) == CUDA_SUCCESS)
      gref_move(p, 1);
  } else if (!defer(s, &o))
    r = free_locked(p);
  pthread_mutex_unlock(&lock);
  return r;
}


/* ---- stream capture and graphs ----
 * A graph is a list of nodes in the order they were added, each with its
 * dependencies; a replay runs every node once all of its dependencies ran
 * (one valid order of the DAG), each node's work on the launching stream
 * (queued behind a gate as any other work).  A capture appends the work of
 * each stream taking part to its graph instead of running it; a stream
 * joins by waiting for an event recorded in the capture; a synchronising
 * call on a capturing stream fails and invalidates the capture, as on the
 * driver.  Instantiation copies the graph, so later changes to it do not
 * reach the exec.  Not modelled: unjoined forks at the end of a capture,
 * the capture modes' thread rules beyond the calling thread's own. */

typedef struct rec_gnode {
  uint64_t h, orig;        /* its handle; in an exec, the graph node it came from */
  rec_op_t op;             /* the work (op.bytes owned) */
  struct rec_graph *child; /* OP_CHILD: an owned copy */
  uint64_t *deps;
  size_t ndeps;
  bool ran;
  bool disabled; /* in an exec: cuGraphNodeSetEnabled(0), skipped by replays */
  uint8_t *attrs; /* a kernel node's attributes: REC_ATTRS values, set ones in attr_set */
  uint32_t attr_set;
  struct rec_gnode *next;
} rec_gnode_t;
#define REC_ATTRS 32 /* attribute ids kept (CUlaunchAttributeID is below this) */

typedef struct rec_graph {
  rec_link_t link;
  rec_gnode_t *head, *tail;
  size_t n;
  uint64_t origin;      /* capturing: the stream it began on (0: not a capture) */
  bool invalidated;     /* capturing: a prohibited call happened */
  bool strict;          /* capturing in a mode that prohibits unsafe calls on its thread */
  bool given;           /* capturing into a graph that existed before (ToGraph) */
} rec_graph_t;

static __thread int thr_mode;        /* CUstreamCaptureMode of this thread (0: global) */
static __thread int thr_strict;      /* strict captures this thread began, still open */

static rec_gnode_t *gnode_find(const rec_graph_t *g, uint64_t h) {
  for (rec_gnode_t *n = g->head; n; n = n->next)
    if (n->h == h)
      return n;
  return NULL;
}

static void graph_free(rec_graph_t *g);

static void gnode_free(rec_gnode_t *n) {
  if (n->op.kind == OP_GFREE)
    gref_move(n->op.a, -1);
  free(n->attrs);
  free(n->op.bytes);
  free(n->deps);
  graph_free(n->child);
  free(n);
}

static void graph_free(rec_graph_t *g) {
  while (g && g->head) {
    rec_gnode_t *n = g->head;
    g->head = n->next;
    gnode_free(n);
  }
  free(g);
}

static void graph_drop(void *rec) { /* graph_free, for rec_clear and rec_delete */
  graph_free(rec);
}

/* Appends a node doing *op (taking op->bytes) after deps; NULL: no memory. */
static rec_gnode_t *gnode_add(rec_graph_t *g, const rec_op_t *op, const uint64_t *deps,
                              size_t ndeps) {
  rec_gnode_t *n = calloc(1, sizeof(*n));
  if (!n || (ndeps && !(n->deps = malloc(ndeps * sizeof(*deps))))) {
    free(n);
    return NULL;
  }
  n->op = *op;
  n->op.next = NULL;
  if (ndeps)
    memcpy(n->deps, deps, ndeps * sizeof(*deps));
  n->ndeps = ndeps;
  next_handle += 0x10;
  n->h = next_handle;
  if (g->tail)
    g->tail->next = n;
  else
    g->head = n;
  g->tail = n;
  g->n++;
  return n;
}

static rec_graph_t *graph_clone(const rec_graph_t *src) {
  rec_graph_t *g = calloc(1, sizeof(*g));
  bool ok = g != NULL;
  for (const rec_gnode_t *s = src->head; ok && s; s = s->next) {
    rec_op_t op = s->op;
    rec_gnode_t *n;
    op.bytes = s->op.bytes && s->op.n ? malloc(s->op.n) : NULL;
    if (op.bytes)
      memcpy(op.bytes, s->op.bytes, s->op.n);
    ok = (!s->op.bytes || !s->op.n || op.bytes) && (n = gnode_add(g, &op, s->deps, s->ndeps));
    if (!ok) {
      free(op.bytes);
      break;
    }
    n->h = s->h; /* the same node names inside the copy */
    n->orig = s->h;
    if (s->attrs && (n->attrs = malloc(REC_ATTRS * CALL_ATTR_VALUE_SIZE))) {
      memcpy(n->attrs, s->attrs, REC_ATTRS * CALL_ATTR_VALUE_SIZE);
      n->attr_set = s->attr_set;
    }
    if (op.kind == OP_GFREE) /* the copy holds the graph's allocation too */
      gref_move(op.a, 1);
    if (s->child && !(n->child = graph_clone(s->child)))
      ok = false;
  }
  if (!ok) {
    graph_free(g);
    return NULL;
  }
  return g;
}

/* Work o on capturing stream st (lock held): a node after the stream's
 * dependencies, which it then replaces.  Takes o->bytes.  A CUresult. */
static CUresult cap_add(rec_stream_t *st, rec_op_t *o) {
  rec_gnode_t *n;
  if (st->cap->invalidated) {
    free(o->bytes);
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  if (!(n = gnode_add(st->cap, o, st->cap_deps, st->cap_ndeps))) {
    free(o->bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  st->cap_deps[0] = n->h;
  st->cap_ndeps = 1;
  count(HOSTD_RECORD_CAPTURED);
  return CUDA_SUCCESS;
}

/* The capture stream s takes part in, or NULL (lock held). */
static rec_graph_t *capturing(uint64_t s) {
  rec_stream_t *st = stream_find(s);
  return st ? st->cap : NULL;
}

/* A synchronising call on a capturing stream: refused, the capture invalidated. */
static CUresult cap_refuse(uint64_t s) {
  rec_graph_t *g = capturing(s);
  if (!g)
    return CUDA_SUCCESS;
  g->invalidated = true;
  return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/* A capture into a new graph, or (into != 0) into that graph after its
 * ndeps nodes deps, as cuStreamBeginCaptureToGraph. */
static CUresult rec_capture_begin(uint64_t s, int mode, uint64_t into, const uint64_t *deps,
                                  size_t ndeps) {
  LIVE(s);
  rec_stream_t *st;
  rec_graph_t *g = NULL;
  CUresult r = CUDA_SUCCESS;
  if (mode < CU_STREAM_CAPTURE_MODE_GLOBAL || mode > CU_STREAM_CAPTURE_MODE_RELAXED ||
      ndeps > CAP_DEPS || (ndeps && (!into || !deps)))
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  if (!st)
    r = CUDA_ERROR_INVALID_HANDLE;
  else if (st->cap)
    r = CUDA_ERROR_ILLEGAL_STATE;
  else if (into && (!(g = rec_find(graphs, into)) || g->origin))
    r = CUDA_ERROR_INVALID_VALUE; /* no such graph, or one another capture fills */
  else if (!into && !(g = calloc(1, sizeof(*g))))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; r == CUDA_SUCCESS && i < ndeps; i++)
    if (!gnode_find(g, deps[i]))
      r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS) {
    if (!into) {
      g->link.h = next_handle += 0x10;
      rec_push(&graphs, g);
    }
    g->origin = s;
    g->given = into != 0;
    g->strict = mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    thr_strict += g->strict;
    st->cap = g;
    st->cap_ndeps = ndeps;
    for (size_t i = 0; i < ndeps; i++)
      st->cap_deps[i] = deps[i];
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_capture_end(uint64_t s, uint64_t *graph) {
  LIVE(s);
  rec_stream_t *st;
  rec_graph_t *g;
  bool given;
  CUresult r = CUDA_SUCCESS;
  *graph = 0;
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  g = st ? st->cap : NULL;
  if (!g || g->origin != s) {
    pthread_mutex_unlock(&lock);
    return st ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_INVALID_HANDLE;
  }
  REC_EACH(rec_stream_t, o, streams)
    if (o->cap == g)
      o->cap = NULL, o->cap_ndeps = 0;
  REC_EACH(rec_event_t, e, events)
    if (e->cap == g)
      e->cap = NULL;
  thr_strict -= g->strict;
  g->origin = 0;
  given = g->given;
  g->given = false;
  if (g->invalidated) {
    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    g->invalidated = false;
    if (!given) /* a graph the tenant gave stays its own, with what was captured */
      graph_free(rec_take(&graphs, g->link.h));
  } else {
    *graph = g->link.h;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_capture_info(uint64_t s, int *status, uint64_t *id, uint64_t *graph,
                                 uint64_t *deps, size_t cap, size_t *ndeps) {
  LIVE(s);
  rec_stream_t *st;
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  *status = !st || !st->cap       ? CU_STREAM_CAPTURE_STATUS_NONE
            : st->cap->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                   : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  *id = *graph = 0;
  *ndeps = 0;
  if (st && st->cap) {
    *id = *graph = st->cap->link.h;
    *ndeps = st->cap_ndeps;
    for (size_t i = 0; i < st->cap_ndeps && i < cap; i++)
      deps[i] = st->cap_deps[i];
  }
  pthread_mutex_unlock(&lock);
  return st ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult rec_capture_deps(uint64_t s, const uint64_t *deps, size_t n, int set) {
  LIVE(s);
  rec_stream_t *st;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  if (!st || !st->cap)
    r = CUDA_ERROR_ILLEGAL_STATE;
  for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++)
    if (!gnode_find(st->cap, deps[i]))
      r = CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && (set ? n : st->cap_ndeps + n) > CAP_DEPS)
    r = CUDA_ERROR_OUT_OF_MEMORY; /* more than the recording device keeps */
  if (r == CUDA_SUCCESS) {
    if (set)
      st->cap_ndeps = 0;
    for (size_t i = 0; i < n; i++)
      st->cap_deps[st->cap_ndeps++] = deps[i];
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_capture_mode(int *mode) {
  int old = thr_mode;
  if (*mode < CU_STREAM_CAPTURE_MODE_GLOBAL || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  thr_mode = *mode;
  *mode = old;
  return CUDA_SUCCESS;
}

/* An unsafe call (memory allocation) while this thread has a strict capture open. */
static bool unsafe_refused(void) {
  return thr_strict > 0 && thr_mode != CU_STREAM_CAPTURE_MODE_RELAXED;
}

static CUresult rec_graph_new(uint64_t *out) {
  LIVE(0);
  rec_graph_t *g = calloc(1, sizeof(*g));
  if (!g)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *out = rec_publish(&graphs, g, handle());
  return CUDA_SUCCESS;
}

/* A graph being captured into is found (success) but not deleted. */
static CUresult rec_graph_del(uint64_t h) {
  LIVE(h);
  pthread_mutex_lock(&lock);
  rec_graph_t *g = rec_find(graphs, h);
  bool found = g != NULL;
  if (g && !g->origin)
    graph_free(rec_take(&graphs, h));
  pthread_mutex_unlock(&lock);
  return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The work a graph node of description d does (lock held); a CUresult. */
static CUresult gnode_op(const hostd_gnode_t *d, rec_op_t *o, rec_graph_t **child) {
  rec_graph_t *c;
  memset(o, 0, sizeof(*o));
  switch (d->kind) {
  case CALL_GNODE_EMPTY:
    o->kind = OP_NOP;
    return CUDA_SUCCESS;
  case CALL_GNODE_KERNEL:
    if (!kernel_of_locked(d->handle))
      return CUDA_ERROR_INVALID_VALUE;
    *o = (rec_op_t){.kind = OP_LAUNCH, .a = d->handle, .n = d->argbytes,
                    .grid = {d->grid[0], d->grid[1], d->grid[2]},
                    .block = {d->block[0], d->block[1], d->block[2]}, .shmem = d->shmem};
    if (!(o->bytes = malloc(d->argbytes ? d->argbytes : 1)))
      return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(o->bytes, d->args, d->argbytes);
    return CUDA_SUCCESS;
  case CALL_GNODE_MEMCPY:
    *o = (rec_op_t){.kind = OP_DTOD, .a = d->dst, .b = d->src, .n = d->width};
    return find(d->dst, d->width) && find(d->src, d->width) ? CUDA_SUCCESS
                                                             : CUDA_ERROR_INVALID_VALUE;
  case CALL_GNODE_MEMSET:
    *o = (rec_op_t){.kind = OP_MEMSET, .a = d->dst, .n = d->width, .v = d->value,
                    .elem = d->elem, .pitch = d->pitch, .height = d->height};
    return (d->elem == 1 || d->elem == 2 || d->elem == 4) && d->height &&
                   find(d->dst + (d->height - 1) * d->pitch, d->width * d->elem)
               ? CUDA_SUCCESS
               : CUDA_ERROR_INVALID_VALUE;
  case CALL_GNODE_EVENT_REC:
  case CALL_GNODE_EVENT_WAIT:
    o->kind = d->kind == CALL_GNODE_EVENT_REC ? OP_RECORD : OP_EVWAIT;
    o->a = d->handle;
    return event_find(d->handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  case CALL_GNODE_CHILD:
    if (!(c = rec_find(graphs, d->handle)))
      return CUDA_ERROR_INVALID_VALUE;
    o->kind = OP_CHILD;
    return (*child = graph_clone(c)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

/* Graph h, which nodes may join after deps (lock held): NULL when h is not
 * a graph, or deps are not all its nodes.  A graph being captured into
 * takes nodes too, as the driver's does (capture_deps then makes later
 * captured work depend on them). */
static rec_graph_t *graph_to_add(uint64_t h, const uint64_t *deps, size_t ndeps) {
  rec_graph_t *g = rec_find(graphs, h);
  if (!g)
    return NULL;
  for (size_t i = 0; i < ndeps; i++)
    if (!gnode_find(g, deps[i]))
      return NULL;
  return g;
}

/* A memory node (rec_graph_add): an allocation is made with its node. */
static CUresult graph_add_mem(uint64_t *node, uint64_t h, const uint64_t *deps, size_t ndeps,
                              const hostd_gnode_t *d) {
  rec_op_t o = {.kind = OP_GFREE, .a = d->dst};
  rec_graph_t *g;
  rec_gnode_t *n = NULL;
  uint64_t p = 0;
  CUresult r = CUDA_SUCCESS;
  if (d->kind == CALL_GNODE_MEM_ALLOC) {
    if (!d->width || !d->dptr)
      return CUDA_ERROR_INVALID_VALUE;
    if ((r = rec_mem_alloc(&p, d->width)) != CUDA_SUCCESS)
      return r;
    o = (rec_op_t){.kind = OP_GALLOC, .a = p, .n = d->width};
  }
  pthread_mutex_lock(&lock);
  if (!(g = graph_to_add(h, deps, ndeps)) || (o.kind == OP_GFREE && !freeable(d->dst)))
    r = CUDA_ERROR_INVALID_VALUE;
  else if (!(n = gnode_add(g, &o, deps, ndeps)))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  if (r == CUDA_SUCCESS) {
    *node = n->h;
    if (o.kind == OP_GFREE)
      gref_move(d->dst, 1);
    else
      *d->dptr = p;
  } else if (p) {
    (void)free_locked(p);
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_graph_add(uint64_t *node, uint64_t h, const uint64_t *deps, size_t ndeps,
                              const hostd_gnode_t *d) {
  LIVE(h);
  if (d->kind == CALL_GNODE_MEM_ALLOC || d->kind == CALL_GNODE_MEM_FREE)
    return graph_add_mem(node, h, deps, ndeps, d);
  rec_graph_t *g, *child = NULL;
  rec_gnode_t *n = NULL;
  rec_op_t o;
  CUresult r;
  pthread_mutex_lock(&lock);
  r = (g = graph_to_add(h, deps, ndeps)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && (r = gnode_op(d, &o, &child)) == CUDA_SUCCESS &&
      !(n = gnode_add(g, &o, deps, ndeps))) {
    free(o.bytes);
    graph_free(child);
    r = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (n) {
    n->child = child;
    *node = n->h;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* Drops h from n's dependencies; false when n had none such. */
static bool gnode_undep(rec_gnode_t *n, uint64_t h) {
  for (size_t i = 0; i < n->ndeps; i++)
    if (n->deps[i] == h) {
      n->deps[i] = n->deps[--n->ndeps];
      return true;
    }
  return false;
}

static CUresult rec_graph_deps(uint64_t h, const uint64_t *from, const uint64_t *to, size_t k,
                               int remove) {
  LIVE(h);
  rec_graph_t *g;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if ((g = rec_find(graphs, h))) {
    r = CUDA_SUCCESS;
    for (size_t i = 0; i < k && r == CUDA_SUCCESS; i++) {
      rec_gnode_t *t = gnode_find(g, to[i]);
      uint64_t *nd;
      if (!t || !gnode_find(g, from[i]) || from[i] == to[i])
        r = CUDA_ERROR_INVALID_VALUE;
      else if (remove)
        r = gnode_undep(t, from[i]) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      else if (!(nd = realloc(t->deps, (t->ndeps + 1) * sizeof(*nd))))
        r = CUDA_ERROR_OUT_OF_MEMORY;
      else
        t->deps = nd, t->deps[t->ndeps++] = from[i];
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* A node of a graph (not of an exec) goes, with every edge naming it. */
static CUresult rec_graph_node_del(uint64_t h) {
  LIVE(h);
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  REC_EACH(rec_graph_t, g, graphs) {
    rec_gnode_t *prev = NULL, *n = g->head;
    for (; n && n->h != h; prev = n, n = n->next)
      ;
    if (!n)
      continue;
    if (prev)
      prev->next = n->next;
    else
      g->head = n->next;
    if (g->tail == n)
      g->tail = prev;
    g->n--;
    for (rec_gnode_t *o = g->head; o; o = o->next)
      while (gnode_undep(o, h))
        ;
    gnode_free(n);
    r = CUDA_SUCCESS;
    break;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* Whether node n of g may run now: it has not, and each of its
 * dependencies has (one no longer in g counts as run). */
static bool gnode_ready(const rec_graph_t *g, const rec_gnode_t *n) {
  bool ready = !n->ran;
  for (size_t i = 0; ready && i < n->ndeps; i++) {
    const rec_gnode_t *d = gnode_find(g, n->deps[i]);
    ready = !d || d->ran;
  }
  return ready;
}

/* Marks g's nodes not run; true when every node can run (no cycle). */
static bool graph_acyclic(rec_graph_t *g) {
  size_t done = 0, before;
  for (rec_gnode_t *n = g->head; n; n = n->next)
    n->ran = false;
  do {
    before = done;
    for (rec_gnode_t *n = g->head; n; n = n->next)
      if (gnode_ready(g, n))
        n->ran = true, done++;
  } while (done != before);
  return done == g->n;
}

static CUresult rec_graph_instantiate(uint64_t *exec, uint64_t h, uint64_t flags) {
  LIVE(h);
  rec_graph_t *g, *e = NULL;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  (void)flags;
  pthread_mutex_lock(&lock);
  if ((g = rec_find(graphs, h)) && !g->origin && graph_acyclic(g))
    r = (e = graph_clone(g)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  if (e) {
    *exec = e->link.h = next_handle += 0x10;
    rec_push(&gexecs, e);
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* Runs (or queues) one replay of g on stream s (lock held). */
static void graph_run(rec_graph_t *g, uint64_t s) {
  rec_stream_t *st = stream_find(s);
  for (rec_gnode_t *n = g->head; n; n = n->next)
    n->ran = false;
  for (bool more = true; more;) {
    more = false;
    for (rec_gnode_t *n = g->head; n; n = n->next) {
      if (!gnode_ready(g, n))
        continue;
      n->ran = more = true;
      if (n->disabled)
        continue;
      if (n->op.kind == OP_CHILD) {
        graph_run(n->child, s);
        continue;
      }
      rec_op_t o = n->op;
      if (o.kind == OP_HOSTFN) { /* queued, so drain() calls it without the lock */
        rec_op_t *q = o.cb ? malloc(sizeof(*q)) : NULL; /* unarmed: nothing to call */
        if (q && st) {
          *q = o;
          q->next = NULL;
          if (st->tail)
            st->tail->next = q;
          else
            st->head = q;
          st->tail = q;
        } else {
          free(q);
        }
        continue;
      }
      rec_event_t *ev = event_find(o.a);
      if (o.kind == OP_RECORD && ev)
        o.b = ++ev->recorded;
      if (o.kind == OP_EVWAIT)
        o.b = ev ? ev->recorded : 0;
      if (o.bytes && (o.bytes = malloc(o.n ? o.n : 1)))
        memcpy(o.bytes, n->op.bytes, o.n);
      if (!defer(s, &o)) {
        if (o.kind == OP_EVWAIT && st && !event_reached(o.a, o.b))
          st->evwait = o.a, st->evtarget = o.b;
        else
          exec_op(st, &o);
        free(o.bytes);
      }
    }
  }
}

static CUresult rec_graph_launch(uint64_t exec, uint64_t s, int upload) {
  LIVE(exec, s);
  rec_graph_t *e;
  rec_stream_t *st;
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&lock);
  e = rec_find(gexecs, exec);
  st = stream_find(s);
  if (!e || !st) {
    r = !e ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_INVALID_HANDLE;
  } else if (!upload && st->cap) { /* captured: a child graph node */
    rec_op_t o = {.kind = OP_CHILD};
    rec_graph_t *c = graph_clone(e);
    r = c ? cap_add(st, &o) : CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
      st->cap->tail->child = c;
    else
      graph_free(c);
  } else if (!upload) {
    count(HOSTD_RECORD_GRAPH_LAUNCH);
    graph_run(e, s);
    if (!draining)
      drain();
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_graph_exec_del(uint64_t exec) {
  LIVE(exec);
  return rec_delete(&gexecs, exec, graph_drop) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* cuGraphExecUpdate: the same nodes in the same order and kinds take the
 * graph's parameters; anything else changes the topology. */
static CUresult rec_graph_exec_update(uint64_t exec, uint64_t h, int *result, uint64_t *err_node) {
  LIVE(exec, h);
  rec_graph_t *e, *g;
  rec_gnode_t *a, *b;
  CUresult r = CUDA_SUCCESS;
  *result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  *err_node = 0;
  pthread_mutex_lock(&lock);
  e = rec_find(gexecs, exec);
  g = rec_find(graphs, h);
  if (!e || !g) {
    pthread_mutex_unlock(&lock);
    *result = CU_GRAPH_EXEC_UPDATE_ERROR;
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (a = e->head, b = g->head; a && b; a = a->next, b = b->next)
    if (a->op.kind != b->op.kind || a->ndeps != b->ndeps)
      break;
  if (a || b || e->n != g->n) {
    *result = CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    *err_node = b ? b->h : 0;
    r = CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  for (a = e->head, b = g->head; r == CUDA_SUCCESS && a; a = a->next, b = b->next) {
    uint8_t *bytes = b->op.bytes ? malloc(b->op.n ? b->op.n : 1) : NULL;
    rec_graph_t *child = b->child ? graph_clone(b->child) : NULL;
    if ((b->op.bytes && !bytes) || (b->child && !child)) {
      free(bytes);
      graph_free(child);
      r = CUDA_ERROR_OUT_OF_MEMORY;
      break;
    }
    graph_free(a->child);
    a->child = child;
    if (bytes)
      memcpy(bytes, b->op.bytes, b->op.n);
    free(a->op.bytes);
    a->op = b->op;
    a->op.bytes = bytes;
    a->orig = b->h;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_graph_exec_set(uint64_t exec, uint64_t node, const hostd_gnode_t *d) {
  LIVE(exec, node);
  rec_graph_t *e;
  rec_gnode_t *n = NULL;
  rec_op_t o;
  rec_graph_t *child = NULL;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if ((e = rec_find(gexecs, exec)))
    for (n = e->head; n && n->orig != node; n = n->next)
      ;
  if (n && (r = gnode_op(d, &o, &child)) == CUDA_SUCCESS) {
    if (o.kind != n->op.kind) { /* a node of another kind */
      free(o.bytes);
      graph_free(child);
      r = CUDA_ERROR_INVALID_VALUE;
    } else {
      free(n->op.bytes);
      n->op = o;
      if (child) { /* the exec replays its own copy of the new child graph */
        graph_free(n->child);
        n->child = child;
      }
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* An exec's node enabled or not, as the driver allows for kernels, memsets
 * and copies only. */
static CUresult rec_graph_enable(uint64_t exec, uint64_t node, int set, unsigned *enabled) {
  LIVE(exec, node);
  rec_graph_t *e;
  rec_gnode_t *n = NULL;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if ((e = rec_find(gexecs, exec)))
    for (n = e->head; n && n->orig != node; n = n->next)
      ;
  if (n && (n->op.kind == OP_LAUNCH || n->op.kind == OP_MEMSET || n->op.kind == OP_DTOD ||
            n->op.kind == OP_HTOD || n->op.kind == OP_DTOH)) {
    r = CUDA_SUCCESS;
    if (set)
      n->disabled = !*enabled;
    else
      *enabled = !n->disabled;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* The graph holding node h, and the node (lock held). */
static rec_graph_t *gnode_graph(uint64_t h, rec_gnode_t **node);

/* A graph's node takes d's parameters; execs made before keep theirs. */
static CUresult rec_graph_set(uint64_t node, const hostd_gnode_t *d) {
  LIVE(node);
  rec_gnode_t *n = NULL;
  rec_graph_t *child = NULL;
  rec_op_t o;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if (d->kind != CALL_GNODE_CHILD && gnode_graph(node, &n) &&
      (r = gnode_op(d, &o, &child)) == CUDA_SUCCESS) {
    if (o.kind != n->op.kind) {
      free(o.bytes);
      r = CUDA_ERROR_INVALID_VALUE;
    } else {
      free(n->op.bytes);
      n->op = o;
    }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* What a graph's node is, from the work it records: copies answer their
 * type alone, as every node that is not a kernel, a memset, an event's or
 * empty. */
static CUresult rec_graph_node(uint64_t node, int *type, hostd_gnode_t *d, size_t cap) {
  LIVE(node);
  rec_gnode_t *n = NULL;
  CUresult r = CUDA_SUCCESS;
  d->kind = CALL_GNODE_KINDS;
  pthread_mutex_lock(&lock);
  if (!gnode_graph(node, &n)) {
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
  }
  const rec_op_t *o = &n->op;
  switch (o->kind) {
  case OP_NOP:
    *type = CU_GRAPH_NODE_TYPE_EMPTY, d->kind = CALL_GNODE_EMPTY;
    break;
  case OP_LAUNCH:
    *type = CU_GRAPH_NODE_TYPE_KERNEL;
    if (o->n > cap) {
      r = CUDA_ERROR_INVALID_VALUE;
      break;
    }
    d->kind = CALL_GNODE_KERNEL, d->handle = o->a, d->fkind = 0, d->shmem = o->shmem;
    memcpy(d->grid, o->grid, sizeof(d->grid));
    memcpy(d->block, o->block, sizeof(d->block));
    memcpy(d->args, o->bytes, o->n);
    d->argbytes = o->n;
    break;
  case OP_MEMSET:
    *type = CU_GRAPH_NODE_TYPE_MEMSET, d->kind = CALL_GNODE_MEMSET;
    d->dst = o->a, d->width = o->n, d->value = o->v, d->elem = o->elem;
    d->pitch = o->pitch, d->height = o->height ? o->height : 1;
    break;
  case OP_RECORD:
  case OP_EVWAIT:
    *type = o->kind == OP_RECORD ? CU_GRAPH_NODE_TYPE_EVENT_RECORD : CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    d->kind = o->kind == OP_RECORD ? CALL_GNODE_EVENT_REC : CALL_GNODE_EVENT_WAIT;
    d->handle = o->a;
    break;
  case OP_CHILD:
    *type = CU_GRAPH_NODE_TYPE_GRAPH;
    break;
  case OP_HOSTFN:
    *type = CU_GRAPH_NODE_TYPE_HOST;
    break;
  case OP_GFREE:
    *type = CU_GRAPH_NODE_TYPE_MEM_FREE, d->kind = CALL_GNODE_MEM_FREE, d->dst = o->a;
    break;
  case OP_DTOD: /* device memory both sides, or registered host memory as a source */
    *type = CU_GRAPH_NODE_TYPE_MEMCPY, d->kind = CALL_GNODE_MEMCPY;
    d->dst = o->a, d->src = o->b, d->width = o->n;
    d->elem = rec_find(regs, o->b) ? 2u : 0u;
    break;
  case OP_GALLOC:
    *type = CU_GRAPH_NODE_TYPE_MEM_ALLOC, d->kind = CALL_GNODE_MEM_ALLOC;
    d->dst = o->a, d->width = o->n;
    break;
  default:
    *type = CU_GRAPH_NODE_TYPE_MEMCPY;
    break;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* A kernel node's attributes, kept as given: an unset one reads as zeros;
 * a device-updatable node gets its handle back as its device node, as the
 * driver writes one. */
static CUresult rec_graph_attr(uint64_t node, uint64_t src, uint32_t what, uint32_t attr,
                               void *value) {
  LIVE(node);
  rec_gnode_t *n = NULL, *s = NULL;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if (!gnode_graph(node, &n) || n->op.kind != OP_LAUNCH || (what < 2 && attr >= REC_ATTRS) ||
      (what == 2 && (!gnode_graph(src, &s) || s->op.kind != OP_LAUNCH)))
    goto out;
  r = CUDA_SUCCESS;
  if (what == 2) {
    if (s->attrs && !n->attrs && !(n->attrs = malloc(REC_ATTRS * CALL_ATTR_VALUE_SIZE)))
      r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (s->attrs)
      memcpy(n->attrs, s->attrs, REC_ATTRS * CALL_ATTR_VALUE_SIZE), n->attr_set = s->attr_set;
  } else if (what == 0) {
    if (n->attr_set & (1u << attr))
      memcpy(value, n->attrs + attr * CALL_ATTR_VALUE_SIZE, CALL_ATTR_VALUE_SIZE);
    else
      memset(value, 0, CALL_ATTR_VALUE_SIZE);
  } else if (!n->attrs && !(n->attrs = calloc(REC_ATTRS, CALL_ATTR_VALUE_SIZE))) {
    r = CUDA_ERROR_OUT_OF_MEMORY;
  } else {
    if (attr == CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE) {
      CUlaunchAttributeValue *v = value;
      v->deviceUpdatableKernelNode.devNode = (CUgraphDeviceNode)(uintptr_t)node;
    }
    memcpy(n->attrs + attr * CALL_ATTR_VALUE_SIZE, value, CALL_ATTR_VALUE_SIZE);
    n->attr_set |= 1u << attr;
  }
out:
  pthread_mutex_unlock(&lock);
  return r;
}

/* Graph memory: the recording device has no allocation nodes, so there is
 * none to trim and every amount is 0; only the high watermarks may be set,
 * and only to 0, as the driver allows. */
static CUresult rec_graph_mem(uint32_t what, uint32_t attr, uint64_t *value) {
  LIVE(0);
  if (what == 1)
    *value = 0;
  if (what == 2 && (*value != 0 || (attr != CU_GRAPH_MEM_ATTR_USED_MEM_HIGH &&
                                    attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)))
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* cuGraphClone: a copy whose nodes have handles of their own (orig names
 * the node each was copied from, for graph_find), edges renamed. */
static CUresult rec_graph_clone(uint64_t *out, uint64_t h) {
  LIVE(h);
  rec_graph_t *g, *c = NULL;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&lock);
  if ((g = rec_find(graphs, h)) && !g->origin)
    r = (c = graph_clone(g)) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  if (c) { /* handles as gnode_add and instantiate make them (lock held) */
    for (rec_gnode_t *n = c->head; n; n = n->next)
      n->h = next_handle += 0x10;
    for (rec_gnode_t *n = c->head; n; n = n->next)
      for (size_t i = 0; i < n->ndeps; i++)
        for (rec_gnode_t *m = c->head; m; m = m->next)
          if (m->orig == n->deps[i]) {
            n->deps[i] = m->h;
            break;
          }
    *out = c->link.h = next_handle += 0x10;
    rec_push(&graphs, c);
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_graph_find(uint64_t *out, uint64_t node, uint64_t clone) {
  LIVE(node, clone);
  rec_graph_t *c;
  rec_gnode_t *n = NULL;
  pthread_mutex_lock(&lock);
  if ((c = rec_find(graphs, clone)))
    for (n = c->head; n && n->orig != node; n = n->next)
      ;
  *out = n ? n->h : 0;
  pthread_mutex_unlock(&lock);
  return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A graph's host function: one OP_HOSTFN node (both its host node and its
 * wait), unarmed until graph_exec_host points an exec's copy at a gate. */
static CUresult rec_graph_add_host(uint64_t *rnode, uint64_t *wnode, uint64_t h,
                                   const uint64_t *deps, size_t ndeps, void *gate) {
  LIVE(h);
  rec_op_t o = {.kind = OP_HOSTFN, .g = gate}, nop = {.kind = OP_NOP};
  rec_graph_t *g;
  rec_gnode_t *n = NULL, *w = NULL;
  CUresult r;
  pthread_mutex_lock(&lock);
  r = (g = graph_to_add(h, deps, ndeps)) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (r == CUDA_SUCCESS && !(n = gnode_add(g, &o, deps, ndeps)))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  /* Two nodes, as the GPU's backend makes: the host node, then its wait
   * (here a no-op: the host node itself waits for its gate). */
  if (r == CUDA_SUCCESS && !(w = gnode_add(g, &nop, &n->h, 1)))
    r = CUDA_ERROR_OUT_OF_MEMORY;
  *rnode = n ? n->h : 0;
  *wnode = w ? w->h : 0;
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_capture_host(uint64_t s, void *gate, uint64_t *rnode, uint64_t *wnode) {
  LIVE(s);
  rec_op_t o = {.kind = OP_HOSTFN, .g = gate};
  rec_stream_t *st;
  CUresult r;
  pthread_mutex_lock(&lock);
  st = stream_find(s);
  r = !st ? CUDA_ERROR_INVALID_HANDLE : !st->cap ? CUDA_ERROR_INVALID_VALUE : cap_add(st, &o);
  *rnode = *wnode = r == CUDA_SUCCESS ? st->cap->tail->h : 0;
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult rec_graph_exec_host(uint64_t exec, uint64_t rnode, uint64_t wnode, void *gate,
                                    uint32_t slot, uint32_t value, hostd_reached_cb cb,
                                    void *arg) {
  LIVE(exec, rnode);
  rec_graph_t *e;
  rec_gnode_t *n = NULL;
  rec_gate_t *g = gate;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  (void)wnode;
  pthread_mutex_lock(&lock);
  if ((e = rec_find(gexecs, exec)))
    for (n = e->head; n && n->orig != rnode; n = n->next)
      ;
  if (n && n->op.kind == OP_HOSTFN && g && slot < g->n) {
    n->op.cb = cb, n->op.arg = arg, n->op.g = g, n->op.slot = slot, n->op.value = value;
    r = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&lock);
  return r;
}

/* Whether n depends on the node h. */
static bool gnode_after(const rec_gnode_t *n, uint64_t h) {
  for (size_t i = 0; i < n->ndeps; i++)
    if (n->deps[i] == h)
      return true;
  return false;
}

/* The graph holding node h, and the node (lock held). */
static rec_graph_t *gnode_graph(uint64_t h, rec_gnode_t **node) {
  REC_EACH(rec_graph_t, g, graphs)
    if ((*node = gnode_find(g, h)))
      return g;
  return NULL;
}

static CUresult rec_graph_nodes(uint64_t h, uint32_t which, uint64_t node, uint64_t *nodes,
                                size_t cap, size_t *total) {
  LIVE(h);
  rec_graph_t *g;
  rec_gnode_t *of = NULL;
  size_t i = 0, k = 0;
  pthread_mutex_lock(&lock);
  g = which == CALL_GNODES_ALL || which == CALL_GNODES_ROOTS ? rec_find(graphs, h)
      : which == CALL_GNODES_DEPS || which == CALL_GNODES_DEPENDENTS ? gnode_graph(node, &of)
                                                                     : NULL;
  if (which == CALL_GNODES_DEPS) {
    for (; g && k < of->ndeps; k++)
      if (i < cap)
        nodes[i++] = of->deps[k];
  } else {
    for (rec_gnode_t *n = g ? g->head : NULL; n; n = n->next) {
      bool in = which == CALL_GNODES_ALL || (which == CALL_GNODES_ROOTS && n->ndeps == 0) ||
                (which == CALL_GNODES_DEPENDENTS && gnode_after(n, node));
      if (in && k++ < cap)
        nodes[i++] = n->h;
    }
  }
  *total = k;
  pthread_mutex_unlock(&lock);
  return g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* A DOT text of g's nodes and edges (not the driver's layout: enough for a
 * caller to see the shape); flags are ignored. */
static CUresult rec_graph_dot(uint64_t h, uint32_t flags, char **text, size_t *len) {
  LIVE(h);
  rec_graph_t *g;
  char *buf = NULL;
  size_t cap = 0;
  FILE *f;
  (void)flags;
  *text = NULL;
  *len = 0;
  if (!(f = open_memstream(&buf, &cap)))
    return CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&lock);
  if ((g = rec_find(graphs, h))) {
    fprintf(f, "digraph \"tally-record %#llx\" {\n", (unsigned long long)h);
    for (rec_gnode_t *n = g->head; n; n = n->next) {
      fprintf(f, "  n%#llx [label=\"kind %d\"];\n", (unsigned long long)n->h, (int)n->op.kind);
      for (size_t k = 0; k < n->ndeps; k++)
        fprintf(f, "  n%#llx -> n%#llx;\n", (unsigned long long)n->deps[k],
                (unsigned long long)n->h);
    }
    fprintf(f, "}\n");
  }
  pthread_mutex_unlock(&lock);
  if (fclose(f) != 0 || !g) {
    free(buf);
    return g ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_INVALID_VALUE;
  }
  *text = buf;
  *len = cap;
  return CUDA_SUCCESS;
}

/* ---- CUDA arrays, texture and surface objects ----
 * An array is host memory of width x height x depth elements (rows of
 * width * element bytes; height and depth 0 count as 1); a texture or
 * surface object remembers what it reads (an array, or linear memory).
 * Copies run at once, after the stream's queued work. */

static rec_array_t *array_find(uint64_t h) {
  return rec_find(arrays, h);
}

static CUresult rec_array_new(uint64_t *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  LIVE(0);
  unsigned eb = hostd__array_elem_bytes(d->Format);
  uint64_t row = (uint64_t)d->Width * eb * d->NumChannels, rows = d->Height ? d->Height : 1;
  uint64_t slices = d->Depth ? d->Depth : 1;
  rec_array_t *a;
  if (!eb || d->Width == 0 || (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4) ||
      d->Width > (1u << 17) || rows > (1u << 16) || slices > (1u << 14))
    return CUDA_ERROR_INVALID_VALUE;
  if (!(a = calloc(1, sizeof(*a))) || !(a->bytes = backing_new(row * rows * slices))) {
    free(a);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *a = (rec_array_t){{NULL, 0}, row, rows, slices, d->Flags, a->bytes};
  *out = rec_publish(&arrays, a, handle());
  return CUDA_SUCCESS;
}

/* Frees an array, its bytes given back to the budget (lock held). */
static void array_release(void *rec) {
  rec_array_t *a = rec;
  backing_free(a->bytes, a->row * a->rows * a->slices);
  free(a);
}

static CUresult rec_array_del(uint64_t h) {
  LIVE(h);
  return rec_delete(&arrays, h, array_release) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* The bytes of row (y, z) of a copy side from x on, width long; NULL when
 * out of bounds.  Lock held. */
static uint8_t *side_row(const hostd_copy_side_t *sd, uint64_t y, uint64_t z, uint64_t width) {
  uint64_t yy = sd->y + y, zz = sd->z + z;
  if (sd->kind == CALL_SIDE_ARRAY) {
    rec_array_t *a = array_find(sd->handle);
    if (!a || sd->x > a->row || width > a->row - sd->x || yy >= a->rows || zz >= a->slices)
      return NULL;
    return a->bytes + (zz * a->rows + yy) * a->row + sd->x;
  }
  uint64_t off = (zz * sd->height + yy) * sd->pitch + sd->x;
  if (sd->kind == CALL_SIDE_HOST)
    return (uint8_t *)sd->host + off;
  return find(sd->handle + off, width);
}

static CUresult rec_array_copy(const hostd_copy_side_t *src, const hostd_copy_side_t *dst,
                               uint64_t width, uint64_t height, uint64_t depth, uint64_t s,
                               int async) {
  LIVE(src->kind == CALL_SIDE_HOST ? 0 : src->handle, dst->kind == CALL_SIDE_HOST ? 0 : dst->handle,
       s);
  CUresult r;
  (void)async;
  count(HOSTD_RECORD_DTOD);
  pthread_mutex_lock(&lock);
  if ((r = cap_refuse(s)) == CUDA_SUCCESS) {
    wait_idle(s);
    for (uint64_t z = 0; z < depth && r == CUDA_SUCCESS; z++)
      for (uint64_t y = 0; y < height && r == CUDA_SUCCESS; y++) {
        uint8_t *d = side_row(dst, y, z, width), *p = side_row(src, y, z, width);
        if (d && p)
          memmove(d, p, width);
        else
          r = CUDA_ERROR_INVALID_VALUE;
      }
  }
  pthread_mutex_unlock(&lock);
  return r;
}

static CUresult obj_new(uint64_t *out, rec_obj_t o) {
  rec_obj_t *n = malloc(sizeof(*n));
  if (!n)
    return CUDA_ERROR_OUT_OF_MEMORY;
  *n = o;
  *out = rec_publish(&objs, n, handle());
  return CUDA_SUCCESS;
}

/* A texture object is not deleted as a surface, nor the other way round. */
static CUresult obj_del(uint64_t h, bool surf) {
  rec_obj_t *o;
  pthread_mutex_lock(&lock);
  bool ok = (o = rec_find(objs, h)) && o->surf == surf;
  if (ok)
    free(rec_take(&objs, h));
  pthread_mutex_unlock(&lock);
  return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult rec_tex_new(uint64_t *t, const CUDA_RESOURCE_DESC *res,
                            const CUDA_TEXTURE_DESC *tex, const CUDA_RESOURCE_VIEW_DESC *view) {
  LIVE(0);
  rec_obj_t o = {0};
  bool ok;
  (void)tex, (void)view;
  pthread_mutex_lock(&lock);
  switch (res->resType) {
  case CU_RESOURCE_TYPE_ARRAY:
    o.array = (uint64_t)(uintptr_t)res->res.array.hArray;
    ok = array_find(o.array) != NULL;
    break;
  case CU_RESOURCE_TYPE_LINEAR:
    o.ptr = res->res.linear.devPtr, o.size = res->res.linear.sizeInBytes;
    ok = o.size && find(o.ptr, o.size);
    break;
  case CU_RESOURCE_TYPE_PITCH2D:
    o.ptr = res->res.pitch2D.devPtr;
    o.size = (uint64_t)res->res.pitch2D.pitchInBytes * res->res.pitch2D.height;
    ok = o.size && find(o.ptr, o.size);
    break;
  default:
    ok = false;
  }
  pthread_mutex_unlock(&lock);
  return ok ? obj_new(t, o) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult rec_tex_del(uint64_t t) {
  LIVE(t);
  return obj_del(t, false);
}

static CUresult rec_surf_new(uint64_t *sf, uint64_t a) {
  LIVE(a);
  rec_array_t *ar;
  bool ok;
  pthread_mutex_lock(&lock);
  ok = (ar = array_find(a)) && (ar->flags & CUDA_ARRAY3D_SURFACE_LDST);
  pthread_mutex_unlock(&lock);
  return ok ? obj_new(sf, (rec_obj_t){.array = a, .surf = true}) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult rec_surf_del(uint64_t sf) {
  LIVE(sf);
  return obj_del(sf, true);
}

/* ---- tensor maps: a deterministic stand-in for the driver's encoding ----
 * The driver's 128 bytes are opaque; these are readable, so a test can see
 * every argument arrive.  Checked as the driver documents (cuda.h): global
 * address 16-byte aligned (32 with 32-byte interleave), dims 1..2^32,
 * strides multiples of 16 below 2^40, box 1..256 (tiled), element strides
 * 1..8, corners within 16 bits, channels 1..256, pixels 1..1024 (im2col).
 *   OFFSET SIZE  MEANING
 *   0      4     REC_TMAP_MAGIC
 *   4      1 x 8 kind, dtype, rank, interleave, swizzle, l2promo, oobfill, mode
 *   12     2 x 2 channels, pixels
 *   16     8     global address
 *   24     4 x 5 dims - 1
 *   44     1 x 5 element strides
 *   49     1     0
 *   50     2 x 5 box
 *   60     2 x 6 lower[3], upper[3] (int16)
 *   72     8 x 4 strides
 *   104    24    0 */
#define REC_TMAP_MAGIC 0x50414d54u /* "TMAP" */

static bool rec_tmap_ok(const call_tensor_map_req_t *q) {
  unsigned r = q->rank, al = q->interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if (q->addr == 0 || q->addr % al)
    return false;
  for (unsigned i = 0; i < r; i++)
    if (q->dims[i] == 0 || q->dims[i] > (1ull << 32) || q->estrides[i] == 0 || q->estrides[i] > 8 ||
        (q->kind == CALL_TMAP_TILED && (q->box[i] == 0 || q->box[i] > 256)))
      return false;
  for (unsigned i = 0; i + 1 < r; i++)
    if (q->strides[i] % 16 || q->strides[i] >= (1ull << 40))
      return false;
  for (unsigned i = 0; i < CALL_TMAP_RANK_MAX - 2; i++)
    if (q->lower[i] < INT16_MIN || q->lower[i] > INT16_MAX || q->upper[i] < INT16_MIN ||
        q->upper[i] > INT16_MAX)
      return false;
  return q->kind == CALL_TMAP_TILED ||
         (q->channels >= 1 && q->channels <= 256 && q->pixels >= 1 && q->pixels <= 1024);
}

static CUresult rec_tensor_map(uint8_t m[CALL_TMAP_BYTES], const call_tensor_map_req_t *q) {
  LIVE(0);
  const uint32_t magic = REC_TMAP_MAGIC;
  uint8_t b[8] = {(uint8_t)q->kind,     (uint8_t)q->dtype,   (uint8_t)q->rank,
                  (uint8_t)q->interleave, (uint8_t)q->swizzle, (uint8_t)q->l2promo,
                  (uint8_t)q->oobfill,  (uint8_t)q->mode};
  uint16_t cp[2] = {(uint16_t)q->channels, (uint16_t)q->pixels};
  count(HOSTD_RECORD_TMAP);
  if (!rec_tmap_ok(q))
    return CUDA_ERROR_INVALID_VALUE;
  memset(m, 0, CALL_TMAP_BYTES);
  memcpy(m, &magic, 4);
  memcpy(m + 4, b, 8);
  memcpy(m + 12, cp, 4);
  memcpy(m + 16, &q->addr, 8);
  for (unsigned i = 0; i < q->rank; i++) {
    uint32_t d = (uint32_t)(q->dims[i] - 1);
    uint16_t box = (uint16_t)q->box[i];
    memcpy(m + 24 + 4 * i, &d, 4);
    m[44 + i] = (uint8_t)q->estrides[i];
    memcpy(m + 50 + 2 * i, &box, 2);
  }
  for (unsigned i = 0; i < CALL_TMAP_RANK_MAX - 2; i++) {
    int16_t lo = (int16_t)q->lower[i], up = (int16_t)q->upper[i];
    memcpy(m + 60 + 2 * i, &lo, 2);
    memcpy(m + 66 + 2 * i, &up, 2);
  }
  memcpy(m + 72, q->strides, 8 * (CALL_TMAP_RANK_MAX - 1));
  return CUDA_SUCCESS;
}

/* Only a map this stand-in encoded, and an address aligned as it checks. */
static CUresult rec_tensor_map_addr(uint8_t m[CALL_TMAP_BYTES], uint64_t addr) {
  LIVE(0);
  uint32_t magic;
  count(HOSTD_RECORD_TMAP);
  memcpy(&magic, m, 4);
  if (magic != REC_TMAP_MAGIC || addr == 0 ||
      addr % (m[7] == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16))
    return CUDA_ERROR_INVALID_VALUE;
  memcpy(m + 16, &addr, 8);
  return CUDA_SUCCESS;
}

/* The "tex_copy(u64 tex, ptr out, u64 n)" kernel: the first n bytes of
 * what texture object tex reads, to out; a handle that is no texture
 * faults, as a kernel reading garbage may.  Lock held. */
static void tex_copy_effect(uint64_t tex, uint64_t out, uint64_t n) {
  const uint8_t *p = NULL;
  uint8_t *d = n <= (1ull << 30) ? find(out, n) : NULL;
  rec_obj_t *o = rec_find(objs, tex);
  if (o && !o->surf && o->array) {
    rec_array_t *a = array_find(o->array);
    p = a && n <= a->row * a->rows * a->slices ? a->bytes : NULL;
  } else if (o && !o->surf) {
    p = n <= o->size ? find(o->ptr, n) : NULL;
  }
  if (p && d)
    memmove(d, p, n);
  else
    sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
}

size_t hostd_record_live_objects(void) {
  size_t n = 0;
  pthread_mutex_lock(&lock);
  for (rec_link_t *l = arrays; l; l = l->next)
    n++;
  for (rec_link_t *l = objs; l; l = l->next)
    n++;
  pthread_mutex_unlock(&lock);
  return n;
}

/* The names of the results this device returns most (the CUDA backend asks
 * the driver for any). */
static const char *rec_error_name(CUresult r) {
  switch (r) {
#define NAME(e)                                                                                    \
  case e:                                                                                          \
    return #e
    NAME(CUDA_SUCCESS);
    NAME(CUDA_ERROR_INVALID_VALUE);
    NAME(CUDA_ERROR_OUT_OF_MEMORY);
    NAME(CUDA_ERROR_INVALID_CONTEXT);
    NAME(CUDA_ERROR_INVALID_HANDLE);
    NAME(CUDA_ERROR_NOT_FOUND);
    NAME(CUDA_ERROR_NOT_READY);
    NAME(CUDA_ERROR_ILLEGAL_ADDRESS);
    NAME(CUDA_ERROR_LAUNCH_FAILED);
    NAME(CUDA_ERROR_NOT_SUPPORTED);
#undef NAME
  default:
    return NULL;
  }
}

const hostd_gpu_ops_t hostd__gpu = {
    .name = "record",
    .init = rec_init,
    .shutdown = rec_shutdown,
    .error_name = rec_error_name,
    .thread_enter = rec_thread_enter,
    .mem_alloc = rec_mem_alloc,
    .mem_free = rec_mem_free,
    .mem_info = rec_mem_info,
    .htod = rec_htod,
    .dtoh = rec_dtoh,
    .dtod = rec_dtod,
    .memset = rec_memset,
    .stream_new = rec_stream_new,
    .stream_del = rec_stream_del,
    .stream_sync = rec_stream_sync,
    .stream_query = rec_stream_query,
    .stream_wait = rec_stream_wait,
    .event_new = rec_event_new,
    .event_del = rec_event_del,
    .event_record = rec_event_record,
    .event_sync = rec_event_sync,
    .event_query = rec_event_query,
    .event_time = rec_event_time,
    .module_load = rec_module_load,
    .module_unload = rec_module_unload,
    .module_functions = rec_module_functions,
    .module_global = rec_module_global,
    .library_module = rec_library_module,
    .launch = rec_launch,
    .func_attr = rec_func_attr,
    .func_set_attr = rec_func_set_attr,
    .func_cache = rec_func_cache,
    .occupancy = rec_occupancy,
    .ctx_limit_get = rec_ctx_limit_get,
    .ctx_limit_set = rec_ctx_limit_set,
    .blaslt_layout = rec_blaslt_layout,
    .gate_new = rec_gate_new,
    .gate_del = rec_gate_del,
    .host_fn = rec_host_fn,
    .gate_reached = rec_gate_reached,
    .gate_open = rec_gate_open,
    .dtoh_async = rec_dtoh_async,
    .host_register = rec_host_register,
    .host_unregister = rec_host_unregister,
    .part_stream_new = rec_part_stream_new,
    .stream_write64 = rec_stream_write64,
    .word_write = rec_word_write,
    .part_event_new = rec_part_event_new,
    .mem_granularity = rec_mem_granularity,
    .mem_create = rec_mem_create,
    .mem_release = rec_mem_release,
    .mem_reserve = rec_mem_reserve,
    .mem_unreserve = rec_mem_unreserve,
    .mem_map = rec_mem_map,
    .mem_unmap = rec_mem_unmap,
    .mem_set_access = rec_mem_set_access,
    .mem_retain = rec_mem_retain,
    .pool_new = rec_pool_new,
    .pool_del = rec_pool_del,
    .pool_attr = rec_pool_attr,
    .pool_trim = rec_pool_trim,
    .mem_alloc_async = rec_mem_alloc_async,
    .mem_free_async = rec_mem_free_async,
    .jit = rec_jit,
    .link = rec_link,
    .capture_begin = rec_capture_begin,
    .capture_end = rec_capture_end,
    .capture_info = rec_capture_info,
    .capture_mode = rec_capture_mode,
    .graph_new = rec_graph_new,
    .graph_del = rec_graph_del,
    .graph_add = rec_graph_add,
    .graph_deps = rec_graph_deps,
    .graph_node_del = rec_graph_node_del,
    .graph_instantiate = rec_graph_instantiate,
    .graph_launch = rec_graph_launch,
    .graph_exec_del = rec_graph_exec_del,
    .graph_exec_update = rec_graph_exec_update,
    .graph_exec_set = rec_graph_exec_set,
    .graph_set = rec_graph_set,
    .graph_mem = rec_graph_mem,
    .graph_clone = rec_graph_clone,
    .graph_find = rec_graph_find,
    .graph_node = rec_graph_node,
    .graph_enable = rec_graph_enable,
    .graph_attr = rec_graph_attr,
    .capture_deps = rec_capture_deps,
    .graph_add_host = rec_graph_add_host,
    .capture_host = rec_capture_host,
    .graph_exec_host = rec_graph_exec_host,
    .graph_nodes = rec_graph_nodes,
    .graph_dot = rec_graph_dot,
    .array_new = rec_array_new,
    .array_del = rec_array_del,
    .array_copy = rec_array_copy,
    .tex_new = rec_tex_new,
    .tex_del = rec_tex_del,
    .surf_new = rec_surf_new,
    .surf_del = rec_surf_del,
    .tensor_map = rec_tensor_map,
    .tensor_map_addr = rec_tensor_map_addr,
};
int hostd__record_memset_prio;
unsigned long hostd__record_hi_memsets, hostd__record_hi_launch_memsets;
int hostd__record_last_prio;
_Atomic long hostd__record_registered;
_Atomic int hostd__record_unregister_ms;
int hostd__record_last_cluster[4];
