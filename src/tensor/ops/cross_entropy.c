/* cross_entropy.c -- mean cross-entropy from logits, with its softmax fused in.
 *
 * forward:  for each row r with target t_r:
 *             lse_r = m + log sum_j exp(z[r,j] - m)     (m = max_j z[r,j]: stable log-sum-exp)
 *             loss_r = lse_r - z[r, t_r]                = -log softmax(z[r])[t_r]
 *           L = (1/R) sum_r loss_r
 * backward: dL/dz[r,j] = (softmax(z[r])[j] - [j == t_r]) / R, times the upstream dL.
 *           Fused because this form is both simpler and stabler than softmax -> log -> pick.
 * The softmax probabilities are saved for the backward. */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

typedef struct {
    ag_real *probs; /* [R, V] */
    int *targets;   /* [R] */
} ce_saved;

static ag_status cross_entropy_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: L = mean_r (lse(z[r]) - z[r, t_r])  =>  dz[r,j] = dL (p[r,j] - [j == t_r]) / R */
    ag_tensor *z = n->in[0];
    const ce_saved *s = n->saved;
    int V = ag_last(z);
    size_t R = ag_rows(z);
    ag_real scale = n->out->grad[0] / (ag_real)R;
    ag_real *dz = ag_grad(ctx, z);
    if (!dz) return ag_ctx_status(ctx);
#pragma omp parallel for schedule(static) if (R * V >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *p = s->probs + r * V;
        for (int j = 0; j < V; j++) dz[r * V + j] += scale * (p[j] - (j == s->targets[r]));
    }
    return AG_OK;
}

static const ag_op cross_entropy_op = { "cross_entropy", cross_entropy_backward };

ag_tensor *ag_cross_entropy(ag_ctx *ctx, ag_tensor *z, const int *targets)
{
    if (ag__skip(ctx, z, z)) return NULL;
    if (!targets) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "ag_cross_entropy: no targets");
        return NULL;
    }
    int V = ag_last(z);
    size_t R = ag_rows(z);
    for (size_t r = 0; r < R; r++)
        if (targets[r] < 0 || targets[r] >= V) {
            ag_ctx_fail(ctx, AG_ERR_ARG, "ag_cross_entropy: target %d at row %zu is outside [0, %d)", targets[r], r, V);
            return NULL;
        }
    ag_tensor *L = ag_tensor_new1(ctx, 1);                          // [1]
    if (!L) return NULL;
    bool keep = ag_ctx_grad_enabled(ctx) && z->requires_grad;
    ce_saved *s = NULL;
    if (keep) {
        s = ag_ctx_alloc(ctx, sizeof *s);
        if (s) s->probs = ag_ctx_alloc(ctx, R * V * sizeof(ag_real));        // [R,V]
        if (s && s->probs) s->targets = ag_ctx_alloc(ctx, R * sizeof(int));  // [R]
        if (!s || !s->probs || !s->targets) return NULL;
        memcpy(s->targets, targets, R * sizeof(int));
    }
    double total = 0; /* accumulate in double: R can be thousands of rows */
#pragma omp parallel for schedule(static) reduction(+ : total) if (R * V >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *zr = z->data + r * V;
        ag_real m = ag__max(zr, V, zr[0]);
        ag_real sum = 0;
        ag_real *p = keep ? s->probs + r * V : NULL;
        if (p) { /* exps into the saved row first, then their sum */
#pragma omp simd
            for (int j = 0; j < V; j++) p[j] = ag__exp(zr[j] - m);
            sum = ag__sum(p, V);
        } else {
#pragma omp simd reduction(+ : sum)
            for (int j = 0; j < V; j++) sum += ag__exp(zr[j] - m);
        }
        ag_real lse = m + AG_LOG(sum);
        total += (double)(lse - zr[targets[r]]);
        if (p) {
            ag_real inv = 1 / sum; /* p = exp(z - m) / sum = exp(z - lse) */
            for (int j = 0; j < V; j++) p[j] *= inv;
        }
    }
    L->data[0] = (ag_real)(total / (double)R);
    ag_node *n = ag_record(ctx, &cross_entropy_op, L, &z, 1);
    if (n) n->saved = s;
    return ag__done(ctx, L);
}
