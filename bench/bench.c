/* bench.c -- make bench: training throughput of the char_lm GPT, where the time goes, and how
 * close the matrix products come to OpenBLAS's own speed.
 *
 * For each configuration (tiny, baby, small of ../shared/MODEL.md; 10min, char_lm's preset) it runs the training step
 * of ../shared/bench/torch_ref.py: sample a batch, forward, backward, clip, AdamW; it times
 * every step, drops the first 5 (warm-up) and the first of each later round, and prints
 *   - tokens/s and ms per step;
 *   - GFLOP/s of the step's matrix products (counted from the shapes: 3x the forward FLOPs),
 *     next to sgemm's GFLOP/s on the same shapes with the same threads (the ceiling), measured
 *     after each of up to 10 rounds of the steps: the two sides see the same machine;
 *   - the share of time per op kind, forward and backward separately, plus clip and AdamW;
 *   - allocations per step after the first (our code's malloc/calloc/realloc, counted by
 *     linker wrapping) and the step arena's chunk mallocs;
 *   - peak RSS against parameters + grads + Adam state + the step arena's high-water mark.
 * --json prints one JSON object per configuration instead.
 *
 *   build/bench [--config tiny|baby|small|10min|all] [--steps N] [--threads N] [--json] [--data FILE]
 *
 * Threads: without --threads, 2 tuned as char_lm's default is (ag_thread_tuner, speed.h: one
 * thread while that is faster, on a busy machine); --threads N: N, fixed.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cblas.h> /* the bare sgemm, the ceiling to measure against */
#include "attograd.h"
#include "data/corpus.h"
#include "tensor/parallel.h" /* ag_gemm: private to the library, measured here */

void openblas_set_num_threads(int);


/* ---- allocation counters (the link wraps malloc, calloc and realloc of our own code) ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
static unsigned long n_allocs;   /* atomic adds: the shards' threads allocate side by side */
static void count_alloc(void) { __atomic_add_fetch(&n_allocs, 1, __ATOMIC_RELAXED); }
void *__wrap_malloc(size_t n) { count_alloc(); return __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { count_alloc(); return __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { count_alloc(); return __real_realloc(p, n); }

typedef struct {
    const char *name;
    int n_layer, n_head, n_embd, block_size, batch;
    double dropout;
} bench_config;

/* MODEL.md's three, and char_lm's --config 10min (context 256: attention is half its step) */
static const bench_config configs[] = {
    { "tiny", 2, 2, 64, 32, 16, 0 },
    { "baby", 4, 4, 128, 64, 12, 0 },
    { "small", 6, 6, 384, 256, 64, 0 },
    { "10min", 4, 4, 96, 256, 12, 0.05 },
};

/* matmul FLOPs of one training step: forward products, x3 for forward + backward (dX and dW) */
static double step_flops(const bench_config *c, int V)
{
    double BT = (double)c->batch * c->block_size, C = c->n_embd, T = c->block_size;
    double per_layer = 2 * BT * C * C * 4      /* w_q, w_k, w_v, w_o */
                     + 2 * BT * C * 4 * C * 2  /* fc1, fc2 */
                     + 2 * BT * T * C * 2;     /* q k^T and a v, all heads together */
    double fwd = c->n_layer * per_layer + 2 * BT * C * V; /* lm_head */
    return 3 * fwd;
}

/* FLOPs and the seconds sgemm takes for them: a rate that sums over rounds */
typedef struct {
    double flops, secs;
} gemm_rate;

static double gflops_of(gemm_rate r) { return r.secs > 0 ? r.flops / r.secs / 1e9 : 0; }

/* The three products a Linear does (y = x W^T, dx = dy W, dW = dy^T x) on the step's shapes,
 * each shape for at least `secs` (and 3 times), run `split` through ag_gemm (OpenMP row
 * blocks, what training uses) or as plain cblas_sgemm on OpenBLAS's own pool of `threads`.
 * Returns the FLOPs of one step's linears and the time sgemm takes for them at each shape's
 * rate: each shape weighs what it weighs in the step (w_q, w_k, w_v, w_o: 4 a layer; fc1, fc2:
 * 1 each; the lm_head: 1), not the same time each (which let the lm_head's slow shape, 1% of
 * baby's products, drag the ceiling down by 6%). */
static gemm_rate gemm_on_shapes(const bench_config *c, int V, bool split, int threads, double secs)
{
    int R = c->batch * c->block_size, C = c->n_embd;
    int shapes[][3] = { { R, C, C }, { R, 4 * C, C }, { R, C, 4 * C }, { R, V, C } }; /* M, N, K */
    int in_step[] = { 4 * c->n_layer, c->n_layer, c->n_layer, 1 };                    /* times a step */
    gemm_rate rate = { 0, 0 };
    if (!split) openblas_set_num_threads(threads);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = calloc((size_t)M * K, 4), *B = calloc((size_t)K * N, 4), *Cm = calloc((size_t)M * N, 4);
        float *dC = calloc((size_t)M * N, 4), *dA = calloc((size_t)M * K, 4), *dB = calloc((size_t)K * N, 4);
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)(i % 5) * 0.1f;
        int reps = -1; /* the first pass untimed: it faults in the fresh buffers it writes */
        double t0 = 0, t1 = 0;
        while (reps < 0 || t1 - t0 < secs || reps < 3) {
            if (split) {
                ag_gemm(false, true, M, N, K, 1, A, K, B, K, 0, Cm, N);
                ag_gemm(false, false, M, K, N, 1, dC, N, B, K, 1, dA, K);
                ag_gemm(true, false, N, K, M, 1, dC, N, A, K, 1, dB, K);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, K, B, K, 0, Cm, N);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1, dC, N, B, K, 1, dA, K);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1, dC, N, A, K, 1, dB, K);
            }
            if (++reps == 0) t0 = ag_now_s();
            t1 = ag_now_s();
        }
        rate.flops += in_step[s] * 3.0 * 2 * M * N * K; /* one of each product, as often as a step */
        rate.secs += in_step[s] * (t1 - t0) / reps;
        free(A); free(B); free(Cm); free(dC); free(dA); free(dB);
    }
    if (!split) openblas_set_num_threads(1); /* back to one pool */
    return rate;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* ---- sampling speed ---- */

