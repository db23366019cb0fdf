/* kernel.h -- what every kernel needs, the reference ones in ops/<op>.c and the fast ones in
 * fast/<op>.c alike, and the one switch between them. Not installed, not part of the API.
 *
 * Two tables, one contract. Each op's file holds its reference kernels, plain loops that read
 * like the formula, and its backward step. An op that also has a fast twin (fast/<op>.c) does
 * not pick between them itself: it calls through the table of its ctx, chosen once when the
 * ctx is made (AG_KERNELS, ag_ctx_set_kernels: speed.h), as ggml picks a backend:
 *
 *     const ag_kernels *K = ag__kernels(ctx);         // reference or fast, one table per ctx
 *     K->softmax.forward(y->data, x->data, R, N);     // the forward kernel
 *     ag_record(ctx, K->softmax.op, y, &x, 1);        // the node: its name and backward step
 *
 * The reference table is every op's own entry (ag__<op>_reference, at the end of ops/<op>.c);
 * the fast table is that with the fast twins put in (fast/kernels.c). `make REFERENCE=1`
 * builds the library without fast/, and both tables are then the reference one. The
 * tests/test_<op>.c suites run each op's gradient check on both tables and prove the fast
 * twin equal to the reference (tests/fastref.h). */
#ifndef AG_KERNEL_H
#define AG_KERNEL_H

#include <math.h>
#include <string.h>
#include "parallel.h"
#include "speed.h"
#include "tensor.h"

/* One op's entry: its forward kernel (the arguments of ops/<op>.c's <op>_forward) and the node
 * it records (the name, flags and backward step). */
typedef struct {
    void (*forward)(ag_real *y, const ag_real *a, const ag_real *b, size_t n, size_t nb);
    const ag_op *op;
} ag_add_kernels;
typedef struct {
    double (*forward)(ag_real *probs, const ag_real *z, const int *targets, int ignore_index, size_t R, int V);
    const ag_op *op;
} ag_cross_entropy_kernels;
typedef struct {
    void (*forward)(ag_real *y, ag_real *m, const ag_real *x, ag_real p, uint64_t seed, size_t N);
    const ag_op *op;
} ag_dropout_kernels;
typedef struct {
    void (*forward)(ag_real *y, ag_real *th, const ag_real *x, size_t N);
    const ag_op *op;
} ag_gelu_kernels;
typedef struct {
    void (*forward)(ag_real *y, ag_real *stats, const ag_real *x, const ag_real *w, const ag_real *b, size_t R, int C,
                    ag_real eps);
    const ag_op *op;
} ag_layernorm_kernels;
typedef struct {
    void (*forward)(ag_real *y, const ag_real *x, const ag_real *W, const ag_real *b, int R, int Fin, int Fout);
    const ag_op *op;
} ag_linear_kernels;
typedef struct { /* out = mask ? in : value (add: out +=), x's shape n[4] padded on the left, the mask's
                  * strides ms[4] over it */
    void (*forward)(ag_real *out, const ag_real *in, const ag_real *mask, ag_real value, bool add, const int *n,
                    const size_t *ms);
    const ag_op *op;
} ag_masked_fill_kernels;
typedef struct {
    void (*forward)(ag_real *C, const ag_real *A, const ag_real *B, size_t batch, int M, int K, int N, bool shared_b);
    const ag_op *op;
} ag_matmul_kernels;
typedef struct {
    void (*forward)(ag_real *y, ag_real *rstd, const ag_real *x, const ag_real *w, size_t R, int C, ag_real eps);
    const ag_op *op;
} ag_rmsnorm_kernels;
typedef struct {
    void (*forward)(ag_real *y, ag_real *sig, const ag_real *x, size_t N);
    const ag_op *op;
} ag_silu_kernels;
typedef struct {
    void (*forward)(ag_real *y, const ag_real *x, size_t R, int N);
    const ag_op *op;
} ag_softmax_kernels;

/* q, k, v [B,T,C] -> softmax(scale q k^T, causal or no mask) v over H heads, dropout p seeded
 * with seed: attention as one op (src/nn/attention.c says when it may stand in for attend()) */
typedef ag_tensor *(*ag_attention_fn)(ag_ctx *ctx, ag_tensor *q, ag_tensor *k, ag_tensor *v, int H, ag_real scale,
                                      bool causal, ag_real p, uint64_t seed);

typedef struct ag_kernels {
    const char *name;  /* "reference" or "fast" */
    ag_add_kernels add;
    ag_cross_entropy_kernels cross_entropy;
    ag_dropout_kernels dropout;
    ag_gelu_kernels gelu;
    ag_layernorm_kernels layernorm;
    ag_linear_kernels linear;
    ag_masked_fill_kernels masked_fill;
    ag_matmul_kernels matmul;
    ag_rmsnorm_kernels rmsnorm;
    ag_silu_kernels silu;
    ag_softmax_kernels softmax;
    ag_attention_fn attention;  /* NULL: attention is the composed ops (attend(), nn/attention.c) */
} ag_kernels;

/* masked_fill.c: n[4], x's shape padded on the left, and ms[4], the mask's strides over it (0
 * where it is broadcast); false when the mask does not broadcast to x */
bool ag__broadcast_mask(const ag_tensor *x, const ag_tensor *mask, int n[AG_MAX_DIMS], size_t ms[AG_MAX_DIMS]);

/* the ctx's table (ctx.c). Cannot fail. */
const ag_kernels *ag__kernels(const ag_ctx *ctx);
/* *K = the reference table, or the fast one (kernels.c). Cannot fail. */
void ag__kernels_init(ag_kernels *K, ag_kernels_id id);
/* puts the fast twins into K, a reference table (fast/kernels.c; not in `make REFERENCE=1`) */
void ag__kernels_fast(ag_kernels *K);
/* each op's own entry, at the end of ops/<op>.c */
extern const ag_add_kernels ag__add_reference;
extern const ag_cross_entropy_kernels ag__cross_entropy_reference;
extern const ag_dropout_kernels ag__dropout_reference;
extern const ag_gelu_kernels ag__gelu_reference;
extern const ag_layernorm_kernels ag__layernorm_reference;
extern const ag_linear_kernels ag__linear_reference;
extern const ag_masked_fill_kernels ag__masked_fill_reference;
extern const ag_matmul_kernels ag__matmul_reference;
extern const ag_rmsnorm_kernels ag__rmsnorm_reference;
extern const ag_silu_kernels ag__silu_reference;
extern const ag_softmax_kernels ag__softmax_reference;

/* Below this many elements a loop runs on one thread: waking the others costs more than it
 * saves (sampling feeds one position at a time through every op). A reference kernel's only
 * concession to speed is `#pragma omp parallel for ... if (n >= AG_PAR_MIN)` over rows that are
 * independent of each other, as llm.c does: it changes no result. */
#define AG_PAR_MIN 16384

/* C += op(A) op(B) for contiguous row-major matrices, op(X) = X^T when its flag is set:
 *   C [M,N],  A [M,K] (or [K,M] when transA),  B [K,N] (or [N,K] when transB)
 *   for every m, n:  C[m,n] += sum over k of op(A)[m,k] op(B)[k,n]
 * The reference kernels' one matrix product: that triple loop, run by OpenBLAS (ag_gemm, split
 * over the threads when it is big; one thread inside a parallel loop). Cannot fail. */
static inline void ag__matmul_add(ag_real *C, const ag_real *A, const ag_real *B, int M, int N, int K,
                                  bool transA, bool transB)
{
    ag_gemm(transA, transB, M, N, K, 1, A, transA ? M : K, B, transB ? K : N, 1, C, N);
}

#endif
