/* ckpt_keep.c -- whose the checkpoints in a run directory are, for any program's checkpoints
 * (train.h, "whose checkpoints a run directory holds"): what a train may remove of them
 * (ag_ckpt_clean: its own superseded ones, nothing else), a lost latest found again
 * (ag_ckpt_recover), and run directories kept apart (ag_ckpt_outside_runs: no --out inside one,
 * so that no train takes another run apart). Moved out of char_lm (issue 31): what a
 * checkpoint holds and how its identity is read is the program's ag_ckpt_kind. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "train.h"

#define PATHLEN 4096

typedef char ckpt_name[64];

static int newest_first(const void *a, const void *b) { return strcmp((const char *)b, (const char *)a); }

/* The ckpt-N directories in dir (not links, not files), newest name first, in *out (malloc'd;
 * NULL when there are none); returns how many. */
static int ckpt_dirs(const char *dir, ckpt_name **out)
{
    *out = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATHLEN];
        struct stat sb;
        if (!ag_ckpt_name_ok(e->d_name) || !ag_path_join(path, sizeof path, dir, e->d_name) ||
            lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (n == cap) {
            ckpt_name *more = realloc(*out, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *more);
            if (!more) break;
            *out = more;
        }
        snprintf((*out)[n++], sizeof(ckpt_name), "%.63s", e->d_name);
    }
    closedir(d);
    if (n) qsort(*out, (size_t)n, sizeof **out, newest_first);
    return n;
}

/* Appends ", what" (or "what" first) to buf [n]; "..." once it is full. */
static void add_name(char *buf, size_t n, const char *what)
{
    size_t len = strlen(buf);
    if (len + 4 >= n) return;
    int w = snprintf(buf + len, n - len, "%s%s", len ? ", " : "", what);
    if (w < 0 || (size_t)w >= n - len) snprintf(buf + (n > 4 ? n - 4 : 0), n > 4 ? 4 : n, "...");
}

int ag_ckpt_list(const char *dir, char *buf, size_t n)
{
    ckpt_name *names;
    int k = ckpt_dirs(dir, &names);
    buf[0] = '\0';
    for (int i = 0; i < k; i++) add_name(buf, n, names[i]);
    free(names);
    return k;
}

bool ag_ckpt_exists(const char *dir, const ag_ckpt_kind *k)
{
    char path[PATHLEN], found[64];
    struct stat sb;
    return (ag_path_join(path, sizeof path, dir, AG_CKPT_LATEST) && lstat(path, &sb) == 0) ||
           (k->legacy && ag_path_join(path, sizeof path, dir, k->files[0]) && lstat(path, &sb) == 0) ||
           ag_ckpt_list(dir, found, sizeof found) > 0;
}

bool ag_ckpt_superseded(const ag_ckpt_id *c, uint64_t run, long iter, uint64_t prev)
{
    return run != 0 && c->run_id == run && (c->iter <= iter || (prev != 0 && c->follows == prev));
}

// --- what a train removes ---

/* The checkpoint DIR/name's identity, in id; false when it is not a whole checkpoint. */
static bool identify(const ag_ckpt_kind *k, const char *dir, const char *name, ag_ckpt_id *id)
{
    char path[PATHLEN];
    ag_error ignored = {0};
    return name[0] && ag_path_join(path, sizeof path, dir, name) && k->identify(path, id, &ignored) == AG_OK;
}

/* DIR/name is a whole checkpoint. */
static bool identify_ok(const ag_ckpt_kind *k, const char *dir, const char *name)
{
    ag_ckpt_id id;
    return identify(k, dir, name, &id);
}

// --- the best checkpoint, from the train state (issue 35) ---

/* The run's best checkpoint among names [n], in best [64] ("" when none is known): the live
 * run's at the live train state's best_iter (one with a saved evaluation first); failing that
 * (no best_iter, or its checkpoint gone) the one of the run with the lowest saved evaluation.
 * lowest [64]: the latter, whatever best_iter says; neither is ever removed. */
