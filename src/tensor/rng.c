/* rng.c -- PCG32 (O'Neill, pcg-random.org), seeded through splitmix64. */
#include <math.h>
#include "rng.h"
#include "hash.h"   /* the formulas, inline */

uint64_t ag_splitmix64(uint64_t x) { return ag__splitmix64(x); }

uint64_t ag_seed_mix(uint64_t seed, uint64_t tag) { return ag_splitmix64(seed + tag * AG__GOLDEN); }

uint64_t ag_seed_at(uint64_t seed, uint64_t tag, uint64_t i)
{
    return ag_splitmix64((seed ^ tag ^ (i * AG__GOLDEN + 0x632BE59BD9B4E019ull)) - AG__GOLDEN);
}

void ag_rng_seed(ag_rng *r, uint64_t seed)
{
    /* the first two outputs of a splitmix64 sequence started at seed */
    r->state = ag_seed_mix(seed, 0);
    r->inc = ag_seed_mix(seed, 1) | 1u; /* the increment must be odd */
}

uint32_t ag_rng_u32(ag_rng *r)
{
    uint64_t old = r->state;
    r->state = old * 6364136223846793005ull + r->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    uint32_t rot = (uint32_t)(old >> 59u);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

double ag_rng_uniform(ag_rng *r)
{
    uint64_t hi = ag_rng_u32(r) >> 5, lo = ag_rng_u32(r) >> 6; /* 27 + 26 = 53 bits */
    return (double)(hi * 67108864.0 + lo) / 9007199254740992.0;
}

uint64_t ag_rng_below(ag_rng *r, uint64_t n)
{
    /* rejection sampling on 64 bits: no modulo bias */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    for (;;) {
        uint64_t x = ((uint64_t)ag_rng_u32(r) << 32) | ag_rng_u32(r);
        if (x < limit) return x % n;
    }
}

double ag_rng_normal(ag_rng *r)
{
    double u1 = ag_rng_uniform(r), u2 = ag_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300; /* log(0) guard */
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

double ag_hash_uniform(uint64_t seed, uint64_t i) { return ag__hash_uniform(seed, i); }
