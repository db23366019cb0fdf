/* chars.c -- a GPT over characters: sample, eval, attn and the traces on the model's vocabulary
 * (see lm.h). */
#include "lm.h"
#include <stdlib.h>
#include <string.h>
#include "../nn/trace.h"
#include "../train/program.h"   /* ag_flushed */
#include "../train/train_impl.h"   /* ag__train_program */

ag_status ag_chars_generate(ag_gpt *g, const ag_vocab *v, const char *prompt, const ag_sample_opts *o,
                            ag_emit_fn emit, void *user, ag_error *err)
{
    int *ids = NULL;
    size_t n = 0;
    if (!prompt || !*prompt) {
        int nl = ag_vocab_id(v, '\n');
        if (!(ids = malloc(sizeof *ids))) return ag_seterr(err, AG_ERR_NOMEM, "sampling: out of memory");
        ids[0] = nl >= 0 ? nl : 0;
        n = 1;
    } else {
        ag_status st = ag_vocab_encode(v, "--prompt", prompt, strlen(prompt), &ids, &n, err);
        if (st) return st;
    }
    ag_status st = ag_gpt_generate(g, ids, n, o, emit, NULL, user, NULL, err);
    free(ids);
    return st;
}

typedef struct {
    const ag_vocab *v;
    FILE *out;
    ag_error *err;
    bool printed;   /* something went out: the prompt or a character */
} printer;

static bool print_token(int id, void *user)
{
    printer *p = user;
    p->printed = true;
    char buf[5];
    ag_vocab_utf8(p->v, id, buf);
    fputs(buf, p->out);
    return ag_flushed(p->out, "stdout", p->err) == AG_OK;
}

ag_status ag_chars_print(FILE *out, ag_gpt *g, const ag_vocab *v, const char *prompt, const ag_sample_opts *o,
                         ag_error *err)
{
    printer p = {v, out, err, false};
    int *ids = NULL;
    size_t n = 0;
    /* encode first so a bad prompt fails before anything is printed */
    if (prompt && *prompt) {
        ag_status s = ag_vocab_encode(v, "--prompt", prompt, strlen(prompt), &ids, &n, err);
        if (s) return s;
        free(ids);
        fputs(prompt, out);
        p.printed = true;
        if ((s = ag_flushed(out, "stdout", err))) return s;
    }
    ag_status s = ag_chars_generate(g, v, prompt, o, print_token, &p, err);
    if (p.printed) fputs("\n", out);   /* nothing out (a model refused at once): no empty line */
    ag_status f = ag_flushed(out, "stdout", err);
    return s ? s : f;
}

ag_status ag_chars_eval_file(ag_gpt *g, const ag_vocab *v, const char *path, double *loss, size_t *tokens,
                             ag_error *err)
{
    ag_corpus c;
    ag_status st = ag_corpus_load_vocab(path, v, &c, err);
    if (st) return st;
    ag_error why = {0};
    st = ag_gpt_eval_ids(g, c.ids, c.n, AG_CHARS_EVAL_BATCH, loss, tokens, &why);
    if (st) ag_seterr(err, st, "%s: %s", path, why.msg);
    ag_corpus_free(&c);
    return st;
}

// --- attn ---

void ag_chars_label(uint32_t cp, char out[16])
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

const char *const ag_chars_pattern_names[AG_ATTN_MIXED + 1] = {
    "uniform", "self (diagonal)", "previous character", "first position (sink)", "mixed",
};

/* --layer and --head against the model, and the prompt: every character in the vocabulary, at
 * most block_size of them. On success *ids (malloc'd [*n]) holds the prompt's tokens. */
static ag_status check_args(const ag_gpt *g, const ag_vocab *v, const char *prompt, int layer, int head, int **ids,
                            size_t *n, ag_error *err)
{
    const ag_gpt_config *cfg = &g->cfg;
    if (layer < 0 || layer >= cfg->n_layer)
        return ag_seterr(err, AG_ERR_ARG, "--layer %d: the model has %d layers (0 .. %d)", layer, cfg->n_layer,
                         cfg->n_layer - 1);
    if (head < -1 || head >= cfg->n_head)
        return ag_seterr(err, AG_ERR_ARG, "--head %d: the model has %d heads (0 .. %d)", head, cfg->n_head,
                         cfg->n_head - 1);
    if (!prompt || !*prompt) return ag_seterr(err, AG_ERR_ARG, "--prompt must not be empty");
    ag_status s = ag_vocab_encode(v, "--prompt", prompt, strlen(prompt), ids, n, err);
    if (s) return s;
    if (*n <= (size_t)cfg->block_size) return AG_OK;
    free(*ids);
    *ids = NULL;
    return ag_seterr(err, AG_ERR_ARG, "--prompt has %zu characters; the model sees at most block_size %d", *n,
                     cfg->block_size);
}

