/* Mamba (docs/mixers.md, "Mamba"; mamba_ssm 2.2.4) and its conv ablations; a MambaBlock mixer.
 *
 *   x (B, L, D) = RMSNorm output;  E = expand·D, N = d_state, R = ceil(D/16), K = conv width
 *   [xi | z] = x·W_inᵀ                           (B, L, 2E)    in_proj, no bias
 *   xc = SC_K(xi; conv1d.weight (E, 1, K), conv1d.bias (E))   (B, L, E)   (xc = xi without conv)
 *   u  = silu(xc)                                (B, L, E)
 *   [δ | Bs | Cs] = u·W_xᵀ                       (B, L, R + 2N) x_proj, no bias
 *   Δ  = softplus(δ·W_dtᵀ + b_dt)                (B, L, E)     dt_proj
 *   h_t = exp(Δ_t A) ⊙ h_{t−1} + Δ_t Bs_t u_t,  A = −exp(A_log) (E, N);  h_t (E, N)
 *   ys_t = h_t Cs_t + Dskip ⊙ u_t                 (B, L, E)
 *   out = (ys ⊙ silu(z))·W_outᵀ                  (B, L, D)     out_proj, no bias
 *
 * Variants: d_conv K ∈ 1..4 (K = 1 is the nn.Conv1d path of mamba_no_causal_conv1d, the
 * same maths); mamba_without_conv / d_conv 0: u = silu(xi), the width-4 conv parameters exist
 * (and count) but are unused and get no gradient.
 * Init: the Mamba regime of docs/mixers.md, "Initialisation" (model.c) plus dt_proj.bias = softplus⁻¹(dt₀), dt₀ log-uniform
 * in [1e-3, 1e-1] floored at 1e-4 (kept: "_no_reinit"), A_log = log(1..N), D = 1.
 *
 * Sites: mixer.x, mixer.z (B, L, E) in_proj halves; mixer.conv (B, L, E) the conv output xc;
 * mixer.u (B, L, E); mixer.dt (B, L, E); mixer.B, mixer.C (B, L, N); mixer.ssm_state (B, L, E, N)
 * every h_t; mixer.y (B, L, E) ys; mixer.gate (B, L, E) silu(z); mixer.yg (B, L, E).
 * Replacing ssm_state patches the recurrence: for each row, every position p whose state differs
 * from the observed one restarts the scan there from the replaced h_p (mixer_ops.h's recipe: h0 =
 * h_p, Δ_p = 0), so later states follow the patched one.
 *
 * Recurrent form (mamba's step): the last K−1 conv inputs (E, K−1) and h_t (E, N). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/ops.h"

enum { S_X, S_Z, S_CONV, S_U, S_DT, S_B, S_C, S_SSM_STATE, S_Y, S_GATE, S_YG, N_SITES }; /* the mixer's sites, in declaration order */

typedef struct {
    int E, N, R, K;
    bool conv;                  /* false: mamba_without_conv */
    int w_in, cw, cb, w_x, w_dt, b_dt, a_log, dskip, w_out;
    int site[N_SITES];          /* ids of the sites below */
} mamba_state;

/* The conv width: d_conv overrides the default 4; mamba_without_conv (no_conv) gets no d_conv and
 * builds the default width-4 conv it never uses (*used false); d_conv 0 means the same variant. */
static int conv_width(const ml_model_config *cfg, bool *used) {
    int64_t d_conv = ml_mixer_opt(cfg, "d_conv");
    bool no = ml_mixer_opt(cfg, "no_conv") || d_conv == 0;
    *used = !no;
    return no || d_conv < 0 ? 4 : (int)d_conv;
}

