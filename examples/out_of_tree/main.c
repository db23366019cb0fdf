/* out_of_tree -- a program outside the attograd tree, built only from the installed library:
 *   #include <attograd/attograd.h>   and   cc ... $(pkg-config --cflags --libs attograd)
 *
 * It trains a 2-layer MLP (Linear 2->8, SiLU, Linear 8->2, cross-entropy) on XOR, the
 * smallest problem a linear model cannot solve, with AdamW, then checks two things and exits
 * non-zero if either fails: all four points are classified right, and one gradient from
 * ag_backward agrees with a central difference (so the installed backward works, not just
 * the forward). */
#include <math.h>
#include <stdio.h>
#include <attograd/attograd.h>

enum { N = 4, IN = 2, HID = 8, OUT = 2 };

static const ag_real xor_x[N * IN] = { 0, 0, 0, 1, 1, 0, 1, 1 };
static const int xor_y[N] = { 0, 1, 1, 0 };

typedef struct {
    ag_linear_layer fc1, fc2;
} mlp;

/* logits [N, OUT] for the four points; valid until ag_ctx_reset */
static ag_tensor *forward(ag_ctx *ctx, const mlp *m)
{
    ag_tensor *x = ag_tensor_new2(ctx, N, IN);                      // [N,IN]
    if (!x) return NULL;
    for (int i = 0; i < N * IN; i++) x->data[i] = xor_x[i];
    ag_tensor *h = ag_silu(ctx, ag_linear_layer_forward(ctx, &m->fc1, x)); // [N,HID]
    return ag_linear_layer_forward(ctx, &m->fc2, h);                // [N,OUT]
}

static double loss_now(ag_ctx *ctx, const mlp *m)
{
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, false);
    ag_tensor *loss = ag_cross_entropy(ctx, forward(ctx, m), xor_y);
    ag_ctx_set_grad(ctx, true);
    return loss ? loss->data[0] : NAN;
}

/* The two layers in P, initialized; false with a message on stderr (also when the caller
 * could not allocate P or ctx) */
static bool build_model(ag_params *P, const ag_ctx *ctx, mlp *m)
{
    if (!P || !ctx || ag_linear_layer_init(&m->fc1, P, "fc1", IN, HID, true, 1.0) != AG_OK ||
        ag_linear_layer_init(&m->fc2, P, "fc2", HID, OUT, true, 1.0) != AG_OK || ag_params_alloc(P) != AG_OK) {
        const char *why = ag_params_error(P);   /* NULL when P or ctx could not be allocated */
        fprintf(stderr, "out_of_tree: error: cannot build the model: %s\n", why ? why : "out of memory");
        return false;
    }
    ag_params_init(P, 42);
    return true;
}

/* The installed backward against a central difference, on one weight: *ok when they agree.
 * false when the backward itself fails. */
static bool check_gradient(ag_ctx *ctx, ag_params *P, mlp *m, bool *ok)
{
    ag_ctx_reset(ctx);
    ag_params_zero_grad(P);
    if (ag_backward(ctx, ag_cross_entropy(ctx, forward(ctx, m), xor_y)) != AG_OK) return false;
    ag_real *w = &m->fc1.W->data[3], saved = *w;
    double analytic = m->fc1.W->grad[3], h = 1e-2;
    *w = (ag_real)(saved + h);
    double lp = loss_now(ctx, m);
    *w = (ag_real)(saved - h);
    double lm = loss_now(ctx, m);
    *w = saved;
    double numeric = (lp - lm) / (2 * h);
    *ok = fabs(analytic - numeric) <= 1e-4 + 1e-2 * fabs(numeric);
    printf("dloss/dfc1.weight[1,1]: backward %.5f, central difference %.5f\n", analytic, numeric);
    return true;
}

/* 300 steps of AdamW without decay, lr 0.05; *loss = the last step's loss */
static bool train(ag_ctx *ctx, ag_params *P, const mlp *m, double *loss)
{
    ag_adam_cfg adam = {.beta1 = 0.9, .beta2 = 0.99, .eps = 1e-8, .weight_decay = 0.0};
    for (long it = 1; it <= 300; it++) {
        ag_ctx_reset(ctx);
        ag_params_zero_grad(P);
        ag_tensor *L = ag_cross_entropy(ctx, forward(ctx, m), xor_y); // [1]
        if (ag_backward(ctx, L) != AG_OK) {
            fprintf(stderr, "out_of_tree: error: %s\n", ag_ctx_error(ctx));
            return false;
        }
        *loss = L->data[0];
        if (it == 1 || it % 100 == 0) printf("step %3ld  loss %.5f\n", it, *loss);
        ag_adamw_step(P, &adam, 0.05, it);
    }
    return true;
}

/* How many of the four points the model classifies right (printing each); -1 on error */
static int count_right(ag_ctx *ctx, const mlp *m)
{
    ag_ctx_reset(ctx);
    ag_ctx_set_grad(ctx, false);
    ag_tensor *logits = forward(ctx, m);                            // [N,OUT]
    if (!logits) return -1;
    int right = 0;
    for (int i = 0; i < N; i++) {
        int pred = logits->data[i * OUT + 1] > logits->data[i * OUT];
        printf("xor(%g, %g) = %d  (predicted %d)\n", (double)xor_x[2 * i], (double)xor_x[2 * i + 1], xor_y[i], pred);
        right += pred == xor_y[i];
    }
    return right;
}

int main(void)
{
    ag_threads_init(1);
    ag_params *P = ag_params_new();
    ag_ctx *ctx = ag_ctx_new();
    mlp m;
    bool grad_ok = false;
    double loss = 0;
    int rc = 1, right;
    if (build_model(P, ctx, &m) && check_gradient(ctx, P, &m, &grad_ok) && train(ctx, P, &m, &loss)
        && (right = count_right(ctx, &m)) >= 0) {
        rc = right == N && grad_ok && loss < 0.1 ? 0 : 1;
        printf("%s: %d/4 right, final loss %.5f, gradient %s\n", rc ? "FAIL" : "ok", right, loss,
               grad_ok ? "agrees" : "DISAGREES");
    }
    ag_ctx_free(ctx);
    ag_params_free(P);
    return rc;
}
