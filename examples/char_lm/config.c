/* config.c -- the hyper-parameter table, the named configurations of ../shared/MODEL.md, and
 * the checks that are char_lm's own; the library (src/train/fields.c) parses, checks, formats and
 * writes the table as JSON. */
#include <math.h>
#include <string.h>
#include "config.h"

#define F(field) offsetof(lm_config, field)
#define INF HUGE_VAL
#define BIG 1e9   /* iteration counts: far beyond any run, still exact in a double and in JSON */

/* The enums the table reads and writes as int. */
_Static_assert(sizeof(ag_optimizer) == sizeof(int) && sizeof(ag_norm_position) == sizeof(int) &&
               sizeof(ag_norm_kind) == sizeof(int) && sizeof(ag_mlp_kind) == sizeof(int) &&
               sizeof(ag_weight_init) == sizeof(int) && sizeof(ag_mask_fill) == sizeof(int) &&
               sizeof(ag_lr_shape) == sizeof(int),
               "enums are int-sized");

/* A plain ag_field (train/fields.h): key, flag, type, field, lo, hi, lo_open, hi_open, shape, help. */
#define ROW(key, flag, type, field, lo, hi, lo_open, hi_open, shape, help) \
    {key, flag, type, F(field), lo, hi, lo_open, hi_open, shape, false, NULL, help, false, false}
/* A switch added with issue 6: optional in older checkpoints; its values those of sw (nn/switches.h). */
#define ENUM(key, flag, field, sw, help) \
    {key, flag, AG_FIELD_ENUM, F(field), 0, 0, 0, 0, 1, true, &(sw), help, false, false}
#define FLAG(key, flag, field, shape, help) \
    {key, flag, AG_FIELD_BOOL, F(field), 0, 1, 0, 0, shape, true, NULL, help, false, false}

