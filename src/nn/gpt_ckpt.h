/* gpt_ckpt.h -- a GPT's weights file, for any program that trains an ag_gpt (char_lm's
 * model.safetensors, ../shared/MODEL.md "Checkpoint files"): every parameter, F32 (train.h's
 * ag_ckpt_write_weights), and in __metadata__ the program's format tag, its config (a JSON
 * object: the program's own, which holds the model's shape), the vocabulary (ag_vocab_to_json),
 * the iteration and the run_id. A reader checks the tag, bounds the config and the vocabulary
 * before parsing them, and the file's size before building a model of the config's shape.
 * (The optimizer's file beside it, bound to these weights: train.h's ag_ckpt_check_bound.) */
#ifndef AG_GPT_CKPT_H
#define AG_GPT_CKPT_H

#include "nn.h"
#include "../data/corpus.h"
#include "../io/safetensors.h"
#include "../train/train.h"

/* A program's weights files. */
typedef struct {
    const char *format;    /* its "format" tag ("char_lm-1") */
    const char *program;   /* a file of another tag is "not a <program> checkpoint" */
    size_t config_max;     /* the config's most bytes, checked before it is parsed */
    /* The config JSON into the program's config (user), its model's shape into *model; a
     * status and the reason in why (the message then names the file). */
    ag_status (*config)(const char *json, void *user, ag_gpt_config *model, ag_error *why);
} ag_gpt_ckpt_kind;

/* path := g's weights, __metadata__ format, config, vocab (v's), iter, run_id (16 hex digits),
 * in that order. config NULL: out of memory (the caller's JSON failed). A weight that is NaN or
 * Inf is AG_ERR_NONFINITE and nothing is written. */
ag_status ag_gpt_ckpt_write(const char *path, const ag_gpt *g, const char *format, const char *config,
                            const ag_vocab *v, long iter, uint64_t run_id, ag_error *err);
/* f's metadata (read from path): the format tag k->format, the config (k->config, into user and
 * *model), the vocabulary into *vocab (at most 9 bytes a character; exactly vocab_size
 * characters), iter and run_id (0 when absent: older files). AG_ERR_FORMAT naming path; *vocab
 * may hold a vocabulary then too (the caller frees it). */
ag_status ag_gpt_ckpt_meta(const ag_st_file *f, const char *path, const ag_gpt_ckpt_kind *k, void *user,
                           ag_gpt_config *model, ag_vocab *vocab, long *iter, uint64_t *run_id, ag_error *err);
/* *g := a GPT of model (seed: ag_gpt_new's) with f's weights: refused before it is allocated
 * when f cannot hold that many parameters (a forged header, ag_gpt_min_params), then
 * ag_ckpt_read_weights. *g NULL on error. */
ag_status ag_gpt_ckpt_model(const ag_st_file *f, const char *path, const ag_gpt_config *model, uint64_t seed,
                            ag_gpt **g, ag_error *err);
/* The run_id (16 hex digits) and iter of the file at path (a weights file, or the moments file
 * beside it when it has both keys), from its header alone: an ag_ckpt_kind's file_id, which
 * tells whose the files of an older layout are. false when it is unreadable or lacks either. */
bool ag_gpt_ckpt_file_id(const char *path, ag_ckpt_id *id);

#endif
