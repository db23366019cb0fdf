/* main.c -- the char_lm program: its commands (train, sample, eval, attn, serve: `char_lm
 * <command> --help`), the only code that prints errors and picks exit codes (train/program.h:
 * ag_exit_code, ag_stopped_code; README.md, "Signals are answered at once"). Every error is one
 * line on stderr, "char_lm: error: ...", under mpirun said by rank 0 alone when every rank meets it. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tools.h"
#include "checkpoint.h"
#include "cli.h"
#include "recipe.h"
#include "train.h"

#ifndef LM_COMMIT
#define LM_COMMIT NULL   /* the Makefile gives the commit it was built at */
#endif

/* The error line, the exit codes, the threads, mpirun's ranks and the stop signals are the
 * library's (train/program.h): fail is ag_say_error's "char_lm: error: ..." line. */
static int fail(ag_status s, const ag_error *e) { return ag_say_error("error: ", s, e); }

static const volatile sig_atomic_t *stop;   /* ag_stop_flag(): the signal that stops a run, or 0 */

// --- train ---

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
        .report = true,
        .commit = LM_COMMIT,
        .stop = stop,
        .trace = a->trace.shapes ? stdout : NULL,
        .trace_only = a->trace.only,
        .trace_graph = a->trace.graph,
    };
}

/* After training: a taste of what the model learned, the sample on the run's card (train_log.c;
 * none when the time budget ran out: the budget holds the whole command, issue 35; a run with
 * nothing to do samples its checkpoint as the card would), then where the pictures and the
 * rest are. */
static int show_result(const char *dir, const lm_train_result *r, time_t since)
{
    ag_error e = {0};
    lm_model m;
    bool load = !r->out_of_time && !r->sample;
    ag_status s = load ? lm_model_load_as(dir, AG_CKPT_LATEST, &m, &e) : AG_OK;
    if (s) return fail(s, &e);
    if (r->out_of_time) printf("\nno sample: the time budget ran out (char_lm sample --ckpt %s)\n", dir);
    else printf("\nsample (200 characters, temperature 1.0):\n");
    if (r->sample) fputs(r->sample, stdout);
    if (load) {
        s = ag_chars_print(stdout, m.g, &m.vocab, NULL, &(ag_sample_opts){200, 1.0, 0, 1337, stop}, &e);
        lm_model_free(&m);
    }
    if (s == AG_OK) s = ag_flushed(stdout, "stdout", &e);
    if (s) return fail(s, &e);
    if (*stop) return ag_stopped_code(*stop);
    ag_say_pictures(stdout, dir, lm_pictures, since);   /* every picture this run wrote (issue 33) */
    printf("metrics: %s/metrics.csv\nmore text: ./build/char_lm sample --ckpt %s\n", dir, dir);
    return 0;
}

/* --lr-find: the range test read from the run's metrics.csv, lr_find.png drawn (lesson 16) */
static void report_lr_find(const char *dir)
{
    ag_error e = {0};
    ag_lr_range r;
    ag_status s = ag_lr_range_read(dir, &r, &e);
    if (s == AG_ERR_IO && r.steps > 0) fprintf(stderr, "char_lm: warning: %s\n", e.msg);   /* no picture */
    else if (s) return (void)fprintf(stderr, "char_lm: warning: %s\n", e.msg);
    printf("\nlr-find over %d steps: the loss falls fastest at lr %.2g (%.3f per e-fold of lr); lowest %.3f at lr "
           "%.2g", r.steps, r.steepest_lr, r.steepest_slope, r.min_loss, r.min_lr);
    if (r.diverged_lr > 0) printf("; diverged from lr %.2g (the loss twice its lowest)", r.diverged_lr);
    printf("\nthe presets' lr: 1e-3 (tiny, baby, small), 3e-3 (1min), 6e-3 (5min), 8e-3 (10min, 20min)\n");
    if (s == AG_OK) printf("picture: %s/lr_find.png (data: lr_find.csv)\n", dir);
}

/* Under mpirun with several ranks (build/char_lm_mpi, train/ddp.h) rank 0 speaks for the job: the
 * others get no log and no plots, and their trace goes to *quiet (/dev/null). */
static void one_voice(lm_train_opts *o, int rank, FILE **quiet)
{
    *quiet = NULL;
    if (rank == 0) return;
    o->log = NULL;
    o->plot = false;
    if (o->trace && (*quiet = fopen("/dev/null", "w"))) o->trace = *quiet;
}

/* --time-budget without --config: the reference recipe's steps timed, the recipe picked (in a
 * close call the next one up timed too) and said in one line (recipe.h); that time counts
 * against the budget. */
