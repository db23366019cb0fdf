/* main.c -- the char_lm program: the only code that prints errors and picks exit codes.
 *
 *   char_lm train  --data FILE --out DIR [--config tiny|baby|small] [flags]   (see --help)
 *   char_lm sample --ckpt DIR [--prompt TEXT] [--max-new-tokens N] [--temperature F] [--top-k N] [--seed N]
 *   char_lm eval   --ckpt DIR --data FILE
 *   char_lm attn   --ckpt DIR --prompt TEXT [--layer L] [--head H] --out FILE.png
 * train, sample and eval take --trace-shapes (one forward pass printed op by op first) and
 * --trace-only (the trace, then stop).
 *
 * Exit codes: 0 success; 2 a usage error (bad flag or value, or arguments that do not fit the
 * data or the checkpoint: AG_ERR_ARG); 1 any other error (a file that cannot be read, a corrupt
 * checkpoint, a non-finite loss); 130 / 143 training stopped by SIGINT / SIGTERM after writing
 * a checkpoint. Every error is one line on stderr: "char_lm: error: ...". */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "attn.h"
#include "checkpoint.h"
#include "cli.h"
#include "eval.h"
#include "plot.h"
#include "sample.h"
#include "trace.h"
#include "train.h"

static volatile sig_atomic_t stop_signal = 0;

static void on_signal(int sig) { stop_signal = sig; }

/* One line on stderr, always: a path, a flag value or a name read from a file may hold a line
 * break or an escape sequence, so control bytes are written as \n or \xNN. */
static int fail(ag_status s, const char *msg)
{
    fputs("char_lm: error: ", stderr);
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p == '\n') fputs("\\n", stderr);
        else if (*p < 0x20 || *p == 0x7F) fprintf(stderr, "\\x%02X", *p);
        else fputc(*p, stderr);
    }
    fputc('\n', stderr);
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

typedef struct {
    const vocab *v;
    FILE *out;
} printer;

static void print_token(int id, void *user)
{
    printer *p = user;
    char buf[5];
    vocab_utf8(p->v, id, buf);
    fputs(buf, p->out);
    fflush(p->out);
}

/* Prints the prompt (as given) and then each new character as it comes. */
static ag_status sample_to(FILE *out, lm_model *m, const char *prompt, const lm_sample_opts *so, char *err,
                           size_t errlen)
{
    printer p = {&m->vocab, out};
    int *ids = NULL;
    size_t n = 0;
    /* encode first so a bad prompt fails before anything is printed */
    if (prompt && *prompt) {
        ag_status s = vocab_encode(&m->vocab, "--prompt", prompt, strlen(prompt), &ids, &n, err, errlen);
        if (s) return s;
        free(ids);
        fputs(prompt, out);
    }
    ag_status s = lm_sample_text(m, prompt, so, print_token, &p, NULL, NULL, err, errlen);
    fputs("\n", out);
    fflush(out);
    return s;
}

