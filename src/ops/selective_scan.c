/* Mamba's selective scan (docs/mixers.md, "Mamba"): sequential forward, exact reverse-scan backward, single step,
 * and the implicit attention matrix. One batch element per OpenMP iteration; the states of one
 * element (L·E·N floats, 300 KB at E=128, N=16, L=37) stay in L2 between forward and backward. */
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/op_util.h"

/* Internally a state is channel-minor, hT[n*E + e] ([N,E]), so every inner loop runs over the E
 * channels of one state index n: contiguous, vectorised, and with no cross-lane reduction (the
 * bits do not depend on the vector width). The API layout [.., E, N] is converted at the edges. */

/* The decays exp(Δ·A) are 2^(Δ·A2) with A2 = A·log2(e) formed once per call: the exponent then
 * needs no Cody–Waite reduction by ln 2. Their rounding adds about as much error as the product
 * Δ·A itself carries (relative |Δ·A|·6e-8). */
#define SSCAN_LOG2E 1.44269504088896341f

/* 2^x for x ≤ 0 (x ≤ 127 works): round-to-nearest k by the 1.5·2^23 shifter, r = x − k in
 * [−1/2, 1/2] exact, 2^r = 1 + r·q(r) with q of degree 5 (Chebyshev fit, 0.88 ulp on [−126, 0]),
 * 2^k from the shifter's low bits (no float→int conversion). x < −127 is clamped to −127, where
 * the scale's exponent field is 0: the result is 0. NaN passes the clamp and gives NaN. 2^0 = 1
 * exactly (Δ = 0 keeps a state unchanged: the patching recipe relies on it). About half the vector
 * operations of mlk_expf_neg, which dominated both the forward and the backward. */
MLK_INLINE float sscan_exp2(float x) {
    x = x < -127.0f ? -127.0f : x;
    const float shifter = 12582912.0f;
    union { /* a union keeps the loop vectorisable */
        float f;
        int32_t i;
    } kb, scale;
    kb.f = x + shifter;
    float r = x - (kb.f - shifter);
    float p = 1.545316294e-4f;
    p = p * r + 1.339086336e-3f;
    p = p * r + 9.618082557e-3f;
    p = p * r + 5.550357114e-2f;
    p = p * r + 2.402265076e-1f;
    p = p * r + 6.931471880e-1f;
    p = p * r + 1.0f;
    scale.i = (int32_t)((uint32_t)(kb.i + 127) << 23); /* low bits of kb.i: k + 2^22; the rest shifts out */
    return p * scale.f;
}

/* [E,N] → [N,E] (times s) and back */
static void to_ne(int E, int N, const float *en, float *ne, float s) {
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++) ne[(size_t)n * E + e] = en[(size_t)e * N + n] * s;
}
static void to_en(int E, int N, const float *ne, float *en) {
    for (int e = 0; e < E; e++)
        for (int n = 0; n < N; n++) en[(size_t)e * N + n] = ne[(size_t)n * E + e];
}

/* One token: h[n,:] = 2^(Δ⊙A2[n,:])⊙hp[n,:] + (Δ⊙u)·B_n;  y = D⊙u + Σ_n C_n·h[n,:] (n in order).
 * hp may equal h; AT here is A2 = A·log2(e). mlk_sscan_step repeats exactly these operations in
 * the API layout. */
enum { VB = 16 }; /* channel block: one AVX-512 vector; per-block accumulators stay in registers */

MLK_INLINE void fwd_block(int W, int E, int N, const float *hp, float *h, const float *ut, const float *dt,
                             const float *AT, const float *Bt, const float *Ct, const float *D, float *yt) {
    float y[VB], d[VB], du[VB];
    for (int i = 0; i < W; i++) {
        d[i] = dt[i];
        du[i] = dt[i] * ut[i];
        y[i] = D ? D[i] * ut[i] : 0.0f;
    }
    for (int n = 0; n < N; n++) {
        const float *An = AT + (size_t)n * E, *hpn = hp + (size_t)n * E;
        float *hn = h + (size_t)n * E;
        const float Bn = Bt[n], Cn = Ct[n];
#pragma omp simd
        for (int i = 0; i < W; i++) {
            float v = sscan_exp2(d[i] * An[i]) * hpn[i] + du[i] * Bn;
            hn[i] = v;
            y[i] += Cn * v;
        }
    }
    for (int i = 0; i < W; i++) yt[i] = y[i];
}

