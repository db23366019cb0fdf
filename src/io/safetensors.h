/* safetensors.h -- read and write the safetensors format (huggingface/safetensors):
 * 8-byte little-endian header length N, N bytes of JSON header
 *   {"name": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "string value", ...}}
 * then the raw little-endian data. We write F32 only (ag_real is converted). The JSON is
 * parsed with jansson (a well-kept Debian library) rather than by hand.
 *
 * Writing is atomic: a temporary file in the same directory, written, fflush'ed, fsync'ed,
 * then renamed over the target; on any error the temporary file is removed and the old file
 * is untouched. Reading checks everything before trusting it: header length against the
 * file size, the JSON, dtypes, shapes, data offsets inside the data area, in order, not
 * overlapping and matching the shape. Errors go to err as one line naming the file. */
#ifndef AG_SAFETENSORS_H
#define AG_SAFETENSORS_H

#include "../tensor/tensor.h"

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

ag_status ag_st_save(const char *path, const ag_st_tensor *tensors, int n, const ag_st_meta *meta,
                     int n_meta, char *err, size_t errlen);

typedef struct ag_st_file ag_st_file;   /* a loaded, validated file */

/* NULL on error (message in err). Free with ag_st_free. */
ag_st_file *ag_st_load(const char *path, char *err, size_t errlen);
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
                     char *err, size_t errlen);

#endif
