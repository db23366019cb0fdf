/* test_ckpt_compat.c -- a checkpoint written before the trainer moved into the library still
 * loads and resumes (issue 31).
 *
 * tests/fixtures/ckpt_d89a286 was written by char_lm as built at d89a286, before src/train:
 *   char_lm train --data text.txt --out run --config tiny --n-layer 1 --n-embd 16 --n-head 2
 *                 --block-size 8 --batch-size 4 --max-iters 4 --eval-interval 2 --eval-iters 1 --seed 7
 * (text.txt: the first 3000 bytes of data/tinyshakespeare.txt; loss.png and loss.gp left out).
 * Its latest is ckpt-00000004, its best ckpt-00000002. Resumed by that same build to
 * --max-iters 6 it printed "iter 6: train 3.9576 val 3.9409".
 *
 *   library  the library alone (train/train.h) reads both files of the live checkpoint into an
 *            ag_params of the same model: the weights hash to the model_hash its train state
 *            was saved with (every bit read back), and the moments are Adam's (v >= 0, not all 0)
 *   resume   char_lm train --resume on a copy: the evaluation at iteration 4 repeats the one
 *            saved with it, and iteration 6 reaches that build's losses
 *   unit     the library's checkpoint unit on its own: latest points and reads back, names
 *            that could leave the directory are refused, a removal takes only the listed files
 *   exists   ag_ckpt_exists: nothing, a latest, a ckpt-N, the older layout's file (only for a kind
 *            that has that layout) each make DIR hold a checkpoint
 *   kept     ag_ckpt_kept says what DIR keeps as latest and best name it: nothing, one, two
 *   mkdir_p  ag_mkdir_p makes the missing parents, and names a component that is a file */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

#define FIXTURE "tests/fixtures/ckpt_d89a286"
#define LIVE FIXTURE "/run/ckpt-00000004"

/* The fixture's model: MODEL.md's GPT at V=52, one layer, C=16, H=2, T=8. */
static ag_gpt *fixture_model(void)
{
    ag_gpt_config c = {.vocab_size = 52, .n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = 8};
    ag_error err = {0};
    ag_gpt *g = ag_gpt_new(&c, 1, &err);
    ck_assert_msg(g, "ag_gpt_new: %s", err.msg);
    return g;
}

START_TEST(test_library_reads_fixture)
{
    ag_gpt *g = fixture_model();
    ag_params *P = g->params;
    ag_error err = {0};
    ag_st_file *m = ag_st_load(LIVE "/model.safetensors", &err);
    ck_assert_msg(m, "%s", err.msg);
    ck_assert_str_eq(ag_st_meta_get(m, "format"), "char_lm-1");
    ck_assert_msg(ag_ckpt_read_weights(m, LIVE "/model.safetensors", P, &err) == AG_OK, "%s", err.msg);
    ag_st_file *t = ag_st_load(LIVE "/train_state.safetensors", &err);
    ck_assert_msg(t, "%s", err.msg);
    uint64_t want = 0;
    ck_assert(ag_hex64_parse(ag_st_meta_get(t, "model_hash"), &want));
    ck_assert_msg(ag_weights_hash(P) == want, "weights hash %016llx, saved with %016llx",
                  (unsigned long long)ag_weights_hash(P), (unsigned long long)want);
    ck_assert_msg(ag_ckpt_read_moments(t, LIVE "/train_state.safetensors", P, &err) == AG_OK, "%s", err.msg);
    double vsum = 0;
    for (size_t i = 0; i < P->total; i++) vsum += P->v[i];
    ck_assert_msg(vsum > 0, "the second moments read back all zero");
    /* a file of another model is refused, naming the tensor (the weights file as moments) */
    ck_assert_int_eq(ag_ckpt_read_moments(m, LIVE "/model.safetensors", P, &err), AG_ERR_FORMAT);
    ck_assert_msg(strstr(err.msg, "unexpected tensor 'tok_emb.weight'"), "%s", err.msg);
    ag_st_free(t);
    ag_st_free(m);
    ag_gpt_free(g);
}
END_TEST

/* The two losses of the line "iter N: train A val B" in out. */
static void eval_line(const char *out, int it, double *train, double *val)
{
    char key[32];
    snprintf(key, sizeof key, "iter %d: train ", it);
    const char *p = strstr(out, key);
    ck_assert_msg(p, "no line '%s' in:\n%s", key, out);
    ck_assert_int_eq(sscanf(p + strlen(key), "%lf val %lf", train, val), 2);
}

