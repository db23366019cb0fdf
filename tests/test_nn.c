/* test_nn.c -- the layers of src/nn: Linear, Embedding and LayerNorm registration and forward,
 * the first weight that is not finite (ag_params_nonfinite), multi-head causal self-attention
 * (known values, causality, a whole-layer gradient check) and the Pre-LN block (identity when
 * its branches are zero, whole-block gradient checks with and without dropout).
 *
 * Gradient checks use MODEL.md's distinct sizes B=2, T=3, C=8, H=2 (D=4), so a missing
 * transpose or a head mix-up fails. Parameters are set to O(1) random values first: at the
 * real init (std 0.02) attention is almost uniform and a wrong gradient could hide. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define TOL 1e-12
#else
#define TOL 1e-5
#endif

enum { B = 2, T = 3, C = 8, H = 2 };

/* The parameters of P plus an extra leading input x, as gradcheck inputs. */
static int params_as_inputs(ag_tensor **in, ag_tensor *x, const ag_params *P)
{
    int n = 0;
    if (x) in[n++] = x;
    for (int e = 0; e < P->n; e++) in[n++] = P->entries[e].t;
    return n;
}

static void assert_entry(const ag_params *P, int i, const char *name, int ndim, const int *shape, bool decay)
{
    ck_assert_int_lt(i, P->n);
    const ag_param_entry *e = &P->entries[i];
    ck_assert_str_eq(e->t->name, name);
    ck_assert_int_eq(e->t->ndim, ndim);
    for (int d = 0; d < ndim; d++) ck_assert_int_eq(e->t->shape[d], shape[d]);
    ck_assert_msg(e->decay == decay, "%s: decay %d", name, e->decay);
}

// --- Linear, Embedding, LayerNorm layers ---

START_TEST(test_linear_layer)
{
    ag_params *P = ag_params_new();
    ag_linear_layer L, L2;
    ck_assert_int_eq(ag_linear_layer_init(&L, P, "fc", 2, 3, true, 0.02), AG_OK);
    ck_assert_int_eq(ag_linear_layer_init(&L2, P, "proj", 3, 2, false, 0.02), AG_OK);
    ck_assert_int_eq(ag_linear_layer_init(&L2, P, "fc", 2, 3, true, 0.02), AG_ERR_ARG); /* duplicate */
    ck_assert_int_eq(ag_linear_layer_init(&L2, P, "bad", 0, 3, true, 0.02), AG_ERR_ARG);
    ck_assert_int_eq(P->n, 3);
    assert_entry(P, 0, "fc.weight", 2, (int[]){ 3, 2 }, true);
    assert_entry(P, 1, "fc.bias", 1, (int[]){ 3 }, false);
    assert_entry(P, 2, "proj.weight", 2, (int[]){ 2, 3 }, true);
    ck_assert_ptr_null(L2.b);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 1);
    ck_assert(L.b->data[0] == 0 && L.b->data[2] == 0);              /* biases start at 0 */
    const ag_real w[6] = { 1, 0, 0, 1, 1, 1 }, b[3] = { 0.5, 0, -1 };
    memcpy(L.W->data, w, sizeof w);
    memcpy(L.b->data, b, sizeof b);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new3(ctx, 1, 1, 2);
    x->data[0] = 1;
    x->data[1] = 2;
    ag_tensor *y = ag_linear_layer_forward(ctx, &L, x);              // [1,1,3]
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(y->ndim, 3);
    ck_assert_int_eq(y->shape[2], 3);
    ck_assert_double_eq_tol(y->data[0], 1.5, TOL);                   /* x W^T + b, W [out,in] */
    ck_assert_double_eq_tol(y->data[1], 2.0, TOL);
    ck_assert_double_eq_tol(y->data[2], 2.0, TOL);
    ag_ctx_free(ctx);
    ag_params_free(P);
}
END_TEST

