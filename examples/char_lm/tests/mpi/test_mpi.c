/* test_mpi.c -- data-parallel char_lm under mpirun against the single process (issue 13).
 *
 * Every run trains the tiny model with dropout 0 on the same made-up text, with --batch-size
 * 12, so that N ranks x K micro-batches divide it for every pair tried:
 *   - equal: (N,K) = (1,1) [build/char_lm], (1,2), (2,1), (2,3) [oversubscribed] give, step for
 *     step, losses within 1e-5 relative and, after 30 steps, weights within 1e-5 of (1,1); the
 *     evaluations within 1e-6; char_lm_mpi
 *     alone under mpirun -np 1 writes char_lm's very files;
 *   - TCP: (2,2) over TCP only (--mca btl self,tcp, as between hosts);
 *   - a batch that N*K does not divide: exit 2 and one error line (rank 0's); build/char_lm
 *     (no MPI) under mpirun: exit 2; an error the ranks meet in their own setup (the memory, the
 *     text, the config) one line, "rank R: " where only rank R met it (issue 35 L4);
 *   - stop: SIGINT to one rank alone stops every rank at the same step (exit 130), rank 0 writes
 *     the checkpoint, and a single process resumes it as if never interrupted; SIGTERM to mpirun
 *     (which sends SIGTERM to every rank) the same, resumed by three ranks; SIGUSR1 to mpirun
 *     (a scheduler's warning before pre-emption): a checkpoint and exit 75 on every rank;
 *   - a rank killed (SIGKILL) mid-run ends the job and leaves the last checkpoint whole;
 *   - ranks that do not hold the same run (another vocabulary, another text of the same
 *     vocabulary, another flag) all exit 2 within seconds, before anything is written, and rank 0
 *     names the field and the ranks (issue 20);
 *   - a stopped rank (SIGSTOP) ends the job within --dist-timeout and a second or two, named;
 *   - SIGHUP to one rank: every rank exits 129; SIGINT during a long evaluation is answered
 *     within 2 s (a round of batches); the log in a file holds no ESC byte unless --progress tty;
 *   - examples/reverse, on the library's trainer (ag_train_run, src/train/ddp.h): 2 ranks, 1 rank
 *     with --grad-accum 2, and 2 ranks stopped and resumed give one process's losses.
 * The runs are started here (fork, exec) rather than through proc.c's $CHAR_LM, as each test
 * needs both programs and mpirun; proc.c's waiting and file helpers are reused.
 *
 * build/test_mpi, run by `make test-mpi` (and `make test`); CHAR_LM and CHAR_LM_MPI name the
 * programs (default build/char_lm, build/char_lm_mpi). The tests run side by side (the runner
 * at the end), and so do a test's runs where none needs another's files. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "checkpoint.h"
#include "proc.h"
#include "tensor/debug.h"   /* ag_now_s */

static char root[64];
static char char_lm[PATH_MAX], char_lm_mpi[PATH_MAX], char_lm_mpi_other[PATH_MAX], dist_check[PATH_MAX];
static char reverse[PATH_MAX], reverse_mpi[PATH_MAX], reverse_mpi_other[PATH_MAX];

#define ITERS "30"
/* the tiny preset with a batch every N*K here divides and three evaluations (0, 15, 30), the
 * last with batches unevenly dealt to two ranks (eval-iters 3) */
#define RUN_FLAGS "--config", "tiny", "--dropout", "0", "--batch-size", "12", "--eval-interval", "15", \
                  "--eval-iters", "3", "--threads", "1"
#define MPIRUN "mpirun", "--oversubscribe"
/* After a rank's non-zero exit, mpirun sends the others SIGCONT, waits odls_base_sigkill_timeout
 * seconds (T, default 1), SIGTERM, T again, then SIGKILL: 2 s on every failing job, even when
 * every rank has already left. main() sets T to 0: what these tests read is written before a
 * rank leaves (an error line: main.c's barrier once rank 0 has said it). The tests whose
 * subject is mpirun's stop (a signal to mpirun, a killed rank) keep the default: */
#define MPIRUN_GRACE "--mca", "odls_base_sigkill_timeout", "1"
#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

static void root_setup(void)
{
    strcpy(root, "/tmp/ag_mpi_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    size_t n;
    char *text = proc_make_corpus(40000, &n);
    proc_write_file(proc_path(root, "corpus.txt"), text, n);
    text[n / 2] = text[n / 2] == 'a' ? 'e' : 'a';   /* the same characters, another text */
    proc_write_file(proc_path(root, "other.txt"), text, n);
    text[n / 2] = '~';                              /* a character corpus.txt does not have */
    proc_write_file(proc_path(root, "wider.txt"), text, n);
    free(text);
}

static void root_teardown(void) { proc_remove_tree(root); }

// --- running the programs ---

/* argv[0] is "char_lm", "char_lm_mpi" (our programs) or a command on $PATH (mpirun); stdout
 * and stderr go to io.out and io.err; cwd is the test's root */
static pid_t start(const char *io, const char *const *argv)
{
    const char *words[64];
    int n = 0;
    for (; argv[n] && n < 63; n++)
        words[n] = strcmp(argv[n], "char_lm") == 0 ? char_lm : strcmp(argv[n], "char_lm_mpi") == 0 ? char_lm_mpi
                 : strcmp(argv[n], "char_lm_mpi_other") == 0 ? char_lm_mpi_other
                 : strcmp(argv[n], "dist_check") == 0 ? dist_check : strcmp(argv[n], "reverse") == 0 ? reverse
                 : strcmp(argv[n], "reverse_mpi") == 0 ? reverse_mpi
                 : strcmp(argv[n], "reverse_mpi_other") == 0 ? reverse_mpi_other : argv[n];
    words[n] = NULL;
    char outp[PATH_MAX], errp[PATH_MAX];
    snprintf(outp, sizeof outp, "%s/%s.out", root, io);
    snprintf(errp, sizeof errp, "%s/%s.err", root, io);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int in = open("/dev/null", O_RDONLY);
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || fo < 0 || fe < 0 || dup2(in, 0) < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(126);
        if (chdir(root) != 0) _exit(126);
        /* each mpirun its own session directory (Open MPI's default, TMPDIR/ompi.<host>.<uid>, is
         * shared, and two mpiruns that start at once race to create it: "File exists" in
         * orte_session_dir, open-mpi/ompi#8510); the test's root is removed with it */
        char session[PATH_MAX];
        snprintf(session, sizeof session, "%s/%s.ompi", root, io);
        if (mkdir(session, 0700) != 0 && errno != EEXIST) _exit(126);
        setenv("OMPI_MCA_orte_tmpdir_base", session, 1);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        execvp(words[0], (char *const *)words);
        _exit(127);
    }
    return pid;
}

