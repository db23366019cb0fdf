/* test_trace.c -- looking inside a char_lm run (issue 6): --trace-shapes, `char_lm attn`,
 * --log-attn-stats, --detect-anomaly, the switches in the checkpoint config, and a Chinese
 * corpus that trains and samples valid UTF-8.
 *
 *   - --trace-only prints the trace of the training text's windows and writes nothing (the
 *     GPT's trace itself is the library's: tests/test_shape_trace.c);
 *   - ag_attn_stats on known rows (uniform: ln(t+1) and 1/(t+1); one-hot: 0 and 1);
 *   - --log-attn-stats adds two columns per layer to metrics.csv, filled at evaluations with
 *     finite values, entropies in [0, ln T];
 *   - `attn` writes a PNG, a .dat with the masked triangle blank (NaN) and rows that sum to 1,
 *     and refuses a bad layer, head, prompt or file name (skipped without gnuplot);
 *   - --detect-anomaly names the op, shape and layer of an Inf injected into a weight through
 *     lm_train_opts.before_step, and the checkpoint on disk stays the last good one; a model
 *     with a non-finite weight is never written;
 *   - the config JSON round trip with every switch set, an older JSON without them, the
 *     switches surviving a checkpoint, and --resume refusing to change one;
 *   - Chinese text (classical poems, UTF-8) trains a few steps and samples valid UTF-8 that
 *     uses only the vocabulary's characters, with and without the KV cache.
 * Runs are tiny (1-2 layers, a few steps); the suite takes a few seconds per build. */
#include <check.h>
#include <errno.h>
#include <sys/wait.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "tools.h"
#include "checkpoint.h"
#include "cli.h"
#include "train.h"
#include "lm_fixture.h"
#include "proc.h"
#include "tcases.h"

// ---------------------------------------------------------------------------------------------
// fixture: a directory per test with an English corpus (lm_fixture.h)

/* About 3000 characters of sentences made from a fixed word list and seed. */
static const char *const words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "red",
                                    "barn", "old", "king", "said", "good", "night", "my", "lord"};
static const fx_corpus_spec corpus = { words, (int)(sizeof words / sizeof words[0]), 7, 3000, 5, false };

static void root_setup(void) { fx_root_setup("ag_trace"); }
static void setup(void) { fx_setup(&corpus); }

/* A small run: tiny's shape, block_size 16, few steps, quick evaluations. */
static lm_config small(long iters)
{
    lm_config c;
    ck_assert_int_eq(lm_config_preset(&c, "tiny"), AG_OK);
    c.model.block_size = 16;
    c.batch_size = 4;
    c.max_iters = iters;
    c.lr_decay_iters = iters;
    c.warmup_iters = 2;
    c.eval_interval = 3;
    c.eval_iters = 1;
    return c;
}

static bool has_gnuplot(void)
{
    return system("command -v gnuplot >/dev/null 2>&1") == 0;
}

// ---------------------------------------------------------------------------------------------
// --trace-shapes

/* Asserts that text holds every one of the n strings of want */
static void assert_holds(const char *text, const char *const *want, size_t n)
{
    for (size_t i = 0; i < n; i++) ck_assert_msg(strstr(text, want[i]) != NULL, "the trace lacks \"%s\"", want[i]);
}

START_TEST(test_trace_only_writes_nothing)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    lm_config c = small(5);
    c.model.mlp = AG_MLP_SWIGLU;
    c.model.norm = AG_RMSNORM;
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    o.trace = out;
    o.trace_only = true;
    fx_train_ok(&o, NULL);
    fclose(out);
    struct stat sb;
    ck_assert_int_ne(stat(fx_in_dir("run"), &sb), 0);   /* not even the directory */
    const char *want[] = { "from the training text", "rmsnorm       blocks.0 ", "ln1.weight[C] -> [B,T,C]",
                           "silu          blocks.0.mlp   [B,T,F] -> [B,T,F]", "w_gate.weight[F,C]", "F=171" };
    assert_holds(text, want, sizeof want / sizeof want[0]);
    free(text);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// attention statistics

