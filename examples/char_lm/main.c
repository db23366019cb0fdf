/* main.c -- the char_lm program: the only code that prints errors and picks exit codes.
 *
 *   char_lm train  --data FILE --out DIR [--config tiny|baby|small] [flags]   (see --help)
 *   char_lm sample --ckpt DIR [--from latest|best] [--prompt TEXT] [--max-new-tokens N] [--temperature F]
 *                  [--top-k N] [--seed N]
 *   char_lm eval   --ckpt DIR [--from latest|best] --data FILE
 *   char_lm attn   --ckpt DIR [--from latest|best] --prompt TEXT [--layer L] [--head H] --out FILE.png
 * train, sample and eval take --trace-shapes (one forward pass printed op by op first) and
 * --trace-only (the trace, then stop).
 *
 * Exit codes: 0 success; 2 a usage error (bad flag or value, or arguments that do not fit the
 * data or the checkpoint: AG_ERR_ARG); 1 any other error (a file that cannot be read, a corrupt
 * checkpoint, a non-finite loss or a diverged run, an output that cannot be written, even
 * stdout after --help); 130 / 143 / 129 stopped by SIGINT / SIGTERM / SIGHUP (train after
 * writing a checkpoint, sample after the character in hand, attn with its gnuplot killed). Every error is one line on stderr: "char_lm: error: ...". A second `train` on a
 * directory in use is a usage error (2), naming the pid that holds it. */
#define _GNU_SOURCE   /* sched_getaffinity, CPU_COUNT: the cores mpirun bound a rank to */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attn.h"
#include "checkpoint.h"
#include "cli.h"
#include "eval.h"
#include "omp_spin.h"
#include "plot.h"
#include "sample.h"
#include "trace.h"
#include "train.h"

static volatile sig_atomic_t stop_signal = 0;

static void on_signal(int sig) { stop_signal = sig; }

/* One line on stderr, always: a path, a flag value or a name read from a file may hold a line
 * break or an escape sequence, so control bytes are written as \n or \xNN. Returns the exit
 * code of status s. */
static int fail(ag_status s, const ag_error *e)
{
    char line[16 + 4 * sizeof e->msg + 2] = "char_lm: error: ";   /* one write: under mpirun, */
    size_t n = strlen(line);                                       /* another's output cannot cut it */
    for (const unsigned char *p = (const unsigned char *)e->msg; *p; p++) {
        if (*p == '\n') n += (size_t)snprintf(line + n, sizeof line - n, "\\n");
        else if (*p < 0x20 || *p == 0x7F) n += (size_t)snprintf(line + n, sizeof line - n, "\\x%02X", *p);
        else line[n++] = (char)*p;
    }
    line[n++] = '\n';
    fwrite(line, 1, n, stderr);
    return s == AG_ERR_ARG ? 2 : 1;
}

/* --threads, or 2, or fewer when the machine has fewer cores (ag_threads_init: OpenMP runs
 * everything, OpenBLAS stays single-threaded). */
static void set_threads(int threads)
{
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores >= 1 && cores < 2 ? (int)cores : 2;
    }
    ag_threads_init(threads);
}

/* mpirun binds each rank to one core unless told otherwise (np <= 2), and then a rank's threads
 * share that core: the layout of one rank per host with a thread per core needs
 * --map-by ppr:1:node:PE=T or --bind-to none (docs/distributed.md). Rank 0 says so. */
static void warn_bound(const ag_dist *d, int threads)
{
#ifndef __linux__   /* sched_getaffinity is Linux's (none on macOS): no warning there */
    (void)d, (void)threads;
#else
    cpu_set_t set;
    if (ag_dist_rank(d) != 0 || (ag_dist_size(d) == 1 && !getenv("OMPI_COMM_WORLD_SIZE"))) return;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) >= threads) return;
    fprintf(stderr, "char_lm: warning: --threads %d, but mpirun bound this rank to %d core%s: give each rank its "
            "cores (mpirun --map-by ppr:1:node:PE=%d, or --bind-to none)\n", threads, CPU_COUNT(&set),
            CPU_COUNT(&set) == 1 ? "" : "s", threads);
#endif
}

/* The exit code of a run a stop signal ended: 128 + the signal, as a shell reports it. */
static int stopped_code(void) { return 128 + (int)stop_signal; }

