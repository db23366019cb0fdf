/* test_fused.c -- attention's fast twin (src/tensor/fast/attention.c) against the attention a
 * reader follows, attend() in src/nn/attention.c, op by op: the same output and the same
 * gradients through a whole attention layer (x and all eight parameters), which path each
 * mask and option takes (the mask's kind, not its numbers), and a double-precision gradcheck
 * of ag_attention. tests/test_fast_ref_products.c adds random shapes, q = k = v, inputs that
 * take no gradient and fresh against accumulating gradients at the op itself.
 * In a REFERENCE=1 build there is no fast twin: both sides run attend(), and the path checks
 * expect no "attention" node. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "fastref.h"
#include "gradcheck.h"
#include "tcases.h"

#ifdef AG_REFERENCE
#define HAS_TWIN 0
#else
#define HAS_TWIN 1
#endif

static void count_fused(const ag_node *n, void *user)
{
    if (strcmp(n->op->name, "attention") == 0) ++*(int *)user;
}

/* the "attention" nodes (the fast twin) on ctx's tape */
static int fused_nodes(const ag_ctx *ctx)
{
    int n = 0;
    ag_tape_foreach(ctx, count_fused, &n);
    return n;
}

/* the elements of got and want (n each) further apart than fastref.h's tolerance, which scales
 * with the largest |want| (a gradient's terms cancel; another order rounds differently) */
static int n_apart(const ag_real *got, const ag_real *want, size_t n)
{
    double top = 0;
    for (size_t i = 0; i < n; i++) top = fmax(top, fabs(want[i]));
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += !(fabs(got[i] - want[i]) <= FR_ATOL + FR_RTOL * (fabs(want[i]) + top));
    return bad;
}

/* an attention layer of width C and H heads, its parameters O(1) (at the real init, std 0.02,
 * attention is almost uniform and a wrong gradient could hide) */
static ag_params *layer_new(ag_mha *A, int C, int H)
{
    ag_params *P = ag_params_new();
    ck_assert_int_eq(ag_mha_init(A, P, "attn", C, H, 0.5, 0.5), AG_OK);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    ag_params_init(P, 11);
    return P;
}

// --- the layer: the fast twin's output and every gradient equal attend()'s ---

typedef struct {
    int B, T, C, H;
} attn_shape;

/* T = 1 (one key), H = 1 (one head of all C), C odd, more heads than the T, and T = 150: a
 * causal mask's tiles (64 rows in fast/attention.c), the last one short */
static const attn_shape shapes[] = { { 2, 5, 12, 3 }, { 1, 1, 4, 1 }, { 3, 1, 6, 2 }, { 2, 7, 5, 1 }, { 1, 9, 8, 4 },
                                     { 2, 150, 8, 2 } };
#define N_SHAPES (int)(sizeof shapes / sizeof shapes[0])

/* One side of the comparison: out gets y, then dx (when x takes a gradient), then the flat
 * gradient of every parameter. Returns the "attention" nodes recorded. */
static int layer_side(bool reference, const ag_mha *A, ag_params *P, const ag_tensor *x0, bool causal, bool x_grad,
                      ag_real dropout, const ag_real *dy, ag_real *out)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_reference_kernels(ctx, reference);
    ag_tensor *x = x_grad ? ag_tensor_leaf(ctx, 3, x0->shape) : ag_tensor_new(ctx, 3, x0->shape); // [B,T,C]
    size_t n = ag_numel(x0);
    memcpy(x->data, x0->data, n * sizeof(ag_real));
    ag_params_zero_grad(P);
    ag_tensor *mask = causal ? ag_causal_mask(ctx, x0->shape[1]) : NULL;             // [T,T]
    const ag_forward_opts train = { .train = true, .seed = 9 };                      /* dropout's mask: seed 9 */
    ag_tensor *y = ag_mha_forward(ctx, A, x, mask, dropout, dropout > 0 ? &train : NULL); // [B,T,C]
    ck_assert_msg(y != NULL, "%s", ag_ctx_error(ctx));
    ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
    memcpy(out, y->data, n * sizeof(ag_real));
    if (x_grad) memcpy(out + n, x->grad, n * sizeof(ag_real));
    memcpy(out + (x_grad ? 2 : 1) * n, P->grad, P->total * sizeof(ag_real));
    int nodes = fused_nodes(ctx);
    ag_ctx_free(ctx);
    return nodes;
}

