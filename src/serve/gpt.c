/* gpt.c -- a GPT's sample and attention as serve sends them (serve.h), for a client whose model
 * is an ag_gpt: generation (nn.h: ag_gpt_generate) streamed token by token with each token's
 * distribution, and every head's attention recorded (ag_gpt_attn_record), summarized and named
 * as a program's `attn` names it. The client brings the token ids and their labels, or for a
 * GPT over characters (lm/lm.h) only its vocabulary. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve.h"
#include "../lm/lm.h"   /* ag_chars_label, ag_chars_pattern_names */

// --- a sample ---

typedef struct {
    ag_serve_sink *k;
    const ag_serve_req *r;
    ag_serve_label_fn label;
    const void *u;
    int V;
    const ag_real *logits;   /* the distribution of the token about to be emitted */
} sampling;

static void seen(const ag_real *logits, int V, void *user)
{
    (void)V;
    ((sampling *)user)->logits = logits;
}

static bool emit(int id, void *user)
{
    sampling *s = user;
    char *tok = ag_serve_token(id, s->logits, s->V, s->r, s->label, s->u);
    bool ok = ag_serve_emit(s->k, tok);
    free(tok);
    return ok;
}

ag_status ag_serve_gpt_sample(ag_gpt *g, const int *ids, size_t n, const ag_serve_req *r, ag_serve_sink *k,
                              const volatile sig_atomic_t *stop, ag_serve_label_fn label, const void *u, ag_error *err)
{
    sampling s = { k, r, label, u, g->cfg.vocab_size, NULL };
    ag_sample_opts o = { r->n, r->temperature, r->top_k, r->seed, stop };
    return ag_gpt_generate(g, ids, n, &o, emit, seen, &s, NULL, err);
}

// --- attention ---

/* One head: its weights a [T,T] as rows 0..t (the masked future left out), entropy, peak, and
 * its pattern's name, so the page and the program's `attn` never disagree. */
static json_t *head_json(const ag_real *a, int h, int T, const char *const *names)
{
    double entropy, peak;
    ag_attn_stats(a, 1, 1, T, &entropy, &peak);
    ag_attn_head head;
    ag_attn_head_summary(a, T, &head);
    json_t *rows = json_array();
    for (int t = 0; t < T; t++) {
        json_t *row = json_array();
        for (int j = 0; j <= t; j++) json_array_append_new(row, json_real((double)a[(size_t)t * T + j]));
        json_array_append_new(rows, row);
    }
    return json_pack("{s:i,s:s,s:f,s:f,s:o}", "head", h, "pattern", names[head.pattern], "entropy", entropy, "peak",
                     peak, "weights", rows);
}

static json_t *attention_json(const ag_gpt *g, long iter, const int *ids, int T, ag_tensor **A,
                              ag_serve_label_fn label, const void *u, const char *const *names)
{
    const ag_gpt_config *c = &g->cfg;
    json_t *chars = json_array(), *layers = json_array();
    for (int t = 0; t < T; t++) {
        char text[16] = "";
        label(u, ids[t], text);
        json_array_append_new(chars, json_string(text));
    }
    for (int l = 0; l < c->n_layer; l++) {
        json_t *heads = json_array();
        for (int h = 0; h < c->n_head; h++)   // A[l] [1,H,T,T]
            json_array_append_new(heads, head_json(A[l]->data + (size_t)h * T * T, h, T, names));
        json_array_append_new(layers, heads);
    }
    return json_pack("{s:i,s:i,s:i,s:i,s:o,s:o}", "iter", (int)iter, "T", T, "n_layer", c->n_layer, "n_head",
                     c->n_head, "chars", chars, "layers", layers);
}

char *ag_serve_gpt_attention(ag_gpt *g, long iter, const int *ids, int T, ag_serve_label_fn label, const void *u,
                             const char *const *names, char *why, size_t n)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **A = calloc((size_t)g->cfg.n_layer, sizeof *A);
    json_t *o = NULL;
    char *out = NULL;
    if (!ctx || !A) snprintf(why, n, "out of memory");
    else if (ag_gpt_attn_record(ctx, g, ids, 1, T, A)) snprintf(why, n, "attention: %s", ag_ctx_error(ctx));
    else if (!(o = attention_json(g, iter, ids, T, A, label, u, names ? names : ag_attn_pattern_names)) ||
             !(out = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6))))
        snprintf(why, n, "out of memory");
    json_decref(o);
    free(A);
    ag_ctx_free(ctx);
    return out;
}

// --- a GPT over characters (lm/lm.h): the prompt's characters, each token its character ---

static void char_label(const void *v, int id, char *out) { ag_vocab_utf8(v, id, out); }

/* a character on the heat map's axes, as the program's `attn` labels it */
static void axis_label(const void *v, int id, char *out) { ag_chars_label(((const ag_vocab *)v)->cp[id], out); }

ag_status ag_serve_chars_sample(ag_gpt *g, const ag_vocab *v, const ag_serve_req *r, ag_serve_sink *k,
                                const volatile sig_atomic_t *stop, ag_error *err)
{
    int *ids = NULL;
    size_t n = 0;
    ag_status st = ag_vocab_encode(v, "prompt", r->prompt, strlen(r->prompt), &ids, &n, err);
    if (st == AG_OK) st = ag_serve_gpt_sample(g, ids, n, r, k, stop, char_label, v, err);
    free(ids);
    return st;
}

char *ag_serve_chars_attention(ag_gpt *g, long iter, const ag_vocab *v, const ag_serve_req *r, int *status, char *why,
                               size_t n)
{
    ag_error e = {0};
    int *ids = NULL;
    size_t T = 0;
    *status = 400;
    if (ag_vocab_encode(v, "prompt", r->prompt, strlen(r->prompt), &ids, &T, &e)) {
        snprintf(why, n, "%s", e.msg);
        return NULL;
    }
    char *out = ag_serve_gpt_attention(g, iter, ids, (int)T, axis_label, v, ag_chars_pattern_names, why, n);
    free(ids);
    *status = out ? 200 : 500;
    return out;
}
