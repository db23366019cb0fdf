/* safetensors.h -- read and write the safetensors format (huggingface/safetensors). src/io/
 * owns the files attograd reads and writes; this is its one format:
 * 8-byte little-endian header length N, N bytes of JSON header
 *   {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "string value", ...}}
 * then the raw little-endian data. We write F32 only (ag_real is converted). The JSON is
 * parsed with jansson (a well-kept Debian library) rather than by hand, one tensor entry at a
 * time: the memory a header costs stays within a few times its size, whatever it holds (a
 * tensor's entry is at most 4096 bytes).
 *
 * Writing is atomic: a temporary file in the same directory (created afresh: a file or a
 * symbolic link already at its name is replaced, never written through), written, fflush'ed,
 * fsync'ed, then renamed over the target; on any error the temporary file is removed and the
 * old file is untouched. A path that is not a regular file (a FIFO, a device, a directory) is
 * refused by the reader without blocking on it. Reading checks everything before trusting it: header length against the
 * file size, the JSON, dtypes, shapes, data offsets inside the data area, in order, not
 * overlapping and matching the shape. A failing call returns its status (or NULL) and says why
 * in err (NULL ok), one line naming the file, its control characters replaced; as with every
 * ag_error the first failure sticks, so start from a clear one (ag_error err = {0}). */
#ifndef AG_SAFETENSORS_H
#define AG_SAFETENSORS_H

#include <stdint.h>
#include "../tensor/tensor.h"

/* The largest file this reader takes (it reads the whole file) and the largest header; the
 * writer refuses to write what the reader would refuse. */
#define AG_ST_MAX_FILE ((uint64_t)4 << 30)              /* 4 GiB */
#define AG_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)  /* 100 MB, as the reference reader */

typedef struct {
    const char *name;
    int ndim;
    int shape[AG_MAX_DIMS];
    const ag_real *data;        /* numel elements, written as F32 */
} ag_st_tensor;

typedef struct {
    const char *key;
    const char *value;          /* a string, as the format requires */
} ag_st_meta;

/* A hook for crash tests: ag_st_save calls it before each step that changes the disk, with the
 * step ("create", "write", "fsync", "rename", "fsync dir"), the file or directory in hand and
 * the opts' user pointer. At "write" the file holds its header only; at "fsync" all of it, not
 * yet synced. The hook may end the process there (char_lm's CHAR_LM_FAULT does). */
typedef void (*ag_st_step_hook)(const char *step, const char *path, void *user);

typedef struct {
    ag_st_step_hook step_hook;  /* NULL: none */
    void *user;                 /* handed to step_hook */
} ag_st_save_opts;

/* AG_ERR_ARG for a bad tensor or metadata list (found before any file is created), AG_ERR_IO
 * when writing fails (the old file is untouched), AG_ERR_NOMEM. opts may be NULL (no hook). */
ag_status ag_st_save(const char *path, const ag_st_tensor *tensors, int n, const ag_st_meta *meta,
                     int n_meta, const ag_st_save_opts *opts, ag_error *err);

typedef struct ag_st_file ag_st_file;   /* a loaded, validated file */

/* NULL on error, with err's status AG_ERR_IO (cannot open or read), AG_ERR_FORMAT (not a valid
 * file) or AG_ERR_NOMEM. Free with ag_st_free. */
ag_st_file *ag_st_load(const char *path, ag_error *err);
/* The same checks of the header (its tensors' offsets against the file's size included), but
 * only the header is read, not the data (ag_st_read then refuses): the metadata of a file of
 * gigabytes for the cost of its header. */
ag_st_file *ag_st_load_header(const char *path, ag_error *err);
void ag_st_free(ag_st_file *f);  /* NULL ok */
/* The metadata value for key, or NULL. Valid until ag_st_free. */
const char *ag_st_meta_get(const ag_st_file *f, const char *key);
int ag_st_count(const ag_st_file *f);               /* tensors in the file */
const char *ag_st_name(const ag_st_file *f, int i); /* i-th tensor's name, file order */
/* Bytes in the file's data area (all tensors together): lets a caller check that a header's
 * claims fit the file before allocating a model of that size. */
uint64_t ag_st_data_bytes(const ag_st_file *f);
/* Copies tensor `name` into dst (converted to ag_real) after checking it exists and has
 * exactly this shape. AG_ERR_FORMAT with a message in err otherwise. */
ag_status ag_st_read(const ag_st_file *f, const char *name, ag_real *dst, int ndim, const int *shape,
                     ag_error *err);

#endif