static void find_best(const ag_ckpt_kind *k, const char *dir, const ag_ckpt_id *lid, const ckpt_name *names, int n,
                      char *best, char *lowest)
{
    double low = INFINITY;
    bool at_iter_evaluated = false;
    best[0] = lowest[0] = '\0';
    for (int i = 0; i < n && lid->run_id; i++) {
        ag_ckpt_id id;
        if (!identify(k, dir, names[i], &id) || id.run_id != lid->run_id) continue;
        bool evaluated = !isnan(id.eval);
        if (evaluated && id.eval < low) {
            low = id.eval;
            snprintf(lowest, sizeof(ckpt_name), "%s", names[i]);
        }
        if (lid->best_iter >= 0 && id.iter == lid->best_iter && (!best[0] || (evaluated && !at_iter_evaluated))) {
            snprintf(best, sizeof(ckpt_name), "%s", names[i]);
            at_iter_evaluated = evaluated;
        }
    }
    if (!best[0]) snprintf(best, sizeof(ckpt_name), "%s", lowest);
}

/* What DIR/best is when it does not name a checkpoint (why [96]); false when it does. */
static bool best_is_bad(const char *dir, char *why)
{
    char name[64], path[PATHLEN];
    struct stat sb;
    ag_error e = {0};
    if (ag_ckpt_pointer(dir, AG_CKPT_BEST, name, &e) == AG_OK) return false;
    if (!ag_path_join(path, sizeof path, dir, AG_CKPT_BEST) || lstat(path, &sb) != 0) snprintf(why, 96, "was missing");
    else if (S_ISLNK(sb.st_mode)) snprintf(why, 96, "was a symbolic link");
    else if (S_ISDIR(sb.st_mode)) snprintf(why, 96, "was a directory");
    else if (!S_ISREG(sb.st_mode)) snprintf(why, 96, "was not a regular file");
    else snprintf(why, 96, "did not name a checkpoint");
    return true;
}

bool ag_ckpt_run_best(const char *dir, const ag_ckpt_kind *k, char *name, char *why)
{
    ckpt_name live, best, lowest, *names;
    ag_ckpt_id lid = {.best_iter = -1};
    ag_error ignored = {0};
    name[0] = why[0] = '\0';
    if (ag_ckpt_pointer(dir, AG_CKPT_LATEST, live, &ignored) || !identify(k, dir, live, &lid)) return false;
    int n = ckpt_dirs(dir, &names);
    find_best(k, dir, &lid, names, n, name, lowest);
    free(names);
    if (!name[0] || best_is_bad(dir, why)) return name[0] != '\0';
    ag_error_clear(&ignored);
    bool named = ag_ckpt_pointer(dir, AG_CKPT_BEST, best, &ignored) == AG_OK;
    bool lag = named && strcmp(name, live) == 0 && identify_ok(k, dir, best);   /* as point_best: no news */
    if (named && strcmp(best, name) != 0 && !lag) snprintf(why, 96, "named %s, not the best", best);
    return true;
}

/* A directory planted at DIR/best (no file can replace it) removed when empty, else moved aside, to DIR/best.aside.<pid>,
 * its name in aside [PATHLEN] ("" when nothing was moved): nothing of the user's is removed. */
static void move_best_aside(const char *dir, char *aside)
{
    char path[PATHLEN];
    struct stat sb;
    aside[0] = '\0';
    if (!ag_path_join(path, sizeof path, dir, AG_CKPT_BEST) || lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
        rmdir(path) == 0)   /* an empty one holds nothing */
        return;
    if (snprintf(aside, PATHLEN, "%s.aside.%ld", path, (long)getpid()) >= PATHLEN || rename(path, aside) != 0)
        aside[0] = '\0';
}

/* DIR/best := want, the run's best. A lag after a kill between the commits of latest and best
 * (a save: the live one is the best, best names a whole older one) is mended silently;
 * anything else is said in note [nn]. */
