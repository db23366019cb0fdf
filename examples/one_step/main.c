/* one_step -- one training step of char_lm, written out in full (lesson 13 of docs/lessons):
 * from a checkpoint and its train state, the batch char_lm would draw next, forward, backward,
 * the clip and AdamW, as the library's trainer (src/train/loop.c's step) does them for char_lm.
 *
 *   build/one_step CKPT DATA [NEXT]
 *
 * CKPT is a char_lm run directory (or one ckpt-N in it) at iteration N, DATA the text it trains
 * on. With NEXT, the checkpoint char_lm wrote after iteration N (`char_lm train --resume
 * --max-iters N+1` on a copy of CKPT), every weight and both Adam moments must equal it bit
 * for bit, and the loss NEXT/metrics.csv has for iteration N: exit 0 when they do, 1 when not,
 * 2 on an error. A single process, one micro-batch (no --grad-accum, no ranks), its windows
 * split over the threads as char_lm's default splits them (ag_gpt_shards_default, nn.h).
 *
 * Only the library's headers: the checkpoint is read with its readers (load.c), the batch with
 * ag_windows_draw and ag_windows_fill (data/corpus.h), the dropout seed with ag_seed_at. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "load.h"

#define TAG_DROPOUT 0x64726f706f7574ull   /* "dropout": char_lm's stream of the dropout masks (ag_seed_at) */

/* char_lm's loss of iteration it: column 3 of its row in dir/metrics.csv (NAN if none) */
static double logged_loss(const char *dir, long it)
{
    char path[4096], line[4096];
    double loss = NAN;
    FILE *f = ag_path_join(path, sizeof path, dir, "metrics.csv") ? fopen(path, "r") : NULL;
    while (f && fgets(line, sizeof line, f)) {
        long row;
        double lr, l;
        if (sscanf(line, "%ld,%lf,%lf", &row, &lr, &l) == 3 && row == it) loss = l;
    }
    if (f) fclose(f);
    return loss;
}

/* elements of a [n] and b [n] that differ, and how far apart the furthest two are */
static size_t count_diff(const ag_real *a, const ag_real *b, size_t n, double *worst)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++) {
        d += a[i] != b[i];
        *worst = fmax(*worst, fabs((double)a[i] - (double)b[i]));
    }
    return d;
}

/* our weights and moments against char_lm's checkpoint at it + 1 (and its logged loss) */
static int compare(const char *next, const step_ckpt *st, double loss, ag_error *err)
{
    step_ckpt ns;
    if (step_ckpt_load(next, &ns, err)) return 2;
    const ag_params *P = st->g->params, *Q = ns.g->params;
    double worst = 0, theirs = logged_loss(next, st->iter);
    bool same_run = P->total == Q->total && ns.iter == st->iter + 1;
    size_t d = 0;
    if (same_run)
        d = count_diff(P->data, Q->data, P->total, &worst) + count_diff(P->m, Q->m, P->total, &worst) +
            count_diff(P->v, Q->v, P->total, &worst);
    step_ckpt_free(&ns);
    printf("char_lm, iteration %ld: loss %.6f (metrics.csv)\n", st->iter, theirs);
    if (!same_run) return printf("%s is not the checkpoint of iteration %ld of this run\n", next, st->iter + 1), 1;
    printf("weights, m and v against %s (iteration %ld): %zu of %zu differ, by %.3g at most\n", next, st->iter + 1, d,
           3 * P->total, worst);
    bool same_loss = fabs(loss - theirs) <= 5e-7 * fmax(1, fabs(theirs));   /* metrics.csv: 6 decimals */
    printf("%s\n", d == 0 && same_loss ? "the same step, bit for bit" : "DIFFERENT from char_lm's step");
    return d == 0 && same_loss ? 0 : 1;
}