static ag_status choose_recipe(lm_train_opts *o, const lm_train_args *a, ag_error *e)
{
    double t0 = ag_now_s(), step;
    ag_status s = lm_recipe_probe(o->dist, LM_RECIPE_PROBE, 65, o->cfg.time_budget, stop, &step, e);
    if (s || !(step > 0)) return s;   /* stopped (here or on another rank): nothing written */
    ag_recipe_choice ch;
    lm_recipe_pick(o->cfg.time_budget, ag_now_s() - t0, step, &ch);
    int up = lm_recipe_close_call(&ch);
    if (up >= 0) {   /* one up at most: for XL to be close after L is timed, L must run 2.2x faster */
        double t1 = ag_now_s();
        s = lm_recipe_probe(o->dist, up, 65, o->cfg.time_budget, stop, &step, e);
        if (s || !(step > 0)) return s;
        lm_recipe_timed(up, step, ag_now_s() - t1, &ch);
    }
    if ((s = lm_recipe_apply(&o->cfg, a->given, ch.pick, e))) return s;
    char line[256];
    lm_recipe_line(line, sizeof line, &ch);
    if (o->log) fprintf(o->log, "%s\n", line);
    o->budget_spent = ag_now_s() - t0;
    return AG_OK;
}

static int cmd_train(const lm_train_args *a)
{
    ag_error e = {0};
    ag_dist *d;   /* the ranks of an mpirun job (char_lm_mpi), or this process alone */
    ag_status s = ag_dist_init(&d, a->dist_timeout, &e);   /* the joining too, within --dist-timeout */
    if (s) return fail(s, &e);
    /* build/char_lm under mpirun -np N: N runs writing one directory, said before the probe */
    if (ag_refuse_launched_alone(d, "char_lm", "build/char_lm_mpi (make builds it where mpicc is installed)", &e))
        return ag_say_error_once("error: ", AG_ERR_ARG, &e);
    int rank = ag_dist_rank(d);
    /* --threads at most the cores, or 2 (ranks share the cores: 1); a rank bound to fewer, said */
    ag_threads_default(a->threads ? ag_threads_capped(a->threads, d) : ag_dist_size(d) > 1 ? 1 : 0);
    ag_threads_warn_bound(d, ag_threads());
    ag_stop_catch(true, a->checkpoint_signal);   /* SIGUSR1 and --checkpoint-signal's: exit 75 */
    lm_train_opts o = train_opts(a);
    o.dist = d;
    o.grad_accum = a->grad_accum;
    o.shards = a->shards;
    o.progress = a->progress;
    o.tune_threads = !a->threads && ag_dist_size(d) == 1;   /* the default: 2, or 1 while faster */
    FILE *quiet;
    one_voice(&o, rank, &quiet);
    lm_train_result r = {0};
    time_t since = time(NULL);
    s = a->pick_recipe ? choose_recipe(&o, a, &e) : AG_OK;
    bool probe_stopped = s == AG_OK && a->pick_recipe && !(o.budget_spent > 0);   /* a stop signal */
    if (s == AG_OK && !probe_stopped) s = lm_train(&o, &r, &e);
    if (quiet) fclose(quiet);
    if (probe_stopped) {
        ag_dist_end(d, false);
        return ag_stopped_code(*stop ? *stop : SIGTERM);
    }
    /* A failure or a stop, said once for the job and its exit code: train/program.h's ag_leave_run
     * (an error every rank met alike: after the ranks compared their setups, or rank 0's sent to all). */
    if (s || r.interrupted) {
        free(r.sample);
        return ag_leave_run(d, "error: ", s, &e, r.error_shared || (s == AG_ERR_ARG && r.ranks_compared),
                            r.stop_signal);
    }
    ag_dist_end(d, true);
    int code = a->trace.only || rank > 0 ? 0 : show_result(a->out, &r, since);
    if (code == 0 && rank == 0 && !a->trace.only && a->cfg.lr_find > 0) report_lr_find(a->out);
    free(r.sample);
    return code;
}

// --- sample, eval, attn ---

/* The model --ckpt and --from name, and a warning for what the loader read around (a bad best). */
static ag_status load_to_read(const char *dir, const char *from, lm_model *m, ag_error *e)
{
    ag_status s = lm_model_load_as(dir, from, m, e);
    if (s == AG_OK && m->note[0]) fprintf(stderr, "char_lm: warning: %s\n", m->note);
    return s;
}

static int cmd_sample(const lm_sample_args *a)
{
    ag_threads_default(0);
    ag_stop_catch(false, 0);
    ag_error e = {0};
    lm_model m;
    ag_status s = load_to_read(a->ckpt, a->from, &m, &e);
    if (s) return fail(s, &e);
    char shape[AG_GPT_SHAPE_LEN];
    s = ag_check_memory(ag_gpt_sample_bytes(&m.g->cfg), "sample", ag_gpt_shape_str(&m.g->cfg, 1, shape), &e);
    if (s == AG_OK && a->trace.shapes) s = ag_chars_trace_prompt(stdout, m.g, &m.vocab, a->prompt, a->trace.graph, &e);
    if (s == AG_OK && !a->trace.only) {
        ag_sample_opts so = {a->max_new_tokens, a->temperature, a->top_k, a->seed, stop};
        s = ag_chars_print(stdout, m.g, &m.vocab, a->prompt, &so, &e);
    }
    lm_model_free(&m);
    if (s) return fail(s, &e);
    return *stop ? ag_stopped_code(*stop) : 0;
}

