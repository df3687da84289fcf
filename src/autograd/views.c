/* The differentiable views and copies: argument checks, the raw layout from core
 * (ml_view_apply, ml_copy_contiguous) and the node that carries the gradient back. */
#include "autograd/views.h"

#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"

/* ------------------------------------------------------------------ in-place writes */

static ml_status check_inplace(const char *fn, ml_tensor *dst) {
    if (ml_grad_enabled() && dst->requires_grad && !dst->grad_fn)
        return ml_fail(ML_ERR_STATE,
                       "%s: argument 1 is a leaf that requires grad; modify it inside mech.no_grad or detach it", fn);
    return ML_OK;
}

ml_status ml_copy_(ml_tensor *dst, ml_tensor *src) {
    int nd;
    int64_t shape[ML_MAX_DIMS];
    if (check_inplace("copy_", dst)) return ML_ERR_STATE;
    if (ml_broadcast_shape("copy_", dst, src, &nd, shape)) return ML_ERR_SHAPE;
    for (int d = 0; d < nd; d++) {
        int dd = dst->ndim - nd + d;
        if (dd < 0 || dst->shape[dd] != shape[d]) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            return ml_fail(ML_ERR_SHAPE, "copy_: argument 2 has shape %s, which does not broadcast to %s",
                           ml_shape_str(s1, src->ndim, src->shape), ml_shape_str(s2, dst->ndim, dst->shape));
        }
    }
    if (src->storage == dst->storage) { /* overlapping: go through a temporary */
        ml_tensor *tmp = ml_empty(src->dtype, src->ndim, src->shape);
        if (!tmp) return ML_ERR_MEM;
        ml_copy_raw(tmp, src);
        ml_copy_raw(dst, tmp);
        ml_release(tmp);
    } else {
        ml_copy_raw(dst, src);
    }
    dst->storage->version++;
    return ML_OK;
}

ml_status ml_fill_(ml_tensor *dst, double value) {
    if (check_inplace("fill_", dst)) return ML_ERR_STATE;
    ml_fill_raw(dst, value);
    dst->storage->version++;
    return ML_OK;
}
/* ------------------------------------------------------------------ views */

static ml_status view_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    const ml_view_spec *v = node->ctx;
    if (v->kind == ML_VIEW_EXPAND) {
        gin[0] = ml_sum_to_shape(g, node->in_ndim[0], node->in_shape[0]);
        return gin[0] ? ML_OK : ml_last_status();
    }
    if (v->kind == ML_VIEW_VIEW) { /* a reshape: its gradient is g's elements in their order, so g
                                      * itself in the input's shape (no zeroed base and copy of it) */
        ml_tensor *c = ml_contiguous(g);
        ml_view_spec back = {.kind = ML_VIEW_VIEW, .ndim = node->in_ndim[0]};
        memcpy(back.shape, node->in_shape[0], sizeof(int64_t) * (size_t)back.ndim);
        gin[0] = c ? ml_view_apply(c, &back) : NULL;
        ml_release(c);
        return gin[0] ? ML_OK : ml_fail(ML_ERR_MEM, "view backward: out of memory");
    }
    ml_tensor *base = ml_zeros(ML_F32, node->in_ndim[0], node->in_shape[0]);
    if (!base) return ML_ERR_MEM;
    ml_tensor *win = ml_view_apply(base, v);
    if (!win) {
        ml_release(base);
        return ml_fail(ML_ERR_STATE, "view backward: cannot re-create the view");
    }
    ml_copy_raw(win, g);
    ml_release(win);
    gin[0] = base;
    return ML_OK;
}

/* Creates the view v of t; when recording, the node keeps `bw_spec` (the spec its backward
 * needs: v itself, or the inverse permutation) and runs `bw`. */
