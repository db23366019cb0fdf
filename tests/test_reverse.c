/* test_reverse.c -- examples/reverse, the second program on the library's trainer
 * (ag_train_run, src/train/train.h), run as a child process (proc.h runs $CHAR_LM: this suite
 * points it at $REVERSE, or build/reverse):
 *
 *   learns   300 steps (a few seconds) reach, on held-out strings of 3 to 12 letters, an exact
 *            match of 0.03 or more (0.084 measured; chance is 26^-3 or less) and 0.4 of the
 *            letters right (0.53); the same model without the key-padding mask reaches 0.001
 *            and 0.24 (0.0005 and 0.24 after 1000 steps: the padded slots hold random letters,
 *            so without the mask the string's length is lost). `reverse serve` on that run
 *            answers each string of its card's sample as the card does.
 *   kill     a run killed by SIGKILL (REVERSE_FAULT, at points inside its checkpoints, and at a
 *            random instant) resumes with --resume and ends at the same step with exactly the
 *            weights and optimizer state of a run that was never killed.
 *   signal   SIGTERM ends a run with a checkpoint and exit 143; a --time-budget ends in time.
 *   errors   bad flags (the trainer's, ag_train_flag's, and serve's), a second fresh run over a
 *            run, a --resume with nothing to resume, a --grad-accum that does not divide the
 *            batch: one line and a non-zero exit.
 *   run dir  the library's rules for a run directory (ckpt_keep.c), which the trainer gives any
 *            program: a latest deleted by hand is found again by --resume, which says so; a
 *            run removes its own superseded checkpoints and nothing else (another run's
 *            checkpoint, a user's files stay, named in a warning; a save where a user's
 *            directory is refused); checkpoints of two runs and no latest are refused; no --out
 *            inside a run directory.
 *   card     DIR/report.md after a run and after its --resume: the machine, the commit, the
 *            program's config and the trainer's options, steps (those of this run), strings/s,
 *            the final losses and exact match, the best checkpoint (a directory there);
 *            a sample of 4 held-out strings answered; loss.png's dashed ln V line (ln 26, a
 *            uniform guess over the letters).
 *   dynamics --log-dynamics: dynamics.csv's columns for the 2 layers and its rows (every 10
 *            steps and the last), dynamics.png.
 *   lr_find  --lr-find and --log-activations, the library's (src/train/lr_range.c, activations.c)
 *            on this client: the sweep's steepest lr inside its range, lr_find.csv's rows,
 *            activations.csv's header and a row per evaluation, the scores read through the
 *            key-padding mask. */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "proc.h"
#include "tensor/debug.h"   /* ag_now_s */

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})

static char root[64];

