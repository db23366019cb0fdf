/* test_switches.c -- the switches of ag_gpt_config (issue 6, "compare what the tutorials argue
 * about"): each changes what it should and nothing else.
 *
 *   - the defaults are MODEL.md's (scale 1/sqrt(D), mask fill -inf, fused attention, Pre-LN);
 *   - no_scale changes the logits, and the fused kernel agrees with the composed path on it;
 *   - mask_fill -1e9 gives exactly the weights and logits of -inf on a causal mask;
 *   - a Post-LN block's output is normalised (mean 0, variance 1 with LayerNorm; rms 1 with
 *     RMSNorm), a Pre-LN block's is not;
 *   - xavier draws every Linear weight inside [-a, a], a = sqrt(6 / (fan_in + fan_out)), with
 *     the variance a^2/3, and leaves embeddings at N(0, 0.02);
 *   - RMSNorm and SwiGLU build under MODEL.md-style names (ln1/ln2/ln_f weight only,
 *     mlp.w_gate/w_up/w_down of width round(8C/3));
 *   - whole-model gradient checks of the loss for Post-LN + RMSNorm + SwiGLU, and for Post-LN
 *     + no_scale + mask fill -1e9 (the composed path);
 *   - the KV cache runs the same blocks, so its logits are the full forward's for every switch.
 * Sizes follow tests/test_gpt.c: V=5, n_layer 2, n_head 2, n_embd 8, block_size 4, B=2, T=3. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define TOL 1e-10
#else
#define TOL 2e-5
#endif

static ag_gpt *gpt_with(ag_gpt_config cfg, uint64_t seed)
{
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, seed, &err);
    ck_assert_msg(g != NULL, "ag_gpt_new: %s", err.msg);
    return g;
}

static ag_gpt_config small_cfg(void)
{
    return (ag_gpt_config){ .vocab_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 4 };
}

static const int ids[6] = { 0, 3, 1, 4, 2, 2 }, targets[6] = { 3, 1, 4, 2, 2, 0 };

static double max_diff(const ag_tensor *a, const ag_tensor *b)
{
    ck_assert_uint_eq(ag_numel(a), ag_numel(b));
    double m = 0;
    for (size_t i = 0; i < ag_numel(a); i++) m = fmax(m, fabs((double)a->data[i] - (double)b->data[i]));
    return m;
}

// --- defaults and the attention switches ---

START_TEST(test_defaults_are_model_md)
{
    ag_gpt *g = gpt_with(small_cfg(), 1);
    const ag_mha *A = &g->blocks[0].attn;
    ck_assert(A->scale == (ag_real)(1.0 / sqrt(4.0)));              /* D = 8/2 */
    ck_assert(A->mask_fill == -INFINITY);
    ck_assert(!A->composed);
    ck_assert_int_eq(g->blocks[1].norm_position, AG_PRE_LN);
    ck_assert_int_eq(g->blocks[1].norm, AG_LAYERNORM);
    ck_assert_int_eq(g->blocks[1].mlp.kind, AG_MLP_GELU);
    ag_gpt_free(g);

    /* an enum outside its range is refused with a message naming the field */
    const char *word[5] = { "norm_position", "norm", "mlp", "init", "mask_fill" };
    for (int k = 0; k < 5; k++) {
        ag_gpt_config c = small_cfg();
        if (k == 0) c.norm_position = 7;
        if (k == 1) c.norm = 7;
        if (k == 2) c.mlp = 7;
        if (k == 3) c.init = 7;
        if (k == 4) c.mask_fill = 7;
        ag_error err = { 0 };
        ck_assert_ptr_null(ag_gpt_new(&c, 1, &err));
        ck_assert_msg(strstr(err.msg, word[k]) != NULL, "%s", err.msg);
    }
}
END_TEST

/* logits [B,T,V] of g on the fixed batch, in ctx (opts NULL: evaluation) */
static ag_tensor *logits_of(ag_ctx *ctx, ag_gpt *g, const ag_forward_opts *opts)
{
    ag_tensor *y = ag_gpt_forward(ctx, g, ids, NULL, 2, 3, opts, NULL);
    ck_assert_msg(y != NULL, "%s", ag_ctx_error(ctx));
    return y;
}

