/* Direct causal long convolution LC(u; k) (docs/kernels.md, "Convolutions"), O(B·L²·C), exact: forward, backward,
 * step over a history. Channel c uses filter column c / G; an optional per-filter skip dskip·u. */
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/op_util.h"

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

/* Register tiles: LC_TB positions × LC_CB channels (one AVX-512 vector) of accumulators stay in
 * registers while the reduction runs, so each loaded filter row serves LC_TB products and no
 * accumulator goes through memory. On AVX2 (16 registers of 8 lanes) those 8 x 16 accumulators
 * alone fill every register, GCC kept some on the stack, and each multiply-add waited on a store
 * and a load (Zen 3: the three kernels 27 % of an H3 step at D = 64); there a tile takes its
 * channels in two passes of 8 lanes (jo, JW: mlk_avx2_blocking), lane for lane the same sums.
 * The tiles read channel-chunked copies, [rows][LC_CB] with the channels past C zero: rows a
 * constant 64 bytes apart are addressed from one pointer (with rows C apart, the eight row
 * pointers did not fit the integer registers), and no channel tail. Every
 * output keeps the summation order of the plain loops (s, resp. t, resp. b then t ascending): the
 * bits are those of an accumulation in memory. Tiles of nr < LC_TB rows take the rows left over. */
enum { LC_TB = 8, LC_CB = 16 };
#if defined(__GNUC__) && !defined(__clang__)
#define LC_UNROLL _Pragma("GCC unroll 8")
#else
#define LC_UNROLL
#endif

static inline int lc_chunks(int C) { return (C + LC_CB - 1) / LC_CB; }

/* dst[r][j] = src[r·C + c0 + j] for j < cw, 0 up to LC_CB (rows r < n). */
MLK_INLINE void lc_pack(int n, int C, int c0, int cw, const float *src, float *dst) {
    for (int r = 0; r < n; r++) {
        const float *sr = src + (size_t)r * C + c0;
        float *dr = dst + (size_t)r * LC_CB;
        if (cw == LC_CB) { /* memcpy: one vector move (a loop may alias and went scalar) */
            memcpy(dr, sr, sizeof(float) * LC_CB);
        } else {
            memcpy(dr, sr, sizeof(float) * cw);
            memset(dr + cw, 0, sizeof(float) * (LC_CB - cw));
        }
    }
}

/* The filter in chunks, expanding groups: kp[q][s][j] = k[s, (q·LC_CB + j)/G] for s < L and
 * dsp[q][j] = dskip[(q·LC_CB + j)/G] (when dskip), 0 past C. */
static void lc_pack_filter(int L, int C, int G, const float *k, const float *dskip, float *kp, float *dsp) {
    int F = C / G;
    for (int q = 0; q < lc_chunks(C); q++) {
        for (int s = 0; s < L; s++)
            for (int j = 0; j < LC_CB; j++) {
                int c = q * LC_CB + j;
                kp[((size_t)q * L + s) * LC_CB + j] = c < C ? k[(size_t)s * F + c / G] : 0.0f;
            }
        for (int j = 0; dskip && j < LC_CB; j++) {
            int c = q * LC_CB + j;
            dsp[q * LC_CB + j] = c < C ? dskip[c / G] : 0.0f;
        }
    }
}

/* y[t0 + i, c0 + jo + j] = Σ_{s≤t} k[s]·u[t−s] (+ ds·u[t]) for i < nr, jo + j < cw, j < JW (the
 * lanes of this pass). up, kq: [L][LC_CB] chunks of u and k; dq: [LC_CB] or NULL; yb: [L,C]. */
MLK_INLINE void lc_fwd_tile(int nr, int cw, int jo, int JW, int C, int t0, int c0, const float *up, const float *kq,
                            const float *dq, float *yb) {
    float acc[LC_TB][LC_CB];
    for (int i = 0; i < LC_TB; i++)
        for (int j = 0; j < JW; j++) acc[i][j] = 0.0f;
    up += jo, kq += jo, dq = dq ? dq + jo : NULL, c0 += jo, cw -= jo;
    cw = cw < JW ? cw : JW;
    for (int s = 0; s <= t0; s++) { /* every row of the tile */
        const float *ks = kq + (size_t)s * LC_CB, *us = up + (size_t)(t0 - s) * LC_CB;
        for (int i = 0; i < nr; i++)
#pragma omp simd
            for (int j = 0; j < JW; j++) acc[i][j] += ks[j] * us[i * LC_CB + j];
    }
    /* the triangle s = t0 + sd, 0 < sd < nr: rows i ≥ sd (unrolled in whole tiles, where nr is a
     * constant, so that the accumulators stay in registers here too) */
    LC_UNROLL
    for (int sd = 1; sd < nr; sd++) {
        const float *ks = kq + (size_t)(t0 + sd) * LC_CB;
        LC_UNROLL
        for (int i = sd; i < nr; i++)
#pragma omp simd
            for (int j = 0; j < JW; j++) acc[i][j] += ks[j] * up[(i - sd) * LC_CB + j];
    }
    for (int i = 0; i < nr; i++) {
        const float *ut = up + (size_t)(t0 + i) * LC_CB;
        float *yt = yb + (size_t)(t0 + i) * C + c0;
        if (dq) {
#pragma omp simd
            for (int j = 0; j < cw; j++) yt[j] = acc[i][j] + dq[j] * ut[j];
        } else {
            for (int j = 0; j < cw; j++) yt[j] = acc[i][j];
        }
    }
}

