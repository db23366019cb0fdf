/* train.h -- the run machinery of a training program, for any model (issue 31): what keeps a
 * run directory whole and what draws its loss curve. It names no model: a program gives its
 * own name once (ag_train_name) and its own curve's title and floor (ag_loss_plot).
 *
 *   ag_train_name                 the program's name in messages ("char_lm") and the prefix of
 *                                 its environment variables ("CHAR_LM": CHAR_LM_FAULT, ...)
 *   ag_lock_take, ag_lock_drop    DIR itself (flock) and DIR/train.lock (a record lock, and
 *                                 its pid), locked by `train` for its whole life: a second train
 *                                 on DIR is refused at once, naming the holder, even after
 *                                 train.lock was deleted; the kernel drops the locks when the
 *                                 process dies, however it dies
 *   ag_file_create, ag_file_commit
 *                                 a file written beside its target as "<path>.tmp.<pid>" and
 *                                 renamed over it: readers see the old file or the new one,
 *                                 never half of one, and a symbolic link planted at <path> (or
 *                                 at the temporary name) is replaced, its target never written
 *   ag_write_file                 the same for a whole string
 *   ag_fsync_dir, ag_mkdir_p      makes the renames in a directory durable; makes a run
 *                                 directory with its missing parents
 *   ag_fault                      the crash test's fault points (<PREFIX>_FAULT=N)
 *   ag_plot_loss, ag_plot_script  DIR/loss.png from DIR/metrics.csv, any picture, by gnuplot
 *                                 (plot.c), every wait for it bounded
 *   ag_ckpt_write_weights, ag_ckpt_write_moments, ag_ckpt_read_weights, ag_ckpt_read_moments
 *                                 the tensors of a checkpoint, for any ag_params (ckpt.c)
 *   ag_st_meta_u64, ag_st_meta_iter, ag_st_meta_loss, ag_ckpt_check_bound
 *                                 a checkpoint file's metadata read, the moments bound to
 *                                 their weights by model_hash (ckpt_meta.c)
 *   ag_csv_open, ag_csv_layer_head
 *                                 a run's CSV (metrics.csv), cut right on a resume, and a header
 *                                 of per-layer columns (csv.c)
 *   ag_ckpt_pointer, ag_ckpt_point, ag_ckpt_remove, ag_ckpt_kept
 *                                 the checkpoint unit: ckpt-N directories that DIR/latest and
 *                                 DIR/best name, replaced durably, and what an error leaves
 *                                 there, for its message (ckpt_dir.c)
 *   ag_ckpt_clean, ag_ckpt_recover, ag_ckpt_outside_runs
 *                                 whose checkpoints a run directory holds: a train removes its
 *                                 own superseded ones and nothing else, a lost latest is found
 *                                 again, no run inside another (ckpt_keep.c)
 *   ag_ckpt_save, ag_ckpt_resolve, ag_ckpt_read
 *                                 the save of a checkpoint as one unit, and the directory a
 *                                 reader finds one in (read again when the writer moved on),
 *                                 for any program's files (ckpt_save.c)
 *   ag_dynamics                   how a step moves each group of weights (dynamics.c)
 *   ag_dynamics_log, ag_plot_dynamics
 *                                 --log-dynamics: DIR/dynamics.csv and dynamics.png, per layer
 *   ag_activations, ag_plot_activations
 *                                 --log-activations: DIR/activations.csv and .png, per block (activations.c)
 *   ag_lr_range_at, ag_lr_range_read
 *                                 --lr-find: the learning-rate sweep, DIR/lr_find.png (lr_range.c)
 *   ag_report_write               DIR/report.md, the report card of a run (report.c)
 *   ag_progress                   a run's progress line: redrawn in place on a terminal, a line
 *                                 a log step elsewhere, the log's other lines clearing it (progress.c)
 *   ag_train_run                  a whole training run of any model that fills an
 *                                 ag_train_client: the steps, evaluations, checkpoints, exact
 *                                 resume, time budget and signals (loop.c, loop_ckpt.c), on one
 *                                 process or several ranks, a step as micro-batches
 *   ag_train_flag, ag_train_flags_check, ag_train_flags_usage
 *                                 the command-line flags every program on ag_train_run shares
 *                                 (--out, --steps, --resume, ...) into its ag_train_opts (flags.c)
 *   ag_train_format, ag_train_state
 *                                 a client's own checkpoint files (char_lm's, MODEL.md) in place
 *                                 of the loop's, from and into the loop's state
 *   ag_state_write, ag_state_read, ag_state_identify
 *                                 such files as a weights file and a state file beside it,
 *                                 the loop's state in the second's metadata (ckpt_state.c)
 *   ag_ddp_*                      that split of a step over ranks and micro-batches (ddp.h)
 *   ag_machine_bytes, ag_check_memory, ag_check_checkpointable
 *                                 what a run may hold: the machine's memory or its cgroup's limit,
 *                                 a run that cannot fit refused before it is allocated (memory.c)
 *   ag_budget                     a time budget for any run: the steps timed, the step count
 *                                 fitted, the final evaluation and checkpoint in time (budget.h)
 *
 * Nothing prints (except ag_fault, just before it kills the process); errors are a status and
 * one line in err, naming the file. */
#ifndef AG_TRAIN_H
#define AG_TRAIN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <signal.h>
#include <sys/types.h>
#include "../io/safetensors.h"
#include "../optim/optim.h"
#include "../tensor/rng.h"
#include "../params/params.h"
#include "../tensor/tensor.h"
#include "ddp.h"   /* the split of a step over ranks and micro-batches (ag_train_opts' dist) */
#include "budget.h"   /* ag_budget: the time budget of any run, ag_train_run's and char_lm's (budget.c) */

#define AG_LOCK_NAME "train.lock"

/* The program's name, in the messages of this module ("DIR is in use by another char_lm train",
 * "char_lm: fault point 3: ..."), and the prefix of the environment variables it reads
 * (<env>_FAULT, <env>_PLOT_TIMEOUT). Both strings must live as long as the program. Until it is
 * called: "attograd" and "AG". */
void ag_train_name(const char *program, const char *env);
/* "DIR/name" in buf (always NUL-terminated); false if it did not fit. */
bool ag_path_join(char *buf, size_t n, const char *dir, const char *name);

typedef struct {
    bool held;
    int fd;         /* DIR/train.lock */
    int dir_fd;     /* DIR, flock'ed; -1 where the file system cannot flock a directory */
    char path[4096];
} ag_lock;

/* Locks DIR itself (flock: no file removed inside it releases that) and DIR/train.lock
 * (created if missing, with our pid written into it; DIR must exist). AG_ERR_ARG when another
 * process holds either ("DIR is in use by another <program> train (pid N, ..."), AG_ERR_IO when
 * they cannot be made. */
ag_status ag_lock_take(ag_lock *l, const char *dir, ag_error *err);
/* Removes the lock file and releases it; no-op when not held. */
void ag_lock_drop(ag_lock *l);
/* A path that reaches the locked directory wherever it is, in via [n] ("/proc/self/fd/N"): a
 * train writes through it, never into a directory made at DIR's path after it started (issue
 * 35). "" where there is none (no /proc, the lock not held). */
void ag_lock_via(const ag_lock *l, char *via, size_t n);
/* DIR (the path the lock was taken on) no longer names the locked directory (`mv DIR DIR.old;
 * mkdir DIR` while a train runs): true, with where it is now in now_at [n] (or ""). False when
 * it is the same directory, or the lock is not held. */
bool ag_lock_moved(const ag_lock *l, const char *dir, char *now_at, size_t n);

/* Opens "<path>.tmp.<pid>" (its name in tmp [n]) as a new file, removing whatever had that
 * name first. NULL with err set on failure. */
FILE *ag_file_create(const char *path, char *tmp, size_t n, ag_error *err);
/* Checks and closes fp (fsync'ed first when durable), then renames tmp over path. On any
 * failure tmp is removed and path is untouched. */
ag_status ag_file_commit(FILE *fp, const char *tmp, const char *path, bool durable, ag_error *err);
/* Closes fp and removes tmp (an abandoned ag_file_create). */
void ag_file_discard(FILE *fp, const char *tmp);
/* text into path, through a temporary file (not fsync'ed: for plots and scripts). */
ag_status ag_write_file(const char *path, const char *text, ag_error *err);

/* mkdir -p: every missing component of dir made (0777 less the umask); AG_ERR_IO naming the
 * component that cannot be made or is not a directory, AG_ERR_ARG for a path too long. */
ag_status ag_mkdir_p(const char *dir, ag_error *err);

/* fsync of a directory (a filesystem that cannot sync directories is not an error). */
ag_status ag_fsync_dir(const char *dir, ag_error *err);

/* A fault point for the crash-consistency test: with <env>_FAULT=N in the environment the
 * N-th call in this process says "<program>: fault point N: <step> <path>" on stderr and kills
 * the process with SIGKILL (as a power cut or `kill -9` would, with nothing cleaned up).
 * Without the variable it does nothing. A checkpoint writer calls it before every step that changes
 * the disk, including those inside ag_st_save (passed to it as the step hook of its opts).
 * <env>_FAULT=<step> (not a number) kills at the first call of that step instead. */
void ag_fault(const char *step, const char *path);

// --- pictures (plot.c) ---

