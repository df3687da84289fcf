/* Multi-head causal softmax attention, Zoology's MHA (docs/mixers.md, "Attention").
 *
 *   x (B, L, D) --Wqkv (3D, D), no bias--> qkv (B, L, 3D) = [q | k | v]
 *   S = q·kᵀ/√d_h (B, H, L, L), −10000 above the diagonal;  P = softmax(S)
 *   ctx = P·v (B, L, D);  y = ctx·out_projᵀ + out_proj.bias
 *
 * Sites: mixer.q, mixer.k, mixer.v (B, L, D); mixer.scores, mixer.pattern (B, H, L, L);
 * mixer.ctx (B, L, D). Scores, softmax and the weighted sum are separate ops (nn_ops.h), so each
 * intermediate is a site with the arithmetic of the whole; replacements are differentiable.
 * Per head, in TransformerLens's shapes (its attn.hook_q/k/v/z/result): mixer.head_q,
 * mixer.head_k, mixer.head_v, mixer.head_z (B, L, H, d_h) — views of the flat ones, hooked after
 * them — and mixer.head_result (B, L, H, D), head h's z through its slice of out_proj, whose
 * sum over heads plus the bias is the output (out_by_head). A head site not hooked costs nothing
 * (ml_site_wanted).
 *
 * Recurrent form: a KV cache (the keys and values of every past position). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

enum { S_Q, S_K, S_V, S_SCORES, S_PATTERN, S_CTX, S_HQ, S_HK, S_HV, S_HZ, S_RESULT, N_SITES }; /* declaration order */

typedef struct {
    int wqkv, wo, bo;
    int site[N_SITES];          /* ids of the sites below */
} attn_state;

