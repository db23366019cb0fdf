/* train_log.c -- what a training run says beside the trainer's log and metrics.csv (run.h): the
 * run's header, its warnings, the end, and the plots: loss.png in the background, with
 * --log-attn-stats attn.png, --log-dynamics dynamics.png, --log-activations activations.png
 * (train/train.h, train/plot_attn.h). Rank 0 alone writes files (train/ddp.h); the others have
 * no log. */
#define _GNU_SOURCE   /* open_memstream */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "tensor/debug.h"   /* ag_now_s */

void lm_log_warn(void *user, const char *msg)
{
    const lm_run *R = user;
    if (R->o->warn) fprintf(R->o->warn, "char_lm: warning: %s\n", msg);
}

// --- the log ---

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
    if (ag_fields_switches(c, lm_fields, LM_N_FIELDS, sw, sizeof sw)) fprintf(f, "switches: %s\n", sw);   /* not MODEL.md's default */
    char steps[32], decay[32];   /* "?" while --time-budget has the count to fit */
    bool to_fit = c->time_budget > 0 && !c->budget_iters;
    snprintf(steps, sizeof steps, to_fit ? "?" : "%ld", c->max_iters);
    snprintf(decay, sizeof decay, to_fit && c->lr_decay_iters == c->max_iters ? "?" : "%ld", c->lr_decay_iters);
    fprintf(f, "training: %s, lr %g -> %g (warmup %ld, %s decay to %s), batch %d, %s steps, eval every %ld; "
            "checkpoint %s\n", ag_switch_name(&ag_optimizer_switch, c->optimizer), c->lr, c->min_lr, c->warmup_iters,
            ag_switch_name(&ag_lr_shape_switch, c->lr_schedule), decay, c->batch_size, steps, c->eval_interval,
            R->o->out_dir);
    if (c->time_budget > 0) {
        char d[32];
        ag_format_duration(d, sizeof d, c->time_budget);
        fprintf(f, "time budget: %s; %s\n", d, c->budget_iters ? "the step count above is the one it fixed"
                : "the first steps are timed, then the step count (and the decay) is fitted to it");
    }
    if (R->o->resume) fprintf(f, "resuming at iteration %ld\n", R->learn.st.iter);
    if (R->o->init_from) fprintf(f, "initialised from %s\n", R->o->init_from);
    fflush(f);
}

void lm_log_end(const lm_run *R, const lm_train_result *r)
{
    FILE *f = R->o->log;
    if (!f) return;
    char el[32];
    ag_format_duration(el, sizeof el, ag_now_s() - R->rep.t_start);
    if (r->interrupted)
        fprintf(f, "interrupted at iteration %ld after %s; checkpoint in %s (continue with --resume)%s\n", r->iter, el,
                R->o->out_dir, r->stop_signal == SIGUSR1 ? "; a checkpoint signal: exit 75, to be requeued" : "");
    else
        fprintf(f, "done: %ld iterations in %s; checkpoint in %s\n", r->iter - R->ctl.start, el, R->o->out_dir);
    const ag_budget *b = &R->ctl.budget;
    if (b->deadline) {   /* the budget counts from lm_train's start, the setup included */
        double used = ag_budget_now(b) - b->t0, budget = b->deadline - b->t0;
        fprintf(f, "time budget: %.2f s of %g s used (%+.2f s)\n", used, budget, used - budget);
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
    if (!ps && R->cfg.log_dynamics) ps = ag_plot_dynamics(dir, R->cfg.model.n_layer, &why);
    if (!ps && R->cfg.log_activations) ps = ag_plot_activations(dir, R->cfg.model.n_layer, &why);
    if (ps) {   /* a warning, and no more plots this run */
        lm_log_warn(R, why.msg);
        rep->plot_ok = false;
    }
}

// --- the end of a run: the last pictures and the card, the trainer's (train/train.h) ---

const char *const lm_pictures[] = {"loss.png", "dynamics.png", "attn.png", "activations.png", NULL};

static void last_pictures(void *user, long step)
{
    lm_run *R = user;
    if (!R->ctl.budget.no_eval && R->rep.plot_ok && step > 0) lm_log_plots(R, true);   /* the final ones, waited for */
}

static char *config_json(void *user) { return ag_fields_to_json(&((lm_run *)user)->cfg, lm_fields, LM_N_FIELDS); }

/* The card's sample, which main.c prints after the run (rep.sample): 200 characters at
 * temperature 1.0 from seed 1337; none when the time budget ran out (it holds the whole
 * command, issue 35). */
static ag_status card_sample(void *user, ag_ctx *ctx, char **text, ag_error *err)
{
    lm_run *R = user;
    const ag_sample_opts so = {200, 1.0, 0, 1337, R->o->stop};
    size_t len = 0;
    (void)ctx;
    *text = NULL;
    if (R->ctl.budget.out_of_time) return AG_OK;
    FILE *mem = open_memstream(text, &len);
    if (!mem) return ag_seterr(err, AG_ERR_NOMEM, "sampling: out of memory");
    ag_status s = ag_chars_print(mem, R->learn.m.g, &R->data.text.vocab, NULL, &so, err);   /* as last saved */
    if (fclose(mem) != 0 && s == AG_OK) s = ag_seterr(err, AG_ERR_NOMEM, "sampling: out of memory");
    if (s == AG_OK && *text && !(R->rep.sample = strdup(*text))) s = ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    return s;
}

void lm_log_card(lm_run *R, ag_train_client *c, ag_train_opts *o)
{
    c->end = last_pictures;
    o->pictures = lm_pictures;
    if (!R->o->report) return;
    o->no_report = false;
    c->config_json = config_json;
    c->rate_unit = "tokens";
    c->units_per_step = (double)R->cfg.batch_size * R->cfg.model.block_size;
    c->commit = R->o->commit;
    c->sample = card_sample;
}
