/* test_train_run.c -- ag_train_run (src/train/train.h) called in this process, as a program
 * with a model of its own calls it (lesson 19, examples/out_of_tree/trainer.c):
 *
 *   fresh_twice   a fresh run starts AdamW from zero moments: a second fresh run on the same
 *                 ag_params, its weights drawn again, ends with the very weights of a run on a
 *                 model built anew (the first run's m and v once leaked into it).
 *   resume_keeps_train_loss  a resume's repeated evaluation has the unbroken run's train_loss
 *                 (the checkpoint keeps the losses since the last evaluation); a checkpoint
 *                 without them, from before, resumes with that cell empty.
 *   too_big_refused  a client whose step the machine cannot hold is refused before DIR is made.
 *   alone_under_mpirun  a build without MPI that mpirun started several times is refused before
 *                 DIR is made (each process would train on its own into one DIR).
 *   moved_mid_run `mv DIR DIR.old; mkdir DIR` while the run goes on: its checkpoint goes into the
 *                 directory it locked (DIR.old), nothing into the new DIR, and the run stops
 *                 saying where it went (issue 35's guarantee, char_lm's since, the library's now).
 *   own_format    a client's own checkpoint files (ag_train_format: other names, other keys, as
 *                 char_lm's MODEL.md files are): a run killed halfway through a checkpoint and one
 *                 stopped by SIGTERM resume exactly as the unbroken run went, in those files; a
 *                 format's origin call gives a fresh run's origin; a resume takes the evaluation
 *                 its checkpoint saved instead of making it again; a format without its read
 *                 call is refused.
 *   own_update    a client's optimizer (ag_train_client.update) in place of AdamW: called once a
 *                 step with t counting the updates, the weights moved by it alone; its failure
 *                 stops the run with its status and message.
 *   own_pass      a client's own forward and backward (ag_train_client.pass, as char_lm's split
 *                 over threads) trains the very weights of the loop's forward_backward, and its
 *                 start call gets the loop's ctx once, before the first pass; with step_seed
 *                 each step's micro-batch seed is drawn from the client's seed of that step.
 *   overwrite     a fresh run where one is refused; with opts.overwrite it starts over, says so
 *                 on the log, and the old run's checkpoint goes once the new one's is committed;
 *                 with opts.warn the warnings (that, what DIR's tidy left alone) go to the
 *                 program's call instead, none on the log.
 *   no_val        with evaluate_train, a NaN validation loss (no held-out split): the training
 *                 loss picks DIR/best, and no divergence is seen in the NaN; opts.no_report: no
 *                 DIR/report.md from the loop, opts.no_pictures: no loss.png (own_columns': both)
 *   own_card      a client's card: its config as JSON (no trainer's table), its rate unit, no score
 *                 row without a score, the pictures of its own that this run drew (opts.pictures),
 *                 its end call before the card
 *   own_columns   a client's training loss (evaluate_train) and metrics.csv columns of its own
 *                 (columns, row), and opts.eval_at_start: an evaluation at step 0 too.
 *   own_words     a client's log lines (progress_text, eval_text) and metrics.csv without the
 *                 score column (no_score); a validation loss that is NaN is an empty cell.
 *   progress_tty  opts.progress tty: the step line redrawn in place ("\r ESC[K", no newline),
 *                 the evaluation's line clearing it first; the log ends with a whole line. In
 *                 a file a line after the steps it with (it + 1) % log_every == 0, with
 *                 opts.log_first with it % log_every == 0 and the last (char_lm's).
 *   own_stop      the program's own stop flag (opts.stop, its handlers: char_lm's SIGUSR1 too)
 *                 ends the run as a signal does, with a checkpoint and that signal in the result;
 *                 the loop leaves the program's handlers alone.
 *   in_words      the messages that stop a run in a client's words (count, lr_name,
 *                 diverge_floor_name), as char_lm says them: a loss that turns NaN, a diverged
 *                 validation loss, each naming what DIR keeps.
 *   parents       opts.make_parents makes DIR's missing parents (without it: refused, said);
 *                 after_step sees every step's loss; a resume's start call sees where it starts.
 *   own_acts      --log-activations on a GPT client with its own forward to read
 *                 (activations_forward): called at each evaluation, a row of activations.csv each.
 *   diverged      with opts.diverge_floor, an evaluation far above the best (or NaN at the
 *                 first) stops the run with AG_ERR_NONFINITE before its checkpoint, the message
 *                 naming the limit and what stays; without it the same run goes to the end.
 *   full_disk     every row of metrics.csv and every line of the log out at once: a file size
 *                 limit stops the run at the first row refused, a log on a full disk at its first
 *                 line, each AG_ERR_IO saying what is kept (char_lm's guarantee).
 *   own_lock      opts.lock: the program's lock on DIR, held before the run, is the run's (no
 *                 second lock refuses it) and still held after it; one not held yet is taken
 *                 by the loop and left held for the program.
 *   stop_in_eval  a stop signal during an evaluation (cut short: its loss NaN) ends the run
 *                 there with a checkpoint, as one before a step does: no divergence seen in
 *                 what it did not finish, no step more (char_lm's answer to Ctrl-C in a long
 *                 evaluation).
 *   own_ddp       opts.ddp_out: the client's evaluation sees the loop's split of the step (one
 *                 rank, two micro-batches), set before it and cleared when the run ends.
 *   own_batch_flag  a batch that ranks x grad_accum do not divide, said with the client's flag
 *                 (batch_flag: "try --points 20"), before DIR is made; draw, the step's first
 *                 call, sees the last step's gradients (char_lm's hook before a step reads them).
 *   own_format_legacy  a format with an older layout (its files in DIR itself, no latest, as
 *                 char_lm's first checkpoints) resumes from it as the unbroken run went, its first
 *                 checkpoint superseding those files. */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "attograd.h"
#include "proc.h"

/* AdamW as MODEL.md has it, without weight decay (its fields named: a new one reads as 0) */
#define ADAM_NO_DECAY {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0}

enum { IN = 2, OUT = 2, BATCH = 16 };

typedef struct {
    ag_params *P;
    ag_linear_layer fc;
    ag_real x[BATCH * IN];
    int y[BATCH];
    const char *move, *to;   /* moved_mid_run: the run directory renamed at the 5th draw, a new one made */
    int draws;
    const ag_train_format *format;   /* own_format: its checkpoint files (NULL: the loop's) */
    int stop_at;             /*   SIGTERM at this draw (0: never) */
    volatile sig_atomic_t *flag;   /* own_stop: set to SIGUSR1 at the 5th draw (NULL: never), */
    void (*seen)(int);       /*   when SIGTERM's handler was this */
    int poison_at;           /* in_words: a weight made NaN at this draw (0: never) */
    int train_evals;         /* own_columns: evaluate_train's calls */
    int eval_calls;          /* own_format: tiny_eval's calls */
    ag_ddp *ddp;             /* own_ddp: the loop's (opts.ddp_out), */
    int ddp_evals;           /*   seen by this many evaluations */
    double grad_seen[4];     /* own_batch_flag: the gradients' sum |dW| each draw saw, */
    int seen_n;              /*   the draws */
    int term_at_eval;        /* stop_in_eval: SIGTERM during this call of tiny_eval, its loss NaN (0: never) */
    double losses[16];       /* parents: each step's loss (after_step), */
    long stepped, started_at;   /*   how many steps, the step the start call saw */
    long kill_at;            /*   SIGKILL halfway through the checkpoint of this step (-1: never) */
    int drawn;
    const double *evals;     /* diverged: the evaluation losses in turn (NULL: 1 each) */
    int evaluated;
    long updates, fail_at;   /* own_update: the updates made, the t that fails (0: none) */
    ag_ctx *started;         /* own_pass: the ctx start was given */
    int starts, passes;
    long seed_it;            /*   the step whose seed step_seed gave last (-1: none yet) */
} tiny;

/* BATCH points from rng, class 1 above the diagonal */
static ag_status tiny_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    tiny *m = user;
    if (m->stop_at && ++m->drawn == m->stop_at) raise(SIGTERM);   /* the step goes on, the run stops after it */
    if (m->flag && ++m->draws == 5) {
        struct sigaction now;
        sigaction(SIGTERM, NULL, &now);
        m->seen = now.sa_handler;
        *m->flag = SIGUSR1;
    }
    if (m->move && ++m->draws == 5) {
        ck_assert_int_eq(rename(m->move, m->to), 0);
        ck_assert_int_eq(mkdir(m->move, 0777), 0);
    }
    if (m->poison_at && ++m->drawn == m->poison_at) m->P->data[0] = (ag_real)NAN;
    for (size_t i = 0; i < m->P->total && m->seen_n < 4; i++) m->grad_seen[m->seen_n] += fabs((double)m->P->grad[i]);
    m->seen_n++;
    for (int i = 0; i < BATCH; i++) {
        m->x[i * IN] = (ag_real)ag_rng_uniform(rng);
        m->x[i * IN + 1] = (ag_real)ag_rng_uniform(rng);
        m->y[i] = m->x[i * IN + 1] > m->x[i * IN];
    }
    return AG_OK;
}

/* The loss of a linear classifier on points [mb->first, mb->first + mb->b) of the batch */
static ag_status tiny_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    tiny *m = user;
    ag_tensor *x = ag_tensor_new2(ctx, mb->b, IN);                               // [b,IN]
    if (!x) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    memcpy(x->data, m->x + mb->first * IN, sizeof(ag_real) * mb->b * IN);
    *loss = ag_cross_entropy(ctx, ag_linear_layer_forward(ctx, &m->fc, x), m->y + mb->first);   // [b,OUT] -> [1]
    return *loss ? AG_OK : ag_seterr(err, AG_ERR_NOMEM, "%s", ag_ctx_error(ctx));
}

