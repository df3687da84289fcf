/* The product of linear layers, y = x·wᵀ + bias, with bits that are a function of the row alone
 * (docs/kernels.md, "Determinism"): y[i,j] = bias[j] + Σ_k x[i,k]·w[j,k], summed in k order from
 * zero, whatever the number of rows, where the row sits and the thread count. A BLAS does not
 * promise that: OpenBLAS's kernels treat the edges of a product, and small products, with another
 * summation, so a row computed alone (a forward from row t, the readout rows) would not have the
 * bits it has inside the whole forward.
 *
 *   x (M, K) row-major, w (N, K) row-major, bias (N) or NULL, y (M, N) row-major.
 *   mlk_gemm_nn: the same with w given as (K, N) (the input gradient dy·W), the same bits.
 *   mlk_gemm_tn: y (+)= xᵀ·w with x (K, M) and w (K, N) (the weight gradient dyᵀ·x).
 *   mlk_gemm: any strides for x, w row-major as (N, K) or (K, N), y with its own row stride,
 *   y = alpha·Σ or y += Σ (attention's per-sequence products, matmul).
 *
 * wᵀ is packed once per call in panels of 64 columns (the last as many vectors of 16 as its
 * columns fill), each (K, width) and contiguous, with zero columns after N, so every column,
 * the last ones included, goes through the same 16-lane multiply-adds; where x is transposed (the
 * weight gradient), a block of k at a time (gemm_part_xt). Tiles of 4 rows x one
 * panel keep up to 16 accumulators in registers (AVX-512; on AVX2 the tile goes one vector of 16
 * at a time, 8 registers of 8 lanes: gemm_block8; the same arithmetic per lane). */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"

typedef float v16 __attribute__((vector_size(64)));
typedef float v16u __attribute__((vector_size(64), aligned(4))); /* a panel row read unaligned */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));
typedef float v4 __attribute__((vector_size(16)));
typedef float v4u __attribute__((vector_size(16), aligned(4)));
typedef int32_t m4 __attribute__((vector_size(16))); /* a shuffle's lane indices */

enum { GEMM_ROWS = 4, GEMM_LANES = 16, GEMM_VECS = 4, GEMM_COLS = GEMM_LANES * GEMM_VECS, GEMM_XROWS = 16,
       GEMM_KC = 64 };

/* The width of the panel of columns j0..: 64, or the vectors that the last columns fill (a
 * panel's rows are that far apart, so a narrow product packs and reads no zero vectors). */
static inline int64_t panel_width(int64_t N, int64_t j0) {
    int64_t n = N - j0 < GEMM_COLS ? N - j0 : GEMM_COLS;
    return (n + GEMM_LANES - 1) / GEMM_LANES * GEMM_LANES;
}

/* How a call reads x and writes y: a(i,k) = x[i·xr + k·xc]; y's rows are ldy apart; the sum
 * times alpha, plus bias[j], plus the old y where accumulate. */
typedef struct {
    int64_t xr, xc, ldy;
    float alpha;
    const float *bias;
    bool accumulate;
} gemm_io;

/* n of the `lanes` sums s (one register's worth) into y's row o from column j: times alpha, plus
 * the bias, plus the old y, in that order (sgemm's alpha after the sum, a bias-filled y, beta = 1). */
MLK_INLINE void gemm_store(float *s, int lanes, int64_t n, const gemm_io *io, int64_t j, float *o) {
    if (io->alpha != 1.0f)
        for (int e = 0; e < lanes; e++) s[e] *= io->alpha;
    if (io->bias)
        for (int e = 0; e < n; e++) s[e] += io->bias[j + e];
    if (io->accumulate)
        for (int e = 0; e < n; e++) s[e] = o[e] + s[e];
    memcpy(o, s, sizeof(float) * (size_t)n);
}

/* R rows x V vectors of y from column j0, whose panel is wp (rows ldp floats apart: 16·V when
 * packed): R and V are constants at each call, so the loops unroll and the accumulators stay in
 * registers. The panel is read unaligned: in place (gemm) it is the caller's w. A sum over K in
 * blocks (gemm_part_xt) starts from the partial sums at pin (rows GEMM_COLS floats apart; NULL:
 * from zero) and, but for the last block, leaves them at pout instead of writing y: floats stored
 * and loaded again, so the bits of one pass over K. */
