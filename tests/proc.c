/* proc.c -- char_lm as a subprocess, and file-tree snapshots (see proc.h). */
#include <arpa/inet.h>
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "proc.h"
#include "data/hash.h"
#include "tensor/debug.h"   /* ag_now_s */

extern char **environ;

/* An assertion that reaches check only when it fails: each passing ck_assert_* writes its line to
 * check's parent, and these helpers run per file and per poll (75,000 writes in the errors
 * suite, most of its system time). */
#define proc_require(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

// --- the binary, the wrapper, the environment ---

const char *proc_binary(void)
{
    static char path[PATH_MAX];
    if (path[0]) return path;
    const char *b = getenv("CHAR_LM");
    if (!b || !*b) b = "build/char_lm";
    ck_assert_msg(realpath(b, path) != NULL && access(path, X_OK) == 0,
                  "char_lm binary '%s' not found (run from the repository root after `make "
                  "build/char_lm`, or set CHAR_LM)", b);
    return path;
}

bool proc_wrapped(void)
{
    const char *w = getenv("CHAR_LM_WRAP");
    return w && *w;
}

double proc_timeout(const proc_opts *o)
{
    if (o && o->timeout_s > 0) return o->timeout_s;
    const char *t = getenv("CHAR_LM_TIMEOUT");
    double v = t ? atof(t) : 0;
    return v > 0 ? v : 120;
}