/* the index of the largest x[j], the first one on ties: greedy decoding */
static int argmax(const ag_real *x, int n)
{
    int best = 0;
    for (int j = 1; j < n; j++) best = x[j] > x[best] ? j : best;
    return best;
}

/* Greedy ids[1..n] after ids[0] with the KV cache, one position per token. Seconds taken, or
 * -1 on error. */
static double sample_cached(ag_ctx *ctx, ag_gpt *g, ag_kv_cache *cache, int *ids, int n)
{
    ag_kv_cache_clear(cache);
    double t0 = ag_now_s();
    for (int p = 0; p < n; p++) {
        ag_tensor *logits = ag_gpt_forward_cached(ctx, g, cache, ids[p]);   // [V]
        if (!logits) return -1;
        ids[p + 1] = argmax(logits->data, g->cfg.vocab_size);
        ag_ctx_reset(ctx);
    }
    return ag_now_s() - t0;
}

/* The same without a cache: the whole context again for every token. Seconds, or -1. */
static double sample_recomputing(ag_ctx *ctx, ag_gpt *g, int *ids, int n)
{
    int V = g->cfg.vocab_size;
    double t0 = ag_now_s();
    for (int p = 0; p < n; p++) {
        ag_tensor *logits = ag_gpt_forward(ctx, g, ids, NULL, 1, p + 1, NULL, NULL); // [1,p+1,V]
        if (!logits) return -1;
        ids[p + 1] = argmax(logits->data + (size_t)p * V, V);        /* the last position's */
        ag_ctx_reset(ctx);
    }
    return ag_now_s() - t0;
}

/* characters/s generating n tokens from an untrained model (greedy: the argmax, so both ways
 * pick the same tokens): with the KV cache (one position per token) and by recomputing the
 * whole context for every token, as a model without a cache must. The best of SAMPLE_ROUNDS
 * rounds each way: one round of a small model takes a few milliseconds, and the first one
 * also grows the arena. Also checks the two agree on every token; returns -1 if they do not. */
