/* reverse -- a second example on the library's trainer (issue 31): a small Transformer encoder
 * learns to reverse a string of 1 to N = 12 letters a-z. The strings of a batch have different
 * lengths, so they are padded to N: the attention's key-padding mask keeps every letter from
 * looking at padding, and the loss ignores the padded positions (ag_cross_entropy_ignore). The run itself
 * (checkpoints, --resume, --time-budget, signals, metrics.csv, loss.png, MPI ranks and
 * micro-batches) is ag_train_run's (src/train/train.h); this file is the task, the model and
 * the command line.
 *
 *   build/reverse train --out DIR [--steps N] [--time-budget S] [--resume] [--seed S] [--every N]
 *                       [--log-dynamics]   per layer: gradient norms, update/weight ratios
 *                       [--grad-accum K]   each step's 64 strings as K micro-batches
 *                       [--log-activations] per layer at each evaluation: the stream, MLP inputs, scores
 *                       [--lr-find LO]     the range test: lr from LO up to 3e-3 over the steps
 *   build/reverse eval --out DIR       exact-match accuracy on held-out strings
 *   mpirun -np N build/reverse_mpi train ...   the same run, each step's strings over N ranks
 *
 * The padded slots hold random letters, not a padding token: a batch buffer holds whatever was
 * there before, and so nothing but the mask tells the model where a string ends. Without the
 * mask the length, and so the answer, is lost (tests/test_reverse.c checks that it matters). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"

enum { N = 12,            /* the longest string; T of every batch */
       V = 26,            /* letters a-z */
       C = 64, H = 4, LAYERS = 2,
       TRAIN_B = 64,      /* strings per training step */
       EVAL_B = 250,      /* strings per evaluation batch */
       IGNORE = -100 };   /* the target of a padded position (PyTorch's ignore_index) */
#define LR 3e-3           /* the peak learning rate, and the top of --lr-find's sweep */

/* A batch of n strings, padded to N. */
typedef struct {
    int n;
    int x[EVAL_B * N];      /* the letters, random letters after the end */
    int y[EVAL_B * N];      /* the reversed string, IGNORE after the end */
    ag_real real[EVAL_B * N]; /* the key-padding mask: 1 a letter, 0 padding */
} batch;

typedef struct {
    ag_params *P;
    ag_embedding_layer tok;   /* [V,C] */
    ag_tensor *pos;           /* [N,C] */
    ag_block blocks[LAYERS];
    ag_layernorm_layer ln_f;
    ag_linear_layer head;     /* C -> V */
    batch b;
    int eval_batches;         /* the held-out set: eval_batches x EVAL_B strings */
} reverser;

// --- the task ---

/* Held out: a string of 3 or more letters whose hash is 0 mod 8 is never trained on (the 702
 * strings of 1 or 2 letters are too few to split: they are in both). */
static bool held_out(const int *s, int len)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < len; i++) h = (h ^ (uint64_t)s[i]) * 1099511628211ull;
    return len >= 3 && h % 8 == 0;
}

/* One string from rng into row i of b: a training one (any length, not held out), or a held-out
 * one (3 letters or more: the short ones, trained on, would flatter the score). */
static void draw_one(batch *b, int i, ag_rng *rng, bool held)
{
    int *x = b->x + i * N, *y = b->y + i * N, len;
    do {
        len = 1 + (int)ag_rng_below(rng, N);
        for (int t = 0; t < N; t++) x[t] = (int)ag_rng_below(rng, V);   /* the padding too */
    } while (held_out(x, len) != held);
    for (int t = 0; t < N; t++) {
        y[t] = t < len ? x[len - 1 - t] : IGNORE;
        b->real[i * N + t] = t < len;
    }
}

static void draw(batch *b, int n, ag_rng *rng, bool held)
{
    b->n = n;
    for (int i = 0; i < n; i++) draw_one(b, i, rng, held);
}

// --- the model: embeddings, LAYERS encoder blocks (no causal mask), a head per position ---

