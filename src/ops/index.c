/* Indexing ops: gather, index_select, scatter_add, embedding; joining and splitting: cat, stack,
 * split. Every index is range-checked before anything is written. Backward passes accumulate in
 * a fixed (index) order, so repeated indices give the same bits on every run. */
#include <stdlib.h>
#include <string.h>

#include "core/iter.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* Checks index values of an int32 tensor against [0, size); names fn and dim in the error. */
static ml_status check_indices(const char *fn, const ml_tensor *idx, int dim, int64_t size) {
    for (int64_t i = 0, n = ml_numel(idx); i < n; i++) {
        int32_t v = ml_i32(idx)[ml_flat_offset(idx, i)];
        if (v < 0 || v >= size)
            return ml_fail(ML_ERR_INDEX, "%s: index %d out of range for dim %d of size %lld", fn, (int)v, dim,
                           (long long)size);
    }
    return ML_OK;
}

/* index must have a's ndim and fit inside `bound` (except along dim when skip_dim). */
static ml_status check_index_shape(const char *fn, int iarg, const ml_tensor *idx, int barg, const ml_tensor *bound,
                                   int dim, bool skip_dim) {
    char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
    if (idx->ndim != bound->ndim)
        return ml_fail(ML_ERR_SHAPE, "%s: argument %d has %d dimensions, expected %d (as argument %d)", fn, iarg,
                       idx->ndim, bound->ndim, barg);
    for (int d = 0; d < idx->ndim; d++)
        if ((!skip_dim || d != dim) && idx->shape[d] > bound->shape[d])
            return ml_fail(ML_ERR_SHAPE, "%s: argument %d has shape %s, larger than argument %d's shape %s at dim %d",
                           fn, iarg, ml_shape_str(s1, idx->ndim, idx->shape), barg,
                           ml_shape_str(s2, bound->ndim, bound->shape), d);
    return ML_OK;
}

/* Walks the elements of idx: for each, offsets into two tensors laid out with strides sa/sb
 * where the coordinate along dim comes from the index value (into A) or the position (into B). */
#define FOR_INDEX(IDX, DIM, SA, SB, BODY)                                                                             \
    do {                                                                                                              \
        int64_t _si[ML_MAX_DIMS], _sa[ML_MAX_DIMS], _sb[ML_MAX_DIMS];                                                 \
        for (int _d = 0; _d < (IDX)->ndim; _d++) {                                                                    \
            _si[_d] = (IDX)->stride[_d];                                                                              \
            _sa[_d] = _d == (DIM) ? 0 : (SA)[_d];                                                                     \
            _sb[_d] = (SB)[_d];                                                                                       \
        }                                                                                                             \
        ml_iter _it;                                                                                                  \
        ml_iter_init(&_it, (IDX)->ndim, (IDX)->shape, 3, (const int64_t *[]){_si, _sa, _sb});                          \
        const int32_t *_pi = ml_i32(IDX);                                                                             \
        for (int64_t _k = 0, _n = ml_numel(IDX); _k < _n; _k++, ml_iter_next(&_it)) {                                 \
            int64_t off_a = _it.off[1] + (int64_t)_pi[_it.off[0]] * (SA)[DIM], off_b = _it.off[2];                    \
            BODY;                                                                                                     \
        }                                                                                                             \
    } while (0)

/* ------------------------------------------------------------------ gather */

static ml_status gather_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *idx = ml_node_saved(node, 0);
    if (!idx) return ml_last_status();
    int dim = (int)node->iarg[0];
    ml_tensor *gx = ml_zeros(ML_F32, node->in_ndim[0], node->in_shape[0]);
    if (!gx) return ML_ERR_MEM;
    float *px = ml_f32(gx);
    const float *pg = ml_f32(g);
    FOR_INDEX(idx, dim, gx->stride, g->stride, px[off_a] += pg[off_b]);
    gin[0] = gx;
    return ML_OK;
}

