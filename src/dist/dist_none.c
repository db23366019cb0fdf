/* dist_none.c -- dist.h for one process: rank 0 of 1. A sum or a maximum over one rank is its
 * own buffer, a broadcast from itself is a copy onto itself, so every call succeeds and does
 * nothing (but a gather, which copies this rank's bytes into place). build/char_lm and the tests link this one: no MPI. */
#include <string.h>
#include "dist.h"

struct ag_dist {
    int unused;
};

ag_status ag_dist_init(ag_dist **d, double timeout, ag_error *err)
{
    (void)timeout, (void)err;
    static ag_dist alone;
    *d = &alone;
    return AG_OK;
}

void ag_dist_end(ag_dist *d, bool ok)
{
    (void)d;
    (void)ok;
}

void ag_dist_after_rank0(const ag_dist *d)
{
    (void)d;   /* alone: no rank 0 to wait for */
}

void ag_dist_set_timeout(ag_dist *d, double seconds)
{
    (void)d, (void)seconds;   /* nothing to wait for */
}

int ag_dist_voice(const ag_dist *d)
{
    (void)d;
    return -1;
}

int ag_dist_rank(const ag_dist *d)
{
    (void)d;
    return 0;
}

int ag_dist_size(const ag_dist *d)
{
    (void)d;
    return 1;
}

const char *ag_dist_backend(void) { return "none"; }

ag_status ag_dist_allreduce(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_dist_op op, ag_error *err)
{
    (void)d, (void)buf, (void)n, (void)type, (void)op, (void)err;
    return AG_OK;
}

ag_status ag_dist_allreduce_start(ag_dist *d, void *buf, size_t n, ag_dist_type type, ag_error *err)
{
    (void)d, (void)buf, (void)n, (void)type, (void)err;
    return AG_OK;
}

ag_status ag_dist_progress(ag_dist *d, ag_error *err)
{
    (void)d, (void)err;
    return AG_OK;
}

ag_status ag_dist_wait(ag_dist *d, ag_error *err)
{
    (void)d, (void)err;
    return AG_OK;
}

ag_status ag_dist_bcast(ag_dist *d, void *buf, size_t bytes, int root, ag_error *err)
{
    (void)d, (void)buf, (void)bytes, (void)root, (void)err;
    return AG_OK;
}

ag_status ag_dist_allgather(ag_dist *d, const void *mine, void *all, size_t bytes, ag_error *err)
{
    (void)d, (void)err;
    memcpy(all, mine, bytes);   /* rank 0's share is all of it */
    return AG_OK;
}

ag_status ag_dist_barrier(ag_dist *d, ag_error *err)
{
    (void)d, (void)err;
    return AG_OK;
}
