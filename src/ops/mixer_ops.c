/* Differentiable mixer ops: argument checks, contiguous inputs, kernels of ops/kernels.h, and
 * backward functions that call the kernels' backward passes. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3", "fp-contract=fast") /* vectorised pointwise loops; FMA in the clones */
#endif
#include "ops/mixer_ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/kernel_util.h"
#include "ops/kernels.h"
#include "ops/op_util.h"
#include "ops/ops.h"

/* ------------------------------------------------------------------ helpers */

/* Fails unless t has nd dims equal to want (−1 = any). desc says what was expected, e.g.
 * "[C,K] with C=64". */
static ml_status want_shape(const char *fn, int arg, const ml_tensor *t, int nd, const int64_t *want,
                            const char *desc) {
    bool ok = t->ndim == nd;
    for (int i = 0; ok && i < nd; i++) ok = want[i] < 0 || t->shape[i] == want[i];
    if (ok) return ML_OK;
    char buf[ML_SHAPE_STR];
    return ml_fail(ML_ERR_SHAPE, "%s: argument %d has shape %s, expected %s", fn, arg,
                   ml_shape_str(buf, t->ndim, t->shape), desc);
}

/* Formats an expected-shape description into a static-size buffer. */
static const char *descf(char *buf, size_t n, const char *fmt, ...) ML_PRINTF(3, 4);
static const char *descf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    return buf;
}

static ml_status check_f32s(const char *fn, int n, ml_tensor *const *ts) {
    for (int i = 0; i < n; i++)
        if (ts[i] && mlo_check_f32(fn, i + 1, ts[i])) return ml_last_status();
    return ML_OK;
}

/* Dims must fit the kernels' int sizes. */
static ml_status check_int_sizes(const char *fn, const ml_tensor *t) {
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > (1 << 30)) return ml_fail(ML_ERR_SHAPE, "%s: dimension %d is too large", fn, i + 1);
    return ML_OK;
}

/* Row stride of a [B,L,C] view whose rows are contiguous and evenly spaced (such as a column slice
 * of a wider [B,L,·] tensor), which the kernels read in place; 0 when it needs a dense copy. */
static int64_t row_stride(const ml_tensor *t) {
    if (t->ndim != 3 || t->shape[2] < 1) return 0;
    if (t->shape[2] > 1 && t->stride[2] != 1) return 0;
    int64_t ld = t->shape[1] > 1 ? t->stride[1] : (t->shape[0] > 1 ? t->stride[0] : t->shape[2]);
    if (ld < t->shape[2]) return 0;
    if (t->shape[0] > 1 && t->stride[0] != t->shape[1] * ld) return 0;
    return ld;
}

static void release_all(int n, ml_tensor **ts) {
    for (int i = 0; i < n; i++) ml_release(ts[i]);
}

static ml_tensor *oom(const char *fn) {
    ml_fail(ML_ERR_MEM, "%s: out of memory", fn);
    return NULL;
}

/* Gradient buffer shaped like input i of node n, or NULL when that input needs none. */
static ml_tensor *grad_like(ml_node *n, int i) {
    return ml_node_input_needs_grad(n, i) ? ml_empty(ML_F32, n->in_ndim[i], n->in_shape[i]) : NULL;
}
static float *gp(ml_tensor *g) { return g ? ml_f32(g) : NULL; }

/* Checks that every requested gradient buffer was allocated. */
static ml_status grads_ok(ml_node *n, ml_tensor **gin) {
    for (int i = 0; i < n->n_in; i++)
        if (ml_node_input_needs_grad(n, i) && !gin[i]) {
            for (int j = 0; j < n->n_in; j++) ml_release(gin[j]), gin[j] = NULL;
            return ml_fail(ML_ERR_MEM, "%s: out of memory", n->name);
        }
    return ML_OK;
}

/* Pointwise parts of the fused ops, as vectorised loops compiled for AVX2/AVX-512, on the sigmoid
 * and softplus (threshold 20, as torch and the mamba kernel) of kernel_util.h that ml_unary uses. */
/* y = x ⊙ σ(x) */
MLK_CLONES static void pw_silu(size_t n, const float *x, float *y) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = x[i] * mlk_sigmoid(x[i]);
}
/* gx = g ⊙ silu'(x), silu'(x) = σ(x)(1 + x(1 − σ(x))) */
MLK_CLONES static void pw_silu_bwd(size_t n, const float *x, const float *g, float *gx) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float sg = mlk_sigmoid(x[i]);
        gx[i] = g[i] * sg * (1.0f + x[i] * (1.0f - sg));
    }
}
MLK_CLONES static void pw_softplus(size_t n, const float *x, float *y) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = mlk_softplus(x[i]);
}
/* g ⊙ softplus'(x) in place: σ(x), 1 above the threshold */
MLK_CLONES static void pw_softplus_bwd(size_t n, const float *x, float *g) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) g[i] *= x[i] > 20.0f ? 1.0f : mlk_sigmoid(x[i]);
}
/* out[r,:] = ys[r,:] ⊙ silu(z[r,:]) over R rows of E (z rows ldz apart) */
MLK_CLONES static void pw_gate(size_t R, int E, const float *ys, const float *z, size_t ldz, float *out) {
    for (size_t r = 0; r < R; r++) {
        const float *zr = z + r * ldz, *yr = ys + r * E;
        float *o = out + r * E;
#pragma omp simd
        for (int e = 0; e < E; e++) o[e] = yr[e] * (zr[e] * mlk_sigmoid(zr[e]));
    }
}
/* gated backward: gs = g ⊙ silu(z), dz = g ⊙ ys ⊙ silu'(z) (dz may be NULL) */
MLK_CLONES static void pw_gate_bwd(size_t R, int E, const float *ys, const float *z, size_t ldz, const float *g,
                                   float *gs, float *dz) {
    for (size_t r = 0; r < R; r++) {
        const float *zr = z + r * ldz, *yr = ys + r * E, *gr = g + r * E;
        float *gsr = gs + r * E, *dzr = dz ? dz + r * E : NULL;
#pragma omp simd
        for (int e = 0; e < E; e++) {
            float zi = zr[e], sg = mlk_sigmoid(zi);
            gsr[e] = gr[e] * zi * sg;
            if (dzr) dzr[e] = gr[e] * yr[e] * sg * (1.0f + zi * (1.0f - sg));
        }
    }
}

