/* test_corpus.c -- src/data/: strict UTF-8 (each kind of invalid input with the
 * offset of its first byte), the sorted vocabulary and token ids, prompt encoding, the vocabulary
 * JSON round trip, file errors (GBK, Latin-1 and Windows-1252 text named with the iconv command
 * that converts it, random bytes with none: charset.h) and MODEL.md's 90/10 split; hash.h's
 * FNV-1a. */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "alloc_count.h"
#include "data/corpus.h"
#include "data/hash.h"
#include "proc.h"
#include "tcases.h"

// ---------------------------------------------------------------------------------------------
// helpers

static char dir[64];
static ag_error cause;   /* why a char_lm call failed */

/* cause, cleared: each call gets its own (the first error would stick) */
static ag_error *fresh_cause(void)
{
    ag_error_clear(&cause);
    return &cause;
}

static void setup(void)
{
    strcpy(dir, "/tmp/ag_corpus_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void) { proc_remove_tree(dir); }

/* Writes n bytes to <dir>/name and returns the path (valid until the next call). */
static const char *file_with(const char *name, const char *bytes, size_t n)
{
    static char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *fp = fopen(p, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(bytes, 1, n, fp), n);
    ck_assert_int_eq(fclose(fp), 0);
    return p;
}

static const char *chinese = "床前明月光，疑是地上霜。";   /* 12 characters, 36 bytes */

// ---------------------------------------------------------------------------------------------
// UTF-8

START_TEST(utf8_valid)
{
    uint32_t *cp;
    size_t n;
    ck_assert_int_eq(ag_utf8_decode("t", "Hi!\n", 4, &cp, &n, fresh_cause()), AG_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(cp[0], 'H');
    ck_assert_uint_eq(cp[3], '\n');
    free(cp);

    ck_assert_int_eq(ag_utf8_decode("t", chinese, strlen(chinese), &cp, &n, fresh_cause()), AG_OK);
    ck_assert_uint_eq(n, 12);
    ck_assert_uint_eq(cp[0], 0x5E8A);    /* 床 */
    ck_assert_uint_eq(cp[5], 0xFF0C);    /* ， */
    ck_assert_uint_eq(cp[11], 0x3002);   /* 。 */
    free(cp);

    /* the boundaries of each length, a NUL, and the last code point */
    const char edge[] = "\x00\x7F\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF"
                        "\xF0\x90\x80\x80\xF4\x8F\xBF\xBF";
    const uint32_t want[] = { 0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF };
    ck_assert_int_eq(ag_utf8_decode("t", edge, sizeof edge - 1, &cp, &n, fresh_cause()), AG_OK);
    ck_assert_uint_eq(n, 10);
    for (int i = 0; i < 10; i++) {
        ck_assert_uint_eq(cp[i], want[i]);
        char out[5];
        int k = ag_utf8_put(want[i], out);   /* and back to the same bytes */
        ck_assert_int_gt(k, 0);
        ck_assert_int_eq((int)strlen(out), want[i] == 0 ? 0 : k);
    }
    free(cp);

    ck_assert_int_eq(ag_utf8_decode("t", "", 0, &cp, &n, fresh_cause()), AG_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_nonnull(cp);
    free(cp);

    char out[5];
    ck_assert_int_eq(ag_utf8_put(0xD800, out), 0);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(ag_utf8_put(0x110000, out), 0);
    ck_assert_int_eq(ag_utf8_put(0x6708, out), 3);
    ck_assert_str_eq(out, "月");
}
END_TEST

/* One invalid input per case, the offset of the bad sequence, and a word of the reason. */
static const struct {
    const char *bytes;
    size_t len;
    size_t at;
    const char *why;
} bad_utf8[] = {
    { "ab\x80", 3, 2, "stray continuation" },
    { "abc\xBF\x41", 5, 3, "stray continuation" },
    { "\xC0\xAF", 2, 0, "overlong" },              /* '/' in two bytes */
    { "x\xC1\xBF", 3, 1, "overlong" },
    { "xy\xE0\x80\xAF", 5, 2, "overlong" },       /* '/' in three bytes */
    { "\xE0\x9F\xBF", 3, 0, "overlong" },          /* U+07FF in three bytes */
    { "\xF0\x8F\xBF\xBF", 4, 0, "overlong" },      /* U+FFFF in four bytes */
    { "ok\xED\xA0\x80", 5, 2, "surrogate" },       /* U+D800 */
    { "\xED\xBF\xBF", 3, 0, "surrogate" },         /* U+DFFF */
    { "\xF4\x90\x80\x80", 4, 0, "above U+10FFFF" },
    { "\xF5\x80\x80\x80", 4, 0, "above U+10FFFF" },
    { "\xF8\x88\x80\x80\x80", 5, 0, "invalid byte" },
    { "\xFF", 1, 0, "invalid byte" },
    { "abcd\xE6\x9C", 6, 4, "truncated" },          /* 月 cut short at the end */
    { "\xF0\x9F\x98", 3, 0, "truncated" },
    { "\xC3", 1, 0, "truncated" },
    { "\xE6\x9C\x41", 3, 0, "missing continuation" },
    { "\xC3\xC3\xA9", 3, 0, "missing continuation" },
    { "\xE5\xBA\x8A\xE5\x89\x8D\xE6\x98\x8E\xE6\x9C\x88\xE5\x85\x89\xFF", 16, 15, "invalid byte" },
};

START_TEST(utf8_invalid)
{
    uint32_t *cp = (uint32_t *)1;
    size_t n = 7;
    char want[64];
    snprintf(want, sizeof want, "data.txt: invalid UTF-8 at byte %zu (", bad_utf8[_i].at);
    ck_assert_int_eq(ag_utf8_decode("data.txt", bad_utf8[_i].bytes, bad_utf8[_i].len, &cp, &n, fresh_cause()),
                     AG_ERR_FORMAT);
    ck_assert_msg(strncmp(cause.msg, want, strlen(want)) == 0, "case %d: %s", _i, cause.msg);
    ck_assert_msg(strstr(cause.msg, bad_utf8[_i].why), "case %d: %s", _i, cause.msg);
    ck_assert_ptr_null(cp);
    ck_assert_uint_eq(n, 0);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// corpus files

START_TEST(load_ascii)
{
    const char *p = file_with("a.txt", "hello world\n", 12);
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(p, &c, fresh_cause()), AG_OK);
    ck_assert_uint_eq(c.n, 12);
    /* sorted distinct: \n ' ' d e h l o r w */
    ck_assert_int_eq(c.vocab.V, 9);
    const char *sorted = "\n dehlorw";
    for (int i = 0; i < 9; i++) ck_assert_uint_eq(c.vocab.cp[i], (unsigned char)sorted[i]);
    const int ids[12] = { 4, 3, 5, 5, 6, 1, 8, 6, 7, 5, 2, 0 };
    for (int i = 0; i < 12; i++) ck_assert_int_eq(c.ids[i], ids[i]);
    ck_assert_str_eq(c.path, p);
    ag_corpus_free(&c);
    ck_assert_ptr_null(c.ids);
    ag_corpus_free(&c);     /* twice is fine: the struct was zeroed */
    ag_corpus_free(NULL);
}
END_TEST

START_TEST(load_chinese)
{
    const char *p = file_with("poem.txt", chinese, strlen(chinese));
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(p, &c, fresh_cause()), AG_OK);
    ck_assert_uint_eq(c.n, 12);
    ck_assert_int_eq(c.vocab.V, 12);   /* all distinct */
    for (int i = 1; i < c.vocab.V; i++) ck_assert_uint_lt(c.vocab.cp[i - 1], c.vocab.cp[i]);
    /* decoding the ids gives the text back */
    char text[64] = "";
    for (size_t i = 0; i < c.n; i++) {
        char ch[5];
        ck_assert_int_eq(ag_vocab_utf8(&c.vocab, c.ids[i], ch), 3);
        strcat(text, ch);
    }
    ck_assert_str_eq(text, chinese);
    char ch[5] = "x";
    ck_assert_int_eq(ag_vocab_utf8(&c.vocab, 12, ch), 0);
    ck_assert_str_eq(ch, "");
    ck_assert_int_eq(ag_vocab_utf8(&c.vocab, -1, ch), 0);
    ck_assert_int_eq(ag_vocab_id(&c.vocab, 0x6708), c.ids[3]);   /* 月 */
    ck_assert_int_eq(ag_vocab_id(&c.vocab, 'a'), -1);
    ag_corpus_free(&c);
}
END_TEST

START_TEST(load_errors)
{
    ag_corpus c;
    char p[PATH_MAX], want[PATH_MAX + 64];
    /* missing */
    snprintf(p, sizeof p, "%s/missing.txt", dir);
    ck_assert_int_eq(ag_corpus_load(p, &c, fresh_cause()), AG_ERR_IO);
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", p);
    ck_assert_str_eq(cause.msg, want);
    ck_assert_ptr_null(c.ids);
    ck_assert_ptr_null(c.vocab.cp);
    /* a directory */
    ck_assert_int_eq(ag_corpus_load(dir, &c, fresh_cause()), AG_ERR_IO);
    snprintf(want, sizeof want, "%s: is a directory", dir);
    ck_assert_msg(strncmp(cause.msg, want, strlen(want)) == 0, "%s", cause.msg);
    /* empty */
    const char *e = file_with("empty.txt", "", 0);
    ck_assert_int_eq(ag_corpus_load(e, &c, fresh_cause()), AG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: file is empty", e);
    ck_assert_str_eq(cause.msg, want);
    /* invalid UTF-8 deep in the file: the absolute byte offset */
    char buf[3000];
    memset(buf, 'a', sizeof buf);
    memcpy(buf + 1234, "\xED\xA0\x80", 3);
    const char *b = file_with("data.txt", buf, sizeof buf);
    ck_assert_int_eq(ag_corpus_load(b, &c, fresh_cause()), AG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: invalid UTF-8 at byte 1234 (surrogate", b);
    ck_assert_msg(strncmp(cause.msg, want, strlen(want)) == 0, "%s", cause.msg);
    ck_assert_ptr_null(c.ids);
    ck_assert_ptr_null(c.path);
    /* unreadable: only meaningful when not root (root reads anything) */
    if (geteuid() != 0) {
        const char *u = file_with("secret.txt", "abc", 3);
        chmod(u, 0);
        ck_assert_int_eq(ag_corpus_load(u, &c, fresh_cause()), AG_ERR_IO);
        ck_assert_ptr_nonnull(strstr(cause.msg, "cannot open: Permission denied"));
    }
    ck_assert_int_eq(ag_corpus_load(NULL, &c, NULL), AG_ERR_ARG);   /* no ag_error: no crash */
}
END_TEST

/* Text in another encoding: the loader's one line names the iconv command that converts it (src/
 * data/charset.h), and that command, run, gives the UTF-8 text back. Made with
 * `printf '...' | iconv -f UTF-8 -t GBK` (or LATIN1, CP1252). */
static const char gbk_poem[] =       /* 床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n */
    "\xB4\xB2\xC7\xB0\xC3\xF7\xD4\xC2\xB9\xE2\xA3\xAC\xD2\xC9\xCA\xC7\xB5\xD8\xC9\xCF\xCB\xAA\xA1\xA3\n"
    "\xBE\xD9\xCD\xB7\xCD\xFB\xC3\xF7\xD4\xC2\xA3\xAC\xB5\xCD\xCD\xB7\xCB\xBC\xB9\xCA\xCF\xE7\xA1\xA3\n";
static const struct {
    const char *name;    /* the file's name in the test directory */
    const char *bytes;
    size_t at;           /* the first invalid UTF-8 sequence */
    const char *enc;     /* the encoding the message names, NULL: none */
    const char *utf8;    /* the text, for the encodings named */
} other_enc[] = {
    { "poem.txt", gbk_poem, 0, "GBK", "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n" },
    /* UTF-8 reads E1 A1 B1 as one character, so byte 5 is the trail of 崩: the guess starts a
     * byte earlier, in step with GBK's pairs */
    { "late.txt", "ab\xE1\xA1\xB1\xC0\xA1\xA3\n", 5, "GBK", "ab帷崩。\n" },
    { "my poem.txt", gbk_poem, 0, "GBK", "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\n" },
    { "it's.txt", gbk_poem, 0, "GBK", NULL },     /* no command line with this name: a hint */
    { "fr.txt", "Gr\xF6\xDF" "e, caf\xE9, na\xEFve fa\xE7" "ade: \xE9lan.\n", 2, "LATIN1",
      "Größe, café, naïve façade: élan.\n" },
    { "win.txt", "He said \x93" "caf\xE9\x94 \x96 twice.\n", 8, "CP1252", "He said “café” – twice.\n" },
    { "one.txt", "The cat sat\xC0\xAF on the mat.\n", 11, NULL, NULL },   /* 2 bytes say nothing */
    { "bin.txt", "ab\xB4\xB2\x01\xC7\xB0\xC3\xF7", 2, NULL, NULL },        /* a control byte: binary */
};

/* The message is one line and starts as every invalid-UTF-8 error does. */
static void assert_utf8_error(const char *path, size_t at)
{
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s: invalid UTF-8 at byte %zu (", path, at);
    ck_assert_msg(strncmp(cause.msg, want, strlen(want)) == 0, "%s", cause.msg);
    ck_assert_ptr_null(strchr(cause.msg, '\n'));
}

START_TEST(load_other_encoding)
{
    ag_corpus c;
    const char *p = file_with(other_enc[_i].name, other_enc[_i].bytes, strlen(other_enc[_i].bytes));
    char path[PATH_MAX], want[3 * PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(path, sizeof path, "%s", p);
    ck_assert_int_eq(ag_corpus_load(path, &c, fresh_cause()), AG_ERR_FORMAT);
    assert_utf8_error(path, other_enc[_i].at);
    const char *enc = other_enc[_i].enc, *utf8 = other_enc[_i].utf8;
    if (!enc) {
        ck_assert_msg(!strstr(cause.msg, "iconv") && !strstr(cause.msg, "looks like"), "%s", cause.msg);
        return;
    }
    if (!utf8) {
        snprintf(want, sizeof want, "; it looks like %s: convert it with iconv -f %s -t UTF-8", enc, enc);
        ck_assert_msg(strstr(cause.msg, want), "%s", cause.msg);
        return;
    }
    const char *q = strchr(path, ' ') ? "'" : "";
    snprintf(want, sizeof want, "; it looks like %s: iconv -f %s -t UTF-8 %s%s%s > %s%s%s.utf8", enc, enc, q, path,
             q, q, path, q);
    const char *cut = strstr(cause.msg, want);
    ck_assert_msg(cut && cut[strlen(want)] == '\0', "%s", cause.msg);
    if (system("command -v iconv >/dev/null 2>&1") != 0) return;   /* libc-bin's; Debian always has it */
    snprintf(cmd, sizeof cmd, "%s", strstr(cause.msg, "iconv -f"));
    ck_assert_int_eq(system(cmd), 0);                              /* the command, as printed, converts it */
    snprintf(want, sizeof want, "%s.utf8", path);
    size_t n;
    char *got = proc_read_file(want, &n);
    ck_assert_uint_eq(n, strlen(utf8));
    ck_assert_mem_eq(got, utf8, n);
    free(got);
    ck_assert_int_eq(ag_corpus_load(want, &c, fresh_cause()), AG_OK);
    ag_corpus_free(&c);
}
END_TEST

/* From a pipe there is no file to name: the hint is the conversion alone. */
START_TEST(load_other_encoding_pipe)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    ck_assert_int_eq(write(fd[1], gbk_poem, strlen(gbk_poem)), (int)strlen(gbk_poem));   /* fits the pipe */
    close(fd[1]);
    char path[64];
    snprintf(path, sizeof path, "/dev/fd/%d", fd[0]);
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(path, &c, fresh_cause()), AG_ERR_FORMAT);
    close(fd[0]);
    assert_utf8_error(path, 0);
    const char *want = "; it looks like GBK: convert it with iconv -f GBK -t UTF-8";
    const char *cut = strstr(cause.msg, want);
    ck_assert_msg(cut && cut[strlen(want)] == '\0', "%s", cause.msg);
}
END_TEST

/* Random bytes (every value, control bytes included) look like no text: no command. */
START_TEST(load_random_bytes)
{
    char buf[4096];
    uint32_t x = 2463534242u + (uint32_t)_i;
    for (size_t i = 0; i < sizeof buf; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;   /* xorshift32 */
        buf[i] = (char)(x >> 24);
    }
    const char *p = file_with("random.bin", buf, sizeof buf);
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(p, &c, fresh_cause()), AG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(cause.msg, ": invalid UTF-8 at byte "));
    ck_assert_ptr_null(strchr(cause.msg, '\n'));
    ck_assert_msg(!strstr(cause.msg, "iconv"), "seed %d: %s", _i, cause.msg);
}
END_TEST

START_TEST(load_with_vocab)
{
    ag_corpus c, d;
    ck_assert_int_eq(ag_corpus_load(file_with("a.txt", "abcab", 5), &c, fresh_cause()), AG_OK);
    ck_assert_int_eq(ag_corpus_load_vocab(file_with("b.txt", "cab", 3), &c.vocab, &d, fresh_cause()), AG_OK);
    ck_assert_int_eq(d.vocab.V, 3);
    ck_assert_uint_eq(d.n, 3);
    ck_assert_int_eq(d.ids[0], 2);
    ck_assert_int_eq(d.ids[1], 0);
    ag_corpus_free(&d);
    const char *p = file_with("c.txt", "ab\nd", 4);
    ck_assert_int_eq(ag_corpus_load_vocab(p, &c.vocab, &d, fresh_cause()), AG_ERR_ARG);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s: character U+000A at position 2 (byte 2) is not in the vocabulary", p);
    ck_assert_str_eq(cause.msg, want);
    ck_assert_ptr_null(d.ids);
    ag_corpus_free(&c);
}
END_TEST

START_TEST(tiny_shakespeare_has_65)
{
    const char *p = "data/tinyshakespeare.txt";
    if (access(p, R_OK) != 0) return;   /* not run from the repository root */
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(p, &c, fresh_cause()), AG_OK);
    ck_assert_int_eq(c.vocab.V, 65);
    ck_assert_uint_eq(c.n, 1115394);   /* all ASCII: one character per byte */
    size_t nt, nv;
    ck_assert_int_eq(ag_corpus_split(&c, 0.1, 256, &nt, &nv, fresh_cause()), AG_OK);
    ck_assert_uint_eq(nt, 1003854);    /* int(0.9 * 1115394) */
    ck_assert_uint_eq(nv, 111540);
    ag_corpus_free(&c);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// big files: the memory a load takes, and a load that is told to stop

/* About n bytes of lines that are mostly ASCII, each with a 2-, a 3- and a 4-byte character
 * that change from line to line (a vocabulary of a few hundred). */
static char *mixed_text(size_t n, size_t *len)
{
    char *t = malloc(n + 64);
    ck_assert_ptr_nonnull(t);
    size_t k = 0;
    for (uint32_t i = 0; k < n; i++) {
        k += (size_t)sprintf(t + k, "Line %u, to be or not to be: ", (unsigned)(i % 1000));
        const uint32_t cps[3] = {0x400 + i % 64, 0x4E00 + i % 500, 0x1F600 + i % 50};
        for (int j = 0; j < 3; j++) k += (size_t)ag_utf8_put(cps[j], t + k);
        t[k++] = '\n';
    }
    *len = k;
    return t;
}

/* The characters of c's ids are the bytes of text[0 .. len). */
static void assert_ids_spell(const ag_corpus *c, const char *text, size_t len)
{
    /* one assert at the end: in check's fork mode every ck_assert is a write() to the parent,
     * and one per character (4 million) took 35 s on a loaded machine */
    size_t at = 0, bad = c->n;   /* the first id that does not spell the text (c->n: none) */
    for (size_t i = 0; i < c->n && bad == c->n; i++) {
        char ch[5];
        int w = ag_vocab_utf8(&c->vocab, c->ids[i], ch);
        if (w > 0 && at + (size_t)w <= len && memcmp(text + at, ch, (size_t)w) == 0) at += (size_t)w;
        else bad = i;
    }
    ck_assert_msg(bad == c->n, "id %zu (byte %zu) does not spell the text", bad, at);
    ck_assert_uint_eq(at, len);
}

/* The heap ag_corpus_load (and ag_corpus_load_vocab) take for a 4 MiB file: while loading the text
 * and the ids (at most 5 bytes per byte of the file), and the code point tables; afterwards the
 * ids alone. Decoding every code point first, as the loader once did, took 9 bytes per byte. */
START_TEST(load_memory)
{
    size_t len;
    char *text = mixed_text(4 << 20, &len);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", file_with("big.txt", text, len));
    /* code point -> id (an int each) and the bitmap of the code points seen */
    const long long table = (AG_UTF8_MAX_CP + 1) * (long long)sizeof(int) + (AG_UTF8_MAX_CP + 1) / 8, slack = 64 << 10;
    ag_corpus c, d;
    long long peak, held;
    for (int with_vocab = 0; with_vocab < 2; with_vocab++) {
        alloc_count_start();
        ag_status st = with_vocab ? ag_corpus_load_vocab(p, &c.vocab, &d, fresh_cause()) : ag_corpus_load(p, &c, fresh_cause());
        held = alloc_count_stop(&peak);
        ck_assert_msg(st == AG_OK, "%s", cause.msg);
        const ag_corpus *got = with_vocab ? &d : &c;
        long long ids = (long long)(got->n * sizeof *got->ids);
        ck_assert_msg(peak <= (long long)len + ids + table + slack && peak <= 5 * (long long)len + table + slack,
                      "%s: peak %lld bytes for a file of %zu bytes, %zu characters", with_vocab ? "with a vocabulary" :
                      "own vocabulary", peak, len, got->n);
        ck_assert_msg(held <= ids + slack, "%lld bytes held after the load, the ids are %lld", held, ids);
        assert_ids_spell(got, text, len);
    }
    ck_assert_int_eq(d.vocab.V, c.vocab.V);
    ck_assert_int_eq(c.vocab.V, 4 + 10 + 8 + 64 + 500 + 50);   /* "\n ,:", digits, "Lineobrt", 3 ranges */
    ag_corpus_free(&c);
    ag_corpus_free(&d);
    free(text);
}
END_TEST

typedef struct {
    int asked;      /* times the callback was asked */
    int stop_at;    /* the ask that says stop (0: none) */
} stopper;

static bool stop_at_ask(void *user)
{
    stopper *s = user;
    return ++s->asked == s->stop_at;
}

/* ag_corpus_opts.stop is asked every MiB of each of the three passes over a 3 MiB file (the read,
 * the check, the ids); a stop at any ask ends the load with AG_OK and nothing kept. */
START_TEST(load_stops)
{
    size_t len;
    char *text = mixed_text(3 << 20, &len);
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", file_with("big.txt", text, len));
    free(text);
    ag_corpus c;
    stopper never = {0};
    ck_assert_int_eq(ag_corpus_load_with(p, &(ag_corpus_opts){.stop = stop_at_ask, .user = &never}, &c, fresh_cause()), AG_OK);
    ck_assert_uint_gt(c.n, 0);
    ck_assert_msg(never.asked >= 3 * (int)(len >> 20), "asked %d times in a load of %zu bytes", never.asked, len);
    ag_vocab v;
    ck_assert_int_eq(ag_vocab_copy(&v, &c.vocab), AG_OK);
    ag_corpus_free(&c);
    for (int with_vocab = 0; with_vocab < 2; with_vocab++)
        for (int k = 1; k <= never.asked; k++) {
            stopper s = {.stop_at = k};
            ag_corpus_opts o = {.vocab = with_vocab ? &v : NULL, .stop = stop_at_ask, .user = &s};
            long long peak;
            alloc_count_start();
            ck_assert_int_eq(ag_corpus_load_with(p, &o, &c, fresh_cause()), AG_OK);
            long long held = alloc_count_stop(&peak);
            ck_assert_msg(c.n == 0 && !c.ids && !c.vocab.cp && !c.path && held <= 0,
                          "stopped at ask %d of %d: %zu ids, %lld bytes kept", k, never.asked, c.n, held);
            ck_assert_int_eq(s.asked, k);
        }
    ag_vocab_free(&v);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// vocabulary: prompts and JSON

START_TEST(encode_prompt)
{
    ag_corpus c;
    ck_assert_int_eq(ag_corpus_load(file_with("p.txt", chinese, strlen(chinese)), &c, fresh_cause()), AG_OK);
    int *ids;
    size_t n;
    ck_assert_int_eq(ag_vocab_encode(&c.vocab, "--prompt", "明月", strlen("明月"), &ids, &n, fresh_cause()),
                     AG_OK);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(ids[0], c.ids[2]);
    ck_assert_int_eq(ids[1], c.ids[3]);
    free(ids);
    /* an empty prompt is fine (non-NULL, n 0) */
    ck_assert_int_eq(ag_vocab_encode(&c.vocab, "--prompt", "", 0, &ids, &n, fresh_cause()), AG_OK);
    ck_assert_uint_eq(n, 0);
    free(ids);
    /* outside the vocabulary: the character, its position (characters) and byte offset */
    const char *s = "明月光é";
    ck_assert_int_eq(ag_vocab_encode(&c.vocab, "--prompt", s, strlen(s), &ids, &n, fresh_cause()), AG_ERR_ARG);
    ck_assert_str_eq(cause.msg, "--prompt: character 'é' (U+00E9) at position 3 (byte 9) is not in the vocabulary");
    ck_assert_ptr_null(ids);
    ck_assert_int_eq(ag_vocab_encode(&c.vocab, "--prompt", "月\t", 4, &ids, &n, fresh_cause()), AG_ERR_ARG);
    ck_assert_str_eq(cause.msg, "--prompt: character U+0009 at position 1 (byte 3) is not in the vocabulary");
    /* invalid UTF-8 in a prompt */
    ck_assert_int_eq(ag_vocab_encode(&c.vocab, "--prompt", "明\xE6", 4, &ids, &n, fresh_cause()), AG_ERR_FORMAT);
    ck_assert_str_eq(cause.msg, "--prompt: invalid UTF-8 at byte 3 (truncated sequence)");
    ag_corpus_free(&c);
}
END_TEST

START_TEST(vocab_json_roundtrip)
{
    ag_corpus c;
    const char *text = "ab\n 床前明月光\xF0\x9F\x98\x80";   /* ... U+1F600 */
    ck_assert_int_eq(ag_corpus_load(file_with("v.txt", text, strlen(text)), &c, fresh_cause()), AG_OK);
    char *json = ag_vocab_to_json(&c.vocab);
    ck_assert_ptr_nonnull(json);
    ck_assert_str_eq(json, "[10,32,97,98,20809,21069,24202,26126,26376,128512]");
    ag_vocab v;
    ck_assert_int_eq(ag_vocab_from_json("ckpt", json, &v, fresh_cause()), AG_OK);
    ck_assert_int_eq(v.V, c.vocab.V);
    ck_assert(memcmp(v.cp, c.vocab.cp, (size_t)v.V * sizeof *v.cp) == 0);
    ag_vocab w;
    ck_assert_int_eq(ag_vocab_copy(&w, &v), AG_OK);
    ck_assert_int_eq(w.V, v.V);
    ag_vocab_free(&w);
    ag_vocab_free(&v);
    ck_assert_ptr_null(v.cp);
    ag_vocab_free(NULL);
    free(json);
    ck_assert_ptr_null(ag_vocab_to_json(&v));   /* empty */
    ag_corpus_free(&c);
}
END_TEST

static const struct {
    const char *json;
    const char *why;
} bad_vocab[] = {
    { "[97,98,98]", "not sorted and distinct: 98 after 98 at index 2" },
    { "[97,66]", "not sorted and distinct: 66 after 97 at index 1" },
    { "[55296]", "entry 0 is not a Unicode code point" },    /* U+D800 */
    { "[1114112]", "entry 0 is not a Unicode code point" },  /* U+110000 */
    { "[10,-1]", "entry 1 is not a Unicode code point" },
    { "[10,\"a\"]", "entry 1 is not a Unicode code point" },
    { "[10,32.0]", "entry 1 is not a Unicode code point" },
    { "[]", "not a non-empty JSON array" },
    { "{\"a\":1}", "not a non-empty JSON array" },
    { "[10,", "not valid JSON" },
    { "", "not valid JSON" },
};

START_TEST(vocab_json_invalid)
{
    ag_vocab v = { (uint32_t *)1, 5 };
    ck_assert_int_eq(ag_vocab_from_json("ck", bad_vocab[_i].json, &v, fresh_cause()), AG_ERR_FORMAT);
    ck_assert_msg(strncmp(cause.msg, "ck: vocab ", 10) == 0 && strstr(cause.msg, bad_vocab[_i].why), "case %d: %s", _i,
                  cause.msg);
    ck_assert_ptr_null(v.cp);
    ck_assert_int_eq(v.V, 0);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// split

START_TEST(split_90_10)
{
    char text[1001];
    for (int i = 0; i < 1000; i++) text[i] = (char)('a' + i % 7);
    ag_corpus c;
    const char *p = file_with("s.txt", text, 1000);
    ck_assert_int_eq(ag_corpus_load(p, &c, fresh_cause()), AG_OK);
    size_t nt = 0, nv = 0;
    ck_assert_int_eq(ag_corpus_split(&c, 0.1, 8, &nt, &nv, fresh_cause()), AG_OK);
    ck_assert_uint_eq(nt, 900);
    ck_assert_uint_eq(nv, 100);
    ck_assert_int_eq(ag_corpus_split(&c, 0.0, 8, &nt, &nv, fresh_cause()), AG_OK);
    ck_assert_uint_eq(nt, 1000);
    ck_assert_uint_eq(nv, 0);
    ck_assert_int_eq(ag_corpus_split(&c, 0.25, 8, &nt, &nv, fresh_cause()), AG_OK);
    ck_assert_uint_eq(nt, 750);
    /* a window needs block_size + 1 tokens in each split used */
    ck_assert_int_eq(ag_corpus_split(&c, 0.1, 100, &nt, &nv, fresh_cause()), AG_ERR_ARG);
    char want[PATH_MAX + 96];
    snprintf(want, sizeof want, "%s: the validation split has 100 tokens, block_size 100 needs at least 101", p);
    ck_assert_str_eq(cause.msg, want);
    ck_assert_int_eq(ag_corpus_split(&c, 0.1, 99, &nt, &nv, fresh_cause()), AG_OK);
    ck_assert_int_eq(ag_corpus_split(&c, 0.0, 1000, &nt, &nv, fresh_cause()), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(cause.msg, "the training split has 1000 tokens"));
    ck_assert_int_eq(ag_corpus_split(&c, 0.0, 999, &nt, &nv, fresh_cause()), AG_OK);
    /* bad arguments */
    ck_assert_int_eq(ag_corpus_split(&c, 1.0, 8, &nt, &nv, fresh_cause()), AG_ERR_ARG);
    ck_assert_int_eq(ag_corpus_split(&c, -0.1, 8, &nt, &nv, fresh_cause()), AG_ERR_ARG);
    ck_assert_int_eq(ag_corpus_split(&c, NAN, 8, &nt, &nv, fresh_cause()), AG_ERR_ARG);
    ck_assert_int_eq(ag_corpus_split(&c, 0.1, 0, &nt, &nv, fresh_cause()), AG_ERR_ARG);
    ag_corpus_free(&c);
}
END_TEST

// ---------------------------------------------------------------------------------------------

// ---------------------------------------------------------------------------------------------
// src/data/hash.h: FNV-1a

/* The published 64-bit FNV-1a test vectors (isthe.com/chongo/src/fnv/test_fnv.c), pieces chained
 * equal to one call, and the token-id fingerprint is FNV-1a over little-endian bytes. */
START_TEST(fnv1a_vectors)
{
    ck_assert_uint_eq(ag_fnv1a(AG_FNV1A_INIT, NULL, 0), 0xcbf29ce484222325ull);
    ck_assert_uint_eq(ag_fnv1a(AG_FNV1A_INIT, "a", 1), 0xaf63dc4c8601ec8cull);
    ck_assert_uint_eq(ag_fnv1a(AG_FNV1A_INIT, "foobar", 6), 0x85944171f73967e8ull);
    ck_assert_uint_eq(ag_fnv1a(ag_fnv1a(AG_FNV1A_INIT, "foo", 3), "bar", 3), 0x85944171f73967e8ull);
    int ids[3] = { 1, 0x10203, 65 };
    const unsigned char le[12] = { 1, 0, 0, 0, 3, 2, 1, 0, 65, 0, 0, 0 };
    ck_assert_uint_eq(ag_ids_hash(ids, 3), ag_fnv1a(AG_FNV1A_INIT, le, sizeof le));
    ck_assert_uint_eq(ag_ids_hash(ids, 0), AG_FNV1A_INIT);
    uint64_t h = ag_ids_hash(ids, 3);
    ids[2] = 66;   /* one token differs: so does the fingerprint */
    ck_assert_uint_ne(ag_ids_hash(ids, 3), h);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// src/data/windows.c and ag_seed_at: the batch and the dropout seed of a step, which a program
// replaying a char_lm run (examples/one_step) must draw as char_lm draws them

/* B offsets in [0, n - T - 1], the same from the same rng state; each window and its targets,
 * shifted by one token; ag_seed_at pinned (saved runs replay their dropout masks with it). */
START_TEST(windows_and_seeds)
{
    enum { N = 50, T = 8, B = 64 };
    int ids[N], x[B * T], y[B * T];
    size_t off[B], again[B];
    for (int i = 0; i < N; i++) ids[i] = 100 + i;
    ag_rng r, r2;
    ag_rng_seed(&r, 7);
    r2 = r;
    ag_windows_draw(off, B, N, T, &r);
    ag_windows_draw(again, B, N, T, &r2);
    ag_windows_fill(x, y, ids, off, B, T);
    for (int b = 0; b < B; b++) {
        ck_assert_uint_le(off[b], N - T - 1);
        ck_assert_uint_eq(off[b], again[b]);
        for (int t = 0; t < T; t++) {
            ck_assert_int_eq(x[b * T + t], ids[off[b] + t]);
            ck_assert_int_eq(y[b * T + t], ids[off[b] + t + 1]);
        }
    }
    ck_assert_uint_eq(ag_seed_at(1337, 0x64726f706f7574ull, 12), 0x49b9367b8af266fbull);
    ck_assert_uint_ne(ag_seed_at(1337, 0x64726f706f7574ull, 13), ag_seed_at(1337, 0x64726f706f7574ull, 12));
}
END_TEST

Suite *corpus_suite(void)
{
    Suite *s = suite_create("corpus");
    TCase *tc = tcase_create("utf8");
    tcase_add_test(tc, utf8_valid);
    tcase_add_loop_test(tc, utf8_invalid, 0, (int)(sizeof bad_utf8 / sizeof bad_utf8[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("files");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);   /* a bound for a hang: a loaded machine (issue 35) took over 30 s */
    ADD_TESTS(tc, load_ascii, load_chinese, load_errors);
    tcase_add_loop_test(tc, load_other_encoding, 0, (int)(sizeof other_enc / sizeof other_enc[0]));
    tcase_add_test(tc, load_other_encoding_pipe);
    tcase_add_loop_test(tc, load_random_bytes, 0, 16);
    ADD_TESTS(tc, load_with_vocab, tiny_shakespeare_has_65, split_90_10, load_memory, load_stops);
    suite_add_tcase(s, tc);

    tc = tcase_create("vocab");
    tcase_add_checked_fixture(tc, setup, teardown);
    ADD_TESTS(tc, encode_prompt, vocab_json_roundtrip);
    tcase_add_loop_test(tc, vocab_json_invalid, 0, (int)(sizeof bad_vocab / sizeof bad_vocab[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("hash");
    tcase_add_test(tc, fnv1a_vectors);
    tcase_add_test(tc, windows_and_seeds);
    suite_add_tcase(s, tc);
    return s;
}
