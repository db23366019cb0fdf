/* proc.h -- the char_lm program as a subprocess, for the tests that check what a user sees:
 * its exit status, its stderr line, and the files it leaves (test_errors.c, test_signals.c).
 *
 * The binary is $CHAR_LM, or build/char_lm (tests run from the repository root); `make
 * check-asan` points CHAR_LM at the ASan build. $CHAR_LM_WRAP, when set, is a command put in
 * front of it, split at spaces (`make check-valgrind`: "valgrind --error-exitcode=9 ...").
 * $CHAR_LM_TIMEOUT (seconds, default 120) bounds each run: a run that takes longer is killed
 * and reported as timed out, so a hang fails the test instead of stalling the suite.
 *
 * The child gets stdin from /dev/null, stdout and stderr in files (or stdout where the options
 * say), SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGXFSZ at their defaults (SIGXFSZ ignored when a
 * file-size limit is set, so that a write past the limit fails with EFBIG as on a full disk,
 * instead of killing the process), an empty signal mask, and OPENBLAS_NUM_THREADS=1. Nothing here allocates between fork and exec.
 *
 * Helpers call ck_assert on their own failures (a missing binary, a full /tmp), so they are
 * for use inside check tests and fixtures only. */
#ifndef TESTS_PROC_H
#define TESTS_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    long fsize_limit;      /* > 0: RLIMIT_FSIZE in bytes for the child (SIGXFSZ ignored) */
    bool drop_root;        /* as root: run the child as nobody (65534) */
    bool no_wrap;          /* ignore $CHAR_LM_WRAP (a run that only prepares files) */
    double timeout_s;      /* 0: $CHAR_LM_TIMEOUT or 120 */
    const char *stdout_path;  /* stdout to this file (e.g. "/dev/full") instead of io_prefix.out */
    bool stdout_closed_pipe;  /* stdout a pipe whose reader is gone, SIGPIPE ignored (EPIPE) */
    bool sigpipe_default;     /*   with it, SIGPIPE left at its default (a shell's `| head -c1`) */
    const char *const *env;   /* NULL, or "KEY=VALUE" entries (NULL-terminated) that the child's
                                 environment gets, replacing the inherited ones of those keys
                                 (CHAR_LM_FAULT=7: see src/train/train.h) */
} proc_opts;

typedef struct {
    bool exited;           /* exited normally, with code */
    int code;
    bool signaled;         /* killed by signal sig */
    int sig;
    bool timed_out;        /* killed by us after the timeout */
    bool skipped;          /* drop_root could not be done here (exit 125 from the child) */
    char *out, *err;       /* stdout and stderr, NUL-terminated, malloc'd */
    size_t out_len, err_len;
} proc_result;

/* Absolute path of the char_lm binary ($CHAR_LM or build/char_lm); fails the test if missing. */
const char *proc_binary(void);
/* $CHAR_LM_WRAP is set. */
bool proc_wrapped(void);
/* Seconds a run may take. */
double proc_timeout(const proc_opts *o);

/* Starts char_lm with args (NULL-terminated, without the program name) in directory cwd;
 * stdout and stderr go to io_prefix + ".out" / ".err". Returns the child's pid. */
pid_t proc_start(const char *cwd, const char *const *args, const char *io_prefix, const proc_opts *o);
/* Waits for pid (at most the timeout, then SIGKILL) and reads its output files into r. */
void proc_wait(pid_t pid, const char *io_prefix, const proc_opts *o, proc_result *r);
/* Whether pid is still running (not exited, not a zombie waiting for proc_wait). */
bool proc_running(pid_t pid);
/* proc_start + proc_wait. */
void proc_run(const char *cwd, const char *const *args, const char *io_prefix, const proc_opts *o,
              proc_result *r);
void proc_result_free(proc_result *r);
/* "exit 2", "killed by signal 11 (Segmentation fault)", "timed out", for messages. */
const char *proc_status_str(const proc_result *r);
/* Number of lines in s (a last line without '\n' counts). */
int proc_lines(const char *s);

