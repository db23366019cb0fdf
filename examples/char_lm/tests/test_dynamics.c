/* test_dynamics.c -- char_lm's --log-dynamics (src/train/dynamics.c, on the trainer) and the curves of
 * loss.png: the rows of DIR/dynamics.csv at each log step, their figures recomputed from the
 * weights and gradients the run had (seen through lm_train_opts.before_step), the rows a
 * resumed run keeps, a run that the flag leaves exactly as it was, and the learning rate and
 * the ln V line in loss.gp. Each test trains a few steps of a small model on the first 4000
 * characters of data/tinyshakespeare.txt, in its own mkdtemp directory. Then --log-activations
 * (src/train/activations.c, char_lm's forward in client.c): its rows read off a model whose blocks
 * were set to known answers. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "train.h"
#include "train/train.h"
#include "proc.h"
#include "tcases.h"

static char dir[64], text_path[96];

static void setup(void)
{
    strcpy(dir, "/tmp/ag_dynamics_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(text_path, sizeof text_path, "%s/text.txt", dir);
    size_t n = 0;
    char *text = proc_read_file("data/tinyshakespeare.txt", &n);
    ck_assert_msg(text && n > 4000, "data/tinyshakespeare.txt: the tests run from the repository root");
    proc_write_file(text_path, text, 4000);
    free(text);
}

static void teardown(void) { proc_remove_tree(dir); }

/* 2 layers, a context of 16, 4 windows: 12 steps take a fraction of a second */
static lm_train_opts small(const char *out, long iters, bool dynamics)
{
    lm_train_opts o = {.data_path = text_path, .out_dir = out};
    ck_assert_int_eq(lm_config_preset(&o.cfg, "tiny"), AG_OK);
    o.cfg.model.block_size = 16;
    o.cfg.batch_size = 4;
    o.cfg.max_iters = o.cfg.lr_decay_iters = iters;
    o.cfg.warmup_iters = 3;
    o.cfg.eval_interval = 6;
    o.cfg.eval_iters = 1;
    o.cfg.log_dynamics = dynamics;
    return o;
}

static void train_ok(const lm_train_opts *o)
{
    lm_train_result r;
    ag_error e = {0};
    ag_status s = lm_train(o, &r, &e);
    ck_assert_msg(s == AG_OK, "lm_train: %s", e.msg);
}

/* The rows of dir/name: rows[k][c] the numbers of row k (after the header), at most 16 x 16. */
static int read_rows(const char *name, double rows[16][16], int *cols)
{
    char *csv = proc_read_file(proc_path(dir, name), NULL);
    ck_assert_msg(csv != NULL, "%s/%s is missing", dir, name);
    int n = -1;
    for (char *line = strtok(csv, "\n"); line; line = strtok(NULL, "\n"), n++) {
        int c = 0;
        for (char *p = line; n >= 0 && n < 16 && c < 16; c++) {
            rows[n][c] = *p == ',' ? NAN : strtod(p, &p);
            if (!(p = strchr(p, ','))) break;
            p++;
        }
        if (n < 0) *cols = (int)(strchr(line, ',') ? 1 : 0);
        for (char *p = line; n < 0 && (p = strchr(p, ',')); p++) (*cols)++;
    }
    free(csv);
    return n;
}

/* What before_step sees: the weights before step 10; at step 11, the weights after step 10 and
 * step 10's gradients (zeroed only once step 11 begins), from which it measures what
 * dynamics.csv's row 10 must say. */
typedef struct {
    ag_real *w10;         /* [total] the weights before step 10 */
    double norm;          /* ||dW|| of step 10, every parameter */
    double group[2][2][3];   /* [layer][attn, mlp]: ||dW||, ||W_11 - W_10||, ||W_10|| */
    bool measured;
} seen;

/* the group's three norms: over the 2-D weights of blocks.l.<kind>. */
static void group_norms(const ag_params *P, const ag_real *w10, int l, const char *kind, double out[3])
{
    char prefix[32];
    snprintf(prefix, sizeof prefix, "blocks.%d.%s.", l, kind);
    double sum[3] = {0};
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        if (t->ndim != 2 || strncmp(t->name, prefix, strlen(prefix)) != 0) continue;
        for (size_t i = P->entries[e].offset; i < P->entries[e].offset + ag_numel(t); i++) {
            double g = (double)P->grad[i], w = (double)w10[i], dw = (double)P->data[i] - w;
            sum[0] += g * g;
            sum[1] += dw * dw;
            sum[2] += w * w;
        }
    }
    for (int k = 0; k < 3; k++) out[k] = sqrt(sum[k]);
}

