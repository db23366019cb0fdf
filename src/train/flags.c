/* flags.c -- the command-line flags every program on ag_train_run shares (train.h), once: each
 * sets a field of ag_train_opts, with its range checked and one line for a bad value. A program
 * hands each argument to ag_train_flag and parses the ones it does not take itself (its
 * commands, its model's own flags), so every trainer program reads --steps, --resume, ... alike
 * (examples/reverse/main.c). A flag given twice: the last one counts. */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "train.h"
#include "fields.h"   /* ag_parse_duration */

typedef enum {
    ON,       /* a switch: the bool field := true */
    ON_EVERY, /* a switch: the long field := lo (--log-dynamics: a row every 10 steps) */
    TEXT,     /* a path: the const char * field := the value */
    LONG, INT, U64,   /* a whole number in [lo, hi], into a field of that type */
    REAL,     /* a number in [lo, hi] into a double field */
    SECONDS   /* the same, or a duration ("90s", "5m", "1h30m": ag_parse_duration) */
} kind;

typedef struct {
    const char *name, *value, *help;   /* "--steps", "N" (NULL: a switch), its line of usage */
    kind k;
    double lo, hi;
    size_t at;                         /* the field of ag_train_opts it sets */
} flag;

#define FIELD(f) offsetof(ag_train_opts, f)

static const flag flags[] = {
    {"--out", "DIR", "the run directory (made if missing; its parent must exist)", TEXT, 0, 0, FIELD(out_dir)},
    {"--steps", "N", "optimizer steps in all, counted from the run's first", LONG, 1, 1e9, FIELD(steps)},
    {"--resume", NULL, "go on exactly where DIR/latest left off", ON, 0, 0, FIELD(resume)},
    {"--overwrite", NULL, "start a new run over the one DIR holds (its checkpoints go after the new run's first)",
     ON, 0, 0, FIELD(overwrite)},
    {"--time-budget", "S", "end the run, evaluated and checkpointed, within S seconds (or 90s, 5m, 1h30m)",
     SECONDS, 1e-3, 1e9,
     FIELD(time_budget_s)},
    {"--seed", "S", "the run's seed (its batches; the model's weights too, if the program says so)", U64, 0, 1e15,
     FIELD(seed)},
    {"--every", "N", "evaluate and checkpoint every N steps (and at the end)", LONG, 1, 1e9, FIELD(every)},
    {"--log-every", "N", "a progress line every N steps (0: at evaluations only)", LONG, 0, 1e9, FIELD(log_every)},
    {"--log-dynamics", NULL, "per layer, every 10 steps: gradient norms, update/weight ratios (dynamics.csv)",
     ON_EVERY, 10, 10, FIELD(log_dynamics)},
    {"--log-activations", NULL, "per layer at each evaluation: the stream, MLP inputs, scores (activations.csv)",
     ON, 0, 0, FIELD(log_activations)},
    {"--lr-find", "LO", "the range test: lr from LO up to the learning rate over the steps (lr_find.png)", REAL,
     1e-12, 1e9, FIELD(lr_find_lo)},
    {"--grad-accum", "K", "each step's batch as K micro-batches (per rank)", INT, 1, 1 << 20, FIELD(grad_accum)},
    {"--threads", "N", "threads of the math (above 1: the tuner picks between N and 1)", INT, 1, 1024,
     FIELD(threads)},
};

enum { NFLAGS = sizeof flags / sizeof flags[0] };

bool ag_flag_is(const char *arg, const char *name, const char **inline_value)
{
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0 || (arg[n] != '\0' && arg[n] != '=')) return false;
    *inline_value = arg[n] == '=' ? arg + n + 1 : NULL;
    return true;
}

/* The flag arg names ("--steps" or "--steps=..."), or NULL; *inline_value: the value after '='. */
static const flag *find(const char *arg, const char **inline_value)
{
    for (int f = 0; f < NFLAGS; f++)
        if (ag_flag_is(arg, flags[f].name, inline_value)) return &flags[f];
    return NULL;
}

