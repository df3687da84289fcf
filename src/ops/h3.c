/* H3 (docs/mixers.md, "H3"): the shift-SSM kernel, the diagonal S4D kernel (bilinear, complex modes) with
 * backward to their parameters, the diagonal SSM's recurrent step, and the head-dim-2 outer
 * product and output gate. The long convolutions themselves are mlk_longconv (G = 1 for the
 * shift kernel on k̃, G = 4 for the diagonal kernel on kv). */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/op_util.h"

/* Register tiles of the shift kernel: SH_SB lags per loaded B vector in the forward; SH_NB
 * positions (4 AVX-512 vectors) of dB or dC per sweep over the lags in the backward. */
enum { SH_SB = 8, SH_VB = 16, SH_NB = 64 };

/* K[s0 + i, c] for i < ns lags of one channel: per-lag partial sums over SH_VB lanes of n, then the
 * lanes in order, then the positions past the last whole vector. */
MLK_INLINE void shift_fwd_tile(int ns, int C, int N, int s0, int c, const float *Bc, const float *Cc, float *K) {
    float acc[SH_SB][SH_VB];
    for (int i = 0; i < SH_SB; i++)
        for (int j = 0; j < SH_VB; j++) acc[i][j] = 0.0f;
    int nall = N - (s0 + ns - 1); /* n < nall: n + s < N for every lag of the tile */
    int nf = nall - nall % SH_VB;
    for (int n0 = 0; n0 < nf; n0 += SH_VB)
        for (int i = 0; i < ns; i++) {
            const float *cs = Cc + n0 + s0 + i;
#pragma omp simd
            for (int j = 0; j < SH_VB; j++) acc[i][j] += Bc[n0 + j] * cs[j];
        }
    for (int i = 0; i < ns; i++) {
        int s = s0 + i;
        float sum = 0.0f;
        for (int j = 0; j < SH_VB; j++) sum += acc[i][j];
        for (int n = nf; n < N - s; n++) sum += Bc[n] * Cc[n + s];
        K[(size_t)s * C + c] = sum;
    }
}

/* K[s,c] for one channel: cross-correlation Σ_n B[n]·C[n+s] (s < L ≤ N). */
MLK_CLONES static void shift_fwd_one(int C, int N, int L, int c, const float *Bc, const float *Cc, float *K) {
    int sf = L - L % SH_SB;
    for (int s0 = 0; s0 < sf; s0 += SH_SB) shift_fwd_tile(SH_SB, C, N, s0, c, Bc, Cc, K);
    if (sf < L) shift_fwd_tile(L - sf, C, N, sf, c, Bc, Cc, K);
}

void mlk_h3_shift_kernel_fwd(int C, int N, int L, const float *Bs, const float *Cs, float *K) {
    int nt = mlk_threads_for((double)C * L * N);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int c = 0; c < C; c++) shift_fwd_one(C, N, L, c, Bs + (size_t)c * N, Cs + (size_t)c * N, K);
}

/* out[n0 + j] = Σ_{s<Ls} g[s·C]·src[n0 + j + dir·s] for j < SH_NB (dir = +1: dB from C; −1: dC from
 * B), every term in range; the sum runs over s ascending with the accumulators in registers. */
MLK_INLINE void shift_bwd_tile(int Ls, int C, int dir, int n0, const float *g, const float *src, float *out) {
    float acc[SH_NB / SH_VB][SH_VB]; /* vector by vector: GCC keeps [4][16] in registers, not [64] */
    for (int v = 0; v < SH_NB / SH_VB; v++)
        for (int j = 0; j < SH_VB; j++) acc[v][j] = 0.0f;
    for (int s = 0; s < Ls; s++) {
        const float gs = g[(size_t)s * C], *sr = src + n0 + dir * s;
        for (int v = 0; v < SH_NB / SH_VB; v++)
#pragma omp simd
            for (int j = 0; j < SH_VB; j++) acc[v][j] += gs * sr[v * SH_VB + j];
    }
    for (int v = 0; v < SH_NB / SH_VB; v++)
        for (int j = 0; j < SH_VB; j++) out[n0 + v * SH_VB + j] = acc[v][j];
}

/* out[n0..n1) = Σ_s g[s·C]·src[n + dir·s] over the lags with lo ≤ n + dir·s < hi, as axpys over n
 * (the edges of the tiled range; each sum runs over s ascending, like the tiles). */
