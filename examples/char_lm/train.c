/* train.c -- the training loop of char_lm (see train.h for the whole recipe).
 *
 * Reproducibility: three streams of randomness, all derived from --seed, so a run is a
 * function of its flags and a resumed run equals the uninterrupted one:
 *   - the batch sampler, an ag_rng saved in every checkpoint (train_state.safetensors);
 *   - evaluation batches, from an RNG seeded by (seed, it) afresh at each evaluation;
 *   - dropout masks, seeded by (seed, it) per step.
 * Evaluating more or less often therefore never changes the training losses. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "attn.h"
#include "checkpoint.h"
#include "plot.h"
#include "rundir.h"
#include "trace.h"
#include "train.h"

#define PATHLEN 4096
#define TAG_BATCH 0x62617463686573ull   /* "batches" */
#define TAG_EVAL 0x6576616c7561ull      /* "evalua" */
#define TAG_DROP 0x64726f706f7574ull    /* "dropout" */
#define TAG_STATS 0x6174746e737473ull   /* "attnsts" */

// --- small helpers ---

/* splitmix64's finaliser on a ^ (b * golden + c); ag_splitmix64 adds the golden step itself,
 * hence the "- golden" (kept so that saved runs replay bit for bit) */
static uint64_t mix64(uint64_t a, uint64_t b)
{
    const uint64_t golden = 0x9E3779B97F4A7C15ull;
    return ag_splitmix64((a ^ (b * golden + 0x632BE59BD9B4E019ull)) - golden);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fmt_duration(char *buf, size_t n, double s)
{
    if (!(s >= 0) || s > 360000) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

/* mkdir -p: every missing component of dir. */
static ag_status mkdir_p(const char *dir, ag_error *err)
{
    char buf[PATHLEN];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf)
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        struct stat sb;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return ag_seterr(err, AG_ERR_IO, "%s: cannot create directory %s: %s", dir, buf, strerror(errno));
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return ag_seterr(err, AG_ERR_IO, "%s: %s is not a directory", dir, buf);
        *p = c;
        if (c == '\0') break;
        while (p[1] == '/') p++;
    }
    return AG_OK;
}

/* x, y [B,T]: B windows at uniform offsets in [0, n - T - 1] (MODEL.md), targets shifted by one. */
static void get_batch(const int *ids, size_t n, int B, int T, ag_rng *rng, int *x, int *y)
{
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)ag_rng_below(rng, (uint64_t)(n - (size_t)T));
        memcpy(x + (size_t)b * T, ids + off, (size_t)T * sizeof *x);
        memcpy(y + (size_t)b * T, ids + off + 1, (size_t)T * sizeof *y);
    }
}

// --- the run's state ---

typedef struct {
    const lm_train_opts *o;
    lm_config cfg;
    lm_model m;            /* model, vocab (unused for a new run: the corpus has it) */
    corpus c;
    const vocab *voc;      /* &c.vocab */
    size_t n_train, n_val;
    lm_train_state st;
    long start;            /* the first iteration of this run: 0, or where --resume picks up */
    ag_ctx *ctx;
    int *x, *y;            /* [B,T] */
    ag_tensor **attn;      /* [n_layer] recorded attention weights (--log-attn-stats) */
    double *entropy, *peak; /* [n_layer] their statistics at the last evaluation */
    /* this iteration's row of metrics.csv, as far as the evaluation fills it ("" between them) */
    char train_col[32], val_col[32];
    char *stats;           /* the attention columns, ",e0,p0,e1,p1..." (",,,," between evaluations) */
    size_t stats_cap;
    FILE *metrics;
    bool plot_ok;
    pid_t plot_pid;        /* a loss.png still being drawn in the background, or 0 */
    bool resumed;
    long saved_at;         /* the iteration of the checkpoint on disk, or -1 */
    bool tty;              /* the log is a terminal: the progress line is redrawn in place */
    ag_lr_schedule sched;
    double t_start, ema_dt, t_shown;   /* the run's start, the smoothed step time, the last progress line */
    lm_ddp *ddp;           /* several ranks or micro-batches per step (ddp.h); NULL: neither */
    lm_lock lock;          /* on out_dir, for the whole run */
} run;

static void run_free(run *R)
{
    if (R->plot_pid > 0) { /* a run that stops early still leaves a whole picture */
        ag_error ignored = {0};
        bool done;
        (void)lm_plot_loss_wait(R->plot_pid, true, &done, R->o->out_dir, &ignored);
    }
    if (R->metrics) fclose(R->metrics);
    free(R->x);
    free(R->y);
    free(R->attn);
    free(R->entropy);
    free(R->peak);
    free(R->stats);
    ag_ctx_free(R->ctx);
    lm_ddp_free(R->ddp);
    corpus_free(&R->c);
    lm_model_free(&R->m);
    lm_lock_drop(&R->lock);
}

static int stop_requested(const run *R);

/* SIGINT, SIGTERM or SIGHUP came to this process (main.c's handler set *stop), for the checks
 * inside the setup and an evaluation. With several ranks those stay with the step boundary,
 * where the ranks agree (stop_requested), so that no rank leaves a collective the others are in. */
static bool signal_seen(const run *R)
{
    return lm_ddp_ranks(R->ddp) <= 1 && R->o->stop && *R->o->stop;
}

static void warn(const run *R, const char *msg)
{
    if (R->o->warn) fprintf(R->o->warn, "char_lm: warning: %s\n", msg);
}

// --- setting up: model, data, config ---

