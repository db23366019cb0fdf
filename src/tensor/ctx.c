/* ctx.c -- the step context: an arena for everything a step makes, the tape, grad mode and the
 * first error message.
 *
 * The arena hands out 64-byte aligned blocks by bumping a pointer through chunks. ag_ctx_reset
 * rewinds it; if a step needed more than one chunk, reset replaces them by a single chunk of
 * the high-water size, so from the second step on a training loop allocates nothing.
 * With -DAG_ARENA_DEBUG (the ASan build) every block is its own malloc, so the sanitizer sees
 * an overflow that a bump allocator would hide. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "alloc.h"
#include "tensor.h"

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)1 << 20)

typedef struct chunk {
    struct chunk *next;
    size_t size;      /* usable bytes after the header */
    size_t used;
    unsigned char *base;
} chunk;

/* a released gradient buffer, waiting in ag_ctx.free_grads for a gradient of the same size */
typedef struct free_block {
    struct free_block *next;
    size_t bytes;
} free_block;

struct ag_ctx {
    chunk *chunks;     /* first chunk; allocation walks forward from `cur` */
    chunk *cur;
    size_t used_total; /* bytes handed out since reset (including alignment padding) */
    size_t high_water;
    uint64_t chunk_mallocs;
    ag_node *tape;     /* the last node recorded; nodes link backwards through prev */
    size_t tape_nodes;
    bool grad_on;
    const char *scope;
    ag_profile *profile;   /* NULL unless benchmarking */
    bool detect_anomaly;
    bool recycle_grads;
    bool reference_kernels; /* run the plain kernels even where fast ones were built */
    free_block *free_grads; /* with recycle_grads: released gradient buffers, reused by size */
    ag_error err;           /* the first error since the last reset */
};

#define HUGE_PAGE ((size_t)2 << 20)

