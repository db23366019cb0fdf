/* 10-xent.c -- lesson 10's exercise: cross-entropy from logits with its softmax fused in, as an
 * op of your own, proven with ag_gradcheck and compared with the library's.
 *
 *   forward:   p_j = exp(z_j - m) / sum_k exp(z_k - m)      (m = max_k z_k: no overflow)
 *              loss_r = log sum_k exp(z_k) - z_t            = -log p_t      (t: row r's target)
 *              L = (1/N) sum of loss_r over the N rows whose target is not the ignore index
 *   backward:  dz_j += dL (p_j - [j == t]) / N               on those rows; 0 on the others
 *
 * Then the first loss of an untrained model: logits near 0 give p_j near 1/V, so L near ln V. */
#include "lesson.h"

enum { B = 2, T = 3, V = 5, IGNORE = -1 };

typedef struct {
    ag_real *probs;      /* [R,V] softmax(z), the rows counted */
    const int *targets;  /* [R] (the caller's; it must outlive the backward) */
    size_t counted;      /* N */
} xent_saved;

// --- the op: forward, backward, and the function that records it ---

/* the sum of loss_r over the counted rows; probs [R,V] gets softmax(z) on them */
static double xent_forward(ag_real *probs, const ag_real *z, const int *targets, size_t R)
{
    double total = 0;
    for (size_t r = 0; r < R; r++) {
        if (targets[r] == IGNORE) continue;
        const ag_real *zr = z + r * V;
        ag_real m = zr[0], sum = 0;
        for (int j = 1; j < V; j++) m = zr[j] > m ? zr[j] : m;
        for (int j = 0; j < V; j++) sum += exp(zr[j] - m);
        for (int j = 0; j < V; j++) probs[r * V + j] = exp(zr[j] - m) / sum;
        total += m + log(sum) - zr[targets[r]];
    }
    return total;
}

static ag_status xent_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: L = (1/N) sum_r (lse(z_r) - z_r[t_r])  =>  dz_rj += dL (p_rj - [j == t_r]) / N */
    ag_tensor *z = n->in[0];
    const xent_saved *s = n->saved;
    ag_real *dz = ag_grad(ctx, z);                                   // [R,V], zero-filled on first use
    if (!dz) return ag_ctx_status(ctx);
    ag_real scale = n->out->grad[0] / (ag_real)s->counted;
    for (size_t r = 0; r < ag_rows(z); r++) {
        if (s->targets[r] == IGNORE) continue;                       /* not in L: no gradient */
        for (int j = 0; j < V; j++) dz[r * V + j] += scale * (s->probs[r * V + j] - (j == s->targets[r]));
    }
    return AG_OK;
}

static const ag_op xent_op = { .name = "my_cross_entropy", .backward = xent_backward_step };

/* z [...,V] logits, targets [rows] (IGNORE: padding) -> L [1]. At least one row must count. */
static ag_tensor *my_cross_entropy(ag_ctx *ctx, ag_tensor *z, const int *targets)
{
    if (!z || ag_ctx_status(ctx) != AG_OK) return NULL;
    size_t R = ag_rows(z), counted = 0;
    for (size_t r = 0; r < R; r++) counted += targets[r] != IGNORE;
    if (ag_last(z) != V || counted == 0) {
        ag_ctx_fail(ctx, AG_ERR_ARG, "my_cross_entropy: want [...,%d] logits and a counted row", V);
        return NULL;
    }
    ag_tensor *L = ag_tensor_new1(ctx, 1);                           // [1]
    xent_saved *s = L ? ag_ctx_alloc(ctx, sizeof *s) : NULL;
    if (s) s->probs = ag_ctx_alloc(ctx, R * V * sizeof(ag_real));    // [R,V]
    if (!s || !s->probs) return NULL;
    s->targets = targets;
    s->counted = counted;
    L->data[0] = (ag_real)(xent_forward(s->probs, z->data, targets, R) / (double)counted);
    ag_node *n = ag_record(ctx, &xent_op, L, &z, 1);                 /* NULL in no-grad mode */
    if (n) n->saved = s;
    return ag_ctx_status(ctx) == AG_OK ? L : NULL;
}

