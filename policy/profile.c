/* profile.c: the profile table and how a measurement updates it.
 *
 * A profile is keyed by (kernel id, grid, block, shared memory): the same
 * code with another launch shape is another profile.  It holds three
 * figures, all measured from device timestamps of completed launches (never
 * by synchronizing the device):
 *   wave_ns         time of one wave of blocks in the original or sliced
 *                   form, or of a FLUSH launch (redo included) none of whose
 *                   blocks gave up (the same blocks run, with a poll every
 *                   64 backward branches): (end - start) / ceil(blocks /
 *                   resident);
 *   ptb_block_ns    time a PTB worker spends per logical block:
 *                   (end - start) / ceil(blocks_done / workers);
 *   flush_drain_ns  for FLUSH launches that were preempted: the device's
 *                   flag-write-to-end time when the caller measured it
 *                   (pol_event_t.drain_ns), else end minus when the flag
 *                   was raised (the PREEMPT action, or the caller's own
 *                   raise if earlier): what the LC waited for at most from
 *                   this launch.  It jumps to a larger sample at once and
 *                   moves 1/8 of the way to a smaller one, so a kernel whose
 *                   blocks commit early (a store near their start, then a
 *                   long run that can no longer give up) is charged what it
 *                   really takes to drain (tally.c).  A single unlucky drain
 *                   is forgotten over a few more, and, since a large one can
 *                   stop the kernel's FLUSH launches (and so its samples),
 *                   each timed launch of it in the original or sliced form
 *                   also moves the figure 1/8 of the way down to the
 *                   give-up time (flush_giveup_ns): FLUSH is tried again,
 *                   and a drain that really is long is measured again.
 * wave_ns and ptb_block_ns: the first min_samples samples are averaged; later
 * ones enter an EWMA with weight 1/8.  A sample more than drift_pct away from
 * the estimate counts as drifted; drift_samples drifted samples in a row
 * reset the profile (all three figures), so the kernel is explored again
 * under the unprofiled rule (policy/tally.c).
 *
 * The table is open addressing with linear probing, load factor <= 1/2.
 */
#include "policy/pol.h"
#include "policy/pol-int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pol_profiles {
  pol_profile_t *slots; /* key.kernel_id == 0 && !used: empty */
  bool *used;
  size_t cap; /* power of two */
  size_t count;
};

static uint64_t key_hash(const pol_profile_key_t *k) {
  /* FNV-1a over the fields, then a final mix: enough spread for a table. */
  uint64_t h = 1469598103934665603ull;
  uint64_t v[8] = {k->kernel_id, k->grid[0],  k->grid[1],  k->grid[2],
                   k->block[0],  k->block[1], k->block[2], k->shmem_bytes};
  for (int i = 0; i < 8; i++) {
    h ^= v[i];
    h *= 1099511628211ull;
  }
  h ^= h >> 29;
  return h;
}

static bool key_eq(const pol_profile_key_t *a, const pol_profile_key_t *b) {
  return a->kernel_id == b->kernel_id && a->shmem_bytes == b->shmem_bytes &&
         memcmp(a->grid, b->grid, sizeof(a->grid)) == 0 &&
         memcmp(a->block, b->block, sizeof(a->block)) == 0;
}

int pol_profiles_new(pol_profiles_t **out) {
  pol_profiles_t *p = calloc(1, sizeof(*p));
  if (!p)
    return -ENOMEM;
  *out = p;
  return 0;
}

void pol_profiles_free(pol_profiles_t *p) {
  if (!p)
    return;
  free(p->slots);
  free(p->used);
  free(p);
}

size_t pol_profiles_count(const pol_profiles_t *p) {
  return p->count;
}

static size_t probe(const pol_profiles_t *p, const pol_profile_key_t *key, bool *found) {
  size_t i = (size_t)key_hash(key) & (p->cap - 1);
  while (p->used[i]) {
    if (key_eq(&p->slots[i].key, key)) {
      *found = true;
      return i;
    }
    i = (i + 1) & (p->cap - 1);
  }
  *found = false;
  return i;
}