/* Forward of one batch element: ub, yb [L,C]; kp, dsp: the chunked filter; up: [L][LC_CB] scratch.
 * Full row tiles end at L; the rows left over at the start have the shortest sums. half: two
 * passes of 8 lanes a tile. */
MLK_CLONES static void lc_fwd_one(int L, int C, const float *ub, const float *kp, const float *dsp, float *yb,
                                  float *up, bool half) {
    const int r0 = L % LC_TB, jw = half ? LC_CB / 2 : LC_CB; /* a pass's lanes */
    for (int q = 0; q < lc_chunks(C); q++) {
        int c0 = q * LC_CB, cw = C - c0 < LC_CB ? C - c0 : LC_CB;
        const float *kq = kp + (size_t)q * L * LC_CB, *dq = dsp ? dsp + q * LC_CB : NULL;
        lc_pack(L, C, c0, cw, ub, up);
        for (int jo = 0; jo < cw; jo += jw) {
            if (r0) lc_fwd_tile(r0, cw, jo, jw, C, 0, c0, up, kq, dq, yb);
            for (int t0 = r0; t0 < L; t0 += LC_TB) {
                if (half) lc_fwd_tile(LC_TB, cw, jo, LC_CB / 2, C, t0, c0, up, kq, dq, yb);
                else if (cw == LC_CB) lc_fwd_tile(LC_TB, LC_CB, 0, LC_CB, C, t0, c0, up, kq, dq, yb);
                else lc_fwd_tile(LC_TB, cw, 0, LC_CB, C, t0, c0, up, kq, dq, yb);
            }
        }
    }
}

/* du[tau0 + i, c0 + jo + j] = Σ_{d ≤ L−1−tau} k[d]·dy[tau + d] (+ ds·dy[tau]) for i < nr, jo + j <
 * cw, j < JW; dyp, kq: [L][LC_CB] chunks. */
MLK_INLINE void lc_du_tile(int nr, int cw, int jo, int JW, int L, int C, int tau0, int c0, const float *dyp,
                           const float *kq, const float *dq, float *dub) {
    float acc[LC_TB][LC_CB];
    for (int i = 0; i < LC_TB; i++)
        for (int j = 0; j < JW; j++) acc[i][j] = 0.0f;
    dyp += jo, kq += jo, dq = dq ? dq + jo : NULL, c0 += jo, cw -= jo;
    cw = cw < JW ? cw : JW;
    int dall = L - tau0 - nr; /* lags d ≤ dall reach L−1 from every row of the tile */
    for (int d = 0; d <= dall; d++) {
        const float *kd = kq + (size_t)d * LC_CB, *dyt = dyp + (size_t)(tau0 + d) * LC_CB;
        for (int i = 0; i < nr; i++)
#pragma omp simd
            for (int j = 0; j < JW; j++) acc[i][j] += kd[j] * dyt[i * LC_CB + j];
    }
    LC_UNROLL /* the triangle d = dall + dd, 0 < dd < nr: rows i < nr − dd (unrolled as in lc_fwd_tile) */
    for (int dd = 1; dd < nr; dd++) {
        const float *kd = kq + (size_t)(dall + dd) * LC_CB, *dyt = dyp + (size_t)(tau0 + dall + dd) * LC_CB;
        LC_UNROLL
        for (int i = 0; i < nr - dd; i++)
#pragma omp simd
            for (int j = 0; j < JW; j++) acc[i][j] += kd[j] * dyt[i * LC_CB + j];
    }
    for (int i = 0; i < nr; i++) {
        const float *dyt = dyp + (size_t)(tau0 + i) * LC_CB;
        float *dut = dub + (size_t)(tau0 + i) * C + c0;
        if (dq) {
#pragma omp simd
            for (int j = 0; j < cw; j++) dut[j] = acc[i][j] + dq[j] * dyt[j];
        } else {
            for (int j = 0; j < cw; j++) dut[j] = acc[i][j];
        }
    }
}