MLK_INLINE void gemm_block(int R, int V, int64_t K, const float *x, const float *wp, int64_t ldp, const gemm_io *io,
                           float *y, int64_t N, int64_t j0, const float *pin, float *pout) {
    v16 acc[GEMM_ROWS][GEMM_VECS];
    const int64_t xr = io->xr, xc = io->xc;
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) acc[r][v] = pin ? *(const v16u *)(pin + r * GEMM_COLS + GEMM_LANES * v) : (v16){0};
    for (int64_t k = 0; k < K; k++) {
        v16 w[GEMM_VECS];
        for (int v = 0; v < V; v++) w[v] = *(const v16u *)(wp + k * ldp + GEMM_LANES * v);
        for (int r = 0; r < R; r++) {
            float a = x[r * xr + k * xc];
            for (int v = 0; v < V; v++) acc[r][v] += a * w[v];
        }
    }
    for (int r = 0; r < R; r++)
        for (int v = 0; v < V; v++) {
            int64_t j = j0 + GEMM_LANES * v, n = N - j < GEMM_LANES ? N - j : GEMM_LANES;
            if (pout) memcpy(pout + r * GEMM_COLS + GEMM_LANES * v, &acc[r][v], sizeof(v16));
            else gemm_store((float *)&acc[r][v], GEMM_LANES, n, io, j, y + r * io->ldy + j);
        }
}

/* gemm_block for AVX2: R rows x one vector of 16 lanes as two registers of 8 (R ≤ 4: 8
 * accumulators, 2 of w and the broadcast fit its 16 registers). Lane for lane the arithmetic of
 * gemm_block, so the same bits. */
MLK_INLINE void gemm_block8(int R, int64_t K, const float *x, const float *wp, int64_t ldp, const gemm_io *io,
                            float *y, int64_t N, int64_t j0, const float *pin, float *pout) {
    v8 acc[GEMM_ROWS][2];
    const int64_t xr = io->xr, xc = io->xc;
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++) acc[r][h] = pin ? *(const v8u *)(pin + r * GEMM_COLS + 8 * h) : (v8){0};
    for (int64_t k = 0; k < K; k++) {
        v8 w0 = *(const v8u *)(wp + k * ldp), w1 = *(const v8u *)(wp + k * ldp + 8);
        for (int r = 0; r < R; r++) {
            float a = x[r * xr + k * xc];
            acc[r][0] += a * w0;
            acc[r][1] += a * w1;
        }
    }
    for (int r = 0; r < R; r++)
        for (int h = 0; h < 2; h++) {
            int64_t j = j0 + 8 * h, n = N - j < 8 ? N - j : 8;
            if (pout) memcpy(pout + r * GEMM_COLS + 8 * h, &acc[r][h], sizeof(v8));
            else if (n <= 0) break;
            else gemm_store((float *)&acc[r][h], 8, n, io, j, y + r * io->ldy + j);
        }
}

/* The vector registers of the clone that runs: 4 x 4 blocks of 16 lanes hold their 16
 * accumulators and 4 vectors of w in AVX-512's 32 registers; on AVX2 (16 registers of 8 lanes)
 * they would need 40, and GCC's lowering of 16-lane vectors to pairs of 8 goes through the stack:
 * 4 % of the peak on a Zen 3. There the tile takes the panel one vector of 16 at a time, each
 * block 4 rows x 2 registers of 8 (gemm_block8). The baseline clone keeps the 4 x 4 blocks. */
static int avx2_forced = -1; /* mlk_force_avx2_blocking */

void mlk_force_avx2_blocking(int avx2) { avx2_forced = avx2 < 0 ? -1 : avx2 != 0; }

bool mlk_avx2_blocking(void) { return avx2_forced >= 0 ? avx2_forced : !strcmp(mlk_vector_unit(), "avx2"); }

const char *mlk_vector_unit(void) {
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(MLK_NO_CLONES)
    /* the test target_clones' resolver makes (kernel_util.h's MLK_CLONES); a few ns a call */
    __builtin_cpu_init();
    return __builtin_cpu_supports("x86-64-v4") ? "avx512" : __builtin_cpu_supports("x86-64-v3") ? "avx2" : "baseline";
#else
    return "native";
#endif
}

