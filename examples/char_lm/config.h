/* config.h -- every hyper-parameter of a char_lm run in one struct, the named configurations
 * of ../shared/MODEL.md (tiny, baby, small) and the budget recipes (1min, 5min, 10min), and one table that describes each field once:
 * its command-line flag, its JSON key in a checkpoint, its type and its valid range. The
 * command-line parser (cli.c), the checkpoint writer and reader (checkpoint.c) and --resume's
 * "may this change?" check (train_setup.c) all walk that table, so a new hyper-parameter is one
 * struct field plus one table row.
 *
 * Nothing here prints or exits: errors come back as a status and a one-line message in an
 * ag_error. */
#ifndef LM_CONFIG_H
#define LM_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "attograd.h"

/* The optimizer, a switch like the model's (src/nn/switches.h): one row per value, the first
 * the default; train.c's update() is the `switch` that runs each. */
#define LM_OPTIMIZERS(X) \
    X(LM_ADAMW, "adamw", "Adam, weight decay decoupled, on 2-D weights only") \
    X(LM_ADAM,  "adam",  "Adam, weight decay as L2 in the gradient") \
    X(LM_SGD,   "sgd",   "plain SGD, with --momentum")
typedef enum { LM_OPTIMIZERS(AG_SWITCH_CONSTANT) } lm_optimizer;
extern const ag_switch lm_optimizer_switch;

typedef struct {
    ag_gpt_config model;    /* vocab_size, n_layer, n_head, n_embd, block_size, dropout, and the
                               switches norm_position, norm, mlp, init, no_scale, mask_fill */
    int batch_size;         /* B */
    long max_iters;         /* optimizer steps in the whole run */
    double lr, min_lr;
    long warmup_iters;
    long lr_decay_iters;    /* cosine reaches min_lr here; defaults to max_iters */
    double weight_decay;
    double beta1, beta2;
    double grad_clip;       /* global-norm clip; 0 disables */
    lm_optimizer optimizer;
    double momentum;        /* SGD only */
    double val_fraction;    /* the last fraction of the tokens validates; 0: no validation */
    long eval_interval;     /* evaluate (and checkpoint) every this many steps */
    long eval_iters;        /* random batches per split in one evaluation */
    uint64_t seed;          /* initialisation, batches, dropout and evaluation batches */
    bool detect_anomaly;    /* the training ctx names the first op whose output goes non-finite */
    bool log_attn_stats;    /* attention entropy and peak weight per layer at each evaluation */
    bool log_activations;   /* per block residual RMS, MLP activation inputs, score range (lesson 14) */
    bool log_dynamics;      /* per layer gradient norms and update/weight ratios at each log step */
    double time_budget;     /* --time-budget in seconds: the run ends within it (train_budget.c);
                               0: none */
    long budget_iters;      /* the steps --time-budget fixed once it had timed the first ones, then
                               also max_iters (and lr_decay_iters); 0: not fixed (yet) */
    double lr_find;         /* > 0: the range test (lesson 16): lr from this up to lr, exponentially
                               over max_iters steps, instead of the schedule (train.h: ag_lr_range_at) */
    bool overfit_batch;     /* every step trains on the same B windows (lesson 17) */
} lm_config;

/* The table: one row per field of lm_config. */
/* LM_T_ENUM: an int-sized enum, one of the values of a switch (src/nn/switches.h), written as
 * its name ("adamw", "post", "-inf");
 * LM_T_BOOL: a flag without a value on the command line ("--no-scale"), true/false in JSON. */
typedef enum { LM_T_INT, LM_T_LONG, LM_T_DOUBLE, LM_T_U64, LM_T_ENUM, LM_T_BOOL } lm_field_type;

typedef struct {
    const char *key;        /* JSON key in the checkpoint's config ("n_embd") */
    const char *flag;       /* command-line flag ("--n-embd"), or NULL (vocab_size) */
    lm_field_type type;
    size_t offset;          /* offsetof(lm_config, ...) */
    double lo, hi;          /* valid range, inclusive (LM_T_ENUM: unused, sw has the values) */
    bool lo_open;           /* the range excludes lo ("must be > 0") */
    bool hi_open;           /* the range excludes hi ("must be < 1") */
    bool shape;             /* part of the model's shape: a resumed run may not change it */
    bool optional;          /* may be missing from a checkpoint written before the field
                               existed: then it reads as 0, its MODEL.md default */
    const ag_switch *sw;    /* LM_T_ENUM: the values, their names and help (else NULL) */
    const char *help;       /* what the field is (--help: the lines of an LM_T_ENUM row) */
} lm_field;

