/* Raw mixer kernels (src/ops/kernels.h): finite-difference gradient checks of every backward,
 * step (recurrent) forms against the parallel forms, known values on tiny cases, determinism. */
#include <complex.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "ops/kernels.h"
#include "testutil.h"

/* ---- helpers ---- */

static unsigned long long rng_state = 88172645463325252ULL;
static double urand(void) { return ml_test_urand(&rng_state); }
/* every test buffer is tracked and freed by the fixture's teardown */
enum { MAX_TRACKED = 512 };
static void *tracked[MAX_TRACKED];
static int n_tracked;
static void *track(void *p) {
    ck_assert_ptr_nonnull(p);
    ck_assert_int_lt(n_tracked, MAX_TRACKED);
    return tracked[n_tracked++] = p;
}
static void free_tracked(void) {
    while (n_tracked > 0) free(tracked[--n_tracked]);
}
static float *rnd(size_t n, double lo, double hi) {
    float *p = track(malloc(sizeof(float) * (n ? n : 1)));
    for (size_t i = 0; i < n; i++) p[i] = (float)(lo + (hi - lo) * urand());
    return p;
}
static float *zeros(size_t n) { return track(calloc(n ? n : 1, sizeof(float))); }
static double dotw(size_t n, const float *w, const float *y) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)w[i] * y[i];
    return s;
}
static double max_abs_diff(size_t n, const float *a, const float *b) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > m || isnan(d)) m = isnan(d) ? INFINITY : d;
    }
    return m;
}

/* Central-difference check of one float input against its analytic gradient. loss() runs the
 * forward and returns Σ w·y in double. */
typedef double (*loss_fn)(void);
static void fd_check(const char *what, loss_fn loss, float *p, size_t n, const float *grad) {
    const double eps = 1e-2, atol = 2e-3, rtol = 1e-2;
    for (size_t i = 0; i < n; i++) {
        float keep = p[i];
        p[i] = keep + (float)eps;
        double lp = loss();
        p[i] = keep - (float)eps;
        double lm = loss();
        p[i] = keep;
        double num = (lp - lm) / (2.0 * eps);
        ck_assert_msg(fabs(num - grad[i]) <= atol + rtol * fabs(num), "%s[%zu]: analytic %.7g, numeric %.7g", what, i,
                      (double)grad[i], num);
    }
}

/* ================= causal depthwise conv ================= */

static struct {
    int B, L, C, K;
    float *x, *w, *bias, *y, *gw;
} cv;
static double conv_loss(void) {
    mlk_conv1d_fwd(cv.B, cv.L, cv.C, cv.K, cv.x, cv.w, cv.bias, cv.y);
    return dotw((size_t)cv.B * cv.L * cv.C, cv.gw, cv.y);
}
static void conv_setup(int B, int L, int C, int K, int with_bias) {
    cv.B = B, cv.L = L, cv.C = C, cv.K = K;
    size_t n = (size_t)B * L * C;
    cv.x = rnd(n, -1, 1), cv.w = rnd((size_t)C * K, -1, 1), cv.bias = with_bias ? rnd(C, -1, 1) : NULL;
    cv.y = zeros(n), cv.gw = rnd(n, -1, 1);
}

START_TEST(conv1d_known_k1) {
    conv_setup(2, 5, 3, 1, 1);
    conv_loss();
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 5; t++)
            for (int c = 0; c < 3; c++) {
                size_t i = ((size_t)b * 5 + t) * 3 + c;
                ck_assert_close(cv.y[i], cv.w[c] * cv.x[i] + cv.bias[c], 1e-6, 0);
            }
}
END_TEST

START_TEST(conv1d_known_k3) {
    /* one channel, x = 1,2,3,4; w = [a,b,c] (c multiplies the current token) */
    float x[4] = {1, 2, 3, 4}, w[3] = {0.5f, -1.0f, 2.0f}, bias[1] = {0.25f}, y[4];
    mlk_conv1d_fwd(1, 4, 1, 3, x, w, bias, y);
    float expect[4] = {0.25f + 2.0f * 1, 0.25f + 2.0f * 2 - 1.0f * 1, 0.25f + 2.0f * 3 - 1.0f * 2 + 0.5f * 1,
                       0.25f + 2.0f * 4 - 1.0f * 3 + 0.5f * 2};
    for (int t = 0; t < 4; t++) ck_assert_close(y[t], expect[t], 1e-6, 0);
}
END_TEST

static void conv_grad_case(int K, int with_bias) {
    conv_setup(2, 6, 3, K, with_bias);
    size_t n = (size_t)cv.B * cv.L * cv.C;
    float *dx = zeros(n), *dw = zeros((size_t)cv.C * K), *db = zeros(cv.C);
    mlk_conv1d_bwd(cv.B, cv.L, cv.C, K, cv.x, cv.w, cv.gw, dx, dw, with_bias ? db : NULL);
    fd_check("conv dx", conv_loss, cv.x, n, dx);
    fd_check("conv dw", conv_loss, cv.w, (size_t)cv.C * K, dw);
    if (with_bias) fd_check("conv dbias", conv_loss, cv.bias, cv.C, db);
}
START_TEST(conv1d_grad) {
    conv_grad_case(3, 1);
    conv_grad_case(1, 1);
    conv_grad_case(4, 0);
}
END_TEST

START_TEST(conv1d_row_stride) {
    /* x as columns 1..3 of a [2,6,5] array equals the dense x, forward and backward */
    conv_setup(2, 6, 3, 3, 1);
    float *wide = rnd(2 * 6 * 5, -1, 1);
    for (int r = 0; r < 12; r++) memcpy(cv.x + r * 3, wide + r * 5 + 1, sizeof(float) * 3);
    float *y2 = zeros(36), *dx1 = zeros(36), *dx2 = zeros(36), *dw1 = zeros(9), *dw2 = zeros(9), *db1 = zeros(3),
          *db2 = zeros(3);
    conv_loss();
    mlk_conv1d_fwd_ld(2, 6, 3, 3, wide + 1, 5, cv.w, cv.bias, y2);
    ck_assert(memcmp(cv.y, y2, sizeof(float) * 36) == 0);
    mlk_conv1d_bwd(2, 6, 3, 3, cv.x, cv.w, cv.gw, dx1, dw1, db1);
    mlk_conv1d_bwd_ld(2, 6, 3, 3, wide + 1, 5, cv.w, cv.gw, dx2, dw2, db2);
    ck_assert(memcmp(dx1, dx2, sizeof(float) * 36) == 0 && memcmp(dw1, dw2, sizeof(float) * 9) == 0);
}
END_TEST

START_TEST(conv1d_step_matches) {
    for (int K = 1; K <= 4; K++) {
        conv_setup(2, 7, 5, K, K != 2);
        conv_loss();
        float *state = zeros((size_t)2 * 5 * (K - 1)), xt[10], yt[10];
        for (int t = 0; t < 7; t++) {
            for (int b = 0; b < 2; b++) memcpy(xt + b * 5, cv.x + ((size_t)b * 7 + t) * 5, sizeof(float) * 5);
            mlk_conv1d_step(2, 5, K, state, xt, cv.w, cv.bias, yt);
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 5; c++) ck_assert_close(yt[b * 5 + c], cv.y[((size_t)b * 7 + t) * 5 + c], 1e-5, 1e-5);
        }
    }
}
END_TEST

/* ================= long convolution ================= */

static struct {
    int B, L, C, G;
    float *u, *k, *ds, *y, *gw;
} lc;
static double lc_loss(void) {
    mlk_longconv_fwd(lc.B, lc.L, lc.C, lc.G, lc.u, lc.k, lc.ds, lc.y);
    return dotw((size_t)lc.B * lc.L * lc.C, lc.gw, lc.y);
}
static void lc_setup(int B, int L, int C, int G, int skip) {
    lc.B = B, lc.L = L, lc.C = C, lc.G = G;
    size_t n = (size_t)B * L * C;
    lc.u = rnd(n, -1, 1), lc.k = rnd((size_t)L * C / G, -1, 1), lc.ds = skip ? rnd(C / G, -1, 1) : NULL;
    lc.y = zeros(n), lc.gw = rnd(n, -1, 1);
}

START_TEST(longconv_known) {
    /* k = unit impulse at lag 2: y[t] = u[t−2] (+ dskip·u[t]) */
    lc_setup(2, 6, 3, 1, 1);
    memset(lc.k, 0, sizeof(float) * 6 * 3);
    for (int c = 0; c < 3; c++) lc.k[2 * 3 + c] = 1.0f;
    lc_loss();
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < 6; t++)
            for (int c = 0; c < 3; c++) {
                size_t i = ((size_t)b * 6 + t) * 3 + c;
                float expect = (t >= 2 ? lc.u[i - 2 * 3] : 0.0f) + lc.ds[c] * lc.u[i];
                ck_assert_close(lc.y[i], expect, 1e-6, 0);
            }
}
END_TEST

START_TEST(longconv_grad) {
    int Gs[2] = {1, 2};
    for (int gi = 0; gi < 2; gi++) {
        int G = Gs[gi];
        lc_setup(2, 7, 4, G, 1);
        size_t n = (size_t)2 * 7 * 4, nk = (size_t)7 * 4 / G;
        float *du = zeros(n), *dk = zeros(nk), *dd = zeros(4 / G);
        mlk_longconv_bwd(2, 7, 4, G, lc.u, lc.k, lc.ds, lc.gw, du, dk, dd);
        fd_check("longconv du", lc_loss, lc.u, n, du);
        fd_check("longconv dk", lc_loss, lc.k, nk, dk);
        fd_check("longconv ddskip", lc_loss, lc.ds, 4 / G, dd);
    }
}
END_TEST

