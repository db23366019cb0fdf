/* test_fast_targets.c -- every loop compiled into three targets (AG_TARGETS in
 * src/tensor/fast/fast.h: plain, AVX2, AVX-512) gives the plain target's result on each target
 * this CPU runs: bit for bit where the loop has no exp (LayerNorm forward and backward, GELU's
 * backward, softmax's backward in attention, Adam's update), and
 * within fastref.h's tolerance where it calls the SIMD expf, whose 4-, 8- and 16-lane versions
 * may round differently (attention's softmax rows). The ops' tests (tests/test_fast_ref*.c)
 * prove the target the CPU picks equal to the reference kernels; this proves the others equal
 * to it. Sizes with tails: no length is a multiple of 16 lanes, except where a kernel's shape
 * is (T = 64). A target the CPU lacks is skipped with a note on stderr. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fastref.h"
#include "optim/fast/adam.h"
#include "optim/fast/loops.h"
#include "tensor/fast/fast.h"
#include "tensor/hash.h"   /* ag__dropout_threshold */
#include "tcases.h"

#ifndef AG_REFERENCE   /* the targets' helpers: a REFERENCE=1 library has no targets */
enum { PLAIN, AVX2, AVX512, N_TARGETS };
static const char *const target_name[N_TARGETS] = { "plain", "avx2", "avx512" };

/* target t runs here (the plain one always); says so on stderr once per test when it does not */
static bool runs(int t, const char *test)
{
    bool ok = t == PLAIN || (t == AVX2 ? ag__cpu_has_avx2() : ag__cpu_has_avx512());
    if (!ok) fprintf(stderr, "%s: the %s target skipped: this CPU lacks it\n", test, target_name[t]);
    return ok;
}

static ag_real *random_buf(ag_rng *r, size_t n, double lo, double hi)
{
    ag_real *p = malloc(n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) p[i] = (ag_real)(lo + (hi - lo) * ag_rng_uniform(r));
    return p;
}

static ag_real *copy_buf(const ag_real *x, size_t n)
{
    ag_real *p = malloc(n * sizeof *p);
    ck_assert_ptr_nonnull(p);
    memcpy(p, x, n * sizeof *p);
    return p;
}

static void assert_same_bits(const char *what, int t, const ag_real *got, const ag_real *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&got[i], &want[i], sizeof got[i]) == 0, "%s, %s target: element %zu is %.9g, plain %.9g",
                      what, target_name[t], i, (double)got[i], (double)want[i]);
}

#endif

// --- the optimizer's loop (src/optim/fast/loops.h), which a REFERENCE=1 library does not have ---

#ifndef AG_REFERENCE
START_TEST(test_adam_update_targets_same_bits)
{
    enum { N = 1000 + 13 };
    typedef void (*fn)(ag_real *, const ag_real *, ag_real *, ag_real *, size_t, const adam_coef *);
    const fn update[N_TARGETS] = { ag__adam_update_plain, ag__adam_update_avx2, ag__adam_update_avx512 };
    ag_rng r;
    ag_rng_seed(&r, 31);
    ag_real *p0 = random_buf(&r, N, -1, 1), *g = random_buf(&r, N, -2, 2), *m0 = random_buf(&r, N, -0.1, 0.1);
    ag_real *v0 = random_buf(&r, N, 0, 0.01);
    /* AdamW's decay and a clip factor; Adam's L2 */
    const adam_coef ks[2] = { { 0.9999f, 0, 0.9f, 0.99f, 0.1f, 0.01f, 3e-3f, 1.3f, 1e-8f, 0.7f },
                                  { 1, 0.1f, 0.9f, 0.999f, 0.1f, 0.001f, 1e-2f, 4.5f, 1e-8f, 1 } };
    for (int c = 0; c < 2; c++) {
        ag_real *p[N_TARGETS], *m[N_TARGETS], *v[N_TARGETS];
        for (int t = 0; t < N_TARGETS; t++) {
            p[t] = copy_buf(p0, N), m[t] = copy_buf(m0, N), v[t] = copy_buf(v0, N);
            if (runs(t, "adam update")) update[t](p[t], g, m[t], v[t], N, &ks[c]);
            if (t == PLAIN) ck_assert_msg(memcmp(p[t], p0, sizeof(ag_real) * N) != 0, "the update did nothing");
            else if (runs(t, "adam update")) {
                assert_same_bits("adam p", t, p[t], p[PLAIN], N);
                assert_same_bits("adam m", t, m[t], m[PLAIN], N);
                assert_same_bits("adam v", t, v[t], v[PLAIN], N);
            }
        }
        for (int t = 0; t < N_TARGETS; t++) free(p[t]), free(m[t]), free(v[t]);
    }
    free(p0), free(g), free(m0), free(v0);
}
END_TEST
#else
/* a REFERENCE=1 library has no fast twin: adam.c's own loop takes every step */
START_TEST(test_adam_no_fast_twin)
{
    ag_params P = { .total = 10 * AG_ADAM_FAST_MIN };
    const adam_coef k[2] = { { .keep = 1, .b1 = 0.9f, .b2 = 0.99f, .a1 = 0.1f, .a2 = 0.01f, .step = 1e-3f, .inv_sqrt_bc2 = 10, .eps = 1e-8f, .gs = 1 } };
    ck_assert(!ag__adam_fast(&P, k));
}
END_TEST
#endif

