/* test_char_lm.c -- the char_lm program's parts (examples/char_lm): the command-line table of
 * bad arguments (each one line, exit code 2), the config JSON round trip, the untrained loss,
 * a pinned fixed-seed `tiny` run, exact checkpoint round trips, --resume equal to the
 * uninterrupted run, --init-from, a non-finite loss that leaves the last checkpoint intact,
 * reproducible sampling and the hand-checkable token count of `eval`.
 *
 * Every test writes a small generated corpus into its own mkdtemp directory under /tmp and
 * removes it afterwards. Runs use the `tiny` shape with few steps and eval_iters 2, so the
 * whole suite takes a few seconds per build. */
#include <check.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint.h"
#include "cli.h"
#include "tools.h"
#include "train.h"
#include "lm_fixture.h"
#include "proc.h"
#include "tcases.h"

#ifdef AG_DOUBLE
#define RESUME_TOL 1e-5   /* checkpoints are F32: a resumed f64 run restarts from rounded weights */
#else
#define RESUME_TOL 0.0    /* float: bit-identical */
#endif

// ---------------------------------------------------------------------------------------------
// fixture: a directory per test with a corpus in it (lm_fixture.h)

/* About 4000 characters of made-up sentences from a fixed word list and a fixed seed, the
 * same on every machine: a learnable text with a 30-odd character vocabulary. */
static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to",
                                    "red", "barn", "where", "old", "king", "said", "good", "night", "my",
                                    "lord", "what", "is", "it", "you", "see", "there"};
static const fx_corpus_spec corpus = { words, (int)(sizeof words / sizeof words[0]), 42, 4000, 6, true };

static void root_setup(void) { fx_root_setup("ag_char_lm"); }
static void setup(void) { fx_setup(&corpus); }

// ---------------------------------------------------------------------------------------------
// helpers

/* The tiny configuration, shortened for tests. */
static lm_config tiny(long iters)
{
    lm_config c;
    ck_assert_int_eq(lm_config_preset(&c, "tiny"), AG_OK);
    c.max_iters = iters;
    c.lr_decay_iters = iters;
    c.warmup_iters = 5;
    c.eval_interval = 5;
    c.eval_iters = 2;
    return c;
}

// ---------------------------------------------------------------------------------------------
// command line

/* Every one of these must be refused before any work, with a one-line message that contains
 * the given text; main.c then prints "char_lm: error: <message>" and exits 2. */
static const struct {
    const char *args;
    const char *msg;
} bad_args[] = {
    {"", "no command"},
    {"fly", "unknown command 'fly'"},
    {"train", "--data is required"},
    {"train --data c.txt", "--out is required"},
    {"train --out d", "--data is required"},
    {"train --data c.txt --out d --bogus", "unknown flag '--bogus'"},
    {"train --data c.txt --out d extra", "unexpected argument 'extra'"},
    {"train --data c.txt --out d --lr", "--lr needs a value"},
    {"train --data c.txt --out d --lr abc", "--lr: not a finite number"},
    {"train --data c.txt --out d --lr 1e-3x", "--lr: not a finite number"},
    {"train --data c.txt --out d --lr nan", "--lr: not a finite number"},
    {"train --data c.txt --out d --lr inf", "--lr: not a finite number"},
    {"train --data c.txt --out d --lr -0.001", "--lr must be > 0"},
    {"train --data c.txt --out d --lr 0", "--lr must be > 0"},
    {"train --data c.txt --out d --min-lr -1e-4", "--min-lr must be >= 0"},
    {"train --data c.txt --out d --weight-decay -0.1", "--weight-decay must be >= 0"},
    {"train --data c.txt --out d --grad-clip -1", "--grad-clip must be >= 0"},
    {"train --data c.txt --out d --dropout 1", "--dropout must be in [0, 1)"},
    {"train --data c.txt --out d --beta1 1", "--beta1 must be in [0, 1)"},
    {"train --data c.txt --out d --beta2 -0.5", "--beta2 must be in [0, 1)"},
    {"train --data c.txt --out d --momentum 1.5", "--momentum must be in [0, 1)"},
    {"train --data c.txt --out d --val-fraction 1", "--val-fraction must be in [0, 1)"},
    {"train --data c.txt --out d --n-layer 0", "--n-layer must be in [1, 256]"},
    {"train --data c.txt --out d --n-layer 2.5", "--n-layer: not a whole number"},
    {"train --data c.txt --out d --n-layer 99999999999999999999", "--n-layer: not a whole number"},
    {"train --data c.txt --out d --n-head 3 --n-embd 64", "--n-head 3 does not divide --n-embd 64"},
    {"train --data c.txt --out d --n-embd 102", "--n-head 4 does not divide --n-embd 102"},
    {"train --data c.txt --out d --block-size -8", "--block-size must be in [1, 16384]"},
    {"train --data c.txt --out d --batch-size 0", "--batch-size must be in"},
    {"train --data c.txt --out d --max-iters -1", "--max-iters must be in"},
    {"train --data c.txt --out d --warmup-iters -5", "--warmup-iters must be in"},
    {"train --data c.txt --out d --eval-interval 0", "--eval-interval must be in"},
    {"train --data c.txt --out d --eval-iters 0", "--eval-iters must be in"},
    {"train --data c.txt --out d --seed -1", "--seed: not a whole number >= 0"},
    {"train --data c.txt --out d --seed 18446744073709551615", "--seed must be in"},
    {"train --data c.txt --out d --optimizer lion", "--optimizer must be "},
    {"train --data c.txt --out d --config huge", "--config must be tiny, baby, small, 1min, 5min, 10min or 20min"},
    {"train --data c.txt --out d --threads 0", "--threads must be in [1, 1024]"},
    {"train --data c.txt --out d --resume=yes", "--resume must be true or false (got 'yes')"},
    {"train --data c.txt --out d --resume --init-from e", "--resume and --init-from exclude each other"},
    {"train --data= --out d", "--data must not be empty"},
    {"sample", "--ckpt is required"},
    {"sample --ckpt d --temperature 0", "--temperature must be > 0"},
    {"sample --ckpt d --temperature -1", "--temperature must be > 0"},
    {"sample --ckpt d --top-k -1", "--top-k must be in"},
    {"sample --ckpt d --max-new-tokens x", "--max-new-tokens: not a whole number"},
    {"sample --ckpt d --data c.txt", "unknown flag '--data'"},
    {"eval --ckpt d", "--data is required"},
    {"eval --data c.txt", "--ckpt is required"},
    {"eval --ckpt d --data c.txt --top-k 3", "unknown flag '--top-k'"},
    /* the switches of issue 6 (test_switch_values.c checks that the message lists the values
     * of the switch's table, and nothing else) */
    {"train --data c.txt --out d --norm-position middle", "--norm-position must be "},
    {"train --data c.txt --out d --norm batchnorm", "--norm must be "},
    {"train --data c.txt --out d --mlp relu", "--mlp must be "},
    {"train --data c.txt --out d --init kaiming", "--init must be "},
    {"train --data c.txt --out d --mask-fill 0", "--mask-fill must be "},
    {"train --data c.txt --out d --mask-fill", "--mask-fill needs a value"},
    {"train --data c.txt --out d --no-scale=2", "--no-scale must be true or false (got '2')"},
    {"train --data c.txt --out d --detect-anomaly=yes", "--detect-anomaly must be true or false (got 'yes')"},
    {"train --data c.txt --out d --trace-only=on", "--trace-only must be true or false (got 'on')"},
    {"sample --ckpt d --trace-shapes=x", "--trace-shapes must be true or false (got 'x')"},
    {"train --data c.txt --out d --kernels fastest", "--kernels fastest: not a kernel table (reference or fast)"},
    {"eval --ckpt d --data c.txt --kernels", "--kernels needs a value"},
    {"attn", "--ckpt is required"},
    {"attn --ckpt d --out a.png", "--prompt is required"},
    {"attn --ckpt d --prompt ab", "--out is required"},
    {"attn --ckpt d --prompt ab --out a.jpg", "--out must end in .png"},
    {"attn --ckpt d --prompt ab --out a.png --layer -1", "--layer must be in"},
    {"attn --ckpt d --prompt ab --out a.png --head x", "--head: not a whole number"},
    {"attn --ckpt d --prompt ab --out a.png --top-k 3", "unknown flag '--top-k' for attn"},
};

