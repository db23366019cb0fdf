/* test_train_flags.c -- the trainer's command-line flags (ag_train_flag, src/train/flags.c):
 * every flag into its field of ag_train_opts, as "--flag value" and "--flag=value"; the
 * program's own arguments left to it; each bad or missing value one line, naming the flag, with
 * the opts untouched; the checks after the last flag; the usage lines. */
#include <check.h>
#include <string.h>
#include "train/train.h"
#include "tcases.h"

#define ARGV(...) ((char *[]){"prog", "train", __VA_ARGS__, NULL})
#define ARGC(v) ((int)(sizeof(v) / sizeof *(v)) - 1)   /* of an array */

/* Hands argv[2..] to ag_train_flag as a program would; the program's own arguments (not the
 * trainer's) are collected in own (joined by ' '). The status of the first failure. */
static ag_status parse(int argc, char **argv, ag_train_opts *o, char *own, ag_error *err)
{
    own[0] = '\0';
    for (int i = 2; i < argc; i++) {
        bool mine = true;
        ag_status s = ag_train_flag(o, argc, argv, &i, &mine, err);
        if (s) return s;
        if (!mine) strcat(strcat(own, *own ? " " : ""), argv[i]);
    }
    return AG_OK;
}

START_TEST(every_flag)
{
    char *v[] = {"prog", "train", "--out", "run", "--steps", "300", "--resume", "--time-budget=2.5", "--seed", "7",
                 "--data", "text.txt", "--every=50", "--log-every", "0", "--log-dynamics", "--log-activations",
                 "--lr-find", "1e-5", "--grad-accum", "4", "--threads=3", "--out=run2", "--overwrite", NULL};
    ag_train_opts o = {.steps = 10000, .log_every = 250, .sched = {.lr = 3e-3}};
    char own[256];
    ag_error err = {0};
    ck_assert_int_eq(parse(ARGC(v), v, &o, own, &err), AG_OK);
    ck_assert_str_eq(o.out_dir, "run2");   /* given twice: the last counts */
    ck_assert(o.steps == 300 && o.resume && o.time_budget_s == 2.5 && o.seed == 7 && o.every == 50);
    ck_assert(o.log_every == 0 && o.log_dynamics == 10 && o.log_activations && o.lr_find_lo == 1e-5);
    ck_assert(o.grad_accum == 4 && o.threads == 3 && o.overwrite && o.sched.lr == 3e-3);   /* no other field touched */
    ck_assert_str_eq(own, "--data text.txt");   /* the program's own, left to it */
    ck_assert_int_eq(ag_train_flags_check(&o, 64, &err), AG_OK);
}
END_TEST

/* --time-budget takes seconds as a number, or a duration as char_lm's does ("5m"); "none" is no budget. */
START_TEST(time_budget_durations)
{
    const struct { const char *value; double seconds; } good[] = {
        {"2.5", 2.5}, {"90s", 90}, {"5m", 300}, {"1h30m", 5400}, {"1.5h", 5400}, {"none", 0}};
    for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
        char *v[] = {"prog", "train", "--time-budget", (char *)good[k].value, NULL};
        ag_train_opts o = {.time_budget_s = 9};
        char own[64];
        ag_error err = {0};
        ck_assert_msg(parse(ARGC(v), v, &o, own, &err) == AG_OK, "%s: %s", good[k].value, err.msg);
        ck_assert_msg(o.time_budget_s == good[k].seconds, "%s gave %g", good[k].value, o.time_budget_s);
    }
    const char *bad[] = {"5 parsecs", "5m5", "-5m", "0s", "m", "1e400s"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        char *v[] = {"prog", "train", "--time-budget", (char *)bad[k], NULL};
        ag_train_opts o = {.time_budget_s = 9};
        char own[64], says[160];
        ag_error err = {0};
        snprintf(says, sizeof says, "bad argument '--time-budget': '%s' is neither a number of seconds from 0.001 "
                 "to 1000000000 nor a duration (90s, 5m, 1h30m)", bad[k]);
        ck_assert_int_eq(parse(ARGC(v), v, &o, own, &err), AG_ERR_ARG);
        ck_assert_str_eq(err.msg, says);
        ck_assert(o.time_budget_s == 9);   /* untouched */
    }
}
END_TEST

/* A flag that only begins like one of the trainer's is the program's. */
START_TEST(prefixes_are_not_flags)
{
    char **v = ARGV("--outdir", "x", "--steps-per-eval", "5", "-steps", "--resumed");
    ag_train_opts o = {.steps = 9};
    char own[256];
    ag_error err = {0};
    ck_assert_int_eq(parse(8, v, &o, own, &err), AG_OK);
    ck_assert_str_eq(own, "--outdir x --steps-per-eval 5 -steps --resumed");
    ck_assert(o.steps == 9 && !o.out_dir && !o.resume);
}
END_TEST