START_TEST(test_attn_stats_known_rows)
{
    enum { T = 4 };
    ag_real A[2][T * T] = { { 0 } };   /* [B=1, H=2, T, T]: head 0 uniform, head 1 one-hot */
    for (int t = 0; t < T; t++)
        for (int j = 0; j <= t; j++) {
            A[0][t * T + j] = (ag_real)(1.0 / (t + 1));
            A[1][t * T + j] = j == 0 ? 1 : 0;
        }
    double e, p;
    ag_attn_stats(A[0], 1, 1, T, &e, &p);
    ck_assert_double_eq_tol(e, (log(2.0) + log(3.0) + log(4.0)) / 3, 1e-6);
    ck_assert_double_eq_tol(p, (1.0 / 2 + 1.0 / 3 + 1.0 / 4) / 3, 1e-6);
    ag_attn_stats(A[1], 1, 1, T, &e, &p);
    ck_assert_double_eq_tol(e, 0, 1e-12);
    ck_assert_double_eq_tol(p, 1, 1e-12);
    ag_attn_stats(&A[0][0], 1, 2, T, &e, &p);   /* both heads: the mean */
    ck_assert_double_eq_tol(e, (log(2.0) + log(3.0) + log(4.0)) / 6, 1e-6);
    ag_attn_stats(A[0], 1, 1, 1, &e, &p);       /* T = 1: row 0 only */
    ck_assert(e == 0 && p == 1);
}
END_TEST

START_TEST(test_log_attn_stats_columns)
{
    lm_config c = small(6);
    c.log_attn_stats = true;
    fx_train_ok(&(lm_train_opts){ .data_path = fx_corpus, .out_dir = fx_in_dir("run"), .cfg = c }, NULL);
    FILE *fp = fopen(fx_in_dir("run/metrics.csv"), "r");
    ck_assert_ptr_nonnull(fp);
    char line[1024];
    ck_assert_ptr_nonnull(fgets(line, sizeof line, fp));
    ck_assert_str_eq(line, "iter,lr,loss,train_loss,val_loss,tokens_per_s,attn_entropy_L0,attn_max_L0,"
                           "attn_entropy_L1,attn_max_L1\n");
    int rows = 0, with_stats = 0;
    while (fgets(line, sizeof line, fp)) {
        /* split at commas, keeping empty fields */
        char *f[16];
        int nf = 0;
        for (char *p = line; nf < 16;) {
            f[nf++] = p;
            char *comma = strchr(p, ',');
            if (!comma) break;
            *comma = '\0';
            p = comma + 1;
        }
        ck_assert_int_eq(nf, 10);
        long it = atol(f[0]);
        bool eval = it % 3 == 0;
        for (int k = 6; k < 10; k++) {
            bool empty = f[k][0] == '\0' || f[k][0] == '\n';
            ck_assert_msg(empty != eval, "row %ld column %d: '%s'", it, k, f[k]);
            if (!eval) continue;
            double v = atof(f[k]);
            ck_assert(isfinite(v));
            if (k % 2 == 0) ck_assert_msg(v >= 0 && v <= log(16.0), "entropy %g outside [0, ln T]", v);
            else ck_assert_msg(v > 0 && v <= 1, "peak weight %g", v);
        }
        with_stats += eval;
        rows++;
    }
    fclose(fp);
    ck_assert_int_eq(rows, 7);          /* steps 0..5 and the final evaluation row */
    ck_assert_int_eq(with_stats, 3);    /* the evaluations at 0, 3 and 6 */
}
END_TEST

// ---------------------------------------------------------------------------------------------
// char_lm attn

/* A tiny checkpoint in dir/run (0 steps: the weights as initialised). */
static void make_ckpt(lm_model *m)
{
    lm_config c = small(0);
    fx_train_ok(&(lm_train_opts){ .data_path = fx_corpus, .out_dir = fx_in_dir("run"), .cfg = c }, NULL);
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, m, fx_fresh_cause()), AG_OK);
}

/* loss.png during training: drawn in the background at each evaluation but the last, which is
 * drawn to the end; the run leaves a whole PNG and no gnuplot behind. */
