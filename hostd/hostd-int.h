/* hostd-int.h: declarations shared by hostd/'s own files.
 *
 * The daemon is three layers: server.c accepts tenants (wire/ on libuv) and
 * runs one worker thread per tenant that executes its requests in order; tenant.c keeps
 * a tenant's tables and exec.c executes one request against them and the GPU
 * backend (gpu.h), one handler per op of wire/call.def;
 * modcache.c keeps module images by content id in memory and in the state
 * directory.  Nothing here is visible outside hostd/ except through
 * hostd.h (tests include this header too, to drive tenants directly).
 */
#ifndef TALLY_HOSTD_INT_H
#define TALLY_HOSTD_INT_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "hostd/hostd.h"
#include "wire/call.h"

/* ---- time ---- */
/* Nanoseconds of CLOCK_MONOTONIC: the daemon's one clock for intervals
 * (hand-off times, fences, debug timings). */
static inline uint64_t hostd__mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- logging (log.c): level from the configuration; stderr ---- */
extern hostd_log_level_t hostd__log_level;
void hostd__log(hostd_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- per-op counters, for tests ----
 * Counted only while hostd__op_count_on is set (tests set it before their
 * daemon starts): a locked addition right after a driver launch cost the
 * chain about 30 ns a launch on the H200 (tests/bench/launch-ways). */
extern bool hostd__op_count_on;
extern unsigned long hostd__op_count[CALL_OP_COUNT];
/* The request this thread is executing (hostd__exec), CALL_OP_COUNT when
 * none: what a scheduler fence that blocks is counted under. */
extern __thread uint32_t hostd__cur_op;

/* ---- module images by content id (modcache.c) ---- */
/* Returns the image with this id (memory, then state_dir/modules/<id>.img),
 * or NULL.  The returned buffer is pinned for the calling thread: it lives
 * until that thread's next hostd__modcache_get or hostd__modcache_unpin. */
const void *hostd__modcache_get(uint64_t id, size_t *len);
/* Stores an image under its id (checked: the id must be the XXH3-64 of the
 * bytes) and writes it to the state directory.  Returns 0, -EINVAL on a
 * mismatched id, -ENOMEM. */
int hostd__modcache_put(uint64_t id, const void *data, size_t len);
void hostd__modcache_init(const char *state_dir);
void hostd__modcache_close(void);

/* ---- restart after a GPU fault (restart.c) ---- */
/* The environment variable that carries the listening sockets across exec:
 * "unix:N,tcp:M" (either part may be absent). */
#define HOSTD_LISTEN_FDS_ENV "TALLY_LISTEN_FDS"
/* Records the first context-corrupting error (a CUresult) of this process
 * and the tenant whose call returned it, then calls the hook set with
 * hostd__fault_on_raise (any thread; it must only wake someone up).
 * Returns 1 for the first fault, 0 when one was already recorded (the
 * process stays poisoned until it re-executes). */
int hostd__fault_raise(uint32_t tenant, int err);
/* The recorded fault's CUresult (0 = none) and, when tenant is not NULL,
 * the faulting tenant's id.  Any thread. */
int hostd__fault_pending(uint32_t *tenant);
void hostd__fault_on_raise(void (*cb)(void *), void *arg);
/* Forgets the fault: what exec does for tallyd; for in-process tests only. */
void hostd__fault_forget(void);
/* Parses a TALLY_LISTEN_FDS value; 0 for absent parts.  0 or -EINVAL. */
int hostd__restart_parse_fds(const char *s, int *unix_fd, int *tcp_fd);
/* Takes the listening sockets a previous image of tallyd left in
 * TALLY_LISTEN_FDS (checked: listening sockets of the right family; marked
 * close-on-exec again; the variable is removed).  *unix_fd / *tcp_fd get 0
 * when absent.  Returns 1 when sockets were inherited, 0 when there were
 * none, or a negative errno (a bad value: logged, nothing adopted). */
int hostd__restart_inherit(int *unix_fd, int *tcp_fd);
/* Re-executes /proc/self/exe with argv, keeping only stdin/out/err and the
 * two listening sockets (<= 0: none) open and naming them in
 * TALLY_LISTEN_FDS.  Returns only on failure, with a negative errno. */
int hostd__restart_exec(char *const argv[], int unix_fd, int tcp_fd);

/* ---- asymmetric barriers (barrier.c) ---- */

/* A Dekker pair (store one word, then load the other; the other side the
 * reverse) whose one side runs at launch rate and the other rarely.  With
 * hostd__barrier_asym(), the frequent side puts hostd__barrier_light()
 * between its store and its load and the rare side hostd__barrier_heavy();
 * without, both need a full barrier (or a locked instruction) there.
 * hostd__barrier_init runs once before the threads that use it start; it
 * returns hostd__barrier_asym(). */
bool hostd__barrier_init(void);
bool hostd__barrier_asym(void);
static inline void hostd__barrier_light(void) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
}
void hostd__barrier_heavy(void);