static void setup(void)
{
    const char *bin = getenv("REVERSE");
    setenv("CHAR_LM", bin && *bin ? bin : "build/reverse", 1);   /* proc.h's binary */
    strcpy(root, "/tmp/ag_reverse_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
}

static void teardown(void) { proc_remove_tree(root); }

/* `reverse args...` in root, expected to exit with code; its result in r (free it). */
static void run_expect(const char *const *args, int code, const char *const *env, proc_result *r)
{
    const proc_opts o = {.env = env, .timeout_s = 600};
    proc_run(root, args, proc_path(root, "io"), &o, r);
    ck_assert_msg(r->exited && r->code == code, "reverse %s: %s (expected exit %d); stderr: %s", args[0],
                  proc_status_str(r), code, r->err);
}

/* The held-out figure named what (e.g. "exact match ", "per letter ") that `reverse eval --out
 * dir` prints. */
static double eval_figure(const char *dir, const char *what)
{
    proc_result r;
    run_expect(A("eval", "--out", dir), 0, NULL, &r);
    const char *at = strstr(r.out, what);
    ck_assert_msg(at != NULL, "eval printed no '%s': %s", what, r.out);
    double v = atof(at + strlen(what));
    proc_result_free(&r);
    return v;
}

/* `reverse serve` on the run dir, asked as a browser asks: the run at its step (iter), and each
 * string of the card's sample (the same weights, another batch) answered as the card answers
 * it, letter by letter; a prompt not of letters a-z refused with 400; SIGTERM ends it, 143. */
static void serve_answers(const char *dir, const char *iter)
{
    pid_t pid = proc_start(root, A("serve", "--run", dir, "--port", "0"), proc_path(root, "serve"), NULL);
    int port = proc_wait_port(pid, proc_path(root, "serve.out"));
    proc_reply r = proc_http(port, "127.0.0.1", "GET", "/api/run", NULL);
    ck_assert_msg(r.status == 200 && strstr(r.body, iter), "/api/run: %d %.300s", r.status, r.body);
    free(r.body);
    char *md = proc_read_file(proc_path(proc_path(root, dir), "report.md"), NULL);
    const char *line = md ? strstr(md, "## Sample\n\n") : NULL;
    ck_assert_msg(line != NULL, "no sample in %s/report.md", dir);
    line += strlen("## Sample\n\n");
    for (int k = 0; k < 4; k++, line = strchr(line, '\n') + 1) {
        char in[16], out[16], ask[96], want[64];
        ck_assert_msg(sscanf(line, "    %15s -> %15s", in, out) == 2, "sample line %d: %.80s", k, line);
        snprintf(ask, sizeof ask, "{\"prompt\": \"%s\", \"stream\": false}", in);
        snprintf(want, sizeof want, "\"text\":\"%s\"", out);
        r = proc_http(port, "127.0.0.1", "POST", "/api/sample", ask);
        ck_assert_msg(r.status == 200 && strstr(r.body, want), "%s: the card answers %s, serve %d %.300s", in, out,
                      r.status, r.body);
        free(r.body);
    }
    free(md);
    r = proc_http(port, "127.0.0.1", "POST", "/api/sample", "{\"prompt\": \"abC\"}");
    ck_assert_msg(r.status == 400 && strstr(r.body, "1 to 12 letters a-z"), "abC: %d %.300s", r.status, r.body);
    free(r.body);
    kill(pid, SIGTERM);
    proc_result pr;
    proc_wait(pid, proc_path(root, "serve"), NULL, &pr);
    ck_assert_msg(pr.exited && pr.code == 143 && pr.err_len == 0, "serve after SIGTERM: %s: %s", proc_status_str(&pr),
                  pr.err);
    proc_result_free(&pr);
}

START_TEST(learns)
{
    proc_result r;
    run_expect(A("train", "--out", "a", "--steps", "300", "--every", "100"), 0, NULL, &r);
    proc_result_free(&r);
    double acc = eval_figure(proc_path(root, "a"), "held-out exact match ");
    double letters = eval_figure(proc_path(root, "a"), "per letter ");
    ck_assert_msg(acc >= 0.03 && letters >= 0.4, "after 300 steps, held-out exact match %.4f and %.4f of the letters "
                  "right: it should be >= 0.03 and >= 0.4 (without the key-padding mask the model reaches 0.001 "
                  "and 0.24)", acc, letters);
    struct stat sb;
    ck_assert_msg(stat(proc_path(root, "a/metrics.csv"), &sb) == 0 && stat(proc_path(root, "a/best"), &sb) == 0,
                  "metrics.csv or best missing");
    serve_answers("a", "\"iter\":300,");
}
END_TEST

/* The two files of dir's latest checkpoint are those of the same files under ref (each run's
 * own run_id aside). */
static void assert_same_ckpt(const char *dir_in, const char *ref_in)
{
    const char *files[] = {"model.safetensors", "state.safetensors"};
    char dir[1024], ref[1024];   /* proc_path's buffers rotate */
    snprintf(dir, sizeof dir, "%s", dir_in);
    snprintf(ref, sizeof ref, "%s", ref_in);
    for (int i = 0; i < 2; i++) {
        char a[4200], b[4200];
        snprintf(a, sizeof a, "%s/%s", proc_ckpt(dir), files[i]);
        snprintf(b, sizeof b, "%s/%s", proc_ckpt(ref), files[i]);
        size_t na, nb;
        char *x = proc_read_ckpt_file(a, &na), *y = proc_read_ckpt_file(b, &nb);   /* but their run_id */
        ck_assert_msg(x && y && na == nb && memcmp(x, y, na) == 0, "%s differs from the unbroken run's %s", a, b);
        free(x);
        free(y);
    }
}

/* dir's metrics.csv is that of ref, byte for byte (a resume's train_loss too). */
static void assert_same_metrics(const char *dir, const char *ref)
{
    char a[1100], b[1100];
    snprintf(a, sizeof a, "%s/metrics.csv", dir);
    snprintf(b, sizeof b, "%s/metrics.csv", ref);
    char *x = proc_read_file(a, NULL), *y = proc_read_file(b, NULL);
    ck_assert_msg(x && y, "%s or %s missing", a, b);
    size_t at = 0;   /* the first line that differs, shown */
    for (size_t i = 0; x[i] && x[i] == y[i]; i++)
        if (x[i] == '\n') at = i + 1;
    ck_assert_msg(strcmp(x, y) == 0, "%s differs from the unbroken run's from its line\n%.80s\nunbroken:\n%.80s", a,
                  x + at, y + at);
    free(x);
    free(y);
}

/* The ckpt-N directories in dir. */
static int count_ckpts(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) n += strncmp(e->d_name, "ckpt-", 5) == 0;
    if (d) closedir(d);
    return n;
}

