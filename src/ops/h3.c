/* H3 (spec §7): the shift-SSM kernel, the diagonal S4D kernel (bilinear, complex modes) with
 * backward to their parameters, the diagonal SSM's recurrent step, and the head-dim-2 outer
 * product and output gate. The long convolutions themselves are mlk_longconv (G = 1 for the
 * shift kernel on k̃, G = 4 for the diagonal kernel on kv). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=fast", "cx-limited-range") /* vectorised mode loops; plain complex products */
#endif
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

/* K[s,c] for one channel: cross-correlation Σ_n B[n]·C[n+s] (zero once s ≥ N). */
MLK_CLONES static void shift_fwd_one(int C, int N, int L, int c, const float *Bc, const float *Cc, float *K) {
    for (int s = 0; s < L; s++) {
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int n = 0; n < N - s; n++) acc += Bc[n] * Cc[n + s];
        K[(size_t)s * C + c] = acc;
    }
}

void mlk_h3_shift_kernel_fwd(int C, int N, int L, const float *Bs, const float *Cs, float *K) {
    int nt = mlk_threads_for((double)C * L * N);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < C; c++) shift_fwd_one(C, N, L, c, Bs + (size_t)c * N, Cs + (size_t)c * N, K);
}

/* dB[n] = Σ_s dK[s]·C[n+s] and dC[m] = Σ_{s≤m} dK[s]·B[m−s] for one channel, as axpys over n. */
MLK_CLONES static void shift_bwd_one(int C, int N, int L, int c, const float *Bc, const float *Cc, const float *dK,
                                     float *dB, float *dC) {
    int Ls = L < N ? L : N;
    if (dB) {
        memset(dB, 0, sizeof(float) * N);
        for (int s = 0; s < Ls; s++) {
            const float g = dK[(size_t)s * C + c];
#pragma omp simd
            for (int n = 0; n < N - s; n++) dB[n] += g * Cc[n + s];
        }
    }
    if (dC) {
        memset(dC, 0, sizeof(float) * N);
        for (int s = 0; s < Ls; s++) {
            const float g = dK[(size_t)s * C + c];
#pragma omp simd
            for (int m = s; m < N; m++) dC[m] += g * Bc[m - s];
        }
    }
}

void mlk_h3_shift_kernel_bwd(int C, int N, int L, const float *Bs, const float *Cs, const float *dK, float *dBs,
                             float *dCs) {
    int nt = mlk_threads_for(2.0 * C * L * N);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < C; c++)
        shift_bwd_one(C, N, L, c, Bs + (size_t)c * N, Cs + (size_t)c * N, dK, dBs ? dBs + (size_t)c * N : NULL,
                      dCs ? dCs + (size_t)c * N : NULL);
}

/* Discretisation of mode m of head h: λ, C̃ = B·C·dt·q, and q = 1/(1 − w/2), dB = B·dt·q. */
typedef struct {
    double dt;
    double complex A, w, q, lam, Bm, Cm, Ct;
} s4d_mode;

static inline s4d_mode s4d_setup(int h, int m, int M, const float *Cc, const float *log_dt, const float *Bc,
                                 const float *inv_A_real, const float *A_imag) {
    s4d_mode o;
    size_t hm = (size_t)h * M + m;
    o.dt = exp((double)log_dt[h]);
    o.A = -exp((double)inv_A_real[hm]) + I * (double)A_imag[hm];
    o.w = o.A * o.dt;
    o.q = 1.0 / (1.0 - o.w / 2.0);
    o.lam = (1.0 + o.w / 2.0) * o.q;
    o.Bm = (double)Bc[2 * hm] + I * (double)Bc[2 * hm + 1];
    o.Cm = (double)Cc[2 * hm] + I * (double)Cc[2 * hm + 1];
    o.Ct = o.Bm * o.Cm * o.dt * o.q;
    return o;
}

/* The mode loops run over structure-of-arrays doubles (re and im apart), vectorised across modes. */

/* K[:,h] for one head; w: 6·M doubles of scratch. */
MLK_CLONES static void s4d_fwd_one(int h, int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                                   const float *inv_A_real, const float *A_imag, double *w, float *K) {
    double *cr = w, *ci = cr + M, *lr = ci + M, *li = lr + M, *pr = li + M, *pi = pr + M;
    for (int m = 0; m < M; m++) {
        s4d_mode md = s4d_setup(h, m, M, Cc, log_dt, Bc, inv_A_real, A_imag);
        cr[m] = creal(md.Ct), ci[m] = cimag(md.Ct), lr[m] = creal(md.lam), li[m] = cimag(md.lam);
        pr[m] = 1.0, pi[m] = 0.0;
    }
    for (int s = 0; s < L; s++) {
        double acc = 0.0; /* Re Σ_m C̃_m λ_m^s */
#pragma omp simd reduction(+ : acc)
        for (int m = 0; m < M; m++) {
            acc += cr[m] * pr[m] - ci[m] * pi[m];
            double nr = pr[m] * lr[m] - pi[m] * li[m], ni = pr[m] * li[m] + pi[m] * lr[m];
            pr[m] = nr, pi[m] = ni;
        }
        K[(size_t)s * H + h] = (float)(2.0 * acc);
    }
}