/* ag_params_nonfinite: the first weight with a NaN or an Inf, and where; NULL when all are finite. */
START_TEST(test_params_nonfinite)
{
    ag_params *P = ag_params_new();
    ag_linear_layer L;
    ck_assert_int_eq(ag_linear_layer_init(&L, P, "fc", 2, 3, true, 0.02), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 1);
    size_t i = 99;
    ck_assert_ptr_null(ag_params_nonfinite(P, &i));
    L.b->data[2] = INFINITY;
    ck_assert(ag_params_nonfinite(P, &i) == L.b && i == 2);
    L.W->data[4] = NAN;   /* an earlier parameter comes first */
    ck_assert(ag_params_nonfinite(P, &i) == L.W && i == 4);
    ag_params_free(P);
}
END_TEST

START_TEST(test_embedding_and_layernorm_layers)
{
    ag_params *P = ag_params_new();
    ag_embedding_layer E;
    ag_layernorm_layer N, dup;
    ck_assert_int_eq(ag_embedding_layer_init(&E, P, "tok_emb", 5, 4, 0.02), AG_OK);
    ck_assert_int_eq(ag_layernorm_layer_init(&N, P, "ln_f", 4), AG_OK);
    ck_assert_int_eq(ag_layernorm_layer_init(&dup, P, "ln_f", 4), AG_ERR_ARG);
    assert_entry(P, 0, "tok_emb.weight", 2, (int[]){ 5, 4 }, true);
    assert_entry(P, 1, "ln_f.weight", 1, (int[]){ 4 }, false);
    assert_entry(P, 2, "ln_f.bias", 1, (int[]){ 4 }, false);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 7);
    for (int c = 0; c < 4; c++) {
        ck_assert(N.w->data[c] == 1);
        ck_assert(N.b->data[c] == 0);
    }
    ag_ctx *ctx = ag_ctx_new();
    const int ids[3] = { 4, 0, 4 };
    ag_tensor *e = ag_embedding_layer_forward(ctx, &E, ids, 1, 3);   // [1,3,4]
    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(e->shape[1], 3);
    for (int c = 0; c < 4; c++) {
        ck_assert(e->data[c] == E.W->data[4 * 4 + c]);
        ck_assert(e->data[4 + c] == E.W->data[c]);
    }
    ag_tensor *y = ag_layernorm_layer_forward(ctx, &N, e);           // [1,3,4]
    for (int t = 0; t < 3; t++) {
        double m = 0;
        for (int c = 0; c < 4; c++) m += y->data[t * 4 + c];
        ck_assert_double_eq_tol(m, 0, 1e-5);
    }
    ag_ctx_free(ctx);
    ag_params_free(P);
}
END_TEST

// --- multi-head attention ---

static ag_params *P;
static ag_mha A;
static ag_block Bk;

static void mha_setup(void)
{
    P = ag_params_new();
    ck_assert_int_eq(ag_mha_init(&A, P, "blocks.0.attn", C, H, 0.02, 0.01), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 11);
    gc_randomize_params(P, 12);
}

static void block_setup(void)
{
    P = ag_params_new();
    ck_assert_int_eq(ag_block_init(&Bk, P, "blocks.1", C, H, NULL, 0.02, 0.01), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 13);
    gc_randomize_params(P, 14);
}

static void teardown(void) { ag_params_free(P); }

typedef struct {
    bool causal;
    ag_real dropout;
    bool train;
} fwd_opts;

static ag_tensor *build_mha(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const fwd_opts *o = user;
    ag_tensor *mask = o->causal ? ag_causal_mask(ctx, in[0]->shape[1]) : NULL;
    return ag_mha_forward(ctx, &A, in[0], mask, o->dropout, &(ag_forward_opts){ .train = o->train, .seed = 99 });
}

static ag_tensor *build_block(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const fwd_opts *o = user;
    const ag_forward_opts fo = { .train = o->train, .seed = 77 };
    return ag_block_forward(ctx, &Bk, in[0], ag_causal_mask(ctx, in[0]->shape[1]), o->dropout, &fo);
}

/* The gradient check of build (build_mha or build_block) over x [B,T,C] drawn from seed and
 * the parameters of P, which must be n_want inputs with x, under f. */
