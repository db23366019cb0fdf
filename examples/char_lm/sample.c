/* sample.c -- generation with a KV cache, temperature and top-k (see sample.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sample.h"

// --- one draw ---

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* scratch: [2V] doubles. */
int lm_sample_logits(const ag_real *logits, int V, double temperature, int top_k, double u, double *scratch)
{
    double *z = scratch, *sorted = scratch + V;
    double max = -INFINITY;
    for (int i = 0; i < V; i++) {
        z[i] = (double)logits[i] / temperature;
        if (z[i] > max) max = z[i];
    }
    double thr = -INFINITY;
    if (top_k > 0 && top_k < V) {   /* keep the top_k largest (and any tied with the last) */
        memcpy(sorted, z, (size_t)V * sizeof *z);
        qsort(sorted, (size_t)V, sizeof *sorted, cmp_desc);
        thr = sorted[top_k - 1];
    }
    double sum = 0;
    for (int i = 0; i < V; i++) {   /* softmax numerators, max subtracted for stability */
        z[i] = z[i] >= thr ? exp(z[i] - max) : 0.0;
        sum += z[i];
    }
    double target = u * sum, cum = 0;
    int last = 0;
    for (int i = 0; i < V; i++) {
        if (z[i] <= 0) continue;
        cum += z[i];
        last = i;
        if (cum > target) return i;
    }
    return last;   /* u * sum rounded up to the total */
}

// --- generation ---

/* Feeds tokens at positions 0, 1, ... and keeps the logits of the last one. With a KV cache
 * each token costs one position; for the switches the cache does not implement
 * (ag_gpt_cache_exact false: Post-LN, RMSNorm, --no-scale) the same logits come from a full
 * forward over the tokens fed so far, which costs up to block_size positions per token. */
typedef struct {
    ag_ctx *ctx;
    ag_gpt *g;
    ag_kv_cache *cache;   /* or NULL: full forwards over ids */
    int *ids;             /* [T] the tokens fed since the last clear */
    int len;
    ag_real *logits;      /* [V] of the last token fed */
} feeder;

static ag_status feed(feeder *f, int id, char *err, size_t errlen)
{
    ag_ctx_reset(f->ctx);
    ag_tensor *y;
    f->ids[f->len++] = id;
    if (f->cache) {
        y = ag_gpt_forward_cached(f->ctx, f->g, f->cache, id);                  // [V]
    } else {
        y = ag_gpt_forward(f->ctx, f->g, f->ids, NULL, 1, f->len, NULL, NULL);   // [1,len,V]
        if (y) y = ag_reshape(f->ctx, y, 2, (int[2]){ f->len, f->g->cfg.vocab_size }); // [len,V]
    }
    if (!y) {
        f->len--;
        snprintf(err, errlen, "sampling: %s", ag_ctx_error(f->ctx) ? ag_ctx_error(f->ctx) : "forward failed");
        return ag_ctx_status(f->ctx) ? ag_ctx_status(f->ctx) : AG_ERR_ARG;
    }
    size_t V = (size_t)f->g->cfg.vocab_size;
    memcpy(f->logits, y->data + (ag_numel(y) - V), V * sizeof(ag_real));   /* the last position */
    return AG_OK;
}

static void feeder_clear(feeder *f)
{
    f->len = 0;
    if (f->cache) ag_kv_cache_clear(f->cache);
}

ag_status lm_generate(ag_gpt *g, const int *prompt, size_t n_prompt, const lm_sample_opts *o,
                      lm_emit_fn emit, void *user, int *out, char *err, size_t errlen)
{
    int V = g->cfg.vocab_size, T = g->cfg.block_size;
    if (!(o->temperature > 0) || !isfinite(o->temperature) || o->top_k < 0 || o->max_new_tokens < 0) {
        snprintf(err, errlen, "sampling: need temperature > 0, top_k >= 0, max_new_tokens >= 0");
        return AG_ERR_ARG;
    }
    if (n_prompt < 1) {
        snprintf(err, errlen, "sampling: the prompt is empty");
        return AG_ERR_ARG;
    }
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V) {
            snprintf(err, errlen, "sampling: prompt token %d at %zu is outside [0, %d)", prompt[i], i, V);
            return AG_ERR_ARG;
        }
    if (o->max_new_tokens == 0) return AG_OK;

    ag_status st = AG_ERR_NOMEM;
    bool cached = ag_gpt_cache_exact(g);
    feeder f = {ag_ctx_new(), g, cached ? ag_kv_cache_new(g) : NULL, malloc((size_t)T * sizeof(int)), 0,
                malloc((size_t)V * sizeof(ag_real))};
    int *win = malloc((size_t)T * sizeof *win);                 /* [T] the tokens in the cache */
    double *scratch = malloc(2 * (size_t)V * sizeof *scratch);  /* [2V] */
    if (!f.ctx || (cached && !f.cache) || !f.ids || !f.logits || !win || !scratch) {
        snprintf(err, errlen, "sampling: out of memory");
        goto out;
    }
    ag_ctx_set_grad(f.ctx, false);
    ag_rng rng;
    ag_rng_seed(&rng, o->seed);

    /* the prompt: only its last T tokens fit */
    size_t start = n_prompt > (size_t)T ? n_prompt - (size_t)T : 0;
    int wn = 0;
    for (size_t i = start; i < n_prompt; i++) {
        if ((st = feed(&f, prompt[i], err, errlen))) goto out;
        win[wn++] = prompt[i];
    }
    int keep = T - T / 2;   /* tokens in the cache after a slide: ceil(T/2) >= 1 */
    for (long k = 0; k < o->max_new_tokens; k++) {
        int id = lm_sample_logits(f.logits, V, o->temperature, o->top_k, ag_rng_uniform(&rng), scratch);
        if (emit) emit(id, user);
        if (out) out[k] = id;
        if (k + 1 == o->max_new_tokens) break;
        if (f.len == T) {   /* full: slide by refeeding the last keep-1 tokens, then id */
            memmove(win, win + wn - (keep - 1), (size_t)(keep - 1) * sizeof *win);
            wn = keep - 1;
            feeder_clear(&f);
            for (int i = 0; i < wn; i++)
                if ((st = feed(&f, win[i], err, errlen))) goto out;
        }
        win[wn++] = id;
        if ((st = feed(&f, id, err, errlen))) goto out;
    }
    st = AG_OK;
out:
    free(scratch);
    free(win);
    free(f.logits);
    free(f.ids);
    ag_kv_cache_free(f.cache);
    ag_ctx_free(f.ctx);
    return st;
}

ag_status lm_sample_text(lm_model *m, const char *prompt, const lm_sample_opts *o, lm_emit_fn emit,
                         void *user, int **prompt_ids, size_t *n_prompt, char *err, size_t errlen)
{
    int *ids = NULL;
    size_t n = 0;
    if (!prompt || !*prompt) {
        int nl = vocab_id(&m->vocab, '\n');
        if (!(ids = malloc(sizeof *ids))) {
            snprintf(err, errlen, "sampling: out of memory");
            return AG_ERR_NOMEM;
        }
        ids[0] = nl >= 0 ? nl : 0;
        n = 1;
    } else {
        ag_status st = vocab_encode(&m->vocab, "--prompt", prompt, strlen(prompt), &ids, &n, err, errlen);
        if (st) return st;
    }
    ag_status st = lm_generate(m->g, ids, n, o, emit, user, NULL, err, errlen);
    if (prompt_ids && st == AG_OK) {
        *prompt_ids = ids;
        *n_prompt = n;
    } else {
        free(ids);
    }
    return st;
}
