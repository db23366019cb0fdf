/* test_torch_ref.c -- the C model against the PyTorch reference (../shared/bench/torch_ref.py):
 * same weights -> same loss and same gradients, for the `tiny` configuration of MODEL.md.
 *
 * The reference values live in tests/fixtures/torch_tiny.safetensors, written by
 *     /usr/bin/python3 tests/torch_fixture.py
 * (every parameter under its state_dict name, its gradient under "grad.<name>", the batch as
 * "batch.x" / "batch.y" [4,32] in F32, and the loss as a string in __metadata__). We load the
 * parameters into an ag_gpt, run ag_gpt_forward + ag_backward on the same batch, and compare:
 *   loss      relative error <= 1e-5
 *   gradients every element |c - t| <= 1e-6 + 1e-3 |t|     (float32 tolerance: torch ran in F32)
 * for the fused attention kernel (the default) and for composed_attention. A no-grad forward
 * must give the same logits and loss as the grad-mode one.
 * AG_TEST_VERBOSE=1 prints the measured errors, one line per parameter, to stderr. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"

#define FIXTURE "tests/fixtures/torch_tiny.safetensors"
#define REGEN "/usr/bin/python3 tests/torch_fixture.py"

enum { V = 65, L = 2, H = 2, C = 64, TM = 32, Bn = 4, Tn = 32 };

#define LOSS_RTOL 1e-5
#define GRAD_ATOL 1e-6
#define GRAD_RTOL 1e-3
/* no-grad vs grad mode: the same kernels on the same data */
#ifdef AG_DOUBLE
#define MODE_TOL 1e-12
#else
#define MODE_TOL 1e-6
#endif

static bool verbose(void)
{
    const char *v = getenv("AG_TEST_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

static ag_st_file *open_fixture(void)
{
    ag_error err = { 0 };
    ag_st_file *f = ag_st_load(FIXTURE, &err);
    ck_assert_msg(f != NULL,
                  "cannot load the PyTorch fixture " FIXTURE " (%s); the tests run from the repo root; "
                  "regenerate it with: " REGEN, err.msg);
    return f;
}

/* the [B,T] ids stored as F32 -> ints, checked to be whole numbers in [0, V) */
static void read_ids(const ag_st_file *f, const char *name, int *ids)
{
    ag_real buf[Bn * Tn];
    ag_error err = { 0 };
    ag_status s = ag_st_read(f, name, buf, 2, (const int[2]){ Bn, Tn }, &err);
    ck_assert_msg(s == AG_OK, "%s", err.msg);
    for (int i = 0; i < Bn * Tn; i++) {
        ck_assert_msg(buf[i] == floor(buf[i]) && buf[i] >= 0 && buf[i] < V, "%s[%d] = %g is not a token id",
                      name, i, (double)buf[i]);
        ids[i] = (int)buf[i];
    }
}

/* The tiny GPT with every parameter copied from the fixture. */
static ag_gpt *load_model(const ag_st_file *f, bool composed)
{
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = L, .n_head = H, .n_embd = C, .block_size = TM,
                          .composed_attention = composed };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, 1, &err);
    ck_assert_msg(g != NULL, "ag_gpt_new: %s", err.msg);
    const ag_params *P = g->params;
    /* parameters + their grads + batch.x + batch.y: nothing missing, nothing extra */
    ck_assert_msg(ag_st_count(f) == 2 * P->n + 2, FIXTURE " holds %d tensors, want %d (2 x %d parameters + 2)",
                  ag_st_count(f), 2 * P->n + 2, P->n);
    for (int e = 0; e < P->n; e++) {
        ag_tensor *t = P->entries[e].t;
        ag_status s = ag_st_read(f, t->name, t->data, t->ndim, t->shape, &err);
        ck_assert_msg(s == AG_OK, "%s", err.msg);
    }
    return g;
}

typedef struct {
    double max_abs, max_rel;      /* over every element (rel: over elements with |t| >= 1e-4) */
    const char *abs_name, *rel_name;
    int n_bad;                    /* elements outside atol + rtol |t| */
    char first_bad[256];
} grad_report;

/* Compares every parameter's grad with the fixture's "grad.<name>". */
static void compare_grads(const ag_st_file *f, const ag_params *P, grad_report *r, const char *mode)
{
    memset(r, 0, sizeof *r);
    ag_error err = { 0 };
    char name[160];
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        size_t n = ag_numel(t);
        ag_real *want = malloc(n * sizeof *want);
        ck_assert_ptr_nonnull(want);
        snprintf(name, sizeof name, "grad.%s", t->name);
        ag_status s = ag_st_read(f, name, want, t->ndim, t->shape, &err);
        ck_assert_msg(s == AG_OK, "%s", err.msg);
        double t_abs = 0, t_rel = 0, scale = 0;
        for (size_t i = 0; i < n; i++) {
            double c = t->grad[i], w = want[i], d = fabs(c - w);
            if (fabs(w) > scale) scale = fabs(w);
            if (d > t_abs) t_abs = d;
            if (fabs(w) >= 1e-4 && d / fabs(w) > t_rel) t_rel = d / fabs(w);
            if (!(d <= GRAD_ATOL + GRAD_RTOL * fabs(w))) {   /* NaN fails too */
                if (r->n_bad++ == 0)
                    snprintf(r->first_bad, sizeof r->first_bad, "%s[%zu]: C %.9g, torch %.9g, |diff| %.3g",
                             t->name, i, c, w, d);
            }
        }
        if (t_abs > r->max_abs) { r->max_abs = t_abs; r->abs_name = t->name; }
        if (t_rel > r->max_rel) { r->max_rel = t_rel; r->rel_name = t->name; }
        if (verbose())
            fprintf(stderr, "torch_ref %s %-28s max|grad| %.3e  max abs err %.3e (%.2e of max|grad|)  max rel err %.3e\n",
                    mode, t->name, scale, t_abs, scale > 0 ? t_abs / scale : 0.0, t_rel);
        free(want);
    }
}

