/* test_ckpt_state.c -- a program's checkpoint of a weights file and a state file beside it
 * (train.h: ag_state_kind, ckpt_state.c; char_lm's two files are such), with a made-up program
 * "toy" whose own counts are n_all = n_fit + n_held.
 *
 *   back      ag_state_write, ag_state_read: the loop's state, the optimizer's t, the counts and
 *             the moments come back; the metadata's keys in their order, the optional ones only
 *             when there are some; prev_hash is the weights' hash; ag_state_origin
 *   identify  ag_state_identify: run, iteration, hashes, the best, the evaluation (the train
 *             loss without a validation split), the origin of an iteration-0 checkpoint; a pair
 *             of other tags or of two iterations refused
 *   refuse    another state tag, a count missing, rng_inc even, the program's check, losses that
 *             are not losses (a finite validation loss with no validation split), a best after
 *             the iteration, a weights file of another iteration, other weights */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

static char root[64];

static void setup(void)
{
    strcpy(root, "/tmp/ag_ckpt_state_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void) { proc_remove_tree(root); }

static const char *toy_check(const uint64_t *v) { return v[1] + v[2] != v[0] ? "n_fit + n_held != n_all" : NULL; }

static const char *const toy_keys[] = {"n_all", "n_fit", "n_held", NULL};
static const uint64_t toy_most[] = {1000, 1000, 1000};
static const ag_state_kind toy = {.program = "toy", .weights_file = "w.safetensors", .state_file = "s.safetensors",
                                  .weights_tag = "toy-1", .state_tag = "toy-train-1", .keys = toy_keys,
                                  .most = toy_most, .val_key = 2, .check = toy_check};

static ag_gpt *toy_model(void)
{
    ag_gpt_config c = {.vocab_size = 5, .n_layer = 1, .n_head = 2, .n_embd = 8, .block_size = 4};
    ag_gpt *g = ag_gpt_new(&c, 7, NULL);
    ck_assert_ptr_nonnull(g);
    for (size_t i = 0; i < g->params->total; i++) {
        g->params->m[i] = (ag_real)(0.01 * (double)(i % 13));
        g->params->v[i] = (ag_real)(0.001 * (double)(i % 7));
    }
    return g;
}

/* root/name/ := the weights file of iteration iter (run 0xabc) and the state file of st. */
static void save(const char *name, const ag_gpt *g, long iter, const ag_train_state *st, const uint64_t *v)
{
    char dir[256], it[32];
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    ck_assert_int_eq(ag_mkdir_p(dir, NULL), AG_OK);
    snprintf(it, sizeof it, "%ld", iter);
    const ag_st_meta meta[] = {{"format", "toy-1"}, {"iter", it}, {"run_id", "0000000000000abc"}};
    ag_error err = {0};
    ck_assert_msg(ag_ckpt_write_weights(proc_path(dir, "w.safetensors"), g->params, meta, 3, &err) == AG_OK, "%s",
                  err.msg);
    ck_assert_msg(ag_state_write(&toy, dir, g->params, st, st->step + 1, v, &err) == AG_OK, "%s", err.msg);
}

/* A state at step 6 evaluated there, its best at step 4, following a checkpoint of hash 0x77. */
static ag_train_state state6(void)
{
    return (ag_train_state){.step = 6, .rng = {.state = 12345, .inc = 777}, .run_id = 0xabc, .prev_hash = 0x77,
                            .eval_step = 6, .train_loss = 1.5, .val_loss = 1.75, .best_step = 4, .best_loss = 1.25};
}

START_TEST(test_back)
{
    ag_gpt *g = toy_model(), *h = toy_model();
    const uint64_t v[] = {100, 90, 10};
    ag_train_state st = state6(), back = {0};
    save("a", g, 6, &st, v);
    ag_st_file *f = ag_st_load(proc_path(root, "a/s.safetensors"), NULL);
    ck_assert_ptr_nonnull(f);
    const char *want[][2] = {{"format", "toy-train-1"}, {"iter", "6"}, {"step", "7"}, {"rng_state", "12345"},
                             {"rng_inc", "777"}, {"n_all", "100"}, {"n_fit", "90"}, {"n_held", "10"},
                             {"run_id", "0000000000000abc"}, {"eval_train_loss", "1.5"}, {"eval_val_loss", "1.75"},
                             {"best_iter", "4"}, {"best_loss", "1.25"}, {"follows", "0000000000000077"}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_str_eq(ag_st_meta_get(f, want[i][0]), want[i][1]);
    ag_st_free(f);
    long t = 0;
    uint64_t w[3] = {0};
    ag_error err = {0};
    memcpy(h->params->data, g->params->data, g->params->total * sizeof *g->params->data);
    memset(h->params->m, 0, h->params->total * sizeof *h->params->m);
    ck_assert_msg(ag_state_read(&toy, proc_path(root, "a"), h->params, &back, &t, w, &err) == AG_OK, "%s", err.msg);
    ck_assert(back.step == 6 && t == 7 && back.rng.state == 12345 && back.rng.inc == 777 && back.run_id == 0xabc);
    ck_assert(back.eval_step == 6 && back.train_loss == 1.5 && back.val_loss == 1.75);
    ck_assert(back.best_step == 4 && back.best_loss == 1.25 && w[0] == 100 && w[1] == 90 && w[2] == 10);
    ck_assert(back.prev_hash == ag_weights_hash(g->params));   /* the next save follows this one */
    const ag_params *P = g->params, *Q = h->params;
    for (size_t i = 0; i < P->total; i++)
        ck_assert(Q->m[i] == (ag_real)(float)P->m[i] && Q->v[i] == (ag_real)(float)P->v[i]);
    const ag_train_client c = {.params = g->params};
    ck_assert(ag_state_origin(&c, 99) == ag_weights_hash(g->params));
    ag_gpt_free(g);
    ag_gpt_free(h);
}
END_TEST

START_TEST(test_back_bare)
{
    ag_gpt *g = toy_model();
    const uint64_t v[] = {100, 100, 0};   /* no validation split */
    ag_train_state st = {.step = 3, .rng = {.state = 1, .inc = 3}, .run_id = 0xabc, .eval_step = -1, .best_step = -1},
                   back = {0};
    save("b", g, 3, &st, v);
    ag_st_file *f = ag_st_load(proc_path(root, "b/s.safetensors"), NULL);
    const char *none[] = {"eval_train_loss", "eval_val_loss", "best_iter", "best_loss", "follows"};
    for (int i = 0; i < 5; i++) ck_assert_ptr_null(ag_st_meta_get(f, none[i]));
    ag_st_free(f);
    long t;
    uint64_t w[3];
    ag_error err = {0};
    ck_assert_msg(ag_state_read(&toy, proc_path(root, "b"), g->params, &back, &t, w, &err) == AG_OK, "%s", err.msg);
    ck_assert(back.eval_step == -1 && isnan(back.train_loss) && isnan(back.val_loss));
    ck_assert(back.best_step == -1 && isinf(back.best_loss) && t == 4);
    st.eval_step = 3, st.train_loss = 2.5, st.val_loss = NAN;   /* evaluated: its train loss is the best */
    save("c", g, 3, &st, v);
    ck_assert_msg(ag_state_read(&toy, proc_path(root, "c"), g->params, &back, &t, w, &err) == AG_OK, "%s", err.msg);
    ck_assert(back.eval_step == 3 && back.best_step == 3 && back.best_loss == 2.5);
    ag_gpt_free(g);
}
END_TEST

START_TEST(test_identify)
{
    ag_gpt *g = toy_model();
    const uint64_t v[] = {100, 100, 0};
    ag_train_state st = state6();
    st.val_loss = NAN;
    save("a", g, 6, &st, v);
    ag_ckpt_id id;
    ag_error err = {0};
    ck_assert_msg(ag_state_identify(&toy, proc_path(root, "a"), &id, &err) == AG_OK, "%s", err.msg);
    ck_assert(id.run_id == 0xabc && id.iter == 6 && id.model_hash == ag_weights_hash(g->params));
    ck_assert(id.follows == 0x77 && id.best_iter == 4 && id.eval == 1.5 && id.origin == 0);
    st.step = 0, st.eval_step = -1, st.best_step = -1, st.prev_hash = 0;
    save("z", g, 0, &st, v);
    ck_assert_int_eq(ag_state_identify(&toy, proc_path(root, "z"), &id, &err), AG_OK);
    ck_assert(id.origin == ag_weights_hash(g->params) && isnan(id.eval) && id.best_iter == -1);
    save("b", g, 5, &st, v);   /* weights of iteration 5, a state of 0 */
    ck_assert_int_eq(ag_state_identify(&toy, proc_path(root, "b"), &id, &err), AG_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "b: its two files are not one checkpoint (iter, run_id)"), "%s", err.msg);
    ag_state_kind other = toy;
    other.weights_tag = "toy-2";
    ag_error_clear(&err);
    ck_assert_int_eq(ag_state_identify(&other, proc_path(root, "a"), &id, &err), AG_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "a: not a toy checkpoint (format tags)"), "%s", err.msg);
    ag_gpt_free(g);
}
END_TEST

/* ag_state_read of root/name with k fails with a message holding want. */
static void refused(const ag_state_kind *k, const char *name, ag_gpt *g, const char *want)
{
    ag_train_state back = {0};
    long t;
    uint64_t w[3];
    ag_error err = {0};
    ck_assert_int_eq(ag_state_read(k, proc_path(root, name), g->params, &back, &t, w, &err), AG_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, want), "'%s' lacks '%s'", err.msg, want);
}

