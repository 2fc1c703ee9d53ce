/* u64map.c: a u64 -> u64 hash map for handle tables (hostd's per-tenant
 * tables, the guest library's function table).
 *
 * Open addressing with linear probing; deletion by backward shift, so no
 * tombstones accumulate over a long tenant life.  Key 0 is reserved (no
 * CUDA handle or device pointer is 0).  Not thread-safe: the owner
 * serialises.
 */
#include "wire/u64map.h"

#include <errno.h>
#include <stdlib.h>

static size_t slot_of(uint64_t k, size_t mask) {
  return (size_t)((k ^ (k >> 29)) * 0x9e3779b97f4a7c15ull >> 7) & mask;
}

void u64map_init(u64map_t *m) {
  m->keys = NULL;
  m->vals = NULL;
  m->cap = 0;
  m->len = 0;
}

void u64map_close(u64map_t *m) {
  free(m->keys);
  free(m->vals);
  u64map_init(m);
}

static int grow(u64map_t *m) {
  size_t cap = m->cap ? m->cap * 2 : 64;
  uint64_t *k = calloc(cap, sizeof(*k)), *v = calloc(cap, sizeof(*v));
  if (!k || !v) {
    free(k);
    free(v);
    return -ENOMEM;
  }
  for (size_t i = 0; i < m->cap; i++) {
    if (!m->keys[i])
      continue;
    size_t j = slot_of(m->keys[i], cap - 1);
    while (k[j])
      j = (j + 1) & (cap - 1);
    k[j] = m->keys[i];
    v[j] = m->vals[i];
  }
  free(m->keys);
  free(m->vals);
  m->keys = k;
  m->vals = v;
  m->cap = cap;
  return 0;
}

int u64map_put(u64map_t *m, uint64_t key, uint64_t val) {
  size_t j;
  if (key == 0)
    return -EINVAL;
  if ((m->len + 1) * 4 > m->cap * 3 && grow(m) != 0) /* load factor <= 3/4 */
    return -ENOMEM;
  for (j = slot_of(key, m->cap - 1); m->keys[j] && m->keys[j] != key; j = (j + 1) & (m->cap - 1))
    ;
  if (!m->keys[j])
    m->len++;
  m->keys[j] = key;
  m->vals[j] = val;
  return 0;
}

bool u64map_get(const u64map_t *m, uint64_t key, uint64_t *val) {
  if (!m->cap || key == 0)
    return false;
  for (size_t j = slot_of(key, m->cap - 1); m->keys[j]; j = (j + 1) & (m->cap - 1))
    if (m->keys[j] == key) {
      if (val)
        *val = m->vals[j];
      return true;
    }
  return false;
}

bool u64map_del(u64map_t *m, uint64_t key) {
  size_t mask = m->cap - 1, j, i;
  if (!m->cap || key == 0)
    return false;
  for (j = slot_of(key, mask); m->keys[j] != key; j = (j + 1) & mask)
    if (!m->keys[j])
      return false;
  /* Backward-shift: move later members of the probe run into the hole. */
  for (i = (j + 1) & mask; m->keys[i]; i = (i + 1) & mask) {
    size_t home = slot_of(m->keys[i], mask);
    if (((i - home) & mask) >= ((i - j) & mask)) {
      m->keys[j] = m->keys[i];
      m->vals[j] = m->vals[i];
      j = i;
    }
  }
  m->keys[j] = 0;
  m->vals[j] = 0;
  m->len--;
  return true;
}
