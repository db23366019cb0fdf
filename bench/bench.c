/* bench.c -- make bench: training throughput of the char_lm GPT, where the time goes, and how
 * close the matrix products come to OpenBLAS's own speed.
 *
 * For each configuration (tiny, baby, small of ../shared/MODEL.md) it runs the training step of
 * bench/torch_ref.py: sample a batch, forward, backward, clip, AdamW; it times every step, drops
 * the first 5 (warm-up) and prints
 *   - tokens/s and ms per step;
 *   - GFLOP/s of the step's matrix products (counted from the shapes: 3x the forward FLOPs),
 *     next to sgemm's GFLOP/s on the same shapes with the same threads (the ceiling);
 *   - the share of time per op kind, forward and backward separately, plus clip and AdamW;
 *   - allocations per step after the first (our code's malloc/calloc/realloc, counted by
 *     linker wrapping) and the step arena's chunk mallocs;
 *   - peak RSS against parameters + grads + Adam state + the step arena's high-water mark.
 * --json prints one JSON object per configuration instead.
 *
 *   build/bench [--config tiny|baby|small|all] [--steps N] [--threads N] [--json] [--data FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cblas.h> /* the bare sgemm, the ceiling to measure against */
#include "attograd.h"
#include "corpus.h"

void openblas_set_num_threads(int);


/* ---- allocation counters (the link wraps malloc, calloc and realloc of our own code) ---- */
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
static unsigned long n_allocs;
void *__wrap_malloc(size_t n) { n_allocs++; return __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t m) { n_allocs++; return __real_calloc(n, m); }
void *__wrap_realloc(void *p, size_t n) { n_allocs++; return __real_realloc(p, n); }

typedef struct {
    const char *name;
    int n_layer, n_head, n_embd, block_size, batch;
} bench_config;

static const bench_config configs[] = {
    { "tiny", 2, 2, 64, 32, 16 },
    { "baby", 4, 4, 128, 64, 12 },
    { "small", 6, 6, 384, 256, 64 },
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

/* GFLOP/s of the three products a Linear does (y = x W^T, dx = dy W, dW = dy^T x) on the
 * step's shapes, run `split` through ag_gemm (OpenMP row blocks, what training uses) or as
 * plain cblas_sgemm on OpenBLAS's own pool of `threads` */
static double gemm_gflops(const bench_config *c, int V, bool split, int threads)
{
    int R = c->batch * c->block_size, C = c->n_embd;
    int shapes[][3] = { { R, C, C }, { R, 4 * C, C }, { R, C, 4 * C }, { R, V, C } }; /* M, N, K */
    double flops = 0, secs = 0;
    if (!split) openblas_set_num_threads(threads);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = calloc((size_t)M * K, 4), *B = calloc((size_t)K * N, 4), *Cm = calloc((size_t)M * N, 4);
        float *dC = calloc((size_t)M * N, 4), *dA = calloc((size_t)M * K, 4), *dB = calloc((size_t)K * N, 4);
        for (size_t i = 0; i < (size_t)M * K; i++) A[i] = (float)(i % 7) * 0.1f;
        for (size_t i = 0; i < (size_t)K * N; i++) B[i] = (float)(i % 5) * 0.1f;
        int reps = 0;
        double t0 = now_s(), t1 = t0;
        while (t1 - t0 < 0.3 || reps < 3) {
            if (split) {
                ag_gemm(false, true, M, N, K, 1, A, K, B, K, 0, Cm, N);
                ag_gemm(false, false, M, K, N, 1, dC, N, B, K, 1, dA, K);
                ag_gemm(true, false, N, K, M, 1, dC, N, A, K, 1, dB, K);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, K, B, K, 0, Cm, N);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1, dC, N, B, K, 1, dA, K);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1, dC, N, A, K, 1, dB, K);
            }
            reps++;
            t1 = now_s();
        }
        flops += 3.0 * 2 * M * N * K * reps;
        secs += t1 - t0;
        free(A); free(B); free(Cm); free(dC); free(dA); free(dB);
    }
    if (!split) openblas_set_num_threads(1); /* back to one pool */
    return flops / secs / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* characters/s generating n tokens from an untrained model (greedy: the argmax, so both ways
 * pick the same tokens): with the KV cache (one position per token) and by recomputing the
 * whole context for every token, as a model without a cache must. The best of SAMPLE_ROUNDS
 * rounds each way: one round of a small model takes a few milliseconds, and the first one
 * also grows the arena. Also checks the two agree on every token; returns -1 if they do not. */
