/* checkpoint.c -- model.safetensors and train_state.safetensors of a char_lm run: their
 * metadata (the config, the vocabulary, the train state), around the tensors the library writes
 * and reads for any ag_params (train/train.h: ag_ckpt_*), and the run directory's `latest`
 * that makes the pair one unit (the library's order of a save and of a read: ag_ckpt_save,
 * ag_ckpt_resolve). See checkpoint.h for the layout and the commit. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "checkpoint.h"
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

ag_status lm_ckpt_save_model(const char *dir, const ag_gpt *g, const lm_config *cfg, const ag_vocab *v,
                             long iter, uint64_t run_id, ag_error *err)
{
    char path[PATHLEN];
    if (path_of(path, dir, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    lm_config c = *cfg;
    c.model = g->cfg;
    c.model.vocab_size = v->V;
    char *config = lm_config_to_json(&c);
    char *vjson = ag_vocab_to_json(v);
    ag_status st = AG_ERR_NOMEM;
    if (!config || !vjson) {
        ag_seterr(err, st, "%s: out of memory", path);
    } else {
        char iters[32], id[20];
        snprintf(iters, sizeof iters, "%ld", iter);
        ag_hex64_format(id, sizeof id, run_id);
        ag_st_meta meta[] = {
            {"format", LM_CKPT_FORMAT}, {"config", config}, {"vocab", vjson}, {"iter", iters}, {"run_id", id},
        };
        st = ag_ckpt_write_weights(path, g->params, meta, (int)(sizeof meta / sizeof meta[0]), err);
    }
    free(vjson);
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

ag_status lm_ckpt_save_state(const char *dir, const ag_gpt *g, const lm_train_state *s, ag_error *err)
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

bool lm_ckpt_exists(const char *dir)
{
    char path[PATHLEN], found[64];
    struct stat sb;
    return (ag_path_join(path, sizeof path, dir, LM_LATEST) && lstat(path, &sb) == 0) ||
           (ag_path_join(path, sizeof path, dir, LM_MODEL_FILE) && lstat(path, &sb) == 0) ||
           ag_ckpt_list(dir, found, sizeof found) > 0;
}

/* What a save writes: the weights, the run's config and vocabulary, the train state. */
typedef struct {
    const ag_gpt *g;
    const lm_config *cfg;
    const ag_vocab *v;
    const lm_train_state *st;
} save_of;

/* Both files into the checkpoint's temporary directory tmp: the state first, then the weights. */
static ag_status write_pair(const char *tmp, void *user, ag_error *err)
{
    const save_of *w = user;
    ag_status s = lm_ckpt_save_state(tmp, w->g, w->st, err);
    if (s == AG_OK) s = lm_ckpt_save_model(tmp, w->g, w->cfg, w->v, w->st->iter, w->st->run_id, err);
    return s;
}

ag_status lm_ckpt_save_in(const ag_lock *lock, const char *dir, const ag_gpt *g, const lm_config *cfg,
                          const ag_vocab *v, const lm_train_state *st, ag_error *err)
{
    char path[PATHLEN], name[64];
    if (path_of(path, dir, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    if (ag_ckpt_check_finite(g->params, path, err)) return AG_ERR_NONFINITE;   /* before anything is written */
    save_of w = {g, cfg, v, st};
    const ag_ckpt_save_opts o = {.iter = st->iter, .run_id = st->run_id, .prev = st->prev_hash,
                                 .best_iter = st->best_iter, .is_best = st->has_eval && st->best_iter == st->iter,
                                 .second_name = true, .sync_point = true, .write = write_pair, .user = &w,
                                 .lock = lock};
    bool committed = false;   /* is_best as the evaluation sets it */
    return ag_ckpt_save(dir, &lm_ckpt_kind, &o, name, &committed, err);
}

ag_status lm_ckpt_save(const char *dir, const ag_gpt *g, const lm_config *cfg, const ag_vocab *v,
                       const lm_train_state *st, ag_error *err)
{
    return lm_ckpt_save_in(NULL, dir, g, cfg, v, st, err);
}

// --- reading ---

/* Metadata key as an unsigned integer <= max; a message naming the file otherwise. */
static ag_status meta_u64(const ag_st_file *f, const char *path, const char *key, uint64_t max,
                          uint64_t *out, ag_error *err)
{
    const char *s = ag_st_meta_get(f, key);
    if (!s) return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata has no \"%s\"", path, key);
    if (!ag_u64_parse(s, out) || *out > max)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"%s\" is not a valid count: '%s'", path, key, s);
    return AG_OK;
}

