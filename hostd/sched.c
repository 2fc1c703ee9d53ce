/* sched.c: tallyd's scheduler thread; policy/ in the data path.
 *
 * Tenant workers submit launches here (hostd__sched_launch) and fence their
 * streams before other work (hostd__sched_fence); this thread feeds those
 * to policy/ (pol_sched_event) and carries out its actions on the GPU.  The
 * mechanism (launch streams, fences, polled events) is described in
 * sched.h and docs/scheduler.md.
 *
 * Lock story: `mu` guards the inbox, the stream lists of tenants, the event
 * pool and the flags workers wait on (`done` is signalled when a tenant's
 * pending count drops to 0 or its close finished; `wake` wakes this thread
 * when it sleeps).  Everything else of the scheduler (the policy, the FIFOs
 * of queued launches, launches in flight, the scheduler side of a stream)
 * belongs to the scheduler thread alone; the worker side of a stream (its
 * sequence numbers) to the tenant's worker alone.
 *
 * Invariants:
 *  (a) a stream's queued launches carry sequence numbers 1, 2, ... in
 *      submission order; they are issued to its launch stream in that order, because
 *      policy/ issues a tenant's submissions in FIFO order;
 *  (b) a fence makes the tenant stream wait, with an event, for its launch
 *      stream after the last launch submitted so far, and only once that
 *      launch was issued: a GPU wait never names work not yet submitted, so
 *      two streams that share a hardware queue cannot wait for each other
 *      (a wait for a future stream write deadlocked on the H200);
 *  (c) every run of queued launches (those between two fences) starts after
 *      an event recorded on the tenant stream when the run began, so it sees
 *      the stream's earlier work; each run has an event of its own (a wait
 *      takes the event's state at the time of the call).
 *  (d) an LC (direct) stream has at most one item or flight at a time
 *      (lc_busy): the worker counts each launch it made (lc_made) and
 *      queues the stream's preallocated item only when lc_busy was clear.
 *      The scheduler thread never calls the driver on an LC stream: the
 *      worker records an event behind the stream's newest launch at quiet
 *      points (the end of a batch, and a fence, i.e. before any other work
 *      on the stream, except a completion word's write, which the record
 *      follows: hostd/exec.c, STREAM_MARK) when lc_made moved since its
 *      last record (lc_rec),
 *      and publishes it with that count (lc_pub*, under mu), replacing an
 *      untaken one, so the slot holds the worker's newest record.  The
 *      flight takes the newest publication (after a synchronisation of the
 *      stream by its worker, one without an event: the launches it counts
 *      are done; hostd__sched_synced); when its event completes and
 *      covers lc_made, it clears lc_busy (under mu), else it waits for the
 *      next publication, which the worker's next quiet point makes.  So a
 *      flush needs nothing from LC streams (their launches were made), and
 *      a stream is recorded on only by its worker, before any other work on
 *      it (a capture begins or is joined only through such work); freeing
 *      the stream waits for lc_busy to clear and returns an untaken event.
 *  (e) a BE launch that a flag stops (PTB, FLUSH with a slot that can be
 *      raised) is ARMED while in flight: its slot's bit and generation are
 *      published (arm_bits, armed[]) after its launch was issued and
 *      withdrawn when its end is seen, before the slot is reused.  An LC
 *      worker whose stream starts a burst raises every armed flag itself,
 *      before it launches, as every policy that makes such launches
 *      preempts them when the LC becomes busy; before its write it claims
 *      the slot for the generation with the ticket its LC note will carry,
 *      and after it hands over the timed event (early_*, under mu).  The
 *      scheduler thread still raises the flag when the policy says (a
 *      write that landed before the launch's own clearing of its control
 *      block would otherwise be lost), times the turnaround from the
 *      worker's event when the generation is the flight's, and completes a
 *      launch the worker stopped only once the note with that ticket was
 *      handled (ticket_heard), so the policy knows the LC is busy first.
 */
#include "hostd/sched.h"
#include "hostd/gpu.h"
#include "hostd/hostd-int.h"
#include "hostd/variants.h"
#include "wire/u64map.h"
#include "rewrite/rw.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define ACT_BATCH   64
#define EV_POOL_MAX 4096 /* events of each kind kept for reuse; more are destroyed */
#define CTL_SLOTS   1024 /* PTB control blocks: PTB launches in flight at once */
#define CTL_HOST    32   /* host bytes per slot: 16 staged for the write, 8 read back */
/* FLUSH control blocks (rewrite/README.md: flag, n, reserved, then the
 * indices of the blocks that gave up): FL_SLOTS of FL_BLOCKS entries, and
 * one more that is never raised (a FLUSH launch with no slot of its own
 * runs whole with it).  A launch of more blocks than FL_BLOCKS uses it too. */
#define FL_SLOTS    32
#define FL_BLOCKS   16384u
#define FL_STRIDE   (16u + 4u * FL_BLOCKS)
#define FL_QUIET    FL_SLOTS
#define TURN_BUCKETS 4096 /* turnaround histogram: 1 us buckets, then one overflow */
/* Flags a worker may raise (invariant (e)): PTB slot i is index i, FLUSH
 * slot j index CTL_SLOTS + j. */
#define ARM_N     (CTL_SLOTS + FL_SLOTS)
#define ARM_WORDS ((ARM_N + 63) / 64)

typedef enum item_kind { IT_SUBMIT, IT_DIRECT, IT_CLOSE } item_kind_t;

/* One message from a worker; a submission stays as the FIFO entry. */
typedef struct item {
  item_kind_t kind;
  struct item *next;
  hostd_sched_tenant_t *t;
  hostd_sched_stream_t *ss;
  uint32_t seq;       /* SUBMIT: stream sequence number */
  uint64_t run_event; /* SUBMIT: event on the tenant stream to wait for (0: none) */
  uint64_t submit_id; /* given by the scheduler thread */
  uint64_t submit_ns;
  uint64_t lc_first;  /* LC stream's item: lc_made of the launch that queued it */
  uint64_t raise_ticket; /* LC stream's item: the ticket of the raise before it (0: none) */
  pol_kernel_t k;
  uint64_t f;
  uint64_t graph; /* a graph exec launched as one unit (hostd_sched_launch_t) */
  hostd_sched_memset_t memset; /* a memset, when its count > 0 (hostd_sched_launch_t) */
  uint32_t nattr, argbytes;
  CUlaunchAttribute *attrs; /* into the same allocation */
  uint8_t *args;
  /* variants (SUBMIT): a reference while the item lives */
  const hostd_var_kernel_t *vk;
  uint64_t total;  /* logical blocks */
  bool ptb_live;   /* a PTB launch of it is in flight: its flight frees it */
  uint32_t flush_live; /* its FLUSH launches in flight, and its list of given-up blocks
                          kept for the redo (at most one: policy/ issues one at a time) */
  bool ranges_done;    /* every block range of it was issued; FLUSH redos may remain */
  bool orphan;     /* its tenant closed meanwhile: dropped when that launch ends */
  uint64_t pass;   /* the scheduler pass that received it (S.pass) */
  bool issued_any; /* a piece of it was issued */
  bool held;       /* its first piece was issued in a later pass than `pass` */
} item_t;

struct hostd_sched_stream {
  hostd_sched_tenant_t *t;
  uint64_t handle;  /* the tenant stream */
  uint64_t lstream; /* the launch stream (scheduler's) */
  bool part;        /* lstream is in the best-effort partition (its own events) */
  uint64_t wstream; /* part: a whole-GPU stream for what the partition cannot host, or 0 */
  struct hostd_sched_stream *next; /* tenant's list (mu) */
  /* worker side */
  uint32_t last_seq, fenced_seq;
  bool run_open;
  /* under mu: the last launch issued (or dropped), and a fence waits for it */
  uint32_t issued_seq;
  bool waiting;
  /* LC (direct) streams, invariant (d) */
  _Atomic uint64_t lc_made; /* launches made on the tenant stream (worker) */
  atomic_bool lc_busy;      /* lc_item is queued, or its flight is alive */
  item_t *lc_item;          /* the one IT_DIRECT item, allocated with the stream */
  uint64_t lc_rec;          /* worker: lc_made at its last record */
  struct hostd_sched_stream *lc_next; /* S.lc_streams (mu) */
  atomic_bool lc_pub;       /* mu (read unlocked as a hint): an event published, not taken */
  uint64_t lc_pub_ev;       /* mu: that event (0: the record failed), */
  uint64_t lc_pub_n;        /* mu: and the launches it follows */
};

struct hostd_sched_tenant {
  uint32_t id;
  int cls;
  char name[48];
  bool direct;                 /* LC launches go straight to the GPU */
  bool lc_moved;               /* worker: a direct launch since its last quiet point */
  bool kick_due;               /* worker: LC news queued without waking the thread */
  hostd_sched_stream_t *streams; /* mu */
  /* shared, under mu */
  uint64_t pending; /* launches queued (held or direct), not yet issued or dropped */
  bool closed;      /* close finished */
  CUresult err;     /* first error of an issued launch, until taken */
  /* scheduler side */
  item_t *head, *tail; /* FIFO of submissions not issued (and direct ones) */
  uint64_t inflight;
  bool closing;
  uint64_t last_submit_ns;
  uint64_t *gpu_ns;  /* device time counted here (hostd__sched_tenant_count_gpu), or NULL */
  uint64_t *n_sliced, *n_ptb, *n_flush; /* its variant launches (hostd__sched_tenant_count_forms),
                                          or NULL */
  uint64_t last_end_ns; /* its previous completion seen */
  bool whole_noted;     /* scheduler: a launch of it ran on the whole GPU, and was logged */
};

typedef struct flight {
  uint64_t launch_id;
  hostd_sched_tenant_t *t;
  uint64_t ev_start, ev_end; /* ev_start 0: not timed (an LC launch) */
  bool end_timed;            /* ev_end can be timed: with ev_start, and for a PTB or FLUSH
                                launch (its preemption turnaround, flag write -> end) */
  bool part;                 /* the events belong to the partition: destroyed, not pooled */
  uint64_t submit_ns, issue_ns, gap_ns;
  pol_kernel_t k;
  pol_form_t form;       /* as launched */
  uint64_t begin, count; /* logical blocks */
  const hostd_var_kernel_t *vk; /* a reference while a variant runs */
  hostd_sched_stream_t *lc; /* an LC stream followed (invariant (d)), or NULL */
  uint64_t lc_seen;         /* its launches ev_end follows */
  uint64_t lc_first;        /* the first launch it follows (lc_made's count) */
  bool lc_has;              /* ev_end is a publication taken and not yet seen complete */
  item_t *it;            /* PTB: the submission, which stays queued until it is whole */
  int slot;              /* PTB: control block, -1 none */
  uint64_t ev_flag;      /* PTB preempted: timed event after the flag write */
  bool held, graph;      /* the trace's held= and graph= */
  int fslot;             /* FLUSH: its control block (FL_QUIET: none that can be raised) */
  int fredo;             /* FLUSH redo: the control block whose list it reruns, -1 none */
  int arm;               /* its index among the armed flags (invariant (e)), -1 none */
  uint64_t arm_gen;      /* the generation it was armed with */
  uint64_t flag_ns;      /* when a worker raised its flag (now_fn), 0: none did */
  uint64_t turn_ns;      /* preempted: flag write -> end on the device (0: not timed) */
  struct flight *next;
} flight_t;

static struct {
  hostd_sched_config_t cfg;
  bool on;
  bool asym; /* hostd__barrier_asym(), read at init: launch_direct and lc_again pair by it */
  pol_sched_t *pol;
  pthread_t th;
  pthread_mutex_t mu;
  pthread_mutex_t polmu; /* the policy: the scheduler thread, and tenant_new */
  pthread_cond_t wake, done;
  item_t *inbox, *inbox_tail;
  bool sleeping, stop;
  uint64_t be_queued; /* mu: IT_SUBMIT items queued, not yet issued or dropped */
  hostd_sched_stream_t *lc_streams; /* mu: the LC streams alive (lc_launches_now) */
  _Atomic uint32_t nopen; /* tenants added and not yet closing (alone mode: one) */
  _Atomic uint32_t part_sms; /* SMs of the best-effort partition, once made */
  bool lc_news;     /* an LC event was published since this thread last looked (mu) */
  struct {
    uint64_t *ev; /* free events (mu): [0] untimed, [1] timed */
    size_t n, cap;
  } evpool[2];
  flight_t *flights; /* scheduler thread */
  uint64_t next_submit;
  FILE *trace;
  pthread_mutex_t namemu; /* names_done: any worker (hostd__sched_trace_kernel) */
  u64map_t names_done;    /* kernel ids whose `# kernel` line the trace has */
  u64map_t whole_ids;     /* scheduler thread: kernels the partition refused (issue_whole) */
  uint64_t pass;          /* scheduler thread: loop_once calls so far */
  hostd_sched_stats_t st;
  /* PTB (scheduler thread): control blocks, the flag stream, turnarounds */
  uint64_t ctl_dev;   /* CTL_SLOTS x 16 bytes of device memory */
  uint8_t *ctl_host;  /* CTL_SLOTS x CTL_HOST bytes, registered (pinned) */
  bool ctl_tried;
  int ctl_free[CTL_SLOTS], nctl_free;
  uint64_t hi_stream; /* highest priority: preemption flags */
  /* FLUSH (scheduler thread): control blocks, their read-backs, their lists */
  uint64_t fl_dev;    /* (FL_SLOTS + 1) x FL_STRIDE bytes of device memory */
  uint8_t *fl_host;   /* (FL_SLOTS + 1) x CTL_HOST bytes, registered: 16 staged zeros, 8 read
                         back (FL_QUIET: the zeros only) */
  bool fl_tried;
  int fl_free[FL_SLOTS], nfl_free;
  uint64_t fl_list_of[FL_SLOTS]; /* the launch whose given-up list a slot keeps, 0: none */
  item_t *fl_item[FL_SLOTS];     /* and its submission */
  /* Armed flags (invariant (e)): written by this thread, read by workers. */
  _Atomic uint64_t arm_bits[ARM_WORDS];
  _Atomic uint64_t armed[ARM_N]; /* the generation, 0: not armed */
  _Atomic uint32_t narmed;
  _Atomic uint64_t hi_pub;       /* hi_stream once made, for workers */
  _Atomic uint64_t raise_ticket; /* the last ticket a worker's raise took */
  _Atomic uint64_t ticket_heard; /* the policy heard of the LC notes up to this ticket */
  uint64_t arm_next;             /* the last generation given */
  /* mu: a worker's raise of a slot: its generation, ticket, clock and timed event */
  uint64_t early_ev[ARM_N], early_gen[ARM_N], early_ticket[ARM_N], early_ns[ARM_N];
  uint32_t turn_hist[TURN_BUCKETS + 1];
  uint64_t turn_max_ns;
  u64map_t resident; /* scheduler thread: XXH3(kernel, block, shmem) -> blocks + 1 */
  uint64_t fence_by_op[CALL_OP_COUNT + 1]; /* blocked fences by request (atomic) */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .polmu = PTHREAD_MUTEX_INITIALIZER,
       .namemu = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .done = PTHREAD_COND_INITIALIZER};

/* Armed flags (invariant (e)): defined with the preemption below. */
static void arm(flight_t *f);
static void raise_armed(uint64_t ticket);
static bool early_unheard(const flight_t *f);
static void ticket_heard(uint64_t ticket);

