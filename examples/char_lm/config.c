/* config.c -- the hyper-parameter table, the named configurations of ../shared/MODEL.md,
 * validation, and the config <-> JSON conversion used by checkpoints. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "config.h"

#define F(field) offsetof(lm_config, field)
#define INF HUGE_VAL
#define BIG 1e9   /* iteration counts: far beyond any run, still exact in a double and in JSON */

AG_SWITCH_DEFINE(lm_optimizer_switch, "optimizer", LM_OPTIMIZERS);

/* The enums the table reads and writes as int. */
_Static_assert(sizeof(lm_optimizer) == sizeof(int) && sizeof(ag_norm_position) == sizeof(int) &&
               sizeof(ag_norm_kind) == sizeof(int) && sizeof(ag_mlp_kind) == sizeof(int) &&
               sizeof(ag_weight_init) == sizeof(int) && sizeof(ag_mask_fill) == sizeof(int),
               "enums are int-sized");

/* A plain row: key, flag, type, offset, lo, hi, lo_open, hi_open, shape, help. */
#define ROW(key, flag, type, field, lo, hi, lo_open, hi_open, shape, help) \
    {key, flag, type, F(field), lo, hi, lo_open, hi_open, shape, false, NULL, help}
/* A switch added with issue 6: optional in older checkpoints; its values are those of sw, an
 * ag_switch (src/nn/switches.h), which --help lists under the row's help. */
#define ENUM(key, flag, field, sw, help) \
    {key, flag, LM_T_ENUM, F(field), 0, 0, 0, 0, 1, true, &(sw), help}
#define FLAG(key, flag, field, shape, help) \
    {key, flag, LM_T_BOOL, F(field), 0, 1, 0, 0, shape, true, NULL, help}

