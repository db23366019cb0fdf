/* rundir.c -- locking, whole-file replacement and fault points of a run directory (see train.h). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#ifdef __linux__
#include <sys/sysmacros.h>   /* major, minor (in sys/types.h on macOS and the BSDs) */
#endif
#include <time.h>
#include <unistd.h>
#include "train.h"
#include "train_impl.h"

// --- the program's name ---

static const char *program_name = "attograd", *env_prefix = "AG";

void ag_train_name(const char *program, const char *env)
{
    program_name = program;
    env_prefix = env;
}

const char *ag__train_program(void) { return program_name; }

const char *ag__train_getenv(const char *suffix)
{
    char name[128];
    int w = snprintf(name, sizeof name, "%s_%s", env_prefix, suffix);
    return w > 0 && (size_t)w < sizeof name ? getenv(name) : NULL;
}

bool ag_path_join(char *buf, size_t n, const char *dir, const char *name)
{
    int w = snprintf(buf, n, "%s/%s", dir, name);
    return w >= 0 && (size_t)w < n;
}

// --- the lock ---

/* Two locks. A POSIX record lock (fcntl) on train.lock: it belongs to the process, so a child
 * forked to run gnuplot never holds it, F_GETLK names the holder, and it works on NFS; but
 * deleting train.lock lets a second process lock a new file of that name. So the directory
 * itself is locked too (lock_dir), with flock, the only lock a read-only descriptor (all a
 * directory can have) takes. A flock is shared with a forked child until the child's exec
 * closes the descriptor (O_CLOEXEC), which plot.c's child does at once. The kernel drops both
 * when the process dies. (Closing any descriptor of train.lock would drop the record lock:
 * only lock_dir opens the file again, and only when we hold no lock.) */
static int lock_whole(int fd, int cmd, struct flock *fl)
{
    memset(fl, 0, sizeof *fl);
    fl->l_type = F_WRLCK;
    fl->l_whence = SEEK_SET;   /* l_start 0, l_len 0: the whole file */
    return fcntl(fd, cmd, fl);
}

