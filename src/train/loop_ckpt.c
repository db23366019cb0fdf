/* loop_ckpt.c -- the checkpoint of ag_train_run (train.h), in the client's format
 * (ag_train_format: its files, written and read by its calls) or, without one, the loop's own,
 * the default format below: DIR/ckpt-<step>/ holds
 * model.safetensors (the weights, ckpt.c's layout, with the model's name, the step and the
 * run_id) and state.safetensors (Adam's m and v, the batch stream, the step, the best
 * evaluation, the hash of the weights they go with, the run_id, follows: the hash of the run's
 * checkpoint before, origin: the run's start, and the batch losses since the last evaluation, so
 * that a resume's metrics.csv is the unbroken run's). The save is the library's unit
 * (ag_ckpt_save, ckpt_save.c): both are written into ckpt-<step>.tmp/, which is renamed whole;
 * only then does DIR/latest move, so a kill at any instant leaves latest naming a complete
 * checkpoint. Every step that changes the disk has its fault point. Whose a checkpoint is (its
 * run_id, the checkpoint it follows) is read by the library's rules (ckpt_keep.c): a run
 * removes its own superseded checkpoints and nothing else, a lost latest is found again on a
 * resume, and no run is made inside another. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "train.h"
#include "train_impl.h"

#define PATHLEN 4096
#define MODEL_FILE "model.safetensors"
#define STATE_FILE "state.safetensors"
#define FORMAT "attograd-loop-1"

static const char *const files[] = {MODEL_FILE, STATE_FILE, NULL};
static ag_status identify(const char *path, ag_ckpt_id *id, ag_error *err);   /* whose a checkpoint is (below) */
static const ag_ckpt_kind kind = {.files = files, .identify = identify};
static ag_status loop_write(const ag_train_client *c, const char *tmp, const ag_train_state *st, ag_error *err);
static ag_status loop_read(const ag_train_client *c, const char *where, ag_train_state *st, bool all, ag_error *err);
static const ag_train_format loop_format = {.kind = &kind, .write = loop_write, .read = loop_read};

/* The client's format, or the loop's. */
static const ag_train_format *format_of(const ag_train_client *c) { return c->format ? c->format : &loop_format; }

/* AG_ERR_ARG when the client's format lacks a part (who: the caller, in the message). */
static ag_status format_check(const ag_train_client *c, const char *who, ag_error *err)
{
    const ag_train_format *f = c->format;
    if (!f || (f->kind && f->kind->files && f->kind->files[0] && f->kind->identify && f->write && f->read)) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s: the client's checkpoint format has no files, identify, write or read call",
                     who);
}

/* dir/name/file in path [PATHLEN] (file NULL: dir/name); false with err set if too long. */
static bool path3(char *path, const char *dir, const char *name, const char *file, ag_error *err)
{
    int n = file ? snprintf(path, PATHLEN, "%s/%s/%s", dir, name, file) : snprintf(path, PATHLEN, "%s/%s", dir, name);
    if (n >= 0 && n < PATHLEN) return true;
    ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    return false;
}

/* Both files of a checkpoint into the directory tmp (the default format's write). */
static ag_status loop_write(const ag_train_client *c, const char *tmp, const ag_train_state *st, ag_error *err)
{
    char path[PATHLEN], step[32], rs[20], ri[20], hash[20], best[40], best_step[32], run[20], follows[20], origin[20];
    char loss_sum[40], loss_n[32];
    snprintf(step, sizeof step, "%ld", st->step);
    ag_hex64_format(rs, sizeof rs, st->rng.state);
    ag_hex64_format(ri, sizeof ri, st->rng.inc);
    ag_hex64_format(hash, sizeof hash, ag_weights_hash(c->params));
    ag_hex64_format(run, sizeof run, st->run_id);
    ag_hex64_format(follows, sizeof follows, st->prev_hash);
    ag_hex64_format(origin, sizeof origin, st->origin);
    snprintf(best, sizeof best, "%.17g", st->best_loss);
    snprintf(best_step, sizeof best_step, "%ld", st->best_step);
    snprintf(loss_sum, sizeof loss_sum, "%.17g", st->loss_sum);   /* exact: a resume's train_loss is the same */
    snprintf(loss_n, sizeof loss_n, "%ld", st->loss_n);
    const ag_st_meta model[] = {{"format", FORMAT}, {"model", c->name}, {"step", step}, {"run_id", run}};
    const ag_st_meta state[] = {{"format", FORMAT}, {"step", step}, {"rng_state", rs}, {"rng_inc", ri},
                                {"weights", hash}, {"best_loss", best}, {"best_step", best_step}, {"run_id", run},
                                {"follows", follows}, {"origin", origin}, {"loss_sum", loss_sum}, {"loss_n", loss_n},
                                {"loss_taken", st->loss_taken ? "1" : "0"}};
    if (!path3(path, tmp, MODEL_FILE, NULL, err)) return AG_ERR_ARG;
    ag_status s = ag_ckpt_write_weights(path, c->params, model, 4, err);
    if (s == AG_OK && !path3(path, tmp, STATE_FILE, NULL, err)) return AG_ERR_ARG;
    if (s == AG_OK) s = ag_ckpt_write_moments(path, c->params, state, 13, err);
    return s;
}