#define KILL_RUN "--steps", "40", "--every", "10"

/* Killed at the k-th fault point (REVERSE_FAULT=k: inside a checkpoint's writes and renames),
 * then resumed: the same end as the unbroken run "ref". */
START_TEST(fault_then_resume)
{
    proc_result r;
    run_expect(A("train", "--out", "ref", KILL_RUN), 0, NULL, &r);
    proc_result_free(&r);
    const char *points[] = {"REVERSE_FAULT=14", "REVERSE_FAULT=33", "REVERSE_FAULT=rename"};
    for (int i = 0; i < 3; i++) {
        char dir[16];
        snprintf(dir, sizeof dir, "k%d", i);
        const proc_opts o = {.env = A(points[i]), .timeout_s = 600};
        proc_run(root, A("train", "--out", dir, KILL_RUN), proc_path(root, "io"), &o, &r);
        ck_assert_msg(r.signaled && r.sig == SIGKILL, "%s: %s, not killed", points[i], proc_status_str(&r));
        proc_result_free(&r);
        struct stat sb;   /* killed before the first checkpoint's commit: nothing to resume, a fresh run */
        bool has = stat(proc_path(proc_path(root, dir), "latest"), &sb) == 0;
        run_expect(has ? A("train", "--out", dir, KILL_RUN, "--resume") : A("train", "--out", dir, KILL_RUN), 0, NULL,
                   &r);
        ck_assert_msg(strstr(r.out, "done at step 40") != NULL, "%s: resumed run did not end at 40: %s", points[i],
                      r.out);
        proc_result_free(&r);
        assert_same_ckpt(proc_path(root, dir), proc_path(root, "ref"));
        char at[1024];   /* proc_find_tmp turns proc_path's buffers */
        snprintf(at, sizeof at, "%s/%s", root, dir);
        assert_same_metrics(at, proc_path(root, "ref"));
        const char *left = proc_find_tmp(at);
        ck_assert_msg(left == NULL, "%s: a leftover %s", points[i], left);
        ck_assert_int_eq(count_ckpts(at), count_ckpts(proc_path(root, "ref")));
    }
}
END_TEST

/* Started in the background; sig sent once its first checkpoint exists and some random
 * milliseconds more. */
