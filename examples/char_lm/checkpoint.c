/* checkpoint.c -- char_lm's config, vocabulary and text fields around the library's GPT weights
 * file and state file (checkpoint.h); lm_ckpt_format the files as ag_train_run's. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "checkpoint.h"   /* attograd.h: nn/gpt_ckpt.h, train/train.h */

#define PATHLEN 4096
#define LM_CONFIG_JSON_MAX 16384
#define MODEL_FILE "model.safetensors"
#define STATE_FILE "train_state.safetensors"
#define MODEL_FORMAT "char_lm-1"

static const char *const text_keys[] = {"n_tokens", "n_train", "n_val", "data_hash", NULL};   /* the text's fields */
static const uint64_t text_most[] = {(uint64_t)1 << 53, (uint64_t)1 << 53, (uint64_t)1 << 53, UINT64_MAX};

static const char *text_check(const uint64_t *v) { return v[1] + v[2] != v[0] ? "n_train + n_val != n_tokens" : NULL; }

static const ag_state_kind state_kind = {.program = "char_lm", .weights_file = MODEL_FILE, .state_file = STATE_FILE,
                                         .weights_tag = MODEL_FORMAT, .state_tag = "char_lm-train-1",
                                         .keys = text_keys, .most = text_most, .val_key = 2, .check = text_check};

// --- model.safetensors ---

/* Reads a config for ag_gpt_ckpt_meta: into the lm_config user, its model's shape in *model. */
static ag_status parse_config(const char *json, void *user, ag_gpt_config *model, ag_error *why)
{
    lm_config *c = user;
    ag_status s = lm_config_from_json(c, json, why);
    *model = c->model;
    return s;
}

static const ag_gpt_ckpt_kind model_kind = {.format = MODEL_FORMAT, .program = "char_lm",
                                            .config_max = LM_CONFIG_JSON_MAX, .config = parse_config};

