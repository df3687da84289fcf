#include "ops/nn_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/op_util.h"

/* Shape check "fn: argument N has shape [..], expected [D]" for 1-D parameter vectors. */
static ml_status check_vec(const char *fn, int arg, const ml_tensor *t, int64_t d) {
    if (mlo_check_f32(fn, arg, t)) return ML_ERR_DTYPE;
    if (t->ndim != 1 || t->shape[0] != d) {
        char s[ML_SHAPE_STR];
        return ml_fail(ML_ERR_SHAPE, "%s: argument %d has shape %s, expected [%lld]", fn, arg,
                       ml_shape_str(s, t->ndim, t->shape), (long long)d);
    }
    return ML_OK;
}

/* ------------------------------------------------------------------ LayerNorm */

/* The mean and (biased) variance of LN_ROWS rows of length D in double, each row summed in the
 * order its earlier vectorised loop used (kept for the bits): four partial sums, lane j taking
 * x[4k + j], the tail x[4⌊D/4⌋..] added to lane 0, then (((0 + s0) + s1) + s2) + s3; the
 * variance as Σ (x − μ)² the same way. The rows' sums are independent chains run side by side:
 * one row's chain is bound by the latency of the add at small D. */
#define LN_ROWS 2
MLK_INLINE void ln_stats(const float *const *xs, int64_t D, double *mu, double *var) {
    const float *x = xs[0], *y = xs[1];
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    int64_t nb = D & ~(int64_t)3, i;
    for (i = 0; i < nb; i += 4) {
        a0 += (double)x[i], a1 += (double)x[i + 1], a2 += (double)x[i + 2], a3 += (double)x[i + 3];
        b0 += (double)y[i], b1 += (double)y[i + 1], b2 += (double)y[i + 2], b3 += (double)y[i + 3];
    }
    for (; i < D; i++) a0 += (double)x[i], b0 += (double)y[i];
    double mx = ((((0.0 + a0) + a1) + a2) + a3) / (double)D, my = ((((0.0 + b0) + b1) + b2) + b3) / (double)D;
    a0 = a1 = a2 = a3 = b0 = b1 = b2 = b3 = 0;
#define SQ(v, m) (((double)(v) - (m)) * ((double)(v) - (m)))
    for (i = 0; i < nb; i += 4) {
        a0 += SQ(x[i], mx), a1 += SQ(x[i + 1], mx), a2 += SQ(x[i + 2], mx), a3 += SQ(x[i + 3], mx);
        b0 += SQ(y[i], my), b1 += SQ(y[i + 1], my), b2 += SQ(y[i + 2], my), b3 += SQ(y[i + 3], my);
    }
    for (; i < D; i++) a0 += SQ(x[i], mx), b0 += SQ(y[i], my);
#undef SQ
    mu[0] = mx, mu[1] = my;
    var[0] = ((((0.0 + a0) + a1) + a2) + a3) / (double)D;
    var[1] = ((((0.0 + b0) + b1) + b2) + b3) / (double)D;
}

/* LayerNorm's forward over rows of D, two rows at a time (ln_stats); x̂ goes to xhat when
 * recording, else straight into out. With sa and sb, px is first filled with sa + sb. Elementwise after the statistics: the same bits at any
 * vector width (no contraction into FMA in this file). */
MLK_CLONES static void layer_norm_rows(int64_t rows, int64_t D, float *px, const float *pw, const float *pb,
                                       double eps, float *out, float *xhat, float *rstd, const float *sa,
                                       const float *sb) {
    for (int64_t r0 = 0; r0 < rows; r0 += LN_ROWS) {
        if (sa) { /* fused residual add: x = a + b, written as the sum's rows just before they are read */
            int64_t e = (r0 + LN_ROWS < rows ? r0 + LN_ROWS : rows) * D;
#pragma omp simd
            for (int64_t i = r0 * D; i < e; i++) px[i] = sa[i] + sb[i];
        }
        const float *xr2[LN_ROWS];
        double mu[LN_ROWS], var[LN_ROWS];
        for (int k = 0; k < LN_ROWS; k++) xr2[k] = px + (r0 + k < rows ? r0 + k : rows - 1) * D;
        ln_stats(xr2, D, mu, var);
        for (int k = 0; k < LN_ROWS && r0 + k < rows; k++) {
            int64_t r = r0 + k;
            const float *xr = xr2[k];
            float rs = (float)(1.0 / sqrt(var[k] + eps)), fmu = (float)mu[k];
            float *o = out + r * D, *xh = xhat ? xhat + r * D : o;
#pragma omp simd
            for (int64_t i = 0; i < D; i++) xh[i] = (xr[i] - fmu) * rs;
            if (pb) {
#pragma omp simd
                for (int64_t i = 0; i < D; i++) o[i] = xh[i] * pw[i] + pb[i];
            } else {
#pragma omp simd
                for (int64_t i = 0; i < D; i++) o[i] = xh[i] * pw[i];
            }
            if (rstd) rstd[r] = rs;
        }
    }
}

