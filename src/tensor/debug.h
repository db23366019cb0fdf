/* debug.h -- looking inside a step: anomaly detection, layer scopes, the arena's and the tape's
 * statistics, profiling, the tape in execution order, and the project's one clock. None of
 * these changes a result; each costs nothing until it is asked for. Implemented in debug.c
 * (the scope in hooks.c). */
#ifndef AG_DEBUG_H
#define AG_DEBUG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "tensor.h"

/* Anomaly detection (off by default; it costs a pass over every op output and gradient): when
 * on, the first recorded op whose output holds a NaN or Inf (or the first backward that writes
 * one into a gradient) sets an AG_ERR_NONFINITE error naming the op, its shape and its layer:
 * "non-finite output of softmax [12,4,64,64] in blocks.1.attn". Only -inf from an op that writes
 * it on purpose (AG_OP_MAY_OUTPUT_NEG_INF in its ag_op's flags: masked_fill) is allowed. */
void ag_ctx_set_detect_anomaly(ag_ctx *ctx, bool on);
/* ag_op.flags: -inf in the op's output is on purpose (masked_fill); NaN and +inf are faults.
 * (speed.h's AG_OP_OUTPUT_IS_VIEW is the other bit.) */
#define AG_OP_MAY_OUTPUT_NEG_INF 2u

/* Names the layer now running ("blocks.0.attn"); every node recorded from now on carries it.
 * The string must outlive the tape (a literal, or a layer's own name). NULL clears it. */
void ag_ctx_set_scope(ag_ctx *ctx, const char *scope);
const char *ag_ctx_scope(const ag_ctx *ctx);

typedef struct {
    size_t arena_capacity;    /* bytes reserved in chunks */
    size_t arena_used;        /* bytes handed out since the last reset */
    size_t arena_high_water;  /* the most ever used between two resets */
    uint64_t chunk_mallocs;   /* malloc calls the arena has made, ever */
    size_t tape_nodes;        /* nodes recorded since the last reset */
} ag_ctx_stats;
ag_ctx_stats ag_ctx_get_stats(const ag_ctx *ctx);

/* ---------- profiling (for make bench) ----------
 * With a profile attached, every recorded op adds the time since the previous record (or
 * since ag_ctx_profile_mark) to its forward total, and every backward its own time. */
#define AG_PROFILE_MAX_OPS 32
typedef struct ag_profile {
    int n;
    struct {
        const ag_op *op;
        double fwd_s, bwd_s;
        uint64_t fwd_calls, bwd_calls;
    } ops[AG_PROFILE_MAX_OPS];
    double last_mark;  /* internal: ag_now_s() of the last record */
} ag_profile;
/* Attaches p (owned by the caller; NULL detaches). */
void ag_ctx_set_profile(ag_ctx *ctx, ag_profile *p);
/* Starts the forward clock (call before the first op of a step). */
void ag_ctx_profile_mark(ag_ctx *ctx);

/* Calls fn for each recorded node in execution order (for --trace-shapes). */
void ag_tape_foreach(const ag_ctx *ctx, void (*fn)(const ag_node *n, void *user), void *user);

/* Seconds on a monotonic clock (CLOCK_MONOTONIC): the one clock of the project, for profiling,
 * timings and timeouts. Only differences mean anything. */
double ag_now_s(void);

#endif
