/* windows.c -- a batch of windows of a token sequence (corpus.h, MODEL.md "Vocabulary and
 * data"): the offsets drawn from a seeded rng, then the windows and their targets copied out.
 * Apart from corpus.c so that a program reading a corpus alone (the fuzzers) links no rng. */
#include <string.h>
#include "corpus.h"

void ag_windows_draw(size_t *off, int B, size_t n, int T, ag_rng *rng)
{
    for (int b = 0; b < B; b++) off[b] = (size_t)ag_rng_below(rng, (uint64_t)(n - (size_t)T));
}

void ag_windows_fill(int *x, int *y, const int *ids, const size_t *off, int b, int T)
{
    for (int i = 0; i < b; i++) {
        memcpy(x + (size_t)i * T, ids + off[i], (size_t)T * sizeof *x);       /* tokens off .. off+T-1 */
        memcpy(y + (size_t)i * T, ids + off[i] + 1, (size_t)T * sizeof *y);   /* and each one's next */
    }
}
