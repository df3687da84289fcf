#include "core/tensor.h"

#include <math.h>
#include <stdlib.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string.h>

#include "autograd/autograd.h"
#include "core/iter.h"

/* ------------------------------------------------------------------ storage & lifetime */

static size_t live_bytes = 0;
size_t ml_storage_live_bytes(void) { return live_bytes; }

/* Training allocates and frees the same large buffers every step. glibc would serve each from
 * fresh mmap'd pages (page faults every step); keeping them in the heap reuses warm memory. */
static void malloc_tune(void) {
#ifdef __GLIBC__
    static bool done = false;
    if (done) return;
    done = true;
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

static ml_storage *storage_new(size_t nbytes) {
    malloc_tune();
    ml_storage *s = malloc(sizeof *s);
    if (!s) return NULL;
    size_t rounded = (nbytes + 63) / 64 * 64;
    s->data = aligned_alloc(64, rounded ? rounded : 64);
    if (!s->data) {
        free(s);
        return NULL;
    }
    s->nbytes = nbytes;
    s->refcount = 1;
    s->version = 0;
    live_bytes += nbytes;
    return s;
}

static void storage_release(ml_storage *s) {
    if (s && --s->refcount == 0) {
        live_bytes -= s->nbytes;
        free(s->data);
        free(s);
    }
}

ml_tensor *ml_retain(ml_tensor *t) {
    if (t) t->refcount++;
    return t;
}

void ml_release(ml_tensor *t) {
    if (!t || --t->refcount > 0) return;
    storage_release(t->storage);
    ml_release(t->grad);
    if (t->grad_fn) ml_node_release(t->grad_fn);
    free(t);
}

/* ------------------------------------------------------------------ information */

int64_t ml_numel(const ml_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

bool ml_is_contiguous(const ml_tensor *t) {
    int64_t expect = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] != 1 && t->stride[d] != expect) return false;
        expect *= t->shape[d];
    }
    return true;
}

bool ml_same_shape(const ml_tensor *a, const ml_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return false;
    return true;
}

const char *ml_dtype_name(ml_dtype d) { return d == ML_F32 ? "float32" : "int32"; }
size_t ml_dtype_size(ml_dtype d) { return 4; }

int ml_dim(int dim, int ndim) {
    int n = ndim ? ndim : 1; /* a 0-dim tensor accepts dim 0 / -1 like PyTorch */
    if (dim < -n || dim >= n) return -1;
    return dim < 0 ? dim + n : dim;
}

ml_status ml_check_shape(const char *fn, int arg, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > ML_MAX_DIMS)
        return ml_fail(ML_ERR_SHAPE, "%s: argument %d has %d dimensions, expected at most %d", fn, arg, ndim,
                       ML_MAX_DIMS);
    /* extent: the product with sizes of 0 counted as 1, since an empty tensor's strides still
     * multiply its other sizes */
    int64_t n = 1, extent = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return ml_fail(ML_ERR_SHAPE, "%s: argument %d has size %lld at dim %d, expected a size >= 0", fn, arg,
                           (long long)shape[d], d);
        int64_t s = shape[d] ? shape[d] : 1;
        if (extent > ML_MAX_EXTENT / s || (shape[d] && n > ML_MAX_NUMEL / shape[d])) {
            char str[ML_SHAPE_STR];
            return ml_fail(ML_ERR_MEM, "%s: argument %d: size too large (shape %s: at most 2^40 elements, and 2^62 counting sizes of 0 as 1)", fn,
                           arg, ml_shape_str(str, ndim, shape));
        }
        extent *= s;
        n *= shape[d];
    }
    return ML_OK;
}

/* ------------------------------------------------------------------ creation */

static ml_tensor *tensor_alloc(ml_dtype dtype, int ndim, const int64_t *shape, ml_storage *storage, int64_t offset,
                               const int64_t *stride) {
    ml_tensor *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->refcount = 1;
    t->dtype = dtype;
    t->ndim = ndim;
    t->storage = storage;
    t->offset = offset;
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        t->shape[d] = shape[d];
        t->stride[d] = stride ? stride[d] : s;
        s *= shape[d];
    }
    return t;
}

