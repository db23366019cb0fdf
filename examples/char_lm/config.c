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

/* key, flag, type, offset, lo, hi, lo_open, hi_open, shape, help */
const lm_field lm_fields[] = {
    {"vocab_size", NULL, LM_T_INT, F(model.vocab_size), 1, 1114112, 0, 0, 1,
     "distinct code points of the corpus"},
    {"n_layer", "--n-layer", LM_T_INT, F(model.n_layer), 1, 256, 0, 0, 1, "Transformer blocks"},
    {"n_head", "--n-head", LM_T_INT, F(model.n_head), 1, 1024, 0, 0, 1, "attention heads"},
    {"n_embd", "--n-embd", LM_T_INT, F(model.n_embd), 1, 16384, 0, 0, 1, "channels C"},
    {"block_size", "--block-size", LM_T_INT, F(model.block_size), 1, 16384, 0, 0, 1,
     "context length T"},
    {"dropout", "--dropout", LM_T_DOUBLE, F(model.dropout), 0, 1, 0, 1, 0, "dropout probability"},
    {"batch_size", "--batch-size", LM_T_INT, F(batch_size), 1, 1 << 20, 0, 0, 0, "windows per batch B"},
    {"max_iters", "--max-iters", LM_T_LONG, F(max_iters), 0, BIG, 0, 0, 0, "optimizer steps"},
    {"lr", "--lr", LM_T_DOUBLE, F(lr), 0, INF, 1, 0, 0, "peak learning rate"},
    {"min_lr", "--min-lr", LM_T_DOUBLE, F(min_lr), 0, INF, 0, 0, 0, "final learning rate"},
    {"warmup_iters", "--warmup-iters", LM_T_LONG, F(warmup_iters), 0, BIG, 0, 0, 0,
     "linear warmup steps"},
    {"lr_decay_iters", "--lr-decay-iters", LM_T_LONG, F(lr_decay_iters), 0, BIG, 0, 0, 0,
     "cosine decay ends here (default: max-iters)"},
    {"weight_decay", "--weight-decay", LM_T_DOUBLE, F(weight_decay), 0, INF, 0, 0, 0,
     "decay of 2-D weights"},
    {"beta1", "--beta1", LM_T_DOUBLE, F(beta1), 0, 1, 0, 1, 0, "Adam beta1"},
    {"beta2", "--beta2", LM_T_DOUBLE, F(beta2), 0, 1, 0, 1, 0, "Adam beta2"},
    {"grad_clip", "--grad-clip", LM_T_DOUBLE, F(grad_clip), 0, INF, 0, 0, 0,
     "global gradient norm limit (0: off)"},
    {"optimizer", "--optimizer", LM_T_OPTIMIZER, F(optimizer), 0, 2, 0, 0, 0, "adamw, adam or sgd"},
    {"momentum", "--momentum", LM_T_DOUBLE, F(momentum), 0, 1, 0, 1, 0, "SGD momentum"},
    {"val_fraction", "--val-fraction", LM_T_DOUBLE, F(val_fraction), 0, 1, 0, 1, 0,
     "share of tokens that validates (0: none)"},
    {"eval_interval", "--eval-interval", LM_T_LONG, F(eval_interval), 1, BIG, 0, 0, 0,
     "steps between evaluations and checkpoints"},
    {"eval_iters", "--eval-iters", LM_T_LONG, F(eval_iters), 1, 1e6, 0, 0, 0,
     "batches per split in an evaluation"},
    {"seed", "--seed", LM_T_U64, F(seed), 0, 9223372036854775807.0, 0, 0, 0, "random seed"},
};
const int lm_n_fields = LM_N_FIELDS;
_Static_assert(sizeof lm_fields / sizeof lm_fields[0] == LM_N_FIELDS, "LM_N_FIELDS");

const char *const lm_config_names[] = {"tiny", "baby", "small", NULL};

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
    case LM_T_INT: return *CAT(c, f, int);
    case LM_T_LONG: return (double)*CAT(c, f, long);
    case LM_T_DOUBLE: return *CAT(c, f, double);
    case LM_T_U64: return (double)*CAT(c, f, uint64_t);
    case LM_T_OPTIMIZER: return *CAT(c, f, lm_optimizer);
    }
    return 0;
}

bool lm_field_equal(const lm_config *a, const lm_config *b, const lm_field *f)
{
    switch (f->type) {
    case LM_T_INT: return *CAT(a, f, int) == *CAT(b, f, int);
    case LM_T_LONG: return *CAT(a, f, long) == *CAT(b, f, long);
    case LM_T_DOUBLE: return *CAT(a, f, double) == *CAT(b, f, double);
    case LM_T_U64: return *CAT(a, f, uint64_t) == *CAT(b, f, uint64_t);
    case LM_T_OPTIMIZER: return *CAT(a, f, lm_optimizer) == *CAT(b, f, lm_optimizer);
    }
    return false;
}

