/* params.h -- the model store: every parameter of a model in one flat buffer.
 *
 * src/params/ owns a model's parameters for the whole run: their names, their tensors, their
 * initial values and the flat buffers of values, gradients and Adam's moments. Layers
 * (src/nn) register into it; optimizers (src/optim) and checkpoints read it.
 *
 * OWNERSHIP: an ag_params owns its ag_tensor structs, their names, and four flat buffers of
 * `total` elements: data, grad, and Adam's m and v. Each parameter tensor's data/grad point
 * into them (llm.c's malloc_and_point_parameters), so the optimizer, gradient clipping and
 * zero_grad are single loops over flat memory. ag_params_free releases everything.
 *
 * LIFECYCLE: ag_params_new -> ag_params_add (each layer registers its tensors under their
 * PyTorch names) -> ag_params_alloc (one allocation per buffer; tensors now usable) ->
 * ag_params_init (seeded) -> training -> ag_params_free.
 *
 * ERRORS: a failing ag_params_* call or layer init (src/nn) returns its status and records why
 * in P->err, one line led by the name or prefix concerned ("blocks.0.attn: n_head 3 does not
 * divide n_embd 64", "ln_f.weight: registered twice"); ag_params_error reads it. As with the
 * ctx, the first failure sticks until ag_error_clear(&P->err). */
#ifndef AG_PARAMS_H
#define AG_PARAMS_H

#include "../tensor/tensor.h"

typedef enum { AG_INIT_ZEROS, AG_INIT_ONES, AG_INIT_NORMAL } ag_init_kind;

typedef struct {
    ag_tensor *t;        /* t->name is the PyTorch state_dict name */
    size_t offset;       /* element offset into the flat buffers */
    ag_init_kind init;
    double init_std;     /* for AG_INIT_NORMAL */
    bool decay;          /* AdamW weight decay applies (2-D weights only) */
    bool hidden;         /* a hidden layer's matrix (a Linear's, not the head's): Muon's (optim/muon.h) */
} ag_param_entry;

typedef struct ag_params {
    ag_param_entry *entries;
    int n, cap;
    size_t total;        /* elements in all parameters together */
    ag_real *data;       /* [total] */
    ag_real *grad;       /* [total] */
    ag_real *m;          /* [total] Adam first moment */
    ag_real *v;          /* [total] Adam second moment */
    ag_real *work;       /* an optimizer's scratch (Muon's), made at its first step */
    size_t work_n;       /* its elements */
    ag_error err;        /* why the first failing call failed (see ERRORS above) */
    int kernels;         /* the optimizers' kernel table, an ag_kernels_id (speed.h): fast/adam.c
                            or adam.c's loop; from AG_KERNELS, as a ctx's */
} ag_params;

/* NULL on OOM, or when AG_KERNELS names no kernel table (ag_kernels_from_env, speed.h). */
ag_params *ag_params_new(void);
void ag_params_free(ag_params *P);  /* NULL ok */
/* Registers a parameter (before ag_params_alloc). The name is copied. Returns the tensor,
 * whose data stays NULL until ag_params_alloc; NULL on OOM, a duplicate name, a bad shape (a
 * dim <= 0, more than INT_MAX elements) or a call after ag_params_alloc (the reason in P->err). */
ag_tensor *ag_params_add(ag_params *P, const char *name, int ndim, const int *shape,
                         ag_init_kind init, double init_std, bool decay);
/* Allocates the flat buffers (zeroed) and points every tensor into them. AG_ERR_NOMEM on OOM,
 * AG_ERR_ARG when already allocated (the reason in P->err). */
ag_status ag_params_alloc(ag_params *P);
/* For a worker of a split pass (ag_gpt_shards, nn.h): P's tensors compute with the weights of
 * `weights` (registered alike: same names, shapes and order) and keep gradients of their own,
 * in P->grad; P->data, m and v stay NULL. AG_ERR_ARG for another layout, AG_ERR_NOMEM. */
ag_status ag_params_alloc_grads(ag_params *P, const ag_params *weights);
/* Fills every parameter by its init rule from a seeded RNG, in registration order. */
void ag_params_init(ag_params *P, uint64_t seed);
void ag_params_zero_grad(ag_params *P);
/* Whether AdamW decays the parameter with this name (its `decay` flag, set when it was
 * registered): a parameter group of one. AG_ERR_ARG, recorded in P, when none has that name. */
ag_status ag_params_set_decay(ag_params *P, const char *name, bool decay);
/* Sets a matrix's `hidden` flag (a Linear sets its weight's; a model unsets its head's); AG_ERR_ARG
 * as ag_params_set_decay, or for a parameter that is not 2-D. */
ag_status ag_params_set_hidden(ag_params *P, const char *name, bool hidden);
/* The parameter with this name, or NULL. */
ag_tensor *ag_params_find(const ag_params *P, const char *name);
/* The first parameter, in registration order, with an element that is not finite, and that
 * element's index in *i; NULL when every weight is finite (a check after an optimizer step). */
const ag_tensor *ag_params_nonfinite(const ag_params *P, size_t *i);
/* Why the first failing call on P failed, one line; NULL while none failed (or P is NULL). */
const char *ag_params_error(const ag_params *P);

/* ---- for layer inits (src/nn, and layers of your own) ---- */
/* Records why a layer init failed in P->err (unless an earlier failure is there; P NULL ok) and
 * returns s, for `return ag_params_fail(P, AG_ERR_ARG, "%s: C %d must be > 0", prefix, C)`. */
ag_status ag_params_fail(ag_params *P, ag_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Writes "prefix.suffix" into name[size]. AG_ERR_ARG (recorded in P) when it does not fit. */
ag_status ag_params_name(ag_params *P, char *name, size_t size, const char *prefix, const char *suffix);
/* ag_params_add of "prefix.suffix" as a status: the tensor in *t (NULL on failure). AG_ERR_ARG
 * for a name too long, a duplicate, a bad shape or a call after ag_params_alloc; AG_ERR_NOMEM. */
ag_status ag_params_register(ag_tensor **t, ag_params *P, const char *prefix, const char *suffix, int ndim,
                             const int *shape, ag_init_kind init, double init_std, bool decay);

#endif
