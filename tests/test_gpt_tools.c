/* test_gpt_tools.c -- the tools for a trained GPT, through the library's headers alone:
 *   - ag_sample_logits: top-k, the cumulative draw, a low temperature is greedy;
 *   - ag_gpt_generate: the same seed gives the same ids, another seed others; each token is drawn
 *     through the KV cache and its sliding window from the logits of a full forward over the same
 *     window, and top_k 1 takes their argmax; emit and the stop signal end it; bad options and
 *     ids are refused with one line;
 *   - ag_gpt_attn_record: every layer's rows sum to 1 (ag_attn_check), NaN weights are refused;
 *   - ag_gpt_attn_layer_stats: every layer's ag_attn_stats of those weights;
 *   - ag_gpt_step_flops: a step's FLOPs by its formula; ag_gpt_muon_flops: NS5's on the hidden
 *     matrices the model has; ag_gpt_probe: its steps train, or a bad
 *     config is refused with the model's error;
 *   - ag_attn_stats and ag_attn_head_summary on known rows (uniform, one-hot, patterns);
 *   - ag_plot_attention and ag_plot_attn_stats: the weights and scripts they write; ag_gpt_plot_attention:
 *     a GPT's recorded, its heads named, drawn;
 *   - ag_serve_gpt_attention: every head's rows, named with the names given;
 *   - ag_gpt_eval_ids: the mean over every whole window's targets, one forward each, the same
 *     whatever the batch; a text shorter than a window refused. */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

#define V 11
#define TB 8   /* block_size: 30 new tokens slide the window several times */

static ag_gpt *model(uint64_t seed)
{
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = TB };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, seed, &err);
    ck_assert_msg(g != NULL, "ag_gpt_new: %s", err.msg);
    return g;
}

START_TEST(sample_logits_draws)
{
    ag_real logits[4] = {1.0f, 3.0f, 2.0f, -1.0f};
    double scratch[8];
    ck_assert_int_eq(ag_sample_logits(logits, 4, 1.0, 1, 0.999, scratch), 1);   /* top-1 = argmax */
    ck_assert_int_eq(ag_sample_logits(logits, 4, 1.0, 2, 0.0, scratch), 1);     /* first kept */
    ck_assert_int_eq(ag_sample_logits(logits, 4, 1.0, 2, 0.99, scratch), 2);
    ck_assert_int_eq(ag_sample_logits(logits, 4, 1.0, 0, 0.0, scratch), 0);
    ck_assert_int_eq(ag_sample_logits(logits, 4, 1.0, 0, 0.9999999, scratch), 3);
    ck_assert_int_eq(ag_sample_logits(logits, 4, 1e-3, 0, 0.999999, scratch), 1);   /* cold: greedy */
}
END_TEST

typedef struct {
    int ids[64], n, stop_after;   /* stop_after > 0: emit refuses the token after that many */
    volatile sig_atomic_t *flag;  /* raised at the first token */
} collected;

static bool collect(int id, void *user)
{
    collected *c = user;
    if (c->flag) *c->flag = 1;
    if (c->stop_after && c->n == c->stop_after) return false;
    c->ids[c->n++] = id;
    return true;
}

