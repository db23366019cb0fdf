/* hash.h -- FNV-1a, 64 bit (Fowler, Noll and Vo; the IETF draft "The FNV Non-Cryptographic Hash
 * Algorithm"): the one fingerprint of the project. It is not cryptographic; it notices change.
 * Its users: a run's token ids in every char_lm checkpoint (ag_ids_hash: a resume on another
 * text is refused), the weights a train state is bound to (examples/char_lm/checkpoint.c), the
 * weights that the ranks of a data-parallel job compare at each evaluation (src/train/ddp.c), the
 * files of the tests' directory snapshots (tests/proc.c).
 *
 *   h = AG_FNV1A_INIT;  for each byte b:  h = (h ^ b) * 0x100000001b3  (mod 2^64)
 *
 * Cannot fail; nothing is allocated. */
#ifndef AG_DATA_HASH_H
#define AG_DATA_HASH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AG_FNV1A_INIT 0xcbf29ce484222325ull   /* the offset basis: the hash of no bytes */

/* h with the n bytes at p folded in, in order (p may be NULL when n is 0). Start from
 * AG_FNV1A_INIT; hashing pieces one after the other equals one call over their concatenation:
 *   ag_fnv1a(AG_FNV1A_INIT, "a", 1) == 0xaf63dc4c8601ec8c */
uint64_t ag_fnv1a(uint64_t h, const void *p, size_t n);

/* h with the 4 bytes of x folded in, the least significant first (the same on every host). */
uint64_t ag_fnv1a_u32(uint64_t h, uint32_t x);

/* The fingerprint of token ids [n]: FNV-1a over each id's 4 bytes, least significant first.
 * char_lm saves it as data_hash; changing it would refuse every resume of an existing
 * checkpoint. */
uint64_t ag_ids_hash(const int *ids, size_t n);
/* The same, asking stop(user) every 2^20 ids (stop NULL: never): once it says true, the hash
 * is abandoned and 0 returned, so that a stop signal ends even the hash of 2 GiB of text
 * within a few milliseconds. */
uint64_t ag_ids_hash_until(const int *ids, size_t n, bool (*stop)(void *user), void *user);

#endif
