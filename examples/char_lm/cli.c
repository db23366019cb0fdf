/* cli.c -- char_lm's command line: each subcommand's flags are rows of a table (the library's
 * kind, src/train/fields.h: a text, a name of a few, a signal, a switch, a number in a range),
 * and the library's loop (ag_args_parse) reads every argument into the field of its row, with its
 * one-line error. `train` reads the hyper-parameters of config.c's table the same way, and the
 * lines of its switches in `train --help` come from it (ag_field_usage). What no row says is
 * here: --config read first, --kernels, --dist-timeout's own messages, and the checks between
 * flags. Nothing is printed: errors come back as a one-line message for main.c. */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"

// --- usage texts ---

#define KERNELS_HELP                                                                                  \
    "  --kernels TABLE        the kernels every op runs: fast (default) or reference (the plain\n"   \
    "                         loops of src/tensor/ops, attention as composed ops; as AG_KERNELS)\n"

static const char usage_main[] =
    "usage: char_lm <command> [flags]\n"
    "\n"
    "A character-level GPT language model, trained with attograd.\n"
    "\n"
    "commands:\n"
    "  train   train a model on a UTF-8 text file, writing a checkpoint directory\n"
    "  sample  generate text from a checkpoint\n"
    "  eval    deterministic loss of a checkpoint on a text file\n"
    "  attn    draw the attention weights of a prompt as a heat map (gnuplot)\n"
    "  serve   a page and a JSON API over a run: sample, attention, training (a browser)\n"
    "\n"
    "`char_lm <command> --help` lists the flags of each command. A first run:\n"
    "  char_lm train --data data/tinyshakespeare.txt --out out/baby --config baby\n"
    "  char_lm sample --ckpt out/baby --prompt 'ROMEO:'\n";

