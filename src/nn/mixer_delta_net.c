/* DeltaNet (docs/mixers.md, "DeltaNet": flash-linear-attention's DeltaNet layer with its defaults).
 *
 *   x (B, L, D) = LN1 output;  H = n_heads, d_k = d_v = D/H, K = conv_size (4, or d_conv)
 *   q = silu(SC_K(x·W_qᵀ)), k = silu(SC_K(x·W_kᵀ)), v = silu(SC_K(x·W_vᵀ))   (B, L, D)  no biases
 *   q̂, k̂ = per-head x/√(‖x‖² + 1e-6)
 *   β = σ(x·W_βᵀ)                                                         (B, L, H)
 *   per head, S_0 = 0 (d_k × d_v):  u_t = β_t (v_t − S_{t−1}ᵀk̂_t),  S_t = S_{t−1} + k̂_t u_tᵀ
 *   o_t = S_tᵀ(d_k^{−1/2} q̂_t)                                            (B, L, D)
 *   ô = per-head RMSNorm(o; o_norm.weight (d_v), eps 1e-5);  out = ô·W_oᵀ
 *
 * Sites: mixer.q, mixer.k, mixer.v (B, L, D) post conv and SiLU; mixer.beta (B, L, H);
 * mixer.state S_t (B, L, H, d_k, d_v); mixer.o (B, L, D) before the norm.
 * Replacing mixer.state patches the recurrence: in each row, every position p whose state
 * differs from the observed one restarts the rule there from the replaced S_p (S0 = S_p, β_p = 0,
 * so S_p is exactly the replacement and o_p is read from it).
 *
 * Recurrent form: three conv windows (3 × D × (K−1)) and S_t (H × d_k × d_v). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

enum { S_Q, S_K, S_V, S_BETA, S_STATE, S_O, N_SITES }; /* the mixer's sites, in declaration order */

typedef struct {
    int H, dk, K;
    int wq, wk, wv, wb, cq, ck, cv, onorm, wo;
    int site[N_SITES];          /* ids of the sites below */
} dn_state;