const lm_field lm_fields[] = {
    ROW("vocab_size", NULL, LM_T_INT, model.vocab_size, 1, 1114112, 0, 0, 1,
        "distinct code points of the corpus"),
    ROW("n_layer", "--n-layer", LM_T_INT, model.n_layer, 1, 256, 0, 0, 1, "Transformer blocks"),
    ROW("n_head", "--n-head", LM_T_INT, model.n_head, 1, 1024, 0, 0, 1, "attention heads"),
    ROW("n_embd", "--n-embd", LM_T_INT, model.n_embd, 1, 16384, 0, 0, 1, "channels C"),
    ROW("block_size", "--block-size", LM_T_INT, model.block_size, 1, 16384, 0, 0, 1, "context length T"),
    ROW("dropout", "--dropout", LM_T_DOUBLE, model.dropout, 0, 1, 0, 1, 0, "dropout probability"),
    ENUM("norm_position", "--norm-position", model.norm_position, ag_norm_position_switch,
         "where each block's two norms sit (ln_f stays in every case)"),
    ENUM("norm", "--norm", model.norm, ag_norm_switch, "the kind of ln1, ln2 and ln_f (their names stay)"),
    ENUM("mlp", "--mlp", model.mlp, ag_mlp_switch, "the feed-forward part of each block"),
    ENUM("init", "--init", model.init, ag_init_switch, "how the Linear weights are drawn"),
    FLAG("no_scale", "--no-scale", model.no_scale, 1, "scores without 1/sqrt(D)"),
    ENUM("mask_fill", "--mask-fill", model.mask_fill, ag_mask_fill_switch, "the score of a masked (future) position"),
    ROW("batch_size", "--batch-size", LM_T_INT, batch_size, 1, 1 << 20, 0, 0, 0, "windows per batch B"),
    ROW("max_iters", "--max-iters", LM_T_LONG, max_iters, 0, BIG, 0, 0, 0, "optimizer steps"),
    ROW("lr", "--lr", LM_T_DOUBLE, lr, 0, INF, 1, 0, 0, "peak learning rate"),
    ROW("min_lr", "--min-lr", LM_T_DOUBLE, min_lr, 0, INF, 0, 0, 0, "final learning rate"),
    ROW("warmup_iters", "--warmup-iters", LM_T_LONG, warmup_iters, 0, BIG, 0, 0, 0, "linear warmup steps"),
    ROW("lr_decay_iters", "--lr-decay-iters", LM_T_LONG, lr_decay_iters, 0, BIG, 0, 0, 0,
        "cosine decay ends here (default: max-iters)"),
    ROW("weight_decay", "--weight-decay", LM_T_DOUBLE, weight_decay, 0, INF, 0, 0, 0, "decay of 2-D weights"),
    ROW("beta1", "--beta1", LM_T_DOUBLE, beta1, 0, 1, 0, 1, 0, "Adam beta1"),
    ROW("beta2", "--beta2", LM_T_DOUBLE, beta2, 0, 1, 0, 1, 0, "Adam beta2"),
    ROW("grad_clip", "--grad-clip", LM_T_DOUBLE, grad_clip, 0, INF, 0, 0, 0,
        "global gradient norm limit (0: off)"),
    {"optimizer", "--optimizer", LM_T_ENUM, F(optimizer), 0, 0, 0, 0, 0, false, &lm_optimizer_switch,
     "the update rule"},
    ROW("momentum", "--momentum", LM_T_DOUBLE, momentum, 0, 1, 0, 1, 0, "SGD momentum"),
    ROW("val_fraction", "--val-fraction", LM_T_DOUBLE, val_fraction, 0, 1, 0, 1, 0,
        "share of tokens that validates (0: none)"),
    ROW("eval_interval", "--eval-interval", LM_T_LONG, eval_interval, 1, BIG, 0, 0, 0,
        "steps between evaluations and checkpoints"),
    ROW("eval_iters", "--eval-iters", LM_T_LONG, eval_iters, 1, 1e6, 0, 0, 0, "batches per split in an evaluation"),
    ROW("seed", "--seed", LM_T_U64, seed, 0, 9223372036854775807.0, 0, 0, 0, "random seed"),
    FLAG("detect_anomaly", "--detect-anomaly", detect_anomaly, 0, "name the first op that goes non-finite"),
    FLAG("log_attn_stats", "--log-attn-stats", log_attn_stats, 0, "attention entropy and peak per layer"),
    FLAG("log_dynamics", "--log-dynamics", log_dynamics, 0, "gradient norms and update ratios per layer"),
    FLAG("log_activations", "--log-activations", log_activations, 0, "residual stream, MLP activations, scores"),
    /* issue 21: optional, so that older checkpoints read as runs without a budget */
    {"time_budget", "--time-budget", LM_T_DOUBLE, F(time_budget), 0, LM_MAX_BUDGET_S, 0, 0, 0, true, NULL,
     "the run ends within this many seconds (0: no budget); on the command line a duration"},
    {"budget_iters", NULL, LM_T_LONG, F(budget_iters), 0, BIG, 0, 0, 0, true, NULL,
     "the steps --time-budget fixed after timing the first ones (0: not yet)"},
    /* issue 33 (lessons 16 and 17): optional, so that older checkpoints read as plain runs */
    {"lr_find", "--lr-find", LM_T_DOUBLE, F(lr_find), 0, INF, 0, 0, 0, true, NULL,
     "the range test: lr from this up to --lr, exponentially over --max-iters (0: off)"},
    FLAG("overfit_batch", "--overfit-batch", overfit_batch, 0, "train on one fixed batch (overfit it first)"),
    {"init_scale", "--init-scale", LM_T_DOUBLE, F(model.init_scale), 0, 1e6, 0, 0, 1, true, NULL,
     "every drawn weight times this at the start (0 or 1: as drawn; lesson 15)"},
};
const int lm_n_fields = LM_N_FIELDS;
_Static_assert(sizeof lm_fields / sizeof lm_fields[0] == LM_N_FIELDS, "LM_N_FIELDS");

const char *const lm_config_names[] = {"tiny", "baby", "small", "1min", "5min", "10min", NULL};

const lm_field *lm_field_by_key(const char *key)
{
    for (int i = 0; i < lm_n_fields; i++)
        if (strcmp(lm_fields[i].key, key) == 0) return &lm_fields[i];
    return NULL;
}

const lm_field *lm_field_by_flag(const char *flag)
{
    for (int i = 0; i < lm_n_fields; i++)
        if (lm_fields[i].flag && strcmp(lm_fields[i].flag, flag) == 0) return &lm_fields[i];
    return NULL;
}

// --- typed access ---

#define AT(c, f, T) ((T *)((char *)(c) + (f)->offset))
#define CAT(c, f, T) ((const T *)((const char *)(c) + (f)->offset))

