/* test_fast_ref_rows.c -- the row and elementwise ops' fast kernels equal their reference
 * kernels (see fastref.h): LayerNorm, RMSNorm, cross-entropy (with and without an ignore
 * index), GELU (and the three targets of its forward loop), SiLU, dropout (the mask its
 * backward reads), masked_fill (with masks that broadcast, filling a finite value or -inf).
 * Random shapes with
 * odd sizes and tails (lengths that are not a multiple of the 16 reduction lanes or the
 * 32-column blocks, single rows and columns), plus one shape per op past AG_PAR_MIN so the
 * threaded paths (and GELU's per-thread spans) run. One TCase per op; each loops over seeds.
 *
 * FR_SEEDS=n in the environment runs n seeds instead of N_SEEDS. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fastref.h"
#include "tensor/fast/fast.h" /* the three targets of GELU's forward loop */

#define N_SEEDS 6

/* a dimension: mostly odd, sometimes 1, sometimes a lane or block multiple plus a tail */
static int pick_dim(uint64_t *st)
{
    static const int dims[] = { 1, 2, 3, 5, 7, 15, 17, 31, 33, 47, 65, 100 };
    return dims[fr_rand_int(st, 0, (int)(sizeof dims / sizeof dims[0]) - 1)];
}

/* [A, B, C] with random A, B, C, inputs uniform in [lo, hi) */
static fr_input random_3d(uint64_t *st, double lo, double hi)
{
    fr_input x = { 3, { pick_dim(st), pick_dim(st), pick_dim(st) }, lo, hi, false };
    return x;
}

/* far apart, so no two seeds' shapes overlap (fr_rand_int steps the state by one) */
static uint64_t seed_of(int tcase, int i) { return 1000000 * (uint64_t)tcase + 1000 * (uint64_t)i; }

// --- layernorm (fast/layernorm.c) ---

static ag_tensor *build_layernorm(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_layernorm(ctx, in[0], in[1], in[2], (ag_real)1e-5);
}

static void check_layernorm(const char *what, fr_input x, uint64_t seed)
{
    int C = x.shape[x.ndim - 1];
    fr_input in[3] = { x, { 1, { C }, 0.5, 1.5, false }, { 1, { C }, -1, 1, false } }; /* x, w, b */
    FR_ASSERT(what, build_layernorm, in, 3, NULL, seed);
}

START_TEST(test_layernorm_fast_equals_reference)
{
    uint64_t st = seed_of(1, _i);
    check_layernorm("layernorm", random_3d(&st, -3, 3), st);
    check_layernorm("layernorm (threaded)", (fr_input){ 2, { 129, 131 }, -3, 3, false }, st);
}
END_TEST

// --- rmsnorm (fast/rmsnorm.c) ---

static ag_tensor *build_rmsnorm(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_rmsnorm(ctx, in[0], in[1], (ag_real)1e-5);
}

static void check_rmsnorm(const char *what, fr_input x, uint64_t seed)
{
    int C = x.shape[x.ndim - 1];
    fr_input in[2] = { x, { 1, { C }, 0.5, 1.5, false } }; /* x, w */
    FR_ASSERT(what, build_rmsnorm, in, 2, NULL, seed);
}

START_TEST(test_rmsnorm_fast_equals_reference)
{
    uint64_t st = seed_of(2, _i);
    check_rmsnorm("rmsnorm", random_3d(&st, -3, 3), st);
    check_rmsnorm("rmsnorm (threaded)", (fr_input){ 2, { 131, 129 }, -3, 3, false }, st);
}
END_TEST

// --- cross-entropy (fast/cross_entropy.c): the targets go through user ---

static ag_tensor *build_cross_entropy(ag_ctx *ctx, ag_tensor **in, void *user)
{
    return ag_cross_entropy(ctx, in[0], user);
}

/* logits z [..., V] and a random target in [0, V) per row */
static void check_cross_entropy(const char *what, fr_input z, uint64_t *st)
{
    int V = z.shape[z.ndim - 1];
    size_t R = 1;
    for (int d = 0; d < z.ndim - 1; d++) R *= (size_t)z.shape[d];
    int *targets = malloc(R * sizeof *targets);
    ck_assert_ptr_nonnull(targets);
    for (size_t r = 0; r < R; r++) targets[r] = fr_rand_int(st, 0, V - 1);
    FR_ASSERT(what, build_cross_entropy, &z, 1, targets, *st);
    free(targets);
}

