/* alloc_count.h -- the heap the code under test holds, in bytes, and its peak: the test
 * programs are linked with -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free (see the
 * Makefile), so every call from our own objects (the library, char_lm, the tests) passes
 * through here; libc's and other libraries' inner allocations (strdup, jansson) do not.
 *
 * Between alloc_count_start and alloc_count_stop (one thread) each block is counted at its
 * malloc_usable_size when allocated and uncounted when freed. A block freed there that was
 * allocated before the start is uncounted too, so measure code that frees only its own
 * blocks (ag_corpus_load does). Outside that window the wrappers only pass the call on. */
#ifndef TESTS_ALLOC_COUNT_H
#define TESTS_ALLOC_COUNT_H

#include <stddef.h>

void alloc_count_start(void);
/* Ends the count: *peak, the most bytes held at once since the start, and returns the bytes
 * still held (both counted from 0 at the start; held may be below 0 as said above). */
long long alloc_count_stop(long long *peak);

#endif