/* mean(g) and mean(g⊙x̂) with g = dy⊙γ for two rows (gr[k], xr[k]), each summed in double in the
 * order of its earlier vectorised loop, as ln_stats: four lanes, the tail into lane 0, then
 * (((0 + s0) + s1) + s2) + s3; the two rows' chains side by side. */
MLK_INLINE void lnb_stats(const float *const *gr, const float *const *xr, const float *pw, int64_t D, float *mg,
                          float *mgx) {
    double a[4] = {0}, ax[4] = {0}, b[4] = {0}, bx[4] = {0};
    int64_t nb = D & ~(int64_t)3, i;
    const float *g0 = gr[0], *g1 = gr[1], *x0 = xr[0], *x1 = xr[1];
    for (i = 0; i < nb; i += 4)
        for (int j = 0; j < 4; j++) {
            double u = (double)g0[i + j] * pw[i + j], v = (double)g1[i + j] * pw[i + j];
            a[j] += u, ax[j] += u * x0[i + j];
            b[j] += v, bx[j] += v * x1[i + j];
        }
    for (; i < D; i++) {
        double u = (double)g0[i] * pw[i], v = (double)g1[i] * pw[i];
        a[0] += u, ax[0] += u * x0[i];
        b[0] += v, bx[0] += v * x1[i];
    }
    mg[0] = (float)(((((0.0 + a[0]) + a[1]) + a[2]) + a[3]) / (double)D);
    mgx[0] = (float)(((((0.0 + ax[0]) + ax[1]) + ax[2]) + ax[3]) / (double)D);
    mg[1] = (float)(((((0.0 + b[0]) + b[1]) + b[2]) + b[3]) / (double)D);
    mgx[1] = (float)(((((0.0 + bx[0]) + bx[1]) + bx[2]) + bx[3]) / (double)D);
}

/* LayerNorm's backward over rows of D, two at a time. dw and db sum the rows in order; a row of g
 * is read (the means, dw, db) before that row of dx is written, so dx may be g itself. */
MLK_CLONES static void layer_norm_backward_rows(int64_t rows, int64_t D, const float *pg, const float *xh,
                                                const float *pw, const float *rstd, float *dx, float *dw,
                                                float *db) {
    for (int64_t r0 = 0; r0 < rows; r0 += LN_ROWS) {
        const float *g2[LN_ROWS], *x2[LN_ROWS];
        float mg[LN_ROWS], mgx[LN_ROWS];
        for (int k = 0; k < LN_ROWS; k++) {
            int64_t r = r0 + k < rows ? r0 + k : rows - 1;
            g2[k] = pg + r * D, x2[k] = xh + r * D;
        }
        if (dx) lnb_stats(g2, x2, pw, D, mg, mgx);
        for (int k = 0; k < LN_ROWS && r0 + k < rows; k++) {
            const float *gr = g2[k], *xr = x2[k];
            if (dw) {
#pragma omp simd
                for (int64_t i = 0; i < D; i++) dw[i] += gr[i] * xr[i];
            }
            if (db) {
#pragma omp simd
                for (int64_t i = 0; i < D; i++) db[i] += gr[i];
            }
            if (dx) {
                /* dx = (g − mean(g) − x̂·mean(g⊙x̂)) / σ */
                float fmg = mg[k], fmgx = mgx[k], rs = rstd[r0 + k];
                float *o = dx + (r0 + k) * D;
#pragma omp simd
                for (int64_t i = 0; i < D; i++) o[i] = (gr[i] * pw[i] - fmg - xr[i] * fmgx) * rs;
            }
        }
    }
}

/* Saved: 0 = x̂ (rows, D), 1 = weight; ctx = 1/σ per row (rows). */
static ml_status layer_norm_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *xhat = ml_node_saved(n, 0), *w = ml_node_saved(n, 1);
    if (!xhat || !w) return ml_last_status();
    const float *rstd = n->ctx;
    int64_t D = w->shape[0], rows = ml_numel(xhat) / (D ? D : 1);
    const float *xh = ml_f32(xhat), *pw = ml_f32(w), *pg = ml_f32(g);
    /* a row of g is read (dw, db, the means) before that row of dx is written: dx may overwrite g */
    ml_tensor *dx = mlo_grad_over(n, 0, g);
    ml_tensor *dw = ml_node_input_needs_grad(n, 1) ? ml_zeros(ML_F32, 1, &D) : NULL;
    ml_tensor *db = ml_node_input_needs_grad(n, 2) ? ml_zeros(ML_F32, 1, &D) : NULL;
    layer_norm_backward_rows(rows, D, pg, xh, pw, rstd, dx ? ml_f32(dx) : NULL, dw ? ml_f32(dw) : NULL,
                             db ? ml_f32(db) : NULL);
    gin[0] = dx, gin[1] = dw, gin[2] = db;
    return ML_OK;
}

