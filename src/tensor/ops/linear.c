/* linear.c -- y = x W^T + b, the PyTorch Linear, with W stored [out, in].
 *
 * forward:  y[r, o] = sum_i x[r, i] W[o, i] + b[o]       for every row r of x [..., in]
 * backward: dx = dy @ W        ([R,out] x [out,in] -> [R,in])
 *           dW = dy^T @ x      ([out,R] x [R,in]  -> [out,in]), summed over all rows
 *           db = sum over rows of dy
 * Every product is one OpenBLAS gemm over all rows at once; the transposes are gemm flags.
 * Fast kernels: fast/linear.c (bias rows copied under the gemm, gradients written instead of
 * zeroed and added to, dx and dW as a gemm pair with db on dx's side, column blocks for db);
 * tests/test_fast_ref_products.c proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

// --- reference kernels: the formulas above, one matrix product per line ---

static void linear_forward(ag_real *y, const ag_real *x, const ag_real *W, const ag_real *b, int R, int Fin, int Fout)
{
#pragma omp parallel for schedule(static) if ((size_t)R * Fout >= AG_PAR_MIN)
    for (int r = 0; r < R; r++) /* y = b in every row (0 without a bias) */
        for (int o = 0; o < Fout; o++) y[(size_t)r * Fout + o] = b ? b[o] : 0;
    ag__matmul_add(y, x, W, R, Fout, Fin, false, true);   /* y[R,Fout] += x[R,Fin] W^T[Fin,Fout] */
}

/* db[o] += sum over rows r of dy[r, o]: each output o on its own, so they may run in parallel */
static void db_add_row_sums(ag_real *db, const ag_real *dy, int R, int Fout)
{
#pragma omp parallel for schedule(static) if ((size_t)R * Fout >= AG_PAR_MIN)
    for (int o = 0; o < Fout; o++) {
        ag_real sum = 0;
        for (int r = 0; r < R; r++) sum += dy[(size_t)r * Fout + o];
        db[o] += sum;
    }
}

static void linear_backward(ag_real *dx, ag_real *dW, ag_real *db, const ag_real *dy, const ag_real *x,
                            const ag_real *W, int R, int Fin, int Fout)
{
    if (dx) ag__matmul_add(dx, dy, W, R, Fin, Fout, false, false); /* dx[R,Fin] += dy[R,Fout] W[Fout,Fin] */
    if (dW) ag__matmul_add(dW, dy, x, Fout, Fin, R, true, false);  /* dW[Fout,Fin] += dy^T[Fout,R] x[R,Fin] */
    if (db) db_add_row_sums(db, dy, R, Fout);                      /* db[Fout] += sum over rows of dy */
}

// --- backward step ---

static ag_status linear_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = x W^T + b  =>  dx = dy W,  dW = dy^T x,  db = sum over rows of dy */
    ag_tensor *x = n->in[0], *W = n->in[1], *b = n->in[2], *y = n->out;
    int Fin = W->shape[1], Fout = W->shape[0]; /* in and out features */
    int R = (int)ag_rows(x);
    ag_real *dx = x->requires_grad ? ag_grad(ctx, x) : NULL;           // [R, Fin]
    ag_real *dW = W->requires_grad ? ag_grad(ctx, W) : NULL;           // [Fout, Fin]
    ag_real *db = b && b->requires_grad ? ag_grad(ctx, b) : NULL;      // [Fout]
    if (ag_ctx_status(ctx) != AG_OK) return ag_ctx_status(ctx);
    linear_backward(dx, dW, db, y->grad, x->data, W->data, R, Fin, Fout);
    return AG_OK;
}

// --- op ---

static const ag_op linear_op = { .name = "linear", .backward = linear_backward_step };
const ag_linear_kernels ag__linear_reference = { linear_forward, &linear_op };  /* kernel.h's table */

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
    const ag_real *bias = b ? b->data : NULL;                       // [out] or none
    const ag_linear_kernels *kern = &ag__kernels(ctx)->linear;  /* reference or fast (kernel.h) */
    kern->forward(y->data, x->data, W->data, bias, R, Fin, Fout);
    ag_tensor *in[3] = { x, W, b };
    ag_record(ctx, kern->op, y, in, b ? 3 : 2);
    return ag__done(ctx, y);
}