MLK_INLINE void shift_bwd_edge(int Ls, int C, int dir, int n0, int n1, int lo, int hi, const float *g,
                               const float *src, float *out) {
    for (int n = n0; n < n1; n++) out[n] = 0.0f;
    for (int s = 0; s < Ls; s++) {
        const float gs = g[(size_t)s * C];
        int a = n0, b = n1; /* lo ≤ n + dir·s < hi */
        if (a < lo - dir * s) a = lo - dir * s;
        if (b > hi - dir * s) b = hi - dir * s;
#pragma omp simd
        for (int n = a; n < b; n++) out[n] += gs * src[n + dir * s];
    }
}

/* dB[n] = Σ_s dK[s]·C[n+s] and dC[m] = Σ_{s≤m} dK[s]·B[m−s] for one channel, each summed over s
 * ascending: whole tiles where every lag is in range, axpys at the edges. */
MLK_CLONES static void shift_bwd_one(int C, int N, int L, int c, const float *Bc, const float *Cc, const float *dK,
                                     float *dB, float *dC) {
    int Ls = L < N ? L : N;
    const float *g = dK + c; /* g[s·C] = dK[s,c] */
    if (dB) {
        int nt = N - (Ls - 1), n0 = 0; /* n < nt: n + s < N for every lag */
        for (; n0 + SH_NB <= nt; n0 += SH_NB) shift_bwd_tile(Ls, C, 1, n0, g, Cc, dB);
        shift_bwd_edge(Ls, C, 1, n0, N, 0, N, g, Cc, dB);
    }
    if (dC) {
        int m0 = Ls - 1; /* m ≥ Ls − 1: every lag s ≤ m */
        shift_bwd_edge(Ls, C, -1, 0, m0, 0, N, g, Bc, dC);
        for (; m0 + SH_NB <= N; m0 += SH_NB) shift_bwd_tile(Ls, C, -1, m0, g, Bc, dC);
        shift_bwd_edge(Ls, C, -1, m0, N, 0, N, g, Bc, dC);
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

/* Discretisation of mode m of head h: λ, C̃ = B·C·dt·q, and q = 1/(1 − w/2), dB = B·dt·q (the step form). */
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

/* exp in double within 2 ulp: x = k·ln2 + r, |r| ≤ ln2/2, Taylor to r^13 (truncation < 1e-17
 * relative), 2^k from exponent bits. Plain arithmetic so that the per-mode setup loop vectorises
 * (libm's exp is an opaque call, and was called once per mode and use). Below −708 it flushes to 0. */
MLK_INLINE double s4d_exp(double x) {
    double in = x;
    x = x < -708.0 ? -708.0 : x;
    x = x > 709.79 ? 709.79 : x;
    x = in == in ? x : 0.0;
    union { /* k + 1.5·2^52: k sits in the low mantissa bits */
        double d;
        uint64_t i;
    } t, scale;
    t.d = x * 1.4426950408889634074 + 6755399441055744.0;
    double kf = t.d - 6755399441055744.0;
    double r = x - kf * 6.93147180369123816490e-01; /* ln2 hi (exact products) ... */
    r -= kf * 1.90821492927058770002e-10;            /* ... and lo */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    scale.i = (t.i - UINT64_C(0x4338000000000000) + 1022u) << 52; /* 2^(k−1): k = 1024 stays finite */
    double y = p * scale.d * 2.0;
    y = in > 709.782712893384 ? HUGE_VAL : y;
    y = in < -708.0 ? 0.0 : y;
    return in == in ? y : in;
}

/* Modes per register block: the block's state (λ^s and the backward's accumulators) stays in
 * registers for the whole s loop (2 AVX-512 vectors of doubles per array). */
enum { S4D_MB = 16 };

static inline int s4d_padded(int M) { return (M + S4D_MB - 1) / S4D_MB * S4D_MB; }

/* Scratch of n doubles per thread for `work`, each part on a 64-byte boundary (n rounded up to a
 * multiple of 8): with Mp a multiple of 8, every array in it starts on a cache line. */
static mlk_scratch s4d_scratch(double work, size_t n) {
    return mlk_scratch_new(work, sizeof(double), 0, (n + 7) / 8 * 8, 64);
}

/* Per-head discretisation as structure of arrays over Mp = s4d_padded(M) modes: λ, C̃ and (unless
 * qr is NULL: the forward) A = −exp(inv_A_real) + i·A_imag and q = 1/(1 − w/2), each [Mp] re and im.
 * Pad modes get λ = C̃ = q = A = 0, so they add exact zeros. Returns dt. */
MLK_INLINE double s4d_head_setup(int h, int M, const float *Cc, const float *log_dt, const float *Bc,
                                 const float *inv_A_real, const float *A_imag, double *Ar, double *Ai, double *qr,
                                 double *qi, double *lr, double *li, double *ctr, double *cti) {
    const double dt = s4d_exp((double)log_dt[h]);
    const size_t h0 = (size_t)h * M;
    int Mp = s4d_padded(M);
#pragma omp simd
    for (int m = 0; m < M; m++) {
        double ar = -s4d_exp((double)inv_A_real[h0 + m]), ai = (double)A_imag[h0 + m];
        double wr = ar * dt, wi = ai * dt;
        double a = 1.0 - 0.5 * wr, b = -0.5 * wi, n = 1.0 / (a * a + b * b); /* q = 1/(a + ib) */
        double q_r = a * n, q_i = -b * n;
        double xr = 1.0 + 0.5 * wr, xi = 0.5 * wi; /* λ = (1 + w/2)·q */
        double br = Bc[2 * (h0 + m)], bi = Bc[2 * (h0 + m) + 1], cr = Cc[2 * (h0 + m)], ci = Cc[2 * (h0 + m) + 1];
        double bcr = (br * cr - bi * ci) * dt, bci = (br * ci + bi * cr) * dt; /* C̃ = B·C·dt·q */
        lr[m] = xr * q_r - xi * q_i, li[m] = xr * q_i + xi * q_r;
        ctr[m] = bcr * q_r - bci * q_i, cti[m] = bcr * q_i + bci * q_r;
        if (qr) Ar[m] = ar, Ai[m] = ai, qr[m] = q_r, qi[m] = q_i;
    }
    for (int m = M; m < Mp; m++) {
        lr[m] = li[m] = ctr[m] = cti[m] = 0.0;
        if (qr) Ar[m] = Ai[m] = qr[m] = qi[m] = 0.0;
    }
    return dt;
}

/* acc[s, j] += Re(C̃_j λ_j^s) for one block of S4D_MB modes; acc: [L, S4D_MB]. */
MLK_INLINE void s4d_fwd_block(int L, const double *lr, const double *li, const double *ctr, const double *cti,
                              double *acc) {
    double pr[S4D_MB], pi[S4D_MB], ar[S4D_MB], ai[S4D_MB]; /* p = C̃·λ^s */
    for (int j = 0; j < S4D_MB; j++) pr[j] = ctr[j], pi[j] = cti[j], ar[j] = lr[j], ai[j] = li[j];
    for (int s = 0; s < L; s++) {
        double *as = acc + (size_t)s * S4D_MB;
#pragma omp simd
        for (int j = 0; j < S4D_MB; j++) {
            as[j] += pr[j];
            double nr = pr[j] * ar[j] - pi[j] * ai[j], ni = pr[j] * ai[j] + pi[j] * ar[j];
            pr[j] = nr, pi[j] = ni;
        }
    }
}

/* K[:,h] for one head; w: 4·Mp + L·S4D_MB doubles of scratch. Each K[s] sums the blocks lane by
 * lane, then the lanes, in a fixed order. */
MLK_CLONES static void s4d_fwd_one(int h, int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                                   const float *inv_A_real, const float *A_imag, double *w, float *K) {
    int Mp = s4d_padded(M);
    double *lr = w, *li = lr + Mp, *ctr = li + Mp, *cti = ctr + Mp, *acc = cti + Mp;
    s4d_head_setup(h, M, Cc, log_dt, Bc, inv_A_real, A_imag, NULL, NULL, NULL, NULL, lr, li, ctr, cti);
    memset(acc, 0, sizeof(double) * L * S4D_MB);
    for (int m0 = 0; m0 < Mp; m0 += S4D_MB) s4d_fwd_block(L, lr + m0, li + m0, ctr + m0, cti + m0, acc);
    for (int s = 0; s < L; s++) {
        double sum = 0.0;
        for (int j = 0; j < S4D_MB; j++) sum += acc[(size_t)s * S4D_MB + j];
        K[(size_t)s * H + h] = (float)(2.0 * sum);
    }
}

int mlk_s4d_kernel_fwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                       const float *inv_A_real, const float *A_imag, float *K) {
    mlk_scratch sc = s4d_scratch(8.0 * H * M * L, 4 * (size_t)s4d_padded(M) + (size_t)L * S4D_MB);
    if (!sc.base) return -1;
#pragma omp parallel num_threads(sc.nt)
    {
        double *w = mlk_scratch_mine(&sc);
#pragma omp for schedule(static)
        for (int h = 0; h < H; h++) s4d_fwd_one(h, H, M, L, Cc, log_dt, Bc, inv_A_real, A_imag, w, K);
    }
    free(sc.base);
    return 0;
}

/* Σ_s g_s conj(λ^s) → gc and Σ_s g_s·s·conj(λ^{s−1}) → gl for one block of S4D_MB modes (g, gs: [L]
 * with gs[s] = s·g_s), with λ^s and the four sums in registers across s. */
MLK_INLINE void s4d_bwd_block(int L, const double *g, const double *gs, const double *lr, const double *li,
                              double *gcr, double *gci, double *glr, double *gli) {
    double pr[S4D_MB], pi[S4D_MB], qr[S4D_MB], qi[S4D_MB], ar[S4D_MB], ai[S4D_MB];
    double cr[S4D_MB], ci[S4D_MB], dr[S4D_MB], di[S4D_MB];
    for (int j = 0; j < S4D_MB; j++) {
        pr[j] = 1.0, pi[j] = 0.0, qr[j] = 0.0, qi[j] = 0.0, ar[j] = lr[j], ai[j] = li[j];
        cr[j] = ci[j] = dr[j] = di[j] = 0.0;
    }
    for (int s = 0; s < L; s++) {
        const double gv = g[s], gsv = gs[s];
#pragma omp simd
        for (int j = 0; j < S4D_MB; j++) {
            cr[j] += gv * pr[j], ci[j] -= gv * pi[j];
            dr[j] += gsv * qr[j], di[j] -= gsv * qi[j];
            qr[j] = pr[j], qi[j] = pi[j];
            double nr = pr[j] * ar[j] - pi[j] * ai[j], ni = pr[j] * ai[j] + pi[j] * ar[j];
            pr[j] = nr, pi[j] = ni;
        }
    }
    for (int j = 0; j < S4D_MB; j++) gcr[j] = cr[j], gci[j] = ci[j], glr[j] = dr[j], gli[j] = di[j];
}

/* conj(a)·b in re, im */
#define S4D_CJMUL(ar, ai, br, bi, r, i) ((r) = (ar) * (br) + (ai) * (bi), (i) = (ar) * (bi) - (ai) * (br))

/* Gradients of one head; w: 12·Mp + 2·L doubles of scratch. */
MLK_CLONES static void s4d_bwd_one(int h, int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                                   const float *inv_A_real, const float *A_imag, const float *dK, float *dCc,
                                   float *dlog_dt, float *dBc, float *dinv_A_real, float *dA_imag, double *w) {
    int Mp = s4d_padded(M);
    double *Ar = w, *Ai = Ar + Mp, *qr = Ai + Mp, *qi = qr + Mp, *lr = qi + Mp, *li = lr + Mp, *ctr = li + Mp;
    double *cti = ctr + Mp, *gcr = cti + Mp, *gci = gcr + Mp, *glr = gci + Mp, *gli = glr + Mp, *g = gli + Mp;
    double *gs = g + L;
    const double dt =
        s4d_head_setup(h, M, Cc, log_dt, Bc, inv_A_real, A_imag, Ar, Ai, qr, qi, lr, li, ctr, cti);
    for (int s = 0; s < L; s++) g[s] = (double)dK[(size_t)s * H + h], gs[s] = g[s] * (double)s;
    for (int m0 = 0; m0 < Mp; m0 += S4D_MB)
        s4d_bwd_block(L, g, gs, lr + m0, li + m0, gcr + m0, gci + m0, glr + m0, gli + m0);
    /* chain rule through C̃ = B·C·dt·q, λ = (1 + w/2)·q, w = A·dt, vectorised over modes; results go
     * in place into the scratch (read and written at the same m): gB → gcr, gci; gC → glr, gli;
     * ∂inv_A_real → Ar; ∂A_imag → Ai; the mode's term of ∂dt → qr */
    const size_t h0 = (size_t)h * M;
#pragma omp simd
    for (int m = 0; m < M; m++) {
        size_t hm = h0 + m;
        double tr = 2.0 * gcr[m], ti = 2.0 * gci[m]; /* G_C̃ */
        double lgr, lgi;                             /* G_λ = 2·conj(C̃)·gl */
        S4D_CJMUL(ctr[m], cti[m], glr[m], gli[m], lgr, lgi);
        lgr *= 2.0, lgi *= 2.0;
        double qqr = qr[m] * qr[m] - qi[m] * qi[m], qqi = 2.0 * qr[m] * qi[m];
        double cqr = 0.5 * (ctr[m] * qr[m] - cti[m] * qi[m]), cqi = 0.5 * (ctr[m] * qi[m] + cti[m] * qr[m]);
        double a1r, a1i, a2r, a2i; /* G_w = conj(q²)·G_λ + conj(C̃·q/2)·G_C̃ */
        S4D_CJMUL(qqr, qqi, lgr, lgi, a1r, a1i);
        S4D_CJMUL(cqr, cqi, tr, ti, a2r, a2i);
        double gwr = a1r + a2r, gwi = a1i + a2i;
        double br = Bc[2 * hm], bi = Bc[2 * hm + 1], cr = Cc[2 * hm], ci = Cc[2 * hm + 1];
        double dqr = dt * qr[m], dqi = dt * qi[m];
        double xr = cr * dqr - ci * dqi, xi = cr * dqi + ci * dqr; /* C·dt·q */
        double yr = br * dqr - bi * dqi, yi = br * dqi + bi * dqr; /* B·dt·q */
        double bcr = br * cr - bi * ci, bci = br * ci + bi * cr;   /* B·C·q */
        double zr = bcr * qr[m] - bci * qi[m], zi = bcr * qi[m] + bci * qr[m];
        /* ∂dt = Re(conj(A)·G_w) + Re(conj(B·C·q)·G_C̃) */
        double e = Ar[m] * gwr + Ai[m] * gwi + zr * tr + zi * ti;
        S4D_CJMUL(xr, xi, tr, ti, gcr[m], gci[m]);
        S4D_CJMUL(yr, yi, tr, ti, glr[m], gli[m]);
        Ar[m] = dt * gwr * Ar[m]; /* G_A = dt·G_w; ∂A_re/∂inv_A_real = A_re */
        Ai[m] = dt * gwi;
        qr[m] = e;
    }
    for (int m = M; m < Mp; m++) qr[m] = 0.0;
    double ddtv[S4D_MB] = {0}; /* ∂dt summed per lane, then over the lanes */
    for (int m0 = 0; m0 < Mp; m0 += S4D_MB)
#pragma omp simd
        for (int j = 0; j < S4D_MB; j++) ddtv[j] += qr[m0 + j];
    double ddt = 0.0;
    for (int j = 0; j < S4D_MB; j++) ddt += ddtv[j];
    if (dlog_dt) dlog_dt[h] = (float)(dt * ddt);
    for (int m = 0; dBc && m < M; m++) dBc[2 * (h0 + m)] = (float)gcr[m], dBc[2 * (h0 + m) + 1] = (float)gci[m];
    for (int m = 0; dCc && m < M; m++) dCc[2 * (h0 + m)] = (float)glr[m], dCc[2 * (h0 + m) + 1] = (float)gli[m];
    for (int m = 0; dinv_A_real && m < M; m++) dinv_A_real[h0 + m] = (float)Ar[m];
    for (int m = 0; dA_imag && m < M; m++) dA_imag[h0 + m] = (float)Ai[m];
}

int mlk_s4d_kernel_bwd(int H, int M, int L, const float *Cc, const float *log_dt, const float *Bc,
                       const float *inv_A_real, const float *A_imag, const float *dK, float *dCc, float *dlog_dt,
                       float *dBc, float *dinv_A_real, float *dA_imag) {
    mlk_scratch sc = s4d_scratch(8.0 * H * M * L, 12 * (size_t)s4d_padded(M) + 2 * (size_t)L);
    if (!sc.base) return -1;
#pragma omp parallel num_threads(sc.nt)
    {
        double *w = mlk_scratch_mine(&sc);
#pragma omp for schedule(static)
        for (int h = 0; h < H; h++)
            s4d_bwd_one(h, H, M, L, Cc, log_dt, Bc, inv_A_real, A_imag, dK, dCc, dlog_dt, dBc, dinv_A_real, dA_imag, w);
    }
    free(sc.base);
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

/* The outer product and the gate run over the B·L·H (row, head) pairs, one SIMD lane per pair
 * (2- and 4-element groups interleaved in memory; restrict: outputs never alias inputs). */
MLK_CLONES static void outer_fwd(size_t n, const float *restrict kt, const float *restrict v, float *restrict kv) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        const float k0 = kt[2 * i], k1 = kt[2 * i + 1], v0 = v[2 * i], v1 = v[2 * i + 1];
        kv[4 * i] = k0 * v0, kv[4 * i + 1] = k0 * v1, kv[4 * i + 2] = k1 * v0, kv[4 * i + 3] = k1 * v1;
    }
}