#define SAMPLE_ROUNDS 5
static int sample_speed(ag_gpt *g, int n, double *cached_cps, double *recompute_cps)
{
    if (n > g->cfg.block_size) n = g->cfg.block_size;
    ag_ctx *ctx = ag_ctx_new();
    ag_kv_cache *cache = ag_kv_cache_new(g);
    int *ids = malloc((size_t)(n + 1) * sizeof(int)), *ids2 = malloc((size_t)(n + 1) * sizeof(int));
    bool ok = ctx && cache && ids && ids2, same = true;
    if (ok) ag_ctx_set_grad(ctx, false);
    *cached_cps = *recompute_cps = 0;
    for (int round = 0; ok && round < SAMPLE_ROUNDS; round++) {
        ids[0] = ids2[0] = 0;
        double cached_s = sample_cached(ctx, g, cache, ids, n);
        double recompute_s = cached_s < 0 ? -1 : sample_recomputing(ctx, g, ids2, n);
        if (!(ok = recompute_s >= 0)) break;
        same = same && memcmp(ids, ids2, (size_t)(n + 1) * sizeof(int)) == 0;
        if (n / cached_s > *cached_cps) *cached_cps = n / cached_s;
        if (n / recompute_s > *recompute_cps) *recompute_cps = n / recompute_s;
    }
    free(ids); free(ids2);
    ag_kv_cache_free(cache);
    ag_ctx_free(ctx);
    return ok && same ? 0 : -1;
}

/* ---- one configuration: train, measure, report ---- */

enum { WARM = 5 };  /* steps left out of the timing: the first grows the arena, the next warm up */
/* The timed steps come in rounds with the sgemm ceiling measured after each, so that both sides
 * of the ratio see the same machine (a shared one's speed wanders by 20% over seconds). Each
 * round after the first starts with one step left out, as the run starts with WARM: the
 * ceiling's products have pushed the step's data out of the caches. */
enum { MAX_ROUNDS = 10, MIN_ROUND = 8 };
#define CEILING_SECS 0.04 /* per shape, per round, each way (OpenBLAS's pool, split) */
#define OPENBLAS_QUIET_US 200000 /* until OpenBLAS's threads stop spinning (ceiling_round) */

/* The model and the training step's state, set up as char_lm train does */
typedef struct {
    ag_gpt *g;
    ag_ctx *ctx;
    int B, T;
    int *x, *y;                 /* [B*T] the batch's inputs and targets */
    double *step_s;             /* [steps] seconds of each timed step */
    ag_adam_cfg ac;
    ag_lr_schedule sched;
    ag_rng rng;
    size_t n_train;             /* batches come from the first 90% of the corpus */
    ag_thread_tuner tuner;      /* max 1 with --threads: it then changes nothing */
    ag_gpt_shards *shards;      /* the batch in shards, one thread each, as char_lm train runs it */
} trainer;

/* What the timed steps (after WARM) measured */
typedef struct {
    int timed;                  /* steps timed */
    int single;                 /* of these, run on one thread by the tuner */
    double total, median;       /* seconds: all timed steps, the median one */
    double t_clip, t_adam;      /* seconds in the gradient norm and in AdamW */
    ag_profile prof;            /* seconds per op kind, forward and backward */
    unsigned long allocs_per_step;   /* our malloc/calloc/realloc per step after the first */
    uint64_t chunk_growth;      /* the arena's chunk mallocs since step 1 */
    int rounds;                 /* of timed steps, each followed by the ceiling */
    double round_pct[MAX_ROUNDS];    /* each round's matmul GFLOP/s, % of its own ceiling */
    gemm_rate own, split;       /* the ceiling, all rounds together: OpenBLAS's pool, ag_gemm */
} step_timing;