ml_tensor *ml_gather(ml_tensor *a, int dim, ml_tensor *index) {
    int d = mlo_dim("gather", 2, dim, a->ndim);
    if (d < 0 || mlo_check_i32("gather", 3, index) || check_index_shape("gather", 3, index, 1, a, d, true) ||
        check_indices("gather", index, d, a->shape[d]))
        return NULL;
    ml_tensor *out = ml_empty(a->dtype, index->ndim, index->shape);
    if (!out) return NULL;
    const uint32_t *pa = (const uint32_t *)ml_f32(a); /* a 4-byte copy serves both dtypes */
    uint32_t *po = (uint32_t *)ml_f32(out);
    FOR_INDEX(index, d, a->stride, out->stride, po[off_b] = pa[off_a]);
    if (ml_needs_grad(a)) {
        ml_node *node = ml_node_new("GatherBackward", gather_backward, 1, &a);
        if (node) {
            node->iarg[0] = d;
            ml_node_save(node, 0, index);
        }
        out = mlo_attach(out, node);
    }
    return out;
}

/* ------------------------------------------------------------------ scatter_add */

static ml_status scatter_add_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    if (ml_node_input_needs_grad(node, 0)) gin[0] = ml_retain(g);
    if (ml_node_input_needs_grad(node, 3)) {
        ml_tensor *idx = ml_node_saved(node, 0);
        if (!idx) return ml_last_status();
        int dim = (int)node->iarg[0];
        ml_tensor *gs = ml_zeros(ML_F32, node->in_ndim[3], node->in_shape[3]);
        if (!gs) return ML_ERR_MEM;
        float *ps = ml_f32(gs);
        const float *pg = ml_f32(g);
        FOR_INDEX(idx, dim, g->stride, gs->stride, ps[off_b] = pg[off_a]);
        gin[3] = gs;
    }
    return ML_OK;
}

ml_tensor *ml_scatter_add(ml_tensor *a, int dim, ml_tensor *index, ml_tensor *src) {
    int d = mlo_dim("scatter_add", 2, dim, a->ndim);
    if (d < 0 || mlo_check_i32("scatter_add", 3, index)) return NULL;
    if (src->dtype != a->dtype) {
        ml_fail(ML_ERR_DTYPE, "scatter_add: argument 4 expected a %s tensor (as argument 1), got %s",
                ml_dtype_name(a->dtype), ml_dtype_name(src->dtype));
        return NULL;
    }
    if (check_index_shape("scatter_add", 3, index, 4, src, d, false) ||
        check_index_shape("scatter_add", 3, index, 1, a, d, true) ||
        check_indices("scatter_add", index, d, a->shape[d]))
        return NULL;
    ml_tensor *out = ml_empty(a->dtype, a->ndim, a->shape);
    if (!out) return NULL;
    bool old = ml_set_grad_enabled(false);
    ml_status st = ml_copy_(out, a);
    ml_set_grad_enabled(old);
    if (st) {
        ml_release(out);
        return NULL;
    }
    if (a->dtype == ML_F32) {
        float *po = ml_f32(out);
        const float *ps = ml_f32(src);
        FOR_INDEX(index, d, out->stride, src->stride, po[off_a] += ps[off_b]);
    } else {
        int32_t *po = ml_i32(out);
        const int32_t *ps = ml_i32(src);
        FOR_INDEX(index, d, out->stride, src->stride, po[off_a] = (int32_t)((uint32_t)po[off_a] + (uint32_t)ps[off_b]));
    }
    if (ml_needs_grad(a) || ml_needs_grad(src)) {
        ml_tensor *in[4] = {a, NULL, NULL, src};
        ml_node *node = ml_node_new("ScatterAddBackward", scatter_add_backward, 4, in);
        if (node) {
            node->iarg[0] = d;
            ml_node_save(node, 0, index);
        }
        out = mlo_attach(out, node);
    }
    return out;
}

/* ------------------------------------------------------------------ index_select */

static ml_status index_select_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *idx = ml_node_saved(node, 0);
    if (!idx) return ml_last_status();
    int64_t outer = node->iarg[0], n = node->iarg[1], inner = node->iarg[2], k = node->iarg[3];
    ml_tensor *gx = ml_zeros(ML_F32, node->in_ndim[0], node->in_shape[0]);
    if (!gx) return ML_ERR_MEM;
    float *px = ml_f32(gx);
    const float *pg = ml_f32(g);
    const int32_t *pi = ml_i32(idx);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t j = 0; j < k; j++) {
            float *dst = px + (o * n + pi[j]) * inner;
            const float *s = pg + (o * k + j) * inner;
            for (int64_t i = 0; i < inner; i++) dst[i] += s[i];
        }
    gin[0] = gx;
    return ML_OK;
}