/* The pid that holds the lock on fd, or 0 when it cannot be told. */
static long holder_pid(int fd)
{
    struct flock fl;
    return lock_whole(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? (long)fl.l_pid : 0;
}

/* Our lock file is still the one at path (a holder that just finished removed it, and a third
 * process may have made a new one: then we locked a file nobody else will ever see). */
static bool still_at(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* The pid that /proc/locks gives for a flock on the file sb describes, or 0. */
static long flock_holder(const struct stat *sb)
{
    FILE *fp = fopen("/proc/locks", "r");
    if (!fp) return 0;
    char line[256], kind[16];
    long pid = 0, p;
    unsigned maj, min;
    unsigned long long ino;
    while (!pid && fgets(line, sizeof line, fp))   /* "1: FLOCK  ADVISORY  WRITE 123 08:01:4567 0 EOF" */
        if (!strstr(line, "->") && sscanf(line, "%*d: %15s %*s %*s %ld %x:%x:%llu", kind, &p, &maj, &min, &ino) == 5 &&
            strcmp(kind, "FLOCK") == 0 && maj == major(sb->st_dev) && min == minor(sb->st_dev) && ino == sb->st_ino)
            pid = p;
    fclose(fp);
    return pid;
}

static ag_status in_use(const char *dir, long pid, ag_error *err)
{
    if (pid > 0)
        return ag_seterr(err, AG_ERR_ARG, "%s is in use by another %s train (pid %ld, holding a lock on the "
                         "directory and %s); wait for it to end or choose another --out", dir, program_name, pid,
                         AG_LOCK_NAME);
    return ag_seterr(err, AG_ERR_ARG, "%s is in use by another %s train (it holds a lock on the directory); wait "
                     "for it to end or choose another --out", dir, program_name);
}

/* flock(fd, LOCK_EX) without waiting on a run, but past a moment's holder: a train killed while
 * its plotter was between fork and exec leaves the lock with that child for the few
 * milliseconds until the exec closes it (O_CLOEXEC). A live train holds it for its whole run,
 * so up to 1 s of retries refuses nothing that should run. false with errno as flock left it. */
static bool flock_briefly(int fd)
{
    for (int tries = 0;; tries++) {
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
        if (errno != EWOULDBLOCK || tries == 100) return false;
        nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);   /* 10 ms */
    }
}

/* The run directory's own lock (issue 19): a flock on the directory, which no removal of a file
 * inside it can release, as removing train.lock released the record lock on it. Taken first,
 * it is what keeps a second train out; the pid comes from /proc/locks or train.lock. Where the
 * file system cannot flock a directory (NFS: EBADF), or the directory cannot be opened to read,
 * the record lock on train.lock is all. */
static ag_status lock_dir(ag_lock *l, const char *dir, ag_error *err)
{
    l->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (l->dir_fd < 0) return AG_OK;   /* not readable (mode 0300): the record lock alone */
    if (flock_briefly(l->dir_fd)) return AG_OK;
    int e = errno;
    struct stat sb;
    long pid = e == EWOULDBLOCK && fstat(l->dir_fd, &sb) == 0 ? flock_holder(&sb) : 0;
    close(l->dir_fd);
    l->dir_fd = -1;
    if (e != EWOULDBLOCK) return AG_OK;   /* no flock here: the record lock alone */
    if (pid <= 0) {                      /* train.lock may still name the holder */
        int fd = open(l->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) {
            pid = holder_pid(fd);
            close(fd);
        }
    }
    return in_use(dir, pid, err);
}

/* The record lock on DIR/train.lock, and our pid in it. */
static ag_status lock_file(ag_lock *l, const char *dir, ag_error *err)
{
    for (int tries = 0; tries < 100; tries++) {
        /* O_NOFOLLOW: a symbolic link planted at the lock's name is refused, not followed */
        int fd = open(l->path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
        if (fd < 0) return ag_seterr(err, AG_ERR_IO, "%s: cannot create the lock file: %s", l->path, strerror(errno));
        struct flock fl;
        if (lock_whole(fd, F_SETLK, &fl) != 0) {
            int e = errno;
            long pid = holder_pid(fd);
            close(fd);
            if (e != EACCES && e != EAGAIN)
                return ag_seterr(err, AG_ERR_IO, "%s: cannot lock: %s", l->path, strerror(e));
            return in_use(dir, pid, err);
        }
        if (!still_at(fd, l->path)) {
            close(fd);
            continue;
        }
        char pid[32];
        int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
        if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n) {
            ag_seterr(err, AG_ERR_IO, "%s: cannot write the pid: %s", l->path, strerror(errno));
            unlink(l->path);
            close(fd);
            return AG_ERR_IO;
        }
        l->fd = fd;
        return AG_OK;
    }
    return ag_seterr(err, AG_ERR_IO, "%s: cannot lock: it keeps being replaced", l->path);
}

ag_status ag_lock_take(ag_lock *l, const char *dir, ag_error *err)
{
    if (l->held) return AG_OK;
    if (!ag_path_join(l->path, sizeof l->path, dir, AG_LOCK_NAME))
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    ag_status s = lock_dir(l, dir, err);
    if (s == AG_OK && (s = lock_file(l, dir, err)) && l->dir_fd >= 0) {
        close(l->dir_fd);
        l->dir_fd = -1;
    }
    l->held = s == AG_OK;
    return s;
}

void ag_lock_drop(ag_lock *l)
{
    if (!l->held) return;
    unlink(l->path);   /* first: whoever waits re-opens the path and finds a fresh file */
    close(l->fd);
    if (l->dir_fd >= 0) close(l->dir_fd);
    l->held = false;
}

void ag_lock_via(const ag_lock *l, char *via, size_t n)
{
    struct stat locked, sb;
    via[0] = '\0';
    if (!l->held || l->dir_fd < 0 || fstat(l->dir_fd, &locked) != 0) return;
    snprintf(via, n, "/proc/self/fd/%d", l->dir_fd);   /* Linux: the locked directory, wherever it is */
    if (stat(via, &sb) != 0 || sb.st_dev != locked.st_dev || sb.st_ino != locked.st_ino) via[0] = '\0';
}

bool ag_lock_moved(const ag_lock *l, const char *dir, char *now_at, size_t n)
{
    struct stat locked, named;
    now_at[0] = '\0';
    if (!l->held || l->dir_fd < 0 || fstat(l->dir_fd, &locked) != 0) return false;
    if (stat(dir, &named) == 0 && named.st_dev == locked.st_dev && named.st_ino == locked.st_ino) return false;
    char via[64];
    ag_lock_via(l, via, sizeof via);
    ssize_t k = via[0] ? readlink(via, now_at, n - 1) : -1;
    now_at[k > 0 ? k : 0] = '\0';
    return true;
}

// --- whole files ---

FILE *ag_file_create(const char *path, char *tmp, size_t n, ag_error *err)
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

ag_status ag_file_commit(FILE *fp, const char *tmp, const char *path, bool durable, ag_error *err)
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

void ag_file_discard(FILE *fp, const char *tmp)
{
    if (fp) fclose(fp);
    unlink(tmp);
}

ag_status ag_write_file(const char *path, const char *text, ag_error *err)
{
    char tmp[4096 + 32];
    FILE *fp = ag_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    if (fputs(text, fp) < 0) {
        int e = errno;
        ag_file_discard(fp, tmp);
        return ag_seterr(err, AG_ERR_IO, "%s: write failed: %s", path, strerror(e));
    }
    return ag_file_commit(fp, tmp, path, false, err);
}

ag_status ag_mkdir_p(const char *dir, ag_error *err)
{
    char buf[4096];
    if (!dir[0]) return ag_seterr(err, AG_ERR_ARG, "an empty directory name");
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

ag_status ag_fsync_dir(const char *dir, ag_error *err)
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

void ag_fault(const char *step, const char *path)
{
    static long target = -1, count = 0;   /* -1: the environment not read yet; 0: no faults */
    static const char *named = NULL;      /* a step's name instead of a number */
    if (target < 0) {
        const char *s = ag__train_getenv("FAULT");
        named = s && *s && (*s < '0' || *s > '9') ? s : NULL;
        target = s && !named ? strtol(s, NULL, 10) : 0;
        if (target < 0) target = 0;
    }
    ++count;
    if (named ? strcmp(step, named) != 0 : target == 0 || count != target) return;
    fprintf(stderr, "%s: fault point %ld: %s %s\n", program_name, count, step, path);
    fflush(stderr);
    raise(SIGKILL);
}
