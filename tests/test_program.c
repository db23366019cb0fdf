/* test_program.c -- what a training program's main does around the library (issue 31;
 * src/train/program.h): the error line and its exit code, the line of an error every rank of a
 * job meets alike, a rank's way out of a failed or stopped run, the launcher's rank, the
 * threads, the stop signals and their exit codes, the pictures a run wrote, a failed flush, the
 * re-run with a bounded OpenMP spin. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>
#include "attograd.h"
#include "proc.h"
#include "tcases.h"

/* What f(arg) wrote to stderr (malloc'd), its return value in *rc. */
static char *stderr_of(int (*f)(const void *), const void *arg, int *rc)
{
    char path[] = "/tmp/ag_program_XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    ck_assert(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    *rc = f(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *text = proc_read_file(path, NULL);
    unlink(path);
    ck_assert_ptr_nonnull(text);
    return text;
}

static int say_arg(const void *e) { return ag_say_error("error: ", AG_ERR_ARG, e); }
static int say_io(const void *e) { return ag_say_error("", AG_ERR_IO, e); }
static int say_once(const void *e) { return ag_say_error_once("error: ", AG_ERR_ARG, e); }
static int say_rank_alike(const void *e) { return ag_say_rank_error(NULL, "error: ", AG_ERR_IO, e, true); }

START_TEST(test_error_line)
{
    ag_train_name("prog", "PROG");
    ag_error e = {.status = AG_ERR_ARG, .msg = "bad 'a\nb\x1b[1m' \x7f end"};   /* as a caller may fill it */
    int rc;
    char *line = stderr_of(say_arg, &e, &rc);
    ck_assert_str_eq(line, "prog: error: bad 'a\\nb\\x1B[1m' \\x7F end\n");   /* one line, escaped */
    ck_assert_int_eq(rc, 2);
    free(line);
    line = stderr_of(say_io, &e, &rc);
    ck_assert_str_eq(line, "prog: bad 'a\\nb\\x1B[1m' \\x7F end\n");
    ck_assert_int_eq(rc, 1);
    free(line);
    unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("PMIX_RANK"), unsetenv("PMI_RANK");
    line = stderr_of(say_once, &e, &rc);   /* no launcher: said at once */
    ck_assert_str_eq(line, "prog: error: bad 'a\\nb\\x1B[1m' \\x7F end\n");
    free(line);
    line = stderr_of(say_rank_alike, &e, &rc);   /* alone, rank 0: said even when alike */
    ck_assert_str_eq(line, "prog: error: bad 'a\\nb\\x1B[1m' \\x7F end\n");
    ck_assert_int_eq(rc, 1);
    free(line);
    ck_assert_int_eq(ag_exit_code(AG_OK), 0);
    ck_assert_int_eq(ag_exit_code(AG_ERR_NONFINITE), 1);
    ag_train_name("attograd", "AG");
}
END_TEST

typedef struct {
    ag_status s;
    bool alike;
    int sig;
} leave;

static int leave_alone(const void *arg)
{
    const leave *l = arg;
    ag_dist *d;
    ag_error e = {.status = l->s, .msg = "it broke"};
    ck_assert_int_eq(ag_dist_init(&d, 0, &e), AG_OK);   /* this process alone: rank 0 of 1 */
    return ag_leave_run(d, "error: ", l->s, &e, l->alike, l->sig);
}

