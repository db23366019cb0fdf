/* plot.c -- loss.png and any other picture of a run, drawn by gnuplot (see train.h).
 * gnuplot runs as a child process (fork + exec, no shell, so any directory name is safe) with
 * the script's directory as its working directory; its own messages are discarded.
 *
 * Nothing is written through a symbolic link planted in the directory: the scripts and the
 * .dat file are written beside their name and renamed over it (rundir.c), and gnuplot draws
 * into a file we create afresh ("loss.png.tmp.<pid>", passed as the script's variable `out`),
 * renamed over the picture once gnuplot has succeeded. Run by hand, a script draws into its
 * usual name.
 *
 * No wait without a bound (issue 19): a gnuplot that never ends (a stuck font cache, a hung
 * file system) must not hold training, nor a Ctrl-C. gnuplot runs in its own process group
 * with an alarm set before the exec (alarms survive it), so even one drawing in the background
 * dies after ag_plot_timeout() seconds; every wait for it looks at the child every 10 ms and
 * kills the group when that time is up, or PLOT_GRACE_S after a stop signal (ag_plot_set_stop),
 * so that the signal is answered within a second. Either is an AG_ERR_IO that says so. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "../tensor/debug.h"   /* ag_now_s */
#include "train.h"
#include "train_impl.h"

#define PLOT_PATH 4200

/* dir/png and the temporary picture gnuplot draws into, dir/png.tmp.<pid>. */
static ag_status picture_paths(const char *dir, const char *png, char *path, char *tmp, ag_error *err)
{
    if (!ag_path_join(path, PLOT_PATH, dir, png) ||
        snprintf(tmp, PLOT_PATH, "%s.tmp.%ld", path, (long)getpid()) >= PLOT_PATH)
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    return AG_OK;
}

/* The temporary pictures of png in dir that a killed run left ("png.tmp.<pid>", that process
 * gone), removed before a new one is drawn (issue 35, L2): also where no train cleans, as attn's
 * --out. One of a live process (another drawing it now) stays. */
static void remove_stale(const char *dir, const char *png)
{
    DIR *d = opendir(dir);
    if (!d) return;
    size_t n = strlen(png);
    for (struct dirent *e; (e = readdir(d));) {
        const char *nm = e->d_name, *digits = nm + n + 5;
        if (strncmp(nm, png, n) != 0 || strncmp(nm + n, ".tmp.", 5) != 0 || !*digits || strlen(digits) > 9 ||
            strspn(digits, "0123456789") != strlen(digits))
            continue;
        pid_t pid = (pid_t)strtol(digits, NULL, 10);
        if (pid > 0 && pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH) unlinkat(dirfd(d), nm, 0);
    }
    closedir(d);
}

/* "out='NAME'" for gnuplot -e: NAME as a single-quoted gnuplot string ('' is a quote). */
static bool out_assignment(char *buf, size_t n, const char *name)
{
    size_t k = (size_t)snprintf(buf, n, "out='");
    for (; *name && k + 3 < n; name++) {
        if (*name == '\'') buf[k++] = '\'';
        buf[k++] = *name;
    }
    if (*name || k + 2 >= n) return false;
    buf[k++] = '\'';
    buf[k] = '\0';
    return true;
}

/* Starts `gnuplot -e "out='png.tmp.<pid>'" script` in dir, the temporary picture created
 * afresh first; *pid gets the child. */
static ag_status start_gnuplot(const char *dir, const char *script, const char *png, pid_t *pid, ag_error *err)
{
    char path[PLOT_PATH], tmp[PLOT_PATH], assign[2 * PLOT_PATH];
    ag_status s = picture_paths(dir, png, path, tmp, err);
    if (s) return s;
    remove_stale(dir, png);
    FILE *fp = ag_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    fclose(fp);
    const char *base = strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp;   /* gnuplot runs in dir */
    if (!out_assignment(assign, sizeof assign, base)) {
        unlink(tmp);
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", path);
    }
    unsigned alarm_s = (unsigned)ceil(ag_plot_timeout());
    fflush(NULL);   /* the child must not inherit and re-flush our buffered output */
    *pid = fork();
    if (*pid < 0) {
        unlink(tmp);
        return ag_seterr(err, AG_ERR_IO, "cannot start gnuplot: %s", strerror(errno));
    }
    if (*pid == 0) {   /* child: only async-signal-safe calls until exec */
        setpgid(0, 0);   /* its own group: a timeout kills whatever it starts too */
        alarm(alarm_s);  /* survives the exec: even a drawing nobody waits for ends */
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        if (chdir(dir) != 0) _exit(126);
        execlp("gnuplot", "gnuplot", "-e", assign, script, (char *)NULL);
        _exit(127);
    }
    setpgid(*pid, *pid);   /* here too, so that the group exists before any kill(-pid) */
    return AG_OK;
}

