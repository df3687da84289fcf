/* The linear layers' product in bf16 (docs/kernels.md, "bf16 products"): y = x·wᵀ + bias with x
 * and w rounded to bf16 and the products summed in fp32 by AVX512_BF16's dot product `vdpbf16ps`,
 * which adds two bf16 products to each fp32 lane: twice the multiply-adds of an fp32 FMA.
 *
 *   y[i,j] = bias[j] + Σ_{k pairs} (bf(x[i,2k])·bf(w[j,2k]) + bf(x[i,2k+1])·bf(w[j,2k+1]))
 *
 * summed in pair order from zero (a product of two bf16 is exact in fp32; the instruction rounds
 * the sums). bf() rounds fp32 to bf16 to the nearest, ties to even, a denormal input counting as a
 * zero of its sign and a NaN staying a (quiet) NaN: `vcvtne2ps2bf16`, and mlk_bf16_round for
 * reference. As in gemm.c, every row and every column goes through the same instructions
 * whatever the rows and columns beside it and the thread count, so a row's bits are its own.
 *
 * Layout. w is packed once (mlk_bf16_pack_nt from (N, K), mlk_bf16_pack_nn from (K, N): the same
 * array) in panels of 64 columns, the last as wide as the vectors its columns fill: for each pair
 * of k, 16 columns' (w[j,2k], w[j,2k+1]) in one 32-bit word each, the even k in the low half,
 * zero past N and past K. x is converted to pairs the same way, a row at a time (or, where its
 * rows are adjacent and its k far apart, packed in panels as w is). Tiles of 4 rows x one panel
 * keep 16 fp32 accumulators in registers, as gemm.c; the sum is then scaled by alpha, the bias
 * added and the old y added where the call accumulates (mlk_gemm's general form: mlk_gemm_bf16,
 * for attention's per-sequence products on strided operands).
 *
 * Only the functions that run AVX-512 carry the target attribute (BF16_TARGET): the file is
 * compiled with the project's flags, so the rest of the build stays baseline x86-64, and a CPU
 * without AVX512_BF16 never runs an instruction it lacks (the entry points check first and return
 * MLK_ENOBF16). */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define BF16_X86 1
#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define BF16_INLINE static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

enum { BF_ROWS = 4, BF_LANES = 16, BF_VECS = 4, BF_COLS = BF_LANES * BF_VECS };

/* How a product writes y: rows ldy apart; the sum times alpha, plus bias[j], plus the old y
 * where accumulate (gemm.c's order: alpha, then the bias, then the old y). */
typedef struct {
    int64_t ldy;
    float alpha;
    const float *bias;
    bool accumulate;
} bf16_io;

static bool cpu_has_bf16(void) {
#ifdef BF16_X86
    __builtin_cpu_init(); /* also checks that the OS saves the zmm state */
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
#else
    return false;
#endif
}

/* Read once: 0 not yet, 1 yes, 2 no. MECHLAB_NO_BF16 (set and not "0" or empty) answers no on any
 * CPU, so that the tests can take the path of a CPU without the instruction on one that has it. */
static atomic_int have_bf16_state;

bool mlk_have_bf16(void) {
    int s = atomic_load(&have_bf16_state);
    if (!s) {
        const char *off = getenv("MECHLAB_NO_BF16");
        bool forced_off = off && off[0] && strcmp(off, "0");
        s = !forced_off && cpu_has_bf16() ? 1 : 2;
        atomic_store(&have_bf16_state, s);
    }
    return s == 1;
}

uint16_t mlk_bf16_round(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); /* NaN: quiet, sign kept */
    if ((u & 0x7f800000u) == 0) u &= 0x80000000u; /* a denormal counts as a zero of its sign */
    u += 0x7fffu + ((u >> 16) & 1u);               /* to nearest, ties to even (may carry to infinity) */
    return (uint16_t)(u >> 16);
}