void mlk_h3_outer_fwd(int BL, int H, const float *kt, const float *v, float *kv) {
    outer_fwd((size_t)BL * H, kt, v, kv);
}

MLK_CLONES static void outer_bwd(size_t n, const float *restrict kt, const float *restrict v,
                                 const float *restrict dkv, float *restrict dkt, float *restrict dv) {
    if (dkt) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            const float *g = dkv + 4 * i, v0 = v[2 * i], v1 = v[2 * i + 1];
            dkt[2 * i] = g[0] * v0 + g[1] * v1, dkt[2 * i + 1] = g[2] * v0 + g[3] * v1;
        }
    }
    if (dv) {
#pragma omp simd
        for (size_t i = 0; i < n; i++) {
            const float *g = dkv + 4 * i, k0 = kt[2 * i], k1 = kt[2 * i + 1];
            dv[2 * i] = g[0] * k0 + g[2] * k1, dv[2 * i + 1] = g[1] * k0 + g[3] * k1;
        }
    }
}

void mlk_h3_outer_bwd(int BL, int H, const float *kt, const float *v, const float *dkv, float *dkt, float *dv) {
    outer_bwd((size_t)BL * H, kt, v, dkv, dkt, dv);
}

MLK_CLONES static void gate_fwd(int BL, int H, const float *restrict q, const float *restrict yk,
                                float *restrict o) {
    for (size_t r = 0; r < (size_t)BL; r++) {
        const float *q2 = q + r * 2 * H, *y4 = yk + r * 4 * H;
        float *orow = o + r * 2 * H;
#pragma omp simd
        for (int h = 0; h < H; h++) {
            const float q0 = q2[2 * h], q1 = q2[2 * h + 1];
            orow[h] = q0 * y4[4 * h] + q1 * y4[4 * h + 2];
            orow[H + h] = q0 * y4[4 * h + 1] + q1 * y4[4 * h + 3];
        }
    }
}