/* ------------------------------------------------------------------ causal conv1d */

static ml_status conv1d_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0), *w = ml_node_saved(n, 1);
    if (!x || !w) return ml_last_status();
    int B = (int)x->shape[0], L = (int)x->shape[1], C = (int)x->shape[2], K = (int)n->iarg[0];
    for (int i = 0; i < 3; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) return ml_last_status();
    mlk_conv1d_bwd_ld(B, L, C, K, ml_f32(x), (int)n->iarg[1], ml_f32(w), ml_f32(g), gp(gin[0]), gp(gin[1]),
                      gp(gin[2]));
    return ML_OK;
}

ml_tensor *ml_causal_conv1d(ml_tensor *x, ml_tensor *w, ml_tensor *bias) {
    const char *fn = "causal_conv1d";
    ml_tensor *ins[3] = {x, w, bias};
    char d[128];
    if (check_f32s(fn, 3, ins)) return NULL;
    if (x->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,C]", fn, x->ndim), NULL;
    int64_t C = x->shape[2];
    int64_t K = w->ndim >= 1 ? w->shape[w->ndim - 1] : 0;
    descf(d, sizeof d, "[C,K] or [C,1,K] with C=%lld", (long long)C);
    if (w->ndim == 3 ? want_shape(fn, 2, w, 3, (int64_t[]){C, 1, -1}, d) : want_shape(fn, 2, w, 2, (int64_t[]){C, -1}, d))
        return NULL;
    if (K < 1) return ml_fail(ML_ERR_SHAPE, "%s: argument 2 has kernel width 0", fn), NULL;
    if (bias && want_shape(fn, 3, bias, 1, &C, descf(d, sizeof d, "[C] with C=%lld", (long long)C))) return NULL;
    if (check_int_sizes(fn, x)) return NULL;
    int64_t ldx = row_stride(x); /* a column slice (Mamba's x-branch) is read in place */
    ml_tensor *xc = ldx ? ml_retain(x) : mlo_dense(x), *wc = mlo_dense(w), *bc = bias ? mlo_dense(bias) : NULL;
    if (!ldx) ldx = C;
    ml_tensor *out = ml_empty(ML_F32, 3, x->shape);
    if (!xc || !wc || (bias && !bc) || !out || ldx > (1 << 30)) {
        ml_tensor *all[4] = {xc, wc, bc, out};
        release_all(4, all);
        return oom(fn);
    }
    mlk_conv1d_fwd_ld((int)x->shape[0], (int)x->shape[1], (int)C, (int)K, ml_f32(xc), (int)ldx, ml_f32(wc),
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
    release_all(3, tmp);
    return out;
}

/* Conv followed by SiLU (Mamba's causal_conv1d with activation "silu", DeltaNet's q/k/v convs).
 * Saved: 0 x, 1 w, 2 the pre-activation conv output. */
static ml_status conv1d_silu_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0), *w = ml_node_saved(n, 1), *pre = ml_node_saved(n, 2);
    if (!x || !w || !pre) return ml_last_status();
    int B = (int)x->shape[0], L = (int)x->shape[1], C = (int)x->shape[2], K = (int)n->iarg[0];
    int ldx = (int)n->iarg[1];
    size_t nx = (size_t)B * L * C;
    float *gp_pre = mlk_falloc(nx);
    if (!gp_pre) return ml_fail(ML_ERR_MEM, "causal_conv1d_silu backward: out of memory");
    pw_silu_bwd(nx, ml_f32(pre), ml_f32(g), gp_pre);
    for (int i = 0; i < 3; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) {
        free(gp_pre);
        return ml_last_status();
    }
    mlk_conv1d_bwd_ld(B, L, C, K, ml_f32(x), ldx, ml_f32(w), gp_pre, gp(gin[0]), gp(gin[1]), gp(gin[2]));
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
        return oom("causal_conv1d_silu");
    }
    pw_silu((size_t)ml_numel(pre), ml_f32(pre), ml_f32(out));
    ml_tensor *ins[3] = {x, w, bias};
    if (ml_any_needs_grad(3, ins)) {
        ml_node *nd = ml_node_new("CausalConv1dSiluBackward", conv1d_silu_backward, 3, ins);
        if (nd) {
            int64_t ldx = row_stride(x);
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

/* ------------------------------------------------------------------ long conv */

static ml_status long_conv_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *u = ml_node_saved(n, 0), *k = ml_node_saved(n, 1), *ds = ml_node_saved(n, 2);
    if (!u || !k || (n->iarg[1] && !ds)) return ml_last_status();
    int B = (int)u->shape[0], L = (int)u->shape[1], C = (int)u->shape[2], G = (int)n->iarg[0];
    gin[0] = grad_like(n, 0);
    gin[1] = ml_node_input_needs_grad(n, 1) ? ml_zeros(ML_F32, n->in_ndim[1], n->in_shape[1]) : NULL; /* rows ≥ L: 0 */
    gin[2] = grad_like(n, 2);
    if (grads_ok(n, gin)) return ml_last_status();
    mlk_longconv_bwd(B, L, C, G, ml_f32(u), ml_f32(k), ds ? ml_f32(ds) : NULL, ml_f32(g), gp(gin[0]), gp(gin[1]),
                     gp(gin[2]));
    return ML_OK;
}

ml_tensor *ml_long_conv(ml_tensor *u, ml_tensor *k, ml_tensor *dskip, int G) {
    const char *fn = "long_conv";
    ml_tensor *ins[3] = {u, k, dskip};
    char d[128];
    if (check_f32s(fn, 3, ins)) return NULL;
    if (u->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,C]", fn, u->ndim), NULL;
    int64_t L = u->shape[1], C = u->shape[2];
    if (G < 1 || C % G != 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 4 (channels per filter) must divide C=%lld, got %d", fn,
                       (long long)C, G),
               NULL;
    int64_t F = C / G;
    if (want_shape(fn, 2, k, 2, (int64_t[]){-1, F}, descf(d, sizeof d, "[Lk,F] with F=%lld, Lk>=%lld", (long long)F,
                                                         (long long)L)))
        return NULL;
    if (k->shape[0] < L) {
        char b1[ML_SHAPE_STR];
        return ml_fail(ML_ERR_SHAPE, "%s: argument 2 has shape %s, expected at least L=%lld rows", fn,
                       ml_shape_str(b1, 2, k->shape), (long long)L),
               NULL;
    }
    if (dskip && want_shape(fn, 3, dskip, 1, &F, descf(d, sizeof d, "[F] with F=%lld", (long long)F))) return NULL;
    if (check_int_sizes(fn, u)) return NULL;
    ml_tensor *uc = mlo_dense(u), *kc = mlo_dense(k), *dc = dskip ? mlo_dense(dskip) : NULL;
    ml_tensor *out = ml_empty(ML_F32, 3, u->shape);
    if (!uc || !kc || (dskip && !dc) || !out) {
        ml_tensor *all[4] = {uc, kc, dc, out};
        release_all(4, all);
        return oom(fn);
    }
    mlk_longconv_fwd((int)u->shape[0], (int)L, (int)C, G, ml_f32(uc), ml_f32(kc), dc ? ml_f32(dc) : NULL, ml_f32(out));
    if (ml_any_needs_grad(3, ins)) {
        ml_node *nd = ml_node_new("LongConvBackward", long_conv_backward, 3, ins);
        if (nd) {
            ml_node_save(nd, 0, uc);
            ml_node_save(nd, 1, kc);
            ml_node_save(nd, 2, dc);
            nd->iarg[0] = G;
            nd->iarg[1] = dc != NULL;
        }
        out = mlo_attach(out, nd);
    }
    ml_tensor *tmp[3] = {uc, kc, dc};
    release_all(3, tmp);
    return out;
}

/* ------------------------------------------------------------------ selective scan */

/* Saved: 0 u, 1 delta input, 2 A, 3 Bm, 4 Cm, 5 D, 6 h0, 7 z (possibly a column slice, rows iarg[2]
 * apart); ctx: [ys | Δ] (B·L·E floats each; ys when gated, Δ when softplus).
 * iarg[0]: bit i set when saved input i exists; iarg[1]: softplus applied to the delta input. */
static ml_status sscan_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *s[8];
    for (int i = 0; i < 8; i++) {
        s[i] = (n->iarg[0] >> i) & 1 ? ml_node_saved(n, i) : NULL;
        if (((n->iarg[0] >> i) & 1) && !s[i]) return ml_last_status();
    }
    int B = (int)s[0]->shape[0], L = (int)s[0]->shape[1], E = (int)s[0]->shape[2], N = (int)s[2]->shape[1];
    size_t nE = (size_t)B * L * E;
    bool sp = n->iarg[1] != 0;
    for (int i = 0; i < 8; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) return ml_last_status();
    /* scratch: the gradient reaching the scan output (when gated) */
    float *gs = s[7] ? mlk_falloc(nE) : NULL;
    if (s[7] && !gs) {
        for (int i = 0; i < 8; i++) ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "selective_scan backward: out of memory");
    }
    const float *draw = ml_f32(s[1]), *go = ml_f32(g), *ys = n->ctx, *dl = sp ? (float *)n->ctx + nE : NULL;
    if (s[7]) { /* out = ys ⊙ silu(z): g_ys = g ⊙ silu(z), dz = g ⊙ ys ⊙ silu'(z) */
        pw_gate_bwd((size_t)B * L, E, ys, ml_f32(s[7]), (size_t)n->iarg[2], go, gs, gp(gin[7]));
    }
    float *p[7];
    for (int i = 0; i < 7; i++) p[i] = s[i] ? ml_f32(s[i]) : NULL;
    int rc = mlk_sscan_bwd(B, L, E, N, p[0], sp ? dl : p[1], p[2], p[3], p[4], p[5], p[6], NULL, s[7] ? gs : go,
                           gp(gin[0]), gp(gin[1]), gp(gin[2]), gp(gin[3]), gp(gin[4]), gp(gin[5]), gp(gin[6]));
    if (!rc && sp && gin[1]) pw_softplus_bwd(nE, draw, ml_f32(gin[1])); /* dΔraw = dΔ ⊙ σ(Δraw) */
    free(gs);
    if (rc) {
        for (int i = 0; i < 8; i++) ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "selective_scan backward: out of memory");
    }
    return ML_OK;
}

