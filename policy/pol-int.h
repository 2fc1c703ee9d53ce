/* pol-int.h: declarations shared by policy/'s own .c files (not public).
 *
 * Lock story: a pol_sched_t and everything reachable from it belong to one
 * caller thread (tallyd's scheduler thread, or one simulation); nothing here
 * is shared or locked.
 *
 * Invariants kept by sched.c for every policy:
 *  (a) a tenant's submissions sit in its FIFO in submission order; only the
 *      first one with unissued blocks may be issued from (stream order);
 *  (b) sub->next is the first logical block not yet issued; a PTB launch that
 *      stops early returns its unfinished suffix by moving sub->next back,
 *      which is safe because nothing of that tenant is issued while one of
 *      its PTB launches is in flight (pol__tenant_issuable() returns NULL
 *      then);
 *  (c) be_budget_ns is the sum of the turnaround charged to BE launches in
 *      flight; it returns to 0 when none are;
 *  (d) be_deep_inflight counts the BE launches in flight issued as "deep"
 *      (POL__ISSUE_DEEP, tally.c's DEPTH rule); it is <= be_inflight.
 *  (e) FLUSH: sub->redo counts blocks of sub that gave up and have not been
 *      issued again; they are exactly the blocks listed by launch
 *      sub->redo_of, because nothing of a tenant is issued while one of its
 *      FLUSH launches is in flight (as for PTB, pol__tenant_issuable()) and
 *      a pending redo is the first thing issued of its tenant
 *      (pol__tenant_issuable() returns its submission, pol__issue_redo()
 *      takes all of it).  sub->done + blocks in flight + sub->redo + (total -
 *      next) == total.
 *  (f) be_flight_ns is the sum of flight_ns of the BE launches in flight
 *      (PARTITION's in-flight bound, tally.c); it returns to 0 when none are.
 */
#ifndef TALLY_POL_INT_H
#define TALLY_POL_INT_H

#include "policy/pol.h"

/* Entries of pol_sched_t.hints. */
#define POL__HINTS 256

typedef struct pol__sub {
  uint64_t submit_id;
  pol_kernel_t k;
  uint64_t total;     /* logical blocks (grid product) */
  uint64_t next;      /* first logical block not issued */
  uint64_t done;      /* logical blocks completed */
  uint32_t inflight;  /* launches of this submission in flight */
  uint64_t redo;      /* FLUSH: blocks that gave up, to run again (invariant e) */
  uint64_t redo_of;   /* FLUSH: the launch whose control block lists them (redo > 0) */
  uint64_t submit_ns; /* when the tenant submitted it */
  bool flight_waited; /* PARTITION: it waited for the in-flight bound (counted once) */
  struct pol__sub *fifo_next;
} pol__sub_t;

typedef struct pol__tenant {
  bool used;
  bool closing; /* removed (pol_sched_tenant_del): launches still in flight */
  uint32_t id;
  pol_class_t cls;
  uint32_t weight;
  pol__sub_t *head, *tail; /* submissions not yet complete, oldest first */
  uint32_t nsubs;
  uint32_t inflight;       /* launches in flight */
  uint32_t ptb_inflight;   /* PTB launches in flight */
  uint32_t flush_inflight; /* FLUSH launches (redos included) in flight */
  double vtime;            /* weighted device time charged (fair share) */
  bool idle;               /* BE: had nothing queued or in flight at the last pump */
  uint64_t issued_blocks;  /* logical blocks issued, for tests and stats */
} pol__tenant_t;

typedef struct pol__launch {
  bool in_use;
  uint32_t gen; /* bumped on reuse; part of the launch id */
  pol__tenant_t *t;
  pol__sub_t *sub;
  pol_form_t form;
  uint64_t begin, count;
  uint32_t workers;
  uint64_t turn_ns; /* turnaround charged to the BE budget */
  uint64_t flight_ns; /* device time charged to be_flight_ns (invariant f) */
  uint64_t issue_ns;
  bool explore; /* launched while the kernel was unprofiled */
  bool deep;    /* queued under the DEPTH rule (tally.c): charged by its block time */
  bool preempt_raised;
  uint64_t preempt_ns; /* when the PREEMPT action was queued (preempt_raised) */
  bool redo;           /* FLUSH: a redo launch (pol_action_t.redo) */
  uint32_t next_free;  /* free list link (slot index + 1; 0 = end) */
} pol__launch_t;

struct pol__ops {
  /* Issues what may be issued now (pol__issue), raises flags, sets timer. */
  int (*pump)(pol_sched_t *s); /* 0 or -ENOMEM */
  /* Optional: called for every completed launch before it is freed. */
  void (*on_completed)(pol_sched_t *s, const pol__launch_t *l, const pol_event_t *ev);
};