static void layer_case(const attn_shape *s, bool causal, bool x_grad, ag_real dropout)
{
    ag_mha A;
    ag_params *P = layer_new(&A, s->C, s->H);
    int sx[3] = { s->B, s->T, s->C };
    ag_tensor *x = gc_tensor_new(3, sx, 21, -1, 1), *dy = gc_tensor_new(3, sx, 22, -1, 1);
    size_t n = ag_numel(x), nx = x_grad ? n : 0, len = n + nx + P->total;
    ag_real *fast = malloc(len * sizeof(ag_real)), *ref = malloc(len * sizeof(ag_real));
    ck_assert_int_eq(layer_side(false, &A, P, x, causal, x_grad, dropout, dy->data, fast), HAS_TWIN);
    ck_assert_int_eq(layer_side(true, &A, P, x, causal, x_grad, dropout, dy->data, ref), 0);
    const char *part[3] = { "y", "dx", "d(parameters)" };
    size_t at[4] = { 0, n, n + nx, len }; /* where each part starts in out */
    for (int p = 0; p < 3; p++) {
        int bad = n_apart(fast + at[p], ref + at[p], at[p + 1] - at[p]);
        ck_assert_msg(bad == 0, "[%d,%d,%d] H=%d%s%s dropout %g: %s: %d elements apart", s->B, s->T, s->C, s->H,
                      causal ? " causal" : "", x_grad ? "" : " (x takes no gradient)", (double)dropout, part[p], bad);
    }
    free(fast);
    free(ref);
    gc_tensor_free(x);
    gc_tensor_free(dy);
    ag_params_free(P);
}

START_TEST(test_layer_causal) { layer_case(&shapes[_i], true, true, 0); }
END_TEST
START_TEST(test_layer_unmasked) { layer_case(&shapes[_i], false, true, 0); }
END_TEST
START_TEST(test_layer_x_no_grad) { layer_case(&shapes[_i], true, false, 0); }
END_TEST
/* dropout on the weights: the twin draws ag_dropout's mask, element for element */
START_TEST(test_layer_dropout_causal) { layer_case(&shapes[_i], true, true, (ag_real)0.3); }
END_TEST
START_TEST(test_layer_dropout_unmasked) { layer_case(&shapes[_i], false, true, (ag_real)0.5); }
END_TEST

// --- which path: the mask's kind and the options ---

enum { MASK_NONE, MASK_CAUSAL, MASK_BY_HAND, MASK_VIEW };

typedef struct {
    const char *what;
    int mask;            /* MASK_*: none, ag_causal_mask's, the same numbers built by hand, a view of it */
    bool reference;      /* the ctx asks for the reference kernels */
    bool composed_layer; /* A.composed (cfg.composed_attention, --composed-attention) */
    bool composed_call;  /* opts.composed_attention (--detect-anomaly, --trace-shapes) */
    bool record;         /* opts.record_attention */
    bool padding;        /* opts.key_padding, every token real */
    ag_real mask_fill;   /* 0: -inf */
    bool train;          /* a training call: dropout on */
    ag_real dropout;
    bool twin;           /* takes the fast twin where the library has one */
} path_case;

static const path_case path_cases[] = {
    { .what = "ag_causal_mask", .mask = MASK_CAUSAL, .twin = true },
    { .what = "no mask", .mask = MASK_NONE, .twin = true },
    { .what = "a reshaped view of ag_causal_mask", .mask = MASK_VIEW, .twin = true },
    { .what = "the causal numbers built by hand", .mask = MASK_BY_HAND },
    { .what = "reference kernels", .mask = MASK_CAUSAL, .reference = true },
    { .what = "composed layer", .mask = MASK_CAUSAL, .composed_layer = true },
    { .what = "composed call", .mask = MASK_CAUSAL, .composed_call = true },
    { .what = "recording", .mask = MASK_CAUSAL, .record = true },
    { .what = "key padding", .mask = MASK_CAUSAL, .padding = true },
    { .what = "mask fill -1e9", .mask = MASK_CAUSAL, .mask_fill = -1e9 },
    { .what = "no mask, fill -1e9", .mask = MASK_NONE, .mask_fill = -1e9, .twin = true },
    { .what = "training, dropout 0", .mask = MASK_CAUSAL, .train = true, .twin = true },
    { .what = "evaluation, dropout 0.1", .mask = MASK_CAUSAL, .dropout = (ag_real)0.1, .twin = true },
    { .what = "training, dropout 0.1", .mask = MASK_CAUSAL, .train = true, .dropout = (ag_real)0.1, .twin = true },
};
#define N_PATH_CASES (int)(sizeof path_cases / sizeof path_cases[0])

enum { PB = 2, PT = 5, PC = 12, PH = 3 };

static ag_tensor *case_mask(ag_ctx *ctx, int kind)
{
    if (kind == MASK_CAUSAL) return ag_causal_mask(ctx, PT);                         // [T,T]
    if (kind == MASK_VIEW) return ag_reshape(ctx, ag_causal_mask(ctx, PT), 2, (int[2]){ PT, PT }); // [T,T]
    if (kind == MASK_NONE) return NULL;
    ag_tensor *m = ag_tensor_new2(ctx, PT, PT);                                      // [T,T]
    for (int i = 0; i < PT; i++)
        for (int j = 0; j <= i; j++) m->data[i * PT + j] = 1;
    return m;
}

