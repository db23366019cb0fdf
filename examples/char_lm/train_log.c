/* train_log.c -- what a training run reports (run.h): the log (the run's header, a progress
 * line, a line per evaluation, the end), DIR/metrics.csv (one row per step, written through at
 * once, so a full disk stops the run at the first row it refuses) and the plots, loss.png and
 * with --log-attn-stats attn.png, drawn by gnuplot in the background (train/train.h, train/plot_attn.h). Rank 0 alone
 * writes files (train/ddp.h); the others have no metrics file and no log. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */

void lm_log_warn(const lm_run *R, const char *msg)
{
    if (R->o->warn) fprintf(R->o->warn, "char_lm: warning: %s\n", msg);
}

void lm_log_line(const lm_run *R, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag_progress_vline(&R->rep.prog, fmt, ap);   /* the progress line cleared first (train/train.h) */
    va_end(ap);
}

// --- metrics.csv ---

/* The six columns, then two per layer with --log-attn-stats (train/train.h: ag_csv_layer_head),
 * opened as ag_csv_open does. */
ag_status lm_log_open_metrics(lm_run *R, ag_error *err)
{
    static const char *const attn[] = {"attn_entropy", "attn_max", NULL};
    char *head = ag_csv_layer_head("iter,lr,loss,train_loss,val_loss,tokens_per_s", attn,
                                   R->cfg.log_attn_stats ? R->cfg.model.n_layer : 0);
    ag_status s = head ? ag_csv_open(R->o->out_dir, "metrics.csv", head, R->ctl.resumed ? R->ctl.start : -1,
                                     &R->rep.metrics, err)
                       : ag_seterr(err, AG_ERR_NOMEM, "metrics.csv: out of memory");
    free(head);
    return s;
}

/* One row of metrics.csv (printf-style). */
static ag_status put_row(lm_run *R, ag_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static ag_status put_row(lm_run *R, ag_error *err, const char *fmt, ...)
{
    if (!R->rep.metrics) return AG_OK;   /* a rank other than 0 (train/ddp.h) */
    va_list ap;
    va_start(ap, fmt);
    int w = vfprintf(R->rep.metrics, fmt, ap);
    va_end(ap);
    if (w < 0) return ag_seterr(err, AG_ERR_IO, "%s/metrics.csv: write failed: %s", R->o->out_dir, strerror(errno));
    return AG_OK;
}

ag_status lm_log_flush(lm_run *R, ag_error *err)
{
    FILE *f = R->rep.metrics;
    if (!f) return AG_OK;   /* a rank other than 0 writes none */
    if (fflush(f) == 0 && !ferror(f)) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/metrics.csv: write failed: %s; stopped, the last checkpoint is kept",
                     R->o->out_dir, strerror(errno));
}

static void fmt_loss(char *buf, size_t n, bool have, double v)
{
    if (have && !isnan(v)) snprintf(buf, n, "%.6f", v);
    else buf[0] = '\0';
}

void lm_log_blank_eval(lm_run *R)
{
    lm_report *rep = &R->rep;
    rep->train_col[0] = rep->val_col[0] = '\0';
    rep->stats[0] = '\0';
    for (int l = 0; R->cfg.log_attn_stats && l < R->cfg.model.n_layer; l++) strcat(rep->stats, ",,");
}

ag_status lm_log_last_row(lm_run *R, long it, ag_error *err)
{
    const lm_report *rep = &R->rep;
    return put_row(R, err, "%ld,,,%s,%s,%s\n", it, rep->train_col, rep->val_col, rep->stats);
}

// --- the log ---

