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
    else if (!ag_utf8_put(cp, out)) snprintf(out, 16, "U+%04X", (unsigned)cp);
}

// --- `char_lm attn` ---

/* --layer and --head against the model, and the prompt: every character in the vocabulary, at
 * most block_size of them. On success *ids (malloc'd [*n]) holds the prompt's tokens. */
static ag_status check_args(lm_model *m, const char *prompt, int layer, int head, int **ids, size_t *n,
                            ag_error *err)
{
    const ag_gpt_config *cfg = &m->g->cfg;
    if (layer < 0 || layer >= cfg->n_layer)
        return ag_seterr(err, AG_ERR_ARG, "--layer %d: the model has %d layers (0 .. %d)", layer, cfg->n_layer,
                         cfg->n_layer - 1);
    if (head < -1 || head >= cfg->n_head)
        return ag_seterr(err, AG_ERR_ARG, "--head %d: the model has %d heads (0 .. %d)", head, cfg->n_head,
                         cfg->n_head - 1);
    if (!prompt || !*prompt) return ag_seterr(err, AG_ERR_ARG, "--prompt must not be empty");
    ag_status s = ag_vocab_encode(&m->vocab, "--prompt", prompt, strlen(prompt), ids, n, err);
    if (s) return s;
    if (*n <= (size_t)cfg->block_size) return AG_OK;
    free(*ids);
    *ids = NULL;
    return ag_seterr(err, AG_ERR_ARG, "--prompt has %zu characters; the model sees at most block_size %d", *n,
                     cfg->block_size);
}

/* What lm_plot_attention draws: n_maps panels of T x T weights, a title per panel, a label per
 * position. */
typedef struct {
    ag_real *W;                /* [n_maps,T,T] */
    char (*titles)[64];        /* [n_maps] */
    const char **tit;          /* [n_maps] pointers to titles[k] */
    char (*labels)[16];        /* [T] */
    const char **lab;          /* [T] pointers to labels[i] */
} heat_maps;

static bool maps_alloc(heat_maps *hm, int n_maps, int T)
{
    hm->W = malloc((size_t)n_maps * T * T * sizeof *hm->W);
    hm->labels = malloc((size_t)T * sizeof *hm->labels);
    hm->lab = malloc((size_t)T * sizeof *hm->lab);
    hm->titles = malloc((size_t)n_maps * sizeof *hm->titles);
    hm->tit = malloc((size_t)n_maps * sizeof *hm->tit);
    return hm->W && hm->labels && hm->lab && hm->titles && hm->tit;
}

static void maps_free(heat_maps *hm)
{
    free(hm->tit);
    free(hm->titles);
    free(hm->lab);
    free(hm->labels);
    free(hm->W);
}

/* Panel k: a head's weights from a [1,H,T,T] (every head, or just `head`); the axes: the
 * prompt's characters. */
static void fill_maps(heat_maps *hm, const ag_real *a, const lm_model *m, const int *ids, int layer, int head,
                      int n_maps, int T)
{
    for (int k = 0; k < n_maps; k++) {
        int h = head < 0 ? k : head;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++)   /* the future (j > i) is masked: NaN, drawn blank */
                hm->W[((size_t)k * T + i) * T + j] = j > i ? (ag_real)NAN : a[((size_t)h * T + i) * T + j];
        snprintf(hm->titles[k], sizeof hm->titles[k], "layer %d, head %d", layer, h);
        hm->tit[k] = hm->titles[k];
    }
    for (int i = 0; i < T; i++) {
        lm_attn_label(m->vocab.cp[ids[i]], hm->labels[i]);
        hm->lab[i] = hm->labels[i];
    }
}

/* The attention weights a [1,H,T,T] of layer are a distribution on every row (finite, summing
 * to 1 over the keys up to the query): a model whose weights are finite but absurd (every one
 * FLT_MAX) gives NaN or rows of zeros, refused as eval refuses its loss (issue 35). */
