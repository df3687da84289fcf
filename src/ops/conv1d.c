/* Causal depthwise short convolution SC_K (docs/kernels.md, "Convolutions"): forward, backward, recurrent step. */
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

enum { WT_MAX = 4096 }; /* transposed-weight buffer on the stack covers C·K ≤ 4096 (all paper sizes) */

/* wt[j*C + c] = w[c*K + j]: puts the channel index innermost so the c loops are contiguous. */
static const float *transpose_w(int C, int K, const float *w, float *wt) {
    if ((long)C * K > WT_MAX) return NULL;
    for (int c = 0; c < C; c++)
        for (int j = 0; j < K; j++) wt[j * C + c] = w[c * K + j];
    return wt;
}

void mlk_conv1d_fwd(int B, int L, int C, int K, const float *x, const float *w, const float *bias, float *y) {
    mlk_conv1d_fwd_ld(B, L, C, K, x, C, w, bias, y);
}

void mlk_conv1d_bwd(int B, int L, int C, int K, const float *x, const float *w, const float *dy, float *dx,
                    float *dw, float *dbias) {
    mlk_conv1d_bwd_ld(B, L, C, K, x, C, w, dy, dx, dw, dbias);
}

/* One batch element: y[t] = bias + Σ_j w[:,j]⊙x[t−K+1+j], taps added in order as contiguous
 * channel axpys. xb: [L,C] rows ldx apart; yb: [L,C]; wt: [K,C] (transposed) or NULL. */
MLK_CLONES static void conv_fwd_one(int L, int C, int K, const float *xb, int ldx, const float *w, const float *wt,
                                    const float *bias, float *yb) {
    for (int t = 0; t < L; t++) {
        float *yt = yb + (size_t)t * C;
        if (bias) memcpy(yt, bias, sizeof(float) * C);
        else memset(yt, 0, sizeof(float) * C);
        for (int j = 0; j < K; j++) {
            int tau = t - (K - 1) + j; /* input position weighted by w[:,j] */
            if (tau < 0) continue;
            const float *xt = xb + (size_t)tau * ldx;
            if (wt) {
                const float *wj = wt + (size_t)j * C;
#pragma omp simd
                for (int c = 0; c < C; c++) yt[c] += wj[c] * xt[c];
            } else {
                for (int c = 0; c < C; c++) yt[c] += w[(size_t)c * K + j] * xt[c];
            }
        }
    }
}

void mlk_conv1d_fwd_ld(int B, int L, int C, int K, const float *x, int ldx, const float *w, const float *bias,
                       float *y) {
    float wbuf[WT_MAX];
    const float *wt = transpose_w(C, K, w, wbuf);
    int nt = mlk_threads_for((double)B * L * C * K);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) conv_fwd_one(L, C, K, x + (size_t)b * L * ldx, ldx, w, wt, bias, y + (size_t)b * L * C);
}

/* dx[τ] = Σ_j dy[τ+K−1−j]⊙w[:,j] of one batch element, taps in order as channel axpys. */
MLK_CLONES static void conv_dx_one(int L, int C, int K, const float *dyb, const float *w, const float *wt, float *dxb) {
    for (int tau = 0; tau < L; tau++) {
        float *dxt = dxb + (size_t)tau * C;
        memset(dxt, 0, sizeof(float) * C);
        for (int j = 0; j < K; j++) {
            int t = tau + K - 1 - j;
            if (t >= L) continue;
            const float *dyt = dyb + (size_t)t * C;
            if (wt) {
                const float *wj = wt + (size_t)j * C;
#pragma omp simd
                for (int c = 0; c < C; c++) dxt[c] += wj[c] * dyt[c];
            } else {
                for (int c = 0; c < C; c++) dxt[c] += w[(size_t)c * K + j] * dyt[c];
            }
        }
    }
}

