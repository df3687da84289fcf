/* DeltaNet's delta rule (docs/mixers.md, "DeltaNet"; docs/kernels.md, "The delta rule's two
 * forms"): sequential forward, exact backward through the recurrence (states recomputed per
 * (batch, head) in scratch), step; and the row L2 norm used on q and k. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/op_util.h"

enum { IB = 16 }; /* column block: one AVX-512 vector of accumulators kept in registers */

/* One token: S = Sin + k uᵀ with vold = Sinᵀk, u = β(v − vold); o = scale·Sᵀq. S[Dk,Dv] may equal
 * Sin (in place); writing a new buffer saves the backward a copy per step.
 * uo, voldo: [Dv] outputs (u_t and vold_t). */
/* One token with whole rows: vold and o accumulate in memory. */
MLK_INLINE void delta_cols_wide(int Dk, int Dv, float scale, const float *Sin, float *S, const float *q,
                                const float *k, const float *v, float beta, float *o, float *uo, float *voldo) {
    memset(voldo, 0, sizeof(float) * Dv);
    for (int i = 0; i < Dk; i++) {
        const float *Si = Sin + (size_t)i * Dv;
        const float ki = k[i];
#pragma omp simd
        for (int j = 0; j < Dv; j++) voldo[j] += Si[j] * ki;
    }
    for (int j = 0; j < Dv; j++) uo[j] = beta * (v[j] - voldo[j]);
    memset(o, 0, sizeof(float) * Dv);
    for (int i = 0; i < Dk; i++) {
        const float *Sini = Sin + (size_t)i * Dv;
        float *Si = S + (size_t)i * Dv;
        const float ki = k[i], qi = scale * q[i];
#pragma omp simd
        for (int j = 0; j < Dv; j++) {
            float s = Sini[j] + ki * uo[j];
            Si[j] = s;
            o[j] += s * qi;
        }
    }
}

/* Columns j0..j0+W of one token (W = IB: accumulators in registers; smaller W: the tail). */
MLK_INLINE void delta_cols(int W, int Dk, int Dv, int j0, float scale, const float *Sin, float *S, const float *q,
                           const float *k, const float *v, float beta, float *o, float *uo, float *voldo) {
    float a[IB] = {0}, u[IB], oo[IB] = {0};
    for (int i = 0; i < Dk; i++) {
        const float *Si = Sin + (size_t)i * Dv + j0;
        const float ki = k[i];
#pragma omp simd
        for (int jj = 0; jj < W; jj++) a[jj] += Si[jj] * ki;
    }
    for (int jj = 0; jj < W; jj++) u[jj] = beta * (v[j0 + jj] - a[jj]);
    for (int i = 0; i < Dk; i++) {
        const float *Sini = Sin + (size_t)i * Dv + j0;
        float *Si = S + (size_t)i * Dv + j0;
        const float ki = k[i], qi = scale * q[i];
#pragma omp simd
        for (int jj = 0; jj < W; jj++) {
            float s = Sini[jj] + ki * u[jj];
            Si[jj] = s;
            oo[jj] += s * qi;
        }
    }
    for (int jj = 0; jj < W; jj++) voldo[j0 + jj] = a[jj], uo[j0 + jj] = u[jj], o[j0 + jj] = oo[jj];
}

MLK_INLINE void delta_token(int Dk, int Dv, float scale, const float *Sin, float *S, const float *q, const float *k,
                            const float *v, float beta, float *o, float *uo, float *voldo) {
    if ((size_t)Dk * Dv > 16384) { /* S beyond 64 KB: one sweep of whole rows (column blocks re-read S) */
        delta_cols_wide(Dk, Dv, scale, Sin, S, q, k, v, beta, o, uo, voldo);
        return;
    }
    for (int j0 = 0; j0 < Dv; j0 += IB) {
        if (Dv - j0 >= IB) delta_cols(IB, Dk, Dv, j0, scale, Sin, S, q, k, v, beta, o, uo, voldo);
        else delta_cols(Dv - j0, Dk, Dv, j0, scale, Sin, S, q, k, v, beta, o, uo, voldo);
    }
}

/* Forward of one (batch, head): S [Dk,Dv] running state (S_{-1} on entry); rows are r0 + t·H. */
MLK_CLONES static void delta_fwd_one(int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                                     const float *v, const float *beta, size_t r0, float *S, float *o, float *states,
                                     float *vold, float *ut, float *vt) {
    size_t SS = (size_t)Dk * Dv;
    for (int t = 0; t < L; t++) {
        size_t r = r0 + (size_t)t * H;
        delta_token(Dk, Dv, scale, S, S, q + r * Dk, k + r * Dk, v + r * Dv, beta[r], o + r * Dv, ut, vt);
        if (states) memcpy(states + r * SS, S, sizeof(float) * SS);
        if (vold) memcpy(vold + r * Dv, vt, sizeof(float) * Dv);
    }
}