MLK_INLINE void token_fwd(int E, int N, const float *hp, float *h, const float *ut, const float *dt,
                             const float *AT, const float *Bt, const float *Ct, const float *D, float *yt) {
    for (int e0 = 0; e0 < E; e0 += VB) {
        const float *De = D ? D + e0 : NULL;
        if (E - e0 >= VB) fwd_block(VB, E, N, hp + e0, h + e0, ut + e0, dt + e0, AT + e0, Bt, Ct, De, yt + e0);
        else fwd_block(E - e0, E, N, hp + e0, h + e0, ut + e0, dt + e0, AT + e0, Bt, Ct, De, yt + e0);
    }
}

/* Forward of one batch element. h: [N,E], h_{-1} on entry, h_{L-1} on exit. HT: [L,N,E] all states
 * (or NULL: update h in place). u, dl, y: [L,E]; Bm, Cm: [L,N]; AT: [N,E] A·log2(e). */
MLK_CLONES static void scan_fwd_one(int L, int E, int N, const float *u, const float *dl, const float *AT,
                                    const float *Bm, const float *Cm, const float *D, float *h, float *HT, float *y) {
    size_t EN = (size_t)E * N;
    const float *hp = h;
    for (int t = 0; t < L; t++) {
        float *hc = HT ? HT + (size_t)t * EN : h;
        token_fwd(E, N, hp, hc, u + (size_t)t * E, dl + (size_t)t * E, AT, Bm + (size_t)t * N, Cm + (size_t)t * N, D,
                  y + (size_t)t * E);
        hp = hc;
    }
    if (HT && L > 0) memcpy(h, HT + (size_t)(L - 1) * EN, sizeof(float) * EN);
}

int mlk_sscan_fwd(int B, int L, int E, int N, const float *u, const float *delta, const float *A, const float *Bm,
                  const float *Cm, const float *D, const float *h0, float *y, float *hs, float *hlast) {
    if (L == 0 && !hlast) return 0; /* y and hs are [B, 0, ...]: nothing to write */
    size_t EN = (size_t)E * N;
    /* shared: [N,E] A·log2(e); per thread: the running state [N,E], all states [L,N,E] */
    mlk_scratch sc = mlk_scratch_new((double)B * L * EN, sizeof(float), EN, EN + (hs ? (size_t)L * EN : 0), 0);
    if (!sc.base) return -1;
    float *AT = sc.base;
    to_ne(E, N, A, AT, SSCAN_LOG2E);
#pragma omp parallel num_threads(sc.nt)
    {
        float *h = mlk_scratch_mine(&sc), *HT = hs ? h + EN : NULL;
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            size_t bL = (size_t)b * L;
            if (h0) to_ne(E, N, h0 + EN * b, h, 1.0f);
            else memset(h, 0, sizeof(float) * EN);
            scan_fwd_one(L, E, N, u + bL * E, delta + bL * E, AT, Bm + bL * N, Cm + bL * N, D, h, HT, y + bL * E);
            if (hs)
                for (int t = 0; t < L; t++) to_en(E, N, HT + (size_t)t * EN, hs + (bL + t) * EN);
            if (hlast) to_en(E, N, h, hlast + EN * b);
        }
    }
    free(sc.base);
    return 0;
}

void mlk_sscan_step(int B, int E, int N, float *h, const float *u, const float *delta, const float *A,
                    const float *Bm, const float *Cm, const float *D, float *y) {
    /* the operations of token_fwd, in the same order, on the [E,N] layout */
    size_t EN = (size_t)E * N;
    for (int b = 0; b < B; b++) {
        float *hb = h + EN * b;
        const float *ub = u + (size_t)b * E, *db = delta + (size_t)b * E;
        const float *Bt = Bm + (size_t)b * N, *Ct = Cm + (size_t)b * N;
        for (int e = 0; e < E; e++) {
            float acc = D ? D[e] * ub[e] : 0.0f;
            for (int n = 0; n < N; n++) {
                float a = sscan_exp2(db[e] * (A[(size_t)e * N + n] * SSCAN_LOG2E));
                float v = a * hb[(size_t)e * N + n] + (db[e] * ub[e]) * Bt[n];
                hb[(size_t)e * N + n] = v;
                acc += Ct[n] * v;
            }
            y[(size_t)b * E + e] = acc;
        }
    }
}

