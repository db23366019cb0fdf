/* safetensors.c -- the safetensors reader and writer (see safetensors.h for the format).
 *
 * Layout of a file:
 *   bytes [0, 8)          N, the header length, a little-endian uint64
 *   bytes [8, 8+N)        the JSON header, padded with spaces so that the data starts at an
 *                         8-byte aligned offset (as huggingface/safetensors does)
 *   bytes [8+N, size)     the data area; each tensor's "data_offsets" [begin, end) count from
 *                         its start; values are little-endian IEEE floats (we use F32 only)
 *
 * Writing: the header is built with jansson in the caller's order, tensors get contiguous
 * offsets in that order, and the whole file goes to "<path>.tmp.<pid>" in the same directory
 * (O_CREAT | O_EXCL, after removing whatever had that name, so a planted symbolic link is
 * replaced, not followed): fwrite, fflush, fsync, fclose, rename over <path>, fsync of the
 * directory. Every return
 * value is checked; on a failure before the rename the temporary file is removed and an old
 * <path> is untouched.
 *
 * Reading: the file is opened without blocking (a FIFO must not hang the reader) and must be a
 * regular file; the whole file is read into memory, then every claim of the header is checked
 * against the bytes actually there before anything is trusted (a truncated or hostile file
 * gives an error, never a read out of bounds). The header is not parsed whole (a hostile one
 * would cost 20x its size): its outer object is walked here and jansson parses one tensor
 * entry at a time ("the header, walked" below), so loading takes at most about 4x the header's
 * size beyond the file itself. Names and metadata values are decoded in place in the file's
 * buffer and point into it.
 *
 * Byte order is handled explicitly (bytes assembled by shifts), so the code is correct on a
 * big-endian host too. Reference: https://github.com/huggingface/safetensors (README,
 * "Format"). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "safetensors.h"

#define ST_MAX_HEADER AG_ST_MAX_HEADER
#define ST_MAX_FILE AG_ST_MAX_FILE   /* we read the whole file */
#define ST_META_KEY "__metadata__"

// ---------------------------------------------------------------------------------------------
// helpers

