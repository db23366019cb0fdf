/* tools.h -- char_lm's commands beside train: sample, eval, attn and --trace-shapes are the
 * library's for a GPT over characters (lm/lm.h); serve's model is serve.c's. */
#ifndef LM_TOOLS_H
#define LM_TOOLS_H

#include "attograd.h"
#include "checkpoint.h"

/* serve.c: the model of `char_lm serve`, for the library's ag_serve_run */
extern const ag_serve_client lm_serve_client;

#endif