/* Everything one configuration reports */
typedef struct {
    step_timing st;
    bool tuned;                             /* the default threads: ag_thread_tuner picked 2 or 1 */
    size_t n_params;
    double tok_s, gflops;                   /* training throughput */
    double sgemm_own, sgemm_split, ceiling; /* sgemm GFLOP/s on the step's shapes */
    double pct_min, pct_median, pct_max;    /* the rounds' % of their ceilings */
    double cached_cps, recompute_cps;       /* sampling: chars/s with and without the KV cache */
    double rss_mb, model_mb, arena_mb, data_mb, expected_mb;
    double op_total;                        /* seconds of the ops + clip + AdamW: the shares' 100% */
    int shards;                             /* the batch's shards (ag_gpt_shards), one per thread */
} bench_report;

static void trainer_free(trainer *tr)
{
    free(tr->x); free(tr->y); free(tr->step_s);
    ag_gpt_shards_free(tr->shards);
    ag_ctx_free(tr->ctx);
    ag_gpt_free(tr->g);
}

/* false with a message on stderr */
static bool trainer_init(trainer *tr, const bench_config *bc, const ag_corpus *data, int steps, bool tune)
{
    int B = bc->batch, T = bc->block_size;
    ag_gpt_config cfg = { .vocab_size = data->vocab.V, .n_layer = bc->n_layer, .n_head = bc->n_head,
                          .n_embd = bc->n_embd, .block_size = T, .dropout = bc->dropout }; /* the rest: 0 */
    ag_error err = { 0 };
    *tr = (trainer){ .B = B, .T = T, .ac = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1},
                     .sched = { 1e-3, 1e-4, 100, 2000, AG_LR_COSINE }, .n_train = (size_t)(0.9 * (double)data->n) };
    tr->g = ag_gpt_new(&cfg, 1337, &err);
    tr->ctx = ag_ctx_new();
    tr->x = malloc((size_t)B * T * sizeof(int));
    tr->y = malloc((size_t)B * T * sizeof(int));
    tr->step_s = malloc((size_t)steps * sizeof(double));
    if (!tr->g || !tr->ctx || !tr->x || !tr->y || !tr->step_s) {
        fprintf(stderr, "bench: %s\n", tr->g ? "out of memory" : err.msg);
        return false;
    }
    ag_ctx_set_recycle_grads(tr->ctx, true); /* as char_lm train does */
    int threads = ag_threads(), n = bc->dropout > 0 ? 1 : threads > 2 ? threads : 2;   /* as char_lm's default */
    if (!(tr->shards = ag_gpt_shards_new(tr->g, tr->ctx, n, &err))) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return false;
    }
    ag_rng_seed(&tr->rng, 1337);
    ag_thread_tuner_init(&tr->tuner, tune ? ag_threads() : 1);
    return true;
}

/* x, y [B*T]: B random windows of the training text, y shifted by one */
static void sample_batch(trainer *tr, const ag_corpus *data)
{
    int T = tr->T;
    for (int b = 0; b < tr->B; b++) {
        size_t off = (size_t)ag_rng_below(&tr->rng, tr->n_train - (size_t)T);
        memcpy(tr->x + b * T, data->ids + off, (size_t)T * sizeof(int));
        memcpy(tr->y + b * T, data->ids + off + 1, (size_t)T * sizeof(int));
    }
}

/* Step it of training: batch, forward, backward, clip, AdamW. A timed one records its time,
 * clip's and AdamW's, and its ops' in the profile. false with a message on stderr. */
