/* attograd.h -- the one header users include.
 *
 *   tensor/  tensors, the step context (arena + tape), every op with its backward (tensor.h,
 *            ops.h), the speed knobs (speed.h), the diagnostics (debug.h), a seeded RNG
 *   params/  the parameter store: every parameter of a model in flat buffers
 *   nn/      layers (Linear ... GPT) composed from the ops; a trained GPT's generation (KV cache,
 *            temperature, top-k) and its attention weights, statistics and head patterns
 *   io/      safetensors files (checkpoints)
 *   optim/   SGD, Adam, AdamW, Muon, the learning-rate schedule, gradient clipping
 *   check/   ag_gradcheck: a central-difference check of any op's or layer's backward
 *   train/   the run machinery of any training program: the run directory's lock, files replaced
 *            whole, fault points, loss.png by gnuplot (train.h); attention heat maps and
 *            statistics (plot_attn.h); the split of a step over ranks and micro-batches (ddp.h);
 *            a program's config as a table of fields: its flags, checks, JSON and usage lines
 *            (fields.h); what a program's main does around them: its error line and exit code,
 *            its threads, its place in an mpirun job, its stop signals (program.h); the recipe
 *            a time budget picks from the step speed it measures (recipe.h). It names no model
 *   lm/      language models, above train/ and nn/: a GPT's run checked against the machine's
 *            memory, its attention drawn; a GPT over characters sampled, evaluated, its
 *            attention drawn, its forward traced (lm.h)
 *   serve/   a page and a JSON API over a run directory, for any model the program describes
 *            (serve.h: HTTP by libmicrohttpd, linked only by programs that serve)
 *
 * Dependencies point one way: nn, optim -> params -> tensor; io, check -> tensor;
 * lm -> train, nn, data (never back: tools/layers.py checks train/); programs -> all.
 * (src/dist, the transport of data-parallel training, comes with train/ddp.h: the library
 * holds the one-process one, dist_none.c; an MPI program links dist_mpi.o before the library,
 * dist/dist.h says how.) */
#ifndef ATTOGRAD_H
#define ATTOGRAD_H

#include "tensor/real.h"
#include "tensor/tensor.h"
#include "tensor/ops.h"
#include "tensor/rng.h"
#include "tensor/speed.h"
#include "tensor/debug.h"
#include "params/params.h"
#include "nn/nn.h"
#include "nn/trace.h"
#include "nn/gpt_ckpt.h"
#include "io/safetensors.h"
#include "optim/optim.h"
#include "optim/muon.h"
#include "check/gradcheck.h"
#include "train/train.h"
#include "train/plot_attn.h"
#include "train/fields.h"
#include "train/program.h"
#include "train/recipe.h"
#include "lm/lm.h"
#include "serve/serve.h"

#endif
