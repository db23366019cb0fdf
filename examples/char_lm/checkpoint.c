/* checkpoint.c -- model.safetensors and train_state.safetensors of a char_lm run, written and
 * read through the ag_st_* API (src/io/safetensors.h). See checkpoint.h for the layout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"

#define PATHLEN 4096

uint64_t lm_ids_hash(const int *ids, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;                 /* FNV-1a, 64 bit */
    for (size_t i = 0; i < n; i++) {
        uint32_t x = (uint32_t)ids[i];
        for (int b = 0; b < 4; b++) {
            h ^= (x >> (8 * b)) & 0xFF;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

bool lm_path_join(char *buf, size_t n, const char *dir, const char *name)
{
    int w = snprintf(buf, n, "%s/%s", dir, name);
    return w >= 0 && (size_t)w < n;
}

static ag_status path_of(char *buf, const char *dir, const char *name, ag_error *err)
{
    if (lm_path_join(buf, PATHLEN, dir, name)) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
}

// --- writing ---

/* The parameters of g as safetensors entries, named prefix + param name ("m." for moments),
 * with data from buf (P->data, P->m or P->v). names[] holds the prefixed names. */
static ag_status tensors_of(const ag_gpt *g, const char *prefix, const ag_real *buf,
                            ag_st_tensor **out, char ***names)
{
    const ag_params *P = g->params;
    ag_st_tensor *t = calloc((size_t)P->n, sizeof *t);
    char **nm = calloc((size_t)P->n, sizeof *nm);
    if (!t || !nm) goto oom;
    for (int i = 0; i < P->n; i++) {
        const ag_param_entry *e = &P->entries[i];
        size_t len = strlen(prefix) + strlen(e->t->name) + 1;
        if (!(nm[i] = malloc(len))) goto oom;
        snprintf(nm[i], len, "%s%s", prefix, e->t->name);
        t[i].name = nm[i];
        t[i].ndim = e->t->ndim;
        memcpy(t[i].shape, e->t->shape, sizeof t[i].shape);
        t[i].data = buf + e->offset;
    }
    *out = t;
    *names = nm;
    return AG_OK;
oom:
    for (int i = 0; nm && i < P->n; i++) free(nm[i]);
    free(nm);
    free(t);
    return AG_ERR_NOMEM;
}

static void free_names(char **nm, int n)
{
    for (int i = 0; nm && i < n; i++) free(nm[i]);
    free(nm);
}

/* A poisoned model is never written, so the checkpoint on disk stays the last good one. */
static ag_status params_finite(const ag_gpt *g, const char *path, ag_error *err)
{
    const ag_params *P = g->params;
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        for (size_t i = 0; i < ag_numel(t); i++)
            if (!isfinite(t->data[i]))
                return ag_seterr(err, AG_ERR_NONFINITE, "%s: not written: parameter %s holds a non-finite value "
                                 "(element %zu is %g); the checkpoint there is the last good one", path, t->name, i,
                                 (double)t->data[i]);
    }
    return AG_OK;
}

ag_status lm_ckpt_save_model(const char *dir, const ag_gpt *g, const lm_config *cfg, const vocab *v,
                             long iter, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, dir, "model.safetensors", err)) return AG_ERR_ARG;
    if (params_finite(g, path, err)) return AG_ERR_NONFINITE;
    lm_config c = *cfg;
    c.model = g->cfg;
    c.model.vocab_size = v->V;
    char *config = lm_config_to_json(&c);
    char *vjson = vocab_to_json(v);
    ag_st_tensor *t = NULL;
    char **names = NULL;
    ag_status st = AG_ERR_NOMEM;
    if (!config || !vjson || tensors_of(g, "", g->params->data, &t, &names)) {
        ag_seterr(err, st, "%s: out of memory", path);
        goto out;
    }
    char iters[32];
    snprintf(iters, sizeof iters, "%ld", iter);
    ag_st_meta meta[] = {
        {"format", LM_CKPT_FORMAT}, {"config", config}, {"vocab", vjson}, {"iter", iters},
    };
    st = ag_st_save(path, t, g->params->n, meta, (int)(sizeof meta / sizeof meta[0]), err);
