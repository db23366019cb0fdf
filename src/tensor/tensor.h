/* tensor.h -- the core of attograd: tensors, the step context (its arena and its tape), the
 * autograd driver, and the one error convention. Read this header first.
 *
 * src/tensor/ owns tensors and everything that differentiates them: the step context (ctx.c,
 * arena.c), the tape and its backward walk (tape.c, grad.c), every op with its backward (ops.h,
 * ops/<op>.c) and the ops' fast kernels (fast/). The knobs that only make a step faster are in
 * speed.h; the ones that look inside a step (anomaly detection, layer scopes, statistics,
 * profiling) in debug.h. It knows no layer, optimizer, parameter store or file format.
 *
 * OWNERSHIP (who frees what)
 *   - Parameters (ag_params, src/params/params.h) persist: their ag_tensor structs, data and
 *     grads are owned by the ag_params and released by ag_params_free.
 *   - Everything an op creates (output tensors, tape nodes, saved buffers, activation grads)
 *     lives in the ag_ctx arena and is "valid until ag_ctx_reset". Nothing is freed one by one.
 *     After the first training step the arena has reached its high-water mark and later steps
 *     allocate nothing (ag_ctx_get_stats in debug.h shows it).
 *   - ag_tensor_new_owned makes a persistent leaf outside any ctx (ag_gradcheck's inputs);
 *     the caller frees it with ag_tensor_free_owned.
 *
 * ERRORS
 *   Ops return NULL on error and store the first message in the ctx ("ag_matmul: inner dims
 *   differ: [2,3,8] x [6,8]"). An op given a NULL input returns NULL and keeps the earlier
 *   message, so a whole forward pass can be written straight through and checked once at the
 *   end with ag_ctx_error(). Library code never exits or prints.
 *
 * LAYOUT
 *   Row-major, up to AG_MAX_DIMS dims. Every tensor an op returns is contiguous. ag_reshape
 *   returns a view that shares data (no copy); ag_transpose (last two dims) makes an explicit
 *   copy, so kernels only ever see contiguous rows. */
#ifndef AG_TENSOR_H
#define AG_TENSOR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "real.h"

#define AG_MAX_DIMS 4
#define AG_MAX_INPUTS 3

typedef enum {
    AG_OK = 0,
    AG_ERR_SHAPE,   /* shapes do not fit the op */
    AG_ERR_ARG,     /* a bad argument value (index out of range, p outside [0,1), ...) */
    AG_ERR_NOMEM,   /* allocation failed */
    AG_ERR_IO,      /* a file could not be read or written */
    AG_ERR_FORMAT,  /* a file is not what it claims to be */
    AG_ERR_NONFINITE /* a NaN or Inf where a finite number is required */
} ag_status;

const char *ag_status_str(ag_status s);

/* ---------- errors: one convention everywhere ----------
 * A call that can fail returns an ag_status (or a pointer, NULL on failure) and says why in one
 * line, in an ag_error: the ctx's own for ops (ag_ctx_error), the ag_params' for layer inits
 * (ag_params_error), or one the caller passes to a call that has neither (file I/O, building a
 * model). The first error sticks: a later failure keeps the message that explains the first. */
typedef struct {
    ag_status status;   /* AG_OK while nothing failed */
    char msg[512];      /* one line, no newline: "w_q: n_head 3 does not divide n_embd 64" */
} ag_error;

/* Records s and the printf-style message in e unless e already holds an error (or e is NULL);
 * returns s, for `return ag_seterr(e, AG_ERR_ARG, "...")`. Control characters in the message
 * (a line break in a quoted name) become '?', so it stays one line. */