/* Every wait for gnuplot is bounded (plot.c says how): it is killed after ag_plot_timeout()
 * seconds (60, or $<env>_PLOT_TIMEOUT), and within a second of *stop becoming non-zero (a
 * stop signal; stop must live as long as the program). Either is AG_ERR_IO. If gnuplot is
 * missing or fails, the status is AG_ERR_IO and err says so in one line; the caller decides
 * whether that is worth a warning (a training goes on without a picture). */
void ag_plot_set_stop(const volatile sig_atomic_t *stop);
double ag_plot_timeout(void);

/* What DIR/loss.png shows besides metrics.csv's columns (iter,lr,loss,train_loss,val_loss,...):
 * the batch loss, the evaluations, the learning rate against the right-hand axis. */
typedef struct {
    const char *title;       /* over the picture, as gnuplot text (an "_" is "\\_" in a C string) */
    double floor;            /* a dashed line at this loss (a uniform guess's); NaN: none */
    const char *floor_title; /*   its title in the key */
    bool with_val;           /* the validation curve too (false when the run has no validation split) */
} ag_loss_plot;

/* Writes DIR/loss.gp (a plain gnuplot script: `cd DIR && gnuplot loss.gp` redraws the curve by
 * hand) and runs gnuplot on it in DIR, which draws DIR/loss.png. */
ag_status ag_plot_loss(const char *dir, const ag_loss_plot *p, ag_error *err);
/* The same without waiting, so training goes on while gnuplot draws: *pid gets the gnuplot
 * process, for ag_plot_loss_wait. */
ag_status ag_plot_loss_start(const char *dir, const ag_loss_plot *p, pid_t *pid, ag_error *err);
/* Reaps the plot started as pid: block waits for it (bounded, as said above); without block
 * only *done tells whether it has ended yet. Once *done, the status is ag_plot_loss's. done and
 * err may be NULL (a run that stops early waits for its picture, whatever became of it). */
ag_status ag_plot_loss_wait(pid_t pid, bool block, bool *done, const char *dir, ag_error *err);

/* loss.png redrawn while a run goes on, from one evaluation to the next (*pid: the drawing in
 * progress, 0 at the start): the one before reaped when it has ended (its failure returned),
 * a new one started in the background unless that one is still drawing (then skipped: a slow
 * gnuplot never holds a run up, nor are drawings piled up); last: the one before waited for,
 * and the final picture drawn and waited for. A failure, the one before's or the new one's, is
 * returned with *pid 0: the program decides whether to draw again. */
ag_status ag_plot_loss_again(const char *dir, const ag_loss_plot *p, pid_t *pid, bool last, ag_error *err);

/* Any picture of a run: writes script to DIR/gp and runs gnuplot on it in DIR, which draws
 * png. Errors as above. */
ag_status ag_plot_script(const char *dir, const char *gp, const char *png, const char *script, ag_error *err);
/* Runs the script DIR/gp, already written, to the end; png is the picture it draws. */
ag_status ag_plot_run(const char *dir, const char *gp, const char *png, ag_error *err);

// --- the tensors of a checkpoint, for any ag_params (ckpt.c) ---

/* The layout (char_lm's since its first checkpoint, ../shared/MODEL.md "Checkpoint files"): a
 * weights file holds every parameter of the store under its own name, F32, and an optimizer
 * file holds its moments as m.<name> and v.<name> (SGD keeps its momentum in m), both with the
 * program's metadata (its config, format tag, iteration, ...), which this module does not
 * read. A write goes through ag_st_save with the fault points (ag_fault) of every step. */

/* path := P's weights, with meta [n_meta]. A parameter that is NaN or Inf is AG_ERR_NONFINITE
 * and nothing is written (the checkpoint there stays the last good one). */
ag_status ag_ckpt_write_weights(const char *path, const ag_params *P, const ag_st_meta *meta, int n_meta,
                                ag_error *err);
/* AG_ERR_NONFINITE, naming the parameter and saying that path was not written, when a weight
 * of P is NaN or Inf (a program checks before the first file of a checkpoint). */
ag_status ag_ckpt_check_finite(const ag_params *P, const char *path, ag_error *err);
/* path := P's moments (P->m as m.<name>, P->v as v.<name>), with meta [n_meta]. */
ag_status ag_ckpt_write_moments(const char *path, const ag_params *P, const ag_st_meta *meta, int n_meta,
                                ag_error *err);
/* P's weights from f (read from path, named in messages): f must hold exactly P's parameters,
 * each with its shape, every value finite. */
ag_status ag_ckpt_read_weights(const ag_st_file *f, const char *path, ag_params *P, ag_error *err);
/* P->m and P->v from f: exactly m.<name> and v.<name> of every parameter, finite, v >= 0. */
ag_status ag_ckpt_read_moments(const ag_st_file *f, const char *path, ag_params *P, ag_error *err);

/* FNV-1a of the weights as a weights file holds them (F32): binds a moments file to its
 * weights, so that files of two branches of a run do not pair. */
uint64_t ag_weights_hash(const ag_params *P);
/* A new run's identity: 64 random bits from the kernel, never 0. */
uint64_t ag_new_run_id(void);
/* 16 lowercase hex digits of v in buf [n >= 17] (run ids and hashes in metadata), and back:
 * false unless s is exactly that. */
void ag_hex64_format(char *buf, size_t n, uint64_t v);
bool ag_hex64_parse(const char *s, uint64_t *v);
/* A decimal count without sign or spaces; false if s is not one or overflows. */
bool ag_u64_parse(const char *s, uint64_t *out);

// --- a run's CSV files (csv.c) ---

/* DIR/name (metrics.csv, ...) opened in *csv to append rows "<iter>,...", its first line head
 * (ending in "\n"). start < 0: a fresh run, a new file of head alone (a file or a link there
 * is replaced whole). A run resumed at iteration start keeps the rows of the iterations before
 * it and drops the rest: cut in place when the file has the same header (no room for a copy
 * needed), else written anew, the kept rows under the new header. A FIFO or a non-regular file
 * there is never opened to read. */
ag_status ag_csv_open(const char *dir, const char *name, const char *head, long start, FILE **csv, ag_error *err);

/* A CSV header of per-layer columns: first, then for each layer l every name of cols
 * [NULL-terminated] as ",<name>_L<l>", then "\n" ("iter,lr,...,grad_attn_L0,grad_mlp_L0,...";
 * n_layer 0: first alone). malloc'd; NULL on OOM. */
char *ag_csv_layer_head(const char *first, const char *const *cols, int n_layer);

// --- the checkpoint unit of a run directory (ckpt_dir.c) ---

/* DIR holds its checkpoints as ckpt-N directories; DIR/latest names the live one, DIR/best the
 * one of the run's lowest evaluation loss, each one line ("ckpt-00000120"). Replacing latest
 * (ag_ckpt_point) is what commits a checkpoint. */
#define AG_CKPT_LATEST "latest"
#define AG_CKPT_BEST "best"
/* The two as the names a flag may take (fields.h: a text row's sw; char_lm's --from latest|best). */
extern const ag_switch ag_ckpt_from_switch;

/* "ckpt-", 8 to 18 digits, perhaps "-b": the names a checkpoint gets. */
bool ag_ckpt_name_ok(const char *name);
/* The name DIR/<which> (AG_CKPT_LATEST, AG_CKPT_BEST) holds, in name [64]. AG_ERR_IO with errno
 * ENOENT (or ENOTDIR) when there is none; AG_ERR_FORMAT when it is not a checkpoint name (or
 * not a regular file: a FIFO there never blocks). */
ag_status ag_ckpt_pointer(const char *dir, const char *which, char *name, ag_error *err);
/* DIR/<which> := name, durably (a temporary file, fsync, rename, fsync of DIR), a fault point
 * before each step; *committed: the rename was done, so it names name even if the last sync
 * failed. */
ag_status ag_ckpt_point(const char *dir, const char *which, const char *name, bool *committed, ag_error *err);
/* What DIR keeps, for the message of a run stopped by an error, read from DIR so that it is
 * true: "kept: DIR/ckpt-00000020, the latest and the best", "kept: DIR/<latest>, the latest, and
 * DIR/<best>, the best", "kept: DIR/<latest>, the latest" (no best), or "no checkpoint was
 * saved" (no latest), in buf [n]. */
void ag_ckpt_kept(const char *dir, char *buf, size_t n);
/* Removes DIR/name, a checkpoint directory: the files named in files [NULL-terminated] (and
 * their temporary files "<file>.tmp.<pid>"), then the directory if that emptied it; a user's
 * file in it stays. Renamed to "<name>.del" first, so a kill halfway leaves no half ckpt-N. */
void ag_ckpt_remove(const char *dir, const char *name, const char *const *files);
/* The same for the checkpoint directory at path, without ag_ckpt_remove's fault point. */
void ag_ckpt_remove_dir(const char *path, const char *const *files);

// --- whose checkpoints a run directory holds (ckpt_keep.c) ---

/* What a checkpoint directory says about itself, from its files' headers alone. */
typedef struct {
    uint64_t run_id;     /* the run that wrote it, drawn when it started (0: unknown, older files) */
    long iter;           /* the optimizer steps its weights have had */
    uint64_t model_hash; /* its weights' hash (ag_weights_hash; 0: none) */
    uint64_t follows;    /* the model_hash of the run's checkpoint before it (0: none) */
    long best_iter;      /* the run's best evaluation so far: its iteration (-1: none) */
    double eval;         /* the evaluation saved with it (lower is better; NaN: none) */
    uint64_t origin;     /* a run's first checkpoint: what tells the same command started again (the
                            hash of what the run began from); 0 in any other */
} ag_ckpt_id;