#define SAMPLE_ROUNDS 5
static int sample_speed(ag_gpt *g, int n, double *cached_cps, double *recompute_cps)
{
    int T = g->cfg.block_size, V = g->cfg.vocab_size;
    if (n > T) n = T;
    ag_ctx *ctx = ag_ctx_new();
    ag_kv_cache *cache = ag_kv_cache_new(g);
    int *ids = malloc((size_t)(n + 1) * sizeof(int)), *ids2 = malloc((size_t)(n + 1) * sizeof(int));
    if (!ctx || !cache || !ids || !ids2) return -1;
    ag_ctx_set_grad(ctx, false);
    int same = 1;
    *cached_cps = *recompute_cps = 0;
    for (int round = 0; round < SAMPLE_ROUNDS; round++) {
        ag_kv_cache_clear(cache);
        ids[0] = ids2[0] = 0;
        double t0 = now_s();
        for (int p = 0; p < n; p++) {
            ag_tensor *logits = ag_gpt_forward_cached(ctx, g, cache, ids[p]);   // [V]
            if (!logits) return -1;
            int best = 0;
            for (int j = 1; j < V; j++) best = logits->data[j] > logits->data[best] ? j : best;
            ids[p + 1] = best;
            ag_ctx_reset(ctx);
        }
        double t1 = now_s();
        for (int p = 0; p < n; p++) {
            ag_tensor *logits = ag_gpt_forward(ctx, g, ids2, NULL, 1, p + 1, NULL, NULL); // [1,p+1,V]
            if (!logits) return -1;
            const ag_real *last = logits->data + (size_t)p * V;
            int best = 0;
            for (int j = 1; j < V; j++) best = last[j] > last[best] ? j : best;
            ids2[p + 1] = best;
            ag_ctx_reset(ctx);
        }
        double t2 = now_s();
        same = same && memcmp(ids, ids2, (size_t)(n + 1) * sizeof(int)) == 0;
        if (n / (t1 - t0) > *cached_cps) *cached_cps = n / (t1 - t0);
        if (n / (t2 - t1) > *recompute_cps) *recompute_cps = n / (t2 - t1);
    }
    free(ids); free(ids2);
    ag_kv_cache_free(cache);
    ag_ctx_free(ctx);
    return same ? 0 : -1;
}

