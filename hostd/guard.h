/* guard.h: tallyd's production guards, shared by hostd/'s own files:
 * per-tenant quotas and counters (quota.c), the refusal log (log.c), the
 * module cache's bounds (modcache.c), and the operator's view: tenant rows
 * (server.c), their text forms (metrics.c) and the control socket and HTTP
 * endpoint that serve them (ctl.c).  Internal: never installed.
 */
#ifndef TALLY_HOSTD_GUARD_H
#define TALLY_HOSTD_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hostd/hostd.h"

struct uv_loop_s;

/* ---- quotas and counters of one tenant (quota.c) ---- */
typedef enum hostd_quota_res {
  HOSTD_QUOTA_MEM,     /* device memory bytes (MEM_ALLOC / MEM_FREE) */
  HOSTD_QUOTA_STREAMS, /* streams (STREAM_NEW / STREAM_DEL) */
  HOSTD_QUOTA_EVENTS,  /* events (EVENT_NEW / EVENT_DEL) */
  HOSTD_QUOTA_HOSTFNS, /* host functions posted and not finished */
  HOSTD_QUOTA_UPLOAD,  /* module image bytes received (never released) */
  HOSTD_QUOTA_N
} hostd_quota_res_t;

/* Invariant: used[r] <= limit[r] whenever limit[r] != 0 (0 = no limit);
 * charge and release are atomic, any thread. */
typedef struct hostd_quota {
  uint64_t limit[HOSTD_QUOTA_N];
  uint64_t used[HOSTD_QUOTA_N];    /* atomics */
  uint64_t refused[HOSTD_QUOTA_N]; /* charges refused (atomics) */
  uint64_t peak_mem;               /* highest used[MEM] (atomic) */
  /* Not quotas, the tenant's scheduling, for the operator's view: */
  uint32_t weight;  /* --tenant-weight for it (1..1000) */
  int scheduled;    /* the scheduler counts its GPU time into gpu_ns (atomic) */
  uint64_t gpu_ns;  /* device time of its kernels (atomic; sched.c adds) */
  uint64_t sliced, ptb, flush; /* its launches of sliced / PTB / FLUSH variants (atomics;
                                 sched.c adds) */
} hostd_quota_t;

/* Limits for a tenant from the configuration: the rule naming it, else its
 * class's, else the one for every tenant (HOSTD_QUOTA_MEM), and the plain
 * caps for the others; its weight the same way (default 1).  prio: 0
 * latency-critical, 1 best-effort. */
void hostd__quota_setup(hostd_quota_t *q, const hostd_config_t *cfg, const char *name, int prio);
/* Takes n units of r: CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY (the
 * driver's answer when memory, streams or events run out) and nothing
 * taken.  q NULL: always CUDA_SUCCESS (tenants driven without a worker). */
int hostd__quota_charge(hostd_quota_t *q, hostd_quota_res_t r, uint64_t n);
/* Gives n units of r back (never below 0).  q NULL: nothing. */
void hostd__quota_release(hostd_quota_t *q, hostd_quota_res_t r, uint64_t n);
uint64_t hostd__quota_used(const hostd_quota_t *q, hostd_quota_res_t r);
/* The quota of the tenant whose worker runs on this thread (server.c sets
 * it before the first request), NULL elsewhere: tenant.c's handlers charge
 * through it without knowing the worker. */
extern __thread hostd_quota_t *hostd__quota_self;
/* "4G", "512M", "64K", "1000": bytes in *out; 0 or -EINVAL. */
int hostd__parse_size(const char *s, uint64_t *out);

/* ---- bounds of the shared context's limits (exec.c, CTX_LIMIT) ---- */
/* The most a tenant may grow the per-thread stack and the device malloc
 * heap to (--max-stack-bytes, --max-heap-bytes; 0 = no bound).  Called by
 * server.c before any tenant; until then the HOSTD_DEFAULT_MAX_* values
 * apply (tenants driven without a server). */
void hostd__limit_bounds(uint64_t stack_max, uint64_t heap_max);

/* ---- the latency-critical tenant's request latency (latency.c) ---- */
#define HOSTD_LAT_RING     4096 /* requests remembered */
#define HOSTD_LAT_WINDOW_S 60   /* the window of the quantiles, seconds */
/* What a request is: latency.c.  ring and next: written by the tenant's
 * worker only, ring entries read by any thread (atomics). */
typedef struct hostd_lat {
  uint64_t ring[HOSTD_LAT_RING]; /* end second (monotonic) << 32 | microseconds; 0 empty */
  uint64_t next;                 /* next entry */
  uint64_t open_ns;              /* the open request began (monotonic ns); 0 none */
} hostd_lat_t;
/* Does the answer (result) to a call of op end a request? */
bool hostd__lat_ends(uint32_t op, uint32_t result);
/* Worker: it is executing a request of op queued at at_ns (monotonic): a
 * LAUNCH opens a request when none is open.  l NULL: nothing. */
void hostd__lat_request(hostd_lat_t *l, uint32_t op, uint64_t at_ns);
/* Worker: it answered a call of op with result at now_ns: ends the open
 * request when hostd__lat_ends says so.  l NULL: nothing. */
