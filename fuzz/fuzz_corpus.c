/* fuzz_corpus.c -- libFuzzer target for the corpus reader (src/data/corpus.c).
 *
 * Each input is used four ways, each with its properties checked:
 *   1. ag_utf8_decode of the bytes: accepted text re-encodes (ag_utf8_put) to exactly the same bytes;
 *      refused text names a byte offset k inside the input, the bytes before k decode, and
 *      ag_utf8_next refuses the sequence at k;
 *   2. ag_vocab_encode with a fixed vocabulary (ASCII, newline and a few Chinese characters):
 *      accepted text maps back to the same bytes through ag_vocab_utf8; refusals are one line;
 *   3. ag_vocab_from_json of the bytes as a string (the checkpoint's "vocab" metadata): an
 *      accepted vocabulary is non-empty, strictly increasing and made of scalar values, and
 *      ag_vocab_to_json -> ag_vocab_from_json gives it back;
 *   4. ag_corpus_load and ag_corpus_load_vocab of the bytes as a file (a memfd), then ag_corpus_split:
 *      the token ids are in range and agree with step 1. (ag_corpus_load scans all 0x110000 code
 *      points to build the vocabulary; fuzz/coverage_ignore.txt keeps the coverage callbacks
 *      out of that loop, which would otherwise cost about 3 ms an input. ASan still checks it,
 *      so this target runs at about 2000 inputs a second on one core.)
 * Any broken property ends in __builtin_trap(), which libFuzzer reports with a reproducer.
 *
 *   make fuzz FUZZ_SECONDS=60
 *   build/fuzz/fuzz_corpus CRASH_FILE   (replays one input) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "data/corpus.h"

#define CHECK(cond)                                                                                     \
    do {                                                                                                \
        if (!(cond)) {                                                                                  \
            fprintf(stderr, "fuzz_corpus: property failed: %s (line %d)\n", #cond, __LINE__);           \
            __builtin_trap();                                                                           \
        }                                                                                               \
    } while (0)

static int fd = -1;
static char path[64];
static ag_vocab fixed;   /* "\n", ' '..'~', 天 地 玄 黄 。 */

static void setup(void)
{
    fd = memfd_create("fuzz_corpus", 0);
    if (fd < 0) abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    char json[1024];
    size_t k = (size_t)snprintf(json, sizeof json, "[10");
    for (int c = 32; c < 127; c++) k += (size_t)snprintf(json + k, sizeof json - k, ",%d", c);
    snprintf(json + k, sizeof json - k, ",12290,22320,22825,29572,40644]");
    ag_error err = {0};
    if (ag_vocab_from_json("fixed", json, &fixed, &err) != AG_OK) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
}

static void put_input(const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
}

static bool one_line(const char *err) { return err[0] && !strchr(err, '\n') && !strchr(err, '\r'); }

/* 1: decoding */
static void check_decode(const uint8_t *data, size_t size, size_t *n_cp, bool *valid)
{
    const char *s = (const char *)data;
    uint32_t *cps = NULL;
    size_t n = 0;
    ag_error err = {0};
    ag_status st = ag_utf8_decode("fuzz", s, size, &cps, &n, &err);
    *valid = st == AG_OK;
    *n_cp = n;
    if (st == AG_OK) {
        CHECK(cps != NULL && n <= size);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            char u[5];
            int len = ag_utf8_put(cps[i], u);
            CHECK(len >= 1 && len <= 4 && k + (size_t)len <= size);
            CHECK(memcmp(u, data + k, (size_t)len) == 0);
            k += (size_t)len;
        }
        CHECK(k == size);
        free(cps);
        return;
    }
    CHECK(st == AG_ERR_FORMAT && cps == NULL && one_line(err.msg));
    const char *at = strstr(err.msg, "invalid UTF-8 at byte ");
    CHECK(at != NULL);
    size_t off = strtoull(at + strlen("invalid UTF-8 at byte "), NULL, 10);
    CHECK(off < size);
    uint32_t cp;
    const char *why = NULL;
    CHECK(ag_utf8_next(data + off, size - off, &cp, &why) == 0 && why != NULL);
    CHECK(ag_utf8_decode("prefix", s, off, &cps, &n, NULL) == AG_OK);
    free(cps);
}

