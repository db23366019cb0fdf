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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "attn.h"
#include "checkpoint.h"
#include "plot.h"
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
static ag_status mkdir_p(const char *dir, char *err, size_t errlen)
{
    char buf[PATHLEN];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) {
        snprintf(err, errlen, "%s: path too long", dir);
        return AG_ERR_ARG;
    }
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        struct stat sb;
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "%s: cannot create directory %s: %s", dir, buf, strerror(errno));
            return AG_ERR_IO;
        }
        if (stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            snprintf(err, errlen, "%s: %s is not a directory", dir, buf);
            return AG_ERR_IO;
        }
        *p = c;
        if (c == '\0') break;
        while (p[1] == '/') p++;
    }
    return AG_OK;
}

static bool file_exists(const char *dir, const char *name)
{
    char path[PATHLEN];
    struct stat sb;
    return lm_path_join(path, sizeof path, dir, name) && stat(path, &sb) == 0;
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
    ag_ctx *ctx;
    int *x, *y;            /* [B,T] */
    ag_tensor **attn;      /* [n_layer] recorded attention weights (--log-attn-stats) */
    double *entropy, *peak; /* [n_layer] their statistics at the last evaluation */
    char *stats;           /* metrics.csv's attention columns of this row, ",e0,p0,..." */
    size_t stats_cap;
    FILE *metrics;
    bool plot_ok;
    pid_t plot_pid;        /* a loss.png still being drawn in the background, or 0 */
    bool resumed;
} run;

static void run_free(run *R)
{
    if (R->plot_pid > 0) { /* a run that stops early still leaves a whole picture */
        char why[512];
        bool done;
        (void)lm_plot_loss_wait(R->plot_pid, true, &done, R->o->out_dir, why, sizeof why);
    }
    if (R->metrics) fclose(R->metrics);
    free(R->x);
    free(R->y);
    free(R->attn);
    free(R->entropy);
    free(R->peak);
    free(R->stats);
    ag_ctx_free(R->ctx);
    corpus_free(&R->c);
    lm_model_free(&R->m);
}

static void warn(const run *R, const char *msg)
{
    if (R->o->warn) fprintf(R->o->warn, "char_lm: warning: %s\n", msg);
}

// --- setting up: model, data, config ---

/* The model's shape may not change on --resume / --init-from: a flag (or --config) that says
 * otherwise is an error. Other fields: the checkpoint's (resume) or the command line's. */
static ag_status merge_config(run *R, const lm_config *ck, bool resume, const char *dir, char *err,
                              size_t errlen)
{
    const lm_train_opts *o = R->o;
    lm_config cfg = resume ? *ck : o->cfg;
    for (int i = 0; i < lm_n_fields; i++) {
        const lm_field *f = &lm_fields[i];
        bool given = o->given && o->given[i];
        if (f->shape) {
            if (f->flag && (given || o->config_given) && !lm_field_equal(&o->cfg, ck, f)) {
                char have[64], want[64];
                snprintf(err, errlen, "%s: the checkpoint in %s has %s %s, but %s asks for %s%s", f->flag,
                         dir, f->key, lm_field_format(ck, f, have, sizeof have), given ? "the flag" : "--config",
                         lm_field_format(&o->cfg, f, want, sizeof want),
                         resume ? " (a resumed run keeps its model shape)" : "");
                return AG_ERR_ARG;
            }
            lm_field_copy(&cfg, ck, f);
        } else if (resume && given) {
            lm_field_copy(&cfg, &o->cfg, f);
        }
    }
    R->cfg = cfg;
    return AG_OK;
}

