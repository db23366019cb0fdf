/* progress.c -- the progress line of a run's log (train.h): redrawn in place on a terminal, a
 * line at each log step elsewhere, and every other line of the log clearing it first, so that a
 * terminal never shows a line drawn over half of another. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "train.h"
#include "../tensor/debug.h"   /* ag_now_s */

#define CLEAR "\r\033[K"       /* back to the line's start, and the line erased */

static const char *const progress_names[] = {"auto", "lines", "tty"};   /* [ag_progress_mode] */
const ag_switch ag_progress_switch = {"progress", 3, progress_names, NULL};
#define REDRAW_S 0.1           /* a terminal's line is redrawn at most this often */

void ag_progress_init(ag_progress *p, FILE *log, ag_progress_mode mode, int ranks)
{
    *p = (ag_progress){.log = log};
    p->tty = log && (mode == AG_PROGRESS_TTY || (mode == AG_PROGRESS_AUTO && ranks <= 1 && isatty(fileno(log))));
}

void ag_progress_step(ag_progress *p, double dt, bool first)
{
    p->ema_s = first ? (dt > 0 ? dt : 1e-9) : 0.9 * p->ema_s + 0.1 * dt;   /* never a rate of infinity */
}

bool ag_progress_due(const ag_progress *p, bool due, bool final)
{
    if (!p->log) return false;
    return p->tty ? final || ag_now_s() - p->shown_at >= REDRAW_S : due;
}

void ag_progress_show(ag_progress *p, const char *fmt, ...)
{
    if (!p->log) return;
    if (p->tty) fputs(CLEAR, p->log);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->log, fmt, ap);
    va_end(ap);
    if (!p->tty) fputs("\n", p->log);
    fflush(p->log);
    p->shown_at = ag_now_s();
}

void ag_progress_vline(const ag_progress *p, const char *fmt, va_list ap)
{
    if (!p->log) return;
    if (p->tty) fputs(CLEAR, p->log);
    vfprintf(p->log, fmt, ap);
    fputs("\n", p->log);
    fflush(p->log);
}

void ag_progress_line(const ag_progress *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag_progress_vline(p, fmt, ap);
    va_end(ap);
}

void ag_progress_clear(const ag_progress *p)
{
    if (p->log && p->tty) fputs(CLEAR, p->log);
}

void ag_progress_break(const ag_progress *p)
{
    if (p->log && p->tty) fputs("\n", p->log);
}

ag_status ag_log_written(FILE *log, const char *dir, ag_error *err)
{
    if (!log || (fflush(log) == 0 && !ferror(log))) return AG_OK;
    int e = errno;
    char kept[1024];
    ag_ckpt_kept(dir, kept, sizeof kept);
    return ag_seterr(err, AG_ERR_IO, "%s: write failed: %s; stopped; %s", log == stdout ? "stdout" : "the log",
                     strerror(e), kept);
}
