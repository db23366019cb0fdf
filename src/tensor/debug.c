/* debug.c -- the debugging aids of the step context. The first two are off by default and then
 * cost the tape one test of a flag per node:
 *   - anomaly detection (ag_ctx_set_detect_anomaly): the first op output or gradient holding a
 *     NaN or Inf becomes an AG_ERR_NONFINITE error that names the op, its shape and its layer;
 *   - profiling (ag_ctx_set_profile, for make bench): forward and backward time per op;
 *   - ag_tape_foreach, the tape in execution order (char_lm's --trace-shapes). */
#include <math.h>
#include <string.h>
#include <time.h>
#include "ctx_impl.h"

// --- anomaly detection ---

/* the index of the first NaN or Inf in x[0..n), or -1; -inf passes where allow_neg_inf */
static long first_nonfinite(const ag_real *x, size_t n, bool allow_neg_inf)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) && !(allow_neg_inf && x[i] == -INFINITY)) return (long)i;
    return -1;
}

static void report_nonfinite(ag_ctx *ctx, const char *what, const ag_op *op, const ag_tensor *t,
                             const char *scope, long i, ag_real v)
{
    char b[64];
    ag_ctx_fail(ctx, AG_ERR_NONFINITE, "non-finite %s of %s %s in %s (element %ld is %g)", what, op->name,
                ag_shape_str(t, b, sizeof b), scope ? scope : "(no layer)", i, (double)v);
}

void ag__check_output(ag_ctx *ctx, const ag_node *n)
{
    const ag_tensor *y = n->out;
    long i = first_nonfinite(y->data, ag_numel(y), n->op->may_output_neg_inf);
    if (i >= 0) report_nonfinite(ctx, "output", n->op, y, n->scope, i, y->data[i]);
}

ag_status ag__check_input_grads(ag_ctx *ctx, const ag_node *n)
{
    for (int k = 0; k < n->n_in; k++) {
        const ag_tensor *in = n->in[k];
        long i = in && in->grad ? first_nonfinite(in->grad, ag_numel(in), false) : -1;
        if (i >= 0) {
            report_nonfinite(ctx, "gradient from the backward", n->op, in, n->scope, i, in->grad[i]);
            return ctx->err.status;
        }
    }
    return AG_OK;
}

// --- profiling ---

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ag_ctx_set_profile(ag_ctx *ctx, ag_profile *p) { ctx->profile = p; }

void ag_ctx_profile_mark(ag_ctx *ctx)
{
    if (ctx->profile) ctx->profile->last_mark = now_s();
}

/* the profile slot of op, or -1 when the table is full */
static int profile_slot(ag_profile *p, const ag_op *op)
{
    for (int i = 0; i < p->n; i++)
        if (p->ops[i].op == op) return i;
    if (p->n == AG_PROFILE_MAX_OPS) return -1;
    memset(&p->ops[p->n], 0, sizeof p->ops[0]);
    p->ops[p->n].op = op;
    return p->n++;
}

void ag__profile_forward(ag_profile *p, const ag_op *op)
{
    double t = now_s();
    int i = profile_slot(p, op);
    if (i >= 0) {
        p->ops[i].fwd_s += t - p->last_mark;
        p->ops[i].fwd_calls++;
    }
    p->last_mark = t;
}

ag_status ag__timed_backward(ag_ctx *ctx, ag_node *n)
{
    double t0 = now_s();
    ag_status s = n->op->backward(ctx, n);
    int i = s == AG_OK ? profile_slot(ctx->profile, n->op) : -1;
    if (i >= 0) {
        ctx->profile->ops[i].bwd_s += now_s() - t0;
        ctx->profile->ops[i].bwd_calls++;
    }
    return s;
}

// --- the tape in execution order ---

static void collect(const ag_node *n, void (*fn)(const ag_node *, void *), void *user)
{
    /* recursion depth = tape length is fine for a few thousand nodes, but be safe: iterate */
    size_t count = 0;
    for (const ag_node *m = n; m; m = m->prev) count++;
    for (size_t k = count; k > 0; k--) {
        const ag_node *m = n;
        for (size_t j = 1; j < k; j++) m = m->prev;
        if (m->out) fn(m, user);   /* not a mark (ag_ctx_mark) */
    }
}

void ag_tape_foreach(const ag_ctx *ctx, void (*fn)(const ag_node *n, void *user), void *user)
{
    collect(ctx->tape, fn, user);
}
