/* cli.c -- char_lm's command line: each subcommand's flags are rows of tables (train/fields.h),
 * read by the library's loop (ag_args_parse) with their one-line errors; train's hyper-parameters
 * are config.c's table, and the --help lines of its switches come from it. What no row says is
 * here: --config first, --kernels, --dist-timeout's own messages, the checks between flags. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

// --- usage texts: help/<command>.txt, as they print (the build quotes each into a C string) ---

/* [lm_command]; a line "@key" of train's stands for the lines of a switch (lm_fields' row key) */
static const char *const usages[] = {
    [LM_CMD_NONE] =
#include "help/main.inc"
    , [LM_CMD_TRAIN] =
#include "help/train.inc"
    , [LM_CMD_SAMPLE] =
#include "help/sample.inc"
    , [LM_CMD_EVAL] =
#include "help/eval.inc"
    , [LM_CMD_ATTN] =
#include "help/attn.inc"
};

/* train's with each line "@key" replaced by the lines of that switch (ag_fields_usage_text) */
const char *lm_cli_usage(lm_command cmd)
{
    static char text[32768];   /* train's whole help is about 10 KB: room for the flags to come */
    if (cmd != LM_CMD_TRAIN) return usages[cmd];
    ag_fields_usage_text(usages[LM_CMD_TRAIN], lm_fields, LM_N_FIELDS, text, sizeof text);
    return text;
}

// --- the flags: each a row of a table, read by the library's flag loop (fields.h) ---

