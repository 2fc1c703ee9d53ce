/* uobj.c: CUDA user objects (cuUserObjectCreate and the graph references
 * to them), kept in the guest.
 *
 * A user object is a pointer and a destructor with a reference count; the
 * application, graphs and execs own references (NCCL hangs the resources of
 * a captured collective on a graph this way).  Nothing of it concerns
 * tallyd, so the counts live here: a graph's references are kept per graph
 * handle, copied to each exec instantiated from it, to a clone and to a
 * graph taking it as a child, and released when the graph or exec is
 * destroyed (graph.c calls in).  When the count reaches zero the destructor
 * runs on this file's one thread, as the driver runs it on an internal
 * thread; a destructor whose last reference was an exec's runs after the
 * tenant's work queued so far is done (a context synchronisation that
 * takes no kept error), since the exec's launches may still use the
 * object.
 *
 * Lock story: mu guards the objects, the references and the queue; the
 * thread runs destructors without it.
 */
#include "guestlib/guest.h"
#include "wire/u64map.h"

#include <limits.h>
#include <pthread.h>
#include <stdlib.h>

typedef struct uobj {
  void *ptr;
  CUhostFn destroy;
  unsigned long refs;
  bool after_work; /* its last reference went with an exec */
  struct uobj *next; /* in the queue of destructors to run */
} uobj_t;

typedef struct gref {
  uint64_t owner; /* a graph or an exec */
  uobj_t *obj;
  unsigned long count;
} gref_t;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static u64map_t live;        /* object -> 1 */
static gref_t *grefs;        /* references owned by graphs and execs */
static size_t ngrefs, capgrefs;
static uobj_t *queue, *queue_tail;
static bool thread_started;

static void *destructor_thread(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!queue)
      pthread_cond_wait(&cv, &mu);
    uobj_t *o = queue;
    if (!(queue = o->next))
      queue_tail = NULL;
    pthread_mutex_unlock(&mu);
    if (o->after_work) {
      call_ctx_sync_req_t q;
      CUresult rc;
      /* Not a synchronising call of the application's: kept errors stay. */
      (void)guest__call(CALL_OP_CTX_SYNC, 0, &q, &rc, NULL, 0, NULL, NULL);
    }
    o->destroy(o->ptr);
    free(o);
    pthread_mutex_lock(&mu);
  }
  return NULL;
}

/* The object's count drops by n; at zero it is queued for destruction.
 * Lock held. */
static void drop(uobj_t *o, unsigned long n, bool exec) {
  if (n >= o->refs) {
    u64map_del(&live, (uint64_t)(uintptr_t)o);
    o->refs = 0;
    o->after_work = exec;
    o->next = NULL;
    if (queue_tail)
      queue_tail->next = o;
    else
      queue = o;
    queue_tail = o;
    if (!thread_started) {
      pthread_t th;
      pthread_attr_t at;
      thread_started = pthread_attr_init(&at) == 0 &&
                       pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
                       pthread_create(&th, &at, destructor_thread, NULL) == 0;
      if (!thread_started)
        guest__log("no thread for user object destructors: they will not run");
    }
    pthread_cond_signal(&cv);
    return;
  }
  o->refs -= n;
}

static uobj_t *lookup(CUuserObject h) {
  return h && u64map_get(&live, (uint64_t)(uintptr_t)h, NULL) ? (uobj_t *)(void *)h : NULL;
}

GUEST_EXPORT CUresult cuUserObjectCreate(CUuserObject *out, void *ptr, CUhostFn destroy,
                                         unsigned int refs, unsigned int flags) {
  uobj_t *o;
  int rc;
  if (!out || !destroy || refs == 0 || refs > INT_MAX ||
      flags != CU_USER_OBJECT_NO_DESTRUCTOR_SYNC)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(o = calloc(1, sizeof(*o))))
    return CUDA_ERROR_OUT_OF_MEMORY;
  *o = (uobj_t){.ptr = ptr, .destroy = destroy, .refs = refs};
  pthread_mutex_lock(&mu);
  rc = u64map_put(&live, (uint64_t)(uintptr_t)o, 1);
  pthread_mutex_unlock(&mu);
  if (rc != 0) {
    free(o);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *out = (CUuserObject)(void *)o;
  return CUDA_SUCCESS;
}

