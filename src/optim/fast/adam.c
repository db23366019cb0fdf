/* fast/adam.c -- the fast twin of adam.c's AdamW loop (adam.c has the formulas and the
 * reference loop this must equal, bit for bit).
 *
 * Two things make it fast: one parallel region for the whole model, each thread taking its
 * share of every parameter, so there is no barrier between parameters (a model has dozens, many
 * of them small); and the element loop compiled for plain x86-64, AVX2 and AVX-512 (AG_TARGETS,
 * fast/loops.h), the widest the CPU runs picked at load: AVX-512's is 2.5x the plain one here.
 * An element's update reads nothing but its own p, g, m and v, and no target fuses a
 * multiply-add, so every split and every target gives adam.c's bits (tests/test_optim.c,
 * tests/test_fast_targets.c). Not compiled by `make REFERENCE=1`. */
#include <omp.h>
#include "adam.h"
#include "loops.h"

/* adam.c's adam_update, with its coefficients in locals so that every target vectorizes */
static inline __attribute__((always_inline)) void update(ag_real *p, const ag_real *g, ag_real *m, ag_real *v,
                                                         size_t n, const adam_coef *k)
{
    const ag_real keep = k->keep, l2 = k->l2, b1 = k->b1, b2 = k->b2, a1 = k->a1, a2 = k->a2;
    const ag_real step = k->step, inv_sqrt_bc2 = k->inv_sqrt_bc2, eps = k->eps, gs = k->gs;
    for (size_t i = 0; i < n; i++) {
        ag_real gi = g[i] * gs + l2 * p[i];
        ag_real pi = keep * p[i];
        ag_real mi = b1 * m[i] + a1 * gi;
        ag_real vi = b2 * v[i] + a2 * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step * mi / (AG_SQRT(vi) * inv_sqrt_bc2 + eps);
    }
}

AG_TARGETS(ag__adam_update, update,
           (ag_real *p, const ag_real *g, ag_real *m, ag_real *v, size_t n, const adam_coef *k),
           (p, g, m, v, n, k))

bool ag__adam_fast(ag_params *P, const adam_coef k[2])
{
    if (P->total <= AG_ADAM_FAST_MIN) return false;
    void (*run)(ag_real *, const ag_real *, ag_real *, ag_real *, size_t, const adam_coef *) =
        AG_PICK(ag__adam_update);
#pragma omp parallel
    {
        int part = omp_get_thread_num(), n_parts = omp_get_num_threads();
        for (int e = 0; e < P->n; e++) {
            const ag_param_entry *E = &P->entries[e];
            size_t n = ag_numel(E->t), i0 = n * part / n_parts, i1 = n * (part + 1) / n_parts;
            size_t o = E->offset + i0;
            run(P->data + o, P->grad + o, P->m + o, P->v + o, i1 - i0, &k[E->decay]);
        }
    }
    return true;
}