// --- the checks ---

/* row 1 is padding: its target is the ignore index */
static const int targets[B * T] = { 2, IGNORE, 0, 4, 1, 3 };

static ag_tensor *build_mine(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return my_cross_entropy(ctx, in[0], targets);                    // [1]
}

/* The loss and dL/dz of z [B,T,V]: ours, or the library's ag_cross_entropy_ignore. */
static double loss_and_grad(ag_tensor *z, bool library, ag_real *dz)
{
    ag_ctx *ctx = ag_ctx_new();
    memset(z->grad, 0, B * T * V * sizeof(ag_real));
    ag_tensor *L = library ? ag_cross_entropy_ignore(ctx, z, targets, IGNORE) : my_cross_entropy(ctx, z, targets);
    double l = L && ag_backward(ctx, L) == AG_OK ? (double)L->data[0] : NAN;
    memcpy(dz, z->grad, B * T * V * sizeof(ag_real));
    ag_ctx_free(ctx);
    return l;
}

int main(void)
{
    ag_rng rng;
    ag_rng_seed(&rng, 10);
    int shape[3] = { B, T, V };
    ag_tensor *in[1] = { ag_gradcheck_input("z", 3, shape, &rng, -2, 2) };
    if (!in[0]) return 2;
    int rc = lesson_check("cross-entropy, fused", build_mine, NULL, in, 1);

    ag_real mine[B * T * V], lib[B * T * V];
    double lm = loss_and_grad(in[0], false, mine), ll = loss_and_grad(in[0], true, lib);
    double worst = 0;
    for (int i = 0; i < B * T * V; i++) worst = fmax(worst, fabs((double)(mine[i] - lib[i])));
    printf("loss: mine %.12f, ag_cross_entropy_ignore %.12f; largest gradient difference %.1e\n", lm, ll, worst);
    lesson_print("dL/dz of row 0 (target 2): (p - onehot) / 5 counted rows", mine, 1, V);
    lesson_print("dL/dz of row 1 (ignored)", mine + V, 1, V);
    if (!(fabs(lm - ll) <= 1e-12 && worst <= 1e-15)) rc = rc ? rc : 1;

    /* large logits, as a confident model's: exp(1000) overflows a double, so only a forward
     * that subtracts the row's max (m above) gets a finite loss and the library's gradient */
    for (int i = 0; i < B * T * V; i++) in[0]->data[i] = (ag_real)(700 + 300 * ag_rng_uniform(&rng));
    lm = loss_and_grad(in[0], false, mine), ll = loss_and_grad(in[0], true, lib);
    worst = 0;
    for (int i = 0; i < B * T * V; i++) worst = fmax(worst, fabs((double)(mine[i] - lib[i])));
    printf("logits in [700, 1000]: loss mine %.6f, the library's %.6f; largest gradient difference %.1e\n", lm, ll,
           worst);
    if (!(isfinite(lm) && fabs(lm - ll) <= 1e-9 * fabs(ll) && worst <= 1e-15)) {
        printf("FAIL: large logits: %s\n", isfinite(lm) ? "your loss or gradient differs from the library's"
                                                         : "exp(z) overflowed: subtract the row's max before exp "
                                                           "(log-sum-exp: m + log sum exp(z - m))");
        rc = rc ? rc : 1;
    }

    /* the first loss: small logits (an untrained model's: weights of std 0.02) */
    for (int i = 0; i < B * T * V; i++) in[0]->data[i] = (ag_real)(0.02 * ag_rng_normal(&rng));
    double first = loss_and_grad(in[0], false, mine);
    printf("logits ~ N(0, 0.02^2): loss %.4f; ln V = ln %d = %.4f\n", first, V, log((double)V));
    if (!(fabs(first - log((double)V)) < 0.01)) rc = rc ? rc : 1;
    return lesson_done(in, 1, rc);
}