static void point_best(const ag_ckpt_kind *k, const char *dir, const char *live, const char *want, const char *best,
                       char *note, size_t nn)
{
    char why[96] = "", aside[PATHLEN];
    bool lag = best[0] && strcmp(want, live) == 0 && identify_ok(k, dir, best);
    if (!best_is_bad(dir, why) && !lag) snprintf(why, sizeof why, "named %s, not the best", best);
    move_best_aside(dir, aside);
    bool committed = false;
    ag_error e = {0};
    (void)ag_ckpt_point(dir, AG_CKPT_BEST, want, &committed, &e);
    if (lag && committed) return;
    if (!committed)
        snprintf(note, nn, "%s/%s %s, and it cannot be written to name %s, the run's best: %s", dir, AG_CKPT_BEST, why,
                 want, e.msg);
    else
        snprintf(note, nn, "%s/%s %s: it names %s again, the run's best evaluation (from the train state)%s%s", dir,
                 AG_CKPT_BEST, why, want, aside[0] ? "; the directory there was moved to " : "", aside);
}

/* DIR/best made to name the run's best (find_best), when it does not. Without a best known, a
 * best that names no directory is removed. */
static void mend_best(const ag_ckpt_kind *k, const char *dir, const char *live, const char *want, char *best,
                      char *note, size_t nn)
{
    if (want[0]) {
        if (strcmp(best, want) != 0) point_best(k, dir, live, want, best, note, nn);
        snprintf(best, sizeof(ckpt_name), "%s", want);
        return;
    }
    char path[PATHLEN];
    struct stat sb;
    if (best[0] && ag_path_join(path, sizeof path, dir, best) && stat(path, &sb) != 0 &&
        ag_path_join(path, sizeof path, dir, AG_CKPT_BEST)) {
        unlink(path);
        best[0] = '\0';
    }
}

/* nm is "<one of names>.tmp.<pid>" (names NULL-terminated; NULL: none). */
static bool tmp_of(const char *nm, const char *const *names)
{
    for (int i = 0; names && names[i]; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(nm, names[i], n) == 0 && strncmp(nm + n, ".tmp.", 5) == 0 && nm[n + 5] &&
            strspn(nm + n + 5, "0123456789") == strlen(nm + n + 5))
            return true;
    }
    return false;
}

/* The known files of a run directory whose "<name>.tmp.<pid>" a killed run may leave: the
 * pointers, a checkpoint's files (the older layout's), what this module writes there (the
 * table, the pictures and scripts, the report) and the program's own. */
static bool our_tmp_file(const ag_ckpt_kind *k, const char *nm)
{
    static const char *const ours[] = {AG_CKPT_LATEST, AG_CKPT_BEST, "metrics.csv", "loss.png", "loss.gp",
                                       "dynamics.csv", "dynamics.png", "dynamics.gp", "report.md", NULL};
    return tmp_of(nm, ours) || tmp_of(nm, k->files) || tmp_of(nm, k->run_files);
}

/* A checkpoint's temporary directory: "ckpt-<iter>[-b].tmp", or ".tmp.<pid>" after it; or one
 * being removed when a kill came: any of those, or a checkpoint's name, and ".del". */
static bool our_tmp_dir(const char *nm)
{
    size_t len = strlen(nm);
    if (len > 4 && len < 64 && strcmp(nm + len - 4, ".del") == 0) {
        char base[64];
        snprintf(base, sizeof base, "%.*s", (int)(len - 4), nm);
        return ag_ckpt_name_ok(base) || our_tmp_dir(base);
    }
    const char *t = strstr(nm, ".tmp");
    if (!t || strncmp(nm, "ckpt-", 5) != 0) return false;
    char base[64];
    snprintf(base, sizeof base, "%.*s", (int)(t - nm), nm);
    return ag_ckpt_name_ok(base) && (!t[4] || (t[4] == '.' && t[5] && strspn(t + 5, "0123456789") == strlen(t + 5)));
}

