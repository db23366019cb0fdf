/* test_chars.c -- a GPT over characters (lm/lm.h), through the library's headers alone:
 *   - ag_chars_generate: an empty prompt starts at the newline, the same seed gives the same
 *     characters, a character outside the vocabulary is refused naming it;
 *   - ag_chars_print: the prompt then the sample and a newline; a bad prompt prints nothing;
 *   - ag_chars_eval_file: a file's whole windows counted; a short file refused naming it;
 *   - ag_chars_label and ag_chars_pattern_names: the axes' labels, the patterns' words;
 *   - ag_chars_attention: its arguments checked, the picture's script titled by the program;
 *   - ag_chars_trace_prompt, ag_chars_trace_file: the forward traced on the text given. */
#define _GNU_SOURCE   /* open_memstream */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

static char root[64];
static ag_corpus text;   /* its vocabulary: the model's */
static ag_gpt *g;

static void setup(void)
{
    snprintf(root, sizeof root, "/tmp/ag_chars_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    const char *s = "the cat sat on the mat.\nthe dog ran.\n";
    proc_write_file(proc_path(root, "t.txt"), s, strlen(s));
    ag_error e = {0};
    ck_assert_int_eq(ag_corpus_load(proc_path(root, "t.txt"), &text, &e), AG_OK);
    ag_gpt_config cfg = {.vocab_size = text.vocab.V, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8};
    ck_assert_ptr_nonnull(g = ag_gpt_new(&cfg, 5, &e));
}

static void teardown(void)
{
    ag_gpt_free(g);
    ag_corpus_free(&text);
    proc_remove_tree(root);
}

typedef struct { int ids[32], n; } got;

static bool keep(int id, void *user)
{
    got *k = user;
    k->ids[k->n++] = id;
    return true;
}

/* ag_chars_print's output, in a malloc'd string; its status in *s */
static char *printed(const char *prompt, ag_status *s, ag_error *e)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    *s = ag_chars_print(f, g, &text.vocab, prompt, &(ag_sample_opts){20, 1.0, 0, 3, NULL}, e);
    fclose(f);
    return buf;
}

START_TEST(chars_sample)
{
    ag_error e = {0};
    ag_sample_opts o = {20, 1.0, 0, 3, NULL};
    got a = {0}, b = {0};
    ck_assert_int_eq(ag_chars_generate(g, &text.vocab, NULL, &o, keep, &a, &e), AG_OK);
    ck_assert_int_eq(ag_chars_generate(g, &text.vocab, "\n", &o, keep, &b, &e), AG_OK);
    ck_assert_int_eq(a.n, 20);
    ck_assert_int_eq(memcmp(a.ids, b.ids, sizeof a.ids), 0);   /* no prompt: the newline */
    ck_assert_int_eq(ag_chars_generate(g, &text.vocab, "the Zoo", &o, keep, &b, &e), AG_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "--prompt") && strstr(e.msg, "U+005A"), "%s", e.msg);

    ag_status s;
    char *out = printed("the ", &s, &e);
    ck_assert_int_eq(s, AG_OK);
    ck_assert_int_eq(strncmp(out, "the ", 4), 0);
    ck_assert_uint_ge(strlen(out), 4 + 20 + 1);   /* the prompt, 20 characters, a newline */
    ck_assert_int_eq(out[strlen(out) - 1], '\n');
    free(out);
    e = (ag_error){0};
    out = printed("the Zoo", &s, &e);
    ck_assert_int_eq(s, AG_ERR_ARG);
    ck_assert_str_eq(out, "");   /* refused before anything was printed */
    free(out);
}
END_TEST

START_TEST(chars_eval)
{
    ag_error e = {0};
    double loss = 0;
    size_t tokens = 0;
    ck_assert_int_eq(ag_chars_eval_file(g, &text.vocab, proc_path(root, "t.txt"), &loss, &tokens, &e), AG_OK);
    ck_assert_uint_eq(tokens, 8 * ((text.n - 1) / 8));   /* every whole window of block_size + 1 */
    ck_assert(loss > 0 && loss < 2 * log(text.vocab.V));
    proc_write_file(proc_path(root, "short.txt"), "the cat", 7);
    ck_assert_int_eq(ag_chars_eval_file(g, &text.vocab, proc_path(root, "short.txt"), &loss, &tokens, &e), AG_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "short.txt: "), "%s", e.msg);
}
END_TEST

