/* internal.h -- helpers shared by the op files; not installed, not part of the API. */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

#include <math.h>
#include <string.h>
#include "ops.h"

/* "[2,3,8]" for error messages: `char b[AG_SHAPE_BUF]; ag_shape_str(t, b, sizeof b)` */
#define AG_SHAPE_BUF 48

/* A new tensor in ctx whose data is NOT zeroed: for op outputs that the kernel overwrites
 * entirely (saves a memset of every activation). Defined in ctx.c. */
ag_tensor *ag__tensor_uninit(ag_ctx *ctx, int ndim, const int *shape);

/* The gradient buffer of t for a backward that writes EVERY element of it. The first
 * contribution to a gradient needs no zeroed buffer: *accumulate is false and the backward
 * writes with `=` (gemm beta 0); later ones find the buffer and add (`+=`, beta 1). This saves
 * a memset of every activation gradient. Backwards that write only some elements (a scatter,
 * a broadcast) use ag_grad, which zeroes. NULL on OOM. Defined in ctx.c. */
ag_real *ag__grad_into(ag_ctx *ctx, ag_tensor *t, bool *accumulate);

/* Memory for a big buffer (the step arena, the parameters and the optimizer state), freed with
 * free(): from 2 MiB up it is aligned to 2 MiB and the kernel is asked to back it with 2 MiB
 * pages (transparent huge pages; Debian's default mode is "madvise", so nothing happens
 * without asking). A step streams through tens of MB, and with 4 KiB pages the TLB misses
 * cost about 10% of a baby step here. zero: zero-filled, as calloc. NULL when out of memory.
 * Defined in ctx.c. */
void *ag__alloc_big(size_t bytes, bool zero);

/* The start of every op: a NULL input or an earlier error makes the op a no-op that returns
 * NULL, so a forward pass reads straight through and is checked once at the end. */
static inline bool ag__skip(ag_ctx *ctx, const ag_tensor *a, const ag_tensor *b)
{
    return ag_ctx_status(ctx) != AG_OK || !a || !b;
}

/* The end of every op: y unless an error happened on the way (OOM while recording). */
static inline ag_tensor *ag__done(ag_ctx *ctx, ag_tensor *y)
{
    return ag_ctx_status(ctx) == AG_OK ? y : NULL;
}

/* Below this many elements an op runs on one thread: waking the others costs more than it
 * saves (sampling feeds one position at a time through every op). */
#define AG_PAR_MIN 16384

/* out[c] += sum over rows r of x[r, c], for x [R, C]: the gradient of a broadcast bias.
 * Threads take blocks of AG_COL_BLOCK adjacent columns, so no two write the same out[c], and
 * each row's block is contiguous (vectorizes, unlike walking one column down the rows). */
#define AG_COL_BLOCK 32
static inline void ag__sum_rows_block(ag_real *out, const ag_real *x, size_t R, int C, int blk)
{
    int c0 = blk * AG_COL_BLOCK, w = C - c0 < AG_COL_BLOCK ? C - c0 : AG_COL_BLOCK;
    ag_real acc[AG_COL_BLOCK] = { 0 };
    if (w == AG_COL_BLOCK) { /* a fixed width: acc stays in registers */
        for (size_t r = 0; r < R; r++)
            for (int c = 0; c < AG_COL_BLOCK; c++) acc[c] += x[r * (size_t)C + c0 + c];
    } else {
        for (size_t r = 0; r < R; r++)
            for (int c = 0; c < w; c++) acc[c] += x[r * (size_t)C + c0 + c];
    }
    for (int c = 0; c < w; c++) out[c0 + c] += acc[c];
}

static inline void ag__sum_rows(ag_real *out, const ag_real *x, size_t R, int C)
{
    int n_blocks = (C + AG_COL_BLOCK - 1) / AG_COL_BLOCK;
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
    for (int blk = 0; blk < n_blocks; blk++) ag__sum_rows_block(out, x, R, C, blk);
}

/* The same, for the caller's thread `part` of n_parts (inside a parallel region): the column
 * blocks part, part + n_parts, ... */