/* What the format writes: the client's weights and the loop's state. */
typedef struct {
    const ag_train_client *c;
    const ag_train_state *st;
} save_of;

static ag_status write_save(const char *tmp, void *user, ag_error *err)
{
    const save_of *w = user;
    return format_of(w->c)->write(w->c, tmp, w->st, err);
}

ag_status ag_train_save(const ag_lock *lock, const char *dir, const ag_train_client *c, ag_train_state *st,
                        bool is_best, bool over, char *name, ag_error *err)
{
    snprintf(name, 64, "ckpt-%08ld", st->step);
    if (ag_ckpt_check_finite(c->params, name, err)) return AG_ERR_NONFINITE;   /* the last good one stays */
    save_of w = {c, st};
    const ag_train_format *f = format_of(c);
    const ag_ckpt_save_opts o = {.iter = st->step, .run_id = st->run_id, .prev = st->prev_hash,
                                 .best_iter = st->best_step, .is_best = is_best, .write = write_save, .user = &w,
                                 .lock = lock, .count = f->count ? f->count : "step", .sync_point = f->sync_point,
                                 .second_name = f->second_name || over};
    bool committed = false;
    ag_status s = ag_ckpt_save(dir, f->kind, &o, name, &committed, err);
    if (committed) st->prev_hash = ag_weights_hash(c->params);   /* the next checkpoint follows this one */
    return s;
}

// --- reading ---

/* The metadata value key of f (read from path); NULL with err set when missing. */
static const char *meta(const ag_st_file *f, const char *path, const char *key, ag_error *err)
{
    const char *v = ag_st_meta_get(f, key);
    if (!v) ag_seterr(err, AG_ERR_FORMAT, "%s: no \"%s\" in its metadata (not a checkpoint of ag_train_run?)", path,
                      key);
    return v;
}

/* The batch losses since the last evaluation into st; none in a checkpoint older than them
 * (a resume's first train_loss is then empty). */
static ag_status read_losses(const ag_st_file *f, const char *path, ag_train_state *st, ag_error *err)
{
    const char *sum = ag_st_meta_get(f, "loss_sum"), *n = ag_st_meta_get(f, "loss_n");
    const char *taken = ag_st_meta_get(f, "loss_taken");
    st->loss_sum = 0;
    st->loss_n = 0;
    st->loss_taken = false;
    if (!sum && !n && !taken) return AG_OK;
    char *end = NULL, *end_n = NULL;
    double v = sum ? strtod(sum, &end) : NAN;
    long k = n ? strtol(n, &end_n, 10) : -1;
    if (!isfinite(v) || *end || k < 0 || *end_n || !taken || (strcmp(taken, "0") && strcmp(taken, "1")))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: a malformed loss_sum, loss_n or loss_taken in its metadata", path);
    st->loss_sum = v;
    st->loss_n = k;
    st->loss_taken = taken[0] == '1';
    return AG_OK;
}

