/* test_errors.c -- every bad input a user can give build/char_lm, run as a real process: a
 * one-line error, the documented exit code, no crash, nothing lost (issue 5).
 *
 * The table below has one row per case: what to prepare in a fresh directory (a copy of a
 * small trained checkpoint and its corpus, then a change: an empty or invalid corpus, a
 * truncated or edited checkpoint, ...), the command, the exit code and a piece of the message.
 * Each row is one check test, and each asserts that char_lm
 *   - exits (not killed by a signal, not hung) with the expected code: 2 for a usage error
 *     (a bad flag or value, arguments that do not fit the data or the checkpoint), 1 for the
 *     rest (a file that cannot be read, a corrupt checkpoint, a failed write);
 *   - writes exactly one line to stderr, "char_lm: error: ...", containing the expected text,
 *     and nothing to stdout (except the rows that train before failing); one line even when
 *     what it quotes (a path, a flag value, a tensor name from a corrupt file) holds a line
 *     break;
 *   - leaves the directory exactly as it was: every file byte-identical, nothing new (no
 *     half-written checkpoint, no *.tmp.* file), except where the row says otherwise.
 * A last row fills the "disk" (RLIMIT_FSIZE) while a resumed run writes its checkpoint: the
 * write fails with a clear error and the earlier checkpoint still samples, evaluates and
 * resumes.
 *
 * The checkpoint is the `tiny` preset made smaller (1 layer, n_embd 16, block_size 8) so the
 * whole table also runs under valgrind (`make check-valgrind` sets CHAR_LM_WRAP) in about a
 * minute. See proc.h for CHAR_LM, CHAR_LM_WRAP and CHAR_LM_TIMEOUT; CHAR_LM_TABLE=1 prints each
 * row's exit status and message as it runs. */
#include <check.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "checkpoint.h"
#include "lm_fixture.h"
#include "proc.h"

// ---------------------------------------------------------------------------------------------
// the table

typedef enum {
    P_NONE,            /* the copy of the good checkpoint (ckpt/) and corpus (corpus.txt) only */
    P_EMPTY,           /* empty.txt, 0 bytes */
    P_UNREADABLE,      /* unreadable.txt, mode 000 (as root the run drops to nobody) */
    P_DIR,             /* adir/, a directory */
    P_FILE,            /* file, a regular file (for --out file/out) */
    P_RO_DIR,          /* rodir/, mode 555 (the run drops to nobody as root) */
    P_EMPTY_DIR,       /* nockpt/, an empty directory */
    P_TRUNC_MODEL,     /* ckpt/model.safetensors cut to half its size */
    P_TRUNC_MODEL_HDR, /* ckpt/model.safetensors cut to 100 bytes (inside the header) */
    P_TRUNC_STATE,     /* ckpt/train_state.safetensors cut to half its size */
    P_HDR_LEN,         /* model: header length field 2^62 */
    P_HDR_JSON,        /* model: the header is not JSON any more */
    P_DTYPE,           /* model: first dtype F16 */
    P_OFFSETS,         /* model: first tensor's data_offsets [4, end] */
    P_NAN,             /* model: last weight NaN */
    P_FORMAT,          /* model: format tag "char_lm-7" */
    P_SHAPE,           /* model: config says n_embd 8, tensors have 16 */
    P_HUGE,            /* model: config says n_embd 96: far more than the file holds */
    P_VOCAB_SIZE,      /* model: config's vocab_size + 1 */
    P_VOCAB_OTHER,     /* model: the largest code point of the vocab + 1 (so the corpus's is gone) */
    P_MODEL_IS_DIR,    /* ckpt2/model.safetensors is a directory */
    P_NAME_NL,         /* model: the first tensor is called "tok_emb<LF>weigh" and has dtype F16 */
    P_FORMAT_NL,       /* model: format tag "cha<LF>lm-1" */
    P_OTHER_RUN,       /* ckpt's train_state replaced by other's: another run, the same iteration */
    P_FIFO,            /* ckpt's model.safetensors is a FIFO */
    P_LATEST_MISSING,  /* ckpt/latest names ckpt-00000009, which does not exist */
    P_LATEST_BAD,      /* ckpt/latest holds "../../etc" */
    P_DEEP,            /* deep/: a 2 MB checkpoint of block_size 16384 x n_layer 256 (n_embd 8) */
    P_NEG_V,           /* ckpt's train_state: the last second moment -1 */
    P_EVAL_NAN,        /* ckpt's train_state: metadata eval_train_loss "nan(...)" */
    P_DIVERGED,        /* diverged/: ckpt with every weight 3.4e38 (finite, but the loss is not) */
    P_LOCK_LINK,       /* ckpt/train.lock is a symbolic link to ../victim */
    P_VOCAB_LONG,      /* model: config's vocab_size 2, far less than the vocab array's length */
    P_LATEST_LOST,     /* ckpt/latest removed: its checkpoints left without it */
    P_NO_BEST,         /* ckpt/best and ckpt/latest removed: no best, and no train state to find it from */
    P_TWO_RUNS,        /* ckpt/latest removed, and other's checkpoint copied in as ckpt/ckpt-00000001 */
} prep_kind;

enum {
    F_STDOUT = 1,      /* stdout may have lines (the run trained before failing) */
    F_DROP = 2,        /* as root, run as nobody (skipped if that is impossible here) */
    F_FSIZE = 4,       /* RLIMIT_FSIZE: half of train_state.safetensors */
    F_METRICS = 8,     /* ckpt/metrics.csv may change (a resumed run appends its steps) */
    F_LOADS = 16,      /* afterwards ckpt/ must still sample, evaluate and resume */
    F_FULL = 32,       /* stdout is /dev/full */
    F_EPIPE = 64,      /* stdout is a pipe nobody reads, SIGPIPE ignored */
    F_FSIZE_METRICS = 128, /* RLIMIT_FSIZE: metrics.csv may grow by 300 bytes */
    F_WARNING = 256,   /* a "char_lm: warning:" line may come before the error line */
    F_SIGPIPE = 512,   /* with F_EPIPE: SIGPIPE at its default, as a shell leaves it (`| head -c1`) */
};