/* One tile: rows i0.. (up to 4) x the panel of columns j0.. (up to 64); partial sums (gemm_block)
 * at pin, pout from row i0 (NULL: none). */
MLK_INLINE void gemm_tile(int64_t M, int64_t N, int64_t K, const float *x, const float *wp, int64_t ldp,
                          const gemm_io *io, float *y, int64_t i0, int64_t j0, bool avx2, const float *pin,
                          float *pout) {
    int64_t vr = (N - j0 + GEMM_LANES - 1) / GEMM_LANES;
    int V = vr > GEMM_VECS ? GEMM_VECS : (int)vr;
    const float *xi = x + i0 * io->xr;
    float *yi = y + i0 * io->ldy;
    pin = pin ? pin + i0 * GEMM_COLS : NULL;
    pout = pout ? pout + i0 * GEMM_COLS : NULL;
    if (avx2) {
        for (int v = 0; v < V; v++) {
            const float *wv = wp + GEMM_LANES * v, *pv = pin ? pin + GEMM_LANES * v : NULL;
            float *qv = pout ? pout + GEMM_LANES * v : NULL;
            int64_t jv = j0 + GEMM_LANES * v;
            switch (M - i0 < GEMM_ROWS ? M - i0 : GEMM_ROWS) {
            case 4: gemm_block8(4, K, xi, wv, ldp, io, yi, N, jv, pv, qv); break;
            case 3: gemm_block8(3, K, xi, wv, ldp, io, yi, N, jv, pv, qv); break;
            case 2: gemm_block8(2, K, xi, wv, ldp, io, yi, N, jv, pv, qv); break;
            default: gemm_block8(1, K, xi, wv, ldp, io, yi, N, jv, pv, qv);
            }
        }
        return;
    }
    if (M - i0 >= GEMM_ROWS) {
        switch (V) {
        case 4: gemm_block(4, 4, K, xi, wp, ldp, io, yi, N, j0, pin, pout); break;
        case 3: gemm_block(4, 3, K, xi, wp, ldp, io, yi, N, j0, pin, pout); break;
        case 2: gemm_block(4, 2, K, xi, wp, ldp, io, yi, N, j0, pin, pout); break;
        default: gemm_block(4, 1, K, xi, wp, ldp, io, yi, N, j0, pin, pout);
        }
        return;
    }
    for (int64_t i = i0; i < M; i++, xi += io->xr, yi += io->ldy) { /* the last rows, one at a time */
        const float *pi = pin ? pin + (i - i0) * GEMM_COLS : NULL;
        float *qi = pout ? pout + (i - i0) * GEMM_COLS : NULL;
        switch (V) {
        case 4: gemm_block(1, 4, K, xi, wp, ldp, io, yi, N, j0, pi, qi); break;
        case 3: gemm_block(1, 3, K, xi, wp, ldp, io, yi, N, j0, pi, qi); break;
        case 2: gemm_block(1, 2, K, xi, wp, ldp, io, yi, N, j0, pi, qi); break;
        default: gemm_block(1, 1, K, xi, wp, ldp, io, yi, N, j0, pi, qi);
        }
    }
}

/* The panel of wᵀ from column j0: wp[k][e] = w[j0 + e][k], zero past N. 4 x 4 blocks go through
 * registers (4 rows of w read along k, 4 columns of the panel written), three times faster than
 * element by element, which matters where the rows are few and w is long (the tied head: 8,196 x D). */
