/* A core's peak multiply-add rate, measured in-process: kernels that keep every operand in
 * registers and run independent chains of multiply-adds, one kernel for each vector unit, picked
 * at run time (`__builtin_cpu_supports`), so that a baseline x86-64 build measures AVX-512 where
 * the CPU has it and still runs where it has not. Used by bench_train as the floor a training step
 * is measured against (docs/kernels.md, "The peak").
 *
 * A chain is acc = acc·mul + add, one FMA (AVX-512F, AVX2+FMA) or a multiply then an add (SSE2):
 * each instruction waits for the previous one of its chain, so the chains must cover the FMA's
 * latency times its throughput (4 cycles x 2 pipes = 8 on Zen 4/5 and Intel's cores since
 * Skylake); 16 zmm chains (of 32 registers) leave margin for a latency of 8, 12 ymm/xmm chains (of
 * 16) for 6. The loop reads and writes no memory; the accumulators are loaded before it and
 * stored after, so the result can be checked (peak_selftest) and the loop cannot be dropped.
 *
 * The bf16 kernel runs `vdpbf16ps` (AVX512_BF16) the same way: each instruction adds two bf16
 * products to each fp32 lane, 32 multiply-adds (64 FLOPs) for a zmm against 16 for an FMA: the
 * ceiling for training in bf16. */
#ifndef BENCH_PEAK_H
#define BENCH_PEAK_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define PEAK_X86 1
#endif

#define PEAK_MAX_FLOATS (16 * 16) /* chains x lanes of the widest kernel */

typedef struct {
    const char *isa; /* "AVX-512F", "AVX2+FMA", "SSE2", "AVX512_BF16" */
    int lanes, chains;
    int flops_per_lane; /* of one instruction (or mul+add pair) and lane: 2, or 4 for vdpbf16ps */
    bool fused;         /* fp32: one rounding per step (FMA), else two (a multiply, then an add) */
    /* fp32 kernels: iters times acc[i] = acc[i]·mul + add on chains x lanes floats (in and out) */
    void (*fp32)(int64_t iters, float mul, float add, float *acc);
    /* bf16 kernel: iters times acc[c][j] += x[2j]·y[2j] + x[2j+1]·y[2j+1], x and y 32 bf16 (raw bits) */
    void (*bf16)(int64_t iters, const uint16_t *x, const uint16_t *y, float *acc);
} peak_kernel;

#ifdef PEAK_X86
#define PEAK_X12(F) F(0) F(1) F(2) F(3) F(4) F(5) F(6) F(7) F(8) F(9) F(10) F(11)
#define PEAK_X16(F) PEAK_X12(F) F(12) F(13) F(14) F(15)

__attribute__((target("avx512f"), noinline)) static void peak_fp32_avx512(int64_t iters, float mul, float add,
                                                                           float *acc) {
    __m512 m = _mm512_set1_ps(mul), c = _mm512_set1_ps(add);
#define LOAD(i) __m512 a##i = _mm512_loadu_ps(acc + 16 * i);
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, m, c);
#define STORE(i) _mm512_storeu_ps(acc + 16 * i, a##i);
    PEAK_X16(LOAD)
    for (int64_t it = 0; it < iters; it++) { PEAK_X16(STEP) }
    PEAK_X16(STORE)
#undef LOAD
#undef STEP
#undef STORE
}

__attribute__((target("avx2,fma"), noinline)) static void peak_fp32_avx2(int64_t iters, float mul, float add,
                                                                          float *acc) {
    __m256 m = _mm256_set1_ps(mul), c = _mm256_set1_ps(add);
#define LOAD(i) __m256 a##i = _mm256_loadu_ps(acc + 8 * i);
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, m, c);
#define STORE(i) _mm256_storeu_ps(acc + 8 * i, a##i);
    PEAK_X12(LOAD)
    for (int64_t it = 0; it < iters; it++) { PEAK_X12(STEP) }
    PEAK_X12(STORE)
#undef LOAD
#undef STEP
#undef STORE
}

/* No FMA before AVX2 on x86: a multiply and an add, rounded each (2 FLOPs a pair) */
__attribute__((noinline)) static void peak_fp32_sse(int64_t iters, float mul, float add, float *acc) {
    __m128 m = _mm_set1_ps(mul), c = _mm_set1_ps(add);
#define LOAD(i) __m128 a##i = _mm_loadu_ps(acc + 4 * i);
#define STEP(i) a##i = _mm_add_ps(_mm_mul_ps(a##i, m), c);
#define STORE(i) _mm_storeu_ps(acc + 4 * i, a##i);
    PEAK_X12(LOAD)
    for (int64_t it = 0; it < iters; it++) { PEAK_X12(STEP) }
    PEAK_X12(STORE)
#undef LOAD
#undef STEP
#undef STORE
}