/* Draws layer's attention for ids [T] (every head when head is -1) into png, the axes labelled
 * with the prompt's characters, and names its heads into heads (NULL: not). */
static ag_status draw(ag_gpt *g, const ag_vocab *v, const int *ids, int T, int layer, int head, const char *png,
                      ag_attn_head *heads, ag_error *err)
{
    char (*labels)[16] = malloc((size_t)T * sizeof *labels);
    const char **lab = malloc((size_t)T * sizeof *lab);   /* [T] pointers to labels[i] */
    ag_status s = labels && lab ? AG_OK : ag_seterr(err, AG_ERR_NOMEM, "attn: out of memory");
    for (int i = 0; s == AG_OK && i < T; i++) ag_chars_label(v->cp[ids[i]], labels[i]), lab[i] = labels[i];
    char title[160], by[64];
    snprintf(title, sizeof title, "%s attn: layer %d%s, %d characters (row: query, column: key; blank: "
             "masked future)", ag__train_program(), layer, head < 0 ? ", every head" : "", T);
    snprintf(by, sizeof by, "%s attn", ag__train_program());
    ag_attn_picture p = {.T = T, .layer = layer, .head = head, .labels = lab, .title = title, .by = by,
                         .what = "--out"};
    if (s == AG_OK) s = ag_gpt_plot_attention(g, ids, png, &p, heads, "attn", err);
    free(lab);
    free(labels);
    return s;
}

/* Refused before anything of its size exists, as eval and sample are (issue 19: a 326 KB file
 * claiming 12 layers and block_size 8192 made a prompt of that length take 26 GB). */
static ag_status check_memory(const ag_gpt *g, int T, int head, ag_error *err)
{
    ag_gpt_config at = g->cfg;
    int n_maps = head < 0 ? at.n_head : 1;
    at.block_size = T;   /* the message names the prompt's length as the block it costs */
    char shape[AG_GPT_SHAPE_LEN];
    return ag_check_memory(ag_gpt_attn_bytes(&g->cfg, T, n_maps), "attn", ag_gpt_shape_str(&at, 1, shape), err);
}

ag_status ag_chars_attention(ag_gpt *g, const ag_vocab *v, const char *prompt, int layer, int head, const char *png,
                             ag_attn_head *heads, ag_error *err)
{
    int *ids = NULL;
    size_t n = 0;
    ag_status s = check_args(g, v, prompt, layer, head, &ids, &n, err);
    if (s == AG_OK) s = check_memory(g, (int)n, head, err);
    if (s == AG_OK) s = draw(g, v, ids, (int)n, layer, head, png, heads, err);
    free(ids);
    return s;
}

// --- --trace-shapes ---

ag_status ag_chars_trace_prompt(FILE *out, ag_gpt *g, const ag_vocab *v, const char *prompt, const char *graph,
                                ag_error *err)
{
    const char *p = prompt && *prompt ? prompt : "\n";
    int *ids = NULL;
    size_t n = 0;
    ag_status s = ag_vocab_encode(v, "--prompt", p, strlen(p), &ids, &n, err);
    if (s == AG_OK) {
        int T = n > (size_t)g->cfg.block_size ? g->cfg.block_size : (int)n;
        char what[96];
        snprintf(what, sizeof what, "the prompt (B=1, T=%d; sampling then feeds one position at a time)", T);
        const ag_gpt_trace_opts o = {.what = what, .graph = graph};
        s = ag_gpt_trace(out, g, ids + (n - (size_t)T), NULL, 1, T, &o, err);
    }
    free(ids);
    return s;
}

ag_status ag_chars_trace_file(FILE *out, ag_gpt *g, const ag_vocab *v, const char *path, const char *graph,
                              ag_error *err)
{
    ag_corpus c;
    const ag_gpt_trace_opts o = {.what = path, .graph = graph, .unit = "characters"};
    ag_status s = ag_corpus_load_vocab(path, v, &c, err);
    if (s == AG_OK) s = ag_gpt_trace_windows(out, g, c.ids, c.n, &o, err);
    ag_corpus_free(&c);
    return s;
}