static ag_status model_init(reverser *R, uint64_t seed, ag_error *err)
{
    ag_params *P = R->P = ag_params_new();
    if (!P) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    double std = 0.02, std_out = 0.02 / sqrt(2.0 * LAYERS);
    ag_status s = ag_embedding_layer_init(&R->tok, P, "tok", V, C, std);
    if (s == AG_OK) s = ag_params_register(&R->pos, P, "pos", "weight", 2, (int[]){N, C}, AG_INIT_NORMAL, std, false);
    for (int l = 0; l < LAYERS && s == AG_OK; l++) {
        char name[32];
        snprintf(name, sizeof name, "blocks.%d", l);
        s = ag_block_init(&R->blocks[l], P, name, C, H, NULL, std, std_out);
    }
    if (s == AG_OK) s = ag_layernorm_layer_init(&R->ln_f, P, "ln_f", C);
    if (s == AG_OK) s = ag_linear_layer_init(&R->head, P, "head", C, V, true, std);
    if (s == AG_OK) s = ag_params_alloc(P);
    if (s) return ag_seterr(err, s, "%s", ag_params_error(P));
    ag_params_init(P, seed);
    return AG_OK;
}

/* b's strings [first, first + n) -> logits [n,N,V], each letter attending to the letters of
 * its string only. */
static ag_tensor *forward(const reverser *R, ag_ctx *ctx, const batch *b, int first, int n)
{
    ag_tensor *kp = ag_tensor_new2(ctx, n, N);                                      // [n,N]
    if (!kp) return NULL;
    memcpy(kp->data, b->real + first * N, sizeof(ag_real) * (size_t)n * N);
    const ag_forward_opts fo = {.key_padding = kp};
    ag_tensor *h = ag_embedding_layer_forward(ctx, &R->tok, b->x + first * N, n, N); // [n,N,C]
    h = ag_add(ctx, h, R->pos);                                                     // [n,N,C] + [N,C]
    for (int l = 0; l < LAYERS; l++) h = ag_block_forward(ctx, &R->blocks[l], h, NULL, 0, &fo);   // [n,N,C]
    h = ag_layernorm_layer_forward(ctx, &R->ln_f, h);                               // [n,N,C]
    return ag_linear_layer_forward(ctx, &R->head, h);                               // [n,N,V]
}

static ag_status ctx_failed(ag_ctx *ctx, ag_error *err)
{
    return ag_seterr(err, ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_NOMEM, "%s", ag_ctx_error(ctx));
}

// --- the trainer's client: a batch, a micro-batch's loss, the held-out evaluation ---

/* The letters (targets not ignored) of b's strings [first, first + n). */
static int letters(const batch *b, int first, int n)
{
    int k = 0;
    for (int i = first * N; i < (first + n) * N; i++) k += b->y[i] != IGNORE;
    return k;
}

static ag_status train_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    draw(&((reverser *)user)->b, TRAIN_B, rng, false);   /* the whole batch, on every rank */
    return AG_OK;
}

/* Micro-batch mb's loss per letter, weighed by its share of the batch's letters: the weighed
 * shares add up to the batch's loss per letter, as one process computes it (train.h). */
static ag_status train_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    reverser *R = user;
    mb->dloss = (ag_real)((double)letters(&R->b, mb->first, mb->b) / letters(&R->b, 0, TRAIN_B));
    ag_tensor *logits = forward(R, ctx, &R->b, mb->first, mb->b);                    // [b,N,V]
    *loss = ag_cross_entropy_ignore(ctx, logits, R->b.y + mb->first * N, IGNORE);    // [1]
    return *loss ? AG_OK : ctx_failed(ctx, err);
}

/* The letter logits [n,N,V] give position t of string i. */
static int guess(const ag_tensor *logits, int i, int t)
{
    const ag_real *z = logits->data + ((size_t)i * N + t) * V;
    int best = 0;
    for (int v = 1; v < V; v++) best = z[v] > z[best] ? v : best;
    return best;
}

