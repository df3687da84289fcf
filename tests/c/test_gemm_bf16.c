/* The bf16 product (src/ops/gemm_bf16.c): the rounding against a plain C reference, the product
 * against double-precision sums (of the bf16-rounded inputs: tight; of the fp32 inputs: the
 * rounding's bound), and the bits of a row or a column alone and at 1 and 2 threads. Where the
 * CPU lacks AVX512_BF16 every entry point must answer MLK_ENOBF16, and the rest is skipped with a
 * message. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "ops/kernels.h"
#include "testutil.h"

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;
static double urand(void) { return ml_test_urand(&rng_state); }
static float *rnd(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) p[i] = (float)(2.0 * urand() - 1.0);
    return p;
}
static float *zeros(size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    ck_assert_ptr_nonnull(p);
    return p;
}
static uint32_t *packed_alloc(int64_t N, int64_t K) {
    size_t bytes = sizeof(uint32_t) * mlk_bf16_packed_size(N, K);
    uint32_t *p = aligned_alloc(64, (bytes + 63) / 64 * 64);
    ck_assert_ptr_nonnull(p);
    memset(p, 0xab, bytes); /* garbage: every word the product reads must be written by the pack */
    return p;
}
static float bf(float f) { return mlk_bf16_to_float(mlk_bf16_round(f)); }
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Where the CPU lacks AVX512_BF16: the error code, and a message that says what is skipped. */
static bool skip_without_bf16(const char *what) {
    if (mlk_have_bf16()) return false;
    float x = 1, w = 1, y = 0;
    uint32_t packed[64];
    ck_assert_int_eq(mlk_gemm_nt_bf16(1, 1, 1, &x, &w, NULL, &y), MLK_ENOBF16);
    ck_assert_int_eq(mlk_gemm_nn_bf16(1, 1, 1, &x, &w, &y), MLK_ENOBF16);
    ck_assert_int_eq(mlk_bf16_pack_nt(1, 1, &w, packed), MLK_ENOBF16);
    ck_assert_int_eq(mlk_gemm_bf16_packed(1, 1, 1, &x, packed, NULL, &y), MLK_ENOBF16);
    printf("test_gemm_bf16: %s skipped: %s\n", what, MLK_BF16_MISSING);
    return true;
}

/* The plain C rounding on values whose bf16 is known, then the kernels' (vcvtne2ps2bf16, read
 * back from a packed column) against it on specials and random values. */
START_TEST(bf16_rounding) {
    ck_assert_uint_eq(mlk_bf16_round(1.0f), 0x3f80);
    ck_assert_uint_eq(mlk_bf16_round(from_bits(0x3f808000u)), 0x3f80); /* a tie: to even (down) */
    ck_assert_uint_eq(mlk_bf16_round(from_bits(0x3f818000u)), 0x3f82); /* a tie: to even (up) */
    ck_assert_uint_eq(mlk_bf16_round(from_bits(0x3f808001u)), 0x3f81); /* above the tie */
    ck_assert_uint_eq(mlk_bf16_round(-from_bits(0x3f80ffffu)), 0xbf81);
    ck_assert_uint_eq(mlk_bf16_round(FLT_MAX), 0x7f80);                /* rounds up to infinity */
    ck_assert_uint_eq(mlk_bf16_round(-INFINITY), 0xff80);
    ck_assert_uint_eq(mlk_bf16_round(1e-40f), 0x0000);  /* a denormal: zero */
    ck_assert_uint_eq(mlk_bf16_round(-1e-40f), 0x8000); /* of its sign */
    ck_assert_uint_eq(mlk_bf16_round(from_bits(0x7f800001u)), 0x7fc0); /* a signalling NaN, quieted */
    ck_assert(isnan(mlk_bf16_to_float(mlk_bf16_round(NAN))));
    if (skip_without_bf16("the kernels' rounding")) return;
    enum { K = 70 }; /* past one block of 16 pairs, odd number of pairs */
    float w[K];
    const float specials[] = {0.0f, -0.0f, 1.0f, from_bits(0x3f808000u), from_bits(0x3f818000u),
                              from_bits(0x3f808001u), FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, 1e-40f, -1e-40f,
                              FLT_MIN, from_bits(0x00ffffffu), 3.0e38f, 65504.0f};
    int ns = (int)(sizeof specials / sizeof specials[0]);
    for (int k = 0; k < K; k++) w[k] = k < ns ? specials[k] : (float)((2.0 * urand() - 1.0) * pow(2.0, 40.0 * urand() - 20.0));
    uint32_t *packed = packed_alloc(1, K);
    ck_assert_int_eq(mlk_bf16_pack_nt(1, K, w, packed), 0);
    for (int k = 0; k < K; k++) {
        uint32_t word = packed[(k / 2) * 16];
        uint16_t got = (uint16_t)(k % 2 ? word >> 16 : word & 0xffffu);
        ck_assert_msg(got == mlk_bf16_round(w[k]), "w[%d] = %a: the kernel rounds to 0x%04x, the reference to 0x%04x",
                      k, (double)w[k], got, mlk_bf16_round(w[k]));
    }
    free(packed);
}
END_TEST

