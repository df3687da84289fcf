/* Training-step benchmark: ms per step (AdamW update included), the matmul FLOPs of a step, GFLOP/s
 * and their share of the core's peak, per architecture, width and thread count.
 *
 *   bench_train [--task NAME] [--d 64,256] [--threads 1,2] [--steps N] [--rounds R] [--rate GFLOPS]
 *               [--precision fp32,bf16] [arch ...]
 *   bench_train --shapes [--task NAME] [--d 16,32,64] [--rate GFLOPS]
 *   bench_train --selftest
 *
 * Defaults: ar_32 (B = 32, L = 37, V = 8196), D = 64 and 256, 1 and 2 threads, attention.
 * `--task pcfg_5_20` gives the ATR (5, 20) documents (their own length and vocabulary).
 *
 * FLOPs count the matrix products (2 per multiply-add) of the forward pass and take the backward
 * pass as twice the forward (one product for each operand's gradient), so a step is 3x forward.
 * The peak is one core's fp32 multiply-add rate, which this process measures first on one thread
 * with a kernel that runs in registers only, for the widest vector unit the CPU has (bench/peak.h:
 * AVX-512F, else AVX2+FMA, else SSE2; best of 50 runs of 2 ms); at T threads it is T times that.
 * `--rate GFLOPS` gives the one-thread peak instead (and skips the measurement). Where the CPU has
 * AVX512_BF16 the rate of its bf16 dot product (vdpbf16ps) is measured and printed beside it: the
 * ceiling for training in bf16. The CPU model and the ISA are printed first. On a shared machine
 * wall time measures the neighbours too: the process CPU time per step is printed beside it (with
 * 2 threads it adds both threads' time); GFLOP/s and the share of the peak use the CPU time on one
 * thread and the wall time on more. Each row is the best of `rounds` rounds of `steps` steps.
 * bench/step_breakdown.sh runs this under perf to split a step into matmuls, mixer kernels, norms
 * and elementwise ops, embedding and head, optimizer and bookkeeping. `--shapes` times, on one
 * thread, each linear product of an attention step alone (forward and both backward products at
 * their shapes) as a share of the peak, and AdamW over the model's parameters beside a pass with
 * its memory traffic alone (the optimizer's floor). `--selftest` checks the peak kernels' results
 * against a scalar reference (not their speed) and exits non-zero on a mismatch.
 *
 * `--precision fp32,bf16` times each precision of the model option `precision` (docs/kernels.md,
 * "bf16 training") on the same (arch, D, threads): one model each, their rounds alternating, the
 * best of each; a bf16 row's share is of the bf16 dot product's peak (the fp32 peak where it is not
 * measured), and the last column is the step's speed-up over the list's first precision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cblas.h>
#include <math.h>

#include "core/threads.h"
#include "host/process.h"
#include "nn/train.h"
#include "ops/kernels.h"
#include "ops/ops.h"
#include "tasks/task.h"

#include "peak.h"

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Forward matmul FLOPs of one batch; N supervised rows get logits: each layer's mixer counts its
 * own (ml_mixer_type.flops), plus the MLP and the tied head. */
static double forward_flops(const ml_model *m, double B, double L, double N) {
    double D = m->cfg.d_model, V = m->cfg.vocab, f = 0;
    for (int l = 0; l < m->cfg.n_layers; l++) {
        f += m->layers[l].mixer->flops(m, l, B, L);
        if (m->p_fc1_w[l] >= 0) f += 2 * 2 * B * L * D * 4 * D;
    }
    return f + 2 * N * D * V;
}

/* Prints the CPU, the ISA and the peaks; returns the one-thread fp32 peak in GFLOP/s (`rate` where
 * it is given, else measured), 0 where there is no kernel for this CPU. */
static double measure_peak(double rate, double *bf16_rate) {
    *bf16_rate = 0;
    char cpu[256];
    peak_cpu_model(cpu, sizeof cpu);
    peak_kernel ks[4], bf;
    int n = peak_fp32_kernels(ks);
    if (rate > 0) {
        printf("CPU: %s; peak %.1f GFLOP/s a thread, given by --rate\n", cpu, rate);
        return rate;
    }
    if (!n) return printf("CPU: %s; no peak kernel for it (give --rate)\n", cpu), 0;
    rate = peak_measure(&ks[0], 50); /* on this thread */
    printf("CPU: %s; ISA %s: fp32 multiply-add peak %.1f GFLOP/s a thread (%d chains x %d lanes, best of 50)", cpu,
           ks[0].isa, rate, ks[0].chains, ks[0].lanes);
    if (peak_bf16_kernel(&bf)) {
        double r = peak_measure(&bf, 50);
        printf("; bf16 dot product (vdpbf16ps) %.1f GFLOP/s (%.2fx fp32)", r, r / rate);
        *bf16_rate = r;
    } else printf("; no AVX512_BF16");
    printf("\n");
    return rate;
}