/* ---- the shared context's reader-writer lock (ctxlock.c) ---- */

/* Every request holds it for reading (nesting allowed), a recovery after a
 * context fault for writing (never while the same thread reads).  A reader
 * costs no locked instruction where hostd__barrier_asym(). */
void hostd__ctxlock_rd(void);
void hostd__ctxlock_rd_done(void);
void hostd__ctxlock_wr(void);
void hostd__ctxlock_wr_done(void);

/* ---- CPUs for polling workers (pin.c) ---- */
/* core_of[c] (CPU_SETSIZE entries) for each CPU c: the lowest CPU of its core (SMT
 * siblings, from sysfs; c itself where unknown). */
void hostd__pin_cores(const cpu_set_t *allowed, int16_t *core_of);
/* The CPU for the next polling latency-critical worker under --lc-poll-cpu auto: the
 * highest allowed CPU not in taken, starting skip (the GPU ordinal) allowed CPUs below the
 * highest, on a core with no CPU taken while there is one (core_of as hostd__pin_cores made
 * it, or NULL: one CPU per core); -1 = do not pin (fewer than 4 allowed, or a quarter of
 * them already taken). */
int hostd__pin_pick(const cpu_set_t *allowed, const cpu_set_t *taken, const int16_t *core_of,
                    int skip);

/* ---- tenants (tenant.c) ---- */
typedef struct hostd_tenant hostd_tenant_t;

/* Creates a tenant of priority class prio (0 latency-critical, 1 best-effort).
 * `tcp` says whether it came over the network (the token is then checked). */
hostd_tenant_t *hostd__tenant_new(uint32_t id, bool tcp);
/* Frees everything the tenant owns on the GPU (memory, streams, events,
 * modules) and the tenant itself.  NULL ok. */
void hostd__tenant_free(hostd_tenant_t *t);
/* Executes one request: op and flags from its header (wire/call.h), args
 * its `len` bytes.  For a synchronous request fills *reply (reply header +
 * results); for an async one leaves it empty.  Returns 0, -ENOMEM (reply),
 * or -EPROTO when the request is malformed (the caller then closes the
 * tenant and logs `why`, which lives until the tenant's next request). */
int hostd__tenant_exec(hostd_tenant_t *t, uint32_t op, uint32_t flags, const uint8_t *args,
                       size_t len, wire_buf_t *reply, const char **why);
uint32_t hostd__tenant_id(const hostd_tenant_t *t);
/* The tenant's worker executed every request it had and is about to wait
 * for more (sched.h, hostd__sched_tenant_quiet).  NULL ok. */
void hostd__tenant_quiet(hostd_tenant_t *t);
/* The reply of the request hostd__tenant_exec executed last went out (or it
 * had none): what that request owes the scheduler and need not delay its
 * reply is given now (a synchronisation's notice).  hostd__tenant_exec and
 * hostd__tenant_quiet also give it first, so a caller that never calls this
 * loses nothing.  NULL ok. */
void hostd__tenant_replied(hostd_tenant_t *t);
/* The name of r when it corrupts a CUDA context (illegal address, ...), else
 * NULL: tallyd then marks every tenant lost and restarts (tenant.c, recover;
 * restart.c). */
const char *hostd__ctx_fatal(int r); /* r: a CUresult */

/* ---- hand-off times (hops.c) ---- */
/* Hand-off times of requests (hops.c, --hops FILE).  t[]: read by the loop,
 * taken by the worker, handler entered, handler returned, reply handed to
 * wire (0 for a post); CLOCK_MONOTONIC ns. */