struct pol_sched {
  pol_kind_t kind;
  pol_config_t cfg;
  const struct pol__ops *ops;
  uint64_t now_ns;
  uint64_t timer_ns; /* UINT64_MAX: none */
  pol__tenant_t tenants[POL_MAX_TENANTS];
  uint32_t ntenants;
  int lc;                  /* index of the LC tenant, -1 none */
  pol__launch_t *launches; /* slots */
  uint32_t nslots, free_head;
  pol_action_t *actq; /* pending actions, [acth, actn) */
  size_t acth, actn, actcap;
  pol_profiles_t *profiles;
  /* A kernel's wave time by (kernel_id, block, shmem), whatever its grid: the
   * longest settled wave_ns of its profiled shapes, for an estimate of a
   * shape not yet profiled (PARTITION's in-flight bound).  Direct-mapped by
   * the hash of those (tag: the hash, never 0); a collision replaces. */
  struct pol__wave_hint {
    uint64_t tag, wave_ns;
  } hints[POL__HINTS];
  pol_stats_t stats;
  /* LC state */
  uint32_t lc_inflight;
  uint64_t lc_last_done_ns;
  bool lc_seen_done;
  /* BE state */
  uint64_t be_budget_ns;
  uint64_t be_flight_ns; /* invariant (f) */
  uint32_t be_inflight;
  uint32_t be_deep_inflight; /* of be_inflight, those issued deep (invariant d) */
  uint32_t rr;               /* round-robin cursor (paper, timeslice) */
  uint64_t rng;              /* xorshift64 state: which settled launches are timed (time_every) */
  /* time-slicing (policy/ref-timeslice.c) */
  int ts_owner;             /* tenant index owning the GPU, -1 none yet */
  int ts_next;              /* tenant the GPU is being switched to, -1 none */
  uint64_t ts_slice_end_ns; /* owner's next slice boundary (free-running) */
  uint64_t ts_idle_since;   /* owner without work since, UINT64_MAX busy */
  uint64_t ts_switch_began; /* when the pending switch began */
  bool ts_waiting;          /* another tenant had work at the last pump */
  /* TGS-like */
  uint32_t tgs_window;
  uint64_t tgs_max_delay_ns;
  uint64_t tgs_next_ns;
};

extern const struct pol__ops pol__ops_tally;
extern const struct pol__ops pol__ops_timeslice;
extern const struct pol__ops pol__ops_mps;
extern const struct pol__ops pol__ops_tgs;

/* Blocks of k the GPU holds at once (caller's figure or the default). */
uint64_t pol__resident(const pol_sched_t *s, const pol_kernel_t *k);
/* First submission of t with unissued blocks or a pending redo (stream
 * order), or NULL; NULL too while a PTB or FLUSH launch of t is in flight
 * (invariants b, e). */
pol__sub_t *pol__tenant_issuable(pol__tenant_t *t);
/* True if t has submissions not complete. */
bool pol__tenant_busy(const pol__tenant_t *t);
/* pol__issue flags. */
#define POL__ISSUE_EXPLORE (1u << 0) /* the kernel is unprofiled (counted in stats) */
#define POL__ISSUE_DEEP    (1u << 1) /* a BE launch under tally.c's DEPTH rule */
/* Queues a LAUNCH action; 0 or -ENOMEM. */
int pol__issue(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *sub, pol_form_t form, uint64_t count,
               uint32_t workers, int prio, uint64_t turn_ns, unsigned flags);
/* Queues a PREEMPT action for l (once). */
int pol__preempt(pol_sched_t *s, pol__launch_t *l);
/* Issues u's pending redo: one FLUSH launch of all u->redo blocks, charged
 * turn_ns; 0 or -ENOMEM. */
int pol__issue_redo(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *u, int prio, uint64_t turn_ns,
                    unsigned flags);
/* Issues the rest of u whole: its pending redo if it has one, else the
 * unissued blocks in ORIGINAL form (SLICED if cut before).  0 or -ENOMEM. */
int pol__issue_rest(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *u, int prio);
/* The same, charging flight_ns to be_flight_ns while it runs (invariant f). */
int pol__issue_rest_charged(pol_sched_t *s, pol__tenant_t *t, pol__sub_t *u, int prio,
                            uint64_t flight_ns);
/* Issues every issuable submission of t with pol__issue_rest. */
int pol__issue_all(pol_sched_t *s, pol__tenant_t *t, int prio, uint32_t max_inflight);
void pol__timer_at(pol_sched_t *s, uint64_t at_ns);
void pol__key_of(const pol_kernel_t *k, pol_profile_key_t *key);
/* Folds one measurement of a completed launch into the profile table (and
 * its kernel's wave hint, pol_sched_t.hints). */
int pol__profile_sample(pol_sched_t *s, const pol__launch_t *l, const pol_event_t *ev);
/* The wave hint of k's kernel, block and shared memory: 0 when none. */
uint64_t pol__wave_hint(const pol_sched_t *s, const pol_kernel_t *k);

/* profile.c internals used by profile-file.c. */
const pol_profile_t *pol__profiles_at(const pol_profiles_t *p, size_t *cursor);
void pol__profiles_swap(pol_profiles_t *a, pol_profiles_t *b);

#endif /* TALLY_POL_INT_H */