/* Temporary files and directories of ours, which only a killed run leaves. */
static void remove_temporaries(const ag_ckpt_kind *k, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATHLEN];
        if (!ag_path_join(path, sizeof path, dir, e->d_name)) continue;
        if (our_tmp_file(k, e->d_name)) unlink(path);
        else if (our_tmp_dir(e->d_name)) ag_ckpt_remove(dir, e->d_name, k->files);
    }
    closedir(d);
}

/* The older layout's files at the top of dir (either, after a kill between their removals; the
 * last first), once a committed checkpoint supersedes them. */
static void clean_legacy(const ag_ckpt_kind *k, const char *dir, const ag_ckpt_id *lid, uint64_t also, char *left,
                         size_t n)
{
    for (int i = 1; i >= 0; i--) {
        char path[PATHLEN];
        struct stat sb;
        ag_ckpt_id id = {0};
        if (!ag_path_join(path, sizeof path, dir, k->files[i]) || lstat(path, &sb) != 0) continue;
        if (k->file_id(path, &id) && ((lid->run_id && id.run_id == lid->run_id && id.iter <= lid->iter) ||
                                      (also && id.run_id == also)))
            unlink(path);
        else add_name(left, n, k->files[i]);
    }
}

/* Why DIR/name, a ckpt-N that stays, is not the live run's to remove, in what [128]. */
static void why_left(const char *name, bool whole, bool live, bool same_run, char *what)
{
    snprintf(what, 128, "%s (%s)", name, !whole ? "not a whole checkpoint" : !live ? "no latest to tell whose"
             : same_run ? "this run's, newer than the live one" : "another run's");
}

void ag_ckpt_clean(const char *dir, const ag_ckpt_kind *k, uint64_t also, char *left, size_t n, char *note, size_t nn)
{
    ckpt_name live = "", best = "", want, lowest, *names;
    ag_ckpt_id lid = {.best_iter = -1}, id;
    ag_error ignored = {0};
    left[0] = note[0] = '\0';
    if (ag_ckpt_pointer(dir, AG_CKPT_LATEST, live, &ignored) || !identify(k, dir, live, &lid)) live[0] = '\0';
    ag_error_clear(&ignored);
    if (ag_ckpt_pointer(dir, AG_CKPT_BEST, best, &ignored)) best[0] = '\0';
    char path[PATHLEN];
    if (best[0] && also && identify(k, dir, best, &id) && id.run_id == also &&
        ag_path_join(path, sizeof path, dir, AG_CKPT_BEST)) {
        unlink(path);   /* the best of --overwrite's old run: forgotten first, then removed below */
        best[0] = '\0';
    }
    remove_temporaries(k, dir);
    int m = ckpt_dirs(dir, &names);
    find_best(k, dir, &lid, names, m, want, lowest);
    mend_best(k, dir, live, want, best, note, nn);
    for (int i = 0; i < m; i++) {
        if (!strcmp(names[i], live) || !strcmp(names[i], best) || !strcmp(names[i], lowest)) continue;
        bool whole = identify(k, dir, names[i], &id);
        if (whole && ((live[0] && ag_ckpt_superseded(&id, lid.run_id, lid.iter, lid.model_hash)) ||
                      (also && id.run_id == also))) {
            ag_ckpt_remove(dir, names[i], k->files);
            continue;
        }
        char what[128];
        why_left(names[i], whole, live[0], whole && id.run_id == lid.run_id, what);
        add_name(left, n, what);
    }
    free(names);
    if (live[0] && k->legacy) clean_legacy(k, dir, &lid, also, left, n);
}

void ag_ckpt_tidy(const char *dir, const ag_ckpt_kind *k, uint64_t also, void (*warn)(void *user, const char *line),
                  void *user)
{
    char left[1024], msg[PATHLEN + 1100], note[PATHLEN + 1200];
    ag_ckpt_clean(dir, k, also, left, sizeof left, note, sizeof note);
    if (note[0]) warn(user, note);   /* DIR/best written again */
    if (!left[0]) return;
    snprintf(msg, sizeof msg, "%s: left alone (not this run's to remove): %s", dir, left);
    warn(user, msg);
}

// --- a lost latest ---

