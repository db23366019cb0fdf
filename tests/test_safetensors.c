/* test_safetensors.c -- src/io/safetensors.c: exact round trips, atomic writes, and a loader
 * that turns every malformed file (truncated at each length, bad JSON, wrong dtype, offsets
 * overlapping or past the end, ...) into one clear error instead of a crash.
 *
 * Each test works in its own fresh directory under /tmp and removes it afterwards. */
#include <check.h>
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <jansson.h>
#include "alloc_count.h"
#include "io/safetensors.h"
#include "proc.h"
#include "tcases.h"

// ---------------------------------------------------------------------------------------------
// helpers

static char dir[64];    /* this test's scratch directory */
static ag_error err;    /* the last call's error (fresh() clears it: the first error sticks) */

static ag_error *fresh(void)
{
    ag_error_clear(&err);
    return &err;
}

static void setup(void)
{
    strcpy(dir, "/tmp/ag_st_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ag_error_clear(&err);
}

static void teardown(void) { proc_remove_tree(dir); }

static const char *in_dir(const char *name) { return proc_path(dir, name); }

/* Number of entries in dir whose name contains ".tmp." */
static int tmp_files(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    closedir(d);
    return n;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "rb");
    ck_assert_ptr_nonnull(fp);
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(fread(b, 1, (size_t)sz, fp), (size_t)sz);
    fclose(fp);
    *n = (size_t)sz;
    return b;
}

static void spit(const char *path, const void *b, size_t n)
{
    FILE *fp = fopen(path, "wb");
    ck_assert_ptr_nonnull(fp);
    ck_assert_uint_eq(fwrite(b, 1, n, fp), n);
    ck_assert_int_eq(fclose(fp), 0);
}

#define TRUE_LEN (~0ULL)

/* A hand-made file: an 8-byte LE length (hlen, or TRUE_LEN for the header's true length), the
 * header, then `data_len` bytes 0x00,0x01,... */
static void write_raw(const char *path, const char *header, unsigned long long hlen, size_t data_len)
{
    size_t h = strlen(header);
    size_t n = 8 + h + data_len;
    unsigned char *b = malloc(n);
    ck_assert_ptr_nonnull(b);
    unsigned long long v = hlen == TRUE_LEN ? h : hlen;
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(v >> (8 * i));
    memcpy(b + 8, header, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (unsigned char)i;
    spit(path, b, n);
    free(b);
}

/* Loading `header` (+ data_len bytes) must fail with one line that names the file and
 * contains want1 and want2 (each may be NULL). */
static void expect_load_error(const char *header, unsigned long long hlen, size_t data_len,
                              const char *want1, const char *want2)
{
    const char *p = in_dir("bad.safetensors");
    write_raw(p, header, hlen, data_len);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f == NULL, "loaded a bad file: %s", header);
    ck_assert_msg(strstr(err.msg, p) != NULL, "error does not name the file: %s", err.msg);
    ck_assert_msg(strchr(err.msg, '\n') == NULL, "error is not one line: %s", err.msg);
    if (want1) ck_assert_msg(strstr(err.msg, want1), "expected '%s' in: %s", want1, err.msg);
    if (want2) ck_assert_msg(strstr(err.msg, want2), "expected '%s' in: %s", want2, err.msg);
}

/* Three tensors with awkward float values: -0, a subnormal, the largest float, 0.1f, ... */
static ag_real va[6], vb[4], vc[24];
static ag_st_tensor three[3];

static void make_three(void)
{
    static const float special[6] = { -0.0f, 1.4e-45f, 3.4028235e38f, 0.1f, -1.0f / 3.0f, 1e-38f };
    for (int i = 0; i < 6; i++) va[i] = (ag_real)special[i];
    for (int i = 0; i < 4; i++) vb[i] = (ag_real)(float)(i * 0.37 - 1.1);
    for (int i = 0; i < 24; i++) vc[i] = (ag_real)(float)(1.0 / (i + 1));
    three[0] = (ag_st_tensor){ "w", 2, { 2, 3 }, va };
    three[1] = (ag_st_tensor){ "blocks.0.ln1.bias", 1, { 4 }, vb };
    three[2] = (ag_st_tensor){ "a.first.alphabetically", 4, { 1, 2, 3, 4 }, vc };
}

/* x and y hold the same F32 values bit for bit (the float build), or the same doubles. */
static void assert_same(const ag_real *x, const ag_real *y, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(memcmp(&x[i], &y[i], sizeof x[i]) == 0, "element %zu: %.9g != %.9g", i,
                      (double)x[i], (double)y[i]);
}

// ---------------------------------------------------------------------------------------------
// round trips