/* What was written to out is out of the process (a full disk, a closed pipe: an error now, not
 * ten minutes of generating into nothing). */
static ag_status flushed(FILE *out, const char *name, ag_error *err)
{
    if (fflush(out) == 0 && !ferror(out)) return AG_OK;
    return ag_seterr(err, AG_ERR_IO, "%s: write failed: %s", name, strerror(errno));
}

typedef struct {
    const ag_vocab *v;
    FILE *out;
    ag_error *err;
} printer;

static bool print_token(int id, void *user)
{
    printer *p = user;
    char buf[5];
    ag_vocab_utf8(p->v, id, buf);
    fputs(buf, p->out);
    return flushed(p->out, "stdout", p->err) == AG_OK;
}

/* Prints the prompt (as given) and then each new character as it comes. */
static ag_status sample_to(FILE *out, lm_model *m, const char *prompt, const lm_sample_opts *so, ag_error *err)
{
    printer p = {&m->vocab, out, err};
    int *ids = NULL;
    size_t n = 0;
    /* encode first so a bad prompt fails before anything is printed */
    if (prompt && *prompt) {
        ag_status s = ag_vocab_encode(&m->vocab, "--prompt", prompt, strlen(prompt), &ids, &n, err);
        if (s) return s;
        free(ids);
        fputs(prompt, out);
        if ((s = flushed(out, "stdout", err))) return s;
    }
    ag_status s = lm_sample_text(m, prompt, so, print_token, &p, NULL, NULL, err);
    fputs("\n", out);
    ag_status f = flushed(out, "stdout", err);
    return s ? s : f;
}

// --- train ---

/* SIGINT, SIGTERM and SIGHUP (a closed terminal) set stop_signal; training then stops after
 * the step or the evaluation batch in hand, with a checkpoint; sampling after the character. */
static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    lm_plot_set_stop(&stop_signal);   /* a hung gnuplot must not hold the answer (plot.h) */
}

static lm_train_opts train_opts(const lm_train_args *a)
{
    return (lm_train_opts){
        .data_path = a->data,
        .out_dir = a->out,
        .init_from = a->init_from,
        .resume = a->resume,
        .overwrite = a->overwrite,
        .cfg = a->cfg,
        .given = a->given,
        .config_given = a->config_given,
        .log = stdout,
        .warn = stderr,
        .plot = true,
        .stop = &stop_signal,
        .trace = a->trace.shapes ? stdout : NULL,
        .trace_only = a->trace.only,
    };
}

/* After training: a taste of what the model learned, then where the curve and the rest are. */
static int show_result(const char *dir)
{
    ag_error e = {0};
    lm_model m;
    ag_status s = lm_model_load(dir, &m, &e);
    if (s) return fail(s, &e);
    lm_sample_opts so = {200, 1.0, 0, 1337, &stop_signal};
    printf("\nsample (200 characters, temperature 1.0):\n");
    s = sample_to(stdout, &m, NULL, &so, &e);
    lm_model_free(&m);
    if (s) return fail(s, &e);
    if (stop_signal) return stopped_code();
    char png[4096];
    if (lm_path_join(png, sizeof png, dir, "loss.png") && access(png, F_OK) == 0) printf("\nloss curve: %s\n", png);
    printf("metrics: %s/metrics.csv\nmore text: ./build/char_lm sample --ckpt %s\n", dir, dir);
    return 0;
}

/* Under mpirun with several ranks (build/char_lm_mpi, ddp.h) rank 0 speaks for the job: the
 * others get no log and no plots, and their trace goes to *quiet (/dev/null). */
static void one_voice(lm_train_opts *o, int rank, FILE **quiet)
{
    *quiet = NULL;
    if (rank == 0) return;
    o->log = NULL;
    o->plot = false;
    if (o->trace && (*quiet = fopen("/dev/null", "w"))) o->trace = *quiet;
}

/* A failed run: rank 0 says why; another rank only when it is news, as "rank R: ...": not an
 * argument error once the ranks have compared their setups (it is the same on every rank),
 * nor a wait that every waiting rank saw run out (the lowest of them speaks: dist.h). */
