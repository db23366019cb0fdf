/* test_fields.c -- a config table (src/train/fields.h) on a small struct of every kind of row:
 * lookup, parsing each type with its exact one-line errors and the struct untouched on one,
 * open and closed ranges, durations, the JSON round trip and every way a JSON config is refused,
 * the --help lines, and the flag loop; beside it a program's command line (text, names, signals,
 * rows without a JSON key) read by the table's flag loop. */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train/fields.h"
#include "train/train.h"   /* ag_ckpt_from_switch, ag_progress_switch */
#include "tcases.h"

typedef struct {
    int layers;
    long steps;
    double lr, dropout, budget;
    uint64_t seed;
    int mlp;        /* ag_mlp_kind */
    bool quiet;
    double added;   /* a field added later: optional in JSON */
} cfg;

#define F(x) offsetof(cfg, x)
static const ag_field rows[] = {
    {"layers", "--layers", AG_FIELD_INT, F(layers), 1, 64, 0, 0, true, false, NULL, "blocks", false, false},
    {"steps", "--steps", AG_FIELD_LONG, F(steps), 0, 1e9, 0, 0, false, false, NULL, "optimizer steps", false, false},
    {"lr", "--lr", AG_FIELD_DOUBLE, F(lr), 0, HUGE_VAL, true, false, false, false, NULL, "peak rate", false, false},
    {"dropout", "--dropout", AG_FIELD_DOUBLE, F(dropout), 0, 1, false, true, false, false, NULL,
     "probability", false, false},
    {"budget", "--budget", AG_FIELD_DOUBLE, F(budget), 0, 7200, 0, 0, false, false, NULL, "the time", true, false},
    {"seed", "--seed", AG_FIELD_U64, F(seed), 0, 9223372036854775807.0, 0, 0, false, false, NULL, "seed", false, false},
    {"mlp", "--mlp", AG_FIELD_ENUM, F(mlp), 0, 0, 0, 0, true, false, &ag_mlp_switch, "the MLP", false, false},
    {"quiet", "--quiet", AG_FIELD_BOOL, F(quiet), 0, 1, 0, 0, false, false, NULL, "say less", false, false},
    {"added", NULL, AG_FIELD_DOUBLE, F(added), 0, 10, 0, 0, false, true, NULL, "no flag", false, false},
};
enum { NROWS = sizeof rows / sizeof rows[0] };

static cfg base(void)
{
    return (cfg){.layers = 2, .steps = 100, .lr = 1e-3, .dropout = 0.1, .budget = 90, .seed = 7, .mlp = 1,
                 .quiet = true, .added = 2.5};
}

static const ag_field *row(const char *key) { return ag_field_by_key(rows, NROWS, key); }

START_TEST(lookup_and_access)
{
    ck_assert_ptr_eq(ag_field_by_flag(rows, NROWS, "--lr"), &rows[2]);
    ck_assert_ptr_eq(row("mlp"), &rows[6]);
    ck_assert_ptr_null(row("nope"));
    ck_assert_ptr_null(ag_field_by_flag(rows, NROWS, "--added"));   /* no flag sets it */
    ck_assert_ptr_null(ag_field_by_flag(rows, NROWS, "--l"));
    cfg a = base(), b = {0};
    char buf[64];
    const char *want[] = {"2", "100", "0.001", "0.1", "90", "7", "swiglu", "true", "2.5"};
    for (int i = 0; i < NROWS; i++) {
        ck_assert_str_eq(ag_field_format(&a, &rows[i], buf, sizeof buf), want[i]);
        ck_assert(!ag_field_equal(&a, &b, &rows[i]));
        ag_field_copy(&b, &a, &rows[i]);
        ck_assert(ag_field_equal(&a, &b, &rows[i]));
    }
    ck_assert(ag_field_get(&a, row("steps")) == 100 && ag_field_get(&a, row("mlp")) == 1);
}
END_TEST

START_TEST(parse_good_values)
{
    cfg c = base();
    const struct { const char *key, *s; double v; } good[] = {
        {"layers", "64", 64}, {"steps", "0", 0}, {"lr", "3e-4", 3e-4}, {"dropout", "0", 0}, {"budget", "1h30m", 5400},
        {"budget", "none", 0}, {"seed", "9223372036854775807", 9223372036854775807.0}, {"mlp", "gelu", 0},
        {"quiet", "false", 0}, {"quiet", "1", 1},
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        ag_error err = {0};
        ck_assert_msg(ag_field_parse(&c, row(good[i].key), good[i].s, &err) == AG_OK, "%s", err.msg);
        ck_assert_msg(ag_field_get(&c, row(good[i].key)) == good[i].v, "%s %s", good[i].key, good[i].s);
    }
}
END_TEST

