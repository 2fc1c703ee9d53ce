/* tables.c: what the guest remembers so it can answer without a round trip.
 *
 * Two tables: the tenant's own allocations (device memory and host memory
 * handed out by cuMemHostAlloc), sorted by base for binary search, which
 * answer pointer attributes and tell cuMemcpy's direction; and the functions
 * of every loaded module with their parameter layouts (from the host's
 * MODULE_LOAD reply), which let cuLaunchKernel pack arguments and
 * cuModuleGetFunction resolve names locally.  Both are guarded by their own
 * mutex (never guest__g.lock, which may be held across a round trip).
 * Function entries are never moved once created (the map holds pointers),
 * and live until their module is unloaded.
 */
#include "guestlib/guest.h"
#include "wire/u64map.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct mem_rec {
  uint64_t base, size;
  guest_mem_kind_t kind;
  unsigned flags;
} mem_rec_t;

/* Lock story: mem_lock guards mems/nmem/capmem. */
static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_rec_t *mems;
static size_t nmem, capmem;
/* Host records tallyd cannot reach (not GUEST_HOST_REACHABLE): written under
 * mem_lock, read without it as a fast "none" for every launch. */
static atomic_size_t nunreachable;

static bool unreachable(const mem_rec_t *m) {
  return m->kind == GUEST_MEM_HOST && !GUEST_HOST_REACHABLE(m->flags);
}

