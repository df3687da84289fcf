/* Reductions along one dim (or all): sum, mean, max, min, argmax, argmin, var, std. The input is seen
 * as [outer, n, inner] (n the reduced dim) on a contiguous copy; sums accumulate in double in a
 * fixed order, so results do not depend on threads or layout. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static const char *const red_names[] = {"sum", "mean", "max", "min", "argmax", "argmin", "var"};
static const char *const red_bw_names[] = {"SumBackward", "MeanBackward", "MaxBackward", "MinBackward",
                                           "ArgmaxBackward", "ArgminBackward", "VarBackward"};

/* ------------------------------------------------------------------ backward */

static ml_status reduce_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_redop op = (ml_redop)node->iarg[0];
    int64_t outer = node->iarg[1], n = node->iarg[2], inner = node->iarg[3];
    ml_tensor *gx = ml_zeros(ML_F32, node->in_ndim[0], node->in_shape[0]);
    if (!gx) return ML_ERR_MEM;
    const float *pg = ml_f32(g);
    float *d = ml_f32(gx);
    if (op == ML_SUM || op == ML_MEAN) {
        float scale = op == ML_MEAN ? (float)(1.0 / (double)n) : 1.0f;
        for (int64_t o = 0; o < outer; o++)
            for (int64_t k = 0; k < n; k++)
                for (int64_t i = 0; i < inner; i++) d[(o * n + k) * inner + i] = pg[o * inner + i] * scale;
    } else if (op == ML_MAX || op == ML_MIN) {
        ml_tensor *idx = ml_node_saved(node, 0);
        if (!idx) {
            ml_release(gx);
            return ml_last_status();
        }
        const int32_t *pi = ml_i32(idx);
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) d[(o * n + pi[o * inner + i]) * inner + i] = pg[o * inner + i];
    } else { /* var: d/dx = 2 (x - mean) / (n - correction) */
        ml_tensor *xs = ml_node_saved(node, 0);
        if (!xs) {
            ml_release(gx);
            return ml_last_status();
        }
        const float *x = ml_f32(xs);
        double dof = (double)n - (double)node->iarg[4];
        for (int64_t o = 0; o < outer; o++)
            for (int64_t i = 0; i < inner; i++) {
                double mean = 0;
                for (int64_t k = 0; k < n; k++) mean += x[(o * n + k) * inner + i];
                mean /= (double)n;
                double s = 2.0 * pg[o * inner + i] / dof;
                for (int64_t k = 0; k < n; k++) {
                    int64_t j = (o * n + k) * inner + i;
                    d[j] = (float)(s * (x[j] - mean));
                }
            }
    }
    gin[0] = gx;
    return ML_OK;
}

/* ------------------------------------------------------------------ forward */

