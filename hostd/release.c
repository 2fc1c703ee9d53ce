/* release.c: driver calls that wait for the whole context, made off the
 * tenants' workers.
 *
 * All tenants share one CUDA context (docs/decisions.md, D4), and some
 * releases wait for all of its work in flight, every tenant's: on the H200
 * a tenant's cuMemHostUnregister waited up to 398 ms and its cuModuleUnload
 * up to 75 ms for a best-effort tenant's kernels (docs/decisions.md, D16).
 * So once a tenant's request has taken the object out of its tables (and
 * synchronised its own streams where its own work may still use it), the
 * driver call is handed to one thread here, which makes them in the order
 * given; the tenant's reply does not wait.  Nothing else waits for them
 * either, except hostd__release_drain (a tenant's worker that maps pinned
 * memory again where a released mapping may still be: tenant.c; tests) and
 * hostd__release_stop (the server's shutdown, before the GPU backend goes).
 *
 * Without the thread (unit tests that never start it, a failed start, or
 * no memory for a job) the release is made at once on the caller's thread:
 * slower, never lost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "hostd/gpu.h"
#include "hostd/hostd-int.h"

typedef enum { JOB_HOST, JOB_MODULE } job_kind_t;

typedef struct job {
  job_kind_t kind;
  void *addr; /* JOB_HOST: the mapping */
  size_t size;
  bool registered;
  uint64_t module; /* JOB_MODULE: handle and kind (gpu.h) */
  int mkind;
  struct job *next;
} job_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static job_t *head, **tail = &head; /* the queue, oldest first */
static bool running, stopping, busy; /* busy: a job taken and not done */
static pthread_t thread;

/* The driver call of j; its errors are logged, there is no one to tell. */
static void job_run(const job_t *j) {
  CUresult r = CUDA_SUCCESS;
  switch (j->kind) {
  case JOB_HOST:
    if (j->registered)
      r = hostd__gpu.host_unregister(j->addr);
    munmap(j->addr, j->size);
    break;
  case JOB_MODULE:
    r = hostd__gpu.module_unload(j->module, j->mkind);
    break;
  }
  if (r != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_INFO, "releasing a tenant's %s: CUresult %d",
               j->kind == JOB_HOST ? "pinned host memory" : "module", (int)r);
}

static void *release_main(void *arg) {
  CUresult r = hostd__gpu.thread_enter();
  (void)arg;
  if (r != CUDA_SUCCESS)
    hostd__log(HOSTD_LOG_WARN, "release thread: no context current (CUresult %d)", (int)r);
  pthread_mutex_lock(&lock);
  for (;;) {
    while (!head && !stopping)
      pthread_cond_wait(&more, &lock);
    job_t *j = head;
    if (!j)
      break; /* stopping, and nothing left */
    if (!(head = j->next))
      tail = &head;
    busy = true;
    pthread_mutex_unlock(&lock);
    job_run(j);
    free(j);
    pthread_mutex_lock(&lock);
    busy = false;
    if (!head)
      pthread_cond_broadcast(&idle);
  }
  pthread_mutex_unlock(&lock);
  return NULL;
}

int hostd__release_start(void) {
  int rc = 0;
  pthread_mutex_lock(&lock);
  if (!running) {
    stopping = false;
    rc = -pthread_create(&thread, NULL, release_main, NULL);
    running = rc == 0;
  }
  pthread_mutex_unlock(&lock);
  if (rc != 0)
    hostd__log(HOSTD_LOG_WARN, "release thread not started (%d): tenants' releases wait", rc);
  return rc;
}

void hostd__release_stop(void) {
  pthread_mutex_lock(&lock);
  if (!running) {
    pthread_mutex_unlock(&lock);
    return;
  }
  stopping = true;
  pthread_cond_signal(&more);
  pthread_mutex_unlock(&lock);
  (void)pthread_join(thread, NULL);
  pthread_mutex_lock(&lock);
  running = stopping = false;
  pthread_mutex_unlock(&lock);
}

void hostd__release_drain(void) {
  pthread_mutex_lock(&lock);
  while (running && (head || busy))
    pthread_cond_wait(&idle, &lock);
  pthread_mutex_unlock(&lock);
}

/* Queues *tmpl, or runs it now when there is no thread or no memory. */
static void job_give(const job_t *tmpl) {
  job_t *j = malloc(sizeof(*j));
  pthread_mutex_lock(&lock);
  if (j && running && !stopping) {
    *j = *tmpl;
    j->next = NULL;
    *tail = j;
    tail = &j->next;
    pthread_cond_signal(&more);
    pthread_mutex_unlock(&lock);
    return;
  }
  pthread_mutex_unlock(&lock);
  free(j);
  job_run(tmpl);
}

void hostd__release_host(void *addr, size_t size, bool registered) {
  job_t j = {.kind = JOB_HOST, .addr = addr, .size = size, .registered = registered};
  job_give(&j);
}

void hostd__release_module(uint64_t h, int kind) {
  job_t j = {.kind = JOB_MODULE, .module = h, .mkind = kind};
  job_give(&j);
}