static uint64_t get_u64le(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static void put_u64le(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static float get_f32le(const unsigned char *p)
{
    uint32_t u = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void put_f32le(unsigned char *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(u >> (8 * i));
}

/* "[2,3]" for messages; "[]" for a scalar. */
static void shape_str(char *buf, size_t n, int ndim, const int *shape)
{
    size_t k = 0;
    k += (size_t)snprintf(buf + k, n - k, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ",%d" : "%d", shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

/* numel of a shape, or false when a dim is negative or numel*4 overflows (or exceeds limit). */
static bool shape_bytes(int ndim, const int *shape, uint64_t limit, uint64_t *bytes)
{
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return false;
        if (shape[i] && n > limit / 4 / (uint64_t)shape[i]) return false;
        n *= (uint64_t)shape[i];
    }
    *bytes = n * 4;
    return true;
}

// ---------------------------------------------------------------------------------------------
// writer

/* The caller's hook (ag_st_save_opts), if any, before a step that changes the disk. */
static void step(const ag_st_save_opts *o, const char *what, const char *path)
{
    if (o && o->step_hook) o->step_hook(what, path, o->user);
}

/* A new file at tmp for writing: whatever has that name (a temporary file of a killed process
 * with our pid, a symbolic link) is removed first, so the file is always ours. */
static FILE *create_fresh(const char *tmp)
{
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST && unlink(tmp) == 0) fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return NULL;
    FILE *fp = fdopen(fd, "wb");
    if (!fp) {
        int e = errno;
        close(fd);
        unlink(tmp);
        errno = e;
    }
    return fp;
}

/* Why tensors[i] cannot be written at byte offset off (AG_ERR_ARG, message in err), or AG_OK
 * with its size in *bytes. root holds the tensors before it (for the duplicate check). */
static ag_status check_tensor(const char *path, const ag_st_tensor *tensors, int i, const json_t *root,
                              uint64_t off, uint64_t *bytes, ag_error *err)
{
    const ag_st_tensor *t = &tensors[i];
    if (!t->name || !t->name[0]) return ag_seterr(err, AG_ERR_ARG, "%s: tensor %d has no name", path, i);
    if (strcmp(t->name, ST_META_KEY) == 0)
        return ag_seterr(err, AG_ERR_ARG, "%s: '%s' is reserved and cannot name a tensor", path, ST_META_KEY);
    if (json_object_get(root, t->name))
        return ag_seterr(err, AG_ERR_ARG, "%s: tensor name '%s' appears twice", path, t->name);
    if (t->ndim < 0 || t->ndim > AG_MAX_DIMS)
        return ag_seterr(err, AG_ERR_ARG, "%s: tensor '%s' has %d dims (0..%d allowed)", path, t->name, t->ndim,
                         AG_MAX_DIMS);
    if (!shape_bytes(t->ndim, t->shape, ST_MAX_FILE, bytes)) {
        char sb[64];
        shape_str(sb, sizeof sb, t->ndim, t->shape);
        return ag_seterr(err, AG_ERR_ARG, "%s: tensor '%s' has a bad shape %s", path, t->name, sb);
    }
    if (!t->data && *bytes > 0) return ag_seterr(err, AG_ERR_ARG, "%s: tensor '%s' has no data", path, t->name);
    if (off + *bytes > ST_MAX_FILE)
        return ag_seterr(err, AG_ERR_ARG, "%s: tensors add up to more than 4 GiB", path);
    return AG_OK;
}

static ag_status header_nomem(const char *path, ag_error *err)
{
    return ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory building the header", path);
}

/* Adds t's entry to root: "name": {"dtype": "F32", "shape": [...], "data_offsets": [off, off+bytes]}. */
static ag_status add_tensor_entry(json_t *root, const char *path, const ag_st_tensor *t, uint64_t off,
                                  uint64_t bytes, ag_error *err)
{
    json_t *e = json_object(), *shape = json_array(), *offs = json_array();
    int bad = !e || !shape || !offs;
    for (int d = 0; d < t->ndim && !bad; d++) bad |= json_array_append_new(shape, json_integer(t->shape[d]));
    if (!bad) bad |= json_array_append_new(offs, json_integer((json_int_t)off));
    if (!bad) bad |= json_array_append_new(offs, json_integer((json_int_t)(off + bytes)));
    if (bad) {
        json_decref(e);
        json_decref(shape);
        json_decref(offs);
        return header_nomem(path, err);
    }
    /* each _set_new takes its value, also when it fails */
    bad = json_object_set_new(e, "dtype", json_string("F32"));
    bad |= json_object_set_new(e, "shape", shape);
    bad |= json_object_set_new(e, "data_offsets", offs);
    if (json_object_set_new(root, t->name, e) || bad)
        /* json_string refuses a name that is not valid UTF-8, so this is not only OOM */
        return ag_seterr(err, AG_ERR_ARG, "%s: cannot put tensor '%s' in the header (name not UTF-8?)", path,
                         t->name);
    return AG_OK;
}

/* Adds "__metadata__": {"key": "value", ...} to root (after the tensors: jansson keeps order). */
static ag_status add_metadata(json_t *root, const char *path, const ag_st_meta *meta, int n_meta, ag_error *err)
{
    json_t *md = json_object();
    if (!md) return header_nomem(path, err);
    ag_status s = AG_OK;
    for (int i = 0; i < n_meta && s == AG_OK; i++) {
        if (!meta[i].key || !meta[i].value)
            s = ag_seterr(err, AG_ERR_ARG, "%s: metadata entry %d has no key or no value", path, i);
        else if (json_object_get(md, meta[i].key))
            s = ag_seterr(err, AG_ERR_ARG, "%s: metadata key '%s' appears twice", path, meta[i].key);
        else if (json_object_set_new(md, meta[i].key, json_string(meta[i].value)))
            s = ag_seterr(err, AG_ERR_ARG, "%s: metadata '%s' is not valid UTF-8", path, meta[i].key);
    }
    if (s != AG_OK) {
        json_decref(md);
        return s;
    }
    return json_object_set_new(root, ST_META_KEY, md) ? header_nomem(path, err) : AG_OK;
}

/* Refuses to write a file that ag_st_load would refuse: the header over ST_MAX_HEADER, or the
 * whole file (8 + padded header + data) over ST_MAX_FILE. */
static ag_status check_readable_size(const char *path, size_t hlen, uint64_t data_bytes, ag_error *err)
{
    uint64_t total = 8 + (hlen + 7) / 8 * 8 + data_bytes;
    if (hlen > ST_MAX_HEADER)
        return ag_seterr(err, AG_ERR_ARG, "%s: header would be %zu bytes, more than the %llu a reader accepts", path,
                         hlen, (unsigned long long)ST_MAX_HEADER);
    if (total > ST_MAX_FILE)
        return ag_seterr(err, AG_ERR_ARG, "%s: file would be %llu bytes, more than the 4 GiB a reader accepts",
                         path, (unsigned long long)total);
    return AG_OK;
}

/* The header JSON (unpadded) in *out, tensors laid out contiguously in the caller's order and
 * the metadata last; AG_ERR_ARG or AG_ERR_NOMEM with a message in err. */
static ag_status build_header(char **out, const char *path, const ag_st_tensor *tensors, int n,
                              const ag_st_meta *meta, int n_meta, ag_error *err)
{
    *out = NULL;
    json_t *root = json_object();
    if (!root) return header_nomem(path, err);
    ag_status s = AG_OK;
    uint64_t off = 0, bytes = 0;
    for (int i = 0; i < n && s == AG_OK; i++, off += bytes) {
        s = check_tensor(path, tensors, i, root, off, &bytes, err);
        if (s == AG_OK) s = add_tensor_entry(root, path, &tensors[i], off, bytes, err);
    }
    if (s == AG_OK && n_meta > 0) s = add_metadata(root, path, meta, n_meta, err);
    if (s == AG_OK && !(*out = json_dumps(root, JSON_COMPACT))) s = header_nomem(path, err);
    json_decref(root);
    if (s == AG_OK) s = check_readable_size(path, strlen(*out), off, err);
    if (s != AG_OK) {
        free(*out);
        *out = NULL;
    }
    return s;
}

/* fwrite that reports failure as false (errno set by the stream). */
static bool write_all(FILE *fp, const void *p, size_t n)
{
    return n == 0 || fwrite(p, 1, n, fp) == n;
}

/* Writes the data area: each tensor converted to F32 little-endian, in order. */
static bool write_data(FILE *fp, const ag_st_tensor *tensors, int n)
{
    enum { CHUNK = 4096 };
    unsigned char buf[CHUNK * 4];
    for (int i = 0; i < n; i++) {
        uint64_t bytes = 0;
        shape_bytes(tensors[i].ndim, tensors[i].shape, ST_MAX_FILE, &bytes);  /* checked before */
        size_t numel = (size_t)(bytes / 4);
        for (size_t j = 0; j < numel; j += CHUNK) {
            size_t m = numel - j < CHUNK ? numel - j : CHUNK;
            for (size_t k = 0; k < m; k++) put_f32le(buf + 4 * k, (float)tensors[i].data[j + k]);
            if (!write_all(fp, buf, 4 * m)) return false;
        }
    }
    return true;
}

/* The directory part of path ("." when there is none), malloc'd; NULL on OOM. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);   /* "/x" -> "/" */
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

/* "<path>.tmp.<pid>", malloc'd; NULL on OOM. In path's directory, so the rename stays on one
 * filesystem. */
static char *tmp_name(const char *path)
{
    size_t tlen = strlen(path) + 32;
    char *tmp = malloc(tlen);
    if (tmp) snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    return tmp;
}

/* The whole file: header length, header padded with spaces, data, flushed. false with errno
 * set by the stream. */
static bool write_contents(FILE *fp, const char *tmp, const char *hdr, const ag_st_tensor *tensors, int n,
                           const ag_st_save_opts *o)
{
    size_t hlen = strlen(hdr);
    size_t padded = (hlen + 7) / 8 * 8;   /* 8 + padded is a multiple of 8: data aligned */
    unsigned char len8[8];
    put_u64le(len8, (uint64_t)padded);
    static const char spaces[] = "       ";   /* 7: the most padding needed */
    bool ok = write_all(fp, len8, 8) && write_all(fp, hdr, hlen) && write_all(fp, spaces, padded - hlen) &&
              fflush(fp) == 0;
    if (ok) step(o, "write", tmp);   /* the header is on disk, the data not yet */
    return ok && write_data(fp, tensors, n) && fflush(fp) == 0;
}

/* Creates tmp, writes the file into it, fsyncs and closes it (path only names the target in
 * messages). On a failure after creating it, tmp is removed. */
static ag_status write_tmp(const char *tmp, const char *path, const char *hdr, const ag_st_tensor *tensors,
                           int n, const ag_st_save_opts *o, ag_error *err)
{
    step(o, "create", tmp);
    FILE *fp = create_fresh(tmp);
    if (!fp) return ag_seterr(err, AG_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
    ag_status st = AG_OK;
    if (!write_contents(fp, tmp, hdr, tensors, n, o))
        st = ag_seterr(err, AG_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    if (st == AG_OK) {
        step(o, "fsync", tmp);
        if (fsync(fileno(fp)) != 0) st = ag_seterr(err, AG_ERR_IO, "%s: fsync failed: %s", tmp, strerror(errno));
    }
    if (fclose(fp) != 0 && st == AG_OK)   /* a close can report a late write error */
        st = ag_seterr(err, AG_ERR_IO, "%s: close failed: %s", tmp, strerror(errno));
    if (st != AG_OK) remove(tmp);
    return st;
}

/* Renames tmp over path (removing tmp if that fails), then syncs dir so that the rename itself
 * is durable. */
static ag_status replace_with(const char *path, const char *tmp, const char *dir, const ag_st_save_opts *o,
                              ag_error *err)
{
    step(o, "rename", path);
    if (rename(tmp, path) != 0) {
        ag_seterr(err, AG_ERR_IO, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
        remove(tmp);
        return AG_ERR_IO;
    }
    /* a filesystem that cannot sync directories says EINVAL */
    step(o, "fsync dir", dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd < 0 || (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP)) {
        ag_seterr(err, AG_ERR_IO, "%s: written, but syncing directory %s failed: %s", path, dir,
                  strerror(errno));
        if (dfd >= 0) close(dfd);
        return AG_ERR_IO;
    }
    close(dfd);
    return AG_OK;
}

ag_status ag_st_save(const char *path, const ag_st_tensor *tensors, int n, const ag_st_meta *meta,
                     int n_meta, const ag_st_save_opts *opts, ag_error *err)
{
    if (!path || !path[0]) return ag_seterr(err, AG_ERR_ARG, "ag_st_save: no path");
    if (n < 0 || (n > 0 && !tensors) || n_meta < 0 || (n_meta > 0 && !meta))
        return ag_seterr(err, AG_ERR_ARG, "%s: bad tensor or metadata list (n=%d, n_meta=%d)", path, n, n_meta);
    /* everything that can be wrong with the arguments is found here, before any file exists */
    char *hdr;
    ag_status st = build_header(&hdr, path, tensors, n, meta, n_meta, err);
    if (st != AG_OK) return st;
    char *tmp = tmp_name(path), *dir = dir_of(path);
    if (!tmp || !dir) st = ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", path);
    if (st == AG_OK) st = write_tmp(tmp, path, hdr, tensors, n, opts, err);
    if (st == AG_OK) st = replace_with(path, tmp, dir, opts, err);
    free(tmp);
    free(dir);
    free(hdr);
    return st;
}

// ---------------------------------------------------------------------------------------------
// reader

typedef struct {
    const char *name;          /* points into buf (the header's key, decoded in place) */
    int ndim;
    int shape[AG_MAX_DIMS];
    uint64_t begin, end;       /* byte offsets in the data area */
} st_entry;

typedef struct {
    const char *key, *value;   /* point into buf (decoded in place) */
} st_meta;

struct ag_st_file {
    char *path;                /* copy, for messages */
    unsigned char *buf;        /* the whole file; the header's keys and strings decoded in place */
    const unsigned char *data; /* the data area inside buf */
    uint64_t data_size;
    st_entry *e;               /* [n] in file order */
    int n;
    const st_entry **by_name;  /* [n] the entries sorted by name: lookups, and no name twice */
    st_meta *meta;             /* [n_meta] "__metadata__", sorted by key */
    size_t n_meta;
    bool head_only;            /* ag_st_load_header: buf ends with the header, data is not there */
};

void ag_st_free(ag_st_file *f)
{
    if (!f) return;
    free(f->meta);
    free(f->by_name);
    free(f->e);
    free(f->buf);
    free(f->path);
    free(f);
}

/* A regular file of 8 bytes to 4 GiB, or false with the reason in err */
static bool check_file_stat(const char *path, const struct stat *sb, ag_error *err)
{
    uint64_t n = (uint64_t)sb->st_size;
    if (!S_ISREG(sb->st_mode))
        ag_seterr(err, AG_ERR_IO, "%s: not a regular file%s", path,
                  S_ISDIR(sb->st_mode) ? " (a directory)" : S_ISFIFO(sb->st_mode) ? " (a FIFO)" : "");
    else if (n > ST_MAX_FILE || n > SIZE_MAX)
        ag_seterr(err, AG_ERR_FORMAT, "%s: file is %llu bytes, more than the 4 GiB this reader accepts", path,
                  (unsigned long long)n);
    else if (n < 8)
        ag_seterr(err, AG_ERR_FORMAT, "%s: file is %llu bytes, too short for the 8-byte header length", path,
                  (unsigned long long)n);
    else
        return true;
    return false;
}

/* Opens path for reading, with *size its size; NULL (message in err) when it cannot be opened
 * or check_file_stat refuses it. */
static FILE *open_checked(const char *path, uint64_t *size, ag_error *err)
{
    /* O_NONBLOCK: opening a FIFO would otherwise wait for a writer, forever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        ag_seterr(err, AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    FILE *fp = NULL;
    if (fstat(fd, &sb) != 0)
        ag_seterr(err, AG_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (check_file_stat(path, &sb, err) &&
             !(fp = fcntl(fd, F_SETFL, 0) == 0 ? fdopen(fd, "rb") : NULL))   /* blocking reads again */
        ag_seterr(err, AG_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!fp) {
        close(fd);
        return NULL;
    }
    *size = (uint64_t)sb.st_size;
    return fp;
}

static bool rewind_ok(FILE *fp) { return fseek(fp, 0, SEEK_SET) == 0; }

/* Reads the whole file into f->buf; with head_only, its first 8 bytes and the header alone
 * (its length checked against the file and the 100 MB limit before anything is allocated). */
static bool read_file(ag_st_file *f, bool head_only, uint64_t *size, ag_error *err)
{
    const char *path = f->path;
    uint64_t n, want;
    unsigned char len[8];
    FILE *fp = open_checked(path, &n, err);
    if (!fp) return false;
    want = n;
    if (head_only && fread(len, 1, 8, fp) == 8 && rewind_ok(fp)) {
        uint64_t hlen = get_u64le(len);
        if (hlen <= n - 8 && hlen <= ST_MAX_HEADER) want = 8 + hlen;   /* else find_data says why */
        else want = 8;
    }
    f->buf = malloc((size_t)want);
    if (!f->buf) {
        ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory reading %llu bytes", path, (unsigned long long)n);
        fclose(fp);
        return false;
    }
    size_t got = fread(f->buf, 1, (size_t)want, fp);
    int rerr = ferror(fp) ? errno : 0;
    fclose(fp);
    if (got != (size_t)want) {
        ag_seterr(err, AG_ERR_IO, "%s: read %zu of %llu bytes%s%s", path, got, (unsigned long long)want,
                  rerr ? ": " : "", rerr ? strerror(rerr) : " (file shrank?)");
        return false;
    }
    f->head_only = head_only;
    *size = n;
    return true;
}

/* An integer in [0, max] from a JSON value. */
static bool json_uint(const json_t *v, uint64_t max, uint64_t *out)
{
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max) return false;
    *out = (uint64_t)x;
    return true;
}

/* e->ndim and e->shape from the entry's "shape": 0..AG_MAX_DIMS integers in [0, INT_MAX] */
static bool parse_shape(const char *path, const json_t *shape, st_entry *e, ag_error *err)
{
    if (!json_is_array(shape) || json_array_size(shape) > AG_MAX_DIMS) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' needs a shape array of 0..%d dims", path, e->name,
                  AG_MAX_DIMS);
        return false;
    }
    e->ndim = (int)json_array_size(shape);
    for (int d = 0; d < e->ndim; d++) {
        uint64_t s;
        if (!json_uint(json_array_get(shape, (size_t)d), INT_MAX, &s)) {
            ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s': shape entry %d is not an integer in [0, %d]", path,
                      e->name, d, INT_MAX);
            return false;
        }
        e->shape[d] = (int)s;
    }
    return true;
}

/* e->begin, e->end from the entry's "data_offsets", a range inside f's data area */
static bool parse_offsets(const ag_st_file *f, const json_t *offs, st_entry *e, ag_error *err)
{
    const char *path = f->path, *name = e->name;
    if (!json_is_array(offs) || json_array_size(offs) != 2
        || !json_uint(json_array_get(offs, 0), UINT64_MAX >> 1, &e->begin)
        || !json_uint(json_array_get(offs, 1), UINT64_MAX >> 1, &e->end)) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' needs data_offsets [begin, end] of non-negative integers",
                  path, name);
        return false;
    }
    if (e->begin > e->end) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' has data_offsets [%llu, %llu] with begin > end", path, name,
                  (unsigned long long)e->begin, (unsigned long long)e->end);
        return false;
    }
    if (e->end > f->data_size) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' has data_offsets [%llu, %llu] outside the data area "
                  "of %llu bytes", path, name, (unsigned long long)e->begin,
                  (unsigned long long)e->end, (unsigned long long)f->data_size);
        return false;
    }
    return true;
}