ml_tensor *ml_empty(ml_dtype dtype, int ndim, const int64_t *shape) {
    if (ml_check_shape("empty", 1, ndim, shape)) return NULL;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    ml_storage *s = storage_new((size_t)n * 4);
    if (!s) {
        ml_fail(ML_ERR_MEM, "out of memory allocating %lld elements", (long long)n);
        return NULL;
    }
    ml_tensor *t = tensor_alloc(dtype, ndim, shape, s, 0, NULL);
    if (!t) storage_release(s);
    return t;
}

ml_tensor *ml_zeros(ml_dtype dtype, int ndim, const int64_t *shape) {
    ml_tensor *t = ml_empty(dtype, ndim, shape);
    if (t) memset(t->storage->data, 0, t->storage->nbytes);
    return t;
}

ml_tensor *ml_full(ml_dtype dtype, int ndim, const int64_t *shape, double value) {
    ml_tensor *t = ml_empty(dtype, ndim, shape);
    if (t) ml_fill_(t, value);
    return t;
}

ml_tensor *ml_scalar(ml_dtype dtype, double value) { return ml_full(dtype, 0, NULL, value); }

ml_tensor *ml_arange(ml_dtype dtype, double start, double stop, double step) {
    if (step == 0 || !isfinite(step)) {
        ml_fail(ML_ERR_ARG, "arange: argument 3 expected a finite non-zero step, got %g", step);
        return NULL;
    }
    if (!isfinite(start) || !isfinite(stop)) {
        ml_fail(ML_ERR_ARG, "arange: expected finite start and stop, got %g and %g", start, stop);
        return NULL;
    }
    double count = ceil((stop - start) / step);
    if (count > (double)ML_MAX_NUMEL) { /* converting a larger double to int64 is undefined */
        ml_fail(ML_ERR_MEM, "arange: %g elements is too many (more than 2^40)", count);
        return NULL;
    }
    int64_t n = count > 0 ? (int64_t)count : 0;
    ml_tensor *t = ml_empty(dtype, 1, &n);
    if (!t) return NULL;
    for (int64_t i = 0; i < n; i++) {
        double v = start + (double)i * step;
        if (dtype == ML_F32) ml_f32(t)[i] = (float)v;
        else ml_i32(t)[i] = (int32_t)v;
    }
    return t;
}

ml_tensor *ml_uniform(int ndim, const int64_t *shape, double lo, double hi, ml_rng *rng) {
    ml_tensor *t = ml_empty(ML_F32, ndim, shape);
    if (!t) return NULL;
    float *p = ml_f32(t);
    for (int64_t i = 0, n = ml_numel(t); i < n; i++) p[i] = (float)(lo + (hi - lo) * (double)ml_rng_uniform(rng));
    return t;
}

ml_tensor *ml_normal(int ndim, const int64_t *shape, double mean, double std, ml_rng *rng) {
    ml_tensor *t = ml_empty(ML_F32, ndim, shape);
    if (!t) return NULL;
    float *p = ml_f32(t);
    for (int64_t i = 0, n = ml_numel(t); i < n; i++) p[i] = (float)(mean + std * ml_rng_normal(rng));
    return t;
}

ml_tensor *ml_from_f32(int ndim, const int64_t *shape, const float *data) {
    ml_tensor *t = ml_empty(ML_F32, ndim, shape);
    if (t) memcpy(ml_f32(t), data, (size_t)ml_numel(t) * 4);
    return t;
}

ml_tensor *ml_from_i32(int ndim, const int64_t *shape, const int32_t *data) {
    ml_tensor *t = ml_empty(ML_I32, ndim, shape);
    if (t) memcpy(ml_i32(t), data, (size_t)ml_numel(t) * 4);
    return t;
}

ml_tensor *ml_zeros_like(const ml_tensor *t) { return ml_zeros(t->dtype, t->ndim, t->shape); }
ml_tensor *ml_empty_like(const ml_tensor *t) { return ml_empty(t->dtype, t->ndim, t->shape); }