static ml_status mamba_build(ml_model *m, int l, void **state) {
    mamba_state *s = calloc(1, sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model, E = ml_mixer_opt(&m->cfg, "expand") * D, N = ml_mixer_opt(&m->cfg, "d_state"),
            R = (D + 15) / 16;
    s->E = (int)E, s->N = (int)N, s->R = (int)R;
    s->K = conv_width(&m->cfg, &s->conv);
    int64_t K = s->K;
    s->w_in = ml_model_add_param(m, l, "in_proj.weight", 2, (int64_t[]){2 * E, D}, ML_P_LINEAR_W, D);
    s->cw = ml_model_add_param(m, l, "conv1d.weight", 3, (int64_t[]){E, 1, K}, ML_P_CONV_W, K);
    s->cb = ml_model_add_param(m, l, "conv1d.bias", 1, &E, ML_P_CONV_B, K);
    s->w_x = ml_model_add_param(m, l, "x_proj.weight", 2, (int64_t[]){R + 2 * N, E}, ML_P_LINEAR_W, E);
    s->w_dt = ml_model_add_param(m, l, "dt_proj.weight", 2, (int64_t[]){E, R}, ML_P_LINEAR_W, R);
    s->b_dt = ml_model_add_param(m, l, "dt_proj.bias", 1, &E, ML_P_CUSTOM, R);
    s->a_log = ml_model_add_param(m, l, "A_log", 2, (int64_t[]){E, N}, ML_P_CUSTOM, 0);
    s->dskip = ml_model_add_param(m, l, "D", 1, &E, ML_P_ONES, 0);
    s->w_out = ml_model_add_param(m, l, "out_proj.weight", 2, (int64_t[]){D, E}, ML_P_LINEAR_W, E);
    if (s->b_dt >= 0) m->params[s->b_dt].keep_bias = true;
    int64_t BLE[3] = {-1, -2, E}, BLN[3] = {-1, -2, N};
    s->site[S_X] = ml_model_add_site(m, l, "mixer.x", 3, BLE);
    s->site[S_Z] = ml_model_add_site(m, l, "mixer.z", 3, BLE);
    s->site[S_CONV] = ml_model_add_site(m, l, "mixer.conv", 3, BLE);
    s->site[S_U] = ml_model_add_site(m, l, "mixer.u", 3, BLE);
    s->site[S_DT] = ml_model_add_site(m, l, "mixer.dt", 3, BLE);
    s->site[S_B] = ml_model_add_site(m, l, "mixer.B", 3, BLN);
    s->site[S_C] = ml_model_add_site(m, l, "mixer.C", 3, BLN);
    s->site[S_SSM_STATE] = ml_model_add_site(m, l, "mixer.ssm_state", 4, (int64_t[]){-1, -2, E, N});
    s->site[S_Y] = ml_model_add_site(m, l, "mixer.y", 3, BLE);
    s->site[S_GATE] = ml_model_add_site(m, l, "mixer.gate", 3, BLE);
    s->site[S_YG] = ml_model_add_site(m, l, "mixer.yg", 3, BLE);
    return ML_OK;
}

static void mamba_init(ml_model *m, int l, void *state, ml_rng *rng) {
    mamba_state *s = state;
    float *b = ml_f32(ml_model_p(m, s->b_dt)), *a = ml_f32(ml_model_p(m, s->a_log));
    const double lo = log(1e-3), hi = log(1e-1);
    for (int e = 0; e < s->E; e++) {
        double dt = exp(ml_rng_double(rng) * (hi - lo) + lo);
        if (dt < 1e-4) dt = 1e-4;
        b[e] = (float)(dt + log(-expm1(-dt))); /* softplus⁻¹ */
        for (int n = 0; n < s->N; n++) a[e * s->N + n] = (float)log((double)(n + 1));
    }
}

static ml_tensor *swap(ml_tensor *old, ml_tensor *nw) {
    ml_release(old);
    return nw;
}

/* y after a replaced state sequence `rep` (B, L, E, N) that differs from `orig` at some (b, t). */
static ml_tensor *patched_scan(ml_tensor *y, ml_tensor *rep, ml_tensor *orig, ml_tensor *u, ml_tensor *dt,
                               ml_tensor *A, ml_tensor *Bm, ml_tensor *Cm, ml_tensor *Dk) {
    int64_t Bz = u->shape[0], L = u->shape[1], EN = rep->shape[2] * rep->shape[3];
    ml_tensor *rc = ml_contiguous(rep), *rows[64], **rowv = Bz <= 64 ? rows : malloc(sizeof *rowv * (size_t)Bz);
    ml_tensor *out = NULL;
    int64_t done = 0;
    if (!rc || !rowv) goto fail;
    for (; done < Bz; done++) {
        int64_t b = done;
        ml_tensor *pieces[2] = {NULL, NULL}, *acc = NULL;
        int64_t start = 0;
        bool ok = true;
        for (int64_t p = 0; ok && p <= L; p++) {
            bool cut = p == L || memcmp(ml_f32(rc) + (b * L + p) * EN, ml_f32(orig) + (b * L + p) * EN,
                                        sizeof(float) * (size_t)EN) != 0;
            if (!cut || p == start) continue;
            /* segment [start, p): the original y when start = 0, else a scan from the patched h_start */
            ml_tensor *seg;
            if (start == 0) {
                ml_tensor *yb = ml_narrow(y, 0, b, 1);
                seg = yb ? ml_narrow(yb, 1, 0, p) : NULL;
                ml_release(yb);
            } else {
                ml_tensor *sl[4] = {u, dt, Bm, Cm}, *nb[4] = {0};
                for (int i = 0; i < 4; i++) {
                    ml_tensor *r1 = ml_narrow(sl[i], 0, b, 1);
                    nb[i] = r1 ? ml_narrow(r1, 1, start, p - start) : NULL;
                    ml_release(r1);
                }
                ml_tensor *mask = ml_full(ML_F32, 3, (int64_t[]){1, p - start, 1}, 1.0);
                if (mask) ml_f32(mask)[0] = 0; /* Δ_start = 0: the state after step start is h0 */
                ml_tensor *dm = nb[1] && mask ? ml_mul(nb[1], mask) : NULL;
                ml_tensor *r1 = ml_narrow(rep, 0, b, 1), *h0v = r1 ? ml_narrow(r1, 1, start, 1) : NULL;
                ml_tensor *h0 = h0v ? ml_reshape(h0v, 3, (int64_t[]){1, rep->shape[2], rep->shape[3]}) : NULL;
                seg = nb[0] && dm && nb[2] && nb[3] && h0
                          ? ml_selective_scan(nb[0], dm, A, nb[2], nb[3], Dk, h0, NULL, NULL)
                          : NULL;
                for (int i = 0; i < 4; i++) ml_release(nb[i]);
                ml_release(mask), ml_release(dm), ml_release(r1), ml_release(h0v), ml_release(h0);
            }
            if (!seg) ok = false;
            else if (!acc) acc = seg;
            else {
                pieces[0] = acc, pieces[1] = seg;
                acc = ml_cat(2, pieces, 1);
                ml_release(pieces[0]), ml_release(pieces[1]);
                ok = acc != NULL;
            }
            start = p;
        }
        if (!ok) {
            ml_release(acc);
            goto fail;
        }
        rowv[b] = acc;
    }
    out = ml_cat((int)Bz, rowv, 0);
fail:
    for (int64_t i = 0; i < done; i++) ml_release(rowv[i]);
    if (rowv && rowv != rows) free(rowv);
    ml_release(rc);
    return out;
}

/* x·W[start:start+len]ᵀ: one row block of a projection. Separate products (rather than one
 * product and narrow views of it) give contiguous activations and a cheaper backward. */
static ml_tensor *linear_rows(ml_tensor *x, ml_tensor *w, int64_t start, int64_t len, ml_tensor *bias) {
    ml_tensor *wr = ml_narrow(w, 0, start, len), *y = wr ? ml_linear(x, wr, bias) : NULL;
    ml_release(wr);
    return y;
}

/* ---- forward from row t (ml_run.suffix): the rows t.. of every position-wise step; the conv
 * reads the K − 1 inputs before t and the scan starts from h_{t−1}, both from the reference cache
 * (the same operations as the whole forward's on those rows, so the same bits) ---- */

static void mamba_suffix_needs(const ml_model *m, int l, const void *state, bool *want) {
    (void)m, (void)l;
    const mamba_state *s = state;
    want[s->site[S_X]] = want[s->site[S_SSM_STATE]] = true;
}

/* Rows [t − w, t) of pre (B0, L0, W...) of sequences docs, then y (Bg, Ls, W...): (Bg, w + Ls, W...);
 * w = 0 with y NULL and rows = 1 gives the one row t − 1 (the state h_{t−1}) as (Bg, W...). */
static ml_tensor *with_prefix(const ml_tensor *pre, const int32_t *docs, int64_t t, int64_t w, ml_tensor *y,
                              int64_t Bg) {
    int64_t L0 = pre->shape[1], W = ml_numel(pre) / (pre->shape[0] * L0), Ls = y ? y->shape[1] : 0;
    int64_t shp[4] = {Bg, w + Ls, W};
    ml_tensor *o = y ? ml_empty(ML_F32, 3, shp) : ml_empty(ML_F32, 3, (int64_t[]){Bg, pre->shape[2], pre->shape[3]});
    if (!o) return NULL;
    for (int64_t b = 0; b < Bg; b++) {
        float *d = ml_f32(o) + b * (w + Ls) * W;
        if (!y) {
            memcpy(ml_f32(o) + b * W, ml_f32(pre) + ((int64_t)docs[b] * L0 + t - 1) * W, sizeof(float) * (size_t)W);
            continue;
        }
        memcpy(d, ml_f32(pre) + ((int64_t)docs[b] * L0 + t - w) * W, sizeof(float) * (size_t)(w * W));
        memcpy(d + w * W, ml_f32(y) + b * Ls * W, sizeof(float) * (size_t)(Ls * W));
    }
    return o;
}

/* Rows rows[b] of x (B, L, W): (B, 1, W). */
static ml_tensor *pick_rows(ml_tensor *x, const int32_t *rows) {
    ml_tensor *xc = ml_contiguous(x);
    if (!xc) return NULL;
    int64_t B = xc->shape[0], L = xc->shape[1], W = xc->shape[2];
    ml_tensor *o = ml_empty(ML_F32, 3, (int64_t[]){B, 1, W});
    for (int64_t b = 0; o && b < B; b++)
        memcpy(ml_f32(o) + b * W, ml_f32(xc) + (b * L + rows[b]) * W, sizeof(float) * (size_t)W);
    ml_release(xc);
    return o;
}

static ml_tensor *mamba_suffix(ml_model *m, int l, const mamba_state *s, ml_tensor *x, const ml_suffix *sx) {
    int64_t E = s->E, N = s->N, R = s->R, Bg = x->shape[0], Ls = x->shape[1], t = sx->t;
    /* the last layer with readout rows: the gate and the output of those rows only */
    const int32_t *rows = l == m->cfg.n_layers - 1 ? sx->rows : NULL;
    ml_tensor *px = t > 0 ? sx->pre[s->site[S_X]] : NULL, *ph = t > 0 ? sx->pre[s->site[S_SSM_STATE]] : NULL;
    if (t > 0 && (!px || !ph || !ml_is_contiguous(px) || !ml_is_contiguous(ph) || px->ndim != 3 || ph->ndim != 4 ||
                  px->shape[1] < t || ph->shape[1] < t)) {
        ml_fail(ML_ERR_ARG, "mamba: a forward from row t needs the cached mixer.x and mixer.ssm_state");
        return NULL;
    }
    for (int64_t b = 0; px && b < Bg; b++)
        if (sx->docs[b] < 0 || sx->docs[b] >= px->shape[0] || sx->docs[b] >= ph->shape[0]) {
            ml_fail(ML_ERR_ARG, "mamba: a forward from row t names sequence %d of a cache of %lld", sx->docs[b],
                    (long long)px->shape[0]);
            return NULL;
        }
    ml_tensor *w_in = ml_model_p(m, s->w_in);
    ml_tensor *xi = NULL, *z = NULL, *xe = NULL, *xce = NULL, *xcn = NULL, *xc = NULL, *u = NULL, *xd = NULL;
    ml_tensor *delta = NULL, *dr = NULL, *dt = NULL, *Bm = NULL, *Cm = NULL, *A = NULL, *h0 = NULL, *y = NULL;
    ml_tensor *g = NULL, *yg = NULL, *out = NULL, *xr = rows ? pick_rows(x, rows) : ml_retain(x);
    if (!xr || !(xi = linear_rows(x, w_in, 0, E, NULL)) || !(z = linear_rows(xr, w_in, E, E, NULL))) goto done;
    if (s->conv && t == 0) xc = ml_causal_conv1d(xi, ml_model_p(m, s->cw), ml_model_p(m, s->cb));
    else if (s->conv) {
        int64_t w = t < s->K - 1 ? t : s->K - 1; /* the window before t (zeros before row 0, as the whole run) */
        if (!(xe = with_prefix(px, sx->docs, t, w, xi, Bg)) ||
            !(xce = ml_causal_conv1d(xe, ml_model_p(m, s->cw), ml_model_p(m, s->cb))) ||
            !(xcn = ml_narrow(xce, 1, w, Ls)) || !(xc = ml_contiguous(xcn)))
            goto done;
    } else xc = ml_retain(xi);
    if (!xc || !(u = ml_unary(ML_SILU, xc)) || !(xd = ml_linear(u, ml_model_p(m, s->w_x), NULL)) ||
        !(delta = ml_narrow(xd, 2, 0, R)))
        goto done;
    if (!(dr = ml_linear(delta, ml_model_p(m, s->w_dt), ml_model_p(m, s->b_dt))) || !(dt = ml_unary(ML_SOFTPLUS, dr)))
        goto done;
    if (!(Bm = ml_narrow(xd, 2, R, N)) || !(Cm = ml_narrow(xd, 2, R + N, N))) goto done;
    ml_tensor *ea = ml_unary(ML_EXP, ml_model_p(m, s->a_log));
    A = ea ? ml_unary(ML_NEG, ea) : NULL;
    ml_release(ea);
    if (!A || (t > 0 && !(h0 = with_prefix(ph, sx->docs, t, 0, NULL, Bg)))) goto done;
    if (!(y = ml_selective_scan(u, dt, A, Bm, Cm, ml_model_p(m, s->dskip), h0, NULL, NULL))) goto done;
    if (rows && !(y = swap(y, pick_rows(y, rows)))) goto done;
    if ((g = ml_unary(ML_SILU, z)) && (yg = ml_mul(y, g))) out = ml_linear(yg, ml_model_p(m, s->w_out), NULL);
done:
    ml_release(xi), ml_release(z), ml_release(xe), ml_release(xce), ml_release(xcn), ml_release(xc), ml_release(u);
    ml_release(xd), ml_release(delta), ml_release(dr), ml_release(dt), ml_release(Bm), ml_release(Cm), ml_release(A);
    ml_release(h0), ml_release(y), ml_release(g), ml_release(yg), ml_release(xr);
    return out;
}

static ml_tensor *mamba_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    mamba_state *s = state;
    const ml_suffix *sx = run ? run->suffix : NULL;
    if (sx && (sx->t > 0 || (sx->rows && l == m->cfg.n_layers - 1))) return mamba_suffix(m, l, s, x, sx);
    int64_t E = s->E, N = s->N, R = s->R;
    ml_tensor *w_in = ml_model_p(m, s->w_in), *w_x = ml_model_p(m, s->w_x);
    ml_tensor *xi = NULL, *z = NULL, *xc = NULL, *u = NULL, *xd = NULL, *delta = NULL, *dr = NULL, *dt = NULL;
    ml_tensor *Bm = NULL, *Cm = NULL, *A = NULL, *y = NULL, *hs = NULL, *g = NULL, *yg = NULL, *out = NULL;
    if (!(xi = linear_rows(x, w_in, 0, E, NULL)) || !ml_at_site(m, run, s->site[S_X], &xi)) goto done;
    if (!(z = linear_rows(x, w_in, E, E, NULL)) || !ml_at_site(m, run, s->site[S_Z], &z)) goto done;
    xc = s->conv ? ml_causal_conv1d(xi, ml_model_p(m, s->cw), ml_model_p(m, s->cb)) : ml_retain(xi);
    if (!xc || !ml_at_site(m, run, s->site[S_CONV], &xc)) goto done;
    if (!(u = ml_unary(ML_SILU, xc)) || !ml_at_site(m, run, s->site[S_U], &u)) goto done;
    /* x_proj's output is narrow (R + 2N): one product and views of it (u's gradient then
     * gathers one contribution instead of three) */
    if (!(xd = ml_linear(u, w_x, NULL)) || !(delta = ml_narrow(xd, 2, 0, R))) goto done;
    dr = ml_linear(delta, ml_model_p(m, s->w_dt), ml_model_p(m, s->b_dt));
    if (!dr || !(dt = ml_unary(ML_SOFTPLUS, dr)) || !ml_at_site(m, run, s->site[S_DT], &dt)) goto done;
    if (!(Bm = ml_narrow(xd, 2, R, N)) || !ml_at_site(m, run, s->site[S_B], &Bm)) goto done;
    if (!(Cm = ml_narrow(xd, 2, R + N, N)) || !ml_at_site(m, run, s->site[S_C], &Cm)) goto done;
    ml_tensor *ea = ml_unary(ML_EXP, ml_model_p(m, s->a_log));
    A = ea ? ml_unary(ML_NEG, ea) : NULL;
    ml_release(ea);
    if (!A) goto done;
    bool want_h = ml_site_wanted(m, run, s->site[S_SSM_STATE]);
    y = ml_selective_scan(u, dt, A, Bm, Cm, ml_model_p(m, s->dskip), NULL, want_h ? &hs : NULL, NULL);
    if (!y) goto done;
    if (want_h) {
        ml_tensor *orig = ml_retain(hs);
        bool ok = ml_at_site(m, run, s->site[S_SSM_STATE], &hs);
        if (ok && hs != orig) {
            y = swap(y, patched_scan(y, hs, orig, u, dt, A, Bm, Cm, ml_model_p(m, s->dskip)));
            ok = y != NULL;
        }
        ml_release(orig);
        if (!ok) goto done;
    }
    if (!ml_at_site(m, run, s->site[S_Y], &y)) goto done;
    if (!(g = ml_unary(ML_SILU, z)) || !ml_at_site(m, run, s->site[S_GATE], &g)) goto done;
    if (!(yg = ml_mul(y, g)) || !ml_at_site(m, run, s->site[S_YG], &yg)) goto done;
    out = ml_linear(yg, ml_model_p(m, s->w_out), NULL);
done:
    ml_release(xi), ml_release(z), ml_release(xc), ml_release(u), ml_release(xd), ml_release(delta), ml_release(dr);
    ml_release(dt), ml_release(Bm), ml_release(Cm), ml_release(A), ml_release(y), ml_release(hs), ml_release(g);
    ml_release(yg);
    return out;
}

