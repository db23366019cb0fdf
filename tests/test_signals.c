/* test_signals.c -- Ctrl-C, SIGTERM and SIGHUP during `char_lm train` (issues 5 and 12): the
 * program finishes the step it is in, writes a checkpoint, says where, and exits 130 (SIGINT),
 * 143 (SIGTERM) or 129 (SIGHUP); SIGUSR1, and SIGUSR2 given as --checkpoint-signal, the same
 * with exit 75, the code a job script requeues on (issue 35); `--resume` from that checkpoint then continues with exactly
 * the losses of a run that was never interrupted (one thread), down to identical checkpoint
 * files (but for the run identity each run draws).
 *
 * The run is long (10^7 steps of a very small model) and the signal is sent once the
 * progress line of step 10 is out, so it always lands mid-run however fast or slow the
 * machine is; the comparison run is then made just as long as the resumed one. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <limits.h>
#include <time.h>
#include <unistd.h>
#include "proc.h"
#include "tensor/debug.h"   /* ag_now_s */

static char root[64];

static void root_setup(void)
{
    strcpy(root, "/tmp/ag_signals_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void root_teardown(void) { proc_remove_tree(root); }

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})
/* the tiny preset made smaller; the schedule does not depend on --max-iters */
#define RUN_FLAGS "--config", "tiny", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", \
                  "--batch-size", "4", "--eval-iters", "1", "--threads", "1", "--warmup-iters", "20",           \
                  "--lr-decay-iters", "100000", "--eval-interval", "100000"

/* Two checkpoint files hold the same bytes, their run identities aside. */
static void assert_same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = proc_read_ckpt_file(a, &na), *y = proc_read_ckpt_file(b, &nb);
    ck_assert_msg(x && y, "missing %s or %s", a, b);
    ck_assert_msg(na == nb && memcmp(x, y, na) == 0, "%s and %s differ", a, b);
    free(x);
    free(y);
}

static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};
static const char *const sig_names[] = {"int", "term", "hup", "usr1", "usr2"};

/* the checkpoint signals (SIGUSR1 always; SIGUSR2 here as --checkpoint-signal) exit 75 */
static int expected_code(int sig) { return sig == SIGUSR1 || sig == SIGUSR2 ? 75 : 128 + sig; }

/* 1. A long run in dir, sent sig once its progress line for step 10 is out: it exits
 * expected_code(sig), says where it stopped, and leaves no temporary file. Returns the
 * iteration it stopped at. */
static long interrupt_run(const char *dir, int sig, proc_opts *o)
{
    char io[160], outfile[200];
    snprintf(io, sizeof io, "%s/run1", dir);
    const char *with = sig == SIGUSR2 ? "--checkpoint-signal" : "--max-iters";
    const char *value = sig == SIGUSR2 ? "SIGUSR2" : "10000000";
    pid_t pid = proc_start(dir, A("train", "--data", "corpus.txt", "--out", "run", RUN_FLAGS, "--max-iters", "10000000",
                                  with, value), io, o);
    snprintf(outfile, sizeof outfile, "%s.out", io);
    double t0 = ag_now_s();
    bool seen = false;
    while (!seen) {
        char *so = proc_read_file(outfile, NULL);
        seen = so && strstr(so, "iter 10/");
        free(so);
        if (seen || ag_now_s() - t0 > proc_timeout(o)) break;
        if (!proc_running(pid)) break;
        struct timespec d = {0, 5000000};
        nanosleep(&d, NULL);
    }
    if (seen) kill(pid, sig);
    else if (proc_running(pid)) kill(pid, SIGKILL);
    proc_result r;
    proc_wait(pid, io, o, &r);
    ck_assert_msg(seen, "no progress line for step 10: %s\nstdout: %s\nstderr: %s", proc_status_str(&r), r.out, r.err);
    ck_assert_msg(r.exited && r.code == expected_code(sig), "after signal %d: %s, expected exit %d\nstderr: %s", sig,
                  proc_status_str(&r), expected_code(sig), r.err);
    ck_assert_msg(strstr(r.err, "error") == NULL, "stderr: %s", r.err);
    const char *said = strstr(r.out, "interrupted at iteration ");
    ck_assert_msg(said != NULL, "stdout does not say it was interrupted:\n%s", r.out);
    long stopped = atol(said + strlen("interrupted at iteration "));
    ck_assert_msg(strstr(said, "checkpoint in run") != NULL, "stdout does not say where:\n%s", said);
    ck_assert_int_ge(stopped, 11);
    proc_result_free(&r);
    ck_assert_ptr_null(proc_find_tmp(dir));
    return stopped;
}