START_TEST(test_loss_png_in_the_background)
{
    if (!has_gnuplot()) return;
    lm_config c = small(24);   /* evaluations at 0, 3, ..., 24: seven plots */
    FILE *warnings = tmpfile();
    ck_assert_ptr_nonnull(warnings);
    fx_train_ok(&(lm_train_opts){ .data_path = fx_corpus, .out_dir = fx_in_dir("plotted"), .cfg = c, .plot = true,
                               .warn = warnings }, NULL);
    ck_assert_int_eq(ftell(warnings), 0);   /* no "gnuplot failed" */
    fclose(warnings);
    FILE *fp = fopen(fx_in_dir("plotted/loss.png"), "rb");
    ck_assert_ptr_nonnull(fp);
    unsigned char sig[8];
    ck_assert_uint_eq(fread(sig, 1, 8, fp), 8);
    ck_assert(fseek(fp, 0, SEEK_END) == 0 && ftell(fp) > 1000);
    fclose(fp);
    ck_assert_int_eq(memcmp(sig, "\x89PNG\r\n\x1a\n", 8), 0);
    errno = 0;
    ck_assert_int_eq(waitpid(-1, NULL, WNOHANG), -1);   /* every gnuplot reaped */
    ck_assert_int_eq(errno, ECHILD);
}
END_TEST