START_TEST(test_cross_entropy_fast_equals_reference)
{
    uint64_t st = seed_of(3, _i);
    check_cross_entropy("cross_entropy", random_3d(&st, -8, 8), &st);
    check_cross_entropy("cross_entropy (one row)", (fr_input){ 2, { 1, pick_dim(&st) }, -8, 8, false }, &st);
    check_cross_entropy("cross_entropy (threaded)", (fr_input){ 2, { 130, 129 }, -8, 8, false }, &st);
}
END_TEST

// --- cross-entropy with an ignore index: padded rows skipped by both kernels ---

typedef struct {
    int *targets;
    int ignore_index;
} ce_ignore;

static ag_tensor *build_cross_entropy_ignore(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const ce_ignore *c = user;
    return ag_cross_entropy_ignore(ctx, in[0], c->targets, c->ignore_index);
}

/* logits z [..., V], random targets of which about one in `every` is ignore_index (every 1:
 * all of them; an ignore index in [0, V) is a padding token id and also a target's value) */
static void check_cross_entropy_ignore(const char *what, fr_input z, int ignore_index, int every, uint64_t *st)
{
    int V = z.shape[z.ndim - 1];
    size_t R = 1;
    for (int d = 0; d < z.ndim - 1; d++) R *= (size_t)z.shape[d];
    ce_ignore c = { malloc(R * sizeof(int)), ignore_index };
    ck_assert_ptr_nonnull(c.targets);
    for (size_t r = 0; r < R; r++)
        c.targets[r] = fr_rand_int(st, 0, every - 1) == 0 ? ignore_index : fr_rand_int(st, 0, V - 1);
    FR_ASSERT(what, build_cross_entropy_ignore, &z, 1, &c, *st);
    free(c.targets);
}

START_TEST(test_cross_entropy_ignore_fast_equals_reference)
{
    uint64_t st = seed_of(6, _i);
    check_cross_entropy_ignore("cross_entropy_ignore", random_3d(&st, -8, 8), -100, 3, &st);
    check_cross_entropy_ignore("cross_entropy_ignore (pad id 0)", random_3d(&st, -8, 8), 0, 4, &st);
    check_cross_entropy_ignore("cross_entropy_ignore (all ignored)", random_3d(&st, -8, 8), -100, 1, &st);
    check_cross_entropy_ignore("cross_entropy_ignore (threaded)", (fr_input){ 2, { 130, 129 }, -8, 8, false }, -100, 3,
                               &st);
}
END_TEST

// --- masked_fill (fast/masked_fill.c): the mask, made in the build from user, broadcasts ---

typedef struct {
    int ndim;
    int shape[AG_MAX_DIMS];
    ag_real *values; /* 0/1 */
    ag_real fill;    /* what a masked entry becomes */
} fr_mask;

static ag_tensor *build_masked_fill(ag_ctx *ctx, ag_tensor **in, void *user)
{
    const fr_mask *m = user;
    ag_tensor *mask = ag_tensor_new(ctx, m->ndim, m->shape);
    if (!mask) return NULL;
    memcpy(mask->data, m->values, ag_numel(mask) * sizeof(ag_real));
    return ag_masked_fill(ctx, in[0], mask, m->fill);
}

/* x [n0,n1,n2,n3]; a mask of x's last `mask_ndim` dims, each kept or set to 1 at random (a
 * bit of `ones`: set = 1), about a quarter of its values 0; masked entries become fill (-inf
 * compares equal to -inf: fastref.c's compare takes f == r first) */
static void check_masked_fill(const char *what, fr_input x, int mask_ndim, unsigned ones, ag_real fill, uint64_t *st)
{
    fr_mask m = { mask_ndim, { 1, 1, 1, 1 }, NULL, fill };
    size_t n = 1;
    for (int d = 0; d < mask_ndim; d++) {
        int dx = x.ndim - mask_ndim + d;
        m.shape[d] = (ones >> d) & 1 ? 1 : x.shape[dx];
        n *= (size_t)m.shape[d];
    }
    m.values = malloc(n * sizeof(ag_real));
    ck_assert_ptr_nonnull(m.values);
    for (size_t i = 0; i < n; i++) m.values[i] = fr_rand_int(st, 0, 3) != 0;
    FR_ASSERT(what, build_masked_fill, &x, 1, &m, *st);
    free(m.values);
}

