/* DeltaNet's delta rule (spec §11): sequential forward, exact backward through the recurrence
 * (states recomputed per (batch, head) in scratch), step; and the row L2 norm used on q and k. */
#pragma GCC optimize("O3", "fp-contract=fast") /* vectorised row loops; FMA in the AVX2/AVX-512 clones */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

/* One token on S[Dk,Dv] (in place): vold = Sᵀk, u = β(v − vold), S += k uᵀ, o = scale·Sᵀq.
 * uo, voldo: [Dv] outputs (u_t and vold_t). */
MLK_INLINE void delta_token(int Dk, int Dv, float scale, float *S, const float *q, const float *k,
                               const float *v, float beta, float *o, float *uo, float *voldo) {
    memset(voldo, 0, sizeof(float) * Dv);
    for (int i = 0; i < Dk; i++) {
        const float *Si = S + (size_t)i * Dv;
        const float ki = k[i];
#pragma omp simd
        for (int j = 0; j < Dv; j++) voldo[j] += Si[j] * ki;
    }
    for (int j = 0; j < Dv; j++) uo[j] = beta * (v[j] - voldo[j]);
    memset(o, 0, sizeof(float) * Dv);
    for (int i = 0; i < Dk; i++) {
        float *Si = S + (size_t)i * Dv;
        const float ki = k[i], qi = scale * q[i];
#pragma omp simd
        for (int j = 0; j < Dv; j++) {
            float s = Si[j] + ki * uo[j];
            Si[j] = s;
            o[j] += s * qi;
        }
    }
}

/* Forward of one (batch, head): S [Dk,Dv] running state (S_{-1} on entry); rows are r0 + t·H. */
MLK_CLONES static void delta_fwd_one(int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                                     const float *v, const float *beta, size_t r0, float *S, float *o, float *states,
                                     float *vold, float *ut, float *vt) {
    size_t SS = (size_t)Dk * Dv;
    for (int t = 0; t < L; t++) {
        size_t r = r0 + (size_t)t * H;
        delta_token(Dk, Dv, scale, S, q + r * Dk, k + r * Dk, v + r * Dv, beta[r], o + r * Dv, ut, vt);
        if (states) memcpy(states + r * SS, S, sizeof(float) * SS);
        if (vold) memcpy(vold + r * Dv, vt, sizeof(float) * Dv);
    }
}

int mlk_delta_fwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k, const float *v,
                  const float *beta, const float *S0, float *o, float *states, float *vold, float *Slast) {
    size_t SS = (size_t)Dk * Dv;
    int nt = mlk_threads_for(3.0 * B * H * L * SS);
    size_t per_thread = SS + 2 * (size_t)Dv; /* running state, u_t, vold_t */
    float *scratch = malloc(sizeof(float) * per_thread * nt);
    if (!scratch) return -1;
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *S = scratch + per_thread * tid, *ut = S + SS, *vt = ut + Dv;
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                size_t bh = (size_t)b * H + h;
                if (S0) memcpy(S, S0 + bh * SS, sizeof(float) * SS);
                else memset(S, 0, sizeof(float) * SS);
                delta_fwd_one(L, H, Dk, Dv, scale, q, k, v, beta, (size_t)b * L * H + h, S, o, states, vold, ut, vt);
                if (Slast) memcpy(Slast + bh * SS, S, sizeof(float) * SS);
            }
    }
    free(scratch);
    return 0;
}

void mlk_delta_step(int B, int H, int Dk, int Dv, float scale, float *S, const float *q, const float *k,
                    const float *v, const float *beta, float *o) {
    enum { TMP = 4096 };
    float tmp[2 * TMP];
    size_t SS = (size_t)Dk * Dv;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t bh = (size_t)b * H + h;
            float *ut = Dv <= TMP ? tmp : malloc(sizeof(float) * 2 * Dv);
            if (!ut) return; /* Dv > 4096 and no memory: leave the state unchanged */
            delta_token(Dk, Dv, scale, S + bh * SS, q + bh * Dk, k + bh * Dk, v + bh * Dv, beta[bh], o + bh * Dv, ut,
                        ut + Dv);
            if (ut != tmp) free(ut);
        }
}

/* Backward of one (batch, head): recomputes S_{-1..L-1} into Sall, then runs the reverse pass;
 * dS ends as ∂ℓ/∂S_{-1}. */
