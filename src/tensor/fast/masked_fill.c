/* fast/masked_fill.c -- masked_fill's select over contiguous blocks (ops/masked_fill.c has the
 * formulas, the broadcasting and the reference loop this must equal).
 *
 * x is cut into [outer, inner] blocks, inner = the trailing dims along which the mask is not
 * repeated, so each block reads one contiguous block of the mask: a causal [T,T] mask over
 * scores [B,H,T,T] gives blocks of T*T (the one mask block, as training reads it), a combined
 * [B,1,T,T] mask blocks of T*T too, a key-padding [B,1,1,T] mask rows of T. The inner loop is
 * a select that vectorizes; only the block's mask offset costs index arithmetic. */
#include "fast.h"

/* the number of elements in the trailing dims where the mask's stride is x's own (not
 * repeated); *k gets the first of those dims */
static size_t inner_block(const int *n, const size_t *ms, int *k)
{
    size_t inner = 1;
    int d = AG_MAX_DIMS;
    while (d > 0 && (n[d - 1] == 1 || ms[d - 1] == inner)) {
        d--;
        inner *= (size_t)n[d];
    }
    *k = d;
    return inner;
}

/* the mask offset of outer block o: o's indexes over dims 0..k-1 times the mask's strides */
static size_t block_offset(size_t o, const int *n, const size_t *ms, int k)
{
    size_t off = 0;
    for (int d = k - 1; d >= 0; d--) {
        off += (o % (size_t)n[d]) * ms[d];
        o /= (size_t)n[d];
    }
    return off;
}

void ag_fast_masked_select(ag_real *out, const ag_real *in, const ag_real *mask, ag_real value, bool add,
                           const int *n, const size_t *ms)
{
    int k;
    size_t N = (size_t)n[0] * n[1] * n[2] * n[3], inner = inner_block(n, ms, &k);
    size_t outer = inner ? N / inner : 0;
#pragma omp parallel for schedule(static) if (N >= AG_PAR_MIN)
    for (size_t o = 0; o < outer; o++) {
        const ag_real *m = mask + block_offset(o, n, ms, k), *in_o = in + o * inner;
        ag_real *out_o = out + o * inner;
        if (add)
            for (size_t j = 0; j < inner; j++) out_o[j] += m[j] != 0 ? in_o[j] : 0;
        else
            for (size_t j = 0; j < inner; j++) out_o[j] = m[j] != 0 ? in_o[j] : value;
    }
}
