/* fields.h -- a program's config as a table (issue 31): one row per field of its config struct
 * says the field's JSON key, its command-line flag, its type, where it lies (offsetof) and its
 * valid range, once. From that table a program gets, for any struct of its own:
 *
 *   ag_field_by_key, ag_field_by_flag   the row of a JSON key or a flag
 *   ag_field_get, ag_field_equal, ag_field_copy, ag_field_format
 *                                       one field read, compared, copied, written as text
 *   ag_field_parse, ag_field_check, ag_fields_check
 *                                       a value from text (the whole string, in range), and the
 *                                       ranges of a whole struct, each bad value one line
 *   ag_fields_to_json, ag_fields_from_json, ag_fields_set
 *                                       the whole struct as one flat JSON object (a checkpoint's
 *                                       header), read back with every key checked; fields set
 *                                       from "key=value" pairs (a preset)
 *   ag_field_usage, ag_fields_usage, ag_fields_usage_text
 *                                       the --help lines of a row, of the whole table, of the
 *                                       rows a help text names ("@mlp")
 *   ag_args_next, ag_arg_value, ag_arg_no_value, ag_field_arg, ag_fields_arg, ag_args_parse
 *                                       a command line walked flag by flag ("--lr 3e-4" or
 *                                       "--lr=3e-4"), a table's flag read into its field, a
 *                                       whole command line read by tables
 *   ag_arg_unknown, ag_arg_required, ag_arg_pass_over, ag_args_want_help, ag_parse_choice
 *                                       what every command line says alike: a flag unknown or
 *                                       missing, --help, one of a few names
 *   ag_parse_duration, ag_parse_long, ag_parse_signal, ag_format_real
 *                                       "90s", "5m", "1h30m"; a whole number in a range; "USR1";
 *                                       a double in the fewest digits that read back
 *
 * examples/char_lm/config.c is one such table (37 rows), its cli.c five more (a subcommand's
 * flags); tests/test_fields.c another, small.
 * Nothing prints or exits: errors come back as a status and one line in an ag_error (NULL ok). */
#ifndef AG_FIELDS_H
#define AG_FIELDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../tensor/tensor.h"
#include "../nn/switches.h"

/* AG_FIELD_INT: an int; _LONG: a long; _DOUBLE: a double; _U64: a uint64_t (a seed: 0 to
 * 2^63 - 1); _ENUM: an int-sized enum, one of the values of a switch (src/nn/switches.h),
 * written by its name ("adamw"); _BOOL: a bool, a flag without a value on the command line
 * ("--no-scale"), true/false in JSON; _SIGNAL: an int, a signal a job is warned with, by name
 * (USR1, USR2, TERM, HUP, INT, ALRM, XCPU; "SIGUSR1" too) or number, in JSON its number;
 * _STR: a const char *, the text as given (a path; it points into argv), lo its least length
 * (1: not empty); with sw, one of sw's names, the field then pointing to that name ("--from
 * latest|best"). A _STR row is the command line's only: JSON passes over it.
 *
 * A row without a key is a command-line flag only (not in JSON), read as a program's own flags
 * were before tables: a whole number as ag_parse_long reads it; a double refused for a leading
 * ' ' only (strtod passes over the other spaces), its error quoting the value as written
 * ("--temperature must be > 0 (got 0.0)", where a row with a key says "(got 0)"). */
typedef enum {
    AG_FIELD_INT, AG_FIELD_LONG, AG_FIELD_DOUBLE, AG_FIELD_U64, AG_FIELD_ENUM, AG_FIELD_BOOL, AG_FIELD_SIGNAL,
    AG_FIELD_STR
} ag_field_type;

typedef struct {
    const char *key;        /* JSON key ("n_embd"), or NULL (a flag only, not in JSON) */
    const char *flag;       /* command-line flag ("--n-embd"), or NULL (a field no flag sets) */
    ag_field_type type;
    size_t offset;          /* offsetof(the struct, the field) */
    double lo, hi;          /* valid range, inclusive (AG_FIELD_ENUM: unused, sw has the values) */
    bool lo_open;           /* the range excludes lo ("must be > 0") */
    bool hi_open;           /* the range excludes hi ("must be < 1") */
    bool shape;             /* the program's own mark (char_lm: part of the model's shape) */
    bool optional;          /* may be missing from JSON (written before the field existed):
                               ag_fields_from_json then leaves it as it was */
    const ag_switch *sw;    /* AG_FIELD_ENUM: the values, their names and help (else NULL) */
    const char *help;       /* what the field is: its --help line (ag_field_usage) */
    bool duration;          /* AG_FIELD_DOUBLE in seconds, a duration on the command line
                               ("90s", "5m", "none": 0; ag_parse_duration, at most hi) */
    bool required;          /* AG_FIELD_STR: ag_args_parse refuses a command line without it
                               (ag_arg_required), after every argument was read */
} ag_field;