// --- files ---

/* "dir/name" in one of 8 rotating static buffers; fails the test if it does not fit. */
const char *proc_path(const char *dir, const char *name);

void proc_write_file(const char *path, const void *data, size_t n);
/* The whole file, NUL-terminated (malloc'd); NULL if it cannot be read. */
char *proc_read_file(const char *path, size_t *n);
/* rm -r (only ever our own mkdtemp directories). */
void proc_remove_tree(const char *path);
/* cp -r of a directory of regular files and directories. */
void proc_copy_tree(const char *from, const char *to);
/* Replaces the first occurrence of `from` in the file by `to`, which has the same length
 * (a header edit that keeps every offset). Fails the test if `from` is not there. */
void proc_patch_file(const char *path, const char *from, const char *to);

/* A text of about n bytes of made-up sentences from a fixed word list and seed (the same on
 * every machine), with a line of Chinese every few lines so the vocabulary is not only ASCII. */
char *proc_make_corpus(size_t n, size_t *len);

// --- snapshots: "nothing the user had is lost" ---

typedef struct {
    char **path;           /* relative to the root */
    uint64_t *hash;        /* FNV-1a of the content; directories: 0 */
    long long *size;       /* -1: a directory */
    unsigned *mode;        /* permission bits */
    int n;
} proc_snapshot;

void proc_snapshot_take(const char *root, proc_snapshot *s);
/* The first difference between a and b as a message ("ckpt/model.safetensors changed",
 * "new file ckpt/x.tmp.123"), or NULL when the trees are identical. Paths that contain one of
 * `allow` (NULL-terminated, may be NULL) may change, appear or disappear. */
const char *proc_snapshot_diff(const proc_snapshot *a, const proc_snapshot *b, const char *const *allow);
void proc_snapshot_free(proc_snapshot *s);
/* The directory that holds the live checkpoint's files in the run directory dir:
 * dir/<the name in dir/latest>, or dir itself without a latest (a static buffer). */
const char *proc_ckpt(const char *dir);
/* The same for dir/<which> ("latest", "best"); dir itself when there is none. */
const char *proc_ckpt_as(const char *dir, const char *which);
/* A checkpoint file as proc_read_file reads it, with the 16 hex digits of its "run_id" and of
 * its "follows" (the checkpoint before it: a run that was stopped and resumed saved one more)
 * set to zeros: two runs with the same flags write files that differ in nothing else. */
char *proc_read_ckpt_file(const char *path, size_t *n);

/* dir/metrics.csv without its last column (tokens/s, a timing): the losses of two runs compare
 * byte for byte (malloc'd; fails the test if the file is missing). */
char *proc_metrics_losses(const char *dir);

/* The first path under root whose name contains ".tmp", or NULL (a static buffer). */
const char *proc_find_tmp(const char *root);

// --- a serve child (char_lm serve, reverse serve) and HTTP/1.0 calls to it on 127.0.0.1 ---

/* The port in the "http://127.0.0.1:PORT/" line the child pid writes into the file out, waiting
 * for it; fails the test when pid ends first or no line comes in proc_timeout. */
int proc_wait_port(pid_t pid, const char *out);
/* A socket connected to 127.0.0.1:port (fails the test when it cannot). */
int proc_connect(int port);
/* Writes s [n] whole to fd (fails the test when it cannot). */
void proc_send_all(int fd, const char *s, size_t n);

typedef struct {
    int status;
    char *body;   /* malloc'd, NUL-terminated */
} proc_reply;

/* METHOD path, its body a JSON text (or NULL), with a Host header host, over HTTP/1.0 (the
 * answer ends when the server closes): the status and the body. Free r.body. */
proc_reply proc_http(int port, const char *host, const char *method, const char *path, const char *body);

#endif
