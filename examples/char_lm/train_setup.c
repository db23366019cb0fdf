/* train_setup.c -- a training run before its first step and after its last (run.h): the lock
 * on the run directory, the text, the model (new, or a checkpoint's with --resume or
 * --init-from, whose config is merged with the flags), the optimizer's state, the buffers and
 * the ranks; then the run directory itself, and freeing it all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "run.h"


// --- the model and its config ---

/* The model's shape may not change on --resume / --init-from: a flag (or --config) that says
 * otherwise is an error (train/fields.h: ag_fields_merge). Other fields: the checkpoint's
 * (resume) or the command line's. */
static ag_status merge_config(lm_run *R, const lm_config *ck, bool resume, const char *dir, ag_error *err)
{
    const lm_train_opts *o = R->o;
    R->cfg = resume ? *ck : o->cfg;
    return ag_fields_merge(&R->cfg, &o->cfg, ck, lm_fields, LM_N_FIELDS, o->given, o->config_given, resume, dir, err);
}

/* ag_corpus_opts.stop: a stop signal ends even the load of a huge text within a MiB. */
static bool stop_loading(void *R) { return lm_run_signal_seen(R); }

/* --time-budget (one process) ran out during the setup, which it counts from lm_train's start.
 * Not when the recipe's probe before it already took it all (a machine that slow, or under
 * ASan): that run ends at iteration 0 as before, the probe's line saying how slow a step is. */
static bool setup_late(const lm_run *R)
{
    double budget = R->cfg.time_budget, spent = R->o->budget_spent;
    return budget > 0 && spent < budget && ag_dist_size(R->o->dist) <= 1 &&
           lm_budget_now(R->o) - R->ctl.budget.t0 + spent > budget;
}

/* The text's load ends within a MiB of the budget's end too (issue 35, M1: 100 MB on a loaded
 * machine took a 1 s budget 10 s). */
static bool stop_reading(void *R) { return lm_run_signal_seen(R) || setup_late(R); }

/* After the text's load: AG_ERR_ARG when it took the whole budget, nothing trained or written. */
static ag_status check_setup_time(const lm_run *R, ag_error *err)
{
    if (!setup_late(R)) return AG_OK;
    char d[32];
    ag_format_duration(d, sizeof d, R->cfg.time_budget);
    return ag_seterr(err, AG_ERR_ARG, "time budget: %s ran out while reading %s (%.3g s used): nothing trained or "
                     "written; give a longer --time-budget", d, R->o->data_path,
                     lm_budget_now(R->o) - R->ctl.budget.t0 + R->o->budget_spent);
}

/* --resume, --init-from (rank 0, or one process): the checkpoint's model, and with --resume
 * Adam's moments and where the run stood, read one right after the other under the lock. */
static ag_status read_checkpoint(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    lm_model *m = &R->learn.m;
    const char *dir = o->resume ? o->out_dir : o->init_from;
    ag_error why = {0};
    ag_status s = lm_model_load_as(dir, AG_CKPT_LATEST, m, &why);
    if (s) return ag_seterr(err, s, "%s: %s", o->resume ? "--resume" : "--init-from", why.msg);
    if (o->resume && (s = lm_train_state_load(o->out_dir, m->g, &R->learn.st, &why)))
        return ag_seterr(err, s, "--resume: %s", why.msg);
    return AG_OK;
}

/* --resume, --init-from: the checkpoint's config (read by rank 0, lm_run_share_start) merged
 * with the flags, and the text encoded with its vocabulary (a stop signal: the text stays
 * empty). */
static ag_status load_checkpoint(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    lm_model *m = &R->learn.m;
    const char *dir = o->resume ? o->out_dir : o->init_from;
    ag_error why = {0};
    ag_status s;
    if ((s = merge_config(R, &m->cfg, o->resume, dir, err))) return s;
    if (m->g) m->g->cfg.dropout = R->cfg.model.dropout;   /* the other ranks build theirs later */
    ag_corpus_opts co = {.vocab = &m->vocab, .stop = stop_reading, .user = R};
    if ((s = ag_corpus_load_with(o->data_path, &co, &R->data.text, &why)))
        return ag_seterr(err, s, "%s (the vocabulary of %s)", why.msg, dir);
    return AG_OK;
}

/* A new run: the command line's config, the text and its own vocabulary (a stop signal: the
 * text stays empty). */
static ag_status load_text(lm_run *R, ag_error *err)
{
    R->cfg = R->o->cfg;
    ag_corpus *text = &R->data.text;
    ag_status s = ag_corpus_load_with(R->o->data_path, &(ag_corpus_opts){.stop = stop_reading, .user = R}, text, err);
    if (s == AG_OK) R->cfg.model.vocab_size = text->vocab.V;
    return s;
}