/* du of one batch element (anti-causal correlation); dyp: [L][LC_CB] scratch. Full row tiles start
 * at 0; the rows left over at the end have the shortest sums. */
MLK_CLONES static void lc_du_one(int L, int C, const float *dyb, const float *kp, const float *dsp, float *dub,
                                 float *dyp, bool half) {
    const int rf = L - L % LC_TB, jw = half ? LC_CB / 2 : LC_CB; /* a pass's lanes */
    for (int q = 0; q < lc_chunks(C); q++) {
        int c0 = q * LC_CB, cw = C - c0 < LC_CB ? C - c0 : LC_CB;
        const float *kq = kp + (size_t)q * L * LC_CB, *dq = dsp ? dsp + q * LC_CB : NULL;
        lc_pack(L, C, c0, cw, dyb, dyp);
        for (int jo = 0; jo < cw; jo += jw) {
            for (int tau0 = 0; tau0 < rf; tau0 += LC_TB) {
                if (half) lc_du_tile(LC_TB, cw, jo, LC_CB / 2, L, C, tau0, c0, dyp, kq, dq, dub);
                else if (cw == LC_CB) lc_du_tile(LC_TB, LC_CB, 0, LC_CB, L, C, tau0, c0, dyp, kq, dq, dub);
                else lc_du_tile(LC_TB, cw, 0, LC_CB, L, C, tau0, c0, dyp, kq, dq, dub);
            }
            if (rf < L) lc_du_tile(L - rf, cw, jo, jw, L, C, rf, c0, dyp, kq, dq, dub);
        }
    }
}

/* dkp[s0 + i] (+)= Σ_{t≥s} dy[t]·u[t−s] over one batch element for i < nr, lanes jo.. jo + JW,
 * starting from 0 when `first`, else from the sums of the batch elements before; dyp, up, dkp:
 * [L][LC_CB] chunks. */
MLK_INLINE void lc_dk_tile(int nr, int jo, int JW, int L, int s0, int first, const float *dyp, const float *up,
                           float *dkp) {
    float acc[LC_TB][LC_CB];
    dyp += jo, up += jo, dkp += jo;
    for (int i = 0; i < LC_TB; i++)
        for (int j = 0; j < JW; j++) acc[i][j] = 0.0f;
    if (!first)
        for (int i = 0; i < nr; i++)
            for (int j = 0; j < JW; j++) acc[i][j] = dkp[(size_t)(s0 + i) * LC_CB + j];
    LC_UNROLL /* the triangle t = s0 + dt, dt < nr − 1: rows i ≤ dt (unrolled as in lc_fwd_tile) */
    for (int dt = 0; dt < nr - 1; dt++) {
        const float *dyt = dyp + (size_t)(s0 + dt) * LC_CB;
        LC_UNROLL
        for (int i = 0; i <= dt; i++)
#pragma omp simd
            for (int j = 0; j < JW; j++) acc[i][j] += dyt[j] * up[(dt - i) * LC_CB + j];
    }
    for (int t = s0 + nr - 1; t < L; t++) { /* every row of the tile: u rows t − s0 − i */
        const float *dyt = dyp + (size_t)t * LC_CB, *ut = up + (size_t)(t - s0 - (nr - 1)) * LC_CB;
        for (int i = 0; i < nr; i++)
#pragma omp simd
            for (int j = 0; j < JW; j++) acc[i][j] += dyt[j] * ut[(nr - 1 - i) * LC_CB + j];
    }
    for (int i = 0; i < nr; i++)
        for (int j = 0; j < JW; j++) dkp[(size_t)(s0 + i) * LC_CB + j] = acc[i][j];
}

/* dk[s, c0..c0+cw) = Σ_b Σ_{t≥s} dy[b,t,c]·u[b,t−s,c] and dd[c0..c0+cw) = Σ_b Σ_t dy·u, for a block
 * of channels (c0 a multiple of LC_CB), summed in the fixed order b, t. dk: [L,C] or NULL; dd: [C] or
 * NULL; w: 3·L·LC_CB scratch. Full row tiles start at 0; the rows left over at the end have the
 * shortest sums. */