START_TEST(test_no_scale)
{
    ag_gpt_config c = small_cfg();
    ag_gpt *a = gpt_with(c, 3);
    c.no_scale = true;
    ag_gpt *b = gpt_with(c, 3);
    ck_assert(b->blocks[0].attn.scale == 1);
    gc_randomize_params(a->params, 4);
    memcpy(b->params->data, a->params->data, a->params->total * sizeof(ag_real));
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *ya = logits_of(ctx, a, NULL), *yb = logits_of(ctx, b, NULL);
    ck_assert_msg(max_diff(ya, yb) > 1e-3, "no_scale did not change the logits (%g)", max_diff(ya, yb));
    /* and the fused kernel (scale 1) agrees with the op-by-op path */
    ag_tensor *yc = logits_of(ctx, b, &(ag_forward_opts){ .composed_attention = true });
    ck_assert_msg(max_diff(yb, yc) < TOL, "fused vs composed with no_scale: %g", max_diff(yb, yc));
    ag_ctx_free(ctx);
    ag_gpt_free(a);
    ag_gpt_free(b);
}
END_TEST

/* -1e9 or -inf before the softmax: exp(-1e9 - max) is exactly 0 in float and in double, so the
 * weights (and everything after them) are the same to the last bit on a causal mask. */
START_TEST(test_mask_fill_minus_1e9_equals_minus_inf)
{
    ag_gpt_config c = small_cfg();
    ag_gpt *a = gpt_with(c, 5);
    c.mask_fill = AG_MASK_NEG_1E9;
    ag_gpt *b = gpt_with(c, 5);
    ck_assert(b->blocks[1].attn.mask_fill == (ag_real)-1e9);
    gc_randomize_params(a->params, 6);
    memcpy(b->params->data, a->params->data, a->params->total * sizeof(ag_real));
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *wa[2], *wb[2];
    /* recording takes the composed path for both: only the fill differs */
    ag_tensor *ya = logits_of(ctx, a, &(ag_forward_opts){ .record_attention = wa });
    ag_tensor *yb = logits_of(ctx, b, &(ag_forward_opts){ .record_attention = wb });
    for (int l = 0; l < 2; l++) {
        ck_assert_int_eq(wa[l]->ndim, 4);                         /* [B,H,T,T] */
        ck_assert_int_eq(wa[l]->shape[1], 2);
        ck_assert_msg(max_diff(wa[l], wb[l]) == 0, "layer %d: weights differ by %g", l, max_diff(wa[l], wb[l]));
        for (int b0 = 0; b0 < 2 * 2; b0++)                        /* above the diagonal: exactly 0 */
            for (int i = 0; i < 3; i++)
                for (int j = i + 1; j < 3; j++) ck_assert(wb[l]->data[(b0 * 3 + i) * 3 + j] == 0);
    }
    ck_assert(max_diff(ya, yb) == 0);
    ag_ctx_free(ctx);
    ag_gpt_free(a);
    ag_gpt_free(b);
}
END_TEST

// --- Post-LN, RMSNorm, SwiGLU ---

/* The block output of x [2,3,8] random, with the block's init weights (norm weight 1, bias 0). */
static void block_rows(ag_norm_position pos, ag_norm_kind norm, double *worst_mean, double *worst_var, double *worst_rms)
{
    ag_params *P = ag_params_new();
    ag_block Bk;
    ag_block_opts o = { pos, norm, AG_MLP_GELU };
    ck_assert_int_eq(ag_block_init(&Bk, P, "blocks.0", 8, 2, &o, 0.5, 0.5), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 7);
    int shape[3] = { 2, 3, 8 };
    ag_tensor *x = gc_tensor_new(3, shape, 8, -3, 5);              /* far from normalised */
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *mask = ag_causal_mask(ctx, 3);
    ag_tensor *y = ag_block_forward(ctx, &Bk, x, mask, 0, NULL);    // [2,3,8]
    ck_assert_msg(y != NULL, "%s", ag_ctx_error(ctx));
    *worst_mean = *worst_var = *worst_rms = 0;
    for (int r = 0; r < 6; r++) {
        double m = 0, v = 0, q = 0;
        for (int c = 0; c < 8; c++) m += y->data[r * 8 + c] / 8;
        for (int c = 0; c < 8; c++) {
            double d = y->data[r * 8 + c] - m;
            v += d * d / 8;
            q += (double)y->data[r * 8 + c] * y->data[r * 8 + c] / 8;
        }
        *worst_mean = fmax(*worst_mean, fabs(m));
        *worst_var = fmax(*worst_var, fabs(v - 1));
        *worst_rms = fmax(*worst_rms, fabs(sqrt(q) - 1));
    }
    ag_ctx_free(ctx);
    gc_tensor_free(x);
    ag_params_free(P);
}

