/* fields.c -- a config table's rows (fields.h): lookup, typed access, parsing one value with its
 * one-line errors, ranges, durations. JSON, --help lines and the flag loop are in fields_io.c. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "fields.h"
#include "../data/hash.h"   /* ag_fnv1a: a table's layout */

const ag_field *ag_field_by_key(const ag_field *tab, int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (tab[i].key && strcmp(tab[i].key, key) == 0) return &tab[i];
    return NULL;
}

const ag_field *ag_field_by_flag(const ag_field *tab, int n, const char *flag)
{
    for (int i = 0; i < n; i++)
        if (tab[i].flag && strcmp(tab[i].flag, flag) == 0) return &tab[i];
    return NULL;
}

// --- signals: the ones a job is warned with (a batch system before pre-emption) and may catch ---

static const struct { const char *name; int sig; } signals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"HUP", SIGHUP}, {"INT", SIGINT},
    {"ALRM", SIGALRM}, {"XCPU", SIGXCPU},
};
enum { NSIGNALS = sizeof signals / sizeof signals[0] };

/* Its name ("USR1"), or its number when it is none of them. */
static void format_signal(char *buf, size_t n, int sig)
{
    for (int i = 0; i < NSIGNALS; i++)
        if (signals[i].sig == sig) return (void)snprintf(buf, n, "%s", signals[i].name);
    snprintf(buf, n, "%d", sig);
}

ag_status ag_parse_signal(const char *flag, const char *s, int *sig, ag_error *err)
{
    const char *v = strncmp(s, "SIG", 3) == 0 ? s + 3 : s;
    for (int i = 0; i < NSIGNALS; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", signals[i].sig);
        if (strcmp(v, signals[i].name) == 0 || strcmp(s, num) == 0) return *sig = signals[i].sig, AG_OK;
    }
    return ag_seterr(err, AG_ERR_ARG, "%s must be USR1, USR2, TERM, HUP, INT, ALRM or XCPU (or its number; got "
                     "'%s')", flag, s);
}

// --- typed access ---

#define AT(o, f, T) ((T *)((char *)(o) + (f)->offset))
#define CAT(o, f, T) ((const T *)((const char *)(o) + (f)->offset))
typedef const char *text;   /* a text field's type, named so that CAT's const does not repeat it */

double ag_field_get(const void *obj, const ag_field *f)
{
    switch (f->type) {
    case AG_FIELD_INT: case AG_FIELD_ENUM: case AG_FIELD_SIGNAL: return *CAT(obj, f, int);
    case AG_FIELD_LONG: return (double)*CAT(obj, f, long);
    case AG_FIELD_STR: return 0;
    case AG_FIELD_DOUBLE: return *CAT(obj, f, double);
    case AG_FIELD_U64: return (double)*CAT(obj, f, uint64_t);
    case AG_FIELD_BOOL: return *CAT(obj, f, bool);
    }
    return 0;
}

static size_t field_size(const ag_field *f)
{
    switch (f->type) {
    case AG_FIELD_INT: case AG_FIELD_ENUM: case AG_FIELD_SIGNAL: return sizeof(int);
    case AG_FIELD_LONG: return sizeof(long);
    case AG_FIELD_STR: return sizeof(const char *);
    case AG_FIELD_DOUBLE: return sizeof(double);
    case AG_FIELD_U64: return sizeof(uint64_t);
    case AG_FIELD_BOOL: return sizeof(bool);
    }
    return 0;
}

bool ag_field_equal(const void *a, const void *b, const ag_field *f)
{
    if (f->type == AG_FIELD_DOUBLE) return *CAT(a, f, double) == *CAT(b, f, double);   /* 0.0 == -0.0 */
    if (f->type == AG_FIELD_BOOL) return *CAT(a, f, bool) == *CAT(b, f, bool);
    if (f->type == AG_FIELD_STR) {
        const char *x = *CAT(a, f, text), *y = *CAT(b, f, text);
        return x == y || (x && y && strcmp(x, y) == 0);
    }
    return memcmp((const char *)a + f->offset, (const char *)b + f->offset, field_size(f)) == 0;
}