static ag_status tiny_eval(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    (void)ctx, (void)err;
    tiny *m = user;
    m->eval_calls++;
    *val = m->evals ? m->evals[m->evaluated++] : 1;
    *score = NAN;
    if (m->eval_calls == m->term_at_eval) raise(SIGTERM), *val = NAN;   /* cut short before its first batch */
    return AG_OK;
}

static void tiny_build(tiny *m)
{
    memset(m, 0, sizeof *m);
    ck_assert_ptr_nonnull(m->P = ag_params_new());
    ck_assert_int_eq(ag_linear_layer_init(&m->fc, m->P, "fc", IN, OUT, true, 1.0), AG_OK);
    ck_assert_int_eq(ag_params_alloc(m->P), AG_OK);
    ag_params_init(m->P, 3);
}

/* m trained into root/name up to `steps` (a fresh run, or the one there with resume), evaluated every `every` */
static void tiny_train(tiny *m, const char *root, const char *name, long steps, long every, bool resume)
{
    char out[256];
    snprintf(out, sizeof out, "%s/%s", root, name);
    const ag_train_client c = {.name = "tiny", .params = m->P, .user = m, .batch = BATCH,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval, .format = m->format};
    const ag_train_opts o = {.out_dir = out, .steps = steps, .seed = 5, .every = every, .resume = resume,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s: %s", name, err.msg);
}

/* 30 fresh steps of m into root/name */
static void tiny_run(tiny *m, const char *root, const char *name) { tiny_train(m, root, name, 30, 30, false); }

START_TEST(fresh_twice)
{
    char root[] = "/tmp/ag_train_run_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny a, b;
    tiny_build(&a);
    tiny_build(&b);
    tiny_run(&a, root, "first");
    ag_params_init(a.P, 3);   /* the same weights as at the start, in the same store */
    tiny_run(&a, root, "again");
    tiny_run(&b, root, "built_anew");
    size_t differ = 0;
    for (size_t i = 0; i < a.P->total; i++) differ += a.P->data[i] != b.P->data[i];
    ck_assert_msg(differ == 0, "%zu of %zu weights of a second fresh run on the same ag_params differ from a run on "
                  "a model built anew: the first run's Adam moments leaked into it", differ, a.P->total);
    ag_params_free(a.P);
    ag_params_free(b.P);
    proc_remove_tree(root);
}
END_TEST

/* dir/latest's state.safetensors written again without the keys of the losses since the last
 * evaluation, as a checkpoint from before them was; m holds its weights and moments. */
static void strip_losses(const char *dir, tiny *m)
{
    const char *keys[] = {"format", "step", "rng_state", "rng_inc", "weights", "best_loss", "best_step", "run_id",
                          "follows", "origin"};
    char path[512], vals[10][64];
    ag_st_meta meta[10];
    ag_error err = {0};
    snprintf(path, sizeof path, "%s/state.safetensors", proc_ckpt(dir));
    ag_st_file *f = ag_st_load_header(path, &err);
    ck_assert_msg(f && ag_st_meta_get(f, "loss_sum"), "%s: no loss_sum in its metadata", path);
    for (int i = 0; i < 10; i++) {
        ck_assert_ptr_nonnull(ag_st_meta_get(f, keys[i]));
        snprintf(vals[i], sizeof vals[i], "%s", ag_st_meta_get(f, keys[i]));
        meta[i] = (ag_st_meta){keys[i], vals[i]};
    }
    ag_st_free(f);
    ck_assert_int_eq(ag_ckpt_write_moments(path, m->P, meta, 10, &err), AG_OK);
}

/* The train_loss cell of root/name/metrics.csv's row "<row>,..." whose lr is set (the step's row). */
static void train_loss_cell(const char *root, const char *name, const char *row, char *cell)
{
    char path[512], head[32];
    snprintf(path, sizeof path, "%s/%s/metrics.csv", root, name);
    snprintf(head, sizeof head, "\n%s,", row);
    char *text = proc_read_file(path, NULL);
    ck_assert_ptr_nonnull(text);
    const char *at = strstr(text, head);
    ck_assert_msg(at != NULL, "%s: no row %s", path, row);
    at += strlen(head);
    for (int comma = 0; comma < 2; comma++) at = strchr(at, ',') + 1;   /* past lr and loss */
    size_t n = strcspn(at, ",");
    memcpy(cell, at, n);
    cell[n] = '\0';
    free(text);
}

/* A resume finds in the checkpoint the batch losses since the last evaluation: the evaluation
 * it repeats has the train_loss of the unbroken run; a checkpoint without them (older) still
 * resumes, that one cell empty. */
START_TEST(resume_keeps_train_loss)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", dir[256], cell[3][64];
    ck_assert_ptr_nonnull(mkdtemp(root));
    const char *names[] = {"unbroken", "resumed", "old"};
    for (int k = 0; k < 3; k++) {
        tiny m;
        tiny_build(&m);
        if (k) tiny_train(&m, root, names[k], 20, 10, false);
        snprintf(dir, sizeof dir, "%s/%s", root, names[k]);
        if (k == 2) strip_losses(dir, &m);
        tiny_train(&m, root, names[k], 30, 10, k > 0);
        train_loss_cell(root, names[k], "20", cell[k]);
        ag_params_free(m.P);
        ck_assert_msg(k != 1 || (cell[0][0] && strcmp(cell[1], cell[0]) == 0),
                      "step 20's train_loss: '%s' resumed, '%s' unbroken", cell[1], cell[0]);
    }
    ck_assert_msg(cell[2][0] == '\0', "a checkpoint without the losses: step 20's train_loss '%s', not empty",
                  cell[2]);
    proc_remove_tree(root);
}
END_TEST

/* A run of the tiny client with this step_bytes that ag_train_run refuses with AG_ERR_ARG
 * before DIR is made; why in err. */
static void refused_before_dir(double step_bytes, ag_error *err)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(out, sizeof out, "%s/run", root);
    tiny m;
    tiny_build(&m);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .step_bytes = step_bytes,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = out, .steps = 1, .every = 1, .sched = {.lr = 0.1}, .threads = 1};
    ag_train_result r;
    ck_assert_int_eq(ag_train_run(&c, &o, &r, err), AG_ERR_ARG);
    ck_assert(access(out, F_OK) != 0);
    ag_params_free(m.P);
    proc_remove_tree(root);
}

/* A client's step_bytes that this machine cannot hold: the run is refused before DIR is made,
 * with the figures (train.h), as char_lm's own train is. */
START_TEST(too_big_refused)
{
    ag_error err = {0};
    refused_before_dir(1e18, &err);
    ck_assert_msg(strstr(err.msg, "tiny: a model of 6 parameters at batch 16 needs about 1000000.0 TB of memory for "
                         "one step, more than ") && strstr(err.msg, "; refused before allocating"), "%s", err.msg);
}
END_TEST

/* A build without MPI that mpirun started several times (its environment says so): refused
 * before DIR is made, as char_lm is, since each process would write its own run into DIR. */
START_TEST(alone_under_mpirun)
{
    ag_error err = {0};
    setenv("OMPI_COMM_WORLD_SIZE", "3", 1);
    refused_before_dir(0, &err);
    unsetenv("OMPI_COMM_WORLD_SIZE");
    ck_assert_str_eq(err.msg, "this tiny has no MPI, so under mpirun each process would train on its own; run its MPI build");
}
END_TEST

START_TEST(moved_mid_run)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", run[64], old[64];
    ck_assert_ptr_nonnull(mkdtemp(root));
    snprintf(run, sizeof run, "%s/run", root);
    snprintf(old, sizeof old, "%s/run.old", root);
    tiny m;
    tiny_build(&m);
    m.move = run;
    m.to = old;
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = run, .steps = 30, .seed = 5, .every = 10,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_IO);
    ck_assert_msg(strstr(err.msg, "was moved to") && strstr(err.msg, "run.old") && strstr(err.msg, "step 10") &&
                  !strstr(err.msg, "/proc/"), "%s", err.msg);
    char latest[64];
    ck_assert_int_eq(ag_ckpt_pointer(old, AG_CKPT_LATEST, latest, &err), AG_OK);
    ck_assert_str_eq(latest, "ckpt-00000010");
    char found[256];
    ck_assert_int_eq(ag_ckpt_list(run, found, sizeof found), 0);   /* nothing written into the new one */
    ck_assert_int_ne(ag_ckpt_pointer(run, AG_CKPT_LATEST, latest, &err), AG_OK);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

// --- own_format: a client's own checkpoint files (ag_train_format), as char_lm's are ---

#define TF_WEIGHTS "weights.safetensors"
#define TF_STATE "train_state.safetensors"

/* The metadata value key of f, which must be there. */
static const char *tf_get(const ag_st_file *f, const char *key)
{
    const char *v = ag_st_meta_get(f, key);
    ck_assert_msg(v != NULL, "no \"%s\" in a tiny checkpoint's metadata", key);
    return v;
}

/* v in buf [40] as a metadata value: decimal, or with hex 16 hex digits (ag_hex64_format's). */
static const char *tf_u64(char *buf, uint64_t v, bool hex)
{
    snprintf(buf, 40, hex ? "%016" PRIx64 : "%" PRIu64, v);
    return buf;
}

/* dir/TF_WEIGHTS: the weights, the config as JSON, the format tag "tiny-1", the iteration, the
 * run; dir/TF_STATE: the moments and the loop's state under keys of its own (decimal rng). */
