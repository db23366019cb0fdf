/* attention_demo -- scaled dot-product attention step by step, on numbers small enough to
 * follow by hand: 4 tokens, d_model 6, d_k 3 (the classic tutorial walk-through), computed with
 * attograd's own ops and printed at every stop.
 *
 *   1. one head:      Q = X W_q, K = X W_k, V = X W_v;  scores = Q K^T;  scaled by 1/sqrt(d_k);
 *                     weights = softmax(scaled) (each row sums to 1);  out = weights V
 *   2. causal mask:   the scores above the diagonal become -inf before the softmax, so token t
 *                     attends to tokens 0..t only: exact zeros above the diagonal
 *   3. two heads:     d_model 6 -> 2 heads of d_k 3 with ag_split_heads, attention per head,
 *                     ag_merge_heads back to [1,4,6]; head 0 reuses W_q/W_k/W_v, so its half of
 *                     the result is exactly part 2's output
 *   4. one training step: a mean-squared-error loss against a fixed target, ag_backward, the
 *                     gradients dW_q, dW_k, dW_v, one SGD step, and the loss going down
 *   5. padding:       a batch of two sequences of lengths 4 and 2, padded to 4: the key-padding
 *                     mask, the causal + padding mask (ag_key_padding_mask), and a fully masked
 *                     row under -inf (zeros, zero gradient), under -1e9 (uniform weights: it
 *                     attends to padding) and in PyTorch (NaN); the loss skips the padded
 *                     targets (ag_cross_entropy_ignore)
 *   6. the classic 3-token example: Q = K = V = [[1,0,1,0],[0,1,0,1],[1,1,0,0]], its scores,
 *                     weights softmax(Q K^T / sqrt(4)) and output
 *
 * Every number is fixed (seeded, rounded to one decimal), so two runs print the same thing.
 * Usage: build/attention_demo   (no arguments; exits 0) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "attograd.h"

enum { T = 4, C = 6, D = 3, H = 2 };   /* tokens, d_model, d_k (= d_model / H), heads */

// --- printing ---

static void banner(const char *title) { printf("\n==== %s ====\n\n", title); }

/* m [rows, cols] row-major; row labels "t0".. when tokens, with each row's sum when sums */
static void print_matrix(const char *title, const ag_real *m, int rows, int cols, bool sums)
{
    printf("%s\n", title);
    for (int r = 0; r < rows; r++) {
        printf("  t%d |", r);
        double s = 0;
        for (int c = 0; c < cols; c++) {
            printf(" %7.3f", (double)m[r * cols + c]);
            s += m[r * cols + c];
        }
        if (sums) printf("  | sum %.3f", s);
        printf("\n");
    }
    printf("\n");
}

/* a weight matrix: rows are d_model inputs, not tokens */
static void print_weights(const char *title, const ag_real *m, int rows, int cols)
{
    printf("%s\n", title);
    for (int r = 0; r < rows; r++) {
        printf("  %2d |", r);
        for (int c = 0; c < cols; c++) printf(" %7.3f", (double)m[r * cols + c]);
        printf("\n");
    }
    printf("\n");
}

static const char *shape(const ag_tensor *t)
{
    static char buf[4][48]; /* a few shapes in one printf */
    static int next;
    next = (next + 1) % 4;
    return t ? ag_shape_str(t, buf[next], sizeof buf[next]) : "(error)";
}

/* Uniform in [-1, 1), rounded to one decimal so the inputs can be checked by hand. */
static void fill_rounded(ag_real *x, size_t n, ag_rng *r)
{
    for (size_t i = 0; i < n; i++) {
        double v = round(10 * (2 * ag_rng_uniform(r) - 1)) / 10;
        x[i] = (ag_real)(v == 0 ? 0 : v); /* no -0.0 in the printout */
    }
}

// --- one head, op by op ---

typedef struct {
    ag_tensor *Wq, *Wk, *Wv;   /* [C,D] each: Q = X W_q (the tutorials' layout, not Linear's) */
} head_weights;

/* X [1,T,C] -> out [1,T,D]: softmax(Q K^T / sqrt(D) [causal]) V. Prints every step when
 * verbose. Valid until ag_ctx_reset; NULL on error (message in ctx). */
