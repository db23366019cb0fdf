/* count_step.c -- baby's training step on one thread, measured in ways that do not move when
 * other work shares the machine, as timings of two threads do: for valgrind, what a change does
 * to the instructions (and, with --cache-sim=yes, the cache misses) of each kernel; with
 * --time, the thread CPU time of a step (the time this thread ran, not the time it waited for a
 * core) and the matrix products' GFLOP/s against sgemm's on the same shapes, also in CPU time.
 *
 * Each step is the one bench.c times: a batch of random tokens, forward, backward, the clip
 * norm, AdamW. It is built against the library to measure, so that two builds (before and after
 * a change) can be compared; the commands and figures are in docs/performance.md:
 *
 *   cc -std=c11 -O2 -g -fopenmp -Isrc bench/count_step.c build/f32/libattograd.a \
 *      $(pkg-config --cflags --libs openblas) -lmvec -lm -o /tmp/count_step
 *   OPENBLAS_CORETYPE=Haswell OPENBLAS_NUM_THREADS=1 GOMP_SPINCOUNT=10000 valgrind \
 *      --tool=callgrind --toggle-collect=one_step /tmp/count_step
 *   OPENBLAS_CORETYPE=SkylakeX /tmp/count_step --time 60
 *
 * Under valgrind: one warm-up step (warm_step: the arena grows), then two counted ones
 * (one_step); valgrind has no AVX-512, so OpenBLAS must be told to take its AVX2 kernels, and
 * the fast kernels run their AVX2 targets. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "attograd.h"

enum { V = 65, B = 12, T = 64, C = 128, L = 4 };   /* baby (MODEL.md), Tiny Shakespeare's 65 characters */

static const ag_adam_cfg adamw = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.1};

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* one step at iteration it; exits with a message on an error */
static void step(ag_gpt *g, ag_ctx *ctx, ag_rng *r, int it)
{
    static int x[B * T], y[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (int)ag_rng_below(r, V), y[i] = (int)ag_rng_below(r, V);
    ag_tensor *loss = NULL;
    ag_gpt_forward(ctx, g, x, y, B, T, &(ag_forward_opts){ .train = true }, &loss);
    ag_params_zero_grad(g->params);
    if (!loss || ag_backward(ctx, loss) != AG_OK) {
        fprintf(stderr, "count_step: %s\n", ag_ctx_error(ctx));
        exit(1);
    }
    double clip = ag_clip_scale(ag_grad_norm(g->params), 1.0);
    ag_adamw_step_scaled(g->params, &adamw, 1e-3, it + 1, clip);
    ag_ctx_reset(ctx);
}

/* two names for one step, so valgrind can count the second kind only (--toggle-collect) */
__attribute__((noinline)) void warm_step(ag_gpt *g, ag_ctx *ctx, ag_rng *r, int it) { step(g, ctx, r, it); }
__attribute__((noinline)) void one_step(ag_gpt *g, ag_ctx *ctx, ag_rng *r, int it) { step(g, ctx, r, it); }

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* sgemm's GFLOP/s on one thread, CPU time, on the three products of each linear's shapes (as
 * bench.c's ceiling: y = x W^T, dx = dy W, dW = dy^T x), the best of 20 rounds each */
static double sgemm_gflops(void)
{
    int R = B * T, shapes[][3] = { { R, C, C }, { R, 4 * C, C }, { R, C, 4 * C }, { R, V, C } }; /* M, N, K */
    double flops = 0, secs = 0;
    for (int s = 0; s < 4; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *A = calloc((size_t)M * K, 4), *Bm = calloc((size_t)K * N, 4), *Cm = calloc((size_t)M * N, 4);
        double best = 1e9;
        for (int rep = 0; rep < 20 && A && Bm && Cm; rep++) {
            double t0 = cpu_s();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1, A, K, Bm, K, 0, Cm, N);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, K, N, 1, Cm, N, Bm, K, 1, A, K);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, M, 1, Cm, N, A, K, 1, Bm, K);
            double e = cpu_s() - t0;
            best = e < best ? e : best;
        }
        flops += 3.0 * 2 * M * N * K;
        secs += best;
        free(A), free(Bm), free(Cm);
    }
    return flops / secs / 1e9;
}

/* --time n: n steps, the first 5 left out; prints the median step and the products' share */
static void time_steps(ag_gpt *g, ag_ctx *ctx, ag_rng *r, int n)
{
    double *t = malloc((size_t)n * sizeof *t);
    if (!t) exit(1);
    for (int it = 0; it < n; it++) {
        double t0 = cpu_s();
        step(g, ctx, r, it);
        t[it] = cpu_s() - t0;
    }
    qsort(t + 5, (size_t)(n - 5), sizeof *t, cmp_double);
    double med = t[5 + (n - 5) / 2], BT = B * T;
    double per_layer = 2 * BT * C * C * 4 + 2 * BT * C * 4 * C * 2 + 2 * BT * T * C * 2; /* as bench.c */
    double gflops = 3 * (L * per_layer + 2 * BT * C * V) / med / 1e9, ceiling = sgemm_gflops();
    printf("baby, 1 thread, CPU time: %.2f ms per step (median of %d; fastest %.2f); matmul %.1f GFLOP/s = %.1f%% "
           "of sgemm on the same shapes (%.1f)\n", 1e3 * med, n - 5, 1e3 * t[5], gflops, 100 * gflops / ceiling,
           ceiling);
    free(t);
}

int main(int argc, char **argv)
{
    int timed = argc == 3 && !strcmp(argv[1], "--time") ? atoi(argv[2]) : 0;
    if (argc > 1 && timed < 10) {
        fprintf(stderr, "usage: count_step [--time N]   (N >= 10 steps)\n");
        return 2;
    }
    ag_threads_init(1);
    ag_gpt_config cfg = { .vocab_size = V, .n_layer = L, .n_head = 4, .n_embd = C, .block_size = T };
    ag_error err = { 0 };
    ag_gpt *g = ag_gpt_new(&cfg, 1337, &err);
    ag_ctx *ctx = ag_ctx_new();
    if (!g || !ctx) {
        fprintf(stderr, "count_step: %s\n", g ? "out of memory" : err.msg);
        return 1;
    }
    ag_ctx_set_recycle_grads(ctx, true); /* as char_lm train does */
    ag_rng r;
    ag_rng_seed(&r, 1);
    if (timed) {
        time_steps(g, ctx, &r, timed);
    } else {
        warm_step(g, ctx, &r, 0);
        for (int it = 1; it <= 2; it++) one_step(g, ctx, &r, it);
    }
    ag_ctx_free(ctx);
    ag_gpt_free(g);
    return 0;
}