static ag_status new_model(lm_run *R, ag_error *err)
{
    ag_error why = {0};
    lm_model *m = &R->learn.m;
    m->cfg = R->cfg;
    if (!(m->g = ag_gpt_new(&R->cfg.model, R->cfg.seed, &why)))
        return ag_seterr(err, AG_ERR_NOMEM, "cannot build the model: %s", why.msg);
    return AG_OK;
}

// --- where the run stands ---

/* --resume: where the run stood (read with the model: read_checkpoint), which must be the same
 * text. */
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
    if (!st->run_id) st->run_id = ag_new_run_id();   /* a checkpoint older than run ids */
    if (st->iter != m->iter)
        return ag_seterr(err, AG_ERR_FORMAT, "--resume: %s holds model.safetensors of iteration %ld but "
                         "train_state.safetensors of iteration %ld (a write was interrupted?)", o->out_dir,
                         m->iter, st->iter);
    if ((st->n_tokens != text->n || st->data_hash != ag_ids_hash_until(text->ids, text->n, stop_loading, R)) &&
        !lm_run_signal_seen(R))   /* a signal abandons the hash: then lm_train stops, nothing written */
        return ag_seterr(err, AG_ERR_ARG, "--resume: %s is not the text the run in %s was trained on (%zu tokens, "
                         "the run had %zu); to train on it from these weights use --init-from", o->data_path,
                         o->out_dir, text->n, st->n_tokens);
    /* a resumed run keeps its split: no text it trained on ever becomes validation text */
    if ((st->n_train != R->data.n_train || st->n_val != R->data.n_val) && !lm_run_signal_seen(R))
        return ag_seterr(err, AG_ERR_ARG, "--val-fraction %g: the run in %s splits its text into %zu training and "
                         "%zu validation tokens, this would make it %zu and %zu; a resumed run keeps its split (text "
                         "it trained on would become validation text): drop the flag, or start a new run with "
                         "--init-from", R->cfg.val_fraction, o->out_dir, st->n_train, st->n_val, R->data.n_train,
                         R->data.n_val);
    R->ctl.resumed = true;
    bool ev = st->has_eval;   /* where the run stood, as the format's read would give it the trainer */
    R->learn.from = (ag_train_state){.step = st->iter, .rng = st->rng, .run_id = st->run_id, .best_step = st->best_iter,
                                     .best_loss = st->best_iter >= 0 ? st->best_loss : INFINITY,
                                     .eval_step = ev ? st->iter : -1, .train_loss = ev ? st->eval_train : NAN,
                                     .val_loss = ev ? st->eval_val : NAN, .score = NAN};
    return AG_OK;
}

/* A new run's state: the batch sampler seeded from --seed (run.h), and the text it trains on. */
static void new_state(lm_run *R)
{
    lm_train_state *st = &R->learn.st;
    const ag_corpus *text = &R->data.text;
    memset(st, 0, sizeof *st);
    st->run_id = ag_new_run_id();
    st->best_iter = -1;   /* no evaluation yet */
    st->best_loss = NAN;
    ag_rng_seed(&st->rng, ag_seed_at(R->cfg.seed, 0, LM_TAG_BATCH));
    st->n_tokens = text->n;
    st->data_hash = ag_ids_hash_until(text->ids, text->n, stop_loading, R);   /* 0 after a signal: never saved */
}

// --- buffers, ranks, the lock ---

/* The default shards (ag_gpt_shards_default, nn.h), with a note when they are fewer than the
 * threads (--threads 1024 once made 1024 gradient buffers, issue 35). */
static int default_shards(const lm_run *R, int micro)
{
    int threads = ag_threads(), n = ag_gpt_shards_default(&R->cfg.model, micro);
    if (n < threads && R->cfg.model.dropout == 0)
        ag_progress_line(&R->rep.prog, "shards: %d, not %d (one per thread): %s", n, threads,
                         n == micro ? "a pass has no more windows" : "this machine has no more cores");
    return n;
}

/* --shards: each pass's windows split over the threads (nn.h), by default without dropout; a
 * --shards the run cannot honour (more than a pass's windows) is refused, one that does not fit in
 * memory too (each shard beyond the first keeps a gradient buffer and an arena, ag_gpt_shard_bytes), and a
 * default one that does not fit is lowered with a note. Without dropout the shards compute the
 * one-shard pass's numbers within rounding; with it each shard draws its own masks, and the
 * 10-minute recipe (dropout 0.05, tuned on the plain pass) trained worse that way
 * (docs/performance.md), so a model with dropout keeps one shard unless --shards asks. Each
 * rank splits its own micro-batches. */
