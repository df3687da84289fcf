/* Based linear attention with the Taylor feature map (docs/mixers.md, "Based"); arch "based" is
 * Hybrid(BaseConv, Based): even layers are BaseConv (mixer_base_conv.c), odd layers this mixer.
 *
 *   x (B, L, D) = LN1 output;  F = feature_dim (8), H = n_heads, P = 1 + F + F² (73), Dv = D/H
 *   q = x·W_qᵀ, k = x·W_kᵀ  (B, L, H·F);   v = x·W_vᵀ  (B, L, D)        (no biases)
 *   φ(x) = [1, x/F^{1/4}, vec(x xᵀ)/(√2·√F)]  ⇒  φ(q)·φ(k) = 1 + s + s²/2, s = q·k/√F
 *   A[t,s] = φ(q_t)·φ(k_s) for s ≤ t, 0 above ("quadratic" view)
 *   y_t = Σ_{s≤t} A[t,s] v_s / (Σ_{s≤t} A[t,s] + 1e-12)                 (B, L, D)
 *   out = y·W_oᵀ                                                        (B, L, D)
 *
 * Sites: mixer.q, mixer.k (B, L, H·F); mixer.v (B, L, D); mixer.feat_q, mixer.feat_k (B, L, H, P);
 * mixer.kv_state S_t = Σ_{s≤t} φ(k_s) v_sᵀ (B, L, H, P, Dv); mixer.pattern A[t,:]/den_t (B, H, L, L);
 * mixer.y (B, L, D). Per head, in TransformerLens's shapes (attn.hook_q/k/v/z): mixer.head_q,
 * mixer.head_k (B, L, H, F), mixer.head_v, mixer.head_z (y) (B, L, H, Dv), reshapes of the flat
 * ones hooked after them.
 * The fast path is the fused op (closed-form kernel). Features, states and the pattern are
 * computed only for a run that wants them, and observing them changes no bit. Replacing one
 * switches to an explicit form built from generic ops (differentiable): a replaced pattern P
 * gives y = P·v; replaced features give A = φ(q)·φ(k)ᵀ masked; a replaced state S_p restarts the
 * recurrence from it (later states carry the change forward; the normaliser z_t is unchanged).
 *
 * Recurrent form (exact): S_t = S_{t−1} + φ(k_t)v_tᵀ (H, P, Dv), z_t = z_{t−1} + φ(k_t) (H, P),
 * y_t = φ(q_t)ᵀS_t / (φ(q_t)·z_t + eps). */
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/ops.h"

static const double BASED_EPS = 1e-12;

enum { S_Q, S_K, S_V, S_FEAT_Q, S_FEAT_K, S_KV_STATE, S_PATTERN, S_Y, S_HQ, S_HK, S_HV, S_HZ, N_SITES }; /* declaration order */

typedef struct {
    int wq, wk, wv, wo;
    int H, F, P, Dv;
    int site[N_SITES];          /* ids of the sites below */
} based_state;