int mlk_delta_fwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k, const float *v,
                  const float *beta, const float *S0, float *o, float *states, float *vold, float *Slast) {
    size_t SS = (size_t)Dk * Dv;
    /* per thread: the running state, u_t, vold_t */
    mlk_scratch sc = mlk_scratch_new(3.0 * B * H * L * SS, sizeof(float), 0, SS + 2 * (size_t)Dv, 0);
    if (!sc.base) return -1;
#pragma omp parallel num_threads(sc.nt)
    {
        float *S = mlk_scratch_mine(&sc), *ut = S + SS, *vt = ut + Dv;
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
    free(sc.base);
    return 0;
}

int mlk_delta_step(int B, int H, int Dk, int Dv, float scale, float *S, const float *q, const float *k,
                   const float *v, const float *beta, float *o) {
    enum { TMP = 4096 };
    float tmp[2 * TMP];
    float *ut = Dv <= TMP ? tmp : mlk_falloc(2 * (size_t)Dv); /* before any state is written */
    if (!ut) return -1;
    size_t SS = (size_t)Dk * Dv;
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t bh = (size_t)b * H + h;
            delta_token(Dk, Dv, scale, S + bh * SS, S + bh * SS, q + bh * Dk, k + bh * Dk, v + bh * Dv, beta[bh], o + bh * Dv, ut,
                        ut + Dv);
        }
    if (ut != tmp) free(ut);
    return 0;
}

/* Backward of one (batch, head). Every product is written as an axpy over contiguous rows (no
 * horizontal sums, whose latency dominated): the states are rebuilt transposed, ST_t[j,i] = S_t[i,j],
 * and ∂ℓ/∂S is kept in both layouts (dS [Dk,Dv] and dST [Dv,Dk], updated by the same rank-1 terms).
 * vold: [L,Dv] rows of this (b,h) saved by the forward (stride H·Dv), or NULL to recompute them.
 * STall: [(L+1),Dv,Dk], ST_{t-1} at index t. dS ends as ∂ℓ/∂S_{-1}. */
size_t mlk_delta_store_limit = (size_t)1 << 20;

/* Matrices in the backward's scratch are placed SKEW floats apart beyond their size: buffers a
 * multiple of 4 KB apart make loads and stores alias in L1 (4K aliasing), which cost 3x here. */
enum { SKEW = 48 };

/* The forward again, kept for the backward: STall[t+1] = S_tᵀ (in place when rev), the
 * u_t = β_t(v_t − vold_t) in uall and vold_t in vall. */
MLK_INLINE void bwd_replay(int b, int h, int L, int H, int Dk, int Dv, const float *k, const float *v,
                           const float *beta, const float *S0, const float *vold, float *STall, float *uall,
                           float *vall, size_t SP) {
    size_t SS = (size_t)Dk * Dv, bh = (size_t)b * H + h;
    /* ST_{-1} = S0ᵀ */
    if (S0)
        for (int i = 0; i < Dk; i++)
            for (int j = 0; j < Dv; j++) STall[(size_t)j * Dk + i] = S0[bh * SS + (size_t)i * Dv + j];
    else memset(STall, 0, sizeof(float) * SS);
    for (int t = 0; t < L; t++) {
        size_t r = ((size_t)b * L + t) * H + h;
        const float *kt = k + r * Dk, *vt = v + r * Dv, *Sp = STall + (size_t)t * SP;
        float *St = STall + (size_t)(t + 1) * SP, *ut = uall + (size_t)t * Dv, *vo = vall + (size_t)t * Dv;
        if (vold) memcpy(vo, vold + r * Dv, sizeof(float) * Dv);
        else /* vold[j] = Σ_i S[i,j] k[i]: a row dot product in this layout */
            for (int j = 0; j < Dv; j++) {
                const float *Spj = Sp + (size_t)j * Dk;
                float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
                for (int i = 0; i < Dk; i++) acc += Spj[i] * kt[i];
                vo[j] = acc;
            }
        for (int j = 0; j < Dv; j++) {
            ut[j] = beta[r] * (vt[j] - vo[j]);
            const float *Spj = Sp + (size_t)j * Dk;
            float *Stj = St + (size_t)j * Dk;
            const float uj = ut[j];
#pragma omp simd
            for (int i = 0; i < Dk; i++) Stj[i] = Spj[i] + uj * kt[i]; /* S_t = S_{t-1} + k uᵀ */
        }
    }
}

/* dS += q̃ doᵀ (dS becomes ∂ℓ/∂S_t); du = dSᵀ k. */
MLK_INLINE void bwd_dS_du(int Dk, int Dv, const float *qs, const float *kt, const float *dot, float *dS, float *du) {
    for (int j0 = 0; j0 < Dv; j0 += IB) {
        int w = Dv - j0 < IB ? Dv - j0 : IB;
        if (w == IB) {
            float a[IB] = {0};
            for (int i = 0; i < Dk; i++) {
                float *dSi = dS + (size_t)i * Dv + j0;
                const float *dj = dot + j0;
                const float qi = qs[i], ki = kt[i];
#pragma omp simd
                for (int jj = 0; jj < IB; jj++) {
                    float g = dSi[jj] + qi * dj[jj];
                    dSi[jj] = g;
                    a[jj] += ki * g;
                }
            }
            for (int jj = 0; jj < IB; jj++) du[j0 + jj] = a[jj];
        } else {
            for (int j = j0; j < Dv; j++) du[j] = 0.0f;
            for (int i = 0; i < Dk; i++) {
                float *dSi = dS + (size_t)i * Dv;
                const float qi = qs[i], ki = kt[i];
                for (int j = j0; j < Dv; j++) {
                    float g = dSi[j] + qi * dot[j];
                    dSi[j] = g;
                    du[j] += ki * g;
                }
            }
        }
    }
}