/* y against double sums: of the rounded inputs within the fp32 summation's bound
 * (2·pairs + 2 roundings of 2^-24 relative to Σ|p| + |bias| + 1), and of the fp32 inputs within
 * the rounding of both factors on top (bf16 keeps 8 significant bits: each factor within 2^-8
 * relative, a product within 2^-7 + 2^-16 of Σ|x·w|); then the bits of rows from a and of
 * columns from c alone, of the product on wᵀ (mlk_gemm_nn_bf16), on xᵀ and wᵀ (mlk_gemm_tn_bf16:
 * the same pairs in the same order) and of a prepacked w. */
static void bf16_check(int64_t M, int64_t N, int64_t K, bool with_bias) {
    float *x = rnd((size_t)(M * K)), *w = rnd((size_t)(N * K)), *b = with_bias ? rnd((size_t)N) : NULL;
    float *y = zeros((size_t)(M * N)), *part = zeros((size_t)(M * N));
    ck_assert_int_eq(mlk_gemm_nt_bf16(M, N, K, x, w, b, y), 0);
    double sum_bound = (double)(2 * ((K + 1) / 2) + 2) * 0x1p-24;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double ref = b ? b[j] : 0.0, ref32 = ref, mag = fabs(ref), mag32 = 0.0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)bf(x[i * K + k]) * bf(w[j * K + k]);
                double p32 = (double)x[i * K + k] * w[j * K + k];
                ref += p, mag += fabs(p), ref32 += p32, mag32 += fabs(p32);
            }
            double got = y[i * N + j];
            ck_assert_msg(fabs(got - ref) <= sum_bound * (mag + 1.0),
                          "bf16 %lldx%lldx%lld: y[%lld,%lld] = %.9g, the bf16 inputs' sum %.9g", (long long)M,
                          (long long)N, (long long)K, (long long)i, (long long)j, got, ref);
            ck_assert_msg(fabs(got - ref32) <= 0x1.01p-7 * mag32 + sum_bound * (mag + 1.0),
                          "bf16 %lldx%lldx%lld: y[%lld,%lld] = %.9g, the fp32 inputs' sum %.9g", (long long)M,
                          (long long)N, (long long)K, (long long)i, (long long)j, got, ref32);
        }
    for (int64_t a = 1; a < M; a += 2) {
        ck_assert_int_eq(mlk_gemm_nt_bf16(M - a, N, K, x + a * K, w, b, part), 0);
        ck_assert_msg(!memcmp(part, y + a * N, sizeof(float) * (size_t)((M - a) * N)),
                      "bf16 %lldx%lldx%lld: rows from %lld alone are not the bits", (long long)M, (long long)N,
                      (long long)K, (long long)a);
    }
    for (int64_t c = 1; c < N; c += 7) {
        ck_assert_int_eq(mlk_gemm_nt_bf16(M, N - c, K, x, w + c * K, b ? b + c : NULL, part), 0);
        for (int64_t i = 0; i < M; i++)
            ck_assert_msg(!memcmp(part + i * (N - c), y + i * N + c, sizeof(float) * (size_t)(N - c)),
                          "bf16 %lldx%lldx%lld: columns from %lld alone are not the bits", (long long)M, (long long)N,
                          (long long)K, (long long)c);
    }
    float *wk = zeros((size_t)(K * N)); /* wᵀ, for the nn form: the same packed words, so the same bits */
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++) wk[k * N + j] = w[j * K + k];
    uint32_t *pnt = packed_alloc(N, K), *pnn = packed_alloc(N, K);
    ck_assert_int_eq(mlk_bf16_pack_nt(N, K, w, pnt), 0);
    ck_assert_int_eq(mlk_bf16_pack_nn(N, K, wk, pnn), 0);
    ck_assert_msg(!memcmp(pnt, pnn, sizeof(uint32_t) * (mlk_bf16_packed_size(N, K) - 1)),
                  "bf16 %lldx%lld: w and wᵀ pack to different words", (long long)N, (long long)K);
    ck_assert_int_eq(mlk_gemm_bf16_packed(M, N, K, x, pnn, b, part), 0);
    ck_assert_msg(!memcmp(part, y, sizeof(float) * (size_t)(M * N)), "bf16 %lldx%lldx%lld: prepacked, not the bits",
                  (long long)M, (long long)N, (long long)K);
    float *xk = zeros((size_t)(K * M)); /* xᵀ, for the tn form (the weight gradient's) */
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) xk[k * M + i] = x[i * K + k];
    if (!b) {
        ck_assert_int_eq(mlk_gemm_nn_bf16(M, N, K, x, wk, part), 0);
        ck_assert_msg(!memcmp(part, y, sizeof(float) * (size_t)(M * N)), "bf16_nn %lldx%lldx%lld: not nt's bits",
                      (long long)M, (long long)N, (long long)K);
        ck_assert_int_eq(mlk_gemm_tn_bf16(M, N, K, xk, wk, false, part), 0);
        ck_assert_msg(!memcmp(part, y, sizeof(float) * (size_t)(M * N)), "bf16_tn %lldx%lldx%lld: not nt's bits",
                      (long long)M, (long long)N, (long long)K);
    }
    free(x), free(w), free(b), free(y), free(part), free(wk), free(xk), free(pnt), free(pnn);
}