/* Strings of b whose every letter logits [n,N,V] gets right, and letters right in *hits. */
static int exact(const ag_tensor *logits, const batch *b, long *hits)
{
    int right = 0;
    for (int i = 0; i < b->n; i++) {
        bool all = true;
        for (int t = 0; t < N && b->y[i * N + t] != IGNORE; t++) {
            int best = guess(logits, i, t);
            *hits += best == b->y[i * N + t];
            all = all && best == b->y[i * N + t];
        }
        right += all;
    }
    return right;
}

/* The held-out set, the same strings every time: mean loss, exact matches, letters right. */
static ag_status held_out_eval(reverser *R, ag_ctx *ctx, double *val, double *score, double *per_letter,
                               ag_error *err)
{
    ag_rng rng;
    ag_rng_seed(&rng, 0x48454c44ull);   /* "HELD" */
    long right = 0, right_letters = 0, total = 0;
    double loss = 0;
    for (int k = 0; k < R->eval_batches; k++) {
        ag_ctx_reset(ctx);
        draw(&R->b, EVAL_B, &rng, true);
        ag_tensor *logits = forward(R, ctx, &R->b, 0, EVAL_B);                      // [n,N,V]
        ag_tensor *l = ag_cross_entropy_ignore(ctx, logits, R->b.y, IGNORE);   // [1]
        if (!l) return ctx_failed(ctx, err);
        loss += (double)l->data[0];
        right += exact(logits, &R->b, &right_letters);
        total += letters(&R->b, 0, EVAL_B);
    }
    *val = loss / R->eval_batches;
    *score = (double)right / (R->eval_batches * EVAL_B);
    *per_letter = (double)right_letters / (double)total;
    return AG_OK;
}

static ag_status evaluate(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    double per_letter;
    return held_out_eval(user, ctx, val, score, &per_letter, err);
}

/* For the report card: 4 held-out strings of 5 letters or more (a short one says little), each
 * "input -> what the model writes", and whether that is right. */
static ag_status sample(void *user, ag_ctx *ctx, char **text, ag_error *err)
{
    reverser *R = user;
    ag_rng rng;
    ag_rng_seed(&rng, 0x53414d50ull);   /* "SAMP" */
    R->b.n = 4;
    for (int i = 0; i < 4; i++)
        do draw_one(&R->b, i, &rng, true);
        while (!R->b.real[i * N + 4]);
    ag_tensor *logits = forward(R, ctx, &R->b, 0, 4);                               // [4,N,V]
    if (!logits) return ctx_failed(ctx, err);
    char *s = *text = malloc(4 * (2 * N + 16));
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 4; i++) {
        char in[N + 1] = "", out[N + 1] = "";
        int len = 0;
        for (; len < N && R->b.y[i * N + len] != IGNORE; len++) {
            in[len] = (char)('a' + R->b.x[i * N + len]);
            out[len] = (char)('a' + guess(logits, i, len));
        }
        bool right = true;
        for (int t = 0; t < len; t++) right = right && out[t] == 'a' + R->b.y[i * N + t];
        s += sprintf(s, "%-12s -> %-12s %s\n", in, out, right ? "right" : "wrong");
    }
    return AG_OK;
}

// --- the command line ---

typedef struct {
    bool train;
    const char *out;
    long steps;
    double budget;
    bool resume;
    uint64_t seed;
    long every;   /* evaluate and checkpoint every this many steps */
    bool dynamics;  /* --log-dynamics: DIR/dynamics.csv every 10 steps, dynamics.png */
    int grad_accum; /* --grad-accum K: micro-batches per step (and rank) */
    bool activations; /* --log-activations: DIR/activations.csv at each evaluation, activations.png */
    double lr_find;   /* --lr-find LO: the range test from LO up to LR (0: the schedule) */
} cli;