/* a small dimension for 4-d shapes */
static int pick_small(uint64_t *st)
{
    static const int dims[] = { 1, 2, 3, 5, 7, 17 };
    return dims[fr_rand_int(st, 0, (int)(sizeof dims / sizeof dims[0]) - 1)];
}

START_TEST(test_masked_fill_fast_equals_reference)
{
    uint64_t st = seed_of(7, _i);
    for (int k = 0; k < 8; k++) { /* the even ones fill -3, the odd ones -inf (before a softmax) */
        fr_input x = { 4, { pick_small(&st), pick_small(&st), pick_small(&st), pick_small(&st) }, -3, 3, false };
        int mask_ndim = fr_rand_int(&st, 1, 4);
        ag_real fill = k % 2 ? (ag_real)-INFINITY : -3;
        check_masked_fill(k % 2 ? "masked_fill -inf" : "masked_fill", x, mask_ndim, (unsigned)fr_rand_int(&st, 0, 15),
                          fill, &st);
    }
    fr_input scores = { 4, { 2, 3, 65, 65 }, -3, 3, false }; /* past AG_PAR_MIN: [B,H,T,T] */
    const ag_real inf = (ag_real)INFINITY;
    check_masked_fill("masked_fill (threaded, causal [T,T])", scores, 2, 0, -inf, &st);
    check_masked_fill("masked_fill (threaded, key padding [B,1,1,T])", scores, 4, 2 | 4, -inf, &st);
    check_masked_fill("masked_fill (threaded, combined [B,1,T,T])", scores, 4, 2, -3, &st);
}
END_TEST

// --- gelu (fast/gelu.c) ---

static ag_tensor *build_gelu(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_gelu(ctx, in[0]);
}

START_TEST(test_gelu_fast_equals_reference)
{
    uint64_t st = seed_of(4, _i);
    fr_input x = random_3d(&st, -6, 6);
    FR_ASSERT("gelu", build_gelu, &x, 1, NULL, st);
    fr_input big = { 1, { 16384 + 33 }, -6, 6, false }; /* past AG_PAR_MIN: per-thread spans */
    FR_ASSERT("gelu (threaded)", build_gelu, &big, 1, NULL, st);
}
END_TEST

// --- the three targets of GELU's forward loop (AG_TARGETS in fast/fast.h), each called by name ---

#ifndef AG_REFERENCE /* that library has no fast/ */
#define GELU_N (1000 + 13) /* not a multiple of the 4 or 8 lanes: both loops' tails run */

/* GELU of x [GELU_N] by the reference kernel (ag_gelu in a ctx that asks for it), into y */
static void gelu_reference(ag_real *y, const ag_real *x)
{
    ag_ctx *ctx = ag_ctx_new();
    ck_assert_ptr_nonnull(ctx);
    ag_ctx_set_reference_kernels(ctx, true);
    ag_tensor *t = ag_tensor_new1(ctx, GELU_N);
    ck_assert_ptr_nonnull(t);
    memcpy(t->data, x, sizeof(ag_real) * GELU_N);
    ag_tensor *g = ag_gelu(ctx, t);
    ck_assert_msg(g != NULL, "%s", ag_ctx_error(ctx));
    memcpy(y, g->data, sizeof(ag_real) * GELU_N);
    ag_ctx_free(ctx);
}

typedef void (*gelu_span_fn)(ag_real *y, ag_real *th, const ag_real *x, size_t n);

/* runs one target with and without saving tanh (its two loops), and compares it with the
 * reference; y gets its output */
static void check_gelu_target(const char *what, gelu_span_fn span, const ag_real *x, const ag_real *ref, ag_real *y)
{
    ag_real th[GELU_N], y_alone[GELU_N];
    char msg[512];
    span(y, th, x, GELU_N);
    span(y_alone, NULL, x, GELU_N);
    ck_assert_msg(fr_compare(what, "without tanh saved", "y", y_alone, y, GELU_N, msg, sizeof msg) == 0, "%s", msg);
    ck_assert_msg(fr_compare(what, "against the reference", "y", y, ref, GELU_N, msg, sizeof msg) == 0, "%s", msg);
}