static ag_status tf_write(const ag_train_client *c, const char *tmp, const ag_train_state *st, ag_error *err)
{
    const tiny *m = c->user;
    char path[512], it[32], best[40], bi[32], sum[40], n[32], u[6][40], es[32], vl[40];
    snprintf(it, sizeof it, "%ld", st->step);
    snprintf(es, sizeof es, "%ld", st->eval_step);
    snprintf(vl, sizeof vl, "%.17g", st->val_loss);
    snprintf(best, sizeof best, "%.17g", st->best_loss);
    snprintf(bi, sizeof bi, "%ld", st->best_step);
    snprintf(sum, sizeof sum, "%.17g", st->loss_sum);
    snprintf(n, sizeof n, "%ld", st->loss_n);
    const char *run = tf_u64(u[0], st->run_id, true);
    const ag_st_meta model[] = {{"format", "tiny-1"}, {"config", "{\"in\": 2, \"out\": 2}"}, {"iter", it},
                                {"run_id", run}};
    const ag_st_meta state[] = {{"format", "tiny-train-1"}, {"iter", it},
                                {"rng_state", tf_u64(u[1], st->rng.state, false)},
                                {"rng_inc", tf_u64(u[2], st->rng.inc, false)},
                                {"model_hash", tf_u64(u[3], ag_weights_hash(c->params), true)},
                                {"best_iter", bi}, {"best_loss", best}, {"run_id", run},
                                {"follows", tf_u64(u[4], st->prev_hash, true)},
                                {"origin", tf_u64(u[5], st->origin, true)}, {"loss_sum", sum}, {"loss_n", n},
                                {"loss_taken", st->loss_taken ? "1" : "0"}, {"eval_step", es}, {"val_loss", vl}};
    snprintf(path, sizeof path, "%s/%s", tmp, TF_WEIGHTS);
    ag_status s = ag_ckpt_write_weights(path, c->params, model, 4, err);
    if (s == AG_OK && m->kill_at == st->step) raise(SIGKILL);   /* a kill with half a checkpoint written */
    snprintf(path, sizeof path, "%s/%s", tmp, TF_STATE);
    return s ? s : ag_ckpt_write_moments(path, c->params, state, 15, err);
}

/* The state file f (read from path) into st and the moments; its weights' hash checked. */
static ag_status tf_read_state(const ag_train_client *c, const ag_st_file *f, const char *path, ag_train_state *st,
                               ag_error *err)
{
    ck_assert_str_eq(tf_get(f, "format"), "tiny-train-1");
    ck_assert_int_eq(sscanf(tf_get(f, "rng_state"), "%" SCNu64, &st->rng.state), 1);
    ck_assert_int_eq(sscanf(tf_get(f, "rng_inc"), "%" SCNu64, &st->rng.inc), 1);
    st->best_loss = strtod(tf_get(f, "best_loss"), NULL);
    st->best_step = strtol(tf_get(f, "best_iter"), NULL, 10);
    st->run_id = ag_st_meta_hex(f, "run_id");
    st->origin = ag_st_meta_hex(f, "origin");
    st->loss_sum = strtod(tf_get(f, "loss_sum"), NULL);
    st->loss_n = strtol(tf_get(f, "loss_n"), NULL, 10);
    st->loss_taken = tf_get(f, "loss_taken")[0] == '1';
    st->eval_step = strtol(tf_get(f, "eval_step"), NULL, 10);   /* the evaluation saved with it */
    st->val_loss = strtod(tf_get(f, "val_loss"), NULL);
    st->train_loss = NAN;
    if (strtol(tf_get(f, "iter"), NULL, 10) != st->step || ag_st_meta_hex(f, "model_hash") != ag_weights_hash(c->params))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not of its weights' iteration", path);
    return ag_ckpt_read_moments(f, path, c->params, err);
}

static ag_status tf_read(const ag_train_client *c, const char *where, ag_train_state *st, bool all, ag_error *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", where, TF_WEIGHTS);
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return err->status;
    ag_status s = strcmp(tf_get(f, "format"), "tiny-1") ? ag_seterr(err, AG_ERR_FORMAT, "%s: not tiny's", path)
                                                         : ag_ckpt_read_weights(f, path, c->params, err);
    st->step = strtol(tf_get(f, "iter"), NULL, 10);
    ag_st_free(f);
    if (s || !all) return s;
    snprintf(path, sizeof path, "%s/%s", where, TF_STATE);
    if (!(f = ag_st_load(path, err))) return err->status;
    s = tf_read_state(c, f, path, st, err);
    ag_st_free(f);
    return s;
}

/* Whose a tiny checkpoint is, from its two headers (ckpt_keep.c's rules). */
static ag_status tf_pair(const ag_st_file *m, const ag_st_file *t, const char *path, const void *user, ag_ckpt_id *id,
                         ag_error *err)
{
    (void)user;
    const char *mf = ag_st_meta_get(m, "format"), *tf = ag_st_meta_get(t, "format");
    if (!mf || strcmp(mf, "tiny-1") || !tf || strcmp(tf, "tiny-train-1"))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a tiny checkpoint", path);
    id->run_id = ag_st_meta_hex(t, "run_id");
    id->iter = strtol(tf_get(t, "iter"), NULL, 10);
    id->model_hash = ag_st_meta_hex(t, "model_hash");
    id->follows = ag_st_meta_hex(t, "follows");
    id->origin = id->follows ? 0 : ag_st_meta_hex(t, "origin");
    id->best_iter = strtol(tf_get(t, "best_iter"), NULL, 10);
    if (id->best_iter == id->iter) id->eval = strtod(tf_get(t, "best_loss"), NULL);
    return AG_OK;
}

static ag_status tf_identify(const char *path, ag_ckpt_id *id, ag_error *err)
{
    return ag_ckpt_identify_pair(path, TF_WEIGHTS, TF_STATE, tf_pair, NULL, id, err);
}

static const char *const tf_files[] = {TF_WEIGHTS, TF_STATE, NULL};
static const ag_ckpt_kind tf_kind = {.files = tf_files, .identify = tf_identify};
static const ag_train_format tf_format = {.kind = &tf_kind, .write = tf_write, .read = tf_read, .count = "iteration"};
/* own_format_legacy's older layout: the two files in DIR itself (as char_lm's first checkpoints) */
static bool tf_file_id(const char *path, ag_ckpt_id *id)
{
    ag_error err = {0};
    ag_st_file *f = ag_st_load_header(path, &err);
    const char *iter = f ? ag_st_meta_get(f, "iter") : NULL;
    if (iter) id->run_id = ag_st_meta_hex(f, "run_id"), id->iter = strtol(iter, NULL, 10);
    ag_st_free(f);
    return iter != NULL;
}
static const ag_ckpt_kind tf_kind_legacy = {.files = tf_files, .identify = tf_identify, .legacy = true,
                                            .file_id = tf_file_id};
static const ag_train_format tf_format_legacy = {.kind = &tf_kind_legacy, .write = tf_write, .read = tf_read,
                                                 .count = "iteration"};
/* own_format's origin: the untrained weights' hash, as char_lm's (its iteration 0's model_hash) */
static uint64_t tf_origin(const ag_train_client *c, uint64_t seed)
{
    (void)seed;
    return ag_weights_hash(c->params);
}
static const ag_train_format tf_format_origin = {.kind = &tf_kind, .write = tf_write, .read = tf_read,
                                                 .origin = tf_origin, .count = "iteration"};

/* root/name's latest checkpoint is ckpt-<step>, of tiny's files alone. */
static void tf_latest_is(const char *root, const char *name, const char *want)
{
    char dir[256], latest[64];
    ag_error err = {0};
    snprintf(dir, sizeof dir, "%s/%s", root, name);
    ck_assert_int_eq(ag_ckpt_pointer(dir, AG_CKPT_LATEST, latest, &err), AG_OK);
    ck_assert_str_eq(latest, want);
    ck_assert(access(proc_path(proc_ckpt(dir), TF_STATE), F_OK) == 0);
    ck_assert_msg(access(proc_path(proc_ckpt(dir), "model.safetensors"), F_OK) != 0, "%s: the loop's files", dir);
}

/* m's weights are u's: bit for bit in float; in double within 1e-6, a checkpoint holding them
 * in float (ckpt.c's layout). */
static void tf_same_weights(const tiny *m, const tiny *u, const char *name)
{
    double tol = sizeof(ag_real) == sizeof(float) ? 0 : 1e-6;
    for (size_t i = 0; i < u->P->total; i++)
        ck_assert_msg(fabs((double)m->P->data[i] - (double)u->P->data[i]) <= tol * (1 + fabs((double)u->P->data[i])),
                      "%s: weight %zu is %.9g, the unbroken run's %.9g", name, i, (double)m->P->data[i],
                      (double)u->P->data[i]);
}

/* root/name/metrics.csv is root/unbroken/metrics.csv, and m's weights u's. */
static void tf_same_run(const char *root, const char *name, const tiny *m, const tiny *u)
{
    char a[256], b[256];
    snprintf(a, sizeof a, "%s/unbroken/metrics.csv", root);
    snprintf(b, sizeof b, "%s/%s/metrics.csv", root, name);
    char *ta = proc_read_file(a, NULL), *tb = proc_read_file(b, NULL);
    ck_assert(ta && tb);
    ck_assert_msg(strcmp(ta, tb) == 0, "%s resumed: metrics.csv\n%s\nunbroken:\n%s", name, tb, ta);
    free(ta);
    free(tb);
    tf_same_weights(m, u, name);
}

/* A client's own format: a run killed halfway through a checkpoint, and one stopped by SIGTERM
 * between evaluations, resume exactly (metrics.csv and the weights of the unbroken run), their
 * files are the client's with its keys, and ag_train_load reads them. */