START_TEST(roundtrip_exact)
{
    make_three();
    const char *p = in_dir("model.safetensors");
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, NULL, fresh()), AG_OK);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_int_eq(ag_st_count(f), 3);
    for (int i = 0; i < 3; i++) ck_assert_str_eq(ag_st_name(f, i), three[i].name);   /* file order */
    ck_assert_ptr_null(ag_st_name(f, 3));
    ck_assert_ptr_null(ag_st_name(f, -1));
    ck_assert_ptr_null(ag_st_meta_get(f, "format"));
    ag_real got[24];
    for (int i = 0; i < 3; i++) {
        memset(got, 0x55, sizeof got);
        ck_assert_int_eq(ag_st_read(f, three[i].name, got, three[i].ndim, three[i].shape, fresh()),
                         AG_OK);
        size_t n = 1;
        for (int d = 0; d < three[i].ndim; d++) n *= (size_t)three[i].shape[d];
        assert_same(got, three[i].data, n);
    }
    ag_st_free(f);
    ag_st_free(NULL);
    ck_assert_int_eq(tmp_files(), 0);
}
END_TEST

START_TEST(layout_on_disk)
{
    /* data aligned to 8, offsets contiguous in the given order, F32 little-endian */
    make_three();
    const char *p = in_dir("m.safetensors");
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, NULL, fresh()), AG_OK);
    size_t n;
    unsigned char *b = slurp(p, &n);
    unsigned long long N = 0;
    for (int i = 7; i >= 0; i--) N = N << 8 | b[i];
    ck_assert_uint_eq(N % 8, 0);
    ck_assert_uint_eq(n, 8 + N + 4 * (6 + 4 + 24));
    char *h = strndup((char *)b + 8, N);
    ck_assert_ptr_nonnull(strstr(h, "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}"));
    ck_assert_ptr_nonnull(strstr(h, "\"data_offsets\":[24,40]"));
    ck_assert_ptr_nonnull(strstr(h, "\"data_offsets\":[40,136]"));
    ck_assert(strstr(h, "\"w\"") < strstr(h, "\"blocks.0.ln1.bias\""));
    ck_assert(strstr(h, "\"blocks.0.ln1.bias\"") < strstr(h, "\"a.first.alphabetically\""));
    free(h);
    /* va[3] = 0.1f = 0x3DCCCCCD, stored at data offset 12 as CD CC CC 3D */
    const unsigned char *d = b + 8 + N + 12;
    ck_assert(d[0] == 0xCD && d[1] == 0xCC && d[2] == 0xCC && d[3] == 0x3D);
    free(b);
}
END_TEST

START_TEST(metadata_roundtrip)
{
    make_three();
    const ag_st_meta meta[] = {
        { "format", "char_lm-1" },
        { "config", "{\"n_layer\": 2, \"name\": \"tiny \\\"quoted\\\"\"}" },
        { "vocab", "[10,32,24202,26376]" },
        { "note", "床前明月光" },
        { "empty", "" },
    };
    const char *p = in_dir("m.safetensors");
    ck_assert_int_eq(ag_st_save(p, three, 1, meta, 5, NULL, fresh()), AG_OK);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    for (int i = 0; i < 5; i++) ck_assert_str_eq(ag_st_meta_get(f, meta[i].key), meta[i].value);
    ck_assert_ptr_null(ag_st_meta_get(f, "missing"));
    ck_assert_int_eq(ag_st_count(f), 1);   /* __metadata__ is not a tensor */
    ag_st_free(f);

    /* metadata only, no tensors */
    ck_assert_int_eq(ag_st_save(p, NULL, 0, meta, 1, NULL, fresh()), AG_OK);
    f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_int_eq(ag_st_count(f), 0);
    ck_assert_str_eq(ag_st_meta_get(f, "format"), "char_lm-1");
    ag_st_free(f);
}
END_TEST

/* What a save's step hook saw: the steps in order, each with its path. */
typedef struct {
    const char *path;  /* the file saved */
    char steps[256];   /* "create,write,fsync,rename,fsync dir," */
    int tmp_named, path_named, dir_named;
} hook_log;

static void log_step(const char *step, const char *path, void *user)
{
    hook_log *h = user;
    strcat(h->steps, step);
    strcat(h->steps, ",");
    h->tmp_named += strstr(path, ".tmp.") != NULL;
    h->path_named += strcmp(path, h->path) == 0;
    h->dir_named += strcmp(path, dir) == 0;
}

/* The hook is an argument of the one save (no state in the library): called before each step
 * that changes the disk, with its user pointer; a save without it calls nothing. */