static void check_grad_over_x(gc_build_fn build, uint64_t seed, int n_want, const char *name, fwd_opts f)
{
    int sx[3] = { B, T, C };
    ag_tensor *in[17];
    ck_assert_int_le(P->n + 1, 17);
    ag_tensor *x = gc_tensor_new(3, sx, seed, -1, 1);
    int n = params_as_inputs(in, x, P);
    ck_assert_int_eq(n, n_want);
    gc_opts o = gc_defaults(name);
    GC_ASSERT(&o, build, in, n, &f);
    gc_tensor_free(x);
}

START_TEST(test_mha_params)
{
    const char *names[8] = { "blocks.0.attn.w_q.weight", "blocks.0.attn.w_q.bias", "blocks.0.attn.w_k.weight",
                             "blocks.0.attn.w_k.bias", "blocks.0.attn.w_v.weight", "blocks.0.attn.w_v.bias",
                             "blocks.0.attn.w_o.weight", "blocks.0.attn.w_o.bias" };
    ck_assert_int_eq(P->n, 8);
    for (int i = 0; i < 8; i++)
        assert_entry(P, i, names[i], i % 2 ? 1 : 2, i % 2 ? (int[]){ C } : (int[]){ C, C }, i % 2 == 0);
    ck_assert_double_eq(P->entries[0].init_std, 0.02);
    ck_assert_double_eq(P->entries[6].init_std, 0.01);             /* w_o: the residual std */
    ck_assert_str_eq(A.scope, "blocks.0.attn");
    ag_mha bad;
    ck_assert_int_eq(ag_mha_init(&bad, P, "x", 8, 3, 0.02, 0.02), AG_ERR_ARG); /* 3 does not divide 8 */
}
END_TEST

/* With one position, softmax over one key is 1: the layer is w_o(w_v(x)). */
START_TEST(test_mha_single_position)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new3(ctx, 2, 1, C);
    for (int i = 0; i < 2 * C; i++) x->data[i] = (ag_real)sin(1.0 + i);
    ag_tensor *y = ag_mha_forward(ctx, &A, x, ag_causal_mask(ctx, 1), 0, NULL); // [2,1,C]
    ck_assert_ptr_nonnull(y);
    for (int b = 0; b < 2; b++) {
        double v[C], want;
        for (int o = 0; o < C; o++) {
            v[o] = A.w_v.b->data[o];
            for (int i = 0; i < C; i++) v[o] += A.w_v.W->data[o * C + i] * x->data[b * C + i];
        }
        for (int o = 0; o < C; o++) {
            want = A.w_o.b->data[o];
            for (int i = 0; i < C; i++) want += A.w_o.W->data[o * C + i] * v[i];
            ck_assert_double_eq_tol(y->data[b * C + o], want, 1e-5);
        }
    }
    ag_ctx_free(ctx);
}
END_TEST

/* Changing the last position changes no earlier output under the causal mask, and does
 * without a mask (so the test can fail). */
START_TEST(test_mha_is_causal)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new3(ctx, B, T, C), *x2 = ag_tensor_new3(ctx, B, T, C);
    for (int i = 0; i < B * T * C; i++) x->data[i] = x2->data[i] = (ag_real)cos(0.7 * i);
    for (int b = 0; b < B; b++)
        for (int c = 0; c < C; c++) x2->data[(b * T + T - 1) * C + c] += 1;
    ag_tensor *mask = ag_causal_mask(ctx, T);                        // [T,T]
    ag_tensor *y = ag_mha_forward(ctx, &A, x, mask, 0, NULL);        // [B,T,C]
    ag_tensor *y2 = ag_mha_forward(ctx, &A, x2, mask, 0, NULL);      // [B,T,C]
    ag_tensor *u = ag_mha_forward(ctx, &A, x, NULL, 0, NULL);        // [B,T,C] no mask
    ag_tensor *u2 = ag_mha_forward(ctx, &A, x2, NULL, 0, NULL);      // [B,T,C]
    ck_assert_ptr_nonnull(u2);
    double dmask = 0, dfree = 0, dlast = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++) {
                int i = (b * T + t) * C + c;
                if (t < T - 1) dmask = fmax(dmask, fabs(y->data[i] - y2->data[i]));
                if (t < T - 1) dfree = fmax(dfree, fabs(u->data[i] - u2->data[i]));
                if (t == T - 1) dlast = fmax(dlast, fabs(y->data[i] - y2->data[i]));
            }
    ck_assert_double_le(dmask, TOL);
    ck_assert_double_gt(dfree, 1e-3);
    ck_assert_double_gt(dlast, 1e-3);
    ag_ctx_free(ctx);
}
END_TEST