/* The same update of the transposed copy dST, with dq̃ = S_t do into dqa and dk = dS u into dka. */
MLK_INLINE void bwd_dST_dq_dk(int Dk, int Dv, const float *qs, const float *St, const float *ut, const float *dot,
                              float *dST, float *dqa, float *dka) {
    for (int i0 = 0; i0 < Dk; i0 += IB) {
        if (Dk - i0 >= IB) {
            float aq[IB] = {0}, ak[IB] = {0};
            for (int j = 0; j < Dv; j++) {
                float *dSj = dST + (size_t)j * Dk + i0;
                const float *Stj = St + (size_t)j * Dk + i0, *qsi = qs + i0;
                const float dj = dot[j], uj = ut[j];
#pragma omp simd
                for (int ii = 0; ii < IB; ii++) {
                    float g = dSj[ii] + dj * qsi[ii];
                    dSj[ii] = g;
                    aq[ii] += dj * Stj[ii];
                    ak[ii] += uj * g;
                }
            }
            for (int ii = 0; ii < IB; ii++) dqa[i0 + ii] = aq[ii], dka[i0 + ii] = ak[ii];
        } else {
            for (int i = i0; i < Dk; i++) dqa[i] = dka[i] = 0.0f;
            for (int j = 0; j < Dv; j++) {
                float *dSj = dST + (size_t)j * Dk;
                const float *Stj = St + (size_t)j * Dk;
                const float dj = dot[j], uj = ut[j];
                for (int i = i0; i < Dk; i++) {
                    float g = dSj[i] + dj * qs[i];
                    dSj[i] = g;
                    dqa[i] += dj * Stj[i];
                    dka[i] += uj * g;
                }
            }
        }
    }
}

/* Through vold = S_{t-1}ᵀ k: dka += S_{t-1} dvold; dS += k dvoldᵀ in both copies (now ∂ℓ/∂S_{t-1}). */
MLK_INLINE void bwd_through_vold(int Dk, int Dv, const float *Sp, const float *kt, const float *dvo, float *dS,
                                 float *dST, float *dka) {
    for (int i0 = 0; i0 < Dk; i0 += IB) {
        int w = Dk - i0 < IB ? Dk - i0 : IB;
        if (w == IB) {
            float ak[IB];
            for (int ii = 0; ii < IB; ii++) ak[ii] = dka[i0 + ii];
            for (int j = 0; j < Dv; j++) {
                float *dSj = dST + (size_t)j * Dk + i0;
                const float *Spj = Sp + (size_t)j * Dk + i0, *ki = kt + i0;
                const float dj = dvo[j];
#pragma omp simd
                for (int ii = 0; ii < IB; ii++) {
                    ak[ii] += dj * Spj[ii];
                    dSj[ii] += dj * ki[ii];
                }
            }
            for (int ii = 0; ii < IB; ii++) dka[i0 + ii] = ak[ii];
        } else {
            for (int j = 0; j < Dv; j++) {
                float *dSj = dST + (size_t)j * Dk;
                const float *Spj = Sp + (size_t)j * Dk;
                const float dj = dvo[j];
                for (int i = i0; i < Dk; i++) {
                    dka[i] += dj * Spj[i];
                    dSj[i] += dj * kt[i];
                }
            }
        }
    }
    for (int i = 0; i < Dk; i++) {
        float *dSi = dS + (size_t)i * Dv;
        const float ki = kt[i];
#pragma omp simd
        for (int j = 0; j < Dv; j++) dSi[j] += ki * dvo[j];
    }
}

MLK_CLONES static void delta_bwd_one(int b, int h, int L, int H, int Dk, int Dv, float scale, const float *q,
                                     const float *k, const float *v, const float *beta, const float *S0,
                                     const float *vold, const float *dout, float *dq, float *dk, float *dv,
                                     float *dbeta, float *STall, float *dS, float *dST, float *uall, float *vall,
                                     float *du, float *dvo, float *qs, float *dqa, float *dka, int rev) {
    size_t SS = (size_t)Dk * Dv, SP = rev ? 0 : SS + SKEW; /* rev: one matrix, in place */
    bwd_replay(b, h, L, H, Dk, Dv, k, v, beta, S0, vold, STall, uall, vall, SP);
    memset(dS, 0, sizeof(float) * SS);
    memset(dST, 0, sizeof(float) * SS);
    for (int t = L - 1; t >= 0; t--) {
        size_t r = ((size_t)b * L + t) * H + h;
        const float *qt = q + r * Dk, *kt = k + r * Dk, *vt = v + r * Dv, *dot = dout + r * Dv;
        const float *St = STall + (size_t)(t + 1) * SP, *Sp = STall + (size_t)t * SP;
        const float *ut = uall + (size_t)t * Dv, *vo = vall + (size_t)t * Dv;
        const float bt = beta[r];
        /* rev: STall holds S_t here and becomes S_{t-1} = S_t − k u_tᵀ after the dq/dk pass */
        for (int i = 0; i < Dk; i++) qs[i] = scale * qt[i];
        bwd_dS_du(Dk, Dv, qs, kt, dot, dS, du); /* dS is now ∂ℓ/∂S_t */
        bwd_dST_dq_dk(Dk, Dv, qs, St, ut, dot, dST, dqa, dka);
        /* through u = β(v − vold) */
        float db = 0.0f;
        for (int j = 0; j < Dv; j++) {
            db += du[j] * (vt[j] - vo[j]);
            dvo[j] = -bt * du[j];
            if (dv) dv[r * Dv + j] = bt * du[j];
        }
        if (dbeta) dbeta[r] = db;
        if (rev)
            for (int j = 0; j < Dv; j++) {
                float *Sj = STall + (size_t)j * Dk;
                const float uj = ut[j];
#pragma omp simd
                for (int i = 0; i < Dk; i++) Sj[i] -= uj * kt[i];
            }
        bwd_through_vold(Dk, Dv, Sp, kt, dvo, dS, dST, dka); /* now ∂ℓ/∂S_{t-1} */
        if (dq)
            for (int i = 0; i < Dk; i++) dq[r * Dk + i] = scale * dqa[i];
        if (dk) memcpy(dk + r * Dk, dka, sizeof(float) * Dk);
    }
}

