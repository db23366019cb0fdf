/* fast/attention.c -- attention's fast twin: the lines of attend() in src/nn/attention.c
 * (split_heads, q k^T, scale, no mask or the causal one, softmax, dropout, weights . v,
 * merge_heads) as one op with a hand-written backward, on gemm. attend() is the reference a
 * reader follows; nn/attention.c calls this op (ag_fast_attention) only where it computes exactly the same
 * (fusable() there says when), and tests/test_fused.c and tests/test_fast_ref_products.c prove
 * the two equal: the output and every gradient.
 *
 * forward, for each batch entry b and head h, with Q, K, V the [T,D] blocks of q, k, v:
 *   S = scale Q K^T                                    [T,T]
 *   A = softmax(S) over each row, where a causal row i only sees keys 0..i (the rest weigh 0)
 *   Ad = dropout(A): A[i,j] / (1 - p) where ops/dropout.c's mask for the [B,H,T,T] weights
 *        keeps element ((b H + h) T + i) T + j, else 0 (Ad is A when p = 0 or not training)
 *   O = Ad V                                           [T,D], written into y's [B,T,C] block
 * Head h of token t is the D numbers at t*C + h*D, so a head's Q, K, V and O are [T,D] blocks
 * read in place with a row stride of C: no split or merge copy. Masked scores past a row's
 * tile (TILE below) are never computed, those inside it are overwritten with weight 0, and only
 * A (and, with dropout, Ad) is kept for the backward: the mask is Ad != 0.
 * backward, the chain rule back through the same lines:
 *   O = Ad V                 =>  dV += Ad^T dO,  dAd = dO V^T
 *   Ad = dropout(A)          =>  dA = dAd / (1 - p) where kept, else 0 (kept: Ad != 0, or A = 0,
 *                                where dA does not matter: it is multiplied by A below)
 *   A = softmax(S) per row   =>  dS = A * (dA - rowsum(dA * A))   (ops/softmax.c's backward;
 *                                a masked A[i,j] is 0, so is its dS[i,j]: the mask adds nothing)
 *   S = scale Q K^T          =>  dQ += scale dS K,   dK += scale dS^T Q
 *
 * How it is fast: the products of a (b, h) are single-threaded gemms on the head's blocks (a
 * causal mask's in tiles of rows that skip the masked keys: about 5/8 of the work at T = 256),
 * and (b, h) pairs run in parallel, since they write disjoint blocks of y, dq, dk and dv. The
 * softmax rows use lane reductions (ag__max, ag__sum, ag__dot) and the SIMD expf, in three
 * targets (AG_TARGETS: plain, AVX2, AVX-512). The backward
 * writes dv, dq and dk with the gemm's beta 0 when it is the first to reach them
 * (ag__grad_into, no memset), and keeps dA and dS in one [T,T] scratch matrix per thread. */
#include <omp.h>
#include "fast.h"
#include "../blas.h"
#include "../hash.h"   /* ag__dropout_keeps: ops/dropout.c's mask */

// --- kernels ---

/* the end of the tile of `tile` rows that row i is in (see TILE below), at most T */
static inline int tile_end(int i, int tile, int T) { return (i / tile + 1) * tile < T ? (i / tile + 1) * tile : T; }

/* A[T,T] = row-wise softmax of S (in place), each row i over keys 0..(causal ? i : T-1). A
 * causal row is worked on in whole blocks of AG_LANES keys: the keys past i up to the block's
 * end first copy key 0 (the max stays the max of keys 0..i), then weigh 0 (sum and weights are
 * those of keys 0..i alone), so no loop has a short scalar tail (a row has 1..T keys; the tails
 * took half the time). The zeros go to the end of the row's tile (see TILE below): nothing
 * reads past it, and not writing them saves a third of the weights' trips to memory. */
static inline __attribute__((always_inline)) void softmax_rows(ag_real *S, int T, bool causal, int tile)
{
    for (int i = 0; i < T; i++) {
        ag_real *row = S + (size_t)i * T;
        int n = causal ? i + 1 : T;
        int nb = (n + AG_LANES - 1) / AG_LANES * AG_LANES;
        if (nb > T) nb = T;
        for (int j = n; j < nb; j++) row[j] = row[0];
        ag_real max = ag__max(row, nb, row[0]);
#pragma omp simd
        for (int j = 0; j < nb; j++) row[j] = ag__exp(row[j] - max);
        int te = tile_end(i, tile, T), end = te > nb ? te : nb;
        for (int j = n; j < end; j++) row[j] = 0; /* the future: exactly zero weight */
        ag_real inv = 1 / ag__sum(row, nb);
#pragma omp simd
        for (int j = 0; j < n; j++) row[j] *= inv;
    }
}

