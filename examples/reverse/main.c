/* reverse -- a second example on the library's trainer (issue 31): a small Transformer encoder
 * learns to reverse a string of 1 to N = 12 letters a-z. The strings of a batch have different
 * lengths, so they are padded to N: the attention's key-padding mask keeps every letter from
 * looking at padding, and the loss ignores the padded positions (ag_cross_entropy_ignore). The run itself
 * (checkpoints, --resume, --time-budget, signals, metrics.csv, loss.png, MPI ranks and
 * micro-batches) is ag_train_run's (src/train/train.h); this file is the task, the model and
 * the command line.
 *
 *   build/reverse train --out DIR [flags]   the trainer's (ag_train_flag): --steps N, --resume, ...
 *   build/reverse eval --out DIR       exact-match accuracy on held-out strings
 *   build/reverse serve --run DIR      the library's page and API (serve.h): type a string, see it reversed
 *   mpirun -np N build/reverse_mpi train ...   the same run, each step's strings over N ranks
 *
 * The padded slots hold random letters, not a padding token: a batch buffer holds whatever was
 * there before, and so nothing but the mask tells the model where a string ends. Without the
 * mask the length, and so the answer, is lost (tests/test_reverse.c checks that it matters). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"

enum { N = 12,            /* the longest string; T of every batch */
       V = 26, C = 64, H = 4, LAYERS = 2,   /* letters a-z; the model's sizes */
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
    double per_letter;        /* the last evaluation's share of the letters right */
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

/* Strings from rng into rows [first, first + n) of b, which then holds first + n: training ones
 * (any length, not held out), or held-out ones (3 letters or more: the short ones, trained on,
 * would flatter the score). */