static void finish(pid_t pid, const char *io, proc_result *r)
{
    char prefix[PATH_MAX];
    snprintf(prefix, sizeof prefix, "%s/%s", root, io);
    proc_opts o = {.timeout_s = 30};   /* no test waits longer (a hang fails it) */
    proc_wait(pid, prefix, &o, r);
}

typedef struct {
    const char *io;
    const char *const *argv;
} run_spec;

/* runs the n programs side by side (each mostly waits: mpirun's start, MPI's join), each to its
 * end; every one must exit 0 */
static void run_all_ok(const run_spec *runs, int n)
{
    pid_t pid[8];
    ck_assert_int_le(n, 8);
    for (int i = 0; i < n; i++) pid[i] = start(runs[i].io, runs[i].argv);
    proc_result r[8];
    for (int i = 0; i < n; i++) finish(pid[i], runs[i].io, &r[i]);   /* all ended before any verdict */
    for (int i = 0; i < n; i++) {
        ck_assert_msg(r[i].exited && r[i].code == 0, "%s: %s\nstdout:\n%s\nstderr:\n%s", runs[i].io,
                      proc_status_str(&r[i]), r[i].out, r[i].err);
        proc_result_free(&r[i]);
    }
}

/* runs argv to its end; it must exit 0 */
static void run_ok(const char *io, const char *const *argv) { run_all_ok(&(run_spec){io, argv}, 1); }

// --- what a run left ---

typedef struct {
    long n;                  /* rows of steps */
    double loss[64];         /* loss of step it */
    double eval[8][2];       /* train_loss, val_loss of each evaluation */
    long n_eval;
} metrics;

static void read_metrics(const char *dir, metrics *m)
{
    memset(m, 0, sizeof *m);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s/metrics.csv", root, dir);
    char *b = proc_read_file(path, NULL);
    ck_assert_msg(b != NULL, "%s missing", path);
    char *line = strchr(b, '\n');   /* after the header */
    while (line && *++line) {
        char col[6][32] = {{0}};
        int c = 0;
        size_t k = 0;
        for (char *p = line; *p && *p != '\n'; p++) {
            if (*p == ',') { c++; k = 0; continue; }
            if (c < 6 && k < 31) col[c][k++] = *p;
        }
        long it = atol(col[0]);
        if (col[2][0] && it < 64) {
            m->loss[it] = atof(col[2]);
            if (it + 1 > m->n) m->n = it + 1;
        }
        if (col[3][0] && m->n_eval < 8) {
            m->eval[m->n_eval][0] = atof(col[3]);
            m->eval[m->n_eval][1] = atof(col[4]);
            m->n_eval++;
        }
        line = strchr(line, '\n');
    }
    free(b);
}

/* losses step for step within rel (relative), evaluations within 1e-6 (and the 1e-6 of %.6f) */
static void assert_same_run(const char *dir, const char *ref, long from, double rel)
{
    metrics a, b;
    read_metrics(dir, &a);
    read_metrics(ref, &b);
    ck_assert_msg(a.n == b.n, "%s has %ld steps, %s %ld", dir, a.n, ref, b.n);
    for (long it = from; it < a.n; it++)
        ck_assert_msg(fabs(a.loss[it] - b.loss[it]) <= rel * fabs(b.loss[it]),
                      "step %ld: loss %.6f in %s, %.6f in %s", it, a.loss[it], dir, b.loss[it], ref);
    ck_assert_int_eq(a.n_eval, b.n_eval);
    for (long e = 0; e < a.n_eval; e++)
        for (int s = 0; s < 2; s++)
            ck_assert_msg(fabs(a.eval[e][s] - b.eval[e][s]) <= 2.0001e-6, "evaluation %ld: %s loss %.6f in %s, %.6f in %s",
                          e, s ? "val" : "train", a.eval[e][s], dir, b.eval[e][s], ref);
}

/* every weight of the two checkpoints within tol; returns the largest difference. The keys'
 * bias of attention, whose gradient is exactly 0, must not have moved at all in either: the
 * step gives it that gradient, not the backward's rounding noise (train.c). */
static double assert_same_weights(const char *dir, const char *ref, double tol)
{
    char pa[PATH_MAX], pb[PATH_MAX];
    snprintf(pa, sizeof pa, "%s/%s", root, dir);
    snprintf(pb, sizeof pb, "%s/%s", root, ref);
    lm_model a, b;
    ag_error e = {0};
    ck_assert_msg(lm_model_load_as(pa, AG_CKPT_LATEST, &a, &e) == AG_OK, "%s", e.msg);
    ck_assert_msg(lm_model_load_as(pb, AG_CKPT_LATEST, &b, &e) == AG_OK, "%s", e.msg);
    const ag_params *P = a.g->params, *Q = b.g->params;
    ck_assert_int_eq(P->total, Q->total);
    ck_assert_int_eq(a.iter, b.iter);
    double worst = 0;
    for (int k = 0; k < P->n; k++) {
        const ag_tensor *t = P->entries[k].t;
        size_t n = ag_numel(t), at = P->entries[k].offset;
        bool key_bias = strstr(t->name, "attn.w_k.bias") != NULL;
        for (size_t i = at; i < at + n; i++) {
            double d = fabs((double)P->data[i] - (double)Q->data[i]);
            if (d > tol || (key_bias && P->data[i] != 0)) {   /* a passing ck_assert is a write to check: */
                ck_assert_msg(d <= tol, "weights of %s and %s differ by %g in %s", dir, ref, d, t->name);
                ck_assert_msg(!key_bias, "%s of %s moved to %g", t->name, dir, (double)P->data[i]);
            }                                                 /* 860,000 of them made 3 s of sys time */
            if (d > worst) worst = d;
        }
    }
    lm_model_free(&a);
    lm_model_free(&b);
    return worst;
}

// --- equal runs ---