void ag_field_copy(void *dst, const void *src, const ag_field *f)
{
    memcpy((char *)dst + f->offset, (const char *)src + f->offset, field_size(f));
}

const char *ag_field_format(const void *obj, const ag_field *f, char *buf, size_t n)
{
    switch (f->type) {
    case AG_FIELD_INT: snprintf(buf, n, "%d", *CAT(obj, f, int)); break;
    case AG_FIELD_LONG: snprintf(buf, n, "%ld", *CAT(obj, f, long)); break;
    case AG_FIELD_U64: snprintf(buf, n, "%llu", (unsigned long long)*CAT(obj, f, uint64_t)); break;
    case AG_FIELD_DOUBLE: ag_format_real(buf, n, *CAT(obj, f, double)); break;
    case AG_FIELD_ENUM: snprintf(buf, n, "%s", ag_switch_name(f->sw, *CAT(obj, f, int))); break;
    case AG_FIELD_BOOL: snprintf(buf, n, "%s", *CAT(obj, f, bool) ? "true" : "false"); break;
    case AG_FIELD_SIGNAL: format_signal(buf, n, *CAT(obj, f, int)); break;
    case AG_FIELD_STR: snprintf(buf, n, "%s", *CAT(obj, f, text) ? *CAT(obj, f, text) : ""); break;
    }
    return buf;
}

