/* eval.h -- `char_lm eval`: the deterministic loss of a model on a text (../shared/MODEL.md,
 * "Evaluation"): the library's ag_gpt_eval_ids (nn.h) over the file's characters. */
#ifndef LM_EVAL_H
#define LM_EVAL_H

#include <stddef.h>
#include "attograd.h"
#include "checkpoint.h"

#define LM_EVAL_BATCH 16   /* windows per forward pass */

/* The file (UTF-8) encoded with the model's vocabulary (a character outside it is AG_ERR_ARG,
 * naming it and its position), cut into windows and evaluated (ag_gpt_eval_ids: AG_ERR_ARG
 * when it is shorter than one window). */
ag_status lm_eval_file(lm_model *m, const char *path, double *loss, size_t *tokens, ag_error *err);

#endif
