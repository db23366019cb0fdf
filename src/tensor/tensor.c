/* tensor.c -- shapes and status strings; at the end, the persistent tensors
 * (ag_tensor_new_owned), the one allocation here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "tensor.h"

const char *ag_status_str(ag_status s)
{
    switch (s) {
    case AG_OK: return "ok";
    case AG_ERR_SHAPE: return "shape mismatch";
    case AG_ERR_ARG: return "bad argument";
    case AG_ERR_NOMEM: return "out of memory";
    case AG_ERR_IO: return "i/o error";
    case AG_ERR_FORMAT: return "bad file format";
    case AG_ERR_NONFINITE: return "non-finite value";
    }
    return "unknown error";
}

ag_status ag_vseterr(ag_error *e, ag_status s, const char *fmt, va_list ap)
{
    if (e && e->status == AG_OK && s != AG_OK) {
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        e->status = s;
        /* names and paths can come from a file or a user: a control character in them (a line
         * break, an escape sequence) must not break the one line or reach the terminal */
        for (char *p = e->msg; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7F) *p = '?';
    }
    return s;
}

ag_status ag_seterr(ag_error *e, ag_status s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ag_vseterr(e, s, fmt, ap);
    va_end(ap);
    return s;
}

void ag_error_clear(ag_error *e)
{
    if (!e) return;
    e->status = AG_OK;
    e->msg[0] = '\0';
}

size_t ag_numel(const ag_tensor *t)
{
    size_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
    return n;
}

int ag_last(const ag_tensor *t) { return t->shape[t->ndim - 1]; }

size_t ag_rows(const ag_tensor *t) { return ag_numel(t) / (size_t)ag_last(t); }

bool ag_same_shape(const ag_tensor *a, const ag_tensor *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

char *ag_shape_str(const ag_tensor *t, char *buf, size_t n)
{
    size_t used = 0;
    if (n == 0) return buf;
    buf[0] = '\0';
    used += (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, i ? ",%d" : "%d", t->shape[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

void ag_tensor_set_shape(ag_tensor *t, int ndim, const int *shape)
{
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    for (int i = ndim; i < AG_MAX_DIMS; i++) t->shape[i] = 1;
}

/* ---------- tensors outside any ctx ---------- */

ag_tensor *ag_tensor_new_owned(int ndim, const int *shape)
{
    if (ndim < 1 || ndim > AG_MAX_DIMS) return NULL;
    for (int i = 0; i < ndim; i++)
        if (shape[i] <= 0) return NULL;
    ag_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    ag_tensor_set_shape(t, ndim, shape);
    size_t n = ag_numel(t);
    t->data = calloc(n, sizeof(ag_real));
    t->grad = calloc(n, sizeof(ag_real));
    if (!t->data || !t->grad) {
        ag_tensor_free_owned(t);
        return NULL;
    }
    t->requires_grad = true;
    return t;
}

void ag_tensor_free_owned(ag_tensor *t)
{
    if (!t || t->in_arena) return;
    free(t->data);
    free(t->grad);
    free(t);
}
