/* hops.c: the guest's side of the hand-off times (TALLY_HOPS=FILE).
 *
 * When the variable names a file, every call of a connection records when
 * it began (before the posts ahead of it were flushed), when its request
 * was in the ring or socket, and when the caller had its reply, into a
 * ring preallocated at open (no allocation, lock or syscall per call).
 * wire_conn_hops_write appends them to the file, one line per call:
 *
 *   G NAME ID T_CALL T_SENT T_WOKE
 *
 * NAME is the tenant's name with bytes outside [A-Za-z0-9._-] as '_', ID
 * the call's id on the wire, times ns of CLOCK_MONOTONIC.  ID 0 (no call
 * has it) is a post answered without a reply, its times given by the caller
 * (wire_conn_hops_answered: a synchronisation the GPU answered by writing a
 * word, T_SENT when its post was in the ring, T_WOKE when the caller saw
 * the word); the daemon's D line of that post has ID 0 too.  The daemon
 * writes its side of the same calls (D lines, tallyd --hops), and
 * tests/bench/hops-report joins them by NAME and ID.
 */
#include "wire/wire-int.h"

#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Calls kept: the last 64K (a ring of 32-byte records, 2 MiB). */
#define HOPS_RING 65536u

typedef struct hop {
  uint64_t id, t[3];
} hop;

struct wire__hops {
  char path[4096];
  char name[WIRE_TENANT_MAX + 1];
  _Atomic uint64_t n;  /* records taken */
  uint64_t written;    /* records already in the file */
  hop rec[];
};

wire__hops *wire__hops_new(const char *tenant) {
  const char *p = getenv("TALLY_HOPS");
  wire__hops *h;
  size_t i;
  if (!p || !*p || strlen(p) >= sizeof(h->path) ||
      !(h = calloc(1, sizeof(*h) + HOPS_RING * sizeof(hop))))
    return NULL;
  strcpy(h->path, p);
  for (i = 0; i < WIRE_TENANT_MAX && tenant[i]; i++) {
    char c = tenant[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    h->name[i] = ok ? c : '_';
  }
  return h;
}

void wire__hops_add(wire__hops *h, uint64_t id, uint64_t t_call, uint64_t t_sent,
                    uint64_t t_woke) {
  uint64_t i = atomic_fetch_add_explicit(&h->n, 1, memory_order_relaxed);
  h->rec[i % HOPS_RING] = (hop){id, {t_call, t_sent, t_woke}};
}

/* Appends the records not yet written (at most the ring's last HOPS_RING).
 * Calls still being recorded meanwhile may be torn: write when idle. */
void wire__hops_write(wire__hops *h) {
  uint64_t n = atomic_load(&h->n), i = h->written;
  char buf[64 * 128];
  size_t len = 0;
  int fd;
  if (n - i > HOPS_RING)
    i = n - HOPS_RING;
  if (i == n || (fd = open(h->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0)
    return;
  for (; i < n; i++) {
    const hop *r = &h->rec[i % HOPS_RING];
    len += (size_t)snprintf(buf + len, sizeof(buf) - len, "G %s %llu %llu %llu %llu\n", h->name,
                            (unsigned long long)r->id, (unsigned long long)r->t[0],
                            (unsigned long long)r->t[1], (unsigned long long)r->t[2]);
    if (len > sizeof(buf) - 128 || i + 1 == n) {
      if (write(fd, buf, len) != (ssize_t)len)
        break;
      len = 0;
    }
  }
  close(fd);
  h->written = n;
}
