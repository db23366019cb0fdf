/* alloc_count.c -- see alloc_count.h: the --wrap'ed malloc, calloc, realloc and free. */
#include <malloc.h>
#include <stdbool.h>
#include <stdlib.h>
#include "alloc_count.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t k, size_t n);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

static bool counting;
static long long held, peak;

static void count(void *p, int sign)
{
    if (!counting || !p) return;
    held += sign * (long long)malloc_usable_size(p);
    if (held > peak) peak = held;
}

void *__wrap_malloc(size_t n)
{
    void *p = __real_malloc(n);
    count(p, +1);
    return p;
}

void *__wrap_calloc(size_t k, size_t n)
{
    void *p = __real_calloc(k, n);
    count(p, +1);
    return p;
}

/* The old block is uncounted before the call (a realloc that copies holds both for a moment:
 * that moment is not in the peak). NULL back: p was freed (n 0) or is still p's (failure). */
void *__wrap_realloc(void *p, size_t n)
{
    count(p, -1);
    void *q = __real_realloc(p, n);
    if (q) count(q, +1);
    else if (n != 0) count(p, +1);
    return q;
}

void __wrap_free(void *p)
{
    count(p, -1);
    __real_free(p);
}

void alloc_count_start(void)
{
    held = peak = 0;
    counting = true;
}

long long alloc_count_stop(long long *peak_out)
{
    counting = false;
    *peak_out = peak;
    return held;
}