/* dir/run, resumed after stopping at iteration stopped, against dir/ref, never interrupted:
 * every loss the same, to the last printed digit, and the same final checkpoint. */
static void assert_same_run(const char *dir, long stopped)
{
    char run[160], ref[160];
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(ref, sizeof ref, "%s/ref", dir);
    char *a = proc_metrics_losses(run), *b = proc_metrics_losses(ref);
    ck_assert_msg(strcmp(a, b) == 0, "losses differ after resuming at %ld:\nresumed:\n%s\nuninterrupted:\n%s", stopped,
                  a, b);
    ck_assert_int_eq(proc_lines(a), 1 + (int)(stopped + 12) + 1);   /* header, steps, final evaluation */
    free(a);
    free(b);
    char run_ck[PATH_MAX], ref_ck[PATH_MAX];
    snprintf(run_ck, sizeof run_ck, "%s", proc_ckpt(run));
    snprintf(ref_ck, sizeof ref_ck, "%s", proc_ckpt(ref));
    assert_same_file(proc_path(run_ck, "model.safetensors"), proc_path(ref_ck, "model.safetensors"));
    assert_same_file(proc_path(run_ck, "train_state.safetensors"), proc_path(ref_ck, "train_state.safetensors"));
}

START_TEST(test_signal_then_resume)
{
    int sig = sigs[_i];
    char dir[128], io[160];
    snprintf(dir, sizeof dir, "%s/%s", root, sig_names[_i]);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    size_t n;
    char *text = proc_make_corpus(3000, &n);
    proc_write_file(proc_path(dir, "corpus.txt"), text, n);
    free(text);
    proc_opts o = {.no_wrap = true};

    /* 1. a long run, interrupted after its 10th step */
    long stopped = interrupt_run(dir, sig, &o);

    /* 2. the checkpoint it wrote is whole: it samples */
    proc_result r;
    snprintf(io, sizeof io, "%s/sample", dir);
    proc_run(dir, A("sample", "--ckpt", "run", "--max-new-tokens", "5"), io, &o, &r);
    ck_assert_msg(r.exited && r.code == 0, "sample: %s\n%s", proc_status_str(&r), r.err);
    proc_result_free(&r);

    /* 3. resume it for 12 more steps; 4. the same run, never interrupted */
    char iters[32];
    snprintf(iters, sizeof iters, "%ld", stopped + 12);
    snprintf(io, sizeof io, "%s/resume", dir);
    proc_run(dir, A("train", "--data", "corpus.txt", "--out", "run", "--resume", "--threads", "1", "--max-iters", iters),
             io, &o, &r);
    ck_assert_msg(r.exited && r.code == 0, "resume: %s\n%s", proc_status_str(&r), r.err);
    char resuming[64];
    snprintf(resuming, sizeof resuming, "resuming at iteration %ld", stopped);
    ck_assert_msg(strstr(r.out, resuming) != NULL, "resume did not start at %ld:\n%s", stopped, r.out);
    proc_result_free(&r);
    snprintf(io, sizeof io, "%s/ref", dir);
    proc_run(dir, A("train", "--data", "corpus.txt", "--out", "ref", RUN_FLAGS, "--max-iters", iters), io, &o, &r);
    ck_assert_msg(r.exited && r.code == 0, "reference run: %s\n%s", proc_status_str(&r), r.err);
    proc_result_free(&r);
    assert_same_run(dir, stopped);
    proc_remove_tree(dir);
}
END_TEST

Suite *signals_suite(void)
{
    Suite *s = suite_create("signals");
    TCase *tc = tcase_create("interrupt");
    tcase_add_unchecked_fixture(tc, root_setup, root_teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_signal_then_resume, 0, 5);
    suite_add_tcase(s, tc);
    return s;
}