static ml_status based_build(ml_model *m, int l, void **state) {
    based_state *s = calloc(1, sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model, H = ml_mixer_opt(&m->cfg, "n_heads"), F = ml_mixer_opt(&m->cfg, "feature_dim");
    if (F > MLK_BASED_MAXF)
        return ml_fail(ML_ERR_ARG, "model: option 'feature_dim' must be at most %d for Based, got %lld", MLK_BASED_MAXF,
                       (long long)F);
    s->H = (int)H, s->F = (int)F, s->P = mlk_taylor_dim((int)F), s->Dv = (int)(D / H);
    s->wq = ml_model_add_param(m, l, "proj_q.weight", 2, (int64_t[]){F * H, D}, ML_P_LINEAR_W, D);
    s->wk = ml_model_add_param(m, l, "proj_k.weight", 2, (int64_t[]){F * H, D}, ML_P_LINEAR_W, D);
    s->wv = ml_model_add_param(m, l, "proj_v.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->wo = ml_model_add_param(m, l, "proj_o.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    int64_t BLF[3] = {-1, -2, F * H}, BLD[3] = {-1, -2, D}, BLHP[4] = {-1, -2, H, s->P};
    s->site[S_Q] = ml_model_add_site(m, l, "mixer.q", 3, BLF);
    s->site[S_K] = ml_model_add_site(m, l, "mixer.k", 3, BLF);
    s->site[S_V] = ml_model_add_site(m, l, "mixer.v", 3, BLD);
    s->site[S_FEAT_Q] = ml_model_add_site(m, l, "mixer.feat_q", 4, BLHP);
    s->site[S_FEAT_K] = ml_model_add_site(m, l, "mixer.feat_k", 4, BLHP);
    s->site[S_KV_STATE] = ml_model_add_site(m, l, "mixer.kv_state", 5, (int64_t[]){-1, -2, H, s->P, s->Dv});
    s->site[S_PATTERN] = ml_model_add_site(m, l, "mixer.pattern", 4, (int64_t[]){-1, H, -2, -2});
    s->site[S_Y] = ml_model_add_site(m, l, "mixer.y", 3, BLD);
    int64_t BLHF[4] = {-1, -2, H, F}, BLHd[4] = {-1, -2, H, s->Dv};
    s->site[S_HQ] = ml_model_add_site(m, l, "mixer.head_q", 4, BLHF);
    s->site[S_HK] = ml_model_add_site(m, l, "mixer.head_k", 4, BLHF);
    s->site[S_HV] = ml_model_add_site(m, l, "mixer.head_v", 4, BLHd);
    s->site[S_HZ] = ml_model_add_site(m, l, "mixer.head_z", 4, BLHd);
    return ML_OK;
}

/* φ(x) per head: x (B, L, H·F) -> (B, L, H, P). */
static ml_tensor *features(ml_tensor *x, int H, int F) {
    ml_tensor *x4 = ml_reshape(x, 4, (int64_t[]){x->shape[0], x->shape[1], H, F});
    ml_tensor *f = x4 ? ml_taylor_features(x4) : NULL;
    ml_release(x4);
    return f;
}

/* The KV states S_t (B, L, H, P, Dv) from features φ(k) (B, L, H, P) and v (B, L, H·Dv), no graph. */
static ml_tensor *kv_states(ml_tensor *fk, ml_tensor *v, int H, int P, int Dv) {
    int64_t B = fk->shape[0], L = fk->shape[1];
    ml_tensor *fc = ml_contiguous(fk), *vc = ml_contiguous(v);
    ml_tensor *S = fc && vc ? ml_empty(ML_F32, 5, (int64_t[]){B, L, H, P, Dv}) : NULL;
    if (S) {
        const float *f = ml_f32(fc), *vv = ml_f32(vc);
        float *o = ml_f32(S);
        int64_t per = (int64_t)H * P * Dv;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < L; t++) {
                float *st = o + (b * L + t) * per;
                if (t) memcpy(st, st - per, sizeof(float) * (size_t)per);
                else memset(st, 0, sizeof(float) * (size_t)per);
                for (int h = 0; h < H; h++)
                    for (int p = 0; p < P; p++) {
                        float a = f[((b * L + t) * H + h) * P + p];
                        const float *vt = vv + (b * L + t) * H * Dv + (int64_t)h * Dv;
                        float *row = st + ((int64_t)h * P + p) * Dv;
                        for (int e = 0; e < Dv; e++) row[e] += a * vt[e];
                    }
            }
    }
    ml_release(fc), ml_release(vc);
    return S;
}

/* (B, L, H·d) <-> (B, H, L, d) */
static ml_tensor *heads_first(ml_tensor *x, int H) {
    ml_tensor *x4 = ml_reshape(x, 4, (int64_t[]){x->shape[0], x->shape[1], H, x->shape[2] / H});
    ml_tensor *p = x4 ? ml_permute(x4, (int[]){0, 2, 1, 3}) : NULL;
    ml_release(x4);
    return p;
}
static ml_tensor *heads_last(ml_tensor *x) {
    ml_tensor *p = ml_permute(x, (int[]){0, 2, 1, 3});
    ml_tensor *r = p ? ml_reshape(p, 3, (int64_t[]){x->shape[0], x->shape[2], x->shape[1] * x->shape[3]}) : NULL;
    ml_release(p);
    return r;
}

/* Explicit causal scores from features: A (B, H, L, L) = tril(φ(q)·φ(k)ᵀ); den (B, H, L, 1). */
static ml_tensor *explicit_scores(ml_tensor *fq, ml_tensor *fk, ml_tensor **den) {
    int64_t L = fq->shape[1];
    ml_tensor *qh = ml_permute(fq, (int[]){0, 2, 1, 3}), *kh = ml_permute(fk, (int[]){0, 2, 3, 1});
    ml_tensor *A = qh && kh ? ml_matmul(qh, kh) : NULL;
    ml_tensor *mask = ml_zeros(ML_F32, 2, (int64_t[]){L, L}), *Am = NULL, *sum = NULL;
    if (mask)
        for (int64_t t = 0; t < L; t++)
            for (int64_t u = 0; u <= t; u++) ml_f32(mask)[t * L + u] = 1;
    if (A && mask) Am = ml_mul(A, mask);
    if (Am) sum = ml_reduce(ML_SUM, Am, 3, true);
    *den = sum ? ml_binary_scalar(ML_ADD, sum, BASED_EPS) : NULL;
    ml_release(qh), ml_release(kh), ml_release(A), ml_release(mask), ml_release(sum);
    if (!*den) {
        ml_release(Am);
        return NULL;
    }
    return Am;
}

/* y after a replaced state sequence `rep` (B, L, H, P, Dv) that differs from `orig` somewhere. In
 * each row, a position p whose state differs restarts the recurrence from rep_p: S'_t = S_t + Δ
 * with Δ = rep_p − orig_p for t ≥ p (until the next such position), so
 * y'_t = y_t + φ(q_t)ᵀΔ / den_t; positions before the first patch keep their bits. */
static ml_tensor *patched_states(ml_tensor *y, ml_tensor *rep, ml_tensor *orig, ml_tensor *fq, ml_tensor *den) {
    int64_t Bz = rep->shape[0], L = rep->shape[1], per = ml_numel(rep) / (Bz * L);
    int64_t H = rep->shape[2], Dv = rep->shape[4];
    ml_tensor *rc = ml_contiguous(rep), *diff = rc ? ml_sub(rep, orig) : NULL, *z = NULL, *dz = NULL;
    ml_tensor *idx = ml_empty(ML_I32, 1, &L), *mask = ml_zeros(ML_I32, 3, (int64_t[]){Bz, L, 1}), *out = NULL;
    ml_tensor **rows = calloc((size_t)Bz, sizeof *rows);
    int64_t b = 0;
    if (!diff || !idx || !mask || !rows) goto fail;
    int64_t zs[5] = {Bz, 1, H, rep->shape[3], Dv};
    if (!(z = ml_zeros(ML_F32, 5, zs)) || !(dz = ml_cat(2, (ml_tensor *[]){diff, z}, 1))) goto fail;
    for (; b < Bz; b++) {
        int32_t last = (int32_t)L; /* row L of dz is zero: no patch yet */
        for (int64_t t = 0; t < L; t++) {
            if (memcmp(ml_f32(rc) + (b * L + t) * per, ml_f32(orig) + (b * L + t) * per, sizeof(float) * (size_t)per))
                last = (int32_t)t;
            ml_i32(idx)[t] = last;
            ml_i32(mask)[b * L + t] = last < L;
        }
        ml_tensor *row = ml_narrow(dz, 0, b, 1);
        rows[b] = row ? ml_index_select(row, 1, idx) : NULL;
        ml_release(row);
        if (!rows[b]) goto fail;
    }
    ml_tensor *delta = ml_cat((int)Bz, rows, 0);                          /* (B, L, H, P, Dv) */
    ml_tensor *fq5 = delta ? ml_unsqueeze(fq, 4) : NULL, *prod = fq5 ? ml_mul(fq5, delta) : NULL;
    ml_tensor *num = prod ? ml_reduce(ML_SUM, prod, 3, false) : NULL;     /* (B, L, H, Dv) */
    ml_tensor *dent = num ? ml_permute(den, (int[]){0, 2, 1, 3}) : NULL;  /* (B, L, H, 1) */
    ml_tensor *corr = dent ? ml_div(num, dent) : NULL;
    ml_tensor *corr3 = corr ? ml_reshape(corr, 3, y->shape) : NULL, *sum = corr3 ? ml_add(y, corr3) : NULL;
    out = sum ? ml_where(mask, sum, y) : NULL;
    ml_release(delta), ml_release(fq5), ml_release(prod), ml_release(num), ml_release(dent), ml_release(corr);
    ml_release(corr3), ml_release(sum);
fail:
    for (int64_t i = 0; rows && i < b; i++) ml_release(rows[i]);
    free(rows);
    ml_release(rc), ml_release(diff), ml_release(z), ml_release(dz), ml_release(idx), ml_release(mask);
    return out;
}

static ml_tensor *based_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    based_state *s = state;
    int H = s->H;
    ml_tensor *q = ml_linear(x, ml_model_p(m, s->wq), NULL), *k = NULL, *v = NULL;
    ml_tensor *fq = NULL, *fk = NULL, *S = NULL, *pat = NULL, *y = NULL, *out = NULL;
    ml_tensor *A = NULL, *den = NULL;
    if (!q || !ml_at_site(m, run, s->site[S_Q], &q) || !ml_at_head_site(m, run, s->site[S_HQ], H, &q)) goto done;
    k = ml_linear(x, ml_model_p(m, s->wk), NULL);
    if (!k || !ml_at_site(m, run, s->site[S_K], &k) || !ml_at_head_site(m, run, s->site[S_HK], H, &k)) goto done;
    v = ml_linear(x, ml_model_p(m, s->wv), NULL);
    if (!v || !ml_at_site(m, run, s->site[S_V], &v) || !ml_at_head_site(m, run, s->site[S_HV], H, &v)) goto done;
    bool explicit_form = false; /* a replaced feature map, state or pattern */
    bool want_f = ml_site_wanted(m, run, s->site[S_FEAT_Q]) || ml_site_wanted(m, run, s->site[S_FEAT_K]) ||
                  ml_site_wanted(m, run, s->site[S_KV_STATE]);
    if (want_f) {
        ml_tensor *oq, *ok;
        if (!(fq = features(q, H, s->F)) || !(fk = features(k, H, s->F))) goto done;
        oq = fq, ok = fk;
        ml_retain(oq), ml_retain(ok);
        bool okq = ml_at_site(m, run, s->site[S_FEAT_Q], &fq), okk = okq && ml_at_site(m, run, s->site[S_FEAT_K], &fk);
        /* a replacement with the same bits (a copy) keeps the fused path */
        explicit_form = okk && ((fq != oq && !ml_equal(fq, oq)) || (fk != ok && !ml_equal(fk, ok)));
        ml_release(oq), ml_release(ok);
        if (!okk) goto done;
    }
    if (ml_site_wanted(m, run, s->site[S_KV_STATE])) {
        bool old = ml_set_grad_enabled(false);
        S = kv_states(fk, v, H, s->P, s->Dv);
        ml_set_grad_enabled(old);
        ml_tensor *orig = ml_retain(S);
        bool ok = S && ml_at_site(m, run, s->site[S_KV_STATE], &S);
        bool replaced = ok && S != orig && !ml_equal(S, orig);
        if (replaced) { /* the pattern site still fires, with the explicit (unpatched) pattern */
            ml_tensor *yf = NULL;
            if ((A = explicit_scores(fq, fk, &den)) && (pat = ml_div(A, den))) {
                if (explicit_form) {
                    ml_tensor *vh = heads_first(v, H), *yh = vh ? ml_matmul(pat, vh) : NULL;
                    yf = yh ? heads_last(yh) : NULL;
                    ml_release(vh), ml_release(yh);
                } else {
                    yf = ml_based_linear_attention(q, k, v, H, BASED_EPS, NULL);
                }
            }
            y = yf ? patched_states(yf, S, orig, fq, den) : NULL;
            ml_release(yf);
        }
        ml_release(orig);
        if (!ok || (replaced && !y)) goto done;
    }
    if (!y && explicit_form) {
        if (!(A = explicit_scores(fq, fk, &den)) || !(pat = ml_div(A, den))) goto done;
    } else if (!y) {
        y = ml_based_linear_attention(q, k, v, H, BASED_EPS, ml_site_wanted(m, run, s->site[S_PATTERN]) ? &pat : NULL);
        if (!y) goto done;
    }
    if (pat) {
        ml_tensor *orig = ml_retain(pat);
        bool ok = ml_at_site(m, run, s->site[S_PATTERN], &pat);
        bool replaced = ok && ((pat != orig && !ml_equal(pat, orig)) || (explicit_form && !y));
        ml_release(orig);
        if (!ok) goto done;
        if (replaced) {
            ml_tensor *vh = heads_first(v, H), *yh = vh ? ml_matmul(pat, vh) : NULL;
            ml_release(y);
            y = yh ? heads_last(yh) : NULL;
            ml_release(vh), ml_release(yh);
            if (!y) goto done;
        }
    }
    if (!ml_at_site(m, run, s->site[S_Y], &y) || !ml_at_head_site(m, run, s->site[S_HZ], H, &y)) goto done;
    out = ml_linear(y, ml_model_p(m, s->wo), NULL);
done:
    ml_release(q), ml_release(k), ml_release(v), ml_release(fq), ml_release(fk), ml_release(S);
    ml_release(pat), ml_release(y), ml_release(A), ml_release(den);
    return out;
}

