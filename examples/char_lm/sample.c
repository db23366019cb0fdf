/* sample.c -- `char_lm sample`'s prompt of characters, then the library's generation (see sample.h). */
#include <stdlib.h>
#include <string.h>
#include "sample.h"

ag_status lm_sample_text(lm_model *m, const char *prompt, const lm_sample_opts *o, lm_emit_fn emit,
                         void *user, int **prompt_ids, size_t *n_prompt, ag_error *err)
{
    int *ids = NULL;
    size_t n = 0;
    if (!prompt || !*prompt) {
        int nl = ag_vocab_id(&m->vocab, '\n');
        if (!(ids = malloc(sizeof *ids))) return ag_seterr(err, AG_ERR_NOMEM, "sampling: out of memory");
        ids[0] = nl >= 0 ? nl : 0;
        n = 1;
    } else {
        ag_status st = ag_vocab_encode(&m->vocab, "--prompt", prompt, strlen(prompt), &ids, &n, err);
        if (st) return st;
    }
    ag_status st = ag_gpt_generate(m->g, ids, n, o, emit, NULL, user, NULL, err);
    if (prompt_ids && st == AG_OK) {
        *prompt_ids = ids;
        *n_prompt = n;
    } else {
        free(ids);
    }
    return st;
}