START_TEST(longconv_tiles_match_direct) {
    /* sizes that run whole register tiles (8 positions × 16 channels) and both kinds of tail:
     * L = 19 (2 tiles + 3 rows), C = 21 (16 + 5 channels); G = 1 and 3; with and without skip */
    int B = 2, L = 19, C = 21, Gs[2] = {1, 3};
    for (int gi = 0; gi < 2; gi++)
        for (int skip = 0; skip < 2; skip++) {
            int G = Gs[gi], F = C / G;
            lc_setup(B, L, C, G, skip);
            lc_loss();
            size_t n = (size_t)B * L * C;
            float *du = zeros(n), *dk = zeros((size_t)L * F), *dd = zeros(F);
            mlk_longconv_bwd(B, L, C, G, lc.u, lc.k, lc.ds, lc.gw, du, dk, skip ? dd : NULL);
            for (int b = 0; b < B; b++)
                for (int t = 0; t < L; t++)
                    for (int c = 0; c < C; c++) {
                        double y = skip ? (double)lc.ds[c / G] * lc.u[((size_t)b * L + t) * C + c] : 0.0;
                        double g = skip ? (double)lc.ds[c / G] * lc.gw[((size_t)b * L + t) * C + c] : 0.0;
                        for (int s = 0; s <= t; s++) y += (double)lc.k[s * F + c / G] * lc.u[((size_t)b * L + t - s) * C + c];
                        for (int s = 0; t + s < L; s++) g += (double)lc.k[s * F + c / G] * lc.gw[((size_t)b * L + t + s) * C + c];
                        ck_assert_close(lc.y[((size_t)b * L + t) * C + c], y, 1e-5, 1e-5);
                        ck_assert_close(du[((size_t)b * L + t) * C + c], g, 1e-5, 1e-5);
                    }
            for (int s = 0; s < L; s++)
                for (int f = 0; f < F; f++) {
                    double g = 0.0;
                    for (int b = 0; b < B; b++)
                        for (int t = s; t < L; t++)
                            for (int c = f * G; c < (f + 1) * G; c++)
                                g += (double)lc.gw[((size_t)b * L + t) * C + c] * lc.u[((size_t)b * L + t - s) * C + c];
                    ck_assert_close(dk[s * F + f], g, 1e-4, 1e-5);
                }
            if (skip) {
                fd_check("longconv tiles du", lc_loss, lc.u, n, du);
                fd_check("longconv tiles dk", lc_loss, lc.k, (size_t)L * F, dk);
                fd_check("longconv tiles ddskip", lc_loss, lc.ds, F, dd);
            }
        }
}
END_TEST

/* AVX2's blocking (two passes of 8 lanes a tile) gives the bits of AVX-512's (16 lanes), forward
 * and all three gradients, for channel tails under and over 8 lanes, row tails, and G > 1. */
START_TEST(longconv_blockings_same_bits) {
    const int Ls[] = {5, 19, 40}, Cs[] = {3, 12, 21, 32}, Gs[] = {1, 3};
    for (int a = 0; a < 3; a++)
        for (int c = 0; c < 4; c++)
            for (int g = 0; g < 2; g++) {
                int B = 2, L = Ls[a], C = Cs[c], G = C % Gs[g] ? 1 : Gs[g], F = C / G;
                size_t n = (size_t)B * L * C, nk = (size_t)L * F;
                lc_setup(B, L, C, G, (a + c) % 2);
                float *out[2][4];
                for (int h = 0; h < 2; h++) {
                    mlk_force_avx2_blocking(h);
                    out[h][0] = zeros(n), out[h][1] = zeros(n), out[h][2] = zeros(nk), out[h][3] = zeros(F);
                    mlk_longconv_fwd(B, L, C, G, lc.u, lc.k, lc.ds, out[h][0]);
                    mlk_longconv_bwd(B, L, C, G, lc.u, lc.k, lc.ds, lc.gw, out[h][1], out[h][2],
                                     lc.ds ? out[h][3] : NULL);
                }
                mlk_force_avx2_blocking(-1);
                const size_t len[4] = {n, n, nk, (size_t)F};
                const char *what[4] = {"y", "du", "dk", "ddskip"};
                for (int o = 0; o < 4; o++)
                    ck_assert_msg(!memcmp(out[0][o], out[1][o], sizeof(float) * len[o]),
                                  "longconv L %d C %d G %d: %s differs between the blockings", L, C, G, what[o]);
                free_tracked();
            }
}
END_TEST

START_TEST(longconv_step_matches) {
    lc_setup(2, 7, 4, 2, 1);
    lc_loss();
    float *hist = zeros((size_t)2 * 7 * 4), yt[8];
    for (int t = 0; t < 7; t++) {
        for (int b = 0; b < 2; b++)
            memcpy(hist + ((size_t)b * 7 + t) * 4, lc.u + ((size_t)b * 7 + t) * 4, sizeof(float) * 4);
        mlk_longconv_step(2, 7, 4, 2, t, hist, lc.k, lc.ds, yt);
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 4; c++) ck_assert_close(yt[b * 4 + c], lc.y[((size_t)b * 7 + t) * 4 + c], 1e-5, 1e-5);
    }
}
END_TEST

/* ================= selective scan ================= */

static struct {
    int B, L, E, N;
    float *u, *dl, *A, *Bm, *Cm, *D, *h0, *y, *gw;
} sc;
static double sc_loss(void) {
    mlk_sscan_fwd(sc.B, sc.L, sc.E, sc.N, sc.u, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, sc.h0, sc.y, NULL, NULL);
    return dotw((size_t)sc.B * sc.L * sc.E, sc.gw, sc.y);
}
static void sc_setup(int B, int L, int E, int N, int with_h0) {
    sc.B = B, sc.L = L, sc.E = E, sc.N = N;
    size_t nE = (size_t)B * L * E, nN = (size_t)B * L * N;
    sc.u = rnd(nE, -1, 1), sc.dl = rnd(nE, 0.1, 1.0), sc.A = rnd((size_t)E * N, -2.0, -0.3);
    sc.Bm = rnd(nN, -1, 1), sc.Cm = rnd(nN, -1, 1), sc.D = rnd(E, -1, 1);
    sc.h0 = with_h0 ? rnd((size_t)B * E * N, -1, 1) : NULL;
    sc.y = zeros(nE), sc.gw = rnd(nE, -1, 1);
}

START_TEST(sscan_known_l1) {
    /* L = 1, h0 = 0: h = Δ·B·u, y = Σ_n C_n Δ B_n u + D u */
    sc_setup(2, 1, 3, 4, 0);
    sc_loss();
    for (int b = 0; b < 2; b++)
        for (int e = 0; e < 3; e++) {
            double cb = 0.0;
            for (int n = 0; n < 4; n++) cb += (double)sc.Cm[b * 4 + n] * sc.Bm[b * 4 + n];
            double expect = cb * sc.dl[b * 3 + e] * sc.u[b * 3 + e] + (double)sc.D[e] * sc.u[b * 3 + e];
            ck_assert_close(sc.y[b * 3 + e], expect, 1e-6, 1e-6);
        }
}
END_TEST

START_TEST(sscan_known_decay) {
    /* L = 2, one channel, one state: h1 = exp(Δ1 A) Δ0 B0 u0 + Δ1 B1 u1 */
    float u[2] = {1.0f, 2.0f}, dl[2] = {0.5f, 0.25f}, A[1] = {-1.0f}, Bm[2] = {1.0f, 3.0f}, Cm[2] = {2.0f, -1.0f}, y[2];
    mlk_sscan_fwd(1, 2, 1, 1, u, dl, A, Bm, Cm, NULL, NULL, y, NULL, NULL);
    double h0 = 0.5 * 1.0 * 1.0, h1 = exp(-0.25) * h0 + 0.25 * 3.0 * 2.0;
    ck_assert_close(y[0], 2.0 * h0, 1e-6, 1e-6);
    ck_assert_close(y[1], -1.0 * h1, 1e-6, 1e-6);
}
END_TEST

START_TEST(sscan_grad) {
    for (int with_h0 = 0; with_h0 < 2; with_h0++) {
        sc_setup(2, 6, 3, 4, with_h0);
        size_t nE = (size_t)2 * 6 * 3, nN = (size_t)2 * 6 * 4, EN = 12;
        float *du = zeros(nE), *ddl = zeros(nE), *dA = zeros(EN), *dB = zeros(nN), *dC = zeros(nN), *dD = zeros(3);
        float *dh0 = zeros(2 * EN);
        ck_assert_int_eq(mlk_sscan_bwd(2, 6, 3, 4, sc.u, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, sc.h0, NULL, sc.gw, du, ddl,
                                       dA, dB, dC, dD, dh0),
                         0);
        fd_check("sscan du", sc_loss, sc.u, nE, du);
        fd_check("sscan ddelta", sc_loss, sc.dl, nE, ddl);
        fd_check("sscan dA", sc_loss, sc.A, EN, dA);
        fd_check("sscan dB", sc_loss, sc.Bm, nN, dB);
        fd_check("sscan dC", sc_loss, sc.Cm, nN, dC);
        fd_check("sscan dD", sc_loss, sc.D, 3, dD);
        if (with_h0) fd_check("sscan dh0", sc_loss, sc.h0, 2 * EN, dh0);
    }
}
END_TEST

START_TEST(sscan_saved_states_same_grad) {
    /* backward from saved states equals backward with recomputation, bit for bit */
    sc_setup(2, 6, 3, 4, 1);
    size_t nE = 36, nN = 48, EN = 12;
    float *hs = zeros((size_t)2 * 6 * EN);
    mlk_sscan_fwd(2, 6, 3, 4, sc.u, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, sc.h0, sc.y, hs, NULL);
    float *g1[7], *g2[7];
    size_t sz[7] = {nE, nE, EN, nN, nN, 3, 2 * EN};
    for (int i = 0; i < 7; i++) g1[i] = zeros(sz[i]), g2[i] = zeros(sz[i]);
    mlk_sscan_bwd(2, 6, 3, 4, sc.u, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, sc.h0, NULL, sc.gw, g1[0], g1[1], g1[2], g1[3],
                  g1[4], g1[5], g1[6]);
    mlk_sscan_bwd(2, 6, 3, 4, sc.u, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, sc.h0, hs, sc.gw, g2[0], g2[1], g2[2], g2[3],
                  g2[4], g2[5], g2[6]);
    for (int i = 0; i < 7; i++) ck_assert(memcmp(g1[i], g2[i], sizeof(float) * sz[i]) == 0);
}
END_TEST