int mlk_s4d_kernel_fwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                       const float *inv_A_real, const float *A_imag, float *K) {
    int nt = mlk_threads_for(8.0 * H * M * L);
    double *w = mlk_dalloc(6 * (size_t)M * nt);
    if (!w) return -1;
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
#pragma omp for schedule(static)
        for (int h = 0; h < H; h++)
            s4d_fwd_one(h, H, M, L, Cc, log_dt, Bc, inv_A_real, A_imag, w + 6 * (size_t)M * tid, K);
    }
    free(w);
    return 0;
}

/* Gradients of one head; w: 10·M doubles of scratch; mds: M modes (set up once, used twice). */
MLK_CLONES static void s4d_bwd_one(int h, int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                                   const float *inv_A_real, const float *A_imag, const float *dK, float *dCc,
                                   float *dlog_dt, float *dBc, float *dinv_A_real, float *dA_imag, double *w,
                                   s4d_mode *mds) {
    double *lr = w, *li = lr + M, *pr = li + M, *pi = pr + M, *qr = pi + M, *qi = qr + M;
    double *gcr = qi + M, *gci = gcr + M, *glr = gci + M, *gli = glr + M;
    for (int m = 0; m < M; m++) {
        s4d_mode md = mds[m] = s4d_setup(h, m, M, Cc, log_dt, Bc, inv_A_real, A_imag);
        lr[m] = creal(md.lam), li[m] = cimag(md.lam);
        pr[m] = 1.0, pi[m] = 0.0, qr[m] = 0.0, qi[m] = 0.0;
        gcr[m] = gci[m] = glr[m] = gli[m] = 0.0;
    }
    /* Σ_s g_s conj(λ^s) and Σ_s g_s·s·conj(λ^{s−1}) for every mode */
    for (int s = 0; s < L; s++) {
        const double g = (double)dK[(size_t)s * H + h], gs = g * (double)s;
#pragma omp simd
        for (int m = 0; m < M; m++) {
            gcr[m] += g * pr[m], gci[m] -= g * pi[m];
            glr[m] += gs * qr[m], gli[m] -= gs * qi[m];
            qr[m] = pr[m], qi[m] = pi[m];
            double nr = pr[m] * lr[m] - pi[m] * li[m], ni = pr[m] * li[m] + pi[m] * lr[m];
            pr[m] = nr, pi[m] = ni;
        }
    }
    double ddt = 0.0;
    for (int m = 0; m < M; m++) {
        const s4d_mode md = mds[m];
        double complex gct = 2.0 * (gcr[m] + I * gci[m]);               /* G_C̃ */
        double complex glam = 2.0 * conj(md.Ct) * (glr[m] + I * gli[m]); /* G_λ */
        double complex gw = conj(md.q * md.q) * glam + conj(md.Ct * md.q / 2.0) * gct;
        double complex gB = conj(md.Cm * md.dt * md.q) * gct;
        double complex gC = conj(md.Bm * md.dt * md.q) * gct;
        double complex gA = md.dt * gw;
        ddt += creal(conj(md.A) * gw) + creal(conj(md.Bm * md.Cm * md.q) * gct);
        size_t hm = (size_t)h * M + m;
        if (dBc) dBc[2 * hm] = (float)creal(gB), dBc[2 * hm + 1] = (float)cimag(gB);
        if (dCc) dCc[2 * hm] = (float)creal(gC), dCc[2 * hm + 1] = (float)cimag(gC);
        if (dinv_A_real) dinv_A_real[hm] = (float)(creal(gA) * -exp((double)inv_A_real[hm]));
        if (dA_imag) dA_imag[hm] = (float)cimag(gA);
    }
    if (dlog_dt) dlog_dt[h] = (float)(exp((double)log_dt[h]) * ddt);
}

int mlk_s4d_kernel_bwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                       const float *inv_A_real, const float *A_imag, const float *dK, float *dCc, float *dlog_dt,
                       float *dBc, float *dinv_A_real, float *dA_imag) {
    int nt = mlk_threads_for(8.0 * H * M * L);
    size_t per_thread = 10 * (size_t)M + (sizeof(s4d_mode) / sizeof(double) + 1) * (size_t)M;
    double *w = mlk_dalloc(per_thread * nt);
    if (!w) return -1;
#pragma omp parallel num_threads(nt)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
#pragma omp for schedule(static)
        for (int h = 0; h < H; h++)
            s4d_bwd_one(h, H, M, L, Cc, log_dt, Bc, inv_A_real, A_imag, dK, dCc, dlog_dt, dBc, dinv_A_real, dA_imag,
                        w + per_thread * tid, (s4d_mode *)(w + per_thread * tid + 10 * (size_t)M));
    }
    free(w);
    return 0;
}

