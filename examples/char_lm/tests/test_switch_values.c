/* test_switch_values.c -- issue 11: each switch's values live in one table (the model's in
 * src/nn/switches.h, char_lm's optimizer in examples/char_lm/config.h), and everything that
 * offers them follows it. For every value of every switch of char_lm (each AG_FIELD_ENUM row of
 * its config table):
 *   - its name parses back to it, from the command line, and formats back to the name;
 *   - an unknown name, and a number past the table, are refused with a message that lists
 *     exactly the table's names (joined here, not by the code under test);
 *   - `train --help` shows it on its own line under its flag, with its help, the first value
 *     (and only it) marked as the default;
 *   - the checkpoint's config JSON stores its name and reads it back; a config without the
 *     key (an older checkpoint) reads as the first value;
 *   - a tiny model with it builds and runs forward and backward to a finite loss and gradient.
 * Nothing here lists a switch's values: a new row is tested by these loops as it stands. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "config.h"
#include "tcases.h"

/* The rows of lm_fields that are switches, one after another: for (f = NULL; (f = next_switch(f));) */
static const ag_field *next_switch(const ag_field *f)
{
    for (f = f ? f + 1 : lm_fields; f < lm_fields + LM_N_FIELDS; f++)
        if (f->type == AG_FIELD_ENUM) return f;
    return NULL;
}

static bool is_model_field(const ag_field *f)
{
    size_t at = offsetof(lm_config, model);
    return f->offset >= at && f->offset < at + sizeof(ag_gpt_config);
}

/* "gelu or swiglu", "adamw, adam or sgd": the table's names, joined here */
static const char *joined_names(const ag_switch *sw)
{
    static char buf[512];
    buf[0] = '\0';
    for (int v = 0; v < sw->n; v++) {
        if (v > 0) strcat(buf, v + 1 < sw->n ? ", " : " or ");
        strcat(buf, sw->names[v]);
    }
    return buf;
}

static lm_config tiny(void)
{
    lm_config c;
    ck_assert_int_eq(lm_config_preset(&c, "tiny"), AG_OK);
    c.model.vocab_size = 5;
    return c;
}

/* lm_cli_parse of `char_lm train --data c.txt --out d <flag> <value>` */
static ag_status parse_train(lm_cli *cli, const char *flag, const char *value, ag_error *err)
{
    const char *words[8] = { "char_lm", "train", "--data", "c.txt", "--out", "d", flag, value };
    static char buf[8][64];
    char *argv[8];
    for (int i = 0; i < 8; i++) {
        snprintf(buf[i], sizeof buf[i], "%s", words[i]);
        argv[i] = buf[i];
    }
    return lm_cli_parse(cli, 8, argv, err);
}

START_TEST(test_every_name_parses_back)
{
    int switches = 0;
    for (const ag_field *f = NULL; (f = next_switch(f)); switches++) {
        const ag_switch *sw = f->sw;
        ck_assert_msg(sw && sw->n >= 2, "%s: a switch of two values at least", f->key);
        for (int v = 0; v < sw->n; v++) {
            const char *name = sw->names[v];
            ck_assert_msg(name && *name && sw->help[v] && *sw->help[v], "%s: value %d lacks a name or help", f->key, v);
            ck_assert_int_eq(ag_switch_parse(sw, name), v);   /* also: no two values share a name */
            ck_assert_str_eq(ag_switch_name(sw, v), name);
            lm_cli cli;
            ag_error err = { 0 };
            ck_assert_msg(parse_train(&cli, f->flag, name, &err) == AG_OK, "%s %s: %s", f->flag, name, err.msg);
            ck_assert_msg(ag_field_get(&cli.train.cfg, f) == v, "%s %s", f->flag, name);
            char text[64];
            ck_assert_str_eq(ag_field_format(&cli.train.cfg, f, text, sizeof text), name);
        }
        ck_assert_str_eq(ag_switch_name(sw, sw->n), "?");
        ck_assert_str_eq(ag_switch_name(sw, -1), "?");
    }
    ck_assert_int_ge(switches, 1);
}
END_TEST