START_TEST(test_leave_run)
{
    ag_train_name("prog", "PROG");
    int rc;
    char *line = stderr_of(leave_alone, &(leave){AG_ERR_IO, false, 0}, &rc);
    ck_assert_str_eq(line, "prog: error: it broke\n");
    ck_assert_int_eq(rc, 1);
    free(line);
    line = stderr_of(leave_alone, &(leave){AG_ERR_ARG, true, 0}, &rc);   /* rank 0 says it, alike or not */
    ck_assert_str_eq(line, "prog: error: it broke\n");
    ck_assert_int_eq(rc, 2);
    free(line);
    line = stderr_of(leave_alone, &(leave){AG_OK, false, SIGUSR1}, &rc);   /* stopped: no line, its code */
    ck_assert_str_eq(line, "");
    ck_assert_int_eq(rc, AG_EXIT_REQUEUE);
    free(line);
    line = stderr_of(leave_alone, &(leave){AG_OK, false, SIGHUP}, &rc);
    ck_assert_int_eq(rc, 129);
    free(line);
    ag_train_name("attograd", "AG");
}
END_TEST

START_TEST(test_launcher)
{
    unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("PMIX_RANK"), unsetenv("PMI_RANK");
    unsetenv("OMPI_COMM_WORLD_SIZE"), unsetenv("PMI_SIZE");
    ck_assert_int_eq(ag_launcher_rank(), -1);
    ck_assert(!ag_launched_alone(NULL));
    setenv("PMI_RANK", "3", 1);
    ck_assert_int_eq(ag_launcher_rank(), 3);
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);   /* Open MPI's first */
    ck_assert_int_eq(ag_launcher_rank(), 1);
    setenv("PMI_SIZE", "1", 1);
    ck_assert(!ag_launched_alone(NULL));
    setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
    ck_assert(ag_launched_alone(NULL));   /* one process of four, without MPI */
    ag_error e = {0};
    ck_assert_int_eq(ag_refuse_launched_alone(NULL, NULL, NULL, &e), AG_ERR_ARG);
    ck_assert_str_eq(e.msg, "this program has no MPI, so under mpirun each process would train on its own; run its "
                            "MPI build");
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    ag_error_clear(&e);
    ck_assert_int_eq(ag_refuse_launched_alone(NULL, "x", "x_mpi", &e), AG_OK);
    ck_assert_int_eq(e.status, AG_OK);
    unsetenv("OMPI_COMM_WORLD_RANK"), unsetenv("PMI_RANK"), unsetenv("OMPI_COMM_WORLD_SIZE"), unsetenv("PMI_SIZE");
}
END_TEST

static int capped(const void *asked) { return ag_threads_capped(*(const int *)asked, NULL); }

START_TEST(test_threads)
{
    int was = ag_threads();
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    ag_threads_default(0);
    ck_assert_int_eq(ag_threads(), cores < 2 ? (int)cores : 2);
    ag_threads_default(1);
    ck_assert_int_eq(ag_threads(), 1);
    ag_train_name("prog", "PROG");
    int asked = (int)cores + 7, rc;
    char *warn = stderr_of(capped, &asked, &rc);
    ck_assert_int_eq(rc, (int)cores);
    ck_assert_msg(strncmp(warn, "prog: warning: --threads ", 25) == 0 && strstr(warn, "cores"), "%s", warn);
    free(warn);
    asked = 1;
    warn = stderr_of(capped, &asked, &rc);
    ck_assert_int_eq(rc, 1);
    ck_assert_str_eq(warn, "");
    free(warn);
    ag_train_name("attograd", "AG");
    ag_threads_init(was);
}
END_TEST

START_TEST(test_stop_signals)
{
    const volatile sig_atomic_t *stop = ag_stop_catch(true, SIGUSR2);
    ck_assert(stop == ag_stop_flag());
    ck_assert_int_eq(*stop, 0);
    raise(SIGUSR2);   /* the checkpoint signal given: recorded as SIGUSR1 */
    ck_assert_int_eq(*stop, SIGUSR1);
    raise(SIGHUP);
    ck_assert_int_eq(*stop, SIGHUP);
    raise(SIGUSR1);
    ck_assert_int_eq(*stop, SIGUSR1);
    raise(SIGINT);
    ck_assert_int_eq(*stop, SIGINT);
    ck_assert_int_eq(ag_stopped_code(SIGUSR1), AG_EXIT_REQUEUE);
    ck_assert_int_eq(ag_stopped_code(SIGINT), 130);
    ck_assert_int_eq(ag_stopped_code(SIGTERM), 143);
    ck_assert_int_eq(ag_stopped_code(SIGHUP), 129);
    int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) signal(sigs[i], SIG_DFL);
    ag_plot_set_stop(NULL);
}
END_TEST

