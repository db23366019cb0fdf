/* 12-adamw.c -- lesson 12's exercise: one AdamW step by hand, next to the library's, on the
 * parameters of a small GPT with real gradients; and the learning rate and the clip it is
 * given.
 *
 *   g  = gscale dW                         the clip: gscale = max_norm / (||dW|| + 1e-6) or 1
 *   p  = (1 - lr wd) p                     decoupled weight decay, on 2-D weights only
 *   m  = b1 m + (1 - b1) g                 first moment
 *   v  = b2 v + (1 - b2) g^2               second moment
 *   p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)     bias-corrected step
 *
 * Built twice (the exercises' Makefile): against the double library it must equal
 * ag_adamw_step_scaled bit for bit, for every element of p, m and v; against the float library
 * (-DWANT_FLOAT) to within 1 ulp, since the library rounds to float after every operation and
 * this update, computed in double, only once at the end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <attograd/attograd.h>

#if defined(WANT_FLOAT) == defined(AG_DOUBLE)
#error "build with attograd-f64, or with attograd (float) and -DWANT_FLOAT"
#endif

enum { V = 11, L = 2, H = 2, C = 16, T = 8, B = 3, STEPS = 5 };

// --- your update ---

/* One AdamW step of one parameter tensor of n elements, in the order PyTorch computes it (and
 * adam.c): the constants in double, rounded once; every element in ag_real, the build's type. */
static void my_adamw(ag_real *p, const ag_real *dW, ag_real *m, ag_real *v, size_t n, const ag_adam_cfg *c, double lr,
                     long t, double gscale, bool decay)
{
    const ag_real keep = (ag_real)(1 - lr * (decay ? c->weight_decay : 0)), gs = (ag_real)gscale;
    const ag_real b1 = (ag_real)c->beta1, b2 = (ag_real)c->beta2, a1 = (ag_real)(1 - c->beta1),
                  a2 = (ag_real)(1 - c->beta2), eps = (ag_real)c->eps;
    const ag_real step = (ag_real)(lr / (1 - pow(c->beta1, (double)t)));
    const ag_real inv_sqrt_bc2 = (ag_real)(1 / sqrt(1 - pow(c->beta2, (double)t)));
    for (size_t i = 0; i < n; i++) {
        ag_real g = dW[i] * gs;
        m[i] = b1 * m[i] + a1 * g;
        v[i] = b2 * v[i] + a2 * g * g;
        p[i] = keep * p[i] - step * m[i] / (AG_SQRT(v[i]) * inv_sqrt_bc2 + eps);   /* sqrtf in float */
    }
}

/* The same step as textbooks write it, in double, rounded once at the end: m_hat = m / (1 -
 * b1^t), v_hat = v / (1 - b2^t), p -= lr (m_hat / (sqrt(v_hat) + eps) + wd p). Only p. */
static void textbook_adamw(ag_real *p, const ag_real *dW, const ag_real *m, const ag_real *v, size_t n,
                           const ag_adam_cfg *c, double lr, long t, double gscale, bool decay)
{
    double wd = decay ? c->weight_decay : 0;
    for (size_t i = 0; i < n; i++) {
        double g = (double)dW[i] * gscale;
        double m_hat = (c->beta1 * m[i] + (1 - c->beta1) * g) / (1 - pow(c->beta1, (double)t));
        double v_hat = (c->beta2 * v[i] + (1 - c->beta2) * g * g) / (1 - pow(c->beta2, (double)t));
        p[i] = (ag_real)(p[i] - lr * (m_hat / (sqrt(v_hat) + c->eps) + wd * p[i]));
    }
}

/* linear warmup, then cosine decay to min_lr (it counts from 0) */
static double my_lr(const ag_lr_schedule *s, long it)
{
    if (it < s->warmup_iters) return s->lr * (double)(it + 1) / (double)(s->warmup_iters + 1);
    if (it > s->lr_decay_iters) return s->min_lr;
    double r = (double)(it - s->warmup_iters) / (double)(s->lr_decay_iters - s->warmup_iters);
    return s->min_lr + 0.5 * (1 + cos(M_PI * r)) * (s->lr - s->min_lr);
}

/* the global norm: every gradient of the model, one sum */
static double my_norm(const ag_params *P)
{
    double sum = 0;
    for (size_t i = 0; i < P->total; i++) sum += (double)P->grad[i] * (double)P->grad[i];
    return sqrt(sum);
}

// --- comparing ---

/* how far apart two numbers of this build are, in units in the last place of a (0: equal) */
static double ulps(ag_real a, ag_real b)
{
    if (a == b) return 0;
#ifdef AG_DOUBLE
    double ulp = nextafter(a, INFINITY) - a;
#else
    double ulp = (double)nextafterf(a, INFINITY) - (double)a;
#endif
    return fabs((double)a - (double)b) / ulp;
}

