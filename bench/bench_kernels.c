/* Forward and backward time of each mixer kernel at the paper's sizes (B=32, L=37, D=64 and 256;
 * Mamba E=2D, N=16). Usage: bench_kernels [threads] [reps] [L]: L=359 is ATR (10, 20)'s documents.
 * Prints the best of `reps` runs in ms (best-of filters out the other tenants of a shared machine). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "host/process.h"
#include "core/threads.h"
#include "ops/kernels.h"

/* On one thread the process CPU time (robust when the machine is shared: time spent descheduled
 * is not counted); on more, wall time. */
static clockid_t clock_id = CLOCK_MONOTONIC;
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static unsigned long long seed = 0x9E3779B97F4A7C15ULL;
static float *buf(size_t n, double lo, double hi) {
    float *p = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        p[i] = (float)(lo + (hi - lo) * (double)(seed >> 11) / 9007199254740992.0);
    }
    return p;
}

static int reps = 20;
#define TIME(var, stmt)                             \
    do {                                            \
        var = INFINITY;                             \
        for (int r_ = 0; r_ < reps; r_++) {         \
            double t0_ = now_ms();                  \
            stmt;                                   \
            double dt_ = now_ms() - t0_;            \
            if (dt_ < var) var = dt_;               \
        }                                           \
    } while (0)

static void row(const char *name, int D, double f, double b) {
    printf("%-34s D=%-4d fwd %8.3f ms   bwd %8.3f ms   total %8.3f ms\n", name, D, f, b, f + b);
}

static int L = 37;

