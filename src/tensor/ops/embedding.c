/* embedding.c -- embedding lookup: rows of a table gathered by token id.
 *
 * forward:  y[b, t, :] = W[ids[b*T + t], :]
 * backward: dW[ids[b*T + t], :] += dy[b, t, :]   (scatter-add: a token that appears twice
 *           gets both contributions). The ids get no gradient.
 * One path: these plain loops are the kernels; fast/ has none for this op. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels ---

/* y [R, C] = the rows ids[0..R) of W [V, C] */
static void embedding_forward(ag_real *y, const ag_real *W, const int *ids, size_t R, int C)
{
#pragma omp parallel for schedule(static) if (R * C >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) memcpy(y + r * C, W + (size_t)ids[r] * C, (size_t)C * sizeof(ag_real));
}

/* one position after another: two positions with the same id add to the same row of dW */
static void embedding_backward(ag_real *dW, const ag_real *dy, const int *ids, size_t R, int C)
{
    for (size_t r = 0; r < R; r++)
        for (int c = 0; c < C; c++) dW[(size_t)ids[r] * C + c] += dy[r * C + c];
}

// --- backward step ---

static ag_status embedding_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y[r] = W[ids[r]]  =>  dW[ids[r]] += dy[r] */
    ag_tensor *W = n->in[0];
    ag_real *dW = ag_grad(ctx, W);                                  // [V,C]
    if (!dW) return ag_ctx_status(ctx);
    embedding_backward(dW, n->out->grad, n->saved, ag_rows(n->out), W->shape[1]);
    return AG_OK;
}

// --- op ---

static const ag_op embedding_op = { .name = "embedding", .backward = embedding_backward_step };

ag_tensor *ag_embedding(ag_ctx *ctx, ag_tensor *W, const int *ids, int B, int T)
{
    if (ag__skip(ctx, W, W)) return NULL;
    if (W->ndim != 2 || !ids || B <= 0 || T <= 0) {
        char sw[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_embedding: table %s with B=%d T=%d (need a [V,C] table, B,T > 0, ids)",
                    ag_shape_str(W, sw, sizeof sw), B, T);
        return NULL;
    }
    int V = W->shape[0], C = W->shape[1];
    size_t R = (size_t)B * T;
    for (size_t r = 0; r < R; r++)
        if (ids[r] < 0 || ids[r] >= V) {
            ag_ctx_fail(ctx, AG_ERR_ARG, "ag_embedding: id %d at position %zu is outside [0, %d)", ids[r], r, V);
            return NULL;
        }
    ag_tensor *y = ag__tensor_uninit(ctx, 3, (int[3]){ B, T, C });                    // [B,T,C]
    if (!y) return NULL;
    embedding_forward(y->data, W->data, ids, R, C);
    ag_node *n = ag_record(ctx, &embedding_op, y, &W, 1);
    if (n) { /* the caller's ids may change before backward: keep a copy */
        int *saved = ag_ctx_alloc(ctx, R * sizeof(int));
        if (!saved) return NULL;
        memcpy(saved, ids, R * sizeof(int));
        n->saved = saved;
    }
    return ag__done(ctx, y);
}