/* ------------------------------------------------------------------ element access */

int64_t ml_flat_offset(const ml_tensor *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->shape[d]) * t->stride[d];
        i /= t->shape[d];
    }
    return off;
}

static int64_t index_offset(const ml_tensor *t, const int64_t *idx) {
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
    return off;
}

/* Bounds check for ml_get/ml_set (the Lua binding checks first; this keeps C callers safe). */
static bool index_ok(const char *fn, const ml_tensor *t, const int64_t *idx) {
    for (int d = 0; d < t->ndim; d++)
        if (idx[d] < 0 || idx[d] >= t->shape[d]) {
            ml_fail(ML_ERR_INDEX, "%s: index %lld out of range for dim %d of size %lld", fn, (long long)idx[d], d,
                    (long long)t->shape[d]);
            return false;
        }
    return true;
}

double ml_get(const ml_tensor *t, const int64_t *idx) {
    if (!index_ok("get", t, idx)) return NAN;
    int64_t off = index_offset(t, idx);
    return t->dtype == ML_F32 ? (double)ml_f32(t)[off] : (double)ml_i32(t)[off];
}

void ml_set(ml_tensor *t, const int64_t *idx, double v) {
    if (!index_ok("set", t, idx)) return;
    int64_t off = index_offset(t, idx);
    if (t->dtype == ML_F32) ml_f32(t)[off] = (float)v;
    else ml_i32(t)[off] = (int32_t)v;
    t->storage->version++;
}

double ml_get_flat(const ml_tensor *t, int64_t i) {
    int64_t off = ml_flat_offset(t, i);
    return t->dtype == ML_F32 ? (double)ml_f32(t)[off] : (double)ml_i32(t)[off];
}

/* ------------------------------------------------------------------ copies */

ml_status ml_broadcast_shape(const char *fn, const ml_tensor *a, const ml_tensor *b, int *ndim, int64_t *shape) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int da = a->ndim - n + i, db = b->ndim - n + i;
        int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
            return ml_fail(ML_ERR_SHAPE, "%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", fn,
                           ml_shape_str(s1, a->ndim, a->shape), ml_shape_str(s2, b->ndim, b->shape), i,
                           (long long)sa, (long long)sb);
        }
        shape[i] = sa == 1 ? sb : sa;
    }
    *ndim = n;
    return ML_OK;
}

/* Strides of t seen with the (broadcast) shape out_shape: 0 along broadcast dims. */
static void broadcast_strides(const ml_tensor *t, int ndim, int64_t *strides) {
    for (int i = 0; i < ndim; i++) {
        int d = t->ndim - ndim + i;
        strides[i] = (d < 0 || t->shape[d] == 1) ? 0 : t->stride[d];
    }
}

static void copy_raw(ml_tensor *dst, const ml_tensor *src) {
    int64_t sd[ML_MAX_DIMS], ss[ML_MAX_DIMS];
    broadcast_strides(dst, dst->ndim, sd);
    for (int d = 0; d < dst->ndim; d++) sd[d] = dst->stride[d];
    broadcast_strides(src, dst->ndim, ss);
    int64_t n = ml_numel(dst);
    if (dst->dtype == src->dtype && ml_is_contiguous(dst) && ml_is_contiguous(src) && ml_same_shape(dst, src)) {
        memcpy(ml_f32(dst), ml_f32(src), (size_t)n * 4);
        return;
    }
    /* one row of the last dim at a time (views such as column blocks of a projection copy at
     * memcpy speed); the iterator steps over the rows */
    int nd = dst->ndim;
    int64_t len = nd ? dst->shape[nd - 1] : 1, a = nd ? sd[nd - 1] : 0, b = nd ? ss[nd - 1] : 0;
    int64_t rows = len ? n / len : 0;
    ml_iter it;
    ml_iter_init(&it, nd ? nd - 1 : 0, dst->shape, 2, (const int64_t *[]){sd, ss});
    for (int64_t r = 0; r < rows; r++, ml_iter_next(&it)) {
        if (dst->dtype == src->dtype) { /* 4-byte elements either way: copy the bits */
            uint32_t *y = (uint32_t *)dst->storage->data + dst->offset + it.off[0];
            const uint32_t *x = (const uint32_t *)src->storage->data + src->offset + it.off[1];
            if (a == 1 && b == 1) memcpy(y, x, sizeof(uint32_t) * (size_t)len);
            else
                for (int64_t j = 0; j < len; j++) y[j * a] = x[j * b];
        } else if (dst->dtype == ML_F32) {
            float *y = ml_f32(dst) + it.off[0];
            const int32_t *x = ml_i32(src) + it.off[1];
            for (int64_t j = 0; j < len; j++) y[j * a] = (float)x[j * b];
        } else {
            int32_t *y = ml_i32(dst) + it.off[0];
            const float *x = ml_f32(src) + it.off[1];
            for (int64_t j = 0; j < len; j++) y[j * a] = (int32_t)x[j * b];
        }
    }
}

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
        copy_raw(tmp, src);
        copy_raw(dst, tmp);
        ml_release(tmp);
    } else {
        copy_raw(dst, src);
    }
    dst->storage->version++;
    return ML_OK;
}