/* The row of tab (n rows) with this JSON key or this flag ("--n-embd"), or NULL. */
const ag_field *ag_field_by_key(const ag_field *tab, int n, const char *key);
const ag_field *ag_field_by_flag(const ag_field *tab, int n, const char *flag);

/* The field f of the struct at obj as a double (exact but for a uint64_t above 2^53). */
double ag_field_get(const void *obj, const ag_field *f);
/* Whether field f holds the same value in a and b (compared in its own type). */
bool ag_field_equal(const void *a, const void *b, const ag_field *f);
/* Copies field f from src into dst. */
void ag_field_copy(void *dst, const void *src, const ag_field *f);
/* The field as the command line writes it: "64", "0.001", "adamw", "true". buf is always
 * NUL-terminated; returns buf. */
const char *ag_field_format(const void *obj, const ag_field *f, char *buf, size_t n);

/* Parses s, the whole string ("12", "3e-4", "adamw"; "true"/"false"/"1"/"0" for a bool; a
 * duration for a duration row), into field f of obj, then checks its range; obj is untouched
 * on an error. AG_ERR_ARG with one line naming the flag (the key when it has none):
 *   "--lr: not a finite number: 'abc'"      "--n-layer: not a whole number: '2.5'"
 *   "--lr must be > 0 (got -1)"             "--beta1 must be in [0, 1) (got 1)"
 *   "--mlp must be gelu or swiglu (got 'x')" "--seed: not a whole number >= 0: '-1'" */
ag_status ag_field_parse(void *obj, const ag_field *f, const char *s, ag_error *err);
/* AG_OK when field f of obj is in its range (a uint64_t always is: ag_field_parse and
 * ag_fields_from_json check it); else AG_ERR_ARG and "--lr must be > 0 (got -1)". */
ag_status ag_field_check(const void *obj, const ag_field *f, ag_error *err);
/* ag_field_check of every row, in table order: the first out of range. */
ag_status ag_fields_check(const void *obj, const ag_field *tab, int n, ag_error *err);

/* The whole struct as one flat JSON object, keys in table order: {"n_layer": 2, "lr": 0.001,
 * "mlp": "gelu", "no_scale": false, ...}. A double is always a JSON real ("1.0", "1e-05"), in
 * the fewest digits that read back to the same double. malloc'd; NULL on OOM. */
char *ag_fields_to_json(const void *obj, const ag_field *tab, int n);
/* Reads an object ag_fields_to_json wrote into obj: every key of the table must be there with a
 * value of its type and in range (an optional row may be missing: its field is left as it was),
 * and no other key. AG_ERR_FORMAT and one line: "config is not a JSON object (...)",
 * "config: unknown key \"x\"", "config: missing \"lr\"", "config: bad value for \"lr\"",
 * "config: --lr must be > 0 (got -1)". */
ag_status ag_fields_from_json(void *obj, const ag_field *tab, int n, const char *json, ag_error *err);

/* The --help lines of f, appended at buf + *len (cap bytes in all; cut short when full, always
 * NUL-terminated): "  --n-layer N            Transformer blocks"; a switch's row, one line
 * more per value, its help beside it and the first (the default) marked:
 *     --mlp NAME             the feed-forward part of each block:
 *                              gelu       fc2(GELU(fc1 x)), 4C wide (default)
 * A row without a flag writes nothing. */
void ag_field_usage(const ag_field *f, char *buf, size_t cap, size_t *len);
/* Every row's lines, in table order; returns the length written. */
size_t ag_fields_usage(const ag_field *tab, int n, char *buf, size_t cap);
/* A program's help text with each line "@key" (a row's JSON key) replaced by that row's lines
 * (ag_field_usage); every other line as it is. Returns the length written. */