START_TEST(bad_values)
{
    const struct { const char *flag, *value, *says; } cases[] = {
        {"--steps", "ten", "bad argument '--steps': 'ten' is not a whole number from 1 to 1000000000"},
        {"--steps", "1.5", "'1.5' is not a whole number"},
        {"--steps", "0", "bad argument '--steps'"},
        {"--steps", "2e9", "bad argument '--steps'"},
        {"--steps", "", "bad argument '--steps': '' is not"},
        {"--steps", "12abc", "bad argument '--steps'"},
        {"--every", "0", "bad argument '--every'"},
        {"--log-every", "-1", "bad argument '--log-every'"},
        {"--seed", "-3", "bad argument '--seed'"},
        {"--time-budget", "0", "bad argument '--time-budget': '0' is not a number from 0.001 to 1000000000"},
        {"--time-budget", "nan", "bad argument '--time-budget'"},
        {"--lr-find", "0", "bad argument '--lr-find'"},
        {"--grad-accum", "0", "bad argument '--grad-accum'"},
        {"--threads", "2000", "bad argument '--threads': '2000' is not a whole number from 1 to 1024"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        char *v[] = {"prog", "train", (char *)cases[k].flag, (char *)cases[k].value, NULL};
        ag_train_opts o = {.steps = 5, .every = 6, .log_every = 7, .seed = 8, .time_budget_s = 9, .threads = 2};
        const ag_train_opts before = o;
        int i = 2;
        bool mine = false;
        ag_error err = {0};
        ck_assert_int_eq(ag_train_flag(&o, 4, v, &i, &mine, &err), AG_ERR_ARG);
        ck_assert_msg(mine && strstr(err.msg, cases[k].says) && !strchr(err.msg, '\n'), "%s %s: '%s'", cases[k].flag,
                      cases[k].value, err.msg);
        ck_assert_msg(memcmp(&o, &before, sizeof o) == 0, "%s %s changed the opts", cases[k].flag, cases[k].value);
    }
}
END_TEST

START_TEST(missing_or_unwanted_values)
{
    ag_train_opts o = {0};
    ag_error err = {0};
    bool mine;
    int i = 2;
    ck_assert_int_eq(ag_train_flag(&o, 3, ARGV("--steps"), &i, &mine, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "bad argument '--steps' (it needs a value)");
    ck_assert_int_eq(i, 2);
    ag_error e2 = {0};
    ck_assert_int_eq(ag_train_flag(&o, 3, ARGV("--out"), &i, &mine, &e2), AG_ERR_ARG);
    ck_assert_str_eq(e2.msg, "bad argument '--out' (it needs a value)");
    ag_error e3 = {0};
    ck_assert_int_eq(ag_train_flag(&o, 3, ARGV("--resume=yes"), &i, &mine, &e3), AG_ERR_ARG);
    ck_assert_str_eq(e3.msg, "bad argument '--resume=yes' (--resume takes no value)");
    ck_assert(!o.resume);
    ag_error e4 = {0};   /* a value that looks like a flag is still the value (as char_lm takes it) */
    ck_assert_int_eq(ag_train_flag(&o, 4, ARGV("--out", "--resume"), &i, &mine, &e4), AG_OK);
    ck_assert(mine && i == 3 && strcmp(o.out_dir, "--resume") == 0 && !o.resume);
}
END_TEST

START_TEST(checks_after_the_flags)
{
    ag_error err = {0};
    ag_train_opts o = {.sched = {.lr = 3e-3}, .lr_find_lo = 3e-3, .out_dir = "run"};
    ck_assert_int_eq(ag_train_flags_check(&o, 64, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "--lr-find LO must be below the learning rate 0.003");
    ag_error e2 = {0};
    o.lr_find_lo = 1e-4;
    o.grad_accum = 65;
    ck_assert_int_eq(ag_train_flags_check(&o, 64, &e2), AG_ERR_ARG);
    ck_assert_msg(strstr(e2.msg, "bad argument '--grad-accum': 65") != NULL, "%s", e2.msg);
    ag_error e3 = {0};
    o.grad_accum = 64;
    o.out_dir = NULL;
    ck_assert_int_eq(ag_train_flags_check(&o, 64, &e3), AG_ERR_ARG);
    ck_assert_str_eq(e3.msg, "--out DIR is required");
    ag_error e4 = {0};
    o.out_dir = "run";
    o.grad_accum = 1000;   /* batch 0: the trainer checks it */
    ck_assert_int_eq(ag_train_flags_check(&o, 0, &e4), AG_OK);
}
END_TEST

START_TEST(usage_lines)
{
    char buf[4096];
    const ag_train_opts d = {.steps = 10000, .every = 250, .threads = 1};
    size_t n = ag_train_flags_usage(&d, buf, sizeof buf);
    ck_assert_uint_eq(n, strlen(buf));
    const char *flags[] = {"--out DIR", "--steps N", "--resume", "--overwrite", "--time-budget S", "--seed S", "--every N",
                           "--log-every N", "--log-dynamics", "--log-activations", "--lr-find LO", "--grad-accum K",
                           "--threads N"};
    for (size_t k = 0; k < sizeof flags / sizeof *flags; k++) {
        char line[64];
        snprintf(line, sizeof line, "\n  %s ", flags[k]);
        ck_assert_msg(strstr(buf, line + (k == 0)) != NULL, "no line for %s in:\n%s", flags[k], buf);
    }
    ck_assert_msg(strstr(buf, "(default 250)\n") && strstr(buf, "(default 10000)\n") && !strstr(buf, "(default 0)"),
                  "%s", buf);
    char small[200];   /* cut at the last whole line */
    size_t m = ag_train_flags_usage(NULL, small, sizeof small);
    ck_assert(m == strlen(small) && m > 0 && small[m - 1] == '\n' && strncmp(small, buf, 20) == 0);
    ck_assert(!strstr(small, "(default"));
}
END_TEST

Suite *train_flags_suite(void)
{
    Suite *s = suite_create("train_flags");
    TCase *tc = tcase_create("flags");
    ADD_TESTS(tc, every_flag, prefixes_are_not_flags, bad_values, missing_or_unwanted_values, checks_after_the_flags,
              usage_lines, time_budget_durations);
    suite_add_tcase(s, tc);
    return s;
}