START_TEST(own_format)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", dir[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    pid_t pid = fork();   /* first, before this process has trained (its threads) */
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        tiny k;
        tiny_build(&k);
        k.format = &tf_format;
        k.kill_at = 20;
        tiny_train(&k, root, "killed", 30, 10, false);
        _exit(3);
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "the run was not killed (status %d)", status);
    tf_latest_is(root, "killed", "ckpt-00000010");
    tiny u, k, s, l;
    tiny_build(&u);
    u.format = k.format = &tf_format;
    tiny_train(&u, root, "unbroken", 30, 10, false);
    tiny_build(&k);
    k.format = &tf_format;
    tiny_train(&k, root, "killed", 30, 10, true);
    ck_assert_int_eq(k.eval_calls, 2);   /* at 20 and 30: 10's was saved with its checkpoint */
    tf_same_run(root, "killed", &k, &u);
    tiny_build(&s);
    s.format = &tf_format;
    s.stop_at = 15;
    tiny_train(&s, root, "stopped", 30, 10, false);
    tf_latest_is(root, "stopped", "ckpt-00000015");
    s.stop_at = 0;
    tiny_train(&s, root, "stopped", 30, 10, true);
    tf_same_run(root, "stopped", &s, &u);
    tf_latest_is(root, "unbroken", "ckpt-00000030");
    snprintf(dir, sizeof dir, "%s/unbroken", root);
    ag_error err = {0};
    ag_st_file *f = ag_st_load_header(proc_path(proc_ckpt(dir), TF_WEIGHTS), &err);
    ck_assert_ptr_nonnull(f);
    ck_assert_str_eq(tf_get(f, "config"), "{\"in\": 2, \"out\": 2}");
    ck_assert_str_eq(tf_get(f, "iter"), "30");
    ag_st_free(f);
    tiny_build(&l);
    long step = -1;
    const ag_train_client c = {.name = "tiny", .params = l.P, .format = &tf_format};
    ck_assert_msg(ag_train_load(dir, &c, &step, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(step, 30);
    tf_same_weights(&l, &u, "ag_train_load");
    const ag_train_format half = {.kind = &tf_kind, .write = tf_write};   /* no read: refused, said */
    const ag_train_client h = {.name = "tiny", .params = l.P, .format = &half};
    ck_assert_int_eq(ag_train_load(dir, &h, &step, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "format has no files, identify, write or read call"), "%s", err.msg);
    ag_params_free(u.P), ag_params_free(k.P), ag_params_free(s.P), ag_params_free(l.P);
    proc_remove_tree(root);
}
END_TEST

/* A run of m into root/name (30 steps, an evaluation every 10) with diverge_floor: its status, err's message. */
static ag_status tiny_diverge(tiny *m, const char *root, const char *name, double floor, ag_error *err)
{
    char out[256];
    snprintf(out, sizeof out, "%s/%s", root, name);
    const ag_train_client c = {.name = "tiny", .params = m->P, .user = m, .batch = BATCH,
                               .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = out, .steps = 30, .seed = 5, .every = 10, .diverge_floor = floor,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    return ag_train_run(&c, &o, &r, err);
}

/* own_update's optimizer: W -= 0.5 lr at every weight, whatever the gradient; t checked in turn */
static ag_status tiny_update(void *user, ag_params *P, double lr, long t, double clip, ag_error *err)
{
    tiny *m = user;
    ck_assert_int_eq(t, ++m->updates);
    ck_assert(clip > 0 && clip <= 1);
    if (t == m->fail_at) return ag_seterr(err, AG_ERR_NONFINITE, "update %ld refused", t);
    for (size_t i = 0; i < P->total; i++) P->data[i] -= (ag_real)(0.5 * lr);
    return AG_OK;
}

/* A fresh run's origin is its format's when the format gives one. */
START_TEST(own_format_origin)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", dir[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny o;
    tiny_build(&o);
    o.format = &tf_format_origin;
    uint64_t untrained = ag_weights_hash(o.P);
    tiny_train(&o, root, "origin", 10, 10, false);
    snprintf(dir, sizeof dir, "%s/origin", root);
    ag_error err = {0};
    ag_st_file *f = ag_st_load_header(proc_path(proc_ckpt(dir), TF_STATE), &err);
    ck_assert_ptr_nonnull(f);
    ck_assert_msg(ag_st_meta_hex(f, "origin") == untrained, "origin %s, not the untrained weights' hash %016llx",
                  tf_get(f, "origin"), (unsigned long long)untrained);
    ag_st_free(f);
    ag_params_free(o.P);
    proc_remove_tree(root);
}
END_TEST

START_TEST(own_update)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    ag_real w0 = m.P->data[0];
    snprintf(out, sizeof out, "%s/u", root);
    ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                         .loss = tiny_loss, .evaluate = tiny_eval, .update = tiny_update};
    ag_train_opts o = {.out_dir = out, .steps = 6, .seed = 5, .every = 3, .sched = {.lr = 0.1, .min_lr = 0.1},
                       .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.updates, 6);
    ck_assert_msg(fabs((double)(w0 - m.P->data[0]) - 6 * 0.05) < 1e-5, "the weight moved %g, not 0.3: not the client's "
                  "update alone", (double)(w0 - m.P->data[0]));
    o.resume = true;
    o.steps = 10;
    m.fail_at = 9;
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_NONFINITE);   /* t goes on from the checkpoint */
    ck_assert_str_eq(err.msg, "update 9 refused");
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* own_pass's client: the loss on the tape, then its backward, by the client itself */
static ag_status tiny_pass(void *user, ag_ctx *ctx, ag_micro *mb, double *loss, ag_error *err)
{
    tiny *m = user;
    ck_assert_ptr_eq(ctx, m->started);
    ck_assert_int_eq(m->seed_it, m->passes);   /* this step's seed asked for: one pass a step */
    ag_micro want;
    ck_assert(ag_micro_of(1, 0, 1, 0, BATCH, 0xABCull + (uint64_t)m->seed_it, &want));
    ck_assert_uint_eq(mb->seed, want.seed);      /* mb's masks drawn from it */
    m->passes++;
    ag_tensor *l = NULL;
    ag_status s = tiny_loss(user, ctx, mb, &l, err);
    if (s) return s;
    *loss = (double)l->data[0];
    return ag_backward_from(ctx, l, &mb->dloss) ? ag_seterr(err, ag_ctx_status(ctx), "%s", ag_ctx_error(ctx)) : AG_OK;
}

/* own_pass's seed of step it's dropout masks */
static uint64_t tiny_step_seed(void *user, long it)
{
    ((tiny *)user)->seed_it = it;
    return 0xABCull + (uint64_t)it;
}

static ag_status tiny_start(void *user, ag_ctx *ctx, const ag_train_state *st, ag_error *err)
{
    (void)err;
    tiny *m = user;
    ck_assert_int_eq(m->passes, 0);
    ck_assert_int_eq(st->step, 0);   /* a fresh run */
    m->started = ctx;
    m->starts++;
    return AG_OK;
}

START_TEST(own_pass)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny a, b;
    tiny_build(&a);
    tiny_build(&b);
    b.seed_it = -1;
    tiny_run(&a, root, "loss");
    snprintf(out, sizeof out, "%s/pass", root);
    const ag_train_client c = {.name = "tiny", .params = b.P, .user = &b, .batch = BATCH, .draw = tiny_draw,
                               .pass = tiny_pass, .start = tiny_start, .evaluate = tiny_eval,
                               .step_seed = tiny_step_seed};
    const ag_train_opts o = {.out_dir = out, .steps = 30, .seed = 5, .every = 30,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(b.starts, 1);
    ck_assert_int_eq(b.passes, 30);
    size_t differ = 0;
    for (size_t i = 0; i < a.P->total; i++) differ += a.P->data[i] != b.P->data[i];
    ck_assert_msg(differ == 0, "the client's pass trained other weights (%zu of %zu differ)", differ, a.P->total);
    ag_params_free(a.P);
    ag_params_free(b.P);
    proc_remove_tree(root);
}
END_TEST

/* overwrite's opts.warn: each line into the next empty one of user's char [4][512] */
static void warned_line(void *user, const char *line)
{
    char (*lines)[512] = user;
    for (int i = 0; i < 4; i++)
        if (!lines[i][0]) return (void)snprintf(lines[i], 512, "%s", line);
}