/* The model's shape may not change on --resume / --init-from: a flag (or --config) that says
 * otherwise is an error. Other fields: the checkpoint's (resume) or the command line's. */
static ag_status merge_config(run *R, const lm_config *ck, bool resume, const char *dir, ag_error *err)
{
    const lm_train_opts *o = R->o;
    lm_config cfg = resume ? *ck : o->cfg;
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *f = &lm_fields[i];
        bool given = o->given && o->given[i];
        if (f->shape) {
            if (f->flag && (given || o->config_given) && !lm_field_equal(&o->cfg, ck, f)) {
                char have[64], want[64];
                return ag_seterr(err, AG_ERR_ARG, "%s: the checkpoint in %s has %s %s, but %s asks for %s%s", f->flag,
                                 dir, f->key, lm_field_format(ck, f, have, sizeof have),
                                 given ? "the flag" : "--config", lm_field_format(&o->cfg, f, want, sizeof want),
                                 resume ? " (a resumed run keeps its model shape)" : "");
            }
            lm_field_copy(&cfg, ck, f);
        } else if (resume && given) {
            lm_field_copy(&cfg, &o->cfg, f);
        }
    }
    R->cfg = cfg;
    return AG_OK;
}

/* corpus_opts.stop: a stop signal ends even the load of a huge text within a MiB. */
static bool stop_loading(void *R) { return signal_seen(R); }

/* --resume, --init-from: the checkpoint's model, its config merged with the flags, and the text
 * encoded with its vocabulary (a stop signal: R->c stays empty). */
static ag_status load_checkpoint(run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    const char *dir = o->resume ? o->out_dir : o->init_from;
    const char *flag = o->resume ? "--resume" : "--init-from";
    ag_error why = {0};
    ag_status s;
    if ((s = lm_model_load(dir, &R->m, &why))) return ag_seterr(err, s, "%s: %s", flag, why.msg);
    if ((s = merge_config(R, &R->m.cfg, o->resume, dir, err))) return s;
    R->m.g->cfg.dropout = R->cfg.model.dropout;
    corpus_opts co = {.vocab = &R->m.vocab, .stop = stop_loading, .user = R};
    if ((s = corpus_load_with(o->data_path, &co, &R->c, &why)))
        return ag_seterr(err, s, "%s (the vocabulary of %s)", why.msg, dir);
    return AG_OK;
}

/* A new run: the command line's config, the text and its own vocabulary (a stop signal: R->c
 * stays empty). */
static ag_status load_text(run *R, ag_error *err)
{
    R->cfg = R->o->cfg;
    ag_status s = corpus_load_with(R->o->data_path, &(corpus_opts){.stop = stop_loading, .user = R}, &R->c, err);
    if (s == AG_OK) R->cfg.model.vocab_size = R->c.vocab.V;
    return s;
}

static ag_status new_model(run *R, ag_error *err)
{
    ag_error why = {0};
    R->m.cfg = R->cfg;
    if (!(R->m.g = ag_gpt_new(&R->cfg.model, R->cfg.seed, &why)))
        return ag_seterr(err, AG_ERR_NOMEM, "cannot build the model: %s", why.msg);
    return AG_OK;
}

/* --resume: Adam's moments and where the run stood, which must be the same text. */
static ag_status resume_state(run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    ag_error why = {0};
    ag_status s = lm_train_state_load(o->out_dir, R->m.g, &R->st, &why);
    if (s) return ag_seterr(err, s, "--resume: %s", why.msg);
    if (R->st.run_id != R->m.run_id) {   /* two files of one checkpoint carry one run's identity */
        char a[20] = "none", b[20] = "none";
        if (R->m.run_id) snprintf(a, sizeof a, "%016llx", (unsigned long long)R->m.run_id);
        if (R->st.run_id) snprintf(b, sizeof b, "%016llx", (unsigned long long)R->st.run_id);
        return ag_seterr(err, AG_ERR_FORMAT, "--resume: %s holds model.safetensors of run %s but "
                         "train_state.safetensors of run %s: the two files are not one checkpoint", o->out_dir, a, b);
    }
    if (!R->st.run_id) R->st.run_id = lm_new_run_id();   /* a checkpoint older than run ids */
    if (R->st.iter != R->m.iter)
        return ag_seterr(err, AG_ERR_FORMAT, "--resume: %s holds model.safetensors of iteration %ld but "
                         "train_state.safetensors of iteration %ld (a write was interrupted?)", o->out_dir,
                         R->m.iter, R->st.iter);
    if ((R->st.n_tokens != R->c.n || R->st.data_hash != lm_ids_hash_until(R->c.ids, R->c.n, stop_loading, R)) &&
        !signal_seen(R))   /* a signal abandons the hash: then lm_train stops, nothing written */
        return ag_seterr(err, AG_ERR_ARG, "--resume: %s is not the text the run in %s was trained on (%zu tokens, "
                         "the run had %zu); to train on it from these weights use --init-from", o->data_path,
                         o->out_dir, R->c.n, R->st.n_tokens);
    R->resumed = true;
    return AG_OK;
}

/* A new run's state: the batch sampler seeded from --seed, and the text it trains on. */
static void new_state(run *R)
{
    memset(&R->st, 0, sizeof R->st);
    R->st.run_id = lm_new_run_id();
    ag_rng_seed(&R->st.rng, mix64(R->cfg.seed, TAG_BATCH));
    R->st.n_tokens = R->c.n;
    R->st.data_hash = lm_ids_hash_until(R->c.ids, R->c.n, stop_loading, R);   /* 0 after a signal: never saved */
}