/* LayerNorm of x; with sa and sb, x is a fresh dense tensor that the kernel fills with sa + sb. */
static ml_tensor *layer_norm(ml_tensor *x, ml_tensor *weight, ml_tensor *bias, double eps, const float *sa,
                             const float *sb) {
    if (mlo_check_f32("layer_norm", 1, x)) return NULL;
    if (x->ndim < 1) {
        ml_fail(ML_ERR_SHAPE, "layer_norm: argument 1 expected at least 1 dimension, got 0");
        return NULL;
    }
    int64_t D = x->shape[x->ndim - 1];
    if (check_vec("layer_norm", 2, weight, D) || (bias && check_vec("layer_norm", 3, bias, D))) return NULL;
    ml_tensor *xc = mlo_dense(x), *wc = mlo_dense(weight), *bc = bias ? mlo_dense(bias) : NULL;
    ml_tensor *out = ml_empty(ML_F32, x->ndim, x->shape);
    int64_t rows = D ? ml_numel(x) / D : 0;
    bool rec = ml_any_needs_grad(3, (ml_tensor *[]){x, weight, bias});
    ml_tensor *xhat = rec ? ml_empty(ML_F32, x->ndim, x->shape) : NULL;
    float *rstd = rec ? malloc(sizeof(float) * (size_t)(rows ? rows : 1)) : NULL;
    if (!out || (rec && (!xhat || !rstd))) {
        free(rstd);
        ml_release(xhat), ml_release(out), ml_release(xc), ml_release(wc), ml_release(bc);
        ml_fail(ML_ERR_MEM, "layer_norm: out of memory");
        return NULL;
    }
    layer_norm_rows(rows, D, ml_f32(xc), ml_f32(wc), bc ? ml_f32(bc) : NULL, eps, ml_f32(out),
                    xhat ? ml_f32(xhat) : NULL, rstd, sa, sb);
    if (rec) {
        ml_node *n = ml_node_new("LayerNormBackward", layer_norm_backward, 3, (ml_tensor *[]){x, weight, bias});
        ml_node_save(n, 0, xhat);
        ml_node_save(n, 1, wc);
        n->ctx = rstd;
        n->ctx_free = free;
        ml_attach(out, n);
    }
    ml_release(xhat), ml_release(xc), ml_release(wc), ml_release(bc);
    return out;
}

ml_tensor *ml_layer_norm(ml_tensor *x, ml_tensor *weight, ml_tensor *bias, double eps) {
    return layer_norm(x, weight, bias, eps, NULL, NULL);
}

ml_tensor *ml_add_layer_norm(ml_tensor *a, ml_tensor *b, ml_tensor *weight, ml_tensor *bias, double eps,
                             ml_tensor **sum) {
    *sum = NULL;
    bool fuse = a->dtype == ML_F32 && b->dtype == ML_F32 && a->ndim >= 1 && ml_same_shape(a, b) &&
                ml_is_contiguous(a) && ml_is_contiguous(b);
    /* the sum as ml_add makes it (the same values and graph node), then LayerNorm over it */
    ml_tensor *s = fuse ? mlo_add_node(ml_empty(ML_F32, a->ndim, a->shape), a, b) : ml_add(a, b);
    if (!s) return NULL;
    ml_tensor *out = fuse ? layer_norm(s, weight, bias, eps, ml_f32(a), ml_f32(b)) : ml_layer_norm(s, weight, bias, eps);
    if (!out) {
        ml_release(s);
        return NULL;
    }
    *sum = s;
    return out;
}

/* ------------------------------------------------------------------ RMSNorm */

/* Σ a_i·b_i (·c_i when c is given) in double, as 8 interleaved partial sums added in a fixed order:
 * the loop vectorises (one running sum is bound by the latency of the add) with the same bits for
 * any vector width. */
static double dot8(int64_t n, const float *a, const float *b, const float *c) {
    double acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += (double)a[i + j] * b[i + j] * (c ? c[i + j] : 1.0f);
    for (int j = 0; i + j < n; j++) acc[j] += (double)a[i + j] * b[i + j] * (c ? c[i + j] : 1.0f);
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

/* Saved: 0 = x, 1 = weight; ctx = 1/ρ per row. */
static ml_status rms_norm_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0), *w = ml_node_saved(n, 1);
    if (!x || !w) return ml_last_status();
    const float *rr = n->ctx;
    int64_t D = w->shape[0], rows = ml_numel(x) / (D ? D : 1);
    const float *px = ml_f32(x), *pw = ml_f32(w), *pg = ml_f32(g);
    /* a row of g is read (dw, the dot) before that row of dx is written: dx may overwrite g */
    ml_tensor *dx = mlo_grad_over(n, 0, g);
    ml_tensor *dw = ml_node_input_needs_grad(n, 1) ? ml_zeros(ML_F32, 1, &D) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = pg + r * D, *xr = px + r * D;
        double inv = rr[r];
        if (dw)
            for (int64_t i = 0; i < D; i++) ml_f32(dw)[i] += (float)(gr[i] * xr[i] * inv);
        if (dx) {
            /* dx = g/ρ − x·(Σ g_i x_i)/(D·ρ³) with g = dy⊙w */
            double s = dot8(D, gr, pw, xr);
            double c = s * inv * inv * inv / (double)D;
            float *o = ml_f32(dx) + r * D;
            for (int64_t i = 0; i < D; i++) o[i] = (float)((double)gr[i] * pw[i] * inv - xr[i] * c);
        }
    }
    gin[0] = dx, gin[1] = dw;
    return ML_OK;
}