/* "16,32,64" -> out[], returns the count (at most max) or -1. */
static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    for (char *end; *s && n < max; s = *end ? end + 1 : end) {
        long v = strtol(s, &end, 10);
        if (end == s || v <= 0 || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
    }
    return n;
}

typedef struct {
    const char *task;
    int d[8], n_d, threads[4], n_threads, steps, rounds;
    const char *precisions[2]; /* the model option `precision` of each model timed */
    int n_precisions;
    double rate;   /* one thread's peak in GFLOP/s; 0: measure it */
    bool shapes;   /* --shapes: time the step's linear products alone */
    bool selftest; /* --selftest: check the peak kernels' results */
    const char **archs;
    int n_archs;
} options;

static int parse_args(int argc, char **argv, options *o) {
    static const char *archs_default[] = {"attention"};
    *o = (options){.task = "ar_32", .d = {64, 256}, .n_d = 2, .threads = {1, 2}, .n_threads = 2, .steps = 0,
                   .rounds = 1, .precisions = {"fp32"}, .n_precisions = 1, .archs = archs_default, .n_archs = 1};
    int first_arch = argc;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-') {
            first_arch = i;
            break;
        }
        if (!strcmp(a, "--shapes")) {
            o->shapes = true;
            continue;
        }
        if (!strcmp(a, "--selftest")) {
            o->selftest = true;
            continue;
        }
        if (!v) return fprintf(stderr, "bench_train: %s needs a value\n", a), -1;
        i++;
        if (!strcmp(a, "--task")) o->task = v;
        else if (!strcmp(a, "--d")) o->n_d = parse_list(v, o->d, 8);
        else if (!strcmp(a, "--threads")) o->n_threads = parse_list(v, o->threads, 4);
        else if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--rounds")) o->rounds = atoi(v);
        else if (!strcmp(a, "--rate")) o->rate = atof(v);
        else if (!strcmp(a, "--precision")) {
            static char list[64];
            snprintf(list, sizeof list, "%s", v);
            o->n_precisions = 0;
            for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if ((strcmp(t, "fp32") && strcmp(t, "bf16")) || o->n_precisions == 2)
                    return fprintf(stderr, "bench_train: --precision expects fp32, bf16 or both, got '%s'\n", v), -1;
                o->precisions[o->n_precisions++] = t;
            }
            if (!o->n_precisions) return fprintf(stderr, "bench_train: --precision needs a value\n"), -1;
        } else return fprintf(stderr, "bench_train: unknown option %s\n", a), -1;
        if (o->n_d < 1 || o->n_threads < 1 || o->steps < 0 || o->rounds < 1 || o->rate < 0)
            return fprintf(stderr, "bench_train: bad value '%s' for %s\n", v, a), -1;
    }
    if (first_arch < argc) o->archs = (const char **)argv + first_arch, o->n_archs = argc - first_arch;
    return 0;
}

/* Times one (arch, D, threads) row per precision and prints them; returns non-zero on an error.
 * The precisions' models train on the same batches, their rounds alternating (the machine's load
 * falls on both alike), and each keeps its best round. */
