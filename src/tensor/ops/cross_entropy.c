/* cross_entropy.c -- mean cross-entropy from logits, with its softmax fused in; optionally
 * ignoring the rows of padded targets.
 *
 * forward:  for each row r with target t_r:
 *             lse_r = m + log sum_j exp(z[r,j] - m)     (m = max_j z[r,j]: stable log-sum-exp)
 *             loss_r = lse_r - z[r, t_r]                = -log softmax(z[r])[t_r]
 *           L = (1/N) sum_r loss_r over the N rows whose target is not the ignore index
 *           (N = R without one); L = 0 when N = 0
 * backward: dL/dz[r,j] = (softmax(z[r])[j] - [j == t_r]) / N, times the upstream dL, on the
 *           rows counted; 0 on the ignored rows (they are not in L).
 *           Fused because this form is both simpler and stabler than softmax -> log -> pick.
 * The softmax probabilities of the counted rows are saved for the backward.
 * Fast kernels: fast/cross_entropy.c (the forward: lane reductions, SIMD exp);
 * tests/test_fast_ref_rows.c proves them equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

typedef struct {
    ag_real *probs;   /* [R, V], the ignored rows not written */
    int *targets;     /* [R] */
    int ignore_index; /* rows with this target are not in L */
    size_t counted;   /* N: the rows that are */
} ce_saved;

/* the kernels' ignore index for ag_cross_entropy: its targets are checked to be in [0, V), so
 * no row is ignored (a target of -1 there is an error, not padding) */
#define NO_IGNORE (-1)

// --- reference kernels: the formulas above as plain loops ---

/* Returns sum_r loss_r over the rows whose target is not ignore_index; probs (NULL: not wanted)
 * gets softmax(z) on those rows. The rows run one after another: the total is one sum over all
 * of them (threads would race on it). */
static double cross_entropy_forward(ag_real *probs, const ag_real *z, const int *targets, int ignore_index, size_t R,
                                    int V)
{
    double total = 0; /* accumulate in double: R can be thousands of rows */
    for (size_t r = 0; r < R; r++) {
        if (targets[r] == ignore_index) continue; /* a padded position: no loss */
        const ag_real *zr = z + r * V;  // [V]
        ag_real m = zr[0];
        for (int j = 1; j < V; j++)
            if (zr[j] > m) m = zr[j];
        ag_real sum = 0;
        for (int j = 0; j < V; j++) sum += AG_EXP(zr[j] - m);
        ag_real lse = m + AG_LOG(sum);
        total += (double)(lse - zr[targets[r]]);
        if (probs)
            for (int j = 0; j < V; j++) probs[r * V + j] = AG_EXP(zr[j] - m) / sum;
    }
    return total;
}

/* dz += scale (p - onehot(target)) on the rows not ignored; scale = dL / N */
static void cross_entropy_backward(ag_real *dz, const ag_real *probs, const int *targets, int ignore_index,
                                   ag_real scale, size_t R, int V)
{
#pragma omp parallel for schedule(static) if (R * V >= AG_PAR_MIN)
    for (size_t r = 0; r < R; r++) {
        if (targets[r] == ignore_index) continue; /* not in L: zero gradient */
        const ag_real *p = probs + r * V;
        for (int j = 0; j < V; j++) dz[r * V + j] += scale * (p[j] - (j == targets[r]));
    }
}

// --- backward step ---

static ag_status cross_entropy_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: L = (1/N) sum_r counted (lse(z[r]) - z[r, t_r])
     *   =>  dz[r,j] = dL (p[r,j] - [j == t_r]) / N on the counted rows, 0 on the others */
    ag_tensor *z = n->in[0];
    const ce_saved *s = n->saved;
    ag_real scale = s->counted ? n->out->grad[0] / (ag_real)s->counted : 0;
    ag_real *dz = ag_grad(ctx, z);                                  // [..., V] zeroed: ignored rows stay 0
    if (!dz) return ag_ctx_status(ctx);
    cross_entropy_backward(dz, s->probs, s->targets, s->ignore_index, scale, ag_rows(z), ag_last(z));
    return AG_OK;
}

// --- op ---

static const ag_op cross_entropy_op = { .name = "cross_entropy", .backward = cross_entropy_backward_step };
/* kernel.h's table */
const ag_cross_entropy_kernels ag__cross_entropy_reference = { cross_entropy_forward, &cross_entropy_op };

/* ag_cross_entropy (ignoring false) and ag_cross_entropy_ignore: `name` for the messages */
static ag_tensor *cross_entropy(ag_ctx *ctx, ag_tensor *z, const int *targets, bool ignoring, int ignore_index,
                                const char *name)
{
    if (ag__skip(ctx, z, z)) return NULL;
    if (!targets) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "%s: no targets", name);
        return NULL;
    }
    int V = ag_last(z);
    size_t R = ag_rows(z), counted = 0;
    for (size_t r = 0; r < R; r++) {
        if (ignoring && targets[r] == ignore_index) continue;
        if (targets[r] < 0 || targets[r] >= V) {
            ag_ctx_fail(ctx, AG_ERR_ARG, "%s: target %d at row %zu is outside [0, %d)", name, targets[r], r, V);
            return NULL;
        }
        counted++;
    }
    if (!ignoring) ignore_index = NO_IGNORE;
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
        s->ignore_index = ignore_index;
        s->counted = counted;
    }
    ag_real *probs = keep ? s->probs : NULL;                        // [R,V] or none
    const ag_cross_entropy_kernels *kern = &ag__kernels(ctx)->cross_entropy;  /* reference or fast (kernel.h) */
    double total = kern->forward(probs, z->data, targets, ignore_index, R, V);
    L->data[0] = counted ? (ag_real)(total / (double)counted) : 0; /* no row counted: 0, not 0/0 */
    ag_node *n = ag_record(ctx, kern->op, L, &z, 1);
    if (n) n->saved = s;
    return ag__done(ctx, L);
}

ag_tensor *ag_cross_entropy(ag_ctx *ctx, ag_tensor *z, const int *targets)
{
    return cross_entropy(ctx, z, targets, false, 0, "ag_cross_entropy");
}

ag_tensor *ag_cross_entropy_ignore(ag_ctx *ctx, ag_tensor *z, const int *targets, int ignore_index)
{
    return cross_entropy(ctx, z, targets, true, ignore_index, "ag_cross_entropy_ignore");
}
