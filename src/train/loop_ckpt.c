/* loop_ckpt.c -- the checkpoint of ag_train_run (train.h): DIR/ckpt-<step>/ holds
 * model.safetensors (the weights, ckpt.c's layout, with the model's name and the step) and
 * state.safetensors (Adam's m and v, the batch stream, the step, the best evaluation, and the
 * hash of the weights they go with). Both are written into ckpt-<step>.tmp/, which is renamed
 * whole; only then does DIR/latest move (ckpt_dir.c), so a kill at any instant leaves latest
 * naming a complete checkpoint. Every step that changes the disk has its fault point. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "train.h"
#include "train_impl.h"

#define PATHLEN 4096
#define MODEL_FILE "model.safetensors"
#define STATE_FILE "state.safetensors"
#define FORMAT "attograd-loop-1"

static const char *const files[] = {MODEL_FILE, STATE_FILE, NULL};

/* dir/name/file in path [PATHLEN] (file NULL: dir/name); false with err set if too long. */
static bool path3(char *path, const char *dir, const char *name, const char *file, ag_error *err)
{
    int n = file ? snprintf(path, PATHLEN, "%s/%s/%s", dir, name, file) : snprintf(path, PATHLEN, "%s/%s", dir, name);
    if (n >= 0 && n < PATHLEN) return true;
    ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    return false;
}

/* Both files of a checkpoint into the directory tmp. */
static ag_status write_files(const char *tmp, const ag_train_client *c, const ag__loop_state *st, ag_error *err)
{
    char path[PATHLEN], step[32], rs[20], ri[20], hash[20], best[40], best_step[32];
    snprintf(step, sizeof step, "%ld", st->step);
    ag_hex64_format(rs, sizeof rs, st->rng.state);
    ag_hex64_format(ri, sizeof ri, st->rng.inc);
    ag_hex64_format(hash, sizeof hash, ag_weights_hash(c->params));
    snprintf(best, sizeof best, "%.17g", st->best_loss);
    snprintf(best_step, sizeof best_step, "%ld", st->best_step);
    const ag_st_meta model[] = {{"format", FORMAT}, {"model", c->name}, {"step", step}};
    const ag_st_meta state[] = {{"format", FORMAT}, {"step", step}, {"rng_state", rs}, {"rng_inc", ri},
                                {"weights", hash}, {"best_loss", best}, {"best_step", best_step}};
    if (!path3(path, tmp, MODEL_FILE, NULL, err)) return AG_ERR_ARG;
    ag_status s = ag_ckpt_write_weights(path, c->params, model, 3, err);
    if (s == AG_OK && !path3(path, tmp, STATE_FILE, NULL, err)) return AG_ERR_ARG;
    if (s == AG_OK) s = ag_ckpt_write_moments(path, c->params, state, 7, err);
    return s;
}

/* DIR/<which>'s name in name [64], or "" when there is none. */
static void pointer_or_none(const char *dir, const char *which, char *name)
{
    ag_error ignored = {0};
    if (ag_ckpt_pointer(dir, which, name, &ignored)) name[0] = '\0';
}

/* ckpt-<step>.tmp made afresh, the files written into it, renamed to ckpt-<step> (a leftover of
 * that name, which neither latest nor best can name, since they are older, goes first). */