static ag_tensor *attention(ag_ctx *ctx, ag_tensor *X, const head_weights *w, bool causal, bool verbose)
{
    ag_tensor *Q = ag_matmul(ctx, X, w->Wq);                       // [1,T,D]
    ag_tensor *K = ag_matmul(ctx, X, w->Wk);                       // [1,T,D]
    ag_tensor *V = ag_matmul(ctx, X, w->Wv);                       // [1,T,D]
    ag_tensor *Kt = ag_transpose(ctx, K);                           // [1,D,T]
    ag_tensor *S = ag_matmul(ctx, Q, Kt);                           // [1,T,T]
    ag_tensor *Ss = ag_scale(ctx, S, (ag_real)(1 / sqrt((double)D))); // [1,T,T]
    ag_tensor *mask = causal ? ag_causal_mask(ctx, T) : NULL;       // [T,T]
    ag_tensor *Sm = causal ? ag_masked_fill(ctx, Ss, mask, -INFINITY) : Ss; // [1,T,T]
    ag_tensor *A = ag_softmax(ctx, Sm);                             // [1,T,T]
    ag_tensor *out = ag_matmul(ctx, A, V);                          // [1,T,D]
    if (!out || !verbose) return out;
    if (!causal) {
        print_matrix("Q = X W_q   [4 tokens, d_k 3]: what each token is looking for", Q->data, T, D, false);
        print_matrix("K = X W_k   [4, 3]: what each token offers to be found by", K->data, T, D, false);
        print_matrix("V = X W_v   [4, 3]: what each token passes on when attended to", V->data, T, D, false);
        print_matrix("scores = Q K^T   [4, 4]: row t = how well token t's query matches each key", S->data, T, T,
                     false);
        printf("scaled = scores / sqrt(d_k) = scores * %.4f   (keeps the softmax out of saturation:\n"
               "a dot product of d_k terms grows like sqrt(d_k))\n", 1 / sqrt((double)D));
        print_matrix("", Ss->data, T, T, false);
    } else {
        print_matrix("mask [4, 4] (ag_causal_mask): 1 where key j <= query t, 0 above the diagonal", mask->data, T,
                     T, false);
        print_matrix("scaled scores, masked (ag_masked_fill with -inf where mask is 0)", Sm->data, T, T, false);
    }
    print_matrix("weights = softmax(row by row)   [4, 4]", A->data, T, T, true);
    print_matrix("out = weights V   [4, 3]: each row a weighted mix of V's rows", out->data, T, D, false);
    return out;
}

/* mean((out - target)^2) as a [1,1] tensor, from ops: add, scale, mul, reshape, matmul */
static ag_tensor *mse(ag_ctx *ctx, ag_tensor *out, ag_tensor *target)
{
    int n = (int)ag_numel(out);
    ag_tensor *diff = ag_add(ctx, out, ag_scale(ctx, target, -1));  // [1,T,D]
    ag_tensor *sq = ag_mul(ctx, diff, diff);                        // [1,T,D]
    int s_row[2] = { 1, n };
    ag_tensor *row = ag_reshape(ctx, sq, 2, s_row);                 // [1,T*D]
    ag_tensor *ones = ag_tensor_new2(ctx, n, 1);                    // [T*D,1]
    if (!ones) return NULL;
    for (int i = 0; i < n; i++) ones->data[i] = 1;
    ag_tensor *sum = ag_matmul(ctx, row, ones);                     // [1,1]
    return ag_scale(ctx, sum, (ag_real)(1.0 / n));                  // [1,1]
}

// --- the demo's state, shared by its parts ---

/* One ctx and one parameter store for the whole demo. The data is fixed and seeded, so every
 * part starts from the same numbers. */
typedef struct {
    ag_ctx *ctx;
    ag_params *P;                         /* owns W_q, W_k, W_v and their gradients */
    head_weights w;
    ag_rng rng;                           /* part 3 draws head 1's weights from it */
    ag_real X_data[T * C], Y_data[T * D]; /* inputs: data, not parameters */
    ag_real W_initial[3 * C * D];         /* part 5 uses the head of parts 1-2, before training */
} demo;