START_TEST(parse_errors_one_line_each)
{
    const struct { const char *key, *s, *says; } bad[] = {
        {"lr", "abc", "--lr: not a finite number: 'abc'"},
        {"lr", "1e999", "--lr: not a finite number: '1e999'"},
        {"lr", " 1", "--lr: not a finite number: ' 1'"},
        {"lr", "0", "--lr must be > 0 (got 0)"},
        {"dropout", "1", "--dropout must be in [0, 1) (got 1)"},
        {"layers", "2.5", "--layers: not a whole number: '2.5'"},
        {"layers", "", "--layers: not a whole number: ''"},
        {"layers", "65", "--layers must be in [1, 64] (got 65)"},
        {"steps", "-1", "--steps must be in [0, 1000000000] (got -1)"},
        {"seed", "-1", "--seed: not a whole number >= 0: '-1'"},
        {"seed", "9223372036854775808", "--seed must be in [0, 9223372036854775807] (got 9223372036854775808)"},
        {"mlp", "relu", "--mlp must be gelu or swiglu (got 'relu')"},
        {"quiet", "yes", "--quiet must be true or false (got 'yes')"},
        {"budget", "5", "--budget: not a duration: '5' (write it as 90s, 5m, 1h30m or 1.5h; none: no budget)"},
        {"budget", "5s5m", "--budget: not a duration: '5s5m' (write it as 90s, 5m, 1h30m or 1.5h; none: no budget)"},
        {"budget", "", "--budget: not a duration: '' (write it as 90s, 5m or 1h30m)"},
        {"budget", "0s", "--budget must be more than 0 (got '0s'; none: no budget)"},
        {"budget", "2h1s", "--budget must be at most 2h (got '2h1s')"},
        {"added", "11", "added must be in [0, 10] (got 11)"},   /* no flag: the key names it */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cfg c = base(), before = c;
        ag_error err = {0};
        ck_assert_int_eq(ag_field_parse(&c, row(bad[i].key), bad[i].s, &err), AG_ERR_ARG);
        ck_assert_str_eq(err.msg, bad[i].says);
        ck_assert_msg(memcmp(&c, &before, sizeof c) == 0, "%s '%s' changed the struct", bad[i].key, bad[i].s);
    }
    cfg c = base();
    ck_assert_int_eq(ag_field_parse(&c, row("lr"), "x", NULL), AG_ERR_ARG);   /* err may be NULL */
}
END_TEST

