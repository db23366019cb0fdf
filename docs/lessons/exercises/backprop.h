/* backprop.h -- lesson 18's check: your hand-written backward of LayerNorm and of one causal
 * attention head, against the library's (ag_layernorm; ag_matmul, ag_scale, ag_masked_fill,
 * ag_softmax) on random inputs. When they differ it says which of the usual mistakes your
 * gradients equal: the term that is missing, named.
 *
 * It knows the right answer (it must, to name what is missing): derive yours on paper first,
 * and read the bottom of this file after.
 *
 * Your functions compute everything from the forward's inputs (recompute the mean, the
 * variance, the weights A: the library keeps them, you do not) and write (=) the gradients:
 *   LayerNorm   y = w * xhat + b,  xhat = (x - mean) / sqrt(var + eps)  over each row of C
 *               (var: the biased variance, divided by C)
 *   one head    S = q k^T / sqrt(D), causal (key j <= query t), A = softmax(S), out = A v */
#ifndef BACKPROP_H
#define BACKPROP_H

#include "lesson.h"

/* x [N,C], w [C], dy [N,C] -> dx [N,C], dw [C], db [C] */
typedef void (*ln_backward_fn)(const ag_real *x, const ag_real *w, const ag_real *dy, int N, int C, double eps,
                               ag_real *dx, ag_real *dw, ag_real *db);
/* q, k, v, dout [T,D] -> dq, dk, dv [T,D] */
typedef void (*head_backward_fn)(const ag_real *q, const ag_real *k, const ag_real *v, const ag_real *dout, int T,
                                 int D, ag_real *dq, ag_real *dk, ag_real *dv);

enum { BP_N = 5, BP_C = 8, BP_T = 6, BP_D = 4 };
#define BP_EPS 1e-5
#define BP_RTOL 1e-9   /* double: a right answer agrees to rounding, a missing term by far more */

// --- the usual mistakes, each a flag of the reference below ---
enum {
    LN_NO_MEAN = 1,     /* dx without -mean(dxhat) / sigma */
    LN_NO_VAR = 2,      /* dx without -xhat mean(dxhat xhat) / sigma */
    LN_UNBIASED = 4,    /* var divided by C - 1 */
    LN_NO_EPS = 8,      /* sigma = sqrt(var) */
    LN_DW_X = 16,       /* dw = sum dy x instead of sum dy xhat */
    HD_NO_ROWSUM = 1,   /* dS = A dA, without - A rowsum(A dA) */
    HD_NO_SCALE = 2,    /* dq, dk without the 1/sqrt(D) */
    HD_DV_NO_T = 4,     /* dv = A dout instead of A^T dout (rows of A where its columns belong) */
    HD_DK_NO_T = 8,     /* dk = dS q instead of dS^T q */
};

static const struct { int flag; const char *what; } bp_ln_mistakes[] = {
    {LN_NO_MEAN, "dx lacks the term -mean(dxhat) / sigma: the path through the mean"},
    {LN_NO_VAR, "dx lacks the term -xhat mean(dxhat * xhat) / sigma: the path through the variance"},
    {LN_NO_MEAN | LN_NO_VAR, "dx lacks both terms of the mean and the variance: only dxhat / sigma is left"},
    {LN_UNBIASED, "the variance is divided by C - 1: LayerNorm's is biased, divided by C"},
    {LN_NO_EPS, "sigma lacks eps: sqrt(var + eps), as the forward"},
    {LN_DW_X, "dw sums dy * x: it is dy * xhat, the normalized input"},
};
static const struct { int flag; const char *what; } bp_head_mistakes[] = {
    {HD_NO_ROWSUM, "dS lacks the softmax's term -A * rowsum(A * dA): dS = A * (dA - rowsum(A * dA))"},
    {HD_NO_SCALE, "dq and dk lack the scale 1/sqrt(D) of the scores"},
    {HD_DV_NO_T, "dv = A dout: it is A^T dout (each key gathers from the queries that read it)"},
    {HD_DK_NO_T, "dk = dS q: it is dS^T q (key j's gradient sums over the queries, column j of dS)"},
};

