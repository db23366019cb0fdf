/* arena.c -- the step arena, a plain bump allocator (arena.h): each block is the next
 * AG_ARENA_ALIGN-aligned piece of the current chunk; when a chunk is full a bigger one is
 * added; a rewind hands everything back at once.
 *
 * A training step asks for the same blocks every time. After the first step the rewind leaves
 * one chunk of the step's high-water size, so every later step fits in it and allocates
 * nothing. Chunks come from ag_alloc_big (hugepage.c): big ones sit on 2 MiB pages.
 *
 * The sanitizer build (-DAG_ARENA_DEBUG, make asan) compiles arena_debug.c instead of the
 * allocation and rewind below: one malloc per block, so ASan sees an overflow that a bump
 * allocator would hide. */
#include <stdlib.h>
#include "arena.h"
#include "speed.h"

// --- both builds: what the chunk list holds, and letting it go ---

size_t ag__arena_capacity(const ag__arena *a)
{
    size_t bytes = 0;
    for (const ag__chunk *c = a->chunks; c; c = c->next) bytes += c->size;
    return bytes;
}

static void chunks_free(ag__chunk *c)
{
    while (c) {
        ag__chunk *next = c->next;
        free(c);
        c = next;
    }
}

void ag__arena_free(ag__arena *a) { chunks_free(a->chunks); }

#ifndef AG_ARENA_DEBUG
// --- the bump allocator ---

#define ARENA_MIN_CHUNK ((size_t)1 << 20)

/* a chunk of `size` usable bytes, its base aligned after the header */
static ag__chunk *chunk_new(ag__arena *a, size_t size)
{
    ag__chunk *c = ag_alloc_big(sizeof(ag__chunk) + size + AG_ARENA_ALIGN, false);
    if (!c) return NULL;
    a->mallocs++;
    c->next = NULL;
    c->size = size;
    c->used = 0;
    uintptr_t p = (uintptr_t)(c + 1);
    c->base = (unsigned char *)((p + AG_ARENA_ALIGN - 1) & ~(uintptr_t)(AG_ARENA_ALIGN - 1));
    return c;
}

/* a new chunk with room for `need`, at least twice the last one, at the end of the list */
static ag__chunk *chunk_append(ag__arena *a, size_t need)
{
    size_t last = a->cur ? a->cur->size : 0;
    size_t size = need > ARENA_MIN_CHUNK ? need : ARENA_MIN_CHUNK;
    if (size < 2 * last) size = 2 * last;
    ag__chunk *c = chunk_new(a, size);
    if (!c) return NULL;
    ag__chunk **end = &a->chunks;
    while (*end) end = &(*end)->next;
    *end = c;
    return c;
}

void *ag__arena_alloc(ag__arena *a, size_t bytes)
{
    size_t need = ag__arena_round(bytes);
    ag__chunk *c = a->cur;
    while (c && c->size - c->used < need) c = c->next;
    if (!c && !(c = chunk_append(a, need))) return NULL;
    a->cur = c;
    void *p = c->base + c->used;
    c->used += need;
    a->used += need;
    if (a->used > a->high_water) a->high_water = a->used;
    return p;
}

void ag__arena_rewind(ag__arena *a)
{
    if (a->chunks && a->chunks->next) { /* more than one chunk: one of the high-water size */
        size_t total = ag__arena_capacity(a);
        if (total < a->high_water) total = a->high_water;
        ag__chunk *one = chunk_new(a, total);
        if (one) {
            chunks_free(a->chunks);
            a->chunks = one;
        }
    }
    for (ag__chunk *c = a->chunks; c; c = c->next) c->used = 0;
    a->cur = a->chunks;
    a->used = 0;
}
#endif
