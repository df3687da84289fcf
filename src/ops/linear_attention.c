/* Based linear attention with the Taylor feature map (docs/mixers.md, "Based"): quadratic view forward/backward
 * via the closed form φ(q)·φ(k) = 1 + s + s²/2 (s = q·k/√F), the explicit feature map, and the
 * recurrent step over the KV and normaliser states. Parallel over (batch, head). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/op_util.h"

/* short dot products (the F = 8 features) */
MLK_INLINE float dotf(int n, const float *a, const float *b) {
    float s = 0.0f;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* long dot products (the Dv values), vectorised */
MLK_INLINE float dotv(int n, const float *a, const float *b) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Forward of one (batch, head). */
MLK_CLONES static void based_fwd_one(int b, int h, int L, int H, int F, int Dv, float eps, float inv_sqrt_f,
                                     const float *q, const float *k, const float *v, float *y, float *den,
                                     float *pattern) {
    for (int t = 0; t < L; t++) {
        const float *qt = q + (((size_t)b * L + t) * H + h) * F;
        float *yt = y + (((size_t)b * L + t) * H + h) * Dv;
        float *pt = pattern ? pattern + (((size_t)b * H + h) * L + t) * L : NULL;
        memset(yt, 0, sizeof(float) * Dv);
        float dsum = 0.0f;
        for (int s = 0; s <= t; s++) {
            const float *ks = k + (((size_t)b * L + s) * H + h) * F;
            const float *vs = v + (((size_t)b * L + s) * H + h) * Dv;
            float sc = dotf(F, qt, ks) * inv_sqrt_f;
            float a = 1.0f + sc + 0.5f * sc * sc; /* φ(q)·φ(k) */
            dsum += a;
            if (pt) pt[s] = a;
#pragma omp simd
            for (int j = 0; j < Dv; j++) yt[j] += a * vs[j];
        }
        float dn = dsum + eps;
        float inv = 1.0f / dn;
        for (int j = 0; j < Dv; j++) yt[j] *= inv;
        if (den) den[((size_t)b * H + h) * L + t] = dn;
        if (pt) {
            for (int s = 0; s <= t; s++) pt[s] *= inv;
            for (int s = t + 1; s < L; s++) pt[s] = 0.0f;
        }
    }
}

void mlk_based_fwd_ex(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k,
                      const float *v, float *y, float *den, float *pattern) {
    if (L == 0) return; /* y, den and pattern are all [B, L, ...]: nothing to write */
    const float inv_sqrt_f = 1.0f / sqrtf((float)F);
    int nt = mlk_threads_for((double)B * H * L * L * (F + Dv) * 0.5);
#pragma omp parallel for collapse(2) num_threads(nt) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            based_fwd_one(b, h, L, H, F, Dv, eps, inv_sqrt_f, q, k, v, y, den, pattern);
        }
}

void mlk_based_fwd(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k, const float *v,
                   float *y) {
    mlk_based_fwd_ex(B, L, H, F, Dv, eps, q, k, v, y, NULL, NULL);
}

/* Backward of one (batch, head); arow: [L], yt: [Dv] scratch. */
MLK_CLONES static void based_bwd_one(int b, int h, int L, int H, int F, int Dv, float eps, float inv_sqrt_f,
                                     const float *q, const float *k, const float *v, const float *dy, float *dq,
                                     float *dk, float *dv, float *arow, float *yt) {
    for (int t = 0; t < L; t++) {
        size_t rt = ((size_t)b * L + t) * H + h;
        const float *qt = q + rt * F, *dyt = dy + rt * Dv;
        /* recompute A[t,:], den_t and y_t exactly as the forward does */
        memset(yt, 0, sizeof(float) * Dv);
        float dsum = 0.0f;
        for (int s = 0; s <= t; s++) {
            size_t rs = ((size_t)b * L + s) * H + h;
            float sc = dotf(F, qt, k + rs * F) * inv_sqrt_f;
            float a = 1.0f + sc + 0.5f * sc * sc;
            arow[s] = sc;
            dsum += a;
            const float *vs = v + rs * Dv;
#pragma omp simd
            for (int j = 0; j < Dv; j++) yt[j] += a * vs[j];
        }
        float inv = 1.0f / (dsum + eps);
        float dyy = 0.0f;
        for (int j = 0; j < Dv; j++) dyy += dyt[j] * yt[j] * inv;
        const float dden = -dyy * inv; /* dden_t = −(dy_t·y_t)/den_t */
        float dqt[MLK_BASED_MAXF] = {0};
        for (int s = 0; s <= t; s++) {
            size_t rs = ((size_t)b * L + s) * H + h;
            const float *vs = v + rs * Dv, *ks = k + rs * F;
            float sc = arow[s], a = 1.0f + sc + 0.5f * sc * sc;
            /* dA[t,s] = dnum_t·v_s + dden_t with dnum_t = dy_t/den_t */
            float dA = dotv(Dv, dyt, vs) * inv + dden;
            if (dv) {
                float *dvs = dv + rs * Dv;
                float ai = a * inv;
#pragma omp simd
                for (int j = 0; j < Dv; j++) dvs[j] += ai * dyt[j];
            }
            float ds = dA * (1.0f + sc) * inv_sqrt_f; /* d(1+s+s²/2)/ds, ds/d(q·k) */
            for (int f = 0; f < F; f++) dqt[f] += ds * ks[f];
            if (dk) {
                float *dks = dk + rs * F;
                for (int f = 0; f < F; f++) dks[f] += ds * qt[f];
            }
        }
        if (dq) memcpy(dq + rt * F, dqt, sizeof(float) * F);
    }
}