/* An executable named `name` on $PATH (or name itself when it holds a '/'), into out. */
static bool find_exe(const char *name, char *out, size_t n)
{
    if (strchr(name, '/')) {
        snprintf(out, n, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/bin:/bin";
    while (*path) {
        size_t len = strcspn(path, ":");
        snprintf(out, n, "%.*s/%s", (int)len, path, name);
        if (access(out, X_OK) == 0) return true;
        path += len + (path[len] == ':');
    }
    return false;
}

/* The variable of environment entry e ("KEY=...") is one that env sets. */
static bool env_overridden(const char *e, const char *const *env)
{
    size_t k = strcspn(e, "=");
    for (int i = 0; env && env[i]; i++)
        if (strncmp(env[i], e, k + 1) == 0) return true;
    return false;
}

/* argv = [wrapper words...] binary args..., and the environment with OPENBLAS_NUM_THREADS=1;
 * built before fork (the child only calls async-signal-safe functions). */
typedef struct {
    char *words;           /* the wrapper string, split in place */
    char **argv;
    char **envp;
    char exe[PATH_MAX];
} launch;

static void launch_build(launch *L, const char *const *args, const proc_opts *o)
{
    memset(L, 0, sizeof *L);
    const char *w = o->no_wrap ? NULL : getenv("CHAR_LM_WRAP");
    int na = 0, nw = 0;
    while (args[na]) na++;
    L->words = strdup(w ? w : "");
    ck_assert_ptr_nonnull(L->words);
    char *wv[64];
    for (char *t = strtok(L->words, " "); t && nw < 64; t = strtok(NULL, " ")) wv[nw++] = t;
    L->argv = calloc((size_t)(nw + na + 2), sizeof *L->argv);
    ck_assert_ptr_nonnull(L->argv);
    int k = 0;
    for (int i = 0; i < nw; i++) L->argv[k++] = wv[i];
    L->argv[k++] = (char *)proc_binary();
    for (int i = 0; i < na; i++) L->argv[k++] = (char *)args[i];
    L->argv[k] = NULL;
    ck_assert_msg(find_exe(L->argv[0], L->exe, sizeof L->exe), "cannot find '%s' to run", L->argv[0]);

    int ne = 0;
    while (environ[ne]) ne++;
    int nx = 0, j = 0;
    while (o->env && o->env[nx]) nx++;
    L->envp = calloc((size_t)ne + (size_t)nx + 2, sizeof *L->envp);
    ck_assert_ptr_nonnull(L->envp);
    for (int i = 0; i < ne; i++)
        if (strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) != 0 && strncmp(environ[i], "CHAR_LM_FAULT=", 14) != 0 &&
            !env_overridden(environ[i], o->env))
            L->envp[j++] = environ[i];
    L->envp[j++] = "OPENBLAS_NUM_THREADS=1";
    for (int i = 0; i < nx; i++) L->envp[j++] = (char *)o->env[i];
    L->envp[j] = NULL;
}

static void launch_free(launch *L)
{
    free(L->words);
    free(L->argv);
    free(L->envp);
}

// --- running ---

pid_t proc_start(const char *cwd, const char *const *args, const char *io_prefix, const proc_opts *o)
{
    static const proc_opts none;
    if (!o) o = &none;
    launch L;
    launch_build(&L, args, o);
    char outp[PATH_MAX], errp[PATH_MAX];
    snprintf(outp, sizeof outp, "%s.out", io_prefix);
    snprintf(errp, sizeof errp, "%s.err", io_prefix);
    const char *bin = proc_binary();
    bool drop = o->drop_root && getuid() == 0;
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* the child: async-signal-safe calls only */
        int in = open("/dev/null", O_RDONLY);
        int fo = open(o->stdout_path ? o->stdout_path : outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int pp[2];
        if (o->stdout_closed_pipe) {   /* a reader that has gone away, as `| head` leaves */
            if (pipe(pp) != 0) _exit(126);
            close(pp[0]);
            if (fo >= 0) close(fo);
            fo = pp[1];
        }
        if (in < 0 || fo < 0 || fe < 0 || dup2(in, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        if (chdir(cwd) != 0) _exit(126);
        sigset_t none_set;
        sigemptyset(&none_set);
        sigprocmask(SIG_SETMASK, &none_set, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGXFSZ, SIG_DFL);
        signal(SIGPIPE, o->stdout_closed_pipe && !o->sigpipe_default ? SIG_IGN : SIG_DFL);
        if (o->fsize_limit > 0) {
            struct rlimit rl = {(rlim_t)o->fsize_limit, (rlim_t)o->fsize_limit};
            signal(SIGXFSZ, SIG_IGN);   /* a write past the limit fails with EFBIG, like ENOSPC */
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(126);
        }
        if (drop) {
            if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) _exit(125);
            if (access(bin, X_OK) != 0 || access(".", X_OK) != 0) _exit(125);
        }
        execve(L.exe, L.argv, L.envp);
        _exit(127);
    }
    launch_free(&L);
    return pid;
}

void proc_wait(pid_t pid, const char *io_prefix, const proc_opts *o, proc_result *r)
{
    memset(r, 0, sizeof *r);
    double limit = proc_timeout(o), t0 = ag_now_s();
    int status = 0;
    long sleep_ns = 1000000;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        proc_require(w == 0 || errno == EINTR, "waitpid: %s", strerror(errno));
        if (ag_now_s() - t0 > limit) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            r->timed_out = true;
            break;
        }
        struct timespec ts = {0, sleep_ns};
        nanosleep(&ts, NULL);
        if (sleep_ns < 20000000) sleep_ns *= 2;
    }
    if (!r->timed_out) {
        r->exited = WIFEXITED(status);
        r->code = r->exited ? WEXITSTATUS(status) : -1;
        r->signaled = WIFSIGNALED(status);
        r->sig = r->signaled ? WTERMSIG(status) : 0;
        r->skipped = o && o->drop_root && r->exited && r->code == 125;
    }
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s.out", io_prefix);
    r->out = proc_read_file(p, &r->out_len);
    snprintf(p, sizeof p, "%s.err", io_prefix);
    r->err = proc_read_file(p, &r->err_len);
    if (!r->out) r->out = strdup("");
    if (!r->err) r->err = strdup("");
    ck_assert(r->out && r->err);
    ck_assert_msg(!(r->exited && (r->code == 126 || r->code == 127)),
                  "the child could not start char_lm (exit %d)", r->code);
}

bool proc_running(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%ld/stat", (long)pid);
    FILE *fp = fopen(p, "r");
    if (!fp) return kill(pid, 0) == 0;   /* no /proc: a zombie counts as running until reaped */
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *paren = strrchr(buf, ')');   /* "pid (comm) S ...": comm may hold spaces */
    return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

void proc_run(const char *cwd, const char *const *args, const char *io_prefix, const proc_opts *o,
              proc_result *r)
{
    pid_t pid = proc_start(cwd, args, io_prefix, o);
    proc_wait(pid, io_prefix, o, r);
}

void proc_result_free(proc_result *r)
{
    free(r->out);
    free(r->err);
    memset(r, 0, sizeof *r);
}

const char *proc_status_str(const proc_result *r)
{
    static char buf[96];
    if (r->timed_out) snprintf(buf, sizeof buf, "timed out");
    else if (r->signaled) snprintf(buf, sizeof buf, "killed by signal %d (%s)", r->sig, strsignal(r->sig));
    else snprintf(buf, sizeof buf, "exit %d", r->code);
    return buf;
}

int proc_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; *p; p++)
        if (*p == '\n') n++;
    size_t len = strlen(s);
    if (len > 0 && s[len - 1] != '\n') n++;
    return n;
}