ml_tensor *ml_rms_norm(ml_tensor *x, ml_tensor *weight, double eps) {
    if (mlo_check_f32("rms_norm", 1, x)) return NULL;
    if (x->ndim < 1) {
        ml_fail(ML_ERR_SHAPE, "rms_norm: argument 1 expected at least 1 dimension, got 0");
        return NULL;
    }
    int64_t D = x->shape[x->ndim - 1];
    if (check_vec("rms_norm", 2, weight, D)) return NULL;
    ml_tensor *xc = mlo_dense(x), *wc = mlo_dense(weight);
    ml_tensor *out = ml_empty(ML_F32, x->ndim, x->shape);
    int64_t rows = D ? ml_numel(x) / D : 0;
    bool rec = ml_any_needs_grad(2, (ml_tensor *[]){x, weight});
    float *rr = rec ? malloc(sizeof(float) * (size_t)(rows ? rows : 1)) : NULL;
    if (!out || (rec && !rr)) {
        free(rr);
        ml_release(out), ml_release(xc), ml_release(wc);
        ml_fail(ML_ERR_MEM, "rms_norm: out of memory");
        return NULL;
    }
    const float *px = ml_f32(xc), *pw = ml_f32(wc);
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = px + r * D;
        double ss = dot8(D, xr, xr, NULL);
        double inv = 1.0 / sqrt(ss / (double)D + eps);
        float *o = ml_f32(out) + r * D;
        for (int64_t i = 0; i < D; i++) o[i] = (float)(xr[i] * inv) * pw[i];
        if (rr) rr[r] = (float)inv;
    }
    if (rec) {
        ml_node *n = ml_node_new("RMSNormBackward", rms_norm_backward, 2, (ml_tensor *[]){x, weight});
        ml_node_save(n, 0, xc);
        ml_node_save(n, 1, wc);
        n->ctx = rr;
        n->ctx_free = free;
        ml_attach(out, n);
    }
    ml_release(xc), ml_release(wc);
    return out;
}

/* ------------------------------------------------------------------ causal attention */

/* Three ops, so that scores and pattern are hook sites with exactly the arithmetic of the whole:
 *   scores:  qkv (B, L, 3D) -> S (B, H, L, L), S[t,s] = q_t·k_s/√d_h for s <= t, −10000 above
 *   softmax: S -> P, softmax over s <= t; entries above the diagonal are exactly 0
 *   apply:   P, qkv -> ctx (B, L, D), ctx_t = Σ_s P[t,s] v_s (P from the softmax is 0 for s > t)
 * Head h of q is qkv[b, t, h·dh : (h+1)·dh], of k the same plus D, of v plus 2D.
 * The per-sequence products (QKᵀ, PV and their gradients) run in the thread's linear precision
 * (ops.h): in bf16 on mlk_gemm_bf16, the masking, scale and softmax staying fp32 (docs/kernels.md,
 * "bf16 training"). The scores and apply nodes record the precision of their forward in iarg[1],
 * and their backward runs in it, as linear's does. */

/* One per-sequence product, y = alpha·x·b (mlk_gemm's arguments, y overwritten), in fp32 or bf16. */
static int seq_gemm(bool bf16, int64_t M, int64_t N, int64_t K, const float *x, int64_t xr, int64_t xc,
                    const float *w, int64_t ldw, bool w_kn, float alpha, float *y, int64_t ldy) {
    return bf16 ? mlk_gemm_bf16(M, N, K, x, xr, xc, w, ldw, w_kn, alpha, false, y, ldy)
                : mlk_gemm(M, N, K, x, xr, xc, w, ldw, w_kn, alpha, false, y, ldy);
}

/* A product's failure as the op's error: no AVX512_BF16, or out of memory. */
static ml_status seq_gemm_failed(const char *fn, int rc) {
    if (rc == MLK_ENOBF16) return ml_fail(ML_ERR_STATE, "%s: %s", fn, MLK_BF16_MISSING);
    return ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
}

static int check_qkv(const char *fn, int arg, const ml_tensor *qkv, int H) {
    if (mlo_check_f32(fn, arg, qkv)) return -1;
    if (qkv->ndim != 3 || qkv->shape[2] % 3 || H < 1 || (qkv->shape[2] / 3) % H) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "%s: argument %d has shape %s, expected [B,L,3D] with D divisible by %d heads", fn, arg,
                ml_shape_str(s, qkv->ndim, qkv->shape), H);
        return -1;
    }
    return 0;
}

static int check_pattern(const char *fn, int arg, const ml_tensor *P, int64_t B, int64_t H, int64_t L) {
    if (mlo_check_f32(fn, arg, P)) return -1;
    if (P->ndim != 4 || P->shape[0] != B || P->shape[1] != H || P->shape[2] != L || P->shape[3] != L) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "%s: argument %d has shape %s, expected [%lld,%lld,%lld,%lld]", fn, arg,
                ml_shape_str(s, P->ndim, P->shape), (long long)B, (long long)H, (long long)L, (long long)L);
        return -1;
    }
    return 0;
}

