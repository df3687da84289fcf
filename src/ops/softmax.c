/* softmax and log_softmax along one dim, numerically stable (the row maximum is subtracted
 * before exponentiating; sums accumulate in double). The input is seen as [outer, n, inner]. */
#include <math.h>

#include "ops/op_util.h"
#include "ops/ops.h"

static void split_dims(const ml_tensor *a, int d, int64_t *outer, int64_t *n, int64_t *inner) {
    *outer = 1;
    *inner = 1;
    for (int i = 0; i < d; i++) *outer *= a->shape[i];
    for (int i = d + 1; i < a->ndim; i++) *inner *= a->shape[i];
    *n = a->ndim ? a->shape[d] : 1;
    mlo_skip_empty_rows(outer, n, inner);
}

/* Backward from the saved output y: softmax gx = y (g - Σ g y); log_softmax gx = g - e^y Σ g. */
static ml_status softmax_backward(ml_node *node, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *ys = ml_node_saved(node, 0);
    if (!ys) return ml_last_status();
    bool logf_ = node->iarg[0] != 0;
    int64_t outer = node->iarg[1], n = node->iarg[2], inner = node->iarg[3];
    ml_tensor *gx = ml_empty(ML_F32, g->ndim, g->shape);
    if (!gx) return ML_ERR_MEM;
    const float *y = ml_f32(ys), *pg = ml_f32(g);
    float *d = ml_f32(gx);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            double s = 0;
            if (logf_) {
                for (int64_t k = 0; k < n; k++) s += pg[base + k * inner];
                for (int64_t k = 0; k < n; k++) {
                    int64_t j = base + k * inner;
                    d[j] = (float)(pg[j] - expf(y[j]) * s);
                }
            } else {
                for (int64_t k = 0; k < n; k++) s += (double)pg[base + k * inner] * y[base + k * inner];
                for (int64_t k = 0; k < n; k++) {
                    int64_t j = base + k * inner;
                    d[j] = (float)(y[j] * (pg[j] - s));
                }
            }
        }
    gin[0] = gx;
    return ML_OK;
}

static ml_tensor *softmax_impl(ml_tensor *a, int dim, bool log_) {
    const char *fn = log_ ? "log_softmax" : "softmax";
    /* a 0-dim tensor is a single row of one element, as PyTorch treats it */
    int d = a->ndim == 0 && (dim == 0 || dim == -1) ? 0 : mlo_dim(fn, 2, dim, a->ndim);
    if (d < 0) return NULL;
    if (mlo_check_f32(fn, 1, a)) return NULL;
    ml_tensor *x = mlo_dense(a);
    if (!x) return NULL;
    ml_tensor *out = ml_empty(ML_F32, a->ndim, a->shape);
    if (!out) {
        ml_release(x);
        return NULL;
    }
    int64_t outer, n, inner;
    split_dims(a, d, &outer, &n, &inner);
    const float *px = ml_f32(x);
    float *py = ml_f32(out);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t base = o * n * inner + i;
            float mx = -INFINITY;
            for (int64_t k = 0; k < n; k++) mx = fmaxf(mx, px[base + k * inner]);
            if (isinf(mx) && mx < 0) mx = 0; /* an all -inf row: keep exp finite (gives NaN, as PyTorch) */
            double s = 0;
            for (int64_t k = 0; k < n; k++) {
                float e = expf(px[base + k * inner] - mx);
                if (!log_) py[base + k * inner] = e;
                s += e;
            }
            if (log_) {
                /* (x - max) - log Σ: subtracting max + log Σ at once would lose the small part */
                float ls = (float)log(s);
                for (int64_t k = 0; k < n; k++) py[base + k * inner] = (px[base + k * inner] - mx) - ls;
            } else {
                float inv = (float)(1.0 / s);
                for (int64_t k = 0; k < n; k++) py[base + k * inner] *= inv;
            }
        }
    if (ml_needs_grad(a)) {
        ml_node *node = ml_node_new(log_ ? "LogSoftmaxBackward" : "SoftmaxBackward", softmax_backward, 1, &a);
        if (node) {
            node->iarg[0] = log_;
            node->iarg[1] = outer;
            node->iarg[2] = n;
            node->iarg[3] = inner;
            ml_node_save(node, 0, out);
        }
        out = mlo_attach(out, node);
    }
    ml_release(x);
    return out;
}

ml_tensor *ml_softmax(ml_tensor *a, int dim) { return softmax_impl(a, dim, false); }
ml_tensor *ml_log_softmax(ml_tensor *a, int dim) { return softmax_impl(a, dim, true); }