/* ---- recurrent form ---- */

typedef struct {
    int64_t B;
    float *win, *h, *A; /* [B, E, K−1], [B, E, N], [E, N] */
} mamba_rec;

static void mamba_rec_free(void *rec) {
    mamba_rec *r = rec;
    if (r) free(r->win), free(r->h), free(r->A);
    free(r);
}

static void *mamba_rec_new(ml_model *m, int l, void *state, int64_t B) {
    mamba_state *s = state;
    mamba_rec *r = calloc(1, sizeof *r);
    if (r) {
        r->B = B;
        r->win = calloc((size_t)(B * s->E * (s->K - 1) + 1), sizeof(float));
        r->h = calloc((size_t)(B * s->E * s->N), sizeof(float));
        r->A = malloc(sizeof(float) * (size_t)(s->E * s->N));
    }
    if (!r || !r->win || !r->h || !r->A) {
        mamba_rec_free(r);
        ml_fail(ML_ERR_MEM, "model: out of memory");
        return NULL;
    }
    const float *al = ml_f32(ml_model_p(m, s->a_log));
    for (int64_t i = 0; i < (int64_t)s->E * s->N; i++) r->A[i] = -expf(al[i]);
    return r;
}

static ml_tensor *mamba_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x) {
    mamba_state *s = state;
    mamba_rec *r = rec;
    int64_t B = r->B, E = s->E, N = s->N, R = s->R;
    ml_tensor *xz = ml_linear(x, ml_model_p(m, s->w_in), NULL); /* (B, 2E) */
    ml_tensor *u = ml_empty(ML_F32, 2, (int64_t[]){B, E}), *xd = NULL, *dr = NULL, *y = NULL, *out = NULL;
    ml_tensor *dl = NULL;
    if (!xz || !u) goto done;
    float *pu = ml_f32(u);
    for (int64_t b = 0; b < B; b++) memcpy(pu + b * E, ml_f32(xz) + b * 2 * E, sizeof(float) * (size_t)E);
    if (s->conv) {
        float *xi = malloc(sizeof(float) * (size_t)(B * E));
        if (!xi) goto done;
        memcpy(xi, pu, sizeof(float) * (size_t)(B * E));
        mlk_conv1d_step((int)B, (int)E, s->K, r->win, xi, ml_f32(ml_model_p(m, s->cw)), ml_f32(ml_model_p(m, s->cb)),
                        pu);
        free(xi);
    }
    for (int64_t i = 0; i < B * E; i++) pu[i] = pu[i] / (1.0f + expf(-pu[i])); /* silu */
    if (!(xd = ml_linear(u, ml_model_p(m, s->w_x), NULL))) goto done;       /* (B, R + 2N) */
    if (!(dl = ml_narrow(xd, 1, 0, R))) goto done;
    if (!(dr = ml_linear(dl, ml_model_p(m, s->w_dt), ml_model_p(m, s->b_dt)))) goto done;
    if (!(dr = swap(dr, ml_unary(ML_SOFTPLUS, dr)))) goto done;
    float *Bc = malloc(sizeof(float) * (size_t)(2 * B * N));
    if (!Bc || !(y = ml_empty(ML_F32, 2, (int64_t[]){B, E}))) {
        free(Bc);
        goto done;
    }
    for (int64_t b = 0; b < B; b++) {
        memcpy(Bc + b * N, ml_f32(xd) + b * (R + 2 * N) + R, sizeof(float) * (size_t)N);
        memcpy(Bc + (B + b) * N, ml_f32(xd) + b * (R + 2 * N) + R + N, sizeof(float) * (size_t)N);
    }
    mlk_sscan_step((int)B, (int)E, (int)N, r->h, pu, ml_f32(dr), r->A, Bc, Bc + B * N,
                   ml_f32(ml_model_p(m, s->dskip)), ml_f32(y));
    free(Bc);
    float *py = ml_f32(y);
    for (int64_t b = 0; b < B; b++)
        for (int64_t e = 0; e < E; e++) {
            float zz = ml_f32(xz)[b * 2 * E + E + e];
            py[b * E + e] *= zz / (1.0f + expf(-zz));
        }
    out = ml_linear(y, ml_model_p(m, s->w_out), NULL);
done:
    ml_release(xz), ml_release(u), ml_release(xd), ml_release(dl), ml_release(dr), ml_release(y);
    return out;
}