ml_tensor *ml_index_select(ml_tensor *a, int dim, ml_tensor *index) {
    int d = mlo_dim("index_select", 2, dim, a->ndim);
    if (d < 0 || mlo_check_i32("index_select", 3, index)) return NULL;
    if (index->ndim > 1) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "index_select: argument 3 has shape %s, expected a 1-D index",
                ml_shape_str(s, index->ndim, index->shape));
        return NULL;
    }
    if (check_indices("index_select", index, d, a->shape[d])) return NULL;
    ml_tensor *idx = mlo_dense(index), *x = mlo_dense(a);
    int64_t k = ml_numel(index), outer = 1, inner = 1, n = a->shape[d];
    for (int i = 0; i < d; i++) outer *= a->shape[i];
    for (int i = d + 1; i < a->ndim; i++) inner *= a->shape[i];
    int64_t shape[ML_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[d] = k;
    if (!outer || !k || !inner) outer = k = inner = 0; /* an empty result: no row to copy */
    ml_tensor *out = idx && x ? ml_empty(a->dtype, a->ndim, shape) : NULL;
    if (out) {
        const uint32_t *px = (const uint32_t *)ml_f32(x);
        uint32_t *po = (uint32_t *)ml_f32(out);
        const int32_t *pi = ml_i32(idx);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < k; j++)
                memcpy(po + (o * k + j) * inner, px + (o * n + pi[j]) * inner, (size_t)inner * 4);
        if (ml_needs_grad(a)) {
            ml_node *node = ml_node_new("IndexSelectBackward", index_select_backward, 1, &a);
            if (node) {
                node->iarg[0] = outer;
                node->iarg[1] = n;
                node->iarg[2] = inner;
                node->iarg[3] = k;
                ml_node_save(node, 0, idx);
            }
            out = mlo_attach(out, node);
        }
    }
    ml_release(idx);
    ml_release(x);
    return out;
}

/* ------------------------------------------------------------------ embedding */

static ml_status embedding_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *ids = ml_node_saved(node, 0);
    if (!ids) return ml_last_status();
    int64_t D = node->in_shape[0][1], n = ml_numel(ids);
    /* scatter straight into the table's gradient when it has one (no V×D temporary) */
    float *pw = ml_node_grad_sink(node, 0);
    ml_tensor *gw = pw ? NULL : ml_zeros(ML_F32, 2, node->in_shape[0]);
    if (!pw && !gw) return ML_ERR_MEM;
    if (!pw) pw = ml_f32(gw);
    const float *pg = ml_f32(g);
    const int32_t *pi = ml_i32(ids);
    for (int64_t r = 0; r < n; r++) { /* serial: repeated ids add in a fixed order */
        float *dst = pw + (int64_t)pi[r] * D;
        const float *s = pg + r * D;
        for (int64_t j = 0; j < D; j++) dst[j] += s[j];
    }
    gin[0] = gw;
    return ML_OK;
}

ml_tensor *ml_embedding(ml_tensor *weight, ml_tensor *ids) {
    char s[ML_SHAPE_STR];
    if (mlo_check_f32("embedding", 1, weight)) return NULL;
    if (weight->ndim != 2) {
        ml_fail(ML_ERR_SHAPE, "embedding: argument 1 has shape %s, expected [V,D]",
                ml_shape_str(s, weight->ndim, weight->shape));
        return NULL;
    }
    if (mlo_check_i32("embedding", 2, ids)) return NULL;
    if (ids->ndim >= ML_MAX_DIMS) {
        ml_fail(ML_ERR_SHAPE, "embedding: argument 2 has %d dimensions, expected at most %d", ids->ndim,
                ML_MAX_DIMS - 1);
        return NULL;
    }
    if (check_indices("embedding", ids, 0, weight->shape[0])) return NULL;
    int64_t D = weight->shape[1], shape[ML_MAX_DIMS];
    memcpy(shape, ids->shape, sizeof(int64_t) * (size_t)ids->ndim);
    shape[ids->ndim] = D;
    ml_tensor *I = mlo_dense(ids), *W = mlo_dense(weight);
    ml_tensor *out = I && W ? ml_empty(ML_F32, ids->ndim + 1, shape) : NULL;
    if (out) {
        const int32_t *pi = ml_i32(I);
        const float *pw = ml_f32(W);
        float *po = ml_f32(out);
        for (int64_t r = 0, n = ml_numel(I); r < n; r++)
            memcpy(po + r * D, pw + (int64_t)pi[r] * D, (size_t)D * sizeof(float));
        if (ml_needs_grad(weight)) {
            ml_node *node = ml_node_new("EmbeddingBackward", embedding_backward, 1, &weight);
            if (node) ml_node_save(node, 0, I);
            out = mlo_attach(out, node);
        }
    }
    ml_release(I);
    ml_release(W);
    return out;
}