static ml_tensor *make_view_bw(ml_tensor *t, const ml_view_spec *v, const char *name, ml_backward_fn bw,
                               const ml_view_spec *bw_spec) {
    ml_tensor *out = ml_view_apply(t, v);
    if (!out) {
        ml_fail(ML_ERR_MEM, "out of memory");
        return NULL;
    }
    if (ml_needs_grad(t)) {
        ml_node *n = ml_node_new(name, bw, 1, &t);
        ml_view_spec *copy = malloc(sizeof *copy);
        if (!n || !copy) {
            free(copy);
            ml_node_release(n);
            ml_release(out);
            ml_fail(ML_ERR_MEM, "out of memory");
            return NULL;
        }
        *copy = *bw_spec;
        n->ctx = copy;
        n->ctx_free = free;
        ml_attach(out, n);
    }
    return out;
}

static ml_tensor *make_view(ml_tensor *t, const ml_view_spec *v, const char *name) {
    return make_view_bw(t, v, name, view_backward, v);
}

static ml_status permute_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *p = ml_view_apply(g, node->ctx); /* ctx holds the inverse permutation */
    if (!p) return ml_fail(ML_ERR_MEM, "out of memory");
    gin[0] = ml_copy_contiguous(p, ML_F32);
    ml_release(p);
    return gin[0] ? ML_OK : ML_ERR_MEM;
}

static int check_dim(const char *fn, int arg, int dim, int ndim) {
    int d = ml_dim(dim, ndim);
    if (d < 0 || (ndim == 0))
        ml_fail(ML_ERR_INDEX, "%s: argument %d expected a dimension in [%d, %d], got %d", fn, arg, -ndim, ndim - 1,
                dim);
    return ndim == 0 ? -1 : d;
}

ml_tensor *ml_narrow(ml_tensor *t, int dim, int64_t start, int64_t length) {
    int d = check_dim("narrow", 2, dim, t->ndim);
    if (d < 0) return NULL;
    if (start < 0) start += t->shape[d];
    if (start < 0 || length < 0 || start > t->shape[d] || length > t->shape[d] - start) { /* no overflow */
        ml_fail(ML_ERR_INDEX, "narrow: start %lld and length %lld out of range for dim %d of size %lld",
                (long long)start, (long long)length, d, (long long)t->shape[d]);
        return NULL;
    }
    ml_view_spec v = {.kind = ML_VIEW_NARROW, .dim = d, .a = start, .b = length};
    return make_view(t, &v, "NarrowBackward");
}

ml_tensor *ml_slice(ml_tensor *t, int dim, int64_t start, int64_t stop, int64_t step) {
    int d = check_dim("slice", 2, dim, t->ndim);
    if (d < 0) return NULL;
    int64_t n = t->shape[d];
    if (step <= 0) {
        ml_fail(ML_ERR_ARG, "slice: step expected > 0, got %lld", (long long)step);
        return NULL;
    }
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    if (start < 0) start = 0;
    if (stop > n) stop = n;
    if (start > n) start = n;
    if (stop < start) stop = start;
    ml_view_spec v = {.kind = ML_VIEW_SLICE, .dim = d, .a = start, .b = stop, .c = step};
    return make_view(t, &v, "SliceBackward");
}

ml_tensor *ml_select(ml_tensor *t, int dim, int64_t index) {
    int d = check_dim("select", 2, dim, t->ndim);
    if (d < 0) return NULL;
    int64_t i = index < 0 ? index + t->shape[d] : index;
    if (i < 0 || i >= t->shape[d]) {
        ml_fail(ML_ERR_INDEX, "select: index %lld out of range for dim %d of size %lld", (long long)index, d,
                (long long)t->shape[d]);
        return NULL;
    }
    ml_view_spec v = {.kind = ML_VIEW_SELECT, .dim = d, .c = i};
    return make_view(t, &v, "SelectBackward");
}

ml_tensor *ml_permute(ml_tensor *t, const int *perm) {
    ml_view_spec v = {.kind = ML_VIEW_PERMUTE};
    bool seen[ML_MAX_DIMS] = {false};
    for (int d = 0; d < t->ndim; d++) {
        int p = ml_dim(perm[d], t->ndim);
        if (p < 0 || seen[p]) {
            ml_fail(ML_ERR_ARG, "permute: expected a permutation of 0..%d, got %d at position %d", t->ndim - 1,
                    perm[d], d);
            return NULL;
        }
        seen[p] = true;
        v.perm[d] = p;
    }
    ml_view_spec inv = v;
    for (int d = 0; d < t->ndim; d++) inv.perm[v.perm[d]] = d;
    return make_view_bw(t, &v, "PermuteBackward", permute_backward, &inv);
}