static pid_t start_and_signal(const char *dir, const char *const *args, int sig)
{
    pid_t pid = proc_start(root, args, proc_path(root, "bg"), NULL);
    double t0 = ag_now_s();
    struct stat sb;
    while (stat(proc_path(root, dir), &sb) != 0 || stat(proc_path(proc_path(root, dir), "latest"), &sb) != 0) {
        ck_assert_msg(ag_now_s() - t0 < 300 && proc_running(pid), "no checkpoint appeared");
        usleep(10000);
    }
    srand((unsigned)time(NULL));
    usleep((useconds_t)(rand() % 300) * 1000);
    kill(pid, sig);
    return pid;
}

START_TEST(kill9_at_random_then_resume)
{
    proc_result r;
    run_expect(A("train", "--out", "ref", "--steps", "120", "--every", "5"), 0, NULL, &r);
    proc_result_free(&r);
    pid_t pid = start_and_signal("k", A("train", "--out", "k", "--steps", "120", "--every", "5"), SIGKILL);
    proc_wait(pid, proc_path(root, "bg"), NULL, &r);
    proc_result_free(&r);
    run_expect(A("train", "--out", "k", "--steps", "120", "--every", "5", "--resume"), 0, NULL, &r);
    ck_assert_msg(strstr(r.out, "done at step 120") != NULL, "resumed run did not end at 120: %s", r.out);
    proc_result_free(&r);
    assert_same_ckpt(proc_path(root, "k"), proc_path(root, "ref"));
    char at[1024];
    snprintf(at, sizeof at, "%s/k", root);
    assert_same_metrics(at, proc_path(root, "ref"));
}
END_TEST

START_TEST(sigterm_checkpoints)
{
    pid_t pid = start_and_signal("s", A("train", "--out", "s", "--steps", "1000000", "--every", "20"), SIGTERM);
    proc_result r;
    proc_wait(pid, proc_path(root, "bg"), NULL, &r);
    ck_assert_msg(r.exited && r.code == 143, "SIGTERM: %s (expected exit 143); %s", proc_status_str(&r), r.err);
    const char *at = strstr(r.out, "stopped at step ");
    ck_assert_msg(at != NULL, "no 'stopped at step' line: %s", r.out);
    long step = atol(at + strlen("stopped at step "));
    char want[64];
    snprintf(want, sizeof want, "ckpt-%08ld", step);
    ck_assert_msg(strstr(proc_ckpt(proc_path(root, "s")), want) != NULL, "latest is %s, not %s",
                  proc_ckpt(proc_path(root, "s")), want);
    proc_result_free(&r);
}
END_TEST

START_TEST(time_budget)
{
    double t0 = ag_now_s();
    proc_result r;
    run_expect(A("train", "--out", "b", "--steps", "1000000", "--every", "50", "--time-budget", "3"), 0, NULL, &r);
    double took = ag_now_s() - t0;
    ck_assert_msg(strstr(r.out, "out of time at step ") != NULL, "no 'out of time' line: %s", r.out);
    ck_assert_msg(took < 3 + 3, "a budget of 3 s took %.1f s", took);   /* startup and a loaded machine */
    proc_result_free(&r);
    struct stat sb;
    ck_assert_int_eq(stat(proc_path(root, "b/latest"), &sb), 0);
}
END_TEST

#define HAS(text, want) ck_assert_msg(strstr(text, want), "no '%s' in report.md:\n%s", want, text)

/* The number after want in text (want must be there). */
static double after(const char *text, const char *want)
{
    HAS(text, want);
    return atof(strstr(text, want) + strlen(want));
}

/* dir/report.md, the card of the run that ended there (issue 31): every field present with a
 * plausible value; steps those of the run, best an existing checkpoint. Free it. */