static bool train_step(trainer *tr, const ag_corpus *data, int it, bool timed, step_timing *st)
{
    ag_params *P = tr->g->params;
    ag_ctx_set_profile(tr->ctx, timed ? &st->prof : NULL);
    double t0 = ag_now_s();
    sample_batch(tr, data);
    ag_ctx_profile_mark(tr->ctx);
    ag_params_zero_grad(P);
    double loss;
    ag_error err = { 0 };
    if (ag_gpt_shards_pass(tr->shards, tr->x, tr->y, tr->B, tr->T, &(ag_forward_opts){ .train = true }, 1, &loss,
                           &err) != AG_OK) {
        fprintf(stderr, "bench: %s\n", err.msg);
        return false;
    }
    double t1 = ag_now_s();
    double clip = ag_clip_scale(ag_grad_norm(P), 1.0); /* clip norm 1, folded into AdamW */
    double t2 = ag_now_s();
    ag_adamw_step_scaled(P, &tr->ac, ag_lr_at(&tr->sched, it), it + 1, clip);
    double t3 = ag_now_s();
    ag_ctx_reset(tr->ctx);
    if (timed) {
        tr->step_s[st->timed++] = t3 - t0;
        st->single += tr->tuner.max > 1 && ag_threads() == 1;
        st->t_clip += t2 - t1;
        st->t_adam += t3 - t2;
    }
    /* The tuner sees the run's steps as char_lm's does: the warm-up and the timed ones, not a
     * round's first step, which the sgemm ceiling before it has slowed (the tuner weighs mean
     * steps, and every ~11th step cold would be a neighbour that is not there). */
    if (timed || it < WARM) ag_thread_tuner_step(&tr->tuner, t3 - t0);
    return true;
}

/* After a round of `flops` in `secs`: the sgemm ceiling on the threads the bench was given (the
 * tuner's setting is put back after). OpenBLAS's pool first, then a pause: its threads go on
 * spinning a while after their last product, and beside them ag_gemm's measure came out at
 * 155-240 GFLOP/s instead of 380-405 in 9 of 30 rounds here. Returns the bench's own
 * allocations. */
static unsigned long ceiling_round(const bench_config *bc, int V, int threads, double flops, double secs,
                                   step_timing *st)
{
    unsigned long allocs_before = n_allocs;
    int now = ag_threads();
    ag_threads_init(threads);
    gemm_rate own = gemm_on_shapes(bc, V, false, threads, CEILING_SECS);
    usleep(OPENBLAS_QUIET_US);
    gemm_rate split = gemm_on_shapes(bc, V, true, threads, CEILING_SECS);
    ag_threads_init(now);
    st->round_pct[st->rounds++] = 100 * flops / secs / 1e9 / fmax(gflops_of(own), gflops_of(split));
    st->own.flops += own.flops, st->own.secs += own.secs;
    st->split.flops += split.flops, st->split.secs += split.secs;
    return n_allocs - allocs_before;
}

/* the arena chunks every shard's ctx has malloc'ed */
static uint64_t chunk_mallocs(const trainer *tr)
{
    uint64_t n = 0;
    for (int j = 0; j < ag_gpt_shards_count(tr->shards); j++)
        n += ag_ctx_get_stats(ag_gpt_shards_ctx(tr->shards, j)).chunk_mallocs;
    return n;
}

/* Runs the steps in rounds (MAX_ROUNDS), the ceiling after each; st gets the timing of all but
 * the warm-up steps, and the allocations per step after the first (not the ceiling's own) */
static bool time_training(trainer *tr, const bench_config *bc, const ag_corpus *data, int steps, int threads,
                          step_timing *st)
{
    int avail = steps - WARM, rounds = (avail + 1) / (MIN_ROUND + 1);
    rounds = rounds < 1 ? 1 : rounds > MAX_ROUNDS ? MAX_ROUNDS : rounds;
    int per_round = (avail - (rounds - 1)) / rounds; /* the last takes what is left */
    unsigned long allocs_after_first = 0, ceiling_allocs = 0;
    uint64_t chunk_after_first = 0;
    for (int r = 0, it = 0; r < rounds; r++) {
        int warm = r == 0 ? WARM : 1, n = r == rounds - 1 ? steps - it - warm : per_round;
        int first = st->timed;
        for (int k = 0; k < warm + n; k++, it++) {
            if (it == 1) {
                allocs_after_first = n_allocs;
                chunk_after_first = chunk_mallocs(tr);
            }
            if (!train_step(tr, data, it, k >= warm, st)) return false;
        }
        double secs = 0;
        for (int i = first; i < st->timed; i++) secs += tr->step_s[i];
        ceiling_allocs += ceiling_round(bc, data->vocab.V, threads, step_flops(bc, data->vocab.V) * n, secs, st);
    }
    ag_ctx_set_profile(tr->ctx, NULL);
    st->allocs_per_step = (n_allocs - allocs_after_first - ceiling_allocs) / (unsigned long)(steps - 1);
    st->chunk_growth = chunk_mallocs(tr) - chunk_after_first;
    for (int i = 0; i < st->timed; i++) st->total += tr->step_s[i];
    qsort(tr->step_s, (size_t)st->timed, sizeof(double), cmp_double);
    st->median = tr->step_s[st->timed / 2];
    return true;
}