void mlk_h3_gate_fwd(int BL, int H, const float *q, const float *yk, float *o) { gate_fwd(BL, H, q, yk, o); }

MLK_CLONES static void gate_bwd(int BL, int H, const float *restrict q, const float *restrict yk,
                                const float *restrict dout, float *restrict dq, float *restrict dyk) {
    for (size_t r = 0; r < (size_t)BL; r++) {
        const float *q2 = q + r * 2 * H, *y4 = yk + r * 4 * H, *g = dout + r * 2 * H;
        if (dq) {
            float *dq2 = dq + r * 2 * H;
#pragma omp simd
            for (int h = 0; h < H; h++) {
                const float g0 = g[h], g1 = g[H + h];
                dq2[2 * h] = g0 * y4[4 * h] + g1 * y4[4 * h + 1];
                dq2[2 * h + 1] = g0 * y4[4 * h + 2] + g1 * y4[4 * h + 3];
            }
        }
        if (dyk) {
            float *d4 = dyk + r * 4 * H;
#pragma omp simd
            for (int h = 0; h < H; h++) {
                const float g0 = g[h], g1 = g[H + h], q0 = q2[2 * h], q1 = q2[2 * h + 1];
                d4[4 * h] = q0 * g0, d4[4 * h + 1] = q0 * g1, d4[4 * h + 2] = q1 * g0, d4[4 * h + 3] = q1 * g1;
            }
        }
    }
}

