/* switches.h -- the model's switches (issue 6: compare what the tutorials argue about), one
 * table each. A table is a list of rows, one row per value: its enum constant, the name a user
 * types and a checkpoint stores, and one line of help:
 *
 *     X(AG_MLP_SWIGLU, "swiglu", "w_down(SiLU(w_gate x) * w_up x), round(8C/3) wide")
 *
 * The first row is MODEL.md's choice: it becomes the enum's zero, so a zero-initialised config
 * is MODEL.md's model. From each table come
 *   - the enum (ag_mlp_kind) and its count (AG_MLP_KIND_COUNT),
 *   - a description (ag_mlp_switch: the names and the help, in enum order), from which
 *     ag_gpt_new checks a config and char_lm parses its flag, writes --help and its error
 *     messages, and stores the choice in a checkpoint.
 *
 * Adding a value is adding a row, then building: every place that acts on a value is a
 * `switch` without `default`, so -Wall (-Wswitch) names each one that does not handle the new
 * value yet ("enumeration value 'AG_MLP_RELU' not handled in switch"). Nothing else lists the
 * values: not the checks, not the parser, not --help, not the tests. */
#ifndef AG_SWITCHES_H
#define AG_SWITCHES_H

#include <stddef.h>
#include "../tensor/tensor.h"

/* ---- the tables: X(enum constant, name, help) ---- */
#define AG_NORM_POSITIONS(X) \
    X(AG_PRE_LN,  "pre",  "x + f(LN(x)): the norm inside the residual branch (GPT-2)") \
    X(AG_POST_LN, "post", "LN(x + f(x)): the norm after the sum (Vaswani et al. 2017)")

#define AG_NORM_KINDS(X) \
    X(AG_LAYERNORM, "layernorm", "(x - mean) / std * w + b") \
    X(AG_RMSNORM,   "rmsnorm",   "x / rms(x) * w: no mean, no bias (LLaMA)") \
    X(AG_NO_NORM,   "none",      "no norm at all: x as it is (lesson 15: watch training without it)")

#define AG_MLP_KINDS(X) \
    X(AG_MLP_GELU,   "gelu",   "fc2(GELU(fc1 x)), 4C wide") \
    X(AG_MLP_SWIGLU, "swiglu", "w_down(SiLU(w_gate x) * w_up x), round(8C/3) wide: same size")

#define AG_WEIGHT_INITS(X) \
    X(AG_WEIGHTS_NORMAL, "normal", "N(0, 0.02), residual projections / sqrt(2 n_layer)") \
    X(AG_WEIGHTS_XAVIER, "xavier", "Linear weights U(-a, a), a = sqrt(6/(fan_in+fan_out))")

#define AG_MASK_FILLS(X) \
    X(AG_MASK_NEG_INF, "-inf", "masked weights exactly 0") \
    X(AG_MASK_NEG_1E9, "-1e9", "a finite stand-in, as in many tutorials (op-by-op attention)")

/* ---- what a table makes: each macro below is one way of reading a row ---- */
#define AG_SWITCH_CONSTANT(constant, name, help) constant,
#define AG_SWITCH_PLUS_ONE(constant, name, help) + 1
#define AG_SWITCH_NAME(constant, name, help) [constant] = name,
#define AG_SWITCH_HELP(constant, name, help) [constant] = help,

typedef enum { AG_NORM_POSITIONS(AG_SWITCH_CONSTANT) } ag_norm_position;  /* norm inside / after the residual */
typedef enum { AG_NORM_KINDS(AG_SWITCH_CONSTANT) } ag_norm_kind;
typedef enum { AG_MLP_KINDS(AG_SWITCH_CONSTANT) } ag_mlp_kind;
typedef enum { AG_WEIGHT_INITS(AG_SWITCH_CONSTANT) } ag_weight_init;
typedef enum { AG_MASK_FILLS(AG_SWITCH_CONSTANT) } ag_mask_fill;

/* The counts live outside the enums, so that a `switch` over an enum lists only its values. */
enum {
    AG_NORM_POSITION_COUNT = 0 AG_NORM_POSITIONS(AG_SWITCH_PLUS_ONE),
    AG_NORM_KIND_COUNT = 0 AG_NORM_KINDS(AG_SWITCH_PLUS_ONE),
    AG_MLP_KIND_COUNT = 0 AG_MLP_KINDS(AG_SWITCH_PLUS_ONE),
    AG_WEIGHT_INIT_COUNT = 0 AG_WEIGHT_INITS(AG_SWITCH_PLUS_ONE),
    AG_MASK_FILL_COUNT = 0 AG_MASK_FILLS(AG_SWITCH_PLUS_ONE),
};

/* ---- one switch described: what a program needs to offer it by name ---- */
typedef struct {
    const char *field;          /* the config field it sets ("mlp"), for messages */
    int n;                      /* its values are 0 .. n-1; 0 is the default (MODEL.md's) */
    const char *const *names;   /* names[v]: what a user types and a checkpoint stores */
    const char *const *help;    /* help[v]: one short line */
} ag_switch;

/* In one .c file: `AG_SWITCH_DEFINE(ag_mlp_switch, "mlp", AG_MLP_KINDS);` defines the
 * description var of a table (char_lm's optimizer uses it too). */
#define AG_SWITCH_DEFINE(var, field, TABLE) \
    static const char *const var##_names[] = { TABLE(AG_SWITCH_NAME) }; \
    static const char *const var##_help[] = { TABLE(AG_SWITCH_HELP) }; \
    const ag_switch var = { field, (int)(sizeof var##_names / sizeof var##_names[0]), var##_names, var##_help }

/* The switches of ag_gpt_config, each named after its field. */
extern const ag_switch ag_norm_position_switch, ag_norm_switch, ag_mlp_switch, ag_init_switch,
    ag_mask_fill_switch;

/* The name of value v ("swiglu"), or "?" when v is not one of sw's values. */
const char *ag_switch_name(const ag_switch *sw, int v);
/* The value named s, or -1 when no value has that name. */
int ag_switch_parse(const ag_switch *sw, const char *s);
/* Every name, in order: "gelu or swiglu", "adamw, adam or sgd". buf is always NUL-terminated
 * (cut short when n is too small); returns buf. */
const char *ag_switch_choices(const ag_switch *sw, char *buf, size_t n);
/* AG_OK when v is one of sw's values; else AG_ERR_ARG and "mlp must be gelu or swiglu (got 7)"
 * in err (NULL ok). */
ag_status ag_switch_check(const ag_switch *sw, int v, ag_error *err);

#endif
