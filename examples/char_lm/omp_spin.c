/* omp_spin.c -- the re-exec with a bounded OpenMP spin (see omp_spin.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "omp_spin.h"

void lm_omp_bounded_spin(char **argv)
{
#ifdef __linux__   /* /proc/self/exe: none on macOS, where OpenMP keeps its default wait */
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    /* under valgrind /proc/self/exe is valgrind's tool, which cannot be exec'ed directly */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;
    if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
    execv("/proc/self/exe", argv); /* only returns on failure: go on with the default */
#else
    (void)argv;
#endif
}