/* the layer on x under case c: y into out; returns the "attention" nodes recorded */
static int path_side(const path_case *c, ag_mha *A, const ag_tensor *x0, ag_real *out)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_reference_kernels(ctx, c->reference);
    ag_tensor *x = ag_tensor_leaf(ctx, 3, x0->shape);                                // [B,T,C]
    memcpy(x->data, x0->data, ag_numel(x0) * sizeof(ag_real));
    ag_tensor *kp = ag_tensor_new2(ctx, PB, PT), *rec[1] = { NULL };                 // [B,T]
    for (int i = 0; i < PB * PT; i++) kp->data[i] = 1;
    ag_forward_opts o = { .train = c->train, .seed = 5, .composed_attention = c->composed_call,
                          .record_attention = c->record ? rec : NULL, .key_padding = c->padding ? kp : NULL };
    A->composed = c->composed_layer;
    A->mask_fill = c->mask_fill ? c->mask_fill : -INFINITY;
    ag_tensor *y = ag_mha_forward(ctx, A, x, case_mask(ctx, c->mask), c->dropout, &o); // [B,T,C]
    ck_assert_msg(y != NULL, "%s: %s", c->what, ag_ctx_error(ctx));
    ck_assert(!c->record || rec[0] != NULL);
    memcpy(out, y->data, ag_numel(y) * sizeof(ag_real));
    int nodes = fused_nodes(ctx);
    ag_ctx_free(ctx);
    return nodes;
}

/* Case _i takes the path its table row says, and (but under dropout) gives the numbers of
 * ag_causal_mask's fast path, or of no mask. */
START_TEST(test_path)
{
    const path_case *c = &path_cases[_i];
    ag_mha A;
    ag_params *P = layer_new(&A, PC, PH);
    ag_tensor *x = gc_tensor_new(3, (int[3]){ PB, PT, PC }, 23, -1, 1);
    size_t n = ag_numel(x);
    ag_real *want = malloc(n * sizeof(ag_real)), *got = malloc(n * sizeof(ag_real));
    path_case plain = { "plain", c->mask == MASK_NONE ? MASK_NONE : MASK_CAUSAL, .twin = true };
    ck_assert_int_eq(path_side(&plain, &A, x, want), HAS_TWIN);
    ck_assert_msg(path_side(c, &A, x, got) == (c->twin && HAS_TWIN), "%s: the wrong path", c->what);
    bool dropped = c->train && c->dropout > 0;
    ck_assert_msg(dropped || n_apart(got, want, n) == 0, "%s: another result", c->what);
    ck_assert_msg(!dropped || n_apart(got, want, n) > 0, "%s: dropout did nothing", c->what);
    free(want);
    free(got);
    gc_tensor_free(x);
    ag_params_free(P);
}
END_TEST

/* The kind is ag_causal_mask's own and its T's: not the numbers, not another T. A causal mask
 * for another T is refused by masked_fill (it cannot broadcast), never taken for causal. */
START_TEST(test_mask_kind)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *m = ag_causal_mask(ctx, 4);                                          // [4,4]
    ck_assert(ag_is_causal_mask(m, 4));
    ck_assert(!ag_is_causal_mask(m, 3));
    ck_assert(!ag_is_causal_mask(NULL, 4));
    ag_tensor *same = ag_tensor_new2(ctx, 4, 4);                                    // [4,4]
    memcpy(same->data, m->data, 16 * sizeof(ag_real));
    ck_assert(!ag_is_causal_mask(same, 4));
    ck_assert(!ag_is_causal_mask(ag_reshape(ctx, m, 4, (int[4]){ 1, 1, 4, 4 }), 4)); /* [1,1,4,4]: not [T,T] */
    ag_tensor *q = ag_tensor_new3(ctx, 2, 5, 6);                                    // [B,T,C]
    ck_assert_ptr_null(ag_attention(ctx, q, q, q, 2, 1, m));                        /* T = 5, mask [4,4] */
    ck_assert_int_eq(ag_ctx_status(ctx), AG_ERR_SHAPE);
    ag_ctx_free(ctx);
}
END_TEST

// --- ag_attention's own gradients (the fast twin's hand-written backward, where it runs) ---

typedef struct {
    int H;
    bool causal;
} attn_args;

static ag_tensor *build_attention(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const attn_args *a = user;
    int T = in[0]->shape[1], D = in[0]->shape[2] / a->H;
    ag_tensor *mask = a->causal ? ag_causal_mask(ctx, T) : NULL;                    // [T,T]
    return ag_attention(ctx, in[0], in[1], in[2], a->H, 1 / sqrt((double)D), mask); // [B,T,C]
}

