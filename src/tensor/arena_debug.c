/* arena_debug.c -- the step arena of the sanitizer build (-DAG_ARENA_DEBUG, make asan): the
 * same calls as arena.c's bump allocator, but every block is its own malloc of exactly the
 * bytes asked for, so ASan flags a write one past the end, and a rewind frees them all, so a
 * block read after ag_ctx_reset is a use-after-free. Compiled to nothing in other builds. */
#ifdef AG_ARENA_DEBUG
#include <stdlib.h>
#include "arena.h"

void *ag__arena_alloc(ag__arena *a, size_t bytes)
{
    ag__chunk *c = malloc(sizeof(ag__chunk) + bytes);
    if (!c) return NULL;
    a->mallocs++;
    c->size = bytes;
    c->used = bytes;
    c->base = (unsigned char *)(c + 1); /* malloc alignment (16) is enough for ag_real */
    c->next = a->chunks;
    a->chunks = c;
    a->used += ag__arena_round(bytes);           /* counted as the bump allocator would */
    if (a->used > a->high_water) a->high_water = a->used;
    return c->base;
}

void ag__arena_rewind(ag__arena *a)
{
    ag__arena_free(a);
    a->chunks = NULL;
    a->cur = NULL;
    a->used = 0;
}
#endif