static int cmd_train(const lm_train_args *a)
{
    set_threads(a->threads);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    lm_train_opts o = {
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
    lm_train_result r;
    char err[2048];
    ag_status s = lm_train(&o, &r, err, sizeof err);
    if (s) return fail(s, err);
    if (a->trace.only) return 0;
    if (r.interrupted) return stop_signal == SIGTERM ? 143 : 130;

    /* a taste of what it learned, then where the curve is */
    lm_model m;
    if ((s = lm_model_load(a->out, &m, err, sizeof err))) return fail(s, err);
    lm_sample_opts so = {200, 1.0, 0, 1337};
    printf("\nsample (200 characters, temperature 1.0):\n");
    s = sample_to(stdout, &m, NULL, &so, err, sizeof err);
    lm_model_free(&m);
    if (s) return fail(s, err);
    char png[4096];
    if (lm_path_join(png, sizeof png, a->out, "loss.png") && access(png, F_OK) == 0)
        printf("\nloss curve: %s\n", png);
    printf("metrics: %s/metrics.csv\nmore text: ./build/char_lm sample --ckpt %s\n", a->out, a->out);
    return 0;
}

static int cmd_sample(const lm_sample_args *a)
{
    set_threads(0);
    char err[2048];
    lm_model m;
    ag_status s = lm_model_load(a->ckpt, &m, err, sizeof err);
    if (s) return fail(s, err);
    if (a->trace.shapes) {   /* the forward over the prompt (its last block_size characters) */
        const char *p = a->prompt && *a->prompt ? a->prompt : "\n";
        int *ids = NULL;
        size_t n = 0;
        s = vocab_encode(&m.vocab, "--prompt", p, strlen(p), &ids, &n, err, sizeof err);
        if (s == AG_OK) {
            int T = n > (size_t)m.g->cfg.block_size ? m.g->cfg.block_size : (int)n;
            char what[96];
            snprintf(what, sizeof what, "the prompt (B=1, T=%d; sampling then feeds one position at a time)", T);
            s = lm_trace_forward(stdout, m.g, ids + (n - (size_t)T), NULL, 1, T, false, what, err, sizeof err);
        }
        free(ids);
        if (s || a->trace.only) {
            lm_model_free(&m);
            return s ? fail(s, err) : 0;
        }
    }
    lm_sample_opts so = {a->max_new_tokens, a->temperature, a->top_k, a->seed};
    s = sample_to(stdout, &m, a->prompt, &so, err, sizeof err);
    lm_model_free(&m);
    return s ? fail(s, err) : 0;
}

static int cmd_eval(const lm_eval_args *a)
{
    set_threads(0);
    char err[2048];
    lm_model m;
    ag_status s = lm_model_load(a->ckpt, &m, err, sizeof err);
    if (s) return fail(s, err);
    if (a->trace.shapes) {   /* the forward over the first windows of the file */
        corpus c;
        s = corpus_load_vocab(a->data, &m.vocab, &c, err, sizeof err);
        if (s == AG_OK) s = lm_trace_text(stdout, m.g, c.ids, c.n, false, a->data, err, sizeof err);
        corpus_free(&c);
        if (s || a->trace.only) {
            lm_model_free(&m);
            return s ? fail(s, err) : 0;
        }
    }
    double loss = 0;
    size_t tokens = 0;
    s = lm_eval_file(&m, a->data, &loss, &tokens, err, sizeof err);
    lm_model_free(&m);
    if (s) return fail(s, err);
    printf("{\"loss\": %.6f, \"tokens\": %zu}\n", loss, tokens);
    return 0;
}

static int cmd_attn(const lm_attn_args *a)
{
    set_threads(0);
    char err[2048];
    lm_model m;
    ag_status s = lm_model_load(a->ckpt, &m, err, sizeof err);
    if (s) return fail(s, err);
    s = lm_attn_draw(&m, a->prompt, a->layer, a->head, a->out, err, sizeof err);
    lm_model_free(&m);
    if (s) return fail(s, err);
    if (a->head >= 0) printf("%s: layer %d, head %d", a->out, a->layer, a->head);
    else printf("%s: layer %d, every head", a->out, a->layer);
    printf(" (the weights and the gnuplot script are beside it, .dat and .gp)\n");
    return 0;
}

/* OpenMP reads its wait policy when the program loads. Its default spins ~300k iterations
 * before sleeping: fastest on an idle machine, but when another process wants a core the
 * spinning threads make a step several times slower. A bounded spin (GOMP_SPINCOUNT=10000,
 * tens of microseconds: long enough to catch the next op's parallel region) kept the idle
 * speed within 2% (make bench). So re-run ourselves once with it, unless the user chose. */
static void bounded_omp_spin(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT")) return;
    /* under valgrind /proc/self/exe is valgrind's tool, which cannot be exec'ed directly */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;
    if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
    execv("/proc/self/exe", argv); /* only returns on failure: go on with the default */
}

int main(int argc, char **argv)
{
    bounded_omp_spin(argv);
    static lm_cli cli;   /* static: the train args are a few hundred bytes, no need on the stack */
    char err[1024];
    if (lm_cli_parse(&cli, argc, argv, err, sizeof err)) return fail(AG_ERR_ARG, err);
    if (cli.help) {
        fputs(lm_cli_usage(cli.cmd), stdout);
        return 0;
    }
    switch (cli.cmd) {
    case LM_CMD_TRAIN: return cmd_train(&cli.train);
    case LM_CMD_SAMPLE: return cmd_sample(&cli.sample);
    case LM_CMD_ATTN: return cmd_attn(&cli.attn);
    default: return cmd_eval(&cli.eval);
    }
}