START_TEST(sscan_step_and_chunks_match) {
    int B = 2, L = 7, E = 3, N = 4;
    sc_setup(B, L, E, N, 1);
    size_t EN = (size_t)E * N;
    float *hs = zeros((size_t)B * L * EN);
    mlk_sscan_fwd(B, L, E, N, sc.u, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, sc.h0, sc.y, hs, NULL);
    /* token by token */
    float *h = zeros(B * EN), ut[6], dt[6], Bt[8], Ct[8], yt[6];
    memcpy(h, sc.h0, sizeof(float) * B * EN);
    for (int t = 0; t < L; t++) {
        for (int b = 0; b < B; b++) {
            size_t bt = (size_t)b * L + t;
            memcpy(ut + b * E, sc.u + bt * E, sizeof(float) * E);
            memcpy(dt + b * E, sc.dl + bt * E, sizeof(float) * E);
            memcpy(Bt + b * N, sc.Bm + bt * N, sizeof(float) * N);
            memcpy(Ct + b * N, sc.Cm + bt * N, sizeof(float) * N);
        }
        mlk_sscan_step(B, E, N, h, ut, dt, sc.A, Bt, Ct, sc.D, yt);
        for (int b = 0; b < B; b++) {
            size_t bt = (size_t)b * L + t;
            for (int e = 0; e < E; e++) ck_assert_close(yt[b * E + e], sc.y[bt * E + e], 1e-5, 1e-5);
            ck_assert(max_abs_diff(EN, h + b * EN, hs + bt * EN) <= 1e-5);
        }
    }
    /* two chunks [0,3) and [3,7) chained through hlast → h0: the state-patching path */
    int p = 3;
    float *u1 = zeros(B * L * E), *d1 = zeros(B * L * E), *B1 = zeros(B * L * N), *C1 = zeros(B * L * N);
    float *u2 = zeros(B * L * E), *d2 = zeros(B * L * E), *B2 = zeros(B * L * N), *C2 = zeros(B * L * N);
    for (int b = 0; b < B; b++) {
        memcpy(u1 + b * p * E, sc.u + b * L * E, sizeof(float) * p * E);
        memcpy(d1 + b * p * E, sc.dl + b * L * E, sizeof(float) * p * E);
        memcpy(B1 + b * p * N, sc.Bm + b * L * N, sizeof(float) * p * N);
        memcpy(C1 + b * p * N, sc.Cm + b * L * N, sizeof(float) * p * N);
        memcpy(u2 + b * (L - p) * E, sc.u + (b * L + p) * E, sizeof(float) * (L - p) * E);
        memcpy(d2 + b * (L - p) * E, sc.dl + (b * L + p) * E, sizeof(float) * (L - p) * E);
        memcpy(B2 + b * (L - p) * N, sc.Bm + (b * L + p) * N, sizeof(float) * (L - p) * N);
        memcpy(C2 + b * (L - p) * N, sc.Cm + (b * L + p) * N, sizeof(float) * (L - p) * N);
    }
    float *y1 = zeros(B * p * E), *y2 = zeros(B * (L - p) * E), *hmid = zeros(B * EN);
    mlk_sscan_fwd(B, p, E, N, u1, d1, sc.A, B1, C1, sc.D, sc.h0, y1, NULL, hmid);
    mlk_sscan_fwd(B, L - p, E, N, u2, d2, sc.A, B2, C2, sc.D, hmid, y2, NULL, NULL);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < L; t++)
            for (int e = 0; e < E; e++) {
                float got = t < p ? y1[(b * p + t) * E + e] : y2[(b * (L - p) + t - p) * E + e];
                ck_assert_close(got, sc.y[(b * L + t) * E + e], 1e-6, 1e-6);
            }
}
END_TEST

START_TEST(sscan_attention_reproduces_output) {
    int B = 2, L = 6, E = 3, N = 4;
    sc_setup(B, L, E, N, 0);
    sc_loss();
    float *al = zeros((size_t)B * E * L * L);
    mlk_sscan_attention(B, L, E, N, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, al);
    for (int b = 0; b < B; b++)
        for (int e = 0; e < E; e++)
            for (int t = 0; t < L; t++) {
                double acc = 0.0;
                for (int s = 0; s < L; s++) {
                    float a = al[(((size_t)b * E + e) * L + t) * L + s];
                    if (s > t) ck_assert(a == 0.0f);
                    acc += (double)a * sc.u[((size_t)b * L + s) * E + e];
                }
                ck_assert_close(acc, sc.y[((size_t)b * L + t) * E + e], 1e-5, 1e-5);
            }
}
END_TEST

START_TEST(sscan_deterministic_threads) {
    int B = 8, L = 37, E = 32, N = 16;
    sc_setup(B, L, E, N, 0);
    size_t nE = (size_t)B * L * E, EN = (size_t)E * N, nN = (size_t)B * L * N;
    float *r[2][5];
    for (int k = 0; k < 2; k++) {
        ml_set_threads(k + 1);
        for (int i = 0; i < 5; i++) r[k][i] = zeros(i < 2 ? nE : i == 2 ? EN : nN);
        mlk_sscan_bwd(B, L, E, N, sc.u, sc.dl, sc.A, sc.Bm, sc.Cm, sc.D, NULL, NULL, sc.gw, r[k][0], r[k][1], r[k][2],
                      r[k][3], r[k][4], NULL, NULL);
    }
    ml_set_threads(1);
    for (int i = 0; i < 5; i++) ck_assert(memcmp(r[0][i], r[1][i], sizeof(float) * (i < 2 ? nE : i == 2 ? EN : nN)) == 0);
}
END_TEST

START_TEST(other_kernels_deterministic_threads) {
    /* every backward gives the same bits on 1 and 2 threads (sizes above the threading threshold) */
    int B = 8, L = 37, C = 64, K = 4;
    size_t n = (size_t)B * L * C;
    float *x = rnd(n, -1, 1), *w = rnd((size_t)C * K, -1, 1), *dy = rnd(n, -1, 1), *k = rnd((size_t)L * C, -1, 1);
    float *ds = rnd(C, -1, 1), *q = rnd((size_t)B * L * 8, -1, 1), *kk = rnd((size_t)B * L * 8, -1, 1);
    float *bt = rnd((size_t)B * L, 0.1, 0.9);
    float *r[2][12];
    for (int th = 0; th < 2; th++) {
        ml_set_threads(th + 1);
        float **g = r[th];
        g[0] = zeros(n), g[1] = zeros((size_t)C * K), g[2] = zeros(C);
        mlk_conv1d_bwd(B, L, C, K, x, w, dy, g[0], g[1], g[2]);
        g[3] = zeros(n), g[4] = zeros((size_t)L * C), g[5] = zeros(C);
        mlk_longconv_bwd(B, L, C, 1, x, k, ds, dy, g[3], g[4], g[5]);
        g[6] = zeros((size_t)L * C / 4), g[7] = zeros(C / 4);
        mlk_longconv_bwd(B, L, C, 4, x, k, ds, dy, NULL, g[6], g[7]);
        g[8] = zeros((size_t)B * L * 8), g[9] = zeros(n);
        mlk_based_bwd(B, L, 1, 8, C, 1e-12f, q, kk, x, dy, g[8], NULL, g[9]);
        g[10] = zeros(n), g[11] = zeros((size_t)B * L);
        mlk_delta_bwd(B, L, 1, C, C, 0.125f, x, dy, x, bt, NULL, NULL, dy, g[10], NULL, NULL, g[11], NULL);
    }
    ml_set_threads(1);
    size_t sz[12] = {n, (size_t)C * K, C, n, (size_t)L * C, C, (size_t)L * C / 4, C / 4, (size_t)B * L * 8, n, n,
                     (size_t)B * L};
    for (int i = 0; i < 12; i++) ck_assert_msg(memcmp(r[0][i], r[1][i], sizeof(float) * sz[i]) == 0, "output %d", i);
}
END_TEST

/* ================= Based linear attention ================= */

static struct {
    int B, L, H, F, Dv;
    float *q, *k, *v, *y, *gw;
} ba;
static double ba_loss(void) {
    mlk_based_fwd(ba.B, ba.L, ba.H, ba.F, ba.Dv, 1e-12f, ba.q, ba.k, ba.v, ba.y);
    return dotw((size_t)ba.B * ba.L * ba.H * ba.Dv, ba.gw, ba.y);
}
static void ba_setup(int B, int L, int H, int F, int Dv) {
    ba.B = B, ba.L = L, ba.H = H, ba.F = F, ba.Dv = Dv;
    size_t nqk = (size_t)B * L * H * F, nv = (size_t)B * L * H * Dv;
    ba.q = rnd(nqk, -1, 1), ba.k = rnd(nqk, -1, 1), ba.v = rnd(nv, -1, 1), ba.y = zeros(nv), ba.gw = rnd(nv, -1, 1);
}

START_TEST(taylor_feature_dot) {
    /* φ(q)·φ(k) = 1 + s + s²/2 with s = q·k/√F; 73 features for F = 8 */
    ck_assert_int_eq(mlk_taylor_dim(8), 73);
    float *q = rnd(8, -1, 1), *k = rnd(8, -1, 1), pq[73], pk[73];
    mlk_taylor_fwd(1, 8, q, pq);
    mlk_taylor_fwd(1, 8, k, pk);
    double d = 0.0, s = 0.0;
    for (int i = 0; i < 73; i++) d += (double)pq[i] * pk[i];
    for (int i = 0; i < 8; i++) s += (double)q[i] * k[i];
    s /= sqrt(8.0);
    ck_assert_close(d, 1.0 + s + 0.5 * s * s, 1e-6, 1e-6);
    ck_assert_close(pq[1], q[0] / 1.681793, 1e-6, 1e-6);
    ck_assert_close(pq[1 + 8 + 2 * 8 + 3], q[2] * q[3] / 4.0, 1e-6, 1e-6);
}
END_TEST

