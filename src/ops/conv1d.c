/* Causal depthwise short convolution SC_K (docs/kernels.md, "Convolutions"): forward, backward, recurrent step. */
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/op_util.h"

enum { WT_MAX = 4096 }; /* transposed-weight buffer on the stack covers C·K ≤ 4096 (all paper sizes) */

/* wt[j*C + c] = w[c*K + j]: puts the channel index innermost so the c loops are contiguous. */
static const float *transpose_w(int C, int K, const float *w, float *wt) {
    if ((long)C * K > WT_MAX) return NULL;
    for (int c = 0; c < C; c++)
        for (int j = 0; j < K; j++) wt[j * C + c] = w[c * K + j];
    return wt;
}

void mlk_conv1d_fwd(int B, int L, int C, int K, const float *x, const float *w, const float *bias, float *y) {
    mlk_conv1d_fwd_ld(B, L, C, K, x, C, w, bias, y);
}

void mlk_conv1d_bwd(int B, int L, int C, int K, const float *x, const float *w, const float *dy, float *dx,
                    float *dw, float *dbias) {
    mlk_conv1d_bwd_ld(B, L, C, K, x, C, w, dy, dx, dw, dbias);
}

/* One batch element: y[t] = bias + Σ_j w[:,j]⊙x[t−K+1+j], taps added in order as contiguous
 * channel axpys. xb: [L,C] rows ldx apart; yb: [L,C]; wt: [K,C] (transposed) or NULL. */
MLK_CLONES static void conv_fwd_one(int L, int C, int K, const float *xb, int ldx, const float *w, const float *wt,
                                    const float *bias, float *yb) {
    for (int t = 0; t < L; t++) {
        float *yt = yb + (size_t)t * C;
        if (bias) memcpy(yt, bias, sizeof(float) * C);
        else memset(yt, 0, sizeof(float) * C);
        for (int j = 0; j < K; j++) {
            int tau = t - (K - 1) + j; /* input position weighted by w[:,j] */
            if (tau < 0) continue;
            const float *xt = xb + (size_t)tau * ldx;
            if (wt) {
                const float *wj = wt + (size_t)j * C;
#pragma omp simd
                for (int c = 0; c < C; c++) yt[c] += wj[c] * xt[c];
            } else {
                for (int c = 0; c < C; c++) yt[c] += w[(size_t)c * K + j] * xt[c];
            }
        }
    }
}

void mlk_conv1d_fwd_ld(int B, int L, int C, int K, const float *x, int ldx, const float *w, const float *bias,
                       float *y) {
    if (L == 0) return; /* nothing to write: an empty batch costs no loop over its rows */
    float wbuf[WT_MAX];
    const float *wt = transpose_w(C, K, w, wbuf);
    int nt = mlk_threads_for((double)B * L * C * K);
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++) conv_fwd_one(L, C, K, x + (size_t)b * L * ldx, ldx, w, wt, bias, y + (size_t)b * L * C);
}

/* dx[τ] = Σ_j dy[τ+K−1−j]⊙w[:,j] of one batch element, taps in order as channel axpys. */
MLK_CLONES static void conv_dx_one(int L, int C, int K, const float *dyb, const float *w, const float *wt, float *dxb) {
    for (int tau = 0; tau < L; tau++) {
        float *dxt = dxb + (size_t)tau * C;
        memset(dxt, 0, sizeof(float) * C);
        for (int j = 0; j < K; j++) {
            int t = tau + K - 1 - j;
            if (t >= L) continue;
            const float *dyt = dyb + (size_t)t * C;
            if (wt) {
                const float *wj = wt + (size_t)j * C;
#pragma omp simd
                for (int c = 0; c < C; c++) dxt[c] += wj[c] * dyt[c];
            } else {
                for (int c = 0; c < C; c++) dxt[c] += w[(size_t)c * K + j] * dyt[c];
            }
        }
    }
}

