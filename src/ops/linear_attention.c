/* Based linear attention with the Taylor feature map (docs/mixers.md, "Based"): quadratic view forward/backward
 * via the closed form φ(q)·φ(k) = 1 + s + s²/2 (s = q·k/√F), the explicit feature map, and the
 * recurrent step over the KV and normaliser states. Parallel over (batch, head). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

/* short dot products (the F = 8 features) */
MLK_INLINE float dotf(int n, const float *a, const float *b) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* long dot products (the Dv values), vectorised */
MLK_INLINE float dotv(int n, const float *a, const float *b) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Forward of one (batch, head). */
MLK_CLONES static void based_fwd_one(int b, int h, int L, int H, int F, int Dv, float eps, float inv_sqrt_f,
                                     const float *q, const float *k, const float *v, float *y, float *den,
                                     float *pattern) {
    for (int t = 0; t < L; t++) {
        const float *qt = q + (((size_t)b * L + t) * H + h) * F;
        float *yt = y + (((size_t)b * L + t) * H + h) * Dv;
        float *pt = pattern ? pattern + (((size_t)b * H + h) * L + t) * L : NULL;
        memset(yt, 0, sizeof(float) * Dv);
        float dsum = 0.0f;
        for (int s = 0; s <= t; s++) {
            const float *ks = k + (((size_t)b * L + s) * H + h) * F;
            const float *vs = v + (((size_t)b * L + s) * H + h) * Dv;
            float sc = dotf(F, qt, ks) * inv_sqrt_f;
            float a = 1.0f + sc + 0.5f * sc * sc; /* φ(q)·φ(k) */
            dsum += a;
            if (pt) pt[s] = a;
#pragma omp simd
            for (int j = 0; j < Dv; j++) yt[j] += a * vs[j];
        }
        float dn = dsum + eps;
        float inv = 1.0f / dn;
        for (int j = 0; j < Dv; j++) yt[j] *= inv;
        if (den) den[((size_t)b * H + h) * L + t] = dn;
        if (pt) {
            for (int s = 0; s <= t; s++) pt[s] *= inv;
            for (int s = t + 1; s < L; s++) pt[s] = 0.0f;
        }
    }
}

void mlk_based_fwd_ex(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k,
                      const float *v, float *y, float *den, float *pattern) {
    const float inv_sqrt_f = 1.0f / sqrtf((float)F);
    int nt = mlk_threads_for((double)B * H * L * L * (F + Dv) * 0.5);
#pragma omp parallel for collapse(2) num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            based_fwd_one(b, h, L, H, F, Dv, eps, inv_sqrt_f, q, k, v, y, den, pattern);
        }
}

void mlk_based_fwd(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k, const float *v,
                   float *y) {
    mlk_based_fwd_ex(B, L, H, F, Dv, eps, q, k, v, y, NULL, NULL);
}

/* Backward of one (batch, head); arow: [L], yt: [Dv] scratch. */
MLK_CLONES static void based_bwd_one(int b, int h, int L, int H, int F, int Dv, float eps, float inv_sqrt_f,
                                     const float *q, const float *k, const float *v, const float *dy, float *dq,
                                     float *dk, float *dv, float *arow, float *yt) {
    for (int t = 0; t < L; t++) {
        size_t rt = ((size_t)b * L + t) * H + h;
        const float *qt = q + rt * F, *dyt = dy + rt * Dv;
        /* recompute A[t,:], den_t and y_t exactly as the forward does */
        memset(yt, 0, sizeof(float) * Dv);
        float dsum = 0.0f;
        for (int s = 0; s <= t; s++) {
            size_t rs = ((size_t)b * L + s) * H + h;
            float sc = dotf(F, qt, k + rs * F) * inv_sqrt_f;
            float a = 1.0f + sc + 0.5f * sc * sc;
            arow[s] = sc;
            dsum += a;
            const float *vs = v + rs * Dv;
#pragma omp simd
            for (int j = 0; j < Dv; j++) yt[j] += a * vs[j];
        }
        float inv = 1.0f / (dsum + eps);
        float dyy = 0.0f;
        for (int j = 0; j < Dv; j++) dyy += dyt[j] * yt[j] * inv;
        const float dden = -dyy * inv; /* dden_t = −(dy_t·y_t)/den_t */
        float dqt[MLK_BASED_MAXF] = {0};
        for (int s = 0; s <= t; s++) {
            size_t rs = ((size_t)b * L + s) * H + h;
            const float *vs = v + rs * Dv, *ks = k + rs * F;
            float sc = arow[s], a = 1.0f + sc + 0.5f * sc * sc;
            /* dA[t,s] = dnum_t·v_s + dden_t with dnum_t = dy_t/den_t */
            float dA = dotv(Dv, dyt, vs) * inv + dden;
            if (dv) {
                float *dvs = dv + rs * Dv;
                float ai = a * inv;
#pragma omp simd
                for (int j = 0; j < Dv; j++) dvs[j] += ai * dyt[j];
            }
            float ds = dA * (1.0f + sc) * inv_sqrt_f; /* d(1+s+s²/2)/ds, ds/d(q·k) */
            for (int f = 0; f < F; f++) dqt[f] += ds * ks[f];
            if (dk) {
                float *dks = dk + rs * F;
                for (int f = 0; f < F; f++) dks[f] += ds * qt[f];
            }
        }
        if (dq) memcpy(dq + rt * F, dqt, sizeof(float) * F);
    }
}

