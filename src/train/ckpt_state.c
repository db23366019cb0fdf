/* ckpt_state.c -- a program's checkpoint of a weights file and a state file beside it
 * (train.h: ag_state_kind; char_lm's two files, ../shared/MODEL.md "Checkpoint files"): the
 * state file's metadata, written from the loop's state and read back, checked, and whose the
 * pair is. The weights file is the program's; only its tag, iter and run_id are read here. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fields.h"   /* ag_format_real */
#include "train.h"

#define PATHLEN 4096
#define META_MAX (12 + AG_STATE_KEYS_MAX)

static ag_status path_of(char *buf, const char *dir, const char *name, ag_error *err)
{
    if (ag_path_join(buf, PATHLEN, dir, name)) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
}

static int n_keys(const ag_state_kind *k)
{
    int n = 0;
    while (k->keys && k->keys[n] && n < AG_STATE_KEYS_MAX) n++;
    return n;
}

/* No validation split: the validation loss is NaN, the training loss the one that counts. */
static bool no_val(const ag_state_kind *k, const uint64_t *v) { return k->val_key >= 0 && v[k->val_key] == 0; }

// --- writing ---

/* The text of a state file's metadata values (state_meta fills it). */
typedef struct {
    char iter[32], id[20], mh[20], step[32], rs[32], ri[32], v[AG_STATE_KEYS_MAX][32], et[40], ev[40];
    char best_iter[32], best_loss[40], follows[20];
} state_text;

/* The loop's evaluation, best so far and the checkpoint it follows into meta from n on, when
 * there are some; returns the count. */
static int optional_meta(const ag_train_state *s, state_text *t, ag_st_meta *meta, int n)
{
    if (s->eval_step == s->step) {
        ag_format_real(t->et, sizeof t->et, s->train_loss);
        ag_format_real(t->ev, sizeof t->ev, s->val_loss);
        meta[n++] = (ag_st_meta){"eval_train_loss", t->et};
        meta[n++] = (ag_st_meta){"eval_val_loss", t->ev};
    }
    if (s->best_step >= 0) {
        snprintf(t->best_iter, sizeof t->best_iter, "%ld", s->best_step);
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

/* meta [META_MAX] of the state s (optimizer step t, the program's counts v) of weights P, its
 * strings in t; returns the count. */
static int state_meta(const ag_state_kind *k, const ag_train_state *s, long step, const uint64_t *v,
                      const ag_params *P, state_text *t, ag_st_meta *meta)
{
    snprintf(t->iter, sizeof t->iter, "%ld", s->step);
    ag_hex64_format(t->id, sizeof t->id, s->run_id);
    ag_hex64_format(t->mh, sizeof t->mh, ag_weights_hash(P));
    snprintf(t->step, sizeof t->step, "%ld", step);
    snprintf(t->rs, sizeof t->rs, "%llu", (unsigned long long)s->rng.state);
    snprintf(t->ri, sizeof t->ri, "%llu", (unsigned long long)s->rng.inc);
    const ag_st_meta always[] = {{"format", k->state_tag}, {"iter", t->iter}, {"run_id", t->id},
                                 {"model_hash", t->mh}, {"step", t->step}, {"rng_state", t->rs}, {"rng_inc", t->ri}};
    int n = (int)(sizeof always / sizeof always[0]);
    memcpy(meta, always, sizeof always);
    for (int i = 0; i < n_keys(k); i++) {
        snprintf(t->v[i], sizeof t->v[i], "%llu", (unsigned long long)v[i]);
        meta[n++] = (ag_st_meta){k->keys[i], t->v[i]};
    }
    return optional_meta(s, t, meta, n);
}

ag_status ag_state_write(const ag_state_kind *k, const char *dir, const ag_params *P, const ag_train_state *st,
                         long step, const uint64_t *v, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, dir, k->state_file, err)) return AG_ERR_ARG;
    state_text txt;
    ag_st_meta meta[META_MAX];
    int n_meta = state_meta(k, st, step, v, P, &txt, meta);
    return ag_ckpt_write_moments(path, P, meta, n_meta, err);
}

// --- reading ---

/* The evaluation done at the checkpoint's iteration, if the metadata has one (nv: no
 * validation split). */
static ag_status read_eval_meta(const ag_st_file *f, const char *path, bool nv, ag_train_state *s, ag_error *err)
{
    const char *et = ag_st_meta_get(f, "eval_train_loss"), *ev = ag_st_meta_get(f, "eval_val_loss");
    s->eval_step = -1;
    s->train_loss = s->val_loss = NAN;
    if (!et || !ev) return AG_OK;
    char *e1 = NULL, *e2 = NULL;
    s->train_loss = strtod(et, &e1);
    s->val_loss = strtod(ev, &e2);
    if (!*et || *e1 || !*ev || *e2)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata eval losses are not numbers", path);
    /* a loss is a finite number >= 0; the validation loss is NaN exactly when there is no split */
    bool val_ok = nv ? isnan(s->val_loss) : isfinite(s->val_loss) && s->val_loss >= 0;
    if (!(isfinite(s->train_loss) && s->train_loss >= 0) || !val_ok)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata eval losses are not valid losses (train '%s', val '%s'%s)",
                         path, et, ev, nv ? ", no validation split" : "");
    s->eval_step = s->step;
    return AG_OK;
}

