/* test_memory.c -- what a run costs before it is paid (issue 35), in the library:
 *
 *   gpt_estimates   nn.h's ag_gpt_*_bytes part by part, against the tensors a step keeps, and
 *                   the estimate of char_lm's baby within 10% of the peak RSS it measured
 *   step_estimate_with_dropout  the estimate of a 10min-preset step, with and without its
 *                   dropout, within 3% of the arena the step takes
 *   cgroup_limit    train.h's ag_cgroup_bytes: the lowest memory limit on the cgroup's path, v2
 *                   and v1, one missing from a container's view skipped; ag_machine_bytes
 *   refusals        ag_check_memory, ag_check_checkpointable and a GPT's ag_gpt_check_train: AG_OK
 *                   within the limits, else AG_ERR_ARG with the figures (char_lm's messages)
 *   shards_choose   nn.h's ag_gpt_shards_choose: --shards past a pass's windows or the memory
 *                   refused, a default lowered to what fits, the notes that say so */
#include <check.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"

/* One training step's arena for b windows of m, in floats, from the tensors it keeps: per layer
 * the attention weights [b,H,T,T] and 22 [b,T,C] (18 of the forward, 4 kept for the backward),
 * 19 [b,T,C] and 3 [b,T,V] outside the layers (the backward's recycled gradients at their peak
 * included); a no-grad forward: 18 [b,T,C] per layer, 3 [b,T,C] and 2 [b,T,V]. */
static double step_floats(const ag_gpt_config *m, int b, bool train)
{
    double T = m->block_size, C = m->n_embd, H = m->n_head, V = m->vocab_size, L = m->n_layer;
    double btc = b * T * C, attn = b * H * T * T, btv = b * T * V;
    return train ? L * (22 * btc + attn) + 19 * btc + 3 * btv : L * (18 * btc + attn) + 3 * btc + 2 * btv;
}

/* What a training run holds, part by part: the program, the weights, their gradients and
 * Adam's moments, the run's ctx (shard 0's step or the evaluation's forward of the whole batch,
 * the larger), and per shard beyond the first its gradient buffer and its step's arena twice
 * (the first step's arena chunks stay in glibc's heap, up to AG_HEAP_KEPT), for the windows
 * ag_gpt_shards_pass gives it; times the ranks on this machine. */
START_TEST(gpt_estimates)
{
    /* char_lm's baby on tinyshakespeare's 65 characters: L 4, H 4, C 128, T 64 */
    const ag_gpt_config baby = {.vocab_size = 65, .n_layer = 4, .n_head = 4, .n_embd = 128, .block_size = 64};
    const ag_gpt_config *m = &baby;
    double s = sizeof(ag_real), P = (65.0 + 64) * 128 + 4 * (12.0 * 128 * 128 - 128);
    ck_assert(fabs(ag_gpt_min_params(m) - P) < 0.5);
    for (int b = 1; b <= 12; b++) {
        ck_assert(fabs(ag_gpt_step_bytes(m, b, true) - s * step_floats(m, b, true)) < 0.5);
        ck_assert(fabs(ag_gpt_step_bytes(m, b, false) - s * step_floats(m, b, false)) < 0.5);
        double arena = s * step_floats(m, b, true), kept = arena < AG_HEAP_KEPT ? arena : AG_HEAP_KEPT;
        ck_assert(fabs(ag_gpt_shard_bytes(m, b) - (s * P + arena + kept + AG_SHARD_SLACK)) < 0.5);
    }
    ck_assert(AG_HEAP_KEPT < s * step_floats(m, 12, true));   /* so the loop saw both sides of it */
    double fixed = AG_PROCESS_BYTES + 4 * s * P, eval = s * step_floats(m, 12, false);
    ck_assert(fabs(ag_gpt_train_bytes(m, 12, 1, 1) - (fixed + s * step_floats(m, 12, true))) < 0.5);
    /* 8 shards of 12 windows: 1, 2, 1, 2, ...; shard 0's one window weighs less than the evaluation */
    double eight = fixed + eval + 4 * ag_gpt_shard_bytes(m, 2) + 3 * ag_gpt_shard_bytes(m, 1);
    ck_assert(fabs(ag_gpt_train_bytes(m, 12, 8, 1) - eight) < 0.5);
    ck_assert(fabs(ag_gpt_train_bytes(m, 12, 8, 3) - 3 * eight) < 1.5);
    double three = ag_gpt_train_bytes(m, 12, 3, 1);
    ck_assert_int_eq(ag_gpt_shards_that_fit(m, 12, 8, 1, three), 3);
    ck_assert_int_eq(ag_gpt_shards_that_fit(m, 12, 8, 1, three - 1), 2);
    ck_assert_int_eq(ag_gpt_shards_that_fit(m, 12, 8, 1, 1), 1);
    ck_assert_int_eq(ag_gpt_shards_that_fit(m, 12, 8, 2, 2 * three), 3);
    /* README's Limits: the peak RSS of baby, 5 steps at --threads 2, in MiB at 1, 2, 4, 8 shards
     * (float build); the estimate stays within 10% of it */
    const double rss[4] = {71.5, 98.9, 143.2, 178.3};
    for (int k = 0; k < 4 && s == 4; k++) {
        double est = ag_gpt_train_bytes(m, 12, 1 << k, 1) / (1024.0 * 1024.0);
        ck_assert_msg(fabs(est / rss[k] - 1) < 0.10, "%d shards: %.1f MiB estimated, %.1f measured", 1 << k, est,
                      rss[k]);
    }
    char shape[AG_GPT_SHAPE_LEN];
    ck_assert_str_eq(ag_gpt_shape_str(m, 12, shape), "block_size 64 x n_layer 4 (n_head 4, n_embd 128, batch 12)");
}
END_TEST

