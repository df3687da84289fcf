/* Private helpers shared by the generic ops (elementwise.c, reduce.c, matmul.c, softmax.c,
 * index.c, sort.c, norm.c, cumsum.c, einsum.c): argument checks with uniform messages, contiguous copies that record nothing, and
 * stride coalescing for the strided loops. */
#ifndef ML_OP_UTIL_H
#define ML_OP_UTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "autograd/autograd.h"
#include "core/tensor.h"
#include "ops/ops.h"

/* A contiguous version of t that never records a graph node (forward kernels read raw data;
 * the op's own node carries the gradient). New reference. */
static inline ml_tensor *mlo_dense(ml_tensor *t) {
    if (ml_is_contiguous(t)) return ml_retain(t);
    bool old = ml_set_grad_enabled(false);
    ml_tensor *c = ml_contiguous(t);
    ml_set_grad_enabled(old);
    return c;
}

/* A float32 version of t (retained when already float32), recording nothing. */
static inline ml_tensor *mlo_float(ml_tensor *t) {
    if (t->dtype == ML_F32) return ml_retain(t);
    return ml_to_dtype(t, ML_F32);
}

static inline ml_status mlo_check_f32(const char *fn, int arg, const ml_tensor *t) {
    if (t->dtype == ML_F32) return ML_OK;
    return ml_fail(ML_ERR_DTYPE, "%s: argument %d expected a float32 tensor, got %s", fn, arg,
                   ml_dtype_name(t->dtype));
}

static inline ml_status mlo_check_i32(const char *fn, int arg, const ml_tensor *t) {
    if (t->dtype == ML_I32) return ML_OK;
    return ml_fail(ML_ERR_DTYPE, "%s: argument %d expected an int32 tensor, got %s", fn, arg,
                   ml_dtype_name(t->dtype));
}

/* Normalises dim for a tensor of ndim dims (a 0-dim tensor has none); -1 and an error if bad. */
static inline int mlo_dim(const char *fn, int arg, int dim, int ndim) {
    int d = ndim > 0 ? ml_dim(dim, ndim) : -1;
    if (d < 0) {
        if (ndim == 0)
            ml_fail(ML_ERR_INDEX, "%s: argument %d expected a dimension, but the tensor has 0 dimensions, got %d", fn,
                    arg, dim);
        else
            ml_fail(ML_ERR_INDEX, "%s: argument %d expected a dimension in [%d, %d], got %d", fn, arg, -ndim,
                    ndim - 1, dim);
    }
    return d;
}

/* A tensor seen as [outer, n, inner] around one dim (n the dim's size), or around all dims
 * (dim = ML_ALL_DIMS; also dim 0 or -1 of a 0-dim tensor), and the shape of a reduction over it
 * (the dim dropped, or kept as 1). */
typedef struct {
    int64_t outer, n, inner;
    int out_ndim;
    int64_t out_shape[ML_MAX_DIMS];
} mlo_layout;

/* Resolves dim (argument `arg` of fn) for a; returns false with an error set. */
static inline bool mlo_reduce_layout(const char *fn, int arg, const ml_tensor *a, int dim, bool keepdim,
                                     mlo_layout *L) {
    bool all = dim == ML_ALL_DIMS || (a->ndim == 0 && (dim == 0 || dim == -1));
    int d = -1;
    if (!all && (d = mlo_dim(fn, arg, dim, a->ndim)) < 0) return false;
    L->outer = 1;
    L->n = 1;
    L->inner = 1;
    L->out_ndim = 0;
    for (int i = 0; i < a->ndim; i++) {
        if (all || i == d) {
            L->n *= a->shape[i];
            if (keepdim) L->out_shape[L->out_ndim++] = 1;
        } else {
            if (i < d) L->outer *= a->shape[i];
            else L->inner *= a->shape[i];
            L->out_shape[L->out_ndim++] = a->shape[i];
        }
    }
    return true;
}

/* Strides of t seen with the broadcast shape of nd dims: 0 along broadcast dims. */
static inline void mlo_bstrides(const ml_tensor *t, int nd, int64_t *st) {
    for (int i = 0; i < nd; i++) {
        int d = t->ndim - nd + i;
        st[i] = (d < 0 || t->shape[d] == 1) ? 0 : t->stride[d];
    }
}

/* Drops size-1 dims and merges adjacent dims that are contiguous for every operand, so the
 * common cases (same-shape contiguous, tensor with scalar, bias rows) run as one long inner
 * loop. Modifies shape and the k stride arrays; returns the new number of dims. */
static inline int mlo_coalesce(int nd, int64_t *shape, int k, int64_t (*st)[ML_MAX_DIMS]) {
    int m = 0;
    for (int d = 0; d < nd; d++) {
        if (shape[d] == 1) continue;
        shape[m] = shape[d];
        for (int j = 0; j < k; j++) st[j][m] = st[j][d];
        m++;
    }
    if (m <= 1) return m;
    int r = 0;
    for (int d = 1; d < m; d++) {
        bool merge = true;
        for (int j = 0; j < k && merge; j++) merge = st[j][r] == st[j][d] * shape[d];
        if (merge) {
            shape[r] *= shape[d];
            for (int j = 0; j < k; j++) st[j][r] = st[j][d];
        } else {
            r++;
            shape[r] = shape[d];
            for (int j = 0; j < k; j++) st[j][r] = st[j][d];
        }
    }
    return r + 1;
}

/* Records node on out, or drops out and returns NULL when the node could not be created. */
static inline ml_tensor *mlo_attach(ml_tensor *out, ml_node *node) {
    if (!node) {
        ml_release(out);
        return NULL;
    }
    ml_attach(out, node);
    return out;
}

#endif
