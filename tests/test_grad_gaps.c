/* test_grad_gaps.c -- gradient tests that close the gaps mutation testing (tools/mutate.py) found:
 * broken backwards that every other test let through.
 *   - split/merge heads with B, T, H, D all different (the other test has B == H == 2, so a
 *     backward that swaps B and H passes);
 *   - a reshape view as the output (the output's grad buffer is the input's: the seed must add);
 *   - ag_backward's own seed of 1 (every gradcheck goes through ag_backward_from);
 *   - a dead branch on the tape (a recorded node no gradient reaches must be skipped, not run
 *     and not a stop);
 *   - an op whose first operand is a constant (recorded when ANY input needs a grad);
 *   - the same gradients after ag_ctx_reset (fresh grad buffers in a reused arena are zeroed);
 *   - many rows adding into one gradient entry, big enough for a data race in a threaded
 *     backward to lose updates, on both kernel paths (reference and fast);
 *   - token ids the caller changes between the forward and the backward (the embedding must
 *     have kept its own copy). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "gradcheck.h"
#include "tcases.h"

static ag_tensor *build_split3(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_split_heads(ctx, in[0], 2); }
static ag_tensor *build_merge(ag_ctx *ctx, ag_tensor **in, void *user) { (void)user; return ag_merge_heads(ctx, in[0]); }

START_TEST(test_heads_grad_distinct_dims)
{
    int sx[3] = { 3, 5, 8 };     /* B=3, T=5, C=8 -> H=2, D=4: no two dims equal */
    int sy[4] = { 3, 2, 5, 4 };  /* [B,H,T,D] */
    ag_tensor *x = gc_tensor_new(3, sx, 51, -1, 1), *y = gc_tensor_new(4, sy, 52, -1, 1);
    gc_opts o = gc_defaults("split_heads B!=H!=T!=D");
    o.max_elems = 0;
    GC_ASSERT(&o, build_split3, &x, 1, NULL);
    o.name = "merge_heads B!=H!=T!=D";
    GC_ASSERT(&o, build_merge, &y, 1, NULL);
    gc_tensor_free(x);
    gc_tensor_free(y);
}
END_TEST

/* the output is a view that shares its grad buffer with the input */
static ag_tensor *build_reshape_only(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    int s[2] = { 6, 4 };
    return ag_reshape(ctx, in[0], 2, s);
}

START_TEST(test_reshape_as_output_grad)
{
    int s[3] = { 2, 3, 4 };
    ag_tensor *x = gc_tensor_new(3, s, 53, -1, 1);
    gc_opts o = gc_defaults("reshape as the output");
    o.max_elems = 0;
    GC_ASSERT(&o, build_reshape_only, &x, 1, NULL);
    gc_tensor_free(x);
}
END_TEST

START_TEST(test_backward_seeds_one)
{
    ag_ctx *ctx = ag_ctx_new();
    /* d(3x)/dx = 3 through ag_backward, not ag_backward_from */
    int s1[1] = { 1 };
    ag_tensor *x = ag_tensor_leaf(ctx, 1, s1);
    x->data[0] = 0.5;
    ck_assert_int_eq(ag_backward(ctx, ag_scale(ctx, x, 3)), AG_OK);
    ck_assert_double_eq_tol(x->grad[0], 3, 1e-6);
    /* uniform logits over V = 5, R = 2 rows: dL/dz = (0.2 - [j == t]) / 2 */
    ag_ctx_reset(ctx);
    int s2[2] = { 2, 5 }, t[2] = { 0, 3 };
    ag_tensor *z = ag_tensor_leaf(ctx, 2, s2);
    ck_assert_int_eq(ag_backward(ctx, ag_cross_entropy(ctx, z, t)), AG_OK);
    for (int r = 0; r < 2; r++)
        for (int j = 0; j < 5; j++)
            ck_assert_double_eq_tol(z->grad[r * 5 + j], (0.2 - (j == t[r])) / 2, 1e-6);
    ag_ctx_free(ctx);
}
END_TEST