ml_status ml_fill_(ml_tensor *dst, double value) {
    if (check_inplace("fill_", dst)) return ML_ERR_STATE;
    int64_t n = ml_numel(dst);
    if (ml_is_contiguous(dst)) {
        if (dst->dtype == ML_F32)
            for (int64_t i = 0; i < n; i++) ml_f32(dst)[i] = (float)value;
        else
            for (int64_t i = 0; i < n; i++) ml_i32(dst)[i] = (int32_t)value;
    } else {
        for (int64_t i = 0; i < n; i++) {
            int64_t off = ml_flat_offset(dst, i);
            if (dst->dtype == ML_F32) ml_f32(dst)[off] = (float)value;
            else ml_i32(dst)[off] = (int32_t)value;
        }
    }
    dst->storage->version++;
    return ML_OK;
}

static ml_tensor *contiguous_copy(ml_tensor *t, ml_dtype dtype) {
    ml_tensor *out = ml_empty(dtype, t->ndim, t->shape);
    if (out) copy_raw(out, t);
    return out;
}

/* ------------------------------------------------------------------ views */

typedef enum { V_NARROW, V_SLICE, V_SELECT, V_PERMUTE, V_VIEW, V_EXPAND } view_kind;

/* A view described by its kind and parameters, so backward can re-create it on a zeros base. */
typedef struct {
    view_kind kind;
    int dim;
    int64_t a, b, c; /* start/length, start/stop/step, index */
    int perm[ML_MAX_DIMS];
    int ndim;
    int64_t shape[ML_MAX_DIMS];
} view_spec;