int mlk_delta_bwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k, const float *v,
                  const float *beta, const float *S0, const float *vold, const float *dout, float *dq, float *dk,
                  float *dv, float *dbeta, float *dS0) {
    size_t SS = (size_t)Dk * Dv;
    /* per thread: transposed states [(L+1),Dv,Dk], dS and dSᵀ, u_t and vold_t [L,Dv] each, du, dvold [Dv],
     * q̃, dq, dk accumulators [Dk] */
    size_t SP = SS + SKEW;
    /* States of every step, or (beyond mlk_delta_store_limit) one state rebuilt backwards in place */
    int rev = (size_t)(L + 1) * SP > mlk_delta_store_limit;
    size_t nst = rev ? 1 : (size_t)L + 1;
    size_t per_thread = (nst + 2) * SP + 2 * (size_t)L * Dv + 2 * (size_t)Dv + 3 * (size_t)Dk + SKEW;
    mlk_scratch sc = mlk_scratch_new(8.0 * B * H * L * SS, sizeof(float), 0, per_thread, 0);
    if (!sc.base) return -1;
#pragma omp parallel num_threads(sc.nt)
    {
        float *STall = mlk_scratch_mine(&sc); /* per_thread is not a multiple of 1024 either */
        float *dS = STall + nst * SP, *dST = dS + SP;
        float *uall = dST + SP, *vall = uall + (size_t)L * Dv;
        float *du = vall + (size_t)L * Dv, *dvo = du + Dv, *qs = dvo + Dv, *dqa = qs + Dk, *dka = dqa + Dk;
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                size_t bh = (size_t)b * H + h;
                delta_bwd_one(b, h, L, H, Dk, Dv, scale, q, k, v, beta, S0, vold, dout, dq, dk, dv, dbeta, STall, dS,
                              dST, uall, vall, du, dvo, qs, dqa, dka, rev);
                if (dS0) memcpy(dS0 + bh * SS, dS, sizeof(float) * SS);
            }
    }
    free(sc.base);
    return 0;
}

/* ---- The quadratic form (S_{-1} = 0) ----
 * Unrolled, S_t = Σ_{s≤t} k_s u_sᵀ. Per (batch, head), with A = tril₋₁(KKᵀ) and P = tril(Q̃Kᵀ)
 * ([L,L], Q̃ = scale·Q):
 *   vold_t = Σ_{s<t} A_ts u_s,   u_t = β_t(v_t − vold_t)     (forward substitution, row by row)
 *   o_t    = Σ_{s≤t} P_ts u_s
 * Backward, U being the solution of (I + diag(β)A)U = diag(β)V:
 *   dP_ts = do_t·u_s,  dU = PᵀdO,  dQ̃ = dP·K
 *   g_t = du_t − Σ_{s>t} A_st·β_s g_s   (back substitution),  dv_t = β_t g_t,  dβ_t = g_t·(v_t − vold_t)
 *   dA_ts = −β_t g_t·u_s,  dK = dPᵀQ̃ + dA·K + dAᵀK
 * Every product is a sum of row axpys over contiguous rows, each output summed in a fixed order. */

/* c[0,n) += Σ_{p0≤p<p1} a[p]·B[p·ldb + (0,n)]: one output row, in column blocks held in registers.
 * Rows over the L positions are padded to LP = L rounded up to IB columns (padding of the B
 * operands zero), so their products run whole blocks: a row t needs its first t or t + 1 entries,
 * the rest is computed and never read. */
/* NB (≤ 4) column blocks at once: NB independent accumulator chains hide the FMA latency. Vector
 * types keep the accumulators in registers (an array of them went through the stack). */
typedef float vf16 __attribute__((vector_size(IB * sizeof(float)), aligned(4), may_alias));

MLK_INLINE void axpys_blocks(int NB, const float *a, int p0, int p1, const float *B, size_t ldb, float *c) {
    vf16 *cv = (vf16 *)c, z = {0}, a0 = cv[0], a1 = NB > 1 ? cv[1] : z, a2 = NB > 2 ? cv[2] : z, a3 = NB > 3 ? cv[3] : z;
    for (int p = p0; p < p1; p++) {
        const vf16 *Bp = (const vf16 *)(B + (size_t)p * ldb);
        const float ap = a[p];
        a0 += ap * Bp[0];
        if (NB > 1) a1 += ap * Bp[1];
        if (NB > 2) a2 += ap * Bp[2];
        if (NB > 3) a3 += ap * Bp[3];
    }
    cv[0] = a0;
    if (NB > 1) cv[1] = a1;
    if (NB > 2) cv[2] = a2;
    if (NB > 3) cv[3] = a3;
}