/* Counters are read by any thread (hostd__sched_stats). */
#define STAT_ADD(field, n) __atomic_fetch_add(&S.st.field, (n), __ATOMIC_RELEASE)

static uint64_t (*now_fn)(void) = hostd__mono_ns;

void hostd__sched_set_clock(uint64_t (*f)(void)) {
  now_fn = f ? f : hostd__mono_ns;
}

void hostd__sched_config_init(hostd_sched_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->kind = POL_KIND_TALLY;
  pol_config_init(&cfg->pol);
  cfg->var.forms = (1u << VAR_FORM_SLICE) | (1u << VAR_FORM_PTB);
  cfg->var.arch = 90;
  snprintf(cfg->var.tag, sizeof(cfg->var.tag), "sm_90");
  cfg->be_sms_hold = true;
}

/* --be-sms-hold 0: the policy stops holding BE work for the LC, so the
 * partition must exist; it is made here (once per process), not at the
 * first BE stream, and its size kept for the log lines.  0 or -EINVAL. */
static int partition_for_policy(const hostd_sched_config_t *cfg, pol_config_t *pc) {
  uint64_t probe = 0;
  uint32_t got = 0;
  CUresult r;
  if (cfg->be_sms_hold && pc->part_block_ns) {
    hostd__log(HOSTD_LOG_ERROR, "--be-sms-block-us needs --be-sms-hold 0 (it says which "
                                "best-effort kernels are still held beside the partition)");
    return -EINVAL;
  }
  if (cfg->be_sms_hold)
    return 0;
  if (cfg->be_sms == 0) {
    hostd__log(HOSTD_LOG_ERROR, "--be-sms-hold 0 needs --be-sms N (the partition that protects "
                                "the latency-critical tenant instead of holding)");
    return -EINVAL;
  }
  if (cfg->kind != POL_KIND_TALLY) {
    hostd__log(HOSTD_LOG_WARN, "--be-sms-hold 0 is for policy tally; policy %s ignores it",
               pol_kind_name(cfg->kind));
    return 0;
  }
  if ((r = hostd__gpu.thread_enter()) != CUDA_SUCCESS ||
      (r = hostd__gpu.part_stream_new(&probe, 0, cfg->be_sms, &got)) != CUDA_SUCCESS) {
    hostd__log(HOSTD_LOG_ERROR,
               "--be-sms-hold 0: the best-effort partition of %u SMs cannot be made (CUresult "
               "%d), and without it nothing would protect the latency-critical tenant; run "
               "without --be-sms-hold 0, or with another --be-sms",
               cfg->be_sms, (int)r);
    return -EINVAL;
  }
  (void)hostd__gpu.stream_del(probe);
  S.part_sms = got;
  pc->be_partitioned = true;
  return 0;
}

int hostd__sched_parse_policy(hostd_sched_config_t *cfg, const char *name) {
  if (strcmp(name, "none") == 0) {
    cfg->on = false;
    return 0;
  }
  if (pol_kind_parse(name, &cfg->kind) != 0)
    return -EINVAL;
  cfg->on = true;
  return 0;
}

uint64_t hostd__sched_kernel_id(uint64_t module_content_id, const char *name) {
  return XXH3_64bits_withSeed(name, strlen(name), module_content_id);
}

/* `# kernel 0xID NAME`, once per id: the name comes from a tenant, so only
 * [A-Za-z0-9_.$] of it is written (others as '?'), at most 200 bytes. */
void hostd__sched_trace_kernel(uint64_t kernel_id, const char *name) {
  char clean[201];
  uint64_t v;
  size_t n = 0;
  if (!S.trace) /* set before any tenant, at init: no lock on the path without --trace */
    return;
  for (; n < sizeof(clean) - 1 && name[n]; n++) {
    char c = name[n];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '$';
    clean[n] = ok ? c : '?';
  }
  clean[n] = 0;
  pthread_mutex_lock(&S.namemu);
  if (S.trace && kernel_id && n && !u64map_get(&S.names_done, kernel_id, &v) &&
      u64map_put(&S.names_done, kernel_id, 1) == 0)
    fprintf(S.trace, "# kernel 0x%016" PRIx64 " %s\n", kernel_id, clean);
  pthread_mutex_unlock(&S.namemu);
}

bool hostd__sched_running(void) {
  return __atomic_load_n(&S.on, __ATOMIC_ACQUIRE);
}

/* LC launches made so far: the live LC streams count their own (lc_made,
 * the worker's, with no shared counter on the launch path), a freed one's
 * are in S.st. */
static uint64_t lc_launches_now(void) {
  uint64_t n;
  pthread_mutex_lock(&S.mu);
  n = __atomic_load_n(&S.st.lc_launches, __ATOMIC_ACQUIRE);
  for (const hostd_sched_stream_t *ss = S.lc_streams; ss; ss = ss->lc_next)
    n += atomic_load_explicit(&ss->lc_made, memory_order_relaxed);
  pthread_mutex_unlock(&S.mu);
  return n;
}

void hostd__sched_stats(hostd_sched_stats_t *out) {
  out->submitted = __atomic_load_n(&S.st.submitted, __ATOMIC_ACQUIRE);
  out->held = __atomic_load_n(&S.st.held, __ATOMIC_ACQUIRE);
  out->issued = __atomic_load_n(&S.st.issued, __ATOMIC_ACQUIRE);
  out->timed = __atomic_load_n(&S.st.timed, __ATOMIC_ACQUIRE);
  out->dropped = __atomic_load_n(&S.st.dropped, __ATOMIC_ACQUIRE);
  out->completed = __atomic_load_n(&S.st.completed, __ATOMIC_ACQUIRE);
  out->fences = __atomic_load_n(&S.st.fences, __ATOMIC_ACQUIRE);
  out->fences_blocked = __atomic_load_n(&S.st.fences_blocked, __ATOMIC_ACQUIRE);
  out->fence_block_ns = __atomic_load_n(&S.st.fence_block_ns, __ATOMIC_ACQUIRE);
  out->sliced = __atomic_load_n(&S.st.sliced, __ATOMIC_ACQUIRE);
  out->ptb = __atomic_load_n(&S.st.ptb, __ATOMIC_ACQUIRE);
  out->preempts = __atomic_load_n(&S.st.preempts, __ATOMIC_ACQUIRE);
  out->early_raises = __atomic_load_n(&S.st.early_raises, __ATOMIC_ACQUIRE);
  out->ctl_inuse = __atomic_load_n(&S.st.ctl_inuse, __ATOMIC_ACQUIRE);
  out->turnarounds = __atomic_load_n(&S.st.turnarounds, __ATOMIC_ACQUIRE);
  out->turn_p50_ns = __atomic_load_n(&S.st.turn_p50_ns, __ATOMIC_ACQUIRE);
  out->turn_p99_ns = __atomic_load_n(&S.st.turn_p99_ns, __ATOMIC_ACQUIRE);
  out->turn_max_ns = __atomic_load_n(&S.st.turn_max_ns, __ATOMIC_ACQUIRE);
  out->lc_launches = lc_launches_now();
  out->lc_events = __atomic_load_n(&S.st.lc_events, __ATOMIC_ACQUIRE);
  out->alone = __atomic_load_n(&S.st.alone, __ATOMIC_ACQUIRE);
  out->flush = __atomic_load_n(&S.st.flush, __ATOMIC_ACQUIRE);
  out->redos = __atomic_load_n(&S.st.redos, __ATOMIC_ACQUIRE);
  out->given_up = __atomic_load_n(&S.st.given_up, __ATOMIC_ACQUIRE);
  out->fl_inuse = __atomic_load_n(&S.st.fl_inuse, __ATOMIC_ACQUIRE);
  out->whole = __atomic_load_n(&S.st.whole, __ATOMIC_ACQUIRE);
  out->whole_forms = __atomic_load_n(&S.st.whole_forms, __ATOMIC_ACQUIRE);
}

/* ---- events: a pool shared by workers and the scheduler thread ---- */

static CUresult ev_get(uint64_t *e, bool timing) {
  __typeof__(S.evpool[0]) *pool = &S.evpool[timing];
  pthread_mutex_lock(&S.mu);
  if (pool->n > 0) {
    *e = pool->ev[--pool->n];
    pthread_mutex_unlock(&S.mu);
    return CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&S.mu);
  return hostd__gpu.event_new(e, timing ? 0 : CU_EVENT_DISABLE_TIMING);
}

/* Returns an event to its pool (timed ones too: a BE launch takes two, and
 * the scheduler thread should not create and destroy them per launch). */
static void ev_put(uint64_t e, bool timing) {
  __typeof__(S.evpool[0]) *pool = &S.evpool[timing];
  if (!e)
    return;
  pthread_mutex_lock(&S.mu);
  if (pool->n == pool->cap && pool->cap < EV_POOL_MAX) {
    size_t cap = pool->cap ? pool->cap * 2 : 64;
    uint64_t *p = realloc(pool->ev, cap * sizeof(*p));
    if (p) {
      pool->ev = p;
      pool->cap = cap;
    }
  }
  if (pool->n < pool->cap) {
    pool->ev[pool->n++] = e;
    pthread_mutex_unlock(&S.mu);
    return;
  }
  pthread_mutex_unlock(&S.mu);
  (void)hostd__gpu.event_del(e);
}

/* An event to record on ss's launch stream: from its partition's context
 * when it has one (never pooled), else from the pool. */
static CUresult ev_for(const hostd_sched_stream_t *ss, uint64_t *e, bool timing) {
  if (ss->part)
    return hostd__gpu.part_event_new(e, timing ? 0 : CU_EVENT_DISABLE_TIMING);
  return ev_get(e, timing);
}

static void ev_done(bool part, uint64_t e, bool timing) {
  if (part && e)
    (void)hostd__gpu.event_del(e);
  else
    ev_put(e, timing);
}

/* ---- the inbox ---- */

/* Wakes the scheduler thread if it sleeps (S.mu held). */
static void kick_locked(void) {
  if (S.sleeping)
    pthread_cond_signal(&S.wake);
}

/* LC news (a direct item, a publication) from tenant t's worker: wakes the
 * thread at once only while a submission is queued, which the news may
 * hold or release; else the worker's next quiet point wakes it
 * (kick_due), so a request after an idle gap does not pay a wake-up (a
 * system call) between its launch and its synchronisation.  S.mu held. */
static void lc_kick_locked(hostd_sched_tenant_t *t) {
  if (S.be_queued > 0)
    kick_locked();
  else if (S.sleeping)
    t->kick_due = true;
}

/* Queues it for the scheduler thread; a launch (held or direct) also counts
 * as pending for its tenant (one lock round on the launch path). */
static void inbox_push(item_t *it) {
  pthread_mutex_lock(&S.mu);
  if (it->kind != IT_CLOSE)
    it->t->pending++;
  if (it->kind == IT_SUBMIT)
    S.be_queued++;
  it->next = NULL;
  if (S.inbox_tail)
    S.inbox_tail->next = it;
  else
    S.inbox = it;
  S.inbox_tail = it;
  if (it->kind == IT_DIRECT)
    lc_kick_locked(it->t);
  else
    kick_locked();
  pthread_mutex_unlock(&S.mu);
}

static item_t *inbox_take(void) {
  item_t *it;
  pthread_mutex_lock(&S.mu);
  it = S.inbox;
  S.inbox = S.inbox_tail = NULL;
  S.lc_news = false; /* the flights look at the publications after this */
  pthread_mutex_unlock(&S.mu);
  return it;
}

/* ---- LC streams: the worker's records (invariant (d)) ---- */

/* Worker: publishes event e as following the first n launches of LC
 * stream ss, replacing (and pooling) one the flight has not taken.  e 0:
 * those launches are done (the worker synchronised the stream, or a record
 * failed and the flight must not wait for them forever). */
static void lc_post(hostd_sched_stream_t *ss, uint64_t n, uint64_t e) {
  uint64_t old = 0;
  ss->lc_rec = n;
  pthread_mutex_lock(&S.mu);
  if (atomic_load_explicit(&ss->lc_pub, memory_order_relaxed))
    old = ss->lc_pub_ev;
  ss->lc_pub_ev = e;
  ss->lc_pub_n = n;
  atomic_store_explicit(&ss->lc_pub, true, memory_order_release);
  S.lc_news = true;
  lc_kick_locked(ss->t); /* its flight waits for this */
  pthread_mutex_unlock(&S.mu);
  ev_put(old, false);
}

/* Worker: records an event behind LC stream ss's newest launch and
 * publishes it (0 if the record failed). */
static void lc_publish(hostd_sched_stream_t *ss) {
  uint64_t n = atomic_load_explicit(&ss->lc_made, memory_order_relaxed), e = 0;
  if (ev_get(&e, false) != CUDA_SUCCESS ||
      hostd__gpu.event_record(e, ss->handle, 0) != CUDA_SUCCESS) {
    ev_put(e, false);
    e = 0;
  }
  STAT_ADD(lc_events, 1);
  lc_post(ss, n, e);
}

bool hostd__sched_tenant_quiet_due(const hostd_sched_tenant_t *t) {
  return t && (t->lc_moved || t->kick_due);
}

void hostd__sched_tenant_quiet(hostd_sched_tenant_t *t) {
  if (!t)
    return;
  if (t->lc_moved) {
    t->lc_moved = false;
    for (hostd_sched_stream_t *ss = t->streams; ss; ss = ss->next) /* the worker writes it */
      if (ss->lc_item && atomic_load_explicit(&ss->lc_made, memory_order_relaxed) != ss->lc_rec)
        lc_publish(ss);
  }
  if (t->kick_due) {
    t->kick_due = false;
    pthread_mutex_lock(&S.mu);
    kick_locked();
    pthread_mutex_unlock(&S.mu);
  }
}

/* ---- tenants and streams (worker side) ---- */

hostd_sched_tenant_t *hostd__sched_tenant_new(uint32_t id, const char *name, int cls,
                                              uint32_t weight) {
  hostd_sched_tenant_t *t;
  int rc;
  if (!S.on)
    return NULL;
  t = calloc(1, sizeof(*t));
  if (!t)
    return NULL;
  t->id = id;
  t->cls = cls;
  /* Only time-slicing holds the LC tenant's kernels (policy/README.md). */
  t->direct = cls == 0 && S.cfg.kind != POL_KIND_TIMESLICE;
  snprintf(t->name, sizeof(t->name), "%s", name && *name ? name : "tenant");
  for (char *c = t->name; *c; c++) /* a trace field: [A-Za-z0-9._-] */
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '.' || *c == '_' || *c == '-'))
      *c = '_';
  pthread_mutex_lock(&S.polmu);
  rc = pol_sched_tenant_add(S.pol, id, cls == 0 ? POL_CLASS_LC : POL_CLASS_BE, weight);
  pthread_mutex_unlock(&S.polmu);
  if (rc < 0) {
    hostd__log(HOSTD_LOG_WARN,
               "tenant %" PRIu32 ": the scheduler refused it (%s); its launches go straight to the "
               "GPU",
               id, rc == -EINVAL ? "a second latency-critical tenant" : strerror(-rc));
    free(t);
    return NULL;
  }
  atomic_fetch_add_explicit(&S.nopen, 1, memory_order_relaxed);
  return t;
}

void hostd__sched_tenant_count_gpu(hostd_sched_tenant_t *t, uint64_t *gpu_ns) {
  if (t)
    t->gpu_ns = gpu_ns; /* before its first launch: the scheduler thread reads it after */
}