/* h feeds a gelu whose result is thrown away: that node is on the tape but no gradient reaches
 * it. It sits between h's producer and the output, so a tape walk that stops there (or runs it
 * with a NULL upstream gradient) breaks the gradient of x and W. */
static ag_tensor *build_dead_branch(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    ag_tensor *h = ag_linear(ctx, in[0], in[1], NULL);
    ag_tensor *unused = ag_gelu(ctx, h);
    (void)unused;
    return ag_scale(ctx, h, 2);
}

START_TEST(test_dead_branch_on_tape)
{
    int sx[2] = { 3, 4 }, sw[2] = { 5, 4 };
    ag_tensor *in[2] = { gc_tensor_new(2, sx, 54, -1, 1), gc_tensor_new(2, sw, 55, -1, 1) };
    gc_opts o = gc_defaults("dead branch on the tape");
    o.max_elems = 0;
    GC_ASSERT(&o, build_dead_branch, in, 2, NULL);
    gc_tensor_free(in[0]);
    gc_tensor_free(in[1]);
}
END_TEST

/* constants (no grad) as the FIRST operand: the node must still be recorded for the second,
 * and the backward must skip the constant */
typedef struct { ag_tensor *c1, *c2, *c3; } consts;

static ag_tensor *build_const_first(ag_ctx *ctx, ag_tensor **in, void *user)
{
    consts *c = user;
    ag_tensor *a = ag_matmul(ctx, c->c1, in[0]);             // [3,4] @ [4,5] -> [3,5]
    ag_tensor *b = ag_linear(ctx, c->c2, in[1], in[2]);      // [3,6] W [5,6] b [5] -> [3,5]
    return ag_add(ctx, c->c3, ag_add(ctx, a, b));             // constant [3,5] + ...
}

START_TEST(test_constant_first_operand)
{
    int s1[2] = { 3, 4 }, s2[2] = { 3, 6 }, sB[2] = { 4, 5 }, sW[2] = { 5, 6 }, sb[1] = { 5 };
    int s3[2] = { 3, 5 };
    consts c = { gc_tensor_new(2, s1, 56, -1, 1), gc_tensor_new(2, s2, 57, -1, 1), gc_tensor_new(2, s3, 65, -1, 1) };
    c.c1->requires_grad = c.c2->requires_grad = c.c3->requires_grad = false;
    ag_tensor *in[3] = { gc_tensor_new(2, sB, 58, -1, 1), gc_tensor_new(2, sW, 59, -1, 1), gc_tensor_new(1, sb, 60, -1, 1) };
    gc_opts o = gc_defaults("constant first operand");
    o.max_elems = 0;
    GC_ASSERT(&o, build_const_first, in, 3, &c);
    for (int i = 0; i < 3; i++) gc_tensor_free(in[i]);
    gc_tensor_free(c.c1);
    gc_tensor_free(c.c2);
    gc_tensor_free(c.c3);
}
END_TEST

/* the same step twice in one ctx, reset in between: the arena hands out the same memory again,
 * and every intermediate grad buffer must start at zero */