out:
    free_names(names, g->params->n);
    free(t);
    free(vjson);
    free(config);
    return st;
}

ag_status lm_ckpt_save_state(const char *dir, const ag_gpt *g, const lm_train_state *s, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, dir, "train_state.safetensors", err)) return AG_ERR_ARG;
    const ag_params *P = g->params;
    ag_st_tensor *tm = NULL, *tv = NULL, *all = NULL;
    char **nm = NULL, **nv = NULL;
    ag_status st = AG_ERR_NOMEM;
    all = calloc(2 * (size_t)P->n, sizeof *all);
    if (!all || tensors_of(g, "m.", P->m, &tm, &nm) || tensors_of(g, "v.", P->v, &tv, &nv)) {
        ag_seterr(err, st, "%s: out of memory", path);
        goto out;
    }
    memcpy(all, tm, (size_t)P->n * sizeof *all);
    memcpy(all + P->n, tv, (size_t)P->n * sizeof *all);

    char iter[32], step[32], rs[32], ri[32], nt[32], ntr[32], nva[32], hash[32], et[40], ev[40];
    snprintf(iter, sizeof iter, "%ld", s->iter);
    snprintf(step, sizeof step, "%ld", s->step);
    snprintf(rs, sizeof rs, "%llu", (unsigned long long)s->rng.state);
    snprintf(ri, sizeof ri, "%llu", (unsigned long long)s->rng.inc);
    snprintf(nt, sizeof nt, "%zu", s->n_tokens);
    snprintf(ntr, sizeof ntr, "%zu", s->n_train);
    snprintf(nva, sizeof nva, "%zu", s->n_val);
    snprintf(hash, sizeof hash, "%llu", (unsigned long long)s->data_hash);
    lm_format_real(et, sizeof et, s->eval_train);
    lm_format_real(ev, sizeof ev, s->eval_val);
    ag_st_meta meta[] = {
        {"format", LM_STATE_FORMAT}, {"iter", iter}, {"step", step}, {"rng_state", rs},
        {"rng_inc", ri}, {"n_tokens", nt}, {"n_train", ntr}, {"n_val", nva}, {"data_hash", hash},
        {"eval_train_loss", et}, {"eval_val_loss", ev},
    };
    int n_meta = (int)(sizeof meta / sizeof meta[0]) - (s->has_eval ? 0 : 2);
    st = ag_st_save(path, all, 2 * P->n, meta, n_meta, err);
out:
    free_names(nm, P->n);
    free_names(nv, P->n);
    free(tm);
    free(tv);
    free(all);
    return st;
}

ag_status lm_ckpt_save(const char *dir, const ag_gpt *g, const lm_config *cfg, const vocab *v,
                       const lm_train_state *st, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, dir, "model.safetensors", err)) return AG_ERR_ARG;
    if (params_finite(g, path, err)) return AG_ERR_NONFINITE;   /* before either file */
    ag_status s = lm_ckpt_save_state(dir, g, st, err);
    if (s == AG_OK) s = lm_ckpt_save_model(dir, g, cfg, v, st->iter, err);
    return s;
}

// --- reading ---

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) return false;
    *out = v;
    return true;
}

/* Metadata key as an unsigned integer <= max; a message naming the file otherwise. */
static ag_status meta_u64(const ag_st_file *f, const char *path, const char *key, uint64_t max,
                          uint64_t *out, ag_error *err)
{
    const char *s = ag_st_meta_get(f, key);
    if (!s) return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata has no \"%s\"", path, key);
    if (!parse_u64(s, out) || *out > max)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"%s\" is not a valid count: '%s'", path, key, s);
    return AG_OK;
}

/* The first tensor of f that is not one of P's parameters under one of the prefixes, or NULL. */
static const char *stranger(const ag_st_file *f, const ag_params *P, int n_prefixes, const char *const *prefixes)
{
    for (int i = 0; i < ag_st_count(f); i++) {
        const char *nm = ag_st_name(f, i);
        bool known = false;
        for (int k = 0; k < n_prefixes && !known; k++) {
            size_t pl = strlen(prefixes[k]);
            known = strncmp(nm, prefixes[k], pl) == 0 && ag_params_find(P, nm + pl);
        }
        if (!known) return nm;
    }
    return NULL;
}

