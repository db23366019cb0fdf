/* ckpt_dir.c -- whose the checkpoints in a run directory are (checkpoint.h, issue 19): what a
 * train may remove of them (lm_ckpt_clean: its own superseded ones, nothing else), a lost
 * latest found again (lm_ckpt_recover), and run directories kept apart (lm_ckpt_outside_runs:
 * no --out inside one, so that no train takes another run apart). */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint.h"

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

int lm_ckpt_list(const char *dir, char *buf, size_t n)
{
    ckpt_name *names;
    int k = ckpt_dirs(dir, &names);
    buf[0] = '\0';
    for (int i = 0; i < k; i++) add_name(buf, n, names[i]);
    free(names);
    return k;
}

// --- what a train removes ---

/* The checkpoint DIR/name's identity, in id; false when it is not a whole checkpoint. */
static bool identify(const char *dir, const char *name, lm_ckpt_id *id)
{
    char path[PATHLEN];
    ag_error ignored = {0};
    return name[0] && ag_path_join(path, sizeof path, dir, name) && lm_ckpt_identify(path, id, &ignored) == AG_OK;
}

/* DIR/name is a whole checkpoint. */
static bool identify_ok(const char *dir, const char *name)
{
    lm_ckpt_id id;
    return identify(dir, name, &id);
}

// --- the best checkpoint, from the train state (issue 35) ---

/* The run's best checkpoint among names [k], in best [64] ("" when none is known): the live
 * run's at the live train state's best_iter (one with a saved evaluation first); failing that
 * (no best_iter, or its checkpoint gone) the one of the run with the lowest saved evaluation.
 * lowest [64]: the latter, whatever best_iter says; neither is ever removed. */
static void find_best(const char *dir, const lm_ckpt_id *lid, const ckpt_name *names, int k, char *best, char *lowest)
{
    double low = INFINITY;
    bool at_iter_evaluated = false;
    best[0] = lowest[0] = '\0';
    for (int i = 0; i < k && lid->run_id; i++) {
        lm_ckpt_id id;
        if (!identify(dir, names[i], &id) || id.run_id != lid->run_id) continue;
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
    if (ag_ckpt_pointer(dir, LM_BEST, name, &e) == AG_OK) return false;
    if (!ag_path_join(path, sizeof path, dir, LM_BEST) || lstat(path, &sb) != 0) snprintf(why, 96, "was missing");
    else if (S_ISLNK(sb.st_mode)) snprintf(why, 96, "was a symbolic link");
    else if (S_ISDIR(sb.st_mode)) snprintf(why, 96, "was a directory");
    else if (!S_ISREG(sb.st_mode)) snprintf(why, 96, "was not a regular file");
    else snprintf(why, 96, "did not name a checkpoint");
    return true;
}

bool lm_ckpt_run_best(const char *dir, char *name, char *why)
{
    ckpt_name live, best, lowest, *names;
    lm_ckpt_id lid = {.best_iter = -1};
    ag_error ignored = {0};
    name[0] = why[0] = '\0';
    if (ag_ckpt_pointer(dir, LM_LATEST, live, &ignored) || !identify(dir, live, &lid)) return false;
    int k = ckpt_dirs(dir, &names);
    find_best(dir, &lid, names, k, name, lowest);
    free(names);
    if (!name[0] || best_is_bad(dir, why)) return name[0] != '\0';
    ag_error_clear(&ignored);
    bool named = ag_ckpt_pointer(dir, LM_BEST, best, &ignored) == AG_OK;
    bool lag = named && strcmp(name, live) == 0 && identify_ok(dir, best);   /* as point_best: no news */
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
    if (!ag_path_join(path, sizeof path, dir, LM_BEST) || lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode) ||
        rmdir(path) == 0)   /* an empty one holds nothing */
        return;
    if (snprintf(aside, PATHLEN, "%s.aside.%ld", path, (long)getpid()) >= PATHLEN || rename(path, aside) != 0)
        aside[0] = '\0';
}

