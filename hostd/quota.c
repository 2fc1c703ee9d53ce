/* quota.c: per-tenant quotas: device memory, streams, events, pending host
 * functions, uploaded module bytes.
 *
 * A tenant's worker owns one hostd_quota_t (server.c) and points the
 * thread-local hostd__quota_self at it, so the request handlers charge an
 * allocation before making it and release it when it is freed, without
 * knowing about workers.  A charge over the limit takes nothing and answers
 * CUDA_ERROR_OUT_OF_MEMORY, what the driver says when memory, streams or
 * events run out: a tenant over its quota sees an ordinary CUDA error, and
 * nobody else notices.  Counters are atomics: tallyctl reads them from the
 * loop thread while the worker charges.
 *
 * Limits come from the configuration (config.c): for device memory the
 * most specific --tenant-mem-limit rule (name:NAME, then the class, then
 * the plain one), for the rest one cap for every tenant.  The tenant's
 * scheduler weight (--tenant-weight, the same precedence) and its GPU
 * time live here too, for the operator's view.
 */
#include "hostd/guard.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>

__thread hostd_quota_t *hostd__quota_self;

int hostd__parse_size(const char *s, uint64_t *out) {
  char *end = NULL;
  unsigned long long v;
  unsigned shift = 0;
  if (!s || !isdigit((unsigned char)*s))
    return -EINVAL;
  errno = 0;
  v = strtoull(s, &end, 10);
  if (errno || end == s)
    return -EINVAL;
  switch (toupper((unsigned char)*end)) {
  case 0: break;
  case 'K': shift = 10; break;
  case 'M': shift = 20; break;
  case 'G': shift = 30; break;
  case 'T': shift = 40; break;
  default: return -EINVAL;
  }
  if (*end && end[1] && !((end[1] == 'i' || end[1] == 'B') && (!end[2] || end[2] == 'B')))
    return -EINVAL; /* "4G", "4GB", "4GiB" */
  if (shift && v > (UINT64_MAX >> shift))
    return -EINVAL;
  *out = (uint64_t)v << shift;
  return 0;
}

/* The value of the most specific rule for this tenant; dflt when none
 * applies. */
static uint64_t rule_value(const struct hostd_mem_rule *rules, int n, const char *name, int prio,
                           uint64_t dflt) {
  const char *cls = prio == 0 ? "latency-critical" : "best-effort";
  int best = -1, rank = -1;
  for (int i = 0; i < n; i++) {
    const char *who = rules[i].who;
    int r = !who[0] ? 0 : strcmp(who, cls) == 0 ? 1
            : (strncmp(who, "name:", 5) == 0 && name && strcmp(who + 5, name) == 0) ? 2 : -1;
    if (r > rank) {
      rank = r;
      best = i;
    }
  }
  return best < 0 ? dflt : rules[best].bytes;
}

void hostd__quota_setup(hostd_quota_t *q, const hostd_config_t *cfg, const char *name, int prio) {
  memset(q, 0, sizeof(*q));
  q->limit[HOSTD_QUOTA_MEM] = rule_value(cfg->mem_rules, cfg->n_mem_rules, name, prio, 0);
  q->weight = (uint32_t)rule_value(cfg->weight_rules, cfg->n_weight_rules, name, prio, 1);
  q->limit[HOSTD_QUOTA_STREAMS] = cfg->tenant_streams;
  q->limit[HOSTD_QUOTA_EVENTS] = cfg->tenant_events;
  q->limit[HOSTD_QUOTA_HOSTFNS] = cfg->tenant_hostfns;
  q->limit[HOSTD_QUOTA_UPLOAD] = cfg->tenant_upload;
}

int hostd__quota_charge(hostd_quota_t *q, hostd_quota_res_t r, uint64_t n) {
  uint64_t cur, next;
  if (!q || (unsigned)r >= HOSTD_QUOTA_N)
    return CUDA_SUCCESS;
  cur = __atomic_load_n(&q->used[r], __ATOMIC_RELAXED);
  do {
    next = cur + n;
    if (next < cur || (q->limit[r] && next > q->limit[r])) {
      __atomic_fetch_add(&q->refused[r], 1, __ATOMIC_RELAXED);
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
  } while (!__atomic_compare_exchange_n(&q->used[r], &cur, next, true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED));
  if (r == HOSTD_QUOTA_MEM) {
    uint64_t peak = __atomic_load_n(&q->peak_mem, __ATOMIC_RELAXED);
    while (next > peak && !__atomic_compare_exchange_n(&q->peak_mem, &peak, next, true,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED))
      ;
  }
  return CUDA_SUCCESS;
}

void hostd__quota_release(hostd_quota_t *q, hostd_quota_res_t r, uint64_t n) {
  uint64_t cur;
  if (!q || (unsigned)r >= HOSTD_QUOTA_N)
    return;
  cur = __atomic_load_n(&q->used[r], __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(&q->used[r], &cur, cur > n ? cur - n : 0, true,
                                      __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    ;
}

uint64_t hostd__quota_used(const hostd_quota_t *q, hostd_quota_res_t r) {
  if (!q || (unsigned)r >= HOSTD_QUOTA_N)
    return 0;
  return __atomic_load_n(&q->used[r], __ATOMIC_RELAXED);
}
