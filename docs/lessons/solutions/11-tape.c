/* 11-tape.c -- lesson 11's exercise: a backward driver of your own over the public ops, then
 * what a training step leaves in the arena.
 *
 *   1. order:  micrograd's build_topo. From the loss, visit the node that made each input
 *              first, then list the node: every producer comes before its consumers.
 *   2. seed:   dL/dL = 1.
 *   3. walk:   the list backwards; each node's backward ADDS (+=) into its inputs' gradients,
 *              so a tensor read by three ops (x by w_q, w_k, w_v) gets the sum of three parts.
 *
 * On one Transformer block (attention op by op) plus a head and a cross-entropy, the gradients
 * must be ag_backward's, bit for bit. Then three steps in one ctx: the arena stops growing. */
#include "lesson.h"

enum { B = 2, T = 4, C = 8, H = 2, V = 5, MAX_NODES = 256 };

// --- the driver ---

typedef struct {
    ag_node *n[MAX_NODES];   /* the tape, oldest first (ag_tape_foreach's order) */
    int len;
} tape_copy;

static void collect(const ag_node *n, void *user)
{
    tape_copy *tc = user;
    /* the tape hands its nodes out read-only; a driver runs them, as tape.c does */
    if (tc->len < MAX_NODES) tc->n[tc->len++] = (ag_node *)n;
}

/* the tape position of the node whose output is t, or -1: t is a leaf (input, parameter) */
static int producer(const tape_copy *tc, const ag_tensor *t)
{
    for (int k = 0; k < tc->len; k++)
        if (tc->n[k]->out == t) return k;
    return -1;
}

/* build_topo: node k after every node that made one of its inputs */
static void visit(const tape_copy *tc, int k, bool *seen, int *order, int *n_order)
{
    if (k < 0 || seen[k]) return;
    seen[k] = true;
    for (int i = 0; i < tc->n[k]->n_in; i++)
        if (tc->n[k]->in[i]) visit(tc, producer(tc, tc->n[k]->in[i]), seen, order, n_order);
    order[(*n_order)++] = k;
}

/* dL/d(everything L depends on), added into the gradients as ag_backward does. *same_order:
 * whether build_topo's order is the tape's own. */
static ag_status my_backward(ag_ctx *ctx, ag_tensor *loss, bool *same_order)
{
    static tape_copy tc;
    tc.len = 0;
    ag_tape_foreach(ctx, collect, &tc);
    bool seen[MAX_NODES] = { false };
    int order[MAX_NODES], n_order = 0;
    visit(&tc, producer(&tc, loss), seen, order, &n_order);
    *same_order = n_order == tc.len;
    for (int k = 0; k < n_order; k++) *same_order = *same_order && order[k] == k;

    ag_real *dloss = ag_grad(ctx, loss);                             // [1]
    if (!dloss) return ag_ctx_status(ctx);
    dloss[0] += 1;                                                   /* the seed: dL/dL = 1 */
    for (int k = n_order - 1; k >= 0; k--) {                         /* consumers before producers */
        ag_node *n = tc.n[order[k]];
        if (!n->out->grad) continue;                                 /* nothing flowed back here */
        ag_status s = n->op->backward(ctx, n);                       /* += into n->in[i]'s grad */
        if (s != AG_OK) return s;
    }
    return AG_OK;
}

// --- the model: one block, a head, the loss ---

typedef struct {
    ag_params *P;
    ag_block blk;
    ag_linear_layer head;
} model;

static ag_tensor *forward(ag_ctx *ctx, model *m, ag_tensor *x, const int *targets)
{
    ag_tensor *h = ag_block_forward(ctx, &m->blk, x, ag_causal_mask(ctx, T), 0, NULL);   // [B,T,C]
    ag_tensor *logits = ag_linear(ctx, h, m->head.W, m->head.b);                         // [B,T,V]
    return ag_cross_entropy(ctx, logits, targets);                                       // [1]
}

/* one step's gradients: dW (every parameter, flat) and dx, by ag_backward or by ours;
 * *fwd_bytes: what the forward took of the arena */
static ag_status gradients(ag_ctx *ctx, model *m, ag_tensor *x, const int *targets, bool mine, bool *same,
                           size_t *fwd_bytes)
{
    ag_ctx_reset(ctx);
    ag_params_zero_grad(m->P);
    memset(x->grad, 0, ag_numel(x) * sizeof(ag_real));
    ag_tensor *loss = forward(ctx, m, x, targets);
    if (!loss) return ag_ctx_status(ctx);
    *fwd_bytes = ag_ctx_get_stats(ctx).arena_used;
    return mine ? my_backward(ctx, loss, same) : ag_backward(ctx, loss);
}

