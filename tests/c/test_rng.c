/* The Philox generator: known answers, pinned streams, and the moments of its distributions.
 * Every draw is seeded, so each statistical check has one fixed outcome; the tolerances are
 * about 5 standard errors so that they hold for any correct generator, not just this one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/rng.h"
#include "testutil.h"

/* Random123's known-answer vectors for Philox4x32-10 (kat_vectors). */
START_TEST(test_philox_kat) {
    const uint32_t ctr[3][4] = {{0, 0, 0, 0},
                                {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                                {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
    const uint32_t key[3][2] = {{0, 0}, {0xffffffffu, 0xffffffffu}, {0xa4093822u, 0x299f31d0u}};
    const uint32_t want[3][4] = {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u},
                                 {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu},
                                 {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}};
    for (int i = 0; i < 3; i++) {
        uint32_t out[4];
        ml_philox4x32(ctr[i], key[i], out);
        for (int j = 0; j < 4; j++) ck_assert_msg(out[j] == want[i][j], "vector %d word %d: %08x != %08x", i, j, out[j], want[i][j]);
    }
}
END_TEST

/* The first outputs of two named streams, pinned: any change to the key derivation or the
 * output order changes every dataset and initialisation, so it must be deliberate. */
START_TEST(test_pinned_streams) {
    const uint32_t data42[8] = {0x8bf09989u, 0xccfe9ab1u, 0x4b636baau, 0xc7bed2c7u,
                                0xcb425fd4u, 0xf233643du, 0xfe3db46fu, 0x8d0578bfu};
    const uint32_t eval42[4] = {0x024ba1a5u, 0xda05166au, 0x7d6ab4b4u, 0xfe98ca73u};
    ml_rng r;
    ml_rng_init(&r, 42, ML_STREAM_DATA);
    for (int i = 0; i < 8; i++) ck_assert_uint_eq(ml_rng_u32(&r), data42[i]);
    ml_rng_init(&r, 42, ML_STREAM_EVAL);
    for (int i = 0; i < 4; i++) ck_assert_uint_eq(ml_rng_u32(&r), eval42[i]);
    ck_assert_uint_eq(r.seed, 42);
    ck_assert_uint_eq(r.stream, ML_STREAM_EVAL);
}
END_TEST

START_TEST(test_determinism_and_independence) {
    ml_rng a, b, c, d;
    ml_rng_init(&a, 7, ML_STREAM_DATA);
    ml_rng_init(&b, 7, ML_STREAM_DATA);
    ml_rng_init(&c, 7, ML_STREAM_EVAL);
    ml_rng_init(&d, 8, ML_STREAM_DATA);
    int same_c = 0, same_d = 0;
    for (int i = 0; i < 1000; i++) {
        uint32_t x = ml_rng_u32(&a);
        ck_assert_uint_eq(x, ml_rng_u32(&b));
        same_c += x == ml_rng_u32(&c);
        same_d += x == ml_rng_u32(&d);
    }
    ck_assert_int_le(same_c, 1); /* independent streams agree by chance with p = 2^-32 */
    ck_assert_int_le(same_d, 1);
    /* The state is plain data: a copy continues identically (checkpoints rely on this). */
    for (int i = 0; i < 3; i++) ml_rng_normal(&a); /* leaves a Box-Muller spare behind */
    ml_rng saved = a;
    double x1 = ml_rng_normal(&a), x2 = ml_rng_double(&a);
    ck_assert(x1 == ml_rng_normal(&saved) && x2 == ml_rng_double(&saved));
    /* u64 is two consecutive u32, high word first */
    ml_rng_init(&a, 3, 9);
    ml_rng_init(&b, 3, 9);
    uint64_t w = ml_rng_u64(&a);
    uint64_t hi = ml_rng_u32(&b);
    ck_assert(w == ((hi << 32) | ml_rng_u32(&b)));
}
END_TEST

START_TEST(test_uniform_moments) {
    ml_rng r;
    ml_rng_init(&r, 1, ML_STREAM_USER);
    const int n = 200000;
    double s = 0, s2 = 0, d = 0;
    for (int i = 0; i < n; i++) {
        float u = ml_rng_uniform(&r);
        double v = ml_rng_double(&r);
        if (!(u >= 0.0f && u < 1.0f && v >= 0.0 && v < 1.0)) ck_abort_msg("draw %d out of [0, 1): %g %g", i, u, v);
        s += u, s2 += (double)u * u;
        d += v;
    }
    double mean = s / n, var = s2 / n - mean * mean;
    /* SE(mean) = sqrt(1/12/n) = 6.5e-4; SE(var) = sqrt(1/180/n) = 1.7e-4 */
    ck_assert_close(mean, 0.5, 3.3e-3, 0);
    ck_assert_close(var, 1.0 / 12.0, 9e-4, 0);
    ck_assert_close(d / n, 0.5, 3.3e-3, 0);
}
END_TEST

START_TEST(test_below) {
    ml_rng r;
    ml_rng_init(&r, 2, ML_STREAM_USER);
    const uint32_t ns[] = {1, 2, 3, 7, 1000, 0x80000001u, 0xffffffffu};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
        for (int i = 0; i < 20000; i++)
            if (ml_rng_below(&r, ns[k]) >= ns[k]) ck_abort_msg("below(%u) out of range", ns[k]);
    /* Uniformity over 10 buckets: chi-square with 9 degrees of freedom; 33.7 is p = 1e-4. */
    int cnt[10] = {0};
    const int n = 100000;
    for (int i = 0; i < n; i++) cnt[ml_rng_below(&r, 10)]++;
    double chi2 = 0;
    for (int j = 0; j < 10; j++) chi2 += (cnt[j] - n / 10.0) * (cnt[j] - n / 10.0) / (n / 10.0);
    ck_assert_msg(chi2 < 33.7, "chi2 = %g", chi2);
    /* n just above 2^31 is where a biased modulo would be worst: the top half must get ~1/2. */
    int high = 0;
    for (int i = 0; i < n; i++) high += ml_rng_below(&r, 0x80000001u) >= 0x40000000u;
    ck_assert_close((double)high / n, 0.5, 0.008, 0); /* SE 1.6e-3 */
}
END_TEST

START_TEST(test_normal_and_gamma) {
    ml_rng r;
    ml_rng_init(&r, 3, ML_STREAM_USER);
    const int n = 100000;
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++) {
        double x = ml_rng_normal(&r);
        s += x, s2 += x * x;
    }
    ck_assert_close(s / n, 0.0, 0.016, 0);  /* SE 3.2e-3 */
    ck_assert_close(s2 / n, 1.0, 0.022, 0); /* SE 4.5e-3 */
    const double shapes[] = {0.5, 1.0, 3.0};
    for (int k = 0; k < 3; k++) {
        double a = shapes[k], g = 0, g2 = 0;
        for (int i = 0; i < n; i++) {
            double x = ml_rng_gamma(&r, a);
            if (!(x >= 0.0)) ck_abort_msg("gamma(%g) gave %g", a, x);
            g += x, g2 += x * x;
        }
        double mean = g / n, var = g2 / n - mean * mean;
        /* Gamma(a, 1): mean a, variance a; SE(mean) = sqrt(a / n) */
        ck_assert_close(mean, a, 5 * sqrt(a / n), 0);
        /* relative SE of a sample variance: sqrt((excess kurtosis 6/a + 2) / n) <= 1.2% */
        ck_assert_close(var, a, 0.06 * a, 0);
    }
}
END_TEST

START_TEST(test_shuffle) {
    ml_rng r, r2;
    ml_rng_init(&r, 4, ML_STREAM_SHUFFLE);
    ml_rng_init(&r2, 4, ML_STREAM_SHUFFLE);
    int32_t a[100], b[100];
    for (int i = 0; i < 100; i++) a[i] = b[i] = i;
    ml_rng_shuffle_i32(&r, a, 100);
    ml_rng_shuffle_i32(&r2, b, 100);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    int seen[100] = {0}, fixed = 0;
    for (int i = 0; i < 100; i++) {
        ck_assert(a[i] >= 0 && a[i] < 100 && !seen[a[i]]);
        seen[a[i]] = 1;
        fixed += a[i] == i;
    }
    ck_assert_int_lt(fixed, 10); /* a permutation has 1 fixed point on average */
    /* position of element 0 over many shuffles of 4 is uniform */
    int where[4] = {0};
    for (int t = 0; t < 40000; t++) {
        int32_t c[4] = {0, 1, 2, 3};
        ml_rng_shuffle_i32(&r, c, 4);
        for (int i = 0; i < 4; i++)
            if (c[i] == 0) where[i]++;
    }
    for (int i = 0; i < 4; i++) ck_assert_close(where[i] / 40000.0, 0.25, 0.012, 0);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("rng");
    tcase_add_test(tc, test_philox_kat);
    tcase_add_test(tc, test_pinned_streams);
    tcase_add_test(tc, test_determinism_and_independence);
    tcase_add_test(tc, test_uniform_moments);
    tcase_add_test(tc, test_below);
    tcase_add_test(tc, test_normal_and_gamma);
    tcase_add_test(tc, test_shuffle);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