/* The run's best evaluation so far (a state older than it: its own evaluation, if any). */
static ag_status read_best_meta(const ag_st_file *f, const char *path, bool nv, ag_train_state *s, ag_error *err)
{
    const char *bi = ag_st_meta_get(f, "best_iter"), *bl = ag_st_meta_get(f, "best_loss");
    bool has_eval = s->eval_step >= 0;
    uint64_t it;
    s->best_step = has_eval ? s->step : -1;
    s->best_loss = !has_eval ? INFINITY : nv ? s->train_loss : s->val_loss;
    if (!bi && !bl) return AG_OK;
    char *end = NULL;
    double loss = bl ? strtod(bl, &end) : NAN;
    if (!bi || !ag_u64_parse(bi, &it) || it > (uint64_t)s->step || !bl || !*bl || *end || !isfinite(loss) || loss < 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata best_iter and best_loss are not an iteration up to %ld "
                         "and a loss", path, s->step);
    s->best_step = (long)it;
    s->best_loss = loss;
    return AG_OK;
}

/* The counts of the state's metadata: iter, step, rng_state, rng_inc, then k->keys, checked. */
static ag_status read_counts(const ag_state_kind *k, const ag_st_file *f, const char *path, uint64_t *c,
                             ag_error *err)
{
    static const char *const keys[] = {"iter", "step", "rng_state", "rng_inc"};
    const uint64_t big = (uint64_t)1 << 53, most[] = {big, big, UINT64_MAX, UINT64_MAX};
    ag_status st;
    for (int i = 0; i < 4 + n_keys(k); i++) {
        const char *key = i < 4 ? keys[i] : k->keys[i - 4];
        if ((st = ag_st_meta_u64(f, path, key, i < 4 ? most[i] : k->most[i - 4], &c[i], err))) return st;
    }
    const char *why = c[3] % 2 == 0 ? "rng_inc must be odd" : k->check ? k->check(c + 4) : NULL;
    if (why) return ag_seterr(err, AG_ERR_FORMAT, "%s: inconsistent metadata (%s)", path, why);
    return AG_OK;
}

/* The state file f's metadata (read from path) into *s, *step and v: the format tag, the
 * counts, the batch sampler's RNG, the evaluation and the best one. */
static ag_status read_state_meta(const ag_state_kind *k, const ag_st_file *f, const char *path, ag_train_state *s,
                                 long *step, uint64_t *v, ag_error *err)
{
    const char *fmt = ag_st_meta_get(f, "format");
    if (!fmt || strcmp(fmt, k->state_tag) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a %s train state (metadata format %s, expected \"%s\")", path,
                         k->program, fmt ? fmt : "missing", k->state_tag);
    uint64_t c[4 + AG_STATE_KEYS_MAX];
    ag_status st = read_counts(k, f, path, c, err);
    if (st) return st;
    s->step = (long)c[0];
    *step = (long)c[1];
    s->rng = (ag_rng){.state = c[2], .inc = c[3]};
    memcpy(v, c + 4, (size_t)n_keys(k) * sizeof *v);
    const char *id = ag_st_meta_get(f, "run_id");
    s->run_id = 0;
    if (id && !ag_hex64_parse(id, &s->run_id))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"run_id\" is not 16 hex digits", path);
    if ((st = read_eval_meta(f, path, no_val(k, v), s, err))) return st;
    return read_best_meta(f, path, no_val(k, v), s, err);
}

/* The weights file in where is of iteration iter too: a pair of two iterations (a copy of a
 * later state over an earlier model) is named so, before the weights' binding calls it two
 * branches. */
static ag_status same_iteration(const ag_state_kind *k, const char *where, long iter, ag_error *err)
{
    char mp[PATHLEN];
    ag_error ignored = {0};
    if (path_of(mp, where, k->weights_file, err)) return AG_ERR_ARG;
    ag_st_file *m = ag_st_load_header(mp, &ignored);
    long it = m ? ag_st_meta_iter(m, "iter") : -1;
    ag_st_free(m);
    if (it < 0 || it == iter) return AG_OK;   /* unreadable: the binding check says what is wrong */
    return ag_seterr(err, AG_ERR_FORMAT, "%s holds %s of iteration %ld but %s of iteration %ld: the two files are not "
                     "one checkpoint (a file copied from another?)", where, k->weights_file, it, k->state_file, iter);
}

ag_status ag_state_read(const ag_state_kind *k, const char *where, ag_params *P, ag_train_state *st, long *step,
                        uint64_t *v, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, where, k->state_file, err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return AG_ERR_IO;
    ag_status s = read_state_meta(k, f, path, st, step, v, err);
    if (s == AG_OK) s = ag_ckpt_read_moments(f, path, P, err);
    if (s == AG_OK) s = same_iteration(k, where, st->step, err);
    if (s == AG_OK) s = ag_ckpt_check_bound(f, path, k->weights_file, P, err);
    if (s == AG_OK) st->prev_hash = ag_weights_hash(P);   /* the next save follows this one */
    ag_st_free(f);
    return s;
}

// --- whose a checkpoint is ---

/* The header fields of the pair m (weights) and t (state) of the checkpoint in path. */
static ag_status identify_pair(const ag_st_file *m, const ag_st_file *t, const char *path, const void *user,
                               ag_ckpt_id *id, ag_error *err)
{
    const ag_state_kind *k = user;
    const char *mf = ag_st_meta_get(m, "format"), *tf = ag_st_meta_get(t, "format");
    if (!mf || strcmp(mf, k->weights_tag) != 0 || !tf || strcmp(tf, k->state_tag) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a %s checkpoint (format tags)", path, k->program);
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

ag_status ag_state_identify(const ag_state_kind *k, const char *path, ag_ckpt_id *id, ag_error *err)
{
    return ag_ckpt_identify_pair(path, k->weights_file, k->state_file, identify_pair, k, id, err);
}

uint64_t ag_state_origin(const ag_train_client *c, uint64_t seed)
{
    (void)seed;
    return ag_weights_hash(c->params);
}
