/* ckpt_meta.c -- the metadata of a checkpoint's safetensors files, read (train.h): counts,
 * losses, and the moments file's binding to its weights (model_hash). */
#include <math.h>
#include <stdlib.h>
#include "train.h"

ag_status ag_st_meta_u64(const ag_st_file *f, const char *path, const char *key, uint64_t max, uint64_t *out,
                         ag_error *err)
{
    const char *s = ag_st_meta_get(f, key);
    if (!s) return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata has no \"%s\"", path, key);
    if (!ag_u64_parse(s, out) || *out > max)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"%s\" is not a valid count: '%s'", path, key, s);
    return AG_OK;
}

long ag_st_meta_iter(const ag_st_file *f, const char *key)
{
    uint64_t v;
    return ag_u64_parse(ag_st_meta_get(f, key), &v) && v < ((uint64_t)1 << 53) ? (long)v : -1;
}

double ag_st_meta_loss(const ag_st_file *f, const char *key)
{
    const char *v = ag_st_meta_get(f, key);
    char *end = NULL;
    double x = v && *v ? strtod(v, &end) : NAN;
    return end && !*end && isfinite(x) && x >= 0 ? x : NAN;
}

ag_status ag_ckpt_check_bound(const ag_st_file *f, const char *path, const char *weights_file, const ag_params *P,
                              ag_error *err)
{
    const char *mh = ag_st_meta_get(f, "model_hash");
    uint64_t want, have;
    if (!mh) return AG_OK;
    if (!ag_hex64_parse(mh, &want))
        return ag_seterr(err, AG_ERR_FORMAT, "%s: metadata \"model_hash\" is not 16 hex digits", path);
    if ((have = ag_weights_hash(P)) == want) return AG_OK;
    return ag_seterr(err, AG_ERR_FORMAT, "%s was saved with other weights than the %s it is read with (model_hash "
                     "%016llx, these weights %016llx): the two files are not one checkpoint (two branches of a run "
                     "mixed?)", path, weights_file, (unsigned long long)want, (unsigned long long)have);
}