float mlk_bf16_to_float(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline int64_t bf16_panel_width(int64_t N, int64_t j0) {
    int64_t n = N - j0 < BF_COLS ? N - j0 : BF_COLS;
    return (n + BF_LANES - 1) / BF_LANES * BF_LANES;
}

size_t mlk_bf16_packed_size(int64_t N, int64_t K) {
    int64_t nb = (N + BF_COLS - 1) / BF_COLS, kp = (K + 1) / 2;
    return (size_t)(nb * kp * BF_COLS) + 1; /* never zero */
}

#ifdef BF16_X86
/* The mask of the first n (0..16) lanes. */
static inline __mmask16 lanes_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

/* 16 pairs of the 32 floats s[0..n) (zero past n): word q is (bf(s[2q]), bf(s[2q+1])). */
BF16_INLINE __m512i pairs_of(const float *s, int64_t n) {
    __m512 lo = _mm512_maskz_loadu_ps(lanes_mask(n), s), hi = _mm512_maskz_loadu_ps(lanes_mask(n - 16), s + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(hi, lo); /* words 0..15 from lo, 16..31 from hi */
}

/* 16 x 16 transpose of 32-bit words: r[i] lane c becomes r[c] lane i. */
BF16_INLINE void transpose16(__m512i r[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4g + c], 128-bit lane L: column 4L + c of rows 4g..4g+3 */
    for (int g = 0; g < 16; g += 4) {
        u[g] = _mm512_unpacklo_epi64(t[g], t[g + 2]);
        u[g + 1] = _mm512_unpackhi_epi64(t[g], t[g + 2]);
        u[g + 2] = _mm512_unpacklo_epi64(t[g + 1], t[g + 3]);
        u[g + 3] = _mm512_unpackhi_epi64(t[g + 1], t[g + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i a = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i b = _mm512_shuffle_i32x4(u[c], u[4 + c], _MM_SHUFFLE(3, 2, 3, 2));
        __m512i a2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(1, 0, 1, 0));
        __m512i b2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], _MM_SHUFFLE(3, 2, 3, 2));
        r[c] = _mm512_shuffle_i32x4(a, a2, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + c] = _mm512_shuffle_i32x4(a, a2, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + c] = _mm512_shuffle_i32x4(b, b2, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + c] = _mm512_shuffle_i32x4(b, b2, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* Panel p from w (N, K), its rows ld apart: 16 columns at a time, 16 pairs of k at a time, each
 * row converted to pairs in a register and the 16 x 16 block of words transposed in registers. */
BF16_TARGET static void pack_nt_panel(int64_t N, int64_t K, const float *w, int64_t ld, uint32_t *packed,
                                      int64_t p) {
    int64_t kp = (K + 1) / 2, j0 = p * BF_COLS, pw = bf16_panel_width(N, j0);
    uint32_t *wp = packed + p * kp * BF_COLS;
    for (int64_t e = 0; e < pw; e += BF_LANES)
        for (int64_t q0 = 0; q0 < kp; q0 += 16) {
            __m512i r[16];
            for (int i = 0; i < 16; i++)
                r[i] = j0 + e + i < N ? pairs_of(w + (j0 + e + i) * ld + 2 * q0, K - 2 * q0) : _mm512_setzero_si512();
            transpose16(r);
            for (int q = 0; q < 16 && q0 + q < kp; q++) _mm512_store_si512(wp + (q0 + q) * pw + e, r[q]);
        }
}

/* 16 bf16 of s[0..n) (zero past n), each widened to the low half of a 32-bit word. */
BF16_INLINE __m512i halves_of(const float *s, int64_t n) {
    __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(lanes_mask(n), s));
    return _mm512_cvtepu16_epi32((__m256i)h);
}

/* Panel p from w (K, N), its rows ld apart: rows 2k and 2k + 1 of its columns, interleaved into pairs. */
BF16_TARGET static void pack_nn_panel(int64_t N, int64_t K, const float *w, int64_t ld, uint32_t *packed,
                                      int64_t p) {
    int64_t kp = (K + 1) / 2, j0 = p * BF_COLS, pw = bf16_panel_width(N, j0);
    uint32_t *wp = packed + p * kp * BF_COLS;
    for (int64_t q = 0; q < kp; q++)
        for (int64_t e = 0; e < pw; e += BF_LANES) {
            int64_t n = N - j0 - e;
            __m512i even = halves_of(w + 2 * q * ld + j0 + e, n);
            __m512i odd = 2 * q + 1 < K ? halves_of(w + (2 * q + 1) * ld + j0 + e, n) : _mm512_setzero_si512();
            _mm512_store_si512(wp + q * pw + e, _mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
        }
}

/* Rows [i0, i1) of x (M, K), its rows ld apart, as pairs, kp words a row. */
BF16_TARGET static void pack_rows(int64_t K, const float *x, int64_t ld, uint32_t *xb, int64_t i0, int64_t i1) {
    int64_t kp = (K + 1) / 2;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t q0 = 0; q0 < kp; q0 += 16)
            _mm512_mask_storeu_epi32(xb + i * kp + q0, lanes_mask(kp - q0), pairs_of(x + i * ld + 2 * q0, K - 2 * q0));
}

/* R rows x V vectors of y from column j0; the panel's rows are 16·V words apart; pair q of row r
 * of x is xb[r·rs + q·qs] (rows of pairs: rs = kp, qs = 1; x packed in panels: rs = 1, qs = the
 * panel's width). */
BF16_INLINE void bf16_block(int R, int V, int64_t kp, const uint32_t *xb, int64_t rs, int64_t qs, const uint32_t *wp,
                            const bf16_io *io, float *y, int64_t N, int64_t j0) {
    /* read once: y's stores could alias *io for all the compiler knows */
    const int64_t ldy = io->ldy;
    const float alpha = io->alpha, *bias = io->bias;
    const bool accumulate = io->accumulate;
    __m512 acc[BF_ROWS][BF_VECS];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            acc[r][v] = _mm512_setzero_ps();
            /* y's lines fetched for writing while the sum runs: an accumulating call reads them
             * (the weight gradient's rows are far apart and cold), and every call writes them */
            __builtin_prefetch(y + r * ldy + j0 + BF_LANES * v, 1, 3);
        }
    for (int64_t q = 0; q < kp; q++) {
        __m512bh w[BF_VECS];
        for (int v = 0; v < V; v++) w[v] = (__m512bh)_mm512_load_si512(wp + q * BF_LANES * V + BF_LANES * v);
        for (int r = 0; r < R; r++) {
            __m512bh a = (__m512bh)_mm512_set1_epi32((int)xb[r * rs + q * qs]);
            for (int v = 0; v < V; v++) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], a, w[v]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            int64_t j = j0 + BF_LANES * v;
            __mmask16 m = lanes_mask(N - j);
            float *o = y + r * ldy + j;
            __m512 s = acc[r][v];
            if (alpha != 1.0f) s = _mm512_mul_ps(s, _mm512_set1_ps(alpha));             /* after the sum, as gemm.c */
            if (bias) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, bias + j));         /* the bias after the sum */
            if (accumulate) s = _mm512_add_ps(_mm512_maskz_loadu_ps(m, o), s); /* the old y plus the whole sum */
            _mm512_mask_storeu_ps(o, m, s);
        }
}

