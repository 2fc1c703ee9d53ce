/* pol.h: the public API of policy/, Tally's scheduler as a pure C library.
 *
 * policy/ knows no CUDA: tallyd (on a GPU, hostd/sched.c) and sim/ (on the
 * CPU) drive it through this one interface.  Time is always passed in by the caller, in
 * nanoseconds, so tests run on virtual time.
 *
 * The contract, in one paragraph: the caller registers tenants, then feeds
 * events (a kernel was submitted by a tenant; a launch started / completed on
 * the device, with device timestamps; a timer the policy asked for fired) with
 * pol_sched_event(), and after every event drains the actions the policy
 * produced with pol_sched_actions(): "launch this range of logical blocks of
 * submission X in form F on tenant T's stream at priority P", or "raise the
 * preemption flag of launch L".  A submitted kernel for which no action comes
 * is being held.  The policy never blocks and never reads a clock.
 *
 * The FLUSH form (rewrite/'s NAME__tally_flush): the blocks of a FLUSH launch
 * that are running, or not yet started, when its flag shows give up unless
 * they already made their first global effect ("committed"; those run to
 * their end).  Its COMPLETED event reports blocks_done finished and
 * blocks_given_up given up, and for a FLUSH launch
 *
 *   blocks_done + blocks_given_up == block_count      (always)
 *
 * (any other event is refused with -EINVAL).  The given-up blocks are not a
 * contiguous range: the policy keeps, per submission, how many must run
 * again, and the submission's next launch is a "redo" (a LAUNCH in form
 * FLUSH with redo set, block_count the number of blocks, block_begin 0,
 * redo_of the launch whose control block lists them), issued before any
 * other piece of it and before anything later of its tenant.  A redo is a
 * FLUSH launch too: it may be preempted and give up blocks again.  A
 * submission is complete only when every one of its blocks finished.  The
 * policy learns how long a preempted FLUSH launch takes to drain from its
 * dev_end_ns minus the now_ns at which the PREEMPT was queued, so a caller
 * that offers POL_VAR_FLUSH reports dev_end_ns on its now_ns clock.
 *
 * Every policy (ours and the reference ones) sits behind this one interface;
 * pol_kind_t picks one.  Profiles (measured per kernel configuration) persist
 * in a file whose byte layout is the table in policy/profile-file.c.
 */
#ifndef TALLY_POL_H
#define TALLY_POL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Default turnaround threshold: 0.0316 ms, the Tally paper's setting. */
#define POL_DEFAULT_THRESHOLD_NS 31600u

/* tally and paper, with no latency-critical tenant registered: BE launches
 * in flight at most (what an LC tenant that joins may find queued). */
#define POL_NO_LC_INFLIGHT 32

/* Largest be_depth (pol_config_t): as many BE launches as may be queued
 * with no LC tenant at all. */
#define POL_MAX_BE_DEPTH POL_NO_LC_INFLIGHT

/* Limits that bound the policy's tables; a caller past them gets -ENOSPC. */
#define POL_MAX_TENANTS 64

/* ---------------------------------------------------------------- config */

typedef enum pol_kind {
  POL_KIND_TALLY = 0, /* ours: policy/tally.c */
  POL_KIND_PAPER,     /* our reading of the Tally paper's policy: policy/tally.c */
  POL_KIND_TIMESLICE, /* ~2 ms slices across tenants: policy/ref-timeslice.c */
  POL_KIND_MPS,       /* everything at once, one priority: policy/ref-mps.c */
  POL_KIND_MPS_PRIO,  /* everything at once, LC on the high-priority stream */
  POL_KIND_TGS,       /* TGS-like adaptive rate control of BE: policy/ref-tgs.c */
  POL_KIND_COUNT
} pol_kind_t;

