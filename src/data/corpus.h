/* corpus.h -- the text a character-level model trains on: strict UTF-8 decoding, the character
 * vocabulary, token ids and the train/val split (MODEL.md, "Vocabulary and data").
 *
 * src/data/ owns the data a program feeds the library: this corpus loader and hash.h (the one
 * FNV-1a, for fingerprints of token ids and files). It knows no model and no checkpoint;
 * char_lm, the bench, the fuzzers and the tests include it as "data/corpus.h" (installed as
 * <attograd/data/corpus.h>).
 *
 * A character is a Unicode code point decoded from UTF-8. The vocabulary of a corpus is the
 * sorted list of the distinct code points in the whole file (both splits); token id = index
 * in that list. Tiny Shakespeare has 65 of them. Invalid UTF-8 is an error that names the byte
 * offset of the first bad sequence ("data.txt: invalid UTF-8 at byte 1234 (overlong
 * encoding)"), never silently replaced.
 *
 * OWNERSHIP: a corpus or vocab struct is embedded by the caller; the functions that fill one
 * allocate its arrays, and ag_corpus_free / ag_vocab_free release them (both accept NULL and an
 * all-zero struct). Arrays returned through pointers (ids, JSON strings) are malloc'd and the
 * caller free()s them.
 *
 * ERRORS: functions return AG_OK or an ag_status (AG_ERR_IO: the file could not be read;
 * AG_ERR_FORMAT: the bytes are not what they should be; AG_ERR_ARG: a bad argument;
 * AG_ERR_NOMEM) and say why in one line in the ag_error err (may be NULL; the first error
 * sticks), starting with the file name or with the caller's label `what` ("--prompt"). On
 * error the output struct is left zeroed and nothing needs freeing. Nothing here prints or
 * exits.
 *
 * Example:
 *   ag_corpus c; ag_error err = {0};
 *   if (ag_corpus_load("data.txt", &c, &err)) { fprintf(stderr, "%s\n", err.msg); ... }
 *   size_t n_train, n_val;
 *   ag_corpus_split(&c, 0.1, 64, &n_train, &n_val, &err);
 *   // train on c.ids[0 .. n_train), validate on c.ids[n_train .. n_train + n_val)
 *   char *json = ag_vocab_to_json(&c.vocab);   // "[10,32,33,...]" for the checkpoint metadata
 *   free(json); ag_corpus_free(&c); */
#ifndef AG_DATA_CORPUS_H
#define AG_DATA_CORPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "../tensor/tensor.h"   /* ag_status, ag_error */
#include "../tensor/rng.h"

#define AG_UTF8_MAX_CP 0x10FFFFu

typedef struct {
    uint32_t *cp;   /* [V] distinct code points, strictly increasing; token id = index */
    int V;          /* vocabulary size */
} ag_vocab;

typedef struct {
    char *path;     /* copy of the file name, for messages */
    ag_vocab vocab;    /* the file's own vocabulary (ag_corpus_load) or a copy of the given one */
    int *ids;       /* [n] token ids in [0, V), one per character of the file */
    size_t n;       /* characters in the file */
} ag_corpus;

/* ---------- UTF-8 ---------- */

/* Decodes the sequence at s[0 .. len), len >= 1. Returns its length (1..4) and sets *cp, or
 * returns 0 for invalid bytes and sets *why to a short reason ("overlong encoding", "surrogate
 * U+D800..U+DFFF", "above U+10FFFF", "truncated sequence", "stray continuation byte", "invalid
 * byte 0xFF", "missing continuation byte"). Cannot fail otherwise. */
int ag_utf8_next(const unsigned char *s, size_t len, uint32_t *cp, const char **why);

/* Writes cp as UTF-8 plus a NUL into out; returns the byte count (1..4), or 0 (and out = "")
 * when cp is a surrogate or above U+10FFFF. */
int ag_utf8_put(uint32_t cp, char out[5]);

/* Decodes all of s[0 .. len) into *cps (malloc'd [*n]; not NULL on success, even for len 0).
 * Rejects overlong forms, surrogates, code points above U+10FFFF, truncated sequences and stray
 * continuation bytes: AG_ERR_FORMAT, "<what>: invalid UTF-8 at byte <offset> (<reason>)" where
 * offset is the first byte of the bad sequence, counted from 0. */
ag_status ag_utf8_decode(const char *what, const char *s, size_t len, uint32_t **cps, size_t *n,
                      ag_error *err);

/* ---------- vocabulary ---------- */

void ag_vocab_free(ag_vocab *v);   /* NULL ok; leaves *v zeroed */

/* The token id of code point cp, or -1 if cp is not in v (binary search). */
int ag_vocab_id(const ag_vocab *v, uint32_t cp);

/* Token id -> its character as UTF-8 plus a NUL in out (for printing samples). Returns the
 * byte count, or 0 (and out = "") for an id outside [0, V). */
int ag_vocab_utf8(const ag_vocab *v, int id, char out[5]);

