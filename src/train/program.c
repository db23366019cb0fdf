/* program.c -- a training program's error lines, threads, launch and stop signals (program.h). */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT: the cores mpirun bound a rank to */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "program.h"
#include "train_impl.h"   /* ag__train_program */
#include "../tensor/speed.h"

int ag_exit_code(ag_status s) { return s == AG_OK ? 0 : s == AG_ERR_ARG ? 2 : 1; }

int ag_say_error(const char *lead, ag_status s, const ag_error *e)
{
    char line[128 + 4 * sizeof e->msg + 2];   /* one write: under mpirun, another's output cannot cut it */
    size_t n = (size_t)snprintf(line, 128, "%.60s: %.60s", ag__train_program(), lead);
    for (const unsigned char *p = (const unsigned char *)e->msg; *p; p++) {
        if (*p == '\n') n += (size_t)snprintf(line + n, sizeof line - n, "\\n");
        else if (*p < 0x20 || *p == 0x7F) n += (size_t)snprintf(line + n, sizeof line - n, "\\x%02X", *p);
        else line[n++] = (char)*p;
    }
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
    return ag_exit_code(s);
}

static int say_as_rank(int rank, const char *lead, ag_status s, const ag_error *e)
{
    ag_error mine = {0};
    ag_seterr(&mine, s, "rank %d: %s", rank, e->msg);
    return ag_say_error(lead, s, &mine);
}

int ag_say_error_once(const char *lead, ag_status s, const ag_error *e)
{
    int rank = ag_launcher_rank();
    if (rank <= 0) return ag_say_error(lead, s, e);
    struct timespec wait = {5, 0};
    while (nanosleep(&wait, &wait) == -1 && errno == EINTR) {}
    return say_as_rank(rank, lead, s, e);
}

int ag_say_rank_error(const ag_dist *d, const char *lead, ag_status s, const ag_error *e, bool alike)
{
    if (ag_launched_alone(d)) return ag_say_error_once(lead, s, e);   /* each process is a "rank 0" */
    int rank = ag_dist_rank(d), voice = ag_dist_voice(d);
    if (voice >= 0 && voice != rank) return ag_exit_code(s);
    if (rank == 0) return ag_say_error(lead, s, e);
    if (alike) return ag_exit_code(s);
    return say_as_rank(rank, lead, s, e);
}

int ag_leave_run(ag_dist *d, const char *lead, ag_status s, const ag_error *e, bool alike, int stop_signal)
{
    ag_error met = {0};
    if (s) {
        int code = ag_say_rank_error(d, lead, s, e, alike);
        if (alike) ag_dist_barrier(d, &met);   /* every rank's: leave once rank 0 said it */
        ag_dist_end(d, false);
        return code;
    }
    ag_status b = ag_dist_barrier(d, &met);   /* every rank past the checkpoint */
    if (b) ag_say_rank_error(d, lead, b, &met, alike);
    ag_dist_end(d, false);
    return ag_stopped_code(stop_signal);
}

int ag_launcher_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *r = getenv(vars[i]);
        if (r && *r) return atoi(r);
    }
    return -1;
}

bool ag_launched_alone(const ag_dist *d)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    return ag_dist_size(d) == 1 && n && atoi(n) > 1;
}

ag_status ag_refuse_launched_alone(const ag_dist *d, const char *program, const char *mpi_build, ag_error *err)
{
    if (!ag_launched_alone(d)) return AG_OK;
    return ag_seterr(err, AG_ERR_ARG, "this %s has no MPI, so under mpirun each process would train on its own; run %s",
                     program ? program : "program", mpi_build ? mpi_build : "its MPI build");
}

void ag_threads_default(int threads)
{
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores >= 1 && cores < 2 ? (int)cores : 2;
    }
    ag_threads_init(threads);
}

/* issue 35: baby with --threads 1024 took 50 s for two steps on 2 cores, 9 s with 2 */
int ag_threads_capped(int asked, const ag_dist *d)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (asked <= cores || cores < 1 || ag_dist_size(d) > 1) return asked;
    fprintf(stderr, "%s: warning: --threads %d is more than this machine's %ld cores: %ld threads (more would "
            "only wait for each other)\n", ag__train_program(), asked, cores, cores);
    return (int)cores;
}

/* the layout of one rank per host with a thread per core needs --map-by ppr:1:node:PE=T or
 * --bind-to none (docs/distributed.md) */
void ag_threads_warn_bound(const ag_dist *d, int threads)
{
#ifndef __linux__   /* sched_getaffinity is Linux's (none on macOS): no warning there */
    (void)d, (void)threads;
#else
    cpu_set_t set;
    if (ag_dist_rank(d) != 0 || (ag_dist_size(d) == 1 && !getenv("OMPI_COMM_WORLD_SIZE"))) return;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) >= threads) return;
    fprintf(stderr, "%s: warning: --threads %d, but mpirun bound this rank to %d core%s: give each rank its "
            "cores (mpirun --map-by ppr:1:node:PE=%d, or --bind-to none)\n", ag__train_program(), threads,
            CPU_COUNT(&set), CPU_COUNT(&set) == 1 ? "" : "s", threads);
#endif
}

static volatile sig_atomic_t stop_signal = 0;
static int checkpoint_signal = SIGUSR1;   /* the program's own: recorded as SIGUSR1 */

static void on_signal(int sig) { stop_signal = sig == checkpoint_signal ? SIGUSR1 : sig; }

const volatile sig_atomic_t *ag_stop_catch(bool checkpoint, int also)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (checkpoint) {
        checkpoint_signal = also ? also : SIGUSR1;
        sigaction(SIGUSR1, &sa, NULL);
        sigaction(checkpoint_signal, &sa, NULL);
    }
    ag_plot_set_stop(&stop_signal);   /* a hung gnuplot must not hold the answer (train.h) */
    return &stop_signal;
}

const volatile sig_atomic_t *ag_stop_flag(void) { return &stop_signal; }

int ag_stopped_code(int sig) { return sig == SIGUSR1 ? AG_EXIT_REQUEUE : 128 + sig; }

size_t ag_run_pictures(const char *dir, const char *const *names, size_t n, time_t since, const char **shown)
{
    char png[4096];
    struct stat st;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (ag_path_join(png, sizeof png, dir, names[i]) && stat(png, &st) == 0 && st.st_mtime >= since)
            shown[k++] = names[i];
    shown[k] = NULL;
    return k;
}

void ag_say_pictures(FILE *out, const char *dir, const char *const *names, time_t since)
{
    const char *shown[17];
    size_t n = 0;
    while (names[n] && n < 16) n++;
    ag_run_pictures(dir, names, n, since, shown);
    for (size_t k = 0; shown[k]; k++) fprintf(out, "%spicture: %s/%s\n", k ? "" : "\n", dir, shown[k]);
}

void ag_omp_bounded_spin(char **argv)
{
#ifdef __linux__
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    const char *preload = getenv("LD_PRELOAD");   /* valgrind's: /proc/self/exe is its tool */
    if (preload && strstr(preload, "vgpreload")) return;
    if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
    execv("/proc/self/exe", argv);   /* only returns on failure: go on with the default */
#else
    (void)argv;
#endif
}

ag_status ag_flushed(FILE *out, const char *name, ag_error *err)
{
    if (fflush(out) == 0 && !ferror(out)) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s: write failed: %s", name, strerror(errno));
}