const pol_profile_t *pol_profiles_find(const pol_profiles_t *p, const pol_profile_key_t *key) {
  bool found;
  if (p->cap == 0)
    return NULL;
  size_t i = probe(p, key, &found);
  return found ? &p->slots[i] : NULL;
}

static int grow(pol_profiles_t *p) {
  size_t cap = p->cap ? p->cap * 2 : 64;
  pol_profile_t *slots = calloc(cap, sizeof(*slots));
  bool *used = calloc(cap, sizeof(*used));
  if (!slots || !used) {
    free(slots);
    free(used);
    return -ENOMEM;
  }
  pol_profiles_t n = {.slots = slots, .used = used, .cap = cap, .count = 0};
  for (size_t i = 0; i < p->cap; i++) {
    if (!p->used[i])
      continue;
    bool found;
    size_t j = probe(&n, &p->slots[i].key, &found);
    n.slots[j] = p->slots[i];
    n.used[j] = true;
    n.count++;
  }
  free(p->slots);
  free(p->used);
  *p = n;
  return 0;
}

int pol_profiles_put(pol_profiles_t *p, const pol_profile_t *rec) {
  bool found;
  if ((p->count + 1) * 2 > p->cap) {
    int rc = grow(p);
    if (rc < 0)
      return rc;
  }
  size_t i = probe(p, &rec->key, &found);
  p->slots[i] = *rec;
  if (!found) {
    p->used[i] = true;
    p->count++;
  }
  return 0;
}

/* Visits every record (profile-file.c); order is the table's, so encode
 * sorts nothing and two tables with the same history encode the same. */
const pol_profile_t *pol__profiles_at(const pol_profiles_t *p, size_t *cursor) {
  while (*cursor < p->cap) {
    size_t i = (*cursor)++;
    if (p->used[i])
      return &p->slots[i];
  }
  return NULL;
}

void pol__profiles_swap(pol_profiles_t *a, pol_profiles_t *b) {
  pol_profiles_t t = *a;
  *a = *b;
  *b = t;
}

void pol__key_of(const pol_kernel_t *k, pol_profile_key_t *key) {
  memset(key, 0, sizeof(*key));
  key->kernel_id = k->kernel_id;
  memcpy(key->grid, k->grid, sizeof(key->grid));
  memcpy(key->block, k->block, sizeof(key->block));
  key->shmem_bytes = k->shmem_bytes;
}

/* Folds sample into (*est, *n); returns true if the sample drifted. */
static bool fold(const pol_config_t *c, uint64_t *est, uint32_t *n, uint64_t sample) {
  if (*n >= c->min_samples && *est > 0) {
    uint64_t d = (*est * c->drift_pct) / 100;
    uint64_t lo = d >= *est ? 0 : *est - d;
    uint64_t hi = *est + d;
    if (sample < lo || sample > hi)
      return true;
    *est = (*est * 7 + sample) / 8;
  } else {
    *est = (*est * *n + sample) / (*n + 1);
  }
  if (*n < UINT32_MAX)
    (*n)++;
  return false;
}

/* The hint tag of k: a hash of (kernel_id, block, shmem), never 0. */
static uint64_t hint_tag(const pol_kernel_t *k) {
  uint64_t h = k->kernel_id * 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < 3; i++)
    h = (h ^ k->block[i]) * 0x100000001b3ull;
  h = (h ^ k->shmem_bytes) * 0x100000001b3ull;
  return h ? h : 1;
}

uint64_t pol__wave_hint(const pol_sched_t *s, const pol_kernel_t *k) {
  uint64_t tag = hint_tag(k);
  const struct pol__wave_hint *e = &s->hints[tag % POL__HINTS];
  return e->tag == tag ? e->wave_ns : 0;
}

