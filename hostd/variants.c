/* variants.c: slice and PTB variants of tenants' PTX kernels, built by one
 * background thread and shared by content id (variants.h says what and
 * why; docs/scheduler.md how the scheduler uses them).
 *
 * A set moves QUEUED -> BUILDING -> READY (its kernels are in `byid`) or
 * NONE (no PTX, nothing accepted, or a failure: only originals).  The queue
 * and the builder each hold a reference while a set is theirs, so a set
 * whose count reaches 0 is neither queued nor being built; it is then
 * unlinked under the lock and its module unloaded outside it.
 *
 * Refusals: a module whose PTX declares module-scope .global or .const
 * variables gets no variants (the variant module would have its own copy
 * of them, not the tenant's); kernels rewrite/ refuses keep the original
 * only.  Each refusal is logged once per kernel id for the daemon's life.
 *
 * After a context-corrupting error every set is dropped at once
 * (hostd__var_reset): marked dead, unlinked, its module handle forgotten;
 * a dead set is freed with its last reference and never unloads anything,
 * and a build that was in progress publishes nothing (`gen`).  A later
 * load of the same content id makes a new set and builds again.
 *
 * Lock story: `mu` guards every set, the queue, `byid`, `logged` and the
 * counters; the builder drops it while extracting, transforming, compiling
 * and loading.
 */
#include "hostd/variants.h"
#include "hostd/gpu.h"
#include "hostd/guard.h"
#include "hostd/hostd-int.h"
#include "hostd/sched.h"
#include "rewrite/rw.h"
#include "wire/u64map.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum set_state { SET_QUEUED, SET_BUILDING, SET_READY, SET_NONE } set_state_t;

typedef struct hostd_var_set {
  uint64_t cid;
  unsigned refs;
  unsigned mrefs; /* of refs, the module loads' (hostd__var_module_ref) */
  bool dead;      /* dropped by hostd__var_reset: off the table, its module died with the context */
  set_state_t state;
  uint64_t module; /* the loaded variant module, 0 if none */
  hostd_var_kernel_t *k;
  size_t nk;
  struct hostd_var_set *next, *qnext;
} var_set_t;

static struct {
  pthread_mutex_t mu;
  uint64_t gen; /* bumped by hostd__var_reset: a build begun before publishes nothing */
  pthread_cond_t cv;
  hostd_var_config_t cfg;
  bool on, stop, busy;
  pthread_t th;
  var_set_t *sets, *qhead, *qtail;
  u64map_t byid;   /* kernel id -> hostd_var_kernel_t* (READY sets) */
  u64map_t logged; /* kernel ids whose refusal was logged */
  hostd_var_stats_t st;
} V = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

/* ---- references ---- */

static var_set_t *set_find(uint64_t cid) {
  for (var_set_t *s = V.sets; s; s = s->next)
    if (s->cid == cid)
      return s;
  return NULL;
}

/* Lock held: drops one reference; returns the set when it must be freed
 * (already unlinked), else NULL. */
static var_set_t *unref_locked(var_set_t *s) {
  if (--s->refs > 0)
    return NULL;
  if (s->dead) /* off the table and uncounted since the reset */
    return s;
  for (size_t i = 0; i < s->nk; i++)
    u64map_del(&V.byid, s->k[i].kernel_id);
  if (s->nk)
    V.st.kernels -= s->nk;
  for (var_set_t **p = &V.sets; *p; p = &(*p)->next)
    if (*p == s) {
      *p = s->next;
      break;
    }
  V.st.sets--;
  if (s->module)
    V.st.modules--;
  return s;
}

/* Outside the lock: the variant module goes with its set. */
static void set_free(var_set_t *s) {
  if (!s)
    return;
  if (s->module)
    (void)hostd__gpu.module_unload(s->module, 0);
  free(s->k);
  free(s);
}

void hostd__var_module_ref(uint64_t cid) {
  var_set_t *s;
  pthread_mutex_lock(&V.mu);
  if (!V.on) {
    pthread_mutex_unlock(&V.mu);
    return;
  }
  if ((s = set_find(cid)) != NULL) {
    s->refs++;
    s->mrefs++;
  } else if ((s = calloc(1, sizeof(*s))) != NULL) {
    s->cid = cid;
    s->refs = 2; /* the module's and the queue's */
    s->mrefs = 1;
    s->state = SET_QUEUED;
    s->next = V.sets;
    V.sets = s;
    V.st.sets++;
    if (V.qtail)
      V.qtail->qnext = s;
    else
      V.qhead = s;
    V.qtail = s;
    pthread_cond_broadcast(&V.cv);
  } /* no memory: this module gets no variants (its originals run) */
  pthread_mutex_unlock(&V.mu);
}