/* The switches that are not MODEL.md's default, "--norm rmsnorm, --no-scale", in sw [n]. */
static size_t switches(const lm_config *c, char *sw, size_t n)
{
    size_t len = 0;
    sw[0] = '\0';
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *fl = &lm_fields[i];
        char v[64];
        bool is_switch = fl->type == LM_T_ENUM || fl->type == LM_T_BOOL;   /* not time_budget, budget_iters */
        if (!fl->optional || !is_switch || ag_field_get(c, fl) == 0 || len >= n) continue;
        int w = snprintf(sw + len, n - len, "%s%s%s%s", len ? ", " : "", fl->flag, fl->type == LM_T_BOOL ? "" : " ",
                         fl->type == LM_T_BOOL ? "" : ag_field_format(c, fl, v, sizeof v));
        if (w > 0) len += (size_t)w;
    }
    return len;
}

void lm_log_header(const lm_run *R)
{
    FILE *f = R->o->log;
    if (!f) return;
    const lm_config *c = &R->cfg;
    const lm_data *D = &R->data;
    fprintf(f, "data: %s: %zu characters, vocabulary %d; train %zu, val %zu tokens\n", R->o->data_path, D->text.n,
            D->text.vocab.V, D->n_train, D->n_val);
    fprintf(f, "model: %d layers, %d heads, n_embd %d, block_size %d, vocab %d: %zu parameters\n",
            c->model.n_layer, c->model.n_head, c->model.n_embd, c->model.block_size, c->model.vocab_size,
            R->learn.m.g->params->total);
    char sw[512];
    if (switches(c, sw, sizeof sw)) fprintf(f, "switches: %s\n", sw);
    char steps[32], decay[32];   /* "?" while --time-budget has the count to fit */
    bool to_fit = c->time_budget > 0 && !c->budget_iters;
    snprintf(steps, sizeof steps, to_fit ? "?" : "%ld", c->max_iters);
    snprintf(decay, sizeof decay, to_fit && c->lr_decay_iters == c->max_iters ? "?" : "%ld", c->lr_decay_iters);
    fprintf(f, "training: %s, lr %g -> %g (warmup %ld, decay to %s), batch %d, %s steps, eval every %ld; "
            "checkpoint %s\n", ag_switch_name(&lm_optimizer_switch, c->optimizer), c->lr, c->min_lr, c->warmup_iters,
            decay, c->batch_size, steps, c->eval_interval, R->o->out_dir);
    if (c->time_budget > 0) {
        char d[32];
        ag_format_duration(d, sizeof d, c->time_budget);
        fprintf(f, "time budget: %s; %s\n", d, c->budget_iters ? "the step count above is the one it fixed"
                : "the first steps are timed, then the step count (and the decay) is fitted to it");
    }
    if (R->ctl.resumed) fprintf(f, "resuming at iteration %ld\n", R->learn.st.iter);
    if (R->o->init_from) fprintf(f, "initialised from %s\n", R->o->init_from);
    fflush(f);
}

void lm_log_eval(lm_run *R, long it, double tl, double vl)
{
    lm_report *rep = &R->rep;
    fmt_loss(rep->train_col, sizeof rep->train_col, true, tl);
    fmt_loss(rep->val_col, sizeof rep->val_col, R->data.n_val > 0, vl);
    char text[8192];   /* 256 layers' attention statistics */
    lm_client_eval_text(R, it, tl, vl, NAN, text, sizeof text);
    ag_progress_line(&rep->prog, "%s", text);   /* the progress line cleared first, flushed */
}

bool lm_log_due(const lm_run *R, long it)
{
    long log_every = R->o->log_every > 0 ? R->o->log_every : 10;
    return it % log_every == 0 || it + 1 == R->cfg.max_iters;
}

/* On a terminal one line redrawn at most 10 times a second; in a file at each log step. */
static void log_progress(lm_run *R, long it, double loss, double lr)
{
    ag_progress *p = &R->rep.prog;
    if (!ag_progress_due(p, lm_log_due(R, it), it + 1 == R->cfg.max_iters)) return;
    char line[256];
    lm_client_progress_text(R, it, R->cfg.max_iters, loss, lr, p->ema_s, &R->ctl.budget, line, sizeof line);
    ag_progress_show(p, "%s", line);
}

