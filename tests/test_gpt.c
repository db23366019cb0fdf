/* test_gpt.c -- the whole GPT of MODEL.md: parameter names, order, shapes, decay flags and init;
 * config validation; the untrained loss; a gradient check of the loss with respect to every
 * parameter; dropout determinism; overfitting one batch; the KV cache against a full
 * recompute, for the whole model and for one block; the options of one forward call
 * (ag_forward_opts) honoured; and a training loop whose step arena stops growing after the first steps. */
#include <check.h>
#include <stdlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define KV_TOL 1e-10
#else
#define KV_TOL 1e-5
#endif

static const ag_adam_cfg adamw = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};

static ag_gpt *gpt_new(int V, int L, int H, int C, int T_max, double dropout, uint64_t seed)
{
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = L, .n_head = H, .n_embd = C, .block_size = T_max, .dropout = dropout };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, seed, &err);
    ck_assert_msg(g != NULL, "ag_gpt_new: %s", err.msg);
    return g;
}

static void random_ids(int *ids, int n, int V, uint64_t seed)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (int i = 0; i < n; i++) ids[i] = (int)ag_rng_below(&r, (uint64_t)V);
}

static void sample_stats(const ag_tensor *t, double *mean, double *std)
{
    size_t n = ag_numel(t);
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) s += t->data[i];
    *mean = s / (double)n;
    for (size_t i = 0; i < n; i++) s2 += (t->data[i] - *mean) * (t->data[i] - *mean);
    *std = sqrt(s2 / (double)n);
}

// --- construction ---

START_TEST(test_gpt_params_as_model_md)
{
    enum { V = 65, L = 2, H = 4, C = 64, TM = 32 };
    ag_gpt *g = gpt_new(V, L, H, C, TM, 0, 42);
    ag_params *P = g->params;
    const char *blk[16] = { "ln1.weight", "ln1.bias", "attn.w_q.weight", "attn.w_q.bias", "attn.w_k.weight",
                            "attn.w_k.bias", "attn.w_v.weight", "attn.w_v.bias", "attn.w_o.weight", "attn.w_o.bias",
                            "ln2.weight", "ln2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight",
                            "mlp.fc2.bias" };
    const int blk_shape[16][2] = { { C }, { C }, { C, C }, { C }, { C, C }, { C }, { C, C }, { C },
                                   { C, C }, { C }, { C }, { C }, { 4 * C, C }, { 4 * C }, { C, 4 * C }, { C } };
    char want[64][64];
    int shape[64][2], n = 0;
    snprintf(want[n], 64, "tok_emb.weight"); shape[n][0] = V; shape[n++][1] = C;
    snprintf(want[n], 64, "pos_emb.weight"); shape[n][0] = TM; shape[n++][1] = C;
    for (int l = 0; l < L; l++)
        for (int k = 0; k < 16; k++) {
            snprintf(want[n], 64, "blocks.%d.%s", l, blk[k]);
            shape[n][0] = blk_shape[k][0];
            shape[n++][1] = blk_shape[k][1];
        }
    snprintf(want[n], 64, "ln_f.weight"); shape[n][0] = C; shape[n++][1] = 0;
    snprintf(want[n], 64, "ln_f.bias"); shape[n][0] = C; shape[n++][1] = 0;
    snprintf(want[n], 64, "lm_head.weight"); shape[n][0] = V; shape[n++][1] = C;
    snprintf(want[n], 64, "lm_head.bias"); shape[n][0] = V; shape[n++][1] = 0;
    ck_assert_int_eq(P->n, n);
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const ag_param_entry *e = &P->entries[i];
        int ndim = shape[i][1] ? 2 : 1;
        ck_assert_str_eq(e->t->name, want[i]);
        ck_assert_int_eq(e->t->ndim, ndim);
        ck_assert_int_eq(e->t->shape[0], shape[i][0]);
        if (ndim == 2) ck_assert_int_eq(e->t->shape[1], shape[i][1]);
        ck_assert_msg(e->decay == (ndim == 2), "%s: decay %d", want[i], e->decay); /* 2-D weights only */
        bool hidden = ndim == 2 && strncmp(want[i], "blocks.", 7) == 0;   /* Muon's: not the embeddings, not the head */
        ck_assert_msg(e->hidden == hidden, "%s: hidden %d", want[i], e->hidden);
        total += ag_numel(e->t);
        /* init: LN weight 1, biases 0, weights N(0, 0.02) or N(0, 0.02/sqrt(2L)) for w_o, fc2 */
        bool is_out = strstr(want[i], "w_o.weight") || strstr(want[i], "fc2.weight");
        double mean, std, want_std = ndim == 1 ? 0 : is_out ? 0.02 / sqrt(2.0 * L) : 0.02;
        sample_stats(e->t, &mean, &std);
        if (ndim == 1) {
            double want_val = strstr(want[i], "ln") && strstr(want[i], ".weight") ? 1 : 0;
            for (size_t j = 0; j < ag_numel(e->t); j++) ck_assert(e->t->data[j] == want_val);
        } else {
            ck_assert_msg(fabs(std / want_std - 1) < 0.08, "%s: std %g want %g", want[i], std, want_std);
            ck_assert_msg(fabs(mean) < 4 * want_std / sqrt((double)ag_numel(e->t)), "%s: mean %g", want[i], mean);
        }
    }
    ck_assert_uint_eq(P->total, total);
    /* the same seed gives the same model */
    ag_gpt *g2 = gpt_new(V, L, H, C, TM, 0, 42);
    ck_assert(memcmp(g->params->data, g2->params->data, total * sizeof(ag_real)) == 0);
    ag_gpt_free(g2);
    ag_gpt_free(g);
    ag_gpt_free(NULL);
}
END_TEST