/* DIR/model.safetensors: g's weights with its config and vocabulary (gpt_ckpt.h). */
static ag_status write_model(const char *dir, const ag_gpt *g, const lm_config *cfg, const ag_vocab *v, long iter,
                             uint64_t run_id, ag_error *err)
{
    char path[PATHLEN];
    if (!ag_path_join(path, PATHLEN, dir, MODEL_FILE)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    lm_config c = *cfg;
    c.model = g->cfg;
    c.model.vocab_size = v->V;
    char *config = ag_fields_to_json(&c, lm_fields, LM_N_FIELDS);
    ag_status st = ag_gpt_ckpt_write(path, g, MODEL_FORMAT, config, v, iter, run_id, err);
    free(config);
    return st;
}

void lm_model_free(lm_model *m)
{
    if (!m) return;
    ag_gpt_free(m->g);
    ag_vocab_free(&m->vocab);
    memset(m, 0, sizeof *m);
}

/* where's model.safetensors into m: its metadata (ag_gpt_ckpt_meta), then its weights into P, or
 * without P into a new model of its config, m->g (on error, m freed). */
static ag_status read_in(const char *where, lm_model *m, ag_params *P, ag_error *err)
{
    char path[PATHLEN];
    memset(m, 0, sizeof *m);
    if (!ag_path_join(path, PATHLEN, where, MODEL_FILE)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", where);
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return AG_ERR_IO;   /* its message says whether missing or malformed */
    ag_status s = ag_gpt_ckpt_meta(f, path, &model_kind, &m->cfg, &m->cfg.model, &m->vocab, &m->iter, &m->run_id, err);
    if (s == AG_OK && P) s = ag_ckpt_read_weights(f, path, P, err);
    else if (s == AG_OK) s = ag_gpt_ckpt_model(f, path, &m->cfg.model, m->cfg.seed, &m->g, err);
    ag_st_free(f);
    if (s) lm_model_free(m);
    return s;
}

static ag_status read_model(const char *where, void *user, ag_error *err) { return read_in(where, user, NULL, err); }

ag_status lm_model_load_as(const char *dir, const char *which, lm_model *m, ag_error *err)
{
    char note[sizeof m->note];
    memset(m, 0, sizeof *m);
    ag_status st = ag_ckpt_read(dir, which, &lm_ckpt_kind, read_model, m, note, sizeof note, err);
    if (st == AG_OK) snprintf(m->note, sizeof m->note, "%s", note);
    return st;
}

// --- the run directory: the library's unit with char_lm's files (train/train.h) ---

static ag_status identify(const char *path, ag_ckpt_id *id, ag_error *err)
{
    return ag_state_identify(&state_kind, path, id, err);
}

/* ag_ckpt_kind's files and run_files (train/train.h): those of a checkpoint, then every picture,
 * script and table a train or --lr-find writes into the run directory besides the library's. */
static const char *const ckpt_files[] = {MODEL_FILE, STATE_FILE, NULL};
static const char *const run_files[] = {"attn.png", "attn.gp", "activations.csv", "activations.png",
                                        "activations.gp", "lr_find.png", "lr_find.gp", NULL};

const ag_ckpt_kind lm_ckpt_kind = {.files = ckpt_files, .run_files = run_files, .legacy = true,
                                   .identify = identify, .file_id = ag_gpt_ckpt_file_id, .pick_flag = "--ckpt"};

// --- train_state.safetensors, as ag_train_run's format (train/train.h: ag_train_format) ---

/* The format's write: the state first (the loop's step is the iteration and the optimizer's t),
 * then the weights. */
static ag_status fmt_write(const ag_train_client *c, const char *tmp, const ag_train_state *st, ag_error *err)
{
    const lm_ckpt_user *u = c->user;
    const uint64_t text[] = {u->data.n_tokens, u->data.n_train, u->data.n_val, u->data.data_hash};
    ag_status s = ag_state_write(&state_kind, tmp, c->params, st, st->step, text, err);
    return s ? s : write_model(tmp, u->g, u->cfg, u->vocab, st->step, st->run_id, err);
}

/* where's train_state.safetensors into P's moments, *st (the loop's terms) and *s (char_lm's;
 * left as it was on an error). */
static ag_status read_state(const char *where, ag_params *P, ag_train_state *st, lm_train_state *s, ag_error *err)
{
    uint64_t text[4];
    long step;
    ag_status r = ag_state_read(&state_kind, where, P, st, &step, text, err);
    if (r) return r;
    bool ev = st->eval_step >= 0;
    *s = (lm_train_state){.iter = st->step, .step = step, .run_id = st->run_id, .rng = st->rng, .n_tokens = text[0],
                          .n_train = text[1], .n_val = text[2], .data_hash = text[3], .has_eval = ev,
                          .eval_train = ev ? st->train_loss : 0, .eval_val = st->val_loss, .best_iter = st->best_step,
                          .best_loss = st->best_step >= 0 ? st->best_loss : NAN, .prev_hash = st->prev_hash};
    return AG_OK;
}

ag_status lm_train_state_load(const char *dir, ag_gpt *g, lm_train_state *s, ag_error *err)
{
    char where[PATHLEN];
    ag_train_state st = {0};
    memset(s, 0, sizeof *s);
    ag_status rs = ag_ckpt_resolve(dir, AG_CKPT_LATEST, &lm_ckpt_kind, where, sizeof where, NULL, 0, err);
    return rs ? rs : read_state(where, g->params, &st, s, err);
}

/* The format's read: the weights (their metadata checked), and with all the moments and where
 * the run stood (the text's fields into the client's lm_ckpt_user, for its check of the text). */
static ag_status fmt_read(const ag_train_client *c, const char *where, ag_train_state *st, bool all, ag_error *err)
{
    lm_ckpt_user *u = c->user;
    lm_model m;
    ag_status s = read_in(where, &m, c->params, err);
    long at = st->step = m.iter;
    lm_model_free(&m);
    if (s || !all || (s = read_state(where, c->params, st, &u->data, err))) return s;
    st->step = at;   /* the weights' iteration (the state's, unless that file has none) */
    return AG_OK;
}

const ag_train_format lm_ckpt_format = {.kind = &lm_ckpt_kind, .write = fmt_write, .read = fmt_read,
                                        .origin = ag_state_origin, .count = "iteration", .sync_point = true,
                                        .second_name = true};
