/* The safetensors format (huggingface/safetensors), float32 and int32 tensors.
 *
 *   [8 bytes: header length N, little-endian u64][N bytes: JSON header][data]
 *   header = {"__metadata__": {string: string, ...},            (optional)
 *             "<name>": {"dtype": "F32"|"I32", "shape": [d0, ...], "data_offsets": [begin, end]}, ...}
 * Offsets are relative to the start of the data section; data is raw little-endian, row-major.
 *
 * Writing mirrors the reference implementation, so mechlab writes the same bytes as
 * safetensors.torch.save_file: tensors laid out by dtype (F32 before I32) then name, compact JSON
 * with __metadata__ first, the header padded with spaces to a multiple of 8. The write is atomic
 * (io/csv.h): the target is either the old file or the complete new one.
 *
 * Reading loads the whole file and validates it as strictly as the reference: the header length
 * against the file size and the 100 MB cap, the JSON (io/json.h), every dtype, shape and offset
 * (begin <= end, inside the data, sizes equal to numel x dtype size, tensors tiling the data
 * section without overlap or gap, nothing after the last one), names unique and free of 0 bytes,
 * __metadata__ a string-to-string map. Errors: ML_ERR_IO (cannot read) or ML_ERR_FORMAT, with
 * messages "load: <path>: ..." naming the tensor and the numbers involved. Unknown fields of a
 * tensor entry are ignored (as the reference does); other dtypes (F16, BF16, F64, I64, ...) are
 * refused as unsupported. */
#ifndef ML_SAFETENSORS_H
#define ML_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/tensor.h"

/* The reference implementation's limit on the header length. */
#define ML_SAFETENSORS_MAX_HEADER 100000000ull

/* Writes n tensors (any layout; float32 or int32) under names, plus n_meta metadata pairs (may be
 * 0 with NULL arrays). Names must be non-empty, distinct, valid UTF-8 and not "__metadata__";
 * metadata keys distinct. */
ml_status ml_safetensors_write(const char *path, int n, const char *const *names, ml_tensor *const *tensors,
                               int n_meta, const char *const *meta_keys, const char *const *meta_values);

typedef struct ml_safetensors ml_safetensors;

/* Reads and validates a file; NULL with the error set on failure. */
ml_safetensors *ml_safetensors_open(const char *path);
/* The same from bytes in memory (copied); `what` names the source in messages. */
ml_safetensors *ml_safetensors_parse(const void *bytes, size_t n, const char *what);
void ml_safetensors_close(ml_safetensors *st); /* NULL is fine */

/* Tensors, in file order (by data offset). */
int ml_safetensors_count(const ml_safetensors *st);
const char *ml_safetensors_name(const ml_safetensors *st, int i); /* NULL when i is out of range */
/* Index of `name`, or -1. */
int ml_safetensors_find(const ml_safetensors *st, const char *name);
/* dtype and shape of `name` (shape has room for ML_MAX_DIMS); ML_ERR_INDEX when absent. */
ml_status ml_safetensors_info(const ml_safetensors *st, const char *name, ml_dtype *dtype, int *ndim,
                              int64_t *shape);
/* A new contiguous tensor holding a copy of `name`; NULL with ML_ERR_INDEX when absent. */
ml_tensor *ml_safetensors_get(const ml_safetensors *st, const char *name);
/* Copies `name` into an existing tensor of the same dtype and shape (any layout), e.g. a view into
 * a model's flat parameter buffer. Checks first, so a mismatch leaves dst untouched. Bumps the
 * storage version. */
ml_status ml_safetensors_read_into(const ml_safetensors *st, const char *name, ml_tensor *dst);

/* Metadata (the __metadata__ map), in file order. */
int ml_safetensors_meta_count(const ml_safetensors *st);
const char *ml_safetensors_meta_key(const ml_safetensors *st, int i);
const char *ml_safetensors_meta_value(const ml_safetensors *st, int i);
/* Value of `key`, or NULL when absent. */
const char *ml_safetensors_meta(const ml_safetensors *st, const char *key);

#endif