static ml_tensor *apply_view(ml_tensor *t, const view_spec *v) {
    int64_t shape[ML_MAX_DIMS], stride[ML_MAX_DIMS];
    int nd = t->ndim;
    int64_t off = t->offset;
    memcpy(shape, t->shape, sizeof shape);
    memcpy(stride, t->stride, sizeof stride);
    switch (v->kind) {
    case V_NARROW:
        off += v->a * t->stride[v->dim];
        shape[v->dim] = v->b;
        break;
    case V_SLICE: {
        int64_t len = v->b > v->a ? (v->b - v->a - 1) / v->c + 1 : 0;
        if (len) off += v->a * t->stride[v->dim];
        shape[v->dim] = len;
        if (len > 1) stride[v->dim] *= v->c; /* then step < size: no overflow */
        break;
    }
    case V_SELECT:
        off += v->c * t->stride[v->dim];
        for (int d = v->dim; d < nd - 1; d++) shape[d] = shape[d + 1], stride[d] = stride[d + 1];
        nd--;
        break;
    case V_PERMUTE:
        for (int d = 0; d < nd; d++) shape[d] = t->shape[v->perm[d]], stride[d] = t->stride[v->perm[d]];
        break;
    case V_VIEW: {
        /* Map the new shape onto t's strides: split/merge runs of dims that are contiguous. */
        int64_t nstride[ML_MAX_DIMS];
        if (ml_numel(t) == 0) { /* no elements: any strides do; use contiguous ones */
            int64_t s = 1;
            for (int d = v->ndim - 1; d >= 0; d--) {
                nstride[d] = s;
                s *= v->shape[d] ? v->shape[d] : 1;
            }
            nd = v->ndim;
            memcpy(shape, v->shape, sizeof shape);
            memcpy(stride, nstride, sizeof stride);
            break;
        }
        int od = 0, ndi = 0;
        while (ndi < v->ndim || od < nd) {
            /* gather a group of old dims and new dims with equal element count */
            int64_t on = 1, nn = 1;
            int o0 = od, n0 = ndi;
            if (od < nd) on = t->shape[od++];
            if (ndi < v->ndim) nn = v->shape[ndi++];
            while (on != nn) {
                if (on < nn) {
                    if (od >= nd) return NULL;
                    on *= t->shape[od++];
                } else {
                    if (ndi >= v->ndim) return NULL;
                    nn *= v->shape[ndi++];
                }
            }
            /* absorb trailing size-1 dims on both sides */
            while (od < nd && t->shape[od] == 1 && (ndi >= v->ndim || v->shape[ndi] != 1)) od++;
            while (ndi < v->ndim && v->shape[ndi] == 1 && (od >= nd || t->shape[od] != 1)) nstride[ndi++] = 1;
            /* old dims o0..od-1 must be mutually contiguous (ignoring size-1 dims) */
            int64_t inner = 0;
            bool have = false;
            for (int d = od - 1; d >= o0; d--) {
                if (t->shape[d] == 1) continue;
                if (have && t->stride[d] != inner) return NULL;
                inner = t->stride[d] * t->shape[d];
                have = true;
            }
            int64_t base = 1;
            for (int d = od - 1; d >= o0; d--)
                if (t->shape[d] != 1) {
                    base = t->stride[d];
                    break;
                }
            int64_t s = base;
            int last_new = ndi;
            for (int d = last_new - 1; d >= n0; d--) {
                nstride[d] = s;
                s *= v->shape[d];
            }
        }
        nd = v->ndim;
        memcpy(shape, v->shape, sizeof shape);
        memcpy(stride, nstride, sizeof stride);
        break;
    }
    case V_EXPAND: {
        int shift = v->ndim - nd;
        for (int d = v->ndim - 1; d >= 0; d--) {
            int od = d - shift;
            if (od >= 0 && t->shape[od] == v->shape[d]) {
                shape[d] = t->shape[od];
                stride[d] = t->stride[od];
            } else {
                shape[d] = v->shape[d];
                stride[d] = 0;
            }
        }
        nd = v->ndim;
        break;
    }
    }
    ml_tensor *out = tensor_alloc(t->dtype, nd, shape, t->storage, off, stride);
    if (!out) return NULL;
    t->storage->refcount++;
    return out;
}

static ml_status view_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    const view_spec *v = node->ctx;
    if (v->kind == V_EXPAND) {
        gin[0] = ml_sum_to_shape(g, node->in_ndim[0], node->in_shape[0]);
        return gin[0] ? ML_OK : ml_last_status();
    }
    ml_tensor *base = ml_zeros(ML_F32, node->in_ndim[0], node->in_shape[0]);
    if (!base) return ML_ERR_MEM;
    ml_tensor *win = apply_view(base, v);
    if (!win) {
        ml_release(base);
        return ml_fail(ML_ERR_STATE, "view backward: cannot re-create the view");
    }
    copy_raw(win, g);
    ml_release(win);
    gin[0] = base;
    return ML_OK;
}

/* Creates the view v of t; when recording, the node keeps `bw_spec` (the spec its backward
 * needs: v itself, or the inverse permutation) and runs `bw`. */