/* Every parameter of g, read from f under prefix + name into buf; and f holds nothing else. */
static ag_status read_params(const ag_st_file *f, const char *path, const ag_gpt *g, int n_prefixes,
                             const char *const *prefixes, ag_real *const *bufs, ag_error *err)
{
    const ag_params *P = g->params;
    if (ag_st_count(f) != n_prefixes * P->n) {
        const char *nm = stranger(f, P, n_prefixes, prefixes);   /* if that is the problem, name it */
        if (nm)
            return ag_seterr(err, AG_ERR_FORMAT, "%s: unexpected tensor '%s' (not a parameter of this model)", path, nm);
        return ag_seterr(err, AG_ERR_FORMAT, "%s: holds %d tensors, the model needs %d", path, ag_st_count(f),
                         n_prefixes * P->n);
    }
    for (int k = 0; k < n_prefixes; k++)
        for (int i = 0; i < P->n; i++) {
            const ag_param_entry *e = &P->entries[i];
            char name[512];
            snprintf(name, sizeof name, "%s%s", prefixes[k], e->t->name);
            ag_status s = ag_st_read(f, name, bufs[k] + e->offset, e->t->ndim, e->t->shape, err);
            if (s) return s;
        }
    /* F32 data can hold NaN or Inf: a poisoned file is refused, not trained on */
    for (int k = 0; k < n_prefixes; k++)
        for (size_t j = 0; j < P->total; j++)
            if (!isfinite(bufs[k][j])) return ag_seterr(err, AG_ERR_FORMAT, "%s: holds a non-finite value", path);
    return AG_OK;
}

void lm_model_free(lm_model *m)
{
    if (!m) return;
    ag_gpt_free(m->g);
    vocab_free(&m->vocab);
    memset(m, 0, sizeof *m);
}

/* model.safetensors's metadata into m: the format tag, the config, the vocabulary (as many
 * characters as the config's vocab_size) and the iteration. */
static ag_status read_model_meta(const ag_st_file *f, const char *path, lm_model *m, ag_error *err)
{
    const char *fmt = ag_st_meta_get(f, "format");
    const char *config = ag_st_meta_get(f, "config");
    const char *vjson = ag_st_meta_get(f, "vocab");
    const char *iter = ag_st_meta_get(f, "iter");
    uint64_t it = 0;
    ag_error why = {0};
    ag_status st;
    if (!fmt || strcmp(fmt, LM_CKPT_FORMAT) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a char_lm checkpoint (metadata format is %s%s%s, expected "
                         "\"%s\")", path, fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "", LM_CKPT_FORMAT);
    if (!config || !vjson)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata has no \"%s\"", path, config ? "vocab" : "config");
    if (lm_config_from_json(&m->cfg, config, &why)) return ag_seterr(err, AG_ERR_FORMAT, "%s: %s", path, why.msg);
    if ((st = vocab_from_json(path, vjson, &m->vocab, err))) return st;
    if (m->vocab.V != m->cfg.model.vocab_size)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: the vocab has %d characters, the config says vocab_size %d", path,
                         m->vocab.V, m->cfg.model.vocab_size);
    if (iter && !parse_u64(iter, &it))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"iter\" is not a count: '%s'", path, iter);
    m->iter = (long)it;
    return AG_OK;
}

/* Before allocating a model of the config's size, check the file can hold it: a forged header
 * (n_embd 2048, n_layer 9 in an 18 KB file) must not cost gigabytes. Any variant has at least
 * the embeddings plus 4C^2 (attention) + C(8C-1) (MLP) per layer. */
static ag_status check_size(const ag_st_file *f, const char *path, const lm_config *c, ag_error *err)
{
    double C = c->model.n_embd, need = ((double)c->model.vocab_size + c->model.block_size) * C +
                                       (double)c->model.n_layer * (12 * C * C - C);
    if (4 * need <= (double)ag_st_data_bytes(f)) return AG_OK;
    return ag_seterr(err, AG_ERR_FORMAT, "%s: the config needs at least %.0f parameters (%.0f bytes), the file "
                     "holds %llu bytes of tensors", path, need, 4 * need, (unsigned long long)ag_st_data_bytes(f));
}

