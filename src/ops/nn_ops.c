#include "ops/nn_ops.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/threads.h"
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

/* Saved: 0 = x̂ (rows, D), 1 = weight; ctx = 1/σ per row (rows). */
static ml_status layer_norm_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *xhat = ml_node_saved(n, 0), *w = ml_node_saved(n, 1);
    if (!xhat || !w) return ml_last_status();
    const float *rstd = n->ctx;
    int64_t D = w->shape[0], rows = ml_numel(xhat) / (D ? D : 1);
    const float *xh = ml_f32(xhat), *pw = ml_f32(w), *pg = ml_f32(g);
    ml_tensor *dx = ml_node_input_needs_grad(n, 0) ? ml_empty(ML_F32, n->in_ndim[0], n->in_shape[0]) : NULL;
    ml_tensor *dw = ml_node_input_needs_grad(n, 1) ? ml_zeros(ML_F32, 1, &D) : NULL;
    ml_tensor *db = ml_node_input_needs_grad(n, 2) ? ml_zeros(ML_F32, 1, &D) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = pg + r * D, *xr = xh + r * D;
        if (dw)
            for (int64_t i = 0; i < D; i++) ml_f32(dw)[i] += gr[i] * xr[i];
        if (db)
            for (int64_t i = 0; i < D; i++) ml_f32(db)[i] += gr[i];
        if (dx) {
            /* dx = (g − mean(g) − x̂·mean(g⊙x̂)) / σ with g = dy⊙γ */
            double mg = 0, mgx = 0;
            for (int64_t i = 0; i < D; i++) {
                double gi = (double)gr[i] * pw[i];
                mg += gi;
                mgx += gi * xr[i];
            }
            mg /= (double)D;
            mgx /= (double)D;
            float *o = ml_f32(dx) + r * D;
            for (int64_t i = 0; i < D; i++) o[i] = (float)(((double)gr[i] * pw[i] - mg - xr[i] * mgx) * rstd[r]);
        }
    }
    gin[0] = dx, gin[1] = dw, gin[2] = db;
    return ML_OK;
}

ml_tensor *ml_layer_norm(ml_tensor *x, ml_tensor *weight, ml_tensor *bias, double eps) {
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
    const float *px = ml_f32(xc), *pw = ml_f32(wc), *pb = bc ? ml_f32(bc) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = px + r * D;
        double mu = 0, var = 0;
        for (int64_t i = 0; i < D; i++) mu += xr[i];
        mu /= (double)D;
        for (int64_t i = 0; i < D; i++) var += ((double)xr[i] - mu) * ((double)xr[i] - mu);
        var /= (double)D;
        float rs = (float)(1.0 / sqrt(var + eps));
        float *o = ml_f32(out) + r * D;
        for (int64_t i = 0; i < D; i++) {
            float xh = (float)((double)xr[i] - mu) * rs;
            if (xhat) ml_f32(xhat)[r * D + i] = xh;
            o[i] = xh * pw[i] + (pb ? pb[i] : 0.0f);
        }
        if (rstd) rstd[r] = rs;
    }
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

/* ------------------------------------------------------------------ RMSNorm */

