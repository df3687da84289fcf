/* Private helpers of the mixer kernels (src/ops): thread count for OpenMP loops, a vectorisable
 * expf, a threshold below which threading is not worth its start-up cost. */
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
 * load time. Results do not depend on the pick where a loop has no cross-lane reduction (the
 * scan's loops run over channels, one lane per channel; -std=c11 forbids FMA contraction). */
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
static inline double *mlk_dalloc(size_t n) { return malloc(sizeof(double) * (n ? n : 1)); }

/* Threads for a loop doing about `work` multiply-adds: one below ~64k (fork/join costs ~µs). */
static inline int mlk_threads_for(double work) { return work < 65536.0 ? 1 : ml_threads(); }

/* expf by range reduction and a degree-7 polynomial: relative error about 1 ulp on [−87, 88], inputs
 * below are flushed to 0. Written with plain arithmetic so that `omp simd` loops vectorise it
 * (libm's expf is an opaque call that stops vectorisation). */
static inline float mlk_expf(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
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
    scale.i = ((int32_t)kf + 127) << 23;
    return x <= -87.0f ? 0.0f : p * scale.f;
}

/* exp(x) for x ≤ 0 (the scan's decays exp(Δ·A), Δ > 0 > A): mlk_expf without the upper clamp. */
static inline float mlk_expf_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float shifter = 12582912.0f;
    float kf = x * 1.44269504088896341f + shifter;
    kf -= shifter;
    float r = x - kf * 0.693145751953125f;
    r -= kf * 1.42860682030941723212e-6f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union {
        int32_t i;
        float f;
    } scale;
    scale.i = ((int32_t)kf + 127) << 23;
    return x <= -87.0f ? 0.0f : p * scale.f;
}

#endif