static ag_status write_dir(const char *dir, const char *name, const ag_train_client *c, const ag__loop_state *st,
                           ag_error *err)
{
    char final[PATHLEN], tmp[PATHLEN + 8];
    if (!path3(final, dir, name, NULL, err)) return AG_ERR_ARG;
    snprintf(tmp, sizeof tmp, "%s.tmp", final);
    ag_ckpt_remove_dir(tmp, files);   /* a killed save's leftover */
    ag_fault("mkdir", tmp);
    if (mkdir(tmp, 0777) != 0) return ag_seterr(err, AG_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    ag_status s = write_files(tmp, c, st, err);
    if (s == AG_OK) {
        ag_ckpt_remove_dir(final, files);
        ag_fault("rename", final);
        if (rename(tmp, final) != 0) s = ag_seterr(err, AG_ERR_IO, "%s: cannot rename %s to it: %s", final, tmp,
                                                   strerror(errno));
    }
    if (s) ag_ckpt_remove_dir(tmp, files);
    return s;
}

ag_status ag__loop_save(const char *dir, const ag_train_client *c, const ag__loop_state *st, bool is_best,
                        char *name, ag_error *err)
{
    char live[64], best[64];
    snprintf(name, 64, "ckpt-%08ld", st->step);
    if (ag_ckpt_check_finite(c->params, name, err)) return AG_ERR_NONFINITE;   /* the last good one stays */
    pointer_or_none(dir, AG_CKPT_LATEST, live);
    pointer_or_none(dir, AG_CKPT_BEST, best);
    ag_status s = write_dir(dir, name, c, st, err);
    if (s == AG_OK) s = ag_fsync_dir(dir, err);
    bool committed = false, moved = false;
    if (s == AG_OK) s = ag_ckpt_point(dir, AG_CKPT_LATEST, name, &committed, err);
    if (s == AG_OK && is_best) s = ag_ckpt_point(dir, AG_CKPT_BEST, name, &moved, err);
    if (!committed) return s;
    const char *now_best = moved ? name : best;
    const char *was[] = {live, best};
    for (int i = 0; i < 2; i++)   /* the checkpoints nothing names any more */
        if (was[i][0] && strcmp(was[i], name) != 0 && strcmp(was[i], now_best) != 0 && (i == 0 || strcmp(best, live)))
            ag_ckpt_remove(dir, was[i], files);
    return s;
}

/* What a killed run left in DIR (it is locked: no other run writes there): the temporary files
 * of latest and best, ckpt-N.tmp directories, and the ckpt-N that neither latest nor best names
 * (a kill after a rename and before its commit, or before the old one's removal). Only our
 * own files go: a directory that holds a user's file stays. */
void ag__loop_sweep(const char *dir)
{
    char live[64], best[64], path[PATHLEN];
    pointer_or_none(dir, AG_CKPT_LATEST, live);
    pointer_or_none(dir, AG_CKPT_BEST, best);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        char base[64];
        snprintf(base, sizeof base, "%.*s", (int)strcspn(e->d_name, "."), e->d_name);
        bool ptr_tmp = !strncmp(e->d_name, "latest.tmp.", 11) || !strncmp(e->d_name, "best.tmp.", 9);
        bool ckpt = ag_ckpt_name_ok(base) && (!strcmp(e->d_name + strlen(base), ".tmp") ||
                                              (!e->d_name[strlen(base)] && strcmp(base, live) && strcmp(base, best)));
        if (!(ptr_tmp || ckpt) || snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
        if (ptr_tmp) unlink(path);
        else ag_ckpt_remove_dir(path, files);
    }
    if (d) closedir(d);
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

/* The state file's numbers into st; hash, the weights it goes with. */
static ag_status read_state(const ag_st_file *f, const char *path, ag__loop_state *st, uint64_t *hash, ag_error *err)
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
    return AG_OK;
}

/* model.safetensors of DIR/name into c->params; its step in *step. */
static ag_status load_model(const char *dir, const char *name, const ag_train_client *c, long *step, ag_error *err)
{
    char path[PATHLEN];
    if (!path3(path, dir, name, MODEL_FILE, err)) return AG_ERR_ARG;
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

ag_status ag__loop_load(const char *dir, const ag_train_client *c, ag__loop_state *st, ag_error *err)
{
    char name[64], path[PATHLEN];
    ag_error why = {0};
    if (ag_ckpt_pointer(dir, AG_CKPT_LATEST, name, &why))
        return ag_seterr(err, AG_ERR_ARG, "%s has no checkpoint to resume (%s); start without --resume", dir, why.msg);
    long model_step = -1;
    uint64_t hash = 0;
    ag_status s = load_model(dir, name, c, &model_step, err);
    if (s || !path3(path, dir, name, STATE_FILE, err)) return s ? s : AG_ERR_ARG;
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

ag_status ag_train_load(const char *dir, const ag_train_client *c, long *step, ag_error *err)
{
    char name[64];
    ag_status s = ag_ckpt_pointer(dir, AG_CKPT_LATEST, name, err);
    return s ? s : load_model(dir, name, c, step, err);
}