ml_tensor *ml_transpose(ml_tensor *t, int d0, int d1) {
    int a = check_dim("transpose", 2, d0, t->ndim);
    if (a < 0) return NULL;
    int b = check_dim("transpose", 3, d1, t->ndim);
    if (b < 0) return NULL;
    int perm[ML_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) perm[d] = d;
    perm[a] = b;
    perm[b] = a;
    return ml_permute(t, perm);
}

/* Resolves one -1 in a requested shape against numel; checks the element count. */
static ml_status resolve_shape(const char *fn, const ml_tensor *t, int ndim, const int64_t *in, int64_t *out) {
    if (ndim < 0 || ndim > ML_MAX_DIMS)
        return ml_fail(ML_ERR_SHAPE, "%s: expected at most %d dimensions, got %d", fn, ML_MAX_DIMS, ndim);
    int infer = -1;
    int64_t known = 1, extent = 1; /* extent: the product with sizes of 0 counted as 1 */
    for (int d = 0; d < ndim; d++) {
        out[d] = in[d];
        if (in[d] == -1) {
            if (infer >= 0) return ml_fail(ML_ERR_SHAPE, "%s: only one dimension can be -1", fn);
            infer = d;
        } else if (in[d] < 0) {
            return ml_fail(ML_ERR_SHAPE, "%s: expected sizes >= 0 (or one -1), got %lld", fn, (long long)in[d]);
        } else {
            int64_t s = in[d] ? in[d] : 1;
            if (extent > ML_MAX_EXTENT / s || (in[d] && known > ML_MAX_NUMEL / in[d])) {
                char s1[ML_SHAPE_STR];
                return ml_fail(ML_ERR_MEM,
                               "%s: size too large (shape %s: at most 2^40 elements, and 2^62 counting sizes of 0 as 1)",
                               fn, ml_shape_str(s1, ndim, in));
            }
            extent *= s;
            known *= in[d];
        }
    }
    int64_t n = ml_numel(t);
    if (infer >= 0) {
        if (known == 0 || n % known)
            goto mismatch;
        out[infer] = n / known;
        known = n;
    }
    if (known != n) goto mismatch;
    return ML_OK;
mismatch: {
    char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
    return ml_fail(ML_ERR_SHAPE, "%s: shape %s is invalid for a tensor of shape %s (%lld elements)", fn,
                   ml_shape_str(s1, ndim, in), ml_shape_str(s2, t->ndim, t->shape), (long long)n);
}
}

ml_tensor *ml_view(ml_tensor *t, int ndim, const int64_t *shape) {
    ml_view_spec v = {.kind = ML_VIEW_VIEW, .ndim = ndim};
    if (resolve_shape("view", t, ndim, shape, v.shape)) return NULL;
    ml_tensor *probe = ml_view_apply(t, &v);
    if (!probe) {
        ml_fail(ML_ERR_SHAPE, "view: the tensor's strides are not compatible with the new shape; use reshape");
        return NULL;
    }
    ml_release(probe);
    return make_view(t, &v, "ViewBackward");
}

ml_tensor *ml_reshape(ml_tensor *t, int ndim, const int64_t *shape) {
    ml_view_spec v = {.kind = ML_VIEW_VIEW, .ndim = ndim};
    if (resolve_shape("reshape", t, ndim, shape, v.shape)) return NULL;
    ml_tensor *probe = ml_view_apply(t, &v);
    if (probe) {
        ml_release(probe);
        return make_view(t, &v, "ViewBackward");
    }
    ml_tensor *c = ml_contiguous(t);
    if (!c) return NULL;
    ml_tensor *out = make_view(c, &v, "ViewBackward");
    ml_release(c);
    return out;
}

