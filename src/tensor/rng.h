/* rng.h -- a small seeded random number generator (PCG32 with splitmix64 seeding).
 * No global state: every user owns an ag_rng, so runs are reproducible from their seeds and a
 * checkpoint can store the state (one uint64) to resume exactly. */
#ifndef AG_RNG_H
#define AG_RNG_H

#include <stdint.h>

typedef struct { uint64_t state; uint64_t inc; } ag_rng;

void ag_rng_seed(ag_rng *r, uint64_t seed);
uint32_t ag_rng_u32(ag_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double ag_rng_uniform(ag_rng *r);
/* Uniform integer in [0, n), unbiased; n > 0. */
uint64_t ag_rng_below(ag_rng *r, uint64_t n);
/* Standard normal (Box-Muller, one value per call). */
double ag_rng_normal(ag_rng *r);
/* A stateless hash of (seed, i) to [0, 1): dropout masks use it so any element's mask bit can
 * be recomputed from the seed alone. */
double ag_hash_uniform(uint64_t seed, uint64_t i);

#endif