static float *tf_x, *tf_w, tf_phi[3 * 73];
static double tf_loss(void) {
    mlk_taylor_fwd(3, 8, tf_x, tf_phi);
    return dotw(3 * 73, tf_w, tf_phi);
}
START_TEST(taylor_grad) {
    tf_x = rnd(24, -1, 1), tf_w = rnd(3 * 73, -1, 1);
    float dx[24];
    mlk_taylor_bwd(3, 8, tf_x, tf_w, dx);
    fd_check("taylor dx", tf_loss, tf_x, 24, dx);
}
END_TEST

START_TEST(based_known_l1) {
    /* L = 1: y_0 = A v_0 / (A + eps) = v_0 */
    ba_setup(2, 1, 1, 8, 5);
    ba_loss();
    for (int i = 0; i < 10; i++) ck_assert_close(ba.y[i], ba.v[i], 1e-6, 1e-6);
}
END_TEST

START_TEST(based_grad) {
    ba_setup(2, 6, 2, 4, 3);
    size_t nqk = (size_t)2 * 6 * 2 * 4, nv = (size_t)2 * 6 * 2 * 3;
    float *dq = zeros(nqk), *dk = zeros(nqk), *dv = zeros(nv);
    ck_assert_int_eq(mlk_based_bwd(2, 6, 2, 4, 3, 1e-12f, ba.q, ba.k, ba.v, ba.gw, dq, dk, dv), 0);
    fd_check("based dq", ba_loss, ba.q, nqk, dq);
    fd_check("based dk", ba_loss, ba.k, nqk, dk);
    fd_check("based dv", ba_loss, ba.v, nv, dv);
}
END_TEST

START_TEST(based_step_and_pattern) {
    int B = 2, L = 7, H = 2, F = 8, Dv = 5, P = 73;
    ba_setup(B, L, H, F, Dv);
    float *den = zeros((size_t)B * H * L), *pat = zeros((size_t)B * H * L * L);
    mlk_based_fwd_ex(B, L, H, F, Dv, 1e-12f, ba.q, ba.k, ba.v, ba.y, den, pat);
    float *S = zeros((size_t)B * H * P * Dv), *z = zeros((size_t)B * H * P);
    float qt[32], kt[32], vt[20], yt[20];
    for (int t = 0; t < L; t++) {
        for (int b = 0; b < B; b++) {
            size_t r = ((size_t)b * L + t) * H;
            memcpy(qt + b * H * F, ba.q + r * F, sizeof(float) * H * F);
            memcpy(kt + b * H * F, ba.k + r * F, sizeof(float) * H * F);
            memcpy(vt + b * H * Dv, ba.v + r * Dv, sizeof(float) * H * Dv);
        }
        mlk_based_step(B, H, F, Dv, 1e-12f, S, z, qt, kt, vt, yt);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                size_t r = ((size_t)b * L + t) * H + h;
                for (int j = 0; j < Dv; j++) ck_assert_close(yt[(b * H + h) * Dv + j], ba.y[r * Dv + j], 1e-5, 1e-5);
                ck_assert_close(z[((size_t)b * H + h) * P], t + 1, 0, 0); /* constant feature counts tokens */
                double rs = 0.0;
                for (int s = 0; s < L; s++) rs += pat[(((size_t)b * H + h) * L + t) * L + s];
                ck_assert_close(rs, 1.0, 1e-5, 0);
            }
    }
}
END_TEST

/* ================= delta rule ================= */

static struct {
    int B, L, H, Dk, Dv;
    float scale;
    float *q, *k, *v, *beta, *S0, *o, *gw;
} dr;
static double dr_loss(void) {
    mlk_delta_fwd(dr.B, dr.L, dr.H, dr.Dk, dr.Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.S0, dr.o, NULL, NULL, NULL);
    return dotw((size_t)dr.B * dr.L * dr.H * dr.Dv, dr.gw, dr.o);
}
static void dr_setup(int B, int L, int H, int Dk, int Dv, int with_s0) {
    dr.B = B, dr.L = L, dr.H = H, dr.Dk = Dk, dr.Dv = Dv, dr.scale = 1.0f / sqrtf((float)Dk);
    size_t nk = (size_t)B * L * H * Dk, nv = (size_t)B * L * H * Dv;
    dr.q = rnd(nk, -1, 1), dr.k = rnd(nk, -0.6, 0.6), dr.v = rnd(nv, -1, 1), dr.beta = rnd((size_t)B * L * H, 0.1, 0.9);
    dr.S0 = with_s0 ? rnd((size_t)B * H * Dk * Dv, -1, 1) : NULL;
    dr.o = zeros(nv), dr.gw = rnd(nv, -1, 1);
}

START_TEST(delta_known_l1) {
    /* S0 = 0, L = 1: S = β k vᵀ, o = scale·β (q·k) v */
    dr_setup(1, 1, 1, 3, 2, 0);
    dr_loss();
    double qk = 0.0;
    for (int i = 0; i < 3; i++) qk += (double)dr.q[i] * dr.k[i];
    for (int j = 0; j < 2; j++) ck_assert_close(dr.o[j], dr.scale * dr.beta[0] * qk * dr.v[j], 1e-6, 1e-6);
}
END_TEST

START_TEST(delta_grad) {
    for (int with_s0 = 0; with_s0 < 2; with_s0++) {
        dr_setup(2, 6, 2, 3, 4, with_s0);
        size_t nk = (size_t)2 * 6 * 2 * 3, nv = (size_t)2 * 6 * 2 * 4, nb = 24, ns = (size_t)2 * 2 * 12;
        float *dq = zeros(nk), *dk = zeros(nk), *dv = zeros(nv), *db = zeros(nb), *dS0 = zeros(ns);
        ck_assert_int_eq(mlk_delta_bwd(2, 6, 2, 3, 4, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.S0, NULL, dr.gw, dq, dk,
                                       dv, db, dS0),
                         0);
        fd_check("delta dq", dr_loss, dr.q, nk, dq);
        fd_check("delta dk", dr_loss, dr.k, nk, dk);
        fd_check("delta dv", dr_loss, dr.v, nv, dv);
        fd_check("delta dbeta", dr_loss, dr.beta, nb, db);
        if (with_s0) fd_check("delta dS0", dr_loss, dr.S0, ns, dS0);
        /* with the forward's vold the gradients are the same */
        float *vo = zeros(nv), *g2[5] = {zeros(nk), zeros(nk), zeros(nv), zeros(nb), zeros(ns)};
        mlk_delta_fwd(2, 6, 2, 3, 4, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.S0, dr.o, NULL, vo, NULL);
        mlk_delta_bwd(2, 6, 2, 3, 4, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.S0, vo, dr.gw, g2[0], g2[1], g2[2], g2[3],
                      g2[4]);
        float *g1[5] = {dq, dk, dv, db, dS0};
        size_t sz[5] = {nk, nk, nv, nb, ns};
        for (int i = 0; i < 5; i++) ck_assert(max_abs_diff(sz[i], g1[i], g2[i]) <= 1e-6);
    }
}
END_TEST

START_TEST(delta_grad_reversed_states) {
    /* the backward that rebuilds S_{t-1} = S_t − k uᵀ instead of storing every state */
    mlk_delta_store_limit = 0;
    for (int with_s0 = 0; with_s0 < 2; with_s0++) {
        dr_setup(2, 6, 2, 3, 4, with_s0);
        size_t nk = (size_t)2 * 6 * 2 * 3, nv = (size_t)2 * 6 * 2 * 4, nb = 24, ns = (size_t)2 * 2 * 12;
        float *dq = zeros(nk), *dk = zeros(nk), *dv = zeros(nv), *db = zeros(nb), *dS0 = zeros(ns);
        ck_assert_int_eq(mlk_delta_bwd(2, 6, 2, 3, 4, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.S0, NULL, dr.gw, dq, dk,
                                       dv, db, dS0),
                         0);
        fd_check("delta dq (rev)", dr_loss, dr.q, nk, dq);
        fd_check("delta dk (rev)", dr_loss, dr.k, nk, dk);
        fd_check("delta dv (rev)", dr_loss, dr.v, nv, dv);
        fd_check("delta dbeta (rev)", dr_loss, dr.beta, nb, db);
        if (with_s0) fd_check("delta dS0 (rev)", dr_loss, dr.S0, ns, dS0);
    }
}
END_TEST

START_TEST(delta_grad_blocked) {
    /* Dk = 19, Dv = 18: one full register block of 16 columns plus a tail, both ways */
    dr_setup(1, 4, 1, 19, 18, 1);
    size_t nk = 4 * 19, nv = 4 * 18, ns = 19 * 18;
    float *dq = zeros(nk), *dk = zeros(nk), *dv = zeros(nv), *db = zeros(4), *dS0 = zeros(ns);
    ck_assert_int_eq(mlk_delta_bwd(1, 4, 1, 19, 18, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.S0, NULL, dr.gw, dq, dk, dv,
                                   db, dS0),
                     0);
    fd_check("delta dq (blocked)", dr_loss, dr.q, nk, dq);
    fd_check("delta dk (blocked)", dr_loss, dr.k, nk, dk);
    fd_check("delta dv (blocked)", dr_loss, dr.v, nv, dv);
    fd_check("delta dS0 (blocked)", dr_loss, dr.S0, ns, dS0);
}
END_TEST

START_TEST(delta_wide_matches_reference) {
    /* Dk·Dv above 16384 takes the whole-row path: compare with a direct double-precision recurrence */
    int L = 3, D = 130;
    dr_setup(1, L, 1, D, D, 1);
    dr_loss();
    double *S = malloc(sizeof(double) * D * D), *vo = malloc(sizeof(double) * D), *u = malloc(sizeof(double) * D);
    for (int i = 0; i < D * D; i++) S[i] = dr.S0[i];
    for (int t = 0; t < L; t++) {
        const float *q = dr.q + t * D, *k = dr.k + t * D, *v = dr.v + t * D;
        for (int j = 0; j < D; j++) {
            vo[j] = 0;
            for (int i = 0; i < D; i++) vo[j] += S[i * D + j] * k[i];
            u[j] = dr.beta[t] * (v[j] - vo[j]);
        }
        for (int i = 0; i < D; i++)
            for (int j = 0; j < D; j++) S[i * D + j] += k[i] * u[j];
        for (int j = 0; j < D; j++) {
            double o = 0;
            for (int i = 0; i < D; i++) o += S[i * D + j] * q[i];
            ck_assert_close(dr.o[t * D + j], dr.scale * o, 1e-4, 1e-4);
        }
    }
    free(S), free(vo), free(u);
}
END_TEST