// --- the fast kernels' loops (src/tensor/fast/), which a REFERENCE=1 library does not have ---

#ifndef AG_REFERENCE
START_TEST(test_layernorm_targets_same_bits)
{
    enum { R = 37, C = 131 };
    typedef void (*fwd_fn)(ag_real *, ag_real *, const ag_real *, const ag_real *, const ag_real *, size_t, size_t,
                           int, ag_real);
    typedef void (*bwd_fn)(ag_real *, bool, ag_real *, ag_real *, const ag_real *, const ag_real *,
                           const ag_real *, const ag_real *, size_t, size_t, int);
    const fwd_fn fwd[N_TARGETS] = { ag__layernorm_forward_rows_plain, ag__layernorm_forward_rows_avx2,
                                    ag__layernorm_forward_rows_avx512 };
    const bwd_fn bwd[N_TARGETS] = { ag__layernorm_backward_rows_plain, ag__layernorm_backward_rows_avx2,
                                    ag__layernorm_backward_rows_avx512 };
    ag_rng r;
    ag_rng_seed(&r, 33);
    ag_real *x = random_buf(&r, R * C, -3, 3), *w = random_buf(&r, C, 0.5, 1.5), *b = random_buf(&r, C, -1, 1);
    ag_real *dy = random_buf(&r, R * C, -1, 1), *dx0 = random_buf(&r, R * C, -1, 1);
    static ag_real y[N_TARGETS][R * C], st[N_TARGETS][2 * R], sw[N_TARGETS][2 * C], dx[2][N_TARGETS][R * C];
    for (int t = 0; t < N_TARGETS; t++) {
        if (!runs(t, "layernorm")) continue;
        fwd[t](y[t], st[t], x, w, b, 2, R, C, (ag_real)1e-5); /* rows 2..R-1, then 0..1 */
        fwd[t](y[t], st[t], x, w, b, 0, 2, C, (ag_real)1e-5);
        for (int acc = 0; acc < 2; acc++) { /* dx written, then added to */
            memcpy(dx[acc][t], dx0, sizeof(ag_real) * R * C);
            bwd[t](dx[acc][t], acc, sw[t], sw[t] + C, dy, x, w, st[PLAIN], 0, R, C);
        }
        if (t == PLAIN) continue;
        assert_same_bits("layernorm y", t, y[t], y[PLAIN], R * C);
        assert_same_bits("layernorm stats", t, st[t], st[PLAIN], 2 * R);
        assert_same_bits("layernorm sums of dy xhat and dy", t, sw[t], sw[PLAIN], 2 * C);
        assert_same_bits("layernorm dx", t, dx[0][t], dx[0][PLAIN], R * C);
        assert_same_bits("layernorm dx (added)", t, dx[1][t], dx[1][PLAIN], R * C);
    }
    free(x), free(w), free(b), free(dy), free(dx0);
}
END_TEST

START_TEST(test_gelu_backward_targets_same_bits)
{
    enum { N = 1000 + 13 };
    typedef void (*fn)(ag_real *, const ag_real *, const ag_real *, const ag_real *, size_t, bool);
    const fn span[N_TARGETS] = { ag__gelu_backward_span_plain, ag__gelu_backward_span_avx2,
                                 ag__gelu_backward_span_avx512 };
    ag_rng r;
    ag_rng_seed(&r, 34);
    ag_real *x = random_buf(&r, N, -6, 6), *th = random_buf(&r, N, -1, 1), *dy = random_buf(&r, N, -1, 1);
    ag_real *dx0 = random_buf(&r, N, -1, 1);
    for (int acc = 0; acc < 2; acc++) {
        ag_real *dx[N_TARGETS];
        for (int t = 0; t < N_TARGETS; t++) {
            dx[t] = copy_buf(dx0, N);
            if (!runs(t, "gelu backward")) continue;
            span[t](dx[t], dy, x, th, N, acc);
            if (t != PLAIN) assert_same_bits(acc ? "gelu dx (added)" : "gelu dx", t, dx[t], dx[PLAIN], N);
        }
        for (int t = 0; t < N_TARGETS; t++) free(dx[t]);
    }
    free(x), free(th), free(dy), free(dx0);
}
END_TEST

