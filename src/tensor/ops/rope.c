/* rope.c -- rotary position embedding (RoPE, Su et al. 2021, "RoFormer"): q and k rotated by
 * their position, so that the score q_p . k_s depends on where the two tokens are only through
 * p - s (two vectors turned by angles a and b have the dot product of one turned by a - b).
 *
 * x [B,T,C] holds H heads of D = C/H channels; each head's D channels are D/2 pairs (2i, 2i+1).
 * The pair i of the token at position p = pos0 + t is turned by the angle p theta_i:
 *   theta_i = 10000^(-2i/D)                 (pair 0 turns fastest, one radian a position)
 * forward:  y[2i]   = x[2i] cos(p theta_i) - x[2i+1] sin(p theta_i)
 *           y[2i+1] = x[2i] sin(p theta_i) + x[2i+1] cos(p theta_i)
 * backward: a rotation's transpose is the rotation back (angle -p theta_i):
 *           dx[2i]   += dy[2i] cos + dy[2i+1] sin
 *           dx[2i+1] += -dy[2i] sin + dy[2i+1] cos
 * pos0 is 0 for a whole window; a KV cache's new position passes its index (cache->len).
 * One path: these plain loops are the kernels (fast/ has none for this op); the angles are
 * computed once a call, [T, D/2] of them, not once an element. */
#include <math.h>
#include "../ops.h"
#include "../alloc.h"
#include "../kernel.h"

#define ROPE_BASE 10000.0

// --- reference kernels ---

/* cs[(t * P + i) * 2 + 0, 1] = cos, sin of (pos0 + t) theta_i, P = D/2 pairs */
static void rope_angles(ag_real *cs, int T, int D, int pos0)
{
    int P = D / 2;
    for (int t = 0; t < T; t++)
        for (int i = 0; i < P; i++) {
            double angle = (pos0 + t) * pow(ROPE_BASE, -2.0 * i / D);
            cs[((size_t)t * P + i) * 2] = (ag_real)cos(angle);
            cs[((size_t)t * P + i) * 2 + 1] = (ag_real)sin(angle);
        }
}

/* x [B,T,C] -> y: each pair turned by its position's angle (cs: rope_angles of x's T) */
static void rope_forward(ag_real *y, const ag_real *x, const ag_real *cs, int B, int T, int C, int D)
{
    int P = D / 2;
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= AG_PAR_MIN)
    for (int r = 0; r < B * T; r++) {                   /* row r: the token at position r mod T */
        const ag_real *a = cs + (size_t)(r % T) * P * 2;
        for (int c = 0; c < C; c += 2) {               /* pair i = (c mod D) / 2 of its head */
            ag_real cos_a = a[(c % D)], sin_a = a[(c % D) + 1];
            const ag_real *xp = x + (size_t)r * C + c;
            ag_real *yp = y + (size_t)r * C + c;
            yp[0] = xp[0] * cos_a - xp[1] * sin_a;
            yp[1] = xp[0] * sin_a + xp[1] * cos_a;
        }
    }
}

/* dx += dy turned back by the same angle */
static void rope_backward(ag_real *dx, const ag_real *dy, const ag_real *cs, int B, int T, int C, int D)
{
    int P = D / 2;
#pragma omp parallel for schedule(static) if ((size_t)B * T * C >= AG_PAR_MIN)
    for (int r = 0; r < B * T; r++) {
        const ag_real *a = cs + (size_t)(r % T) * P * 2;
        for (int c = 0; c < C; c += 2) {
            ag_real cos_a = a[(c % D)], sin_a = a[(c % D) + 1];
            const ag_real *g = dy + (size_t)r * C + c;
            ag_real *d = dx + (size_t)r * C + c;
            d[0] += g[0] * cos_a + g[1] * sin_a;
            d[1] += -g[0] * sin_a + g[1] * cos_a;
        }
    }
}

// --- backward step ---

static ag_status rope_backward_step(ag_ctx *ctx, ag_node *n)
{
    /* forward: y = R(p theta) x per pair  =>  dx += R(-p theta) dy */
    ag_tensor *x = n->in[0];
    ag_real *dx = ag_grad(ctx, x);                                  // [B,T,C]
    if (!dx) return ag_ctx_status(ctx);
    int T = x->shape[1], C = x->shape[2], D = C / n->iparam[0];
    rope_backward(dx, n->out->grad, n->saved, x->shape[0], T, C, D);
    return AG_OK;
}

// --- op ---

static const ag_op rope_op = { .name = "rope", .backward = rope_backward_step };

ag_tensor *ag_rope(ag_ctx *ctx, ag_tensor *x, int H, int pos0)
{
    if (ag__skip(ctx, x, x)) return NULL;
    if (x->ndim != 3 || H <= 0 || x->shape[2] % H != 0 || (x->shape[2] / H) % 2 != 0 || pos0 < 0) {
        char sx[AG_SHAPE_BUF];
        ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_rope: cannot rotate %s in %d heads from position %d (need [B,T,C], "
                    "C %% H == 0, an even D = C/H, position >= 0)", ag_shape_str(x, sx, sizeof sx), H, pos0);
        return NULL;
    }
    int B = x->shape[0], T = x->shape[1], C = x->shape[2], D = C / H;
    ag_tensor *y = ag__tensor_uninit(ctx, 3, x->shape);                                // [B,T,C]
    ag_real *cs = ag_ctx_alloc(ctx, (size_t)T * D * sizeof(ag_real));  // [T,D/2,2]: cos, sin
    if (!y || !cs) return NULL;
    rope_angles(cs, T, D, pos0);
    rope_forward(y->data, x->data, cs, B, T, C, D);
    ag_node *n = ag_record(ctx, &rope_op, y, &x, 1);
    if (n) {
        n->saved = cs;
        n->iparam[0] = H;
    }
    return ag__done(ctx, y);
}
