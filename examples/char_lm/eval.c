/* eval.c -- deterministic evaluation of a model on a text (see eval.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "eval.h"

#define EVAL_BATCH 16   /* windows per forward pass */

ag_status lm_eval_ids(ag_gpt *g, const int *ids, size_t n, double *loss, size_t *tokens, char *err,
                      size_t errlen)
{
    int T = g->cfg.block_size;
    if (n < (size_t)T + 1) {
        snprintf(err, errlen, "the text has %zu tokens; block_size %d needs at least %d for one window", n, T,
                 T + 1);
        return AG_ERR_ARG;
    }
    size_t n_win = (n - 1) / (size_t)T;   /* window w = ids[wT .. wT+T], whole ones only */
    ag_ctx *ctx = ag_ctx_new();
    int *x = malloc((size_t)EVAL_BATCH * T * sizeof *x);   /* [B,T] inputs */
    int *y = malloc((size_t)EVAL_BATCH * T * sizeof *y);   /* [B,T] targets */
    ag_status st = AG_ERR_NOMEM;
    if (!ctx || !x || !y) {
        snprintf(err, errlen, "eval: out of memory");
        goto out;
    }
    ag_ctx_set_grad(ctx, false);
    double sum = 0;   /* of per-token losses */
    for (size_t w0 = 0; w0 < n_win; w0 += EVAL_BATCH) {
        int B = (int)(n_win - w0 < EVAL_BATCH ? n_win - w0 : EVAL_BATCH);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) {
                size_t i = (w0 + (size_t)b) * (size_t)T + (size_t)t;
                x[b * T + t] = ids[i];
                y[b * T + t] = ids[i + 1];
            }
        ag_ctx_reset(ctx);
        ag_tensor *l = NULL;
        ag_gpt_forward(ctx, g, x, y, B, T, NULL, &l);
        if (!l) {
            st = ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_ARG;
            snprintf(err, errlen, "eval: %s", ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "forward failed");
            goto out;
        }
        sum += (double)l->data[0] * B * T;   /* the batch mean times its token count */
    }
    *tokens = n_win * (size_t)T;
    *loss = sum / (double)*tokens;
    st = AG_OK;
out:
    free(y);
    free(x);
    ag_ctx_free(ctx);
    return st;
}

ag_status lm_eval_file(lm_model *m, const char *path, double *loss, size_t *tokens, char *err,
                       size_t errlen)
{
    corpus c;
    ag_status st = corpus_load_vocab(path, &m->vocab, &c, err, errlen);
    if (st) return st;
    char why[512];
    st = lm_eval_ids(m->g, c.ids, c.n, loss, tokens, why, sizeof why);
    if (st) snprintf(err, errlen, "%s: %s", path, why);
    corpus_free(&c);
    return st;
}