/* The offsets must hold exactly the shape's F32 values: no more, no less. */
static bool check_span(const char *path, const st_entry *e, ag_error *err)
{
    uint64_t bytes;
    char sb[64];
    shape_str(sb, sizeof sb, e->ndim, e->shape);
    if (!shape_bytes(e->ndim, e->shape, UINT64_MAX, &bytes)) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' has an impossibly large shape %s", path, e->name, sb);
        return false;
    }
    if (bytes != e->end - e->begin) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' of shape %s needs %llu bytes of F32, data_offsets "
                  "[%llu, %llu] hold %llu", path, e->name, sb, (unsigned long long)bytes,
                  (unsigned long long)e->begin, (unsigned long long)e->end,
                  (unsigned long long)(e->end - e->begin));
        return false;
    }
    return true;
}

/* Checks one header entry and fills e. */
static bool parse_entry(const ag_st_file *f, const char *name, const json_t *v, st_entry *e, ag_error *err)
{
    const char *path = f->path;
    e->name = name;
    if (!json_is_object(v)) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: header entry '%s' is not an object", path, name);
        return false;
    }
    const json_t *dtype = json_object_get(v, "dtype");
    if (!json_is_string(dtype)) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' has no dtype string", path, name);
        return false;
    }
    if (strcmp(json_string_value(dtype), "F32") != 0) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' has dtype %.32s, only F32 is supported", path, name,
                  json_string_value(dtype));
        return false;
    }
    return parse_shape(path, json_object_get(v, "shape"), e, err)
           && parse_offsets(f, json_object_get(v, "data_offsets"), e, err) && check_span(path, e, err);
}