static char *card_of(const char *dir, const char *steps)
{
    char *md = proc_read_file(proc_path(proc_path(root, dir), "report.md"), NULL);
    ck_assert_msg(md != NULL, "no %s/report.md", dir);
    HAS(md, "# reverse: report card\n");
    HAS(md, "| CPU | ");
    ck_assert_msg(after(md, "| cores | ") >= 1, "cores: %s", md);
    HAS(md, " online, 1 threads used |");
    HAS(md, "| BLAS | ");
    HAS(md, "| attograd kernels | fast, float |");
    HAS(md, "\ncommit ");
    HAS(md, "| d_model | 64 |\n");
    HAS(md, "| train.grad_clip | 1 |\n");
    HAS(md, steps);
    double rate = after(md, "| strings/s | "), train = after(md, "| final loss | train "), val = after(strstr(md, "| final loss |"), ", val ");
    ck_assert_msg(rate > 0 && train > 0 && train < 10 && val > 0 && val < 10, "rate %g, losses %g %g", rate, train, val);
    double acc = after(md, "| final exact match | ");
    ck_assert_msg(acc >= 0 && acc <= 1, "exact match %g", acc);
    char best[64] = "";
    ck_assert_msg(sscanf(strstr(md, "| best checkpoint | ") + strlen("| best checkpoint | "), "%63[a-z0-9-]", best) == 1, "%s", md);
    struct stat sb;
    ck_assert_msg(strncmp(best, "ckpt-", 5) == 0 && stat(proc_path(proc_path(root, dir), best), &sb) == 0 &&
                  S_ISDIR(sb.st_mode), "best checkpoint '%s' is not a directory in %s", best, dir);
    if (stat(proc_path(proc_path(root, dir), "loss.png"), &sb) == 0) HAS(md, "![loss.png](loss.png)\n");
    return md;
}

START_TEST(report_card)
{
    proc_result r;
    run_expect(A("train", "--out", "c", "--steps", "30", "--every", "10"), 0, NULL, &r);
    proc_result_free(&r);
    char *md = card_of("c", "| steps | 30 in this run, ending at iteration 30 |\n");
    HAS(md, "| train.resume | no |\n");
    const char *line = strstr(md, "## Sample\n\n");   /* 4 held-out strings, 5 letters or more, answered */
    ck_assert_msg(line != NULL, "no sample: %s", md);
    line += strlen("## Sample\n\n");
    for (int k = 0; k < 4; k++, line = strchr(line, '\n') + 1) {
        char in[16], out[16], verdict[8];
        ck_assert_msg(sscanf(line, "    %15s -> %15s %7s", in, out, verdict) == 3 && strlen(in) >= 5 &&
                      strlen(out) == strlen(in) && (!strcmp(verdict, "right") || !strcmp(verdict, "wrong")),
                      "sample line %d: %.80s", k, line);
    }
    free(md);
    struct stat sb;   /* no --log-dynamics, no dynamics */
    ck_assert_int_ne(stat(proc_path(root, "c/dynamics.csv"), &sb), 0);
    char *gp = proc_read_file(proc_path(root, "c/loss.gp"), NULL);   /* written with or without gnuplot */
    ck_assert_msg(gp && strstr(gp, "plot 3.258097 with lines dt 2 ") && strstr(gp, "title 'ln V = ln 26: every "
                  "letter equally likely'"), "loss.gp has no ln V line (ln 26 = 3.258097): %s", gp);
    free(gp);
    run_expect(A("train", "--out", "c", "--steps", "40", "--every", "10", "--resume"), 0, NULL, &r);
    proc_result_free(&r);
    md = card_of("c", "| steps | 10 in this run, ending at iteration 40 |\n");
    HAS(md, "| train.steps | 40 |\n");
    HAS(md, "| train.resume | yes |\n");
    free(md);
}
END_TEST

/* --log-dynamics: dir/dynamics.csv has the header of 2 layers and a row at steps 0, 10, 20
 * and the last, 24, every figure plausible; dynamics.png beside loss.png, on the card. */