MLK_INLINE void gemm_pack(int64_t N, int64_t K, const float *w, int64_t ldw, float *wp, int64_t j0) {
    int64_t nc = N - j0 < GEMM_COLS ? N - j0 : GEMM_COLS, pw = panel_width(N, j0), e = 0;
    for (; e + 4 <= nc; e += 4) {
        const float *s = w + (j0 + e) * ldw;
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
            v4 a = *(const v4u *)(s + k), b = *(const v4u *)(s + ldw + k), c = *(const v4u *)(s + 2 * ldw + k),
               d = *(const v4u *)(s + 3 * ldw + k);
            v4 ab0 = __builtin_shuffle(a, b, (m4){0, 4, 1, 5}), ab1 = __builtin_shuffle(a, b, (m4){2, 6, 3, 7});
            v4 cd0 = __builtin_shuffle(c, d, (m4){0, 4, 1, 5}), cd1 = __builtin_shuffle(c, d, (m4){2, 6, 3, 7});
            *(v4 *)(wp + k * pw + e) = __builtin_shuffle(ab0, cd0, (m4){0, 1, 4, 5});
            *(v4 *)(wp + (k + 1) * pw + e) = __builtin_shuffle(ab0, cd0, (m4){2, 3, 6, 7});
            *(v4 *)(wp + (k + 2) * pw + e) = __builtin_shuffle(ab1, cd1, (m4){0, 1, 4, 5});
            *(v4 *)(wp + (k + 3) * pw + e) = __builtin_shuffle(ab1, cd1, (m4){2, 3, 6, 7});
        }
        for (; k < K; k++)
            for (int q = 0; q < 4; q++) wp[k * pw + e + q] = s[q * ldw + k];
    }
    for (; e < nc; e++)
        for (int64_t k = 0; k < K; k++) wp[k * pw + e] = w[(j0 + e) * ldw + k];
    for (; e < pw; e++)
        for (int64_t k = 0; k < K; k++) wp[k * pw + e] = 0.0f;
}

/* The panel from column j0 of w given as (K, N), rows ldw apart (mlk_gemm_nn): a copy, zero past N. */
MLK_INLINE void gemm_pack_nn(int64_t N, int64_t K, const float *w, int64_t ldw, float *wp, int64_t j0) {
    int64_t nc = N - j0 < GEMM_COLS ? N - j0 : GEMM_COLS, pw = panel_width(N, j0);
    for (int64_t k = 0; k < K; k++) {
        memcpy(wp + k * pw, w + k * ldw + j0, sizeof(float) * (size_t)nc);
        memset(wp + k * pw + nc, 0, sizeof(float) * (size_t)(pw - nc));
    }
}

/* How w is packed: not (skip), from (N, K) (transposed) or from (K, N) (copied). */
enum { PACK_NONE, PACK_NT, PACK_NN };

/* The tiles of panels [p0, p1) x rows [i0, i1) (i0 a multiple of 4), each panel packed into wt
 * first unless PACK_NONE; with `in_place` (PACK_NONE) w is the one panel itself. Panel outer, so
 * a run of tiles reuses one K x 64 panel from cache. */
MLK_CLONES static void gemm_part(int64_t M, int64_t N, int64_t K, const float *x, const float *w, int64_t ldw,
                                 const gemm_io *io, float *y, float *wt, bool in_place, int64_t p0, int64_t p1,
                                 int64_t i0, int64_t i1, int pack, bool avx2) {
    for (int64_t p = p0; p < p1; p++) {
        int64_t j0 = p * GEMM_COLS;
        const float *wp = in_place ? w : wt + p * K * GEMM_COLS; /* no pack where in place */
        if (pack == PACK_NT) gemm_pack(N, K, w, ldw, wt + p * K * GEMM_COLS, j0);
        else if (pack == PACK_NN) gemm_pack_nn(N, K, w, ldw, wt + p * K * GEMM_COLS, j0);
        int64_t ldp = in_place ? ldw : panel_width(N, j0);
        for (int64_t i = i0; i < i1; i += GEMM_ROWS) gemm_tile(M, N, K, x, wp, ldp, io, y, i, j0, avx2, NULL, NULL);
    }
}

/* gemm_part for a transposed x (its rows adjacent, its k far apart: dyᵀ of the weight gradient,
 * whose K is the step's rows, 11,488 at D = 64 on ATR (10, 20)). Read in place, the k of a tile
 * are a row of dy apart (1 KiB and more), so its cache lines collide in the same sets and are gone
 * before the next tile needs them; and a whole K x 64 panel (2.9 MB there) outgrows L2, so every
 * tile streamed it from L3. So the sum goes in blocks of GEMM_KC k: for each panel and block, the
 * panel's block is packed (16 KB: in L1 while every row uses it) and x's block copied 16 rows at a
 * time into xp (each k one cache line); the rows' partial sums wait in part ((i1 - i0) x 64)
 * between blocks. Copies and stored floats: the bits of one pass. buf: gemm_xt_floats. */
