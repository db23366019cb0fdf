/* lm_fixture.c -- the char_lm tests' shared fixture (lm_fixture.h). */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lm_fixture.h"
#include "proc.h"

char fx_dir[96];
char fx_corpus[128];
ag_error fx_cause;
static char root[64];

ag_error *fx_fresh_cause(void)
{
    ag_error_clear(&fx_cause);
    return &fx_cause;
}

const char *fx_in_dir(const char *name) { return proc_path(fx_dir, name); }

void fx_write_corpus(const char *path, const fx_corpus_spec *s)
{
    size_t longest = 0;   /* the longest word: room for the last sentence past s->chars */
    for (int i = 0; i < s->n_words; i++) longest = strlen(s->words[i]) > longest ? strlen(s->words[i]) : longest;
    char *buf = malloc(s->chars + (size_t)(3 + s->extra_words) * (longest + 1) + 2);
    ck_assert_ptr_nonnull(buf);
    size_t n = 0;
    ag_rng r;
    ag_rng_seed(&r, s->seed);
    while (n < s->chars) {
        int len = 3 + (int)ag_rng_below(&r, (uint64_t)s->extra_words);
        for (int i = 0; i < len; i++) {
            const char *w = s->words[ag_rng_below(&r, (uint64_t)s->n_words)];
            size_t wl = strlen(w);
            memcpy(buf + n, w, wl);
            if (i == 0 && s->capitalize) buf[n] = (char)(buf[n] - 'a' + 'A');
            n += wl;
            buf[n++] = i + 1 < len ? ' ' : '.';
        }
        buf[n++] = ag_rng_below(&r, 3) == 0 ? '\n' : ' ';
    }
    proc_write_file(path, buf, n);
    free(buf);
}

void fx_root_setup(const char *prefix)
{
    snprintf(root, sizeof root, "/tmp/%s_XXXXXX", prefix);
    ck_assert_ptr_nonnull(mkdtemp(root));
}

void fx_root_teardown(void) { proc_remove_tree(root); }

void fx_setup(const fx_corpus_spec *spec)
{
    snprintf(fx_dir, sizeof fx_dir, "%s/t_XXXXXX", root);
    ck_assert_ptr_nonnull(mkdtemp(fx_dir));
    snprintf(fx_corpus, sizeof fx_corpus, "%s/corpus.txt", fx_dir);
    fx_write_corpus(fx_corpus, spec);
}

void fx_teardown(void) { proc_remove_tree(fx_dir); }

TCase *fx_tcase(Suite *s, const char *name, SFun root_setup, SFun setup)
{
    TCase *tc = tcase_create(name);
    tcase_add_unchecked_fixture(tc, root_setup, fx_root_teardown);
    tcase_add_checked_fixture(tc, setup, fx_teardown);
    tcase_set_timeout(tc, 600);
    suite_add_tcase(s, tc);
    return tc;
}

lm_train_opts fx_opts(const char *out, lm_config c)
{
    lm_train_opts o;
    memset(&o, 0, sizeof o);   /* plot false: gnuplot is tested by hand (make run) */
    o.data_path = fx_corpus;
    o.out_dir = out;
    o.cfg = c;
    return o;
}

void fx_train_ok(const lm_train_opts *o, lm_train_result *r)
{
    lm_train_result mine;
    ag_status s = lm_train(o, r ? r : &mine, fx_fresh_cause());
    ck_assert_msg(s == AG_OK, "lm_train: %s: %s", ag_status_str(s), fx_cause.msg);
}

int fx_split_args(const char *line, char **argv)
{
    static char buf[1024];
    snprintf(buf, sizeof buf, "char_lm %s", line);
    int argc = 0;
    for (char *tok = strtok(buf, " "); tok && argc < 32; tok = strtok(NULL, " ")) argv[argc++] = tok;
    argv[argc] = NULL;
    return argc;
}

ag_status fx_ckpt_save(const char *dir, ag_gpt *g, const lm_config *cfg, const ag_vocab *v, const lm_train_state *st,
                       ag_error *err)
{
    lm_ckpt_user u = {.g = g, .cfg = cfg, .vocab = v, .data = *st};
    const ag_train_client c = {.name = "char_lm", .params = g->params, .user = &u, .format = &lm_ckpt_format};
    ag_train_state ts = {.step = st->iter, .rng = st->rng, .run_id = st->run_id, .prev_hash = st->prev_hash,
                         .best_step = st->best_iter, .best_loss = st->best_iter >= 0 ? st->best_loss : INFINITY,
                         .eval_step = st->has_eval ? st->iter : -1, .train_loss = st->eval_train,
                         .val_loss = st->eval_val};
    char name[64];   /* the trainer's own save: its rules, fault points and names */
    return ag_train_save(NULL, dir, &c, &ts, st->has_eval && st->best_iter == st->iter, false, name, err);
}