START_TEST(test_post_ln_output_is_normalised)
{
    double m, v, q;
    block_rows(AG_POST_LN, AG_LAYERNORM, &m, &v, &q);
    ck_assert_msg(m < 1e-4 && v < 1e-3, "Post-LN rows: |mean| %g, |var - 1| %g", m, v);  /* eps 1e-5 */
    block_rows(AG_POST_LN, AG_RMSNORM, &m, &v, &q);
    ck_assert_msg(q < 1e-3, "Post-RMSNorm rows: |rms - 1| %g", q);
    block_rows(AG_PRE_LN, AG_LAYERNORM, &m, &v, &q);
    ck_assert_msg(m > 0.1 || v > 0.1, "a Pre-LN block's output is the residual stream, not normalised");
}
END_TEST

START_TEST(test_rmsnorm_swiglu_names)
{
    ag_gpt_config c = small_cfg();
    c.n_layer = 1;
    c.norm = AG_RMSNORM;
    c.mlp = AG_MLP_SWIGLU;
    ag_gpt *g = gpt_with(c, 9);
    int F = ag_swiglu_width(8);
    ck_assert_int_eq(F, 21);                                         /* round(64/3) */
    ck_assert_int_eq(ag_swiglu_width(64), 171);
    ck_assert_int_eq(ag_swiglu_width(3), 8);
    const struct { const char *name; int d0, d1; } want[] = {
        { "tok_emb.weight", 5, 8 }, { "pos_emb.weight", 4, 8 }, { "blocks.0.ln1.weight", 8, 0 },
        { "blocks.0.attn.w_q.weight", 8, 8 }, { "blocks.0.attn.w_q.bias", 8, 0 },
        { "blocks.0.attn.w_k.weight", 8, 8 }, { "blocks.0.attn.w_k.bias", 8, 0 },
        { "blocks.0.attn.w_v.weight", 8, 8 }, { "blocks.0.attn.w_v.bias", 8, 0 },
        { "blocks.0.attn.w_o.weight", 8, 8 }, { "blocks.0.attn.w_o.bias", 8, 0 },
        { "blocks.0.ln2.weight", 8, 0 },
        { "blocks.0.mlp.w_gate.weight", F, 8 }, { "blocks.0.mlp.w_gate.bias", F, 0 },
        { "blocks.0.mlp.w_up.weight", F, 8 }, { "blocks.0.mlp.w_up.bias", F, 0 },
        { "blocks.0.mlp.w_down.weight", 8, F }, { "blocks.0.mlp.w_down.bias", 8, 0 },
        { "ln_f.weight", 8, 0 }, { "lm_head.weight", 5, 8 }, { "lm_head.bias", 5, 0 },
    };
    const ag_params *P = g->params;
    ck_assert_int_eq(P->n, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i < P->n; i++) {
        const ag_tensor *t = P->entries[i].t;
        ck_assert_str_eq(t->name, want[i].name);
        ck_assert_int_eq(t->ndim, want[i].d1 ? 2 : 1);
        ck_assert_int_eq(t->shape[0], want[i].d0);
        if (want[i].d1) ck_assert_int_eq(t->shape[1], want[i].d1);
    }
    ck_assert_ptr_null(ag_params_find(P, "ln_f.bias"));
    ck_assert_ptr_null(ag_params_find(P, "blocks.0.mlp.fc1.weight"));
    ag_tensor *loss = NULL;
    ag_ctx *ctx = ag_ctx_new();
    ck_assert_ptr_nonnull(ag_gpt_forward(ctx, g, ids, targets, 2, 3, &(ag_forward_opts){ .train = true }, &loss));
    ck_assert_double_eq_tol(loss->data[0], log(5.0), 0.1);         /* small init: nearly uniform */
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

/* --init xavier: every Linear weight U(-a, a) with a = sqrt(6 / (in + out)); embeddings as before. */
START_TEST(test_xavier_init)
{
    ag_gpt_config c = { .vocab_size = 65, .n_layer = 2, .n_head = 4, .n_embd = 64, .block_size = 32 };
    c.init = AG_WEIGHTS_XAVIER;
    ag_gpt *g = gpt_with(c, 11);
    c.init = AG_WEIGHTS_NORMAL;
    ag_gpt *n = gpt_with(c, 11);
    const ag_params *P = g->params;
    int linear = 0;
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        const char *nm = t->name;
        size_t len = strlen(nm), N = ag_numel(t);
        bool weight2d = t->ndim == 2 && strcmp(nm + len - 7, ".weight") == 0;
        bool emb = strstr(nm, "_emb.") != NULL;
        double s = 0, s2 = 0, mx = 0;
        for (size_t i = 0; i < N; i++) {
            s += t->data[i];
            s2 += (double)t->data[i] * t->data[i];
            mx = fmax(mx, fabs(t->data[i]));
        }
        double std = sqrt(s2 / N - (s / N) * (s / N));
        if (weight2d && !emb) {   /* a Linear weight [out, in] */
            linear++;
            double a = sqrt(6.0 / (t->shape[0] + t->shape[1]));
            ck_assert_msg(mx <= a, "%s: |w| %g > a %g", nm, mx, a);
            ck_assert_msg(mx > 0.9 * a, "%s: max |w| %g, far inside a %g", nm, mx, a);
            ck_assert_msg(fabs(std - a / sqrt(3.0)) < 0.1 * a / sqrt(3.0), "%s: std %g, want %g", nm, std,
                          a / sqrt(3.0));
        } else {                  /* embeddings, biases, LayerNorm: untouched */
            const ag_tensor *u = ag_params_find(n->params, nm);
            ck_assert_int_eq(memcmp(t->data, u->data, N * sizeof(ag_real)), 0);
        }
    }
    ck_assert_int_eq(linear, 2 * 6 + 1);   /* w_q, w_k, w_v, w_o, fc1, fc2 per block, lm_head */
    ag_gpt_free(g);
    ag_gpt_free(n);

    /* xavier with SwiGLU reaches w_gate, w_up, w_down */
    c.init = AG_WEIGHTS_XAVIER;
    c.mlp = AG_MLP_SWIGLU;
    g = gpt_with(c, 11);
    const ag_tensor *wd = ag_params_find(g->params, "blocks.1.mlp.w_down.weight");
    double a = sqrt(6.0 / (64 + ag_swiglu_width(64))), mx = 0;
    for (size_t i = 0; i < ag_numel(wd); i++) mx = fmax(mx, fabs(wd->data[i]));
    ck_assert(mx <= a && mx > 0.9 * a);
    ag_gpt_free(g);
}
END_TEST