MLK_CLONES static void gemm_part_xt(int64_t M, int64_t N, int64_t K, const float *x, const float *w, int64_t ldw,
                                    const gemm_io *io, float *y, float *buf, bool in_place, int64_t p0, int64_t p1,
                                    int64_t i0, int64_t i1, int pack, bool avx2) {
    const int64_t kb = K < GEMM_KC ? K : GEMM_KC;
    float *wb = buf, *xp = wb + (in_place ? 0 : kb * GEMM_COLS), *part = xp + kb * GEMM_XROWS;
    gemm_io xio = *io;
    xio.xr = 1, xio.xc = GEMM_XROWS;
    for (int64_t p = p0; p < p1; p++) {
        int64_t j0 = p * GEMM_COLS, ldp = in_place ? ldw : panel_width(N, j0), k0 = 0;
        do { /* once where K = 0: y gets alpha·0, or keeps its old value */
            int64_t kc = K - k0 < GEMM_KC ? K - k0 : GEMM_KC;
            const float *wp = in_place ? w + k0 * ldw : wb;
            if (pack == PACK_NT) gemm_pack(N, kc, w + k0, ldw, wb, j0);
            else if (pack == PACK_NN) gemm_pack_nn(N, kc, w + k0 * ldw, ldw, wb, j0);
            for (int64_t i = i0; i < i1; i += GEMM_XROWS) {
                int64_t m = i1 - i < GEMM_XROWS ? i1 - i : GEMM_XROWS;
                for (int64_t k = 0; k < kc; k++)
                    for (int64_t r = 0; r < m; r++) xp[k * GEMM_XROWS + r] = x[i + r + (k0 + k) * io->xc];
                float *pg = part + (i - i0) * GEMM_COLS;
                const float *pin = k0 > 0 ? pg : NULL;
                float *pout = k0 + kc < K ? pg : NULL;
                for (int64_t r = 0; r < m; r += GEMM_ROWS)
                    gemm_tile(m, N, kc, xp, wp, ldp, &xio, y + i * io->ldy, r, j0, avx2, pin, pout);
            }
            k0 += kc;
        } while (k0 < K);
    }
}

/* A thread's buffer for gemm_part_xt over at most `rows` rows: the panel's block (unless in
 * place), xp, and the partial sums where K takes more than one block. */
static size_t gemm_xt_floats(int64_t rows, int64_t K, bool in_place) {
    size_t kb = (size_t)(K < GEMM_KC ? K : GEMM_KC);
    return (in_place ? 0 : kb * GEMM_COLS) + kb * GEMM_XROWS +
           (K > GEMM_KC ? (size_t)(rows + GEMM_XROWS) * GEMM_COLS : 0);
}

/* Packed panels of at most this many floats live on the stack (attention's per-sequence
 * products are called hundreds of times a step with a panel or two of K ≤ 64). */
enum { GEMM_STACK_FLOATS = 4096 };

/* Larger ones in the kept scratch (kernel_util.h). */

