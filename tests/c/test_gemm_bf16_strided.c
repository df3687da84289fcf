/* The general bf16 product mlk_gemm_bf16 (src/ops/gemm_bf16.c; attention's per-sequence products)
 * and the accumulate flag of mlk_gemm_tn_bf16: against a double sum of the bf16-rounded inputs for
 * both layouts of w and every layout of x; bit for bit against the contiguous bf16 kernels (the
 * same pairs, the same sums); alpha, accumulate and ldy > N as the epilogue's own arithmetic on
 * those bits; a row (or a column) computed alone against the same row in a batch; 1 against 2
 * threads. Where the CPU lacks AVX512_BF16 both entry points must answer MLK_ENOBF16. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
#include "ops/kernels.h"
#include "testutil.h"

static unsigned long long rng_state = 0x5851f42d4c957f2dULL;
static float *rnd(size_t n) {
    float *p = malloc(sizeof(float) * (n ? n : 1));
    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) p[i] = (float)(2.0 * ml_test_urand(&rng_state) - 1.0);
    return p;
}
static float bf(float f) { return mlk_bf16_to_float(mlk_bf16_round(f)); }
static bool same(const float *a, const float *b, size_t n) { return !memcmp(a, b, sizeof(float) * n); }

/* A product's operands: the logical x (M, K) and b (K, N) stored with the given strides. */
typedef struct {
    int64_t M, N, K, xr, xc, ldw, ldy;
    bool w_kn;
    float *x, *w; /* storage */
} operands;

static float x_at(const operands *o, int64_t i, int64_t k) { return o->x[i * o->xr + k * o->xc]; }
static float b_at(const operands *o, int64_t k, int64_t j) {
    return o->w_kn ? o->w[k * o->ldw + j] : o->w[j * o->ldw + k];
}

/* x stored as rows (xc = 1, rows xpad floats apart), as columns (xr = 1), or neither (both
 * strides > 1); w as (N, K) or (K, N) rows wpad floats longer than they need. */
static operands make(int64_t M, int64_t N, int64_t K, int xlayout, bool w_kn, int64_t pad) {
    operands o = {.M = M, .N = N, .K = K, .w_kn = w_kn};
    if (xlayout == 0) o.xr = K + pad, o.xc = 1;
    else if (xlayout == 1) o.xr = 1, o.xc = M + pad;
    else o.xr = 2 * K + 1, o.xc = 2;
    o.x = rnd((size_t)(M * K * 2 + (M + K) * (pad + 2) + 4));
    o.ldw = (w_kn ? N : K) + pad;
    o.w = rnd((size_t)((w_kn ? K : N) * o.ldw + 1));
    o.ldy = N + pad;
    return o;
}

static int run(const operands *o, float alpha, bool acc, float *y) {
    return mlk_gemm_bf16(o->M, o->N, o->K, o->x, o->xr, o->xc, o->w, o->ldw, o->w_kn, alpha, acc, y, o->ldy);
}

/* Against Σ bf(x)·bf(b) in double: each of the ⌈K/2⌉ pair steps rounds twice in fp32, so
 * (2·⌈K/2⌉ + 2)·2⁻²⁴·(|alpha|·Σ|products| + |old y| + 1) bounds the error; columns past N in a row
 * of y are never written. */
static void check_reference(const operands *o, float alpha, bool acc) {
    int64_t M = o->M, N = o->N, K = o->K;
    size_t ny = (size_t)(M * o->ldy);
    float *y = rnd(ny), *old = malloc(sizeof(float) * ny);
    memcpy(old, y, sizeof(float) * ny);
    ck_assert_int_eq(run(o, alpha, acc, y), 0);
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int64_t k = 0; k < K; k++) {
                double p = (double)bf(x_at(o, i, k)) * (double)bf(b_at(o, k, j));
                s += p, mag += fabs(p);
            }
            double prev = acc ? old[i * o->ldy + j] : 0.0, ref = prev + alpha * s;
            double tol = (2.0 * ((K + 1) / 2) + 2) * ldexp(1.0, -24) * (fabs(alpha) * mag + fabs(prev) + 1.0);
            ck_assert_msg(fabs(y[i * o->ldy + j] - ref) <= tol,
                          "%lldx%lldx%lld (xr %lld, xc %lld, w_kn %d, alpha %g, acc %d) [%lld,%lld]: %.9g vs %.9g",
                          (long long)M, (long long)N, (long long)K, (long long)o->xr, (long long)o->xc, o->w_kn,
                          (double)alpha, acc, (long long)i, (long long)j, (double)y[i * o->ldy + j], ref);
        }
        for (int64_t j = N; j < o->ldy; j++) ck_assert(same(&y[i * o->ldy + j], &old[i * o->ldy + j], 1));
    }
    free(y), free(old);
}

