/* speed.h -- knobs that make a step faster without changing what it computes, and the one
 * knob that proves it (the kernel table: reference or fast). Apart from the fast kernels, each
 * is off by default, or a plain default.
 *
 * Implemented beside the core, each in its own file: kernels.c (the kernel tables), recycle.c
 * (recycling), parallel.c (threads, a ctx for another thread), hugepage.c (big
 * buffers). */
#ifndef AG_SPEED_H
#define AG_SPEED_H

#include <stdbool.h>
#include <stddef.h>
#include "tensor.h"

/* Gradient recycling (off by default). On, the gradient of a tensor that an op made is handed
 * back as soon as that op's backward has run (nothing reads it after that) and the next
 * gradient of the same size reuses the buffer, while it is still in cache, instead of fresh
 * arena memory. Leaves (inputs, parameters) keep their gradients; an op's output has grad NULL
 * after ag_backward. Training loops turn it on; leave it off to look at intermediate
 * gradients (the attention weights' dL/dA, say). */
void ag_ctx_set_recycle_grads(ag_ctx *ctx, bool on);
/* ag_op.flags: the op's output shares its input's data AND gradient buffer (reshape), so
 * recycling must not hand that buffer back after the op's backward: it is the input's gradient.
 * (debug.h's AG_OP_MAY_OUTPUT_NEG_INF is the other bit.) */
#define AG_OP_OUTPUT_IS_VIEW 1u

/* A new ctx with the settings of `like`: grad mode, the kernel table, gradient recycling
 * and --detect-anomaly's checks (not its profile or contents). For a second thread
 * that runs its own forward and backward (ag_gpt_shards, nn.h). NULL if out of memory or
 * `like` is NULL. */
ag_ctx *ag_ctx_new_like(const ag_ctx *like);

/* The kernel tables (src/tensor/kernel.h). Every op that has a fast twin calls its kernels
 * through its ctx's table, chosen when the ctx is made:
 *   AG_KERNELS_FAST       the default: the fast twins of src/tensor/fast/ (and the fused
 *                         attention), proven equal to the reference by the tests;
 *   AG_KERNELS_REFERENCE  the plain loops of ops/<op>.c and attention composed of ops, the code
 *                         the lessons teach: to read it running, or to prove a fast twin.
 * ag_ctx_new takes the table from the environment: AG_KERNELS=reference or fast (unset or
 * empty: fast; any other value: ag_ctx_new returns NULL, and ag_kernels_from_env says why).
 * ag_ctx_set_kernels changes it; set it before a forward, not between a forward and its
 * backward. The optimizers take theirs from the ag_params (P->kernels: AG_KERNELS, read by
 * ag_params_new). A `make REFERENCE=1` library has no fast table: both names give the
 * reference one. */
typedef enum { AG_KERNELS_FAST, AG_KERNELS_REFERENCE } ag_kernels_id;
void ag_ctx_set_kernels(ag_ctx *ctx, ag_kernels_id id);
ag_kernels_id ag_ctx_kernels(const ag_ctx *ctx);
/* the name of the table ctx's ops call: "fast" or "reference" ("reference" in a REFERENCE=1
 * library whatever was asked) */
const char *ag_ctx_kernels_name(const ag_ctx *ctx);
/* "reference" or "fast" -> *id; anything else: AG_ERR_ARG and a one-line message in err
 * that starts with `what` and the name ("AG_KERNELS=" gives "AG_KERNELS=foo: not a ...") */
ag_status ag_kernels_parse(const char *name, const char *what, ag_kernels_id *id, ag_error *err);
/* the table AG_KERNELS names (unset or empty: AG_KERNELS_FAST), as ag_kernels_parse */
ag_status ag_kernels_from_env(ag_kernels_id *id, ag_error *err);
/* ag_ctx_set_kernels(ctx, on ? AG_KERNELS_REFERENCE : AG_KERNELS_FAST), and its reading */
void ag_ctx_set_reference_kernels(ag_ctx *ctx, bool on);
bool ag_ctx_reference_kernels(const ag_ctx *ctx);