void hostd__var_module_unref(uint64_t cid) {
  var_set_t *s, *gone = NULL;
  pthread_mutex_lock(&V.mu);
  if (V.on && (s = set_find(cid)) != NULL && s->mrefs > 0) {
    s->mrefs--;
    gone = unref_locked(s);
  }
  pthread_mutex_unlock(&V.mu);
  set_free(gone);
}

const hostd_var_kernel_t *hostd__var_get(uint64_t kernel_id, unsigned *forms) {
  hostd_var_kernel_t *k = NULL;
  uint64_t v;
  *forms = 0;
  pthread_mutex_lock(&V.mu);
  if (V.on && kernel_id && u64map_get(&V.byid, kernel_id, &v)) {
    k = (hostd_var_kernel_t *)(uintptr_t)v;
    k->set->refs++;
    if (k->fn[VAR_FORM_SLICE].f) {
      *forms |= 1u << VAR_FORM_SLICE;
      if (k->fn[VAR_FORM_PTB].f) /* a preempted PTB launch resumes sliced */
        *forms |= 1u << VAR_FORM_PTB;
    }
    if (k->fn[VAR_FORM_FLUSH].f) /* runs any range, and its own redo */
      *forms |= 1u << VAR_FORM_FLUSH;
    *forms &= V.cfg.forms;
  }
  pthread_mutex_unlock(&V.mu);
  return k;
}

void hostd__var_hold(const hostd_var_kernel_t *k) {
  if (!k)
    return;
  pthread_mutex_lock(&V.mu);
  k->set->refs++;
  pthread_mutex_unlock(&V.mu);
}

void hostd__var_put(const hostd_var_kernel_t *k) {
  var_set_t *gone;
  if (!k)
    return;
  pthread_mutex_lock(&V.mu);
  gone = unref_locked(k->set);
  pthread_mutex_unlock(&V.mu);
  set_free(gone);
}

/* ---- building ---- */

/* Module-scope .global / .const variables (optionally after linkage
 * words): the variant module would get its own copy of each. */
static bool has_module_vars(const char *ptx) {
  for (const char *p = ptx; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
    while (*p == ' ' || *p == '\t')
      p++;
    for (;;) {
      size_t n = strcspn(p, " \t\n");
      if ((n == 8 && strncmp(p, ".visible", 8) == 0) || (n == 7 && strncmp(p, ".extern", 7) == 0) ||
          (n == 5 && strncmp(p, ".weak", 5) == 0) || (n == 7 && strncmp(p, ".common", 7) == 0)) {
        p += n;
        p += strspn(p, " \t");
        continue;
      }
      if ((n == 7 && strncmp(p, ".global", 7) == 0) || (n == 6 && strncmp(p, ".const", 6) == 0))
        return true;
      break;
    }
  }
  return false;
}

/* The rewrite/ transforms of VAR_FORM_* form i, and those the builder asks
 * for: slice and PTB always (the sliced form resumes a preempted PTB
 * launch and --variants filters what is offered), FLUSH when configured
 * (it costs a JIT of its own). */
static const int var_xform[VAR_FORMS] = {RW_XFORM_SLICE, RW_XFORM_PTB, RW_XFORM_FLUSH};

static unsigned var_xforms(void) {
  unsigned m = RW_XFORM_MASK(RW_XFORM_SLICE) | RW_XFORM_MASK(RW_XFORM_PTB);
  if (V.cfg.forms & (1u << VAR_FORM_FLUSH))
    m |= RW_XFORM_MASK(RW_XFORM_FLUSH);
  return m;
}