double lm_field_get(const lm_config *c, const lm_field *f)
{
    switch (f->type) {
    case LM_T_INT: case LM_T_ENUM: return *CAT(c, f, int);
    case LM_T_LONG: return (double)*CAT(c, f, long);
    case LM_T_DOUBLE: return *CAT(c, f, double);
    case LM_T_U64: return (double)*CAT(c, f, uint64_t);
    case LM_T_BOOL: return *CAT(c, f, bool);
    }
    return 0;
}

bool lm_field_equal(const lm_config *a, const lm_config *b, const lm_field *f)
{
    switch (f->type) {
    case LM_T_INT: case LM_T_ENUM: return *CAT(a, f, int) == *CAT(b, f, int);
    case LM_T_LONG: return *CAT(a, f, long) == *CAT(b, f, long);
    case LM_T_DOUBLE: return *CAT(a, f, double) == *CAT(b, f, double);
    case LM_T_U64: return *CAT(a, f, uint64_t) == *CAT(b, f, uint64_t);
    case LM_T_BOOL: return *CAT(a, f, bool) == *CAT(b, f, bool);
    }
    return false;
}

static size_t field_size(const lm_field *f)
{
    switch (f->type) {
    case LM_T_INT: case LM_T_ENUM: return sizeof(int);
    case LM_T_LONG: return sizeof(long);
    case LM_T_DOUBLE: return sizeof(double);
    case LM_T_U64: return sizeof(uint64_t);
    case LM_T_BOOL: return sizeof(bool);
    }
    return 0;
}

void lm_field_copy(lm_config *dst, const lm_config *src, const lm_field *f)
{
    memcpy((char *)dst + f->offset, (const char *)src + f->offset, field_size(f));
}

const char *lm_field_format(const lm_config *c, const lm_field *f, char *buf, size_t n)
{
    switch (f->type) {
    case LM_T_INT: snprintf(buf, n, "%d", *CAT(c, f, int)); break;
    case LM_T_LONG: snprintf(buf, n, "%ld", *CAT(c, f, long)); break;
    case LM_T_U64: snprintf(buf, n, "%llu", (unsigned long long)*CAT(c, f, uint64_t)); break;
    case LM_T_DOUBLE: lm_format_real(buf, n, *CAT(c, f, double)); break;
    case LM_T_ENUM: snprintf(buf, n, "%s", ag_switch_name(f->sw, *CAT(c, f, int))); break;
    case LM_T_BOOL: snprintf(buf, n, "%s", *CAT(c, f, bool) ? "true" : "false"); break;
    }
    return buf;
}

void lm_format_real(char *buf, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {   /* a whole number as one: "30", never "3e+01" (issue 35) */
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

// --- ranges ---

static const char *field_label(const lm_field *f) { return f->flag ? f->flag : f->key; }

/* "--mlp must be gelu or swiglu (got 7)"; AG_OK when v is one of the values of f's switch. */
static ag_status check_enum(const lm_field *f, int v, ag_error *err)
{
    if (v >= 0 && v < f->sw->n) return AG_OK;
    char choices[256];
    return ag_seterr(err, AG_ERR_ARG, "%s must be %s (got %d)", field_label(f),
                     ag_switch_choices(f->sw, choices, sizeof choices), v);
}

/* "--lr must be > 0 (got -1)"; AG_OK when v is in range. */
static ag_status check_range(const lm_field *f, double v, ag_error *err)
{
    if (f->type == LM_T_ENUM) return check_enum(f, (int)v, err);
    bool low = f->lo_open ? !(v > f->lo) : !(v >= f->lo);
    bool high = f->hi_open ? !(v < f->hi) : !(v <= f->hi);
    if (!low && !high) return AG_OK;
    char lo[32], hi[32], got[32];
    lm_format_real(lo, sizeof lo, f->lo);
    lm_format_real(hi, sizeof hi, f->hi);
    lm_format_real(got, sizeof got, v);
    if (f->type == LM_T_BOOL) return ag_seterr(err, AG_ERR_ARG, "%s must be false or true", field_label(f));
    if (isinf(f->hi))
        return ag_seterr(err, AG_ERR_ARG, "%s must be %s %s (got %s)", field_label(f), f->lo_open ? ">" : ">=", lo,
                         got);
    return ag_seterr(err, AG_ERR_ARG, "%s must be in %s%s, %s%s (got %s)", field_label(f), f->lo_open ? "(" : "[",
                     lo, hi, f->hi_open ? ")" : "]", got);
}

// --- parsing one value: one function per type ---

static ag_status parse_enum(lm_config *c, const lm_field *f, const char *s, ag_error *err)
{
    int o = ag_switch_parse(f->sw, s);
    if (o < 0) {
        char choices[256];
        return ag_seterr(err, AG_ERR_ARG, "%s must be %s (got '%s')", field_label(f),
                         ag_switch_choices(f->sw, choices, sizeof choices), s);
    }
    *AT(c, f, int) = o;
    return AG_OK;
}

static ag_status parse_bool(lm_config *c, const lm_field *f, const char *s, ag_error *err)
{
    bool t = !strcmp(s, "true") || !strcmp(s, "1"), no = !strcmp(s, "false") || !strcmp(s, "0");
    if (!t && !no) return ag_seterr(err, AG_ERR_ARG, "%s must be true or false (got '%s')", field_label(f), s);
    *AT(c, f, bool) = t;
    return AG_OK;
}

static ag_status parse_double(lm_config *c, const lm_field *f, const char *s, ag_error *err)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || isspace((unsigned char)*s) || errno == ERANGE || !isfinite(v))
        return ag_seterr(err, AG_ERR_ARG, "%s: not a finite number: '%s'", field_label(f), s);
    if (check_range(f, v, err)) return AG_ERR_ARG;
    *AT(c, f, double) = v;
    return AG_OK;
}