/* DIR/best := want, the run's best. A lag after a kill between the commits of latest and best
 * (lm_ckpt_save: the live one is the best, best names a whole older one) is mended silently;
 * anything else is said in note [nn]. */
static void point_best(const char *dir, const char *live, const char *want, const char *best, char *note, size_t nn)
{
    char why[96] = "", aside[PATHLEN];
    bool lag = best[0] && strcmp(want, live) == 0 && identify_ok(dir, best);
    if (!best_is_bad(dir, why) && !lag) snprintf(why, sizeof why, "named %s, not the best", best);
    move_best_aside(dir, aside);
    bool committed = false;
    ag_error e = {0};
    (void)ag_ckpt_point(dir, LM_BEST, want, &committed, &e);
    if (lag && committed) return;
    if (!committed)
        snprintf(note, nn, "%s/%s %s, and it cannot be written to name %s, the run's best: %s", dir, LM_BEST, why, want,
                 e.msg);
    else
        snprintf(note, nn, "%s/%s %s: it names %s again, the run's best evaluation (from the train state)%s%s", dir,
                 LM_BEST, why, want, aside[0] ? "; the directory there was moved to " : "", aside);
}

/* DIR/best made to name the run's best (find_best), when it does not. Without a best known, a
 * best that names no directory is removed. */
static void mend_best(const char *dir, const char *live, const char *want, char *best, char *note, size_t nn)
{
    if (want[0]) {
        if (strcmp(best, want) != 0) point_best(dir, live, want, best, note, nn);
        snprintf(best, sizeof(ckpt_name), "%s", want);
        return;
    }
    char path[PATHLEN];
    struct stat sb;
    if (best[0] && ag_path_join(path, sizeof path, dir, best) && stat(path, &sb) != 0 &&
        ag_path_join(path, sizeof path, dir, LM_BEST)) {
        unlink(path);
        best[0] = '\0';
    }
}

/* The known files of a run directory whose "<name>.tmp.<pid>" a killed run may leave (every
 * picture, script and table a train or --lr-find writes there, and the report). */
static bool our_tmp_file(const char *nm)
{
    static const char *const names[] = {LM_LATEST, LM_BEST, LM_MODEL_FILE, LM_STATE_FILE, "metrics.csv", "loss.png",
                                        "loss.gp", "attn.png", "attn.gp", "dynamics.csv", "dynamics.png",
                                        "dynamics.gp", "activations.csv", "activations.png",
                                        "activations.gp", "report.md", "lr_find.png", "lr_find.gp", NULL};
    for (int i = 0; names[i]; i++) {
        size_t n = strlen(names[i]);
        if (strncmp(nm, names[i], n) == 0 && strncmp(nm + n, ".tmp.", 5) == 0 && nm[n + 5] &&
            strspn(nm + n + 5, "0123456789") == strlen(nm + n + 5))
            return true;
    }
    return false;
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
static void remove_temporaries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[PATHLEN];
        if (!ag_path_join(path, sizeof path, dir, e->d_name)) continue;
        if (our_tmp_file(e->d_name)) unlink(path);
        else if (our_tmp_dir(e->d_name)) lm_ckpt_remove(dir, e->d_name);
    }
    closedir(d);
}

/* The run and iteration one checkpoint file's header gives (the older layout's pair may be half
 * removed by a kill); false when it is not one. */
static bool file_id(const char *path, lm_ckpt_id *id)
{
    ag_error ignored = {0};
    ag_st_file *f = ag_st_load_header(path, &ignored);
    const char *run = ag_st_meta_get(f, "run_id"), *iter = ag_st_meta_get(f, "iter");
    char *end = NULL;
    bool ok = run && iter && strlen(run) == 16 && *iter >= '0' && *iter <= '9';
    if (ok) {
        id->run_id = strtoull(run, NULL, 16);
        id->iter = strtol(iter, &end, 10);
        ok = !*end && id->iter >= 0;
    }
    ag_st_free(f);
    return ok;
}