void *ag__alloc_big(size_t bytes, bool zero)
{
    if (bytes < HUGE_PAGE) return zero ? calloc(1, bytes) : malloc(bytes);
    void *p = NULL;
    if (posix_memalign(&p, HUGE_PAGE, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* a hint: failure is harmless */
#endif
    if (zero) memset(p, 0, bytes);
    return p;
}

#ifndef AG_ARENA_DEBUG /* the debug arena mallocs each block itself */
static chunk *chunk_new(ag_ctx *ctx, size_t size)
{
    chunk *c = ag__alloc_big(sizeof(chunk) + size + ARENA_ALIGN, false);
    if (!c) return NULL;
    ctx->chunk_mallocs++;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    uintptr_t p = (uintptr_t)(c + 1);
    c->base = (unsigned char *)((p + ARENA_ALIGN - 1) & ~(uintptr_t)(ARENA_ALIGN - 1));
    return c;
}
#endif

static void chunks_free(chunk *c)
{
    while (c) {
        chunk *next = c->next;
        free(c);
        c = next;
    }
}

ag_ctx *ag_ctx_new(void)
{
    ag_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) return NULL;
    ctx->grad_on = true;
    return ctx;
}

void ag_ctx_free(ag_ctx *ctx)
{
    if (!ctx) return;
    chunks_free(ctx->chunks);
    free(ctx);
}

void *ag_ctx_alloc(ag_ctx *ctx, size_t bytes)
{
    size_t need = (bytes + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need == 0) need = ARENA_ALIGN;
#ifdef AG_ARENA_DEBUG
    /* one chunk per block: exactly `bytes` usable, so ASan flags a write one past the end */
    chunk *c = malloc(sizeof(chunk) + bytes);
    if (!c) goto oom;
    ctx->chunk_mallocs++;
    c->size = bytes;
    c->used = bytes;
    c->base = (unsigned char *)(c + 1); /* malloc alignment (16) is enough for ag_real */
    c->next = ctx->chunks;
    ctx->chunks = c;
    ctx->used_total += need;
    if (ctx->used_total > ctx->high_water) ctx->high_water = ctx->used_total;
    return c->base;
#else
    chunk *c = ctx->cur;
    while (c && c->size - c->used < need) c = c->next;
    if (!c) {
        size_t last = ctx->cur ? ctx->cur->size : 0;
        size_t size = need > ARENA_MIN_CHUNK ? need : ARENA_MIN_CHUNK;
        if (size < 2 * last) size = 2 * last;
        c = chunk_new(ctx, size);
        if (!c) goto oom;
        /* append at the end of the list */
        if (!ctx->chunks) ctx->chunks = c;
        else {
            chunk *t = ctx->chunks;
            while (t->next) t = t->next;
            t->next = c;
        }
    }
    ctx->cur = c;
    void *p = c->base + c->used;
    c->used += need;
    ctx->used_total += need;
    if (ctx->used_total > ctx->high_water) ctx->high_water = ctx->used_total;
    return p;
#endif
oom:
    ag_ctx_fail(ctx, AG_ERR_NOMEM, "out of memory allocating %zu bytes in the step arena", bytes);
    return NULL;
}

void ag_ctx_reset(ag_ctx *ctx)
{
#ifdef AG_ARENA_DEBUG
    chunks_free(ctx->chunks);
    ctx->chunks = NULL;
#else
    if (ctx->chunks && ctx->chunks->next) {
        /* more than one chunk was needed: replace them by one of the high-water size so the
         * next step fits in a single chunk and allocates nothing */
        size_t total = 0;
        for (chunk *c = ctx->chunks; c; c = c->next) total += c->size;
        if (total < ctx->high_water) total = ctx->high_water;
        chunk *one = chunk_new(ctx, total);
        if (one) {
            chunks_free(ctx->chunks);
            ctx->chunks = one;
        }
    }
    for (chunk *c = ctx->chunks; c; c = c->next) c->used = 0;
#endif
    ctx->cur = ctx->chunks;
    ctx->used_total = 0;
    ctx->tape = NULL;
    ctx->tape_nodes = 0;
    ctx->scope = NULL;
    ctx->free_grads = NULL; /* their memory went back with the arena */
    ag_ctx_clear_error(ctx);
}

void ag_ctx_set_grad(ag_ctx *ctx, bool on) { ctx->grad_on = on; }
void ag_ctx_set_detect_anomaly(ag_ctx *ctx, bool on) { ctx->detect_anomaly = on; }
void ag_ctx_set_recycle_grads(ag_ctx *ctx, bool on) { ctx->recycle_grads = on; }
void ag_ctx_set_reference_kernels(ag_ctx *ctx, bool on) { ctx->reference_kernels = on; }
bool ag_ctx_reference_kernels(const ag_ctx *ctx) { return ctx->reference_kernels; }
bool ag_ctx_grad_enabled(const ag_ctx *ctx) { return ctx->grad_on; }
void ag_ctx_set_scope(ag_ctx *ctx, const char *scope) { ctx->scope = scope; }
const char *ag_ctx_scope(const ag_ctx *ctx) { return ctx->scope; }

const char *ag_ctx_error(const ag_ctx *ctx) { return ctx->err.status ? ctx->err.msg : NULL; }
ag_status ag_ctx_status(const ag_ctx *ctx) { return ctx->err.status; }

ag_status ag_ctx_fail(ag_ctx *ctx, ag_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag_vseterr(&ctx->err, s, fmt, ap);
    va_end(ap);
    return s;
}

void ag_ctx_clear_error(ag_ctx *ctx) { ag_error_clear(&ctx->err); }

ag_ctx_stats ag_ctx_get_stats(const ag_ctx *ctx)
{
    ag_ctx_stats s = {0};
    for (chunk *c = ctx->chunks; c; c = c->next) s.arena_capacity += c->size;
    s.arena_used = ctx->used_total;
    s.arena_high_water = ctx->high_water;
    s.chunk_mallocs = ctx->chunk_mallocs;
    s.tape_nodes = ctx->tape_nodes;
    return s;
}

/* ---------- tensors in the arena ---------- */

ag_tensor *ag__tensor_uninit(ag_ctx *ctx, int ndim, const int *shape)
{
    if (ndim < 1 || ndim > AG_MAX_DIMS)
        return ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_tensor_new: %d dims (1..%d allowed)", ndim, AG_MAX_DIMS), NULL;
    size_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0)
            return ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_tensor_new: dim %d is %d (must be > 0)", i, shape[i]), NULL;
        n *= (size_t)shape[i];
    }
    ag_tensor *t = ag_ctx_alloc(ctx, sizeof(ag_tensor));
    ag_real *data = t ? ag_ctx_alloc(ctx, n * sizeof(ag_real)) : NULL;
    if (!data) return NULL;
    memset(t, 0, sizeof *t);
    ag_tensor_set_shape(t, ndim, shape);
    t->data = data;
    t->in_arena = true;
    return t;
}

ag_tensor *ag_tensor_new(ag_ctx *ctx, int ndim, const int *shape)
{
    ag_tensor *t = ag__tensor_uninit(ctx, ndim, shape);
    if (t) memset(t->data, 0, ag_numel(t) * sizeof(ag_real));
    return t;
}