// --- whole-model gradient checks with the switches ---

typedef struct {
    ag_gpt *g;
} gpt_case;

static ag_tensor *build_loss(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)in;   /* the inputs are the model's own parameters */
    gpt_case *c = user;
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, c->g, ids, targets, 2, 3, &(ag_forward_opts){ .train = true, .seed = 1234 }, &loss);
    return loss;                                                    // [1]
}

static void check_grad(ag_gpt_config cfg, const char *name)
{
    gpt_case c = { gpt_with(cfg, 21) };
    gc_randomize_params(c.g->params, 22);
    ag_params *P = c.g->params;
    ag_tensor *in[64];
    ck_assert_int_le(P->n, 64);
    for (int e = 0; e < P->n; e++) in[e] = P->entries[e].t;
    gc_opts o = gc_defaults(name);
    GC_ASSERT(&o, build_loss, in, P->n, &c);
    ag_gpt_free(c.g);
}

START_TEST(test_grad_post_rmsnorm_swiglu)
{
    ag_gpt_config c = small_cfg();
    c.norm_position = AG_POST_LN;
    c.norm = AG_RMSNORM;
    c.mlp = AG_MLP_SWIGLU;
    check_grad(c, "gpt loss, Post-LN + RMSNorm + SwiGLU");
}
END_TEST