MLK_CLONES static void lc_dk_block(int B, int L, int C, int c0, int cw, const float *u, const float *dy, float *dk,
                                   float *dd, float *w, bool half) {
    float *dyp = w, *up = dyp + (size_t)L * LC_CB, *dkp = up + (size_t)L * LC_CB;
    const int rf = L - L % LC_TB, jw = half ? LC_CB / 2 : LC_CB; /* a pass's lanes */
    for (int c = c0; c < c0 + cw; c += LC_CB) {
        int wd = c0 + cw - c < LC_CB ? c0 + cw - c : LC_CB;
        float dda[LC_CB] = {0};
        for (int b = 0; b < B; b++) {
            lc_pack(L, C, c, wd, dy + (size_t)b * L * C, dyp);
            lc_pack(L, C, c, wd, u + (size_t)b * L * C, up);
            for (int jo = 0; dk && jo < LC_CB; jo += jw) {
                for (int s0 = 0; s0 < rf; s0 += LC_TB) {
                    if (half) lc_dk_tile(LC_TB, jo, LC_CB / 2, L, s0, b == 0, dyp, up, dkp);
                    else lc_dk_tile(LC_TB, 0, LC_CB, L, s0, b == 0, dyp, up, dkp);
                }
                if (rf < L) lc_dk_tile(L - rf, jo, jw, L, rf, b == 0, dyp, up, dkp);
            }
            for (int t = 0; dd && t < L; t++)
#pragma omp simd
                for (int j = 0; j < LC_CB; j++) dda[j] += dyp[(size_t)t * LC_CB + j] * up[(size_t)t * LC_CB + j];
        }
        for (int s = 0; dk && s < L; s++)
            for (int j = 0; j < wd; j++) dk[(size_t)s * C + c + j] = B ? dkp[(size_t)s * LC_CB + j] : 0.0f;
        for (int j = 0; dd && j < wd; j++) dd[c + j] = dda[j];
    }
}

/* The grouped loops without scratch (used only if the scratch cannot be allocated). */
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

static void bwd_grouped(int B, int L, int C, int G, const float *u, const float *k, const float *dskip,
                        const float *dy, float *du, float *dk, float *ddskip) {
    int F = C / G;
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
}

void mlk_longconv_fwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip, float *y) {
    if (L == 0) return; /* y is [B, 0, C]: nothing to write */
    int nq = lc_chunks(C);
    size_t nk = (size_t)nq * L * LC_CB;
    /* kp, dsp, then up per thread, on a 64-byte boundary like the tensors (aligned vector loads) */
    mlk_scratch sc = mlk_scratch_new(0.5 * B * L * L * C, sizeof(float), nk + (size_t)nq * LC_CB, (size_t)L * LC_CB, 64);
    if (!sc.base) {
        fwd_grouped(B, L, C, G, u, k, dskip, y);
        return;
    }
    float *kp = sc.base, *dsp = dskip ? kp + nk : NULL;
    const bool half = mlk_avx2_blocking();
    lc_pack_filter(L, C, G, k, dskip, kp, dsp);
#pragma omp parallel num_threads(sc.nt)
    {
        float *up = mlk_scratch_mine(&sc);
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++)
            lc_fwd_one(L, C, u + (size_t)b * L * C, kp, dsp, y + (size_t)b * L * C, up, half);
    }
    free(sc.base);
}

