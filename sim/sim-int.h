/* sim-int.h: declarations shared by sim/'s own .c files (not public).
 *
 * Lock story: one sim__ctx belongs to one sim_run() call on one thread.
 *
 * Model in one paragraph (details in gpu.c and engine.c): time is integer
 * nanoseconds.  Events sit in one binary heap ordered by (time, sequence
 * number), so ties break by insertion order and runs are deterministic.  A
 * "group" is n blocks of one launch dispatched on one SM at the same instant;
 * they finish together, so one event stands for n blocks.
 */
#ifndef TALLY_SIM_INT_H
#define TALLY_SIM_INT_H

#include "sim/sim.h"

#include <stddef.h>

enum sim__ev_type {
  SIM__EV_GROUP_DONE = 1, /* a: group index */
  SIM__EV_ELIGIBLE,       /* a: launch index (its stream may start it now) */
  SIM__EV_FLAG,           /* a: launch index (its preemption flag is visible) */
  SIM__EV_POL_DONE,       /* a: launch index (completion reaches the host) */
  SIM__EV_SUB_DONE,       /* a: submission index (a kernel's completion reaches its tenant) */
  SIM__EV_HOST,           /* a: tenant (host thread wakes: arrival or next submit) */
  SIM__EV_TIMER,          /* policy timer */
};

typedef struct sim__ev {
  uint64_t t;
  uint64_t seq; /* tie-break, monotonic */
  uint32_t type;
  uint32_t a;
} sim__ev_t;

typedef struct sim__slot {
  uint32_t sm, n; /* n blocks on SM sm */
  uint32_t next;  /* next slot of the group, or free-list link (index + 1; 0 = end) */
} sim__slot_t;

typedef struct sim__group {
  uint32_t launch;
  uint32_t head, tail; /* slots (index + 1; 0 = none) */
  uint64_t start_ns;   /* when its blocks began */
  bool live;           /* allocated (its completion event is pending) */
  bool dead;           /* FLUSH: its blocks gave up; its SMs are free, its launch may be
                          gone, and its completion event only releases it */
  uint32_t next_free;
} sim__group_t;

typedef struct sim__launch {
  bool in_use;
  uint64_t pol_id; /* policy's launch id */
  uint32_t sub;    /* submission index */
  uint32_t tenant;
  int prio;
  uint64_t seq; /* launch order, for same-priority dispatch */
  pol_form_t form;
  uint64_t begin, count; /* logical blocks */
  uint64_t units;        /* dispatch units: blocks, or PTB workers */
  uint64_t dispatched;   /* units dispatched (or cancelled) */
  uint64_t logical_next; /* PTB: next logical block to hand out (relative) */
  uint64_t done;         /* logical blocks finished */
  uint64_t given_up;     /* FLUSH: blocks that gave up (done + given_up == count at the end) */
  bool redo;             /* FLUSH: runs blocks an earlier launch gave up */
  uint32_t resident;     /* groups resident now */
  uint32_t open_group;   /* group created at open_ns (index + 1), joinable */
  uint64_t open_ns;
  uint64_t block_ns;             /* effective duration of one (logical) block */
  uint64_t nominal_ns;           /* trace duration of one block (work accounting) */
  uint32_t threads, regs, shmem; /* per block */
  uint64_t visible_ns;           /* launch latency over */
  uint64_t ready_ns;             /* became eligible */
  uint64_t first_ns, last_dispatch_ns, end_ns;
  uint64_t flag_ns; /* UINT64_MAX: not raised */
  bool eligible;    /* stream head and ready */
  bool complete;
  bool ctx_waited;  /* an LC request's context-wide wait waits for it (engine.c) */
  uint32_t stream_next; /* next launch on the stream (index + 1; 0 = none) */
  uint32_t next_free;
} sim__launch_t;

typedef struct sim__sub {
  bool in_use;
  uint32_t tenant;
  const sim_kernel_t *k; /* the kernel (in the tenant's trace of this iteration) */
  uint64_t total, done;
  uint64_t redo_pending; /* FLUSH: blocks given up and not yet launched again */
  uint32_t gen;
  uint32_t next_free;
} sim__sub_t;

typedef struct sim__sm {
  uint32_t threads, regs, shmem, blocks; /* free */
} sim__sm_t;

typedef struct sim__tenant {
  const sim_tenant_spec_t *spec;
  uint32_t stream_head, stream_tail; /* launch index + 1 */
  /* host thread */
  uint64_t req;         /* LC: index of the current request */
  uint64_t iter;        /* iterations started (picks the trace of spec->iters) */
  const sim_trace_t *tr; /* the trace of the current iteration */
  bool in_iter;         /* submitting or waiting for an iteration */
  uint32_t next_k;      /* next kernel of the iteration to submit */
  uint64_t outstanding; /* submitted kernels not complete (host view) */
  uint64_t iter_start_ns;
  uint64_t last_submit_ns;
  bool ctx_waiting; /* LC: its request's context-wide wait is not over (engine.c) */
} sim__tenant_t;