/* ---- recurrent form ---- */

typedef struct {
    int64_t B;
    float *S, *z; /* [B, H, P, Dv], [B, H, P] */
} based_rec;

static void based_rec_free(void *rec) {
    based_rec *r = rec;
    if (r) free(r->S), free(r->z);
    free(r);
}

static void *based_rec_new(ml_model *m, int l, void *state, int64_t B) {
    based_state *s = state;
    based_rec *r = calloc(1, sizeof *r);
    if (r) {
        r->B = B;
        r->S = calloc((size_t)(B * s->H * s->P * s->Dv), sizeof(float));
        r->z = calloc((size_t)(B * s->H * s->P), sizeof(float));
    }
    if (!r || !r->S || !r->z) {
        based_rec_free(r);
        ml_fail(ML_ERR_MEM, "model: out of memory");
        return NULL;
    }
    return r;
}

static ml_tensor *based_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x) {
    based_state *s = state;
    based_rec *r = rec;
    ml_tensor *q = ml_linear(x, ml_model_p(m, s->wq), NULL), *k = ml_linear(x, ml_model_p(m, s->wk), NULL);
    ml_tensor *v = ml_linear(x, ml_model_p(m, s->wv), NULL), *y = NULL, *out = NULL;
    if (q && k && v && (y = ml_empty(ML_F32, 2, v->shape))) {
        mlk_based_step((int)r->B, s->H, s->F, s->Dv, (float)BASED_EPS, r->S, r->z, ml_f32(q), ml_f32(k), ml_f32(v),
                       ml_f32(y));
        out = ml_linear(y, ml_model_p(m, s->wo), NULL);
    }
    ml_release(q), ml_release(k), ml_release(v), ml_release(y);
    return out;
}

