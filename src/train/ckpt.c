/* ckpt.c -- the tensors of a checkpoint, for any ag_params (see train.h): the weights under
 * their names, the optimizer's moments under m.<name> and v.<name>, F32, with the program's
 * metadata; read back exactly, checked, into the store. Moved out of char_lm's checkpoint.c
 * (issue 31), the layout unchanged, so that checkpoints written before still load. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>   /* getentropy: glibc, macOS and the BSDs (getrandom is Linux's alone) */
#include <time.h>
#include <unistd.h>
#include "../data/hash.h"
#include "../tensor/rng.h"
#include "train.h"

// --- identities: a run's id, the weights' hash, their text ---

/* FNV-1a of the weights as the file holds them (F32): two branches of one run (cp -r, two
 * resumes) have other weights at the same iteration, so their files do not pair. */
uint64_t ag_weights_hash(const ag_params *P)
{
    uint64_t h = AG_FNV1A_INIT;
    for (size_t i = 0; i < P->total; i++) {
        float f = (float)P->data[i];
        uint32_t bits;
        memcpy(&bits, &f, sizeof bits);
        h = ag_fnv1a_u32(h, bits);
    }
    return h;
}

uint64_t ag_new_run_id(void)
{
    uint64_t id = 0;
    if (getentropy(&id, sizeof id) != 0) {   /* no entropy source: time and pid */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        id = ag_splitmix64((uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 40);
    }
    return id ? id : 1;
}

void ag_hex64_format(char *buf, size_t n, uint64_t v)
{
    snprintf(buf, n, "%016llx", (unsigned long long)v);
}

bool ag_hex64_parse(const char *s, uint64_t *v)
{
    if (!s || strlen(s) != 16 || strspn(s, "0123456789abcdef") != 16) return false;
    *v = strtoull(s, NULL, 16);
    return true;
}

bool ag_u64_parse(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return false;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) return false;
    *out = v;
    return true;
}

// --- writing ---

/* The parameters of P as safetensors entries, named prefix + param name ("m." for moments),
 * with data from buf (P->data, P->m or P->v). names[] holds the prefixed names. */
static ag_status tensors_of(const ag_params *P, const char *prefix, const ag_real *buf, ag_st_tensor **out,
                            char ***names)
{
    ag_st_tensor *t = calloc((size_t)P->n, sizeof *t);
    char **nm = calloc((size_t)P->n, sizeof *nm);
    if (!t || !nm) goto oom;
    for (int i = 0; i < P->n; i++) {
        const ag_param_entry *e = &P->entries[i];
        size_t len = strlen(prefix) + strlen(e->t->name) + 1;
        if (!(nm[i] = malloc(len))) goto oom;
        snprintf(nm[i], len, "%s%s", prefix, e->t->name);
        t[i].name = nm[i];
        t[i].ndim = e->t->ndim;
        memcpy(t[i].shape, e->t->shape, sizeof t[i].shape);
        t[i].data = buf + e->offset;
    }
    *out = t;
    *names = nm;
    return AG_OK;
oom:
    for (int i = 0; nm && i < P->n; i++) free(nm[i]);
    free(nm);
    free(t);
    return AG_ERR_NOMEM;
}

static void free_names(char **nm, int n)
{
    for (int i = 0; nm && i < n; i++) free(nm[i]);
    free(nm);
}

/* A poisoned model is never written, so the checkpoint on disk stays the last good one. */
ag_status ag_ckpt_check_finite(const ag_params *P, const char *path, ag_error *err)
{
    for (int e = 0; e < P->n; e++) {
        const ag_tensor *t = P->entries[e].t;
        for (size_t i = 0; i < ag_numel(t); i++)
            if (!isfinite(t->data[i]))
                return ag_seterr(err, AG_ERR_NONFINITE, "%s: not written: parameter %s holds a non-finite value "
                                 "(element %zu is %g); the checkpoint there is the last good one", path, t->name, i,
                                 (double)t->data[i]);
    }
    return AG_OK;
}

/* ag_fault as ag_st_save's step hook: the crash test's fault points inside a file's write too. */
static void fault_hook(const char *step, const char *path, void *user)
{
    (void)user;
    ag_fault(step, path);
}

static const ag_st_save_opts with_faults = {.step_hook = fault_hook};

ag_status ag_ckpt_write_weights(const char *path, const ag_params *P, const ag_st_meta *meta, int n_meta,
                                ag_error *err)
{
    if (ag_ckpt_check_finite(P, path, err)) return AG_ERR_NONFINITE;
    ag_st_tensor *t = NULL;
    char **names = NULL;
    ag_status st = tensors_of(P, "", P->data, &t, &names);
    if (st) ag_seterr(err, st, "%s: out of memory", path);
    else st = ag_st_save(path, t, P->n, meta, n_meta, &with_faults, err);
    free_names(names, P->n);
    free(t);
    return st;
}