START_TEST(overwrite)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256], old_ckpt[300];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    tiny_train(&m, root, "run", 30, 10, false);   /* best ckpt-00000010 (its first evaluation), latest ckpt-00000030 */
    snprintf(out, sizeof out, "%s/run", root);
    snprintf(old_ckpt, sizeof old_ckpt, "%s/ckpt-00000030", out);
    char log_path[300];
    snprintf(log_path, sizeof log_path, "%s/log.txt", root);
    FILE *log = fopen(log_path, "w");
    ck_assert_ptr_nonnull(log);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval};
    ag_train_opts o = {.out_dir = out, .steps = 10, .seed = 6, .every = 10, .log = log,
                       .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_ARG);   /* a run is there: refused */
    char refused[600];   /* the ckpt-N found, in the directory's order */
    snprintf(refused, sizeof refused, "%s already holds a checkpoint: --resume continues it, --overwrite starts over, "
             "or choose another --out (found: ckpt-000000", out);
    ck_assert_msg(strncmp(err.msg, refused, strlen(refused)) == 0 && strstr(err.msg, "ckpt-00000010") &&
                  strstr(err.msg, "ckpt-00000030"), "%s", err.msg);
    struct stat sb;
    ck_assert_int_eq(stat(old_ckpt, &sb), 0);
    o.overwrite = true;
    ag_error_clear(&err);
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    char want[400];   /* ckpt-00000010 was the old run's best: the new one's first is named beside it */
    snprintf(want, sizeof want, "%s/ckpt-00000010-b", out);
    ck_assert_str_eq(proc_ckpt(out), want);
    ck_assert_msg(stat(old_ckpt, &sb) != 0, "the old run's checkpoint stayed");
    ck_assert_msg(stat(proc_path(out, "ckpt-00000010"), &sb) != 0, "the old run's best stayed");
    ck_assert_int_eq(fclose(log), 0);
    char *said = proc_read_file(log_path, NULL);
    snprintf(want, sizeof want, "warning: %s already holds a checkpoint; --overwrite: starting a new run over it (the "
             "old run goes once the new run's first checkpoint is saved)\n", out);
    ck_assert_msg(strstr(said, want), "%s", said);
    free(said);
    char warned[4][512] = {{0}};   /* opts.warn: the same lines in the program's words, none on the log */
    ck_assert_int_eq(mkdir(proc_path(out, "ckpt-00000099"), 0777), 0);   /* a user's: left alone, said */
    ck_assert_ptr_nonnull(log = fopen(log_path, "w"));
    o.log = log;   /* the first log is closed: the run writes to this one */
    o.warn = warned_line;
    o.warn_user = warned;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(fclose(log), 0);
    ck_assert_msg(strstr(warned[0], " already holds a checkpoint; --overwrite: starting a new run over it") &&
                  strstr(warned[1], "left alone (not this run's to remove): ckpt-00000099") &&
                  (!warned[2][0] || !strncmp(warned[2], "no loss.png: ", 13)),   /* without gnuplot: a note */
                  "warned: '%s' '%s' '%s'", warned[0], warned[1], warned[2]);
    said = proc_read_file(log_path, NULL);
    ck_assert_msg(!strstr(said, "warning:") && !strstr(said, "note:"), "the log: %s", said);
    free(said);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

static ag_status tiny_eval_train(void *user, ag_ctx *ctx, double *train, ag_error *err)
{
    (void)ctx, (void)err;
    tiny *m = user;
    m->train_evals++;
    *train = 7;
    return AG_OK;
}

/* own_columns' cells: the step, and "e" on a row with an evaluation, "l" on the last row */
static void tiny_row(void *user, long it, bool step, bool evaluated, char *buf, size_t n)
{
    (void)user;
    snprintf(buf, n, "%ld,%s", it, !step ? "l" : evaluated ? "e" : "");
}

static char card_dir[256];
static int card_ends;   /* the end calls, each before DIR/report.md exists */

static void card_end(void *user, long step)
{
    (void)user;
    ck_assert_int_eq(step, 20);
    ck_assert_msg(access(proc_path(card_dir, "report.md"), F_OK) != 0, "the card came before the end call");
    proc_write_file(proc_path(card_dir, "mine.png"), "png", 3);   /* a picture of the program's */
    card_ends++;
}

static char *card_json(void *user)
{
    (void)user;
    return strdup("{\"d\": 1}");
}

START_TEST(own_card)
{
    char root[] = "/tmp/ag_train_run_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    snprintf(card_dir, sizeof card_dir, "%s/card", root);
    const char *const pics[] = {"mine.png", "other.png", NULL};
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .no_score = true, .end = card_end,
                               .config_json = card_json, .config = "d = 2", .unit = "windows",
                               .units_per_step = 8, .rate_unit = "tokens"};
    const ag_train_opts o = {.out_dir = card_dir, .steps = 20, .seed = 5, .every = 10, .no_pictures = true,
                             .pictures = pics, .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY,
                             .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    card_ends = 0;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(card_ends, 1);
    char *md = proc_read_file(proc_path(card_dir, "report.md"), NULL);
    ck_assert_ptr_nonnull(md);
    ck_assert_msg(strstr(md, "```json\n{\"d\": 1}\n```\n") && !strstr(md, "| key | value |"), "%s", md);
    ck_assert_msg(strstr(md, "| tokens/s | ") && !strstr(md, "windows/s") && !strstr(md, "final score"), "%s", md);
    ck_assert_msg(strstr(md, "![mine.png](mine.png)\n") && !strstr(md, "other.png"), "%s", md);
    ck_assert_msg(access(proc_path(card_dir, "loss.gp"), F_OK) != 0, "opts.no_pictures, yet the loop drew loss.png");
    free(md);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

START_TEST(own_columns)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    snprintf(out, sizeof out, "%s/cols", root);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .evaluate_train = tiny_eval_train,
                               .columns = "extra,more", .row = tiny_row};
    const ag_train_opts o = {.out_dir = out, .steps = 20, .seed = 5, .every = 10, .eval_at_start = true,
                             .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.train_evals, 3);   /* steps 0, 10 and 20 */
    ck_assert_msg(access(proc_path(out, "report.md"), F_OK) == 0, "no card from the loop");
    ck_assert_msg(access(proc_path(out, "loss.gp"), F_OK) == 0, "no loss.png from the loop");
    char *csv = proc_read_file(proc_path(out, "metrics.csv"), NULL);
    ck_assert_ptr_nonnull(csv);
    ck_assert_msg(strncmp(csv, "iter,lr,loss,train_loss,val_loss,score,extra,more\n", 50) == 0, "%s", csv);
    ck_assert_msg(strstr(csv, ",7.000000,1.000000,nan,0,e\n1,") && strstr(csv, ",,,,1,\n2,"), "%s", csv);
    ck_assert_msg(strstr(csv, ",7.000000,1.000000,nan,10,e\n"), "%s", csv);
    ck_assert_msg(strstr(csv, "\n20,,,7.000000,1.000000,nan,20,l\n"), "%s", csv);
    free(csv);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* A run of c with o into root/name (out [256]), its log into root/log.txt: the log's text (malloc'd). */
static char *run_logged(const ag_train_client *c, ag_train_opts o, const char *root, const char *name, char *out)
{
    char log_path[300];
    snprintf(out, 256, "%s/%s", root, name);
    snprintf(log_path, sizeof log_path, "%s/log.txt", root);
    FILE *log = fopen(log_path, "w");
    ck_assert_ptr_nonnull(log);
    o.out_dir = out;
    o.log = log;
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(fclose(log), 0);
    char *t = proc_read_file(log_path, NULL);
    ck_assert_ptr_nonnull(t);
    return t;
}

static ag_status tiny_eval_nan(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    (void)user, (void)ctx, (void)err;
    *val = NAN;   /* no validation split */
    *score = NAN;
    return AG_OK;
}

static void tiny_progress(void *user, long it, long steps, double loss, double lr, double ema_s,
                          const ag_budget *budget, char *buf, size_t n)
{
    (void)user, (void)loss, (void)lr;
    snprintf(buf, n, "it %ld of %ld, ema %s, budget %s", it, steps, ema_s > 0 ? "set" : "none",
             budget->deadline ? "yes" : "no");
}

static void tiny_said(void *user, long it, double train, double val, double score, char *buf, size_t n)
{
    (void)user, (void)score;
    snprintf(buf, n, "E %ld train %.1f val %.1f\n  second line", it, train, val);
}

/* no_val's training losses: m->evals in turn */
static ag_status tiny_eval_train_seq(void *user, ag_ctx *ctx, double *train, ag_error *err)
{
    (void)ctx, (void)err;
    tiny *m = user;
    *train = m->evals[m->evaluated++];
    return AG_OK;
}

/* No validation split (val NaN) beside evaluate_train: the training loss picks the best, and a
 * NaN val is no divergence */
START_TEST(no_val)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256], best[64];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    const double train[] = {3, 1, 2};
    m.evals = train;
    snprintf(out, sizeof out, "%s/noval", root);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval_nan, .evaluate_train = tiny_eval_train_seq};
    const ag_train_opts o = {.out_dir = out, .steps = 30, .seed = 5, .every = 10, .diverge_floor = 10,
                             .no_report = true, .no_pictures = true, .sched = {.lr = 0.1, .min_lr = 0.1},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.evaluated, 3);   /* steps 10, 20, 30 */
    ck_assert_int_eq(ag_ckpt_pointer(out, AG_CKPT_BEST, best, &err), AG_OK);
    ck_assert_str_eq(best, "ckpt-00000020");   /* train 1, the lowest */
    ck_assert(isnan(r.val_loss) && r.train_loss == 2);
    ck_assert_msg(access(proc_path(out, "report.md"), F_OK) != 0, "opts.no_report, yet the loop wrote its card");
    ck_assert_msg(access(proc_path(out, "loss.gp"), F_OK) != 0, "opts.no_pictures, yet the loop drew loss.png");
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

