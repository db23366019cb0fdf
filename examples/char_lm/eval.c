/* eval.c -- `char_lm eval`: a text's deterministic loss (see eval.h). */
#include "eval.h"

ag_status lm_eval_file(lm_model *m, const char *path, double *loss, size_t *tokens, ag_error *err)
{
    ag_corpus c;
    ag_status st = ag_corpus_load_vocab(path, &m->vocab, &c, err);
    if (st) return st;
    ag_error why = {0};
    st = ag_gpt_eval_ids(m->g, c.ids, c.n, LM_EVAL_BATCH, loss, tokens, &why);
    if (st) ag_seterr(err, st, "%s: %s", path, why.msg);
    ag_corpus_free(&c);
    return st;
}
