/* optim.h -- optimizers over the flat buffers of an ag_params, the learning-rate schedule and
 * global-norm gradient clipping, exactly as ../shared/MODEL.md defines them. src/optim/ owns
 * what happens between two steps' backwards: every update is a loop over the parameters'
 * flat buffers (src/params/params.h), and none of these can fail but Muon's first step. */
#ifndef AG_OPTIM_H
#define AG_OPTIM_H

#include "../params/params.h"
#include "../nn/switches.h"   /* ag_switch */

typedef struct {
    double beta1, beta2, eps;    /* 0.9, 0.99, 1e-8 */
    double weight_decay;         /* AdamW: decoupled, on params registered with decay only;
                                    Adam: L2 added to the gradient of those params */
    double adamw_lr_scale;       /* Muon only: what AdamW moves there (embeddings, head, biases,
                                    norms) takes lr times this; 0 (left out) is 1 */
} ag_adam_cfg;

/* t is the step count, starting at 1 (bias correction). Uses P->m and P->v. */
void ag_adamw_step(ag_params *P, const ag_adam_cfg *c, double lr, long t);
void ag_adam_step(ag_params *P, const ag_adam_cfg *c, double lr, long t);
/* The same with every gradient taken as grad_scale * g, the gradients themselves untouched:
 * clipping (ag_clip_scale) folded into the update, one pass over the gradients fewer. */
void ag_adamw_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale);
void ag_adam_step_scaled(ag_params *P, const ag_adam_cfg *c, double lr, long t, double grad_scale);
/* p -= lr * g, or with momentum > 0: buf = momentum*buf + g; p -= lr*buf (buf is P->m). */
void ag_sgd_step(ag_params *P, double lr, double momentum);

/* The update rules by name, a switch (nn/switches.h) that a program's flag can offer (char_lm's
 * --optimizer): one row per value, the first the default. */
#define AG_OPTIMIZERS(X) \
    X(AG_ADAMW, "adamw", "Adam, weight decay decoupled, on 2-D weights only") \
    X(AG_ADAM,  "adam",  "Adam, weight decay as L2 in the gradient") \
    X(AG_SGD,   "sgd",   "plain SGD, with --momentum") \
    X(AG_MUON,  "muon",  "Muon on the hidden weight matrices, AdamW on the rest")
typedef enum { AG_OPTIMIZERS(AG_SWITCH_CONSTANT) } ag_optimizer;
extern const ag_switch ag_optimizer_switch;
/* One update by rule k, every gradient taken as clip * g: AdamW, Adam or Muon with c (the clip
 * folded in), SGD with momentum (scaled first). t as ag_adamw_step's. Fails as ag_muon_step can. */
ag_status ag_optimizer_step(ag_optimizer k, ag_params *P, const ag_adam_cfg *c, double momentum, double lr, long t,
                            double clip);

/* How the rate falls from lr to min_lr after the warmup, a switch (char_lm's --lr-schedule). */
#define AG_LR_SHAPES(X) \
    X(AG_LR_COSINE, "cosine", "half a cosine from lr down to min_lr (MODEL.md)") \
    X(AG_LR_LINEAR, "linear", "a straight line from lr down to min_lr")
typedef enum { AG_LR_SHAPES(AG_SWITCH_CONSTANT) } ag_lr_shape;
extern const ag_switch ag_lr_shape_switch;

typedef struct {
    double lr, min_lr;
    long warmup_iters, lr_decay_iters;
    ag_lr_shape shape;           /* 0: cosine */
} ag_lr_schedule;
/* Linear warmup, then cosine (or linear) decay to min_lr (MODEL.md); it is 0-based. */
double ag_lr_at(const ag_lr_schedule *s, long it);

/* Global L2 norm of all gradients (computed in double). */
double ag_grad_norm(const ag_params *P);
/* If the norm exceeds max_norm (> 0), scales every gradient by max_norm/(norm + 1e-6).
 * Returns the norm before clipping. max_norm <= 0 only measures. */
double ag_clip_grad_norm(ag_params *P, double max_norm);
/* The factor that clipping to max_norm multiplies every gradient by, given their global norm:
 * max_norm/(norm + 1e-6) when max_norm > 0 and norm > max_norm, else 1. */
double ag_clip_scale(double norm, double max_norm);
/* every gradient *= scale */
void ag_scale_grads(ag_params *P, double scale);

#endif
