/* The linear layers' product in fp32 (mlk_gemm_nt) and in bf16 (mlk_gemm_nt_bf16, gemm_bf16.c)
 * side by side, one thread, at the shapes of the AR setting (B = 32, L = 37: M = 1,184 rows; the
 * tied head's 32 supervised rows x 8,196 tokens), and the core's fp32 and bf16 peaks measured in
 * the same process (bench/peak.h).
 *
 *   bench_gemm_bf16 [--rounds R]
 *
 * Each cell is the least thread CPU time over R rounds (default 7) of a run of about 20 ms of
 * calls, fp32 and bf16 alternating within each round, so both see the same machine. bf16 is timed
 * twice: packing w in every call (mlk_gemm_nt_bf16, as the fp32 kernel does) and with w packed
 * once beforehand (mlk_gemm_bf16_packed: in training, once per optimizer step for the forward and
 * the input gradient together). "dx" rows time the input gradient dy·W (mlk_gemm_nn and
 * mlk_gemm_nn_bf16), "dW" rows the weight gradient dyᵀ·x over the batch's rows (mlk_gemm_tn and
 * mlk_gemm_tn_bf16, which packs both operands in the call: its "packed" column repeats it). "attn"
 * rows time attention's six per-sequence products of one (sequence, head) (L = 37, d_h = D at one
 * head, on the qkv rows in place: mlk_gemm and mlk_gemm_bf16 with nn_ops.c's strides; "packed"
 * repeats bf16). GFLOP/s count 2·M·N·K. Exits non-zero where the CPU lacks AVX512_BF16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/threads.h"
#include "host/process.h"
#include "ops/kernels.h"

#include "peak.h"

static double thread_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* mlk_gemm's strides (GEN): a(i,k) = x[i·xr + k·xc]; w (K, N) where w_kn, else (N, K), rows ldw apart */
typedef struct {
    int64_t xr, xc, ldw, ldy;
    bool w_kn;
} strides;

typedef struct {
    const char *name;
    int64_t M, N, K;
    int form; /* NT: y = x·wᵀ + bias; NN: the input gradient x·w; TN: the weight gradient xᵀ·w; GEN: strided */
    strides st;
} shape;

typedef struct {
    int64_t M, N, K;
    const float *x, *w, *bias;
    const uint32_t *packed;
    float *y;
    strides st;
} operands;

enum { FP32, BF16, BF16_PACKED, NKINDS };
enum { NT, NN, TN, GEN };

static int run(int kind, int form, const operands *o) {
    bool nn = form == NN;
    const strides *st = &o->st;
    if (form == GEN) /* attention's form: nothing packed beforehand either */
        return kind == FP32 ? mlk_gemm(o->M, o->N, o->K, o->x, st->xr, st->xc, o->w, st->ldw, st->w_kn, 0.125f, false,
                                       o->y, st->ldy)
                            : mlk_gemm_bf16(o->M, o->N, o->K, o->x, st->xr, st->xc, o->w, st->ldw, st->w_kn, 0.125f,
                                            false, o->y, st->ldy);
    if (form == TN) /* there is no w to pack beforehand */
        return kind == FP32 ? mlk_gemm_tn(o->M, o->N, o->K, o->x, o->w, false, o->y)
                            : mlk_gemm_tn_bf16(o->M, o->N, o->K, o->x, o->w, false, o->y);
    switch (kind) {
    case FP32: return nn ? mlk_gemm_nn(o->M, o->N, o->K, o->x, o->w, o->y)
                         : mlk_gemm_nt(o->M, o->N, o->K, o->x, o->w, o->bias, o->y);
    case BF16: return nn ? mlk_gemm_nn_bf16(o->M, o->N, o->K, o->x, o->w, o->y)
                         : mlk_gemm_nt_bf16(o->M, o->N, o->K, o->x, o->w, o->bias, o->y);
    default: return mlk_gemm_bf16_packed(o->M, o->N, o->K, o->x, o->packed, nn ? NULL : o->bias, o->y);
    }
}

/* Seconds per call: `calls` calls, thread CPU time. */
static double time_calls(int kind, int form, const operands *o, int calls) {
    double t = thread_s();
    for (int c = 0; c < calls; c++)
        if (run(kind, form, o) != 0) {
            fprintf(stderr, "bench_gemm_bf16: a product failed (out of memory)\n");
            exit(1);
        }
    return (thread_s() - t) / calls;
}

