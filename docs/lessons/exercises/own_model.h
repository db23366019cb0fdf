/* own_model.h -- lesson 19's check: your own model on the library's trainer (ag_train_run).
 *
 *   own_model_check(keep, my_draw, my_loss, my_evaluate)
 *       my_draw      the client's draw: a step's whole batch of OM_BATCH points, drawn from the
 *                    rng it is handed into the model's batch buffer
 *       my_loss      the client's loss: the forward on ctx of the batch's points
 *                    [mb->first, mb->first + mb->b), their mean loss [1] in *loss
 *       my_evaluate  the client's evaluation: the held-out loss in *val, the accuracy in *score
 *       keep         a directory (which must not exist) to keep the runs in, to open their
 *                    loss.png and report.md; NULL: a scratch directory, removed after
 *
 * The model and the task are here: an MLP (Linear 2->24, GELU, Linear 24->2) learns in which
 * quadrants of the square [-1,1]^2 a point lies: class 1 where x and y have opposite signs (XOR
 * of the signs; no straight line separates them). own_draw fills the model's batch buffer with n
 * points from an rng, own_forward gives the logits of some of them; your three calls use them.
 *
 * The check evaluates the untrained model twice (the same weights must give the same loss), then
 * trains it 200 steps in one call of ag_train_run (the unbroken run), and again 100 steps and a
 * second call with .resume = true to 200 (the split run): the two must end with the same weights
 * bit for bit, and the held-out loss must have fallen to a third or less. Then once more with
 * every step in 2 micro-batches (opts.grad_accum, the accumulated run), the batch's points
 * outside the micro-batch NaN while your loss runs: its loss must stay finite and its weights
 * within 1e-3 of the unbroken run's (the sums differ in rounding alone). When something fails
 * it says which usual mistake the numbers point to. Built against the float library (pkg-config
 * attograd): checkpoints hold F32, so only there is a resume exact. 0 ok, 1 not, 2 the check
 * could not run. */
#ifndef OWN_MODEL_H
#define OWN_MODEL_H

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <attograd/attograd.h>

#ifdef AG_DOUBLE
#error "build against the float library: pkg-config --cflags --libs attograd (checkpoints hold F32)"
#endif

enum { OM_IN = 2, OM_HID = 24, OM_OUT = 2, OM_BATCH = 32, OM_HELD = 400, OM_STEPS = 200 };

typedef ag_status (*own_draw_fn)(void *user, ag_rng *rng, ag_error *err);
typedef ag_status (*own_loss_fn)(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err);
typedef ag_status (*own_eval_fn)(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err);

typedef struct {
    ag_params *P;
    ag_linear_layer fc1, fc2;
    ag_real x[OM_HELD * OM_IN];   /* the points of a batch, [n,2] */
    int y[OM_HELD];               /*   their classes: 1 where the signs differ */
    own_loss_fn loss;             /* the check's: your loss, in the run of micro-batches */
} own_model;
typedef struct { own_draw_fn draw; own_loss_fn loss; own_eval_fn eval; } own_calls;   /* the three, as one */

/* n points drawn from rng into m->x, m->y */
static void own_draw(own_model *m, int n, ag_rng *rng)
{
    for (int i = 0; i < n; i++) {
        double a = 2 * ag_rng_uniform(rng) - 1, b = 2 * ag_rng_uniform(rng) - 1;
        m->x[i * OM_IN] = (ag_real)a;
        m->x[i * OM_IN + 1] = (ag_real)b;
        m->y[i] = (a > 0) != (b > 0);
    }
}

/* the logits [n,2] of m's points [first, first + n), recorded on ctx's tape (when its gradients
 * are on) */
static ag_tensor *own_forward(const own_model *m, ag_ctx *ctx, int first, int n)
{
    ag_tensor *x = ag_tensor_new2(ctx, n, OM_IN);                               // [n,2]
    if (!x) return NULL;
    memcpy(x->data, m->x + (size_t)first * OM_IN, sizeof(ag_real) * (size_t)n * OM_IN);
    ag_tensor *h = ag_gelu(ctx, ag_linear_layer_forward(ctx, &m->fc1, x));      // [n,24]
    return ag_linear_layer_forward(ctx, &m->fc2, h);                            // [n,2]
}

/* the share of the n points whose larger logit is their class */
static double own_accuracy(const ag_tensor *logits, const int *y, int n)
{
    int right = 0;
    for (int i = 0; i < n; i++) right += (logits->data[i * OM_OUT + 1] > logits->data[i * OM_OUT]) == y[i];
    return (double)right / n;
}

