/* ckpt_dir.c -- the checkpoint unit of a run directory, for any program (see train.h): the
 * ckpt-N directories, and DIR/latest and DIR/best, one line each, that name them. Moved out of
 * char_lm's checkpoint.c (issue 31), every step and its fault point as they were. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "train.h"

static const char *const from_names[] = {AG_CKPT_LATEST, AG_CKPT_BEST};
const ag_switch ag_ckpt_from_switch = {"from", 2, from_names, NULL};

#define PATHLEN 4096

/* "ckpt-", at least 8 digits, perhaps "-b": so never a '/' or a "..", and never a directory a
 * user named. */
bool ag_ckpt_name_ok(const char *name)
{
    if (strncmp(name, "ckpt-", 5) != 0) return false;
    size_t digits = strspn(name + 5, "0123456789");
    const char *rest = name + 5 + digits;
    return digits >= 8 && digits <= 18 && (!*rest || strcmp(rest, "-b") == 0);
}

ag_status ag_ckpt_pointer(const char *dir, const char *which, char *name, ag_error *err)
{
    char path[PATHLEN];
    if (!ag_path_join(path, sizeof path, dir, which)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);   /* a FIFO must not block us */
    if (fd < 0) {
        int e = errno;
        ag_seterr(err, AG_ERR_IO, "%s: cannot open: %s", path, strerror(e));
        errno = e;
        return AG_ERR_IO;
    }
    struct stat sb;
    ssize_t n = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? read(fd, name, 63) : -1;
    close(fd);
    if (n < 0) {
        errno = EINVAL;
        return ag_seterr(err, AG_ERR_FORMAT, "%s: not a regular file", path);
    }
    name[n] = '\0';
    bool nul = strlen(name) != (size_t)n;   /* "ckpt-00000030\0junk" is not one line */
    if (n > 0 && name[n - 1] == '\n') name[n - 1] = '\0';
    if (nul || !ag_ckpt_name_ok(name)) {
        errno = EINVAL;
        return ag_seterr(err, AG_ERR_FORMAT, "%s: does not name a checkpoint (it should hold one line like "
                         "ckpt-00000100)", path);
    }
    return AG_OK;
}

/* name is one of files [NULL-terminated], or a temporary file of one ("<file>.tmp.<pid>"). */
static bool ours(const char *name, const char *const *files)
{
    for (; *files; files++) {
        size_t n = strlen(*files);
        if (strncmp(name, *files, n) == 0 && (!name[n] || strncmp(name + n, ".tmp.", 5) == 0)) return true;
    }
    return false;
}

/* Removes a checkpoint directory of ours: its files and their temporary files, then the
 * directory if that left it empty (a file someone else put there stays). A symbolic link with
 * the name is removed itself, whatever it points to untouched; a file with the name is not
 * ours (we make directories) and stays. */
void ag_ckpt_remove_dir(const char *path, const char *const *files)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        struct stat sb;
        if ((errno == ENOTDIR || errno == ELOOP) && lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) unlink(path);
        return;
    }
    /* renamed first (issue 35): a kill halfway leaves "<name>.del", which the next train removes,
     * never a half ckpt-N that every train after calls not a whole checkpoint */
    char gone[PATHLEN + 8];
    bool moved = snprintf(gone, sizeof gone, "%s.del", path) < (int)sizeof gone && rename(path, gone) == 0;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        if (moved) rename(gone, path);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (ours(nm, files)) {
            unlinkat(fd, nm, 0);
            ag_fault("remove (half done)", path);   /* one file gone, the other not yet */
        }
    }
    closedir(d);
    if (moved && rmdir(gone) != 0) rename(gone, path);   /* a user's file in it: it stays, by its name */
    if (!moved) rmdir(path);
}

void ag_ckpt_remove(const char *dir, const char *name, const char *const *files)
{
    char path[PATHLEN];
    if (!ag_path_join(path, sizeof path, dir, name)) return;
    ag_fault("remove", path);
    ag_ckpt_remove_dir(path, files);
}

ag_status ag_ckpt_point(const char *dir, const char *which, const char *name, bool *committed, ag_error *err)
{
    char path[PATHLEN], tmp[PATHLEN + 32];
    *committed = false;
    if (!ag_path_join(path, sizeof path, dir, which)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    ag_fault("create", path);
    FILE *fp = ag_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    if (fprintf(fp, "%s\n", name) < 0 || fflush(fp) != 0) {
        int e = errno;
        ag_file_discard(fp, tmp);
        return ag_seterr(err, AG_ERR_IO, "%s: write failed: %s", tmp, strerror(e));
    }
    ag_fault("fsync", tmp);
    if (fsync(fileno(fp)) != 0) {
        int e = errno;
        ag_file_discard(fp, tmp);
        return ag_seterr(err, AG_ERR_IO, "%s: fsync failed: %s", tmp, strerror(e));
    }
    ag_fault(strcmp(which, AG_CKPT_LATEST) == 0 ? "rename (the commit)" : "rename", path);
    ag_status s = ag_file_commit(fp, tmp, path, false, err);
    if (s) return s;
    *committed = true;
    ag_fault("fsync dir", dir);
    return ag_fsync_dir(dir, err);
}

void ag_ckpt_kept(const char *dir, char *buf, size_t n)
{
    char latest[64], best[64];
    ag_error ignored = {0};
    if (ag_ckpt_pointer(dir, AG_CKPT_LATEST, latest, &ignored)) latest[0] = '\0';
    ag_error_clear(&ignored);
    if (ag_ckpt_pointer(dir, AG_CKPT_BEST, best, &ignored)) best[0] = '\0';
    if (!latest[0]) snprintf(buf, n, "no checkpoint was saved");
    else if (!best[0] || strcmp(best, latest) == 0)
        snprintf(buf, n, "kept: %s/%s, the latest%s", dir, latest, best[0] ? " and the best" : "");
    else snprintf(buf, n, "kept: %s/%s, the latest, and %s/%s, the best", dir, latest, dir, best);
}