int mlk_based_bwd(int B, int L, int H, int F, int Dv, float eps, const float *q, const float *k, const float *v,
                  const float *dy, float *dq, float *dk, float *dv) {
    const float inv_sqrt_f = 1.0f / sqrtf((float)F);
    /* per thread: an A[t,:] row, y_t */
    mlk_scratch sc = mlk_scratch_new((double)B * H * L * L * (F + Dv), sizeof(float), 0, (size_t)L + Dv, 0);
    if (!sc.base) return -1;
    /* dk and dv of a (b,h) receive contributions from every later t: zero them first */
    for (int b = 0; b < B; b++)
        for (int t = 0; t < L; t++)
            for (int h = 0; h < H; h++) {
                size_t r = ((size_t)b * L + t) * H + h;
                if (dk) memset(dk + r * F, 0, sizeof(float) * F);
                if (dv) memset(dv + r * Dv, 0, sizeof(float) * Dv);
            }
#pragma omp parallel num_threads(sc.nt)
    {
        float *arow = mlk_scratch_mine(&sc), *yt = arow + L;
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                based_bwd_one(b, h, L, H, F, Dv, eps, inv_sqrt_f, q, k, v, dy, dq, dk, dv, arow, yt);
            }
    }
    free(sc.base);
    return 0;
}

void mlk_taylor_fwd(int n, int F, const float *x, float *phi) {
    /* divisions as in the original (x / F^{1/4}, x_m x_j / (√2·√F)) */
    const float rd = (float)sqrt(sqrt((double)F)), rrd = (float)(sqrt(2.0) * sqrt((double)F));
    int P = mlk_taylor_dim(F);
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * F;
        float *p = phi + (size_t)i * P;
        p[0] = 1.0f;
        for (int m = 0; m < F; m++) p[1 + m] = xi[m] / rd;
        for (int m = 0; m < F; m++)
            for (int j = 0; j < F; j++) p[1 + F + m * F + j] = xi[m] * xi[j] / rrd;
    }
}

void mlk_taylor_bwd(int n, int F, const float *x, const float *dphi, float *dx) {
    const float r = (float)(1.0 / sqrt(sqrt((double)F))), c = (float)(1.0 / (sqrt(2.0) * sqrt((double)F)));
    int P = mlk_taylor_dim(F);
    for (int i = 0; i < n; i++) {
        const float *xi = x + (size_t)i * F, *g = dphi + (size_t)i * P;
        const float *g2 = g + 1 + F; /* [F,F] */
        for (int m = 0; m < F; m++) {
            float acc = 0.0f;
            for (int j = 0; j < F; j++) acc += (g2[m * F + j] + g2[j * F + m]) * xi[j];
            dx[(size_t)i * F + m] = g[1 + m] * r + c * acc;
        }
    }
}

void mlk_based_step(int B, int H, int F, int Dv, float eps, float *S, float *z, const float *q, const float *k,
                    const float *v, float *y) {
    int P = mlk_taylor_dim(F);
    float pk[1 + MLK_BASED_MAXF + MLK_BASED_MAXF * MLK_BASED_MAXF];
    float pq[1 + MLK_BASED_MAXF + MLK_BASED_MAXF * MLK_BASED_MAXF];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            size_t bh = (size_t)b * H + h;
            float *Sb = S + bh * P * Dv, *zb = z + bh * P;
            const float *vb = v + bh * Dv;
            float *yb = y + bh * Dv;
            mlk_taylor_fwd(1, F, k + bh * F, pk);
            mlk_taylor_fwd(1, F, q + bh * F, pq);
            for (int p = 0; p < P; p++) {
                zb[p] += pk[p];
                float *Sp = Sb + (size_t)p * Dv;
                for (int j = 0; j < Dv; j++) Sp[j] += pk[p] * vb[j];
            }
            float dn = dotf(P, pq, zb) + eps;
            memset(yb, 0, sizeof(float) * Dv);
            for (int p = 0; p < P; p++) {
                const float *Sp = Sb + (size_t)p * Dv;
                for (int j = 0; j < Dv; j++) yb[j] += pq[p] * Sp[j];
            }
            for (int j = 0; j < Dv; j++) yb[j] /= dn;
        }
}

