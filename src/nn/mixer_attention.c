/* Multi-head causal softmax attention, Zoology's MHA (architectures.md §4).
 *
 *   x (B, L, D) --Wqkv (3D, D), no bias--> qkv (B, L, 3D) = [q | k | v]
 *   S = q·kᵀ/√d_h (B, H, L, L), −10000 above the diagonal;  P = softmax(S)
 *   ctx = P·v (B, L, D);  y = ctx·out_projᵀ + out_proj.bias
 *
 * Sites: mixer.q, mixer.k, mixer.v (B, L, D); mixer.scores, mixer.pattern (B, H, L, L);
 * mixer.ctx (B, L, D). With no hook on q/k/v/scores/pattern the fused attention op runs; when a
 * run wants any of them the same maths runs as separate ops, so a replacement is differentiable. */
#include <math.h>
#include <stdlib.h>

#include "nn/nn.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"

typedef struct {
    int wqkv, wo, bo;
} attn_state;

static ml_status attn_build(ml_model *m, int l, void **state) {
    attn_state *s = malloc(sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model, H = m->cfg.n_heads;
    s->wqkv = ml_model_add_param(m, l, "Wqkv.weight", 2, (int64_t[]){3 * D, D}, ML_P_LINEAR_W, D);
    s->wo = ml_model_add_param(m, l, "out_proj.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->bo = ml_model_add_param(m, l, "out_proj.bias", 1, &D, ML_P_LINEAR_B, D);
    int64_t BLD[3] = {-1, -2, D}, BHLL[4] = {-1, H, -2, -2};
    ml_model_add_site(m, l, "mixer.q", 3, BLD);
    ml_model_add_site(m, l, "mixer.k", 3, BLD);
    ml_model_add_site(m, l, "mixer.v", 3, BLD);
    ml_model_add_site(m, l, "mixer.scores", 4, BHLL);
    ml_model_add_site(m, l, "mixer.pattern", 4, BHLL);
    return ml_model_add_site(m, l, "mixer.ctx", 3, BLD);
}

/* (B, L, D) -> (B, H, L, d_h) view */
static ml_tensor *heads(ml_tensor *x, int64_t H) {
    ml_tensor *r = ml_reshape(x, 4, (int64_t[]){x->shape[0], x->shape[1], H, x->shape[2] / H});
    ml_tensor *p = r ? ml_transpose(r, 1, 2) : NULL;
    ml_release(r);
    return p;
}

/* The decomposed path: every intermediate is a site. Returns ctx (B, L, D). */
static ml_tensor *attention_ops(ml_model *m, int l, ml_tensor *qkv, ml_run *run) {
    int64_t B = qkv->shape[0], L = qkv->shape[1], D = m->cfg.d_model, H = m->cfg.n_heads;
    ml_tensor *q = ml_narrow(qkv, 2, 0, D), *k = ml_narrow(qkv, 2, D, D), *v = ml_narrow(qkv, 2, 2 * D, D);
    ml_tensor *qh = NULL, *kh = NULL, *vh = NULL, *kt = NULL, *S = NULL, *P = NULL, *c = NULL, *out = NULL;
    ml_tensor *mask = NULL, *Sm = NULL, *qk = NULL, *ct = NULL;
    if (!q || !k || !v || !ml_at_site(run, l, "mixer.q", &q) || !ml_at_site(run, l, "mixer.k", &k) ||
        !ml_at_site(run, l, "mixer.v", &v))
        goto done;
    qh = heads(q, H), kh = heads(k, H), vh = heads(v, H);
    kt = kh ? ml_transpose(kh, 2, 3) : NULL;
    qk = qh && kt ? ml_matmul(qh, kt) : NULL;
    S = qk ? ml_binary_scalar(ML_MUL, qk, 1.0 / sqrt((double)(D / H))) : NULL;
    mask = ml_zeros(ML_F32, 2, (int64_t[]){L, L});
    if (!S || !mask) goto done;
    for (int64_t t = 0; t < L; t++)
        for (int64_t s = t + 1; s < L; s++) ml_f32(mask)[t * L + s] = -10000.0f;
    Sm = ml_add(S, mask);
    if (!Sm || !ml_at_site(run, l, "mixer.scores", &Sm)) goto done;
    P = ml_softmax(Sm, -1);
    if (!P || !ml_at_site(run, l, "mixer.pattern", &P)) goto done;
    c = ml_matmul(P, vh);
    ct = c ? ml_transpose(c, 1, 2) : NULL;
    out = ct ? ml_reshape(ct, 3, (int64_t[]){B, L, D}) : NULL;
done:
    ml_release(q), ml_release(k), ml_release(v), ml_release(qh), ml_release(kh), ml_release(vh);
    ml_release(kt), ml_release(qk), ml_release(S), ml_release(mask), ml_release(Sm), ml_release(P);
    ml_release(c), ml_release(ct);
    return out;
}

static ml_tensor *attn_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    attn_state *s = state;
    ml_tensor *qkv = ml_linear(x, ml_model_p(m, s->wqkv), NULL);
    if (!qkv) return NULL;
    static const char *const inner[] = {"mixer.q", "mixer.k", "mixer.v", "mixer.scores", "mixer.pattern"};
    bool decomposed = false;
    for (int i = 0; i < 5; i++) decomposed = decomposed || ml_site_wanted(run, l, inner[i]);
    ml_tensor *ctx = decomposed ? attention_ops(m, l, qkv, run) : ml_causal_attention(qkv, m->cfg.n_heads, NULL);
    ml_release(qkv);
    if (!ctx || !ml_at_site(run, l, "mixer.ctx", &ctx)) return NULL;
    ml_tensor *y = ml_linear(ctx, ml_model_p(m, s->wo), ml_model_p(m, s->bo));
    ml_release(ctx);
    return y;
}

const ml_mixer_type ml_mixer_attention = {
    .name = "attention",
    .build = attn_build,
    .forward = attn_forward,
    .free_state = free,
};
