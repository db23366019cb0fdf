/* train_setup.c -- a run before its first step (run.h): the text, the model (new, or a checkpoint's),
 * where the run stands, the buffers, the ranks; and freeing it all (the run directory: ag_train_prepare). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"

/* A stop signal came to this process alone (several ranks wait for the first step's reduction, so
 * that none leaves a collective the others are in). */
static bool signal_seen(const lm_run *R) { return ag_dist_size(R->o->dist) <= 1 && R->o->stop && *R->o->stop; }

/* ag_corpus_opts.stop: a stop signal ends even the load of a huge text within a MiB, and so
 * does the budget's end (issue 35, M1: 100 MB on a loaded machine took a 1 s budget 10 s). */
static bool stop_loading(void *R) { return signal_seen(R); }
static bool stop_reading(void *R) { return signal_seen(R) || ag_budget_setup_late(&((lm_run *)R)->ctl.budget); }

/* The flags, merged on --resume / --init-from with the checkpoint's config (train/fields.h:
 * ag_fields_merge); then --time-budget (train/budget.h), from lm_train's start and the recipe's probe. */
static ag_status take_config(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    lm_model *m = &R->learn.m;
    ag_status s = AG_OK;
    R->cfg = o->resume ? m->cfg : o->cfg;
    if (o->resume || o->init_from)
        s = ag_fields_merge(&R->cfg, &o->cfg, &m->cfg, lm_fields, LM_N_FIELDS, o->given, o->config_given, o->resume,
                            o->resume ? o->out_dir : o->init_from, err);
    if (m->g) m->g->cfg.dropout = R->cfg.model.dropout;   /* the other ranks build theirs later */
    const lm_config *c = &R->cfg;
    ag_budget *b = &R->ctl.budget;
    b->budget_s = c->time_budget;
    b->spent_s = o->budget_spent;
    b->ranks = ag_dist_size(o->dist);
    ag_format_duration(b->as_said, sizeof b->as_said, c->time_budget);
    b->fit = c->budget_iters == 0;   /* a resumed run whose checkpoint has the count: a bound only */
    b->warmup = c->warmup_iters;
    b->eval_iters = c->eval_iters;
    b->final_s = R->rep.plot_ok ? 0.5 : 0;   /* the final evaluation draws loss.png and waits for it */
    return s;
}

/* The text, with the checkpoint's vocabulary if any (a stop signal or the budget's end: empty). */
static ag_status load_text(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    const char *ck = o->resume ? o->out_dir : o->init_from;
    ag_error why = {0};
    ag_corpus_opts co = {.vocab = ck ? &R->learn.m.vocab : NULL, .stop = stop_reading, .user = R};
    ag_status s = ag_corpus_load_with(o->data_path, &co, &R->data.text, &why);
    if (s) return ck ? ag_seterr(err, s, "%s (the vocabulary of %s)", why.msg, ck) : ag_seterr(err, s, "%s", why.msg);
    if (!ck) R->cfg.model.vocab_size = R->data.text.vocab.V;
    return AG_OK;
}

// --- where the run stands ---