MLK_INLINE void row_axpys(int n, const float *a, int p0, int p1, const float *B, size_t ldb, float *c) {
    int j0 = 0;
    for (; j0 + 4 * IB <= n; j0 += 4 * IB) axpys_blocks(4, a, p0, p1, B + j0, ldb, c + j0);
    switch ((n - j0) / IB) {
    case 3: axpys_blocks(3, a, p0, p1, B + j0, ldb, c + j0); break;
    case 2: axpys_blocks(2, a, p0, p1, B + j0, ldb, c + j0); break;
    case 1: axpys_blocks(1, a, p0, p1, B + j0, ldb, c + j0); break;
    default: break;
    }
    j0 += (n - j0) / IB * IB;
    for (int p = p0; p < p1 && j0 < n; p++) {
        const float ap = a[p], *Bp = B + (size_t)p * ldb;
        for (int j = j0; j < n; j++) c[j] += ap * Bp[j];
    }
}

/* The quadratic form pays where L²(Dk + Dv) is below the recurrence's L·Dk·Dv several times over
 * (at d = 64: up to L = 128); its [L,L] matrices stay small. */
int mlk_delta_quad_ok(int L, int Dk, int Dv) { return L <= Dk + Dv && L <= 512; }

static inline int padded(int n) { return (n + IB - 1) / IB * IB; }

/* Scratch of one (batch, head) in floats: n_ll [L,LP] and n_ld [LP,d] matrices (d = max(Dk, Dv)). */
static size_t quad_scratch(int L, int Dk, int Dv, int n_ll, int n_ld) {
    int d = Dk > Dv ? Dk : Dv;
    return (size_t)n_ll * ((size_t)L * padded(L) + SKEW) + (size_t)n_ld * ((size_t)padded(L) * d + SKEW);
}

/* Q̃ = scale·Q, K and Kᵀ ([Dk,LP]) of one (batch, head), whose rows are r0 + t·H. */
MLK_INLINE void quad_gather_qk(int L, int H, int Dk, float scale, const float *q, const float *k, size_t r0,
                               float *Qs, float *Kr, float *KT) {
    int LP = padded(L);
    for (int i = 0; i < Dk; i++)
        for (int t = L; t < LP; t++) KT[(size_t)i * LP + t] = 0.0f;
    for (int t = 0; t < L; t++) {
        size_t r = r0 + (size_t)t * H;
        for (int i = 0; i < Dk; i++) {
            Qs[(size_t)t * Dk + i] = scale * q[r * Dk + i];
            Kr[(size_t)t * Dk + i] = k[r * Dk + i];
            KT[(size_t)i * LP + t] = k[r * Dk + i];
        }
    }
}

/* Rows t of A (s < t) and P (s ≤ t), [L,LP]. */
MLK_INLINE void quad_scores(int L, int Dk, const float *Qs, const float *Kr, const float *KT, float *A, float *P) {
    int LP = padded(L);
    for (int t = 0; t < L; t++) {
        float *At = A + (size_t)t * LP, *Pt = P + (size_t)t * LP;
        memset(At, 0, sizeof(float) * LP);
        memset(Pt, 0, sizeof(float) * LP);
        row_axpys(padded(t), Kr + (size_t)t * Dk, 0, Dk, KT, LP, At);
        row_axpys(padded(t + 1), Qs + (size_t)t * Dk, 0, Dk, KT, LP, Pt);
    }
}

MLK_CLONES static void quad_fwd_one(int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                                    const float *v, const float *beta, size_t r0, float *o, float *vold, float *w) {
    int LP = padded(L);
    size_t LL = (size_t)L * LP + SKEW, LD = (size_t)LP * (Dk > Dv ? Dk : Dv) + SKEW;
    float *A = w, *P = A + LL, *Qs = P + LL, *Kr = Qs + LD, *KT = Kr + LD, *U = KT + LD, *wt = U + LD;
    quad_gather_qk(L, H, Dk, scale, q, k, r0, Qs, Kr, KT);
    quad_scores(L, Dk, Qs, Kr, KT, A, P);
    for (int t = 0; t < L; t++) {
        size_t r = r0 + (size_t)t * H;
        float *ut = U + (size_t)t * Dv, *ot = o + r * Dv;
        const float bt = beta[r], *vt = v + r * Dv;
        memset(wt, 0, sizeof(float) * Dv);
        row_axpys(Dv, A + (size_t)t * LP, 0, t, U, Dv, wt);
        for (int j = 0; j < Dv; j++) ut[j] = bt * (vt[j] - wt[j]);
        if (vold) memcpy(vold + r * Dv, wt, sizeof(float) * Dv);
        memset(ot, 0, sizeof(float) * Dv);
        row_axpys(Dv, P + (size_t)t * LP, 0, t + 1, U, Dv, ot);
    }
}

int mlk_delta_quad_fwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                       const float *v, const float *beta, float *o, float *vold) {
    if (L == 0) return 0; /* o and vold are [B, 0, ...]: nothing to write */
    mlk_scratch sc = mlk_scratch_new(2.0 * B * H * L * L * (Dk + Dv), sizeof(float), 0, quad_scratch(L, Dk, Dv, 2, 5), 0);
    if (!sc.base) return -1;
#pragma omp parallel num_threads(sc.nt)
    {
        float *w = mlk_scratch_mine(&sc);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                quad_fwd_one(L, H, Dk, Dv, scale, q, k, v, beta, (size_t)b * L * H + h, o, vold, w);
    }
    free(sc.base);
    return 0;
}