static ml_status attn_build(ml_model *m, int l, void **state) {
    attn_state *s = malloc(sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model, H = ml_mixer_opt(&m->cfg, "n_heads");
    s->wqkv = ml_model_add_param(m, l, "Wqkv.weight", 2, (int64_t[]){3 * D, D}, ML_P_LINEAR_W, D);
    s->wo = ml_model_add_param(m, l, "out_proj.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->bo = ml_model_add_param(m, l, "out_proj.bias", 1, &D, ML_P_LINEAR_B, D);
    int64_t BLD[3] = {-1, -2, D}, BHLL[4] = {-1, H, -2, -2}, BLHd[4] = {-1, -2, H, D / H}, BLHD[4] = {-1, -2, H, D};
    s->site[S_Q] = ml_model_add_site(m, l, "mixer.q", 3, BLD);
    s->site[S_K] = ml_model_add_site(m, l, "mixer.k", 3, BLD);
    s->site[S_V] = ml_model_add_site(m, l, "mixer.v", 3, BLD);
    s->site[S_SCORES] = ml_model_add_site(m, l, "mixer.scores", 4, BHLL);
    s->site[S_PATTERN] = ml_model_add_site(m, l, "mixer.pattern", 4, BHLL);
    s->site[S_CTX] = ml_model_add_site(m, l, "mixer.ctx", 3, BLD);
    s->site[S_HQ] = ml_model_add_site(m, l, "mixer.head_q", 4, BLHd);
    s->site[S_HK] = ml_model_add_site(m, l, "mixer.head_k", 4, BLHd);
    s->site[S_HV] = ml_model_add_site(m, l, "mixer.head_v", 4, BLHd);
    s->site[S_HZ] = ml_model_add_site(m, l, "mixer.head_z", 4, BLHd);
    s->site[S_RESULT] = ml_model_add_site(m, l, "mixer.head_result", 4, BLHD);
    return ML_OK;
}

/* q, k, v as sites: split, hook, join again (cat copies exact bits, so observing changes nothing). */
static ml_tensor *qkv_sites(const ml_model *m, const attn_state *s, ml_tensor *qkv, int64_t D, int64_t H, ml_run *run) {
    ml_tensor *parts[3] = {ml_narrow(qkv, 2, 0, D), ml_narrow(qkv, 2, D, D), ml_narrow(qkv, 2, 2 * D, D)};
    bool ok = parts[0] && parts[1] && parts[2];
    for (int i = 0; ok && i < 3; i++)
        ok = ml_at_site(m, run, s->site[S_Q + i], &parts[i]) && ml_at_head_site(m, run, s->site[S_HQ + i], H, &parts[i]);
    ml_tensor *out = ok ? ml_cat(3, parts, 2) : NULL;
    for (int i = 0; i < 3; i++) ml_release(parts[i]);
    return out;
}

/* The output when mixer.head_result is hooked: result[b,l,h] = z[b,l,h]·W_O[h] with W_O[h] =
 * out_projᵀ's rows h·d_h .. (h+1)·d_h (H, d_h, D), and y = fused projection + Σ_h (result' −
 * result) for the hook's result': an observer (result' = result, same bits) leaves y exactly
 * the fused projection, a replacement moves it by its change, and gradients reach result'. */
static ml_tensor *out_by_head(const ml_model *m, const attn_state *s, ml_tensor *ctx, int64_t H, ml_run *run) {
    int64_t B = ctx->shape[0], L = ctx->shape[1], D = ctx->shape[2];
    ml_tensor *z = ml_reshape(ctx, 4, (int64_t[]){B, L, H, D / H});
    ml_tensor *wo = ml_view(ml_model_p(m, s->wo), 3, (int64_t[]){D, H, D / H}), *r = NULL, *r0 = NULL, *y = NULL;
    if (z && wo) r = ml_einsum("blhe,dhe->blhd", 2, (ml_tensor *[]){z, wo});
    r0 = ml_retain(r);
    if (r && ml_at_site(m, run, s->site[S_RESULT], &r)) {
        y = ml_linear(ctx, ml_model_p(m, s->wo), ml_model_p(m, s->bo));
        if (y && r != r0) {
            ml_tensor *a = ml_reduce(ML_SUM, r, 2, false), *b = ml_reduce(ML_SUM, r0, 2, false);
            ml_tensor *d = a && b ? ml_sub(a, b) : NULL, *y2 = d ? ml_add(y, d) : NULL;
            ml_release(a), ml_release(b), ml_release(d), ml_release(y);
            y = y2;
        }
    }
    ml_release(z), ml_release(wo), ml_release(r), ml_release(r0);
    return y;
}

/* ---- forward from row t (ml_run.suffix): the projections of rows t.. only; the keys and values
 * of rows < t from the reference cache; scores, softmax and weighted sum by the ops of attn_forward
 * over all t + Ls rows (the same products, so every row keeps its bits; they are the cheap part) ---- */

static void attn_suffix_needs(const ml_model *m, int l, const void *state, bool *want) {
    (void)m, (void)l;
    const attn_state *s = state;
    want[s->site[S_K]] = want[s->site[S_V]] = true;
}

/* Rows rows[b] of x (B, L, W): (B, 1, W). */
static ml_tensor *pick_rows(ml_tensor *x, const int32_t *rows) {
    int64_t B = x->shape[0], L = x->shape[1], W = x->shape[2];
    ml_tensor *o = ml_empty(ML_F32, 3, (int64_t[]){B, 1, W});
    for (int64_t b = 0; o && b < B; b++)
        memcpy(ml_f32(o) + b * W, ml_f32(x) + (b * L + rows[b]) * W, sizeof(float) * (size_t)W);
    return o;
}

static ml_tensor *attn_suffix(ml_model *m, int l, const attn_state *s, int H, ml_tensor *x, const ml_suffix *sx) {
    int64_t D = m->cfg.d_model, Bg = x->shape[0], Ls = x->shape[1], t = sx->t, Lf = t + Ls;
    /* the last layer with readout rows: queries and output of those rows only */
    const int32_t *rows = l == m->cfg.n_layers - 1 ? sx->rows : NULL;
    ml_tensor *pk = t > 0 ? sx->pre[s->site[S_K]] : NULL, *pv = t > 0 ? sx->pre[s->site[S_V]] : NULL;
    if (t > 0 && (!pk || !pv || pk->ndim != 3 || !ml_is_contiguous(pk) || !ml_is_contiguous(pv) || pk->shape[1] < t ||
                  !ml_same_shape(pk, pv))) {
        ml_fail(ML_ERR_ARG, "attention: a forward from row t needs the cached mixer.k and mixer.v");
        return NULL;
    }
    ml_tensor *xc = ml_contiguous(x), *qs = NULL, *xr = NULL, *wq = NULL, *wkv = NULL, *qr = NULL;
    ml_tensor *qkv = NULL, *S = NULL, *P = NULL, *ctx = NULL, *cn = NULL, *cc = NULL, *y = NULL;
    if (!xc) goto done;
    if (rows) {
        wq = ml_narrow(ml_model_p(m, s->wqkv), 0, 0, D), wkv = ml_narrow(ml_model_p(m, s->wqkv), 0, D, 2 * D);
        xr = pick_rows(xc, rows);
        if (!wq || !wkv || !xr || !(qr = ml_linear(xr, wq, NULL)) || !(qs = ml_linear(xc, wkv, NULL))) goto done;
    } else if (!(qs = ml_linear(xc, ml_model_p(m, s->wqkv), NULL)))
        goto done;
    if (!(qkv = ml_empty(ML_F32, 3, (int64_t[]){Bg, Lf, 3 * D}))) goto done;
    int64_t L0 = pk ? pk->shape[1] : 0;
    for (int64_t b = 0; pk && b < Bg; b++)
        if (sx->docs[b] < 0 || sx->docs[b] >= pk->shape[0]) {
            ml_fail(ML_ERR_ARG, "attention: a forward from row t names sequence %d of a cache of %lld", sx->docs[b],
                    (long long)pk->shape[0]);
            goto done;
        }
    for (int64_t b = 0; b < Bg; b++) {
        float *o = ml_f32(qkv) + b * Lf * 3 * D;
        const float *k = pk ? ml_f32(pk) + (int64_t)sx->docs[b] * L0 * D : NULL;
        const float *v = pv ? ml_f32(pv) + (int64_t)sx->docs[b] * L0 * D : NULL;
        for (int64_t r = 0; r < t; r++) { /* rows < t: their keys and values (their queries' scores are not read) */
            memset(o + r * 3 * D, 0, sizeof(float) * (size_t)D);
            memcpy(o + r * 3 * D + D, k + r * D, sizeof(float) * (size_t)D);
            memcpy(o + r * 3 * D + 2 * D, v + r * D, sizeof(float) * (size_t)D);
        }
        if (!rows) memcpy(o + t * 3 * D, ml_f32(qs) + b * Ls * 3 * D, sizeof(float) * (size_t)(Ls * 3 * D));
        else { /* keys and values of every row, the query of the readout row (the other rows' are not read) */
            for (int64_t r = 0; r < Ls; r++) {
                memset(o + (t + r) * 3 * D, 0, sizeof(float) * (size_t)D);
                memcpy(o + (t + r) * 3 * D + D, ml_f32(qs) + (b * Ls + r) * 2 * D, sizeof(float) * (size_t)(2 * D));
            }
            memcpy(o + (t + rows[b]) * 3 * D, ml_f32(qr) + b * D, sizeof(float) * (size_t)D);
        }
    }
    if ((S = ml_attention_scores(qkv, H)) && (P = ml_causal_softmax(S)) && (ctx = ml_attention_apply(P, qkv, H))) {
        if (rows) {
            int32_t *at = malloc(sizeof(int32_t) * (size_t)Bg + 4);
            for (int64_t b = 0; at && b < Bg; b++) at[b] = (int32_t)t + rows[b];
            cc = at ? pick_rows(ctx, at) : NULL;
            free(at);
        } else if ((cn = ml_narrow(ctx, 1, t, Ls)))
            cc = ml_contiguous(cn);
        if (cc) y = ml_linear(cc, ml_model_p(m, s->wo), ml_model_p(m, s->bo));
    }
done:
    ml_release(xc), ml_release(qs), ml_release(xr), ml_release(wq), ml_release(wkv), ml_release(qr), ml_release(qkv);
    ml_release(S), ml_release(P), ml_release(ctx), ml_release(cn), ml_release(cc);
    return y;
}

static ml_tensor *attn_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    attn_state *s = state;
    int H = (int)ml_mixer_opt(&m->cfg, "n_heads");
    const ml_suffix *sx = run ? run->suffix : NULL;
    if (sx && (sx->t > 0 || (sx->rows && l == m->cfg.n_layers - 1))) return attn_suffix(m, l, s, H, x, sx);
    ml_tensor *qkv = ml_linear(x, ml_model_p(m, s->wqkv), NULL);
    bool any = false;
    for (int i = 0; i < 3; i++) any = any || ml_site_wanted(m, run, s->site[S_Q + i]) || ml_site_wanted(m, run, s->site[S_HQ + i]);
    if (qkv && any) {
        ml_tensor *j = qkv_sites(m, s, qkv, m->cfg.d_model, H, run);
        ml_release(qkv);
        qkv = j;
    }
    if (!qkv) return NULL;
    ml_tensor *S = ml_attention_scores(qkv, H), *P = NULL, *ctx = NULL, *y = NULL;
    if (S && ml_at_site(m, run, s->site[S_SCORES], &S)) P = ml_causal_softmax(S);
    if (P && ml_at_site(m, run, s->site[S_PATTERN], &P)) ctx = ml_attention_apply(P, qkv, H);
    if (ctx && ml_at_site(m, run, s->site[S_CTX], &ctx) && ml_at_head_site(m, run, s->site[S_HZ], H, &ctx)) {
        if (ml_site_wanted(m, run, s->site[S_RESULT])) y = out_by_head(m, s, ctx, H, run);
        else y = ml_linear(ctx, ml_model_p(m, s->wo), ml_model_p(m, s->bo));
    }
    ml_release(qkv), ml_release(S), ml_release(P), ml_release(ctx);
    return y;
}

/* ---- recurrent form: a KV cache; step t appends k_t, v_t and attends over s ≤ t ---- */

typedef struct {
    int64_t B, t, cap;
    float *k, *v; /* [cap, B, D], time-major so the cache grows by realloc */
    float *p;     /* [cap] scratch for one row of probabilities */
} attn_rec;

static void attn_rec_free(void *rec) {
    attn_rec *r = rec;
    if (r) free(r->k), free(r->v), free(r->p);
    free(r);
}

static void *attn_rec_new(ml_model *m, int l, void *state, int64_t B) {
    attn_rec *r = calloc(1, sizeof *r);
    if (!r) return ml_fail(ML_ERR_MEM, "model: out of memory"), NULL;
    r->B = B;
    return r;
}

/* x_t (B, D) -> y_t (B, D) */
static ml_tensor *attn_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x) {
    attn_state *s = state;
    attn_rec *r = rec;
    int64_t B = r->B, D = m->cfg.d_model, H = ml_mixer_opt(&m->cfg, "n_heads"), dh = D / H;
    if (r->t == r->cap) {
        int64_t cap = r->cap ? 2 * r->cap : 64;
        float *k = realloc(r->k, sizeof(float) * (size_t)(cap * B * D));
        if (k) r->k = k;
        float *v = realloc(r->v, sizeof(float) * (size_t)(cap * B * D));
        if (v) r->v = v;
        float *p = realloc(r->p, sizeof(float) * (size_t)cap);
        if (p) r->p = p;
        if (!k || !v || !p) return ml_fail(ML_ERR_MEM, "model: out of memory"), NULL;
        r->cap = cap;
    }
    ml_tensor *qkv = ml_linear(x, ml_model_p(m, s->wqkv), NULL); /* (B, 3D) */
    ml_tensor *ctx = qkv ? ml_zeros(ML_F32, 2, (int64_t[]){B, D}) : NULL, *y = NULL;
    if (!ctx) goto done;
    const float *a = ml_f32(qkv);
    int64_t t = r->t;
    for (int64_t b = 0; b < B; b++) {
        memcpy(r->k + (t * B + b) * D, a + b * 3 * D + D, sizeof(float) * (size_t)D);
        memcpy(r->v + (t * B + b) * D, a + b * 3 * D + 2 * D, sizeof(float) * (size_t)D);
    }
    double scale = 1.0 / sqrt((double)dh);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++) {
            const float *q = a + b * 3 * D + h * dh;
            float mx = -INFINITY, sum = 0;
            for (int64_t u = 0; u <= t; u++) {
                const float *k = r->k + (u * B + b) * D + h * dh;
                float acc = 0;
                for (int64_t e = 0; e < dh; e++) acc += q[e] * k[e];
                r->p[u] = acc * (float)scale;
                mx = r->p[u] > mx ? r->p[u] : mx;
            }
            for (int64_t u = 0; u <= t; u++) sum += r->p[u] = expf(r->p[u] - mx);
            float *c = ml_f32(ctx) + b * D + h * dh;
            for (int64_t u = 0; u <= t; u++) {
                const float *v = r->v + (u * B + b) * D + h * dh;
                float w = r->p[u] / sum;
                for (int64_t e = 0; e < dh; e++) c[e] += w * v[e];
            }
        }
    r->t++;
    y = ml_linear(ctx, ml_model_p(m, s->wo), ml_model_p(m, s->bo));
done:
    ml_release(qkv), ml_release(ctx);
    return y;
}

/* The fused QKV and output projections, and the two L² products (QKᵀ and PV). */
static double attn_flops(const ml_model *m, int l, double B, double L) {
    (void)l;
    double D = m->cfg.d_model;
    return 2 * B * L * D * 3 * D + 2 * 2 * B * L * L * D + 2 * B * L * D * D;
}

const ml_mixer_type ml_mixer_attention = {
    .name = "attention",
    .options = {ML_OPTION_INT("n_heads", 1, 1, 1024, "heads (paper: 1); must divide d_model")},
    .flops = attn_flops,
    .build = attn_build,
    .forward = attn_forward,
    .suffix_needs = attn_suffix_needs,
    .free_state = free,
    .rec_new = attn_rec_new,
    .rec_step = attn_rec_step,
    .rec_free = attn_rec_free,
};