static int fail_rank(const ag_dist *d, const lm_train_result *r, ag_status s, const ag_error *e)
{
    int rank = ag_dist_rank(d), voice = ag_dist_voice(d);
    if (voice >= 0 && voice != rank) return s == AG_ERR_ARG ? 2 : 1;
    if (rank == 0) return fail(s, e);
    if (s == AG_ERR_ARG && r->ranks_compared) return 2;
    ag_error mine = {0};
    ag_seterr(&mine, s, "rank %d: %s", rank, e->msg);
    return fail(s, &mine);
}

/* build/char_lm started by mpirun -np N would be N separate runs writing one directory */
static bool alone_in_a_job(const ag_dist *d)
{
    const char *n = getenv("OMPI_COMM_WORLD_SIZE");
    if (!n) n = getenv("PMI_SIZE");
    return ag_dist_size(d) == 1 && n && atoi(n) > 1;
}

static int cmd_train(const lm_train_args *a)
{
    ag_error e = {0};
    ag_dist *d;   /* the ranks of an mpirun job (char_lm_mpi), or this process alone */
    ag_status s = ag_dist_init(&d, &e);
    if (s) return fail(s, &e);
    if (alone_in_a_job(d)) {
        ag_seterr(&e, AG_ERR_ARG, "this char_lm has no MPI, so under mpirun each process would train on its own; "
                  "run build/char_lm_mpi (make builds it where mpicc is installed)");
        return fail(AG_ERR_ARG, &e);
    }
    int rank = ag_dist_rank(d);
    ag_dist_set_timeout(d, a->dist_timeout);
    set_threads(a->threads ? a->threads : ag_dist_size(d) > 1 ? 1 : 0);   /* ranks share the cores */
    warn_bound(d, ag_threads());
    catch_stop_signals();
    lm_train_opts o = train_opts(a);
    o.dist = d;
    o.grad_accum = a->grad_accum;
    o.shards = a->shards;
    o.allreduce = a->allreduce;
    o.progress = a->progress;
    o.tune_threads = !a->threads && ag_dist_size(d) == 1;   /* the default: 2, or 1 while faster */
    FILE *quiet;
    one_voice(&o, rank, &quiet);
    lm_train_result r;
    s = lm_train(&o, &r, &e);
    if (quiet) fclose(quiet);
    if (s) {
        int code = fail_rank(d, &r, s, &e);
        if (s == AG_ERR_ARG && r.ranks_compared) ag_dist_barrier(d, &e);   /* the same error on every rank: */
        ag_dist_end(d, false);   /* leave once rank 0 said it; no MPI_Finalize: mpirun ends the job (dist.h) */
        return code;
    }
    if (r.interrupted) {   /* the signal all ranks agreed on: 130 SIGINT, 143 SIGTERM, 129 SIGHUP */
        /* once every rank is past the checkpoint, leave without MPI_Finalize: after Ctrl-C on
         * mpirun it would wait for mpirun, which waits to kill us (docs/distributed.md) */
        if ((s = ag_dist_barrier(d, &e))) fail_rank(d, &r, s, &e);
        ag_dist_end(d, false);
        return 128 + r.stop_signal;
    }
    ag_dist_end(d, true);
    if (a->trace.only || rank > 0) return 0;
    return show_result(a->out);
}

// --- sample, eval, attn ---

/* --trace-shapes for sample: the forward over the prompt (its last block_size characters). */
static ag_status trace_prompt(lm_model *m, const char *prompt, ag_error *err)
{
    const char *p = prompt && *prompt ? prompt : "\n";
    int *ids = NULL;
    size_t n = 0;
    ag_status s = ag_vocab_encode(&m->vocab, "--prompt", p, strlen(p), &ids, &n, err);
    if (s == AG_OK) {
        int T = n > (size_t)m->g->cfg.block_size ? m->g->cfg.block_size : (int)n;
        char what[96];
        snprintf(what, sizeof what, "the prompt (B=1, T=%d; sampling then feeds one position at a time)", T);
        s = lm_trace_forward(stdout, m->g, ids + (n - (size_t)T), NULL, 1, T, false, what, err);
    }
    free(ids);
    return s;
}

