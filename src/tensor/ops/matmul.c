/* matmul.c -- matrix product, 2-D or batched over leading dims, on OpenBLAS gemm.
 *
 * forward:  C[..., M, N] = A[..., M, K] @ B[..., K, N]
 * backward: dA = dC @ B^T   ([M,N] x [N,K] -> [M,K])
 *           dB = A^T @ dC   ([K,M] x [M,N] -> [K,N]); when B is one 2-D matrix shared by every
 *           batch entry, its gradient is the sum over the batch, which is a single gemm over
 *           the batch flattened into rows.
 * gemm's beta = 1 makes the backward accumulate (+=) into the grads, as the tape requires. */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"
#include "../parallel.h"

// --- kernels ---

/* C[M,N] (+)= op(A) @ op(B), row-major; the transposes are gemm flags, no copies. Inside the
 * batch loops below each thread takes whole batch entries (ag_gemm then runs single-threaded);
 * a single big product is split by ag_gemm itself. */
static void gemm(ag_real *C, const ag_real *A, const ag_real *B, int M, int N, int K,
                 bool transA, bool transB, ag_real beta)
{
    ag_gemm(transA, transB, M, N, K, 1, A, transA ? M : K, B, transB ? K : N, beta, C, N);
}

// --- backward ---

static ag_status matmul_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: C = A @ B, per batch entry */
    ag_tensor *A = n->in[0], *B = n->in[1], *C = n->out;
    int M = A->shape[A->ndim - 2], K = A->shape[A->ndim - 1], N = B->shape[B->ndim - 1];
    size_t batch = ag_numel(A) / ((size_t)M * K);
    bool shared_b = B->ndim == 2 && A->ndim > 2;
    const ag_real *dC = C->grad;
    if (A->requires_grad) {
        ag_real *dA = ag_grad(ctx, A);
        if (!dA) return ag_ctx_status(ctx);
        if (shared_b) /* dA[batch*M, K] += dC[batch*M, N] @ B^T */
            gemm(dA, dC, B->data, (int)(batch * M), K, N, false, true, 1);
        else
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
            for (size_t b = 0; b < batch; b++) /* dA_b += dC_b @ B_b^T */
                gemm(dA + b * M * K, dC + b * M * N, B->data + b * K * N, M, K, N, false, true, 1);
    }
    if (B->requires_grad) {
        ag_real *dB = ag_grad(ctx, B);
        if (!dB) return ag_ctx_status(ctx);
        if (shared_b) /* dB[K, N] += A[batch*M, K]^T @ dC[batch*M, N]: summed over the batch */
            gemm(dB, A->data, dC, K, N, (int)(batch * M), true, false, 1);
        else
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
            for (size_t b = 0; b < batch; b++) /* dB_b += A_b^T @ dC_b */
                gemm(dB + b * K * N, A->data + b * M * K, dC + b * M * N, K, N, M, true, false, 1);
    }
    return AG_OK;
}

// --- op ---

static const ag_op matmul_op = { "matmul", matmul_backward };

ag_tensor *ag_matmul(ag_ctx *ctx, ag_tensor *A, ag_tensor *B)
{
    if (ag__skip(ctx, A, B)) return NULL;
    char sa[AG_SHAPE_BUF], sb[AG_SHAPE_BUF];
    bool ok = A->ndim >= 2 && B->ndim >= 2 && A->shape[A->ndim - 1] == B->shape[B->ndim - 2];
    bool shared_b = B->ndim == 2;
    if (ok && !shared_b) { /* a batch of products: leading dims must match */
        ok = A->ndim == B->ndim;
        for (int i = 0; ok && i < A->ndim - 2; i++) ok = A->shape[i] == B->shape[i];
    }
    if (!ok) {
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_matmul: cannot multiply %s @ %s (need [...,M,K] @ [...,K,N] or [K,N])",
                    ag_shape_str(A, sa, sizeof sa), ag_shape_str(B, sb, sizeof sb));
        return NULL;
    }
    int M = A->shape[A->ndim - 2], K = A->shape[A->ndim - 1], N = B->shape[B->ndim - 1];
    int shape[AG_MAX_DIMS];
    memcpy(shape, A->shape, sizeof shape);
    shape[A->ndim - 1] = N;
    ag_tensor *C = ag__tensor_uninit(ctx, A->ndim, shape);          // [..., M, N]
    if (!C) return NULL;
    size_t batch = ag_numel(A) / ((size_t)M * K);
    if (shared_b) /* one gemm: the batch flattened into rows */
        gemm(C->data, A->data, B->data, (int)(batch * M), N, K, false, false, 0);
    else
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
        for (size_t b = 0; b < batch; b++)
            gemm(C->data + b * M * N, A->data + b * M * K, B->data + b * K * N, M, N, K, false, false, 0);
    ag_tensor *in[2] = { A, B };
    ag_record(ctx, &matmul_op, C, in, 2);
    return ag__done(ctx, C);
}