// --- files ---

const char *proc_path(const char *dir, const char *name)
{
    static char buf[8][PATH_MAX];
    static int k;
    k = (k + 1) % 8;
    int w = snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    proc_require(w > 0 && (size_t)w < sizeof buf[k], "path too long: %s/%s", dir, name);
    return buf[k];
}

void proc_write_file(const char *path, const void *data, size_t n)
{
    FILE *fp = fopen(path, "wb");
    proc_require(fp != NULL, "%s: %s", path, strerror(errno));
    proc_require(fwrite(data, 1, n, fp) == n, "%s: short write: %s", path, strerror(errno));
    proc_require(fclose(fp) == 0, "%s: close: %s", path, strerror(errno));
}

char *proc_read_file(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    size_t cap = 4096, len = 0;
    char *b = malloc(cap);
    while (b) {
        len += fread(b + len, 1, cap - len - 1, fp);
        if (len < cap - 1) break;
        char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    fclose(fp);
    if (!b) return NULL;
    b[len] = '\0';
    if (n) *n = len;
    return b;
}

void proc_remove_tree(const char *path)
{
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        chmod(path, 0700);
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            char p[PATH_MAX];
            while ((e = readdir(d))) {
                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
                snprintf(p, sizeof p, "%s/%s", path, e->d_name);
                proc_remove_tree(p);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        remove(path);
    }
}

void proc_copy_tree(const char *from, const char *to)
{
    struct stat sb;
    proc_require(lstat(from, &sb) == 0, "lstat %s: %s", from, strerror(errno));
    if (S_ISDIR(sb.st_mode)) {
        proc_require(mkdir(to, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", to, strerror(errno));
        DIR *d = opendir(from);
        proc_require(d != NULL, "opendir %s: %s", from, strerror(errno));
        struct dirent *e;
        char a[PATH_MAX], b[PATH_MAX];
        while ((e = readdir(d))) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            snprintf(a, sizeof a, "%s/%s", from, e->d_name);
            snprintf(b, sizeof b, "%s/%s", to, e->d_name);
            proc_copy_tree(a, b);
        }
        closedir(d);
    } else if (S_ISREG(sb.st_mode)) {
        size_t n;
        char *data = proc_read_file(from, &n);
        proc_require(data != NULL, "cannot read %s", from);
        proc_write_file(to, data, n);
        free(data);
    }
}

void proc_patch_file(const char *path, const char *from, const char *to)
{
    size_t n, fl = strlen(from);
    ck_assert_uint_eq(fl, strlen(to));
    char *b = proc_read_file(path, &n);
    ck_assert_ptr_nonnull(b);
    char *hit = NULL;
    for (size_t i = 0; i + fl <= n && !hit; i++)
        if (memcmp(b + i, from, fl) == 0) hit = b + i;
    ck_assert_msg(hit != NULL, "%s: '%s' not found", path, from);
    memcpy(hit, to, fl);
    proc_write_file(path, b, n);
    free(b);
}

char *proc_make_corpus(size_t n, size_t *len)
{
    static const char *words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to",
                                  "red", "barn", "where", "old", "king", "said", "good", "night", "my",
                                  "lord", "what", "is", "it", "you", "see", "there"};
    static const char *zh = "\xe5\xa4\xa9\xe5\x9c\xb0\xe7\x8e\x84\xe9\xbb\x84\xe3\x80\x82\n";  /* 天地玄黄。 */
    const int nw = (int)(sizeof words / sizeof words[0]);
    char *buf = malloc(n + 256);
    ck_assert_ptr_nonnull(buf);
    size_t k = 0;
    uint64_t s = 42;
    int line = 0;
    while (k < n) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        int words_in = 3 + (int)((s >> 33) % 6);
        for (int i = 0; i < words_in; i++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const char *w = words[(s >> 33) % (uint64_t)nw];
            size_t wl = strlen(w);
            memcpy(buf + k, w, wl);
            if (i == 0) buf[k] = (char)(buf[k] - 'a' + 'A');
            k += wl;
            buf[k++] = i + 1 < words_in ? ' ' : '.';
        }
        buf[k++] = '\n';
        if (++line % 7 == 0) {
            memcpy(buf + k, zh, strlen(zh));
            k += strlen(zh);
        }
    }
    *len = k;
    return buf;
}

// --- snapshots ---

