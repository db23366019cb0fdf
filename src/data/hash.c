/* hash.c -- FNV-1a, 64 bit (see hash.h). */
#include "hash.h"

#define FNV1A_PRIME 0x100000001b3ull   /* 2^40 + 2^8 + 0xb3 */

uint64_t ag_fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV1A_PRIME;
    return h;
}

uint64_t ag_fnv1a_u32(uint64_t h, uint32_t x)
{
    unsigned char le[4] = { (unsigned char)x, (unsigned char)(x >> 8), (unsigned char)(x >> 16),
                            (unsigned char)(x >> 24) };
    return ag_fnv1a(h, le, sizeof le);
}

uint64_t ag_ids_hash(const int *ids, size_t n) { return ag_ids_hash_until(ids, n, NULL, NULL); }

uint64_t ag_ids_hash_until(const int *ids, size_t n, bool (*stop)(void *user), void *user)
{
    uint64_t h = AG_FNV1A_INIT;
    for (size_t i = 0; i < n; i++) {
        if (stop && i % ((size_t)1 << 20) == 0 && stop(user)) return 0;   /* 2 GiB of text took 15 s */
        h = ag_fnv1a_u32(h, (uint32_t)ids[i]);
    }
    return h;
}