/* dS[T,T] = A * (dA - rowsum(dA * A)) in place of dA: softmax's backward, row by row; row i
 * up to the end of its tile (see TILE below: the keys past it were never computed) */
static inline __attribute__((always_inline)) void softmax_backward_rows(ag_real *dS, const ag_real *A, int T, int tile)
{
    for (int i = 0; i < T; i++) {
        ag_real *dr = dS + (size_t)i * T;
        const ag_real *ar = A + (size_t)i * T;
        int n = tile_end(i, tile, T);
        ag_real dot = ag__dot(dr, ar, n);
        for (int j = 0; j < n; j++) dr[j] = ar[j] * (dr[j] - dot);
    }
}

/* Ad[T,T] = dropout of the weights A of one (b, h), whose row i is element base + i T of the
 * [B,H,T,T] weights: ops/dropout.c's mask for them, element by element (a causal row's keys
 * past i weigh 0 and draw nothing, zeros to the end of its tile). */
static inline __attribute__((always_inline)) void dropout_rows(ag_real *Ad, const ag_real *A, int T, bool causal,
                                                               int tile, ag_real p, uint64_t seed, uint64_t base)
{
    ag_real keep = 1 / (1 - p);
    uint64_t threshold = ag__dropout_threshold((double)p);
    for (int i = 0; i < T; i++) {
        const ag_real *ar = A + (size_t)i * T;
        ag_real *dr = Ad + (size_t)i * T;
        int n = causal ? i + 1 : T;
        uint64_t row = base + (uint64_t)i * T;
#pragma omp simd
        for (int j = 0; j < n; j++) dr[j] = ar[j] * (ag__dropout_keeps(seed, row + (uint64_t)j, threshold) ? keep : 0);
        for (int j = n, end = tile_end(i, tile, T); j < end; j++) dr[j] = 0;
    }
}

/* dA[T,T] = dropout's backward in place of dAd: dAd / (1 - p) where the mask kept (Ad != 0);
 * row i up to the end of its tile */
static inline __attribute__((always_inline)) void dropout_backward_rows(ag_real *dA, const ag_real *Ad, int T,
                                                                        int tile, ag_real p)
{
    ag_real keep = 1 / (1 - p);
    for (int i = 0; i < T; i++) {
        ag_real *dr = dA + (size_t)i * T;
        const ag_real *ar = Ad + (size_t)i * T;
        int n = tile_end(i, tile, T);
#pragma omp simd
        for (int j = 0; j < n; j++) dr[j] = ar[j] != 0 ? dr[j] * keep : 0;
    }
}

AG_TARGETS(ag__attention_softmax_rows, softmax_rows, (ag_real *S, int T, bool causal, int tile), (S, T, causal, tile))
AG_TARGETS(ag__attention_softmax_backward_rows, softmax_backward_rows,
           (ag_real *dS, const ag_real *A, int T, int tile), (dS, A, T, tile))
AG_TARGETS(ag__attention_dropout_rows, dropout_rows,
           (ag_real *Ad, const ag_real *A, int T, bool causal, int tile, ag_real p, uint64_t seed, uint64_t base),
           (Ad, A, T, causal, tile, p, seed, base))
AG_TARGETS(ag__attention_dropout_backward_rows, dropout_backward_rows,
           (ag_real *dA, const ag_real *Ad, int T, int tile, ag_real p), (dA, Ad, T, tile, p))

/* single-threaded gemm on blocks with explicit leading dims (we are inside a parallel loop) */
static void gemm_block(bool tA, bool tB, int M, int N, int K, ag_real alpha, const ag_real *A, int lda,
                       const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    AG_GEMM(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
            lda, B, ldb, beta, C, ldc);
}

/* What one attention computes: H heads, the scale, the causal mask or none, and dropout p on
 * the weights with the mask seeded with seed (p = 0: none). */
typedef struct {
    int H;
    ag_real scale;
    bool causal;
    ag_real p;
    uint64_t seed;
} attn_spec;

/* Causal attention skips the masked half of its products, in tiles of TILE rows: the rows
 * [r0,r1) of a tile see the keys [0,r1) only, so their S, O, dAd and dQ are products over keys
 * 0..r1-1, and dV and dK of the keys [c0,c1) sum over the rows from c0 on. (A tile's keys past
 * a row's own are weights of exactly 0.) Without a mask one tile holds every row and key. */
