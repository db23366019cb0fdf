/* heads.c -- split a [B,T,C] tensor into H heads [B,H,T,D] (D = C/H), and merge them back.
 *
 * split:  y[b,h,t,d] = x[b,t,h*D + d]        merge: the inverse permutation
 * Both are pure permutations, so each backward is the other op's forward, accumulated.
 * One path: this plain loop is the kernel; fast/ has none for this op. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: one loop for both directions ---

/* bthd [B,T,C] <-> bhtd [B,H,T,D]; to_heads copies bthd into bhtd, else bhtd into bthd;
 * accumulate adds instead of copying (the backward) */
static void permute_heads(ag_real *bthd, ag_real *bhtd, int B, int T, int H, int D, bool to_heads, bool accumulate)
{
    int C = H * D;
#pragma omp parallel for collapse(2) schedule(static) if ((size_t)B * T * C >= AG_PAR_MIN)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                ag_real *row_c = bthd + ((size_t)b * T + t) * C + (size_t)h * D;    // [D] in [B,T,C]
                ag_real *row_h = bhtd + (((size_t)b * H + h) * T + t) * D;          // [D] in [B,H,T,D]
                ag_real *dst = to_heads ? row_h : row_c;
                const ag_real *src = to_heads ? row_c : row_h;
                for (int d = 0; d < D; d++) dst[d] = accumulate ? dst[d] + src[d] : src[d];
            }
}

// --- backward steps ---

static ag_status split_heads_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y[b,h,t,d] = x[b,t,h*D+d]  =>  dx[b,t,h*D+d] += dy[b,h,t,d] */
    ag_tensor *x = n->in[0], *y = n->out;
    ag_real *dx = ag_grad(ctx, x);
    if (!dx) return ag_ctx_status(ctx);
    permute_heads(dx, y->grad, y->shape[0], y->shape[2], y->shape[1], y->shape[3], false, true);
    return AG_OK;
}

static ag_status merge_heads_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y[b,t,h*D+d] = x[b,h,t,d]  =>  dx[b,h,t,d] += dy[b,t,h*D+d] */
    ag_tensor *x = n->in[0], *y = n->out;
    ag_real *dx = ag_grad(ctx, x);
    if (!dx) return ag_ctx_status(ctx);
    permute_heads(y->grad, dx, x->shape[0], x->shape[2], x->shape[1], x->shape[3], true, true);
    return AG_OK;
}

// --- ops ---

static const ag_op split_heads_op = { .name = "split_heads", .backward = split_heads_backward };
static const ag_op merge_heads_op = { .name = "merge_heads", .backward = merge_heads_backward };

ag_tensor *ag_split_heads(ag_ctx *ctx, ag_tensor *x, int H)
{
    if (ag__skip(ctx, x, x)) return NULL;
    if (x->ndim != 3 || H <= 0 || x->shape[2] % H != 0) {
        char sx[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_split_heads: cannot split %s into %d heads (need [B,T,C], C %% H == 0)",
                    ag_shape_str(x, sx, sizeof sx), H);
        return NULL;
    }
    int B = x->shape[0], T = x->shape[1], D = x->shape[2] / H;
    ag_tensor *y = ag__tensor_uninit(ctx, 4, (int[4]){ B, H, T, D });                 // [B,H,T,D]
    if (!y) return NULL;
    permute_heads(x->data, y->data, B, T, H, D, true, false);
    ag_record(ctx, &split_heads_op, y, &x, 1);
    return ag__done(ctx, y);
}

ag_tensor *ag_merge_heads(ag_ctx *ctx, ag_tensor *x)
{
    if (ag__skip(ctx, x, x)) return NULL;
    if (x->ndim != 4) {
        char sx[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_merge_heads: need [B,H,T,D], got %s", ag_shape_str(x, sx, sizeof sx));
        return NULL;
    }
    int B = x->shape[0], H = x->shape[1], T = x->shape[2], D = x->shape[3];
    ag_tensor *y = ag__tensor_uninit(ctx, 3, (int[3]){ B, T, H * D });                // [B,T,C]
    if (!y) return NULL;
    permute_heads(y->data, x->data, B, T, H, D, false, false);
    ag_record(ctx, &merge_heads_op, y, &x, 1);
    return ag__done(ctx, y);
}