START_TEST(test_refusals_list_the_table)
{
    for (const ag_field *f = NULL; (f = next_switch(f));) {
        const ag_switch *sw = f->sw;
        char want[1024];
        lm_cli cli;
        ag_error err = { 0 };
        ck_assert_int_eq(parse_train(&cli, f->flag, "no-such-value", &err), AG_ERR_ARG);
        snprintf(want, sizeof want, "%s must be %s (got 'no-such-value')", f->flag, joined_names(sw));
        ck_assert_str_eq(err.msg, want);

        ag_error_clear(&err);                       /* the library's check of a number */
        ck_assert_int_eq(ag_switch_check(sw, sw->n, &err), AG_ERR_ARG);
        snprintf(want, sizeof want, "%s must be %s (got %d)", sw->field, joined_names(sw), sw->n);
        ck_assert_str_eq(err.msg, want);
        ck_assert_int_eq(ag_switch_check(sw, -1, NULL), AG_ERR_ARG);
        for (int v = 0; v < sw->n; v++) ck_assert_int_eq(ag_switch_check(sw, v, NULL), AG_OK);

        lm_config c = tiny();                       /* char_lm's check of a config */
        *(int *)((char *)&c + f->offset) = sw->n;
        ag_error_clear(&err);
        ck_assert_int_eq(lm_config_validate(&c, true, &err), AG_ERR_ARG);
        snprintf(want, sizeof want, "%s must be %s (got %d)", f->flag, joined_names(sw), sw->n);
        ck_assert_str_eq(err.msg, want);
        if (!is_model_field(f)) continue;
        ag_error_clear(&err);                       /* and ag_gpt_new's */
        ck_assert_ptr_null(ag_gpt_new(&c.model, 1, &err));
        snprintf(want, sizeof want, "%s must be %s (got %d)", sw->field, joined_names(sw), sw->n);
        ck_assert_str_eq(err.msg, want);
    }
}
END_TEST

/* The line of [from, to) whose first word is word, into buf (without its '\n'); false if none. */
static bool line_of(const char *from, const char *to, const char *word, char *buf, size_t n)
{
    size_t wl = strlen(word);
    for (const char *p = from; p < to; p = strchr(p, '\n') + 1) {
        const char *w = p + strspn(p, " ");
        if (strncmp(w, word, wl) == 0 && w[wl] == ' ') {
            snprintf(buf, n, "%.*s", (int)strcspn(p, "\n"), p);
            return true;
        }
    }
    return false;
}

/* [*from, *to): the lines of flag in usage, up to the next flag or heading. */
static void flag_lines(const char *usage, const char *flag, const char **from, const char **to)
{
    char line[256];
    ck_assert_msg(line_of(usage, usage + strlen(usage), flag, line, sizeof line), "no line for %s", flag);
    *from = strstr(usage, line);
    const char *p = strchr(*from, '\n') + 1;
    while (*p == ' ' && strncmp(p, "  --", 4) != 0) p = strchr(p, '\n') + 1;
    *to = p;
}

START_TEST(test_help_shows_every_value)
{
    const char *usage = lm_cli_usage(LM_CMD_TRAIN);
    ck_assert_ptr_null(strchr(usage, '@'));         /* every "@key" line was replaced */
    for (const ag_field *f = NULL; (f = next_switch(f));) {
        const char *from, *to;
        flag_lines(usage, f->flag, &from, &to);
        for (int v = 0; v < f->sw->n; v++) {
            char line[256];
            ck_assert_msg(line_of(from, to, f->sw->names[v], line, sizeof line), "--help: %s lacks %s:\n%.*s",
                          f->flag, f->sw->names[v], (int)(to - from), from);
            ck_assert_msg(strstr(line, f->sw->help[v]), "--help: %s %s lacks its help: '%s'", f->flag,
                          f->sw->names[v], line);
            ck_assert_msg((strstr(line, "(default)") != NULL) == (v == 0), "--help: '%s': only the first value is "
                          "the default", line);
        }
    }
}
END_TEST