enum { TILE = 64 }; /* 32, 48 and 128 measured slower at T = 256, D = 24 */

static int tile_rows(int T, bool causal) { return causal ? TILE : T; }

/* the keys the rows up to r1 see, and the first row that sees key c0 */
static int keys_upto(int r1, int T, bool causal) { return causal ? r1 : T; }
static int rows_from(int c0, bool causal) { return causal ? c0 : 0; }

/* one (b, h): O [T,D] (row stride C) and its weights Ab, Adb [T,T] from its Q, K, V blocks */
static void head_forward(ag_real *O, ag_real *Ab, ag_real *Adb, const ag_real *Q, const ag_real *K,
                         const ag_real *V, int T, int C, const attn_spec *at, uint64_t at_bh)
{
    int D = C / at->H, tile = tile_rows(T, at->causal);
    for (int r0 = 0; r0 < T; r0 += tile) {                                           /* S = s Q K^T */
        int m = tile_end(r0, tile, T) - r0, keys = keys_upto(r0 + m, T, at->causal);
        gemm_block(false, true, m, keys, D, at->scale, Q + (size_t)r0 * C, C, K, C, 0, Ab + (size_t)r0 * T, T);
    }
    AG_PICK(ag__attention_softmax_rows)(Ab, T, at->causal, tile);                    /* A = softmax(S) */
    if (Adb != Ab)                                                                   /* Ad = dropout(A) */
        AG_PICK(ag__attention_dropout_rows)(Adb, Ab, T, at->causal, tile, at->p, at->seed, at_bh);
    for (int r0 = 0; r0 < T; r0 += tile) {                                           /* O = Ad V */
        int m = tile_end(r0, tile, T) - r0, keys = keys_upto(r0 + m, T, at->causal);
        gemm_block(false, false, m, D, keys, 1, Adb + (size_t)r0 * T, T, V, C, 0, O + (size_t)r0 * C, C);
    }
}

/* y [B,T,C], the weights A and, with dropout, Ad [B,H,T,T] from q, k, v [B,T,C] */
static void attention_forward(ag_real *y, ag_real *A, ag_real *Ad, const ag_real *q, const ag_real *k,
                              const ag_real *v, int B, int T, int C, const attn_spec *at)
{
    int H = at->H, D = C / H;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * H * T * T >= AG_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t off = (size_t)b * T * C + (size_t)h * D;            /* the [T,D] block, row stride C */
            size_t at_bh = ((size_t)b * H + h) * T * T;                 /* (b, h)'s [T,T] weights */
            ag_real *Ab = A + at_bh, *Adb = Ad ? Ad + at_bh : Ab;      // [T,T]
            head_forward(y + off, Ab, Adb, q + off, k + off, v + off, T, C, at, at_bh);
        }
}

// --- backward step ---

/* Where the backward writes: dq, dk, dv (NULL: not wanted) and whether each adds (acc_*) or is
 * the first to reach a fresh gradient (gemm's beta 0, no memset). */
typedef struct {
    ag_real *dq, *dk, *dv;
    bool acc_q, acc_k, acc_v;
} attn_grads;

/* The backward of one (b, h): its [T,D] blocks at off, its weights Ab and Adb (Ab without
 * dropout), dS a [T,T] scratch matrix. The tiles are those of head_forward. */