/* in_proj, x_proj, dt_proj and out_proj. */
static double mamba_flops(const ml_model *m, int l, double B, double L) {
    (void)l;
    double D = m->cfg.d_model, E = (double)ml_mixer_opt(&m->cfg, "expand") * D,
           N = (double)ml_mixer_opt(&m->cfg, "d_state"), R = ceil(D / 16);
    return 2 * B * L * (D * 2 * E + E * (R + 2 * N) + R * E + E * D);
}

static void without_conv(ml_model_config *cfg) { ml_mixer_opt_set(cfg, "no_conv", true); }
/* the nn.Conv1d path of width 1 unless d_conv says otherwise (the same maths as the causal one) */
static void no_causal_conv1d(ml_model_config *cfg) {
    if (ml_mixer_opt(cfg, "d_conv") < 0) ml_mixer_opt_set(cfg, "d_conv", 1);
}

const ml_mixer_type ml_mixer_mamba = {
    .name = "mamba",
    .options = {ML_OPTION_INT("d_conv", -1, -1, 64, "short-conv width; -1: the architecture's default"),
                ML_OPTION_INT("d_state", 16, 1, 4096, "SSM state size N"),
                ML_OPTION_INT("expand", 2, 1, 16, "inner width E = expand·D"),
                /* set by the alias mamba_without_conv only: not a key of mech.model */
                {.name = "no_conv", .type = ML_OPT_BOOL, .hi = 1, .doc = "no short conv: u = silu(xi)"}},
    .aliases = {{"mamba_without_conv", without_conv}, {"mamba_no_causal_conv1d", no_causal_conv1d}},
    .flops = mamba_flops,
    .build = mamba_build,
    .init = mamba_init,
    .forward = mamba_forward,
    .suffix_needs = mamba_suffix_needs,
    .free_state = free,
    .rec_new = mamba_rec_new,
    .rec_step = mamba_rec_step,
    .rec_free = mamba_rec_free,
    .mamba_block = true,
};