static void draw(batch *b, int first, int n, ag_rng *rng, bool held)
{
    b->n = first + n;
    for (int i = first; i < first + n; i++) {
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

/* n strings, letters x [n,N] and key-padding mask real [n,N] (a batch's rows) -> logits [n,N,V],
 * each letter attending to the letters of its string only. */
static ag_tensor *forward(const reverser *R, ag_ctx *ctx, const int *x, const ag_real *real, int n)
{
    ag_tensor *kp = ag_tensor_new2(ctx, n, N);                                      // [n,N]
    if (!kp) return NULL;
    memcpy(kp->data, real, sizeof(ag_real) * (size_t)n * N);
    const ag_forward_opts fo = {.key_padding = kp};
    ag_tensor *h = ag_embedding_layer_forward(ctx, &R->tok, x, n, N);               // [n,N,C]
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
    draw(&((reverser *)user)->b, 0, TRAIN_B, rng, false);   /* the whole batch, on every rank */
    return AG_OK;
}

/* Micro-batch mb's loss per letter, weighed by its share of the batch's letters: the weighed
 * shares add up to the batch's loss per letter, as one process computes it (train.h). */
static ag_status train_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    reverser *R = user;
    mb->dloss = (ag_real)((double)letters(&R->b, mb->first, mb->b) / letters(&R->b, 0, TRAIN_B));
    ag_tensor *logits = forward(R, ctx, R->b.x + mb->first * N, R->b.real + mb->first * N, mb->b);   // [b,N,V]
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

/* The held-out set, the same strings every time: mean loss, exact matches, R->per_letter. */
static ag_status evaluate(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    reverser *R = user;
    ag_rng rng;
    ag_rng_seed(&rng, 0x48454c44ull);   /* "HELD" */
    long right = 0, right_letters = 0, total = 0;
    double loss = 0;
    for (int k = 0; k < R->eval_batches; k++) {
        ag_ctx_reset(ctx);
        draw(&R->b, 0, EVAL_B, &rng, true);
        ag_tensor *logits = forward(R, ctx, R->b.x, R->b.real, EVAL_B);             // [n,N,V]
        ag_tensor *l = ag_cross_entropy_ignore(ctx, logits, R->b.y, IGNORE);   // [1]
        if (!l) return ctx_failed(ctx, err);
        loss += (double)l->data[0];
        right += exact(logits, &R->b, &right_letters);
        total += letters(&R->b, 0, EVAL_B);
    }
    *val = loss / R->eval_batches;
    *score = (double)right / (R->eval_batches * EVAL_B);
    R->per_letter = (double)right_letters / (double)total;
    return AG_OK;
}

/* For the report card: 4 held-out strings of 5 letters or more (a short one says little), each
 * "input -> what the model writes", and whether that is right. */
static ag_status sample(void *user, ag_ctx *ctx, char **text, ag_error *err)
{
    reverser *R = user;
    ag_rng rng;
    ag_rng_seed(&rng, 0x53414d50ull);   /* "SAMP" */
    for (int i = 0; i < 4; i++)
        do draw(&R->b, i, 1, &rng, true);
        while (!R->b.real[i * N + 4]);
    ag_tensor *logits = forward(R, ctx, R->b.x, R->b.real, 4);                      // [4,N,V]
    if (!logits) return ctx_failed(ctx, err);
    char *s = *text = malloc(4 * (2 * N + 16));
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    for (int i = 0; i < 4; i++) {
        char in[N + 1] = "", out[N + 1] = "";
        int len = 0;
        bool right = true;
        for (; len < N && R->b.y[i * N + len] != IGNORE; len++) {
            in[len] = (char)('a' + R->b.x[i * N + len]);
            out[len] = (char)('a' + guess(logits, i, len));
            right = right && out[len] == 'a' + R->b.y[i * N + len];
        }
        s += sprintf(s, "%-12s -> %-12s %s\n", in, out, right ? "right" : "wrong");
    }
    return AG_OK;
}

// --- `reverse serve`: the library's page and API (src/serve/serve.h) over this model ---

static void serve_free(void *user, void *model)
{
    (void)user;
    ag_params_free(((reverser *)model)->P);
    free(model);
}

static void *serve_load(void *user, const char *dir, const char *ckpt, long *iter, ag_error *err)
{
    (void)user, (void)ckpt;   /* DIR/latest's weights: the checkpoint the server found there, or a newer one */
    reverser *R = calloc(1, sizeof *R);
    if (!R) return ag_seterr(err, AG_ERR_NOMEM, "out of memory"), NULL;
    if (model_init(R, 1, err) == AG_OK &&
        ag_train_load(dir, &(ag_train_client){.name = "reverse", .params = R->P}, iter, err) == AG_OK)
        return R;
    serve_free(NULL, R);
    return NULL;
}

static int serve_check(void *model, const char *prompt, char *why, size_t n)
{
    (void)model;
    if (*prompt && strlen(prompt) <= N && !prompt[strspn(prompt, "abcdefghijklmnopqrstuvwxyz")]) return 0;
    return snprintf(why, n, "the prompt is a string of 1 to %d letters a-z", N), 400;
}

static void letter(const void *u, int id, char *out) { (void)u, out[0] = (char)('a' + id), out[1] = '\0'; }

/* The prompt as the model reverses it: its letter at each position, with that position's
 * distribution. Beside other requests on the same model: the letters and ctx are this one's. */
static ag_status serve_sample(void *model, const ag_serve_req *r, ag_serve_sink *k, const volatile sig_atomic_t *stop,
                              ag_error *err)
{
    int len = (int)strlen(r->prompt), x[N] = {0};
    ag_real real[N] = {0};
    for (int t = 0; t < len; t++) x[t] = r->prompt[t] - 'a', real[t] = 1;
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    ag_ctx_set_grad(ctx, false);
    ag_tensor *logits = forward(model, ctx, x, real, 1);                            // [1,N,V]
    ag_status s = logits ? AG_OK : ctx_failed(ctx, err);
    for (int t = 0; s == AG_OK && t < len && t < r->n && !*stop; t++) {
        char *tok = ag_serve_token(guess(logits, 0, t), logits->data + t * V, V, r, letter, NULL);
        bool sent = tok && ag_serve_emit(k, tok);
        free(tok);
        if (!sent) break;
    }
    ag_ctx_free(ctx);
    return s;
}

static int serve(int argc, char **argv)
{
    const ag_serve_client client = {.what = "sample", .load = serve_load, .free = serve_free, .check = serve_check,
                                    .sample = serve_sample};
    ag_serve_args a;
    bool help;
    int stopped_by = 0;
    ag_error err = {0};
    if (ag_serve_parse(&a, argc, argv, &help, &err) == AG_OK && help) return ag_serve_usage(stdout, &client), 0;
    if (err.status == AG_OK) ag_serve_run(&client, &a, NULL, stdout, stderr, &stopped_by, &err);
    if (err.status) return ag_say_error("", err.status, &err);   /* "reverse: ..." (program.h) */
    return stopped_by ? ag_stopped_code(stopped_by) : 0;
}

// --- the command line: the trainer's flags are the library's (ag_train_flag, train.h) ---

static int usage(const char *why, const ag_train_opts *defaults)
{
    char flags[2048];
    ag_train_flags_usage(defaults, flags, sizeof flags);
    fprintf(stderr, "reverse: %s\nusage: reverse train --out DIR [flags]\n       reverse eval --out DIR\n"
            "       reverse serve --run DIR [--port N] [--host H]\nthe flags of train:\n%s", why, flags);
    return 2;
}

/* argv into *train (the command) and o, reverse's run before the flags (one thread: a model this
 * small is as fast on one, and shares the machine); eval takes --out alone. */
static int parse(int argc, char **argv, bool *train, ag_train_opts *o)
{
    *o = (ag_train_opts){.steps = 10000, .seed = 1, .every = 250, .log_every = 250, .grad_clip = 1.0, .threads = 1,
                         .sched = {.lr = LR, .min_lr = 1e-4, .warmup_iters = 100},
                         .adam = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.01},
                         .log = stdout};
    if (argc < 2 || (strcmp(argv[1], "train") && strcmp(argv[1], "eval")))
        return usage("the command is train, eval or serve", o);
    *train = strcmp(argv[1], "train") == 0;
    ag_error err = {0};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        bool mine;
        if (ag_train_flag(o, argc, argv, &i, &mine, &err)) return usage(err.msg, o);
        if (!mine || (!*train && strncmp(a, "--out", 5) != 0))   /* eval: --out alone */
            return ag_seterr(&err, AG_ERR_ARG, "bad argument '%.200s'", a), usage(err.msg, o);
    }
    return ag_train_flags_check(o, TRAIN_B, &err) ? usage(err.msg, o) : 0;
}

