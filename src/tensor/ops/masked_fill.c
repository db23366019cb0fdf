/* masked_fill.c -- y = x where mask != 0, else a fill value; the causal mask and the
 * key-padding mask.
 *
 * The mask broadcasts as in PyTorch: its dims line up with x's last dims, and each one equals
 * x's or is 1 (that mask value then serves every index of x along the dim). Over scores
 * [B,H,T,T]: a causal mask [T,T] or [1,1,T,T], a key-padding mask [B,1,1,T], both combined
 * [B,1,T,T]. Write m(i) for the mask element that x's element i reads:
 * forward:  y[i] = m(i) != 0 ? x[i] : value
 * backward: dx[i] += m(i) != 0 ? dy[i] : 0       (a filled entry no longer depends on x)
 * With value = -inf before a softmax, a masked score gets exactly zero weight.
 * Both directions are the same select, one loop (masked_select). Fast kernel: fast/masked_fill.c
 * (contiguous mask blocks); tests/test_fast_ref_rows.c proves it equal. */
#include "../ops.h"
#include "../alloc.h"
#include "../debug.h"     /* AG_OP_MAY_OUTPUT_NEG_INF */
#include "../kernel.h"

/* x's shape padded on the left to 4 dims, n[4], and the mask's strides over it, ms[4]: 0 on a
 * dim where the mask has size 1 (one value repeated along it). False when the mask cannot
 * broadcast to x: more dims than x, or a dim that is neither x's nor 1. */
bool ag__broadcast_mask(const ag_tensor *x, const ag_tensor *mask, int n[AG_MAX_DIMS], size_t ms[AG_MAX_DIMS])
{
    if (mask->ndim > x->ndim) return false;
    size_t stride = 1; /* the mask's own row-major stride of dim d */
    for (int d = AG_MAX_DIMS - 1; d >= 0; d--) {
        int dx = d - (AG_MAX_DIMS - x->ndim), dm = d - (AG_MAX_DIMS - mask->ndim); /* < 0: padding */
        n[d] = dx >= 0 ? x->shape[dx] : 1;
        int m = dm >= 0 ? mask->shape[dm] : 1;
        if (m != n[d] && m != 1) return false;
        ms[d] = m == 1 ? 0 : stride;
        stride *= (size_t)m;
    }
    return true;
}

// --- reference kernel: the formulas above as one plain loop ---

/* the mask element of x[i0,i1,i2,i3] */
static inline size_t mask_at(const size_t *ms, int i0, int i1, int i2, int i3)
{
    return i0 * ms[0] + i1 * ms[1] + i2 * ms[2] + i3 * ms[3];
}

/* The forward and the backward are one select over x's elements [n0,n1,n2,n3], the mask read
 * through the strides ms (broadcast_mask):
 *   forward  (out y,  in x,  add false):  out[i]  = m(i) != 0 ? in[i] : value
 *   backward (out dx, in dy, add true):   out[i] += m(i) != 0 ? in[i] : 0      (value 0) */
static void masked_select(ag_real *out, const ag_real *in, const ag_real *mask, ag_real value, bool add,
                          const int *n, const size_t *ms)
{
    size_t N = (size_t)n[0] * n[1] * n[2] * n[3];
#pragma omp parallel for collapse(3) schedule(static) if (N >= AG_PAR_MIN)
    for (int i0 = 0; i0 < n[0]; i0++)
        for (int i1 = 0; i1 < n[1]; i1++)
            for (int i2 = 0; i2 < n[2]; i2++)
                for (int i3 = 0; i3 < n[3]; i3++) {
                    size_t i = (((size_t)i0 * n[1] + i1) * n[2] + i2) * n[3] + i3; /* x's flat index */
                    ag_real v = mask[mask_at(ms, i0, i1, i2, i3)] != 0 ? in[i] : value;
                    out[i] = add ? out[i] + v : v;
                }
}

// --- backward step ---

static ag_status masked_fill_backward(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = m ? x : value  =>  dx += m ? dy : 0 */
    ag_tensor *x = n->in[0], *mask = n->in[1];
    int shape[AG_MAX_DIMS];
    size_t ms[AG_MAX_DIMS];
    ag__broadcast_mask(x, mask, shape, ms); /* the op checked that it broadcasts */
    ag_real *dx = ag_grad(ctx, x);                                  // x's shape
    if (!dx) return ag_ctx_status(ctx);
    masked_select(dx, n->out->grad, mask->data, 0, true, shape, ms);
    return AG_OK;
}