/* A program's checkpoints, for the rules below: the module reads nothing of a checkpoint
 * itself, it asks. */
typedef struct {
    const char *const *files;     /* a checkpoint directory's files, NULL-terminated; files[0] holds
                                     the weights (a ckpt-N with it makes DIR a run directory) */
    const char *const *run_files; /* the program's own files in DIR, besides this module's (the
                                     latest and best, metrics.csv, loss.png/gp, dynamics.*,
                                     report.md), whose "<name>.tmp.<pid>" a kill may leave;
                                     NULL-terminated, or NULL */
    bool legacy;                  /* files[0] and files[1] in DIR itself: an older layout's checkpoint */
    /* The identity of the checkpoint directory path; AG_OK only when it is whole. */
    ag_status (*identify)(const char *path, ag_ckpt_id *id, ag_error *err);
    /* With legacy: the run_id and iter of one older layout's file (a kill may leave one of the
     * two); false when it is not one. */
    bool (*file_id)(const char *path, ag_ckpt_id *id);
    const char *pick_flag;        /* the program's flag that names a checkpoint directory to read
                                     ("--ckpt"), for ag_ckpt_resolve's messages; NULL: none */
} ag_ckpt_kind;

/* The identity of the checkpoint directory path whose weights and state are the safetensors
 * files path/model_file and path/state_file: their headers alone are read (cheap for a model of
 * gigabytes) and handed to pair, the program's reading of its own metadata (user: pair's), with
 * *id cleared first (best_iter -1, eval NaN). An identify of an ag_ckpt_kind in one call. */
ag_status ag_ckpt_identify_pair(const char *path, const char *model_file, const char *state_file,
                                ag_status (*pair)(const ag_st_file *m, const ag_st_file *t, const char *path,
                                                  const void *user, ag_ckpt_id *id, ag_error *err),
                                const void *user, ag_ckpt_id *id, ag_error *err);
/* The metadata value key of f as 16 hex digits (a run id, a hash), or 0 when missing or not. */
uint64_t ag_st_meta_hex(const ag_st_file *f, const char *key);
/* The metadata value key of f as an iteration (a decimal count below 2^53), or -1 when missing
 * or not one (ckpt_meta.c, as the three below). */
long ag_st_meta_iter(const ag_st_file *f, const char *key);
/* The metadata value key of f as a loss (a finite number >= 0), or NaN when missing or not one. */
double ag_st_meta_loss(const ag_st_file *f, const char *key);
/* The metadata value key of f (read from path) as a decimal count <= max in *out; AG_ERR_FORMAT
 * naming path and key when it is missing or not one. */
ag_status ag_st_meta_u64(const ag_st_file *f, const char *path, const char *key, uint64_t max, uint64_t *out,
                         ag_error *err);
/* The moments file f (read from path) was saved with P's weights, read from weights_file: its
 * "model_hash" is ag_weights_hash(P) (a file without one, older than the binding, pairs as
 * before). AG_ERR_FORMAT saying the two files are not one checkpoint otherwise. */
ag_status ag_ckpt_check_bound(const ag_st_file *f, const char *path, const char *weights_file, const ag_params *P,
                              ag_error *err);

/* c is a checkpoint that a save of run `run` at iteration `iter` supersedes, so that the run
 * may remove it: the same run, and as old or older, or written after the checkpoint of
 * model_hash `prev` (the one a save follows) but never committed. Nothing else is a run's. */
bool ag_ckpt_superseded(const ag_ckpt_id *c, uint64_t run, long iter, uint64_t prev);
/* The ckpt-N directories in DIR, ", "-separated in buf [n] (cut short with "..."); returns
 * how many. */
int ag_ckpt_list(const char *dir, char *buf, size_t n);
/* DIR holds a checkpoint of kind k, whole or not: a latest (of any kind: a file, a link), a
 * ckpt-N, or with k->legacy the older layout's k->files[0]. */
bool ag_ckpt_exists(const char *dir, const ag_ckpt_kind *k);
/* What a killed train left in DIR, removed: ckpt-*.tmp directories, temporary files of the
 * run's files, the checkpoints the live one supersedes (those of run `also` too: a new run's
 * --overwrite of the old one), the older layout's files if superseded. DIR/best is found from
 * the live checkpoint (best_iter; failing that, the lowest saved evaluation of the run's
 * checkpoints), never from DIR/best alone: a best that lags the live one is mended, one missing
 * or not naming it (garbage, a FIFO, a link, a directory, the wrong name) is written again, and
 * what was wrong goes in note [nn] ("" if nothing) for a warning; the best is never removed. A
 * best that names nothing and no best known: removed. Anything else stays, named in left [n]
 * ("" if none) for a warning. Failures are ignored (the next run tries again). Hold DIR's lock. */
void ag_ckpt_clean(const char *dir, const ag_ckpt_kind *k, uint64_t also, char *left, size_t n, char *note, size_t nn);
/* ag_ckpt_clean at a train's start, what it found said in lines for warnings: warn(user, line)
 * with the note on DIR/best, then "DIR: left alone (not this run's to remove): <what>" when
 * anything stays. */
void ag_ckpt_tidy(const char *dir, const ag_ckpt_kind *k, uint64_t also, void (*warn)(void *user, const char *line),
                  void *user);
/* The run's best checkpoint as ag_ckpt_clean finds it, its name in name [64]; what is wrong
 * with DIR/best in why [96] ("was missing", "named ckpt-..., not the best"; "" when it names
 * that one, or lags as a kill between the two commits leaves it). false when there is no live
 * checkpoint or no best known. Reads only. */
bool ag_ckpt_run_best(const char *dir, const ag_ckpt_kind *k, char *name, char *why);
/* DIR has no latest but holds whole checkpoints: latest := the newest of them, when all are of
 * one run (what was done in note [n], else ""); AG_ERR_ARG naming them when they are of
 * several runs. AG_OK with note "" when there is nothing to recover. Hold DIR's lock. */
ag_status ag_ckpt_recover(const char *dir, const ag_ckpt_kind *k, char *note, size_t n, ag_error *err);
/* A fresh run killed at its first commit leaves a whole checkpoint and no latest: when DIR has
 * no latest, no best and no older layout, and every checkpoint in it is whole with this origin
 * (!= 0: the same command's run, nothing of another), they are removed, their names in gone [n];
 * returns how many. Hold DIR's lock. */
int ag_ckpt_drop_orphans(const char *dir, const ag_ckpt_kind *k, uint64_t origin, char *gone, size_t n);
/* The run whose checkpoint DIR/latest names (its run_id, by k->identify), or 0 (none, not
 * whole, older than run ids). A new run started over it (--overwrite) removes that run's
 * checkpoints once its own first one is committed: ag_ckpt_clean with it as `also`. */
uint64_t ag_ckpt_live_run(const char *dir, const ag_ckpt_kind *k);
/* AG_ERR_ARG when the directory out (existing or not) lies inside a run directory, e.g. is one
 * of its ckpt-N: a run is changed only by its own train. */
ag_status ag_ckpt_outside_runs(const char *out, const ag_ckpt_kind *k, ag_error *err);

// --- saving a checkpoint, and finding one to read, for any ag_ckpt_kind (ckpt_save.c) ---

/* What a save writes, and whose it is (ag_ckpt_superseded's terms). */
typedef struct {
    long iter;          /* its iteration: it goes to DIR/ckpt-<iter> (8 digits at least) */
    uint64_t run_id;    /* the run saving it */
    uint64_t prev;      /* the model_hash of the run's checkpoint before it (0: none) */
    long best_iter;     /* the run's best evaluation so far (-1: none): that checkpoint is kept
                           whatever DIR/best says */
    bool is_best;       /* DIR/best := the new one, once latest names it */
    bool second_name;   /* ckpt-<iter>-b where ckpt-<iter> is the live or the best one or not the
                           run's to clear away (char_lm); without it that is an error */
    bool sync_point;    /* a fault point ("fsync dir") before the fsync of DIR that follows the
                           rename: char_lm's crash test counts it, ag_train_run's has none */
    /* Writes the checkpoint's files (k->files) into the new directory tmp, whole (ag_st_save
     * has the fault points); AG_OK only when all are written. */
    ag_status (*write)(const char *tmp, void *user, ag_error *err);
    void *user;
    const ag_lock *lock;   /* DIR's lock, held (NULL: none): the save goes into the locked
                              directory wherever it is now (ag_lock_via), never into one made at
                              DIR's path after the run started (issue 35); a DIR moved meanwhile
                              is AG_ERR_IO after the save, saying where it went */
    const char *count;     /* what iter counts, in that message: "step" (NULL: "iteration") */
} ag_ckpt_save_opts;

