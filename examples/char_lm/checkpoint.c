/* checkpoint.c -- model.safetensors and train_state.safetensors of a char_lm run (checkpoint.h):
 * their metadata, char_lm's config and train state, around the library's GPT weights file
 * (nn/gpt_ckpt.h) and moments (train/train.h); the run directory is the library's
 * (ag_ckpt_save, ag_ckpt_resolve), lm_ckpt_format the files as ag_train_run's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"
#include "nn/gpt_ckpt.h"
#include "train/train.h"

#define PATHLEN 4096
#define LM_CONFIG_JSON_MAX 16384

/* The files of a checkpoint directory (what ag_ckpt_remove may remove from one). */
static const char *const ckpt_files[] = {LM_MODEL_FILE, LM_STATE_FILE, NULL};

static ag_status path_of(char *buf, const char *dir, const char *name, ag_error *err)
{
    if (ag_path_join(buf, PATHLEN, dir, name)) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
}

// --- writing ---

/* Reads a config for ag_gpt_ckpt_meta: into the lm_config user, its model's shape in *model. */
static ag_status parse_config(const char *json, void *user, ag_gpt_config *model, ag_error *why)
{
    lm_config *c = user;
    ag_status s = lm_config_from_json(c, json, why);
    *model = c->model;
    return s;
}

static const ag_gpt_ckpt_kind model_kind = {.format = LM_CKPT_FORMAT, .program = "char_lm",
                                            .config_max = LM_CONFIG_JSON_MAX, .config = parse_config};

/* DIR/model.safetensors: g's weights with its config and vocabulary (gpt_ckpt.h). */
static ag_status write_model(const char *dir, const ag_gpt *g, const lm_config *cfg, const ag_vocab *v, long iter,
                             uint64_t run_id, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, dir, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    lm_config c = *cfg;
    c.model = g->cfg;
    c.model.vocab_size = v->V;
    char *config = ag_fields_to_json(&c, lm_fields, LM_N_FIELDS);
    ag_status st = ag_gpt_ckpt_write(path, g, LM_CKPT_FORMAT, config, v, iter, run_id, err);
    free(config);
    return st;
}

/* The text of a train state's metadata values (state_meta fills it). */
typedef struct {
    char iter[32], id[20], mh[20], step[32], rs[32], ri[32], nt[32], ntr[32], nva[32], hash[32], et[40], ev[40];
    char best_iter[32], best_loss[40], follows[20];
} state_text;

#define STATE_META_MAX 17

/* meta [STATE_META_MAX] of the train state s of weights P, its strings in txt; returns the count.
 * The evaluation, the best so far and the checkpoint it follows only when there are some. */
static int state_meta(const lm_train_state *s, const ag_params *P, state_text *t, ag_st_meta *meta)
{
    snprintf(t->iter, sizeof t->iter, "%ld", s->iter);
    ag_hex64_format(t->id, sizeof t->id, s->run_id);
    ag_hex64_format(t->mh, sizeof t->mh, ag_weights_hash(P));
    snprintf(t->step, sizeof t->step, "%ld", s->step);
    snprintf(t->rs, sizeof t->rs, "%llu", (unsigned long long)s->rng.state);
    snprintf(t->ri, sizeof t->ri, "%llu", (unsigned long long)s->rng.inc);
    snprintf(t->nt, sizeof t->nt, "%zu", s->n_tokens);
    snprintf(t->ntr, sizeof t->ntr, "%zu", s->n_train);
    snprintf(t->nva, sizeof t->nva, "%zu", s->n_val);
    snprintf(t->hash, sizeof t->hash, "%llu", (unsigned long long)s->data_hash);
    const ag_st_meta always[] = {
        {"format", LM_STATE_FORMAT}, {"iter", t->iter}, {"run_id", t->id}, {"model_hash", t->mh}, {"step", t->step},
        {"rng_state", t->rs}, {"rng_inc", t->ri}, {"n_tokens", t->nt}, {"n_train", t->ntr}, {"n_val", t->nva},
        {"data_hash", t->hash},
    };
    int n = (int)(sizeof always / sizeof always[0]);
    memcpy(meta, always, sizeof always);
    if (s->has_eval) {
        ag_format_real(t->et, sizeof t->et, s->eval_train);
        ag_format_real(t->ev, sizeof t->ev, s->eval_val);
        meta[n++] = (ag_st_meta){"eval_train_loss", t->et};
        meta[n++] = (ag_st_meta){"eval_val_loss", t->ev};
    }
    if (s->best_iter >= 0) {
        snprintf(t->best_iter, sizeof t->best_iter, "%ld", s->best_iter);
        ag_format_real(t->best_loss, sizeof t->best_loss, s->best_loss);
        meta[n++] = (ag_st_meta){"best_iter", t->best_iter};
        meta[n++] = (ag_st_meta){"best_loss", t->best_loss};
    }
    if (s->prev_hash) {
        ag_hex64_format(t->follows, sizeof t->follows, s->prev_hash);
        meta[n++] = (ag_st_meta){"follows", t->follows};
    }
    return n;
}

