/* load.c -- a char_lm checkpoint read with the library's readers (load.h): the config is a
 * JSON object in model.safetensors's metadata, read here by key. */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include "load.h"

typedef enum { K_INT, K_LONG, K_REAL, K_U64, K_FLAG, K_SWITCH } key_kind;

#define AT(field) offsetof(step_config, field)
/* the config's keys one_step reads (char_lm writes more) */
static const struct {
    const char *key;
    key_kind kind;
    size_t at;
    const ag_switch *sw;
} keys[] = {
    {"vocab_size", K_INT, AT(model.vocab_size), NULL}, {"n_layer", K_INT, AT(model.n_layer), NULL},
    {"n_head", K_INT, AT(model.n_head), NULL}, {"n_embd", K_INT, AT(model.n_embd), NULL},
    {"block_size", K_INT, AT(model.block_size), NULL}, {"dropout", K_REAL, AT(model.dropout), NULL},
    {"norm_position", K_SWITCH, AT(model.norm_position), &ag_norm_position_switch},
    {"norm", K_SWITCH, AT(model.norm), &ag_norm_switch}, {"mlp", K_SWITCH, AT(model.mlp), &ag_mlp_switch},
    {"init", K_SWITCH, AT(model.init), &ag_init_switch}, {"no_scale", K_FLAG, AT(model.no_scale), NULL},
    {"mask_fill", K_SWITCH, AT(model.mask_fill), &ag_mask_fill_switch},
    {"init_scale", K_REAL, AT(model.init_scale), NULL}, {"batch_size", K_INT, AT(batch_size), NULL},
    {"lr", K_REAL, AT(lr), NULL}, {"min_lr", K_REAL, AT(min_lr), NULL},
    {"warmup_iters", K_LONG, AT(warmup_iters), NULL}, {"lr_decay_iters", K_LONG, AT(lr_decay_iters), NULL},
    {"lr_schedule", K_SWITCH, AT(lr_schedule), &ag_lr_shape_switch},
    {"weight_decay", K_REAL, AT(weight_decay), NULL}, {"beta1", K_REAL, AT(beta1), NULL},
    {"beta2", K_REAL, AT(beta2), NULL}, {"grad_clip", K_REAL, AT(grad_clip), NULL}, {"seed", K_U64, AT(seed), NULL},
    {"no_embedding_decay", K_FLAG, AT(model.no_embedding_decay), NULL},
    {"rope", K_FLAG, AT(model.rope), NULL},
};

/* the keys younger than the rest: an older run without one reads as 0 (init_scale 0: the weights as
 * drawn; lr_schedule 0: the cosine; no_embedding_decay false: MODEL.md's decay; rope false: pos_emb
 * alone) */
static bool optional_key(const char *key)
{
    return strcmp(key, "init_scale") == 0 || strcmp(key, "lr_schedule") == 0 ||
           strcmp(key, "no_embedding_decay") == 0 || strcmp(key, "rope") == 0;
}

/* v into the field at p as kind says; false when v is not of that kind */
static bool read_key(void *p, key_kind kind, const ag_switch *sw, json_t *v)
{
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : -1;
    switch (kind) {
    case K_INT: return n >= 0 && n <= 1 << 30 && (*(int *)p = (int)n, true);
    case K_LONG: return n >= 0 && (*(long *)p = (long)n, true);
    case K_U64: return n >= 0 && (*(uint64_t *)p = (uint64_t)n, true);
    case K_REAL: return json_is_number(v) && (*(double *)p = json_number_value(v), true);
    case K_FLAG: return json_is_boolean(v) && (*(bool *)p = json_is_true(v), true);
    case K_SWITCH: {
        int o = json_is_string(v) ? ag_switch_parse(sw, json_string_value(v)) : -1;
        return o >= 0 && (*(int *)p = o, true);
    }
    }
    return false;
}

static ag_status read_config(const char *json, const char *path, step_config *c, ag_error *err)
{
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je), *opt;
    ag_status s = root && json_is_object(root) ? AG_OK : ag_seterr(err, AG_ERR_FORMAT, "%s: config is not a JSON "
                                                                   "object", path);
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && s == AG_OK; i++) {
        json_t *v = json_object_get(root, keys[i].key);
        if (!v && optional_key(keys[i].key)) continue;   /* an older run: 0, from the memset */
        if (!v || !read_key((char *)c + keys[i].at, keys[i].kind, keys[i].sw, v))
            s = ag_seterr(err, AG_ERR_FORMAT, "%s: config: %s \"%s\"", path, v ? "bad value for" : "missing",
                          keys[i].key);
    }
    c->adamw = s == AG_OK && (opt = json_object_get(root, "optimizer")) && json_is_string(opt) &&
               strcmp(json_string_value(opt), "adamw") == 0;
    json_decref(root);
    return s;
}

/* path := where/name */
static ag_status join(char *path, const char *where, const char *name, ag_error *err)
{
    return ag_path_join(path, 4096, where, name) ? AG_OK : ag_seterr(err, AG_ERR_ARG, "%s: path too long", where);
}