START_TEST(save_step_hook)
{
    make_three();
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", in_dir("h.safetensors"));
    hook_log h = {.path = p};
    const ag_st_save_opts o = {.step_hook = log_step, .user = &h};
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, &o, fresh()), AG_OK);
    ck_assert_str_eq(h.steps, "create,write,fsync,rename,fsync dir,");
    ck_assert_int_eq(h.tmp_named, 3);
    ck_assert_int_eq(h.path_named, 1);
    ck_assert_int_eq(h.dir_named, 1);
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, NULL, fresh()), AG_OK);
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, &(ag_st_save_opts){0}, fresh()), AG_OK);
    ck_assert_str_eq(h.steps, "create,write,fsync,rename,fsync dir,");
}
END_TEST

START_TEST(reads_reference_layout)
{
    /* as huggingface/safetensors writes it: __metadata__ first, names not sorted by us, padding */
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]},"
                      "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[12,16]},"
                      "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[16,16]}}   ";
    const char *p = in_dir("ref.safetensors");
    write_raw(p, hdr, TRUE_LEN, 16);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_int_eq(ag_st_count(f), 4);
    ck_assert_str_eq(ag_st_name(f, 0), "b");
    ck_assert_str_eq(ag_st_name(f, 1), "a");
    ck_assert_str_eq(ag_st_meta_get(f, "format"), "pt");
    /* bytes 04 05 06 07 as a LE float = 0x07060504 */
    ag_real a[2];
    ck_assert_int_eq(ag_st_read(f, "a", a, 1, (int[]){ 2 }, fresh()), AG_OK);
    uint32_t u = 0x07060504u;
    float want;
    memcpy(&want, &u, 4);
    ck_assert(a[0] == (ag_real)want);
    ag_real s;
    ck_assert_int_eq(ag_st_read(f, "s", &s, 0, NULL, fresh()), AG_OK);
    ck_assert_int_eq(ag_st_read(f, "z", NULL, 2, (int[]){ 0, 3 }, fresh()), AG_OK);
    ag_st_free(f);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// reading: errors

