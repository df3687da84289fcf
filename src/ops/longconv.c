/* Direct causal long convolution LC(u; k) (spec §1, §12), O(B·L²·C), exact: forward, backward,
 * step over a history. Channel c uses filter column c / G; an optional per-filter skip dskip·u. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=fast") /* vectorised channel loops; FMA in the clones */
#endif
#include <stdlib.h>
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

/* Forward of one batch element, one filter per channel: ub, yb [L,C]; k [L,C]; ds [C] or NULL. */
MLK_CLONES static void lc_fwd_one(int L, int C, const float *ub, const float *k, const float *ds, float *yb) {
    for (int t = 0; t < L; t++) {
        float *yt = yb + (size_t)t * C;
        memset(yt, 0, sizeof(float) * C);
        for (int s = 0; s <= t; s++) {
            const float *ks = k + (size_t)s * C, *us = ub + (size_t)(t - s) * C;
#pragma omp simd
            for (int c = 0; c < C; c++) yt[c] += ks[c] * us[c];
        }
        if (ds) {
            const float *ut = ub + (size_t)t * C;
#pragma omp simd
            for (int c = 0; c < C; c++) yt[c] += ds[c] * ut[c];
        }
    }
}

/* du of one batch element (anti-causal correlation), one filter per channel. */
MLK_CLONES static void lc_du_one(int L, int C, const float *dyb, const float *k, const float *ds, float *dub) {
    for (int tau = 0; tau < L; tau++) {
        float *dut = dub + (size_t)tau * C;
        memset(dut, 0, sizeof(float) * C);
        for (int t = tau; t < L; t++) {
            const float *ks = k + (size_t)(t - tau) * C, *dyt = dyb + (size_t)t * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dut[c] += ks[c] * dyt[c];
        }
        if (ds) {
            const float *dyt = dyb + (size_t)tau * C;
#pragma omp simd
            for (int c = 0; c < C; c++) dut[c] += ds[c] * dyt[c];
        }
    }
}

/* dk[s, c0..c1) = Σ_b Σ_{t≥s} dy[b,t,c]·u[b,t−s,c] and ddskip, for a block of channels, summed in
 * the fixed order b, t. dk: [L,C] or NULL; dd: [C] or NULL. */
MLK_CLONES static void lc_dk_block(int B, int L, int C, int c0, int cw, const float *u, const float *dy, float *dk,
                                   float *dd) {
    for (int s = 0; dk && s < L; s++) {
        float *dks = dk + (size_t)s * C + c0;
        memset(dks, 0, sizeof(float) * cw);
        for (int b = 0; b < B; b++) {
            const float *dyb = dy + (size_t)b * L * C + c0, *ub = u + (size_t)b * L * C + c0;
            for (int t = s; t < L; t++) {
                const float *dyt = dyb + (size_t)t * C, *ut = ub + (size_t)(t - s) * C;
#pragma omp simd
                for (int c = 0; c < cw; c++) dks[c] += dyt[c] * ut[c];
            }
        }
    }
    if (dd) {
        memset(dd + c0, 0, sizeof(float) * cw);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < L; t++) {
                const float *dyt = dy + ((size_t)b * L + t) * C + c0, *ut = u + ((size_t)b * L + t) * C + c0;
#pragma omp simd
                for (int c = 0; c < cw; c++) dd[c0 + c] += dyt[c] * ut[c];
            }
    }
}

/* Grouped filters (G > 1) are expanded to one column per channel, kx[s,c] = k[s,c/G] (and
 * dsx[c] = dskip[c/G]), so every path runs the per-channel loops. Returns NULL when out of memory. */
static float *expand(int L, int C, int G, const float *k, const float *dskip) {
    float *kx = mlk_falloc((size_t)L * C + C);
    if (!kx) return NULL;
    int F = C / G;
    for (int s = 0; s < L; s++)
        for (int c = 0; c < C; c++) kx[(size_t)s * C + c] = k[(size_t)s * F + c / G];
    if (dskip)
        for (int c = 0; c < C; c++) kx[(size_t)L * C + c] = dskip[c / G];
    return kx;
}