static int bench_row(const options *o, const ml_task *task, const ml_dataset *ds, const char *arch, int d,
                     int threads, double rate, double bf16_rate) {
    ml_set_threads(threads);
    int np = o->n_precisions, rc = 0;
    ml_model *m[2] = {0};
    ml_adamw opt[2];
    bool opt_ok[2] = {0};
    for (int p = 0; p < np && !rc; p++) {
        ml_model_config cfg;
        ml_model_config_defaults(&cfg, arch);
        cfg.d_model = d;
        cfg.vocab = ml_task_vocab_size(task);
        cfg.pos_emb = !strcmp(arch, "attention");
        snprintf(cfg.precision, sizeof cfg.precision, "%s", o->precisions[p]);
        m[p] = ml_model_new(&cfg);
        rc = !m[p] || ml_adamw_init(&opt[p], m[p]->n_total, 0.9, 0.999, 1e-8, 0);
        opt_ok[p] = !rc;
    }
    ml_batch_stats st;
    ml_tensor *tok[8], *tg[8], *pos[8];
    for (int b = 0; b < 8; b++) ml_dataset_batch_range(ds, 32 * b, 32, &tok[b], &tg[b], &pos[b]);
    for (int p = 0; p < np && !rc; p++)
        for (int i = 0; i < 20 && !rc; i++) /* warm up */
            rc = ml_train_step(m[p], &opt[p], tok[i % 8], tg[i % 8], 1e-3, ML_NONFINITE_STOP, &st) != ML_OK;
    int steps = o->steps ? o->steps : d >= 256 ? 20 : 60;
    double ms[2] = {1e30, 1e30}, cpu[2] = {1e30, 1e30};
    for (int r = 0; r < o->rounds && !rc; r++)
        for (int p = 0; p < np && !rc; p++) {
            double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
            for (int i = 0; i < steps && !rc; i++)
                rc = ml_train_step(m[p], &opt[p], tok[i % 8], tg[i % 8], 1e-3, ML_NONFINITE_STOP, &st) != ML_OK;
            double w = (clock_s(CLOCK_MONOTONIC) - t0) / steps * 1e3;
            double c = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / steps * 1e3;
            if (w < ms[p]) ms[p] = w;
            if (c < cpu[p]) cpu[p] = c;
        }
    if (!rc) {
        /* supervised rows: the targets that are not -100 in the first batch */
        int64_t n_rows = 0, n = ml_numel(tg[0]);
        for (int64_t i = 0; i < n; i++) n_rows += ml_i32(tg[0])[i] != -100;
        double gflop = 3 * forward_flops(m[0], 32, (double)tok[0]->shape[1], (double)n_rows) / 1e9;
        for (int p = 0; p < np; p++) {
            bool bf16 = !strcmp(o->precisions[p], "bf16");
            double peak = bf16 && bf16_rate > 0 ? bf16_rate : rate;
            double peak_ms = gflop / (peak * threads) * 1e3, t = threads == 1 ? cpu[p] : ms[p];
            double t0 = threads == 1 ? cpu[0] : ms[0];
            printf("%-10s %4d %7d %8.2f %8.2f %10.3f %7.1f %8.2f %6.1f %5s %7.2f\n", arch, d, threads, ms[p], cpu[p],
                   gflop, gflop / t * 1e3, peak_ms, 100 * peak_ms / t, o->precisions[p], t0 / t);
        }
        fflush(stdout);
    }
    for (int b = 0; b < 8; b++) ml_release(tok[b]), ml_release(tg[b]), ml_release(pos[b]);
    for (int p = 0; p < np; p++) {
        if (opt_ok[p]) ml_adamw_free(&opt[p]);
        ml_model_free(m[p]);
    }
    return rc;
}

/* Small values in the operands calloc gave: a product timed on never-written pages reads the one
 * zero page for all of them, which is not what a step reads. */
static void fill_operands(float *p, size_t n) {
    for (size_t i = 0; p && i < n; i++) p[i] = 0.01f * (float)(i % 7) - 0.03f;
}

/* Seconds of one product as ml_linear and its backward make it, best of 5 runs of `reps`: own,
 * mechlab's kernel (mlk_gemm_nt for a·bᵀ, mlk_gemm_nn for a·b, mlk_gemm_tn for aᵀ·b); else
 * cblas_sgemm. */
static double time_gemm(bool own, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float beta) {
    float *a = calloc((size_t)M * K, sizeof(float)), *b = calloc((size_t)K * N, sizeof(float));
    float *c = calloc((size_t)M * N, sizeof(float));
    int reps = 1 + (int)(2e7 / (2.0 * M * N * K)); /* about 20 MFLOP a run */
    fill_operands(a, (size_t)M * K), fill_operands(b, (size_t)K * N);
    double best = 1e30;
    for (int r = 0; a && b && c && r < 6; r++) {
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int i = 0; i < reps; i++)
            if (own && ta == CblasTrans) mlk_gemm_tn(M, N, K, a, b, beta != 0.0f, c);
            else if (own && tb == CblasTrans) mlk_gemm_nt(M, N, K, a, b, NULL, c);
            else if (own) mlk_gemm_nn(M, N, K, a, b, c);
            else
                cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, a, ta == CblasNoTrans ? K : M, b,
                        tb == CblasNoTrans ? N : K, beta, c, N);
        double dt = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) / reps;
        if (r > 0 && dt < best) best = dt; /* the first run warms the caches */
    }
    free(a), free(b), free(c);
    return best;
}