static void bench(int D) {
    const int B = 32, E = 2 * D, N = 16, K = 4;
    double f, b;
    size_t nE = (size_t)B * L * E, nD = (size_t)B * L * D, nN = (size_t)B * L * N;

    { /* Mamba short conv: C = E, K = 4 */
        float *x = buf(nE, -1, 1), *w = buf((size_t)E * K, -1, 1), *bias = buf(E, -1, 1), *y = buf(nE, 0, 0);
        float *dy = buf(nE, -1, 1), *dx = buf(nE, 0, 0), *dw = buf((size_t)E * K, 0, 0), *db = buf(E, 0, 0);
        TIME(f, mlk_conv1d_fwd(B, L, E, K, x, w, bias, y));
        TIME(b, mlk_conv1d_bwd(B, L, E, K, x, w, dy, dx, dw, db));
        row("conv1d (C=2D, K=4)", D, f, b);
        free(x), free(w), free(bias), free(y), free(dy), free(dx), free(dw), free(db);
    }
    { /* selective scan */
        float *u = buf(nE, -1, 1), *dl = buf(nE, 0.001, 0.1), *A = buf((size_t)E * N, -16, -1);
        float *Bm = buf(nN, -1, 1), *Cm = buf(nN, -1, 1), *Dd = buf(E, 1, 1), *y = buf(nE, 0, 0);
        float *dy = buf(nE, -1, 1), *du = buf(nE, 0, 0), *ddl = buf(nE, 0, 0), *dA = buf((size_t)E * N, 0, 0);
        float *dB = buf(nN, 0, 0), *dC = buf(nN, 0, 0), *dD = buf(E, 0, 0);
        TIME(f, mlk_sscan_fwd(B, L, E, N, u, dl, A, Bm, Cm, Dd, NULL, y, NULL, NULL));
        TIME(b, mlk_sscan_bwd(B, L, E, N, u, dl, A, Bm, Cm, Dd, NULL, NULL, dy, du, ddl, dA, dB, dC, dD, NULL));
        row("selective scan (E=2D, N=16)", D, f, b);
        float *hs = buf(nE * N, 0, 0);
        TIME(f, mlk_sscan_fwd(B, L, E, N, u, dl, A, Bm, Cm, Dd, NULL, y, hs, NULL));
        TIME(b, mlk_sscan_bwd(B, L, E, N, u, dl, A, Bm, Cm, Dd, NULL, hs, dy, du, ddl, dA, dB, dC, dD, NULL));
        row("  same, states saved for hooks", D, f, b);
        free(hs);
        free(u), free(dl), free(A), free(Bm), free(Cm), free(Dd), free(y), free(dy), free(du), free(ddl), free(dA);
        free(dB), free(dC), free(dD);
    }
    { /* long conv: C = D, per-channel filter */
        float *u = buf(nD, -1, 1), *k = buf((size_t)L * D, -1, 1), *y = buf(nD, 0, 0), *dy = buf(nD, -1, 1);
        float *du = buf(nD, 0, 0), *dk = buf((size_t)L * D, 0, 0);
        TIME(f, mlk_longconv_fwd(B, L, D, 1, u, k, NULL, y));
        TIME(b, mlk_longconv_bwd(B, L, D, 1, u, k, NULL, dy, du, dk, NULL));
        row("long conv (C=D)", D, f, b);
        free(u), free(k), free(y), free(dy), free(du), free(dk);
    }
    { /* Based: H = 1, F = 8, Dv = D */
        size_t nq = (size_t)B * L * 8;
        float *q = buf(nq, -1, 1), *k = buf(nq, -1, 1), *v = buf(nD, -1, 1), *y = buf(nD, 0, 0), *dy = buf(nD, -1, 1);
        float *dq = buf(nq, 0, 0), *dk = buf(nq, 0, 0), *dv = buf(nD, 0, 0);
        TIME(f, mlk_based_fwd(B, L, 1, 8, D, 1e-12f, q, k, v, y));
        TIME(b, mlk_based_bwd(B, L, 1, 8, D, 1e-12f, q, k, v, dy, dq, dk, dv));
        row("Based linear attention (F=8)", D, f, b);
        free(q), free(k), free(v), free(y), free(dy), free(dq), free(dk), free(dv);
    }
    { /* delta rule: H = 1, Dk = Dv = D */
        float *q = buf(nD, -0.2, 0.2), *k = buf(nD, -0.2, 0.2), *v = buf(nD, -1, 1), *bt = buf((size_t)B * L, 0.2, 0.8);
        float *o = buf(nD, 0, 0), *dout = buf(nD, -1, 1), *dq = buf(nD, 0, 0), *dk = buf(nD, 0, 0), *dv = buf(nD, 0, 0);
        float *db = buf((size_t)B * L, 0, 0);
        float *vo = buf(nD, 0, 0); /* the op saves vold from the forward for the backward */
        TIME(f, mlk_delta_fwd(B, L, 1, D, D, 1.0f / sqrtf((float)D), q, k, v, bt, NULL, o, NULL, vo, NULL));
        TIME(b, mlk_delta_bwd(B, L, 1, D, D, 1.0f / sqrtf((float)D), q, k, v, bt, NULL, vo, dout, dq, dk, dv, db, NULL));
        row("delta rule (H=1, dk=dv=D)", D, f, b);
        TIME(f, mlk_delta_quad_fwd(B, L, 1, D, D, 1.0f / sqrtf((float)D), q, k, v, bt, o, vo));
        TIME(b, mlk_delta_quad_bwd(B, L, 1, D, D, 1.0f / sqrtf((float)D), q, k, v, bt, vo, dout, dq, dk, dv, db));
        row("  same, quadratic form (S0 = 0)", D, f, b);
        free(vo);
        free(q), free(k), free(v), free(bt), free(o), free(dout), free(dq), free(dk), free(dv), free(db);
    }
    { /* H3 kernels: shift (C=D, N=1024), diagonal (H=D/2, 512 modes) */
        int H = D / 2, M = 512, NS = 1024;
        float *Bs = buf((size_t)D * NS, -1, 1), *Cs = buf((size_t)D * NS, -1, 1), *Ksh = buf((size_t)L * D, 0, 0);
        float *dK = buf((size_t)L * D, -1, 1), *dBs = buf((size_t)D * NS, 0, 0), *dCs = buf((size_t)D * NS, 0, 0);
        TIME(f, mlk_h3_shift_kernel_fwd(D, NS, L, Bs, Cs, Ksh));
        TIME(b, mlk_h3_shift_kernel_bwd(D, NS, L, Bs, Cs, dK, dBs, dCs));
        row("H3 shift kernel (N=1024)", D, f, b);
        float *Cc = buf((size_t)H * M * 2, -1, 1), *ldt = buf(H, -6, -2), *Bc = buf((size_t)H * M * 2, 1, 1);
        float *iar = buf((size_t)H * M, -0.7f, -0.7f), *aim = buf((size_t)H * M, 0, 1600), *Kd = buf((size_t)L * H, 0, 0);
        float *g[5] = {buf((size_t)H * M * 2, 0, 0), buf(H, 0, 0), buf((size_t)H * M * 2, 0, 0), buf((size_t)H * M, 0, 0),
                       buf((size_t)H * M, 0, 0)};
        TIME(f, mlk_s4d_kernel_fwd(H, M, L, Cc, ldt, Bc, iar, aim, Kd));
        TIME(b, mlk_s4d_kernel_bwd(H, M, L, Cc, ldt, Bc, iar, aim, dK, g[0], g[1], g[2], g[3], g[4]));
        row("H3 S4D kernel (512 modes)", D, f, b);
        size_t nkv = (size_t)B * L * 4 * H;
        float *kv = buf(nkv, -1, 1), *y = buf(nkv, 0, 0), *dy = buf(nkv, -1, 1), *dkv = buf(nkv, 0, 0);
        float *dkd = buf((size_t)L * H, 0, 0), *Dh = buf(H, -1, 1), *dDh = buf(H, 0, 0);
        TIME(f, mlk_longconv_fwd(B, L, 4 * H, 4, kv, Kd, Dh, y));
        TIME(b, mlk_longconv_bwd(B, L, 4 * H, 4, kv, Kd, Dh, dy, dkv, dkd, dDh));
        row("H3 diag long conv (C=2D, G=4)", D, f, b);
        free(Bs), free(Cs), free(Ksh), free(dK), free(dBs), free(dCs), free(Cc), free(ldt), free(Bc), free(iar);
        free(aim), free(Kd), free(kv), free(y), free(dy), free(dkv), free(dkd), free(Dh), free(dDh);
        for (int i = 0; i < 5; i++) free(g[i]);
    }
}

int main(int argc, char **argv) {
    mh_exec_passive(argv); /* workers that sleep when idle (host/process.h) */
    mh_tune_malloc();
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    if (argc > 2) reps = atoi(argv[2]);
    if (argc > 3) L = atoi(argv[3]);
    if (reps < 1 || L < 1) {
        fprintf(stderr, "bench_kernels [threads] [reps >= 1] [L >= 1]\n");
        return 1;
    }
    ml_set_threads(threads);
    if (ml_threads() == 1) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    printf("mixer kernels, B=32 L=%d, %d thread(s), best of %d, %s time\n", L, ml_threads(), reps,
           ml_threads() == 1 ? "CPU" : "wall");
    bench(64);
    bench(256);
    return 0;
}