/* The directory of the checkpoint's files: DIR/<DIR/latest>, or DIR itself without a latest. */
static ag_status resolve(const char *dir, char *where, ag_error *err)
{
    char name[64];
    ag_error why = {0};
    ag_status s = ag_ckpt_pointer(dir, AG_CKPT_LATEST, name, &why);
    if (s == AG_OK) return join(where, dir, name, err);
    if (s != AG_ERR_IO || (errno != ENOENT && errno != ENOTDIR)) return ag_seterr(err, s, "%s", why.msg);
    snprintf(where, 4096, "%s", dir);
    return AG_OK;
}

/* model.safetensors: its format, config and vocabulary, the model built and its weights read */
static ag_status read_model(const char *where, step_ckpt *c, ag_error *err)
{
    char path[4096];
    ag_st_file *f = join(path, where, "model.safetensors", err) ? NULL : ag_st_load(path, err);
    if (!f) return err->status ? err->status : AG_ERR_IO;
    const char *fmt = ag_st_meta_get(f, "format"), *config = ag_st_meta_get(f, "config");
    const char *vocab = ag_st_meta_get(f, "vocab");
    ag_error why = {0};
    ag_status s = fmt && strcmp(fmt, "char_lm-1") == 0 && config && vocab
                      ? AG_OK
                      : ag_seterr(err, AG_ERR_FORMAT, "%s: not a char_lm checkpoint (format, config, vocab)", path);
    if (s == AG_OK) s = read_config(config, path, &c->cfg, err);
    if (s == AG_OK) s = ag_vocab_from_json(path, vocab, &c->vocab, err);
    if (s == AG_OK && c->vocab.V != c->cfg.model.vocab_size)
        s = ag_seterr(err, AG_ERR_FORMAT, "%s: the vocab has %d characters, the config says %d", path, c->vocab.V,
                      c->cfg.model.vocab_size);
    if (s == AG_OK && !(c->g = ag_gpt_new(&c->cfg.model, c->cfg.seed, &why)))
        s = ag_seterr(err, why.status ? why.status : AG_ERR_NOMEM, "%s: %s", path, why.msg);
    if (s == AG_OK) s = ag_ckpt_read_weights(f, path, c->g->params, err);
    ag_st_free(f);
    return s;
}

/* A count from the metadata of f, read from path */
static ag_status meta_count(const ag_st_file *f, const char *path, const char *key, uint64_t *v, ag_error *err)
{
    const char *s = ag_st_meta_get(f, key);
    if (s && ag_u64_parse(s, v)) return AG_OK;
    return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"%s\" is %s", path, key, s ? "not a count" : "missing");
}

/* train_state.safetensors: where the run stands, and Adam's moments of these very weights */
static ag_status read_state(const char *where, step_ckpt *c, ag_error *err)
{
    char path[4096];
    ag_st_file *f = join(path, where, "train_state.safetensors", err) ? NULL : ag_st_load(path, err);
    if (!f) return err->status ? err->status : AG_ERR_IO;
    uint64_t iter = 0, step = 0, rs = 0, ri = 0, nt = 0, ntr = 0, hash;
    const struct { const char *key; uint64_t *v; } counts[] = {{"iter", &iter}, {"step", &step}, {"rng_state", &rs},
                                                                {"rng_inc", &ri}, {"n_tokens", &nt}, {"n_train", &ntr}};
    const char *fmt = ag_st_meta_get(f, "format"), *mh = ag_st_meta_get(f, "model_hash");
    ag_status s = fmt && strcmp(fmt, "char_lm-train-1") == 0
                      ? AG_OK
                      : ag_seterr(err, AG_ERR_FORMAT, "%s: not a char_lm train state", path);
    for (size_t i = 0; i < sizeof counts / sizeof counts[0] && s == AG_OK; i++)
        s = meta_count(f, path, counts[i].key, counts[i].v, err);
    c->iter = (long)iter;
    c->step = (long)step;
    c->rng = (ag_rng){.state = rs, .inc = ri};
    c->n_tokens = (size_t)nt;
    c->n_train = (size_t)ntr;
    if (s == AG_OK && mh && (!ag_hex64_parse(mh, &hash) || hash != ag_weights_hash(c->g->params)))
        s = ag_seterr(err, AG_ERR_FORMAT, "%s was not saved with the weights beside it (model_hash)", path);
    if (s == AG_OK) s = ag_ckpt_read_moments(f, path, c->g->params, err);
    ag_st_free(f);
    return s;
}

ag_status step_ckpt_load(const char *dir, step_ckpt *c, ag_error *err)
{
    char where[4096];
    memset(c, 0, sizeof *c);
    ag_status s = resolve(dir, where, err);
    if (s == AG_OK) s = read_model(where, c, err);
    if (s == AG_OK) s = read_state(where, c, err);
    if (s) step_ckpt_free(c);
    return s;
}

void step_ckpt_free(step_ckpt *c)
{
    ag_gpt_free(c->g);
    ag_vocab_free(&c->vocab);
    memset(c, 0, sizeof *c);
}
