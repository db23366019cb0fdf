/* clock.c -- ag_now_s, the one clock (see debug.h). */
#include <time.h>
#include "debug.h"

double ag_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