static ml_tensor *make_view_bw(ml_tensor *t, const view_spec *v, const char *name, ml_backward_fn bw,
                               const view_spec *bw_spec) {
    ml_tensor *out = apply_view(t, v);
    if (!out) {
        ml_fail(ML_ERR_MEM, "out of memory");
        return NULL;
    }
    if (ml_needs_grad(t)) {
        ml_node *n = ml_node_new(name, bw, 1, &t);
        view_spec *copy = malloc(sizeof *copy);
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

static ml_tensor *make_view(ml_tensor *t, const view_spec *v, const char *name) {
    return make_view_bw(t, v, name, view_backward, v);
}

static ml_status permute_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *p = apply_view(g, node->ctx); /* ctx holds the inverse permutation */
    if (!p) return ml_fail(ML_ERR_MEM, "out of memory");
    gin[0] = contiguous_copy(p, ML_F32);
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
    view_spec v = {.kind = V_NARROW, .dim = d, .a = start, .b = length};
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
    view_spec v = {.kind = V_SLICE, .dim = d, .a = start, .b = stop, .c = step};
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
    view_spec v = {.kind = V_SELECT, .dim = d, .c = i};
    return make_view(t, &v, "SelectBackward");
}

ml_tensor *ml_permute(ml_tensor *t, const int *perm) {
    view_spec v = {.kind = V_PERMUTE};
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
    view_spec inv = v;
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
                return ml_fail(ML_ERR_MEM, "%s: size too large (shape %s: at most 2^40 elements, and 2^62 counting sizes of 0 as 1)", fn,
                               ml_shape_str(s1, ndim, in));
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
    view_spec v = {.kind = V_VIEW, .ndim = ndim};
    if (resolve_shape("view", t, ndim, shape, v.shape)) return NULL;
    ml_tensor *probe = apply_view(t, &v);
    if (!probe) {
        ml_fail(ML_ERR_SHAPE, "view: the tensor's strides are not compatible with the new shape; use reshape");
        return NULL;
    }
    ml_release(probe);
    return make_view(t, &v, "ViewBackward");
}

ml_tensor *ml_reshape(ml_tensor *t, int ndim, const int64_t *shape) {
    view_spec v = {.kind = V_VIEW, .ndim = ndim};
    if (resolve_shape("reshape", t, ndim, shape, v.shape)) return NULL;
    ml_tensor *probe = apply_view(t, &v);
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
    view_spec v = {.kind = V_EXPAND, .ndim = ndim};
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
    return record_identity(t, contiguous_copy(t, t->dtype), "ContiguousBackward");
}

ml_tensor *ml_clone(ml_tensor *t) { return record_identity(t, contiguous_copy(t, t->dtype), "CloneBackward"); }

ml_tensor *ml_detach(ml_tensor *t) {
    ml_tensor *out = tensor_alloc(t->dtype, t->ndim, t->shape, t->storage, t->offset, t->stride);
    if (!out) {
        ml_fail(ML_ERR_MEM, "out of memory");
        return NULL;
    }
    t->storage->refcount++;
    return out;
}

ml_tensor *ml_to_dtype(ml_tensor *t, ml_dtype dtype) {
    if (t->dtype == dtype) return ml_retain(t);
    ml_tensor *out = contiguous_copy(t, dtype);
    return out; /* int32 has no gradient; float from int starts a new graph */
}

/* ------------------------------------------------------------------ comparisons */

bool ml_allclose(const ml_tensor *a, const ml_tensor *b, double rtol, double atol) {
    if (!ml_same_shape(a, b)) return false;
    for (int64_t i = 0, n = ml_numel(a); i < n; i++) {
        double x = ml_get_flat(a, i), y = ml_get_flat(b, i);
        if (isnan(x) || isnan(y)) return false;
        if (fabs(x - y) > atol + rtol * fabs(y)) return false;
    }
    return true;
}

bool ml_equal(const ml_tensor *a, const ml_tensor *b) {
    if (!ml_same_shape(a, b) || a->dtype != b->dtype) return false;
    for (int64_t i = 0, n = ml_numel(a); i < n; i++) {
        int64_t oa = ml_flat_offset(a, i), ob = ml_flat_offset(b, i);
        if (memcmp(ml_f32(a) + oa, ml_f32(b) + ob, 4)) return false;
    }
    return true;
}
