/* serve.c -- char_lm's model for `char_lm serve` (the library's serve, src/serve/serve.h,
 * docs/serve.md): a checkpoint loaded, a prompt checked against its vocabulary and context, a
 * sample as `char_lm sample` draws it (each character with the distribution it came from), and
 * every head's attention as `char_lm attn` records and names it. The HTTP, the routes, the page,
 * the run's files and the swap when DIR/latest moves are the library's. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include "attn.h"
#include "attn_heads.h"
#include "sample.h"

static void *load(void *user, const char *dir, const char *path, long *iter, ag_error *err)
{
    (void)user, (void)dir;
    lm_model *m = calloc(1, sizeof *m);
    if (!m) ag_seterr(err, AG_ERR_NOMEM, "serve: out of memory");
    else if (lm_model_load(path, m, err)) m = (free(m), NULL);
    if (m) *iter = m->iter;
    return m;
}

static void free_model(void *user, void *m)
{
    (void)user;
    lm_model_free(m);
    free(m);
}

static char *run_json(void *model)
{
    const lm_model *m = model;
    char *cfg = lm_config_to_json(&m->cfg);
    json_t *config = cfg ? json_loads(cfg, 0, NULL) : NULL;
    free(cfg);
    json_t *o = json_pack("{s:o*,s:i,s:i}", "config", config, "vocab_size", m->vocab.V, "block_size",
                          m->g->cfg.block_size);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static int check(void *model, const char *prompt, char *why, size_t n)
{
    const lm_model *m = model;
    return ag_serve_check_chars(&m->vocab, m->g->cfg.block_size, prompt, why, n);
}

// --- a sample ---

typedef struct {
    ag_serve_sink *k;
    const lm_model *m;
    const ag_serve_req *r;
    const ag_real *logits;   /* the distribution of the token about to be emitted */
} sampling;

static void label(const void *vocab, int id, char *out) { ag_vocab_utf8(vocab, id, out); }

static void seen(const ag_real *logits, int V, void *user)
{
    (void)V;
    ((sampling *)user)->logits = logits;
}

static bool emit(int id, void *user)
{
    sampling *s = user;
    char *tok = ag_serve_token(id, s->logits, s->m->vocab.V, s->r, label, &s->m->vocab);
    bool ok = ag_serve_emit(s->k, tok);
    free(tok);
    return ok;
}

static ag_status sample(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                        ag_error *err)
{
    lm_model *m = model;
    sampling s = { k, m, r, NULL };
    int *ids = NULL;
    size_t n = 0;
    lm_sample_opts o = { r->n, r->temperature, r->top_k, r->seed, stop };
    ag_status st = ag_vocab_encode(&m->vocab, "prompt", r->prompt, strlen(r->prompt), &ids, &n, err);
    if (st == AG_OK) st = lm_generate_seen(m->g, ids, n, &o, emit, seen, &s, NULL, err);
    free(ids);
    return st;
}

// --- attention ---

/* One head: its weights [T,T] as rows 0..t (the masked future left out), entropy, peak, and the
 * name `char_lm attn` prints for it (attn_heads.h), so the page and the command never disagree. */
static json_t *head_json(const ag_real *a, int h, int T)
{
    double entropy, peak;
    lm_attn_stats(a, 1, 1, T, &entropy, &peak);
    lm_attn_head head;
    lm_attn_head_summary(a, T, &head);
    json_t *rows = json_array();
    for (int t = 0; t < T; t++) {
        json_t *row = json_array();
        for (int j = 0; j <= t; j++) json_array_append_new(row, json_real((double)a[(size_t)t * T + j]));
        json_array_append_new(rows, row);
    }
    return json_pack("{s:i,s:s,s:f,s:f,s:o}", "head", h, "pattern", head.pattern, "entropy", entropy, "peak", peak,
                     "weights", rows);
}

static json_t *attention_json(const lm_model *m, const int *ids, int T, ag_tensor **A)
{
    const ag_gpt_config *c = &m->g->cfg;
    json_t *chars = json_array(), *layers = json_array();
    for (int t = 0; t < T; t++) {
        char label[16];
        lm_attn_label(m->vocab.cp[ids[t]], label);
        json_array_append_new(chars, json_string(label));
    }
    for (int l = 0; l < c->n_layer; l++) {
        json_t *heads = json_array();
        for (int h = 0; h < c->n_head; h++)   // A[l] [1,H,T,T]
            json_array_append_new(heads, head_json(A[l]->data + (size_t)h * T * T, h, T));
        json_array_append_new(layers, heads);
    }
    return json_pack("{s:i,s:i,s:i,s:i,s:o,s:o}", "iter", (int)m->iter, "T", T, "n_layer", c->n_layer, "n_head",
                     c->n_head, "chars", chars, "layers", layers);
}

static char *attention(void *model, const ag_serve_req *r, int *status, char *why, size_t n)
{
    const lm_model *m = model;
    ag_error e = {0};
    int *ids = NULL;
    size_t T = 0;
    *status = 500;
    if (ag_vocab_encode(&m->vocab, "prompt", r->prompt, strlen(r->prompt), &ids, &T, &e)) {
        snprintf(why, n, "%s", e.msg);
        *status = 400;
        return NULL;
    }
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **A = calloc((size_t)m->g->cfg.n_layer, sizeof *A);
    json_t *o = NULL;
    char *out = NULL;
    if (!ctx || !A) snprintf(why, n, "out of memory");
    else if (lm_attn_record(ctx, m->g, ids, 1, (int)T, A)) snprintf(why, n, "attention: %s", ag_ctx_error(ctx));
    else if (!(o = attention_json(m, ids, (int)T, A)) || !(out = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6))))
        snprintf(why, n, "out of memory");
    json_decref(o);
    free(A);
    ag_ctx_free(ctx);
    free(ids);
    if (out) *status = 200;
    return out;
}

const ag_serve_client lm_serve_client = {
    .what = "sample, attention", .load = load, .free = free_model, .run_json = run_json,
    .check = check, .sample = sample, .attention = attention,
};