/* the three projections are the model's parameters: gradients flow into them */
static bool demo_init(demo *d)
{
    int sw[2] = { C, D };
    d->w.Wq = ag_params_add(d->P, "w_q", 2, sw, AG_INIT_ZEROS, 0, false);   // [C,D]
    d->w.Wk = ag_params_add(d->P, "w_k", 2, sw, AG_INIT_ZEROS, 0, false);   // [C,D]
    d->w.Wv = ag_params_add(d->P, "w_v", 2, sw, AG_INIT_ZEROS, 0, false);   // [C,D]
    if (!d->w.Wq || !d->w.Wk || !d->w.Wv || ag_params_alloc(d->P) != AG_OK) return false;
    ag_rng_seed(&d->rng, 2024);
    fill_rounded(d->X_data, T * C, &d->rng);
    fill_rounded(d->P->data, d->P->total, &d->rng);
    fill_rounded(d->Y_data, T * D, &d->rng);
    memcpy(d->W_initial, d->P->data, sizeof d->W_initial);
    return true;
}

// --- 1. one head ---

/* X and the head's weights, then attention op by op. Returns X [1,T,C] (parts 2 and 3 reuse
 * it; valid until ag_ctx_reset) or NULL. */
static ag_tensor *one_head_demo(demo *d)
{
    ag_ctx_set_grad(d->ctx, false); /* looking only: no tape is recorded */
    ag_tensor *X = ag_tensor_new3(d->ctx, 1, T, C);                 // [1,T,C]
    if (!X) return NULL;
    memcpy(X->data, d->X_data, sizeof d->X_data);
    print_matrix("X   [4 tokens, d_model 6]: one embedding per token (fixed, seeded values)", X->data, T, C, false);
    print_weights("W_q   [d_model 6, d_k 3]", d->w.Wq->data, C, D);
    print_weights("W_k   [6, 3]", d->w.Wk->data, C, D);
    print_weights("W_v   [6, 3]", d->w.Wv->data, C, D);
    return attention(d->ctx, X, &d->w, false, true) ? X : NULL;
}

// --- 3. two heads ---

/* Full projections Wm[k] [C,C]: head h owns columns h*D .. h*D+D-1. Head 0's columns are
 * W_q, W_k, W_v of parts 1-2; head 1's are new. */
static bool two_head_weights(demo *d, ag_tensor *Wm[3])
{
    const ag_tensor *single[3] = { d->w.Wq, d->w.Wk, d->w.Wv };
    for (int k = 0; k < 3; k++) {
        Wm[k] = ag_tensor_new2(d->ctx, C, C);                       // [C,C]
        if (!Wm[k]) return false;
        ag_real extra[C * D];
        fill_rounded(extra, C * D, &d->rng);
        for (int i = 0; i < C; i++)
            for (int j = 0; j < D; j++) {
                Wm[k]->data[i * C + j] = single[k]->data[i * D + j];
                Wm[k]->data[i * C + D + j] = extra[i * D + j];
            }
    }
    return true;
}

/* X [1,T,C] -> [1,T,C]: causal attention in H heads, split and merged, printing the shapes on
 * the way; *a gets the weights [1,H,T,T]. NULL on error. */
