/* attn_heads.c -- a line per head for `char_lm attn` (see attn_heads.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "attn.h"
#include "attn_heads.h"

void lm_attn_head_summary(const ag_real *a, int T, lm_attn_head *out)
{
    double sum[3] = {0}, h = 0, u = 0, p = 0;   /* sum: weight on self, on the previous key, on key 0 */
    int rows = T - 1;
    for (int t = 1; t < T; t++) {
        const ag_real *r = a + (size_t)t * T;   // [T] row t
        double e = 0, m = 0;
        for (int j = 0; j <= t; j++) {
            double w = (double)r[j];
            if (w > 0) e -= w * log(w);
            m = fmax(m, w);
        }
        h += e, u += log(t + 1.0), p += m;
        sum[0] += (double)r[t], sum[1] += (double)r[t - 1], sum[2] += (double)r[0];
    }
    static const char *names[3] = {"self (diagonal)", "previous character", "first position (sink)"};
    int best = 0;
    for (int k = 1; k < 3; k++)
        if (sum[k] > sum[best]) best = k;
    *out = (lm_attn_head){"uniform", 0, 0, 1};
    if (rows < 1) return;
    out->entropy = h / rows, out->uniform = u / rows, out->peak = p / rows;
    if (out->entropy < 0.9 * out->uniform) out->pattern = sum[best] / rows > 0.4 ? names[best] : "mixed";
}

ag_status lm_attn_heads(lm_model *m, const char *prompt, int layer, lm_attn_head **out, ag_error *err)
{
    ag_gpt *g = m->g;
    int H = g->cfg.n_head, *ids = NULL;
    size_t n = 0;
    ag_status s = ag_vocab_encode(&m->vocab, "--prompt", prompt, strlen(prompt), &ids, &n, err);
    if (s) return s;
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **A = calloc((size_t)g->cfg.n_layer, sizeof *A);
    *out = calloc((size_t)H, sizeof **out);
    if (!ctx || !A || !*out) s = ag_seterr(err, AG_ERR_NOMEM, "attn: out of memory");
    else if ((s = lm_attn_record(ctx, g, ids, 1, (int)n, A))) ag_seterr(err, s, "attn: %s", ag_ctx_error(ctx));
    for (int h = 0; s == AG_OK && h < H; h++)   // A[layer] [1,H,T,T]
        lm_attn_head_summary(A[layer]->data + (size_t)h * n * n, (int)n, &(*out)[h]);
    if (s) free(*out), *out = NULL;
    free(A);
    ag_ctx_free(ctx);
    free(ids);
    return s;
}
