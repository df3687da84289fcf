/* Forward + backward of Mamba mixers (docs/mixers.md, "Mamba") built from the autograd ops, at the paper's AR
 * size (B=32, L=37, D=64 and 256, E=2D, N=16, K=4): a prototype of the mixer that checks the fused
 * ops compose at speed. Excludes the embedding, norms and LM head. Usage: bench_mamba_layer
 * [threads] [reps] [layers]. Prints the best time over reps. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "host/process.h"
#include "autograd/autograd.h"
#include "core/threads.h"
#include "ops/mixer_ops.h"
#include "ops/ops.h"

/* On one thread the process CPU time (robust when the machine is shared: time spent descheduled
 * is not counted); on more, wall time. */
static clockid_t clock_id = CLOCK_MONOTONIC;
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

typedef struct {
    ml_tensor *W_in, *conv_w, *conv_b, *W_x, *W_dt, *b_dt, *A_log, *Dskip, *W_out;
} mamba_params;

static ml_tensor *param(ml_rng *r, int nd, const int64_t *shape, double lo, double hi) {
    ml_tensor *t = ml_uniform(nd, shape, lo, hi, r);
    ml_set_requires_grad(t, true);
    return t;
}

static void init(mamba_params *p, int D, ml_rng *r) {
    int64_t E = 2 * D, N = 16, K = 4, R = (D + 15) / 16;
    p->W_in = param(r, 2, (int64_t[]){2 * E, D}, -1.0 / sqrt(D), 1.0 / sqrt(D));
    p->conv_w = param(r, 2, (int64_t[]){E, K}, -0.5, 0.5);
    p->conv_b = param(r, 1, &E, -0.5, 0.5);
    p->W_x = param(r, 2, (int64_t[]){R + 2 * N, E}, -1.0 / sqrt(E), 1.0 / sqrt(E));
    p->W_dt = param(r, 2, (int64_t[]){E, R}, -1.0 / sqrt(R), 1.0 / sqrt(R));
    p->b_dt = param(r, 1, &E, -4.0, -2.0);
    p->A_log = param(r, 2, (int64_t[]){E, N}, 0.0, 2.7);
    p->Dskip = param(r, 1, &E, 1.0, 1.0);
    p->W_out = param(r, 2, (int64_t[]){D, E}, -1.0 / sqrt(2 * E), 1.0 / sqrt(2 * E));
}

/* One Mamba mixer: x (B, L, D) -> (B, L, D), from generic ops around the plain scan (fused = 0)
 * or with the fused conv+SiLU and softplus/gate scan (fused = 1). Intermediate references are
 * dropped as soon as the graph holds them. */
static ml_tensor *mamba_fused(const mamba_params *p, ml_tensor *x, int D) {
    int64_t E = 2 * D, N = 16, R = (D + 15) / 16;
    ml_tensor *xz = ml_linear(x, p->W_in, NULL);
    ml_tensor *xi = ml_narrow(xz, 2, 0, E), *z = ml_narrow(xz, 2, E, E);
    ml_tensor *u = ml_causal_conv1d_silu(xi, p->conv_w, p->conv_b);
    ml_tensor *dbc = ml_linear(u, p->W_x, NULL);
    ml_tensor *dr = ml_narrow(dbc, 2, 0, R), *Bm = ml_narrow(dbc, 2, R, N), *Cm = ml_narrow(dbc, 2, R + N, N);
    ml_tensor *dpre = ml_linear(dr, p->W_dt, p->b_dt);
    ml_tensor *Ae = ml_unary(ML_EXP, p->A_log), *A = ml_unary(ML_NEG, Ae);
    ml_tensor *yg = ml_selective_scan_ex(u, dpre, A, Bm, Cm, p->Dskip, z, NULL, true, NULL, NULL);
    ml_tensor *out = ml_linear(yg, p->W_out, NULL);
    ml_tensor *tmp[] = {xz, xi, z, u, dbc, dr, Bm, Cm, dpre, Ae, A, yg};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ml_release(tmp[i]);
    return out;
}

