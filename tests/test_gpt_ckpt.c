/* test_gpt_ckpt.c -- a GPT's checkpoint files for any program (nn/gpt_ckpt.h, train.h's
 * metadata readers), with a made-up program "demo" whose config is a JSON object of its own.
 *
 *   write    ag_gpt_ckpt_write, read back by ag_gpt_ckpt_meta and ag_gpt_ckpt_model: the tag,
 *            the config (through the program's parser), the vocabulary, iter, run_id, the weights
 *   refuse   another tag; a config over the program's bound, never parsed; a vocabulary of
 *            another size than the config's; a config larger than the file can hold, refused
 *            before the model is allocated
 *   meta     ag_st_meta_iter, ag_st_meta_loss, ag_st_meta_u64 on good and bad values; a file's
 *            run and iteration from its header (ag_gpt_ckpt_file_id), none without both
 *   bound    ag_ckpt_check_bound: a moments file pairs with the weights it was saved with only */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

static char root[64];
#define PAD ".................................."   /* 34 bytes */

static void setup(void)
{
    strcpy(root, "/tmp/ag_gpt_ckpt_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void) { proc_remove_tree(root); }

static int parsed;   /* demo_config's calls */

/* demo's config: {"V":..,"L":..,"H":..,"C":..,"T":..}. */
static ag_status demo_config(const char *json, void *user, ag_gpt_config *m, ag_error *why)
{
    (void)user;
    parsed++;
    memset(m, 0, sizeof *m);
    if (sscanf(json, "{\"V\":%d,\"L\":%d,\"H\":%d,\"C\":%d,\"T\":%d}", &m->vocab_size, &m->n_layer, &m->n_head,
               &m->n_embd, &m->block_size) == 5)
        return AG_OK;
    return ag_seterr(why, AG_ERR_FORMAT, "a config that is not demo's");
}

static const ag_gpt_ckpt_kind demo = {.format = "demo-1", .program = "demo", .config_max = 64,
                                      .config = demo_config};

static ag_gpt *demo_model(int V)
{
    ag_gpt_config c = {.vocab_size = V, .n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 4};
    ag_gpt *g = ag_gpt_new(&c, 5, NULL);
    ck_assert_ptr_nonnull(g);
    return g;
}

/* root/name written by ag_gpt_ckpt_write with config and the vocabulary "\nabc", then loaded. */
static ag_st_file *written(const char *name, const ag_gpt *g, const char *format, const char *config)
{
    ag_vocab v;
    ag_error err = {0};
    ck_assert_int_eq(ag_vocab_from_json("v", "[10,97,98,99]", &v, NULL), AG_OK);
    const char *path = proc_path(root, name);
    ck_assert_msg(ag_gpt_ckpt_write(path, g, format, config, &v, 42, 0xabcdef, &err) == AG_OK, "%s", err.msg);
    ag_vocab_free(&v);
    ag_st_file *f = ag_st_load(path, &err);
    ck_assert_msg(f, "%s", err.msg);
    return f;
}

START_TEST(test_write_and_read)
{
    ag_gpt *g = demo_model(4);
    ag_st_file *f = written("w.safetensors", g, "demo-1", "{\"V\":4,\"L\":1,\"H\":2,\"C\":8,\"T\":4}");
    ag_gpt_config m;
    ag_vocab v = {0};
    long iter = -1;
    uint64_t run = 0;
    ag_error err = {0};
    ck_assert_msg(ag_gpt_ckpt_meta(f, "w", &demo, NULL, &m, &v, &iter, &run, &err) == AG_OK, "%s", err.msg);
    ck_assert(m.vocab_size == 4 && m.n_layer == 1 && m.n_head == 2 && m.n_embd == 8 && m.block_size == 4);
    ck_assert(v.V == 4 && v.cp[0] == 10 && v.cp[3] == 99);
    ck_assert(iter == 42 && run == 0xabcdef);
    ck_assert_str_eq(ag_st_meta_get(f, "run_id"), "0000000000abcdef");
    ag_ckpt_id id = {0};
    ck_assert(ag_gpt_ckpt_file_id(proc_path(root, "w.safetensors"), &id) && id.run_id == 0xabcdef && id.iter == 42);
    ag_gpt *h = NULL;
    ck_assert_msg(ag_gpt_ckpt_model(f, "w", &m, 1, &h, &err) == AG_OK, "%s", err.msg);
    for (size_t i = 0; i < g->params->total; i++)
        if (h->params->data[i] != (ag_real)(float)g->params->data[i]) ck_abort_msg("weight %zu differs", i);
    ag_gpt_free(h);
    ag_vocab_free(&v);
    ag_st_free(f);
    ag_gpt_free(g);
}
END_TEST

/* ag_gpt_ckpt_meta of f fails with a message holding want. */
static void meta_refused(const ag_st_file *f, const char *want)
{
    ag_gpt_config m;
    ag_vocab v = {0};
    long iter;
    uint64_t run;
    ag_error err = {0};
    ck_assert_int_eq(ag_gpt_ckpt_meta(f, "F", &demo, NULL, &m, &v, &iter, &run, &err), AG_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, want), "'%s' has no '%s'", err.msg, want);
    ag_vocab_free(&v);
}

START_TEST(test_refusals)
{
    ag_gpt *g = demo_model(4);
    ag_st_file *f = written("a", g, "other-1", "{\"V\":4,\"L\":1,\"H\":2,\"C\":8,\"T\":4}");
    meta_refused(f, "F: not a demo checkpoint (metadata format is \"other-1\", expected \"demo-1\")");
    ag_st_free(f);
    parsed = 0;
    f = written("b", g, "demo-1", "{\"V\":4,\"L\":1,\"H\":2,\"C\":8,\"T\":4,\"pad\":\"" PAD "\"}");
    meta_refused(f, "F: metadata \"config\" is 74 bytes, more than the 64 a config takes");
    ck_assert_int_eq(parsed, 0);   /* bounded before it is parsed */
    ag_st_free(f);
    f = written("c", g, "demo-1", "{\"V\":5,\"L\":1,\"H\":2,\"C\":8,\"T\":4}");
    meta_refused(f, "F: the vocab has 4 characters, the config says vocab_size 5");
    ag_st_free(f);
    f = written("d", g, "demo-1", "{\"V\":4}");
    meta_refused(f, "F: a config that is not demo's");
    /* a forged shape: far more parameters than the file holds, refused before allocating them */
    ag_gpt_config big = {.vocab_size = 4, .n_layer = 9, .n_head = 8, .n_embd = 2048, .block_size = 4};
    ag_gpt *h = (ag_gpt *)1;
    ag_error err = {0};
    ck_assert_int_eq(ag_gpt_ckpt_model(f, "F", &big, 1, &h, &err), AG_ERR_FORMAT);
    ck_assert_ptr_null(h);
    ck_assert_msg(strstr(err.msg, "F: the config needs at least"), "%s", err.msg);
    ag_st_free(f);
    ag_gpt_free(g);
}
END_TEST

START_TEST(test_meta_readers)
{
    const ag_real x[1] = {1};
    const ag_st_tensor t = {"x", 1, {1}, x};
    const ag_st_meta meta[] = {{"iter", "12"}, {"huge", "9007199254740992"}, {"neg", "-1"}, {"loss", "0.5"},
                               {"nan", "nan"}, {"below", "-0.25"}, {"junk", "0.5x"}, {"n", "7"}};
    const char *path = proc_path(root, "m.safetensors");
    ck_assert_int_eq(ag_st_save(path, &t, 1, meta, 8, NULL, NULL), AG_OK);
    ag_error err = {0};
    ag_st_file *f = ag_st_load(path, &err);
    ck_assert_msg(f, "%s", err.msg);
    ck_assert_int_eq(ag_st_meta_iter(f, "iter"), 12);
    ck_assert_int_eq(ag_st_meta_iter(f, "huge"), -1);   /* 2^53: not an iteration */
    ck_assert_int_eq(ag_st_meta_iter(f, "neg"), -1);
    ck_assert_int_eq(ag_st_meta_iter(f, "none"), -1);
    ck_assert(ag_st_meta_loss(f, "loss") == 0.5);
    const char *bad[] = {"nan", "below", "junk", "none", "neg"};
    for (int i = 0; i < 5; i++) ck_assert_msg(isnan(ag_st_meta_loss(f, bad[i])), "%s", bad[i]);
    uint64_t v = 0;
    ck_assert_int_eq(ag_st_meta_u64(f, "P", "n", 7, &v, &err), AG_OK);
    ck_assert(v == 7);
    ck_assert_int_eq(ag_st_meta_u64(f, "P", "n", 6, &v, &err), AG_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "P: metadata \"n\" is not a valid count: '7'");
    ck_assert_int_eq(ag_st_meta_u64(f, "P", "neg", 100, &v, &err), AG_ERR_FORMAT);
    ag_error_clear(&err);
    ck_assert_int_eq(ag_st_meta_u64(f, "P", "gone", 100, &v, &err), AG_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "P: metadata has no \"gone\"");
    ag_st_free(f);
    ag_ckpt_id id;
    ck_assert(!ag_gpt_ckpt_file_id(path, &id));   /* an iter but no run_id */
    ck_assert(!ag_gpt_ckpt_file_id(proc_path(root, "missing"), &id));
}
END_TEST

/* root/name := g's moments with model_hash mh (NULL: none), loaded. */
static ag_st_file *moments(const char *name, const ag_gpt *g, const char *mh)
{
    const ag_st_meta meta[] = {{"model_hash", mh}};
    const char *path = proc_path(root, name);
    ag_error err = {0};
    ck_assert_msg(ag_ckpt_write_moments(path, g->params, meta, mh ? 1 : 0, &err) == AG_OK, "%s", err.msg);
    ag_st_file *f = ag_st_load(path, &err);
    ck_assert_msg(f, "%s", err.msg);
    return f;
}

START_TEST(test_check_bound)
{
    ag_gpt *g = demo_model(4);
    char mh[20];
    ag_hex64_format(mh, sizeof mh, ag_weights_hash(g->params));
    ag_st_file *f = moments("s", g, mh), *none = moments("t", g, NULL), *bad = moments("u", g, "12345");
    ag_error err = {0};
    ck_assert_int_eq(ag_ckpt_check_bound(f, "S", "w.safetensors", g->params, &err), AG_OK);
    ck_assert_int_eq(ag_ckpt_check_bound(none, "S", "w.safetensors", g->params, &err), AG_OK);   /* older */
    ck_assert_int_eq(ag_ckpt_check_bound(bad, "S", "w.safetensors", g->params, &err), AG_ERR_FORMAT);
    ck_assert_str_eq(err.msg, "S: metadata \"model_hash\" is not 16 hex digits");
    g->params->data[3] += 1;   /* other weights: another branch of the run */
    ag_error_clear(&err);
    ck_assert_int_eq(ag_ckpt_check_bound(f, "S", "w.safetensors", g->params, &err), AG_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "S was saved with other weights than the w.safetensors it is read with") &&
                  strstr(err.msg, "the two files are not one checkpoint"), "%s", err.msg);
    ag_st_free(f);
    ag_st_free(none);
    ag_st_free(bad);
    ag_gpt_free(g);
}
END_TEST

Suite *gpt_ckpt_suite(void)
{
    Suite *s = suite_create("gpt_ckpt");
    TCase *t = tcase_create("files");
    tcase_add_checked_fixture(t, setup, teardown);
    ADD_TESTS(t, test_write_and_read, test_refusals, test_meta_readers, test_check_bound);
    suite_add_tcase(s, t);
    return s;
}