/* Threads. attograd runs everything on OpenMP's one pool and keeps OpenBLAS single-threaded:
 * two pools that both spin fight for the cores and make a step several times slower.
 * ag_threads_init sets the number of threads (n >= 1; 0 = the number of cores), keeps OpenMP
 * at one active level (a loop inside a parallel region, such as a shard's pass, nn.h, runs on
 * its own thread) and makes OpenBLAS single-threaded. Programs call it once at start; it changes the OpenMP runtime's
 * and OpenBLAS's process-wide settings, the only global state attograd touches. */
void ag_threads_init(int n);
int ag_threads(void);  /* the threads a parallel region gets */

/* Threads on a busy machine. When another process wants a core, a step on two threads can be
 * several times slower than on one (baby beside one CPU-bound process here: 7.7-9.4k tokens/s on
 * 2 threads, 22-31k on 1): a thread that the neighbour has pushed off its core holds up every
 * parallel region, hundreds per step, and passive waits do not help enough (12.5k). The tuner
 * picks, between steps, the threads asked for (max) or one, whichever is faster now, by timing
 * both: after a few steps, and then now and again, it runs a probe on the other setting
 * (AG_TUNER_WINDOW steps; it ends sooner once its steps so far are clearly slower, 1.25x) and
 * keeps the setting whose steps took less time on average, the probe's against the
 * AG_TUNER_WINDOW steps just before it: a mean, not a median, since a run pays in full for the
 * steps a straggler holds up now and again (beside one neighbour two threads' median step can
 * be the faster while their mean is the slower). The other setting is taken when it is 1%
 * faster (a 5% margin kept a setting 3-5% slower for good: beside one neighbour the two are
 * that close). The first probe comes after 3 timed steps (and is weighed against them). The
 * probes grow rarer while the choice holds (from every 8 steps to every 512), and a probe's
 * extra time is kept under 1% of the steps until the next one: on an idle machine about one
 * slower step in 512 at length; beside a neighbour that makes two threads 7x slower, one step in
 * 512 on them. Steps that get much slower (the median of the window over 1.5x the level: a
 * neighbour came) start a probe at once.
 * The kernels split their work so that one thread and two compute the same bits (row blocks,
 * column blocks, fixed chunks for the sums, a product cut in two on either; tests/test_parallel.c
 * trains both ways and compares), so with max 2 the tuner changes how fast a run goes, never
 * what it computes. (On more threads a product is cut in more blocks, and OpenBLAS may round
 * a smaller block's last bits differently.)
 * Use: ag_thread_tuner_init(&tt, ag_threads()) after ag_threads_init, then after every
 * training step ag_thread_tuner_step(&tt, that step's seconds); it sets the threads of the
 * steps that follow (omp_set_num_threads, like ag_threads_init). max 1: it never changes
 * anything. Call both from the thread that runs the steps, outside a parallel region. Cannot
 * fail. The seconds are the caller's clock: the tests feed a simulated one. */
enum { AG_TUNER_WINDOW = 4 };   /* steps a setting is timed over, each side of a comparison */
typedef struct {
    int max;              /* the threads asked for; 1: nothing to choose */
    int now;              /* the threads the steps run on, probes aside */
    long steps;           /* steps seen */
    long next_probe;      /* the step at which the other setting is tried next */
    long interval;        /* steps between probes now */
    int n_last, n_probe;  /* steps on `now` since the last probe, steps of the current probe (0: none) */
    double last[AG_TUNER_WINDOW];   /* seconds of the latest steps on `now` (a ring) */
    double probe_s;       /* seconds of the probe's steps so far */
    double level;         /* mean seconds per step of the setting kept at the last probe (0: none yet) */
    long probes, switches, single_steps;   /* for reports: probes run, changes of `now`, steps on 1 */
} ag_thread_tuner;
void ag_thread_tuner_init(ag_thread_tuner *tt, int max);
void ag_thread_tuner_step(ag_thread_tuner *tt, double seconds);

/* Memory for a big buffer (the step arena, the parameters and the optimizer state), freed with
 * free(): from 2 MiB up it is aligned to 2 MiB and the kernel is asked to back it with 2 MiB
 * pages (transparent huge pages; Debian's default mode is "madvise", so nothing happens
 * without asking). A step streams through tens of MB, and with 4 KiB pages the TLB misses
 * cost about 10% of a baby step here. zero: zero-filled, as calloc. NULL when out of memory. */
void *ag_alloc_big(size_t bytes, bool zero);

#endif