START_TEST(test_same_grads_after_reset)
{
    int sx[3] = { 2, 3, 4 }, sw[2] = { 5, 4 }, sc[1] = { 5 };
    ag_tensor *x = gc_tensor_new(3, sx, 61, -1, 1), *W = gc_tensor_new(2, sw, 62, -1, 1);
    ag_tensor *g = gc_tensor_new(1, sc, 63, 0.5, 1.5), *b = gc_tensor_new(1, sc, 64, -1, 1);
    ag_tensor *leaves[4] = { x, W, g, b };
    ag_real *first[4];
    ag_real dy[30];
    for (int i = 0; i < 30; i++) dy[i] = (ag_real)(0.1 * (i % 7) - 0.3);
    ag_ctx *ctx = ag_ctx_new();
    for (int step = 0; step < 3; step++) {
        for (int k = 0; k < 4; k++) memset(leaves[k]->grad, 0, ag_numel(leaves[k]) * sizeof(ag_real));
        ag_tensor *h = ag_gelu(ctx, ag_layernorm(ctx, ag_linear(ctx, x, W, NULL), g, b, 1e-5));
        ag_tensor *y = ag_softmax(ctx, ag_add(ctx, h, ag_scale(ctx, h, 0.5)));   // [2,3,5]
        ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
        for (int k = 0; k < 4; k++) {
            size_t n = ag_numel(leaves[k]);
            if (step == 0) {
                first[k] = malloc(n * sizeof(ag_real));
                memcpy(first[k], leaves[k]->grad, n * sizeof(ag_real));
            } else {
                for (size_t j = 0; j < n; j++) ck_assert_msg(leaves[k]->grad[j] == first[k][j],
                    "step %d leaf %d element %zu: %g, first step %g", step, k, j,
                    (double)leaves[k]->grad[j], (double)first[k][j]);
            }
        }
        ag_ctx_reset(ctx);
    }
    ag_ctx_free(ctx);
    for (int k = 0; k < 4; k++) {
        free(first[k]);
        gc_tensor_free(leaves[k]);
    }
}
END_TEST

/* the caller's ids buffer is refilled before the backward, as a data loader does with its batch:
 * dW must still scatter to the rows of the ids the forward saw */
START_TEST(test_embedding_keeps_its_ids)
{
    enum { V = 4, C = 3, T = 4 };
    int se[2] = { V, C }, ids[T] = { 0, 2, 2, 1 };
    const int seen[T] = { 0, 2, 2, 1 };
    ag_tensor *E = gc_tensor_new(2, se, 80, -1, 1);
    memset(E->grad, 0, V * C * sizeof(ag_real));
    ag_real dy[T * C];
    for (int i = 0; i < T * C; i++) dy[i] = (ag_real)(i + 1);
    ag_ctx *ctx = ag_ctx_new();
    ag_tensor *y = ag_embedding(ctx, E, ids, 1, T);                  // [1,T,C]
    ck_assert_ptr_nonnull(y);
    for (int t = 0; t < T; t++) ids[t] = V - 1;                      /* the next batch */
    ck_assert_int_eq(ag_backward_from(ctx, y, dy), AG_OK);
    ag_real want[V * C] = { 0 };
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) want[seen[t] * C + c] += dy[t * C + c];
    for (int i = 0; i < V * C; i++)
        ck_assert_msg(E->grad[i] == want[i], "dE[%d,%d] = %g, want %g", i / C, i % C, (double)E->grad[i], (double)want[i]);
    ag_ctx_free(ctx);
    gc_tensor_free(E);
}
END_TEST

/* Gradients that many rows (or batch entries, or tokens) add into ONE entry: with the backward
 * loops split across threads, a split over the wrong index is a data race that loses updates.
 * The gradchecks above are too small for a race to show, so: big enough shapes, an upstream of
 * all ones and exact integer answers (a float holds them exactly), three rounds on each kernel
 * path (the fast_ref tests compare the paths on small shapes only). Only bites in a threaded
 * build with 2+ cores actually free, and then not every run: a race is probabilistic
 * (ThreadSanitizer would be exact). About 0.2-0.5 s. */