START_TEST(delta_step_matches) {
    int B = 2, L = 7, H = 2, Dk = 3, Dv = 4;
    dr_setup(B, L, H, Dk, Dv, 1);
    size_t SS = (size_t)Dk * Dv;
    float *states = zeros((size_t)B * L * H * SS);
    mlk_delta_fwd(B, L, H, Dk, Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.S0, dr.o, states, NULL, NULL);
    float *S = zeros(B * H * SS), qt[12], kt[12], vt[16], bt[4], ot[16];
    memcpy(S, dr.S0, sizeof(float) * B * H * SS);
    for (int t = 0; t < L; t++) {
        for (int b = 0; b < B; b++) {
            size_t r = ((size_t)b * L + t) * H;
            memcpy(qt + b * H * Dk, dr.q + r * Dk, sizeof(float) * H * Dk);
            memcpy(kt + b * H * Dk, dr.k + r * Dk, sizeof(float) * H * Dk);
            memcpy(vt + b * H * Dv, dr.v + r * Dv, sizeof(float) * H * Dv);
            memcpy(bt + b * H, dr.beta + r, sizeof(float) * H);
        }
        ck_assert_int_eq(mlk_delta_step(B, H, Dk, Dv, dr.scale, S, qt, kt, vt, bt, ot), 0);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                size_t r = ((size_t)b * L + t) * H + h;
                for (int j = 0; j < Dv; j++) ck_assert_close(ot[(b * H + h) * Dv + j], dr.o[r * Dv + j], 1e-5, 1e-5);
                ck_assert(max_abs_diff(SS, S + (b * H + h) * SS, states + r * SS) <= 1e-5);
            }
    }
}
END_TEST

/* the quadratic form (S0 = 0) */
static double drq_loss(void) {
    mlk_delta_quad_fwd(dr.B, dr.L, dr.H, dr.Dk, dr.Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.o, NULL);
    return dotw((size_t)dr.B * dr.L * dr.H * dr.Dv, dr.gw, dr.o);
}

START_TEST(delta_quad_grad) {
    /* L = 18 and Dv = 17: a block of 16 positions (and columns) and a tail */
    int shapes[2][5] = {{2, 6, 2, 3, 4}, {1, 18, 1, 3, 17}};
    for (int c = 0; c < 2; c++) {
        int B = shapes[c][0], L = shapes[c][1], H = shapes[c][2], Dk = shapes[c][3], Dv = shapes[c][4];
        dr_setup(B, L, H, Dk, Dv, 0);
        size_t nk = (size_t)B * L * H * Dk, nv = (size_t)B * L * H * Dv, nb = (size_t)B * L * H;
        float *dq = zeros(nk), *dk = zeros(nk), *dv = zeros(nv), *db = zeros(nb), *vo = zeros(nv);
        ck_assert_int_eq(mlk_delta_quad_fwd(B, L, H, Dk, Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, dr.o, vo), 0);
        ck_assert_int_eq(mlk_delta_quad_bwd(B, L, H, Dk, Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, vo, dr.gw, dq, dk, dv,
                                            db),
                         0);
        fd_check("delta quad dq", drq_loss, dr.q, nk, dq);
        fd_check("delta quad dk", drq_loss, dr.k, nk, dk);
        fd_check("delta quad dv", drq_loss, dr.v, nv, dv);
        fd_check("delta quad dbeta", drq_loss, dr.beta, nb, db);
    }
}
END_TEST

START_TEST(delta_quad_matches_recurrence) {
    /* o, vold and every gradient of the two forms agree (L = 37, d = 64 is the paper's AR size) */
    int shapes[2][5] = {{2, 21, 2, 5, 19}, {2, 37, 1, 64, 64}};
    for (int c = 0; c < 2; c++) {
        int B = shapes[c][0], L = shapes[c][1], H = shapes[c][2], Dk = shapes[c][3], Dv = shapes[c][4];
        ck_assert(mlk_delta_quad_ok(L, Dk, Dv));
        dr_setup(B, L, H, Dk, Dv, 0);
        mlk_l2norm_fwd(B * L * H, Dk, 1e-6f, dr.k, dr.k); /* unit keys, as in the model: a stable rule */
        size_t nk = (size_t)B * L * H * Dk, nv = (size_t)B * L * H * Dv, nb = (size_t)B * L * H;
        size_t sz[4] = {nk, nk, nv, nb};
        float *o[2] = {zeros(nv), zeros(nv)}, *vo[2] = {zeros(nv), zeros(nv)}, *g[2][4];
        for (int f = 0; f < 2; f++)
            for (int i = 0; i < 4; i++) g[f][i] = zeros(sz[i]);
        mlk_delta_quad_fwd(B, L, H, Dk, Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, o[0], vo[0]);
        mlk_delta_fwd(B, L, H, Dk, Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, NULL, o[1], NULL, vo[1], NULL);
        ck_assert(max_abs_diff(nv, o[0], o[1]) <= 1e-5);
        ck_assert(max_abs_diff(nv, vo[0], vo[1]) <= 1e-5);
        mlk_delta_quad_bwd(B, L, H, Dk, Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, vo[0], dr.gw, g[0][0], g[0][1], g[0][2],
                           g[0][3]);
        mlk_delta_bwd(B, L, H, Dk, Dv, dr.scale, dr.q, dr.k, dr.v, dr.beta, NULL, vo[1], dr.gw, g[1][0], g[1][1],
                      g[1][2], g[1][3], NULL);
        for (int i = 0; i < 4; i++) ck_assert(max_abs_diff(sz[i], g[0][i], g[1][i]) <= 1e-4);
    }
}
END_TEST

static float *l2x, *l2w, l2y[12];
static double l2_loss(void) {
    mlk_l2norm_fwd(3, 4, 1e-6f, l2x, l2y);
    return dotw(12, l2w, l2y);
}
START_TEST(l2norm_grad) {
    l2x = rnd(12, -1, 1), l2w = rnd(12, -1, 1);
    float dx[12];
    mlk_l2norm_bwd(3, 4, 1e-6f, l2x, l2w, dx);
    fd_check("l2norm dx", l2_loss, l2x, 12, dx);
    l2_loss();
    double n2 = 0.0;
    for (int j = 0; j < 4; j++) n2 += (double)l2y[j] * l2y[j];
    ck_assert_close(n2, 1.0, 1e-5, 0);
}
END_TEST

/* ================= H3 kernels ================= */

static struct {
    int C, N, L;
    float *B, *Cs, *K, *gw;
} sh;
static double sh_loss(void) {
    mlk_h3_shift_kernel_fwd(sh.C, sh.N, sh.L, sh.B, sh.Cs, sh.K);
    return dotw((size_t)sh.L * sh.C, sh.gw, sh.K);
}
START_TEST(h3_shift_kernel) {
    sh.C = 3, sh.N = 8, sh.L = 6;
    sh.B = zeros(24), sh.Cs = rnd(24, -1, 1), sh.K = zeros(18), sh.gw = rnd(18, -1, 1);
    for (int c = 0; c < 3; c++) sh.B[c * 8] = 1.0f; /* init B = e0 ⇒ K[s] = C[s] */
    sh_loss();
    for (int s = 0; s < 6; s++)
        for (int c = 0; c < 3; c++) ck_assert_close(sh.K[s * 3 + c], sh.Cs[c * 8 + s], 0, 0);
    sh.B = rnd(24, -1, 1);
    float dB[24], dC[24];
    mlk_h3_shift_kernel_bwd(3, 8, 6, sh.B, sh.Cs, sh.gw, dB, dC);
    fd_check("shift dB", sh_loss, sh.B, 24, dB);
    fd_check("shift dC", sh_loss, sh.Cs, 24, dC);
}
END_TEST

static struct {
    int H, M, L;
    float *C, *logdt, *B, *iar, *aim, *K, *gw;
} sd;
static double sd_loss(void) {
    mlk_s4d_kernel_fwd(sd.H, sd.M, sd.L, sd.C, sd.logdt, sd.B, sd.iar, sd.aim, sd.K);
    return dotw((size_t)sd.L * sd.H, sd.gw, sd.K);
}
static void sd_setup(int H, int M, int L) {
    sd.H = H, sd.M = M, sd.L = L;
    sd.C = rnd((size_t)H * M * 2, -1, 1), sd.B = rnd((size_t)H * M * 2, 0.5, 1.5);
    sd.logdt = rnd(H, log(1e-2), log(0.5)), sd.iar = rnd((size_t)H * M, -1.5, 0.0);
    sd.aim = rnd((size_t)H * M, 0.0, 3.0), sd.K = zeros((size_t)L * H), sd.gw = rnd((size_t)L * H, -1, 1);
}
START_TEST(s4d_kernel_known) {
    /* one mode, hand-computed in double: K[s] = 2 Re(C̃ λ^s) */
    sd_setup(1, 1, 5);
    sd_loss();
    double dt = exp(sd.logdt[0]);
    double complex A = -exp(sd.iar[0]) + I * sd.aim[0], w = A * dt;
    double complex lam = (1.0 + w / 2.0) / (1.0 - w / 2.0);
    double complex ct = (sd.B[0] + I * sd.B[1]) * (sd.C[0] + I * sd.C[1]) * dt / (1.0 - w / 2.0);
    for (int s = 0; s < 5; s++) ck_assert_close(sd.K[s], 2.0 * creal(ct * cpow(lam, s)), 1e-6, 1e-5);
}
END_TEST