/* The step's buffers and its ctx (one for every forward and backward of the run). */
static ag_status alloc_buffers(run *R, ag_error *err)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    R->ctx = ag_ctx_new();
    R->x = malloc((size_t)B * T * sizeof *R->x);
    R->y = malloc((size_t)B * T * sizeof *R->y);
    R->attn = calloc((size_t)R->cfg.model.n_layer, sizeof *R->attn);
    R->entropy = calloc((size_t)R->cfg.model.n_layer, sizeof *R->entropy);
    R->peak = calloc((size_t)R->cfg.model.n_layer, sizeof *R->peak);
    R->stats_cap = 48 * (size_t)R->cfg.model.n_layer + 8;   /* ",%.6f,%.6f" per layer */
    R->stats = calloc(R->stats_cap, 1);
    if (!R->ctx || !R->x || !R->y || !R->attn || !R->entropy || !R->peak || !R->stats)
        return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    ag_ctx_set_detect_anomaly(R->ctx, R->cfg.detect_anomaly);
    ag_ctx_set_recycle_grads(R->ctx, true); /* only the parameters' gradients are read */
    return AG_OK;
}

static ag_status micro_batch(void *user, long it, const int *x, const int *y, int b, uint64_t seed, ag_real dloss,
                             double *loss, ag_error *err);

/* Several ranks or micro-batches per step (ddp.h): the split, checked against --batch-size, and
 * rank 0's weights on every rank. Only rank 0 draws plots. */
static ag_status start_ddp(run *R, ag_error *err)
{
    const lm_config *c = &R->cfg;
    const lm_ddp_opts d = { .dist = R->o->dist, .grad_accum = R->o->grad_accum, .mode = R->o->allreduce,
                            .batch_size = c->batch_size, .block_size = c->model.block_size,
                            .n_layer = c->model.n_layer, .params = R->m.g->params, .ctx = R->ctx,
                            .micro = micro_batch, .user = R, .stop = R->o->stop };
    ag_status s = lm_ddp_new(&R->ddp, &d, err);
    if (!lm_ddp_writer(R->ddp)) R->plot_ok = false;
    return s ? s : lm_ddp_share_start(R->ddp, err);
}

/* The lock on --out, before anything there is read (a --resume) or written. A directory that
 * does not exist yet is locked by open_out_dir once made; --trace-only writes nothing; under
 * mpirun rank 0 holds it for the job. */
