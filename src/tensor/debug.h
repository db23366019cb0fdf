/* debug.h -- what the library offers for looking at a run rather than computing it.
 *
 * ag_now_s is THE clock of the project: profiling, char_lm's step times and ETA, its
 * data-parallel timings and the benchmarks all read it, so their figures agree. */
#ifndef AG_DEBUG_H
#define AG_DEBUG_H

/* Seconds on the monotonic clock (CLOCK_MONOTONIC: never jumps with the wall clock), from an
 * arbitrary start: only differences mean anything. Cannot fail. */
double ag_now_s(void);

#endif