/* --no-embedding-decay: tok_emb and pos_emb lose their decay flag and nothing else does, and an
 * AdamW step with zero gradients (decay alone moves a weight: p *= 1 - lr wd) leaves them as they
 * were while the Linear weights shrink; MODEL.md's model shrinks both. */
START_TEST(test_no_embedding_decay)
{
    ag_gpt_config cfg = { .vocab_size = 7, .n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 4 };
    ag_error err = { 0 };
    ag_gpt *plain = ag_gpt_new(&cfg, 5, &err);
    cfg.no_embedding_decay = true;
    ag_gpt *g = ag_gpt_new(&cfg, 5, &err);
    ck_assert_msg(plain && g, "ag_gpt_new: %s", err.msg);
    const ag_params *P = g->params, *Q = plain->params;
    for (int i = 0; i < P->n; i++) {
        const char *name = P->entries[i].t->name;
        bool embedding = strcmp(name, "tok_emb.weight") == 0 || strcmp(name, "pos_emb.weight") == 0;
        ck_assert_msg(P->entries[i].decay == (Q->entries[i].decay && !embedding), "%s: decay %d", name,
                      P->entries[i].decay);
    }
    const ag_adam_cfg ac = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.5};
    const double lr = 0.1, keep = 1 - lr * 0.5;
    ag_params_zero_grad(g->params), ag_params_zero_grad(plain->params);
    ag_tensor *emb = ag_params_find(P, "tok_emb.weight"), *head = ag_params_find(P, "lm_head.weight");
    ag_real e0 = emb->data[3], h0 = head->data[3];
    ag_adamw_step(g->params, &ac, lr, 1);
    ag_adamw_step(plain->params, &ac, lr, 1);
    ck_assert_msg(emb->data[3] == e0, "tok_emb moved: %g -> %g", (double)e0, (double)emb->data[3]);
    ck_assert_msg(fabs(head->data[3] - keep * h0) <= 1e-6 * fabs(h0), "lm_head: %g, want %g", (double)head->data[3],
                  keep * h0);
    ag_real pe = ag_params_find(Q, "tok_emb.weight")->data[3];
    ck_assert_msg(fabs(pe - keep * e0) <= 1e-6 * fabs(e0), "MODEL.md's tok_emb: %g, want %g", (double)pe, keep * e0);
    ck_assert_int_eq(ag_params_set_decay(g->params, "tok_emb.bias", true), AG_ERR_ARG);   /* no such name */
    ck_assert_str_eq(ag_params_error(g->params), "tok_emb.bias: no such parameter (its weight decay cannot be set)");
    ag_gpt_free(g);
    ag_gpt_free(plain);
}
END_TEST

