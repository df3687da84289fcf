/* Implicit long-conv filters: Hyena's Sin-MLP filter with exponential modulation (spec §8) and
 * BaseConv's ReLU-MLP filter (spec §5), fused forward and backward. Both are tiny (L rows of a
 * width-64/16 MLP), so they run on one thread with per-row mat-vecs; parameter gradients are
 * summed over rows in order i = 0..L−1. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

/* y[R] = W[R,Cn]·x[Cn] (+ b) */
static void matvec(int R, int Cn, const float *W, const float *x, const float *b, float *y) {
    for (int r = 0; r < R; r++) {
        const float *w = W + (size_t)r * Cn;
        float acc = 0.0f;
        for (int c = 0; c < Cn; c++) acc += w[c] * x[c];
        y[r] = acc + (b ? b[r] : 0.0f);
    }
}

/* x[Cn] = Wᵀ[Cn,R]·g[R] (overwrite); dW[R,Cn] += g xinᵀ when dW != NULL */
static void matvec_bwd(int R, int Cn, const float *W, const float *g, const float *xin, float *dx, float *dW) {
    if (dx) memset(dx, 0, sizeof(float) * Cn);
    for (int r = 0; r < R; r++) {
        const float *w = W + (size_t)r * Cn;
        float gr = g[r];
        if (dx)
            for (int c = 0; c < Cn; c++) dx[c] += w[c] * gr;
        if (dW) {
            float *dw = dW + (size_t)r * Cn;
            for (int c = 0; c < Cn; c++) dw[c] += gr * xin[c];
        }
    }
}

/* Hyena forward for all rows; keeps pre-activations pre[3][L][W] and activations act[3][L][W]. */
static void hyena_rows(int L, int W, int C, const mlk_hyena_filter_params *p, float *pre, float *act, float *k) {
    const float *Ws[3] = {p->W1, p->W2, p->W3}, *bs[3] = {p->b1, p->b2, p->b3};
    int in_dim[3] = {3, W, W};
    for (int i = 0; i < L; i++) {
        const float *x = p->z + (size_t)i * 3;
        for (int l = 0; l < 3; l++) {
            float *pr = pre + ((size_t)l * L + i) * W, *ac = act + ((size_t)l * L + i) * W;
            matvec(W, in_dim[l], Ws[l], x, bs[l], pr);
            for (int j = 0; j < W; j++) ac[j] = sinf(p->f[j] * pr[j]); /* shared Sin: sin(f ⊙ x) */
            x = ac;
        }
        float *ki = k + (size_t)i * C;
        matvec(C, W, p->W4, x, NULL, ki);
        for (int c = 0; c < C; c++) ki[c] *= expf(-p->t[i] * fabsf(p->deltas[c]));
    }
}

int mlk_hyena_filter_fwd(int L, int W, int C, const mlk_hyena_filter_params *p, float *k) {
    float *buf = mlk_falloc(6 * (size_t)L * W);
    if (!buf) return -1;
    hyena_rows(L, W, C, p, buf, buf + 3 * (size_t)L * W, k);
    free(buf);
    return 0;
}