/* The backward runs one channel block (VB channels) at a time through the whole sequence: the
 * block's recomputed states and decays ([L,N,VB] each, 76 KB at N=16) stay in L1/L2 whatever E is.
 * Block-local arrays (also the block's columns of A and dA) have stride VB between state indices n:
 * rows E floats apart would alias in L1 when E is a multiple of 512. */

/* States and decays of one block for all t: hb[t,n,i] = h_t, ab[t,n,i] = exp(Δ_t A) (the bits of
 * fwd_block; A2T: [N,VB] block columns of A·log2(e)). With have_states hb is already filled and
 * only the decays are formed. */
MLK_INLINE void states_block(int W, int L, int E, int N, const float *u, const float *dl, const float *A2T,
                             const float *Bm, const float *h0b, int have_states, float *hb, float *ab) {
    for (int t = 0; t < L; t++) {
        const float *ut = u + (size_t)t * E, *dt = dl + (size_t)t * E;
        const float *hp = t > 0 ? hb + (size_t)(t - 1) * N * VB : h0b;
        float *h = hb + (size_t)t * N * VB, *at = ab + (size_t)t * N * VB;
        float d[VB], du[VB];
        for (int i = 0; i < W; i++) {
            d[i] = dt[i];
            du[i] = dt[i] * ut[i];
        }
        for (int n = 0; n < N; n++) {
            const float *An = A2T + n * VB, *hpn = hp + n * VB;
            float *hn = h + n * VB, *an = at + n * VB;
            const float Bn = Bm[(size_t)t * N + n];
            if (have_states) {
#pragma omp simd
                for (int i = 0; i < W; i++) an[i] = sscan_exp2(d[i] * An[i]);
            } else {
#pragma omp simd
                for (int i = 0; i < W; i++) {
                    float a = sscan_exp2(d[i] * An[i]);
                    an[i] = a;
                    hn[i] = a * hpn[i] + du[i] * Bn;
                }
            }
        }
    }
}

/* Reverse pass of one block. AT: [N,VB] block columns of A; carry: [N,VB], ∂ℓ/∂h_{t} carried as
 * a_{t+1}⊙dh_{t+1}, ends as ∂ℓ/∂h_{-1}; dAb: [N,VB] block columns of dA (accumulated); lanes: [2,L,N,VB] lane partials of dC_t, dB_t, accumulated
 * over blocks; du, ddelta, dDb at the block's channels. */
MLK_INLINE void bwd_block(int W, int L, int E, int N, const float *u, const float *dl, const float *dy,
                          const float *AT, const float *Bm, const float *Cm, const float *D, const float *h0b,
                          const float *hb, const float *ab, float *carry, float *dAb, float *lanes, float *du,
                          float *ddelta, float *dDb) {
    float *dCl = lanes, *dBl = lanes + (size_t)L * N * VB;
    for (int t = L - 1; t >= 0; t--) {
        size_t tE = (size_t)t * E;
        const float *ht = hb + (size_t)t * N * VB, *hp = t > 0 ? hb + (size_t)(t - 1) * N * VB : h0b;
        const float *at = ab + (size_t)t * N * VB;
        float g[VB], d[VB], uu[VB], dU[VB], su[VB], sd[VB];
        for (int i = 0; i < W; i++) {
            g[i] = dy[tE + i], d[i] = dl[tE + i], uu[i] = u[tE + i], dU[i] = d[i] * uu[i];
            su[i] = 0.0f, sd[i] = 0.0f;
        }
        for (int n = 0; n < N; n++) {
            const float *An = AT + n * VB, *htn = ht + n * VB, *hpn = hp + n * VB, *an = at + n * VB;
            float *cn = carry + n * VB, *dAn = dAb + n * VB;
            float *dCn = dCl + ((size_t)t * N + n) * VB, *dBn = dBl + ((size_t)t * N + n) * VB;
            const float Bn = Bm[(size_t)t * N + n], Cn = Cm[(size_t)t * N + n];
            /* 8 vector operations an element: the Σ_n ∂h·B_n·u term of ∂Δ is u·su, added once */
#pragma omp simd
            for (int i = 0; i < W; i++) {
                float dh = Cn * g[i] + cn[i]; /* ∂ℓ/∂h_t = C_t g_t + a_{t+1}⊙∂ℓ/∂h_{t+1} */
                float dha = dh * an[i], q = dha * hpn[i];
                dCn[i] += g[i] * htn[i];
                dBn[i] += dh * dU[i];
                sd[i] += An[i] * q;
                su[i] += dh * Bn;
                dAn[i] += d[i] * q;
                cn[i] = dha;
            }
        }
        for (int i = 0; i < W; i++) {
            if (du) du[tE + i] = su[i] * d[i] + (D ? D[i] * g[i] : 0.0f);
            if (ddelta) ddelta[tE + i] = sd[i] + uu[i] * su[i];
            dDb[i] += g[i] * uu[i];
        }
    }
}

