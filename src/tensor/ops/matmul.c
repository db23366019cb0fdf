/* matmul.c -- matrix product, 2-D or batched over leading dims, on OpenBLAS gemm.
 *
 * forward:  C[..., M, N] = A[..., M, K] @ B[..., K, N]
 * backward: dA = dC @ B^T   ([M,N] x [N,K] -> [M,K])
 *           dB = A^T @ dC   ([K,M] x [M,N] -> [K,N]); when B is one 2-D matrix shared by every
 *           batch entry, its gradient is the sum over the batch of A_b^T @ dC_b, which is
 *           one product with the batch entries' rows stacked: A [batch*M, K], dC [batch*M, N].
 * Fast kernels: fast/matmul.c (a shared B's batch flattened into the rows of one gemm, outputs
 * written by gemm's beta 0); tests/test_fast_ref_products.c proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: one matrix product per batch entry ---

/* B_b, entry b's [K,N] matrix: B's own, or B itself when one 2-D B is shared by the batch */
static const ag_real *batch_entry_B(const ag_real *B, size_t b, int K, int N, bool shared_b)
{
    return shared_b ? B : B + b * K * N;
}

static void matmul_forward(ag_real *C, const ag_real *A, const ag_real *B, size_t batch, int M, int K, int N,
                           bool shared_b)
{
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
    for (size_t b = 0; b < batch; b++) {
        ag_real *Cb = C + b * M * N;                                          // [M,N]
        const ag_real *Ab = A + b * M * K, *Bb = batch_entry_B(B, b, K, N, shared_b); // [M,K], [K,N]
        memset(Cb, 0, (size_t)M * N * sizeof *Cb);
        ag__matmul_add(Cb, Ab, Bb, M, N, K, false, false);                    /* C_b += A_b B_b */
    }
}

static void matmul_backward(ag_real *dA, ag_real *dB, const ag_real *dC, const ag_real *A, const ag_real *B,
                            size_t batch, int M, int K, int N, bool shared_b)
{
    if (dA)
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
        for (size_t b = 0; b < batch; b++) /* dA_b[M,K] += dC_b[M,N] B_b^T[N,K] */
            ag__matmul_add(dA + b * M * K, dC + b * M * N, batch_entry_B(B, b, K, N, shared_b), M, K, N, false, true);
    if (dB && shared_b) /* dB[K,N] += sum over b of A_b^T dC_b = A^T[K,batch*M] dC[batch*M,N] (the batch as rows) */
        ag__matmul_add(dB, A, dC, K, N, (int)(batch * M), true, false);
    else if (dB)
#pragma omp parallel for schedule(static) if (batch * M * N >= AG_PAR_MIN)
        for (size_t b = 0; b < batch; b++) /* dB_b[K,N] += A_b^T[K,M] dC_b[M,N] */
            ag__matmul_add(dB + b * K * N, A + b * M * K, dC + b * M * N, K, N, M, true, false);
}

// --- backward step ---

static ag_status matmul_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: C = A @ B, per batch entry  =>  dA = dC B^T,  dB = A^T dC */
    ag_tensor *A = n->in[0], *B = n->in[1], *C = n->out;
    int M = A->shape[A->ndim - 2], K = A->shape[A->ndim - 1], N = B->shape[B->ndim - 1];
    size_t batch = ag_numel(A) / ((size_t)M * K);
    bool shared_b = B->ndim == 2 && A->ndim > 2;
    ag_real *dA = A->requires_grad ? ag_grad(ctx, A) : NULL;         // A's shape
    ag_real *dB = B->requires_grad ? ag_grad(ctx, B) : NULL;         // B's shape
    if (ag_ctx_status(ctx) != AG_OK) return ag_ctx_status(ctx);
    matmul_backward(dA, dB, C->grad, A->data, B->data, batch, M, K, N, shared_b);
    return AG_OK;
}

// --- op ---

static const ag_op matmul_op = { .name = "matmul", .backward = matmul_backward_step };
const ag_matmul_kernels ag__matmul_reference = { matmul_forward, &matmul_op };  /* kernel.h's table */

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
    const ag_matmul_kernels *kern = &ag__kernels(ctx)->matmul;  /* reference or fast (kernel.h) */
    kern->forward(C->data, A->data, B->data, batch, M, K, N, shared_b);
    ag_tensor *in[2] = { A, B };
    ag_record(ctx, kern->op, C, in, 2);
    return ag__done(ctx, C);
}