/* The contiguous bits of the same product: x copied into rows, w into (N, K), mlk_gemm_nt_bf16. */
static void contiguous_bits(const operands *o, float *y) {
    int64_t M = o->M, N = o->N, K = o->K;
    float *xc = rnd((size_t)(M * K)), *wc = rnd((size_t)(N * K));
    for (int64_t i = 0; i < M; i++)
        for (int64_t k = 0; k < K; k++) xc[i * K + k] = x_at(o, i, k);
    for (int64_t j = 0; j < N; j++)
        for (int64_t k = 0; k < K; k++) wc[j * K + k] = b_at(o, k, j);
    ck_assert_int_eq(mlk_gemm_nt_bf16(M, N, K, xc, wc, NULL, y), 0);
    free(xc), free(wc);
}

/* Every layout's bits are the contiguous kernel's; alpha and accumulate are the epilogue's
 * arithmetic on them (alpha·sum, then old + that), bit for bit. */
static void check_bits(const operands *o, float alpha) {
    int64_t M = o->M, N = o->N;
    size_t ny = (size_t)(M * o->ldy);
    float *ref = rnd((size_t)(M * N)), *y = rnd(ny), *old = malloc(sizeof(float) * ny);
    contiguous_bits(o, ref);
    ck_assert_int_eq(run(o, 1.0f, false, y), 0);
    for (int64_t i = 0; i < M; i++)
        ck_assert_msg(same(y + i * o->ldy, ref + i * N, (size_t)N), "row %lld", (long long)i);
    memcpy(old, y, sizeof(float) * ny);
    ck_assert_int_eq(run(o, alpha, true, y), 0);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float want = old[i * o->ldy + j] + alpha * ref[i * N + j];
            ck_assert_msg(same(&y[i * o->ldy + j], &want, 1), "alpha %g, accumulate [%lld,%lld]", (double)alpha,
                          (long long)i, (long long)j);
        }
    free(ref), free(y), free(old);
}

/* Row i alone (M = 1 from its own start) and column j alone (N = 1) give the batch's bits. */
static void check_alone(const operands *o) {
    int64_t M = o->M, N = o->N;
    float *y = rnd((size_t)(M * o->ldy)), *one = rnd((size_t)o->ldy);
    ck_assert_int_eq(run(o, 0.5f, false, y), 0);
    for (int64_t i = 0; i < M; i += M > 5 ? 5 : 1) {
        operands r = *o;
        r.M = 1, r.x = o->x + i * o->xr;
        ck_assert_int_eq(run(&r, 0.5f, false, one), 0);
        ck_assert_msg(same(one, y + i * o->ldy, (size_t)N), "row %lld alone (xr %lld, xc %lld)", (long long)i,
                      (long long)o->xr, (long long)o->xc);
    }
    for (int64_t j = 0; j < N; j += N > 7 ? 7 : 1) {
        operands c = *o;
        float *col = rnd((size_t)M);
        c.N = 1, c.ldy = 1, c.w = o->w_kn ? o->w + j : o->w + j * o->ldw;
        ck_assert_int_eq(run(&c, 0.5f, false, col), 0);
        for (int64_t i = 0; i < M; i++) ck_assert(same(&col[i], &y[i * o->ldy + j], 1));
        free(col);
    }
    free(y), free(one);
}

static void release(operands *o) { free(o->x), free(o->w); }

