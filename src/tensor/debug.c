/* debug.c -- looking inside a step (debug.h): anomaly detection, profiling, the layer scope,
 * the arena's and the tape's statistics, the tape in execution order, and the one clock.
 *
 * Anomaly detection and profiling are off by default and then cost nothing. On, the hooks
 * (hooks.c) call ag__debug_recorded after each record and ag__debug_backward instead of each
 * backward. The layer scope is kept in hooks.c. */
#include <math.h>
#include <string.h>
#include <time.h>
#include "debug.h"
#include "hooks.h"

double ag_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

ag_ctx_stats ag_ctx_get_stats(const ag_ctx *ctx)
{
    ag_ctx_stats s = {0};
    s.arena_capacity = ag__arena_capacity(&ctx->arena);
    s.arena_used = ctx->arena.used;
    s.arena_high_water = ctx->arena.high_water;
    s.chunk_mallocs = ctx->arena.mallocs;
    s.tape_nodes = ctx->tape_nodes;
    return s;
}

// --- anomaly detection ---

void ag_ctx_set_detect_anomaly(ag_ctx *ctx, bool on)
{
    struct ag__hooks *h = on ? ag__hooks_of(ctx) : ctx->hooks;
    if (h) h->debug.detect_anomaly = on;
}

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

/* after n's backward: AG_ERR_NONFINITE when an input's gradient holds a NaN or Inf */
static ag_status check_input_grads(ag_ctx *ctx, const ag_node *n)
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

void ag_ctx_set_profile(ag_ctx *ctx, ag_profile *p)
{
    struct ag__hooks *h = p ? ag__hooks_of(ctx) : ctx->hooks;
    if (h) h->debug.profile = p;
}

void ag_ctx_profile_mark(ag_ctx *ctx)
{
    if (ctx->hooks && ctx->hooks->debug.profile) ctx->hooks->debug.profile->last_mark = ag_now_s();
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

// --- the hooks (hooks.c calls them while anomaly detection or a profile is on) ---

void ag__debug_recorded(ag_ctx *ctx, const ag_node *n)
{
    if (ctx->hooks->debug.detect_anomaly) {
        const ag_tensor *y = n->out;
        long i = first_nonfinite(y->data, ag_numel(y), n->op->flags & AG_OP_MAY_OUTPUT_NEG_INF);
        if (i >= 0) report_nonfinite(ctx, "output", n->op, y, n->scope, i, y->data[i]);
    }
    ag_profile *p = ctx->hooks->debug.profile;
    if (!p) return;
    double t = ag_now_s();
    int i = profile_slot(p, n->op); /* the time since the last record is this op's forward */
    if (i >= 0) {
        p->ops[i].fwd_s += t - p->last_mark;
        p->ops[i].fwd_calls++;
    }
    p->last_mark = t;
}

ag_status ag__debug_backward(ag_ctx *ctx, ag_node *n)
{
    ag_profile *p = ctx->hooks->debug.profile;
    double t0 = p ? ag_now_s() : 0;
    ag_status s = n->op->backward(ctx, n);
    int i = s == AG_OK && p ? profile_slot(p, n->op) : -1;
    if (i >= 0) {
        p->ops[i].bwd_s += ag_now_s() - t0;
        p->ops[i].bwd_calls++;
    }
    if (s == AG_OK && ctx->hooks->debug.detect_anomaly) s = check_input_grads(ctx, n);
    return s;
}

// --- the tape in execution order ---

void ag_tape_foreach(const ag_ctx *ctx, void (*fn)(const ag_node *n, void *user), void *user)
{
    /* the tape links newest to oldest: count, then walk to the k-th node for each k (no
     * recursion, whose depth would be the tape's length) */
    size_t count = 0;
    for (const ag_node *m = ctx->tape; m; m = m->prev) count++;
    for (size_t k = count; k > 0; k--) {
        const ag_node *m = ctx->tape;
        for (size_t j = 1; j < k; j++) m = m->prev;
        fn(m, user);
    }
}
