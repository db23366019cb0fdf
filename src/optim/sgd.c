/* sgd.c -- stochastic gradient descent (MODEL.md):
 *
 *   p -= lr * g                                     (momentum 0, the default)
 *   buf = momentum * buf + g;  p -= lr * buf        (momentum > 0; buf is P->m, as PyTorch's SGD)
 *
 * One loop over the flat buffers of the ag_params. Cannot fail. */
#include "optim.h"

void ag_sgd_step(ag_params *P, double lr, double momentum)
{
    ag_real *p = P->data, *g = P->grad, *buf = P->m;
    for (size_t i = 0; i < P->total; i++) {
        double step = g[i];
        if (momentum > 0) {
            buf[i] = (ag_real)(momentum * buf[i] + g[i]);
            step = buf[i];
        }
        p[i] = (ag_real)(p[i] - lr * step);
    }
}