START_TEST(s4d_kernel_grad) {
    sd_setup(2, 3, 6);
    float dC[12], dB[12], dlog[2], diar[6], daim[6];
    mlk_s4d_kernel_bwd(2, 3, 6, sd.C, sd.logdt, sd.B, sd.iar, sd.aim, sd.gw, dC, dlog, dB, diar, daim);
    fd_check("s4d dC", sd_loss, sd.C, 12, dC);
    fd_check("s4d dB", sd_loss, sd.B, 12, dB);
    fd_check("s4d dlog_dt", sd_loss, sd.logdt, 2, dlog);
    fd_check("s4d dinv_A_real", sd_loss, sd.iar, 6, diar);
    fd_check("s4d dA_imag", sd_loss, sd.aim, 6, daim);
}
END_TEST

START_TEST(h3_kernels_whole_tiles_grad) {
    /* the shift kernel's lag tiles (8) and position tiles (64) with their edges: N = 90, L = 19 */
    sh.C = 2, sh.N = 90, sh.L = 19;
    sh.B = rnd(180, -1, 1), sh.Cs = rnd(180, -1, 1), sh.K = zeros(38), sh.gw = rnd(38, -1, 1);
    sh_loss();
    for (int s = 0; s < 19; s++)
        for (int c = 0; c < 2; c++) {
            double k = 0.0;
            for (int n = 0; n + s < 90; n++) k += (double)sh.B[c * 90 + n] * sh.Cs[c * 90 + n + s];
            ck_assert_close(sh.K[s * 2 + c], k, 1e-5, 1e-5);
        }
    float *dB = zeros(180), *dC = zeros(180);
    mlk_h3_shift_kernel_bwd(2, 90, 19, sh.B, sh.Cs, sh.gw, dB, dC);
    fd_check("shift tiles dB", sh_loss, sh.B, 180, dB);
    fd_check("shift tiles dC", sh_loss, sh.Cs, 180, dC);
    /* S4D: a whole block of 16 modes and a padded one (M = 19), L = 9 */
    sd_setup(2, 19, 9);
    float *dCc = zeros(76), *dBc = zeros(76), *dlog = zeros(2), *diar = zeros(38), *daim = zeros(38);
    mlk_s4d_kernel_bwd(2, 19, 9, sd.C, sd.logdt, sd.B, sd.iar, sd.aim, sd.gw, dCc, dlog, dBc, diar, daim);
    fd_check("s4d tiles dC", sd_loss, sd.C, 76, dCc);
    fd_check("s4d tiles dB", sd_loss, sd.B, 76, dBc);
    fd_check("s4d tiles dlog_dt", sd_loss, sd.logdt, 2, dlog);
    fd_check("s4d tiles dinv_A_real", sd_loss, sd.iar, 38, diar);
    fd_check("s4d tiles dA_imag", sd_loss, sd.aim, 38, daim);
}
END_TEST

START_TEST(h3_kernels_deterministic_threads) {
    /* sizes above the threading threshold: the same bits on 1 and 2 threads */
    int C = 8, N = 256, L = 37, H = 4, M = 64;
    float *Bs = rnd((size_t)C * N, -1, 1), *Cs = rnd((size_t)C * N, -1, 1), *dKs = rnd((size_t)L * C, -1, 1);
    sd_setup(H, M, L);
    float *r[2][8];
    size_t sz[8] = {(size_t)L * C, (size_t)C * N, (size_t)C * N, (size_t)L * H, (size_t)H * M * 2, H,
                    (size_t)H * M * 2, (size_t)H * M};
    for (int th = 0; th < 2; th++) {
        ml_set_threads(th + 1);
        float **g = r[th];
        for (int i = 0; i < 8; i++) g[i] = zeros(sz[i]);
        mlk_h3_shift_kernel_fwd(C, N, L, Bs, Cs, g[0]);
        mlk_h3_shift_kernel_bwd(C, N, L, Bs, Cs, dKs, g[1], g[2]);
        ck_assert_int_eq(mlk_s4d_kernel_fwd(H, M, L, sd.C, sd.logdt, sd.B, sd.iar, sd.aim, g[3]), 0);
        ck_assert_int_eq(mlk_s4d_kernel_bwd(H, M, L, sd.C, sd.logdt, sd.B, sd.iar, sd.aim, sd.gw, g[4], g[5], g[6],
                                            g[7], NULL),
                         0);
    }
    ml_set_threads(1);
    for (int i = 0; i < 8; i++) ck_assert_msg(memcmp(r[0][i], r[1][i], sizeof(float) * sz[i]) == 0, "output %d", i);
}
END_TEST

START_TEST(s4d_step_matches_longconv) {
    /* recurrent diagonal SSM over P = 4 channels per head equals LC with the generated kernel */
    int B = 2, H = 2, M = 8, L = 7, P = 4, C = H * P;
    sd_setup(H, M, L);
    for (int i = 0; i < H * M; i++) sd.aim[i] = (float)(3.14159265358979 * (i % M)); /* S4D-Lin imaginary parts */
    sd_loss();
    float *u = rnd((size_t)B * L * C, -1, 1), *Dh = rnd(H, -1, 1), *y = zeros((size_t)B * L * C);
    mlk_longconv_fwd(B, L, C, P, u, sd.K, Dh, y);
    float *x = zeros((size_t)B * H * P * M * 2), ut[16], yt[16];
    for (int t = 0; t < L; t++) {
        for (int b = 0; b < B; b++) memcpy(ut + b * C, u + ((size_t)b * L + t) * C, sizeof(float) * C);
        mlk_s4d_step(B, H, P, M, sd.C, sd.logdt, sd.B, sd.iar, sd.aim, Dh, x, ut, yt);
        for (int b = 0; b < B; b++)
            for (int c = 0; c < C; c++) ck_assert_close(yt[b * C + c], y[((size_t)b * L + t) * C + c], 1e-5, 1e-5);
    }
}
END_TEST

static struct {
    int BL, H;
    float *a, *b, *o, *gw;
} hg;
static double outer_loss(void) {
    mlk_h3_outer_fwd(hg.BL, hg.H, hg.a, hg.b, hg.o);
    return dotw((size_t)hg.BL * 4 * hg.H, hg.gw, hg.o);
}
static double gate_loss(void) {
    mlk_h3_gate_fwd(hg.BL, hg.H, hg.a, hg.b, hg.o);
    return dotw((size_t)hg.BL * 2 * hg.H, hg.gw, hg.o);
}
START_TEST(h3_outer_and_gate) {
    hg.BL = 3, hg.H = 2;
    hg.a = rnd(12, -1, 1), hg.b = rnd(12, -1, 1), hg.o = zeros(24), hg.gw = rnd(24, -1, 1);
    outer_loss();
    ck_assert_close(hg.o[1 * 4 + 1 * 2 + 0], hg.a[2 + 1] * hg.b[2 + 0], 0, 0); /* h=1, d1=1, d2=0 */
    float da[12], db[24];
    mlk_h3_outer_bwd(3, 2, hg.a, hg.b, hg.gw, da, db);
    fd_check("outer dk", outer_loss, hg.a, 12, da);
    fd_check("outer dv", outer_loss, hg.b, 12, db);
    hg.b = rnd(24, -1, 1);
    gate_loss();
    /* o[d2*H + h] = Σ_d1 q[2h+d1]·yk[h*4+d1*2+d2]: output (d2=1, h=0) sits at channel H = 2 */
    ck_assert_close(hg.o[2], hg.a[0] * hg.b[1] + hg.a[1] * hg.b[3], 1e-7, 0);
    mlk_h3_gate_bwd(3, 2, hg.a, hg.b, hg.gw, da, db);
    fd_check("gate dq", gate_loss, hg.a, 12, da);
    fd_check("gate dyk", gate_loss, hg.b, 24, db);
}
END_TEST

/* ---- the linear layers' product ---- */

/* y = x·wᵀ + bias against a double-precision sum, and the bits of a row or a column alone: the
 * rows from a (x from row a), the columns from c (w and bias from row c) and at 1 and 2 threads
 * are the whole product's, for tails of every size (rows past a tile of 4, columns past a
 * vector of 16 and a panel of 64, K = 0 and odd K); mlk_gemm_nn on wᵀ gives the same bits. */
static void gemm_check(int64_t M, int64_t N, int64_t K, bool bias) {
    float *x = rnd((size_t)(M * K), -1, 1), *w = rnd((size_t)(N * K), -1, 1), *b = bias ? rnd((size_t)N, -1, 1) : NULL;
    float *y = zeros((size_t)(M * N)), *part = zeros((size_t)(M * N));
    ck_assert_int_eq(mlk_gemm_nt(M, N, K, x, w, b, y), 0);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = b ? b[j] : 0.0, mag = fabs(ref);
            for (int64_t k = 0; k < K; k++) {
                double p = (double)x[i * K + k] * w[j * K + k];
                ref += p, mag += fabs(p);
            }
            ck_assert_msg(fabs(y[i * N + j] - ref) <= 1e-6 * (mag + 1.0),
                          "gemm %lldx%lldx%lld: y[%lld,%lld] = %g, want %g", (long long)M, (long long)N, (long long)K,
                          (long long)i, (long long)j, y[i * N + j], ref);
        }
    for (int64_t a = 1; a < M; a += 2) {
        ck_assert_int_eq(mlk_gemm_nt(M - a, N, K, x + a * K, w, b, part), 0);
        ck_assert_msg(!memcmp(part, y + a * N, sizeof(float) * (size_t)((M - a) * N)),
                      "gemm %lldx%lldx%lld: rows from %lld alone are not the bits", (long long)M, (long long)N,
                      (long long)K, (long long)a);
    }
    if (!b) { /* x·w with w given as (K, N): the same arithmetic, so the same bits */
        float *wk = zeros((size_t)(K * N));
        for (int64_t j = 0; j < N; j++)
            for (int64_t k = 0; k < K; k++) wk[k * N + j] = w[j * K + k];
        ck_assert_int_eq(mlk_gemm_nn(M, N, K, x, wk, part), 0);
        ck_assert_msg(!memcmp(part, y, sizeof(float) * (size_t)(M * N)), "gemm_nn %lldx%lldx%lld: not gemm_nt's bits",
                      (long long)M, (long long)N, (long long)K);
    }
    for (int64_t c = 1; c < N; c += 7) {
        ck_assert_int_eq(mlk_gemm_nt(M, N - c, K, x, w + c * K, b ? b + c : NULL, part), 0);
        for (int64_t i = 0; i < M; i++)
            ck_assert_msg(!memcmp(part + i * (N - c), y + i * N + c, sizeof(float) * (size_t)(N - c)),
                          "gemm %lldx%lldx%lld: columns from %lld alone are not the bits", (long long)M, (long long)N,
                          (long long)K, (long long)c);
    }
    free_tracked(); /* this check's buffers: a hundred checks would outgrow the tracker */
}