void hostd__sched_tenant_count_forms(hostd_sched_tenant_t *t, uint64_t *sliced, uint64_t *ptb,
                                     uint64_t *flush) {
  if (t) { /* before its first launch, as count_gpu */
    t->n_sliced = sliced;
    t->n_ptb = ptb;
    t->n_flush = flush;
  }
}

hostd_sched_stream_t *hostd__sched_stream_new(hostd_sched_tenant_t *t, uint64_t stream,
                                              CUresult *r) {
  hostd_sched_stream_t *ss = calloc(1, sizeof(*ss));
  *r = CUDA_SUCCESS;
  if (!ss) {
    *r = CUDA_ERROR_OUT_OF_MEMORY;
    return NULL;
  }
  /* The launch stream has the tenant class's priority, as the tenant's own;
   * a BE one lives in the best-effort partition when there is one. */
  if (t->cls == 1 && S.cfg.be_sms > 0) {
    uint32_t got = 0;
    CUresult pr = hostd__gpu.part_stream_new(&ss->lstream, 0, S.cfg.be_sms, &got);
    ss->part = pr == CUDA_SUCCESS;
    if (ss->part) {
      S.part_sms = got;
    } else if (S.cfg.pol.be_partitioned) { /* unheld work must not leave the partition */
      free(ss);
      *r = pr;
      return NULL;
    }
  }
  if (t->direct && !(ss->lc_item = calloc(1, sizeof(item_t)))) {
    free(ss);
    *r = CUDA_ERROR_OUT_OF_MEMORY;
    return NULL;
  }
  if (!ss->part)
    *r = hostd__gpu.stream_new(&ss->lstream, CU_STREAM_NON_BLOCKING, t->cls == 0 ? -5 : 0);
  if (*r != CUDA_SUCCESS) {
    free(ss->lc_item);
    free(ss);
    return NULL;
  }
  ss->t = t;
  ss->handle = stream;
  if (ss->lc_item) {
    ss->lc_item->kind = IT_DIRECT;
    ss->lc_item->t = t;
    ss->lc_item->ss = ss;
  }
  pthread_mutex_lock(&S.mu);
  ss->next = t->streams;
  t->streams = ss;
  if (ss->lc_item) {
    ss->lc_next = S.lc_streams;
    S.lc_streams = ss;
  }
  pthread_mutex_unlock(&S.mu);
  return ss;
}

void hostd__sched_stream_free(hostd_sched_stream_t *ss) {
  hostd_sched_tenant_t *t;
  if (!ss)
    return;
  t = ss->t;
  pthread_mutex_lock(&S.mu);
  for (hostd_sched_stream_t **p = &t->streams; *p; p = &(*p)->next)
    if (*p == ss) {
      *p = ss->next;
      break;
    }
  for (hostd_sched_stream_t **p = &S.lc_streams; ss->lc_item && *p; p = &(*p)->lc_next)
    if (*p == ss) { /* its launches stay counted (lc_launches_now) */
      *p = ss->lc_next;
      STAT_ADD(lc_launches, atomic_load_explicit(&ss->lc_made, memory_order_relaxed));
      break;
    }
  pthread_mutex_unlock(&S.mu);
  if (ss->lc_item) { /* invariant (d): a last record for the flight, then it lets go */
    uint64_t left;
    if (atomic_load_explicit(&ss->lc_made, memory_order_relaxed) != ss->lc_rec)
      lc_publish(ss);
    pthread_mutex_lock(&S.mu);
    kick_locked(); /* its item or flight may wait for the thread */
    while (atomic_load_explicit(&ss->lc_busy, memory_order_acquire))
      pthread_cond_wait(&S.done, &S.mu);
    left = atomic_load_explicit(&ss->lc_pub, memory_order_relaxed) ? ss->lc_pub_ev : 0;
    pthread_mutex_unlock(&S.mu);
    ev_put(left, false);
  }
  (void)hostd__gpu.stream_sync(ss->lstream);
  (void)hostd__gpu.stream_del(ss->lstream);
  if (ss->wstream) { /* its work is behind the launch stream's end */
    (void)hostd__gpu.stream_sync(ss->wstream);
    (void)hostd__gpu.stream_del(ss->wstream);
  }
  free(ss->lc_item);
  free(ss);
}

/* ---- launches and fences (worker side) ---- */

static item_t *item_new(item_kind_t kind, hostd_sched_stream_t *ss, size_t extra) {
  item_t *it = calloc(1, sizeof(*it) + extra);
  if (it) {
    it->kind = kind;
    it->ss = ss;
    it->t = ss ? ss->t : NULL;
  }
  return it;
}

static void kernel_of(const hostd_sched_launch_t *l, pol_kernel_t *k) {
  memset(k, 0, sizeof(*k));
  k->kernel_id = l->kernel_id;
  memcpy(k->grid, l->grid, sizeof(k->grid));
  memcpy(k->block, l->block, sizeof(k->block));
  k->shmem_bytes = l->shmem;
  k->variants = POL_VAR_ORIGINAL;
}

/* Whether the variant fn can run blocks of the launch's shape where the
 * original can: the transform adds registers and a little static shared
 * memory, so a block of the original's maximum size, or dynamic shared
 * memory up to the device's limit, may not fit the variant.  Attributes
 * the driver does not give (0) do not limit. */
static bool variant_fits(const hostd_var_fn_t *fn, const hostd_sched_launch_t *l) {
  int max_threads = 0, static_shmem = 0;
  uint64_t threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
  int optin = hostd__snapshot.attr[CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN];
  if (hostd__gpu.func_attr(fn->f, 0, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &max_threads) !=
          CUDA_SUCCESS ||
      hostd__gpu.func_attr(fn->f, 0, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &static_shmem) !=
          CUDA_SUCCESS)
    return false;
  if (max_threads > 0 && threads > (uint64_t)max_threads)
    return false;
  return optin <= 0 || (uint64_t)static_shmem + l->shmem <= (uint64_t)optin;
}

/* The variants a queued launch may use (variants.h), with a reference in
 * it->vk, or none: launch attributes (a completion event, clusters,
 * cooperative) and grids of no block or of 2^31 blocks or more keep the
 * original (whose launch fails or succeeds as natively), as does an
 * argument buffer that reaches into the appended parameters.  A form whose
 * variant cannot take the launch's block size or shared memory is not
 * offered (and PTB only with the sliced form, which resumes it). */
static void variants_of(item_t *it, const hostd_sched_launch_t *l) {
  unsigned forms = 0;
  const hostd_var_kernel_t *vk;
  it->total = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
  if (l->nattr != 0 || it->total == 0 || it->total > INT32_MAX ||
      !(vk = hostd__var_get(l->kernel_id, &forms)))
    return;
  for (int form = 0; form < VAR_FORMS; form++)
    if (vk->fn[form].f && (l->argbytes > vk->fn[form].first_extra ||
                           vk->fn[form].args_end > CALL_LAUNCH_ARGS_MAX + 64))
      forms = 0;
  /* The sliced variant also resumes a preempted PTB launch (--variants ptb too). */
  if ((forms & ((1u << VAR_FORM_SLICE) | (1u << VAR_FORM_PTB))) &&
      !variant_fits(&vk->fn[VAR_FORM_SLICE], l))
    forms &= ~((1u << VAR_FORM_SLICE) | (1u << VAR_FORM_PTB));
  for (int form = VAR_FORM_PTB; form < VAR_FORMS; form++)
    if ((forms & (1u << form)) && !variant_fits(&vk->fn[form], l))
      forms &= ~(1u << form);
  if (!forms) {
    hostd__var_put(vk);
    return;
  }
  it->vk = vk;
  if (forms & (1u << VAR_FORM_SLICE))
    it->k.variants |= POL_VAR_SLICED;
  if (forms & (1u << VAR_FORM_PTB))
    it->k.variants |= POL_VAR_PTB;
  if (forms & (1u << VAR_FORM_FLUSH))
    it->k.variants |= POL_VAR_FLUSH;
}

/* A submission that runs as one unit (hostd_sched_launch_t): a graph
 * replay, or else a memset, on stream s. */
static CUresult unit_launch(uint64_t graph, const hostd_sched_memset_t *m, uint64_t s) {
  return graph ? hostd__gpu.graph_launch(graph, s, 0)
               : hostd__gpu.memset(m->dst, m->value, m->elem, m->count, s);
}

/* Launch l as the tenant asked, on stream s (the tenant's own). */
static CUresult launch_on(const hostd_sched_launch_t *l, uint64_t s) {
  return (l->graph || l->memset.count)
             ? unit_launch(l->graph, &l->memset, s)
             : hostd__gpu.launch(l->f, l->grid, l->block, l->shmem, s, l->attrs, l->nattr,
                                 (void *)l->args, l->argbytes);
}

/* The LC fast path: launch now, then tell the scheduler only when it does
 * not follow this stream already (invariant (d)): the first launch of a
 * burst queues the stream's item and wakes the scheduler, the others cost
 * a store of lc_made and a load of lc_busy (a locked addition and a load
 * without the asymmetric barrier, barrier.c).  No event: the
 * worker records at quiet points.  Nothing else here writes a line another
 * thread reads: a locked instruction right after a driver launch cost the
 * chain several times its own price on the H200 (tests/bench/launch-ways),
 * so the counters are the stream's own (lc_launches_now). */
static CUresult launch_direct(hostd_sched_stream_t *ss, const hostd_sched_launch_t *l) {
  item_t *it = ss->lc_item;
  uint64_t n;
  CUresult r;
  uint64_t ticket = 0;
  /* Invariant (e): a burst's first launch finds the SMs on their way back. */
  if (atomic_load_explicit(&S.narmed, memory_order_acquire) &&
      !atomic_load_explicit(&ss->lc_busy, memory_order_acquire)) {
    ticket = atomic_fetch_add_explicit(&S.raise_ticket, 1, memory_order_acq_rel) + 1;
    raise_armed(ticket);
  }
  r = launch_on(l, ss->handle);
  if (r == CUDA_SUCCESS) {
    if (!ss->t->lc_moved)
      ss->t->lc_moved = true;
    /* The count and the load below against lc_again's store of lc_busy and
     * load of lc_made: either this load sees lc_busy cleared, or lc_again
     * sees this launch and goes on.  With an asymmetric barrier (barrier.c)
     * the worker, lc_made's one writer, stores the count plainly and
     * lc_again's heavy barrier orders the pair; else both are sequentially
     * consistent (a locked addition here). */
    bool busy;
    if (S.asym) {
      n = atomic_load_explicit(&ss->lc_made, memory_order_relaxed) + 1;
      atomic_store_explicit(&ss->lc_made, n, memory_order_relaxed);
      hostd__barrier_light();
      busy = atomic_load_explicit(&ss->lc_busy, memory_order_relaxed);
    } else {
      n = atomic_fetch_add_explicit(&ss->lc_made, 1, memory_order_seq_cst) + 1;
      busy = atomic_load_explicit(&ss->lc_busy, memory_order_seq_cst);
    }
    if (!busy && !atomic_exchange_explicit(&ss->lc_busy, true, memory_order_acq_rel)) {
      it->lc_first = n;
      it->raise_ticket = ticket;
      kernel_of(l, &it->k);
      it->submit_id = 0;
      it->submit_ns = now_fn();
      inbox_push(it);
      return CUDA_SUCCESS;
    }
  }
  if (ticket) /* no note follows this raise: nothing to wait for */
    ticket_heard(ticket);
  return r;
}

/* ALONE MODE: a best-effort tenant that is the only tenant of the daemon
 * launches on its own stream, as under --policy none: the policy protects
 * a latency-critical tenant and shares best-effort time by weight, and with
 * no other tenant there is nothing to protect or share, while every held
 * launch would cost a hand-off to this thread and every fence a wait for
 * it.  Launches queued before are fenced first (stream order); from the
 * next queued launch on, invariant (c) orders the queue after these (the
 * run is closed here).  What it gives up: a tenant that connects meanwhile
 * may find the alone tenant's launches on the GPU, which the policy did not
 * see (bounded by what the alone tenant had queued on the GPU then); their
 * device time is not counted, and nothing is profiled.  Off with a trace
 * (which must see every kernel) and when cfg->be_alone is false
 * (docs/decisions.md, D10). */
static bool alone(const hostd_sched_stream_t *ss) {
  return S.cfg.be_alone && !S.trace && !ss->t->direct &&
         atomic_load_explicit(&S.nopen, memory_order_relaxed) == 1;
}

static CUresult launch_alone(hostd_sched_stream_t *ss, const hostd_sched_launch_t *l) {
  CUresult r;
  if (ss->last_seq != ss->fenced_seq && (r = hostd__sched_fence(ss)) != CUDA_SUCCESS)
    return r;
  if ((r = launch_on(l, ss->handle)) == CUDA_SUCCESS) {
    ss->run_open = false;
    STAT_ADD(alone, 1);
  }
  return r;
}

CUresult hostd__sched_launch(hostd_sched_stream_t *ss, const hostd_sched_launch_t *l) {
  size_t abytes = (size_t)l->nattr * sizeof(CUlaunchAttribute);
  pol_kernel_t k;
  item_t *it;
  CUresult r;
  if (ss->t->direct)
    return launch_direct(ss, l);
  if (alone(ss))
    return launch_alone(ss, l);
  /* A shape the policy refuses (no block to run, more than 1024 threads a
   * block): the driver refuses it at once, and a submission policy/ refused
   * would never be issued, so the tenant hears it here. */
  kernel_of(l, &k);
  if (pol_kernel_check(&k) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(it = item_new(IT_SUBMIT, ss, abytes + l->argbytes)))
    return CUDA_ERROR_OUT_OF_MEMORY;
  if (!ss->run_open) {
    /* Invariant (c): the run's first launch waits for the stream's past. */
    if ((r = ev_get(&it->run_event, false)) != CUDA_SUCCESS ||
        (r = hostd__gpu.event_record(it->run_event, ss->handle, 0)) != CUDA_SUCCESS) {
      ev_put(it->run_event, false);
      free(it);
      return r;
    }
    ss->run_open = true;
  }
  it->k = k;
  if (l->graph || l->memset.count)
    it->total = 1; /* one unit, in its original form */
  else
    variants_of(it, l);
  it->f = l->f;
  it->graph = l->graph;
  it->memset = l->memset;
  it->nattr = l->nattr;
  it->argbytes = l->argbytes;
  it->attrs = (CUlaunchAttribute *)(it + 1);
  it->args = (uint8_t *)(it + 1) + abytes;
  if (abytes)
    memcpy(it->attrs, l->attrs, abytes);
  if (l->argbytes)
    memcpy(it->args, l->args, l->argbytes);
  it->seq = ++ss->last_seq;
  it->submit_ns = now_fn();
  inbox_push(it);
  return CUDA_SUCCESS;
}

static bool seq_ge(uint32_t a, uint32_t b) {
  return (int32_t)(a - b) >= 0;
}

bool hostd__sched_direct(const hostd_sched_stream_t *ss) {
  return ss && ss->lc_item;
}