/* ------------------------------------------------------------------ the differentiable op (ops/mixer_ops.h) */

static ml_status based_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *q = ml_node_saved(n, 0), *k = ml_node_saved(n, 1), *v = ml_node_saved(n, 2);
    if (!q || !k || !v) return ml_last_status();
    int H = (int)n->iarg[0], B = (int)q->shape[0], L = (int)q->shape[1];
    int F = (int)q->shape[2] / H, Dv = (int)v->shape[2] / H;
    for (int i = 0; i < 3; i++)
        gin[i] = mlo_grad_like(n, i);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    if (mlk_based_bwd(B, L, H, F, Dv, (float)n->farg[0], ml_f32(q), ml_f32(k), ml_f32(v), ml_f32(g), mlo_gp(gin[0]),
                      mlo_gp(gin[1]), mlo_gp(gin[2]))) {
        for (int i = 0; i < 3; i++)
            ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "based_linear_attention backward: out of memory");
    }
    return ML_OK;
}

ml_tensor *ml_based_linear_attention(ml_tensor *q, ml_tensor *k, ml_tensor *v, int n_heads, double eps,
                                     ml_tensor **pattern) {
    const char *fn = "based_linear_attention";
    ml_tensor *ins[3] = {q, k, v};
    char d[128];
    if (pattern) *pattern = NULL;
    if (mlo_check_f32s(fn, 3, ins)) return NULL;
    if (q->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,H*F]", fn, q->ndim), NULL;
    int64_t B = q->shape[0], L = q->shape[1];
    if (n_heads < 1 || q->shape[2] % n_heads != 0 || q->shape[2] / n_heads > MLK_BASED_MAXF || q->shape[2] == 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 4 (heads) must divide the feature width %lld into heads of at most %d",
                       fn, (long long)q->shape[2], MLK_BASED_MAXF),
               NULL;
    if (mlo_want_shape(fn, 2, k, 3, q->shape, "the shape of argument 1")) return NULL;
    if (mlo_want_shape(fn, 3, v, 3, (int64_t[]){B, L, -1},
                       mlo_descf(d, sizeof d, "[B,L,H*Dv] with B=%lld, L=%lld", (long long)B, (long long)L)))
        return NULL;
    if (v->shape[2] % n_heads != 0)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 3 width %lld is not divisible by %d heads", fn,
                       (long long)v->shape[2], n_heads),
               NULL;
    if (mlo_check_int_sizes(fn, v)) return NULL;
    int H = n_heads, F = (int)(q->shape[2] / H), Dv = (int)(v->shape[2] / H);
    ml_tensor *qc = mlo_dense(q), *kc = mlo_dense(k), *vc = mlo_dense(v);
    ml_tensor *out = ml_empty(ML_F32, 3, v->shape);
    ml_tensor *pat = pattern ? ml_empty(ML_F32, 4, (int64_t[]){B, H, L, L}) : NULL;
    if (!qc || !kc || !vc || !out || (pattern && !pat)) {
        ml_tensor *all[5] = {qc, kc, vc, out, pat};
        mlo_release_all(5, all);
        return mlo_oom(fn);
    }
    mlk_based_fwd_ex((int)B, (int)L, H, F, Dv, (float)eps, ml_f32(qc), ml_f32(kc), ml_f32(vc), ml_f32(out), NULL,
                     pat ? ml_f32(pat) : NULL);
    if (ml_any_needs_grad(3, ins)) {
        ml_node *nd = ml_node_new("BasedLinearAttentionBackward", based_backward, 3, ins);
        if (nd) {
            ml_node_save(nd, 0, qc);
            ml_node_save(nd, 1, kc);
            ml_node_save(nd, 2, vc);
            nd->iarg[0] = H;
            nd->farg[0] = eps;
        }
        out = mlo_attach(out, nd);
    }
    ml_tensor *tmp[3] = {qc, kc, vc};
    mlo_release_all(3, tmp);
    if (!out) {
        ml_release(pat);
        return NULL;
    }
    if (pattern) *pattern = pat;
    return out;
}

