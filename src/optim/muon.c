/* muon.c -- Muon (Jordan et al. 2024, "Muon: an optimizer for hidden layers in neural
 * networks"), scaled as Liu et al. 2025 ("Muon is scalable for LLM training") scale it, for the
 * hidden matrices (params.h's `hidden`: the Linear weights inside the blocks). Every other
 * parameter (the embeddings, the output head, biases, norms) takes AdamW's step.
 *
 *   buf = mu buf + g                       momentum, mu = AG_MUON_MOMENTUM (0.95); buf is P->m
 *   u   = g + mu buf                       Nesterov's look-ahead
 *   O   = NS5(u)                           about U V^T of u = U S V^T: every direction of u's
 *                                          update at about the same size
 *   p  -= lr wd p                          decoupled decay, as AdamW's
 *   p  -= lr (0.2 sqrt(max(rows, cols))) O the factor gives O the root-mean-square of a typical
 *                                          AdamW update, so AdamW's lr and decay carry over
 *
 * NS5 is Newton-Schulz's quintic iteration, five rounds from X = u / ||u||_F:
 *
 *   A = X X^T;   X = a X + (b A + c A A) X,     (a, b, c) = (3.4445, -4.7750, 2.0315)
 *
 * Each round maps every singular value s of X to a s + b s^3 + c s^5 and keeps the singular
 * vectors, so five rounds take every s in (0, 1] to about 0.7-1.2 (not exactly 1: these
 * coefficients trade that for speed). X is kept wide (rows <= cols, transposed when the weight
 * is tall), so that A is the small side squared. P->v is unused for a hidden matrix (zeros in a
 * checkpoint). Why it pays: a gradient of a weight matrix is dominated by a few directions;
 * orthogonalized, the rare directions learn as fast as the common ones (Jordan's post).
 * The rest takes AdamW at lr times c->adamw_lr_scale (char_lm's --adamw-lr-scale; the 5min
 * recipe takes 0.5: docs/performance.md, "Muon for M and L"). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "muon.h"
#include "../tensor/parallel.h"   /* ag_gemm */

void ag_muon_orthogonalize(ag_real *X, int m, int n, ag_real *work)
{
    const ag_real a = (ag_real)3.4445, b = (ag_real)-4.7750, c = (ag_real)2.0315;
    size_t mn = (size_t)m * n, mm = (size_t)m * m;
    ag_real *out = X, *Y = work, *A = Y + mn, *B = A + mm;
    double ss = 0;
    for (size_t i = 0; i < mn; i++) ss += (double)X[i] * X[i];
    ag_real inv = (ag_real)(1 / (sqrt(ss) + 1e-7));                    /* X / ||X||_F: every s <= 1 */
    for (size_t i = 0; i < mn; i++) X[i] *= inv;
    for (int round = 0; round < 5; round++) {
        ag_gemm(false, true, m, m, n, 1, X, n, X, n, 0, A, m);          // A = X X^T       [m,m]
        ag_gemm(false, false, m, m, m, c, A, m, A, m, 0, B, m);          // B = c A A       [m,m]
        for (size_t i = 0; i < mm; i++) B[i] += b * A[i];                // B += b A
        memcpy(Y, X, mn * sizeof *X);
        ag_gemm(false, false, m, n, m, 1, B, m, X, n, a, Y, n);          // Y = a X + B X   [m,n]
        ag_real *next = Y;                                                /* the next round reads Y */
        Y = X;
        X = next;
    }
    if (X != out) memcpy(out, X, mn * sizeof *X);
}

double ag_muon_flops(int rows, int cols)
{
    double m = rows < cols ? rows : cols, n = rows < cols ? cols : rows;
    return 5 * (2 * m * m * n + 2 * m * m * m + 2 * m * m * n);
}

/* Each thread's scratch: the largest hidden matrix's X, Y [m n] and A, B [m m], m its smaller side. */
static size_t work_per_thread(const ag_params *P)
{
    size_t need = 0;
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        if (!P->entries[e].hidden) continue;
        size_t m = (size_t)(t->shape[0] < t->shape[1] ? t->shape[0] : t->shape[1]);
        size_t n = ag_numel(t);
        if (2 * n + 2 * m * m > need) need = 2 * n + 2 * m * m;
    }
    return need;
}

static ag_status make_work(ag_params *P, size_t need)
{
    if (need <= P->work_n) return AG_OK;
    ag_real *w = malloc(need * sizeof *w);
    if (!w) return ag_params_fail(P, AG_ERR_NOMEM, "muon: out of memory for its scratch (%zu values)", need);
    free(P->work);
    P->work = w;
    P->work_n = need;
    return AG_OK;
}

/* u = g + mu buf after buf = mu buf + g, into X (transposed when the weight is tall: r > k). */
static void nesterov(ag_real *X, const ag_real *g, ag_real *buf, int r, int k, ag_real gs)
{
    const ag_real mu = (ag_real)AG_MUON_MOMENTUM;
    for (int i = 0; i < r; i++)
        for (int j = 0; j < k; j++) {
            size_t at = (size_t)i * k + j;
            ag_real gi = g[at] * gs;
            buf[at] = mu * buf[at] + gi;
            X[r <= k ? at : (size_t)j * r + i] = gi + mu * buf[at];
        }
}

/* One hidden matrix [r,k]: its momentum, orthogonalized, scaled, and the decay. */
static void muon_update(ag_params *P, const ag_param_entry *E, const ag_adam_cfg *c, double lr, ag_real gs,
                        ag_real *X)
{
    int r = E->t->shape[0], k = E->t->shape[1];
    int m = r <= k ? r : k, n = r <= k ? k : r;
    ag_real *p = P->data + E->offset;
    nesterov(X, P->grad + E->offset, P->m + E->offset, r, k, gs);
    ag_muon_orthogonalize(X, m, n, X + (size_t)m * n);
    ag_real keep = (ag_real)(1 - lr * (E->decay ? c->weight_decay : 0));
    ag_real step = (ag_real)(lr * AG_MUON_SCALE * sqrt((double)n));
    for (int i = 0; i < r; i++)
        for (int j = 0; j < k; j++) {
            size_t at = (size_t)i * k + j;
            p[at] = keep * p[at] - step * X[r <= k ? at : (size_t)j * r + i];
        }
}

/* The matrices one by one across the threads, each whole on its thread with scratch of its own.
 * Always inside a parallel region, even on one thread: ag_gemm then runs each product whole, so
 * one thread and two give the same bits. */
ag_status ag_muon_step(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale)
{
    size_t per = work_per_thread(P);
    int threads = omp_get_max_threads();
    ag_status s = make_work(P, per * (size_t)threads);
    if (s) return s;
    double rest_lr = lr * (c->adamw_lr_scale > 0 ? c->adamw_lr_scale : 1);   /* 0: as the matrices */
    ag_adamw_step_not_hidden(P, c, rest_lr, t, grad_scale);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int e = 0; e < P->n; e++)
        if (P->entries[e].hidden)
            muon_update(P, &P->entries[e], c, lr, (ag_real)grad_scale, P->work + per * (size_t)omp_get_thread_num());
    return AG_OK;
}