/* n more (release false) or fewer of the application's references. */
static CUresult app_refs(CUuserObject h, unsigned int n, bool release) {
  uobj_t *o;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (n == 0 || n > INT_MAX)
    return r;
  pthread_mutex_lock(&mu);
  if ((o = lookup(h))) {
    if (release)
      drop(o, n, false);
    else
      o->refs += n;
    r = CUDA_SUCCESS;
  }
  pthread_mutex_unlock(&mu);
  return r;
}

GUEST_EXPORT CUresult cuUserObjectRetain(CUuserObject h, unsigned int n) {
  return app_refs(h, n, false);
}

GUEST_EXPORT CUresult cuUserObjectRelease(CUuserObject h, unsigned int n) {
  return app_refs(h, n, true);
}

/* owner's reference entry for o, made with count 0 if need be.  Lock held. */
static gref_t *gref_of(uint64_t owner, uobj_t *o) {
  for (size_t i = 0; i < ngrefs; i++)
    if (grefs[i].owner == owner && grefs[i].obj == o)
      return &grefs[i];
  if (ngrefs == capgrefs) {
    size_t cap = capgrefs ? capgrefs * 2 : 16;
    gref_t *g = realloc(grefs, cap * sizeof(*g));
    if (!g)
      return NULL;
    grefs = g;
    capgrefs = cap;
  }
  grefs[ngrefs] = (gref_t){owner, o, 0};
  return &grefs[ngrefs++];
}

GUEST_EXPORT CUresult cuGraphRetainUserObject(CUgraph g, CUuserObject h, unsigned int n,
                                              unsigned int flags) {
  uobj_t *o;
  gref_t *e;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (!g || n == 0 || n > INT_MAX || (flags & ~(unsigned)CU_GRAPH_USER_OBJECT_MOVE))
    return r;
  pthread_mutex_lock(&mu);
  if ((o = lookup(h))) {
    if (!(e = gref_of((uint64_t)(uintptr_t)g, o))) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      e->count += n;
      if (!(flags & CU_GRAPH_USER_OBJECT_MOVE))
        o->refs += n; /* new references; a move hands over the caller's */
      r = CUDA_SUCCESS;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

GUEST_EXPORT CUresult cuGraphReleaseUserObject(CUgraph g, CUuserObject h, unsigned int n) {
  uobj_t *o;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  if (!g || n == 0 || n > INT_MAX)
    return r;
  pthread_mutex_lock(&mu);
  if ((o = lookup(h))) {
    for (size_t i = 0; i < ngrefs; i++) {
      gref_t *e = &grefs[i];
      if (e->owner != (uint64_t)(uintptr_t)g || e->obj != o || e->count < n)
        continue;
      e->count -= n;
      if (e->count == 0)
        grefs[i] = grefs[--ngrefs];
      drop(o, n, false);
      r = CUDA_SUCCESS;
      break;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

void guest__uobj_drop(uint64_t owner, bool exec) {
  pthread_mutex_lock(&mu);
  for (size_t i = 0; i < ngrefs;) {
    if (grefs[i].owner == owner) {
      gref_t e = grefs[i];
      grefs[i] = grefs[--ngrefs];
      drop(e.obj, e.count, exec);
    } else {
      i++;
    }
  }
  pthread_mutex_unlock(&mu);
}

CUresult guest__uobj_copy(uint64_t from, uint64_t to) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&mu);
  for (size_t i = 0, n = ngrefs; i < n && r == CUDA_SUCCESS; i++) {
    if (grefs[i].owner != from)
      continue;
    gref_t src = grefs[i];
    gref_t *e = gref_of(to, src.obj);
    if (!e) {
      r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
      e->count += src.count;
      src.obj->refs += src.count;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}