/* dw and dbias over a block of channels [c0, c0+cw) (cw ≤ CB), summed in the fixed order b, t. */
enum { CB = 64 };
MLK_CLONES static void conv_dw_block(int B, int L, int C, int K, int c0, int cw, const float *x, int ldx,
                                     const float *dy, float *acc_w, float *acc_b) {
    for (int b = 0; b < B; b++) {
        const float *xb = x + (size_t)b * L * ldx + c0;
        const float *dyb = dy + (size_t)b * L * C + c0;
        for (int t = 0; t < L; t++) {
            const float *dyt = dyb + (size_t)t * C;
#pragma omp simd
            for (int c = 0; c < cw; c++) acc_b[c] += dyt[c];
            for (int j = 0; j < K; j++) {
                int tau = t - (K - 1) + j;
                if (tau < 0) continue;
                const float *xt = xb + (size_t)tau * ldx;
                float *aj = acc_w + j * CB;
#pragma omp simd
                for (int c = 0; c < cw; c++) aj[c] += dyt[c] * xt[c];
            }
        }
    }
}

void mlk_conv1d_bwd_ld(int B, int L, int C, int K, const float *x, int ldx, const float *w, const float *dy,
                       float *dx, float *dw, float *dbias) {
    float wbuf[WT_MAX];
    const float *wt = transpose_w(C, K, w, wbuf);
    int nt = mlk_threads_for((double)B * L * C * K);
    if (dx) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int b = 0; b < B; b++) conv_dx_one(L, C, K, dy + (size_t)b * L * C, w, wt, dx + (size_t)b * L * C);
    }
    if (dw || dbias) {
        /* Parameter gradients sum over (b,t): each thread owns a block of channels and sums in the
         * fixed order b, t, so the bits do not depend on the thread count. */
        int nblk = (C + CB - 1) / CB;
#pragma omp parallel for num_threads(nt < nblk ? nt : nblk) schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int c0 = blk * CB, c1 = c0 + CB < C ? c0 + CB : C, cw = c1 - c0;
            float acc_w[CB * 16]; /* [j][c] for K ≤ 16; larger K falls back to direct sums */
            float acc_b[CB];
            int kk = K <= 16 ? K : 0;
            memset(acc_w, 0, sizeof acc_w);
            memset(acc_b, 0, sizeof acc_b);
            conv_dw_block(B, L, C, kk, c0, cw, x, ldx, dy, acc_w, acc_b);
            if (dbias)
                for (int c = 0; c < cw; c++) dbias[c0 + c] = acc_b[c];
            if (dw) {
                for (int c = 0; c < cw; c++)
                    for (int j = 0; j < kk; j++) dw[(size_t)(c0 + c) * K + j] = acc_w[j * CB + c];
                if (!kk) { /* K > 16: plain sums, same fixed order */
                    for (int c = c0; c < c1; c++)
                        for (int j = 0; j < K; j++) {
                            float s = 0.0f;
                            for (int b = 0; b < B; b++)
                                for (int t = K - 1 - j; t < L; t++)
                                    s += dy[((size_t)b * L + t) * C + c] * x[((size_t)b * L + t - (K - 1) + j) * ldx + c];
                            dw[(size_t)c * K + j] = s;
                        }
                }
            }
        }
    }
}

void mlk_conv1d_step(int B, int C, int K, float *state, const float *x, const float *w, const float *bias,
                     float *y) {
    int S = K - 1; /* state length */
    for (int b = 0; b < B; b++) {
        float *st = state + (size_t)b * C * S; /* [C,K-1] */
        const float *xb = x + (size_t)b * C;
        float *yb = y + (size_t)b * C;
        for (int c = 0; c < C; c++) {
            const float *wc = w + (size_t)c * K;
            float *sc = st + (size_t)c * S;
            float acc = bias ? bias[c] : 0.0f;
            /* same association order as the parallel form: oldest tap first */
            for (int j = 0; j < S; j++) acc += wc[j] * sc[j];
            acc += wc[S] * xb[c];
            yb[c] = acc;
            if (S > 0) {
                memmove(sc, sc + 1, sizeof(float) * (S - 1));
                sc[S - 1] = xb[c];
            }
        }
    }
}