typedef struct {
    const char *name;
    prep_kind prep;
    const char *text;           /* if not NULL: written to input.txt */
    const char *const *args;
    int code;                   /* expected exit code */
    const char *msg;            /* expected in the stderr line */
    int flags;
} err_case;

#define A(...) ((const char *const[]){__VA_ARGS__, NULL})
/* the shape of the good checkpoint: tiny, smaller */
#define MICRO "--config", "tiny", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "8", \
              "--batch-size", "4", "--eval-iters", "1", "--threads", "1"
#define TRAIN(data, out, ...) A("train", "--data", data, "--out", out, MICRO, "--max-iters", "2", ##__VA_ARGS__)
#define RESUME(...) A("train", "--data", "corpus.txt", "--out", "ckpt", "--resume", "--threads", "1", ##__VA_ARGS__)

static const err_case cases[] = {
    // --- the corpus ---
    {"missing corpus", P_NONE, NULL, TRAIN("missing.txt", "new"), 1,
     "missing.txt: cannot open: No such file or directory", 0},
    {"empty corpus", P_EMPTY, NULL, TRAIN("empty.txt", "new"), 1, "empty.txt: file is empty", 0},
    {"unreadable corpus", P_UNREADABLE, NULL, TRAIN("unreadable.txt", "new"), 1,
     "unreadable.txt: cannot open: Permission denied", F_DROP},
    {"corpus path with a line break", P_NONE, NULL, TRAIN("missing\nfile.txt", "new"), 1,
     "file.txt: cannot open: No such file or directory", 0},
    {"corpus is a directory", P_DIR, NULL, TRAIN("adir", "new"), 1, "adir: is a directory", 0},
    {"corpus shorter than block_size+1", P_NONE, "abc", TRAIN("input.txt", "new"), 2,
     "the training split has 2 tokens, block_size 8 needs at least 9", 0},
    {"validation split shorter than block_size+1", P_NONE, "the cat sat on the mat and the dog ran off",
     TRAIN("input.txt", "new"), 2, "the validation split has 5 tokens, block_size 8 needs at least 9", 0},
    {"invalid UTF-8: overlong", P_NONE, "The cat sat\xc0\xaf on the mat.\n", TRAIN("input.txt", "new"), 1,
     "input.txt: invalid UTF-8 at byte 11 (overlong", 0},
    {"invalid UTF-8: truncated at the end", P_NONE, "The cat \xe5\xa4\xa9\xe5\x9c", TRAIN("input.txt", "new"), 1,
     "input.txt: invalid UTF-8 at byte 11 (truncated", 0},
    {"invalid UTF-8: surrogate", P_NONE, "ab\xed\xa0\x80", TRAIN("input.txt", "new"), 1,
     "invalid UTF-8 at byte 2 (surrogate", 0},
    {"invalid UTF-8: byte 0xFF first", P_NONE, "\xff the cat", TRAIN("input.txt", "new"), 1,
     "invalid UTF-8 at byte 0", 0},
    {"invalid UTF-8: stray continuation byte", P_NONE, "the cat\x80", TRAIN("input.txt", "new"), 1,
     "invalid UTF-8 at byte 7 (stray continuation", 0},

    // --- prompts and eval data outside the vocabulary ---
    {"prompt outside the vocabulary", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--prompt", "the \xce\xa9"), 2,
     "--prompt: character '\xce\xa9' (U+03A9) at position 4 (byte 4) is not in the vocabulary", 0},
    {"prompt with a Chinese character outside the vocabulary", P_NONE, NULL,
     A("sample", "--ckpt", "ckpt", "--prompt", "\xe5\xa4\xa9\xe4\xb8\xad"), 2,
     "(U+4E2D) at position 1 (byte 3) is not in the vocabulary", 0},
    {"prompt that is not UTF-8", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--prompt", "the\xff"), 1,
     "--prompt: invalid UTF-8 at byte 3", 0},
    {"eval data outside the vocabulary", P_NONE, "The cat sat on the Zebra mat.\n",
     A("eval", "--ckpt", "ckpt", "--data", "input.txt"), 2, "'Z' (U+005A) at position 19", 0},
    {"eval data not UTF-8", P_NONE, "The cat sat \xf8 on the mat.\n", A("eval", "--ckpt", "ckpt", "--data", "input.txt"),
     1, "input.txt: invalid UTF-8 at byte 12", 0},
    {"eval data missing", P_NONE, NULL, A("eval", "--ckpt", "ckpt", "--data", "missing.txt"), 1,
     "missing.txt: cannot open", 0},
    {"eval data shorter than a window", P_NONE, "the cat", A("eval", "--ckpt", "ckpt", "--data", "input.txt"), 2,
     "input.txt", 0},

    // --- command-line values out of range ---
    {"no command", P_NONE, NULL, A("--verbose"), 2, "unknown command '--verbose'", 0},
    {"negative --lr", P_NONE, NULL, TRAIN("corpus.txt", "new", "--lr", "-0.001"), 2, "--lr must be > 0", 0},
    {"bad number --lr 1e", P_NONE, NULL, TRAIN("corpus.txt", "new", "--lr", "1e"), 2, "--lr: not a finite number: '1e'", 0},
    {"--n-head does not divide --n-embd", P_NONE, NULL, TRAIN("corpus.txt", "new", "--n-head", "3"), 2,
     "--n-head 3 does not divide --n-embd 16", 0},
    {"--dropout 1", P_NONE, NULL, TRAIN("corpus.txt", "new", "--dropout", "1"), 2, "--dropout must be in [0, 1)", 0},
    {"--max-iters 1e3", P_NONE, NULL, TRAIN("corpus.txt", "new", "--max-iters", "1e3"), 2,
     "--max-iters: not a whole number", 0},
    {"--batch-size 0", P_NONE, NULL, TRAIN("corpus.txt", "new", "--batch-size", "0"), 2, "--batch-size must be in", 0},
    {"--val-fraction 1", P_NONE, NULL, TRAIN("corpus.txt", "new", "--val-fraction", "1"), 2,
     "--val-fraction must be in [0, 1)", 0},
    {"--threads 0", P_NONE, NULL, TRAIN("corpus.txt", "new", "--threads", "0"), 2, "--threads must be in", 0},
    {"--shards 0", P_NONE, NULL, TRAIN("corpus.txt", "new", "--shards", "0"), 2, "--shards must be in", 0},
    {"--shards over the batch", P_NONE, NULL, TRAIN("corpus.txt", "new", "--shards", "5"), 2,
     "--shards 5 is more than the 4 windows a step's pass has (--batch-size 4, --grad-accum 1)", 0},
    {"--shards with --grad-accum", P_NONE, NULL, TRAIN("corpus.txt", "new", "--grad-accum", "2", "--shards", "3"), 2,
     "--shards 3 is more than the 2 windows a step's pass has (--batch-size 4, --grad-accum 2)", 0},
    {"unknown flag", P_NONE, NULL, TRAIN("corpus.txt", "new", "--bogus"), 2, "unknown flag '--bogus' for train", 0},
    {"missing value", P_NONE, NULL, TRAIN("corpus.txt", "new", "--lr"), 2, "--lr needs a value", 0},
    {"--top-k -1", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--top-k", "-1"), 2, "--top-k must be in", 0},
    {"--temperature 0", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--temperature", "0"), 2,
     "--temperature must be > 0", 0},
    {"--max-new-tokens -5", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--max-new-tokens", "-5"), 2,
     "--max-new-tokens must be in", 0},
    {"a flag value with a line break", P_NONE, NULL, TRAIN("corpus.txt", "new", "--lr", "1\n2"), 2,
     "--lr: not a finite number", 0},
    {"--out empty", P_NONE, NULL, A("train", "--data", "corpus.txt", "--out="), 2, "--out must not be empty", 0},
    /* issue 21: durations */
    {"--time-budget 0", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget", "0"), 2,
     "--time-budget: not a duration: '0'", 0},
    {"--time-budget 0s", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget", "0s"), 2,
     "--time-budget must be more than 0", 0},
    {"--time-budget -5m", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget", "-5m"), 2,
     "--time-budget: not a duration: '-5m'", 0},
    {"--time-budget '5 parsecs'", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget", "5 parsecs"), 2,
     "--time-budget: not a duration: '5 parsecs'", 0},
    {"--time-budget 1e400s", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget", "1e400s"), 2,
     "--time-budget: not a duration: '1e400s'", 0},
    {"--time-budget empty", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget="), 2,
     "--time-budget: not a duration: ''", 0},
    {"--time-budget 5m5", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget", "5m5"), 2,
     "--time-budget: not a duration: '5m5'", 0},
    {"--time-budget 2000h", P_NONE, NULL, TRAIN("corpus.txt", "new", "--time-budget", "2000h"), 2,
     "--time-budget must be at most 1000h", 0},

    // --- --resume ---
    {"--resume with another n_layer", P_NONE, NULL, RESUME("--n-layer", "2"), 2,
     "--n-layer: the checkpoint in ckpt has n_layer 1, but the flag asks for 2", 0},
    {"--resume with another n_embd", P_NONE, NULL, RESUME("--n-embd", "32"), 2,
     "a resumed run keeps its model shape", 0},
    {"--resume with another --config", P_NONE, NULL, RESUME("--config", "small"), 2, "but --config asks for", 0},
    {"--resume on another text", P_NONE, "The cat sat on the mat. The dog ran to the barn. My lord said good night. The old king sat on the mat.\n",
     A("train", "--data", "input.txt", "--out", "ckpt", "--resume"), 2, "is not the text the run in ckpt", 0},
    {"--resume without a checkpoint", P_EMPTY_DIR, NULL,
     A("train", "--data", "corpus.txt", "--out", "nockpt", "--resume"), 1,
     "--resume: nockpt holds no checkpoint (no latest, no ckpt-N directory, no model.safetensors)", 0},
    {"--resume from a truncated model", P_TRUNC_MODEL, NULL, RESUME("--max-iters", "4"), 1,
     "--resume: ckpt/ckpt-00000002/model.safetensors: ", 0},
    {"--resume from a truncated train state", P_TRUNC_STATE, NULL, RESUME("--max-iters", "4"), 1,
     "ckpt/ckpt-00000002/train_state.safetensors: ", 0},
    {"--resume from a corrupt header", P_HDR_JSON, NULL, RESUME("--max-iters", "4"), 1,
     "ckpt/ckpt-00000002/model.safetensors: header is not valid JSON", 0},

    // --- an output directory that cannot be written ---
    {"--out under a regular file", P_FILE, NULL, TRAIN("corpus.txt", "file/out"), 1, "file is not a directory", 0},
    {"--out under a checkpoint file", P_NONE, NULL, TRAIN("corpus.txt", "ckpt/latest/run"), 2,
     "--out ckpt/latest/run lies inside the run directory", 0},
    {"--out under a read-only directory", P_RO_DIR, NULL, TRAIN("corpus.txt", "rodir/run"), 1,
     "Permission denied", F_DROP},
    {"--out is a read-only directory", P_RO_DIR, NULL, TRAIN("corpus.txt", "rodir"), 1, "Permission denied",
     F_DROP},

    // --- sample and eval from a missing or corrupt checkpoint ---
    {"sample: no checkpoint directory", P_NONE, NULL, A("sample", "--ckpt", "missing"), 1,
     "missing/model.safetensors: cannot open: No such file or directory", 0},
    {"sample: --ckpt is a file", P_FILE, NULL, A("sample", "--ckpt", "file"), 1,
     "file/model.safetensors: cannot open: Not a directory", 0},
    {"sample: model.safetensors is a directory", P_MODEL_IS_DIR, NULL, A("sample", "--ckpt", "ckpt2"), 1,
     "ckpt2/model.safetensors: not a regular file", 0},
    {"sample: truncated model", P_TRUNC_MODEL, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "outside the data area", 0},
    {"eval: truncated model", P_TRUNC_MODEL, NULL, A("eval", "--ckpt", "ckpt", "--data", "corpus.txt"), 1,
     "outside the data area", 0},
    {"sample: model cut inside its header", P_TRUNC_MODEL_HDR, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "exceeds file size 100", 0},
    {"sample: header length 2^62", P_HDR_LEN, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "header length 4611686018427387904 exceeds file size", 0},
    {"sample: header not JSON", P_HDR_JSON, NULL, A("sample", "--ckpt", "ckpt"), 1, "header is not valid JSON", 0},
    {"eval: header not JSON", P_HDR_JSON, NULL, A("eval", "--ckpt", "ckpt", "--data", "corpus.txt"), 1,
     "header is not valid JSON", 0},
    {"sample: dtype F16", P_DTYPE, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "tensor 'tok_emb.weight' has dtype F16, only F32 is supported", 0},
    {"sample: data_offsets that do not fit the shape", P_OFFSETS, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "tensor 'tok_emb.weight' of shape", 0},
    {"sample: a NaN weight", P_NAN, NULL, A("sample", "--ckpt", "ckpt"), 1, "holds a non-finite value", 0},
    {"sample: a tensor name with a line break", P_NAME_NL, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "has dtype F16, only F32 is supported", 0},
    {"sample: a format tag with a line break", P_FORMAT_NL, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "not a char_lm checkpoint", 0},
    {"sample: not a char_lm checkpoint", P_FORMAT, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "not a char_lm checkpoint", 0},
    {"sample: shapes do not match the config", P_SHAPE, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "tensor 'tok_emb.weight' has shape", 0},
    {"eval: shapes do not match the config", P_SHAPE, NULL, A("eval", "--ckpt", "ckpt", "--data", "corpus.txt"), 1,
     "has shape", 0},
    /* checked before allocating: a forged header must not cost gigabytes */
    /* a new run over a checkpoint without --resume or --overwrite: refused, nothing touched */
    {"train over an existing checkpoint", P_NONE, NULL, TRAIN("corpus.txt", "ckpt"), 2,
     "already holds a checkpoint: --resume continues it, --overwrite starts over", 0},
    {"sample: the config is bigger than the file", P_HUGE, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "the config needs at least", 0},
    {"sample: vocab and vocab_size disagree", P_VOCAB_SIZE, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "characters, the config says vocab_size", 0},
    {"eval: the vocab does not match the data", P_VOCAB_OTHER, NULL,
     A("eval", "--ckpt", "ckpt", "--data", "corpus.txt"), 2, "(U+9EC4) at position", 0},
    {"--resume: the vocab does not match the data", P_VOCAB_OTHER, NULL, RESUME("--max-iters", "4"), 2,
     "is not in the vocabulary", 0},

    // --- a full disk while checkpointing: the old checkpoint survives ---
    {"checkpoint write fails (file size limit)", P_NONE, NULL, RESUME("--max-iters", "4"), 1, "write failed",
     F_STDOUT | F_FSIZE | F_METRICS | F_LOADS},

    // --- issue 12: one checkpoint, one run, no bad number saved, no output lost ---
    {"--resume: model and train state of two runs", P_OTHER_RUN, NULL, RESUME("--max-iters", "4"), 1,
     "train_state.safetensors of run", 0},
    {"sample: latest names a missing checkpoint", P_LATEST_MISSING, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "ckpt/latest names ckpt-00000009, which is missing", 0},
    {"sample: latest is not a checkpoint name", P_LATEST_BAD, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "ckpt/latest: does not name a checkpoint", 0},
    {"sample: model.safetensors is a FIFO", P_FIFO, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "model.safetensors: not a regular file (a FIFO)", 0},
    {"eval: a small checkpoint asking for terabytes", P_DEEP, NULL,
     A("eval", "--ckpt", "deep", "--data", "corpus.txt"), 2,
     "eval: block_size 16384 x n_layer 256 (n_head 1, n_embd 8, batch 16) needs about", 0},
    {"train: flags asking for terabytes", P_NONE, NULL, TRAIN("corpus.txt", "new", "--block-size", "16384", "--n-layer",
     "256"), 2, "train: block_size 16384 x n_layer 256 (n_head 2, n_embd 16, batch 4) needs about", 0},
    /* issue 35 (M2): each shard beyond the first keeps a gradient buffer of the model's size */
    {"train: --shards that cannot fit", P_NONE, NULL, TRAIN("corpus.txt", "new", "--n-embd", "4096", "--n-head", "1",
     "--n-layer", "1", "--block-size", "1", "--batch-size", "1024", "--shards", "1024"), 2,
     "--shards 1024: 1024 shards need about", 0},
    {"train: a model too large to checkpoint", P_NONE, NULL, TRAIN("corpus.txt", "new", "--n-embd", "8192",
     "--n-head", "1", "--n-layer", "1", "--block-size", "1", "--batch-size", "1"), 2,
     "Adam's state (8 bytes each) would not fit the 4 GiB a checkpoint file holds", 0},
    {"--resume: a negative second moment", P_NEG_V, NULL, RESUME("--max-iters", "4"), 1,
     "holds a negative second moment", 0},
    {"--resume: an eval loss that is NaN", P_EVAL_NAN, NULL, RESUME("--max-iters", "4"), 1,
     "metadata eval losses are not valid losses", 0},
    {"sample: a vocab far longer than vocab_size", P_VOCAB_LONG, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "a vocabulary of vocab_size 2 can take", 0},
    {"--resume: train.lock is a symbolic link", P_LOCK_LINK, NULL, RESUME("--max-iters", "4"), 1,
     "ckpt/train.lock: cannot create the lock file: Too many levels of symbolic links", 0},
    {"--min-lr above --lr", P_NONE, NULL, TRAIN("corpus.txt", "new", "--lr", "0.001", "--min-lr", "0.01"), 2,
     "--min-lr 0.01 is above --lr 0.001", 0},
    {"--resume: --lr below the saved --min-lr", P_NONE, NULL, RESUME("--lr", "1e-5"), 2,
     "--min-lr 0.0001 is above --lr 1e-05", 0},
    /* a diverged model never replaces a good checkpoint, and eval never prints -nan */
    {"train: the evaluation's loss is not finite", P_DIVERGED, NULL,
     TRAIN("corpus.txt", "ckpt", "--init-from", "diverged", "--overwrite"), 1,
     "iteration 0: the evaluation's val loss is nan: the model has diverged; stopped; kept: ckpt/ckpt-00000002, "
     "the latest, and ckpt/ckpt-00000000, the best",
     F_STDOUT | F_METRICS | F_LOADS | F_WARNING},
    /* issue 35 (L7): sample and attn refuse it as eval does, never printing newlines or NaN weights */
    {"sample: a finite but absurd model", P_DIVERGED, NULL, A("sample", "--ckpt", "diverged"), 1,
     "is not finite", 0},
    {"attn: a finite but absurd model", P_DIVERGED, NULL,
     A("attn", "--ckpt", "diverged", "--prompt", "e", "--out", "a.png"), 1, "are not finite or do not sum to 1", 0},
    {"eval: a loss that is not finite", P_DIVERGED, NULL, A("eval", "--ckpt", "diverged", "--data", "corpus.txt"), 1,
     "corpus.txt: the loss is nan", 0},
    /* output that cannot be written is an error at once */
    {"sample to a full device", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--max-new-tokens", "10000000"), 1,
     "stdout: write failed: No space left on device", F_FULL},
    {"sample to a closed pipe, SIGPIPE ignored", P_NONE, NULL,
     A("sample", "--ckpt", "ckpt", "--max-new-tokens", "10000000"), 1, "stdout: write failed: Broken pipe", F_EPIPE},
    /* issue 35 (L6): SIGPIPE at its default must not kill silently */
    {"sample | head -c1", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--max-new-tokens", "10000000"), 1,
     "stdout: write failed: Broken pipe", F_EPIPE | F_SIGPIPE},
    {"train --resume | head -c1", P_NONE, NULL, RESUME("--max-iters", "4"), 1, "stdout: write failed: Broken pipe",
     F_EPIPE | F_SIGPIPE | F_METRICS | F_LOADS},
    {"eval to a full device", P_NONE, NULL, A("eval", "--ckpt", "ckpt", "--data", "corpus.txt"), 1,
     "stdout: write failed: No space left on device", F_FULL},
    {"metrics.csv cannot grow (file size limit)", P_NONE, NULL,
     RESUME("--max-iters", "1000000", "--eval-interval", "1000000"), 1, "metrics.csv: write failed: File too large",
     F_STDOUT | F_FSIZE_METRICS | F_METRICS | F_LOADS},

    // --- issue 19: no train takes a run apart, nothing lost, every output checked ---
    {"--resume --out a checkpoint directory of a run", P_NONE, NULL,
     A("train", "--data", "corpus.txt", "--out", "ckpt/ckpt-00000002", "--resume"), 2,
     "--out ckpt/ckpt-00000002 lies inside the run directory", 0},
    {"--overwrite --out a checkpoint directory of a run", P_NONE, NULL,
     TRAIN("corpus.txt", "ckpt/ckpt-00000002", "--overwrite"), 2, "a run directory is changed only by its own train",
     0},
    {"--out a new directory inside a run", P_NONE, NULL, TRAIN("corpus.txt", "ckpt/sub/new"), 2,
     "--out ckpt/sub/new lies inside the run directory", 0},
    {"sample: latest lost, checkpoints left", P_LATEST_LOST, NULL, A("sample", "--ckpt", "ckpt"), 1,
     "ckpt has no latest but holds ckpt-00000002, ckpt-00000000: `char_lm train --resume` makes", 0},
    {"train over checkpoints whose latest is lost", P_LATEST_LOST, NULL, TRAIN("corpus.txt", "ckpt"), 2,
     "already holds a checkpoint: --resume continues it, --overwrite starts over, or choose another --out (found: "
     "ckpt-00000002, ckpt-00000000)", 0},
    {"--resume: latest lost, checkpoints of two runs", P_TWO_RUNS, NULL, RESUME("--max-iters", "4"), 2,
     "ckpt has no latest and holds the checkpoints of several runs: ckpt-00000002 (iteration 2, run ", 0},
    {"sample --from best without a best or a latest", P_NO_BEST, NULL, A("sample", "--ckpt", "ckpt", "--from", "best"), 1,
     "ckpt has no best checkpoint (ckpt/best is missing", 0},
    {"sample --from a bad value", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--from", "newest"), 2,
     "--from must be latest or best (got 'newest')", 0},
    {"--resume with another --val-fraction", P_NONE, NULL, RESUME("--val-fraction", "0.2"), 2,
     "a resumed run keeps its split", 0},
    {"--help to a full device", P_NONE, NULL, A("train", "--help"), 1, "stdout: write failed: No space left on device",
     F_FULL},
    {"sample --trace-only to a full device", P_NONE, NULL, A("sample", "--ckpt", "ckpt", "--trace-only"), 1,
     "stdout: write failed: No space left on device", F_FULL},
    {"train to a full device", P_NONE, NULL, RESUME("--max-iters", "1000000"), 1,
     "stdout: write failed: No space left on device; stopped; kept: ckpt/ckpt-00000002, the latest, and "
     "ckpt/ckpt-00000000, the best", F_FULL | F_METRICS | F_LOADS},
};

#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

// ---------------------------------------------------------------------------------------------
// fixture: one good checkpoint per TCase (made in the parent, copied into each test's directory)

static char root[64];
static char good[96];

static void root_setup(void)
{
    strcpy(root, "/tmp/ag_errors_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(root));
    chmod(root, 0755);   /* the rows that run as nobody need to reach their directory */
    snprintf(good, sizeof good, "%s", proc_path(root, "good"));
    ck_assert_int_eq(mkdir(good, 0755), 0);
    char p[PATH_MAX];
    size_t n;
    char *text = proc_make_corpus(3000, &n);
    snprintf(p, sizeof p, "%s", proc_path(good, "corpus.txt"));
    proc_write_file(p, text, n);
    free(text);
    proc_opts o = {.no_wrap = true};
    proc_result r;
    snprintf(p, sizeof p, "%s", proc_path(root, "fixture"));
    proc_run(good, TRAIN("corpus.txt", "ckpt"), p, &o, &r);
    ck_assert_msg(r.exited && r.code == 0, "training the fixture checkpoint: %s\n%s", proc_status_str(&r), r.err);
    proc_result_free(&r);
    proc_run(good, TRAIN("corpus.txt", "other"), p, &o, &r);   /* the same run again, another identity */
    ck_assert_msg(r.exited && r.code == 0, "training the second checkpoint: %s\n%s", proc_status_str(&r), r.err);
    proc_result_free(&r);
}

static void root_teardown(void) { proc_remove_tree(root); }

// ---------------------------------------------------------------------------------------------
// preparing a case

static void truncate_to(const char *path, long size)
{
    ck_assert_int_eq(truncate(path, size), 0);
}

static long file_size(const char *path)
{
    struct stat sb;
    ck_assert_int_eq(stat(path, &sb), 0);
    return (long)sb.st_size;
}

/* Adds 1 to the last digit of the number that follows `key` in the file (same length). */
static void bump_number_after(const char *path, const char *key, const char *stop)
{
    size_t n;
    char *b = proc_read_file(path, &n);
    ck_assert_ptr_nonnull(b);
    char *k = strstr(b + 8, key);   /* the header is text from byte 8 on */
    ck_assert_msg(k != NULL, "%s: no '%s'", path, key);
    char *end = strstr(k, stop);
    ck_assert_ptr_nonnull(end);
    char *d = end - 1;
    ck_assert_msg(*d >= '0' && *d <= '8', "%s: cannot bump '%c'", path, *d);
    (*d)++;
    proc_write_file(path, b, n);
    free(b);
}

/* Replaces the value of metadata key ("key":"value") by "nan(111...)" of the same length. */
static void nan_value(const char *path, const char *key)
{
    size_t n;
    char *b = proc_read_file(path, &n);
    ck_assert_ptr_nonnull(b);
    char *k = strstr(b + 8, key);
    ck_assert_msg(k != NULL, "%s: no '%s'", path, key);
    char *v = k + strlen(key), *end = strchr(v, '"');
    ck_assert(end && end - v >= 5);
    memset(v, '1', (size_t)(end - v));
    memcpy(v, "nan(", 4);
    end[-1] = ')';
    proc_write_file(path, b, n);
    free(b);
}

/* dir/deep: a checkpoint written through the library, tiny in bytes (n_embd 8) but of
 * block_size 16384 and 256 layers: attention weights [16,1,16384,16384] per layer to evaluate. */
static void make_deep(const char *dir)
{
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(proc_path(dir, "corpus.txt"), &c, NULL), AG_OK);
    lm_config cfg;
    ck_assert_int_eq(lm_config_preset(&cfg, "tiny"), AG_OK);
    cfg.model.vocab_size = c.vocab.V;
    cfg.model.n_layer = 256;
    cfg.model.n_head = 1;
    cfg.model.n_embd = 8;
    cfg.model.block_size = 16384;
    ag_gpt *g = ag_gpt_new(&cfg.model, 1, NULL);
    ck_assert_ptr_nonnull(g);
    lm_train_state st = {.run_id = 1, .n_tokens = c.n, .n_train = c.n};
    ag_rng_seed(&st.rng, 1);
    char deep[PATH_MAX];
    snprintf(deep, sizeof deep, "%s", proc_path(dir, "deep"));
    ck_assert_int_eq(mkdir(deep, 0755), 0);
    ck_assert_int_eq(fx_ckpt_save(deep, g, &cfg, &c.vocab, &st, NULL), AG_OK);
    ag_gpt_free(g);
    ag_corpus_free(&c);
}

/* dir/diverged: a copy of ckpt with every weight FLT_MAX (finite: the loader takes it; the
 * embeddings' sum overflows, so the loss is NaN). */
static void make_diverged(const char *dir)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", proc_path(dir, "diverged"));
    proc_copy_tree(proc_path(dir, "ckpt"), p);
    snprintf(p, sizeof p, "%s", proc_path(proc_ckpt(proc_path(dir, "diverged")), "model.safetensors"));
    size_t n;
    unsigned char *b = (unsigned char *)proc_read_file(p, &n);
    ck_assert_ptr_nonnull(b);
    size_t data = 8 + (size_t)b[0] + ((size_t)b[1] << 8) + ((size_t)b[2] << 16);   /* header length < 16 MB */
    for (size_t i = data; i + 4 <= n; i += 4) memcpy(b + i, "\xff\xff\x7f\x7f", 4);
    proc_write_file(p, b, n);
    free(b);
}