static ag_status setup(run *R, char *err, size_t errlen)
{
    const lm_train_opts *o = R->o;
    char why[1024];
    ag_status s;
    if (o->resume || o->init_from) {
        const char *dir = o->resume ? o->out_dir : o->init_from;
        const char *flag = o->resume ? "--resume" : "--init-from";
        if ((s = lm_model_load(dir, &R->m, why, sizeof why))) {
            snprintf(err, errlen, "%s: %s", flag, why);
            return s;
        }
        if ((s = merge_config(R, &R->m.cfg, o->resume, dir, err, errlen))) return s;
        R->m.g->cfg.dropout = R->cfg.model.dropout;
        if ((s = corpus_load_vocab(o->data_path, &R->m.vocab, &R->c, why, sizeof why))) {
            snprintf(err, errlen, "%s (the vocabulary of %s)", why, dir);
            return s;
        }
    } else {
        R->cfg = o->cfg;
        if ((s = corpus_load(o->data_path, &R->c, err, errlen))) return s;
        R->cfg.model.vocab_size = R->c.vocab.V;
    }
    R->voc = &R->c.vocab;
    if ((s = lm_config_validate(&R->cfg, true, err, errlen))) return s;
    if ((s = corpus_split(&R->c, R->cfg.val_fraction, R->cfg.model.block_size, &R->n_train, &R->n_val, err,
                          errlen)))
        return s;
    if (!R->m.g) {
        R->m.cfg = R->cfg;
        ag_error e = { 0 };
        if (!(R->m.g = ag_gpt_new(&R->cfg.model, R->cfg.seed, &e))) {
            snprintf(err, errlen, "cannot build the model: %s", e.msg);
            return AG_ERR_NOMEM;
        }
    }

    memset(&R->st, 0, sizeof R->st);
    if (o->resume) {
        if ((s = lm_train_state_load(o->out_dir, R->m.g, &R->st, why, sizeof why))) {
            snprintf(err, errlen, "--resume: %s", why);
            return s;
        }
        if (R->st.iter != R->m.iter) {
            snprintf(err, errlen, "--resume: %s holds model.safetensors of iteration %ld but "
                     "train_state.safetensors of iteration %ld (a write was interrupted?)",
                     o->out_dir, R->m.iter, R->st.iter);
            return AG_ERR_FORMAT;
        }
        if (R->st.n_tokens != R->c.n || R->st.data_hash != lm_ids_hash(R->c.ids, R->c.n)) {
            snprintf(err, errlen, "--resume: %s is not the text the run in %s was trained on (%zu tokens, "
                     "the run had %zu); to train on it from these weights use --init-from",
                     o->data_path, o->out_dir, R->c.n, R->st.n_tokens);
            return AG_ERR_ARG;
        }
        R->resumed = true;
    } else {
        ag_rng_seed(&R->st.rng, mix64(R->cfg.seed, TAG_BATCH));
        R->st.n_tokens = R->c.n;
        R->st.data_hash = lm_ids_hash(R->c.ids, R->c.n);
    }
    R->st.n_train = R->n_train;
    R->st.n_val = R->n_val;

    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    R->ctx = ag_ctx_new();
    R->x = malloc((size_t)B * T * sizeof *R->x);
    R->y = malloc((size_t)B * T * sizeof *R->y);
    R->attn = calloc((size_t)R->cfg.model.n_layer, sizeof *R->attn);
    R->entropy = calloc((size_t)R->cfg.model.n_layer, sizeof *R->entropy);
    R->peak = calloc((size_t)R->cfg.model.n_layer, sizeof *R->peak);
    R->stats_cap = 48 * (size_t)R->cfg.model.n_layer + 8;   /* ",%.6f,%.6f" per layer */
    R->stats = calloc(R->stats_cap, 1);
    if (!R->ctx || !R->x || !R->y || !R->attn || !R->entropy || !R->peak || !R->stats) {
        snprintf(err, errlen, "out of memory");
        return AG_ERR_NOMEM;
    }
    ag_ctx_set_detect_anomaly(R->ctx, R->cfg.detect_anomaly);
    ag_ctx_set_recycle_grads(R->ctx, true); /* only the parameters' gradients are read */
    /* with --detect-anomaly attention runs op by op, so the message can name the step that went
     * wrong (the scores' matmul, the softmax, ...) instead of the one fused op */
    for (int l = 0; R->cfg.detect_anomaly && l < R->cfg.model.n_layer; l++) R->m.g->blocks[l].attn.composed = true;
    return AG_OK;
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
static ag_status open_metrics(run *R, long start, char *err, size_t errlen)
{
    char path[PATHLEN], tmp[PATHLEN + 8];
    if (!lm_path_join(path, sizeof path, R->o->out_dir, "metrics.csv")) {
        snprintf(err, errlen, "%s: path too long", R->o->out_dir);
        return AG_ERR_ARG;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *in = R->resumed ? fopen(path, "r") : NULL;
    FILE *out = fopen(tmp, "w");
    if (!out) {
        snprintf(err, errlen, "%s: cannot write: %s", tmp, strerror(errno));
        if (in) fclose(in);
        return AG_ERR_IO;
    }
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
    if (fclose(out) != 0 || !ok || rename(tmp, path) != 0) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
        return AG_ERR_IO;
    }
    if (!(R->metrics = fopen(path, "a"))) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return AG_ERR_IO;
    }
    return AG_OK;
}