int mlk_based_bwd(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k, const float *v,
                  const float *dy, float *dq, float *dk, float *dv) {
    const float inv_sqrt_f = 1.0f / sqrtf((float)F);
    int nt = mlk_threads_for((double)B * H * L * L * (F + Dv));
    size_t per_thread = (size_t)L + Dv; /* A[t,:] row, y_t */
    float *scratch = mlk_falloc(per_thread * nt);
    if (!scratch) return -1;
    /* dk and dv of a (b,h) receive contributions from every later t: zero them first */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < L; t++)
            for (int h = 0; h < H; h++) {
                size_t r = ((size_t)b * L + t) * H + h;
                if (dk) memset(dk + r * F, 0, sizeof(float) * F);
                if (dv) memset(dv + r * Dv, 0, sizeof(float) * Dv);
            }
#pragma omp parallel num_threads(nt)
    {
        int tid = mlk_thread_id();
        float *arow = scratch + per_thread * tid, *yt = arow + L;
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                based_bwd_one(b, h, L, H, F, Dv, eps, inv_sqrt_f, q, k, v, dy, dq, dk, dv, arow, yt);
            }
    }
    free(scratch);
    return 0;
}

void mlk_taylor_fwd(int n, int F, const float *x, float *phi) {
    /* divisions as in the original (x / F^{1/4}, x_m x_j / (√2·√F)) */
    const float rd = (float)sqrt(sqrt((double)F)), rrd = (float)(sqrt(2.0) * sqrt((double)F));
    int P = mlk_taylor_dim(F);
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * F;
        float *p = phi + (size_t)i * P;
        p[0] = 1.0f;
        for (int m = 0; m < F; m++) p[1 + m] = xi[m] / rd;
        for (int m = 0; m < F; m++)
            for (int j = 0; j < F; j++) p[1 + F + m * F + j] = xi[m] * xi[j] / rrd;
    }
}

void mlk_taylor_bwd(int n, int F, const float *x, const float *dphi, float *dx) {
    const float r = (float)(1.0 / sqrt(sqrt((double)F))), c = (float)(1.0 / (sqrt(2.0) * sqrt((double)F)));
    int P = mlk_taylor_dim(F);
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * F, *g = dphi + (size_t)i * P;
        const float *g2 = g + 1 + F; /* [F,F] */
        for (int m = 0; m < F; m++) {
            float acc = 0.0f;
            for (int j = 0; j < F; j++) acc += (g2[m * F + j] + g2[j * F + m]) * xi[j];
            dx[(size_t)i * F + m] = g[1 + m] * r + c * acc;
        }
    }
}

void mlk_based_step(int B, int H, int F, int Dv, float eps, float *S, float *z, const float *q, const float *k,
                    const float *v, float *y) {
    int P = mlk_taylor_dim(F);
    float pk[1 + MLK_BASED_MAXF + MLK_BASED_MAXF * MLK_BASED_MAXF];
    float pq[1 + MLK_BASED_MAXF + MLK_BASED_MAXF * MLK_BASED_MAXF];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t bh = (size_t)b * H + h;
            float *Sb = S + bh * P * Dv, *zb = z + bh * P;
            const float *vb = v + bh * Dv;
            float *yb = y + bh * Dv;
            mlk_taylor_fwd(1, F, k + bh * F, pk);
            mlk_taylor_fwd(1, F, q + bh * F, pq);
            for (int p = 0; p < P; p++) {
                zb[p] += pk[p];
                float *Sp = Sb + (size_t)p * Dv;
                for (int j = 0; j < Dv; j++) Sp[j] += pk[p] * vb[j];
            }
            float dn = dotf(P, pq, zb) + eps;
            memset(yb, 0, sizeof(float) * Dv);
            for (int p = 0; p < P; p++) {
                const float *Sp = Sb + (size_t)p * Dv;
                for (int j = 0; j < Dv; j++) yb[j] += pq[p] * Sp[j];
            }
            for (int j = 0; j < Dv; j++) yb[j] /= dn;
        }
}