typedef struct pol_config {
  uint64_t threshold_ns;     /* max turnaround the in-flight BE work may cause the LC tenant */
  uint64_t resume_idle_ns;   /* LC idle this long before BE launches resume (ours) */
  uint64_t flag_latency_ns;  /* preemption flag raised -> seen by the kernel (H200: 27.7 us p50) */
  uint64_t launch_gap_ns;    /* device idle between a completion and the next dependent launch */
  uint64_t timeslice_ns;     /* time-slicing reference: slice length (H200: ~2 ms) */
  uint64_t ts_switch_ns;     /* time-slicing: a context switch keeps the GPU this long */
  uint64_t ts_idle_ns;       /* time-slicing: owner without work this long ends its slice */
  uint64_t tgs_interval_ns;  /* TGS-like: control interval */
  uint64_t tgs_delay_ns;     /* TGS-like: LC queueing delay above which BE backs off */
  uint32_t default_resident; /* blocks the GPU holds at once when the caller says 0 */
  uint32_t drift_pct;        /* a sample this far (percent) from the estimate is "drifted" */
  uint32_t drift_samples;    /* this many drifted samples in a row trigger re-profiling */
  uint32_t min_samples;      /* samples before a profile counts as known */
  uint64_t share_block_ns;   /* ours: while the LC is active, BE kernels whose blocks are
                                known to take at most this long may still run (0: hold all) */
  uint32_t be_depth;         /* ours: while the LC is idle, BE launches whose profiled blocks
                                fit the threshold may be queued this many deep, charged by
                                their longest block (1: one budget of summed turnarounds) */
  uint32_t time_every;       /* ours: a whole BE launch of a kernel with a settled profile asks
                                for device times 1 in this many, at random (1: every launch);
                                the others complete untimed (pol_action_t.timed) */
  uint64_t flush_giveup_ns;  /* ours: flag raised -> the uncommitted blocks of a FLUSH launch
                                have given up (flag latency + one poll interval): the least
                                turnaround a FLUSH launch is charged (tally.c) */
  bool be_partitioned;       /* ours (policy tally): BE launches run on SMs the LC tenant does
                                not share (a partition the caller made), so they are not held
                                while the LC is active (tally.c, PARTITION) */
  uint64_t part_block_ns;    /* ours, with be_partitioned: while the LC is active, a BE kernel
                                whose profiled block (wave) time is longer waits, as without a
                                partition (0: none waits; tally.c, PARTITION) */
  uint64_t part_flight_ns;   /* ours, with be_partitioned: the estimated device time of the BE
                                launches in flight at most this (a kernel with no profiled shape
                                counts as all of it; one launch may always be in flight), so a driver
                                call of the LC that waits for the whole context waits for at
                                most about this much BE work (0: only POL_NO_LC_INFLIGHT
                                launches; tally.c, PARTITION) */
} pol_config_t;

/* Fills *cfg with defaults (each default's reason is in config.c). */
void pol_config_init(pol_config_t *cfg);

/* Returns 0, or -EINVAL naming the bad field in *why (static string). */
int pol_config_check(const pol_config_t *cfg, const char **why);

const char *pol_kind_name(pol_kind_t kind);
/* Parses "tally", "paper", "timeslice", "mps", "mps-prio", "tgs". 0 or -EINVAL. */
int pol_kind_parse(const char *name, pol_kind_t *kind);

/* ---------------------------------------------------------------- events */

typedef enum pol_class {
  POL_CLASS_LC = 0, /* latency-critical: at most one per scheduler */
  POL_CLASS_BE = 1, /* best-effort */
} pol_class_t;

/* Variants of a kernel the caller can launch (bit mask in pol_kernel_t). */
#define POL_VAR_ORIGINAL (1u << 0)
#define POL_VAR_SLICED   (1u << 1) /* a sub-range of blocks per launch */
#define POL_VAR_PTB      (1u << 2) /* persistent workers that stop at a flag */
#define POL_VAR_FLUSH    (1u << 3) /* a sub-range whose running blocks give up at a flag */
/* Not a form: the caller runs this kernel on the whole GPU, outside the
 * best-effort partition, which cannot host it (be_partitioned: held while
 * the LC is active, tally.c, PARTITION). */
#define POL_VAR_WHOLE_GPU (1u << 4)
/* The three forms tallyd's variant builder makes, and the default of a sim/
 * trace line without a variants field.  FLUSH is left out: a caller offers it
 * by naming POL_VAR_FLUSH, so workloads and tests written for the three
 * forms keep their meaning. */
#define POL_VAR_ALL (POL_VAR_ORIGINAL | POL_VAR_SLICED | POL_VAR_PTB)

typedef enum pol_form {
  POL_FORM_ORIGINAL = 0,
  POL_FORM_SLICED = 1,
  POL_FORM_PTB = 2,
  POL_FORM_FLUSH = 3, /* a block range (or a redo), stopped by the flag mid-block */
} pol_form_t;

/* Stream priorities: the LC tenant's stream is the high one (docs/decisions.md, D4). */
#define POL_PRIO_HIGH 0
#define POL_PRIO_LOW  1

typedef struct pol_kernel {
  uint64_t kernel_id;       /* stable id of the code (content hash, or trace id) */
  uint32_t grid[3];         /* grid dimensions; their product is the logical block count */
  uint32_t block[3];        /* block dimensions */
  uint32_t shmem_bytes;     /* dynamic + static shared memory per block */
  uint32_t variants;        /* POL_VAR_* the caller can launch; ORIGINAL is always assumed */
  uint32_t resident_blocks; /* blocks of this kernel the whole GPU holds at once; 0 = unknown */
} pol_kernel_t;

