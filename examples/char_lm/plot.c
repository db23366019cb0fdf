/* plot.c -- loss.png, attn.png and attention heat maps with gnuplot (see plot.h).
 * gnuplot runs as a child process (fork + exec, no shell, so any directory name is safe) with
 * the script's directory as its working directory; its own messages are discarded.
 *
 * Nothing is written through a symbolic link planted in the directory: the scripts and the
 * .dat file are written beside their name and renamed over it (rundir.h), and gnuplot draws
 * into a file we create afresh ("loss.png.tmp.<pid>", passed as the script's variable `out`),
 * renamed over the picture once gnuplot has succeeded. Run by hand, a script draws into its
 * usual name.
 *
 * No wait without a bound (issue 19): a gnuplot that never ends (a stuck font cache, a hung
 * file system) must not hold training, nor a Ctrl-C. gnuplot runs in its own process group
 * with an alarm set before the exec (alarms survive it), so even one drawing in the background
 * dies after lm_plot_timeout() seconds; every wait for it looks at the child every 10 ms and
 * kills the group when that time is up, or PLOT_GRACE_S after a stop signal (lm_plot_set_stop),
 * so that the signal is answered within a second. Either is an AG_ERR_IO that says so. */
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
#include "checkpoint.h"
#include "plot.h"
#include "rundir.h"
#include "tensor/debug.h"   /* ag_now_s */

#define PLOT_PATH 4200