/* DIR/train_state.safetensors: g's moments with the train state s. */
static ag_status write_state(const char *dir, const ag_gpt *g, const lm_train_state *s, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, dir, LM_STATE_FILE, err)) return AG_ERR_ARG;
    state_text txt;
    ag_st_meta meta[STATE_META_MAX];
    int n_meta = state_meta(s, g->params, &txt, meta);
    return ag_ckpt_write_moments(path, g->params, meta, n_meta, err);
}

// --- the run directory: latest and the ckpt-N directories (the library's unit, train.h) ---

ag_status lm_ckpt_resolve(const char *dir, char *buf, size_t n, ag_error *err)
{
    return ag_ckpt_resolve(dir, LM_LATEST, &lm_ckpt_kind, buf, n, NULL, 0, err);
}

bool lm_ckpt_exists(const char *dir) { return ag_ckpt_exists(dir, &lm_ckpt_kind); }

// --- reading ---

void lm_model_free(lm_model *m)
{
    if (!m) return;
    ag_gpt_free(m->g);
    ag_vocab_free(&m->vocab);
    memset(m, 0, sizeof *m);
}

/* where's model.safetensors (its path in path [PATHLEN]) loaded in *f (the caller frees it), its
 * metadata into m (ag_gpt_ckpt_meta): the config, the vocabulary, the iteration, the run. */
