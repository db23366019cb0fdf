/* ckpt_save.c -- the checkpoint unit's protocol, written once for any program's checkpoints
 * (an ag_ckpt_kind; see train.h), issue 31: a save (the files into DIR/ckpt-N.tmp/, renamed
 * whole, DIR/latest moved, which commits it, then DIR/best, then what it replaced removed; all
 * into the directory the run locked, wherever it is now) and a reader's resolution (the
 * directory that holds a checkpoint's files: what DIR/latest or DIR/best names, the older
 * layout, a ckpt-N given directly; read again when a train moved latest on meanwhile).
 * char_lm's checkpoint.c and the trainer's loop_ckpt.c each had their copy; every step, fault
 * point and message is as it was. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "train.h"
#include "train_impl.h"

#define PATHLEN 4096
#define TMPLEN (PATHLEN + 32)

/* DIR/<which>'s name in name [64], or "" when there is none or it names no checkpoint. */
static void pointer_or_none(const char *dir, const char *which, char *name)
{
    ag_error ignored = {0};
    if (ag_ckpt_pointer(dir, which, name, &ignored)) name[0] = '\0';
}

/* DIR/name is a checkpoint directory that the save o may clear away: one of its run's that it
 * supersedes (ag_ckpt_superseded); a stale link too. */
static bool ours_to_replace(const char *dir, const char *name, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o)
{
    char path[PATHLEN];
    struct stat sb;
    ag_ckpt_id id;
    ag_error ignored = {0};
    if (!ag_path_join(path, sizeof path, dir, name) || lstat(path, &sb) != 0) return false;
    if (S_ISLNK(sb.st_mode)) return true;
    return k->identify(path, &id, &ignored) == AG_OK && ag_ckpt_superseded(&id, o->run_id, o->iter, o->prev);
}

/* DIR/name is the checkpoint of the run's best evaluation (o->best_iter): kept whatever DIR/best
 * says (a best deleted or spoiled while the run goes on, issue 35). */
static bool runs_best(const char *dir, const char *name, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o)
{
    char path[PATHLEN];
    ag_ckpt_id id;
    ag_error ignored = {0};
    return o->best_iter >= 0 && ag_path_join(path, sizeof path, dir, name) &&
           k->identify(path, &id, &ignored) == AG_OK && id.run_id == o->run_id && id.iter == o->best_iter;
}

/* The new checkpoint's directory name, in name [64], and its path in final [PATHLEN]:
 * ckpt-<iter>, cleared first when it is the run's to replace. With o->second_name, ckpt-<iter>-b
 * when ckpt-<iter> is the live or the best one (a new run over an old one, saving the same
 * iteration) or not the run's to clear away (another run's checkpoint, a directory holding a
 * user's files, a file). */