START_TEST(test_attn_png)
{
    if (!has_gnuplot()) return;   /* the drawing needs gnuplot; the checks below do not */
    lm_model m;
    make_ckpt(&m);
    ck_assert_msg(ag_chars_attention(m.g, &m.vocab, "the cat sat", 1, 0, fx_in_dir("a.png"), NULL, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    FILE *fp = fopen(fx_in_dir("a.png"), "rb");
    ck_assert_ptr_nonnull(fp);
    unsigned char sig[8];
    ck_assert_uint_eq(fread(sig, 1, 8, fp), 8);
    fclose(fp);
    ck_assert_int_eq(memcmp(sig, "\x89PNG\r\n\x1a\n", 8), 0);
    /* the data: 11 rows of 11, NaN above the diagonal, rows summing to 1 */
    fp = fopen(fx_in_dir("a.dat"), "r");
    ck_assert_ptr_nonnull(fp);
    for (int i = 0; i < 11; i++) {
        double sum = 0;
        for (int j = 0; j < 11; j++) {
            char tok[32];
            ck_assert_int_eq(fscanf(fp, "%31s", tok), 1);
            if (j > i) ck_assert_str_eq(tok, "NaN");
            else sum += atof(tok);
        }
        ck_assert_double_eq_tol(sum, 1, 1e-4);
    }
    fclose(fp);
    /* the script labels the axes with the characters, the space made visible */
    fp = fopen(fx_in_dir("a.gp"), "r");
    char gp[8192] = "";
    ck_assert_uint_gt(fread(gp, 1, sizeof gp - 1, fp), 0);
    fclose(fp);
    ck_assert_msg(strstr(gp, "set xtics (\"t\" 0, \"h\" 1, \"e\" 2, \"\xe2\x90\xa3\" 3"), "%s", gp);

    /* every head of a layer: one panel each */
    ck_assert_msg(ag_chars_attention(m.g, &m.vocab, "a\nb", 0, -1, fx_in_dir("all.png"), NULL, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    ck_assert_int_eq(access(fx_in_dir("all.png"), F_OK), 0);
    lm_model_free(&m);
}
END_TEST

START_TEST(test_attn_rejects_bad_args)
{
    lm_model m;
    make_ckpt(&m);
    ck_assert_int_eq(ag_chars_attention(m.g, &m.vocab, "the cat", 2, 0, fx_in_dir("a.png"), NULL, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "--layer 2") && strstr(fx_cause.msg, "2 layers"), "%s", fx_cause.msg);
    ck_assert_int_eq(ag_chars_attention(m.g, &m.vocab, "the cat", 0, 2, fx_in_dir("a.png"), NULL, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "--head 2") && strstr(fx_cause.msg, "2 heads"), "%s", fx_cause.msg);
    ck_assert_int_eq(ag_chars_attention(m.g, &m.vocab, "the cat", -1, 0, fx_in_dir("a.png"), NULL, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_int_eq(ag_chars_attention(m.g, &m.vocab, "the cat sat on the mat", 0, 0, fx_in_dir("a.png"), NULL, fx_fresh_cause()),
                     AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "block_size 16"), "%s", fx_cause.msg);
    ck_assert_int_eq(ag_chars_attention(m.g, &m.vocab, "the Zebra", 0, 0, fx_in_dir("a.png"), NULL, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "not in the vocabulary"), "%s", fx_cause.msg);
    ck_assert_int_eq(ag_chars_attention(m.g, &m.vocab, "", 0, 0, fx_in_dir("a.png"), NULL, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_int_eq(ag_chars_attention(m.g, &m.vocab, "the", 0, 0, fx_in_dir("a.jpg"), NULL, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, ".png"), "%s", fx_cause.msg);
    ck_assert_ptr_null(strchr(fx_cause.msg, '\n'));
    ck_assert_int_ne(access(fx_in_dir("a.png"), F_OK), 0);   /* nothing drawn */
    lm_model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// --detect-anomaly and poisoned models

typedef struct {
    long at;
    const char *param;
} poison;

/* lm_train_opts.before_step: an Inf in one weight before step p->at */
static void inject_inf(long it, ag_gpt *g, void *user)
{
    const poison *p = user;
    if (it != p->at) return;
    ag_tensor *w = ag_params_find(g->params, p->param);
    ck_assert_ptr_nonnull(w);
    w->data[5] = (ag_real)INFINITY;
}

START_TEST(test_detect_anomaly_names_the_op)
{
    lm_config c = small(8);
    c.eval_interval = 4;
    c.detect_anomaly = true;
    poison p = { 2, "blocks.1.attn.w_q.weight" };
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    o.before_step = inject_inf;
    o.hook_user = &p;
    o.shards = 2;   /* the checks run in every shard's ctx: the op is named with its shard's shape */
    lm_train_result r;
    ck_assert_int_eq(lm_train(&o, &r, fx_fresh_cause()), AG_ERR_NONFINITE);
    ck_assert_msg(strstr(fx_cause.msg, "iteration 2") && strstr(fx_cause.msg, "non-finite output of linear [2,16,64] in blocks.1.attn") &&
                  strstr(fx_cause.msg, "kept: ") && strstr(fx_cause.msg, "run/ckpt-00000000, the latest and the best"),
                  "%s", fx_cause.msg);
    ck_assert_ptr_null(strchr(fx_cause.msg, '\n'));
    lm_model m;
    ck_assert_msg(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()) == AG_OK, "%s",
                  fx_cause.msg);
    ck_assert_int_eq(m.iter, 0);
    ck_assert(m.cfg.detect_anomaly);
    lm_model_free(&m);

    /* without the flag the same fault is caught later, at the loss, with no op named */
    c.detect_anomaly = false;
    lm_train_opts o2 = fx_opts(fx_in_dir("run2"), c);
    o2.before_step = inject_inf;
    o2.hook_user = &p;
    ck_assert_int_eq(lm_train(&o2, &r, fx_fresh_cause()), AG_ERR_NONFINITE);
    ck_assert_msg(strstr(fx_cause.msg, "the loss is") && !strstr(fx_cause.msg, "linear"), "%s", fx_cause.msg);
}
END_TEST

/* A learning rate of 1e308 with no clipping: the AdamW step itself writes Inf; with
 * --detect-anomaly the run names the parameter right after the step. */
START_TEST(test_detect_anomaly_after_the_step)
{
    lm_config c = small(8);
    c.eval_interval = 1;     /* an evaluation (and a checkpoint) right after the bad step */
    c.lr = 1e308;            /* lr / (1 - beta1) overflows, in double too */
    c.warmup_iters = 0;
    c.grad_clip = 0;
    c.detect_anomaly = true;
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    lm_train_result r;
    ck_assert_int_eq(lm_train(&o, &r, fx_fresh_cause()), AG_ERR_NONFINITE);
    ck_assert_msg(strstr(fx_cause.msg, "iteration 0: the adamw step made") && strstr(fx_cause.msg, "non-finite"), "%s", fx_cause.msg);
    lm_model m;
    ck_assert_msg(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()) == AG_OK, "%s",
                  fx_cause.msg);
    ck_assert_int_eq(m.iter, 0);
    lm_model_free(&m);
}
END_TEST

START_TEST(test_poisoned_model_never_written)
{
    lm_model m;
    make_ckpt(&m);
    ag_tensor *w = ag_params_find(m.g->params, "lm_head.weight");
    w->data[3] = (ag_real)NAN;
    lm_train_state st = { .iter = 5, .step = 5, .n_tokens = 10, .n_train = 10 };
    ag_rng_seed(&st.rng, 1);
    ck_assert_int_eq(fx_ckpt_save(fx_in_dir("run"), m.g, &m.cfg, &m.vocab, &st, fx_fresh_cause()), AG_ERR_NONFINITE);
    ck_assert_msg(strstr(fx_cause.msg, "lm_head.weight") && strstr(fx_cause.msg, "not written"), "%s", fx_cause.msg);
    lm_model_free(&m);
    /* still the old one */
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(m.iter, 0);
    lm_train_state s2;
    ck_assert_int_eq(lm_train_state_load(fx_in_dir("run"), m.g, &s2, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(s2.iter, 0);
    lm_model_free(&m);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// the switches in the config, the CLI and the checkpoint

/* The rows of lm_fields that the switches added (issue 6 and after): each is a switch table's
 * row (AG_FIELD_ENUM, its values from src/nn/switches.h) or an on/off flag (AG_FIELD_BOOL), and may be
 * missing from an older checkpoint. The keys below come from here, so a new switch is covered
 * as it stands: for (f = NULL; (f = next_switch_row(f));). (The other optional rows, issue
 * 21's time_budget and budget_iters, are numbers: examples/char_lm/tests/test_budget.c.) */
static const ag_field *next_switch_row(const ag_field *f)
{
    for (f = f ? f + 1 : lm_fields; f < lm_fields + LM_N_FIELDS; f++)
        if (f->optional && f->type != AG_FIELD_DOUBLE && f->type != AG_FIELD_LONG) {
            ck_assert_msg((f->type == AG_FIELD_ENUM && f->sw) || f->type == AG_FIELD_BOOL, "%s: a switch row", f->key);
            return f;
        }
    return NULL;
}

/* The name a switch row stores in the JSON for value v ("post", "true") */
static const char *row_value(const ag_field *f, int v)
{
    return f->type == AG_FIELD_BOOL ? (v ? "true" : "false") : f->sw->names[v];
}

/* Every switch row away from its default: a table's last value, a flag on. */
static lm_config all_switches(void)
{
    lm_config c = small(2);
    c.model.vocab_size = 40;
    for (const ag_field *f = NULL; (f = next_switch_row(f));)
        ck_assert_int_eq(ag_field_parse(&c, f, row_value(f, f->type == AG_FIELD_BOOL ? 1 : f->sw->n - 1), NULL), AG_OK);
    return c;
}

/* Asserts that js holds "key": value for every switch row, its value in c */
static void assert_json_switches(const char *js, const lm_config *c)
{
    for (const ag_field *f = NULL; (f = next_switch_row(f));) {
        char want[128];
        const char *v = row_value(f, (int)ag_field_get(c, f));
        snprintf(want, sizeof want, f->type == AG_FIELD_BOOL ? "\"%s\": %s" : "\"%s\": \"%s\"", f->key, v);
        ck_assert_msg(strstr(js, want), "%s lacks %s", js, want);
    }
}

START_TEST(test_config_json_switches)
{
    lm_config a = all_switches(), b;
    ck_assert(a.model.norm_position == AG_POST_LN && a.model.mask_fill == AG_MASK_NEG_1E9 && a.log_attn_stats);
    char *js = ag_fields_to_json(&a, lm_fields, LM_N_FIELDS);
    ck_assert_ptr_nonnull(js);
    assert_json_switches(js, &a);
    ck_assert_ptr_nonnull(strstr(js, "\"optimizer\": \"adamw\""));
    ck_assert_int_eq(lm_config_from_json(&b, js, fx_fresh_cause()), AG_OK);
    for (int i = 0; i < LM_N_FIELDS; i++)
        ck_assert_msg(ag_field_equal(&a, &b, &lm_fields[i]), "%s differs after the round trip", lm_fields[i].key);
    free(js);

    /* the defaults as JSON, then without the switches' keys (a checkpoint from before them) */
    lm_config d = small(2);
    d.model.vocab_size = 40;
    js = ag_fields_to_json(&d, lm_fields, LM_N_FIELDS);
    assert_json_switches(js, &d);
    ck_assert_ptr_nonnull(strstr(js, "\"norm_position\": \"pre\", \"norm\": \"layernorm\""));
    for (const ag_field *f = NULL; (f = next_switch_row(f));) {   /* cut "key": value, */
        char pat[64];
        snprintf(pat, sizeof pat, ", \"%s\": ", f->key);
        char *p = strstr(js, pat);
        ck_assert_ptr_nonnull(p);
        char *q = strchr(p + 2, ',');
        if (!q) q = strchr(p, '}');
        memmove(p, q, strlen(q) + 1);
    }
    ck_assert_ptr_null(strstr(js, "norm"));
    a = all_switches();
    ck_assert_msg(lm_config_from_json(&a, js, fx_fresh_cause()) == AG_OK, "%s: %s", fx_cause.msg, js);
    for (int i = 0; i < LM_N_FIELDS; i++) ck_assert(ag_field_equal(&a, &d, &lm_fields[i]));
    free(js);

    /* a bad value */
    ck_assert_int_eq(lm_config_from_json(&b, "{\"norm\": \"batchnorm\"}", fx_fresh_cause()), AG_ERR_FORMAT);
    js = ag_fields_to_json(&d, lm_fields, LM_N_FIELDS);
    char *p = strstr(js, "\"gelu\"");
    memcpy(p, "\"relu\"", 6);
    ck_assert_int_eq(lm_config_from_json(&b, js, fx_fresh_cause()), AG_ERR_FORMAT);
    ck_assert_msg(strstr(fx_cause.msg, "\"mlp\""), "%s", fx_cause.msg);
    free(js);
}
END_TEST

START_TEST(test_cli_switches)
{
    char *argv[34];
    lm_cli cli;
    int argc = fx_split_args("train --data c --out d --norm-position post --norm=rmsnorm --mlp swiglu --init xavier "
                          "--no-scale --mask-fill -1e9 --no-embedding-decay --detect-anomaly --log-attn-stats --trace-only", argv);
    ck_assert_msg(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    const ag_gpt_config *m = &cli.train.cfg.model;
    ck_assert(m->norm_position == AG_POST_LN && m->norm == AG_RMSNORM && m->mlp == AG_MLP_SWIGLU &&
              m->init == AG_WEIGHTS_XAVIER && m->no_scale && m->mask_fill == AG_MASK_NEG_1E9 && m->no_embedding_decay);
    ck_assert(cli.train.cfg.detect_anomaly && cli.train.cfg.log_attn_stats);
    ck_assert(cli.train.trace.shapes && cli.train.trace.only);
    ck_assert(cli.train.given[ag_field_by_key(lm_fields, LM_N_FIELDS, "no_scale") - lm_fields]);
    argc = fx_split_args("train --data c --out d", argv);   /* the defaults: MODEL.md's */
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    m = &cli.train.cfg.model;
    ck_assert(m->norm_position == AG_PRE_LN && m->norm == AG_LAYERNORM && m->mlp == AG_MLP_GELU &&
              m->init == AG_WEIGHTS_NORMAL && !m->no_scale && m->mask_fill == AG_MASK_NEG_INF && !m->no_embedding_decay);
    ck_assert(!cli.train.trace.shapes);
    argc = fx_split_args("sample --ckpt d --trace-shapes", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert(cli.sample.trace.shapes && !cli.sample.trace.only);
    argc = fx_split_args("eval --ckpt d --data c --trace-only", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert(cli.eval.trace.shapes && cli.eval.trace.only);
    argc = fx_split_args("attn --ckpt d --prompt ab --layer 1 --head 0 --out x.png", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert(cli.cmd == LM_CMD_ATTN && cli.attn.layer == 1 && cli.attn.head == 0);
    ck_assert_str_eq(cli.attn.out, "x.png");
    argc = fx_split_args("attn --ckpt d --prompt ab --out x.png", argv);
    ck_assert_int_eq(lm_cli_parse(&cli, argc, argv, fx_fresh_cause()), AG_OK);
    ck_assert(cli.attn.layer == 0 && cli.attn.head == -1);
}
END_TEST

/* Every switch survives the checkpoint; eval and sample rebuild the same model; --resume may not
 * change a switch. */
START_TEST(test_switches_in_checkpoint)
{
    lm_config c = all_switches();
    c.log_attn_stats = false;
    c.detect_anomaly = false;
    double losses[2];
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    o.losses = losses;
    o.n_losses = 2;
    fx_train_ok(&o, NULL);
    lm_model m;
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()), AG_OK);
    ck_assert(m.cfg.model.norm_position == AG_POST_LN && m.cfg.model.norm == AG_NORM_KIND_COUNT - 1 &&
              m.cfg.model.mlp == AG_MLP_SWIGLU && m.cfg.model.init == AG_WEIGHTS_XAVIER && m.cfg.model.no_scale &&
              m.cfg.model.mask_fill == AG_MASK_NEG_1E9);
    ck_assert_ptr_nonnull(ag_params_find(m.g->params, "blocks.1.mlp.w_down.weight"));
    ck_assert_ptr_null(ag_params_find(m.g->params, "ln_f.bias"));
    ck_assert(m.g->blocks[0].attn.scale == 1 && m.g->blocks[0].attn.mask_fill == (ag_real)-1e9);
    ck_assert(m.cfg.model.no_embedding_decay && !m.g->params->entries[0].decay && !m.g->params->entries[1].decay &&
              m.g->params->entries[2].decay == (m.g->params->entries[2].t->ndim == 2));   /* tok_emb, pos_emb, then a block's */
    double loss;
    size_t tokens;
    ck_assert_msg(ag_chars_eval_file(m.g, &m.vocab, fx_corpus, &loss, &tokens, fx_fresh_cause()) == AG_OK, "%s",
                  fx_cause.msg);
    ck_assert(isfinite(loss) && loss < log(m.vocab.V) + 1);
    lm_model_free(&m);

    bool given[LM_N_FIELDS] = { 0 };
    given[ag_field_by_key(lm_fields, LM_N_FIELDS, "norm_position") - lm_fields] = true;
    lm_config c2 = c;
    c2.max_iters = 4;
    c2.model.norm_position = AG_PRE_LN;
    lm_train_opts o2 = fx_opts(fx_in_dir("run"), c2);
    o2.resume = true;
    o2.given = given;
    lm_train_result r;
    ck_assert_int_eq(lm_train(&o2, &r, fx_fresh_cause()), AG_ERR_ARG);
    ck_assert_msg(strstr(fx_cause.msg, "--norm-position") && strstr(fx_cause.msg, "norm_position post") && strstr(fx_cause.msg, "asks for pre"),
                  "%s", fx_cause.msg);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// a Chinese corpus

static const char poems[] =
    "床前明月光，疑是地上霜。举头望明月，低头思故乡。\n"
    "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n"
    "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。\n"
    "红豆生南国，春来发几枝。愿君多采撷，此物最相思。\n";

static bool collect(int id, void *user)
{
    int **p = user;
    *(*p)++ = id;
    return true;
}

/* Samples 60 characters as UTF-8 bytes and as ids; checks both. */
static void check_sample(lm_model *m)
{
    int got[60], *pg = got;
    ag_sample_opts so = { 60, 1.0, 0, 3, NULL };
    ck_assert_msg(ag_chars_generate(m->g, &m->vocab, "床前", &so, collect, &pg, fx_fresh_cause()) == AG_OK, "%s",
                  fx_cause.msg);
    ck_assert_int_eq(pg - got, 60);
    char text[60 * 4 + 1];
    size_t n = 0;
    for (int i = 0; i < 60; i++) {
        ck_assert(got[i] >= 0 && got[i] < m->vocab.V);
        n += (size_t)ag_vocab_utf8(&m->vocab, got[i], text + n);
    }
    uint32_t *cps = NULL;
    size_t ncp = 0;
    ck_assert_msg(ag_utf8_decode("sample", text, n, &cps, &ncp, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    ck_assert_uint_eq(ncp, 60);
    for (size_t i = 0; i < ncp; i++) ck_assert_int_ge(ag_vocab_id(&m->vocab, cps[i]), 0);
    free(cps);
}

START_TEST(test_chinese_corpus)
{
    size_t len = strlen(poems);
    char *big = malloc(len * 12 + 1);
    for (int k = 0; k < 12; k++) memcpy(big + k * len, poems, len);
    proc_write_file(fx_corpus, big, len * 12);
    free(big);
    lm_config c = small(6);
    lm_train_opts o = fx_opts(fx_in_dir("run"), c);
    lm_train_result r;
    ck_assert_msg(lm_train(&o, &r, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    ck_assert_int_eq(r.vocab_size, 74);   /* 71 distinct hanzi, "，", "。" and the newline */
    lm_model m;
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("run"), AG_CKPT_LATEST, &m, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(m.vocab.cp[0], '\n');
    ck_assert_int_ge(ag_vocab_id(&m.vocab, 0x6708), 0);   /* 月 */
    check_sample(&m);                                  /* through the KV cache */
    lm_model_free(&m);

    c.model.norm_position = AG_POST_LN;                /* the cache runs Post-LN blocks too */
    lm_train_opts o2 = fx_opts(fx_in_dir("post"), c);
    ck_assert_msg(lm_train(&o2, &r, fx_fresh_cause()) == AG_OK, "%s", fx_cause.msg);
    ck_assert_int_eq(lm_model_load_as(fx_in_dir("post"), AG_CKPT_LATEST, &m, fx_fresh_cause()), AG_OK);
    check_sample(&m);

    /* greedy sampling through the cache = the argmax of a full forward over the prompt */
    int *ids = NULL;
    size_t np = 0;
    ck_assert_int_eq(ag_vocab_encode(&m.vocab, "p", "床前明月", strlen("床前明月"), &ids, &np, fx_fresh_cause()), AG_OK);
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_grad(ctx, false);
    ag_tensor *lg = ag_gpt_forward(ctx, m.g, ids, NULL, 1, (int)np, NULL, NULL);   // [1,4,V]
    ck_assert_ptr_nonnull(lg);
    const ag_real *last = lg->data + (np - 1) * (size_t)m.vocab.V;
    int best = 0, e[1];
    for (int i = 1; i < m.vocab.V; i++)
        if (last[i] > last[best]) best = i;
    ag_sample_opts so = { 1, 1.0, 1, 1, NULL };
    ck_assert_int_eq(ag_gpt_generate(m.g, ids, np, &so, NULL, NULL, NULL, e, fx_fresh_cause()), AG_OK);
    ck_assert_int_eq(e[0], best);
    ag_ctx_free(ctx);
    free(ids);
    lm_model_free(&m);
}
END_TEST

Suite *trace_suite(void)
{
    Suite *s = suite_create("trace");
    TCase *t = fx_tcase(s, "trace", root_setup, setup);
    ADD_TESTS(t, test_trace_only_writes_nothing, test_attn_stats_known_rows, test_log_attn_stats_columns, test_attn_png,
                 test_loss_png_in_the_background, test_attn_rejects_bad_args);

    TCase *a = fx_tcase(s, "anomaly", root_setup, setup);
    ADD_TESTS(a, test_detect_anomaly_names_the_op, test_detect_anomaly_after_the_step,
                 test_poisoned_model_never_written);

    TCase *c = fx_tcase(s, "config", root_setup, setup);
    ADD_TESTS(c, test_config_json_switches, test_cli_switches, test_switches_in_checkpoint,
                 test_chinese_corpus);
    return s;
}