static ag_status open_model(const char *where, char *path, ag_st_file **f, lm_model *m, ag_error *err)
{
    memset(m, 0, sizeof *m);
    *f = NULL;
    if (path_of(path, where, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    if (!(*f = ag_st_load(path, err))) return AG_ERR_IO;   /* its message says whether missing or malformed */
    return ag_gpt_ckpt_meta(*f, path, &model_kind, &m->cfg, &m->cfg.model, &m->vocab, &m->iter, &m->run_id, err);
}

/* The model of the checkpoint directory where (already resolved) into the lm_model user. */
static ag_status read_model(const char *where, void *user, ag_error *err)
{
    lm_model *m = user;
    char path[PATHLEN];
    ag_st_file *f;
    ag_status st = open_model(where, path, &f, m, err);
    if (st == AG_OK) st = ag_gpt_ckpt_model(f, path, &m->cfg.model, m->cfg.seed, &m->g, err);
    ag_st_free(f);
    if (st) lm_model_free(m);
    return st;
}

/* A reader does not hold the run's lock: the library reads again when latest moved on meanwhile. */
ag_status lm_model_load_as(const char *dir, const char *which, lm_model *m, ag_error *err)
{
    char note[sizeof m->note];
    memset(m, 0, sizeof *m);
    ag_status st = ag_ckpt_read(dir, which, &lm_ckpt_kind, read_model, m, note, sizeof note, err);
    if (st == AG_OK) snprintf(m->note, sizeof m->note, "%s", note);
    return st;
}

ag_status lm_model_load(const char *dir, lm_model *m, ag_error *err)
{
    return lm_model_load_as(dir, LM_LATEST, m, err);
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
    /* a loss is a finite number >= 0; the validation loss is NaN exactly when there is no split */
    bool val_ok = s->n_val == 0 ? isnan(s->eval_val) : isfinite(s->eval_val) && s->eval_val >= 0;
    if (!(isfinite(s->eval_train) && s->eval_train >= 0) || !val_ok)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata eval losses are not valid losses (train '%s', val '%s'%s)",
                         path, et, ev, s->n_val == 0 ? ", no validation split" : "");
    s->has_eval = true;
    return AG_OK;
}

/* The run's best evaluation so far (a state older than it: its own evaluation, if any). */
static ag_status read_best_meta(const ag_st_file *f, const char *path, lm_train_state *s, ag_error *err)
{
    const char *bi = ag_st_meta_get(f, "best_iter"), *bl = ag_st_meta_get(f, "best_loss");
    uint64_t it;
    s->best_iter = s->has_eval ? s->iter : -1;
    s->best_loss = !s->has_eval ? NAN : s->n_val > 0 ? s->eval_val : s->eval_train;
    if (!bi && !bl) return AG_OK;
    char *end = NULL;
    double loss = bl ? strtod(bl, &end) : NAN;
    if (!bi || !ag_u64_parse(bi, &it) || it > (uint64_t)s->iter || !bl || !*bl || *end || !isfinite(loss) || loss < 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata best_iter and best_loss are not an iteration up to %ld "
                         "and a loss", path, s->iter);
    s->best_iter = (long)it;
    s->best_loss = loss;
    return AG_OK;
}

/* train_state.safetensors's metadata into *s: the format tag, the counts, the batch sampler's
 * RNG, the data split, the evaluation and the best one. */
static ag_status read_state_meta(const ag_st_file *f, const char *path, lm_train_state *s, ag_error *err)
{
    const char *fmt = ag_st_meta_get(f, "format");
    if (!fmt || strcmp(fmt, LM_STATE_FORMAT) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a char_lm train state (metadata format %s, expected \"%s\")",
                         path, fmt ? fmt : "missing", LM_STATE_FORMAT);
    static const char *const keys[] = {"iter", "step", "rng_state", "rng_inc", "n_tokens", "n_train", "n_val",
                                       "data_hash"};
    const uint64_t big = (uint64_t)1 << 53, most[] = {big, big, UINT64_MAX, UINT64_MAX, big, big, big, UINT64_MAX};
    uint64_t v[8];   /* in keys' order */
    ag_status st;
    for (int i = 0; i < 8; i++)
        if ((st = ag_st_meta_u64(f, path, keys[i], most[i], &v[i], err))) return st;
    if (v[3] % 2 == 0 || v[5] + v[6] != v[4])
        return ag_seterr(err, AG_ERR_FORMAT, "%s: inconsistent metadata (%s)", path,
                         v[3] % 2 == 0 ? "rng_inc must be odd" : "n_train + n_val != n_tokens");
    s->iter = (long)v[0];
    s->step = (long)v[1];
    s->rng.state = v[2];
    s->rng.inc = v[3];
    s->n_tokens = (size_t)v[4];
    s->n_train = (size_t)v[5];
    s->n_val = (size_t)v[6];
    s->data_hash = v[7];
    const char *id = ag_st_meta_get(f, "run_id");
    if (id && !ag_hex64_parse(id, &s->run_id))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"run_id\" is not 16 hex digits", path);
    if ((st = read_eval_meta(f, path, s, err))) return st;
    return read_best_meta(f, path, s, err);
}

// --- whose a checkpoint is ---

/* The header fields of the pair m (model) and t (train state) of the checkpoint in path. */
static ag_status identify_pair(const ag_st_file *m, const ag_st_file *t, const char *path, ag_ckpt_id *id,
                               ag_error *err)
{
    const char *mf = ag_st_meta_get(m, "format"), *tf = ag_st_meta_get(t, "format");
    if (!mf || strcmp(mf, LM_CKPT_FORMAT) != 0 || !tf || strcmp(tf, LM_STATE_FORMAT) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a char_lm checkpoint (format tags)", path);
    id->run_id = ag_st_meta_hex(m, "run_id");
    id->iter = ag_st_meta_iter(m, "iter");
    id->model_hash = ag_st_meta_hex(t, "model_hash");
    id->follows = ag_st_meta_hex(t, "follows");
    id->best_iter = ag_st_meta_get(t, "best_iter") ? ag_st_meta_iter(t, "best_iter") : -1;
    id->eval = ag_st_meta_loss(t, "eval_val_loss");
    if (isnan(id->eval)) id->eval = ag_st_meta_loss(t, "eval_train_loss");   /* no validation split */
    id->origin = id->iter == 0 ? id->model_hash : 0;   /* a run's first: its untrained weights */
    if (id->iter < 0 || ag_st_meta_iter(t, "iter") != id->iter || ag_st_meta_hex(t, "run_id") != id->run_id)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: its two files are not one checkpoint (iter, run_id)", path);
    return AG_OK;
}

ag_status lm_ckpt_identify(const char *path, ag_ckpt_id *id, ag_error *err)
{
    return ag_ckpt_identify_pair(path, LM_MODEL_FILE, LM_STATE_FILE, identify_pair, id, err);
}

/* The files of a run directory that char_lm writes besides the library's (every picture,
 * script and table a train or --lr-find writes there). */
static const char *const run_files[] = {"attn.png", "attn.gp", "activations.csv", "activations.png",
                                        "activations.gp", "lr_find.png", "lr_find.gp", NULL};

const ag_ckpt_kind lm_ckpt_kind = {.files = ckpt_files, .run_files = run_files, .legacy = true,
                                   .identify = lm_ckpt_identify, .file_id = ag_gpt_ckpt_file_id, .pick_flag = "--ckpt"};

/* The model file in where is of iteration iter too: a pair of two iterations (a copy of a later
 * state over an earlier model) is named so, before the weights' binding calls it two branches. */
static ag_status same_iteration(const char *where, long iter, ag_error *err)
{
    char mp[PATHLEN];
    ag_error ignored = {0};
    if (path_of(mp, where, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    ag_st_file *m = ag_st_load_header(mp, &ignored);
    long it = m ? ag_st_meta_iter(m, "iter") : -1;
    ag_st_free(m);
    if (it < 0 || it == iter) return AG_OK;   /* unreadable: the binding check says what is wrong */
    return ag_seterr(err, AG_ERR_FORMAT, "%s holds model.safetensors of iteration %ld but train_state.safetensors of "
                     "iteration %ld: the two files are not one checkpoint (a file copied from another?)", where, it,
                     iter);
}

/* where's train_state.safetensors into P's moments and *s, checked against where's weights file
 * and P's weights (already read): s->prev_hash is theirs, the one the next save follows. */
static ag_status read_state_in(const char *where, ag_params *P, lm_train_state *s, ag_error *err)
{
    char path[PATHLEN];
    memset(s, 0, sizeof *s);
    if (path_of(path, where, LM_STATE_FILE, err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return AG_ERR_IO;
    ag_status st = read_state_meta(f, path, s, err);
    if (st == AG_OK) st = ag_ckpt_read_moments(f, path, P, err);
    if (st == AG_OK) st = same_iteration(where, s->iter, err);
    if (st == AG_OK) st = ag_ckpt_check_bound(f, path, LM_MODEL_FILE, P, err);
    s->prev_hash = st == AG_OK ? ag_weights_hash(P) : 0;   /* the next save follows this one */
    ag_st_free(f);
    if (st) memset(s, 0, sizeof *s);
    return st;
}

ag_status lm_train_state_load(const char *dir, ag_gpt *g, lm_train_state *s, ag_error *err)
{
    char where[PATHLEN];
    memset(s, 0, sizeof *s);
    ag_status rs = lm_ckpt_resolve(dir, where, sizeof where, err);
    return rs ? rs : read_state_in(where, g->params, s, err);
}

// --- the same files as ag_train_run's checkpoint format (train/train.h: ag_train_format) ---

/* The loop's state as char_lm's train state: the data's fields as the client keeps them, the
 * iteration and the optimizer's t both the loop's step, the evaluation saved when the loop
 * evaluated at this step. */
static lm_train_state from_loop(const lm_ckpt_user *u, const ag_train_state *st)
{
    lm_train_state t = u->data;
    t.iter = t.step = st->step;
    t.run_id = st->run_id;
    t.rng = st->rng;
    t.prev_hash = st->prev_hash;
    t.best_iter = st->best_step;
    t.best_loss = st->best_step >= 0 ? st->best_loss : NAN;
    t.has_eval = st->eval_step == st->step;
    t.eval_train = st->train_loss;
    t.eval_val = st->val_loss;
    return t;
}

static ag_status fmt_write(const ag_train_client *c, const char *tmp, const ag_train_state *st, ag_error *err)
{
    const lm_ckpt_user *u = c->user;
    lm_train_state t = from_loop(u, st);
    ag_status s = write_state(tmp, u->g, &t, err);   /* the state first, then the weights */
    return s ? s : write_model(tmp, u->g, u->cfg, u->vocab, t.iter, t.run_id, err);
}

/* model.safetensors of where into P (its metadata checked: a char_lm checkpoint, its config and
 * vocabulary whole), its iteration in *iter. */
static ag_status read_weights_in(const char *where, ag_params *P, long *iter, ag_error *err)
{
    char path[PATHLEN];
    ag_st_file *f;
    lm_model m;
    ag_status s = open_model(where, path, &f, &m, err);
    if (s == AG_OK) s = ag_ckpt_read_weights(f, path, P, err);
    *iter = m.iter;
    ag_st_free(f);
    lm_model_free(&m);
    return s;
}

/* The format's read: the weights, and with all the moments and where the run stood (the data's
 * fields into the client's lm_ckpt_user, for its check of the text). */
static ag_status fmt_read(const ag_train_client *c, const char *where, ag_train_state *st, bool all, ag_error *err)
{
    lm_ckpt_user *u = c->user;
    lm_train_state t;
    ag_status s = read_weights_in(where, c->params, &st->step, err);
    if (s || !all || (s = read_state_in(where, c->params, &t, err))) return s;
    u->data = t;
    st->rng = t.rng;
    st->run_id = t.run_id;
    st->best_step = t.best_iter;
    st->best_loss = t.best_iter >= 0 ? t.best_loss : INFINITY;
    st->eval_step = t.has_eval ? t.iter : -1;
    st->train_loss = t.has_eval ? t.eval_train : NAN;
    st->val_loss = t.has_eval ? t.eval_val : NAN;
    return AG_OK;
}

/* A run's origin: its untrained weights' hash, its iteration 0's model_hash (identify_pair). */
static uint64_t fmt_origin(const ag_train_client *c, uint64_t seed)
{
    (void)seed;
    return ag_weights_hash(c->params);
}

const ag_train_format lm_ckpt_format = {.kind = &lm_ckpt_kind, .write = fmt_write, .read = fmt_read,
                                        .origin = fmt_origin, .count = "iteration", .sync_point = true,
                                        .second_name = true};