static int cmp_begin(const void *a, const void *b)
{
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* No two tensors share a byte (zero-size tensors share none). */
static bool check_overlap(const ag_st_file *f, ag_error *err)
{
    if (f->n < 2) return true;
    const st_entry **s = malloc((size_t)f->n * sizeof *s);
    if (!s) {
        ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", f->path);
        return false;
    }
    for (int i = 0; i < f->n; i++) s[i] = &f->e[i];
    qsort(s, (size_t)f->n, sizeof *s, cmp_begin);
    const st_entry *last = NULL;   /* the non-empty tensor that ends furthest so far */
    for (int i = 0; i < f->n; i++) {
        if (s[i]->begin == s[i]->end) continue;
        if (last && s[i]->begin < last->end) {
            ag_seterr(err, AG_ERR_FORMAT, "%s: tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap", f->path,
                      last->name, (unsigned long long)last->begin, (unsigned long long)last->end,
                      s[i]->name, (unsigned long long)s[i]->begin, (unsigned long long)s[i]->end);
            free(s);
            return false;
        }
        last = s[i];
    }
    free(s);
    return true;
}

/* The header length from the first 8 bytes, checked against the file and the 100 MB limit;
 * f->data and f->data_size locate the data area after it. */
static bool find_data(ag_st_file *f, uint64_t size, uint64_t *hlen, ag_error *err)
{
    *hlen = get_u64le(f->buf);
    if (*hlen > size - 8) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: header length %llu exceeds file size %llu", f->path,
                  (unsigned long long)*hlen, (unsigned long long)size);
        return false;
    }
    if (*hlen > ST_MAX_HEADER) {
        ag_seterr(err, AG_ERR_FORMAT, "%s: header length %llu is over the 100 MB limit", f->path,
                  (unsigned long long)*hlen);
        return false;
    }
    f->data = f->buf + 8 + *hlen;
    f->data_size = size - 8 - *hlen;
    return true;
}