/* dw and dbias over a block of channels [c0, c0+cw) (cw ≤ CB), summed in the fixed order b, t. */
enum { CB = 64 };
MLK_CLONES static void conv_dw_block(int B, int L, int C, int K, int c0, int cw, const float *x, int ldx,
                                     const float *dy, float *acc_w, float *acc_b) {
    for (int b = 0; b < B; b++) {
        const float *xb = x + (size_t)b * L * ldx + c0;
        const float *dyb = dy + (size_t)b * L * C + c0;
        for (int t = 0; t < L; t++) {
            const float *dyt = dyb + (size_t)t * C;
#pragma omp simd
            for (int c = 0; c < cw; c++) acc_b[c] += dyt[c];
            for (int j = 0; j < K; j++) {
                int tau = t - (K - 1) + j;
                if (tau < 0) continue;
                const float *xt = xb + (size_t)tau * ldx;
                float *aj = acc_w + j * CB;
#pragma omp simd
                for (int c = 0; c < cw; c++) aj[c] += dyt[c] * xt[c];
            }
        }
    }
}

void mlk_conv1d_bwd_ld(int B, int L, int C, int K, const float *x, int ldx, const float *w, const float *dy,
                       float *dx, float *dw, float *dbias) {
    float wbuf[WT_MAX];
    const float *wt = transpose_w(C, K, w, wbuf);
    int nt = mlk_threads_for((double)B * L * C * K);
    if (dx) {
#pragma omp parallel for num_threads(nt) schedule(static)
        for (int b = 0; b < B; b++) conv_dx_one(L, C, K, dy + (size_t)b * L * C, w, wt, dx + (size_t)b * L * C);
    }
    if (dw || dbias) {
        /* Parameter gradients sum over (b,t): each thread owns a block of channels and sums in the
         * fixed order b, t, so the bits do not depend on the thread count. */
        int nblk = (C + CB - 1) / CB;
#pragma omp parallel for num_threads(nt < nblk ? nt : nblk) schedule(static)
        for (int blk = 0; blk < nblk; blk++) {
            int c0 = blk * CB, c1 = c0 + CB < C ? c0 + CB : C, cw = c1 - c0;
            float acc_w[CB * 16]; /* [j][c] for K ≤ 16; larger K falls back to direct sums */
            float acc_b[CB];
            int kk = K <= 16 ? K : 0;
            memset(acc_w, 0, sizeof acc_w);
            memset(acc_b, 0, sizeof acc_b);
            conv_dw_block(B, L, C, kk, c0, cw, x, ldx, dy, acc_w, acc_b);
            if (dbias)
                for (int c = 0; c < cw; c++) dbias[c0 + c] = acc_b[c];
            if (dw) {
                for (int c = 0; c < cw; c++)
                    for (int j = 0; j < kk; j++) dw[(size_t)(c0 + c) * K + j] = acc_w[j * CB + c];
                if (!kk) { /* K > 16: plain sums, same fixed order */
                    for (int c = c0; c < c1; c++)
                        for (int j = 0; j < K; j++) {
                            float s = 0.0f;
                            for (int b = 0; b < B; b++)
                                for (int t = K - 1 - j; t < L; t++)
                                    s += dy[((size_t)b * L + t) * C + c] * x[((size_t)b * L + t - (K - 1) + j) * ldx + c];
                            dw[(size_t)c * K + j] = s;
                        }
                }
            }
        }
    }
}

void mlk_conv1d_step(int B, int C, int K, float *state, const float *x, const float *w, const float *bias,
                     float *y) {
    int S = K - 1; /* state length */
    for (int b = 0; b < B; b++) {
        float *st = state + (size_t)b * C * S; /* [C,K-1] */
        const float *xb = x + (size_t)b * C;
        float *yb = y + (size_t)b * C;
        for (int c = 0; c < C; c++) {
            const float *wc = w + (size_t)c * K;
            float *sc = st + (size_t)c * S;
            float acc = bias ? bias[c] : 0.0f;
            /* same association order as the parallel form: oldest tap first */
            for (int j = 0; j < S; j++) acc += wc[j] * sc[j];
            acc += wc[S] * xb[c];
            yb[c] = acc;
            if (S > 0) {
                memmove(sc, sc + 1, sizeof(float) * (S - 1));
                sc[S - 1] = xb[c];
            }
        }
    }
}

