/* speed.h -- knobs that make a step faster without changing what it computes, and the one
 * knob that proves it (the reference kernels). A program that never touches them gets the
 * same results, a little slower: each is off by default, or a plain default.
 *
 * Implemented beside the core, each in its own file: grad.c (recycling), ctx.c (the reference
 * kernels), marks.c, parallel.c (threads), hugepage.c (big buffers). */
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

/* Reference kernels (off by default): on, every op runs the plain loops of its ops/<op>.c even
 * where a fast kernel (fast/<op>.c) was built, so the two paths can be compared on the same
 * inputs (tests/fastref.h). Set it before the forward; a `make REFERENCE=1` library has only
 * the reference kernels and ignores it. */
void ag_ctx_set_reference_kernels(ag_ctx *ctx, bool on);
bool ag_ctx_reference_kernels(const ag_ctx *ctx);

/* Marks: how far has the backward come? ag_ctx_mark(ctx, id) in a forward records a mark on the
 * tape; when the backward walks past it (newest to oldest) every node recorded after the mark
 * has run its backward, so a parameter used only after the mark has its whole gradient, and
 * the hook is called with id. Data-parallel training uses it to start sending a block's
 * gradients while the backward goes on below (docs/distributed.md). ag_ctx_mark records
 * nothing (and costs nothing) while no hook is set or grad mode is off. The hook stays set
 * across resets; NULL removes it. Cannot fail (a mark that finds no memory is dropped, and the
 * forward's next op reports the shortage). */
typedef void (*ag_mark_fn)(void *user, int id);
void ag_ctx_set_mark_hook(ag_ctx *ctx, ag_mark_fn fn, void *user);
void ag_ctx_mark(ag_ctx *ctx, int id);

/* Threads. attograd runs everything on OpenMP's one pool and keeps OpenBLAS single-threaded:
 * two pools that both spin fight for the cores and make a step several times slower.
 * ag_threads_init sets the number of threads (n >= 1; 0 = the number of cores) and makes
 * OpenBLAS single-threaded. Programs call it once at start; it changes the OpenMP runtime's
 * and OpenBLAS's process-wide settings, the only global state attograd touches. */
void ag_threads_init(int n);
int ag_threads(void);  /* the threads a parallel region gets */

/* Memory for a big buffer (the step arena, the parameters and the optimizer state), freed with
 * free(): from 2 MiB up it is aligned to 2 MiB and the kernel is asked to back it with 2 MiB
 * pages (transparent huge pages; Debian's default mode is "madvise", so nothing happens
 * without asking). A step streams through tens of MB, and with 4 KiB pages the TLB misses
 * cost about 10% of a baby step here. zero: zero-filled, as calloc. NULL when out of memory. */
void *ag_alloc_big(size_t bytes, bool zero);

#endif