static void log_refusals(uint64_t cid, const rw_xform_report_t *rep, unsigned *accepted) {
  *accepted = 0;
  for (size_t i = 0; i < rep->n_entries; i++) {
    const rw_xform_entry_report_t *e = &rep->entries[i];
    uint64_t kid = hostd__sched_kernel_id(cid, e->name);
    bool any = false;
    for (int kind = 0; kind < RW_XFORM_KIND_COUNT; kind++) {
      if (e->status[kind] == 0) {
        any = true;
        continue;
      }
      if (e->status[kind] == 1)
        continue; /* not asked for */
      pthread_mutex_lock(&V.mu);
      V.st.refused++;
      bool first = !u64map_get(&V.logged, kid ^ (uint64_t)(kind + 1), NULL) &&
                   u64map_put(&V.logged, kid ^ (uint64_t)(kind + 1), 1) == 0;
      pthread_mutex_unlock(&V.mu);
      if (first)
        hostd__log(HOSTD_LOG_INFO, "variants: kernel %.200s has no %s form: %s (%.160s)", e->name,
                   kind == RW_XFORM_SLICE ? "sliced" : kind == RW_XFORM_PTB ? "PTB" : "FLUSH",
                   rw_refusal_name(e->why[kind]),
                   e->reason[kind]);
    }
    *accepted += any;
  }
}

typedef struct build_ctx {
  uint64_t cid;
  int why; /* set when the compile callback refused: -ENOENT no PTX / nothing accepted */
} build_ctx_t;

/* rw_cache's compile callback: image -> PTX -> transformed PTX -> cubin. */
static int compile_image(void *arg, const void *src, size_t len, void **image, size_t *image_len) {
  build_ctx_t *c = arg;
  char *ptx = NULL, *out = NULL;
  size_t plen = 0, olen = 0;
  unsigned parch = 0, accepted = 0;
  rw_xform_report_t rep;
  rw_diag_t d;
  int rc = rw_fatbin_ptx(src, len, V.cfg.arch, &ptx, &plen, &parch, &d);
  if (rc < 0 || !ptx) { /* not an image rewrite/ reads, or no PTX in it: originals only */
    free(ptx);
    return c->why = -ENOENT;
  }
  if (has_module_vars(ptx)) {
    hostd__log(HOSTD_LOG_INFO, "variants: module %016" PRIx64 " declares module-scope "
               "variables; its kernels run as they are", c->cid);
    free(ptx);
    return c->why = -ENOENT;
  }
  memset(&rep, 0, sizeof(rep));
  rc = rw_transform_ptx(ptx, plen, var_xforms(), &out, &olen, &rep);
  free(ptx);
  if (rc == 0)
    log_refusals(c->cid, &rep, &accepted);
  else
    hostd__log(HOSTD_LOG_INFO, "variants: module %016" PRIx64 ": PTX not transformable (%s)",
               c->cid, rep.parse_diag.text);
  rw_xform_report_free(&rep);
  if (rc == 0 && accepted == 0)
    rc = -ENOENT;
  if (rc == 0) {
    CUresult r = hostd__gpu.jit(out, olen, image, image_len);
    rc = r == CUDA_SUCCESS ? 0 : -EIO;
    pthread_mutex_lock(&V.mu);
    V.st.jits += r == CUDA_SUCCESS;
    pthread_mutex_unlock(&V.mu);
  }
  free(out);
  if (rc < 0)
    c->why = rc;
  return rc;
}

typedef struct collect {
  uint64_t cid;
  hostd_var_kernel_t *k;
  size_t nk, cap;
  bool oom;
} collect_t;

/* A variant function of the loaded module: NAME__tally_slice,
 * NAME__tally_ptb or NAME__tally_flush, keyed by NAME's kernel id. */
static int collect_fn(void *arg, const hostd_func_info_t *f) {
  collect_t *c = arg;
  static const uint32_t nextra[VAR_FORMS] = {VAR_SLICE_NEXTRA, VAR_PTB_NEXTRA, VAR_FLUSH_NEXTRA};
  char base[CALL_FUNC_NAME_MAX];
  size_t n = strlen(f->name);
  for (int form = 0; form < VAR_FORMS; form++) {
    const char *suf = rw_xform_suffix(var_xform[form]);
    size_t m = strlen(suf);
    hostd_var_kernel_t *k = NULL;
    hostd_var_fn_t *fn;
    uint32_t first;
    if (n <= m || n - m >= sizeof(base) || strcmp(f->name + n - m, suf) != 0 ||
        f->nparams < nextra[form])
      continue;
    memcpy(base, f->name, n - m);
    base[n - m] = 0;
    uint64_t kid = hostd__sched_kernel_id(c->cid, base);
    for (size_t i = 0; i < c->nk && !k; i++)
      if (c->k[i].kernel_id == kid)
        k = &c->k[i];
    if (!k) {
      if (c->nk == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        hostd_var_kernel_t *nk = realloc(c->k, cap * sizeof(*nk));
        if (!nk)
          return c->oom = true, 1;
        c->k = nk;
        c->cap = cap;
      }
      k = &c->k[c->nk++];
      memset(k, 0, sizeof(*k));
      k->kernel_id = kid;
    }
    fn = &k->fn[form];
    first = f->nparams - nextra[form];
    fn->f = f->handle;
    fn->first_extra = f->off[first];
    fn->args_end = f->off[f->nparams - 1] + f->size[f->nparams - 1];
    for (uint32_t j = 0; j < nextra[form]; j++) {
      fn->off[j] = f->off[first + j];
      fn->size[j] = f->size[first + j];
    }
  }
  return 0;
}