ml_tensor *ml_based_kv_state(ml_tensor *k, ml_tensor *v, int n_heads, ml_tensor **zsum) {
    const char *fn = "based_kv_state";
    ml_tensor *ins[2] = {k, v};
    char d[128];
    if (zsum) *zsum = NULL;
    if (mlo_check_f32s(fn, 2, ins)) return NULL;
    if (k->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,H*F]", fn, k->ndim), NULL;
    int64_t B = k->shape[0], L = k->shape[1];
    if (n_heads < 1 || k->shape[2] % n_heads != 0 || k->shape[2] / n_heads > MLK_BASED_MAXF || k->shape[2] == 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 3 (heads) must divide the feature width %lld into heads of at most %d",
                       fn, (long long)k->shape[2], MLK_BASED_MAXF),
               NULL;
    if (mlo_want_shape(fn, 2, v, 3, (int64_t[]){B, L, -1},
                       mlo_descf(d, sizeof d, "[B,L,H*Dv] with B=%lld, L=%lld", (long long)B, (long long)L)))
        return NULL;
    if (v->shape[2] % n_heads != 0)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 2 width %lld is not divisible by %d heads", fn,
                       (long long)v->shape[2], n_heads),
               NULL;
    int64_t H = n_heads, F = k->shape[2] / H, Dv = v->shape[2] / H, P = mlk_taylor_dim((int)F);
    ml_tensor *kc = mlo_dense(k), *vc = mlo_dense(v);
    ml_tensor *S = ml_empty(ML_F32, 5, (int64_t[]){B, L, H, P, Dv});
    ml_tensor *z = zsum ? ml_empty(ML_F32, 4, (int64_t[]){B, L, H, P}) : NULL;
    float *phi = mlk_falloc((size_t)P);
    if (!kc || !vc || !S || (zsum && !z) || !phi) {
        ml_tensor *all[4] = {kc, vc, S, z};
        mlo_release_all(4, all);
        free(phi);
        return mlo_oom(fn);
    }
    size_t PD = (size_t)P * Dv;
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < L; t++)
            for (int64_t h = 0; h < H; h++) {
                size_t r = ((size_t)b * L + t) * H + h; /* row (b,t,h) */
                float *St = ml_f32(S) + r * PD, *zt = z ? ml_f32(z) + r * P : NULL;
                const float *vt = ml_f32(vc) + r * Dv;
                mlk_taylor_fwd(1, (int)F, ml_f32(kc) + r * F, phi);
                for (int64_t p = 0; p < P; p++) {
                    /* S_t = S_{t-1} + φ(k_t) v_tᵀ, accumulated in token order like the step form */
                    const float *Sp = t > 0 ? St - (size_t)H * PD + p * Dv : NULL;
                    for (int64_t j = 0; j < Dv; j++)
                        St[p * Dv + j] = (Sp ? Sp[j] : 0.0f) + phi[p] * vt[j];
                    if (zt) zt[p] = (t > 0 ? zt[p - (int64_t)H * P] : 0.0f) + phi[p];
                }
            }
    free(phi);
    ml_release(kc), ml_release(vc);
    if (zsum) *zsum = z;
    return S;
}

static ml_status taylor_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0);
    if (!x) return ml_last_status();
    int F = (int)x->shape[x->ndim - 1];
    gin[0] = mlo_grad_like(n, 0);
    if (mlo_grads_ok(n, gin)) return ml_last_status();
    mlk_taylor_bwd((int)(ml_numel(x) / F), F, ml_f32(x), ml_f32(g), ml_f32(gin[0]));
    return ML_OK;
}

ml_tensor *ml_taylor_features(ml_tensor *x) {
    const char *fn = "taylor_features";
    if (mlo_check_f32(fn, 1, x)) return NULL;
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1 || x->shape[x->ndim - 1] > MLK_BASED_MAXF)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 must have a last dimension of 1..%d features", fn, MLK_BASED_MAXF),
               NULL;
    int F = (int)x->shape[x->ndim - 1];
    int64_t shape[ML_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * x->ndim);
    shape[x->ndim - 1] = mlk_taylor_dim(F);
    ml_tensor *xc = mlo_dense(x), *out = ml_empty(ML_F32, x->ndim, shape);
    if (!xc || !out) {
        ml_release(xc), ml_release(out);
        return mlo_oom(fn);
    }
    mlk_taylor_fwd((int)(ml_numel(x) / F), F, ml_f32(xc), ml_f32(out));
    if (ml_needs_grad(x)) {
        ml_node *nd = ml_node_new("TaylorFeaturesBackward", taylor_backward, 1, &x);
        if (nd) ml_node_save(nd, 0, xc);
        out = mlo_attach(out, nd);
    }
    ml_release(xc);
    return out;
}
