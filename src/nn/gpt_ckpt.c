/* gpt_ckpt.c -- a GPT's weights file with its config and vocabulary (gpt_ckpt.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "gpt_ckpt.h"

ag_status ag_gpt_ckpt_write(const char *path, const ag_gpt *g, const char *format, const char *config,
                            const ag_vocab *v, long iter, uint64_t run_id, ag_error *err)
{
    char *vjson = ag_vocab_to_json(v);
    ag_status st = AG_ERR_NOMEM;
    if (!config || !vjson) {
        ag_seterr(err, st, "%s: out of memory", path);
    } else {
        char iters[32], id[20];
        snprintf(iters, sizeof iters, "%ld", iter);
        ag_hex64_format(id, sizeof id, run_id);
        ag_st_meta meta[] = {
            {"format", format}, {"config", config}, {"vocab", vjson}, {"iter", iters}, {"run_id", id},
        };
        st = ag_ckpt_write_weights(path, g->params, meta, (int)(sizeof meta / sizeof meta[0]), err);
    }
    free(vjson);
    return st;
}

/* The vocabulary of a config of vocab_size characters: bounded before parsing (jansson takes
 * tens of bytes per number; a code point takes at most 7 digits, a comma and a space). */
static ag_status read_vocab(const char *vjson, const char *path, int vocab_size, ag_vocab *vocab, ag_error *err)
{
    size_t vmax = 9 * (size_t)vocab_size + 16;
    if (strlen(vjson) > vmax)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"vocab\" is %zu bytes, more than the %zu a vocabulary "
                         "of vocab_size %d can take", path, strlen(vjson), vmax, vocab_size);
    ag_status st = ag_vocab_from_json(path, vjson, vocab, err);
    if (st) return st;
    if (vocab->V != vocab_size)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: the vocab has %d characters, the config says vocab_size %d", path,
                         vocab->V, vocab_size);
    return AG_OK;
}

ag_status ag_gpt_ckpt_meta(const ag_st_file *f, const char *path, const ag_gpt_ckpt_kind *k, void *user,
                           ag_gpt_config *model, ag_vocab *vocab, long *iter, uint64_t *run_id, ag_error *err)
{
    const char *fmt = ag_st_meta_get(f, "format"), *config = ag_st_meta_get(f, "config");
    const char *vjson = ag_st_meta_get(f, "vocab"), *it = ag_st_meta_get(f, "iter"), *id = ag_st_meta_get(f, "run_id");
    uint64_t n = 0;
    ag_error why = {0};
    ag_status st;
    if (!fmt || strcmp(fmt, k->format) != 0)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a %s checkpoint (metadata format is %s%s%s, expected \"%s\")",
                         path, k->program, fmt ? "\"" : "", fmt ? fmt : "missing", fmt ? "\"" : "", k->format);
    if (!config || !vjson)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata has no \"%s\"", path, config ? "vocab" : "config");
    if (strlen(config) > k->config_max)   /* bounded before parsing, as the vocabulary */
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"config\" is %zu bytes, more than the %zu a config "
                         "takes", path, strlen(config), k->config_max);
    if (k->config(config, user, model, &why)) return ag_seterr(err, AG_ERR_FORMAT, "%s: %s", path, why.msg);
    if ((st = read_vocab(vjson, path, model->vocab_size, vocab, err))) return st;
    if (it && !ag_u64_parse(it, &n))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"iter\" is not a count: '%s'", path, it);
    *iter = (long)n;
    *run_id = 0;
    if (id && !ag_hex64_parse(id, run_id))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"run_id\" is not 16 hex digits", path);
    return AG_OK;
}

ag_status ag_gpt_ckpt_model(const ag_st_file *f, const char *path, const ag_gpt_config *model, uint64_t seed,
                            ag_gpt **g, ag_error *err)
{
    double need = ag_gpt_min_params(model);
    ag_error why = {0};
    *g = NULL;
    if (4 * need > (double)ag_st_data_bytes(f))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: the config needs at least %.0f parameters (%.0f bytes), the file "
                         "holds %llu bytes of tensors", path, need, 4 * need, (unsigned long long)ag_st_data_bytes(f));
    if (!(*g = ag_gpt_new(model, seed, &why))) return ag_seterr(err, AG_ERR_NOMEM, "%s: %s", path, why.msg);
    ag_status st = ag_ckpt_read_weights(f, path, (*g)->params, err);
    if (st) {
        ag_gpt_free(*g);
        *g = NULL;
    }
    return st;
}

bool ag_gpt_ckpt_file_id(const char *path, ag_ckpt_id *id)
{
    ag_error ignored = {0};
    ag_st_file *f = ag_st_load_header(path, &ignored);
    bool ok = ag_hex64_parse(ag_st_meta_get(f, "run_id"), &id->run_id) && (id->iter = ag_st_meta_iter(f, "iter")) >= 0;
    ag_st_free(f);
    return ok;
}