START_TEST(test_gpt_bad_config)
{
    const struct { ag_gpt_config cfg; const char *word; } bad[] = {
        { { .vocab_size = 0, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 4, .dropout = 0 }, "vocab_size" },
        { { .vocab_size = 5, .n_layer = 0, .n_head = 2, .n_embd = 8, .block_size = 4, .dropout = 0 }, "n_layer" },
        { { .vocab_size = 5, .n_layer = 2, .n_head = 0, .n_embd = 8, .block_size = 4, .dropout = 0 }, "n_head" },
        { { .vocab_size = 5, .n_layer = 2, .n_head = 3, .n_embd = 8, .block_size = 4, .dropout = 0 }, "divisible" },
        { { .vocab_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 0, .dropout = 0 }, "block_size" },
        { { .vocab_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 4, .dropout = 1.0 }, "dropout" },
        { { .vocab_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 4, .dropout = -0.1 }, "dropout" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ag_error err = { 0 };
        ck_assert_ptr_null(ag_gpt_new(&bad[i].cfg, 1, &err));
        ck_assert_int_eq(err.status, AG_ERR_ARG);
        ck_assert_msg(strstr(err.msg, bad[i].word) != NULL, "case %zu: message \"%s\" lacks \"%s\"", i, err.msg,
                      bad[i].word);
        ck_assert_ptr_null(strchr(err.msg, '\n'));                  /* one line */
        ck_assert_ptr_null(ag_gpt_new(&bad[i].cfg, 1, NULL));       /* no ag_error: still fine */
    }
}
END_TEST

// --- forward ---

/* ag_gpt_new says why: its own config check, or a layer init's reason under the layer's prefix. */
START_TEST(test_gpt_new_says_why)
{
    ag_gpt_config cfg = { .vocab_size = 5, .n_layer = 1, .n_head = 3, .n_embd = 64, .block_size = 4 };
    ag_error err = { 0 };
    ck_assert_ptr_null(ag_gpt_new(&cfg, 1, &err));
    ck_assert_int_eq(err.status, AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "n_embd 64 must be > 0 and divisible by n_head 3"), "%s", err.msg);
    /* n_embd 65536 passes the config check, but w_q [C,C] has more elements than an ag_tensor
     * holds: the message is the layer's, under its full name, and nothing was allocated */
    cfg.vocab_size = cfg.block_size = cfg.n_head = 1;
    cfg.n_embd = 1 << 16;
    ag_error_clear(&err);
    ck_assert_ptr_null(ag_gpt_new(&cfg, 1, &err));
    ck_assert_int_eq(err.status, AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "ag_gpt_new: cannot create the parameters: blocks.0.attn.w_q.weight: shape "
                              "[65536,65536] has more than 2147483647 elements");
    /* success leaves err and the model's params without a message */
    cfg.n_embd = 8;
    ag_error_clear(&err);
    ag_gpt *g = ag_gpt_new(&cfg, 1, &err);
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(err.status, AG_OK);
    ck_assert_str_eq(err.msg, "");
    ck_assert_ptr_null(ag_params_error(g->params));
    ag_gpt_free(g);
}
END_TEST

/* The one splitmix64 is Vigna's (the first outputs from state 0), and ag_seed_mix(s, k) is the
 * k-th step of its sequence: the dropout sites and the PCG32 seeding rely on both. */
START_TEST(test_splitmix64)
{
    ck_assert_uint_eq(ag_splitmix64(0), 0xE220A8397B1DCDAFull);
    ck_assert_uint_eq(ag_seed_mix(0, 1), 0x6E789E6AA1B965F4ull);
    ck_assert_uint_eq(ag_seed_mix(0, 2), 0x06C45D188009454Full);
    ck_assert_uint_eq(ag_seed_mix(42, 0), ag_splitmix64(42));
    ag_rng r;
    ag_rng_seed(&r, 0);
    ck_assert_uint_eq(r.state, 0xE220A8397B1DCDAFull);
    ck_assert_uint_eq(r.inc, 0x6E789E6AA1B965F4ull | 1);
}
END_TEST

START_TEST(test_gpt_untrained_loss_is_ln_v)
{
    enum { V = 65, Bn = 4, Tn = 16 };
    ag_gpt *g = gpt_new(V, 2, 2, 32, Tn, 0, 3);
    int ids[Bn * Tn], tg[Bn * Tn];
    random_ids(ids, Bn * Tn, V, 5);
    random_ids(tg, Bn * Tn, V, 6);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *loss;
    ag_tensor *logits = ag_gpt_forward(ctx, g, ids, tg, Bn, Tn, NULL, &loss); // [B,T,V]
    ck_assert_msg(logits != NULL, "%s", ag_ctx_error(ctx));
    ck_assert_int_eq(logits->ndim, 3);
    ck_assert_int_eq(logits->shape[0], Bn);
    ck_assert_int_eq(logits->shape[1], Tn);
    ck_assert_int_eq(logits->shape[2], V);
    ck_assert_ptr_nonnull(loss);
    ck_assert_double_eq_tol(loss->data[0], log((double)V), 0.1);
    /* without targets there is no loss */
    ck_assert_ptr_nonnull(ag_gpt_forward(ctx, g, ids, NULL, Bn, Tn, NULL, &loss));
    ck_assert_ptr_null(loss);
    /* errors: T past block_size, an id outside the vocabulary */
    ck_assert_ptr_null(ag_gpt_forward(ctx, g, ids, tg, 1, Tn + 1, NULL, &loss));
    ck_assert_ptr_null(loss);
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "block_size"));
    ag_ctx_reset(ctx);
    ids[3] = V;
    ck_assert_ptr_null(ag_gpt_forward(ctx, g, ids, tg, Bn, Tn, NULL, &loss));
    ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "ag_embedding"));
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

