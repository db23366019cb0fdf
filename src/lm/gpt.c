/* gpt.c -- a GPT on the trainer's tools (lm.h): its training run checked against the machine's
 * memory and the checkpoint's size, and its attention recorded and drawn. */
#include <stdio.h>
#include <stdlib.h>
#include "lm.h"
#include "../train/train.h"   /* ag_check_memory, ag_check_checkpointable */

ag_status ag_gpt_check_train(const ag_gpt_config *m, int B, int ranks, const char *who, ag_error *err)
{
    char shape[AG_GPT_SHAPE_LEN], model[AG_GPT_SHAPE_LEN];
    snprintf(model, sizeof model, "n_layer %d x n_embd %d (vocab %d, block_size %d)", m->n_layer, m->n_embd,
             m->vocab_size, m->block_size);
    ag_status s = ag_check_memory(ag_gpt_train_bytes(m, B, 1, ranks), who, ag_gpt_shape_str(m, B, shape), err);
    return s ? s : ag_check_checkpointable(ag_gpt_min_params(m), who, model, err);
}

ag_status ag_gpt_plot_attention(ag_gpt *g, const int *ids, const char *png, ag_attn_picture *p, ag_attn_head *heads,
                                const char *cmd, ag_error *err)
{
    int T = p->T, L = p->layer;
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor **A = calloc((size_t)g->cfg.n_layer, sizeof *A);   /* [n_layer] of [1,H,T,T] */
    ag_status s = AG_OK;
    if (!ctx || !A) s = ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", cmd);
    else if ((s = ag_gpt_attn_record(ctx, g, ids, 1, T, A))) ag_seterr(err, s, "%s: %s", cmd, ag_ctx_error(ctx));
    if (s == AG_OK) s = ag_attn_check(A[L], L, cmd, err);
    for (int h = 0; s == AG_OK && heads && h < g->cfg.n_head; h++)   // A[L] [1,H,T,T]
        ag_attn_head_summary(A[L]->data + (size_t)h * T * T, T, &heads[h]);
    if (s == AG_OK) {
        p->A = A[L]->data;
        p->H = g->cfg.n_head;
        s = ag_plot_attention(png, p, err);
    }
    free(A);
    ag_ctx_free(ctx);
    return s;
}