__attribute__((target("avx512f,avx512bf16"), noinline)) static void peak_bf16_avx512(int64_t iters,
                                                                                      const uint16_t *x,
                                                                                      const uint16_t *y, float *acc) {
    __m512bh bx = (__m512bh)_mm512_loadu_si512(x), by = (__m512bh)_mm512_loadu_si512(y);
#define LOAD(i) __m512 a##i = _mm512_loadu_ps(acc + 16 * i);
#define STEP(i) a##i = _mm512_dpbf16_ps(a##i, bx, by);
#define STORE(i) _mm512_storeu_ps(acc + 16 * i, a##i);
    PEAK_X16(LOAD)
    for (int64_t it = 0; it < iters; it++) { PEAK_X16(STEP) }
    PEAK_X16(STORE)
#undef LOAD
#undef STEP
#undef STORE
}
#endif

/* The fp32 kernels this CPU can run, widest first; returns the count (0 off x86-64). */
static int peak_fp32_kernels(peak_kernel *out) {
    int n = 0;
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) out[n++] = (peak_kernel){"AVX-512F", 16, 16, 2, true, peak_fp32_avx512, NULL};
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        out[n++] = (peak_kernel){"AVX2+FMA", 8, 12, 2, true, peak_fp32_avx2, NULL};
    out[n++] = (peak_kernel){"SSE2", 4, 12, 2, false, peak_fp32_sse, NULL};
#else
    (void)out;
#endif
    return n;
}

/* The bf16 dot-product kernel where the CPU has AVX512_BF16; false where not. */
static bool peak_bf16_kernel(peak_kernel *out) {
#ifdef PEAK_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16")) {
        *out = (peak_kernel){"AVX512_BF16", 16, 16, 4, true, NULL, peak_bf16_avx512};
        return true;
    }
#else
    (void)out;
#endif
    return false;
}

static double peak_thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The test operands of the bf16 kernel: small integers, so every product and sum is exact and the
 * result does not depend on how the instruction orders or rounds its two additions. */
static void peak_bf16_operands(uint16_t *x, uint16_t *y) {
    for (int k = 0; k < 32; k++) {
        float fx = (float)(k % 7) - 3.0f, fy = (float)(k % 5) + 1.0f; /* periods 7 and 5: pairs differ */
        uint32_t bx, by;
        memcpy(&bx, &fx, 4), memcpy(&by, &fy, 4);
        x[k] = (uint16_t)(bx >> 16), y[k] = (uint16_t)(by >> 16); /* exact: the low 16 bits are 0 */
    }
}

static void peak_run(const peak_kernel *k, int64_t iters, float *acc) {
    if (k->fp32) k->fp32(iters, 0.999f, 1e-3f, acc); /* converges to about 1: never denormal or infinite */
    else {
        uint16_t x[32], y[32];
        peak_bf16_operands(x, y);
        k->bf16(iters, x, y, acc);
    }
}

/* GFLOP/s of kernel k on the calling thread: the best of `runs` runs of about 2 ms each (thread
 * CPU time, so time descheduled does not count), after one run that sizes them. Short runs find
 * the undisturbed windows of a shared machine (on the shared 2-core Zen 5, side by side: best of 7
 * runs of 20 ms 207-215 GFLOP/s, of 50 runs of 2 ms 217-228); the rate still follows the
 * machine's state from one minute to the next (211-228 there), so compare runs side by side. */
static double peak_measure(const peak_kernel *k, int runs) {
    float acc[PEAK_MAX_FLOATS];
    for (int i = 0; i < PEAK_MAX_FLOATS; i++) acc[i] = (float)i / PEAK_MAX_FLOATS;
    double per_iter = (double)k->chains * k->lanes * k->flops_per_lane, best = 0;
    int64_t iters = 1 << 16;
    double t = peak_thread_seconds();
    peak_run(k, iters, acc);
    t = peak_thread_seconds() - t;
    if (t > 0) iters = (int64_t)(iters * 0.002 / t) + 1;
    for (int r = 0; r < runs; r++) {
        t = peak_thread_seconds();
        peak_run(k, iters, acc);
        t = peak_thread_seconds() - t;
        double rate = per_iter * (double)iters / t / 1e9;
        if (t > 0 && rate > best) best = rate;
    }
    return best;
}