START_TEST(test_refuse)
{
    ag_gpt *g = toy_model();
    const uint64_t v[] = {100, 90, 10}, odd[] = {100, 90, 11}, none[] = {100, 100, 0};
    ag_train_state st = state6();
    save("a", g, 6, &st, v);
    ag_state_kind other = toy;
    other.state_tag = "toy-train-2";
    refused(&other, "a", g, "s.safetensors: not a toy train state (metadata format toy-train-1, expected "
            "\"toy-train-2\")");
    const char *const more[] = {"n_all", "n_fit", "n_held", "n_more", NULL};
    const uint64_t more_most[] = {1000, 1000, 1000, 1000};   /* a bound for each key */
    other = toy, other.keys = more, other.most = more_most;
    refused(&other, "a", g, "s.safetensors: metadata has no \"n_more\"");
    save("b", g, 6, &st, odd);
    refused(&toy, "b", g, "s.safetensors: inconsistent metadata (n_fit + n_held != n_all)");
    save("c", g, 6, &st, none);
    refused(&toy, "c", g, "not valid losses (train '1.5', val '1.75', no validation split)");
    st.rng.inc = 778;
    save("d", g, 6, &st, v);
    refused(&toy, "d", g, "inconsistent metadata (rng_inc must be odd)");
    st = state6(), st.best_step = 7;
    save("e", g, 6, &st, v);
    refused(&toy, "e", g, "metadata best_iter and best_loss are not an iteration up to 6 and a loss");
    st = state6();
    save("f", g, 5, &st, v);
    refused(&toy, "f", g, "f holds w.safetensors of iteration 5 but s.safetensors of iteration 6: the two files are "
            "not one checkpoint");
    save("g", g, 6, &st, v);
    g->params->data[2] += 1;   /* other weights than those saved */
    refused(&toy, "g", g, "s.safetensors was saved with other weights than the w.safetensors it is read with");
    ag_gpt_free(g);
}
END_TEST

Suite *ckpt_state_suite(void)
{
    Suite *s = suite_create("ckpt_state");
    TCase *t = tcase_create("files");
    tcase_add_checked_fixture(t, setup, teardown);
    ADD_TESTS(t, test_back, test_back_bare, test_identify, test_refuse);
    suite_add_tcase(s, t);
    return s;
}