START_TEST(read_shape_mismatch_and_missing)
{
    make_three();
    const char *p = in_dir("m.safetensors");
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, NULL, fresh()), AG_OK);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ag_real got[6];
    char want[600];
    ck_assert_int_eq(ag_st_read(f, "w", got, 2, (int[]){ 3, 2 }, fresh()), AG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: tensor 'w' has shape [2,3], expected [3,2]", p);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(ag_st_read(f, "w", got, 1, (int[]){ 6 }, fresh()), AG_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(err.msg, "has shape [2,3], expected [6]"));
    ck_assert_int_eq(ag_st_read(f, "x", got, 1, (int[]){ 6 }, fresh()), AG_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: no tensor 'x'", p);
    ck_assert_str_eq(err.msg, want);
    ag_st_free(f);
}
END_TEST

START_TEST(truncated_at_every_length)
{
    make_three();
    const ag_st_meta meta[] = { { "format", "char_lm-1" } };
    const char *p = in_dir("m.safetensors");
    ck_assert_int_eq(ag_st_save(p, three, 3, meta, 1, NULL, fresh()), AG_OK);
    size_t n;
    unsigned char *b = slurp(p, &n);
    const char *q = in_dir("cut.safetensors");
    for (size_t len = 0; len < n; len++) {
        spit(q, b, len);
        ag_st_file *f = ag_st_load(q, fresh());
        ck_assert_msg(f == NULL, "a file cut to %zu of %zu bytes loaded", len, n);
        ck_assert_msg(strstr(err.msg, q) == err.msg, "len %zu: error does not start with the path: %s", len,
                      err.msg);
    }
    /* the uncut file still loads */
    spit(q, b, n);
    ag_st_file *f = ag_st_load(q, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ag_st_free(f);
    free(b);
}
END_TEST

/* A header entry of dtype F32 with the given name, shape JSON and data_offsets JSON. */
#define ENTRY(name, shape, offs) \
    "\"" name "\":{\"dtype\":\"F32\",\"shape\":" shape ",\"data_offsets\":" offs "}"
#define A_OK ENTRY("a", "[2]", "[0,8]")

/* One malformed header per row (with its true length), the data bytes after it, and two
 * strings the message must contain. */
static const struct {
    const char *header;
    size_t data_len;
    const char *want1, *want2;
} bad_header[] = {
    /* not JSON, not an object, not an entry */
    { "{" A_OK, 8, "not valid JSON", NULL },
    { "{\"a\":{\"dtype\":\"F32\",,}}", 8, "not valid JSON", NULL },
    { "", 8, "not valid JSON", NULL },
    { "[1,2]", 8, "not a JSON object", NULL },
    { "{\"a\":[0,8]}", 8, "'a'", "not an object" },
    { "{" A_OK "," A_OK "}", 8, "not valid JSON", "duplicate" },
    /* dtype */
    { "{\"a\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, "'a'", "dtype F16" },
    { "{\"a\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[0,8]}}", 8, "BF16", "only F32" },
    { "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "'a'", "dtype" },
    /* shapes */
    { "{" ENTRY("a", "[-2]", "[0,8]") "}", 8, "'a'", "shape" },
    { "{" ENTRY("a", "[2.0]", "[0,8]") "}", 8, "'a'", "shape" },
    { "{" ENTRY("a", "[1,1,1,1,2]", "[0,8]") "}", 8, "'a'", "shape" },
    { "{" ENTRY("a", "\"2\"", "[0,8]") "}", 8, "'a'", "shape" },
    { "{" ENTRY("a", "[3]", "[0,8]") "}", 8, "'a'", "needs 12 bytes" },
    { "{" ENTRY("a", "[2147483647,2147483647,2147483647,2147483647]", "[0,8]") "}", 8, "'a'", "shape" },
    /* offsets */
    { "{" ENTRY("a", "[4]", "[0,16]") "}", 8, "'a'", "outside the data area of 8 bytes" },
    { "{" ENTRY("a", "[2]", "[8,0]") "}", 8, "'a'", "begin > end" },
    { "{" ENTRY("a", "[2]", "[-8,0]") "}", 8, "'a'", "data_offsets" },
    { "{" ENTRY("a", "[2]", "[0]") "}", 8, "'a'", "data_offsets" },
    { "{" ENTRY("a", "[2]", "[0,18446744073709551615]") "}", 8, "too big", NULL },
    { "{" A_OK "," ENTRY("b", "[2]", "[4,12]") "}", 12, "overlap", "'b'" },
    { "{" ENTRY("b", "[3]", "[4,16]") "," ENTRY("a", "[4]", "[0,16]") "}", 16, "overlap", NULL },
    /* metadata */
    { "{\"__metadata__\":{\"n\":3}}", 0, "__metadata__", "'n' is not a string" },
    { "{\"__metadata__\":[\"x\"]}", 0, "__metadata__", "not an object" },
    { "{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", 0, "not valid JSON", "duplicate object key 'k'" },
    { "{\"__metadata__\":{},\"\\u005f_metadata__\":{}}", 0, "not valid JSON", "duplicate" },
    /* the outline the loader walks itself (issue 19): as strict as jansson */
    { "{" A_OK ",}", 8, "not valid JSON", "a string (a key) expected" },
    { "{" A_OK "} x", 8, "not valid JSON", "end of file expected" },
    { "{" A_OK " " A_OK "}", 8, "not valid JSON", "',' or '}' expected" },
    { "{\"a\" " A_OK "}", 8, "not valid JSON", "':' expected" },
    { "{\"a\":}", 8, "not valid JSON", "value expected" },
    { "{\"a\":{\"dtype\":\"F32\"", 8, "not valid JSON", "unterminated" },
    { "{\"a\":{\"dtype\":\"F32}}", 8, "not valid JSON", "unterminated" },
    { "{\"\\x\":{}}", 8, "not valid JSON", NULL },
    { "{\"\xff\":{}}", 8, "not valid JSON", NULL },
    { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"dtype\":\"F32\"}}", 8, "not valid JSON",
      "duplicate" },
    { "{\"__metadata__\":{\"k\":\"\\ud800\"}}", 0, "not valid JSON", NULL },
};

START_TEST(bad_header_rows)
{
    expect_load_error(bad_header[_i].header, TRUE_LEN, bad_header[_i].data_len, bad_header[_i].want1,
                      bad_header[_i].want2);
}
END_TEST

START_TEST(bad_lengths_and_files)
{
    /* header length larger than the file */
    const char *p = in_dir("bad.safetensors");
    write_raw(p, "{}", 999999, 0);
    char want[600];
    snprintf(want, sizeof want, "%s: header length 999999 exceeds file size 10", p);
    ck_assert_ptr_null(ag_st_load(p, fresh()));
    ck_assert_str_eq(err.msg, want);
    expect_load_error("{}", 0xFFFFFFFFFFFFFFF0ULL, 8, "exceeds file size", NULL);   /* no wrap-around */
    expect_load_error("", 0, 0, "not valid JSON", NULL);                            /* N = 0 */
    /* too short for the length field; missing; a directory */
    spit(in_dir("short.safetensors"), "\x10\0\0\0\0", 5);
    ck_assert_ptr_null(ag_st_load(in_dir("short.safetensors"), fresh()));
    ck_assert_ptr_nonnull(strstr(err.msg, "short.safetensors: file is 5 bytes, too short"));
    ck_assert_ptr_null(ag_st_load(in_dir("nope.safetensors"), fresh()));
    ck_assert_ptr_nonnull(strstr(err.msg, "nope.safetensors: cannot open: No such file"));
    ck_assert_ptr_null(ag_st_load(dir, fresh()));
    ck_assert_ptr_nonnull(strstr(err.msg, "directory"));
    ck_assert_ptr_null(ag_st_load(NULL, NULL));   /* no ag_error: still no crash */
}
END_TEST

START_TEST(good_edge_headers)
{
    /* a zero-size tensor may sit anywhere; gaps are tolerated; unknown entry keys ignored */
    const char *p = in_dir("ok.safetensors");
    write_raw(p, "{" ENTRY("e", "[0]", "[4,4]") ",\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
                 "\"data_offsets\":[0,4],\"x\":1}," ENTRY("b", "[1]", "[8,12]") "}", TRUE_LEN, 12);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_int_eq(ag_st_count(f), 3);
    ag_st_free(f);
    /* escapes in keys and values are decoded (the metadata's own key too), white space anywhere */
    write_raw(p, " {\"\\u00e9\\n\" : {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]} ,\r\n"
                 "\"\\u005f_metadata__\":{\"k\\\"\":\"a\\u00e9\\ud83d\\ude00\\\\\",\"\":\"\"}\t} ", TRUE_LEN, 4);
    f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_str_eq(ag_st_name(f, 0), "\xc3\xa9\n");
    ck_assert_str_eq(ag_st_meta_get(f, "k\""), "a\xc3\xa9\xf0\x9f\x98\x80\\");
    ck_assert_str_eq(ag_st_meta_get(f, ""), "");
    ck_assert_ptr_null(ag_st_meta_get(f, "__metadata__"));
    ag_real one;
    ck_assert_int_eq(ag_st_read(f, "\xc3\xa9\n", &one, 1, (int[]){1}, fresh()), AG_OK);
    ag_st_free(f);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// writing: errors and atomicity

START_TEST(save_bad_arguments)
{
    make_three();
    const char *p = in_dir("m.safetensors");
    ag_real one = 1;
    ag_st_tensor bad[] = {
        { "nodata", 1, { 3 }, NULL },
        { "neg", 2, { 2, -1 }, &one },
        { "dims", 5, { 1, 1, 1, 1 }, &one },
        { NULL, 1, { 1 }, &one },
        { "__metadata__", 1, { 1 }, &one },
        { "big", 4, { 65536, 65536, 65536, 65536 }, &one },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ag_st_tensor two[2] = { three[0], bad[i] };
        ck_assert_int_eq(ag_st_save(p, two, 2, NULL, 0, NULL, fresh()), AG_ERR_ARG);
        ck_assert_msg(strstr(err.msg, p) == err.msg, "case %zu: %s", i, err.msg);
        ck_assert_int_eq(access(p, F_OK), -1);   /* nothing created */
        ck_assert_int_eq(tmp_files(), 0);
    }
    ag_st_tensor dup[2] = { three[0], three[0] };
    ck_assert_int_eq(ag_st_save(p, dup, 2, NULL, 0, NULL, fresh()), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "'w' appears twice"));
    const ag_st_meta m2[] = { { "k", "a" }, { "k", "b" } };
    ck_assert_int_eq(ag_st_save(p, three, 1, m2, 2, NULL, fresh()), AG_ERR_ARG);
    ck_assert_ptr_nonnull(strstr(err.msg, "'k' appears twice"));
    const ag_st_meta m1[] = { { "k", NULL } };
    ck_assert_int_eq(ag_st_save(p, three, 1, m1, 1, NULL, fresh()), AG_ERR_ARG);
    const ag_st_meta bad_utf8[] = { { "k", "\xC0\xAF" } };
    ck_assert_int_eq(ag_st_save(p, three, 1, bad_utf8, 1, NULL, fresh()), AG_ERR_ARG);
    ck_assert_int_eq(ag_st_save(NULL, three, 1, NULL, 0, NULL, fresh()), AG_ERR_ARG);
    ck_assert_int_eq(access(p, F_OK), -1);
    ck_assert_int_eq(tmp_files(), 0);
}
END_TEST

/* What ag_st_load would refuse is never written: a file past 4 GiB in all (the data alone
 * fits, the 8-byte length and the header tip it over), a header past 100 MB. The data pointer
 * is never read: the refusal comes before a byte is written. */
START_TEST(save_refuses_what_load_refuses)
{
    const char *p = in_dir("m.safetensors");
    ag_real one = 1;
    ag_st_tensor huge = { "w", 1, { (1 << 30) - 1 }, &one };   /* 4 GiB - 4 bytes of F32 */
    ck_assert_int_eq(ag_st_save(p, &huge, 1, NULL, 0, NULL, fresh()), AG_ERR_ARG);
    ck_assert_msg(strstr(err.msg, "more than the 4 GiB a reader accepts") != NULL, "%s", err.msg);
    size_t n = 100 * 1000 * 1000 + 1;
    char *big = malloc(n + 1);
    ck_assert_ptr_nonnull(big);
    memset(big, 'a', n);
    big[n] = '\0';
    const ag_st_meta m[] = { { "k", big } };
    ck_assert_int_eq(ag_st_save(p, &huge, 0, m, 1, NULL, fresh()), AG_ERR_ARG);
    free(big);
    ck_assert_msg(strstr(err.msg, "header would be") != NULL, "%s", err.msg);
    ck_assert_int_eq(access(p, F_OK), -1);
    ck_assert_int_eq(tmp_files(), 0);
}
END_TEST

START_TEST(save_missing_directory)
{
    make_three();
    const char *p = in_dir("no/such/dir/m.safetensors");
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, NULL, fresh()), AG_ERR_IO);
    ck_assert_msg(strstr(err.msg, p) == err.msg && strstr(err.msg, "No such file"), "%s", err.msg);
    ck_assert_int_eq(access(in_dir("no"), F_OK), -1);
    ck_assert_int_eq(tmp_files(), 0);
}
END_TEST

/* Saves A, then fails to save B over it (a bad tensor): A must load unchanged. */
START_TEST(failed_save_keeps_old_file)
{
    make_three();
    const char *p = in_dir("m.safetensors");
    const ag_st_meta meta[] = { { "format", "A" } };
    ck_assert_int_eq(ag_st_save(p, three, 3, meta, 1, NULL, fresh()), AG_OK);
    size_t n0;
    unsigned char *before = slurp(p, &n0);
    ag_real zeros[6] = { 0 };
    ag_st_tensor b[2] = { { "w", 2, { 2, 3 }, zeros }, { "bad", 1, { 5 }, NULL } };
    const ag_st_meta mb[] = { { "format", "B" } };
    ck_assert_int_ne(ag_st_save(p, b, 2, mb, 1, NULL, fresh()), AG_OK);
    size_t n1;
    unsigned char *after = slurp(p, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert(memcmp(before, after, n0) == 0);
    ck_assert_int_eq(tmp_files(), 0);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_str_eq(ag_st_meta_get(f, "format"), "A");
    ag_real got[6];
    ck_assert_int_eq(ag_st_read(f, "w", got, 2, (int[]){ 2, 3 }, fresh()), AG_OK);
    assert_same(got, va, 6);
    ag_st_free(f);
    free(before);
    free(after);
}
END_TEST

/* A real I/O failure part-way through the data (the file size limit, which binds root too): in
 * a child process, the write of a 4 MB file under a 64 KiB RLIMIT_FSIZE fails; the old file
 * stays and the temporary file is removed. */
START_TEST(write_failure_midway_is_atomic)
{
    make_three();
    const char *p = in_dir("m.safetensors");
    ck_assert_int_eq(ag_st_save(p, three, 3, NULL, 0, NULL, fresh()), AG_OK);
    size_t n0;
    unsigned char *before = slurp(p, &n0);
    enum { BIG = 1 << 20 };
    ag_real *big = calloc(BIG, sizeof *big);
    ck_assert_ptr_nonnull(big);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = { 1 << 16, 1 << 16 };
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0) _exit(2);
        ag_st_tensor t[1] = { { "big", 1, { BIG }, big } };
        ag_error e = { 0 };
        ag_status st = ag_st_save(p, t, 1, NULL, 0, NULL, &e);
        _exit(st == AG_ERR_IO && e.status == AG_ERR_IO && strstr(e.msg, "write failed") ? 0 : 1);
    }
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert(WIFEXITED(status));
    ck_assert_int_eq(WEXITSTATUS(status), 0);
    size_t n1;
    unsigned char *after = slurp(p, &n1);
    ck_assert_uint_eq(n0, n1);
    ck_assert(memcmp(before, after, n0) == 0);
    ck_assert_int_eq(tmp_files(), 0);
    /* and without the limit the same save works and replaces the file */
    ag_st_tensor t[1] = { { "big", 1, { BIG }, big } };
    ck_assert_int_eq(ag_st_save(p, t, 1, NULL, 0, NULL, fresh()), AG_OK);
    ag_st_file *f = ag_st_load(p, fresh());
    ck_assert_msg(f != NULL, "%s", err.msg);
    ck_assert_str_eq(ag_st_name(f, 0), "big");
    ag_st_free(f);
    free(big);
    free(before);
    free(after);
}
END_TEST

// ---------------------------------------------------------------------------------------------
// tests/check_safetensors.py on a model-like file (skipped without python3 or the script)

/* Writes MODEL.md's parameter list for V=5, C=8, n_layer=2, T=4 (all zeros) to path,
 * leaving out the tensor called `skip` (or none). */
static void write_model_like(const char *path, const char *skip)
{
    enum { V = 5, C = 8, L = 2, T = 4, MAXT = 6 + 16 * L };
    static ag_real zeros[4 * C * C];
    static char names[MAXT][64];
    ag_st_tensor t[MAXT];
    int n = 0;
#define ADD(nm, nd, d0, d1)                                                               \
    do {                                                                                  \
        ck_assert_int_lt(n, MAXT);                                                        \
        snprintf(names[n], sizeof names[n], "%s", nm);                                    \
        if (!skip || strcmp(names[n], skip)) {                                            \
            t[n] = (ag_st_tensor){ names[n], nd, { d0, d1 }, zeros };                     \
            n++;                                                                          \
        }                                                                                 \
    } while (0)
    char nm[64];
    ADD("tok_emb.weight", 2, V, C);
    ADD("pos_emb.weight", 2, T, C);
    for (int i = 0; i < L; i++) {
        static const char *lin[] = { "w_q", "w_k", "w_v", "w_o" };
        snprintf(nm, sizeof nm, "blocks.%d.ln1.weight", i); ADD(nm, 1, C, 0);
        snprintf(nm, sizeof nm, "blocks.%d.ln1.bias", i); ADD(nm, 1, C, 0);
        for (int j = 0; j < 4; j++) {
            snprintf(nm, sizeof nm, "blocks.%d.attn.%s.weight", i, lin[j]); ADD(nm, 2, C, C);
            snprintf(nm, sizeof nm, "blocks.%d.attn.%s.bias", i, lin[j]); ADD(nm, 1, C, 0);
        }
        snprintf(nm, sizeof nm, "blocks.%d.ln2.weight", i); ADD(nm, 1, C, 0);
        snprintf(nm, sizeof nm, "blocks.%d.ln2.bias", i); ADD(nm, 1, C, 0);
        snprintf(nm, sizeof nm, "blocks.%d.mlp.fc1.weight", i); ADD(nm, 2, 4 * C, C);
        snprintf(nm, sizeof nm, "blocks.%d.mlp.fc1.bias", i); ADD(nm, 1, 4 * C, 0);
        snprintf(nm, sizeof nm, "blocks.%d.mlp.fc2.weight", i); ADD(nm, 2, C, 4 * C);
        snprintf(nm, sizeof nm, "blocks.%d.mlp.fc2.bias", i); ADD(nm, 1, C, 0);
    }
    ADD("ln_f.weight", 1, C, 0);
    ADD("ln_f.bias", 1, C, 0);
    ADD("lm_head.weight", 2, V, C);
    ADD("lm_head.bias", 1, V, 0);
#undef ADD
    const ag_st_meta meta[] = {
        { "format", "char_lm-1" },
        { "config", "{\"vocab_size\":5,\"n_layer\":2,\"n_head\":2,\"n_embd\":8,\"block_size\":4,\"lr\":0.001}" },
        { "vocab", "[10,32,97,98,24202]" },
    };
    ck_assert_int_eq(ag_st_save(path, t, n, meta, 3, NULL, fresh()), AG_OK);
}

static int run_checker(const char *path)
{
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, "python3 tests/check_safetensors.py '%s' >/dev/null 2>&1", path);
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

START_TEST(python_checker)
{
    if (access("tests/check_safetensors.py", R_OK) != 0 || system("python3 -c '' >/dev/null 2>&1") != 0)
        return;   /* not run from the repository root, or no python3 */
    const char *p = in_dir("model.safetensors");
    write_model_like(p, NULL);
    ck_assert_int_eq(run_checker(p), 0);
    write_model_like(p, "blocks.1.mlp.fc1.bias");
    ck_assert_int_ne(run_checker(p), 0);
    write_raw(p, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", TRUE_LEN, 8);
    ck_assert_int_ne(run_checker(p), 0);
}
END_TEST


// ---------------------------------------------------------------------------------------------
// hostile headers (issue 19): the memory a header costs is a small multiple of its size

/* The shapes that cost 2 GB for a 98 MB header while it was parsed whole, here about 4 MB: a
 * header prefix, an item repeated (%d: its index) and joined by commas, a suffix. */
static const struct {
    const char *what, *prefix, *item, *suffix;
    const char *refused;   /* the error, or NULL: the file loads */
} hostile[] = {
    { "a shape array of 2 million zeros", "{\"w\":{\"dtype\":\"F32\",\"shape\":[", "0", "],\"data_offsets\":[0,0]}}",
      "its header entry is" },
    { "junk in __metadata__", "{\"__metadata__\":{\"format\":\"x\",\"junk\":[", "0", "]}}",
      "'junk' is not a string" },
    { "250 thousand metadata keys", "{\"__metadata__\":{", "\"%010d\":\"\"", "}}", NULL },
    { "60 thousand empty tensors", "{", "\"t.%016d\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}", "}",
      NULL },
};

static void *counted_malloc(size_t n) { return malloc(n); }   /* the --wrap'ed, counting malloc */
static void counted_free(void *p) { free(p); }

/* prefix, then item (a format of its index) repeated up to about `bytes` and joined by commas,
 * then suffix (malloc'd); *items: how many. */
static char *repeat_header(const char *prefix, const char *item, const char *suffix, size_t bytes, int *items)
{
    char *h = malloc(bytes + 256), one[128];
    ck_assert_ptr_nonnull(h);
    size_t n = (size_t)sprintf(h, "%s", prefix);
    for (*items = 0; n < bytes; ++*items) {
        snprintf(one, sizeof one, item, *items);
        n += (size_t)sprintf(h + n, *items ? ",%s" : "%s", one);
    }
    strcpy(h + n, suffix);
    return h;
}

START_TEST(hostile_header_memory)
{
    int items = 0;
    char *h = repeat_header(hostile[_i].prefix, hostile[_i].item, hostile[_i].suffix, 4 << 20, &items);
    const char *p = in_dir("hostile.safetensors");
    write_raw(p, h, TRUE_LEN, 0);
    size_t file = strlen(h) + 8;
    free(h);
    json_malloc_t was_malloc;
    json_free_t was_free;
    json_get_alloc_funcs(&was_malloc, &was_free);
    json_set_alloc_funcs(counted_malloc, counted_free);   /* jansson's memory counts too */
    long long peak;
    alloc_count_start();
    ag_st_file *f = ag_st_load(p, fresh());
    alloc_count_stop(&peak);
    json_set_alloc_funcs(was_malloc, was_free);
    ck_assert_msg(peak <= 4 * (long long)file, "%s: a %zu-byte file took %lld bytes to load (%.1fx)", hostile[_i].what,
                  file, peak, (double)peak / (double)file);
    if (hostile[_i].refused) {
        ck_assert_msg(!f && strstr(err.msg, hostile[_i].refused), "%s: %s", hostile[_i].what, f ? "loaded" : err.msg);
    } else {
        ck_assert_msg(f != NULL, "%s: %s", hostile[_i].what, err.msg);
        char last[32];
        snprintf(last, sizeof last, "%010d", items - 1);
        if (strstr(hostile[_i].prefix, "__metadata__")) ck_assert_str_eq(ag_st_meta_get(f, last), "");
        else ck_assert_int_eq(ag_st_count(f), items);
    }
    ag_st_free(f);
}
END_TEST

// ---------------------------------------------------------------------------------------------

Suite *safetensors_suite(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("roundtrip");
    tcase_add_checked_fixture(tc, setup, teardown);
    ADD_TESTS(tc, roundtrip_exact, layout_on_disk, metadata_roundtrip, reads_reference_layout,
                  save_step_hook);
    suite_add_tcase(s, tc);

    tc = tcase_create("read_errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    ADD_TESTS(tc, read_shape_mismatch_and_missing, truncated_at_every_length);
    tcase_add_loop_test(tc, bad_header_rows, 0, (int)(sizeof bad_header / sizeof bad_header[0]));
    ADD_TESTS(tc, bad_lengths_and_files, good_edge_headers);
    suite_add_tcase(s, tc);

    tc = tcase_create("write_errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    ADD_TESTS(tc, save_bad_arguments, save_missing_directory, failed_save_keeps_old_file,
                  write_failure_midway_is_atomic);
    suite_add_tcase(s, tc);
    return s;
}

/* The size limits (a 100 MB header refused before it is written, a hostile header's memory) and
 * the independent Python reader: the same bytes in the float and the double build, and most of
 * the suite's CPU, so `make test` runs them once, on float, and `make check` on double too
 * (the Makefile's ONCE_SUITES). */
Suite *safetensors_limits_suite(void)
{
    Suite *s = suite_create("safetensors_limits");
    TCase *tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, setup, teardown);
    ADD_TESTS(tc, save_refuses_what_load_refuses);
    tcase_add_loop_test(tc, hostile_header_memory, 0, (int)(sizeof hostile / sizeof hostile[0]));
    suite_add_tcase(s, tc);

    tc = tcase_create("python_checker");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, python_checker);
    suite_add_tcase(s, tc);
    return s;
}
