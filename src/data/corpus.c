/* corpus.c -- see corpus.h: strict UTF-8, the sorted character vocabulary, token ids, split.
 *
 * UTF-8 (RFC 3629, Unicode 15 table 3-7): a code point U+0000..U+10FFFF other than the
 * surrogates U+D800..U+DFFF, written in the shortest form:
 *   U+0000..U+007F     0xxxxxxx
 *   U+0080..U+07FF     110xxxxx 10xxxxxx                    (lead C2..DF; C0, C1 overlong)
 *   U+0800..U+FFFF     1110xxxx 10xxxxxx 10xxxxxx           (E0 needs >= U+0800)
 *   U+10000..U+10FFFF  11110xxx 10xxxxxx 10xxxxxx 10xxxxxx  (F0 needs >= U+10000; F5..FF never)
 * Anything else is rejected with the offset of the sequence's first byte. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include "charset.h"
#include "corpus.h"

#define CORPUS_MAX_BYTES ((size_t)INT_MAX)   /* token positions must fit an int */
#define CORPUS_STOP_EVERY ((size_t)1 << 20)  /* bytes read or decoded between two asks of opts.stop */
#define CORPUS_POLL_MS 100                   /* a stream's wait for data: opts.stop asked this often */
#define CORPUS_WAIT_S 60.0                   /* a stream's longest wait for its next bytes, by default */

// ---------------------------------------------------------------------------------------------
// helpers

static bool is_scalar_value(uint32_t cp)
{
    return cp <= AG_UTF8_MAX_CP && (cp < 0xD800 || cp > 0xDFFF);
}

// ---------------------------------------------------------------------------------------------
// UTF-8

int ag_utf8_next(const unsigned char *s, size_t len, uint32_t *cp, const char **why)
{
    static const uint32_t min_cp[5] = { 0, 0, 0x80, 0x800, 0x10000 };  /* shortest form, by length */
    const char *dummy;
    if (!why) why = &dummy;
    if (len == 0) {
        *why = "truncated sequence";
        return 0;
    }
    unsigned b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    if (b0 < 0xC0) {
        *why = "stray continuation byte";
        return 0;
    }
    if (b0 >= 0xF8) {
        *why = "invalid byte (0xF8..0xFF never occur in UTF-8)";
        return 0;
    }
    int need = b0 < 0xE0 ? 2 : b0 < 0xF0 ? 3 : 4;
    uint32_t c = b0 & (0x7Fu >> need);   /* 5, 4 or 3 payload bits */
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= len) {
            *why = "truncated sequence";
            return 0;
        }
        if ((s[i] & 0xC0) != 0x80) {
            *why = "missing continuation byte";
            return 0;
        }
        c = (c << 6) | (s[i] & 0x3Fu);
    }
    if (c < min_cp[need]) {
        *why = "overlong encoding";
        return 0;
    }
    if (c >= 0xD800 && c <= 0xDFFF) {
        *why = "surrogate U+D800..U+DFFF";
        return 0;
    }
    if (c > AG_UTF8_MAX_CP) {
        *why = "above U+10FFFF";
        return 0;
    }
    *cp = c;
    return need;
}