static void check_scope(const ag_node *n, void *user)
{
    int *bad = user;
    if (!n->scope || strcmp(n->scope, "blocks.0.attn") != 0) (*bad)++;
}

START_TEST(test_mha_scope_on_tape)
{
    ag_ctx *ctx = ag_ctx_new();
    int s[3] = { B, T, C };
    ag_tensor *x = ag_tensor_leaf(ctx, 3, s);
    ag_ctx_set_scope(ctx, "outer");
    /* the composed path records each op (4 linears + 9 attention ops); the fast twin 5 nodes
     * (a REFERENCE=1 library has no fast twin: the composed path again) */
    const ag_forward_opts readable = { .train = true, .composed_attention = true };
    ag_tensor *y = ag_mha_forward(ctx, &A, x, ag_causal_mask(ctx, T), 0, &readable);
    ck_assert_ptr_nonnull(y);
    ck_assert_str_eq(ag_ctx_scope(ctx), "outer");                   /* restored */
    ck_assert_uint_gt(ag_ctx_get_stats(ctx).tape_nodes, 10);
    size_t composed_nodes = ag_ctx_get_stats(ctx).tape_nodes;
    y = ag_mha_forward(ctx, &A, x, ag_causal_mask(ctx, T), 0, &(ag_forward_opts){ .train = true });
    ck_assert_ptr_nonnull(y);
    /* the reference table (AG_KERNELS=reference, a REFERENCE=1 library) has no fused twin */
    ck_assert_uint_eq(ag_ctx_get_stats(ctx).tape_nodes - composed_nodes,
                      ag_ctx_reference_kernels(ctx) ? composed_nodes : 5);
    int bad = 0;
    ag_tape_foreach(ctx, check_scope, &bad);
    ck_assert_int_eq(bad, 0);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_mha_grad)
{
    /* x, then w_q/w_k/w_v/w_o weight and bias; the same x both times */
    check_grad_over_x(build_mha, 31, 9, "mha causal", (fwd_opts){ true, 0, false });
    check_grad_over_x(build_mha, 31, 9, "mha unmasked", (fwd_opts){ false, 0, false });
}
END_TEST

START_TEST(test_mha_grad_dropout)
{
    /* a fixed seed gives a fixed mask */
    check_grad_over_x(build_mha, 32, 9, "mha dropout", (fwd_opts){ true, 0.3, true });
}
END_TEST

// --- the Pre-LN block ---

START_TEST(test_block_params)
{
    ck_assert_int_eq(P->n, 16);
    ck_assert_str_eq(P->entries[0].t->name, "blocks.1.ln1.weight");
    ck_assert_str_eq(P->entries[1].t->name, "blocks.1.ln1.bias");
    ck_assert_str_eq(P->entries[2].t->name, "blocks.1.attn.w_q.weight");
    ck_assert_str_eq(P->entries[9].t->name, "blocks.1.attn.w_o.bias");
    ck_assert_str_eq(P->entries[10].t->name, "blocks.1.ln2.weight");
    ck_assert_str_eq(P->entries[11].t->name, "blocks.1.ln2.bias");
    assert_entry(P, 12, "blocks.1.mlp.fc1.weight", 2, (int[]){ 4 * C, C }, true);
    assert_entry(P, 13, "blocks.1.mlp.fc1.bias", 1, (int[]){ 4 * C }, false);
    assert_entry(P, 14, "blocks.1.mlp.fc2.weight", 2, (int[]){ C, 4 * C }, true);
    assert_entry(P, 15, "blocks.1.mlp.fc2.bias", 1, (int[]){ C }, false);
    ck_assert_double_eq(P->entries[14].init_std, 0.01);            /* fc2: the residual std */
    ck_assert_double_eq(P->entries[12].init_std, 0.02);
    ck_assert_str_eq(Bk.mlp.scope, "blocks.1.mlp");
}
END_TEST

