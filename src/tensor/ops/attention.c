/* attention.c -- scaled dot-product attention over heads in one fused op.
 *
 * The composed path (src/nn/attention.c with composed=true) spells the same thing out op by op:
 * split_heads, transpose, matmul, scale, masked_fill, softmax, matmul, merge_heads. This op
 * gives the same forward and the same gradients (tests/test_fused.c checks both), but reads
 * q, k and v in their [B,T,C] layout (head h of token t is the D numbers at t*C + h*D, so there
 * is no split or merge copy), skips the masked scores, and keeps only the attention weights
 * for the backward.
 *
 * forward, for each batch entry b and head h, with Q, K, V the [T,D] blocks of q, k, v:
 *   S = scale Q K^T                                    [T,T]
 *   A = softmax(S) over each row, where a causal row i only sees keys 0..i (the rest weigh 0)
 *   O = A V                                            [T,D], written into y's [B,T,C] block
 * backward:
 *   dV += A^T dO;   dA = dO V^T
 *   dS = A * (dA - rowsum(dA * A))                     (softmax backward; masked entries: 0)
 *   dQ += scale dS K;   dK += scale dS^T Q
 * Different (b, h) write disjoint blocks of dq, dk, dv, so they run in parallel.
 * Fast kernels: fast/attention.c (every product a gemm on the strided head blocks, lane
 * reductions, gradients written instead of zeroed and added to, per-thread scratch);
 * tests/test_fast_ref_products.c proves them equal. */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

// --- reference kernels: plain loops over each (b, h), as llm.c's attention ---

/* the D numbers of head h for token t of batch entry b, in a [B,T,C] tensor (with the T, C and
 * D of the function it is used in) */
#define HEAD_ROW(x, b, t, h) ((x) + ((size_t)(b) * T + (t)) * C + (size_t)(h) * D)

static void attention_forward(ag_real *y, ag_real *A, const ag_real *q, const ag_real *k, const ag_real *v,
                              int B, int T, int C, int H, ag_real scale, bool causal)
{
    int D = C / H;
#pragma omp parallel for collapse(3) schedule(static) if ((size_t)B * H * T * T >= AG_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const ag_real *qi = HEAD_ROW(q, b, i, h);                 // [D]
                ag_real *Ai = A + (((size_t)b * H + h) * T + i) * T;      // [T] row i of A
                ag_real *yi = HEAD_ROW(y, b, i, h);                       // [D]
                int n_keys = causal ? i + 1 : T; /* row i sees keys 0..n_keys-1 */
                ag_real max = -INFINITY;
                for (int j = 0; j < n_keys; j++) { /* S[i,j] = scale q_i . k_j */
                    const ag_real *kj = HEAD_ROW(k, b, j, h);             // [D]
                    ag_real dot = 0;
                    for (int d = 0; d < D; d++) dot += qi[d] * kj[d];
                    Ai[j] = scale * dot;
                    if (Ai[j] > max) max = Ai[j];
                }
                ag_real sum = 0;
                for (int j = 0; j < n_keys; j++) { /* A[i,:] = softmax(S[i,:]), max subtracted */
                    Ai[j] = ag__exp(Ai[j] - max);
                    sum += Ai[j];
                }
                for (int j = 0; j < n_keys; j++) Ai[j] /= sum;
                for (int j = n_keys; j < T; j++) Ai[j] = 0; /* the future: exactly zero weight */
                for (int d = 0; d < D; d++) yi[d] = 0;
                for (int j = 0; j < n_keys; j++) { /* o_i = sum_j A[i,j] v_j */
                    const ag_real *vj = HEAD_ROW(v, b, j, h);             // [D]
                    for (int d = 0; d < D; d++) yi[d] += Ai[j] * vj[d];
                }
            }
}

/* One (b, h): the five steps of the backward, one loop nest each. dq, dk, dv may be NULL (no
 * gradient wanted); dS [T,T] is scratch. A masked A[i,j] is 0, so its dS[i,j] is 0 too and adds
 * nothing. */