static inline void ag__sum_rows_part(ag_real *out, const ag_real *x, size_t R, int C, int part, int n_parts)
{
    int n_blocks = (C + AG_COL_BLOCK - 1) / AG_COL_BLOCK;
    for (int blk = part; blk < n_blocks; blk += n_parts) ag__sum_rows_block(out, x, R, C, blk);
}

/* Row reductions (sum, dot, max) with AG_LANES independent running values. One running sum is
 * a chain of dependent adds, 4 cycles each, that the compiler may not split (that would reorder
 * the sum); these lanes are that split written out, so they vectorize and the result is the
 * same on every machine. The lanes are combined pairwise at the end, in a fixed order. */
#define AG_LANES 16

static inline ag_real ag__lanes_total(ag_real *lane)
{
    for (int w = AG_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] += lane[l + w];
    return lane[0];
}

/* x[0] + ... + x[n-1] */
static inline ag_real ag__sum(const ag_real *x, int n)
{
    ag_real lane[AG_LANES] = { 0 };
    int i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++) lane[l] += x[i + l];
    for (int l = 0; i < n; i++, l++) lane[l] += x[i];
    return ag__lanes_total(lane);
}

/* x[0] y[0] + ... + x[n-1] y[n-1] */
static inline ag_real ag__dot(const ag_real *x, const ag_real *y, int n)
{
    ag_real lane[AG_LANES] = { 0 };
    int i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++) lane[l] += x[i + l] * y[i + l];
    for (int l = 0; i < n; i++, l++) lane[l] += x[i] * y[i];
    return ag__lanes_total(lane);
}

/* the largest of x[0..n-1] and floor (NaNs are passed over, as `x > m ? x : m` does) */
static inline ag_real ag__max(const ag_real *x, int n, ag_real floor)
{
    ag_real lane[AG_LANES];
    for (int l = 0; l < AG_LANES; l++) lane[l] = floor;
    int i = 0;
    for (; i + AG_LANES <= n; i += AG_LANES)
        for (int l = 0; l < AG_LANES; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
    for (int l = 0; i < n; i++, l++) lane[l] = x[i] > lane[l] ? x[i] : lane[l];
    for (int w = AG_LANES / 2; w > 0; w /= 2)
        for (int l = 0; l < w; l++) lane[l] = lane[l + w] > lane[l] ? lane[l + w] : lane[l];
    return lane[0];
}

/* AG_CLONES before a kernel compiles it twice, for plain x86-64 and for AVX2 (8 floats per
 * instruction, and libmvec's 8-lane expf), and the loader picks the one the CPU can run. The
 * build has no -march (GCC 12 miscompiled one of our loops with -march=native), so this is
 * how a compute-bound loop (GELU's forward) gets the wider vectors. No FMA: a fused
 * multiply-add would round differently from the plain clone. AG_NO_CLONES turns it off. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(AG_NO_CLONES)
#define AG_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define AG_CLONES
#endif

/* The range [*i0, *i1) of n items that thread `part` of n_parts takes: equal shares in order. */
static inline void ag__share(size_t n, int part, int n_parts, size_t *i0, size_t *i1)
{
    *i0 = n * (size_t)part / (size_t)n_parts;
    *i1 = n * (size_t)(part + 1) / (size_t)n_parts;
}

/* exp for the kernels (softmax, cross-entropy, attention, GELU): libm's, in ag_real's own
 * precision. In the float build on x86-64 glibc, expf is declared SIMD so that loops marked
 * `#pragma omp simd` call glibc's vector expf from libmvec (4 lanes per call: 0.85 vs 2.3 ns
 * per element here, within 2.3e-7 relative; inf, -inf and NaN handled). AG_NO_LIBMVEC turns
 * it off for other C libraries. */
#if !defined(AG_DOUBLE) && defined(__x86_64__) && defined(__GLIBC__) && !defined(AG_NO_LIBMVEC)
float expf(float) __attribute__((__simd__("notinbranch")));
#endif
static inline ag_real ag__exp(ag_real x) { return AG_EXP(x); }

#endif
