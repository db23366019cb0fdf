/* lr_range.c -- the learning-rate range test of any run (train.h: ag_lr_range_at, ag_lr_range_read):
 * a sweep of the learning rate over a run's steps, then the reading of its metrics.csv. Moved
 * out of char_lm's lr_find.c (issue 31), so that every program on the trainer has --lr-find
 * (lesson 16). Nothing here prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "train.h"
#include "train_impl.h"

double ag_lr_range_at(double lo, double hi, long steps, long it)
{
    double f = steps > 1 ? (double)it / (double)(steps - 1) : 0;
    return lo * pow(hi / lo, f);
}

#define SMOOTH 0.9   /* the smoothed loss: an exponential moving average, bias-corrected */

/* metrics.csv's (lr, loss) of every step into lr [n], loss [n]; *n rows (at most cap). A row
 * of an evaluation alone ("iter,,...") has no lr and is skipped. */
static ag_status read_rows(const char *dir, double *lr, double *loss, int cap, int *n, ag_error *err)
{
    char path[4096], line[1024];
    FILE *f = ag_path_join(path, sizeof path, dir, "metrics.csv") ? fopen(path, "r") : NULL;
    if (!f) return ag_seterr(err, AG_ERR_IO, "--lr-find: cannot read %s/metrics.csv", dir);
    *n = 0;
    while (fgets(line, sizeof line, f) && *n < cap) {
        long it;
        if (sscanf(line, "%ld,%lf,%lf", &it, &lr[*n], &loss[*n]) == 3) (*n)++;
    }
    fclose(f);
    return *n >= 10 ? AG_OK : ag_seterr(err, AG_ERR_ARG, "--lr-find: %d steps in %s/metrics.csv; the test needs 10 "
                                                          "or more (--max-iters)", *n, dir);
}

/* the smoothed losses sm [n], then the steepest fall per unit of ln lr before divergence */
static void analyse(const double *lr, const double *loss, int n, double *sm, ag_lr_range *r)
{
    double avg = 0;
    for (int i = 0; i < n; i++) {
        avg = SMOOTH * avg + (1 - SMOOTH) * loss[i];
        sm[i] = avg / (1 - pow(SMOOTH, i + 1));
    }
    *r = (ag_lr_range){.steps = n, .min_loss = INFINITY};
    for (int i = 0; i < n; i++) {
        if (!isfinite(sm[i]) || (r->min_loss < INFINITY && sm[i] > 2 * r->min_loss)) {
            r->diverged_lr = lr[i];
            break;
        }
        if (sm[i] < r->min_loss) r->min_loss = sm[i], r->min_lr = lr[i];
        int j = i - 5;   /* the slope over 5 steps: one step's is mostly the batch's noise */
        if (j < 5) continue;
        double slope = (sm[i] - sm[j]) / log(lr[i] / lr[j]);
        if (slope < r->steepest_slope) r->steepest_slope = slope, r->steepest_lr = sqrt(lr[i] * lr[j]);
    }
}

static ag_status write_csv(const char *dir, const double *lr, const double *loss, const double *sm, int n,
                           ag_error *err)
{
    char path[4096];
    FILE *f = ag_path_join(path, sizeof path, dir, "lr_find.csv") ? fopen(path, "w") : NULL;
    if (!f) return ag_seterr(err, AG_ERR_IO, "--lr-find: cannot write %s/lr_find.csv", dir);
    fprintf(f, "lr,loss,smoothed\n");
    for (int i = 0; i < n; i++) fprintf(f, "%.6g,%.6f,%.6f\n", lr[i], loss[i], sm[i]);
    return fclose(f) == 0 ? AG_OK : ag_seterr(err, AG_ERR_IO, "--lr-find: cannot write %s/lr_find.csv", dir);
}

/* the program's name as gnuplot's enhanced text writes it ("char\_lm") */
static void gp_text(char *buf, size_t n, const char *s)
{
    size_t k = 0;
    for (; *s && k + 3 < n; s++) {
        if (*s == '_') buf[k++] = '\\';
        buf[k++] = *s;
    }
    buf[k] = '\0';
}

/* lr_find.png: loss against lr on a log axis, the steepest point and the lowest marked */
static ag_status draw(const char *dir, const ag_lr_range *r, ag_error *err)
{
    char s[2048], title[128];
    gp_text(title, sizeof title, ag__train_program());
    snprintf(s, sizeof s,
             "# lr_find.gp -- written by %s train --lr-find; redraw by hand with: gnuplot lr_find.gp\n"
             "set terminal pngcairo size 960,600 font ',10'\nif (!exists('out')) out = 'lr_find.png'\nset output out\n"
             "set datafile separator ','\nset key autotitle columnhead below\nset grid\nset logscale x\n"
             "set format x '%%.0e'\nset xlabel 'learning rate (log scale)'\nset ylabel 'loss'\n"
             "set title '%s: the learning-rate range test (one step at each lr)'\n"
             "set arrow from %g, graph 0 to %g, graph 1 nohead dt 2 lc rgb '#d62728'\n"
             "set arrow from %g, graph 0 to %g, graph 1 nohead dt 3 lc rgb '#1f77b4'\n"
             "plot 'lr_find.csv' using 1:2 with lines lc rgb '#b8b8b8' title 'batch loss', \\\n"
             "     '' using 1:3 with lines lw 2 lc rgb '#1f77b4' title 'smoothed', \\\n"
             "     NaN with lines dt 2 lc rgb '#d62728' title 'steepest fall: lr %.2g', \\\n"
             "     NaN with lines dt 3 lc rgb '#1f77b4' title 'lowest: lr %.2g'\n",
             ag__train_program(), title, r->steepest_lr, r->steepest_lr, r->min_lr, r->min_lr, r->steepest_lr,
             r->min_lr);
    return ag_plot_script(dir, "lr_find.gp", "lr_find.png", s, err);
}

ag_status ag_lr_range_read(const char *dir, ag_lr_range *r, ag_error *err)
{
    enum { CAP = 1 << 16 };
    double *lr = malloc(3 * CAP * sizeof *lr), *loss = lr + CAP, *sm = lr + 2 * CAP;
    int n = 0;
    *r = (ag_lr_range){0};
    if (!lr) return ag_seterr(err, AG_ERR_NOMEM, "--lr-find: out of memory");
    ag_status s = read_rows(dir, lr, loss, CAP, &n, err);
    if (s == AG_OK) analyse(lr, loss, n, sm, r);
    if (s == AG_OK) s = write_csv(dir, lr, loss, sm, n, err);
    if (s == AG_OK) s = draw(dir, r, err);
    free(lr);
    return s;
}
