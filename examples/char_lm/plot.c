/* plot.c -- DIR/loss.gp and DIR/loss.png with gnuplot (see plot.h).
 * gnuplot runs as a child process (fork + exec, no shell, so any directory name is safe) with
 * DIR as its working directory; its own messages are discarded. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "checkpoint.h"
#include "plot.h"

static const char script_head[] =
    "# loss.gp -- written by char_lm train; redraw by hand with: gnuplot loss.gp (in this directory)\n"
    "# metrics.csv columns: iter,lr,loss,train_loss,val_loss,tokens_per_s (empty: not measured)\n"
    "set terminal pngcairo size 960,560 font ',10'\n"
    "set output 'loss.png'\n"
    "set datafile separator ','\n"
    "set key autotitle columnhead top right\n"
    "set title 'char\\_lm: loss per character (nats)'\n"
    "set xlabel 'iteration'\n"
    "set ylabel 'cross-entropy'\n"
    "set grid\n"
    "plot 'metrics.csv' using 1:3 with lines lc rgb '#b8b8b8' title 'batch loss', \\\n"
    "     '' using 1:4 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#1f77b4' title 'train (eval)'";
static const char script_val[] =
    ", \\\n     '' using 1:5 with linespoints pt 7 ps 0.7 lw 2 lc rgb '#d62728' title 'val (eval)'";

ag_status lm_plot_loss(const char *dir, bool with_val, char *err, size_t errlen)
{
    char path[4096];
    if (!lm_path_join(path, sizeof path, dir, "loss.gp")) {
        snprintf(err, errlen, "%s: path too long", dir);
        return AG_ERR_ARG;
    }
    FILE *fp = fopen(path, "w");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
        return AG_ERR_IO;
    }
    int ok = fputs(script_head, fp) >= 0 && (!with_val || fputs(script_val, fp) >= 0) && fputs("\n", fp) >= 0;
    if (fclose(fp) != 0 || !ok) {
        snprintf(err, errlen, "%s: write failed: %s", path, strerror(errno));
        return AG_ERR_IO;
    }
    fflush(NULL);   /* the child must not inherit and re-flush our buffered output */
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "cannot start gnuplot: %s", strerror(errno));
        return AG_ERR_IO;
    }
    if (pid == 0) {   /* child: only async-signal-safe calls until exec */
        int null = open("/dev/null", O_RDWR);
        if (null >= 0) {
            dup2(null, 0);
            dup2(null, 1);
            dup2(null, 2);
        }
        if (chdir(dir) != 0) _exit(126);
        execlp("gnuplot", "gnuplot", "loss.gp", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            snprintf(err, errlen, "waiting for gnuplot: %s", strerror(errno));
            return AG_ERR_IO;
        }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return AG_OK;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        snprintf(err, errlen, "gnuplot not found, so no loss.png (install it: apt-get install gnuplot-nox)");
    else
        snprintf(err, errlen, "gnuplot failed on %s (status %d); loss.png not updated", path,
                 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return AG_ERR_IO;
}
