/* Vector p-norms along one dim (or all), in double over a contiguous float copy seen as
 * [outer, n, inner]. Backward: dy/dx = sign(x)·|x|^(p−1)/y^(p−1) (x/y for p = 2, sign(x) for
 * p = 1), 0 where x = 0 or y = 0; for p = ±inf, g·sign(x) split evenly between the elements
 * whose |x| equals the norm; p = 0 (a count) has gradient 0. */
#include <math.h>

#include "core/threads.h"
#include "ops/op_util.h"
#include "ops/ops.h"

static double row_norm(const float *x, int64_t n, int64_t stride, double p) {
    if (p == 2) { /* the common case without the per-element dispatch: the same sums (a NaN propagates) */
        double acc = 0;
        for (int64_t k = 0; k < n; k++) {
            double v = (double)x[k * stride];
            acc += v * v;
        }
        return acc != acc ? NAN : sqrt(acc); /* the NaN of the general loop, whatever the input's */
    }
    double acc = isinf(p) && p < 0 ? INFINITY : 0;
    for (int64_t k = 0; k < n; k++) {
        double v = fabs((double)x[k * stride]);
        if (v != v) return NAN;
        if (isinf(p)) acc = p > 0 ? fmax(acc, v) : fmin(acc, v);
        else if (p == 0) acc += v != 0;
        else if (p == 1) acc += v;
        else if (p == 2) acc += v * v;
        else acc += pow(v, p);
    }
    if (isinf(p) || p == 0 || p == 1) return acc;
    return p == 2 ? sqrt(acc) : pow(acc, 1.0 / p);
}

static ml_status norm_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *xs = ml_node_saved(node, 0), *ys = ml_node_saved(node, 1);
    if (!xs || !ys) return ml_last_status();
    int64_t outer = node->iarg[0], n = node->iarg[1], inner = node->iarg[2];
    double p = node->farg[0];
    ml_tensor *gx = ml_zeros(ML_F32, node->in_ndim[0], node->in_shape[0]);
    if (!gx) return ML_ERR_MEM;
    const float *x = ml_f32(xs), *y = ml_f32(ys), *pg = ml_f32(g);
    float *d = ml_f32(gx);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double yo = y[o * inner + i], go = pg[o * inner + i];
            int64_t base = o * n * inner + i;
            if (p == 0 || yo == 0 || yo != yo) continue;
            if (isinf(p)) {
                int64_t ties = 0;
                for (int64_t k = 0; k < n; k++) ties += fabs((double)x[base + k * inner]) == yo;
                for (int64_t k = 0; k < n; k++) {
                    double v = x[base + k * inner];
                    if (fabs(v) == yo) d[base + k * inner] = (float)(go * (v > 0 ? 1 : -1) / (double)ties);
                }
                continue;
            }
            double scale = p == 1 ? go : p == 2 ? go / yo : go / pow(yo, p - 1);
            for (int64_t k = 0; k < n; k++) {
                double v = x[base + k * inner];
                if (v == 0) continue;
                double dv = p == 1 ? 1 : p == 2 ? fabs(v) : pow(fabs(v), p - 1);
                d[base + k * inner] = (float)(scale * dv * (v > 0 ? 1 : -1));
            }
        }
    gin[0] = gx;
    return ML_OK;
}

ml_tensor *ml_norm(ml_tensor *a, double p, int dim, bool keepdim) {
    if (p != p) {
        ml_fail(ML_ERR_ARG, "norm: argument 2 expected a number p (or math.huge), got nan");
        return NULL;
    }
    mlo_layout L;
    if (!mlo_reduce_layout("norm", 3, a, dim, keepdim, &L)) return NULL;
    if (L.n == 0 && isinf(p) && L.outer * L.inner > 0) {
        ml_fail(ML_ERR_SHAPE, "norm: argument 1 has an empty dimension to reduce, expected at least one element for p = %s",
                p > 0 ? "inf" : "-inf");
        return NULL;
    }
    ml_tensor *f = mlo_float(a);
    ml_tensor *x = f ? mlo_dense(f) : NULL;
    ml_release(f);
    ml_tensor *out = x ? ml_empty(ML_F32, L.out_ndim, L.out_shape) : NULL;
    if (!out) {
        ml_release(x);
        return NULL;
    }
    /* one output at a time, on ml_threads_for() threads: the bits of one thread */
    int64_t n_out = L.outer * L.inner;
    int nt = ml_threads_for(n_out * L.n);
    const float *px = ml_f32(x);
    float *po = ml_f32(out);
    if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t j = 0; j < n_out; j++)
            po[j] = (float)row_norm(px + j / L.inner * L.n * L.inner + j % L.inner, L.n, L.inner, p);
    } else
        for (int64_t j = 0; j < n_out; j++)
            po[j] = (float)row_norm(px + j / L.inner * L.n * L.inner + j % L.inner, L.n, L.inner, p);
    if (ml_needs_grad(a)) {
        ml_node *node = ml_node_new("NormBackward", norm_backward, 1, &a);
        if (node) {
            node->iarg[0] = L.outer;
            node->iarg[1] = L.n;
            node->iarg[2] = L.inner;
            node->farg[0] = p;
            ml_node_save(node, 0, x);
            ml_node_save(node, 1, out);
        }
        out = mlo_attach(out, node);
    }
    ml_release(x);
    return out;
}