/* h0_arg: h0's argument number as the caller's user sees it (7 in ml_selective_scan, 8 in _ex). */
static ml_tensor *selective_scan_impl(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm,
                                      ml_tensor *D, ml_tensor *z, ml_tensor *h0, bool delta_softplus,
                                      ml_tensor **states, ml_tensor **hlast, int h0_arg) {
    const char *fn = "selective_scan";
    ml_tensor *ins[8] = {u, delta, A, Bm, Cm, D, h0, z};
    char d[128];
    if (states) *states = NULL;
    if (hlast) *hlast = NULL;
    if (check_f32s(fn, 8, ins)) return NULL;
    if (u->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,E]", fn, u->ndim), NULL;
    int64_t B = u->shape[0], L = u->shape[1], E = u->shape[2];
    int64_t N = A->ndim == 2 ? A->shape[1] : -1;
    descf(d, sizeof d, "[B,L,E]=[%lld,%lld,%lld] like argument 1", (long long)B, (long long)L, (long long)E);
    if (want_shape(fn, 2, delta, 3, u->shape, d)) return NULL;
    if (z && want_shape(fn, 7, z, 3, u->shape, d)) return NULL;
    if (want_shape(fn, 3, A, 2, (int64_t[]){E, -1}, descf(d, sizeof d, "[E,N] with E=%lld", (long long)E))) return NULL;
    descf(d, sizeof d, "[B,L,N]=[%lld,%lld,%lld]", (long long)B, (long long)L, (long long)N);
    if (want_shape(fn, 4, Bm, 3, (int64_t[]){B, L, N}, d) || want_shape(fn, 5, Cm, 3, (int64_t[]){B, L, N}, d))
        return NULL;
    if (D && want_shape(fn, 6, D, 1, &E, descf(d, sizeof d, "[E] with E=%lld", (long long)E))) return NULL;
    if (h0 && want_shape(fn, h0_arg, h0, 3, (int64_t[]){B, E, N},
                         descf(d, sizeof d, "[B,E,N]=[%lld,%lld,%lld]", (long long)B, (long long)E, (long long)N)))
        return NULL;
    if (check_int_sizes(fn, u) || check_int_sizes(fn, A)) return NULL;
    size_t nE = (size_t)B * L * E;
    int64_t ldz = z ? row_stride(z) : 0; /* the gate may be a column slice of in_proj's output */
    ml_tensor *c[8] = {0};
    for (int i = 0; i < 8; i++) c[i] = ins[i] ? (i == 7 && ldz ? ml_retain(z) : mlo_dense(ins[i])) : NULL;
    if (z && !ldz) ldz = E;
    ml_tensor *out = ml_empty(ML_F32, 3, u->shape);
    ml_tensor *hs = states ? ml_empty(ML_F32, 4, (int64_t[]){B, L, E, N}) : NULL;
    ml_tensor *hl = hlast ? ml_empty(ML_F32, 3, (int64_t[]){B, E, N}) : NULL;
    bool rec = ml_any_needs_grad(8, ins);
    /* ctx of the node: [ys | Δ], the ungated output (gated) and Δ after softplus (softplus) */
    float *ctx = (z || delta_softplus) ? mlk_falloc(nE * 2) : NULL;
    float *ys = z ? ctx : NULL, *dl = delta_softplus ? ctx + nE : NULL;
    bool ok = out && (!states || hs) && (!hlast || hl) && (!(z || delta_softplus) || ctx);
    for (int i = 0; i < 8; i++) ok = ok && (!ins[i] || c[i]);
    if (ok) {
        const float *draw = ml_f32(c[1]);
        if (dl) pw_softplus(nE, draw, dl);
        float *p[7];
        for (int i = 0; i < 7; i++) p[i] = c[i] ? ml_f32(c[i]) : NULL;
        if (mlk_sscan_fwd((int)B, (int)L, (int)E, (int)N, p[0], dl ? dl : p[1], p[2], p[3], p[4], p[5], p[6],
                          ys ? ys : ml_f32(out), hs ? ml_f32(hs) : NULL, hl ? ml_f32(hl) : NULL))
            ok = false;
        if (ok && z) pw_gate((size_t)B * L, (int)E, ys, ml_f32(c[7]), (size_t)ldz, ml_f32(out));
    }
    if (!ok) {
        release_all(8, c);
        free(ctx);
        ml_release(out), ml_release(hs), ml_release(hl);
        return oom(fn);
    }
    if (rec) {
        ml_node *nd = ml_node_new("SelectiveScanBackward", sscan_backward, 8, ins);
        if (nd) {
            for (int i = 0; i < 8; i++) {
                ml_node_save(nd, i, c[i]);
                if (c[i]) nd->iarg[0] |= 1 << i; /* which optional inputs exist */
            }
            nd->iarg[1] = delta_softplus;
            nd->iarg[2] = ldz;
            nd->ctx = ctx, nd->ctx_free = free, ctx = NULL;
        }
        out = mlo_attach(out, nd);
    }
    free(ctx);
    release_all(8, c);
    if (!out) {
        ml_release(hs), ml_release(hl);
        return NULL;
    }
    if (states) *states = hs;
    if (hlast) *hlast = hl;
    return out;
}

