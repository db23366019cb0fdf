/* trace.c -- --trace-shapes and --trace-graph (see trace.h); the trace is the library's. */
#include "trace.h"

static const char *graph_path;   /* set by lm_trace_set_graph (main.c, from --trace-graph) */
void lm_trace_set_graph(const char *path) { graph_path = path; }

ag_status lm_trace_forward(FILE *out, ag_gpt *g, const int *ids, const int *targets, int B, int T, bool train,
                           const char *what, ag_error *err)
{
    const ag_gpt_trace_opts o = { .train = train, .what = what, .graph = graph_path };
    return ag_gpt_trace(out, g, ids, targets, B, T, &o, err);
}

ag_status lm_trace_text(FILE *out, ag_gpt *g, const int *ids, size_t n, bool train, const char *what,
                        ag_error *err)
{
    const ag_gpt_trace_opts o = { .train = train, .what = what, .graph = graph_path, .unit = "characters" };
    return ag_gpt_trace_windows(out, g, ids, n, &o, err);
}