/* The grouped path without expansion (used only if the expansion cannot be allocated). */
static void fwd_grouped(int B, int L, int C, int G, const float *u, const float *k, const float *dskip, float *y) {
    int F = C / G;
    for (int b = 0; b < B; b++) {
        const float *ub = u + (size_t)b * L * C;
        float *yb = y + (size_t)b * L * C;
        for (int t = 0; t < L; t++) {
            float *yt = yb + (size_t)t * C;
            memset(yt, 0, sizeof(float) * C);
            for (int s = 0; s <= t; s++) axpy_grouped(C, G, k + (size_t)s * F, ub + (size_t)(t - s) * C, yt);
            if (dskip) axpy_grouped(C, G, dskip, ub + (size_t)t * C, yt);
        }
    }
}

void mlk_longconv_fwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip, float *y) {
    float *kx = G > 1 ? expand(L, C, G, k, dskip) : NULL;
    if (G > 1 && !kx) {
        fwd_grouped(B, L, C, G, u, k, dskip, y);
        return;
    }
    const float *kk = kx ? kx : k, *dd = kx ? (dskip ? kx + (size_t)L * C : NULL) : dskip;
    int nt = mlk_threads_for(0.5 * B * L * L * C);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) lc_fwd_one(L, C, u + (size_t)b * L * C, kk, dd, y + (size_t)b * L * C);
    free(kx);
}

void mlk_longconv_bwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip,
                      const float *dy, float *du, float *dk, float *ddskip) {
    int F = C / G;
    int nt = mlk_threads_for(0.5 * B * L * L * C);
    /* G > 1: expanded filter, and per-channel dk/ddskip summed over each group afterwards */
    float *kx = NULL, *dkx = NULL;
    if (G > 1) {
        kx = expand(L, C, G, k, dskip);
        dkx = mlk_falloc((size_t)L * C + C);
        if (!kx || !dkx) {
            free(kx), free(dkx);
            kx = dkx = NULL;
        }
    }
    const float *kk = k, *dd = dskip;
    float *dkc = dk, *ddc = ddskip;
    if (kx) kk = kx, dd = dskip ? kx + (size_t)L * C : NULL, dkc = dk ? dkx : NULL, ddc = ddskip ? dkx + (size_t)L * C : NULL;
    if (G > 1 && !kx) { /* out of memory: the grouped loops */
        if (du) {
            for (int b = 0; b < B; b++)
                for (int tau = 0; tau < L; tau++) {
                    float *dut = du + ((size_t)b * L + tau) * C;
                    memset(dut, 0, sizeof(float) * C);
                    for (int t = tau; t < L; t++)
                        axpy_grouped(C, G, k + (size_t)(t - tau) * F, dy + ((size_t)b * L + t) * C, dut);
                    if (dskip) axpy_grouped(C, G, dskip, dy + ((size_t)b * L + tau) * C, dut);
                }
        }
        if (dk || ddskip) {
            if (dk) memset(dk, 0, sizeof(float) * L * F);
            if (ddskip) memset(ddskip, 0, sizeof(float) * F);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < L; t++)
                    for (int c = 0; c < C; c++) {
                        float g = dy[((size_t)b * L + t) * C + c];
                        if (dk)
                            for (int s = 0; s <= t; s++) dk[(size_t)s * F + c / G] += g * u[((size_t)b * L + t - s) * C + c];
                        if (ddskip) ddskip[c / G] += g * u[((size_t)b * L + t) * C + c];
                    }
        }
        return;
    }
    if (du) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int b = 0; b < B; b++) lc_du_one(L, C, dy + (size_t)b * L * C, kk, dd, du + (size_t)b * L * C);
    }
    if (dkc || ddc) {
        /* threads own disjoint channel blocks: bits independent of the thread count */
        enum { CB = 64 };
        int nblk = (C + CB - 1) / CB;
#pragma omp parallel for num_threads(nt < nblk ? nt : nblk) schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int c0 = blk * CB, cw = c0 + CB < C ? CB : C - c0;
            lc_dk_block(B, L, C, c0, cw, u, dy, dkc, ddc);
        }
        if (kx) { /* sum each group's channels in order */
            for (int s = 0; dk && s < L; s++)
                for (int f = 0; f < F; f++) {
                    float acc = 0.0f;
                    for (int g = 0; g < G; g++) acc += dkx[(size_t)s * C + f * G + g];
                    dk[(size_t)s * F + f] = acc;
                }
            if (ddskip)
                for (int f = 0; f < F; f++) {
                    float acc = 0.0f;
                    for (int g = 0; g < G; g++) acc += dkx[(size_t)L * C + f * G + g];
                    ddskip[f] = acc;
                }
        }
    }
    free(kx), free(dkx);
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
