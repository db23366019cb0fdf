/* serve_api.c -- the answers of `char_lm serve` as JSON text (serve.h, docs/serve.md). Nothing
 * here knows HTTP; serve.c sends what these return. */
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attn.h"
#include "train/train.h"
#include "attn_heads.h"
#include "serve.h"

/* Compact, one line, reals with 6 significant digits (attn's .dat has 6 decimals). */
static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    return s;
}

char *lm_api_error(const char *why)
{
    return dump(json_pack("{s:s}", "error", why));
}

static json_t *char_json(const ag_vocab *v, int id)
{
    char c[5];
    ag_vocab_utf8(v, id, c);
    return json_string(c);
}

// --- a sample's token ---

/* The 5 most likely characters of the distribution lm_sample_logits draws from: softmax of
 * logits / temperature over the top_k largest (all when top_k is 0). */
static json_t *top5(const lm_model *m, const ag_real *logits, const lm_req *r)
{
    int V = m->vocab.V, best[5], nb = 0;
    double max = -INFINITY, sum = 0, kth = -INFINITY;
    for (int i = 0; i < V; i++) max = fmax(max, (double)logits[i]);
    for (int k = 0; k < 5 && k < V; k++) {   /* the 5 largest, in order (V is small) */
        int b = -1;
        for (int i = 0; i < V; i++) {
            bool taken = false;
            for (int j = 0; j < nb; j++) taken |= best[j] == i;
            if (!taken && (b < 0 || logits[i] > logits[b])) b = i;
        }
        best[nb++] = b;
    }
    if (r->top_k > 0 && r->top_k < V) {   /* the k-th largest: what the draw keeps */
        ag_real *s = malloc((size_t)V * sizeof *s);
        if (!s) return NULL;
        memcpy(s, logits, (size_t)V * sizeof *s);
        for (int k = 0; k < r->top_k; k++)   /* partial selection: k <= V passes */
            for (int i = k + 1; i < V; i++)
                if (s[i] > s[k]) { ag_real t = s[i]; s[i] = s[k]; s[k] = t; }
        kth = (double)s[r->top_k - 1];
        free(s);
    }
    for (int i = 0; i < V; i++)
        if ((double)logits[i] >= kth) sum += exp(((double)logits[i] - max) / r->temperature);
    json_t *a = json_array();
    for (int k = 0; k < nb; k++) {
        double p = (double)logits[best[k]] >= kth ? exp(((double)logits[best[k]] - max) / r->temperature) / sum : 0;
        json_array_append_new(a, json_pack("{s:o,s:f}", "c", char_json(&m->vocab, best[k]), "p", p));
    }
    return a;
}

char *lm_api_token(const lm_model *m, int id, const ag_real *logits, const lm_req *r)
{
    return dump(json_pack("{s:o,s:i,s:o*}", "c", char_json(&m->vocab, id), "id", id, "top", top5(m, logits, r)));
}

// --- attention ---

/* A name for what a head does: the one `char_lm attn` prints (attn_heads.h), so the page and
 * the command never disagree. */
static const char *pattern(const ag_real *a, int T)
{
    lm_attn_head head;
    lm_attn_head_summary(a, T, &head);
    return head.pattern;
}