size_t ag_fields_usage_text(const char *text, const ag_field *tab, int n, char *buf, size_t cap);

/* Sets fields of obj from text, pairs "key=value" apart by spaces ("n_layer=2 lr=1e-3
 * optimizer=adamw time_budget=5m"): a preset written as its values. Each key a row's (not a
 * _STR's), each value read as ag_field_parse reads it; the pairs before a bad one are set.
 * AG_ERR_ARG and one line: "not a field of the table: 'x=1'", "--lr must be > 0 (got -1)". */
ag_status ag_fields_set(void *obj, const ag_field *tab, int n, const char *text, ag_error *err);

// --- a config against a checkpoint's, and between ranks ---

/* A run that takes a checkpoint's model (a resume, or a new run from its weights): on entry cfg
 * holds the config the run starts from (the checkpoint's ck on a resume, else the flags'); every
 * shape row (f->shape) becomes ck's, and on a resume every other row whose flag was given
 * (given [n], or NULL: none) becomes the flags' flags. A shape row whose flag was given, or any
 * shape row when config_given (a whole config file was), that differs from ck's is AG_ERR_ARG,
 * cfg untouched: "--n-layer: the checkpoint in DIR has n_layer 2, but the flag asks for 3 (a
 * resumed run keeps its model shape)" ("--config asks for" when no flag was given; the
 * parenthesis on a resume only). */
ag_status ag_fields_merge(void *cfg, const void *flags, const void *ck, const ag_field *tab, int n,
                          const bool *given, bool config_given, bool resume, const char *dir, ag_error *err);
/* The switches of obj that are on, for a run's header: the optional rows (those a config may
 * lack) of an enum or a bool whose value is not 0, the default: "--norm rmsnorm, --no-scale" (an
 * enum's flag and value, a bool's flag alone), in table order, into buf [cap]; returns the
 * length written (0: none on). */
size_t ag_fields_switches(const void *obj, const ag_field *tab, int n, char *buf, size_t cap);
/* Field f's bytes as one word, zero-padded (every type's value fits in 8 bytes; a _STR's is its
 * pointer): what ranks compare of a config, 8 bytes a row whatever the row (ag_ranks_agree). */
uint64_t ag_field_bits(const void *obj, const ag_field *f);
/* A word of ag_field_bits as field f says it ("12", "adamw", "0.001"); returns buf. */
const char *ag_field_format_bits(const ag_field *f, uint64_t bits, char *buf, size_t n);
/* h extended (FNV-1a) by the table's layout: each row's key, type and offset. Builds whose
 * tables differ get different hashes (a handshake's layout, ddp.h's ag_build). */
uint64_t ag_fields_layout(const ag_field *tab, int n, uint64_t h);

// --- a command line, flag by flag ---

/* One argument of argv as a program's flag loop sees it: "--lr=3e-4" split into flag and
 * value, or "--lr" whose value ag_arg_value takes from the next argument. */
typedef struct {
    int argc;
    char **argv;
    int i;                 /* argv[i] is this argument; ag_arg_value may move it on to the value */
    char flag[64];         /* the argument without "=value" */
    const char *value;     /* the value written after '=', or NULL */
    bool inline_value;     /* written "--flag=value" */
} ag_arg;

/* The arguments from argv[first]: `for (ag_arg a = ag_args(argc, argv, 2); ag_args_next(&a);)`. */
ag_arg ag_args(int argc, char **argv, int first);
/* Moves a on to the next argument, split; false after the last. */
bool ag_args_next(ag_arg *a);
/* The value of a flag that takes one, into a->value: written inline, or the next argument.
 * AG_ERR_ARG and "--lr needs a value" when there is none. */
ag_status ag_arg_value(ag_arg *a, ag_error *err);
/* AG_ERR_ARG and "--help takes no value" when a program's own switch (not a table's bool row,
 * which takes one inline: ag_field_arg) was written "--help=..." */
ag_status ag_arg_no_value(const ag_arg *a, ag_error *err);
/* a, the flag of row f, read into obj: a bool row sets true, or takes its value inline only
 * ("--no-scale=false": a preset's switch undone; "=true", "=1", "=0" too); any other row takes
 * one and parses it (ag_field_parse). */
