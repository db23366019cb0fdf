/* fast.h -- the tools of the fast kernels (fast/<op>.c), and their declarations.
 *
 * A fast kernel does what its op's reference kernel does (ops/<op>.c), in another order or
 * with other memory traffic: lane reductions, column blocks, gemm pairs, AVX2 targets,
 * gradients written instead of zeroed and added to, fused attention. The tests/test_fast_ref*.c
 * suites run both on random shapes and require them equal (tests/fastref.h). Not compiled
 * with `make REFERENCE=1`. Not installed, not part of the API. */
#ifndef AG_FAST_H
#define AG_FAST_H

#include "../alloc.h"
#include "../kernel.h"

/* The gradient buffer of t for a backward that writes EVERY element of it. The first
 * contribution to a gradient needs no zeroed buffer: *accumulate is false and the backward
 * writes with `=` (gemm beta 0); later ones find the buffer and add (`+=`, beta 1). This saves
 * a memset of every activation gradient. Backwards that write only some elements (a scatter,
 * a broadcast) use ag_grad, which zeroes. NULL on OOM. Defined in fast/grad.c. */
ag_real *ag__grad_into(ag_ctx *ctx, ag_tensor *t, bool *accumulate);

/* The range [*i0, *i1) of n items that thread `part` of n_parts takes: equal shares in order. */
static inline void ag__share(size_t n, int part, int n_parts, size_t *i0, size_t *i1)
{
    *i0 = n * (size_t)part / (size_t)n_parts;
    *i1 = n * (size_t)(part + 1) / (size_t)n_parts;
}

/* exp for the fast kernels (softmax, cross-entropy, attention, GELU, SiLU). In the float build
 * on x86-64 glibc it is libm's expf under a second name that is declared SIMD, so that loops
 * marked `#pragma omp simd` call glibc's vector expf from libmvec (4 lanes per call, 8 in an
 * AVX2 target: 0.85 vs 2.3 ns per element here, within 2.3e-7 relative; inf, -inf and NaN
 * handled). The second name keeps the SIMD declaration away from plain expf: the reference
 * kernels, which call AG_EXP, stay scalar libm. Under that name the compiler no longer knows
 * the function as expf, so it is told what expf is, or it reloads around every call (GELU's
 * forward: 1.7% more instructions): const (its result depends on x alone; we never read the
 * errno it may set), nothrow and leaf (as glibc declares it).
 * AG_NO_LIBMVEC turns it off for other C libraries. Clang ignores the simd attribute (and
 * would warn), arm64 has no such libmvec here: both call plain AG_EXP, scalar. */
#if !defined(AG_DOUBLE) && defined(__x86_64__) && defined(__GLIBC__) && !defined(__clang__) && !defined(AG_NO_LIBMVEC)
float ag__simd_expf(float) __asm__("expf") __attribute__((__simd__("notinbranch"), const, nothrow, leaf));
static inline ag_real ag__exp(ag_real x) { return ag__simd_expf(x); }
#else
static inline ag_real ag__exp(ag_real x) { return AG_EXP(x); }
#endif

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

/* Three targets of one loop. The build has no -march (GCC 12 miscompiled one of our loops with
 * -march=native), so a loop that computes more than it moves (GELU, LayerNorm, the attention
 * weights' softmax, AdamW) gets wider vectors this way: its body is an always-inline function
 * compiled three times by AG_TARGETS, into NAME_plain (SSE2: 4 floats per instruction),
 * NAME_avx2 (8, and libmvec's 8-lane expf) and NAME_avx512 (16, and the 16-lane expf), and the
 * kernel calls AG_PICK(NAME), the widest this CPU runs. No target fuses a
 * multiply-add: the build's -std=c11 means -ffp-contract=off, so even the AVX-512 target,
 * which has FMA instructions, rounds every product and sum as the plain one does; a loop
 * without exp gives the same bits on all three. tests/test_fast_targets.c (and, for GELU's
 * forward, tests/test_fast_ref_rows.c) calls each target by name and compares. AG_NO_CLONES
 * leaves the plain target alone (the three names still exist). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(AG_NO_CLONES)
#define AG_AVX2 __attribute__((target("avx2")))
#define AG_AVX512 __attribute__((target("avx512f")))
static inline bool ag__cpu_has_avx2(void) { return __builtin_cpu_supports("avx2"); }
static inline bool ag__cpu_has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#else
#define AG_AVX2
#define AG_AVX512
static inline bool ag__cpu_has_avx2(void) { return false; }
static inline bool ag__cpu_has_avx512(void) { return false; }
#endif

/* NAME_plain, NAME_avx2 and NAME_avx512 PARAMS (a parameter list in parentheses), each running
 * BODY ARGS (an always-inline function, the arguments in parentheses). They have external
 * linkage, for the tests. */