typedef struct { int n; const char *seen[64]; } scope_list;

static void collect_scope(const ag_node *n, void *user)
{
    scope_list *s = user;
    const char *sc = n->scope ? n->scope : "(none)";
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->seen[i], sc) == 0) return;
    if (s->n < 64) s->seen[s->n++] = sc;
}

static bool has_scope(const scope_list *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->seen[i], name) == 0) return true;
    return false;
}

START_TEST(test_gpt_tape_scopes)
{
    ag_gpt *g = gpt_new(5, 2, 2, 8, 4, 0, 1);
    int ids[6] = { 0, 1, 2, 3, 4, 0 }, tg[6] = { 1, 2, 3, 4, 0, 1 };
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *loss;
    ck_assert_ptr_nonnull(ag_gpt_forward(ctx, g, ids, tg, 2, 3, &(ag_forward_opts){ .train = true }, &loss));
    ck_assert_ptr_null(ag_ctx_scope(ctx));                          /* restored */
    scope_list s = { 0 };
    ag_tape_foreach(ctx, collect_scope, &s);
    const char *want[] = { "tok_emb", "pos_emb", "blocks.0", "blocks.0.attn", "blocks.0.mlp", "blocks.1",
                           "blocks.1.attn", "blocks.1.mlp", "ln_f", "lm_head", "loss" };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(has_scope(&s, want[i]), "no node in scope %s", want[i]);
    ck_assert(!has_scope(&s, "(none)"));
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

/* Dropout: the same seed gives the same masks, another seed others, and eval ignores it. */
START_TEST(test_gpt_dropout)
{
    ag_gpt *g = gpt_new(7, 2, 2, 16, 8, 0.2, 9), *g0 = gpt_new(7, 2, 2, 16, 8, 0, 9);
    int ids[16];
    random_ids(ids, 16, 7, 4);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *a = ag_gpt_forward(ctx, g, ids, NULL, 2, 8, &(ag_forward_opts){ .train = true, .seed = 100 }, NULL);
    ag_tensor *b = ag_gpt_forward(ctx, g, ids, NULL, 2, 8, &(ag_forward_opts){ .train = true, .seed = 100 }, NULL);
    ag_tensor *c = ag_gpt_forward(ctx, g, ids, NULL, 2, 8, &(ag_forward_opts){ .train = true, .seed = 101 }, NULL);
    ag_tensor *e = ag_gpt_forward(ctx, g, ids, NULL, 2, 8, &(ag_forward_opts){ .seed = 100 }, NULL);
    ag_tensor *e0 = ag_gpt_forward(ctx, g0, ids, NULL, 2, 8, &(ag_forward_opts){ .train = true, .seed = 100 }, NULL);
    ck_assert_ptr_nonnull(e0);
    size_t n = ag_numel(a);
    double dab = 0, dac = 0, dae = 0, dee0 = 0;
    for (size_t i = 0; i < n; i++) {
        dab = fmax(dab, fabs(a->data[i] - b->data[i]));
        dac = fmax(dac, fabs(a->data[i] - c->data[i]));
        dae = fmax(dae, fabs(a->data[i] - e->data[i]));
        dee0 = fmax(dee0, fabs(e->data[i] - e0->data[i]));
    }
    ck_assert(dab == 0);
    ck_assert_double_gt(dac, 0);
    ck_assert_double_gt(dae, 0);
    ck_assert(dee0 == 0);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    ag_gpt_free(g0);
}
END_TEST

// --- the whole loss, gradient-checked ---

typedef struct {
    ag_gpt *g;
    int ids[6], targets[6];
    bool train;
} gpt_case;

static ag_tensor *build_gpt_loss(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)in; /* the inputs are g's own parameters */
    gpt_case *c = user;
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, c->g, c->ids, c->targets, 2, 3, &(ag_forward_opts){ .train = c->train, .seed = 1234 }, &loss);
    return loss;                                                    // [1]
}

static void check_gpt_grad(double dropout, bool train, const char *name)
{
    /* V=5, n_layer=2, n_head=2, n_embd=8, block_size=4, B=2, T=3: all distinct */
    gpt_case c = { gpt_new(5, 2, 2, 8, 4, dropout, 21), { 0, 3, 1, 4, 2, 2 }, { 3, 1, 4, 2, 2, 0 }, train };
    gc_randomize_params(c.g->params, 22);
    ag_params *P = c.g->params;
    ag_tensor *in[64];
    for (int e = 0; e < P->n; e++) in[e] = P->entries[e].t;
    ck_assert_int_eq(P->n, 38);
    gc_opts o = gc_defaults(name);
    GC_ASSERT(&o, build_gpt_loss, in, P->n, &c);
    ag_gpt_free(c.g);
}

