/* H3 (spec §7): the shift-SSM kernel, the diagonal S4D kernel (bilinear, complex modes) with
 * backward to their parameters, the diagonal SSM's recurrent step, and the head-dim-2 outer
 * product and output gate. The long convolutions themselves are mlk_longconv (G = 1 for the
 * shift kernel on k̃, G = 4 for the diagonal kernel on kv). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

void mlk_h3_shift_kernel_fwd(int C, int N, int L, const float *Bs, const float *Cs, float *K) {
    int nt = mlk_threads_for((double)C * L * N);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < C; c++) {
        const float *Bc = Bs + (size_t)c * N, *Cc = Cs + (size_t)c * N;
        for (int s = 0; s < L; s++) {
            float acc = 0.0f; /* cross-correlation Σ_n B[n]·C[n+s] (zero once s ≥ N) */
            for (int n = 0; n + s < N; n++) acc += Bc[n] * Cc[n + s];
            K[(size_t)s * C + c] = acc;
        }
    }
}

void mlk_h3_shift_kernel_bwd(int C, int N, int L, const float *Bs, const float *Cs, const float *dK, float *dBs,
                             float *dCs) {
    int nt = mlk_threads_for(2.0 * C * L * N);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < C; c++) {
        const float *Bc = Bs + (size_t)c * N, *Cc = Cs + (size_t)c * N;
        int Ls = L < N ? L : N;
        if (dBs) { /* dB[n] = Σ_s dK[s]·C[n+s] */
            float *d = dBs + (size_t)c * N;
            for (int n = 0; n < N; n++) {
                float acc = 0.0f;
                for (int s = 0; s < Ls && n + s < N; s++) acc += dK[(size_t)s * C + c] * Cc[n + s];
                d[n] = acc;
            }
        }
        if (dCs) { /* dC[m] = Σ_{s≤m} dK[s]·B[m−s] */
            float *d = dCs + (size_t)c * N;
            for (int m = 0; m < N; m++) {
                float acc = 0.0f;
                for (int s = 0; s < Ls && s <= m; s++) acc += dK[(size_t)s * C + c] * Bc[m - s];
                d[m] = acc;
            }
        }
    }
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

int mlk_s4d_kernel_fwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                       const float *inv_A_real, const float *A_imag, float *K) {
    double *Kd = malloc(sizeof(double) * (size_t)L * H); /* [H,L] double accumulators */
    if (!Kd) return -1;
    int nt = mlk_threads_for(8.0 * H * M * L);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int h = 0; h < H; h++) {
        /* K[s,h] = 2 Re Σ_m C̃_m λ_m^s: modes in blocks of 64 (powers kept per mode), s inner */
        enum { MB = 64 };
        double complex pw[MB], ct[MB], lam[MB];
        double *kd = Kd + (size_t)h * L;
        for (int s = 0; s < L; s++) kd[s] = 0.0;
        for (int m0 = 0; m0 < M; m0 += MB) {
            int mw = M - m0 < MB ? M - m0 : MB;
            for (int i = 0; i < mw; i++) {
                s4d_mode md = s4d_setup(h, m0 + i, M, Cc, log_dt, Bc, inv_A_real, A_imag);
                pw[i] = 1.0;
                ct[i] = md.Ct;
                lam[i] = md.lam;
            }
            for (int s = 0; s < L; s++) {
                double acc = 0.0;
                for (int i = 0; i < mw; i++) {
                    acc += creal(ct[i] * pw[i]);
                    pw[i] *= lam[i];
                }
                kd[s] += acc;
            }
        }
        for (int s = 0; s < L; s++) K[(size_t)s * H + h] = (float)(2.0 * kd[s]);
    }
    free(Kd);
    return 0;
}

void mlk_s4d_kernel_bwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                        const float *inv_A_real, const float *A_imag, const float *dK, float *dCc, float *dlog_dt,
                        float *dBc, float *dinv_A_real, float *dA_imag) {
    int nt = mlk_threads_for(8.0 * H * M * L);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int h = 0; h < H; h++) {
        double ddt = 0.0;
        for (int m = 0; m < M; m++) {
            s4d_mode md = s4d_setup(h, m, M, Cc, log_dt, Bc, inv_A_real, A_imag);
            /* G_C̃ = 2 Σ_s g_s conj(λ^s);  G_λ = 2 Σ_{s≥1} g_s·s·conj(C̃ λ^{s−1}) */
            double complex gct = 0.0, glam = 0.0, pw = 1.0, pprev = 0.0;
            for (int s = 0; s < L; s++) {
                double g = (double)dK[(size_t)s * H + h];
                gct += g * conj(pw);
                if (s >= 1) glam += g * (double)s * conj(pprev);
                pprev = pw;
                pw *= md.lam;
            }
            gct *= 2.0;
            glam *= 2.0 * conj(md.Ct);
            double complex gw = conj(md.q * md.q) * glam + conj(md.Ct * md.q / 2.0) * gct;
            double complex gB = conj(md.Cm * md.dt * md.q) * gct;
            double complex gC = conj(md.Bm * md.dt * md.q) * gct;
            double complex gA = md.dt * gw;
            ddt += creal(conj(md.A) * gw) + creal(conj(md.Bm * md.Cm * md.q) * gct);
            size_t hm = (size_t)h * M + m;
            if (dBc) {
                dBc[2 * hm] = (float)creal(gB);
                dBc[2 * hm + 1] = (float)cimag(gB);
            }
            if (dCc) {
                dCc[2 * hm] = (float)creal(gC);
                dCc[2 * hm + 1] = (float)cimag(gC);
            }
            if (dinv_A_real) dinv_A_real[hm] = (float)(creal(gA) * -exp((double)inv_A_real[hm]));
            if (dA_imag) dA_imag[hm] = (float)cimag(gA);
        }
        if (dlog_dt) dlog_dt[h] = (float)(exp((double)log_dt[h]) * ddt);
    }
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