ml_tensor *ml_selective_scan_ex(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm,
                                ml_tensor *D, ml_tensor *z, ml_tensor *h0, bool delta_softplus, ml_tensor **states,
                                ml_tensor **hlast) {
    return selective_scan_impl(u, delta, A, Bm, Cm, D, z, h0, delta_softplus, states, hlast, 8);
}

ml_tensor *ml_selective_scan(ml_tensor *u, ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm,
                             ml_tensor *D, ml_tensor *h0, ml_tensor **states, ml_tensor **hlast) {
    return selective_scan_impl(u, delta, A, Bm, Cm, D, NULL, h0, false, states, hlast, 7);
}

ml_tensor *ml_selective_scan_attention(ml_tensor *delta, ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm, ml_tensor *D) {
    const char *fn = "selective_scan_attention";
    ml_tensor *ins[5] = {delta, A, Bm, Cm, D};
    char d[128];
    if (check_f32s(fn, 5, ins)) return NULL;
    if (delta->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,E]", fn, delta->ndim), NULL;
    int64_t B = delta->shape[0], L = delta->shape[1], E = delta->shape[2];
    int64_t N = A->ndim == 2 ? A->shape[1] : -1;
    if (want_shape(fn, 2, A, 2, (int64_t[]){E, -1}, descf(d, sizeof d, "[E,N] with E=%lld", (long long)E))) return NULL;
    if (N > 256) return ml_fail(ML_ERR_SHAPE, "%s: at most 256 states supported, got N=%lld", fn, (long long)N), NULL;
    descf(d, sizeof d, "[B,L,N]=[%lld,%lld,%lld]", (long long)B, (long long)L, (long long)N);
    if (want_shape(fn, 3, Bm, 3, (int64_t[]){B, L, N}, d) || want_shape(fn, 4, Cm, 3, (int64_t[]){B, L, N}, d))
        return NULL;
    if (D && want_shape(fn, 5, D, 1, &E, descf(d, sizeof d, "[E] with E=%lld", (long long)E))) return NULL;
    ml_tensor *c[5];
    for (int i = 0; i < 5; i++) c[i] = ins[i] ? mlo_dense(ins[i]) : NULL;
    ml_tensor *out = ml_empty(ML_F32, 4, (int64_t[]){B, E, L, L});
    if (out)
        mlk_sscan_attention((int)B, (int)L, (int)E, (int)N, ml_f32(c[0]), ml_f32(c[1]), ml_f32(c[2]), ml_f32(c[3]),
                            c[4] ? ml_f32(c[4]) : NULL, ml_f32(out));
    release_all(5, c);
    return out ? out : oom(fn);
}