ag_tensor *ag_tensor_new1(ag_ctx *ctx, int d0) { int s[1] = {d0}; return ag_tensor_new(ctx, 1, s); }
ag_tensor *ag_tensor_new2(ag_ctx *ctx, int d0, int d1) { int s[2] = {d0, d1}; return ag_tensor_new(ctx, 2, s); }
ag_tensor *ag_tensor_new3(ag_ctx *ctx, int d0, int d1, int d2) { int s[3] = {d0, d1, d2}; return ag_tensor_new(ctx, 3, s); }
ag_tensor *ag_tensor_new4(ag_ctx *ctx, int d0, int d1, int d2, int d3)
{
    int s[4] = {d0, d1, d2, d3};
    return ag_tensor_new(ctx, 4, s);
}

ag_tensor *ag_tensor_like(ag_ctx *ctx, const ag_tensor *x)
{
    if (!x) return NULL;
    return ag_tensor_new(ctx, x->ndim, x->shape);
}

ag_tensor *ag_tensor_leaf(ag_ctx *ctx, int ndim, const int *shape)
{
    ag_tensor *t = ag_tensor_new(ctx, ndim, shape);
    if (!t) return NULL;
    t->requires_grad = true;
    if (!ag_grad(ctx, t)) return NULL;
    return t;
}

/* ---------- profiling ---------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ag_ctx_set_profile(ag_ctx *ctx, ag_profile *p) { ctx->profile = p; }

void ag_ctx_profile_mark(ag_ctx *ctx)
{
    if (ctx->profile) ctx->profile->last_mark = now_s();
}

/* the profile slot of op, or NULL when the table is full */
static int profile_slot(ag_profile *p, const ag_op *op)
{
    for (int i = 0; i < p->n; i++)
        if (p->ops[i].op == op) return i;
    if (p->n == AG_PROFILE_MAX_OPS) return -1;
    memset(&p->ops[p->n], 0, sizeof p->ops[0]);
    p->ops[p->n].op = op;
    return p->n++;
}

/* ---------- anomaly detection ---------- */

/* the index of the first NaN or Inf in x[0..n), or -1; -inf passes where allow_neg_inf */
static long first_nonfinite(const ag_real *x, size_t n, bool allow_neg_inf)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]) && !(allow_neg_inf && x[i] == -INFINITY)) return (long)i;
    return -1;
}

static void report_nonfinite(ag_ctx *ctx, const char *what, const ag_op *op, const ag_tensor *t,
                             const char *scope, long i, ag_real v)
{
    char b[64];
    ag_ctx_fail(ctx, AG_ERR_NONFINITE, "non-finite %s of %s %s in %s (element %ld is %g)", what, op->name,
                ag_shape_str(t, b, sizeof b), scope ? scope : "(no layer)", i, (double)v);
}

/* ---------- the tape ---------- */

ag_node *ag_record(ag_ctx *ctx, const ag_op *op, ag_tensor *y, ag_tensor *const *in, int n_in)
{
    if (!ctx->grad_on) return NULL;
    bool any = false;
    for (int i = 0; i < n_in; i++) any = any || (in[i] && in[i]->requires_grad);
    if (!any) return NULL;
    ag_node *n = ag_ctx_alloc(ctx, sizeof(ag_node));
    if (!n) return NULL;
    memset(n, 0, sizeof *n);
    n->op = op;
    n->out = y;
    n->n_in = n_in;
    for (int i = 0; i < n_in; i++) n->in[i] = in[i];
    n->scope = ctx->scope;
    n->prev = ctx->tape;
    ctx->tape = n;
    ctx->tape_nodes++;
    y->requires_grad = true;
    if (ctx->detect_anomaly) {
        /* masked_fill writes -inf on purpose; anything else non-finite is a fault */
        long i = first_nonfinite(y->data, ag_numel(y), strcmp(op->name, "masked_fill") == 0);
        if (i >= 0) report_nonfinite(ctx, "output", op, y, n->scope, i, y->data[i]);
    }
    if (ctx->profile) {
        double t = now_s();
        int i = profile_slot(ctx->profile, op);
        if (i >= 0) {
            ctx->profile->ops[i].fwd_s += t - ctx->profile->last_mark;
            ctx->profile->ops[i].fwd_calls++;
        }
        ctx->profile->last_mark = t;
    }
    return n;
}

/* memory for a new gradient of `bytes`: a released buffer of that size if there is one (it is
 * likely still in cache), else fresh arena memory. Not zeroed. */
static ag_real *grad_alloc(ag_ctx *ctx, size_t bytes)
{
    for (free_block **p = &ctx->free_grads; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            free_block *b = *p;
            *p = b->next;
            return (ag_real *)(void *)b;
        }
    return ag_ctx_alloc(ctx, bytes);
}

/* With recycle_grads: the backward of node n has run, so nothing reads n->out's gradient any
 * more; its buffer goes to free_grads. Not when an input shares it (a reshape view's gradient
 * is its input's). */