START_TEST(test_parallel_accumulation_exact)
{
    enum { R = 1 << 17, C = 16, F = 8, V = 4, NB = R / 8 };
    ag_real *ones = malloc(R * C * sizeof(ag_real));
    for (int i = 0; i < R * C; i++) ones[i] = 1;
    int *ids = malloc(R * sizeof(int));
    for (int i = 0; i < R; i++) ids[i] = i % V;
    int sa[2] = { R, C }, sb[1] = { C }, sx[2] = { R, F }, sw[2] = { C, F }, se[2] = { V, C };
    int sA[3] = { NB, 8, 4 }, sB[2] = { 4, C };
    ag_tensor *a = gc_tensor_new(2, sa, 70, -1, 1), *b = gc_tensor_new(1, sb, 71, -1, 1);
    ag_tensor *x = gc_tensor_new(2, sx, 72, -1, 1), *W = gc_tensor_new(2, sw, 73, -1, 1);
    ag_tensor *E = gc_tensor_new(2, se, 74, -1, 1);
    ag_tensor *A = gc_tensor_new(3, sA, 75, -1, 1), *B = gc_tensor_new(2, sB, 76, -1, 1);
    a->requires_grad = x->requires_grad = W->requires_grad = A->requires_grad = false;
    /* dB of A [NB,8,4] @ B [4,C] with dC = 1: dB[k][n] = sum of column k of A over all rows */
    double colsum[4] = { 0 };
    for (int r = 0; r < NB * 8; r++)
        for (int k = 0; k < 4; k++) colsum[k] += (double)A->data[r * 4 + k];
    ag_ctx *ctx = ag_ctx_new();
    for (int round = 0; round < 6; round++) {
        const char *path = round % 2 ? "reference" : "fast";
        ag_ctx_set_reference_kernels(ctx, round % 2 == 1);
        ag_tensor *t[4] = { b, W, E, B };
        for (int k = 0; k < 4; k++) memset(t[k]->grad, 0, ag_numel(t[k]) * sizeof(ag_real));
        ck_assert_int_eq(ag_backward_from(ctx, ag_add(ctx, a, b), ones), AG_OK);
        ag_ctx_reset(ctx); /* a second backward in the same ctx would run the add's node again */
        ck_assert_int_eq(ag_backward_from(ctx, ag_linear(ctx, x, W, b), ones), AG_OK);
        ag_ctx_reset(ctx);
        ck_assert_int_eq(ag_backward_from(ctx, ag_embedding(ctx, E, ids, 1, R), ones), AG_OK);
        ag_ctx_reset(ctx);
        ck_assert_int_eq(ag_backward_from(ctx, ag_matmul(ctx, A, B), ones), AG_OK);
        ag_ctx_reset(ctx);
        /* db: R from the add plus R from the linear */
        for (int j = 0; j < C; j++) ck_assert_msg(b->grad[j] == 2 * R, "round %d (%s): db[%d] = %g, want %d", round, path, j, (double)b->grad[j], 2 * R);
        for (int v = 0; v < V; v++)
            for (int c = 0; c < C; c++)
                ck_assert_msg(E->grad[v * C + c] == R / V, "round %d (%s): dE[%d,%d] = %g, want %d", round, path, v, c, (double)E->grad[v * C + c], R / V);
        for (int k = 0; k < 4; k++)
            for (int n = 0; n < C; n++)
                ck_assert_msg(fabs(B->grad[k * C + n] - colsum[k]) <= 1e-3 * (1 + fabs(colsum[k])),
                              "round %d (%s): dB[%d,%d] = %g, want %g", round, path, k, n, (double)B->grad[k * C + n], colsum[k]);
    }
    ag_ctx_free(ctx);
    ag_tensor *all[7] = { a, b, x, W, E, A, B };
    for (int k = 0; k < 7; k++) gc_tensor_free(all[k]);
    free(ones);
    free(ids);
}
END_TEST

Suite *grad_gaps_suite(void)
{
    Suite *s = suite_create("grad_gaps");
    TCase *t = tcase_create("grad");
    tcase_set_tags(t, "heads reshape embedding");
    ADD_TESTS(t, test_heads_grad_distinct_dims, test_reshape_as_output_grad, test_backward_seeds_one,
                 test_dead_branch_on_tape, test_constant_first_operand, test_same_grads_after_reset,
                 test_embedding_keeps_its_ids, test_parallel_accumulation_exact);
    suite_add_tcase(s, t);
    return s;
}