START_TEST(test_pictures_and_flush)
{
    char root[] = "/tmp/ag_program_XXXXXX";
    ck_assert(mkdtemp(root));
    time_t since = time(NULL);
    const char *names[] = {"loss.png", "old.png", "none.png", "attn.png"}, *shown[5];
    for (int i = 0; i < 4; i += 3) {
        FILE *f = fopen(proc_path(root, names[i]), "w");
        ck_assert_ptr_nonnull(f);
        fclose(f);
    }
    FILE *f = fopen(proc_path(root, "old.png"), "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    struct utimbuf then = {since - 100, since - 100};   /* an earlier run's */
    ck_assert_int_eq(utime(proc_path(root, "old.png"), &then), 0);
    ck_assert_uint_eq(ag_run_pictures(root, names, 4, since, shown), 2);
    ck_assert_str_eq(shown[0], "loss.png");
    ck_assert_str_eq(shown[1], "attn.png");
    ck_assert_ptr_null(shown[2]);
    const char *listed[] = {"loss.png", "old.png", "none.png", "attn.png", NULL};
    char *said = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&said, &len);
    ag_say_pictures(out, root, listed, since);
    fclose(out);
    char want[256];
    snprintf(want, sizeof want, "\npicture: %s/loss.png\npicture: %s/attn.png\n", root, root);
    ck_assert_str_eq(said, want);
    free(said);
    proc_remove_tree(root);
    ag_error e = {0};
    FILE *full = fopen("/dev/full", "w");
    if (full) {   /* Linux: every write fails with ENOSPC */
        fputs("x", full);
        ck_assert_int_eq(ag_flushed(full, "out", &e), AG_ERR_IO);
        ck_assert_msg(strncmp(e.msg, "out: write failed: ", 19) == 0, "%s", e.msg);
        fclose(full);
    }
    ck_assert_int_eq(ag_flushed(stdout, "stdout", &e), AG_OK);
}
END_TEST

/* The exit code of a child that calls ag_omp_bounded_spin with GOMP_SPINCOUNT as spin (NULL:
 * unset) and this runner asked for no suite: 77 (run_tests.c: no test ran) when it re-ran
 * this program, 0 when the call returned. */
static int spin_child(const char *spin)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        FILE *null = freopen("/dev/null", "w", stdout);
        if (!null || !freopen("/dev/null", "w", stderr)) _exit(3);
        setenv("CK_RUN_SUITE", "no_such_suite", 1);
        unsetenv("OMP_WAIT_POLICY");
        if (spin) setenv("GOMP_SPINCOUNT", spin, 1);
        else unsetenv("GOMP_SPINCOUNT");
        ag_omp_bounded_spin((char *[]){"run_tests", NULL});
        const char *now = getenv("GOMP_SPINCOUNT");   /* returned: what the user chose stays */
        _exit(spin && now && strcmp(now, spin) == 0 ? 0 : 4);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

START_TEST(test_omp_spin)
{
    ck_assert_int_eq(spin_child("300000"), 0);   /* the user's choice: no re-run */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;   /* under valgrind it returns too */
    ck_assert_int_eq(spin_child(NULL), 77);
}
END_TEST

Suite *program_suite(void)
{
    Suite *s = suite_create("program");
    TCase *t = tcase_create("main");
    ADD_TESTS(t, test_error_line, test_leave_run, test_launcher, test_threads, test_stop_signals, test_pictures_and_flush,
              test_omp_spin);
    suite_add_tcase(s, t);
    return s;
}