/* The state file's numbers into st; hash, the weights it goes with. */
static ag_status read_state(const ag_st_file *f, const char *path, ag_train_state *st, uint64_t *hash, ag_error *err)
{
    const char *k[] = {"step", "rng_state", "rng_inc", "weights", "best_loss", "best_step"};
    const char *v[6];
    for (int i = 0; i < 6; i++)
        if (!(v[i] = meta(f, path, k[i], err))) return AG_ERR_FORMAT;
    uint64_t step;
    char *end;
    st->best_loss = strtod(v[4], &end);
    bool ok = *end == '\0' && !isnan(st->best_loss);
    st->best_step = strtol(v[5], &end, 10);
    ok = ok && *end == '\0' && ag_u64_parse(v[0], &step) && step <= (uint64_t)1 << 52;
    ok = ok && ag_hex64_parse(v[1], &st->rng.state) && ag_hex64_parse(v[2], &st->rng.inc) &&
         ag_hex64_parse(v[3], hash);
    if (!ok) return ag_seterr(err, AG_ERR_FORMAT, "%s: a malformed number in its metadata", path);
    st->step = (long)step;
    if (!ag_hex64_parse(ag_st_meta_get(f, "run_id"), &st->run_id)) st->run_id = 0;   /* older than run ids */
    if (!ag_hex64_parse(ag_st_meta_get(f, "origin"), &st->origin)) st->origin = 0;
    return read_losses(f, path, st, err);
}