static void head_backward(const attn_grads *g, const ag_node *n, size_t off, const ag_real *Ab, const ag_real *Adb,
                          ag_real *dS)
{
    const ag_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int T = q->shape[1], C = q->shape[2], D = C / n->iparam[0];
    bool causal = n->iparam[1];
    int tile = tile_rows(T, causal);
    ag_real scale = (ag_real)n->fparam[0], p = (ag_real)n->fparam[1];
    const ag_real *dO = n->out->grad + off;                                         // [T,D]
    for (int c0 = 0; g->dv && c0 < T; c0 += tile) {                                 /* dV += Ad^T dO */
        int m = tile_end(c0, tile, T) - c0, i0 = rows_from(c0, causal);
        gemm_block(true, false, m, D, T - i0, 1, Adb + (size_t)i0 * T + c0, T, dO + (size_t)i0 * C, C, g->acc_v,
                   g->dv + off + (size_t)c0 * C, C);
    }
    if (!g->dq && !g->dk) return;
    for (int r0 = 0; r0 < T; r0 += tile) {                                          /* dAd = dO V^T */
        int m = tile_end(r0, tile, T) - r0, keys = keys_upto(r0 + m, T, causal);
        gemm_block(false, true, m, keys, D, 1, dO + (size_t)r0 * C, C, v->data + off, C, 0, dS + (size_t)r0 * T, T);
    }
    if (Adb != Ab) AG_PICK(ag__attention_dropout_backward_rows)(dS, Adb, T, tile, p); /* dA = dAd / (1-p) if kept */
    AG_PICK(ag__attention_softmax_backward_rows)(dS, Ab, T, tile);           /* dS = A * (dA - rowsum(dA * A)) */
    for (int r0 = 0; g->dq && r0 < T; r0 += tile) {                                 /* dQ += s dS K */
        int m = tile_end(r0, tile, T) - r0, keys = keys_upto(r0 + m, T, causal);
        gemm_block(false, false, m, D, keys, scale, dS + (size_t)r0 * T, T, k->data + off, C, g->acc_q,
                   g->dq + off + (size_t)r0 * C, C);
    }
    for (int c0 = 0; g->dk && c0 < T; c0 += tile) {                                 /* dK += s dS^T Q */
        int m = tile_end(c0, tile, T) - c0, i0 = rows_from(c0, causal);
        gemm_block(true, false, m, D, T - i0, scale, dS + (size_t)i0 * T + c0, T, q->data + off + (size_t)i0 * C, C,
                   g->acc_k, g->dk + off + (size_t)c0 * C, C);
    }
}

static ag_status attention_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y_bh = dropout(softmax(scale Q K^T [causal])) V, per batch entry and head */
    ag_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    int B = q->shape[0], T = q->shape[1], H = n->iparam[0];
    size_t BHTT = (size_t)B * H * T * T;
    const ag_real *A = n->saved, *Ad = n->fparam[1] > 0 ? A + BHTT : A;   // [B,H,T,T] each
    /* Every (b, h) writes its whole [T,D] block of dv, then dq, then dk, so the first of these
     * gemms to reach a fresh gradient writes it (beta 0) and no memset is needed. Asked for in
     * the same order, q = k = v (self-attention on one tensor) comes out right too: the block
     * is written by dv's gemm and added to by the other two. */
    attn_grads g = {0};
    g.dv = v->requires_grad ? ag__grad_into(ctx, v, &g.acc_v) : NULL;
    g.dq = q->requires_grad ? ag__grad_into(ctx, q, &g.acc_q) : NULL;
    g.dk = k->requires_grad ? ag__grad_into(ctx, k, &g.acc_k) : NULL;
    int nt = omp_get_max_threads();
    ag_real *scratch = ag_ctx_alloc(ctx, (size_t)nt * T * T * sizeof(ag_real)); // [threads,T,T] dA, then dS
    if (ag_ctx_status(ctx) != AG_OK) return ag_ctx_status(ctx);
#pragma omp parallel for collapse(2) schedule(static) if (BHTT >= AG_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t off = (size_t)b * T * q->shape[2] + (size_t)h * (q->shape[2] / H);  /* the [T,D] block */
            size_t at_bh = ((size_t)b * H + h) * T * T;                                 /* its [T,T] weights */
            head_backward(&g, n, off, A + at_bh, Ad + at_bh, scratch + (size_t)omp_get_thread_num() * T * T);
        }
    return AG_OK;
}

// --- op ---

static const ag_op attention_op = { .name = "attention", .backward = attention_backward };

ag_tensor *ag_fast_attention(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_real scale,
                             bool causal, ag_real dropout, uint64_t seed)
{
    if (ag__skip(ctx, q, k) || !v) return NULL;
    int B = q->shape[0], T = q->shape[1], C = q->shape[2];
    size_t BHTT = (size_t)B * H * T * T;
    ag_tensor *y = ag__tensor_uninit(ctx, 3, q->shape);                                    // [B,T,C]
    ag_real *A = y ? ag_ctx_alloc(ctx, (dropout > 0 ? 2 : 1) * BHTT * sizeof(ag_real)) : NULL; // [B,H,T,T] A, Ad
    if (!A) return NULL;
    const attn_spec at = {H, scale, causal, dropout, seed};
    attention_forward(y->data, A, dropout > 0 ? A + BHTT : NULL, q->data, k->data, v->data, B, T, C, &at);
    ag_tensor *in[3] = { q, k, v };
    ag_node *n = ag_record(ctx, &attention_op, y, in, 3);
    if (n) {
        n->saved = A;
        n->fparam[0] = scale;
        n->fparam[1] = dropout;
        n->iparam[0] = H;
        n->iparam[1] = causal;
    }
    return ag__done(ctx, y);
}
