/* csv.c -- a run's CSV files (metrics.csv, ...), see train.h: opened to append rows, and on a
 * resume cut after the rows the resumed run keeps, in place when it can (no room for a copy
 * needed). Moved out of char_lm's train_log.c (issue 31). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include "train.h"
#include "train_impl.h"

#define PATHLEN 4096

/* path opened with flags (O_NONBLOCK: a FIFO there must not block us; O_NOFOLLOW: nor is a
 * link followed) as a stream of mode, if it is a regular file; NULL otherwise. */
static FILE *open_regular(const char *path, int flags, const char *mode)
{
    int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    FILE *f = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? fdopen(fd, mode) : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

/* Where the rows of a CSV resumed at iteration start (in, whose header line is head) from start
 * on begin: *cut, the byte offset. False when it cannot simply be cut there: another header
 * (other columns), a row to keep after the cut, a kept row without its line break. */
static bool find_cut(const char *head, long start, FILE *in, off_t *cut)
{
    char *line = NULL;
    size_t cap = 0;
    bool ok = true;
    off_t at = 0;
    ssize_t len;
    *cut = -1;
    for (long k = 0; ok && (len = getline(&line, &cap, in)) >= 0; k++, at += len) {
        char *end;
        long it = strtol(line, &end, 10);
        bool row = k > 0 && end != line && *end == ',', keep = row && it < start;
        if (k == 0) ok = strcmp(line, head) == 0;
        else if (*cut < 0 && !keep) *cut = at;
        else if (*cut >= 0 && keep) ok = false;
        if (keep && line[len - 1] != '\n') ok = false;
    }
    if (*cut < 0) *cut = at;
    free(line);
    return ok && at > 0 && !ferror(in);
}

/* A resumed run's CSV cut after the rows before its first iteration, in place (then *csv is
 * it, open to append), so that resuming needs no room for a copy of it. False when that cannot
 * be done (see find_cut). */
static bool cut_in_place(const char *path, const char *head, long start, FILE **csv)
{
    FILE *f = open_regular(path, O_RDWR, "r+");
    off_t cut;
    if (!f) return false;
    if (find_cut(head, start, f, &cut) && fflush(f) == 0 && ftruncate(fileno(f), cut) == 0 &&
        fseeko(f, cut, SEEK_SET) == 0) {
        *csv = f;
        return true;
    }
    fclose(f);
    return false;
}

/* A new CSV: the header, and of a resumed run the rows before its first iteration (those of a
 * file that could not be cut in place), rewritten whole. */
static bool rewrite_csv(const char *path, const char *head, long start, FILE *out)
{
    FILE *in = start >= 0 ? open_regular(path, O_RDONLY, "r") : NULL;
    bool ok = fputs(head, out) >= 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while (in && ok && (len = getline(&line, &cap, in)) >= 0) {
        char *end;
        long it = strtol(line, &end, 10);
        if (end != line && *end == ',' && it < start)
            ok = fputs(line, out) >= 0 && (line[len - 1] == '\n' || fputs("\n", out) >= 0);
    }
    free(line);
    if (in) fclose(in);
    return ok;
}

ag_status ag_csv_open(const char *dir, const char *name, const char *head, long start, FILE **csv, ag_error *err)
{
    char path[PATHLEN], tmp[PATHLEN + 32];
    if (!ag_path_join(path, sizeof path, dir, name)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    if (start >= 0 && cut_in_place(path, head, start, csv)) return AG_OK;
    FILE *out = ag_file_create(path, tmp, sizeof tmp, err);   /* a link planted there is replaced */
    if (!out) return AG_ERR_IO;
    if (!rewrite_csv(path, head, start, out)) {
        int e = errno;
        ag_file_discard(out, tmp);
        return ag_seterr(err, AG_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    ag_status s = ag_file_commit(out, tmp, path, false, err);
    if (s) return s;
    if (!(*csv = open_regular(path, O_WRONLY | O_APPEND, "a")))
        return ag_seterr(err, AG_ERR_IO, "%s: cannot write: %s", path, errno ? strerror(errno) : "not a regular file");
    return AG_OK;
}

char *ag_csv_layer_head(const char *first, const char *const *cols, int n_layer)
{
    char *head = NULL;
    size_t n = 0;
    FILE *h = open_memstream(&head, &n);
    if (!h) return NULL;
    fputs(first, h);
    for (int l = 0; l < n_layer; l++)
        for (const char *const *c = cols; *c; c++) fprintf(h, ",%s_L%d", *c, l);
    fputs("\n", h);
    if (fclose(h) == 0) return head;
    free(head);
    return NULL;
}