#define AG_TARGETS(NAME, BODY, PARAMS, ARGS)             \
    void NAME##_plain PARAMS { BODY ARGS; }              \
    AG_AVX2 void NAME##_avx2 PARAMS { BODY ARGS; }       \
    AG_AVX512 void NAME##_avx512 PARAMS { BODY ARGS; }
/* the target of NAME that this CPU runs best (the CPU's features are read once, at load) */
#define AG_PICK(NAME) (ag__cpu_has_avx512() ? NAME##_avx512 : ag__cpu_has_avx2() ? NAME##_avx2 : NAME##_plain)
/* their declarations, for a header */
#define AG_TARGETS_DECL(NAME, PARAMS) \
    void NAME##_plain PARAMS;         \
    void NAME##_avx2 PARAMS;          \
    void NAME##_avx512 PARAMS

/* ---------- the fast kernels, one group per op ---------- */

/* fast/layernorm.c: the forward takes ops/layernorm.c's layernorm_forward arguments; the backward
 * is a whole backward step (it writes dx on first touch through ag__grad_into) */
void ag_fast_layernorm_forward(ag_real *y, ag_real *stats, const ag_real *x, const ag_real *w, const ag_real *b,
                               size_t R, int C, ag_real eps);
ag_status ag_fast_layernorm_backward(ag_ctx *ctx, ag_node *n);
/* their loops over rows [r0, r1), three targets each (AG_TARGETS): the forward's; the
 * backward's dx (NULL: none; acc: add to it) and sums of dy xhat and dy over those rows into
 * sw[C] and sb[C] (sw NULL: neither) */
AG_TARGETS_DECL(ag__layernorm_forward_rows, (ag_real *y, ag_real *stats, const ag_real *x, const ag_real *w,
                                             const ag_real *b, size_t r0, size_t r1, int C, ag_real eps));
AG_TARGETS_DECL(ag__layernorm_backward_rows, (ag_real *dx, bool acc, ag_real *sw, ag_real *sb, const ag_real *dy,
                                              const ag_real *x, const ag_real *w, const ag_real *stats, size_t r0,
                                              size_t r1, int C));

/* fast/rmsnorm.c: the same arguments as ops/rmsnorm.c's rmsnorm_forward/rmsnorm_backward */
void ag_fast_rmsnorm_forward(ag_real *y, ag_real *rstd, const ag_real *x, const ag_real *w, size_t R, int C,
                             ag_real eps);
void ag_fast_rmsnorm_backward(ag_real *dx, ag_real *dw, const ag_real *dy, const ag_real *x, const ag_real *w,
                              const ag_real *rstd, size_t R, int C);

/* fast/cross_entropy.c: the forward only, ops/cross_entropy.c's cross_entropy_forward arguments */
double ag_fast_cross_entropy_forward(ag_real *probs, const ag_real *z, const int *targets, int ignore_index,
                                     size_t R, int V);

/* fast/masked_fill.c: the same arguments as ops/masked_fill.c's masked_select, the forward and
 * the backward in one (x's shape n[4] padded on the left, the mask's strides ms[4] over it, 0
 * where repeated) */
void ag_fast_masked_select(ag_real *out, const ag_real *in, const ag_real *mask, ag_real value, bool add,
                           const int *n, const size_t *ms);

/* fast/gelu.c: the forward takes ops/gelu.c's gelu_forward arguments; the backward is a whole
 * backward step (it writes dx on first touch through ag__grad_into). Their work loops, over n
 * items of one thread, have three targets (AG_TARGETS): the forward's writes y (and th unless
 * NULL), the backward's dx (added to when acc). */
void ag_fast_gelu_forward(ag_real *y, ag_real *th, const ag_real *x, size_t N);
ag_status ag_fast_gelu_backward(ag_ctx *ctx, ag_node *n);
AG_TARGETS_DECL(ag__gelu_forward_span, (ag_real *y, ag_real *th, const ag_real *x, size_t n));
AG_TARGETS_DECL(ag__gelu_backward_span, (ag_real *dx, const ag_real *dy, const ag_real *x, const ag_real *th,
                                         size_t n, bool acc));

