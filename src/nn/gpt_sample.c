/* gpt_sample.c -- generation from a trained GPT with a KV cache, temperature and top-k, over
 * token ids (nn.h: ag_gpt_generate). char_lm's `sample` and serve's GPT sample are on top of it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nn.h"
#include "../tensor/rng.h"

// --- one draw ---

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* scratch: [2V] doubles. */
int ag_sample_logits(const ag_real *logits, int V, double temperature, int top_k, double u, double *scratch)
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

/* Feeds tokens at positions 0, 1, ... through the KV cache, one position per token (the cached
 * step runs the same blocks as training), and keeps the logits of the last one. */
typedef struct {
    ag_ctx *ctx;
    ag_gpt *g;
    ag_kv_cache *cache;
    int len;              /* tokens fed since the last clear */
    ag_real *logits;      /* [V] of the last token fed */
} feeder;

/* The buffers of a feeder for g; false when out of memory (feeder_release frees what there is). */
static bool feeder_init(feeder *f, ag_gpt *g)
{
    *f = (feeder){ag_ctx_new(), g, ag_kv_cache_new(g), 0, malloc((size_t)g->cfg.vocab_size * sizeof(ag_real))};
    if (!f->ctx || !f->cache || !f->logits) return false;
    ag_ctx_set_grad(f->ctx, false);
    return true;
}

static void feeder_release(feeder *f)
{
    free(f->logits);
    ag_kv_cache_free(f->cache);
    ag_ctx_free(f->ctx);
}

static ag_status feed(feeder *f, int id, ag_error *err)
{
    ag_ctx_reset(f->ctx);
    ag_tensor *y = ag_gpt_forward_cached(f->ctx, f->g, f->cache, id);                  // [V]
    if (!y) {
        ag_status s = ag_ctx_status(f->ctx) ? ag_ctx_status(f->ctx) : AG_ERR_ARG;
        return ag_seterr(err, s, "sampling: %s", ag_ctx_error(f->ctx) ? ag_ctx_error(f->ctx) : "forward failed");
    }
    f->len++;
    size_t V = (size_t)f->g->cfg.vocab_size;
    memcpy(f->logits, y->data, V * sizeof(ag_real));                          // [V]
    for (size_t i = 0; i < V; i++)   /* finite but absurd weights (every one FLT_MAX): refused, as eval does */
        if (!isfinite(f->logits[i]))
            return ag_seterr(err, AG_ERR_NONFINITE, "sampling: the model's output at position %d is not finite (%g): "
                             "its weights are not a usable model", f->len - 1, isnan(f->logits[i]) ? NAN : (double)f->logits[i]);
    return AG_OK;
}

static void feeder_clear(feeder *f)
{
    f->len = 0;
    ag_kv_cache_clear(f->cache);
}

/* A full window: keep its last keep-1 tokens and feed them again from position 0. win [T]
 * holds the tokens in the window, *wn of them. */
static ag_status slide(feeder *f, int *win, int *wn, int keep, ag_error *err)
{
    memmove(win, win + *wn - (keep - 1), (size_t)(keep - 1) * sizeof *win);
    *wn = keep - 1;
    feeder_clear(f);
    ag_status st = AG_OK;
    for (int i = 0; i < *wn && st == AG_OK; i++) st = feed(f, win[i], err);
    return st;
}

/* The prompt, of which only the last block_size tokens fit: win gets them, *wn counts them. */
static ag_status feed_prompt(feeder *f, const int *prompt, size_t n_prompt, int *win, int *wn, ag_error *err)
{
    size_t T = (size_t)f->g->cfg.block_size;
    for (size_t i = n_prompt > T ? n_prompt - T : 0; i < n_prompt; i++) {
        ag_status st = feed(f, prompt[i], err);
        if (st) return st;
        win[(*wn)++] = prompt[i];
    }
    return AG_OK;
}

static ag_status check_options(const ag_gpt *g, const int *prompt, size_t n_prompt, const ag_sample_opts *o,
                               ag_error *err)
{
    if (!(o->temperature > 0) || !isfinite(o->temperature) || o->top_k < 0 || o->max_new_tokens < 0)
        return ag_seterr(err, AG_ERR_ARG, "sampling: need temperature > 0, top_k >= 0, max_new_tokens >= 0");
    if (n_prompt < 1) return ag_seterr(err, AG_ERR_ARG, "sampling: the prompt is empty");
    for (size_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= g->cfg.vocab_size)
            return ag_seterr(err, AG_ERR_ARG, "sampling: prompt token %d at %zu is outside [0, %d)", prompt[i], i,
                             g->cfg.vocab_size);
    return AG_OK;
}

ag_status ag_gpt_generate(ag_gpt *g, const int *prompt, size_t n_prompt, const ag_sample_opts *o, ag_emit_fn emit,
                          ag_seen_fn seen, void *user, int *out, ag_error *err)
{
    ag_status st = check_options(g, prompt, n_prompt, o, err);
    if (st || o->max_new_tokens == 0) return st;
    int V = g->cfg.vocab_size, T = g->cfg.block_size;
    feeder f;
    bool ok = feeder_init(&f, g);
    int *win = malloc((size_t)T * sizeof *win);                 /* [T] the tokens in the cache */
    double *scratch = malloc(2 * (size_t)V * sizeof *scratch);  /* [2V] */
    ag_rng rng;
    ag_rng_seed(&rng, o->seed);
    if (!ok || !win || !scratch) st = ag_seterr(err, AG_ERR_NOMEM, "sampling: out of memory");
    int wn = 0;
    if (st == AG_OK) st = feed_prompt(&f, prompt, n_prompt, win, &wn, err);
    int keep = T - T / 2;   /* tokens in the cache after a slide: ceil(T/2) >= 1 */
    for (long k = 0; k < o->max_new_tokens && st == AG_OK; k++) {
        int id = ag_sample_logits(f.logits, V, o->temperature, o->top_k, ag_rng_uniform(&rng), scratch);
        if (out) out[k] = id;
        if (seen) seen(f.logits, V, user);
        if (emit && !emit(id, user)) {
            st = ag_seterr(err, AG_ERR_IO, "sampling: stopped, the output cannot be written");
            break;
        }
        if (k + 1 == o->max_new_tokens || (o->stop && *o->stop)) break;
        if (f.len == T) st = slide(&f, win, &wn, keep, err);   /* full: slide by half a window */
        if (st == AG_OK) win[wn++] = id;
        if (st == AG_OK) st = feed(&f, id, err);
    }
    free(scratch);
    free(win);
    feeder_release(&f);
    return st;
}