typedef enum pol_event_type {
  POL_EV_SUBMIT = 1,    /* tenant submitted kernel (submit_id, kernel) */
  POL_EV_STARTED = 2,   /* launch_id began on the device at dev_start_ns */
  POL_EV_COMPLETED = 3, /* launch_id ended: dev_start_ns..dev_end_ns, blocks_done (and
                           blocks_given_up, FLUSH) */
  POL_EV_TIMER = 4,     /* the time asked for by pol_sched_next_timer_ns() came */
} pol_event_type_t;

typedef struct pol_event {
  pol_event_type_t type;
  uint64_t now_ns;          /* caller's clock when the event is delivered */
  uint32_t tenant;          /* SUBMIT: submitting tenant */
  uint64_t submit_id;       /* SUBMIT: caller's unique id of this kernel submission */
  pol_kernel_t kernel;      /* SUBMIT */
  uint64_t launch_id;       /* STARTED, COMPLETED: id from the LAUNCH action */
  uint64_t dev_start_ns;    /* STARTED, COMPLETED: device timestamp of the first block */
  uint64_t dev_end_ns;      /* COMPLETED: device timestamp of the end */
  uint64_t blocks_done;     /* COMPLETED: logical blocks finished (< count if a PTB launch stopped,
                               or a FLUSH launch's blocks gave up) */
  bool untimed;             /* COMPLETED: no device times were taken (the LAUNCH action did not ask
                               for them): dev_start_ns/dev_end_ns are host estimates, no profile
                               sample is taken */
  uint64_t blocks_given_up; /* COMPLETED, FLUSH launch only: blocks that gave up and must run
                               again; blocks_done + blocks_given_up == the launch's
                               block_count.  0 for every other form */
  uint64_t flag_ns;         /* COMPLETED, PTB or FLUSH launch: when the caller raised its flag
                               on its own, before or without a PREEMPT action (on the now_ns
                               clock; 0: it did not), so a drain is measured from the earlier
                               of the two */
  uint64_t drain_ns;        /* COMPLETED, preempted PTB or FLUSH launch: the device's own time
                               from its flag's write to its end, when the caller measured it
                               (0: not measured); a FLUSH drain is then this, not end minus
                               raise on the now_ns clock (which counts how late the caller
                               saw the end) */
} pol_event_t;

typedef enum pol_action_type {
  POL_ACT_LAUNCH = 1,  /* launch blocks [block_begin, +block_count) of submit_id */
  POL_ACT_PREEMPT = 2, /* raise the preemption flag of launch_id (a PTB or FLUSH launch) */
} pol_action_type_t;

typedef struct pol_action {
  pol_action_type_t type;
  uint64_t launch_id;   /* policy-assigned, unique per scheduler, never 0 */
  uint64_t submit_id;   /* LAUNCH */
  uint32_t tenant;      /* LAUNCH: the stream is this tenant's stream ... */
  int stream_priority;  /* ... at this priority (POL_PRIO_*) */
  pol_form_t form;      /* LAUNCH */
  uint64_t block_begin; /* LAUNCH: first logical block */
  uint64_t block_count; /* LAUNCH: logical blocks in this launch */
  uint32_t ptb_workers; /* LAUNCH, PTB form: worker blocks */
  bool timed;           /* LAUNCH: the policy wants this launch's device start and end (a
                           profile sample); a caller may skip timing the others and report
                           their completion with pol_event_t.untimed */
  bool redo;            /* LAUNCH, FLUSH form: run again the block_count blocks that gave up
                           in launch redo_of (block_begin is 0 and unused) */
  uint64_t redo_of;     /* LAUNCH with redo: the completed FLUSH launch (or redo) whose
                           control block lists exactly these blocks; 0 otherwise */
} pol_action_t;

/* ---------------------------------------------------------------- scheduler */

typedef struct pol_sched pol_sched_t;
typedef struct pol_profiles pol_profiles_t;

/* Creates a scheduler of the given kind.  *out is owned by the caller and
 * freed with pol_sched_free().  0, -EINVAL (bad kind or config), -ENOMEM. */
int pol_sched_new(pol_kind_t kind, const pol_config_t *cfg, pol_sched_t **out);
void pol_sched_free(pol_sched_t *s);

/* Registers a tenant.  weight (1..1000) sets a BE tenant's share of the
 * capacity left by the LC tenant.  0, -EINVAL (second LC, bad weight),
 * -EEXIST, -ENOSPC (more than POL_MAX_TENANTS). */
int pol_sched_tenant_add(pol_sched_t *s, uint32_t tenant, pol_class_t cls, uint32_t weight);

/* Removes a tenant that is going away: its submissions not in flight are
 * dropped at once; its launches in flight still complete (their COMPLETED
 * events are accepted) and its slot is free for a new tenant once they
 * have.  0, -EINVAL (unknown tenant), -ENOMEM (from the policy's pump). */