static ag_status lock_out_dir(run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    struct stat sb;
    if ((o->trace && o->trace_only) || stat(o->out_dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) return AG_OK;
    if (ag_dist_rank(o->dist) != 0) return AG_OK;   /* rank 0 owns the directory for the job */
    return lm_lock_take(&R->lock, o->out_dir, err);
}

/* Everything before the first step: the data and the model (a checkpoint's with --resume or
 * --init-from), the validated config and the split, the optimizer's state, the buffers. A stop
 * signal between the stages ends it early (AG_OK; the caller looks at the signal). */
static ag_status setup(run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    ag_status s;
    if (o->resume && o->init_from) return ag_seterr(err, AG_ERR_ARG, "--resume and --init-from exclude each other");
    if ((s = lock_out_dir(R, err))) return s;
    if ((s = o->resume || o->init_from ? load_checkpoint(R, err) : load_text(R, err))) return s;
    if (signal_seen(R)) return AG_OK;   /* during the load too: then R->c is empty */
    R->voc = &R->c.vocab;
    if ((s = lm_config_validate(&R->cfg, true, err)) || (s = lm_config_check_training(&R->cfg, err))) return s;
    int B = R->cfg.batch_size;   /* what a step will cost, before anything of that size exists */
    if ((s = lm_check_memory(lm_step_bytes(&R->cfg.model, B, true), &R->cfg.model, B, "train", err)) ||
        (s = lm_check_checkpointable(&R->cfg.model, err)))
        return s;
    if ((s = corpus_split(&R->c, R->cfg.val_fraction, R->cfg.model.block_size, &R->n_train, &R->n_val, err)))
        return s;
    if (signal_seen(R)) return AG_OK;
    if (!R->m.g && (s = new_model(R, err))) return s;
    if (signal_seen(R)) return AG_OK;
    if (o->resume) {
        if ((s = resume_state(R, err))) return s;
    } else {
        new_state(R);
    }
    R->st.n_train = R->n_train;
    R->st.n_val = R->n_val;
    R->start = R->st.iter;
    if ((s = alloc_buffers(R, err))) return s;
    return start_ddp(R, err);
}

// --- metrics.csv ---

static const char metrics_header[] = "iter,lr,loss,train_loss,val_loss,tokens_per_s";

/* The header line: the six columns, then two per layer with --log-attn-stats. */
static bool put_header(const run *R, FILE *out)
{
    bool ok = fputs(metrics_header, out) >= 0;
    for (int l = 0; ok && R->cfg.log_attn_stats && l < R->cfg.model.n_layer; l++)
        ok = fprintf(out, ",attn_entropy_L%d,attn_max_L%d", l, l) >= 0;
    return ok && fputs("\n", out) >= 0;
}

/* New run: a fresh file. Resume: the rows before `start` are kept (rewritten atomically). */
static ag_status open_metrics(run *R, long start, ag_error *err)
{
    char path[PATHLEN], tmp[PATHLEN + 32];
    if (!lm_path_join(path, sizeof path, R->o->out_dir, "metrics.csv"))
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", R->o->out_dir);
    FILE *out = lm_file_create(path, tmp, sizeof tmp, err);   /* a link planted there is replaced */
    if (!out) return AG_ERR_IO;
    FILE *in = R->resumed ? fopen(path, "r") : NULL;
    bool ok = put_header(R, out);
    if (in) {
        char *line = NULL;
        size_t cap = 0;
        while (ok && getline(&line, &cap, in) >= 0) {
            char *end;
            long it = strtol(line, &end, 10);
            if (end != line && *end == ',' && it < start) ok = fputs(line, out) >= 0;
        }
        free(line);
        fclose(in);
    }
    if (!ok) {
        int e = errno;
        lm_file_discard(out, tmp);
        return ag_seterr(err, AG_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    ag_status s = lm_file_commit(out, tmp, path, false, err);
    if (s) return s;
    if (!(R->metrics = fopen(path, "a")))
        return ag_seterr(err, AG_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    return AG_OK;
}

/* One row of metrics.csv (printf-style). */
static ag_status put_row(run *R, ag_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static ag_status put_row(run *R, ag_error *err, const char *fmt, ...)
{
    if (!R->metrics) return AG_OK;   /* a rank other than 0 (ddp.h) */
    va_list ap;
    va_start(ap, fmt);
    int w = vfprintf(R->metrics, fmt, ap);
    va_end(ap);
    if (w < 0) return ag_seterr(err, AG_ERR_IO, "%s/metrics.csv: write failed: %s", R->o->out_dir, strerror(errno));
    return AG_OK;
}

/* Every row so far on disk: a full disk is reported at the first row it refuses. */
static ag_status flush_metrics(run *R, ag_error *err)
{
    if (!R->metrics) return AG_OK;   /* a rank other than 0 writes none */
    if (fflush(R->metrics) == 0 && !ferror(R->metrics)) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s/metrics.csv: write failed: %s; stopped, the last checkpoint is kept",
                     R->o->out_dir, strerror(errno));
}

static void fmt_loss(char *buf, size_t n, bool have, double v)
{
    if (have && !isnan(v)) snprintf(buf, n, "%.6f", v);
    else buf[0] = '\0';
}

/* Between evaluations a row's train_loss, val_loss and attention columns stay empty. */
static void blank_eval_columns(run *R)
{
    R->train_col[0] = R->val_col[0] = '\0';
    R->stats[0] = '\0';
    for (int l = 0; R->cfg.log_attn_stats && l < R->cfg.model.n_layer; l++) strcat(R->stats, ",,");
}

// --- evaluation ---

/* Mean loss over eval_iters random batches of ids [n], in no-grad mode. */
static ag_status estimate(run *R, const int *ids, size_t n, ag_rng *rng, double *out, ag_error *err)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    double sum = 0;
    ag_ctx_set_grad(R->ctx, false);
    for (long k = 0; k < R->cfg.eval_iters && !signal_seen(R); k++) {   /* a signal ends it at once */
        get_batch(ids, n, B, T, rng, R->x, R->y);
        if (!lm_ddp_mine(R->ddp, k)) continue;   /* another rank's batch (ddp.h) */
        ag_ctx_reset(R->ctx);
        ag_tensor *loss = NULL;
        const ag_forward_opts fo = { .composed_attention = R->cfg.detect_anomaly };   /* as in step() */
        ag_gpt_forward(R->ctx, R->m.g, R->x, R->y, B, T, &fo, &loss);
        if (!loss) {
            ag_status s = ag_ctx_status(R->ctx) ? ag_ctx_status(R->ctx) : AG_ERR_ARG;
            ag_seterr(err, s, "evaluation: %s", ag_ctx_error(R->ctx) ? ag_ctx_error(R->ctx) : "forward failed");
            ag_ctx_reset(R->ctx);
            ag_ctx_set_grad(R->ctx, true);
            return s;
        }
        sum += (double)loss->data[0];
    }
    ag_ctx_reset(R->ctx);
    ag_ctx_set_grad(R->ctx, true);
    ag_status s = lm_ddp_sum(R->ddp, &sum, err);   /* every rank's batches */
    *out = sum / (double)R->cfg.eval_iters;
    return s;
}

/* --log-attn-stats: one batch (validation split, else training) through the model with every
 * layer's attention weights recorded; R->entropy[l] and R->peak[l] get their statistics, and
 * cols the metrics.csv columns ",entropy_0,peak_0,entropy_1,...". */
static ag_status attn_stats(run *R, long it, char *cols, size_t n, ag_error *err)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size, L = R->cfg.model.n_layer;
    ag_rng rng;
    ag_rng_seed(&rng, mix64(R->cfg.seed ^ TAG_STATS, (uint64_t)it));
    bool val = R->n_val > 0;
    get_batch(R->c.ids + (val ? R->n_train : 0), val ? R->n_val : R->n_train, B, T, &rng, R->x, R->y);
    ag_ctx_reset(R->ctx);
    ag_status s = lm_attn_record(R->ctx, R->m.g, R->x, B, T, R->attn);
    if (s) {
        ag_seterr(err, s, "attention statistics: %s", ag_ctx_error(R->ctx));
        ag_ctx_reset(R->ctx);
        return s;
    }
    size_t len = 0;
    cols[0] = '\0';
    for (int l = 0; l < L; l++) {
        lm_attn_stats(R->attn[l]->data, B, R->cfg.model.n_head, T, &R->entropy[l], &R->peak[l]);
        int w = snprintf(cols + len, len < n ? n - len : 0, ",%.6f,%.6f", R->entropy[l], R->peak[l]);
        if (w > 0) len += (size_t)w;
    }
    ag_ctx_reset(R->ctx);
    return AG_OK;
}

/* The mean loss of each split at iteration it (val NaN without a validation split). A resumed
 * run's first evaluation is the one its checkpoint holds. */
static ag_status evaluate(run *R, long it, double *tl, double *vl, ag_error *err)
{
    if (R->resumed && it == R->start && R->st.has_eval) {
        *tl = R->st.eval_train;
        *vl = R->st.eval_val;
        return AG_OK;
    }
    ag_status s = lm_ddp_check_weights(R->ddp, it, err);   /* the ranks still agree */
    if (s) return s;
    ag_rng rng;
    ag_rng_seed(&rng, mix64(R->cfg.seed ^ TAG_EVAL, (uint64_t)it));
    s = estimate(R, R->c.ids, R->n_train, &rng, tl, err);
    *vl = NAN;
    if (s == AG_OK && R->n_val > 0) s = estimate(R, R->c.ids + R->n_train, R->n_val, &rng, vl, err);
    return s;
}

// --- one optimizer step ---

/* A batch x, y [b,T] forward and backward, the backward seeded with dloss (1; a micro-batch's
 * 1/(N*K), ddp.h): *loss_out is its mean loss and every parameter's gradient grows by dloss
 * times its own. The weights are untouched yet, so a failure here leaves the last checkpoint
 * the last word. */
static ag_status forward_backward_on(run *R, long it, const int *x, const int *y, int b, uint64_t seed,
                                     ag_real dloss, double *loss_out, ag_error *err)
{
    const lm_config *c = &R->cfg;
    ag_gpt *g = R->m.g;
    int T = c->model.block_size;
    ag_ctx_reset(R->ctx);
    ag_tensor *loss = NULL;
    /* with --detect-anomaly attention runs op by op, so the message can name the step that went
     * wrong (the scores' matmul, the softmax, ...) instead of the one fused op */
    const ag_forward_opts fo = { .train = true, .seed = seed, .composed_attention = c->detect_anomaly };
    ag_gpt_forward(R->ctx, g, x, y, b, T, &fo, &loss);
    ag_status s = ag_ctx_status(R->ctx);
    const char *why = ag_ctx_error(R->ctx);
    if (s == AG_ERR_NONFINITE)   /* --detect-anomaly: the first op that went non-finite */
        return ag_seterr(err, s, "iteration %ld: %s; stopped before the optimizer step, the last checkpoint "
                         "(iteration %ld) is untouched", it, why, R->st.iter);
    if (!loss || s) return ag_seterr(err, s ? s : AG_ERR_ARG, "iteration %ld: %s", it, why ? why : "forward failed");
    double lv = (double)loss->data[0];
    if (!isfinite(lv))
        return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the loss is %g; stopped before the optimizer step, "
                         "the last checkpoint (iteration %ld) is untouched (try a lower --lr)", it, lv, R->st.iter);
    if ((s = ag_backward_from(R->ctx, loss, &dloss)))
        return ag_seterr(err, s, "iteration %ld: backward: %s%s", it,
                         ag_ctx_error(R->ctx) ? ag_ctx_error(R->ctx) : ag_status_str(s),
                         s == AG_ERR_NONFINITE ? "; stopped before the optimizer step, the last checkpoint is untouched" : "");
    *loss_out = lv;
    return AG_OK;
}

/* ddp.h's lm_micro_fn: one micro-batch of a data-parallel step */
static ag_status micro_batch(void *user, long it, const int *x, const int *y, int b, uint64_t seed, ag_real dloss,
                             double *loss, ag_error *err)
{
    return forward_backward_on(user, it, x, y, b, seed, dloss, loss, err);
}

/* The step's batch of the training split forward and backward: *loss and every parameter's
 * gradient. With several ranks or micro-batches ddp.c splits the same batch (ddp.h). */
static ag_status forward_backward(run *R, long it, double *loss_out, ag_error *err)
{
    const lm_config *c = &R->cfg;
    int B = c->batch_size, T = c->model.block_size;
    uint64_t seed = mix64(c->seed ^ TAG_DROP, (uint64_t)it);   /* dropout */
    if (R->ddp) return lm_ddp_forward_backward(R->ddp, it, R->c.ids, R->n_train, &R->st.rng, seed, loss_out, err);
    get_batch(R->c.ids, R->n_train, B, T, &R->st.rng, R->x, R->y);
    ag_params_zero_grad(R->m.g->params);
    return forward_backward_on(R, it, R->x, R->y, B, seed, 1, loss_out, err);
}

/* The factor the clip scales the gradients by (1 unless clipping; clip <= 0: never); their
 * global norm must be finite. */
static ag_status clip_scale(run *R, long it, double *gscale, ag_error *err)
{
    double norm = ag_grad_norm(R->m.g->params);
    *gscale = ag_clip_scale(norm, R->cfg.grad_clip);
    if (isfinite(norm)) return AG_OK;
    return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the gradient norm is %g; stopped before the optimizer "
                     "step, the last checkpoint (iteration %ld) is untouched (try a lower --lr)", it, norm, R->st.iter);
}

