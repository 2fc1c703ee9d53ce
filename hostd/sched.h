/* sched.h: tallyd's scheduler, the place where policy/ meets the GPU.
 *
 * One scheduler per daemon (one GPU per tallyd), running policy/ on a
 * thread of its own.  Tenant workers hand it every launch of a tenant whose
 * launches the policy may hold, and tell it about every launch of the
 * latency-critical (LC) tenant that went straight to the GPU; the scheduler
 * thread feeds those to pol_sched_event() and carries out the actions that
 * come back.  The design, and why a held launch never blocks a worker, is in
 * docs/scheduler.md; in short:
 *
 *   - a held launch stays in tallyd, on the scheduler's queue; the worker
 *     returns at once, as the fire-and-forget call it answers;
 *   - a launch the policy releases runs on a launch stream of the scheduler's
 *     (one per tenant stream), after an event recorded on the tenant stream
 *     when the run of launches began, so it sees the stream's earlier work;
 *   - a memset on that stream is queued like a launch (one unit, in stream
 *     order); any other work on it (copies, events, host functions,
 *     synchronisations) is first fenced: once the scheduler has
 *     issued the stream's launches submitted so far, the tenant stream waits
 *     (an event) for its launch stream, so stream order and synchronising
 *     calls behave as natively.  The worker waits for that issue (a held
 *     launch delays the tenant's next non-launch call in tallyd, not in the
 *     guest); a GPU wait for work not yet submitted could deadlock streams
 *     that share a hardware queue;
 *   - start and completion are observed with events polled by the scheduler
 *     thread (timing events around BE launches; for LC launches, events the
 *     worker records behind them when it runs out of requests, so the
 *     scheduler thread never calls the driver on an LC stream); nothing in
 *     the path synchronises the device.
 *
 * Threads: hostd__sched_init/_shutdown on the main thread; everything
 * taking a hostd_sched_tenant_t or hostd_sched_stream_t on that tenant's
 * worker thread only (the one that owns the tenant's tables).
 */
#ifndef TALLY_HOSTD_SCHED_H
#define TALLY_HOSTD_SCHED_H

#include <cuda.h>
#include <stdbool.h>
#include <stdint.h>

#include "hostd/variants.h"
#include "policy/pol.h"

typedef struct hostd_sched_config {
  bool on;           /* false: --policy none, launches go straight to the GPU */
  pol_kind_t kind;   /* the policy */
  pol_config_t pol;  /* its configuration */
  char trace[4096];  /* --trace FILE ("" = none): every kernel, tally-sim's format */
  char profiles[4096]; /* file the profiles persist in ("" = none) */
  uint32_t be_sms;     /* > 0: BE launches run in a partition of at least this many SMs
                          (a green context), leaving the rest to the LC tenant */
  bool be_sms_hold;    /* with be_sms, policy tally: BE launches are still held while the LC
                          is active (true, the default); false: pol.be_partitioned, and
                          hostd__sched_init fails when the partition cannot be made */
  hostd_var_config_t var; /* transformed variants (variants.h): forms offered, cache */
  bool be_alone; /* a best-effort tenant alone on the daemon launches straight to the GPU
                    (sched.c, ALONE MODE); false here, tallyd's --be-alone 1 by default */
  bool flag_memset; /* preemption flags written with a memset, not the GPU front end's
                       stream write (gpu.h, word_write) */
} hostd_sched_config_t;

/* Fills *cfg: off, policy tally with policy/'s defaults. */
void hostd__sched_config_init(hostd_sched_config_t *cfg);
/* Parses a --policy value ("none" or a pol_kind_parse name). 0 or -EINVAL. */
int hostd__sched_parse_policy(hostd_sched_config_t *cfg, const char *name);

/* Starts the scheduler thread (when cfg->on); loads the profiles file.
 * 0, or a negative errno (the reason is logged). */
int hostd__sched_init(const hostd_sched_config_t *cfg);
/* Stops the thread, saves profiles and closes the trace.  Every tenant must
 * be closed first. */
void hostd__sched_shutdown(void);

typedef struct hostd_sched_tenant hostd_sched_tenant_t;
typedef struct hostd_sched_stream hostd_sched_stream_t;

/* A tenant of class cls (0 latency-critical, 1 best-effort) and weight.
 * NULL: out of memory or the policy refused it (logged); the tenant's
 * launches then go straight to the GPU. */
