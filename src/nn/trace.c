/* trace.c -- the shape trace (trace.h): the tape of one forward pass, one line per op, its
 * shapes in letters; the same tape as Graphviz dot; the parameters by layer. */
#include <stdlib.h>
#include <string.h>
#include "trace.h"

// --- letters ---

bool ag_letters_add(ag_letters *L, const char *name, int size)
{
    if (L->n >= AG_TRACE_MAX_LETTERS) return false;
    L->name[L->n] = name;
    L->size[L->n++] = size;
    return true;
}

char *ag_letters_shape(const ag_tensor *t, const ag_letters *L, const ag_letters *rows, char *buf, size_t n)
{
    size_t len = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    for (int d = 0; d < t->ndim && len < n; d++) {
        const ag_letters *Ld = d == 0 && rows ? rows : L;
        int v = t->shape[d], hits = 0;
        const char *name = NULL;
        for (int i = 0; Ld && i < Ld->n; i++)
            if (Ld->size[i] == v) {
                hits++;
                name = Ld->name[i];
            }
        char num[16];
        snprintf(num, sizeof num, "%d", v);
        int w = snprintf(buf + len, n - len, "%s%s", d ? "," : "[", hits == 1 && v != 1 ? name : num);
        if (w < 0) break;
        len += (size_t)w;
    }
    if (len + 2 <= n) strcat(buf, "]");
    return buf;
}

// --- one line per node ---

/* A parameter's name without the layer's own prefix ("w_q.weight" in blocks.0.attn), when
 * something with a dot is left; else the whole name ("lm_head.weight"). */
static const char *short_name(const char *name, const char *scope)
{
    size_t n = scope ? strlen(scope) : 0;
    if (n && strncmp(name, scope, n) == 0 && name[n] == '.' && strchr(name + n + 1, '.')) return name + n + 1;
    return name;
}

/* The letters of input t of node n: a parameter's (named, not the causal mask) or the
 * activations'; *rows: the table's rows for an embedding's table */
static const ag_letters *letters_of(const ag_tensor *t, const ag_node *n, const ag_trace_opts *o,
                                    const ag_letters **rows)
{
    const ag_letters *P = o->param ? o->param : o->act;
    *rows = t->name && !strcmp(n->op->name, "embedding") ? (o->rows ? o->rows : P) : NULL;
    return t->name && !ag_is_causal_mask(t, t->shape[0]) ? P : o->act;
}

void ag_trace_note(const ag_node *n, char *buf, size_t len)
{
    static const char *const notes[][2] = {
        {"embedding", "rows of the table picked by the ids"},
        {"linear", "x W^T + b"},
        {"layernorm", "each row to mean 0, variance 1; * w + b"},
        {"rmsnorm", "each row / its root mean square; * w"},
        {"split_heads", "H heads of D channels each"},
        {"merge_heads", "heads side by side again"},
        {"rope", "each head's channel pairs turned by the position (RoPE)"},
        {"attention", "fused: softmax(q k^T * scale, causal) v, heads merged"},
        {"reshape", "a view: the same numbers, another shape"},
        {"transpose", "the last two sizes swapped"},
        {"matmul", "matrix product (batched over the leading sizes)"},
        {"softmax", "each row to probabilities that sum to 1"},
        {"masked_fill", "masked positions set to one value"},
        {"gelu", "GELU, elementwise"},
        {"silu", "SiLU x * sigmoid(x), elementwise"},
        {"mul", "product, elementwise"},
        {"add", "sum, elementwise (broadcast)"},
        {"dropout", "zero a random share, scale the rest"},
        {"cross_entropy", "mean of -log p(target): the loss"},
    };
    buf[0] = '\0';
    if (!strcmp(n->op->name, "scale")) snprintf(buf, len, "* %.4g", n->fparam[0]);
    for (size_t i = 0; i < sizeof notes / sizeof notes[0]; i++)
        if (!strcmp(n->op->name, notes[i][0])) snprintf(buf, len, "%s", notes[i][1]);
}

typedef struct {
    FILE *out;
    const ag_trace_opts *o;
    int count;
} tracer;

static void trace_node(const ag_node *n, void *user)
{
    tracer *tr = user;
    char io[256], s[64], note[96];
    size_t len = 0;
    io[0] = '\0';
    for (int i = 0; i < n->n_in; i++) {
        const ag_tensor *t = n->in[i];
        if (!t) continue;
        const ag_letters *rows, *L = letters_of(t, n, tr->o, &rows);
        int w = snprintf(io + len, sizeof io - len, "%s%s%s", len ? ", " : "",
                         t->name ? short_name(t->name, n->scope) : "", ag_letters_shape(t, L, rows, s, sizeof s));
        if (w < 0 || (size_t)w >= sizeof io - len) break;
        len += (size_t)w;
    }
    if (len < sizeof io)
        snprintf(io + len, sizeof io - len, " -> %s", ag_letters_shape(n->out, tr->o->act, NULL, s, sizeof s));
    if (tr->o->note) tr->o->note(n, tr->o->user, note, sizeof note);
    else ag_trace_note(n, note, sizeof note);
    fprintf(tr->out, "%4d  %-13s %-14s %-54s %s\n", ++tr->count, n->op->name, n->scope ? n->scope : "", io, note);
}