/* The optimizer's update of every parameter, gradients scaled by gscale. */
static void update(run *R, double lr, double gscale)
{
    const lm_config *c = &R->cfg;
    ag_params *P = R->m.g->params;
    long t = ++R->st.step;
    ag_adam_cfg ac = {c->beta1, c->beta2, 1e-8, c->weight_decay};
    switch (c->optimizer) {
    case LM_ADAMW: ag_adamw_step_scaled(P, &ac, lr, t, gscale); break;   /* the clip folded in */
    case LM_ADAM: ag_adam_step_scaled(P, &ac, lr, t, gscale); break;
    case LM_SGD:
        if (gscale != 1) ag_scale_grads(P, gscale);
        ag_sgd_step(P, lr, c->momentum);
        break;
    }
}

/* --detect-anomaly: the optimizer is no op on the tape, so check what it wrote. */
static ag_status weights_finite(const run *R, long it, double lr, ag_error *err)
{
    const ag_params *P = R->m.g->params;
    const char *optimizer = ag_switch_name(&lm_optimizer_switch, R->cfg.optimizer);
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        for (size_t i = 0; i < ag_numel(t); i++)
            if (!isfinite(t->data[i]))
                return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the %s step made %s non-finite (element %zu "
                                 "is %g; lr %g); the last checkpoint (iteration %ld) is untouched", it,
                                 optimizer, t->name, i, (double)t->data[i], lr, R->st.iter);
    }
    return AG_OK;
}