/* A checkpoint of kind k saved into DIR as one unit: its files written by o->write into
 * DIR/<name>.tmp/ (made afresh; "<name>.tmp.<pid>" where a user's directory has that name),
 * renamed to DIR/<name>, DIR fsync'ed, DIR/latest moved to it (the commit), DIR/best too with
 * o->is_best; then the checkpoints that were live and best, if the run's, superseded and no
 * longer named, are removed, and with k->legacy the older layout's files in DIR, if the run's.
 * A fault point (ag_fault) before every step that changes the disk. Its name in name [64];
 * *committed once DIR/latest names it (even when what follows failed). On a failure before
 * the commit nothing new stays and latest names what it named. The weights' check for NaN
 * (ag_ckpt_check_finite) is the caller's, before. Hold DIR's lock (o->lock). Messages name DIR
 * as given, never the path through the lock. */
ag_status ag_ckpt_save(const char *dir, const ag_ckpt_kind *k, const ag_ckpt_save_opts *o, char *name,
                       bool *committed, ag_error *err);
/* The directory that holds the files of DIR's checkpoint <which> (AG_CKPT_LATEST or
 * AG_CKPT_BEST), in buf [n], for a reader: what DIR/<which> names; for best, the run's best
 * found from the live checkpoint (as ag_ckpt_clean finds it), what was wrong with DIR/best in
 * note [nn] ("" if nothing; note may be NULL); without a latest, DIR itself when it holds
 * k->files[0] (the older layout, or a ckpt-N given directly) or is no directory (the reader
 * then says what is wrong). Otherwise an error in one line saying what DIR holds. */
ag_status ag_ckpt_resolve(const char *dir, const char *which, const ag_ckpt_kind *k, char *buf, size_t n, char *note,
                          size_t nn, ag_error *err);
/* A reader's load of DIR's checkpoint <which>, without DIR's lock: ag_ckpt_resolve, then
 * read(where, user, err) on the directory found; when that fails and DIR/<which> has moved on
 * meanwhile (the writer committed a newer checkpoint and removed this one), again with the
 * newer one (5 tries at most). note as ag_ckpt_resolve's (the last try's); err: read's or
 * ag_ckpt_resolve's message. */
ag_status ag_ckpt_read(const char *dir, const char *which, const ag_ckpt_kind *k,
                       ag_status (*read)(const char *where, void *user, ag_error *err), void *user, char *note,
                       size_t nn, ag_error *err);

// --- training dynamics (dynamics.c) ---

/* How one optimizer step moves the weights, per group of parameters (the program's: char_lm's
 * are a layer's attention weights and its MLP weights), each group taken as one vector: its
 * gradient norm ||dW|| before the step, and its update ||W_after - W_before|| / ||W_before||
 * after it, whatever the optimizer did (so measured, not predicted). */
typedef struct ag_dynamics ag_dynamics;
/* group [P->n]: each parameter's group, 0 .. n_groups - 1, or -1 (not measured). NULL with err
 * on out of memory. */
ag_dynamics *ag_dynamics_new(const ag_params *P, const int *group, int n_groups, ag_error *err);
/* Before the update (after the backward): the gradients' norms, and a copy of the weights. */
void ag_dynamics_watch(ag_dynamics *d, const ag_params *P);
/* After the update: grad_norm [n_groups] and update [n_groups] (NaN for a group of zero
 * weights) of the step last watched. */
void ag_dynamics_measure(ag_dynamics *d, const ag_params *P, double *grad_norm, double *update);
void ag_dynamics_free(ag_dynamics *d);   /* NULL ok */

/* --log-dynamics's DIR/dynamics.csv, for a model built of ag_block's: layer l's 2-D weights
 * under "blocks.<l>.attn." and "blocks.<l>.mlp." are its two groups. A row per step logged:
 *   iter,lr,grad_norm,clip, then per layer l: grad_attn_L<l>,grad_mlp_L<l>,update_attn_L<l>,update_mlp_L<l>
 * (the global gradient norm and the clip factor it was multiplied by; per group ||dW|| before
 * the clip and ||W_after - W_before|| / ||W_before||). Which steps are logged is the program's. */
typedef struct ag_dynamics_log ag_dynamics_log;
/* The measure of P's layers; with write, DIR/dynamics.csv opened as ag_csv_open does (start:
 * the iteration a resume starts at, < 0 a fresh run); without it, no file (a rank other than
 * 0). NULL with err when P has no such layer (AG_ERR_ARG), out of memory, or the file fails. */
ag_dynamics_log *ag_dynamics_log_open(const ag_params *P, const char *dir, bool write, long start, ag_error *err);
/* Step it, after its backward and before its update: norm is the global gradient norm, clip
 * the factor the update multiplies the gradients by. */
void ag_dynamics_log_watch(ag_dynamics_log *d, const ag_params *P, long it, double norm, double clip);
/* After the update of step it, at learning rate lr: its row (nothing when it was not watched). */
ag_status ag_dynamics_log_record(ag_dynamics_log *d, const ag_params *P, long it, double lr, ag_error *err);
int ag_dynamics_log_layers(const ag_dynamics_log *d);
void ag_dynamics_log_free(ag_dynamics_log *d);   /* NULL ok; closes the file */
/* DIR/dynamics.gp and DIR/dynamics.png from DIR/dynamics.csv: per layer the gradient norms of
 * the attention and MLP weights (top), and their update/weight ratios with the learning rate on
 * the right-hand axis (bottom), both on log scales. Errors as ag_plot_script's. */
ag_status ag_plot_dynamics(const char *dir, int n_layer, ag_error *err);

// --- the learning-rate range test, --lr-find (lr_range.c, lesson 16) ---

/* The sweep that replaces the schedule: step it of steps takes
 *   lr(it) = lo (hi / lo)^(it / (steps - 1))        lo at the first step, hi at the last,
 * the same factor up at every step, so the steps are spread evenly over ln lr. Cannot fail. */
double ag_lr_range_at(double lo, double hi, long steps, long it);

typedef struct {
    int steps;             /* rows read */
    double steepest_lr;    /* where the smoothed loss falls fastest per unit of ln lr */
    double steepest_slope; /* that slope: d loss / d ln lr (negative) */
    double min_lr;         /* where the smoothed loss is lowest */
    double min_loss;       /* its value */
    double diverged_lr;    /* the first lr where the smoothed loss is twice its lowest (0: never) */
} ag_lr_range;

/* Reads DIR/metrics.csv (iter, lr, loss per step: the sweep's), smooths the loss, finds where it
 * falls fastest per unit of ln lr (before it has doubled from its lowest: past that the run has
 * diverged and its slopes mean nothing), fills *r, writes DIR/lr_find.csv (lr, loss, smoothed)
 * and draws DIR/lr_find.png (ag_plot_script; AG_ERR_IO without gnuplot, *r filled). AG_ERR_IO
 * when metrics.csv cannot be read (r->steps 0), AG_ERR_ARG when it has fewer than 10 steps. */
ag_status ag_lr_range_read(const char *dir, ag_lr_range *r, ag_error *err);

// --- the report card of a run (report.c) ---

/* What DIR/report.md says about a run; the machine (the CPU, its cores, the BLAS and the
 * kernels it chose) is read here. Any field may be left 0 / NULL / NaN: it is shown as unknown
 * or left out. */
typedef struct {
    const char *commit;        /* the build's commit ("d89a286"); NULL: unknown */
    const char *config_json;   /* the run's full config, one JSON object, shown as is */
    const char *kernels;       /* attograd's kernels ("fast", "reference": speed.h) */
    int threads;               /* the threads the run used */
    long steps;                /* the optimizer steps this run took (a resumed run: since the resume) */
    long iter;                 /* the iteration where it ended */
    bool out_of_time;          /* a time budget ended it before its step count */
    double wall_s;             /* the run's wall time, seconds */
    double tokens;             /* the tokens it trained on (steps x batch x context), or the units
                                  unit names: their rate per second */
    double train_loss, val_loss; /* the final evaluation (NaN: none) */
    const char *best;          /* the best checkpoint's name ("ckpt-00000120"), or NULL */
    double best_loss;
    const char *sample;        /* a short sample of the model, shown as a block, or NULL */
    const char *const *pictures; /* NULL-terminated names of pictures in DIR, shown inline, or NULL */
    const char *unit;          /* what tokens counts, for its rate ("strings": strings/s); NULL: tokens */
    const char *config_kv;     /* the config as "key = value" lines, shown as a table (under config_json
                                  when both are given; NULL: none) */
    const char *score_name;    /* the run's own final measure ("exact match"), with score; NULL: none */
    double score;
} ag_run_report;

/* Writes DIR/report.md (replaced whole: ag_write_file's guarantees). Diff two runs' cards to
 * see what changed between them. */
ag_status ag_report_write(const char *dir, const ag_run_report *r, ag_error *err);

// --- what a run may hold, checked before it is allocated (memory.c) ---

/* The memory this process may take, in bytes: the machine's physical memory, or its cgroup's
 * limit where lower (a container; a batch job: Slurm confines each job to its memory request that
 * way); 0 when unknown. what [64] (unless NULL) gets it for a message: "this machine's 25.3 GB",
 * "the memory limit of this process's cgroup, 4.0 GB". */
double ag_machine_bytes(char *what);
/* The lowest memory limit of this process's cgroups, 0 when none: self is /proc/self/cgroup's
 * text, root the cgroup filesystem (/sys/fs/cgroup); v2's memory.max and v1's
 * memory/.../memory.limit_in_bytes are read in the process's cgroup and each one above it ("max",
 * or 2^62 and more, is no limit; a directory missing from a container's view is skipped). */