CUresult hostd__sched_fence(hostd_sched_stream_t *ss) {
  uint64_t e = 0;
  CUresult r;
  if (ss && ss->lc_item) { /* a quiet point of an LC stream (invariant (d)) */
    if (atomic_load_explicit(&ss->lc_made, memory_order_relaxed) != ss->lc_rec)
      lc_publish(ss);
    return CUDA_SUCCESS;
  }
  if (!ss || ss->last_seq == ss->fenced_seq)
    return CUDA_SUCCESS;
  /* Invariant (b): wait until the scheduler issued the last launch. */
  pthread_mutex_lock(&S.mu);
  if (!seq_ge(ss->issued_seq, ss->last_seq)) {
    uint64_t t0 = hostd__mono_ns();
    ss->waiting = true;
    while (!seq_ge(ss->issued_seq, ss->last_seq))
      pthread_cond_wait(&S.done, &S.mu);
    ss->waiting = false;
    STAT_ADD(fences_blocked, 1);
    STAT_ADD(fence_block_ns, hostd__mono_ns() - t0);
    __atomic_fetch_add(&S.fence_by_op[hostd__cur_op <= CALL_OP_COUNT ? hostd__cur_op
                                                                      : CALL_OP_COUNT],
                       1, __ATOMIC_RELAXED);
  }
  STAT_ADD(fences, 1);
  pthread_mutex_unlock(&S.mu);
  if ((r = ev_for(ss, &e, false)) != CUDA_SUCCESS)
    return r;
  r = hostd__gpu.event_record(e, ss->lstream, 0);
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.stream_wait(ss->handle, e, 0);
  ev_done(ss->part, e, false);
  if (r == CUDA_SUCCESS) {
    ss->fenced_seq = ss->last_seq;
    ss->run_open = false;
  }
  return r;
}

CUresult hostd__sched_fence_sync(hostd_sched_stream_t *ss) {
  if (ss && ss->lc_item)
    return CUDA_SUCCESS; /* no record: hostd__sched_synced follows the wait */
  return hostd__sched_fence(ss);
}

void hostd__sched_synced(hostd_sched_stream_t *ss) {
  uint64_t n;
  if (!ss || !ss->lc_item)
    return;
  n = atomic_load_explicit(&ss->lc_made, memory_order_relaxed);
  if (n != ss->lc_rec)
    lc_post(ss, n, 0); /* done: the flight needs no event */
}

CUresult hostd__sched_tenant_flush(hostd_sched_tenant_t *t) {
  if (!t)
    return CUDA_SUCCESS;
  /* LC launches were made already and nothing of the scheduler's lands on
   * their streams (invariant (d)): only held launches and queued items. */
  pthread_mutex_lock(&S.mu);
  if (t->pending > 0)
    kick_locked(); /* an LC item may wait for the thread */
  while (t->pending > 0)
    pthread_cond_wait(&S.done, &S.mu);
  pthread_mutex_unlock(&S.mu);
  return hostd__sched_take_error(t);
}

CUresult hostd__sched_take_error(hostd_sched_tenant_t *t) {
  CUresult r;
  if (!t)
    return CUDA_SUCCESS;
  pthread_mutex_lock(&S.mu);
  r = t->err;
  t->err = CUDA_SUCCESS;
  pthread_mutex_unlock(&S.mu);
  return r;
}

void hostd__sched_tenant_close(hostd_sched_tenant_t *t) {
  item_t *it;
  if (!t)
    return;
  atomic_fetch_sub_explicit(&S.nopen, 1, memory_order_relaxed);
  if (!(it = item_new(IT_CLOSE, NULL, 0))) {
    /* No memory for the message: wait for the queue to drain instead. */
    (void)hostd__sched_tenant_flush(t);
    return;
  }
  it->t = t;
  inbox_push(it);
  pthread_mutex_lock(&S.mu);
  while (!t->closed)
    pthread_cond_wait(&S.done, &S.mu);
  pthread_mutex_unlock(&S.mu);
}

void hostd__sched_tenant_free(hostd_sched_tenant_t *t) {
  if (!t)
    return;
  while (t->streams)
    hostd__sched_stream_free(t->streams);
  free(t);
}

/* ---- the scheduler thread ---- */

/* A launch left the queue, issued or dropped: fences waiting for it and
 * flushes waiting for the tenant's queue go on.  A direct (LC) item counts
 * as pending until the scheduler took it. */
static void settle(const item_t *it) {
  pthread_mutex_lock(&S.mu);
  if (it->kind == IT_SUBMIT) {
    it->ss->issued_seq = it->seq;
    S.be_queued--;
  }
  if (--it->t->pending == 0 || it->ss->waiting)
    pthread_cond_broadcast(&S.done);
  pthread_mutex_unlock(&S.mu);
}

/* Nothing follows LC stream ss any more: its next launch queues its item. */
static void lc_end(hostd_sched_stream_t *ss) {
  pthread_mutex_lock(&S.mu);
  atomic_store_explicit(&ss->lc_busy, false, memory_order_release);
  pthread_cond_broadcast(&S.done);
  pthread_mutex_unlock(&S.mu);
}

/* A queued item of a closing tenant: never run. */
static void drop(item_t *it) {
  ev_put(it->run_event, false);
  hostd__var_put(it->vk);
  if (it->kind == IT_SUBMIT) {
    STAT_ADD(dropped, 1);
    settle(it);
    free(it);
    return;
  }
  /* An LC stream's item: no flight will follow it (invariant (d)). */
  settle(it);
  lc_end(it->ss);
}

static void fifo_push(hostd_sched_tenant_t *t, item_t *it) {
  it->next = NULL;
  if (t->tail)
    t->tail->next = it;
  else
    t->head = it;
  t->tail = it;
}

/* What a queued unit is, in words. */
static const char *unit_of(uint64_t graph, uint64_t memset_count) {
  return graph ? "a CUDA graph launch" : memset_count ? "a memset" : "a launch";
}

/* What was launched, for a log line: a kernel's id and shape when k names
 * one, else unit ("a memset", "a graph"). */
static void describe(char *what, size_t n, const char *unit, const pol_kernel_t *k) {
  if (k && k->kernel_id)
    snprintf(what, n,
             "a launch of kernel %016" PRIx64 " (grid %" PRIu32 ",%" PRIu32 ",%" PRIu32
             ", block %" PRIu32 ",%" PRIu32 ",%" PRIu32 ", %" PRIu32 " bytes of shared memory)",
             k->kernel_id, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
             k->block[2], k->shmem_bytes);
  else
    snprintf(what, n, "%s", unit);
}

/* A launch the scheduler made for tenant t failed, at the call or seen when
 * it ended (when): the tenant's next synchronising call returns r.  The
 * tenant's first such failure is a warning that names what was launched
 * (unit; k for a kernel, when known) and where, so that a kernel the driver
 * refuses (on the best-effort partition, say) is named without --log-level
 * debug; later ones are debug lines. */
static void set_error(hostd_sched_tenant_t *t, CUresult r, const char *unit,
                      const pol_kernel_t *k, bool part, const char *when) {
  const char *name = hostd__gpu.error_name(r);
  char what[160];
  bool first;
  pthread_mutex_lock(&S.mu);
  first = t->err == CUDA_SUCCESS;
  if (first)
    t->err = r;
  pthread_mutex_unlock(&S.mu);
  describe(what, sizeof(what), unit, k);
  hostd__log(first ? HOSTD_LOG_WARN : HOSTD_LOG_DEBUG,
             "tenant %" PRIu32 ": %s%s failed %s: %s (%d); its next synchronising call returns "
             "it",
             t->id, what, part ? " on the best-effort partition" : "", when,
             name ? name : "CUresult", (int)r);
}

static int feed(const pol_event_t *ev) {
  int rc = pol_sched_event(S.pol, ev);
  if (rc < 0)
    hostd__log(HOSTD_LOG_WARN, "scheduler: policy refused event %d: %s", (int)ev->type,
               strerror(-rc));
  return rc;
}

/* Tenants the scheduler thread has seen an item from, by policy id. */
static hostd_sched_tenant_t *known[POL_MAX_TENANTS];

static hostd_sched_tenant_t *tenant_of(uint32_t id) {
  for (int i = 0; i < POL_MAX_TENANTS; i++)
    if (known[i] && known[i]->id == id)
      return known[i];
  return NULL;
}

static void tenant_know(hostd_sched_tenant_t *t) {
  int free_i = -1;
  for (int i = 0; i < POL_MAX_TENANTS; i++) {
    if (known[i] == t)
      return;
    if (!known[i] && free_i < 0)
      free_i = i;
  }
  if (free_i >= 0) /* policy/ holds at most POL_MAX_TENANTS, so there is room */
    known[free_i] = t;
}

static void tenant_forget(hostd_sched_tenant_t *t) {
  for (int i = 0; i < POL_MAX_TENANTS; i++)
    if (known[i] == t)
      known[i] = NULL;
}

/* Blocks of it's kernel the whole GPU holds at once: the driver's occupancy
 * for its block size and dynamic shared memory, times the SMs.  The policy's
 * waves, single-wave slices and PTB worker counts follow from it; without it
 * the policy assumes one block per SM, which leaves most of the GPU idle for
 * a sliced kernel of small blocks.  Cached per shape (the driver call costs
 * about a launch); 0 (unknown) when the driver cannot say. */
static uint32_t resident_of(const item_t *it) {
  const pol_kernel_t *k = &it->k;
  uint64_t shape[3] = {k->kernel_id,
                       (uint64_t)k->block[0] * k->block[1] * k->block[2], k->shmem_bytes};
  uint64_t key = XXH3_64bits(shape, sizeof(shape)) | 1, v;
  int sms = hostd__snapshot.attr[CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT], per_sm = 0;
  CUlaunchConfig c;
  if (u64map_get(&S.resident, key, &v))
    return (uint32_t)(v - 1);
  memset(&c, 0, sizeof(c));
  c.blockDimX = k->block[0];
  c.blockDimY = k->block[1];
  c.blockDimZ = k->block[2];
  c.sharedMemBytes = k->shmem_bytes;
  v = hostd__gpu.occupancy(it->f, 0, HOSTD_OCC_BLOCKS_PER_SM, &c, &per_sm) == CUDA_SUCCESS &&
              per_sm > 0 && sms > 0
          ? (uint64_t)per_sm * (uint64_t)sms
          : 0;
  if (v > UINT32_MAX)
    v = 0;
  (void)u64map_put(&S.resident, key, v + 1); /* no memory: asked again next time */
  return (uint32_t)v;
}

static void item_done(item_t *it);

/* A submission the policy refused as malformed (it keeps nothing of it;
 * hostd__sched_launch checks shapes first, so this is a safety net): never
 * issued, it completes with an error for the tenant, and the launch stream
 * still waits for the run's past (invariant (c)) for the launches after it. */
static void refused(item_t *it) {
  hostd_sched_stream_t *ss = it->ss;
  if (it->run_event) {
    (void)hostd__gpu.stream_wait(ss->lstream, it->run_event, 0);
    ev_put(it->run_event, false);
    it->run_event = 0;
  }
  set_error(it->t, CUDA_ERROR_INVALID_VALUE, unit_of(it->graph, it->memset.count),
            it->graph || it->memset.count ? NULL : &it->k, ss->part,
            "before it was issued (the policy refused it)");
  item_done(it);
}

static void on_submit(item_t *it, uint64_t now) {
  hostd_sched_tenant_t *t = it->t;
  pol_event_t ev = {.type = POL_EV_SUBMIT, .now_ns = now, .tenant = t->id};
  uint64_t v;
  if (t->closing) {
    drop(it);
    return;
  }
  tenant_know(t);
  if (it->kind == IT_SUBMIT)
    it->k.resident_blocks = resident_of(it);
  it->submit_id = ++S.next_submit;
  it->pass = S.pass;
  ev.submit_id = it->submit_id;
  ev.kernel = it->k;
  if (it->ss->part && !it->graph && !it->memset.count && it->k.kernel_id &&
      u64map_get(&S.whole_ids, it->k.kernel_id, &v))
    ev.kernel.variants |= POL_VAR_WHOLE_GPU; /* issue_whole: outside the partition */
  fifo_push(t, it);
  STAT_ADD(submitted, 1);
  if (it->kind == IT_SUBMIT)
    STAT_ADD(held, 1);
  if (feed(&ev) == -EINVAL && it->kind == IT_SUBMIT)
    refused(it);
}

/* Finds submission id of t (the FIFO's head in practice); unlink: take it off. */
static item_t *fifo_find(hostd_sched_tenant_t *t, uint64_t id, bool unlink) {
  item_t *prev = NULL;
  for (item_t *it = t->head; it; prev = it, it = it->next) {
    if (it->submit_id != id)
      continue;
    if (!unlink)
      return it;
    if (prev)
      prev->next = it->next;
    else
      t->head = it->next;
    if (t->tail == it)
      t->tail = prev;
    return it;
  }
  return NULL;
}

static void fifo_unlink(item_t *it) {
  (void)fifo_find(it->t, it->submit_id, true);
}

/* One launch of a submission: what issue_queued hands to flight_add. */
typedef struct issued {
  uint64_t ev_start, ev_end;
  bool end_timed; /* flight_t's */
  pol_form_t form;
  int slot;
  int fslot, fredo; /* FLUSH: plan_t's */
} issued_t;

static flight_t *flight_add(item_t *it, const pol_action_t *a, const issued_t *is,
                            uint64_t now, bool part) {
  flight_t *f = calloc(1, sizeof(*f));
  if (!f) {
    /* Nobody will see it complete: tell the policy now, untimed. */
    pol_event_t ev = {.type = POL_EV_COMPLETED, .now_ns = now, .launch_id = a->launch_id,
                      .dev_start_ns = now, .dev_end_ns = now, .blocks_done = a->block_count};
    ev_done(part, is->ev_start, true);
    ev_done(part, is->ev_end, is->end_timed);
    feed(&ev);
    return NULL;
  }
  f->part = part;
  f->launch_id = a->launch_id;
  f->t = it->t;
  f->ev_start = is->ev_start;
  f->ev_end = is->ev_end;
  f->end_timed = is->end_timed;
  f->submit_ns = it->submit_ns;
  f->issue_ns = now;
  f->gap_ns = it->submit_ns > it->t->last_submit_ns && it->t->last_submit_ns
                  ? it->submit_ns - it->t->last_submit_ns
                  : 0;
  it->t->last_submit_ns = it->submit_ns;
  f->k = it->k;
  f->form = is->form;
  if (!it->issued_any) {
    it->issued_any = true;
    it->held = it->kind == IT_SUBMIT && it->pass != S.pass; /* a direct one ran already */
  }
  f->held = it->held;
  f->graph = it->graph != 0;
  f->begin = a->block_begin;
  f->count = a->block_count;
  f->slot = is->slot;
  f->fslot = is->fslot;
  f->fredo = is->fredo;
  arm(f);
  if (is->form != POL_FORM_ORIGINAL && it->vk) {
    f->vk = it->vk;
    hostd__var_hold(f->vk);
  }
  if (is->form == POL_FORM_PTB) {
    f->it = it;
    it->ptb_live = true;
  } else if (is->form == POL_FORM_FLUSH) {
    f->it = it;
    it->flush_live++;
  }
  f->next = S.flights;
  S.flights = f;
  it->t->inflight++;
  return f;
}

/* Flight f takes the newest event its worker published (invariant (d)),
 * pooling the one it held. */