static ml_tensor *reduce_impl(ml_redop op, ml_tensor *a, int dim, bool keepdim, int correction) {
    if ((unsigned)op > ML_VAR) {
        ml_fail(ML_ERR_ARG, "reduce: unknown operation %d", (int)op);
        return NULL;
    }
    const char *fn = red_names[op];
    mlo_layout L;
    if (!mlo_reduce_layout(fn, 2, a, dim, keepdim, &L)) return NULL;
    bool arg = op == ML_ARGMAX || op == ML_ARGMIN;
    bool extremum = arg || op == ML_MAX || op == ML_MIN;
    if (extremum && L.n == 0 && L.outer * L.inner > 0) {
        ml_fail(ML_ERR_SHAPE, "%s: argument 1 has an empty dimension to reduce (%lld elements), expected at least one",
                fn, (long long)L.n);
        return NULL;
    }
    if (op == ML_VAR && correction < 0) {
        ml_fail(ML_ERR_ARG, "var: argument 4 expected a correction >= 0, got %d", correction);
        return NULL;
    }
    bool int_in = a->dtype == ML_I32 && op != ML_MEAN && op != ML_VAR;
    ml_tensor *src = int_in ? ml_retain(a) : mlo_float(a);
    ml_tensor *x = src ? mlo_dense(src) : NULL;
    ml_release(src);
    if (!x) return NULL;
    ml_dtype odt = (arg || int_in) ? ML_I32 : ML_F32;
    ml_tensor *out = ml_empty(odt, L.out_ndim, L.out_shape);
    ml_tensor *idx = (op == ML_MAX || op == ML_MIN) && !int_in ? ml_empty(ML_I32, L.out_ndim, L.out_shape) : NULL;
    if (!out || ((op == ML_MAX || op == ML_MIN) && !int_in && !idx)) {
        ml_release(x);
        ml_release(out);
        ml_release(idx);
        return NULL;
    }
    int64_t outer = L.outer, n = L.n, inner = L.inner;
    for (int64_t o = 0; o < outer; o++) {
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i, oi = o * inner + i;
            if (int_in) {
                const int32_t *p = ml_i32(x) + base;
                if (op == ML_SUM) {
                    int64_t s = 0;
                    for (int64_t k = 0; k < n; k++) s += p[k * inner];
                    if (s < INT32_MIN || s > INT32_MAX) {
                        ml_fail(ML_ERR_ARG, "sum: the sum %lld of an int32 tensor overflows int32; convert to float32",
                                (long long)s);
                        ml_release(x);
                        ml_release(out);
                        return NULL;
                    }
                    ml_i32(out)[oi] = (int32_t)s;
                } else {
                    bool want_max = op == ML_MAX || op == ML_ARGMAX;
                    int32_t best = p[0];
                    int64_t bi = 0;
                    for (int64_t k = 1; k < n; k++) {
                        int32_t v = p[k * inner];
                        if (want_max ? v > best : v < best) best = v, bi = k;
                    }
                    ml_i32(out)[oi] = arg ? (int32_t)bi : best;
                }
                continue;
            }
            const float *p = ml_f32(x) + base;
            if (op == ML_SUM || op == ML_MEAN || op == ML_VAR) {
                double s = 0;
                for (int64_t k = 0; k < n; k++) s += p[k * inner];
                if (op == ML_SUM) {
                    ml_f32(out)[oi] = (float)s;
                } else if (op == ML_MEAN) {
                    ml_f32(out)[oi] = n ? (float)(s / (double)n) : NAN;
                } else {
                    double mean = s / (double)n, q = 0, dof = (double)n - correction;
                    for (int64_t k = 0; k < n; k++) q += ((double)p[k * inner] - mean) * ((double)p[k * inner] - mean);
                    ml_f32(out)[oi] = (n == 0 || dof <= 0) ? NAN : (float)(q / dof);
                }
            } else {
                /* first occurrence wins ties; NaN beats everything (propagates, as PyTorch) */
                bool want_max = op == ML_MAX || op == ML_ARGMAX;
                float best = p[0];
                int64_t bi = 0;
                for (int64_t k = 1; k < n && best == best; k++) {
                    float v = p[k * inner];
                    if (v != v || (want_max ? v > best : v < best)) best = v, bi = k;
                }
                if (arg) {
                    ml_i32(out)[oi] = (int32_t)bi;
                } else {
                    ml_f32(out)[oi] = best;
                    ml_i32(idx)[oi] = (int32_t)bi;
                }
            }
        }
    }
    if (!arg && !int_in && ml_needs_grad(a)) {
        ml_node *node = ml_node_new(red_bw_names[op], reduce_backward, 1, &a);
        if (node) {
            node->iarg[0] = op;
            node->iarg[1] = outer;
            node->iarg[2] = n;
            node->iarg[3] = inner;
            node->iarg[4] = correction;
            if (idx) ml_node_save(node, 0, idx);
            if (op == ML_VAR) ml_node_save(node, 0, x);
        }
        out = mlo_attach(out, node);
    }
    ml_release(idx);
    ml_release(x);
    return out;
}

ml_tensor *ml_reduce(ml_redop op, ml_tensor *a, int dim, bool keepdim) { return reduce_impl(op, a, dim, keepdim, 1); }

ml_tensor *ml_var(ml_tensor *a, int dim, bool keepdim, int correction) {
    return reduce_impl(ML_VAR, a, dim, keepdim, correction);
}

ml_tensor *ml_std(ml_tensor *a, int dim, bool keepdim, int correction) {
    ml_tensor *v = reduce_impl(ML_VAR, a, dim, keepdim, correction);
    if (!v) return NULL;
    ml_tensor *s = ml_unary(ML_SQRT, v);
    ml_release(v);
    return s;
}

ml_tensor *ml_sum_all(ml_tensor *a) { return reduce_impl(ML_SUM, a, ML_ALL_DIMS, false, 1); }
