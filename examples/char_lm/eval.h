/* eval.h -- the deterministic loss of a model on a token sequence (../shared/MODEL.md,
 * "Evaluation"): the sequence is cut into consecutive windows of T+1 tokens starting at
 * 0, T, 2T, ... (T = block_size); every target of every whole window counts once, so
 * tokens = T * floor((n - 1) / T), and the loss is the mean cross-entropy over all of them.
 * Windows are batched (no-grad mode); the sum is kept in double. */
#ifndef LM_EVAL_H
#define LM_EVAL_H

#include <stddef.h>
#include "attograd.h"
#include "checkpoint.h"

#define LM_EVAL_BATCH 16   /* windows per forward pass */

/* ids [n]. AG_ERR_ARG when n < T + 1 (not one whole window). */
ag_status lm_eval_ids(ag_gpt *g, const int *ids, size_t n, double *loss, size_t *tokens, ag_error *err);

/* The same for a UTF-8 file, encoded with the model's vocabulary (a character outside it is
 * AG_ERR_ARG, naming it and its position). */
ag_status lm_eval_file(lm_model *m, const char *path, double *loss, size_t *tokens, ag_error *err);

#endif
