/* serve.c -- char_lm's model for `char_lm serve` (the library's serve, src/serve/serve.h,
 * docs/serve.md): a checkpoint loaded, a prompt checked against its vocabulary and context, a
 * sample as `char_lm sample` draws it (each character with the distribution it came from), and
 * every head's attention as `char_lm attn` records and names it: the library's for a GPT
 * (serve.h: ag_serve_gpt_sample, ag_serve_gpt_attention) on the prompt's characters. The HTTP,
 * the routes, the page, the run's files and the swap when DIR/latest moves are the library's. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tools.h"

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
    char *cfg = ag_fields_to_json(&m->cfg, lm_fields, LM_N_FIELDS);
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

// --- a sample, attention: the library's for a GPT, on the prompt's characters ---

static void label(const void *vocab, int id, char *out) { ag_vocab_utf8(vocab, id, out); }

static ag_status sample(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                        ag_error *err)
{
    lm_model *m = model;
    int *ids = NULL;
    size_t n = 0;
    ag_status st = ag_vocab_encode(&m->vocab, "prompt", r->prompt, strlen(r->prompt), &ids, &n, err);
    if (st == AG_OK) st = ag_serve_gpt_sample(m->g, ids, n, r, k, stop, label, &m->vocab, err);
    free(ids);
    return st;
}

/* A character as `char_lm attn` labels it on the heat map's axes. */
static void attn_label(const void *vocab, int id, char *out) { ag_chars_label(((const ag_vocab *)vocab)->cp[id], out); }

static char *attention(void *model, const ag_serve_req *r, int *status, char *why, size_t n)
{
    const lm_model *m = model;
    ag_error e = {0};
    int *ids = NULL;
    size_t T = 0;
    *status = 400;
    if (ag_vocab_encode(&m->vocab, "prompt", r->prompt, strlen(r->prompt), &ids, &T, &e)) {
        snprintf(why, n, "%s", e.msg);
        return NULL;
    }
    char *out = ag_serve_gpt_attention(m->g, m->iter, ids, (int)T, attn_label, &m->vocab, ag_chars_pattern_names, why, n);
    free(ids);
    *status = out ? 200 : 500;
    return out;
}

const ag_serve_client lm_serve_client = {
    .what = "sample, attention", .load = load, .free = free_model, .run_json = run_json,
    .check = check, .sample = sample, .attention = attention,
};