// --- the check ---

/* path and what is inside it, removed (the runs of a scratch directory) */
static void own_remove(const char *path)
{
    struct stat st;
    DIR *d = lstat(path, &st) == 0 && S_ISDIR(st.st_mode) ? opendir(path) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        char sub[4096];
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name) < (int)sizeof sub)
            own_remove(sub);
    }
    if (d) closedir(d);
    remove(path);
}

static bool own_build(own_model *m)
{
    memset(m, 0, sizeof *m);
    if (!(m->P = ag_params_new()) || ag_linear_layer_init(&m->fc1, m->P, "fc1", OM_IN, OM_HID, true, 1.0) ||
        ag_linear_layer_init(&m->fc2, m->P, "fc2", OM_HID, OM_OUT, true, 0.1) || ag_params_alloc(m->P))
        return false;
    ag_params_init(m->P, 19);   /* every run starts from the same weights */
    return true;
}

/* m->loss of the micro-batch mb, every point of the buffer outside it NaN meanwhile: a loss
 * that reads one of them is NaN, and said to be */
static ag_status own_loss_alone(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    own_model *m = user;
    ag_real kept[OM_HELD * OM_IN];
    memcpy(kept, m->x, sizeof kept);
    for (int i = 0; i < OM_HELD * OM_IN; i++)
        if (i < mb->first * OM_IN || i >= (mb->first + mb->b) * OM_IN) m->x[i] = (ag_real)NAN;
    ag_status s = m->loss(user, ctx, mb, loss, err);
    memcpy(m->x, kept, sizeof kept);
    if (s == AG_OK && *loss && !isfinite((*loss)->data[0]))
        s = ag_seterr(err, AG_ERR_ARG, "the loss of the micro-batch [%d, %d) of %d points read points outside it",
                      mb->first, mb->first + mb->b, OM_BATCH);
    return s;
}

/* DIR/name trained up to `steps` (a fresh run, or the one there with resume), each step in
 * accum micro-batches */
static ag_status own_run(own_model *m, const own_calls *k, const char *dir, const char *name, long steps,
                         bool resume, int accum, ag_train_result *r, ag_error *err)
{
    char out[4096];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    m->loss = k->loss;
    const ag_train_client c = {.name = "quadrants", .params = m->P, .user = m, .batch = OM_BATCH, .draw = k->draw,
                               .loss = accum > 1 ? own_loss_alone : k->loss, .evaluate = k->eval,
                               .score_name = "accuracy", .unit = "points", .units_per_step = OM_BATCH};
    const ag_train_opts o = {.out_dir = out, .steps = steps, .resume = resume, .seed = 19, .every = 50,
                             .sched = {.lr = 2e-2, .min_lr = 2e-3, .warmup_iters = 10, .lr_decay_iters = OM_STEPS},
                             .adam = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.0},
                             .grad_clip = 1.0, .threads = 1, .grad_accum = accum};
    return ag_train_run(&c, &o, r, err);
}

/* the untrained model's held-out loss in *val, evaluated twice as the trainer does: 1 when the
 * two differ */
static int own_eval_twice(own_model *m, own_eval_fn eval, double *val, ag_error *err)
{
    ag_ctx *ctx = ag_ctx_new();
    double v[2] = {NAN, NAN}, score;
    for (int k = 0; k < 2 && ctx && !err->status; k++) {
        ag_ctx_reset(ctx);
        ag_ctx_set_grad(ctx, false);
        eval(m, ctx, &v[k], &score, err);
    }
    ag_ctx_free(ctx);
    if (!ctx || err->status) return printf("the check could not run: evaluate: %s\n", ctx ? err->msg : "no memory"), 2;
    *val = v[0];
    printf("untrained: held-out loss %.4f, then %.4f evaluated again\n", v[0], v[1]);
    if (v[0] == v[1]) return 0;
    return printf("FAIL: the same weights evaluated twice gave two losses: evaluate on the same held-out points "
                  "every time (an rng seeded inside evaluate), or the best checkpoint is picked by chance\n"), 1;
}