/* The loss of a forward with grad (loss) against the fixture's metadata "loss". */
static void check_loss(ag_st_file *f, const ag_tensor *loss, const char *mode)
{
    const char *loss_s = ag_st_meta_get(f, "loss");
    ck_assert_msg(loss_s != NULL, FIXTURE " has no \"loss\" in __metadata__; regenerate it with: " REGEN);
    char *end;
    double want_loss = strtod(loss_s, &end);
    ck_assert_msg(end != loss_s && *end == '\0' && isfinite(want_loss), "metadata loss \"%s\" is not a number", loss_s);
    double got_loss = loss->data[0];
    double loss_rel = fabs(got_loss - want_loss) / fabs(want_loss);
    if (verbose())
        fprintf(stderr, "torch_ref %s loss: C %.9g torch %.9g abs err %.3e rel err %.3e\n", mode, got_loss,
                want_loss, fabs(got_loss - want_loss), loss_rel);
    ck_assert_msg(loss_rel <= LOSS_RTOL, "%s attention: loss C %.9g vs torch %.9g: rel err %.3g > %g", mode,
                  got_loss, want_loss, loss_rel, LOSS_RTOL);
}

/* No-grad mode gives the same logits [B,T,V] and loss as grad mode, and records nothing. */
static void check_no_grad(ag_ctx *ctx, ag_gpt *g, const int *ids, const int *tg, const ag_tensor *logits,
                          const ag_tensor *loss, const char *mode)
{
    ag_ctx_set_grad(ctx, false);
    ag_tensor *loss2;
    ag_tensor *logits2 = ag_gpt_forward(ctx, g, ids, tg, Bn, Tn, NULL, &loss2);  // [B,T,V]
    ck_assert_msg(logits2 != NULL && loss2 != NULL, "no-grad ag_gpt_forward: %s", ag_ctx_error(ctx));
    ck_assert(!loss2->requires_grad);
    double dmax = 0;
    for (size_t i = 0; i < ag_numel(logits); i++) {
        double d = fabs((double)logits->data[i] - (double)logits2->data[i]);
        if (!(d <= dmax)) dmax = d;                                  /* NaN propagates */
    }
    double dloss = fabs((double)loss->data[0] - (double)loss2->data[0]);
    if (verbose())
        fprintf(stderr, "torch_ref %s no-grad vs grad: max |logits diff| %.3e, |loss diff| %.3e\n", mode, dmax, dloss);
    ck_assert_msg(dmax <= MODE_TOL, "%s attention: no-grad logits differ from grad mode by %.3g", mode, dmax);
    ck_assert_msg(dloss <= MODE_TOL * fabs((double)loss->data[0]), "%s attention: no-grad loss %.9g vs grad mode %.9g",
                  mode, (double)loss2->data[0], (double)loss->data[0]);
}

// --- the test: loss and every gradient, fused (_i = 0) and composed (_i = 1) attention ---

START_TEST(test_torch_ref_tiny)
{
    bool composed = _i == 1;
    const char *mode = composed ? "composed" : "fused";
    ag_st_file *f = open_fixture();
    int ids[Bn * Tn], tg[Bn * Tn];
    read_ids(f, "batch.x", ids);
    read_ids(f, "batch.y", tg);
    ag_gpt *g = load_model(f, composed);

    /* grad mode: forward + backward */
    ag_ctx *ctx = ag_ctx_new();
    ck_assert_ptr_nonnull(ctx);
    ag_params_zero_grad(g->params);
    ag_tensor *loss;
    ag_tensor *logits = ag_gpt_forward(ctx, g, ids, tg, Bn, Tn, &(ag_forward_opts){ .train = true }, &loss);    // [B,T,V]
    ck_assert_msg(logits != NULL && loss != NULL, "ag_gpt_forward: %s", ag_ctx_error(ctx));
    ag_status s = ag_backward(ctx, loss);
    ck_assert_msg(s == AG_OK, "ag_backward: %s", ag_ctx_error(ctx));
    check_loss(f, loss, mode);

    grad_report r;
    compare_grads(f, g->params, &r, mode);
    if (verbose())
        fprintf(stderr, "torch_ref %s grads: max abs err %.3e (%s), max rel err %.3e (%s, |t| >= 1e-4), %d bad\n",
                mode, r.max_abs, r.abs_name ? r.abs_name : "-", r.max_rel, r.rel_name ? r.rel_name : "-", r.n_bad);
    ck_assert_msg(r.n_bad == 0,
                  "%s attention: %d gradient elements differ from torch beyond %g + %g|t|; first: %s; "
                  "max abs err %.3g (%s), max rel err %.3g (%s; over |t| >= 1e-4)",
                  mode, r.n_bad, GRAD_ATOL, GRAD_RTOL, r.first_bad, r.max_abs, r.abs_name ? r.abs_name : "-",
                  r.max_rel, r.rel_name ? r.rel_name : "-");

    check_no_grad(ctx, g, ids, tg, logits, loss, mode);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    ag_st_free(f);
}
END_TEST

Suite *torch_ref_suite(void)
{
    Suite *s = suite_create("torch_ref");
    TCase *tc = tcase_create("tiny");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, test_torch_ref_tiny, 0, 2);   /* 0: fused attention, 1: composed */
    suite_add_tcase(s, tc);
    return s;
}