/* x[r][i] += x[r][i + h] for i < h over rows of VB floats: one step of the lane-sum tree. */
MLK_INLINE void fold_lanes(int h, size_t rows, float *x) {
    for (size_t r = 0; r < rows; r++) {
        float *xr = x + r * VB;
#pragma omp simd
        for (int i = 0; i < h; i++) xr[i] += xr[i + h];
    }
}

/* Backward of one batch element (pointers at the element). hs: [L,E,N] saved states or NULL;
 * h0, dh0: [E,N] or NULL. dAb: [N,E], dDb: [E] this element's partials (overwritten).
 * AT, A2T: [N,E] A and A·log2(e). scratch: 4·L·N·VB + 5·N·VB floats. */
MLK_CLONES static void scan_bwd_one(int L, int E, int N, const float *u, const float *dl, const float *AT, const float *A2T,
                                    const float *Bm, const float *Cm, const float *D, const float *h0,
                                    const float *hs, const float *dy, float *du, float *ddelta, float *dAb,
                                    float *dBm, float *dCm, float *dDb, float *dh0, float *scratch) {
    size_t LNV = (size_t)L * N * VB;
    size_t NV = (size_t)N * VB;
    float *hb = scratch, *ab = hb + LNV, *lanes = ab + LNV; /* lanes: 2·LNV */
    float *h0b = lanes + 2 * LNV, *carry = h0b + NV, *Ab = carry + NV, *A2b = Ab + NV, *dAl = A2b + NV;
    memset(dDb, 0, sizeof(float) * E);
    memset(lanes, 0, sizeof(float) * 2 * LNV);
    for (int e0 = 0; e0 < E; e0 += VB) {
        int W = E - e0 >= VB ? VB : E - e0;
        for (int n = 0; n < N; n++)
            for (int i = 0; i < W; i++) {
                h0b[n * VB + i] = h0 ? h0[(size_t)(e0 + i) * N + n] : 0.0f;
                Ab[n * VB + i] = AT[(size_t)n * E + e0 + i];
                A2b[n * VB + i] = A2T[(size_t)n * E + e0 + i];
            }
        memset(dAl, 0, sizeof(float) * NV);
        if (hs)
            for (int t = 0; t < L; t++)
                for (int n = 0; n < N; n++)
                    for (int i = 0; i < W; i++)
                        hb[((size_t)t * N + n) * VB + i] = hs[((size_t)t * E + e0 + i) * N + n];
        const float *De = D ? D + e0 : NULL;
        float *due = du ? du + e0 : NULL, *dde = ddelta ? ddelta + e0 : NULL;
        memset(carry, 0, sizeof(float) * N * VB);
        if (W == VB) {
            states_block(VB, L, E, N, u + e0, dl + e0, A2b, Bm, h0b, hs != NULL, hb, ab);
            bwd_block(VB, L, E, N, u + e0, dl + e0, dy + e0, Ab, Bm, Cm, De, h0b, hb, ab, carry, dAl, lanes, due, dde,
                      dDb + e0);
        } else {
            states_block(W, L, E, N, u + e0, dl + e0, A2b, Bm, h0b, hs != NULL, hb, ab);
            bwd_block(W, L, E, N, u + e0, dl + e0, dy + e0, Ab, Bm, Cm, De, h0b, hb, ab, carry, dAl, lanes, due, dde,
                      dDb + e0);
        }
        for (int n = 0; n < N; n++)
            for (int i = 0; i < W; i++) dAb[(size_t)n * E + e0 + i] = dAl[n * VB + i];
        if (dh0)
            for (int n = 0; n < N; n++)
                for (int i = 0; i < W; i++) dh0[(size_t)(e0 + i) * N + n] = carry[n * VB + i];
    }
    /* lane partials summed as a fixed pairwise tree (vector steps over all (t, n) at once; a serial
     * sum per (t, n) took a fifth of this function): the same bits for any vector width */
    fold_lanes(VB / 2, 2 * (size_t)L * N, lanes);
    fold_lanes(VB / 4, 2 * (size_t)L * N, lanes);
    fold_lanes(VB / 8, 2 * (size_t)L * N, lanes);
    fold_lanes(VB / 16, 2 * (size_t)L * N, lanes);
    for (size_t tn = 0; tn < (size_t)L * N; tn++) {
        if (dCm) dCm[tn] = lanes[tn * VB];
        if (dBm) dBm[tn] = lanes[LNV + tn * VB];
    }
}