/* DIR/<name> exists (a link too). */
static bool has(const char *dir, const char *name)
{
    char path[PATHLEN];
    struct stat sb;
    return ag_path_join(path, sizeof path, dir, name) && lstat(path, &sb) == 0;
}

/* The whole checkpoints of dir [n], named with their iteration and run in found [1024]; the
 * newest in *pick (a tie keeps the name that sorts first: ckpt-N-b), all of one run in *one_run.
 * Returns how many. */
static int whole_ones(const ag_ckpt_kind *k, const char *dir, const ckpt_name *names, int n, char *found, int *pick,
                      bool *one_run)
{
    int whole = 0;
    uint64_t run = 0;
    ag_ckpt_id id, newest = {0};
    *pick = -1;
    *one_run = true;
    for (int i = 0; i < n; i++) {
        if (!identify(k, dir, names[i], &id)) continue;
        char what[128];
        snprintf(what, sizeof what, "%s (iteration %ld, run %016llx)", names[i], id.iter, (unsigned long long)id.run_id);
        add_name(found, 1024, what);
        if (whole++ == 0) run = id.run_id;
        *one_run = *one_run && id.run_id == run;
        if (*pick < 0 || id.iter > newest.iter) {   /* newest name first: a tie keeps ckpt-N-b */
            *pick = i;
            newest = id;
        }
    }
    return whole;
}

ag_status ag_ckpt_recover(const char *dir, const ag_ckpt_kind *k, char *note, size_t n, ag_error *err)
{
    char found[1024] = "";
    note[0] = '\0';
    if (has(dir, AG_CKPT_LATEST) || (k->legacy && has(dir, k->files[0])))
        return AG_OK;   /* nothing lost (a latest that is no good: the loader says why) */
    ckpt_name *names;
    int pick;
    bool one_run;
    int m = ckpt_dirs(dir, &names), whole = whole_ones(k, dir, names, m, found, &pick, &one_run);
    ag_status s = AG_OK;
    bool committed;
    if (whole > 0 && !one_run)
        s = ag_seterr(err, AG_ERR_ARG, "%s has no %s and holds the checkpoints of several runs: %s; write the name of "
                      "the one to continue into %s/%s (echo ckpt-... > %s/%s), then --resume", dir, AG_CKPT_LATEST,
                      found, dir, AG_CKPT_LATEST, dir, AG_CKPT_LATEST);
    else if (whole > 0 && (s = ag_ckpt_point(dir, AG_CKPT_LATEST, names[pick], &committed, err)) == AG_OK)
        snprintf(note, n, "%s/%s was missing: it names %s again, the newest whole checkpoint of the run (found: %s)",
                 dir, AG_CKPT_LATEST, names[pick], found);
    free(names);
    return s;
}

int ag_ckpt_drop_orphans(const char *dir, const ag_ckpt_kind *k, uint64_t origin, char *gone, size_t n)
{
    gone[0] = '\0';
    if (has(dir, AG_CKPT_LATEST) || has(dir, AG_CKPT_BEST) || (k->legacy && has(dir, k->files[0])))
        return 0;   /* a run */
    ckpt_name *names;
    int m = ckpt_dirs(dir, &names), orphans = 0;
    for (int i = 0; i < m; i++) {
        ag_ckpt_id id;
        orphans += identify(k, dir, names[i], &id) && origin != 0 && id.origin == origin;
    }
    for (int i = 0; i < m && orphans == m; i++) {   /* all of them, or none: nothing else of a run is there */
        ag_ckpt_remove(dir, names[i], k->files);
        add_name(gone, n, names[i]);
    }
    free(names);
    return orphans == m ? m : 0;
}

// --- run directories kept apart ---

/* dir is a run directory: it holds a latest, a ckpt-N directory with a weights file, or the
 * older layout's pair; what tells it goes in why [64]. */
