/* params.c -- a request's parameters, parsed and checked (serve.h).
 * Everything a client sends passes through ag_serve_req_parse before any model work;
 * fuzz/fuzz_serve.c drives it. */
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve.h"

/* why := the message, one line: a control byte quoted from the body (jansson's "near '...'")
 * becomes '?' (fuzz_serve found a \r there). Returns 400. */
static int bad(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    for (char *p = why; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
    return 400;
}

/* An integer field in [lo, hi] (a JSON integer, or a real with no fraction: 5.0). */
static int get_long(json_t *o, const char *key, long lo, long hi, long *out, char *why, size_t n)
{
    json_t *x = json_object_get(o, key);
    if (!x) return 0;
    double d = json_is_integer(x) ? (double)json_integer_value(x) : json_is_real(x) ? json_real_value(x) : NAN;
    if (!json_is_number(x) || d != floor(d))
        return bad(why, n, "\"%s\" must be an integer", key);
    if (d < (double)lo || d > (double)hi) return bad(why, n, "\"%s\" is %.0f; it must be in [%ld, %ld]", key, d, lo, hi);
    *out = (long)d;
    return 0;
}

static int get_prompt(json_t *o, ag_serve_req *r, char *why, size_t n)
{
    json_t *p = json_object_get(o, "prompt");
    if (!p) return bad(why, n, "\"prompt\" is required");
    if (!json_is_string(p)) return bad(why, n, "\"prompt\" must be a string");
    size_t len = json_string_length(p);
    if (len == 0) return bad(why, n, "\"prompt\" must not be empty");
    if (len >= sizeof r->prompt) return bad(why, n, "\"prompt\" is %zu bytes; at most %zu", len, sizeof r->prompt - 1);
    const char *s = json_string_value(p);
    if (strlen(s) != len) return bad(why, n, "\"prompt\" holds a NUL character");
    memcpy(r->prompt, s, len + 1);
    return 0;
}

int ag_serve_check_chars(const ag_vocab *v, int block_size, const char *prompt, char *why, size_t n)
{
    ag_error e = {0};
    int *ids = NULL;
    size_t len = 0;
    if (ag_vocab_encode(v, "prompt", prompt, strlen(prompt), &ids, &len, &e)) return bad(why, n, "%s", e.msg);
    free(ids);
    if (len > (size_t)block_size)
        return bad(why, n, "the prompt has %zu characters; the model's context is %d (block_size)", len, block_size);
    return 0;
}

static int get_sample_fields(json_t *o, ag_serve_req *r, char *why, size_t n)
{
    long top_k = 0, seed_lo = 0;
    int st = get_long(o, "n", 0, AG_SERVE_MAX_NEW, &r->n, why, n);
    if (!st) st = get_long(o, "top_k", 1, 1 << 20, &top_k, why, n);
    if (!st) st = get_long(o, "seed", 0, (1L << 53), &seed_lo, why, n);
    if (st) return st;
    if (json_object_get(o, "seed")) r->seed = (uint64_t)seed_lo;
    r->top_k = (int)top_k;
    json_t *t = json_object_get(o, "temperature");
    if (t) {
        if (!json_is_number(t)) return bad(why, n, "\"temperature\" must be a number");
        r->temperature = json_number_value(t);
        if (!(r->temperature > 0 && r->temperature <= 100))
            return bad(why, n, "\"temperature\" is %g; it must be in (0, 100]", r->temperature);
    }
    json_t *s = json_object_get(o, "stream");
    if (s && !json_is_boolean(s)) return bad(why, n, "\"stream\" must be true or false");
    if (s) r->stream = json_is_true(s);
    return 0;
}

/* No field the kind does not know: a typo ("topk") is said, not ignored. */
static int check_keys(json_t *o, ag_req_kind kind, char *why, size_t n)
{
    static const char *const sample_keys[] = {"prompt", "n", "temperature", "top_k", "seed", "stream", NULL};
    static const char *const attn_keys[] = {"prompt", NULL};
    const char *const *keys = kind == AG_REQ_SAMPLE ? sample_keys : attn_keys;
    const char *key;
    json_t *val;
    json_object_foreach(o, key, val) {
        bool known = false;
        for (int i = 0; keys[i] && !known; i++) known = strcmp(key, keys[i]) == 0;
        if (!known) return bad(why, n, "unknown field \"%.40s\"", key);
    }
    return 0;
}

int ag_serve_req_parse(const char *body, size_t len, ag_req_kind kind, ag_serve_check_fn check, void *model,
                       ag_serve_req *r, char *why, size_t n)
{
    *r = (ag_serve_req){ .n = 200, .temperature = 1.0, .seed = 1337, .stream = true };
    json_error_t je;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!o) return bad(why, n, "malformed JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    int st = json_is_object(o) ? 0 : bad(why, n, "the body must be a JSON object");
    if (!st) st = check_keys(o, kind, why, n);
    if (!st) st = get_prompt(o, r, why, n);
    if (!st && kind == AG_REQ_SAMPLE) st = get_sample_fields(o, r, why, n);
    json_decref(o);
    if (!st) st = check(model, r->prompt, why, n);
    return st;
}