START_TEST(own_words)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval_nan, .evaluate_train = tiny_eval_train,
                               .no_score = true, .progress_text = tiny_progress, .eval_text = tiny_said};
    const ag_train_opts o = {.steps = 10, .seed = 5, .every = 5, .log_every = 5, .progress = AG_PROGRESS_LINES,
                             .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    char *t = run_logged(&c, o, root, "words", out);
    ck_assert_msg(strstr(t, "it 4 of 10, ema set, budget no\nE 5 train 7.0 val nan\n  second line\nit 9 of 10, "), "%s",
                  t);
    free(t);
    char *csv = proc_read_file(proc_path(out, "metrics.csv"), NULL);
    ck_assert_ptr_nonnull(csv);
    ck_assert_msg(strncmp(csv, "iter,lr,loss,train_loss,val_loss\n", 33) == 0 && strstr(csv, ",7.000000,\n6,") &&
                  strstr(csv, "\n10,,,7.000000,\n"), "%s", csv);
    free(csv);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* The ETA line in the client's words (progress_word, progress_rate): the step as counted from 0,
 * the rate of units_per_step, and with a deadline the time left. */
START_TEST(eta_words)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                         .loss = tiny_loss, .evaluate = tiny_eval, .progress_word = "iter", .progress_rate = "pairs/s",
                         .units_per_step = BATCH};
    ag_train_opts o = {.steps = 10, .seed = 5, .every = 10, .log_every = 5, .progress = AG_PROGRESS_LINES,
                       .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    char *t = run_logged(&c, o, root, "eta", out);
    ck_assert_msg(strstr(t, "iter 4/10  loss ") && strstr(t, "  lr 1.00e-01  ") && strstr(t, " pairs/s  ETA ") &&
                  strstr(t, "\niter 9/10  loss ") && !strstr(t, "step 5/10"), "%s", t);
    free(t);
    o.time_budget_s = 3600;   /* a deadline: the time left */
    c.units_per_step = 0;     /* no rate */
    t = run_logged(&c, o, root, "left", out);
    ck_assert_msg(strstr(t, "iter 4/10  loss ") && strstr(t, "  left ") && !strstr(t, "ETA") && !strstr(t, "/s"),
                  "%s", t);
    free(t);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

START_TEST(progress_tty)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval};
    ag_train_opts o = {.steps = 10, .seed = 5, .every = 10, .log_every = 5, .progress = AG_PROGRESS_TTY,
                       .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    char *t = run_logged(&c, o, root, "tty", out);
    const char first[] = "\r\033[Kstep 1/10 | loss ";   /* the first step: drawn at once */
    ck_assert_msg(strncmp(t, first, strlen(first)) == 0, "%s", t);
    ck_assert_msg(strstr(t, "\r\033[Kstep 10/10 | loss ") && strstr(t, "\r\033[Kstep 10: val loss 1.0000"), "%s", t);
    ck_assert_msg(!strstr(t, " ms\n") && t[strlen(t) - 1] == '\n', "%s", t);   /* redrawn, never a line of its own */
    free(t);
    o.progress = AG_PROGRESS_LINES;   /* in a file: after steps 4 and 9 */
    t = run_logged(&c, o, root, "every", out);
    ck_assert_msg(!strstr(t, "step 1/10 |") && strstr(t, "step 5/10 |") && strstr(t, "step 10/10 |"), "%s", t);
    free(t);
    o.log_first = true;   /* after steps 0, 5 and the last (9), not 4 */
    t = run_logged(&c, o, root, "first", out);
    ck_assert_msg(strstr(t, "step 1/10 |") && strstr(t, "step 6/10 |") && strstr(t, "step 10/10 |"), "%s", t);
    ck_assert_msg(!strstr(t, "step 5/10 |"), "%s", t);
    free(t);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

static void no_handler(int sig) { (void)sig; }

START_TEST(own_stop)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256], want[300];
    ck_assert_ptr_nonnull(mkdtemp(root));
    static volatile sig_atomic_t flag;
    tiny m;
    tiny_build(&m);
    m.flag = &flag;
    struct sigaction mine = {.sa_handler = no_handler}, was;
    sigemptyset(&mine.sa_mask);
    ck_assert_int_eq(sigaction(SIGTERM, &mine, &was), 0);
    snprintf(out, sizeof out, "%s/stop", root);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval};
    const ag_train_opts o = {.out_dir = out, .steps = 30, .seed = 5, .every = 10, .stop = &flag,
                             .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(r.stop_signal, SIGUSR1);
    ck_assert_int_eq(r.step, 5);   /* set during step 4: the run ends before step 5, saved there */
    snprintf(want, sizeof want, "%s/ckpt-00000005", out);
    ck_assert_str_eq(proc_ckpt(out), want);
    ck_assert_int_eq(sigaction(SIGTERM, &was, NULL), 0);
    ck_assert_msg(m.seen == no_handler, "the loop replaced the program's SIGTERM handler during the run");
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* A run of c into root/name (10 steps, an evaluation every 2, char_lm's floor): its error. */
static void words_run(const ag_train_client *c, const char *root, const char *name, const char *want_tail)
{
    char out[256], want[600];
    snprintf(out, sizeof out, "%s/%s", root, name);
    const ag_train_opts o = {.out_dir = out, .steps = 10, .seed = 5, .every = 2, .diverge_floor = 1.4,
                             .diverge_floor_name = "2 ln V", .sched = {.lr = 0.1, .min_lr = 0.1},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(c, &o, &r, &err), AG_ERR_NONFINITE);
    snprintf(want, sizeof want, want_tail, out);
    ck_assert_str_eq(err.msg, want);
}

START_TEST(in_words)
{
    char root[] = "/tmp/ag_train_run_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    m.poison_at = 4;   /* step 3's loss */
    ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                         .loss = tiny_loss, .evaluate = tiny_eval, .count = "iteration", .lr_name = "--lr"};
    words_run(&c, root, "nan", "iteration 3: the loss is nan; stopped before the optimizer step; kept: "
              "%s/ckpt-00000002, the latest and the best (try a lower --lr)");
    ag_params_init(m.P, 3);
    const double spike[] = {0.5, 2.5};
    m.poison_at = 0;
    m.evals = spike;
    m.evaluated = 0;
    c.evaluate_train = tiny_eval_train;   /* two losses: each named */
    words_run(&c, root, "spike", "iteration 4: the evaluation's val loss is 2.5, above the divergence limit 2 (max(2 ln "
              "V, 4 x the best evaluation, 0.5000 at iteration 2)): the model has diverged; stopped; kept: "
              "%s/ckpt-00000002, the latest and the best (try a lower --lr)");
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

static void tiny_after(void *user, long it, double loss, double lr)
{
    tiny *m = user;
    ck_assert(lr > 0 && it == m->started_at + m->stepped);
    m->losses[m->stepped++ % 16] = loss;
}

static ag_status tiny_started(void *user, ag_ctx *ctx, const ag_train_state *st, ag_error *err)
{
    (void)ctx, (void)err;
    ((tiny *)user)->started_at = st->step;
    return AG_OK;
}

START_TEST(parents)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;
    tiny_build(&m);
    snprintf(out, sizeof out, "%s/a/b/run", root);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .start = tiny_started,
                               .after_step = tiny_after};
    ag_train_opts o = {.out_dir = out, .steps = 6, .seed = 5, .every = 3, .sched = {.lr = 0.1, .min_lr = 0.1},
                       .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_IO);   /* root/a is missing */
    ck_assert_msg(strstr(err.msg, "cannot create"), "%s", err.msg);
    o.make_parents = true;
    ag_error_clear(&err);
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.stepped, 6);
    for (int i = 0; i < 6; i++) ck_assert_msg(isfinite(m.losses[i]) && m.losses[i] > 0, "step %d: %g", i, m.losses[i]);
    ck_assert(m.losses[5] == r.loss);
    m.stepped = 0;
    o.resume = true;
    o.steps = 9;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.started_at, 6);
    ck_assert_int_eq(m.stepped, 3);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

enum { GV = 16, GT = 8, GB = 2 };

typedef struct {
    ag_gpt *g;
    int x[GB * GT], y[GB * GT];
    int forwards;   /* activations_forward's calls */
} gpt_tiny;

static ag_status gpt_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    gpt_tiny *m = user;
    for (int i = 0; i < GB * GT; i++) m->x[i] = (int)ag_rng_below(rng, GV), m->y[i] = (m->x[i] + 1) % GV;
    return AG_OK;
}

static ag_status gpt_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    gpt_tiny *m = user;
    const ag_forward_opts fo = {.train = true, .seed = mb->seed};
    ag_gpt_forward(ctx, m->g, m->x + mb->first * GT, m->y + mb->first * GT, mb->b, GT, &fo, loss);   // loss [1]
    return *loss ? AG_OK : ag_seterr(err, ag_ctx_status(ctx), "%s", ag_ctx_error(ctx));
}

static ag_status gpt_eval(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    (void)user, (void)ctx, (void)err;
    *val = 1;
    *score = NAN;
    return AG_OK;
}

static ag_status gpt_acts(void *user, ag_ctx *ctx, uint64_t seed, long it, ag_error *err)
{
    (void)seed, (void)it;
    gpt_tiny *m = user;
    m->forwards++;
    static const int ids[GT] = {1, 2, 3, 4, 5, 6, 7, 8};
    const ag_forward_opts fo = {.composed_attention = true};   /* the scores op by op: their range read */
    ag_gpt_forward(ctx, m->g, ids, NULL, 1, GT, &fo, NULL);   // logits [1,GT,GV]
    return ag_ctx_status(ctx) ? ag_seterr(err, ag_ctx_status(ctx), "%s", ag_ctx_error(ctx)) : AG_OK;
}

START_TEST(own_acts)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    gpt_tiny m = {0};
    ag_gpt_config cfg = {.vocab_size = GV, .n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = GT};
    ag_error err = {0};
    ck_assert_ptr_nonnull(m.g = ag_gpt_new(&cfg, 1, &err));
    snprintf(out, sizeof out, "%s/acts", root);
    const ag_train_client c = {.name = "gpt", .params = m.g->params, .user = &m, .batch = GB, .draw = gpt_draw,
                               .loss = gpt_loss, .evaluate = gpt_eval, .activations_forward = gpt_acts};
    const ag_train_opts o = {.out_dir = out, .steps = 6, .seed = 5, .every = 3, .log_activations = true,
                             .sched = {.lr = 0.01, .min_lr = 0.01}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.forwards, 2);   /* the evaluations at 3 and 6 */
    char *csv = proc_read_file(proc_path(out, "activations.csv"), NULL);
    ck_assert_ptr_nonnull(csv);
    ck_assert_msg(strstr(csv, "\n3,") && strstr(csv, "\n6,") && strstr(csv, "score_max_L1"), "%s", csv);
    free(csv);
    ag_gpt_free(m.g);
    proc_remove_tree(root);
}
END_TEST