/* dst[j,i] = src[i,j] for the [L,LP] matrices */
static inline void transpose_ll(int L, const float *src, float *dst) {
    int LP = padded(L);
    for (int i = 0; i < L; i++)
        for (int j = 0; j < L; j++) dst[(size_t)j * LP + i] = src[(size_t)i * LP + j];
}

MLK_CLONES static void quad_bwd_one(int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                                    const float *v, const float *beta, const float *vold, const float *dout,
                                    size_t r0, float *dq, float *dk, float *dv, float *dbeta, float *w) {
    int LP = padded(L);
    size_t LL = (size_t)L * LP + SKEW, LD = (size_t)LP * (Dk > Dv ? Dk : Dv) + SKEW;
    float *A = w, *P = A + LL, *dP = P + LL, *dA = dP + LL, *T1 = dA + LL, *T2 = T1 + LL;
    float *Qs = T2 + LL, *Kr = Qs + LD, *KT = Kr + LD, *U = KT + LD, *UT = U + LD, *dO = UT + LD, *dU = dO + LD;
    float *Gs = dU + LD, *row = Gs + LD; /* Gs: β_t g_t */
    quad_gather_qk(L, H, Dk, scale, q, k, r0, Qs, Kr, KT);
    for (int j = 0; j < Dv; j++)
        for (int t = L; t < LP; t++) UT[(size_t)j * LP + t] = 0.0f;
    for (int t = 0; t < L; t++) {
        size_t r = r0 + (size_t)t * H;
        const float bt = beta[r], *vt = v + r * Dv, *wt = vold + r * Dv;
        for (int j = 0; j < Dv; j++) {
            float u = bt * (vt[j] - wt[j]); /* the forward's bits */
            U[(size_t)t * Dv + j] = u;
            UT[(size_t)j * LP + t] = u;
            dO[(size_t)t * Dv + j] = dout[r * Dv + j];
        }
    }
    quad_scores(L, Dk, Qs, Kr, KT, A, P);
    /* dP and dU = PᵀdO (T1 = Pᵀ) */
    transpose_ll(L, P, T1);
    for (int t = 0; t < L; t++) {
        float *dPt = dP + (size_t)t * LP, *dUt = dU + (size_t)t * Dv;
        memset(dPt, 0, sizeof(float) * LP);
        row_axpys(padded(t + 1), dO + (size_t)t * Dv, 0, Dv, UT, LP, dPt);
        memset(dUt, 0, sizeof(float) * Dv);
        row_axpys(Dv, T1 + (size_t)t * LP, t, L, dO, Dv, dUt);
    }
    /* back substitution (T1 = Aᵀ), dv, dβ, and dA_ts = −β_t g_t·u_s */
    transpose_ll(L, A, T1);
    for (int t = L - 1; t >= 0; t--) {
        size_t r = r0 + (size_t)t * H;
        const float bt = beta[r], *vt = v + r * Dv, *wt = vold + r * Dv, *dUt = dU + (size_t)t * Dv;
        float *Gt = Gs + (size_t)t * Dv, db = 0.0f;
        memset(row, 0, sizeof(float) * Dv);
        row_axpys(Dv, T1 + (size_t)t * LP, t + 1, L, Gs, Dv, row);
        for (int j = 0; j < Dv; j++) {
            float g = dUt[j] - row[j];
            db += g * (vt[j] - wt[j]);
            Gt[j] = bt * g;
        }
        if (dbeta) dbeta[r] = db;
        if (dv) memcpy(dv + r * Dv, Gt, sizeof(float) * Dv);
        float *dAt = dA + (size_t)t * LP;
        memset(dAt, 0, sizeof(float) * LP);
        row_axpys(padded(t), Gt, 0, Dv, UT, LP, dAt);
        for (int s = 0; s < t; s++) dAt[s] = -dAt[s];
    }
    /* dq = scale·dP·K;  dk_s = Σ_{t≥s} dP_ts q̃_t + Σ_{t>s} dA_ts k_t + Σ_{r<s} dA_sr k_r */
    transpose_ll(L, dP, T1);
    transpose_ll(L, dA, T2);
    for (int t = 0; t < L; t++) {
        size_t r = r0 + (size_t)t * H;
        if (dq) {
            memset(row, 0, sizeof(float) * Dk);
            row_axpys(Dk, dP + (size_t)t * LP, 0, t + 1, Kr, Dk, row);
            for (int i = 0; i < Dk; i++) dq[r * Dk + i] = scale * row[i];
        }
        if (dk) {
            memset(row, 0, sizeof(float) * Dk);
            row_axpys(Dk, T1 + (size_t)t * LP, t, L, Qs, Dk, row);
            row_axpys(Dk, T2 + (size_t)t * LP, t + 1, L, Kr, Dk, row);
            row_axpys(Dk, dA + (size_t)t * LP, 0, t, Kr, Dk, row);
            memcpy(dk + r * Dk, row, sizeof(float) * Dk);
        }
    }
}