START_TEST(test_cli_bad_args)
{
    const char *args = bad_args[_i].args, *want = bad_args[_i].msg;
    char *argv[34];
    int argc = fx_split_args(args, argv);
    lm_cli cli;
    ag_status s = lm_cli_parse(&cli, argc, argv, fx_fresh_cause());
    ck_assert_msg(s == AG_ERR_ARG, "'%s' was accepted", args);
    ck_assert_msg(strstr(fx_cause.msg, want) != NULL, "'%s': message '%s' lacks '%s'", args, fx_cause.msg, want);
    ck_assert_msg(strchr(fx_cause.msg, '\n') == NULL, "'%s': message is not one line", args);
}
END_TEST

START_TEST(test_cli_good_args)
{
    char *argv[34];
    lm_cli cli;
    int argc = fx_split_args("train --data c.txt --out d --config tiny --lr=3e-4 --max-iters 80 --resume", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(cli.cmd, LM_CMD_TRAIN);
    ck_assert_str_eq(cli.train.data, "c.txt");
    ck_assert_int_eq(cli.train.cfg.model.n_embd, 64);          /* from the preset */
    ck_assert_int_eq(cli.train.cfg.eval_interval, 100);        /* tiny's own default */
    ck_assert(cli.train.cfg.lr == 3e-4);
    ck_assert_int_eq(cli.train.cfg.lr_decay_iters, 80);        /* follows --max-iters */
    ck_assert(cli.train.resume && cli.train.config_given);
    ck_assert(cli.train.given[ag_field_by_key(lm_fields, LM_N_FIELDS, "lr") - lm_fields]);
    ck_assert(!cli.train.given[ag_field_by_key(lm_fields, LM_N_FIELDS, "n_embd") - lm_fields]);

    /* the default config is baby, and --config may come after the flags it is overridden by */
    argc = fx_split_args("train --n-layer 3 --data c.txt --out d --lr-decay-iters 500", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(cli.train.cfg.model.n_layer, 3);
    ck_assert_int_eq(cli.train.cfg.model.n_embd, 128);
    ck_assert_int_eq(cli.train.cfg.max_iters, 2000);
    ck_assert_int_eq(cli.train.cfg.lr_decay_iters, 500);
    ck_assert_int_eq(cli.train.cfg.eval_interval, 250);
    ck_assert_uint_eq(cli.train.cfg.seed, 1337);
    argc = fx_split_args("train --n-layer 3 --data c.txt --out d --config small", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(cli.train.cfg.model.n_layer, 3);
    ck_assert_int_eq(cli.train.cfg.model.n_embd, 384);

    argc = fx_split_args("sample --ckpt d --top-k 5 --temperature 0.8 --seed 9", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(cli.sample.top_k, 5);
    ck_assert(cli.sample.temperature == 0.8);
    ck_assert_uint_eq(cli.sample.seed, 9);
    ck_assert_int_eq(cli.sample.max_new_tokens, 500);

    /* --help wins, even next to a bad flag */
    argc = fx_split_args("train --bogus --help", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert(cli.help);
    ck_assert_int_eq(cli.cmd, LM_CMD_TRAIN);
    ck_assert_ptr_nonnull(strstr(lm_cli_usage(cli.cmd), "--n-embd"));
    argc = fx_split_args("--help", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert(cli.help && cli.cmd == LM_CMD_NONE);
}
END_TEST

START_TEST(test_config_json_roundtrip)
{
    lm_config a = tiny(123), b;
    a.model.vocab_size = 65;
    a.lr = 0.1;             /* not exact in binary: the JSON must still read back bit-equal */
    a.min_lr = 1.0 / 3.0;
    a.optimizer = AG_SGD;
    a.seed = 9007199254740993ull;   /* 2^53 + 1: not a double */
    char *js = ag_fields_to_json(&a, lm_fields, LM_N_FIELDS);
    ck_assert_ptr_nonnull(js);
    ck_assert_ptr_nonnull(strstr(js, "\"vocab_size\": 65"));
    ck_assert_ptr_nonnull(strstr(js, "\"optimizer\": \"sgd\""));
    ck_assert_ptr_nonnull(strstr(js, "\"dropout\": 0.0"));
    ck_assert_int_eq(lm_config_from_json(&b, js, fx_fresh_cause()), AG_OK);
    for (int i = 0; i < LM_N_FIELDS; i++)
        ck_assert_msg(ag_field_equal(&a, &b, &lm_fields[i]), "%s differs after the round trip", lm_fields[i].key);
    free(js);
    ck_assert_int_eq(lm_config_from_json(&b, "{\"n_layer\": 2}", fx_fresh_cause()), AG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(fx_cause.msg, "missing"));
    ck_assert_int_eq(lm_config_from_json(&b, "[1]", fx_fresh_cause()), AG_ERR_FORMAT);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the model before and after a few steps

START_TEST(test_untrained_loss_is_ln_v)
{
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(fx_corpus, &c, fx_fresh_cause()), AG_OK);
    lm_config cfg = tiny(0);
    cfg.model.vocab_size = c.vocab.V;
    ag_gpt *g = ag_gpt_new(&cfg.model, cfg.seed, NULL);
    ck_assert_ptr_nonnull(g);
    double loss;
    size_t tokens;
    ck_assert_int_eq(ag_gpt_eval_ids(g, c.ids, c.n, AG_CHARS_EVAL_BATCH, &loss, &tokens, fx_fresh_cause()), AG_OK);
    /* N(0, 0.02) weights make nearly uniform predictions: loss ~ ln V */
    ck_assert_msg(fabs(loss - log(c.vocab.V)) < 0.05, "untrained loss %f, ln V = %f", loss, log(c.vocab.V));
    ag_gpt_free(g);
    ag_corpus_free(&c);
}
END_TEST

/* The loss of step 9 of a fixed-seed tiny run (10 AdamW steps, warmup 5, lr 1e-3, batch 16,
 * block 32) on the generated corpus. A learner who changes an op, a layer or the optimizer and
 * still gets this number to 4 decimals has not changed the maths. It was computed once with
 * this code (float: OpenBLAS sgemm; -DAG_DOUBLE: dgemm); a different BLAS or CPU moves it by
 * ~1e-6, far inside the tolerance, while a wrong gradient or a missed term moves it by 1e-2 or
 * more (float and double agree to ~1e-8 here). To compare your own numbers: run
 * `CK_RUN_SUITE=char_lm ./build/test_lm_f32` (and test_lm_f64); a failure prints the loss you got. */
#ifdef AG_DOUBLE
#define PINNED_LOSS_9 3.05538224   /* f64: 3.055382242 when computed */
#define PINNED_TOL 1e-6
#else
#define PINNED_LOSS_9 3.0553823    /* f32: 3.055382252 when computed */
#define PINNED_TOL 1e-4
#endif

START_TEST(test_pinned_tiny_run)
{
    double losses[10] = {0};
    lm_train_opts o = fx_opts(fx_in_dir("run"), tiny(10));
    o.losses = losses;
    o.n_losses = 10;
    lm_train_result r;
    fx_train_ok(&o, &r);
    ck_assert_int_eq(r.iter, 10);
    ck_assert(!r.interrupted);
    ck_assert_msg(fabs(losses[9] - PINNED_LOSS_9) < PINNED_TOL, "%s: loss after 10 steps %.6f, pinned %.6f",
                  AG_REAL_NAME, losses[9], PINNED_LOSS_9);
    ck_assert(losses[9] < losses[0]);   /* and it learns */

    /* metrics.csv: the header, one row per step with the eval columns at 0, 5, and an eval row */
    FILE *fp = fopen(fx_in_dir("run/metrics.csv"), "r");
    ck_assert_ptr_nonnull(fp);
    char line[256];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, fp));
    ck_assert_str_eq(line, "iter,lr,loss,train_loss,val_loss,tokens_per_s\n");
    int rows = 0;
    while (fgets(line, sizeof line, fp)) {
        long it;
        double lr, loss, tl, vl;
        if (rows < 10) {
            int k = sscanf(line, "%ld,%lf,%lf,%lf,%lf", &it, &lr, &loss, &tl, &vl);
            ck_assert_int_eq(it, rows);
            ck_assert_msg(k == (rows % 5 == 0 ? 5 : 3), "row %d: %s", rows, line);
            ck_assert(fabs(loss - losses[rows]) < 1e-6);
        } else {
            ck_assert_int_eq(sscanf(line, "10,,,%lf,%lf,", &tl, &vl), 2);
            ck_assert(fabs(tl - r.train_loss) < 1e-6 && fabs(vl - r.val_loss) < 1e-6);
        }
        rows++;
    }
    fclose(fp);
    ck_assert_int_eq(rows, 11);
}
END_TEST

/* --adamw-lr-scale reaches Muon's update: one step (no warmup) at scales 1, 0.5 and 0.25 from
 * the same start. AdamW's first step is linear in its lr (decay and m/sqrt(v) alike), so tok_emb
 * lies on one line, w(s) = w0 + s D with D not 0; the hidden w_q moves the same at every scale. */
static void scaled_run(const char *name, double scale, lm_model *m)
{
    lm_config c = tiny(1);
    c.optimizer = AG_MUON, c.adamw_lr_scale = scale, c.warmup_iters = 0;
    lm_train_opts o = fx_opts(fx_in_dir(name), c);
    fx_train_ok(&o, NULL);
    ag_error err = {0};
    ck_assert_msg(lm_model_load_as(fx_in_dir(name), AG_CKPT_LATEST, m, &err) == AG_OK, "%s", err.msg);
}

START_TEST(test_adamw_lr_scale_run)
{
    lm_model m[3];
    scaled_run("s1", 1, &m[0]), scaled_run("s05", 0.5, &m[1]), scaled_run("s025", 0.25, &m[2]);
    const ag_tensor *e[3], *q[3];
    for (int k = 0; k < 3; k++) {
        e[k] = ag_params_find(m[k].g->params, "tok_emb.weight");
        q[k] = ag_params_find(m[k].g->params, "blocks.0.attn.w_q.weight");
        ck_assert(e[k] && q[k]);
    }
    double moved = 0;
    for (size_t i = 0; i < ag_numel(e[0]); i++) {
        double w1 = e[0]->data[i], w05 = e[1]->data[i], w0 = 2 * w05 - w1, d = w1 - w0;
        moved = fmax(moved, fabs(d));
        ck_assert_msg(fabs(e[2]->data[i] - (w0 + 0.25 * d)) < 1e-6, "tok_emb[%zu]", i);
    }
    ck_assert(moved > 1e-4);                                       /* the scale moved it */
    ck_assert(memcmp(q[0]->data, q[1]->data, ag_numel(q[0]) * sizeof(ag_real)) == 0 &&
              memcmp(q[0]->data, q[2]->data, ag_numel(q[0]) * sizeof(ag_real)) == 0);
    for (int k = 0; k < 3; k++) lm_model_free(&m[k]);
}
END_TEST

/* --lr-schedule linear reaches the loop: metrics.csv's rate falls in equal steps after the warmup
 * (the cosine's would not), and ends at --min-lr 0 */
START_TEST(test_linear_schedule_run)
{
    lm_config c = tiny(15);
    c.min_lr = 0;
    c.lr_schedule = AG_LR_LINEAR;
    lm_train_opts o = fx_opts(fx_in_dir("lin"), c);
    lm_train_result r;
    fx_train_ok(&o, &r);
    FILE *fp = fopen(fx_in_dir("lin/metrics.csv"), "r");
    ck_assert_ptr_nonnull(fp);
    char line[256];
    double lr[16] = {0};
    long it;
    ck_assert_ptr_nonnull(fgets(line, sizeof line, fp));   /* the header */
    for (int i = 0; i < 15; i++) {
        ck_assert_ptr_nonnull(fgets(line, sizeof line, fp));
        ck_assert_int_eq(sscanf(line, "%ld,%lf", &it, &lr[i]), 2);
        ck_assert_int_eq(it, i);
    }
    fclose(fp);
    double step = c.lr / 10;   /* 10 iterations from warmup 5 to 15: lr down by a tenth each */
    for (int i = 5; i < 15; i++)
        ck_assert_msg(fabs(lr[i] - (c.lr - (i - 5) * step)) <= 1e-6 * c.lr, "iter %d: lr %g", i, lr[i]);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// checkpoints

/* Fills buf [n] with values away from 0 and 1 so a swapped or dropped tensor shows. */
static void fill(ag_real *buf, size_t n, uint64_t seed)
{
    ag_rng r;
    ag_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) buf[i] = (ag_real)(ag_rng_normal(&r) * 0.3);
}

/* fx_dir's train_state.safetensors read into h: st's fields, and P's moments (at F32). */
static void assert_state_back(ag_gpt *h, const lm_train_state *st, const ag_params *P)
{
    lm_train_state s2;
    ck_assert_msg(lm_train_state_load(fx_dir, h, &s2, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    ck_assert_int_eq(s2.iter, st->iter);
    ck_assert_int_eq(s2.step, st->step);
    ck_assert(s2.rng.state == st->rng.state && s2.rng.inc == st->rng.inc);
    ck_assert(s2.n_tokens == st->n_tokens && s2.n_train == st->n_train && s2.n_val == st->n_val);
    ck_assert(s2.data_hash == st->data_hash);
    ck_assert(s2.has_eval && s2.eval_train == st->eval_train && s2.eval_val == st->eval_val);
    const ag_params *Q = h->params;
    for (size_t i = 0; i < P->total; i++)   /* an assertion only on a mismatch: each one is a write to check */
        if (Q->m[i] != (ag_real)(float)P->m[i] || Q->v[i] != (ag_real)(float)P->v[i])
            ck_abort_msg("Adam's moments differ at element %zu: m %g / %g, v %g / %g", i, (double)Q->m[i],
                         (double)P->m[i], (double)Q->v[i], (double)P->v[i]);
}

/* g and h give the same loss, bit for bit, on the first two windows of ids. */
static void assert_same_loss(ag_gpt *g, ag_gpt *h, const int *ids, int T)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *l1 = NULL, *l2 = NULL;
    ag_gpt_forward(ctx, g, ids, ids + 1, 2, T, NULL, &l1);
    double a = l1 ? (double)l1->data[0] : NAN;
    ag_ctx_reset(ctx);
    ag_gpt_forward(ctx, h, ids, ids + 1, 2, T, NULL, &l2);
    ck_assert_ptr_nonnull(l2);
    ck_assert_msg(a == (double)l2->data[0], "loss %.9g vs %.9g", a, (double)l2->data[0]);
    ag_ctx_free(ctx);
}

START_TEST(test_checkpoint_roundtrip)
{
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(fx_corpus, &c, fx_fresh_cause()), AG_OK);
    lm_config cfg = tiny(7);
    cfg.model.vocab_size = c.vocab.V;
    ag_gpt *g = ag_gpt_new(&cfg.model, cfg.seed, NULL);
    ck_assert_ptr_nonnull(g);
    ag_params *P = g->params;
    fill(P->data, P->total, 1);
    fill(P->m, P->total, 2);
    fill(P->v, P->total, 3);
    for (size_t i = 0; i < P->total; i++) P->v[i] *= P->v[i];
    lm_train_state st = {.iter = 7, .step = 7, .n_tokens = c.n, .n_train = c.n - 100, .n_val = 100,
                         .data_hash = ag_ids_hash(c.ids, c.n), .has_eval = true, .eval_train = 1.25,
                         .eval_val = 0.1};
    ag_rng_seed(&st.rng, 99);
    ag_rng_u32(&st.rng);
    ck_assert_int_eq(fx_ckpt_save(fx_dir, g, &cfg, &c.vocab, &st, fx_fresh_cause()), AG_OK);

    lm_model m;
    ck_assert_msg(lm_model_load_as(fx_dir, AG_CKPT_LATEST, &m, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    ck_assert_int_eq(m.iter, 7);
    ck_assert_int_eq(m.vocab.V, c.vocab.V);
    ck_assert_int_eq(memcmp(m.vocab.cp, c.vocab.cp, (size_t)c.vocab.V * sizeof *c.vocab.cp), 0);
    for (int i = 0; i < LM_N_FIELDS; i++)
        ck_assert_msg(ag_field_equal(&m.cfg, &cfg, &lm_fields[i]), "config %s", lm_fields[i].key);
    ag_params *Q = m.g->params;
    ck_assert_uint_eq(Q->total, P->total);
    for (int e = 0; e < P->n; e++) ck_assert_str_eq(Q->entries[e].t->name, P->entries[e].t->name);
    /* F32 on disk: exact in the float build, the float rounding in the double build */
    for (size_t i = 0; i < P->total; i++)
        if (Q->data[i] != (ag_real)(float)P->data[i]) ck_abort_msg("param %zu", i);

    assert_state_back(m.g, &st, P);
    for (size_t i = 0; i < P->total; i++) P->data[i] = (ag_real)(float)P->data[i];
    assert_same_loss(g, m.g, c.ids, cfg.model.block_size);   /* the same weights give the same loss */

    /* a model file with a tensor missing is refused with a message naming the file */
    lm_model_free(&m);
    ag_st_tensor one = {"tok_emb.weight", 2, {c.vocab.V, 64}, P->data};
    ag_st_meta meta[] = {{"format", "char_lm-1"}};
    char live[4096];
    ck_assert_int_eq(ag_ckpt_resolve(fx_dir, AG_CKPT_LATEST, &lm_ckpt_kind, live, sizeof live, NULL, 0, NULL), AG_OK);
    ck_assert_ptr_nonnull(strstr(live, "/ckpt-00000007"));
    snprintf(live + strlen(live), sizeof live - strlen(live), "/model.safetensors");
    ck_assert_int_eq(ag_st_save(live, &one, 1, meta, 1, NULL, NULL), AG_OK);
    ck_assert_int_ne(lm_model_load_as(fx_dir, AG_CKPT_LATEST, &m, fx_fresh_cause()), AG_OK);
    ck_assert_ptr_nonnull(strstr(fx_cause.msg, "model.safetensors"));
    ag_gpt_free(g);
    ag_corpus_free(&c);
}
END_TEST

/* 20 steps in one go == 10 steps, then --resume for 10 more: every loss, bit for bit (float). */
START_TEST(test_resume_equals_uninterrupted)
{
    double full[20] = {0}, parts[20] = {0};
    lm_config c = tiny(20);
    c.eval_interval = 4;     /* evaluations at other places than the split point: no influence */
    c.model.dropout = 0.1;   /* dropout masks must continue too */
    lm_train_opts o = fx_opts(fx_in_dir("full"), c);
    o.losses = full;
    o.n_losses = 20;
    lm_train_result r;
    fx_train_ok(&o, &r);

    lm_config c1 = c;
    c1.max_iters = 10;       /* same schedule (lr_decay_iters 20), stops at 10 */
    c1.eval_interval = 5;
    lm_train_opts o1 = fx_opts(fx_in_dir("parts"), c1);
    o1.losses = parts;
    o1.n_losses = 20;
    fx_train_ok(&o1, &r);
    ck_assert_int_eq(r.iter, 10);

    bool given[LM_N_FIELDS] = {0};
    given[ag_field_by_key(lm_fields, LM_N_FIELDS, "max_iters") - lm_fields] = true;
    lm_config c2 = c;        /* only max_iters counts: the rest comes from the checkpoint */
    c2.lr = 99;
    lm_train_opts o2 = fx_opts(fx_in_dir("parts"), c2);
    o2.resume = true;
    o2.given = given;
    o2.losses = parts;
    o2.n_losses = 20;
    fx_train_ok(&o2, &r);
    ck_assert_int_eq(r.iter, 20);
    for (int i = 0; i < 20; i++)
        ck_assert_msg(fabs(full[i] - parts[i]) <= RESUME_TOL * fabs(full[i]), "step %d: %.9g vs %.9g", i,
                      full[i], parts[i]);

    /* metrics.csv of the resumed run: rows 0..19 and the final eval row, nothing twice */
    FILE *fp = fopen(fx_in_dir("parts/metrics.csv"), "r");
    ck_assert_ptr_nonnull(fp);
    char line[256];
    int rows = -1;
    while (fgets(line, sizeof line, fp)) {
        if (rows >= 0) ck_assert_int_eq(atol(line), rows);
        rows++;
    }
    fclose(fp);
    ck_assert_int_eq(rows, 21);

    /* again at the end: nothing to do, nothing changed */
    fx_train_ok(&o2, &r);
    ck_assert_int_eq(r.iter, 20);
}
END_TEST

START_TEST(test_resume_refuses_other_shape_or_data)
{
    lm_train_opts o = fx_opts(fx_in_dir("run"), tiny(5));
    lm_train_result r;
    fx_train_ok(&o, &r);

    bool given[LM_N_FIELDS] = {0};
    given[ag_field_by_key(lm_fields, LM_N_FIELDS, "n_embd") - lm_fields] = true;
    lm_config c = tiny(10);
    c.model.n_embd = 32;
    lm_train_opts o2 = fx_opts(fx_in_dir("run"), c);
    o2.resume = true;
    o2.given = given;
    ck_assert_int_eq(lm_train(&o2, &r, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "n_embd 64") && strstr(fx_cause.msg, "32"), "%s", fx_cause.msg);

    /* --config baby on a tiny checkpoint */
    lm_config b;
    lm_config_preset(&b, "baby");
    lm_train_opts o3 = fx_opts(fx_in_dir("run"), b);
    o3.resume = true;
    o3.config_given = true;
    ck_assert_int_eq(lm_train(&o3, &r, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(fx_cause.msg, "--config"));

    /* another text */
    char other[2048] = "";
    while (strlen(other) + 49 < sizeof other) strcat(other, "the cat sat on the mat. the dog ran to the barn.\n");
    proc_write_file(fx_in_dir("other.txt"), other, strlen(other));
    lm_train_opts o4 = fx_opts(fx_in_dir("run"), tiny(10));
    o4.resume = true;
    o4.data_path = fx_in_dir("other.txt");
    ck_assert_int_eq(lm_train(&o4, &r, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(fx_cause.msg, "--init-from"));

    /* nothing to resume */
    lm_train_opts o5 = fx_opts(fx_in_dir("none"), tiny(10));
    o5.resume = true;
    ck_assert_int_ne(lm_train(&o5, &r, fx_fresh_cause()), AG_OK);
    ck_assert_ptr_nonnull(strstr(fx_cause.msg, "--resume"));
}
END_TEST

START_TEST(test_init_from)
{
    lm_train_opts o = fx_opts(fx_in_dir("a"), tiny(5));
    lm_train_result r;
    fx_train_ok(&o, &r);
    lm_model a;
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("a"), AG_CKPT_LATEST, &a, fx_fresh_cause()), AG_OK);

    /* a text that uses part of the vocabulary; the new run keeps the old vocabulary */
    const char *text = "The cat sat on the mat. The dog ran to the barn. "
                       "My lord what is it you see there. Good night.\n";
    char big[4096] = "";
    while (strlen(big) + strlen(text) < sizeof big) strcat(big, text);
    proc_write_file(fx_in_dir("sub.txt"), big, strlen(big));
    lm_config c = tiny(0);   /* 0 steps: the checkpoint must hold a's weights */
    lm_train_opts o2 = fx_opts(fx_in_dir("b"), c);
    o2.init_from = fx_in_dir("a");
    o2.data_path = fx_in_dir("sub.txt");
    fx_train_ok(&o2, &r);
    lm_model b;
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("b"), AG_CKPT_LATEST, &b, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(b.vocab.V, a.vocab.V);
    ck_assert_int_eq(memcmp(a.g->params->data, b.g->params->data, a.g->params->total * sizeof(ag_real)), 0);
    lm_model_free(&b);
    lm_model_free(&a);

    /* a character the checkpoint has never seen */
    proc_write_file(fx_in_dir("new.txt"), big, strlen(big));
    FILE *fp = fopen(fx_in_dir("new.txt"), "ab");
    fputs("Zebra!", fp);
    fclose(fp);
    lm_train_opts o3 = fx_opts(fx_in_dir("c"), c);
    o3.init_from = fx_in_dir("a");
    o3.data_path = fx_in_dir("new.txt");
    ck_assert_int_eq(lm_train(&o3, &r, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "not in the vocabulary"), "%s", fx_cause.msg);
}
END_TEST

START_TEST(test_data_too_short)
{
    proc_write_file(fx_in_dir("short.txt"), "abcabcabcabc\n", 13);
    lm_train_opts o = fx_opts(fx_in_dir("run"), tiny(5));
    o.data_path = fx_in_dir("short.txt");
    lm_train_result r;
    ck_assert_int_eq(lm_train(&o, &r, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "block_size 32"), "%s", fx_cause.msg);
    o.data_path = fx_in_dir("missing.txt");
    ck_assert_int_eq(lm_train(&o, &r, fx_fresh_cause()), AG_ERR_IO);
}
END_TEST

/* A learning rate of 1e300 blows the weights up after one step; the next loss is not finite.
 * The run stops before the optimizer step, and the checkpoint of iteration 0 is still whole. */
START_TEST(test_nonfinite_stops_before_the_step)
{
    lm_config c = tiny(10);
    c.lr = 1e300;
    c.warmup_iters = 0;
    c.grad_clip = 0;
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    lm_train_result r;
    ag_status s = lm_train(&o, &r, fx_fresh_cause());
    ck_assert_int_eq(s, AG_ERR_NONFINITE);
    ck_assert_msg(strstr(fx_cause.msg, "iteration") && strstr(fx_cause.msg, "kept: ") &&
                  strstr(fx_cause.msg, "run/ckpt-00000000, the latest and the best"), "%s", fx_cause.msg);
    lm_model m;
    ck_assert_msg(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()) == AG_OK, "%s",
                  fx_cause.msg);
    ck_assert_int_eq(m.iter, 0);
    lm_model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// sampling and eval

static bool collect(int id, void *user)
{
    int **p = user;
    *(*p)++ = id;
    return true;
}

START_TEST(test_sampling_reproducible)
{
    lm_config c = tiny(5);
    c.model.block_size = 8;   /* 40 new tokens slide the window several times */
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    lm_train_result r;
    fx_train_ok(&o, &r);
    lm_model m;
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()), AG_OK);

    int a[40], b[40], d[40], e[40], *pa = a;
    ag_sample_opts so = {40, 1.0, 0, 7, NULL};
    ck_assert_int_eq(ag_chars_generate(m.g, &m.vocab, "The cat", &so, collect, &pa, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(pa - a, 40);
    int *pb = b;
    ck_assert_int_eq(ag_chars_generate(m.g, &m.vocab, "The cat", &so, collect, &pb, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0);
    so.seed = 8;
    int *pd = d;
    ck_assert_int_eq(ag_chars_generate(m.g, &m.vocab, "The cat", &so, collect, &pd, fx_fresh_cause()), AG_OK);
    ck_assert_int_ne(memcmp(a, d, sizeof a), 0);
    for (int i = 0; i < 40; i++) ck_assert(a[i] >= 0 && a[i] < m.vocab.V);

    /* greedy (top_k 1) through the cache == argmax of a full forward over the prompt */
    int prompt[5];
    size_t np = 0;
    int *ids = NULL;
    ck_assert_int_eq(ag_vocab_encode(&m.vocab, "p", "Good ", 5, &ids, &np, fx_fresh_cause()), AG_OK);
    memcpy(prompt, ids, sizeof prompt);
    free(ids);
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_grad(ctx, false);
    ag_tensor *logits = ag_gpt_forward(ctx, m.g, prompt, NULL, 1, 5, NULL, NULL);   // [1,5,V]
    ck_assert_ptr_nonnull(logits);
    const ag_real *last = logits->data + 4 * (size_t)m.vocab.V;
    int best = 0;
    for (int i = 1; i < m.vocab.V; i++)
        if (last[i] > last[best]) best = i;
    so.top_k = 1;
    so.max_new_tokens = 1;
    ck_assert_int_eq(ag_gpt_generate(m.g, prompt, 5, &so, NULL, NULL, NULL, e, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(e[0], best);
    ag_ctx_free(ctx);

    /* a prompt character outside the vocabulary: AG_ERR_ARG naming it */
    ck_assert_int_eq(ag_chars_generate(m.g, &m.vocab, "The é", &so, NULL, NULL, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "U+00E9"), "%s", fx_cause.msg);
    lm_model_free(&m);
}
END_TEST

/* eval on a 100-character text with block_size 8: windows at 0, 8, ..., 88 (each needs 9
 * characters: the last starts at 88 and ends at 96 <= 99), so 12 windows and 96 targets. With
 * lm_head all zero every prediction is uniform and the loss is exactly ln V. */
/* char_lm on either kernel table (src/tensor/kernel.h), end to end: train a few steps, sample
 * and eval with --kernels, and AG_KERNELS. The trace's line "kernels: X" is read from a ctx that
 * the run made, the table its ops call: proof that the flag reached the ops, which equal
 * losses would not be (the tables agree to rounding). A bad AG_KERNELS is one line, exit 2. */
#define A(...) ((const char *const[]){__VA_ARGS__, NULL})
static void run_on(const char *kernels, const char *const *args, const char *const *env, const char *expect)
{
    proc_opts o = { .no_wrap = true, .env = env };
    proc_result r;
    proc_run(fx_dir, args, fx_in_dir(kernels), &o, &r);
    ck_assert_msg(r.exited && r.code == 0, "%s: %s\n%s", kernels, proc_status_str(&r), r.err);
    ck_assert_msg(strstr(r.out, expect) != NULL, "%s: no '%s' in\n%s", kernels, expect, r.out);
    proc_result_free(&r);
}

START_TEST(test_both_kernel_tables)
{
    static const char *const tables[2] = { "reference", "fast" };
    for (int i = 0; i < 2; i++) {
        const char *k = tables[i], *out = fx_in_dir(k);
        char line[64];
#ifdef AG_REFERENCE
        snprintf(line, sizeof line, "kernels: reference (");   /* a REFERENCE=1 build has no fast table */
#else
        snprintf(line, sizeof line, "kernels: %s (", k);
#endif
        run_on(k, A("train", "--data", fx_corpus, "--out", out, "--config", "tiny", "--max-iters", "4",
                    "--eval-interval", "4", "--eval-iters", "1", "--kernels", k, "--trace-shapes"), NULL, line);
        run_on(k, A("sample", "--ckpt", out, "--max-new-tokens", "5", "--trace-shapes"),
               i == 0 ? A("AG_KERNELS=reference") : NULL, line);
        run_on(k, A("eval", "--ckpt", out, "--data", fx_corpus, "--kernels", k, "--trace-shapes"), NULL, line);
    }
    proc_opts o = { .no_wrap = true, .env = A("AG_KERNELS=quick") };
    proc_result r;
    proc_run(fx_dir, A("eval", "--ckpt", fx_in_dir("fast"), "--data", fx_corpus), fx_in_dir("bad"), &o, &r);
    ck_assert_msg(r.exited && r.code == 2, "AG_KERNELS=quick: %s", proc_status_str(&r));
    ck_assert_str_eq(r.err, "char_lm: error: AG_KERNELS=quick: not a kernel table (reference or fast)\n");
    proc_result_free(&r);
}
END_TEST

START_TEST(test_eval_counts_whole_windows)
{
    lm_config c = tiny(0);
    c.model.block_size = 8;
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    lm_train_result r;
    fx_train_ok(&o, &r);
    lm_model m;
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()), AG_OK);
    FILE *fp = fopen(fx_corpus, "rb");
    char text[101] = {0};
    ck_assert_uint_eq(fread(text, 1, 100, fp), 100);
    fclose(fp);
    proc_write_file(fx_in_dir("hundred.txt"), text, 100);

    double loss;
    size_t tokens;
    const char *hundred = fx_in_dir("hundred.txt");
    ck_assert_msg(ag_chars_eval_file(m.g, &m.vocab, hundred, &loss, &tokens, fx_fresh_cause()) == AG_OK, "%s",
                  fx_cause.msg);
    ck_assert_uint_eq(tokens, 96);
    ag_tensor *W = ag_params_find(m.g->params, "lm_head.weight"), *b = ag_params_find(m.g->params, "lm_head.bias");
    memset(W->data, 0, ag_numel(W) * sizeof(ag_real));
    memset(b->data, 0, ag_numel(b) * sizeof(ag_real));
    ck_assert_int_eq(ag_chars_eval_file(m.g, &m.vocab, fx_in_dir("hundred.txt"), &loss, &tokens, fx_fresh_cause()),
                     AG_OK);
    ck_assert_msg(fabs(loss - log(m.vocab.V)) < 1e-5, "loss %.7f, ln V %.7f", loss, log(m.vocab.V));

    /* 97 characters: still 12 windows (the last ends at 96); 96: only 11 */
    proc_write_file(fx_in_dir("n97.txt"), text, 97);
    ck_assert_int_eq(ag_chars_eval_file(m.g, &m.vocab, fx_in_dir("n97.txt"), &loss, &tokens, fx_fresh_cause()),
                     AG_OK);
    ck_assert_uint_eq(tokens, 96);
    proc_write_file(fx_in_dir("n96.txt"), text, 96);
    ck_assert_int_eq(ag_chars_eval_file(m.g, &m.vocab, fx_in_dir("n96.txt"), &loss, &tokens, fx_fresh_cause()),
                     AG_OK);
    ck_assert_uint_eq(tokens, 88);
    /* shorter than one window, or a character the model does not know */
    proc_write_file(fx_in_dir("n8.txt"), text, 8);
    ck_assert_int_eq(ag_chars_eval_file(m.g, &m.vocab, fx_in_dir("n8.txt"), &loss, &tokens, fx_fresh_cause()),
                     AG_ERR_ARG);
    proc_write_file(fx_in_dir("odd.txt"), "The cat sat on the mat, said the king; and the dog ran. #", 57);
    ck_assert_int_eq(ag_chars_eval_file(m.g, &m.vocab, fx_in_dir("odd.txt"), &loss, &tokens, fx_fresh_cause()),
                     AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "not in the vocabulary"), "%s", fx_cause.msg);
    lm_model_free(&m);
}
END_TEST

Suite *char_lm_suite(void)
{
    Suite *s = suite_create("char_lm");
    TCase *cli = tcase_create("cli");
    tcase_add_loop_test(cli, test_cli_bad_args, 0, (int)(sizeof bad_args / sizeof bad_args[0]));
    ADD_TESTS(cli, test_cli_good_args, test_config_json_roundtrip);
    suite_add_tcase(s, cli);

    TCase *run = fx_tcase(s, "train", root_setup, setup);
    ADD_TESTS(run, test_untrained_loss_is_ln_v, test_pinned_tiny_run, test_linear_schedule_run, test_adamw_lr_scale_run,
                   test_checkpoint_roundtrip, test_resume_equals_uninterrupted, test_resume_refuses_other_shape_or_data, test_init_from,
                   test_data_too_short, test_nonfinite_stops_before_the_step, test_both_kernel_tables);

    TCase *smp = fx_tcase(s, "sample_eval", root_setup, setup);
    ADD_TESTS(smp, test_sampling_reproducible, test_eval_counts_whole_windows);
    return s;
}