void mlk_s4d_step(int B, int H, int P, int M, const float *Cc, const float *log_dt, const float *Bc,
                  const float *inv_A_real, const float *A_imag, const float *Dh, float *x, const float *uin,
                  float *y) {
    for (int h = 0; h < H; h++) {
        for (int m = 0; m < M; m++) {
            s4d_mode md = s4d_setup(h, m, M, Cc, log_dt, Bc, inv_A_real, A_imag);
            double complex dB = md.Bm * md.dt * md.q;
            for (int b = 0; b < B; b++)
                for (int p = 0; p < P; p++) {
                    size_t bhp = ((size_t)b * H + h) * P + p;
                    float *xm = x + (bhp * M + m) * 2;
                    double complex xs = (double)xm[0] + I * (double)xm[1];
                    xs = md.lam * xs + dB * (double)uin[bhp];
                    xm[0] = (float)creal(xs);
                    xm[1] = (float)cimag(xs);
                }
        }
        for (int b = 0; b < B; b++)
            for (int p = 0; p < P; p++) {
                size_t bhp = ((size_t)b * H + h) * P + p;
                double acc = 0.0;
                for (int m = 0; m < M; m++) {
                    size_t hm = (size_t)h * M + m;
                    const float *xm = x + (bhp * M + m) * 2;
                    /* Re(C·x) with C = Cc re/im */
                    acc += (double)Cc[2 * hm] * xm[0] - (double)Cc[2 * hm + 1] * xm[1];
                }
                y[bhp] = (float)(2.0 * acc + (Dh ? (double)Dh[h] * uin[bhp] : 0.0));
            }
    }
}

void mlk_h3_outer_fwd(int BL, int H, const float *kt, const float *v, float *kv) {
    for (size_t r = 0; r < (size_t)BL; r++) {
        const float *k2 = kt + r * 2 * H, *v2 = v + r * 2 * H;
        float *o = kv + r * 4 * H;
        for (int h = 0; h < H; h++)
            for (int d1 = 0; d1 < 2; d1++)
                for (int d2 = 0; d2 < 2; d2++) o[h * 4 + d1 * 2 + d2] = k2[2 * h + d1] * v2[2 * h + d2];
    }
}

void mlk_h3_outer_bwd(int BL, int H, const float *kt, const float *v, const float *dkv, float *dkt, float *dv) {
    for (size_t r = 0; r < (size_t)BL; r++) {
        const float *k2 = kt + r * 2 * H, *v2 = v + r * 2 * H, *g = dkv + r * 4 * H;
        for (int h = 0; h < H; h++)
            for (int d = 0; d < 2; d++) {
                if (dkt) dkt[r * 2 * H + 2 * h + d] = g[h * 4 + d * 2] * v2[2 * h] + g[h * 4 + d * 2 + 1] * v2[2 * h + 1];
                if (dv) dv[r * 2 * H + 2 * h + d] = g[h * 4 + d] * k2[2 * h] + g[h * 4 + 2 + d] * k2[2 * h + 1];
            }
    }
}

void mlk_h3_gate_fwd(int BL, int H, const float *q, const float *yk, float *o) {
    for (size_t r = 0; r < (size_t)BL; r++) {
        const float *q2 = q + r * 2 * H, *y4 = yk + r * 4 * H;
        float *orow = o + r * 2 * H;
        for (int h = 0; h < H; h++)
            for (int d2 = 0; d2 < 2; d2++)
                orow[d2 * H + h] = q2[2 * h] * y4[h * 4 + d2] + q2[2 * h + 1] * y4[h * 4 + 2 + d2];
    }
}

void mlk_h3_gate_bwd(int BL, int H, const float *q, const float *yk, const float *dout, float *dq, float *dyk) {
    for (size_t r = 0; r < (size_t)BL; r++) {
        const float *q2 = q + r * 2 * H, *y4 = yk + r * 4 * H, *g = dout + r * 2 * H;
        for (int h = 0; h < H; h++)
            for (int d1 = 0; d1 < 2; d1++) {
                if (dq) dq[r * 2 * H + 2 * h + d1] = g[h] * y4[h * 4 + d1 * 2] + g[H + h] * y4[h * 4 + d1 * 2 + 1];
                if (dyk)
                    for (int d2 = 0; d2 < 2; d2++) dyk[r * 4 * H + h * 4 + d1 * 2 + d2] = q2[2 * h + d1] * g[d2 * H + h];
            }
    }
}
