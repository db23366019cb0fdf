/* fuzz_safetensors.c -- libFuzzer target for the checkpoint loader (src/io/safetensors.c).
 *
 * Each input is the bytes of a would-be .safetensors file. It is written to a memfd (no disk
 * I/O, no fsync) and loaded through its /proc/self/fd path with ag_st_load, exactly as char_lm
 * loads a checkpoint. The properties checked, beyond "no crash, no sanitizer report":
 *   - a refused file gets a one-line error that names the file;
 *   - an accepted file lets every tensor be read back with ag_st_read at the shape its header
 *     gives (the loader promised that every offset is inside the file), and refuses a wrong
 *     shape and an unknown name;
 *   - names and metadata values are NUL-terminated strings (read through).
 * Any broken property ends in __builtin_trap(), which libFuzzer reports with a reproducer.
 *
 *   make fuzz FUZZ_SECONDS=60     (builds with clang -fsanitize=fuzzer,address,undefined)
 *   build/fuzz/fuzz_safetensors CRASH_FILE   (replays one input) */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "io/safetensors.h"

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "fuzz_safetensors: property failed: %s (line %d)\n", #cond, \
                    __LINE__);                                                          \
            __builtin_trap();                                                           \
        }                                                                               \
    } while (0)

static int fd = -1;
static char path[64];

/* The input as the content of the memfd. */
static void put_input(const uint8_t *data, size_t size)
{
    if (fd < 0) {
        fd = memfd_create("fuzz_safetensors", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) abort();
    size_t off = 0;
    while (off < size) {
        ssize_t w = pwrite(fd, data + off, size - off, (off_t)off);
        if (w <= 0) abort();
        off += (size_t)w;
    }
}

static bool one_line_about(const char *err, const char *file)
{
    return err[0] && !strchr(err, '\n') && strncmp(err, file, strlen(file)) == 0;
}

/* Tensor `name` of the accepted file f (its header parsed as root, the input size bytes): it
 * reads back at the shape the header gives, every value written, and a wrong shape or rank is
 * refused with a one-line message. */
static void check_tensor(ag_st_file *f, json_t *root, const char *name, size_t size)
{
    json_t *e = json_object_get(root, name);
    CHECK(json_is_object(e));
    json_t *shape = json_object_get(e, "shape");
    CHECK(json_is_array(shape) && json_array_size(shape) <= AG_MAX_DIMS);
    int ndim = (int)json_array_size(shape), dims[AG_MAX_DIMS + 1] = {0};
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        json_int_t x = json_integer_value(json_array_get(shape, (size_t)d));
        CHECK(x >= 0 && x <= INT32_MAX);
        dims[d] = (int)x;
        numel *= (uint64_t)x;
        CHECK(numel <= size);   /* the data is in the file: numel * 4 bytes of it */
    }
    ag_real *buf = malloc((size_t)(numel ? numel : 1) * sizeof *buf);
    if (!buf) abort();
    ag_error e2 = { 0 };
    CHECK(ag_st_read(f, name, buf, ndim, dims, &e2) == AG_OK);
    volatile ag_real sink = 0;
    for (uint64_t j = 0; j < numel; j++) sink += buf[j] * 0;   /* every value was written */
    (void)sink;
    /* a wrong shape is refused, with a message */
    if (ndim > 0) {
        int wrong[AG_MAX_DIMS];
        memcpy(wrong, dims, sizeof wrong);
        wrong[0] = dims[0] == INT32_MAX ? 0 : dims[0] + 1;
        ag_error_clear(&e2);
        CHECK(ag_st_read(f, name, buf, ndim, wrong, &e2) == AG_ERR_FORMAT);
        CHECK(e2.status == AG_ERR_FORMAT && one_line_about(e2.msg, path));
    }
    if (ndim < AG_MAX_DIMS) {
        dims[ndim] = 1;
        ag_error_clear(&e2);
        CHECK(ag_st_read(f, name, buf, ndim + 1, dims, &e2) == AG_ERR_FORMAT);
    }
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    put_input(data, size);
    ag_error err = { 0 };
    ag_st_file *f = ag_st_load(path, &err);
    if (!f) {
        CHECK(err.status != AG_OK && one_line_about(err.msg, path));
        return 0;
    }
    /* the loader accepted it, so the header is a JSON object of hlen bytes at offset 8 */
    CHECK(size >= 8);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
    CHECK(hlen <= size - 8);
    json_t *root = json_loadb((const char *)data + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, NULL);
    CHECK(root && json_is_object(root));

    const char *keys[] = {"format", "config", "vocab", "iter", "__metadata__", ""};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        const char *v = ag_st_meta_get(f, keys[k]);
        if (v) (void)strlen(v);
    }
    int n = ag_st_count(f);
    CHECK(n >= 0);
    CHECK(ag_st_name(f, n) == NULL && ag_st_name(f, -1) == NULL);
    for (int i = 0; i < n; i++) {
        const char *name = ag_st_name(f, i);
        CHECK(name != NULL);
        check_tensor(f, root, name, size);
    }
    ag_error e3 = { 0 };
    if (!json_object_get(root, "no such tensor \x01"))
        CHECK(ag_st_read(f, "no such tensor \x01", NULL, 0, NULL, &e3) == AG_ERR_FORMAT);
    json_decref(root);
    ag_st_free(f);
    return 0;
}