START_TEST(test_resume_fixture)
{
    char root[] = "/tmp/ag_ckpt_compat_XXXXXX";
    ck_assert(mkdtemp(root));
    proc_copy_tree(FIXTURE, root);
    const char *args[] = {"train", "--data", proc_path(root, "text.txt"), "--out", proc_path(root, "run"),
                          "--resume", "--max-iters", "6", NULL};
    proc_result r;
    proc_run(root, args, proc_path(root, "resume"), NULL, &r);
    ck_assert_msg(r.exited && r.code == 0, "resume: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(strstr(r.out, "resuming at iteration 4\n"), "%s", r.out);
    double tr, va;
    eval_line(r.out, 4, &tr, &va);   /* the weights read back: the saved evaluation again */
    ck_assert_msg(fabs(tr - 3.9594) < 1e-4 && fabs(va - 3.9560) < 1e-4, "iter 4: train %.4f val %.4f", tr, va);
    eval_line(r.out, 6, &tr, &va);   /* the moments and the sampler too: d89a286's next steps */
    ck_assert_msg(fabs(tr - 3.9576) < 1e-3 && fabs(va - 3.9409) < 1e-3, "iter 6: train %.4f val %.4f", tr, va);
    char *latest = proc_read_file(proc_path(root, "run/latest"), NULL);
    ck_assert_msg(latest && strcmp(latest, "ckpt-00000006\n") == 0, "latest: %s", latest ? latest : "(none)");
    free(latest);
    proc_result_free(&r);
    proc_remove_tree(root);
}
END_TEST

START_TEST(test_unit_pointer_and_remove)
{
    char root[] = "/tmp/ag_ckpt_unit_XXXXXX";
    ck_assert(mkdtemp(root));
    ag_error err = {0};
    char name[64];
    bool committed = false;
    ck_assert_int_eq(ag_ckpt_pointer(root, AG_CKPT_LATEST, name, &err), AG_ERR_IO);   /* none yet */
    ck_assert_msg(ag_ckpt_point(root, AG_CKPT_LATEST, "ckpt-00000012", &committed, &err) == AG_OK, "%s", err.msg);
    ck_assert(committed);
    ck_assert_int_eq(ag_ckpt_pointer(root, AG_CKPT_LATEST, name, &err), AG_OK);
    ck_assert_str_eq(name, "ckpt-00000012");
    ck_assert(ag_ckpt_name_ok("ckpt-00000012-b") && !ag_ckpt_name_ok("ckpt-00000012/..") && !ag_ckpt_name_ok("x"));
    proc_write_file(proc_path(root, AG_CKPT_BEST), "../../etc\n", 10);
    ck_assert_int_eq(ag_ckpt_pointer(root, AG_CKPT_BEST, name, &err), AG_ERR_FORMAT);
    proc_write_file(proc_path(root, AG_CKPT_BEST), "ckpt-00000012\0junk\n", 19);   /* a NUL: not one line */
    ck_assert_int_eq(ag_ckpt_pointer(root, AG_CKPT_BEST, name, &err), AG_ERR_FORMAT);
    const char *ck = proc_path(root, "ckpt-00000012");
    ck_assert_int_eq(mkdir(ck, 0755), 0);
    proc_write_file(proc_path(ck, "w.safetensors"), "x", 1);
    proc_write_file(proc_path(ck, "w.safetensors.tmp.77"), "x", 1);
    proc_write_file(proc_path(ck, "notes.txt"), "mine", 4);
    const char *files[] = {"w.safetensors", NULL};
    ag_ckpt_remove(root, "ckpt-00000012", files);
    struct stat sb;
    ck_assert_msg(stat(proc_path(ck, "notes.txt"), &sb) == 0, "the user's file went");
    ck_assert_msg(stat(proc_path(ck, "w.safetensors"), &sb) != 0, "a listed file stayed");
    ck_assert_msg(stat(proc_path(ck, "w.safetensors.tmp.77"), &sb) != 0, "its temporary file stayed");
    ck_assert_int_eq(unlink(proc_path(ck, "notes.txt")), 0);
    ag_ckpt_remove(root, "ckpt-00000012", files);   /* now empty: the directory goes */
    ck_assert_msg(stat(ck, &sb) != 0, "%s stayed", ck);
    proc_remove_tree(root);
}
END_TEST

START_TEST(test_unit_exists)
{
    char root[] = "/tmp/ag_ckpt_exists_XXXXXX";
    ck_assert(mkdtemp(root));
    static const char *const files[] = {"w.safetensors", "s.safetensors", NULL};
    const ag_ckpt_kind old = {.files = files, .legacy = true}, plain = {.files = files};
    ck_assert(!ag_ckpt_exists(root, &old) && !ag_ckpt_exists(proc_path(root, "none"), &old));
    proc_write_file(proc_path(root, "w.safetensors"), "x", 1);   /* the older layout */
    ck_assert(ag_ckpt_exists(root, &old) && !ag_ckpt_exists(root, &plain));
    ck_assert_int_eq(unlink(proc_path(root, "w.safetensors")), 0);
    ck_assert_int_eq(mkdir(proc_path(root, "ckpt-00000003"), 0755), 0);
    ck_assert(ag_ckpt_exists(root, &plain));
    ck_assert_int_eq(rmdir(proc_path(root, "ckpt-00000003")), 0);
    ck_assert(!ag_ckpt_exists(root, &plain));
    ck_assert_int_eq(symlink("nowhere", proc_path(root, AG_CKPT_LATEST)), 0);   /* a dangling latest counts */
    ck_assert(ag_ckpt_exists(root, &plain));
    proc_remove_tree(root);
}
END_TEST

START_TEST(test_unit_kept)
{
    char root[] = "/tmp/ag_ckpt_kept_XXXXXX", buf[512], want[512];
    ck_assert(mkdtemp(root));
    ag_error err = {0};
    bool committed;
    ag_ckpt_kept(root, buf, sizeof buf);
    ck_assert_str_eq(buf, "no checkpoint was saved");
    ck_assert(ag_ckpt_point(root, AG_CKPT_LATEST, "ckpt-00000020", &committed, &err) == AG_OK);
    ag_ckpt_kept(root, buf, sizeof buf);
    snprintf(want, sizeof want, "kept: %s/ckpt-00000020, the latest", root);
    ck_assert_str_eq(buf, want);
    ck_assert(ag_ckpt_point(root, AG_CKPT_BEST, "ckpt-00000020", &committed, &err) == AG_OK);
    ag_ckpt_kept(root, buf, sizeof buf);
    snprintf(want, sizeof want, "kept: %s/ckpt-00000020, the latest and the best", root);
    ck_assert_str_eq(buf, want);
    ck_assert(ag_ckpt_point(root, AG_CKPT_BEST, "ckpt-00000010", &committed, &err) == AG_OK);
    ag_ckpt_kept(root, buf, sizeof buf);
    snprintf(want, sizeof want, "kept: %s/ckpt-00000020, the latest, and %s/ckpt-00000010, the best", root, root);
    ck_assert_str_eq(buf, want);
    proc_remove_tree(root);
}
END_TEST

START_TEST(test_unit_mkdir_p)
{
    char root[] = "/tmp/ag_mkdir_p_XXXXXX";
    ck_assert(mkdtemp(root));
    ag_error err = {0};
    char deep[256];
    snprintf(deep, sizeof deep, "%s/a//b/c/", root);
    ck_assert_msg(ag_mkdir_p(deep, &err) == AG_OK, "%s", err.msg);
    struct stat sb;
    ck_assert(stat(proc_path(root, "a/b/c"), &sb) == 0 && S_ISDIR(sb.st_mode));
    ck_assert_msg(ag_mkdir_p(deep, &err) == AG_OK, "again: %s", err.msg);   /* there already: fine */
    proc_write_file(proc_path(root, "f"), "x", 1);
    snprintf(deep, sizeof deep, "%s/f/g", root);
    ck_assert_int_eq(ag_mkdir_p(deep, &err), AG_ERR_IO);
    ck_assert_msg(strstr(err.msg, "/f") && !strchr(err.msg, '\n'), "%s", err.msg);
    ck_assert_int_eq(ag_mkdir_p("", &err), AG_ERR_ARG);
    proc_remove_tree(root);
}
END_TEST

Suite *ckpt_compat_suite(void)
{
    Suite *s = suite_create("ckpt_compat");
    TCase *t = tcase_create("fixture");
    tcase_set_timeout(t, 120);
    ADD_TESTS(t, test_library_reads_fixture, test_resume_fixture);
    suite_add_tcase(s, t);
    TCase *u = tcase_create("unit");
    ADD_TESTS(u, test_unit_pointer_and_remove, test_unit_exists, test_unit_kept, test_unit_mkdir_p);
    suite_add_tcase(s, u);
    return s;
}
