/* fuzz_serve.c -- libFuzzer target for serve's request parameters (src/serve/params.c, the
 * library's): every body a client can POST to /api/sample and /api/attention passes through
 * ag_serve_req_parse before any model work.
 *
 * Each input is parsed as both kinds against a fixed vocabulary (ASCII, newline and a few
 * Chinese characters) and a context of 16 (ag_serve_check_chars, as char_lm's model checks). Properties: a refusal is 400 with one line (no control
 * character) in why; an accepted request has a non-empty NUL-free prompt of at most 16
 * characters, all in the vocabulary, and its numbers in their documented ranges (n in
 * [0, AG_SERVE_MAX_NEW], temperature in (0, 100], top_k 0 or >= 1).
 * Any broken property ends in __builtin_trap(), which libFuzzer reports with a reproducer.
 *
 *   make fuzz FUZZ_SECONDS=60
 *   build/fuzz/fuzz_serve CRASH_FILE   (replays one input) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve/serve.h"

#define CHECK(cond)                                                                                     \
    do {                                                                                                \
        if (!(cond)) {                                                                                  \
            fprintf(stderr, "fuzz_serve: property failed: %s (line %d)\n", #cond, __LINE__);            \
            __builtin_trap();                                                                           \
        }                                                                                               \
    } while (0)

#define CONTEXT 16
static ag_vocab fixed;   /* "\n", ' '..'~', 天 地 玄 黄 。 */

static void setup(void)
{
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

static int check(void *v, const char *prompt, char *why, size_t n)
{
    return ag_serve_check_chars(v, CONTEXT, prompt, why, n);
}

static void check_accepted(const ag_serve_req *r, ag_req_kind kind)
{
    size_t len = strlen(r->prompt);
    CHECK(len > 0 && len < sizeof r->prompt);
    ag_error e = {0};
    int *ids = NULL;
    size_t n = 0;
    CHECK(ag_vocab_encode(&fixed, "prompt", r->prompt, len, &ids, &n, &e) == AG_OK);
    CHECK(n >= 1 && n <= CONTEXT);
    free(ids);
    if (kind != AG_REQ_SAMPLE) return;
    CHECK(r->n >= 0 && r->n <= AG_SERVE_MAX_NEW);
    CHECK(r->temperature > 0 && r->temperature <= 100);
    CHECK(r->top_k >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!fixed.V) setup();
    static ag_serve_req r;   /* 16 KB: not on the stack */
    for (int kind = AG_REQ_SAMPLE; kind <= AG_REQ_ATTENTION; kind++) {
        char why[512] = "";
        int st = ag_serve_req_parse((const char *)data, size, (ag_req_kind)kind, check, &fixed, &r, why, sizeof why);
        CHECK(st == 0 || st == 400);
        if (st) {
            CHECK(why[0] != '\0');
            for (const char *p = why; *p; p++) CHECK(*p != '\n' && *p != '\r');
        } else {
            check_accepted(&r, (ag_req_kind)kind);
        }
    }
    return 0;
}