#define LM_MAX_BUDGET_S 3.6e6     /* --time-budget: at most 1000h */
#define LM_N_FIELDS 37            /* rows in lm_fields (config.c checks it) */
extern const lm_field lm_fields[LM_N_FIELDS];
extern const int lm_n_fields;
/* The row with this JSON key or flag ("--n-embd"), or NULL. */
const lm_field *lm_field_by_key(const char *key);
const lm_field *lm_field_by_flag(const char *flag);

/* The field's value as a double (exact for every field but a seed above 2^53), for messages
 * and range checks. */
double lm_field_get(const lm_config *c, const lm_field *f);
/* The field's value as text, as the command line writes it: "64", "0.001", "adamw", "post",
 * "true". buf is always NUL-terminated; returns buf. */
const char *lm_field_format(const lm_config *c, const lm_field *f, char *buf, size_t n);
/* Whether field f holds the same value in a and b (compared in its own type). */
bool lm_field_equal(const lm_config *a, const lm_config *b, const lm_field *f);
/* Copies field f from src into dst. */
void lm_field_copy(lm_config *dst, const lm_config *src, const lm_field *f);
/* Parses s (the whole string: "12", "3e-4", "adamw"; "true"/"false"/"1"/"0" for a bool) into
 * field f of c, then checks the field's range. AG_ERR_ARG and a message such as
 * "--lr: not a number: 'abc'". time_budget takes a duration (lm_parse_duration). */
ag_status lm_field_parse(lm_config *c, const lm_field *f, const char *s, ag_error *err);

/* Fills c with the named configuration (tiny, baby, small; the budget recipes 1min, 5min and
 * 10min, each with its time_budget: docs/performance.md, "Recipes per budget") and the common
 * defaults. vocab_size is left 0 (the data decides it). AG_ERR_ARG if the name is unknown. */
ag_status lm_config_preset(lm_config *c, const char *name);
extern const char *const lm_config_names[];   /* NULL-terminated */

/* Checks every range and every relation between fields (n_embd % n_head, ...).
 * vocab_size is checked only when check_vocab. AG_ERR_ARG and a message naming the flag. */
ag_status lm_config_validate(const lm_config *c, bool check_vocab, ag_error *err);
/* The relations only a training run needs (checked for a run, not for a checkpoint that is
 * only read: one written before these checks must still sample): --min-lr <= --lr. AG_ERR_ARG. */
ag_status lm_config_check_training(const lm_config *c, ag_error *err);

/* The whole config as one flat JSON object, keys in table order:
 * {"vocab_size": 65, "n_layer": 2, ..., "norm_position": "pre", ..., "optimizer": "adamw", ...,
 * "no_scale": false, ...}. Reals are written with the fewest digits that read back to the same
 * double. malloc'd; NULL on OOM. */
char *lm_config_to_json(const lm_config *c);
/* Reads a JSON object written by lm_config_to_json. Every key of the table must be present
 * with the right type, except the optional ones (the switches added after the first
 * checkpoints: absent means MODEL.md's default); unknown keys are an error too.
 * AG_ERR_FORMAT and a message. */
ag_status lm_config_from_json(lm_config *c, const char *json, ag_error *err);

/* A duration as --time-budget takes it, in *seconds: one or more groups of a number (digits,
 * maybe a decimal point and more digits) and its unit, h, m or s, the units in that order and
 * each at most once ("90s", "5m", "1h30m", "1.5h"); or "none" (0: no budget). Anything else
 * ("0s", "-5m", "5 parsecs", "1e400s", "", "5m5", "5") is AG_ERR_ARG with a one-line message
 * naming flag; so is a duration over LM_MAX_BUDGET_S. */
ag_status lm_parse_duration(const char *flag, const char *s, double *seconds, ag_error *err);

/* The sampler of --overfit-batch (lesson 17): seeded from c->seed alone, so every step draws
 * the same windows. */
ag_rng lm_overfit_rng(const lm_config *c);

/* Formats a double with the fewest significant digits (up to 17) that read back exactly. */
void lm_format_real(char *buf, size_t n, double v);

#endif
