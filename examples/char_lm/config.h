/* config.h -- every hyper-parameter of a char_lm run in one struct, the named configurations
 * (../shared/MODEL.md; the budget recipes 1min, 5min, 10min, 20min), and one table that describes
 * each field once (the library's kind, train/fields.h): a new hyper-parameter is one struct field
 * plus one table row. Nothing here prints or exits: errors are a status and one line in err. */
#ifndef LM_CONFIG_H
#define LM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "attograd.h"

typedef struct {
    ag_gpt_config model;    /* the GPT's shape, dropout and switches (nn.h) */
    int batch_size;         /* B */
    long max_iters;         /* optimizer steps in the whole run */
    double lr, min_lr;
    long warmup_iters;
    long lr_decay_iters;    /* the decay reaches min_lr here; defaults to max_iters */
    ag_lr_shape lr_schedule; /* optim.h: cosine (MODEL.md) or linear */
    double weight_decay;
    double beta1, beta2;
    double grad_clip;       /* global-norm clip; 0 disables */
    ag_optimizer optimizer; /* optim.h: adamw, adam, sgd */
    double momentum;        /* SGD only */
    double adamw_lr_scale;  /* Muon only: the lr of what AdamW moves, times lr (0: 1) */
    double val_fraction;    /* the last fraction of the tokens validates; 0: no validation */
    long eval_interval;     /* evaluate (and checkpoint) every this many steps */
    long eval_iters;        /* random batches per split in one evaluation */
    uint64_t seed;          /* initialisation, batches, dropout and evaluation batches */
    bool detect_anomaly;    /* the training ctx names the first op whose output goes non-finite */
    bool log_attn_stats;    /* attention entropy and peak weight per layer at each evaluation */
    bool log_activations;   /* per block residual RMS, MLP activation inputs, score range (lesson 14) */
    bool log_dynamics;      /* per layer gradient norms and update/weight ratios at each log step */
    double time_budget;     /* --time-budget in seconds (train/budget.h); 0: none */
    long budget_iters;      /* the steps --time-budget fixed (then max_iters too); 0: not (yet) */
    double lr_find;         /* > 0: the range test (lesson 16, train.h: ag_lr_range_at), not the schedule */
    bool overfit_batch;     /* every step trains on the same B windows (lesson 17) */
} lm_config;

/* One row per field of lm_config (train/fields.h: ag_field; shape: part of the model's shape,
 * which a resumed run may not change; optional: absent from older checkpoints, read as 0). */
#define LM_MAX_BUDGET_S 3.6e6     /* --time-budget: at most 1000h */
#define LM_N_FIELDS 41            /* rows in lm_fields (config.c checks it) */
extern const ag_field lm_fields[LM_N_FIELDS];

/* Fills c with the named configuration (lm_config_names) over the common defaults, vocab_size 0
 * (the data decides it). AG_ERR_ARG if the name is unknown (a bug: its text not the table's). */
ag_status lm_config_preset(lm_config *c, const char *name);
extern const char *const lm_config_names[];   /* NULL-terminated */

/* Checks every range and every relation between fields (n_embd % n_head, ...).
 * vocab_size is checked only when check_vocab. AG_ERR_ARG and a message naming the flag. */
ag_status lm_config_validate(const lm_config *c, bool check_vocab, ag_error *err);
/* The relations only a training run needs (checked for a run, not for a checkpoint that is
 * only read: one written before these checks must still sample): --min-lr <= --lr. AG_ERR_ARG. */
ag_status lm_config_check_training(const lm_config *c, ag_error *err);

/* ag_fields_from_json of lm_fields, then lm_config_validate: AG_ERR_FORMAT and a message. */
ag_status lm_config_from_json(lm_config *c, const char *json, ag_error *err);

/* The sampler of --overfit-batch (lesson 17), from c->seed alone: every step the same windows. */
ag_rng lm_overfit_rng(const lm_config *c);

#endif