int mlk_sscan_bwd(int B, int L, int E, int N, const float *u, const float *delta, const float *A, const float *Bm,
                  const float *Cm, const float *D, const float *h0, const float *hs, const float *dy, float *du,
                  float *ddelta, float *dA, float *dBm, float *dCm, float *dD, float *dh0) {
    size_t EN = (size_t)E * N;
    /* shared: AT, A2T [N,E]; per batch element: dA, dD partials (summed in batch order at the end, so
     * the bits do not depend on the thread count); per thread: the block scratch of scan_bwd_one */
    mlk_scratch sc = mlk_scratch_new(3.0 * B * L * EN, sizeof(float), 2 * EN + EN * B + (size_t)E * B,
                                     4 * (size_t)L * N * VB + 5 * (size_t)N * VB, 0);
    if (!sc.base) return -1;
    float *AT = sc.base, *A2T = AT + EN, *dA_part = A2T + EN, *dD_part = dA_part + EN * B;
    to_ne(E, N, A, AT, 1.0f);
    to_ne(E, N, A, A2T, SSCAN_LOG2E);
#pragma omp parallel num_threads(sc.nt)
    {
        float *thr = mlk_scratch_mine(&sc);
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            size_t bL = (size_t)b * L;
            scan_bwd_one(L, E, N, u + bL * E, delta + bL * E, AT, A2T, Bm + bL * N, Cm + bL * N, D, h0 ? h0 + EN * b : NULL,
                         hs ? hs + bL * EN : NULL, dy + bL * E, du ? du + bL * E : NULL,
                         ddelta ? ddelta + bL * E : NULL, dA_part + EN * b, dBm ? dBm + bL * N : NULL,
                         dCm ? dCm + bL * N : NULL, dD_part + (size_t)E * b, dh0 ? dh0 + EN * b : NULL,
                         thr);
        }
    }
    /* fixed-order reduction over the batch */
    if (dA) {
        memset(dA, 0, sizeof(float) * EN);
        for (int b = 0; b < B; b++)
            for (int n = 0; n < N; n++)
                for (int e = 0; e < E; e++) dA[(size_t)e * N + n] += dA_part[EN * b + (size_t)n * E + e];
    }
    if (dD) {
        memset(dD, 0, sizeof(float) * E);
        for (int b = 0; b < B; b++)
            for (int e = 0; e < E; e++) dD[e] += dD_part[(size_t)E * b + e];
    }
    free(sc.base);
    return 0;
}

void mlk_sscan_attention(int B, int L, int E, int N, const float *delta, const float *A, const float *Bm,
                         const float *Cm, const float *D, float *alpha) {
    int nt = mlk_threads_for((double)B * E * L * L * N);
#pragma omp parallel for collapse(2) num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++) {
            float p[256]; /* decayed Δ_s B_s for one source s; N ≤ 256 */
            const float *Ae = A + (size_t)e * N;
            float *al = alpha + ((size_t)b * E + e) * L * L; /* [L,L] */
            memset(al, 0, sizeof(float) * L * L);
            for (int s = 0; s < L; s++) {
                size_t bs = (size_t)b * L + s;
                float ds = delta[bs * E + e];
                for (int n = 0; n < N && n < 256; n++) p[n] = ds * Bm[bs * N + n];
                for (int t = s; t < L; t++) {
                    size_t btt = (size_t)b * L + t;
                    if (t > s) {
                        float dtt = delta[btt * E + e];
                        for (int n = 0; n < N && n < 256; n++) p[n] *= sscan_exp2(dtt * (Ae[n] * SSCAN_LOG2E));
                    }
                    float acc = 0.0f;
                    for (int n = 0; n < N && n < 256; n++) acc += Cm[btt * N + n] * p[n];
                    al[(size_t)t * L + s] = acc + (t == s && D ? D[e] : 0.0f);
                }
            }
        }
}

