/* AdamW with torch.optim.AdamW's arithmetic (see optim.h for the formulas and the order). */
#include "optim/optim.h"

#include <math.h>
#include <string.h>

#include "core/threads.h"

ml_status ml_adamw_init(ml_adamw *opt, int64_t n, double beta1, double beta2, double eps, double weight_decay) {
    memset(opt, 0, sizeof *opt);
    if (n < 0) return ml_fail(ML_ERR_ARG, "adamw: parameter count %lld is negative", (long long)n);
    /* The negated comparisons also reject NaN. */
    if (!(beta1 >= 0 && beta1 < 1)) return ml_fail(ML_ERR_ARG, "adamw: beta1 %g is not in [0, 1)", beta1);
    if (!(beta2 >= 0 && beta2 < 1)) return ml_fail(ML_ERR_ARG, "adamw: beta2 %g is not in [0, 1)", beta2);
    if (!(eps >= 0) || isinf(eps)) return ml_fail(ML_ERR_ARG, "adamw: eps %g must be finite and >= 0", eps);
    if (!(weight_decay >= 0) || isinf(weight_decay))
        return ml_fail(ML_ERR_ARG, "adamw: weight_decay %g must be finite and >= 0", weight_decay);
    int64_t shape[1] = {n};
    ml_tensor *m = ml_zeros(ML_F32, 1, shape);
    ml_tensor *v = m ? ml_zeros(ML_F32, 1, shape) : NULL;
    if (!v) {
        ml_release(m);
        return ml_last_status() != ML_OK ? ml_last_status() : ML_ERR_MEM;
    }
    opt->beta1 = beta1;
    opt->beta2 = beta2;
    opt->eps = eps;
    opt->weight_decay = weight_decay;
    opt->n = n;
    opt->step = 0;
    opt->m = m;
    opt->v = v;
    return ML_OK;
}

void ml_adamw_free(ml_adamw *opt) {
    if (!opt) return;
    ml_release(opt->m);
    ml_release(opt->v);
    memset(opt, 0, sizeof *opt);
}

void ml_adamw_reset(ml_adamw *opt) {
    if (opt->m) ml_fill_(opt->m, 0.0);
    if (opt->v) ml_fill_(opt->v, 0.0);
    opt->step = 0;
}

void ml_adamw_update(const ml_adamw *opt, int64_t offset, float *params, const float *grads, int64_t n,
                     double lr, int64_t step) {
    /* Python-side scalars (double), then the casts PyTorch applies when a Python number meets a
     * float32 tensor. */
    double bc1 = 1.0 - pow(opt->beta1, (double)step);
    double bc2 = 1.0 - pow(opt->beta2, (double)step);
    double step_size = lr / bc1;
    double bc2_sqrt = sqrt(bc2);
    const float decay = (float)(1.0 - lr * opt->weight_decay);
    const int do_decay = opt->weight_decay != 0.0;
    const float w1 = (float)(1.0 - opt->beta1);
    const float b2 = (float)opt->beta2;
    const float c2 = (float)(1.0 - opt->beta2);
    const float bc2s = (float)bc2_sqrt;
    const float epsf = (float)opt->eps;
    const float neg_step = (float)(-step_size);
    float *m = ml_f32(opt->m) + offset;
    float *v = ml_f32(opt->v) + offset;
    /* Element-wise, so the thread count cannot change the result; small arrays stay serial. */
#pragma omp parallel for schedule(static) num_threads(ml_threads()) if (n >= 65536)
    for (int64_t i = 0; i < n; i++) {
        float p = params[i];
        float g = grads[i];
        if (do_decay) p = p * decay;
        float mi = m[i] + w1 * (g - m[i]);      /* lerp with weight < 0.5 */
        float vi = v[i] * b2 + (c2 * g) * g;    /* addcmul: value * t1 * t2 */
        float d = sqrtf(vi) / bc2s + epsf;
        p = p + (neg_step * mi) / d;            /* addcdiv: value * t1 / t2 */
        m[i] = mi;
        v[i] = vi;
        params[i] = p;
    }
}

ml_status ml_adamw_step(ml_adamw *opt, float *params, const float *grads, int64_t n, double lr) {
    if (!opt->m || !opt->v) return ml_fail(ML_ERR_STATE, "adamw: optimiser is not initialised");
    if (n != opt->n)
        return ml_fail(ML_ERR_SHAPE, "adamw: step over %lld elements, the optimiser holds %lld", (long long)n,
                       (long long)opt->n);
    if (n > 0 && (!params || !grads)) return ml_fail(ML_ERR_ARG, "adamw: NULL parameter or gradient array");
    if (!isfinite(lr) || lr < 0) return ml_fail(ML_ERR_ARG, "adamw: learning rate %g must be finite and >= 0", lr);
    opt->step++;
    ml_adamw_update(opt, 0, params, grads, n, lr, opt->step);
    opt->m->storage->version++;
    opt->v->storage->version++;
    return ML_OK;
}

ml_status ml_adamw_step_tensors(ml_adamw *opt, int n_params, ml_tensor *const *params, double lr) {
    if (!opt->m || !opt->v) return ml_fail(ML_ERR_STATE, "adamw: optimiser is not initialised");
    if (!isfinite(lr) || lr < 0) return ml_fail(ML_ERR_ARG, "adamw: learning rate %g must be finite and >= 0", lr);
    if (n_params < 0 || (n_params > 0 && !params)) return ml_fail(ML_ERR_ARG, "adamw: bad parameter list");
    /* Validate everything first so that a bad list leaves parameters and state untouched. */
    int64_t total = 0;
    char b1[ML_SHAPE_STR], b2[ML_SHAPE_STR];
    for (int i = 0; i < n_params; i++) {
        const ml_tensor *p = params[i];
        if (!p) return ml_fail(ML_ERR_ARG, "adamw: parameter %d is NULL", i + 1);
        if (p->dtype != ML_F32) return ml_fail(ML_ERR_DTYPE, "adamw: parameter %d is not float32", i + 1);
        if (!ml_is_contiguous(p)) return ml_fail(ML_ERR_ARG, "adamw: parameter %d is not contiguous", i + 1);
        const ml_tensor *g = p->grad;
        if (g) {
            if (g->dtype != ML_F32 || !ml_is_contiguous(g) || !ml_same_shape(p, g))
                return ml_fail(ML_ERR_SHAPE, "adamw: gradient of parameter %d (%s %s) does not match %s float32",
                               i + 1, ml_dtype_name(g->dtype), ml_shape_str(b1, g->ndim, g->shape),
                               ml_shape_str(b2, p->ndim, p->shape));
        }
        total += ml_numel(p);
    }
    if (total != opt->n)
        return ml_fail(ML_ERR_SHAPE, "adamw: parameters hold %lld elements, the optimiser %lld", (long long)total,
                       (long long)opt->n);
    opt->step++;
    int64_t off = 0;
    for (int i = 0; i < n_params; i++) {
        ml_tensor *p = params[i];
        int64_t k = ml_numel(p);
        if (p->grad) {
            ml_adamw_update(opt, off, ml_f32(p), ml_f32(p->grad), k, lr, opt->step);
            p->storage->version++;
        }
        off += k;
    }
    opt->m->storage->version++;
    opt->v->storage->version++;
    return ML_OK;
}