/* --resume: where the run stood (read with the model: open_run), which must be the same text. */
static ag_status resume_state(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    const lm_model *m = &R->learn.m;
    lm_train_state *st = &R->learn.st;
    const ag_corpus *text = &R->data.text;
    if (st->run_id != m->run_id) {   /* two files of one checkpoint carry one run's identity */
        char a[20] = "none", b[20] = "none";
        if (m->run_id) snprintf(a, sizeof a, "%016llx", (unsigned long long)m->run_id);
        if (st->run_id) snprintf(b, sizeof b, "%016llx", (unsigned long long)st->run_id);
        return ag_seterr(err, AG_ERR_FORMAT, "--resume: %s holds model.safetensors of run %s but "
                         "train_state.safetensors of run %s: the two files are not one checkpoint", o->out_dir, a, b);
    }
    if ((st->n_tokens != text->n || st->data_hash != ag_ids_hash_until(text->ids, text->n, stop_loading, R)) &&
        !signal_seen(R))   /* a signal abandons the hash: then lm_train stops, nothing written */
        return ag_seterr(err, AG_ERR_ARG, "--resume: %s is not the text the run in %s was trained on (%zu tokens, "
                         "the run had %zu); to train on it from these weights use --init-from", o->data_path,
                         o->out_dir, text->n, st->n_tokens);
    /* a resumed run keeps its split: no text it trained on ever becomes validation text */
    if ((st->n_train != R->data.n_train || st->n_val != R->data.n_val) && !signal_seen(R))
        return ag_seterr(err, AG_ERR_ARG, "--val-fraction %g: the run in %s splits its text into %zu training and "
                         "%zu validation tokens, this would make it %zu and %zu; a resumed run keeps its split (text "
                         "it trained on would become validation text): drop the flag, or start a new run with "
                         "--init-from", R->cfg.val_fraction, o->out_dir, st->n_train, st->n_val, R->data.n_train,
                         R->data.n_val);
    bool ev = st->has_eval;   /* where the run stood, as the format's read would give it the trainer */
    R->learn.from = (ag_train_state){.step = st->iter, .rng = st->rng, .run_id = st->run_id, .best_step = st->best_iter,
                                     .best_loss = st->best_iter >= 0 ? st->best_loss : INFINITY,
                                     .eval_step = ev ? st->iter : -1, .train_loss = ev ? st->eval_train : NAN,
                                     .val_loss = ev ? st->eval_val : NAN, .score = NAN};
    return AG_OK;
}

/* A new run's state (its run id: the trainer's): the batch sampler seeded from --seed (run.h), and
 * the text it trains on. */
static void new_state(lm_run *R)
{
    lm_train_state *st = &R->learn.st;
    const ag_corpus *text = &R->data.text;
    *st = (lm_train_state){.best_iter = -1, .best_loss = NAN, .n_tokens = text->n,   /* no evaluation yet */
                           .n_train = R->data.n_train, .n_val = R->data.n_val};
    ag_rng_seed(&st->rng, ag_seed_at(R->cfg.seed, 0, LM_TAG_BATCH));
    st->data_hash = ag_ids_hash_until(text->ids, text->n, stop_loading, R);   /* 0 after a signal: never saved */
}

// --- the shards, the buffers, the ranks ---

/* --shards (nn.h: ag_gpt_shards_choose) of each rank's micro-batches, or the default: one per thread. */
static ag_status choose_shards(lm_run *R, ag_error *err)
{
    char room[64], note[512];
    const ag_dist *d = R->o->dist;
    const ag_gpt_shards_ask a = {.batch = R->cfg.batch_size, .ranks = ag_dist_size(d), .accum = R->o->grad_accum,
                                 .local = ag_local_ranks(d), .asked = R->o->shards, .have = ag_machine_bytes(room),
                                 .room = room};
    ag_status s = ag_gpt_shards_choose(&R->cfg.model, &a, &R->learn.n_shards, note, sizeof note, err);
    if (s == AG_OK && note[0]) ag_progress_line(&R->rep.prog, "%s", note);
    return s;
}

/* The step's buffers and the attention statistics' (the ctx and the shards: lm_client's start). */
static ag_status alloc_buffers(lm_run *R, ag_error *err)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size, L = R->cfg.model.n_layer;
    lm_data *D = &R->data;
    lm_report *rep = &R->rep;
    D->off = malloc((size_t)B * sizeof *D->off);
    D->x = malloc((size_t)B * T * sizeof *D->x);
    D->y = malloc((size_t)B * T * sizeof *D->y);
    rep->attn = calloc((size_t)L, sizeof *rep->attn);
    rep->entropy = calloc((size_t)L, sizeof *rep->entropy);
    rep->peak = calloc((size_t)L, sizeof *rep->peak);
    if (!D->off || !D->x || !D->y || !rep->attn || !rep->entropy || !rep->peak)
        return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    return AG_OK;
}

/* Rank 0 (or one process), before any rank reads the run: --out as ag_train_prepare takes it (rank 0
 * holds the lock for the job); the checkpoint's model, and with --resume its moments and state. */