static double bp_rel(const ag_real *a, const ag_real *b, size_t n)   /* max |a - b| / max |b| */
{
    double d = 0, m = 1e-300;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs((double)a[i] - (double)b[i])), m = fmax(m, fabs((double)b[i]));
    return isnan(d) ? INFINITY : d / m;
}

// --- the library's gradients ---

/* a copy of src [n] as a leaf tensor of the given shape (grad zeroed) */
static ag_tensor *bp_leaf(int ndim, const int *shape, const ag_real *src)
{
    ag_tensor *t = ag_tensor_new_owned(ndim, shape);
    if (!t) return NULL;
    memcpy(t->data, src, ag_numel(t) * sizeof(ag_real));
    memset(t->grad, 0, ag_numel(t) * sizeof(ag_real));
    t->requires_grad = true;
    return t;
}

static int bp_library_ln(const ag_real *x, const ag_real *w, const ag_real *b, const ag_real *dy, ag_real *g[3])
{
    ag_tensor *in[3] = {bp_leaf(2, (int[]){BP_N, BP_C}, x), bp_leaf(1, (int[]){BP_C}, w), bp_leaf(1, (int[]){BP_C}, b)};
    ag_ctx *ctx = ag_ctx_new();
    int rc = 2;
    if (ctx && in[0] && in[1] && in[2]) {
        ag_tensor *y = ag_layernorm(ctx, in[0], in[1], in[2], BP_EPS);                 // [N,C]
        if (y && ag_backward_from(ctx, y, dy) == AG_OK) rc = 0;
        for (int i = 0; i < 3 && rc == 0; i++) memcpy(g[i], in[i]->grad, ag_numel(in[i]) * sizeof(ag_real));
    }
    ag_ctx_free(ctx);
    return lesson_done(in, 3, rc);
}

static int bp_library_head(const ag_real *q, const ag_real *k, const ag_real *v, const ag_real *dout, ag_real *g[3])
{
    const int shape[2] = {BP_T, BP_D};
    ag_tensor *in[3] = {bp_leaf(2, shape, q), bp_leaf(2, shape, k), bp_leaf(2, shape, v)};
    ag_ctx *ctx = ag_ctx_new();
    int rc = 2;
    if (ctx && in[0] && in[1] && in[2]) {
        ag_tensor *s = ag_matmul(ctx, in[0], ag_transpose(ctx, in[1]));               // [T,T]
        s = ag_masked_fill(ctx, ag_scale(ctx, s, (ag_real)(1 / sqrt(BP_D))), ag_causal_mask(ctx, BP_T), -INFINITY);
        ag_tensor *o = ag_matmul(ctx, ag_softmax(ctx, s), in[2]);                      // [T,D]
        if (o && ag_backward_from(ctx, o, dout) == AG_OK) rc = 0;
        for (int i = 0; i < 3 && rc == 0; i++) memcpy(g[i], in[i]->grad, ag_numel(in[i]) * sizeof(ag_real));
    }
    ag_ctx_free(ctx);
    return lesson_done(in, 3, rc);
}

// --- the reference, with the mistakes as flags (the answer: derive yours first) ---