/* Attention's row kernels are tested with causal rows in tiles of TEST_TILE rows (the layer uses
 * 64: smaller here, so that the test's T = 37 and 64 hold several tiles, the last one short).
 * Row i's tile ends at test_tile_end(i): the kernels write nothing past it. */
enum { TEST_TILE = 16 };
static int test_tile_end(int row) { return (row / TEST_TILE + 1) * TEST_TILE; }

START_TEST(test_attention_rows_targets_equal)
{
    const int Ts[] = { 37, 64 };
    typedef void (*sm_fn)(ag_real *, int, bool, int);
    typedef void (*dsm_fn)(ag_real *, const ag_real *, int, int);
    const sm_fn sm[N_TARGETS] = { ag__attention_softmax_rows_plain, ag__attention_softmax_rows_avx2,
                                  ag__attention_softmax_rows_avx512 };
    const dsm_fn dsm[N_TARGETS] = { ag__attention_softmax_backward_rows_plain,
                                    ag__attention_softmax_backward_rows_avx2,
                                    ag__attention_softmax_backward_rows_avx512 };
    ag_rng r;
    ag_rng_seed(&r, 35);
    char msg[512];
    for (int k = 0; k < 4; k++) {
        int T = Ts[k % 2];
        bool causal = k < 2;
        size_t n = (size_t)T * T;
        ag_real *S = random_buf(&r, n, -8, 8), *dA = random_buf(&r, n, -1, 1), *A[N_TARGETS], *dS[N_TARGETS];
        for (int t = 0; t < N_TARGETS; t++) {
            A[t] = copy_buf(S, n), dS[t] = copy_buf(dA, n);
            if (!runs(t, "attention rows")) continue;
            sm[t](A[t], T, causal, causal ? TEST_TILE : T); /* causal rows in tiles */
            dsm[t](dS[t], A[PLAIN], T, causal ? TEST_TILE : T); /* on the same weights: the same bits */
            if (t == PLAIN) continue;
            ck_assert_msg(fr_compare("attention softmax rows", target_name[t], "A", A[t], A[PLAIN], n, msg,
                                     sizeof msg) == 0, "%s", msg);
            assert_same_bits("attention softmax backward rows", t, dS[t], dS[PLAIN], n);
        }
        for (size_t i = 0; causal && i < n; i++) { /* the future weighs exactly 0, to the tile's end */
            int row = (int)(i / T), key = (int)(i % T);
            if (key > row) ck_assert(A[PLAIN][i] == (key < test_tile_end(row) ? 0 : S[i]));
        }
        for (int t = 0; t < N_TARGETS; t++) free(A[t]), free(dS[t]);
        free(S), free(dA);
    }
}
END_TEST

/* attention's dropout rows: the same bits on every target, and ops/dropout.c's mask (rng.h's
 * ag_hash_uniform, element base + i T + j kept when >= p) scaled by 1/(1-p); the backward keeps
 * dAd / (1-p) where Ad is not 0 (causal rows in tiles: to the tile's end, the rest untouched) */
