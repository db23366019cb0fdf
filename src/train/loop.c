/* loop.c -- ag_train_run (train.h): a whole training run of any model that fills an
 * ag_train_client. Read step() first: one optimizer step, as in every trainer (the learning
 * rate, the client's batch and loss, backward, clip, AdamW); its forward and backward run as
 * this rank's micro-batches (micro_batches(), ddp.h: alone, one of the whole batch). Then
 * run_loop(): at each step, stop when asked (a signal), when done or when the time budget
 * (budget.h) has no room for another step and the final evaluation; evaluate and checkpoint
 * when due; else step. The checkpoint itself is loop_ckpt.c. With several ranks every decision
 * is the same on all (ddp.h) and rank 0 alone touches DIR. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include "program.h"   /* ag_run_pictures */
#include "train.h"
#include "train_impl.h"
#include "../data/hash.h"     /* ag_fnv1a: the build's layout */
#include "../tensor/debug.h"   /* ag_now_s */
#include "../tensor/speed.h"   /* ag_threads_init, the thread tuner */

#define CSV_HEAD "iter,lr,loss,train_loss,val_loss"
#define PICTURES_S 0.5   /* the budget keeps this for loss.png and report.md, after the last checkpoint */

typedef struct {
    const ag_train_client *c;
    const ag_train_opts *o;
    ag_train_result *r;
    ag_ddp *ddp;              /* several ranks or micro-batches (ddp.h); NULL: neither */
    bool writer;              /* rank 0 (or alone): DIR, metrics.csv, the log */
    ag_ctx *ctx;
    ag_lock *lock;            /* DIR's: opts->lock (the program's), or own_lock */
    ag_lock own_lock;
    FILE *csv;
    ag_dynamics_log *dyn;     /* opts->log_dynamics: DIR/dynamics.csv (dynamics.c), or NULL */
    ag_activations *acts;     /* opts->log_activations: DIR/activations.csv (activations.c), or NULL */
    ag_thread_tuner tuner;    /* opts->threads or one, whichever is faster now (speed.h) */
    ag_train_state st;
    long saved_at;            /* the step of the last checkpoint written (-1: none yet) */
    uint64_t replaces;        /* opts->overwrite: the old run, removed after our first commit (0: none) */
    double t0, step_s;        /* the run's start, the last step's time (the thread tuner's, the log's) */
    time_t since;             /*   the start as a file's time: the pictures this run drew (opts->pictures) */
    ag_train_opts *run;       /* the opts as the run goes: steps and sched follow a budget's count */
    ag_budget *budget;        /* the steps and evaluations timed, the deadline kept: opts->budget, */
    ag_budget own_budget;     /*   or the loop's own, of opts->time_budget_s */
    char eval_cols[128];      /* ",train,val,score" (no score: c->no_score) for the next row, */
    bool evaluated;           /*   when it carries an evaluation */
    char cells[16384];        /* the client's cells of a row (c->row), after a comma (char_lm's
                                 attention statistics: 2 a layer, up to 256 layers) */
    ag_progress prog;         /* the log: the progress line, redrawn on a terminal (opts->progress) */
    bool drawn;               /*   a redrawn progress line is on the terminal, not yet ended */
    const volatile sig_atomic_t *stop;   /* the stop flag: opts->stop, or the loop's own (SIGINT, SIGTERM) */
} loop;

// --- signals: SIGINT and SIGTERM (or the program's own: opts->stop) end the run at the next
// step, after a checkpoint ---

static volatile sig_atomic_t stop_sig;   /* one run at a time in a process */
static void on_stop(int sig) { stop_sig = sig; }

