/* train_agree.c -- before the first step of a run on several ranks, four exchanges (run.h):
 * the build each rank runs (lm_run_handshake: train/ddp.h's fixed-size record, first of all), rank 0's
 * opening of the run directory and its checkpoint sent to the others (lm_run_share_start: only
 * rank 0 locks and reads the directory), how each rank's own setup went (lm_run_share_outcome:
 * an error said once, not once per rank) and what each rank holds (lm_run_agree), so that a
 * rank started with another build, --data or flag stops the job at once with a message that
 * names the difference, instead of corrupting a broadcast sized by its own model or training
 * another run unnoticed.
 *
 * Each rank makes a digest of the same fixed size: 8 bytes for every field of the config
 * (config.h's table: batch, block, iterations, seed, --val-fraction, the optimizer and the
 * schedule, the model's shape ...), then the parameter count, the vocabulary's and the text's
 * FNV-1a hashes (src/data/hash.h), the text's length, --grad-accum, the shards (--shards), --threads, where
 * the run starts (iteration, optimizer step, batch sampler) and the bytes of a real. The library
 * gathers and compares them (train/ddp.h: ag_ranks_agree), every rank alike, so every rank
 * decides alike: on any difference all exit 2, and rank 0 names the fields and the ranks ("the
 * vocabulary: hash 5c1e0a3f on rank 0, 0f9d2b61 on rank 1"); this file says what the items are. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "data/hash.h"
#include "run.h"
#include "tensor/speed.h"   /* ag_threads */

#ifndef LM_VERSION
#define LM_VERSION "unversioned"   /* the Makefile gives its VERSION */
#endif
/* The collectives a run makes before the trainer's, in order (the handshake, rank 0's outcome,
 * its checkpoint, each rank's setup outcome, the digests): raised whenever they change, so that
 * builds that would send each other other things meet only at the handshake. It is the run's
 * only one: the trainer's protocol and sizes are in its layout (ag_train_layout), and the
 * trainer makes none of its own (ag_train_opts.build_checked). */
#define LM_PROTOCOL 5

/* What a digest holds after the config's fields. */
enum { A_PARAMS, A_VOCAB, A_TOKENS, A_TEXT, A_ACCUM, A_SHARDS, A_THREADS, A_ITER, A_STEP, A_SAMPLER, A_REAL, A_N };
static const char *const extra_names[A_N] = {
    "the parameter count", "the vocabulary", "the text's length", "the text", "--grad-accum", "--shards",
    "--threads", "the iteration to start at", "the optimizer's step", "the batch sampler", "bytes per real",
};
#define N_ITEMS (LM_N_FIELDS + A_N)

/* d [N_ITEMS]: what this rank holds. */
static void make_digest(const lm_run *R, uint64_t *d)
{
    const lm_train_state *st = &R->learn.st;
    const ag_vocab *v = &R->data.text.vocab;
    for (int i = 0; i < LM_N_FIELDS; i++) d[i] = ag_field_bits(&R->cfg, &lm_fields[i]);   /* train/fields.h */
    uint64_t *x = d + LM_N_FIELDS;
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
}

/* Item i's value v as the user reads it: "12", "adamw", "hash 5c1e0a3f". */
static void item_value(const void *user, int i, uint64_t v, char *buf, size_t n)
{
    (void)user;
    if (i < LM_N_FIELDS) {
        ag_field_format_bits(&lm_fields[i], v, buf, n);
        return;
    }
    int x = i - LM_N_FIELDS;
    if (x == A_VOCAB || x == A_TEXT || x == A_SAMPLER) snprintf(buf, n, "hash %08llx", (unsigned long long)(v >> 32));
    else snprintf(buf, n, "%llu", (unsigned long long)v);
}

/* Item i as the message names it: a config field's flag (or key), or what follows them. */
static const char *item_name(const void *user, int i)
{
    (void)user;
    const lm_field *f = i < LM_N_FIELDS ? &lm_fields[i] : NULL;
    return !f ? extra_names[i - LM_N_FIELDS] : f->flag ? f->flag : f->key;
}

/* The data, named first: a different text explains the rest. */
static bool item_first(const void *user, int i)
{
    (void)user;
    int x = i - LM_N_FIELDS;
    return x == A_VOCAB || x == A_TEXT || x == A_TOKENS;
}