START_TEST(chars_labels)
{
    char out[16];
    const struct { uint32_t cp; const char *want; } cases[] = {
        {'\n', "\\n"}, {'\t', "\\t"}, {'\r', "\\r"}, {' ', "\xe2\x90\xa3"}, {1, "U+0001"}, {0x7f, "U+007F"},
        {'a', "a"}, {0xe9, "\xc3\xa9"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        ag_chars_label(cases[k].cp, out);
        ck_assert_str_eq(out, cases[k].want);
    }
    ck_assert_str_eq(ag_chars_pattern_names[AG_ATTN_PREVIOUS], "previous character");
    ck_assert_str_eq(ag_chars_pattern_names[AG_ATTN_SELF], ag_attn_pattern_names[AG_ATTN_SELF]);
}
END_TEST

START_TEST(chars_attention)
{
    ag_error e = {0};
    const char *png = proc_path(root, "a.png");
    ck_assert_int_eq(ag_chars_attention(g, &text.vocab, "the", 2, 0, png, NULL, &e), AG_ERR_ARG);
    ck_assert_str_eq(e.msg, "--layer 2: the model has 2 layers (0 .. 1)");
    e = (ag_error){0};
    ck_assert_int_eq(ag_chars_attention(g, &text.vocab, "the", 0, 2, png, NULL, &e), AG_ERR_ARG);
    ck_assert_str_eq(e.msg, "--head 2: the model has 2 heads (0 .. 1)");
    e = (ag_error){0};
    ck_assert_int_eq(ag_chars_attention(g, &text.vocab, "", 0, 0, png, NULL, &e), AG_ERR_ARG);
    e = (ag_error){0};
    ck_assert_int_eq(ag_chars_attention(g, &text.vocab, "the cat sat", 0, 0, png, NULL, &e), AG_ERR_ARG);
    ck_assert_msg(strstr(e.msg, "11 characters; the model sees at most block_size 8"), "%s", e.msg);

    ag_train_name("prog", "PROG");
    ag_attn_head heads[2];
    e = (ag_error){0};
    ag_status s = ag_chars_attention(g, &text.vocab, "a t\n", 1, -1, png, heads, &e);
    ag_train_name("attograd", "AG");
    ck_assert_msg(s == AG_OK || s == AG_ERR_IO, "%s", e.msg);   /* AG_ERR_IO: no gnuplot here */
    char *gp = proc_read_file(proc_path(root, "a.gp"), NULL);
    ck_assert_ptr_nonnull(gp);
    ck_assert_msg(strstr(gp, "prog attn: layer 1, every head, 4 characters"), "%s", gp);
    ck_assert_msg(strstr(gp, "\"\xe2\x90\xa3\" 1") && strstr(gp, "\"\\\\n\" 3"), "%s", gp);   /* the labels */
    free(gp);
}
END_TEST

START_TEST(chars_trace)
{
    ag_error e = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_int_eq(ag_chars_trace_prompt(f, g, &text.vocab, "the cat sat", NULL, &e), AG_OK);
    ck_assert_int_eq(ag_chars_trace_file(f, g, &text.vocab, proc_path(root, "t.txt"), NULL, &e), AG_OK);
    ck_assert_int_eq(ag_chars_trace_prompt(f, g, &text.vocab, "Z", NULL, &e), AG_ERR_ARG);
    fclose(f);
    ck_assert_msg(strstr(buf, "the prompt (B=1, T=8; sampling then feeds"), "%s", buf);   /* its last 8 */
    ck_assert_msg(strstr(buf, "characters from ") && strstr(buf, "t.txt"), "%s", buf);
    free(buf);
}
END_TEST

Suite *chars_suite(void)
{
    Suite *s = suite_create("chars");
    TCase *tc = tcase_create("chars");
    tcase_add_checked_fixture(tc, setup, teardown);
    ADD_TESTS(tc, chars_sample, chars_eval, chars_labels, chars_attention, chars_trace);
    suite_add_tcase(s, tc);
    return s;
}