static void attention_backward_head(ag_real *dq, ag_real *dk, ag_real *dv, ag_real *dS, const ag_real *dy,
                                    const ag_real *A, const ag_real *q, const ag_real *k, const ag_real *v,
                                    int b, int h, int T, int C, int D, ag_real scale)
{
    if (dv) /* dV += A^T dO:  dv_j += A[i,j] dO_i */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                const ag_real *dOi = HEAD_ROW(dy, b, i, h);          // [D]
                ag_real *dvj = HEAD_ROW(dv, b, j, h);                // [D]
                for (int d = 0; d < D; d++) dvj[d] += A[(size_t)i * T + j] * dOi[d];
            }
    if (!dq && !dk) return;
    for (int i = 0; i < T; i++) /* dA = dO V^T:  dA[i,j] = dO_i . v_j  (kept in dS) */
        for (int j = 0; j < T; j++) {
            const ag_real *dOi = HEAD_ROW(dy, b, i, h), *vj = HEAD_ROW(v, b, j, h); // [D] each
            ag_real dot = 0;
            for (int d = 0; d < D; d++) dot += dOi[d] * vj[d];
            dS[(size_t)i * T + j] = dot;
        }
    for (int i = 0; i < T; i++) { /* dS = A * (dA - rowsum(dA * A)): softmax's backward, row by row */
        ag_real *dSi = dS + (size_t)i * T;                           // [T]
        const ag_real *Ai = A + (size_t)i * T;                       // [T]
        ag_real dot = 0;
        for (int j = 0; j < T; j++) dot += dSi[j] * Ai[j];
        for (int j = 0; j < T; j++) dSi[j] = Ai[j] * (dSi[j] - dot);
    }
    if (dq) /* dQ += scale dS K:  dq_i += scale dS[i,j] k_j */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                const ag_real *kj = HEAD_ROW(k, b, j, h);            // [D]
                ag_real *dqi = HEAD_ROW(dq, b, i, h);                // [D]
                for (int d = 0; d < D; d++) dqi[d] += scale * dS[(size_t)i * T + j] * kj[d];
            }
    if (dk) /* dK += scale dS^T Q:  dk_j += scale dS[i,j] q_i */
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                const ag_real *qi = HEAD_ROW(q, b, i, h);            // [D]
                ag_real *dkj = HEAD_ROW(dk, b, j, h);                // [D]
                for (int d = 0; d < D; d++) dkj[d] += scale * dS[(size_t)i * T + j] * qi[d];
            }
}

#undef HEAD_ROW

// --- backward step ---

static ag_status attention_backward_step(ag_ctx *ctx, ag_node *n)
{
    if (AG_FAST(ctx)) return ag_fast_attention_backward(ctx, n);
    /* forward: y_bh = softmax(scale Q K^T [causal]) V, per batch entry and head */
    ag_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2], *y = n->out;
    int B = q->shape[0], T = q->shape[1], C = q->shape[2], H = n->iparam[0], D = C / H;
    ag_real scale = (ag_real)n->fparam[0];
    const ag_real *A = n->saved;                                                   // [B,H,T,T]
    ag_real *dq = q->requires_grad ? ag_grad(ctx, q) : NULL;                       // [B,T,C]
    ag_real *dk = k->requires_grad ? ag_grad(ctx, k) : NULL;                       // [B,T,C]
    ag_real *dv = v->requires_grad ? ag_grad(ctx, v) : NULL;                       // [B,T,C]
    ag_real *dS = ag_ctx_alloc(ctx, (size_t)B * H * T * T * sizeof(ag_real));     // [B,H,T,T] dA, then dS
    if (ag_ctx_status(ctx) != AG_OK) return ag_ctx_status(ctx);
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * H * T * T >= AG_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t bh = ((size_t)b * H + h) * T * T; /* (b, h)'s [T,T] block of A and dS */
            attention_backward_head(dq, dk, dv, dS + bh, y->grad, A + bh, q->data, k->data, v->data,
                                    b, h, T, C, D, scale);
        }
    return AG_OK;
}

// --- op ---

static const ag_op attention_op = { .name = "attention", .backward = attention_backward_step };

ag_tensor *ag_attention(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_real scale, bool causal)
{
    if (ag__skip(ctx, q, k) || !v) return NULL;
    if (q->ndim != 3 || !ag_same_shape(q, k) || !ag_same_shape(q, v) || H <= 0 || q->shape[2] % H != 0) {
        char sq[AG_SHAPE_BUF], sk[AG_SHAPE_BUF], sv[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_attention: q %s, k %s, v %s with %d heads (need three equal [B,T,C], C %% H == 0)",
                    ag_shape_str(q, sq, sizeof sq), ag_shape_str(k, sk, sizeof sk), ag_shape_str(v, sv, sizeof sv), H);
        return NULL;
    }
    int B = q->shape[0], T = q->shape[1], C = q->shape[2];
    ag_tensor *y = ag__tensor_uninit(ctx, 3, q->shape);                          // [B,T,C]
    ag_real *A = y ? ag_ctx_alloc(ctx, (size_t)B * H * T * T * sizeof(ag_real)) : NULL; // [B,H,T,T]
    if (!A) return NULL;
    if (AG_FAST(ctx)) ag_fast_attention_forward(y->data, A, q->data, k->data, v->data, B, T, C, H, scale, causal);
    else attention_forward(y->data, A, q->data, k->data, v->data, B, T, C, H, scale, causal);
    ag_tensor *in[3] = { q, k, v };
    ag_node *n = ag_record(ctx, &attention_op, y, in, 3);
    if (n) {
        n->saved = A;
        n->fparam[0] = scale;
        n->iparam[0] = H;
    }
    return ag__done(ctx, y);
}