static int own_stopped(const ag_error *err)
{
    printf("FAIL: the trainer stopped: %s\n", err->msg);
    if (strstr(err->msg, "does not depend on anything that requires grad"))
        printf("  the loss is not on ctx's tape: make it from the model's forward on ctx, gradients on (no "
               "ag_ctx_set_grad(ctx, false) in the loss, no copy of its value)\n");
    if (strstr(err->msg, "read points outside it"))
        printf("  the loss is of the micro-batch alone: the forward of points [mb->first, mb->first + mb->b) and "
               "their labels from m->y + mb->first, not of the whole batch\n");
    return 1;
}

/* The unbroken run again, each step in 2 micro-batches of 16 points (opts.grad_accum): your
 * loss sees the points of its micro-batch alone, and the weights end as a's, but for the
 * rounding of sums in another order. */
static int own_accumulated(const own_calls *k, const char *dir, const own_model *a)
{
    own_model c = {0};
    ag_train_result r;
    ag_error err = {0};
    int rc = 2;
    if (!own_build(&c)) goto out;
    rc = own_run(&c, k, dir, "accumulated", OM_STEPS, false, 2, &r, &err) ? own_stopped(&err) : 0;
    if (rc) goto out;
    double worst = 0;
    for (size_t i = 0; i < a->P->total; i++) worst = fmax(worst, fabs((double)a->P->data[i] - c.P->data[i]));
    printf("accumulated run: steps 0 -> %ld in 2 micro-batches of %d points: the weights %s 1e-3 of the unbroken "
           "run's\n", r.step, OM_BATCH / 2, worst <= 1e-3 ? "within" : "NOT within");
    if (worst > 1e-3)
        rc = 1, printf("FAIL: two micro-batches are not the whole batch: the loss of a micro-batch is the mean over "
                       "its mb->b points alone\n");
out:
    ag_params_free(c.P);
    return rc;
}

/* the unbroken run and the split one (100 steps, then resumed to 200), compared */
static int own_runs(const own_calls *k, const char *dir, double untrained)
{
    own_model a = {0}, b = {0};
    ag_train_result r;
    ag_error err = {0};
    int rc = 2;
    if (!own_build(&a) || !own_build(&b)) goto out;
    if (own_run(&a, k, dir, "unbroken", OM_STEPS, false, 1, &r, &err)) { rc = own_stopped(&err); goto out; }
    printf("unbroken run: steps 0 -> %ld, held-out loss %.4f, accuracy %.3f\n", r.step, r.val_loss, r.score);
    double trained = r.val_loss, acc = r.score;
    if (own_run(&b, k, dir, "split", OM_STEPS / 2, false, 1, &r, &err) ||
        own_run(&b, k, dir, "split", OM_STEPS, true, 1, &r, &err)) { rc = own_stopped(&err); goto out; }
    size_t differ = 0;
    for (size_t i = 0; i < a.P->total; i++) differ += a.P->data[i] != b.P->data[i];
    printf("split run: steps 0 -> %d, then resumed %ld -> %ld: %zu of %zu weights differ from the unbroken run's\n",
           OM_STEPS / 2, r.start, r.step, differ, a.P->total);
    rc = 1;
    if (differ)
        printf("FAIL: the resumed run is not the unbroken one: draw every batch from the rng the trainer hands "
               "to your draw (the checkpoint keeps it), not from one of your own\n");
    else if (!(trained <= untrained / 3))
        printf("FAIL: the held-out loss fell from %.4f to %.4f only (accuracy %.3f): train on the batch you draw, "
               "its targets with its points\n", untrained, trained, acc);
    else if (!(rc = own_accumulated(k, dir, &a)))
        printf("ok: the trainer trains your model, resumes it exactly, and splits its steps\n");
out:
    ag_params_free(a.P);
    ag_params_free(b.P);
    return rc;
}

static int own_model_check(const char *keep, own_draw_fn draw, own_loss_fn loss, own_eval_fn eval)
{
    const own_calls k = {draw, loss, eval};
    own_model m;
    ag_error err = {0};
    double untrained = NAN;
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/own_model.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (keep && mkdir(keep, 0777) != 0) return printf("the check could not run: %s: cannot make it\n", keep), 2;
    if (!keep && !mkdtemp(dir)) return printf("the check could not run: cannot make %s\n", dir), 2;
    if (!own_build(&m)) return printf("the check could not run: out of memory\n"), 2;
    int rc = own_eval_twice(&m, eval, &untrained, &err);
    ag_params_free(m.P);
    if (rc == 0) rc = own_runs(&k, keep ? keep : dir, untrained);
    if (!keep) own_remove(dir);
    return rc;
}

#endif