/* v, a value of f that is not a number, as a duration into its double field of o */
static ag_status set_duration(const flag *f, const char *v, ag_train_opts *o, ag_error *err)
{
    double s;
    if (ag_parse_duration(f->name, v, f->hi, &s, NULL) != AG_OK)
        return ag_seterr(err, AG_ERR_ARG, "bad argument '%s': '%.100s' is neither a number of seconds from %.15g to "
                         "%.15g nor a duration (90s, 5m, 1h30m)", f->name, v, f->lo, f->hi);
    *(double *)((char *)o + f->at) = s;
    return AG_OK;
}

/* v, the value of f, into its field of o. */
static ag_status set(const flag *f, const char *v, ag_train_opts *o, ag_error *err)
{
    char *field = (char *)o + f->at, *end;
    if (f->k == TEXT) return *(const char **)field = v, AG_OK;
    errno = 0;
    double d = strtod(v, &end);
    if (f->k == SECONDS && (end == v || *end)) return set_duration(f, v, o, err);
    bool real = f->k == REAL || f->k == SECONDS;
    bool ok = end != v && !*end && !errno && d >= f->lo && d <= f->hi && (real || d == floor(d));
    if (!ok)
        return ag_seterr(err, AG_ERR_ARG, "bad argument '%s': '%.100s' is not a %snumber from %.15g to %.15g", f->name,
                         v, real ? "" : "whole ", f->lo, f->hi);
    if (real) *(double *)field = d;
    else if (f->k == INT) *(int *)field = (int)d;
    else if (f->k == LONG) *(long *)field = (long)d;
    else *(uint64_t *)field = (uint64_t)d;
    return AG_OK;
}

ag_status ag_train_flag(ag_train_opts *o, int argc, char **argv, int *i, bool *mine, ag_error *err)
{
    const char *v = NULL, *arg = argv[*i];
    const flag *f = find(arg, &v);
    *mine = f != NULL;
    if (!f) return AG_OK;
    if (!f->value) {
        if (v) return ag_seterr(err, AG_ERR_ARG, "bad argument '%.200s' (%s takes no value)", arg, f->name);
        if (f->k == ON) *(bool *)((char *)o + f->at) = true;
        else *(long *)((char *)o + f->at) = (long)f->lo;
        return AG_OK;
    }
    if (!v && *i + 1 >= argc) return ag_seterr(err, AG_ERR_ARG, "bad argument '%s' (it needs a value)", f->name);
    return set(f, v ? v : argv[++*i], o, err);
}

ag_status ag_train_flags_check(const ag_train_opts *o, int batch, ag_error *err)
{
    if (o->lr_find_lo > 0 && o->sched.lr > 0 && o->lr_find_lo >= o->sched.lr)
        return ag_seterr(err, AG_ERR_ARG, "--lr-find LO must be below the learning rate %g", o->sched.lr);
    if (batch > 0 && o->grad_accum > batch)
        return ag_seterr(err, AG_ERR_ARG, "bad argument '--grad-accum': %d micro-batches of a batch of %d",
                         o->grad_accum, batch);
    return o->out_dir ? AG_OK : ag_seterr(err, AG_ERR_ARG, "--out DIR is required");
}

/* The default of f in d, as " (default 250)", or "" when it has none to show. */
static void default_of(const flag *f, const ag_train_opts *d, char *buf, size_t n)
{
    const char *field = (const char *)d + f->at;
    double v = f->k == REAL || f->k == SECONDS ? *(const double *)field
             : f->k == INT  ? *(const int *)field
             : f->k == LONG ? (double)*(const long *)field
             : f->k == U64  ? (double)*(const uint64_t *)field : 0;
    buf[0] = '\0';
    if (v != 0) snprintf(buf, n, " (default %.15g)", v);
}

size_t ag_train_flags_usage(const ag_train_opts *defaults, char *buf, size_t n)
{
    size_t len = 0;
    for (int f = 0; f < NFLAGS && n > 0; f++) {
        char head[40], def[48] = "";
        snprintf(head, sizeof head, "%s%s%s", flags[f].name, flags[f].value ? " " : "",
                 flags[f].value ? flags[f].value : "");
        if (defaults) default_of(&flags[f], defaults, def, sizeof def);
        int w = snprintf(buf + len, n - len, "  %-19s %s%s\n", head, flags[f].help, def);
        if (w < 0 || (size_t)w >= n - len) return buf[len] = '\0', len;   /* cut at the last whole line */
        len += (size_t)w;
    }
    return len;
}
