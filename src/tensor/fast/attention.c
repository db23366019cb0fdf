/* fast/attention.c -- attention's fast twin: the lines of attend() in src/nn/attention.c
 * (split_heads, q k^T, scale, no mask or the causal one, softmax, weights . v, merge_heads) as
 * one op with a hand-written backward, on gemm. attend() is the reference a reader follows;
 * nn/attention.c calls this op (ag_fast_attention) only where it computes exactly the same
 * (fusable() there says when), and tests/test_fused.c and tests/test_fast_ref_products.c prove
 * the two equal: the output and every gradient.
 *
 * forward, for each batch entry b and head h, with Q, K, V the [T,D] blocks of q, k, v:
 *   S = scale Q K^T                                    [T,T]
 *   A = softmax(S) over each row, where a causal row i only sees keys 0..i (the rest weigh 0)
 *   O = A V                                            [T,D], written into y's [B,T,C] block
 * Head h of token t is the D numbers at t*C + h*D, so a head's Q, K, V and O are [T,D] blocks
 * read in place with a row stride of C: no split or merge copy. Masked scores are never
 * computed, and only A is kept for the backward.
 * backward, the chain rule back through the same three lines:
 *   O = A V                  =>  dV += A^T dO,   dA = dO V^T
 *   A = softmax(S) per row   =>  dS = A * (dA - rowsum(dA * A))   (ops/softmax.c's backward;
 *                                a masked A[i,j] is 0, so is its dS[i,j]: the mask adds nothing)
 *   S = scale Q K^T          =>  dQ += scale dS K,   dK += scale dS^T Q
 *
 * How it is fast: every product of a (b, h) is one single-threaded gemm on the head's blocks,
 * and (b, h) pairs run in parallel, since they write disjoint blocks of y, dq, dk and dv. The
 * softmax rows use lane reductions (ag__max, ag__sum, ag__dot) and the SIMD expf, in three
 * targets (AG_TARGETS: plain, AVX2, AVX-512). The backward
 * writes dv, dq and dk with the gemm's beta 0 when it is the first to reach them
 * (ag__grad_into, no memset), and keeps dA and dS in one [T,T] scratch matrix per thread. */
#include <omp.h>
#include "fast.h"
#include "../blas.h"

// --- kernels ---

/* A[T,T] = row-wise softmax of S (in place), each row i over keys 0..(causal ? i : T-1). A
 * causal row is worked on in whole blocks of AG_LANES keys: the keys past i up to the block's
 * end first copy key 0 (the max stays the max of keys 0..i), then weigh 0 (sum and weights are
 * those of keys 0..i alone), so no loop has a short scalar tail (a row has 1..T keys; the tails
 * took half the time). */
static inline __attribute__((always_inline)) void softmax_rows(ag_real *S, int T, bool causal)
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
        for (int j = n; j < T; j++) row[j] = 0; /* the future: exactly zero weight */
        ag_real inv = 1 / ag__sum(row, nb);
#pragma omp simd
        for (int j = 0; j < n; j++) row[j] *= inv;
    }
}

/* dS[T,T] = A * (dA - rowsum(dA * A)) in place of dA: softmax's backward, row by row */
static inline __attribute__((always_inline)) void softmax_backward_rows(ag_real *dS, const ag_real *A, int T)
{
    for (int i = 0; i < T; i++) {
        ag_real *dr = dS + (size_t)i * T;
        const ag_real *ar = A + (size_t)i * T;
        ag_real dot = ag__dot(dr, ar, T);
        for (int j = 0; j < T; j++) dr[j] = ar[j] * (dr[j] - dot);
    }
}

AG_TARGETS(ag__attention_softmax_rows, softmax_rows, (ag_real *S, int T, bool causal), (S, T, causal))
AG_TARGETS(ag__attention_softmax_backward_rows, softmax_backward_rows, (ag_real *dS, const ag_real *A, int T),
           (dS, A, T))

/* single-threaded gemm on blocks with explicit leading dims (we are inside a parallel loop) */
static void gemm_block(bool tA, bool tB, int M, int N, int K, ag_real alpha, const ag_real *A, int lda,
                       const ag_real *B, int ldb, ag_real beta, ag_real *C, int ldc)
{
    AG_GEMM(CblasRowMajor, tA ? CblasTrans : CblasNoTrans, tB ? CblasTrans : CblasNoTrans, M, N, K, alpha, A,
            lda, B, ldb, beta, C, ldc);
}