static void snap_add(proc_snapshot *s, const char *rel, uint64_t h, long long size, unsigned mode)
{
    int n = s->n + 1;
    s->path = realloc(s->path, (size_t)n * sizeof *s->path);
    s->hash = realloc(s->hash, (size_t)n * sizeof *s->hash);
    s->size = realloc(s->size, (size_t)n * sizeof *s->size);
    s->mode = realloc(s->mode, (size_t)n * sizeof *s->mode);
    proc_require(s->path && s->hash && s->size && s->mode, "snapshot: out of memory");
    proc_require((s->path[s->n] = strdup(rel)) != NULL, "snapshot: out of memory");
    s->hash[s->n] = h;
    s->size[s->n] = size;
    s->mode[s->n] = mode;
    s->n = n;
}

static void snap_walk(proc_snapshot *s, const char *root, const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s%s%s", root, *rel ? "/" : "", rel);
    DIR *d = opendir(p);
    proc_require(d != NULL, "opendir %s: %s", p, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char r[PATH_MAX], full[PATH_MAX];
        snprintf(r, sizeof r, "%s", *rel ? proc_path(rel, e->d_name) : e->d_name);
        snprintf(full, sizeof full, "%s", proc_path(root, r));
        struct stat sb;
        proc_require(lstat(full, &sb) == 0, "lstat %s: %s", full, strerror(errno));
        if (S_ISDIR(sb.st_mode)) {
            snap_add(s, r, 0, -1, sb.st_mode & 07777);
            snap_walk(s, root, r);
        } else {
            size_t n = 0;
            char *b = S_ISREG(sb.st_mode) ? proc_read_file(full, &n) : NULL;
            snap_add(s, r, b ? ag_fnv1a(AG_FNV1A_INIT, b, n) : 1, b ? (long long)n : -2, sb.st_mode & 07777);
            free(b);
        }
    }
    closedir(d);
}

static char **sort_paths;   /* qsort has no user pointer */
static int by_path(const void *a, const void *b)
{
    return strcmp(sort_paths[*(const int *)a], sort_paths[*(const int *)b]);
}

void proc_snapshot_take(const char *root, proc_snapshot *s)
{
    memset(s, 0, sizeof *s);
    snap_walk(s, root, "");
    /* sort all four arrays by path */
    int *idx = malloc(((size_t)s->n + 1) * sizeof *idx);
    ck_assert_ptr_nonnull(idx);
    for (int i = 0; i < s->n; i++) idx[i] = i;
    sort_paths = s->path;
    qsort(idx, (size_t)s->n, sizeof *idx, by_path);
    proc_snapshot t = {malloc(((size_t)s->n + 1) * sizeof(char *)), malloc(((size_t)s->n + 1) * sizeof(uint64_t)),
                       malloc(((size_t)s->n + 1) * sizeof(long long)), malloc(((size_t)s->n + 1) * sizeof(unsigned)),
                       s->n};
    ck_assert(t.path && t.hash && t.size && t.mode);
    for (int i = 0; i < s->n; i++) {
        t.path[i] = s->path[idx[i]];
        t.hash[i] = s->hash[idx[i]];
        t.size[i] = s->size[idx[i]];
        t.mode[i] = s->mode[idx[i]];
    }
    free(s->path);
    free(s->hash);
    free(s->size);
    free(s->mode);
    free(idx);
    *s = t;
}

static bool allowed(const char *path, const char *const *allow)
{
    for (int i = 0; allow && allow[i]; i++)
        if (strstr(path, allow[i])) return true;
    return false;
}

const char *proc_snapshot_diff(const proc_snapshot *a, const proc_snapshot *b, const char *const *allow)
{
    static char msg[PATH_MAX + 64];
    int i = 0, j = 0;
    while (i < a->n || j < b->n) {
        int c = i >= a->n ? 1 : j >= b->n ? -1 : strcmp(a->path[i], b->path[j]);
        if (c < 0) {
            if (!allowed(a->path[i], allow)) {
                snprintf(msg, sizeof msg, "%s was removed", a->path[i]);
                return msg;
            }
            i++;
        } else if (c > 0) {
            if (!allowed(b->path[j], allow)) {
                snprintf(msg, sizeof msg, "new %s %s", b->size[j] == -1 ? "directory" : "file", b->path[j]);
                return msg;
            }
            j++;
        } else {
            if ((a->hash[i] != b->hash[j] || a->size[i] != b->size[j] || a->mode[i] != b->mode[j]) &&
                !allowed(a->path[i], allow)) {
                snprintf(msg, sizeof msg, "%s changed (%lld -> %lld bytes)", a->path[i], a->size[i], b->size[j]);
                return msg;
            }
            i++;
            j++;
        }
    }
    return NULL;
}