/* The step itself: the trainer's step (src/train/loop.c), with one micro-batch and AdamW. */
static int step(step_ckpt *st, const ag_corpus *text, double *loss_out, ag_error *err)
{
    const step_config *c = &st->cfg;
    ag_params *P = st->g->params;   /* flat buffers: weights W, gradients dW, Adam's m and v */
    int B = c->batch_size, T = c->model.block_size;
    long it = st->iter;
    size_t *off = malloc((size_t)B * sizeof *off);
    int *x = malloc((size_t)B * T * sizeof *x), *y = malloc((size_t)B * T * sizeof *y);
    ag_ctx *ctx = ag_ctx_new();
    ag_gpt_shards *split = NULL;
    int rc = 2;
    if (!off || !x || !y || !ctx) goto out;
    ag_ctx_set_recycle_grads(ctx, true);   /* as char_lm: only the parameters' gradients are read */

    // the learning rate at it: a linear warmup to lr, then a cosine (or linear) decay to min_lr
    const ag_lr_schedule sched = {c->lr, c->min_lr, c->warmup_iters, c->lr_decay_iters, c->lr_schedule};
    double lr = ag_lr_at(&sched, it);
    // the batch: B windows of the training split, from the sampler saved in the checkpoint
    ag_windows_draw(off, B, st->n_train, T, &st->rng);                          // off [B]
    ag_windows_fill(x, y, text->ids, off, B, T);                                // x, y [B,T]
    // forward, loss, backward, the windows split over the workers as char_lm splits them (nn.h:
    // one shard per thread); dropout masks from --seed's stream at it, each shard its own
    ag_params_zero_grad(P);                                                     // dW = 0
    double loss = 0;
    const ag_forward_opts fo = {.train = true, .seed = ag_seed_at(c->seed, TAG_DROPOUT, (uint64_t)it)};
    split = ag_gpt_shards_new(st->g, ctx, ag_gpt_shards_default(&c->model, B), err);
    if (!split || ag_gpt_shards_pass(split, x, y, B, T, &fo, 1, &loss, err) != AG_OK)   // logits [B,T,V] -> loss
        goto out;                                                                        // dW += dloss/dW
    // the clip: the factor that brings the global norm of dW down to grad_clip (1 under it)
    double norm = ag_grad_norm(P), gscale = ag_clip_scale(norm, c->grad_clip);
    // AdamW with g = gscale dW, t = the updates the weights have had, this one included
    const ag_adam_cfg ac = {.beta1 = c->beta1, .beta2 = c->beta2, .eps = 1e-8, .weight_decay = c->weight_decay};
    ag_adamw_step_scaled(P, &ac, lr, ++st->step, gscale);
    *loss_out = loss;
    printf("iteration %ld: loss %.6f, lr %.6g, gradient norm %.4f, clip factor %.4f, AdamW t = %ld\n", it, *loss_out,
           lr, norm, gscale, st->step);
    rc = 0;
out:
    free(off), free(x), free(y);
    ag_gpt_shards_free(split);
    ag_ctx_free(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: one_step CKPT DATA [NEXT]: one char_lm step from checkpoint CKPT on the text DATA; "
                        "with NEXT, compared with char_lm's own\n");
        return 2;
    }
    ag_threads_init(2);   /* as char_lm by default (--threads): OpenMP 2 threads, OpenBLAS 1 */
    ag_error err = {0};
    step_ckpt st = {0};
    ag_corpus text = {0};
    double loss = NAN;
    int rc = 2;
    if (step_ckpt_load(argv[1], &st, &err) ||
        ag_corpus_load_with(argv[2], &(ag_corpus_opts){.vocab = &st.vocab}, &text, &err))
        goto out;
    if (!st.cfg.adamw || text.n != st.n_tokens) {
        ag_seterr(&err, AG_ERR_ARG, "one_step replays AdamW runs on their own text (%zu tokens here, the run had %zu)",
                  text.n, st.n_tokens);
        goto out;
    }
    rc = step(&st, &text, &loss, &err);
    if (rc == 0 && argc == 4) rc = compare(argv[3], &st, loss, &err);
out:
    if (err.status) fprintf(stderr, "one_step: error: %s\n", err.msg);
    ag_corpus_free(&text);
    step_ckpt_free(&st);
    return rc;
}
