/* load.h -- a char_lm checkpoint as one_step needs it (../shared/MODEL.md, "Checkpoint files"),
 * read with the library's readers alone: DIR/latest resolved (ag_ckpt_pointer), the config and
 * the vocabulary from model.safetensors's metadata, the GPT built from the config (ag_gpt_new)
 * and its weights read in (ag_ckpt_read_weights), then Adam's moments (ag_ckpt_read_moments)
 * and where the run stands from train_state.safetensors. It includes no file of char_lm. */
#ifndef ONE_STEP_LOAD_H
#define ONE_STEP_LOAD_H

#include <stdbool.h>
#include "attograd.h"
#include "data/corpus.h"

/* What one_step reads of the run's config: the model and the step's hyper-parameters. */
typedef struct {
    ag_gpt_config model;
    int batch_size;
    long warmup_iters, lr_decay_iters;
    ag_lr_shape lr_schedule;   /* cosine or linear (optim.h) */
    double lr, min_lr, weight_decay, beta1, beta2, grad_clip;
    uint64_t seed;
    bool adamw;         /* the run's optimizer is AdamW (one_step replays no other) */
} step_config;

/* A checkpoint, loaded. Owns g and vocab; free with step_ckpt_free. */
typedef struct {
    step_config cfg;
    ag_vocab vocab;
    ag_gpt *g;          /* the weights, and Adam's m and v in g->params */
    long iter;          /* optimizer steps done: the next step is number iter */
    long step;          /* AdamW's t of the last update */
    ag_rng rng;         /* the batch sampler, as it is before step iter draws its batch */
    size_t n_tokens, n_train;
} step_ckpt;

/* DIR/latest's checkpoint (or DIR itself, a ckpt-N directory) into *c; on error *c is freed and
 * err names the file. */
ag_status step_ckpt_load(const char *dir, step_ckpt *c, ag_error *err);
void step_ckpt_free(step_ckpt *c);   /* leaves *c zeroed */

#endif