START_TEST(gemm_rows_alone) {
    const int64_t Ms[] = {1, 3, 4, 6, 9}, Ns[] = {1, 15, 17, 64, 70}, Ks[] = {0, 1, 7, 16};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            for (int c = 0; c < 4; c++) gemm_check(Ms[a], Ns[b], Ks[c], (a + b + c) % 2);
    ml_set_threads(2); /* above the threading threshold, both ways of splitting: rows and panels */
    gemm_check(301, 130, 40, true);
    gemm_check(9, 1100, 120, false);
    int64_t M = 301, N = 130, K = 40;
    float *x = rnd((size_t)(M * K), -1, 1), *w = rnd((size_t)(N * K), -1, 1);
    float *y2 = zeros((size_t)(M * N)), *y1 = zeros((size_t)(M * N));
    ck_assert_int_eq(mlk_gemm_nt(M, N, K, x, w, NULL, y2), 0);
    ml_set_threads(1);
    ck_assert_int_eq(mlk_gemm_nt(M, N, K, x, w, NULL, y1), 0);
    ck_assert_msg(!memcmp(y1, y2, sizeof(float) * (size_t)(M * N)), "gemm: 1 and 2 threads differ");
}
END_TEST

/* The general product (mlk_gemm: attention's per-sequence products, matmul) and the weight
 * gradient (mlk_gemm_tn), with strided operands: against a double-precision sum, y's padding
 * untouched, and the bits of rows and columns computed alone equal to the whole product's. x is
 * read as (M, K) with strides (xr, xc) (xc > 1: a transposed x, as dSᵀ·Q and Pᵀ·dctx read it);
 * w as (N, K) or, w_kn, (K, N), rows ldw apart; y rows ldy apart; y = alpha·Σ, or y += Σ. */
static void gemm_general_check(int64_t M, int64_t N, int64_t K, bool x_trans, bool w_kn, float alpha,
                               bool accumulate) {
    int64_t xr = x_trans ? 1 : K + 3, xc = x_trans ? M + 2 : 1, ldw = (w_kn ? N : K) + 5, ldy = N + 4;
    int64_t xn = x_trans ? (K ? K : 1) * xc : (M ? M : 1) * xr, wn = (w_kn ? (K ? K : 1) : (N ? N : 1)) * ldw;
    float *x = rnd((size_t)xn, -1, 1), *w = rnd((size_t)wn, -1, 1);
    float *y0 = rnd((size_t)((M ? M : 1) * ldy), -1, 1), *y = zeros((size_t)((M ? M : 1) * ldy));
    float *part = zeros((size_t)((M ? M : 1) * ldy));
    memcpy(y, y0, sizeof(float) * (size_t)((M ? M : 1) * ldy));
    ck_assert_int_eq(mlk_gemm(M, N, K, x, xr, xc, w, ldw, w_kn, alpha, accumulate, y, ldy), 0);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldy; j++) {
            if (j >= N) { /* the padding between y's rows is never written */
                ck_assert_msg(!memcmp(&y[i * ldy + j], &y0[i * ldy + j], sizeof(float)), "gemm: wrote y's padding");
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)x[i * xr + k * xc] * (w_kn ? w[k * ldw + j] : w[j * ldw + k]);
                ref += p, mag += fabs(p);
            }
            ref *= alpha, mag *= fabs(alpha);
            if (accumulate) ref += y0[i * ldy + j], mag += fabs(y0[i * ldy + j]);
            ck_assert_msg(fabs(y[i * ldy + j] - ref) <= 1e-6 * (mag + 1.0),
                          "gemm %lldx%lldx%lld (x%s, w%s): y[%lld,%lld] = %g, want %g", (long long)M, (long long)N,
                          (long long)K, x_trans ? "ᵀ" : "", w_kn ? " (K,N)" : " (N,K)", (long long)i, (long long)j,
                          y[i * ldy + j], ref);
        }
    for (int64_t a = 1; a < M; a += 2) { /* rows from a alone */
        memcpy(part, y0, sizeof(float) * (size_t)(M * ldy));
        ck_assert_int_eq(mlk_gemm(M - a, N, K, x + a * xr, xr, xc, w, ldw, w_kn, alpha, accumulate, part + a * ldy, ldy),
                         0);
        ck_assert_msg(!memcmp(part + a * ldy, y + a * ldy, sizeof(float) * (size_t)((M - a) * ldy)),
                      "gemm %lldx%lldx%lld: rows from %lld alone are not the bits", (long long)M, (long long)N,
                      (long long)K, (long long)a);
    }
    for (int64_t c = 1; c < N; c += 5) { /* columns from c alone */
        memcpy(part, y0, sizeof(float) * (size_t)(M * ldy));
        ck_assert_int_eq(
            mlk_gemm(M, N - c, K, x, xr, xc, w + (w_kn ? c : c * ldw), ldw, w_kn, alpha, accumulate, part + c, ldy), 0);
        for (int64_t i = 0; i < M; i++)
            ck_assert_msg(!memcmp(part + i * ldy + c, y + i * ldy + c, sizeof(float) * (size_t)(ldy - c)),
                          "gemm %lldx%lldx%lld: columns from %lld alone are not the bits", (long long)M, (long long)N,
                          (long long)K, (long long)c);
    }
    free_tracked();
}

START_TEST(gemm_general_rows_alone) {
    const int64_t Ms[] = {1, 5, 37}, Ns[] = {1, 17, 70}, Ks[] = {0, 1, 37};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 3; c++)
                for (int v = 0; v < 4; v++)
                    gemm_general_check(Ms[a], Ns[b], Ks[c], v & 1, v & 2, (a + b + c + v) % 3 ? 1.0f : 0.125f,
                                       (a + c + v) % 2);
    gemm_general_check(0, 17, 13, true, false, 1.0f, true); /* no rows: nothing written */
}
END_TEST

/* The weight gradient dW (+)= dyᵀ·x: mlk_gemm_tn is mlk_gemm on the transposed dy, bit for bit;
 * the same bits at 1 and 2 threads, above the threading threshold, splitting rows and panels;
 * an output row or column computed alone has the bits it has in the whole gradient. */
static void gemm_tn_check(int64_t M, int64_t N, int64_t K, bool accumulate) {
    float *dy = rnd((size_t)((K ? K : 1) * M), -1, 1), *x = rnd((size_t)((K ? K : 1) * N), -1, 1);
    float *y0 = rnd((size_t)(M * N), -1, 1), *y1 = zeros((size_t)(M * N)), *y2 = zeros((size_t)(M * N));
    float *ref = zeros((size_t)(M * N));
    memcpy(ref, y0, sizeof(float) * (size_t)(M * N));
    ck_assert_int_eq(mlk_gemm(M, N, K, dy, 1, M, x, N, true, 1.0f, accumulate, ref, N), 0);
    for (int t = 1; t <= 2; t++) {
        float *y = t == 1 ? y1 : y2;
        ml_set_threads(t);
        memcpy(y, y0, sizeof(float) * (size_t)(M * N));
        ck_assert_int_eq(mlk_gemm_tn(M, N, K, dy, x, accumulate, y), 0);
        ck_assert_msg(!memcmp(y, ref, sizeof(float) * (size_t)(M * N)),
                      "gemm_tn %lldx%lldx%lld at %d threads: not mlk_gemm's bits", (long long)M, (long long)N,
                      (long long)K, t);
    }
    ml_set_threads(1);
    int64_t i = M / 3, j = N / 2; /* output row i alone: dy's column i; output column j alone: x's column j */
    float *row = zeros((size_t)N), *col = zeros((size_t)M);
    memcpy(row, y0 + i * N, sizeof(float) * (size_t)N);
    for (int64_t r = 0; r < M; r++) col[r] = y0[r * N + j];
    ck_assert_int_eq(mlk_gemm(1, N, K, dy + i, 1, M, x, N, true, 1.0f, accumulate, row, N), 0);
    ck_assert_int_eq(mlk_gemm(M, 1, K, dy, 1, M, x + j, N, true, 1.0f, accumulate, col, 1), 0);
    ck_assert_msg(!memcmp(row, ref + i * N, sizeof(float) * (size_t)N), "gemm_tn: a row alone is not the bits");
    for (int64_t r = 0; r < M; r++)
        ck_assert_msg(!memcmp(&col[r], &ref[r * N + j], sizeof(float)), "gemm_tn: a column alone is not the bits");
    free_tracked();
}

START_TEST(gemm_tn_threads_and_rows) {
    gemm_tn_check(7, 19, 5, false);
    gemm_tn_check(130, 67, 301, true); /* more row blocks than panels: rows split */
    gemm_tn_check(9, 1100, 120, false); /* the tied head's shape: panels split */
    gemm_tn_check(33, 40, 0, true);
}
END_TEST

/* w as (K, N) of one panel (N a multiple of 16, at most 64) is read in place, not packed: rows
 * adjacent (the weight gradient up to D = 64), or ldw apart when K <= 64 (attention's V rows),
 * unaligned too. Its bits are those of the packed path: the same product with w given transposed
 * as (N, K), which is always packed; the weight gradient's shape at 1 and 2 threads as well. */
