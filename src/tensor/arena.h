/* arena.h -- a bump allocator: memory handed out by moving a pointer forward, all of it taken
 * back at once by a rewind. The step context's memory (ctx.c). Not installed, not part of the
 * API. */
#ifndef AG_ARENA_H
#define AG_ARENA_H

#include <stddef.h>
#include <stdint.h>

/* a block of arena memory: this header, then `size` usable bytes from base */
typedef struct ag__chunk {
    struct ag__chunk *next;
    size_t size;          /* usable bytes from base */
    size_t used;          /* bytes handed out from base since the last rewind */
    unsigned char *base;  /* the first usable byte, after this header */
} ag__chunk;

typedef struct {
    ag__chunk *chunks;    /* in allocation order; NULL before the first allocation */
    ag__chunk *cur;       /* the chunk allocation tries first; earlier ones are full */
    size_t used;          /* bytes handed out since the last rewind, alignment padding included */
    size_t high_water;    /* the largest `used` ever */
    uint64_t mallocs;     /* chunks allocated, ever (0 more after a training loop's first step) */
} ag__arena;

#define AG_ARENA_ALIGN 64

/* what a block of `bytes` takes: bytes rounded up to AG_ARENA_ALIGN, and at least that */
static inline size_t ag__arena_round(size_t bytes)
{
    size_t need = (bytes + AG_ARENA_ALIGN - 1) & ~(size_t)(AG_ARENA_ALIGN - 1);
    return need ? need : AG_ARENA_ALIGN;
}

/* A block of `bytes`, AG_ARENA_ALIGN-aligned, valid until the next rewind. NULL when out of
 * memory. */
void *ag__arena_alloc(ag__arena *a, size_t bytes);
/* Makes every block handed out since the last rewind free again, keeping the memory. If more
 * than one chunk was needed, they become one chunk of the high-water size, so the next step
 * fits in it and allocates nothing. Cannot fail. */
void ag__arena_rewind(ag__arena *a);
/* Frees every chunk. Cannot fail. */
void ag__arena_free(ag__arena *a);
/* Bytes reserved in chunks. */
size_t ag__arena_capacity(const ag__arena *a);

#endif
