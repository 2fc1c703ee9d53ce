/* core.c: configuration, budget, shape profiles and planning for the
 * interposed cuBLAS (see tblas.h).
 *
 * The budget: TALLY_GEMM_BUDGET_US when set, else what tallyd advertised
 * through Tally's own export table (guestlib/tally-ext.h).  No table (a real
 * driver) and no variable, a latency-critical tenant, a budget of 0 or
 * TALLY_GEMM_SPLIT=0: every call passes through untouched.  With tallyd's
 * budget (not the variable's), a GEMM is also run whole while tallyd says
 * that no latency-critical tenant is connected (asked at every call: a
 * function reading one word), so a best-effort tenant alone pays nothing
 * for the cut; profiles are still taken, ready for when one connects.
 *
 * Profiles: a bounded open-addressed table of shapes (tblas_key_t).  A new
 * shape runs whole, bracketed by two driver events on its own stream; the
 * events are read with cuEventQuery at later calls of that shape, never
 * waited for, so the caller is never synchronised.  After TBLAS_SAMPLES
 * timed runs the least time is the shape's whole time.  A stream being
 * captured into a graph is never timed (its events would be graph nodes).
 *
 * Cost model: GEMM kernels run their output tiles in waves of about one
 * tile per multiprocessor, and a tile's time is set by k, so a piece takes
 * (whole time) x waves(piece) / waves(whole), waves(x) = ceil(tiles(x) /
 * SMs).  Monotone in m, n and batch, as the planner needs.  A piece never
 * gets cheaper than one wave, so the budget the planner sees is at least
 * one wave: the fewest pieces that reach the least time a piece can take.
 *
 * Lock story: `lock` guards the configuration and the profile table; a
 * thread holds it only inside these functions (no call into cuBLAS).
 */
#include "blas/tblas.h"

#include "guestlib/tally-ext.h"

#include <dlfcn.h>
#include <library_types.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread int tblas_depth;

static const char *const entry_names[TBLAS_ENTRY_COUNT] = {
#define TBLAS_ENTRY_NAME(id, name) [TBLAS_##id] = name,
    TBLAS_ENTRIES(TBLAS_ENTRY_NAME)
#undef TBLAS_ENTRY_NAME
};

const char *tblas_entry_name(int entry) {
  return entry >= 0 && entry < TBLAS_ENTRY_COUNT ? entry_names[entry] : "?";
}

/* ---- the real libraries ---- */

void *tblas_real(const char *name, int lt) {
  static const char *const sonames[2][2] = {{"libcublas.so.13", "libcublas.so"},
                                            {"libcublasLt.so.13", "libcublasLt.so"}};
  void *f = dlsym(RTLD_NEXT, name);
  for (int i = 0; !f && i < 2; i++) {
    /* A library dlopened RTLD_LOCAL (as PyTorch may) is found by its soname. */
    void *h = dlopen(sonames[lt][i], RTLD_NOW | RTLD_NOLOAD);
    if (!h)
      h = dlopen(sonames[lt][i], RTLD_NOW | RTLD_GLOBAL);
    if (h)
      f = dlsym(h, name);
  }
  return f;
}

/* ---- the driver ---- */

static struct {
  CUresult (*get_export_table)(const void **, const CUuuid *);
  CUresult (*event_create)(CUevent *, unsigned);
  CUresult (*event_record)(CUevent, CUstream);
  CUresult (*event_query)(CUevent);
  CUresult (*event_elapsed)(float *, CUevent, CUevent);
  CUresult (*event_destroy)(CUevent);
  CUresult (*is_capturing)(CUstream, CUstreamCaptureStatus *);
  CUresult (*ctx_get_device)(CUdevice *);
  CUresult (*device_attr)(int *, CUdevice_attribute, CUdevice);
} drv;