/* ------------------------------------------------------------------ the differentiable op (ops/mixer_ops.h) */

/* The SiLU of the fused conv, as vectorised loops compiled for AVX2/AVX-512, on the sigmoid of
 * kernel_util.h that ml_unary uses. */
/* y = x ⊙ σ(x) */
MLK_CLONES static void pw_silu(size_t n, const float *x, float *y) {
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        y[i] = x[i] * mlk_sigmoid(x[i]);
}
/* gx = g ⊙ silu'(x), silu'(x) = σ(x)(1 + x(1 − σ(x))) */
MLK_CLONES static void pw_silu_bwd(size_t n, const float *x, const float *g, float *gx) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float sg = mlk_sigmoid(x[i]);
        gx[i] = g[i] * sg * (1.0f + x[i] * (1.0f - sg));
    }
}

/* The kernels' B and L: both 0 for an input without element, whose other sizes may exceed int
 * (an empty [2^31, 0, C] runs no row, and the parameters' gradients are zeros). */
static void conv_rows(const ml_tensor *x, int *B, int *L) {
    bool empty = ml_numel(x) == 0;
    *B = empty ? 0 : (int)x->shape[0];
    *L = empty ? 0 : (int)x->shape[1];
}

static ml_status conv1d_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0), *w = ml_node_saved(n, 1);
    if (!x || !w) return ml_last_status();
    int B, L, C = (int)x->shape[2], K = (int)n->iarg[0];
    conv_rows(x, &B, &L);
    for (int i = 0; i < 3; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    mlk_conv1d_bwd_ld(B, L, C, K, ml_f32(x), (int)n->iarg[1], ml_f32(w), ml_f32(g), mlo_gp(gin[0]), mlo_gp(gin[1]),
                      mlo_gp(gin[2]));
    return ML_OK;
}

ml_tensor *ml_causal_conv1d(ml_tensor *x, ml_tensor *w, ml_tensor *bias) {
    const char *fn = "causal_conv1d";
    ml_tensor *ins[3] = {x, w, bias};
    char d[128];
    if (mlo_check_f32s(fn, 3, ins)) return NULL;
    if (x->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,C]", fn, x->ndim), NULL;
    int64_t C = x->shape[2];
    int64_t K = w->ndim >= 1 ? w->shape[w->ndim - 1] : 0;
    mlo_descf(d, sizeof d, "[C,K] or [C,1,K] with C=%lld", (long long)C);
    if (w->ndim == 3 ? mlo_want_shape(fn, 2, w, 3, (int64_t[]){C, 1, -1}, d)
                     : mlo_want_shape(fn, 2, w, 2, (int64_t[]){C, -1}, d))
        return NULL;
    if (K < 1) return ml_fail(ML_ERR_SHAPE, "%s: argument 2 has kernel width 0", fn), NULL;
    if (bias && mlo_want_shape(fn, 3, bias, 1, &C, mlo_descf(d, sizeof d, "[C] with C=%lld", (long long)C)))
        return NULL;
    if (ml_numel(x) && mlo_check_int_sizes(fn, x)) return NULL;
    int64_t ldx = mlo_row_stride(x); /* a column slice (Mamba's x-branch) is read in place */
    ml_tensor *xc = ldx ? ml_retain(x) : mlo_dense(x), *wc = mlo_dense(w), *bc = bias ? mlo_dense(bias) : NULL;
    if (!ldx) ldx = C;
    ml_tensor *out = ml_empty(ML_F32, 3, x->shape);
    if (!xc || !wc || (bias && !bc) || !out || ldx > (1 << 30)) {
        ml_tensor *all[4] = {xc, wc, bc, out};
        mlo_release_all(4, all);
        return mlo_oom(fn);
    }
    int B, L;
    conv_rows(x, &B, &L);
    mlk_conv1d_fwd_ld(B, L, (int)C, (int)K, ml_f32(xc), (int)ldx, ml_f32(wc),
                      bc ? ml_f32(bc) : NULL, ml_f32(out));
    if (ml_any_needs_grad(3, ins)) {
        ml_node *nd = ml_node_new("CausalConv1dBackward", conv1d_backward, 3, ins);
        if (nd) {
            ml_node_save(nd, 0, xc);
            ml_node_save(nd, 1, wc);
            nd->iarg[0] = K;
            nd->iarg[1] = ldx;
        }
        out = mlo_attach(out, nd);
    }
    ml_tensor *tmp[3] = {xc, wc, bc};
    mlo_release_all(3, tmp);
    return out;
}