static ag_tensor *two_heads(ag_ctx *ctx, ag_tensor *X, ag_tensor *const Wm[3], ag_tensor **a)
{
    ag_tensor *Q = ag_matmul(ctx, X, Wm[0]);                        // [1,T,C]
    ag_tensor *K = ag_matmul(ctx, X, Wm[1]);                        // [1,T,C]
    ag_tensor *V = ag_matmul(ctx, X, Wm[2]);                        // [1,T,C]
    ag_tensor *q = ag_split_heads(ctx, Q, H);                       // [1,H,T,D]
    ag_tensor *k = ag_split_heads(ctx, K, H);                       // [1,H,T,D]
    ag_tensor *v = ag_split_heads(ctx, V, H);                       // [1,H,T,D]
    ag_tensor *kt = ag_transpose(ctx, k);                           // [1,H,D,T]
    ag_tensor *s = ag_scale(ctx, ag_matmul(ctx, q, kt), (ag_real)(1 / sqrt((double)D))); // [1,H,T,T]
    ag_tensor *sm = ag_masked_fill(ctx, s, ag_causal_mask(ctx, T), -INFINITY); // [1,H,T,T]
    *a = ag_softmax(ctx, sm);                                       // [1,H,T,T]
    ag_tensor *o = ag_matmul(ctx, *a, v);                           // [1,H,T,D]
    ag_tensor *merged = ag_merge_heads(ctx, o);                     // [1,T,C]
    if (!merged) return NULL;
    printf("shapes ([B,T,C] with B = 1 sequence, H = 2 heads, D = d_k = 3):\n");
    printf("  X %s  @ W_Q %s          -> Q %s\n", shape(X), shape(Wm[0]), shape(Q));
    printf("  ag_split_heads(Q, 2)             -> q %s   head h = channels 3h..3h+2\n", shape(q));
    printf("  q @ k^T (ag_transpose(k) %s) -> scores %s, one [4,4] per head\n", shape(kt), shape(s));
    printf("  softmax(masked scores / sqrt 3) @ v -> o %s\n", shape(o));
    printf("  ag_merge_heads(o)                -> %s   the heads side by side again\n\n", shape(merged));
    return merged;
}

/* X [1,T,C] in two heads; head 0 is part 2's head, so its half must equal causal_out [1,T,D] */
static bool two_heads_demo(demo *d, ag_tensor *X, const ag_tensor *causal_out)
{
    ag_tensor *Wm[3], *a;
    if (!two_head_weights(d, Wm)) return false;
    print_weights("W_Q   [6, 6] = [ W_q of head 0 | W_q of head 1 ]", Wm[0]->data, C, C);
    ag_tensor *merged = two_heads(d->ctx, X, Wm, &a);               // [1,T,C]
    if (!merged) return false;
    for (int h = 0; h < H; h++) {
        char title[80];
        snprintf(title, sizeof title, "head %d weights   [4, 4]", h);
        print_matrix(title, a->data + h * T * T, T, T, true);
    }
    print_matrix("merged output   [4, 6] = [ head 0 | head 1 ]", merged->data, T, C, false);
    double dmax = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < D; j++) dmax = fmax(dmax, fabs(merged->data[t * C + j] - causal_out->data[t * D + j]));
    printf("Columns 0-2 (head 0) equal part 2's output: max difference %.1e.\n"
           "Each head attends in its own way; a real layer then mixes them with W_o [6, 6].\n", dmax);
    return true;
}

// --- 4. one training step ---

/* A fresh X [1,T,C] and target Y [1,T,D] in the ctx, from the fixed data */
static bool load_batch(demo *d, ag_tensor **X, ag_tensor **Y)
{
    *X = ag_tensor_new3(d->ctx, 1, T, C);                           // [1,T,C]
    *Y = ag_tensor_new3(d->ctx, 1, T, D);                           // [1,T,D]
    if (!*X || !*Y) return false;
    memcpy((*X)->data, d->X_data, sizeof d->X_data);
    memcpy((*Y)->data, d->Y_data, sizeof d->Y_data);
    return true;
}

/* Forward, loss and backward once, showing the loss and dW_q, dW_k, dW_v; *loss0 = the loss */
static bool gradient_demo(demo *d, double *loss0)
{
    ag_ctx_reset(d->ctx);
    ag_ctx_set_grad(d->ctx, true); /* now record the tape */
    ag_tensor *X, *Y;
    if (!load_batch(d, &X, &Y)) return false;
    print_matrix("target   [4, 3] (fixed): what the causal output should become", Y->data, T, D, false);
    ag_params_zero_grad(d->P);
    ag_tensor *out = attention(d->ctx, X, &d->w, true, false);      // [1,T,D]
    ag_tensor *loss = mse(d->ctx, out, Y);                          // [1,1]
    if (ag_backward(d->ctx, loss) != AG_OK) return false;
    *loss0 = loss->data[0];
    printf("loss = mean((out - target)^2) = %.6f   (%zu ops on the tape, ag_backward walks them back)\n\n",
           *loss0, ag_ctx_get_stats(d->ctx).tape_nodes);
    print_weights("dW_q = dloss/dW_q   [6, 3]", d->w.Wq->grad, C, D);
    print_weights("dW_k   [6, 3]", d->w.Wk->grad, C, D);
    print_weights("dW_v   [6, 3]", d->w.Wv->grad, C, D);
    printf("X gets no gradient (%s): it is data, not a parameter; only W_q, W_k, W_v will move.\n\n",
           X->grad ? "allocated" : "X.grad is NULL");
    return true;
}