/* saved 0 = qkv; iarg[0] = H, iarg[1] = the forward's precision */
static ml_status scores_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *qkvt = ml_node_saved(n, 0);
    if (!qkvt) return ml_last_status();
    int H = (int)n->iarg[0];
    bool bf16 = n->iarg[1] == ML_PRECISION_BF16;
    int64_t B = qkvt->shape[0], L = qkvt->shape[1], D = qkvt->shape[2] / 3, dh = D / H, row = 3 * D;
    /* the products below write the q and k columns of every row; only v's are zeroed */
    ml_tensor *d = ml_empty(ML_F32, 3, qkvt->shape);
    if (!d) return ML_ERR_MEM;
    const float *qkv = ml_f32(qkvt), *dS = ml_f32(g);
    float *dq0 = ml_f32(d);
    for (int64_t r = 0; r < B * L; r++) memset(dq0 + r * row + 2 * D, 0, sizeof(float) * (size_t)D);
    float scale = (float)(1.0 / sqrt((double)dh));
    float *masked = malloc(sizeof(float) * (size_t)(L * L + 1));
    if (!masked) {
        ml_release(d);
        return ml_fail(ML_ERR_MEM, "attention backward: out of memory");
    }
    if (!L) B = 0; /* no position: no (batch, head) product to run, however large B is */
    int rc = 0;
    for (int64_t b = 0; b < B && !rc; b++)
        for (int h = 0; h < H && !rc; h++) {
            const float *q = qkv + b * L * row + h * dh, *k = q + D;
            float *dq = dq0 + b * L * row + h * dh, *dk = dq + D;
            /* masked entries were constants: they pass no gradient */
            const float *ds = dS + (b * H + h) * L * L;
            for (int64_t t = 0; t < L; t++)
                for (int64_t s2 = 0; s2 < L; s2++) masked[t * L + s2] = s2 <= t ? ds[t * L + s2] : 0.0f;
            /* dQ = scale·dS·K ; dK = scale·dSᵀ·Q */
            rc = seq_gemm(bf16, L, dh, L, masked, L, 1, k, row, true, scale, dq, row);
            if (!rc) rc = seq_gemm(bf16, L, dh, L, masked, 1, L, q, row, true, scale, dk, row);
        }
    free(masked);
    if (rc) {
        ml_release(d);
        return seq_gemm_failed("attention backward", rc);
    }
    gin[0] = d;
    return ML_OK;
}

ml_tensor *ml_attention_scores(ml_tensor *qkv, int H) {
    if (check_qkv("attention_scores", 1, qkv, H)) return NULL;
    int64_t B = qkv->shape[0], L = qkv->shape[1], D = qkv->shape[2] / 3, dh = D / H, row = 3 * D;
    ml_tensor *x = mlo_dense(qkv), *S = ml_empty(ML_F32, 4, (int64_t[]){B, H, L, L});
    if (!x || !S) {
        ml_release(x), ml_release(S);
        return NULL;
    }
    const float *p = ml_f32(x);
    float *ps = ml_f32(S), scale = (float)(1.0 / sqrt((double)dh));
    ml_precision prec = ml_linear_precision();
    if (!L) B = 0; /* no position: no (batch, head) product to run, however large B is */
    int rc = 0;
    for (int64_t b = 0; b < B && !rc; b++)
        for (int h = 0; h < H && !rc; h++) {
            const float *q = p + b * L * row + h * dh, *k = q + D;
            float *st = ps + (b * H + h) * L * L;
            /* S = scale·Q·Kᵀ (the upper triangle is computed and then masked: cheaper than avoiding it) */
            rc = seq_gemm(prec == ML_PRECISION_BF16, L, L, dh, q, row, 1, k, row, false, scale, st, L);
            for (int64_t t = 0; t < L; t++)
                for (int64_t s2 = t + 1; s2 < L; s2++) st[t * L + s2] = -10000.0f;
        }
    if (rc) {
        ml_release(x), ml_release(S);
        seq_gemm_failed("attention_scores", rc);
        return NULL;
    }
    if (ml_needs_grad(qkv)) {
        ml_node *n = ml_node_new("AttentionScoresBackward", scores_backward, 1, &qkv);
        n->iarg[0] = H;
        n->iarg[1] = prec;
        ml_node_save(n, 0, x);
        ml_attach(S, n);
    }
    ml_release(x);
    return S;
}

