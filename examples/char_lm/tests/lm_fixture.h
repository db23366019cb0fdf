/* lm_fixture.h -- what the tests of char_lm's parts share (test_char_lm.c, test_trace.c): a
 * directory per TCase, made and removed by the unchecked fixture (in the parent process, so a
 * test that fails before its teardown leaves nothing behind); a directory per test under it,
 * with a made-up corpus; the error of the last char_lm call; paths in the test's directory;
 * a training run that must succeed; a command line split into argv.
 *
 * Beside proc.h (files, subprocesses), which it uses. Use, in a suite:
 *     static void root_setup(void) { fx_root_setup("ag_trace"); }
 *     static void setup(void) { fx_setup(&my_corpus); }
 *     TCase *tc = fx_tcase(s, "train", root_setup, setup);
 * Everything here fails the running test (ck_assert) on its own errors. */
#ifndef TESTS_LM_FIXTURE_H
#define TESTS_LM_FIXTURE_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "checkpoint.h"
#include "train.h"

extern char fx_dir[96];        /* this test's directory (fx_setup) */
extern char fx_corpus[128];    /* fx_dir/corpus.txt */
extern ag_error fx_cause;      /* why the last char_lm call failed */

/* fx_cause, cleared: each call gets its own (the first error would stick) */
ag_error *fx_fresh_cause(void);
/* fx_dir/name: proc_path (proc.h), 8 rotating buffers (a test may hold a few paths at once) */
const char *fx_in_dir(const char *name);

/* A made-up text: sentences of 3 to 3 + extra_words - 1 words drawn from `words` with a
 * generator seeded with seed, each ended by '.', then '\n' (one time in three) or ' ', until
 * at least `chars` characters. The same bytes on every machine. */
typedef struct {
    const char *const *words;
    int n_words;
    uint64_t seed;
    size_t chars;
    int extra_words;
    bool capitalize;   /* the first word of a sentence starts upper case */
} fx_corpus_spec;
void fx_write_corpus(const char *path, const fx_corpus_spec *spec);

/* The TCase's directory /tmp/<prefix>_XXXXXX, and its removal. */
void fx_root_setup(const char *prefix);
void fx_root_teardown(void);
/* A fresh fx_dir under it with fx_corpus written from spec, and its removal. */
void fx_setup(const fx_corpus_spec *spec);
void fx_teardown(void);
/* A TCase named name in s with both: root_setup (which calls fx_root_setup) and fx_root_teardown
 * unchecked, setup (which calls fx_setup) and fx_teardown checked; 600 s a test (training runs). */
TCase *fx_tcase(Suite *s, const char *name, SFun root_setup, SFun setup);

/* lm_train options: the data fx_corpus, the run in out, the config c; nothing else set. */
lm_train_opts fx_opts(const char *out, lm_config c);
/* lm_train(o) must succeed; r may be NULL */
void fx_train_ok(const lm_train_opts *o, lm_train_result *r);
/* A checkpoint of g (its config cfg, vocabulary v) at st saved into DIR as a train saves one:
 * lm_ckpt_format through the trainer's own save (ag_train_save: the check for a weight that is
 * not finite, the format's names and fault points); DIR/best too when st's evaluation is the
 * best. Returns the save's status. */
ag_status fx_ckpt_save(const char *dir, ag_gpt *g, const lm_config *cfg, const ag_vocab *v, const lm_train_state *st,
                       ag_error *err);
/* argv of "char_lm <line>" split at spaces (at most 32 words, in a static buffer); argc */
int fx_split_args(const char *line, char **argv);

#endif