static ag_status not_whole(const lm_field *f, const char *s, ag_error *err)
{
    return ag_seterr(err, AG_ERR_ARG, "%s: not a whole number%s: '%s'", field_label(f),
                     f->type == LM_T_U64 ? " >= 0" : "", s);
}

static ag_status parse_u64(lm_config *c, const lm_field *f, const char *s, ag_error *err)
{
    if (!*s || *s == '-' || *s == '+' || isspace((unsigned char)*s)) return not_whole(f, s, err);
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) return not_whole(f, s, err);
    if (v > (unsigned long long)INT64_MAX)
        return ag_seterr(err, AG_ERR_ARG, "%s must be in [0, %lld] (got %s)", field_label(f), (long long)INT64_MAX, s);
    *AT(c, f, uint64_t) = v;
    return AG_OK;
}

/* LM_T_INT and LM_T_LONG */
static ag_status parse_integer(lm_config *c, const lm_field *f, const char *s, ag_error *err)
{
    if (!*s || isspace((unsigned char)*s)) return not_whole(f, s, err);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || errno == ERANGE) return not_whole(f, s, err);
    if (check_range(f, (double)v, err)) return AG_ERR_ARG;
    if (f->type == LM_T_INT) *AT(c, f, int) = (int)v;
    else *AT(c, f, long) = (long)v;
    return AG_OK;
}

/* One group of a duration at *p: digits, maybe '.' and digits, then its unit; false when
 * there is none, or the unit is out of order (h before m before s, each once). */
static bool duration_group(const char **p, const char **units, double *seconds)
{
    const char *q = *p;
    size_t digits = strspn(q, "0123456789");
    if (digits == 0) return false;
    q += digits;
    if (*q == '.') {
        size_t frac = strspn(q + 1, "0123456789");
        if (frac == 0) return false;
        q += 1 + frac;
    }
    const char *u = *q ? strchr(*units, *q) : NULL;   /* the units not yet used, in order */
    if (!u) return false;
    static const double scale[] = {3600, 60, 1};
    *seconds += strtod(*p, NULL) * scale[2 - strlen(u + 1)];   /* digits and one '.': strtod reads them all */
    *units = u + 1;
    *p = q + 1;
    return true;
}

ag_status lm_parse_duration(const char *flag, const char *s, double *seconds, ag_error *err)
{
    if (strcmp(s, "none") == 0) {
        *seconds = 0;
        return AG_OK;
    }
    const char *p = s, *units = "hms";
    double total = 0;
    while (*p)
        if (!duration_group(&p, &units, &total))
            return ag_seterr(err, AG_ERR_ARG, "%s: not a duration: '%s' (write it as 90s, 5m, 1h30m or 1.5h; "
                             "none: no budget)", flag, s);
    if (p == s) return ag_seterr(err, AG_ERR_ARG, "%s: not a duration: '' (write it as 90s, 5m or 1h30m)", flag);
    if (!(total > 0))
        return ag_seterr(err, AG_ERR_ARG, "%s must be more than 0 (got '%s'; none: no budget)", flag, s);
    if (!(total <= LM_MAX_BUDGET_S)) return ag_seterr(err, AG_ERR_ARG, "%s must be at most 1000h (got '%s')", flag, s);
    *seconds = total;
    return AG_OK;
}

