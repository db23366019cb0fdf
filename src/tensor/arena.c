/* arena.c -- the step arena: memory for everything a step makes (tensors, tape nodes, saved
 * buffers, activation gradients), handed out by bumping a pointer and released all at once.
 *
 * Blocks are 64-byte aligned and come from chunks. ag_ctx_reset rewinds the arena; if a step
 * needed more than one chunk, the rewind replaces them by a single chunk of the high-water size,
 * so from the second step on a training loop allocates nothing.
 * With -DAG_ARENA_DEBUG (the ASan build) every block is its own malloc, so the sanitizer sees
 * an overflow that a bump allocator would hide. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "alloc.h"
#include "ctx_impl.h"

#define ARENA_ALIGN 64
#define ARENA_MIN_CHUNK ((size_t)1 << 20)
#define HUGE_PAGE ((size_t)2 << 20)

typedef struct chunk {
    struct chunk *next;
    size_t size;          /* usable bytes from base */
    size_t used;          /* bytes handed out from base since the last reset */
    unsigned char *base;  /* the first usable byte, ARENA_ALIGN aligned, after this header */
} chunk;

// --- big buffers ---

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

// --- chunks ---

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

void ag__arena_free(ag_ctx *ctx) { chunks_free(ctx->chunks); }

// --- allocation and reset ---

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

void ag__arena_rewind(ag_ctx *ctx)
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
}

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

// --- tensors in the arena ---

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