/* Remembers a settled wave time of k's kernel (the longest of its shapes). */
static void hint_put(pol_sched_t *s, const pol_kernel_t *k, uint64_t wave_ns) {
  uint64_t tag = hint_tag(k);
  struct pol__wave_hint *e = &s->hints[tag % POL__HINTS];
  if (e->tag != tag)
    *e = (struct pol__wave_hint){tag, wave_ns};
  else if (wave_ns > e->wave_ns)
    e->wave_ns = wave_ns;
}

int pol__profile_sample(pol_sched_t *s, const pol__launch_t *l, const pol_event_t *ev) {
  pol_profile_key_t key;
  pol_profile_t rec;
  uint64_t dur = ev->dev_end_ns - ev->dev_start_ns;
  uint64_t r = pol__resident(s, &l->sub->k);
  bool drifted;
  if (l->t->cls == POL_CLASS_LC)
    return 0; /* LC kernels are never reshaped: nothing to plan with */
  pol__key_of(&l->sub->k, &key);
  const pol_profile_t *old = pol_profiles_find(s->profiles, &key);
  if (old) {
    rec = *old;
  } else {
    memset(&rec, 0, sizeof(rec));
    rec.key = key;
  }
  if (l->form == POL_FORM_FLUSH) {
    bool changed = false;
    uint64_t from = l->preempt_raised ? l->preempt_ns : 0;
    if (ev->flag_ns && (!from || ev->flag_ns < from))
      from = ev->flag_ns;
    if (ev->drain_ns || (from && ev->dev_end_ns >= from)) {
      uint64_t drain = ev->drain_ns ? ev->drain_ns : ev->dev_end_ns - from;
      if (drain >= rec.flush_drain_ns)
        rec.flush_drain_ns = drain;
      else
        rec.flush_drain_ns -= (rec.flush_drain_ns - drain) / 8;
      if (rec.flush_drain_samples < UINT32_MAX)
        rec.flush_drain_samples++;
      changed = true;
    }
    if (ev->blocks_given_up > 0 || ev->blocks_done == 0)
      return changed ? pol_profiles_put(s->profiles, &rec) : 0; /* no wave time in it */
    uint64_t waves = (ev->blocks_done + r - 1) / r;
    drifted = fold(&s->cfg, &rec.wave_ns, &rec.wave_samples, dur / waves);
  } else if (l->form == POL_FORM_PTB) {
    uint64_t w = l->workers ? l->workers : 1;
    if (ev->blocks_done == 0)
      return 0; /* preempted before any block: no information */
    uint64_t rounds = (ev->blocks_done + w - 1) / w;
    drifted = fold(&s->cfg, &rec.ptb_block_ns, &rec.ptb_samples, dur / rounds);
  } else {
    uint64_t waves = (l->count + r - 1) / r;
    drifted = fold(&s->cfg, &rec.wave_ns, &rec.wave_samples, dur / waves);
    if (rec.flush_drain_samples > 0 && rec.flush_drain_ns > s->cfg.flush_giveup_ns)
      rec.flush_drain_ns -= (rec.flush_drain_ns - s->cfg.flush_giveup_ns) / 8; /* above */
  }
  if (drifted) {
    if (++rec.drifted >= s->cfg.drift_samples) {
      /* Re-profile: forget both figures; the kernel is unprofiled again. */
      rec.wave_ns = rec.ptb_block_ns = rec.flush_drain_ns = 0;
      rec.wave_samples = rec.ptb_samples = rec.flush_drain_samples = 0;
      rec.drifted = 0;
      s->stats.reprofiles++;
    }
  } else {
    rec.drifted = 0;
    if (rec.wave_samples >= s->cfg.min_samples && rec.wave_ns > 0)
      hint_put(s, &l->sub->k, rec.wave_ns);
  }
  return pol_profiles_put(s->profiles, &rec);
}