static int cmd_eval(const lm_eval_args *a)
{
    ag_threads_default(0);
    ag_error e = {0};
    lm_model m;
    ag_status s = load_to_read(a->ckpt, a->from, &m, &e);
    if (s) return fail(s, &e);
    char shape[AG_GPT_SHAPE_LEN];
    s = ag_check_memory(ag_gpt_step_bytes(&m.g->cfg, AG_CHARS_EVAL_BATCH, false), "eval",
                        ag_gpt_shape_str(&m.g->cfg, AG_CHARS_EVAL_BATCH, shape), &e);
    if (s == AG_OK && a->trace.shapes) s = ag_chars_trace_file(stdout, m.g, &m.vocab, a->data, a->trace.graph, &e);
    double loss = 0;
    size_t tokens = 0;
    bool evaluate = s == AG_OK && !a->trace.only;
    if (evaluate) s = ag_chars_eval_file(m.g, &m.vocab, a->data, &loss, &tokens, &e);
    lm_model_free(&m);
    if (s == AG_OK && evaluate && !isfinite(loss))   /* JSON has no NaN: an error, not "-nan" */
        s = ag_seterr(&e, AG_ERR_NONFINITE, "%s: the loss is %g: this model's weights give no finite loss", a->data,
                      isnan(loss) ? NAN : loss);
    if (s) return fail(s, &e);
    if (evaluate) printf("{\"loss\": %.6f, \"tokens\": %zu}\n", loss, tokens);
    if ((s = ag_flushed(stdout, "stdout", &e))) return fail(s, &e);
    return 0;
}

static int cmd_attn(const lm_attn_args *a)
{
    ag_threads_default(0);
    ag_stop_catch(false, 0);   /* Ctrl-C ends it (130), gnuplot killed first (train/train.h) */
    ag_error e = {0};
    lm_model m;
    ag_status s = load_to_read(a->ckpt, a->from, &m, &e);
    if (s) return fail(s, &e);
    int H = m.g->cfg.n_head;
    ag_attn_head *heads = calloc((size_t)H, sizeof *heads);   /* [H] */
    if (!heads) s = ag_seterr(&e, AG_ERR_NOMEM, "attn: out of memory");
    if (!s && !*stop) s = ag_chars_attention(m.g, &m.vocab, a->prompt, a->layer, a->head, a->out, heads, &e);
    lm_model_free(&m);
    if (*stop || s) free(heads);
    if (*stop) return ag_stopped_code(*stop);   /* whatever the interrupted plot said */
    if (s) return fail(s, &e);
    if (a->head >= 0) printf("%s: layer %d, head %d", a->out, a->layer, a->head);
    else printf("%s: layer %d, every head", a->out, a->layer);
    printf(" (the weights and the gnuplot script are beside it, .dat and .gp)\n");
    for (int h = 0; h < H; h++)   /* lesson 8's patterns, named; entropy against uniform rows' */
        printf("layer %d, head %d: %-22s entropy %.3f (uniform %.3f), peak %.3f\n", a->layer, h,
               ag_chars_pattern_names[heads[h].pattern], heads[h].entropy, heads[h].uniform, heads[h].peak);
    free(heads);
    if ((s = ag_flushed(stdout, "stdout", &e))) return fail(s, &e);
    return 0;
}

/* --kernels becomes AG_KERNELS, which every ctx and the parameters read when they are made
 * (src/tensor/speed.h); a bad AG_KERNELS is refused here, before anything runs */
static ag_status use_kernels(const lm_cli *cli, ag_error *err)
{
    const char *k = cli->cmd == LM_CMD_TRAIN    ? cli->train.trace.kernels
                    : cli->cmd == LM_CMD_SAMPLE ? cli->sample.trace.kernels
                    : cli->cmd == LM_CMD_EVAL   ? cli->eval.trace.kernels
                                                : NULL;
    if (k && setenv("AG_KERNELS", k, 1) != 0) return ag_seterr(err, AG_ERR_ARG, "--kernels: cannot set AG_KERNELS");
    ag_kernels_id id;
    return ag_kernels_from_env(&id, err);
}

int main(int argc, char **argv)
{
    ag_train_name("char_lm", "CHAR_LM");   /* the run machinery's messages and variables (train/train.h) */
    ag_omp_bounded_spin(argv);   /* speed only: re-runs itself once with GOMP_SPINCOUNT (program.h) */
    stop = ag_stop_flag();
    signal(SIGPIPE, SIG_IGN);    /* `| head -c1`: a write fails with EPIPE, said in one line, never a silent death */
    if (argc >= 2 && strcmp(argv[1], "serve") == 0)   /* the library's (serve/serve.h); the model: serve.c */
        return ag_serve_main(&lm_serve_client, argc, argv, "error: ");
    static lm_cli cli;   /* static: the train args are a few hundred bytes, no need on the stack */
    ag_error e = {0};
    if (lm_cli_parse(&cli, argc, argv, &e)) return ag_say_error_once("error: ", AG_ERR_ARG, &e);   /* every rank's alike */
    if (use_kernels(&cli, &e)) return ag_say_error_once("error: ", AG_ERR_ARG, &e);
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
    if (code == 0 && ag_flushed(stdout, "stdout", &e)) return fail(AG_ERR_IO, &e);
    return code;
}