double ag_cgroup_bytes(const char *root, const char *self);
/* The ranks of d's job on this machine, which share its memory: what mpirun says
 * (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS), else 1. */
int ag_local_ranks(const ag_dist *d);
/* AG_ERR_ARG (a run this machine cannot hold: a program exits 2), with the figures, when bytes
 * exceed ag_machine_bytes: "<who>: <shape> needs about 9.1 GB of memory for one step, more than
 * this machine's 4.0 GB; refused before allocating" (who names the command, "train"; shape what
 * the bytes depend on: nn.h's ag_gpt_shape_str). */
ag_status ag_check_memory(double bytes, const char *who, const char *shape, ag_error *err);
/* AG_ERR_ARG, with the figures, when Adam's state of params parameters (8 bytes each, in one
 * train_state file, io/safetensors.h's AG_ST_MAX_FILE) could not be saved: refused before
 * training, not at the first checkpoint after hours of it. model names it in the message
 * ("<who>: <model> has at least N parameters; ..."). */
ag_status ag_check_checkpointable(double params, const char *who, const char *model, ag_error *err);

// --- the progress line of a run's log (progress.c) ---

/* How the progress line is written: auto, redrawn in place ("\r ESC[K") when the log is a
 * terminal and the run is one process, else a line at each log step (under mpirun the ranks'
 * output is a pseudo-terminal even when mpirun's goes to a file, so isatty cannot tell); lines,
 * always the latter; tty, always the former. */
typedef enum { AG_PROGRESS_AUTO = 0, AG_PROGRESS_LINES, AG_PROGRESS_TTY } ag_progress_mode;
/* Their names in that order, for a flag (fields.h: an enum row's sw; char_lm's --progress). */
extern const ag_switch ag_progress_switch;

typedef struct {
    FILE *log;          /* where the lines go (NULL: nowhere, every call does nothing) */
    bool tty;           /* the progress line is redrawn in place */
    double ema_s;       /* the smoothed step time, seconds */
    double shown_at;    /* when the progress line was last drawn (ag_now_s) */
} ag_progress;

/* The progress of a run of `ranks` processes on log, written as mode says. */
void ag_progress_init(ag_progress *p, FILE *log, ag_progress_mode mode, int ranks);
/* A step of dt seconds into ema_s: the run's first as it is, then 0.9 old + 0.1 new. */
void ag_progress_step(ag_progress *p, double dt, bool first);
/* Whether the progress line is drawn now: on a terminal at most ten times a second and at the
 * final step, elsewhere at the program's log steps (due). */
bool ag_progress_due(const ag_progress *p, bool due, bool final);
/* The progress line (printf-style, no newline in fmt): on a terminal drawn over the last one,
 * elsewhere a line of its own; flushed. */