ag_status lm_field_parse(lm_config *c, const lm_field *f, const char *s, ag_error *err)
{
    if (f->offset == offsetof(lm_config, time_budget))   /* a double, written as a duration */
        return lm_parse_duration(field_label(f), s, AT(c, f, double), err);
    switch (f->type) {
    case LM_T_ENUM: return parse_enum(c, f, s, err);
    case LM_T_BOOL: return parse_bool(c, f, s, err);
    case LM_T_DOUBLE: return parse_double(c, f, s, err);
    case LM_T_U64: return parse_u64(c, f, s, err);
    case LM_T_INT:
    case LM_T_LONG: return parse_integer(c, f, s, err);
    }
    return not_whole(f, s, err);
}

// --- presets and validation ---

ag_status lm_config_preset(lm_config *c, const char *name)
{
    /* MODEL.md's three, then the recipes for 1, 5 and 10 minutes on 2 cores: the best that
     * bench/budget_sweep.sh found for 1 and 5, 5's with lr 6e-3 decaying to lr/100 and weight
     * decay 0.3 (it overfits by its end); for 10, the 5-minute recipe with dropout 0.05, context
     * 256 and lr 8e-3 decaying to lr/100: the best of the runs in wall time (the rounds that found them:
     * git show d89a286:docs/performance.md). Each ends by its time_budget (its iters is only a
     * ceiling). Without --config, --time-budget picks one of the three by the steps it would get
     * (recipe.h; docs/performance.md, "The recipe follows the compute"). */
    static const struct {
        const char *name;
        int n_layer, n_head, n_embd, block_size, batch;
        long iters;
        double lr, min_lr;
        long warmup, eval_interval;
        double dropout, weight_decay, budget_s;
    } presets[] = {
        /* name, n_layer, n_head, n_embd, block_size, batch, iters, lr, min_lr, warmup, eval_interval,
         * dropout, weight_decay, time_budget */
        {"tiny", 2, 2, 64, 32, 16, 500, 1e-3, 1e-4, 50, 100, 0, 0.1, 0},
        {"baby", 4, 4, 128, 64, 12, 2000, 1e-3, 1e-4, 100, 250, 0, 0.1, 0},
        {"small", 6, 6, 384, 256, 64, 5000, 1e-3, 1e-4, 100, 250, 0, 0.1, 0},
        {"1min", 3, 4, 96, 64, 12, 1000000, 3e-3, 3e-4, 50, 2000, 0, 0.1, 60},
        {"5min", 4, 4, 96, 128, 12, 1000000, 6e-3, 6e-5, 100, 2000, 0, 0.3, 300},
        {"10min", 4, 4, 96, 256, 12, 1000000, 8e-3, 8e-5, 100, 2000, 0.05, 0.3, 600},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) != 0) continue;
        memset(c, 0, sizeof *c);
        c->model.n_layer = presets[i].n_layer;
        c->model.n_head = presets[i].n_head;
        c->model.n_embd = presets[i].n_embd;
        c->model.block_size = presets[i].block_size;
        c->model.dropout = presets[i].dropout;
        c->batch_size = presets[i].batch;
        c->max_iters = presets[i].iters;
        c->lr = presets[i].lr;
        c->min_lr = presets[i].min_lr;
        c->warmup_iters = presets[i].warmup;
        c->lr_decay_iters = presets[i].iters;
        c->weight_decay = presets[i].weight_decay;
        c->beta1 = 0.9;
        c->beta2 = 0.99;
        c->grad_clip = 1.0;
        c->optimizer = LM_ADAMW;
        c->momentum = 0.0;
        c->val_fraction = 0.1;
        c->eval_interval = presets[i].eval_interval;
        c->eval_iters = 20;
        c->seed = 1337;
        c->time_budget = presets[i].budget_s;
        return AG_OK;
    }
    return AG_ERR_ARG;
}

ag_status lm_config_validate(const lm_config *c, bool check_vocab, ag_error *err)
{
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *f = &lm_fields[i];
        if (f->type == LM_T_U64 || (!check_vocab && f->offset == offsetof(lm_config, model.vocab_size)))
            continue;
        if (check_range(f, lm_field_get(c, f), err)) return AG_ERR_ARG;
    }
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