/* Saved: 0 = x, 1 = weight; ctx = 1/ρ per row. */
static ml_status rms_norm_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0), *w = ml_node_saved(n, 1);
    if (!x || !w) return ml_last_status();
    const float *rr = n->ctx;
    int64_t D = w->shape[0], rows = ml_numel(x) / (D ? D : 1);
    const float *px = ml_f32(x), *pw = ml_f32(w), *pg = ml_f32(g);
    ml_tensor *dx = ml_node_input_needs_grad(n, 0) ? ml_empty(ML_F32, n->in_ndim[0], n->in_shape[0]) : NULL;
    ml_tensor *dw = ml_node_input_needs_grad(n, 1) ? ml_zeros(ML_F32, 1, &D) : NULL;
    for (int64_t r = 0; r < rows; r++) {
        const float *gr = pg + r * D, *xr = px + r * D;
        double inv = rr[r];
        if (dw)
            for (int64_t i = 0; i < D; i++) ml_f32(dw)[i] += (float)(gr[i] * xr[i] * inv);
        if (dx) {
            /* dx = g/ρ − x·(Σ g_i x_i)/(D·ρ³) with g = dy⊙w */
            double s = 0;
            for (int64_t i = 0; i < D; i++) s += (double)gr[i] * pw[i] * xr[i];
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
        double ss = 0;
        for (int64_t i = 0; i < D; i++) ss += (double)xr[i] * xr[i];
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

/* Shapes: qkv (B, L, 3D); head h of q at qkv[b, t, h·dh : (h+1)·dh], k at D + …, v at 2D + …;
 * P (B, H, L, L) with zeros above the diagonal; ctx (B, L, D). */
static void attention_forward(const float *qkv, float *P, float *ctx, int64_t B, int64_t L, int64_t D, int H) {
    int64_t dh = D / H, row = 3 * D;
    float scale = (float)(1.0 / sqrt((double)dh));
#pragma omp parallel for num_threads(ml_threads()) schedule(static) collapse(2)
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q = qkv + b * L * row + h * dh, *k = q + D, *v = q + 2 * D;
            float *p = P + ((b * H + h) * L) * L;
            for (int64_t t = 0; t < L; t++) {
                float *pt = p + t * L, mx = -INFINITY;
                for (int64_t s = 0; s <= t; s++) {
                    float acc = 0;
                    for (int64_t d = 0; d < dh; d++) acc += q[t * row + d] * k[s * row + d];
                    pt[s] = acc * scale;
                    if (pt[s] > mx) mx = pt[s];
                }
                float sum = 0;
                for (int64_t s = 0; s <= t; s++) sum += (pt[s] = expf(pt[s] - mx));
                float inv = 1.0f / sum;
                for (int64_t s = 0; s <= t; s++) pt[s] *= inv;
                for (int64_t s = t + 1; s < L; s++) pt[s] = 0;
                float *c = ctx + (b * L + t) * D + h * dh;
                for (int64_t d = 0; d < dh; d++) c[d] = 0;
                for (int64_t s = 0; s <= t; s++) {
                    float w = pt[s];
                    for (int64_t d = 0; d < dh; d++) c[d] += w * v[s * row + d];
                }
            }
        }
}

/* Saved: 0 = qkv, 1 = P. iarg[0] = heads. */
static ml_status attention_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *qkvt = ml_node_saved(n, 0), *Pt = ml_node_saved(n, 1);
    if (!qkvt || !Pt) return ml_last_status();
    int H = (int)n->iarg[0];
    int64_t B = qkvt->shape[0], L = qkvt->shape[1], D = qkvt->shape[2] / 3, dh = D / H, row = 3 * D;
    ml_tensor *dqkvt = ml_zeros(ML_F32, 3, qkvt->shape);
    float *dS = malloc(sizeof(float) * (size_t)(B * H * L + 1));
    if (!dqkvt || !dS) {
        free(dS);
        ml_release(dqkvt);
        return ml_fail(ML_ERR_MEM, "attention backward: out of memory");
    }
    const float *qkv = ml_f32(qkvt), *P = ml_f32(Pt), *dctx = ml_f32(g);
    float *dqkv = ml_f32(dqkvt);
    float scale = (float)(1.0 / sqrt((double)dh));
#pragma omp parallel for num_threads(ml_threads()) schedule(static) collapse(2)
    for (int64_t b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            const float *q = qkv + b * L * row + h * dh, *k = q + D, *v = q + 2 * D;
            float *dq = dqkv + b * L * row + h * dh, *dk = dq + D, *dv = dq + 2 * D;
            const float *p = P + ((b * H + h) * L) * L;
            float *ds = dS + (b * H + h) * L;
            for (int64_t t = 0; t < L; t++) {
                const float *pt = p + t * L, *dc = dctx + (b * L + t) * D + h * dh;
                /* dP[t,s] = dctx_t · v_s ; dv_s += P[t,s]·dctx_t */
                float dot = 0;
                for (int64_t s = 0; s <= t; s++) {
                    float acc = 0;
                    for (int64_t d = 0; d < dh; d++) acc += dc[d] * v[s * row + d];
                    ds[s] = acc;
                    dot += acc * pt[s];
                    float w = pt[s];
                    for (int64_t d = 0; d < dh; d++) dv[s * row + d] += w * dc[d];
                }
                /* dS = P ⊙ (dP − Σ dP⊙P); dq_t = dS·k·scale; dk_s += dS[t,s]·q_t·scale */
                for (int64_t s = 0; s <= t; s++) {
                    float w = pt[s] * (ds[s] - dot) * scale;
                    for (int64_t d = 0; d < dh; d++) {
                        dq[t * row + d] += w * k[s * row + d];
                        dk[s * row + d] += w * q[t * row + d];
                    }
                }
            }
        }
    free(dS);
    gin[0] = dqkvt;
    return ML_OK;
}

