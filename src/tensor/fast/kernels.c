/* kernels.c -- the fast table (kernel.h): the reference table with the fast twins put in.
 * An op whose fast twin is its forward only (cross-entropy, dropout, SiLU) keeps the
 * reference backward step; the others get the fast one, under the same name, so a trace or a
 * profile reads the same on either table. Not compiled by `make REFERENCE=1`. */
#include "../debug.h"  /* AG_OP_MAY_OUTPUT_NEG_INF */
#include "fast.h"

// --- backward steps around the fast backward kernels that take the reference's arguments ---

static ag_status matmul_backward_step(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *A = n->in[0], *B = n->in[1], *C = n->out;
    int M = A->shape[A->ndim - 2], K = A->shape[A->ndim - 1], N = B->shape[B->ndim - 1];
    size_t batch = ag_numel(A) / ((size_t)M * K);
    ag_real *dA = A->requires_grad ? ag_grad(ctx, A) : NULL;         // A's shape
    ag_real *dB = B->requires_grad ? ag_grad(ctx, B) : NULL;         // B's shape
    if (ag_ctx_status(ctx) != AG_OK) return ag_ctx_status(ctx);
    ag_fast_matmul_backward(dA, dB, C->grad, A->data, B->data, batch, M, K, N, B->ndim == 2 && A->ndim > 2);
    return AG_OK;
}

static ag_status masked_fill_backward_step(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *x = n->in[0], *mask = n->in[1];
    int shape[AG_MAX_DIMS];
    size_t ms[AG_MAX_DIMS];
    ag__broadcast_mask(x, mask, shape, ms); /* the op checked that it broadcasts */
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    ag_fast_masked_select(dx, n->out->grad, mask->data, 0, true, shape, ms);
    return AG_OK;
}

static ag_status rmsnorm_backward_step(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *x = n->in[0], *w = n->in[1], *y = n->out;
    ag_real *dx = NULL, *dw = NULL;
    if (x->requires_grad && !(dx = ag_grad(ctx, x))) return ag_ctx_status(ctx);  // [..., C]
    if (w->requires_grad && !(dw = ag_grad(ctx, w))) return ag_ctx_status(ctx);  // [C]
    ag_fast_rmsnorm_backward(dx, dw, y->grad, x->data, w->data, n->saved, ag_rows(x), ag_last(x));
    return AG_OK;
}

static ag_status softmax_backward_step(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *x = n->in[0], *y = n->out;
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    ag_fast_softmax_backward(dx, y->data, y->grad, ag_rows(y), ag_last(y));
    return AG_OK;
}

// --- the table ---

static const ag_op add_op = { .name = "add", .backward = ag_fast_add_backward };
static const ag_op gelu_op = { .name = "gelu", .backward = ag_fast_gelu_backward };
static const ag_op layernorm_op = { .name = "layernorm", .backward = ag_fast_layernorm_backward };
static const ag_op linear_op = { .name = "linear", .backward = ag_fast_linear_backward };
static const ag_op masked_fill_op = { .name = "masked_fill", .backward = masked_fill_backward_step,
                                      .flags = AG_OP_MAY_OUTPUT_NEG_INF };
static const ag_op matmul_op = { .name = "matmul", .backward = matmul_backward_step };
static const ag_op rmsnorm_op = { .name = "rmsnorm", .backward = rmsnorm_backward_step };
static const ag_op softmax_op = { .name = "softmax", .backward = softmax_backward_step };

void ag__kernels_fast(ag_kernels *K)
{
    K->name = "fast";
    K->add = (ag_add_kernels){ ag_fast_add_forward, &add_op };
    K->cross_entropy.forward = ag_fast_cross_entropy_forward;
    K->dropout.forward = ag_fast_dropout_forward;
    K->gelu = (ag_gelu_kernels){ ag_fast_gelu_forward, &gelu_op };
    K->layernorm = (ag_layernorm_kernels){ ag_fast_layernorm_forward, &layernorm_op };
    K->linear = (ag_linear_kernels){ ag_fast_linear_forward, &linear_op };
    K->masked_fill = (ag_masked_fill_kernels){ ag_fast_masked_select, &masked_fill_op };
    K->matmul = (ag_matmul_kernels){ ag_fast_matmul_forward, &matmul_op };
    K->rmsnorm = (ag_rmsnorm_kernels){ ag_fast_rmsnorm_forward, &rmsnorm_op };
    K->silu.forward = ag_fast_silu_forward;
    K->softmax = (ag_softmax_kernels){ ag_fast_softmax_forward, &softmax_op };
    K->attention = ag_fast_attention;
}