/* Seconds of attention's six per-sequence products of one layer's step (one head of width dh,
 * B sequences of L: S = Q·Kᵀ and ctx = P·V forward, dP = dctx·Vᵀ, dV = Pᵀ·dctx, dQ = dS·K and
 * dK = dSᵀ·Q backward) with the operands' strides in qkv (rows 3·dh apart), best of 5 runs: own,
 * mlk_gemm as src/ops/nn_ops.c calls it; else cblas_sgemm as it was called before. */
static double time_attention(bool own, int B, int L, int dh) {
    int64_t row = 3 * dh;
    float *qkv = calloc((size_t)B * L * row, sizeof(float)), *dqkv = calloc((size_t)B * L * row, sizeof(float));
    float *P = calloc((size_t)B * L * L, sizeof(float)), *S = calloc((size_t)B * L * L, sizeof(float));
    float *ctx = calloc((size_t)B * L * dh, sizeof(float));
    fill_operands(qkv, (size_t)B * L * row), fill_operands(P, (size_t)B * L * L), fill_operands(ctx, (size_t)B * L * dh);
    double best = 1e30;
    for (int r = 0; qkv && dqkv && P && S && ctx && r < 6; r++) {
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        for (int b = 0; b < B; b++) {
            float *q = qkv + b * L * row, *k = q + dh, *v = q + 2 * dh, *dq = dqkv + b * L * row, *dk = dq + dh,
                  *dv = dq + 2 * dh, *p = P + b * L * L, *st = S + b * L * L, *c = ctx + b * L * dh;
            if (own) {
                mlk_gemm(L, L, dh, q, row, 1, k, row, false, 0.125f, false, st, L);
                mlk_gemm(L, dh, L, p, L, 1, v, row, true, 1.0f, false, c, dh);
                mlk_gemm(L, L, dh, c, dh, 1, v, row, false, 1.0f, false, st, L);
                mlk_gemm(L, dh, L, p, 1, L, c, dh, true, 1.0f, false, dv, row);
                mlk_gemm(L, dh, L, p, L, 1, k, row, true, 0.125f, false, dq, row);
                mlk_gemm(L, dh, L, p, 1, L, q, row, true, 0.125f, false, dk, row);
            } else {
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, L, dh, 0.125f, q, row, k, row, 0.0f, st, L);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dh, L, 1.0f, p, L, v, row, 0.0f, c, dh);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L, L, dh, 1.0f, c, dh, v, row, 0.0f, st, L);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L, dh, L, 1.0f, p, L, c, dh, 0.0f, dv, row);
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L, dh, L, 0.125f, p, L, k, row, 0.0f, dq, row);
                cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L, dh, L, 0.125f, p, L, q, row, 0.0f, dk, row);
            }
        }
        double dt = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        if (r > 0 && dt < best) best = dt;
    }
    free(qkv), free(dqkv), free(P), free(S), free(ctx);
    return best;
}

/* Elements of the first `m` rows of an M x N x K product (y = x·wᵀ) that differ when those rows
 * and n columns are computed alone, by sgemm (*blas) and by mlk_gemm_nt (*own): how far this
 * machine's BLAS keeps a row's bits (docs/kernels.md, "Determinism"). */
static float lcg_uniform(uint32_t *st) { /* in [-0.5, 0.5) */
    *st = *st * 1664525u + 1013904223u;
    return (float)(*st >> 8) / 16777216.0f - 0.5f;
}

static void row_bits(int M, int N, int K, int m, int n, int *blas, int *own) {
    float *x = malloc(sizeof(float) * (size_t)M * K), *w = malloc(sizeof(float) * (size_t)N * K);
    float *y = malloc(sizeof(float) * (size_t)M * N), *p = malloc(sizeof(float) * (size_t)m * n);
    *blas = *own = -1;
    if (!x || !w || !y || !p) goto done;
    uint32_t st = 1;
    for (int64_t i = 0; i < (int64_t)M * K; i++) x[i] = lcg_uniform(&st);
    for (int64_t i = 0; i < (int64_t)N * K; i++) w[i] = lcg_uniform(&st);
    for (int pass = 0; pass < 2; pass++) {
        int *count = pass ? own : blas;
        if (pass) mlk_gemm_nt(M, N, K, x, w, NULL, y), mlk_gemm_nt(m, n, K, x, w, NULL, p);
        else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, x, K, w, K, 0.0f, y, N);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, K, 1.0f, x, K, w, K, 0.0f, p, n);
        }
        *count = 0;
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) *count += memcmp(&p[i * n + j], &y[i * N + j], sizeof(float)) != 0;
    }
