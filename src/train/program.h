/* program.h -- what a training program's main does around the library (issue 31): its one
 * error line and exit code, its threads, its place in a job that mpirun (or srun) started, its
 * stop signals and their exit codes, the pictures a run drew. Unlike the rest of src/train
 * these print, under the program's name (ag_train_name: "char_lm: error: ..."), to stderr; none
 * exits. char_lm and reverse call them (examples/).
 *
 *   ag_exit_code, ag_say_error    the exit code of a status; one error line, escaped
 *   ag_say_error_once, ag_say_rank_error
 *                                 the line of an error every rank of a job meets alike, said by
 *                                 rank 0 alone; a rank's own, "rank R: ..."
 *   ag_leave_run                  a rank's way out of a run that failed or a signal stopped
 *   ag_launcher_rank, ag_launched_alone, ag_refuse_launched_alone
 *                                 this process's rank by the launcher's word; a program without
 *                                 MPI started as one of several processes, and its refusal
 *   ag_threads_default, ag_threads_capped, ag_threads_warn_bound
 *                                 --threads or 2; --threads above the cores; a rank bound to
 *                                 fewer cores than its threads
 *   ag_stop_catch, ag_stop_flag, ag_stopped_code
 *                                 SIGINT, SIGTERM, SIGHUP and the checkpoint signals into one
 *                                 flag; the exit code of a run they stopped
 *   ag_run_pictures, ag_say_pictures, ag_flushed
 *                                 the pictures a run wrote, said; a FILE's output out of the process
 *   ag_omp_bounded_spin           OpenMP's idle threads spinning briefly, before the program works */
#ifndef AG_PROGRAM_H
#define AG_PROGRAM_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include "../dist/dist.h"
#include "../tensor/tensor.h"

/* EX_TEMPFAIL of sysexits.h, "try again later": the exit of a run stopped by its checkpoint
 * signal after a checkpoint (a batch system's pre-emption, which a job script requeues). */
#define AG_EXIT_REQUEUE 75

/* 0 for AG_OK, 2 for AG_ERR_ARG (a usage error), 1 for any other status. */
int ag_exit_code(ag_status s);
/* "<program>: <lead><e->msg>" and a newline on stderr in one write (under mpirun another
 * rank's output cannot cut it), control bytes in the message written as \n or \xNN: a path or
 * a name read from a file cannot break the line. lead: "error: " (char_lm), "" (reverse).
 * Returns ag_exit_code(s). */
int ag_say_error(const char *lead, ag_status s, const ag_error *e);
/* ag_say_error for an error every process of a launcher's job meets alike (the command line),
 * before the job is joined: said by rank 0 (or a process outside a job) at once; another rank
 * waits up to 5 s first, since mpirun ends the job at the first non-zero exit and must not end
 * it before rank 0's line is out; rank 0's exit ends the wait, and a rank still there says its
 * own error as "rank R: ..." (one rank 0 did not meet). Returns ag_exit_code(s). */
int ag_say_error_once(const char *lead, ag_status s, const ag_error *e);
/* The line of a failed rank of job d: rank 0 says it; another rank says "rank R: ..." unless
 * the error is `alike` on every rank (rank 0 says it) or ag_dist_voice names another rank (a
 * wait that several ranks saw run out). A program without MPI that mpirun started several
 * times (ag_launched_alone): ag_say_error_once. Returns ag_exit_code(s). */
int ag_say_rank_error(const ag_dist *d, const char *lead, ag_status s, const ag_error *e, bool alike);

/* A rank's way out of a run that failed (s) or that a signal stopped after its checkpoint (s
 * AG_OK, stop_signal): the error said (ag_say_rank_error with alike), and when it is alike,
 * the ranks meet first so that none leaves before rank 0 said it; after a stop they meet once
 * every rank is past the checkpoint (a failed meeting said, as an error). Then ag_dist_end(d,
 * false): no MPI_Finalize, which after Ctrl-C on mpirun would wait for mpirun, which waits to
 * kill the job (docs/distributed.md). Returns ag_exit_code(s), or ag_stopped_code(stop_signal). */
int ag_leave_run(ag_dist *d, const char *lead, ag_status s, const ag_error *e, bool alike, int stop_signal);