/* Encodes UTF-8 text (a prompt, or a file's contents) with an existing vocabulary: *ids is
 * malloc'd [*n] (not NULL on success, even for empty text). Invalid UTF-8 as ag_utf8_decode; a
 * character outside the vocabulary is AG_ERR_ARG:
 *   "--prompt: character 'é' (U+00E9) at position 3 (byte 3) is not in the vocabulary"
 * (position counts characters from 0; control characters are shown as U+XXXX only). */
ag_status ag_vocab_encode(const ag_vocab *v, const char *what, const char *text, size_t len, int **ids,
                       size_t *n, ag_error *err);

/* The vocabulary as a JSON array of code points in id order, "[10,32,33]" (checkpoint
 * metadata "vocab"). malloc'd, NUL-terminated; NULL on OOM or an empty vocab. */
char *ag_vocab_to_json(const ag_vocab *v);

/* Parses ag_vocab_to_json's output into *v (allocated; free with ag_vocab_free). The array must be
 * non-empty, of integers that are Unicode scalar values (0..U+10FFFF, no surrogates), strictly
 * increasing (so sorted and distinct). AG_ERR_FORMAT otherwise, e.g.
 *   "<what>: vocab is not sorted: 66 after 97 at index 5". */
ag_status ag_vocab_from_json(const char *what, const char *json, ag_vocab *v, ag_error *err);

/* A copy of src in *dst (free with ag_vocab_free). AG_ERR_NOMEM with dst zeroed on OOM. */
ag_status ag_vocab_copy(ag_vocab *dst, const ag_vocab *src);

/* ---------- corpus ---------- */

/* How ag_corpus_load_with loads; all zero (or NULL) is ag_corpus_load. */
typedef struct {
    const ag_vocab *vocab;          /* NULL: the file's own vocabulary; else this one, copied into
                                    c->vocab (ag_corpus_load_vocab) */
    bool (*stop)(void *user);    /* NULL, or asked before every MiB read and every MiB decoded
                                    (char_lm train: a stop signal came). true ends the load at
                                    once: AG_OK with *c zeroed (c->n == 0, which a loaded file
                                    never has); the caller knows why */
    void *user;                  /* handed to stop */
    double wait_s;               /* a path that is not a regular file (a pipe, a FIFO) is read as
                                    it comes, the open never waiting for a writer: the longest
                                    wait for its next bytes, an AG_ERR_IO past it (0: 60 s) */
} ag_corpus_opts;

/* Reads the whole file at path, decodes it and builds its vocabulary and token ids.
 * Errors (one line, starting with path): cannot open (missing, unreadable: the OS reason), is
 * a directory, not a regular file, is empty, larger than 2 GiB (ids are int-indexed), invalid
 * UTF-8 at a byte offset. When the bytes there look like GBK, Latin-1 or Windows-1252 the same
 * line ends with the command that converts the file ("data.txt: invalid UTF-8 at byte 0 (missing
 * continuation byte); it looks like GBK: iconv -f GBK -t UTF-8 data.txt > data.txt.utf8").
 * MEMORY: while loading, the file's bytes and 4 bytes per character (at most 5x the file, for
 * ASCII), plus 4.6 MiB at most for two tables over the code points; after it, the 4 bytes per
 * character (at most 4x the file). */
ag_status ag_corpus_load(const char *path, ag_corpus *c, ag_error *err);

/* The same, but the token ids come from an existing vocabulary (a checkpoint's), which is
 * copied into c->vocab; a character outside it is an error naming the character, its position
 * and the file (see ag_vocab_encode). */
ag_status ag_corpus_load_vocab(const char *path, const ag_vocab *v, ag_corpus *c, ag_error *err);

/* ag_corpus_load, or ag_corpus_load_vocab with opts->vocab, that a stop callback can end early. */
ag_status ag_corpus_load_with(const char *path, const ag_corpus_opts *opts, ag_corpus *c, ag_error *err);

void ag_corpus_free(ag_corpus *c);   /* NULL ok; leaves *c zeroed */

/* MODEL.md's split: the first n_train = floor((1 - val_fraction) * n) tokens train, the rest
 * (n_val = n - n_train) validate; val_fraction 0 means no validation split (n_val = 0). This
 * is int(0.9 * len(data)) for the default 0.1, as in ../shared/bench/torch_ref.py.
 * A batch window needs block_size + 1 tokens, so each used split must hold at least that many.
 * AG_ERR_ARG when val_fraction is not in [0, 1) or block_size < 1, or a split is too short:
 *   "data.txt: the validation split has 12 tokens, block_size 64 needs at least 65". */
ag_status ag_corpus_split(const ag_corpus *c, double val_fraction, int block_size, size_t *n_train,
                       size_t *n_val, ag_error *err);

/* A batch of B windows of a token sequence of n tokens (MODEL.md: T + 1 consecutive tokens at a
 * uniform offset; windows.c). off [B] gets the offsets, uniform in [0, n - T - 1], drawn from
 * rng in order (n > T): a run that saves rng draws the same batches again on a resume. */
void ag_windows_draw(size_t *off, int B, size_t n, int T, ag_rng *rng);
/* x, y [b,T]: the windows of ids at off [b], and their targets (each token's next one). */
void ag_windows_fill(int *x, int *y, const int *ids, const size_t *off, int b, int T);

#endif