done:
    free(x), free(w), free(y), free(p);
}

/* Milliseconds of AdamW over the n parameters of a model and of a pass with AdamW's memory
 * traffic and no arithmetic to speak of (reads p, g, m, v and writes p, m, v: 28 bytes a
 * parameter), each the best of 6 runs that start with the arrays out of cache (a 128 MiB buffer
 * is read and written in between): the optimizer's part of a step and the memory's floor under it. */
static void time_optimizer(int64_t n, double *adamw_ms, double *stream_ms) {
    size_t evict_n = (size_t)32 << 20; /* floats: 128 MiB, past the last-level cache */
    float *a[4], *evict = calloc(evict_n, sizeof(float));
    for (int k = 0; k < 4; k++) a[k] = malloc(sizeof(float) * (size_t)(n ? n : 1));
    *adamw_ms = *stream_ms = -1;
    if (!evict || !a[0] || !a[1] || !a[2] || !a[3]) goto done;
    for (int k = 0; k < 4; k++) fill_operands(a[k], (size_t)n);
    for (int64_t i = 0; i < n; i++) a[3][i] = fabsf(a[3][i]); /* v >= 0 */
    float *p = a[0], *g = a[1], *m = a[2], *v = a[3];
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < 12; r++) {
        for (size_t i = 0; i < evict_n; i++) evict[i] = evict[i] * 0.5f + 1.0f;
        double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        if (r % 2 == 0) ml_adamw_kernel(0.9, 0.999, 1e-8, 0, p, g, m, v, n, 1e-3, 1 + r);
        else
            for (int64_t i = 0; i < n; i++) p[i] += g[i], m[i] += g[i], v[i] += g[i];
        double dt = (clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0) * 1e3;
        if (dt < best[r % 2]) best[r % 2] = dt;
    }
    *adamw_ms = best[0], *stream_ms = best[1];
done:
    for (int k = 0; k < 4; k++) free(a[k]);
    free(evict);
}

/* --shapes: the rate of each linear product of an attention step at width d, as src/ops/matmul.c
 * makes them (forward y = x·Wᵀ by mlk_gemm_nt, dx = dy·W by mlk_gemm_nn, dW += dyᵀ·x by
 * mlk_gemm_tn; all three by sgemm beside them), each as a share of the one-thread peak, and their
 * sum: the bound the products alone put on a step; then attention's per-sequence products. */