typedef struct hostd_hop {
  uint64_t id;
  uint32_t op;
  bool call;
  uint64_t t[5];
} hostd_hop_t;
/* The op of a hop that is no request: a guest's shared pinned memory
 * mapped and registered (hops.c's file format names it PINNED_MAP). */
#define HOSTD_HOP_PINNED_MAP 0xffffffffu
typedef struct hostd_hops hostd_hops_t;
void hostd__hops_setup(const char *path); /* "" = off */
hostd_hops_t *hostd__hops_new(const char *name); /* NULL when off or out of memory */
void hostd__hops_add(hostd_hops_t *h, const hostd_hop_t *r); /* h may be NULL */
/* A host function's way back (hostfn.c): id, the HOSTFN_WAIT call that
 * handed it to the guest; seq, the guest's number; t[]: enqueued by the
 * worker, reached (the driver's callback), handed to the guest (its answer
 * given to wire), reported done (the guest's next HOSTFN_WAIT read, the gate
 * opened).  Any thread; its own lock. */
typedef struct hostd_fn_hop {
  uint64_t id, seq;
  uint64_t t[4];
} hostd_fn_hop_t;
void hostd__hops_add_fn(hostd_hops_t *h, const hostd_fn_hop_t *r); /* h may be NULL */
void hostd__hops_free(hostd_hops_t *h); /* appends to the file; NULL ok */


/* ---- stream-ordered host functions (hostfn.c) ---- */
typedef struct hostd_hostfn hostd_hostfn_t;
struct wire_tenant;
/* One per tenant; takes a reference on wt.  NULL when out of memory.  wt may
 * be NULL where no guest is connected (tests that drive graphs' host nodes
 * directly): no HOSTFN_WAIT can then arrive, so nothing is answered. */
hostd_hostfn_t *hostd__hostfn_new(struct wire_tenant *wt);
void hostd__hostfn_unref(hostd_hostfn_t *h); /* NULL ok */
/* Called (on a driver thread, under the object's lock: it must not block or
 * call back into hostfn) each time one of the tenant's host functions is
 * reached; hostd__hostfn_set_cue sets or (fn NULL) clears it.  NULL h ok. */
typedef void (*hostd_hostfn_cue_fn)(void *arg);
void hostd__hostfn_set_cue(hostd_hostfn_t *h, hostd_hostfn_cue_fn fn, void *arg);
/* --hostfn-word: each later host function also has the GPU write its reach
 * word, which hostd__hostfn_poll reads (hostfn.c).  Before the first one. */
void hostd__hostfn_set_word(hostd_hostfn_t *h, bool on);
/* The worker, polling: reaches the watched functions whose words the GPU
 * wrote (as the driver's callback would); how many.  NULL h ok. */
int hostd__hostfn_poll(hostd_hostfn_t *h);
/* Functions reached by their word and by the driver's callback so far. */
void hostd__hostfn_counts(hostd_hostfn_t *h, unsigned long *by_word, unsigned long *by_cb);
/* --hops: where each host function's way back is recorded (hostd__hops_add_fn);
 * NULL stops it (before the worker frees hops).  NULL h ok. */
void hostd__hostfn_set_hops(hostd_hostfn_t *h, hostd_hops_t *hops);
/* Loop thread, on_msg: a HOSTFN post arrived (counted until its gate opens). */
void hostd__hostfn_note_post(hostd_hostfn_t *h);
/* True while host functions are posted and not finished (NULL: false). */
bool hostd__hostfn_busy(hostd_hostfn_t *h);
/* Worker: enqueues the gate for guest function seq on host stream `stream`;
 * returns a CUresult.  q: the quota one HOSTD_QUOTA_HOSTFNS unit was
 * charged to (given back when the function's slot is freed; on an error
 * the caller gives it back), or NULL. */
struct hostd_quota;
int hostd__hostfn_enqueue(hostd_hostfn_t *h, uint64_t stream, uint64_t seq,
                          struct hostd_quota *q);
/* Worker: the tenant's gate (made at the first use); NULL with *r (a
 * CUresult) set when it cannot be made. */
