/* trainer -- a model of your own on the library's trainer, from an installed attograd alone:
 *   #include <attograd/attograd.h>   and   cc ... $(pkg-config --cflags --libs attograd)
 *
 * The model: an MLP (Linear 2->16, SiLU, Linear 16->2) that learns which points of the square
 * [-1,1]^2 lie inside the circle of radius 0.7. This file is the task and the model: a batch
 * drawn, a micro-batch's loss and a held-out evaluation, handed to ag_train_run in an
 * ag_train_client. The run itself
 * (DIR/ckpt-N, latest, best, the lock, metrics.csv, loss.png, report.md) is the library's.
 *
 *   trainer DIR     (DIR must not exist; its parent must)
 *
 * It trains DIR/unbroken for 300 steps in one call; then DIR/resumed for 150 steps, and a
 * second call with .resume = true takes it on to 300. Exit 0 when the second call started at
 * step 150 and ended at 300, its weights equal the unbroken run's bit for bit (the batches came
 * from the trainer's rng, which the checkpoint keeps), and the held-out loss fell to a third of
 * the untrained model's or less; 1 when not; 2 when a run could not be made. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <attograd/attograd.h>

enum { IN = 2, HID = 16, OUT = 2, BATCH = 32, HELD = 512, STEPS = 300 };

typedef struct {
    ag_params *P;
    ag_linear_layer fc1, fc2;
    ag_real x[HELD * IN];   /* a batch's points, [n,IN] */
    int y[HELD];            /*   and their classes: 1 inside the circle */
} model;

/* n points from rng into m->x, m->y */
static void draw(model *m, int n, ag_rng *rng)
{
    for (int i = 0; i < n; i++) {
        double a = 2 * ag_rng_uniform(rng) - 1, b = 2 * ag_rng_uniform(rng) - 1;
        m->x[i * IN] = (ag_real)a;
        m->x[i * IN + 1] = (ag_real)b;
        m->y[i] = a * a + b * b < 0.49;
    }
}

/* the logits [n,OUT] of m's points [first, first + n), on ctx's tape */
static ag_tensor *forward(const model *m, ag_ctx *ctx, int first, int n)
{
    ag_tensor *x = ag_tensor_new2(ctx, n, IN);                                  // [n,IN]
    if (!x) return NULL;
    memcpy(x->data, m->x + (size_t)first * IN, sizeof(ag_real) * (size_t)n * IN);
    ag_tensor *h = ag_silu(ctx, ag_linear_layer_forward(ctx, &m->fc1, x));      // [n,HID]
    return ag_linear_layer_forward(ctx, &m->fc2, h);                            // [n,OUT]
}

// --- the client: the three calls the trainer makes ---

/* A step's whole batch, drawn from the trainer's rng: a resume draws what the unbroken run drew. */
static ag_status train_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    draw(user, BATCH, rng);
    return AG_OK;
}

/* The mean loss of the batch's points [mb->first, mb->first + mb->b), a micro-batch of it. */
static ag_status train_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    model *m = user;
    *loss = ag_cross_entropy(ctx, forward(m, ctx, mb->first, mb->b), m->y + mb->first);   // [b,OUT] -> [1]
    return *loss ? AG_OK : ag_seterr(err, AG_ERR_NOMEM, "%s", ag_ctx_error(ctx));
}

/* The held-out points, the same every time (their own seed); the score is the accuracy. */
static ag_status evaluate(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    model *m = user;
    ag_rng rng;
    ag_rng_seed(&rng, 2718);
    draw(m, HELD, &rng);
    ag_tensor *logits = forward(m, ctx, 0, HELD);                               // [HELD,OUT]
    ag_tensor *l = ag_cross_entropy(ctx, logits, m->y);                         // [HELD,OUT] -> [1]
    if (!l) return ag_seterr(err, AG_ERR_NOMEM, "%s", ag_ctx_error(ctx));
    int right = 0;
    for (int i = 0; i < HELD; i++) right += (logits->data[i * OUT + 1] > logits->data[i * OUT]) == m->y[i];
    *val = (double)l->data[0];
    *score = (double)right / HELD;
    return AG_OK;
}

static bool build(model *m)
{
    memset(m, 0, sizeof *m);
    if (!(m->P = ag_params_new()) || ag_linear_layer_init(&m->fc1, m->P, "fc1", IN, HID, true, 1.0) ||
        ag_linear_layer_init(&m->fc2, m->P, "fc2", HID, OUT, true, 0.1) || ag_params_alloc(m->P))
        return false;
    ag_params_init(m->P, 42);   /* every run starts from the same weights */
    return true;
}

/* Steps up to `steps` in DIR/name (a fresh run, or the one there with resume). */
static ag_status run(model *m, const char *dir, const char *name, long steps, bool resume, ag_train_result *r,
                     ag_error *err)
{
    char out[4096];
    snprintf(out, sizeof out, "%s/%s", dir, name);
    const ag_loss_plot plot = {.title = "the circle: loss (nats)", .floor = log(2.0), .floor_title = "ln 2: a coin",
                               .with_val = true};
    const ag_train_client c = {.name = "circle", .params = m->P, .user = m, .batch = BATCH, .draw = train_draw,
                               .loss = train_loss, .evaluate = evaluate, .score_name = "accuracy", .unit = "points",
                               .units_per_step = BATCH, .plot = &plot};
    const ag_train_opts o = {.out_dir = out, .steps = steps, .resume = resume, .seed = 7, .every = 100,
                             .sched = {.lr = 3e-2, .min_lr = 3e-3, .warmup_iters = 10, .lr_decay_iters = STEPS},
                             .adam = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.0},
                             .grad_clip = 1.0, .threads = 1, .log = stdout};
    ag_status s = ag_train_run(&c, &o, r, err);
    if (s == AG_OK)
        printf("%s: steps %ld -> %ld, held-out loss %.4f, accuracy %.4f (%s/%s)\n", name, r->start, r->step,
               r->val_loss, r->score, out, r->ckpt);
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: trainer DIR (DIR must not exist)\n"), 2;
    if (mkdir(argv[1], 0777) != 0) return perror(argv[1]), 2;
    ag_train_name("trainer", "TRAINER");
    ag_error err = {0};
    ag_train_result r;
    model a, b;
    double first = NAN, untrained;
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx || !build(&a) || !build(&b)) return fprintf(stderr, "trainer: out of memory\n"), 2;
    ag_ctx_set_grad(ctx, false);
    if (evaluate(&a, ctx, &untrained, &first, &err) || run(&a, argv[1], "unbroken", STEPS, false, &r, &err) ||
        run(&b, argv[1], "resumed", STEPS / 2, false, &r, &err) || run(&b, argv[1], "resumed", STEPS, true, &r, &err))
        return fprintf(stderr, "trainer: %s\n", err.msg), 2;
    size_t differ = 0;
    for (size_t i = 0; i < a.P->total; i++) differ += a.P->data[i] != b.P->data[i];
    bool ok = r.start == STEPS / 2 && r.step == STEPS && differ == 0 && r.val_loss <= untrained / 3;
    printf("%s: resumed at step %ld, ended at %ld; %zu of %zu weights differ from the unbroken run's; held-out loss "
           "%.4f untrained, %.4f trained\n", ok ? "ok" : "FAIL", r.start, r.step, differ, a.P->total, untrained,
           r.val_loss);
    ag_ctx_free(ctx);
    ag_params_free(a.P);
    ag_params_free(b.P);
    return ok ? 0 : 1;
}