/* ------------------------------------------------------------------ the differentiable op (ops/mixer_ops.h) */

/* The softplus (threshold 20, as torch and the mamba kernel) and the SiLU gate of the fused scan,
 * as vectorised loops compiled for AVX2/AVX-512, on kernel_util.h's sigmoid and softplus that
 * ml_unary uses. */
MLK_CLONES static void pw_softplus(size_t n, const float *x, float *y) {
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = mlk_softplus(x[i]);
}
/* g ⊙ softplus'(x) in place: σ(x), 1 above the threshold */
MLK_CLONES static void pw_softplus_bwd(size_t n, const float *x, float *g) {
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        g[i] *= x[i] > 20.0f ? 1.0f : mlk_sigmoid(x[i]);
}
/* out[r,:] = ys[r,:] ⊙ silu(z[r,:]) over R rows of E (z rows ldz apart) */
MLK_CLONES static void pw_gate(size_t R, int E, const float *ys, const float *z, size_t ldz, float *out) {
    for (size_t r = 0; r < R; r++) {
        const float *zr = z + r * ldz, *yr = ys + r * E;
        float *o = out + r * E;
#pragma omp simd
        for (int e = 0; e < E; e++)
            o[e] = yr[e] * (zr[e] * mlk_sigmoid(zr[e]));
    }
}
/* gated backward: gs = g ⊙ silu(z), dz = g ⊙ ys ⊙ silu'(z) (dz may be NULL) */
MLK_CLONES static void pw_gate_bwd(size_t R, int E, const float *ys, const float *z, size_t ldz, const float *g,
                                   float *gs, float *dz) {
    for (size_t r = 0; r < R; r++) {
        const float *zr = z + r * ldz, *yr = ys + r * E, *gr = g + r * E;
        float *gsr = gs + r * E, *dzr = dz ? dz + r * E : NULL;
#pragma omp simd
        for (int e = 0; e < E; e++) {
            float zi = zr[e], sg = mlk_sigmoid(zi);
            gsr[e] = gr[e] * zi * sg;
            if (dzr) dzr[e] = gr[e] * yr[e] * sg * (1.0f + zi * (1.0f - sg));
        }
    }
}
/* Saved: 0 u, 1 delta input, 2 A, 3 Bm, 4 Cm, 5 D, 6 h0, 7 z (possibly a column slice, rows iarg[2]
 * apart); ctx: [ys | Δ] (B·L·E floats each; ys when gated, Δ when softplus).
 * iarg[0]: bit i set when saved input i exists; iarg[1]: softplus applied to the delta input. */
static ml_status sscan_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *s[8];
    for (int i = 0; i < 8; i++) {
        s[i] = (n->iarg[0] >> i) & 1 ? ml_node_saved(n, i) : NULL;
        if (((n->iarg[0] >> i) & 1) && !s[i]) return ml_last_status();
    }
    int B = (int)s[0]->shape[0], L = (int)s[0]->shape[1], E = (int)s[0]->shape[2], N = (int)s[2]->shape[1];
    size_t nE = (size_t)B * L * E;
    bool sp = n->iarg[1] != 0;
    for (int i = 0; i < 8; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    /* scratch: the gradient reaching the scan output (when gated) */
    float *gs = s[7] ? mlk_falloc(nE) : NULL;
    if (s[7] && !gs) {
        for (int i = 0; i < 8; i++)
            ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "selective_scan backward: out of memory");
    }
    const float *draw = ml_f32(s[1]), *go = ml_f32(g), *ys = n->ctx, *dl = sp ? (float *)n->ctx + nE : NULL;
    if (s[7]) { /* out = ys ⊙ silu(z): g_ys = g ⊙ silu(z), dz = g ⊙ ys ⊙ silu'(z) */
        pw_gate_bwd((size_t)B * L, E, ys, ml_f32(s[7]), (size_t)n->iarg[2], go, gs, mlo_gp(gin[7]));
    }
    float *p[7];
    for (int i = 0; i < 7; i++)
        p[i] = s[i] ? ml_f32(s[i]) : NULL;
    int rc = mlk_sscan_bwd(B, L, E, N, p[0], sp ? dl : p[1], p[2], p[3], p[4], p[5], p[6], NULL, s[7] ? gs : go,
                           mlo_gp(gin[0]), mlo_gp(gin[1]), mlo_gp(gin[2]), mlo_gp(gin[3]), mlo_gp(gin[4]),
                           mlo_gp(gin[5]), mlo_gp(gin[6]));
    if (!rc && sp && gin[1]) pw_softplus_bwd(nE, draw, ml_f32(gin[1])); /* dΔraw = dΔ ⊙ σ(Δraw) */
    free(gs);
    if (rc) {
        for (int i = 0; i < 8; i++)
            ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "selective_scan backward: out of memory");
    }
    return ML_OK;
}

