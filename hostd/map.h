/* map.h: a u64 -> u64 hash map, the per-tenant handle tables of hostd/.
 *
 * Keys are CUDA handles or device pointers (never 0, so 0 marks an empty
 * slot); values are whatever the table needs (a kind, an owner, a pointer).
 * One map belongs to one tenant and is touched by that tenant's worker
 * thread only: no lock.  Open addressing, load factor at most 3/4, deletion
 * by backward shift (see map.c).
 */
#ifndef TALLY_HOSTD_MAP_H
#define TALLY_HOSTD_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hostd_map {
  uint64_t *keys; /* 0 = empty slot */
  uint64_t *vals;
  size_t cap; /* power of two, or 0 */
  size_t len; /* live entries */
} hostd_map_t;

void hostd__map_init(hostd_map_t *m);
void hostd__map_close(hostd_map_t *m); /* frees the storage */
/* Inserts or replaces; key must not be 0.  Returns 0, -EINVAL or -ENOMEM. */
int hostd__map_put(hostd_map_t *m, uint64_t key, uint64_t val);
bool hostd__map_get(const hostd_map_t *m, uint64_t key, uint64_t *val);
bool hostd__map_del(hostd_map_t *m, uint64_t key);

/* Iterates live entries: for (i = 0; i < m->cap; i++) if (m->keys[i]) ... */

#endif /* TALLY_HOSTD_MAP_H */