ag_status lm_log_written(const lm_run *R, ag_error *err)
{
    FILE *f = R->o->log;
    if (!f || (fflush(f) == 0 && !ferror(f))) return AG_OK;
    int e = errno;
    return ag_seterr(err, AG_ERR_IO, "%s: write failed: %s; stopped; %s", f == stdout ? "stdout" : "the log",
                     strerror(e), LM_KEPT(R));
}

ag_status lm_log_step(lm_run *R, long it, double lr, double loss, double t0, ag_error *err)
{
    const lm_train_opts *o = R->o;
    lm_report *rep = &R->rep;
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    double dt = ag_now_s() - t0, tok_s = (double)B * T / (dt > 0 ? dt : 1e-9);
    ag_progress_step(&rep->prog, dt, it == R->ctl.start);   /* the smoothed step time */
    if (o->losses && it < o->n_losses) o->losses[it] = loss;
    ag_status s = put_row(R, err, "%ld,%.6g,%.6f,%s,%s,%.1f%s\n", it, lr, loss, rep->train_col, rep->val_col, tok_s,
                          rep->stats);
    if (s == AG_OK) s = lm_log_flush(R, err);
    if (s == AG_OK) s = lm_dynamics_record(R, it, lr, err);   /* --log-dynamics, at a log step */
    if (s) return s;
    log_progress(R, it, loss, lr);
    return lm_log_written(R, err);   /* a full disk under the log stops the run at once */
}

void lm_log_break(const lm_run *R) { ag_progress_break(&R->rep.prog); }

void lm_log_end(const lm_run *R, const lm_train_result *r)
{
    FILE *f = R->o->log;
    if (!f) return;
    char el[32];
    ag_format_duration(el, sizeof el, ag_now_s() - R->rep.t_start);
    ag_ddp_log_summary(R->ctl.ddp, f);
    if (r->interrupted)
        fprintf(f, "interrupted at iteration %ld after %s; checkpoint in %s (continue with --resume)%s\n", r->iter, el,
                R->o->out_dir, r->stop_signal == SIGUSR1 ? "; a checkpoint signal: exit 75, to be requeued" : "");
    else
        fprintf(f, "done: %ld iterations in %s; checkpoint in %s\n", r->iter - R->ctl.start, el, R->o->out_dir);
    const ag_budget *b = &R->ctl.budget;
    if (b->deadline) {   /* the budget counts from lm_train's start, the setup included */
        double used = lm_budget_now(R->o) - b->t0, budget = b->deadline - b->t0;
        fprintf(f, "time budget: %.2f s of %.3g s used (%+.2f s)\n", used, budget, used - budget);
    }
    fflush(f);
}

// --- the plots ---

void lm_log_plots(lm_run *R, bool last)
{
    lm_report *rep = &R->rep;
    const char *dir = R->o->out_dir;
    int V = R->cfg.model.vocab_size;   /* loss.png's line ln V: a uniform guess */
    char floor_title[96];
    snprintf(floor_title, sizeof floor_title, "ln V = ln %d: every character equally likely", V);
    const ag_loss_plot lp = {"char\\_lm: loss per character (nats)", log((double)V), floor_title, R->data.n_val > 0};
    ag_error why = {0};
    ag_status ps = ag_plot_loss_again(dir, &lp, &rep->plot_pid, last, &why);   /* in the background (train/train.h) */
    if (!ps && R->cfg.log_attn_stats)
        ps = ag_plot_attn_stats(dir, 7, R->cfg.model.n_layer, R->cfg.model.block_size, &why);   /* attn_entropy_L0's column */
    if (!ps && R->rep.dyn) ps = ag_plot_dynamics(dir, R->cfg.model.n_layer, &why);   /* once this run measured */
    if (!ps && R->rep.acts) ps = ag_plot_activations(dir, R->cfg.model.n_layer, &why);
    if (ps) {   /* a warning, and no more plots this run */
        lm_log_warn(R, why.msg);
        rep->plot_ok = false;
    }
}