void hostd__lat_answered(hostd_lat_t *l, uint32_t op, uint32_t result, uint64_t now_ns);
/* Any thread: p50 and p99 in microseconds of the requests that ended in
 * the last HOSTD_LAT_WINDOW_S seconds before now_ns; -1 when none. */
void hostd__lat_quantiles(const hostd_lat_t *l, uint64_t now_ns, int64_t *p50, int64_t *p99);

/* ---- log (log.c) ---- */
/* Copies s to out (cap bytes, NUL-terminated), escaping control bytes,
 * backslash, quote and bytes >= 0x7f as \n \r \t \\ \" \xHH: a peer's
 * string can then neither forge a log line nor carry terminal escapes.
 * Returns out. */
char *hostd__escape(char *out, size_t cap, const char *s);
/* One info line per refusal, at most one per peer key per
 * HOSTD_REFUSAL_LOG_S seconds (the others are counted and summarised in
 * the next line for that key); peer, uid and reason are escaped.  Any
 * thread.  Returns true when a line was written. */
#define HOSTD_REFUSAL_LOG_S 10
bool hostd__log_refusal(const char *key, const char *peer, long uid, const char *what,
                        const char *why);
/* Refusals seen since start (logged or not), for the metrics. */
unsigned long hostd__refusals(void);

/* ---- module cache bounds (modcache.c) ---- */
typedef struct hostd_modcache_stats {
  uint64_t mem_bytes, disk_bytes, images, evicted_mem, evicted_disk;
} hostd_modcache_stats_t;
/* Bounds (0 = unlimited); call after hostd__modcache_init. */
void hostd__modcache_limits(uint64_t mem_max, uint64_t disk_max);
void hostd__modcache_stats(hostd_modcache_stats_t *st);
/* Ends this thread's hold on the image its last hostd__modcache_get
 * returned (a worker calls it when its tenant is gone). */
void hostd__modcache_unpin(void);

/* ---- the operator's view ---- */
typedef struct hostd_row {
  uint32_t id;
  char name[72];
  char peer[64];
  char transport[8];
  int prio;          /* 0 latency-critical, 1 best-effort */
  long uid;          /* -1: unknown (TCP) */
  int64_t since;     /* connected at, seconds since the epoch */
  uint64_t mem;      /* device memory bytes charged */
  uint64_t kernels;  /* launches executed */
  uint64_t queue;    /* requests queued for the worker */
  uint64_t upload;   /* module bytes received */
  int64_t gpu_ns;    /* -1: not measured */
  uint32_t weight;   /* the scheduler's weight of the tenant; 0: not scheduled */
  int64_t p50_us, p99_us; /* latency-critical request latency over the last minute, -1: none */
  uint64_t sliced, ptb, flush; /* launches of its kernels' sliced / PTB / FLUSH variants */
  int cpu;           /* the CPU its polling worker is pinned to (--lc-poll-cpu), -1: none */
} hostd_row_t;

/* The scheduler's daemon-wide counters (sched.h), for the view. */
typedef struct hostd_view_sched {
  int on;                    /* 0: --policy none (the rest is 0) */
  uint64_t sliced, ptb, flush; /* variant launches */
  uint64_t given_up;         /* blocks of FLUSH launches that gave up (and ran again) */
  uint64_t whole;            /* best-effort launches the partition could not host, run on the
                                whole GPU */
  uint64_t whole_forms;      /* sliced, PTB or FLUSH launches run on the whole GPU beside the
                                partition */
  uint64_t preempts;         /* launches whose preemption flag was raised */
  uint64_t early_raises;     /* flags an LC's worker raised before the policy asked */
  uint64_t turnarounds;      /* of those, timed (flag write -> the launch's end) */
  uint64_t turn_p50_ns, turn_p99_ns; /* of the timed ones */
  uint64_t fences_blocked;   /* fences that made a tenant's worker wait for the scheduler */
  uint64_t fence_block_ns;   /* the time they waited, in all */
} hostd_view_sched_t;

typedef struct hostd_view {
  hostd_row_t *rows;
  size_t n;
  unsigned long calls, rx_bytes, blob_puts, refusals;
  int64_t started;
  hostd_modcache_stats_t mc;
  hostd_view_sched_t sched;
} hostd_view_t;

/* metrics.c: the text forms; malloc'd, NUL-terminated, NULL when out of
 * memory. */
char *hostd__view_status(const hostd_view_t *v);
char *hostd__view_metrics(const hostd_view_t *v);

/* ctl.c: the control socket (UNIX, mode 0660, group as --unix-group;
 * requests "status\n" / "metrics\n") and the HTTP endpoint (GET /metrics).
 * Both answer from view(arg) on the loop thread, bound every request (size,
 * time, connections) and close after one answer. */
typedef struct hostd_ctl hostd_ctl_t;
typedef int (*hostd_view_fn)(void *arg, hostd_view_t *v); /* fills v; 0 or -errno */
int hostd__ctl_new(hostd_ctl_t **out, struct uv_loop_s *loop, const hostd_config_t *cfg,
                   hostd_view_fn view, void *arg);
int hostd__ctl_http_port(const hostd_ctl_t *c); /* the bound metrics port, or 0 */
void hostd__ctl_close(hostd_ctl_t *c);         /* loop thread; NULL ok; memory goes in the loop */

#endif /* TALLY_HOSTD_GUARD_H */
