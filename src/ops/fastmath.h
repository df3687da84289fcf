/* Branch-free float exp and erf that vectorise inside `#pragma omp simd` loops (the libm calls
 * do not), for the elementwise maps on the training hot path (GELU in every MLP).
 *
 * ml_fast_exp_neg: e^x for x <= 0: e^x = 2^n · e^r with n = round(x·log2 e) and |r| <= ln2/2,
 *   e^r by its Taylor series to r^7/7! (truncation error below 6e-9 relative), ln 2 split in two
 *   parts so r is exact; x is clamped at -87 (below, the float result is ~0 anyway). The build
 *   passes -fno-trapping-math so that GCC may turn such selects into vector blends.
 * ml_gelu_parts: Φ(x) and φ(x) of the standard normal, with erf from Abramowitz & Stegun 7.1.26
 *   (absolute error <= 1.5e-7) sharing one exponential with φ. */
#ifndef ML_FASTMATH_H
#define ML_FASTMATH_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ml_fast_exp_neg(float x) {
    x = x < -87.0f ? -87.0f : x;
    /* round to nearest through the float mantissa (1.5·2^23), no floorf call */
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f; /* ln2 = hi + lo */
    float p = 1.0f / 5040;
    p = p * r + 1.0f / 720;
    p = p * r + 1.0f / 120;
    p = p * r + 1.0f / 24;
    p = p * r + 1.0f / 6;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* cdf = Φ(x) = (1 + erf(x/√2))/2, pdf = φ(x) = e^{-x²/2}/√(2π) */
static inline void ml_gelu_parts(float x, float *cdf, float *pdf) {
    float z = x * 0.70710678118654752f, az = fabsf(z);
    float e = ml_fast_exp_neg(-z * z); /* = e^{-x²/2} */
    float t = 1.0f / (1.0f + 0.3275911f * az);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float erf_abs = 1.0f - poly * e;
    float erf = copysignf(erf_abs, z);
    *cdf = 0.5f * (1.0f + erf);
    *pdf = 0.39894228040143268f * e;
}

#endif
