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

/* Register tiles of the per-channel loops: LC_TB rows (positions) × LC_CB channels (one AVX-512
 * vector) of accumulators stay in registers while the reduction runs, so each loaded filter row
 * serves LC_TB products and no accumulator goes through memory. Every output keeps the summation
 * order of the plain loops (s, resp. t, resp. b then t ascending): the bits are those of an
 * accumulation in memory. Smaller tiles (nr < LC_TB rows, cw < LC_CB channels) take the tails. */
enum { LC_TB = 8, LC_CB = 16 };
#if defined(__GNUC__) && !defined(__clang__)
#define LC_UNROLL _Pragma("GCC unroll 8")
#else
#define LC_UNROLL
#endif

/* y[t0 + i, c0 + j] = Σ_{s≤t} k[s]·u[t−s] (+ ds·u[t]) for i < nr, j < cw; ub, yb: [L,C], k: [L,C]. */
MLK_INLINE void lc_fwd_tile(int nr, int cw, int C, int t0, int c0, const float *ub, const float *k, const float *ds,
                            float *yb) {
    float acc[LC_TB][LC_CB];
    for (int i = 0; i < LC_TB; i++)
        for (int j = 0; j < LC_CB; j++) acc[i][j] = 0.0f;
    for (int s = 0; s <= t0; s++) { /* every row of the tile */
        const float *ks = k + (size_t)s * C + c0;
        for (int i = 0; i < nr; i++) {
            const float *us = ub + (size_t)(t0 + i - s) * C + c0;
#pragma omp simd
            for (int j = 0; j < cw; j++) acc[i][j] += ks[j] * us[j];
        }
    }
    /* the triangle s = t0 + sd, 0 < sd < nr: rows i ≥ sd (unrolled in whole tiles, where nr is a
     * constant, so that the accumulators stay in registers here too) */
    LC_UNROLL
    for (int sd = 1; sd < nr; sd++) {
        const float *ks = k + (size_t)(t0 + sd) * C + c0;
        LC_UNROLL
        for (int i = sd; i < nr; i++) {
            const float *us = ub + (size_t)(i - sd) * C + c0;
#pragma omp simd
            for (int j = 0; j < cw; j++) acc[i][j] += ks[j] * us[j];
        }
    }
    for (int i = 0; i < nr; i++) {
        const float *ut = ub + (size_t)(t0 + i) * C + c0;
        float *yt = yb + (size_t)(t0 + i) * C + c0;
        if (ds) {
#pragma omp simd
            for (int j = 0; j < cw; j++) yt[j] = acc[i][j] + ds[c0 + j] * ut[j];
        } else {
            for (int j = 0; j < cw; j++) yt[j] = acc[i][j];
        }
    }
}

/* Forward of one batch element, one filter per channel: ub, yb [L,C]; k [L,C]; ds [C] or NULL.
 * Full row tiles end at L; the rows left over at the start have the shortest sums. */
MLK_CLONES static void lc_fwd_one(int L, int C, const float *ub, const float *k, const float *ds, float *yb) {
    int r0 = L % LC_TB, cf = C - C % LC_CB;
    for (int c0 = 0; c0 < C; c0 += LC_CB) {
        int cw = c0 < cf ? LC_CB : C - c0;
        if (r0) lc_fwd_tile(r0, cw, C, 0, c0, ub, k, ds, yb);
        for (int t0 = r0; t0 < L; t0 += LC_TB) {
            if (cw == LC_CB) lc_fwd_tile(LC_TB, LC_CB, C, t0, c0, ub, k, ds, yb);
            else lc_fwd_tile(LC_TB, cw, C, t0, c0, ub, k, ds, yb);
        }
    }
}

/* du[tau0 + i, c0 + j] = Σ_{d ≤ L−1−tau} k[d]·dy[tau + d] (+ ds·dy[tau]) for i < nr, j < cw. */
MLK_INLINE void lc_du_tile(int nr, int cw, int L, int C, int tau0, int c0, const float *dyb, const float *k,
                           const float *ds, float *dub) {
    float acc[LC_TB][LC_CB];
    for (int i = 0; i < LC_TB; i++)
        for (int j = 0; j < LC_CB; j++) acc[i][j] = 0.0f;
    int dall = L - tau0 - nr; /* lags d ≤ dall reach L−1 from every row of the tile */
    for (int d = 0; d <= dall; d++) {
        const float *kd = k + (size_t)d * C + c0;
        for (int i = 0; i < nr; i++) {
            const float *dyt = dyb + (size_t)(tau0 + i + d) * C + c0;
#pragma omp simd
            for (int j = 0; j < cw; j++) acc[i][j] += kd[j] * dyt[j];
        }
    }
    LC_UNROLL /* the triangle d = dall + dd, 0 < dd < nr: rows i < nr − dd (unrolled as in lc_fwd_tile) */
    for (int dd = 1; dd < nr; dd++) {
        const float *kd = k + (size_t)(dall + dd) * C + c0;
        LC_UNROLL
        for (int i = 0; i < nr - dd; i++) {
            const float *dyt = dyb + (size_t)(tau0 + i + dall + dd) * C + c0;
#pragma omp simd
            for (int j = 0; j < cw; j++) acc[i][j] += kd[j] * dyt[j];
        }
    }
    for (int i = 0; i < nr; i++) {
        const float *dyt = dyb + (size_t)(tau0 + i) * C + c0;
        float *dut = dub + (size_t)(tau0 + i) * C + c0;
        if (ds) {
#pragma omp simd
            for (int j = 0; j < cw; j++) dut[j] = acc[i][j] + ds[c0 + j] * dyt[j];
        } else {
            for (int j = 0; j < cw; j++) dut[j] = acc[i][j];
        }
    }
}