void mlk_h3_gate_bwd(int BL, int H, const float *q, const float *yk, const float *dout, float *dq, float *dyk) {
    gate_bwd(BL, H, q, yk, dout, dq, dyk);
}

/* ------------------------------------------------------------------ the differentiable op (ops/mixer_ops.h) */

static ml_status shift_kernel_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *B = ml_node_saved(n, 0), *C = ml_node_saved(n, 1);
    if (!B || !C) return ml_last_status();
    int Ch = (int)B->shape[0], N = (int)B->shape[1], L = (int)n->iarg[0];
    for (int i = 0; i < 2; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    mlk_h3_shift_kernel_bwd(Ch, N, L, ml_f32(B), ml_f32(C), ml_f32(g), mlo_gp(gin[0]), mlo_gp(gin[1]));
    return ML_OK;
}

ml_tensor *ml_h3_shift_kernel(ml_tensor *B, ml_tensor *C, int L) {
    const char *fn = "h3_shift_kernel";
    ml_tensor *ins[2] = {B, C};
    char d[128];
    if (mlo_check_f32s(fn, 2, ins)) return NULL;
    if (mlo_want_shape(fn, 1, B, 2, (int64_t[]){-1, -1}, "[C,N]")) return NULL;
    int64_t Ch = B->shape[0], N = B->shape[1];
    mlo_descf(d, sizeof d, "[C,N] or [1,C,N] with C=%lld, N=%lld", (long long)Ch, (long long)N);
    if (C->ndim == 3 ? mlo_want_shape(fn, 2, C, 3, (int64_t[]){1, Ch, N}, d) : mlo_want_shape(fn, 2, C, 2, B->shape, d))
        return NULL;
    if (L < 0 || L > N)
        return ml_fail(ML_ERR_ARG, "%s: argument 3 (length) must be in [0, N=%lld], got %d", fn, (long long)N, L), NULL;
    if (mlo_check_int_sizes(fn, B)) return NULL;
    ml_tensor *bc = mlo_dense(B), *cc = mlo_dense(C), *out = ml_empty(ML_F32, 2, (int64_t[]){L, Ch});
    if (!bc || !cc || !out) {
        ml_tensor *all[3] = {bc, cc, out};
        mlo_release_all(3, all);
        return mlo_oom(fn);
    }
    mlk_h3_shift_kernel_fwd((int)Ch, (int)N, L, ml_f32(bc), ml_f32(cc), ml_f32(out));
    if (ml_any_needs_grad(2, ins)) {
        ml_node *nd = ml_node_new("H3ShiftKernelBackward", shift_kernel_backward, 2, ins);
        if (nd) {
            ml_node_save(nd, 0, bc);
            ml_node_save(nd, 1, cc);
            nd->iarg[0] = L;
        }
        out = mlo_attach(out, nd);
    }
    ml_release(bc), ml_release(cc);
    return out;
}

