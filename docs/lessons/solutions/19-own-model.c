/* 19-own-model.c -- lesson 19's exercise: the three calls of a model of your own that the
 * library's trainer makes (own_model.h checks them on ag_train_run): a step's batch, drawn from
 * the rng the trainer hands over, a micro-batch's loss, and a held-out evaluation on fixed
 * points.
 *
 *   19-own-model [DIR]   DIR (new): keep the two runs of the check there, to open loss.png and
 *                        report.md
 *
 * Then the check is turned on the usual mistakes: each must fail, named. */
#include "own_model.h"

static ag_status ctx_failed(ag_ctx *ctx, ag_error *err)
{
    return ag_seterr(err, ag_ctx_status(ctx) ? ag_ctx_status(ctx) : AG_ERR_NOMEM, "%s", ag_ctx_error(ctx));
}

static ag_status my_draw(void *user, ag_rng *rng, ag_error *err)
{
    (void)err;
    own_draw(user, OM_BATCH, rng);                                  // the whole batch, from the run's stream
    return AG_OK;
}

static ag_status my_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    own_model *m = user;
    ag_tensor *logits = own_forward(m, ctx, mb->first, mb->b);      // [b,2]: this micro-batch's points
    *loss = ag_cross_entropy(ctx, logits, m->y + mb->first);        // [1], on the tape
    return *loss ? AG_OK : ctx_failed(ctx, err);
}

/* the loss and the accuracy of OM_HELD points drawn from rng */
static ag_status held_out(own_model *m, ag_ctx *ctx, ag_rng *rng, double *val, double *score, ag_error *err)
{
    own_draw(m, OM_HELD, rng);
    ag_tensor *logits = own_forward(m, ctx, 0, OM_HELD);            // [400,2]
    ag_tensor *l = ag_cross_entropy(ctx, logits, m->y);             // [1]
    if (!l) return ctx_failed(ctx, err);
    *val = (double)l->data[0];
    *score = own_accuracy(logits, m->y, OM_HELD);
    return AG_OK;
}

static ag_status my_evaluate(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    ag_rng rng;
    ag_rng_seed(&rng, 1234);                                        // the same held-out points every time
    return held_out(user, ctx, &rng, val, score, err);
}

// --- the usual mistakes ---

/* the batch from an rng of its own: the checkpoint does not keep it */
static ag_status private_rng(void *user, ag_rng *rng, ag_error *err)
{
    static ag_rng mine;
    static bool seeded;
    (void)rng;
    if (!seeded) ag_rng_seed(&mine, 7), seeded = true;
    return my_draw(user, &mine, err);
}

/* the loss with the gradients off, as the evaluation runs */
static ag_status loss_off_tape(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    ag_ctx_set_grad(ctx, false);
    ag_status s = my_loss(user, ctx, mb, loss, err);
    ag_ctx_set_grad(ctx, true);
    return s;
}

/* the loss of the whole batch, whichever micro-batch mb is */
static ag_status whole_batch_loss(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err)
{
    own_model *m = user;
    (void)mb;
    ag_tensor *logits = own_forward(m, ctx, 0, OM_BATCH);          // [32,2]: all of it
    *loss = ag_cross_entropy(ctx, logits, m->y);                    // [1]
    return *loss ? AG_OK : ctx_failed(ctx, err);
}

/* new held-out points at every evaluation, from a stream that goes on */
static ag_status drifting_evaluate(void *user, ag_ctx *ctx, double *val, double *score, ag_error *err)
{
    static ag_rng rng;
    static bool seeded;
    if (!seeded) ag_rng_seed(&rng, 1234), seeded = true;
    return held_out(user, ctx, &rng, val, score, err);
}

int main(int argc, char **argv)
{
    if (argc > 2) return fprintf(stderr, "usage: %s [DIR]: DIR (new) keeps the runs\n", argv[0]), 2;
    int rc = own_model_check(argc == 2 ? argv[1] : NULL, my_draw, my_loss, my_evaluate);
    if (rc) return rc;
    printf("\nthe usual mistakes, each of which must fail:\n");
    int caught = own_model_check(NULL, private_rng, my_loss, my_evaluate) == 1;
    caught += own_model_check(NULL, my_draw, loss_off_tape, my_evaluate) == 1;
    caught += own_model_check(NULL, my_draw, my_loss, drifting_evaluate) == 1;
    caught += own_model_check(NULL, my_draw, whole_batch_loss, my_evaluate) == 1;
    printf("%d of 4 caught\n", caught);
    return caught == 4 ? 0 : 1;
}