static void watch(long it, ag_gpt *g, void *user)
{
    seen *s = user;
    const ag_params *P = g->params;
    if (it == 10 && (s->w10 = malloc(P->total * sizeof(ag_real)))) memcpy(s->w10, P->data, P->total * sizeof(ag_real));
    if (it != 11 || !s->w10) return;
    for (size_t i = 0; i < P->total; i++) s->norm += (double)P->grad[i] * (double)P->grad[i];
    s->norm = sqrt(s->norm);
    for (int l = 0; l < 2; l++) {
        group_norms(P, s->w10, l, "attn", s->group[l][0]);
        group_norms(P, s->w10, l, "mlp", s->group[l][1]);
    }
    s->measured = true;
}

#define CLOSE(a, b) (fabs((a) - (b)) <= 1e-5 * fabs(b))   /* the CSV keeps 6 digits */

START_TEST(test_dynamics_rows)
{
    seen s = {0};
    lm_train_opts o = small(proc_path(dir, "run"), 12, true);
    o.before_step = watch;
    o.hook_user = &s;
    train_ok(&o);
    double rows[16][16], metrics[16][16];
    int cols = 0, mcols = 0;
    ck_assert_int_eq(read_rows("run/dynamics.csv", rows, &cols), 3);   /* log steps 0, 10 and 11, the last */
    ck_assert_int_eq(cols, 4 + 4 * 2);
    ck_assert(rows[0][0] == 0 && rows[1][0] == 10 && rows[2][0] == 11);
    ck_assert_int_eq(read_rows("run/metrics.csv", metrics, &mcols), 13);  /* steps 0..11, the last evaluation */
    for (int k = 0; k < 3; k++) ck_assert(CLOSE(rows[k][1], metrics[(int)rows[k][0]][1]));   /* the same lr */
    ck_assert(s.measured);
    ck_assert_msg(CLOSE(rows[1][2], s.norm), "grad_norm %g, the gradients say %g", rows[1][2], s.norm);
    ck_assert(CLOSE(rows[1][3], ag_clip_scale(s.norm, o.cfg.grad_clip)));
    for (int l = 0; l < 2; l++)
        for (int k = 0; k < 2; k++) {
            const double *want = s.group[l][k];
            ck_assert_msg(CLOSE(rows[1][4 + 4 * l + k], want[0]), "layer %d %s: gradient norm %g, want %g", l,
                          k ? "mlp" : "attn", rows[1][4 + 4 * l + k], want[0]);
            ck_assert_msg(want[1] > 0 && CLOSE(rows[1][6 + 4 * l + k], want[1] / want[2]),
                          "layer %d %s: update ratio %g, want %g", l, k ? "mlp" : "attn", rows[1][6 + 4 * l + k],
                          want[1] / want[2]);
        }
    free(s.w10);
}
END_TEST

/* --resume keeps the rows before the iteration it picks up at, and adds its own */
START_TEST(test_dynamics_resume)
{
    lm_train_opts o = small(proc_path(dir, "run"), 12, true);
    train_ok(&o);
    o.resume = true;
    o.cfg.max_iters = 24;
    bool given[LM_N_FIELDS] = {0};
    for (int i = 0; i < LM_N_FIELDS; i++) given[i] = lm_fields[i].flag && !strcmp(lm_fields[i].flag, "--max-iters");
    o.given = given;
    train_ok(&o);
    double rows[16][16];
    int cols = 0;
    ck_assert_int_eq(read_rows("run/dynamics.csv", rows, &cols), 5);
    double want[5] = {0, 10, 11, 20, 23};
    for (int k = 0; k < 5; k++) ck_assert_double_eq(rows[k][0], want[k]);
}
END_TEST

/* Run a with a diagnostic flag on and b without: the very same losses (it only reads); the
 * flag's file (name.csv, name.png) in a's directory alone. */