static void bp_ln_reference(const ag_real *x, const ag_real *w, const ag_real *dy, int N, int C, double eps,
                            int flags, ag_real *dx, ag_real *dw, ag_real *db)
{
    for (int c = 0; c < C; c++) dw[c] = db[c] = 0;
    for (int r = 0; r < N; r++) {
        const ag_real *xr = x + r * C, *dyr = dy + r * C;
        double mean = 0, var = 0, m1 = 0, m2 = 0;
        for (int c = 0; c < C; c++) mean += xr[c] / (double)C;
        for (int c = 0; c < C; c++) var += (xr[c] - mean) * (xr[c] - mean);
        var /= flags & LN_UNBIASED ? C - 1 : C;
        double rstd = 1 / sqrt(var + (flags & LN_NO_EPS ? 0 : eps));
        for (int c = 0; c < C; c++) {   /* dxhat = dy w; its mean, and its mean against xhat */
            double xh = (xr[c] - mean) * rstd, g = (double)dyr[c] * w[c];
            m1 += g / C, m2 += g * xh / C;
            dw[c] += (ag_real)(dyr[c] * (flags & LN_DW_X ? (double)xr[c] : xh));
            db[c] += dyr[c];
        }
        for (int c = 0; c < C; c++) {
            double xh = (xr[c] - mean) * rstd, g = (double)dyr[c] * w[c];
            dx[r * C + c] = (ag_real)(rstd * (g - (flags & LN_NO_MEAN ? 0 : m1) - (flags & LN_NO_VAR ? 0 : xh * m2)));
        }
    }
}

static void bp_head_reference(const ag_real *q, const ag_real *k, const ag_real *v, const ag_real *dout, int T,
                              int D, int flags, ag_real *dq, ag_real *dk, ag_real *dv)
{
    double A[BP_T][BP_T] = {{0}}, dS[BP_T][BP_T] = {{0}}, sc = flags & HD_NO_SCALE ? 1 : 1 / sqrt(D);
    for (int t = 0; t < T; t++) {   /* A: the causal softmax of the scaled scores, row by row */
        double m = -INFINITY, z = 0;
        for (int j = 0; j <= t; j++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += (double)q[t * D + d] * k[j * D + d];
            A[t][j] = s / sqrt(D), m = fmax(m, A[t][j]);
        }
        for (int j = 0; j <= t; j++) A[t][j] = exp(A[t][j] - m), z += A[t][j];
        for (int j = 0; j <= t; j++) A[t][j] /= z;
    }
    for (int t = 0; t < T; t++) {   /* dA = dout v^T; dS = A (dA - rowsum(A dA)) */
        double dA[BP_T] = {0}, sum = 0;
        for (int j = 0; j <= t; j++) {
            for (int d = 0; d < D; d++) dA[j] += (double)dout[t * D + d] * v[j * D + d];
            sum += A[t][j] * dA[j];
        }
        for (int j = 0; j <= t; j++) dS[t][j] = A[t][j] * (dA[j] - (flags & HD_NO_ROWSUM ? 0 : sum));
    }
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++) {
            double gq = 0, gk = 0, gv = 0;
            for (int j = 0; j < T; j++) {
                gq += dS[t][j] * k[j * D + d];
                gk += (flags & HD_DK_NO_T ? dS[t][j] : dS[j][t]) * q[j * D + d];
                gv += (flags & HD_DV_NO_T ? A[t][j] : A[j][t]) * dout[j * D + d];
            }
            dq[t * D + d] = (ag_real)(sc * gq), dk[t * D + d] = (ag_real)(sc * gk), dv[t * D + d] = (ag_real)gv;
        }
}

// --- the checks ---

static void bp_fill(ag_rng *rng, ag_real *a, int n, double lo, double hi)
{
    for (int i = 0; i < n; i++) a[i] = (ag_real)(lo + (hi - lo) * ag_rng_uniform(rng));
}

/* prints how far each of g [3] is from want [3] (the library's); 0 when all agree */
static int bp_verdict(const char *name, const char *const gname[3], ag_real *g[3], ag_real *want[3], const size_t n[3])
{
    double worst = 0;
    printf("%s:", name);
    for (int i = 0; i < 3; i++) {
        double e = bp_rel(g[i], want[i], n[i]);
        worst = fmax(worst, e);
        printf(" %s %.1e%s", gname[i], e, i < 2 ? "," : "");
    }
    printf(" (largest difference / largest gradient; at most %.0e passes)\n", BP_RTOL);
    return worst <= BP_RTOL ? 0 : 1;
}

/* Your LayerNorm backward against ag_layernorm's, on seed's inputs. 0 ok, 1 wrong (the mistake
 * named when it is a usual one: printed, and in *named unless named is NULL), 2 the library's
 * could not run. */
