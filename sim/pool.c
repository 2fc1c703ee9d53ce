/* pool.c: the simulator's free-list pools.
 *
 * Launches, submissions, block groups and block slots live in growable
 * arrays and refer to each other by index, so a pointer never dangles when
 * an array grows.  Free entries are chained through a u32 field of the
 * record itself (index + 1; 0 = end of list), the same convention as every
 * other link in sim-int.h.  One implementation serves all four record types:
 * the caller names the array, its counters, the record size and the offset
 * of the link field (SIM__POOL_TAKE / SIM__POOL_PUT in sim-int.h).
 *
 * Growth doubles the array (first_n entries the first time), zeroes the new
 * records and pushes them on the free list in index order, so allocation
 * order is deterministic and a run is reproducible from its seed.
 */
#include "sim/sim-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static uint32_t *link_of(void *items, size_t size, size_t link_off, uint32_t i) {
  return (uint32_t *)((char *)items + (size_t)i * size + link_off);
}

int sim__pool_take(void **items, uint32_t *n, uint32_t *free_head, size_t size, size_t link_off,
                   uint32_t first_n, uint32_t *out) {
  if (*free_head == 0) {
    uint32_t old = *n, grown = old ? old * 2 : first_n;
    if (grown <= old)
      return -ENOMEM; /* index space exhausted */
    char *p = realloc(*items, (size_t)grown * size);
    if (!p)
      return -ENOMEM;
    memset(p + (size_t)old * size, 0, (size_t)(grown - old) * size);
    for (uint32_t i = old; i < grown; i++)
      *link_of(p, size, link_off, i) = (i + 1 < grown) ? i + 2 : 0;
    *free_head = old + 1;
    *items = p;
    *n = grown;
  }
  *out = *free_head - 1;
  *free_head = *link_of(*items, size, link_off, *out);
  return 0;
}

void sim__pool_put(void *items, uint32_t *free_head, size_t size, size_t link_off, uint32_t i) {
  *link_of(items, size, link_off, i) = *free_head;
  *free_head = i + 1;
}