/* peak RSS against what we expect to hold: parameters + grads + Adam's m and v, the step
 * arena's high-water mark and the corpus */
static void memory_use(bench_report *r, const trainer *tr, const ag_corpus *data)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    r->rss_mb = (double)ru.ru_maxrss / 1024;
    int n = r->shards = ag_gpt_shards_count(tr->shards);   /* each replica keeps gradients, and a ctx */
    r->model_mb = (4.0 + (n - 1)) * (double)r->n_params * sizeof(ag_real) / 1048576;
    r->arena_mb = 0;
    for (int j = 0; j < n; j++) r->arena_mb += (double)ag_ctx_get_stats(ag_gpt_shards_ctx(tr->shards, j)).arena_high_water / 1048576;
    r->data_mb = (double)data->n * sizeof(int) / 1048576;
    r->expected_mb = r->model_mb + r->arena_mb + r->data_mb;
}

/* After the timed steps: throughput, the sgemm ceiling, sampling speed, memory, op shares.
 * false with a message on stderr. */
static bool measure(bench_report *r, const bench_config *bc, const trainer *tr, const ag_corpus *data, int threads)
{
    const step_timing *st = &r->st;
    int V = data->vocab.V;
    r->n_params = tr->g->params->total;
    r->tok_s = (double)tr->B * tr->T * st->timed / st->total;
    r->gflops = step_flops(bc, V) / (st->total / st->timed) / 1e9;
    r->sgemm_own = gflops_of(st->own);
    r->sgemm_split = gflops_of(st->split);
    r->ceiling = fmax(r->sgemm_own, r->sgemm_split);
    double pct[MAX_ROUNDS];
    memcpy(pct, st->round_pct, sizeof pct);
    qsort(pct, (size_t)st->rounds, sizeof(double), cmp_double);
    r->pct_min = pct[0], r->pct_median = (pct[(st->rounds - 1) / 2] + pct[st->rounds / 2]) / 2, r->pct_max = pct[st->rounds - 1];
    ag_threads_init(threads); /* the tuner may have left one thread */
    if (sample_speed(tr->g, bc->block_size, &r->cached_cps, &r->recompute_cps) != 0) {
        fprintf(stderr, "bench: sampling with the KV cache disagrees with recomputing\n");
        return false;
    }
    memory_use(r, tr, data);
    r->op_total = st->t_clip + st->t_adam; /* op share of the timed steps */
    for (int i = 0; i < st->prof.n; i++) r->op_total += st->prof.ops[i].fwd_s + st->prof.ops[i].bwd_s;
    return true;
}