/* n bytes written over path's bytes at offset at (from the end when at < 0). */
static void poke(const char *path, long at, const char *bytes, size_t n)
{
    size_t size;
    char *b = proc_read_file(path, &size);
    ck_assert_ptr_nonnull(b);
    memcpy(b + (at < 0 ? (long)size + at : at), bytes, n);
    proc_write_file(path, b, size);
    free(b);
}

/* The config's vocab_size written with one digit fewer ("27" -> " 2"): same length, offsets kept. */
static void shorten_vocab_size(const char *model)
{
    size_t n;
    char *b = proc_read_file(model, &n);
    ck_assert_ptr_nonnull(b);
    char *k = strstr(b + 8, "\\\"vocab_size\\\": ");
    ck_assert_ptr_nonnull(k);
    k += strlen("\\\"vocab_size\\\": ");
    size_t digits = strspn(k, "0123456789");
    ck_assert_uint_ge(digits, 2);
    memset(k, ' ', digits - 1);
    k[digits - 1] = '2';
    proc_write_file(model, b, n);
    free(b);
}

/* dir/name made: a file holding text, or (text NULL) a directory; then given the mode. */
static void make_entry(const char *dir, const char *name, const char *text, mode_t mode)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", proc_path(dir, name));
    if (text) proc_write_file(p, text, strlen(text));
    else ck_assert_int_eq(mkdir(p, mode), 0);
    ck_assert_int_eq(chmod(p, mode), 0);
}