const ag_field lm_fields[] = {
    ROW("vocab_size", NULL, AG_FIELD_INT, model.vocab_size, 1, 1114112, 0, 0, 1,
        "distinct code points of the corpus"),
    ROW("n_layer", "--n-layer", AG_FIELD_INT, model.n_layer, 1, 256, 0, 0, 1, "Transformer blocks"),
    ROW("n_head", "--n-head", AG_FIELD_INT, model.n_head, 1, 1024, 0, 0, 1, "attention heads"),
    ROW("n_embd", "--n-embd", AG_FIELD_INT, model.n_embd, 1, 16384, 0, 0, 1, "channels C"),
    ROW("block_size", "--block-size", AG_FIELD_INT, model.block_size, 1, 16384, 0, 0, 1, "context length T"),
    ROW("dropout", "--dropout", AG_FIELD_DOUBLE, model.dropout, 0, 1, 0, 1, 0, "dropout probability"),
    ENUM("norm_position", "--norm-position", model.norm_position, ag_norm_position_switch,
         "where each block's two norms sit (ln_f stays in every case)"),
    ENUM("norm", "--norm", model.norm, ag_norm_switch, "the kind of ln1, ln2 and ln_f (their names stay)"),
    ENUM("mlp", "--mlp", model.mlp, ag_mlp_switch, "the feed-forward part of each block"),
    ENUM("init", "--init", model.init, ag_init_switch, "how the Linear weights are drawn"),
    FLAG("no_scale", "--no-scale", model.no_scale, 1, "scores without 1/sqrt(D)"),
    ENUM("mask_fill", "--mask-fill", model.mask_fill, ag_mask_fill_switch, "the score of a masked (future) position"),
    ROW("batch_size", "--batch-size", AG_FIELD_INT, batch_size, 1, 1 << 20, 0, 0, 0, "windows per batch B"),
    ROW("max_iters", "--max-iters", AG_FIELD_LONG, max_iters, 0, BIG, 0, 0, 0, "optimizer steps"),
    ROW("lr", "--lr", AG_FIELD_DOUBLE, lr, 0, INF, 1, 0, 0, "peak learning rate"),
    ROW("min_lr", "--min-lr", AG_FIELD_DOUBLE, min_lr, 0, INF, 0, 0, 0, "final learning rate"),
    ROW("warmup_iters", "--warmup-iters", AG_FIELD_LONG, warmup_iters, 0, BIG, 0, 0, 0, "linear warmup steps"),
    ROW("lr_decay_iters", "--lr-decay-iters", AG_FIELD_LONG, lr_decay_iters, 0, BIG, 0, 0, 0,
        "the decay ends here (default: max-iters)"),
    /* optional, so that older checkpoints read as cosine */
    {"lr_schedule", "--lr-schedule", AG_FIELD_ENUM, F(lr_schedule), 0, 0, 0, 0, 0, true, &ag_lr_shape_switch,
     "how the rate falls from --lr to --min-lr after the warmup", false, false},
    ROW("weight_decay", "--weight-decay", AG_FIELD_DOUBLE, weight_decay, 0, INF, 0, 0, 0, "decay of 2-D weights"),
    ROW("beta1", "--beta1", AG_FIELD_DOUBLE, beta1, 0, 1, 0, 1, 0, "Adam beta1"),
    ROW("beta2", "--beta2", AG_FIELD_DOUBLE, beta2, 0, 1, 0, 1, 0, "Adam beta2"),
    ROW("grad_clip", "--grad-clip", AG_FIELD_DOUBLE, grad_clip, 0, INF, 0, 0, 0,
        "global gradient norm limit (0: off)"),
    {"optimizer", "--optimizer", AG_FIELD_ENUM, F(optimizer), 0, 0, 0, 0, 0, false, &ag_optimizer_switch,
     "the update rule", false, false},
    ROW("momentum", "--momentum", AG_FIELD_DOUBLE, momentum, 0, 1, 0, 1, 0, "SGD momentum"),
    ROW("val_fraction", "--val-fraction", AG_FIELD_DOUBLE, val_fraction, 0, 1, 0, 1, 0,
        "share of tokens that validates (0: none)"),
    ROW("eval_interval", "--eval-interval", AG_FIELD_LONG, eval_interval, 1, BIG, 0, 0, 0,
        "steps between evaluations and checkpoints"),
    ROW("eval_iters", "--eval-iters", AG_FIELD_LONG, eval_iters, 1, 1e6, 0, 0, 0, "batches per split in an evaluation"),
    ROW("seed", "--seed", AG_FIELD_U64, seed, 0, 9223372036854775807.0, 0, 0, 0, "random seed"),
    FLAG("detect_anomaly", "--detect-anomaly", detect_anomaly, 0, "name the first op that goes non-finite"),
    FLAG("log_attn_stats", "--log-attn-stats", log_attn_stats, 0, "attention entropy and peak per layer"),
    FLAG("log_dynamics", "--log-dynamics", log_dynamics, 0, "gradient norms and update ratios per layer"),
    FLAG("log_activations", "--log-activations", log_activations, 0, "residual stream, MLP activations, scores"),
    /* issue 21: optional, so that older checkpoints read as runs without a budget */
    {"time_budget", "--time-budget", AG_FIELD_DOUBLE, F(time_budget), 0, LM_MAX_BUDGET_S, 0, 0, 0, true, NULL,
     "the run ends within this many seconds (0: no budget); on the command line a duration", true, false},
    {"budget_iters", NULL, AG_FIELD_LONG, F(budget_iters), 0, BIG, 0, 0, 0, true, NULL,
     "the steps --time-budget fixed after timing the first ones (0: not yet)", false, false},
    /* issue 33 (lessons 16 and 17): optional, so that older checkpoints read as plain runs */
    {"lr_find", "--lr-find", AG_FIELD_DOUBLE, F(lr_find), 0, INF, 0, 0, 0, true, NULL,
     "the range test: lr from this up to --lr, exponentially over --max-iters (0: off)", false, false},
    FLAG("overfit_batch", "--overfit-batch", overfit_batch, 0, "train on one fixed batch (overfit it first)"),
    {"init_scale", "--init-scale", AG_FIELD_DOUBLE, F(model.init_scale), 0, 1e6, 0, 0, 1, true, NULL,
     "every drawn weight times this at the start (0 or 1: as drawn; lesson 15)", false, false},
    /* issue 36: optional, so that older checkpoints read as MODEL.md's decay of the embeddings */
    FLAG("no_embedding_decay", "--no-embedding-decay", model.no_embedding_decay, 0,
         "no weight decay on tok_emb and pos_emb (only on the Linear weights)"),
    /* issue 36: optional, so that older checkpoints read as one lr for all (0: 1) */
    {"adamw_lr_scale", "--adamw-lr-scale", AG_FIELD_DOUBLE, F(adamw_lr_scale), 0, 1e6, 0, 0, 0, true, NULL,
     "with --optimizer muon: what AdamW moves (embeddings, head, biases, norms) at --lr times this (0 or 1: "
     "--lr)", false, false},
    /* issue 36: optional, so that older checkpoints read as pos_emb alone (MODEL.md) */
    FLAG("rope", "--rope", model.rope, 1, "q and k turned by their position (RoPE), beside pos_emb"),
};
_Static_assert(sizeof lm_fields / sizeof lm_fields[0] == LM_N_FIELDS, "LM_N_FIELDS");

const char *const lm_config_names[] = {"tiny", "baby", "small", "1min", "5min", "10min", "20min", NULL};

// --- presets and validation ---