/* A line "@key" stands for the lines of a switch (lm_fields' row key): see train_usage. */
static const char usage_train[] =
    "usage: char_lm train --data FILE --out DIR [flags]\n"
    "\n"
    "Trains a character-level GPT on FILE (UTF-8). DIR becomes a run directory: the checkpoint\n"
    "(written at every evaluation and at the end) in DIR/ckpt-<iter>/ (model.safetensors,\n"
    "train_state.safetensors), named by DIR/latest, whose replacement commits it whole;\n"
    "metrics.csv (one row per step) and loss.png (needs gnuplot). While it runs, train holds\n"
    "DIR/train.lock: a second train on DIR is refused (exit 2). Ctrl-C, SIGTERM or SIGHUP stop\n"
    "after the current step or evaluation batch and write a checkpoint (exit 130, 143, 129);\n"
    "SIGUSR1 (a batch system's warning before pre-emption) does the same and exits 75, which a\n"
    "job script answers with a requeue; --resume then continues the run. A config whose step\n"
    "needs more memory than the machine has (or its cgroup allows: a container, a batch job) is\n"
    "refused before anything is allocated.\n"
    "\n"
    "DIR also keeps the best checkpoint, of the lowest validation loss (training loss without a\n"
    "validation split), named by DIR/best: a later, worse checkpoint never removes it (sample,\n"
    "eval and attn read it with --from best). An evaluation loss that is not finite, or above\n"
    "max(2 ln V, 4x the best so far), is divergence: the run stops (exit 1) and keeps both. ln V\n"
    "is what guessing uniformly scores, an untrained model's loss: above twice that, nothing\n"
    "learned is left; 4x the best is room for the spikes a run recovers from while its best is\n"
    "still high. Only this run's own superseded checkpoints are ever removed; --out inside\n"
    "another run directory is refused.\n"
    "\n"
    "Limits: FILE is at most 2 GiB; loading it takes its size plus 4 bytes per character (at\n"
    "most 5x the file), training keeps the 4 bytes per character (at most 4x). A checkpoint\n"
    "file is at most 4 GiB (header 100 MB): with Adam's two moments in train_state.safetensors\n"
    "(8 bytes per parameter) a model checkpoints up to about 2^29 parameters; a bigger one\n"
    "(over 524 million) is refused before training.\n"
    "\n"
    "  --data FILE            training text (UTF-8); the vocabulary is its set of characters\n"
    "  --out DIR              checkpoint directory (created if missing)\n"
    "  --config NAME          tiny, baby (default without --time-budget) or small; or a budget\n"
    "                         recipe by name, 1min, 5min or 10min (= S, M, L below; it implies its\n"
    "                         --time-budget); flags override it\n"
    "  --time-budget DURATION end the run, final evaluation and checkpoint written, within DURATION\n"
    "                         of its start: 90s, 5m, 1h30m, 1.5h (none: no budget). Without\n"
    "                         --config (and not --resume, --init-from) it picks the recipe: a\n"
    "                         few steps timed in the budget's first seconds tell how many steps\n"
    "                         each recipe would get, and the largest that gets enough is taken\n"
    "                         (S 3 x 96 context 64; M 4 x 96 context 128 from 4,000 steps; L\n"
    "                         context 256 from 10,000: docs/performance.md), said in one line;\n"
    "                         the flags given override it, --resume continues it. The first steps\n"
    "                         are timed (inside the warmup), then the step count is fixed so that\n"
    "                         warmup and cosine decay end with the budget (fitted again at each\n"
    "                         evaluation: a machine's speed wanders), and saved: --resume\n"
    "                         continues that schedule (the budget then bounds the resumed run).\n"
    "                         With --max-iters: whichever comes first. Slack: the run ends within\n"
    "                         DURATION + 1 s; should the machine slow down after the last\n"
    "                         evaluation, it stops at the budget with its evaluation and\n"
    "                         checkpoint, the rate not yet at --min-lr (--resume then finishes the\n"
    "                         schedule). Evaluations are bounded by it too (the first by a tenth,\n"
    "                         the final one by what is left: fewer batches, said in the log); a\n"
    "                         budget too short for one batch or one step says so in one line;\n"
    "                         one that runs out while the text is read ends there (exit 2,\n"
    "                         nothing written)\n"
    "  --overwrite            start a new run in a DIR that already holds a checkpoint (without it,\n"
    "                         train refuses: the old run is not thrown away by accident); the old\n"
    "                         run's checkpoints go once the new run's first one is saved\n"
    "  --resume               continue the run in DIR exactly where its checkpoint stopped;\n"
    "                         flags given again override the saved ones, except the model shape\n"
    "  --init-from DIR        start a new run from another checkpoint's weights and vocabulary\n"
    "  --threads N            threads (default: 2, or the number of cores if fewer, and 1 while\n"
    "                         that is faster: a busy machine; under mpirun with several ranks: 1\n"
    "                         per rank); alone, at most the cores (more only wait, with a warning)\n"
    "  --shards N             split each step's windows into N shards, each run whole on a thread of\n"
    "                         its own (default: the threads, at least 2, at most the cores, fewer\n"
    "                         when they do not fit in memory; with dropout: 1; under mpirun each\n"
    "                         rank splits its own share). Each shard beyond the first keeps a\n"
    "                         gradient buffer of the model's size and a step arena for its\n"
    "                         windows, about twice their activations (baby: about 15 to 40 MiB\n"
    "                         a shard; README's Limits). 1: the plain step, each op split over\n"
    "                         the threads (examples/one_step splits as the default does)\n"
    "  --grad-accum K         run each step as K micro-batches of batch-size/K windows (less memory,\n"
    "                         the same run); under mpirun -np N each rank runs K of batch-size/(N*K)\n"

    "  --dist-timeout S       with several ranks: the most seconds a rank waits for the others at one\n"
    "                         exchange, joining the job included; then the job ends, naming the rank\n"
    "                         that did not come (default 60; 0: no limit). Give it more than rank\n"
    "                         0's checkpoint write takes\n"
    "  --checkpoint-signal SIG\n"
    "                         one more signal that stops with a checkpoint and exit 75, as SIGUSR1\n"
    "                         does: USR1 (default), USR2, TERM, HUP, INT, ALRM or XCPU (a name, with\n"
    "                         or without SIG, or its number): the one your scheduler sends first\n"
    "  --progress MODE        the progress line: auto (default: redrawn in place on a terminal when\n"
    "                         alone; a line every 10 steps in a file and always under mpirun), lines,\n"
    "                         or tty (redrawn in place with \\r and ESC [K even in a file)\n"
    "  --trace-shapes         print one forward pass op by op (shapes, layer, parameters), then train\n"
    "  --trace-only           print the trace and stop\n"
    KERNELS_HELP
    "  --trace-graph FILE     the traced tape as Graphviz dot too (draw: dot -Tpng FILE -o g.png)\n"
    "\n"
    "model                                      tiny    baby    small\n"
    "  --n-layer N            blocks              2       4       6\n"
    "  --n-head N             attention heads     2       4       6\n"
    "  --n-embd N             channels            64      128     384\n"
    "  --block-size N         context length      32      64      256\n"
    "  --dropout F            dropout             0       0       0\n"
    "compare what the tutorials argue about (saved in the checkpoint; defaults are MODEL.md's)\n"
    "@norm_position\n"
    "@norm\n"
    "@mlp\n"
    "@init\n"
    "  --no-scale             scores q k^T without the 1/sqrt(D): watch softmax saturate\n"
    "@mask_fill\n"
    "  --log-attn-stats       at each evaluation: per layer the mean attention entropy and the\n"
    "                         mean peak weight, as metrics.csv columns and DIR/attn.png\n"
    "  --log-dynamics         at each log step: per layer the gradient norm and the update/weight\n"
    "                         ratio of the attention and MLP weights, DIR/dynamics.csv and .png\n"
    "  --log-activations      at each evaluation: per block the residual stream's RMS, the MLP\n"
    "                         activation's inputs (mean, std, share dead) and the attention\n"
    "                         scores' range, DIR/activations.csv and .png (lesson 14)\n"
    "  --detect-anomaly       stop at the first op whose output or gradient is NaN/Inf, naming\n"
    "                         it, its shape and its layer (slower: attention runs op by op)\n"
    "  --lr-find LO           the learning-rate range test: lr from LO up to --lr, exponentially\n"
    "                         over --max-iters steps; DIR/lr_find.png and the lr where the loss\n"
    "                         falls fastest (lesson 16)\n"
    "  --overfit-batch        train on one fixed batch of windows: the loss must go near 0\n"
    "  --init-scale F         every drawn weight times F at the start (10: confidently wrong logits)\n"
    "training\n"
    "  --batch-size N         windows per step    16      12      64\n"
    "  --max-iters N          optimizer steps     500     2000    5000\n"
    "  --lr F                 peak learning rate  1e-3    1e-3    1e-3\n"
    "  --min-lr F             final learning rate 1e-4    1e-4    1e-4   (at most --lr)\n"
    "  --warmup-iters N       linear warmup       50      100     100\n"
    "  --lr-decay-iters N     cosine decay ends   (default: --max-iters)\n"
    "@optimizer\n"
    "  --weight-decay F       0.1 (AdamW: decoupled, 2-D weights only; Adam: L2)\n"
    "  --beta1 F, --beta2 F   0.9, 0.99\n"
    "  --momentum F           SGD momentum, 0\n"
    "  --grad-clip F          global gradient norm limit, 1.0 (0: off)\n"
    "evaluation\n"
    "  --val-fraction F       last share of the text that validates, 0.1 (0: none)\n"
    "  --eval-interval N      steps between evaluations and checkpoints, 250 (tiny: 100)\n"
    "  --eval-iters N         random batches per split in an evaluation, 20\n"
    "  --seed N               random seed, 1337\n";