static void lc_take(flight_t *f) {
  hostd_sched_stream_t *ss = f->lc;
  uint64_t old = 0;
  if (!atomic_load_explicit(&ss->lc_pub, memory_order_acquire))
    return;
  pthread_mutex_lock(&S.mu);
  if (atomic_load_explicit(&ss->lc_pub, memory_order_relaxed)) {
    old = f->ev_end;
    f->ev_end = ss->lc_pub_ev;
    f->lc_seen = ss->lc_pub_n;
    f->lc_has = true;
    atomic_store_explicit(&ss->lc_pub, false, memory_order_relaxed);
  }
  pthread_mutex_unlock(&S.mu);
  ev_put(old, false);
}

/* A flight of LC launches whose event completed (r), or whose tenant
 * closes before any was published: true when launches came since (it
 * waits for their publication); false when it ends, lc_busy cleared
 * (after which the stream may be freed: not touched again). */
static bool lc_again(flight_t *f, CUresult r) {
  hostd_sched_stream_t *ss = f->lc;
  bool on = r == CUDA_SUCCESS && !f->t->closing, more;
  pthread_mutex_lock(&S.mu);
  more = on && atomic_load_explicit(&ss->lc_made, memory_order_acquire) != f->lc_seen;
  if (!more) {
    atomic_store_explicit(&ss->lc_busy, false, memory_order_seq_cst);
    if (S.asym)
      hostd__barrier_heavy(); /* the worker's half has none (launch_direct) */
    /* A launch between the load and the store found lc_busy set and queued
     * nothing: take it back unless its worker queued the item meanwhile. */
    more = on && atomic_load_explicit(&ss->lc_made, memory_order_seq_cst) != f->lc_seen &&
           !atomic_exchange_explicit(&ss->lc_busy, true, memory_order_acq_rel);
  }
  if (!more)
    pthread_cond_broadcast(&S.done);
  pthread_mutex_unlock(&S.mu);
  return more;
}

/* Polls LC flight f: false while it goes on (no publication yet, its event
 * not complete, or launches since); true when it ends, with the event's
 * result in *r.  Its event is pooled once seen complete. */
static bool lc_done(flight_t *f, CUresult *r) {
  lc_take(f);
  if (!f->lc_has && !f->t->closing)
    return false; /* the worker publishes at its next quiet point */
  *r = f->ev_end ? hostd__gpu.event_query(f->ev_end) : CUDA_SUCCESS;
  if (*r == CUDA_ERROR_NOT_READY)
    return false;
  ev_put(f->ev_end, false);
  f->ev_end = 0;
  f->lc_has = false;
  return !lc_again(f, *r);
}

/* LC launches made by the worker (invariant (d)): the flight follows their
 * stream through the events its worker publishes; nothing is recorded here. */
static void issue_direct(item_t *it, const pol_action_t *a, uint64_t now) {
  issued_t is = {.form = POL_FORM_ORIGINAL, .slot = -1, .fslot = -1, .fredo = -1};
  flight_t *f;
  settle(it);
  if ((f = flight_add(it, a, &is, now, false))) {
    f->lc = it->ss;
    f->lc_first = it->lc_first;
  } else /* no memory: nothing follows the stream */
    lc_end(it->ss);
}

/* ---- PTB control blocks: a pool owned by this thread ---- */

/* A control-block pool's memory: hbytes of zeroed, registered (pinned) host
 * memory and dbytes of device memory.  0; -ENOMEM without host memory;
 * -EIO when registration or the device allocation failed (nothing kept). */
static int pinned_new(uint8_t **host, size_t hbytes, uint64_t *dev, uint64_t dbytes) {
  hbytes = (hbytes + 63) & ~(size_t)63; /* aligned_alloc: a multiple of the alignment */
  *dev = 0;
  if (!(*host = aligned_alloc(64, hbytes)))
    return -ENOMEM;
  memset(*host, 0, hbytes);
  if (hostd__gpu.host_register(*host, hbytes) == CUDA_SUCCESS &&
      hostd__gpu.mem_alloc(dev, dbytes) == CUDA_SUCCESS)
    return 0;
  (void)hostd__gpu.host_unregister(*host);
  free(*host);
  *host = NULL;
  *dev = 0;
  return -EIO;
}

static void pinned_free(uint8_t **host, uint64_t *dev) {
  if (*dev)
    (void)hostd__gpu.mem_free(*dev);
  if (*host) {
    (void)hostd__gpu.host_unregister(*host);
    free(*host);
  }
  *host = NULL;
  *dev = 0;
}

/* Made at the first PTB launch; false when there is no memory for it. */
static bool ctl_ready(void) {
  if (S.ctl_tried)
    return S.ctl_dev != 0;
  S.ctl_tried = true;
  int rc = pinned_new(&S.ctl_host, (size_t)CTL_SLOTS * CTL_HOST, &S.ctl_dev, (uint64_t)CTL_SLOTS * 16);
  if (rc == -EIO)
    hostd__log(HOSTD_LOG_WARN, "scheduler: no memory for PTB control blocks; launches are sliced");
  if (rc < 0)
    return false;
  for (int i = 0; i < CTL_SLOTS; i++)
    S.ctl_free[i] = CTL_SLOTS - 1 - i;
  S.nctl_free = CTL_SLOTS;
  return true;
}

static int ctl_get(void) {
  if (!ctl_ready() || S.nctl_free == 0)
    return -1;
  STAT_ADD(ctl_inuse, 1);
  return S.ctl_free[--S.nctl_free];
}

static void ctl_put(int slot) {
  if (slot < 0)
    return;
  S.ctl_free[S.nctl_free++] = slot;
  __atomic_fetch_sub(&S.st.ctl_inuse, 1, __ATOMIC_RELEASE);
}

static uint64_t ctl_dev(int slot) {
  return S.ctl_dev + (uint64_t)slot * 16;
}

/* Host word 0 of a slot as the launch's read-back left it. */
static uint64_t ctl_read(int slot) {
  uint64_t v;
  memcpy(&v, S.ctl_host + (size_t)slot * CTL_HOST + 16, 8);
  return v;
}

/* ---- FLUSH control blocks: a pool owned by this thread ----
 *
 * A FLUSH launch takes a slot for its control block; when it ends with
 * blocks given up, the slot keeps their list (fl_list_of) until the redo
 * launch that reads it ends.  policy/ runs one FLUSH launch of a tenant at
 * a time, so a tenant holds at most two slots (a list and its redo's); a
 * launch that is not a redo takes a slot only while half the pool is free,
 * which keeps a slot for every redo.  FL_QUIET is never raised. */

static bool fl_ready(void) {
  if (S.fl_tried)
    return S.fl_dev != 0;
  S.fl_tried = true;
  int rc = pinned_new(&S.fl_host, (size_t)(FL_SLOTS + 1) * CTL_HOST, &S.fl_dev,
                      (uint64_t)(FL_SLOTS + 1) * FL_STRIDE);
  if (rc == -EIO)
    hostd__log(HOSTD_LOG_WARN, "scheduler: no memory for FLUSH control blocks; FLUSH launches "
                               "run whole");
  if (rc < 0)
    return false;
  for (int i = 0; i < FL_SLOTS; i++)
    S.fl_free[i] = FL_SLOTS - 1 - i;
  S.nfl_free = FL_SLOTS;
  return true;
}

static uint64_t fl_devaddr(int slot) {
  return S.fl_dev + (uint64_t)slot * FL_STRIDE;
}

static int fl_get(bool redo) {
  if (!fl_ready() || S.nfl_free == 0 || (!redo && S.nfl_free <= FL_SLOTS / 2))
    return -1;
  STAT_ADD(fl_inuse, 1);
  return S.fl_free[--S.nfl_free];
}

static void fl_put(int slot) {
  if (slot < 0 || slot >= FL_SLOTS)
    return; /* none, or FL_QUIET */
  S.fl_list_of[slot] = 0;
  S.fl_item[slot] = NULL;
  S.fl_free[S.nfl_free++] = slot;
  __atomic_fetch_sub(&S.st.fl_inuse, 1, __ATOMIC_RELEASE);
}

/* The slot keeping launch id's list of given-up blocks, or -1. */
static int fl_list(uint64_t id) {
  for (int i = 0; id && i < FL_SLOTS; i++)
    if (S.fl_list_of[i] == id)
      return i;
  return -1;
}

/* Blocks that gave up in the launch that used slot, as its read-back left it. */
static uint32_t fl_given_up(int slot) {
  uint32_t n;
  if (slot < 0 || slot >= FL_SLOTS)
    return 0;
  memcpy(&n, S.fl_host + (size_t)slot * CTL_HOST + 16 + 4, 4);
  return n;
}

static void put_arg(uint8_t *buf, const hostd_var_fn_t *fn, int i, uint64_t v) {
  memcpy(buf + fn->off[i], &v, fn->size[i] < 8 ? fn->size[i] : 8); /* little-endian */
}

/* A variant launch needs its function opened to the launch's dynamic shared
 * memory, as the tenant opened the original (cuFuncSetAttribute). */
static CUresult open_shmem(hostd_var_fn_t *fn, uint32_t shmem) {
  CUresult r;
  if (shmem <= 48u * 1024 || shmem <= fn->shmem_ok)
    return CUDA_SUCCESS;
  r = hostd__gpu.func_set_attr(fn->f, 0, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                               (int)shmem);
  if (r == CUDA_SUCCESS)
    fn->shmem_ok = shmem;
  return r;
}

/* The launch of blocks [begin, +count) of it in form: function, grid and
 * argument buffer (args has room for CALL_LAUNCH_ARGS_MAX + 64 bytes).
 * PTB also writes the control block on the launch stream first. */
typedef struct plan {
  uint64_t f;
  uint32_t grid[3];
  uint32_t argbytes;
  pol_form_t form;
  int slot;
  int fslot, fredo; /* FLUSH: its control block (FL_QUIET: unstoppable), the list it reruns */
} plan_t;

static CUresult plan_slice(item_t *it, const pol_action_t *a, uint8_t *args, plan_t *p) {
  hostd_var_fn_t *fn = it->vk ? (hostd_var_fn_t *)&it->vk->fn[VAR_FORM_SLICE] : NULL;
  if (!fn || !fn->f || a->block_count > INT32_MAX)
    return CUDA_ERROR_NOT_SUPPORTED;
  memset(args + it->argbytes, 0, fn->args_end - it->argbytes);
  put_arg(args, fn, VAR_SLICE_GX, it->k.grid[0]);
  put_arg(args, fn, VAR_SLICE_GY, it->k.grid[1]);
  put_arg(args, fn, VAR_SLICE_GZ, it->k.grid[2]);
  put_arg(args, fn, VAR_SLICE_OFFSET, a->block_begin);
  p->f = fn->f;
  p->grid[0] = (uint32_t)a->block_count;
  p->grid[1] = p->grid[2] = 1;
  p->argbytes = fn->args_end;
  p->form = POL_FORM_SLICED;
  return open_shmem(fn, it->k.shmem_bytes);
}

static CUresult plan_ptb(item_t *it, const pol_action_t *a, uint8_t *args, plan_t *p) {
  hostd_var_fn_t *fn = it->vk ? (hostd_var_fn_t *)&it->vk->fn[VAR_FORM_PTB] : NULL;
  uint32_t workers = a->ptb_workers ? a->ptb_workers : 1;
  rw_ptb_launch_t pl;
  uint8_t *stage;
  uint64_t zero = 0;
  CUresult r;
  if (!fn || !fn->f || rw_ptb_plan(it->total, a->block_begin, workers, 1, &pl) != 0 ||
      (p->slot = ctl_get()) < 0)
    return plan_slice(it, a, args, p); /* no control block: the same blocks, sliced */
  stage = S.ctl_host + (size_t)p->slot * CTL_HOST;
  memcpy(stage, &pl.word0, 8);
  memcpy(stage + 8, &zero, 8); /* flag and reserved word */
  r = hostd__gpu.htod(ctl_dev(p->slot), stage, 16, it->ss->lstream, 1);
  memset(args + it->argbytes, 0, fn->args_end - it->argbytes);
  put_arg(args, fn, VAR_PTB_GX, it->k.grid[0]);
  put_arg(args, fn, VAR_PTB_GY, it->k.grid[1]);
  put_arg(args, fn, VAR_PTB_GZ, it->k.grid[2]);
  put_arg(args, fn, VAR_PTB_CTL, ctl_dev(p->slot));
  put_arg(args, fn, VAR_PTB_FIRST, pl.first);
  put_arg(args, fn, VAR_PTB_NSTATIC, pl.nstatic);
  put_arg(args, fn, VAR_PTB_BATCH, 1);
  p->f = fn->f;
  p->grid[0] = workers;
  p->grid[1] = p->grid[2] = 1;
  p->argbytes = fn->args_end;
  p->form = POL_FORM_PTB;
  return r == CUDA_SUCCESS ? open_shmem(fn, it->k.shmem_bytes) : r;
}

/* A FLUSH launch of blocks [begin, +count), or a redo of the blocks launch
 * a->redo_of gave up: its control block cleared on the launch stream first
 * (flag, n); without a slot of its own it runs with FL_QUIET, whole.  A redo
 * whose list is not here, or beyond a control block, cannot run: an error. */
static CUresult plan_flush(item_t *it, const pol_action_t *a, uint8_t *args, plan_t *p) {
  hostd_var_fn_t *fn = it->vk ? (hostd_var_fn_t *)&it->vk->fn[VAR_FORM_FLUSH] : NULL;
  uint64_t zero[2] = {0, 0};
  uint8_t *stage;
  CUresult r = CUDA_SUCCESS;
  if (!fn || !fn->f || a->block_count == 0 || a->block_count > INT32_MAX)
    return CUDA_ERROR_NOT_SUPPORTED;
  if (a->redo && ((p->fredo = fl_list(a->redo_of)) < 0 || a->block_count > FL_BLOCKS)) {
    hostd__log(HOSTD_LOG_ERROR, "scheduler: a redo of launch %" PRIu64 " whose list is not kept",
               a->redo_of);
    p->fredo = -1;
    return CUDA_ERROR_LAUNCH_FAILED;
  }
  if (a->redo) { /* the list now belongs to this launch: freed when it ends */
    S.fl_list_of[p->fredo] = 0;
    S.fl_item[p->fredo] = NULL;
    it->flush_live--;
  }
  p->fslot = a->block_count <= FL_BLOCKS ? fl_get(a->redo) : -1;
  if (p->fslot < 0 && (a->redo || !fl_ready())) {
    if (a->redo)
      hostd__log(HOSTD_LOG_ERROR, "scheduler: no FLUSH control block for a redo");
    return a->redo ? CUDA_ERROR_LAUNCH_FAILED : CUDA_ERROR_NOT_SUPPORTED;
  }
  if (p->fslot < 0)
    p->fslot = FL_QUIET; /* cleared like any slot: its flag stays 0 */
  stage = S.fl_host + (size_t)p->fslot * CTL_HOST;
  memcpy(stage, zero, 16);
  r = hostd__gpu.htod(fl_devaddr(p->fslot), stage, 16, it->ss->lstream, 1);
  memset(args + it->argbytes, 0, fn->args_end - it->argbytes);
  put_arg(args, fn, VAR_FLUSH_GX, it->k.grid[0]);
  put_arg(args, fn, VAR_FLUSH_GY, it->k.grid[1]);
  put_arg(args, fn, VAR_FLUSH_GZ, it->k.grid[2]);
  put_arg(args, fn, VAR_FLUSH_OFFSET, a->redo ? 0 : a->block_begin);
  put_arg(args, fn, VAR_FLUSH_CTL, fl_devaddr(p->fslot));
  put_arg(args, fn, VAR_FLUSH_REDO, a->redo ? fl_devaddr(p->fredo) : 0);
  p->f = fn->f;
  p->grid[0] = (uint32_t)a->block_count;
  p->grid[1] = p->grid[2] = 1;
  p->argbytes = fn->args_end;
  p->form = POL_FORM_FLUSH;
  return r == CUDA_SUCCESS ? open_shmem(fn, it->k.shmem_bytes) : r;
}