int pol_sched_tenant_del(pol_sched_t *s, uint32_t tenant);

/* Whether the policy accepts k's shape in a submission: 0, or -EINVAL for
 * a grid or block dimension of 0, more than 1024 threads a block, or more
 * than 2^40 blocks.  A caller that checks before it queues a launch can
 * answer the tenant at once instead of learning it from pol_sched_event. */
int pol_kernel_check(const pol_kernel_t *k);

/* Feeds one event.  Events must come in non-decreasing now_ns.  0, -EINVAL
 * (unknown tenant or launch, malformed kernel), -ENOMEM.  Amortized work per
 * call: O(tenants + launches in flight). */
int pol_sched_event(pol_sched_t *s, const pol_event_t *ev);

/* Moves up to cap pending actions into out, oldest first; returns how many. */
size_t pol_sched_actions(pol_sched_t *s, pol_action_t *out, size_t cap);

/* When the policy wants a POL_EV_TIMER (absolute ns), or UINT64_MAX. */
uint64_t pol_sched_next_timer_ns(const pol_sched_t *s);

pol_kind_t pol_sched_kind(const pol_sched_t *s);

/* The scheduler's profile table (owned by the scheduler). */
pol_profiles_t *pol_sched_profiles(pol_sched_t *s);

/* Counters a caller may print or test. */
typedef struct pol_stats {
  uint64_t launches;          /* LAUNCH actions */
  uint64_t preempts;          /* PREEMPT actions */
  uint64_t explore_launches;  /* launches of unprofiled kernels */
  uint64_t reprofiles;        /* profiles reset for drift */
  uint64_t fallback_launches; /* no form met the threshold; least-turnaround form used */
  uint64_t redo_launches;     /* FLUSH redo launches (pol_action_t.redo) */
  uint64_t blocks_given_up;   /* blocks FLUSH launches reported given up */
  uint64_t flight_waits;      /* BE submissions that waited for the partition's in-flight
                                 bound (part_flight_ns) at least once */
} pol_stats_t;
void pol_sched_stats(const pol_sched_t *s, pol_stats_t *out);

/* ---------------------------------------------------------------- profiles */

/* A profile is keyed by (kernel_id, grid, block, shmem).  It holds the
 * measured time per wave of blocks in the plain forms (original, sliced, and
 * FLUSH launches that ran to their end), per logical block in the PTB form,
 * and how long preempted FLUSH launches took to drain, from completion
 * timestamps only. */
typedef struct pol_profile_key {
  uint64_t kernel_id;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t shmem_bytes;
} pol_profile_key_t;

typedef struct pol_profile {
  pol_profile_key_t key;
  uint64_t wave_ns;      /* estimated time of one wave, original/sliced forms; 0 unknown */
  uint32_t wave_samples; /* samples behind wave_ns */
  uint64_t ptb_block_ns; /* estimated time per logical block per PTB worker; 0 unknown */
  uint32_t ptb_samples;
  uint32_t drifted;             /* consecutive drifted samples */
  uint64_t flush_drain_ns;      /* FLUSH: flag raised -> launch ended, a decaying maximum over
                                   preempted launches (profile.c); 0 unknown */
  uint32_t flush_drain_samples; /* preemptions behind flush_drain_ns */
} pol_profile_t;

int pol_profiles_new(pol_profiles_t **out);
void pol_profiles_free(pol_profiles_t *p);
size_t pol_profiles_count(const pol_profiles_t *p);
/* Looks a key up; NULL if absent.  The pointer lives until the next insert. */
const pol_profile_t *pol_profiles_find(const pol_profiles_t *p, const pol_profile_key_t *key);
/* Inserts or replaces a record. 0 or -ENOMEM. */
int pol_profiles_put(pol_profiles_t *p, const pol_profile_t *rec);

/* Serialized form (layout: the table in policy/profile-file.c).
 * encode: writes at most cap bytes to buf, sets *len to the size needed;
 * returns 0 or -ENOSPC (then *len says how much to give).
 * decode: replaces nothing on error; 0, -EPROTO (bad bytes, with *why),
 * -ENOMEM.  decode never trusts a count before checking the bytes present. */
int pol_profiles_encode(const pol_profiles_t *p, uint8_t *buf, size_t cap, size_t *len);
int pol_profiles_decode(pol_profiles_t *p, const uint8_t *buf, size_t len, const char **why);
/* File wrappers: save writes path.tmp then renames (a crash keeps the old
 * file).  load: -ENOENT if absent, -EPROTO if corrupt, -EFBIG past 80 MiB. */
int pol_profiles_save(const pol_profiles_t *p, const char *path);
int pol_profiles_load(pol_profiles_t *p, const char *path, const char **why);

#endif /* TALLY_POL_H */