static ml_status s4d_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *s[5];
    for (int i = 0; i < 5; i++)
        if (!(s[i] = ml_node_saved(n, i))) return ml_last_status();
    int H = (int)s[1]->shape[0], M = (int)s[3]->shape[1], L = (int)n->iarg[0];
    for (int i = 0; i < 5; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    if (mlk_s4d_kernel_bwd(H, M, L, ml_f32(s[0]), ml_f32(s[1]), ml_f32(s[2]), ml_f32(s[3]), ml_f32(s[4]), ml_f32(g),
                           mlo_gp(gin[0]), mlo_gp(gin[1]), mlo_gp(gin[2]), mlo_gp(gin[3]), mlo_gp(gin[4]))) {
        for (int i = 0; i < 5; i++)
            ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "s4d_kernel backward: out of memory");
    }
    return ML_OK;
}

ml_tensor *ml_s4d_kernel(ml_tensor *C, ml_tensor *log_dt, ml_tensor *B, ml_tensor *inv_A_real, ml_tensor *A_imag,
                         int L) {
    const char *fn = "s4d_kernel";
    ml_tensor *ins[5] = {C, log_dt, B, inv_A_real, A_imag};
    char d[128];
    if (mlo_check_f32s(fn, 5, ins)) return NULL;
    if (mlo_want_shape(fn, 2, log_dt, 1, (int64_t[]){-1}, "[H]")) return NULL;
    int64_t H = log_dt->shape[0];
    if (mlo_want_shape(fn, 4, inv_A_real, 2, (int64_t[]){H, -1},
                       mlo_descf(d, sizeof d, "[H,M] with H=%lld", (long long)H)))
        return NULL;
    int64_t M = inv_A_real->shape[1];
    mlo_descf(d, sizeof d, "[H,M,2] or [1,H,M,2] with H=%lld, M=%lld", (long long)H, (long long)M);
    if (C->ndim == 4 ? mlo_want_shape(fn, 1, C, 4, (int64_t[]){1, H, M, 2}, d)
                     : mlo_want_shape(fn, 1, C, 3, (int64_t[]){H, M, 2}, d))
        return NULL;
    if (mlo_want_shape(fn, 3, B, 3, (int64_t[]){H, M, 2}, d)) return NULL;
    if (mlo_want_shape(fn, 5, A_imag, 2, (int64_t[]){H, M},
                       mlo_descf(d, sizeof d, "[H,M]=[%lld,%lld]", (long long)H, (long long)M)))
        return NULL;
    if (L < 0) return ml_fail(ML_ERR_ARG, "%s: argument 6 (length) must be >= 0, got %d", fn, L), NULL;
    if (mlo_check_int_sizes(fn, inv_A_real)) return NULL;
    ml_tensor *c[5];
    for (int i = 0; i < 5; i++)
        c[i] = mlo_dense(ins[i]);
    ml_tensor *out = ml_empty(ML_F32, 2, (int64_t[]){L, H});
    bool ok = out != NULL;
    for (int i = 0; i < 5; i++)
        ok = ok && c[i];
    if (ok && mlk_s4d_kernel_fwd((int)H, (int)M, L, ml_f32(c[0]), ml_f32(c[1]), ml_f32(c[2]), ml_f32(c[3]),
                                 ml_f32(c[4]), ml_f32(out)))
        ok = false;
    if (!ok) {
        mlo_release_all(5, c);
        ml_release(out);
        return mlo_oom(fn);
    }
    if (ml_any_needs_grad(5, ins)) {
        ml_node *nd = ml_node_new("S4DKernelBackward", s4d_backward, 5, ins);
        if (nd) {
            for (int i = 0; i < 5; i++)
                ml_node_save(nd, i, c[i]);
            nd->iarg[0] = L;
        }
        out = mlo_attach(out, nd);
    }
    mlo_release_all(5, c);
    return out;
}