static void assert_changes_nothing(lm_train_opts *a, lm_train_opts *b, const char *name)
{
    double with[12], without[12];
    a->losses = with, b->losses = without;
    a->plot = b->plot = true;
    a->n_losses = b->n_losses = 12;
    train_ok(a);
    train_ok(b);
    for (int i = 0; i < 12; i++) ck_assert_msg(with[i] == without[i], "step %d: %.9g vs %.9g", i, with[i], without[i]);
    char file[64];
    snprintf(file, sizeof file, "b/%s.csv", name);
    ck_assert_int_ne(access(proc_path(dir, file), F_OK), 0);
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) return;
    snprintf(file, sizeof file, "a/%s.png", name);   /* drawn at the evaluation of step 6 */
    ck_assert_int_eq(access(proc_path(dir, file), F_OK), 0);
    file[0] = 'b';
    ck_assert_int_ne(access(proc_path(dir, file), F_OK), 0);
}

START_TEST(test_dynamics_changes_nothing)
{
    lm_train_opts a = small(proc_path(dir, "a"), 12, true), b = small(proc_path(dir, "b"), 12, false);
    assert_changes_nothing(&a, &b, "dynamics");
}
END_TEST

/* loss.gp draws the learning rate (column 2) on the right-hand axis and the line ln V */
START_TEST(test_loss_plot_curves)
{
    lm_train_opts o = small(proc_path(dir, "run"), 6, false);
    o.plot = true;
    train_ok(&o);
    char *gp = proc_read_file(proc_path(dir, "run/loss.gp"), NULL);
    ck_assert_ptr_nonnull(gp);
    double lnV = 0;
    int V = 0;
    ck_assert_msg(sscanf(strstr(gp, "\nplot ") + 6, "%lf", &lnV) == 1 && strstr(gp, "ln V = ln "), "%s", gp);
    ck_assert_int_eq(sscanf(strstr(gp, "ln V = ln ") + 10, "%d", &V), 1);
    ck_assert_msg(V > 30 && fabs(lnV - log(V)) < 1e-6, "ln V %g for V %d", lnV, V);
    ck_assert_ptr_nonnull(strstr(gp, "using 1:2 axes x1y2"));
    free(gp);
}
END_TEST

// --- --log-activations (src/train/activations.c, lesson 14) ---

/* Sets every element of the parameter named name to v. */
static void set_param(ag_gpt *g, const char *name, ag_real v)
{
    ag_tensor *t = ag_params_find(g->params, name);
    ck_assert_msg(t != NULL, "no parameter %s", name);
    for (size_t i = 0; i < ag_numel(t); i++) t->data[i] = v;
}

/* Before step 0 (after iteration 0's evaluation), with a learning rate of 1e-30 so that the
 * steps leave them as set: block 0 has no query or key (its scores are 0), writes nothing into
 * the stream (w_o, fc2 zero) and its fc1 bias is -10 (every GELU input dead); block 1's fc1
 * bias is +10 (none dead). */
static void spoil(long it, ag_gpt *g, void *user)
{
    (void)user;
    if (it != 0) return;
    static const char *const zero[] = {"w_q.weight", "w_q.bias", "w_k.weight", "w_k.bias", "w_o.weight", "w_o.bias"};
    char name[64];
    for (int k = 0; k < 6; k++) {
        snprintf(name, sizeof name, "blocks.0.attn.%s", zero[k]);
        set_param(g, name, 0);
    }
    set_param(g, "blocks.0.mlp.fc2.weight", 0);
    set_param(g, "blocks.0.mlp.fc2.bias", 0);
    set_param(g, "blocks.0.mlp.fc1.bias", -10);
    set_param(g, "blocks.1.mlp.fc1.bias", 10);
}

/* activations.csv's columns: iter, rms_in, then per block rms, act mean, std, dead, score min, max */
enum { A_RMS = 2, A_MEAN, A_STD, A_DEAD, A_LO, A_HI, A_PER_BLOCK = 6 };

