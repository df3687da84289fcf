/* n-dimensional tensors: float32 and int32, up to 8 dims, PyTorch shape order (batch, length,
 * width), row-major, strided views over refcounted 64-byte-aligned storage.
 *
 * Ownership: every function returning ml_tensor* returns a new reference (refcount 1 or a
 * retained existing tensor) that the caller releases with ml_release(). Functions never take
 * ownership of their arguments. On failure they return NULL and set the error message
 * (core/error.h), naming the function as Lua users call it ("matmul: ...").
 *
 * core knows nothing of autograd: requires_grad, grad and grad_fn are fields it stores and frees,
 * and the differentiable views and copies (ml_view, ml_reshape, ml_clone, ml_copy_, ...) are
 * declared in autograd/views.h on top of the raw views here (docs/ARCHITECTURE.md, "Core"). */
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
/* The most elements one new storage may hold (4 GiB of float32): a larger request, or one above
 * the machine's physical memory, is refused up front instead of running for minutes or being
 * killed. Views (expand) may still describe up to ML_MAX_NUMEL elements. */
#define ML_MAX_ALLOC_NUMEL (INT64_C(1) << 30)

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
/* How ml_release drops a tensor's grad_fn. Autograd installs it before it attaches the first
 * node, so core can free a graph without knowing what a node is. */
typedef void (*ml_history_release_fn)(ml_node *node);
void ml_set_history_release(ml_history_release_fn fn);
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
/* int32 uniform over [lo, lo + span) (span >= 1, lo + span - 1 in int32), one ml_rng_below draw per element. */
ml_tensor *ml_randint(int ndim, const int64_t *shape, int32_t lo, uint32_t span, ml_rng *rng);
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

/* ---- raw views: share storage, no history (autograd/views.h has the checked, differentiable ones) ---- */
typedef enum { ML_VIEW_NARROW, ML_VIEW_SLICE, ML_VIEW_SELECT, ML_VIEW_PERMUTE, ML_VIEW_VIEW, ML_VIEW_EXPAND } ml_view_kind;
/* A view described by its kind and parameters, so a backward can re-create it on another base. */
typedef struct {
    ml_view_kind kind;
    int dim;
    int64_t a, b, c; /* narrow: start, length; slice: start, stop, step; select: index in c */
    int perm[ML_MAX_DIMS];
    int ndim;                     /* view, expand: the new shape */
    int64_t shape[ML_MAX_DIMS];
} ml_view_spec;
/* Python's slice syntax "a:b:s" (each part optional, spaces allowed; "a" alone is not a slice) for
 * a dim of `size`: *a, *b, *st get the parts, 0, size and 1 where left out. false: not a slice. */
bool ml_parse_slice(const char *s, int64_t size, int64_t *a, int64_t *b, int64_t *st);
/* The view v of t (arguments already checked by the caller). NULL without a message when t's
 * strides cannot express a ML_VIEW_VIEW reshape, or when out of memory. */
ml_tensor *ml_view_apply(ml_tensor *t, const ml_view_spec *v);

/* ---- copies without history ---- */
ml_tensor *ml_copy_contiguous(const ml_tensor *t, ml_dtype dtype); /* fresh contiguous copy in dtype */
ml_tensor *ml_detach(ml_tensor *t);     /* shares storage, no grad history */
ml_tensor *ml_to_dtype(ml_tensor *t, ml_dtype dtype); /* retains t when it has the dtype already */
/* Writes src (broadcast to dst's shape, dtype converted) into dst: no checks, no version bump;
 * src must not overlap dst. */
void ml_copy_raw(ml_tensor *dst, const ml_tensor *src);
void ml_fill_raw(ml_tensor *dst, double value); /* no checks, no version bump */

/* ---- broadcasting ---- */
/* Computes the broadcast shape of a and b (PyTorch rules); fn names the caller in errors. */
ml_status ml_broadcast_shape(const char *fn, const ml_tensor *a, const ml_tensor *b, int *ndim, int64_t *shape);

/* ---- comparisons ---- */
bool ml_allclose(const ml_tensor *a, const ml_tensor *b, double rtol, double atol);
bool ml_equal(const ml_tensor *a, const ml_tensor *b); /* same shape, dtype and bits */

#endif
