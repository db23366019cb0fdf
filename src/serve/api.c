/* api.c -- serve's answers as JSON text (serve.h, serve_impl.h, docs/serve.md): a token with its
 * distribution, the run, its CSVs. Nothing here knows HTTP; http.c sends what these return. */
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "serve_impl.h"
#include "../train/train_impl.h"   /* AG_LOCK_NAME, ag_ckpt_pointer, ag_path_join, ag__train_program */

/* Compact, one line, reals with 6 significant digits. */
static char *dump(json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(6)) : NULL;
    json_decref(o);
    return s;
}

char *ag_serve_error(const char *why)
{
    return dump(json_pack("{s:s}", "error", why));
}

// --- a sample's token ---

typedef struct {
    void (*fn)(const void *u, int id, char *out);
    const void *u;
} labeler;

static json_t *label_json(const labeler *l, int id)
{
    char c[16] = "";
    l->fn(l->u, id, c);
    return json_string(c);
}

/* The k-th largest of logits [V] (k in 1..V). */
static double kth_largest(const ag_real *logits, int V, int k)
{
    ag_real *s = malloc((size_t)V * sizeof *s);
    if (!s) return NAN;
    memcpy(s, logits, (size_t)V * sizeof *s);
    for (int j = 0; j < k; j++)   /* partial selection: k <= V passes */
        for (int i = j + 1; i < V; i++)
            if (s[i] > s[j]) { ag_real t = s[i]; s[i] = s[j]; s[j] = t; }
    double v = (double)s[k - 1];
    free(s);
    return v;
}

/* The 5 most likely tokens of the distribution a draw takes from: softmax of logits / temperature
 * over the top_k largest (all when top_k is 0). */
static json_t *top5(const ag_real *logits, int V, const ag_serve_req *r, const labeler *l)
{
    int best[5], nb = 0;
    double max = -INFINITY, sum = 0, kth = -INFINITY;
    for (int i = 0; i < V; i++) max = fmax(max, (double)logits[i]);
    for (int k = 0; k < 5 && k < V; k++) {   /* the 5 largest, in order (V is small) */
        int b = -1;
        for (int i = 0; i < V; i++) {
            bool taken = false;
            for (int j = 0; j < nb; j++) taken |= best[j] == i;
            if (!taken && (b < 0 || logits[i] > logits[b])) b = i;
        }
        best[nb++] = b;
    }
    if (r->top_k > 0 && r->top_k < V && isnan(kth = kth_largest(logits, V, r->top_k))) return NULL;
    for (int i = 0; i < V; i++)
        if ((double)logits[i] >= kth) sum += exp(((double)logits[i] - max) / r->temperature);
    json_t *a = json_array();
    for (int k = 0; k < nb; k++) {
        double p = (double)logits[best[k]] >= kth ? exp(((double)logits[best[k]] - max) / r->temperature) / sum : 0;
        json_array_append_new(a, json_pack("{s:o,s:f}", "c", label_json(l, best[k]), "p", p));
    }
    return a;
}

char *ag_serve_token(int id, const ag_real *logits, int V, const ag_serve_req *r,
                     void (*label)(const void *u, int id, char *out), const void *u)
{
    const labeler l = { label, u };
    return dump(json_pack("{s:o,s:i,s:o*}", "c", label_json(&l, id), "id", id, "top", top5(logits, V, r, &l)));
}

// --- the run ---

/* The pid of the train that holds DIR/train.lock, or 0: F_GETLK asks without taking anything. */
static long trainer_pid(const char *dir)
{
    char path[4096];
    if (!ag_path_join(path, sizeof path, dir, AG_LOCK_NAME)) return 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
    long pid = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? (long)fl.l_pid : 0;
    close(fd);
    return pid;
}

static json_t *pointer_json(const char *dir, const char *which)
{
    ag_error e = {0};
    char name[64];
    return ag_ckpt_pointer(dir, which, name, &e) ? json_null() : json_string(name);
}

const char *const ag__serve_pictures[] = {"loss.png", "dynamics.png", "activations.png", "lr_find.png", "attn.png",
                                          NULL};