static bool is_run_dir(const ag_ckpt_kind *k, const char *dir, char *why)
{
    char p[PATHLEN], q[PATHLEN];
    struct stat sb;
    if (ag_path_join(p, sizeof p, dir, AG_CKPT_LATEST) && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode))
        return snprintf(why, 64, "a %s", AG_CKPT_LATEST) > 0;
    if (k->legacy && ag_path_join(p, sizeof p, dir, k->files[0]) && stat(p, &sb) == 0 &&
        ag_path_join(q, sizeof q, dir, k->files[1]) && stat(q, &sb) == 0)
        return snprintf(why, 64, "%s and %s", k->files[0], k->files[1]) > 0;
    ckpt_name *names;
    int m = ckpt_dirs(dir, &names);
    bool run = false;
    for (int i = 0; i < m && !run; i++)
        run = ag_path_join(p, sizeof p, dir, names[i]) && ag_path_join(q, sizeof q, p, k->files[0]) &&
              stat(q, &sb) == 0 && snprintf(why, 64, "%s", names[i]) > 0;
    free(names);
    return run;
}

/* path without its last component ("/" stays "/", a bare name becomes "."). */
static void up(char *path)
{
    char *slash = strrchr(path, '/');
    if (!slash) strcpy(path, ".");
    else if (slash == path) path[1] = '\0';
    else *slash = '\0';
}

ag_status ag_ckpt_outside_runs(const char *out, const ag_ckpt_kind *k, ag_error *err)
{
    char p[PATHLEN], real[PATH_MAX], why[64];
    if (snprintf(p, sizeof p, "%s", out) >= (int)sizeof p) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", out);
    bool self = true;   /* real is out itself, not the nearest directory above it that exists */
    while (!realpath(p, real)) {
        if (strcmp(p, ".") == 0 || strcmp(p, "/") == 0) return AG_OK;   /* nothing to tell */
        up(p);
        self = false;
    }
    if (self) up(real);
    for (;;) {
        if (is_run_dir(k, real, why))
            return ag_seterr(err, AG_ERR_ARG, "--out %s lies inside the run directory %s (it holds %s): a run directory "
                             "is changed only by its own train; give --out %s to continue that run, or a directory "
                             "outside it", out, real, why, real);
        if (strcmp(real, "/") == 0) return AG_OK;
        up(real);
    }
}

// --- a checkpoint of two safetensors files, identified from their headers ---

uint64_t ag_st_meta_hex(const ag_st_file *f, const char *key)
{
    uint64_t v = 0;
    return ag_hex64_parse(ag_st_meta_get(f, key), &v) ? v : 0;
}

ag_status ag_ckpt_identify_pair(const char *path, const char *model_file, const char *state_file,
                                ag_status (*pair)(const ag_st_file *m, const ag_st_file *t, const char *path,
                                                  const void *user, ag_ckpt_id *id, ag_error *err),
                                const void *user, ag_ckpt_id *id, ag_error *err)
{
    ag_error own = {0};
    if (!err) err = &own;
    memset(id, 0, sizeof *id);
    id->best_iter = -1;
    id->eval = NAN;
    char mp[PATHLEN], tp[PATHLEN];
    if (!ag_path_join(mp, sizeof mp, path, model_file) || !ag_path_join(tp, sizeof tp, path, state_file))
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", path);
    ag_st_file *m = ag_st_load_header(mp, err);
    ag_st_file *t = m ? ag_st_load_header(tp, err) : NULL;
    ag_status s = m && t ? pair(m, t, path, user, id, err) : err->status ? err->status : AG_ERR_IO;
    ag_st_free(t);
    ag_st_free(m);
    return s;
}

uint64_t ag_ckpt_live_run(const char *dir, const ag_ckpt_kind *k)
{
    char live[64], path[PATHLEN];
    ag_error ignored = {0};
    ag_ckpt_id id;
    if (ag_ckpt_pointer(dir, AG_CKPT_LATEST, live, &ignored) || !ag_path_join(path, sizeof path, dir, live)) return 0;
    memset(&id, 0, sizeof id);
    return k->identify(path, &id, &ignored) == AG_OK ? id.run_id : 0;
}