ag_status ag_seterr(ag_error *e, ag_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same with a va_list, for functions that wrap it. */
ag_status ag_vseterr(ag_error *e, ag_status s, const char *fmt, va_list ap);
/* Forgets the error: status AG_OK, empty message. Cannot fail; NULL ok. */
void ag_error_clear(ag_error *e);

typedef struct ag_node ag_node;

typedef struct ag_tensor {
    int ndim;
    int shape[AG_MAX_DIMS];    /* dims past ndim are 1; data is contiguous row-major */
    ag_real *data;             /* [numel] */
    ag_real *grad;             /* [numel] or NULL: activations get one (zeroed) on first touch */
    bool requires_grad;        /* a parameter, or computed from one while grad mode was on */
    const char *name;          /* a parameter's name ("blocks.0.attn.w_q.weight"), the kind of a
                                * mask ag_causal_mask made ("causal_mask", ops.h), or NULL */
    bool in_arena;             /* made in a ctx arena (ag_tensor_new, an op output): its struct
                                * dies at ag_ctx_reset. ag_gradcheck refuses such inputs. */
} ag_tensor;

/* ---------- shapes ---------- */
size_t ag_numel(const ag_tensor *t);
int ag_last(const ag_tensor *t);              /* size of the last dim */
size_t ag_rows(const ag_tensor *t);           /* numel / last dim */
bool ag_same_shape(const ag_tensor *a, const ag_tensor *b);
/* Writes "[2,3,8]" into buf (always NUL-terminated); returns buf. */
char *ag_shape_str(const ag_tensor *t, char *buf, size_t n);
/* Sets ndim and shape[] (1 past ndim). Cannot fail for 1 <= ndim <= AG_MAX_DIMS. */
void ag_tensor_set_shape(ag_tensor *t, int ndim, const int *shape);

/* ---------- the step context ---------- */
typedef struct ag_ctx ag_ctx;

/* A new context with grad mode on. NULL if out of memory. Free with ag_ctx_free. */
ag_ctx *ag_ctx_new(void);
void ag_ctx_free(ag_ctx *ctx);                 /* NULL ok */
/* Releases every tensor, node and activation grad made since the last reset, and clears the
 * error. Keeps the memory for reuse. Cannot fail. */
void ag_ctx_reset(ag_ctx *ctx);
/* Grad mode: when off (eval, sampling) no node is recorded and nothing is saved. */
void ag_ctx_set_grad(ag_ctx *ctx, bool on);
bool ag_ctx_grad_enabled(const ag_ctx *ctx);
/* The first error since the last reset, or NULL. */
const char *ag_ctx_error(const ag_ctx *ctx);
ag_status ag_ctx_status(const ag_ctx *ctx);
/* Sets the error if none is set yet (printf-style). Returns the status, for `return ag_fail(..)`. */
ag_status ag_ctx_fail(ag_ctx *ctx, ag_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ag_ctx_clear_error(ag_ctx *ctx);
/* Raw arena memory, 64-byte aligned, valid until ag_ctx_reset. NULL (and an error) on OOM. */
void *ag_ctx_alloc(ag_ctx *ctx, size_t bytes);

/* ---------- tensors in the ctx ---------- */
/* A new zero-filled tensor in ctx, requires_grad false. NULL on a bad shape or OOM. */
ag_tensor *ag_tensor_new(ag_ctx *ctx, int ndim, const int *shape);
ag_tensor *ag_tensor_new1(ag_ctx *ctx, int d0);
ag_tensor *ag_tensor_new2(ag_ctx *ctx, int d0, int d1);
ag_tensor *ag_tensor_new3(ag_ctx *ctx, int d0, int d1, int d2);
ag_tensor *ag_tensor_new4(ag_ctx *ctx, int d0, int d1, int d2, int d3);
/* Same shape as x, zero-filled (data not copied). */
ag_tensor *ag_tensor_like(ag_ctx *ctx, const ag_tensor *x);
/* A leaf that gradients flow into (for tests and inputs): requires_grad true, grad allocated. */
ag_tensor *ag_tensor_leaf(ag_ctx *ctx, int ndim, const int *shape);

/* ---------- tensors outside any ctx ---------- */
/* A persistent leaf: the struct, a zero-filled data buffer and a zero-filled grad buffer are
 * malloc'ed (no ctx, so it survives every ag_ctx_reset), requires_grad true. For inputs that
 * must outlive a reset: the inputs of ag_gradcheck (which resets its ctx between evaluations),
 * a fixed batch kept across steps. NULL on a bad shape (ndim outside 1..AG_MAX_DIMS, a dim
 * <= 0) or out of memory. Free with ag_tensor_free_owned. */
ag_tensor *ag_tensor_new_owned(int ndim, const int *shape);
/* Frees a tensor from ag_tensor_new_owned: struct, data and grad. NULL ok; an arena tensor
 * (in_arena) is left alone, the arena frees it. Cannot fail. */
void ag_tensor_free_owned(ag_tensor *t);

/* ---------- autograd ---------- */
typedef ag_status (*ag_backward_fn)(ag_ctx *ctx, ag_node *n);

/* What the driver knows about an op; one `static const` per op, next to its backward, e.g.
 * `{ .name = "scale", .backward = scale_backward }`. */
typedef struct ag_op {
    const char *name;          /* shows in error messages and in --trace-shapes */
    ag_backward_fn backward;   /* adds (+=) d(loss)/d(input) into each input's grad */
    unsigned flags;            /* 0, or what an optional part must know: AG_OP_* (speed.h, debug.h) */
} ag_op;

struct ag_node {
    const ag_op *op;
    ag_tensor *out;
    ag_tensor *in[AG_MAX_INPUTS];
    int n_in;
    void *saved;               /* op-specific buffer in the arena (e.g. LayerNorm mean/rstd) */
    double fparam[2];          /* op-specific scalars (scale factor, eps, dropout p, ...) */
    int iparam[2];             /* op-specific ints (number of heads, ...) */
    const char *scope;         /* the layer that was running (debug.h's ag_ctx_set_scope), or NULL */
    ag_node *prev;             /* the node recorded before this one */
};

/* Records a node for y = op(in...) when grad mode is on and some input requires grad; then
 * y->requires_grad becomes true. Returns the node (fill saved/fparam/iparam), or NULL when
 * nothing was recorded or on OOM (then the ctx error is set: check ag_ctx_status). */
ag_node *ag_record(ag_ctx *ctx, const ag_op *op, ag_tensor *y, ag_tensor *const *in, int n_in);

/* The gradient buffer of t, allocated zero-filled in the arena on first use. NULL on OOM. */
ag_real *ag_grad(ag_ctx *ctx, ag_tensor *t);

/* Reverse-mode pass from a scalar loss: seeds dloss = 1 and runs every recorded backward in
 * reverse order. Gradients accumulate (+=) into parameters' grads: zero them before a step.
 * One backward per ag_ctx_reset: the tape holds every node since the reset, so a second call
 * would run the earlier graph's backwards again and count its gradients twice. */
ag_status ag_backward(ag_ctx *ctx, ag_tensor *loss);
/* The same from any tensor y seeded with dy [numel(y)]: the shard pass (dloss b_j/B), gradient checks. */
ag_status ag_backward_from(ag_ctx *ctx, ag_tensor *y, const ag_real *dy);

#endif