static int usage(const char *why)
{
    fprintf(stderr, "reverse: %s\nusage: reverse train --out DIR [--steps N] [--time-budget S] [--resume] [--seed S] "
            "[--every N] [--log-dynamics] [--log-activations] [--lr-find LO] [--grad-accum K]\n"
            "       reverse eval --out DIR\n", why);
    return 2;
}

/* A whole decimal number in [lo, hi]; false otherwise. */
static bool number(const char *s, double lo, double hi, double *v)
{
    char *end;
    errno = 0;
    *v = s ? strtod(s, &end) : NAN;
    return s && end != s && !*end && !errno && *v >= lo && *v <= hi;
}

static int parse(int argc, char **argv, cli *c)
{
    *c = (cli){.steps = 10000, .seed = 1, .every = 250};
    if (argc < 2 || (strcmp(argv[1], "train") && strcmp(argv[1], "eval"))) return usage("the command is train or eval");
    c->train = strcmp(argv[1], "train") == 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double d;
        if (!strcmp(a, "--resume") && c->train) c->resume = true;
        else if (!strcmp(a, "--log-dynamics") && c->train) c->dynamics = true;
        else if (!strcmp(a, "--log-activations") && c->train) c->activations = true;
        else if (!strcmp(a, "--lr-find") && c->train && number(v, 1e-12, 1e9, &d)) c->lr_find = d, i++;
        else if (!strcmp(a, "--out") && v) c->out = argv[++i];
        else if (!strcmp(a, "--steps") && c->train && number(v, 1, 1e9, &d) && d == floor(d)) c->steps = (long)d, i++;
        else if (!strcmp(a, "--time-budget") && c->train && number(v, 1e-3, 1e9, &d)) c->budget = d, i++;
        else if (!strcmp(a, "--every") && c->train && number(v, 1, 1e9, &d) && d == floor(d)) c->every = (long)d, i++;
        else if (!strcmp(a, "--seed") && c->train && number(v, 0, 1e15, &d) && d == floor(d)) c->seed = (uint64_t)d, i++;
        else if (!strcmp(a, "--grad-accum") && c->train && number(v, 1, TRAIN_B, &d) && d == floor(d))
            c->grad_accum = (int)d, i++;
        else {
            char why[300];
            snprintf(why, sizeof why, "bad argument '%.200s'%s", a, v || a[0] != '-' ? "" : " (it needs a value)");
            return usage(why);
        }
    }
    if (c->lr_find >= LR) return usage("--lr-find LO must be below the learning rate 0.003");
    return c->out ? 0 : usage("--out DIR is required");
}

#ifndef AG_COMMIT
#define AG_COMMIT NULL   /* the Makefile gives the commit it was built at */
#endif