static int gemm(int64_t M, int64_t N, int64_t K, const float *x, const float *w, int64_t ldw, int pack,
                const gemm_io *io, float *y) {
    if (M <= 0 || N <= 0) return 0;
    const bool avx2 = mlk_avx2_blocking();
    int64_t nb = (N + GEMM_COLS - 1) / GEMM_COLS, mb = (M + GEMM_ROWS - 1) / GEMM_ROWS;
    /* a thread pays off from about a million multiply-adds (6 µs on one thread; fork and join ~5 µs) */
    int nt = (double)M * (double)N * (double)K < 1e6 ? 1 : ml_threads();
    /* w given as (K, N) with N one panel's width is read in place, the same floats in the same
     * order, without the copy (memmove: 4.6 % of a D = 64 step's samples, 2.9 % after): where its
     * rows are adjacent (the weight and input gradients' w up to D = 64) it is the packed panel
     * itself; where they are further apart, when they are few (attention's V, K and dctx rows of
     * a sequence: 37 rows 3D apart), as their lines stay in cache from one tile to the next */
    bool in_place = pack == PACK_NN && N <= GEMM_COLS && N % GEMM_LANES == 0 && (ldw == N || K <= GEMM_COLS);
    if (in_place) pack = PACK_NONE;
    /* the shared panels; or, where x is transposed (gemm_part_xt), each thread's buffer: each
     * packs the panel's blocks it uses itself (a copy of K x 64 a panel, against its rows' K x 64
     * multiply-adds a row), so they stay in its own L1 */
    bool xt = io->xr == 1 && io->xc != 1 && K > 0 && M > 1;
    size_t wfloats = xt || in_place ? 0 : (size_t)(nb * K * GEMM_COLS);
    size_t tfloats = xt ? gemm_xt_floats(M, K, in_place) : 0;
    size_t floats = wfloats + (size_t)nt * tfloats + 1;
    _Alignas(64) float stack[GEMM_STACK_FLOATS];
    float *wt = floats <= GEMM_STACK_FLOATS ? stack : mlk_kept_scratch(sizeof(float) * floats);
    if (!wt) return -1;
    if (nt > 1) {
        int64_t n_pack = pack == PACK_NONE || xt ? 0 : nb; /* panels to pack first */
#pragma omp parallel num_threads(nt)
        {
            float *buf = xt ? wt + (size_t)mlk_thread_id() * tfloats : NULL;
#pragma omp for schedule(static)
            for (int64_t p = 0; p < n_pack; p++)
                gemm_part(M, N, K, x, w, ldw, io, y, wt, false, p, p + 1, 0, 0, pack, avx2);
            /* rows split where there are more row blocks than panels (a thread writes whole rows of y,
             * so no cache line is written by both), else panels (the tied head: 8,196 columns) */
            bool by_rows = mb >= nb && mb >= 2 * nt;
#pragma omp for schedule(static)
            for (int64_t c = 0; c < (by_rows ? nt : nb); c++) {
                int64_t p0 = by_rows ? 0 : c, p1 = by_rows ? nb : c + 1;
                int64_t i0 = by_rows ? c * mb / nt * GEMM_ROWS : 0, i1 = by_rows ? (c + 1) * mb / nt * GEMM_ROWS : M;
                i1 = i1 < M ? i1 : M;
                if (xt) gemm_part_xt(M, N, K, x, w, ldw, io, y, buf, in_place, p0, p1, i0, i1, pack, avx2);
                else gemm_part(M, N, K, x, w, ldw, io, y, wt, in_place, p0, p1, i0, i1, PACK_NONE, avx2);
            }
        }
    } else if (xt)
        gemm_part_xt(M, N, K, x, w, ldw, io, y, wt, in_place, 0, nb, 0, M, pack, avx2);
    else
        gemm_part(M, N, K, x, w, ldw, io, y, wt, in_place, 0, nb, 0, M, pack, avx2);
    if (wt != stack) mlk_kept_release(wt);
    return 0;
}

int mlk_gemm_nt(int64_t M, int64_t N, int64_t K, const float *x, const float *w, const float *bias, float *y) {
    return gemm(M, N, K, x, w, K, PACK_NT, &(gemm_io){.xr = K, .xc = 1, .ldy = N, .alpha = 1.0f, .bias = bias}, y);
}

int mlk_gemm_nn(int64_t M, int64_t N, int64_t K, const float *x, const float *w, float *y) {
    return gemm(M, N, K, x, w, N, PACK_NN, &(gemm_io){.xr = K, .xc = 1, .ldy = N, .alpha = 1.0f}, y);
}

int mlk_gemm_tn(int64_t M, int64_t N, int64_t K, const float *x, const float *w, bool accumulate, float *y) {
    return gemm(M, N, K, x, w, N, PACK_NN,
                &(gemm_io){.xr = 1, .xc = M, .ldy = N, .alpha = 1.0f, .accumulate = accumulate}, y);
}

int mlk_gemm(int64_t M, int64_t N, int64_t K, const float *x, int64_t xr, int64_t xc, const float *w, int64_t ldw,
             bool w_kn, float alpha, bool accumulate, float *y, int64_t ldy) {
    return gemm(M, N, K, x, w, ldw, w_kn ? PACK_NN : PACK_NT,
                &(gemm_io){.xr = xr, .xc = xc, .ldy = ldy, .alpha = alpha, .accumulate = accumulate}, y);
}