START_TEST(test_attention_dropout_targets_same_bits)
{
    typedef void (*dr_fn)(ag_real *, const ag_real *, int, bool, int, ag_real, uint64_t, uint64_t);
    typedef void (*ddr_fn)(ag_real *, const ag_real *, int, int, ag_real);
    const dr_fn dr[N_TARGETS] = { ag__attention_dropout_rows_plain, ag__attention_dropout_rows_avx2,
                                  ag__attention_dropout_rows_avx512 };
    const ddr_fn ddr[N_TARGETS] = { ag__attention_dropout_backward_rows_plain,
                                    ag__attention_dropout_backward_rows_avx2,
                                    ag__attention_dropout_backward_rows_avx512 };
    const int T = 37;
    const ag_real p = (ag_real)0.3;
    const uint64_t seed = 77, base = 5 * 37 * 37;
    size_t n = (size_t)T * T;
    ag_rng r;
    ag_rng_seed(&r, 36);
    for (int causal = 0; causal < 2; causal++) {
        ag_real *A = random_buf(&r, n, 0.01, 1), *dAd = random_buf(&r, n, -1, 1), *Ad[N_TARGETS], *dA[N_TARGETS];
        for (int t = 0; t < N_TARGETS; t++) {
            Ad[t] = copy_buf(A, n), dA[t] = copy_buf(dAd, n);
            if (!runs(t, "attention dropout rows")) continue;
            dr[t](Ad[t], A, T, causal, causal ? TEST_TILE : T, p, seed, base);
            ddr[t](dA[t], Ad[PLAIN], T, causal ? TEST_TILE : T, p);
            if (t == PLAIN) continue;
            assert_same_bits("attention dropout rows", t, Ad[t], Ad[PLAIN], n);
            assert_same_bits("attention dropout backward rows", t, dA[t], dA[PLAIN], n);
        }
        int dropped = 0;
        for (size_t i = 0; i < n; i++) {
            bool seen = !causal || (int)(i % T) <= (int)(i / T);
            bool in_tile = !causal || (int)(i % T) < test_tile_end((int)(i / T)); /* up to its tile's end */
            bool kept = ag_hash_uniform(seed, base + i) >= (double)p;
            ag_real want = !in_tile ? A[i] : seen && kept ? A[i] * (1 / (1 - p)) : 0; /* past the tile: untouched */
            ck_assert_msg(Ad[PLAIN][i] == want, "element %zu: %g, ag_dropout's mask gives %g", i, Ad[PLAIN][i], want);
            ck_assert(dA[PLAIN][i] == (!in_tile ? dAd[i] : want != 0 ? dAd[i] * (1 / (1 - p)) : 0));
            dropped += seen && !kept;
        }
        ck_assert_msg(dropped > 0.2 * n / (causal ? 2 : 1), "%d of %zu dropped at p = 0.3", dropped, n);
        for (int t = 0; t < N_TARGETS; t++) free(Ad[t]), free(dA[t]);
        free(A), free(dAd);
    }
}
END_TEST

/* ag_dropout (ops/dropout.c) by the reference loop, by its fast twin (threaded: each thread's
 * span starts at its own element), and by each target's span over the whole tensor: the same
 * bits, the output and the mask the backward uses */
START_TEST(test_dropout_targets_same_bits)
{
    typedef void (*span_fn)(ag_real *, ag_real *, const ag_real *, ag_real, uint64_t, uint64_t, size_t, size_t);
    const span_fn span[N_TARGETS] = { ag__dropout_forward_span_plain, ag__dropout_forward_span_avx2,
                                      ag__dropout_forward_span_avx512 };
    const size_t N = 3 * AG_PAR_MIN + 7;
    const ag_real p = (ag_real)0.25;
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *x = ag_tensor_new(ctx, 1, (int[1]){ (int)N });                       // [N]
    ag_rng r;
    ag_rng_seed(&r, 37);
    for (size_t i = 0; i < N; i++) x->data[i] = (ag_real)ag_rng_uniform(&r) * 2 - 1;
    ag_real *y[2];
    for (int fast = 0; fast < 2; fast++) {
        ag_ctx_set_reference_kernels(ctx, !fast);
        ag_tensor *yt = ag_dropout(ctx, x, p, 99, true);                            // [N]
        ck_assert_ptr_nonnull(yt);
        y[fast] = yt->data;
    }
    assert_same_bits("dropout (threaded fast twin)", PLAIN, y[1], y[0], N);
    ag_real *ys = malloc(N * sizeof(ag_real)), *m = malloc(N * sizeof(ag_real));
    size_t dropped = 0;
    for (size_t i = 0; i < N; i++) dropped += y[0][i] == 0;
    ck_assert_msg(dropped > N / 5 && dropped < N / 3, "%zu of %zu dropped at p = 0.25", dropped, N);
    for (int t = 0; t < N_TARGETS; t++) {
        if (!runs(t, "dropout")) continue;
        span[t](ys, m, x->data, 1 / (1 - p), ag__dropout_threshold((double)p), 99, 0, N);
        assert_same_bits("dropout span", t, ys, y[0], N);
        for (size_t i = 0; i < N; i++)   /* the mask: rng.h's hash of (seed, element) kept at >= p */
            ck_assert(m[i] == (ag_hash_uniform(99, i) >= (double)p ? 1 / (1 - p) : 0));
    }
    free(ys), free(m);
    ag_ctx_free(ctx);
}
END_TEST
#endif

Suite *fast_targets_suite(void)
{
    Suite *s = suite_create("fast_targets");
    TCase *t = tcase_create("targets");
#ifdef AG_REFERENCE
    tcase_add_test(t, test_adam_no_fast_twin);
#else
    ADD_TESTS(t, test_adam_update_targets_same_bits, test_layernorm_targets_same_bits,
                 test_gelu_backward_targets_same_bits, test_attention_rows_targets_equal,
                 test_attention_dropout_targets_same_bits, test_dropout_targets_same_bits);
#endif
    suite_add_tcase(s, t);
    return s;
}