/* 2: encoding with a fixed vocabulary */
static void check_encode(const uint8_t *data, size_t size)
{
    int *ids = NULL;
    size_t n = 0;
    ag_error err = {0};
    ag_status st = ag_vocab_encode(&fixed, "--prompt", (const char *)data, size, &ids, &n, &err);
    if (st != AG_OK) {
        CHECK(ids == NULL && one_line(err.msg) && strncmp(err.msg, "--prompt: ", 10) == 0);
        return;
    }
    CHECK(ids != NULL);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(ids[i] >= 0 && ids[i] < fixed.V);
        char u[5];
        int len = ag_vocab_utf8(&fixed, ids[i], u);
        CHECK(len >= 1 && k + (size_t)len <= size && memcmp(u, data + k, (size_t)len) == 0);
        k += (size_t)len;
    }
    CHECK(k == size);
    free(ids);
}

/* 3: the vocabulary JSON of a checkpoint */
static void check_vocab_json(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    ag_vocab v = {0}, w = {0};
    ag_error err = {0};
    ag_status st = ag_vocab_from_json("vocab", s, &v, &err);
    free(s);
    if (st != AG_OK) {
        CHECK(v.cp == NULL && v.V == 0 && one_line(err.msg));
        return;
    }
    CHECK(v.V > 0 && v.cp != NULL);
    for (int i = 0; i < v.V; i++) {
        CHECK(v.cp[i] <= AG_UTF8_MAX_CP && (v.cp[i] < 0xD800 || v.cp[i] > 0xDFFF));
        CHECK(i == 0 || v.cp[i] > v.cp[i - 1]);
        CHECK(ag_vocab_id(&v, v.cp[i]) == i);
    }
    char *j = ag_vocab_to_json(&v);
    CHECK(j != NULL);
    CHECK(ag_vocab_from_json("again", j, &w, NULL) == AG_OK);
    CHECK(w.V == v.V && memcmp(w.cp, v.cp, (size_t)v.V * sizeof *v.cp) == 0);
    free(j);
    ag_vocab_free(&w);
    ag_vocab_free(&v);
}

/* 4: the whole file path */
static void check_corpus_file(const uint8_t *data, size_t size, size_t n_cp, bool valid)
{
    put_input(data, size);
    ag_corpus c;
    ag_error err = {0};
    ag_status st = ag_corpus_load(path, &c, &err);
    if (st != AG_OK) {
        CHECK(one_line(err.msg) && strncmp(err.msg, path, strlen(path)) == 0);
        CHECK(!valid || size == 0);   /* valid, non-empty UTF-8 always loads */
    } else {
        CHECK(valid && size > 0 && c.n == n_cp && c.ids != NULL && c.vocab.V >= 1);
        for (int i = 1; i < c.vocab.V; i++) CHECK(c.vocab.cp[i] > c.vocab.cp[i - 1]);
        for (size_t i = 0; i < c.n; i++) CHECK(c.ids[i] >= 0 && c.ids[i] < c.vocab.V);
        static const double fractions[] = {0.0, 0.1, 0.5};
        for (int block = 1; block <= 8; block *= 2)
            for (int k = 0; k < 3; k++) {
                size_t ntr = 0, nva = 0;
                ag_error_clear(&err);
                if (ag_corpus_split(&c, fractions[k], block, &ntr, &nva, &err) == AG_OK)
                    CHECK(ntr + nva == c.n && ntr >= (size_t)block + 1 && (k == 0 ? nva == 0 : nva >= (size_t)block + 1));
                else
                    CHECK(one_line(err.msg));
            }
        ag_corpus_free(&c);
    }
    ag_corpus d;
    ag_error_clear(&err);
    st = ag_corpus_load_vocab(path, &fixed, &d, &err);
    if (st == AG_OK) {
        CHECK(valid && d.n == n_cp && d.vocab.V == fixed.V);
        for (size_t i = 0; i < d.n; i++) CHECK(d.ids[i] >= 0 && d.ids[i] < fixed.V);
        ag_corpus_free(&d);
    } else {
        CHECK(one_line(err.msg));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (fd < 0) setup();
    size_t n_cp;
    bool valid;
    check_decode(data, size, &n_cp, &valid);
    check_encode(data, size);
    check_vocab_json(data, size);
    check_corpus_file(data, size, n_cp, valid);
    return 0;
}