ml_tensor *ml_expand(ml_tensor *t, int ndim, const int64_t *shape) {
    if (ndim < t->ndim || ndim > ML_MAX_DIMS) {
        ml_fail(ML_ERR_SHAPE, "expand: expected at least %d and at most %d dimensions, got %d", t->ndim, ML_MAX_DIMS,
                ndim);
        return NULL;
    }
    ml_view_spec v = {.kind = ML_VIEW_EXPAND, .ndim = ndim};
    int shift = ndim - t->ndim;
    for (int d = 0; d < ndim; d++) {
        int od = d - shift;
        int64_t want = shape[d];
        if (want == -1) {
            if (od < 0) {
                ml_fail(ML_ERR_SHAPE, "expand: -1 is not allowed for a new leading dimension %d", d);
                return NULL;
            }
            want = t->shape[od];
        }
        if (want < 0 || (od >= 0 && t->shape[od] != 1 && t->shape[od] != want)) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            ml_fail(ML_ERR_SHAPE, "expand: cannot expand shape %s to %s", ml_shape_str(s1, t->ndim, t->shape),
                    ml_shape_str(s2, ndim, shape));
            return NULL;
        }
        v.shape[d] = want;
    }
    if (ml_check_shape("expand", 2, ndim, v.shape)) return NULL;
    return make_view(t, &v, "ExpandBackward");
}

ml_tensor *ml_unsqueeze(ml_tensor *t, int dim) {
    int d = ml_dim(dim, t->ndim + 1);
    if (d < 0 || t->ndim >= ML_MAX_DIMS) {
        ml_fail(ML_ERR_INDEX, "unsqueeze: argument 2 expected a dimension in [%d, %d], got %d", -t->ndim - 1,
                t->ndim, dim);
        return NULL;
    }
    int64_t shape[ML_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) shape[i] = i == d ? 1 : t->shape[j++];
    return ml_reshape(t, t->ndim + 1, shape);
}

ml_tensor *ml_squeeze(ml_tensor *t, int dim) {
    int d = check_dim("squeeze", 2, dim, t->ndim);
    if (d < 0) return NULL;
    if (t->shape[d] != 1) {
        ml_fail(ML_ERR_SHAPE, "squeeze: dimension %d has size %lld, expected 1", d, (long long)t->shape[d]);
        return NULL;
    }
    int64_t shape[ML_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++)
        if (i != d) shape[j++] = t->shape[i];
    return ml_reshape(t, t->ndim - 1, shape);
}

ml_tensor *ml_flatten(ml_tensor *t, int start_dim, int end_dim) {
    if (t->ndim == 0) return ml_reshape(t, 1, (int64_t[]){1});
    int s = check_dim("flatten", 2, start_dim, t->ndim);
    if (s < 0) return NULL;
    int e = check_dim("flatten", 3, end_dim, t->ndim);
    if (e < 0) return NULL;
    if (s > e) {
        ml_fail(ML_ERR_ARG, "flatten: argument 2 (start_dim %d) expected a dimension at or before argument 3 (end_dim %d)",
                s, e);
        return NULL;
    }
    int64_t shape[ML_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (d <= s || d > e) shape[n++] = t->shape[d];
        else shape[n - 1] *= t->shape[d];
    }
    return ml_reshape(t, n, shape);
}

/* ------------------------------------------------------------------ copies with history */

static ml_status identity_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    gin[0] = ml_retain(g);
    return ML_OK;
}

static ml_tensor *record_identity(ml_tensor *t, ml_tensor *out, const char *name) {
    if (out && ml_needs_grad(t)) {
        ml_node *n = ml_node_new(name, identity_backward, 1, &t);
        if (!n) {
            ml_release(out);
            return NULL;
        }
        ml_attach(out, n);
    }
    return out;
}

ml_tensor *ml_contiguous(ml_tensor *t) {
    if (ml_is_contiguous(t)) return ml_retain(t);
    return record_identity(t, ml_copy_contiguous(t, t->dtype), "ContiguousBackward");
}

ml_tensor *ml_clone(ml_tensor *t) { return record_identity(t, ml_copy_contiguous(t, t->dtype), "CloneBackward"); }