void ag_format_real(char *buf, size_t n, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {   /* a whole number as one: "30", never "3e+01" (issue 35) */
        snprintf(buf, n, "%.0f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) return;
    }
}

// --- ranges ---

static const char *label(const ag_field *f) { return f->flag ? f->flag : f->key; }

/* "--mlp must be gelu or swiglu (got 7)"; AG_OK when v is one of the values of f's switch. */
static ag_status check_enum(const ag_field *f, int v, ag_error *err)
{
    if (v >= 0 && v < f->sw->n) return AG_OK;
    char choices[256];
    return ag_seterr(err, AG_ERR_ARG, "%s must be %s (got %d)", label(f),
                     ag_switch_choices(f->sw, choices, sizeof choices), v);
}

/* "--lr must be > 0 (got -1)"; AG_OK when v is in f's range. The value quoted: as written when
 * written is not NULL, else v formatted. */
static ag_status check_range(const ag_field *f, double v, const char *written, ag_error *err)
{
    if (f->type == AG_FIELD_ENUM) return check_enum(f, (int)v, err);
    bool low = f->lo_open ? !(v > f->lo) : !(v >= f->lo);
    bool high = f->hi_open ? !(v < f->hi) : !(v <= f->hi);
    if (!low && !high) return AG_OK;
    char lo[32], hi[32], got[32];
    ag_format_real(lo, sizeof lo, f->lo);
    ag_format_real(hi, sizeof hi, f->hi);
    if (written) snprintf(got, sizeof got, "%s", written);
    else ag_format_real(got, sizeof got, v);
    if (f->type == AG_FIELD_BOOL) return ag_seterr(err, AG_ERR_ARG, "%s must be false or true", label(f));
    if (isinf(f->hi))
        return ag_seterr(err, AG_ERR_ARG, "%s must be %s %s (got %s)", label(f), f->lo_open ? ">" : ">=", lo, got);
    return ag_seterr(err, AG_ERR_ARG, "%s must be in %s%s, %s%s (got %s)", label(f), f->lo_open ? "(" : "[", lo, hi,
                     f->hi_open ? ")" : "]", got);
}

/* A _STR row's text: at least lo characters when given; one of sw's names when it has them. */
static ag_status check_str(const ag_field *f, const char *s, ag_error *err)
{
    if (s && f->sw && ag_switch_parse(f->sw, s) < 0) {
        char choices[256];
        return ag_seterr(err, AG_ERR_ARG, "%s must be %s (got '%s')", label(f),
                         ag_switch_choices(f->sw, choices, sizeof choices), s);
    }
    if (s && strlen(s) < f->lo) {
        if (f->lo <= 1) return ag_seterr(err, AG_ERR_ARG, "%s must not be empty", label(f));
        return ag_seterr(err, AG_ERR_ARG, "%s must be at least %.0f characters (got '%s')", label(f), f->lo, s);
    }
    return AG_OK;
}

ag_status ag_field_check(const void *obj, const ag_field *f, ag_error *err)
{
    int sig;
    char num[16];
    switch (f->type) {
    case AG_FIELD_U64: return AG_OK;
    case AG_FIELD_STR: return check_str(f, *CAT(obj, f, text), err);
    case AG_FIELD_SIGNAL:
        snprintf(num, sizeof num, "%d", *CAT(obj, f, int));
        return ag_parse_signal(label(f), num, &sig, err);
    default: return check_range(f, ag_field_get(obj, f), NULL, err);
    }
}

ag_status ag_fields_check(const void *obj, const ag_field *tab, int n, ag_error *err)
{
    for (int i = 0; i < n; i++)
        if (ag_field_check(obj, &tab[i], err)) return AG_ERR_ARG;
    return AG_OK;
}

// --- a config against a checkpoint's, and between ranks ---

ag_status ag_fields_merge(void *cfg, const void *flags, const void *ck, const ag_field *tab, int n,
                          const bool *given, bool config_given, bool resume, const char *dir, ag_error *err)
{
    for (int i = 0; i < n; i++) {   /* the shape rows checked first: cfg stays as it was on an error */
        const ag_field *f = &tab[i];
        bool g = given && given[i];
        if (!f->shape || !f->flag || !(g || config_given) || ag_field_equal(flags, ck, f)) continue;
        char have[64], want[64];
        return ag_seterr(err, AG_ERR_ARG, "%s: the checkpoint in %s has %s %s, but %s asks for %s%s", f->flag, dir,
                         f->key, ag_field_format(ck, f, have, sizeof have), g ? "the flag" : "--config",
                         ag_field_format(flags, f, want, sizeof want), resume ? " (a resumed run keeps its model shape)" : "");
    }
    for (int i = 0; i < n; i++) {
        if (tab[i].shape) ag_field_copy(cfg, ck, &tab[i]);
        else if (resume && given && given[i]) ag_field_copy(cfg, flags, &tab[i]);
    }
    return AG_OK;
}

size_t ag_fields_switches(const void *obj, const ag_field *tab, int n, char *buf, size_t cap)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        const ag_field *f = &tab[i];
        bool on = f->type == AG_FIELD_BOOL ? *CAT(obj, f, bool) : f->type == AG_FIELD_ENUM && *CAT(obj, f, int);
        char v[64];
        if (!f->optional || !on || !f->flag || len >= cap) continue;
        int w = snprintf(buf + len, cap - len, "%s%s%s%s", len ? ", " : "", f->flag, f->type == AG_FIELD_BOOL ? "" : " ",
                         f->type == AG_FIELD_BOOL ? "" : ag_field_format(obj, f, v, sizeof v));
        if (w > 0) len = len + (size_t)w < cap ? len + (size_t)w : cap - 1;
    }
    return len;
}

uint64_t ag_field_bits(const void *obj, const ag_field *f)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)obj + f->offset, field_size(f));
    return v;
}

const char *ag_field_format_bits(const ag_field *f, uint64_t bits, char *buf, size_t n)
{
    ag_field at0 = *f;   /* the word itself is the struct, the field at its start */
    at0.offset = 0;
    return ag_field_format(&bits, &at0, buf, n);
}

