/* trace.h -- the shape trace: one forward pass printed op by op, from the tape, each shape in
 * letters (MODEL.md's B, T, C, H, ...) rather than numbers. A teaching tool for any model on the
 * tape; char_lm's --trace-shapes is the GPT's (ag_gpt_trace, below).
 *
 * After a forward in grad mode every op has recorded a node (debug.h's ag_tape_foreach walks
 * them in execution order); ag_trace_tape prints one line per node: its number, op name, layer
 * (the node's scope), its inputs' and output's shapes and a few words on what it does:
 *
 *        #  op            layer          inputs -> output          what it does
 *       12  split_heads   blocks.0.attn  [B,T,C] -> [B,H,T,D]      H heads of D channels each
 *       22  linear        blocks.0.mlp   [B,T,C], fc1.weight[4C,C], fc1.bias[4C] -> [B,T,4C]  x W^T + b
 *
 * A size is printed as its letter when exactly one letter of the table has it, else as the
 * number (so a caller picks the batch's sizes unlike the model's: ag_gpt_trace_dims). 1 is
 * always printed as 1. A named input (a parameter: "w_q.weight" in blocks.0.attn, the layer's
 * prefix dropped where a dot is left; "head.weight" whole) reads the parameter table; the
 * causal mask (ops.h) and unnamed tensors read the activations'.
 *
 * Nothing here exits; text goes to the FILE* given. Errors: a status and one line in err. */
#ifndef AG_TRACE_H
#define AG_TRACE_H

#include <stdbool.h>
#include <stdio.h>
#include "nn.h"

/* ---------- letters: sizes and their names ---------- */
#define AG_TRACE_MAX_LETTERS 12
typedef struct {
    int n;
    const char *name[AG_TRACE_MAX_LETTERS];   /* "C", "4C", "T_max": they must outlive the table */
    int size[AG_TRACE_MAX_LETTERS];
} ag_letters;

/* Adds the letter name for size; false (nothing added) when the table is full. */
bool ag_letters_add(ag_letters *L, const char *name, int size);
/* "[B,T,C]" into buf (always NUL-terminated): each size by its letter in L when exactly one
 * letter has it, else the number (L NULL: every size a number). rows (NULL: L) name the first
 * size. Returns buf. */
char *ag_letters_shape(const ag_tensor *t, const ag_letters *L, const ag_letters *rows, char *buf, size_t n);

/* ---------- the tape, op by op ---------- */
typedef struct {
    const ag_letters *act;     /* outputs and unnamed inputs (activations): B, T and the model's
                                * sizes; NULL: numbers */
    const ag_letters *param;   /* named inputs (parameters); NULL: act */
    const ag_letters *rows;    /* the first size of the table an "embedding" op reads; NULL: param */
    /* "what it does" for node n into buf [len] (empty: nothing); NULL: ag_trace_note */
    void (*note)(const ag_node *n, void *user, char *buf, size_t len);
    void *user;                /* given to note */
} ag_trace_opts;

/* The column heads, then one line per node of ctx's tape in execution order. Returns the
 * number of ops. Cannot fail. */
int ag_trace_tape(FILE *out, const ag_ctx *ctx, const ag_trace_opts *o);
/* A few words on what node n's op does, for the library's ops ("x W^T + b" for linear); empty
 * for an op it does not know (an op of your own). */
void ag_trace_note(const ag_node *n, char *buf, size_t len);
/* The same tape as Graphviz dot into path (nodes: the ops with their layer and output shape;
 * edges: the tensors with their shapes; leaves: parameters by name). AG_ERR_IO with
 * "--trace-graph PATH: cannot write it" when path cannot be written or the tape is empty;
 * AG_ERR_ARG for no path. */
ag_status ag_trace_graph(const char *path, const ag_ctx *ctx, const ag_trace_opts *o, ag_error *err);

/* The parameter count of each layer and the total. A layer is a name's first layer_len(name)
 * characters (NULL: up to the first dot: "head" for head.weight); the parameters of a layer
 * come one after another in P. Cannot fail. */
void ag_trace_params(FILE *out, const ag_params *P, size_t (*layer_len)(const char *name));
/* v with a comma between each three digits, 1234567 -> "1,234,567" (-1234 -> "-1,234"), into buf
 * (n bytes, cut short if it must be); returns buf. */
char *ag_format_thousands(char *buf, size_t n, long long v);

/* ---------- the GPT's trace (gpt_trace.c) ---------- */
/* The traced batch for a GPT: T <= max_T and B <= max_B, small (T up to 8, B up to 4) and,
 * where possible, distinct from C, H, D, V, the MLP width and each other. */
void ag_gpt_trace_dims(const ag_gpt_config *cfg, int max_B, int max_T, int *B, int *T);

typedef struct {
    bool train;           /* dropout on, as in a training step */
    const char *what;     /* where the batch comes from ("3 windows of the training text") */
    const char *graph;    /* also ag_trace_graph's dot file there; NULL: none */
    const char *unit;     /* ag_gpt_trace_windows: what a token is ("characters"); NULL: "tokens" */
} ag_gpt_trace_opts;

/* Traces ag_gpt_forward(ids [B*T], targets [B*T] or NULL) in a ctx of its own, attention op by
 * op (composed_attention for this pass only): a head (what, the kernels, every size and its
 * letter), the tape (C H D V T_max and 4C or F, the SwiGLU width), the loss, the parameters by
 * layer (blocks.L.attn, ...). g is unchanged afterwards. */
ag_status ag_gpt_trace(FILE *out, ag_gpt *g, const int *ids, const int *targets, int B, int T,
                       const ag_gpt_trace_opts *o, ag_error *err);
/* ag_gpt_trace on ag_gpt_trace_dims's batch (at most 4 windows of at most block_size) taken
 * from consecutive windows of ids [n] (window b is ids[b*T .. b*T+T], its targets one further),
 * what becoming "B=3 windows of T=8 <unit> from <what>". Fewer windows when the text is short;
 * AG_ERR_ARG when not even one window of T+1 tokens fits. */
ag_status ag_gpt_trace_windows(FILE *out, ag_gpt *g, const int *ids, size_t n, const ag_gpt_trace_opts *o,
                               ag_error *err);

#endif