static ag_status weights_usable(const ag_tensor *a, int layer, ag_error *err)
{
    int H = a->shape[1], T = a->shape[2];
    for (int h = 0; h < H; h++)
        for (int i = 0; i < T; i++) {
            const ag_real *row = a->data + ((size_t)h * T + i) * T;   // [T] keys of query i
            double sum = 0;
            for (int j = 0; j <= i; j++) sum += (double)row[j];
            if (!(fabs(sum - 1) < 1e-2))   /* float sums over up to 16384 keys: far from 1 only when broken */
                return ag_seterr(err, AG_ERR_NONFINITE, "attn: the attention weights of layer %d, head %d, query %d "
                                 "are not finite or do not sum to 1 (%g): the model's weights are not a usable model",
                                 layer, h, i, isnan(sum) ? NAN : sum);
        }
    return AG_OK;
}

/* Records the attention of ids [T] and draws layer's heads into png. */
static ag_status draw(lm_model *m, const int *ids, int T, int layer, int head, const char *png, ag_error *err)
{
    ag_gpt *g = m->g;
    int n_maps = head < 0 ? g->cfg.n_head : 1;
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **A = calloc((size_t)g->cfg.n_layer, sizeof *A);
    heat_maps hm;
    bool ok = maps_alloc(&hm, n_maps, T);
    ag_status s = AG_OK;
    if (!ctx || !A || !ok) s = ag_seterr(err, AG_ERR_NOMEM, "attn: out of memory");
    else if ((s = lm_attn_record(ctx, g, ids, 1, T, A))) ag_seterr(err, s, "attn: %s", ag_ctx_error(ctx));
    if (s == AG_OK) s = weights_usable(A[layer], layer, err);
    if (s == AG_OK) {
        fill_maps(&hm, A[layer]->data, m, ids, layer, head, n_maps, T);   // A[layer] [1,H,T,T]
        char title[160];
        snprintf(title, sizeof title, "char_lm attn: layer %d%s, %d characters (row: query, column: key; blank: "
                 "masked future)", layer, head < 0 ? ", every head" : "", T);
        s = lm_plot_attention(png, hm.W, n_maps, T, hm.lab, hm.tit, title, err);
    }
    maps_free(&hm);
    free(A);
    ag_ctx_free(ctx);
    return s;
}

/* Recording takes the composed attention (nn/attention.c), whose scores, scaled scores, masked
 * scores and weights are each [1,H,T,T] and all stay in the arena with the causal mask [T,T]:
 * per layer 4 H T^2 + T^2 where ag_gpt_step_bytes counts the fused path's H T^2 (issue 19 review:
 * counting only that, the estimate was 3.7x under what attn took, and a hostile file passed). */
double lm_attn_bytes(const ag_gpt_config *m, int T, int n_maps)
{
    ag_gpt_config at = *m;
    at.block_size = T;
    double T2 = (double)T * T, composed = (double)m->n_layer * (3.0 * m->n_head * T2 + T2);
    return ag_gpt_step_bytes(&at, 1, false) + (composed + (double)n_maps * T2) * sizeof(ag_real);
}

/* Refused before anything of its size exists, as eval and sample are (issue 19: a 326 KB file
 * claiming 12 layers and block_size 8192 made a prompt of that length take 26 GB). */
static ag_status check_memory(const lm_model *m, int T, int head, ag_error *err)
{
    ag_gpt_config at = m->g->cfg;
    int n_maps = head < 0 ? at.n_head : 1;
    at.block_size = T;   /* the message names the prompt's length as the block it costs */
    char shape[AG_GPT_SHAPE_LEN];
    return ag_check_memory(lm_attn_bytes(&m->g->cfg, T, n_maps), "attn", ag_gpt_shape_str(&at, 1, shape), err);
}

ag_status lm_attn_draw(lm_model *m, const char *prompt, int layer, int head, const char *png, ag_error *err)
{
    int *ids = NULL;
    size_t n = 0;
    ag_status s = check_args(m, prompt, layer, head, &ids, &n, err);
    if (s == AG_OK) s = check_memory(m, (int)n, head, err);
    if (s == AG_OK) s = draw(m, ids, (int)n, layer, head, png, err);
    free(ids);
    return s;
}