void lm_model_free(lm_model *m)
{
    if (!m) return;
    ag_gpt_free(m->g);
    ag_vocab_free(&m->vocab);
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
    /* bounded before parsing: jansson takes tens of bytes per number, so a 98 MB header would
     * cost gigabytes. The config is a few hundred bytes; a code point takes at most 7 digits, a
     * comma and a space. */
    if (strlen(config) > LM_CONFIG_JSON_MAX)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"config\" is %zu bytes, more than the %d a config "
                         "takes", path, strlen(config), LM_CONFIG_JSON_MAX);
    if (lm_config_from_json(&m->cfg, config, &why)) return ag_seterr(err, AG_ERR_FORMAT, "%s: %s", path, why.msg);
    size_t vmax = 9 * (size_t)m->cfg.model.vocab_size + 16;
    if (strlen(vjson) > vmax)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"vocab\" is %zu bytes, more than the %zu a vocabulary "
                         "of vocab_size %d can take", path, strlen(vjson), vmax, m->cfg.model.vocab_size);
    if ((st = ag_vocab_from_json(path, vjson, &m->vocab, err))) return st;
    if (m->vocab.V != m->cfg.model.vocab_size)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: the vocab has %d characters, the config says vocab_size %d", path,
                         m->vocab.V, m->cfg.model.vocab_size);
    if (iter && !ag_u64_parse(iter, &it))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"iter\" is not a count: '%s'", path, iter);
    m->iter = (long)it;
    const char *id = ag_st_meta_get(f, "run_id");
    if (id && !ag_hex64_parse(id, &m->run_id))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"run_id\" is not 16 hex digits", path);
    return AG_OK;
}

/* Before allocating a model of the config's size, check the file can hold it: a forged header
 * (n_embd 2048, n_layer 9 in an 18 KB file) must not cost gigabytes (nn.h: ag_gpt_min_params). */
static ag_status check_size(const ag_st_file *f, const char *path, const lm_config *c, ag_error *err)
{
    double need = ag_gpt_min_params(&c->model);
    if (4 * need <= (double)ag_st_data_bytes(f)) return AG_OK;
    return ag_seterr(err, AG_ERR_FORMAT, "%s: the config needs at least %.0f parameters (%.0f bytes), the file "
                     "holds %llu bytes of tensors", path, need, 4 * need, (unsigned long long)ag_st_data_bytes(f));
}

/* model.safetensors of the checkpoint directory where (already resolved). */
static ag_status load_model_from(const char *where, lm_model *m, ag_error *err)
{
    memset(m, 0, sizeof *m);
    char path[PATHLEN];
    if (path_of(path, where, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);   /* its message says whether missing or malformed */
    if (!f) return AG_ERR_IO;
    ag_status st = read_model_meta(f, path, m, err);
    if (st == AG_OK) st = check_size(f, path, &m->cfg, err);
    ag_error why = {0};
    if (st == AG_OK && !(m->g = ag_gpt_new(&m->cfg.model, m->cfg.seed, &why)))
        st = ag_seterr(err, AG_ERR_NOMEM, "%s: %s", path, why.msg);
    if (st == AG_OK) st = ag_ckpt_read_weights(f, path, m->g->params, err);
    ag_st_free(f);
    if (st) lm_model_free(m);
    return st;
}

static ag_status read_model(const char *where, void *m, ag_error *err)
{
    return load_model_from(where, m, err);
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
    const char *id = ag_st_meta_get(f, "run_id");
    if (id && !ag_hex64_parse(id, &s->run_id))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"run_id\" is not 16 hex digits", path);
    if ((st = read_eval_meta(f, path, s, err))) return st;
    return read_best_meta(f, path, s, err);
}

// --- whose a checkpoint is ---

static long meta_iter(const ag_st_file *f, const char *key)
{
    uint64_t v;
    return ag_u64_parse(ag_st_meta_get(f, key), &v) && v < ((uint64_t)1 << 53) ? (long)v : -1;
}

/* The metadata value key of f as a loss (a finite number >= 0), or NaN. */
static double meta_loss(const ag_st_file *f, const char *key)
{
    const char *v = ag_st_meta_get(f, key);
    char *end = NULL;
    double x = v && *v ? strtod(v, &end) : NAN;
    return end && !*end && isfinite(x) && x >= 0 ? x : NAN;
}

