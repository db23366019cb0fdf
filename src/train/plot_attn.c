/* plot_attn.c -- pictures of attention (plot_attn.h): the entropy and peak of every layer over
 * a run, and heat maps of one layer's heads, as gnuplot scripts that plot.c's plotter
 * (ag_plot_script, ag_plot_run) runs, every wait for it bounded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "plot_attn.h"
#include "train.h"
#include "train_impl.h"   /* ag__train_program, ag__plot_built */

// --- attention statistics over the run ---

ag_status ag_plot_attn_stats(const char *dir, int col, int n_layer, int T, ag_error *err)
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
    const char *prog = ag__train_program();
    PUT("# attn.gp -- written by %s train --log-attn-stats; redraw by hand with: gnuplot attn.gp\n"
        "# metrics.csv columns %d, %d, ...: attn_entropy_L0, attn_max_L0, attn_entropy_L1, ...\n"
        "set terminal pngcairo size 960,720 font ',10' noenhanced\n"
        "if (!exists('out')) out = 'attn.png'\n"
        "set output out\n"
        "set datafile separator ','\n"
        "set grid\n"
        "set key outside right top\n"
        "set lmargin 10\n"
        "set rmargin 22\n"
        "set multiplot layout 2,1 title '%s: attention at each evaluation (mean over queries t >= 1, heads, batch)'\n"
        "set title 'attention entropy (nats): high = spread out, 0 = all weight on one key'\n"
        "set ylabel 'entropy'\n"
        "set yrange [0:%.4f]\n"
        "plot %.6f with lines dt 2 lw 2 lc rgb '#808080' title 'uniform weights', \\\n"
        "     %.6f with lines dt 4 lw 1.5 lc rgb '#404040' title 'ln T (the most a row can have)'", prog, col, col + 1, prog,
        log((double)T) * 1.05 + 1e-3, u_ent, log((double)T));
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     'metrics.csv' using 1:%d with linespoints pt 7 ps 0.6 lw 2 lc %d title 'layer %d'", col + 2 * l,
            l + 1, l);
    PUT("\nset title 'peak attention weight: 1 = saturated (one-hot rows)'\n"
        "set ylabel 'largest weight'\n"
        "set xlabel 'iteration'\n"
        "set yrange [0:1.05]\n"
        "plot %.6f with lines dt 2 lw 2 lc rgb '#808080' title 'uniform weights'", u_peak);
    for (int l = 0; l < n_layer; l++)
        PUT(", \\\n     'metrics.csv' using 1:%d with linespoints pt 7 ps 0.6 lw 2 lc %d title 'layer %d'", col + 1 + 2 * l,
            l + 1, l);
    PUT("\nunset multiplot\n");
#undef PUT
    return ag__plot_built(dir, "attn.gp", "attn.png", s, len < cap, err);
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
static ag_status split_png(const char *png, const char *what, char *dir, size_t dir_len, char *base, size_t base_len,
                           ag_error *err)
{
    size_t n = strlen(png);
    if (n < 5 || strcmp(png + n - 4, ".png") != 0)
        return ag_seterr(err, AG_ERR_ARG, "%s must end in .png (got '%s')", what, png);
    const char *slash = strrchr(png, '/');
    if (slash) snprintf(dir, dir_len, "%.*s", (int)(slash - png) > 0 ? (int)(slash - png) : 1, png);
    else snprintf(dir, dir_len, ".");
    const char *file = slash ? slash + 1 : png;
    if (strlen(file) - 4 >= base_len || !*file) return ag_seterr(err, AG_ERR_ARG, "%s: file name too long", what);
    snprintf(base, base_len, "%.*s", (int)(strlen(file) - 4), file);
    return AG_OK;
}

static int n_panels(const ag_attn_picture *p) { return p->head < 0 ? p->H : 1; }

