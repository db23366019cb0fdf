/* checkpoint.h -- char_lm's checkpoint directory (../shared/MODEL.md, "Checkpoint files").
 *
 * A run directory DIR holds one checkpoint at every instant, whole, and beside it the best one:
 *
 *   DIR/latest                   one line, the name of the live checkpoint ("ckpt-00000120")
 *   DIR/best                     one line, the checkpoint of the run's lowest evaluation loss
 *                                (validation; training without a validation split): often the
 *                                live one, never removed by a later, worse one (issue 19)
 *   DIR/ckpt-00000120/model.safetensors
 *                                every parameter under its MODEL.md name, in MODEL.md's order,
 *                                F32; __metadata__: format "char_lm-1", config (a JSON object of
 *                                every hyper-parameter), vocab (a JSON array of code points),
 *                                iter (the optimizer steps the weights have had in this run),
 *                                run_id (16 hex digits, drawn when the run started)
 *   DIR/ckpt-00000120/train_state.safetensors
 *                                m.<name> and v.<name> (Adam's moments; SGD keeps its momentum
 *                                buffer in m) for every parameter; __metadata__: format
 *                                "char_lm-train-1", iter, run_id, model_hash (16 hex digits:
 *                                FNV-1a of the model file's F32 weights, binding the state to
 *                                its model), step (the optimizer's t), the
 *                                batch sampler's RNG state (rng_state, rng_inc: decimal uint64),
 *                                the data split (n_tokens, n_train, n_val, data_hash), and if
 *                                there are some: the evaluation done at iter (eval_train_loss,
 *                                eval_val_loss), the run's best evaluation so far (best_iter,
 *                                best_loss), and follows (the model_hash of the run's checkpoint
 *                                before this one)
 *
 * Saving (lm_ckpt_save, through the library's ag_ckpt_save) writes both files into
 * DIR/ckpt-<iter>.tmp/ (each fsync'ed), renames that directory to DIR/ckpt-<iter>, and then
 * replaces DIR/latest (a temporary file, fsync, rename): that one rename commits the checkpoint.
 * Then DIR/best, if this is the best so far. Only then are the previous live and best ones
 * removed, if they are this run's and superseded (ag_ckpt_superseded): nothing else is ever
 * removed. A process killed at any step leaves DIR/latest naming a whole checkpoint, the old or
 * the new, and leftovers that the next `train` removes (ag_ckpt_clean), a best that lags the
 * live one mended. A reader resolves latest (or best) once and reads both files from that
 * directory; if the files vanish under it (the writer removed the previous checkpoint), it
 * resolves again (ag_ckpt_read).
 *
 * Older run directories (model.safetensors and train_state.safetensors in DIR itself, no
 * latest) load as before, and a ckpt-N directory can be given as a checkpoint directory too.
 * On load, the two files must agree on iter and run_id (a pair from two runs is refused), and
 * the train state's model_hash on the weights (a pair from two branches of one run is refused;
 * a state older than model_hash pairs as before).
 *
 * Nothing prints; errors are a status and one line in the ag_error err, naming the file. */
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

/* The directory that holds the checkpoint's files, in buf [n]: DIR/<name in DIR/latest>, or DIR
 * itself without DIR/latest (the older layout, or a ckpt-N directory given directly): the
 * library's ag_ckpt_resolve with lm_ckpt_kind, which also finds DIR/best (the one the live
 * train state names, issue 35, whatever DIR/best holds) and says what is wrong in one line
 * (never just "cannot open"). */
ag_status lm_ckpt_resolve(const char *dir, char *buf, size_t n, ag_error *err);
/* (DIR/latest and DIR/best themselves, and the names they hold: ag_ckpt_pointer, ag_ckpt_point,
 * ag_ckpt_name_ok in train/train.h.) */
/* DIR holds a checkpoint: a latest, a model.safetensors of the older layout, or a ckpt-N. */
bool lm_ckpt_exists(const char *dir);

// --- whose checkpoints a run directory holds (train/train.h: ag_ckpt_clean, ag_ckpt_recover, ...) ---

/* The identity of the checkpoint in directory path (header reads only; origin: the model_hash of
 * an iteration-0 checkpoint, the untrained weights). AG_ERR_FORMAT, AG_ERR_IO when it is not a
 * whole checkpoint: a file missing or unreadable, or the two files of other runs or iterations. */
ag_status lm_ckpt_identify(const char *path, ag_ckpt_id *id, ag_error *err);
/* char_lm's checkpoints for the library's rules: their two files, the older layout, the files
 * of a run directory that only char_lm writes, lm_ckpt_identify. */
extern const ag_ckpt_kind lm_ckpt_kind;

/* Writes DIR/model.safetensors from g's parameters (DIR must exist). A parameter that is NaN or
 * Inf is AG_ERR_NONFINITE and nothing is written (lm_ckpt_save checks before either file). */
ag_status lm_ckpt_save_model(const char *dir, const ag_gpt *g, const lm_config *cfg, const ag_vocab *v,
                             long iter, uint64_t run_id, ag_error *err);
/* Writes DIR/train_state.safetensors from g->params->m, ->v and st. */
ag_status lm_ckpt_save_state(const char *dir, const ag_gpt *g, const lm_train_state *st, ag_error *err);
/* A checkpoint of the run in DIR (iter = st->iter, run_id = st->run_id), committed as the
 * comment at the top says; on failure the previous checkpoint is still the live one. */
ag_status lm_ckpt_save(const char *dir, const ag_gpt *g, const lm_config *cfg, const ag_vocab *v,
                       const lm_train_state *st, ag_error *err);
/* The same into the directory lock holds (DIR's, held; NULL: none), wherever it is now: a DIR
 * moved meanwhile is an error after the save that says where it went (ag_ckpt_save's lock). */
ag_status lm_ckpt_save_in(const ag_lock *lock, const char *dir, const ag_gpt *g, const lm_config *cfg,
                          const ag_vocab *v, const lm_train_state *st, ag_error *err);

/* (What a config costs in memory, checked before paying it: nn.h's ag_gpt_train_bytes and its
 * kin, train.h's ag_check_memory and ag_check_checkpointable.) */

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

/* char_lm's checkpoint files (MODEL.md) as an ag_train_format (train/train.h), so that a run of
 * ag_train_run writes and resumes exactly the files char_lm's own train does: the loop's step is
 * the iteration and the optimizer's t, its evaluation the one saved, its origin the untrained
 * weights' hash; the fault points and names of char_lm's save (sync_point, second_name). */
extern const ag_train_format lm_ckpt_format;

#endif
