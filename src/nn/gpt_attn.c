/* gpt_attn.c -- the attention weights of every layer of a GPT for a prompt, their statistics
 * (entropy, peak), a check that they are distributions, and a head's pattern named (nn.h).
 * char_lm's `attn` and --log-attn-stats, and serve's attention view, are on top of it. */
#include <math.h>
#include <stddef.h>
#include "nn.h"

ag_status ag_gpt_attn_record(ag_ctx *ctx, ag_gpt *g, const int *ids, int B, int T, ag_tensor **A)
{
    int L = g->cfg.n_layer;
    for (int l = 0; l < L; l++) A[l] = NULL;
    bool grad = ag_ctx_grad_enabled(ctx);
    ag_ctx_set_grad(ctx, false);
    ag_gpt_forward(ctx, g, ids, NULL, B, T, &(ag_forward_opts){ .record_attention = A }, NULL);   // A[l] [B,H,T,T]
    ag_ctx_set_grad(ctx, grad);
    ag_status s = ag_ctx_status(ctx);
    if (s)
        for (int l = 0; l < L; l++) A[l] = NULL;
    return s;
}

ag_status ag_gpt_attn_layer_stats(ag_ctx *ctx, ag_gpt *g, const int *ids, int B, int T, ag_tensor **A,
                                  double *entropy, double *peak, ag_error *err)
{
    ag_ctx_reset(ctx);
    ag_status s = ag_gpt_attn_record(ctx, g, ids, B, T, A);   // A[l] [B,H,T,T]
    if (s) ag_seterr(err, s, "attention statistics: %s", ag_ctx_error(ctx));
    for (int l = 0; s == AG_OK && l < g->cfg.n_layer; l++)
        ag_attn_stats(A[l]->data, B, g->cfg.n_head, T, &entropy[l], &peak[l]);
    ag_ctx_reset(ctx);
    return s;
}

/* Recording takes the composed attention (attention.c), whose scores, scaled scores, masked
 * scores and weights are each [1,H,T,T] and all stay in the arena with the causal mask [T,T]:
 * per layer 4 H T^2 + T^2 where ag_gpt_step_bytes counts the fused path's H T^2 (issue 19 review:
 * counting only that, the estimate was 3.7x under what char_lm attn took, and a hostile file passed). */
double ag_gpt_attn_bytes(const ag_gpt_config *m, int T, int n_maps)
{
    ag_gpt_config at = *m;
    at.block_size = T;
    double T2 = (double)T * T, composed = (double)m->n_layer * (3.0 * m->n_head * T2 + T2);
    return ag_gpt_step_bytes(&at, 1, false) + (composed + (double)n_maps * T2) * sizeof(ag_real);
}

/* -sum_j a_j ln a_j and max_j a_j over keys 0..t of a causal row a [T] (keys after t: weight 0). */
static void row_stats(const ag_real *a, int t, double *entropy, double *peak)
{
    double e = 0, m = 0;
    for (int j = 0; j <= t; j++) {
        double w = (double)a[j];
        if (w > 0) e -= w * log(w);
        if (w > m) m = w;
    }
    *entropy = e, *peak = m;
}

void ag_attn_stats(const ag_real *A, int B, int H, int T, double *entropy, double *peak)
{
    double sum_h = 0, sum_p = 0;
    size_t rows = 0;
    int t0 = T > 1 ? 1 : 0;   /* row 0 is always one-hot: leave it out when there is more */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = t0; t < T; t++) {
                double e, m;
                row_stats(A + (((size_t)b * H + h) * T + t) * T, t, &e, &m);   // [T] row t
                sum_h += e;
                sum_p += m;
                rows++;
            }
    *entropy = rows ? sum_h / (double)rows : 0;
    *peak = rows ? sum_p / (double)rows : 0;
}

ag_status ag_attn_check(const ag_tensor *a, int layer, const char *what, ag_error *err)
{
    int H = a->shape[1], T = a->shape[2];
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            const ag_real *row = a->data + ((size_t)h * T + i) * T;   // [T] keys of query i
            double sum = 0;
            for (int j = 0; j <= i; j++) sum += (double)row[j];
            if (!(fabs(sum - 1) < 1e-2))   /* float sums over up to 16384 keys: far from 1 only when broken */
                return ag_seterr(err, AG_ERR_NONFINITE, "%s: the attention weights of layer %d, head %d, query %d "
                                 "are not finite or do not sum to 1 (%g): the model's weights are not a usable model",
                                 what, layer, h, i, isnan(sum) ? NAN : sum);
        }
    return AG_OK;
}

const char *const ag_attn_pattern_names[AG_ATTN_MIXED + 1] = {
    "uniform", "self (diagonal)", "previous token", "first position (sink)", "mixed",
};

void ag_attn_head_summary(const ag_real *a, int T, ag_attn_head *out)
{
    double sum[3] = {0}, h = 0, u = 0, p = 0;   /* sum: weight on self, on the previous key, on key 0 */
    int rows = T - 1;
    for (int t = 1; t < T; t++) {
        const ag_real *r = a + (size_t)t * T;   // [T] row t
        double e, m;
        row_stats(r, t, &e, &m);
        h += e, u += log(t + 1.0), p += m;
        sum[0] += (double)r[t], sum[1] += (double)r[t - 1], sum[2] += (double)r[0];
    }
    static const ag_attn_pattern kinds[3] = {AG_ATTN_SELF, AG_ATTN_PREVIOUS, AG_ATTN_FIRST};
    int best = 0;
    for (int k = 1; k < 3; k++)
        if (sum[k] > sum[best]) best = k;
    *out = (ag_attn_head){AG_ATTN_UNIFORM, 0, 0, 1};
    if (rows < 1) return;
    out->entropy = h / rows, out->uniform = u / rows, out->peak = p / rows;
    if (out->entropy < 0.9 * out->uniform) out->pattern = sum[best] / rows > 0.4 ? kinds[best] : AG_ATTN_MIXED;
}
