/* tables.c: what the guest remembers so it can answer without a round trip.
 *
 * Two tables: the tenant's own allocations (device memory and host memory
 * handed out by cuMemHostAlloc), sorted by base for binary search, which
 * answer pointer attributes and tell cuMemcpy's direction; and the functions
 * of every loaded module with their parameter layouts (from the host's
 * MODULE_LOAD reply), which let cuLaunchKernel pack arguments and
 * cuModuleGetFunction resolve names locally.  Both are guarded by their own
 * mutex (never guest__g.lock, which may be held across a round trip).
 * Function entries are never moved once created (the hash holds pointers),
 * and live until their module is unloaded.
 */
#include "guestlib/guest.h"

#include <errno.h>
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
    memmove(&mems[i - 1], &mems[i], (nmem - i) * sizeof(*mems));
    nmem--;
    rc = 0;
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

/* ---- functions ---- */

/* Open-addressing hash of function handles.  Lock story: func_lock guards
 * the hash and every guest_func_t's attr[] (cuFuncSetAttribute). */
static pthread_mutex_t func_lock = PTHREAD_MUTEX_INITIALIZER;
static guest_func_t **slots;
static size_t nslots, nfuncs;

static size_t hash64(uint64_t h) {
  return (size_t)((h >> 4) * 0x9e3779b97f4a7c15ull);
}

static int grow(void) {
  size_t n = nslots ? nslots * 2 : 1024;
  guest_func_t **s = calloc(n, sizeof(*s));
  if (!s)
    return -ENOMEM;
  for (size_t i = 0; i < nslots; i++) {
    if (!slots[i] || slots[i] == (guest_func_t *)1)
      continue;
    size_t j = hash64(slots[i]->handle) & (n - 1);
    while (s[j])
      j = (j + 1) & (n - 1);
    s[j] = slots[i];
  }
  free(slots);
  slots = s;
  nslots = n;
  return 0;
}

static guest_func_t **lookup(uint64_t handle) {
  if (!nslots)
    return NULL;
  for (size_t j = hash64(handle) & (nslots - 1);; j = (j + 1) & (nslots - 1)) {
    if (!slots[j])
      return NULL;
    if (slots[j] != (guest_func_t *)1 && slots[j]->handle == handle)
      return &slots[j];
  }
}

static void func_free(guest_func_t *f) {
  if (!f)
    return;
  free(f->off);
  free(f->size);
  free(f->name);
  free(f);
}

int guest__module_add(uint64_t module, uint64_t owner, const uint8_t *recs, size_t len,
                      uint32_t nfunc) {
  guest_rd_t r;
  int rc = 0;

  guest_rd_init(&r, recs, len);
  pthread_mutex_lock(&func_lock);
  for (uint32_t k = 0; k < nfunc; k++) {
    guest_func_t *f = calloc(1, sizeof(*f));
    uint32_t name_len;
    const uint8_t *name;
    if (!f) {
      rc = -ENOMEM;
      break;
    }
    f->handle = guest_rd_u64(&r);
    f->module = module;
    f->owner = owner;
    f->nparams = guest_rd_u32(&r);
    name_len = guest_rd_u32(&r);
    f->attr_valid = guest_rd_u32(&r);
    for (int a = 0; a < GUEST_FUNC_ATTRS; a++)
      f->attr[a] = (int32_t)guest_rd_u32(&r);
    if (r.err || f->nparams > GUEST_MAX_PARAMS || name_len >= GUEST_FUNC_NAME_MAX) {
      free(f);
      rc = -EPROTO;
      break;
    }
    name = guest_rd_view(&r, name_len);
    f->name = malloc(name_len + 1);
    f->off = calloc(f->nparams ? f->nparams : 1, sizeof(uint32_t));
    f->size = calloc(f->nparams ? f->nparams : 1, sizeof(uint32_t));
    if (!name || !f->name || !f->off || !f->size) {
      rc = name ? -ENOMEM : -EPROTO;
      func_free(f);
      break;
    }
    memcpy(f->name, name, name_len);
    f->name[name_len] = 0;
    for (uint32_t i = 0; i < f->nparams; i++) {
      f->off[i] = guest_rd_u32(&r);
      f->size[i] = guest_rd_u32(&r);
      if (f->off[i] + (uint64_t)f->size[i] > f->argbytes)
        f->argbytes = f->off[i] + f->size[i];
    }
    /* cuLaunchKernel's parameter buffer holds at most 32764 bytes (CUDA 12.1+). */
    if (r.err || f->argbytes > 32768) {
      rc = -EPROTO;
      func_free(f);
      break;
    }
    if ((nfuncs + 1) * 2 > nslots && (rc = grow()) != 0) {
      func_free(f);
      break;
    }
    guest_func_t **old = lookup(f->handle);
    if (old) { /* the host reuses a handle only after its unload */
      func_free(*old);
      *old = f;
      continue;
    }
    size_t j = hash64(f->handle) & (nslots - 1);
    while (slots[j] && slots[j] != (guest_func_t *)1)
      j = (j + 1) & (nslots - 1);
    slots[j] = f;
    nfuncs++;
  }
  pthread_mutex_unlock(&func_lock);
  return rc;
}

void guest__module_del(uint64_t h) {
  pthread_mutex_lock(&func_lock);
  for (size_t i = 0; i < nslots; i++)
    if (slots[i] && slots[i] != (guest_func_t *)1 &&
        (slots[i]->module == h || slots[i]->owner == h)) {
      func_free(slots[i]);
      slots[i] = (guest_func_t *)1; /* tombstone */
      nfuncs--;
    }
  pthread_mutex_unlock(&func_lock);
}

const guest_func_t *guest__func_find(uint64_t handle) {
  guest_func_t **p;
  const guest_func_t *f;
  pthread_mutex_lock(&func_lock);
  p = lookup(handle);
  f = p ? *p : NULL;
  pthread_mutex_unlock(&func_lock);
  return f;
}

void guest__func_set_attr(uint64_t handle, int attr, int32_t value) {
  guest_func_t **p;
  pthread_mutex_lock(&func_lock);
  p = lookup(handle);
  if (p && attr >= 0 && attr < GUEST_FUNC_ATTRS) {
    (*p)->attr[attr] = value;
    (*p)->attr_valid |= 1u << attr;
  }
  pthread_mutex_unlock(&func_lock);
}

const guest_func_t *guest__func_by_name(uint64_t module, const char *name) {
  const guest_func_t *f = NULL;
  pthread_mutex_lock(&func_lock);
  for (size_t i = 0; i < nslots && !f; i++)
    if (slots[i] && slots[i] != (guest_func_t *)1 && slots[i]->module == module &&
        strcmp(slots[i]->name, name) == 0)
      f = slots[i];
  pthread_mutex_unlock(&func_lock);
  return f;
}

unsigned guest__module_funcs(uint64_t module, uint64_t *out, unsigned cap) {
  unsigned n = 0;
  pthread_mutex_lock(&func_lock);
  for (size_t i = 0; i < nslots; i++)
    if (slots[i] && slots[i] != (guest_func_t *)1 && slots[i]->module == module) {
      if (out && n < cap)
        out[n] = slots[i]->handle;
      n++;
    }
  pthread_mutex_unlock(&func_lock);
  return n;
}