static int train(reverser *R, const cli *c, ag_dist *dist, ag_error *err)
{
    char config[256], floor[64];   /* the report card's config (DIR/report.md); loss.png's floor */
    snprintf(floor, sizeof floor, "ln V = ln %d: every letter equally likely", V);
    const ag_loss_plot plot = {.title = "reverse: loss per letter (nats)", .floor = log((double)V),
                               .floor_title = floor, .with_val = true};
    snprintf(config, sizeof config, "task = reverse 1 to %d letters a-z\nvocab = %d\nd_model = %d\nn_head = %d\n"
             "n_layer = %d\nbatch = %d\nheld_out = %d strings\nseed = %llu", N, V, C, H, LAYERS, TRAIN_B,
             R->eval_batches * EVAL_B, (unsigned long long)c->seed);
    /* its blocks hold a GPT's tensors: the larger of a step and an evaluation batch (nn.h) */
    const ag_gpt_config shape = {.vocab_size = V, .n_layer = LAYERS, .n_head = H, .n_embd = C, .block_size = N};
    double step = fmax(ag_gpt_step_bytes(&shape, TRAIN_B, true), ag_gpt_step_bytes(&shape, EVAL_B, false));
    const ag_train_client client = {.name = "reverse", .params = R->P, .user = R, .batch = TRAIN_B, .step_bytes = step,
                                    .draw = train_draw, .loss = train_loss, .evaluate = evaluate, .score_name = "exact match", .config = config,
                                    .unit = "strings", .units_per_step = TRAIN_B, .commit = AG_COMMIT, .plot = &plot,
                                    .sample = sample};
    const ag_train_opts o = {.out_dir = c->out, .steps = c->steps, .resume = c->resume, .time_budget_s = c->budget,
                             .seed = ag_seed_mix(c->seed, 0x62617463ull), .every = c->every, .log_every = 250,
                             .sched = {.lr = LR, .min_lr = 1e-4, .warmup_iters = 100, .lr_decay_iters = c->steps},
                             .adam = {0.9, 0.99, 1e-8, 0.01}, .grad_clip = 1.0, .log = stdout,
                             .log_dynamics = c->dynamics ? 10 : 0, .log_activations = c->activations,
                             .lr_find_lo = c->lr_find, .dist = dist, .grad_accum = c->grad_accum,
                             .threads = 1};   /* a model this small: one thread is as fast, and shares the machine */
    ag_train_result r;
    if (ag_train_run(&client, &o, &r, err)) return 1;
    if (ag_dist_rank(dist) == 0)   /* rank 0 speaks for the job */
        printf("%s at step %ld (%s/%s) in %.1f s: held-out exact match %.4f\n", r.stop_signal ? "stopped" :
           r.out_of_time ? "out of time" : "done", r.step, c->out, r.ckpt, r.wall_s, r.score);
    if (r.lr_find.steps > 0 && ag_dist_rank(dist) == 0)
        printf("lr-find over %d steps: the loss falls fastest at lr %.2g; lowest %.3f at lr %.2g\n", r.lr_find.steps,
               r.lr_find.steepest_lr, r.lr_find.min_loss, r.lr_find.min_lr);
    return r.stop_signal ? 128 + r.stop_signal : 0;
}

static int eval(reverser *R, const cli *c, ag_error *err)
{
    const ag_train_client client = {.name = "reverse", .params = R->P};
    long step;
    if (ag_train_load(c->out, &client, &step, err)) return 1;
    ag_threads_init(1);   /* as train runs it */
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) return ag_seterr(err, AG_ERR_NOMEM, "out of memory"), 1;
    ag_ctx_set_grad(ctx, false);
    R->eval_batches = 8;
    double val, score, per_letter;
    ag_status s = held_out_eval(R, ctx, &val, &score, &per_letter, err);
    ag_ctx_free(ctx);
    if (s) return 1;
    printf("step %ld: held-out exact match %.4f (%d strings), per letter %.4f, loss %.4f\n", step, score,
           R->eval_batches * EVAL_B, per_letter, val);
    return 0;
}

int main(int argc, char **argv)
{
    ag_train_name("reverse", "REVERSE");   /* messages and $REVERSE_FAULT (train.h) */
    cli c;
    int rc = parse(argc, argv, &c);
    if (rc) return rc;
    reverser R = {.eval_batches = 2};
    ag_error err = {0};
    ag_dist *dist = NULL;   /* under mpirun, build/reverse_mpi's rank of the job (dist.h); else alone */
    if (c.train && ag_dist_init(&dist, 60, &err)) rc = 1;
    else if (model_init(&R, c.seed, &err) == AG_OK) rc = c.train ? train(&R, &c, dist, &err) : eval(&R, &c, &err);
    else rc = 1;
    int rank = ag_dist_rank(dist);   /* rank 0 says what every rank met alike (a bad input) */
    if (err.status && rank == 0) fprintf(stderr, "reverse: %s\n", err.msg);
    else if (err.status && err.status != AG_ERR_ARG) fprintf(stderr, "reverse: rank %d: %s\n", rank, err.msg);
    ag_params_free(R.P);
    ag_dist_end(dist, !err.status);
    return err.status ? 1 : rc;
}