// --- op ---

/* masked_fill writes -inf on purpose: --detect-anomaly must not call that a fault */
static const ag_op masked_fill_op = { .name = "masked_fill", .backward = masked_fill_backward,
                                      .flags = AG_OP_MAY_OUTPUT_NEG_INF };
const ag_masked_fill_kernels ag__masked_fill_reference = { masked_select, &masked_fill_op };  /* kernel.h's table */

ag_tensor *ag_masked_fill(ag_ctx *ctx, ag_tensor *x, ag_tensor *mask, ag_real value)
{
    if (ag__skip(ctx, x, mask)) return NULL;
    int shape[AG_MAX_DIMS];
    size_t ms[AG_MAX_DIMS];
    if (!ag__broadcast_mask(x, mask, shape, ms)) {
        char sx[AG_SHAPE_BUF], sm[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE,
                    "ag_masked_fill: mask %s cannot broadcast to x %s (lined up with x's last dims, each mask "
                    "dim must equal x's or be 1)",
                    ag_shape_str(mask, sm, sizeof sm), ag_shape_str(x, sx, sizeof sx));
        return NULL;
    }
    ag_tensor *y = ag__tensor_uninit(ctx, x->ndim, x->shape);                          // x's shape
    if (!y) return NULL;
    const ag_masked_fill_kernels *kern = &ag__kernels(ctx)->masked_fill;  /* reference or fast (kernel.h) */
    kern->forward(y->data, x->data, mask->data, value, false, shape, ms);
    /* the mask is never differentiated: only x is an input of the node that needs a grad */
    ag_tensor *in[2] = { x, mask };
    ag_record(ctx, kern->op, y, in, 2);
    return ag__done(ctx, y);
}

// --- masks ---

/* The kind of ag_causal_mask's tensors: they carry this name, and no other tensor does (the
 * pointer is compared, not the string), so they are known causal without reading T x T numbers. */
static const char causal_mask_name[] = "causal_mask";

ag_tensor *ag_causal_mask(ag_ctx *ctx, int T)
{
    if (ag_ctx_status(ctx) != AG_OK) return NULL;
    ag_tensor *m = ag_tensor_new2(ctx, T, T);                       // [T,T]
    if (!m) return NULL;
    for (int i = 0; i < T; i++)
        for (int j = 0; j <= i; j++) m->data[i * T + j] = 1; /* row i (a query) sees keys 0..i */
    m->name = causal_mask_name;
    return m;
}

bool ag_is_causal_mask(const ag_tensor *m, int T)
{
    return m && m->name == causal_mask_name && m->ndim == 2 && m->shape[0] == T && m->shape[1] == T;
}

ag_tensor *ag_key_padding_mask(ag_ctx *ctx, const ag_tensor *key_padding, const ag_tensor *mask)
{
    if (ag_ctx_status(ctx) != AG_OK || !key_padding) return NULL;
    int B = key_padding->shape[0], T = key_padding->shape[1];
    if (key_padding->ndim != 2 || (mask && (mask->ndim != 2 || mask->shape[0] != T || mask->shape[1] != T))) {
        char sk[AG_SHAPE_BUF], sm[AG_SHAPE_BUF] = "none";
        if (mask) ag_shape_str(mask, sm, sizeof sm);
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_key_padding_mask: key_padding %s, mask %s (need [B,T] and [T,T] or none)",
                    ag_shape_str(key_padding, sk, sizeof sk), sm);
        return NULL;
    }
    ag_tensor *m = ag_tensor_new4(ctx, B, 1, T, T);                 // [B,1,T,T] one per sequence, for every head
    if (!m) return NULL;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < T; i++)      /* query i */
            for (int j = 0; j < T; j++) { /* key j: a real token that the mask lets i see */
                bool real = key_padding->data[b * T + j] != 0, seen = !mask || mask->data[i * T + j] != 0;
                m->data[(b * T + i) * T + j] = real && seen;
            }
    return m;
}