/* An empty plan, and args the tenant's own argument buffer. */
static void plan_init(const item_t *it, uint8_t *args, plan_t *p) {
  memset(p, 0, sizeof(*p));
  p->slot = p->fslot = p->fredo = -1;
  memcpy(args, it->args, it->argbytes);
}

static CUresult plan_launch(item_t *it, const pol_action_t *a, uint8_t *args, plan_t *p) {
  plan_init(it, args, p);
  if (a->form == POL_FORM_PTB)
    return plan_ptb(it, a, args, p);
  if (a->form == POL_FORM_FLUSH) {
    CUresult r = plan_flush(it, a, args, p);
    if (r != CUDA_ERROR_NOT_SUPPORTED || a->redo)
      return r;
    /* No control blocks at all: the same blocks, sliced (or whole). */
    plan_init(it, args, p);
    if (!(a->block_begin == 0 && a->block_count == it->total))
      return plan_slice(it, a, args, p);
  }
  if (a->form == POL_FORM_SLICED && !(a->block_begin == 0 && a->block_count == it->total))
    return plan_slice(it, a, args, p);
  /* The whole grid: the original (a "slice" of everything is the same). */
  p->f = it->f;
  memcpy(p->grid, it->k.grid, sizeof(p->grid));
  p->argbytes = it->argbytes;
  p->form = POL_FORM_ORIGINAL;
  return CUDA_SUCCESS;
}

/* The submission leaves the queue once its last block was issued in a form
 * that cannot stop early and no FLUSH launch of it may leave blocks to run
 * again: fences and flushes waiting for it go on. */
static void item_done(item_t *it) {
  fifo_unlink(it);
  settle(it);
  hostd__var_put(it->vk);
  free(it);
}

/* A queued item's unit as planned, on stream s. */
static CUresult issue_unit(const item_t *it, const plan_t *p, void *args, uint64_t s) {
  return (it->graph || it->memset.count)
             ? unit_launch(it->graph, &it->memset, s)
             : hostd__gpu.launch(p->f, p->grid, it->k.block, it->k.shmem_bytes, s, it->attrs,
                                 it->nattr, args, p->argbytes);
}

/* The results with which the driver refuses, at the call, a launch that the
 * best-effort partition cannot host while the whole GPU could: a
 * thread-block cluster its SMs cannot co-schedule (libraries' Hopper
 * kernels launch clusters), a cooperative grid larger than it holds at once. */
static bool part_refuses(CUresult r) {
  return r == CUDA_ERROR_INVALID_CLUSTER_SIZE || r == CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
}

/* A launch in a sliced, PTB or FLUSH form runs on the whole GPU too: the
 * form is what bounds the LC's wait (a slice fits the turnaround budget, a
 * PTB or FLUSH launch gives its SMs back at the flag), and the policy sizes
 * slices and PTB workers for the whole GPU's resident blocks; in the
 * partition it would only keep SMs from the BE while the LC is idle.  Only
 * the policy's held rules issue these forms (with --be-sms-hold 0, for
 * kernels of long blocks), so the LC is idle or about to preempt them. */
static bool whole_form(pol_form_t form) {
  return form == POL_FORM_SLICED || form == POL_FORM_PTB || form == POL_FORM_FLUSH;
}

/* Such a launch runs on the whole GPU instead: on a stream of the launch
 * stream's priority outside the partition, after everything issued on the
 * launch stream so far and before anything issued on it later (an event
 * each way; a wait takes the event's state at the call, so both go back at
 * once).  The policy's view does not change: the launch's timing events
 * stay on the launch stream around it.  When the partition refused it
 * (refused), the tenant's first such launch is logged, and the kernel is
 * remembered: its later submissions tell the policy it runs outside the
 * partition (POL_VAR_WHOLE_GPU), so with --be-sms-hold 0 they wait while
 * the LC is active (policy/tally.c, PARTITION); this first one could not. */