static int cmd_sample(const lm_sample_args *a)
{
    set_threads(0);
    catch_stop_signals();
    ag_error e = {0};
    lm_model m;
    ag_status s = lm_model_load_as(a->ckpt, a->from, &m, &e);
    if (s) return fail(s, &e);
    s = lm_check_memory(lm_sample_bytes(&m.g->cfg), &m.g->cfg, 1, "sample", &e);
    if (s == AG_OK && a->trace.shapes) s = trace_prompt(&m, a->prompt, &e);
    if (s == AG_OK && !a->trace.only) {
        lm_sample_opts so = {a->max_new_tokens, a->temperature, a->top_k, a->seed, &stop_signal};
        s = sample_to(stdout, &m, a->prompt, &so, &e);
    }
    lm_model_free(&m);
    if (s) return fail(s, &e);
    return stop_signal ? stopped_code() : 0;
}

/* --trace-shapes for eval: the forward over the first windows of the file. */
static ag_status trace_file(lm_model *m, const char *path, ag_error *err)
{
    ag_corpus c;
    ag_status s = ag_corpus_load_vocab(path, &m->vocab, &c, err);
    if (s == AG_OK) s = lm_trace_text(stdout, m->g, c.ids, c.n, false, path, err);
    ag_corpus_free(&c);
    return s;
}

static int cmd_eval(const lm_eval_args *a)
{
    set_threads(0);
    ag_error e = {0};
    lm_model m;
    ag_status s = lm_model_load_as(a->ckpt, a->from, &m, &e);
    if (s) return fail(s, &e);
    s = lm_check_memory(lm_step_bytes(&m.g->cfg, LM_EVAL_BATCH, false), &m.g->cfg, LM_EVAL_BATCH, "eval", &e);
    if (s == AG_OK && a->trace.shapes) s = trace_file(&m, a->data, &e);
    double loss = 0;
    size_t tokens = 0;
    bool evaluate = s == AG_OK && !a->trace.only;
    if (evaluate) s = lm_eval_file(&m, a->data, &loss, &tokens, &e);
    lm_model_free(&m);
    if (s == AG_OK && evaluate && !isfinite(loss))   /* JSON has no NaN: an error, not "-nan" */
        s = ag_seterr(&e, AG_ERR_NONFINITE, "%s: the loss is %g: this model's weights give no finite loss", a->data,
                      isnan(loss) ? NAN : loss);
    if (s) return fail(s, &e);
    if (evaluate) printf("{\"loss\": %.6f, \"tokens\": %zu}\n", loss, tokens);
    if ((s = flushed(stdout, "stdout", &e))) return fail(s, &e);
    return 0;
}

static int cmd_attn(const lm_attn_args *a)
{
    set_threads(0);
    catch_stop_signals();   /* Ctrl-C ends it (130), gnuplot killed first (plot.h) */
    ag_error e = {0};
    lm_model m;
    ag_status s = lm_model_load_as(a->ckpt, a->from, &m, &e);
    if (s) return fail(s, &e);
    if (!stop_signal) s = lm_attn_draw(&m, a->prompt, a->layer, a->head, a->out, &e);
    lm_model_free(&m);
    if (stop_signal) return stopped_code();   /* whatever the interrupted plot said */
    if (s) return fail(s, &e);
    if (a->head >= 0) printf("%s: layer %d, head %d", a->out, a->layer, a->head);
    else printf("%s: layer %d, every head", a->out, a->layer);
    printf(" (the weights and the gnuplot script are beside it, .dat and .gp)\n");
    if ((s = flushed(stdout, "stdout", &e))) return fail(s, &e);
    return 0;
}

int main(int argc, char **argv)
{
    lm_omp_bounded_spin(argv);   /* speed only: re-runs itself once with GOMP_SPINCOUNT (omp_spin.h) */
    static lm_cli cli;   /* static: the train args are a few hundred bytes, no need on the stack */
    ag_error e = {0};
    if (lm_cli_parse(&cli, argc, argv, &e)) return fail(AG_ERR_ARG, &e);
    int code;
    if (cli.help) {
        fputs(lm_cli_usage(cli.cmd), stdout);
        code = 0;
    } else {
        switch (cli.cmd) {
        case LM_CMD_TRAIN: code = cmd_train(&cli.train); break;
        case LM_CMD_SAMPLE: code = cmd_sample(&cli.sample); break;
        case LM_CMD_ATTN: code = cmd_attn(&cli.attn); break;
        default: code = cmd_eval(&cli.eval); break;
        }
    }
    /* what a success printed (--help, a trace) is out of the process, or it is no success */
    if (code == 0 && flushed(stdout, "stdout", &e)) return fail(AG_ERR_IO, &e);
    return code;
}