/* With w_o and fc2 all zero, both branches add nothing: the block is the identity. */
START_TEST(test_block_zero_branches_is_identity)
{
    ag_linear_layer *outs[2] = { &Bk.attn.w_o, &Bk.mlp.fc2 };
    for (int k = 0; k < 2; k++) {
        memset(outs[k]->W->data, 0, ag_numel(outs[k]->W) * sizeof(ag_real));
        memset(outs[k]->b->data, 0, ag_numel(outs[k]->b) * sizeof(ag_real));
    }
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new3(ctx, B, T, C);
    for (int i = 0; i < B * T * C; i++) x->data[i] = (ag_real)sin(0.3 * i);
    ag_tensor *y = ag_block_forward(ctx, &Bk, x, ag_causal_mask(ctx, T), 0, NULL);
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < B * T * C; i++) ck_assert(y->data[i] == x->data[i]);
    ag_ctx_free(ctx);
}
END_TEST

START_TEST(test_block_grad)
{
    /* x, ln1, the attention, ln2 and the MLP */
    check_grad_over_x(build_block, 33, 17, "pre-ln block", (fwd_opts){ true, 0, false });
}
END_TEST

START_TEST(test_block_grad_dropout)
{
    check_grad_over_x(build_block, 34, 17, "pre-ln block with dropout", (fwd_opts){ true, 0.25, true });
}
END_TEST

// --- errors: every failing init says why, led by the layer's prefix ---

/* Asserts that the last call returned want and left exactly msg in P, then forgets it. */
static void expect_error(ag_params *P, ag_status got, ag_status want, const char *msg)
{
    ck_assert_int_eq(got, want);
    const char *why = ag_params_error(P);
    ck_assert_msg(why != NULL, "status %d but no message", (int)got);
    ck_assert_msg(strcmp(why, msg) == 0, "message \"%s\", want \"%s\"", why, msg);
    ck_assert_int_eq(P->err.status, want);
    ag_error_clear(&P->err);
}

/* "prefix: " and the message of ag_switch_check for v ("mlp must be gelu or swiglu (got 7)",
 * from the table; examples/char_lm/tests/test_switch_values.c checks it against the table's names). */
static const char *switch_error(const char *prefix, const ag_switch *sw, int v)
{
    static char want[1024];
    ag_error why = { 0 };
    ck_assert_int_eq(ag_switch_check(sw, v, &why), AG_ERR_ARG);
    snprintf(want, sizeof want, "%s: %s", prefix, why.msg);
    return want;
}

