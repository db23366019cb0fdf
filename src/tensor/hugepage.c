/* hugepage.c -- ag_alloc_big (speed.h): big buffers on 2 MiB pages. The step arena's chunks
 * and the parameters' flat buffers (src/params/params.c) come from here. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "speed.h"

#define HUGE_PAGE ((size_t)2 << 20)

void *ag_alloc_big(size_t bytes, bool zero)
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