/* The estimate against the arena a real step takes: two training steps (forward, backward) of
 * the 10min preset's shape at 6 windows, without dropout, with its 0.05 (the dropped
 * attention weights and each dropout site's output and mask, 40% more), and with its rope too
 * (q and k turned): the arena's high-water mark within 3% of ag_gpt_step_bytes each time */
START_TEST(step_estimate_with_dropout)
{
    enum { B = 6, T = 256 };
    static int ids[B * T], targets[B * T];
    for (int i = 0; i < B * T; i++) ids[i] = i % 65, targets[i] = i * 7 % 65;
    for (int k = 0; k < 3; k++) {
        const ag_gpt_config m = {.vocab_size = 65, .n_layer = 4, .n_head = 4, .n_embd = 96, .block_size = T,
                                 .dropout = k ? 0.05 : 0, .rope = k == 2};
        ag_gpt *g = ag_gpt_new(&m, 7, NULL);
        ag_ctx *ctx = ag_ctx_new();
        ck_assert(g && ctx);
        ag_ctx_set_recycle_grads(ctx, true);   /* as char_lm's step */
        for (int step = 0; step < 2; step++) {
            ag_ctx_reset(ctx);
            ag_tensor *loss = NULL;
            ag_gpt_forward(ctx, g, ids, targets, B, T, &(ag_forward_opts){.train = true, .seed = 3}, &loss);
            ck_assert_ptr_nonnull(loss);
            ck_assert_int_eq(ag_backward(ctx, loss), AG_OK);
        }
#ifndef AG_ARENA_DEBUG /* the sanitizer build poisons released gradient buffers instead of reusing them */
        double high = (double)ag_ctx_get_stats(ctx).arena_high_water, est = ag_gpt_step_bytes(&m, B, true);
        ck_assert_msg(fabs(est / high - 1) < 0.03, "dropout %g, rope %d: %.1f MiB estimated, %.1f the arena's "
                      "high-water mark", m.dropout, m.rope, est / 1048576, high / 1048576);
#endif
        ag_ctx_free(ctx);
        ag_gpt_free(g);
    }
}
END_TEST

/* writes text into dir/rel, making the directories on the way */
static void put(const char *dir, const char *rel, const char *text)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    proc_write_file(path, text, strlen(text));
}

/* Under a batch system or in a container: the memory a train may take is its cgroup's limit
 * where that is below the machine's (Slurm confines a job so; the machine's figure let such a job
 * reach the OOM killer). The lowest limit on the cgroup's path counts, v2 and v1, and one missing
 * from a container's view (its path is the host's) is skipped. */