/* Loads the compiled image and publishes its kernels. 0 or -errno. */
static int publish(var_set_t *s, const void *image, size_t len, uint64_t gen) {
  collect_t c = {.cid = s->cid};
  uint64_t mod = 0;
  CUresult r = hostd__gpu.module_load(&mod, 0, image, len);
  if (r == CUDA_SUCCESS)
    r = hostd__gpu.module_functions(mod, 0, false, collect_fn, &c);
  if (r != CUDA_SUCCESS || c.nk == 0) {
    hostd__log(HOSTD_LOG_WARN, "variants: module %016" PRIx64 ": the compiled variants %s (%d)",
               s->cid, r == CUDA_SUCCESS ? "hold no variant function" : "do not load", (int)r);
    if (mod)
      (void)hostd__gpu.module_unload(mod, 0);
    free(c.k);
    return -EIO;
  }
  pthread_mutex_lock(&V.mu);
  if (s->dead || gen != V.gen) {
    /* A reset came while this was built: the context it was loaded in is
     * gone (or going), so the module is neither published nor unloaded. */
    pthread_mutex_unlock(&V.mu);
    free(c.k);
    return -ESTALE;
  }
  s->module = mod;
  s->k = c.k;
  s->nk = c.nk;
  for (size_t i = 0; i < c.nk; i++) {
    c.k[i].set = s;
    if (u64map_put(&V.byid, c.k[i].kernel_id, (uint64_t)(uintptr_t)&c.k[i]) != 0)
      c.k[i].fn[0].f = c.k[i].fn[1].f = 0; /* unreachable: no memory for the index */
  }
  s->state = SET_READY;
  V.st.kernels += c.nk;
  V.st.modules++;
  pthread_mutex_unlock(&V.mu);
  return 0;
}

/* Builds one set: cache or compile, then load.  Lock not held. */
static void build(rw_cache_t *cache, var_set_t *s) {
  build_ctx_t c = {.cid = s->cid, .why = 0};
  void *image = NULL;
  size_t len = 0, ilen = 0;
  int hit = 0, rc;
  uint64_t gen;
  const void *src;
  pthread_mutex_lock(&V.mu);
  gen = V.gen;
  pthread_mutex_unlock(&V.mu);
  src = hostd__modcache_get(s->cid, &len); /* pinned until unpin */
  if (!src) {
    rc = -ENOENT;
  } else if (cache) {
    char tag[200];
    snprintf(tag, sizeof(tag), "tally-variants-2 x%u %s", var_xforms(), V.cfg.tag);
    rc = rw_cache_get(cache, src, len, tag, compile_image, &c, &image, &ilen, &hit);
  } else {
    rc = compile_image(&c, src, len, &image, &ilen);
  }
  hostd__modcache_unpin();
  if (rc == 0)
    rc = publish(s, image, ilen, gen);
  free(image);
  pthread_mutex_lock(&V.mu);
  V.st.builds++;
  V.st.cache_hits += rc == 0 && hit;
  if (rc != 0) {
    s->state = SET_NONE;
    if (c.why == -ENOENT || rc == -ENOENT)
      V.st.no_ptx++;
    else if (rc != -ESTALE) /* a reset meanwhile is no failure */
      V.st.failed++;
  }
  pthread_mutex_unlock(&V.mu);
  if (rc != 0 && c.why != -ENOENT && rc != -ENOENT && rc != -ESTALE)
    hostd__log(HOSTD_LOG_WARN, "variants: module %016" PRIx64 ": no variants (%s)", s->cid,
               strerror(rc < 0 ? -rc : rc));
}