void *hostd__hostfn_gate(hostd_hostfn_t *h, int *r);
/* A graph's host function (wire/call.def, HOSTFN_WAIT): seq bits the guest
 * is handed with it.  KEEP: run it and keep it (the graph replays it);
 * DROP: nothing ran, forget it (no graph of the tenant holds it now). */
#define HOSTD_HOSTFN_KEEP (1ull << 63)
#define HOSTD_HOSTFN_DROP (1ull << 62)
/* Worker: the slot a graph's host function takes for one launch of its
 * exec: the gate word (slot) its wait node waits for to reach value, and the
 * callback (cb, arg) its host node calls. */
typedef void (*hostd_reached_fn)(void *arg, uint32_t value); /* gpu.h's hostd_reached_cb */
typedef struct hostd_hostfn_armed {
  void *gate;
  uint32_t slot, value;
  hostd_reached_fn cb;
  void *arg;
  int index;
} hostd_hostfn_armed_t;
/* Worker: arms guest function seq for one launch (charged to q as HOSTFN's
 * are); a CUresult.  hostd__hostfn_disarm undoes it when the launch fails
 * (the caller gives the unit back). */
int hostd__hostfn_arm(hostd_hostfn_t *h, uint64_t seq, struct hostd_quota *q,
                      hostd_hostfn_armed_t *a);
void hostd__hostfn_disarm(hostd_hostfn_t *h, const hostd_hostfn_armed_t *a);
/* Worker: no graph or exec of the tenant holds guest function seq any more. */
void hostd__hostfn_drop(hostd_hostfn_t *h, uint64_t seq);
/* Worker: a HOSTFN post failed before hostd__hostfn_enqueue (bad stream...). */
void hostd__hostfn_post_failed(hostd_hostfn_t *h);
/* Loop thread: a HOSTFN_WAIT call (args after the request header). */
void hostd__hostfn_wait(hostd_hostfn_t *h, uint64_t id, const uint8_t *args, size_t len);
/* Loop thread: the tenant is gone; open every gate.  NULL ok. */
void hostd__hostfn_close(hostd_hostfn_t *h);
/* Worker, after the tenant's streams are drained: frees the gate (gpu false:
 * it died with the context).  NULL ok. */
void hostd__hostfn_drop_gate(hostd_hostfn_t *h, bool gpu);
/* Gives tenant t its host-function state (worker, before the first request). */
void hostd__tenant_set_hostfn(hostd_tenant_t *t, hostd_hostfn_t *h);

/* ---- releases that wait for the whole context, off the workers (release.c) ----
 * _start/_stop on the main thread (the server's create and free); the
 * others on any thread.  Without the thread a release is made at once. */
int hostd__release_start(void); /* 0 or -errno */
void hostd__release_stop(void);  /* makes what is queued, then joins */
void hostd__release_drain(void); /* returns when nothing is queued or running */
/* Unregisters (when registered) and unmaps a tenant's shared pinned memory. */
void hostd__release_host(void *addr, size_t size, bool registered);
/* Unloads a module (kind 0) or library (kind 1) the tenant's tables forgot. */
void hostd__release_module(uint64_t h, int kind);

/* ---- pinned host memory shared by a guest as a memfd (tenant.c) ---- */
/* Worker: records a mapping the loop thread made (on_fd) under the guest's
 * tag and registers it with the driver; on failure the mapping is unmapped.
 * Returns 0, -EEXIST (tag in use), -ENOMEM. */
int hostd__tenant_pinned_add(hostd_tenant_t *t, uint64_t tag, void *addr, size_t size);

/* The served device's snapshot (filled by hostd__gpu.init).  Written once
 * before any tenant. */
extern call_snapshot_t hostd__snapshot;
extern int hostd__ndev;

/* ---- recording backend (gpu-record.c): what the tests read ---- */
/* Its answer to private table 21318c60 slot 39 (gpu-cuda.c asks the real
 * driver): a value no real driver gave, so a test sees it was forwarded. */
