/* sort, argsort, topk along one dim. Each row ([outer, n, inner] around dim) is sorted as
 * (key, position) pairs with qsort, the position breaking ties, so the order is stable and the
 * same on every run. Values are gathered from the input with the indices (ml_gather), so their
 * gradient is gather's: g scattered back to the chosen positions. */
#include <math.h>
#include <stdlib.h>

#include "ops/op_util.h"
#include "ops/ops.h"

typedef struct {
    double key;
    int64_t pos;
} keyed;

/* NaN sorts above every number, as in PyTorch. */
static int cmp_key(double a, double b) {
    bool na = a != a, nb = b != b;
    if (na || nb) return na - nb;
    return (a > b) - (a < b);
}
static int cmp_up(const void *x, const void *y) {
    const keyed *a = x, *b = y;
    int c = cmp_key(a->key, b->key);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}
static int cmp_down(const void *x, const void *y) {
    const keyed *a = x, *b = y;
    int c = cmp_key(b->key, a->key);
    return c ? c : (a->pos > b->pos) - (a->pos < b->pos);
}

/* The positions (dim: argument darg of fn) of the first k of each row of a sorted along dim: int32, a's shape with k at dim. */
static ml_tensor *sorted_positions(const char *fn, int darg, ml_tensor *a, int dim, bool descending, int64_t k) {
    int d = mlo_dim(fn, darg, dim, a->ndim);
    mlo_layout L;
    if (d < 0 || !mlo_reduce_layout(fn, darg, a, d, true, &L)) return NULL;
    L.out_shape[d] = k;
    if (!k) L.outer = L.inner = 0; /* nothing to keep: no row to sort */
    ml_tensor *x = mlo_dense(a);
    ml_tensor *out = x ? ml_empty(ML_I32, a->ndim, L.out_shape) : NULL;
    keyed *row = out ? malloc(sizeof *row * (size_t)(L.n && L.outer ? L.n : 1)) /* no row: none to hold */ : NULL;
    if (!row) {
        if (out) ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
        ml_release(x);
        ml_release(out);
        return NULL;
    }
    int32_t *po = ml_i32(out);
    for (int64_t o = 0; o < L.outer; o++)
        for (int64_t i = 0; i < L.inner; i++) {
            int64_t base = o * L.n * L.inner + i;
            if (x->dtype == ML_I32 && L.n <= 32) {
                /* short int32 rows: (key, position) packed in one int64, insertion-sorted (stable,
                 * the order qsort gives, without its calls) */
                int64_t *w = (int64_t *)row;
                for (int64_t j = 0; j < L.n; j++) {
                    int32_t v = ml_i32(x)[base + j * L.inner];
                    w[j] = (int64_t)(descending ? ~v : v) * INT64_C(4294967296) + j; /* ~v: the order reversed */
                }
                for (int64_t j = 1; j < L.n; j++) {
                    int64_t t = w[j], b = j;
                    for (; b > 0 && w[b - 1] > t; b--) w[b] = w[b - 1];
                    w[b] = t;
                }
                for (int64_t j = 0; j < k; j++) po[(o * k + j) * L.inner + i] = (int32_t)(w[j] & 0xffffffff);
                continue;
            }
            for (int64_t j = 0; j < L.n; j++) {
                int64_t at = base + j * L.inner;
                row[j].key = x->dtype == ML_F32 ? (double)ml_f32(x)[at] : (double)ml_i32(x)[at];
                row[j].pos = j;
            }
            qsort(row, (size_t)L.n, sizeof *row, descending ? cmp_down : cmp_up);
            for (int64_t j = 0; j < k; j++) po[(o * k + j) * L.inner + i] = (int32_t)row[j].pos;
        }
    free(row);
    ml_release(x);
    return out;
}

/* values = a gathered at the positions; both returned, or ML_ERR with nothing to release. */
static ml_status with_values(ml_tensor *a, int dim, ml_tensor *idx, ml_tensor **values, ml_tensor **indices) {
    *values = *indices = NULL;
    if (!idx) return ml_last_status();
    ml_tensor *v = ml_gather(a, dim, idx);
    if (!v) {
        ml_release(idx);
        return ml_last_status();
    }
    *values = v;
    *indices = idx;
    return ML_OK;
}

static int64_t dim_size(const ml_tensor *a, int dim) {
    int d = ml_dim(dim, a->ndim);
    return a->ndim > 0 && d >= 0 ? a->shape[d] : 0;
}

ml_status ml_sort(ml_tensor *a, int dim, bool descending, ml_tensor **values, ml_tensor **indices) {
    return with_values(a, dim, sorted_positions("sort", 2, a, dim, descending, dim_size(a, dim)), values, indices);
}

ml_tensor *ml_argsort(ml_tensor *a, int dim, bool descending) {
    return sorted_positions("argsort", 2, a, dim, descending, dim_size(a, dim));
}

ml_status ml_topk(ml_tensor *a, int64_t k, int dim, bool largest, ml_tensor **values, ml_tensor **indices) {
    *values = *indices = NULL;
    if (a->ndim > 0 && ml_dim(dim, a->ndim) >= 0 && (k < 0 || k > dim_size(a, dim)))
        return ml_fail(ML_ERR_ARG, "topk: argument 2 expected k in [0, %lld] (the size of dim %d), got %lld",
                       (long long)dim_size(a, dim), ml_dim(dim, a->ndim), (long long)k);
    int64_t kk = k < 0 ? 0 : k;
    return with_values(a, dim, sorted_positions("topk", 3, a, dim, largest, kk), values, indices);
}