static void *drv_sym(const char *name) {
  void *f = dlsym(RTLD_DEFAULT, name);
  if (!f) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
      h = dlopen("libcuda.so.1", RTLD_NOW);
    if (h)
      f = dlsym(h, name);
  }
  return f;
}

/* True when every driver function was found. */
static int drv_load(void) {
  struct {
    void **slot;
    const char *name;
  } want[] = {
      {(void **)&drv.get_export_table, "cuGetExportTable"},
      {(void **)&drv.event_create, "cuEventCreate"},
      {(void **)&drv.event_record, "cuEventRecord"},
      {(void **)&drv.event_query, "cuEventQuery"},
      {(void **)&drv.event_elapsed, "cuEventElapsedTime_v2"},
      {(void **)&drv.event_destroy, "cuEventDestroy_v2"},
      {(void **)&drv.is_capturing, "cuStreamIsCapturing"},
      {(void **)&drv.ctx_get_device, "cuCtxGetDevice"},
      {(void **)&drv.device_attr, "cuDeviceGetAttribute"},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    if ((*want[i].slot = drv_sym(want[i].name)) == NULL)
      return 0;
  return 1;
}

/* ---- configuration ---- */

typedef enum { PROF_EMPTY, PROF_PENDING, PROF_MEASURED, PROF_UNTIMED } prof_state_t;

typedef struct {
  tblas_key_t key;
  int state;         /* prof_state_t */
  int samples;       /* timed runs read so far */
  int timing;        /* events recorded and not read yet */
  CUevent ev[2];
  uint64_t whole_ns; /* least time of the samples */
} prof_t;

#define PROF_SLOTS  1024 /* a power of two */
#define PROF_PROBES 8

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int resolved; /* the fields below are set */
  int on;       /* splitting enabled */
  uint64_t budget_ns;
  tally_ext_lc_present_fn lc_present; /* tallyd's word, or NULL: always cut */
  int64_t wave_tiles; /* output tiles that run at once: the SM count */
  FILE *log;
  prof_t prof[PROF_SLOTS];
} S;

static long env_num(const char *name, long dflt) {
  const char *v = getenv(name);
  char *end;
  long x;
  if (!v || !*v)
    return dflt;
  x = strtol(v, &end, 10);
  return *end || x < 0 ? dflt : x;
}

/* Tally's table: 1 found (budget and class filled, *lc the LC slot or NULL
 * from an older guest library), 0 not under Tally. */
static int tally_table(unsigned *budget_us, int *priority, tally_ext_lc_present_fn *lc) {
  static const CUuuid id = {TALLY_EXT_UUID};
  const void *const *t = NULL;
  if (drv.get_export_table((const void **)&t, &id) != CUDA_SUCCESS || t == NULL ||
      (uintptr_t)t[0] < (TALLY_EXT_SLOT_PRIORITY + 1) * sizeof(void *))
    return 0;
  *budget_us = ((tally_ext_be_budget_us_fn)t[TALLY_EXT_SLOT_BUDGET])();
  *priority = ((tally_ext_priority_fn)t[TALLY_EXT_SLOT_PRIORITY])();
  *lc = (uintptr_t)t[0] > TALLY_EXT_SLOT_LC * sizeof(void *)
            ? (tally_ext_lc_present_fn)t[TALLY_EXT_SLOT_LC]
            : NULL;
  return 1;
}