START_TEST(log_dynamics)
{
    proc_result r;
    run_expect(A("train", "--out", "d", "--steps", "25", "--every", "10", "--log-dynamics"), 0, NULL, &r);
    proc_result_free(&r);
    char *csv = proc_read_file(proc_path(root, "d/dynamics.csv"), NULL);
    ck_assert_msg(csv != NULL, "no d/dynamics.csv");
    const char *head = "iter,lr,grad_norm,clip,grad_attn_L0,grad_mlp_L0,update_attn_L0,update_mlp_L0,"
                       "grad_attn_L1,grad_mlp_L1,update_attn_L1,update_mlp_L1\n";
    ck_assert_msg(strncmp(csv, head, strlen(head)) == 0, "header: %s", csv);
    const long iters[] = {0, 10, 20, 24};
    const char *row = csv + strlen(head);
    for (int k = 0; k < 4; k++, row = strchr(row, '\n') + 1) {
        double v[13];
        int n = 0, used;
        const char *p = row;
        while (n < 13 && sscanf(p, "%lf%n", &v[n], &used) == 1 && p[used] == (n < 11 ? ',' : '\n')) p += used + 1, n++;
        ck_assert_msg(n == 12 && v[0] == iters[k], "row %d: '%.*s'", k, (int)strcspn(row, "\n"), row);
        ck_assert_msg(v[1] > 0 && v[2] > 0 && v[3] > 0 && v[3] <= 1, "lr, norm, clip: '%.120s'", row);
        for (int c = 4; c < 12; c++)   /* ||dW|| under the whole norm; a step moves 1e-4 .. 1 of W */
            ck_assert_msg(v[c] > 0 && (c >= 8 || v[c] <= v[2]) && (c < 8 || (v[c] > 1e-4 && v[c] < 1)),
                          "column %d: '%.120s'", c + 1, row);
    }
    ck_assert_msg(*row == '\0', "more rows than 4: %s", row);
    free(csv);
    struct stat sb;
    char *md = proc_read_file(proc_path(root, "d/report.md"), NULL);
    ck_assert_ptr_nonnull(md);
    HAS(md, "| train.log_dynamics | 10 |\n");
    if (stat(proc_path(root, "d/loss.png"), &sb) == 0) {   /* with gnuplot */
        ck_assert_int_eq(stat(proc_path(root, "d/dynamics.png"), &sb), 0);
        HAS(md, "![dynamics.png](dynamics.png)\n");
    }
    free(md);
}
END_TEST

/* --lr-find 1e-5 over 40 steps and --log-activations, evaluations at 20 and 40: the run prints
 * the steepest lr, inside [1e-5, 3e-3]; lr_find.csv holds the 40 steps; activations.csv the
 * header of 2 blocks and 2 rows, each with a residual stream and a range of scores. A run with
 * --log-activations alone has the metrics.csv of a run without it. */
START_TEST(lr_find_and_activations)
{
    proc_result r;
    run_expect(A("train", "--out", "f", "--steps", "40", "--every", "20", "--lr-find", "1e-5", "--log-activations"), 0,
               NULL, &r);
    const char *at = strstr(r.out, "lr-find over 40 steps: the loss falls fastest at lr ");
    ck_assert_msg(at != NULL, "no lr-find line: %s", r.out);
    double steepest = atof(at + strlen("lr-find over 40 steps: the loss falls fastest at lr "));
    ck_assert_msg(steepest > 1e-5 && steepest < 3e-3, "steepest lr %g outside the sweep", steepest);
    proc_result_free(&r);
    char *lf = proc_read_file(proc_path(root, "f/lr_find.csv"), NULL);
    ck_assert_msg(lf && strncmp(lf, "lr,loss,smoothed\n", 17) == 0 && proc_lines(lf) == 41, "lr_find.csv: %.200s", lf);
    free(lf);
    char *csv = proc_read_file(proc_path(root, "f/activations.csv"), NULL);
    const char *head = "iter,rms_in,rms_L0,act_mean_L0,act_std_L0,act_dead_L0,score_min_L0,score_max_L0,"
                       "rms_L1,act_mean_L1,act_std_L1,act_dead_L1,score_min_L1,score_max_L1\n";
    ck_assert_msg(csv && strncmp(csv, head, strlen(head)) == 0 && proc_lines(csv) == 3, "activations.csv: %s", csv);
    const char *row = csv + strlen(head);
    for (int k = 0; k < 2; k++, row = strchr(row, '\n') + 1) {
        double v[14];
        int n = 0, used;
        for (const char *p = row; n < 14 && sscanf(p, "%lf%n", &v[n], &used) == 1; p += used + 1) n++;
        ck_assert_msg(n == 14 && v[0] == 20 * (k + 1), "row %d: %.200s", k, row);
        ck_assert_msg(v[1] > 0 && v[2] > 0 && v[8] > 0, "rms: %.200s", row);
        ck_assert_msg(v[6] < v[7] && v[12] < v[13], "scores' ranges: %.200s", row);   /* read through the mask */
    }
    free(csv);
    const char *dirs[2] = {"g", "h"};   /* the reading has a batch stream of its own: the run is the same */
    char *metrics[2];
    for (int k = 0; k < 2; k++) {
        run_expect(A("train", "--out", dirs[k], "--steps", "20", "--every", "10", k ? "--seed" : "--log-activations",
                     k ? "1" : NULL), 0, NULL, &r);
        proc_result_free(&r);
        metrics[k] = proc_read_file(proc_path(root, k ? "h/metrics.csv" : "g/metrics.csv"), NULL);
    }
    ck_assert_msg(metrics[0] && metrics[1] && !strcmp(metrics[0], metrics[1]), "--log-activations changed the run");
    free(metrics[0]);
    free(metrics[1]);
}
END_TEST

