/* hops.c: hand-off times of a tenant's requests (--hops FILE).
 *
 * Each request answered by a worker gets five monotonic timestamps: read
 * by wire's loop thread (on_msg), taken by the worker, handler entered,
 * handler returned (for a synchronisation: the GPU work completed), reply
 * handed to wire.  They go into a ring preallocated when the tenant
 * connects (no allocation, no lock, no syscall on the request path) and
 * are appended to FILE, one line each, when the tenant leaves:
 *
 *   D NAME ID OP KIND T_READ T_TAKEN T_EXEC T_DONE T_REPLY
 *
 * NAME is the tenant's name with bytes outside [A-Za-z0-9._-] as '_', ID
 * wire's call id (0 for a post), OP the call.def op, KIND c (call) or p
 * (post), times in ns of CLOCK_MONOTONIC (T_REPLY 0 for a post).  OP
 * 4294967295 (PINNED_MAP, kind p) is no request: a shared pinned allocation
 * the worker registered (T_READ: handed to it by the loop), which the
 * tenant's next request waits behind.  Host functions get a line each,
 * recorded by hostfn.c when the guest reports one done:
 *
 *   F NAME ID SEQ T_ENQUEUED T_REACHED T_HANDED T_DONE
 *
 * ID the HOSTFN_WAIT call that handed it to the guest (the guest's G line
 * of that call says when its host-function thread woke), SEQ the guest's
 * number of the function; times as above (hostd_fn_hop_t).  The guest
 * writes its side (G lines, wire/guest.c, TALLY_HOPS) with the same clock,
 * and tests/bench/hops-report joins the two by NAME and ID.  Off (NULL
 * everywhere) unless --hops is given.
 */
#include "hostd/hostd-int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire/wire.h"

/* Requests kept per tenant: the last 256K (a ring of 56-byte records, 14 MiB of address
 * space, touched as it fills): one forward-bench run makes over 100K requests (its 1000-kernel
 * chain alone 101K launches), and the launch + sync rows before the chain must still be there
 * when the tenant leaves. */
#define HOPS_RING 262144u
/* Host functions kept per tenant: the last 4K (48-byte records). */
#define HOPS_FN_RING 4096u

struct hostd_hops {
  char name[WIRE_TENANT_MAX + 1];
  pthread_mutex_t fmu; /* guards fn and nfn: host functions end on the loop thread */
  uint64_t nfn;        /* host functions recorded (fn holds the last HOPS_FN_RING) */
  hostd_fn_hop_t fn[HOPS_FN_RING];
  uint64_t n; /* records written (the ring holds the last HOPS_RING) */
  hostd_hop_t rec[];
};

static char hops_path[4096];
static pthread_mutex_t hops_mu = PTHREAD_MUTEX_INITIALIZER; /* one writer at a time */

void hostd__hops_setup(const char *path) {
  snprintf(hops_path, sizeof(hops_path), "%s", path ? path : "");
}

hostd_hops_t *hostd__hops_new(const char *name) {
  hostd_hops_t *h;
  size_t i;
  if (!hops_path[0] || !(h = calloc(1, sizeof(*h) + HOPS_RING * sizeof(hostd_hop_t))))
    return NULL;
  for (i = 0; i < WIRE_TENANT_MAX && name[i]; i++) {
    char c = name[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    h->name[i] = ok ? c : '_';
  }
  if (i == 0)
    h->name[i++] = '_';
  h->name[i] = 0;
  pthread_mutex_init(&h->fmu, NULL);
  return h;
}

void hostd__hops_add(hostd_hops_t *h, const hostd_hop_t *r) {
  if (h)
    h->rec[h->n++ % HOPS_RING] = *r;
}

void hostd__hops_add_fn(hostd_hops_t *h, const hostd_fn_hop_t *r) {
  if (!h)
    return;
  pthread_mutex_lock(&h->fmu);
  h->fn[h->nfn++ % HOPS_FN_RING] = *r;
  pthread_mutex_unlock(&h->fmu);
}

/* Writes len bytes of buf to fd (a short write is logged, not retried). */
static void put(int fd, const char *buf, size_t len) {
  if (len && write(fd, buf, len) != (ssize_t)len)
    hostd__log(HOSTD_LOG_WARN, "--hops %s: short write", hops_path);
}

/* Appends the ring to the file (one write per 64 lines) and frees it. */
void hostd__hops_free(hostd_hops_t *h) {
  uint64_t first, i;
  char buf[64 * 256];
  size_t len = 0;
  int fd;
  if (!h)
    return;
  first = h->n > HOPS_RING ? h->n - HOPS_RING : 0;
  pthread_mutex_lock(&hops_mu);
  fd = open(hops_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0)
    hostd__log(HOSTD_LOG_WARN, "--hops %s: cannot open: %s", hops_path, strerror(errno));
  for (i = first; fd >= 0 && i < h->n; i++) {
    const hostd_hop_t *r = &h->rec[i % HOPS_RING];
    len += (size_t)snprintf(buf + len, sizeof(buf) - len,
                            "D %s %llu %u %c %llu %llu %llu %llu %llu\n", h->name,
                            (unsigned long long)r->id, r->op, r->call ? 'c' : 'p',
                            (unsigned long long)r->t[0], (unsigned long long)r->t[1],
                            (unsigned long long)r->t[2], (unsigned long long)r->t[3],
                            (unsigned long long)r->t[4]);
    if (len > sizeof(buf) - 256 || i + 1 == h->n) { /* a line is < 256 bytes */
      put(fd, buf, len);
      len = 0;
    }
  }
  pthread_mutex_lock(&h->fmu);
  for (i = h->nfn > HOPS_FN_RING ? h->nfn - HOPS_FN_RING : 0; fd >= 0 && i < h->nfn; i++) {
    const hostd_fn_hop_t *r = &h->fn[i % HOPS_FN_RING];
    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "F %s %llu %llu %llu %llu %llu %llu\n",
                            h->name, (unsigned long long)r->id, (unsigned long long)r->seq,
                            (unsigned long long)r->t[0], (unsigned long long)r->t[1],
                            (unsigned long long)r->t[2], (unsigned long long)r->t[3]);
    if (len > sizeof(buf) - 256 || i + 1 == h->nfn) {
      put(fd, buf, len);
      len = 0;
    }
  }
  pthread_mutex_unlock(&h->fmu);
  if (fd >= 0)
    close(fd);
  pthread_mutex_unlock(&hops_mu);
  pthread_mutex_destroy(&h->fmu);
  free(h);
}
