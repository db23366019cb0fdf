/* omp_spin.h -- how long OpenMP's idle threads spin, chosen before the program starts working.
 *
 * OpenMP reads its wait policy when the program loads. Its default spins ~300k iterations
 * before sleeping: fastest on an idle machine, but when another process wants a core the
 * spinning threads make a step several times slower. A bounded spin (GOMP_SPINCOUNT=10000,
 * tens of microseconds: long enough to catch the next op's parallel region) kept the idle speed
 * within 2% (make bench). Since the variable must be there at load time, the program re-runs
 * itself once with it set. This is speed machinery: nothing a learner needs to read main.c. */
#ifndef LM_OMP_SPIN_H
#define LM_OMP_SPIN_H

/* Call first thing in main. Unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT in the
 * environment; `make check-valgrind` sets GOMP_SPINCOUNT for this reason) or the program runs
 * under valgrind (whose /proc/self/exe is valgrind's tool, which cannot be exec'ed directly):
 * sets GOMP_SPINCOUNT=10000 and execs /proc/self/exe with argv, so it does not return. If the
 * exec fails, it returns and the program goes on with OpenMP's default. */
void lm_omp_bounded_spin(char **argv);

#endif