/* The older layout's files at the top of dir (either, after a kill between their removals),
 * once a committed checkpoint supersedes them. */
static void clean_legacy(const char *dir, const lm_ckpt_id *lid, uint64_t also, char *left, size_t n)
{
    const char *legacy[] = {LM_STATE_FILE, LM_MODEL_FILE};
    for (int i = 0; i < 2; i++) {
        char path[PATHLEN];
        struct stat sb;
        lm_ckpt_id id = {0};
        if (!ag_path_join(path, sizeof path, dir, legacy[i]) || lstat(path, &sb) != 0) continue;
        if (file_id(path, &id) && ((lid->run_id && id.run_id == lid->run_id && id.iter <= lid->iter) ||
                                   (also && id.run_id == also)))
            unlink(path);
        else add_name(left, n, legacy[i]);
    }
}

void lm_ckpt_clean(const char *dir, uint64_t also, char *left, size_t n, char *note, size_t nn)
{
    ckpt_name live = "", best = "", want, lowest, *names;
    lm_ckpt_id lid = {.best_iter = -1}, id;
    ag_error ignored = {0};
    left[0] = note[0] = '\0';
    if (ag_ckpt_pointer(dir, LM_LATEST, live, &ignored) || !identify(dir, live, &lid)) live[0] = '\0';
    ag_error_clear(&ignored);
    if (ag_ckpt_pointer(dir, LM_BEST, best, &ignored)) best[0] = '\0';
    char path[PATHLEN];
    if (best[0] && also && identify(dir, best, &id) && id.run_id == also && ag_path_join(path, sizeof path, dir, LM_BEST)) {
        unlink(path);   /* the best of --overwrite's old run: forgotten first, then removed below */
        best[0] = '\0';
    }
    remove_temporaries(dir);
    int k = ckpt_dirs(dir, &names);
    find_best(dir, &lid, names, k, want, lowest);
    mend_best(dir, live, want, best, note, nn);
    for (int i = 0; i < k; i++) {
        if (!strcmp(names[i], live) || !strcmp(names[i], best) || !strcmp(names[i], lowest)) continue;
        bool whole = identify(dir, names[i], &id);
        if (whole && ((live[0] && lm_ckpt_superseded(&id, lid.run_id, lid.iter, lid.model_hash)) ||
                      (also && id.run_id == also))) {
            lm_ckpt_remove(dir, names[i]);
            continue;
        }
        char what[128];
        snprintf(what, sizeof what, "%s (%s)", names[i], !whole ? "not a whole checkpoint"
                 : !live[0] ? "no latest to tell whose" : id.run_id == lid.run_id ? "this run's, newer than the live one"
                 : "another run's");
        add_name(left, n, what);
    }
    free(names);
    if (live[0]) clean_legacy(dir, &lid, also, left, n);
}

// --- a lost latest ---

