/* gpt_trace.c -- the GPT's shape trace (trace.h): its letters from an ag_gpt_config, the notes
 * of its attention, its parameters by layer, and the traced forward pass. */
#include <stdlib.h>
#include <string.h>
#include "../tensor/speed.h"   /* ag_ctx_kernels_name */
#include "trace.h"

// --- the GPT's sizes and their letters ---

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
static ag_letters model_letters(const ag_gpt_config *cfg)
{
    ag_letters L = { 0 };
    const char *wname;
    int width = mlp_width(cfg, &wname);
    ag_letters_add(&L, "C", cfg->n_embd);
    ag_letters_add(&L, "H", cfg->n_head);
    ag_letters_add(&L, "D", cfg->n_embd / cfg->n_head);
    ag_letters_add(&L, "V", cfg->vocab_size);
    ag_letters_add(&L, wname, width);
    return L;
}

static bool taken(const ag_letters *L, int v)
{
    if (v == 1) return true;   /* 1 is printed as itself (a scalar loss, a batch of one) */
    for (int i = 0; i < L->n; i++)
        if (L->size[i] == v) return true;
    return false;
}

void ag_gpt_trace_dims(const ag_gpt_config *cfg, int max_B, int max_T, int *B, int *T)
{
    ag_letters L = model_letters(cfg);
    int t0 = max_T < 8 ? max_T : 8, b0 = max_B < 4 ? max_B : 4;
    *T = t0 >= 1 ? t0 : 1;
    for (int t = t0; t >= 2; t--)
        if (!taken(&L, t)) {
            *T = t;
            break;
        }
    ag_letters_add(&L, "T", *T);
    *B = b0 >= 2 ? 2 : 1;
    for (int b = 2; b <= b0; b++)
        if (!taken(&L, b)) {
            *B = b;
            break;
        }
}

// --- what the GPT's ops do ---

/* The notes of attention's ops and the residual stream; the library's (ag_trace_note) else. */
static void gpt_note(const ag_node *n, void *user, char *buf, size_t len)
{
    const ag_gpt_config *cfg = user;
    const char *op = n->op->name;
    if (!strcmp(op, "transpose")) snprintf(buf, len, "k^T");
    else if (!strcmp(op, "matmul") && n->out->ndim == 4 && n->in[1] && n->in[1]->ndim == 4 &&
             n->out->shape[3] == n->out->shape[2] && n->in[0]->shape[3] != n->out->shape[3])
        snprintf(buf, len, "scores q k^T: query t against every key");
    else if (!strcmp(op, "matmul")) snprintf(buf, len, "weights @ v: a mix of the values");
    else if (!strcmp(op, "scale"))
        snprintf(buf, len, "* %.4g%s", n->fparam[0], cfg->no_scale ? " (--no-scale)" : " = 1/sqrt(D)");
    else if (!strcmp(op, "masked_fill"))
        snprintf(buf, len, "future keys -> %s (causal mask)", ag_switch_name(&ag_mask_fill_switch, cfg->mask_fill));
    else if (!strcmp(op, "softmax")) snprintf(buf, len, "attention weights: each row sums to 1");
    else if (!strcmp(op, "mul")) snprintf(buf, len, "gate * up, elementwise");
    else if (!strcmp(op, "add") && n->in[1] && n->in[1]->ndim < n->in[0]->ndim)
        snprintf(buf, len, "+ positions, broadcast over B");
    else if (!strcmp(op, "add")) snprintf(buf, len, "residual: x + branch");
    else ag_trace_note(n, buf, len);
}

/* The layer of a parameter: "blocks.0.attn" for blocks.0.attn.w_q.weight, "tok_emb" for
 * tok_emb.weight: the prefix's length. */
static size_t gpt_layer_len(const char *name)
{
    int parts = strncmp(name, "blocks.", 7) == 0 ? 3 : 1;
    size_t i = 0;
    for (int dots = 0; name[i]; i++)
        if (name[i] == '.' && ++dots == parts) break;
    return i;
}

// --- the trace ---

/* What the trace shows, its sizes. */
static void print_head(FILE *out, const ag_gpt_config *cfg, int B, int T, const ag_letters *LP, const char *what,
                       const char *kernels)
{
    fprintf(out, "--trace-shapes: one forward pass of %s, op by op as the tape recorded it\n", what);
    fprintf(out, "attention is shown op by op (composed_attention = true for this pass); %s\n",
            cfg->composed_attention ? "the run takes the same composed path"
                                    : "the run uses the fused kernel (one op \"attention\", the same numbers) where it can");
    fprintf(out, "kernels: %s (--kernels, AG_KERNELS: the table every op of the run calls)\n", kernels);
    fprintf(out, "sizes: B=%d T=%d C=%d H=%d D=%d V=%d T_max=%d %s=%d  (a size two letters share is printed as a "
            "number)\n", B, T, cfg->n_embd, cfg->n_head, cfg->n_embd / cfg->n_head, cfg->vocab_size, cfg->block_size,
            LP->name[LP->n - 1], LP->size[LP->n - 1]);
}