static int backprop_check_ln(ln_backward_fn mine, uint64_t seed, const char **named)
{
    ag_real x[BP_N * BP_C], w[BP_C], b[BP_C], dy[BP_N * BP_C], g[3][BP_N * BP_C], lib[3][BP_N * BP_C];
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    bp_fill(&rng, x, BP_N * BP_C, -2, 2), bp_fill(&rng, w, BP_C, 0.5, 1.5), bp_fill(&rng, b, BP_C, -1, 1);
    bp_fill(&rng, dy, BP_N * BP_C, -1, 1);
    ag_real *gl[3] = {lib[0], lib[1], lib[2]}, *gm[3] = {g[0], g[1], g[2]};
    if (bp_library_ln(x, w, b, dy, gl)) return 2;
    mine(x, w, dy, BP_N, BP_C, BP_EPS, g[0], g[1], g[2]);
    const char *names[3] = {"dx", "dw", "db"};
    const size_t n[3] = {BP_N * BP_C, BP_C, BP_C};
    int rc = bp_verdict("LayerNorm backward against ag_layernorm's", names, gm, gl, n);
    if (named) *named = NULL;
    for (size_t m = 0; rc && m < sizeof bp_ln_mistakes / sizeof bp_ln_mistakes[0]; m++) {
        ag_real r[3][BP_N * BP_C], *gr[3] = {r[0], r[1], r[2]};
        bp_ln_reference(x, w, dy, BP_N, BP_C, BP_EPS, bp_ln_mistakes[m].flag, r[0], r[1], r[2]);
        bool same = true;
        for (int i = 0; i < 3; i++) same = same && bp_rel(gm[i], gr[i], n[i]) <= BP_RTOL;
        if (!same) continue;
        if (named) *named = bp_ln_mistakes[m].what;
        return printf("FAIL: %s\n", bp_ln_mistakes[m].what), 1;
    }
    if (rc) printf("FAIL: none of the usual mistakes; compare dx, dw, db term by term with your derivation\n");
    return rc;
}

/* Your attention head's backward against the library's ops, on seed's inputs. As above. */
static int backprop_check_head(head_backward_fn mine, uint64_t seed, const char **named)
{
    enum { n = BP_T * BP_D };
    ag_real q[n], k[n], v[n], dout[n], g[3][n], lib[3][n];
    ag_rng rng;
    ag_rng_seed(&rng, seed);
    bp_fill(&rng, q, n, -1.5, 1.5), bp_fill(&rng, k, n, -1.5, 1.5), bp_fill(&rng, v, n, -1, 1);
    bp_fill(&rng, dout, n, -1, 1);
    ag_real *gl[3] = {lib[0], lib[1], lib[2]}, *gm[3] = {g[0], g[1], g[2]};
    if (bp_library_head(q, k, v, dout, gl)) return 2;
    mine(q, k, v, dout, BP_T, BP_D, g[0], g[1], g[2]);
    const char *names[3] = {"dq", "dk", "dv"};
    const size_t ns[3] = {n, n, n};
    int rc = bp_verdict("attention head backward against the library's ops", names, gm, gl, ns);
    if (named) *named = NULL;
    for (size_t m = 0; rc && m < sizeof bp_head_mistakes / sizeof bp_head_mistakes[0]; m++) {
        ag_real r[3][n];
        bp_head_reference(q, k, v, dout, BP_T, BP_D, bp_head_mistakes[m].flag, r[0], r[1], r[2]);
        bool same = true;
        for (int i = 0; i < 3; i++) same = same && bp_rel(gm[i], r[i], n) <= BP_RTOL;
        if (!same) continue;
        if (named) *named = bp_head_mistakes[m].what;
        return printf("FAIL: %s\n", bp_head_mistakes[m].what), 1;
    }
    if (rc) printf("FAIL: none of the usual mistakes; compare dq, dk, dv term by term with your derivation\n");
    return rc;
}

#endif