/* y [B,T,C] and the weights A [B,H,T,T] from q, k, v [B,T,C] */
static void attention_forward(ag_real *y, ag_real *A, const ag_real *q, const ag_real *k, const ag_real *v,
                              int B, int T, int C, int H, ag_real scale, bool causal)
{
    int D = C / H;
    void (*softmax)(ag_real *, int, bool) = AG_PICK(ag__attention_softmax_rows);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * H * T * T >= AG_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t off = (size_t)b * T * C + (size_t)h * D;            /* the [T,D] block, row stride C */
            ag_real *Ab = A + ((size_t)b * H + h) * T * T;              // [T,T]
            gemm_block(false, true, T, T, D, scale, q + off, C, k + off, C, 0, Ab, T); /* S = s Q K^T */
            softmax(Ab, T, causal);                                                   /* A = softmax(S) */
            gemm_block(false, false, T, D, T, 1, Ab, T, v + off, C, 0, y + off, C);  /* O = A V */
        }
}

// --- backward step ---

static ag_status attention_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y_bh = softmax(scale Q K^T [causal]) V, per batch entry and head */
    ag_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *y = n->out;
    int B = q->shape[0], T = q->shape[1], C = q->shape[2], H = n->iparam[0], D = C / H;
    ag_real scale = (ag_real)n->fparam[0];
    const ag_real *A = n->saved;                                   // [B,H,T,T]
    /* Every (b, h) writes its whole [T,D] block of dv, then dq, then dk, so the first of these
     * gemms to reach a fresh gradient writes it (beta 0) and no memset is needed. Asked for in
     * the same order, q = k = v (self-attention on one tensor) comes out right too: the block
     * is written by dv's gemm and added to by the other two. */
    bool acc_v = false, acc_q = false, acc_k = false;
    ag_real *dv = v->requires_grad ? ag__grad_into(ctx, v, &acc_v) : NULL;
    ag_real *dq = q->requires_grad ? ag__grad_into(ctx, q, &acc_q) : NULL;
    ag_real *dk = k->requires_grad ? ag__grad_into(ctx, k, &acc_k) : NULL;
    int nt = omp_get_max_threads();
    ag_real *scratch = ag_ctx_alloc(ctx, (size_t)nt * T * T * sizeof(ag_real)); // [threads,T,T] dA, then dS
    if (ag_ctx_status(ctx) != AG_OK) return ag_ctx_status(ctx);
    void (*dsoftmax)(ag_real *, const ag_real *, int) = AG_PICK(ag__attention_softmax_backward_rows);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * H * T * T >= AG_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t off = (size_t)b * T * C + (size_t)h * D;            /* the [T,D] block, row stride C */
            const ag_real *Ab = A + ((size_t)b * H + h) * T * T;       // [T,T]
            const ag_real *dO = y->grad + off;                         // [T,D]
            ag_real *dS = scratch + (size_t)omp_get_thread_num() * T * T;  // [T,T]
            if (dv) gemm_block(true, false, T, D, T, 1, Ab, T, dO, C, acc_v ? 1 : 0, dv + off, C);      /* dV += A^T dO */
            if (!dq && !dk) continue;
            gemm_block(false, true, T, T, D, 1, dO, C, v->data + off, C, 0, dS, T);        /* dA = dO V^T */
            dsoftmax(dS, Ab, T);                                                      /* dS = A * (dA - rowsum(dA * A)) */
            if (dq) gemm_block(false, false, T, D, T, scale, dS, T, k->data + off, C, acc_q ? 1 : 0, dq + off, C); /* dQ += s dS K */
            if (dk) gemm_block(true, false, T, D, T, scale, dS, T, q->data + off, C, acc_k ? 1 : 0, dk + off, C);  /* dK += s dS^T Q */
        }
    return AG_OK;
}

// --- op ---

static const ag_op attention_op = { .name = "attention", .backward = attention_backward };

ag_tensor *ag_fast_attention(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_real scale,
                             bool causal)
{
    if (ag__skip(ctx, q, k) || !v) return NULL;
    int B = q->shape[0], T = q->shape[1], C = q->shape[2];
    ag_tensor *y = ag__tensor_uninit(ctx, 3, q->shape);                          // [B,T,C]
    ag_real *A = y ? ag_ctx_alloc(ctx, (size_t)B * H * T * T * sizeof(ag_real)) : NULL; // [B,H,T,T]
    if (!A) return NULL;
    attention_forward(y->data, A, q->data, k->data, v->data, B, T, C, H, scale, causal);
    ag_tensor *in[3] = { q, k, v };
    ag_node *n = ag_record(ctx, &attention_op, y, in, 3);
    if (n) {
        n->saved = A;
        n->fparam[0] = scale;
        n->iparam[0] = H;
    }
    return ag__done(ctx, y);
}