START_TEST(test_layer_init_says_why)
{
    ag_params *P = ag_params_new();
    ag_linear_layer L;
    ag_embedding_layer E;
    ag_layernorm_layer N;
    ag_rmsnorm_layer R;
    ag_swiglu S;
    ag_mlp M;
    ag_mha A;
    ag_block Bk;
    expect_error(P, ag_mha_init(&A, P, "blocks.0.attn", 64, 3, 0.02, 0.02), AG_ERR_ARG,
                 "blocks.0.attn: n_head 3 does not divide n_embd 64");
    expect_error(P, ag_mha_init(&A, P, "attn", 8, 0, 0.02, 0.02), AG_ERR_ARG,
                 "attn: n_embd 8 and n_head 0 must be > 0");
    expect_error(P, ag_linear_layer_init(&L, P, "fc", 0, 3, true, 0.02), AG_ERR_ARG,
                 "fc: in 0 and out 3 must be > 0");
    expect_error(P, ag_embedding_layer_init(&E, P, "tok_emb", 0, 4, 0.02), AG_ERR_ARG,
                 "tok_emb: V 0 and C 4 must be > 0");
    expect_error(P, ag_layernorm_layer_init(&N, P, "ln_f", 0), AG_ERR_ARG, "ln_f: C 0 must be > 0");
    expect_error(P, ag_rmsnorm_layer_init(&R, P, "ln_f", -1), AG_ERR_ARG, "ln_f: C -1 must be > 0");
    expect_error(P, ag_swiglu_init(&S, P, "m", 8, 0, 0.02, 0.02), AG_ERR_ARG, "m: C 8 and hidden 0 must be > 0");
    expect_error(P, ag_mlp_init(&M, P, "mlp", 8, (ag_mlp_kind)7, 0.02, 0.02), AG_ERR_ARG,
                 switch_error("mlp", &ag_mlp_switch, 7));
    expect_error(P, ag_mlp_init(&M, P, "mlp", 1 << 28, AG_MLP_GELU, 0.02, 0.02), AG_ERR_ARG,
                 "mlp: n_embd 268435456 is too large for the MLP (268435455 at most)");
    expect_error(P, ag_block_init(&Bk, P, "blocks.0", 8, 2, &(ag_block_opts){ .norm = (ag_norm_kind)9 }, 0.02, 0.02),
                 AG_ERR_ARG, switch_error("blocks.0", &ag_norm_switch, 9));
    ck_assert_int_eq(P->n, 0);                                         /* nothing registered so far */
    /* a sublayer's failure comes out of the block under the sublayer's full prefix */
    expect_error(P, ag_block_init(&Bk, P, "blocks.1", 64, 3, NULL, 0.02, 0.02), AG_ERR_ARG,
                 "blocks.1.attn: n_head 3 does not divide n_embd 64");
    ck_assert_ptr_nonnull(ag_params_add(P, "blocks.2.mlp.fc1.weight", 1, (int[]){ 1 }, AG_INIT_ZEROS, 0, false));
    expect_error(P, ag_block_init(&Bk, P, "blocks.2", 8, 2, NULL, 0.02, 0.02), AG_ERR_ARG,
                 "blocks.2.mlp.fc1.weight: registered twice");
    /* names too long for the layer's buffers */
    char longp[200];
    memset(longp, 'p', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    ck_assert_int_eq(ag_linear_layer_init(&L, P, longp, 2, 3, true, 0.02), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(ag_params_error(P), ".weight: name longer than 127 characters"));
    ag_error_clear(&P->err);
    longp[70] = '\0';
    ck_assert_int_eq(ag_mha_init(&A, P, longp, 8, 2, 0.02, 0.02), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(ag_params_error(P), ": prefix longer than 63 characters"));
    ag_error_clear(&P->err);
    /* the first failure sticks: the second does not overwrite it */
    ck_assert_int_eq(ag_linear_layer_init(&L, P, "a", 0, 1, true, 0.02), AG_ERR_ARG);
    ck_assert_int_eq(ag_linear_layer_init(&L, P, "b", 0, 1, true, 0.02), AG_ERR_ARG);
    expect_error(P, AG_ERR_ARG, AG_ERR_ARG, "a: in 0 and out 1 must be > 0");
    ag_params_free(P);
}
END_TEST

START_TEST(test_params_calls_say_why)
{
    ag_params *P = ag_params_new();
    ag_linear_layer L;
    ck_assert_ptr_null(ag_params_add(P, "w", 2, (int[]){ 2, 0 }, AG_INIT_ZEROS, 0, false));
    expect_error(P, AG_ERR_ARG, AG_ERR_ARG, "w: bad shape [2,0] (every dim must be > 0)");
    ck_assert_ptr_null(ag_params_add(P, "w", 0, NULL, AG_INIT_ZEROS, 0, false));
    expect_error(P, AG_ERR_ARG, AG_ERR_ARG, "w: 0 dims (1..4 allowed)");
    ck_assert_ptr_nonnull(ag_params_add(P, "w", 1, (int[]){ 2 }, AG_INIT_ZEROS, 0, false));
    ck_assert_ptr_null(ag_params_add(P, "w", 1, (int[]){ 2 }, AG_INIT_ZEROS, 0, false));
    expect_error(P, AG_ERR_ARG, AG_ERR_ARG, "w: registered twice");
    /* more elements than an ag_tensor's int strides can address: refused before any allocation */
    ck_assert_ptr_null(ag_params_add(P, "huge", 2, (int[]){ 1 << 16, 1 << 16 }, AG_INIT_ZEROS, 0, false));
    expect_error(P, AG_ERR_ARG, AG_ERR_ARG, "huge: shape [65536,65536] has more than 2147483647 elements");
    ck_assert_int_eq(ag_linear_layer_init(&L, P, "fc", 2, 2, true, 0.02), AG_OK);
    ck_assert_ptr_null(ag_params_error(P));                            /* successes leave no message */
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ck_assert_ptr_null(ag_params_error(P));
    expect_error(P, ag_params_alloc(P), AG_ERR_ARG, "ag_params_alloc: already allocated");
    expect_error(P, ag_linear_layer_init(&L, P, "late", 2, 2, true, 0.02), AG_ERR_ARG,
                 "late.weight: registered after ag_params_alloc");
    ag_params_free(P);
    ck_assert_ptr_null(ag_params_error(NULL));
}
END_TEST

/* After a whole model's worth of successful inits, ag_params_error is still NULL. */
START_TEST(test_params_error_null_after_success)
{
    ag_params *P = ag_params_new();
    ck_assert_ptr_null(ag_params_error(P));
    ag_embedding_layer E;
    ag_block Bk[2];
    ag_rmsnorm_layer R;
    ag_linear_layer L;
    const ag_block_opts swiglu = { AG_POST_LN, AG_RMSNORM, AG_MLP_SWIGLU };
    ck_assert_int_eq(ag_embedding_layer_init(&E, P, "tok_emb", 5, C, 0.02), AG_OK);
    ck_assert_int_eq(ag_block_init(&Bk[0], P, "blocks.0", C, H, NULL, 0.02, 0.01), AG_OK);
    ck_assert_int_eq(ag_block_init(&Bk[1], P, "blocks.1", C, H, &swiglu, 0.02, 0.01), AG_OK);
    ck_assert_int_eq(ag_rmsnorm_layer_init(&R, P, "ln_f", C), AG_OK);
    ck_assert_int_eq(ag_linear_layer_init(&L, P, "lm_head", C, 5, true, 0.02), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 1);
    ck_assert_ptr_null(ag_params_error(P));
    ck_assert_int_eq(P->err.status, AG_OK);
    ag_params_free(P);
}
END_TEST

Suite *nn_suite(void)
{
    Suite *s = suite_create("nn");
    TCase *l = tcase_create("layers");
    tcase_set_tags(l, "linear embedding layernorm");
    ADD_TESTS(l, test_linear_layer, test_params_nonfinite, test_embedding_and_layernorm_layers);
    suite_add_tcase(s, l);
    TCase *a = tcase_create("attention");
    tcase_set_tags(a, "attention");
    tcase_add_checked_fixture(a, mha_setup, teardown);
    tcase_set_timeout(a, 600);
    ADD_TESTS(a, test_mha_params, test_mha_single_position, test_mha_is_causal, test_mha_scope_on_tape,
                 test_mha_grad, test_mha_grad_dropout);
    suite_add_tcase(s, a);
    TCase *b = tcase_create("block");
    tcase_set_tags(b, "block mlp gelu layernorm linear attention");
    tcase_add_checked_fixture(b, block_setup, teardown);
    tcase_set_timeout(b, 600);
    ADD_TESTS(b, test_block_params, test_block_zero_branches_is_identity, test_block_grad,
                 test_block_grad_dropout);
    suite_add_tcase(s, b);
    TCase *e = tcase_create("errors");
    ADD_TESTS(e, test_layer_init_says_why, test_params_calls_say_why, test_params_error_null_after_success);
    suite_add_tcase(s, e);
    return s;
}
