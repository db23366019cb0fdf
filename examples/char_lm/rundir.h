/* rundir.h -- the file-system steps that keep a run directory whole (issue 12):
 *
 *   lm_lock_take, lm_lock_drop    DIR itself (flock) and DIR/train.lock (a record lock, and
 *                                 its pid), locked by `train` for its whole life: a second train
 *                                 on DIR is refused at once, naming the holder, even after
 *                                 train.lock was deleted; the kernel drops the locks when the
 *                                 process dies, however it dies
 *   lm_file_create, lm_file_commit
 *                                 a file written beside its target as "<path>.tmp.<pid>" and
 *                                 renamed over it: readers see the old file or the new one,
 *                                 never half of one, and a symbolic link planted at <path> (or
 *                                 at the temporary name) is replaced, its target never written
 *   lm_write_file                 the same for a whole string
 *   lm_fsync_dir                  makes the renames in a directory durable
 *   lm_fault                      the crash test's fault points (CHAR_LM_FAULT=N)
 *
 * Nothing prints (except lm_fault, just before it kills the process); errors are a status and
 * one line in err, naming the file. */
#ifndef LM_RUNDIR_H
#define LM_RUNDIR_H

#include <stdbool.h>
#include <stdio.h>
#include "attograd.h"

#define LM_LOCK_NAME "train.lock"

typedef struct {
    bool held;
    int fd;         /* DIR/train.lock */
    int dir_fd;     /* DIR, flock'ed; -1 where the file system cannot flock a directory */
    char path[4096];
} lm_lock;

/* Locks DIR itself (flock: no file removed inside it releases that) and DIR/train.lock
 * (created if missing, with our pid written into it; DIR must exist). AG_ERR_ARG when another
 * process holds either ("DIR is in use by another char_lm train (pid N, ..."), AG_ERR_IO when
 * they cannot be made. */
ag_status lm_lock_take(lm_lock *l, const char *dir, ag_error *err);
/* Removes the lock file and releases it; no-op when not held. */
void lm_lock_drop(lm_lock *l);
/* A path that reaches the locked directory wherever it is, in via [n] ("/proc/self/fd/N"): a
 * train writes through it, never into a directory made at DIR's path after it started (issue
 * 35). "" where there is none (no /proc, the lock not held). */
void lm_lock_via(const lm_lock *l, char *via, size_t n);
/* DIR (the path the lock was taken on) no longer names the locked directory (`mv DIR DIR.old;
 * mkdir DIR` while a train runs): true, with where it is now in now_at [n] (or ""). False when
 * it is the same directory, or the lock is not held. */
bool lm_lock_moved(const lm_lock *l, const char *dir, char *now_at, size_t n);

/* Opens "<path>.tmp.<pid>" (its name in tmp [n]) as a new file, removing whatever had that
 * name first. NULL with err set on failure. */
FILE *lm_file_create(const char *path, char *tmp, size_t n, ag_error *err);
/* Checks and closes fp (fsync'ed first when durable), then renames tmp over path. On any
 * failure tmp is removed and path is untouched. */
ag_status lm_file_commit(FILE *fp, const char *tmp, const char *path, bool durable, ag_error *err);
/* Closes fp and removes tmp (an abandoned lm_file_create). */
void lm_file_discard(FILE *fp, const char *tmp);
/* text into path, through a temporary file (not fsync'ed: for plots and scripts). */
ag_status lm_write_file(const char *path, const char *text, ag_error *err);

/* fsync of a directory (a filesystem that cannot sync directories is not an error). */
ag_status lm_fsync_dir(const char *dir, ag_error *err);

/* A fault point for the crash-consistency test: with CHAR_LM_FAULT=N in the environment the
 * N-th call in this process says "char_lm: fault point N: <step> <path>" on stderr and kills
 * the process with SIGKILL (as a power cut or `kill -9` would, with nothing cleaned up).
 * Without the variable it does nothing. checkpoint.c calls it before every step that changes
 * the disk, including those inside ag_st_save (passed to it as the step hook of its opts).
 * CHAR_LM_FAULT=<step> (not a number) kills at the first call of that step instead. */
void lm_fault(const char *step, const char *path);

#endif
