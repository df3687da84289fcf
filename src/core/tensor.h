/* n-dimensional tensors: float32 and int32, up to 8 dims, PyTorch shape order (batch, length,
 * width), row-major, strided views over refcounted 64-byte-aligned storage.
 *
 * Ownership: every function returning ml_tensor* returns a new reference (refcount 1 or a
 * retained existing tensor) that the caller releases with ml_release(). Functions never take
 * ownership of their arguments. On failure they return NULL and set the error message
 * (core/error.h), naming the function as Lua users call it ("matmul: ...").
 *
 * Autograd (autograd/autograd.h): a tensor that requires grad or has a grad_fn is part of the
 * graph; differentiable ops record a node when grad mode is on and an input needs grad. */
#ifndef ML_TENSOR_H
#define ML_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/rng.h"

#define ML_MAX_DIMS 8
/* The most elements of one tensor, and the most its sizes may multiply to with sizes of 0
 * counted as 1 (an empty tensor's strides): sizes, strides and offsets never overflow int64. */
#define ML_MAX_NUMEL (INT64_C(1) << 40)
#define ML_MAX_EXTENT (INT64_C(1) << 62)

typedef enum { ML_F32 = 0, ML_I32 = 1 } ml_dtype;

typedef struct ml_storage {
    void *data;       /* 64-byte aligned */
    size_t nbytes;
    int refcount;
    uint64_t version; /* bumped by every in-place write; autograd checks saved tensors */
} ml_storage;

typedef struct ml_node ml_node;

typedef struct ml_tensor {
    int refcount;
    ml_dtype dtype;
    int ndim;
    int64_t shape[ML_MAX_DIMS];
    int64_t stride[ML_MAX_DIMS]; /* in elements; 0 for broadcast (expanded) dims */
    int64_t offset;              /* in elements, into storage */
    ml_storage *storage;
    bool requires_grad;          /* leaf flag (user-set); non-leaves have grad_fn */
    struct ml_tensor *grad;      /* accumulated gradient of a leaf (or NULL) */
    ml_node *grad_fn;            /* node that produced this tensor (or NULL) */
} ml_tensor;

/* ---- lifetime ---- */
ml_tensor *ml_retain(ml_tensor *t);
void ml_release(ml_tensor *t); /* NULL is fine */
/* Total bytes of live storage (for the Lua collector's accounting and the memory benchmark). */
size_t ml_storage_live_bytes(void);

/* ---- information ---- */
int64_t ml_numel(const ml_tensor *t);
bool ml_is_contiguous(const ml_tensor *t);
bool ml_same_shape(const ml_tensor *a, const ml_tensor *b);
const char *ml_dtype_name(ml_dtype d);
size_t ml_dtype_size(ml_dtype d);
/* Base pointers (element at index 0,...,0); index with strides for non-contiguous tensors. */
static inline float *ml_f32(const ml_tensor *t) { return (float *)t->storage->data + t->offset; }
static inline int32_t *ml_i32(const ml_tensor *t) { return (int32_t *)t->storage->data + t->offset; }
/* Normalises a possibly negative dim against ndim; returns -1 when out of range. */
int ml_dim(int dim, int ndim);
/* Validates a shape (0..8 dims, sizes >= 0, total bytes fit); fn/arg name the caller. */
ml_status ml_check_shape(const char *fn, int arg, int ndim, const int64_t *shape);

/* ---- creation (never require grad) ---- */
ml_tensor *ml_empty(ml_dtype dtype, int ndim, const int64_t *shape);
ml_tensor *ml_zeros(ml_dtype dtype, int ndim, const int64_t *shape);
ml_tensor *ml_full(ml_dtype dtype, int ndim, const int64_t *shape, double value);
ml_tensor *ml_scalar(ml_dtype dtype, double value); /* 0-dim */
ml_tensor *ml_arange(ml_dtype dtype, double start, double stop, double step);
ml_tensor *ml_uniform(int ndim, const int64_t *shape, double lo, double hi, ml_rng *rng);
ml_tensor *ml_normal(int ndim, const int64_t *shape, double mean, double std, ml_rng *rng);
ml_tensor *ml_from_f32(int ndim, const int64_t *shape, const float *data);
ml_tensor *ml_from_i32(int ndim, const int64_t *shape, const int32_t *data);
/* Same shape and dtype as t, zero-filled / uninitialised, contiguous. */
ml_tensor *ml_zeros_like(const ml_tensor *t);
ml_tensor *ml_empty_like(const ml_tensor *t);

/* ---- element access (bounds-checked; idx has t->ndim entries, already non-negative) ---- */
double ml_get(const ml_tensor *t, const int64_t *idx);
void ml_set(ml_tensor *t, const int64_t *idx, double v); /* bumps the version */
/* Linear (row-major logical order) element read, for printing/iteration over any layout. */
double ml_get_flat(const ml_tensor *t, int64_t i);
/* Byte offset helper: element offset (in elements from ml_f32/ml_i32 base) of logical index i. */
int64_t ml_flat_offset(const ml_tensor *t, int64_t i);

/* ---- views: share storage; differentiable ---- */
ml_tensor *ml_narrow(ml_tensor *t, int dim, int64_t start, int64_t length);
ml_tensor *ml_slice(ml_tensor *t, int dim, int64_t start, int64_t stop, int64_t step);
ml_tensor *ml_select(ml_tensor *t, int dim, int64_t index); /* drops dim */
ml_tensor *ml_transpose(ml_tensor *t, int d0, int d1);
ml_tensor *ml_permute(ml_tensor *t, const int *perm);        /* perm has t->ndim entries */
ml_tensor *ml_view(ml_tensor *t, int ndim, const int64_t *shape);    /* one -1 allowed; needs compatible strides */
ml_tensor *ml_reshape(ml_tensor *t, int ndim, const int64_t *shape); /* view when possible, else copy */
ml_tensor *ml_expand(ml_tensor *t, int ndim, const int64_t *shape);  /* broadcast; -1 keeps a size */
ml_tensor *ml_unsqueeze(ml_tensor *t, int dim);
ml_tensor *ml_squeeze(ml_tensor *t, int dim);                /* dim must have size 1 */

/* ---- copies ---- */
ml_tensor *ml_contiguous(ml_tensor *t); /* retains t itself if already contiguous */
ml_tensor *ml_clone(ml_tensor *t);      /* always a fresh contiguous copy; differentiable */
ml_tensor *ml_detach(ml_tensor *t);     /* shares storage, no grad history */
ml_tensor *ml_to_dtype(ml_tensor *t, ml_dtype dtype);
/* In place (not recorded by autograd; refused on leaves that require grad while grad mode is
 * on, as PyTorch does). src broadcasts to dst's shape; dtypes are converted. */
ml_status ml_copy_(ml_tensor *dst, ml_tensor *src);
ml_status ml_fill_(ml_tensor *dst, double value);

/* ---- broadcasting ---- */
/* Computes the broadcast shape of a and b (PyTorch rules); fn names the caller in errors. */
ml_status ml_broadcast_shape(const char *fn, const ml_tensor *a, const ml_tensor *b, int *ndim, int64_t *shape);

/* ---- comparisons ---- */
bool ml_allclose(const ml_tensor *a, const ml_tensor *b, double rtol, double atol);
bool ml_equal(const ml_tensor *a, const ml_tensor *b); /* same shape, dtype and bits */

#endif