/* This process's rank in a job its launcher started (OMPI_COMM_WORLD_RANK, PMIX_RANK,
 * PMI_RANK), or -1: before MPI is joined only the launcher's word says so. */
int ag_launcher_rank(void);
/* d is this process alone, but its launcher started several (OMPI_COMM_WORLD_SIZE or
 * PMI_SIZE above 1): a program built without MPI, whose processes would each run on their own. */
bool ag_launched_alone(const ag_dist *d);
/* AG_ERR_ARG when ag_launched_alone(d): "this <program> has no MPI, so under mpirun each process
 * would train on its own; run <mpi_build>" (NULL: "its MPI build"); else AG_OK. ag_train_run
 * checks it before DIR is made; a program may earlier (char_lm, before its recipe probe). */
ag_status ag_refuse_launched_alone(const ag_dist *d, const char *program, const char *mpi_build, ag_error *err);

/* ag_threads_init(threads), or for threads <= 0 two threads, one on a machine of one core. */
void ag_threads_default(int threads);
/* --threads asked, at most the machine's cores: above them, the cores, with a warning on
 * stderr (more threads than cores only wait for each other at every parallel loop). On several
 * ranks asked stays: hosts may differ. */
int ag_threads_capped(int asked, const ag_dist *d);
/* On rank 0 of a job (or under mpirun), a warning on stderr when the launcher bound this
 * process to fewer cores than threads (mpirun binds a rank to one core unless told otherwise).
 * Linux only (sched_getaffinity); elsewhere nothing. */
void ag_threads_warn_bound(const ag_dist *d, int threads);

/* From now on SIGINT, SIGTERM and SIGHUP set the stop flag to their number; with checkpoint,
 * SIGUSR1 and also (a program's --checkpoint-signal; 0: none more) set it to SIGUSR1, the
 * checkpoint signal. A hung gnuplot is killed at a stop too (ag_plot_set_stop). Returns the
 * flag (ag_stop_flag), for ag_train_opts.stop. */
const volatile sig_atomic_t *ag_stop_catch(bool checkpoint, int also);
/* The stop flag: 0 until a caught signal; never NULL. */
const volatile sig_atomic_t *ag_stop_flag(void);
/* The exit code of a run that signal sig stopped: 128 + sig, as a shell reports it, or
 * AG_EXIT_REQUEUE for the checkpoint signal (SIGUSR1). */
int ag_stopped_code(int sig);

/* Of names[0..n), those of files in dir modified at `since` or later (this run's pictures),
 * in order into shown (n + 1 entries, NULL-terminated). Returns how many. */
size_t ag_run_pictures(const char *dir, const char *const *names, size_t n, time_t since, const char **shown);
/* Those pictures of names (NULL-terminated, at most 16) on out, after a blank line, one
 * "picture: <dir>/<name>" line each: a learner told of loss.png alone never opened the rest. */
void ag_say_pictures(FILE *out, const char *dir, const char *const *names, time_t since);
/* What was written to out is out of the process: else AG_ERR_IO "<name>: write failed: ..."
 * (a full disk, a closed pipe: an error now, not minutes of writing into nothing). */
ag_status ag_flushed(FILE *out, const char *name, ag_error *err);

/* How long OpenMP's idle threads spin, chosen before the program starts working. OpenMP reads
 * its wait policy when the program loads; its default spins ~300k iterations before sleeping:
 * fastest on an idle machine, but when another process wants a core the spinning threads make a
 * step several times slower. A bounded spin (GOMP_SPINCOUNT=10000, tens of microseconds: long
 * enough to catch the next op's parallel region) kept the idle speed within 2% (make bench).
 * Call first thing in main: unless the user chose (OMP_WAIT_POLICY or GOMP_SPINCOUNT in the
 * environment; `make check-valgrind` sets GOMP_SPINCOUNT) or the program runs under valgrind
 * (whose /proc/self/exe is valgrind's tool, which cannot be exec'ed directly), sets
 * GOMP_SPINCOUNT=10000 and execs /proc/self/exe with argv: it does not return. If the exec
 * fails, it returns and the program goes on with OpenMP's default. Linux only (elsewhere
 * nothing: no /proc/self/exe). Speed only: nothing a learner needs to read main. */
void ag_omp_bounded_spin(char **argv);

#endif