START_TEST(test_attention_gradcheck)
{
    int s[3] = { 2, 4, 6 }; /* H=2, D=3 */
    ag_tensor *in[3] = { gc_tensor_new(3, s, 55, -1, 1), gc_tensor_new(3, s, 56, -1, 1), gc_tensor_new(3, s, 57, -1, 1) };
    attn_args a = { 2, true };
    gc_opts o = gc_defaults("attention (causal)");
    o.max_elems = 0;
    GC_ASSERT(&o, build_attention, in, 3, &a);
    a.causal = false;
    o.name = "attention (unmasked)";
    GC_ASSERT(&o, build_attention, in, 3, &a);
    /* one tensor as q, k and v at once (self-attention on raw x): gradients from all three add up */
    ag_tensor *same[3] = { in[0], in[0], in[0] };
    o.name = "attention (q = k = v)";
    GC_ASSERT(&o, build_attention, same, 1, &a);
    for (int i = 0; i < 3; i++) gc_tensor_free(in[i]);
}
END_TEST

/* the whole model: the fast twin (default) and composed attention give the same loss and
 * gradients, without dropout and with it (the same masks) */
static void gpt_fused_equals_composed(double dropout)
{
    ag_gpt_config cfg = { .vocab_size = 7, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 6, .dropout = dropout };
    ag_gpt *gf = ag_gpt_new(&cfg, 3, NULL);
    cfg.composed_attention = true;
    ag_gpt *gc = ag_gpt_new(&cfg, 3, NULL);
    ck_assert_ptr_nonnull(gf);
    ck_assert_ptr_nonnull(gc);
    int ids[12] = { 1, 2, 3, 4, 5, 6, 0, 6, 5, 4, 3, 2 }, tg[12] = { 2, 3, 4, 5, 6, 0, 6, 5, 4, 3, 2, 1 };
    const ag_forward_opts train = { .train = true, .seed = 17 };
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_kernels(ctx, AG_KERNELS_FAST);   /* whatever AG_KERNELS says: the fused side is the subject */
    ag_tensor *lf = NULL, *lc = NULL;
    ag_params_zero_grad(gf->params);
    ag_params_zero_grad(gc->params);
    ag_gpt_forward(ctx, gf, ids, tg, 2, 6, &train, &lf);
    ck_assert_int_eq(ag_backward(ctx, lf), AG_OK);
    ck_assert_int_eq(fused_nodes(ctx), 2 * HAS_TWIN);
    ag_real loss_f = lf->data[0];
    ag_ctx_reset(ctx);
    ag_gpt_forward(ctx, gc, ids, tg, 2, 6, &train, &lc);
    ck_assert_int_eq(ag_backward(ctx, lc), AG_OK);
    ck_assert_int_eq(fused_nodes(ctx), 0);
    ck_assert_double_eq_tol(loss_f, lc->data[0], 1e-6);
    ck_assert_int_eq(n_apart(gf->params->grad, gc->params->grad, gf->params->total), 0);
    ag_ctx_free(ctx);
    ag_gpt_free(gf);
    ag_gpt_free(gc);
}

START_TEST(test_gpt_fused_equals_composed) { gpt_fused_equals_composed(0); }
END_TEST
START_TEST(test_gpt_fused_equals_composed_dropout) { gpt_fused_equals_composed(0.2); }
END_TEST

Suite *fused_suite(void)
{
    Suite *s = suite_create("fused");
    TCase *layer = tcase_create("layer");
    tcase_set_tags(layer, "attention");
    tcase_add_loop_test(layer, test_layer_causal, 0, N_SHAPES);
    tcase_add_loop_test(layer, test_layer_unmasked, 0, N_SHAPES);
    tcase_add_loop_test(layer, test_layer_x_no_grad, 0, N_SHAPES);
    tcase_add_loop_test(layer, test_layer_dropout_causal, 0, N_SHAPES);
    tcase_add_loop_test(layer, test_layer_dropout_unmasked, 0, N_SHAPES);
    suite_add_tcase(s, layer);
    TCase *path = tcase_create("path");
    tcase_set_tags(path, "attention");
    tcase_add_loop_test(path, test_path, 0, N_PATH_CASES);
    tcase_add_test(path, test_mask_kind);
    suite_add_tcase(s, path);
    TCase *grad = tcase_create("grad");
    tcase_set_tags(grad, "attention");
    ADD_TESTS(grad, test_attention_gradcheck, test_gpt_fused_equals_composed,
                    test_gpt_fused_equals_composed_dropout);
    suite_add_tcase(s, grad);
    return s;
}