ml_tensor *ml_causal_attention(ml_tensor *qkv, int n_heads, ml_tensor **pattern) {
    if (pattern) *pattern = NULL;
    if (mlo_check_f32("attention", 1, qkv)) return NULL;
    if (qkv->ndim != 3 || qkv->shape[2] % 3 || n_heads < 1 || (qkv->shape[2] / 3) % n_heads) {
        char s[ML_SHAPE_STR];
        ml_fail(ML_ERR_SHAPE, "attention: argument 1 has shape %s, expected [B,L,3D] with D divisible by %d heads",
                ml_shape_str(s, qkv->ndim, qkv->shape), n_heads);
        return NULL;
    }
    int64_t B = qkv->shape[0], L = qkv->shape[1], D = qkv->shape[2] / 3;
    ml_tensor *x = mlo_dense(qkv);
    ml_tensor *P = ml_empty(ML_F32, 4, (int64_t[]){B, n_heads, L, L});
    ml_tensor *out = ml_empty(ML_F32, 3, (int64_t[]){B, L, D});
    if (!x || !P || !out) {
        ml_release(x), ml_release(P), ml_release(out);
        return NULL;
    }
    attention_forward(ml_f32(x), ml_f32(P), ml_f32(out), B, L, D, n_heads);
    if (ml_needs_grad(qkv)) {
        ml_node *n = ml_node_new("AttentionBackward", attention_backward, 1, &qkv);
        n->iarg[0] = n_heads;
        ml_node_save(n, 0, x);
        ml_node_save(n, 1, P);
        ml_attach(out, n);
    }
    if (pattern) *pattern = ml_detach(P);
    ml_release(x), ml_release(P);
    return out;
}

/* ------------------------------------------------------------------ cross-entropy */

/* Saved: 0 = softmax probabilities (N, V), 1 = targets. farg[0] = 1/count. */
static ml_status cross_entropy_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *prob = ml_node_saved(n, 0), *tg = ml_node_saved(n, 1);
    if (!prob || !tg) return ml_last_status();
    int64_t N = prob->shape[0], V = prob->shape[1];
    ml_tensor *d = ml_empty(ML_F32, 2, prob->shape);
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

ml_tensor *ml_cross_entropy(ml_tensor *logits, ml_tensor *targets) {
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
    for (int64_t r = 0; r < N; r++) {
        if (pt[r] == -100) continue;
        const float *xr = px + r * V;
        float mx = -INFINITY;
        for (int64_t c = 0; c < V; c++) mx = xr[c] > mx ? xr[c] : mx;
        double sum = 0;
        for (int64_t c = 0; c < V; c++) sum += exp((double)(xr[c] - mx));
        double lse = (double)mx + log(sum);
        total += lse - xr[pt[r]];
        count++;
        if (prob)
            for (int64_t c = 0; c < V; c++) ml_f32(prob)[r * V + c] = (float)exp((double)xr[c] - lse);
    }
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