/* The stop flag the run watches: the program's (opts->stop), or the loop's own, caught here. */
static const volatile sig_atomic_t *catch_signals(const ag_train_opts *o, struct sigaction old[2])
{
    if (o->stop) {
        ag_plot_set_stop(o->stop);   /* a plot in progress gives up too */
        return o->stop;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    stop_sig = 0;
    sigaction(SIGINT, &sa, &old[0]);
    sigaction(SIGTERM, &sa, &old[1]);
    ag_plot_set_stop(&stop_sig);
    return &stop_sig;
}

static void restore_signals(const ag_train_opts *o, const struct sigaction old[2])
{
    if (o->stop) return;   /* the program's handlers were never replaced */
    sigaction(SIGINT, &old[0], NULL);
    sigaction(SIGTERM, &old[1], NULL);
}

// --- one optimizer step ---

/* The client's loss of micro-batch mb recorded on the tape, its value in *lv, then the backward
 * from it: dW += dloss dl/dW. A loss that is not finite is left to the caller, before the backward. */
static ag_status forward_backward(loop *L, long it, ag_micro *mb, double *lv, ag_error *err)
{
    ag_tensor *l = NULL;
    ag_status s = L->c->loss(L->c->user, L->ctx, mb, &l, err);               // its items -> mean loss [1]
    if (s == AG_OK && (!l || ag_numel(l) != 1))
        s = ag_seterr(err, AG_ERR_ARG, "step %ld: the loss is missing or not a scalar", it);
    if (s) return s;
    *lv = (double)l->data[0];
    if (!isfinite(*lv)) return AG_OK;
    if (ag_backward_from(L->ctx, l, &mb->dloss))                             // dW += dloss dl/dW
        return ag_seterr(err, ag_ctx_status(L->ctx), "step %ld: %s", it, ag_ctx_error(L->ctx));
    return AG_OK;
}

const char *ag_train_kept(bool writer, const char *dir, const char *count, long saved_at, char *buf, size_t n)
{
    if (writer) ag_ckpt_kept(dir, buf, n);   /* read from DIR: what is there */
    else snprintf(buf, n, "the checkpoint of %s %ld is kept", count, saved_at);
    return buf;
}

/* What a step is called in messages: the client's word ("iteration") or "step". */
static const char *count_word(const loop *L) { return L->c->count ? L->c->count : "step"; }

/* A run stopped at step it, by a value that is not finite or too high: "<count> it: <what><rest>;
 * kept: DIR/ckpt-..., the latest ... (try a lower <learning rate>)", as char_lm says it (rest
 * begins with its punctuation). */
static ag_status stopped(const loop *L, long it, const char *what, const char *rest, ag_error *err)
{
    char kept[1024];
    ag_train_kept(L->writer, L->o->out_dir, count_word(L), L->saved_at, kept, sizeof kept);
    return ag_seterr(err, AG_ERR_NONFINITE, "%s %ld: %s%s; %s (try a lower %s)", count_word(L), it, what, rest, kept,
                     L->c->lr_name ? L->c->lr_name : "learning rate");
}

/* "the loss is nan": a value as a message writes it (NaN without its sign, never "-nan"). */
static const char *value_is(char *buf, size_t n, const char *what, double v)
{
    snprintf(buf, n, "%s is %g", what, isnan(v) ? NAN : v);
    return buf;
}

/* This rank's micro-batches of the batch drawn (all of it alone): each one's forward and
 * backward, dW += its gradient times its dloss; then the sum over the ranks (one allreduce).
 * *loss: the step's loss, the micro-batches' losses weighed by their dloss, summed. */
static ag_status micro_batches(loop *L, long it, double *loss, ag_error *err)
{
    const ag_train_client *c = L->c;
    uint64_t seed = c->step_seed ? c->step_seed(c->user, it)   /* the client's, or the loop's "drop" */
                                 : ag_seed_mix(ag_seed_mix(L->o->seed, 0x64726f70ull), (uint64_t)it);
    ag_micro mb;
    *loss = 0;
    for (int j = 0; ag_ddp_micro(L->ddp, j, c->batch, seed, &mb); j++) {
        ag_ctx_reset(L->ctx);                                                // the last pass's tape goes
        double lv = 0;
        ag_status s = c->pass ? c->pass(c->user, L->ctx, &mb, &lv, err)      // the client's forward and backward
                              : forward_backward(L, it, &mb, &lv, err);      // its items -> mean loss; dW
        if (s) return s;
        char why[64];
        if (!isfinite(lv))
            return stopped(L, it, value_is(why, sizeof why, "the loss", lv), "; stopped before the optimizer step",
                           err);
        *loss += (double)mb.dloss * lv;
    }
    return ag_ddp_reduce(L->ddp, loss, err);                                 // over the ranks: one dW
}

/* A row's evaluation cells: the evaluation's, or empty ones (",," and the score's). */
static const char *row_eval(const loop *L)
{
    if (L->evaluated) return L->eval_cols;
    return L->c->no_score ? ",," : ",,,";
}

static void progress(loop *L, long it, double lv, double lr);

/* The client's cells of the row of step it (step false: the last row, no step), after a comma;
 * "" without columns. */
static const char *client_cells(loop *L, long it, bool step)
{
    if (!L->c->columns || !L->c->row) return "";
    L->cells[0] = ',';
    L->cells[1] = '\0';
    L->c->row(L->c->user, it, step, L->evaluated, L->cells + 1, sizeof L->cells - 1);
    return L->cells;
}

/* A row of metrics.csv (printf-style), out of the process at once: a full disk (or a file size
 * limit) stops the run at the first row it refuses, the last checkpoint kept. */
static ag_status put_row(loop *L, ag_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static ag_status put_row(loop *L, ag_error *err, const char *fmt, ...)
{
    if (!L->csv) return AG_OK;   /* a rank other than 0 writes none */
    va_list ap;
    va_start(ap, fmt);
    int w = vfprintf(L->csv, fmt, ap);
    va_end(ap);
    if (w >= 0 && fflush(L->csv) == 0 && !ferror(L->csv)) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/metrics.csv: write failed: %s; stopped, the last checkpoint is kept",
                     L->o->out_dir, strerror(errno));
}

static ag_status step(loop *L, long it, ag_error *err)
{
    const ag_train_opts *o = L->o;
    ag_params *P = L->c->params;
    double t0 = ag_now_s(), lv;
    double lr = o->lr_find_lo > 0 ? ag_lr_range_at(o->lr_find_lo, o->sched.lr, o->steps, it) : ag_lr_at(&o->sched, it);
    ag_status s = L->c->draw(L->c->user, &L->st.rng, err);                   // the step's whole batch
    ag_params_zero_grad(P);                                                  // dW = 0 (draw saw the last step's)
    if (s == AG_OK) s = micro_batches(L, it, &lv, err);                      // dW, the batch's loss
    if (s) return s;
    double norm = ag_grad_norm(P), clip = ag_clip_scale(norm, o->grad_clip);
    char why[64];
    if (!isfinite(norm))
        return stopped(L, it, value_is(why, sizeof why, "the gradient norm", norm), "; stopped before the optimizer step",
                       err);
    bool logged = L->dyn && (it % o->log_dynamics == 0 || it + 1 == o->steps);   /* --log-dynamics's row */
    if (logged) ag_dynamics_log_watch(L->dyn, P, it, norm, clip);            // dW, and W before the update
    if (L->c->update) s = L->c->update(L->c->user, P, lr, L->st.step + 1, clip, err);   // the client's optimizer
    else ag_adamw_step_scaled(P, &o->adam, lr, L->st.step + 1, clip);         // W -= ...
    if (s) return s;
    L->st.step++;
    if (logged && (s = ag_dynamics_log_record(L->dyn, P, it, lr, err))) return s;
    if (L->st.loss_taken) L->st.loss_sum = 0, L->st.loss_n = 0, L->st.loss_taken = false;   /* a new train_loss */
    L->st.loss_sum += lv;
    L->st.loss_n++;
    L->r->loss = lv;
    if (L->c->after_step) L->c->after_step(L->c->user, it, lv, lr);
    L->step_s = ag_now_s() - t0;
    ag_thread_tuner_step(&L->tuner, L->step_s);
    if ((s = put_row(L, err, "%ld,%.6g,%.6f%s%s\n", it, lr, lv, row_eval(L), client_cells(L, it, true)))) return s;
    L->evaluated = false;
    ag_progress_step(&L->prog, L->step_s, it == L->r->start);
    long at = o->log_first ? it : it + 1;   /* char_lm's log steps: 0, 10, 20, ... and the last */
    bool due = o->log_every > 0 && (at % o->log_every == 0 || (o->log_first && it + 1 == o->steps));
    if (ag_progress_due(&L->prog, due, it + 1 == o->steps))
        progress(L, it, lv, lr);
    return ag_log_written(L->o->log, L->o->out_dir, err);   /* a full disk under the log stops the run at once */
}

/* The progress line with an ETA in the client's progress_word (train.h). */
static void eta_line(const loop *L, long it, double lv, double lr, char *buf, size_t n)
{
    const ag_train_client *c = L->c;
    const ag_budget *b = L->budget;
    bool left = b && b->deadline;
    char eta[32], of[24] = "?", rate[48] = "";
    double eta_s = left ? b->deadline - ag_budget_now(b) : L->prog.ema_s * (double)(L->o->steps - it - 1);
    ag_format_duration(eta, sizeof eta, eta_s);
    if (!b || !b->fixing) snprintf(of, sizeof of, "%ld", L->o->steps);
    if (c->progress_rate && c->units_per_step > 0)
        snprintf(rate, sizeof rate, "  %.0f %s", c->units_per_step / L->prog.ema_s, c->progress_rate);
    snprintf(buf, n, "%s %ld/%s  loss %.4f  lr %.2e%s  %s %s", c->progress_word, it, of, lv, lr, rate,
             left ? "left" : "ETA", eta);
}

/* The progress line after step it, in the client's words (progress_text), its ETA line or the loop's. */
static void progress(loop *L, long it, double lv, double lr)
{
    const ag_train_client *c = L->c;
    char line[512];
    if (c->progress_text)
        c->progress_text(c->user, it, L->o->steps, lv, lr, L->prog.ema_s, L->budget, line, sizeof line);
    else if (c->progress_word)
        eta_line(L, it, lv, lr, line, sizeof line);
    else
        snprintf(line, sizeof line, "step %ld/%ld | loss %.4f | lr %.2e | %.1f ms", it + 1, L->o->steps, lv, lr,
                 1e3 * L->step_s);
    ag_progress_show(&L->prog, "%s", line);
    L->drawn = L->prog.tty;
}

// --- evaluation and checkpoint ---

double ag_divergence_limit(double floor, double best, bool have_best)
{
    if (!have_best) return INFINITY;
    return 4 * best > floor ? 4 * best : floor;
}

/* opts->diverge_floor: an evaluation loss val (what: "the evaluation loss", "the evaluation's
 * train loss") that is not finite or above the divergence limit stops the run, its weights never
 * saved: the error names what stays. AG_OK otherwise. */
static ag_status check_divergence(const loop *L, long it, const char *what, double val, ag_error *err)
{
    const ag_train_opts *o = L->o;
    const ag_train_state *st = &L->st;
    double limit = ag_divergence_limit(o->diverge_floor, st->best_loss, st->best_step >= 0);
    if (!(o->diverge_floor > 0) || val <= limit) return AG_OK;
    char is[300], floor[32];
    value_is(is, sizeof is, what, val);
    snprintf(floor, sizeof floor, "%.4g", o->diverge_floor);
    size_t n = strlen(is);
    if (isfinite(val))
        snprintf(is + n, sizeof is - n, ", above the divergence limit %.4g (max(%s, 4 x the best evaluation, %.4f at %s "
                 "%ld))", limit, o->diverge_floor_name ? o->diverge_floor_name : floor, st->best_loss, count_word(L),
                 st->best_step);
    return stopped(L, it, is, ": the model has diverged; stopped", err);
}

/* The evaluation at step it in the next row's cells (a loss that is NaN: an empty cell; no step
 * since the last evaluation: no train loss) and on the log, in the client's words (eval_text)
 * or the loop's. */
static void eval_said(loop *L, long it, double train, double val, double score)
{
    const ag_train_client *c = L->c;
    char tr[32] = "", va[32] = "", sc[40] = "", text[8192];   /* char_lm's: a line of 256 layers' attention */
    if (isfinite(train)) snprintf(tr, sizeof tr, "%.6f", train);
    if (!isnan(val)) snprintf(va, sizeof va, "%.6f", val);
    if (!c->no_score) snprintf(sc, sizeof sc, ",%.6g", score);
    snprintf(L->eval_cols, sizeof L->eval_cols, ",%s,%s%s", tr, va, sc);
    L->evaluated = true;
    if (c->eval_text) c->eval_text(c->user, it, train, val, score, text, sizeof text);
    else snprintf(text, sizeof text, "step %ld: val loss %.4f | %s %.4f", it, val, c->score_name ? c->score_name
                  : "score", score);
    ag_progress_line(&L->prog, "%s", text);   /* flushed: seen at once in a file or a pipe */
    L->drawn = false;
}

/* The stop signal caught, or with several ranks the one they agreed on at the last step. */
static int stop_request(const loop *L)
{
    return ag_ddp_ranks(L->ddp) > 1 ? ag_ddp_stop(L->ddp) : *L->stop;
}

/* The client's evaluation at step it in no-grad mode: vs [3] := val, score, train (its own, or
 * the mean batch loss), rank 0's on every rank; at a resume's first step the evaluation its
 * checkpoint saved, when its format kept one (ag_train_state.eval_step). */
static ag_status client_eval(loop *L, long it, double *vs, ag_error *err)
{
    const ag_train_client *c = L->c;
    double mean = L->st.loss_n ? L->st.loss_sum / (double)L->st.loss_n : NAN;   /* the batch losses' */
    if (it == L->r->start && L->o->resume && L->st.eval_step == it) {   /* the one the checkpoint saved */
        vs[0] = L->st.val_loss, vs[1] = L->st.score, vs[2] = isnan(L->st.train_loss) ? mean : L->st.train_loss;
        return AG_OK;
    }
    vs[0] = vs[1] = NAN;
    vs[2] = mean;
    ag_ctx_reset(L->ctx);
    ag_ctx_set_grad(L->ctx, false);
    ag_status s = c->evaluate_train ? c->evaluate_train(c->user, L->ctx, &vs[2], err) : AG_OK;
    ag_ctx_reset(L->ctx);
    if (s == AG_OK) s = c->evaluate(c->user, L->ctx, &vs[0], &vs[1], err);
    ag_ctx_set_grad(L->ctx, true);
    ag_ctx_reset(L->ctx);
    return s ? s : ag_ddp_share(L->ddp, vs, 3 * sizeof *vs, err);   /* every rank evaluated alike */
}

/* The held-out evaluation of the weights after `it` steps: its row's columns and a line. */
static ag_status evaluate(loop *L, long it, bool *is_best, ag_error *err)
{
    double vs[3];
    ag_status s = ag_ddp_check_weights(L->ddp, it, err);   /* the ranks still hold one model */
    if (s == AG_OK) s = client_eval(L, it, vs, err);
    if (s || stop_request(L)) return s;   /* a stop signal during it: no more of it (the loop saves as it is) */
    double val = vs[0], score = vs[1], train = vs[2];
    bool both = L->c->evaluate_train != NULL;   /* two losses: each named */
    bool no_val = both && isnan(val);   /* no held-out split (char_lm's without one): the train loss judges */
    if (!no_val && (s = check_divergence(L, it, both ? "the evaluation's val loss" : "the evaluation loss", val, err)))
        return s;   /* opts->diverge_floor */
    if (both && (s = check_divergence(L, it, "the evaluation's train loss", train, err))) return s;
    double judged = no_val ? train : val;
    *is_best = isfinite(judged) && judged < L->st.best_loss;
    if (*is_best) {
        L->st.best_loss = judged;
        L->st.best_step = it;
    }
    L->st.loss_taken = true;   /* the sum stays until the next step: this step's checkpoint keeps it for a resume */
    L->st.eval_step = it;   /* for the client's format (ag_train_format) */
    L->st.train_loss = train;
    L->st.val_loss = val;
    L->st.score = score;
    L->r->val_loss = val;
    L->r->score = score;
    L->r->train_loss = train;
    eval_said(L, it, train, val, score);
    if (!L->acts) return AG_OK;
    return ag_activations_measure(L->acts, L->ctx, L->c, L->o->seed, it, L->o->log, err);   /* --log-activations */
}

/* A checkpoint of the weights after `it` steps (once per step), metrics.csv's rows flushed first. */
static ag_status checkpoint(loop *L, long it, bool is_best, ag_error *err)
{
    if (L->saved_at == it) return AG_OK;
    if (!L->writer) return L->saved_at = it, AG_OK;   /* rank 0 writes it */
    if (L->csv && fflush(L->csv) != 0)
        return ag_seterr(err, AG_ERR_IO, "%s/metrics.csv: cannot write: %s", L->o->out_dir, strerror(errno));
    ag_status s = ag_train_save(L->lock, L->o->out_dir, L->c, &L->st, is_best, L->replaces != 0, L->r->ckpt,
                                err);
    if (s == AG_OK) L->saved_at = it;
    if (s == AG_OK && L->replaces) ag__loop_replace(L->o->out_dir, L->c, L->replaces);   /* opts->overwrite */
    if (s == AG_OK) L->replaces = 0;
    return s;
}


/* The budget's decisions summed over the ranks (ddp.h), so that all stop at the same step. */
static ag_status ranks_sum(void *ddp, double *v, ag_error *err) { return ag_ddp_sum(ddp, v, err); }

/* The end at step it (the last, the budget's, or a signal's): evaluated (not on a signal) and saved. */
static ag_status finish(loop *L, long it, bool evaluate_too, ag_error *err)
{
    bool best = false;
    ag_status s = evaluate_too ? evaluate(L, it, &best, err) : AG_OK;
    if (s == AG_OK && evaluate_too && stop_request(L)) L->r->stop_signal = stop_request(L);   /* during it */
    if (s == AG_OK && L->evaluated) s = put_row(L, err, "%ld,,%s%s\n", it, L->eval_cols, client_cells(L, it, false));
    if (s == AG_OK) s = checkpoint(L, it, best, err);
    L->r->step = it;
    return s;
}

/* A line of the time budget's, on the log. */
static void say(void *L, const char *line)
{
    ag_progress_line(&((loop *)L)->prog, "%s", line);
    ((loop *)L)->drawn = false;
}

static ag_status run_loop(loop *L, ag_error *err)
{
    const ag_train_opts *o = L->o;
    for (long it = L->st.step;; it++) {
        if (stop_request(L)) {
            L->r->stop_signal = stop_request(L);
            return finish(L, it, false, err);
        }
        bool last = it >= o->steps;
        ag_status s = ag_budget_check(L->budget, it, &last, err);   /* no room for a step and the final evaluation */
        if (s) return s;
        L->run->steps = L->budget->steps;   /* a count the budget fitted (fit) */
        L->r->out_of_time = L->budget->out_of_time;
        if (L->budget->no_eval) return finish(L, it, false, err);   /* not one evaluation batch fits: a checkpoint */
        if (last) return finish(L, it, true, err);
        /* a resume evaluates again where it starts, as the run it continues did (no second save);
         * under a budget a fresh run too, so that the final evaluation's time is known in time */
        bool due = o->every > 0 && (it > L->r->start || o->resume || o->eval_at_start) && it % o->every == 0;
        due = due || (L->budget->deadline && it == L->r->start);
        if (due) {
            bool best = false;
            s = evaluate(L, it, &best, err);
            if (s == AG_OK && !stop_request(L)) s = checkpoint(L, it, best, err);
        }
        if (s == AG_OK && stop_request(L)) {   /* one came during the evaluation: saved as it is, no step more */
            L->r->stop_signal = stop_request(L);
            return finish(L, it, false, err);
        }
        if (s == AG_OK) s = ag_budget_calibrate(L->budget, it, due, &last, err);   /* the evaluation timed */
        L->run->steps = L->budget->steps;
        if (s == AG_OK && last) {   /* not even one step fits after the first evaluation: saved as it is */
            L->r->out_of_time = true;
            return finish(L, it, false, err);
        }
        if (s == AG_OK) s = step(L, it, err);
        if (s) return s;
    }
}

// --- the run ---

/* The collectives before the first step, in order (the build, each rank's memory check, rank 0's
 * opening of DIR, its state, the weights and moments): raised whenever they change, so that such
 * builds meet only at the first. */
#define LOOP_PROTOCOL 2

uint64_t ag_train_layout(void)
{
    const uint64_t words[] = {LOOP_PROTOCOL, sizeof(ag_real), sizeof(ag_train_state), sizeof(ag_error)};
    return ag_fnv1a(AG_FNV1A_INIT, words, sizeof words);
}

/* Several ranks: one build on all (ddp.h), before anything sized by this build is exchanged
 * (unless the program compared them first: opts->build_checked). A program without MPI that
 * mpirun started N times is refused: N runs would write one DIR (program.h). */
static ag_status same_build(const loop *L, ag_error *err)
{
    if (ag_refuse_launched_alone(L->o->dist, L->c->name, NULL, err)) return AG_ERR_ARG;
    if (L->o->build_checked) return AG_OK;
    const uint64_t sizes[] = {sizeof(ag_real), sizeof L->st, sizeof(ag_error)};
    const ag_build b = {.program = L->c->name, .version = L->c->commit, .protocol = LOOP_PROTOCOL,
                        .layout = ag_fnv1a(AG_FNV1A_INIT, sizes, sizeof sizes)};
    return ag_build_handshake(L->o->dist, &b, NULL, err);
}

/* The client's step_bytes, the weights, gradients and Adam's moments and the program, per rank
 * on this machine, within its memory (train.h); each rank checks, and every rank learns every
 * rank's outcome: a refusal is the same error on all. */
static ag_status fits(const loop *L, ag_error *err)
{
    const ag_train_client *c = L->c;
    if (!c->params) return ag_seterr(err, AG_ERR_ARG, "ag_train_run: the client has no params");
    double run = AG_PROCESS_BYTES + 4.0 * (double)c->params->total * sizeof(ag_real) + c->step_bytes;
    char shape[96];
    snprintf(shape, sizeof shape, "a model of %zu parameters at batch %d", c->params->total, c->batch);
    ag_error why = {0};
    const char *who = c->name ? c->name : "ag_train_run";
    ag_status mine = c->step_bytes > 0 ? ag_check_memory(run * ag_local_ranks(L->o->dist), who, shape, &why) : AG_OK;
    return ag_share_outcome(L->o->dist, mine, &why, NULL, err);
}

/* The split of a step over ranks and micro-batches (ddp.h), and what the client brings for it. */
static ag_status start_ddp(loop *L, ag_error *err)
{
    const ag_train_client *c = L->c;
    if (!c->draw || !(c->loss || c->pass) || !c->evaluate || c->batch < 1)
        return ag_seterr(err, AG_ERR_ARG, "ag_train_run: the client has no draw, loss or evaluate call, or no batch");
    const ag_ddp_opts d = {.dist = L->o->dist, .grad_accum = L->o->grad_accum, .batch_size = c->batch,
                           .params = c->params, .stop = L->stop, .unit = c->unit, .batch_flag = c->batch_flag};
    return ag_ddp_new(&L->ddp, &d, err);
}

/* Rank 0's DIR: made (if missing) and locked; DIR/latest's weights and state on a resume. */
static ag_status open_dir(loop *L, ag_error *err)
{
    const char *dir = L->o->out_dir;
    ag_error none = {0};
    ag_status s = ag__loop_outside_runs(dir, L->c, err);   /* before anything there is made, locked or read */
    if (s) return s;
    if (L->o->make_parents && (s = ag_mkdir_p(dir, err))) return s;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return ag_seterr(err, AG_ERR_IO, "%s: cannot create: %s", dir, strerror(errno));
    if ((s = ag_lock_take(L->lock, dir, err)) || (s = ag__loop_open(dir, L->c, L->o, &L->st, &L->replaces, err))) return s;
    const ag_params *P = L->c->params;
    if (!L->o->resume && P->m && P->v) {   /* a fresh run's AdamW starts from zero moments, whatever ran before */
        memset(P->m, 0, sizeof *P->m * P->total);
        memset(P->v, 0, sizeof *P->v * P->total);
    }
    if (L->o->resume) ag_ckpt_pointer(dir, AG_CKPT_LATEST, L->r->ckpt, &none);   /* stopped before a new one */
    return AG_OK;
}

/* Every rank learns rank 0's status s of open_dir; the others fail with it, rank 0 says why. */
static ag_status agree_open(loop *L, ag_status s, ag_error *err)
{
    if (ag_ddp_ranks(L->ddp) == 1) return s;
    double v = s;
    ag_error ignored = {0};   /* rank 0 keeps its own reason */
    ag_status t = ag_ddp_share(L->ddp, &v, sizeof v, L->writer && s ? &ignored : err);
    if (L->writer) return s ? s : t;
    if (t || v == 0) return t;
    return ag_seterr(err, (ag_status)v, "rank 0 could not start the run in %s (it says why)", L->o->out_dir);
}

/* Rank 0's DIR opened (open_dir), its weights and state taken by every rank; metrics.csv opened. */
static ag_status open_run(loop *L, ag_error *err)
{
    const char *dir = L->o->out_dir;
    ag_status s = agree_open(L, L->writer ? open_dir(L, err) : AG_OK, err);
    if (s == AG_OK) s = ag_ddp_share(L->ddp, &L->st, sizeof L->st, err);   /* the step, the stream, the best */
    if (s == AG_OK) s = ag_ddp_share_start(L->ddp, err);                   /* the weights, the moments */
    if (s) return s;
    L->saved_at = L->o->resume ? L->st.step : -1;
    L->r->start = L->r->step = L->st.step;
    if (!(L->ctx = ag_ctx_new())) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    if (L->c->start && (s = L->c->start(L->c->user, L->ctx, &L->st, err))) return s;   /* the client's, for the run */
    if (!L->writer) return AG_OK;   /* no file of its own */
    if (L->o->log_dynamics > 0 &&
        !(L->dyn = ag_dynamics_log_open(L->c->params, dir, true, L->o->resume ? L->st.step : -1, err)))
        return err->status;
    if (L->o->log_activations &&
        !(L->acts = ag_activations_open(L->c->params, dir, true, L->o->resume ? L->st.step : -1, err)))
        return err->status;
    char head[2048];   /* the loop's columns, then the client's */
    if (snprintf(head, sizeof head, "%s%s%s%s\n", CSV_HEAD, L->c->no_score ? "" : ",score", L->c->columns ? "," : "",
                 L->c->columns ? L->c->columns : "") >= (int)sizeof head)
        return ag_seterr(err, AG_ERR_ARG, "ag_train_run: the client's metrics.csv columns are too long");
    return ag_csv_open(dir, "metrics.csv", head, L->o->resume ? L->st.step : -1, &L->csv, err);
}

/* The client's config, then the trainer's options, as "key = value" lines (malloc'd; NULL on OOM). */
static char *config_lines(const loop *L)
{
    const ag_train_opts *o = L->o;
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    if (!fp) return NULL;
    if (L->c->config) fprintf(fp, "%s\n", L->c->config);
    fprintf(fp, "train.steps = %ld\ntrain.every = %ld\ntrain.seed = %llu\ntrain.time_budget_s = %g\n", o->steps,
            o->every, (unsigned long long)o->seed, o->time_budget_s);
    fprintf(fp, "train.lr = %g\ntrain.min_lr = %g\ntrain.warmup_iters = %ld\ntrain.lr_decay_iters = %ld\n"
            "train.lr_schedule = %s\n", o->sched.lr, o->sched.min_lr, o->sched.warmup_iters, o->sched.lr_decay_iters,
            ag_switch_name(&ag_lr_shape_switch, o->sched.shape));
    fprintf(fp, "train.adam = beta1 %g, beta2 %g, eps %g, weight_decay %g\ntrain.grad_clip = %g\n", o->adam.beta1,
            o->adam.beta2, o->adam.eps, o->adam.weight_decay, o->grad_clip);
    fprintf(fp, "train.threads = %d\ntrain.resume = %s\ntrain.log_dynamics = %ld\n", o->threads,
            o->resume ? "yes" : "no", o->log_dynamics);
    fprintf(fp, "train.log_activations = %s\ntrain.lr_find = %g\n", o->log_activations ? "yes" : "no",
            o->lr_find_lo);
    if (fclose(fp) == 0) return text;
    free(text);
    return NULL;
}

/* A note of the run's end (no picture, no card): to the program's opts->warn, else "note: ..." on the log. */
static void note(const loop *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(const loop *L, const char *fmt, ...)
{
    const ag_train_opts *o = L->o;
    char line[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (o->warn) o->warn(o->warn_user, line);
    else if (o->log) fprintf(o->log, "note: %s\n", line);
}

/* What the card's rate counts: the client's rate_unit, its unit, or items. */
static const char *unit_name(const ag_train_client *c)
{
    return c->rate_unit ? c->rate_unit : c->unit ? c->unit : "items";
}

/* DIR/report.md, the card of the run that ended (a failure is a note on the log, never the run's). */
static void report(loop *L, const char *const *pics)
{
    const ag_train_result *r = L->r;
    const ag_train_client *c = L->c;
    char best[64] = "";
    ag_error e = {0};
    char *config = config_lines(L);
    char *json = c->config_json ? c->config_json(c->user) : NULL;
    ag_run_report rep = {.commit = c->commit, .config_kv = json ? NULL : config, .config_json = json,
                         .threads = ag_threads(), .steps = r->step - r->start, .iter = r->step,
                         .out_of_time = r->out_of_time, .wall_s = r->wall_s,
                         .tokens = (double)(r->step - r->start) * c->units_per_step, .unit = unit_name(c),
                         .train_loss = r->train_loss, .val_loss = r->val_loss, .best_loss = L->st.best_loss,
                         .score_name = c->no_score ? NULL : c->score_name ? c->score_name : "score", .score = r->score,
                         .pictures = pics};
    rep.kernels = ag_ctx_kernels(L->ctx) == AG_KERNELS_REFERENCE ? "reference" : "fast";
    if (ag_ckpt_pointer(L->o->out_dir, AG_CKPT_BEST, best, &e) == AG_OK) rep.best = best;
    ag_error_clear(&e);
    char *text = NULL;
    if (c->sample) {   /* the model as the last checkpoint has it */
        ag_ctx_reset(L->ctx);
        ag_ctx_set_grad(L->ctx, false);
        if (c->sample(c->user, L->ctx, &text, &e) == AG_OK) rep.sample = text;
        else note(L, "no sample on the card: %s", e.msg);
        ag_ctx_set_grad(L->ctx, true);
        ag_ctx_reset(L->ctx);
        ag_error_clear(&e);
    }
    if (ag_report_write(L->o->out_dir, &rep, &e)) note(L, "no report.md: %s", e.msg);
    free(json);
    free(config);
    free(text);
}

/* png among the card's pictures when drawn (s AG_OK), else a note */
static void picture(const loop *L, ag_status s, const char *png, const char ***pic, ag_error *e)
{
    if (s == AG_OK) *(*pic)++ = png;
    else note(L, "no %s: %s", png, e->msg);
    ag_error_clear(e);
}

/* loss.png and report.md: what a person looks at after the run; neither is worth failing it. */
static void pictures(loop *L)
{
    ag_error e = {0};
    const char *pics[16] = {NULL}, **pic = pics, *dir = L->o->out_dir;
    const ag_loss_plot none = {.title = L->c->name, .floor = NAN, .with_val = true};
    if (L->c->end) L->c->end(L->c->user, L->r->step);   /* the program's last pictures */
    size_t n = 0;
    while (L->o->no_pictures && L->o->pictures && L->o->pictures[n] && n < 15) n++;
    if (L->o->no_pictures) ag_run_pictures(dir, L->o->pictures, n, L->since, pics);   /* the program's own */
    else {
        picture(L, ag_plot_loss(dir, L->c->plot ? L->c->plot : &none, &e), "loss.png", &pic, &e);
        if (L->dyn) picture(L, ag_plot_dynamics(dir, ag_dynamics_log_layers(L->dyn), &e), "dynamics.png", &pic, &e);
        if (L->acts)
            picture(L, ag_plot_activations(dir, ag_activations_layers(L->acts), &e), "activations.png", &pic, &e);
        if (L->o->lr_find_lo > 0) picture(L, ag_lr_range_read(dir, &L->r->lr_find, &e), "lr_find.png", &pic, &e);
    }
    if (!L->o->no_report) report(L, pics);   /* else the program's own card */
}

/* The run's budget: the program's (opts->budget, what it left unset the loop's), or the loop's
 * own of opts->time_budget_s; counted from now unless the program's began before. */
static void set_budget(loop *L, const ag_train_opts *o)
{
    ag_budget *b = L->budget = o->budget ? o->budget : &L->own_budget;
    if (!o->budget) *b = (ag_budget){.budget_s = o->time_budget_s, .final_s = PICTURES_S};
    else b->sched = &L->run->sched;   /* a count it fits moves the end of the schedule the loop steps by */
    if (!b->clock) b->clock = o->clock, b->clock_user = o->clock_user;
    if (!b->say) b->say = say, b->say_user = L;
    if (!b->steps) b->steps = o->steps;
    if (!b->eval_every) b->eval_every = o->every;
    if (!b->t0) b->t0 = ag_budget_now(b);
}

ag_status ag_train_run(const ag_train_client *c, const ag_train_opts *o, ag_train_result *r, ag_error *err)
{
    ag_error own = {0};
    if (!err) err = &own;
    ag_train_opts mine = *o;   /* rank 0's log alone */
    if (ag_dist_rank(o->dist) != 0) mine.log = NULL, mine.warn = NULL;
    loop L = {.c = c, .o = &mine, .run = &mine, .r = r, .writer = ag_dist_rank(o->dist) == 0, .saved_at = -1, .t0 = ag_now_s(), .since = time(NULL),
              .eval_cols = ""};
    L.lock = o->lock ? o->lock : &L.own_lock;
    set_budget(&L, o);
    L.st.best_loss = INFINITY;
    L.st.best_step = -1;
    L.st.eval_step = -1;
    L.st.train_loss = L.st.val_loss = L.st.score = NAN;
    ag_rng_seed(&L.st.rng, o->seed);
    memset(r, 0, sizeof *r);
    r->loss = r->val_loss = r->score = NAN;
    struct sigaction old[2];
    L.stop = catch_signals(o, old);
    if (o->threads > 0) ag_threads_init(o->threads);
    ag_thread_tuner_init(&L.tuner, o->threads > 1 ? o->threads : 1);
    ag_progress_init(&L.prog, mine.log, o->progress, ag_dist_size(o->dist));
    ag_status s = same_build(&L, err);
    if (s == AG_OK) s = fits(&L, err);
    if (s == AG_OK) s = start_ddp(&L, err);
    if (o->ddp_out) *o->ddp_out = L.ddp;   /* the client's evaluation shares its batches through it */
    L.budget->sum = ranks_sum;   /* started before the client's start call, which may probe it */
    L.budget->sum_user = L.ddp;
    L.budget->ranks = ag_ddp_ranks(L.ddp);
    ag_budget_start(L.budget);
    if (s == AG_OK) s = open_run(&L, err);
    L.budget->start = r->start;
    if (s == AG_OK) s = run_loop(&L, err);
    if (L.drawn) ag_progress_break(&L.prog);   /* the progress line ends before anything after it */
    if (s == AG_OK) ag_ddp_log_summary(L.ddp, mine.log);
    if (L.csv && fclose(L.csv) != 0 && s == AG_OK)
        s = ag_seterr(err, AG_ERR_IO, "%s/metrics.csv: cannot write: %s", o->out_dir, strerror(errno));
    r->wall_s = ag_now_s() - L.t0;
    if (s == AG_OK && !r->stop_signal && L.writer) pictures(&L);
    if (o->ddp_out) *o->ddp_out = NULL;
    ag_ddp_free(L.ddp);
    ag_dynamics_log_free(L.dyn);
    ag_activations_free(L.acts);
    ag_ctx_free(L.ctx);
    if (L.lock == &L.own_lock) ag_lock_drop(&L.own_lock);   /* the program drops its own */
    restore_signals(o, old);
    return s;
}
