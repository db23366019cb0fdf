/* kernels.c -- the kernel tables (kernel.h): which kernels a ctx's ops call, chosen once per
 * ctx. The reference table is each op's own entry (ag__<op>_reference, in ops/<op>.c); the
 * fast table is the same with the fast twins put in (fast/kernels.c). */
#include <stdlib.h>
#include "ctx_impl.h"

void ag__kernels_init(ag_kernels *K, ag_kernels_id id)
{
    *K = (ag_kernels){ .name = "reference",
                       .add = ag__add_reference,
                       .cross_entropy = ag__cross_entropy_reference,
                       .dropout = ag__dropout_reference,
                       .gelu = ag__gelu_reference,
                       .layernorm = ag__layernorm_reference,
                       .linear = ag__linear_reference,
                       .masked_fill = ag__masked_fill_reference,
                       .matmul = ag__matmul_reference,
                       .rmsnorm = ag__rmsnorm_reference,
                       .silu = ag__silu_reference,
                       .softmax = ag__softmax_reference,
                       .attention = NULL };
#ifndef AG_REFERENCE
    if (id == AG_KERNELS_FAST) ag__kernels_fast(K);
#else
    (void)id; /* a REFERENCE=1 library has no fast table */
#endif
}

const ag_kernels *ag__kernels(const ag_ctx *ctx) { return &ctx->kernels; }

void ag_ctx_set_kernels(ag_ctx *ctx, ag_kernels_id id) { ag__kernels_init(&ctx->kernels, id); }
ag_kernels_id ag_ctx_kernels(const ag_ctx *ctx)
{
    return strcmp(ctx->kernels.name, "fast") == 0 ? AG_KERNELS_FAST : AG_KERNELS_REFERENCE;
}
const char *ag_ctx_kernels_name(const ag_ctx *ctx) { return ctx->kernels.name; }

void ag_ctx_set_reference_kernels(ag_ctx *ctx, bool on)
{
    ag_ctx_set_kernels(ctx, on ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST);
}
bool ag_ctx_reference_kernels(const ag_ctx *ctx) { return ag_ctx_kernels(ctx) == AG_KERNELS_REFERENCE; }

ag_status ag_kernels_parse(const char *name, const char *what, ag_kernels_id *id, ag_error *err)
{
    if (name && strcmp(name, "fast") == 0) return *id = AG_KERNELS_FAST, AG_OK;
    if (name && strcmp(name, "reference") == 0) return *id = AG_KERNELS_REFERENCE, AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "%s%s: not a kernel table (reference or fast)", what, name ? name : "");
}

/* The one environment variable the library reads, as OpenMP reads OMP_NUM_THREADS: it lets
 * any program, a test binary included, run on either table without a flag of its own. */
ag_status ag_kernels_from_env(ag_kernels_id *id, ag_error *err)
{
    const char *s = getenv("AG_KERNELS");
    if (!s || !*s) return *id = AG_KERNELS_FAST, AG_OK;
    return ag_kernels_parse(s, "AG_KERNELS=", id, err);
}