static ag_status choose_shards(lm_run *R, ag_error *err)
{
    const lm_config *c = &R->cfg;
    int asked = R->o->shards, N = ag_dist_size(R->o->dist);
    int K = R->o->grad_accum > 1 ? R->o->grad_accum : 1;
    int micro = c->batch_size / (N * K);   /* the windows of one pass */
    R->learn.n_shards = 1;
    if (asked > micro && micro > 0) {
        char ranks[32] = "";
        if (N > 1) snprintf(ranks, sizeof ranks, "%d ranks x ", N);
        return ag_seterr(err, AG_ERR_ARG, "--shards %d is more than the %d windows a step's pass has (--batch-size %d, "
                         "%s--grad-accum %d)", asked, micro, c->batch_size, ranks, K);
    }
    int n = asked ? asked : default_shards(R, micro);
    char room[64], need[24];
    double have = ag_machine_bytes(room);
    int ranks = ag_local_ranks(R->o->dist);   /* on this machine, a run each */
    int fit = have > 0 ? ag_gpt_shards_that_fit(&c->model, c->batch_size, n, ranks, have) : n;
    ag_bytes_str(ag_gpt_train_bytes(&c->model, c->batch_size, n, ranks), need);
    if (fit < n && asked)
        return ag_seterr(err, AG_ERR_ARG, "--shards %d: %d shards need about %s of memory (each beyond the first keeps "
                         "a gradient buffer of the model's size and an arena for its windows), more than %s; at "
                         "most %d fit", asked, n, need, room, fit);
    if (fit < n)
        ag_progress_line(&R->rep.prog, "shards: %d, not %d: %d would need about %s of memory, more than %s", fit, n, n,
                         need, room);
    R->learn.n_shards = fit;
    return AG_OK;
}

/* The step's buffers and the attention statistics' (the trainer's ctx, and the shards made
 * for it, come with the run: lm_client's start). */