hostd_sched_tenant_t *hostd__sched_tenant_new(uint32_t id, const char *name, int cls,
                                              uint32_t weight);
/* The tenant is going: its held launches are dropped (never run), its
 * gates opened, and this waits until none of its launches is in flight, so
 * its streams can be synchronised and destroyed.  NULL ok. */
void hostd__sched_tenant_close(hostd_sched_tenant_t *t);
/* Frees what the tenant's scheduler state holds (its streams' launch
 * streams, its device gate), after hostd__sched_tenant_close and after the
 * tenant's own streams were synchronised.  NULL ok. */
void hostd__sched_tenant_free(hostd_sched_tenant_t *t);
/* The scheduler adds the device time of each of the tenant's kernels to
 * *gpu_ns (atomically) as it sees them complete: the event-timed duration
 * of a best-effort kernel; for an untimed (latency-critical) one, the time
 * from its issue, or the tenant's previous completion if later, to the
 * completion seen (an upper bound, to the scheduler's polling).  The
 * counter must outlive the tenant's hostd__sched_tenant_close.  NULL ok. */
void hostd__sched_tenant_count_gpu(hostd_sched_tenant_t *t, uint64_t *gpu_ns);
/* The same for the tenant's launches of a variant: one is added to *sliced,
 * *ptb or *flush (atomically) per launch of a __tally_slice, __tally_ptb or
 * __tally_flush variant.  The counters must outlive the tenant's close.
 * NULL ok. */
void hostd__sched_tenant_count_forms(hostd_sched_tenant_t *t, uint64_t *sliced, uint64_t *ptb,
                                     uint64_t *flush);
/* The first error an issued launch of the tenant returned, cleared (a
 * CUresult, CUDA_SUCCESS when none): a deferred error for the next
 * synchronising call. */
CUresult hostd__sched_take_error(hostd_sched_tenant_t *t);
/* Waits until every launch the tenant submitted has been issued to the GPU
 * (not completed): what a free of memory or of a module needs first, as the
 * driver's own free waits for launched work.  Returns a CUresult. */
CUresult hostd__sched_tenant_flush(hostd_sched_tenant_t *t);
/* A quiet point of the tenant's worker: it executed what it had and is
 * about to wait for more.  For each latency-critical stream with launches
 * made since its last record, records an event behind them on the stream
 * (this thread), which the scheduler polls to see the tenant go idle.
 * Costs a flag test when nothing was launched.  NULL ok. */
void hostd__sched_tenant_quiet(hostd_sched_tenant_t *t);
/* Whether a quiet point has anything to do: a direct launch (or memset or
 * graph) since the last one, or LC news that has not woken the scheduler
 * yet.  The worker's own state: no lock.  NULL: false. */
bool hostd__sched_tenant_quiet_due(const hostd_sched_tenant_t *t);

/* The scheduler's state of one tenant stream (host handle `stream`), made
 * on its first launch.  NULL: out of memory (a CUresult in *r). */
hostd_sched_stream_t *hostd__sched_stream_new(hostd_sched_tenant_t *t, uint64_t stream,
                                              CUresult *r);
/* Frees it; the tenant must have been flushed and the stream fenced.  NULL ok. */
void hostd__sched_stream_free(hostd_sched_stream_t *s);

/* cuMemsetD{8,16,32}Async: count elements of elem bytes (1, 2, 4) at dst. */
typedef struct hostd_sched_memset {
  uint64_t dst, count;
  uint32_t value, elem;
} hostd_sched_memset_t;

/* One kernel launch as the tenant asked for it. */
typedef struct hostd_sched_launch {
  uint64_t f;        /* CUfunction / CUkernel handle */
  uint64_t kernel_id; /* stable id of the code (profiles): hostd__sched_kernel_id */
  uint32_t grid[3], block[3], shmem;
  const CUlaunchAttribute *attrs;
  uint32_t nattr;
  const void *args;
  uint32_t argbytes;
  uint64_t graph; /* non-zero: a graph exec launched as one unit (f, grid, args unused;
                     docs/scheduler.md) */
  hostd_sched_memset_t memset; /* count non-zero: a memset, queued in stream order as one
                                  unit like a graph (f, grid, args unused): no fence stalls
                                  the worker for it */
} hostd_sched_launch_t;

/* Submits a launch on stream s.  Returns at once: the launch was made (the
 * LC fast path) or queued for the policy (the arguments are copied).
 * A CUresult: an error only for a launch made at once, or out of memory. */
