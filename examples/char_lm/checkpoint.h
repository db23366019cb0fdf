/* checkpoint.h -- char_lm's checkpoint directory (../shared/MODEL.md, "Checkpoint files"):
 *
 *   DIR/model.safetensors        every parameter under its MODEL.md name, in MODEL.md's order,
 *                                F32; __metadata__: format "char_lm-1", config (a JSON object of
 *                                every hyper-parameter), vocab (a JSON array of code points),
 *                                iter (the optimizer steps the weights have had in this run)
 *   DIR/train_state.safetensors  m.<name> and v.<name> (Adam's moments; SGD keeps its momentum
 *                                buffer in m) for every parameter; __metadata__: format
 *                                "char_lm-train-1", iter, step (the optimizer's t), the batch
 *                                sampler's RNG state (rng_state, rng_inc: decimal uint64), the
 *                                data split (n_tokens, n_train, n_val, data_hash), and the
 *                                evaluation done at iter, if any (eval_train_loss, eval_val_loss)
 *
 * Both files are written atomically by ag_st_save (temporary file, fsync, rename); train_state
 * first, so a crash between the two leaves files whose "iter" disagree, which --resume
 * reports instead of mixing them.
 *
 * Nothing prints; errors are a status and one line in the ag_error err, naming the file. */
#ifndef LM_CHECKPOINT_H
#define LM_CHECKPOINT_H

#include <stdbool.h>
#include "attograd.h"
#include "config.h"
#include "corpus.h"

#define LM_CKPT_FORMAT "char_lm-1"
#define LM_STATE_FORMAT "char_lm-train-1"

/* A model read from a checkpoint. Owns g and vocab; free with lm_model_free. */
typedef struct {
    lm_config cfg;      /* cfg.model.vocab_size == vocab.V */
    vocab vocab;
    ag_gpt *g;
    long iter;          /* "iter" of model.safetensors */
} lm_model;

/* Where a run stands; with the weights and the moments it is all a resume needs. */
typedef struct {
    long iter;          /* optimizer steps done; the next step is number iter */
    long step;          /* the optimizer's step count t of the last update */
    ag_rng rng;         /* the batch sampler, as it is before step `iter` draws its batch */
    size_t n_tokens, n_train, n_val;
    uint64_t data_hash; /* lm_ids_hash of all the tokens: a different --data is noticed */
    bool has_eval;      /* an evaluation was done at iter: */
    double eval_train;  /*   its train loss */
    double eval_val;    /*   its val loss (NaN without a validation split) */
} lm_train_state;

/* FNV-1a over the token ids (cannot fail). */
uint64_t lm_ids_hash(const int *ids, size_t n);

/* "DIR/name" in buf (always NUL-terminated); false if it did not fit. */
bool lm_path_join(char *buf, size_t n, const char *dir, const char *name);

/* Writes DIR/model.safetensors from g's parameters (DIR must exist). A parameter that is NaN or
 * Inf is AG_ERR_NONFINITE and nothing is written (lm_ckpt_save checks before either file). */
ag_status lm_ckpt_save_model(const char *dir, const ag_gpt *g, const lm_config *cfg, const vocab *v,
                             long iter, ag_error *err);
/* Writes DIR/train_state.safetensors from g->params->m, ->v and st. */
ag_status lm_ckpt_save_state(const char *dir, const ag_gpt *g, const lm_train_state *st, ag_error *err);
/* Both: train_state first, then model (iter = st->iter). */
ag_status lm_ckpt_save(const char *dir, const ag_gpt *g, const lm_config *cfg, const vocab *v,
                       const lm_train_state *st, ag_error *err);

/* Reads DIR/model.safetensors: checks the format tag, the config, the vocabulary (its size
 * must be the config's vocab_size), that the file holds exactly the model's parameters with
 * their shapes, then builds the model and copies the weights in. On error *m is zeroed. */
ag_status lm_model_load(const char *dir, lm_model *m, ag_error *err);
void lm_model_free(lm_model *m);   /* NULL ok; leaves *m zeroed */

/* Reads DIR/train_state.safetensors into g->params->m, ->v and *st, checking the format tag,
 * every m./v. tensor against g's parameters and the metadata. */
ag_status lm_train_state_load(const char *dir, ag_gpt *g, lm_train_state *st, ag_error *err);

#endif