/* The tiles of panels [p0, p1) x rows [i0, i1) (i0 a multiple of 4), panel outer. x is rows of
 * pairs, or (xpanels) packed as w is, its rows as the columns of panels of 64 (a tile of 4 rows
 * never crosses a panel's edge). */
BF16_TARGET static void bf16_part(int64_t M, int64_t N, int64_t K, const uint32_t *xb, bool xpanels,
                                  const uint32_t *packed, const bf16_io *io, float *y, int64_t p0, int64_t p1,
                                  int64_t i0, int64_t i1) {
    int64_t kp = (K + 1) / 2;
    for (int64_t p = p0; p < p1; p++) {
        int64_t j0 = p * BF_COLS, vr = (N - j0 + BF_LANES - 1) / BF_LANES;
        int V = vr > BF_VECS ? BF_VECS : (int)vr;
        const uint32_t *wp = packed + p * kp * BF_COLS;
        for (int64_t i = i0; i < i1;) {
            int R = i + BF_ROWS <= i1 ? BF_ROWS : 1; /* the last rows one at a time */
            int64_t rs = kp, qs = 1;
            const uint32_t *xi = xb + i * kp;
            if (xpanels) {
                int64_t a0 = i / BF_COLS * BF_COLS;
                rs = 1, qs = bf16_panel_width(M, a0), xi = xb + a0 * kp + (i - a0);
            }
            float *yi = y + i * io->ldy;
            if (R == BF_ROWS) switch (V) {
                case 4: bf16_block(4, 4, kp, xi, rs, qs, wp, io, yi, N, j0); break;
                case 3: bf16_block(4, 3, kp, xi, rs, qs, wp, io, yi, N, j0); break;
                case 2: bf16_block(4, 2, kp, xi, rs, qs, wp, io, yi, N, j0); break;
                default: bf16_block(4, 1, kp, xi, rs, qs, wp, io, yi, N, j0);
                }
            else switch (V) {
                case 4: bf16_block(1, 4, kp, xi, rs, qs, wp, io, yi, N, j0); break;
                case 3: bf16_block(1, 3, kp, xi, rs, qs, wp, io, yi, N, j0); break;
                case 2: bf16_block(1, 2, kp, xi, rs, qs, wp, io, yi, N, j0); break;
                default: bf16_block(1, 1, kp, xi, rs, qs, wp, io, yi, N, j0);
                }
            i += R;
        }
    }
}
#endif