/* dir/png and the temporary picture gnuplot draws into, dir/png.tmp.<pid>. */
static ag_status picture_paths(const char *dir, const char *png, char *path, char *tmp, ag_error *err)
{
    if (!lm_path_join(path, PLOT_PATH, dir, png) ||
        snprintf(tmp, PLOT_PATH, "%s.tmp.%ld", path, (long)getpid()) >= PLOT_PATH)
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    return AG_OK;
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
    FILE *fp = lm_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    fclose(fp);
    const char *base = strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : tmp;   /* gnuplot runs in dir */
    if (!out_assignment(assign, sizeof assign, base)) {
        unlink(tmp);
        return ag_seterr(err, AG_ERR_ARG, "%s: path too long", path);
    }
    unsigned alarm_s = (unsigned)ceil(lm_plot_timeout());
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

static const volatile sig_atomic_t *stop_flag;   /* lm_plot_set_stop: main.c's, for the program's life */

void lm_plot_set_stop(const volatile sig_atomic_t *stop) { stop_flag = stop; }

double lm_plot_timeout(void)
{
    const char *s = getenv("CHAR_LM_PLOT_TIMEOUT");
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
    double limit = lm_plot_timeout();
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

/* Runs `gnuplot script` in dir to the end; png is the picture it draws. */
static ag_status run_gnuplot(const char *dir, const char *script, const char *png, ag_error *err)
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
    if (!lm_path_join(path, sizeof path, dir, name)) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    return lm_write_file(path, text, err);
}

/* loss.gp: the batch loss, the evaluations, the learning rate on the right-hand axis, and the
 * line ln V: the loss of a model that gives every character the same probability, where a
 * freshly initialised one starts (its logits are all near 0). */
static ag_status write_loss_script(const char *dir, bool with_val, int V, ag_error *err)
{
    char script[2048];
    int n = snprintf(script, sizeof script,
        "# loss.gp -- written by char_lm train; redraw by hand with: gnuplot loss.gp (in this directory)\n"
        "# metrics.csv columns: iter,lr,loss,train_loss,val_loss,tokens_per_s (empty: not measured)\n"
        "set terminal pngcairo size 960,600 font ',10'\n"
        "if (!exists('out')) out = 'loss.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set key autotitle columnhead below\n"
        "set title 'char\\_lm: loss per character (nats)'\n"
        "set xlabel 'iteration'\n"
        "set ylabel 'cross-entropy'\n"
        "set y2label 'learning rate'\n"
        "set ytics nomirror\n"
        "set y2tics\n"
        "set y2range [0:*]\n"
        "set grid\n"
        "plot %.6f with lines dt 2 lw 1.5 lc rgb '#808080' title 'ln V = ln %d: every character equally likely', \\\n"
        "     'metrics.csv' using 1:3 with lines lc rgb '#b8b8b8' title 'batch loss', \\\n"
        "     '' using 1:4 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#1f77b4' title 'train (eval)'%s, \\\n"
        "     '' using 1:2 axes x1y2 with lines lw 1.5 lc rgb '#2ca02c' title 'learning rate (right axis)'\n",
        log((double)V), V,
        with_val ? ", \\\n     '' using 1:5 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#d62728' title 'val (eval)'" : "");
    if (n < 0 || (size_t)n >= sizeof script) return ag_seterr(err, AG_ERR_ARG, "loss.gp: script too long");
    return write_text(dir, "loss.gp", script, err);
}

ag_status lm_plot_loss(const char *dir, bool with_val, int V, ag_error *err)
{
    ag_status s = write_loss_script(dir, with_val, V, err);
    return s ? s : run_gnuplot(dir, "loss.gp", "loss.png", err);
}

ag_status lm_plot_loss_start(const char *dir, bool with_val, int V, pid_t *pid, ag_error *err)
{
    ag_status s = write_loss_script(dir, with_val, V, err);
    return s ? s : start_gnuplot(dir, "loss.gp", "loss.png", pid, err);
}

ag_status lm_plot_loss_wait(pid_t pid, bool block, bool *done, const char *dir, ag_error *err)
{
    return reap_gnuplot(pid, block, done, dir, "loss.gp", "loss.png", err);
}

/* The script s (malloc'd; freed here) written to dir/gp when it fitted its buffer, then gnuplot
 * run on it to draw dir/png. */
static ag_status draw_script(const char *dir, const char *gp, const char *png, char *s, bool fitted, ag_error *err)
{
    ag_status st = AG_ERR_NOMEM;
    if (fitted) st = write_text(dir, gp, s, err);
    else ag_seterr(err, st, "%s: script too long", gp);
    free(s);
    return st ? st : run_gnuplot(dir, gp, png, err);
}

ag_status lm_plot_script(const char *dir, const char *gp, const char *png, const char *script, ag_error *err)
{
    ag_status st = write_text(dir, gp, script, err);
    return st ? st : run_gnuplot(dir, gp, png, err);
}

// --- attention statistics over the run ---

ag_status lm_plot_attn_stats(const char *dir, int n_layer, int T, ag_error *err)
{
    /* uniform weights over the keys 0..t, averaged like the statistics over t = 1 .. T-1 */
    double u_ent = 0, u_peak = 0;
    for (int t = 1; t < T; t++) {
        u_ent += log(t + 1.0) / (T - 1);
        u_peak += 1.0 / (t + 1.0) / (T - 1);
    }
    size_t cap = 4096 + (size_t)n_layer * 256, len = 0;
    char *s = malloc(cap);
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "attn.gp: out of memory");
#define PUT(...) len += (size_t)snprintf(s + len, len < cap ? cap - len : 0, __VA_ARGS__)
    PUT("# attn.gp -- written by char_lm train --log-attn-stats; redraw by hand with: gnuplot attn.gp\n"
        "# metrics.csv columns 7, 8, ...: attn_entropy_L0, attn_max_L0, attn_entropy_L1, ...\n"
        "set terminal pngcairo size 960,720 font ',10' noenhanced\n"
        "if (!exists('out')) out = 'attn.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set grid\n"
        "set key outside right top\n"
        "set lmargin 10\n"
        "set rmargin 22\n"
        "set multiplot layout 2,1 title 'char_lm: attention at each evaluation (mean over queries t >= 1, heads, batch)'\n"
        "set title 'attention entropy (nats): high = spread out, 0 = all weight on one key'\n"
        "set ylabel 'entropy'\n"
        "set yrange [0:%.4f]\n"
        "plot %.6f with lines dt 2 lw 2 lc rgb '#808080' title 'uniform weights', \\\n"
        "     %.6f with lines dt 4 lw 1.5 lc rgb '#404040' title 'ln T (the most a row can have)'", log((double)T) * 1.05 + 1e-3, u_ent,
        log((double)T));
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     'metrics.csv' using 1:%d with linespoints pt 7 ps 0.6 lw 2 lc %d title 'layer %d'", 7 + 2 * l,
            l + 1, l);
    PUT("\nset title 'peak attention weight: 1 = saturated (one-hot rows)'\n"
        "set ylabel 'largest weight'\n"
        "set xlabel 'iteration'\n"
        "set yrange [0:1.05]\n"
        "plot %.6f with lines dt 2 lw 2 lc rgb '#808080' title 'uniform weights'", u_peak);
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     'metrics.csv' using 1:%d with linespoints pt 7 ps 0.6 lw 2 lc %d title 'layer %d'", 8 + 2 * l,
            l + 1, l);
    PUT("\nunset multiplot\n");
#undef PUT
    return draw_script(dir, "attn.gp", "attn.png", s, len < cap, err);
}

// --- training dynamics over the run ---