int mlk_hyena_filter_bwd(int L, int W, int C, const mlk_hyena_filter_params *p, const float *dk,
                         const mlk_hyena_filter_grads *g) {
    size_t LW = (size_t)L * W;
    float *buf = mlk_falloc(6 * LW + (size_t)L * C + (size_t)C + 2 * (size_t)W);
    if (!buf) return -1;
    float *pre = buf, *act = buf + 3 * LW, *kk = act + 3 * LW, *dh = kk + (size_t)L * C;
    float *da = dh + C, *dp = da + W;
    hyena_rows(L, W, C, p, pre, act, kk);
    /* zero the parameter gradients, then accumulate row by row */
    float *gw[3] = {g->W1, g->W2, g->W3}, *gb[3] = {g->b1, g->b2, g->b3};
    const float *Ws[3] = {p->W1, p->W2, p->W3};
    int in_dim[3] = {3, W, W};
    for (int l = 0; l < 3; l++) {
        if (gw[l]) memset(gw[l], 0, sizeof(float) * W * in_dim[l]);
        if (gb[l]) memset(gb[l], 0, sizeof(float) * W);
    }
    if (g->f) memset(g->f, 0, sizeof(float) * W);
    if (g->W4) memset(g->W4, 0, sizeof(float) * C * W);
    for (int i = 0; i < L; i++) {
        for (int c = 0; c < C; c++) dh[c] = dk[(size_t)i * C + c] * expf(-p->t[i] * fabsf(p->deltas[c]));
        matvec_bwd(C, W, p->W4, dh, act + 2 * LW + (size_t)i * W, da, g->W4);
        for (int l = 2; l >= 0; l--) {
            const float *pr = pre + (size_t)l * LW + (size_t)i * W;
            const float *xin = l > 0 ? act + (size_t)(l - 1) * LW + (size_t)i * W : p->z + (size_t)i * 3;
            for (int j = 0; j < W; j++) {
                float cs = cosf(p->f[j] * pr[j]);
                dp[j] = da[j] * p->f[j] * cs;
                if (g->f) g->f[j] += da[j] * pr[j] * cs; /* one frequency vector shared by all three */
            }
            if (gb[l])
                for (int j = 0; j < W; j++) gb[l][j] += dp[j];
            float *dx = l > 0 ? da : (g->z ? g->z + (size_t)i * 3 : NULL);
            /* da is overwritten with the previous layer's gradient after dp has been formed */
            matvec_bwd(W, in_dim[l], Ws[l], dp, xin, dx, gw[l]);
        }
    }
    free(buf);
    return 0;
}

int mlk_relu_filter_fwd(int L, int E, int W, int C, const float *z, const float *Wa, const float *a, const float *Wb,
                        const float *bb, float *k) {
    float *hid = mlk_falloc(W);
    if (!hid) return -1;
    for (int i = 0; i < L; i++) {
        matvec(W, E, Wa, z + (size_t)i * E, a, hid);
        for (int j = 0; j < W; j++) hid[j] = hid[j] > 0.0f ? hid[j] : 0.0f;
        matvec(C, W, Wb, hid, bb, k + (size_t)i * C);
    }
    free(hid);
    return 0;
}

int mlk_relu_filter_bwd(int L, int E, int W, int C, const float *z, const float *Wa, const float *a, const float *Wb,
                        const float *bb, const float *dk, float *dz, float *dWa, float *da, float *dWb, float *dbb) {
    float *buf = mlk_falloc(3 * (size_t)W);
    if (!buf) return -1;
    float *pre = buf, *hid = buf + W, *dh = buf + 2 * W;
    if (dWa) memset(dWa, 0, sizeof(float) * W * E);
    if (da) memset(da, 0, sizeof(float) * W);
    if (dWb) memset(dWb, 0, sizeof(float) * C * W);
    if (dbb) memset(dbb, 0, sizeof(float) * C);
    for (int i = 0; i < L; i++) {
        const float *zi = z + (size_t)i * E, *dki = dk + (size_t)i * C;
        matvec(W, E, Wa, zi, a, pre);
        for (int j = 0; j < W; j++) hid[j] = pre[j] > 0.0f ? pre[j] : 0.0f;
        if (dbb)
            for (int c = 0; c < C; c++) dbb[c] += dki[c];
        matvec_bwd(C, W, Wb, dki, hid, dh, dWb);
        for (int j = 0; j < W; j++) dh[j] = pre[j] > 0.0f ? dh[j] : 0.0f;
        if (da)
            for (int j = 0; j < W; j++) da[j] += dh[j];
        matvec_bwd(W, E, Wa, dh, zi, dz ? dz + (size_t)i * E : NULL, dWa);
    }
    free(buf);
    return 0;
}