static bool skip_without_bf16(void) {
    if (mlk_have_bf16()) return false;
    float x = 1, w = 1, y = 0;
    ck_assert_int_eq(mlk_gemm_bf16(1, 1, 1, &x, 1, 1, &w, 1, false, 1.0f, false, &y, 1), MLK_ENOBF16);
    ck_assert_int_eq(mlk_gemm_tn_bf16(1, 1, 1, &x, &w, true, &y), MLK_ENOBF16);
    printf("test_gemm_bf16_strided: skipped: %s\n", MLK_BF16_MISSING);
    return true;
}

/* Attention's shapes (L = 37; d_h = 16, 64; K = L or d_h) and tails: odd K (the last pair half
 * zero), K = 0, N past a panel, every layout of x, both of w, padding in every stride. */
START_TEST(strided_against_reference_and_bits) {
    if (skip_without_bf16()) return;
    const int64_t shapes[][3] = {{37, 37, 16}, {37, 16, 37}, {37, 64, 37}, {37, 37, 64}, {5, 70, 7},
                                 {9, 3, 1},    {4, 17, 0},   {1, 130, 33}, {70, 20, 5}};
    int n = (int)(sizeof shapes / sizeof shapes[0]);
    for (int s = 0; s < n; s++)
        for (int xl = 0; xl < 3; xl++)
            for (int kn = 0; kn < 2; kn++) {
                operands o = make(shapes[s][0], shapes[s][1], shapes[s][2], xl, kn, (s + xl) % 3);
                check_reference(&o, 1.0f, false);
                check_reference(&o, 0.125f, true);
                check_reference(&o, -0.3f, false);
                check_bits(&o, 0.3f);
                check_alone(&o);
                release(&o);
            }
}
END_TEST

/* Above the threading threshold (a million multiply-adds): 2 threads give 1 thread's bits, for x
 * as rows and as columns. */
START_TEST(strided_threads) {
    if (skip_without_bf16()) return;
    for (int xl = 0; xl < 2; xl++) {
        operands o = make(150, 100, 80, xl, xl == 1, 3);
        size_t ny = (size_t)(o.M * o.ldy);
        float *y1 = calloc(ny, sizeof(float)), *y2 = calloc(ny, sizeof(float));
        ml_set_threads(2);
        ck_assert_int_eq(run(&o, 0.7f, false, y2), 0);
        ml_set_threads(1);
        ck_assert_int_eq(run(&o, 0.7f, false, y1), 0);
        ck_assert(same(y1, y2, ny));
        free(y1), free(y2);
        release(&o);
    }
}
END_TEST

/* mlk_gemm_tn_bf16's accumulate: old y plus the overwriting product's sum, bit for bit (the bits
 * the scratch-and-add of before gave), at 1 and 2 threads. */
START_TEST(tn_accumulate) {
    if (skip_without_bf16()) return;
    const int64_t shapes[][3] = {{64, 64, 37}, {70, 130, 301}, {3, 17, 1}};
    for (int s = 0; s < 3; s++) {
        int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float *a = rnd((size_t)(K * M)), *b = rnd((size_t)(K * N)), *sum = rnd((size_t)(M * N));
        float *old = rnd((size_t)(M * N)), *y = malloc(sizeof(float) * (size_t)(M * N));
        ck_assert_int_eq(mlk_gemm_tn_bf16(M, N, K, a, b, false, sum), 0);
        for (int t = 1; t <= 2; t++) {
            ml_set_threads(t);
            memcpy(y, old, sizeof(float) * (size_t)(M * N));
            ck_assert_int_eq(mlk_gemm_tn_bf16(M, N, K, a, b, true, y), 0);
            for (int64_t i = 0; i < M * N; i++) {
                float want = old[i] + sum[i];
                ck_assert_msg(same(&y[i], &want, 1), "%lldx%lldx%lld at %d threads: element %lld", (long long)M,
                              (long long)N, (long long)K, t, (long long)i);
            }
        }
        ml_set_threads(1);
        free(a), free(b), free(sum), free(old), free(y);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("gemm_bf16_strided");
    TCase *tc = tcase_create("strided");
    tcase_add_test(tc, strided_against_reference_and_bits);
    tcase_add_test(tc, strided_threads);
    tcase_add_test(tc, tn_accumulate);
    suite_add_tcase(s, tc);
    return ml_test_run(s);
}