/* saved 0 = P */
static ml_status causal_softmax_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *Pt = ml_node_saved(n, 0);
    if (!Pt) return ml_last_status();
    int64_t L = Pt->shape[3], rows = ml_numel(Pt) / (L ? L : 1);
    ml_tensor *d = ml_zeros(ML_F32, 4, Pt->shape);
    if (!d) return ML_ERR_MEM;
    const float *P = ml_f32(Pt), *dP = ml_f32(g);
    float *dS = ml_f32(d);
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r % L;
        const float *pr = P + r * L, *gr = dP + r * L;
        float dot = 0;
        for (int64_t s = 0; s <= t; s++) dot += gr[s] * pr[s];
        for (int64_t s = 0; s <= t; s++) dS[r * L + s] = pr[s] * (gr[s] - dot);
    }
    gin[0] = d;
    return ML_OK;
}

ml_tensor *ml_causal_softmax(ml_tensor *S) {
    if (mlo_check_f32("causal_softmax", 1, S)) return NULL;
    if (S->ndim != 4 || S->shape[2] != S->shape[3]) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "causal_softmax: argument 1 has shape %s, expected [B,H,L,L]",
                ml_shape_str(s, S->ndim, S->shape));
        return NULL;
    }
    int64_t L = S->shape[3], rows = ml_numel(S) / (L ? L : 1);
    ml_tensor *x = mlo_dense(S), *P = ml_empty(ML_F32, 4, S->shape);
    if (!x || !P) {
        ml_release(x), ml_release(P);
        return NULL;
    }
    const float *ps = ml_f32(x);
    float *pp = ml_f32(P);
    for (int64_t r = 0; r < rows; r++) {
        int64_t t = r % L;
        const float *sr = ps + r * L;
        float *pr = pp + r * L, mx = -INFINITY, sum = 0;
        for (int64_t s = 0; s <= t; s++) mx = sr[s] > mx ? sr[s] : mx;
        for (int64_t s = 0; s <= t; s++) sum += (pr[s] = expf(sr[s] - mx));
        float inv = 1.0f / sum;
        for (int64_t s = 0; s <= t; s++) pr[s] *= inv;
        for (int64_t s = t + 1; s < L; s++) pr[s] = 0;
    }
    if (ml_needs_grad(S)) {
        ml_node *n = ml_node_new("CausalSoftmaxBackward", causal_softmax_backward, 1, &S);
        ml_node_save(n, 0, P);
        ml_attach(P, n);
    }
    ml_release(x);
    return P;
}

/* saved 0 = P, 1 = qkv; iarg[0] = H, iarg[1] = the forward's precision */
static ml_status apply_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *Pt = ml_node_saved(n, 0), *qkvt = ml_node_saved(n, 1);
    if (!Pt || !qkvt) return ml_last_status();
    int H = (int)n->iarg[0];
    bool bf16 = n->iarg[1] == ML_PRECISION_BF16;
    int64_t B = qkvt->shape[0], L = qkvt->shape[1], D = qkvt->shape[2] / 3, dh = D / H, row = 3 * D;
    /* the products below write all of dP and the v columns of dqkv (beta = 0): only q's and k's
     * columns are zeroed */
    ml_tensor *dP = ml_node_input_needs_grad(n, 0) ? ml_empty(ML_F32, 4, Pt->shape) : NULL;
    ml_tensor *dqkv = ml_node_input_needs_grad(n, 1) ? ml_empty(ML_F32, 3, qkvt->shape) : NULL;
    if (dqkv)
        for (int64_t r = 0; r < B * L; r++) memset(ml_f32(dqkv) + r * row, 0, sizeof(float) * (size_t)(2 * D));
    const float *P = ml_f32(Pt), *qkv = ml_f32(qkvt), *dctx = ml_f32(g);
    if (!L) B = 0; /* no position: no (batch, head) product to run, however large B is */
    int rc = 0;
    for (int64_t b = 0; b < B && !rc; b++)
        for (int h = 0; h < H && !rc; h++) {
            const float *v = qkv + b * L * row + 2 * D + h * dh, *dc = dctx + b * L * D + h * dh;
            const float *p = P + (b * H + h) * L * L;
            if (dP) /* dP = dctx·Vᵀ (whole matrix: a hook may have put weight above the diagonal) */
                rc = seq_gemm(bf16, L, L, dh, dc, D, 1, v, row, false, 1.0f, ml_f32(dP) + (b * H + h) * L * L, L);
            if (dqkv && !rc) /* dV = Pᵀ·dctx */
                rc = seq_gemm(bf16, L, dh, L, p, 1, L, dc, D, true, 1.0f, ml_f32(dqkv) + b * L * row + 2 * D + h * dh,
                              row);
        }
    if (rc) {
        ml_release(dP), ml_release(dqkv);
        return seq_gemm_failed("attention backward", rc);
    }
    gin[0] = dP, gin[1] = dqkv;
    return ML_OK;
}

