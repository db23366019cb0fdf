/* hash.h -- FNV-1a, 64 bit (Fowler, Noll and Vo; the IETF draft "The FNV Non-Cryptographic Hash
 * Algorithm"): the one fingerprint of the project. It is not cryptographic; it notices change.
 * Its users: a run's token ids in every char_lm checkpoint (ag_ids_hash: a resume on another
 * text is refused), the weights that the ranks of a data-parallel job compare at each
 * evaluation (examples/char_lm/ddp.c), the files of the tests' directory snapshots
 * (tests/proc.c).
 *
 *   h = AG_FNV1A_INIT;  for each byte b:  h = (h ^ b) * 0x100000001b3  (mod 2^64)
 *
 * Cannot fail; nothing is allocated. */
#ifndef AG_DATA_HASH_H
#define AG_DATA_HASH_H

#include <stddef.h>
#include <stdint.h>

#define AG_FNV1A_INIT 0xcbf29ce484222325ull   /* the offset basis: the hash of no bytes */

/* h with the n bytes at p folded in, in order (p may be NULL when n is 0). Start from
 * AG_FNV1A_INIT; hashing pieces one after the other equals one call over their concatenation:
 *   ag_fnv1a(AG_FNV1A_INIT, "a", 1) == 0xaf63dc4c8601ec8c */
uint64_t ag_fnv1a(uint64_t h, const void *p, size_t n);

/* The fingerprint of token ids [n]: FNV-1a over each id's 4 bytes, least significant first
 * (the same on every host). char_lm saves it as data_hash; changing it would refuse every
 * resume of an existing checkpoint. */
uint64_t ag_ids_hash(const int *ids, size_t n);

#endif
