/* Direct causal long convolution LC(u; k) (spec §1, §12), O(B·L²·C), exact: forward, backward,
 * step over a history. Channel c uses filter column c / G; an optional per-filter skip dskip·u. */
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

/* yt[c] += kf[c/G]·ut[c] over C channels (kf: one filter row, C/G entries). */
static inline void axpy_grouped(int C, int G, const float *kf, const float *ut, float *yt) {
    if (G == 1) {
#pragma omp simd
        for (int c = 0; c < C; c++) yt[c] += kf[c] * ut[c];
    } else {
        int F = C / G;
        for (int f = 0; f < F; f++) {
            float kv = kf[f];
            for (int g = 0; g < G; g++) yt[f * G + g] += kv * ut[f * G + g];
        }
    }
}

void mlk_longconv_fwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip, float *y) {
    int F = C / G;
    int nt = mlk_threads_for(0.5 * B * L * L * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) {
        const float *ub = u + (size_t)b * L * C; /* [L,C] */
        float *yb = y + (size_t)b * L * C;
        for (int t = 0; t < L; t++) {
            float *yt = yb + (size_t)t * C;
            memset(yt, 0, sizeof(float) * C);
            for (int s = 0; s <= t; s++) axpy_grouped(C, G, k + (size_t)s * F, ub + (size_t)(t - s) * C, yt);
            if (dskip) axpy_grouped(C, G, dskip, ub + (size_t)t * C, yt);
        }
    }
}

void mlk_longconv_bwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip,
                      const float *dy, float *du, float *dk, float *ddskip) {
    int F = C / G;
    int nt = mlk_threads_for(0.5 * B * L * L * C);
    if (du) {
        /* du[τ] = Σ_{t≥τ} k[t−τ]·dy[t] + dskip·dy[τ]  (anti-causal correlation), per batch element */
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int b = 0; b < B; b++) {
            const float *dyb = dy + (size_t)b * L * C;
            float *dub = du + (size_t)b * L * C;
            for (int tau = 0; tau < L; tau++) {
                float *dut = dub + (size_t)tau * C;
                memset(dut, 0, sizeof(float) * C);
                for (int t = tau; t < L; t++) axpy_grouped(C, G, k + (size_t)(t - tau) * F, dyb + (size_t)t * C, dut);
                if (dskip) axpy_grouped(C, G, dskip, dyb + (size_t)tau * C, dut);
            }
        }
    }
    if (dk || ddskip) {
        /* dk[s,f] = Σ_b Σ_{t≥s} Σ_g dy[b,t,fG+g]·u[b,t−s,fG+g]. Threads own disjoint blocks of
         * filters and write straight into dk; each element is summed in the fixed order b, t, g. */
        enum { FB = 64 };
        int nblk = (F + FB - 1) / FB;
#pragma omp parallel for num_threads(nt < nblk ? nt : nblk) schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int f0 = blk * FB, f1 = f0 + FB < F ? f0 + FB : F, fw = f1 - f0;
            if (dk) {
                for (int s = 0; s < L; s++) {
                    float *dks = dk + (size_t)s * F + f0;
                    memset(dks, 0, sizeof(float) * fw);
                    for (int b = 0; b < B; b++) {
                        const float *dyb = dy + (size_t)b * L * C + (size_t)f0 * G;
                        const float *ub = u + (size_t)b * L * C + (size_t)f0 * G;
                        for (int t = s; t < L; t++) {
                            const float *dyt = dyb + (size_t)t * C, *ut = ub + (size_t)(t - s) * C;
                            if (G == 1) {
#pragma omp simd
                                for (int f = 0; f < fw; f++) dks[f] += dyt[f] * ut[f];
                            } else {
                                for (int f = 0; f < fw; f++) {
                                    float acc = 0.0f;
                                    for (int g = 0; g < G; g++) acc += dyt[f * G + g] * ut[f * G + g];
                                    dks[f] += acc;
                                }
                            }
                        }
                    }
                }
            }
            if (ddskip) {
                float *dd = ddskip + f0;
                memset(dd, 0, sizeof(float) * fw);
                for (int b = 0; b < B; b++)
                    for (int t = 0; t < L; t++) {
                        const float *dyt = dy + ((size_t)b * L + t) * C + (size_t)f0 * G;
                        const float *ut = u + ((size_t)b * L + t) * C + (size_t)f0 * G;
                        for (int f = 0; f < fw; f++) {
                            float acc = 0.0f;
                            for (int g = 0; g < G; g++) acc += dyt[f * G + g] * ut[f * G + g];
                            dd[f] += acc;
                        }
                    }
            }
        }
    }
}

void mlk_longconv_step(int B, int Lmax, int C, int G, int t, const float *hist, const float *k, const float *dskip,
                       float *y) {
    int F = C / G;
    for (int b = 0; b < B; b++) {
        const float *hb = hist + (size_t)b * Lmax * C; /* [Lmax,C] */
        float *yb = y + (size_t)b * C;
        memset(yb, 0, sizeof(float) * C);
        for (int s = 0; s <= t; s++) axpy_grouped(C, G, k + (size_t)s * F, hb + (size_t)(t - s) * C, yb);
        if (dskip) axpy_grouped(C, G, dskip, hb + (size_t)t * C, yb);
    }
}