START_TEST(ranges_of_a_struct)
{
    cfg c = base();
    ag_error err = {0};
    ck_assert_int_eq(ag_fields_check(&c, rows, NROWS, &err), AG_OK);
    c.dropout = 1;
    ck_assert_int_eq(ag_fields_check(&c, rows, NROWS, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--dropout must be in [0, 1) (got 1)");
    c = base(), c.mlp = 7;
    ag_error_clear(&err);   /* the first error sticks (tensor.h) */
    ck_assert_int_eq(ag_field_check(&c, row("mlp"), &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--mlp must be gelu or swiglu (got 7)");
    c = base(), c.lr = -1;
    ag_error_clear(&err);
    ck_assert_int_eq(ag_field_check(&c, row("lr"), &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--lr must be > 0 (got -1)");
}
END_TEST

START_TEST(json_round_trip)
{
    cfg a = base();
    a.lr = 0.1 + 0.2;   /* 17 digits to read back */
    char *js = ag_fields_to_json(&a, rows, NROWS);
    ck_assert_ptr_nonnull(js);
    ck_assert_str_eq(js, "{\"layers\": 2, \"steps\": 100, \"lr\": 0.30000000000000004, \"dropout\": 0.1, "
                         "\"budget\": 90.0, \"seed\": 7, \"mlp\": \"swiglu\", \"quiet\": true, \"added\": 2.5}");
    cfg b = {0};
    ag_error err = {0};
    ck_assert_msg(ag_fields_from_json(&b, rows, NROWS, js, &err) == AG_OK, "%s", err.msg);
    for (int i = 0; i < NROWS; i++) ck_assert_msg(ag_field_equal(&a, &b, &rows[i]), "%s", rows[i].key);
    free(js);
    /* an optional key missing: its field stays as it was */
    b = base(), b.added = 9;
    const char *old = "{\"layers\": 2, \"steps\": 100, \"lr\": 0.5, \"dropout\": 0.0, \"budget\": 0.0, \"seed\": 1, "
                      "\"mlp\": \"gelu\", \"quiet\": false}";
    ck_assert_msg(ag_fields_from_json(&b, rows, NROWS, old, &err) == AG_OK, "%s", err.msg);
    ck_assert(b.added == 9 && b.lr == 0.5 && b.mlp == 0 && !b.quiet);
}
END_TEST

START_TEST(json_refused)
{
    const struct { const char *json, *says; } bad[] = {
        {"[1]", "config is not a JSON object (other JSON value)"},
        {"{\"layers\": 2, \"extra\": 1}", "config: unknown key \"extra\""},
        {"{\"layers\": 2}", "config: missing \"steps\""},
        {"{\"layers\": 2.5}", "config: bad value for \"layers\""},
        {"{\"layers\": 65}", "config: bad value for \"layers\""},
        {"{\"layers\": 2, \"steps\": 1, \"lr\": \"x\"}", "config: bad value for \"lr\""},
        {"{\"layers\": 2, \"steps\": 1, \"lr\": 1, \"dropout\": 0, \"budget\": 0, \"seed\": -1}",
         "config: bad value for \"seed\""},
        {"{\"layers\": 2, \"steps\": 1, \"lr\": 1, \"dropout\": 0, \"budget\": 0, \"seed\": 1, \"mlp\": \"relu\"}",
         "config: bad value for \"mlp\""},
        {"{\"layers\": 2, \"steps\": 1, \"lr\": 1, \"dropout\": 0, \"budget\": 0, \"seed\": 1, \"mlp\": \"gelu\", "
         "\"quiet\": 1}", "config: bad value for \"quiet\""},
        {"{\"layers\": 2, \"steps\": 1, \"lr\": 0, \"dropout\": 0, \"budget\": 0, \"seed\": 1, \"mlp\": \"gelu\", "
         "\"quiet\": true}", "config: --lr must be > 0 (got 0)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cfg c = base();
        ag_error err = {0};
        ck_assert_int_eq(ag_fields_from_json(&c, rows, NROWS, bad[i].json, &err), AG_ERR_FORMAT);
        ck_assert_str_eq(err.msg, bad[i].says);
    }
    cfg c;
    ag_error err = {0};
    char *js = ag_fields_to_json(&(cfg){0}, rows, NROWS), *dup = malloc(strlen(js) + 32);   /* whole, and a key twice */
    ck_assert(js && dup);
    strcpy(dup, "{\"layers\": 3, ");
    strcat(dup, js + 1);
    ck_assert_int_eq(ag_fields_from_json(&c, rows, NROWS, dup, &err), AG_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "config is not a JSON object (") && strstr(err.msg, "duplicate"), "%s", err.msg);
    free(js);
    free(dup);
    ag_error_clear(&err);
    ck_assert_int_eq(ag_fields_from_json(&c, rows, NROWS, "{", &err), AG_ERR_FORMAT);
    ck_assert(strncmp(err.msg, "config is not a JSON object (", 29) == 0 && !strchr(err.msg, '\n'));
}
END_TEST

START_TEST(usage_lines)
{
    char buf[2048];
    size_t n = ag_fields_usage(rows, NROWS, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "  --layers N             blocks\n"
                          "  --steps N              optimizer steps\n"
                          "  --lr X                 peak rate\n"
                          "  --dropout X            probability\n"
                          "  --budget DURATION      the time\n"
                          "  --seed N               seed\n"
                          "  --mlp NAME             the MLP:\n"
                          "                           gelu       fc2(GELU(fc1 x)), 4C wide (default)\n"
                          "                           swiglu     w_down(SiLU(w_gate x) * w_up x), round(8C/3) wide: "
                          "same size\n"
                          "  --quiet                say less\n");
    char small[40];   /* cut short, still a string */
    n = ag_fields_usage(rows, NROWS, small, sizeof small);
    ck_assert(n == strlen(small) && n == sizeof small - 1 && strncmp(small, buf, n) == 0);
    const char *help = "usage: prog [flags]\n\n@lr\n@quiet\n@nope\n@added\nend";   /* no flag, no row: as written */
    n = ag_fields_usage_text(help, rows, NROWS, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    ck_assert_str_eq(buf, "usage: prog [flags]\n\n  --lr X                 peak rate\n  --quiet                say less\n"
                          "@nope\n@added\nend");
}
END_TEST

START_TEST(flag_loop)
{
    char *argv[] = {"prog", "cmd", "--lr=0.5", "--layers", "8", "--quiet", "--mlp", "gelu", "--steps", NULL};
    cfg c = base();
    ag_error err = {0};
    ag_arg a = ag_args(9, argv, 2);
    const char *seen[] = {"--lr", "--layers", "--quiet", "--mlp", "--steps"};
    for (int k = 0; ag_args_next(&a); k++) {
        ck_assert_str_eq(a.flag, seen[k]);
        ag_status st = ag_field_arg(&c, ag_field_by_flag(rows, NROWS, a.flag), &a, &err);
        ck_assert_int_eq(st, k == 4 ? AG_ERR_ARG : AG_OK);
    }
    ck_assert_str_eq(err.msg, "--steps needs a value");
    ck_assert(c.lr == 0.5 && c.layers == 8 && c.quiet && c.mlp == 0 && c.steps == 100);
    char *argv2[] = {"prog", "cmd", "--quiet=true", NULL};
    a = ag_args(3, argv2, 2);
    ck_assert(ag_args_next(&a) && a.inline_value && strcmp(a.value, "true") == 0);
    ag_error_clear(&err);
    c.quiet = false;
    ck_assert_int_eq(ag_field_arg(&c, row("quiet"), &a, &err), AG_OK);   /* a bool's value inline */
    ck_assert(c.quiet);
    char *argv3[] = {"prog", "cmd", "--quiet=false", "--quiet=yes", "--quiet", NULL};
    a = ag_args(5, argv3, 2);
    ck_assert(ag_args_next(&a) && ag_field_arg(&c, row("quiet"), &a, &err) == AG_OK && !c.quiet);
    ck_assert(ag_args_next(&a) && ag_field_arg(&c, row("quiet"), &a, &err) == AG_ERR_ARG && !c.quiet);
    ck_assert_str_eq(err.msg, "--quiet must be true or false (got 'yes')");
    ck_assert(ag_args_next(&a) && ag_field_arg(&c, row("quiet"), &a, &err) == AG_OK && c.quiet);
    ck_assert(!ag_args_next(&a));
    long v = 0;
    ag_error_clear(&err);
    ck_assert_int_eq(ag_parse_long("--top-k", "11", 0, 10, &v, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--top-k must be in [0, 10] (got 11)");
    ag_error_clear(&err);
    ck_assert_int_eq(ag_parse_long("--top-k", "1x", 0, 10, &v, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--top-k: not a whole number: '1x'");
    ck_assert(ag_parse_long("--top-k", "10", 0, 10, &v, &err) == AG_OK && v == 10);
}
END_TEST

/* What every command line says alike: an unknown flag, a stray argument, a missing flag, --help,
 * one of a few names. */
START_TEST(command_line_messages)
{
    char *argv[] = {"prog", "run", "--frob", "stray", "-h", NULL};
    ag_arg a = ag_args(5, argv, 2);
    ag_error err = {0};
    ck_assert(ag_args_next(&a));
    ck_assert_int_eq(ag_arg_unknown(&a, "prog", "run", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "unknown flag '--frob' for run (see: prog run --help)");
    ag_error_clear(&err);
    ck_assert(ag_args_next(&a) && ag_arg_unknown(&a, "prog", "run", &err) == AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "unexpected argument 'stray' (see: prog run --help)");
    ck_assert(ag_args_want_help(5, argv, 2) && !ag_args_want_help(4, argv, 2));
    ag_error_clear(&err);
    ck_assert(ag_arg_required("x", "--data", "prog", "run", &err) == AG_OK && err.status == AG_OK);
    ck_assert_int_eq(ag_arg_required(NULL, "--data", "prog", "run", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--data is required (see: prog run --help)");
    ag_error_clear(&err);
    ck_assert_int_eq(ag_arg_required("", "--data", "prog", "run", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--data must not be empty");
    static const char *const names[] = {"auto", "lines", "tty", NULL};
    int k = -1;
    ck_assert(ag_parse_choice("--progress", names, "tty", &k, &err) == AG_OK && k == 2);
    ag_error_clear(&err);
    ck_assert_int_eq(ag_parse_choice("--progress", names, "TTY", &k, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--progress must be auto, lines or tty (got 'TTY')");
    ck_assert_int_eq(k, 2);
}
END_TEST

START_TEST(real_format)
{
    const struct { double v; const char *s; } cases[] = {
        {30, "30"}, {1e-5, "1e-05"}, {0.1, "0.1"}, {-2.5, "-2.5"}, {1e20, "1e+20"}, {1.0 / 3, "0.3333333333333333"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[32];
        ag_format_real(buf, sizeof buf, cases[i].v);
        ck_assert_str_eq(buf, cases[i].s);
        ck_assert(strtod(buf, NULL) == cases[i].v);
    }
    double s = -1;
    ag_error err = {0};
    ck_assert(ag_parse_duration("--t", "1.5h", 1e9, &s, &err) == AG_OK && s == 5400);
    ck_assert_int_eq(ag_parse_duration("--t", "91s", 90, &s, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--t must be at most 90s (got '91s')");
    ag_error_clear(&err);
    ck_assert_int_eq(ag_parse_duration("--t", "2m", 90, &s, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--t must be at most 90s (got '2m')");
    ck_assert(s == 5400);   /* untouched */
}
END_TEST

// --- a program's command line beside its config: text, names, signals, rows without a key ---

typedef struct {
    const char *data, *from, *name;
    int threads, sig;
    double temp;
    bool resume;
    long tokens;
} run;

static const char *const whiches[] = {"latest", "best"};
static const ag_switch which_sw = {"from", 2, whiches, NULL};
#define R(x) offsetof(run, x)
static const ag_field run_rows[] = {
    {.flag = "--data", .type = AG_FIELD_STR, .offset = R(data), .lo = 1},
    {.flag = "--from", .type = AG_FIELD_STR, .offset = R(from), .sw = &which_sw},
    {.flag = "--threads", .type = AG_FIELD_INT, .offset = R(threads), .lo = 1, .hi = 1024},
    {.flag = "--temperature", .type = AG_FIELD_DOUBLE, .offset = R(temp), .hi = HUGE_VAL, .lo_open = true},
    {.flag = "--resume", .type = AG_FIELD_BOOL, .offset = R(resume), .hi = 1},
    {.key = "name", .flag = "--name", .type = AG_FIELD_STR, .offset = R(name)},
    {.key = "sig", .flag = "--signal", .type = AG_FIELD_SIGNAL, .offset = R(sig)},
    {.key = "tokens", .flag = "--tokens", .type = AG_FIELD_LONG, .offset = R(tokens), .hi = 10},
};
enum { NRUN = sizeof run_rows / sizeof run_rows[0] };

static const ag_field *run_row(const char *flag) { return ag_field_by_flag(run_rows, NRUN, flag); }

/* parse s into a copy of r by flag; AG_OK, or the message in msg; r untouched on an error */
static ag_status run_parse(run *r, const char *flag, const char *s, char *msg)
{
    ag_error err = {0};
    run before = *r;
    ag_status st = ag_field_parse(r, run_row(flag), s, &err);
    strcpy(msg, err.msg);
    if (st) ck_assert(memcmp(&before, r, sizeof *r) == 0);
    return st;
}

START_TEST(text_rows)
{
    run r = {.from = "latest"};
    char msg[256], data[] = "corpus.txt";
    ck_assert(run_parse(&r, "--data", data, msg) == AG_OK && r.data == data);   /* the text itself */
    ck_assert_int_eq(run_parse(&r, "--data", "", msg), AG_ERR_ARG);
    ck_assert_str_eq(msg, "--data must not be empty");
    char best[] = "best";
    ck_assert(run_parse(&r, "--from", best, msg) == AG_OK && r.from == whiches[1]);   /* the name, not argv */
    ck_assert_int_eq(run_parse(&r, "--from", "worst", msg), AG_ERR_ARG);
    ck_assert_str_eq(msg, "--from must be latest or best (got 'worst')");
    char buf[32];
    ck_assert_str_eq(ag_field_format(&r, run_row("--data"), buf, sizeof buf), "corpus.txt");
    run other = {.data = "corpus.txt"}, none = {0};
    ck_assert(ag_field_equal(&r, &other, run_row("--data")) && !ag_field_equal(&r, &none, run_row("--data")));
    ck_assert(ag_field_equal(&none, &none, run_row("--data")));
    ag_field_copy(&none, &r, run_row("--from"));
    ck_assert(none.from == whiches[1]);
    ag_error err = {0};
    ck_assert(ag_field_check(&none, run_row("--data"), &err) == AG_OK);   /* not given: fine */
}
END_TEST

START_TEST(signal_rows)
{
    run r = {0};
    char msg[256], num[16];
    ck_assert(run_parse(&r, "--signal", "USR2", msg) == AG_OK && r.sig == SIGUSR2);
    ck_assert(run_parse(&r, "--signal", "SIGTERM", msg) == AG_OK && r.sig == SIGTERM);
    snprintf(num, sizeof num, "%d", SIGHUP);
    ck_assert(run_parse(&r, "--signal", num, msg) == AG_OK && r.sig == SIGHUP);
    ck_assert_int_eq(run_parse(&r, "--signal", "KILL", msg), AG_ERR_ARG);
    ck_assert_str_eq(msg, "--signal must be USR1, USR2, TERM, HUP, INT, ALRM or XCPU (or its number; got 'KILL')");
    snprintf(num, sizeof num, "SIG%d", SIGHUP);   /* a number without its SIG */
    ck_assert_int_eq(run_parse(&r, "--signal", num, msg), AG_ERR_ARG);
    char buf[16];
    ck_assert_str_eq(ag_field_format(&r, run_row("--signal"), buf, sizeof buf), "HUP");
    /* JSON: its number; a signal that is none of them is refused */
    r = (run){.sig = SIGUSR1, .tokens = 3, .name = "x", .data = "y"};
    char *json = ag_fields_to_json(&r, run_rows, NRUN);
    char want[64];
    snprintf(want, sizeof want, "{\"sig\": %d, \"tokens\": 3}", SIGUSR1);   /* no text, no keyless row */
    ck_assert_str_eq(json, want);
    run back = {0};
    ag_error err = {0};
    ck_assert_msg(ag_fields_from_json(&back, run_rows, NRUN, json, &err) == AG_OK, "%s", err.msg);
    ck_assert(back.sig == SIGUSR1);
    free(json);
    snprintf(want, sizeof want, "{\"sig\": %d, \"tokens\": 3}", SIGKILL);
    ck_assert_int_eq(ag_fields_from_json(&back, run_rows, NRUN, want, &err), AG_ERR_FORMAT);
    snprintf(num, sizeof num, "%d", SIGKILL);
    snprintf(want, sizeof want, "(or its number; got '%s')", num);
    ck_assert_msg(strstr(err.msg, want) && strncmp(err.msg, "config: --signal must be", 24) == 0, "%s", err.msg);
    ag_error_clear(&err);
    snprintf(want, sizeof want, "{\"sig\": %d, \"tokens\": 3, \"name\": \"x\"}", SIGUSR1);
    ck_assert_int_eq(ag_fields_from_json(&back, run_rows, NRUN, want, &err), AG_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "config: unknown key \"name\"");
}
END_TEST

/* A row without a key reads a whole number as ag_parse_long does, and quotes a double as written;
 * a row with one (the config's) as before. */
START_TEST(keyless_numbers)
{
    run r = {0};
    cfg c = base();
    char msg[256];
    ag_error err = {0};
    ck_assert(run_parse(&r, "--threads", "\n4", msg) == AG_OK && r.threads == 4);
    ck_assert_int_eq(ag_field_parse(&c, row("layers"), "\n4", &err), AG_ERR_ARG);
    ck_assert_int_eq(run_parse(&r, "--threads", " 4", msg), AG_ERR_ARG);
    ck_assert_str_eq(msg, "--threads: not a whole number: ' 4'");
    ck_assert_int_eq(run_parse(&r, "--threads", "99999999999999999", msg), AG_ERR_ARG);
    ck_assert_str_eq(msg, "--threads must be in [1, 1024] (got 99999999999999999)");
    ag_error_clear(&err);
    ck_assert_int_eq(ag_field_parse(&c, row("layers"), "99999999999999999", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--layers must be in [1, 64] (got 1e+17)");
    ck_assert_int_eq(run_parse(&r, "--temperature", "0.0", msg), AG_ERR_ARG);
    ck_assert_str_eq(msg, "--temperature must be > 0 (got 0.0)");
    ag_error_clear(&err);
    ck_assert_int_eq(ag_field_parse(&c, row("lr"), "0.0", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--lr must be > 0 (got 0)");
    ck_assert(run_parse(&r, "--temperature", "\t0.5", msg) == AG_OK && r.temp == 0.5);
    ck_assert_int_eq(run_parse(&r, "--temperature", " 0.5", msg), AG_ERR_ARG);
    ck_assert_str_eq(msg, "--temperature: not a finite number: ' 0.5'");
}
END_TEST

START_TEST(table_flag_loop)
{
    char *argv[] = {"prog", "run", "--threads=3", "--resume", "--data", "d.txt", "--other", "--from", "x", NULL};
    run r = {0};
    bool given[NRUN] = {0}, found = false;
    ag_error err = {0};
    ag_arg a = ag_args(9, argv, 2);
    for (int k = 0; k < 3; k++) {
        ck_assert(ag_args_next(&a));
        ck_assert(ag_fields_arg(&r, run_rows, NRUN, given, &a, &found, &err) == AG_OK && found);
    }
    ck_assert(r.threads == 3 && r.resume && strcmp(r.data, "d.txt") == 0);
    ck_assert(given[0] && !given[1] && given[2] && given[4] && !given[3]);
    ck_assert(ag_args_next(&a));
    ck_assert(ag_fields_arg(&r, run_rows, NRUN, given, &a, &found, &err) == AG_OK && !found);   /* --other */
    ck_assert(ag_args_next(&a));
    ck_assert_int_eq(ag_fields_arg(&r, run_rows, NRUN, NULL, &a, &found, &err), AG_ERR_ARG);
    ck_assert(found);
    ck_assert_str_eq(err.msg, "--from must be latest or best (got 'x')");
    ck_assert(!ag_field_by_key(run_rows, NRUN, "threads") && ag_field_by_key(run_rows, NRUN, "tokens"));
}
END_TEST

/* The program's own flag beside the tables: --twice N, read by hand */
static ag_status twice_flag(void *user, ag_arg *a, bool *found, ag_error *err)
{
    long v;
    if (!(*found = strcmp(a->flag, "--twice") == 0)) return AG_OK;
    if (ag_arg_value(a, err) || ag_parse_long("--twice", a->value, 0, 9, &v, err)) return AG_ERR_ARG;
    *(long *)user = 2 * v;
    return AG_OK;
}

/* A whole command line over two tables (a config's and a run's) and a flag of the program's own. */
START_TEST(whole_command_line)
{
    char *argv[] = {"prog", "run", "--layers", "8", "--data=d.txt", "--twice", "4", "--resume", "--lr", "0.5", NULL};
    cfg c = base();
    run r = {0};
    bool given[NROWS] = {0};
    long twice = 0;
    ag_error err = {0};
    const ag_field_table tabs[] = {{rows, NROWS, &c, given}, {run_rows, NRUN, &r, NULL}};
    ck_assert(ag_args_parse(10, argv, 2, tabs, 2, twice_flag, &twice, "prog", "run", &err) == AG_OK);
    ck_assert(c.layers == 8 && c.lr == 0.5 && strcmp(r.data, "d.txt") == 0 && r.resume && twice == 8);
    ck_assert(given[0] && given[2] && !given[1]);
    char *bad[][3] = {{"--twice", "10", "--twice must be in [0, 9] (got 10)"},
                      {"--frob", "1", "unknown flag '--frob' for run (see: prog run --help)"},
                      {"--layers", "0", "--layers must be in [1, 64] (got 0)"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *args[] = {"prog", "run", "--resume", bad[i][0], bad[i][1], "--steps", "x", NULL};
        ag_error_clear(&err);
        ck_assert_int_eq(ag_args_parse(7, args, 2, tabs, 2, twice_flag, &twice, "prog", "run", &err), AG_ERR_ARG);
        ck_assert_str_eq(err.msg, bad[i][2]);   /* the first error, not the later --steps x */
    }
    char *cfg_only[] = {"prog", "run", "--frob", "--layers", "3", "stray", "--lr", "x", NULL};
    c = base();   /* a first pass: the config's flags only, every other argument passed over */
    ag_error_clear(&err);
    ck_assert(ag_args_parse(8, cfg_only, 2, tabs, 1, ag_arg_pass_over, NULL, "prog", "run", &err) == AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--lr: not a finite number: 'x'");
    ck_assert(c.layers == 3);
    ag_error_clear(&err);
    ck_assert(ag_args_parse(6, cfg_only, 2, tabs, 1, ag_arg_pass_over, NULL, "prog", "run", &err) == AG_OK);
    ag_error_clear(&err);   /* without a handler of its own, --twice is unknown too */
    ck_assert_int_eq(ag_args_parse(7, argv, 2, tabs, 2, NULL, NULL, "prog", "run", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "unknown flag '--twice' for run (see: prog run --help)");
}
END_TEST

/* Required rows: checked after every argument was read, in the table's order, with
 * ag_arg_required's words; an error of a flag comes first. */
START_TEST(required_rows)
{
    static const ag_field need[] = {
        {.flag = "--data", .type = AG_FIELD_STR, .offset = R(data), .required = true},
        {.flag = "--name", .type = AG_FIELD_STR, .offset = R(name), .required = true},
        {.flag = "--threads", .type = AG_FIELD_INT, .offset = R(threads), .lo = 1, .hi = 8},
    };
    const struct { int argc; char *argv[6]; const char *msg; } cases[] = {
        {2, {"prog", "run"}, "--data is required (see: prog run --help)"},
        {4, {"prog", "run", "--name", "n"}, "--data is required (see: prog run --help)"},
        {4, {"prog", "run", "--data", "d"}, "--name is required (see: prog run --help)"},
        {6, {"prog", "run", "--name", "n", "--data", ""}, "--data must not be empty"},
        {4, {"prog", "run", "--threads", "0"}, "--threads must be in [1, 8] (got 0)"},
        {6, {"prog", "run", "--name", "n", "--data", "d"}, ""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        run r = {0};
        ag_error err = {0};
        const ag_field_table tab = {need, 3, &r, NULL};
        ag_status s = ag_args_parse(cases[i].argc, (char **)cases[i].argv, 2, &tab, 1, NULL, NULL, "prog", "run", &err);
        ck_assert_int_eq(s, *cases[i].msg ? AG_ERR_ARG : AG_OK);
        ck_assert_str_eq(err.msg, cases[i].msg);
    }
}
END_TEST

/* The library's switches for a program's flags: --from latest|best, --progress auto|lines|tty. */
START_TEST(library_switches)
{
    typedef struct { const char *from; int progress; } args;
    static const ag_field rows[] = {
        {.flag = "--from", .type = AG_FIELD_STR, .offset = offsetof(args, from), .sw = &ag_ckpt_from_switch},
        {.flag = "--progress", .type = AG_FIELD_ENUM, .offset = offsetof(args, progress), .sw = &ag_progress_switch},
    };
    char *argv[] = {"prog", "run", "--from", AG_CKPT_BEST, "--progress", "tty", "--from", "middle", NULL};
    args a = {0};
    ag_error err = {0};
    const ag_field_table tab = {rows, 2, &a, NULL};
    ck_assert(ag_args_parse(6, argv, 2, &tab, 1, NULL, NULL, "prog", "run", &err) == AG_OK);
    ck_assert(strcmp(a.from, "best") == 0 && a.progress == AG_PROGRESS_TTY);
    ck_assert_int_eq(ag_args_parse(8, argv, 2, &tab, 1, NULL, NULL, "prog", "run", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--from must be latest or best (got 'middle')");
    ck_assert_str_eq(ag_switch_name(&ag_progress_switch, AG_PROGRESS_LINES), "lines");
}
END_TEST

/* A preset as its values: "key=value" pairs, each read as its flag's value is. */
START_TEST(set_from_text)
{
    cfg c = base();
    ag_error err = {0};
    const char *text = "  layers=8 lr=3e-4  mlp=gelu budget=5m quiet=false seed=9 ";
    ck_assert(ag_fields_set(&c, rows, NROWS, text, &err) == AG_OK);
    ck_assert(c.layers == 8 && c.lr == 3e-4 && c.mlp == 0 && c.budget == 300 && !c.quiet && c.seed == 9);
    ck_assert_int_eq(ag_fields_set(&c, rows, NROWS, "layers=4 lr=-1 steps=5", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--lr must be > 0 (got -1)");
    ck_assert(c.layers == 4 && c.lr == 3e-4 && c.steps == 100);   /* the pairs before it set, none after */
    const char *bad[] = {"nope=1", "layers", "=3"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[64];
        ag_error_clear(&err);
        ck_assert_int_eq(ag_fields_set(&c, rows, NROWS, bad[i], &err), AG_ERR_ARG);
        snprintf(want, sizeof want, "not a field of the table: '%s'", bad[i]);
        ck_assert_str_eq(err.msg, want);
    }
    run r = {0};
    ck_assert_int_eq(ag_fields_set(&r, run_rows, NRUN, "tokens=2 name=x", &err), AG_ERR_ARG);   /* no text */
    ck_assert(r.tokens == 2 && !r.name);
    ck_assert(ag_fields_set(&c, rows, NROWS, "", &err) == AG_OK && c.layers == 4);
}
END_TEST

/* ag_fields_merge: a checkpoint's shape rows win, a given flag that contradicts one is refused
 * (cfg untouched), and on a resume the other given flags override the checkpoint's values */
START_TEST(merge_with_checkpoint)
{
    cfg ck = base(), flags = base(), c;
    ck.steps = 50, ck.lr = 5e-3, ck.mlp = 0;
    flags.layers = 3, flags.steps = 300, flags.lr = 2e-3;
    bool given[NROWS] = {0};
    ag_error err = {0};
    given[row("layers") - rows] = true;
    c = ck;
    ck_assert_int_eq(ag_fields_merge(&c, &flags, &ck, rows, NROWS, given, false, true, "D", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--layers: the checkpoint in D has layers 2, but the flag asks for 3 (a resumed run "
                     "keeps its model shape)");
    ck_assert(memcmp(&c, &ck, sizeof c) == 0);   /* untouched */
    given[row("layers") - rows] = false;
    given[row("steps") - rows] = true;   /* a resume: the given flag's value, the rest the checkpoint's */
    ck_assert_int_eq(ag_fields_merge(&c, &flags, &ck, rows, NROWS, given, false, true, "D", &err), AG_OK);
    ck_assert(c.steps == 300 && c.lr == 5e-3 && c.layers == 2 && c.mlp == 0);
    c = flags;   /* a new run from the weights: the flags' values, the checkpoint's shape */
    ck_assert_int_eq(ag_fields_merge(&c, &flags, &ck, rows, NROWS, given, false, false, "D", &err), AG_OK);
    ck_assert(c.steps == 300 && c.lr == 2e-3 && c.layers == 2 && c.mlp == 0);
    c = flags;   /* a whole config given: each shape row of it must be the checkpoint's */
    ag_error_clear(&err);
    ck_assert_int_eq(ag_fields_merge(&c, &flags, &ck, rows, NROWS, NULL, true, false, "D", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--layers: the checkpoint in D has layers 2, but --config asks for 3");
    flags.layers = 2;
    ag_error_clear(&err);
    ck_assert_int_eq(ag_fields_merge(&c, &flags, &ck, rows, NROWS, NULL, true, false, "D", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--mlp: the checkpoint in D has mlp gelu, but --config asks for swiglu");
}
END_TEST

/* ag_field_bits / ag_field_format_bits: 8 bytes a row, said back as the row says its value; the
 * layout hash changes with a row's type or offset */
START_TEST(bits_and_layout)
{
    cfg c = base();
    char buf[64];
    ck_assert_uint_eq(ag_field_bits(&c, row("layers")), 2);
    ck_assert_uint_eq(ag_field_bits(&c, row("seed")), 7);
    ck_assert_uint_eq(ag_field_bits(&c, row("quiet")), 1);
    ck_assert_str_eq(ag_field_format_bits(row("lr"), ag_field_bits(&c, row("lr")), buf, sizeof buf), "0.001");
    ck_assert_str_eq(ag_field_format_bits(row("mlp"), ag_field_bits(&c, row("mlp")), buf, sizeof buf), "swiglu");
    ck_assert_str_eq(ag_field_format_bits(row("steps"), ag_field_bits(&c, row("steps")), buf, sizeof buf), "100");
    c.layers = 3;
    ck_assert_uint_ne(ag_field_bits(&c, row("layers")), 2);
    uint64_t h = ag_fields_layout(rows, NROWS, 1);
    ck_assert_uint_eq(ag_fields_layout(rows, NROWS, 1), h);
    ag_field moved[NROWS];
    memcpy(moved, rows, sizeof rows);
    moved[2].offset += 8;
    ck_assert_uint_ne(ag_fields_layout(moved, NROWS, 1), h);
    moved[2] = rows[2], moved[1].type = AG_FIELD_U64;
    ck_assert_uint_ne(ag_fields_layout(moved, NROWS, 1), h);
    ck_assert_uint_ne(ag_fields_layout(rows, NROWS - 1, 1), h);
}
END_TEST

/* ag_fields_switches: the optional enum and bool rows that are on, in table order */
START_TEST(switches_on)
{
    static const ag_field sw[] = {
        {"mlp", "--mlp", AG_FIELD_ENUM, F(mlp), 0, 0, 0, 0, false, true, &ag_mlp_switch, "the MLP", false, false},
        {"layers", "--layers", AG_FIELD_INT, F(layers), 1, 64, 0, 0, false, true, NULL, "blocks", false, false},
        {"quiet", "--quiet", AG_FIELD_BOOL, F(quiet), 0, 1, 0, 0, false, true, NULL, "say less", false, false},
        {"hidden", NULL, AG_FIELD_BOOL, F(quiet), 0, 1, 0, 0, false, true, NULL, "no flag", false, false},
    };
    cfg c = base();
    char buf[64];
    ck_assert_uint_eq(ag_fields_switches(&c, sw, 4, buf, sizeof buf), strlen("--mlp swiglu, --quiet"));
    ck_assert_str_eq(buf, "--mlp swiglu, --quiet");
    ck_assert_uint_eq(ag_fields_switches(&c, rows, NROWS, buf, sizeof buf), 0);   /* its one optional row a double */
    ck_assert_str_eq(buf, "");
    c.mlp = 0, c.quiet = false;
    ck_assert_uint_eq(ag_fields_switches(&c, sw, 4, buf, sizeof buf), 0);
    c.quiet = true;
    ck_assert_uint_eq(ag_fields_switches(&c, sw, 4, buf, 6), 5);   /* cut short, terminated */
    ck_assert_str_eq(buf, "--qui");
}
END_TEST

Suite *fields_suite(void)
{
    Suite *s = suite_create("fields");
    TCase *tc = tcase_create("fields");
    ADD_TESTS(tc, lookup_and_access, parse_good_values, parse_errors_one_line_each, ranges_of_a_struct,
              json_round_trip, json_refused, usage_lines, flag_loop, command_line_messages, real_format);
    ADD_TESTS(tc, text_rows, signal_rows, keyless_numbers, table_flag_loop, set_from_text, whole_command_line);
    ADD_TESTS(tc, merge_with_checkpoint, bits_and_layout, switches_on, required_rows,
              library_switches);
    suite_add_tcase(s, tc);
    return s;
}