static CUresult issue_whole(item_t *it, const plan_t *p, void *args, bool refused) {
  hostd_sched_stream_t *ss = it->ss;
  uint64_t before = 0, after = 0;
  CUresult r = CUDA_SUCCESS;
  bool made = false;
  char what[160];
  if (!ss->wstream)
    r = hostd__gpu.stream_new(&ss->wstream, CU_STREAM_NON_BLOCKING, 0);
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.part_event_new(&before, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.event_record(before, ss->lstream, 0);
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.stream_wait(ss->wstream, before, 0);
  if (r == CUDA_SUCCESS)
    made = (r = issue_unit(it, p, args, ss->wstream)) == CUDA_SUCCESS;
  if (r == CUDA_SUCCESS)
    r = ev_get(&after, false);
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.event_record(after, ss->wstream, 0);
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.stream_wait(ss->lstream, after, 0);
  if (made && r != CUDA_SUCCESS) /* launched, but its end cannot be ordered: wait for it */
    r = hostd__gpu.stream_sync(ss->wstream);
  if (before)
    (void)hostd__gpu.event_del(before);
  ev_put(after, false);
  if (!made)
    return r;
  if (!refused) {
    STAT_ADD(whole_forms, 1);
    return r;
  }
  STAT_ADD(whole, 1);
  if (!it->graph && !it->memset.count && it->k.kernel_id)
    (void)u64map_put(&S.whole_ids, it->k.kernel_id, 1); /* no memory: not remembered */
  if (!it->t->whole_noted) {
    it->t->whole_noted = true;
    describe(what, sizeof(what), unit_of(it->graph, it->memset.count),
             it->graph || it->memset.count ? NULL : &it->k);
    hostd__log(HOSTD_LOG_INFO,
               "tenant %" PRIu32 ": %s cannot run on the best-effort partition of %" PRIu32
               " SMs: it runs on the whole GPU (so does any launch of it like that)",
               it->t->id, what, S.part_sms);
  }
  return r;
}

/* A queued launch the policy released: on the launch stream, timed. */
static void issue_queued(item_t *it, const pol_action_t *a, uint64_t now) {
  hostd_sched_stream_t *ss = it->ss;
  uint64_t argbuf[(CALL_LAUNCH_ARGS_MAX + 64) / 8];
  issued_t is = {.slot = -1, .fslot = -1, .fredo = -1};
  plan_t p;
  CUresult r = CUDA_SUCCESS;
  if (it->run_event) {
    r = hostd__gpu.stream_wait(ss->lstream, it->run_event, 0);
    ev_put(it->run_event, false);
    it->run_event = 0;
  }
  if (r == CUDA_SUCCESS)
    r = plan_launch(it, a, (uint8_t *)argbuf, &p);
  /* Timed when the policy asks (a profile sample) or a trace is written;
   * otherwise one event marks the end, untimed except for a PTB or FLUSH
   * launch: its preemption turnaround (flag write -> end) is the device's
   * own, for the policy's drain and tallyd's figures, on every launch. */
  if (r == CUDA_SUCCESS && (a->timed || S.trace)) {
    is.end_timed = true;
    if (ev_for(ss, &is.ev_start, true) == CUDA_SUCCESS &&
        ev_for(ss, &is.ev_end, true) == CUDA_SUCCESS)
      (void)hostd__gpu.event_record(is.ev_start, ss->lstream, 0);
  } else if (r == CUDA_SUCCESS) {
    is.end_timed = p.form == POL_FORM_PTB || p.form == POL_FORM_FLUSH;
    (void)ev_for(ss, &is.ev_end, is.end_timed); /* none: done when polled */
  }
  if (r == CUDA_SUCCESS && ss->part && whole_form(p.form)) {
    r = issue_whole(it, &p, argbuf, false);
  } else if (r == CUDA_SUCCESS) {
    r = issue_unit(it, &p, argbuf, ss->lstream);
    if (ss->part && part_refuses(r))
      r = issue_whole(it, &p, argbuf, true);
  }
  if (r == CUDA_SUCCESS && p.form == POL_FORM_PTB) /* where it stopped, for the policy */
    r = hostd__gpu.dtoh_async(S.ctl_host + (size_t)p.slot * CTL_HOST + 16, ctl_dev(p.slot), 8,
                              ss->lstream);
  if (r == CUDA_SUCCESS && p.form == POL_FORM_FLUSH && p.fslot < FL_SLOTS) /* flag and n */
    r = hostd__gpu.dtoh_async(S.fl_host + (size_t)p.fslot * CTL_HOST + 16, fl_devaddr(p.fslot),
                              8, ss->lstream);
  if (r != CUDA_SUCCESS) {
    set_error(it->t, r, unit_of(it->graph, it->memset.count),
              it->graph || it->memset.count ? NULL : &it->k, ss->part, "at the call");
    ctl_put(p.slot);
    p.slot = -1;
    if (p.form == POL_FORM_FLUSH) { /* complete it with nothing given up */
      fl_put(p.fslot);
      p.fslot = FL_QUIET;
    } else { /* nothing was launched: nothing to wait for, complete it */
      fl_put(p.fredo);
      p.fredo = -1;
      p.form = POL_FORM_ORIGINAL;
    }
  }
  if (is.ev_end && hostd__gpu.event_record(is.ev_end, ss->lstream, 0) != CUDA_SUCCESS) {
    ev_done(ss->part, is.ev_end, is.end_timed);
    is.ev_end = 0;
  }
  if (!is.ev_end) {
    ev_done(ss->part, is.ev_start, true);
    is.ev_start = 0;
  }
  if ((p.form == POL_FORM_PTB || p.form == POL_FORM_FLUSH) && !is.ev_end)
    (void)hostd__gpu.stream_sync(ss->lstream); /* no way to see it end: wait for it here */
  is.form = p.form;
  is.slot = p.slot;
  is.fslot = p.fslot;
  is.fredo = p.fredo;
  if (is.ev_start)
    STAT_ADD(timed, 1);
  STAT_ADD(issued, 1); /* before settle: a fence it releases may read it */
  if (p.form == POL_FORM_SLICED) {
    STAT_ADD(sliced, 1);
    if (it->t->n_sliced)
      __atomic_fetch_add(it->t->n_sliced, 1, __ATOMIC_RELAXED);
  } else if (p.form == POL_FORM_PTB) {
    STAT_ADD(ptb, 1);
    if (it->t->n_ptb)
      __atomic_fetch_add(it->t->n_ptb, 1, __ATOMIC_RELAXED);
  } else if (p.form == POL_FORM_FLUSH) {
    STAT_ADD(flush, 1);
    if (it->t->n_flush)
      __atomic_fetch_add(it->t->n_flush, 1, __ATOMIC_RELAXED);
    if (a->redo)
      STAT_ADD(redos, 1);
  }
  if (p.form != POL_FORM_PTB && !a->redo && a->block_begin + a->block_count >= it->total)
    it->ranges_done = true; /* a PTB launch may stop early: ptb_item_end says */
  flight_add(it, a, &is, now, ss->part);
  if (p.form != POL_FORM_PTB && it->ranges_done && !it->flush_live && !it->ptb_live)
    item_done(it);
}

/* The flag stream, made once (the scheduler thread); false without it. */
static bool hi_ready(void) {
  if (S.hi_stream)
    return true;
  if (hostd__gpu.stream_new(&S.hi_stream, CU_STREAM_NON_BLOCKING,
                            hostd__snapshot.prio_greatest) != CUDA_SUCCESS) {
    S.hi_stream = 0;
    return false;
  }
  atomic_store_explicit(&S.hi_pub, S.hi_stream, memory_order_release);
  return true;
}

/* The flag of armed index i: PTB's is word 2 of its block, FLUSH's word 0
 * (rewrite/README.md). */
static uint64_t flag_addr(int i) {
  return i < CTL_SLOTS ? ctl_dev(i) + 8 : fl_devaddr(i - CTL_SLOTS);
}

/* Invariant (e): f's flag may be raised by an LC worker from now on. */
static void arm(flight_t *f) {
  int i = f->form == POL_FORM_PTB && f->slot >= 0 ? f->slot
          : f->form == POL_FORM_FLUSH && f->fslot >= 0 && f->fslot < FL_SLOTS
              ? CTL_SLOTS + f->fslot
              : -1;
  f->arm = -1;
  if (i < 0 || !hi_ready())
    return;
  f->arm = i;
  f->arm_gen = ++S.arm_next;
  atomic_store_explicit(&S.armed[i], f->arm_gen, memory_order_release);
  atomic_fetch_or_explicit(&S.arm_bits[i / 64], 1ull << (i % 64), memory_order_release);
  atomic_fetch_add_explicit(&S.narmed, 1, memory_order_release);
}

/* Whether a worker raised f's flag (its clock then in f->flag_ns); *ev the
 * timed event after its write (0: none, or not recorded yet), now the
 * caller's.  An event left by an earlier generation is returned to the pool. */
static bool early_take(flight_t *f, uint64_t *ev) {
  uint64_t stale = 0;
  bool raised;
  *ev = 0;
  if (f->arm < 0)
    return false;
  pthread_mutex_lock(&S.mu);
  raised = S.early_gen[f->arm] == f->arm_gen;
  if (raised) {
    *ev = S.early_ev[f->arm];
    f->flag_ns = S.early_ns[f->arm];
  } else {
    stale = S.early_ev[f->arm];
  }
  S.early_ev[f->arm] = 0;
  pthread_mutex_unlock(&S.mu);
  ev_put(stale, true);
  return raised;
}

/* Whether f was stopped by a worker's raise (invariant (e)) whose LC note
 * the policy has not handled yet (the worker is between its raise and its
 * note, or the note came after this pass took the inbox).  Its completion
 * then waits for a later pass, so the policy learns that the LC is busy
 * first and does not refill the SMs the flag freed with best-effort work. */
static bool early_unheard(const flight_t *f) {
  bool unheard;
  if (f->arm < 0 || f->ev_flag)
    return false;
  pthread_mutex_lock(&S.mu);
  unheard = S.early_gen[f->arm] == f->arm_gen &&
            S.early_ticket[f->arm] > atomic_load_explicit(&S.ticket_heard, memory_order_acquire);
  pthread_mutex_unlock(&S.mu);
  return unheard;
}

/* The LC note that followed raise `ticket` was handled (or none follows):
 * what that raise stopped may complete (early_unheard). */
static void ticket_heard(uint64_t ticket) {
  uint64_t h = atomic_load_explicit(&S.ticket_heard, memory_order_acquire);
  while (h < ticket && !atomic_compare_exchange_weak_explicit(
                           &S.ticket_heard, &h, ticket, memory_order_acq_rel,
                           memory_order_acquire))
    ;
}

/* f ended: workers no longer raise its flag, before its slot goes back; a
 * raise a worker made before the policy preempted it times the turnaround
 * all the same. */
static void disarm(flight_t *f) {
  uint64_t e;
  if (f->arm < 0)
    return;
  atomic_fetch_and_explicit(&S.arm_bits[f->arm / 64], ~(1ull << (f->arm % 64)),
                            memory_order_release);
  atomic_store_explicit(&S.armed[f->arm], 0, memory_order_release);
  atomic_fetch_sub_explicit(&S.narmed, 1, memory_order_release);
  if (early_take(f, &e) && !f->ev_flag) {
    f->ev_flag = e ? e : 1; /* 1: raised, not timed */
    STAT_ADD(preempts, 1);
  } else {
    ev_put(e, true);
  }
  f->arm = -1;
}

/* Writes a preemption flag (1) on stream s: by the GPU's front end
 * (word_write), which lands while best-effort blocks fill every SM, unless
 * --flag-memset says a one-word memset (which the driver may run as a
 * kernel, and so behind a free SM), or the driver refused the front end's
 * write once (then memsets from there on, logged once). */
static CUresult flag_raise(uint64_t addr, uint64_t s) {
  static _Atomic bool refused;
  CUresult r;
  if (!S.cfg.flag_memset && !atomic_load_explicit(&refused, memory_order_relaxed)) {
    if ((r = hostd__gpu.word_write(addr, 1, s)) != CUDA_ERROR_NOT_SUPPORTED)
      return r;
    if (!atomic_exchange(&refused, true))
      hostd__log(HOSTD_LOG_WARN, "scheduler: the driver refused cuStreamWriteValue32 (CUresult "
                                 "%d); preemption flags are written with a memset", (int)r);
  }
  return hostd__gpu.memset(addr, 1, 4, 1, s);
}

/* An LC burst begins (invariant (e)): every armed flag raised now on the
 * flag stream, each followed by a timed event for the scheduler thread;
 * the slot is claimed for the flight's generation with the raise's ticket
 * (its LC note carries the same) before the write.  Called by an LC worker
 * before its launch; a generation is raised by the first worker only. */
static void raise_armed(uint64_t ticket) {
  uint64_t hi = atomic_load_explicit(&S.hi_pub, memory_order_acquire);
  if (!hi)
    return;
  for (int w = 0; w < ARM_WORDS; w++) {
    uint64_t bits = atomic_load_explicit(&S.arm_bits[w], memory_order_acquire);
    while (bits) {
      int i = w * 64 + __builtin_ctzll(bits);
      uint64_t g = atomic_load_explicit(&S.armed[i], memory_order_acquire), e = 0, old;
      bits &= bits - 1;
      if (!g)
        continue;
      /* Claimed before the write: the launch may end as soon as the GPU
       * sees it, and its end must wait for this raise's note (early_unheard). */
      pthread_mutex_lock(&S.mu);
      if (S.early_gen[i] == g) { /* raised already in this generation */
        pthread_mutex_unlock(&S.mu);
        continue;
      }
      old = S.early_ev[i];
      S.early_ev[i] = 0;
      S.early_gen[i] = g;
      S.early_ticket[i] = ticket;
      S.early_ns[i] = now_fn();
      pthread_mutex_unlock(&S.mu);
      ev_put(old, true);
      if (flag_raise(flag_addr(i), hi) != CUDA_SUCCESS)
        continue;
      STAT_ADD(early_raises, 1);
      if (ev_get(&e, true) != CUDA_SUCCESS)
        continue;
      if (hostd__gpu.event_record(e, hi, 0) != CUDA_SUCCESS) {
        ev_put(e, true);
        continue;
      }
      old = e;
      pthread_mutex_lock(&S.mu);
      if (S.early_gen[i] == g && !S.early_ev[i]) {
        S.early_ev[i] = e;
        old = 0;
      }
      pthread_mutex_unlock(&S.mu);
      ev_put(old, true);
    }
  }
}

/* POL_ACT_PREEMPT: raise the flag of a PTB or FLUSH launch with a write on
 * the high-priority stream, timed from an event recorded right after, or
 * from a worker's earlier raise of the same flag (invariant (e)). */
static void preempt(uint64_t launch_id) {
  flight_t *f = S.flights;
  uint64_t e;
  while (f && f->launch_id != launch_id)
    f = f->next;
  if (!f || f->arm < 0 || f->ev_flag)
    return; /* not a PTB or FLUSH launch that can stop (it may have just ended) */
  if (flag_raise(flag_addr(f->arm), S.hi_stream) != CUDA_SUCCESS)
    return;
  STAT_ADD(preempts, 1);
  if (early_take(f, &e) && e) {
    f->ev_flag = e;
    return;
  }
  if (ev_get(&f->ev_flag, true) != CUDA_SUCCESS ||
      hostd__gpu.event_record(f->ev_flag, S.hi_stream, 0) != CUDA_SUCCESS) {
    ev_put(f->ev_flag, true);
    f->ev_flag = 1; /* raised, not timed */
  }
}

static void do_action(const pol_action_t *a, uint64_t now) {
  hostd_sched_tenant_t *t = tenant_of(a->tenant);
  item_t *it;
  if (a->type == POL_ACT_PREEMPT) {
    preempt(a->launch_id);
    return;
  }
  if (!t || !(it = fifo_find(t, a->submit_id, false)) || it->ptb_live) {
    hostd__log(HOSTD_LOG_WARN, "scheduler: the policy launched unknown submission %" PRIu64,
               a->submit_id);
    return;
  }
  if (it->kind == IT_DIRECT) {
    fifo_unlink(it);
    issue_direct(it, a, now); /* the item stays with its stream */
    return;
  }
  issue_queued(it, a, now);
}

static void do_actions(uint64_t now) {
  pol_action_t acts[ACT_BATCH];
  size_t n;
  while ((n = pol_sched_actions(S.pol, acts, ACT_BATCH)) > 0)
    for (size_t i = 0; i < n; i++)
      do_action(&acts[i], now);
}

/* ---- completions, the trace, closing tenants ---- */

static void turn_add(uint64_t ns) {
  uint64_t b = ns / 1000, n = 0, seen = 0, p50 = 0, p99 = 0;
  S.turn_hist[b < TURN_BUCKETS ? b : TURN_BUCKETS]++;
  if (ns > S.turn_max_ns)
    S.turn_max_ns = ns;
  for (int i = 0; i <= TURN_BUCKETS; i++)
    n += S.turn_hist[i];
  for (int i = 0; i <= TURN_BUCKETS; i++) {
    uint64_t edge = i < TURN_BUCKETS ? (uint64_t)(i + 1) * 1000 : S.turn_max_ns;
    seen += S.turn_hist[i];
    if (!p50 && seen * 2 >= n)
      p50 = edge;
    if (!p99 && seen * 100 >= n * 99)
      p99 = edge;
  }
  __atomic_store_n(&S.st.turn_p50_ns, p50 < S.turn_max_ns ? p50 : S.turn_max_ns, __ATOMIC_RELEASE);
  __atomic_store_n(&S.st.turn_p99_ns, p99 < S.turn_max_ns ? p99 : S.turn_max_ns, __ATOMIC_RELEASE);
  __atomic_store_n(&S.st.turn_max_ns, S.turn_max_ns, __ATOMIC_RELEASE);
  STAT_ADD(turnarounds, 1);
}

/* One line per flight.  An LC flight follows a burst of its stream's
 * launches (invariant (d)): its line names the burst's first kernel and
 * says how many launches the burst held (launches=, at least 1: a tenant
 * that closed before any publication leaves the count unknown). */
static void trace_write(const flight_t *f, uint64_t start, uint64_t end) {
  static const char *const forms[] = {"original", "sliced", "ptb", "flush"};
  const pol_kernel_t *k = &f->k;
  uint64_t blocks = (uint64_t)k->grid[0] * k->grid[1] * k->grid[2];
  uint64_t waves = (blocks + S.cfg.pol.default_resident - 1) / S.cfg.pol.default_resident;
  uint64_t block_ns = waves ? (end - start) / waves : 0;
  uint64_t burst = f->lc && f->lc_seen >= f->lc_first ? f->lc_seen - f->lc_first + 1 : 1;
  char lc[32] = "";
  if (f->lc)
    snprintf(lc, sizeof(lc), " launches=%" PRIu64, burst);
  fprintf(S.trace,
          "%s 0x%016" PRIx64 " %u,%u,%u %u,%u,%u 0 %u %" PRIu64 " %" PRIu64
          " o%s%s%s # class=%s form=%s blocks=%" PRIu64 "+%" PRIu64 " held=%d graph=%d"
          " submit=%" PRIu64 " issue=%" PRIu64 " start=%" PRIu64 " end=%" PRIu64 "%s\n",
          f->t->name, k->kernel_id, k->grid[0], k->grid[1], k->grid[2], k->block[0], k->block[1],
          k->block[2], k->shmem_bytes, block_ns ? block_ns : 1, f->gap_ns,
          (k->variants & POL_VAR_SLICED) ? "s" : "", (k->variants & POL_VAR_PTB) ? "p" : "",
          (k->variants & POL_VAR_FLUSH) ? "f" : "", f->t->cls == 0 ? "lc" : "be", forms[f->form], f->begin, f->count, f->held, f->graph,
          f->submit_ns,
          f->issue_ns, start, end, lc);
}

static void close_done(hostd_sched_tenant_t *t) {
  if (!t->closing || t->inflight > 0 || t->head)
    return;
  tenant_forget(t);
  pthread_mutex_lock(&S.mu);
  t->closed = true;
  pthread_cond_broadcast(&S.done);
  pthread_mutex_unlock(&S.mu);
}

/* A PTB launch ended: the blocks it finished (word 0 as it left it), its
 * preemption turnaround (flag write -> end), its control block back. */
/* A preempted launch ended: its turnaround (flag write -> end) counted
 * and traced, its flag event returned. */
static void preempt_end(flight_t *f, CUresult r, uint64_t done) {
  float ms = -1;
  int64_t ns = -1; /* flag write -> end on the device; -1: not timed */
  if (f->ev_flag > 1 && r == CUDA_SUCCESS &&
      hostd__gpu.event_time(&ms, f->ev_flag, f->ev_end) == CUDA_SUCCESS && ms >= 0) {
    ns = (int64_t)((double)ms * 1e6);
    turn_add((uint64_t)ns);
    f->turn_ns = (uint64_t)ns + 1; /* 0 says "not timed" */
  }
  if (f->ev_flag && S.trace)
    fprintf(S.trace, "# preempt tenant=%s launch=%" PRIu64 " blocks_done=%" PRIu64 "/%" PRIu64
            " turnaround_ns=%" PRId64 "\n", f->t->name, f->launch_id, done, f->count, ns);
  if (f->ev_flag > 1)
    ev_done(false, f->ev_flag, true);
}

static uint64_t ptb_end(flight_t *f, CUresult r) {
  uint64_t word0 = ctl_read(f->slot), done;
  done = r != CUDA_SUCCESS ? f->count : word0 > f->begin ? word0 - f->begin : 0;
  if (done > f->count)
    done = f->count;
  preempt_end(f, r, done);
  ctl_put(f->slot);
  return done;
}

/* A FLUSH launch ended: the blocks that gave up (n as its read-back left
 * it; none when it failed: its error is the tenant's), the list it reran
 * returned, its own slot kept as the list of its redo when n > 0. */
static uint64_t flush_end(flight_t *f, CUresult r) {
  uint64_t n = r == CUDA_SUCCESS ? fl_given_up(f->fslot) : 0;
  if (n > f->count)
    n = f->count;
  preempt_end(f, r, f->count - n);
  fl_put(f->fredo);
  if (n > 0 && f->it && !f->it->orphan && f->fslot < FL_SLOTS) {
    S.fl_list_of[f->fslot] = f->launch_id;
    S.fl_item[f->fslot] = f->it;
  } else
    fl_put(f->fslot);
  STAT_ADD(given_up, n);
  return n;
}

/* The submission of a PTB launch that ended: whole, it leaves the queue;
 * else it stays for the policy to launch the rest (or goes with its tenant). */
static void ptb_item_end(flight_t *f, uint64_t done) {
  item_t *it = f->it;
  it->ptb_live = false;
  if (done == f->count)
    it->ranges_done = true;
  if (it->orphan && !it->flush_live)
    drop(it);
  else if (!it->orphan && it->ranges_done && !it->flush_live)
    item_done(it);
}

/* The submission of a FLUSH launch that ended with n blocks given up: they
 * stay for the redo (its list counts as live); whole, it leaves the queue. */
static void flush_item_end(flight_t *f, uint64_t n) {
  item_t *it = f->it;
  it->flush_live--;
  if (n > 0 && !it->orphan)
    it->flush_live++;
  if (it->orphan && !it->flush_live && !it->ptb_live)
    drop(it);
  else if (!it->orphan && it->ranges_done && !it->flush_live && !it->ptb_live)
    item_done(it);
}

/* 1 when f completed (its events are returned and the policy told). */
static int flight_poll(flight_t *f, uint64_t now) {
  pol_event_t ev = {.type = POL_EV_COMPLETED, .now_ns = now, .launch_id = f->launch_id};
  uint64_t dur = 0;
  CUresult r = CUDA_SUCCESS;
  if (f->lc) {
    if (!lc_done(f, &r))
      return 0;
  } else if (f->ev_end && (r = hostd__gpu.event_query(f->ev_end)) == CUDA_ERROR_NOT_READY) {
    return 0;
  } else if (early_unheard(f)) {
    return 0;
  }
  if (r != CUDA_SUCCESS)
    set_error(f->t, r, f->lc ? "a latency-critical launch" : unit_of(f->graph, 0),
              f->lc || f->graph ? NULL : &f->k, f->part, "when it ran");
  /* Seen done now: a clock read before the query could predate the
   * completion by however long this thread was off the CPU in between. */
  if ((now = now_fn()) > ev.now_ns)
    ev.now_ns = now;
  else
    now = ev.now_ns;
  if (r == CUDA_SUCCESS && f->ev_start) {
    float ms = 0;
    if (hostd__gpu.event_time(&ms, f->ev_start, f->ev_end) == CUDA_SUCCESS && ms > 0)
      dur = (uint64_t)((double)ms * 1e6);
  }
  ev.dev_end_ns = now;
  ev.dev_start_ns = dur < now ? now - dur : 0;
  ev.untimed = !f->lc && !f->ev_start; /* no profile sample from it */
  if (f->t->gpu_ns) { /* untimed: from its issue or the previous completion */
    uint64_t from = f->issue_ns > f->t->last_end_ns ? f->issue_ns : f->t->last_end_ns;
    __atomic_fetch_add(f->t->gpu_ns, f->ev_start ? dur : now > from ? now - from : 0,
                       __ATOMIC_RELAXED);
  }
  f->t->last_end_ns = now;
  disarm(f);
  ev.flag_ns = f->flag_ns;
  if (f->form == POL_FORM_FLUSH) {
    ev.blocks_given_up = flush_end(f, r);
    ev.blocks_done = f->count - ev.blocks_given_up;
  } else {
    ev.blocks_done = f->slot >= 0 ? ptb_end(f, r) : f->count;
  }
  ev.drain_ns = f->turn_ns; /* the device's own, not how late this thread saw the end */
  if (S.trace)
    trace_write(f, ev.dev_start_ns, ev.dev_end_ns);
  ev_done(f->part, f->ev_start, true);
  ev_done(f->part, f->ev_end, f->end_timed);
  feed(&ev);
  if (f->it && f->form == POL_FORM_FLUSH)
    flush_item_end(f, ev.blocks_given_up);
  else if (f->it)
    ptb_item_end(f, ev.blocks_done);
  hostd__var_put(f->vk);
  f->t->inflight--;
  STAT_ADD(completed, 1);
  close_done(f->t);
  return 1;
}

static void poll_flights(uint64_t now) {
  for (flight_t **pf = &S.flights; *pf;) {
    flight_t *f = *pf;
    if (flight_poll(f, now)) {
      *pf = f->next;
      free(f);
    } else {
      pf = &f->next;
    }
  }
}

/* Queued submissions are dropped; one whose PTB launch is in flight goes
 * when that launch ends (its control block with it). */
static void on_close(item_t *it) {
  hostd_sched_tenant_t *t = it->t;
  free(it);
  t->closing = true;
  (void)pol_sched_tenant_del(S.pol, t->id);
  while (t->head) {
    item_t *q = t->head;
    t->head = q->next;
    for (int i = 0; i < FL_SLOTS; i++) /* a list kept for a redo that will not come */
      if (S.fl_list_of[i] && q->flush_live > 0 && S.fl_item[i] == q) {
        fl_put(i);
        q->flush_live--;
      }
    if (q->ptb_live || q->flush_live)
      q->orphan = true;
    else
      drop(q);
  }
  t->tail = NULL;
  close_done(t);
}

/* ---- the loop ---- */

static void handle_items(item_t *it, uint64_t now) {
  while (it) {
    item_t *next = it->next;
    switch (it->kind) {
    case IT_SUBMIT:
      on_submit(it, now);
      break;
    case IT_DIRECT: {
      uint64_t ticket = it->raise_ticket;
      on_submit(it, now);
      if (ticket) /* the policy knows the LC is busy: what the raise stopped may end */
        ticket_heard(ticket);
      break;
    }
    case IT_CLOSE:
      /* What the policy released already is issued first: dropping it
       * would leave the policy waiting for its completion for ever. */
      do_actions(now);
      on_close(it);
      break;
    }
    it = next;
  }
}

/* Whether a flight has an event to poll: not an LC flight that waits for
 * its worker's next publication (one came: S.lc_news wakes idle_wait). */
static bool flights_to_poll(void) {
  for (const flight_t *f = S.flights; f; f = f->next)
    if (!f->lc || f->lc_has || atomic_load_explicit(&f->lc->lc_pub, memory_order_acquire))
      return true;
  return false;
}

/* Sleeps until an item or an LC publication comes or the policy's timer is
 * due; only when no flight has an event to poll (completions are polled,
 * so they need the loop). */
static void idle_wait(void) {
  uint64_t timer = pol_sched_next_timer_ns(S.pol);
  pthread_mutex_lock(&S.mu);
  S.sleeping = true;
  while (!S.inbox && !S.stop && !S.lc_news) {
    if (timer == UINT64_MAX) {
      pthread_cond_wait(&S.wake, &S.mu);
      continue;
    }
    uint64_t now = now_fn();
    if (now >= timer)
      break;
    /* The condition variable's clock is CLOCK_REALTIME: wait a relative span. */
    struct timespec ts;
    uint64_t span = timer - now;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(span / 1000000000ull);
    ts.tv_nsec += (long)(span % 1000000000ull);
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&S.wake, &S.mu, &ts);
  }
  S.sleeping = false;
  pthread_mutex_unlock(&S.mu);
}