static void grad_release(ag_ctx *ctx, ag_node *n)
{
    ag_tensor *y = n->out;
    for (int k = 0; k < n->n_in; k++)
        if (n->in[k] && n->in[k]->grad == y->grad) return;
#ifdef AG_ARENA_DEBUG
    /* the sanitizer build does not reuse: it poisons, so a stale read shows up as NaN */
    (void)ctx;
    for (size_t i = 0; i < ag_numel(y); i++) y->grad[i] = (ag_real)NAN;
#else
    size_t bytes = ag_numel(y) * sizeof(ag_real);
    if (bytes >= sizeof(free_block)) {
        free_block *b = (free_block *)(void *)y->grad;
        b->bytes = bytes;
        b->next = ctx->free_grads;
        ctx->free_grads = b;
    }
#endif
    y->grad = NULL;
}

ag_real *ag_grad(ag_ctx *ctx, ag_tensor *t)
{
    if (t->grad) return t->grad;
    size_t n = ag_numel(t);
    t->grad = grad_alloc(ctx, n * sizeof(ag_real));
    if (t->grad) memset(t->grad, 0, n * sizeof(ag_real));
    return t->grad;
}

ag_real *ag__grad_into(ag_ctx *ctx, ag_tensor *t, bool *accumulate)
{
    *accumulate = t->grad != NULL;
    if (!t->grad) t->grad = grad_alloc(ctx, ag_numel(t) * sizeof(ag_real)); /* not zeroed */
    return t->grad;
}

/* Walks the tape from the newest node to the oldest. Ops append in execution order, so this is
 * already a reverse topological order: every consumer of a tensor runs its backward before the
 * tensor's producer does, and the producer sees the fully accumulated gradient. */
static ag_status run_tape(ag_ctx *ctx)
{
    for (ag_node *n = ctx->tape; n; n = n->prev) {
        if (!n->out->grad) continue; /* nothing flowed back into this output */
        double t0 = ctx->profile ? now_s() : 0;
        ag_status s = n->op->backward(ctx, n);
        if (s != AG_OK) return s;
        for (int k = 0; ctx->detect_anomaly && k < n->n_in; k++) {
            ag_tensor *in = n->in[k];
            long i = in && in->grad ? first_nonfinite(in->grad, ag_numel(in), false) : -1;
            if (i >= 0) {
                report_nonfinite(ctx, "gradient from the backward", n->op, in, n->scope, i, in->grad[i]);
                return ctx->err.status;
            }
        }
        if (ctx->profile) {
            int i = profile_slot(ctx->profile, n->op);
            if (i >= 0) {
                ctx->profile->ops[i].bwd_s += now_s() - t0;
                ctx->profile->ops[i].bwd_calls++;
            }
        }
        if (ctx->recycle_grads) grad_release(ctx, n);
    }
    return AG_OK;
}

ag_status ag_backward_from(ag_ctx *ctx, ag_tensor *y, const ag_real *dy)
{
    if (ctx->err.status) return ctx->err.status;
    if (!y) return ag_ctx_fail(ctx, AG_ERR_ARG, "ag_backward: no output tensor");
    if (!y->requires_grad)
        return ag_ctx_fail(ctx, AG_ERR_ARG, "ag_backward: the output does not depend on anything that requires grad");
    ag_real *g = ag_grad(ctx, y);
    if (!g) return ctx->err.status;
    size_t n = ag_numel(y);
    for (size_t i = 0; i < n; i++) g[i] += dy[i];
    return run_tape(ctx);
}

ag_status ag_backward(ag_ctx *ctx, ag_tensor *loss)
{
    if (ctx->err.status) return ctx->err.status;
    if (!loss) return ag_ctx_fail(ctx, AG_ERR_ARG, "ag_backward: no loss tensor");
    if (ag_numel(loss) != 1) {
        char b[64];
        return ag_ctx_fail(ctx, AG_ERR_SHAPE, "ag_backward: loss must be a scalar, got %s",
                           ag_shape_str(loss, b, sizeof b));
    }
    const ag_real one = 1;
    return ag_backward_from(ctx, loss, &one);
}

static void collect(const ag_node *n, void (*fn)(const ag_node *, void *), void *user)
{
    /* recursion depth = tape length is fine for a few thousand nodes, but be safe: iterate */
    size_t count = 0;
    for (const ag_node *m = n; m; m = m->prev) count++;
    for (size_t k = count; k > 0; k--) {
        const ag_node *m = n;
        for (size_t j = 1; j < k; j++) m = m->prev;
        fn(m, user);
    }
}

void ag_tape_foreach(const ag_ctx *ctx, void (*fn)(const ag_node *n, void *user), void *user)
{
    collect(ctx->tape, fn, user);
}