START_TEST(bad_inputs)
{
    const struct { const char *const *args; int code; const char *says; } cases[] = {
        {A("train"), 2, "--out DIR is required"},
        {A("fly", "--out", "x"), 2, "the command is train, eval or serve"},
        {A("eval", "--out", "x", "--steps", "3"), 2, "bad argument '--steps'"},
        {A("train", "--out", "x", "--grad-accum", "65"), 2, "bad argument '--grad-accum': 65"},
        {A("serve", "--port", "1"), 2, "--run is required"},
        {A("serve", "--run", "none"), 1, "none"},
        {A("train", "--out", "x", "--steps", "ten"), 2, "bad argument '--steps'"},
        {A("train", "--out", "x", "--steps"), 2, "(it needs a value)"},
        {A("eval", "--out", "none"), 1, "cannot open"},
        {A("train", "--out", "x", "--resume"), 1, "has no checkpoint to resume"},
        {A("train", "--out", "x", "--grad-accum", "3"), 1, "64 strings is not a multiple of 1 rank x --grad-accum 3"},
        {A("train", "--out", "x", "--grad-accum", "0"), 2, "bad argument '--grad-accum'"},
        {A("train", "--out", "x", "--lr-find", "0.01"), 2, "--lr-find LO must be below the learning rate 0.003"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        proc_result r;
        run_expect(cases[i].args, cases[i].code, NULL, &r);
        ck_assert_msg(strstr(r.err, cases[i].says) && strncmp(r.err, "reverse: ", 9) == 0,
                      "case %zu: stderr '%s' does not say '%s'", i, r.err, cases[i].says);
        proc_result_free(&r);
    }
    proc_result r;
    run_expect(A("train", "--out", "y", "--steps", "2"), 0, NULL, &r);
    proc_result_free(&r);
    run_expect(A("train", "--out", "y", "--steps", "2"), 1, NULL, &r);   /* a second fresh run over it */
    ck_assert_msg(strstr(r.err, "already holds a checkpoint: --resume continues it") && proc_lines(r.err) == 1,
                  "stderr: %s", r.err);
    proc_result_free(&r);
}
END_TEST

/* `reverse args...` exits with code and its stdout (out) or stderr says what. */
static void expect_says(const char *const *args, int code, bool out, const char *what)
{
    proc_result r;
    run_expect(args, code, NULL, &r);
    ck_assert_msg(strstr(out ? r.out : r.err, what) != NULL, "reverse %s %s: does not say '%s': %s", args[0], args[2],
                  what, out ? r.out : r.err);
    proc_result_free(&r);
}

/* DIR/name exists (under root). */
static bool there(const char *name)
{
    struct stat sb;
    return stat(proc_path(root, name), &sb) == 0;
}

START_TEST(run_dir_kept)
{
    expect_says(A("train", "--out", "a", "--steps", "20", "--every", "10"), 0, true, "done at step 20");
    ck_assert_int_eq(unlink(proc_path(root, "a/latest")), 0);   /* lost by hand */
    expect_says(A("train", "--out", "a", "--steps", "30", "--every", "10", "--resume"), 0, true,
                "a/latest was missing: it names ckpt-00000020 again");
    ck_assert_msg(strstr(proc_ckpt(proc_path(root, "a")), "ckpt-00000030"), "latest: %s", proc_ckpt(proc_path(root, "a")));
    expect_says(A("train", "--out", "b", "--steps", "10", "--every", "10"), 0, true, "done at step 10");
    char from[1024];   /* another run's whole checkpoint, and a user's files, in a */
    snprintf(from, sizeof from, "%s", proc_path(root, "b/ckpt-00000010"));
    proc_copy_tree(from, proc_path(root, "a/ckpt-00000005"));
    proc_write_file(proc_path(root, "a/notes.txt"), "mine\n", 5);
    ck_assert_int_eq(mkdir(proc_path(root, "a/ckpt-00000099"), 0777), 0);
    proc_write_file(proc_path(root, "a/ckpt-00000099/model.safetensors"), "mine\n", 5);
    expect_says(A("train", "--out", "a", "--steps", "40", "--every", "10", "--resume"), 0, true,
                "left alone (not this run's to remove): ckpt-00000099 (not a whole checkpoint), ckpt-00000005 "
                "(another run's)");
    ck_assert_msg(there("a/ckpt-00000005/model.safetensors") && there("a/ckpt-00000005/state.safetensors") &&
                  there("a/notes.txt") && there("a/ckpt-00000099/model.safetensors") && there("a/ckpt-00000040") &&
                  !there("a/ckpt-00000030"), "a run removed what was not its own, or kept its superseded one");
    ck_assert_int_eq(mkdir(proc_path(root, "a/ckpt-00000050"), 0777), 0);   /* a user's, where step 50 would go */
    proc_write_file(proc_path(root, "a/ckpt-00000050/state.safetensors"), "mine\n", 5);
    expect_says(A("train", "--out", "a", "--steps", "50", "--every", "10", "--resume"), 1, false,
                "ckpt-00000050: cannot save step 50 there: it is not this run's to remove");
    ck_assert_msg(there("a/ckpt-00000050/state.safetensors") && strstr(proc_ckpt(proc_path(root, "a")), "ckpt-00000040"),
                  "a save took a directory that was not its own, or latest moved");
    ck_assert_int_eq(unlink(proc_path(root, "a/latest")), 0);   /* two runs' checkpoints: which one is not guessed */
    expect_says(A("train", "--out", "a", "--steps", "50", "--resume"), 1, false, "holds the checkpoints of several runs");
    proc_write_file(proc_path(root, "a/latest"), "ckpt-00000040\n", 14);
    expect_says(A("train", "--out", "a", "--steps", "50"), 1, false, "already holds a checkpoint: --resume");
    expect_says(A("train", "--out", "a/ckpt-00000040/x", "--steps", "2"), 1, false,
                "lies inside the run directory");
    ck_assert_msg(!there("a/ckpt-00000040/x"), "a run was made inside another");
}
END_TEST

Suite *reverse_suite(void)
{
    Suite *s = suite_create("reverse");
    TCase *tc = tcase_create("reverse");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, learns);
    tcase_add_test(tc, fault_then_resume);
    tcase_add_test(tc, kill9_at_random_then_resume);
    tcase_add_test(tc, sigterm_checkpoints);
    tcase_add_test(tc, time_budget);
    tcase_add_test(tc, bad_inputs);
    tcase_add_test(tc, run_dir_kept);
    tcase_add_test(tc, report_card);
    tcase_add_test(tc, log_dynamics);
    tcase_add_test(tc, lr_find_and_activations);
    suite_add_tcase(s, tc);
    return s;
}