static ml_tensor *mamba(const mamba_params *p, ml_tensor *x, int D) {
    int64_t E = 2 * D, N = 16, R = (D + 15) / 16;
    ml_tensor *xz = ml_linear(x, p->W_in, NULL);
    ml_tensor *xi = ml_narrow(xz, 2, 0, E), *z = ml_narrow(xz, 2, E, E);
    ml_tensor *xc = ml_causal_conv1d(xi, p->conv_w, p->conv_b);
    ml_tensor *u = ml_unary(ML_SILU, xc);
    ml_tensor *dbc = ml_linear(u, p->W_x, NULL);
    ml_tensor *dr = ml_narrow(dbc, 2, 0, R), *Bm = ml_narrow(dbc, 2, R, N), *Cm = ml_narrow(dbc, 2, R + N, N);
    ml_tensor *dpre = ml_linear(dr, p->W_dt, p->b_dt), *delta = ml_unary(ML_SOFTPLUS, dpre);
    ml_tensor *Ae = ml_unary(ML_EXP, p->A_log), *A = ml_unary(ML_NEG, Ae);
    ml_tensor *ys = ml_selective_scan(u, delta, A, Bm, Cm, p->Dskip, NULL, NULL, NULL);
    ml_tensor *gz = ml_unary(ML_SILU, z), *yg = ml_mul(ys, gz);
    ml_tensor *out = ml_linear(yg, p->W_out, NULL);
    ml_tensor *tmp[] = {xz, xi, z, xc, u, dbc, dr, Bm, Cm, dpre, delta, Ae, A, ys, gz, yg};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++) ml_release(tmp[i]);
    return out;
}

static void bench(int D, int layers, int reps, int fused) {
    ml_rng r;
    ml_rng_init(&r, 1, 2);
    mamba_params p[4];
    for (int l = 0; l < layers; l++) init(&p[l], D, &r);
    ml_tensor *x = ml_uniform(3, (int64_t[]){32, 37, D}, -1, 1, &r);
    ml_set_requires_grad(x, true);
    ml_tensor *w = ml_uniform(3, (int64_t[]){32, 37, D}, -1, 1, &r);
    double best_f = INFINITY, best_t = INFINITY;
    for (int it = 0; it < reps; it++) {
        double t0 = now_ms();
        ml_tensor *h = ml_retain(x);
        for (int l = 0; l < layers; l++) {
            ml_tensor *o = fused ? mamba_fused(&p[l], h, D) : mamba(&p[l], h, D);
            ml_tensor *hn = ml_add(h, o); /* residual */
            ml_release(h), ml_release(o);
            h = hn;
        }
        ml_tensor *hw = ml_mul(h, w), *loss = ml_sum_all(hw);
        double t1 = now_ms();
        if (ml_backward(loss, NULL) != ML_OK) {
            fprintf(stderr, "backward: %s\n", ml_last_error());
            exit(1);
        }
        double t2 = now_ms();
        ml_release(h), ml_release(hw), ml_release(loss);
        if (t1 - t0 < best_f) best_f = t1 - t0;
        if (t2 - t0 < best_t) best_t = t2 - t0;
    }
    printf("mamba mixers x%d  D=%-4d  %-5s  forward %7.3f ms   forward+backward %7.3f ms\n", layers, D,
           fused ? "fused" : "plain", best_f, best_t);
    ml_release(x), ml_release(w);
    for (int l = 0; l < layers; l++) {
        ml_tensor **ps = (ml_tensor **)&p[l];
        for (int i = 0; i < 9; i++) ml_release(ps[i]);
    }
}

int main(int argc, char **argv) {
    mh_tune_malloc(); /* host/process.h */
    int threads = argc > 1 ? atoi(argv[1]) : 1, reps = argc > 2 ? atoi(argv[2]) : 20;
    int layers = argc > 3 ? atoi(argv[3]) : 2;
    if (layers < 1 || layers > 4) layers = 2;
    ml_set_threads(threads);
    if (ml_threads() == 1) clock_id = CLOCK_PROCESS_CPUTIME_ID;
    printf("B=32 L=37 N=16 K=4, %d thread(s), best of %d, %s time\n", ml_threads(), reps,
           ml_threads() == 1 ? "CPU" : "wall");
    for (int fused = 0; fused < 2; fused++) {
        bench(64, layers, reps, fused);
        bench(256, layers, reps, fused);
    }
    return 0;
}