static ag_status choose_name(const char *dir, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o, const char *live,
                             const char *best, char *name, char *final, ag_error *err)
{
    long iter = o->iter;
    for (int b = 0; b < (o->second_name ? 2 : 1); b++) {
        snprintf(name, 64, b ? "ckpt-%08ld-b" : "ckpt-%08ld", iter);
        if (!ag_path_join(final, PATHLEN, dir, name)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
        if (o->second_name && (strcmp(name, live) == 0 || strcmp(name, best) == 0)) continue;
        if (ours_to_replace(dir, name, k, o)) ag_ckpt_remove_dir(final, k->files);
        struct stat sb;
        if (lstat(final, &sb) != 0) return AG_OK;
    }
    if (!o->second_name)
        return ag_seterr(err, AG_ERR_IO, "%s: cannot save step %ld there: it is not this run's to remove (another "
                         "run's checkpoint, or a directory of yours); move it away and --resume", final, iter);
    return ag_seterr(err, AG_ERR_IO, "%s: cannot save iteration %ld: ckpt-%08ld and ckpt-%08ld-b are taken (%s is "
                     "not this run's to remove); move it away and --resume", dir, iter, iter, iter, final);
}

/* Every file into a fresh temporary directory, final + ".tmp" (or + ".tmp.<pid>" when a
 * directory holding files of a user's has that name), its path in tmp [TMPLEN]. */
static ag_status write_tmp(const char *final, char *tmp, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o,
                           ag_error *err)
{
    for (int b = 0; b < 2; b++) {
        int w = b ? snprintf(tmp, TMPLEN, "%s.tmp.%ld", final, (long)getpid()) : snprintf(tmp, TMPLEN, "%s.tmp", final);
        if (w < 0 || w >= TMPLEN) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", final);
        ag_ckpt_remove_dir(tmp, k->files);   /* a leftover of a killed run */
        ag_fault("mkdir", tmp);
        if (mkdir(tmp, 0777) == 0) break;
        if (errno != EEXIST || b == 1) return ag_seterr(err, AG_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    }
    return o->write(tmp, o->user, err);
}

/* After the commit: the checkpoints that were live and best, if the run's and superseded and
 * neither is still named (name is the new one, best the best now); and the older layout's
 * files in DIR itself (k->legacy), if the run's. */
static void remove_replaced(const char *dir, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o, const char *live,
                            const char *old_best, const char *name, const char *best)
{
    const char *was[] = {live, old_best};
    for (int i = 0; i < 2; i++)
        if (was[i][0] && strcmp(was[i], name) != 0 && strcmp(was[i], best) != 0 &&
            (i == 0 || strcmp(was[i], live) != 0) && ours_to_replace(dir, was[i], k, o) && !runs_best(dir, was[i], k, o))
            ag_ckpt_remove(dir, was[i], k->files);
    ag_ckpt_id id;
    ag_error ignored = {0};
    if (!k->legacy || k->identify(dir, &id, &ignored) || !ag_ckpt_superseded(&id, o->run_id, o->iter, o->prev)) return;
    for (int i = 1; i >= 0; i--) {
        char path[PATHLEN];
        if (!ag_path_join(path, sizeof path, dir, k->files[i])) continue;
        ag_fault("remove", path);
        unlink(path);
    }
}

/* ag_ckpt_save into the directory dir (the locked one, through its path "/proc/self/fd/N"). */
static ag_status save_unit(const char *dir, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o, char *name,
                           bool *committed, ag_error *err)
{
    char live[64], best[64], tmp[TMPLEN] = "", final[PATHLEN] = "";
    *committed = false;
    pointer_or_none(dir, AG_CKPT_LATEST, live);   /* none (or unreadable: replaced now) */
    pointer_or_none(dir, AG_CKPT_BEST, best);
    ag_status s = choose_name(dir, k, o, live, best, name, final, err);
    if (s == AG_OK && (s = write_tmp(final, tmp, k, o, err)) == AG_OK) {
        ag_fault("rename", final);
        if (rename(tmp, final) != 0) s = ag_seterr(err, AG_ERR_IO, "%s: cannot rename %s to it: %s", final, tmp,
                                                   strerror(errno));
    }
    if (s) {
        ag_ckpt_remove_dir(tmp, k->files);
        return s;
    }
    if (o->sync_point) ag_fault("fsync dir", dir);
    s = ag_fsync_dir(dir, err);
    if (s == AG_OK) s = ag_ckpt_point(dir, AG_CKPT_LATEST, name, committed, err);
    if (!*committed) {
        if (strcmp(name, live) != 0) ag_ckpt_remove_dir(final, k->files);   /* nothing names it */
        return s;
    }
    bool best_moved = false;   /* best follows latest: a kill between them, ag_ckpt_clean mends */
    if (s == AG_OK && o->is_best) s = ag_ckpt_point(dir, AG_CKPT_BEST, name, &best_moved, err);
    remove_replaced(dir, k, o, live, best, name, best_moved ? name : best);
    return s;
}

/* err's message with the path via written as dir, as the user knows it, wherever it appears. */
static void as_named(ag_error *err, const char *via, const char *dir)
{
    for (char *at = strstr(err->msg, via); at; at = strstr(at + strlen(dir), via)) {
        if (strlen(err->msg) - strlen(via) + strlen(dir) >= sizeof err->msg) return;
        char rest[sizeof err->msg];
        snprintf(rest, sizeof rest, "%s", at + strlen(via));
        snprintf(at, sizeof err->msg - (size_t)(at - err->msg), "%s%s", dir, rest);
    }
}

ag_status ag_ckpt_save(const char *dir, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o, char *name,
                       bool *committed, ag_error *err)
{
    char via[64] = "", at[PATHLEN];
    const char *what = o->count ? o->count : "iteration";
    if (o->lock) ag_lock_via(o->lock, via, sizeof via);   /* the locked directory, even if moved meanwhile */
    ag_status s = save_unit(via[0] ? via : dir, k, o, name, committed, err);
    if (s && via[0]) as_named(err, via, dir);
    if (s || !o->lock || !ag_lock_moved(o->lock, dir, at, sizeof at)) return s;
    if (!via[0])
        return ag_seterr(err, AG_ERR_IO, "%s is no longer the run directory this train locked (moved or replaced "
                         "while it ran): stopped after %s %ld", dir, what, o->iter);
    return ag_seterr(err, AG_ERR_IO, "%s is no longer the run directory this train locked: it was moved to %s while "
                     "the run went on; the checkpoint of %s %ld is saved there, nothing written into the new %s; "
                     "stopped (continue with --out %s --resume)", dir, at[0] ? at : "(unknown)", what, o->iter, dir,
                     at[0] ? at : "<its new path>");
}

// --- reading: the directory of a checkpoint's files ---

/* Without DIR/latest: DIR itself when it holds the weights file (the older layout, or a ckpt-N
 * given directly) or is no directory at all (the loader then says what is wrong); otherwise
 * an error that says what DIR does hold, never just "cannot open". */
static ag_status no_latest(const char *dir, const ag_ckpt_kind *k, char *buf, size_t n, ag_error *err)
{
    char path[PATHLEN], found[512];
    struct stat sb;
    if (!ag_path_join(path, sizeof path, dir, k->files[0])) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    if (lstat(path, &sb) == 0 || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        if (snprintf(buf, n, "%s", dir) >= (int)n) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
        return AG_OK;
    }
    if (ag_ckpt_list(dir, found, sizeof found) == 0)
        return ag_seterr(err, AG_ERR_IO, "%s holds no checkpoint (no %s, no ckpt-N directory, no %s)", dir,
                         AG_CKPT_LATEST, k->files[0]);
    if (!k->pick_flag)
        return ag_seterr(err, AG_ERR_FORMAT, "%s has no %s but holds %s: `%s train --resume` makes the newest whole "
                         "one live again", dir, AG_CKPT_LATEST, found, ag__train_program());
    return ag_seterr(err, AG_ERR_FORMAT, "%s has no %s but holds %s: `%s train --resume` makes the newest whole one "
                     "live again, or give %s %s/<one of them>", dir, AG_CKPT_LATEST, found, ag__train_program(),
                     k->pick_flag, dir);
}

/* DIR/best for a reader: the run's best found from the live checkpoint, as the next train
 * names it again (issue 35); its path in buf [n], what was wrong with DIR/best in note [nn]. */
static bool best_from_state(const char *dir, const ag_ckpt_kind *k, char *buf, size_t n, char *note, size_t nn)
{
    char name[64], why[96];
    if (!ag_ckpt_run_best(dir, k, name, why) || !ag_path_join(buf, n, dir, name)) return false;
    if (note && why[0])
        snprintf(note, nn, "%s/%s %s: reading %s, the run's best evaluation (from the train state); the next train "
                 "writes %s/%s again", dir, AG_CKPT_BEST, why, name, dir, AG_CKPT_BEST);
    return true;
}

ag_status ag_ckpt_resolve(const char *dir, const char *which, const ag_ckpt_kind *k, char *buf, size_t n, char *note,
                          size_t nn, ag_error *err)
{
    char name[64];
    ag_error why = {0};
    bool best = strcmp(which, AG_CKPT_BEST) == 0;
    if (note) note[0] = '\0';
    if (best && best_from_state(dir, k, buf, n, note, nn)) return AG_OK;
    if (ag_ckpt_pointer(dir, which, name, &why)) {
        bool none = why.status == AG_ERR_IO && (errno == ENOENT || errno == ENOTDIR);
        if (none && best)
            return ag_seterr(err, AG_ERR_IO, "%s has no %s checkpoint (%s/%s is missing: no evaluation saved yet, "
                             "or a run directory older than best checkpoints); --from latest reads the latest",
                             dir, AG_CKPT_BEST, dir, AG_CKPT_BEST);
        if (none) return no_latest(dir, k, buf, n, err);
        return ag_seterr(err, why.status, "%s", why.msg);
    }
    if (!ag_path_join(buf, n, dir, name)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    struct stat sb;
    bool found = stat(buf, &sb) == 0;
    if (!found || !S_ISDIR(sb.st_mode))
        return ag_seterr(err, AG_ERR_FORMAT, "%s/%s names %s, which is %s", dir, which, name,
                         found ? "not a directory" : "missing");
    return AG_OK;
}

/* A reader does not hold the run's lock: between resolving latest and opening the files, the
 * writer may commit a newer checkpoint and remove this one. */
ag_status ag_ckpt_read(const char *dir, const char *which, const ag_ckpt_kind *k,
                       ag_status (*read)(const char *where, void *user, ag_error *err), void *user, char *note,
                       size_t nn, ag_error *err)
{
    char where[PATHLEN], again[PATHLEN];
    for (int attempt = 0;; attempt++) {
        ag_error why = {0};
        ag_status st = ag_ckpt_resolve(dir, which, k, where, sizeof where, note, nn, &why);
        if (st == AG_OK) st = read(where, user, &why);
        ag_error ignored = {0};
        if (st == AG_OK || attempt == 4 ||
            ag_ckpt_resolve(dir, which, k, again, sizeof again, NULL, 0, &ignored) || strcmp(where, again) == 0)
            return st ? ag_seterr(err, st, "%s", why.msg) : AG_OK;
    }
}