/* Packs every panel of w (N, K), or (nn) of w given as (K, N), its rows ld apart (on the threads
 * where w is large). */
static int bf16_pack(int64_t N, int64_t K, const float *w, int64_t ld, uint32_t *packed, bool nn) {
#ifdef BF16_X86
    if (!mlk_have_bf16()) return MLK_ENOBF16;
    if (N <= 0) return 0;
    int64_t nb = (N + BF_COLS - 1) / BF_COLS;
    int nt = mlk_threads_for((double)N * (double)K);
    if (nt > 1) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int64_t p = 0; p < nb; p++) {
            if (nn) pack_nn_panel(N, K, w, ld, packed, p);
            else pack_nt_panel(N, K, w, ld, packed, p);
        }
    } else /* not an OpenMP region of one thread: entering one costs about a microsecond, as much as
            * one of attention's products */
        for (int64_t p = 0; p < nb; p++) {
            if (nn) pack_nn_panel(N, K, w, ld, packed, p);
            else pack_nt_panel(N, K, w, ld, packed, p);
        }
    return 0;
#else
    (void)N, (void)K, (void)w, (void)ld, (void)packed, (void)nn;
    return MLK_ENOBF16;
#endif
}

int mlk_bf16_pack_nt(int64_t N, int64_t K, const float *w, uint32_t *packed) {
    return bf16_pack(N, K, w, K, packed, false);
}

int mlk_bf16_pack_nn(int64_t N, int64_t K, const float *w, uint32_t *packed) {
    return bf16_pack(N, K, w, N, packed, true);
}

/* The product on packed w; x as rows of fp32 ldx apart (converted here, xb scratch) or (xpanels)
 * already packed in panels (xb itself). */
static int bf16_run(int64_t M, int64_t N, int64_t K, const float *x, int64_t ldx, uint32_t *xb, bool xpanels,
                    const uint32_t *packed, const bf16_io *io, float *y) {
#ifdef BF16_X86
    int64_t nb = (N + BF_COLS - 1) / BF_COLS, mb = (M + BF_ROWS - 1) / BF_ROWS;
    /* as gemm.c: a thread from about a million multiply-adds (here at twice the rate, the same
     * fork cost: the threshold stays, a product just above it gains less) */
    int nt = (double)M * (double)N * (double)K < 1e6 ? 1 : ml_threads();
    if (nt > 1) {
        bool by_rows = mb >= nb && mb >= 2 * nt;
#pragma omp parallel num_threads(nt)
        {
            if (!xpanels) {
#pragma omp for schedule(static)
                for (int64_t c = 0; c < nt; c++) pack_rows(K, x, ldx, xb, c * M / nt, (c + 1) * M / nt);
            }
#pragma omp for schedule(static)
            for (int64_t c = 0; c < (by_rows ? nt : nb); c++) {
                if (!by_rows) bf16_part(M, N, K, xb, xpanels, packed, io, y, c, c + 1, 0, M);
                else {
                    int64_t i0 = c * mb / nt * BF_ROWS, i1 = (c + 1) * mb / nt * BF_ROWS;
                    bf16_part(M, N, K, xb, xpanels, packed, io, y, 0, nb, i0, i1 < M ? i1 : M);
                }
            }
        }
    } else {
        if (!xpanels) pack_rows(K, x, ldx, xb, 0, M);
        bf16_part(M, N, K, xb, xpanels, packed, io, y, 0, nb, 0, M);
    }
    return 0;
#else
    (void)M, (void)N, (void)K, (void)x, (void)ldx, (void)xb, (void)xpanels, (void)packed, (void)io, (void)y;
    return MLK_ENOBF16;
#endif
}

/* n 32-bit words in the kept scratch (kernel_util.h), handed back with mlk_kept_release. */
static uint32_t *bf16_scratch(size_t n) { return mlk_kept_scratch(sizeof(uint32_t) * n); }

/* n words rounded up to whole cache lines: the next part of a scratch stays 64-byte aligned. */
static size_t lines(size_t n) { return (n + 15) / 16 * 16; }

int mlk_gemm_bf16_packed(int64_t M, int64_t N, int64_t K, const float *x, const uint32_t *packed,
                         const float *bias, float *y) {
    if (!mlk_have_bf16()) return MLK_ENOBF16;
    if (M <= 0 || N <= 0) return 0;
    uint32_t *xb = bf16_scratch((size_t)(M * ((K + 1) / 2)));
    if (!xb) return -1;
    int rc = bf16_run(M, N, K, x, K, xb, false, packed, &(bf16_io){.ldy = N, .alpha = 1.0f, .bias = bias}, y);
    mlk_kept_release(xb);
    return rc;
}