START_TEST(test_equal_for_any_ranks_and_micro_batches)
{
    run_all_ok((const run_spec[]){
        {"r11", A("char_lm", "train", "--data", "corpus.txt", "--out", "r11", RUN_FLAGS, "--max-iters", ITERS)},
        {"r12", A("char_lm", "train", "--data", "corpus.txt", "--out", "r12", RUN_FLAGS, "--max-iters", ITERS,
                  "--grad-accum", "2")},
        {"r21", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "r21", RUN_FLAGS,
                  "--max-iters", ITERS)},
        {"r23", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "r23", RUN_FLAGS,
                  "--max-iters", ITERS, "--grad-accum", "3")},
        {"m11", A(MPIRUN, "-np", "1", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "m11", RUN_FLAGS,
                  "--max-iters", ITERS)}}, 5);
    const char *dirs[] = {"r12", "r21", "r23"};
    for (int i = 0; i < 3; i++) {
        assert_same_run(dirs[i], "r11", 0, 1e-5);
        double d = assert_same_weights(dirs[i], "r11", 1e-5);
        printf("mpi: %s against r11: weights differ by at most %.2g\n", dirs[i], d);
    }
    /* one rank is the single-process program: the very same losses and weights (not the same
     * files: each run's checkpoints carry its own random run identity) */
    assert_same_run("m11", "r11", 0, 0);
    ck_assert(assert_same_weights("m11", "r11", 0) == 0);
    /* only rank 0 spoke */
    char *out = proc_read_file(proc_path(root, "r23.out"), NULL);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(strstr(out, "data parallel: 2 ranks x 3 micro-batches of 2 windows"));
    const char *first = strstr(out, "data:");
    ck_assert_msg(first && !strstr(first + 1, "data:"), "more than one rank logged:\n%s", out);
    free(out);
    /* a log in a file: plain lines, though Open MPI gives the ranks a pseudo-terminal */
    size_t len;
    out = proc_read_file(proc_path(root, "r21.out"), &len);
    ck_assert_msg(out && strstr(out, "iter 20/30") && !memchr(out, '\033', len), "r21.out:\n%s", out);
    free(out);
}
END_TEST

/* each rank splits its own micro-batches into shards (nn.h): the same run as the single
 * process's, with --shards and with the default (two shards a pass, each rank on one thread) */
START_TEST(test_shards_per_rank)
{
    run_all_ok((const run_spec[]){
        {"s11", A("char_lm", "train", "--data", "corpus.txt", "--out", "s11", RUN_FLAGS, "--max-iters", ITERS)},
        {"s22", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "s22", RUN_FLAGS,
                  "--max-iters", ITERS, "--grad-accum", "2", "--shards", "3")},
        {"s21", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "s21", RUN_FLAGS,
                  "--max-iters", ITERS)}}, 3);
    assert_same_run("s22", "s11", 0, 1e-5);
    assert_same_weights("s22", "s11", 1e-5);
    assert_same_run("s21", "s11", 0, 1e-5);
    assert_same_weights("s21", "s11", 1e-5);
}
END_TEST

START_TEST(test_tcp_only)
{
    run_all_ok((const run_spec[]){
        {"t11", A("char_lm", "train", "--data", "corpus.txt", "--out", "t11", RUN_FLAGS, "--max-iters", ITERS)},
        {"t22", A(MPIRUN, "--mca", "btl", "self,tcp", "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt",
                  "--out", "t22", RUN_FLAGS, "--max-iters", ITERS, "--grad-accum", "2")}}, 2);
    assert_same_run("t22", "t11", 0, 1e-5);
    assert_same_weights("t22", "t11", 1e-5);
}
END_TEST

/* the one error line of r: exactly one "char_lm: error:" holding want */
static void assert_one_error(const proc_result *r, const char *want)
{
    const char *said = strstr(r->err, "char_lm: error: ");
    ck_assert_msg(said && strstr(said, want), "no error with '%s':\n%s", want, r->err);
    ck_assert_msg(!strstr(said + 1, "char_lm: error"), "more than one error line:\n%s", r->err);
}

START_TEST(test_batch_must_divide)
{
    pid_t bad = start("bad", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "bad",
                               RUN_FLAGS, "--grad-accum", "4"));   /* the four side by side */
    pid_t bad1 = start("bad1", A("char_lm", "train", "--data", "corpus.txt", "--out", "bad1", RUN_FLAGS,
                                 "--grad-accum", "5"));
    /* the program without MPI under mpirun: refused, not N runs into one directory */
    pid_t nompi = start("nompi", A(MPIRUN, "-np", "2", "char_lm", "train", "--data", "corpus.txt", "--out", "nompi",
                                   RUN_FLAGS));
    /* a bad command line: one line under mpirun, not one per rank */
    pid_t badflag = start("badflag", A(MPIRUN, "-np", "3", "char_lm_mpi", "train", "--data", "corpus.txt", "--out",
                                       "badflag", "--lr", "fast"));
    proc_result r;
    finish(bad, "bad", &r);
    ck_assert_msg(r.exited && r.code == 2, "%s\n%s", proc_status_str(&r), r.err);
    const char *msg = "char_lm: error: --batch-size 12 is not a multiple of 2 ranks x --grad-accum 4 = 8";
    const char *at = strstr(r.err, msg);
    ck_assert_msg(at && !strstr(at + 1, "char_lm: error"), "not one error line:\n%s", r.err);
    proc_result_free(&r);
    finish(bad1, "bad1", &r);
    ck_assert_msg(r.exited && r.code == 2 && strstr(r.err, "try --batch-size 15"), "%s\n%s", proc_status_str(&r), r.err);
    proc_result_free(&r);
    finish(nompi, "nompi", &r);
    ck_assert_msg(r.exited && r.code == 2, "%s\n%s", proc_status_str(&r), r.err);
    assert_one_error(&r, "this char_lm has no MPI");   /* said by rank 0 alone */
    proc_result_free(&r);
    finish(badflag, "badflag", &r);
    ck_assert_msg(r.exited && r.code == 2, "%s\n%s", proc_status_str(&r), r.err);
    assert_one_error(&r, "--lr");
    proc_result_free(&r);
    ck_assert(access(proc_path(root, "nompi"), F_OK) != 0);
}
END_TEST

/* starts mpirun -np 3 of char_lm_mpi with argv after "train --out io" and RUN_FLAGS (the flags
 * after them win) */
static pid_t start_three(const char *io, const char *const *argv)
{
    const char *words[48] = {MPIRUN, "-np", "3", "char_lm_mpi", "train", "--out", io, RUN_FLAGS};
    int n = 0;
    while (words[n]) n++;
    for (int i = 0; argv[i] && n < 47; i++) words[n++] = argv[i];
    words[n] = NULL;
    return start(io, words);
}