// ---------------------------------------------------------------------------------------------
// the header, walked rather than parsed whole
//
// jansson spends 30 to 50 bytes on every value it parses: a 98 MB header holding a shape array
// of 49 million zeros took 2 GB, as did 1.4 million empty tensors. So the header is never
// handed to it whole. Its outer object (and the "__metadata__" object) is walked here byte by
// byte, finding each member's key and value; jansson then parses each tensor entry alone (at
// most ST_MAX_ENTRY bytes, freed at once) and decodes each key and metadata string that is not
// plain ASCII, and the decoded bytes are written back in place in the file's buffer (decoding
// never lengthens a JSON string). What stays is that buffer, an st_entry and a pointer per
// tensor (56 bytes for at least 50 of header) and a pair of pointers per metadata entry (16
// bytes for at least 6): at most about 4x the header's size, whatever it holds. A first walk
// only checks the outline and counts, so those arrays are allocated once at their size.

/* The bytes of one tensor's entry: dtype, shape and data_offsets take under 200, even spaced out. */
#define ST_MAX_ENTRY 4096

typedef struct {
    ag_st_file *f;
    char *h;                   /* the header, inside f->buf */
    size_t n, at;              /* its length; the walk's position */
    ag_error *err;
    bool fill;                 /* the second walk: decode, parse and keep; the first only counts */
    size_t n_entries, n_meta;  /* counted by the first walk */
    bool seen_meta;
} walk;