MLK_CLONES static void delta_bwd_one(int b, int h, int L, int H, int Dk, int Dv, float scale, const float *q,
                                     const float *k, const float *v, const float *beta, const float *S0,
                                     const float *dout, float *dq, float *dk, float *dv, float *dbeta, float *Sall,
                                     float *dS, float *uall, float *vall, float *du, float *dvo) {
    size_t SS = (size_t)Dk * Dv;
    size_t bh = (size_t)b * H + h;
    if (S0) memcpy(Sall, S0 + bh * SS, sizeof(float) * SS);
    else memset(Sall, 0, sizeof(float) * SS);
    for (int t = 0; t < L; t++) {
        size_t r = ((size_t)b * L + t) * H + h;
        float *St = Sall + (size_t)(t + 1) * SS;
        memcpy(St, St - SS, sizeof(float) * SS);
        /* the output goes to du (unused here) */
        delta_token(Dk, Dv, scale, St, q + r * Dk, k + r * Dk, v + r * Dv, beta[r], du,
                    uall + (size_t)t * Dv, vall + (size_t)t * Dv);
    }
    memset(dS, 0, sizeof(float) * SS);
    for (int t = L - 1; t >= 0; t--) {
        size_t r = ((size_t)b * L + t) * H + h;
        const float *qt = q + r * Dk, *kt = k + r * Dk, *vt = v + r * Dv, *dot = dout + r * Dv;
        const float *St = Sall + (size_t)(t + 1) * SS, *Sp = Sall + (size_t)t * SS;
        const float *ut = uall + (size_t)t * Dv, *vo = vall + (size_t)t * Dv;
        const float bt = beta[r];
        float *dqt = dq ? dq + r * Dk : NULL, *dkt = dk ? dk + r * Dk : NULL;
        memset(du, 0, sizeof(float) * Dv);
        /* pass 1: dS += q̃ doᵀ (now ∂ℓ/∂S_t); dq̃ = S_t do; dk = dS u; du = dSᵀ k */
        for (int i = 0; i < Dk; i++) {
            float *dSi = dS + (size_t)i * Dv;
            const float *Si = St + (size_t)i * Dv;
            const float qi = scale * qt[i], ki = kt[i];
            float aq = 0.0f, ak = 0.0f;
#pragma omp simd reduction(+ : aq, ak)
            for (int j = 0; j < Dv; j++) {
                float g = dSi[j] + qi * dot[j];
                dSi[j] = g;
                aq += Si[j] * dot[j];
                ak += g * ut[j];
                du[j] += ki * g;
            }
            if (dqt) dqt[i] = scale * aq;
            if (dkt) dkt[i] = ak;
        }
        /* through u = β(v − vold) */
        float db = 0.0f;
        for (int j = 0; j < Dv; j++) {
            db += du[j] * (vt[j] - vo[j]);
            dvo[j] = -bt * du[j];
            if (dv) dv[r * Dv + j] = bt * du[j];
        }
        if (dbeta) dbeta[r] = db;
        /* pass 2: vold = S_{t-1}ᵀ k: dk += S_{t-1} dvold, dS += k dvoldᵀ (now ∂ℓ/∂S_{t-1}) */
        for (int i = 0; i < Dk; i++) {
            float *dSi = dS + (size_t)i * Dv;
            const float *Si = Sp + (size_t)i * Dv;
            const float ki = kt[i];
            float ak = 0.0f;
#pragma omp simd reduction(+ : ak)
            for (int j = 0; j < Dv; j++) {
                ak += Si[j] * dvo[j];
                dSi[j] += ki * dvo[j];
            }
            if (dkt) dkt[i] += ak;
        }
    }
}

int mlk_delta_bwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k, const float *v,
                  const float *beta, const float *S0, const float *dout, float *dq, float *dk, float *dv, float *dbeta,
                  float *dS0) {
    size_t SS = (size_t)Dk * Dv;
    int nt = mlk_threads_for(8.0 * B * H * L * SS);
    /* per thread: states S_{-1..L-1} [(L+1),Dk,Dv], dS [Dk,Dv], u_t and vold_t [L,Dv] each, du, dvold [Dv] */
    size_t per_thread = (size_t)(L + 2) * SS + 2 * (size_t)L * Dv + 2 * (size_t)Dv;
    float *scratch = malloc(sizeof(float) * per_thread * nt);
    if (!scratch) return -1;
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *Sall = scratch + per_thread * tid;        /* S_{t-1} at index t */
        float *dS = Sall + (size_t)(L + 1) * SS;
        float *uall = dS + SS, *vall = uall + (size_t)L * Dv;
        float *du = vall + (size_t)L * Dv, *dvo = du + Dv;
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                size_t bh = (size_t)b * H + h;
                delta_bwd_one(b, h, L, H, Dk, Dv, scale, q, k, v, beta, S0, dout, dq, dk, dv, dbeta, Sall, dS, uall,
                              vall, du, dvo);
                if (dS0) memcpy(dS0 + bh * SS, dS, sizeof(float) * SS);
            }
    }
    free(scratch);
    return 0;
}

void mlk_l2norm_fwd(int n, int d, float eps, const float *x, float *y) {
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * d;
        float ss = 0.0f;
        for (int j = 0; j < d; j++) ss += xi[j] * xi[j];
        float inv = 1.0f / sqrtf(ss + eps);
        for (int j = 0; j < d; j++) y[(size_t)i * d + j] = xi[j] * inv;
    }
}

void mlk_l2norm_bwd(int n, int d, float eps, const float *x, const float *dy, float *dx) {
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * d, *gi = dy + (size_t)i * d;
        float ss = 0.0f, xg = 0.0f;
        for (int j = 0; j < d; j++) {
            ss += xi[j] * xi[j];
            xg += xi[j] * gi[j];
        }
        float inv = 1.0f / sqrtf(ss + eps);
        float c = xg * inv * inv * inv; /* dx = dy/r − x·(x·dy)/r³ */
        for (int j = 0; j < d; j++) dx[(size_t)i * d + j] = gi[j] * inv - xi[j] * c;
    }
}
