/* AdamW with torch.optim.AdamW's arithmetic (see optim.h for the formulas and the order). */
#include "optim/optim.h"

#include <math.h>
#include <string.h>

#include "autograd/views.h"
#include "core/threads.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* The per-element constants of one update, already cast where PyTorch casts. */
typedef struct {
    float decay, w1, b2, c2, bc2s, eps, neg_step;
} adamw_consts;

/* One element, in PyTorch's order. */
static inline void adamw_one(const adamw_consts *k, float *p, float g, float *m, float *v) {
    float pd = *p * k->decay;                  /* exact when wd = 0 (decay 1); PyTorch always multiplies */
    float mi = *m + k->w1 * (g - *m);          /* exp_avg.lerp_(grad, 1-b1), weight < 0.5 form */
    float vi = *v * k->b2 + (k->c2 * g) * g;   /* addcmul: value * t1 * t2 */
    float d = sqrtf(vi) / k->bc2s + k->eps;    /* (sqrt(v) / sqrt(bc2)).add_(eps) */
    *m = mi;
    *v = vi;
    *p = pd + (k->neg_step * mi) / d;          /* addcdiv: value * t1 / t2 */
}

/* The same four at a time with SSE where available: GCC does not vectorise sqrtf (its errno
 * path) at -O2. SSE's add/mul/div/sqrt round exactly like the scalar instructions, so the bits
 * are those of adamw_one; about 3x faster. */
static void adamw_kernel(const adamw_consts *k, float *params, const float *grads, float *m, float *v, int64_t n) {
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 decay = _mm_set1_ps(k->decay), w1 = _mm_set1_ps(k->w1), b2 = _mm_set1_ps(k->b2),
                 c2 = _mm_set1_ps(k->c2), bc2s = _mm_set1_ps(k->bc2s), eps = _mm_set1_ps(k->eps),
                 neg_step = _mm_set1_ps(k->neg_step);
    for (; i + 4 <= n; i += 4) {
        __m128 g = _mm_loadu_ps(grads + i);
        __m128 mo = _mm_loadu_ps(m + i);
        __m128 pd = _mm_mul_ps(_mm_loadu_ps(params + i), decay);
        __m128 mi = _mm_add_ps(mo, _mm_mul_ps(w1, _mm_sub_ps(g, mo)));
        __m128 vi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(v + i), b2), _mm_mul_ps(_mm_mul_ps(c2, g), g));
        __m128 d = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), bc2s), eps);
        _mm_storeu_ps(m + i, mi);
        _mm_storeu_ps(v + i, vi);
        _mm_storeu_ps(params + i, _mm_add_ps(pd, _mm_div_ps(_mm_mul_ps(neg_step, mi), d)));
    }
#endif
    for (; i < n; i++) adamw_one(k, params + i, grads[i], m + i, v + i);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#include <immintrin.h>
#define ADAMW_WIDE 1
/* The same update sixteen at a time on AVX-512 (picked at run time): the tied embedding's
 * V x D elements make this pass a few % of a small-width step, and it is bound by the divisions
 * and the square root, which AVX-512 does 4x as wide. The same IEEE operations in the same
 * order (no FMA: this file is compiled without contraction), so the same bits. */
__attribute__((target("avx512f"))) static void adamw_kernel_avx512(const adamw_consts *k, float *params,
                                                                    const float *grads, float *m, float *v,
                                                                    int64_t n) {
    const __m512 decay = _mm512_set1_ps(k->decay), w1 = _mm512_set1_ps(k->w1), b2 = _mm512_set1_ps(k->b2),
                 c2 = _mm512_set1_ps(k->c2), bc2s = _mm512_set1_ps(k->bc2s), eps = _mm512_set1_ps(k->eps),
                 neg_step = _mm512_set1_ps(k->neg_step);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 g = _mm512_loadu_ps(grads + i);
        __m512 mo = _mm512_loadu_ps(m + i);
        __m512 pd = _mm512_mul_ps(_mm512_loadu_ps(params + i), decay);
        __m512 mi = _mm512_add_ps(mo, _mm512_mul_ps(w1, _mm512_sub_ps(g, mo)));
        __m512 vi = _mm512_add_ps(_mm512_mul_ps(_mm512_loadu_ps(v + i), b2), _mm512_mul_ps(_mm512_mul_ps(c2, g), g));
        __m512 d = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2s), eps);
        _mm512_storeu_ps(m + i, mi);
        _mm512_storeu_ps(v + i, vi);
        _mm512_storeu_ps(params + i, _mm512_add_ps(pd, _mm512_div_ps(_mm512_mul_ps(neg_step, mi), d)));
    }
    adamw_kernel(k, params + i, grads + i, m + i, v + i, n - i);
}
#else
#define ADAMW_WIDE 0
#endif

enum { ADAMW_CHUNK = 32768 };

void ml_adamw_kernel(double beta1, double beta2, double eps, double weight_decay, float *params, const float *grads,
                     float *m, float *v, int64_t n, double lr, int64_t step) {
    /* Python-side scalars (double), then the casts PyTorch applies when a Python number meets a
     * float32 tensor. */
    double bc1 = 1.0 - pow(beta1, (double)step);
    double bc2 = 1.0 - pow(beta2, (double)step);
    double step_size = lr / bc1;
    adamw_consts k = {
        .decay = (float)(1.0 - lr * weight_decay),
        .w1 = (float)(1.0 - beta1),
        .b2 = (float)beta2,
        .c2 = (float)(1.0 - beta2),
        .bc2s = (float)sqrt(bc2),
        .eps = (float)eps,
        .neg_step = (float)(-step_size),
    };
    /* Element-wise, so the thread count cannot change the result; small arrays stay serial. */
    int64_t chunks = (n + ADAMW_CHUNK - 1) / ADAMW_CHUNK;
    void (*kernel)(const adamw_consts *, float *, const float *, float *, float *, int64_t) = adamw_kernel;
#if ADAMW_WIDE
    if (__builtin_cpu_supports("avx512f")) kernel = adamw_kernel_avx512;
#endif
#pragma omp parallel for schedule(static) num_threads(ml_threads()) if (chunks >= 4)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t lo = c * ADAMW_CHUNK, len = n - lo < ADAMW_CHUNK ? n - lo : ADAMW_CHUNK;
        kernel(&k, params + lo, grads + lo, m + lo, v + lo, len);
    }
}

void ml_adamw_update(ml_adamw *opt, int64_t offset, float *params, const float *grads, int64_t n, double lr,
                     int64_t step) {
    ml_adamw_kernel(opt->beta1, opt->beta2, opt->eps, opt->weight_decay, params, grads, ml_f32(opt->m) + offset,
                    ml_f32(opt->v) + offset, n, lr, step);
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