// --- waiting for gnuplot, never without a bound ---

#define PLOT_TIMEOUT_S 60.0   /* a loss curve takes gnuplot about 0.1 s, a large heat map seconds */
#define PLOT_GRACE_S 0.3      /* after a stop signal, how long a drawing may still finish */
#define PLOT_POLL_NS 10000000 /* 10 ms between looks at the child */

static const volatile sig_atomic_t *stop_flag;   /* ag_plot_set_stop: the program's, for its life */

void ag_plot_set_stop(const volatile sig_atomic_t *stop) { stop_flag = stop; }

double ag_plot_timeout(void)
{
    const char *s = ag__train_getenv("PLOT_TIMEOUT");
    char *end = NULL;
    double t = s ? strtod(s, &end) : 0;
    return s && end != s && !*end && t > 0 && t < 1e6 ? t : PLOT_TIMEOUT_S;
}

/* Has the child pid ended (not reaped yet: WNOWAIT)? false, errno set, if it cannot be told. */
static bool ended(pid_t pid, bool *gone)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    while (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0)
        if (errno != EINTR) return false;
    *gone = si.si_pid == pid;
    return true;
}

enum { W_ENDED, W_TIMEOUT, W_STOPPED, W_STUCK, W_ERROR };   /* how a wait for gnuplot went */

/* Waits until pid has ended (W_ENDED): at most `limit` seconds (W_TIMEOUT), and PLOT_GRACE_S
 * once a stop signal has come (W_STOPPED); then kills its process group and waits a second
 * more (W_STUCK if it still lives: a process stuck in a hung disk cannot be killed). */
static int wait_bounded(pid_t pid, double limit)
{
    double t0 = ag_now_s(), stop_at = -1, killed_at = -1;
    const struct timespec poll = {0, PLOT_POLL_NS};
    int how = W_ENDED;
    for (bool gone = false;;) {
        if (!ended(pid, &gone)) return W_ERROR;
        if (gone) return how;
        double t = ag_now_s() - t0;
        if (stop_flag && *stop_flag && stop_at < 0) stop_at = t;
        if (killed_at < 0 && (t >= limit || (stop_at >= 0 && t - stop_at >= PLOT_GRACE_S))) {
            how = t >= limit ? W_TIMEOUT : W_STOPPED;
            kill(-pid, SIGKILL);
            killed_at = t;
        }
        if (killed_at >= 0 && t - killed_at > 1) return W_STUCK;
        nanosleep(&poll, NULL);
    }
}

/* reap_gnuplot's wait. what names the picture in messages ("loss.png"). */
static ag_status wait_gnuplot(pid_t pid, bool block, bool *done, const char *dir, const char *script,
                              const char *what, ag_error *err)
{
    int status = 0, how = W_ENDED;
    double limit = ag_plot_timeout();
    bool gone = false;
    *done = false;
    if (block) how = wait_bounded(pid, limit);
    else if (!ended(pid, &gone)) how = W_ERROR;
    else if (!gone) return AG_OK;   /* still drawing (its alarm bounds it) */
    *done = true;
    if (how == W_ERROR) return ag_seterr(err, AG_ERR_IO, "waiting for gnuplot: %s", strerror(errno));
    if (how == W_STUCK)
        return ag_seterr(err, AG_ERR_IO, "gnuplot (pid %ld) on %s/%s was killed but does not end; %s not updated",
                         (long)pid, dir, script, what);
    kill(-pid, SIGKILL);   /* what it started and left in its group (which lives until the reap) */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
    if (how == W_STOPPED)
        return ag_seterr(err, AG_ERR_IO, "a stop signal came while gnuplot drew %s/%s: stopped it; %s not updated",
                         dir, script, what);
    if (how == W_TIMEOUT || (WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM))   /* by us, or by its alarm */
        return ag_seterr(err, AG_ERR_IO, "gnuplot took more than %g s on %s/%s: killed it; %s not updated (a hung "
                         "font cache or file system?)", limit, dir, script, what);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return AG_OK;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return ag_seterr(err, AG_ERR_IO, "gnuplot not found, so no %s (install it: apt-get install gnuplot-nox)", what);
    return ag_seterr(err, AG_ERR_IO, "gnuplot failed on %s/%s (status %d); %s not updated", dir, script,
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1, what);
}

/* Waits for (block) or looks at (!block) the gnuplot child pid; *done: it has ended, and the
 * status says how; then its picture replaces dir/png (or, if it failed, is removed). */