uint64_t ag_fields_layout(const ag_field *tab, int n, uint64_t h)
{
    for (int i = 0; i < n; i++) {
        const ag_field *f = &tab[i];
        uint64_t w[2] = {(uint64_t)f->type, (uint64_t)f->offset};
        if (f->key) h = ag_fnv1a(h, f->key, strlen(f->key));
        h = ag_fnv1a(h, w, sizeof w);
    }
    return h;
}

// --- parsing one value: one function per type ---

static ag_status parse_enum(void *obj, const ag_field *f, const char *s, ag_error *err)
{
    int o = ag_switch_parse(f->sw, s);
    if (o < 0) {
        char choices[256];
        return ag_seterr(err, AG_ERR_ARG, "%s must be %s (got '%s')", label(f),
                         ag_switch_choices(f->sw, choices, sizeof choices), s);
    }
    *AT(obj, f, int) = o;
    return AG_OK;
}

static ag_status parse_bool(void *obj, const ag_field *f, const char *s, ag_error *err)
{
    bool t = !strcmp(s, "true") || !strcmp(s, "1"), no = !strcmp(s, "false") || !strcmp(s, "0");
    if (!t && !no) return ag_seterr(err, AG_ERR_ARG, "%s must be true or false (got '%s')", label(f), s);
    *AT(obj, f, bool) = t;
    return AG_OK;
}

/* A row with a key rejects any leading space and quotes the value formatted; one without (a
 * flag only) only a leading ' ', and quotes it as written. */
static ag_status parse_double(void *obj, const ag_field *f, const char *s, ag_error *err)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    bool space = f->key ? isspace((unsigned char)*s) : *s == ' ';
    if (!*s || *end || space || errno == ERANGE || !isfinite(v))
        return ag_seterr(err, AG_ERR_ARG, "%s: not a finite number: '%s'", label(f), s);
    if (check_range(f, v, f->key ? NULL : s, err)) return AG_ERR_ARG;
    *AT(obj, f, double) = v;
    return AG_OK;
}

static ag_status not_whole(const ag_field *f, const char *s, ag_error *err)
{
    const char *sign = f->type == AG_FIELD_U64 ? " >= 0" : "";
    return ag_seterr(err, AG_ERR_ARG, "%s: not a whole number%s: '%s'", label(f), sign, s);
}

static ag_status parse_u64(void *obj, const ag_field *f, const char *s, ag_error *err)
{
    if (!*s || *s == '-' || *s == '+' || isspace((unsigned char)*s)) return not_whole(f, s, err);
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) return not_whole(f, s, err);
    if (v > (unsigned long long)INT64_MAX)
        return ag_seterr(err, AG_ERR_ARG, "%s must be in [0, %lld] (got %s)", label(f), (long long)INT64_MAX, s);
    *AT(obj, f, uint64_t) = v;
    return AG_OK;
}

/* AG_FIELD_INT and AG_FIELD_LONG; a row without a key (a flag only) as ag_parse_long reads it */
static ag_status parse_integer(void *obj, const ag_field *f, const char *s, ag_error *err)
{
    long long v;
    if (!f->key) {
        long w;
        if (ag_parse_long(f->flag, s, (long)f->lo, (long)f->hi, &w, err)) return AG_ERR_ARG;
        v = w;
    } else {
        if (!*s || isspace((unsigned char)*s)) return not_whole(f, s, err);
        char *end = NULL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (*end || errno == ERANGE) return not_whole(f, s, err);
        if (check_range(f, (double)v, NULL, err)) return AG_ERR_ARG;
    }
    if (f->type == AG_FIELD_INT) *AT(obj, f, int) = (int)v;
    else *AT(obj, f, long) = (long)v;
    return AG_OK;
}

/* AG_FIELD_STR: the text itself, or with sw the name it is */
static ag_status parse_str(void *obj, const ag_field *f, const char *s, ag_error *err)
{
    if (check_str(f, s, err)) return AG_ERR_ARG;
    *AT(obj, f, const char *) = f->sw ? f->sw->names[ag_switch_parse(f->sw, s)] : s;
    return AG_OK;
}