/* One head: its weights [T,T] as rows 0..t (the masked future left out), entropy, peak, name. */
static json_t *head_json(const ag_real *a, int h, int T)
{
    double entropy, peak;
    lm_attn_stats(a, 1, 1, T, &entropy, &peak);
    json_t *rows = json_array();
    for (int t = 0; t < T; t++) {
        json_t *row = json_array();
        for (int j = 0; j <= t; j++) json_array_append_new(row, json_real((double)a[(size_t)t * T + j]));
        json_array_append_new(rows, row);
    }
    return json_pack("{s:i,s:s,s:f,s:f,s:o}", "head", h, "pattern", pattern(a, T), "entropy", entropy, "peak", peak,
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

char *lm_api_attention(const lm_model *m, const lm_req *r, int *status, char *why, size_t n)
{
    ag_error e = {0};
    int *ids = NULL;
    size_t T = 0;
    *status = 500;
    if (ag_vocab_encode(&m->vocab, "prompt", r->prompt, strlen(r->prompt), &ids, &T, &e)) {
        snprintf(why, n, "%s", e.msg);   /* the model moved to another vocabulary since the check */
        *status = 400;
        return NULL;
    }
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **A = calloc((size_t)m->g->cfg.n_layer, sizeof *A);
    char *out = NULL;
    if (!ctx || !A) snprintf(why, n, "out of memory");
    else if (lm_attn_record(ctx, m->g, ids, 1, (int)T, A)) snprintf(why, n, "attention: %s", ag_ctx_error(ctx));
    else if (!(out = dump(attention_json(m, ids, (int)T, A)))) snprintf(why, n, "out of memory");
    free(A);
    ag_ctx_free(ctx);
    free(ids);
    if (out) *status = 200;
    return out;
}

// --- the run ---

/* The pid of the train that holds DIR/train.lock, or 0: F_GETLK asks without taking anything. */
static long trainer_pid(const char *dir)
{
    char path[4096];
    if (!ag_path_join(path, sizeof path, dir, AG_LOCK_NAME)) return 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    long pid = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? (long)fl.l_pid : 0;
    close(fd);
    return pid;
}

static json_t *pointer_json(const char *dir, const char *which)
{
    ag_error e = {0};
    char name[64];
    return ag_ckpt_pointer(dir, which, name, &e) ? json_null() : json_string(name);
}

char *lm_api_run(const char *dir, const lm_served *s)
{
    char *cfg = lm_config_to_json(&s->m.cfg);
    json_t *config = cfg ? json_loads(cfg, 0, NULL) : NULL;
    free(cfg);
    long pid = trainer_pid(dir);
    return dump(json_pack("{s:o*,s:i,s:s,s:o,s:o,s:b,s:I,s:i,s:i}", "config", config, "iter", (int)s->m.iter,
                          "checkpoint", s->name, "latest", pointer_json(dir, LM_LATEST), "best",
                          pointer_json(dir, LM_BEST), "training", pid > 0, "trainer_pid", (json_int_t)pid,
                          "vocab_size", s->m.vocab.V, "block_size", s->m.g->cfg.block_size));
}

// --- metrics.csv, dynamics.csv ---

/* One CSV line (no '\n') into an array: numbers, or null for an empty field. */
static json_t *csv_row(char *line, bool header)
{
    json_t *a = json_array();
    char *p = line;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        char *end;
        double v = strtod(p, &end);
        if (header) json_array_append_new(a, json_string(p));
        else if (end == p || *end != '\0' || !isfinite(v)) json_array_append_new(a, json_null());
        else if (v == floor(v) && fabs(v) < 1e15) json_array_append_new(a, json_integer((json_int_t)v));   /* iter */
        else json_array_append_new(a, json_real(v));
        if (!comma) break;
        p = comma + 1;
    }
    return a;
}

/* The file, if it is a regular file of at most LM_SERVE_CSV_MAX bytes (O_NOFOLLOW: a link
 * planted at its name is not followed out of the run). */
static FILE *open_csv(const char *dir, const char *name)
{
    char path[4096];
    if (!ag_path_join(path, sizeof path, dir, name)) return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    FILE *f = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= LM_SERVE_CSV_MAX
                  ? fdopen(fd, "r") : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

char *lm_api_csv(const char *dir, const char *name)
{
    FILE *f = open_csv(dir, name);
    if (!f) return dump(json_pack("{s:[],s:[],s:b}", "columns", "rows", "missing", 1));
    json_t *cols = NULL, *rows = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n') break;   /* a row train is still writing */
        line[len - 1] = '\0';
        if (!cols) cols = csv_row(line, true);
        else json_array_append_new(rows, csv_row(line, false));
    }
    free(line);
    fclose(f);
    return dump(json_pack("{s:o,s:o}", "columns", cols ? cols : json_array(), "rows", rows));
}