/* Called for each member of an object with its key's bytes [k0, k1) (quotes included) and its
 * value's [v0, v1). */
typedef bool (*member_fn)(walk *w, size_t k0, size_t k1, size_t v0, size_t v1);

static bool not_json(walk *w, size_t pos, const char *why)
{
    ag_seterr(w->err, AG_ERR_FORMAT, "%s: header is not valid JSON: %s (header byte %zu)", w->f->path, why, pos);
    return false;
}

static bool at_char(const walk *w, char c) { return w->at < w->n && w->h[w->at] == c; }

static void skip_ws(walk *w)
{
    while (at_char(w, ' ') || at_char(w, '\t') || at_char(w, '\n') || at_char(w, '\r')) w->at++;
}

/* At a '"': past the string's closing quote (what its escapes mean is jansson's to check). */
static bool skip_string(walk *w)
{
    size_t start = w->at++;
    while (w->at < w->n) {
        char c = w->h[w->at++];
        if (c == '"') return true;
        if (c == '\\') w->at++;
    }
    return not_json(w, start, "unterminated string");
}

/* Past one value: a string; an object or array, its brackets matched (strings skipped); or a
 * number or literal. Its inside is checked by whoever reads it. */
static bool skip_value(walk *w)
{
    size_t start = w->at, depth = 0;
    if (at_char(w, '"')) return skip_string(w);
    if (at_char(w, '{') || at_char(w, '[')) {
        while (w->at < w->n) {
            char c = w->h[w->at];
            if (c == '"') {
                if (!skip_string(w)) return false;
                continue;
            }
            w->at++;
            if (c == '{' || c == '[') depth++;
            else if ((c == '}' || c == ']') && --depth == 0) return true;
        }
        return not_json(w, start, "unterminated object or array");
    }
    while (w->at < w->n && !memchr(",}] \t\n\r", w->h[w->at], 8)) w->at++;   /* the 8th: NUL */
    return w->at > start || not_json(w, start, "a value expected");
}

/* The object at w->at: fn for each member; w->at ends past its '}'. */
static bool walk_object(walk *w, member_fn fn)
{
    skip_ws(w);
    if (!at_char(w, '{')) return not_json(w, w->at, "'{' expected");
    w->at++;
    skip_ws(w);
    if (at_char(w, '}')) {
        w->at++;
        return true;
    }
    for (;;) {
        skip_ws(w);
        size_t k0 = w->at;
        if (!at_char(w, '"')) return not_json(w, w->at, "a string (a key) expected");
        if (!skip_string(w)) return false;
        size_t k1 = w->at;
        skip_ws(w);
        if (!at_char(w, ':')) return not_json(w, w->at, "':' expected");
        w->at++;
        skip_ws(w);
        size_t v0 = w->at;
        if (!skip_value(w)) return false;
        size_t v1 = w->at;
        if (!fn(w, k0, k1, v0, v1)) return false;
        w->at = v1;   /* fn may have walked inside the value */
        skip_ws(w);
        if (!at_char(w, ',') && !at_char(w, '}')) return not_json(w, w->at, "',' or '}' expected");
        if (w->h[w->at++] == '}') return true;
    }
}

/* The JSON string h[k0, k1) (quotes included), decoded into dst (room for k1 - k0 bytes; it
 * may be h + k0 itself) and NUL-terminated. Plain ASCII is copied as it is; anything else
 * (escapes, UTF-8) jansson decodes and checks. */