START_TEST(diverged)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", want[600];
    ck_assert_ptr_nonnull(mkdtemp(root));
    const double spike[] = {0.5, 2.5, 1.0}, nan_first[] = {NAN};
    tiny m;
    tiny_build(&m);
    m.evals = spike;   /* 0.5 at step 10: the limit max(1.4, 2.0) = 2; 2.5 at step 20 is above it */
    ag_error err = {0};
    ck_assert_int_eq(tiny_diverge(&m, root, "spike", 1.4, &err), AG_ERR_NONFINITE);
    snprintf(want, sizeof want, "step 20: the evaluation loss is 2.5, above the divergence limit 2 (max(1.4, 4 x the "
             "best evaluation, 0.5000 at step 10)): the model has diverged; stopped; kept: %s/spike/ckpt-00000010, "
             "the latest and the best (try a lower learning rate)", root);
    ck_assert_str_eq(err.msg, want);
    char path[512];
    snprintf(path, sizeof path, "%s/spike", root);
    snprintf(want, sizeof want, "%s/ckpt-00000010", path);
    ck_assert_str_eq(proc_ckpt(path), want);   /* the diverged weights never saved */
    ag_params_init(m.P, 3);
    m.evaluated = 0;   /* without the option: the same losses, to the end */
    ag_error_clear(&err);
    ck_assert_msg(tiny_diverge(&m, root, "free", 0, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.evaluated, 3);
    m.evals = nan_first;
    m.evaluated = 0;
    ag_error_clear(&err);
    ck_assert_int_eq(tiny_diverge(&m, root, "nan", 1.4, &err), AG_ERR_NONFINITE);
    ck_assert_msg(strstr(err.msg, "step 10: the evaluation loss is nan: the model has diverged; stopped; no checkpoint "
                         "was saved"), "%s", err.msg);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* full_disk's run in a child (its own file size limit): 5000 steps, no evaluation before the
 * last, with the after_step count; AG_ERR_IO's message into root/msg, the steps as exit code. */
static void fsize_after(void *user, long it, double loss, double lr)
{
    (void)it, (void)loss, (void)lr;
    ((tiny *)user)->stepped++;   /* no ck_assert here: check's messages are a file the limit also bounds */
}

static int fsize_run(const char *root, tiny *m)
{
    char out[256];
    snprintf(out, sizeof out, "%s/fsize", root);
    struct rlimit rl = {4096, 4096};   /* metrics.csv may reach 4 KiB: ~200 rows */
    if (setrlimit(RLIMIT_FSIZE, &rl) != 0) return 255;
    signal(SIGXFSZ, SIG_IGN);   /* the write fails with EFBIG instead */
    const ag_train_client c = {.name = "tiny", .params = m->P, .user = m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .after_step = fsize_after};
    const ag_train_opts o = {.out_dir = out, .steps = 5000, .seed = 5, .every = 5000,
                             .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ag_status s = ag_train_run(&c, &o, &r, &err);
    FILE *f = fopen(proc_path(root, "msg"), "w");
    if (!f || s != AG_ERR_IO) return 254;
    fputs(err.msg, f);
    fclose(f);
    return m->stepped < 250 ? (int)m->stepped : 253;
}

START_TEST(full_disk)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny m;   /* built here: the child under the file size limit makes no ck_ call (CK_FORK=no shares their file) */
    tiny_build(&m);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) _exit(fsize_run(root, &m));
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) > 50 && WEXITSTATUS(status) < 250,
                  "the run under a file size limit: status %#x (stopped after the limit, or not by it)", status);
    char *msg = proc_read_file(proc_path(root, "msg"), NULL);
    ck_assert_ptr_nonnull(msg);
    ck_assert_msg(strstr(msg, "/fsize/metrics.csv: write failed: File too large; stopped, the last checkpoint is kept"),
                  "%s", msg);
    free(msg);
    ag_params_free(m.P);
    tiny_build(&m);   /* a log on a full disk: the first line it refuses stops the run */
    snprintf(out, sizeof out, "%s/full", root);
    FILE *full = fopen("/dev/full", "w");
    ck_assert_ptr_nonnull(full);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .after_step = tiny_after};
    const ag_train_opts o = {.out_dir = out, .steps = 30, .seed = 5, .every = 30, .log = full, .log_every = 1,
                             .progress = AG_PROGRESS_LINES, .sched = {.lr = 0.1, .min_lr = 0.1},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_IO);
    ck_assert_msg(strstr(err.msg, "the log: write failed: No space left on device; stopped; no checkpoint was saved"),
                  "%s", err.msg);
    ck_assert_int_eq(m.stepped, 1);
    fclose(full);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* own_lock: a child's try at DIR's lock: AG_ERR_ARG while this process holds it. */
static ag_status lock_tried(const char *dir)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        ag_lock l = {0};
        ag_error e = {0};
        _exit(ag_lock_take(&l, dir, &e));
    }
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    return (ag_status)WEXITSTATUS(status);
}

START_TEST(own_lock)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    tiny m;
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny_build(&m);
    ck_assert_int_eq(mkdir(strcat(strcpy(out, root), "/run"), 0777), 0);
    ag_lock lock = {0};
    ag_error err = {0};
    ck_assert_msg(ag_lock_take(&lock, out, &err) == AG_OK, "%s", err.msg);   /* the program's, before the run */
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval};
    ag_train_opts o = {.out_dir = out, .steps = 6, .seed = 5, .every = 3, .lock = &lock,
                       .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(r.step, 6);
    ck_assert_msg(lock.held && lock_tried(out) == AG_ERR_ARG, "the program's lock was dropped by the run");
    ag_lock_drop(&lock);
    ck_assert_int_eq(lock_tried(out), AG_OK);
    o.resume = true;   /* a lock not held yet: the loop takes it, the program drops it */
    o.steps = 9;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_msg(lock.held && lock_tried(out) == AG_ERR_ARG, "the lock the loop took for the program is not held");
    ag_lock_drop(&lock);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* A test's scratch root made, m built, out [256] := root/run. */
static void tiny_begin(char *root, tiny *m, char *out)
{
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny_build(m);
    snprintf(out, 256, "%s/run", root);
}

START_TEST(stop_in_eval)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    tiny m;
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny_build(&m);
    m.term_at_eval = 2;   /* the evaluation at step 20 */
    snprintf(out, sizeof out, "%s/run", root);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .after_step = tiny_after};
    const ag_train_opts o = {.out_dir = out, .steps = 40, .seed = 5, .every = 10, .diverge_floor = 1,
                             .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);   /* no divergence seen in its NaN */
    ck_assert_int_eq(r.stop_signal, SIGTERM);
    ck_assert_int_eq(r.step, 20);
    ck_assert_int_eq(m.stepped, 20);   /* no step after it */
    char want[300];
    snprintf(want, sizeof want, "%s/ckpt-00000020", out);
    ck_assert_str_eq(proc_ckpt(out), want);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* own_ddp's evaluation: the loop's split of the step in hand (one rank, two micro-batches) */
static ag_status tiny_eval_ddp(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    tiny *m = user;
    m->ddp_evals += m->ddp && ag_ddp_ranks(m->ddp) == 1 && ag_ddp_mine(m->ddp, 0);
    return tiny_eval(user, ctx, val, score, err);
}

START_TEST(own_ddp)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    tiny m;
    tiny_begin(root, &m, out);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval_ddp};
    const ag_train_opts o = {.out_dir = out, .steps = 6, .seed = 5, .every = 3, .grad_accum = 2, .ddp_out = &m.ddp,
                             .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.ddp_evals, 2);   /* steps 3 and 6 */
    ck_assert_ptr_null(m.ddp);          /* freed with the run */
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

