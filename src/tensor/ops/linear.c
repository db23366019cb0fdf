/* linear.c -- y = x W^T + b, the PyTorch Linear, with W stored [out, in].
 *
 * forward:  y[r, o] = sum_i x[r, i] W[o, i] + b[o]       for every row r of x [..., in]
 * backward: dx = dy @ W        ([R,out] x [out,in] -> [R,in])
 *           dW = dy^T @ x      ([out,R] x [R,in]  -> [out,in]), summed over all rows
 *           db = sum over rows of dy
 * Every product is one OpenBLAS gemm over all rows at once; the transposes are gemm flags. */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"
#include "../parallel.h"

// --- kernels ---

/* y[r, :] = b for every row: the gemm then adds x W^T on top (beta 1). With beta 0 OpenBLAS
 * would first zero y in a pass of its own, and adding the bias afterwards would be a third. */
static void fill_bias_rows(ag_real *y, const ag_real *b, size_t R, int Fout)
{
#pragma omp parallel for schedule(static) if (R * Fout >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) memcpy(y + r * Fout, b, (size_t)Fout * sizeof *b);
}


/* db += sum over rows of dy, the share of one thread of a team (see ag_gemm_pair) */
typedef struct {
    ag_real *db;
    const ag_real *dy;
    size_t R;
    int Fout;
} bias_grad;

static void bias_grad_part(void *user, int part, int n_parts)
{
    const bias_grad *bg = user;
    ag__sum_rows_part(bg->db, bg->dy, bg->R, bg->Fout, part, n_parts);
}

// --- backward ---

static ag_status linear_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = x W^T + b */
    ag_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2], *y = n->out;
    int Fin = W->shape[1], Fout = W->shape[0]; /* in and out features */
    int R = (int)ag_rows(x);
    const ag_real *dy = y->grad;                                  // [R, Fout]
    ag_gemm_args dx_job = { 0 }, dW_job = { 0 };
    if (x->requires_grad) { /* dx += dy @ W */
        bool acc;
        ag_real *dx = ag__grad_into(ctx, x, &acc);                // [R, Fin]
        if (!dx) return ag_ctx_status(ctx);
        dx_job = (ag_gemm_args){ false, false, R, Fin, Fout, 1, dy, Fout, W->data, Fin, acc ? 1 : 0, dx, Fin };
    }
    if (W->requires_grad) { /* dW += dy^T @ x */
        ag_real *dW = ag_grad(ctx, W);                            // [Fout, Fin]
        if (!dW) return ag_ctx_status(ctx);
        dW_job = (ag_gemm_args){ true, false, Fout, Fin, R, 1, dy, Fout, x->data, Fin, 1, dW, Fin };
    }
    ag_real *db = NULL;                                           // [Fout]
    if (b && b->requires_grad && !(db = ag_grad(ctx, b))) return ag_ctx_status(ctx);
    if (dx_job.C && dW_job.C) {
        /* the two products have the same size (R Fin Fout multiply-adds): side by side, with
         * db += sum_r dy[r] on dx's side */
        bias_grad bg = { db, dy, (size_t)R, Fout };
        ag_gemm_pair(&dx_job, db ? bias_grad_part : NULL, &bg, &dW_job);
        return AG_OK;
    }
    if (dx_job.C) ag_gemm_run(&dx_job);
    if (dW_job.C) ag_gemm_run(&dW_job);
    if (db) ag__sum_rows(db, dy, (size_t)R, Fout); /* db += sum_r dy[r] */
    return AG_OK;
}

// --- op ---

static const ag_op linear_op = { "linear", linear_backward };

ag_tensor *ag_linear(ag_ctx *ctx, ag_tensor *x, ag_tensor *W, ag_tensor *b)
{
    if (ag__skip(ctx, x, W)) return NULL;
    char sx[AG_SHAPE_BUF], sw[AG_SHAPE_BUF], sb[AG_SHAPE_BUF];
    if (W->ndim != 2 || ag_last(x) != W->shape[1] || (b && (b->ndim != 1 || b->shape[0] != W->shape[0]))) {
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_linear: x %s, W %s, b %s (need x [...,in], W [out,in], b [out])",
                    ag_shape_str(x, sx, sizeof sx), ag_shape_str(W, sw, sizeof sw),
                    b ? ag_shape_str(b, sb, sizeof sb) : "none");
        return NULL;
    }
    int Fin = W->shape[1], Fout = W->shape[0];
    int R = (int)ag_rows(x);
    int shape[AG_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = Fout;
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, shape);          // [..., out]
    if (!y) return NULL;
    if (b) fill_bias_rows(y->data, b->data, (size_t)R, Fout);                      // [R, out] = b
    ag_gemm(false, true, R, Fout, Fin, 1, x->data, Fin, W->data, Fin, b ? 1 : 0, y->data, Fout);
    ag_tensor *in[3] = { x, W, b };
    ag_record(ctx, &linear_op, y, in, b ? 3 : 2);
    return ag__done(ctx, y);
}