static int model_init(model *m)
{
    m->P = ag_params_new();
    if (!m->P || ag_block_init(&m->blk, m->P, "blk", C, H, NULL, 0.5, 0.5) ||
        ag_linear_layer_init(&m->head, m->P, "head", C, V, true, 0.5) || ag_params_alloc(m->P))
        return 2;
    ag_params_init(m->P, 11);
    m->blk.attn.composed = true;                                     /* op by op: a longer tape */
    return 0;
}

/* Where ours (P's gradients, x's) and ag_backward's (ref, dxref) part: the first parameter,
 * in P's order, that differs, which element and by how much, then how many differ in all
 * ("N differ" alone does not say whether a term is missing or the order of two sums). */
static void first_difference(const ag_params *P, const ag_real *ref, const ag_tensor *x, const ag_real *dxref)
{
    size_t nw = 0, nx = 0, N = ag_numel(x);
    const ag_param_entry *first = NULL;
    size_t at = 0;
    for (int e = 0; e < P->n; e++)
        for (size_t i = 0; i < ag_numel(P->entries[e].t); i++) {
            size_t k = P->entries[e].offset + i;
            if (P->grad[k] == ref[k]) continue;
            if (!first) first = &P->entries[e], at = i;
            nw++;
        }
    for (size_t i = 0; i < N; i++) nx += x->grad[i] != dxref[i];
    if (first) {
        size_t k = first->offset + at;
        double a = (double)P->grad[k], b = (double)ref[k];
        printf("  first difference: %s element %zu: yours %+.17g, ag_backward's %+.17g (%.2g apart, x%.3g)\n",
               first->t->name, at, a, b, fabs(a - b), b != 0 ? a / b : NAN);
    }
    printf("  %zu of %zu parameter gradients and %zu of %zu of dx differ\n", nw, P->total, nx, N);
}

int main(void)
{
    model m;
    if (model_init(&m)) return 2;
    ag_rng rng;
    ag_rng_seed(&rng, 11);
    int shape[3] = { B, T, C }, targets[B * T];
    ag_tensor *x = ag_gradcheck_input("x", 3, shape, &rng, -1, 1);
    for (int i = 0; i < B * T; i++) targets[i] = (int)ag_rng_below(&rng, V);
    ag_ctx *ctx = ag_ctx_new();
    size_t P = m.P->total, N = ag_numel(x);
    ag_real *dW = malloc(P * sizeof *dW), *dx = malloc(N * sizeof *dx);
    bool same = false;
    size_t fwd = 0;
    if (!x || !ctx || !dW || !dx || gradients(ctx, &m, x, targets, false, &same, &fwd)) return 2;

    memcpy(dW, m.P->grad, P * sizeof *dW);                           /* ag_backward's */
    memcpy(dx, x->grad, N * sizeof *dx);
    ag_ctx_stats st = ag_ctx_get_stats(ctx);
    if (gradients(ctx, &m, x, targets, true, &same, &fwd)) return 2; /* ours, in the same ctx */
    bool exact = !memcmp(dW, m.P->grad, P * sizeof *dW) && !memcmp(dx, x->grad, N * sizeof *dx);
    printf("tape: %zu nodes; build_topo's order is the tape's: %s\n", st.tape_nodes, same ? "yes" : "no");
    printf("my_backward vs ag_backward: %zu parameter gradients and %zu of dx %s\n", P, N,
           exact ? "equal, bit for bit" : "DIFFER");
    if (!exact) first_difference(m.P, dW, x, dx);
    int rc = exact ? 0 : 1;

    /* the arena over three steps: the first one grows it, the others reuse it */
    uint64_t mallocs[3];
    for (int step = 0; step < 3; step++) {
        if (gradients(ctx, &m, x, targets, false, &same, &fwd)) return 2;
        st = ag_ctx_get_stats(ctx);
        mallocs[step] = st.chunk_mallocs;
        printf("step %d: %zu nodes; arena: forward %zu bytes + backward %zu = %zu, in %zu reserved; chunk mallocs "
               "so far %llu\n", step + 1, st.tape_nodes, fwd, st.arena_used - fwd, st.arena_used, st.arena_capacity,
               (unsigned long long)mallocs[step]);
    }
    if (mallocs[2] != mallocs[1]) rc = 1;
    ag_ctx_free(ctx);
    ag_params_free(m.P);
    free(dW);
    free(dx);
    ag_tensor_free_owned(x);
    return rc;
}
