/* numpy 1.x legacy RandomState and CPython set order, as the original ATR generator used them
 * (see numpy_random.h; background in docs/tasks.md, "Random streams"). */
#include "tasks/numpy_random.h"

#include <math.h>
#include <stddef.h>

enum { MT_M = 397 };
#define MT_MATRIX_A 0x9908b0dfu
#define MT_UPPER 0x80000000u
#define MT_LOWER 0x7fffffffu

void ml_np_seed(ml_np_random *r, uint32_t seed) {
    r->mt[0] = seed;
    for (uint32_t i = 1; i < ML_MT_N; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + i;
    r->pos = ML_MT_N;
}

static uint32_t twist(uint32_t a, uint32_t b, uint32_t far) {
    uint32_t y = (a & MT_UPPER) | (b & MT_LOWER);
    return far ^ (y >> 1) ^ ((y & 1u) ? MT_MATRIX_A : 0u);
}

static void regenerate(ml_np_random *r) {
    uint32_t *mt = r->mt;
    int i = 0;
    for (; i < ML_MT_N - MT_M; i++) mt[i] = twist(mt[i], mt[i + 1], mt[i + MT_M]);
    for (; i < ML_MT_N - 1; i++) mt[i] = twist(mt[i], mt[i + 1], mt[i + MT_M - ML_MT_N]);
    mt[ML_MT_N - 1] = twist(mt[ML_MT_N - 1], mt[0], mt[MT_M - 1]);
    r->pos = 0;
}

uint32_t ml_np_u32(ml_np_random *r) {
    if (r->pos >= ML_MT_N) regenerate(r);
    uint32_t y = r->mt[r->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

double ml_np_double(ml_np_random *r) {
    uint32_t a = ml_np_u32(r) >> 5, b = ml_np_u32(r) >> 6;
    return ((double)a * 67108864.0 + (double)b) / 9007199254740992.0;
}

uint32_t ml_np_below(ml_np_random *r, uint32_t n) {
    uint32_t range = n - 1;
    if (range == 0) return 0;
    uint32_t mask = range;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t v;
    while ((v = ml_np_u32(r) & mask) > range) {
    }
    return v;
}

void ml_np_permutation(ml_np_random *r, int n, int32_t *perm) {
    for (int i = 0; i < n; i++) perm[i] = i;
    if (n < 2) return;
    /* ml_np_below(r, i + 1) for i = n-1 .. 1, with the mask kept as i falls and the outputs
     * tempered here: the shuffle of a large pool is most of an MQAR dataset's time */
    uint32_t mask = (uint32_t)(n - 1);
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    for (uint32_t i = (uint32_t)n - 1; i >= 1; i--) {
        while ((mask >> 1) >= i) mask >>= 1;
        uint32_t v;
        do {
            if (r->pos >= ML_MT_N) regenerate(r);
            uint32_t y = r->mt[r->pos++];
            y ^= y >> 11;
            y ^= (y << 7) & 0x9d2c5680u;
            y ^= (y << 15) & 0xefc60000u;
            v = (y ^ (y >> 18)) & mask;
        } while (v > i);
        int32_t x = perm[i];
        perm[i] = perm[v];
        perm[v] = x;
    }
}

double ml_np_exponential(ml_np_random *r) { return -log(1.0 - ml_np_double(r)); }

void ml_np_cdf(const double *p, int k, double *cdf) {
    double acc = 0;
    for (int i = 0; i < k; i++) cdf[i] = acc += p[i];
    double last = cdf[k - 1];
    for (int i = 0; i < k; i++) cdf[i] /= last;
}

void ml_np_dirichlet_ones_cdf(ml_np_random *r, int k, double *cdf) {
    double sum = 0;
    for (int i = 0; i < k; i++) sum += (cdf[i] = ml_np_exponential(r));
    double inv = 1.0 / sum;
    for (int i = 0; i < k; i++) cdf[i] *= inv;
    ml_np_cdf(cdf, k, cdf); /* in place: entry i is read before it is overwritten */
}

int ml_np_search_right(const double *cdf, int k, double u) {
    int lo = 0, hi = k; /* the first index in [lo, hi) with cdf > u */
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (cdf[mid] <= u) lo = mid + 1;
        else hi = mid;
    }
    return lo < k ? lo : k - 1; /* u < 1 = cdf[k-1] always; guard anyway */
}

/* ---- CPython 3.11 set order (Objects/setobject.c: set_add_entry, set_table_resize) ---- */

enum { PY_MINSIZE = 8, PY_LINEAR_PROBES = 9, PY_PERTURB_SHIFT = 5 };

int ml_py_set_table_size(int n) {
    int s = PY_MINSIZE;
    while (s <= 4 * n) s <<= 1;
    return s;
}

/* The slot holding v, or the empty slot where it goes: look at i and, when they exist, the
 * 9 slots after it; then jump to i * 5 + 1 + perturb, perturb losing 5 bits per jump. */
static size_t py_slot(const int32_t *table, size_t mask, int32_t v) {
    size_t perturb = (size_t)v, i = (size_t)v & mask;
    for (;;) {
        size_t probes = i + PY_LINEAR_PROBES <= mask ? PY_LINEAR_PROBES : 0;
        for (size_t j = i; j <= i + probes; j++)
            if (table[j] < 0 || table[j] == v) return j;
        perturb >>= PY_PERTURB_SHIFT;
        i = (i * 5 + 1 + perturb) & mask;
    }
}

int ml_py_set_order(const int32_t *v, int n, int32_t *table, int32_t *out) {
    size_t size = PY_MINSIZE, mask = size - 1;
    int used = 0;
    for (size_t j = 0; j < size; j++) table[j] = -1;
    for (int k = 0; k < n; k++) {
        size_t s = py_slot(table, mask, v[k]);
        if (table[s] >= 0) continue; /* already there */
        table[s] = v[k];
        used++;
        if ((size_t)used * 5 < mask * 3) continue; /* no deletions: fill == used */
        /* Resize to the smallest power of two above 4 x used and re-add the entries in slot
         * order (out holds them meanwhile). */
        int m = 0;
        for (size_t j = 0; j <= mask; j++)
            if (table[j] >= 0) out[m++] = table[j];
        size = PY_MINSIZE;
        while (size <= (size_t)used * 4) size <<= 1;
        mask = size - 1;
        for (size_t j = 0; j < size; j++) table[j] = -1;
        for (int j = 0; j < m; j++) table[py_slot(table, mask, out[j])] = out[j];
    }
    int m = 0;
    for (size_t j = 0; j <= mask; j++)
        if (table[j] >= 0) out[m++] = table[j];
    return m;
}
