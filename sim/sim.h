/* sim.h: the public API of sim/, Tally's discrete-event GPU simulator.
 *
 * sim/ replays kernel traces and arrival traces under each scheduling policy
 * and drives policy/ through the same interface tallyd uses.  Everything is
 * deterministic for a given seed.
 */
#ifndef TALLY_SIM_H
#define TALLY_SIM_H

#include <stdint.h>

/* A small, fast, seedable RNG (splitmix64 seeding xoshiro256**). The state is
 * owned by the caller; one per simulation keeps runs reproducible. */
typedef struct sim_rng {
  uint64_t s[4];
} sim_rng_t;

void sim_rng_init(sim_rng_t *r, uint64_t seed);
uint64_t sim_rng_next(sim_rng_t *r);
/* Uniform double in [0, 1). */
double sim_rng_uniform(sim_rng_t *r);

#endif /* TALLY_SIM_H */
