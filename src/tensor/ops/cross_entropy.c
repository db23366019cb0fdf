/* cross_entropy.c -- mean cross-entropy from logits, with its softmax fused in.
 *
 * forward:  for each row r with target t_r:
 *             lse_r = m + log sum_j exp(z[r,j] - m)     (m = max_j z[r,j]: stable log-sum-exp)
 *             loss_r = lse_r - z[r, t_r]                = -log softmax(z[r])[t_r]
 *           L = (1/R) sum_r loss_r
 * backward: dL/dz[r,j] = (softmax(z[r])[j] - [j == t_r]) / R, times the upstream dL.
 *           Fused because this form is both simpler and stabler than softmax -> log -> pick.
 * The softmax probabilities are saved for the backward.
 * Fast kernels: fast/cross_entropy.c (the forward: lane reductions, SIMD exp);
 * tests/test_fast_ref_rows.c proves them equal. */
#include "../alloc.h"
#include "../kernel.h"
#include "../fast/fast.h"

typedef struct {
    ag_real *probs; /* [R, V] */
    int *targets;   /* [R] */
} ce_saved;

// --- reference kernels: the formulas above as plain loops ---

/* Returns L; probs (NULL: not wanted) gets softmax(z) row by row. The rows run one after another:
 * L is one sum over all of them (threads would race on it). */
static ag_real cross_entropy_forward(ag_real *probs, const ag_real *z, const int *targets, size_t R, int V)
{
    double total = 0; /* accumulate in double: R can be thousands of rows */
    for (size_t r = 0; r < R; r++) {
        const ag_real *zr = z + r * V;  // [V]
        ag_real m = zr[0];
        for (int j = 1; j < V; j++)
            if (zr[j] > m) m = zr[j];
        ag_real sum = 0;
        for (int j = 0; j < V; j++) sum += ag__exp(zr[j] - m);
        ag_real lse = m + AG_LOG(sum);
        total += (double)(lse - zr[targets[r]]);
        if (probs)
            for (int j = 0; j < V; j++) probs[r * V + j] = ag__exp(zr[j] - m) / sum;
    }
    return (ag_real)(total / (double)R);
}

/* dz += scale (p - onehot(target)), row by row; scale = dL / R */
static void cross_entropy_backward(ag_real *dz, const ag_real *probs, const int *targets, ag_real scale, size_t R,
                                   int V)
{
#pragma omp parallel for schedule(static) if (R * V >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        const ag_real *p = probs + r * V;
        for (int j = 0; j < V; j++) dz[r * V + j] += scale * (p[j] - (j == targets[r]));
    }
}

// --- backward step ---

static ag_status cross_entropy_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: L = mean_r (lse(z[r]) - z[r, t_r])  =>  dz[r,j] = dL (p[r,j] - [j == t_r]) / R */
    ag_tensor *z = n->in[0];
    const ce_saved *s = n->saved;
    size_t R = ag_rows(z);
    ag_real scale = n->out->grad[0] / (ag_real)R;
    ag_real *dz = ag_grad(ctx, z);                                  // [..., V]
    if (!dz) return ag_ctx_status(ctx);
    cross_entropy_backward(dz, s->probs, s->targets, scale, R, ag_last(z));
    return AG_OK;
}

// --- op ---

static const ag_op cross_entropy_op = { .name = "cross_entropy", .backward = cross_entropy_backward_step };

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
    ag_real *probs = keep ? s->probs : NULL;                        // [R,V] or none
    if (AG_FAST(ctx)) L->data[0] = ag_fast_cross_entropy_forward(probs, z->data, targets, R, V);
    else L->data[0] = cross_entropy_forward(probs, z->data, targets, R, V);
    ag_node *n = ag_record(ctx, &cross_entropy_op, L, &z, 1);
    if (n) n->saved = s;
    return ag__done(ctx, L);
}