static void print_json(const bench_report *r, const bench_config *bc, int threads)
{
    const step_timing *st = &r->st;
    printf("{\"config\": \"%s\", \"threads\": %d, \"shards\": %d, \"tuned\": %s, \"single_thread_steps\": %d, "
           "\"steps_timed\": %d, \"tokens_per_s\": %.1f, "
           "\"mean_ms_per_step\": %.3f, \"median_ms_per_step\": %.3f, \"matmul_gflops\": %.1f, "
           "\"sgemm_gflops\": %.1f, \"sgemm_openblas_pool_gflops\": %.1f, \"sgemm_split_gflops\": %.1f, "
           "\"rounds\": %d, \"round_pct_median\": %.1f, \"round_pct_min\": %.1f, \"round_pct_max\": %.1f, "
           "\"allocs_per_step\": %lu, \"arena_chunk_mallocs_after_step1\": %llu, "
           "\"peak_rss_mb\": %.1f, \"expected_mb\": %.1f, \"n_params\": %zu, "
           "\"sample_cached_chars_per_s\": %.1f, \"sample_recompute_chars_per_s\": %.1f, \"openblas_core\": \"%s\", "
           "\"ops\": {",
           bc->name, threads, r->shards, r->tuned ? "true" : "false", st->single, st->timed, r->tok_s, 1000 * st->total / st->timed, 1000 * st->median, r->gflops,
           r->ceiling, r->sgemm_own, r->sgemm_split, st->rounds, r->pct_median, r->pct_min, r->pct_max,
           st->allocs_per_step, (unsigned long long)st->chunk_growth,
           r->rss_mb, r->expected_mb, r->n_params, r->cached_cps, r->recompute_cps,
           openblas_get_corename());
    for (int i = 0; i < st->prof.n; i++)
        printf("%s\"%s\": {\"fwd_share\": %.4f, \"bwd_share\": %.4f}", i ? ", " : "", st->prof.ops[i].op->name,
               st->prof.ops[i].fwd_s / r->op_total, st->prof.ops[i].bwd_s / r->op_total);
    printf(", \"clip\": {\"share\": %.4f}, \"adamw\": {\"share\": %.4f}}, \"round_pct\": [", st->t_clip / r->op_total,
           st->t_adam / r->op_total);
    for (int i = 0; i < st->rounds; i++) printf("%s%.1f", i ? ", " : "", st->round_pct[i]);
    printf("]}\n");
}

/* Debian's OpenBLAS 0.3.21 does not know every newer CPU and may fall back to its SSE3
 * (Prescott) kernels, about 3x slower here; OPENBLAS_CORETYPE picks the kernels by hand. */
static void print_blas_kernels(void)
{
    const char *core = openblas_get_corename();
#if defined(__x86_64__) || defined(__i386__)   /* __builtin_cpu_supports knows x86 features only */
    bool prescott_on_avx2 = strcmp(core, "Prescott") == 0 && __builtin_cpu_supports("avx2");
#else
    bool prescott_on_avx2 = false;
#endif
    printf("  OpenBLAS kernels: %s%s\n", core,
           prescott_on_avx2 ? " on a CPU with AVX2: try OPENBLAS_CORETYPE=Haswell (or SkylakeX with AVX-512)" : "");
}

static void print_text(const bench_report *r, const bench_config *bc, int threads)
{
    const step_timing *st = &r->st;
    printf("== %s: n_layer %d n_head %d n_embd %d block %d batch %d, %zu params, %d shards on %d threads", bc->name,
           bc->n_layer, bc->n_head, bc->n_embd, bc->block_size, bc->batch, r->n_params, r->shards, threads);
    if (r->tuned) printf(", tuned (1 thread for %d of the timed steps)\n", st->single);
    else printf(", fixed\n");
    printf("  %.0f tokens/s, %.2f ms/step mean, %.2f median (%d steps timed)\n", r->tok_s,
           1000 * st->total / st->timed, 1000 * st->median, st->timed);
    printf("  matmul %.1f GFLOP/s = %.0f%% of sgemm on the same shapes and threads (OpenBLAS's own\n"
           "  pool: %.1f GFLOP/s, split over OpenMP as training does: %.1f), measured after each of\n"
           "  %d rounds of the steps: a round's %% of its own: median %.0f%%, %.0f-%.0f%%\n", r->gflops,
           100 * r->gflops / r->ceiling, r->sgemm_own, r->sgemm_split, st->rounds, r->pct_median, r->pct_min,
           r->pct_max);
    print_blas_kernels();
    printf("  time share      forward  backward\n");
    for (int i = 0; i < st->prof.n; i++)
        printf("    %-13s %6.1f%%  %6.1f%%\n", st->prof.ops[i].op->name, 100 * st->prof.ops[i].fwd_s / r->op_total,
               100 * st->prof.ops[i].bwd_s / r->op_total);
    printf("    %-13s %6.1f%%\n    %-13s %6.1f%%\n", "clip norm", 100 * st->t_clip / r->op_total, "adamw",
           100 * st->t_adam / r->op_total);
    printf("  allocations per step after the first: %lu (arena chunk mallocs since step 1: %llu)\n",
           st->allocs_per_step, (unsigned long long)st->chunk_growth);
    printf("  sampling %d characters (best of 5): %.0f chars/s with the KV cache, %.0f recomputing the context "
           "(x%.1f), same tokens\n", bc->block_size, r->cached_cps, r->recompute_cps,
           r->cached_cps / r->recompute_cps);
    printf("  peak RSS %.1f MiB; params+grads+adam %.1f + step arena %.1f + data %.1f = %.1f MiB (x%.2f)\n",
           r->rss_mb, r->model_mb, r->arena_mb, r->data_mb, r->expected_mb, r->rss_mb / r->expected_mb);
}