/* One SGD step, showing that each weight moved by exactly -lr * its gradient */
static void sgd_step_demo(demo *d, double lr)
{
    ag_real before[3 * C * D];
    memcpy(before, d->P->data, sizeof before);
    ag_sgd_step(d->P, lr, 0);                                       /* W -= lr * dW */
    const char *names[3] = { "W_q", "W_k", "W_v" };
    double worst = 0;
    for (int m = 0; m < 3; m++) {
        ag_real delta[C * D];
        for (int i = 0; i < C * D; i++) {
            delta[i] = d->P->data[m * C * D + i] - before[m * C * D + i];
            worst = fmax(worst, fabs(delta[i] + lr * d->P->grad[m * C * D + i]));
        }
        char title[96];
        snprintf(title, sizeof title, "%s after one SGD step (lr %.1f): change = new - old = -lr * d%s", names[m], lr,
                 names[m]);
        print_weights(title, delta, C, D);
    }
    printf("every change equals -lr * gradient (max deviation %.1e)\n\n", worst);
}

/* the loss on the same X with the stepped weights, next to loss0 from before the step */
static bool loss_after_step(demo *d, double loss0)
{
    ag_ctx_reset(d->ctx);
    ag_ctx_set_grad(d->ctx, false);
    ag_tensor *X, *Y;
    if (!load_batch(d, &X, &Y)) return false;
    ag_tensor *loss = mse(d->ctx, attention(d->ctx, X, &d->w, true, false), Y); // [1,1]
    if (!loss) return false;
    printf("loss before the step %.6f, after %.6f: the same X, new weights, a smaller error.\n", loss0,
           (double)loss->data[0]);
    return true;
}

/* a few more steps, the training loop in five lines, then the output next to the target */
static bool training_loop_demo(demo *d, double lr)
{
    ag_ctx_set_grad(d->ctx, true);
    ag_tensor *X = NULL, *Y;
    for (int it = 2; it <= 50; it++) {
        ag_ctx_reset(d->ctx);
        if (!load_batch(d, &X, &Y)) return false;
        ag_params_zero_grad(d->P);
        ag_tensor *loss = mse(d->ctx, attention(d->ctx, X, &d->w, true, false), Y); // [1,1]
        if (ag_backward(d->ctx, loss) != AG_OK) return false;
        if (it % 10 == 0) printf("  step %2d: loss %.6f\n", it, (double)loss->data[0]);
        ag_sgd_step(d->P, lr, 0);
    }
    ag_tensor *out = attention(d->ctx, X, &d->w, true, false);      // [1,T,D]
    if (!out) return false;
    print_matrix("\nafter 50 steps, the causal output   [4, 3] (compare with the target above)", out->data, T, D,
                 false);
    return true;
}

static bool training_demo(demo *d)
{
    const double lr = 0.5;
    double loss0;
    if (!gradient_demo(d, &loss0)) return false;
    sgd_step_demo(d, lr);
    return loss_after_step(d, loss0) && training_loop_demo(d, lr);
}

// --- 5. padding ---

enum { NB = 2, LEN1 = 2 }; /* the padded batch: sequence 0 has T tokens, sequence 1 LEN1 */

/* The textbook softmax exp(x - max) / sum, without attograd's rule for a fully masked row */
static void textbook_softmax(double *y, const double *x, int n)
{
    double max = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) max = fmax(max, x[j]);
    for (int j = 0; j < n; j++) sum += (y[j] = exp(x[j] - max)); /* -inf - -inf = nan */
    for (int j = 0; j < n; j++) y[j] /= sum;
}

