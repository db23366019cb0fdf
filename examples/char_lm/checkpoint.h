/* checkpoint.h -- char_lm's checkpoint directory (../shared/MODEL.md, "Checkpoint files").
 *
 * A run directory DIR holds DIR/latest (one line, the live checkpoint's name: "ckpt-00000120"),
 * DIR/best (the checkpoint of the run's lowest evaluation loss) and the ckpt-<iter>/ they name,
 * each with two files:
 *   model.safetensors        the parameters, F32, and __metadata__ format "char_lm-1", config (a
 *                            JSON object of every hyper-parameter), vocab (code points), iter,
 *                            run_id (the library's GPT weights file, nn/gpt_ckpt.h)
 *   train_state.safetensors  m.<name>, v.<name> (Adam's moments; SGD's momentum in m), and
 *                            format "char_lm-train-1", iter, run_id, model_hash (binding it to
 *                            its weights), step, rng_state, rng_inc, n_tokens, n_train, n_val,
 *                            data_hash; when there are some eval_train_loss, eval_val_loss,
 *                            best_iter, best_loss, follows (the run's checkpoint before)
 * They are written by ag_train_run's save (lm_ckpt_format, below): a kill at any instant leaves
 * DIR/latest naming a whole checkpoint (train/train.h: ag_ckpt_save, ag_ckpt_clean). Older run
 * directories (both files in DIR itself, no latest) load as before, and a ckpt-N directory can
 * be given too. The two files must agree on iter and run_id, and the state's model_hash on the
 * weights. Nothing prints; errors are a status and one line in err, naming the file. */
#ifndef LM_CHECKPOINT_H
#define LM_CHECKPOINT_H

#include <stdbool.h>
#include "attograd.h"
#include "config.h"
#include "data/corpus.h"
#include "data/hash.h"

#define LM_CKPT_FORMAT "char_lm-1"
#define LM_STATE_FORMAT "char_lm-train-1"
#define LM_LATEST AG_CKPT_LATEST   /* train/train.h */
#define LM_BEST AG_CKPT_BEST
#define LM_MODEL_FILE "model.safetensors"
#define LM_STATE_FILE "train_state.safetensors"

/* A model read from a checkpoint. Owns g and vocab; free with lm_model_free. */
typedef struct {
    lm_config cfg;      /* cfg.model.vocab_size == vocab.V */
    ag_vocab vocab;
    ag_gpt *g;
    long iter;          /* "iter" of model.safetensors */
    uint64_t run_id;    /* "run_id" of model.safetensors; 0 in checkpoints older than it */
    char note[640];     /* what the loader found wrong and read around (a bad DIR/best), for a
                           warning; "" when nothing */
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

/* The directory of DIR's live checkpoint files in buf [n]: ag_ckpt_resolve with lm_ckpt_kind
 * (DIR/<latest>, or DIR itself: the older layout, a ckpt-N); else one line saying what DIR holds. */
ag_status lm_ckpt_resolve(const char *dir, char *buf, size_t n, ag_error *err);
/* DIR holds a checkpoint: a latest, a model.safetensors of the older layout, or a ckpt-N. */
bool lm_ckpt_exists(const char *dir);

/* The identity of the checkpoint in directory path (header reads only; origin: the model_hash of
 * an iteration-0 checkpoint, the untrained weights). AG_ERR_FORMAT, AG_ERR_IO when it is not a
 * whole checkpoint: a file missing or unreadable, or the two files of other runs or iterations. */
ag_status lm_ckpt_identify(const char *path, ag_ckpt_id *id, ag_error *err);
/* char_lm's checkpoints for the library's rules: their two files, the older layout, the files
 * of a run directory that only char_lm writes, lm_ckpt_identify. */
extern const ag_ckpt_kind lm_ckpt_kind;

/* Reads the checkpoint's model.safetensors (DIR resolved as lm_ckpt_resolve says): checks the
 * format tag, the config, the vocabulary (its size must be the config's vocab_size; both
 * bounded before they are parsed), that the file holds exactly the model's parameters with
 * their shapes, then builds the model and copies the weights in. On error *m is zeroed. */
ag_status lm_model_load(const char *dir, lm_model *m, ag_error *err);
/* The same from DIR/<which> (LM_LATEST, LM_BEST), read again when the run's writer moved
 * DIR/<which> on while it was read (ag_ckpt_read); what was wrong with DIR/best in m->note. */
ag_status lm_model_load_as(const char *dir, const char *which, lm_model *m, ag_error *err);
void lm_model_free(lm_model *m);   /* NULL ok; leaves *m zeroed */

/* Reads the checkpoint's train_state.safetensors into g->params->m, ->v and *st, checking the
 * format tag, every m./v. tensor against g's parameters (finite; v, a mean of squares, not
 * negative), the metadata, and that g's weights (the checkpoint's model, loaded first) are
 * those the state was saved with (model_hash). */
ag_status lm_train_state_load(const char *dir, ag_gpt *g, lm_train_state *st, ag_error *err);

// --- the same files as ag_train_run's checkpoint format ---

/* What lm_ckpt_format reads from a client: its c->user points at one (the first member of the
 * client's own state). */
typedef struct {
    ag_gpt *g;               /* the model: c->params is g->params */
    const lm_config *cfg;    /* its config, saved in model.safetensors */
    const ag_vocab *vocab;   /*   and its vocabulary */
    lm_train_state data;     /* the text's fields (n_tokens, n_train, n_val, data_hash), saved with every
                                checkpoint; a read puts the checkpoint's whole state here, for the
                                client's check that a resume trains on the same text */
} lm_ckpt_user;

/* char_lm's checkpoint files as ag_train_run's format (train/train.h): the loop's step is the
 * iteration and the optimizer's t, its evaluation the one saved, its origin the untrained
 * weights' hash, with char_lm's fault points and names (sync_point, second_name). */
extern const ag_train_format lm_ckpt_format;

#endif
