/* train_agree.c -- a run on several ranks, before its first step (run.h; train/ddp.h says how): one
 * build on all, rank 0's checkpoint sent to the others, and what each rank holds compared, so that a
 * rank started with another build, --data or flag stops the job at once, the difference named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/hash.h"
#include "run.h"
#include "tensor/speed.h"   /* ag_threads */

#ifndef LM_VERSION
#define LM_VERSION "unversioned"   /* the Makefile gives its VERSION */
#endif
/* The collectives before the trainer's (the handshake, rank 0's outcome and checkpoint, each
 * rank's outcome, the digests), in order: raised when they change (the trainer's: ag_train_layout). */
#define LM_PROTOCOL 6

/* What a digest holds after the config's fields (the data first when they differ). */
enum { A_PARAMS, A_VOCAB, A_TOKENS, A_TEXT, A_ACCUM, A_SHARDS, A_THREADS, A_ITER, A_STEP, A_SAMPLER, A_REAL, A_N };
static const char *const extra_names[A_N] = {
    "the parameter count", "the vocabulary", "the text's length", "the text", "--grad-accum", "--shards",
    "--threads", "the iteration to start at", "the optimizer's step", "the batch sampler", "bytes per real",
};
static const ag_fields_digest digest = {
    .fields = lm_fields, .n_fields = LM_N_FIELDS, .extra = extra_names, .n_extra = A_N,
    .hashes = 1u << A_VOCAB | 1u << A_TEXT | 1u << A_SAMPLER, .first = 1u << A_VOCAB | 1u << A_TEXT | 1u << A_TOKENS,
    .what = "the ranks do not hold the same run, so none started (every rank needs the same flags, --data and "
            "checkpoint)"};

ag_status lm_run_agree(lm_run *R, ag_error *err)
{
    const lm_train_state *st = &R->learn.st;
    const ag_vocab *v = &R->data.text.vocab;
    uint64_t mine[LM_N_FIELDS + A_N], *x = mine + LM_N_FIELDS;   /* the fields: ag_fields_agree's */
    x[A_PARAMS] = R->learn.m.g->params->total;
    x[A_VOCAB] = ag_fnv1a(AG_FNV1A_INIT, v->cp, (size_t)v->V * sizeof *v->cp);
    x[A_TOKENS] = st->n_tokens;
    x[A_TEXT] = st->data_hash;
    x[A_ACCUM] = (uint64_t)(R->o->grad_accum > 1 ? R->o->grad_accum : 1);
    x[A_SHARDS] = (uint64_t)R->learn.n_shards;   /* the split rounds alike only when alike */
    x[A_THREADS] = (uint64_t)ag_threads();
    x[A_ITER] = (uint64_t)st->iter;
    x[A_STEP] = (uint64_t)st->step;
    x[A_SAMPLER] = ag_fnv1a(AG_FNV1A_INIT, &st->rng, sizeof st->rng);
    x[A_REAL] = sizeof(ag_real);
    return ag_fields_agree(R->o->dist, &R->cfg, &digest, mine, &R->res->ranks_compared, err);   /* ddp.h: said once */
}

ag_status lm_run_handshake(lm_run *R, ag_error *err)
{
    /* the layout: the config table and the digest's items, and the sizes of what is sent as raw bytes */
    uint64_t sizes[] = {sizeof(lm_config), sizeof(lm_train_state), sizeof(ag_real), sizeof(ag_error),
                        LM_N_FIELDS + A_N, ag_train_layout()};   /* the trainer's exchanges after these */
    const ag_build b = {.program = "char_lm_mpi", .version = LM_VERSION, .protocol = LM_PROTOCOL,
                        .layout = ag_fnv1a(ag_fields_digest_layout(&digest, AG_FNV1A_INIT), sizes, sizeof sizes)};
    return ag_build_handshake(R->o->dist, &b, &R->res->error_shared, err);   /* ddp.h: the record, its message */
}

/* What rank 0 sends after its outcome (ag_share_start), laid out alike on every rank (the handshake). */
typedef struct {
    bool checkpoint;        /* a checkpoint follows: */
    lm_config cfg;          /*   the model's config, */
    uint64_t run_id;        /*   its run, */
    int V;                  /*   its vocabulary's size (the code points come next), */
    lm_train_state st;      /*   and with --resume, where the run stands */
} lm_shared;

ag_status lm_run_share_start(lm_run *R, ag_status mine, const ag_error *why, ag_error *err)
{
    ag_dist *d = R->o->dist;
    ag_status st = ag_share_start(d, mine, why, &R->res->error_shared, err);   /* ddp.h: rank 0's failure, said once */
    if (st || ag_dist_size(d) == 1) return st;
    lm_model *m = &R->learn.m;
    bool root = ag_dist_rank(d) == 0;
    lm_shared s;
    memset(&s, 0, sizeof s);   /* its padding too: every byte sent is set */
    if ((s.checkpoint = root && m->g))
        s.cfg = m->cfg, s.run_id = m->run_id, s.V = m->vocab.V, s.st = R->learn.st;
    if ((st = ag_dist_bcast(d, &s, sizeof s, 0, err)) || !s.checkpoint) return st;
    if (!root) {   /* the vocabulary's code points follow */
        if (s.V <= 0 || !(m->vocab.cp = malloc((size_t)s.V * sizeof *m->vocab.cp)))
            return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
        m->vocab.V = s.V, m->cfg = s.cfg, m->run_id = s.run_id, R->learn.st = s.st;
    }
    return ag_dist_bcast(d, m->vocab.cp, (size_t)s.V * sizeof *m->vocab.cp, 0, err);
}
