/* tensor.h -- tensors, the step context (arena + tape + errors), and the autograd driver.
 *
 * OWNERSHIP (who frees what)
 *   - Parameters (ag_params, src/nn/nn.h) persist: their ag_tensor structs, data and grads are
 *     owned by the ag_params and released by ag_params_free.
 *   - Everything an op creates (output tensors, tape nodes, saved buffers, activation grads)
 *     lives in the ag_ctx arena and is "valid until ag_ctx_reset". Nothing is freed one by one.
 *     After the first training step the arena has reached its high-water mark and later steps
 *     allocate nothing (ag_ctx_stats shows it).
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
    const char *name;          /* parameter name ("blocks.0.attn.w_q.weight") or NULL */
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

typedef struct {
    size_t arena_capacity;    /* bytes reserved in chunks */
    size_t arena_used;        /* bytes handed out since the last reset */
    size_t arena_high_water;  /* the most ever used between two resets */
    uint64_t chunk_mallocs;   /* malloc calls the arena has made, ever */
    size_t tape_nodes;        /* nodes recorded since the last reset */
} ag_ctx_stats;

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
/* Anomaly detection (off by default; it costs a pass over every op output and gradient): when
 * on, the first recorded op whose output holds a NaN or Inf (or the first backward that writes
 * one into a gradient) sets an AG_ERR_NONFINITE error naming the op, its shape and its layer:
 * "non-finite output of softmax [12,4,64,64] in blocks.1.attn". Only -inf from an op that writes
 * it on purpose (ag_op.may_output_neg_inf: masked_fill) is allowed. */
void ag_ctx_set_detect_anomaly(ag_ctx *ctx, bool on);
/* Gradient recycling (off by default). On, the gradient of a tensor that an op made is handed
 * back as soon as that op's backward has run (nothing reads it after that) and the next
 * gradient of the same size reuses the buffer, while it is still in cache, instead of fresh
 * arena memory. Leaves (inputs, parameters) keep their gradients; an op's output has grad NULL
 * after ag_backward. Training loops turn it on; leave it off to look at intermediate
 * gradients (the attention weights' dL/dA, say). */
void ag_ctx_set_recycle_grads(ag_ctx *ctx, bool on);
/* Reference kernels (off by default): on, every op runs the plain loops of its ops/<op>.c even
 * where a fast kernel (fast/<op>.c) was built, so the two paths can be compared on the same
 * inputs (tests/test_fast_ref.c). Set it before the forward; a `make REFERENCE=1` library has
 * only the reference kernels and ignores it. */
void ag_ctx_set_reference_kernels(ag_ctx *ctx, bool on);
bool ag_ctx_reference_kernels(const ag_ctx *ctx);
ag_ctx_stats ag_ctx_get_stats(const ag_ctx *ctx);
/* Names the layer now running ("blocks.0.attn"); every node recorded from now on carries it.
 * The string must outlive the tape (a literal, or a layer's own name). NULL clears it. */
void ag_ctx_set_scope(ag_ctx *ctx, const char *scope);
const char *ag_ctx_scope(const ag_ctx *ctx);

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

/* What the driver knows about an op; one `static const` per op, next to its backward. The
 * flags default to false: an op that needs one names it, e.g.
 * `{ .name = "reshape", .backward = reshape_backward, .output_is_view = true }`. */
typedef struct ag_op {
    const char *name;          /* shows in error messages and in --trace-shapes */
    ag_backward_fn backward;   /* adds (+=) d(loss)/d(input) into each input's grad */
    bool may_output_neg_inf;   /* -inf in the output is on purpose (masked_fill): anomaly
                                  detection lets it pass; NaN and +inf are still faults */
    bool output_is_view;       /* the output shares its input's data AND gradient buffer
                                  (reshape): gradient recycling must not release that buffer
                                  after this op's backward, since it is the input's gradient */
} ag_op;

struct ag_node {
    const ag_op *op;
    ag_tensor *out;
    ag_tensor *in[AG_MAX_INPUTS];
    int n_in;
    void *saved;               /* op-specific buffer in the arena (e.g. LayerNorm mean/rstd) */
    double fparam[2];          /* op-specific scalars (scale factor, eps, dropout p, ...) */
    int iparam[2];             /* op-specific ints (number of heads, ...) */
    const char *scope;         /* the layer that was running (ag_ctx_set_scope), or NULL */
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
/* The same from any tensor y with a given upstream gradient dy [numel(y)] (gradient checks). */
ag_status ag_backward_from(ag_ctx *ctx, ag_tensor *y, const ag_real *dy);

/* Marks: how far has the backward come? ag_ctx_mark(ctx, id) in a forward records a mark on the
 * tape; when the backward walks past it (newest to oldest) every node recorded after the mark
 * has run its backward, so a parameter used only after the mark has its whole gradient, and
 * the hook is called with id. Data-parallel training uses it to start sending a block's
 * gradients while the backward goes on below (examples/char_lm/ddp.h). ag_ctx_mark records
 * nothing (and costs nothing) while no hook is set or grad mode is off. The hook stays set
 * across resets; NULL removes it. Cannot fail (a mark that finds no memory is dropped, and the
 * forward's next op reports the shortage). */
typedef void (*ag_mark_fn)(void *user, int id);
void ag_ctx_set_mark_hook(ag_ctx *ctx, ag_mark_fn fn, void *user);
void ag_ctx_mark(ag_ctx *ctx, int id);

/* ---------- profiling (for make bench) ----------
 * With a profile attached, every recorded op adds the time since the previous record (or
 * since ag_ctx_profile_mark) to its forward total, and every backward its own time. */
#define AG_PROFILE_MAX_OPS 32
typedef struct {
    int n;
    struct {
        const ag_op *op;
        double fwd_s, bwd_s;
        uint64_t fwd_calls, bwd_calls;
    } ops[AG_PROFILE_MAX_OPS];
    double last_mark;  /* internal: monotonic time of the last record */
} ag_profile;
/* Attaches p (owned by the caller; NULL detaches). */
void ag_ctx_set_profile(ag_ctx *ctx, ag_profile *p);
/* Starts the forward clock (call before the first op of a step). */
void ag_ctx_profile_mark(ag_ctx *ctx);

/* Calls fn for each recorded node in execution order (for --trace-shapes). */
void ag_tape_foreach(const ag_ctx *ctx, void (*fn)(const ag_node *n, void *user), void *user);

#endif