/* h0_arg: h0's argument number as the caller's user sees it (7 in ml_selective_scan, 8 in _ex). */
static ml_tensor *selective_scan_impl(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm,
                                      ml_tensor *D, ml_tensor *z, ml_tensor *h0, bool delta_softplus,
                                      ml_tensor **states, ml_tensor **hlast, int h0_arg) {
    const char *fn = "selective_scan";
    ml_tensor *ins[8] = {u, delta, A, Bm, Cm, D, h0, z};
    char d[128];
    if (states) *states = NULL;
    if (hlast) *hlast = NULL;
    if (mlo_check_f32s(fn, 8, ins)) return NULL;
    if (u->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,E]", fn, u->ndim), NULL;
    int64_t B = u->shape[0], L = u->shape[1], E = u->shape[2];
    int64_t N = A->ndim == 2 ? A->shape[1] : -1;
    mlo_descf(d, sizeof d, "[B,L,E]=[%lld,%lld,%lld] like argument 1", (long long)B, (long long)L, (long long)E);
    if (mlo_want_shape(fn, 2, delta, 3, u->shape, d)) return NULL;
    if (z && mlo_want_shape(fn, 7, z, 3, u->shape, d)) return NULL;
    if (mlo_want_shape(fn, 3, A, 2, (int64_t[]){E, -1}, mlo_descf(d, sizeof d, "[E,N] with E=%lld", (long long)E)))
        return NULL;
    mlo_descf(d, sizeof d, "[B,L,N]=[%lld,%lld,%lld]", (long long)B, (long long)L, (long long)N);
    if (mlo_want_shape(fn, 4, Bm, 3, (int64_t[]){B, L, N}, d) || mlo_want_shape(fn, 5, Cm, 3, (int64_t[]){B, L, N}, d))
        return NULL;
    if (D && mlo_want_shape(fn, 6, D, 1, &E, mlo_descf(d, sizeof d, "[E] with E=%lld", (long long)E))) return NULL;
    if (h0 &&
        mlo_want_shape(fn, h0_arg, h0, 3, (int64_t[]){B, E, N},
                       mlo_descf(d, sizeof d, "[B,E,N]=[%lld,%lld,%lld]", (long long)B, (long long)E, (long long)N)))
        return NULL;
    if (mlo_check_int_sizes(fn, u) || mlo_check_int_sizes(fn, A)) return NULL;
    size_t nE = (size_t)B * L * E;
    int64_t ldz = z ? mlo_row_stride(z) : 0; /* the gate may be a column slice of in_proj's output */
    ml_tensor *c[8] = {0};
    for (int i = 0; i < 8; i++)
        c[i] = ins[i] ? (i == 7 && ldz ? ml_retain(z) : mlo_dense(ins[i])) : NULL;
    if (z && !ldz) ldz = E;
    ml_tensor *out = ml_empty(ML_F32, 3, u->shape);
    ml_tensor *hs = states ? ml_empty(ML_F32, 4, (int64_t[]){B, L, E, N}) : NULL;
    ml_tensor *hl = hlast ? ml_empty(ML_F32, 3, (int64_t[]){B, E, N}) : NULL;
    bool rec = ml_any_needs_grad(8, ins);
    /* ctx of the node: [ys | Δ], the ungated output (gated) and Δ after softplus (softplus) */
    float *ctx = (z || delta_softplus) ? mlk_falloc(nE * 2) : NULL;
    float *ys = z ? ctx : NULL, *dl = delta_softplus ? ctx + nE : NULL;
    bool ok = out && (!states || hs) && (!hlast || hl) && (!(z || delta_softplus) || ctx);
    for (int i = 0; i < 8; i++)
        ok = ok && (!ins[i] || c[i]);
    if (ok) {
        const float *draw = ml_f32(c[1]);
        if (dl) pw_softplus(nE, draw, dl);
        float *p[7];
        for (int i = 0; i < 7; i++)
            p[i] = c[i] ? ml_f32(c[i]) : NULL;
        if (mlk_sscan_fwd((int)B, (int)L, (int)E, (int)N, p[0], dl ? dl : p[1], p[2], p[3], p[4], p[5], p[6],
                          ys ? ys : ml_f32(out), hs ? ml_f32(hs) : NULL, hl ? ml_f32(hl) : NULL))
            ok = false;
        if (ok && z) pw_gate((size_t)B * L, (int)E, ys, ml_f32(c[7]), (size_t)ldz, ml_f32(out));
    }
    if (!ok) {
        mlo_release_all(8, c);
        free(ctx);
        ml_release(out), ml_release(hs), ml_release(hl);
        return mlo_oom(fn);
    }
    if (rec) {
        ml_node *nd = ml_node_new("SelectiveScanBackward", sscan_backward, 8, ins);
        if (nd) {
            for (int i = 0; i < 8; i++) {
                ml_node_save(nd, i, c[i]);
                if (c[i]) nd->iarg[0] |= 1 << i; /* which optional inputs exist */
            }
            nd->iarg[1] = delta_softplus;
            nd->iarg[2] = ldz;
            nd->ctx = ctx, nd->ctx_free = free, ctx = NULL;
        }
        out = mlo_attach(out, nd);
    }
    free(ctx);
    mlo_release_all(8, c);
    if (!out) {
        ml_release(hs), ml_release(hl);
        return NULL;
    }
    if (states) *states = hs;
    if (hlast) *hlast = hl;
    return out;
}