START_TEST(test_gpt_loss_grad) { check_gpt_grad(0, false, "gpt loss"); }
END_TEST

START_TEST(test_gpt_loss_grad_dropout) { check_gpt_grad(0.2, true, "gpt loss with dropout"); }
END_TEST

// --- training ---

/* One step: forward, backward, clip, AdamW, zero_grad, reset. Returns the loss. */
static double train_step(ag_ctx *ctx, ag_gpt *g, const int *x, const int *y, int Bn, int Tn, double lr, long t)
{
    ag_tensor *loss;
    ag_gpt_forward(ctx, g, x, y, Bn, Tn, &(ag_forward_opts){ .train = true, .seed = (uint64_t)t }, &loss);
    ck_assert_msg(loss != NULL, "%s", ag_ctx_error(ctx));
    double L = loss->data[0];
    ck_assert_int_eq(ag_backward(ctx, loss), AG_OK);
    ag_clip_grad_norm(g->params, 1.0);
    ag_adamw_step(g->params, &adamw, lr, t);
    ag_params_zero_grad(g->params);
    ag_ctx_reset(ctx);
    return L;
}

START_TEST(test_gpt_overfits_one_batch)
{
    enum { V = 10, Bn = 4, Tn = 8 };
    ag_gpt *g = gpt_new(V, 2, 2, 32, Tn, 0, 8);
    int data[Bn * (Tn + 1)], x[Bn * Tn], y[Bn * Tn];
    random_ids(data, Bn * (Tn + 1), V, 17);
    for (int b = 0; b < Bn; b++) data[b * (Tn + 1)] = b; /* distinct first tokens: every target is learnable */
    for (int b = 0; b < Bn; b++)
        for (int t = 0; t < Tn; t++) {
            x[b * Tn + t] = data[b * (Tn + 1) + t];
            y[b * Tn + t] = data[b * (Tn + 1) + t + 1];
        }
    ag_ctx *ctx = ag_ctx_new();
    double first = 0, L = 0;
    int steps = 0;
    for (long t = 1; t <= 400; t++) {
        L = train_step(ctx, g, x, y, Bn, Tn, 1e-2, t);
        if (t == 1) first = L;
        steps = (int)t;
        if (L < 0.05) break;
    }
    ck_assert_double_eq_tol(first, log((double)V), 0.1);
    ck_assert_msg(L < 0.1, "loss %g after %d steps", L, steps);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

START_TEST(test_arena_stops_growing)
{
    enum { V = 65, Bn = 8, Tn = 32 };
    ag_gpt *g = gpt_new(V, 2, 4, 64, Tn, 0.1, 5); /* several MiB a step: more than one chunk */
    int x[Bn * Tn], y[Bn * Tn];
    random_ids(x, Bn * Tn, V, 1);
    random_ids(y, Bn * Tn, V, 2);
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_stats s[4];
    for (int t = 1; t <= 3; t++) {
        train_step(ctx, g, x, y, Bn, Tn, 1e-3, t);
        s[t] = ag_ctx_get_stats(ctx);
    }
    ck_assert_uint_gt(s[1].arena_high_water, (size_t)1 << 20);
#ifdef AG_ARENA_DEBUG
    /* the ASan build mallocs every block: then every step makes the same blocks */
    ck_assert_uint_eq(s[3].chunk_mallocs - s[2].chunk_mallocs, s[2].chunk_mallocs - s[1].chunk_mallocs);
#else
    /* step 1's reset coalesces its chunks into one; from then on nothing is allocated */
    ck_assert_uint_eq(s[3].chunk_mallocs, s[2].chunk_mallocs);
    ck_assert_uint_eq(s[3].arena_capacity, s[2].arena_capacity);
#endif
    ck_assert_uint_eq(s[3].arena_high_water, s[1].arena_high_water);
    ck_assert_uint_eq(s[2].arena_high_water, s[1].arena_high_water);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

// --- the KV cache ---

START_TEST(test_kv_cache_matches_full_forward)
{
    enum { V = 7, TM = 8 };
    ag_gpt *g = gpt_new(V, 2, 2, 16, TM, 0.1, 3); /* dropout is off when sampling */
    gc_randomize_params(g->params, 4);
    int ids[TM];
    random_ids(ids, TM, V, 5);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *full = ag_gpt_forward(ctx, g, ids, NULL, 1, TM, NULL, NULL); // [1,TM,V]
    ck_assert_ptr_nonnull(full);
    ag_kv_cache *kv = ag_kv_cache_new(g);
    ck_assert_ptr_nonnull(kv);
    for (int round = 0; round < 2; round++) { /* the second round after ag_kv_cache_clear */
        double worst = 0;
        for (int p = 0; p < TM; p++) {
            ag_tensor *lg = ag_gpt_forward_cached(ctx, g, kv, ids[p]); // [V]
            ck_assert_msg(lg != NULL, "%s", ag_ctx_error(ctx));
            ck_assert_int_eq(lg->ndim, 1);
            ck_assert_int_eq(lg->shape[0], V);
            ck_assert_int_eq(kv->len, p + 1);
            for (int v = 0; v < V; v++) worst = fmax(worst, fabs(lg->data[v] - full->data[p * V + v]));
        }
        ck_assert_msg(worst < KV_TOL, "round %d: max |cached - full| = %g", round, worst);
        ck_assert(ag_ctx_grad_enabled(ctx));                        /* grad mode restored */
        /* the cache is full: an error, and the cache is unchanged */
        ck_assert_ptr_null(ag_gpt_forward_cached(ctx, g, kv, ids[0]));
        ck_assert_ptr_nonnull(strstr(ag_ctx_error(ctx), "full"));
        ck_assert_int_eq(kv->len, TM);
        ag_ctx_clear_error(ctx);
        ag_kv_cache_clear(kv);
        ck_assert_int_eq(kv->len, 0);
    }
    ag_kv_cache_free(kv);
    ag_kv_cache_free(NULL);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

// --- the options of one forward call ---

typedef struct {
    int fused, softmax;   /* "attention" nodes (the fused kernel), "softmax" nodes (op by op) */
} op_count;

static void count_ops(const ag_node *n, void *user)
{
    op_count *c = user;
    if (strcmp(n->op->name, "attention") == 0) c->fused++;
    if (strcmp(n->op->name, "softmax") == 0) c->softmax++;
}

/* Logits of g on ids [2,T] with opts, in a ctx of their own (*ctx, freed by the caller). */
static ag_tensor *logits_with(ag_ctx **ctx, ag_gpt *g, const int *ids, int T, const ag_forward_opts *opts,
                              op_count *ops)
{
    *ctx = ag_ctx_new();
    ag_tensor *y = ag_gpt_forward(*ctx, g, ids, NULL, 2, T, opts, NULL);            // [2,T,V]
    ck_assert_msg(y != NULL, "%s", ag_ctx_error(*ctx));
    *ops = (op_count){ 0 };
    ag_tape_foreach(*ctx, count_ops, ops);
    return y;
}

/* ag_forward_opts is honoured, and the model is left as it was: NULL and { 0 } are evaluation
 * (fused attention); composed_attention takes the op-by-op path with the same logits;
 * record_attention fills one slot per layer with causal weights; a cache is refused. */
START_TEST(test_forward_opts_honoured)
{
    enum { V = 7, L = 2, H = 2, T = 5 };
    ag_gpt *g = gpt_new(V, L, H, 16, 8, 0.1, 3);   /* dropout 0.1: only with .train */
    gc_randomize_params(g->params, 4);
    int ids[2 * T];
    random_ids(ids, 2 * T, V, 5);
    ag_ctx *c0, *c1, *c2, *c3;
    op_count n0, n1, n2, n3;
    ag_tensor *y0 = logits_with(&c0, g, ids, T, NULL, &n0);
    ag_tensor *y1 = logits_with(&c1, g, ids, T, &(ag_forward_opts){ 0 }, &n1);
    ag_tensor *y2 = logits_with(&c2, g, ids, T, &(ag_forward_opts){ .composed_attention = true }, &n2);
    ag_tensor *A[L] = { NULL, NULL };
    ag_tensor *y3 = logits_with(&c3, g, ids, T, &(ag_forward_opts){ .record_attention = A }, &n3);
    /* no fast twin on the reference table (AG_KERNELS=reference, a REFERENCE=1 library): op by op */
    const int fast = !ag_ctx_reference_kernels(c0);
    ck_assert(n0.fused == fast * L && n0.softmax == (1 - fast) * L);
    ck_assert(n1.fused == fast * L && n1.softmax == (1 - fast) * L);
    ck_assert(n2.fused == 0 && n2.softmax == L && n3.fused == 0 && n3.softmax == L);
    double d01 = 0, d02 = 0, d03 = 0;
    for (size_t i = 0; i < ag_numel(y0); i++) {
        d01 = fmax(d01, fabs(y0->data[i] - y1->data[i]));
        d02 = fmax(d02, fabs(y0->data[i] - y2->data[i]));
        d03 = fmax(d03, fabs(y0->data[i] - y3->data[i]));
    }
    ck_assert(d01 == 0);
    ck_assert_msg(d02 < KV_TOL && d03 < KV_TOL, "fused vs composed %g, vs recording %g", d02, d03);
    for (int l = 0; l < L; l++) {
        ck_assert_ptr_nonnull(A[l]);
        ck_assert(A[l]->ndim == 4 && A[l]->shape[0] == 2 && A[l]->shape[1] == H && A[l]->shape[2] == T);
        for (int r = 0; r < 2 * H * T; r++) {   /* each row: sums to 1, nothing after its own position */
            const ag_real *row = A[l]->data + (size_t)r * T;
            double sum = 0;
            for (int j = 0; j < T; j++) sum += row[j];
            ck_assert_double_eq_tol(sum, 1, 1e-5);
            for (int j = r % T + 1; j < T; j++) ck_assert(row[j] == 0);
        }
        ck_assert(!g->blocks[l].attn.composed);   /* per call: the model is not touched */
    }
    /* .train turns dropout on (0.1 here), from .seed */
    ag_tensor *yt = ag_gpt_forward(c0, g, ids, NULL, 2, T, &(ag_forward_opts){ .train = true, .seed = 9 }, NULL);
    ck_assert_ptr_nonnull(yt);
    double dt = 0;
    for (size_t i = 0; i < ag_numel(y0); i++) dt = fmax(dt, fabs(y0->data[i] - yt->data[i]));
    ck_assert(dt > 1e-3);
    /* a cache belongs to ag_gpt_forward_cached */
    ag_kv_cache *kv = ag_kv_cache_new(g);
    ck_assert_ptr_null(ag_gpt_forward(c1, g, ids, NULL, 1, 1, &(ag_forward_opts){ .cache = kv }, NULL));
    ck_assert_int_eq(ag_ctx_status(c1), AG_ERR_ARG);
    ck_assert_int_eq(kv->len, 0);
    ag_kv_cache_free(kv);
    ag_ctx_free(c0);
    ag_ctx_free(c1);
    ag_ctx_free(c2);
    ag_ctx_free(c3);
    ag_gpt_free(g);
}
END_TEST

/* One block, run position by position through the KV cache (opts.cache, opts.layer), gives
 * the full forward's rows, and the attention weights it records are the full weights' row p
 * (keys 0..p). Post-LN with RMSNorm too: the cached step is the same ag_block_forward. */
static void check_block_cached(ag_norm_position pos, ag_norm_kind norm)
{
    enum { V = 7, L = 2, H = 2, C = 16, T = 6 };
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = L, .n_head = H, .n_embd = C, .block_size = 8,
                          .norm_position = pos, .norm = norm };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, 11, &err);
    ck_assert_msg(g != NULL, "%s", err.msg);
    gc_randomize_params(g->params, 12);
    const ag_block *Bk = &g->blocks[1];
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_grad(ctx, false);
    ag_tensor *x = ag_tensor_new3(ctx, 1, T, C);                                   // [1,T,C]
    for (int i = 0; i < T * C; i++) x->data[i] = (ag_real)sin(0.37 * i + 1);
    ag_tensor *A[L] = { NULL, NULL };
    ag_tensor *full = ag_block_forward(ctx, Bk, x, ag_causal_mask(ctx, T), 0,
                                       &(ag_forward_opts){ .record_attention = A, .layer = 1 }); // [1,T,C]
    ck_assert_msg(full != NULL && A[1] != NULL && A[0] == NULL, "%s", ag_ctx_error(ctx));
    ag_kv_cache *kv = ag_kv_cache_new(g);
    double worst = 0, worst_a = 0;
    for (int p = 0; p < T; p++) {
        ag_tensor *xp = ag_tensor_new3(ctx, 1, 1, C);                              // [1,1,C] position p
        memcpy(xp->data, x->data + (size_t)p * C, C * sizeof(ag_real));
        ag_tensor *Ap[L] = { NULL, NULL };
        const ag_forward_opts step = { .cache = kv, .layer = 1, .record_attention = Ap };
        ag_tensor *y = ag_block_forward(ctx, Bk, xp, NULL, 0, &step);              // [1,1,C]
        ck_assert_msg(y != NULL, "%s", ag_ctx_error(ctx));
        ck_assert(Ap[1]->shape[1] == H && Ap[1]->shape[2] == 1 && Ap[1]->shape[3] == p + 1); // [1,H,1,p+1]
        for (int c = 0; c < C; c++) worst = fmax(worst, fabs(y->data[c] - full->data[p * C + c]));
        for (int h = 0; h < H; h++)
            for (int j = 0; j <= p; j++)
                worst_a = fmax(worst_a, fabs(Ap[1]->data[h * (p + 1) + j] - A[1]->data[(h * T + p) * T + j]));
        kv->len++;   /* the block stores position p; ag_gpt_forward_cached advances after all layers */
    }
    ck_assert_msg(worst < KV_TOL && worst_a < KV_TOL, "cached vs full: out %g, weights %g", worst, worst_a);
    /* the cache is for no-grad passes and for layers it has */
    ag_kv_cache_clear(kv);
    ag_ctx_set_grad(ctx, true);
    ck_assert_ptr_null(ag_block_forward(ctx, Bk, x, NULL, 0, &(ag_forward_opts){ .cache = kv }));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_ARG);
    ag_ctx_clear_error(ctx);
    ag_ctx_set_grad(ctx, false);
    ag_tensor *x0 = ag_tensor_new3(ctx, 1, 1, C);                                  // [1,1,C]
    ck_assert_ptr_null(ag_block_forward(ctx, Bk, x0, NULL, 0, &(ag_forward_opts){ .cache = kv, .layer = L }));
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ag_kv_cache_free(kv);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}

