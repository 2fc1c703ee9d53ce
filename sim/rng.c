/* rng.c: the simulator's random numbers.
 *
 * xoshiro256** (Blackman and Vigna, 2018), seeded through splitmix64 so that
 * any 64-bit seed, 0 included, gives a well-mixed state.  Chosen over rand()
 * because the simulator must give the same output byte for byte on every libc.
 */
#include "sim/sim.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

void sim_rng_init(sim_rng_t *r, uint64_t seed) {
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&seed);
}

uint64_t sim_rng_next(sim_rng_t *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double sim_rng_uniform(sim_rng_t *r) {
  /* 53 high bits: every double in [0,1) with spacing 2^-53. */
  return (double)(sim_rng_next(r) >> 11) * 0x1.0p-53;
}

double sim_rng_exp(sim_rng_t *r, double mean) {
  /* Inverse transform on (0, 1]: 1 - u never hits 0, so log is finite. */
  double u = 1.0 - sim_rng_uniform(r);
  return -mean * log(u);
}