static int run_config(const bench_config *bc, const ag_corpus *data, int steps, int threads, bool tune, bool json)
{
    trainer tr;
    bench_report r = { .tuned = tune && threads > 1 };
    bool ok = trainer_init(&tr, bc, data, steps, r.tuned) && time_training(&tr, bc, data, steps, threads, &r.st)
              && measure(&r, bc, &tr, data, threads);
    if (ok && json) print_json(&r, bc, threads);
    else if (ok) print_text(&r, bc, threads);
    trainer_free(&tr);
    return ok ? 0 : 1;
}

/* --config all: each configuration in a process of its own (this program again, with --config
 * NAME and the other flags as given). Peak RSS is a per-process figure: a configuration run
 * after another would count what the first left behind (glibc keeps freed memory). */
static int run_each_config_alone(int argc, char **argv)
{
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args) return 1;
    int rc = 0;
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        int n = 0;
        args[n++] = argv[0];
        args[n++] = "--config";
        args[n++] = (char *)configs[c].name;
        for (int i = 1; i < argc; i++) {
            if (!strcmp(argv[i], "--config")) { i++; continue; }
            args[n++] = argv[i];
        }
        args[n] = NULL;
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) { rc = 1; break; }
        if (pid == 0) {
#ifdef __linux__
            execv("/proc/self/exe", args);
#else
            execv(argv[0], args);   /* no /proc: the path it was started by */
#endif
            _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0) {}
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    free(args);
    return rc;
}

typedef struct {
    const char *which, *path;   /* --config, --data */
    int steps, threads;         /* steps 0: each configuration's default */
    bool tune;                  /* no --threads: 2, tuned */
    bool json;
} bench_args;

/* 0, or the exit code 2 after a message on stderr */
static int parse_args(int argc, char **argv, bench_args *a)
{
    *a = (bench_args){ .which = "all", .path = "data/tinyshakespeare.txt", .threads = 2, .tune = true };
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) a->which = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) a->steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) a->threads = atoi(argv[++i]), a->tune = false;
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) a->path = argv[++i];
        else if (!strcmp(argv[i], "--json")) a->json = true;
        else {
            fprintf(stderr, "usage: bench [--config tiny|baby|small|10min|all] [--steps N] [--threads N] [--json] "
                            "[--data FILE]\n");
            return 2;
        }
    }
    if (a->threads < 1 || (a->steps != 0 && a->steps < 10)) {
        fprintf(stderr, "bench: error: --threads must be >= 1 and --steps >= 10\n");
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    ag_omp_bounded_spin(argv);   /* OpenMP's idle threads spin briefly (train/program.h) */
    bench_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc) return rc;
    if (!strcmp(a.which, "all")) return run_each_config_alone(argc, argv);
    ag_threads_init(a.threads); /* one pool: OpenMP, with OpenBLAS single-threaded */
    ag_error err = {0};
    ag_corpus data;
    if (ag_corpus_load(a.path, &data, &err) != AG_OK) {
        fprintf(stderr, "bench: error: %s\n", err.msg);
        return 1;
    }
    int found = 0;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        if (strcmp(a.which, configs[i].name)) continue;
        found = 1;
        int n = a.steps ? a.steps : (i == 2 ? 15 : 114); /* small is ~50x baby's work per step */
        rc |= run_config(&configs[i], &data, n, a.threads, a.tune, a.json);
    }
    ag_corpus_free(&data);
    if (!found) {
        fprintf(stderr, "bench: error: unknown --config '%s'\n", a.which);
        return 2;
    }
    return rc;
}