static char *decode_string(walk *w, size_t k0, size_t k1, char *dst)
{
    const unsigned char *s = (const unsigned char *)w->h + k0 + 1;
    size_t len = k1 - k0 - 2;
    bool plain = true;
    for (size_t i = 0; i < len && plain; i++) plain = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '\\';
    if (plain) {
        memmove(dst, s, len);
        dst[len] = '\0';
        return dst;
    }
    json_error_t je;
    json_t *v = json_loadb(w->h + k0, k1 - k0, JSON_DECODE_ANY, &je);
    if (!v) {
        not_json(w, k0 + (size_t)(je.position > 0 ? je.position : 0), je.text);
        return NULL;
    }
    size_t n = json_string_length(v);   /* <= len: an escape is longer than what it stands for */
    memcpy(dst, json_string_value(v), n);
    dst[n] = '\0';
    json_decref(v);
    return dst;
}

/* *is: the key h[k0, k1) is `want` (decoded into a copy first if it holds an escape). */
static bool key_is(walk *w, size_t k0, size_t k1, const char *want, bool *is)
{
    size_t len = k1 - k0 - 2;
    if (!memchr(w->h + k0, '\\', k1 - k0)) {
        *is = len == strlen(want) && memcmp(w->h + k0 + 1, want, len) == 0;
        return true;
    }
    char *tmp = malloc(k1 - k0);
    if (!tmp) return !ag_seterr(w->err, AG_ERR_NOMEM, "%s: out of memory", w->f->path);
    bool ok = decode_string(w, k0, k1, tmp) != NULL;
    *is = ok && strcmp(tmp, want) == 0;
    free(tmp);
    return ok;
}

/* A member of "__metadata__": a key and a string. */
static bool meta_member(walk *w, size_t k0, size_t k1, size_t v0, size_t v1)
{
    ag_st_file *f = w->f;
    if (!w->fill) {
        w->n_meta++;
        return true;
    }
    char *key = decode_string(w, k0, k1, w->h + k0);
    if (!key) return false;
    if (w->h[v0] != '"')
        return !ag_seterr(w->err, AG_ERR_FORMAT, "%s: %s value for '%s' is not a string", f->path, ST_META_KEY, key);
    char *value = decode_string(w, v0, v1, w->h + v0);
    if (!value) return false;
    if (f->n_meta < w->n_meta) f->meta[f->n_meta++] = (st_meta){key, value};   /* the first walk counted them */
    return true;
}

/* The value of "__metadata__", an object of strings. */
static bool metadata(walk *w, size_t v0)
{
    if (w->seen_meta) return not_json(w, v0, "duplicate object key '" ST_META_KEY "'");
    w->seen_meta = true;
    if (w->h[v0] != '{')
        return !ag_seterr(w->err, AG_ERR_FORMAT, "%s: %s is not an object", w->f->path, ST_META_KEY);
    w->at = v0;
    return walk_object(w, meta_member);
}

/* One tensor's entry, parsed by jansson alone once its size is known to be an entry's. */
static bool read_entry(walk *w, const char *name, size_t v0, size_t v1)
{
    ag_st_file *f = w->f;
    if (v1 - v0 > ST_MAX_ENTRY)
        return !ag_seterr(w->err, AG_ERR_FORMAT, "%s: tensor '%s': its header entry is %zu bytes, more than the %d "
                          "a dtype, a shape and data_offsets take", f->path, name, v1 - v0, ST_MAX_ENTRY);
    if ((size_t)f->n >= w->n_entries) return true;   /* cannot happen: the first walk counted them */
    json_error_t je;
    json_t *v = json_loadb(w->h + v0, v1 - v0, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES, &je);
    if (!v) return not_json(w, v0 + (size_t)(je.position > 0 ? je.position : 0), je.text);
    bool ok = parse_entry(f, name, v, &f->e[f->n], w->err);
    json_decref(v);
    if (ok) f->n++;
    return ok;
}

static bool root_member(walk *w, size_t k0, size_t k1, size_t v0, size_t v1)
{
    bool is_meta = false;
    if (!key_is(w, k0, k1, ST_META_KEY, &is_meta)) return false;
    if (is_meta) return metadata(w, v0);
    if (!w->fill) {
        w->n_entries++;
        return true;
    }
    char *name = decode_string(w, k0, k1, w->h + k0);
    return name && read_entry(w, name, v0, v1);
}

/* The whole header: one object, then white space (the padding) to its end. */
static bool walk_root(walk *w)
{
    w->at = 0;
    w->seen_meta = false;
    if (!walk_object(w, root_member)) return false;
    skip_ws(w);
    return w->at == w->n || not_json(w, w->at, "end of file expected");
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}

static int cmp_key(const void *a, const void *b)
{
    return strcmp(((const st_meta *)a)->key, ((const st_meta *)b)->key);
}

/* f->by_name, and no key twice (as JSON_REJECT_DUPLICATES would say), in the tensors or in the
 * metadata (sorted by key here). */
