/* Running sums along one dim over a contiguous copy seen as [outer, n, inner], accumulated in
 * double (int64 for int32) in index order. The backward of a running sum is the running sum of
 * g taken from the end: dx[k] = Σ_{j≥k} g[j]. */
#include "core/threads.h"
#include "ops/op_util.h"
#include "ops/ops.h"

static ml_status cumsum_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    int64_t outer = node->iarg[0], n = node->iarg[1], inner = node->iarg[2];
    ml_tensor *gx = ml_empty(ML_F32, node->in_ndim[0], node->in_shape[0]);
    if (!gx) return ML_ERR_MEM;
    const float *pg = ml_f32(g);
    float *d = ml_f32(gx);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double s = 0;
            for (int64_t k = n - 1; k >= 0; k--) {
                int64_t at = (o * n + k) * inner + i;
                s += pg[at];
                d[at] = (float)s;
            }
        }
    gin[0] = gx;
    return ML_OK;
}

/* One lane's running sum, in double, from base with stride `inner`. */
static void running_sum(const float *x, float *y, int64_t base, int64_t n, int64_t inner) {
    double s = 0;
    for (int64_t k = 0; k < n; k++) {
        s += x[base + k * inner];
        y[base + k * inner] = (float)s;
    }
}

ml_tensor *ml_cumsum(ml_tensor *a, int dim) {
    mlo_layout L;
    if (mlo_dim("cumsum", 2, dim, a->ndim) < 0 || !mlo_reduce_layout("cumsum", 2, a, dim, true, &L)) return NULL;
    mlo_skip_empty_rows(&L.outer, &L.n, &L.inner);
    ml_tensor *x = mlo_dense(a);
    ml_tensor *out = x ? ml_empty(a->dtype, a->ndim, a->shape) : NULL;
    if (!out) {
        ml_release(x);
        return NULL;
    }
    if (a->dtype == ML_F32) {
        /* one lane (o, i) at a time, on ml_threads_for() threads: the bits of one thread */
        int64_t lanes = L.outer * L.inner;
        int nt = ml_threads_for(lanes * L.n);
        const float *px = ml_f32(x);
        float *po = ml_f32(out);
        if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
            for (int64_t j = 0; j < lanes; j++) running_sum(px, po, j / L.inner * L.n * L.inner + j % L.inner, L.n, L.inner);
        } else
            for (int64_t j = 0; j < lanes; j++) running_sum(px, po, j / L.inner * L.n * L.inner + j % L.inner, L.n, L.inner);
    } else
        for (int64_t o = 0; o < L.outer; o++)
            for (int64_t i = 0; i < L.inner; i++) {
                int64_t si = 0;
                for (int64_t k = 0; k < L.n; k++) {
                    int64_t at = (o * L.n + k) * L.inner + i;
                    si += ml_i32(x)[at];
                    if (si < INT32_MIN || si > INT32_MAX) {
                        ml_fail(ML_ERR_ARG,
                                "cumsum: the running sum %lld of an int32 tensor overflows int32; convert to float32",
                                (long long)si);
                        ml_release(x);
                        ml_release(out);
                        return NULL;
                    }
                    ml_i32(out)[at] = (int32_t)si;
                }
            }
    ml_release(x);
    if (ml_needs_grad(a)) {
        ml_node *node = ml_node_new("CumsumBackward", cumsum_backward, 1, &a);
        if (node) {
            node->iarg[0] = L.outer;
            node->iarg[1] = L.n;
            node->iarg[2] = L.inner;
        }
        out = mlo_attach(out, node);
    }
    return out;
}