START_TEST(cgroup_limit)
{
    char cg[] = "/tmp/ag_memory_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(cg));
    put(cg, "memory.max", "max\n");   /* v2 */
    put(cg, "job/memory.max", "4000000000\n");
    put(cg, "job/step/memory.max", "max\n");
    put(cg, "memory/memory.limit_in_bytes", "9223372036854771712\n");   /* v1: no limit */
    put(cg, "memory/x/memory.limit_in_bytes", "2000000000\n");
    ck_assert_double_eq(ag_cgroup_bytes(cg, "0::/job/step\n"), 4e9);
    ck_assert_double_eq(ag_cgroup_bytes(cg, "0::/\n"), 0);
    ck_assert_double_eq(ag_cgroup_bytes(cg, "9:name=systemd:/\n4:memory:/x/y/z\n1:cpu:/\n0::/\n"), 2e9);
    ck_assert_double_eq(ag_cgroup_bytes(cg, "5:cpu,memory:/x"), 2e9);
    ck_assert_double_eq(ag_cgroup_bytes(cg, "5:memoryless:/x\n6:cpu:/x\n"), 0);
    ck_assert_double_eq(ag_cgroup_bytes(cg, "4:memory:/x\n0::/job/step\n"), 2e9);   /* both: the lower */
    ck_assert_double_eq(ag_cgroup_bytes(cg, "4:memory:/process_api/abc\n"), 0);   /* none on its path */
    put(cg, "memory/memory.limit_in_bytes", "3000000000\n");   /* a container's own limit at its root */
    ck_assert_double_eq(ag_cgroup_bytes(cg, "4:memory:/process_api/abc\n"), 3e9);
    ck_assert_double_eq(ag_cgroup_bytes(cg, ""), 0);
    char what[64];
    double have = ag_machine_bytes(what);
    ck_assert(have > 0 && have <= (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE));
    ck_assert_msg(strstr(what, " GB"), "%s", what);
    proc_remove_tree(cg);
}
END_TEST