/* The preparations outside the checkpoint's files: inputs, directories, latest, the lock.
 * False when prep is not one of them. */
static bool prepare_around(const char *dir, prep_kind prep)
{
    switch (prep) {
    case P_EMPTY: make_entry(dir, "empty.txt", "", 0644); break;
    case P_UNREADABLE: make_entry(dir, "unreadable.txt", "the cat sat on the mat\n", 0); break;
    case P_DIR: make_entry(dir, "adir", NULL, 0755); break;
    case P_FILE: make_entry(dir, "file", "not a directory\n", 0644); break;
    case P_RO_DIR: make_entry(dir, "rodir", NULL, 0555); break;
    case P_EMPTY_DIR: make_entry(dir, "nockpt", NULL, 0755); break;
    case P_MODEL_IS_DIR:
        make_entry(dir, "ckpt2", NULL, 0755);
        make_entry(dir, "ckpt2/model.safetensors", NULL, 0755);
        break;
    case P_LATEST_MISSING: proc_write_file(proc_path(dir, "ckpt/latest"), "ckpt-00000009\n", 14); break;
    case P_LATEST_BAD: proc_write_file(proc_path(dir, "ckpt/latest"), "../../etc\n", 10); break;
    case P_DEEP: make_deep(dir); break;
    case P_DIVERGED: make_diverged(dir); break;
    case P_LOCK_LINK:
        proc_write_file(proc_path(dir, "victim"), "precious\n", 9);
        ck_assert_int_eq(symlink("../victim", proc_path(dir, "ckpt/train.lock")), 0);
        break;
    case P_LATEST_LOST: ck_assert_int_eq(unlink(proc_path(dir, "ckpt/latest")), 0); break;
    case P_NO_BEST:   /* with a latest, its train state names the best (issue 35: test_rundir's hostile_best) */
        ck_assert_int_eq(unlink(proc_path(dir, "ckpt/best")), 0);
        ck_assert_int_eq(unlink(proc_path(dir, "ckpt/latest")), 0);
        break;
    case P_TWO_RUNS: {
        char from[PATH_MAX];
        snprintf(from, sizeof from, "%s", proc_ckpt(proc_path(dir, "other")));
        proc_copy_tree(from, proc_path(dir, "ckpt/ckpt-00000001"));
        ck_assert_int_eq(unlink(proc_path(dir, "ckpt/latest")), 0);
        break;
    }
    default: return false;
    }
    return true;
}