static ml_status h3_outer_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *a = ml_node_saved(n, 0), *b = ml_node_saved(n, 1);
    if (!a || !b) return ml_last_status();
    int H = (int)(a->shape[2] / 2), BL = (int)(a->shape[0] * a->shape[1]);
    for (int i = 0; i < 2; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    if (n->iarg[0] == 0)
        mlk_h3_outer_bwd(BL, H, ml_f32(a), ml_f32(b), ml_f32(g), mlo_gp(gin[0]), mlo_gp(gin[1]));
    else
        mlk_h3_gate_bwd(BL, H, ml_f32(a), ml_f32(b), ml_f32(g), mlo_gp(gin[0]), mlo_gp(gin[1]));
    return ML_OK;
}

/* Shared by ml_h3_outer (gate = 0) and ml_h3_gate (gate = 1). */
static ml_tensor *h3_pair(const char *fn, ml_tensor *a, ml_tensor *b, int gate) {
    ml_tensor *ins[2] = {a, b};
    char d[128];
    if (mlo_check_f32s(fn, 2, ins)) return NULL;
    if (a->ndim != 3 || a->shape[2] % 2 != 0)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 must be [B,L,2H] (an even last dimension)", fn), NULL;
    int64_t Bz = a->shape[0], L = a->shape[1], H = a->shape[2] / 2;
    int64_t wb = gate ? 4 * H : 2 * H;
    if (mlo_want_shape(fn, 2, b, 3, (int64_t[]){Bz, L, wb},
                       mlo_descf(d, sizeof d, "[%lld,%lld,%lld]", (long long)Bz, (long long)L, (long long)wb)))
        return NULL;
    if (mlo_check_int_sizes(fn, b)) return NULL;
    ml_tensor *ac = mlo_dense(a), *bc = mlo_dense(b);
    ml_tensor *out = ml_empty(ML_F32, 3, (int64_t[]){Bz, L, gate ? 2 * H : 4 * H});
    if (!ac || !bc || !out) {
        ml_tensor *all[3] = {ac, bc, out};
        mlo_release_all(3, all);
        return mlo_oom(fn);
    }
    if (gate)
        mlk_h3_gate_fwd((int)(Bz * L), (int)H, ml_f32(ac), ml_f32(bc), ml_f32(out));
    else
        mlk_h3_outer_fwd((int)(Bz * L), (int)H, ml_f32(ac), ml_f32(bc), ml_f32(out));
    if (ml_any_needs_grad(2, ins)) {
        ml_node *nd = ml_node_new(gate ? "H3GateBackward" : "H3OuterBackward", h3_outer_backward, 2, ins);
        if (nd) {
            ml_node_save(nd, 0, ac);
            ml_node_save(nd, 1, bc);
            nd->iarg[0] = gate;
        }
        out = mlo_attach(out, nd);
    }
    ml_release(ac), ml_release(bc);
    return out;
}

ml_tensor *ml_h3_outer(ml_tensor *kt, ml_tensor *v) { return h3_pair("h3_outer", kt, v, 0); }
ml_tensor *ml_h3_gate(ml_tensor *q, ml_tensor *yk) { return h3_pair("h3_gate", q, yk, 1); }