/* The refusals say the figures, in the words char_lm's users read; within the limits, AG_OK. */
START_TEST(refusals)
{
    char buf[24], room[64], want[256];
    ck_assert_str_eq(ag_bytes_str(2.5e9, buf), "2.5 GB");
    ck_assert_str_eq(ag_bytes_str(3.3e12, buf), "3.3 TB");
    ag_error err = {0};
    ck_assert_int_eq(ag_check_memory(1e6, "train", "a shape", &err), AG_OK);
    double have = ag_machine_bytes(room);
    ck_assert_int_eq(ag_check_memory(have * 2 + 1e12, "eval", "a shape", &err), AG_ERR_ARG);
    snprintf(want, sizeof want, "eval: a shape needs about %s of memory for one step, more than %s; refused before "
             "allocating", ag_bytes_str(have * 2 + 1e12, buf), room);
    ck_assert_str_eq(err.msg, want);
    ag_error_clear(&err);
    double most = (double)(AG_ST_MAX_FILE - AG_ST_MAX_HEADER) / 8;
    ck_assert_int_eq(ag_check_checkpointable(most, "train", "m", &err), AG_OK);
    ck_assert_int_eq(ag_check_checkpointable(most + 1, "train", "m", &err), AG_ERR_ARG);
    snprintf(want, sizeof want, "train: m has at least %.0f parameters; Adam's state (8 bytes each) would not fit "
             "the 4 GiB a checkpoint file holds (at most %.0f parameters); refused before training", most + 1, most);
    ck_assert_str_eq(err.msg, want);
    ag_error_clear(&err);   /* a GPT's run: its memory at one shard, named by its shape */
    ag_gpt_config g = {.vocab_size = 65, .block_size = 64, .n_layer = 2, .n_head = 2, .n_embd = 32};
    ck_assert_msg(ag_gpt_check_train(&g, 8, 1, "train", &err) == AG_OK, "%s", err.msg);
    g.n_layer = 4096, g.n_embd = 8192, g.n_head = 8;
    char shape[AG_GPT_SHAPE_LEN];
    snprintf(want, sizeof want, "train: %s needs about %s of memory for one step, more than %s; refused before "
             "allocating", ag_gpt_shape_str(&g, 8, shape), ag_bytes_str(ag_gpt_train_bytes(&g, 8, 1, 3), buf), room);
    ck_assert_int_eq(ag_gpt_check_train(&g, 8, 3, "train", &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, want);
}
END_TEST

/* The shards a run takes: asked ones kept or refused with the figures, the default lowered to
 * what fits, each lowering said in a note. */
START_TEST(shards_choose)
{
    const ag_gpt_config m = {.vocab_size = 65, .block_size = 64, .n_layer = 4, .n_head = 4, .n_embd = 128};
    ag_gpt_shards_ask a = {.batch = 16, .ranks = 2, .accum = 2, .local = 1, .asked = 5, .have = 1e15, .room = "R"};
    char note[256], need[24], want[512];
    int n = 0;
    ag_error err = {0};
    ck_assert_int_eq(ag_gpt_shards_choose(&m, &a, &n, note, sizeof note, &err), AG_ERR_ARG);   /* 16 / (2 x 2) = 4 */
    ck_assert_str_eq(err.msg, "--shards 5 is more than the 4 windows a step's pass has (--batch-size 16, 2 ranks x "
                              "--grad-accum 2)");
    a.asked = 4;
    ag_error_clear(&err);
    ck_assert_int_eq(ag_gpt_shards_choose(&m, &a, &n, note, sizeof note, &err), AG_OK);
    ck_assert_int_eq(n, 4);
    ck_assert_str_eq(note, "");
    a.have = ag_gpt_train_bytes(&m, 16, 2, 1) + 1;   /* room for 2 shards, not 4 */
    ag_error_clear(&err);
    ck_assert_int_eq(ag_gpt_shards_choose(&m, &a, &n, note, sizeof note, &err), AG_ERR_ARG);
    snprintf(want, sizeof want, "--shards 4: 4 shards need about %s of memory (each beyond the first keeps a gradient "
             "buffer of the model's size and an arena for its windows), more than R; at most 2 fit",
             ag_bytes_str(ag_gpt_train_bytes(&m, 16, 4, 1), need));
    ck_assert_str_eq(err.msg, want);
    int was = ag_threads();
    ag_threads_init(8);   /* the default: one per thread, at most the windows (1 a pass) */
    a = (ag_gpt_shards_ask){.batch = 1, .ranks = 1, .local = 1};
    ck_assert_int_eq(ag_gpt_shards_choose(&m, &a, &n, note, sizeof note, &err), AG_OK);
    snprintf(want, sizeof want, "shards: 1, not %d (one per thread): a pass has no more windows", ag_threads());
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(note, ag_threads() > 1 ? want : "");
    a = (ag_gpt_shards_ask){.batch = 64, .ranks = 1, .local = 1, .room = "R"};
    a.have = ag_gpt_train_bytes(&m, 64, 1, 1) + 1;
    int dflt = ag_gpt_shards_default(&m, 64);
    ck_assert_int_eq(ag_gpt_shards_choose(&m, &a, &n, note, sizeof note, &err), AG_OK);
    ck_assert_int_eq(n, 1);   /* lowered, with a note, when the default is more */
    snprintf(want, sizeof want, "shards: 1, not %d: %d would need about %s of memory, more than R", dflt, dflt,
             ag_bytes_str(ag_gpt_train_bytes(&m, 64, dflt, 1), need));
    ck_assert_msg(dflt == 1 ? !note[0] : strstr(note, want) != NULL, "note: %s", note);
    ag_threads_init(was);
}
END_TEST

Suite *memory_suite(void)
{
    Suite *s = suite_create("memory");
    TCase *tc = tcase_create("memory");
    tcase_add_test(tc, gpt_estimates);
    tcase_add_test(tc, step_estimate_with_dropout);
    tcase_add_test(tc, cgroup_limit);
    tcase_add_test(tc, refusals);
    tcase_add_test(tc, shards_choose);
    suite_add_tcase(s, tc);
    return s;
}