/* The damage done to the live checkpoint (live: its directory, model: its model file). */
static void damage_checkpoint(const char *dir, const char *live, const char *model, prep_kind prep)
{
    char state[PATH_MAX], from[PATH_MAX];
    snprintf(state, sizeof state, "%s", proc_path(live, "train_state.safetensors"));
    switch (prep) {
    case P_TRUNC_MODEL: truncate_to(model, file_size(model) / 2); break;
    case P_TRUNC_MODEL_HDR: truncate_to(model, 100); break;
    case P_TRUNC_STATE: truncate_to(state, file_size(state) / 2); break;
    case P_HDR_LEN: poke(model, 0, "\0\0\0\0\0\0\0\x40", 8); break;   /* little-endian 2^62 */
    case P_HDR_JSON: proc_patch_file(model, "\"dtype\":", "\"dtype\";"); break;
    case P_DTYPE: proc_patch_file(model, "\"dtype\":\"F32\"", "\"dtype\":\"F16\""); break;
    case P_OFFSETS: proc_patch_file(model, "\"data_offsets\":[0,", "\"data_offsets\":[4,"); break;
    case P_NAN: poke(model, -4, "\x01\x00\xc0\x7f", 4); break;   /* a quiet NaN, little-endian */
    case P_FORMAT: proc_patch_file(model, "\"format\":\"char_lm-1\"", "\"format\":\"char_lm-7\""); break;
    case P_SHAPE: proc_patch_file(model, "\\\"n_embd\\\": 16", "\\\"n_embd\\\":  8"); break;
    case P_HUGE: proc_patch_file(model, "\\\"n_embd\\\": 16", "\\\"n_embd\\\": 96"); break;
    case P_VOCAB_SIZE: bump_number_after(model, "\\\"vocab_size\\\": ", ","); break;
    case P_VOCAB_OTHER: bump_number_after(model, "\"vocab\":\"[", "]"); break;
    case P_NAME_NL:
        proc_patch_file(model, "\"tok_emb.weight\":{\"dtype\":\"F32\"", "\"tok_emb\\nweigh\":{\"dtype\":\"F16\"");
        break;
    case P_FORMAT_NL: proc_patch_file(model, "\"format\":\"char_lm-1\"", "\"format\":\"cha\\nlm-1\""); break;
    case P_OTHER_RUN: {
        snprintf(from, sizeof from, "%s", proc_path(proc_ckpt(proc_path(dir, "other")), "train_state.safetensors"));
        size_t n;
        char *b = proc_read_file(from, &n);
        ck_assert_ptr_nonnull(b);
        proc_write_file(state, b, n);
        free(b);
        break;
    }
    case P_FIFO:
        ck_assert_int_eq(unlink(model), 0);
        ck_assert_int_eq(mkfifo(model, 0644), 0);
        break;
    case P_NEG_V: poke(state, -4, "\x00\x00\x80\xbf", 4); break;   /* -1.0f, the last v.* value */
    case P_EVAL_NAN: nan_value(state, "\"eval_train_loss\":\""); break;
    case P_VOCAB_LONG: shorten_vocab_size(model); break;
    default: break;
    }
}

