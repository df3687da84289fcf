/* Mamba's selective scan (spec §9): sequential forward, exact reverse-scan backward, single step,
 * and the implicit attention matrix. One batch element per OpenMP iteration; the states of one
 * element (L·E·N floats, 300 KB at E=128, N=16, L=37) stay in L2 between forward and backward. */
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

/* One token for one batch element, in place on h[E,N]:
 * h[e,:] = exp(Δ_e A[e,:])⊙h[e,:] + Δ_e u_e Bt;  y_e = Ct·h[e,:] + D_e u_e.
 * hprev may equal h (in place) or point elsewhere (then h is written, hprev read). */
static inline void scan_token(int E, int N, const float *restrict hprev, float *h, const float *ut,
                              const float *dt, const float *A, const float *Bt, const float *Ct, const float *D,
                              float *yt) {
    for (int e = 0; e < E; e++) {
        const float d = dt[e], du = d * ut[e];
        const float *Ae = A + (size_t)e * N;
        const float *hp = hprev + (size_t)e * N;
        float *he = h + (size_t)e * N;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int n = 0; n < N; n++) {
            float hn = mlk_expf(d * Ae[n]) * hp[n] + du * Bt[n];
            he[n] = hn;
            acc += Ct[n] * hn;
        }
        yt[e] = acc + (D ? D[e] * ut[e] : 0.0f);
    }
}

int mlk_sscan_fwd(int B, int L, int E, int N, const float *u, const float *delta, const float *A, const float *Bm,
                  const float *Cm, const float *D, const float *h0, float *y, float *hs, float *hlast) {
    size_t EN = (size_t)E * N;
    int nt = mlk_threads_for((double)B * L * EN);
    float *scratch = NULL;
    if (!hs) { /* one running state per thread */
        scratch = malloc(sizeof(float) * EN * nt);
        if (!scratch) return -1;
    }
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *run = scratch ? scratch + EN * tid : NULL;
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            const float *hprev = h0 ? h0 + EN * b : NULL;
            if (!hprev) { /* zero initial state */
                float *first = hs ? hs + (size_t)b * L * EN : run;
                memset(first, 0, sizeof(float) * EN);
                hprev = first;
            } else if (!hs) {
                memcpy(run, hprev, sizeof(float) * EN);
                hprev = run;
            }
            for (int t = 0; t < L; t++) {
                size_t bt = (size_t)b * L + t;
                float *hcur = hs ? hs + bt * EN : run;
                scan_token(E, N, hprev, hcur, u + bt * E, delta + bt * E, A, Bm + bt * N, Cm + bt * N, D, y + bt * E);
                hprev = hcur;
            }
            if (hlast) memcpy(hlast + EN * b, hprev, sizeof(float) * EN);
        }
    }
    free(scratch);
    return 0;
}

void mlk_sscan_step(int B, int E, int N, float *h, const float *u, const float *delta, const float *A,
                    const float *Bm, const float *Cm, const float *D, float *y) {
    size_t EN = (size_t)E * N;
    for (int b = 0; b < B; b++)
        scan_token(E, N, h + EN * b, h + EN * b, u + (size_t)b * E, delta + (size_t)b * E, A, Bm + (size_t)b * N,
                   Cm + (size_t)b * N, D, y + (size_t)b * E);
}

