/* hash.h -- the two hashes rng.c exports (ag_splitmix64, ag_hash_uniform), inline, so that the
 * loops that draw a dropout mask element by element (ops/dropout.c, fast/attention.c) compute
 * them without a call each. rng.c's functions are these; nothing else writes the formulas. */
#ifndef AG_HASH_H
#define AG_HASH_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define AG__GOLDEN 0x9E3779B97F4A7C15ull   /* 2^64 / phi, splitmix64's step */

/* splitmix64's output for state x: the finaliser applied to x + golden */
static inline uint64_t ag__splitmix64(uint64_t x)
{
    uint64_t z = x + AG__GOLDEN;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* (seed, i) -> [0, 1) with 53 bits: element i's draw of the mask seeded with seed */
static inline double ag__hash_uniform(uint64_t seed, uint64_t i)
{
    return (double)(ag__splitmix64(seed ^ (i * 0xD1B54A32D192ED03ull)) >> 11) / 9007199254740992.0;
}

/* Inverted dropout with rate p keeps element i of the mask seeded with seed when
 * ag__hash_uniform(seed, i) >= p. The same test in integers, which vectorizes: that uniform is
 * u = bits / 2^53 exactly (bits: the hash's top 53), so u >= p iff bits >= p 2^53, iff bits >=
 * ceil(p 2^53), the threshold. */
static inline uint64_t ag__dropout_threshold(double p) { return (uint64_t)ceil(p * 9007199254740992.0); }

static inline bool ag__dropout_keeps(uint64_t seed, uint64_t i, uint64_t threshold)
{
    return ag__splitmix64(seed ^ (i * 0xD1B54A32D192ED03ull)) >> 11 >= threshold;
}

#endif
