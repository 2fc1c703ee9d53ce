/* u64map.h: a u64 -> u64 hash map, the one hash map of guestlib/ and hostd/.
 *
 * Keys are CUDA handles or device pointers (never 0, so 0 marks an empty
 * slot); values are whatever the table needs (a kind, an owner, a pointer).
 * No lock: the owner serialises (hostd: one tenant's worker thread; the
 * guest library: its table lock).  Open addressing, load factor at most 3/4,
 * deletion by backward shift (see u64map.c).  Pure C, libc only; in wire/
 * because both sides link wire/ and may include only its headers.
 */
#ifndef TALLY_WIRE_U64MAP_H
#define TALLY_WIRE_U64MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct u64map {
  uint64_t *keys; /* 0 = empty slot */
  uint64_t *vals;
  size_t cap; /* power of two, or 0 */
  size_t len; /* live entries */
} u64map_t;

void u64map_init(u64map_t *m);
void u64map_close(u64map_t *m); /* frees the storage */
/* Inserts or replaces; key must not be 0.  Returns 0, -EINVAL or -ENOMEM. */
int u64map_put(u64map_t *m, uint64_t key, uint64_t val);
bool u64map_get(const u64map_t *m, uint64_t key, uint64_t *val);
bool u64map_del(u64map_t *m, uint64_t key);

/* Iterates live entries: for (i = 0; i < m->cap; i++) if (m->keys[i]) ...
 * Deleting the entry at i while iterating may move a later entry into slot
 * i (backward shift): look at slot i again (i--), and none is skipped. */

#endif /* TALLY_WIRE_U64MAP_H */