/* Index of the first record with base > p. Lock held. */
static size_t upper(uint64_t p) {
  size_t lo = 0, hi = nmem;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (mems[mid].base <= p)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

int guest__mem_add(uint64_t base, uint64_t size, guest_mem_kind_t kind, unsigned flags) {
  size_t i;
  int rc = 0;
  pthread_mutex_lock(&mem_lock);
  if (nmem == capmem) {
    size_t cap = capmem ? capmem * 2 : 64;
    mem_rec_t *n = realloc(mems, cap * sizeof(*n));
    if (!n) {
      rc = -ENOMEM;
      goto out;
    }
    mems = n;
    capmem = cap;
  }
  i = upper(base);
  memmove(&mems[i + 1], &mems[i], (nmem - i) * sizeof(*mems));
  mems[i] = (mem_rec_t){base, size, kind, flags};
  nmem++;
  if (unreachable(&mems[i]))
    atomic_fetch_add(&nunreachable, 1);
out:
  pthread_mutex_unlock(&mem_lock);
  return rc;
}

int guest__mem_del(uint64_t base, guest_mem_kind_t kind, uint64_t *size) {
  size_t i;
  int rc = -ENOENT;
  pthread_mutex_lock(&mem_lock);
  i = upper(base);
  if (i > 0 && mems[i - 1].base == base && mems[i - 1].kind == kind) {
    if (size)
      *size = mems[i - 1].size;
    if (unreachable(&mems[i - 1]))
      atomic_fetch_sub(&nunreachable, 1);
    memmove(&mems[i - 1], &mems[i], (nmem - i) * sizeof(*mems));
    nmem--;
    rc = 0;
  }
  if (nmem == 0) { /* nothing left: give the storage back */
    free(mems);
    mems = NULL;
    capmem = 0;
  }
  pthread_mutex_unlock(&mem_lock);
  return rc;
}

bool guest__mem_find(uint64_t p, uint64_t *base, uint64_t *size, guest_mem_kind_t *kind) {
  size_t i;
  bool found = false;
  pthread_mutex_lock(&mem_lock);
  i = upper(p);
  if (i > 0 && p - mems[i - 1].base < (mems[i - 1].size ? mems[i - 1].size : 1)) {
    found = true;
    if (base)
      *base = mems[i - 1].base;
    if (size)
      *size = mems[i - 1].size;
    if (kind)
      *kind = mems[i - 1].kind;
  }
  pthread_mutex_unlock(&mem_lock);
  return found;
}

bool guest__mem_find_host(uint64_t p, uint64_t *base, uint64_t *size, unsigned *flags) {
  size_t i;
  bool found = false;
  pthread_mutex_lock(&mem_lock);
  i = upper(p);
  if (i > 0 && mems[i - 1].kind == GUEST_MEM_HOST && p - mems[i - 1].base < mems[i - 1].size) {
    found = true;
    *base = mems[i - 1].base;
    *size = mems[i - 1].size;
    *flags = mems[i - 1].flags;
  }
  pthread_mutex_unlock(&mem_lock);
  return found;
}

bool guest__mem_any_unreachable(void) {
  return atomic_load_explicit(&nunreachable, memory_order_relaxed) != 0;
}

bool guest__mem_args_unreachable(const void *args, size_t n, size_t *off, uint64_t *val) {
  bool hit = false;
  if (!guest__mem_any_unreachable() || !args)
    return false;
  pthread_mutex_lock(&mem_lock);
  for (size_t o = 0; !hit && o + 8 <= n; o += 8) {
    uint64_t w;
    size_t i;
    memcpy(&w, (const uint8_t *)args + o, sizeof(w));
    i = upper(w);
    if (i > 0 && unreachable(&mems[i - 1]) && w - mems[i - 1].base < mems[i - 1].size) {
      /* Device addresses are tallyd's and host ones this process's, so the
       * two may overlap: a word inside device memory is not a hit. */
      hit = true;
      for (size_t k = 0; hit && k < i; k++)
        hit = !(mems[k].kind == GUEST_MEM_DEVICE && w - mems[k].base < mems[k].size);
      *off = o;
      *val = w;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  return hit;
}

/* ---- functions ---- */

/* Function handle -> guest_func_t* (wire/u64map.h).  Lock story: func_lock
 * guards the map and every guest_func_t's attr[] (cuFuncSetAttribute). */
static pthread_mutex_t func_lock = PTHREAD_MUTEX_INITIALIZER;
static u64map_t funcs;

static guest_func_t *func_at(size_t i) {
  return (guest_func_t *)(uintptr_t)funcs.vals[i];
}

static guest_func_t *lookup(uint64_t handle) {
  uint64_t v;
  return u64map_get(&funcs, handle, &v) ? (guest_func_t *)(uintptr_t)v : NULL;
}

static void func_free(guest_func_t *f) {
  if (!f)
    return;
  free(f->off);
  free(f->size);
  free(f->name);
  free(f);
}

/* A function of module/owner from one FUNC record (wire/call.def); NULL
 * with *rc -ENOMEM or -EPROTO. */
static guest_func_t *func_from_rec(const call_func_t *rec, uint64_t module, uint64_t owner,
                                   int *rc) {
  guest_func_t *f = calloc(1, sizeof(*f));
  wire_rd_t pr;
  if (!f) {
    *rc = -ENOMEM;
    return NULL;
  }
  f->handle = rec->handle;
  f->module = module;
  f->owner = owner;
  f->nparams = rec->nparams;
  f->attr_valid = rec->valid;
  memcpy(f->attr, rec->attr, sizeof(f->attr));
  f->name = malloc(rec->name.len + 1);
  f->off = calloc(f->nparams ? f->nparams : 1, sizeof(uint32_t));
  f->size = calloc(f->nparams ? f->nparams : 1, sizeof(uint32_t));
  if (!f->name || !f->off || !f->size) {
    *rc = -ENOMEM;
    func_free(f);
    return NULL;
  }
  memcpy(f->name, rec->name.p, rec->name.len);
  f->name[rec->name.len] = 0;
  wire_rd_init(&pr, rec->params.p, rec->params.len); /* nparams x (u32 offset, u32 size) */
  for (uint32_t i = 0; i < f->nparams; i++) {
    (void)wire_rd_get_u32(&pr, &f->off[i]);
    (void)wire_rd_get_u32(&pr, &f->size[i]);
    if (f->off[i] + (uint64_t)f->size[i] > f->argbytes)
      f->argbytes = f->off[i] + f->size[i];
  }
  /* cuLaunchKernel's parameter buffer holds at most 32764 bytes (CUDA 12.1+). */
  if (wire_rd_status(&pr) || f->argbytes > CALL_LAUNCH_ARGS_MAX) {
    *rc = -EPROTO;
    func_free(f);
    return NULL;
  }
  return f;
}

/* Forgets every function whose module or owner is h (only module when
 * only_module); an empty map gives its storage back.  func_lock held. */
static void forget_locked(uint64_t h, bool only_module) {
  for (size_t i = 0; i < funcs.cap; i++)
    if (funcs.keys[i] && (func_at(i)->module == h || (!only_module && func_at(i)->owner == h))) {
      guest_func_t *f = func_at(i);
      u64map_del(&funcs, funcs.keys[i]);
      func_free(f);
      i--; /* a later entry may have moved into slot i (u64map.h) */
    }
  if (funcs.len == 0)
    u64map_close(&funcs);
}

int guest__module_add(uint64_t module, uint64_t owner, const uint8_t *recs, size_t len,
                      uint32_t nfunc) {
  size_t at = 0;
  int rc = 0;

  pthread_mutex_lock(&func_lock);
  for (uint32_t k = 0; k < nfunc; k++) {
    call_func_t rec;
    guest_func_t *f;
    size_t used = 0;
    if (call_func_decode(recs + at, len - at, &rec, &used, NULL) != 0) {
      rc = -EPROTO;
      break;
    }
    at += used;
    if (!(f = func_from_rec(&rec, module, owner, &rc)))
      break;
    guest_func_t *old = lookup(f->handle); /* the host reuses a handle only after its unload */
    if ((rc = u64map_put(&funcs, f->handle, (uint64_t)(uintptr_t)f)) != 0) {
      rc = rc == -EINVAL ? -EPROTO : rc; /* handle 0 */
      func_free(f);
      break;
    }
    func_free(old);
  }
  if (rc != 0)
    forget_locked(module, true); /* all or nothing */
  pthread_mutex_unlock(&func_lock);
  return rc;
}

void guest__module_del(uint64_t h) {
  pthread_mutex_lock(&func_lock);
  forget_locked(h, false);
  pthread_mutex_unlock(&func_lock);
}

const guest_func_t *guest__func_find(uint64_t handle) {
  const guest_func_t *f;
  pthread_mutex_lock(&func_lock);
  f = lookup(handle);
  pthread_mutex_unlock(&func_lock);
  return f;
}

void guest__func_set_attr(uint64_t handle, int attr, int32_t value) {
  guest_func_t *f;
  pthread_mutex_lock(&func_lock);
  f = lookup(handle);
  if (f && attr >= 0 && attr < CALL_FUNC_ATTRS) {
    f->attr[attr] = value;
    f->attr_valid |= 1u << attr;
  }
  pthread_mutex_unlock(&func_lock);
}

void guest__func_learn_attrs(uint64_t handle, uint32_t valid, const int32_t *attr) {
  guest_func_t *f;
  pthread_mutex_lock(&func_lock);
  if ((f = lookup(handle))) {
    f->attrs_asked = true;
    for (int a = 0; a < CALL_FUNC_ATTRS; a++)
      if ((valid & (1u << a)) && !(f->attr_valid & (1u << a))) {
        f->attr[a] = attr[a];
        f->attr_valid |= 1u << a;
      }
  }
  pthread_mutex_unlock(&func_lock);
}

bool guest__func_is(uint64_t handle, int attr, int32_t value) {
  const guest_func_t *f;
  bool same = false;
  pthread_mutex_lock(&func_lock);
  f = lookup(handle);
  if (f && attr == GUEST_FUNC_CACHE)
    same = f->cache == (uint32_t)value;
  else if (f && attr >= 0 && attr < CALL_FUNC_ATTRS)
    same = (f->attr_valid & (1u << attr)) && f->attr[attr] == value;
  pthread_mutex_unlock(&func_lock);
  return same;
}

void guest__func_set_cache(uint64_t handle, uint32_t cfg) {
  guest_func_t *f;
  pthread_mutex_lock(&func_lock);
  if ((f = lookup(handle)))
    f->cache = cfg;
  pthread_mutex_unlock(&func_lock);
}

const guest_func_t *guest__func_by_name(uint64_t module, const char *name) {
  const guest_func_t *f = NULL;
  pthread_mutex_lock(&func_lock);
  for (size_t i = 0; i < funcs.cap && !f; i++)
    if (funcs.keys[i] && func_at(i)->module == module && strcmp(func_at(i)->name, name) == 0)
      f = func_at(i);
  pthread_mutex_unlock(&func_lock);
  return f;
}

unsigned guest__module_funcs(uint64_t module, uint64_t *out, unsigned cap) {
  unsigned n = 0;
  pthread_mutex_lock(&func_lock);
  for (size_t i = 0; i < funcs.cap; i++)
    if (funcs.keys[i] && func_at(i)->module == module) {
      if (out && n < cap)
        out[n] = funcs.keys[i];
      n++;
    }
  pthread_mutex_unlock(&func_lock);
  return n;
}