START_TEST(own_batch_flag)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    tiny m;
    tiny_begin(root, &m, out);
    ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .batch_flag = "--points",
                         .unit = "points", .draw = tiny_draw, .loss = tiny_loss, .evaluate = tiny_eval};
    ag_train_opts o = {.out_dir = out, .steps = 3, .seed = 5, .every = 3, .grad_accum = 5,
                       .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ag_error err = {0};
    ck_assert_int_eq(ag_train_run(&c, &o, &r, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "--points 16 is not a multiple of 1 rank x --grad-accum 5 = 5") &&
                  strstr(err.msg, "try --points 20"), "%s", err.msg);
    ck_assert_msg(access(out, F_OK) != 0, "DIR made for a run refused");
    o.grad_accum = 1;   /* draw comes first in a step: it sees the last step's gradients */
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(m.seen_n, 3);
    ck_assert_msg(m.grad_seen[0] == 0 && m.grad_seen[1] > 0 && m.grad_seen[2] > 0, "draws saw |dW| %g %g %g",
                  m.grad_seen[0], m.grad_seen[1], m.grad_seen[2]);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* A resume from the older layout (a kind with legacy: the files in DIR itself, no latest) goes
 * on as the unbroken run did, and its first checkpoint supersedes those files. */
START_TEST(own_format_legacy)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", dir[256], ck[300];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny u, m;
    tiny_build(&u);
    tiny_build(&m);
    u.format = m.format = &tf_format_legacy;
    tiny_train(&u, root, "unbroken", 20, 10, false);
    tiny_train(&m, root, "old", 10, 10, false);
    snprintf(dir, sizeof dir, "%s/old", root);
    snprintf(ck, sizeof ck, "%s", proc_ckpt(dir));
    for (int i = 0; i < 2; i++) ck_assert_int_eq(rename(proc_path(ck, tf_files[i]), proc_path(dir, tf_files[i])), 0);
    proc_remove_tree(ck);
    ck_assert_int_eq(unlink(proc_path(dir, "latest")), 0);
    ck_assert_int_eq(unlink(proc_path(dir, "best")), 0);
    ag_params_free(m.P);   /* a new process: the weights from the files alone */
    tiny_build(&m);
    m.format = &tf_format_legacy;
    tiny_train(&m, root, "old", 20, 10, true);
    tf_same_weights(&m, &u, "old");
    tf_latest_is(root, "old", "ckpt-00000020");
    ck_assert_msg(access(proc_path(dir, TF_WEIGHTS), F_OK) != 0, "the older layout's files stayed");
    ag_params_free(u.P);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* ag_train_prepare, for a program that reads DIR itself first: a DIR inside a run refused, DIR
 * locked (a second program refused; NULL: not locked; a DIR not there yet: the loop's), a lost
 * latest found again with --resume, said through warn; a DIR with the older layout's files alone
 * is refused to a fresh run as one with a checkpoint. */
START_TEST(prepare)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256], inside[300], lines[4][512] = {{0}};
    tiny m;
    tiny_begin(root, &m, out);
    m.format = &tf_format;
    tiny_train(&m, root, "run", 20, 10, false);
    snprintf(inside, sizeof inside, "%s/ckpt-00000010", out);
    ag_lock lock = {0}, other = {0};
    ag_error err = {0};
    ag_train_opts o = {.out_dir = inside, .lock = &lock, .resume = true, .warn = warned_line, .warn_user = lines};
    ck_assert_int_eq(ag_train_prepare(&o, &tf_kind, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "lies inside the run directory") && !lock.held, "%s", err.msg);
    o.out_dir = out;
    ag_error_clear(&err);
    ck_assert_int_eq(unlink(proc_path(out, "latest")), 0);
    ck_assert_msg(ag_train_prepare(&o, &tf_kind, &err) == AG_OK, "%s", err.msg);
    ck_assert_msg(lock.held && lock_tried(out) == AG_ERR_ARG, "DIR is not locked");
    ck_assert_msg(strstr(lines[0], "latest was missing: it names ckpt-00000020 again"), "warned: %s", lines[0]);
    tf_latest_is(root, "run", "ckpt-00000020");
    o.lock = &other;
    ag_error_clear(&err);
    ck_assert_int_eq(ag_train_prepare(&o, &tf_kind, &err), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "is in use by another") && !other.held, "%s", err.msg);
    o.lock = NULL;   /* a run that writes nothing: not locked */
    ag_error_clear(&err);
    ck_assert_msg(ag_train_prepare(&o, &tf_kind, &err) == AG_OK, "%s", err.msg);
    ag_lock_drop(&lock);
    o.out_dir = proc_path(root, "new");   /* not there yet: made and locked by the loop */
    o.lock = &lock;
    o.resume = false;
    ck_assert_msg(ag_train_prepare(&o, &tf_kind, &err) == AG_OK && !lock.held, "%s", err.msg);
    tiny legacy;
    tiny_build(&legacy);
    const char *ck = proc_ckpt(out);
    for (int i = 0; i < 2; i++) ck_assert_int_eq(rename(proc_path(ck, tf_files[i]), proc_path(root, tf_files[i])), 0);
    const ag_train_client c = {.name = "tiny", .params = legacy.P, .user = &legacy, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .format = &tf_format_legacy};
    const ag_train_opts fresh = {.out_dir = root, .steps = 2, .seed = 5, .every = 1, .threads = 1,
                                 .sched = {.lr = 0.1, .min_lr = 0.1}, .adam = ADAM_NO_DECAY};
    ag_train_result r;
    ag_error_clear(&err);
    ck_assert_int_eq(ag_train_run(&c, &fresh, &r, &err), AG_ERR_ARG);   /* root holds the older layout's files */
    ck_assert_msg(strstr(err.msg, "already holds a checkpoint: --resume continues it"), "%s", err.msg);
    ag_params_free(legacy.P);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* A fresh run killed between its first checkpoint and its commit leaves the checkpoint and no
 * latest: the same command again removes it, said in a warning that names the untrained weights
 * when the run checkpoints its step 0 (eval_at_start, char_lm's words). */
START_TEST(orphan_said)
{
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256], lines[4][512] = {{0}}, name[64], want[700];
    tiny m;
    tiny_begin(root, &m, out);
    m.kill_at = -1;   /* a save at step 0 */
    ck_assert_int_eq(mkdir(out, 0777), 0);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .format = &tf_format_origin};
    ag_train_state st = {.best_loss = INFINITY, .best_step = -1, .eval_step = -1, .run_id = 7,
                         .origin = ag_weights_hash(m.P)};   /* tf_origin's: the untrained weights' */
    ag_error err = {0};
    ck_assert_msg(ag_train_save(NULL, out, &c, &st, false, false, name, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(unlink(proc_path(out, "latest")), 0);   /* killed before the commit */
    ag_train_opts o = {.out_dir = out, .steps = 2, .seed = 5, .every = 1, .eval_at_start = true, .threads = 1,
                       .warn = warned_line, .warn_user = lines, .sched = {.lr = 0.1, .min_lr = 0.1},
                       .adam = ADAM_NO_DECAY};
    ag_train_result r;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    snprintf(want, sizeof want, "%s: removed ckpt-00000000, the first checkpoint of this same run (its untrained "
             "weights), left uncommitted by a kill; starting the run again", out);
    ck_assert_str_eq(lines[0], want);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

/* own_resumed's format: tiny's, its reads counted */
static int tf_reads;
static ag_status tf_read_counted(const ag_train_client *c, const char *where, ag_train_state *st, bool all,
                                 ag_error *err)
{
    tf_reads++;
    return tf_read(c, where, st, all, err);
}
static const ag_train_format tf_format_counted = {.kind = &tf_kind, .write = tf_write, .read = tf_read_counted,
                                                  .count = "iteration"};

/* opts.resumed: a program that read DIR/latest itself (weights, moments, state) hands the loop
 * where the run stood; the loop reads nothing of the checkpoint again, and the run goes on as the
 * unbroken one (metrics.csv, weights) */
START_TEST(own_resumed)
{
    tiny u, m;
    char root[] = "/tmp/ag_train_run_XXXXXX", out[256];
    ck_assert_ptr_nonnull(mkdtemp(root));
    tiny_build(&u);
    u.format = &tf_format_counted;
    tiny_train(&u, root, "unbroken", 30, 10, false);
    tiny_build(&m);
    m.format = &tf_format_counted;
    tiny_train(&m, root, "half", 10, 10, false);
    ag_params_free(m.P);
    tiny_build(&m);   /* a new process: the program reads the checkpoint itself */
    snprintf(out, sizeof out, "%s/half", root);
    const ag_train_client c = {.name = "tiny", .params = m.P, .user = &m, .batch = BATCH, .draw = tiny_draw,
                               .loss = tiny_loss, .evaluate = tiny_eval, .format = &tf_format_counted};
    ag_train_state st = {.best_loss = INFINITY, .best_step = -1, .eval_step = -1, .train_loss = NAN, .val_loss = NAN,
                         .score = NAN};
    ag_error err = {0};
    ck_assert_msg(tf_read(&c, proc_ckpt(out), &st, true, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(st.step, 10);
    tf_reads = 0;
    const ag_train_opts o = {.out_dir = out, .steps = 30, .seed = 5, .every = 10, .resume = true, .resumed = &st,
                             .sched = {.lr = 0.1, .min_lr = 0.1, .lr_decay_iters = 30},
                             .adam = ADAM_NO_DECAY, .threads = 1};
    ag_train_result r;
    ck_assert_msg(ag_train_run(&c, &o, &r, &err) == AG_OK, "%s", err.msg);
    ck_assert_int_eq(tf_reads, 0);
    ck_assert_int_eq(r.start, 10);
    ck_assert_int_eq(r.step, 30);
    tf_same_run(root, "half", &m, &u);
    ag_params_free(u.P);
    ag_params_free(m.P);
    proc_remove_tree(root);
}
END_TEST

Suite *train_run_suite(void)
{
    Suite *s = suite_create("train_run");
    TCase *tc = tcase_create("fresh");
    tcase_set_timeout(tc, 600);   /* a bound for a hang, on a loaded machine */
    tcase_add_test(tc, fresh_twice);
    tcase_add_test(tc, resume_keeps_train_loss);
    tcase_add_test(tc, too_big_refused);
    tcase_add_test(tc, moved_mid_run);
    tcase_add_test(tc, own_format);
    tcase_add_test(tc, own_format_origin);
    tcase_add_test(tc, own_update);
    tcase_add_test(tc, own_pass);
    tcase_add_test(tc, prepare);
    tcase_add_test(tc, orphan_said);
    tcase_add_test(tc, overwrite);
    tcase_add_test(tc, own_card);
    tcase_add_test(tc, own_columns);
    tcase_add_test(tc, no_val);
    tcase_add_test(tc, progress_tty);
    tcase_add_test(tc, own_words);
    tcase_add_test(tc, eta_words);
    tcase_add_test(tc, own_stop);
    tcase_add_test(tc, in_words);
    tcase_add_test(tc, parents);
    tcase_add_test(tc, own_acts);
    tcase_add_test(tc, diverged);
    tcase_add_test(tc, full_disk);
    tcase_add_test(tc, own_lock);
    tcase_add_test(tc, stop_in_eval);
    tcase_add_test(tc, own_ddp);
    tcase_add_test(tc, own_batch_flag);
    tcase_add_test(tc, own_format_legacy);
    tcase_add_test(tc, own_resumed);
    tcase_add_test(tc, alone_under_mpirun);
    suite_add_tcase(s, tc);
    return s;
}