static int run_config(const bench_config *bc, const corpus *data, int steps, int threads, bool json)
{
    int V = data->vocab.V, B = bc->batch, T = bc->block_size;
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = bc->n_layer, .n_head = bc->n_head, .n_embd = bc->n_embd,
                          .block_size = bc->block_size }; /* the rest: MODEL.md defaults (0) */
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, 1337, &err);
    ag_ctx *ctx = ag_ctx_new();
    int *x = malloc((size_t)B * T * sizeof(int)), *y = malloc((size_t)B * T * sizeof(int));
    double *times = malloc((size_t)steps * sizeof(double)), *t_clip = calloc(1, sizeof(double)),
           *t_adam = calloc(1, sizeof(double));
    if (!g || !ctx || !x || !y || !times || !t_clip || !t_adam) {
        fprintf(stderr, "bench: %s\n", g ? "out of memory" : err.msg);
        return 1;
    }
    ag_ctx_set_recycle_grads(ctx, true); /* as char_lm train does */
    ag_params *P = g->params;
    ag_adam_cfg ac = { 0.9, 0.99, 1e-8, 0.1 };
    ag_lr_schedule sched = { 1e-3, 1e-4, 100, 2000 };
    ag_rng rng;
    ag_rng_seed(&rng, 1337);
    size_t n_train = (size_t)(0.9 * (double)data->n);
    ag_profile prof;
    memset(&prof, 0, sizeof prof);
    unsigned long allocs_after_first = 0;
    uint64_t chunk_after_first = 0;
    const int warm = 5;
    for (int it = 0; it < steps; it++) {
        if (it == warm) ag_ctx_set_profile(ctx, &prof); /* profile the timed steps only */
        if (it == 1) {
            allocs_after_first = n_allocs;
            chunk_after_first = ag_ctx_get_stats(ctx).chunk_mallocs;
        }
        double t0 = now_s();
        for (int b = 0; b < B; b++) {
            size_t off = (size_t)ag_rng_below(&rng, n_train - (size_t)T);
            memcpy(x + b * T, data->ids + off, (size_t)T * sizeof(int));
            memcpy(y + b * T, data->ids + off + 1, (size_t)T * sizeof(int));
        }
        ag_ctx_profile_mark(ctx);
        ag_tensor *loss = NULL;
        ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true }, &loss);
        ag_params_zero_grad(P);
        if (!loss || ag_backward(ctx, loss) != AG_OK) {
            fprintf(stderr, "bench: %s\n", ag_ctx_error(ctx));
            return 1;
        }
        double t1 = now_s();
        double clip = ag_clip_scale(ag_grad_norm(P), 1.0); /* clip norm 1, folded into AdamW */
        double t2 = now_s();
        ag_adamw_step_scaled(P, &ac, ag_lr_at(&sched, it), it + 1, clip);
        double t3 = now_s();
        ag_ctx_reset(ctx);
        times[it] = t3 - t0;
        if (it >= warm) {
            *t_clip += t2 - t1;
            *t_adam += t3 - t2;
        }
    }
    unsigned long allocs_per_step = (n_allocs - allocs_after_first) / (unsigned long)(steps - 1);
    uint64_t chunk_growth = ag_ctx_get_stats(ctx).chunk_mallocs - chunk_after_first;
    int timed = steps - warm;
    double total = 0;
    for (int i = warm; i < steps; i++) total += times[i];
    qsort(times + warm, (size_t)timed, sizeof(double), cmp_double);
    double median = times[warm + timed / 2];
    double tok_s = (double)B * T * timed / total;
    double gflops = step_flops(bc, V) / (total / timed) / 1e9;
    double sgemm_own = gemm_gflops(bc, V, false, threads), sgemm_split = gemm_gflops(bc, V, true, threads);
    double ceiling = sgemm_own > sgemm_split ? sgemm_own : sgemm_split;
    double cached_cps = 0, recompute_cps = 0;
    if (sample_speed(g, bc->block_size, &cached_cps, &recompute_cps) != 0) {
        fprintf(stderr, "bench: sampling with the KV cache disagrees with recomputing\n");
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double rss_mb = (double)ru.ru_maxrss / 1024;
    double model_mb = 4.0 * (double)P->total * sizeof(ag_real) / 1048576;
    double arena_mb = (double)ag_ctx_get_stats(ctx).arena_high_water / 1048576;
    double data_mb = (double)data->n * sizeof(int) / 1048576;
    double expected_mb = model_mb + arena_mb + data_mb;
    /* op share of the timed steps */
    double op_total = *t_clip + *t_adam;
    for (int i = 0; i < prof.n; i++) op_total += prof.ops[i].fwd_s + prof.ops[i].bwd_s;
    if (json) {
        printf("{\"config\": \"%s\", \"threads\": %d, \"steps_timed\": %d, \"tokens_per_s\": %.1f, "
               "\"mean_ms_per_step\": %.3f, \"median_ms_per_step\": %.3f, \"matmul_gflops\": %.1f, "
               "\"sgemm_gflops\": %.1f, \"sgemm_openblas_pool_gflops\": %.1f, \"sgemm_split_gflops\": %.1f, \"allocs_per_step\": %lu, \"arena_chunk_mallocs_after_step1\": %llu, "
               "\"peak_rss_mb\": %.1f, \"expected_mb\": %.1f, \"n_params\": %zu, "
               "\"sample_cached_chars_per_s\": %.1f, \"sample_recompute_chars_per_s\": %.1f, \"ops\": {",
               bc->name, threads, timed, tok_s, 1000 * total / timed, 1000 * median, gflops, ceiling, sgemm_own, sgemm_split,
               allocs_per_step, (unsigned long long)chunk_growth, rss_mb, expected_mb, P->total, cached_cps,
               recompute_cps);
        for (int i = 0; i < prof.n; i++)
            printf("%s\"%s\": {\"fwd_share\": %.4f, \"bwd_share\": %.4f}", i ? ", " : "", prof.ops[i].op->name,
                   prof.ops[i].fwd_s / op_total, prof.ops[i].bwd_s / op_total);
        printf(", \"clip\": {\"share\": %.4f}, \"adamw\": {\"share\": %.4f}}}\n", *t_clip / op_total, *t_adam / op_total);
    } else {
        printf("== %s: n_layer %d n_head %d n_embd %d block %d batch %d, %zu params, %d threads\n", bc->name,
               bc->n_layer, bc->n_head, bc->n_embd, T, B, P->total, threads);
        printf("  %.0f tokens/s, %.2f ms/step mean, %.2f median (%d steps timed)\n", tok_s, 1000 * total / timed,
               1000 * median, timed);
        printf("  matmul %.1f GFLOP/s = %.0f%% of sgemm on the same shapes and threads (OpenBLAS's own\n"
               "  pool: %.1f GFLOP/s, split over OpenMP as training does: %.1f)\n", gflops, 100 * gflops / ceiling,
               sgemm_own, sgemm_split);
        printf("  time share      forward  backward\n");
        for (int i = 0; i < prof.n; i++)
            printf("    %-13s %6.1f%%  %6.1f%%\n", prof.ops[i].op->name, 100 * prof.ops[i].fwd_s / op_total,
                   100 * prof.ops[i].bwd_s / op_total);
        printf("    %-13s %6.1f%%\n    %-13s %6.1f%%\n", "clip norm", 100 * *t_clip / op_total, "adamw",
               100 * *t_adam / op_total);
        printf("  allocations per step after the first: %lu (arena chunk mallocs since step 1: %llu)\n",
               allocs_per_step, (unsigned long long)chunk_growth);
        printf("  sampling %d characters (best of 5): %.0f chars/s with the KV cache, %.0f recomputing the context "
               "(x%.1f), same tokens\n", bc->block_size, cached_cps, recompute_cps, cached_cps / recompute_cps);
        printf("  peak RSS %.1f MiB; params+grads+adam %.1f + step arena %.1f + data %.1f = %.1f MiB (x%.2f)\n",
               rss_mb, model_mb, arena_mb, data_mb, expected_mb, rss_mb / expected_mb);
    }
    free(x); free(y); free(times); free(t_clip); free(t_adam);
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    return 0;
}