START_TEST(test_activations_rows)
{
    lm_train_opts o = small(proc_path(dir, "run"), 12, false);
    o.cfg.log_activations = true;
    o.cfg.lr = o.cfg.min_lr = 1e-30;
    o.before_step = spoil;
    train_ok(&o);
    double rows[16][16];
    int cols = 0;
    ck_assert_int_eq(read_rows("run/activations.csv", rows, &cols), 3);   /* evaluations 0, 6 and 12 */
    ck_assert_int_eq(cols, 2 + A_PER_BLOCK * 2);
    ck_assert(rows[0][0] == 0 && rows[1][0] == 6 && rows[2][0] == 12);
    const double *r = rows[1], *b1 = r + A_PER_BLOCK;
    ck_assert_msg(r[A_DEAD] == 1 && b1[A_DEAD] == 0, "dead shares %g and %g, want 1 and 0", r[A_DEAD], b1[A_DEAD]);
    ck_assert_msg(fabs(r[A_MEAN] + 10) < 1 && fabs(b1[A_MEAN] - 10) < 1, "means %g, %g", r[A_MEAN], b1[A_MEAN]);
    ck_assert_msg(fabs(r[A_LO]) < 1e-20 && fabs(r[A_HI]) < 1e-20, "block 0's scores %g..%g, want 0", r[A_LO], r[A_HI]);
    ck_assert_msg(b1[A_LO] < b1[A_HI], "block 1's scores %g..%g", b1[A_LO], b1[A_HI]);
    ck_assert_msg(fabs(r[A_RMS] - r[1]) <= 1e-5 * r[1], "block 0 adds nothing: rms %g, entering %g", r[A_RMS], r[1]);
    ck_assert_msg(fabs(b1[A_RMS] - r[A_RMS]) > 1e-3 * r[A_RMS], "block 1 adds to the stream: %g, %g", b1[A_RMS],
                  r[A_RMS]);
    ck_assert(rows[0][A_DEAD] < 0.5 && rows[0][A_LO] < 0);   /* iteration 0, before the spoiling: as drawn */
}
END_TEST

START_TEST(test_activations_change_nothing)
{
    lm_train_opts a = small(proc_path(dir, "a"), 12, false), b = small(proc_path(dir, "b"), 12, false);
    a.cfg.log_activations = true;
    assert_changes_nothing(&a, &b, "activations");
}
END_TEST

/* The library's measure alone (train/train.h: ag_dynamics), on a store of three parameters in
 * groups 0, 1 and none, against norms worked by hand. */
START_TEST(test_measure_by_hand)
{
    ag_params *P = ag_params_new();
    int s2[1] = {2};
    ag_tensor *a = ag_params_add(P, "a.weight", 1, s2, AG_INIT_ZEROS, 0, true);
    ag_tensor *b = ag_params_add(P, "b.weight", 1, s2, AG_INIT_ZEROS, 0, true);
    ag_tensor *c = ag_params_add(P, "c.weight", 1, s2, AG_INIT_ZEROS, 0, true);
    ck_assert_int_eq(ag_params_alloc(P), AG_OK);
    const int group[3] = {0, 1, -1};
    ag_error err = {0};
    ag_dynamics *d = ag_dynamics_new(P, group, 2, &err);
    ck_assert_msg(d, "%s", err.msg);
    a->data[0] = 3, a->data[1] = 4, a->grad[1] = 2;        /* ||W|| 5, ||dW|| 2 */
    b->data[0] = 1, b->grad[0] = 1, b->grad[1] = 1;        /* ||dW|| sqrt 2 */
    c->grad[0] = 100;                                     /* in no group */
    ag_dynamics_watch(d, P);
    a->data[1] = (ag_real)4.5;                             /* moved by 0.5: 0.1 of ||W|| */
    c->data[0] = 7;
    double gn[2], up[2];
    ag_dynamics_measure(d, P, gn, up);
    ck_assert_msg(fabs(gn[0] - 2) < 1e-12 && fabs(gn[1] - sqrt(2.0)) < 1e-6, "grad norms %g %g", gn[0], gn[1]);
    ck_assert_msg(fabs(up[0] - 0.1) < 1e-6 && up[1] == 0, "updates %g %g", up[0], up[1]);
    ag_dynamics_free(d);
    ag_params_free(P);
}
END_TEST

Suite *dynamics_suite(void)
{
    Suite *s = suite_create("dynamics");
    TCase *t = tcase_create("dynamics");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 600);
    ADD_TESTS(t, test_dynamics_rows, test_dynamics_resume, test_dynamics_changes_nothing,
                 test_loss_plot_curves, test_activations_rows, test_activations_change_nothing);
    suite_add_tcase(s, t);
    TCase *u = tcase_create("measure");
    tcase_add_test(u, test_measure_by_hand);
    suite_add_tcase(s, u);
    return s;
}