void lm_field_copy(lm_config *dst, const lm_config *src, const lm_field *f)
{
    size_t n = f->type == LM_T_INT ? sizeof(int)
             : f->type == LM_T_LONG ? sizeof(long)
             : f->type == LM_T_DOUBLE ? sizeof(double)
             : f->type == LM_T_U64 ? sizeof(uint64_t) : sizeof(lm_optimizer);
    memcpy((char *)dst + f->offset, (const char *)src + f->offset, n);
}

const char *lm_optimizer_name(lm_optimizer o)
{
    return o == LM_ADAM ? "adam" : o == LM_SGD ? "sgd" : "adamw";
}

int lm_optimizer_parse(const char *s)
{
    if (strcmp(s, "adamw") == 0) return LM_ADAMW;
    if (strcmp(s, "adam") == 0) return LM_ADAM;
    if (strcmp(s, "sgd") == 0) return LM_SGD;
    return -1;
}

void lm_format_real(char *buf, size_t n, double v)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

// --- ranges ---

static const char *field_label(const lm_field *f) { return f->flag ? f->flag : f->key; }

/* "--lr must be > 0 (got -1)"; AG_OK when v is in range. */
static ag_status check_range(const lm_field *f, double v, char *err, size_t errlen)
{
    bool low = f->lo_open ? !(v > f->lo) : !(v >= f->lo);
    bool high = f->hi_open ? !(v < f->hi) : !(v <= f->hi);
    if (!low && !high) return AG_OK;
    char lo[32], hi[32], got[32];
    lm_format_real(lo, sizeof lo, f->lo);
    lm_format_real(hi, sizeof hi, f->hi);
    lm_format_real(got, sizeof got, v);
    if (f->type == LM_T_OPTIMIZER)
        snprintf(err, errlen, "%s must be adamw, adam or sgd", field_label(f));
    else if (isinf(f->hi))
        snprintf(err, errlen, "%s must be %s %s (got %s)", field_label(f), f->lo_open ? ">" : ">=",
                 lo, got);
    else
        snprintf(err, errlen, "%s must be in %s%s, %s%s (got %s)", field_label(f),
                 f->lo_open ? "(" : "[", lo, hi, f->hi_open ? ")" : "]", got);
    return AG_ERR_ARG;
}

ag_status lm_field_parse(lm_config *c, const lm_field *f, const char *s, char *err, size_t errlen)
{
    const char *label = field_label(f);
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case LM_T_OPTIMIZER: {
        int o = lm_optimizer_parse(s);
        if (o < 0) {
            snprintf(err, errlen, "%s must be adamw, adam or sgd (got '%s')", label, s);
            return AG_ERR_ARG;
        }
        *AT(c, f, lm_optimizer) = (lm_optimizer)o;
        return AG_OK;
    }
    case LM_T_DOUBLE: {
        double v = strtod(s, &end);
        if (!*s || *end || isspace((unsigned char)*s) || errno == ERANGE || !isfinite(v)) {
            snprintf(err, errlen, "%s: not a finite number: '%s'", label, s);
            return AG_ERR_ARG;
        }
        if (check_range(f, v, err, errlen)) return AG_ERR_ARG;
        *AT(c, f, double) = v;
        return AG_OK;
    }
    case LM_T_U64: {
        if (!*s || *s == '-' || *s == '+' || isspace((unsigned char)*s)) goto not_int;
        unsigned long long v = strtoull(s, &end, 10);
        if (*end || errno == ERANGE) goto not_int;
        if (v > (unsigned long long)INT64_MAX) {
            snprintf(err, errlen, "%s must be in [0, %lld] (got %s)", label, (long long)INT64_MAX, s);
            return AG_ERR_ARG;
        }
        *AT(c, f, uint64_t) = v;
        return AG_OK;
    }
    case LM_T_INT:
    case LM_T_LONG: {
        if (!*s || isspace((unsigned char)*s)) goto not_int;
        long long v = strtoll(s, &end, 10);
        if (*end || errno == ERANGE) goto not_int;
        if (check_range(f, (double)v, err, errlen)) return AG_ERR_ARG;
        if (f->type == LM_T_INT) *AT(c, f, int) = (int)v;
        else *AT(c, f, long) = (long)v;
        return AG_OK;
    }
    }
not_int:
    snprintf(err, errlen, "%s: not a whole number%s: '%s'", label,
             f->type == LM_T_U64 ? " >= 0" : "", s);
    return AG_ERR_ARG;
}

// --- presets and validation ---