START_TEST(test_json_keeps_every_value)
{
    for (const ag_field *f = NULL; (f = next_switch(f));) {
        for (int v = 0; v < f->sw->n; v++) {
            lm_config a = tiny(), b;
            ag_error err = { 0 };
            ck_assert_int_eq(ag_field_parse(&a, f, f->sw->names[v], &err), AG_OK);
            char *js = ag_fields_to_json(&a, lm_fields, LM_N_FIELDS), key[128];
            ck_assert_ptr_nonnull(js);
            snprintf(key, sizeof key, "\"%s\": \"%s\", ", f->key, f->sw->names[v]);
            char *at = strstr(js, key);
            ck_assert_msg(at != NULL, "%s lacks %s", js, key);
            ck_assert_msg(lm_config_from_json(&b, js, &err) == AG_OK, "%s: %s", key, err.msg);
            for (int i = 0; i < LM_N_FIELDS; i++)
                ck_assert_msg(ag_field_equal(&a, &b, &lm_fields[i]), "%s: %s differs", key, lm_fields[i].key);
            memmove(at, at + strlen(key), strlen(at + strlen(key)) + 1);   /* an older checkpoint */
            if (f->optional) {
                ck_assert_msg(lm_config_from_json(&b, js, &err) == AG_OK, "without %s: %s", f->key, err.msg);
                ck_assert_msg(ag_field_get(&b, f) == 0, "without %s: not the first value", f->key);
            }
            free(js);
        }
    }
}
END_TEST

/* A model of two layers with cfg: one forward and backward of a loss on a fixed batch. */
static void forward_backward(const ag_gpt_config *cfg, const char *what)
{
    static const int ids[6] = { 0, 3, 1, 4, 2, 2 }, targets[6] = { 3, 1, 4, 2, 2, 0 };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(cfg, 7, &err);
    ck_assert_msg(g != NULL, "%s: %s", what, err.msg);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *loss;
    ag_gpt_forward(ctx, g, ids, targets, 2, 3, &(ag_forward_opts){ .train = true, .seed = 1 }, &loss);
    ck_assert_msg(loss != NULL, "%s: no loss (%s)", what, ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "no message");
    ck_assert_msg(isfinite(loss->data[0]), "%s: loss %g", what, (double)loss->data[0]);
    ck_assert_int_eq(ag_backward(ctx, loss), AG_OK);
    double norm = ag_grad_norm(g->params);
    ck_assert_msg(isfinite(norm) && norm > 0, "%s: gradient norm %g", what, norm);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}

START_TEST(test_model_runs_every_value)
{
    for (const ag_field *f = NULL; (f = next_switch(f));) {
        if (!is_model_field(f)) continue;
        for (int v = 0; v < f->sw->n; v++) {
            lm_config c = { .model = { .vocab_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8, .block_size = 4,
                                       .dropout = 0.1 } };
            char what[128];
            snprintf(what, sizeof what, "%s %s", f->flag, f->sw->names[v]);
            ck_assert_int_eq(ag_field_parse(&c, f, f->sw->names[v], NULL), AG_OK);
            forward_backward(&c.model, what);
        }
    }
}
END_TEST

Suite *switch_values_suite(void)
{
    Suite *s = suite_create("switch_values");
    TCase *t = tcase_create("tables");
    ADD_TESTS(t, test_every_name_parses_back, test_refusals_list_the_table, test_help_shows_every_value,
                 test_json_keeps_every_value, test_model_runs_every_value);
    suite_add_tcase(s, t);
    return s;
}
