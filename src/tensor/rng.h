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
/* splitmix64 (Steele, Lea & Flood 2014; Vigna's splitmix64.c): its output for state x, the
 * finaliser applied to x + 0x9E3779B97F4A7C15. The one 64-bit mixer of the project: every seed
 * it derives (the PCG32 seeding, dropout sites, the xavier stream, ag_hash_uniform) goes
 * through it, so runs stay reproducible across files. */
uint64_t ag_splitmix64(uint64_t x);
/* The seed of stream `tag` of seed: ag_splitmix64(seed + tag * 0x9E3779B97F4A7C15), i.e. the
 * (tag+1)-th output of a splitmix64 sequence started at seed. Distinct tags give unrelated
 * seeds (dropout site 0, 1, 2, ... of a block; the xavier stream "xavi" of a model). */
uint64_t ag_seed_mix(uint64_t seed, uint64_t tag);
/* The seed of draw i of stream `tag` of seed: ag_splitmix64((seed ^ tag ^ (i * golden + salt))
 * - golden), golden 0x9E3779B97F4A7C15 and salt 0x632BE59BD9B4E019 (splitmix64's finaliser
 * alone: ag_splitmix64 adds the golden step itself). char_lm seeds its per-step streams so (the
 * dropout masks of step i: tag "dropout", 0x64726f706f7574), and a program that replays one of
 * its steps (examples/one_step) draws the same masks with it. */
uint64_t ag_seed_at(uint64_t seed, uint64_t tag, uint64_t i);
/* A stateless hash of (seed, i) to [0, 1): dropout masks use it so any element's mask bit can
 * be recomputed from the seed alone. */
double ag_hash_uniform(uint64_t seed, uint64_t i);

#endif