static ag_status alloc_buffers(lm_run *R, ag_error *err)
{
    const lm_config *c = &R->cfg;
    int B = c->batch_size, T = c->model.block_size, L = c->model.n_layer;
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

/* The lock on --out, before anything there is read (a --resume) or written. A directory that
 * does not exist yet is made and locked by the trainer (ag_train_run); --trace-only writes nothing. */
static ag_status lock_out_dir(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    struct stat sb;
    if ((o->trace && o->trace_only) || stat(o->out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return AG_OK;
    return ag_lock_take(&R->ctl.lock, o->out_dir, err);
}

/* --resume in a directory whose latest was lost: the newest whole checkpoint made live again,
 * with a warning that says so (or an error naming what is there). */
static ag_status recover_latest(lm_run *R, ag_error *err)
{
    char note[1536];
    ag_error why = {0};
    if (!R->o->resume) return AG_OK;
    ag_status s = ag_ckpt_recover(R->o->out_dir, &lm_ckpt_kind, note, sizeof note, &why);
    if (s == AG_OK && note[0]) lm_log_warn(R, note);
    return s ? ag_seterr(err, s, "--resume: %s", why.msg) : AG_OK;
}

/* Rank 0 (or one process), before any rank reads anything of the run: --out checked, locked
 * (rank 0 holds the lock for the job, and the other ranks never read the directory: a second
 * job on it is refused on every rank alike), a lost latest recovered, and with --resume or
 * --init-from the checkpoint read. */
static ag_status open_run(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    ag_status s;
    if ((s = ag_ckpt_outside_runs(o->out_dir, &lm_ckpt_kind, err))) return s;   /* before anything there is locked or read */
    if ((s = lock_out_dir(R, err)) || (s = recover_latest(R, err))) return s;
    return o->resume || o->init_from ? read_checkpoint(R, err) : AG_OK;
}

/* What the run will cost, before anything of that size exists: its memory on this machine (a
 * run on each of its ranks) and Adam's state in one checkpoint file (train.h). */
static ag_status check_cost(const lm_run *R, ag_error *err)
{
    const ag_gpt_config *m = &R->cfg.model;
    int B = R->cfg.batch_size;
    char shape[AG_GPT_SHAPE_LEN], model[AG_GPT_SHAPE_LEN];
    snprintf(model, sizeof model, "n_layer %d x n_embd %d (vocab %d, block_size %d)", m->n_layer, m->n_embd,
             m->vocab_size, m->block_size);
    double run = ag_gpt_train_bytes(m, B, 1, ag_local_ranks(R->o->dist));
    ag_status s = ag_check_memory(run, "train", ag_gpt_shape_str(m, B, shape), err);
    return s ? s : ag_check_checkpointable(ag_gpt_min_params(m), "train", model, err);
}

/* This rank's own setup after rank 0 opened the run: the text (and a checkpoint's config merged
 * with the flags), the config's checks, the memory, the shards, the split, the model, where the
 * run stands and the buffers. A stop signal (one process alone) ends it early with AG_OK. */
static ag_status prepare(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    lm_data *D = &R->data;
    ag_status s;
    if ((s = o->resume || o->init_from ? load_checkpoint(R, err) : load_text(R, err))) return s;
    if (lm_run_signal_seen(R)) return AG_OK;   /* during the load too: then the text is empty */
    if ((s = check_setup_time(R, err))) return s;
    if ((s = lm_config_validate(&R->cfg, true, err)) || (s = lm_config_check_training(&R->cfg, err))) return s;
    if ((s = check_cost(R, err)) || (s = choose_shards(R, err))) return s;
    if ((s = ag_corpus_split(&D->text, R->cfg.val_fraction, R->cfg.model.block_size, &D->n_train, &D->n_val, err)))
        return s;
    if (lm_run_signal_seen(R)) return AG_OK;
    if (!R->learn.m.g && (s = new_model(R, err))) return s;
    if (lm_run_signal_seen(R)) return AG_OK;
    if (o->resume) {
        if ((s = resume_state(R, err))) return s;
    } else {
        new_state(R);
    }
    R->learn.st.n_train = D->n_train;
    R->learn.st.n_val = D->n_val;
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
    if ((s = lm_run_share_outcome(R, mine, &why, err))) return s;   /* an error anywhere: said once */
    if (!R->data.off) return AG_OK;   /* a stop signal ended prepare (one process alone) */
    return lm_run_agree(R, err);      /* the ranks hold the same run (train_agree.c); the trainer splits it */
}

/* What a killed run left in the run directory, removed: this run's superseded checkpoints
 * (those of run also too), temporary files; what is not this run's stays, named in a warning. */
static void warn(void *R, const char *line) { lm_log_warn(R, line); }

static void tidy(lm_run *R, uint64_t also)
{
    if (lm_run_writer(R)) ag_ckpt_tidy(R->o->out_dir, &lm_ckpt_kind, also, warn, R);   /* rank 0's directory */
}

bool lm_run_nothing_to_do(lm_run *R, lm_train_result *r)
{
    const lm_train_opts *o = R->o;
    const lm_train_state *st = &R->learn.st;
    long start = R->ctl.start;
    if (o->trace && o->trace_only) {
        r->iter = start;
        return true;
    }
    if (!R->ctl.resumed || start < R->cfg.max_iters) return false;
    tidy(R, 0);   /* a kill after the last commit may have left the superseded checkpoint */
    if (o->log)
        fprintf(o->log, "%s is already at iteration %ld (--max-iters %ld): nothing to do\n", o->out_dir, start,
                R->cfg.max_iters);
    r->iter = start;
    if (st->has_eval) {
        r->train_loss = st->eval_train;
        r->val_loss = st->eval_val;
    }
    return true;
}

// --- the run directory ---

/* A new run where one already is: refused without --overwrite (hours of training are one
 * forgotten --resume away from lost); with it, the trainer starts over it, saying so, and the
 * old run (the one its latest names) goes once the new run's first checkpoint is committed. */
static ag_status refuse_run(lm_run *R, ag_error *err)
{
    const char *dir = R->o->out_dir;
    char found[512];
    int k = ag_ckpt_list(dir, found, sizeof found);
    if (R->o->overwrite) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s already holds a checkpoint: --resume continues it, --overwrite starts over, "
                     "or choose another --out%s%s%s", dir, k ? " (found: " : "", found, k ? ")" : "");
}

ag_status lm_run_open_dir(lm_run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    if (!R->ctl.lock.held || R->ctl.resumed || !ag_ckpt_exists(o->out_dir, &lm_ckpt_kind)) return AG_OK;   /* a new DIR */
    char gone[512], note[1024];   /* killed at its first commit, the same command again (issue 35) */
    if (ag_ckpt_drop_orphans(o->out_dir, &lm_ckpt_kind, ag_weights_hash(R->learn.m.g->params), gone, sizeof gone)) {
        snprintf(note, sizeof note, "%s: removed %s, the first checkpoint of this same run (its untrained weights), "
                 "left uncommitted by a kill; starting the run again", o->out_dir, gone);
        lm_log_warn(R, note);
    }
    return ag_ckpt_exists(o->out_dir, &lm_ckpt_kind) ? refuse_run(R, err) : AG_OK;
}

void lm_run_free(lm_run *R)
{
    lm_report *rep = &R->rep;
    if (rep->plot_pid > 0) { /* a run that stops early still leaves a whole picture */
        ag_error ignored = {0};
        bool done;
        (void)ag_plot_loss_wait(rep->plot_pid, true, &done, R->o->out_dir, &ignored);
    }
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