/* The feature-map projections (q, k), v and out, and the quadratic form over L² pairs. */
static double based_flops(const ml_model *m, int l, double B, double L) {
    (void)l;
    double D = m->cfg.d_model, F = (double)ml_mixer_opt(&m->cfg, "feature_dim"),
           H = (double)ml_mixer_opt(&m->cfg, "n_heads");
    return 2 * 2 * B * L * D * F * H + 2 * 2 * B * L * D * D + 2 * B * L * L * (F * H + D);
}

static void long_only(ml_model_config *cfg) { ml_mixer_opt_set(cfg, "long_only", true); }

extern const ml_mixer_type ml_mixer_base_conv; /* its even layers (mixer_base_conv.c) */

const ml_mixer_type ml_mixer_based = {
    .name = "based",
    /* d_conv and long_only: its BaseConv layers' */
    .options = {ML_OPTION_INT("n_heads", 1, 1, 1024, "heads (paper: 1); must divide d_model"),
                ML_OPTION_INT("feature_dim", 8, 1, 64, "Based feature dim F")},
    .aliases = {{"based_long_only", long_only}},
    .even_layers = &ml_mixer_base_conv,
    .flops = based_flops,
    .build = based_build,
    .forward = based_forward,
    .free_state = free,
    .rec_new = based_rec_new,
    .rec_step = based_rec_step,
    .rec_free = based_rec_free,
};