/* Checks each kernel's result against a scalar reference, bit for bit, on a few iterations: every
 * chain and lane ran exactly `iters` steps with the right operands (the FLOP count of a measured
 * rate rests on it). Prints one line per kernel; returns the number that failed. */
static int peak_selftest(void) {
    peak_kernel ks[4];
    int n = peak_fp32_kernels(ks), failed = 0;
    if (!n) printf("peak: no x86-64 kernel in this build: skipped\n");
    const int64_t iters = 37;
    for (int i = 0; i < n; i++) {
        const peak_kernel *k = &ks[i];
        float acc[PEAK_MAX_FLOATS], want[PEAK_MAX_FLOATS];
        int count = k->chains * k->lanes, bad = 0;
        for (int j = 0; j < count; j++) acc[j] = want[j] = (float)j * 0.37f - 20.0f;
        peak_run(k, iters, acc);
        for (int j = 0; j < count; j++) {
            for (int64_t it = 0; it < iters; it++) {
                if (k->fused) want[j] = fmaf(want[j], 0.999f, 1e-3f);
                else {
                    volatile float product = want[j] * 0.999f; /* two roundings, as mulps then addps */
                    want[j] = product + 1e-3f;
                }
            }
            bad += memcmp(&acc[j], &want[j], sizeof(float)) != 0;
        }
        printf("peak: %s fp32 kernel (%d chains x %d lanes, %lld steps): %d of %d accumulators differ from "
               "the scalar reference\n", k->isa, k->chains, k->lanes, (long long)iters, bad, count);
        failed += bad != 0;
    }
    peak_kernel bk;
    if (!peak_bf16_kernel(&bk)) {
        printf("peak: this CPU has no AVX512_BF16: the bf16 kernel is not tested\n");
        return failed;
    }
    uint16_t x[32], y[32];
    float acc[PEAK_MAX_FLOATS], want[PEAK_MAX_FLOATS];
    peak_bf16_operands(x, y);
    int count = bk.chains * bk.lanes, bad = 0;
    for (int j = 0; j < count; j++) acc[j] = want[j] = (float)(j - 100);
    peak_run(&bk, iters, acc);
    for (int j = 0; j < count; j++) {
        int lane = j % 16;
        for (int64_t it = 0; it < iters; it++)
            for (int h = 0; h < 2; h++) {
                uint32_t bx = (uint32_t)x[2 * lane + h] << 16, by = (uint32_t)y[2 * lane + h] << 16;
                float fx, fy;
                memcpy(&fx, &bx, 4), memcpy(&fy, &by, 4);
                want[j] += fx * fy;
            }
        bad += memcmp(&acc[j], &want[j], sizeof(float)) != 0;
    }
    printf("peak: %s kernel (vdpbf16ps, %d chains x %d lanes, %lld steps): %d of %d accumulators differ from "
           "the scalar reference\n", bk.isa, bk.chains, bk.lanes, (long long)iters, bad, count);
    return failed + (bad != 0);
}

/* The CPU's model name from /proc/cpuinfo, with its family and model numbers (a virtual machine's
 * name can be as generic as "AMD EPYC"); "unknown CPU" where there is no /proc/cpuinfo. */
static inline void peak_cpu_model(char *out, size_t size) {
    char name[128] = "unknown CPU", family[16] = "", model[16] = "", line[512];
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f) && !(*family && *model && strcmp(name, "unknown CPU"))) {
        char *colon = strchr(line, ':');
        if (!colon) continue;
        char *value = colon + 1 + (colon[1] == ' ');
        value[strcspn(value, "\n")] = 0;
        if (!strncmp(line, "model name", 10)) snprintf(name, sizeof name, "%s", value);
        else if (!strncmp(line, "cpu family", 10)) snprintf(family, sizeof family, "%s", value);
        else if (!strncmp(line, "model\t", 6) || !strncmp(line, "model ", 6)) snprintf(model, sizeof model, "%s", value);
    }
    if (f) fclose(f);
    if (*family && *model) snprintf(out, size, "%s (family %s, model %s)", name, family, model);
    else snprintf(out, size, "%s", name);
}

#endif