/* ------------------------------------------------------------------ Based */

static ml_status based_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *q = ml_node_saved(n, 0), *k = ml_node_saved(n, 1), *v = ml_node_saved(n, 2);
    if (!q || !k || !v) return ml_last_status();
    int H = (int)n->iarg[0], B = (int)q->shape[0], L = (int)q->shape[1];
    int F = (int)q->shape[2] / H, Dv = (int)v->shape[2] / H;
    for (int i = 0; i < 3; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) return ml_last_status();
    if (mlk_based_bwd(B, L, H, F, Dv, (float)n->farg[0], ml_f32(q), ml_f32(k), ml_f32(v), ml_f32(g), gp(gin[0]),
                      gp(gin[1]), gp(gin[2]))) {
        for (int i = 0; i < 3; i++) ml_release(gin[i]), gin[i] = NULL;
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
    if (check_f32s(fn, 3, ins)) return NULL;
    if (q->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,H*F]", fn, q->ndim), NULL;
    int64_t B = q->shape[0], L = q->shape[1];
    if (n_heads < 1 || q->shape[2] % n_heads != 0 || q->shape[2] / n_heads > MLK_BASED_MAXF || q->shape[2] == 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 4 (heads) must divide the feature width %lld into heads of at most %d",
                       fn, (long long)q->shape[2], MLK_BASED_MAXF),
               NULL;
    if (want_shape(fn, 2, k, 3, q->shape, "the shape of argument 1")) return NULL;
    if (want_shape(fn, 3, v, 3, (int64_t[]){B, L, -1}, descf(d, sizeof d, "[B,L,H*Dv] with B=%lld, L=%lld",
                                                          (long long)B, (long long)L)))
        return NULL;
    if (v->shape[2] % n_heads != 0)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 3 width %lld is not divisible by %d heads", fn,
                       (long long)v->shape[2], n_heads),
               NULL;
    if (check_int_sizes(fn, v)) return NULL;
    int H = n_heads, F = (int)(q->shape[2] / H), Dv = (int)(v->shape[2] / H);
    ml_tensor *qc = mlo_dense(q), *kc = mlo_dense(k), *vc = mlo_dense(v);
    ml_tensor *out = ml_empty(ML_F32, 3, v->shape);
    ml_tensor *pat = pattern ? ml_empty(ML_F32, 4, (int64_t[]){B, H, L, L}) : NULL;
    if (!qc || !kc || !vc || !out || (pattern && !pat)) {
        ml_tensor *all[5] = {qc, kc, vc, out, pat};
        release_all(5, all);
        return oom(fn);
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
    release_all(3, tmp);
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
    if (check_f32s(fn, 2, ins)) return NULL;
    if (k->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,H*F]", fn, k->ndim), NULL;
    int64_t B = k->shape[0], L = k->shape[1];
    if (n_heads < 1 || k->shape[2] % n_heads != 0 || k->shape[2] / n_heads > MLK_BASED_MAXF || k->shape[2] == 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 3 (heads) must divide the feature width %lld into heads of at most %d",
                       fn, (long long)k->shape[2], MLK_BASED_MAXF),
               NULL;
    if (want_shape(fn, 2, v, 3, (int64_t[]){B, L, -1}, descf(d, sizeof d, "[B,L,H*Dv] with B=%lld, L=%lld",
                                                          (long long)B, (long long)L)))
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
        release_all(4, all);
        free(phi);
        return oom(fn);
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
                    for (int64_t j = 0; j < Dv; j++) St[p * Dv + j] = (Sp ? Sp[j] : 0.0f) + phi[p] * vt[j];
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
    gin[0] = grad_like(n, 0);
    if (grads_ok(n, gin)) return ml_last_status();
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
        return oom(fn);
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

/* ------------------------------------------------------------------ delta rule */

static ml_status delta_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *s[6];
    for (int i = 0; i < 6; i++) {
        s[i] = i != 4 || n->iarg[1] ? ml_node_saved(n, i) : NULL;
        if ((i != 4 || n->iarg[1]) && !s[i]) return ml_last_status();
    }
    int H = (int)n->iarg[0], B = (int)s[0]->shape[0], L = (int)s[0]->shape[1];
    int Dk = (int)s[0]->shape[2] / H, Dv = (int)s[2]->shape[2] / H;
    for (int i = 0; i < 5; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) return ml_last_status();
    float scale = (float)n->farg[0];
    int fail = n->iarg[2] ? mlk_delta_quad_bwd(B, L, H, Dk, Dv, scale, ml_f32(s[0]), ml_f32(s[1]), ml_f32(s[2]),
                                               ml_f32(s[3]), ml_f32(s[5]), ml_f32(g), gp(gin[0]), gp(gin[1]),
                                               gp(gin[2]), gp(gin[3]))
                          : mlk_delta_bwd(B, L, H, Dk, Dv, scale, ml_f32(s[0]), ml_f32(s[1]), ml_f32(s[2]),
                                          ml_f32(s[3]), s[4] ? ml_f32(s[4]) : NULL, ml_f32(s[5]), ml_f32(g),
                                          gp(gin[0]), gp(gin[1]), gp(gin[2]), gp(gin[3]), gp(gin[4]));
    if (fail) {
        for (int i = 0; i < 5; i++) ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "delta_rule backward: out of memory");
    }
    return ML_OK;
}