static void fmt_loss(char *buf, size_t n, bool have, double v)
{
    if (have && !isnan(v)) snprintf(buf, n, "%.6f", v);
    else buf[0] = '\0';
}

// --- evaluation ---

/* Mean loss over eval_iters random batches of ids [n], in no-grad mode. */
static ag_status estimate(run *R, const int *ids, size_t n, ag_rng *rng, double *out, char *err,
                          size_t errlen)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size;
    double sum = 0;
    ag_ctx_set_grad(R->ctx, false);
    for (long k = 0; k < R->cfg.eval_iters; k++) {
        get_batch(ids, n, B, T, rng, R->x, R->y);
        ag_ctx_reset(R->ctx);
        ag_tensor *loss = NULL;
        ag_gpt_forward(R->ctx, R->m.g, R->x, R->y, B, T, false, 0, &loss);
        if (!loss) {
            snprintf(err, errlen, "evaluation: %s", ag_ctx_error(R->ctx) ? ag_ctx_error(R->ctx) : "forward failed");
            ag_status s = ag_ctx_status(R->ctx);
            ag_ctx_reset(R->ctx);
            ag_ctx_set_grad(R->ctx, true);
            return s ? s : AG_ERR_ARG;
        }
        sum += (double)loss->data[0];
    }
    ag_ctx_reset(R->ctx);
    ag_ctx_set_grad(R->ctx, true);
    *out = sum / (double)R->cfg.eval_iters;
    return AG_OK;
}

/* --log-attn-stats: one batch (validation split, else training) through the model with every
 * layer's attention weights recorded; R->entropy[l] and R->peak[l] get their statistics, and
 * cols the metrics.csv columns ",entropy_0,peak_0,entropy_1,...". */