ag_status ag_field_arg(void *obj, const ag_field *f, ag_arg *a, ag_error *err);
/* a, when it is the flag of a row of tab, read into obj (ag_field_arg), and given[row] := true
 * (given may be NULL); *found says whether a row had the flag (AG_OK and false: none had). */
ag_status ag_fields_arg(void *obj, const ag_field *tab, int n, bool *given, ag_arg *a, bool *found, ag_error *err);

/* One table of a command line: its rows, the struct they fill, and given (given[row] := true for
 * each flag read; NULL: not kept). */
typedef struct {
    const ag_field *rows;
    int n;
    void *obj;
    bool *given;
} ag_field_table;
/* A program's handler of a flag no table has: *found := whether it took it (then AG_OK or its
 * error); it takes the value itself (ag_arg_value). */
typedef ag_status (*ag_arg_fn)(void *user, ag_arg *a, bool *found, ag_error *err);
/* A whole command line: every argument of argv from first on, in order, read by the first of the
 * ntabs tables that has its flag (ag_fields_arg), else by other(user, ...) when other is not
 * NULL, else refused (ag_arg_unknown, with prog and cmd). The first error stops it. Then each
 * required row, in the tables' order, must have been given a text (ag_arg_required). */
ag_status ag_args_parse(int argc, char **argv, int first, const ag_field_table *tabs, int ntabs, ag_arg_fn other,
                        void *user, const char *prog, const char *cmd, ag_error *err);

/* An ag_arg_fn that takes every argument and reads none: a first pass over a command line that
 * reads one table's flags only (char_lm's --config, the preset the other flags then override). */
ag_status ag_arg_pass_over(void *user, ag_arg *a, bool *found, ag_error *err);

/* AG_ERR_ARG for an argument no handler took: "unknown flag '--x' for train (see: char_lm train
 * --help)", or for one that is not a flag "unexpected argument 'x' (see: char_lm train --help)". */
ag_status ag_arg_unknown(const ag_arg *a, const char *prog, const char *cmd, ag_error *err);
/* AG_OK when v was given and is not empty; else AG_ERR_ARG and "--data is required (see: char_lm
 * train --help)" or "--data must not be empty". */
ag_status ag_arg_required(const char *v, const char *flag, const char *prog, const char *cmd, ag_error *err);
/* Whether "--help" or "-h" is one of argv[first..]: help wins over every other flag. */
bool ag_args_want_help(int argc, char **argv, int first);
/* s, one of names (NULL-terminated), as its index in *out; else AG_ERR_ARG and "--from must be
 * latest or best (got 'x')". */
ag_status ag_parse_choice(const char *flag, const char *const *names, const char *s, int *out, ag_error *err);

/* s, a signal a job is warned with and a process may catch, by name ("USR1" or "SIGUSR1": USR1,
 * USR2, TERM, HUP, INT, ALRM, XCPU) or number, into *sig; else AG_ERR_ARG and "--checkpoint-signal
 * must be USR1, USR2, TERM, HUP, INT, ALRM or XCPU (or its number; got 'KILL')". */
ag_status ag_parse_signal(const char *flag, const char *s, int *sig, ag_error *err);
/* s, the whole string, a whole number in [lo, hi] into *out. AG_ERR_ARG and
 * "--layer: not a whole number: 'x'" or "--top-k must be in [0, 10] (got 11)". */
ag_status ag_parse_long(const char *flag, const char *s, long lo, long hi, long *out, ag_error *err);
/* A duration in *seconds: one or more groups of a number (digits, maybe a decimal point and more
 * digits) and its unit, h, m or s, the units in that order and each at most once ("90s", "5m",
 * "1h30m", "1.5h"); or "none" (0: no budget). Anything else ("0s", "-5m", "5 parsecs",
 * "1e400s", "", "5m5", "5") is AG_ERR_ARG with one line naming flag; so is a duration over
 * max_s seconds ("--time-budget must be at most 1000h (got '1001h')"). */
ag_status ag_parse_duration(const char *flag, const char *s, double max_s, double *seconds, ag_error *err);
/* v with the fewest significant digits (up to 17) that read back exactly; a whole number as
 * one ("30", never "3e+01"). */
void ag_format_real(char *buf, size_t n, double v);

#endif