/* The head, the tape, the loss and the parameters of the forward pass just run in ctx. */
static ag_status print_trace(FILE *out, const ag_ctx *ctx, ag_gpt *g, int B, int T, const ag_tensor *loss,
                             const ag_gpt_trace_opts *o, ag_error *err)
{
    const ag_gpt_config *cfg = &g->cfg;
    ag_letters L = model_letters(cfg), LP = model_letters(cfg), LE = { 0 };
    ag_letters_add(&L, "B", B);
    ag_letters_add(&L, "T", T);
    ag_letters_add(&LE, "V", cfg->vocab_size);      /* the rows of tok_emb */
    ag_letters_add(&LE, "T_max", cfg->block_size);  /* and of pos_emb */
    const ag_trace_opts to = { .act = &L, .param = &LP, .rows = &LE, .note = gpt_note, .user = (void *)cfg };
    print_head(out, cfg, B, T, &LP, o->what ? o->what : "a batch", ag_ctx_kernels_name(ctx));
    int count = ag_trace_tape(out, ctx, &to);
    fprintf(out, "%d ops", count);
    if (loss) fprintf(out, "; loss %.4f", (double)loss->data[0]);
    fprintf(out, "\n");
    ag_trace_params(out, g->params, gpt_layer_len);
    fflush(out);
    ag_status s = o->graph ? ag_trace_graph(o->graph, ctx, &to, err) : AG_OK;
    if (s == AG_OK && o->graph) fprintf(out, "tape graph: %s (dot -Tpng %s -o tape.png)\n", o->graph, o->graph);
    return s;
}

ag_status ag_gpt_trace(FILE *out, ag_gpt *g, const int *ids, const int *targets, int B, int T,
                       const ag_gpt_trace_opts *o, ag_error *err)
{
    const ag_gpt_trace_opts none = { 0 };
    if (!o) o = &none;
    if (!g || !ids || B < 1 || T < 1) return ag_seterr(err, AG_ERR_ARG, "--trace-shapes: no model or no batch");
    ag_ctx *ctx = ag_ctx_new();
    if (!ctx) return ag_seterr(err, AG_ERR_NOMEM, "--trace-shapes: out of memory");
    /* attention op by op for this pass: the learner sees every step the fused kernel does */
    const ag_forward_opts fo = { .train = o->train, .seed = 1, .composed_attention = true };
    ag_tensor *loss = NULL;
    ag_tensor *logits = ag_gpt_forward(ctx, g, ids, targets, B, T, &fo, targets ? &loss : NULL);
    ag_status s = AG_OK;
    if (!logits) {
        s = ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_ARG;
        ag_seterr(err, s, "--trace-shapes: %s", ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "forward failed");
    } else {
        s = print_trace(out, ctx, g, B, T, loss, o, err);
    }
    ag_ctx_free(ctx);
    return s;
}

ag_status ag_gpt_trace_windows(FILE *out, ag_gpt *g, const int *ids, size_t n, const ag_gpt_trace_opts *o,
                               ag_error *err)
{
    if (!g || !ids || !o) return ag_seterr(err, AG_ERR_ARG, "--trace-shapes: no model, text or options");
    int B, T, max_T = g->cfg.block_size;
    if (n < 2) return ag_seterr(err, AG_ERR_ARG, "--trace-shapes: the text has %zu tokens, fewer than one window", n);
    if ((size_t)max_T > n - 1) max_T = (int)(n - 1);
    ag_gpt_trace_dims(&g->cfg, 4, max_T, &B, &T);
    if ((size_t)B * T + 1 > n) B = (int)((n - 1) / (size_t)T);   /* consecutive windows that fit */
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    if (!x || !y) {
        free(x);
        free(y);
        return ag_seterr(err, AG_ERR_NOMEM, "--trace-shapes: out of memory");
    }
    for (int i = 0; i < B * T; i++) {   /* window b = i / T starts at b*T: x is ids[0 .. B*T] */
        x[i] = ids[i];
        y[i] = ids[i + 1];
    }
    char desc[256];
    snprintf(desc, sizeof desc, "B=%d windows of T=%d %s from %s", B, T, o->unit ? o->unit : "tokens",
             o->what ? o->what : "the text");
    ag_gpt_trace_opts wo = *o;
    wo.what = desc;
    ag_status s = ag_gpt_trace(out, g, x, y, B, T, &wo, err);
    free(x);
    free(y);
    return s;
}