static void prepare(const char *dir, const err_case *c)
{
    char model[PATH_MAX], live[PATH_MAX];
    proc_copy_tree(good, dir);
    snprintf(live, sizeof live, "%s", proc_ckpt(proc_path(dir, "ckpt")));   /* ckpt/ckpt-00000002 */
    snprintf(model, sizeof model, "%s", proc_path(live, "model.safetensors"));
    if (c->text) proc_write_file(proc_path(dir, "input.txt"), c->text, strlen(c->text));
    if (!prepare_around(dir, c->prep)) damage_checkpoint(dir, live, model, c->prep);
    if (c->flags & F_DROP) chmod(dir, 0755);
}

// ---------------------------------------------------------------------------------------------
// the test

/* The earlier checkpoint in dir/ckpt still samples, evaluates and resumes. */
static void check_still_loads(const char *dir, const char *io)
{
    const char *const *const runs[] = {
        A("sample", "--ckpt", "ckpt", "--max-new-tokens", "5"),
        A("eval", "--ckpt", "ckpt", "--data", "corpus.txt"),
        RESUME("--max-iters", "3"),
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        proc_result r;
        proc_run(dir, runs[k], io, NULL, &r);
        ck_assert_msg(r.exited && r.code == 0, "after the failed write, `char_lm %s` in %s: %s\n%s", runs[k][0], dir,
                      proc_status_str(&r), r.err);
        proc_result_free(&r);
    }
}