ag_status lm_config_preset(lm_config *c, const char *name)
{
    /* name, n_layer, n_head, n_embd, block_size, batch, iters, lr, min_lr, warmup, eval_interval */
    static const struct {
        const char *name;
        int n_layer, n_head, n_embd, block_size, batch;
        long iters;
        double lr, min_lr;
        long warmup, eval_interval;
    } presets[] = {
        {"tiny", 2, 2, 64, 32, 16, 500, 1e-3, 1e-4, 50, 100},
        {"baby", 4, 4, 128, 64, 12, 2000, 1e-3, 1e-4, 100, 250},
        {"small", 6, 6, 384, 256, 64, 5000, 1e-3, 1e-4, 100, 250},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        if (strcmp(presets[i].name, name) != 0) continue;
        memset(c, 0, sizeof *c);
        c->model.n_layer = presets[i].n_layer;
        c->model.n_head = presets[i].n_head;
        c->model.n_embd = presets[i].n_embd;
        c->model.block_size = presets[i].block_size;
        c->model.dropout = 0.0;
        c->batch_size = presets[i].batch;
        c->max_iters = presets[i].iters;
        c->lr = presets[i].lr;
        c->min_lr = presets[i].min_lr;
        c->warmup_iters = presets[i].warmup;
        c->lr_decay_iters = presets[i].iters;
        c->weight_decay = 0.1;
        c->beta1 = 0.9;
        c->beta2 = 0.99;
        c->grad_clip = 1.0;
        c->optimizer = LM_ADAMW;
        c->momentum = 0.0;
        c->val_fraction = 0.1;
        c->eval_interval = presets[i].eval_interval;
        c->eval_iters = 20;
        c->seed = 1337;
        return AG_OK;
    }
    return AG_ERR_ARG;
}

ag_status lm_config_validate(const lm_config *c, bool check_vocab, char *err, size_t errlen)
{
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *f = &lm_fields[i];
        if (f->type == LM_T_U64 || (!check_vocab && f->offset == offsetof(lm_config, model.vocab_size)))
            continue;
        if (check_range(f, lm_field_get(c, f), err, errlen)) return AG_ERR_ARG;
    }
    if (c->model.n_embd % c->model.n_head != 0) {
        snprintf(err, errlen, "--n-head %d does not divide --n-embd %d", c->model.n_head, c->model.n_embd);
        return AG_ERR_ARG;
    }
    return AG_OK;
}

// --- JSON ---

char *lm_config_to_json(const lm_config *c)
{
    size_t cap = 2048, len = 0;
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
        case LM_T_OPTIMIZER: snprintf(v, sizeof v, "\"%s\"", lm_optimizer_name(*CAT(c, f, lm_optimizer))); break;
        case LM_T_DOUBLE: {
            /* always a JSON real ("0.0", "1e-05"), so a reader sees the type */
            lm_format_real(v, sizeof v, *CAT(c, f, double));
            if (!strpbrk(v, ".eEn")) strcat(v, ".0");
            break;
        }
        }
        int w = snprintf(s + len, cap - len, "%s\"%s\": %s", i ? ", " : "", f->key, v);
        if (w < 0 || (size_t)w >= cap - len) { /* the table is small: 2 KiB is plenty */
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

ag_status lm_config_from_json(lm_config *c, const char *json, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!root || !json_is_object(root)) {
        snprintf(err, errlen, "config is not a JSON object (%s)", root ? "other JSON value" : je.text);
        json_decref(root);
        return AG_ERR_FORMAT;
    }
    memset(c, 0, sizeof *c);
    ag_status st = AG_OK;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (!lm_field_by_key(key)) {
            snprintf(err, errlen, "config: unknown key \"%s\"", key);
            st = AG_ERR_FORMAT;
            goto done;
        }
    }
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *f = &lm_fields[i];
        json_t *v = json_object_get(root, f->key);
        if (!v) {
            snprintf(err, errlen, "config: missing \"%s\"", f->key);
            st = AG_ERR_FORMAT;
            goto done;
        }
        bool ok = true;
        switch (f->type) {
        case LM_T_OPTIMIZER: {
            int o = json_is_string(v) ? lm_optimizer_parse(json_string_value(v)) : -1;
            ok = o >= 0;
            if (ok) *AT(c, f, lm_optimizer) = (lm_optimizer)o;
            break;
        }
        case LM_T_DOUBLE:
            ok = json_is_number(v);
            if (ok) *AT(c, f, double) = json_number_value(v);
            break;
        case LM_T_U64:
            ok = json_is_integer(v) && json_integer_value(v) >= 0;
            if (ok) *AT(c, f, uint64_t) = (uint64_t)json_integer_value(v);
            break;
        case LM_T_INT:
        case LM_T_LONG:
            ok = json_is_integer(v);
            if (ok) {
                json_int_t n = json_integer_value(v);
                ok = (double)n >= f->lo && (double)n <= f->hi;
                if (ok && f->type == LM_T_INT) *AT(c, f, int) = (int)n;
                if (ok && f->type == LM_T_LONG) *AT(c, f, long) = (long)n;
            }
            break;
        }
        if (!ok) {
            snprintf(err, errlen, "config: bad value for \"%s\"", f->key);
            st = AG_ERR_FORMAT;
            goto done;
        }
    }
    {
        char why[256];
        if (lm_config_validate(c, true, why, sizeof why)) {
            snprintf(err, errlen, "config: %s", why);
            st = AG_ERR_FORMAT;
        }
    }
done:
    json_decref(root);
    return st;
}