int ag_utf8_put(uint32_t cp, char out[5])
{
    unsigned char *o = (unsigned char *)out;
    int n = 0;
    if (!is_scalar_value(cp)) {
        n = 0;
    } else if (cp < 0x80) {
        o[n++] = (unsigned char)cp;
    } else if (cp < 0x800) {
        o[n++] = (unsigned char)(0xC0 | cp >> 6);
        o[n++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        o[n++] = (unsigned char)(0xE0 | cp >> 12);
        o[n++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[n++] = (unsigned char)(0x80 | (cp & 0x3F));
    } else {
        o[n++] = (unsigned char)(0xF0 | cp >> 18);
        o[n++] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        o[n++] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        o[n++] = (unsigned char)(0x80 | (cp & 0x3F));
    }
    o[n] = 0;
    return n;
}

static ag_status utf8_fail(const char *what, size_t at, const char *why, ag_error *err)
{
    return ag_seterr(err, AG_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu (%s)", what, at, why);
}

ag_status ag_utf8_decode(const char *what, const char *s, size_t len, uint32_t **cps, size_t *n,
                      ag_error *err)
{
    *cps = NULL;
    *n = 0;
    if (!s && len > 0) return ag_seterr(err, AG_ERR_ARG, "%s: no text", what);
    uint32_t *out = malloc((len ? len : 1) * sizeof *out);   /* never more code points than bytes */
    if (!out) return ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory decoding %zu bytes", what, len);
    const unsigned char *u = (const unsigned char *)s;
    size_t k = 0;
    for (size_t i = 0; i < len;) {
        const char *why;
        int step = ag_utf8_next(u + i, len - i, &out[k], &why);
        if (!step) {
            free(out);
            return utf8_fail(what, i, why, err);
        }
        i += (size_t)step;
        k++;
    }
    *cps = out;
    *n = k;
    return AG_OK;
}

// ---------------------------------------------------------------------------------------------
// vocabulary

void ag_vocab_free(ag_vocab *v)
{
    if (!v) return;
    free(v->cp);
    v->cp = NULL;
    v->V = 0;
}

int ag_vocab_id(const ag_vocab *v, uint32_t cp)
{
    int lo = 0, hi = v ? v->V - 1 : -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (v->cp[mid] == cp) return mid;
        if (v->cp[mid] < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int ag_vocab_utf8(const ag_vocab *v, int id, char out[5])
{
    if (!v || id < 0 || id >= v->V) {
        out[0] = 0;
        return 0;
    }
    return ag_utf8_put(v->cp[id], out);
}

ag_status ag_vocab_copy(ag_vocab *dst, const ag_vocab *src)
{
    dst->cp = NULL;
    dst->V = 0;
    if (!src || src->V <= 0) return AG_ERR_ARG;
    dst->cp = malloc((size_t)src->V * sizeof *dst->cp);
    if (!dst->cp) return AG_ERR_NOMEM;
    memcpy(dst->cp, src->cp, (size_t)src->V * sizeof *dst->cp);
    dst->V = src->V;
    return AG_OK;
}

/* "'é' (U+00E9)", or "U+000A" for a control character, into buf. */
static void describe_cp(char *buf, size_t n, uint32_t cp)
{
    char u[5];
    if (cp < 0x20 || (cp >= 0x7F && cp < 0xA0) || !ag_utf8_put(cp, u)) snprintf(buf, n, "U+%04X", (unsigned)cp);
    else snprintf(buf, n, "'%s' (U+%04X)", u, (unsigned)cp);
}

/* "<what>: character 'é' (U+00E9) at position k (byte i) is not in the vocabulary" */
static ag_status not_in_vocab(const char *what, uint32_t cp, size_t k, size_t i, ag_error *err)
{
    char d[32];
    describe_cp(d, sizeof d, cp);
    return ag_seterr(err, AG_ERR_ARG, "%s: character %s at position %zu (byte %zu) is not in the vocabulary", what, d,
                     k, i);
}

ag_status ag_vocab_encode(const ag_vocab *v, const char *what, const char *text, size_t len, int **ids,
                       size_t *n, ag_error *err)
{
    *ids = NULL;
    *n = 0;
    if (!v || v->V <= 0 || (!text && len > 0)) return ag_seterr(err, AG_ERR_ARG, "%s: no vocabulary or no text", what);
    int *out = malloc((len ? len : 1) * sizeof *out);
    if (!out) return ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory encoding %zu bytes", what, len);
    const unsigned char *u = (const unsigned char *)text;
    size_t k = 0;
    for (size_t i = 0; i < len; k++) {
        const char *why;
        uint32_t cp;
        int step = ag_utf8_next(u + i, len - i, &cp, &why);
        if (!step) {
            free(out);
            return utf8_fail(what, i, why, err);
        }
        int id = ag_vocab_id(v, cp);
        if (id < 0) {
            free(out);
            return not_in_vocab(what, cp, k, i, err);
        }
        out[k] = id;
        i += (size_t)step;
    }
    *ids = out;
    *n = k;
    return AG_OK;
}

char *ag_vocab_to_json(const ag_vocab *v)
{
    if (!v || v->V <= 0) return NULL;
    size_t cap = (size_t)v->V * 8 + 3;   /* at most 7 digits and a comma each, "[", "]", NUL */
    char *s = malloc(cap);
    if (!s) return NULL;
    size_t k = 0;
    s[k++] = '[';
    for (int i = 0; i < v->V; i++)
        k += (size_t)snprintf(s + k, cap - k, i ? ",%u" : "%u", (unsigned)v->cp[i]);
    s[k++] = ']';
    s[k] = 0;
    return s;
}

ag_status ag_vocab_from_json(const char *what, const char *json, ag_vocab *v, ag_error *err)
{
    v->cp = NULL;
    v->V = 0;
    if (!json) return ag_seterr(err, AG_ERR_FORMAT, "%s: no vocab", what);
    json_error_t je;
    json_t *a = json_loads(json, 0, &je);
    if (!a) return ag_seterr(err, AG_ERR_FORMAT, "%s: vocab is not valid JSON: %s", what, je.text);
    ag_status st = AG_ERR_FORMAT;
    size_t V = json_is_array(a) ? json_array_size(a) : 0;
    if (V == 0) {
        ag_seterr(err, st, "%s: vocab is not a non-empty JSON array", what);
        goto out;
    }
    if (V > (size_t)AG_UTF8_MAX_CP + 1) {
        ag_seterr(err, st, "%s: vocab has %zu entries, more than there are code points", what, V);
        goto out;
    }
    v->cp = malloc(V * sizeof *v->cp);
    if (!v->cp) {
        st = ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", what);
        goto out;
    }
    for (size_t i = 0; i < V; i++) {
        json_t *e = json_array_get(a, i);
        json_int_t x = json_is_integer(e) ? json_integer_value(e) : -1;
        if (x < 0 || x > AG_UTF8_MAX_CP || !is_scalar_value((uint32_t)x)) {
            ag_seterr(err, st, "%s: vocab entry %zu is not a Unicode code point (0..0x10FFFF, no "
                      "surrogates)", what, i);
            goto out;
        }
        if (i > 0 && (uint32_t)x <= v->cp[i - 1]) {
            ag_seterr(err, st, "%s: vocab is not sorted and distinct: %lld after %u at index %zu", what,
                      (long long)x, (unsigned)v->cp[i - 1], i);
            goto out;
        }
        v->cp[i] = (uint32_t)x;
    }
    v->V = (int)V;
    st = AG_OK;
out:
    json_decref(a);
    if (st != AG_OK) ag_vocab_free(v);
    return st;
}

// ---------------------------------------------------------------------------------------------
// corpus
//
// A load is two passes over the text, so that its characters never exist as code points all
// at once (that took 9 bytes per byte of the file): pass 1 checks the UTF-8, marks which code
// points occur in a bitmap (136 KiB) and counts the characters; the vocabulary is read off the
// bitmap, sorted by construction; pass 2 decodes again, straight into token ids. id_of, one
// int per code point up to the vocabulary's largest (512 bytes for ASCII, 4.4 MiB at most),
// gives the id of a code point in one look-up. Peak: the text and the ids; after: the ids.

enum { SEEN_WORDS = (AG_UTF8_MAX_CP + 1) / 32 };

/* One load in progress. */
typedef struct {
    const char *path;
    const ag_corpus_opts *o;
    char *text;        /* the whole file [len] */
    size_t len;
    uint32_t *seen;    /* [SEEN_WORDS] without a given vocabulary: a bit per code point seen */
    int *id_of;        /* [n_id] code point -> token id + 1; 0: not in the vocabulary */
    uint32_t n_id;     /* the vocabulary's largest code point + 1 */
    bool stream;       /* a pipe, a FIFO, a device: no file to name in a command */
    bool stopped;      /* o->stop said so: the load ends, nothing kept */
} loader;

/* Asks o->stop; true (L->stopped): the load ends now. */
static bool stop_asked(loader *L)
{
    L->stopped = L->o->stop && L->o->stop(L->o->user);
    return L->stopped;
}

/* stop_asked, once i (the bytes read or decoded so far) has reached *next; then every
 * CORPUS_STOP_EVERY bytes. */
static bool stopping(loader *L, size_t i, size_t *next)
{
    if (i < *next) return false;
    *next = i + CORPUS_STOP_EVERY;
    return stop_asked(L);
}

/* Opens path to read it as text: not a directory, and (a regular file) at most
 * CORPUS_MAX_BYTES. O_NONBLOCK, so that the open itself never waits (a FIFO nobody writes to
 * would hold it forever); *stream: not a regular file (a pipe, a FIFO, a device), whose reads
 * wait in wait_data. *cap: the buffer that holds all of a regular file at once, or a first
 * guess for a stream. */
static ag_status open_text(const char *path, int *fd, bool *stream, size_t *cap, ag_error *err)
{
    if ((*fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0)
        return ag_seterr(err, AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    ag_status s = AG_OK;
    if (fstat(*fd, &sb) != 0)
        s = ag_seterr(err, AG_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode))
        s = ag_seterr(err, AG_ERR_IO, "%s: is a directory, not a text file", path);
    else if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > CORPUS_MAX_BYTES)
        s = ag_seterr(err, AG_ERR_IO, "%s: file is %lld bytes, more than the 2 GiB char_lm accepts", path,
                      (long long)sb.st_size);
    else if (S_ISREG(sb.st_mode) && fcntl(*fd, F_SETFL, 0) != 0)   /* a file's reads block, briefly */
        s = ag_seterr(err, AG_ERR_IO, "%s: cannot read: %s", path, strerror(errno));
    if (s) {
        close(*fd);
        *fd = -1;
        return s;
    }
    *stream = !S_ISREG(sb.st_mode);
    *cap = S_ISREG(sb.st_mode) && sb.st_size > 0 ? (size_t)sb.st_size + 1 : 65536;
    return AG_OK;
}

/* A stream's next bytes (or its end) are there to read: true. False when the load stops, or
 * (*idle) nothing came for opts.wait_s: every wait is bounded, and a stop is heard within
 * CORPUS_POLL_MS. */
static bool wait_data(loader *L, int fd, bool *idle)
{
    double limit_ms = (L->o->wait_s > 0 ? L->o->wait_s : CORPUS_WAIT_S) * 1000, waited = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    for (;;) {
        int r = poll(&p, 1, CORPUS_POLL_MS);
        if (r > 0 || (r < 0 && errno != EINTR)) return true;   /* data, its end, or an error read() reports */
        if (stop_asked(L)) return false;
        if ((waited += CORPUS_POLL_MS) >= limit_ms) {
            *idle = true;
            return false;
        }
    }
}

/* Reads fd to its end (or until it holds more than CORPUS_MAX_BYTES), asking opts.stop every
 * CORPUS_STOP_EVERY bytes, into a malloc'd buffer of cap bytes, doubled while it fills up; *n:
 * the bytes read, *rerr a read error's errno. NULL when out of memory. */
static char *read_all(loader *L, int fd, bool stream, size_t cap, size_t *n, int *rerr, bool *idle)
{
    char *b = malloc(cap);
    size_t next = 0;
    *n = 0;
    while (b && !stopping(L, *n, &next)) {
        size_t want = cap - *n < CORPUS_STOP_EVERY ? cap - *n : CORPUS_STOP_EVERY;
        if (stream && !wait_data(L, fd, idle)) break;
        ssize_t got = read(fd, b + *n, want);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got < 0) *rerr = errno;
        if (got <= 0) break;                              /* the end, or a read error */
        *n += (size_t)got;
        if (*n < cap) continue;
        if (cap > CORPUS_MAX_BYTES) break;                /* too big */
        char *nb = realloc(b, cap * 2);
        if (!nb) free(b);
        b = nb;
        cap *= 2;
    }
    return b;
}

/* Reads the whole file into L->text [L->len >= 1], unless the load stops. */
static ag_status read_text(loader *L, ag_error *err)
{
    const char *path = L->path;
    int fd, rerr = 0;
    bool stream = false, idle = false;
    size_t cap = 0, n = 0;
    ag_status s = open_text(path, &fd, &stream, &cap, err);
    if (s) return s;
    L->stream = stream;
    char *b = read_all(L, fd, stream, cap, &n, &rerr, &idle);
    close(fd);
    if (b && (L->stopped || stop_asked(L))) s = AG_OK;   /* a read a signal cut short too */
    else if (!b) s = ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory reading the file", path);
    else if (idle)
        s = ag_seterr(err, AG_ERR_IO, "%s: nothing more came for %g s after %zu bytes (a pipe or FIFO nobody writes "
                      "to?)", path, L->o->wait_s > 0 ? L->o->wait_s : CORPUS_WAIT_S, n);
    else if (rerr) s = ag_seterr(err, AG_ERR_IO, "%s: read failed: %s", path, strerror(rerr));
    else if (n > CORPUS_MAX_BYTES) s = ag_seterr(err, AG_ERR_IO, "%s: more than the 2 GiB char_lm accepts", path);
    else if (n == 0) s = ag_seterr(err, AG_ERR_FORMAT, "%s: file is empty", path);
    L->text = b;
    L->len = n;
    return s;
}

void ag_corpus_free(ag_corpus *c)
{
    if (!c) return;
    free(c->path);
    ag_vocab_free(&c->vocab);
    free(c->ids);
    memset(c, 0, sizeof *c);
}

/* The path as one shell word: bare when every byte is safe unquoted, else in single quotes;
 * NULL when it holds a quote or a control byte (the message would show it as '?'). */
static const char *shell_word(const char *path, char *buf, size_t n)
{
    bool bare = *path != '\0';
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p < 0x20 || *p == 0x7F || *p == '\'') return NULL;
        bare &= *p >= 0x80 || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z') ||
                strchr("._-/+,=:@%", *p) != NULL;
    }
    if (bare) return path;
    return snprintf(buf, n, "'%s'", path) < (int)n ? buf : NULL;
}

/* Invalid UTF-8 at byte at of the text: the error, and when the bytes there look like GBK,
 * Latin-1 or Windows-1252 (charset.h), the iconv command that converts them, on the same line. */
static ag_status text_fail(const loader *L, size_t at, const char *why, ag_error *err)
{
    const char *enc = ag__charset_guess((const unsigned char *)L->text, L->len, at);
    char buf[256];
    const char *file = L->stream ? NULL : shell_word(L->path, buf, sizeof buf);
    if (!enc) return utf8_fail(L->path, at, why, err);
    if (!file)
        return ag_seterr(err, AG_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu (%s); it looks like %s: convert it "
                         "with iconv -f %s -t UTF-8", L->path, at, why, enc, enc);
    return ag_seterr(err, AG_ERR_FORMAT, "%s: invalid UTF-8 at byte %zu (%s); it looks like %s: iconv -f %s -t "
                     "UTF-8 %s > %s.utf8", L->path, at, why, enc, enc, file, file);
}

/* Pass 1: the text is UTF-8 (else its first bad byte is the error); *n: its characters. Each
 * code point is marked in L->seen; or, with a given vocabulary, must have an id in L->id_of
 * (else the first that has none is the error). */
static ag_status scan(loader *L, size_t *n, ag_error *err)
{
    const unsigned char *u = (const unsigned char *)L->text;
    size_t k = 0, next = 0;
    for (size_t i = 0; i < L->len; k++) {
        if (stopping(L, i, &next)) return AG_OK;
        uint32_t cp;
        const char *why;
        int step = ag_utf8_next(u + i, L->len - i, &cp, &why);
        if (!step) return text_fail(L, i, why, err);
        if (L->seen) L->seen[cp >> 5] |= 1u << (cp & 31);
        else if (cp >= L->n_id || !L->id_of[cp]) return not_in_vocab(L->path, cp, k, i, err);
        i += (size_t)step;
    }
    *n = k;
    return AG_OK;
}

/* Pass 2: the token ids of the text (UTF-8 whose every character has an id: pass 1 saw to it). */
static void fill_ids(loader *L, int *ids)
{
    const unsigned char *u = (const unsigned char *)L->text;
    size_t k = 0, next = 0;
    for (size_t i = 0; i < L->len; k++) {
        if (stopping(L, i, &next)) return;
        uint32_t cp = 0;   /* always set: pass 1 decoded all of it */
        i += (size_t)ag_utf8_next(u + i, L->len - i, &cp, NULL);
        ids[k] = L->id_of[cp] - 1;
    }
}

/* The code points marked in seen, in increasing order. */
static ag_status vocab_of_seen(const uint32_t *seen, ag_vocab *v)
{
    int V = 0;
    for (size_t w = 0; w < SEEN_WORDS; w++)
        for (uint32_t x = seen[w]; x; x &= x - 1) V++;
    if (!(v->cp = malloc((size_t)V * sizeof *v->cp))) return AG_ERR_NOMEM;
    for (uint32_t cp = 0; cp <= AG_UTF8_MAX_CP; cp++)
        if (seen[cp >> 5] >> (cp & 31) & 1) v->cp[v->V++] = cp;
    return AG_OK;
}

/* L->id_of from a vocabulary; false when out of memory. */
static bool index_vocab(loader *L, const ag_vocab *v)
{
    L->n_id = 1;   /* never an empty table */
    for (int k = 0; k < v->V; k++)
        if (v->cp[k] <= AG_UTF8_MAX_CP && v->cp[k] >= L->n_id) L->n_id = v->cp[k] + 1;
    if (!(L->id_of = calloc(L->n_id, sizeof *L->id_of))) return false;
    for (int k = 0; k < v->V; k++)
        if (v->cp[k] < L->n_id) L->id_of[v->cp[k]] = k + 1;
    return true;
}

/* L->text into c: pass 1, the vocabulary (the given one, or the text's own) and its id_of,
 * pass 2; the text is freed as soon as the ids exist. */
static ag_status decode(loader *L, ag_corpus *c, ag_error *err)
{
    const ag_vocab *given = L->o->vocab;
    size_t n = 0;
    bool ok = given ? index_vocab(L, given) : (L->seen = calloc(SEEN_WORDS, sizeof *L->seen)) != NULL;
    if (!ok) return ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", L->path);
    ag_status st = scan(L, &n, err);
    if (st || L->stopped) return st;
    st = given ? ag_vocab_copy(&c->vocab, given) : vocab_of_seen(L->seen, &c->vocab);
    if (st == AG_OK && !given && !index_vocab(L, &c->vocab)) st = AG_ERR_NOMEM;
    if (st == AG_OK && !(c->path = strdup(L->path))) st = AG_ERR_NOMEM;
    if (st == AG_OK && !(c->ids = malloc(n * sizeof *c->ids))) st = AG_ERR_NOMEM;
    if (st) return ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", L->path);
    fill_ids(L, c->ids);
    c->n = n;
    free(L->text);
    L->text = NULL;
    return AG_OK;
}

ag_status ag_corpus_load_with(const char *path, const ag_corpus_opts *opts, ag_corpus *c, ag_error *err)
{
    static const ag_corpus_opts plain = {0};
    memset(c, 0, sizeof *c);
    if (!path) return ag_seterr(err, AG_ERR_ARG, "ag_corpus_load: no path");
    loader L = {.path = path, .o = opts ? opts : &plain};
    if (L.o->vocab && L.o->vocab->V <= 0) return ag_seterr(err, AG_ERR_ARG, "%s: no vocabulary given", path);
    ag_status st = read_text(&L, err);
    if (st == AG_OK && !L.stopped) st = decode(&L, c, err);
    free(L.text);
    free(L.seen);
    free(L.id_of);
    if (st || L.stopped) ag_corpus_free(c);
    return st;
}

ag_status ag_corpus_load(const char *path, ag_corpus *c, ag_error *err)
{
    return ag_corpus_load_with(path, NULL, c, err);
}

ag_status ag_corpus_load_vocab(const char *path, const ag_vocab *v, ag_corpus *c, ag_error *err)
{
    if (!v || v->V <= 0) {
        memset(c, 0, sizeof *c);
        return ag_seterr(err, AG_ERR_ARG, "%s: no vocabulary given", path ? path : "ag_corpus_load_vocab");
    }
    return ag_corpus_load_with(path, &(ag_corpus_opts){.vocab = v}, c, err);
}

ag_status ag_corpus_split(const ag_corpus *c, double val_fraction, int block_size, size_t *n_train,
                       size_t *n_val, ag_error *err)
{
    const char *path = c && c->path ? c->path : "corpus";
    if (!c || !(val_fraction >= 0.0 && val_fraction < 1.0) || block_size < 1)
        return ag_seterr(err, AG_ERR_ARG, "%s: val_fraction must be in [0, 1) and block_size >= 1 (got %g, %d)",
                         path, val_fraction, block_size);
    /* as int(0.9 * len(data)) in the reference: 1 - 0.1 == 0.9 exactly in double */
    size_t nt = (size_t)((1.0 - val_fraction) * (double)c->n);
    if (nt > c->n) nt = c->n;
    size_t nv = c->n - nt;
    size_t need = (size_t)block_size + 1;
    if (nt < need)
        return ag_seterr(err, AG_ERR_ARG, "%s: the training split has %zu tokens, block_size %d needs at least %zu",
                         path, nt, block_size, need);
    if (val_fraction > 0 && nv < need)
        return ag_seterr(err, AG_ERR_ARG, "%s: the validation split has %zu tokens, block_size %d needs at least "
                         "%zu", path, nv, block_size, need);
    *n_train = nt;
    *n_val = nv;
    return AG_OK;
}