START_TEST(test_error_case)
{
    const err_case *c = &cases[_i];
    char dir[PATH_MAX], io[PATH_MAX], p[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/case%02d", root, _i);
    snprintf(io, sizeof io, "%s/io%02d", root, _i);
    proc_remove_tree(dir);
    prepare(dir, c);

    proc_opts o = {.drop_root = (c->flags & F_DROP) != 0, .stdout_closed_pipe = (c->flags & F_EPIPE) != 0,
                   .sigpipe_default = (c->flags & F_SIGPIPE) != 0,
                   .stdout_path = (c->flags & F_FULL) ? "/dev/full" : NULL};
    if (c->flags & F_FSIZE) {
        snprintf(p, sizeof p, "%s", proc_path(proc_ckpt(proc_path(dir, "ckpt")), "train_state.safetensors"));
        o.fsize_limit = file_size(p) / 2;
    }
    /* at least a page: clang's OpenMP runtime (LLVM libomp) sizes a 1 KiB file in /dev/shm as it
     * starts, and dies of SIGBUS when the limit forbids it */
    if (c->flags & F_FSIZE_METRICS) o.fsize_limit = file_size(proc_path(dir, "ckpt/metrics.csv")) + 300;
    if ((c->flags & F_FSIZE_METRICS) && o.fsize_limit < 4096) o.fsize_limit = 4096;
    if ((c->flags & (F_FULL | F_EPIPE | F_FSIZE_METRICS)) && !proc_wrapped())
        o.timeout_s = 30;   /* at once, not after the run (valgrind keeps its own limit) */
    proc_snapshot before, after;
    proc_snapshot_take(dir, &before);
    proc_result r;
    proc_run(dir, c->args, io, &o, &r);
    if (r.skipped) {
        fprintf(stderr, "test_errors: '%s' skipped: cannot run as an unprivileged user here\n", c->name);
        proc_result_free(&r);
        proc_snapshot_free(&before);
        return;
    }
    if (getenv("CHAR_LM_TABLE"))   /* the table as it runs, for a report */
        printf("%-55s %-8s %s", c->name, proc_status_str(&r), r.err);
    ck_assert_msg(!r.timed_out && !r.signaled, "%s: char_lm %s\nstderr: %s", c->name, proc_status_str(&r), r.err);
    ck_assert_msg(r.code == c->code, "%s: %s, expected exit %d\nstderr: %s", c->name, proc_status_str(&r), c->code,
                  r.err);
    const char *line = r.err;   /* the error line, after the warnings a row allows */
    while ((c->flags & F_WARNING) && strncmp(line, "char_lm: warning: ", 18) == 0 && strchr(line, '\n'))
        line = strchr(line, '\n') + 1;
    ck_assert_msg(proc_lines(line) == 1 && strncmp(line, "char_lm: error: ", 16) == 0,
                  "%s: stderr is not one 'char_lm: error:' line:\n%s", c->name, r.err);
    ck_assert_msg(strstr(r.err, c->msg) != NULL, "%s: the error\n  %s  lacks '%s'", c->name, r.err, c->msg);
    ck_assert_msg((c->flags & F_STDOUT) || r.out_len == 0, "%s: unexpected stdout:\n%s", c->name, r.out);

    /* nothing the user had is lost, nothing half-written is left */
    proc_snapshot_take(dir, &after);
    const char *const allow_metrics[] = {"ckpt/metrics.csv", NULL};
    const char *diff = proc_snapshot_diff(&before, &after, (c->flags & F_METRICS) ? allow_metrics : NULL);
    ck_assert_msg(diff == NULL, "%s: %s", c->name, diff);
    const char *tmp = proc_find_tmp(dir);
    ck_assert_msg(tmp == NULL, "%s: left %s behind", c->name, tmp);
    proc_snapshot_free(&before);
    proc_snapshot_free(&after);
    proc_result_free(&r);

    if (c->flags & F_LOADS) check_still_loads(dir, io);
    proc_remove_tree(dir);
}
END_TEST

Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("table");
    tcase_add_unchecked_fixture(tc, root_setup, root_teardown);
    tcase_set_timeout(tc, proc_wrapped() ? 900 : 300);
    tcase_add_loop_test(tc, test_error_case, 0, N_CASES);
    suite_add_tcase(s, tc);
    return s;
}