int mlk_delta_quad_bwd(int B, int L, int H, int Dk, int Dv, float scale, const float *q, const float *k,
                       const float *v, const float *beta, const float *vold, const float *dout, float *dq, float *dk,
                       float *dv, float *dbeta) {
    mlk_scratch sc = mlk_scratch_new(5.0 * B * H * L * L * (Dk + Dv), sizeof(float), 0, quad_scratch(L, Dk, Dv, 6, 10), 0);
    if (!sc.base) return -1;
#pragma omp parallel num_threads(sc.nt)
    {
        float *w = mlk_scratch_mine(&sc);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                quad_bwd_one(L, H, Dk, Dv, scale, q, k, v, beta, vold, dout, (size_t)b * L * H + h, dq, dk, dv, dbeta, w);
    }
    free(sc.base);
    return 0;
}

/* Σ_j a_j·b_j in 8 interleaved partial sums added in a fixed order (vectorises; one running sum
 * is bound by the latency of the add). */
static inline float dot8f(int d, const float *a, const float *b) {
    float acc[8] = {0};
    int j = 0;
    for (; j + 8 <= d; j += 8)
        for (int k = 0; k < 8; k++) acc[k] += a[j + k] * b[j + k];
    for (int k = 0; j + k < d; k++) acc[k] += a[j + k] * b[j + k];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void mlk_l2norm_fwd(int n, int d, float eps, const float *x, float *y) {
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * d;
        float inv = 1.0f / sqrtf(dot8f(d, xi, xi) + eps);
        for (int j = 0; j < d; j++) y[(size_t)i * d + j] = xi[j] * inv;
    }
}

void mlk_l2norm_bwd(int n, int d, float eps, const float *x, const float *dy, float *dx) {
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * d, *gi = dy + (size_t)i * d;
        float inv = 1.0f / sqrtf(dot8f(d, xi, xi) + eps);
        float c = dot8f(d, xi, gi) * inv * inv * inv; /* dx = dy/r − x·(x·dy)/r³ */
        for (int j = 0; j < d; j++) dx[(size_t)i * d + j] = gi[j] * inv - xi[j] * c;
    }
}

/* ------------------------------------------------------------------ the differentiable op (ops/mixer_ops.h) */

static ml_status delta_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *s[6];
    for (int i = 0; i < 6; i++) {
        s[i] = i != 4 || n->iarg[1] ? ml_node_saved(n, i) : NULL;
        if ((i != 4 || n->iarg[1]) && !s[i]) return ml_last_status();
    }
    int H = (int)n->iarg[0], B = (int)s[0]->shape[0], L = (int)s[0]->shape[1];
    int Dk = (int)s[0]->shape[2] / H, Dv = (int)s[2]->shape[2] / H;
    for (int i = 0; i < 5; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    float scale = (float)n->farg[0];
    int fail = n->iarg[2]
                   ? mlk_delta_quad_bwd(B, L, H, Dk, Dv, scale, ml_f32(s[0]), ml_f32(s[1]), ml_f32(s[2]), ml_f32(s[3]),
                                        ml_f32(s[5]), ml_f32(g), mlo_gp(gin[0]), mlo_gp(gin[1]), mlo_gp(gin[2]),
                                        mlo_gp(gin[3]))
                   : mlk_delta_bwd(B, L, H, Dk, Dv, scale, ml_f32(s[0]), ml_f32(s[1]), ml_f32(s[2]), ml_f32(s[3]),
                                   s[4] ? ml_f32(s[4]) : NULL, ml_f32(s[5]), ml_f32(g), mlo_gp(gin[0]), mlo_gp(gin[1]),
                                   mlo_gp(gin[2]), mlo_gp(gin[3]), mlo_gp(gin[4]));
    if (fail) {
        for (int i = 0; i < 5; i++)
            ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "delta_rule backward: out of memory");
    }
    return ML_OK;
}