void proc_snapshot_free(proc_snapshot *s)
{
    for (int i = 0; i < s->n; i++) free(s->path[i]);
    free(s->path);
    free(s->hash);
    free(s->size);
    free(s->mode);
    memset(s, 0, sizeof *s);
}

const char *proc_ckpt(const char *dir) { return proc_ckpt_as(dir, "latest"); }

const char *proc_ckpt_as(const char *dir, const char *which)
{
    static char buf[PATH_MAX];
    char *name = proc_read_file(proc_path(dir, which), NULL);
    if (!name) {
        snprintf(buf, sizeof buf, "%s", dir);
        return buf;
    }
    name[strcspn(name, "\n")] = '\0';
    snprintf(buf, sizeof buf, "%s", proc_path(dir, name));
    free(name);
    return buf;
}

char *proc_read_ckpt_file(const char *path, size_t *n)
{
    char *b = proc_read_file(path, n);
    if (!b) return NULL;
    const char *keys[] = {"\"run_id\":\"", "\"follows\":\""};
    for (int k = 0; k < 2; k++) {
        size_t kn = strlen(keys[k]);
        char *id = NULL;
        for (size_t i = 8; i + kn <= *n && !id; i++)   /* the header is text from byte 8 on */
            if (memcmp(b + i, keys[k], kn) == 0) id = b + i + kn;
        if (id && id + 16 <= b + *n) memset(id, '0', 16);
    }
    return b;
}

char *proc_metrics_losses(const char *dir)
{
    size_t n;
    char *b = proc_read_file(proc_path(dir, "metrics.csv"), &n);
    ck_assert_msg(b != NULL, "%s/metrics.csv missing", dir);
    char *out = malloc(n + 1);
    ck_assert_ptr_nonnull(out);
    size_t k = 0;
    for (char *line = b; *line;) {
        char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        size_t keep = len;
        while (keep > 0 && line[keep - 1] != ',') keep--;   /* up to and with the last comma */
        memcpy(out + k, line, keep);
        k += keep;
        out[k++] = '\n';
        line += len + (nl != NULL);
    }
    out[k] = '\0';
    free(b);
    return out;
}

const char *proc_find_tmp(const char *root)
{
    static char found[PATH_MAX];
    proc_snapshot s;
    proc_snapshot_take(root, &s);
    const char *hit = NULL;
    for (int i = 0; i < s.n && !hit; i++) {
        const char *base = strrchr(s.path[i], '/');
        base = base ? base + 1 : s.path[i];
        if (strstr(base, ".tmp")) {
            snprintf(found, sizeof found, "%s", s.path[i]);
            hit = found;
        }
    }
    proc_snapshot_free(&s);
    return hit;
}

// --- a serve child and HTTP/1.0 calls to it ---

int proc_wait_port(pid_t pid, const char *out)
{
    double t0 = ag_now_s();
    while (ag_now_s() - t0 < proc_timeout(NULL)) {
        char *text = proc_read_file(out, NULL);
        const char *at = text ? strstr(text, "http://127.0.0.1:") : NULL;
        int p = at ? atoi(at + strlen("http://127.0.0.1:")) : 0;
        free(text);
        if (p > 0) return p;
        ck_assert_msg(proc_running(pid), "serve ended before printing its URL");
        nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
    }
    ck_abort_msg("serve printed no URL");
    return 0;
}

void proc_send_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        ck_assert_msg(w > 0, "write to serve failed");
        s += w;
        n -= (size_t)w;
    }
}

int proc_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_msg(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "cannot connect to serve");
    return fd;
}

proc_reply proc_http(int port, const char *host, const char *method, const char *path, const char *body)
{
    int fd = proc_connect(port);
    char head[512];
    size_t bn = body ? strlen(body) : 0;
    int hn = snprintf(head, sizeof head, "%s %s HTTP/1.0\r\nHost: %s\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n", method, path, host, bn);
    proc_send_all(fd, head, (size_t)hn);
    if (bn) proc_send_all(fd, body, bn);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while (buf && (got = read(fd, buf + len, cap - len - 1)) > 0)
        if ((len += (size_t)got) + 1 == cap) buf = realloc(buf, cap *= 2);
    close(fd);
    ck_assert_ptr_nonnull(buf);
    buf[len] = '\0';
    proc_reply r = { 0, NULL };
    ck_assert_msg(sscanf(buf, "HTTP/1.%*d %d", &r.status) == 1, "no status line: %.80s", buf);
    char *at = strstr(buf, "\r\n\r\n");
    ck_assert_ptr_nonnull(at);
    r.body = strdup(at + 4);
    free(buf);
    return r;
}