/* the job pid, started at t0: exit `code` with exactly one error line holding want, within 15 s */
static void assert_said_once(pid_t pid, const char *io, double t0, int code, const char *want)
{
    proc_result r;
    finish(pid, io, &r);
    ck_assert_msg(r.exited && r.code == code, "%s: %s, expected %d\n%s", io, proc_status_str(&r), code, r.err);
    ck_assert_msg(ag_now_s() - t0 < 15, "%s: %.1f s", io, ag_now_s() - t0);
    assert_one_error(&r, want);
    proc_result_free(&r);
}

/* An error each rank meets in its own setup (the text, the config's memory): said once, by rank
 * 0, with "rank R" only where a rank's differs (issue 35 L4: three ranks printed it three times) */
START_TEST(test_setup_error_said_once)
{
    double t0 = ag_now_s();   /* the five jobs side by side */
    pid_t mem = start_three("mem", A("--data", "corpus.txt", "--n-layer", "256", "--n-embd", "4096", "--block-size",
                                     "4096"));
    pid_t nodata = start_three("nodata", A("--data", "missing.txt"));
    pid_t validate = start_three("validate", A("--data", "corpus.txt", "--n-head", "5"));
    /* rank 2 alone lacks its text: named, the others silent */
    pid_t rank1 = start("rank1", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out",
                                   "rank1", RUN_FLAGS, ":", "-np", "1", "char_lm_mpi", "train", "--data",
                                   "missing.txt", "--out", "rank1", RUN_FLAGS));
    /* rank 1 alone has a bad flag (rank 0 never meets it): said by rank 1, not lost */
    pid_t flag1 = start("flag1", A(MPIRUN, "-np", "1", "char_lm_mpi", "train", "--data", "corpus.txt", "--out",
                                   "flag1", RUN_FLAGS, ":", "-np", "1", "char_lm_mpi", "train", "--data",
                                   "corpus.txt", "--out", "flag1", RUN_FLAGS, "--n-head", "5"));
    assert_said_once(mem, "mem", t0, 2, "needs about");
    assert_said_once(nodata, "nodata", t0, 1, "missing.txt: cannot open");
    assert_said_once(validate, "validate", t0, 2, "--n-head");
    proc_result r;
    finish(rank1, "rank1", &r);
    ck_assert_msg(r.exited && r.code == 1, "%s\n%s", proc_status_str(&r), r.err);
    assert_one_error(&r, "rank 2: missing.txt: cannot open");
    proc_result_free(&r);
    finish(flag1, "flag1", &r);
    ck_assert_msg(r.exited && r.code == 2, "%s\n%s", proc_status_str(&r), r.err);
    assert_one_error(&r, "rank 1: --n-head 5 does not divide");
    proc_result_free(&r);
    ck_assert(access(proc_path(root, "mem"), F_OK) != 0 && access(proc_path(root, "rank1"), F_OK) != 0);
}
END_TEST

// --- stop, resume, a killed rank ---

/* the schedule does not depend on --max-iters, so a long run and a short one agree */
#define LONG_FLAGS RUN_FLAGS, "--warmup-iters", "20", "--lr-decay-iters", "100000"

/* waits until the run in dir has written the metrics.csv row of step `step` (the log shows
 * every tenth step only), or the process ends, or 30 s pass */
static bool wait_for(pid_t pid, const char *dir, long step)
{
    char path[PATH_MAX], text[32];
    snprintf(path, sizeof path, "%s/%s/metrics.csv", root, dir);
    snprintf(text, sizeof text, "\n%ld,", step);
    for (int i = 0; i < 6000; i++) {
        char *so = proc_read_file(path, NULL);
        bool seen = so && strstr(so, text);
        free(so);
        if (seen) return true;
        if (!proc_running(pid)) return false;
        struct timespec d = {0, 5000000};
        nanosleep(&d, NULL);
    }
    return false;
}

