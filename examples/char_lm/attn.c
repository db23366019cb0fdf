/* attn.c -- attention weights of a prompt, their statistics, and `char_lm attn` (see attn.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attn.h"
#include "plot.h"

void lm_attn_stats(const ag_real *A, int B, int H, int T, double *entropy, double *peak)
{
    double sum_h = 0, sum_p = 0;
    size_t rows = 0;
    int t0 = T > 1 ? 1 : 0;   /* row 0 is always one-hot: leave it out when there is more */
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = t0; t < T; t++) {
                const ag_real *a = A + (((size_t)b * H + h) * T + t) * T;   // [T] row t
                double e = 0, m = 0;
                for (int j = 0; j <= t; j++) {   /* keys after t are masked: weight 0 */
                    double w = (double)a[j];
                    if (w > 0) e -= w * log(w);
                    if (w > m) m = w;
                }
                sum_h += e;
                sum_p += m;
                rows++;
            }
    *entropy = rows ? sum_h / (double)rows : 0;
    *peak = rows ? sum_p / (double)rows : 0;
}

ag_status lm_attn_record(ag_ctx *ctx, ag_gpt *g, const int *ids, int B, int T, ag_tensor **A)
{
    int L = g->cfg.n_layer;
    for (int l = 0; l < L; l++) A[l] = NULL;
    bool grad = ag_ctx_grad_enabled(ctx);
    ag_ctx_set_grad(ctx, false);
    ag_gpt_forward(ctx, g, ids, NULL, B, T, &(ag_forward_opts){ .record_attention = A }, NULL);
    ag_ctx_set_grad(ctx, grad);
    ag_status s = ag_ctx_status(ctx);
    if (s)
        for (int l = 0; l < L; l++) A[l] = NULL;
    return s;
}

void lm_attn_label(uint32_t cp, char out[16])
{
    switch (cp) {
    case '\n': strcpy(out, "\\n"); return;
    case '\t': strcpy(out, "\\t"); return;
    case '\r': strcpy(out, "\\r"); return;
    case ' ': strcpy(out, "\xe2\x90\xa3"); return;   /* U+2423 OPEN BOX, the visible space */
    }
    if (cp < 0x20 || cp == 0x7f) snprintf(out, 16, "U+%04X", (unsigned)cp);
    else if (!utf8_put(cp, out)) snprintf(out, 16, "U+%04X", (unsigned)cp);
}

ag_status lm_attn_draw(lm_model *m, const char *prompt, int layer, int head, const char *png, char *err,
                       size_t errlen)
{
    ag_gpt *g = m->g;
    const ag_gpt_config *cfg = &g->cfg;
    if (layer < 0 || layer >= cfg->n_layer) {
        snprintf(err, errlen, "--layer %d: the model has %d layers (0 .. %d)", layer, cfg->n_layer, cfg->n_layer - 1);
        return AG_ERR_ARG;
    }
    if (head < -1 || head >= cfg->n_head) {
        snprintf(err, errlen, "--head %d: the model has %d heads (0 .. %d)", head, cfg->n_head, cfg->n_head - 1);
        return AG_ERR_ARG;
    }
    if (!prompt || !*prompt) {
        snprintf(err, errlen, "--prompt must not be empty");
        return AG_ERR_ARG;
    }
    int *ids = NULL;
    size_t n = 0;
    ag_status s = vocab_encode(&m->vocab, "--prompt", prompt, strlen(prompt), &ids, &n, err, errlen);
    if (s) return s;
    if (n > (size_t)cfg->block_size) {
        snprintf(err, errlen, "--prompt has %zu characters; the model sees at most block_size %d", n, cfg->block_size);
        free(ids);
        return AG_ERR_ARG;
    }
    int T = (int)n, H = cfg->n_head, n_maps = head < 0 ? H : 1;
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **A = calloc((size_t)cfg->n_layer, sizeof *A);
    ag_real *W = malloc((size_t)n_maps * T * T * sizeof *W);          // [n_maps,T,T]
    char (*labels)[16] = malloc((size_t)T * sizeof *labels);
    const char **lab = malloc((size_t)T * sizeof *lab);
    char (*titles)[64] = malloc((size_t)n_maps * sizeof *titles);
    const char **tit = malloc((size_t)n_maps * sizeof *tit);
    s = AG_ERR_NOMEM;
    if (!ctx || !A || !W || !labels || !lab || !titles || !tit) {
        snprintf(err, errlen, "attn: out of memory");
        goto out;
    }
    if ((s = lm_attn_record(ctx, g, ids, 1, T, A))) {
        snprintf(err, errlen, "attn: %s", ag_ctx_error(ctx));
        goto out;
    }
    const ag_real *a = A[layer]->data;                                // [1,H,T,T]
    for (int k = 0; k < n_maps; k++) {
        int h = head < 0 ? k : head;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)   /* the future (j > i) is masked: NaN, drawn blank */
                W[((size_t)k * T + i) * T + j] = j > i ? (ag_real)NAN : a[((size_t)h * T + i) * T + j];
        snprintf(titles[k], sizeof titles[k], "layer %d, head %d", layer, h);
        tit[k] = titles[k];
    }
    for (int i = 0; i < T; i++) {
        lm_attn_label(m->vocab.cp[ids[i]], labels[i]);
        lab[i] = labels[i];
    }
    char title[160];
    snprintf(title, sizeof title, "char_lm attn: layer %d%s, %d characters (row: query, column: key; blank: masked future)",
             layer, head < 0 ? ", every head" : "", T);
    s = lm_plot_attention(png, W, n_maps, T, lab, tit, title, err, errlen);
out:
    free(tit);
    free(titles);
    free(lab);
    free(labels);
    free(W);
    free(A);
    ag_ctx_free(ctx);
    free(ids);
    return s;
}