/* ------------------------------------------------------------------ cat, stack, split */

static ml_status cat_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    int d = (int)node->iarg[0];
    int64_t start = 0;
    for (int i = 0; i < node->n_in; i++) {
        int64_t len = node->in_shape[i][d];
        if (ml_node_input_needs_grad(node, i)) {
            ml_tensor *v = ml_narrow(g, d, start, len);
            gin[i] = v ? ml_contiguous(v) : NULL;
            ml_release(v);
            if (!gin[i]) return ml_last_status();
        }
        start += len;
    }
    return ML_OK;
}

/* Joins up to any number of tensors; a node records at most ML_NODE_MAX_IN inputs, so longer
 * lists that need gradients are joined in groups first. */
static ml_tensor *cat_checked(int n, ml_tensor *const *ts, int d) {
    if (n > ML_NODE_MAX_IN && ml_any_needs_grad(n, ts)) {
        int groups = (n + ML_NODE_MAX_IN - 1) / ML_NODE_MAX_IN;
        ml_tensor **parts = calloc((size_t)groups, sizeof *parts);
        if (!parts) {
            ml_fail(ML_ERR_MEM, "cat: out of memory");
            return NULL;
        }
        ml_tensor *out = NULL;
        int made = 0;
        for (; made < groups; made++) {
            int lo = made * ML_NODE_MAX_IN, cnt = n - lo < ML_NODE_MAX_IN ? n - lo : ML_NODE_MAX_IN;
            if (!(parts[made] = cat_checked(cnt, ts + lo, d))) break;
        }
        if (made == groups) out = cat_checked(groups, parts, d);
        for (int i = 0; i < made; i++) ml_release(parts[i]);
        free(parts);
        return out;
    }
    const ml_tensor *ref = ts[0];
    int64_t shape[ML_MAX_DIMS], outer = 1, inner = 1;
    memcpy(shape, ref->shape, sizeof shape);
    shape[d] = 0;
    for (int i = 0; i < n; i++) shape[d] += ts[i]->shape[d];
    for (int i = 0; i < d; i++) outer *= ref->shape[i];
    for (int i = d + 1; i < ref->ndim; i++) inner *= ref->shape[i];
    ml_tensor *out = ml_empty(ref->dtype, ref->ndim, shape);
    if (!out) return NULL;
    uint32_t *po = (uint32_t *)ml_f32(out);
    int64_t row = shape[d] * inner, start = 0;
    for (int i = 0; i < n; i++) {
        ml_tensor *x = mlo_dense(ts[i]);
        if (!x) {
            ml_release(out);
            return NULL;
        }
        int64_t blk = ts[i]->shape[d] * inner;
        const uint32_t *px = (const uint32_t *)ml_f32(x);
        if (blk)
            for (int64_t o = 0; o < outer; o++) memcpy(po + o * row + start, px + o * blk, (size_t)blk * 4);
        start += blk;
        ml_release(x);
    }
    if (ml_any_needs_grad(n, ts)) {
        ml_node *node = ml_node_new("CatBackward", cat_backward, n, ts);
        if (node) node->iarg[0] = d;
        out = mlo_attach(out, node);
    }
    return out;
}

