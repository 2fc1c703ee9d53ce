/* hostd-int.h: declarations shared by hostd/'s own files.
 *
 * The daemon is three layers: server.c accepts tenants (wire/ on libuv) and
 * runs one worker thread per tenant that executes its requests in order; tenant.c executes
 * one request against the tenant's tables and the GPU backend (gpu.h);
 * modcache.c keeps module images by content id in memory and in the state
 * directory.  Nothing here is visible outside hostd/ except through
 * hostd.h (tests include this header too, to drive tenants directly).
 */
#ifndef TALLY_HOSTD_INT_H
#define TALLY_HOSTD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guestlib/call.h"
#include "guestlib/codec.h"
#include "hostd/hostd.h"

/* ---- logging (log.c): level from the configuration; stderr ---- */
extern hostd_log_level_t hostd__log_level;
void hostd__log(hostd_log_level_t level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- per-op counters, for tests and the stats line at exit ---- */
extern unsigned long hostd__op_count[GUEST_OP_COUNT];

/* ---- module images by content id (modcache.c) ---- */
/* Returns the image with this id (memory, then state_dir/modules/<id>.img),
 * or NULL.  The returned buffer lives until hostd__modcache_close. */
const void *hostd__modcache_get(uint64_t id, size_t *len);
/* Stores an image under its id (checked: the id must be the XXH3-64 of the
 * bytes) and writes it to the state directory.  Returns 0, -EINVAL on a
 * mismatched id, -ENOMEM. */
int hostd__modcache_put(uint64_t id, const void *data, size_t len);
void hostd__modcache_init(const char *state_dir);
void hostd__modcache_close(void);

/* ---- tenants (tenant.c) ---- */
typedef struct hostd_tenant hostd_tenant_t;

/* Creates a tenant of priority class prio (0 latency-critical, 1 best-effort).
 * `tcp` says whether it came over the network (the token is then checked). */
hostd_tenant_t *hostd__tenant_new(uint32_t id, bool tcp);
/* Frees everything the tenant owns on the GPU (memory, streams, events,
 * modules) and the tenant itself.  NULL ok. */
void hostd__tenant_free(hostd_tenant_t *t);
/* Executes one request.  hdr is the 16-byte header, args its `len` bytes.
 * For a synchronous request fills *reply (header + results); for an async
 * one leaves it empty.  Returns 0, or -EPROTO when the request is malformed
 * (the caller then closes the tenant and logs `why`). */
int hostd__tenant_exec(hostd_tenant_t *t, uint32_t op, uint32_t flags, const uint8_t *args,
                       size_t len, guest_wr_t *reply, const char **why);
uint32_t hostd__tenant_id(const hostd_tenant_t *t);
/* The name of r when it corrupts a CUDA context (illegal address, ...), else
 * NULL: tallyd then resets the shared context (tenant.c, recover). */
const char *hostd__ctx_fatal(int r); /* r: a CUresult */

/* The served device's snapshot (filled by hostd__gpu.init), and the token
 * TCP tenants must present ("" = none).  Written once before any tenant. */
extern guest_dev_snapshot_t hostd__snapshot;
extern int hostd__ndev;
extern char hostd__token[256];

/* ---- recording backend (gpu-record.c): what the tests read ---- */
typedef enum hostd_record_what {
  HOSTD_RECORD_ALLOC,
  HOSTD_RECORD_FREE,
  HOSTD_RECORD_HTOD,
  HOSTD_RECORD_DTOH,
  HOSTD_RECORD_DTOD,
  HOSTD_RECORD_MEMSET,
  HOSTD_RECORD_STREAM,
  HOSTD_RECORD_STREAM_DEL,
  HOSTD_RECORD_EVENT,
  HOSTD_RECORD_EVENT_DEL,
  HOSTD_RECORD_RECORD,
  HOSTD_RECORD_WAIT,
  HOSTD_RECORD_SYNC,
  HOSTD_RECORD_MODULE,
  HOSTD_RECORD_MODULE_DEL,
  HOSTD_RECORD_LAUNCH,
  HOSTD_RECORD_RESET, /* context resets (sticky error recovery) */
  HOSTD_RECORD_STALE, /* calls on a thread without the current context, or naming a handle or
                         address from before the last reset (must stay 0) */
  HOSTD_RECORD_NCOUNT
} hostd_record_what_t;
unsigned long hostd_record_count(hostd_record_what_t what);
void hostd_record_reset(void);
uint64_t hostd_record_live_bytes(void);
extern int hostd__record_last_prio; /* priority of the last stream created */
/* Cluster x, y, z and scheduling policy of the last occupancy query (0 / -1 absent). */
extern int hostd__record_last_cluster[4];
/* Makes every synchronisation fail with CUresult r from now on, as a kernel
 * fault does (sticky), until the context is reset. */
void hostd_record_inject(int r);

#endif /* TALLY_HOSTD_INT_H */