ag_status lm_plot_dynamics(const char *dir, int n_layer, ag_error *err)
{
    size_t cap = 4096 + (size_t)n_layer * 512, len = 0;
    char *s = malloc(cap);
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "dynamics.gp: out of memory");
#define PUT(...) len += (size_t)snprintf(s + len, len < cap ? cap - len : 0, __VA_ARGS__)
    PUT("# dynamics.gp -- written by char_lm train --log-dynamics; redraw by hand with: gnuplot dynamics.gp\n"
        "# dynamics.csv columns: iter,lr,grad_norm,clip, then per layer l (from column 5 + 4 l):\n"
        "# grad_attn_Ll,grad_mlp_Ll,update_attn_Ll,update_mlp_Ll\n"
        "set terminal pngcairo size 960,860 font ',10' noenhanced\n"
        "if (!exists('out')) out = 'dynamics.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set grid\n"
        "set key below\n"
        "set lmargin 10\n"
        "set rmargin 10\n"
        "set logscale y\n"
        "set format y '%%.0e'\n"
        "set multiplot layout 2,1 title 'char_lm: how each step moves the weights (solid: attention, dashed: MLP)'\n"
        "set title 'gradient norm ||dW|| per layer, before the clip'\n"
        "set ylabel '||dW||'\n"
        "plot ");
    for (int l = 0; l < n_layer; l++)
        PUT("%s'dynamics.csv' using 1:%d with lines lw 2 lc %d title 'attn L%d', \\\n"
            "     '' using 1:%d with lines lw 2 dt 2 lc %d title 'mlp L%d'", l ? ", \\\n     " : "", 5 + 4 * l, l + 1, l,
            6 + 4 * l, l + 1, l);
    PUT("\nset title 'update / weight ||W_after - W_before|| / ||W_before|| per step'\n"
        "set ylabel 'update / weight'\n"
        "set xlabel 'iteration'\n"
        "set y2label 'learning rate'\n"
        "set y2tics\n"
        "set ytics nomirror\n"
        "set logscale y2\n"
        "set format y2 '%%.0e'\n"
        "# the 1e-3 line inside the frame, not on it (autoscale put it there: issue 33)\n"
        "lo = 4e-4\n"
        "do for [c = 7:%d:4] { do for [k = 0:1] { stats 'dynamics.csv' using (column(c + k)) nooutput;"
        " if (STATS_min > 0 && STATS_min / 2.5 < lo) { lo = STATS_min / 2.5 } } }\n"
        "set yrange [lo:*]\n"
        "plot 1e-3 with lines dt 3 lw 1.5 lc rgb '#808080' title '1e-3 (makemore rule of thumb)', \\\n"
        "     'dynamics.csv' using 1:2 axes x1y2 with lines lw 1.5 lc rgb '#2ca02c' title 'learning rate (right)'",
        3 + 4 * n_layer);
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     '' using 1:%d with lines lw 2 lc %d title 'attn L%d', \\\n"
            "     '' using 1:%d with lines lw 2 dt 2 lc %d title 'mlp L%d'", 7 + 4 * l, l + 1, l, 8 + 4 * l, l + 1, l);
    PUT("\nunset multiplot\n");
#undef PUT
    return draw_script(dir, "dynamics.gp", "dynamics.png", s, len < cap, err);
}

// --- attention heat maps ---

/* s as a gnuplot double-quoted string: backslash and double quote escaped. */
static void put_quoted(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        if (*s == '\\' || *s == '"') fputc('\\', fp);
        fputc(*s, fp);
    }
    fputc('"', fp);
}

/* "--tics-- ("a" 0, "b" 1, ...)" */
static void put_tics(FILE *fp, const char *axis, const char *const *labels, int T)
{
    fprintf(fp, "set %stics (", axis);
    for (int i = 0; i < T; i++) {
        if (i) fputs(", ", fp);
        put_quoted(fp, labels[i]);
        fprintf(fp, " %d", i);
    }
    fputs(")\n", fp);
}

/* png's directory (gnuplot runs there, so the script names files without a path) and its
 * base name, without ".png". */
static ag_status split_png(const char *png, char *dir, size_t dir_len, char *base, size_t base_len, ag_error *err)
{
    size_t n = strlen(png);
    if (n < 5 || strcmp(png + n - 4, ".png") != 0)
        return ag_seterr(err, AG_ERR_ARG, "--out must end in .png (got '%s')", png);
    const char *slash = strrchr(png, '/');
    if (slash) snprintf(dir, dir_len, "%.*s", (int)(slash - png) > 0 ? (int)(slash - png) : 1, png);
    else snprintf(dir, dir_len, ".");
    const char *file = slash ? slash + 1 : png;
    if (strlen(file) - 4 >= base_len || !*file) return ag_seterr(err, AG_ERR_ARG, "--out: file name too long");
    snprintf(base, base_len, "%.*s", (int)(strlen(file) - 4), file);
    return AG_OK;
}

/* The weights W [n_maps,T,T] into path: one T x T block per map, NaN (blank) above the diagonal. */
static ag_status write_weights(const char *path, const ag_real *W, int n_maps, int T, ag_error *err)
{
    char tmp[PLOT_PATH];
    FILE *fp = lm_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    for (int k = 0; k < n_maps; k++) {
        if (k) fputs("\n\n", fp);
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++) {
                double w = (double)W[((size_t)k * T + i) * T + j];
                if (isnan(w)) fprintf(fp, "%sNaN", j ? " " : "");
                else fprintf(fp, "%s%.6f", j ? " " : "", w);
            }
            fputc('\n', fp);
        }
    }
    return lm_file_commit(fp, tmp, path, false, err);
}

