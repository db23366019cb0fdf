/* rundir.c -- locking, whole-file replacement and fault points of a run directory (see rundir.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint.h"
#include "rundir.h"

// --- whole files ---

FILE *lm_file_create(const char *path, char *tmp, size_t n, ag_error *err)
{
    int w = snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    if (w < 0 || (size_t)w >= n) {
        ag_seterr(err, AG_ERR_ARG, "%s: path too long", path);
        return NULL;
    }
    /* O_EXCL fails on any existing name, a symbolic link included: remove it and try again */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!fp) {
        ag_seterr(err, AG_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
    }
    return fp;
}

ag_status lm_file_commit(FILE *fp, const char *tmp, const char *path, bool durable, ag_error *err)
{
    bool ok = fflush(fp) == 0 && !ferror(fp);
    int e = errno;
    if (ok && durable && fsync(fileno(fp)) != 0) {
        ok = false;
        e = errno;
    }
    if (fclose(fp) != 0 && ok) {
        ok = false;
        e = errno;
    }
    if (ok && rename(tmp, path) != 0) {
        ag_seterr(err, AG_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        unlink(tmp);
        return AG_ERR_IO;
    }
    if (ok) return AG_OK;
    unlink(tmp);
    return ag_seterr(err, AG_ERR_IO, "%s: write failed: %s", path, e ? strerror(e) : "stream error");
}

void lm_file_discard(FILE *fp, const char *tmp)
{
    if (fp) fclose(fp);
    unlink(tmp);
}

ag_status lm_fsync_dir(const char *dir, ag_error *err)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ag_seterr(err, AG_ERR_IO, "%s: cannot open the directory to sync it: %s", dir, strerror(errno));
    if (fsync(fd) != 0 && errno != EINVAL && errno != ENOTSUP) {
        int e = errno;
        close(fd);
        return ag_seterr(err, AG_ERR_IO, "%s: syncing the directory failed: %s", dir, strerror(e));
    }
    close(fd);
    return AG_OK;
}

// --- fault points ---

void lm_fault(const char *step, const char *path)
{
    static long target = -1, count = 0;   /* -1: the environment not read yet; 0: no faults */
    if (target < 0) {
        const char *s = getenv("CHAR_LM_FAULT");
        target = s ? strtol(s, NULL, 10) : 0;
        if (target < 0) target = 0;
    }
    if (target == 0 || ++count != target) return;
    fprintf(stderr, "char_lm: fault point %ld: %s %s\n", count, step, path);
    fflush(stderr);
    raise(SIGKILL);
}