char *lm_config_to_json(const lm_config *c)
{
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    len += (size_t)snprintf(s + len, cap - len, "{");
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *f = &lm_fields[i];
        char v[64];
        switch (f->type) {
        case LM_T_INT: snprintf(v, sizeof v, "%d", *CAT(c, f, int)); break;
        case LM_T_LONG: snprintf(v, sizeof v, "%ld", *CAT(c, f, long)); break;
        case LM_T_U64: snprintf(v, sizeof v, "%llu", (unsigned long long)*CAT(c, f, uint64_t)); break;
        case LM_T_ENUM: snprintf(v, sizeof v, "\"%s\"", ag_switch_name(f->sw, *CAT(c, f, int))); break;
        case LM_T_BOOL: snprintf(v, sizeof v, "%s", *CAT(c, f, bool) ? "true" : "false"); break;
        case LM_T_DOUBLE: {
            /* always a JSON real ("0.0", "1e-05"), so a reader sees the type */
            lm_format_real(v, sizeof v, *CAT(c, f, double));
            if (!strpbrk(v, ".eEn")) strcat(v, ".0");
            break;
        }
        }
        int w = snprintf(s + len, cap - len, "%s\"%s\": %s", i ? ", " : "", f->key, v);
        if (w < 0 || (size_t)w >= cap - len) { /* the table is small: 4 KiB is plenty */
            free(s);
            return NULL;
        }
        len += (size_t)w;
    }
    if (len + 2 > cap) {
        free(s);
        return NULL;
    }
    strcpy(s + len, "}");
    return s;
}

/* Every key of root is a field of the table. */
static ag_status check_keys(json_t *root, ag_error *err)
{
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!lm_field_by_key(key)) return ag_seterr(err, AG_ERR_FORMAT, "config: unknown key \"%s\"", key);
    }
    return AG_OK;
}

/* Field f of c from the JSON value v; false when v has the wrong type or is out of range. */
static bool read_field(lm_config *c, const lm_field *f, json_t *v)
{
    switch (f->type) {
    case LM_T_ENUM: {
        int o = json_is_string(v) ? ag_switch_parse(f->sw, json_string_value(v)) : -1;
        if (o >= 0) *AT(c, f, int) = o;
        return o >= 0;
    }
    case LM_T_BOOL:
        if (json_is_boolean(v)) *AT(c, f, bool) = json_is_true(v);
        return json_is_boolean(v);
    case LM_T_DOUBLE:
        if (json_is_number(v)) *AT(c, f, double) = json_number_value(v);
        return json_is_number(v);
    case LM_T_U64:
        if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
        *AT(c, f, uint64_t) = (uint64_t)json_integer_value(v);
        return true;
    case LM_T_INT:
    case LM_T_LONG: {
        json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
        if (!json_is_integer(v) || !((double)n >= f->lo && (double)n <= f->hi)) return false;
        if (f->type == LM_T_INT) *AT(c, f, int) = (int)n;
        else *AT(c, f, long) = (long)n;
        return true;
    }
    }
    return false;
}

/* Every field of the table from root (an optional one may be missing), then validated. */
static ag_status read_fields(lm_config *c, json_t *root, ag_error *err)
{
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *f = &lm_fields[i];
        json_t *v = json_object_get(root, f->key);
        if (!v && f->optional) continue;   /* an older checkpoint: the default (0) */
        if (!v) return ag_seterr(err, AG_ERR_FORMAT, "config: missing \"%s\"", f->key);
        if (!read_field(c, f, v)) return ag_seterr(err, AG_ERR_FORMAT, "config: bad value for \"%s\"", f->key);
    }
    ag_error why = {0};
    if (lm_config_validate(c, true, &why)) return ag_seterr(err, AG_ERR_FORMAT, "config: %s", why.msg);
    return AG_OK;
}

ag_status lm_config_from_json(lm_config *c, const char *json, ag_error *err)
{
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        ag_seterr(err, AG_ERR_FORMAT, "config is not a JSON object (%s)", root ? "other JSON value" : je.text);
        json_decref(root);
        return AG_ERR_FORMAT;
    }
    memset(c, 0, sizeof *c);
    ag_status st = check_keys(root, err);
    if (st == AG_OK) st = read_fields(c, root, err);
    json_decref(root);
    return st;
}

ag_rng lm_overfit_rng(const lm_config *c)
{
    ag_rng r;
    ag_rng_seed(&r, c->seed ^ 0x6f76657266697400ull);   /* "overfit": a stream of its own */
    return r;
}