/* A row of a flag that is no hyper-parameter (no JSON key: fields.h says how it reads); names: a switch. */
#define ROW(st, fl, ty, field, l, h, names) \
    {.flag = fl, .type = AG_FIELD_##ty, .offset = offsetof(st, field), .lo = l, .hi = h, .sw = names}
#define TEXT(st, fl, field) ROW(st, fl, STR, field, 0, 0, NULL)
#define NEED(st, fl, field) {.flag = fl, .type = AG_FIELD_STR, .offset = offsetof(st, field), .required = true}
#define ON(st, fl, field) ROW(st, fl, BOOL, field, 0, 1, NULL)
#define FROM(st) ROW(st, "--from", STR, from, 0, 0, &ag_ckpt_from_switch)

static const ag_field train_rows[] = {
    NEED(lm_train_args, "--data", data), NEED(lm_train_args, "--out", out),
    TEXT(lm_train_args, "--config", config_name),   /* read first (parse_train), again in its place */
    ROW(lm_train_args, "--init-from", STR, init_from, 1, 0, NULL),
    ON(lm_train_args, "--resume", resume), ON(lm_train_args, "--overwrite", overwrite),
    ROW(lm_train_args, "--threads", INT, threads, 1, 1024, NULL),
    ROW(lm_train_args, "--shards", INT, shards, 1, 1024, NULL),
    ROW(lm_train_args, "--grad-accum", INT, grad_accum, 1, 1 << 20, NULL),
    ROW(lm_train_args, "--progress", ENUM, progress, 0, 0, &ag_progress_switch),
    ROW(lm_train_args, "--checkpoint-signal", SIGNAL, checkpoint_signal, 0, 0, NULL),
};
static const ag_field sample_rows[] = {
    NEED(lm_sample_args, "--ckpt", ckpt), TEXT(lm_sample_args, "--prompt", prompt), FROM(lm_sample_args),
    ROW(lm_sample_args, "--max-new-tokens", LONG, max_new_tokens, 0, 10000000, NULL),
    ROW(lm_sample_args, "--top-k", INT, top_k, 0, 1114112, NULL),
    ROW(lm_sample_args, "--seed", U64, seed, 0, 9223372036854775807.0, NULL),
    {.flag = "--temperature", .type = AG_FIELD_DOUBLE, .offset = offsetof(lm_sample_args, temperature), .lo = 0,
     .hi = HUGE_VAL, .lo_open = true},
};
static const ag_field eval_rows[] = {
    NEED(lm_eval_args, "--ckpt", ckpt), NEED(lm_eval_args, "--data", data), FROM(lm_eval_args),
};
static const ag_field attn_rows[] = {   /* --layer, --head: the model's bound is checked in tools.c */
    NEED(lm_attn_args, "--ckpt", ckpt), NEED(lm_attn_args, "--prompt", prompt), NEED(lm_attn_args, "--out", out),
    FROM(lm_attn_args), ROW(lm_attn_args, "--layer", INT, layer, 0, 1 << 20, NULL),
    ROW(lm_attn_args, "--head", INT, head, 0, 1 << 20, NULL),
};
/* --trace-only and --trace-graph imply --trace-shapes (trace_done); --kernels: kernels_flag */
static const ag_field trace_rows[] = {
    ON(lm_trace_args, "--trace-shapes", shapes), ON(lm_trace_args, "--trace-only", only),
    TEXT(lm_trace_args, "--trace-graph", graph),
};
#define N(rows) ((int)(sizeof rows / sizeof rows[0]))

// --- what no row says ---

static const char *const cmd_names[] = {"", "train", "sample", "eval", "attn"};   /* [lm_command] */

/* The tables' loop (ag_args_parse) over a subcommand's arguments. */
static ag_status parse_flags(lm_command cmd, const ag_field_table *tabs, int n, ag_arg_fn other, void *user,
                             int argc, char **argv, ag_error *err)
{
    return ag_args_parse(argc, argv, 2, tabs, n, other, user, "char_lm", cmd_names[cmd], err);
}

/* --kernels reference|fast, into the lm_trace_args at trace (its message is the kernels' own) */
static ag_status kernels_flag(void *trace, ag_arg *f, bool *found, ag_error *err)
{
    ag_kernels_id id;
    if (!(*found = strcmp(f->flag, "--kernels") == 0)) return AG_OK;
    if (ag_arg_value(f, err) || ag_kernels_parse(f->value, "--kernels ", &id, err)) return AG_ERR_ARG;
    ((lm_trace_args *)trace)->kernels = f->value;
    return AG_OK;
}

/* --trace-only and --trace-graph imply --trace-shapes */
static void trace_done(lm_trace_args *t) { t->shapes = t->shapes || t->only || t->graph; }

// --- train ---

/* --dist-timeout S: seconds, 0: no limit (its messages are older than the table's) */
static ag_status dist_timeout(lm_train_args *t, ag_arg *f, ag_error *err)
{
    if (ag_arg_value(f, err)) return AG_ERR_ARG;
    char *end = NULL;
    errno = 0;
    double v = strtod(f->value, &end);
    if (!*f->value || *end || errno == ERANGE || !isfinite(v) || *f->value == ' ')
        return ag_seterr(err, AG_ERR_ARG, "--dist-timeout: not a number of seconds: '%s'", f->value);
    if (!(v >= 0 && v <= 1e6))
        return ag_seterr(err, AG_ERR_ARG, "--dist-timeout must be in [0, 1e6] (got %s)", f->value);
    t->dist_timeout = v;
    return AG_OK;
}

/* Pass 2, after the tables: --kernels, --dist-timeout. */
static ag_status train_other(void *args, ag_arg *f, bool *found, ag_error *err)
{
    lm_train_args *t = args;
    ag_status s = kernels_flag(&t->trace, f, found, err);
    if (*found || !(*found = strcmp(f->flag, "--dist-timeout") == 0)) return s;
    return dist_timeout(t, f, err);
}

/* What no single flag can check: --resume against --init-from, the whole config. */
static ag_status finish_train(lm_train_args *t, ag_error *err)
{
    trace_done(&t->trace);
    if (t->resume && t->init_from)
        return ag_seterr(err, AG_ERR_ARG, "--resume and --init-from exclude each other (--resume continues "
                                          "--out's own run)");
    /* lr_decay_iters follows max_iters unless given */
    const ag_field *decay = ag_field_by_key(lm_fields, LM_N_FIELDS, "lr_decay_iters");
    if (!t->given[decay - lm_fields]) t->cfg.lr_decay_iters = t->cfg.max_iters;
    /* a budget and no recipe: the budget picks one from the speed it measures (recipe.h), and
     * the flags are checked against it then */
    t->pick_recipe = !t->config_given && t->cfg.time_budget > 0 && !t->resume && !t->init_from;
    if (t->pick_recipe) return AG_OK;
    ag_status s = lm_config_validate(&t->cfg, false, err);
    /* a resumed run's config is the checkpoint's with these flags: train_setup.c checks the merge */
    return s || t->resume ? s : lm_config_check_training(&t->cfg, err);
}

static ag_status parse_train(lm_train_args *t, int argc, char **argv, ag_error *err)
{
    *t = (lm_train_args){.config_name = "baby", .dist_timeout = LM_DIST_TIMEOUT_S, .checkpoint_signal = SIGUSR1};
    const ag_field_table config = {ag_field_by_flag(train_rows, N(train_rows), "--config"), 1, t, &t->config_given};
    const ag_field_table tabs[] = {
        {lm_fields, LM_N_FIELDS, &t->cfg, t->given}, {train_rows, N(train_rows), t, NULL},
        {trace_rows, N(trace_rows), &t->trace, NULL},
    };
    ag_status s = parse_flags(LM_CMD_TRAIN, &config, 1, ag_arg_pass_over, NULL, argc, argv, err);   /* --config first */
    int k;   /* the preset's name: one of config.c's */
    if (s == AG_OK) s = ag_parse_choice("--config", lm_config_names, t->config_name, &k, err);
    if (s == AG_OK) lm_config_preset(&t->cfg, t->config_name);
    if (s == AG_OK) s = parse_flags(LM_CMD_TRAIN, tabs, N(tabs), train_other, t, argc, argv, err);
    return s ? s : finish_train(t, err);
}

// --- sample, eval and attn ---

static ag_status parse_sample(lm_sample_args *s, int argc, char **argv, ag_error *err)
{
    *s = (lm_sample_args){.max_new_tokens = 500, .temperature = 1.0, .seed = 1337, .from = "latest"};
    const ag_field_table tabs[] = {{sample_rows, N(sample_rows), s, NULL}, {trace_rows, N(trace_rows), &s->trace, NULL}};
    if (parse_flags(LM_CMD_SAMPLE, tabs, N(tabs), kernels_flag, &s->trace, argc, argv, err)) return AG_ERR_ARG;
    trace_done(&s->trace);
    return AG_OK;
}

static ag_status parse_eval(lm_eval_args *e, int argc, char **argv, ag_error *err)
{
    *e = (lm_eval_args){.from = "latest"};
    const ag_field_table tabs[] = {{eval_rows, N(eval_rows), e, NULL}, {trace_rows, N(trace_rows), &e->trace, NULL}};
    if (parse_flags(LM_CMD_EVAL, tabs, N(tabs), kernels_flag, &e->trace, argc, argv, err)) return AG_ERR_ARG;
    trace_done(&e->trace);
    return AG_OK;
}

static ag_status parse_attn(lm_attn_args *a, int argc, char **argv, ag_error *err)
{
    *a = (lm_attn_args){.head = -1, .from = "latest"};
    const ag_field_table tab = {attn_rows, N(attn_rows), a, NULL};
    if (parse_flags(LM_CMD_ATTN, &tab, 1, NULL, NULL, argc, argv, err)) return AG_ERR_ARG;
    size_t n = strlen(a->out);
    if (n < 5 || strcmp(a->out + n - 4, ".png") != 0)
        return ag_seterr(err, AG_ERR_ARG, "--out must end in .png (got '%s')", a->out);
    return AG_OK;
}

// --- entry ---

ag_status lm_cli_parse(lm_cli *cli, int argc, char **argv, ag_error *err)
{
    memset(cli, 0, sizeof *cli);
    if (argc < 2)
        return ag_seterr(err, AG_ERR_ARG, "no command given (train, sample, eval or attn; see: char_lm --help)");
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        cli->help = true;
        return AG_OK;
    }
    for (lm_command k = LM_CMD_TRAIN; k <= LM_CMD_ATTN; k++)
        if (strcmp(c, cmd_names[k]) == 0) cli->cmd = k;
    if (cli->cmd == LM_CMD_NONE)
        return ag_seterr(err, AG_ERR_ARG, "unknown command '%s' (train, sample, eval or attn; see: char_lm --help)", c);
    if (ag_args_want_help(argc, argv, 2)) {   /* --help after the command wins over every other flag */
        cli->help = true;
        return AG_OK;
    }
    switch (cli->cmd) {
    case LM_CMD_TRAIN: return parse_train(&cli->train, argc, argv, err);
    case LM_CMD_SAMPLE: return parse_sample(&cli->sample, argc, argv, err);
    case LM_CMD_ATTN: return parse_attn(&cli->attn, argc, argv, err);
    default: return parse_eval(&cli->eval, argc, argv, err);
    }
}