/* OpenMP reads its wait policy when the program loads. Its default spins ~300k iterations
 * before sleeping: fastest on an idle machine, but when another process wants a core the
 * spinning threads make a step several times slower. A bounded spin (GOMP_SPINCOUNT=10000,
 * tens of microseconds: long enough to catch the next op's parallel region) kept the idle
 * speed within 2% here. So re-run ourselves once with it, unless the user chose a policy. */
static void bounded_omp_spin(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    setenv("GOMP_SPINCOUNT", "10000", 1);
    execv("/proc/self/exe", argv); /* only returns on failure: go on with the default */
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
            execv("/proc/self/exe", args);
            _exit(127);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0) {}
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    free(args);
    return rc;
}

int main(int argc, char **argv)
{
    bounded_omp_spin(argv);
    const char *which = "all", *path = "data/tinyshakespeare.txt";
    int steps = 0, threads = 2;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--config") && i + 1 < argc) which = argv[++i];
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--json")) json = true;
        else {
            fprintf(stderr, "usage: bench [--config tiny|baby|small|all] [--steps N] [--threads N] [--json] [--data FILE]\n");
            return 2;
        }
    }
    if (threads < 1 || (steps != 0 && steps < 10)) {
        fprintf(stderr, "bench: error: --threads must be >= 1 and --steps >= 10\n");
        return 2;
    }
    if (!strcmp(which, "all")) return run_each_config_alone(argc, argv);
    ag_threads_init(threads); /* one pool: OpenMP, with OpenBLAS single-threaded */
    ag_error err = {0};
    corpus data;
    if (corpus_load(path, &data, &err) != AG_OK) {
        fprintf(stderr, "bench: error: %s\n", err.msg);
        return 1;
    }
    int rc = 0, found = 0;
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        if (strcmp(which, "all") && strcmp(which, configs[i].name)) continue;
        found = 1;
        int n = steps ? steps : (i == 2 ? 15 : 105); /* small is ~50x baby's work per step */
        rc |= run_config(&configs[i], &data, n, threads, json);
    }
    corpus_free(&data);
    if (!found) {
        fprintf(stderr, "bench: error: unknown --config '%s'\n", which);
        return 2;
    }
    return rc;
}