ml_tensor *ml_cat(int n, ml_tensor *const *ts, int dim) {
    if (n <= 0 || !ts) {
        ml_fail(ML_ERR_ARG, "cat: argument 1 expected a non-empty list of tensors, got %d tensors", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            ml_fail(ML_ERR_ARG, "cat: argument 1 element %d is not a tensor", i + 1);
            return NULL;
        }
    const ml_tensor *ref = ts[0];
    if (ref->ndim == 0) {
        ml_fail(ML_ERR_SHAPE, "cat: argument 1 element 1 is a 0-dim tensor, expected at least 1 dimension");
        return NULL;
    }
    int d = mlo_dim("cat", 2, dim, ref->ndim);
    if (d < 0) return NULL;
    for (int i = 1; i < n; i++) {
        const ml_tensor *t = ts[i];
        if (t->dtype != ref->dtype) {
            ml_fail(ML_ERR_DTYPE, "cat: argument 1 element %d expected a %s tensor (as element 1), got %s", i + 1,
                    ml_dtype_name(ref->dtype), ml_dtype_name(t->dtype));
            return NULL;
        }
        bool ok = t->ndim == ref->ndim;
        for (int k = 0; ok && k < t->ndim; k++) ok = k == d || t->shape[k] == ref->shape[k];
        if (!ok) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            ml_fail(ML_ERR_SHAPE,
                    "cat: argument 1 element %d has shape %s, expected the shape %s of element 1 except at dim %d",
                    i + 1, ml_shape_str(s1, t->ndim, t->shape), ml_shape_str(s2, ref->ndim, ref->shape), d);
            return NULL;
        }
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += ts[i]->shape[d];
    int64_t shape[ML_MAX_DIMS];
    memcpy(shape, ref->shape, sizeof shape);
    shape[d] = total;
    if (ml_check_shape("cat", 1, ref->ndim, shape)) return NULL;
    return cat_checked(n, ts, d);
}

ml_tensor *ml_stack(int n, ml_tensor *const *ts, int dim) {
    if (n <= 0 || !ts) {
        ml_fail(ML_ERR_ARG, "stack: argument 1 expected a non-empty list of tensors, got %d tensors", n);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!ts[i]) {
            ml_fail(ML_ERR_ARG, "stack: argument 1 element %d is not a tensor", i + 1);
            return NULL;
        }
        if (i && (!ml_same_shape(ts[i], ts[0]) || ts[i]->dtype != ts[0]->dtype)) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            ml_fail(ML_ERR_SHAPE, "stack: argument 1 element %d has shape %s (%s), expected %s (%s) as element 1",
                    i + 1, ml_shape_str(s1, ts[i]->ndim, ts[i]->shape), ml_dtype_name(ts[i]->dtype),
                    ml_shape_str(s2, ts[0]->ndim, ts[0]->shape), ml_dtype_name(ts[0]->dtype));
            return NULL;
        }
    }
    int nd = ts[0]->ndim;
    if (nd >= ML_MAX_DIMS) {
        ml_fail(ML_ERR_SHAPE, "stack: argument 1 has tensors of %d dimensions, expected at most %d", nd,
                ML_MAX_DIMS - 1);
        return NULL;
    }
    int d = mlo_dim("stack", 2, dim, nd + 1);
    if (d < 0) return NULL;
    ml_tensor **us = calloc((size_t)n, sizeof *us);
    if (!us) {
        ml_fail(ML_ERR_MEM, "stack: out of memory");
        return NULL;
    }
    ml_tensor *out = NULL;
    int made = 0;
    for (; made < n; made++)
        if (!(us[made] = ml_unsqueeze(ts[made], d))) break;
    if (made == n) out = ml_cat(n, us, d);
    for (int i = 0; i < made; i++) ml_release(us[i]);
    free(us);
    return out;
}

int ml_split_tensor(ml_tensor *a, int64_t size, int dim, ml_tensor **out, int max_out) {
    if (size <= 0) {
        ml_fail(ML_ERR_ARG, "split: argument 2 expected a size > 0, got %lld", (long long)size);
        return -1;
    }
    int d = mlo_dim("split", 3, dim, a->ndim);
    if (d < 0) return -1;
    int64_t len = a->shape[d];
    int64_t count = len == 0 ? 1 : (len - 1) / size + 1; /* an empty dim splits into one empty piece */
    if (count > max_out) {
        ml_fail(ML_ERR_ARG, "split: %lld pieces of size %lld along dim %d do not fit in %d outputs", (long long)count,
                (long long)size, d, max_out);
        return -1;
    }
    for (int64_t i = 0; i < count; i++) {
        int64_t start = i * size, l = len - start < size ? len - start : size;
        out[i] = ml_narrow(a, d, start, l);
        if (!out[i]) {
            for (int64_t j = 0; j < i; j++) {
                ml_release(out[j]);
                out[j] = NULL;
            }
            return -1;
        }
    }
    return (int)count;
}