static bool sort_keys(ag_st_file *f, ag_error *err)
{
    if (!(f->by_name = malloc((f->n ? (size_t)f->n : 1) * sizeof *f->by_name)))
        return !ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", f->path);
    for (int i = 0; i < f->n; i++) f->by_name[i] = &f->e[i];
    qsort(f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name);
    qsort(f->meta, f->n_meta, sizeof *f->meta, cmp_key);
    const char *twice = NULL;
    for (int i = 1; i < f->n && !twice; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0) twice = f->by_name[i]->name;
    for (size_t i = 1; i < f->n_meta && !twice; i++)
        if (strcmp(f->meta[i - 1].key, f->meta[i].key) == 0) twice = f->meta[i].key;
    if (!twice) return true;
    return !ag_seterr(err, AG_ERR_FORMAT, "%s: header is not valid JSON: duplicate object key '%s'", f->path, twice);
}

/* f->e (file order), f->by_name and f->meta from the header h [hlen] (see above). */
static bool parse_header(ag_st_file *f, uint64_t hlen, ag_error *err)
{
    walk w = {.f = f, .h = (char *)f->buf + 8, .n = (size_t)hlen, .err = err};
    skip_ws(&w);
    if (w.at == w.n) return not_json(&w, w.at, "the header is empty");
    if (!at_char(&w, '{')) return !ag_seterr(err, AG_ERR_FORMAT, "%s: header is not a JSON object", f->path);
    if (!walk_root(&w)) return false;   /* the outline, and the counts */
    if (w.n_entries > INT_MAX) return !ag_seterr(err, AG_ERR_FORMAT, "%s: too many tensors", f->path);
    f->e = malloc((w.n_entries ? w.n_entries : 1) * sizeof *f->e);
    f->meta = malloc((w.n_meta ? w.n_meta : 1) * sizeof *f->meta);
    if (!f->e || !f->meta) return !ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", f->path);
    w.fill = true;
    return walk_root(&w) && sort_keys(f, err);
}

static ag_st_file *load(const char *path, bool head_only, ag_error *err)
{
    if (!path) {
        ag_seterr(err, AG_ERR_ARG, "ag_st_load: no path");
        return NULL;
    }
    ag_st_file *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        ag_seterr(err, AG_ERR_NOMEM, "%s: out of memory", path);
        ag_st_free(f);
        return NULL;
    }
    /* every claim of the header is checked against the bytes there before it is trusted */
    uint64_t size, hlen;
    if (read_file(f, head_only, &size, err) && find_data(f, size, &hlen, err) && parse_header(f, hlen, err)
        && check_overlap(f, err))
        return f;
    ag_st_free(f);
    return NULL;
}

ag_st_file *ag_st_load(const char *path, ag_error *err) { return load(path, false, err); }

ag_st_file *ag_st_load_header(const char *path, ag_error *err) { return load(path, true, err); }

const char *ag_st_meta_get(const ag_st_file *f, const char *key)
{
    if (!f || !key) return NULL;
    const st_meta want = {key, NULL};
    const st_meta *m = f->n_meta ? bsearch(&want, f->meta, f->n_meta, sizeof *f->meta, cmp_key) : NULL;
    return m ? m->value : NULL;
}

int ag_st_count(const ag_st_file *f)
{
    return f ? f->n : 0;
}

const char *ag_st_name(const ag_st_file *f, int i)
{
    return f && i >= 0 && i < f->n ? f->e[i].name : NULL;
}

uint64_t ag_st_data_bytes(const ag_st_file *f)
{
    return f ? f->data_size : 0;
}

ag_status ag_st_read(const ag_st_file *f, const char *name, ag_real *dst, int ndim, const int *shape,
                     ag_error *err)
{
    if (!f || !name || (!shape && ndim > 0) || ndim < 0 || ndim > AG_MAX_DIMS)
        return ag_seterr(err, AG_ERR_ARG, "ag_st_read: bad arguments");
    const st_entry want = {.name = name}, *key = &want;
    const st_entry *const *hit = f->n ? bsearch(&key, f->by_name, (size_t)f->n, sizeof *f->by_name, cmp_name) : NULL;
    const st_entry *e = hit ? *hit : NULL;
    if (!e) return ag_seterr(err, AG_ERR_FORMAT, "%s: no tensor '%s'", f->path, name);
    bool same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = e->shape[d] == shape[d];
    if (!same) {
        char have[64], want[64];
        shape_str(have, sizeof have, e->ndim, e->shape);
        shape_str(want, sizeof want, ndim, shape);
        return ag_seterr(err, AG_ERR_FORMAT, "%s: tensor '%s' has shape %s, expected %s", f->path, name, have,
                         want);
    }
    size_t numel = (size_t)((e->end - e->begin) / 4);
    if (numel > 0 && f->head_only)
        return ag_seterr(err, AG_ERR_ARG, "ag_st_read: %s was loaded without its data (ag_st_load_header)", f->path);
    if (numel > 0 && !dst)
        return ag_seterr(err, AG_ERR_ARG, "ag_st_read: no destination for '%s'", name);
    const unsigned char *p = f->data + e->begin;
    for (size_t i = 0; i < numel; i++) dst[i] = (ag_real)get_f32le(p + 4 * i);
    return AG_OK;
}