/* The script's settings: the picture's size (a grid of panels), the colour scale, the axes
 * labelled with the characters, and the title over all panels. */
static void put_heatmap_setup(FILE *fp, const char *base, int n_maps, int T, const char *const *labels,
                              const char *title)
{
    int cols = 1;
    while (cols * cols < n_maps) cols++;
    int rows = (n_maps + cols - 1) / cols;
    int panel = T > 32 ? 720 : 480;
    fprintf(fp, "# %s.gp -- written by char_lm attn; redraw with: gnuplot %s.gp (in this directory)\n", base, base);
    fprintf(fp, "# %s.dat: one %d x %d block per panel (gnuplot index k); row i = query i, column j = key j;\n"
                "# NaN = masked (key in the future), drawn blank\n", base, T, T);
    fprintf(fp, "set terminal pngcairo size %d,%d font ',10' noenhanced\n", cols * panel + 80, rows * panel + 60);
    fputs("if (!exists('out')) out = ", fp);
    char out_name[1100];
    snprintf(out_name, sizeof out_name, "%s.png", base);
    put_quoted(fp, out_name);
    fputs("\nset output out\n"
          "set palette defined (0 '#440154', 0.25 '#3b528b', 0.5 '#21918c', 0.75 '#5ec962', 1 '#fde725')\n"
          "set cbrange [0:1]\n"
          "set cblabel 'attention weight'\n", fp);
    fprintf(fp, "set xrange [-0.5:%d.5]\nset yrange [%d.5:-0.5]\nset size ratio -1\n", T - 1, T - 1);
    fputs("set xlabel 'key: the position attended to'\nset ylabel 'query: the position attending'\n", fp);
    fputs("set tics scale 0\n", fp);
    if (T > 24) fputs("set tics font ',7'\n", fp);
    put_tics(fp, "x", labels, T);
    put_tics(fp, "y", labels, T);
    fputs("set multiplot layout ", fp);
    fprintf(fp, "%d,%d title ", rows, cols);
    put_quoted(fp, title);
    fputc('\n', fp);
}

/* One panel per map: block k of base.dat as an image, titled titles[k]. */
static void put_panels(FILE *fp, const char *base, int n_maps, int T, const char *const *titles)
{
    char dat_name[1100];
    snprintf(dat_name, sizeof dat_name, "%s.dat", base);
    for (int k = 0; k < n_maps; k++) {
        fputs("set title ", fp);
        put_quoted(fp, titles[k]);
        fputs("\nplot ", fp);
        put_quoted(fp, dat_name);
        fprintf(fp, " index %d matrix with image notitle", k);
        if (T <= 12 && n_maps <= 4)   /* small enough to print each weight in its cell */
            fprintf(fp, ", \\\n     '' index %d matrix using 1:2:($3 < 0.6 ? sprintf('%%.2f', $3) : '') with labels"
                        " tc rgb 'white' notitle, \\\n     '' index %d matrix using 1:2:($3 >= 0.6 ?"
                        " sprintf('%%.2f', $3) : '') with labels tc rgb 'black' notitle", k, k);
        fputc('\n', fp);
    }
}

static ag_status write_heatmap_script(const char *path, const char *base, int n_maps, int T,
                                      const char *const *labels, const char *const *titles, const char *title,
                                      ag_error *err)
{
    char tmp[PLOT_PATH];
    FILE *fp = lm_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    put_heatmap_setup(fp, base, n_maps, T, labels, title);
    put_panels(fp, base, n_maps, T, titles);
    fputs("unset multiplot\n", fp);
    return lm_file_commit(fp, tmp, path, false, err);
}

ag_status lm_plot_attention(const char *png, const ag_real *W, int n_maps, int T, const char *const *labels,
                            const char *const *titles, const char *title, ag_error *err)
{
    char dir[4096], base[1024], path[4096 + 1024 + 16], script[1100];
    ag_status s = split_png(png, dir, sizeof dir, base, sizeof base, err);
    if (s) return s;
    snprintf(path, sizeof path, "%s/%s.dat", dir, base);
    if ((s = write_weights(path, W, n_maps, T, err))) return s;
    snprintf(path, sizeof path, "%s/%s.gp", dir, base);
    if ((s = write_heatmap_script(path, base, n_maps, T, labels, titles, title, err))) return s;
    snprintf(script, sizeof script, "%s.gp", base);
    char png_name[1100];
    snprintf(png_name, sizeof png_name, "%s.png", base);
    return run_gnuplot(dir, script, png_name, err);
}