/* --from, the same line for sample, eval and attn */
#define FROM_HELP                                                                                   \
    "  --from WHICH           latest (default: where the run stands) or best (the checkpoint of\n"   \
    "                         its lowest validation loss, DIR/best) of a run directory\n"

static const char usage_sample[] =
    "usage: char_lm sample --ckpt DIR [flags]\n"
    "\n"
    "Generates text from a checkpoint, one character at a time (with a KV cache).\n"
    "\n"
    "  --ckpt DIR             run directory (written by char_lm train; its latest checkpoint),\n"
    "                         or one of its ckpt-<iter> directories\n"
    FROM_HELP
    "  --prompt TEXT          text to continue (default: a newline); every character must\n"
    "                         be in the checkpoint's vocabulary\n"
    "  --max-new-tokens N     characters to generate, 500\n"
    "  --temperature F        > 0; below 1 is more conservative, above 1 more random; 1.0\n"
    "  --top-k N              sample only among the N likeliest characters (0: all), 0\n"
    "  --seed N               random seed, 1337 (same seed, same text)\n"
    "  --trace-shapes         print one forward pass over the prompt op by op first\n"
    "  --trace-only           print the trace and stop\n"
    KERNELS_HELP;

static const char usage_eval[] =
    "usage: char_lm eval --ckpt DIR [--from latest|best] --data FILE\n"
    "\n"
    "Deterministic loss of a checkpoint on a text file: the file is cut into consecutive\n"
    "windows of block_size+1 characters starting at 0, T, 2T, ...; every target of every whole\n"
    "window counts once. The last line printed is {\"loss\": F, \"tokens\": N}.\n"
    "\n"
    "  --ckpt DIR             run directory, or one of its ckpt-<iter> directories\n"
    FROM_HELP
    "  --data FILE            UTF-8 text; every character must be in the checkpoint's vocabulary\n"
    "                         (at most 2 GiB; loading it takes at most 5x its size in memory)\n"
    "  --trace-shapes         print one forward pass over the first windows op by op first\n"
    "  --trace-only           print the trace and stop\n"
    KERNELS_HELP;

