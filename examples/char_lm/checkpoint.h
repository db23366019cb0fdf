/* checkpoint.h -- char_lm's checkpoint files (../shared/MODEL.md, "Checkpoint files"): the library's
 * run directory (train/train.h: ag_ckpt_save), each checkpoint a model.safetensors (nn/gpt_ckpt.h)
 * and a train_state.safetensors (train/train.h: ag_state_kind) with char_lm's fields. Nothing
 * prints; errors are a status and one line in err, naming the file. */
#ifndef LM_CHECKPOINT_H
#define LM_CHECKPOINT_H

#include "attograd.h"
#include "config.h"
#include "data/hash.h"   /* data_hash: ag_ids_hash */

/* A model read from a checkpoint. Owns g and vocab; free with lm_model_free. */
typedef struct {
    lm_config cfg;      /* cfg.model.vocab_size == vocab.V */
    ag_vocab vocab;
    ag_gpt *g;
    long iter;          /* "iter" of model.safetensors */
    uint64_t run_id;    /* "run_id" of model.safetensors; 0 in checkpoints older than it */
    char note[640];     /* what the loader found wrong with DIR/best and read around, for a warning ("": none) */
} lm_model;

/* Where a run stands; with the weights and the moments it is all a resume needs. */
typedef struct {
    long iter;          /* optimizer steps done; the next step is number iter */
    long step;          /* the optimizer's step count t of the last update */
    uint64_t run_id;    /* drawn when the run started (ag_new_run_id), kept by --resume; 0: none */
    ag_rng rng;         /* the batch sampler, as it is before step `iter` draws its batch */
    size_t n_tokens, n_train, n_val;
    uint64_t data_hash; /* ag_ids_hash of all the tokens: a different --data is noticed */
    bool has_eval;      /* an evaluation was done at iter: */
    double eval_train;  /*   its train loss */
    double eval_val;    /*   its val loss (NaN without a validation split) */
    long best_iter;     /* the run's lowest evaluation loss so far: its iteration (-1: none yet), */
    double best_loss;   /*   the loss (val; train without a validation split) */
    uint64_t prev_hash; /* the model_hash of the run's last checkpoint, saved or resumed from: the
                           one the next save follows (0: none) */
} lm_train_state;

/* char_lm's checkpoints for the library's rules (train/train.h: ag_ckpt_kind; ag_ckpt_resolve,
 * ag_ckpt_exists with it). */
extern const ag_ckpt_kind lm_ckpt_kind;

/* Reads DIR/<which>'s model.safetensors (AG_CKPT_LATEST, AG_CKPT_BEST: ag_ckpt_read, read again
 * when the writer moved it on), checked (nn/gpt_ckpt.h), into a new model; what was wrong with
 * DIR/best in m->note. On error *m is zeroed. */
ag_status lm_model_load_as(const char *dir, const char *which, lm_model *m, ag_error *err);
void lm_model_free(lm_model *m);   /* NULL ok; leaves *m zeroed */

/* Reads the checkpoint's train_state.safetensors into g->params->m, ->v and *st, checked
 * (train/train.h: ag_state_read) against g's weights, the checkpoint's model loaded first. */
ag_status lm_train_state_load(const char *dir, ag_gpt *g, lm_train_state *st, ag_error *err);

/* What lm_ckpt_format reads from a client: its c->user points at one (the first member of the
 * client's own state). */
typedef struct {
    ag_gpt *g;               /* the model: c->params is g->params */
    const lm_config *cfg;    /* its config, saved in model.safetensors */
    const ag_vocab *vocab;   /*   and its vocabulary */
    lm_train_state data;     /* the text's fields, saved with every checkpoint; a read puts the
                                checkpoint's whole state here (the client checks the text) */
} lm_ckpt_user;

/* char_lm's checkpoint files as ag_train_run's format (train/train.h: ag_train_format). */
extern const ag_train_format lm_ckpt_format;

#endif