ml_tensor *ml_delta_rule(ml_tensor *q, ml_tensor *k, ml_tensor *v, ml_tensor *beta, int n_heads, double scale,
                         ml_tensor *S0, ml_tensor **states, ml_tensor **Slast) {
    const char *fn = "delta_rule";
    ml_tensor *ins[5] = {q, k, v, beta, S0};
    char d[128];
    if (states) *states = NULL;
    if (Slast) *Slast = NULL;
    if (check_f32s(fn, 5, ins)) return NULL;
    if (q->ndim != 3)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 has %d dimensions, expected [B,L,H*Dk]", fn, q->ndim), NULL;
    int64_t B = q->shape[0], L = q->shape[1];
    if (n_heads < 1 || q->shape[2] % n_heads != 0 || q->shape[2] == 0)
        return ml_fail(ML_ERR_ARG, "%s: argument 5 (heads) must divide the key width %lld, got %d", fn,
                       (long long)q->shape[2], n_heads),
               NULL;
    int64_t H = n_heads, Dk = q->shape[2] / H;
    if (want_shape(fn, 2, k, 3, q->shape, "the shape of argument 1")) return NULL;
    if (want_shape(fn, 3, v, 3, (int64_t[]){B, L, -1}, descf(d, sizeof d, "[B,L,H*Dv] with B=%lld, L=%lld",
                                                          (long long)B, (long long)L)))
        return NULL;
    if (v->shape[2] % H != 0 || v->shape[2] == 0)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 3 width %lld is not divisible by %lld heads", fn,
                       (long long)v->shape[2], (long long)H),
               NULL;
    int64_t Dv = v->shape[2] / H;
    if (want_shape(fn, 4, beta, 3, (int64_t[]){B, L, H},
                   descf(d, sizeof d, "[B,L,H]=[%lld,%lld,%lld]", (long long)B, (long long)L, (long long)H)))
        return NULL;
    if (S0 && want_shape(fn, 7, S0, 4, (int64_t[]){B, H, Dk, Dv},
                         descf(d, sizeof d, "[B,H,Dk,Dv]=[%lld,%lld,%lld,%lld]", (long long)B, (long long)H,
                               (long long)Dk, (long long)Dv)))
        return NULL;
    if (check_int_sizes(fn, q) || check_int_sizes(fn, v)) return NULL;
    ml_tensor *c[5];
    for (int i = 0; i < 5; i++) c[i] = ins[i] ? mlo_dense(ins[i]) : NULL;
    ml_tensor *out = ml_empty(ML_F32, 3, v->shape);
    ml_tensor *st = states ? ml_empty(ML_F32, 5, (int64_t[]){B, L, H, Dk, Dv}) : NULL;
    ml_tensor *sl = Slast ? ml_empty(ML_F32, 4, (int64_t[]){B, H, Dk, Dv}) : NULL;
    bool rec = ml_any_needs_grad(5, ins);
    /* From S = 0 o comes from the quadratic form whenever it is the faster one, whether or not the
     * states are asked for too (so asking for them changes no bit of o); they come from the recurrence. */
    bool quad = !S0 && mlk_delta_quad_ok((int)L, (int)Dk, (int)Dv);
    ml_tensor *vo = rec ? ml_empty(ML_F32, 3, v->shape) : NULL; /* vold, saved for the backward */
    ml_tensor *o2 = quad && (st || sl) ? ml_empty(ML_F32, 3, v->shape) : NULL; /* the recurrence's o, unused */
    bool ok = out && (!states || st) && (!Slast || sl) && (!rec || vo) && (!(quad && (st || sl)) || o2);
    for (int i = 0; i < 5; i++) ok = ok && (!ins[i] || c[i]);
    const float *qp = ok ? ml_f32(c[0]) : NULL, *kp = ok ? ml_f32(c[1]) : NULL, *vp = ok ? ml_f32(c[2]) : NULL;
    const float *bp = ok ? ml_f32(c[3]) : NULL;
    if (ok && quad && mlk_delta_quad_fwd((int)B, (int)L, (int)H, (int)Dk, (int)Dv, (float)scale, qp, kp, vp, bp,
                                         ml_f32(out), vo ? ml_f32(vo) : NULL))
        ok = false;
    if (ok && (!quad || st || sl) &&
        mlk_delta_fwd((int)B, (int)L, (int)H, (int)Dk, (int)Dv, (float)scale, qp, kp, vp, bp,
                      c[4] ? ml_f32(c[4]) : NULL, ml_f32(quad ? o2 : out), st ? ml_f32(st) : NULL,
                      vo && !quad ? ml_f32(vo) : NULL, sl ? ml_f32(sl) : NULL))
        ok = false;
    ml_release(o2);
    if (!ok) {
        release_all(5, c);
        ml_release(out), ml_release(st), ml_release(sl), ml_release(vo);
        return oom(fn);
    }
    if (rec) {
        ml_node *nd = ml_node_new("DeltaRuleBackward", delta_backward, 5, ins);
        if (nd) {
            for (int i = 0; i < 5; i++) ml_node_save(nd, i, c[i]);
            ml_node_save(nd, 5, vo);
            nd->iarg[0] = H;
            nd->iarg[1] = c[4] != NULL;
            nd->iarg[2] = quad;
            nd->farg[0] = scale;
        }
        out = mlo_attach(out, nd);
    }
    release_all(5, c);
    ml_release(vo);
    if (!out) {
        ml_release(st), ml_release(sl);
        return NULL;
    }
    if (states) *states = st;
    if (Slast) *Slast = sl;
    return out;
}

static ml_status l2norm_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *x = ml_node_saved(n, 0);
    if (!x) return ml_last_status();
    int d = (int)x->shape[x->ndim - 1];
    gin[0] = grad_like(n, 0);
    if (grads_ok(n, gin)) return ml_last_status();
    mlk_l2norm_bwd((int)(ml_numel(x) / d), d, (float)n->farg[0], ml_f32(x), ml_f32(g), ml_f32(gin[0]));
    return ML_OK;
}

ml_tensor *ml_l2_normalize(ml_tensor *x, double eps) {
    const char *fn = "l2_normalize";
    if (mlo_check_f32(fn, 1, x)) return NULL;
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 must have a non-empty last dimension", fn), NULL;
    if (check_int_sizes(fn, x)) return NULL;
    int d = (int)x->shape[x->ndim - 1];
    ml_tensor *xc = mlo_dense(x), *out = ml_empty(ML_F32, x->ndim, x->shape);
    if (!xc || !out) {
        ml_release(xc), ml_release(out);
        return oom(fn);
    }
    mlk_l2norm_fwd((int)(ml_numel(x) / d), d, (float)eps, ml_f32(xc), ml_f32(out));
    if (ml_needs_grad(x)) {
        ml_node *nd = ml_node_new("L2NormalizeBackward", l2norm_backward, 1, &x);
        if (nd) {
            ml_node_save(nd, 0, xc);
            nd->farg[0] = eps;
        }
        out = mlo_attach(out, nd);
    }
    ml_release(xc);
    return out;
}