ag_status ag_ckpt_write_moments(const char *path, const ag_params *P, const ag_st_meta *meta, int n_meta,
                                ag_error *err)
{
    ag_st_tensor *tm = NULL, *tv = NULL, *all = calloc(2 * (size_t)P->n, sizeof *all);
    char **nm = NULL, **nv = NULL;
    ag_status st = AG_ERR_NOMEM;
    if (!all || tensors_of(P, "m.", P->m, &tm, &nm) || tensors_of(P, "v.", P->v, &tv, &nv)) {
        ag_seterr(err, st, "%s: out of memory", path);
    } else {
        memcpy(all, tm, (size_t)P->n * sizeof *all);
        memcpy(all + P->n, tv, (size_t)P->n * sizeof *all);
        st = ag_st_save(path, all, 2 * P->n, meta, n_meta, &with_faults, err);
    }
    free_names(nm, P->n);
    free_names(nv, P->n);
    free(tm);
    free(tv);
    free(all);
    return st;
}

// --- reading ---

/* The first tensor of f that is not one of P's parameters under one of the prefixes, or NULL. */
static const char *stranger(const ag_st_file *f, const ag_params *P, int n_prefixes, const char *const *prefixes)
{
    for (int i = 0; i < ag_st_count(f); i++) {
        const char *nm = ag_st_name(f, i);
        bool known = false;
        for (int k = 0; k < n_prefixes && !known; k++) {
            size_t pl = strlen(prefixes[k]);
            known = strncmp(nm, prefixes[k], pl) == 0 && ag_params_find(P, nm + pl);
        }
        if (!known) return nm;
    }
    return NULL;
}

/* F32 data can hold NaN or Inf: a poisoned file is refused, not trained on; and Adam's v, a
 * mean of squares, is never negative (its square root would be NaN at the first step). */
static ag_status values_ok(const ag_params *P, const char *path, const ag_real *buf, bool second_moment,
                           ag_error *err)
{
    for (size_t j = 0; j < P->total; j++) {
        if (!isfinite(buf[j])) return ag_seterr(err, AG_ERR_FORMAT, "%s: holds a non-finite value", path);
        if (second_moment && buf[j] < 0)
            return ag_seterr(err, AG_ERR_FORMAT, "%s: holds a negative second moment (v.*: %g); Adam's v is a "
                             "mean of squares", path, (double)buf[j]);
    }
    return AG_OK;
}

/* Every parameter of P, read from f under prefix + name into buf; and f holds nothing else. */
static ag_status read_params(const ag_st_file *f, const char *path, const ag_params *P, int n_prefixes,
                             const char *const *prefixes, ag_real *const *bufs, ag_error *err)
{
    if (ag_st_count(f) != n_prefixes * P->n) {
        const char *nm = stranger(f, P, n_prefixes, prefixes);   /* if that is the problem, name it */
        if (nm)
            return ag_seterr(err, AG_ERR_FORMAT, "%s: unexpected tensor '%s' (not a parameter of this model)", path, nm);
        return ag_seterr(err, AG_ERR_FORMAT, "%s: holds %d tensors, the model needs %d", path, ag_st_count(f),
                         n_prefixes * P->n);
    }
    for (int k = 0; k < n_prefixes; k++)
        for (int i = 0; i < P->n; i++) {
            const ag_param_entry *e = &P->entries[i];
            char name[512];
            snprintf(name, sizeof name, "%s%s", prefixes[k], e->t->name);
            ag_status s = ag_st_read(f, name, bufs[k] + e->offset, e->t->ndim, e->t->shape, err);
            if (s) return s;
        }
    for (int k = 0; k < n_prefixes; k++) {
        ag_status s = values_ok(P, path, bufs[k], strcmp(prefixes[k], "v.") == 0, err);
        if (s) return s;
    }
    return AG_OK;
}

ag_status ag_ckpt_read_weights(const ag_st_file *f, const char *path, ag_params *P, ag_error *err)
{
    const char *pre[] = {""};
    ag_real *bufs[] = {P->data};
    return read_params(f, path, P, 1, pre, bufs, err);
}

ag_status ag_ckpt_read_moments(const ag_st_file *f, const char *path, ag_params *P, ag_error *err)
{
    const char *pre[] = {"m.", "v."};
    ag_real *bufs[] = {P->m, P->v};
    return read_params(f, path, P, 2, pre, bufs, err);
}