static const char usage_attn[] =
    "usage: char_lm attn --ckpt DIR [--from latest|best] --prompt TEXT [--layer L] [--head H] --out FILE.png\n"
    "\n"
    "Runs the prompt through the model and draws the attention weights of one layer as a heat\n"
    "map: row i is query position i, column j the key it attends to, both labelled with the\n"
    "prompt's characters; the masked upper triangle (the future) stays blank. Writes FILE.png\n"
    "with gnuplot, and beside it FILE.dat (the weights) and FILE.gp (the script; redraw with\n"
    "`gnuplot FILE.gp` in that directory).\n"
    "\n"
    "  --ckpt DIR             run directory, or one of its ckpt-<iter> directories\n"
    FROM_HELP
    "  --prompt TEXT          at most block_size characters, all in the vocabulary\n"
    "  --layer L              block 0 .. n_layer-1, 0\n"
    "  --head H               head 0 .. n_head-1; without it, every head of the layer in a grid\n"
    "  --out FILE.png         the picture\n";

// --- train --help: each switch's lines come from its table ---

/* usage_train with each line "@key" replaced by the lines of that switch (the library's). */
static const char *train_usage(void)
{
    static char text[32768];   /* the whole help is about 7 KB: room for the flags to come */
    ag_fields_usage_text(usage_train, lm_fields, LM_N_FIELDS, text, sizeof text);
    return text;
}

const char *lm_cli_usage(lm_command cmd)
{
    switch (cmd) {
    case LM_CMD_TRAIN: return train_usage();
    case LM_CMD_SAMPLE: return usage_sample;
    case LM_CMD_EVAL: return usage_eval;
    case LM_CMD_ATTN: return usage_attn;
    default: return usage_main;
    }
}

// --- the flags: each a row of a table, read by the library's flag loop (fields.h) ---

/* A row of a flag that is not a hyper-parameter: no JSON key (a flag only), so its whole numbers
 * read as ag_parse_long reads them; names: the switch whose names it must be, or NULL. */
