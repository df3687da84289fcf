/* Private helpers shared by the generic ops (elementwise.c, reduce.c, matmul.c, softmax.c,
 * index.c, sort.c, norm.c, cumsum.c, einsum.c): argument checks with uniform messages, contiguous copies that record nothing, and
 * stride coalescing for the strided loops. */
#ifndef ML_OP_UTIL_H
#define ML_OP_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
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
    if (!L->outer || !L->inner) L->outer = L->inner = 0; /* an empty result: no row to visit */
    return true;
}

/* For an op whose output has its input's shape, seen as [outer, n, inner] rows: with no element
 * there is no row to visit, however large the other two sizes ([2^31, 0, 2^31] along dim 1 would
 * be 2^62 rows of nothing). Sets all three to 0 then. */
static inline void mlo_skip_empty_rows(int64_t *outer, int64_t *n, int64_t *inner) {
    if (!*outer || !*n || !*inner) *outer = *n = *inner = 0;
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

/* Records on out (a + b of the same shape, filled by the caller) the node ml_add would record:
 * for ops that compute a sum inside a fused kernel (ml_add_layer_norm). Returns out, or NULL. */
ml_tensor *mlo_add_node(ml_tensor *out, ml_tensor *a, ml_tensor *b);

/* ---- shared by the differentiable mixer ops (mixer_ops.h), each at the end of its kernel's file
 * (conv1d.c, longconv.c, selective_scan.c, linear_attention.c, delta_rule.c, h3.c) */

/* Fails unless t has nd dims equal to want (−1 = any). desc says what was expected, e.g.
 * "[C,K] with C=64". */
static inline ml_status mlo_want_shape(const char *fn, int arg, const ml_tensor *t, int nd,
                                        const int64_t *want, const char *desc) {
    bool ok = t->ndim == nd;
    for (int i = 0; ok && i < nd; i++) ok = want[i] < 0 || t->shape[i] == want[i];
    if (ok) return ML_OK;
    char buf[ML_SHAPE_STR];
    return ml_fail(ML_ERR_SHAPE, "%s: argument %d has shape %s, expected %s", fn, arg,
                   ml_shape_str(buf, t->ndim, t->shape), desc);
}

/* Formats an expected-shape description into a static-size buffer. */
static inline const char *mlo_descf(char *buf, size_t n, const char *fmt, ...) ML_PRINTF(3, 4);
static inline const char *mlo_descf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return buf;
}

static inline ml_status mlo_check_f32s(const char *fn, int n, ml_tensor *const *ts) {
    for (int i = 0; i < n; i++)
        if (ts[i] && mlo_check_f32(fn, i + 1, ts[i])) return ml_last_status();
    return ML_OK;
}

/* Dims must fit the kernels' int sizes. */
static inline ml_status mlo_check_int_sizes(const char *fn, const ml_tensor *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > (1 << 30)) return ml_fail(ML_ERR_SHAPE, "%s: dimension %d is too large", fn, i + 1);
    return ML_OK;
}

/* Row stride of a [B,L,C] view whose rows are contiguous and evenly spaced (such as a column slice
 * of a wider [B,L,·] tensor), which the kernels read in place; 0 when it needs a dense copy. */
static inline int64_t mlo_row_stride(const ml_tensor *t) {
    if (t->ndim != 3 || t->shape[2] < 1) return 0;
    if (t->shape[2] > 1 && t->stride[2] != 1) return 0;
    int64_t ld = t->shape[1] > 1 ? t->stride[1] : (t->shape[0] > 1 ? t->stride[0] : t->shape[2]);
    if (ld < t->shape[2]) return 0;
    if (t->shape[0] > 1 && t->stride[0] != t->shape[1] * ld) return 0;
    return ld;
}

static inline void mlo_release_all(int n, ml_tensor **ts) {
    for (int i = 0; i < n; i++) ml_release(ts[i]);
}

static inline ml_tensor *mlo_oom(const char *fn) {
    ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
    return NULL;
}

/* Gradient buffer shaped like input i of node n, or NULL when that input needs none. */
static inline ml_tensor *mlo_grad_like(ml_node *n, int i) {
    return ml_node_input_needs_grad(n, i) ? ml_empty(ML_F32, n->in_ndim[i], n->in_shape[i]) : NULL;
}
static inline float *mlo_gp(ml_tensor *g) { return g ? ml_f32(g) : NULL; }

/* The same for a backward that reads the incoming gradient g at each element (row) before it
 * writes that element of the result and never after: when only the engine holds g (shaped like
 * the input), the result overwrites it instead of taking a new buffer. */
static inline ml_tensor *mlo_grad_over(ml_node *n, int i, ml_tensor *g) {
    if (!ml_node_input_needs_grad(n, i)) return NULL;
    bool own = g->refcount == 1 && g->storage->refcount == 1 && g->offset == 0 && ml_is_contiguous(g) &&
               g->ndim == n->in_ndim[i] && !memcmp(g->shape, n->in_shape[i], sizeof(int64_t) * (size_t)g->ndim);
    return own ? ml_retain(g) : ml_empty(ML_F32, n->in_ndim[i], n->in_shape[i]);
}

/* Checks that every requested gradient buffer was allocated. */
static inline ml_status mlo_grads_ok(ml_node *n, ml_tensor **gin) {
    for (int i = 0; i < n->n_in; i++)
        if (ml_node_input_needs_grad(n, i) && !gin[i]) {
            for (int j = 0; j < n->n_in; j++) ml_release(gin[j]), gin[j] = NULL;
            return ml_fail(ML_ERR_MEM, "%s: out of memory", n->name);
        }
    return ML_OK;
}

#endif