/* Packs w into scratch and runs the product. */
static int gemm_bf16(int64_t M, int64_t N, int64_t K, const float *x, const float *w, bool nn, const float *bias,
                     float *y) {
    if (!mlk_have_bf16()) return MLK_ENOBF16;
    if (M <= 0 || N <= 0) return 0;
    size_t pw = lines(mlk_bf16_packed_size(N, K));
    uint32_t *packed = bf16_scratch(pw + (size_t)(M * ((K + 1) / 2)));
    if (!packed) return -1;
    int rc = bf16_pack(N, K, w, nn ? N : K, packed, nn);
    if (rc == 0)
        rc = bf16_run(M, N, K, x, K, packed + pw, false, packed, &(bf16_io){.ldy = N, .alpha = 1.0f, .bias = bias}, y);
    mlk_kept_release(packed);
    return rc;
}

int mlk_gemm_nt_bf16(int64_t M, int64_t N, int64_t K, const float *x, const float *w, const float *bias, float *y) {
    return gemm_bf16(M, N, K, x, w, false, bias, y);
}

int mlk_gemm_nn_bf16(int64_t M, int64_t N, int64_t K, const float *x, const float *w, float *y) {
    return gemm_bf16(M, N, K, x, w, true, NULL, y);
}

int mlk_gemm_tn_bf16(int64_t M, int64_t N, int64_t K, const float *a, const float *b, bool accumulate, float *y) {
    if (!mlk_have_bf16()) return MLK_ENOBF16;
    if (M <= 0 || N <= 0) return 0;
    size_t aw = lines(mlk_bf16_packed_size(M, K));
    uint32_t *pa = bf16_scratch(aw + mlk_bf16_packed_size(N, K));
    if (!pa) return -1;
    uint32_t *pb = pa + aw;
    int rc = bf16_pack(M, K, a, M, pa, true); /* aᵀ's rows are a's columns: packed as w from (K, M) */
    if (rc == 0) rc = bf16_pack(N, K, b, N, pb, true);
    if (rc == 0)
        rc = bf16_run(M, N, K, NULL, 0, pa, true, pb, &(bf16_io){.ldy = N, .alpha = 1.0f, .accumulate = accumulate}, y);
    mlk_kept_release(pa);
    return rc;
}

/* x is read as rows of pairs where its k are adjacent (xc = 1: QKᵀ, PV, dO·Vᵀ, dS·K), packed in
 * panels as w (K, M) is where its rows are (xr = 1: Pᵀ·dO, dSᵀ·Q), and otherwise gathered into
 * rows first: the same pairs of bf16 every way, so the same bits. */
int mlk_gemm_bf16(int64_t M, int64_t N, int64_t K, const float *x, int64_t xr, int64_t xc, const float *w,
                  int64_t ldw, bool w_kn, float alpha, bool accumulate, float *y, int64_t ldy) {
    if (!mlk_have_bf16()) return MLK_ENOBF16;
    if (M <= 0 || N <= 0) return 0;
    bool x_rows = xc == 1, x_cols = !x_rows && xr == 1, gather = !x_rows && !x_cols && K > 0;
    size_t pw = lines(mlk_bf16_packed_size(N, K));
    size_t xw = lines(x_cols ? mlk_bf16_packed_size(M, K) : (size_t)(M * ((K + 1) / 2)));
    uint32_t *packed = bf16_scratch(pw + xw + (gather ? (size_t)(M * K) : 0));
    if (!packed) return -1;
    uint32_t *xb = packed + pw;
    const float *xs = x;
    int64_t ldx = xr;
    if (gather) {
        float *g = (float *)(void *)(xb + xw);
        for (int64_t i = 0; i < M; i++)
            for (int64_t k = 0; k < K; k++) g[i * K + k] = x[i * xr + k * xc];
        xs = g, ldx = K;
    }
    int rc = bf16_pack(N, K, w, ldw, packed, w_kn);
    if (rc == 0 && x_cols) rc = bf16_pack(M, K, x, xc, xb, true);
    if (rc == 0)
        rc = bf16_run(M, N, K, xs, ldx, xb, x_cols, packed,
                      &(bf16_io){.ldy = ldy, .alpha = alpha, .accumulate = accumulate}, y);
    mlk_kept_release(packed);
    return rc;
}
