/* trace.h -- --trace-shapes: one forward pass of the model printed op by op, from the tape.
 *
 * The forward runs in grad mode, so every op records a node (debug.h's ag_tape_foreach walks
 * them in execution order); each node gives a line with its op name, its input shapes, its
 * output shape and the layer (node scope) it ran in, in MODEL.md's letters:
 *
 *      # op            inputs -> output                         layer          what it does
 *     12 split_heads   [B,T,C] -> [B,H,T,D]                     blocks.0.attn  H heads of D channels
 *
 * Attention is traced op by op (the composed path: composed_attention is set for this pass
 * only), so a learner sees split_heads, transpose, matmul, scale, masked_fill, softmax, matmul
 * and merge_heads; the run itself uses the fused kernel, which computes the same in one op.
 * The batch is small and its B and T are chosen unlike every other size of the model, so each
 * number stands for one letter (a size that two letters share is printed as a number).
 * After the ops: the parameter count of each layer (parameters grouped by name prefix:
 * "blocks.0.attn" holds blocks.0.attn.w_q.weight ... w_o.bias) and the total.
 *
 * Nothing here exits; the text goes to the FILE* given (stdout in char_lm, a memory stream in
 * the tests). Errors: a status and one line in the ag_error err. */
#ifndef LM_TRACE_H
#define LM_TRACE_H

#include <stdbool.h>
#include <stdio.h>
#include "attograd.h"

/* The traced batch for a model: T <= max_T and B <= max_B, small (T up to 8, B up to 4) and,
 * where possible, distinct from C, H, D, V, T_max, the MLP width and each other. */
void lm_trace_dims(const ag_gpt_config *cfg, int max_B, int max_T, int *B, int *T);

/* Traces ag_gpt_forward(ids [B*T], targets [B*T] or NULL) in a ctx of its own; train turns
 * dropout on (as in a training step). what says where the batch comes from ("3 windows of the
 * training text"). g is unchanged afterwards. */
ag_status lm_trace_forward(FILE *out, ag_gpt *g, const int *ids, const int *targets, int B, int T, bool train,
                           const char *what, ag_error *err);

/* Picks lm_trace_dims's batch from consecutive windows of ids [n] (window b is
 * ids[b*T .. b*T+T], its targets one further) and traces it. Fewer windows when the text is
 * short; AG_ERR_ARG when not even one window of T+1 tokens fits. */
ag_status lm_trace_text(FILE *out, ag_gpt *g, const int *ids, size_t n, bool train, const char *what,
                        ag_error *err);

/* --trace-graph FILE.dot (lesson 18): from now on lm_trace_forward also writes its tape to
 * path as Graphviz dot (nodes: the ops, with their layer and output shape; edges: the tensors,
 * with their shapes; leaves: parameters by name). NULL: no file. An unwritable path: the
 * trace fails with AG_ERR_IO. path must outlive the traces. */
void lm_trace_set_graph(const char *path);

/* The parameter count of each layer (grouped by name prefix) and the total. Cannot fail. */
void lm_trace_params(FILE *out, const ag_params *P);

#endif
