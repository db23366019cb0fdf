/* trace.c -- --trace-shapes (see trace.h): the tape of one forward pass, one line per op. */
#include <stdlib.h>
#include <string.h>
#include "trace.h"

// --- sizes and their letters ---

#define MAX_LETTERS 10

typedef struct {
    int n;
    int value[MAX_LETTERS];
    const char *name[MAX_LETTERS];
} letters;

static void add_letter(letters *L, const char *name, int value)
{
    if (L->n < MAX_LETTERS) {
        L->name[L->n] = name;
        L->value[L->n++] = value;
    }
}

/* The width of the MLP's hidden layer and its letter: 4C (GELU) or F (the SwiGLU width). */
static int mlp_width(const ag_gpt_config *cfg, const char **name)
{
    switch (cfg->mlp) {
    case AG_MLP_GELU: *name = "4C"; return 4 * cfg->n_embd;
    case AG_MLP_SWIGLU: *name = "F"; return ag_swiglu_width(cfg->n_embd);
    }
    *name = "?";   /* not reached: ag_gpt_new refuses other values */
    return 0;
}

/* The sizes of the model but B and T, one letter each: those of its activations and of every
 * parameter but the embedding tables' rows. The MLP width comes last (print_head). T_max is
 * not among them: it is the size of one thing only, the position table's rows, and a [D]
 * weight (a per-head norm, say) must not read T_max in a model where D = T_max (tiny). */
static letters model_letters(const ag_gpt_config *cfg)
{
    letters L = { 0 };
    const char *wname;
    int width = mlp_width(cfg, &wname);
    add_letter(&L, "C", cfg->n_embd);
    add_letter(&L, "H", cfg->n_head);
    add_letter(&L, "D", cfg->n_embd / cfg->n_head);
    add_letter(&L, "V", cfg->vocab_size);
    add_letter(&L, wname, width);
    return L;
}

/* The rows of an embedding table: the vocabulary (tok_emb) or the positions (pos_emb) */
static letters table_letters(const ag_gpt_config *cfg)
{
    letters L = { 0 };
    add_letter(&L, "V", cfg->vocab_size);
    add_letter(&L, "T_max", cfg->block_size);
    return L;
}

static bool taken(const letters *L, int v)
{
    if (v == 1) return true;   /* 1 is printed as itself (a scalar loss, a batch of one) */
    for (int i = 0; i < L->n; i++)
        if (L->value[i] == v) return true;
    return false;
}

void lm_trace_dims(const ag_gpt_config *cfg, int max_B, int max_T, int *B, int *T)
{
    letters L = model_letters(cfg);
    int t0 = max_T < 8 ? max_T : 8, b0 = max_B < 4 ? max_B : 4;
    *T = t0 >= 1 ? t0 : 1;
    for (int t = t0; t >= 2; t--)
        if (!taken(&L, t)) {
            *T = t;
            break;
        }
    add_letter(&L, "T", *T);
    *B = b0 >= 2 ? 2 : 1;
    for (int b = 2; b <= b0; b++)
        if (!taken(&L, b)) {
            *B = b;
            break;
        }
}

/* "[B,T,C]": each size by its letter when exactly one letter has it, else the number. rows
 * (NULL: L) are the letters of the first size. */