ag_status lm_model_load(const char *dir, lm_model *m, ag_error *err)
{
    memset(m, 0, sizeof *m);
    char path[PATHLEN];
    if (path_of(path, dir, "model.safetensors", err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);   /* its message says whether missing or malformed */
    if (!f) return AG_ERR_IO;
    ag_status st = read_model_meta(f, path, m, err);
    if (st == AG_OK) st = check_size(f, path, &m->cfg, err);
    ag_error why = {0};
    if (st == AG_OK && !(m->g = ag_gpt_new(&m->cfg.model, m->cfg.seed, &why)))
        st = ag_seterr(err, AG_ERR_NOMEM, "%s: %s", path, why.msg);
    if (st == AG_OK) {
        const char *pre[] = {""};
        ag_real *bufs[] = {m->g->params->data};
        st = read_params(f, path, m->g, 1, pre, bufs, err);
    }
    ag_st_free(f);
    if (st) lm_model_free(m);
    return st;
}

/* The evaluation done at the checkpoint's iteration, if the metadata has one. */
static ag_status read_eval_meta(const ag_st_file *f, const char *path, lm_train_state *s, ag_error *err)
{
    const char *et = ag_st_meta_get(f, "eval_train_loss"), *ev = ag_st_meta_get(f, "eval_val_loss");
    s->eval_val = NAN;
    if (!et || !ev) return AG_OK;
    char *e1 = NULL, *e2 = NULL;
    s->eval_train = strtod(et, &e1);
    s->eval_val = strtod(ev, &e2);
    if (!*et || *e1 || !*ev || *e2)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata eval losses are not numbers", path);
    s->has_eval = true;
    return AG_OK;
}

/* train_state.safetensors's metadata into *s: the format tag, the counts, the batch sampler's
 * RNG, the data split and the evaluation. */
static ag_status read_state_meta(const ag_st_file *f, const char *path, lm_train_state *s, ag_error *err)
{
    const char *fmt = ag_st_meta_get(f, "format");
    if (!fmt || strcmp(fmt, LM_STATE_FORMAT) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a char_lm train state (metadata format %s, expected \"%s\")",
                         path, fmt ? fmt : "missing", LM_STATE_FORMAT);
    uint64_t iter, step, rs, ri, nt, ntr, nva, hash;
    const uint64_t big = (uint64_t)1 << 53;
    ag_status st;
    if ((st = meta_u64(f, path, "iter", big, &iter, err)) || (st = meta_u64(f, path, "step", big, &step, err)) ||
        (st = meta_u64(f, path, "rng_state", UINT64_MAX, &rs, err)) ||
        (st = meta_u64(f, path, "rng_inc", UINT64_MAX, &ri, err)) ||
        (st = meta_u64(f, path, "n_tokens", big, &nt, err)) || (st = meta_u64(f, path, "n_train", big, &ntr, err)) ||
        (st = meta_u64(f, path, "n_val", big, &nva, err)) ||
        (st = meta_u64(f, path, "data_hash", UINT64_MAX, &hash, err)))
        return st;
    if (ri % 2 == 0 || ntr + nva != nt)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: inconsistent metadata (%s)", path,
                         ri % 2 == 0 ? "rng_inc must be odd" : "n_train + n_val != n_tokens");
    s->iter = (long)iter;
    s->step = (long)step;
    s->rng.state = rs;
    s->rng.inc = ri;
    s->n_tokens = (size_t)nt;
    s->n_train = (size_t)ntr;
    s->n_val = (size_t)nva;
    s->data_hash = hash;
    return read_eval_meta(f, path, s, err);
}

ag_status lm_train_state_load(const char *dir, ag_gpt *g, lm_train_state *s, ag_error *err)
{
    memset(s, 0, sizeof *s);
    char path[PATHLEN];
    if (path_of(path, dir, "train_state.safetensors", err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return AG_ERR_IO;
    ag_status st = read_state_meta(f, path, s, err);
    const char *pre[] = {"m.", "v."};
    ag_real *bufs[] = {g->params->m, g->params->v};
    if (st == AG_OK) st = read_params(f, path, g, 2, pre, bufs, err);
    ag_st_free(f);
    if (st) memset(s, 0, sizeof *s);
    return st;
}