/* Conv followed by SiLU (Mamba's causal_conv1d with activation "silu", DeltaNet's q/k/v convs).
 * Saved: 0 x, 1 w, 2 the pre-activation conv output. */
static ml_status conv1d_silu_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0), *w = ml_node_saved(n, 1), *pre = ml_node_saved(n, 2);
    if (!x || !w || !pre) return ml_last_status();
    int B, L, C = (int)x->shape[2], K = (int)n->iarg[0];
    conv_rows(x, &B, &L);
    int ldx = (int)n->iarg[1];
    size_t nx = (size_t)B * L * C;
    float *gp_pre = mlk_falloc(nx);
    if (!gp_pre) return ml_fail(ML_ERR_MEM, "causal_conv1d_silu backward: out of memory");
    pw_silu_bwd(nx, ml_f32(pre), ml_f32(g), gp_pre);
    for (int i = 0; i < 3; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) {
        free(gp_pre);
        return ml_last_status();
    }
    mlk_conv1d_bwd_ld(B, L, C, K, ml_f32(x), ldx, ml_f32(w), gp_pre, mlo_gp(gin[0]), mlo_gp(gin[1]), mlo_gp(gin[2]));
    free(gp_pre);
    return ML_OK;
}

ml_tensor *ml_causal_conv1d_silu(ml_tensor *x, ml_tensor *w, ml_tensor *bias) {
    bool old = ml_set_grad_enabled(false); /* the plain conv without a node, then the fused node */
    ml_tensor *pre = ml_causal_conv1d(x, w, bias);
    ml_set_grad_enabled(old);
    if (!pre) {
        ml_fail_context(ml_last_status(), "causal_conv1d_silu");
        return NULL;
    }
    ml_tensor *out = ml_empty(ML_F32, 3, pre->shape);
    if (!out) {
        ml_release(pre);
        return mlo_oom("causal_conv1d_silu");
    }
    pw_silu((size_t)ml_numel(pre), ml_f32(pre), ml_f32(out));
    ml_tensor *ins[3] = {x, w, bias};
    if (ml_any_needs_grad(3, ins)) {
        ml_node *nd = ml_node_new("CausalConv1dSiluBackward", conv1d_silu_backward, 3, ins);
        if (nd) {
            int64_t ldx = mlo_row_stride(x);
            ml_tensor *xc = ldx ? ml_retain(x) : mlo_dense(x), *wc = mlo_dense(w);
            ml_node_save(nd, 0, xc);
            ml_node_save(nd, 1, wc);
            ml_node_save(nd, 2, pre);
            ml_release(xc), ml_release(wc);
            nd->iarg[0] = w->shape[w->ndim - 1];
            nd->iarg[1] = ldx ? ldx : x->shape[2];
        }
        out = mlo_attach(out, nd);
    }
    ml_release(pre);
    return out;
}