/* The run's checkpoint directories (ckpt-<digits>), in order, and which of the pictures it has. */
static void files_json(const char *dir, json_t *o)
{
    json_t *ckpts = json_array(), *pics = json_array();
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *d = names[i]->d_name;
        if (strncmp(d, "ckpt-", 5) == 0 && d[5] && strspn(d + 5, "0123456789") == strlen(d + 5))
            json_array_append_new(ckpts, json_string(d));
        free(names[i]);
    }
    free(names);
    for (int i = 0; ag__serve_pictures[i]; i++) {
        struct stat sb;
        char path[4096];
        if (ag_path_join(path, sizeof path, dir, ag__serve_pictures[i]) && lstat(path, &sb) == 0 && S_ISREG(sb.st_mode))
            json_array_append_new(pics, json_string(ag__serve_pictures[i]));
    }
    json_object_set_new(o, "checkpoints", ckpts);
    json_object_set_new(o, "pictures", pics);
}

char *ag__serve_run_json(const char *dir, const ag_serve_store *s, const ag_served *m)
{
    char *own = s->c->run_json ? s->c->run_json(m->model) : NULL;
    json_t *mine = own ? json_loads(own, 0, NULL) : s->c->run_json ? NULL : json_object();
    free(own);
    if (!json_is_object(mine)) {
        json_decref(mine);
        return NULL;
    }
    long pid = trainer_pid(dir);
    json_t *o = json_pack("{s:O*,s:i,s:s,s:o,s:o,s:b,s:I}", "config", json_object_get(mine, "config"), "iter",
                          (int)m->iter, "checkpoint", m->name, "latest", pointer_json(dir, AG_CKPT_LATEST), "best",
                          pointer_json(dir, AG_CKPT_BEST), "training", pid > 0, "trainer_pid", (json_int_t)pid);
    const char *key;
    json_t *val;
    json_object_foreach(mine, key, val) if (o && strcmp(key, "config") != 0) json_object_set(o, key, val);
    if (o) files_json(dir, o);
    if (o) json_object_set_new(o, "attention", json_boolean(s->c->attention != NULL));
    if (o) json_object_set_new(o, "program", json_string(ag__train_program()));
    json_decref(mine);
    return dump(o);
}

// --- metrics.csv, dynamics.csv ---

/* One CSV line (no '\n') into an array: numbers, or null for an empty field. */
static json_t *csv_row(char *line, bool header)
{
    json_t *a = json_array();
    char *p = line;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        char *end;
        double v = strtod(p, &end);
        if (header) json_array_append_new(a, json_string(p));
        else if (end == p || *end != '\0' || !isfinite(v)) json_array_append_new(a, json_null());
        else if (v == floor(v) && fabs(v) < 1e15) json_array_append_new(a, json_integer((json_int_t)v));   /* iter */
        else json_array_append_new(a, json_real(v));
        if (!comma) break;
        p = comma + 1;
    }
    return a;
}

/* The file, if it is a regular file of at most AG_SERVE_CSV_MAX bytes (O_NOFOLLOW: a link
 * planted at its name is not followed out of the run). */
static FILE *open_csv(const char *dir, const char *name)
{
    char path[4096];
    if (!ag_path_join(path, sizeof path, dir, name)) return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    FILE *f = fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= AG_SERVE_CSV_MAX
                  ? fdopen(fd, "r") : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

char *ag__serve_csv(const char *dir, const char *name)
{
    FILE *f = open_csv(dir, name);
    if (!f) return dump(json_pack("{s:[],s:[],s:b}", "columns", "rows", "missing", 1));
    json_t *cols = NULL, *rows = json_array();
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n') break;   /* a row train is still writing */
        line[len - 1] = '\0';
        if (!cols) cols = csv_row(line, true);
        else json_array_append_new(rows, csv_row(line, false));
    }
    free(line);
    fclose(f);
    return dump(json_pack("{s:o,s:o}", "columns", cols ? cols : json_array(), "rows", rows));
}

// --- report.md, the pictures ---

char *ag__serve_read(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    if (!ag_path_join(path, sizeof path, dir, name)) return NULL;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    char *buf = NULL;
    if (fd >= 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size <= AG_SERVE_FILE_MAX &&
        (buf = malloc((size_t)sb.st_size + 1))) {
        size_t got = 0;
        for (ssize_t r; got < (size_t)sb.st_size && (r = read(fd, buf + got, (size_t)sb.st_size - got)) > 0;)
            got += (size_t)r;
        buf[got] = '\0';   /* a file cut while read: what was there */
        *len = got;
    }
    if (fd >= 0) close(fd);
    return buf;
}

char *ag__serve_report(const char *dir)
{
    size_t len = 0;
    char *text = ag__serve_read(dir, "report.md", &len);
    json_t *t = text ? json_stringn(text, len) : NULL;   /* NULL too when it is not UTF-8 */
    free(text);
    if (!t) return dump(json_pack("{s:s,s:b}", "text", "", "missing", 1));
    return dump(json_pack("{s:o}", "text", t));
}