static ag_status attn_stats(run *R, long it, char *cols, size_t n, char *err, size_t errlen)
{
    int B = R->cfg.batch_size, T = R->cfg.model.block_size, L = R->cfg.model.n_layer;
    ag_rng rng;
    ag_rng_seed(&rng, mix64(R->cfg.seed ^ TAG_STATS, (uint64_t)it));
    bool val = R->n_val > 0;
    get_batch(R->c.ids + (val ? R->n_train : 0), val ? R->n_val : R->n_train, B, T, &rng, R->x, R->y);
    ag_ctx_reset(R->ctx);
    ag_status s = lm_attn_record(R->ctx, R->m.g, R->x, B, T, R->attn);
    if (s) {
        snprintf(err, errlen, "attention statistics: %s", ag_ctx_error(R->ctx));
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

static ag_status evaluate(run *R, long it, double *tl, double *vl, char *err, size_t errlen)
{
    ag_rng rng;
    ag_rng_seed(&rng, mix64(R->cfg.seed ^ TAG_EVAL, (uint64_t)it));
    ag_status s = estimate(R, R->c.ids, R->n_train, &rng, tl, err, errlen);
    *vl = NAN;
    if (s == AG_OK && R->n_val > 0) s = estimate(R, R->c.ids + R->n_train, R->n_val, &rng, vl, err, errlen);
    return s;
}

// --- one optimizer step ---

static ag_status step(run *R, long it, double lr, double *loss_out, char *err, size_t errlen)
{
    const lm_config *c = &R->cfg;
    ag_gpt *g = R->m.g;
    ag_params *P = g->params;
    int B = c->batch_size, T = c->model.block_size;
    get_batch(R->c.ids, R->n_train, B, T, &R->st.rng, R->x, R->y);
    ag_params_zero_grad(P);
    ag_ctx_reset(R->ctx);
    ag_tensor *loss = NULL;
    ag_gpt_forward(R->ctx, g, R->x, R->y, B, T, true, mix64(c->seed ^ TAG_DROP, (uint64_t)it), &loss);
    ag_status s = ag_ctx_status(R->ctx);
    if (s == AG_ERR_NONFINITE) {   /* --detect-anomaly: the first op that went non-finite */
        snprintf(err, errlen, "iteration %ld: %s; stopped before the optimizer step, the last checkpoint "
                 "(iteration %ld) is untouched", it, ag_ctx_error(R->ctx), R->st.iter);
        return s;
    }
    if (!loss || s) {
        snprintf(err, errlen, "iteration %ld: %s", it, ag_ctx_error(R->ctx) ? ag_ctx_error(R->ctx) : "forward failed");
        return s ? s : AG_ERR_ARG;
    }
    double lv = (double)loss->data[0];
    if (!isfinite(lv)) {
        snprintf(err, errlen, "iteration %ld: the loss is %g; stopped before the optimizer step, the last "
                 "checkpoint (iteration %ld) is untouched (try a lower --lr)", it, lv, R->st.iter);
        return AG_ERR_NONFINITE;
    }
    if ((s = ag_backward(R->ctx, loss))) {
        snprintf(err, errlen, "iteration %ld: backward: %s%s", it,
                 ag_ctx_error(R->ctx) ? ag_ctx_error(R->ctx) : ag_status_str(s),
                 s == AG_ERR_NONFINITE ? "; stopped before the optimizer step, the last checkpoint is untouched" : "");
        return s;
    }
    double norm = ag_grad_norm(P);
    double gscale = ag_clip_scale(norm, c->grad_clip);   /* 1 unless clipping (clip <= 0: never) */
    if (!isfinite(norm)) {
        snprintf(err, errlen, "iteration %ld: the gradient norm is %g; stopped before the optimizer step, "
                 "the last checkpoint (iteration %ld) is untouched (try a lower --lr)", it, norm, R->st.iter);
        return AG_ERR_NONFINITE;
    }
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
    if (c->detect_anomaly)   /* the optimizer is no op on the tape: check what it wrote */
        for (int e = 0; e < P->n; e++) {
            const ag_tensor *t = P->entries[e].t;
            for (size_t i = 0; i < ag_numel(t); i++)
                if (!isfinite(t->data[i])) {
                    snprintf(err, errlen, "iteration %ld: the %s step made %s non-finite (element %zu is %g; lr %g); "
                             "the last checkpoint (iteration %ld) is untouched", it,
                             lm_optimizer_name(c->optimizer), t->name, i, (double)t->data[i], lr, R->st.iter);
                    return AG_ERR_NONFINITE;
                }
        }
    ag_ctx_reset(R->ctx);
    *loss_out = lv;
    return AG_OK;
}

// --- the loop ---

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
            "checkpoint %s\n", lm_optimizer_name(c->optimizer), c->lr, c->min_lr, c->warmup_iters,
            c->lr_decay_iters, c->batch_size, c->max_iters, c->eval_interval, R->o->out_dir);
    if (R->resumed) fprintf(f, "resuming at iteration %ld\n", R->st.iter);
    if (R->o->init_from) fprintf(f, "initialised from %s\n", R->o->init_from);
    fflush(f);
}