ml_tensor *ml_delta_rule(ml_tensor *q, ml_tensor *k, ml_tensor *v, ml_tensor *beta, int n_heads, double scale,
                         ml_tensor *S0, ml_tensor **states, ml_tensor **Slast) {
    const char *fn = "delta_rule";
    ml_tensor *ins[5] = {q, k, v, beta, S0};
    char d[128];
    if (states) *states = NULL;
    if (Slast) *Slast = NULL;
    if (mlo_check_f32s(fn, 5, ins)) return NULL;
    if (q->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,H*Dk]", fn, q->ndim), NULL;
    int64_t B = q->shape[0], L = q->shape[1];
    if (n_heads < 1 || q->shape[2] % n_heads != 0 || q->shape[2] == 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 5 (heads) must divide the key width %lld, got %d", fn,
                       (long long)q->shape[2], n_heads),
               NULL;
    int64_t H = n_heads, Dk = q->shape[2] / H;
    if (mlo_want_shape(fn, 2, k, 3, q->shape, "the shape of argument 1")) return NULL;
    if (mlo_want_shape(fn, 3, v, 3, (int64_t[]){B, L, -1},
                       mlo_descf(d, sizeof d, "[B,L,H*Dv] with B=%lld, L=%lld", (long long)B, (long long)L)))
        return NULL;
    if (v->shape[2] % H != 0 || v->shape[2] == 0)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 3 width %lld is not divisible by %lld heads", fn,
                       (long long)v->shape[2], (long long)H),
               NULL;
    int64_t Dv = v->shape[2] / H;
    if (mlo_want_shape(fn, 4, beta, 3, (int64_t[]){B, L, H},
                       mlo_descf(d, sizeof d, "[B,L,H]=[%lld,%lld,%lld]", (long long)B, (long long)L, (long long)H)))
        return NULL;
    if (S0 && mlo_want_shape(fn, 7, S0, 4, (int64_t[]){B, H, Dk, Dv},
                             mlo_descf(d, sizeof d, "[B,H,Dk,Dv]=[%lld,%lld,%lld,%lld]", (long long)B, (long long)H,
                                       (long long)Dk, (long long)Dv)))
        return NULL;
    if (mlo_check_int_sizes(fn, q) || mlo_check_int_sizes(fn, v)) return NULL;
    ml_tensor *c[5];
    for (int i = 0; i < 5; i++)
        c[i] = ins[i] ? mlo_dense(ins[i]) : NULL;
    ml_tensor *out = ml_empty(ML_F32, 3, v->shape);
    ml_tensor *st = states ? ml_empty(ML_F32, 5, (int64_t[]){B, L, H, Dk, Dv}) : NULL;
    ml_tensor *sl = Slast ? ml_empty(ML_F32, 4, (int64_t[]){B, H, Dk, Dv}) : NULL;
    bool rec = ml_any_needs_grad(5, ins);
    /* From S = 0 o comes from the quadratic form whenever it is the faster one, whether or not the
     * states are asked for too (so asking for them changes no bit of o); they come from the recurrence. */
    bool quad = !S0 && mlk_delta_quad_ok((int)L, (int)Dk, (int)Dv);
    ml_tensor *vo = rec ? ml_empty(ML_F32, 3, v->shape) : NULL;                /* vold, saved for the backward */
    ml_tensor *o2 = quad && (st || sl) ? ml_empty(ML_F32, 3, v->shape) : NULL; /* the recurrence's o, unused */
    bool ok = out && (!states || st) && (!Slast || sl) && (!rec || vo) && (!(quad && (st || sl)) || o2);
    for (int i = 0; i < 5; i++)
        ok = ok && (!ins[i] || c[i]);
    const float *qp = ok ? ml_f32(c[0]) : NULL, *kp = ok ? ml_f32(c[1]) : NULL, *vp = ok ? ml_f32(c[2]) : NULL;
    const float *bp = ok ? ml_f32(c[3]) : NULL;
    if (ok && quad &&
        mlk_delta_quad_fwd((int)B, (int)L, (int)H, (int)Dk, (int)Dv, (float)scale, qp, kp, vp, bp, ml_f32(out),
                           vo ? ml_f32(vo) : NULL))
        ok = false;
    if (ok && (!quad || st || sl) &&
        mlk_delta_fwd((int)B, (int)L, (int)H, (int)Dk, (int)Dv, (float)scale, qp, kp, vp, bp,
                      c[4] ? ml_f32(c[4]) : NULL, ml_f32(quad ? o2 : out), st ? ml_f32(st) : NULL,
                      vo && !quad ? ml_f32(vo) : NULL, sl ? ml_f32(sl) : NULL))
        ok = false;
    ml_release(o2);
    if (!ok) {
        mlo_release_all(5, c);
        ml_release(out), ml_release(st), ml_release(sl), ml_release(vo);
        return mlo_oom(fn);
    }
    if (rec) {
        ml_node *nd = ml_node_new("DeltaRuleBackward", delta_backward, 5, ins);
        if (nd) {
            for (int i = 0; i < 5; i++)
                ml_node_save(nd, i, c[i]);
            ml_node_save(nd, 5, vo);
            nd->iarg[0] = H;
            nd->iarg[1] = c[4] != NULL;
            nd->iarg[2] = quad;
            nd->farg[0] = scale;
        }
        out = mlo_attach(out, nd);
    }
    mlo_release_all(5, c);
    ml_release(vo);
    if (!out) {
        ml_release(st), ml_release(sl);
        return NULL;
    }
    if (states) *states = st;
    if (Slast) *Slast = sl;
    return out;
}

static ml_status l2norm_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0);
    if (!x) return ml_last_status();
    int d = (int)x->shape[x->ndim - 1];
    gin[0] = mlo_grad_like(n, 0);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    mlk_l2norm_bwd((int)(ml_numel(x) / d), d, (float)n->farg[0], ml_f32(x), ml_f32(g), ml_f32(gin[0]));
    return ML_OK;
}

ml_tensor *ml_l2_normalize(ml_tensor *x, double eps) {
    const char *fn = "l2_normalize";
    if (mlo_check_f32(fn, 1, x)) return NULL;
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 must have a non-empty last dimension", fn), NULL;
    if (mlo_check_int_sizes(fn, x)) return NULL;
    int d = (int)x->shape[x->ndim - 1];
    ml_tensor *xc = mlo_dense(x), *out = ml_empty(ML_F32, x->ndim, x->shape);
    if (!xc || !out) {
        ml_release(xc), ml_release(out);
        return mlo_oom(fn);
    }
    mlk_l2norm_fwd((int)(ml_numel(x) / d), d, (float)eps, ml_f32(xc), ml_f32(out));
    if (ml_needs_grad(x)) {
        ml_node *nd = ml_node_new("L2NormalizeBackward", l2norm_backward, 1, &x);
        if (nd) {
            ml_node_save(nd, 0, xc);
            nd->farg[0] = eps;
        }
        out = mlo_attach(out, nd);
    }
    ml_release(xc);
    return out;
}