static ag_status step(run *R, long it, double lr, double *loss, ag_error *err)
{
    double gscale;
    ag_status s = forward_backward(R, it, loss, err);
    if (s == AG_OK) s = clip_scale(R, it, &gscale, err);
    if (s) return s;
    update(R, lr, gscale);
    if (R->cfg.detect_anomaly && (s = weights_finite(R, it, lr, err))) return s;
    ag_ctx_reset(R->ctx);
    return AG_OK;
}

// --- what the log shows ---

static void log_header(const run *R)
{
    FILE *f = R->o->log;
    if (!f) return;
    const lm_config *c = &R->cfg;
    fprintf(f, "data: %s: %zu characters, vocabulary %d; train %zu, val %zu tokens\n", R->o->data_path, R->c.n,
            R->voc->V, R->n_train, R->n_val);
    fprintf(f, "model: %d layers, %d heads, n_embd %d, block_size %d, vocab %d: %zu parameters\n",
            c->model.n_layer, c->model.n_head, c->model.n_embd, c->model.block_size, c->model.vocab_size,
            R->m.g->params->total);
    char sw[512] = "";
    size_t len = 0;
    for (int i = 0; i < lm_n_fields; i++) {   /* the switches that are not MODEL.md's default */
        const lm_field *fl = &lm_fields[i];
        char v[64];
        if (!fl->optional || lm_field_get(c, fl) == 0 || len >= sizeof sw) continue;
        int w = snprintf(sw + len, sizeof sw - len, "%s%s%s%s", len ? ", " : "", fl->flag,
                         fl->type == LM_T_BOOL ? "" : " ", fl->type == LM_T_BOOL ? "" : lm_field_format(c, fl, v, sizeof v));
        if (w > 0) len += (size_t)w;
    }
    if (len) fprintf(f, "switches: %s\n", sw);
    fprintf(f, "training: %s, lr %g -> %g (warmup %ld, decay to %ld), batch %d, %ld steps, eval every %ld; "
            "checkpoint %s\n", ag_switch_name(&lm_optimizer_switch, c->optimizer), c->lr, c->min_lr, c->warmup_iters,
            c->lr_decay_iters, c->batch_size, c->max_iters, c->eval_interval, R->o->out_dir);
    if (R->resumed) fprintf(f, "resuming at iteration %ld\n", R->st.iter);
    if (R->o->init_from) fprintf(f, "initialised from %s\n", R->o->init_from);
    fflush(f);
}

static void log_eval(const run *R, long it, double tl, double vl)
{
    FILE *f = R->o->log;
    if (!f) return;
    if (R->tty) fputs("\r\033[K", f);
    if (R->n_val > 0) fprintf(f, "iter %ld: train %.4f val %.4f\n", it, tl, vl);
    else fprintf(f, "iter %ld: train %.4f\n", it, tl);
    if (R->cfg.log_attn_stats) {
        fprintf(f, "  attention entropy / peak weight:");
        for (int l = 0; l < R->cfg.model.n_layer; l++) fprintf(f, "  L%d %.3f / %.3f", l, R->entropy[l], R->peak[l]);
        fputs("\n", f);
    }
    fflush(f);
}

/* On a terminal one line redrawn at most 10 times a second; in a file every log_every steps. */
static void log_progress(run *R, long it, double loss, double lr)
{
    const lm_train_opts *o = R->o;
    long max = R->cfg.max_iters, log_every = o->log_every > 0 ? o->log_every : 10;
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    double t1 = now_s();
    bool show = R->tty ? t1 - R->t_shown >= 0.1 || it + 1 == max : it % log_every == 0 || it + 1 == max;
    if (!o->log || !show) return;
    char eta[32];
    fmt_duration(eta, sizeof eta, R->ema_dt * (double)(max - it - 1));
    fprintf(o->log, "%siter %ld/%ld  loss %.4f  lr %.2e  %.0f tok/s  ETA %s%s", R->tty ? "\r\033[K" : "", it, max,
            loss, lr, (double)B * T / R->ema_dt, eta, R->tty ? "" : "\n");
    fflush(o->log);
    R->t_shown = t1;
}

static void log_end(const run *R, const lm_train_result *r)
{
    FILE *f = R->o->log;
    if (!f) return;
    char el[32];
    fmt_duration(el, sizeof el, now_s() - R->t_start);
    lm_ddp_log_summary(R->ddp, f);
    if (r->interrupted)
        fprintf(f, "interrupted at iteration %ld after %s; checkpoint in %s (continue with --resume)\n", r->iter, el,
                R->o->out_dir);
    else
        fprintf(f, "done: %ld iterations in %s; checkpoint in %s\n", r->iter - R->start, el, R->o->out_dir);
    fflush(f);
}