/* The header fields of the pair m (model) and t (train state) of the checkpoint in path. */
static ag_status identify_pair(const ag_st_file *m, const ag_st_file *t, const char *path, ag_ckpt_id *id,
                               ag_error *err)
{
    const char *mf = ag_st_meta_get(m, "format"), *tf = ag_st_meta_get(t, "format");
    if (!mf || strcmp(mf, LM_CKPT_FORMAT) != 0 || !tf || strcmp(tf, LM_STATE_FORMAT) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a char_lm checkpoint (format tags)", path);
    id->run_id = ag_st_meta_hex(m, "run_id");
    id->iter = meta_iter(m, "iter");
    id->model_hash = ag_st_meta_hex(t, "model_hash");
    id->follows = ag_st_meta_hex(t, "follows");
    id->best_iter = ag_st_meta_get(t, "best_iter") ? meta_iter(t, "best_iter") : -1;
    id->eval = meta_loss(t, "eval_val_loss");
    if (isnan(id->eval)) id->eval = meta_loss(t, "eval_train_loss");   /* no validation split */
    id->origin = id->iter == 0 ? id->model_hash : 0;   /* a run's first: its untrained weights */
    if (id->iter < 0 || meta_iter(t, "iter") != id->iter || ag_st_meta_hex(t, "run_id") != id->run_id)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: its two files are not one checkpoint (iter, run_id)", path);
    return AG_OK;
}

ag_status lm_ckpt_identify(const char *path, ag_ckpt_id *id, ag_error *err)
{
    return ag_ckpt_identify_pair(path, LM_MODEL_FILE, LM_STATE_FILE, identify_pair, id, err);
}

/* The run and iteration one checkpoint file's header gives (the older layout's pair may be half
 * removed by a kill); false when it is not one. */
static bool file_id(const char *path, ag_ckpt_id *id)
{
    ag_error ignored = {0};
    ag_st_file *f = ag_st_load_header(path, &ignored);
    const char *run = ag_st_meta_get(f, "run_id"), *iter = ag_st_meta_get(f, "iter");
    char *end = NULL;
    bool ok = run && iter && strlen(run) == 16 && *iter >= '0' && *iter <= '9';
    if (ok) {
        id->run_id = strtoull(run, NULL, 16);
        id->iter = strtol(iter, &end, 10);
        ok = !*end && id->iter >= 0;
    }
    ag_st_free(f);
    return ok;
}

/* The files of a run directory that char_lm writes besides the library's (every picture,
 * script and table a train or --lr-find writes there). */
static const char *const run_files[] = {"attn.png", "attn.gp", "activations.csv", "activations.png",
                                        "activations.gp", "lr_find.png", "lr_find.gp", NULL};

const ag_ckpt_kind lm_ckpt_kind = {.files = ckpt_files, .run_files = run_files, .legacy = true,
                                   .identify = lm_ckpt_identify, .file_id = file_id, .pick_flag = "--ckpt"};

/* The train state was saved with these weights (its "model_hash"; a state older than the
 * binding has none, and pairs as before). */
static ag_status check_binding(const ag_st_file *f, const char *path, const ag_params *P, ag_error *err)
{
    const char *mh = ag_st_meta_get(f, "model_hash");
    uint64_t want, have;
    if (!mh) return AG_OK;
    if (!ag_hex64_parse(mh, &want))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"model_hash\" is not 16 hex digits", path);
    if ((have = ag_weights_hash(P)) == want) return AG_OK;
    return ag_seterr(err, AG_ERR_FORMAT, "%s was saved with other weights than the model.safetensors it is read "
                     "with (model_hash %016llx, these weights %016llx): the two files are not one checkpoint (two "
                     "branches of a run mixed?)", path, (unsigned long long)want, (unsigned long long)have);
}

/* The model file in where is of iteration iter too: a pair of two iterations (a copy of a later
 * state over an earlier model) is named so, before the weights' binding calls it two branches. */
static ag_status same_iteration(const char *where, long iter, ag_error *err)
{
    char mp[PATHLEN];
    ag_error ignored = {0};
    if (path_of(mp, where, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    ag_st_file *m = ag_st_load_header(mp, &ignored);
    long it = m ? meta_iter(m, "iter") : -1;
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
    if (st == AG_OK) st = check_binding(f, path, P, err);
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
    save_of w = {u->g, u->cfg, u->vocab, &t};
    return write_pair(tmp, &w, err);
}

/* model.safetensors of where into P (its metadata checked: a char_lm checkpoint, its config and
 * vocabulary whole), its iteration in *iter. */
static ag_status read_weights_in(const char *where, ag_params *P, long *iter, ag_error *err)
{
    char path[PATHLEN];
    lm_model m;
    memset(&m, 0, sizeof m);
    if (path_of(path, where, LM_MODEL_FILE, err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return AG_ERR_IO;
    ag_status s = read_model_meta(f, path, &m, err);
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
