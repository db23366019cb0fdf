/* custom_op -- a new op with its own backward, written outside the attograd tree with the
 * public API only, and its gradient check against the installed library:
 *   #include <attograd/attograd.h>   and   cc ... $(pkg-config --cflags --libs attograd-f64)
 *
 * The double library (attograd-f64: ag_real = double) because central differences in float
 * are only good to a few percent; in double ag_gradcheck's defaults are rtol 1e-6, so a factor
 * of 2 or a dropped term fails. Exit status: 0 when every gradient agrees, 1 when one does not,
 * 2 when the check could not run.
 *
 * The op is softplus, a smooth ReLU:
 *   forward:   y = log(1 + exp(x))       (as max(x, 0) + log(1 + exp(-|x|)): no overflow)
 *   backward:  dx += dy * sigmoid(x)     (d/dx log(1 + e^x) = e^x / (1 + e^x))
 * It is checked alone, y = softplus(x), and inside a small layer, y = softplus(x W^T + b),
 * where the check covers it together with the library's own linear and reports each input. */
#include <math.h>
#include <stdio.h>
#include <attograd/attograd.h>

#ifndef AG_DOUBLE
#error "build against the double library: pkg-config --cflags --libs attograd-f64"
#endif

// --- the op: forward kernel, backward, and the function that records it ---

static void softplus_forward(ag_real *y, const ag_real *x, size_t n)
{
    for (size_t i = 0; i < n; i++) y[i] = fmax(x[i], 0) + log(1 + exp(-fabs(x[i])));
}

static ag_status softplus_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = log(1 + exp(x))  =>  dx += dy * sigmoid(x). Adds, never overwrites: x may
     * feed other ops whose backwards add into the same gradient. */
    ag_tensor *x = n->in[0];
    const ag_real *dy = n->out->grad;
    ag_real *dx = ag_grad(ctx, x);          /* zero-filled in the ctx on first use */
    if (!dx) return ag_ctx_status(ctx);
    for (size_t i = 0; i < ag_numel(x); i++) dx[i] += dy[i] / (1 + exp(-x->data[i]));
    return AG_OK;
}

static const ag_op softplus_op = { .name = "softplus", .backward = softplus_backward };

/* softplus of every element: [...] -> [...], in ctx (valid until ag_ctx_reset); NULL on error
 * (a NULL x keeps the earlier error, as the library's ops do) */
static ag_tensor *softplus(ag_ctx *ctx, ag_tensor *x)
{
    if (!x || ag_ctx_status(ctx) != AG_OK) return NULL;
    ag_tensor *y = ag_tensor_like(ctx, x);                          // x's shape
    if (!y) return NULL;
    softplus_forward(y->data, x->data, ag_numel(x));
    ag_record(ctx, &softplus_op, y, &x, 1);  /* nothing recorded in no-grad mode */
    return ag_ctx_status(ctx) == AG_OK ? y : NULL;
}

// --- the gradient checks ---

enum { B = 4, IN = 3, OUT = 5 };

/* y = softplus(x): the op alone, so its backward writes straight into the checked input's
 * gradient (which the checker starts at random values: a `dx[i] =` instead of `+=` fails) */
static ag_tensor *build_op(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return softplus(ctx, in[0]);                                    // [B,IN]
}

/* y = softplus(x W^T + b): the op inside a layer, with the library's linear before it */
static ag_tensor *build_layer(ag_ctx *ctx, ag_tensor **in, void *user)
{
    (void)user;
    return softplus(ctx, ag_linear(ctx, in[0], in[1], in[2]));     // [B,OUT]
}

/* runs one check and prints what it found per input; 0 pass, 1 fail, 2 the check did not run */
static int check(const char *name, ag_gradcheck_fn build, ag_tensor **in, int n)
{
    ag_gradcheck_opts opts = ag_gradcheck_defaults(name);         // rtol 1e-6 in double
    ag_gradcheck_result r[3];
    ag_error err = { 0 };
    if (ag_gradcheck(NULL, build, NULL, in, n, &opts, r, &err) != AG_OK) {
        fprintf(stderr, "custom_op: error: %s\n", err.msg);
        return 2;
    }
    for (int k = 0; k < n; k++)
        printf("  %-2s %2zu elements, %2zu fail; worst element %2zu: analytic %+.10f numeric %+.10f, %.2g x tol\n",
               in[k]->name, r[k].checked, r[k].failed, r[k].worst, r[k].analytic, r[k].numeric, r[k].ratio);
    char line[AG_GRADCHECK_MSG];
    puts(ag_gradcheck_message(&opts, r, n, line, sizeof line));
    return ag_gradcheck_failed(r, n) ? 1 : 0;
}

int main(void)
{
    ag_threads_init(1);
    const char *names[3] = { "x", "W", "b" };
    int shapes[3][2] = { { B, IN }, { OUT, IN }, { OUT, 1 } };
    int ndims[3] = { 2, 2, 1 };
    ag_tensor *in[3] = { NULL, NULL, NULL };
    int rc = 2;
    ag_rng rng;
    ag_rng_seed(&rng, 7);
    for (int k = 0; k < 3; k++) {
        /* outside any ctx (the checker resets its ctx before every evaluation), in [-2, 2) */
        in[k] = ag_gradcheck_input(names[k], ndims[k], shapes[k], &rng, -2, 2);
        if (!in[k]) {
            fprintf(stderr, "custom_op: error: out of memory\n");
            goto done;
        }
    }
    int op = check("softplus(x)", build_op, in, 1);
    int layer = check("softplus(x W^T + b)", build_layer, in, 3);
    rc = op > layer ? op : layer;
done:
    for (int k = 0; k < 3; k++) ag_tensor_free_owned(in[k]);
    return rc;
}