static void bench_shapes(const int *ds, int n_d, int rows, int head_rows, int vocab, double rate) {
    ml_set_threads(1);
    int blas, own;
    row_bits(800, 192, 64, 40, 64, &blas, &own);
    printf("the first 40 rows of an 800 x 192 x 64 product computed alone as 40 x 64: %d of 2560 elements differ "
           "by sgemm, %d by mlk_gemm_nt\n", blas, own);
    printf("product          rows   in   out  GFLOP/s: fwd, dx, dW (sgemm: fwd, dx, dW)  %% of peak: fwd, dx, dW  "
           "ms (3 products) %% peak\n");
    for (int di = 0; di < n_d; di++) {
        int d = ds[di];
        struct { const char *name; int n, in, out, count; } lin[] = {
            {"qkv", rows, d, 3 * d, 2}, {"attn out", rows, d, d, 2}, {"mlp fc1", rows, d, 4 * d, 2},
            {"mlp fc2", rows, 4 * d, d, 2}, {"head", head_rows, d, vocab, 1}};
        double total = 0, flops = 0;
        for (size_t k = 0; k < sizeof lin / sizeof lin[0]; k++) {
            int n = lin[k].n, in = lin[k].in, out = lin[k].out;
            double f = 2.0 * n * in * out;
            double t0 = time_gemm(true, CblasNoTrans, CblasTrans, n, out, in, 0.0f);
            double t1 = time_gemm(true, CblasNoTrans, CblasNoTrans, n, in, out, 0.0f);
            double t2 = time_gemm(true, CblasTrans, CblasNoTrans, out, in, n, 1.0f);
            double s0 = time_gemm(false, CblasNoTrans, CblasTrans, n, out, in, 0.0f);
            double s1 = time_gemm(false, CblasNoTrans, CblasNoTrans, n, in, out, 0.0f);
            double s2 = time_gemm(false, CblasTrans, CblasNoTrans, out, in, n, 1.0f);
            double t = t0 + t1 + t2, g0 = f / t0 / 1e9, g1 = f / t1 / 1e9, g2 = f / t2 / 1e9;
            printf("%-3d %-10s %5d %4d %5d  %6.1f %6.1f %6.1f  %6.1f %6.1f %6.1f         %5.1f %5.1f %5.1f      "
                   "%7.3f   %5.1f\n", d, lin[k].name, n, in, out, g0, g1, g2, f / s0 / 1e9, f / s1 / 1e9,
                   f / s2 / 1e9, 100 * g0 / rate, 100 * g1 / rate, 100 * g2 / rate, t * 1e3,
                   100 * 3 * f / rate / 1e9 / t);
            total += lin[k].count * t;
            flops += lin[k].count * 3 * f;
        }
        printf("%-3d all linear products of a 2-layer step: %.3f ms, %.1f GFLOP/s, %.1f %% of the peak (%.3f ms)\n",
               d, total * 1e3, flops / total / 1e9, 100 * flops / rate / 1e9 / total, flops / rate / 1e6);
        int L = rows / 32;
        double ta = time_attention(true, 32, L, d), sa = time_attention(false, 32, L, d), fa = 6 * 32 * 2.0 * L * L * d;
        printf("%-3d attention's 6 per-sequence products of a layer (32 x %d x %d, one head): %.3f ms, %.1f GFLOP/s, "
               "%.1f %% of the peak (sgemm: %.3f ms, %.1f GFLOP/s)\n", d, L, d, ta * 1e3, fa / ta / 1e9,
               100 * fa / ta / 1e9 / rate, sa * 1e3, fa / sa / 1e9);
        ml_model_config cfg; /* the attention model of a bench_train row at this width */
        ml_model_config_defaults(&cfg, "attention");
        cfg.d_model = d, cfg.vocab = vocab, cfg.pos_emb = true;
        ml_model *model = ml_model_new(&cfg);
        if (model) {
            double adamw_ms, stream_ms;
            int64_t n = model->n_total;
            time_optimizer(n, &adamw_ms, &stream_ms);
            printf("%-3d AdamW over the model's %lld parameters from memory: %.3f ms; its traffic (28 bytes a parameter) "
                   "alone: %.3f ms, %.1f GB/s\n", d, (long long)n, adamw_ms, stream_ms, 28.0 * (double)n / stream_ms / 1e6);
            ml_model_free(model);
        }
    }
}

int main(int argc, char **argv) {
    mh_exec_passive(argv); /* workers that sleep when idle (host/process.h) */
    mh_tune_malloc();
    options o;
    if (parse_args(argc, argv, &o)) return 2;
    if (o.selftest) return peak_selftest() ? 1 : 0;
    ml_task *task = ml_task_preset(o.task, 42);
    ml_dataset *ds = task ? ml_dataset_new(task, 32 * 8, 42, ML_SPLIT_TRAIN) : NULL;
    if (!ds) {
        fprintf(stderr, "bench_train: %s\n", ml_last_error());
        return 1;
    }
    double bf16_rate;
    double rate = measure_peak(o.rate, &bf16_rate);
    if (rate <= 0) return 1;
    if (o.shapes) { /* B 32 sequences of the task's length, one supervised row each (ar_32) */
        bench_shapes(o.d, o.n_d, 32 * ml_dataset_max_len(ds), 32, ml_task_vocab_size(task), rate);
        ml_dataset_free(ds);
        ml_task_release(task);
        return 0;
    }
    printf("task %s; peak ms: the step's FLOPs at the peak of its threads (and precision); GFLOP/s and %% peak on the "
           "cpu ms (1 thread) or the wall ms; speed-up over the first precision\n", o.task);
    printf("%-10s %4s %7s %8s %8s %10s %7s %8s %6s %5s %7s\n", "arch", "D", "threads", "ms/step", "cpu ms", "GFLOP/step",
           "GFLOP/s", "peak ms", "% peak", "prec", "speedup");
    for (int a = 0; a < o.n_archs; a++)
        for (int di = 0; di < o.n_d; di++)
            for (int ti = 0; ti < o.n_threads; ti++)
                if (bench_row(&o, task, ds, o.archs[a], o.d[di], o.threads[ti], rate, bf16_rate)) {
                    fprintf(stderr, "bench_train: %s\n", ml_last_error());
                    return 1;
                }
    ml_dataset_free(ds);
    ml_task_release(task);
    return 0;
}