static void loop_once(void) {
  item_t *items = inbox_take();
  uint64_t now = now_fn(), timer, seen;
  S.pass++;
  pthread_mutex_lock(&S.polmu);
  handle_items(items, now);
  poll_flights(now);
  seen = now_fn(); /* completions were stamped when seen: what follows is not before them */
  if (seen > now)
    now = seen;
  timer = pol_sched_next_timer_ns(S.pol);
  if (timer != UINT64_MAX && now >= timer) {
    pol_event_t ev = {.type = POL_EV_TIMER, .now_ns = now};
    feed(&ev);
  }
  do_actions(now);
  pthread_mutex_unlock(&S.polmu);
}

static void *sched_main(void *arg) {
  (void)arg;
  if (hostd__gpu.thread_enter() != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_ERROR, "scheduler: cannot make the GPU context current");
  for (;;) {
    bool stop;
    loop_once();
    pthread_mutex_lock(&S.mu);
    stop = S.stop && !S.inbox;
    pthread_mutex_unlock(&S.mu);
    if (stop && !S.flights)
      break;
    if (!flights_to_poll() && !S.inbox)
      idle_wait();
    else
      sched_yield(); /* launches in flight: poll their events */
  }
  return NULL;
}

int hostd__sched_init(const hostd_sched_config_t *cfg) {
  int rc;
  const char *why = NULL;
  S.cfg = *cfg;
  S.asym = hostd__barrier_init();
  __atomic_store_n(&S.on, false, __ATOMIC_RELEASE);
  if (!cfg->on)
    return 0;
  if (pol_config_check(&cfg->pol, &why) != 0) {
    hostd__log(HOSTD_LOG_ERROR, "scheduler: bad policy configuration: %s", why);
    return -EINVAL;
  }
  if ((rc = partition_for_policy(cfg, &S.cfg.pol)) < 0)
    return rc;
  if ((rc = pol_sched_new(cfg->kind, &S.cfg.pol, &S.pol)) < 0)
    return rc;
  if ((rc = hostd__var_init(&cfg->var)) < 0) {
    pol_sched_free(S.pol);
    S.pol = NULL;
    return rc;
  }
  if (cfg->profiles[0]) {
    rc = pol_profiles_load(pol_sched_profiles(S.pol), cfg->profiles, &why);
    if (rc == 0)
      hostd__log(HOSTD_LOG_INFO, "scheduler: %zu kernel profiles from %s",
                 pol_profiles_count(pol_sched_profiles(S.pol)), cfg->profiles);
    else if (rc != -ENOENT)
      hostd__log(HOSTD_LOG_WARN, "scheduler: ignoring profiles %s: %s", cfg->profiles,
                 why ? why : strerror(-rc));
  }
  if (cfg->trace[0] && !(S.trace = fopen(cfg->trace, "w"))) {
    rc = -errno;
    hostd__log(HOSTD_LOG_ERROR, "cannot write the trace %s: %s", cfg->trace, strerror(errno));
    goto fail_pol;
  }
  if (S.trace)
    fprintf(S.trace, "# tallyd kernel trace (tally-sim format), policy %s\n",
            pol_kind_name(cfg->kind));
  S.stop = false;
  if ((rc = -pthread_create(&S.th, NULL, sched_main, NULL)) < 0)
    goto fail_trace;
  __atomic_store_n(&S.on, true, __ATOMIC_RELEASE);
  /* Ours: what the operator set, or the policy's defaults, in one line. */
  if (cfg->kind == POL_KIND_TALLY) {
    char shared[160] = "none", flight[48] = "up to 32 launches";
    if (S.cfg.pol.part_flight_ns)
      snprintf(flight, sizeof(flight), "up to %.1f us of device time",
               S.cfg.pol.part_flight_ns / 1e3);
    if (S.cfg.pol.be_partitioned && S.cfg.pol.part_block_ns)
      snprintf(shared, sizeof(shared),
               "blocks up to %.1f us, in a partition of %u SMs (--be-sms-hold 0), %s in flight",
               S.cfg.pol.part_block_ns / 1e3, (unsigned)S.part_sms, flight);
    else if (S.cfg.pol.be_partitioned)
      snprintf(shared, sizeof(shared),
               "all of it, in a partition of %u SMs (--be-sms-hold 0), %s in flight",
               (unsigned)S.part_sms, flight);
    else if (cfg->pol.share_block_ns)
      snprintf(shared, sizeof(shared), "blocks up to %.1f us", cfg->pol.share_block_ns / 1e3);
    hostd__log(HOSTD_LOG_INFO,
               "scheduler: policy tally (threshold %.1f us, resume after %.1f us idle, depth %u; "
               "best-effort work kept running while the LC is active: %s)",
               cfg->pol.threshold_ns / 1e3, cfg->pol.resume_idle_ns / 1e3, cfg->pol.be_depth,
               shared);
  } else {
    hostd__log(HOSTD_LOG_INFO, "scheduler: policy %s", pol_kind_name(cfg->kind));
  }
  return 0;
fail_trace:
  if (S.trace)
    fclose(S.trace);
  S.trace = NULL;
fail_pol:
  hostd__var_shutdown();
  pol_sched_free(S.pol);
  S.pol = NULL;
  return rc;
}

/* The control blocks and the flag stream (after the thread stopped). */
static void ptb_pool_free(void) {
  for (int i = 0; i < ARM_N; i++) {
    ev_put(S.early_ev[i], true);
    S.early_ev[i] = S.early_gen[i] = S.early_ticket[i] = S.early_ns[i] = 0;
    atomic_store(&S.armed[i], 0);
  }
  for (int w = 0; w < ARM_WORDS; w++)
    atomic_store(&S.arm_bits[w], 0);
  atomic_store(&S.narmed, 0);
  atomic_store(&S.hi_pub, 0);
  if (S.hi_stream)
    (void)hostd__gpu.stream_del(S.hi_stream);
  S.hi_stream = 0;
  pinned_free(&S.ctl_host, &S.ctl_dev);
  S.ctl_tried = false;
  S.nctl_free = 0;
  pinned_free(&S.fl_host, &S.fl_dev);
  S.fl_tried = false;
  S.nfl_free = 0;
  memset(S.fl_list_of, 0, sizeof(S.fl_list_of));
  memset(S.fl_item, 0, sizeof(S.fl_item));
}

/* The exit line on fences that blocked a worker: how many, how long, and
 * under which requests most (the three largest counts). */
static void fence_report(void) {
  uint32_t top[3] = {CALL_OP_COUNT + 1, CALL_OP_COUNT + 1, CALL_OP_COUNT + 1};
  char by[192] = "";
  size_t n = 0;
  if (!S.st.fences_blocked)
    return;
  for (uint32_t op = 0; op <= CALL_OP_COUNT; op++)
    for (int k = 0; k < 3; k++)
      if (S.fence_by_op[op] &&
          (top[k] > CALL_OP_COUNT || S.fence_by_op[op] > S.fence_by_op[top[k]])) {
        memmove(top + k + 1, top + k, (size_t)(2 - k) * sizeof(top[0]));
        top[k] = op;
        break;
      }
  for (int k = 0; k < 3 && top[k] <= CALL_OP_COUNT && n < sizeof(by); k++)
    n += (size_t)snprintf(by + n, sizeof(by) - n, "%s%s %" PRIu64, k ? ", " : "",
                          top[k] < CALL_OP_COUNT ? call_op_name(top[k]) : "other",
                          S.fence_by_op[top[k]]);
  hostd__log(HOSTD_LOG_INFO,
             "scheduler: %" PRIu64 " fences blocked a worker, %.1f ms in all (most under %s)",
             S.st.fences_blocked, (double)S.st.fence_block_ns / 1e6, by);
}

void hostd__sched_shutdown(void) {
  int rc;
  if (!S.on)
    return;
  pthread_mutex_lock(&S.mu);
  S.stop = true;
  pthread_cond_signal(&S.wake);
  pthread_mutex_unlock(&S.mu);
  pthread_join(S.th, NULL);
  __atomic_store_n(&S.on, false, __ATOMIC_RELEASE);
  if (S.cfg.profiles[0] &&
      (rc = pol_profiles_save(pol_sched_profiles(S.pol), S.cfg.profiles)) < 0)
    hostd__log(HOSTD_LOG_WARN, "scheduler: cannot save profiles to %s: %s", S.cfg.profiles,
               strerror(-rc));
  hostd__log(HOSTD_LOG_INFO,
             "scheduler: %" PRIu64 " launches (%" PRIu64 " held, %" PRIu64 " of them timed, %" PRIu64
             " dropped), %" PRIu64
             " fences that waited; %" PRIu64 " sliced and %" PRIu64 " PTB launches, %" PRIu64
             " preemptions (%" PRIu64 " flags raised by an LC worker), turnaround p50 %.1f us"
             " p99 %.1f us max %.1f us (%" PRIu64
             " timed); %" PRIu64 " LC launches made directly, %" PRIu64 " LC events recorded, %" PRIu64
             " launches of a best-effort tenant alone; %" PRIu64 " FLUSH launches (%" PRIu64
             " redos), %" PRIu64 " blocks given up",
             S.st.submitted, S.st.held, S.st.timed, S.st.dropped, S.st.fences, S.st.sliced, S.st.ptb,
             S.st.preempts, S.st.early_raises, (double)S.st.turn_p50_ns / 1e3,
             (double)S.st.turn_p99_ns / 1e3,
             (double)S.st.turn_max_ns / 1e3, S.st.turnarounds, lc_launches_now(), S.st.lc_events,
             S.st.alone, S.st.flush, S.st.redos, S.st.given_up);
  fence_report();
  pol_stats_t ps;
  pol_sched_stats(S.pol, &ps); /* the scheduler thread has ended */
  /* How the policy chose: a kernel whose forms all miss the budget runs as
   * fallbacks (alone, its least-turnaround form), so many fallbacks of a
   * kernel that offers FLUSH say its drain figure rules FLUSH out. */
  hostd__log(HOSTD_LOG_INFO,
             "scheduler: policy: %" PRIu64 " launches, %" PRIu64 " of kernels not yet profiled, "
             "%" PRIu64 " fallbacks (no form fit the threshold), %" PRIu64
             " profiles reset for drift",
             ps.launches, ps.explore_launches, ps.fallback_launches, ps.reprofiles);
  if (S.cfg.pol.be_partitioned && S.cfg.pol.part_flight_ns) {
    hostd__log(HOSTD_LOG_INFO,
               "scheduler: %" PRIu64 " best-effort launches waited for the partition's "
               "in-flight bound (%.1f us of device time)",
               ps.flight_waits, S.cfg.pol.part_flight_ns / 1e3);
  }
  if (S.st.whole || S.st.whole_forms)
    hostd__log(HOSTD_LOG_INFO,
               "scheduler: %" PRIu64 " best-effort launches on the whole GPU beside the "
               "partition: %" PRIu64 " it could not host, %" PRIu64 " sliced, PTB or FLUSH",
               S.st.whole + S.st.whole_forms, S.st.whole, S.st.whole_forms);
  if (S.trace)
    fprintf(S.trace, "# preemption turnaround: n=%" PRIu64 " p50_ns=%" PRIu64 " p99_ns=%" PRIu64
            " max_ns=%" PRIu64 "\n", S.st.turnarounds, S.st.turn_p50_ns, S.st.turn_p99_ns,
            S.st.turn_max_ns);
  ptb_pool_free();
  hostd__var_shutdown();
  pthread_mutex_lock(&S.namemu);
  if (S.trace)
    fclose(S.trace);
  S.trace = NULL;
  u64map_close(&S.names_done);
  pthread_mutex_unlock(&S.namemu);
  u64map_close(&S.whole_ids);
  for (int k = 0; k < 2; k++) {
    while (S.evpool[k].n > 0)
      (void)hostd__gpu.event_del(S.evpool[k].ev[--S.evpool[k].n]);
    free(S.evpool[k].ev);
    S.evpool[k].ev = NULL;
    S.evpool[k].cap = 0;
  }
  pol_sched_free(S.pol);
  S.pol = NULL;
  u64map_close(&S.resident);
  S.next_submit = 0;
  memset(&S.st, 0, sizeof(S.st));
  memset(S.turn_hist, 0, sizeof(S.turn_hist));
  memset(S.fence_by_op, 0, sizeof(S.fence_by_op));
  S.turn_max_ns = 0;
}