/* the largest distance of mine from the library's, over every element of the model */
static double worst_ulps(const ag_real *mine, const ag_real *lib, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) w = fmax(w, ulps(mine[i], lib[i]));
    return w;
}

static ag_status gradients(ag_ctx *ctx, ag_gpt *g, ag_rng *rng)
{
    int ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = (int)ag_rng_below(rng, V), targets[i] = (int)ag_rng_below(rng, V);
    ag_ctx_reset(ctx);
    ag_params_zero_grad(g->params);
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, ids, targets, B, T, &(ag_forward_opts){ .train = true }, &loss);
    return loss ? ag_backward(ctx, loss) : ag_ctx_status(ctx);
}

int main(void)
{
    const ag_gpt_config cfg = { .vocab_size = V, .n_layer = L, .n_head = H, .n_embd = C, .block_size = T };
    ag_gpt *g = ag_gpt_new(&cfg, 12, NULL);
    ag_ctx *ctx = ag_ctx_new();
    if (!g || !ctx) return 2;
    ag_params *P = g->params;
    size_t N = P->total, same = 0;
    ag_real *p = malloc(N * sizeof *p), *m = calloc(N, sizeof *m), *v = calloc(N, sizeof *v), *q = malloc(N * sizeof *q);
    if (!p || !m || !v || !q) return 2;
    memcpy(p, P->data, N * sizeof *p);                               /* your copy of the model */
    const ag_adam_cfg ac = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};
    const ag_lr_schedule sched = { 1e-2, 1e-3, 2, STEPS, AG_LR_COSINE };   /* warmup 2, cosine to step 5 */
    double max_norm = 0.5, w_p = 0, w_m = 0, w_v = 0, w_lr = 0, w_norm = 0, w_text = 0;
    ag_rng rng;
    ag_rng_seed(&rng, 12);
    for (long it = 0; it < STEPS; it++) {
        if (gradients(ctx, g, &rng)) return 2;                       /* dW at the library's weights */
        double lr = ag_lr_at(&sched, it), norm = ag_grad_norm(P), gscale = ag_clip_scale(norm, max_norm);
        w_lr = fmax(w_lr, fabs(my_lr(&sched, it) - lr));
        w_norm = fmax(w_norm, fabs(my_norm(P) - norm) / norm);
        memcpy(q, P->data, N * sizeof *q);
        for (int e = 0; e < P->n; e++) {                             /* yours, tensor by tensor */
            const ag_param_entry *E = &P->entries[e];
            size_t o = E->offset, n = ag_numel(E->t);
            my_adamw(p + o, P->grad + o, m + o, v + o, n, &ac, lr, it + 1, gscale, E->decay);
            textbook_adamw(q + o, P->grad + o, P->m + o, P->v + o, n, &ac, lr, it + 1, gscale, E->decay);
        }
        ag_adamw_step_scaled(P, &ac, lr, it + 1, gscale);            /* the library's */
        w_p = fmax(w_p, worst_ulps(p, P->data, N));
        w_m = fmax(w_m, worst_ulps(m, P->m, N));
        w_v = fmax(w_v, worst_ulps(v, P->v, N));
        w_text = fmax(w_text, worst_ulps(q, P->data, N));
        for (size_t i = 0; i < N; i++) same += q[i] == P->data[i];
        printf("step %ld: lr %.6f, ||dW|| %.4f, clip factor %.4f\n", it + 1, lr, norm, gscale);
    }
    for (int e = 0; e < 8; e++)
        printf("  %-24s %s, %s\n", P->entries[e].t->name, P->entries[e].t->ndim == 2 ? "2-D" : "1-D",
               P->entries[e].decay ? "decays" : "no decay");
    printf("lr: largest difference %.1e; global norm: largest relative difference %.1e\n", w_lr, w_norm);
    const char *type = sizeof(ag_real) == 8 ? "double" : "float";
    printf("my_adamw, %zu parameters x %d steps, %s: p %g ulp, m %g ulp, v %g ulp apart at most\n", N, STEPS, type, w_p,
           w_m, w_v);
    printf("textbook order, rounded once: %.1f%% of p equal, the rest up to %g ulp apart\n", 100.0 * same / (N * STEPS),
           w_text);
    double allowed = sizeof(ag_real) == 8 ? 0 : 1;                  /* double: bit for bit */
    bool ok = w_p <= allowed && w_m <= allowed && w_v <= allowed && w_lr == 0 && w_norm < 1e-12;
    printf("%s\n", ok ? "ok: the library's AdamW, step by step" : "FAIL");
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    free(p), free(m), free(v), free(q);
    return ok ? 0 : 1;
}