static ag_status reap_gnuplot(pid_t pid, bool block, bool *done, const char *dir, const char *script,
                              const char *png, ag_error *err)
{
    char path[PLOT_PATH], tmp[PLOT_PATH];
    ag_status s = wait_gnuplot(pid, block, done, dir, script, png, err);
    if (!*done || picture_paths(dir, png, path, tmp, err)) return s;
    if (s == AG_OK && rename(tmp, path) != 0)
        s = ag_seterr(err, AG_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (s) unlink(tmp);
    return s;
}

ag_status ag_plot_run(const char *dir, const char *script, const char *png, ag_error *err)
{
    pid_t pid;
    bool done;
    ag_status s = start_gnuplot(dir, script, png, &pid, err);
    return s ? s : reap_gnuplot(pid, true, &done, dir, script, png, err);
}

/* Writes text to dir/name (replacing it whole). */
static ag_status write_text(const char *dir, const char *name, const char *text, ag_error *err)
{
    char path[4096];
    if (!ag_path_join(path, sizeof path, dir, name)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    return ag_write_file(path, text, err);
}

/* loss.gp: the batch loss, the evaluations, the learning rate on the right-hand axis, and the
 * client's floor line (a language model's ln V: the loss of a uniform guess, where it starts). */
static ag_status write_loss_script(const char *dir, const ag_loss_plot *p, ag_error *err)
{
    char script[2048], floor[512] = "";
    if (isfinite(p->floor))
        snprintf(floor, sizeof floor, "%.6f with lines dt 2 lw 1.5 lc rgb '#808080' title '%s', \\\n     ", p->floor,
                 p->floor_title ? p->floor_title : "");
    int n = snprintf(script, sizeof script,
        "# loss.gp -- written by %s train; redraw by hand with: gnuplot loss.gp (in this directory)\n"
        "# metrics.csv columns: iter,lr,loss,train_loss,val_loss,tokens_per_s (empty: not measured)\n"
        "set terminal pngcairo size 960,600 font ',10'\n"
        "if (!exists('out')) out = 'loss.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set key autotitle columnhead below\n"
        "set title '%s'\n"
        "set xlabel 'iteration'\n"
        "set ylabel 'cross-entropy'\n"
        "set y2label 'learning rate'\n"
        "set ytics nomirror\n"
        "set y2tics\n"
        "set y2range [0:*]\n"
        "set grid\n"
        "plot %s'metrics.csv' using 1:3 with lines lc rgb '#b8b8b8' title 'batch loss', \\\n"
        "     '' using 1:4 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#1f77b4' title 'train (eval)'%s, \\\n"
        "     '' using 1:2 axes x1y2 with lines lw 1.5 lc rgb '#2ca02c' title 'learning rate (right axis)'\n",
        ag__train_program(), p->title ? p->title : "loss", floor,
        p->with_val ? ", \\\n     '' using 1:5 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#d62728' title 'val (eval)'"
                    : "");
    if (n < 0 || (size_t)n >= sizeof script) return ag_seterr(err, AG_ERR_ARG, "loss.gp: script too long");
    return write_text(dir, "loss.gp", script, err);
}

ag_status ag_plot_loss(const char *dir, const ag_loss_plot *p, ag_error *err)
{
    ag_status s = write_loss_script(dir, p, err);
    return s ? s : ag_plot_run(dir, "loss.gp", "loss.png", err);
}

ag_status ag_plot_loss_start(const char *dir, const ag_loss_plot *p, pid_t *pid, ag_error *err)
{
    ag_status s = write_loss_script(dir, p, err);
    return s ? s : start_gnuplot(dir, "loss.gp", "loss.png", pid, err);
}

ag_status ag_plot_loss_wait(pid_t pid, bool block, bool *done, const char *dir, ag_error *err)
{
    bool ended;
    return reap_gnuplot(pid, block, done ? done : &ended, dir, "loss.gp", "loss.png", err);
}

ag_status ag_plot_loss_again(const char *dir, const ag_loss_plot *p, pid_t *pid, bool last, ag_error *err)
{
    bool done = true;
    ag_status s = *pid > 0 ? ag_plot_loss_wait(*pid, last, &done, dir, err) : AG_OK;
    if (done) *pid = 0;   /* the previous one still drawing: this one is skipped */
    if (s || *pid > 0) return s;
    return last ? ag_plot_loss(dir, p, err) : ag_plot_loss_start(dir, p, pid, err);
}

ag_status ag_plot_script(const char *dir, const char *gp, const char *png, const char *script, ag_error *err)
{
    ag_status st = write_text(dir, gp, script, err);
    return st ? st : ag_plot_run(dir, gp, png, err);
}

ag_status ag__plot_built(const char *dir, const char *gp, const char *png, char *s, bool fits, ag_error *err)
{
    ag_status st = fits ? ag_plot_script(dir, gp, png, s, err) : ag_seterr(err, AG_ERR_NOMEM, "%s: script too long", gp);
    free(s);
    return st;
}