START_TEST(test_gelu_targets_equal_reference)
{
    ag_real x[GELU_N], ref[GELU_N], plain[GELU_N], avx2[GELU_N], avx512[GELU_N];
    const ag_real inf = (ag_real)INFINITY;
    /* -20 and -100: exp(2u) underflows; no big positive one, which would loosen the tolerance */
    const ag_real edge[] = { 0, -0.0f, 1e-30f, -1e-30f, 9.5f, -9.5f, -20, -100, inf, -inf, (ag_real)NAN };
    ag_rng r;
    ag_rng_seed(&r, seed_of(8, _i));
    for (int i = 0; i < GELU_N; i++) /* activations' scale, the edges first */
        x[i] = i < (int)(sizeof edge / sizeof edge[0]) ? edge[i] : (ag_real)(20 * ag_rng_uniform(&r) - 10);
    gelu_reference(ref, x);
    check_gelu_target("gelu, plain target", ag__gelu_forward_span_plain, x, ref, plain);
    if (!ag__cpu_has_avx2()) {
        fprintf(stderr, "test_gelu_targets_equal_reference: AVX2 target skipped: this CPU has no AVX2\n");
        return;
    }
    check_gelu_target("gelu, avx2 target", ag__gelu_forward_span_avx2, x, ref, avx2);
    char msg[512];
    ck_assert_msg(fr_compare("gelu", "avx2 against plain", "y", avx2, plain, GELU_N, msg, sizeof msg) == 0, "%s", msg);
    if (!ag__cpu_has_avx512()) {
        fprintf(stderr, "test_gelu_targets_equal_reference: AVX-512 target skipped: this CPU has no AVX-512\n");
        return;
    }
    check_gelu_target("gelu, avx512 target", ag__gelu_forward_span_avx512, x, ref, avx512);
    ck_assert_msg(fr_compare("gelu", "avx512 against plain", "y", avx512, plain, GELU_N, msg, sizeof msg) == 0, "%s",
                  msg);
}
END_TEST
#endif

// --- silu (fast/silu.c) ---

static ag_tensor *build_silu(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_silu(ctx, in[0]);
}

START_TEST(test_silu_fast_equals_reference)
{
    uint64_t st = seed_of(5, _i);
    fr_input x = random_3d(&st, -12, 12);
    FR_ASSERT("silu", build_silu, &x, 1, NULL, st);
    fr_input big = { 2, { 129, 131 }, -12, 12, false }; /* past AG_PAR_MIN */
    FR_ASSERT("silu (threaded)", build_silu, &big, 1, NULL, st);
}
END_TEST

// --- dropout (fast/dropout.c: the forward; the backward reads the mask it saved) ---

static ag_tensor *build_dropout(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return ag_dropout(ctx, in[0], (ag_real)0.3, 77, true);
}

START_TEST(test_dropout_fast_equals_reference)
{
    uint64_t st = seed_of(9, _i);
    fr_input x = random_3d(&st, -4, 4);
    FR_ASSERT("dropout", build_dropout, &x, 1, NULL, st);
    fr_input big = { 2, { 127, 133 }, -4, 4, false }; /* past AG_PAR_MIN: each thread saves its span's mask */
    FR_ASSERT("dropout (threaded)", build_dropout, &big, 1, NULL, st);
}
END_TEST

/* one TCase per op, tagged with its name, looping over the seeds (FR_SEEDS=n in the environment: n of them) */
#define ADD_OP(suite, name, test)                                                            \
    do {                                                                                     \
        TCase *tc_ = tcase_create(name);                                                     \
        tcase_set_tags(tc_, name); /* make test-op OP=<op> */                                \
        tcase_add_loop_test(tc_, test, 0, getenv("FR_SEEDS") ? atoi(getenv("FR_SEEDS")) : N_SEEDS); \
        suite_add_tcase(suite, tc_);                                                         \
    } while (0)

Suite *fast_ref_rows_suite(void)
{
    Suite *s = suite_create("fast_ref_rows");
    ADD_OP(s, "layernorm", test_layernorm_fast_equals_reference);
    ADD_OP(s, "rmsnorm", test_rmsnorm_fast_equals_reference);
    ADD_OP(s, "cross_entropy", test_cross_entropy_fast_equals_reference);
    ADD_OP(s, "cross_entropy ignore", test_cross_entropy_ignore_fast_equals_reference);
    ADD_OP(s, "masked_fill", test_masked_fill_fast_equals_reference);
    ADD_OP(s, "gelu", test_gelu_fast_equals_reference);
#ifndef AG_REFERENCE
    ADD_OP(s, "gelu targets", test_gelu_targets_equal_reference);
#endif
    ADD_OP(s, "silu", test_silu_fast_equals_reference);
    ADD_OP(s, "dropout", test_dropout_fast_equals_reference);
    return s;
}