/* ------------------------------------------------------------------ H3 */

static ml_status shift_kernel_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *B = ml_node_saved(n, 0), *C = ml_node_saved(n, 1);
    if (!B || !C) return ml_last_status();
    int Ch = (int)B->shape[0], N = (int)B->shape[1], L = (int)n->iarg[0];
    for (int i = 0; i < 2; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) return ml_last_status();
    mlk_h3_shift_kernel_bwd(Ch, N, L, ml_f32(B), ml_f32(C), ml_f32(g), gp(gin[0]), gp(gin[1]));
    return ML_OK;
}

ml_tensor *ml_h3_shift_kernel(ml_tensor *B, ml_tensor *C, int L) {
    const char *fn = "h3_shift_kernel";
    ml_tensor *ins[2] = {B, C};
    char d[128];
    if (check_f32s(fn, 2, ins)) return NULL;
    if (want_shape(fn, 1, B, 2, (int64_t[]){-1, -1}, "[C,N]")) return NULL;
    int64_t Ch = B->shape[0], N = B->shape[1];
    descf(d, sizeof d, "[C,N] or [1,C,N] with C=%lld, N=%lld", (long long)Ch, (long long)N);
    if (C->ndim == 3 ? want_shape(fn, 2, C, 3, (int64_t[]){1, Ch, N}, d) : want_shape(fn, 2, C, 2, B->shape, d))
        return NULL;
    if (L < 0 || L > N)
        return ml_fail(ML_ERR_ARG, "%s: argument 3 (length) must be in [0, N=%lld], got %d", fn, (long long)N, L), NULL;
    if (check_int_sizes(fn, B)) return NULL;
    ml_tensor *bc = mlo_dense(B), *cc = mlo_dense(C), *out = ml_empty(ML_F32, 2, (int64_t[]){L, Ch});
    if (!bc || !cc || !out) {
        ml_tensor *all[3] = {bc, cc, out};
        release_all(3, all);
        return oom(fn);
    }
    mlk_h3_shift_kernel_fwd((int)Ch, (int)N, L, ml_f32(bc), ml_f32(cc), ml_f32(out));
    if (ml_any_needs_grad(2, ins)) {
        ml_node *nd = ml_node_new("H3ShiftKernelBackward", shift_kernel_backward, 2, ins);
        if (nd) {
            ml_node_save(nd, 0, bc);
            ml_node_save(nd, 1, cc);
            nd->iarg[0] = L;
        }
        out = mlo_attach(out, nd);
    }
    ml_release(bc), ml_release(cc);
    return out;
}

static ml_status s4d_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *s[5];
    for (int i = 0; i < 5; i++)
        if (!(s[i] = ml_node_saved(n, i))) return ml_last_status();
    int H = (int)s[1]->shape[0], M = (int)s[3]->shape[1], L = (int)n->iarg[0];
    for (int i = 0; i < 5; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) return ml_last_status();
    if (mlk_s4d_kernel_bwd(H, M, L, ml_f32(s[0]), ml_f32(s[1]), ml_f32(s[2]), ml_f32(s[3]), ml_f32(s[4]), ml_f32(g),
                           gp(gin[0]), gp(gin[1]), gp(gin[2]), gp(gin[3]), gp(gin[4]))) {
        for (int i = 0; i < 5; i++) ml_release(gin[i]), gin[i] = NULL;
        return ml_fail(ML_ERR_MEM, "s4d_kernel backward: out of memory");
    }
    return ML_OK;
}

ml_tensor *ml_s4d_kernel(ml_tensor *C, ml_tensor *log_dt, ml_tensor *B, ml_tensor *inv_A_real, ml_tensor *A_imag,
                         int L) {
    const char *fn = "s4d_kernel";
    ml_tensor *ins[5] = {C, log_dt, B, inv_A_real, A_imag};
    char d[128];
    if (check_f32s(fn, 5, ins)) return NULL;
    if (want_shape(fn, 2, log_dt, 1, (int64_t[]){-1}, "[H]")) return NULL;
    int64_t H = log_dt->shape[0];
    if (want_shape(fn, 4, inv_A_real, 2, (int64_t[]){H, -1}, descf(d, sizeof d, "[H,M] with H=%lld", (long long)H)))
        return NULL;
    int64_t M = inv_A_real->shape[1];
    descf(d, sizeof d, "[H,M,2] or [1,H,M,2] with H=%lld, M=%lld", (long long)H, (long long)M);
    if (C->ndim == 4 ? want_shape(fn, 1, C, 4, (int64_t[]){1, H, M, 2}, d)
                     : want_shape(fn, 1, C, 3, (int64_t[]){H, M, 2}, d))
        return NULL;
    if (want_shape(fn, 3, B, 3, (int64_t[]){H, M, 2}, d)) return NULL;
    if (want_shape(fn, 5, A_imag, 2, (int64_t[]){H, M}, descf(d, sizeof d, "[H,M]=[%lld,%lld]", (long long)H,
                                                            (long long)M)))
        return NULL;
    if (L < 0) return ml_fail(ML_ERR_ARG, "%s: argument 6 (length) must be >= 0, got %d", fn, L), NULL;
    if (check_int_sizes(fn, inv_A_real)) return NULL;
    ml_tensor *c[5];
    for (int i = 0; i < 5; i++) c[i] = mlo_dense(ins[i]);
    ml_tensor *out = ml_empty(ML_F32, 2, (int64_t[]){L, H});
    bool ok = out != NULL;
    for (int i = 0; i < 5; i++) ok = ok && c[i];
    if (ok && mlk_s4d_kernel_fwd((int)H, (int)M, L, ml_f32(c[0]), ml_f32(c[1]), ml_f32(c[2]), ml_f32(c[3]),
                                 ml_f32(c[4]), ml_f32(out)))
        ok = false;
    if (!ok) {
        release_all(5, c);
        ml_release(out);
        return oom(fn);
    }
    if (ml_any_needs_grad(5, ins)) {
        ml_node *nd = ml_node_new("S4DKernelBackward", s4d_backward, 5, ins);
        if (nd) {
            for (int i = 0; i < 5; i++) ml_node_save(nd, i, c[i]);
            nd->iarg[0] = L;
        }
        out = mlo_attach(out, nd);
    }
    release_all(5, c);
    return out;
}