/* the pid of rank `rank` among mpirun's children (OMPI_COMM_WORLD_RANK in its environment) */
static pid_t rank_pid(pid_t mpirun, int rank)
{
    char want[32];
    snprintf(want, sizeof want, "OMPI_COMM_WORLD_RANK=%d", rank);
    DIR *d = opendir("/proc");
    ck_assert_ptr_nonnull(d);
    pid_t found = 0;
    for (struct dirent *e; !found && (e = readdir(d));) {
        pid_t pid = (pid_t)atol(e->d_name);
        char path[64];
        if (pid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        char *st = proc_read_file(path, NULL);
        const char *close = st ? strrchr(st, ')') : NULL;
        int ppid = 0;
        char state;
        bool child = close && sscanf(close + 1, " %c %d", &state, &ppid) == 2 && ppid == mpirun;
        free(st);
        if (!child) continue;
        snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
        size_t n;
        char *env = proc_read_file(path, &n);
        for (size_t k = 0; env && k < n; k += strlen(env + k) + 1)
            if (strcmp(env + k, want) == 0) found = pid;
        free(env);
    }
    closedir(d);
    ck_assert_msg(found > 0, "no rank %d under mpirun %d", rank, (int)mpirun);
    return found;
}

/* the iteration in "interrupted at iteration N" of io.out */
static long stopped_at(const proc_result *r)
{
    const char *said = strstr(r->out, "interrupted at iteration ");
    ck_assert_msg(said != NULL, "rank 0 does not say it was interrupted:\n%s\n%s", r->out, r->err);
    return atol(said + strlen("interrupted at iteration "));
}

/* resumes dir to stopped+12 steps with argv's ranks, runs the same never interrupted alone,
 * and compares */
static void resume_and_compare(const char *dir, long stopped, const char *const *launcher, int n_launcher)
{
    char iters[32], io[64], ref[64];
    snprintf(iters, sizeof iters, "%ld", stopped + 12);
    snprintf(io, sizeof io, "%s_resume", dir);
    snprintf(ref, sizeof ref, "%s_ref", dir);
    const char *argv[40];
    int n = 0;
    for (int i = 0; i < n_launcher; i++) argv[n++] = launcher[i];
    const char *rest[] = {"train", "--data", "corpus.txt", "--out", dir, "--resume", "--threads", "1",
                          "--max-iters", iters, NULL};
    for (int i = 0; rest[i]; i++) argv[n++] = rest[i];
    argv[n] = NULL;
    run_all_ok((const run_spec[]){   /* the two side by side */
        {io, argv},
        {ref, A("char_lm", "train", "--data", "corpus.txt", "--out", ref, LONG_FLAGS, "--max-iters", iters)}}, 2);
    char resuming[64], outp[PATH_MAX];
    snprintf(resuming, sizeof resuming, "resuming at iteration %ld", stopped);
    snprintf(outp, sizeof outp, "%s/%s.out", root, io);
    char *out = proc_read_file(outp, NULL);
    ck_assert_msg(out && strstr(out, resuming), "%s did not start at %ld:\n%s", io, stopped, out ? out : "");
    free(out);
    assert_same_run(dir, ref, 0, 1e-5);
    assert_same_weights(dir, ref, 1e-5);
}

START_TEST(test_sigint_to_one_rank)
{
    pid_t pid = start("int", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "int",
                               LONG_FLAGS, "--max-iters", "10000000"));
    bool seen = wait_for(pid, "int", 10);
    if (seen) kill(rank_pid(pid, 1), SIGINT);   /* rank 0 never hears of it but from rank 1 */
    else kill(pid, SIGKILL);
    proc_result r;
    finish(pid, "int", &r);
    ck_assert_msg(seen, "no step 10: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(r.exited && r.code == 130, "%s, expected 130 from every rank\n%s", proc_status_str(&r), r.err);
    long stopped = stopped_at(&r);
    proc_result_free(&r);
    ck_assert_ptr_null(proc_find_tmp(root));
    const char *alone[] = {"char_lm"};
    resume_and_compare("int", stopped, alone, 1);
}
END_TEST

/* a 2-rank run in dir (--grad-accum accum) sent sig through mpirun once step 10 is written:
 * mpirun exits `want` (any code when want < 0: its own after SIGTERM) and rank 0 says where it
 * stopped, which is returned */
static long signal_mpirun(const char *dir, int sig, const char *accum, int want)
{
    pid_t pid = start(dir, A(MPIRUN, MPIRUN_GRACE, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt",
                             "--out", dir, LONG_FLAGS, "--max-iters", "10000000", "--grad-accum", accum));
    bool seen = wait_for(pid, dir, 10);
    kill(pid, seen ? sig : SIGKILL);
    proc_result r;
    finish(pid, dir, &r);
    ck_assert_msg(seen, "no step 10: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(r.exited && (want < 0 || r.code == want), "%s, expected %d\n%s", proc_status_str(&r), want, r.err);
    ck_assert_msg(sig != SIGUSR1 || strstr(r.out, "a checkpoint signal: exit 75"), "%s", r.out);
    long stopped = stopped_at(&r);
    proc_result_free(&r);
    ck_assert_ptr_null(proc_find_tmp(root));
    return stopped;
}

START_TEST(test_sigterm_to_mpirun)
{
    long stopped = signal_mpirun("term", SIGTERM, "2", -1);   /* mpirun passes SIGTERM on to every rank */
    const char *three[] = {"mpirun", "--oversubscribe", "-np", "3", "char_lm_mpi"};
    resume_and_compare("term", stopped, three, 5);
}
END_TEST

/* Slurm's --signal=USR1@T, or a job script's kill -USR1 of mpirun, which passes it on to every
 * rank: a checkpoint, then every rank exits 75 (a requeue, not a failure), and mpirun with it;
 * the checkpoint resumes as if never interrupted */
START_TEST(test_sigusr1_to_mpirun)
{
    long stopped = signal_mpirun("usr1", SIGUSR1, "1", 75);
    const char *two[] = {"mpirun", "--oversubscribe", "-np", "2", "char_lm_mpi"};
    resume_and_compare("usr1", stopped, two, 5);
}
END_TEST

START_TEST(test_killed_rank_ends_the_job)
{
    pid_t pid = start("kill", A(MPIRUN, MPIRUN_GRACE, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt",
                                "--out", "kill", "--config", "tiny", "--batch-size", "12", "--threads", "1",
                                "--eval-iters", "1", "--eval-interval", "5", "--max-iters", "10000000"));
    bool seen = wait_for(pid, "kill", 20);
    kill(seen ? rank_pid(pid, 1) : pid, SIGKILL);
    proc_result r;
    finish(pid, "kill", &r);
    ck_assert_msg(seen, "no step 20: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(r.exited && r.code != 0, "mpirun went on after a rank died: %s", proc_status_str(&r));
    proc_result_free(&r);
    run_ok("kill_eval", A("char_lm", "eval", "--ckpt", "kill", "--data", "corpus.txt"));   /* whole and loadable */
    run_ok("kill_resume", A("char_lm", "train", "--data", "corpus.txt", "--out", "kill", "--resume", "--threads", "1",
                            "--max-iters", "30"));
}
END_TEST

// --- ranks that must agree, a stalled rank, signals (issue 20) ---

/* one rank with --data corpus.txt and one with --data data2 (and flags2 after the others):
 * all exit 2 within 15 s, nothing written, and rank 0 names `field` with both ranks */
static void assert_refused(const char *io, const char *data2, const char *flag2, const char *value2, const char *field)
{
    double t0 = ag_now_s();
    proc_result r;
    finish(start(io, A(MPIRUN, "-np", "1", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", io, RUN_FLAGS,
                       ":", "-np", "1", "char_lm_mpi", "train", "--data", data2, "--out", io, RUN_FLAGS, flag2,
                       value2)), io, &r);
    double took = ag_now_s() - t0;
    ck_assert_msg(r.exited && r.code == 2, "%s: %s\n%s", io, proc_status_str(&r), r.err);
    ck_assert_msg(took < 15, "%s: refused after %.1f s", io, took);
    const char *said = strstr(r.err, "char_lm: error: the ranks do not hold the same run");
    ck_assert_msg(said && strstr(said, field) && strstr(said, "on rank 0") && strstr(said, "on rank 1"),
                  "%s does not name %s and both ranks:\n%s", io, field, r.err);
    ck_assert_msg(!strstr(said + 1, "char_lm: error"), "%s: more than one error line:\n%s", io, r.err);
    ck_assert_msg(!strstr(r.err, "free()") && !strstr(r.err, "Segmentation"), "%s crashed:\n%s", io, r.err);
    ck_assert(access(proc_path(root, io), F_OK) != 0);   /* refused before anything was written */
    proc_result_free(&r);
}

START_TEST(test_ranks_must_agree)
{
    assert_refused("vocab", "wider.txt", "--threads", "1", "the vocabulary: hash");
    assert_refused("text", "other.txt", "--threads", "1", "the text: hash");
    assert_refused("flag", "corpus.txt", "--lr", "0.002", "--lr: 0.001 on rank 0, 0.002 on rank 1");
}
END_TEST

/* pid has exited (gone, or a zombie that mpirun has not reaped yet) */
static bool gone(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *st = proc_read_file(path, NULL);
    const char *close = st ? strrchr(st, ')') : NULL;
    bool dead = !close || close[2] == 'Z' || close[2] == 'X';
    free(st);
    return dead;
}

/* seconds until both ranks have exited (at most `limit`) */
static double until_gone(pid_t r0, pid_t r1, double limit)
{
    double t0 = ag_now_s();
    while (!(gone(r0) && gone(r1)) && ag_now_s() - t0 < limit) {
        struct timespec d = {0, 10000000};
        nanosleep(&d, NULL);
    }
    return ag_now_s() - t0;
}

START_TEST(test_stalled_rank_ends_within_deadline)
{
    pid_t pid = start("stall", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "stall",
                                 LONG_FLAGS, "--max-iters", "10000000", "--dist-timeout", "3"));
    bool seen = wait_for(pid, "stall", 5);
    pid_t r0 = seen ? rank_pid(pid, 0) : pid, r1 = seen ? rank_pid(pid, 1) : pid;
    kill(r1, seen ? SIGSTOP : SIGKILL);
    double took = seen ? until_gone(r0, r0, 20) : 0;   /* rank 0 waits for the stopped rank 1 */
    proc_result r;
    finish(pid, "stall", &r);
    kill(r1, SIGKILL);   /* in case mpirun left it behind */
    ck_assert_msg(seen, "no step 5: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(took < 3 + 4, "rank 0 left %.1f s after rank 1 stopped (--dist-timeout 3)", took);
    ck_assert_msg(r.exited && r.code == 1, "%s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(strstr(r.err, "char_lm: error: rank 1 did not reach MPI_I") && strstr(r.err, "within 3 s") &&
                  strstr(r.err, "(rank 0 waited there)"), "%s", r.err);
    printf("mpi: rank 0 left %.1f s after rank 1 stopped (--dist-timeout 3)\n", took);
    proc_result_free(&r);
}
END_TEST

START_TEST(test_sighup_to_one_rank)
{
    pid_t pid = start("hup", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "hup",
                               LONG_FLAGS, "--max-iters", "10000000", "--progress", "tty"));
    bool seen = wait_for(pid, "hup", 10);
    kill(seen ? rank_pid(pid, 1) : pid, seen ? SIGHUP : SIGKILL);
    proc_result r;
    finish(pid, "hup", &r);
    ck_assert_msg(seen, "no step 10: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(r.exited && r.code == 129, "%s, expected 129 from every rank\n%s", proc_status_str(&r), r.err);
    stopped_at(&r);
    ck_assert_msg(memchr(r.out, '\033', r.out_len), "--progress tty wrote no ESC [K:\n%s", r.out);   /* asked for */
    proc_result_free(&r);
}
END_TEST

/* the first evaluation (iteration 0) of 100,000 batches: SIGINT answered within a round */
START_TEST(test_sigint_during_long_evaluation)
{
    pid_t pid = start("eval", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "eval",
                                RUN_FLAGS, "--eval-iters", "100000", "--max-iters", "100"));
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/eval.out", root);
    bool seen = false;
    for (int i = 0; i < 2000 && !seen && proc_running(pid); i++) {   /* rank 0's header: the evaluation starts */
        char *out = proc_read_file(path, NULL);
        seen = out && strstr(out, "training: ");
        free(out);
        struct timespec d = {0, 10000000};
        nanosleep(&d, NULL);
    }
    double took = 0;
    if (seen) {
        struct timespec d = {0, 300000000};   /* well inside it: 100,000 batches take minutes */
        nanosleep(&d, NULL);
        pid_t r0 = rank_pid(pid, 0), r1 = rank_pid(pid, 1);
        kill(r1, SIGINT);
        took = until_gone(r0, r1, 20);
    } else {
        kill(pid, SIGKILL);
    }
    proc_result r;
    finish(pid, "eval", &r);
    ck_assert_msg(seen, "no header: %s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(took < 2, "the ranks left %.2f s after the SIGINT", took);
    ck_assert_msg(r.exited && r.code == 130, "%s\n%s", proc_status_str(&r), r.err);
    ck_assert_int_eq(stopped_at(&r), 0);
    printf("mpi: SIGINT during an evaluation answered in %.2f s\n", took);
    proc_result_free(&r);
}
END_TEST

// --- a busy run directory, a checkpoint on rank 0's disk alone, another build (issue 35) ---

/* A second job on a directory another job trains in (a checkpoint at every step of a model
 * whose files take a while to write): every attempt exits 2 naming the holder, never 1 with a
 * half-written checkpoint read by a rank that took no lock. */
START_TEST(test_second_job_on_busy_dir)
{
    pid_t pid = start("busy", A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "busy",
                                "--config", "baby", "--batch-size", "2", "--threads", "1", "--eval-interval", "1",
                                "--eval-iters", "1", "--max-iters", "10000000"));
    bool seen = wait_for(pid, "busy", 3);
    /* the attempts overlap (each waits 1 s for the lock: rundir.c), started 0.3 s apart so that
     * they still meet the holder at different points of its step and its checkpoint */
    pid_t second[8];
    char io[8][16];
    for (int i = 0; seen && i < 8; i++) {
        snprintf(io[i], sizeof io[i], "busy2_%d", i);
        second[i] = start(io[i], A(MPIRUN, "-np", "2", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "busy",
                                   "--resume", "--threads", "1", "--max-iters", "10000000"));
        nanosleep(&(struct timespec){0, 300000000}, NULL);
    }
    for (int i = 0; seen && i < 8; i++) {
        proc_result r;
        finish(second[i], io[i], &r);
        ck_assert_msg(r.exited && r.code == 2, "attempt %d: %s, expected 2\n%s", i, proc_status_str(&r), r.err);
        assert_one_error(&r, "busy is in use by another char_lm train (pid ");
        proc_result_free(&r);
    }
    kill(seen ? rank_pid(pid, 0) : pid, seen ? SIGINT : SIGKILL);
    proc_result r;
    finish(pid, "busy", &r);
    ck_assert_msg(seen && r.exited && r.code == 130, "%s\n%s", proc_status_str(&r), r.err);
    proc_result_free(&r);
}
END_TEST

/* --resume where only rank 0's disk holds the checkpoint (each rank in a directory of its own,
 * the same relative paths: hosts without a shared filesystem): rank 0 sends the rest, and the
 * run goes on as the single process's would */
START_TEST(test_resume_from_rank0_disk)
{
    char *text = proc_read_file(proc_path(root, "corpus.txt"), NULL);
    ck_assert_ptr_nonnull(text);
    for (int h = 0; h < 2; h++) {
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s/host%d", root, h);
        ck_assert_int_eq(mkdir(dir, 0755), 0);
        proc_write_file(proc_path(dir, "corpus.txt"), text, strlen(text));
    }
    free(text);
    run_all_ok((const run_spec[]){   /* the run to resume, and the one it must equal, side by side */
        {"host0/d7", A("char_lm", "train", "--data", "host0/corpus.txt", "--out", "host0/d7", LONG_FLAGS,
                       "--max-iters", "20")},
        {"d7ref", A("char_lm", "train", "--data", "corpus.txt", "--out", "d7ref", LONG_FLAGS, "--max-iters", "32")}},
        2);
    proc_result r;
    finish(start("d7r", A(MPIRUN, "-np", "1", "-wdir", "host0", "char_lm_mpi", "train", "--data", "corpus.txt",
                          "--out", "d7", "--resume", "--max-iters", "32", ":", "-np", "1", "-wdir", "host1",
                          "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "d7", "--resume", "--max-iters",
                          "32")), "d7r", &r);
    ck_assert_msg(r.exited && r.code == 0, "%s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(strstr(r.out, "resuming at iteration 20"), "%s", r.out);
    proc_result_free(&r);
    ck_assert(access(proc_path(root, "host1/d7"), F_OK) != 0);   /* rank 1 wrote nothing */
    assert_same_run("host0/d7", "d7ref", 0, 1e-5);
    assert_same_weights("host0/d7", "d7ref", 1e-5);
}
END_TEST

/* a rank of another version: every rank exits 2 within seconds, rank 0 naming both versions,
 * before anything of the run is exchanged or written */
START_TEST(test_other_build_refused)
{
    double t0 = ag_now_s();
    proc_result r;
    finish(start("ver", A(MPIRUN, "-np", "1", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "ver",
                          RUN_FLAGS, ":", "-np", "1", "char_lm_mpi_other", "train", "--data", "corpus.txt", "--out",
                          "ver", RUN_FLAGS)), "ver", &r);
    double took = ag_now_s() - t0;
    ck_assert_msg(r.exited && r.code == 2, "%s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(took < 15, "refused after %.1f s", took);
    assert_one_error(&r, "the ranks run different builds of char_lm_mpi");
    ck_assert_msg(strstr(r.err, " on rank 0, 0.0-other (protocol ") && strstr(r.err, ") on rank 1"), "%s", r.err);
    ck_assert(access(proc_path(root, "ver"), F_OK) != 0);
    proc_result_free(&r);
}
END_TEST

/* a rank whose first collective is another (an older build's MPI_Bcast): the others' joining
 * (MPI_Comm_idup in ag_dist_init) gives up at --dist-timeout with one line, instead of a
 * blocking MPI_Comm_dup that waited forever */
START_TEST(test_join_under_deadline)
{
    double t0 = ag_now_s();
    proc_result r;
    finish(start("join", A(MPIRUN, "-np", "1", "char_lm_mpi", "train", "--data", "corpus.txt", "--out", "join",
                           RUN_FLAGS, "--dist-timeout", "3", ":", "-np", "1", "dist_check", "--bcast-first")), "join", &r);
    double took = ag_now_s() - t0;
    ck_assert_msg(r.exited && r.code == 1, "%s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(took < 3 + 10, "gave up after %.1f s (--dist-timeout 3)", took);
    assert_one_error(&r, "the 2 ranks did not all join the job within 3 s (MPI_Comm_idup)");
    printf("mpi: a rank that never joins: the job ended after %.1f s (--dist-timeout 3)\n", took);
    proc_result_free(&r);
}
END_TEST

// --- examples/reverse: any model on the library's trainer gets the same split ---

/* 20 steps, evaluated at 10 and 20 (metrics.csv has char_lm's columns: iter,lr,loss,train,val) */
#define REV_FLAGS "--steps", "20", "--every", "10"

START_TEST(test_reverse_ranks_and_micro_batches)
{
    run_all_ok((const run_spec[]){
        {"v1", A("reverse", "train", "--out", "v1", REV_FLAGS)},
        {"v12", A("reverse", "train", "--out", "v12", REV_FLAGS, "--grad-accum", "2")},
        {"v21", A(MPIRUN, "-np", "2", "reverse_mpi", "train", "--out", "v21", REV_FLAGS)},
        {"vr", A(MPIRUN, "-np", "2", "reverse_mpi", "train", "--out", "vr", "--steps", "10", "--every", "10")}}, 4);
    /* the second half of vr: every rank takes rank 0's step, batch stream and weights */
    run_ok("vr2", A(MPIRUN, "-np", "2", "reverse_mpi", "train", "--out", "vr", REV_FLAGS, "--resume"));
    assert_same_run("v12", "v1", 0, 1e-5);
    assert_same_run("v21", "v1", 0, 1e-5);
    metrics r, one;   /* vr's evaluation at its resume has no train loss: its steps' losses alone */
    read_metrics("vr", &r);
    read_metrics("v1", &one);
    ck_assert_int_eq(r.n, one.n);
    for (long it = 0; it < r.n; it++)
        ck_assert_msg(fabs(r.loss[it] - one.loss[it]) <= 1e-5 * one.loss[it], "step %ld: loss %.6f resumed on 2 ranks, "
                      "%.6f alone", it, r.loss[it], one.loss[it]);
    char *best = proc_read_file(proc_path(root, "v1/best"), NULL), *best2 = proc_read_file(proc_path(root, "v21/best"), NULL);
    ck_assert_msg(best && best2 && strcmp(best, best2) == 0, "best: %s alone, %s on 2 ranks", best, best2);
    free(best);
    free(best2);
    char *out = proc_read_file(proc_path(root, "v21.out"), NULL);
    ck_assert_msg(out && strstr(out, "data parallel: 2 ranks x 1 micro-batch of 32 strings"), "v21.out:\n%s", out);
    const char *done = strstr(out, "done at step 20");
    ck_assert_msg(done && !strstr(done + 1, "done at step"), "not rank 0 alone spoke:\n%s", out);
    free(out);
}
END_TEST

/* a rank of another commit under the library's trainer (ag_train_run's handshake, ddp.h): the
 * job ends within seconds, rank 0 alone naming both builds, before DIR is made */
START_TEST(test_reverse_other_build_refused)
{
    double t0 = ag_now_s();
    proc_result r;
    finish(start("rver", A(MPIRUN, "-np", "1", "reverse_mpi", "train", "--out", "rver", REV_FLAGS, ":", "-np", "1",
                           "reverse_mpi_other", "train", "--out", "rver", REV_FLAGS)), "rver", &r);
    double took = ag_now_s() - t0;
    ck_assert_msg(r.exited && r.code == 1, "%s\n%s", proc_status_str(&r), r.err);
    ck_assert_msg(took < 15, "refused after %.1f s", took);
    const char *said = strstr(r.err, "reverse: the ranks run different builds of reverse, so none started");
    ck_assert_msg(said && !strstr(said + 1, "reverse: "), "not one error line:\n%s", r.err);
    ck_assert_msg(strstr(said, " on rank 0, 0.0-other (protocol 2, layout ") && strstr(said, ") on rank 1"), "%s", r.err);
    ck_assert(access(proc_path(root, "rver"), F_OK) != 0);
    proc_result_free(&r);
}
END_TEST

// --- the runner: the tests side by side ---

/* Each test mostly waits (mpirun's start, MPI's join, timeouts, the lock's retries): the suite
 * takes 30 s of CPU in 47 s one test at a time, 33 s two at a time (load 4-7). TEST_MPI_JOBS
 * workers (default 2) take the tests one by one from a queue, the slowest first (measured),
 * each test in a suite of its own (check forks it, as before), and print its seconds.
 * TEST_MPI_ONLY=word runs only the tests whose name holds it. */
static const TTest *const *all_tests(int *n)
{
    static const TTest *t[32];   /* 10 s down to 1 s, in make test-mpi at load 6-8 */
    int k = 0;
    t[k++] = test_second_job_on_busy_dir;
    t[k++] = test_killed_rank_ends_the_job;
    t[k++] = test_setup_error_said_once;
    t[k++] = test_equal_for_any_ranks_and_micro_batches;
    t[k++] = test_reverse_ranks_and_micro_batches;
    t[k++] = test_sigterm_to_mpirun;
    t[k++] = test_sigusr1_to_mpirun;
    t[k++] = test_stalled_rank_ends_within_deadline;
    t[k++] = test_join_under_deadline;
    t[k++] = test_resume_from_rank0_disk;
    t[k++] = test_shards_per_rank;
    t[k++] = test_tcp_only;
    t[k++] = test_ranks_must_agree;
    t[k++] = test_sigint_to_one_rank;
    t[k++] = test_batch_must_divide;
    t[k++] = test_sigint_during_long_evaluation;
    t[k++] = test_sighup_to_one_rank;
    t[k++] = test_other_build_refused;
    t[k++] = test_reverse_other_build_refused;
    *n = k;
    return t;
}

/* runs test t alone (its own root, in a child of check's); the number of its failures */
static int run_one(const TTest *t)
{
    Suite *s = suite_create("mpi");
    TCase *tc = tcase_create("ddp");
    tcase_add_checked_fixture(tc, root_setup, root_teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, t);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    double t0 = ag_now_s();
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    printf("mpi: %s: %s in %.1f s\n", t->name, failed ? "FAILED" : "passed", ag_now_s() - t0);
    fflush(stdout);   /* a test's lines in one write: two workers share the log */
    return failed;
}

/* a worker: the tests whose numbers it reads from fd until the queue is empty */
static void worker(int fd, const TTest *const *t)
{
    int failed = 0;
    unsigned char k;
    while (read(fd, &k, 1) == 1) failed += run_one(t[k]);   /* one byte at a time: no two take one */
    _exit(failed ? 1 : 0);
}

/* the queue (a pipe holding the tests' numbers), `jobs` workers on it; false if any test failed */
static bool run_tests(int jobs, int *ran)
{
    int n, q[2];
    const TTest *const *t = all_tests(&n);
    const char *only = getenv("TEST_MPI_ONLY");
    *ran = 0;
    if (pipe(q) != 0) return false;
    fcntl(q[0], F_SETFD, FD_CLOEXEC);   /* not mpirun's, nor the ranks' */
    fcntl(q[1], F_SETFD, FD_CLOEXEC);
    for (int k = 0; k < n; k++) {
        unsigned char b = (unsigned char)k;
        if ((!only || strstr(t[k]->name, only)) && write(q[1], &b, 1) == 1) ++*ran;
    }
    close(q[1]);
    fflush(NULL);
    bool ok = true;
    for (int w = 0; w < jobs; w++) {
        pid_t pid = fork();
        if (pid == 0) worker(q[0], t);
        if (pid < 0) ok = false;
    }
    close(q[0]);
    for (int status; wait(&status) > 0;)
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
    return ok;
}

static void find_program(char *out, const char *var, const char *fallback)
{
    const char *p = getenv(var);
    if (!p || !*p) p = fallback;
    if (!realpath(p, out) || access(out, X_OK) != 0) {
        fprintf(stderr, "test_mpi: %s not found (make %s, or set %s)\n", p, fallback, var);
        exit(EXIT_FAILURE);
    }
}

int main(void)
{
    find_program(char_lm, "CHAR_LM", "build/char_lm");
    find_program(char_lm_mpi, "CHAR_LM_MPI", "build/char_lm_mpi");
    find_program(char_lm_mpi_other, "CHAR_LM_MPI_OTHER", "build/char_lm_mpi_other");
    find_program(dist_check, "DIST_CHECK", "build/dist_check");
    find_program(reverse, "REVERSE", "build/reverse");
    find_program(reverse_mpi, "REVERSE_MPI", "build/reverse_mpi");
    find_program(reverse_mpi_other, "REVERSE_MPI_OTHER", "build/reverse_mpi_other");
    /* mpirun refuses root without these; each rank one thread (the ranks share the cores) */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_odls_base_sigkill_timeout", "0", 0);   /* MPIRUN_GRACE says why */
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    const char *j = getenv("TEST_MPI_JOBS");
    int jobs = j && atoi(j) > 0 ? atoi(j) : 2, ran;
    bool ok = run_tests(jobs, &ran);
    return ok && ran > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
