/* Private helpers of the ops (src/ops): thread count for OpenMP loops, a threshold below which
 * threading is not worth its start-up cost, and vectorisable elementary functions (exp, log1p,
 * sigmoid, softplus, the normal cdf/pdf for GELU) written in plain arithmetic so that `omp simd`
 * loops vectorise them (libm's calls are opaque and stop vectorisation). */
#ifndef ML_KERNEL_UTIL_H
#define ML_KERNEL_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* Hot per-batch-element workers are compiled for AVX-512, AVX2 and baseline x86-64 and picked at
 * load time. The kernel files are built at -O3 with FMA contraction (CMakeLists.txt), so the
 * AVX2/AVX-512 clones fuse multiply-adds that the baseline clone rounds twice, and `omp simd`
 * reductions sum in 8 or 16 lanes: bits are the same for the same machine (vector unit) and
 * thread count, not across machines (docs/kernels.md, "Determinism"). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(MLK_NO_CLONES)
#define MLK_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MLK_CLONES
#endif

/* Forces inlining of the inner-block helpers into the cloned workers (so they get the clone's ISA). */
#if defined(__GNUC__)
#define MLK_INLINE static inline __attribute__((always_inline))
#else
#define MLK_INLINE static inline
#endif

/* Scratch of n floats (doubles); never a zero-size request, so empty inputs are not "out of memory". */
static inline float *mlk_falloc(size_t n) { return malloc(sizeof(float) * (n ? n : 1)); }

/* A 64-byte aligned scratch for a product's packed operands: up to 4 MiB, this thread's buffer,
 * kept from call to call (allocated afresh each call, its pages were faulted in again each time,
 * about 16 µs a page fault on the virtual machine measured: a 192 x 64 x 1,184 weight gradient ran
 * at 10-20 GFLOP/s instead of 170; attention calls its per-sequence products hundreds of times a
 * step); past 4 MiB (the tied head's panels at D = 256) an allocation per call. NULL when out of
 * memory. Handed back with mlk_kept_release (which frees only the per-call ones). */
void *mlk_kept_scratch(size_t bytes);
void mlk_kept_release(void *p);

/* This thread's index inside an OpenMP parallel region (0 without OpenMP): picks its scratch. */
static inline int mlk_thread_id(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Threads for a loop doing about `work` multiply-adds: one below ~64k (fork/join costs ~µs). */
static inline int mlk_threads_for(double work) { return work < 65536.0 ? 1 : ml_threads(); }

/* The scaffold of a parallel loop with scratch, in one place: the thread count for `work` and one
 * allocation of `shared` elements for the whole loop followed by `per_thread` elements for each
 * thread (elements of `elem` bytes; align 0: malloc's alignment, else aligned_alloc's). Inside
 * the parallel region mlk_scratch_mine is the calling thread's part; free(s.base) after. */
typedef struct {
    int nt;
    size_t elem, shared, per_thread;
    void *base; /* NULL: out of memory */
} mlk_scratch;

static inline mlk_scratch mlk_scratch_new(double work, size_t elem, size_t shared, size_t per_thread, size_t align) {
    mlk_scratch s = {mlk_threads_for(work), elem, shared, per_thread, NULL};
    size_t bytes = elem * (shared + per_thread * (size_t)s.nt);
    if (!bytes) bytes = elem; /* never a zero-size request: empty inputs are not "out of memory" */
    s.base = align ? aligned_alloc(align, (bytes + align - 1) / align * align) : malloc(bytes);
    return s;
}

static inline void *mlk_scratch_mine(const mlk_scratch *s) {
    return (char *)s->base + s->elem * (s->shared + s->per_thread * (size_t)mlk_thread_id());
}

/* exp(x) for x ≤ 88 by range reduction and a degree-7 polynomial: relative error about 1 ulp on
 * [−87, 88], inputs below are flushed to 0, NaN passes through. Written with plain arithmetic so
 * that `omp simd` loops vectorise it (libm's expf is an opaque call that stops vectorisation).
 * Callers' arguments are ≤ 0 (decays, e^{−|x|}), so there is no upper clamp. */
static inline float mlk_expf_neg(float x) {
    float in = x;
    x = x < -87.0f ? -87.0f : x;
    x = in == in ? x : 0.0f; /* NaN: compute on 0 (no NaN reaches the float-to-int conversion) */
    const float shifter = 12582912.0f; /* 1.5·2^23: adding it rounds to an integer */
    float kf = x * 1.44269504088896341f + shifter;
    kf -= shifter;
    float r = x - kf * 0.693145751953125f; /* ln2 split in a hi part exact in float ... */
    r -= kf * 1.42860682030941723212e-6f;  /* ... and a lo part */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union { /* 2^k from its exponent bits (a union keeps the loop vectorisable; memcpy does not) */
        int32_t i;
        float f;
    } scale;
    scale.i = (int32_t)((uint32_t)((int32_t)kf + 127) << 23);
    return in == in ? (x <= -87.0f ? 0.0f : p * scale.f) : in;
}

/* log(u) for u in [1, 2]: 2·atanh(s), s = (u − 1)/(u + 1) <= 1/3, series to s^13 (error < 1e-8). */
static inline float mlk_log_1_2(float u) {
    float s = (u - 1.0f) / (u + 1.0f), s2 = s * s;
    float p = 1.0f / 13.0f;
    p = p * s2 + 1.0f / 11.0f;
    p = p * s2 + 1.0f / 9.0f;
    p = p * s2 + 1.0f / 7.0f;
    p = p * s2 + 1.0f / 5.0f;
    p = p * s2 + 1.0f / 3.0f;
    p = p * s2 + 1.0f;
    return 2.0f * s * p;
}

/* sigmoid through e^{−|x|}, which never overflows; t/(1 + t) for x < 0 stays accurate. */
static inline float mlk_sigmoid(float x) {
    float t = mlk_expf_neg(x < 0 ? x : -x), r = 1.0f / (1.0f + t);
    return x < 0 ? t * r : r;
}

/* softplus with PyTorch's threshold (x above 20 is returned as is): max(x, 0) + log1p(e^{−|x|}),
 * log1p(t) = log(u)·t/(u − 1) with u = 1 + t keeping full relative accuracy for small t. */
static inline float mlk_softplus_t(float x, float t) { /* t = e^{−|x|} */
    float u = 1.0f + t, d = u - 1.0f;
    float l1p = d == 0.0f ? t : mlk_log_1_2(u) * (t / d);
    float y = (x > 0 ? x : 0.0f) + l1p;
    return x > 20.0f ? x : y;
}
static inline float mlk_softplus(float x) { return mlk_softplus_t(x, mlk_expf_neg(x < 0 ? x : -x)); }

/* The standard normal's cdf Φ(x) = (1 + erf(x/√2))/2 and pdf φ(x) = e^{−x²/2}/√(2π), erf by
 * Abramowitz & Stegun 7.1.26 (absolute error <= 1.5e-7) sharing its exponential with φ. */
static inline void mlk_normal_cdf_pdf(float x, float *cdf, float *pdf) {
    float z = x * 0.70710678118654752f, az = z < 0 ? -z : z;
    float e = mlk_expf_neg(-z * z);
    float t = 1.0f / (1.0f + 0.3275911f * az);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float erf_abs = 1.0f - poly * e;
    *cdf = 0.5f * (1.0f + (z < 0 ? -erf_abs : erf_abs));
    *pdf = 0.39894228040143268f * e;
}

#endif
