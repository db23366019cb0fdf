/* activations.h -- lesson 14's check: your statistics of the MLP activation's inputs, and your
 * reading of them, on a model two blocks of which were initialized badly.
 *
 *   activations_check(my_stats, my_saturated_block)
 *     my_stats(x, n)            the mean, the standard deviation and the dead share of x [n]:
 *                               the share below -3, where GELU's slope is under 0.012
 *     my_saturated_block(s, L)  from s [L], one per block: the block whose MLP is saturated
 *
 * It builds a 4-block GPT (C 64, 4 heads, V 58) and spoils two blocks' fc1 (the layer whose
 * outputs GELU takes): in block `hot` the weights x 8 and the bias +3 (wide inputs, but on
 * GELU's linear side), in block `sat` the weights x 4 and the bias -2.5 (pushed into GELU's
 * flat side). One forward on random tokens with the tape on; each gelu node's input, read off
 * the tape as `char_lm --log-activations` does, goes to your my_stats. Twice, with the two
 * blocks in other places. 0 ok, 1 not, 2 the check could not run. */
#ifndef ACTIVATIONS_H
#define ACTIVATIONS_H

#include "lesson.h"

typedef struct {
    double mean, std, dead;   /* dead: a share, 0..1 */
} act_stats;

typedef act_stats (*act_stats_fn)(const ag_real *x, size_t n);
typedef int (*saturated_block_fn)(const act_stats *s, int L);

enum { ACT_L = 4, ACT_B = 4, ACT_T = 32 };

typedef struct {
    act_stats_fn mine;
    act_stats yours[ACT_L], want[ACT_L];
} act_reading;

/* the check's own statistics */
static act_stats act_reference(const ag_real *x, size_t n)
{
    double s = 0, ss = 0, dead = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i], dead += x[i] < -3;
    double mean = s / (double)n;
    for (size_t i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    return (act_stats){ mean, sqrt(ss / (double)n), dead / (double)n };
}

static void act_read_node(const ag_node *nd, void *user)
{
    act_reading *r = user;
    int l;
    if (strcmp(nd->op->name, "gelu") || !nd->scope || sscanf(nd->scope, "blocks.%d.mlp", &l) != 1) return;
    if (l < 0 || l >= ACT_L) return;
    r->want[l] = act_reference(nd->in[0]->data, ag_numel(nd->in[0]));
    r->yours[l] = r->mine(nd->in[0]->data, ag_numel(nd->in[0]));
}

/* fc1 of block l: its weights times w, its bias plus b */
static int act_spoil(ag_gpt *g, int l, double w, double b)
{
    char name[64];
    snprintf(name, sizeof name, "blocks.%d.mlp.fc1.weight", l);
    ag_tensor *W = ag_params_find(g->params, name);
    snprintf(name, sizeof name, "blocks.%d.mlp.fc1.bias", l);
    ag_tensor *bias = ag_params_find(g->params, name);
    if (!W || !bias) return 2;
    for (size_t i = 0; i < ag_numel(W); i++) W->data[i] *= (ag_real)w;
    for (size_t i = 0; i < ag_numel(bias); i++) bias->data[i] += (ag_real)b;
    return 0;
}

/* One forward of the model with blocks hot and sat spoiled; r gets every block's statistics. */
static int act_measure(int hot, int sat, act_reading *r)
{
    ag_gpt_config cfg = { .vocab_size = 58, .n_layer = ACT_L, .n_head = 4, .n_embd = 64, .block_size = ACT_T };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, 14, &err);
    ag_ctx *ctx = g ? ag_ctx_new() : NULL;
    int ids[ACT_B * ACT_T], rc = 2;
    ag_rng rng;
    ag_rng_seed(&rng, 1400 + (uint64_t)sat);
    for (int i = 0; i < ACT_B * ACT_T; i++) ids[i] = (int)ag_rng_below(&rng, 58);
    if (ctx && !act_spoil(g, hot, 8, 3) && !act_spoil(g, sat, 4, -2.5)) {
        ag_forward_opts fo = { .composed_attention = true };
        if (ag_gpt_forward(ctx, g, ids, NULL, ACT_B, ACT_T, &fo, NULL)) {
            ag_tape_foreach(ctx, act_read_node, r);
            rc = 0;
        }
    }
    if (rc) fprintf(stderr, "the check could not run: %s\n", g ? "the forward failed" : err.msg);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    return rc;
}

/* What a wrong statistic of block l points to; false when it agrees. */
static bool act_explain(const act_stats *y, const act_stats *w, int l)
{
    bool mean_ok = fabs(y->mean - w->mean) <= 1e-6 + 1e-6 * fabs(w->mean);
    bool std_ok = fabs(y->std - w->std) <= 1e-6 * w->std;
    bool dead_ok = fabs(y->dead - w->dead) <= 1e-9;
    if (mean_ok && std_ok && dead_ok) return false;
    printf("FAIL: block %d: yours mean %.4f std %.4f dead %.4f, the check's %.4f %.4f %.4f\n", l, y->mean, y->std,
           y->dead, w->mean, w->std, w->dead);
    if (!std_ok && fabs(y->std - sqrt(w->std * w->std + w->mean * w->mean)) <= 1e-6 * w->std)
        printf("FAIL: your std is the RMS, sqrt(mean x^2): subtract the mean first (this block's is %.2f)\n", w->mean);
    else if (!dead_ok && y->dead > w->dead + 0.05)
        printf("FAIL: your dead share counts inputs that still pass gradient: GELU's slope is under 0.012 only "
               "below -3 (between -3 and 0 it reaches -0.13)\n");
    else if (!dead_ok)
        printf("FAIL: your dead share is not the share of inputs below -3 (a share: 0..1, not a count)\n");
    return true;
}

static int activations_check(act_stats_fn mine, saturated_block_fn pick)
{
    const int trials[2][2] = { { 1, 2 }, { 3, 0 } };   /* { hot, sat } */
    for (int k = 0; k < 2; k++) {
        int hot = trials[k][0], sat = trials[k][1];
        act_reading r = { .mine = mine };
        if (act_measure(hot, sat, &r)) return 2;
        printf("blocks %d (fc1 x8, bias +3) and %d (fc1 x4, bias -2.5) spoiled:\n", hot, sat);
        for (int l = 0; l < ACT_L; l++)
            printf("  block %d: mean %7.3f  std %6.3f  dead %5.1f%%\n", l, r.yours[l].mean, r.yours[l].std,
                   100 * r.yours[l].dead);
        /* the spoiled blocks first: their numbers tell the mistakes apart */
        if (act_explain(&r.yours[sat], &r.want[sat], sat) || act_explain(&r.yours[hot], &r.want[hot], hot)) return 1;
        for (int l = 0; l < ACT_L; l++)
            if (l != sat && l != hot && act_explain(&r.yours[l], &r.want[l], l)) return 1;
        int got = pick(r.want, ACT_L);
        printf("your saturated block: %d\n", got);
        if (got == sat) continue;
        if (got == hot)
            printf("FAIL: block %d has the widest inputs, but on GELU's linear side: wide is not saturated; the "
                   "dead share says which block's units pass no gradient\n", hot);
        else printf("FAIL: block %d is not the one whose units pass no gradient (look at the dead share)\n", got);
        return 1;
    }
    printf("ok: the statistics, and the saturated block from them\n");
    return 0;
}

#endif