/* model.safetensors of the checkpoint directory where into c->params; its step in *step. */
static ag_status load_model(const char *where, const ag_train_client *c, long *step, ag_error *err)
{
    char path[PATHLEN];
    if (!path3(path, where, MODEL_FILE, NULL, err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return err->status ? err->status : AG_ERR_IO;
    const char *model = meta(f, path, "model", err), *at = model ? meta(f, path, "step", err) : NULL;
    ag_status s = at ? AG_OK : AG_ERR_FORMAT;
    if (s == AG_OK && strcmp(model, c->name) != 0)
        s = ag_seterr(err, AG_ERR_FORMAT, "%s: a checkpoint of '%s', not of '%s'", path, model, c->name);
    if (s == AG_OK) s = ag_ckpt_read_weights(f, path, c->params, err);
    if (s == AG_OK) *step = strtol(at, NULL, 10);
    ag_st_free(f);
    return s;
}

/* The default format's read: model.safetensors, and with all state.safetensors, of where. */
static ag_status loop_read(const ag_train_client *c, const char *where, ag_train_state *st, bool all, ag_error *err)
{
    char path[PATHLEN];
    long model_step = -1;
    uint64_t hash = 0;
    ag_status s = load_model(where, c, &model_step, err);
    st->step = model_step;
    if (s || !all) return s;
    if (!path3(path, where, STATE_FILE, NULL, err)) return AG_ERR_ARG;
    ag_st_file *f = ag_st_load(path, err);
    if (!f) return err->status ? err->status : AG_ERR_IO;
    s = read_state(f, path, st, &hash, err);
    if (s == AG_OK) s = ag_ckpt_read_moments(f, path, c->params, err);
    ag_st_free(f);
    if (s == AG_OK && (hash != ag_weights_hash(c->params) || model_step != st->step))
        s = ag_seterr(err, AG_ERR_FORMAT, "%s: its two files are of different steps (a checkpoint put together by "
                      "hand?)", path);
    return s;
}

/* The weights, moments and state of DIR/latest into c->params and *st, by the client's format;
 * with a kind that has an older layout (k->legacy), its files in DIR itself when there is no latest. */
static ag_status load_latest(const char *dir, const ag_train_client *c, ag_train_state *st, ag_error *err)
{
    char name[64], where[PATHLEN];
    ag_error why = {0};
    const ag_ckpt_kind *k = format_of(c)->kind;
    bool legacy = k->legacy && path3(where, dir, k->files[0], NULL, err) && access(where, F_OK) == 0;
    if (ag_ckpt_pointer(dir, AG_CKPT_LATEST, name, &why) == AG_OK) {
        if (!path3(where, dir, name, NULL, err)) return AG_ERR_ARG;
    } else if (legacy) {
        snprintf(where, sizeof where, "%s", dir);   /* the older layout's checkpoint */
    } else {
        return ag_seterr(err, AG_ERR_ARG, "%s has no checkpoint to resume (%s); start without --resume", dir, why.msg);
    }
    ag_status s = format_of(c)->read(c, where, st, true, err);
    st->prev_hash = ag_weights_hash(c->params);   /* the next checkpoint follows this one */
    if (!st->run_id) st->run_id = ag_new_run_id();
    return s;
}

/* ag_train_load's reading of the directory found (ag_ckpt_read). */
typedef struct {
    const ag_train_client *c;
    long *step;
} load_of;

static ag_status read_weights(const char *where, void *user, ag_error *err)
{
    const load_of *l = user;
    ag_train_state st = {.step = -1};
    ag_status s = format_of(l->c)->read(l->c, where, &st, false, err);
    *l->step = st.step;
    return s;
}

ag_status ag_train_load(const char *dir, const ag_train_client *c, long *step, ag_error *err)
{
    load_of l = {c, step};
    if (format_check(c, "ag_train_load", err)) return AG_ERR_ARG;
    return ag_ckpt_read(dir, AG_CKPT_LATEST, format_of(c)->kind, read_weights, &l, NULL, 0, err);
}

// --- whose a checkpoint is (ckpt_keep.c's rules, with this loop's files) ---

/* The identity of the pair m (weights) and t (state) of the checkpoint in path. */
static ag_status identify_pair(const ag_st_file *m, const ag_st_file *t, const char *path, const void *user,
                               ag_ckpt_id *id, ag_error *err)
{
    (void)user;
    const char *mf = ag_st_meta_get(m, "format"), *tf = ag_st_meta_get(t, "format");
    const char *ms = ag_st_meta_get(m, "step"), *ts = ag_st_meta_get(t, "step"), *bs = ag_st_meta_get(t, "best_step");
    uint64_t step;
    if (!mf || strcmp(mf, FORMAT) || !tf || strcmp(tf, FORMAT) || !ag_u64_parse(ms, &step) || !ts || strcmp(ms, ts) ||
        step > (uint64_t)1 << 52 || ag_st_meta_hex(m, "run_id") != ag_st_meta_hex(t, "run_id"))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not one checkpoint of ag_train_run (format, step, run_id)", path);
    id->run_id = ag_st_meta_hex(t, "run_id");
    id->iter = (long)step;
    id->model_hash = ag_st_meta_hex(t, "weights");
    id->follows = ag_st_meta_hex(t, "follows");
    id->origin = id->follows ? 0 : ag_st_meta_hex(t, "origin");   /* a run's first checkpoint follows none */
    char *end = NULL;
    long best = bs ? strtol(bs, &end, 10) : -1;
    id->best_iter = end && !*end && best >= 0 ? best : -1;
    const char *bl = ag_st_meta_get(t, "best_loss");
    double loss = bl ? strtod(bl, &end) : NAN;
    if (id->best_iter == id->iter && bl && !*end && isfinite(loss)) id->eval = loss;   /* evaluated, the best yet */
    return AG_OK;
}

static ag_status identify(const char *path, ag_ckpt_id *id, ag_error *err)
{
    return ag_ckpt_identify_pair(path, MODEL_FILE, STATE_FILE, identify_pair, NULL, id, err);
}

ag_status ag__loop_outside_runs(const char *dir, const ag_train_client *c, ag_error *err)
{
    if (format_check(c, "ag_train_run", err)) return AG_ERR_ARG;   /* before anything is made */
    return ag_ckpt_outside_runs(dir, format_of(c)->kind, err);
}

/* A warning of the run (opts, an ag_train_opts): to the program's o->warn, else "warning: <what>" on o->log. */
static void warn(void *opts, const char *what)
{
    const ag_train_opts *o = opts;
    if (o->warn) return o->warn(o->warn_user, what);
    if (!o->log) return;
    fprintf(o->log, "warning: %s\n", what);
    fflush(o->log);
}

/* o->overwrite: a new run over the one DIR holds, said; *replaces that run. */
static ag_status start_over(const char *dir, const ag_train_client *c, const ag_train_opts *o, uint64_t *replaces)
{
    char msg[PATHLEN + 200];
    *replaces = ag_ckpt_live_run(dir, format_of(c)->kind);
    snprintf(msg, sizeof msg, "%s already holds a checkpoint; --overwrite: starting a new run over it (%s goes once the "
             "new run's first checkpoint is saved)", dir, *replaces ? "the old run" : "nothing");
    warn((void *)o, msg);
    return AG_OK;
}

void ag__loop_replace(const char *dir, const ag_train_client *c, uint64_t old)
{
    char left[1024], note[1200];
    ag_ckpt_clean(dir, format_of(c)->kind, old, left, sizeof left, note, sizeof note);
}

/* A fresh run's identity; the same command's first checkpoint that a kill left uncommitted
 * removed; refused where DIR holds a run (o->overwrite: started over it). */
static ag_status fresh(const char *dir, const ag_train_client *c, const ag_train_opts *o, ag_train_state *st,
                       uint64_t *replaces, ag_error *err)
{
    char name[64], gone[512], msg[PATHLEN + 700];
    ag_error none = {0};
    st->run_id = ag_new_run_id();
    const ag_train_format *f = format_of(c);
    st->origin = f->origin ? f->origin(c, o->seed) : 0;   /* the client's (char_lm's: its weights' hash) */
    if (!st->origin) st->origin = ag_seed_mix(ag_weights_hash(c->params), o->seed) | 1;   /* the same weights and batches */
    if (ag_ckpt_drop_orphans(dir, f->kind, st->origin, gone, sizeof gone)) {
        snprintf(msg, sizeof msg, "%s: removed %s, the first checkpoint of this same run%s, left uncommitted by a "
                 "kill; starting the run again", dir, gone, o->eval_at_start ? " (its untrained weights)" : "");
        warn((void *)o, msg);
    }
    bool held = ag_ckpt_pointer(dir, AG_CKPT_LATEST, name, &none) == AG_OK || errno != ENOENT;
    if (o->overwrite && (held || ag_ckpt_list(dir, gone, sizeof gone) > 0)) return start_over(dir, c, o, replaces);
    if (o->overwrite || !ag_ckpt_exists(dir, f->kind)) return AG_OK;
    int k = ag_ckpt_list(dir, gone, sizeof gone);
    return ag_seterr(err, AG_ERR_ARG, "%s already holds a checkpoint: --resume continues it, --overwrite starts over, "
                     "or choose another --out%s%s%s", dir, k ? " (found: " : "", gone, k ? ")" : "");
}

/* --resume: a lost latest found again (said as a warning). */
static ag_status recover(const char *dir, const ag_ckpt_kind *k, const ag_train_opts *o, ag_error *err)
{
    char note[1536];
    ag_error why = {0};
    if (ag_ckpt_recover(dir, k, note, sizeof note, &why)) return ag_seterr(err, why.status, "--resume: %s", why.msg);
    if (note[0]) warn((void *)o, note);
    return AG_OK;
}

ag_status ag_train_prepare(const ag_train_opts *o, const ag_ckpt_kind *k, ag_error *err)
{
    struct stat sb;
    ag_status s = ag_ckpt_outside_runs(o->out_dir, k, err);   /* before anything there is locked or read */
    if (s == AG_OK && o->lock && stat(o->out_dir, &sb) == 0 && S_ISDIR(sb.st_mode))
        s = ag_lock_take(o->lock, o->out_dir, err);   /* a DIR not there yet: the loop's to make and lock */
    return s == AG_OK && o->resume ? recover(o->out_dir, k, o, err) : s;
}

/* --resume: a lost latest found again (said as a warning), then DIR/latest read. */
static ag_status resume(const char *dir, const ag_train_client *c, const ag_train_opts *o, ag_train_state *st,
                        ag_error *err)
{
    ag_status s = recover(dir, format_of(c)->kind, o, err);
    if (s) return s;
    if (!o->resumed) return load_latest(dir, c, st, err);
    *st = *o->resumed;   /* the program's read of it, its weights in params: not read again */
    st->prev_hash = ag_weights_hash(c->params);
    if (!st->run_id) st->run_id = ag_new_run_id();
    return AG_OK;
}

ag_status ag__loop_open(const char *dir, const ag_train_client *c, const ag_train_opts *o, ag_train_state *st,
                        uint64_t *replaces, ag_error *err)
{
    *replaces = 0;
    ag_status s = o->resume ? resume(dir, c, o, st, err) : fresh(dir, c, o, st, replaces, err);
    if (s) return s;
    ag_ckpt_tidy(dir, format_of(c)->kind, 0, warn, (void *)o);   /* what a killed run left */
    return AG_OK;
}