static ml_status dn_build(ml_model *m, int l, void **state) {
    dn_state *s = calloc(1, sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model, H = ml_mixer_opt(&m->cfg, "n_heads"), K = ml_mixer_opt(&m->cfg, "d_conv");
    if (K < 0) K = 4;
    if (K < 1) return ml_fail(ML_ERR_ARG, "model: option 'd_conv' must be >= 1 for delta_net, got %lld", (long long)K);
    s->H = (int)H, s->dk = (int)(D / H), s->K = (int)K;
    int64_t dk = s->dk;
    s->wq = ml_model_add_param(m, l, "q_proj.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->wk = ml_model_add_param(m, l, "k_proj.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->wv = ml_model_add_param(m, l, "v_proj.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->wb = ml_model_add_param(m, l, "b_proj.weight", 2, (int64_t[]){H, D}, ML_P_LINEAR_W, D);
    s->cq = ml_model_add_param(m, l, "q_conv1d.weight", 3, (int64_t[]){D, 1, K}, ML_P_CONV_W, K);
    s->ck = ml_model_add_param(m, l, "k_conv1d.weight", 3, (int64_t[]){D, 1, K}, ML_P_CONV_W, K);
    s->cv = ml_model_add_param(m, l, "v_conv1d.weight", 3, (int64_t[]){D, 1, K}, ML_P_CONV_W, K);
    s->onorm = ml_model_add_param(m, l, "o_norm.weight", 1, &dk, ML_P_ONES, 0);
    s->wo = ml_model_add_param(m, l, "o_proj.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    int64_t BLD[3] = {-1, -2, D};
    s->site[S_Q] = ml_model_add_site(m, l, "mixer.q", 3, BLD);
    s->site[S_K] = ml_model_add_site(m, l, "mixer.k", 3, BLD);
    s->site[S_V] = ml_model_add_site(m, l, "mixer.v", 3, BLD);
    s->site[S_BETA] = ml_model_add_site(m, l, "mixer.beta", 3, (int64_t[]){-1, -2, H});
    s->site[S_STATE] = ml_model_add_site(m, l, "mixer.state", 5, (int64_t[]){-1, -2, H, dk, dk});
    s->site[S_O] = ml_model_add_site(m, l, "mixer.o", 3, BLD);
    return ML_OK;
}

/* silu(SC_K(x·Wᵀ)) (B, L, D) */
static ml_tensor *proj_conv(ml_tensor *x, ml_tensor *w, ml_tensor *cw) {
    ml_tensor *p = ml_linear(x, w, NULL), *c = p ? ml_causal_conv1d(p, cw, NULL) : NULL;
    ml_tensor *a = c ? ml_unary(ML_SILU, c) : NULL;
    ml_release(p), ml_release(c);
    return a;
}

/* Per-head L2 normalisation of (B, L, H·d). */
static ml_tensor *l2_heads(ml_tensor *x, int H) {
    ml_tensor *x4 = ml_reshape(x, 4, (int64_t[]){x->shape[0], x->shape[1], H, x->shape[2] / H});
    ml_tensor *n = x4 ? ml_l2_normalize(x4, 1e-6) : NULL, *r = n ? ml_reshape(n, 3, x->shape) : NULL;
    ml_release(x4), ml_release(n);
    return r;
}

static ml_tensor *narrow2(ml_tensor *t, int64_t b, int64_t start, int64_t len) {
    ml_tensor *r = ml_narrow(t, 0, b, 1), *s = r ? ml_narrow(r, 1, start, len) : NULL;
    ml_release(r);
    return s;
}

/* o after a replaced state sequence `rep` (B, L, H, dk, dv) that differs from `orig` somewhere. */
static ml_tensor *patched_rule(ml_tensor *o, ml_tensor *rep, ml_tensor *orig, ml_tensor *q, ml_tensor *k,
                               ml_tensor *v, ml_tensor *beta, int H, double scale) {
    int64_t Bz = q->shape[0], L = q->shape[1], per = ml_numel(rep) / (Bz * L);
    ml_tensor *rc = ml_contiguous(rep), *out = NULL;
    ml_tensor **rows = calloc((size_t)Bz, sizeof *rows);
    int64_t b = 0;
    if (!rc || !rows) goto fail;
    for (; b < Bz; b++) {
        ml_tensor *acc = NULL;
        int64_t start = 0;
        for (int64_t p = 0; p <= L; p++) {
            bool cut = p == L || memcmp(ml_f32(rc) + (b * L + p) * per, ml_f32(orig) + (b * L + p) * per,
                                        sizeof(float) * (size_t)per) != 0;
            if (!cut || p == start) continue;
            ml_tensor *seg = NULL;
            if (start == 0) {
                seg = narrow2(o, b, 0, p);
            } else {
                ml_tensor *qs = narrow2(q, b, start, p - start), *ks = narrow2(k, b, start, p - start);
                ml_tensor *vs = narrow2(v, b, start, p - start), *bs = narrow2(beta, b, start, p - start);
                ml_tensor *mask = ml_full(ML_F32, 3, (int64_t[]){1, p - start, 1}, 1.0);
                if (mask) ml_f32(mask)[0] = 0; /* β_start = 0: S_start is the replacement itself */
                ml_tensor *bm = bs && mask ? ml_mul(bs, mask) : NULL, *s0v = narrow2(rep, b, start, 1);
                ml_tensor *s0 = s0v ? ml_reshape(s0v, 4, (int64_t[]){1, H, rep->shape[3], rep->shape[4]}) : NULL;
                if (qs && ks && vs && bm && s0) seg = ml_delta_rule(qs, ks, vs, bm, H, scale, s0, NULL, NULL);
                ml_release(qs), ml_release(ks), ml_release(vs), ml_release(bs), ml_release(mask), ml_release(bm);
                ml_release(s0v), ml_release(s0);
            }
            if (!seg) {
                ml_release(acc);
                goto fail;
            }
            if (acc) {
                ml_tensor *pair[2] = {acc, seg};
                ml_tensor *j = ml_cat(2, pair, 1);
                ml_release(acc), ml_release(seg);
                if (!(acc = j)) goto fail;
            } else {
                acc = seg;
            }
            start = p;
        }
        rows[b] = acc;
    }
    out = ml_cat((int)Bz, rows, 0);
fail:
    for (int64_t i = 0; rows && i < b; i++) ml_release(rows[i]);
    free(rows);
    ml_release(rc);
    return out;
}

static ml_tensor *dn_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    dn_state *s = state;
    int H = s->H;
    double scale = 1.0 / sqrt((double)s->dk);
    ml_tensor *q = NULL, *k = NULL, *v = NULL, *qn = NULL, *kn = NULL, *br = NULL, *beta = NULL, *o = NULL;
    ml_tensor *st = NULL, *o4 = NULL, *on = NULL, *on3 = NULL, *out = NULL;
    if (!(q = proj_conv(x, ml_model_p(m, s->wq), ml_model_p(m, s->cq))) || !ml_at_site(m, run, s->site[S_Q], &q)) goto done;
    if (!(k = proj_conv(x, ml_model_p(m, s->wk), ml_model_p(m, s->ck))) || !ml_at_site(m, run, s->site[S_K], &k)) goto done;
    if (!(v = proj_conv(x, ml_model_p(m, s->wv), ml_model_p(m, s->cv))) || !ml_at_site(m, run, s->site[S_V], &v)) goto done;
    if (!(qn = l2_heads(q, H)) || !(kn = l2_heads(k, H))) goto done;
    if (!(br = ml_linear(x, ml_model_p(m, s->wb), NULL)) || !(beta = ml_unary(ML_SIGMOID, br)) ||
        !ml_at_site(m, run, s->site[S_BETA], &beta))
        goto done;
    bool want_s = ml_site_wanted(m, run, s->site[S_STATE]);
    if (!(o = ml_delta_rule(qn, kn, v, beta, H, scale, NULL, want_s ? &st : NULL, NULL))) goto done;
    if (want_s) {
        ml_tensor *orig = ml_retain(st);
        bool ok = ml_at_site(m, run, s->site[S_STATE], &st);
        if (ok && st != orig) {
            ml_tensor *po = patched_rule(o, st, orig, qn, kn, v, beta, H, scale);
            ml_release(o);
            o = po;
            ok = o != NULL;
        }
        ml_release(orig);
        if (!ok) goto done;
    }
    if (!ml_at_site(m, run, s->site[S_O], &o)) goto done;
    if (!(o4 = ml_reshape(o, 4, (int64_t[]){o->shape[0], o->shape[1], H, s->dk}))) goto done;
    if (!(on = ml_rms_norm(o4, ml_model_p(m, s->onorm), 1e-5)) || !(on3 = ml_reshape(on, 3, o->shape))) goto done;
    out = ml_linear(on3, ml_model_p(m, s->wo), NULL);
done:
    ml_release(q), ml_release(k), ml_release(v), ml_release(qn), ml_release(kn), ml_release(br), ml_release(beta);
    ml_release(o), ml_release(st), ml_release(o4), ml_release(on), ml_release(on3);
    return out;
}

/* ---- recurrent form ---- */

typedef struct {
    int64_t B;
    float *win[3]; /* [B, D, K−1] each */
    float *S;      /* [B, H, dk, dv] */
} dn_rec;

static void dn_rec_free(void *rec) {
    dn_rec *r = rec;
    if (!r) return;
    for (int i = 0; i < 3; i++) free(r->win[i]);
    free(r->S), free(r);
}

static void *dn_rec_new(ml_model *m, int l, void *state, int64_t B) {
    dn_state *s = state;
    int64_t D = m->cfg.d_model;
    dn_rec *r = calloc(1, sizeof *r);
    bool ok = r != NULL;
    if (ok) {
        r->B = B;
        for (int i = 0; i < 3; i++) ok = ok && (r->win[i] = calloc((size_t)(B * D * (s->K - 1) + 1), sizeof(float)));
        ok = ok && (r->S = calloc((size_t)(B * D * s->dk), sizeof(float)));
    }
    if (!ok) {
        dn_rec_free(r);
        ml_fail(ML_ERR_MEM, "model: out of memory");
        return NULL;
    }
    return r;
}

static ml_tensor *dn_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x) {
    dn_state *s = state;
    dn_rec *r = rec;
    int64_t B = r->B, D = m->cfg.d_model;
    int wi[3] = {s->wq, s->wk, s->wv}, ci[3] = {s->cq, s->ck, s->cv};
    ml_tensor *pr[3] = {0}, *c[3] = {0}, *br = ml_linear(x, ml_model_p(m, s->wb), NULL), *o = NULL, *out = NULL;
    bool ok = br != NULL;
    for (int i = 0; ok && i < 3; i++) {
        ok = (pr[i] = ml_linear(x, ml_model_p(m, wi[i]), NULL)) && (c[i] = ml_empty(ML_F32, 2, (int64_t[]){B, D}));
        if (!ok) break;
        float *y = ml_f32(c[i]);
        mlk_conv1d_step((int)B, (int)D, s->K, r->win[i], ml_f32(pr[i]), ml_f32(ml_model_p(m, ci[i])), NULL, y);
        for (int64_t j = 0; j < B * D; j++) y[j] = y[j] / (1.0f + expf(-y[j])); /* silu */
    }
    if (ok && (o = ml_empty(ML_F32, 2, (int64_t[]){B, D}))) {
        int n = (int)(B * s->H);
        for (int i = 0; i < 2; i++) { /* q̂, k̂ (pr[i] is free now: reuse it as the output) */
            mlk_l2norm_fwd(n, s->dk, 1e-6f, ml_f32(c[i]), ml_f32(pr[i]));
            ml_tensor *t = c[i];
            c[i] = pr[i], pr[i] = t;
        }
        float *bt = ml_f32(br);
        for (int i = 0; i < n; i++) bt[i] = 1.0f / (1.0f + expf(-bt[i]));
        bool stepped = mlk_delta_step((int)B, s->H, s->dk, s->dk, (float)(1.0 / sqrt((double)s->dk)), r->S,
                                      ml_f32(c[0]), ml_f32(c[1]), ml_f32(c[2]), bt, ml_f32(o)) == 0;
        if (!stepped) ml_fail(ML_ERR_MEM, "out of memory"); /* the state is unchanged */
        ml_tensor *o3 = stepped ? ml_reshape(o, 3, (int64_t[]){B, s->H, s->dk}) : NULL;
        ml_tensor *on = o3 ? ml_rms_norm(o3, ml_model_p(m, s->onorm), 1e-5) : NULL;
        ml_tensor *on2 = on ? ml_reshape(on, 2, (int64_t[]){B, D}) : NULL;
        out = on2 ? ml_linear(on2, ml_model_p(m, s->wo), NULL) : NULL;
        ml_release(o3), ml_release(on), ml_release(on2);
    }
    for (int i = 0; i < 3; i++) ml_release(pr[i]), ml_release(c[i]);
    ml_release(br), ml_release(o);
    return out;
}

/* The q, k, v, beta and output projections. */
static double dn_flops(const ml_model *m, int l, double B, double L) {
    (void)l;
    double D = m->cfg.d_model, H = (double)ml_mixer_opt(&m->cfg, "n_heads");
    return 2 * B * L * D * (4 * D + H);
}

const ml_mixer_type ml_mixer_delta_net = {
    .name = "delta_net",
    .options = {ML_OPTION_INT("n_heads", 1, 1, 1024, "heads (paper: 1); must divide d_model"),
                ML_OPTION_INT("d_conv", -1, -1, 64, "short-conv width; -1: the architecture's default")},
    .flops = dn_flops,
    .build = dn_build,
    .forward = dn_forward,
    .free_state = free,
    .rec_new = dn_rec_new,
    .rec_step = dn_rec_step,
    .rec_free = dn_rec_free,
};