/* One head over the batch X [NB,T,C] with mask [NB,1,T,T] filled with fill; *Sm gets the
 * masked scores and *A the weights, [NB,1,T,T] (B sequences, 1 head). Returns out [NB,T,D]. */
static ag_tensor *padded_attention(ag_ctx *ctx, ag_tensor *X, const head_weights *w, ag_tensor *mask, ag_real fill,
                                   ag_tensor **Sm, ag_tensor **A)
{
    ag_tensor *Q = ag_matmul(ctx, X, w->Wq);                       // [NB,T,D]
    ag_tensor *K = ag_matmul(ctx, X, w->Wk);                       // [NB,T,D]
    ag_tensor *V = ag_matmul(ctx, X, w->Wv);                       // [NB,T,D]
    ag_tensor *S = ag_scale(ctx, ag_matmul(ctx, Q, ag_transpose(ctx, K)), (ag_real)(1 / sqrt((double)D))); // [NB,T,T]
    S = ag_reshape(ctx, S, 4, (int[]){ NB, 1, T, T });              // [NB,1,T,T] as [B,H,T,T], H = 1
    *Sm = ag_masked_fill(ctx, S, mask, fill);                       // [NB,1,T,T]
    *A = ag_softmax(ctx, *Sm);                                      // [NB,1,T,T]
    ag_tensor *A3 = ag_reshape(ctx, *A, 3, (int[]){ NB, T, T });    // [NB,T,T]
    return ag_matmul(ctx, A3, V);                                   // [NB,T,D]
}

/* The batch *X [NB,T,C] and its mask [NB,1,T,T] = causal AND key padding, returned. Sequence 0
 * is part 2's X; sequence 1 is its first LEN1 tokens, left-padded to T (as for batched
 * generation), so its first queries are padding that may see only padding keys. */
static ag_tensor *padded_batch(demo *d, ag_tensor **X)
{
    int sx[3] = { NB, T, C };
    *X = ag_tensor_leaf(d->ctx, 3, sx);                             // [NB,T,C] a leaf: it gets a gradient
    ag_tensor *kp = ag_tensor_new2(d->ctx, NB, T);                  // [NB,T] 1 = a real token, 0 = padding
    if (!*X || !kp) return NULL;
    memcpy((*X)->data, d->X_data, T * C * sizeof(ag_real));
    memcpy((*X)->data + (T + T - LEN1) * C, d->X_data, LEN1 * C * sizeof(ag_real)); /* padding embeddings stay 0 */
    for (int t = 0; t < T; t++) {
        kp->data[t] = 1;
        kp->data[T + t] = t >= T - LEN1;
    }
    printf("A batch of %d sequences of lengths %d and %d, padded to T = %d. Sequence 1 is left-padded\n"
           "(as for batched generation): pad, pad, then part 1's tokens 0 and 1.\n\n", NB, T, LEN1, T);
    print_weights("key padding [2, 4]: row b = sequence b, 1 = a real token, 0 = padding", kp->data, NB, T);
    ag_tensor *mask = ag_key_padding_mask(d->ctx, kp, ag_causal_mask(d->ctx, T)); // [NB,1,T,T]
    if (!mask) return NULL;
    print_matrix("sequence 1's mask = causal AND key padding (ag_key_padding_mask, [2,1,4,4]; it\n"
                 "broadcasts over the heads of scores [B,H,T,T]); sequence 0's is the causal mask",
                 mask->data + T * T, T, T, false);
    return mask;
}

/* Masked with -inf: a fully masked row gets zero weights and zero gradient. Returns out
 * [NB,T,D] (the loss below reads it) or NULL. */