void mlk_longconv_bwd(int B, int L, int C, int G, const float *u, const float *k, const float *dskip,
                      const float *dy, float *du, float *dk, float *ddskip) {
    int F = C / G, nq = lc_chunks(C);
    size_t nk = (size_t)nq * L * LC_CB;
    size_t nx = G > 1 && (dk || ddskip) ? (size_t)L * C + C : 0; /* G > 1: per-channel dk, ddskip */
    /* kp, dsp, dkx, then 3·L·LC_CB per thread */
    mlk_scratch sc = mlk_scratch_new(0.5 * B * L * L * C, sizeof(float), nk + (size_t)nq * LC_CB + nx,
                                     3 * (size_t)L * LC_CB, 64);
    if (!sc.base) {
        bwd_grouped(B, L, C, G, u, k, dskip, dy, du, dk, ddskip);
        return;
    }
    float *kp = sc.base, *dsp = dskip ? kp + nk : NULL, *dkx = kp + nk + (size_t)nq * LC_CB;
    float *dkc = dk, *ddc = ddskip;
    const bool half = mlk_avx2_blocking();
    if (nx) dkc = dk ? dkx : NULL, ddc = ddskip ? dkx + (size_t)L * C : NULL;
    if (du) {
        lc_pack_filter(L, C, G, k, dskip, kp, dsp);
#pragma omp parallel num_threads(sc.nt)
        {
            float *dyp = mlk_scratch_mine(&sc);
#pragma omp for schedule(static)
            for (int b = 0; b < B; b++)
                lc_du_one(L, C, dy + (size_t)b * L * C, kp, dsp, du + (size_t)b * L * C, dyp, half);
        }
    }
    if (dkc || ddc) {
        /* threads own disjoint channel blocks: bits independent of the thread count */
        enum { CB = 4 * LC_CB };
        int nblk = (C + CB - 1) / CB;
#pragma omp parallel num_threads(sc.nt < nblk ? sc.nt : nblk)
        {
            float *wt = mlk_scratch_mine(&sc);
#pragma omp for schedule(static)
            for (int blk = 0; blk < nblk; blk++) {
                int c0 = blk * CB, cw = c0 + CB < C ? CB : C - c0;
                lc_dk_block(B, L, C, c0, cw, u, dy, dkc, ddc, wt, half);
            }
        }
        if (nx) { /* sum each group's channels in order */
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
    free(sc.base);
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

/* ------------------------------------------------------------------ the differentiable op (ops/mixer_ops.h) */

static ml_status long_conv_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *u = ml_node_saved(n, 0), *k = ml_node_saved(n, 1), *ds = ml_node_saved(n, 2);
    if (!u || !k || (n->iarg[1] && !ds)) return ml_last_status();
    int B = (int)u->shape[0], L = (int)u->shape[1], C = (int)u->shape[2], G = (int)n->iarg[0];
    gin[0] = mlo_grad_like(n, 0);
    gin[1] = ml_node_input_needs_grad(n, 1) ? ml_zeros(ML_F32, n->in_ndim[1], n->in_shape[1]) : NULL; /* rows ≥ L: 0 */
    gin[2] = mlo_grad_like(n, 2);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    mlk_longconv_bwd(B, L, C, G, ml_f32(u), ml_f32(k), ds ? ml_f32(ds) : NULL, ml_f32(g), mlo_gp(gin[0]),
                     mlo_gp(gin[1]), mlo_gp(gin[2]));
    return ML_OK;
}

ml_tensor *ml_long_conv(ml_tensor *u, ml_tensor *k, ml_tensor *dskip, int G) {
    const char *fn = "long_conv";
    ml_tensor *ins[3] = {u, k, dskip};
    char d[128];
    if (mlo_check_f32s(fn, 3, ins)) return NULL;
    if (u->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,C]", fn, u->ndim), NULL;
    int64_t L = u->shape[1], C = u->shape[2];
    if (G < 1 || C % G != 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 4 (channels per filter) must divide C=%lld, got %d", fn, (long long)C,
                       G),
               NULL;
    int64_t F = C / G;
    if (mlo_want_shape(fn, 2, k, 2, (int64_t[]){-1, F},
                       mlo_descf(d, sizeof d, "[Lk,F] with F=%lld, Lk>=%lld", (long long)F, (long long)L)))
        return NULL;
    if (k->shape[0] < L) {
        char b1[ML_SHAPE_STR];
        return ml_fail(ML_ERR_SHAPE, "%s: argument 2 has shape %s, expected at least L=%lld rows", fn,
                       ml_shape_str(b1, 2, k->shape), (long long)L),
               NULL;
    }
    if (dskip && mlo_want_shape(fn, 3, dskip, 1, &F, mlo_descf(d, sizeof d, "[F] with F=%lld", (long long)F)))
        return NULL;
    if (mlo_check_int_sizes(fn, u)) return NULL;
    ml_tensor *uc = mlo_dense(u), *kc = mlo_dense(k), *dc = dskip ? mlo_dense(dskip) : NULL;
    ml_tensor *out = ml_empty(ML_F32, 3, u->shape);
    if (!uc || !kc || (dskip && !dc) || !out) {
        ml_tensor *all[4] = {uc, kc, dc, out};
        mlo_release_all(4, all);
        return mlo_oom(fn);
    }
    mlk_longconv_fwd((int)u->shape[0], (int)L, (int)C, G, ml_f32(uc), ml_f32(kc), dc ? ml_f32(dc) : NULL, ml_f32(out));
    if (ml_any_needs_grad(3, ins)) {
        ml_node *nd = ml_node_new("LongConvBackward", long_conv_backward, 3, ins);
        if (nd) {
            ml_node_save(nd, 0, uc);
            ml_node_save(nd, 1, kc);
            ml_node_save(nd, 2, dc);
            nd->iarg[0] = G;
            nd->iarg[1] = dc != NULL;
        }
        out = mlo_attach(out, nd);
    }
    ml_tensor *tmp[3] = {uc, kc, dc};
    mlo_release_all(3, tmp);
    return out;
}