ag_status lm_train(const lm_train_opts *o, lm_train_result *r, char *err, size_t errlen)
{
    run R;
    memset(&R, 0, sizeof R);
    memset(r, 0, sizeof *r);
    R.o = o;
    R.plot_ok = o->plot;
    ag_status s = AG_ERR_ARG;
    if (o->resume && o->init_from) {
        snprintf(err, errlen, "--resume and --init-from exclude each other");
        goto out;
    }
    if ((s = setup(&R, err, errlen))) goto out;
    const lm_config *c = &R.cfg;
    long start = R.st.iter;
    r->n_params = (long)R.m.g->params->total;
    r->vocab_size = R.voc->V;
    r->train_loss = r->val_loss = NAN;
    if (o->trace) {   /* --trace-shapes: one forward pass of a few training windows, op by op */
        log_header(&R);
        if ((s = lm_trace_text(o->trace, R.m.g, R.c.ids, R.n_train, true, "the training text", err, errlen)))
            goto out;
        if (o->trace_only) {
            r->iter = start;
            goto out;
        }
    }
    if (R.resumed && start >= c->max_iters) {
        if (o->log)
            fprintf(o->log, "%s is already at iteration %ld (--max-iters %ld): nothing to do\n", o->out_dir,
                    start, c->max_iters);
        r->iter = start;
        if (R.st.has_eval) {
            r->train_loss = R.st.eval_train;
            r->val_loss = R.st.eval_val;
        }
        s = AG_OK;
        goto out;
    }
    if ((s = mkdir_p(o->out_dir, err, errlen))) goto out;
    if (!R.resumed && file_exists(o->out_dir, "model.safetensors")) {
        if (!o->overwrite) { /* hours of training are one forgotten --resume away from lost */
            snprintf(err, errlen, "%s already holds a checkpoint: --resume continues it, --overwrite starts "
                     "over, or choose another --out", o->out_dir);
            s = AG_ERR_ARG;
            goto out;
        }
        char msg[PATHLEN + 128];
        snprintf(msg, sizeof msg, "%s already holds a checkpoint; --overwrite: starting a new run over it",
                 o->out_dir);
        warn(&R, msg);
    }
    if ((s = open_metrics(&R, start, err, errlen))) goto out;
    if (!o->trace) log_header(&R);

    bool tty = o->log && isatty(fileno(o->log));
    long log_every = o->log_every > 0 ? o->log_every : 10;
    int B = c->batch_size, T = c->model.block_size;
    ag_lr_schedule sched = {c->lr, c->min_lr, c->warmup_iters, c->lr_decay_iters};
    double t_start = now_s(), ema_dt = 0, t_shown = 0;
    long saved_at = R.resumed ? start : -1;
    long it;
    for (it = start;; it++) {
        if (o->stop && *o->stop) {
            if (saved_at != it) {
                R.st.iter = it;
                R.st.has_eval = false;
                if ((s = lm_ckpt_save(o->out_dir, R.m.g, c, R.voc, &R.st, err, errlen))) goto out;
            }
            if (tty) fputs("\n", o->log);
            r->interrupted = true;
            break;
        }
        bool last = it == c->max_iters;
        char tl_s[32] = "", vl_s[32] = "";
        char *stats = R.stats;   /* --log-attn-stats: ",e0,p0,e1,p1..." at evaluations, else ",,,," */
        stats[0] = '\0';
        for (int l = 0; c->log_attn_stats && l < c->model.n_layer; l++) strcat(stats, ",,");
        if (it % c->eval_interval == 0 || last) {
            double tl, vl;
            if (R.resumed && it == start && R.st.has_eval) {
                tl = R.st.eval_train;
                vl = R.st.eval_val;
            } else if ((s = evaluate(&R, it, &tl, &vl, err, errlen))) {
                goto out;
            }
            r->train_loss = tl;
            r->val_loss = vl;
            fmt_loss(tl_s, sizeof tl_s, true, tl);
            fmt_loss(vl_s, sizeof vl_s, R.n_val > 0, vl);
            if (c->log_attn_stats && (s = attn_stats(&R, it, stats, R.stats_cap, err, errlen))) goto out;
            if (o->log) {
                if (tty) fputs("\r\033[K", o->log);
                if (R.n_val > 0) fprintf(o->log, "iter %ld: train %.4f val %.4f\n", it, tl, vl);
                else fprintf(o->log, "iter %ld: train %.4f\n", it, tl);
                if (c->log_attn_stats) {
                    fprintf(o->log, "  attention entropy / peak weight:");
                    for (int l = 0; l < c->model.n_layer; l++)
                        fprintf(o->log, "  L%d %.3f / %.3f", l, R.entropy[l], R.peak[l]);
                    fputs("\n", o->log);
                }
                fflush(o->log);
            }
            if (saved_at != it) {
                R.st.iter = it;
                R.st.has_eval = true;
                R.st.eval_train = tl;
                R.st.eval_val = vl;
                fflush(R.metrics);
                if ((s = lm_ckpt_save(o->out_dir, R.m.g, c, R.voc, &R.st, err, errlen))) goto out;
                saved_at = it;
            }
            if (last && fprintf(R.metrics, "%ld,,,%s,%s,%s\n", it, tl_s, vl_s, stats) < 0) {
                snprintf(err, errlen, "%s/metrics.csv: write failed", o->out_dir);
                s = AG_ERR_IO;
                goto out;
            }
            fflush(R.metrics);
            if (R.plot_ok && it > 0) {
                /* loss.png is drawn in the background while training goes on (gnuplot takes about
                 * 0.1 s), skipped if the previous one is still drawing; the last one to the end */
                char why[512];
                bool done = true;
                ag_status ps = AG_OK;
                if (R.plot_pid > 0) ps = lm_plot_loss_wait(R.plot_pid, last, &done, o->out_dir, why, sizeof why);
                if (done) R.plot_pid = 0;
                if (!ps && R.plot_pid == 0)
                    ps = last ? lm_plot_loss(o->out_dir, R.n_val > 0, why, sizeof why)
                              : lm_plot_loss_start(o->out_dir, R.n_val > 0, &R.plot_pid, why, sizeof why);
                if (!ps && c->log_attn_stats)
                    ps = lm_plot_attn_stats(o->out_dir, c->model.n_layer, c->model.block_size, why, sizeof why);
                if (ps) {
                    warn(&R, why);
                    R.plot_ok = false;
                }
            }
        }
        if (last) break;

        double t0 = now_s(), lr = ag_lr_at(&sched, it), loss;
        if (o->before_step) o->before_step(it, R.m.g, o->hook_user);
        if ((s = step(&R, it, lr, &loss, err, errlen))) {
            if (tty) fputs("\n", o->log);
            goto out;
        }
        double dt = now_s() - t0, tok_s = (double)B * T / (dt > 0 ? dt : 1e-9);
        ema_dt = it == start ? (dt > 0 ? dt : 1e-9) : 0.9 * ema_dt + 0.1 * dt;   /* smoothed step time */
        if (o->losses && it < o->n_losses) o->losses[it] = loss;
        if (fprintf(R.metrics, "%ld,%.6g,%.6f,%s,%s,%.1f%s\n", it, lr, loss, tl_s, vl_s, tok_s, stats) < 0) {
            snprintf(err, errlen, "%s/metrics.csv: write failed", o->out_dir);
            s = AG_ERR_IO;
            goto out;
        }
        fflush(R.metrics);
        /* on a terminal one line redrawn at most 10 times a second; in a file every log_every */
        double t1 = now_s();
        bool show = tty ? t1 - t_shown >= 0.1 || it + 1 == c->max_iters
                        : it % log_every == 0 || it + 1 == c->max_iters;
        if (o->log && show) {
            char eta[32];
            fmt_duration(eta, sizeof eta, ema_dt * (double)(c->max_iters - it - 1));
            fprintf(o->log, "%siter %ld/%ld  loss %.4f  lr %.2e  %.0f tok/s  ETA %s%s", tty ? "\r\033[K" : "",
                    it, c->max_iters, loss, lr, (double)B * T / ema_dt, eta, tty ? "" : "\n");
            fflush(o->log);
            t_shown = t1;
        }
    }
    r->iter = it;
    if (o->log) {
        char el[32];
        fmt_duration(el, sizeof el, now_s() - t_start);
        if (r->interrupted)
            fprintf(o->log, "interrupted at iteration %ld after %s; checkpoint in %s (continue with --resume)\n",
                    it, el, o->out_dir);
        else
            fprintf(o->log, "done: %ld iterations in %s; checkpoint in %s\n", it - start, el, o->out_dir);
        fflush(o->log);
    }
    s = AG_OK;
out:
    run_free(&R);
    return s;
}