// --- the loop ---

/* --trace-shapes: the run's header, then one forward pass of a few training windows, op by op. */
static ag_status trace(run *R, ag_error *err)
{
    log_header(R);
    return lm_trace_text(R->o->trace, R->m.g, R->c.ids, R->n_train, true, "the training text", err);
}

/* True when there is nothing to train: --trace-only, or a resumed run that is already at
 * --max-iters (r says where it stands). */
static bool nothing_to_do(const run *R, lm_train_result *r)
{
    const lm_train_opts *o = R->o;
    if (o->trace && o->trace_only) {
        r->iter = R->start;
        return true;
    }
    if (!R->resumed || R->start < R->cfg.max_iters) return false;
    if (o->log)
        fprintf(o->log, "%s is already at iteration %ld (--max-iters %ld): nothing to do\n", o->out_dir, R->start,
                R->cfg.max_iters);
    r->iter = R->start;
    if (R->st.has_eval) {
        r->train_loss = R->st.eval_train;
        r->val_loss = R->st.eval_val;
    }
    return true;
}

/* The checkpoint directory (created if missing; a new run over a checkpoint only with
 * --overwrite), metrics.csv in it, and the run's header in the log. */
static ag_status open_out_dir(run *R, ag_error *err)
{
    const lm_train_opts *o = R->o;
    if (!lm_ddp_writer(R->ddp)) return AG_OK;   /* rank 0 writes (ddp.h) */
    ag_status s = mkdir_p(o->out_dir, err);
    if (s == AG_OK) s = lm_lock_take(&R->lock, o->out_dir, err);   /* held already unless just made */
    if (s) return s;
    if (!R->resumed && lm_ckpt_exists(o->out_dir)) {
        if (!o->overwrite) /* hours of training are one forgotten --resume away from lost */
            return ag_seterr(err, AG_ERR_ARG, "%s already holds a checkpoint: --resume continues it, --overwrite "
                             "starts over, or choose another --out", o->out_dir);
        char msg[PATHLEN + 128];
        snprintf(msg, sizeof msg, "%s already holds a checkpoint; --overwrite: starting a new run over it",
                 o->out_dir);
        warn(R, msg);
    }
    lm_ckpt_clean(o->out_dir);   /* what a killed run left: temporary files, uncommitted checkpoints */
    if ((s = open_metrics(R, R->start, err))) return s;
    if (!o->trace) log_header(R);   /* with --trace-shapes it came before the trace */
    return AG_OK;
}

/* The checkpoint of the evaluation at iteration it (metrics.csv flushed first). */
static ag_status save_checkpoint(run *R, long it, double tl, double vl, ag_error *err)
{
    R->st.iter = it;
    R->st.has_eval = true;
    R->st.eval_train = tl;
    R->st.eval_val = vl;
    ag_status s = flush_metrics(R, err);
    if (s) return s;
    s = lm_ddp_writer(R->ddp) ? lm_ckpt_save(R->o->out_dir, R->m.g, &R->cfg, R->voc, &R->st, err) : AG_OK;
    if (s == AG_OK) R->saved_at = it;
    return s;
}

/* loss.png is drawn in the background while training goes on (gnuplot takes about 0.1 s),
 * skipped if the previous one is still drawing; the last one to the end. With
 * --log-attn-stats attn.png too. A failure is a warning, and no more plots this run. */
static void draw_plots(run *R, bool last)
{
    const char *dir = R->o->out_dir;
    ag_error why = {0};
    bool done = true;
    ag_status ps = AG_OK;
    if (R->plot_pid > 0) ps = lm_plot_loss_wait(R->plot_pid, last, &done, dir, &why);
    if (done) R->plot_pid = 0;
    if (!ps && R->plot_pid == 0)
        ps = last ? lm_plot_loss(dir, R->n_val > 0, &why) : lm_plot_loss_start(dir, R->n_val > 0, &R->plot_pid, &why);
    if (!ps && R->cfg.log_attn_stats)
        ps = lm_plot_attn_stats(dir, R->cfg.model.n_layer, R->cfg.model.block_size, &why);
    if (ps) {
        warn(R, why.msg);
        R->plot_ok = false;
    }
}

/* Every eval_interval steps and at the end: the losses (and the attention statistics), a log
 * line, a checkpoint, the plots; at the end also the last row of metrics.csv, as no step
 * writes one. Otherwise only the row's evaluation columns are blanked. */