ag_status ag_field_parse(void *obj, const ag_field *f, const char *s, ag_error *err)
{
    if (f->duration) return ag_parse_duration(label(f), s, f->hi, AT(obj, f, double), err);
    switch (f->type) {
    case AG_FIELD_STR: return parse_str(obj, f, s, err);
    case AG_FIELD_SIGNAL: return ag_parse_signal(label(f), s, AT(obj, f, int), err);
    case AG_FIELD_ENUM: return parse_enum(obj, f, s, err);
    case AG_FIELD_BOOL: return parse_bool(obj, f, s, err);
    case AG_FIELD_DOUBLE: return parse_double(obj, f, s, err);
    case AG_FIELD_U64: return parse_u64(obj, f, s, err);
    case AG_FIELD_INT:
    case AG_FIELD_LONG: return parse_integer(obj, f, s, err);
    }
    return not_whole(f, s, err);
}

ag_status ag_parse_long(const char *flag, const char *s, long lo, long hi, long *out, ag_error *err)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno == ERANGE || *s == ' ' || *s == '\t')
        return ag_seterr(err, AG_ERR_ARG, "%s: not a whole number: '%s'", flag, s);
    if (v < lo || v > hi) return ag_seterr(err, AG_ERR_ARG, "%s must be in [%ld, %ld] (got %ld)", flag, lo, hi, v);
    *out = v;
    return AG_OK;
}

// --- durations ---

/* One group of a duration at *p: digits, maybe '.' and digits, then its unit; false when
 * there is none, or the unit is out of order (h before m before s, each once). */
static bool duration_group(const char **p, const char **units, double *seconds)
{
    const char *q = *p;
    size_t digits = strspn(q, "0123456789");
    if (digits == 0) return false;
    q += digits;
    if (*q == '.') {
        size_t frac = strspn(q + 1, "0123456789");
        if (frac == 0) return false;
        q += 1 + frac;
    }
    const char *u = *q ? strchr(*units, *q) : NULL;   /* the units not yet used, in order */
    if (!u) return false;
    static const double scale[] = {3600, 60, 1};
    *seconds += strtod(*p, NULL) * scale[2 - strlen(u + 1)];   /* digits and one '.': strtod reads them all */
    *units = u + 1;
    *p = q + 1;
    return true;
}

/* s seconds as a duration in its largest whole unit: "1000h", "90m", "45s". */
static void format_duration(char *buf, size_t n, double s)
{
    if (s >= 3600 && fmod(s, 3600) == 0) snprintf(buf, n, "%.15gh", s / 3600);
    else if (s >= 60 && fmod(s, 60) == 0) snprintf(buf, n, "%.15gm", s / 60);
    else snprintf(buf, n, "%.15gs", s);
}

ag_status ag_parse_duration(const char *flag, const char *s, double max_s, double *seconds, ag_error *err)
{
    if (strcmp(s, "none") == 0) {
        *seconds = 0;
        return AG_OK;
    }
    const char *p = s, *units = "hms";
    double total = 0;
    while (*p)
        if (!duration_group(&p, &units, &total))
            return ag_seterr(err, AG_ERR_ARG, "%s: not a duration: '%s' (write it as 90s, 5m, 1h30m or 1.5h; "
                             "none: no budget)", flag, s);
    if (p == s) return ag_seterr(err, AG_ERR_ARG, "%s: not a duration: '' (write it as 90s, 5m or 1h30m)", flag);
    if (!(total > 0))
        return ag_seterr(err, AG_ERR_ARG, "%s must be more than 0 (got '%s'; none: no budget)", flag, s);
    if (!(total <= max_s)) {
        char most[48];
        format_duration(most, sizeof most, max_s);
        return ag_seterr(err, AG_ERR_ARG, "%s must be at most %s (got '%s')", flag, most, s);
    }
    *seconds = total;
    return AG_OK;
}