int ag_trace_tape(FILE *out, const ag_ctx *ctx, const ag_trace_opts *o)
{
    fprintf(out, "%4s  %-13s %-14s %-54s %s\n", "#", "op", "layer", "inputs -> output", "what it does");
    tracer tr = { out, o, 0 };
    ag_tape_foreach(ctx, trace_node, &tr);
    return tr.count;
}

// --- the same tape as Graphviz dot ---

typedef struct {
    const ag_node **n;
    int len, cap;
    bool nomem;
} node_list;

static void collect(const ag_node *n, void *user)
{
    node_list *L = user;
    if (L->len == L->cap) {
        int cap = L->cap ? 2 * L->cap : 64;
        const ag_node **p = realloc(L->n, (size_t)cap * sizeof *p);
        if (!p) {
            L->nomem = true;
            return;
        }
        L->n = p, L->cap = cap;
    }
    L->n[L->len++] = n;
}

/* The edge into op k from its input t: from the op that made t, or from a leaf drawn once
 * (a parameter by its name, the mask, the token ids' table) as "l<address>". */
static void graph_edge(FILE *f, const node_list *L, int k, const ag_tensor *t, const ag_trace_opts *o)
{
    char s[64];
    int from = k - 1;
    while (from >= 0 && L->n[from]->out != t) from--;
    const ag_letters *rows, *Lt = letters_of(t, L->n[k], o, &rows);
    const char *lab = ag_letters_shape(t, Lt, rows, s, sizeof s);
    if (from >= 0) {
        fprintf(f, "  n%d -> n%d [label=\"%s\"];\n", from, k, lab);
        return;
    }
    fprintf(f, "  l%p [shape=ellipse, label=\"%s\\n%s\"];\n", (const void *)t, t->name ? t->name : "input", lab);
    fprintf(f, "  l%p -> n%d;\n", (const void *)t, k);
}

ag_status ag_trace_graph(const char *path, const ag_ctx *ctx, const ag_trace_opts *o, ag_error *err)
{
    if (!path || !*path) return ag_seterr(err, AG_ERR_ARG, "--trace-graph: no file name");
    node_list L = { 0 };
    ag_tape_foreach(ctx, collect, &L);
    if (L.nomem) return free(L.n), ag_seterr(err, AG_ERR_NOMEM, "--trace-graph %s: out of memory", path);
    FILE *f = fopen(path, "w");
    if (!f) return free(L.n), ag_seterr(err, AG_ERR_IO, "--trace-graph %s: cannot write it", path);
    char s[64];
    fprintf(f, "// the tape of one forward pass (attograd's shape trace); draw it: dot -Tpng FILE.dot -o FILE.png\n"
               "digraph tape {\n  node [shape=box, fontname=\"monospace\"];\n  edge [fontname=\"monospace\"];\n");
    for (int k = 0; k < L.len; k++) {
        const ag_node *n = L.n[k];
        fprintf(f, "  n%d [label=\"%d %s\\n%s\\n-> %s\"];\n", k, k + 1, n->op->name, n->scope ? n->scope : "",
                ag_letters_shape(n->out, o->act, NULL, s, sizeof s));
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i]) graph_edge(f, &L, k, n->in[i], o);
    }
    fprintf(f, "}\n");
    free(L.n);
    bool ok = !ferror(f) && L.len > 0;
    if (fclose(f) != 0 || !ok) return ag_seterr(err, AG_ERR_IO, "--trace-graph %s: cannot write it", path);
    return AG_OK;
}

// --- parameters by layer ---

static size_t first_part(const char *name)
{
    const char *dot = strchr(name, '.');
    return dot ? (size_t)(dot - name) : strlen(name);
}

char *ag_format_thousands(char *buf, size_t n, long long v)
{
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%lld", v), o = 0, sign = v < 0;
    for (int i = 0; i < len && (size_t)o + 2 < n; i++) {
        if (i > sign && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

void ag_trace_params(FILE *out, const ag_params *P, size_t (*layer_len)(const char *name))
{
    if (!layer_len) layer_len = first_part;
    fprintf(out, "parameters by layer (grouped by name prefix):\n");
    char num[32];
    for (int i = 0; i < P->n;) {
        const char *name = P->entries[i].t->name;
        size_t k = layer_len(name), count = 0;
        int j = i;
        for (; j < P->n; j++) {   /* the layer's parameters are registered one after another */
            const char *nj = P->entries[j].t->name;
            if (layer_len(nj) != k || strncmp(nj, name, k) != 0) break;
            count += ag_numel(P->entries[j].t);
        }
        fprintf(out, "  %-24.*s %12s\n", (int)k, name, ag_format_thousands(num, sizeof num, (long long)count));
        i = j;
    }
    fprintf(out, "  %-24s %12s\n", "total", ag_format_thousands(num, sizeof num, (long long)P->total));
}
