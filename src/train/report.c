/* report.c -- DIR/report.md, the report card of a run (see train.h): the machine, the build,
 * the config, what the run did and where it ended, a sample and the pictures. Two runs' cards
 * side by side (diff -u a/report.md b/report.md) answer "what changed". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../tensor/blas.h"   /* the BLAS library's own name for its kernels, when it has one */
#include "../tensor/real.h"
#include "train.h"
#include "train_impl.h"

/* The CPU's model name (/proc/cpuinfo's first "model name"), in buf [n]; "unknown" elsewhere. */
static void cpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "unknown");
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp) return;
    char line[512];
    while (fgets(line, sizeof line, fp)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += strspn(colon + 1, " \t") + 1;
        snprintf(buf, n, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    fclose(fp);
}

/* The BLAS and the kernels it chose for this CPU ("OpenBLAS 0.3.21, Haswell kernels"). */
static void blas_name(char *buf, size_t n)
{
#ifdef OPENBLAS_VERSION
    const char *v = OPENBLAS_VERSION;   /* " OpenBLAS 0.3.21 ": its spaces trimmed */
    v += strspn(v, " ");
    size_t len = strlen(v);
    while (len > 0 && v[len - 1] == ' ') len--;
    snprintf(buf, n, "%.*s, %s kernels", (int)len, v, openblas_get_corename());
#else
    snprintf(buf, n, "a CBLAS (not OpenBLAS: its kernels are not named)");
#endif
}

/* A number of the card: "%.4f", or "-" when there is none (NaN). */
static const char *num(char *buf, size_t n, double v)
{
    if (isnan(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, "%.4f", v);
    return buf;
}

static void put_machine(FILE *fp, const ag_run_report *r)
{
    char cpu[256], blas[256];
    cpu_name(cpu, sizeof cpu);
    blas_name(blas, sizeof blas);
    fprintf(fp, "## Machine\n\n| | |\n|---|---|\n| CPU | %s |\n| cores | %ld online, %d threads used |\n",
            cpu, sysconf(_SC_NPROCESSORS_ONLN), r->threads);
    fprintf(fp, "| BLAS | %s |\n| attograd kernels | %s, %s |\n\n", blas, r->kernels ? r->kernels : "-",
            sizeof(ag_real) == sizeof(float) ? "float" : "double");
}

static void put_run(FILE *fp, const ag_run_report *r)
{
    char a[32], b[32];
    fprintf(fp, "## Run\n\n| | |\n|---|---|\n| steps | %ld in this run, ending at iteration %ld%s |\n", r->steps,
            r->iter, r->out_of_time ? " (the time budget ran out)" : "");
    fprintf(fp, "| wall time | %.1f s (the whole run: setup, steps, evaluations, checkpoints) |\n", r->wall_s);
    if (r->wall_s > 0 && r->tokens > 0) fprintf(fp, "| %s/s | %.0f |\n", r->unit ? r->unit : "tokens", r->tokens / r->wall_s);
    fprintf(fp, "| final loss | train %s, val %s |\n", num(a, sizeof a, r->train_loss), num(b, sizeof b, r->val_loss));
    if (r->score_name) fprintf(fp, "| final %s | %s |\n", r->score_name, num(a, sizeof a, r->score));
    if (r->best) fprintf(fp, "| best checkpoint | %s (loss %s) |\n", r->best, num(a, sizeof a, r->best_loss));
    fputs("\n", fp);
}

/* The sample as an indented block (four spaces a line): no text in it can end the block. */
static void put_sample(FILE *fp, const char *sample)
{
    fputs("## Sample\n\n", fp);
    for (const char *p = sample; *p;) {
        size_t k = strcspn(p, "\n");
        fprintf(fp, "    %.*s\n", (int)k, p);
        p += k + (p[k] == '\n');
    }
    fputs("\n", fp);
}

/* n bytes of s in a table cell: its spaces trimmed, a "|" escaped (it would end the cell). */
static void put_cell(FILE *fp, const char *s, size_t n)
{
    while (n > 0 && (*s == ' ' || *s == '\t')) s++, n--;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r')) n--;
    for (size_t i = 0; i < n; i++) fputs(s[i] == '|' ? "\\|" : (char[2]){s[i], 0}, fp);
}

/* "key = value" lines as a table, a row a line (the value "" where a line has no "="). */
static void put_config_kv(FILE *fp, const char *kv)
{
    fputs("| key | value |\n|---|---|\n", fp);
    for (const char *p = kv; *p;) {
        size_t k = strcspn(p, "\n"), eq = strcspn(p, "=\n");
        if (k > 0) {
            fputs("| ", fp);
            put_cell(fp, p, eq);
            fputs(" | ", fp);
            if (eq < k) put_cell(fp, p + eq + 1, k - eq - 1);
            fputs(" |\n", fp);
        }
        p += k + (p[k] == '\n');
    }
    fputs("\n", fp);
}

static bool put_card(FILE *fp, const ag_run_report *r)
{
    fprintf(fp, "# %s: report card\n\n", ag__train_program());
    put_machine(fp, r);
    fprintf(fp, "## Build and config\n\ncommit %s\n\n", r->commit ? r->commit : "unknown");
    if (r->config_json || !r->config_kv) fprintf(fp, "```json\n%s\n```\n\n", r->config_json ? r->config_json : "{}");
    if (r->config_kv) put_config_kv(fp, r->config_kv);
    put_run(fp, r);
    if (r->sample) put_sample(fp, r->sample);
    if (r->pictures && r->pictures[0]) {
        fputs("## Pictures\n\n", fp);
        for (const char *const *p = r->pictures; *p; p++) fprintf(fp, "![%s](%s)\n", *p, *p);
        fputs("\n", fp);
    }
    return !ferror(fp);
}

ag_status ag_report_write(const char *dir, const ag_run_report *r, ag_error *err)
{
    char path[4096], tmp[4096 + 32];
    if (!ag_path_join(path, sizeof path, dir, "report.md")) return ag_seterr(err, AG_ERR_ARG, "%s: path too long", dir);
    FILE *fp = ag_file_create(path, tmp, sizeof tmp, err);
    if (!fp) return AG_ERR_IO;
    if (!put_card(fp, r)) {
        ag_file_discard(fp, tmp);
        return ag_seterr(err, AG_ERR_IO, "%s: write failed", path);
    }
    return ag_file_commit(fp, tmp, path, false, err);
}