ag_status lm_run_agree(lm_run *R, ag_error *err)
{
    uint64_t mine[N_ITEMS];
    make_digest(R, mine);
    const ag_digest d = {.n = N_ITEMS, .name = item_name, .value = item_value, .first = item_first,
                         .what = "the ranks do not hold the same run, so none started (every rank needs the same "
                                 "flags, --data and checkpoint)"};
    return ag_ranks_agree(R->o->dist, mine, &d, &R->ctl.compared, err);   /* ddp.h: the message, said once */
}

/* FNV-1a of everything the ranks exchange as raw bytes or by position: the config table (keys,
 * types, offsets), the sizes of the config, the train state, a real and an error, the digest's
 * items and the stop votes. */
static uint64_t layout_hash(void)
{
    uint64_t h = ag_fields_layout(lm_fields, LM_N_FIELDS, AG_FNV1A_INIT);   /* train/fields.h */
    for (int i = 0; i < A_N; i++) h = ag_fnv1a(h, extra_names[i], strlen(extra_names[i]));
    uint64_t sizes[] = {sizeof(lm_config), sizeof(lm_train_state), sizeof(ag_real), sizeof(ag_error), N_ITEMS,
                        ag_train_layout()};   /* the trainer's exchanges after these (train/train.h) */
    return ag_fnv1a(h, sizes, sizeof sizes);
}

ag_status lm_run_handshake(lm_run *R, ag_error *err)
{
    const ag_build b = {.program = "char_lm_mpi", .version = LM_VERSION, .protocol = LM_PROTOCOL,
                        .layout = layout_hash()};
    return ag_build_handshake(R->o->dist, &b, &R->ctl.shared, err);   /* ddp.h: the record, its message */
}

// --- rank 0 reads the run directory, and tells the others ---

/* What rank 0 sends after its outcome (ag_share_start): the checkpoint's config and state (the
 * handshake made sure that every rank lays them out alike). */
typedef struct {
    bool checkpoint;        /* a checkpoint follows: */
    lm_config cfg;          /*   the model's config, */
    long iter;              /*   its iteration and run, */
    uint64_t run_id;
    int V;                  /*   its vocabulary's size (the code points come next), */
    lm_train_state st;      /*   and with --resume, where the run stands */
} lm_shared;

/* Rank 0: what it read into s; others: receive it (the vocabulary allocated). */
static ag_status send_checkpoint(lm_run *R, lm_shared *s, ag_error *err)
{
    lm_model *m = &R->learn.m;
    ag_dist *d = R->o->dist;
    bool root = ag_dist_rank(d) == 0;
    if (root && s->checkpoint) {
        s->cfg = m->cfg, s->iter = m->iter, s->run_id = m->run_id, s->V = m->vocab.V, s->st = R->learn.st;
    }
    ag_status st = ag_dist_bcast(d, s, sizeof *s, 0, err);
    if (st || !s->checkpoint || root) return st;
    if (s->V <= 0 || !(m->vocab.cp = malloc((size_t)s->V * sizeof *m->vocab.cp)))
        return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    m->vocab.V = s->V, m->cfg = s->cfg, m->iter = s->iter, m->run_id = s->run_id, R->learn.st = s->st;
    return AG_OK;
}

ag_status lm_run_share_start(lm_run *R, ag_status mine, const ag_error *why, ag_error *err)
{
    ag_dist *d = R->o->dist;
    ag_status st = ag_share_start(d, mine, why, &R->ctl.shared, err);   /* ddp.h: rank 0's failure, said once */
    if (st || ag_dist_size(d) == 1) return st;
    lm_shared *s = calloc(1, sizeof *s);
    if (!s) return ag_seterr(err, AG_ERR_NOMEM, "out of memory");
    s->checkpoint = ag_dist_rank(d) == 0 && R->learn.m.g;
    st = send_checkpoint(R, s, err);
    if (st == AG_OK && s->checkpoint)
        st = ag_dist_bcast(d, R->learn.m.vocab.cp, (size_t)s->V * sizeof *R->learn.m.vocab.cp, 0, err);
    free(s);
    return st;
}