void ag_progress_show(ag_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Any other line of the log (printf-style, no newline in fmt), the progress line cleared first. */
void ag_progress_line(const ag_progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ag_progress_vline(const ag_progress *p, const char *fmt, va_list ap);
/* Everything written to log so far is out of the process (log NULL: AG_OK): a log on a full disk
 * or a closed pipe is AG_ERR_IO at once, "the log: write failed: No space left on device;
 * stopped; kept: DIR/ckpt-00000020, the latest and the best" ("stdout: ..."; what DIR keeps as
 * ag_ckpt_kept says it), so that a run never goes on unheard. */
ag_status ag_log_written(FILE *log, const char *dir, ag_error *err);
/* On a terminal: the progress line erased (before a line written otherwise), or ended (break:
 * kept on screen, before an error or an interruption is reported). Elsewhere nothing. */
void ag_progress_clear(const ag_progress *p);
void ag_progress_break(const ag_progress *p);

// --- a whole training run (loop.c, loop_ckpt.c) ---

typedef struct ag_train_client ag_train_client;

/* What a checkpoint of ag_train_run holds besides the tensors: the loop's state, which its
 * format (ag_train_format) writes and reads back. */
typedef struct {
    long step;          /* the optimizer steps taken: Adam's t of the next one is step + 1 */
    ag_rng rng;         /* the batch stream, as the next step finds it */
    double best_loss;   /* the lowest evaluation loss yet (INFINITY: none) */
    long best_step;     /*   and its step (-1: none) */
    uint64_t run_id;    /* drawn when the run started, kept by a resume */
    uint64_t prev_hash; /* the weights' hash (ag_weights_hash) of the run's last checkpoint: the
                           next one follows it (0: none) */
    uint64_t origin;    /* the run's start (its first weights and seed): a kill before the first
                           commit leaves a checkpoint that the same command again removes */
    double loss_sum;    /* the batch losses since the last evaluation (metrics.csv's train_loss), */
    long loss_n;        /*   their count, */
    bool loss_taken;    /*   taken by the evaluation of this step: the next step starts them anew */
    long eval_step;     /* the last evaluation: its step (-1: none in this process; a format's
                           read may give the one its checkpoint kept: a resume then takes it as
                           its first evaluation, not made again), */
    double train_loss, val_loss, score;   /*   its mean batch loss before it, its loss, its score */
} ag_train_state;

/* A program's own checkpoint files (char_lm's, ../shared/MODEL.md), in place of the loop's
 * (NULL in ag_train_client: DIR/ckpt-<step>/{model,state}.safetensors, "attograd-loop-1").
 * The save and its rules stay the library's (ag_ckpt_save, ckpt_keep.c); the format says what
 * goes into the files and how to read it back. */
typedef struct {
    /* files (files[0]: the weights) and identify, which must give model_hash as
     * ag_weights_hash of the weights, follows as the prev_hash written, origin as written */
    const ag_ckpt_kind *kind;
    /* k->files written into the new directory tmp (ag_ckpt_write_weights, _moments: their
     * fault points) from c->params and st; the program's own metadata is its to add. */
    ag_status (*write)(const ag_train_client *c, const char *tmp, const ag_train_state *st, ag_error *err);
    /* The checkpoint directory where read back: its weights into c->params and st->step; with
     * all, also the moments and the rest of st (run_id 0: the loop draws one). AG_ERR_FORMAT,
     * naming the file, when it is another model's or its files are not of one step. */
    ag_status (*read)(const ag_train_client *c, const char *where, ag_train_state *st, bool all, ag_error *err);
    /* Optional: a fresh run's origin (ag_train_state's), what the first checkpoint of the same
     * command again carries: identify must give it for that checkpoint. char_lm's is its
     * untrained weights' hash (its iteration 0's model_hash). NULL, or 0 returned: the weights'
     * hash mixed with the seed. */
    uint64_t (*origin)(const ag_train_client *c, uint64_t seed);
    const char *count;  /* what a step is called in the save's messages (NULL: "step") */
    bool sync_point;    /* ag_ckpt_save_opts': the fault point before the fsync of DIR */
    bool second_name;   /*   and ckpt-<step>-b where ckpt-<step> cannot be replaced */
} ag_train_format;

/* A format of two files (char_lm's, ../shared/MODEL.md "Checkpoint files"; ckpt_state.c): the
 * program's weights file, whose metadata has its tag, "iter" and "run_id", and a state file
 * beside it: the moments (m.<name>, v.<name>: ag_ckpt_write_moments) and in its metadata the
 * tag, iter, run_id, model_hash (the weights it goes with: ag_ckpt_check_bound), step (the
 * optimizer's t), rng_state, rng_inc, the program's own counts (keys), and when there are some
 * eval_train_loss, eval_val_loss, best_iter, best_loss, follows (the prev_hash). A program's
 * ag_train_format writes and reads its weights file and calls these for the state file. */
#define AG_STATE_KEYS_MAX 8
typedef struct {
    const char *program;                   /* in messages: "not a <program> train state" */
    const char *weights_file, *state_file; /* their names in a checkpoint directory */
    const char *weights_tag, *state_tag;   /* their metadata "format" */
    const char *const *keys;   /* the program's counts after rng_inc, NULL-terminated (AG_STATE_KEYS_MAX at most), */
    const uint64_t *most;      /*   each one's largest value */
    int val_key;               /* keys[val_key] counts the validation data: 0 there, no validation split (the
                                  validation loss NaN, the best the training loss); -1: no such count */
    const char *(*check)(const uint64_t *v);   /* what is inconsistent among the counts v [keys], or NULL */
} ag_state_kind;

/* dir/<k->state_file> := P's moments and st (its step as iter, eval_step == step: its
 * evaluation saved, best_step >= 0: the best, prev_hash != 0: follows), step the optimizer's t,
 * v [keys] the program's counts. */
ag_status ag_state_write(const ag_state_kind *k, const char *dir, const ag_params *P, const ag_train_state *st,
                         long step, const uint64_t *v, ag_error *err);
/* where/<k->state_file> into P's moments, st (step, rng, run_id, best_step and best_loss, the
 * evaluation: eval_step, train_loss, val_loss; prev_hash: P's weights' hash), *step and v, each
 * checked: the counts, rng_inc odd, k->check, the losses, m and v finite and v >= 0, the weights
 * file beside it of the same iteration, P's weights (read first) those it was saved with.
 * AG_ERR_FORMAT, AG_ERR_IO naming the file. */
ag_status ag_state_read(const ag_state_kind *k, const char *where, ag_params *P, ag_train_state *st, long *step,
                        uint64_t *v, ag_error *err);
/* The identity of the checkpoint directory path (headers only; origin: the model_hash of an
 * iteration-0 checkpoint, the untrained weights): an ag_ckpt_kind's identify. */
ag_status ag_state_identify(const ag_state_kind *k, const char *path, ag_ckpt_id *id, ag_error *err);
/* The origin of such a format (ag_train_format's): c's untrained weights' hash, which
 * ag_state_identify gives as the origin of a run's iteration-0 checkpoint. */
uint64_t ag_state_origin(const ag_train_client *c, uint64_t seed);

/* The checkpoint of ag_train_run (loop_ckpt.c; a test's fixture may write one as a run would), in the client's format (c->format, else the
 * loop's): DIR/ckpt-<st->step>/ written whole, then DIR/latest (and DIR/best when is_best) moved to it;
 * the checkpoints it replaces are removed, and st->prev_hash is this one's. Its name in name [64].
 * Into the directory lock holds (NULL: DIR as named), wherever it is now: a DIR moved meanwhile
 * is AG_ERR_IO. over:
 * another run is still in DIR (opts->overwrite), so ckpt-<step> may be its: then ckpt-<step>-b. */
ag_status ag_train_save(const ag_lock *lock, const char *dir, const ag_train_client *c,
                        ag_train_state *st, bool is_best, bool over, char *name, ag_error *err);

/* What a program brings to ag_train_run: its model, as an ag_params already initialized, and
 * four calls. The loop names no model; it never looks inside a batch.
 *
 * A step is a batch of `batch` items, drawn whole (draw) on every rank, as one process draws
 * it, so the stream of batches is the same whatever the ranks and micro-batches; then loss
 * runs once per micro-batch of this rank's share (ddp.h): alone and with grad_accum 1, once,
 * on all of it. */
struct ag_train_client {
    const char *name;          /* the model's name, kept in every checkpoint: a resume refuses
                                  another model's ("reverse") */
    ag_params *params;         /* the weights the loop trains, checkpoints and restores */
    void *user;                /* handed to draw, loss, evaluate and sample */
    int batch;                 /* B, the items of a step (>= 1): ranks x grad_accum must divide it */
    const char *batch_flag;    /* optional: how the program's user sets B, for the message when they
                                  do not ("--batch-size 12 is not a multiple of ...; try --batch-size
                                  15"); NULL: "the batch of 12 <unit> is not a multiple of ..." */
    double step_bytes;         /* optional: the bytes its ctx holds at the peak of a step or an
                                  evaluation (nn.h: ag_gpt_step_bytes); > 0: with the program
                                  (AG_PROCESS_BYTES) and the weights, gradients and Adam's moments
                                  (4 reals a parameter), per rank on this machine, it must fit in
                                  ag_machine_bytes or the run is refused first (ag_check_memory) */
    /* Draws the step's batch of B items from rng (the run's stream: checkpointed, so a resume
     * draws the batches an unbroken run would) and keeps it for loss. A failure: its status,
     * the reason in err. The step's first call: params' gradients are still the last step's
     * (zeroed after it; char_lm's test hook before a step reads them). */
    ag_status (*draw)(void *user, ag_rng *rng, ag_error *err);
    /* Records on ctx's tape the forward of micro-batch mb of the batch last drawn, its items
     * [mb->first, mb->first + mb->b), ending in their mean loss [1] in *loss; mb->seed seeds
     * its dropout masks. The loop starts its backward from mb->dloss, which it finds at b / B
     * (the micro-batch's share of the items), and adds the loss so weighed into the step's: the
     * shares sum to the batch's mean loss and gradient. A loss that is a mean over a count that
     * varies between micro-batches (targets left out by an ignore index) sets mb->dloss to its
     * count over the batch's, so that the step is one process's mean over the batch. */
    ag_status (*loss)(void *user, ag_ctx *ctx, ag_micro *mb, ag_tensor **loss, ag_error *err);
    /* Optional, in place of loss: micro-batch mb's forward and backward both by the client (a
     * pass split over threads: char_lm's ag_gpt_shards_pass, nn.h), its gradient times mb->dloss
     * added into params' gradients and its mean loss in *loss (the loop adds it, weighed by
     * mb->dloss, into the step's). ctx is the loop's, its tape reset before; the client leaves
     * it to the loop's next reset. */
    ag_status (*pass)(void *user, ag_ctx *ctx, ag_micro *mb, double *loss, ag_error *err);
    /* Optional: once DIR is open (a resume's checkpoint read: st->step is where the run starts,
     * and on rank 0 the client's format read gave it its own state) and the loop's ctx exists,
     * on every rank, before the first step or evaluation: what the client makes for the ctx
     * (char_lm's shards: ag_gpt_shards_new) or sets on it (--detect-anomaly's checks), its
     * checks of a resumed run (char_lm's: the same text), its header on the log. A failure
     * ends the run. */
    ag_status (*start)(void *user, ag_ctx *ctx, const ag_train_state *st, ag_error *err);
    /* Optional, for opts->log_activations: one forward of a batch of the client's choosing
     * recorded on ctx in grad mode, left on the tape for the loop to read (char_lm's: a few
     * windows of its validation split, from seed and it), without touching the run's batch
     * stream. NULL: the client's loss on a batch of a stream of the loop's own. */
    ag_status (*activations_forward)(void *user, ag_ctx *ctx, uint64_t seed, long it, ag_error *err);
    /* Optional: after each step's update, its loss and learning rate (char_lm's tests record
     * the losses). */
    void (*after_step)(void *user, long it, double loss, double lr);
    /* The held-out evaluation, in no-grad mode: *val_loss (lower is better: it picks DIR/best)
     * and *score, the program's own measure (an accuracy), or NaN. */
    ag_status (*evaluate)(void *user, ag_ctx *ctx, double *val_loss, double *score, ag_error *err);
    const char *score_name;    /* the score's name in the progress line ("exact match") */
    /* Optional, the words of the loop's messages that stop a run ("iteration 5: the loss is nan;
     * stopped before the optimizer step; kept: DIR/ckpt-00000004, the latest and the best (try a
     * lower --lr)"): what a step is called (NULL: "step") and how the program's user sets the
     * learning rate (NULL: "learning rate") */
    const char *count;
    const char *lr_name;
    /* Optional: at each evaluation, before evaluate and also in no-grad mode, the client's own
     * training loss (char_lm's: batches of its training split) in *train_loss, in place of the
     * mean batch loss since the last evaluation: metrics.csv's train_loss, held to the
     * divergence rule (opts->diverge_floor) as the validation loss is. With it, a validation
     * loss that is NaN says there is no held-out split (char_lm's --val-fraction 0): the training
     * loss alone then picks DIR/best and is held to the rule. */
    ag_status (*evaluate_train)(void *user, ag_ctx *ctx, double *train_loss, ag_error *err);
    /* Optional: metrics.csv's columns of the program's own after the loop's six ("tokens_per_s,
     * attn_entropy_L0": comma-separated), and row, which writes a row's cells of them into buf [n]
     * (as many, comma-separated, empty ones where it has none) for the row of step it (step:
     * false for the last row, which has no step; evaluated: the row carries an evaluation). */
    const char *columns;
    void (*row)(void *user, long it, bool step, bool evaluated, char *buf, size_t n);
    bool no_score;             /* metrics.csv has no score column (char_lm's: its loss is its measure) */
    /* Optional: the log's lines in the program's own words, each written into buf [n] (no newline
     * at its end). progress_text: the progress line after step it of steps (char_lm's "iter 10/200
     * loss 2.3100  lr 1.00e-03  52000 tok/s  ETA 1m05s"), given its loss, learning rate, the smoothed
     * step time ema_s and the run's budget (its deadline, whether the count is still being fixed);
     * eval_text: the evaluation at step it (several lines may be joined by newlines; a loss that is
     * NaN: none). NULL: the loop's ("step 10/200 | loss ... | lr ... | 4.1 ms", "step 10: val loss"). */
    void (*progress_text)(void *user, long it, long steps, double loss, double lr, double ema_s,
                          const ag_budget *budget, char *buf, size_t n);
    void (*eval_text)(void *user, long it, double train_loss, double val_loss, double score, char *buf, size_t n);
    /* Optional, without progress_text: the progress line after step it as "<progress_word> it/steps
     * loss L  lr R  N <progress_rate>  ETA T" (char_lm's "iter 10/200  loss 2.3100  lr 1.00e-03
     * 52000 tok/s  ETA 1m05s"): N units_per_step over the smoothed step time (no rate without both);
     * with a deadline "left T" (the budget's time left), and "?" for steps while the budget fixes it. */
    const char *progress_word;
    const char *progress_rate;
    /* For the report card (DIR/report.md), all optional: */
    const char *config;        /* the program's own config, "key = value" lines ("d_model = 64\n..."):
                                  the card shows them, then the trainer's options (train.steps, ...) */
    /* Or the config at the run's end as one JSON object (malloc'd, the loop frees it; NULL: none),
     * shown as is in place of config and the trainer's options (char_lm's, as its checkpoints keep it) */
    char *(*config_json)(void *user);
    const char *unit;          /* what a step trains on ("strings": the card's strings/s; NULL: items) */
    double units_per_step;     /*   and how many (0: no rate on the card) */
    const char *rate_unit;     /*   what they count when not unit (char_lm's "tokens": B x T a step of B windows) */
    const char *commit;        /* the build's commit ("d89a286"; NULL: unknown) */
    /* loss.png's title, floor line (a uniform guess's loss, ln V for V classes) and validation
     * curve (optional; NULL: titled with name, no floor, the validation curve drawn) */
    const ag_loss_plot *plot;
    /* A short sample of the trained model for the card, in no-grad mode: its text in *text
     * (malloc'd; the loop frees it, whatever the status). NULL: no sample. */
    ag_status (*sample)(void *user, ag_ctx *ctx, char **text, ag_error *err);
    /* Optional: on rank 0 once the run ended in its last checkpoint at step (not after a signal or
     * a failure), before the card: the program's last pictures (char_lm's, drawn as the run went). */
    void (*end)(void *user, long step);
    const ag_train_format *format;   /* its checkpoint files (NULL: the loop's own) */
    /* Optional: the optimizer's update of every weight from its gradient times clip (the clip's
     * factor, 1 when under it), t the updates the weights have had, this one included, in place
     * of AdamW with opts->adam (char_lm's --optimizer adam or sgd); the moments it keeps are
     * P->m and P->v, which the checkpoint saves. A failure (a check of the weights after it:
     * --detect-anomaly) stops the run before the step is counted. NULL: AdamW. */
    ag_status (*update)(void *user, ag_params *P, double lr, long t, double clip, ag_error *err);
    /* Optional: the seed of step it's dropout masks, from which each micro-batch's mb->seed is
     * drawn (ag_ddp_micro): char_lm's is its --seed's stream "dropout" at it (ag_seed_at),
     * so that its masks are those of the runs it made before. NULL: the loop's, from opts->seed. */
    uint64_t (*step_seed)(void *user, long it);
};

typedef struct {
    const char *out_dir;       /* DIR: made if missing (its parent must exist, unless make_parents),
                                  locked for the run */
    bool make_parents;         /* DIR's missing parents made too (mkdir -p: char_lm's --out) */
    long steps;                /* optimizer steps in all, counted from the run's first */
    bool resume;               /* go on from DIR/latest (a format whose kind has an older layout:
                                  its files in DIR itself when there is no latest): weights, Adam's m and v, the batch
                                  stream, the step, the best evaluation; false refuses a DIR that
                                  holds a run already, and starts Adam's m and v at 0 (whatever a
                                  run before it in this process left in params) */
    const ag_train_state *resumed;   /* with resume, optional: the program read DIR/latest
                                  itself (under lock, before the call: char_lm builds its model from
                                  it), its weights and moments are in the client's params already
                                  and this is where the run stood (step, stream, run id, best,
                                  evaluation: what the format's read gives): the loop reads
                                  nothing of the checkpoint again. NULL: the format's read */
    double time_budget_s;      /* > 0: stop in time to evaluate, checkpoint and leave before
                                  this many seconds (counted from the call): an ag_budget, a
                                  bound only (steps and the schedule stay), which times an
                                  evaluation at the run's first step */
    uint64_t seed;             /* the batch stream's seed (a resume takes the stream it saved) */
    long every;                /* evaluate and checkpoint every this many steps (and at the end) */
    long log_every;            /* a progress line every this many steps (0: only evaluations): after
                                  step it where (it + 1) % log_every == 0 (on a terminal also the last) */
    bool log_first;            /*   where it % log_every == 0 instead, and the last: the first step's too
                                  (char_lm's iterations 0, 10, 20, ..., and its last) */
    ag_lr_schedule sched;      /* the learning rate at each step (optim.h) */
    ag_adam_cfg adam;          /* AdamW's betas, eps and weight decay */
    double grad_clip;          /* the global gradient norm is clipped to it (0: no clip) */
    long log_dynamics;         /* > 0: a row of DIR/dynamics.csv every this many steps and at the
                                  last, and DIR/dynamics.png at the end (ag_dynamics_log: the model
                                  must be built of ag_block's named "blocks.<l>"); 0: none */
    bool log_activations;      /* at every evaluation: the client's loss on a batch of its own read
                                  off the tape (ag_activations_measure: the model must be built of
                                  ag_block's named "blocks.<l>"), a row of DIR/activations.csv and a
                                  line on the log; DIR/activations.png at the end */
    double lr_find_lo;         /* > 0: the learning-rate range test (lesson 16): step it takes
                                  ag_lr_range_at(lr_find_lo, sched.lr, steps, it) instead of the
                                  schedule, and at the end ag_lr_range_read reads metrics.csv into
                                  r->lr_find and draws DIR/lr_find.png (0: the schedule) */
    int threads;               /* > 0: ag_threads_init(threads) (speed.h), and above 1 the thread
                                  tuner picks between them and one after each step; 0: as set */
    FILE *log;                 /* progress lines (NULL: none) */
    ag_budget *budget;         /* the program's own time budget (budget.h: budget_s, fit, warmup,
                                  eval_iters, splits, sched, as_said, spent_s ... as it sets them; t0
                                  if its time began before the call), in place of the loop's of
                                  time_budget_s: its evaluate bounds its batches with it
                                  (ag_budget_eval_start ... ag_budget_batch) and reads what it
                                  decided (count, out_of_time); with fit the count it fixes becomes
                                  the run's steps and the end of its schedule (sched: the loop's
                                  copy), and after the first evaluation no room for a step and the
                                  final one ends the run there. The loop sets start, sum, ranks and
                                  sched, and clock, say, steps, eval_every and t0 where unset */
    double (*clock)(void *user);   /* the clock the time budget reads, seconds (NULL: the wall
                                  clock; a test's simulated one makes the budget's decisions exact) */
    void *clock_user;
    ag_dist *dist;             /* the job of ranks this process is one of (ag_dist_init, dist.h;
                                  NULL: alone): each rank runs its share of every step, every
                                  rank evaluates, rank 0 alone touches DIR and writes the log */
    int grad_accum;            /* K: each rank's share of a step as K micro-batches (0: 1) */
    ag_ddp **ddp_out;          /* where the loop puts its split of the step (ddp.h; NULL alone with
                                  K 1) before the client's start call, NULL again when the run
                                  ends: for a client whose evaluation shares its batches over the
                                  ranks (char_lm's: ag_ddp_mine, ag_ddp_sum, ag_ddp_agree_stop) */
    const volatile sig_atomic_t *stop;   /* the program's own stop flag, set by its handlers (char_lm's:
                                  SIGINT, SIGTERM, SIGHUP, its checkpoint signal SIGUSR1): non-zero
                                  ends the run as a signal does, r->stop_signal := its value; the
                                  loop then installs no handler. NULL: it catches SIGINT and
                                  SIGTERM itself for the call's length */
    ag_progress_mode progress; /* the progress line on log (ag_progress): auto, redrawn in place on
                                  a terminal (every log_every steps: at most ten times a second),
                                  else a line every log_every steps */
    bool overwrite;            /* a fresh run (no resume) in a DIR that holds a run starts over it,
                                  a warning on log saying so: that run's checkpoints are removed
                                  once this run's first is committed (until then DIR/latest still
                                  names the old run's); false: such a DIR is refused ("DIR already
                                  holds a checkpoint: --resume continues it, ...") */
    void (*warn)(void *user, const char *line);   /* the run's warnings (what the tidy of DIR left
                                  alone, a lost latest found, --overwrite's start) and notes (no
                                  picture, no report.md), each one line without its newline, in
                                  the program's words (char_lm's: "char_lm: warning: <line>" on
                                  stderr); NULL: "warning: <line>", "note: <line>" on log */
    void *warn_user;
    bool build_checked;        /* the program compared its ranks' builds itself, first of all
                                  (ddp.h's ag_build_handshake, ag_train_layout mixed into its
                                  layout), because it exchanges things of its own before this call
                                  (char_lm's setup): the loop does not again. false: the loop's
                                  handshake, its first exchange (the client's name and commit) */
    ag_lock *lock;             /* the program's lock on DIR (NULL: the loop's own): taken by the
                                  loop unless held already, and left held after the run for the
                                  program to drop (char_lm locks DIR before it reads the checkpoint
                                  its model is built from, and keeps it to the end) */
    bool no_pictures;          /* no pictures from the loop at the end (loss.png, dynamics.png,
                                  activations.png, lr_find.png, r->lr_find unread): the program
                                  draws its own (char_lm's, in the background as the run goes) */
    const char *const *pictures;   /* with no_pictures: the names of the program's pictures in DIR
                                  (NULL-terminated, at most 15), on the card those this run drew */
    bool no_report;            /* no DIR/report.md from the loop (the program writes its own card, or none) */
    bool eval_at_start;        /* a fresh run evaluates and checkpoints at its step 0 too (char_lm's
                                  iteration 0: the untrained model's loss, a checkpoint to go back to) */
    const char *diverge_floor_name;   /* the floor in the divergence message ("2 ln V"; NULL: its value) */
    double diverge_floor;      /* > 0: an evaluation loss that is not finite or above
                                  ag_divergence_limit(diverge_floor, the best so far) stops the run
                                  with AG_ERR_NONFINITE before its checkpoint: the diverged weights
                                  are never saved, the last checkpoint and the best stay (for V
                                  classes 2 ln V: twice a uniform guess's loss); 0: no such stop */
} ag_train_opts;

typedef struct {
    long step;                 /* the step the run ended at (its last checkpoint's) */
    long start;                /* the step it began at (> 0 on a resume) */
    bool out_of_time;          /* the time budget ended it before opts->steps */
    int stop_signal;           /* SIGINT or SIGTERM ended it, after a checkpoint: a program
                                  exits 128 + it; 0 otherwise */
    double loss, val_loss, score;  /* the last batch loss and the last evaluation (NaN: none) */
    double train_loss;         /* the mean batch loss of the steps before the last evaluation (NaN: none) */
    char ckpt[64];             /* the checkpoint left in DIR/latest ("ckpt-00000400"), or "" */
    double wall_s;
    ag_lr_range lr_find;       /* opts->lr_find_lo > 0: the range test's reading (steps 0: none) */
} ag_train_result;

/* Divergence (char_lm's rule since issue 19): the highest evaluation loss a run may reach,
 *     max(floor, 4 x best)
 * where floor is what a trained model above it has lost everything it learned (2 ln V for V
 * classes, twice a uniform guess's), and 4 x the best the room a run has for a spike while its
 * best is still high (Adam at a high rate spikes and recovers). INFINITY without a best yet
 * (have_best false): a run's first evaluation is stopped only by a loss that is not finite. */
double ag_divergence_limit(double floor, double best, bool have_best);

/* The run: DIR locked (a second run on it is refused), a fresh start or exactly where
 * DIR/latest left off; then steps (lr from sched, the client's loss, backward, clip, AdamW)
 * until opts->steps, the time budget or SIGINT/SIGTERM (caught for the call's length, the
 * program's own handlers given back after). Every `every` steps and at the end: evaluate,
 * write DIR/ckpt-<step>/ whole (a kill -9 at any instant leaves DIR/latest naming a complete
 * one), move latest, and best when the evaluation is the lowest yet; DIR/metrics.csv gets a
 * row per step (cut right on a resume), each out of the process at once as the log's lines are (a
 * full disk under either stops the run at once, AG_ERR_IO saying what is kept),
 * DIR/dynamics.csv one every opts->log_dynamics steps,
 * and at the end DIR/loss.png and dynamics.png (without gnuplot: a note on the log, not an
 * error) and DIR/report.md, the card (not after a signal). A stop signal still ends in a
 * checkpoint, with r->stop_signal set and AG_OK (one during an evaluation: at that step, with
 * no step more, what the evaluation did not finish never judged). Errors (a bad DIR, a checkpoint of another model, a loss that
 * is NaN) are a status and one line in err; the last checkpoint stays. A checkpoint goes into the
 * directory locked at the start even when DIR was moved meanwhile (`mv DIR DIR.old`): the run
 * then stops with AG_ERR_IO saying where it went, nothing written into a new DIR. DIR is kept by the
 * rules of ckpt_keep.c: a DIR inside another run's is refused, a --resume finds a lost latest
 * again, and a run removes its own superseded checkpoints and nothing else (warnings on log). */
ag_status ag_train_run(const ag_train_client *c, const ag_train_opts *o, ag_train_result *r, ag_error *err);
/* For a program that reads DIR's checkpoint itself before ag_train_run (o->resumed: char_lm
 * builds its model from it), on rank 0 before it reads anything there: the start of the loop's
 * own opening of DIR, under the rules above: DIR refused inside another run directory (k: the
 * program's checkpoints), locked into o->lock when it exists (o->lock NULL: not locked, for a
 * run that writes nothing), and with o->resume a lost latest found again (a warning, as the
 * loop's: o->warn). Only out_dir, resume, lock, warn, warn_user and log of o are read. */
ag_status ag_train_prepare(const ag_train_opts *o, const ag_ckpt_kind *k, ag_error *err);
/* What ag_train_run's ranks exchange, as one word: its protocol (the order of its collectives) and
 * the sizes of what it sends (its state, a real, an error). A program that compares the builds
 * itself (opts->build_checked) mixes it into its ag_build's layout, so that two builds whose
 * loops would exchange other things meet only at its handshake. */
uint64_t ag_train_layout(void);
/* What a run that stops on an error keeps, for its message, in buf [n] (returned): the writer
 * (rank 0) reads DIR (ag_ckpt_kept); another rank, which never reads DIR, says "the checkpoint
 * of <count> <saved_at> is kept" (its last save, as far as it knows). */
const char *ag_train_kept(bool writer, const char *dir, const char *count, long saved_at, char *buf, size_t n);
/* The weights of DIR/latest into c->params (only name, params and format are read), its step in *step:
 * for a program's eval or sample. DIR may be a ckpt-N directory itself, and a train writing DIR
 * meanwhile is no matter (ag_ckpt_read). A checkpoint of another model is AG_ERR_FORMAT. */
ag_status ag_train_load(const char *dir, const ag_train_client *c, long *step, ag_error *err);

// --- the command line of a program on ag_train_run (flags.c) ---

/* The flags every such program shares, each into a field of ag_train_opts (the usage text
 * below lists them):
 *   --out DIR  --steps N  --resume  --overwrite  --time-budget S  --seed S  --every N  --log-every N
 *   --log-dynamics (every 10 steps)  --log-activations  --lr-find LO  --grad-accum K  --threads N
 * A flag with a value takes it as the next argument or after '=' ("--steps=300"); given twice,
 * the last one counts. argv[*i] is one argument: when it is one of these flags, its value goes
 * into o (only its own field changes), *i moves past the arguments it used and *mine is true;
 * any other argument leaves o and *i alone and *mine false, for the program to parse (its
 * commands, its model's flags). --time-budget takes seconds ("300") or a duration ("5m", "1h30m",
 * "none": no budget; fields.h's ag_parse_duration). AG_ERR_ARG with one line in err for a bad or missing value
 * ("bad argument '--steps': 'ten' is not a whole number from 1 to 1000000000", "bad argument
 * '--steps' (it needs a value)") or a value given to a switch ("--resume=1"). */
ag_status ag_train_flag(ag_train_opts *o, int argc, char **argv, int *i, bool *mine, ag_error *err);
/* After the last flag, what no flag alone can check: --out given, --lr-find LO below o->sched.lr
 * (when set), --grad-accum at most batch, the items of a step (when batch > 0; whether it
 * divides them is ag_train_run's check). AG_ERR_ARG with one line in err. */
ag_status ag_train_flags_check(const ag_train_opts *o, int batch, ag_error *err);
/* The usage lines of these flags, "  --steps N             optimizer steps in all ... (default
 * 10000)\n", into buf [n] (NUL-terminated; cut at the last line that fits), each with its value
 * in defaults when that is not 0 (defaults NULL: none shown). Returns the length written. */
size_t ag_train_flags_usage(const ag_train_opts *defaults, char *buf, size_t n);
/* arg is the flag name, written "--name" or "--name=VALUE": true, with VALUE in *inline_value
 * (NULL for "--name"); false for any other argument ("--names" too). Every command line of the
 * library reads its flags so (these, serve's). */
bool ag_flag_is(const char *arg, const char *name, const char **inline_value);

// --- what flows through a model, --log-activations (activations.c, lesson 14) ---

/* For a model built of ag_block's named "blocks.<l>" (as ag_dynamics_log's), read off the tape
 * of one forward pass recorded in grad mode: per block l the residual stream's RMS leaving it
 * (and entering block 0), the mean, std and dead share of its MLP activation's inputs, and the
 * range of its attention scores over the keys a query may see (attention op by op only: fused,
 * NaN). DIR/activations.csv has a row per reading:
 *   iter,rms_in, then per block l: rms_L<l>,act_mean_L<l>,act_std_L<l>,act_dead_L<l>,score_min_L<l>,score_max_L<l>
 * and the log a line ("  activations: rms in ... | dead ... | scores ..."). */
typedef struct ag_activations ag_activations;
/* The reader of P's blocks; with write, DIR/activations.csv opened as ag_csv_open does (start:
 * the iteration a resume starts at, < 0 a fresh run); without it, no file (a rank other than
 * 0). NULL with err when P has no block (AG_ERR_ARG), out of memory, or the file fails. */
ag_activations *ag_activations_open(const ag_params *P, const char *dir, bool write, long start, ag_error *err);
int ag_activations_layers(const ag_activations *a);
/* Reads the tape of ctx (a forward the program recorded, not yet reset). */
void ag_activations_read(ag_activations *a, const ag_ctx *ctx);
/* The last reading as iteration it's row (and a line on log, when not NULL). */
ag_status ag_activations_record(ag_activations *a, long it, FILE *log, ag_error *err);
/* ag_train_run's reading at evaluation it: the client's activations_forward, or its loss on a
 * batch of a stream of its own (from seed and it: the run's stream is untouched), read,
 * recorded; ctx is reset after. A client with neither call (a pass alone) is AG_ERR_ARG. */
ag_status ag_activations_measure(ag_activations *a, ag_ctx *ctx, const ag_train_client *c, uint64_t seed, long it,
                                 FILE *log, ag_error *err);
void ag_activations_free(ag_activations *a);   /* NULL ok; closes the file */
/* DIR/activations.gp and DIR/activations.png from DIR/activations.csv: three panels over the
 * iterations (the stream's RMS, the dead share, the scores' range), a line per block. Errors as
 * ag_plot_script's. */
ag_status ag_plot_activations(const char *dir, int n_layer, ag_error *err);

#endif
