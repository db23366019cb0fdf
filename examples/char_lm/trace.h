/* trace.h -- char_lm's --trace-shapes and --trace-graph: the library's shape trace of the GPT
 * (src/nn/trace.h: ag_gpt_trace) on a batch of the text's windows. Errors: a status and one
 * line in the ag_error err; nothing exits. */
#ifndef LM_TRACE_H
#define LM_TRACE_H

#include <stdbool.h>
#include <stdio.h>
#include "attograd.h"

/* --trace-graph FILE.dot (lesson 18): from now on lm_trace_forward also writes its tape to
 * path as Graphviz dot. NULL: no file. path must outlive the traces. */
void lm_trace_set_graph(const char *path);

/* ag_gpt_trace of ids [B*T] (targets [B*T] or NULL); train turns dropout on. what says where
 * the batch comes from ("3 windows of the training text"). */
ag_status lm_trace_forward(FILE *out, ag_gpt *g, const int *ids, const int *targets, int B, int T, bool train,
                           const char *what, ag_error *err);

/* ag_gpt_trace_windows of ids [n], the text: "B=3 windows of T=8 characters from <what>" */
ag_status lm_trace_text(FILE *out, ag_gpt *g, const int *ids, size_t n, bool train, const char *what,
                        ag_error *err);

#endif