static ml_status h3_outer_backward(ml_node *n, ml_tensor *g, ml_tensor **gin) {
    ml_tensor *a = ml_node_saved(n, 0), *b = ml_node_saved(n, 1);
    if (!a || !b) return ml_last_status();
    int H = (int)(a->shape[2] / 2), BL = (int)(a->shape[0] * a->shape[1]);
    for (int i = 0; i < 2; i++) gin[i] = grad_like(n, i);
    if (grads_ok(n, gin)) return ml_last_status();
    if (n->iarg[0] == 0) mlk_h3_outer_bwd(BL, H, ml_f32(a), ml_f32(b), ml_f32(g), gp(gin[0]), gp(gin[1]));
    else mlk_h3_gate_bwd(BL, H, ml_f32(a), ml_f32(b), ml_f32(g), gp(gin[0]), gp(gin[1]));
    return ML_OK;
}

/* Shared by ml_h3_outer (gate = 0) and ml_h3_gate (gate = 1). */
static ml_tensor *h3_pair(const char *fn, ml_tensor *a, ml_tensor *b, int gate) {
    ml_tensor *ins[2] = {a, b};
    char d[128];
    if (check_f32s(fn, 2, ins)) return NULL;
    if (a->ndim != 3 || a->shape[2] % 2 != 0)
        return ml_fail(ML_ERR_SHAPE, "%s: argument 1 must be [B,L,2H] (an even last dimension)", fn), NULL;
    int64_t Bz = a->shape[0], L = a->shape[1], H = a->shape[2] / 2;
    int64_t wb = gate ? 4 * H : 2 * H;
    if (want_shape(fn, 2, b, 3, (int64_t[]){Bz, L, wb}, descf(d, sizeof d, "[%lld,%lld,%lld]", (long long)Bz,
                                                            (long long)L, (long long)wb)))
        return NULL;
    if (check_int_sizes(fn, b)) return NULL;
    ml_tensor *ac = mlo_dense(a), *bc = mlo_dense(b);
    ml_tensor *out = ml_empty(ML_F32, 3, (int64_t[]){Bz, L, gate ? 2 * H : 4 * H});
    if (!ac || !bc || !out) {
        ml_tensor *all[3] = {ac, bc, out};
        release_all(3, all);
        return oom(fn);
    }
    if (gate) mlk_h3_gate_fwd((int)(Bz * L), (int)H, ml_f32(ac), ml_f32(bc), ml_f32(out));
    else mlk_h3_outer_fwd((int)(Bz * L), (int)H, ml_f32(ac), ml_f32(bc), ml_f32(out));
    if (ml_any_needs_grad(2, ins)) {
        ml_node *nd = ml_node_new(gate ? "H3GateBackward" : "H3OuterBackward", h3_outer_backward, 2, ins);
        if (nd) {
            ml_node_save(nd, 0, ac);
            ml_node_save(nd, 1, bc);
            nd->iarg[0] = gate;
        }
        out = mlo_attach(out, nd);
    }
    ml_release(ac), ml_release(bc);
    return out;
}

ml_tensor *ml_h3_outer(ml_tensor *kt, ml_tensor *v) { return h3_pair("h3_outer", kt, v, 0); }
ml_tensor *ml_h3_gate(ml_tensor *q, ml_tensor *yk) { return h3_pair("h3_gate", q, yk, 1); }

/* ------------------------------------------------------------------ Hyena filter (composed) */

/* sin(f ⊙ (x·Wᵀ + b)) from generic ops; NULL on error. */
static ml_tensor *sin_layer(ml_tensor *x, ml_tensor *W, ml_tensor *b, ml_tensor *f) {
    ml_tensor *pre = ml_linear(x, W, b);
    if (!pre) return NULL;
    ml_tensor *scaled = ml_mul(pre, f);
    ml_release(pre);
    if (!scaled) return NULL;
    ml_tensor *a = ml_unary(ML_SIN, scaled);
    ml_release(scaled);
    return a;
}

ml_tensor *ml_hyena_filter(ml_tensor *z, ml_tensor *W1, ml_tensor *b1, ml_tensor *W2, ml_tensor *b2, ml_tensor *W3,
                           ml_tensor *b3, ml_tensor *f, ml_tensor *W4, ml_tensor *decay) {
    ml_tensor *a1 = sin_layer(z, W1, b1, f);
    if (!a1) return NULL;
    ml_tensor *a2 = sin_layer(a1, W2, b2, f);
    ml_release(a1);
    if (!a2) return NULL;
    ml_tensor *a3 = sin_layer(a2, W3, b3, f);
    ml_release(a2);
    if (!a3) return NULL;
    ml_tensor *h = ml_linear(a3, W4, NULL);
    ml_release(a3);
    if (!h) return NULL;
    ml_tensor *k = ml_mul(h, decay);
    ml_release(h);
    return k;
}

ml_tensor *ml_hyena_decay(ml_tensor *t, ml_tensor *deltas, int L) {
    const char *fn = "hyena_decay";
    ml_tensor *ins[2] = {t, deltas};
    if (check_f32s(fn, 2, ins)) return NULL;
    if (L < 0 || ml_numel(t) < L)
        return ml_fail(ML_ERR_ARG, "%s: argument 3 (length) must be in [0, %lld], got %d", fn, (long long)ml_numel(t),
                       L),
               NULL;
    int64_t C = ml_numel(deltas);
    ml_tensor *out = ml_empty(ML_F32, 2, (int64_t[]){L, C});
    if (!out) return oom(fn);
    for (int64_t i = 0; i < L; i++)
        for (int64_t c = 0; c < C; c++)
            ml_f32(out)[i * C + c] = expf(-(float)ml_get_flat(t, i) * fabsf((float)ml_get_flat(deltas, c)));
    return out;
}