ml_tensor *ml_attention_apply(ml_tensor *P, ml_tensor *qkv, int H) {
    if (check_qkv("attention_apply", 2, qkv, H)) return NULL;
    int64_t B = qkv->shape[0], L = qkv->shape[1], D = qkv->shape[2] / 3, dh = D / H, row = 3 * D;
    if (check_pattern("attention_apply", 1, P, B, H, L)) return NULL;
    ml_tensor *pc = mlo_dense(P), *x = mlo_dense(qkv), *out = ml_empty(ML_F32, 3, (int64_t[]){B, L, D});
    if (!pc || !x || !out) {
        ml_release(pc), ml_release(x), ml_release(out);
        return NULL;
    }
    const float *pp = ml_f32(pc), *px = ml_f32(x);
    float *po = ml_f32(out);
    ml_precision prec = ml_linear_precision();
    if (!L) B = 0; /* no position: no (batch, head) product to run, however large B is */
    int rc = 0;
    for (int64_t b = 0; b < B && !rc; b++)
        for (int h = 0; h < H && !rc; h++) { /* ctx = P·V */
            const float *v = px + b * L * row + 2 * D + h * dh;
            const float *p = pp + (b * H + h) * L * L;
            rc = seq_gemm(prec == ML_PRECISION_BF16, L, dh, L, p, L, 1, v, row, true, 1.0f, po + b * L * D + h * dh, D);
        }
    if (rc) {
        ml_release(pc), ml_release(x), ml_release(out);
        seq_gemm_failed("attention_apply", rc);
        return NULL;
    }
    if (ml_any_needs_grad(2, (ml_tensor *[]){P, qkv})) {
        ml_node *n = ml_node_new("AttentionApplyBackward", apply_backward, 2, (ml_tensor *[]){P, qkv});
        n->iarg[0] = H;
        n->iarg[1] = prec;
        ml_node_save(n, 0, pc);
        ml_node_save(n, 1, x);
        ml_attach(out, n);
    }
    ml_release(pc), ml_release(x);
    return out;
}

ml_tensor *ml_causal_attention(ml_tensor *qkv, int n_heads, ml_tensor **pattern) {
    if (pattern) *pattern = NULL;
    ml_tensor *S = ml_attention_scores(qkv, n_heads);
    ml_tensor *P = S ? ml_causal_softmax(S) : NULL;
    ml_tensor *out = P ? ml_attention_apply(P, qkv, n_heads) : NULL;
    if (out && pattern) *pattern = ml_detach(P);
    ml_release(S), ml_release(P);
    return out;
}

/* ------------------------------------------------------------------ cross-entropy */

/* Saved: 0 = softmax probabilities (N, V), 1 = targets. farg[0] = 1/count. */
static ml_status cross_entropy_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *prob = ml_node_saved(n, 0), *tg = ml_node_saved(n, 1);
    if (!prob || !tg) return ml_last_status();
    int64_t N = prob->shape[0], V = prob->shape[1];
    /* the probabilities are private to this node and read once, element by element: the
     * gradient overwrites them in place (no N x V buffer more; the node frees them next) */
    bool own = prob->refcount == 1 && prob->storage->refcount == 1 && ml_is_contiguous(prob);
    ml_tensor *d = own ? ml_retain(prob) : ml_empty(ML_F32, 2, prob->shape);
    if (!d) return ML_ERR_MEM;
    float scale = (float)(ml_f32(g)[0] * n->farg[0]);
    const float *pp = ml_f32(prob);
    const int32_t *pt = ml_i32(tg);
    float *pd = ml_f32(d);
    for (int64_t r = 0; r < N; r++) {
        if (pt[r] == -100) {
            memset(pd + r * V, 0, sizeof(float) * (size_t)V);
            continue;
        }
        for (int64_t c = 0; c < V; c++) pd[r * V + c] = pp[r * V + c] * scale;
        pd[r * V + pt[r]] -= scale;
    }
    gin[0] = d;
    return ML_OK;
}

/* e[c] = exp(x[c] − mx) for c < V (mx the row's maximum, so every argument is <= 0); returns
 * their sum. Vectorised (kernel_util.h): the softmax over 8196 classes is on every step. */
MLK_CLONES static double shifted_exp(int64_t V, const float *x, float mx, float *e) {
    double sum = 0;
    if (!e) { /* the sum alone (ml_logsumexp_row), added in the same order */
#pragma omp simd reduction(+ : sum)
        for (int64_t c = 0; c < V; c++) sum += mlk_expf_neg(x[c] - mx);
        return sum;
    }
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < V; c++) {
        float v = mlk_expf_neg(x[c] - mx);
        e[c] = v;
        sum += v;
    }
    return sum;
}

/* The maximum of x (V ≥ 1 entries), vectorised (the loss's argmax loop is scalar: it needs the index). */
MLK_CLONES static float row_max(const float *x, int64_t V) {
    float mx = x[0];
#pragma omp simd reduction(max : mx)
    for (int64_t c = 1; c < V; c++) mx = x[c] > mx ? x[c] : mx;
    return mx;
}

/* The index the scalar scan `if (x[c] > mx) mx = x[c], best = c` from mx = x[0] ends at (the first
 * maximum; NaNs after x[0] never win, a NaN x[0] keeps index 0), in two vectorised passes: the
 * maximum, then its first position. A scalar scan over the 8196 classes cost as much as the exp. */