/* Writes "line LINE: " and the formatted reason into err (when not NULL)
 * and returns -EPROTO: the one error path of the trace and CSV readers. */
int sim__line_err(char *err, size_t errlen, size_t line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads all of path into *buf (malloc'd, NUL added after *len bytes).  0,
 * -errno of fopen, -EFBIG (more than max bytes), -ENOMEM, -EIO. */
int sim__read_file(const char *path, size_t max, char **buf, size_t *len);
/* The same for a trace (at most SIM_TRACE_MAX_BYTES), with why in err. */
int sim__read_trace_file(const char *path, char **buf, size_t *len, char *err, size_t errlen);

/* One kernel line of the trace format (trace.c's table), without its
 * comment: p[0..n).  0 with name and *k filled, 1 for a blank line, or
 * -EPROTO with "line LINE: reason" in err. */
int sim__trace_line(const char *p, size_t n, size_t line, char name[SIM_NAME_MAX],
                    sim_kernel_t *k, char *err, size_t errlen);

/* Free-list pools (pool.c): take an entry of a growable array of records
 * chained through the u32 field `link` (index + 1; 0 = end); new records are
 * zeroed.  -ENOMEM leaves the pool as it was. */
int sim__pool_take(void **items, uint32_t *n, uint32_t *free_head, size_t size, size_t link_off,
                   uint32_t first_n, uint32_t *out);
void sim__pool_put(void *items, uint32_t *free_head, size_t size, size_t link_off, uint32_t i);
#define SIM__POOL_TAKE(arr, n, free_head, link, first_n, out)                                      \
  sim__pool_take((void **)&(arr), &(n), &(free_head), sizeof(*(arr)),                              \
                 offsetof(__typeof__(*(arr)), link), (first_n), (out))
#define SIM__POOL_PUT(arr, free_head, link, i)                                                     \
  sim__pool_put((arr), &(free_head), sizeof(*(arr)), offsetof(__typeof__(*(arr)), link), (i))

typedef struct sim__ctx {
  const sim_run_config_t *cfg;
  const sim_gpu_config_t *g;
  sim_result_t *res;
  pol_sched_t *pol;
  uint64_t now;
  uint64_t seq;
  uint64_t launch_seq;
  /* heap */
  sim__ev_t *heap;
  size_t nheap, capheap;
  /* pools */
  sim__group_t *groups;
  uint32_t ngroups, group_free;
  sim__slot_t *slots;
  uint32_t nslots, slot_free;
  sim__launch_t *launches;
  uint32_t nlaunches, launch_free;
  sim__sub_t *subs;
  uint32_t nsubs, sub_free;
  sim__sm_t *sms;
  /* eligible launches with units left, sorted by (prio, seq) */
  uint32_t *active;
  uint32_t nactive, capactive;
  sim__tenant_t tenants[SIM_MAX_TENANTS];
  uint64_t timer_at; /* policy timer scheduled (UINT64_MAX none) */
  bool lc_left;      /* some LC request still to finish */
  uint32_t ctx_wait_left; /* launches marked ctx_waited still running */
  uint32_t ctx_waiter;    /* the tenant whose context-wide wait that is */
  int err;           /* first error seen (sticky) */
} sim__ctx_t;

/* engine.c */
int sim__push(sim__ctx_t *c, uint64_t t, uint32_t type, uint32_t a);
/* gpu.c */
int sim__gpu_init(sim__ctx_t *c);
void sim__gpu_fini(sim__ctx_t *c);
/* Creates a launch from a policy action (at c->now). */
int sim__gpu_launch(sim__ctx_t *c, const pol_action_t *a);
int sim__gpu_preempt(sim__ctx_t *c, uint64_t pol_id);
int sim__gpu_on_eligible(sim__ctx_t *c, uint32_t li);
int sim__gpu_on_group_done(sim__ctx_t *c, uint32_t gi);
int sim__gpu_on_flag(sim__ctx_t *c, uint32_t li);
void sim__gpu_release(sim__ctx_t *c, uint32_t li);
/* engine.c callbacks from gpu.c */
void sim__on_blocks_done(sim__ctx_t *c, sim__launch_t *l, uint64_t n);
void sim__on_launch_done(sim__ctx_t *c, uint32_t li);
void sim__on_lc_wait(sim__ctx_t *c, uint32_t tenant, uint64_t wait_ns);

#endif /* TALLY_SIM_INT_H */