/* Tails of every kind: rows past a tile of 4, columns past a vector of 16 and a panel of 64, K = 0,
 * odd K (a half-filled last pair) and K past a block of 16 pairs. */
START_TEST(gemm_bf16_shapes) {
    if (skip_without_bf16("the product")) return;
    const int64_t Ms[] = {1, 3, 4, 6, 9}, Ns[] = {1, 15, 17, 64, 70}, Ks[] = {0, 1, 7, 16, 33, 64};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 5; b++)
            for (int c = 0; c < 6; c++) bf16_check(Ms[a], Ns[b], Ks[c], (a + b + c) % 2);
    bf16_check(37, 130, 256, true);
    bf16_check(130, 70, 33, false); /* xᵀ of the tn form in more than one panel of 64 */
}
END_TEST

/* Above the threading threshold, both ways of splitting (rows; panels), 2 threads against 1. */
START_TEST(gemm_bf16_threads) {
    if (skip_without_bf16("the thread check")) return;
    const int64_t shapes[][3] = {{301, 130, 40}, {9, 1100, 120}};
    for (int s = 0; s < 2; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *x = rnd((size_t)(M * K)), *w = rnd((size_t)(N * K)), *b = rnd((size_t)N);
        float *y1 = zeros((size_t)(M * N)), *y2 = zeros((size_t)(M * N));
        ml_set_threads(2);
        ck_assert_int_eq(mlk_gemm_nt_bf16(M, N, K, x, w, b, y2), 0);
        ml_set_threads(1);
        ck_assert_int_eq(mlk_gemm_nt_bf16(M, N, K, x, w, b, y1), 0);
        ck_assert_msg(!memcmp(y1, y2, sizeof(float) * (size_t)(M * N)), "bf16 %lldx%lldx%lld: 1 and 2 threads differ",
                      (long long)M, (long long)N, (long long)K);
        ml_set_threads(2); /* a row alone at 2 threads: the bits of the whole product at 1 */
        ck_assert_int_eq(mlk_gemm_nt_bf16(1, N, K, x + (M - 1) * K, w, b, y2), 0);
        ml_set_threads(1);
        ck_assert_msg(!memcmp(y2, y1 + (M - 1) * N, sizeof(float) * (size_t)N), "bf16: the last row alone differs");
        free(x), free(w), free(b), free(y1), free(y2);
    }
    /* the weight gradient's form: dyᵀ·x summed over K = 301 rows, 2 threads against 1 */
    int64_t M = 70, N = 130, K = 301;
    float *a = rnd((size_t)(K * M)), *bm = rnd((size_t)(K * N));
    float *y1 = zeros((size_t)(M * N)), *y2 = zeros((size_t)(M * N));
    ml_set_threads(2);
    ck_assert_int_eq(mlk_gemm_tn_bf16(M, N, K, a, bm, false, y2), 0);
    ml_set_threads(1);
    ck_assert_int_eq(mlk_gemm_tn_bf16(M, N, K, a, bm, false, y1), 0);
    ck_assert_msg(!memcmp(y1, y2, sizeof(float) * (size_t)(M * N)), "bf16_tn: 1 and 2 threads differ");
    free(a), free(bm), free(y1), free(y2);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("gemm_bf16");
    TCase *tc = tcase_create("bf16");
    tcase_add_test(tc, bf16_rounding);
    tcase_add_test(tc, gemm_bf16_shapes);
    tcase_add_test(tc, gemm_bf16_threads);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