static void generate(ag_gpt *g, const int *prompt, size_t n, ag_sample_opts o, collected *c)
{
    ag_error err = { 0 };
    int out[64];
    ck_assert_msg(ag_gpt_generate(g, prompt, n, &o, collect, NULL, c, out, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(c->n, (int)o.max_new_tokens);
    for (int i = 0; i < c->n; i++) ck_assert(c->ids[i] == out[i] && out[i] >= 0 && out[i] < V);
}

START_TEST(generate_same_seed_same_ids)
{
    ag_gpt *g = model(3);
    int prompt[3] = {1, 2, 3};
    collected a = {0}, b = {0}, d = {0};
    generate(g, prompt, 3, (ag_sample_opts){30, 1.0, 0, 7, NULL}, &a);
    generate(g, prompt, 3, (ag_sample_opts){30, 1.0, 0, 7, NULL}, &b);
    generate(g, prompt, 3, (ag_sample_opts){30, 1.0, 0, 8, NULL}, &d);
    ck_assert_int_eq(memcmp(a.ids, b.ids, sizeof a.ids), 0);
    ck_assert_int_ne(memcmp(a.ids, d.ids, sizeof a.ids), 0);
    ag_gpt_free(g);
}
END_TEST

#ifdef AG_DOUBLE
#define LOGIT_TOL 1e-9
#else
#define LOGIT_TOL 1e-4
#endif

typedef struct {
    ag_real logits[40][V];   /* what each new token was drawn from */
    int n;
} seen_all;

static void keep_logits(const ag_real *logits, int n, void *user)
{
    seen_all *s = user;
    ck_assert_int_eq(n, V);
    if (s->n < 40) memcpy(s->logits[s->n++], logits, sizeof s->logits[0]);
}

/* The logits of a full forward at the last of win [n] against got [V]. */
static void check_full_forward(ag_gpt *g, const int *win, int n, const ag_real *got, int k)
{
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_grad(ctx, false);
    ag_tensor *y = ag_gpt_forward(ctx, g, win, NULL, 1, n, NULL, NULL);   // [1,n,V]
    ck_assert_ptr_nonnull(y);
    for (int i = 0; i < V; i++) {
        double want = (double)y->data[(size_t)(n - 1) * V + i];
        ck_assert_msg(fabs((double)got[i] - want) < LOGIT_TOL, "token %d, logit %d: %g through the cache, %g by a "
                      "full forward over its %d-token window", k, i, (double)got[i], want, n);
    }
    ag_ctx_free(ctx);
}

/* Each token is drawn from the logits a full forward gives over the window the cache holds,
 * which slides by half a block (its last ceil(T/2) - 1 tokens kept) when full; with top_k 1 the
 * draw is their argmax. */
START_TEST(generate_through_the_sliding_window)
{
    ag_gpt *g = model(5);
    int prompt[3] = {4, 0, 9}, win[TB], wn = 3, keep = TB - TB / 2;
    for (int top_k = 0; top_k <= 1; top_k++) {
        seen_all *seen = calloc(1, sizeof *seen);
        int out[30];
        ag_sample_opts o = {30, 0.7, top_k, 1, NULL};
        ck_assert_int_eq(ag_gpt_generate(g, prompt, 3, &o, NULL, keep_logits, seen, out, NULL), AG_OK);
        ck_assert_int_eq(seen->n, 30);
        memcpy(win, prompt, sizeof prompt), wn = 3;
        for (int k = 0; k < 30; k++) {
            check_full_forward(g, win, wn, seen->logits[k], k);
            int best = 0;
            for (int i = 1; i < V; i++)
                if (seen->logits[k][i] > seen->logits[k][best]) best = i;
            if (top_k == 1) ck_assert_msg(out[k] == best, "top_k 1, token %d: %d, the argmax %d", k, out[k], best);
            if (wn == TB) memmove(win, win + wn - (keep - 1), (size_t)(keep - 1) * sizeof *win), wn = keep - 1;
            win[wn++] = out[k];
        }
        free(seen);
    }
    ag_gpt_free(g);
}
END_TEST

START_TEST(generate_stops_and_refuses)
{
    ag_gpt *g = model(2);
    int prompt[2] = {1, 2}, bad[2] = {1, V};
    ag_error err = { 0 };
    collected c = {.stop_after = 4};
    ag_sample_opts o = {20, 1.0, 0, 1, NULL};
    ck_assert_int_eq(ag_gpt_generate(g, prompt, 2, &o, collect, NULL, &c, NULL, &err), AG_ERR_IO);
    ck_assert_str_eq(err.msg, "sampling: stopped, the output cannot be written");
    ck_assert_int_eq(c.n, 4);
    volatile sig_atomic_t flag = 0;   /* raised while the first token is emitted: it is the last */
    collected s = {.flag = &flag};
    o.stop = &flag;
    ck_assert_int_eq(ag_gpt_generate(g, prompt, 2, &o, collect, NULL, &s, NULL, NULL), AG_OK);
    ck_assert_int_eq(s.n, 1);
    err = (ag_error){0};
    ck_assert_int_eq(ag_gpt_generate(g, bad, 2, &o, NULL, NULL, NULL, NULL, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "sampling: prompt token 11 at 1 is outside [0, 11)");
    err = (ag_error){0};
    o.temperature = 0;
    ck_assert_int_eq(ag_gpt_generate(g, prompt, 2, &o, NULL, NULL, NULL, NULL, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "sampling: need temperature > 0, top_k >= 0, max_new_tokens >= 0");
    o.temperature = 1;
    ck_assert_int_eq(ag_gpt_generate(g, prompt, 0, &o, NULL, NULL, NULL, NULL, NULL), AG_ERR_ARG);
    ag_gpt_free(g);
}
END_TEST

START_TEST(attention_rows_sum_to_one)
{
    ag_gpt *g = model(4);
    ag_ctx *ctx = ag_ctx_new();
    int ids[2 * 6] = {1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1};
    ag_tensor *A[2];
    ck_assert_int_eq(ag_gpt_attn_record(ctx, g, ids, 2, 6, A), AG_OK);
    ck_assert(ag_ctx_grad_enabled(ctx));   /* the ctx's mode as it was */
    for (int l = 0; l < 2; l++) {
        ck_assert(A[l]->shape[0] == 2 && A[l]->shape[1] == 2 && A[l]->shape[2] == 6 && A[l]->shape[3] == 6);
        for (size_t r = 0; r < 2 * 2 * 6; r++) {   // [B*H*T] rows of [T]
            int t = (int)(r % 6);
            double sum = 0;
            for (int j = 0; j < 6; j++) {
                double w = (double)A[l]->data[r * 6 + j];
                if (j > t) ck_assert(w == 0);   /* the masked future */
                sum += w;
            }
            ck_assert_msg(fabs(sum - 1) < 1e-5, "layer %d row %zu sums to %g", l, r, sum);
        }
        ck_assert_int_eq(ag_attn_check(A[l], l, "attn", NULL), AG_OK);
    }
    A[1]->data[3 * 6 + 1] = NAN;   /* batch 0, head 0, query 3 */
    ag_error err = { 0 };
    ck_assert_int_eq(ag_attn_check(A[1], 1, "test", &err), AG_ERR_NONFINITE);
    ck_assert_msg(strstr(err.msg, "test: the attention weights of layer 1, head 0, query 3 are not finite"), "%s", err.msg);
    ck_assert(ag_gpt_attn_bytes(&g->cfg, 64, 2) > ag_gpt_attn_bytes(&g->cfg, 32, 2));
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

/* a [T,T]: row t puts w on key(t) and spreads the rest over keys 0..t (row 0: all on itself) */
static void rows_on(ag_real *a, int T, double w, int (*key)(int))
{
    for (int t = 0; t < T; t++)
        for (int j = 0; j < T; j++)
            a[t * T + j] = (ag_real)(j > t ? 0 : (1 - w) / (t + 1) + (j == key(t) ? w : 0));
}
static int self(int t) { return t; }
static int prev(int t) { return t > 0 ? t - 1 : 0; }
static int first(int t) { (void)t; return 0; }

START_TEST(stats_of_known_rows)
{
    enum { T = 6 };
    ag_real a[T * T];
    double e, p, ue = 0, up = 0;
    rows_on(a, T, 0, self);   /* uniform */
    for (int t = 1; t < T; t++) ue += log(t + 1.0) / (T - 1), up += 1.0 / (t + 1) / (T - 1);
    ag_attn_stats(a, 1, 1, T, &e, &p);
    ck_assert(fabs(e - ue) < 1e-5 && fabs(p - up) < 1e-5);
    ag_attn_head h;
    ag_attn_head_summary(a, T, &h);
    ck_assert(h.pattern == AG_ATTN_UNIFORM && fabs(h.entropy - h.uniform) < 1e-5);
    rows_on(a, T, 1, self);   /* one-hot */
    ag_attn_stats(a, 1, 1, T, &e, &p);
    ck_assert(fabs(e) < 1e-6 && fabs(p - 1) < 1e-6);
    ag_attn_stats(a, 1, 1, 1, &e, &p);   /* T = 1: row 0 alone */
    ck_assert(e == 0 && p == 1);
    struct { int (*key)(int); ag_attn_pattern want; } cases[] = {
        {self, AG_ATTN_SELF}, {prev, AG_ATTN_PREVIOUS}, {first, AG_ATTN_FIRST}};
    for (int k = 0; k < 3; k++) {
        rows_on(a, T, 0.9, cases[k].key);
        ag_attn_head_summary(a, T, &h);
        ck_assert_msg(h.pattern == cases[k].want, "case %d: %s", k, ag_attn_pattern_names[h.pattern]);
    }
    ck_assert_str_eq(ag_attn_pattern_names[AG_ATTN_PREVIOUS], "previous token");
}
END_TEST

START_TEST(plots_write_weights_and_scripts)
{
    char root[] = "/tmp/ag_gpt_tools_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    enum { H = 2, T = 3 };
    ag_real A[H * T * T];
    for (int i = 0; i < H * T * T; i++) A[i] = (ag_real)(i % 7) / 8;
    const char *labels[T] = {"a", "\"q\"", "c"};
    ag_attn_picture p = {A, H, T, 4, 1, labels, "the title", "a test", "--png"};
    ag_error err = { 0 };
    ck_assert_int_eq(ag_plot_attention(proc_path(root, "m.jpg"), &p, &err), AG_ERR_ARG);
    ck_assert_str_eq(strstr(err.msg, "--png must end in .png"), err.msg);
    err = (ag_error){0};
    ag_status s = ag_plot_attention(proc_path(root, "m.png"), &p, &err);
    ck_assert_msg(s == AG_OK || s == AG_ERR_IO, "%s", err.msg);   /* AG_ERR_IO: no gnuplot here */
    char *dat = proc_read_file(proc_path(root, "m.dat"), NULL), *gp = proc_read_file(proc_path(root, "m.gp"), NULL);
    ck_assert(dat && gp);
    ck_assert_str_eq(dat, "0.250000 NaN NaN\n0.625000 0.750000 NaN\n0.125000 0.250000 0.375000\n");   /* head 1 */
    ck_assert_ptr_nonnull(strstr(gp, "# m.gp -- written by a test;"));
    ck_assert_ptr_nonnull(strstr(gp, "set xtics (\"a\" 0, \"\\\"q\\\"\" 1, \"c\" 2)"));
    ck_assert_ptr_nonnull(strstr(gp, "set title \"layer 4, head 1\""));
    free(dat), free(gp);
    s = ag_plot_attn_stats(root, 9, 2, 16, &err);
    ck_assert_msg(s == AG_OK || s == AG_ERR_IO, "%s", err.msg);
    gp = proc_read_file(proc_path(root, "attn.gp"), NULL);
    ck_assert_ptr_nonnull(gp);
    ck_assert(strstr(gp, "using 1:9 ") && strstr(gp, "using 1:11 ") && strstr(gp, "using 1:12 "));
    free(gp);
    proc_remove_tree(root);
}
END_TEST

/* ag_gpt_plot_attention: the heads of the layer named, the weights written where the picture goes
 * (gnuplot or not), a bad name refused with the command's words */
START_TEST(gpt_plot_attention_draws_and_names)
{
    char root[] = "/tmp/ag_gpt_tools_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    ag_gpt *g = model(4);
    int ids[5] = {1, 2, 3, 2, 1};
    const char *labels[5] = {"a", "b", "c", "b", "a"};
    ag_attn_head heads[2];
    memset(heads, 0xff, sizeof heads);   /* NaN and no pattern until named */
    ag_attn_picture p = {.T = 5, .layer = 1, .head = -1, .labels = labels, .title = "t", .by = "a test", .what = "--png"};
    ag_error err = {0};
    ag_status s = ag_gpt_plot_attention(g, ids, proc_path(root, "g.png"), &p, heads, "test", &err);
    ck_assert_msg(s == AG_OK || s == AG_ERR_IO, "%s", err.msg);   /* AG_ERR_IO: no gnuplot here */
    ck_assert(p.H == 2 && p.A != NULL);
    for (int h = 0; h < 2; h++)
        ck_assert((unsigned)heads[h].pattern <= AG_ATTN_MIXED &&
                  heads[h].entropy <= heads[h].uniform + 1e-9 && heads[h].peak > 0 && heads[h].peak <= 1 + 1e-9);
    char *dat = proc_read_file(proc_path(root, "g.dat"), NULL);
    ck_assert_ptr_nonnull(dat);
    ck_assert_ptr_nonnull(strstr(dat, "1.000000 NaN NaN NaN NaN\n"));   /* row 0 of head 0: itself */
    free(dat);
    err = (ag_error){0};
    ck_assert_int_eq(ag_gpt_plot_attention(g, ids, proc_path(root, "g.jpg"), &p, NULL, "test", &err), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "--png must end in .png"));
    ag_gpt_free(g);
    proc_remove_tree(root);
}
END_TEST

static void digit(const void *u, int id, char *out) { (void)u, snprintf(out, 16, "<%d>", id); }

START_TEST(serve_attention_names_heads)
{
    ag_gpt *g = model(6);
    int ids[4] = {3, 1, 4, 1};
    char why[128] = "";
    static const char *const names[] = {"U", "S", "P", "F", "M"};
    char *text = ag_serve_gpt_attention(g, 42, ids, 4, digit, NULL, names, why, sizeof why);
    ck_assert_msg(text != NULL, "%s", why);
    json_t *o = json_loads(text, 0, NULL);
    ck_assert_ptr_nonnull(o);
    ck_assert_int_eq(json_integer_value(json_object_get(o, "iter")), 42);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(o, "chars"), 2)), "<4>");
    json_t *layers = json_object_get(o, "layers");
    ck_assert_int_eq((int)json_array_size(layers), 2);
    for (size_t l = 0; l < 2; l++)
        for (size_t h = 0; h < 2; h++) {
            json_t *hd = json_array_get(json_array_get(layers, l), h), *rows = json_object_get(hd, "weights");
            ck_assert_int_eq((int)strlen(json_string_value(json_object_get(hd, "pattern"))), 1);
            for (size_t t = 0; t < 4; t++) {
                json_t *row = json_array_get(rows, t);
                double sum = 0;
                ck_assert_int_eq((int)json_array_size(row), (int)t + 1);
                for (size_t j = 0; j <= t; j++) sum += json_number_value(json_array_get(row, j));
                ck_assert(fabs(sum - 1) < 1e-4);
            }
        }
    json_decref(o);
    free(text);
    ag_gpt_free(g);
}
END_TEST

START_TEST(eval_ids_every_window_once)
{
    ag_gpt *g = model(7);
    int ids[3 * TB + 5];   /* 3 whole windows of TB + 1, the last 4 tokens in none */
    for (int i = 0; i < 3 * TB + 5; i++) ids[i] = (i * 7 + 3) % V;
    ag_error err = {0};
    double loss, by_one, want = 0;
    size_t tokens, n1;
    ck_assert_int_eq(ag_gpt_eval_ids(g, ids, 3 * TB + 5, 2, &loss, &tokens, &err), AG_OK);
    ck_assert_uint_eq(tokens, 3 * TB);
    ck_assert_int_eq(ag_gpt_eval_ids(g, ids, 3 * TB + 5, 1, &by_one, &n1, &err), AG_OK);
    ag_ctx *ctx = ag_ctx_new();
    ag_ctx_set_grad(ctx, false);
    for (int w = 0; w < 3; w++) {   /* each window's own forward: [1,TB] and its targets */
        ag_ctx_reset(ctx);
        ag_tensor *l = NULL;
        ag_gpt_forward(ctx, g, ids + w * TB, ids + w * TB + 1, 1, TB, NULL, &l);
        ck_assert_ptr_nonnull(l);
        want += l->data[0] / 3.0;
    }
    ag_ctx_free(ctx);
    ck_assert_msg(fabs(loss - want) < 1e-5 && fabs(by_one - want) < 1e-5, "%f %f %f", loss, by_one, want);
    ck_assert_int_eq(ag_gpt_eval_ids(g, ids, TB, 2, &loss, &tokens, &err), AG_ERR_ARG);
    ck_assert_str_eq(err.msg, "the text has 8 tokens; block_size 8 needs at least 9 for one window");
    ag_gpt_free(g);
}
END_TEST

/* ag_gpt_attn_layer_stats: each layer's ag_attn_stats of the weights ag_gpt_attn_record gives. */
START_TEST(attn_layer_stats_per_layer)
{
    ag_gpt *g = model(4);
    ag_ctx *ctx = ag_ctx_new();
    int ids[2 * 6] = {1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1};
    ag_tensor *A[2];
    double e[2], p[2], want_e, want_p;
    ag_error err = {0};
    ck_assert_int_eq(ag_gpt_attn_layer_stats(ctx, g, ids, 2, 6, A, e, p, &err), AG_OK);
    for (int l = 0; l < 2; l++) {
        ag_tensor *B[2];
        ck_assert_int_eq(ag_gpt_attn_record(ctx, g, ids, 2, 6, B), AG_OK);
        ag_attn_stats(B[l]->data, 2, 2, 6, &want_e, &want_p);
        ck_assert(e[l] == want_e && p[l] == want_p && e[l] > 0 && p[l] < 1);
        ag_ctx_reset(ctx);
    }
    ag_ctx_free(ctx);
    ag_gpt_free(g);
}
END_TEST

/* ag_gpt_step_flops: 6 (12 L C^2 + 2 C V) + 24 L T C a token, times B T, dropout 1.1x. */
START_TEST(step_flops_formula)
{
    ag_gpt_config c = {.vocab_size = 3, .n_layer = 1, .n_head = 1, .n_embd = 2, .block_size = 4};
    ck_assert(ag_gpt_step_flops(&c, 1) == (6 * (12 * 4 + 2 * 2 * 3) + 24 * 4 * 2) * 4);   /* 2208 */
    ck_assert(ag_gpt_step_flops(&c, 3) == 3 * 2208.0);
    c.dropout = 0.1;
    ck_assert(fabs(ag_gpt_step_flops(&c, 1) - 1.1 * 2208) < 1e-9);
}
END_TEST

/* ag_gpt_muon_flops: NS5's FLOPs (ag_muon_flops, 5 (4 m^2 n + 2 m^3), m the smaller side) on
 * every matrix the model marks hidden, counted from the model itself, GELU's MLP and SwiGLU's. */
START_TEST(muon_flops_of_the_hidden)
{
    ck_assert(ag_muon_flops(2, 3) == 5 * (4 * 4 * 3 + 2 * 8) && ag_muon_flops(3, 2) == ag_muon_flops(2, 3));
    for (int k = 0; k < 2; k++) {
        ag_gpt_config c = {.vocab_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 12, .block_size = 4,
                           .mlp = k ? AG_MLP_SWIGLU : AG_MLP_GELU};
        ag_error err = {0};
        ag_gpt *g = ag_gpt_new(&c, 1, &err);
        ck_assert_msg(g, "%s", err.msg);
        double sum = 0;
        int hidden = 0;
        for (int e = 0; e < g->params->n; e++) {
            const ag_param_entry *p = &g->params->entries[e];
            if (p->hidden) sum += ag_muon_flops(p->t->shape[0], p->t->shape[1]), hidden++;
        }
        ck_assert_int_eq(hidden, c.n_layer * (k ? 7 : 6));
        ck_assert_msg(sum == ag_gpt_muon_flops(&c), "%g against %g", sum, ag_gpt_muon_flops(&c));
        ag_gpt_free(g);
    }
}
END_TEST

/* ag_gpt_probe: its steps train on its tokens (the loss falls), split over shards or not, with
 * AdamW or the optimizer ag_gpt_probe_use names; a bad config is the model's error, no probe. */
START_TEST(probe_steps_train)
{
    ag_gpt_config cfg = {.vocab_size = V, .n_layer = 1, .n_head = 2, .n_embd = 16, .block_size = TB};
    ag_error err = {0};
    double first[2], last[2];
    for (int shards = 1; shards <= 2; shards++) {
        ag_gpt_probe *p;
        ck_assert_msg(ag_gpt_probe_new(&cfg, 4, 7, shards, &p, &err) == AG_OK, "%s", err.msg);
        for (long t = 1; t <= 40; t++) {
            double loss;
            ck_assert_int_eq(ag_gpt_probe_step(p, t, &loss, &err), AG_OK);
            if (t == 1) first[shards - 1] = loss;
            last[shards - 1] = loss;
        }
        ck_assert_msg(last[shards - 1] < first[shards - 1] - 1e-3, "%g -> %g", first[shards - 1], last[shards - 1]);
        ag_gpt_probe_free(p);
    }
    ck_assert(fabs(first[0] - first[1]) < 1e-4);   /* the same model and tokens */
    ag_gpt_probe *q;   /* with the run's optimizer, Muon: it trains too, and not as AdamW did */
    ck_assert_msg(ag_gpt_probe_new(&cfg, 4, 7, 1, &q, &err) == AG_OK, "%s", err.msg);
    ag_gpt_probe_use(q, AG_MUON);
    double lq = 0, fq = 0;
    for (long t = 1; t <= 40; t++) {
        ck_assert_int_eq(ag_gpt_probe_step(q, t, &lq, &err), AG_OK);
        if (t == 1) fq = lq;
    }
    ck_assert_msg(lq < fq - 1e-3 && fabs(lq - last[0]) > 1e-6, "%g -> %g (AdamW: %g)", fq, lq, last[0]);
    ag_gpt_probe_free(q);
    cfg.n_head = 3;
    ag_gpt_probe *p = (ag_gpt_probe *)&cfg;
    ck_assert(ag_gpt_probe_new(&cfg, 4, 7, 1, &p, &err) != AG_OK && p == NULL && err.msg[0]);
    ag_gpt_probe_free(NULL);
}
END_TEST

Suite *gpt_tools_suite(void)
{
    Suite *s = suite_create("gpt_tools");
    TCase *t = tcase_create("gpt_tools");
    ADD_TESTS(t, eval_ids_every_window_once, sample_logits_draws, generate_same_seed_same_ids, generate_through_the_sliding_window,
              generate_stops_and_refuses, attention_rows_sum_to_one, stats_of_known_rows,
              plots_write_weights_and_scripts, gpt_plot_attention_draws_and_names, serve_attention_names_heads,
              attn_layer_stats_per_layer, step_flops_formula, muon_flops_of_the_hidden,
              probe_steps_train);
    suite_add_tcase(s, t);
    return s;
}