#define ROW(st, fl, ty, field, l, h, names) \
    {.flag = fl, .type = AG_FIELD_##ty, .offset = offsetof(st, field), .lo = l, .hi = h, .sw = names}
#define TEXT(st, fl, field) ROW(st, fl, STR, field, 0, 0, NULL)
#define ON(st, fl, field) ROW(st, fl, BOOL, field, 0, 1, NULL)
#define FROM(st) ROW(st, "--from", STR, from, 0, 0, &from_switch)

static const char *const from_names[] = {"latest", "best"};   /* checkpoint.h's LM_LATEST, LM_BEST */
static const ag_switch from_switch = {"from", 2, from_names, NULL};
static const char *const progress_names[] = {"auto", "lines", "tty"};   /* ag_progress_mode's order */
static const ag_switch progress_switch = {"progress", 3, progress_names, NULL};

static const ag_field train_rows[] = {
    TEXT(lm_train_args, "--data", data), TEXT(lm_train_args, "--out", out),
    TEXT(lm_train_args, "--config", config_name),   /* read first (parse_train), again in its place */
    ROW(lm_train_args, "--init-from", STR, init_from, 1, 0, NULL),
    ON(lm_train_args, "--resume", resume), ON(lm_train_args, "--overwrite", overwrite),
    ROW(lm_train_args, "--threads", INT, threads, 1, 1024, NULL),
    ROW(lm_train_args, "--shards", INT, shards, 1, 1024, NULL),
    ROW(lm_train_args, "--grad-accum", INT, grad_accum, 1, 1 << 20, NULL),
    ROW(lm_train_args, "--progress", ENUM, progress, 0, 0, &progress_switch),
    ROW(lm_train_args, "--checkpoint-signal", SIGNAL, checkpoint_signal, 0, 0, NULL),
};
static const ag_field sample_rows[] = {
    TEXT(lm_sample_args, "--ckpt", ckpt), TEXT(lm_sample_args, "--prompt", prompt), FROM(lm_sample_args),
    ROW(lm_sample_args, "--max-new-tokens", LONG, max_new_tokens, 0, 10000000, NULL),
    ROW(lm_sample_args, "--top-k", INT, top_k, 0, 1114112, NULL),
    ROW(lm_sample_args, "--seed", U64, seed, 0, 9223372036854775807.0, NULL),
    {.flag = "--temperature", .type = AG_FIELD_DOUBLE, .offset = offsetof(lm_sample_args, temperature), .lo = 0,
     .hi = HUGE_VAL, .lo_open = true},
};
static const ag_field eval_rows[] = {
    TEXT(lm_eval_args, "--ckpt", ckpt), TEXT(lm_eval_args, "--data", data), FROM(lm_eval_args),
};
static const ag_field attn_rows[] = {   /* --layer, --head: the model's bound is checked in attn.c */
    TEXT(lm_attn_args, "--ckpt", ckpt), TEXT(lm_attn_args, "--prompt", prompt), TEXT(lm_attn_args, "--out", out),
    FROM(lm_attn_args), ROW(lm_attn_args, "--layer", INT, layer, 0, 1 << 20, NULL),
    ROW(lm_attn_args, "--head", INT, head, 0, 1 << 20, NULL),
};
/* --trace-only and --trace-graph imply --trace-shapes (trace_done); --kernels: kernels_flag */
static const ag_field trace_rows[] = {
    ON(lm_trace_args, "--trace-shapes", shapes), ON(lm_trace_args, "--trace-only", only),
    TEXT(lm_trace_args, "--trace-graph", graph),
};
#define N(rows) ((int)(sizeof rows / sizeof rows[0]))

// --- what no row says ---

static const char *cmd_name(lm_command c)
{
    return c == LM_CMD_TRAIN ? "train" : c == LM_CMD_SAMPLE ? "sample" : c == LM_CMD_EVAL ? "eval"
         : c == LM_CMD_ATTN ? "attn" : "";
}

static ag_status require(const char *v, const char *flag, lm_command cmd, ag_error *err)
{
    return ag_arg_required(v, flag, "char_lm", cmd_name(cmd), err);
}

/* The tables' loop (ag_args_parse) over a subcommand's arguments. */
static ag_status parse_flags(lm_command cmd, const ag_field_table *tabs, int n, ag_arg_fn other, void *user,
                             int argc, char **argv, ag_error *err)
{
    return ag_args_parse(argc, argv, 2, tabs, n, other, user, "char_lm", cmd_name(cmd), err);
}

/* --kernels reference|fast, into the lm_trace_args at trace (its message is the kernels' own) */
static ag_status kernels_flag(void *trace, ag_arg *f, bool *found, ag_error *err)
{
    ag_kernels_id id;
    if (!(*found = strcmp(f->flag, "--kernels") == 0)) return AG_OK;
    if (ag_arg_value(f, err) || ag_kernels_parse(f->value, "--kernels ", &id, err)) return AG_ERR_ARG;
    ((lm_trace_args *)trace)->kernels = f->value;
    return AG_OK;
}

/* --trace-only and --trace-graph imply --trace-shapes */
static void trace_done(lm_trace_args *t) { t->shapes = t->shapes || t->only || t->graph; }

// --- train ---

/* Pass 1, before the preset: --config, wherever it stands; every other argument passed over. */
static ag_status pass_over(void *user, ag_arg *f, bool *found, ag_error *err)
{
    (void)user, (void)f, (void)err;
    *found = true;
    return AG_OK;
}

/* --dist-timeout S: seconds, 0: no limit (its messages are older than the table's) */
static ag_status dist_timeout(lm_train_args *t, ag_arg *f, ag_error *err)
{
    if (ag_arg_value(f, err)) return AG_ERR_ARG;
    char *end = NULL;
    errno = 0;
    double v = strtod(f->value, &end);
    if (!*f->value || *end || errno == ERANGE || !isfinite(v) || *f->value == ' ')
        return ag_seterr(err, AG_ERR_ARG, "--dist-timeout: not a number of seconds: '%s'", f->value);
    if (!(v >= 0 && v <= 1e6))
        return ag_seterr(err, AG_ERR_ARG, "--dist-timeout must be in [0, 1e6] (got %s)", f->value);
    t->dist_timeout = v;
    return AG_OK;
}

/* Pass 2, after the tables: --kernels, --dist-timeout. */
static ag_status train_other(void *args, ag_arg *f, bool *found, ag_error *err)
{
    lm_train_args *t = args;
    ag_status s = kernels_flag(&t->trace, f, found, err);
    if (*found || !(*found = strcmp(f->flag, "--dist-timeout") == 0)) return s;
    return dist_timeout(t, f, err);
}

/* What no single flag can check: the required ones, --resume against --init-from, the whole config. */
static ag_status finish_train(lm_train_args *t, ag_error *err)
{
    trace_done(&t->trace);
    if (require(t->data, "--data", LM_CMD_TRAIN, err) || require(t->out, "--out", LM_CMD_TRAIN, err))
        return AG_ERR_ARG;
    if (t->resume && t->init_from)
        return ag_seterr(err, AG_ERR_ARG, "--resume and --init-from exclude each other (--resume continues "
                                          "--out's own run)");
    /* lr_decay_iters follows max_iters unless given */
    const lm_field *decay = lm_field_by_key("lr_decay_iters");
    if (!t->given[decay - lm_fields]) t->cfg.lr_decay_iters = t->cfg.max_iters;
    /* a budget and no recipe: the budget picks one from the speed it measures (recipe.h), and
     * the flags are checked against it then */
    t->pick_recipe = !t->config_given && t->cfg.time_budget > 0 && !t->resume && !t->init_from;
    if (t->pick_recipe) return AG_OK;
    ag_status s = lm_config_validate(&t->cfg, false, err);
    /* a resumed run's config is the checkpoint's with these flags: train_setup.c checks the merge */
    return s || t->resume ? s : lm_config_check_training(&t->cfg, err);
}

static ag_status parse_train(lm_train_args *t, int argc, char **argv, ag_error *err)
{
    *t = (lm_train_args){.config_name = "baby", .dist_timeout = LM_DIST_TIMEOUT_S, .checkpoint_signal = SIGUSR1};
    const ag_field_table config = {ag_field_by_flag(train_rows, N(train_rows), "--config"), 1, t, &t->config_given};
    const ag_field_table tabs[] = {
        {lm_fields, LM_N_FIELDS, &t->cfg, t->given}, {train_rows, N(train_rows), t, NULL},
        {trace_rows, N(trace_rows), &t->trace, NULL},
    };
    ag_status s = parse_flags(LM_CMD_TRAIN, &config, 1, pass_over, NULL, argc, argv, err);
    int k;   /* the preset's name: one of config.c's */
    if (s == AG_OK) s = ag_parse_choice("--config", lm_config_names, t->config_name, &k, err);
    if (s == AG_OK) lm_config_preset(&t->cfg, t->config_name);
    if (s == AG_OK) s = parse_flags(LM_CMD_TRAIN, tabs, N(tabs), train_other, t, argc, argv, err);
    return s ? s : finish_train(t, err);
}

// --- sample, eval and attn ---

static ag_status parse_sample(lm_sample_args *s, int argc, char **argv, ag_error *err)
{
    *s = (lm_sample_args){.max_new_tokens = 500, .temperature = 1.0, .seed = 1337, .from = "latest"};
    const ag_field_table tabs[] = {{sample_rows, N(sample_rows), s, NULL}, {trace_rows, N(trace_rows), &s->trace, NULL}};
    if (parse_flags(LM_CMD_SAMPLE, tabs, N(tabs), kernels_flag, &s->trace, argc, argv, err)) return AG_ERR_ARG;
    trace_done(&s->trace);
    return require(s->ckpt, "--ckpt", LM_CMD_SAMPLE, err);
}

static ag_status parse_eval(lm_eval_args *e, int argc, char **argv, ag_error *err)
{
    *e = (lm_eval_args){.from = "latest"};
    const ag_field_table tabs[] = {{eval_rows, N(eval_rows), e, NULL}, {trace_rows, N(trace_rows), &e->trace, NULL}};
    if (parse_flags(LM_CMD_EVAL, tabs, N(tabs), kernels_flag, &e->trace, argc, argv, err) ||
        require(e->ckpt, "--ckpt", LM_CMD_EVAL, err) || require(e->data, "--data", LM_CMD_EVAL, err))
        return AG_ERR_ARG;
    trace_done(&e->trace);
    return AG_OK;
}

static ag_status parse_attn(lm_attn_args *a, int argc, char **argv, ag_error *err)
{
    *a = (lm_attn_args){.head = -1, .from = "latest"};
    const ag_field_table tab = {attn_rows, N(attn_rows), a, NULL};
    if (parse_flags(LM_CMD_ATTN, &tab, 1, NULL, NULL, argc, argv, err) ||
        require(a->ckpt, "--ckpt", LM_CMD_ATTN, err) || require(a->prompt, "--prompt", LM_CMD_ATTN, err) ||
        require(a->out, "--out", LM_CMD_ATTN, err))
        return AG_ERR_ARG;
    size_t n = strlen(a->out);
    if (n < 5 || strcmp(a->out + n - 4, ".png") != 0)
        return ag_seterr(err, AG_ERR_ARG, "--out must end in .png (got '%s')", a->out);
    return AG_OK;
}

// --- entry ---

ag_status lm_cli_parse(lm_cli *cli, int argc, char **argv, ag_error *err)
{
    memset(cli, 0, sizeof *cli);
    if (argc < 2)
        return ag_seterr(err, AG_ERR_ARG, "no command given (train, sample, eval or attn; see: char_lm --help)");
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) {
        cli->help = true;
        return AG_OK;
    }
    cli->cmd = strcmp(c, "train") == 0 ? LM_CMD_TRAIN
             : strcmp(c, "sample") == 0 ? LM_CMD_SAMPLE
             : strcmp(c, "eval") == 0 ? LM_CMD_EVAL
             : strcmp(c, "attn") == 0 ? LM_CMD_ATTN : LM_CMD_NONE;
    if (cli->cmd == LM_CMD_NONE)
        return ag_seterr(err, AG_ERR_ARG, "unknown command '%s' (train, sample, eval or attn; see: char_lm --help)", c);
    if (ag_args_want_help(argc, argv, 2)) {   /* --help after the command wins over every other flag */
        cli->help = true;
        return AG_OK;
    }
    switch (cli->cmd) {
    case LM_CMD_TRAIN: return parse_train(&cli->train, argc, argv, err);
    case LM_CMD_SAMPLE: return parse_sample(&cli->sample, argc, argv, err);
    case LM_CMD_ATTN: return parse_attn(&cli->attn, argc, argv, err);
    default: return parse_eval(&cli->eval, argc, argv, err);
    }
}