int main(int argc, char **argv) {
    mh_exec_passive(argv);
    (void)peak_selftest; /* bench_train --selftest checks the peak kernels */
    int rounds = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: bench_gemm_bf16 [--rounds R]\n");
            return 2;
        }
    }
    if (rounds < 1) rounds = 1;
    char cpu[256];
    peak_cpu_model(cpu, sizeof cpu);
    printf("CPU: %s\n", cpu);
    if (!mlk_have_bf16()) {
        printf("bench_gemm_bf16: %s\n", MLK_BF16_MISSING);
        return 1;
    }
    ml_set_threads(1);
    peak_kernel ks[4], bk;
    double peak32 = peak_fp32_kernels(ks) ? peak_measure(&ks[0], 50) : 0;
    double peak16 = peak_bf16_kernel(&bk) ? peak_measure(&bk, 50) : 0;
    printf("peak, one thread: fp32 %s %.0f GFLOP/s; bf16 vdpbf16ps %.0f GFLOP/s (%.2fx)\n", ks[0].isa, peak32, peak16,
           peak16 / peak32);
    printf("one thread, least thread CPU time of %d rounds; GFLOP/s (share of its peak)\n", rounds);
    printf("%-26s %6s %6s %6s | %-13s %-13s %-13s | %s\n", "product", "M", "N", "K", "fp32", "bf16", "bf16 packed",
           "speed-up (packed)");
    const shape shapes[] = {
        {"D -> D, D = 64", 1184, 64, 64, NT, {0}},       {"D -> 4D, D = 64", 1184, 256, 64, NT, {0}},
        {"4D -> D, D = 64", 1184, 64, 256, NT, {0}},     {"D -> D, D = 256", 1184, 256, 256, NT, {0}},
        {"D -> 3D, D = 256", 1184, 768, 256, NT, {0}},   {"D -> 4D, D = 256", 1184, 1024, 256, NT, {0}},
        {"dx D -> D, D = 256", 1184, 256, 256, NN, {0}}, {"dW D -> D, D = 64", 64, 64, 1184, TN, {0}},
        {"dW D -> D, D = 256", 256, 256, 1184, TN, {0}}, {"head, D = 64", 32, 8196, 64, NT, {0}},
        {"head, D = 256", 32, 8196, 256, NT, {0}},       {"head dx, D = 64", 32, 64, 8196, NN, {0}},
        {"head dx, D = 256", 32, 256, 8196, NN, {0}},
        /* attention at L = 37, one head: x, w and y on qkv's rows (3D), P's (L) or the context's (D) */
        {"attn QK^T, D = 64", 37, 37, 64, GEN, {192, 1, 192, 37, false}},
        {"attn PV, D = 64", 37, 64, 37, GEN, {37, 1, 192, 64, true}},
        {"attn dP = dO.V^T, D = 64", 37, 37, 64, GEN, {64, 1, 192, 37, false}},
        {"attn dV = P^T.dO, D = 64", 37, 64, 37, GEN, {1, 37, 64, 192, true}},
        {"attn dQ = dS.K, D = 64", 37, 64, 37, GEN, {37, 1, 192, 192, true}},
        {"attn dK = dS^T.Q, D = 64", 37, 64, 37, GEN, {1, 37, 192, 192, true}},
        {"attn QK^T, D = 256", 37, 37, 256, GEN, {768, 1, 768, 37, false}},
        {"attn PV, D = 256", 37, 256, 37, GEN, {37, 1, 768, 256, true}},
        {"attn dP = dO.V^T, D = 256", 37, 37, 256, GEN, {256, 1, 768, 37, false}},
        {"attn dV = P^T.dO, D = 256", 37, 256, 37, GEN, {1, 37, 256, 768, true}},
        {"attn dQ = dS.K, D = 256", 37, 256, 37, GEN, {37, 1, 768, 768, true}},
        {"attn dK = dS^T.Q, D = 256", 37, 256, 37, GEN, {1, 37, 768, 768, true}},
    };
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        int64_t M = sh->M, N = sh->N, K = sh->K;
        /* (TN: x is (K, M) and w is (K, N), the same sizes; GEN: as large as the strides reach) */
        int64_t nx = M * K, nw = N * K, ny = M * N;
        if (sh->form == GEN) {
            nx = (M - 1) * sh->st.xr + (K - 1) * sh->st.xc + 1;
            nw = (sh->st.w_kn ? K : N) * sh->st.ldw, ny = M * sh->st.ldy;
        }
        float *x = malloc(sizeof(float) * (size_t)nx), *w = malloc(sizeof(float) * (size_t)nw);
        float *bias = malloc(sizeof(float) * (size_t)N), *y = malloc(sizeof(float) * (size_t)ny);
        size_t pbytes = sizeof(uint32_t) * mlk_bf16_packed_size(N, K);
        uint32_t *packed = aligned_alloc(64, (pbytes + 63) / 64 * 64);
        if (!x || !w || !bias || !y || !packed) {
            fprintf(stderr, "bench_gemm_bf16: out of memory\n");
            return 1;
        }
        for (int64_t i = 0; i < nx; i++) x[i] = (float)((i * 7919) % 2001 - 1000) * 1e-3f;
        for (int64_t i = 0; i < nw; i++) w[i] = (float)((i * 104729) % 2001 - 1000) * 1e-3f;
        for (int64_t i = 0; i < N; i++) bias[i] = (float)(i % 13) * 0.1f;
        if ((sh->form == NT ? mlk_bf16_pack_nt(N, K, w, packed) : mlk_bf16_pack_nn(N, K, w, packed)) != 0) return 1;
        operands o = {M, N, K, x, w, bias, packed, y, sh->st};
        double flops = 2.0 * (double)M * (double)N * (double)K, best[NKINDS];
        /* calls for about 20 ms at 150 GFLOP/s */
        int calls = (int)(0.02 * 150e9 / flops) + 1;
        for (int k = 0; k < NKINDS; k++) best[k] = 1e30, time_calls(k, sh->form, &o, 1); /* warm up */
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < NKINDS; k++) {
                double t = time_calls(k, sh->form, &o, calls);
                if (t < best[k]) best[k] = t;
            }
        double g[NKINDS];
        for (int k = 0; k < NKINDS; k++) g[k] = flops / best[k] / 1e9;
        printf("%-26s %6lld %6lld %6lld | %5.0f (%3.0f%%)  %5.0f (%3.0f%%)  %5.0f (%3.0f%%)  | %.2fx (%.2fx)\n", sh->name,
               (long long)M, (long long)N, (long long)K, g[FP32], 100 * g[FP32] / peak32, g[BF16],
               100 * g[BF16] / peak16, g[BF16_PACKED], 100 * g[BF16_PACKED] / peak16, best[FP32] / best[BF16],
               best[FP32] / best[BF16_PACKED]);
        fflush(stdout);
        free(x), free(w), free(bias), free(y), free(packed);
    }
    return 0;
}