/* The weights into path: one T x T block per panel, NaN (blank) above the diagonal. */
static ag_status write_weights(const char *path, const ag_attn_picture *p, ag_error *err)
{
    char tmp[4200];
    FILE *fp = ag_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    int T = p->T;
    for (int k = 0; k < n_panels(p); k++) {
        if (k) fputs("\n\n", fp);
        const ag_real *a = p->A + (size_t)(p->head < 0 ? k : p->head) * T * T;   // [T,T] head h
        for (int i = 0; i < T; i++) {
            for (int j = 0; j < T; j++) {   /* the future (j > i) is masked: NaN, drawn blank */
                double w = j > i ? NAN : (double)a[(size_t)i * T + j];
                if (isnan(w)) fprintf(fp, "%sNaN", j ? " " : "");
                else fprintf(fp, "%s%.6f", j ? " " : "", w);
            }
            fputc('\n', fp);
        }
    }
    return ag_file_commit(fp, tmp, path, false, err);
}

/* The script's settings: the picture's size (a grid of panels), the colour scale, the axes
 * labelled with the tokens, and the title over all panels. */
static void put_heatmap_setup(FILE *fp, const char *base, const ag_attn_picture *p)
{
    int n_maps = n_panels(p), T = p->T, cols = 1;
    while (cols * cols < n_maps) cols++;
    int rows = (n_maps + cols - 1) / cols;
    int panel = T > 32 ? 720 : 480;
    fprintf(fp, "# %s.gp -- written by %s; redraw with: gnuplot %s.gp (in this directory)\n", base, p->by, base);
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
    put_tics(fp, "x", p->labels, T);
    put_tics(fp, "y", p->labels, T);
    fputs("set multiplot layout ", fp);
    fprintf(fp, "%d,%d title ", rows, cols);
    put_quoted(fp, p->title);
    fputc('\n', fp);
}

/* One panel per head: block k of base.dat as an image, titled "layer L, head h". */
static void put_panels(FILE *fp, const char *base, const ag_attn_picture *p)
{
    char dat_name[1100], title[64];
    snprintf(dat_name, sizeof dat_name, "%s.dat", base);
    int n_maps = n_panels(p);
    for (int k = 0; k < n_maps; k++) {
        snprintf(title, sizeof title, "layer %d, head %d", p->layer, p->head < 0 ? k : p->head);
        fputs("set title ", fp);
        put_quoted(fp, title);
        fputs("\nplot ", fp);
        put_quoted(fp, dat_name);
        fprintf(fp, " index %d matrix with image notitle", k);
        if (p->T <= 12 && n_maps <= 4)   /* small enough to print each weight in its cell */
            fprintf(fp, ", \\\n     '' index %d matrix using 1:2:($3 < 0.6 ? sprintf('%%.2f', $3) : '') with labels"
                        " tc rgb 'white' notitle, \\\n     '' index %d matrix using 1:2:($3 >= 0.6 ?"
                        " sprintf('%%.2f', $3) : '') with labels tc rgb 'black' notitle", k, k);
        fputc('\n', fp);
    }
}

static ag_status write_heatmap_script(const char *path, const char *base, const ag_attn_picture *p, ag_error *err)
{
    char tmp[4200];
    FILE *fp = ag_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    put_heatmap_setup(fp, base, p);
    put_panels(fp, base, p);
    fputs("unset multiplot\n", fp);
    return ag_file_commit(fp, tmp, path, false, err);
}

ag_status ag_plot_attention(const char *png, const ag_attn_picture *p, ag_error *err)
{
    char dir[4096], base[1024], path[4096 + 1024 + 16], script[1100];
    ag_status s = split_png(png, p->what, dir, sizeof dir, base, sizeof base, err);
    if (s) return s;
    snprintf(path, sizeof path, "%s/%s.dat", dir, base);
    if ((s = write_weights(path, p, err))) return s;
    snprintf(path, sizeof path, "%s/%s.gp", dir, base);
    if ((s = write_heatmap_script(path, base, p, err))) return s;
    snprintf(script, sizeof script, "%s.gp", base);
    char png_name[1100];
    snprintf(png_name, sizeof png_name, "%s.png", base);
    return ag_plot_run(dir, script, png_name, err);
}