/* Lock held. */
static void resolve(void) {
  unsigned budget_us = 0;
  int prio = 1, tally = 0;
  tally_ext_lc_present_fn lc = NULL;
  long env_budget;
  const char *logpath;
  S.resolved = 1;
  S.on = 0;
  if (env_num(TBLAS_ENV_SPLIT, 1) == 0 || !drv_load())
    return;
  tally = tally_table(&budget_us, &prio, &lc);
  env_budget = env_num(TBLAS_ENV_BUDGET, -1);
  if (env_budget >= 0) {
    budget_us = (unsigned)(env_budget > 100000000 ? 100000000 : env_budget);
    lc = NULL; /* the caller's budget holds whoever is connected */
  }
  S.lc_present = lc;
  if ((tally && prio == 0) || budget_us == 0)
    return;
  S.budget_ns = (uint64_t)budget_us * 1000u;
  S.wave_tiles = 1;
  CUdevice dev;
  int sms = 0;
  if (drv.ctx_get_device(&dev) == CUDA_SUCCESS &&
      drv.device_attr(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS &&
      sms > 0)
    S.wave_tiles = sms;
  logpath = getenv(TBLAS_ENV_LOG);
  if (logpath && *logpath && !S.log) {
    S.log = fopen(logpath, "a");
    if (S.log)
      setvbuf(S.log, NULL, _IOLBF, 0);
  }
  S.on = 1;
}

int tblas_enabled(void) {
  int on;
  pthread_mutex_lock(&lock);
  if (!S.resolved)
    resolve();
  on = S.on;
  pthread_mutex_unlock(&lock);
  return on;
}

static void prof_clear(prof_t *p) {
  if (p->state == PROF_PENDING) {
    (void)drv.event_destroy(p->ev[0]);
    (void)drv.event_destroy(p->ev[1]);
  }
  memset(p, 0, sizeof(*p));
}

void tblas_reset(void) {
  pthread_mutex_lock(&lock);
  for (int i = 0; i < PROF_SLOTS; i++)
    if (S.prof[i].state != PROF_EMPTY)
      prof_clear(&S.prof[i]);
  if (S.log)
    fclose(S.log);
  S.log = NULL;
  S.resolved = 0;
  pthread_mutex_unlock(&lock);
  tblas_lt_forget();
}

/* ---- profiles ---- */

static uint64_t key_hash(const tblas_key_t *k) {
  const unsigned char *b = (const unsigned char *)k;
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < sizeof(*k); i++)
    h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

/* The slot of k, or a new one (evicting the home slot when every probe is
 * taken: the table stays bounded).  Lock held. */
static int prof_slot(const tblas_key_t *k, int *fresh) {
  uint64_t h = key_hash(k);
  int home = (int)(h & (PROF_SLOTS - 1)), empty = -1;
  for (int i = 0; i < PROF_PROBES; i++) {
    int s = (home + i) & (PROF_SLOTS - 1);
    if (S.prof[s].state == PROF_EMPTY) {
      if (empty < 0)
        empty = s;
    } else if (memcmp(&S.prof[s].key, k, sizeof(*k)) == 0) {
      *fresh = 0;
      return s;
    }
  }
  if (empty < 0) {
    empty = home;
    prof_clear(&S.prof[home]);
  }
  S.prof[empty].key = *k;
  *fresh = 1;
  return empty;
}

/* Reads a finished measurement, if any (never waits).  Lock held. */
static void prof_poll(prof_t *p) {
  CUresult r;
  float ms = 0;
  if (!p->timing)
    return;
  r = drv.event_query(p->ev[1]);
  if (r == CUDA_ERROR_NOT_READY)
    return;
  p->timing = 0;
  if (r != CUDA_SUCCESS || drv.event_elapsed(&ms, p->ev[0], p->ev[1]) != CUDA_SUCCESS || ms < 0) {
    tblas_key_t k = p->key;
    prof_clear(p); /* events destroyed */
    p->key = k;
    p->state = PROF_UNTIMED;
    return;
  }
  uint64_t ns = (uint64_t)((double)ms * 1e6);
  if (p->samples == 0 || ns < p->whole_ns)
    p->whole_ns = ns;
  if (++p->samples >= TBLAS_SAMPLES) {
    (void)drv.event_destroy(p->ev[0]);
    (void)drv.event_destroy(p->ev[1]);
    p->state = PROF_MEASURED;
  }
}

static int capturing(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return drv.is_capturing(s, &st) != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE;
}

tblas_verdict_t tblas_decide(tblas_call_t *c, CUstream stream) {
  tblas_verdict_t v = TBLAS_WHOLE;
  int fresh, s;
  prof_t *p;
  c->slot = -1;
  c->why = "budget off";
  pthread_mutex_lock(&lock);
  if (!S.resolved)
    resolve();
  if (!S.on)
    goto out;
  c->budget_ns = S.budget_ns;
  s = prof_slot(&c->key, &fresh);
  p = &S.prof[s];
  if (fresh) {
    p->state = PROF_PENDING;
    if (drv.event_create(&p->ev[0], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      p->state = PROF_UNTIMED;
    } else if (drv.event_create(&p->ev[1], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
      (void)drv.event_destroy(p->ev[0]);
      p->state = PROF_UNTIMED;
    }
  }
  switch (p->state) {
  case PROF_UNTIMED:
    c->why = "cannot be timed";
    break;
  case PROF_PENDING:
    prof_poll(p);
    if (p->state == PROF_MEASURED)
      goto measured;
    if (p->state != PROF_PENDING) {
      c->why = "timing failed";
      break;
    }
    c->why = "timing";
    if (!p->timing && !capturing(stream)) {
      p->timing = 1; /* recorded by tblas_time_begin/end, under this verdict */
      c->slot = s;
      v = TBLAS_TIME;
    }
    break;
  case PROF_MEASURED:
  measured:
    c->whole_ns = p->whole_ns;
    c->slot = s;
    if (p->whole_ns <= S.budget_ns) {
      c->why = "fits the budget";
      break;
    }
    if (S.lc_present && !S.lc_present()) {
      c->why = "no latency-critical tenant";
      break;
    }
    v = TBLAS_SPLIT;
    break;
  }
out:
  pthread_mutex_unlock(&lock);
  return v;
}

/* Records c's timing event `which` (0 before the whole run, 1 after) on
 * stream; a failed record leaves the run untimed. */
static void time_mark(const tblas_call_t *c, CUstream stream, int which) {
  pthread_mutex_lock(&lock);
  if (c->slot >= 0 && S.prof[c->slot].timing &&
      drv.event_record(S.prof[c->slot].ev[which], stream) != CUDA_SUCCESS)
    S.prof[c->slot].timing = 0;
  pthread_mutex_unlock(&lock);
}

void tblas_time_begin(const tblas_call_t *c, CUstream stream) {
  time_mark(c, stream, 0);
}

void tblas_time_end(const tblas_call_t *c, CUstream stream) {
  time_mark(c, stream, 1);
}

/* ---- the cost model and planning ---- */

typedef struct {
  uint64_t whole_ns, whole_waves;
  int64_t wave_tiles;
} cost_t;

static uint64_t waves(int64_t m, int64_t n, int64_t batch, int64_t wave_tiles) {
  uint64_t tiles = (uint64_t)((m + TBLAS_TILE - 1) / TBLAS_TILE) *
                   (uint64_t)((n + TBLAS_TILE - 1) / TBLAS_TILE) * (uint64_t)batch;
  return (tiles + (uint64_t)wave_tiles - 1) / (uint64_t)wave_tiles;
}

static uint64_t cost_fn(int64_t m, int64_t n, int64_t k, int64_t batch, void *user) {
  const cost_t *c = user;
  (void)k;
  return (uint64_t)((double)c->whole_ns * (double)waves(m, n, batch, c->wave_tiles) /
                    (double)c->whole_waves);
}

static cost_t cost_of(const tblas_call_t *c) {
  cost_t m;
  pthread_mutex_lock(&lock);
  m.wave_tiles = S.wave_tiles > 0 ? S.wave_tiles : 1;
  pthread_mutex_unlock(&lock);
  m.whole_ns = c->whole_ns;
  m.whole_waves = waves(c->key.m, c->key.n, c->key.batch, m.wave_tiles);
  if (m.whole_waves == 0)
    m.whole_waves = 1;
  return m;
}

size_t tblas_plan(tblas_call_t *c, const gemm_plan_gemm_t *g, const gemm_plan_piece_t **out) {
  static __thread gemm_plan_piece_t pieces[TBLAS_MAX_PIECES];
  cost_t m = cost_of(c);
  gemm_plan_budget_t bud = {.tile = TBLAS_TILE, .cost = cost_fn, .cost_user = &m};
  uint64_t one_wave = cost_fn(1, 1, g->k, 1, &m);
  size_t n = 0;
  bud.max_cost = c->budget_ns > one_wave ? c->budget_ns : one_wave;
  gemm_plan_reason_t r = gemm_plan_split(g, &bud, pieces, TBLAS_MAX_PIECES, &n);
  if (r != GEMM_PLAN_OK) {
    c->why = gemm_plan_reason_text(r);
    return 0;
  }
  if (n < 2) {
    c->why = "one wave already takes the whole time";
    return 0;
  }
  *out = pieces;
  return n;
}

int64_t tblas_batch_group(tblas_call_t *c, int64_t m, int64_t n, int64_t k, int64_t batch) {
  cost_t cm = cost_of(c);
  uint64_t one_wave = cost_fn(1, 1, k, 1, &cm);
  uint64_t max = c->budget_ns > one_wave ? c->budget_ns : one_wave;
  int64_t lo = 1, hi = batch; /* the largest group that fits, at least 1 */
  while (lo < hi) {
    int64_t mid = hi - (hi - lo) / 2;
    if (cost_fn(m, n, k, mid, &cm) <= max)
      lo = mid;
    else
      hi = mid - 1;
  }
  if (lo >= batch) {
    c->why = "one wave already takes the whole time";
    return 0;
  }
  if ((batch + lo - 1) / lo > TBLAS_MAX_PIECES) {
    c->why = gemm_plan_reason_text(GEMM_PLAN_TOO_MANY);
    return 0;
  }
  return lo;
}

void tblas_log(const tblas_call_t *c, size_t pieces) {
  const tblas_key_t *k = &c->key;
  pthread_mutex_lock(&lock);
  if (S.log)
    fprintf(S.log,
            "%s m=%lld n=%lld k=%lld batch=%lld types=%d/%d/%d/%d compute=%d trans=%d/%d epi=%d "
            "whole_us=%.1f budget_us=%.1f pieces=%zu reason=%s\n",
            tblas_entry_name(k->entry), (long long)k->m, (long long)k->n, (long long)k->k,
            (long long)k->batch, k->atype, k->btype, k->ctype, k->dtype, k->compute, k->transa,
            k->transb, k->epi, (double)c->whole_ns / 1e3, (double)c->budget_ns / 1e3, pieces,
            pieces > 1 ? "split" : c->why);
  pthread_mutex_unlock(&lock);
}

/* ---- types ---- */

int tblas_plan_type(int t) {
  switch (t) {
  case CUDA_R_16F: return GEMM_PLAN_F16;
  case CUDA_R_16BF: return GEMM_PLAN_BF16;
  case CUDA_R_32F: return GEMM_PLAN_F32;
  case CUDA_R_64F: return GEMM_PLAN_F64;
  case CUDA_C_16F: return GEMM_PLAN_C16F;
  case CUDA_C_32F: return GEMM_PLAN_C32F;
  case CUDA_C_64F: return GEMM_PLAN_C64F;
  case CUDA_R_8I: return GEMM_PLAN_I8;
  case CUDA_R_8U: return GEMM_PLAN_U8;
  case CUDA_R_32I: return GEMM_PLAN_I32;
  case CUDA_R_8F_E4M3: return GEMM_PLAN_E4M3;
  case CUDA_R_8F_E5M2: return GEMM_PLAN_E5M2;
  default: return -1;
  }
}