ag_status lm_ckpt_recover(const char *dir, char *note, size_t n, ag_error *err)
{
    char path[PATHLEN], found[1024] = "";
    struct stat sb;
    note[0] = '\0';
    if ((ag_path_join(path, sizeof path, dir, LM_LATEST) && lstat(path, &sb) == 0) ||
        (ag_path_join(path, sizeof path, dir, LM_MODEL_FILE) && lstat(path, &sb) == 0))
        return AG_OK;   /* nothing lost (a latest that is no good: the loader says why) */
    ckpt_name *names;
    int k = ckpt_dirs(dir, &names), pick = -1, whole = 0;
    uint64_t run = 0;
    bool one_run = true;
    lm_ckpt_id id, newest = {0};
    for (int i = 0; i < k; i++) {
        if (!identify(dir, names[i], &id)) continue;
        char what[128];
        snprintf(what, sizeof what, "%s (iteration %ld, run %016llx)", names[i], id.iter, (unsigned long long)id.run_id);
        add_name(found, sizeof found, what);
        if (whole++ == 0) run = id.run_id;
        one_run = one_run && id.run_id == run;
        if (pick < 0 || id.iter > newest.iter) {   /* newest name first: a tie keeps ckpt-N-b */
            pick = i;
            newest = id;
        }
    }
    ag_status s = AG_OK;
    bool committed;
    if (whole > 0 && !one_run)
        s = ag_seterr(err, AG_ERR_ARG, "%s has no %s and holds the checkpoints of several runs: %s; write the name of "
                      "the one to continue into %s/%s (echo ckpt-... > %s/%s), then --resume", dir, LM_LATEST, found,
                      dir, LM_LATEST, dir, LM_LATEST);
    else if (whole > 0 && (s = ag_ckpt_point(dir, LM_LATEST, names[pick], &committed, err)) == AG_OK)
        snprintf(note, n, "%s/%s was missing: it names %s again, the newest whole checkpoint of the run (found: %s)",
                 dir, LM_LATEST, names[pick], found);
    free(names);
    return s;
}

void lm_ckpt_drop_orphans(const char *dir, uint64_t model_hash, char *note, size_t n)
{
    char path[PATHLEN], gone[512] = "";
    struct stat sb;
    note[0] = '\0';
    const char *committed[] = {LM_LATEST, LM_BEST, LM_MODEL_FILE};
    for (int i = 0; i < 3; i++)
        if (ag_path_join(path, sizeof path, dir, committed[i]) && lstat(path, &sb) == 0) return;   /* a run */
    ckpt_name *names;
    int k = ckpt_dirs(dir, &names), orphans = 0;
    for (int i = 0; i < k; i++) {
        lm_ckpt_id id;
        orphans += identify(dir, names[i], &id) && id.iter == 0 && id.model_hash == model_hash;
    }
    for (int i = 0; i < k && orphans == k; i++) {   /* all of them, or none: nothing else of a run is there */
        lm_ckpt_remove(dir, names[i]);
        add_name(gone, sizeof gone, names[i]);
    }
    free(names);
    if (gone[0])
        snprintf(note, n, "%s: removed %s, the first checkpoint of this same run (its untrained weights), left "
                 "uncommitted by a kill; starting the run again", dir, gone);
}

// --- run directories kept apart ---

/* dir is a run directory: it holds a latest, a ckpt-N directory with a model file, or the older
 * layout's pair; what tells it goes in why [64]. */
static bool is_run_dir(const char *dir, char *why)
{
    char p[PATHLEN], q[PATHLEN];
    struct stat sb;
    if (ag_path_join(p, sizeof p, dir, LM_LATEST) && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode))
        return snprintf(why, 64, "a %s", LM_LATEST) > 0;
    if (ag_path_join(p, sizeof p, dir, LM_MODEL_FILE) && stat(p, &sb) == 0 &&
        ag_path_join(q, sizeof q, dir, LM_STATE_FILE) && stat(q, &sb) == 0)
        return snprintf(why, 64, "%s and %s", LM_MODEL_FILE, LM_STATE_FILE) > 0;
    ckpt_name *names;
    int k = ckpt_dirs(dir, &names);
    bool run = false;
    for (int i = 0; i < k && !run; i++)
        run = ag_path_join(p, sizeof p, dir, names[i]) && ag_path_join(q, sizeof q, p, LM_MODEL_FILE) &&
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

ag_status lm_ckpt_outside_runs(const char *out, ag_error *err)
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
        if (is_run_dir(real, why))
            return ag_seterr(err, AG_ERR_ARG, "--out %s lies inside the run directory %s (it holds %s): a run directory "
                             "is changed only by its own train; give --out %s to continue that run, or a directory "
                             "outside it", out, real, why, real);
        if (strcmp(real, "/") == 0) return AG_OK;
        up(real);
    }
}