START_TEST(test_block_cached_equals_full)
{
    check_block_cached(AG_PRE_LN, AG_LAYERNORM);
    check_block_cached(AG_POST_LN, AG_RMSNORM);
}
END_TEST

/* Gradient recycling (ag_ctx_set_recycle_grads) changes where gradients live, never what they
 * are: the parameters' gradients of one step are bit-identical with it on and off, through the
 * fused attention and the op-by-op one (split/merge heads, transpose, masked_fill, softmax,
 * reshape views), and the step needs less arena memory. */
START_TEST(test_recycled_gradients_are_identical)
{
    int V = 11, B = 3, T = 8;
    ag_gpt *g = gpt_new(V, 2, 2, 16, T, 0, 21);
    gc_randomize_params(g->params, 22);
    ag_params *P = g->params;
    int ids[24], tg[24];
    for (int i = 0; i < B * T; i++) {
        ids[i] = (i * 7 + 3) % V;
        tg[i] = (i * 5 + 1) % V;
    }
    ag_real *plain = malloc(P->total * sizeof(ag_real));
    ck_assert_ptr_nonnull(plain);
    for (int composed = 0; composed < 2; composed++) {
        const ag_forward_opts fo = { .train = true, .composed_attention = composed };
        size_t high[2];
        for (int recycle = 0; recycle < 2; recycle++) {
            ag_ctx *ctx = ag_ctx_new();
            ag_ctx_set_recycle_grads(ctx, recycle);
            ag_params_zero_grad(P);
            ag_tensor *loss = NULL;
            ag_tensor *logits = ag_gpt_forward(ctx, g, ids, tg, B, T, &fo, &loss); // [B,T,V]
            ck_assert_ptr_nonnull(loss);
            ck_assert_int_eq(ag_backward(ctx, loss), AG_OK);
            /* an op's output keeps its gradient only without recycling */
            ck_assert(recycle ? logits->grad == NULL : logits->grad != NULL);
            if (!recycle) memcpy(plain, P->grad, P->total * sizeof(ag_real));
            else ck_assert_msg(memcmp(plain, P->grad, P->total * sizeof(ag_real)) == 0,
                               "recycled gradients differ (composed %d)", composed);
            high[recycle] = ag_ctx_get_stats(ctx).arena_high_water;
            ag_ctx_free(ctx);
        }
#ifndef AG_ARENA_DEBUG /* the sanitizer build poisons released buffers instead of reusing them */
        ck_assert_uint_lt(high[1], high[0]);
#else
        (void)high;
#endif
    }
    free(plain);
    ag_gpt_free(g);
}
END_TEST

Suite *gpt_suite(void)
{
    Suite *s = suite_create("gpt");
    TCase *m = tcase_create("model");
    tcase_set_tags(m, "gpt");
    ADD_TESTS(m, test_gpt_params_as_model_md, test_no_embedding_decay, test_gpt_bad_config, test_gpt_new_says_why, test_splitmix64,
                 test_gpt_untrained_loss_is_ln_v, test_gpt_tape_scopes, test_gpt_dropout,
                 test_kv_cache_matches_full_forward, test_forward_opts_honoured,
                 test_block_cached_equals_full);
    suite_add_tcase(s, m);
    TCase *g = tcase_create("grad");
    tcase_set_tags(g, "gpt");
    tcase_set_timeout(g, 600);
    ADD_TESTS(g, test_gpt_loss_grad, test_gpt_loss_grad_dropout, test_recycled_gradients_are_identical);
    suite_add_tcase(s, g);
    TCase *t = tcase_create("train");
    tcase_set_tags(t, "gpt adam");
    tcase_set_timeout(t, 600);
    ADD_TESTS(t, test_gpt_overfits_one_batch, test_arena_stops_growing);
    suite_add_tcase(s, t);
    return s;
}