#ifndef AG_COMMIT
#define AG_COMMIT NULL   /* the Makefile gives the commit it was built at */
#endif

static int train(reverser *R, const ag_train_opts *flags, ag_dist *dist, ag_error *err)
{
    char config[256], floor[64];   /* the report card's config (DIR/report.md); loss.png's floor */
    snprintf(floor, sizeof floor, "ln V = ln %d: every letter equally likely", V);
    const ag_loss_plot plot = {.title = "reverse: loss per letter (nats)", .floor = log((double)V),
                               .floor_title = floor, .with_val = true};
    snprintf(config, sizeof config, "task = reverse 1 to %d letters a-z\nvocab = %d\nd_model = %d\nn_head = %d\n"
             "n_layer = %d\nbatch = %d\nheld_out = %d strings\nseed = %llu", N, V, C, H, LAYERS, TRAIN_B,
             R->eval_batches * EVAL_B, (unsigned long long)flags->seed);
    /* its blocks hold a GPT's tensors: the larger of a step and an evaluation batch (nn.h) */
    const ag_gpt_config shape = {.vocab_size = V, .n_layer = LAYERS, .n_head = H, .n_embd = C, .block_size = N};
    double step = fmax(ag_gpt_step_bytes(&shape, TRAIN_B, true), ag_gpt_step_bytes(&shape, EVAL_B, false));
    const ag_train_client client = {.name = "reverse", .params = R->P, .user = R, .batch = TRAIN_B, .step_bytes = step,
                                    .draw = train_draw, .loss = train_loss, .evaluate = evaluate, .score_name = "exact match", .config = config,
                                    .unit = "strings", .units_per_step = TRAIN_B, .commit = AG_COMMIT, .plot = &plot,
                                    .sample = sample};
    ag_train_opts o = *flags;
    o.seed = ag_seed_mix(flags->seed, 0x62617463ull);   /* the batches' stream, apart from the weights' */
    o.sched.lr_decay_iters = o.steps;
    o.dist = dist;
    ag_train_result r;
    if (ag_train_run(&client, &o, &r, err)) return 1;
    if (ag_dist_rank(dist) == 0)   /* rank 0 speaks for the job */
        printf("%s at step %ld (%s/%s) in %.1f s: held-out exact match %.4f\n", r.stop_signal ? "stopped" :
           r.out_of_time ? "out of time" : "done", r.step, o.out_dir, r.ckpt, r.wall_s, r.score);
    if (r.lr_find.steps > 0 && ag_dist_rank(dist) == 0)
        printf("lr-find over %d steps: the loss falls fastest at lr %.2g; lowest %.3f at lr %.2g\n", r.lr_find.steps,
               r.lr_find.steepest_lr, r.lr_find.min_loss, r.lr_find.min_lr);
    return r.stop_signal ? ag_stopped_code(r.stop_signal) : 0;
}

static int eval(reverser *R, const char *dir, ag_error *err)
{
    long step;
    if (ag_train_load(dir, &(ag_train_client){.name = "reverse", .params = R->P}, &step, err)) return 1;
    ag_threads_init(1);   /* as train runs it */
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) return ag_seterr(err, AG_ERR_NOMEM, "out of memory"), 1;
    ag_ctx_set_grad(ctx, false);
    R->eval_batches = 8;
    double val, score;
    ag_status s = evaluate(R, ctx, &val, &score, err);
    ag_ctx_free(ctx);
    if (s) return 1;
    printf("step %ld: held-out exact match %.4f (%d strings), per letter %.4f, loss %.4f\n", step, score,
           R->eval_batches * EVAL_B, R->per_letter, val);
    return 0;
}

int main(int argc, char **argv)
{
    ag_train_name("reverse", "REVERSE");   /* messages and $REVERSE_FAULT (train.h) */
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) return serve(argc, argv);
    bool training = false;
    ag_train_opts o;
    int rc = parse(argc, argv, &training, &o);
    if (rc) return rc;
    reverser R = {.eval_batches = 2};
    ag_error err = {0};
    ag_dist *dist = NULL;   /* under mpirun, build/reverse_mpi's rank of the job (dist.h); else alone */
    if (training && ag_dist_init(&dist, 60, &err)) rc = 1;
    else if (model_init(&R, o.seed, &err) == AG_OK) rc = training ? train(&R, &o, dist, &err) : eval(&R, o.out_dir, &err);
    else rc = 1;
    if (err.status)   /* rank 0 says what every rank met alike (a bad input); another rank, "rank R: ..." */
        ag_say_rank_error(dist, "", err.status, &err, err.status == AG_ERR_ARG);
    if (err.status == AG_ERR_ARG) ag_dist_after_rank0(dist);   /* rank 0 says it: mpirun must not end the job first */
    ag_params_free(R.P);
    ag_dist_end(dist, !err.status);
    return err.status ? 1 : rc;
}