CUresult hostd__sched_launch(hostd_sched_stream_t *s, const hostd_sched_launch_t *l);
/* Call before any other work on the stream (copy, 2D memset, event record,
 * stream wait, host function, synchronisation, destroy): keeps it behind
 * the launches submitted so far, waiting until the scheduler has issued
 * them.  Free when there are none.  On a latency-critical stream it is a
 * quiet point of that stream (hostd__sched_tenant_quiet).  A CUresult. */
CUresult hostd__sched_fence(hostd_sched_stream_t *s);
/* Whether s is a latency-critical stream whose launches the worker makes at
 * once: work after them needs no fence to follow them, and its fence is
 * only the quiet point's record.  NULL: false. */
bool hostd__sched_direct(const hostd_sched_stream_t *s);
/* Before a call that waits on the host for stream s's work (stream or
 * context synchronisation): hostd__sched_fence, except that a latency-
 * critical stream records nothing, since the wait itself shows its launches
 * done: call hostd__sched_synced once it returned CUDA_SUCCESS.  NULL ok. */
CUresult hostd__sched_fence_sync(hostd_sched_stream_t *s);
/* Stream s was synchronised since hostd__sched_fence_sync: on a latency-
 * critical stream, its launches so far are done (no event needed).  NULL ok. */
void hostd__sched_synced(hostd_sched_stream_t *s);

/* The stable kernel id the scheduler keys profiles by: the module's
 * content id and the function's name (both survive a restart). */
uint64_t hostd__sched_kernel_id(uint64_t module_content_id, const char *name);
/* With --trace: writes `# kernel 0xID NAME` (the name's [A-Za-z0-9_.$]
 * characters, others as '?') the first time kernel_id is named.  Any thread. */
void hostd__sched_trace_kernel(uint64_t kernel_id, const char *name);

/* Counters for tests and the exit line. */
typedef struct hostd_sched_stats {
  uint64_t submitted; /* submissions: held launches, and LC bursts (one per item) */
  uint64_t held;      /* launches that went through the queue */
  uint64_t issued;    /* of those, issued to the GPU */
  uint64_t timed;     /* of those, issued between two timing events (the policy's profile
                         samples, or every one while a trace is written) */
  uint64_t dropped;   /* dropped with their tenant */
  uint64_t completed; /* completions observed */
  uint64_t fences;    /* fences that made a tenant stream wait */
  uint64_t fences_blocked;  /* of those, fences whose worker waited for the scheduler */
  uint64_t fence_block_ns;  /* the time those workers waited, in all */
  uint64_t sliced;    /* launches of a __tally_slice variant */
  uint64_t ptb;       /* launches of a __tally_ptb variant */
  uint64_t preempts;  /* launches whose preemption flag was raised */
  uint64_t early_raises; /* flags an LC worker raised at the start of its burst, before the
                            policy asked (docs/scheduler.md) */
  uint64_t ctl_inuse; /* PTB control blocks in use */
  uint64_t turnarounds; /* preemptions timed: flag write -> the launch's end */
  uint64_t turn_p50_ns, turn_p99_ns, turn_max_ns; /* of those (1 us buckets) */
  uint64_t lc_launches; /* LC launches made straight on the tenant's stream */
  uint64_t lc_events;   /* events their workers recorded behind them (one per quiet point) */
  uint64_t alone;       /* launches a best-effort tenant alone made on its own stream */
  uint64_t flush;       /* launches of a __tally_flush variant (redos included) */
  uint64_t redos;       /* of those, redos of blocks that gave up */
  uint64_t given_up;    /* blocks of FLUSH launches that gave up (and ran again) */
  uint64_t fl_inuse;    /* FLUSH control blocks in use (launches in flight, lists kept) */
  uint64_t whole;       /* BE launches the partition (--be-sms) could not host, run on the
                           whole GPU instead */
  uint64_t whole_forms; /* BE launches in a sliced, PTB or FLUSH form run on the whole GPU
                           beside the partition (--be-sms) */
} hostd_sched_stats_t;
void hostd__sched_stats(hostd_sched_stats_t *out);
/* Whether the scheduler runs (between init and shutdown, policy not none); any thread. */
bool hostd__sched_running(void);

/* Tests: replaces the clock (ns) the policy sees; NULL restores CLOCK_MONOTONIC. */
void hostd__sched_set_clock(uint64_t (*now_ns)(void));

#endif /* TALLY_HOSTD_SCHED_H */
