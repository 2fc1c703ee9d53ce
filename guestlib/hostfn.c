/* hostfn.c: host functions on streams (cuLaunchHostFunc, cuStreamAddCallback).
 *
 * Stream-ordered and non-blocking, as in CUDA: the call posts HOSTFN (stream,
 * seq) in program order and returns; the guest keeps seq -> function here.
 * tallyd gates the real stream (wire/call.def, HOSTFN): when the stream reaches the
 * function, the daemon answers this library's host-function thread, which
 * runs the function and tells the daemon it finished (the next HOSTFN_WAIT
 * carries done 1), and only then does the stream go on.  So work enqueued
 * after a host function waits for it, a stream query meanwhile answers
 * CUDA_ERROR_NOT_READY, and a synchronisation waits for it to run.
 *
 * Graphs: a host node (cuGraphAddHostNode) or a host function captured into
 * a graph runs at every replay, so its entry stays: the daemon hands its seq
 * with KEEP (run it, keep it), and once no graph or exec holds it, with DROP
 * (forget it; nothing ran).  A captured function's entry is the one its
 * cuLaunchHostFunc made; the guest cannot tell that its stream was
 * capturing (it may have joined a capture through an event), the daemon can.
 *
 * The thread is created at the first host function (CUDA itself runs host
 * functions on a driver thread of its own) and lives until the process
 * exits or the channel is lost.  Functions run one at a time, in the order
 * the daemon hands them out (the order streams reach them).
 *
 * Lock story: `lock` guards the table, the outstanding count and `started`.
 * No lock is held while a function runs or across a round trip.
 */
#include "guestlib/guest.h"

#include <errno.h>
#include <string.h>

/* Must be >= tallyd's per-tenant limit (256 pending host functions,
 * the daemon's host-function slots) so a full daemon, not this table, is what refuses. */
#define TABLE_SIZE  1024
#define PENDING_MAX 256

typedef struct entry {
  uint64_t seq; /* 0: free */
  int kind;     /* 0 CUhostFn, 1 CUstreamCallback */
  void *fn, *data;
  CUstream stream; /* the application's stream value, for callbacks */
} entry_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t table[TABLE_SIZE]; /* by seq % TABLE_SIZE */
static uint64_t next_seq;         /* last seq handed out */
static unsigned pending;          /* entries in use */
static bool started;              /* the thread runs */

/* The seq bits of a graph's host function (wire/call.def, HOSTFN_WAIT). */
#define SEQ_KEEP (1ull << 63)
#define SEQ_DROP (1ull << 62)

/* Copies the entry of seq, taking it out of the table unless keep; false
 * when it is unknown. */
static bool take_or_keep(uint64_t seq, entry_t *out, bool keep) {
  bool ok = false;
  pthread_mutex_lock(&lock);
  entry_t *e = &table[seq % TABLE_SIZE];
  if (seq != 0 && e->seq == seq) {
    *out = *e;
    if (!keep) {
      e->seq = 0;
      pending--;
    }
    ok = true;
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

static bool take(uint64_t seq, entry_t *out) {
  return take_or_keep(seq, out, false);
}

static void *hostfn_thread(void *arg) {
  call_hostfn_wait_req_t q = {.done = 0};
  (void)arg;
  for (;;) {
    call_hostfn_wait_rep_t a = {0};
    uint8_t rep[CALL_HOSTFN_WAIT_REP_FIXED];
    uint64_t seq;
    size_t got = 0;
    CUresult res = CUDA_SUCCESS;
    entry_t e;
    int rc = guest__call(CALL_OP_HOSTFN_WAIT, 0, &q, &res, rep, sizeof(rep), &got, NULL);
    if (rc != 0)
      break; /* the channel is lost: chan.c said so */
    if (res != CUDA_SUCCESS || call_hostfn_wait_rep_decode(rep, got, &a, NULL) != 0) {
      guest__log("tallyd refused the host-function poll (%d); host functions stop", (int)res);
      break;
    }
    seq = a.seq;
    if (seq == 0)
      break; /* asked to stop */
    if (seq & SEQ_DROP) { /* no graph holds it now: forget it, nothing ran */
      (void)take(seq & ~SEQ_DROP, &e);
      q.done = 0;
      continue;
    }
    q.done = 1; /* whatever happens below, the next poll reports it done */
    if (!take_or_keep(seq & ~SEQ_KEEP, &e, (seq & SEQ_KEEP) != 0)) {
      guest__log("tallyd reached unknown host function %llu",
                 (unsigned long long)(seq & ~SEQ_KEEP));
      continue;
    }
    if (e.kind == 0)
      ((CUhostFn)e.fn)(e.data);
    else
      ((CUstreamCallback)e.fn)(e.stream, CUDA_SUCCESS, e.data);
  }
  pthread_mutex_lock(&lock);
  started = false;
  pthread_mutex_unlock(&lock);
  return NULL;
}

/* A new entry (the thread started if it is not running): its seq in *out.
 * Entries a graph keeps stay while later ones are made, so the next free
 * slot is searched for. */
static CUresult entry_new(int kind, void *fn, void *data, CUstream app_stream, uint64_t *out) {
  uint64_t seq = 0;
  pthread_t th;
  pthread_attr_t attr;
  bool start = false;
  int rc;

  pthread_mutex_lock(&lock);
  for (int k = 0; pending < PENDING_MAX && !seq && k < TABLE_SIZE; k++)
    if (table[++next_seq % TABLE_SIZE].seq == 0 && next_seq != 0 &&
        !(next_seq & (SEQ_KEEP | SEQ_DROP))) {
      seq = next_seq;
      table[seq % TABLE_SIZE] = (entry_t){seq, kind, fn, data, app_stream};
      pending++;
    }
  if (seq && !started)
    start = started = true;
  pthread_mutex_unlock(&lock);
  if (!seq)
    return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (start) {
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&th, &attr, hostfn_thread, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      entry_t e;
      pthread_mutex_lock(&lock);
      started = false;
      pthread_mutex_unlock(&lock);
      (void)take(seq, &e);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  }
  *out = seq;
  return CUDA_SUCCESS;
}

CUresult guest__hostfn_keep(void *fn, void *data, uint64_t *seq) {
  CUresult r = guest__ready();
  if (r != CUDA_SUCCESS)
    return r;
  return fn ? entry_new(0, fn, data, NULL, seq) : CUDA_ERROR_INVALID_VALUE;
}

bool guest__hostfn_params(uint64_t seq, void **fn, void **data) {
  entry_t e;
  if (!take_or_keep(seq & ~(SEQ_KEEP | SEQ_DROP), &e, true))
    return false;
  *fn = e.fn;
  *data = e.data;
  return true;
}

void guest__hostfn_forget(uint64_t seq) {
  entry_t e;
  (void)take(seq, &e);
}

CUresult guest__hostfn(uint64_t s, CUstream app_stream, int kind, void *fn, void *data) {
  uint64_t seq = 0;
  call_hostfn_req_t q;
  int rc;
  CUresult r = guest__ready();

  if (r != CUDA_SUCCESS)
    return r;
  if (!fn)
    return CUDA_ERROR_INVALID_VALUE;
  if ((r = entry_new(kind, fn, data, app_stream, &seq)) != CUDA_SUCCESS)
    return r;
  q = (call_hostfn_req_t){.stream = s, .seq = seq};
  rc = guest__post(CALL_OP_HOSTFN, &q);
  if (rc) {
    entry_t e;
    (void)take(seq, &e);
    return guest__cu_error(rc);
  }
  return CUDA_SUCCESS;
}