static void gemm_in_place_check(int64_t M, int64_t N, int64_t K, int64_t ldw, int64_t shift, bool x_trans) {
    int64_t xr = x_trans ? 1 : K, xc = x_trans ? M : 1;
    float *x = rnd((size_t)(M * (K ? K : 1)), -1, 1), *wbuf = rnd((size_t)((K ? K : 1) * ldw + shift), -1, 1);
    const float *w = wbuf + shift; /* shift 1: every row unaligned */
    float *wt = zeros((size_t)(N * (K ? K : 1))), *y = zeros((size_t)(M * N)), *ref = zeros((size_t)(M * N));
    for (int64_t k = 0; k < K; k++)
        for (int64_t j = 0; j < N; j++) wt[j * K + k] = w[k * ldw + j];
    ck_assert_int_eq(mlk_gemm(M, N, K, x, xr, xc, wt, K, false, 1.0f, false, ref, N), 0);
    for (int t = 1; t <= 2; t++) {
        ml_set_threads(t);
        memset(y, 0, sizeof(float) * (size_t)(M * N));
        ck_assert_int_eq(mlk_gemm(M, N, K, x, xr, xc, w, ldw, true, 1.0f, false, y, N), 0);
        ck_assert_msg(!memcmp(y, ref, sizeof(float) * (size_t)(M * N)),
                      "gemm in place %lldx%lldx%lld, ldw %lld, shift %lld, %d threads: not the packed path's bits",
                      (long long)M, (long long)N, (long long)K, (long long)ldw, (long long)shift, t);
    }
    ml_set_threads(1);
    free_tracked();
}

START_TEST(gemm_in_place_panel) {
    const int64_t Ns[] = {16, 32, 48, 64}, Ks[] = {1, 37, 64};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++) {
            gemm_in_place_check(37, Ns[a], Ks[b], Ns[a], 0, false);       /* rows adjacent */
            gemm_in_place_check(5, Ns[a], Ks[b], 3 * Ns[a] + 1, 1, true); /* rows apart, unaligned */
        }
    gemm_in_place_check(9, 64, 65, 200, 0, false); /* rows apart and K > 64: packed */
    gemm_in_place_check(256, 64, 1184, 64, 0, true); /* fc2's weight gradient at D = 64, threads split rows */
}
END_TEST

/* A transposed x (the weight gradient's dyᵀ) is summed in blocks of k where K is long: its bits
 * are those of the same x given untransposed, summed in one pass, below, at and past a block's
 * end, with alpha and accumulate, under both blockings, and at 2 threads splitting rows and
 * panels, each thread with its own partial sums. */
static void gemm_k_blocks_check(int64_t M, int64_t N, int64_t K, bool w_kn, float alpha, bool accumulate) {
    int64_t xc = M + 1, ldw = w_kn ? N : K + 2, ldy = N + 1;
    float *xt = rnd((size_t)(K * xc), -1, 1), *x = zeros((size_t)(M * K)), *w = rnd((size_t)((w_kn ? K : N) * ldw), -1, 1);
    float *y0 = rnd((size_t)(M * ldy), -1, 1), *y1 = zeros((size_t)(M * ldy));
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) x[i * K + k] = xt[k * xc + i];
    memcpy(y1, y0, sizeof(float) * (size_t)(M * ldy));
    ck_assert_int_eq(mlk_gemm(M, N, K, x, K, 1, w, ldw, w_kn, alpha, accumulate, y0, ldy), 0);
    ck_assert_int_eq(mlk_gemm(M, N, K, xt, 1, xc, w, ldw, w_kn, alpha, accumulate, y1, ldy), 0);
    ck_assert_msg(!memcmp(y0, y1, sizeof(float) * (size_t)(M * ldy)),
                  "gemm %lldx%lldx%lld (w_kn %d): x transposed, summed in blocks of k, is not x's bits", (long long)M,
                  (long long)N, (long long)K, w_kn);
    free_tracked();
}

START_TEST(gemm_k_blocks_same_bits) {
    const int64_t Ks[] = {63, 64, 65, 257, 700}, Ms[] = {3, 16, 37}, Ns[] = {17, 64, 70};
    for (int b = 0; b < 2; b++) {
        mlk_force_avx2_blocking(b);
        for (int c = 0; c < 5; c++)
            for (int a = 0; a < 3; a++)
                for (int n = 0; n < 3; n++)
                    gemm_k_blocks_check(Ms[a], Ns[n], Ks[c], (a + n) % 2, (c + n) % 2 ? 1.0f : 0.375f, (a + c) % 2);
    }
    mlk_force_avx2_blocking(-1);
    gemm_tn_check(130, 67, 601, true); /* 1 and 2 threads: rows split */
    gemm_tn_check(9, 300, 520, false); /* panels split */
}
END_TEST

/* The two register blockings of the tile (AVX-512's 4 x 4 vectors of 16, AVX2's 4 x 2 of 8 per
 * vector of 16) give the same bits on whichever machine runs this, for every tail and form; and
 * the checks above hold under the blocking this machine does not pick by itself. */
static void gemm_blockings_check(int64_t M, int64_t N, int64_t K, bool x_trans, bool w_kn, float alpha, bool accumulate,
                                 int threads) {
    int64_t xr = x_trans ? 1 : K, xc = x_trans ? M : 1, ldw = w_kn ? N + 3 : K + 1, ldy = N + 2;
    float *x = rnd((size_t)(M * (K ? K : 1)), -1, 1), *w = rnd((size_t)((w_kn ? K : N) * ldw + 1), -1, 1);
    float *y0 = rnd((size_t)(M * ldy), -1, 1), *y1 = zeros((size_t)(M * ldy));
    memcpy(y1, y0, sizeof(float) * (size_t)(M * ldy));
    ml_set_threads(threads);
    mlk_force_avx2_blocking(0);
    ck_assert_int_eq(mlk_gemm(M, N, K, x, xr, xc, w, ldw, w_kn, alpha, accumulate, y0, ldy), 0);
    mlk_force_avx2_blocking(1);
    ck_assert_int_eq(mlk_gemm(M, N, K, x, xr, xc, w, ldw, w_kn, alpha, accumulate, y1, ldy), 0);
    mlk_force_avx2_blocking(-1);
    ml_set_threads(1);
    ck_assert_msg(!memcmp(y0, y1, sizeof(float) * (size_t)(M * ldy)),
                  "gemm %lldx%lldx%lld (x_trans %d, w_kn %d, %d threads): the AVX2 blocking's bits differ", (long long)M,
                  (long long)N, (long long)K, x_trans, w_kn, threads);
    free_tracked();
}

START_TEST(gemm_blockings_same_bits) {
    const int64_t Ms[] = {1, 3, 4, 6, 37}, Ns[] = {1, 15, 17, 40, 64, 70}, Ks[] = {0, 1, 16, 37};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 6; b++)
            for (int c = 0; c < 4; c++)
                for (int v = 0; v < 4; v++)
                    gemm_blockings_check(Ms[a], Ns[b], Ks[c], v & 1, v & 2, (a + b + v) % 3 ? 1.0f : 0.125f,
                                         (a + c + v) % 2, 1);
    gemm_blockings_check(301, 130, 40, false, false, 1.0f, false, 2); /* threads split rows */
    gemm_blockings_check(9, 1100, 120, false, true, 1.0f, true, 2);   /* threads split panels */
    gemm_blockings_check(256, 64, 300, true, true, 1.0f, true, 2);    /* a weight gradient */
    for (int b = 0; b < 2; b++) { /* the checks against double sums, rows and columns alone */
        mlk_force_avx2_blocking(b);
        gemm_check(9, 70, 37, true);
        gemm_check(6, 17, 16, false);
        gemm_tn_check(130, 67, 301, true);
        gemm_in_place_check(37, 48, 37, 48, 0, false);
        gemm_in_place_check(5, 64, 64, 193, 1, true);
    }
    mlk_force_avx2_blocking(-1);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("all");
    tcase_add_checked_fixture(tc, NULL, free_tracked);
    tcase_add_test(tc, conv1d_known_k1);
    tcase_add_test(tc, conv1d_known_k3);
    tcase_add_test(tc, conv1d_grad);
    tcase_add_test(tc, conv1d_row_stride);
    tcase_add_test(tc, conv1d_step_matches);
    tcase_add_test(tc, longconv_known);
    tcase_add_test(tc, longconv_grad);
    tcase_add_test(tc, longconv_blockings_same_bits);
    tcase_add_test(tc, longconv_step_matches);
    tcase_add_test(tc, longconv_tiles_match_direct);
    tcase_add_test(tc, sscan_known_l1);
    tcase_add_test(tc, sscan_known_decay);
    tcase_add_test(tc, sscan_grad);
    tcase_add_test(tc, sscan_saved_states_same_grad);
    tcase_add_test(tc, sscan_step_and_chunks_match);
    tcase_add_test(tc, sscan_attention_reproduces_output);
    tcase_add_test(tc, sscan_deterministic_threads);
    tcase_add_test(tc, other_kernels_deterministic_threads);
    tcase_add_test(tc, taylor_feature_dot);
    tcase_add_test(tc, taylor_grad);
    tcase_add_test(tc, based_known_l1);
    tcase_add_test(tc, based_grad);
    tcase_add_test(tc, based_step_and_pattern);
    tcase_add_test(tc, delta_known_l1);
    tcase_add_test(tc, delta_grad);
    tcase_add_test(tc, delta_grad_reversed_states);
    tcase_add_test(tc, delta_grad_blocked);
    tcase_add_test(tc, delta_wide_matches_reference);
    tcase_add_test(tc, delta_step_matches);
    tcase_add_test(tc, delta_quad_grad);
    tcase_add_test(tc, delta_quad_matches_recurrence);
    tcase_add_test(tc, l2norm_grad);
    tcase_add_test(tc, h3_shift_kernel);
    tcase_add_test(tc, s4d_kernel_known);
    tcase_add_test(tc, s4d_kernel_grad);
    tcase_add_test(tc, s4d_step_matches_longconv);
    tcase_add_test(tc, h3_kernels_whole_tiles_grad);
    tcase_add_test(tc, h3_kernels_deterministic_threads);
    tcase_add_test(tc, h3_outer_and_gate);
    tcase_add_test(tc, gemm_rows_alone);
    tcase_add_test(tc, gemm_general_rows_alone);
    tcase_add_test(tc, gemm_tn_threads_and_rows);
    tcase_add_test(tc, gemm_in_place_panel);
    tcase_add_test(tc, gemm_blockings_same_bits);
    tcase_add_test(tc, gemm_k_blocks_same_bits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