/* RoPE in every block, keys' bias trained: q and k turned before the scores, fused attention */
START_TEST(test_grad_rope)
{
    ag_gpt_config c = small_cfg();
    c.rope = true;
    check_grad(c, "gpt loss, RoPE");
    c.composed_attention = true;
    check_grad(c, "gpt loss, RoPE, attention op by op");
}
END_TEST

START_TEST(test_grad_post_noscale_1e9)
{
    ag_gpt_config c = small_cfg();
    c.norm_position = AG_POST_LN;
    c.no_scale = true;
    c.mask_fill = AG_MASK_NEG_1E9;
    c.init = AG_WEIGHTS_XAVIER;
    check_grad(c, "gpt loss, Post-LN + no_scale + mask fill -1e9");
}
END_TEST

// --- the KV cache, through the same blocks, for every configuration ---

static void check_kv_cache_exact(ag_gpt_config c)
{
    ag_gpt *g = gpt_with(c, 3);
    gc_randomize_params(g->params, 4);
    int seq[8] = { 1, 4, 6, 0, 2, 2, 5, 3 };
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *full = ag_gpt_forward(ctx, g, seq, NULL, 1, 8, NULL, NULL);     // [1,8,V]
    ck_assert_ptr_nonnull(full);
    ag_kv_cache *kv = ag_kv_cache_new(g);
    double worst = 0;
    for (int p = 0; p < 8; p++) {
        ag_tensor *lg = ag_gpt_forward_cached(ctx, g, kv, seq[p]);                 // [V]
        ck_assert_msg(lg != NULL, "%s", ag_ctx_error(ctx));
        for (int v = 0; v < 7; v++) worst = fmax(worst, fabs(lg->data[v] - full->data[p * 7 + v]));
    }
    ck_assert_msg(worst < TOL * 10, "cached vs full: %g", worst);
    ag_kv_cache_free(kv);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}

START_TEST(test_kv_cache_exact_for_every_switch)
{
    ag_gpt_config c = { .vocab_size = 7, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8 };
    c.mlp = AG_MLP_SWIGLU;
    c.mask_fill = AG_MASK_NEG_1E9;
    check_kv_cache_exact(c);
    c.no_scale = true; /* and without the 1/sqrt(D) */
    check_kv_cache_exact(c);
    /* the norms come from ag_block_forward itself: Post-LN and RMSNorm, alone and together */
    c = (ag_gpt_config){ .vocab_size = 7, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8 };
    c.norm = AG_RMSNORM;
    check_kv_cache_exact(c);
    c.norm = AG_LAYERNORM;
    c.norm_position = AG_POST_LN;
    check_kv_cache_exact(c);
    c.norm = AG_RMSNORM;
    c.mlp = AG_MLP_SWIGLU;
    c.composed_attention = true;
    check_kv_cache_exact(c);
    /* RoPE: the cached position is turned by its own index, cache->len */
    c = (ag_gpt_config){ .vocab_size = 7, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8, .rope = true };
    check_kv_cache_exact(c);
    c.composed_attention = true;
    check_kv_cache_exact(c);
}
END_TEST

Suite *switches_suite(void)
{
    Suite *s = suite_create("switches");
    TCase *m = tcase_create("model");
    ADD_TESTS(m, test_defaults_are_model_md, test_no_scale, test_mask_fill_minus_1e9_equals_minus_inf,
                 test_post_ln_output_is_normalised, test_rmsnorm_swiglu_names, test_xavier_init,
                 test_kv_cache_exact_for_every_switch);
    suite_add_tcase(s, m);
    TCase *g = tcase_create("grad");
    tcase_set_timeout(g, 600);
    ADD_TESTS(g, test_grad_post_rmsnorm_swiglu, test_grad_post_noscale_1e9, test_grad_rope);
    suite_add_tcase(s, g);
    return s;
}
