/* attograd.h -- the one header users include.
 *
 *   tensor/  tensors, the step context (arena + tape), every op with its backward
 *   nn/      parameters, layers (Linear ... GPT), checkpoints
 *   optim/   SGD, Adam, AdamW, the learning-rate schedule, gradient clipping
 *   check/   ag_gradcheck: a central-difference check of any op's or layer's backward
 *
 * Dependencies point one way: nn -> tensor, optim -> tensor, check -> tensor, programs -> all. */
#ifndef ATTOGRAD_H
#define ATTOGRAD_H

#include "tensor/real.h"
#include "tensor/tensor.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "tensor/parallel.h"
#include "nn/nn.h"
#include "optim/optim.h"
#include "check/gradcheck.h"

#endif