int mlk_sscan_bwd(int B, int L, int E, int N, const float *u, const float *delta, const float *A, const float *Bm,
                  const float *Cm, const float *D, const float *h0, const float *hs, const float *dy, float *du,
                  float *ddelta, float *dA, float *dBm, float *dCm, float *dD, float *dh0) {
    size_t EN = (size_t)E * N;
    int nt = mlk_threads_for(3.0 * B * L * EN);
    /* per thread: recomputed states [L,E,N] (unless saved), zero state, carry [E,N], dB/dC rows [2N];
     * per batch element: dA, dD partials, summed in batch order at the end (thread-count independent) */
    size_t per_thread = (hs ? 0 : (size_t)L * EN) + 2 * EN + 2 * (size_t)N;
    float *scratch = malloc(sizeof(float) * (per_thread * nt + (dA ? EN * B : 0) + (dD ? (size_t)E * B : 0)));
    if (!scratch) return -1;
    float *dA_part = scratch + per_thread * nt;
    float *dD_part = dA_part + (dA ? EN * B : 0);
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *mine = scratch + per_thread * tid;
        float *hbuf = hs ? NULL : mine;                    /* [L,E,N] */
        float *zero = mine + (hs ? 0 : (size_t)L * EN);   /* [E,N] zeros */
        float *carry = zero + EN;                         /* [E,N] a_{t+1}⊙dh_{t+1} */
        float *dBt = carry + EN, *dCt = dBt + N;          /* [N] each */
        memset(zero, 0, sizeof(float) * EN);
#pragma omp for schedule(static)
        for (int b = 0; b < B; b++) {
            const float *hstart = h0 ? h0 + EN * b : zero;
            const float *hb; /* [L,E,N] states of this element */
            if (hs) {
                hb = hs + (size_t)b * L * EN;
            } else {
                /* recompute the forward states; the outputs are not needed, write them to carry */
                const float *hp = hstart;
                for (int t = 0; t < L; t++) {
                    size_t bt = (size_t)b * L + t;
                    scan_token(E, N, hp, hbuf + (size_t)t * EN, u + bt * E, delta + bt * E, A, Bm + bt * N,
                               Cm + bt * N, NULL, carry);
                    hp = hbuf + (size_t)t * EN;
                }
                hb = hbuf;
            }
            float *dAb = dA ? dA_part + EN * b : NULL;
            float *dDb = dD ? dD_part + (size_t)E * b : NULL;
            if (dAb) memset(dAb, 0, sizeof(float) * EN);
            if (dDb) memset(dDb, 0, sizeof(float) * E);
            memset(carry, 0, sizeof(float) * EN);
            for (int t = L - 1; t >= 0; t--) {
                size_t bt = (size_t)b * L + t;
                const float *ut = u + bt * E, *dt = delta + bt * E, *gt = dy + bt * E;
                const float *Bt = Bm + bt * N, *Ct = Cm + bt * N;
                const float *ht = hb + (size_t)t * EN;
                const float *hp = t > 0 ? hb + (size_t)(t - 1) * EN : hstart;
                memset(dBt, 0, sizeof(float) * N);
                memset(dCt, 0, sizeof(float) * N);
                for (int e = 0; e < E; e++) {
                    const float g = gt[e], d = dt[e], ue = ut[e], du_e = d * ue;
                    const float *Ae = A + (size_t)e * N, *he = ht + (size_t)e * N, *hpe = hp + (size_t)e * N;
                    float *ce = carry + (size_t)e * N;
                    float *dAe = dAb ? dAb + (size_t)e * N : NULL;
                    float sd = 0.0f, su = 0.0f;
#pragma omp simd reduction(+ : sd, su)
                    for (int n = 0; n < N; n++) {
                        float dh = Ct[n] * g + ce[n]; /* ∂ℓ/∂h_t */
                        float a = mlk_expf(d * Ae[n]);
                        float dha = dh * a;
                        dCt[n] += g * he[n];
                        dBt[n] += dh * du_e;
                        sd += dha * Ae[n] * hpe[n] + dh * Bt[n] * ue;
                        su += dh * Bt[n];
                        ce[n] = dha; /* carry to t−1 */
                    }
                    if (dAe) {
#pragma omp simd
                        for (int n = 0; n < N; n++) dAe[n] += ce[n] * d * hpe[n];
                    }
                    if (du) du[bt * E + e] = su * d + (D ? D[e] * g : 0.0f);
                    if (ddelta) ddelta[bt * E + e] = sd;
                    if (dDb) dDb[e] += g * ue;
                }
                if (dBm) memcpy(dBm + bt * N, dBt, sizeof(float) * N);
                if (dCm) memcpy(dCm + bt * N, dCt, sizeof(float) * N);
            }
            if (dh0) memcpy(dh0 + EN * b, carry, sizeof(float) * EN);
        }
    }
    /* fixed-order reduction over the batch */
    if (dA) {
        memset(dA, 0, sizeof(float) * EN);
        for (int b = 0; b < B; b++)
            for (size_t i = 0; i < EN; i++) dA[i] += dA_part[EN * b + i];
    }
    if (dD) {
        memset(dD, 0, sizeof(float) * E);
        for (int b = 0; b < B; b++)
            for (int e = 0; e < E; e++) dD[e] += dD_part[(size_t)E * b + e];
    }
    free(scratch);
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
                        for (int n = 0; n < N && n < 256; n++) p[n] *= mlk_expf(dtt * Ae[n]);
                    }
                    float acc = 0.0f;
                    for (int n = 0; n < N && n < 256; n++) acc += Cm[btt * N + n] * p[n];
                    al[(size_t)t * L + s] = acc + (t == s && D ? D[e] : 0.0f);
                }
            }
        }
}