static ag_tensor *masked_with_inf(demo *d, ag_tensor *X, ag_tensor *mask)
{
    ag_tensor *Sm, *A;
    ag_tensor *out = padded_attention(d->ctx, X, &d->w, mask, -INFINITY, &Sm, &A); // [NB,T,D]
    if (!out) return NULL;
    print_matrix("sequence 1, scores masked with -inf", Sm->data + T * T, T, T, false);
    print_matrix("sequence 1, weights under -inf (attograd)", A->data + T * T, T, T, true);
    printf("Queries t0 and t1 are padding and see only padding keys: every score is -inf. attograd's\n"
           "softmax gives such a row all zeros (no distribution to give), so t0 and t1 output 0.\n"
           "Real queries t2, t3 put zero weight on the padded keys t0, t1.\n\n");
    ag_real ones[NB * T * D];
    for (int i = 0; i < NB * T * D; i++) ones[i] = 1;
    if (ag_backward_from(d->ctx, out, ones) != AG_OK) return NULL; /* d(sum of out) */
    print_matrix("d(scores) of sequence 1 for the loss sum(out): zero gradient in rows t0, t1 (and t2: a\n"
                 "weight of 1 on one key has no softmax gradient)", Sm->grad + T * T, T, T, false);
    print_weights("dX of sequence 1 [4, 6]: the padding positions (rows 0, 1) get no gradient", X->grad + T * C, T, C);
    ag_params_zero_grad(d->P);
    return out;
}

/* Masked with -1e9 instead: a fully masked row becomes uniform and attends to padding */
static bool masked_with_1e9(demo *d, ag_tensor *X, ag_tensor *mask)
{
    ag_ctx_set_grad(d->ctx, false);
    ag_tensor *Sm, *A9;
    if (!padded_attention(d->ctx, X, &d->w, mask, (ag_real)-1e9, &Sm, &A9)) return false;
    print_matrix("sequence 1, weights under -1e9 (a finite stand-in for -inf)", A9->data + T * T, T, T, true);
    printf("With -1e9 a fully masked row is all -1e9, and softmax of equal scores is uniform: t0 and\n"
           "t1 put 1/4 on every key, padding (and the future) included. Real rows are as under -inf.\n\n");
    return true;
}

/* The textbook softmax of a row of -inf is nan, as in PyTorch */
static void textbook_masked_row(void)
{
    double row[T], y[T];
    for (int j = 0; j < T; j++) row[j] = -INFINITY;
    textbook_softmax(y, row, T);
    printf("The textbook softmax exp(x - max) / sum of that row, computed here: [");
    for (int j = 0; j < T; j++) printf(j ? ", %s" : "%s", isnan(y[j]) ? "nan" : "a number");
    printf("]: max = -inf,\n"
           "and -inf - -inf is nan. PyTorch 1.13 gives the same: torch.softmax of a row of -inf is nan;\n"
           "nn.MultiheadAttention returns nan for such a query, one layer's gradient is then nan\n"
           "everywhere, and a second layer turns every output nan (zero weight * nan value = nan).\n\n");
}

/* the loss of the padded batch: out [NB,T,D] as logits over D classes, padding targets -100 */
static bool padded_loss(ag_ctx *ctx, ag_tensor *out)
{
    const int targets[NB * T] = { 0, 1, 2, 0, -100, -100, 1, 2 }, real_targets[T + LEN1] = { 0, 1, 2, 0, 1, 2 };
    ag_tensor *loss = ag_cross_entropy_ignore(ctx, out, targets, -100);      // [1]
    ag_tensor *real = ag_tensor_new2(ctx, T + LEN1, D);             // [6,D] the real positions alone
    if (!loss || !real) return false;
    memcpy(real->data, out->data, T * D * sizeof(ag_real));
    memcpy(real->data + T * D, out->data + (T + T - LEN1) * D, LEN1 * D * sizeof(ag_real));
    ag_tensor *loss_real = ag_cross_entropy(ctx, real, real_targets);        // [1]
    if (!loss_real) return false;
    printf("The loss skips the padded positions: treating out [2, 4, 3] as logits over 3 classes with\n"
           "targets -100 at the padding, ag_cross_entropy_ignore(out, targets, -100) = %.6f, the mean over\n"
           "the 6 real positions (ag_cross_entropy over those rows alone: %.6f).\n",
           (double)loss->data[0], (double)loss_real->data[0]);
    return true;
}