#define HOSTD_RECORD_IDENT_S39 5
typedef enum hostd_record_what {
  HOSTD_RECORD_ALLOC,
  HOSTD_RECORD_FREE,
  HOSTD_RECORD_HTOD,
  HOSTD_RECORD_DTOH,
  HOSTD_RECORD_DTOD,
  HOSTD_RECORD_MEMSET,
  HOSTD_RECORD_STREAM,
  HOSTD_RECORD_STREAM_DEL,
  HOSTD_RECORD_EVENT,
  HOSTD_RECORD_EVENT_DEL,
  HOSTD_RECORD_RECORD,
  HOSTD_RECORD_WAIT,
  HOSTD_RECORD_SYNC,
  HOSTD_RECORD_MODULE,
  HOSTD_RECORD_MODULE_DEL,
  HOSTD_RECORD_LAUNCH,
  HOSTD_RECORD_STALE, /* calls on a thread without the current context, or naming a handle or
                         address from before the last shutdown (must stay 0) */
  HOSTD_RECORD_JIT,   /* PTX compiled (jit) */
  HOSTD_RECORD_CAPTURED,     /* work captured into a graph instead of run */
  HOSTD_RECORD_GRAPH_LAUNCH, /* graph replays */
  HOSTD_RECORD_TMAP,         /* tensor maps encoded or readdressed (valid or not) */
  HOSTD_RECORD_LINK,         /* links of a tenant's inputs (gpu.link) */
  HOSTD_RECORD_LIMIT,        /* context limits set (gpu.ctx_limit_set), refused or not */
  HOSTD_RECORD_NCOUNT
} hostd_record_what_t;
unsigned long hostd_record_count(hostd_record_what_t what);
/* Event records made on stream s so far: all of them, or (by_maker) only
 * those made by the thread that created s. */
unsigned long hostd_record_stream_records(uint64_t s, bool by_maker);
void hostd_record_reset(void);
uint64_t hostd_record_live_bytes(void);
/* Arrays, texture and surface objects alive on the recording device. */
size_t hostd_record_live_objects(void);
extern int hostd__record_last_prio; /* priority of the last stream created */
extern uint32_t hostd__record_part_sms; /* SMs of the best-effort partition (0: none made) */
/* Tests: a launch on a partition stream with a cluster of more blocks than
 * this is refused, CUDA_ERROR_INVALID_CLUSTER_SIZE (0: none is). */
extern uint32_t hostd__record_part_cluster_max;
/* Kernel launches made on a partition stream. */
extern _Atomic unsigned long hostd__record_part_launches;
extern _Atomic unsigned long hostd__record_word_writes; /* word_write calls */
extern int hostd__record_blocks_per_sm; /* occupancy answer (0, the default: unknown) */
/* Tests: the recording device has no cuBLASLt layout objects (BLASLT_LAYOUT
 * answers CUDA_ERROR_NOT_SUPPORTED, as a driver without the slot). */
extern bool hostd__record_no_layout;
/* Word writes (stream_write64) made on a stream with a launch since its
 * last event record or word write: no event record came between the launch
 * and the write. */
extern _Atomic unsigned long hostd__record_write64_behind_launch;
/* Host ranges registered (host_register minus host_unregister). */
extern _Atomic long hostd__record_registered;
/* Tests: host_unregister takes this long (ms), as the driver's waits for the
 * whole context's work in flight (0, the default: at once). */
extern _Atomic int hostd__record_unregister_ms;
/* Cluster x, y, z and scheduling policy of the last occupancy query (0 / -1 absent). */
extern int hostd__record_last_cluster[4];
/* Makes every synchronisation fail with CUresult r from now on, as a kernel
 * fault does (sticky), until the backend is shut down (a restart). */
void hostd_record_inject(int r);
/* The original linear block indices kernels ran since the last call, in
 * order (at most cap copied to out; the count of all is returned). */
size_t hostd_record_blocks(uint64_t *out, size_t cap);
/* The cache preference last set for function f (CUfunc_cache), -1 unknown f. */
int hostd_record_func_cache(uint64_t f);
/* On: PTB launches hold their stream after their static indices until their
 * flag is raised; off: held ones finish (gpu-record.c). */
void hostd_record_ptb_hold(bool on);
extern int hostd__record_memset_prio; /* priority of the stream of the last memset */
/* Memsets called on streams of the greatest priority so far, and how many
 * of them had been called when the latest launch on such a stream was (the
 * host's order; gpu-record.c). */
extern unsigned long hostd__record_hi_memsets, hostd__record_hi_launch_memsets;

#endif /* TALLY_HOSTD_INT_H */
