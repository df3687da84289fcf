#include "core/tensor.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/iter.h"

/* ------------------------------------------------------------------ storage & lifetime */

static size_t live_bytes = 0;
size_t ml_storage_live_bytes(void) { return __atomic_load_n(&live_bytes, __ATOMIC_RELAXED); }

static ml_storage *storage_new(size_t nbytes) {
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
    __atomic_add_fetch(&live_bytes, nbytes, __ATOMIC_RELAXED); /* the interchange workers allocate concurrently */
    return s;
}

static void storage_release(ml_storage *s) {
    if (s && --s->refcount == 0) {
        __atomic_sub_fetch(&live_bytes, s->nbytes, __ATOMIC_RELAXED);
        free(s->data);
        free(s);
    }
}

ml_tensor *ml_retain(ml_tensor *t) {
    if (t) t->refcount++;
    return t;
}

/* Set by autograd when it attaches the first node: a tensor has a grad_fn only after that. */
static ml_history_release_fn release_history = NULL;

void ml_set_history_release(ml_history_release_fn fn) { release_history = fn; }

void ml_release(ml_tensor *t) {
    if (!t || --t->refcount > 0) return;
    storage_release(t->storage);
    ml_release(t->grad);
    if (t->grad_fn) release_history(t->grad_fn);
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
     * multiply its other sizes; the element limit applies to the whole product, wherever a 0
     * stands ([2^31, 2^31, 0] is as empty as [0, 2^31, 2^31]) */
    int64_t extent = 1;
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return ml_fail(ML_ERR_SHAPE, "%s: argument %d has size %lld at dim %d, expected a size >= 0", fn, arg,
                           (long long)shape[d], d);
        int64_t s = shape[d] ? shape[d] : 1;
        empty = empty || shape[d] == 0;
        if (extent > ML_MAX_EXTENT / s) {
            char str[ML_SHAPE_STR];
            return ml_fail(ML_ERR_MEM, "%s: argument %d: size too large (shape %s: the product of its non-zero sizes exceeds 2^62)", fn,
                           arg, ml_shape_str(str, ndim, shape));
        }
        extent *= s;
    }
    if (!empty && extent > ML_MAX_NUMEL) {
        char str[ML_SHAPE_STR];
        return ml_fail(ML_ERR_MEM, "%s: argument %d: size too large (shape %s: at most 2^40 elements)", fn, arg,
                       ml_shape_str(str, ndim, shape));
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

/* Read once: sysconf(_SC_PHYS_PAGES) is a sysinfo system call, and every tensor asks. */
static double physical_memory_bytes(void) {
    static atomic_llong known; /* bytes; 0 = not read yet, -1 = unknown */
    long long b = atomic_load_explicit(&known, memory_order_relaxed);
    if (!b) {
        long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
        b = pages > 0 && size > 0 ? (long long)pages * size : -1;
        atomic_store_explicit(&known, b, memory_order_relaxed);
    }
    return b > 0 ? (double)b : INFINITY;
}

ml_tensor *ml_empty(ml_dtype dtype, int ndim, const int64_t *shape) {
    if (ml_check_shape("empty", 1, ndim, shape)) return NULL;
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    double gib = (double)n * 4 / (1 << 30);
    if (n > ML_MAX_ALLOC_NUMEL || (double)n * 4 > physical_memory_bytes()) {
        char str[ML_SHAPE_STR];
        ml_fail(ML_ERR_MEM, "a tensor of shape %s (%.1f GiB) is too large: at most 2^30 elements (4 GiB) and "
                "this machine's %.1f GiB of memory", ml_shape_str(str, ndim, shape), gib,
                physical_memory_bytes() / (1 << 30));
        return NULL;
    }
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
    if (t) ml_fill_raw(t, value);
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

ml_tensor *ml_randint(int ndim, const int64_t *shape, int32_t lo, uint32_t span, ml_rng *rng) {
    ml_tensor *t = ml_empty(ML_I32, ndim, shape);
    if (!t) return NULL;
    int32_t *p = ml_i32(t);
    for (int64_t i = 0, n = ml_numel(t); i < n; i++) p[i] = (int32_t)((int64_t)lo + ml_rng_below(rng, span));
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

void ml_copy_raw(ml_tensor *dst, const ml_tensor *src) {
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

void ml_fill_raw(ml_tensor *dst, double value) {
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
}

ml_tensor *ml_copy_contiguous(const ml_tensor *t, ml_dtype dtype) {
    ml_tensor *out = ml_empty(dtype, t->ndim, t->shape);
    if (out) ml_copy_raw(out, t);
    return out;
}

/* ------------------------------------------------------------------ raw views */

bool ml_parse_slice(const char *s, int64_t size, int64_t *a, int64_t *b, int64_t *st) {
    *a = 0, *b = size, *st = 1;
    const char *p = s;
    int64_t *parts[3] = {a, b, st};
    for (int k = 0; k < 3; k++) {
        while (*p == ' ') p++;
        if (*p && *p != ':') {
            char *end;
            long long v = strtoll(p, &end, 10);
            if (end == p) return false;
            *parts[k] = v;
            p = end;
        }
        while (*p == ' ') p++;
        if (*p == ':') {
            if (k == 2) return false;
            p++;
        } else {
            if (*p) return false;
            return k >= 1 || strchr(s, ':') != NULL;
        }
    }
    return *p == 0;
}

ml_tensor *ml_view_apply(ml_tensor *t, const ml_view_spec *v) {
    int64_t shape[ML_MAX_DIMS], stride[ML_MAX_DIMS];
    int nd = t->ndim;
    int64_t off = t->offset;
    memcpy(shape, t->shape, sizeof shape);
    memcpy(stride, t->stride, sizeof stride);
    switch (v->kind) {
    case ML_VIEW_NARROW:
        off += v->a * t->stride[v->dim];
        shape[v->dim] = v->b;
        break;
    case ML_VIEW_SLICE: {
        int64_t len = v->b > v->a ? (v->b - v->a - 1) / v->c + 1 : 0;
        if (len) off += v->a * t->stride[v->dim];
        shape[v->dim] = len;
        if (len > 1) stride[v->dim] *= v->c; /* then step < size: no overflow */
        break;
    }
    case ML_VIEW_SELECT:
        off += v->c * t->stride[v->dim];
        for (int d = v->dim; d < nd - 1; d++) shape[d] = shape[d + 1], stride[d] = stride[d + 1];
        nd--;
        break;
    case ML_VIEW_PERMUTE:
        for (int d = 0; d < nd; d++) shape[d] = t->shape[v->perm[d]], stride[d] = t->stride[v->perm[d]];
        break;
    case ML_VIEW_VIEW: {
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
    case ML_VIEW_EXPAND: {
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
    ml_tensor *out = ml_copy_contiguous(t, dtype);
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