/* fast/silu.c: the forward only, ops/silu.c's silu_forward arguments */
void ag_fast_silu_forward(ag_real *y, ag_real *sig, const ag_real *x, size_t N);

/* fast/softmax.c: the same arguments as ops/softmax.c's softmax_forward/softmax_backward */
void ag_fast_softmax_forward(ag_real *y, const ag_real *x, size_t R, int N);
void ag_fast_softmax_backward(ag_real *dx, const ag_real *y, const ag_real *dy, size_t R, int N);

/* fast/linear.c, fast/matmul.c, fast/add.c: the products and the add
 * (tests/test_fast_ref_products.c proves them equal to the reference kernels). A forward takes
 * the arguments of its ops/<op>.c reference kernel; an ag_status backward is a whole backward
 * step (it takes its gradients with ag__grad_into, or runs a gemm pair). */
void ag_fast_linear_forward(ag_real *y, const ag_real *x, const ag_real *W, const ag_real *b, int R, int Fin, int Fout);
ag_status ag_fast_linear_backward(ag_ctx *ctx, ag_node *n);
void ag_fast_matmul_forward(ag_real *C, const ag_real *A, const ag_real *B, size_t batch, int M, int K, int N,
                            bool shared_b);
void ag_fast_matmul_backward(ag_real *dA, ag_real *dB, const ag_real *dC, const ag_real *A, const ag_real *B,
                             size_t batch, int M, int K, int N, bool shared_b);
void ag_fast_add_forward(ag_real *y, const ag_real *a, const ag_real *b, size_t N, size_t nb);
ag_status ag_fast_add_backward(ag_ctx *ctx, ag_node *n);

/* fast/dropout.c: the forward takes ops/dropout.c's dropout_forward arguments (the backward,
 * dx += dy m, is ops/dropout.c's own) */
void ag_fast_dropout_forward(ag_real *y, ag_real *m, const ag_real *x, ag_real p, uint64_t seed, size_t N);
AG_TARGETS_DECL(ag__dropout_forward_span, (ag_real *y, ag_real *m, const ag_real *x, ag_real scale,
                                           uint64_t threshold, uint64_t seed, size_t i0, size_t n));

/* fast/attention.c: attention's fast twin, a whole op (its reference is attend() in
 * src/nn/attention.c, the composed ops; tests/test_fused.c and tests/test_fast_ref_products.c
 * prove them equal). q, k, v [B,T,C] of one shape, H dividing C (the caller, nn/attention.c's
 * fusable(), has checked) -> dropout(softmax(scale q k^T, causal or no mask)) v over H heads
 * [B,T,C], dropout with rate dropout (0: none) and ops/dropout.c's mask seeded with seed, one node
 * on the tape; valid until ag_ctx_reset. NULL on an earlier error or out of memory. */
ag_tensor *ag_fast_attention(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_real scale,
                             bool causal, ag_real dropout, uint64_t seed);
/* its loops over the rows of one (b, h), each row i up to the end of its tile of `tile` rows
 * (min(T, (i / tile + 1) tile); tile T: whole rows): A = softmax of S [T,T] in place (row i
 * over keys 0..i when causal, the rest 0), and dS = A * (dA - rowsum(dA * A)) in place of dA */
AG_TARGETS_DECL(ag__attention_softmax_rows, (ag_real *S, int T, bool causal, int tile));
AG_TARGETS_DECL(ag__attention_softmax_backward_rows, (ag_real *dS, const ag_real *A, int T, int tile));
/* and dropout's: Ad = dropout of A [T,T] (the weights' elements base + i T + j; causal: row i's
 * keys past i stay 0), and dA = dAd / (1 - p) where Ad != 0 (else 0) in place of dAd (rows to
 * their tile's end, as above) */
AG_TARGETS_DECL(ag__attention_dropout_rows,
                (ag_real *Ad, const ag_real *A, int T, bool causal, int tile, ag_real p, uint64_t seed,
                 uint64_t base));
AG_TARGETS_DECL(ag__attention_dropout_backward_rows,
                (ag_real *dA, const ag_real *Ad, int T, int tile, ag_real p));

#endif