ml_tensor *ml_selective_scan_ex(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm,
                                ml_tensor *D, ml_tensor *z, ml_tensor *h0, bool delta_softplus, ml_tensor **states,
                                ml_tensor **hlast) {
    return selective_scan_impl(u, delta, A, Bm, Cm, D, z, h0, delta_softplus, states, hlast, 8);
}

ml_tensor *ml_selective_scan(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm, ml_tensor *D,
                             ml_tensor *h0, ml_tensor **states, ml_tensor **hlast) {
    return selective_scan_impl(u, delta, A, Bm, Cm, D, NULL, h0, false, states, hlast, 7);
}

ml_tensor *ml_selective_scan_attention(ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm, ml_tensor *D) {
    const char *fn = "selective_scan_attention";
    ml_tensor *ins[5] = {delta, A, Bm, Cm, D};
    char d[128];
    if (mlo_check_f32s(fn, 5, ins)) return NULL;
    if (delta->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,E]", fn, delta->ndim), NULL;
    int64_t B = delta->shape[0], L = delta->shape[1], E = delta->shape[2];
    int64_t N = A->ndim == 2 ? A->shape[1] : -1;
    if (mlo_want_shape(fn, 2, A, 2, (int64_t[]){E, -1}, mlo_descf(d, sizeof d, "[E,N] with E=%lld", (long long)E)))
        return NULL;
    if (N > 256) return ml_fail(ML_ERR_SHAPE, "%s: at most 256 states supported, got N=%lld", fn, (long long)N), NULL;
    mlo_descf(d, sizeof d, "[B,L,N]=[%lld,%lld,%lld]", (long long)B, (long long)L, (long long)N);
    if (mlo_want_shape(fn, 3, Bm, 3, (int64_t[]){B, L, N}, d) || mlo_want_shape(fn, 4, Cm, 3, (int64_t[]){B, L, N}, d))
        return NULL;
    if (D && mlo_want_shape(fn, 5, D, 1, &E, mlo_descf(d, sizeof d, "[E] with E=%lld", (long long)E))) return NULL;
    ml_tensor *c[5];
    for (int i = 0; i < 5; i++)
        c[i] = ins[i] ? mlo_dense(ins[i]) : NULL;
    ml_tensor *out = ml_empty(ML_F32, 4, (int64_t[]){B, E, L, L});
    if (out)
        mlk_sscan_attention((int)B, (int)L, (int)E, (int)N, ml_f32(c[0]), ml_f32(c[1]), ml_f32(c[2]), ml_f32(c[3]),
                            c[4] ? ml_f32(c[4]) : NULL, ml_f32(out));
    mlo_release_all(5, c);
    return out ? out : mlo_oom(fn);
}