static ag_status evaluate_if_due(run *R, long it, bool last, lm_train_result *r, ag_error *err)
{
    const lm_config *c = &R->cfg;
    blank_eval_columns(R);
    if (it % c->eval_interval != 0 && !last) return AG_OK;
    double tl, vl;
    ag_status s = evaluate(R, it, &tl, &vl, err);
    if (s || stop_requested(R)) return s;   /* stopped halfway: the loop writes the checkpoint */
    if (!isfinite(tl) || (R->n_val > 0 && !isfinite(vl))) {   /* a diverged model is never saved */
        char kept[80] = "this run saved none, so a checkpoint already there is untouched";
        if (R->saved_at >= 0) snprintf(kept, sizeof kept, "the last checkpoint (iteration %ld) is kept", R->saved_at);
        double bad = isfinite(tl) ? vl : tl;
        return ag_seterr(err, AG_ERR_NONFINITE, "iteration %ld: the evaluation's %s loss is %g: the model has "
                         "diverged; stopped, %s (try a lower --lr)", it, isfinite(tl) ? "val" : "train",
                         isnan(bad) ? NAN : bad, kept);   /* "nan", never "-nan" */
    }
    r->train_loss = tl;
    r->val_loss = vl;
    fmt_loss(R->train_col, sizeof R->train_col, true, tl);
    fmt_loss(R->val_col, sizeof R->val_col, R->n_val > 0, vl);
    if (c->log_attn_stats && (s = attn_stats(R, it, R->stats, R->stats_cap, err))) return s;
    log_eval(R, it, tl, vl);
    if (R->saved_at != it && (s = save_checkpoint(R, it, tl, vl, err))) return s;
    if (last && (s = put_row(R, err, "%ld,,,%s,%s,%s\n", it, R->train_col, R->val_col, R->stats))) return s;
    if ((s = flush_metrics(R, err))) return s;
    if (R->plot_ok && it > 0) draw_plots(R, last);
    return AG_OK;
}

/* One optimizer step at iteration it, its row of metrics.csv and the progress line. */
static ag_status train_step(run *R, long it, ag_error *err)
{
    const lm_train_opts *o = R->o;
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    double t0 = now_s(), lr = ag_lr_at(&R->sched, it), loss = 0;
    if (o->before_step) o->before_step(it, R->m.g, o->hook_user);
    ag_status s = step(R, it, lr, &loss, err);
    if (s) {
        if (R->tty) fputs("\n", o->log);
        return s;
    }
    double dt = now_s() - t0, tok_s = (double)B * T / (dt > 0 ? dt : 1e-9);
    R->ema_dt = it == R->start ? (dt > 0 ? dt : 1e-9) : 0.9 * R->ema_dt + 0.1 * dt;   /* smoothed step time */
    if (o->losses && it < o->n_losses) o->losses[it] = loss;
    s = put_row(R, err, "%ld,%.6g,%.6f,%s,%s,%.1f%s\n", it, lr, loss, R->train_col, R->val_col, tok_s, R->stats);
    if (s == AG_OK) s = flush_metrics(R, err);
    if (s) return s;
    log_progress(R, it, loss, lr);
    return AG_OK;
}

/* The stop request: this process's signal, or with several ranks the one they agreed on at the
 * last step's reduction, so that all stop at the same iteration (ddp.h). 0: none. */
static int stop_requested(const run *R)
{
    if (lm_ddp_ranks(R->ddp) > 1) return lm_ddp_stop(R->ddp);
    return R->o->stop ? *R->o->stop : 0;
}

/* A stop signal (Ctrl-C) before iteration it: a checkpoint of where the run stands. */
static ag_status stop_early(run *R, long it, lm_train_result *r, ag_error *err)
{
    r->stop_signal = stop_requested(R);
    if (R->saved_at != it && lm_ddp_writer(R->ddp)) {
        R->st.iter = it;
        R->st.has_eval = false;
        ag_status s = lm_ckpt_save(R->o->out_dir, R->m.g, &R->cfg, R->voc, &R->st, err);
        if (s) return s;
    }
    if (R->tty) fputs("\n", R->o->log);
    r->interrupted = true;
    r->iter = it;
    return AG_OK;
}

/* train.h's loop: evaluate when due, stop at max_iters, else one step. */
static ag_status train_loop(run *R, lm_train_result *r, ag_error *err)
{
    const lm_config *c = &R->cfg;
    R->tty = R->o->log && isatty(fileno(R->o->log));
    R->sched = (ag_lr_schedule){c->lr, c->min_lr, c->warmup_iters, c->lr_decay_iters};
    R->t_start = now_s();
    R->saved_at = R->resumed ? R->start : -1;
    for (long it = R->start;; it++) {
        if (stop_requested(R)) return stop_early(R, it, r, err);
        bool last = it == c->max_iters;
        ag_status s = evaluate_if_due(R, it, last, r, err);
        if (s) return s;
        if (stop_requested(R)) return stop_early(R, it, r, err);   /* during the evaluation */
        if (last) {
            r->iter = it;
            return AG_OK;
        }
        if ((s = train_step(R, it, err))) return s;
    }
}

ag_status lm_train(const lm_train_opts *o, lm_train_result *r, ag_error *err)
{
    run R = {.o = o, .plot_ok = o->plot};
    memset(r, 0, sizeof *r);
    ag_status s = setup(&R, err);                    /* lock, data, model, optimizer state, buffers */
    if (s == AG_OK && stop_requested(&R)) {           /* a signal during the setup: nothing written */
        r->interrupted = true;
        r->stop_signal = stop_requested(&R);           /* main.c exits 128 + it, as after a step */
        r->iter = R.start;
        if (o->log) fprintf(o->log, "interrupted before training started; nothing written\n");
        run_free(&R);
        return AG_OK;
    }
    if (s == AG_OK) {
        r->n_params = (long)R.m.g->params->total;
        r->vocab_size = R.voc->V;
        r->train_loss = r->val_loss = NAN;
        if (o->trace) s = trace(&R, err);             /* --trace-shapes */
    }
    if (s == AG_OK && !nothing_to_do(&R, r)) {        /* --trace-only; --max-iters reached before */
        s = open_out_dir(&R, err);                    /* mkdir -p, --overwrite, metrics.csv */
        if (s == AG_OK) s = train_loop(&R, r, err);
        if (s == AG_OK) log_end(&R, r);
    }
    run_free(&R);
    return s;
}