/* du of one batch element (anti-causal correlation), one filter per channel. Full row tiles start
 * at 0; the rows left over at the end have the shortest sums. */
MLK_CLONES static void lc_du_one(int L, int C, const float *dyb, const float *k, const float *ds, float *dub) {
    int rf = L - L % LC_TB, cf = C - C % LC_CB;
    for (int c0 = 0; c0 < C; c0 += LC_CB) {
        int cw = c0 < cf ? LC_CB : C - c0;
        for (int tau0 = 0; tau0 < rf; tau0 += LC_TB) {
            if (cw == LC_CB) lc_du_tile(LC_TB, LC_CB, L, C, tau0, c0, dyb, k, ds, dub);
            else lc_du_tile(LC_TB, cw, L, C, tau0, c0, dyb, k, ds, dub);
        }
        if (rf < L) lc_du_tile(L - rf, cw, L, C, rf, c0, dyb, k, ds, dub);
    }
}

/* dk[s0 + i, c] = Σ_b Σ_{t≥s} dy[b,t,c]·u[b,t−s,c] for i < nr and the channels [c, c + cw). */
MLK_INLINE void lc_dk_tile(int nr, int cw, int B, int L, int C, int s0, int c, const float *u, const float *dy,
                           float *dk) {
    float acc[LC_TB][LC_CB];
    for (int i = 0; i < LC_TB; i++)
        for (int j = 0; j < LC_CB; j++) acc[i][j] = 0.0f;
    for (int b = 0; b < B; b++) {
        const float *dyb = dy + (size_t)b * L * C + c, *ub = u + (size_t)b * L * C + c;
        LC_UNROLL /* the triangle t = s0 + dt, dt < nr − 1: rows i ≤ dt (unrolled as in lc_fwd_tile) */
        for (int dt = 0; dt < nr - 1; dt++) {
            const float *dyt = dyb + (size_t)(s0 + dt) * C;
            LC_UNROLL
            for (int i = 0; i <= dt; i++) {
                const float *us = ub + (size_t)(dt - i) * C;
#pragma omp simd
                for (int j = 0; j < cw; j++) acc[i][j] += dyt[j] * us[j];
            }
        }
        for (int t = s0 + nr - 1; t < L; t++) { /* every row of the tile */
            const float *dyt = dyb + (size_t)t * C;
            for (int i = 0; i < nr; i++) {
                const float *us = ub + (size_t)(t - s0 - i) * C;
#pragma omp simd
                for (int j = 0; j < cw; j++) acc[i][j] += dyt[j] * us[j];
            }
        }
    }
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < cw; j++) dk[(size_t)(s0 + i) * C + c + j] = acc[i][j];
}

/* dd[c..c+cw) = Σ_b Σ_t dy[b,t,c]·u[b,t,c] (cw ≤ LC_CB; the accumulators in registers). */
MLK_INLINE void lc_dd_tile(int cw, int B, int L, int C, int c, const float *u, const float *dy, float *dd) {
    float acc[LC_CB];
    for (int j = 0; j < LC_CB; j++) acc[j] = 0.0f;
    for (size_t r = 0; r < (size_t)B * L; r++) {
        const float *dyt = dy + r * C + c, *ut = u + r * C + c;
#pragma omp simd
        for (int j = 0; j < cw; j++) acc[j] += dyt[j] * ut[j];
    }
    for (int j = 0; j < cw; j++) dd[c + j] = acc[j];
}

/* dk[s, c0..c0+cw) = Σ_b Σ_{t≥s} dy[b,t,c]·u[b,t−s,c] and ddskip, for a block of channels, summed in
 * the fixed order b, t. dk: [L,C] or NULL; dd: [C] or NULL. Full row tiles start at 0; the rows
 * left over at the end have the shortest sums. */
MLK_CLONES static void lc_dk_block(int B, int L, int C, int c0, int cw, const float *u, const float *dy, float *dk,
                                   float *dd) {
    int rf = L - L % LC_TB;
    for (int c = c0; c < c0 + cw; c += LC_CB) {
        int w = c0 + cw - c < LC_CB ? c0 + cw - c : LC_CB;
        if (dk) {
            for (int s0 = 0; s0 < rf; s0 += LC_TB) {
                if (w == LC_CB) lc_dk_tile(LC_TB, LC_CB, B, L, C, s0, c, u, dy, dk);
                else lc_dk_tile(LC_TB, w, B, L, C, s0, c, u, dy, dk);
            }
            if (rf < L) lc_dk_tile(L - rf, w, B, L, C, rf, c, u, dy, dk);
        }
        if (dd) {
            if (w == LC_CB) lc_dd_tile(LC_CB, B, L, C, c, u, dy, dd);
            else lc_dd_tile(w, B, L, C, c, u, dy, dd);
        }
    }
}

/* Scratch of n floats on a 64-byte boundary, like the tensors: the tiles' vector loads of the
 * expanded filter would otherwise straddle cache lines. */
static float *lc_falloc(size_t n) { return aligned_alloc(64, (sizeof(float) * (n ? n : 1) + 63) / 64 * 64); }

/* Grouped filters (G > 1) are expanded to one column per channel, kx[s,c] = k[s,c/G] (and
 * dsx[c] = dskip[c/G]), so every path runs the per-channel loops. Returns NULL when out of memory. */
static float *expand(int L, int C, int G, const float *k, const float *dskip) {
    float *kx = lc_falloc((size_t)L * C + C);
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
        dkx = lc_falloc((size_t)L * C + C);
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
