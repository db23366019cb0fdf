/* serve.c -- char_lm's model for `char_lm serve` (the library's serve, src/serve/serve.h,
 * docs/serve.md): a checkpoint loaded and its config; the prompt's check, the sample and the
 * attention are the library's for a GPT over characters (serve.h: ag_serve_chars_sample), as
 * `char_lm sample` and `char_lm attn` draw them. */
#include <jansson.h>
#include <stdlib.h>
#include "tools.h"

static void *load(void *user, const char *dir, const char *path, long *iter, ag_error *err)
{
    (void)user, (void)dir;
    lm_model *m = calloc(1, sizeof *m);
    if (!m) ag_seterr(err, AG_ERR_NOMEM, "serve: out of memory");
    else if (lm_model_load_as(path, AG_CKPT_LATEST, m, err)) m = (free(m), NULL);
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

// --- a sample, attention: the library's for a GPT over characters (serve.h) ---

static ag_status sample(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                        ag_error *err)
{
    lm_model *m = model;
    return ag_serve_chars_sample(m->g, &m->vocab, r, k, stop, err);
}

static char *attention(void *model, const ag_serve_req *r, int *status, char *why, size_t n)
{
    const lm_model *m = model;
    return ag_serve_chars_attention(m->g, m->iter, &m->vocab, r, status, why, n);
}

const ag_serve_client lm_serve_client = {
    .what = "sample, attention", .load = load, .free = free_model, .run_json = run_json,
    .check = check, .sample = sample, .attention = attention,
};