static int32_t row_argmax_first(const float *x, int64_t V) {
    if (isnan(x[0])) return 0;
    float mx = row_max(x, V); /* exact, and not NaN: every lane starts from a number and skips NaNs */
    /* == also matches -0 for +0: the strict scan keeps the first of such ties too */
    for (int64_t c0 = 0; c0 < V; c0 += 64) {
        int64_t n = V - c0 < 64 ? V - c0 : 64;
        int hit = 0;
#pragma omp simd reduction(| : hit)
        for (int64_t k = 0; k < n; k++) hit |= x[c0 + k] == mx;
        if (hit)
            for (int64_t k = 0; k < n; k++)
                if (x[c0 + k] == mx) return (int32_t)(c0 + k);
    }
    return 0; /* no number but x[0] = -inf, or only NaNs after it: the scan stays at 0 */
}

double ml_logsumexp_row(const float *x, int64_t V) {
    if (V < 1) return -INFINITY;
    float mx = row_max(x, V);
    return (double)mx + log(shifted_exp(V, x, mx, NULL));
}

/* Σ_v exp(c[v] − lc)·(c[v] − x[v]) */
MLK_CLONES static float weighted_gap(const float *c, const float *x, int64_t V, float lc) {
    float w = 0;
#pragma omp simd reduction(+ : w)
    for (int64_t v = 0; v < V; v++) w += mlk_expf_neg(c[v] - lc) * (c[v] - x[v]);
    return w;
}

double ml_kl_div_row(const float *c, const float *x, int64_t V, double lc, double lx) {
    /* Σ p_c (lp_c − lp_x) = Σ p_c (c − x) + lse(x) − lse(c), with p_c = exp(c − lse(c)) */
    return (double)weighted_gap(c, x, V, (float)lc) + lx - lc;
}

ml_tensor *ml_cross_entropy(ml_tensor *logits, ml_tensor *targets) {
    return ml_cross_entropy_stats(logits, targets, NULL, NULL);
}

ml_tensor *ml_cross_entropy_stats(ml_tensor *logits, ml_tensor *targets, float *row_prob, int32_t *row_argmax) {
    if (mlo_check_f32("cross_entropy", 1, logits) || mlo_check_i32("cross_entropy", 2, targets)) return NULL;
    if (logits->ndim != 2 || targets->ndim != 1 || targets->shape[0] != logits->shape[0]) {
        char s1[ML_SHAPE_STR], s2[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "cross_entropy: logits %s and targets %s, expected [N,V] and [N]",
                ml_shape_str(s1, logits->ndim, logits->shape), ml_shape_str(s2, targets->ndim, targets->shape));
        return NULL;
    }
    int64_t N = logits->shape[0], V = logits->shape[1];
    ml_tensor *x = mlo_dense(logits), *tg = mlo_dense(targets);
    const int32_t *pt = ml_i32(tg);
    for (int64_t r = 0; r < N; r++)
        if (pt[r] != -100 && (pt[r] < 0 || pt[r] >= V)) {
            ml_fail(ML_ERR_INDEX, "cross_entropy: target %d at row %lld out of range for %lld classes", pt[r],
                    (long long)r, (long long)V);
            ml_release(x), ml_release(tg);
            return NULL;
        }
    bool rec = ml_needs_grad(logits);
    ml_tensor *prob = rec ? ml_empty(ML_F32, 2, logits->shape) : NULL;
    double total = 0;
    int64_t count = 0;
    const float *px = ml_f32(x);
    float *scratch = prob ? NULL : malloc(sizeof(float) * (size_t)(V ? V : 1));
    if (!prob && !scratch) {
        ml_release(x), ml_release(tg);
        ml_fail(ML_ERR_MEM, "cross_entropy: out of memory");
        return NULL;
    }
    for (int64_t r = 0; r < N; r++) {
        if (pt[r] == -100) {
            if (row_prob) row_prob[r] = 0;
            if (row_argmax) row_argmax[r] = -1;
            continue;
        }
        const float *xr = px + r * V;
        int32_t best = row_argmax_first(xr, V);
        float mx = xr[best];
        /* one pass of exp: the shifted exponentials serve the sum and the probabilities */
        float *e = prob ? ml_f32(prob) + r * V : scratch;
        double sum = shifted_exp(V, xr, mx, e);
        total += (double)mx + log(sum) - xr[pt[r]];
        count++;
        if (row_prob) row_prob[r] = (float)exp((double)(xr[pt[r]] - mx) - log(sum));
        if (row_argmax) row_argmax[r] = best;
        if (e) {
            float inv = (float)(1.0 / sum);
            for (int64_t c = 0; c < V; c++) e[c] *= inv;
        }
    }
    free(scratch);
    ml_tensor *out = ml_scalar(ML_F32, count ? total / (double)count : 0.0);
    if (rec && out) {
        ml_node *n = ml_node_new("CrossEntropyBackward", cross_entropy_backward, 2, (ml_tensor *[]){logits, targets});
        ml_node_save(n, 0, prob);
        ml_node_save(n, 1, tg);
        n->farg[0] = count ? 1.0 / (double)count : 0.0;
        ml_attach(out, n);
    }
    ml_release(prob), ml_release(x), ml_release(tg);
    return out;
}