static bool padding_demo(demo *d)
{
    memcpy(d->P->data, d->W_initial, sizeof d->W_initial); /* the head of parts 1-2, untrained */
    ag_ctx_reset(d->ctx);
    ag_ctx_set_grad(d->ctx, true);
    ag_tensor *X, *out;
    ag_tensor *mask = padded_batch(d, &X);                          // [NB,1,T,T]
    if (!mask || !(out = masked_with_inf(d, X, mask)) || !masked_with_1e9(d, X, mask)) return false;
    textbook_masked_row();
    return padded_loss(d->ctx, out);
}

// --- 6. the classic 3-token example ---

static bool three_token_demo(ag_ctx *ctx)
{
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, false);
    static const ag_real x3[12] = { 1, 0, 1, 0, 0, 1, 0, 1, 1, 1, 0, 0 };
    ag_tensor *X = ag_tensor_new2(ctx, 3, 4);                       // [3,4]
    if (!X) return false;
    memcpy(X->data, x3, sizeof x3);
    ag_tensor *S = ag_matmul(ctx, X, ag_transpose(ctx, X));         // [3,3] Q K^T with Q = K = X
    ag_tensor *W = ag_softmax(ctx, ag_scale(ctx, S, (ag_real)(1 / sqrt(4.0)))); // [3,3]
    ag_tensor *O = ag_matmul(ctx, W, X);                            // [3,4] weights V with V = X
    if (!O) return false;
    print_matrix("Q = K = V = X   [3 tokens, d 4]", X->data, 3, 4, false);
    print_matrix("scores = Q K^T   [3, 3]", S->data, 3, 3, false);
    print_matrix("weights = softmax(scores / sqrt(4))   [3, 3]", W->data, 3, 3, true);
    print_matrix("out = weights V   [3, 4]", O->data, 3, 4, false);
    printf("Row 0: scores (2, 0, 1), halved (1, 0, 0.5), weights e^1, e^0, e^0.5 over their sum.\n"
           "Widely copied tutorial figures for this example show other numbers than its own formula\n"
           "gives; these are the formula's (checked with PyTorch 1.13, torch.softmax(X @ X.T / 2, -1)\n"
           "@ X, and recomputed by hand in tests/test_padding.c).\n");
    return true;
}

static int fail(ag_ctx *ctx, ag_params *P)
{
    const char *why = ctx && ag_ctx_error(ctx) ? ag_ctx_error(ctx) : ag_params_error(P);
    fprintf(stderr, "attention_demo: error: %s\n", why ? why : "out of memory");
    ag_ctx_free(ctx);
    ag_params_free(P);
    return 1;
}

int main(void)
{
    ag_threads_init(1);
    demo d = { .ctx = ag_ctx_new(), .P = ag_params_new() };
    if (!d.ctx || !d.P || !demo_init(&d)) return fail(d.ctx, d.P);

    banner("1. Scaled dot-product attention, one head: 4 tokens, d_model 6, d_k 3");
    ag_tensor *X = one_head_demo(&d);                               // [1,T,C]
    if (!X) return fail(d.ctx, d.P);

    banner("2. The same with a causal mask: token t sees tokens 0..t only");
    ag_tensor *causal_out = attention(d.ctx, X, &d.w, true, true);  // [1,T,D]
    if (!causal_out) return fail(d.ctx, d.P);
    printf("Row 0 attends only to itself (weight 1.000): the first token has nothing else to read.\n");

    banner("3. Two heads: d_model 6 -> 2 heads of d_k 3, split and merged");
    if (!two_heads_demo(&d, X, causal_out)) return fail(d.ctx, d.P);

    banner("4. One training step: the gradient changes W_q, W_k and W_v");
    if (!training_demo(&d)) return fail(d.ctx, d.P);

    banner("5. Padding: a batch of sequences of different lengths");
    if (!padding_demo(&d)) return fail(d.ctx, d.P);

    banner("6. The classic 3-token example: Q = K = V = [[1,0,1,0], [0,1,0,1], [1,1,0,0]]");
    if (!three_token_demo(d.ctx)) return fail(d.ctx, d.P);

    ag_ctx_free(d.ctx);
    ag_params_free(d.P);
    return 0;
}