static void *builder_main(void *arg) {
  rw_cache_t *cache = NULL;
  int rc;
  (void)arg;
  if (hostd__gpu.thread_enter() != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_ERROR, "variants: cannot make the GPU context current");
  if (V.cfg.cache_dir[0] && (rc = rw_cache_open(V.cfg.cache_dir, &cache)) < 0)
    hostd__log(HOSTD_LOG_WARN, "variants: no compile cache in %s (%s)", V.cfg.cache_dir,
               strerror(-rc));
  pthread_mutex_lock(&V.mu);
  for (;;) {
    var_set_t *s = V.qhead, *gone;
    if (!s && V.stop)
      break;
    if (!s) {
      pthread_cond_wait(&V.cv, &V.mu);
      continue;
    }
    if (!(V.qhead = s->qnext))
      V.qtail = NULL;
    s->qnext = NULL;
    V.busy = true;
    /* Unreferenced or reset meanwhile: nobody will launch it. */
    if (s->refs > 1 && !V.stop && !s->dead) {
      s->state = SET_BUILDING;
      pthread_mutex_unlock(&V.mu);
      build(cache, s);
      pthread_mutex_lock(&V.mu);
    } else {
      s->state = SET_NONE;
    }
    gone = unref_locked(s); /* the queue's reference */
    pthread_mutex_unlock(&V.mu);
    set_free(gone);
    pthread_mutex_lock(&V.mu);
    V.busy = false;
    pthread_cond_broadcast(&V.cv);
  }
  pthread_mutex_unlock(&V.mu);
  rw_cache_close(cache);
  return NULL;
}

int hostd__var_init(const hostd_var_config_t *cfg) {
  int rc;
  pthread_mutex_lock(&V.mu);
  V.cfg = *cfg;
  V.stop = false;
  memset(&V.st, 0, sizeof(V.st));
  u64map_init(&V.byid);
  u64map_init(&V.logged);
  pthread_mutex_unlock(&V.mu);
  if (!cfg->forms)
    return 0;
  if ((rc = -pthread_create(&V.th, NULL, builder_main, NULL)) < 0)
    return rc;
  pthread_mutex_lock(&V.mu);
  V.on = true;
  pthread_mutex_unlock(&V.mu);
  return 0;
}

void hostd__var_shutdown(void) {
  pthread_mutex_lock(&V.mu);
  if (!V.on) {
    pthread_mutex_unlock(&V.mu);
    return;
  }
  V.stop = true;
  pthread_cond_broadcast(&V.cv);
  pthread_mutex_unlock(&V.mu);
  pthread_join(V.th, NULL);
  pthread_mutex_lock(&V.mu);
  V.on = false;
  while (V.sets) { /* references a caller forgot: unload anyway */
    var_set_t *s = V.sets;
    V.sets = s->next;
    pthread_mutex_unlock(&V.mu);
    s->next = NULL;
    set_free(s);
    pthread_mutex_lock(&V.mu);
  }
  u64map_close(&V.byid);
  u64map_close(&V.logged);
  pthread_mutex_unlock(&V.mu);
}

/* Every set leaves the table: its kernels from `byid`, its module handle
 * forgotten (never unloaded: it died with the context), the module loads'
 * references dropped (their tenants are released without touching the
 * GPU).  What launches still hold keeps the set's memory until they put it. */
void hostd__var_reset(void) {
  var_set_t *gone = NULL;
  pthread_mutex_lock(&V.mu);
  V.gen++;
  while (V.sets) {
    var_set_t *s = V.sets;
    V.sets = s->next;
    s->next = NULL;
    for (size_t i = 0; i < s->nk; i++)
      u64map_del(&V.byid, s->k[i].kernel_id);
    V.st.kernels -= s->nk;
    V.st.sets--;
    V.st.modules -= s->module != 0;
    s->module = 0;
    s->dead = true;
    if (s->state == SET_READY)
      s->state = SET_NONE;
    s->refs -= s->mrefs;
    s->mrefs = 0;
    if (s->refs == 0) { /* neither queued nor being built: free it below */
      s->next = gone;
      gone = s;
    }
  }
  pthread_mutex_unlock(&V.mu);
  while (gone) {
    var_set_t *s = gone;
    gone = s->next;
    set_free(s);
  }
}

void hostd__var_stats(hostd_var_stats_t *out) {
  pthread_mutex_lock(&V.mu);
  *out = V.st;
  pthread_mutex_unlock(&V.mu);
}

void hostd__var_wait_idle(void) {
  pthread_mutex_lock(&V.mu);
  while (V.on && (V.qhead || V.busy))
    pthread_cond_wait(&V.cv, &V.mu);
  pthread_mutex_unlock(&V.mu);
}
