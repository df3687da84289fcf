#include "core/rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ml_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

void ml_rng_init(ml_rng *r, uint64_t seed, uint64_t stream) {
    uint64_t x = seed;
    uint64_t a = splitmix64(&x);
    x ^= stream * 0xD1B54A32D192ED03ull;
    uint64_t b = splitmix64(&x);
    uint64_t k = a ^ (b << 1);
    r->seed = seed;
    r->stream = stream;
    r->key[0] = (uint32_t)k;
    r->key[1] = (uint32_t)(k >> 32);
    r->counter = 0;
    r->used = 4;
    r->has_spare = 0;
    r->spare = 0;
}

uint32_t ml_rng_u32(ml_rng *r) {
    if (r->used == 4) {
        uint32_t ctr[4] = {(uint32_t)r->counter, (uint32_t)(r->counter >> 32), 0, 0};
        ml_philox4x32(ctr, r->key, r->block);
        r->counter++;
        r->used = 0;
    }
    return r->block[r->used++];
}

uint64_t ml_rng_u64(ml_rng *r) {
    uint64_t hi = ml_rng_u32(r);
    return (hi << 32) | ml_rng_u32(r);
}

float ml_rng_uniform(ml_rng *r) { return (float)(ml_rng_u32(r) >> 8) * (1.0f / 16777216.0f); }

double ml_rng_double(ml_rng *r) { return (double)(ml_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

double ml_rng_normal(ml_rng *r) {
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u1 = 1.0 - ml_rng_double(r); /* (0, 1]: log is finite */
    double u2 = ml_rng_double(r);
    double rad = sqrt(-2.0 * log(u1));
    double th = 6.283185307179586 * u2;
    r->spare = rad * sin(th);
    r->has_spare = 1;
    return rad * cos(th);
}

uint32_t ml_rng_below(ml_rng *r, uint32_t n) {
    uint64_t m = (uint64_t)ml_rng_u32(r) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (low < t) {
            m = (uint64_t)ml_rng_u32(r) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

double ml_rng_gamma(ml_rng *r, double shape) {
    if (shape < 1.0) {
        double u = ml_rng_double(r);
        return ml_rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = ml_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = ml_rng_double(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}

void ml_rng_shuffle_i32(ml_rng *r, int32_t *a, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = ml_rng_below(r, (uint32_t)(i + 1));
        int32_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
