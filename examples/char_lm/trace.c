/* trace.c -- --trace-shapes on the text's windows (see trace.h); the trace is the library's. */
#include <stdlib.h>
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
    int B, T;
    int max_T = g->cfg.block_size;
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