static ag_status open_run(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    const ag_train_opts to = {.out_dir = o->out_dir, .resume = o->resume, .warn = lm_log_warn, .warn_user = R,
                              .lock = o->trace && o->trace_only ? NULL : &R->ctl.lock};   /* --trace-only: no lock */
    const char *flag = o->resume ? "--resume" : "--init-from";
    ag_error why = {0};
    ag_status s = ag_train_prepare(&to, &lm_ckpt_kind, err);
    if (s || !(o->resume || o->init_from)) return s;
    if ((s = lm_model_load_as(o->resume ? o->out_dir : o->init_from, AG_CKPT_LATEST, &R->learn.m, &why)) ||
        (o->resume && (s = lm_train_state_load(o->out_dir, R->learn.m.g, &R->learn.st, &why))))
        return ag_seterr(err, s, "%s: %s", flag, why.msg);
    return AG_OK;
}

/* This rank's own setup after rank 0 opened the run, in order; a stop signal (one process alone)
 * ends it early with AG_OK. */
static ag_status prepare(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    lm_data *D = &R->data;
    ag_status s;
    if ((s = take_config(R, err)) || (s = load_text(R, err))) return s;
    if (signal_seen(R)) return AG_OK;   /* during the load too: then the text is empty */
    if ((s = ag_budget_setup_check(&R->ctl.budget, o->data_path, err))) return s;   /* nothing trained or written */
    if ((s = lm_config_validate(&R->cfg, true, err)) || (s = lm_config_check_training(&R->cfg, err))) return s;
    if ((s = ag_gpt_check_train(&R->cfg.model, R->cfg.batch_size, ag_local_ranks(o->dist), "train", err)) ||
        (s = choose_shards(R, err)))   /* what the run will cost, before anything of that size exists */
        return s;
    if ((s = ag_corpus_split(&D->text, R->cfg.val_fraction, R->cfg.model.block_size, &D->n_train, &D->n_val, err)))
        return s;
    R->ctl.budget.splits = D->n_val > 0 ? 2 : 1;   /* what an evaluation reads */
    if (signal_seen(R)) return AG_OK;
    lm_model *m = &R->learn.m;
    if (!m->g) {   /* a new run's model (a checkpoint's was read) */
        ag_error why = {0};
        m->cfg = R->cfg;
        if (!(m->g = ag_gpt_new(&R->cfg.model, R->cfg.seed, &why)))
            return ag_seterr(err, AG_ERR_NOMEM, "cannot build the model: %s", why.msg);
    }
    if (signal_seen(R)) return AG_OK;
    if (o->resume && (s = resume_state(R, err))) return s;
    if (!o->resume) new_state(R);
    R->ctl.start = R->learn.st.iter;
    ag_progress_init(&R->rep.prog, o->log, o->progress, ag_dist_size(o->dist));
    return alloc_buffers(R, err);
}

ag_status lm_run_setup(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    ag_status s;
    if (o->resume && o->init_from) return ag_seterr(err, AG_ERR_ARG, "--resume and --init-from exclude each other");
    if ((s = lm_run_handshake(R, err))) return s;   /* several ranks: one build on all */
    ag_error why = {0};
    ag_status mine = ag_dist_rank(o->dist) == 0 ? open_run(R, &why) : AG_OK;
    if ((s = lm_run_share_start(R, mine, &why, err))) return s;   /* its outcome, its checkpoint: to all */
    ag_error_clear(&why);
    mine = prepare(R, &why);
    if ((s = ag_share_outcome(o->dist, mine, &why, &R->res->error_shared, err))) return s;   /* anyone's: said once */
    if (!R->data.off) return AG_OK;   /* a stop signal ended prepare (one process alone) */
    return lm_run_agree(R, err);      /* the ranks hold the same run (train_agree.c); the trainer splits it */
}

void lm_run_free(lm_run *R)
{
    lm_report *rep = &R->rep;
    if (rep->plot_pid > 0)   /* a run that stops early still leaves a whole picture */
        (void)ag_plot_loss_wait(rep->plot_pid, true, NULL, R->o->out_dir, NULL);
    free(R->data.off);
    free(R->data.x);
    free(R->data.y);
    free(rep->attn);
    free(rep->entropy);
    free(rep->peak);
    ag_gpt_shards_free(R->learn.shards);   /* made for the trainer's ctx, which it freed */
    ag_corpus_free(&R->data.text);
    lm_model_free(&R->learn.m);
    ag_lock_drop(&R->ctl.lock);
}