/* MODEL.md's three, then the recipes S, M, L and XL of recipe.h (docs/performance.md, "The recipe
 * follows the compute"), each ended by its time_budget (its iters only a ceiling). Each is its
 * values over the common ones (ag_fields_set: a later key wins, so XL is L's values, then 6
 * layers); lr_decay_iters = max_iters. */
static const char preset_common[] = "lr=1e-3 min_lr=1e-4 weight_decay=0.1 beta1=0.9 beta2=0.99 grad_clip=1 "
                                    "val_fraction=0.1 eval_iters=20 seed=1337";
#define L_VALUES "n_layer=4 n_head=4 n_embd=96 block_size=256 batch_size=12 max_iters=1000000 lr=8e-3 min_lr=8e-5 " \
                 "warmup_iters=100 eval_interval=2000 weight_decay=0.3 no_embedding_decay=true dropout=0.05 " \
                 "optimizer=muon rope=true time_budget=10m"
static const struct { const char *name, *values; } presets[] = {
    {"tiny", "n_layer=2 n_head=2 n_embd=64 block_size=32 batch_size=16 max_iters=500 warmup_iters=50 "
             "eval_interval=100"},
    {"baby", "n_layer=4 n_head=4 n_embd=128 block_size=64 batch_size=12 max_iters=2000 warmup_iters=100 "
             "eval_interval=250"},
    {"small", "n_layer=6 n_head=6 n_embd=384 block_size=256 batch_size=64 max_iters=5000 warmup_iters=100 "
              "eval_interval=250"},
    {"1min", "n_layer=3 n_head=4 n_embd=96 block_size=64 batch_size=12 max_iters=1000000 lr=3e-3 min_lr=3e-4 "
             "warmup_iters=50 eval_interval=2000 time_budget=1m"},
    {"5min", "n_layer=4 n_head=4 n_embd=96 block_size=128 batch_size=12 max_iters=1000000 lr=6e-3 min_lr=6e-5 "
             "warmup_iters=100 eval_interval=2000 weight_decay=0.3 optimizer=muon adamw_lr_scale=0.5 time_budget=5m"},
    {"10min", L_VALUES},
    {"20min", L_VALUES " n_layer=6 time_budget=20m"},
};

ag_status lm_config_preset(lm_config *c, const char *name)
{
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) != 0) continue;
        memset(c, 0, sizeof *c);
        ag_status s = ag_fields_set(c, lm_fields, LM_N_FIELDS, preset_common, NULL);
        if (s == AG_OK) s = ag_fields_set(c, lm_fields, LM_N_FIELDS, presets[i].values, NULL);
        c->lr_decay_iters = c->max_iters;
        return s;
    }
    return AG_ERR_ARG;
}

ag_status lm_config_validate(const lm_config *c, bool check_vocab, ag_error *err)
{
    lm_config v = *c;
    if (!check_vocab) v.model.vocab_size = 1;   /* 0 until the data decides it */
    if (ag_fields_check(&v, lm_fields, LM_N_FIELDS, err)) return AG_ERR_ARG;
    if (c->model.n_embd % c->model.n_head != 0)
        return ag_seterr(err, AG_ERR_ARG, "--n-head %d does not divide --n-embd %d", c->model.n_head,
                         c->model.n_embd);
    return AG_OK;
}

ag_status lm_config_check_training(const lm_config *c, ag_error *err)
{
    if (c->lr_find > 0 && c->lr_find >= c->lr)   /* the range test climbs from lr_find up to lr */
        return ag_seterr(err, AG_ERR_ARG, "--lr-find %g must be below --lr %g (the sweep climbs from it to --lr)",
                         c->lr_find, c->lr);
    if (c->min_lr > c->lr)   /* the schedule decays from lr down to min_lr, never up */
        return ag_seterr(err, AG_ERR_ARG, "--min-lr %g is above --lr %g (the rate decays from --lr to --min-lr)",
                         c->min_lr, c->lr);
    return AG_OK;
}

// --- JSON ---

ag_status lm_config_from_json(lm_config *c, const char *json, ag_error *err)
{
    memset(c, 0, sizeof *c);   /* an optional field missing from an older checkpoint: 0 */
    if (ag_fields_from_json(c, lm_fields, LM_N_FIELDS, json, err)) return AG_ERR_FORMAT;
    ag_error why = {0};
    if (lm_config_validate(c, true, &why)) return ag_seterr(err, AG_ERR_FORMAT, "config: %s", why.msg);
    return AG_OK;
}

ag_rng lm_overfit_rng(const lm_config *c)
{
    ag_rng r;
    ag_rng_seed(&r, c->seed ^ 0x6f76657266697400ull);   /* "overfit": a stream of its own */
    return r;
}
