/* gpt_eval.c -- a GPT's mean loss on a batch as a number (nn.h: ag_gpt_loss), and its
 * deterministic loss on a token sequence (ag_gpt_eval_ids). */
#include <math.h>
#include <stdlib.h>
#include "nn.h"

/* x, y [B,T]: windows w0 .. w0+B-1 of ids (window w = ids[wT .. wT+T]) and their targets. */
static void get_windows(const int *ids, size_t w0, int B, int T, int *x, int *y)
{
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t i = (w0 + (size_t)b) * (size_t)T + (size_t)t;
            x[b * T + t] = ids[i];
            y[b * T + t] = ids[i + 1];
        }
}

ag_status ag_gpt_loss(ag_ctx *ctx, ag_gpt *g, const int *x, const int *y, int B, int T, const ag_forward_opts *opts,
                      const char *what, double *loss, ag_error *err)
{
    ag_ctx_reset(ctx);
    ag_tensor *l = NULL;
    ag_gpt_forward(ctx, g, x, y, B, T, opts, &l);   // l [1]: the batch's mean loss
    *loss = l ? (double)l->data[0] : NAN;
    ag_status s = l ? AG_OK : ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_ARG;
    if (s) ag_seterr(err, s, "%s: %s", what, ag_ctx_error(ctx) ? ag_ctx_error(ctx) : "forward failed");
    return s;
}

ag_status ag_gpt_eval_ids(ag_gpt *g, const int *ids, size_t n, int batch, double *loss, size_t *tokens,
                          ag_error *err)
{
    int T = g->cfg.block_size;
    if (n < (size_t)T + 1)
        return ag_seterr(err, AG_ERR_ARG, "the text has %zu tokens; block_size %d needs at least %d for one window",
                         n, T, T + 1);
    if (batch < 1) return ag_seterr(err, AG_ERR_ARG, "eval: %d windows per pass (at least 1)", batch);
    size_t n_win = (n - 1) / (size_t)T;   /* window w = ids[wT .. wT+T], whole ones only */
    ag_ctx *ctx = ag_ctx_new();
    int *x = malloc((size_t)batch * T * sizeof *x);   /* [B,T] inputs */
    int *y = malloc((size_t)batch * T * sizeof *y);   /* [B,T] targets */
    ag_status st = AG_ERR_NOMEM;
    if (!ctx || !x || !y) {
        ag_seterr(err, st, "eval: out of memory");
        goto out;
    }
    ag_ctx_set_grad(ctx, false);
    double sum = 0;   /* of per-token losses */
    for (size_t w0 = 0; w0 < n_win; w0 += (size_t)batch) {
        int B = (int)(n_win - w0 < (size_t)batch ? n_win - w0 : (size_t)batch);
        get_windows(ids, w0, B, T, x, y);
        double l;
        if ((st = ag_gpt_loss(ctx, g, x, y, B, T, NULL, "eval", &l, err))) goto out;
        sum += l * B * T;   /* the batch mean times its token count */
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
