/* fast/linear.c -- linear's kernels with less memory traffic and one barrier (ops/linear.c has
 * the formulas and the reference kernels these must equal).
 *
 * forward: the bias is copied into y's rows first and the gemm adds x W^T on top (beta 1).
 * backward: dx is written by its gemm (beta 0) when it is the first gradient to reach x (no
 * memset); dx = dy W and dW = dy^T x run side by side as a gemm pair (ag_gemm_pair), with db on
 * dx's team; db sums dy's rows in blocks of adjacent columns (ag__sum_rows). */
#include "fast.h"

/* y[r, :] = b for every row: the gemm then adds x W^T on top (beta 1). With beta 0 OpenBLAS
 * would first zero y in a pass of its own, and adding the bias afterwards would be a third. */
static void fill_bias_rows(ag_real *y, const ag_real *b, size_t R, int Fout)
{
#pragma omp parallel for schedule(static) if (R * Fout >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) memcpy(y + r * Fout, b, (size_t)Fout * sizeof *b);
}

void ag_fast_linear_forward(ag_real *y, const ag_real *x, const ag_real *W, const ag_real *b, int R, int Fin, int Fout)
{
    if (b) fill_bias_rows(y, b, (size_t)R, Fout);                                 // [R, out] = b
    ag_gemm(false, true, R, Fout, Fin, 1, x, Fin, W, Fin, b ? 1 : 0, y, Fout);
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

ag_status ag_fast_linear_backward(ag_ctx *ctx, ag_node *n)
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