static char *shape_letters(const ag_tensor *t, const letters *L, const letters *rows, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->ndim && len < n; d++) {
        const letters *Ld = d == 0 && rows ? rows : L;
        int v = t->shape[d], hits = 0;
        const char *name = NULL;
        for (int i = 0; i < Ld->n; i++)
            if (Ld->value[i] == v) {
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

typedef struct {
    FILE *out;
    const letters *L;      /* activations: the model's letters, B and T */
    const letters *P;      /* parameters: the model's letters */
    const letters *E;      /* the rows of an embedding table */
    const ag_gpt_config *cfg;
    int count;
} tracer;

/* A parameter's name without the layer's own prefix ("w_q.weight" in blocks.0.attn), when
 * something with a dot is left; else the whole name ("lm_head.weight"). */
static const char *short_name(const char *name, const char *scope)
{
    size_t n = scope ? strlen(scope) : 0;
    if (n && strncmp(name, scope, n) == 0 && name[n] == '.' && strchr(name + n + 1, '.')) return name + n + 1;
    return name;
}

/* A few words on what the op does, for the ops of a GPT. */
static void op_note(const ag_node *n, const tracer *tr, char *buf, size_t len)
{
    const char *op = n->op->name;
    buf[0] = '\0';
    if (!strcmp(op, "embedding")) snprintf(buf, len, "rows of the table picked by the ids");
    else if (!strcmp(op, "linear")) snprintf(buf, len, "x W^T + b");
    else if (!strcmp(op, "layernorm")) snprintf(buf, len, "each row to mean 0, variance 1; * w + b");
    else if (!strcmp(op, "rmsnorm")) snprintf(buf, len, "each row / its root mean square; * w");
    else if (!strcmp(op, "split_heads")) snprintf(buf, len, "H heads of D channels each");
    else if (!strcmp(op, "transpose")) snprintf(buf, len, "k^T");
    else if (!strcmp(op, "reshape")) snprintf(buf, len, "a view: the same numbers, another shape");
    else if (!strcmp(op, "matmul") && n->out->ndim == 4 && n->in[1] && n->in[1]->ndim == 4 &&
             n->out->shape[3] == n->out->shape[2] && n->in[0]->shape[3] != n->out->shape[3])
        snprintf(buf, len, "scores q k^T: query t against every key");
    else if (!strcmp(op, "matmul")) snprintf(buf, len, "weights @ v: a mix of the values");
    else if (!strcmp(op, "scale"))
        snprintf(buf, len, "* %.4g%s", n->fparam[0], tr->cfg->no_scale ? " (--no-scale)" : " = 1/sqrt(D)");
    else if (!strcmp(op, "masked_fill"))
        snprintf(buf, len, "future keys -> %s (causal mask)", ag_switch_name(&ag_mask_fill_switch, tr->cfg->mask_fill));
    else if (!strcmp(op, "softmax")) snprintf(buf, len, "attention weights: each row sums to 1");
    else if (!strcmp(op, "merge_heads")) snprintf(buf, len, "heads side by side again");
    else if (!strcmp(op, "attention")) snprintf(buf, len, "fused: softmax(q k^T * scale, causal) v, heads merged");
    else if (!strcmp(op, "gelu")) snprintf(buf, len, "GELU, elementwise");
    else if (!strcmp(op, "silu")) snprintf(buf, len, "SiLU x * sigmoid(x), elementwise");
    else if (!strcmp(op, "mul")) snprintf(buf, len, "gate * up, elementwise");
    else if (!strcmp(op, "dropout")) snprintf(buf, len, "zero a random share, scale the rest");
    else if (!strcmp(op, "cross_entropy")) snprintf(buf, len, "mean of -log p(target): the loss");
    else if (!strcmp(op, "add") && n->in[1] && n->in[1]->ndim < n->in[0]->ndim)
        snprintf(buf, len, "+ positions, broadcast over B");
    else if (!strcmp(op, "add")) snprintf(buf, len, "residual: x + branch");
}

static void trace_node(const ag_node *n, void *user)
{
    tracer *tr = user;
    char io[256], s[64], note[96];
    size_t len = 0;
    io[0] = '\0';
    for (int i = 0; i < n->n_in; i++) {
        const ag_tensor *t = n->in[i];
        if (!t) continue;
        const letters *rows = t->name && !strcmp(n->op->name, "embedding") ? tr->E : NULL;
        int w = snprintf(io + len, sizeof io - len, "%s%s%s", len ? ", " : "", t->name ? short_name(t->name, n->scope) : "",
                         shape_letters(t, t->name && !ag_is_causal_mask(t, t->shape[0]) ? tr->P : tr->L, rows, s, sizeof s));
        if (w < 0 || (size_t)w >= sizeof io - len) break;
        len += (size_t)w;
    }
    if (len < sizeof io) snprintf(io + len, sizeof io - len, " -> %s", shape_letters(n->out, tr->L, NULL, s, sizeof s));
    op_note(n, tr, note, sizeof note);
    fprintf(tr->out, "%4d  %-13s %-14s %-54s %s\n", ++tr->count, n->op->name, n->scope ? n->scope : "", io, note);
}

// --- --trace-graph: the same tape as Graphviz dot (lesson 18) ---

static const char *graph_path;   /* set by lm_trace_set_graph (main.c, from --trace-graph) */
void lm_trace_set_graph(const char *path) { graph_path = path; }

typedef struct {
    const ag_node **n;
    int len, cap;
} node_list;

static void collect(const ag_node *n, void *user)
{
    node_list *L = user;
    if (L->len == L->cap) {
        int cap = L->cap ? 2 * L->cap : 64;
        const ag_node **p = realloc(L->n, (size_t)cap * sizeof *p);
        if (!p) return;
        L->n = p, L->cap = cap;
    }
    L->n[L->len++] = n;
}

/* The edge into op k from its input t: from the op that made t, or from a leaf drawn once
 * (a parameter by its name, the mask, the token ids' table) as "l<address>". */
static void graph_edge(FILE *f, const node_list *L, int k, const ag_tensor *t, const tracer *tr)
{
    char s[64];
    int from = k - 1;
    while (from >= 0 && L->n[from]->out != t) from--;
    const char *lab = shape_letters(t, t->name && !ag_is_causal_mask(t, t->shape[0]) ? tr->P : tr->L, NULL, s, sizeof s);
    if (from >= 0) {
        fprintf(f, "  n%d -> n%d [label=\"%s\"];\n", from, k, lab);
        return;
    }
    fprintf(f, "  l%p [shape=ellipse, label=\"%s\\n%s\"];\n", (const void *)t, t->name ? t->name : "input", lab);
    fprintf(f, "  l%p -> n%d;\n", (const void *)t, k);
}

/* nodes: the ops with their layer and output shape; edges: the tensors, with their shapes */
static ag_status write_graph(const ag_ctx *ctx, const tracer *tr, ag_error *err)
{
    node_list L = {0};
    ag_tape_foreach(ctx, collect, &L);
    FILE *f = fopen(graph_path, "w");
    if (!f) return free(L.n), ag_seterr(err, AG_ERR_IO, "--trace-graph %s: cannot write it", graph_path);
    char s[64];
    fprintf(f, "// the tape of one forward pass (char_lm --trace-graph); draw it: dot -Tpng FILE.dot -o FILE.png\n"
               "digraph tape {\n  node [shape=box, fontname=\"monospace\"];\n  edge [fontname=\"monospace\"];\n");
    for (int k = 0; k < L.len; k++) {
        const ag_node *n = L.n[k];
        fprintf(f, "  n%d [label=\"%d %s\\n%s\\n-> %s\"];\n", k, k + 1, n->op->name, n->scope ? n->scope : "",
                shape_letters(n->out, tr->L, NULL, s, sizeof s));
        for (int i = 0; i < n->n_in; i++)
            if (n->in[i]) graph_edge(f, &L, k, n->in[i], tr);
    }
    fprintf(f, "}\n");
    free(L.n);
    bool ok = !ferror(f) && L.len > 0;
    if (fclose(f) != 0 || !ok) return ag_seterr(err, AG_ERR_IO, "--trace-graph %s: cannot write it", graph_path);
    return AG_OK;
}

// --- parameters by layer ---

/* The layer of a parameter: "blocks.0.attn" for blocks.0.attn.w_q.weight, "tok_emb" for
 * tok_emb.weight. Writes the prefix's length into *n. */
static size_t group_len(const char *name)
{
    int parts = strncmp(name, "blocks.", 7) == 0 ? 3 : 1;
    size_t i = 0;
    for (int dots = 0; name[i]; i++)
        if (name[i] == '.' && ++dots == parts) break;
    return i;
}

/* 1234567 -> "1,234,567" */
static char *with_commas(size_t v, char *buf, size_t n)
{
    char raw[32];
    int len = snprintf(raw, sizeof raw, "%zu", v), o = 0;
    for (int i = 0; i < len && (size_t)o + 2 < n; i++) {
        if (i > 0 && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

void lm_trace_params(FILE *out, const ag_params *P)
{
    fprintf(out, "parameters by layer (grouped by name prefix):\n");
    char num[32];
    for (int i = 0; i < P->n;) {
        const char *name = P->entries[i].t->name;
        size_t k = group_len(name), count = 0;
        int j = i;
        for (; j < P->n; j++) {   /* the layer's parameters are registered one after another */
            const char *nj = P->entries[j].t->name;
            if (group_len(nj) != k || strncmp(nj, name, k) != 0) break;
            count += ag_numel(P->entries[j].t);
        }
        fprintf(out, "  %-24.*s %12s\n", (int)k, name, with_commas(count, num, sizeof num));
        i = j;
    }
    fprintf(out, "  %-24s %12s\n", "total", with_commas(P->total, num, sizeof num));
}

// --- the trace ---

/* What the trace shows, its sizes and the column heads. */
static void print_head(FILE *out, const ag_gpt_config *cfg, int B, int T, const letters *LP, const char *what,
                       const char *kernels)
{
    fprintf(out, "--trace-shapes: one forward pass of %s, op by op as the tape recorded it\n", what);
    fprintf(out, "attention is shown op by op (composed_attention = true for this pass); %s\n",
            cfg->composed_attention ? "the run takes the same composed path"
                                    : "the run uses the fused kernel (one op \"attention\", the same numbers) where it can");
    fprintf(out, "kernels: %s (--kernels, AG_KERNELS: the table every op of the run calls)\n", kernels);
    fprintf(out, "sizes: B=%d T=%d C=%d H=%d D=%d V=%d T_max=%d %s=%d  (a size two letters share is printed as a "
            "number)\n", B, T, cfg->n_embd, cfg->n_head, cfg->n_embd / cfg->n_head, cfg->vocab_size, cfg->block_size,
            LP->name[LP->n - 1], LP->value[LP->n - 1]);
    fprintf(out, "%4s  %-13s %-14s %-54s %s\n", "#", "op", "layer", "inputs -> output", "what it does");
}

ag_status lm_trace_forward(FILE *out, ag_gpt *g, const int *ids, const int *targets, int B, int T, bool train,
                           const char *what, ag_error *err)
{
    const ag_gpt_config *cfg = &g->cfg;
    letters L = model_letters(cfg), LP = model_letters(cfg), LE = table_letters(cfg);
    add_letter(&L, "B", B);
    add_letter(&L, "T", T);
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) return ag_seterr(err, AG_ERR_NOMEM, "--trace-shapes: out of memory");
    /* attention op by op for this pass: the learner sees every step the fused kernel does */
    const ag_forward_opts fo = { .train = train, .seed = 1, .composed_attention = true };
    ag_tensor *loss = NULL;
    ag_tensor *logits = ag_gpt_forward(ctx, g, ids, targets, B, T, &fo, targets ? &loss : NULL);
    if (!logits) {
        ag_status s = ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_ARG;
        ag_seterr(err, s, "--trace-shapes: %s", ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "forward failed");
        ag_ctx_free(ctx);
        return s;
    }
    print_head(out, cfg, B, T, &LP, what, ag_ctx_kernels_name(ctx));
    tracer tr = { out, &L, &LP, &LE, cfg, 0 };
    ag_tape_foreach(ctx, trace_node, &tr);
    fprintf(out, "%d ops", tr.count);
    if (loss) fprintf(out, "; loss %.4f", (double)loss->data[0]);
    fprintf(out, "\n");
    lm_trace_params(out, g->params);
    fflush(out);
    ag_status s = graph_path ? write_graph(ctx, &tr, err) : AG_OK;
    if (s == AG_OK && graph_path) fprintf(out, "tape graph: %s (dot -Tpng %s -o tape.png)\n", graph_path, graph_path);
    ag_ctx_free(ctx);
    return s;
}

ag_status lm_trace_text(FILE *out, ag_gpt *g, const int *ids, size_t n, bool train, const char *what,
                        ag_error *err)
{
    int B, T;
    int max_T = g->cfg.block_size;
    if (n < 2) return ag_seterr(err, AG_ERR_ARG, "--trace-shapes: the text has %zu tokens, fewer than one window", n);
    if ((size_t)max_T > n - 1) max_T = (int)(n - 1);
    lm_trace_dims(&g->cfg, 4, max_T, &B, &T);
    if ((size_t)B * T + 1 > n) B = (int)((n - 1) / (size_t)T);   /* consecutive windows that fit */
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return ag_seterr(err, AG_ERR_NOMEM, "--trace-shapes: out of memory");
    }
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            x[b * T + t] = ids[(size_t)b * T + t];
            y[b * T + t] = ids[(size_t)b * T + t + 1];
        }
    char desc[256];
    snprintf(desc, sizeof desc, "B=%d windows of T=%d characters from %s", B, T, what);
    ag_status s = lm_trace_forward(out, g, x, y, B, T, train, desc, err);
    free(x);
    free(y);
    return s;
}
