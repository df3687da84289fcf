/* H3 (docs/mixers.md, "H3"): a shift SSM on k, an outer product with v inside 2-dim heads, a
 * diagonal S4D SSM on it, and a gate by q. d_state N = 1024, head_dim 2, H = D/2 heads.
 *
 *   u (B, L, D) = LN1 output
 *   q, k, v = u·W_{q,k,v}ᵀ + b                       (B, L, D) each
 *   K_sh[s, c] = Σ_n B_sh[c, n]·C_sh[c, n+s]          (L, D)     shift kernel
 *   k̃ = LC(k; K_sh) + ssm_k_D ⊙ k                     (B, L, D)
 *   kv[.., h·4 + d1·2 + d2] = k̃[.., 2h+d1]·v[.., 2h+d2] (B, L, 4H)
 *   K_dg[s, h] = 2·Re Σ_m C̃_m λ_m^s                    (L, H)     bilinear S4D kernel, M = N/2 modes
 *   yk = LC(kv; K_dg shared by a head's 4 channels) + D[h]·kv   (B, L, 4H)
 *   o[.., d2·H + h] = Σ_d1 q[.., 2h+d1]·yk[.., h·4 + d1·2 + d2]  (B, L, D)   (d2, h) channel order
 *   out = o·W_outᵀ + b_out
 *
 * Sites: mixer.q, mixer.k, mixer.v (B, L, D); mixer.shift_filter K_sh (L, D); mixer.short_conv
 * k̃ (B, L, D) (the shift-SSM output, the "previous token" path); mixer.kv (B, L, 4H);
 * mixer.filter K_dg (L, H); mixer.long_conv yk (B, L, 4H); mixer.o (B, L, D).
 *
 * Recurrent form (exact): the shift state s_t[c, n] = s_{t−1}[c, n−1] + B_sh[c, n]·k_t[c]
 * (D × N) with k̃_t = Σ_n C_sh[c, n]·s_t[c, n] + ssm_k_D·k_t, and the complex diagonal state
 * (4H × M) of SSKernelDiag.step. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/ops.h"

enum { H3_N = 1024 };

enum { S_Q, S_K, S_V, S_SHIFT_FILTER, S_SHORT_CONV, S_KV, S_FILTER, S_LONG_CONV, S_O, N_SITES }; /* the mixer's sites, in declaration order */

typedef struct {
    int H, N, M;
    int wq, bq, wk, bk, wv, bv, wo, bo;
    int sh_b, sh_c, sh_d;                 /* shift SSM */
    int dg_c, dg_logdt, dg_b, dg_ar, dg_ai, dg_d; /* diagonal SSM */
    int site[N_SITES];          /* ids of the sites below */
} h3_state;

static ml_status h3_build(ml_model *m, int l, void **state) {
    h3_state *s = calloc(1, sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model;
    if (D % 2) return ml_fail(ML_ERR_ARG, "model: H3 needs an even 'd_model' (head_dim 2), got %lld", (long long)D);
    int64_t H = D / 2, N = H3_N, M = N / 2;
    s->H = (int)H, s->N = (int)N, s->M = (int)M;
    const char *nm[3] = {"q_proj", "k_proj", "v_proj"}; /* output_linear comes after the SSMs, as in the original */
    int *w[3] = {&s->wq, &s->wk, &s->wv}, *b[3] = {&s->bq, &s->bk, &s->bv};
    char name[64];
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.weight", nm[i]);
        *w[i] = ml_model_add_param(m, l, name, 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
        snprintf(name, sizeof name, "%s.bias", nm[i]);
        *b[i] = ml_model_add_param(m, l, name, 1, &D, ML_P_LINEAR_B, D);
    }
    s->sh_b = ml_model_add_param(m, l, "ssm_k_kernel.kernel.B", 2, (int64_t[]){D, N}, ML_P_CUSTOM, 0);
    s->sh_c = ml_model_add_param(m, l, "ssm_k_kernel.kernel.C", 3, (int64_t[]){1, D, N}, ML_P_CUSTOM, N);
    s->sh_d = ml_model_add_param(m, l, "ssm_k_D", 1, &D, ML_P_CUSTOM, 0);
    s->dg_c = ml_model_add_param(m, l, "kernel.kernel.C", 4, (int64_t[]){1, H, M, 2}, ML_P_CUSTOM, 0);
    s->dg_logdt = ml_model_add_param(m, l, "kernel.kernel.log_dt", 1, &H, ML_P_CUSTOM, 0);
    s->dg_b = ml_model_add_param(m, l, "kernel.kernel.B", 3, (int64_t[]){H, M, 2}, ML_P_CUSTOM, 0);
    s->dg_ar = ml_model_add_param(m, l, "kernel.kernel.inv_A_real", 2, (int64_t[]){H, M}, ML_P_CUSTOM, 0);
    s->dg_ai = ml_model_add_param(m, l, "kernel.kernel.A_imag", 2, (int64_t[]){H, M}, ML_P_CUSTOM, 0);
    s->dg_d = ml_model_add_param(m, l, "D", 1, &H, ML_P_CUSTOM, 0);
    s->wo = ml_model_add_param(m, l, "output_linear.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->bo = ml_model_add_param(m, l, "output_linear.bias", 1, &D, ML_P_LINEAR_B, D);
    int64_t BLD[3] = {-1, -2, D}, BL4H[3] = {-1, -2, 4 * H};
    s->site[S_Q] = ml_model_add_site(m, l, "mixer.q", 3, BLD);
    s->site[S_K] = ml_model_add_site(m, l, "mixer.k", 3, BLD);
    s->site[S_V] = ml_model_add_site(m, l, "mixer.v", 3, BLD);
    s->site[S_SHIFT_FILTER] = ml_model_add_site(m, l, "mixer.shift_filter", 2, (int64_t[]){-2, D});
    s->site[S_SHORT_CONV] = ml_model_add_site(m, l, "mixer.short_conv", 3, BLD);
    s->site[S_KV] = ml_model_add_site(m, l, "mixer.kv", 3, BL4H);
    s->site[S_FILTER] = ml_model_add_site(m, l, "mixer.filter", 2, (int64_t[]){-2, H});
    s->site[S_LONG_CONV] = ml_model_add_site(m, l, "mixer.long_conv", 3, BL4H);
    s->site[S_O] = ml_model_add_site(m, l, "mixer.o", 3, BLD);
    return ML_OK;
}

static void h3_init(ml_model *m, int l, void *state, ml_rng *rng) {
    h3_state *s = state;
    int64_t D = m->cfg.d_model, H = s->H, N = s->N, M = s->M;
    float *B = ml_f32(ml_model_p(m, s->sh_b)), *C = ml_f32(ml_model_p(m, s->sh_c));
    double bound = 1.0 / sqrt((double)N); /* kaiming_uniform(a=√5) on (D, 1, N): fan_in = N */
    for (int64_t c = 0; c < D; c++)
        for (int64_t n = 0; n < N; n++) {
            B[c * N + n] = n == 0 ? 1.0f : 0.0f; /* e₀: a shift register */
            C[c * N + n] = (float)(bound * (2.0 * ml_rng_double(rng) - 1.0));
        }
    float *kd = ml_f32(ml_model_p(m, s->sh_d));
    for (int64_t c = 0; c < D; c++) kd[c] = (float)ml_rng_normal(rng);
    /* complex normal c (re, im iid N(0, ½)), stored as conj(c): the same distribution */
    float *cc = ml_f32(ml_model_p(m, s->dg_c));
    for (int64_t i = 0; i < H * M * 2; i++) cc[i] = (float)(sqrt(0.5) * ml_rng_normal(rng));
    float *ld = ml_f32(ml_model_p(m, s->dg_logdt));
    for (int64_t h = 0; h < H; h++) ld[h] = (float)(log(1e-3) + ml_rng_double(rng) * (log(1e-1) - log(1e-3)));
    float *bb = ml_f32(ml_model_p(m, s->dg_b)), *ar = ml_f32(ml_model_p(m, s->dg_ar));
    float *ai = ml_f32(ml_model_p(m, s->dg_ai));
    for (int64_t h = 0; h < H; h++)
        for (int64_t k = 0; k < M; k++) {
            bb[(h * M + k) * 2] = 1, bb[(h * M + k) * 2 + 1] = 0;
            ar[h * M + k] = (float)log(0.5);
            ai[h * M + k] = (float)(3.14159265358979323846 * (double)k); /* S4D-Lin */
        }
    float *dd = ml_f32(ml_model_p(m, s->dg_d));
    for (int64_t h = 0; h < H; h++) dd[h] = (float)ml_rng_normal(rng);
}

static ml_tensor *h3_forward(ml_model *m, int l, void *state, ml_tensor *u, ml_run *run) {
    h3_state *s = state;
    int L = (int)u->shape[1];
    ml_tensor *q = NULL, *k = NULL, *v = NULL, *ksh = NULL, *kt = NULL, *kv = NULL, *kdg = NULL, *yk = NULL;
    ml_tensor *o = NULL, *out = NULL;
    if (L > s->N) {
        ml_fail(ML_ERR_SHAPE, "h3: sequence length %d exceeds d_state %d", L, s->N);
        return NULL;
    }
    if (!(q = ml_linear(u, ml_model_p(m, s->wq), ml_model_p(m, s->bq))) || !ml_at_site(m, run, s->site[S_Q], &q)) goto done;
    if (!(k = ml_linear(u, ml_model_p(m, s->wk), ml_model_p(m, s->bk))) || !ml_at_site(m, run, s->site[S_K], &k)) goto done;
    if (!(v = ml_linear(u, ml_model_p(m, s->wv), ml_model_p(m, s->bv))) || !ml_at_site(m, run, s->site[S_V], &v)) goto done;
    ksh = ml_h3_shift_kernel(ml_model_p(m, s->sh_b), ml_model_p(m, s->sh_c), L);
    if (!ksh || !ml_at_site(m, run, s->site[S_SHIFT_FILTER], &ksh)) goto done;
    kt = ml_long_conv(k, ksh, ml_model_p(m, s->sh_d), 1);
    if (!kt || !ml_at_site(m, run, s->site[S_SHORT_CONV], &kt)) goto done;
    if (!(kv = ml_h3_outer(kt, v)) || !ml_at_site(m, run, s->site[S_KV], &kv)) goto done;
    kdg = ml_s4d_kernel(ml_model_p(m, s->dg_c), ml_model_p(m, s->dg_logdt), ml_model_p(m, s->dg_b),
                        ml_model_p(m, s->dg_ar), ml_model_p(m, s->dg_ai), L);
    if (!kdg || !ml_at_site(m, run, s->site[S_FILTER], &kdg)) goto done;
    yk = ml_long_conv(kv, kdg, ml_model_p(m, s->dg_d), 4);
    if (!yk || !ml_at_site(m, run, s->site[S_LONG_CONV], &yk)) goto done;
    if (!(o = ml_h3_gate(q, yk)) || !ml_at_site(m, run, s->site[S_O], &o)) goto done;
    out = ml_linear(o, ml_model_p(m, s->wo), ml_model_p(m, s->bo));
done:
    ml_release(q), ml_release(k), ml_release(v), ml_release(ksh), ml_release(kt), ml_release(kv);
    ml_release(kdg), ml_release(yk), ml_release(o);
    return out;
}

/* ---- recurrent form ---- */

typedef struct {
    int64_t B, t;
    float *sh; /* [B, D, N] shift state */
    float *dg; /* [B, H, 4, M, 2] diagonal state */
} h3_rec;

static void h3_rec_free(void *rec) {
    h3_rec *r = rec;
    if (r) free(r->sh), free(r->dg);
    free(r);
}

static void *h3_rec_new(ml_model *m, int l, void *state, int64_t B) {
    h3_state *s = state;
    int64_t D = m->cfg.d_model;
    h3_rec *r = calloc(1, sizeof *r);
    if (r) {
        r->B = B;
        r->sh = calloc((size_t)(B * D * s->N), sizeof(float));
        r->dg = calloc((size_t)(B * s->H * 4 * s->M * 2), sizeof(float));
    }
    if (!r || !r->sh || !r->dg) {
        h3_rec_free(r);
        ml_fail(ML_ERR_MEM, "model: out of memory");
        return NULL;
    }
    return r;
}

static ml_tensor *h3_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x) {
    h3_state *s = state;
    h3_rec *r = rec;
    int64_t B = r->B, D = m->cfg.d_model, H = s->H, N = s->N;
    ml_tensor *q = ml_linear(x, ml_model_p(m, s->wq), ml_model_p(m, s->bq));
    ml_tensor *k = ml_linear(x, ml_model_p(m, s->wk), ml_model_p(m, s->bk));
    ml_tensor *v = ml_linear(x, ml_model_p(m, s->wv), ml_model_p(m, s->bv));
    ml_tensor *kt = ml_empty(ML_F32, 2, (int64_t[]){B, D}), *kv = ml_empty(ML_F32, 2, (int64_t[]){B, 4 * H});
    ml_tensor *yk = ml_empty(ML_F32, 2, (int64_t[]){B, 4 * H}), *o = ml_empty(ML_F32, 2, (int64_t[]){B, D});
    ml_tensor *out = NULL;
    if (r->t >= N) {
        ml_fail(ML_ERR_SHAPE, "h3: sequence length exceeds d_state %d", s->N);
        goto done;
    }
    if (!q || !k || !v || !kt || !kv || !yk || !o) goto done;
    const float *Bs = ml_f32(ml_model_p(m, s->sh_b)), *Cs = ml_f32(ml_model_p(m, s->sh_c));
    const float *kd = ml_f32(ml_model_p(m, s->sh_d));
    for (int64_t b = 0; b < B; b++)
        for (int64_t c = 0; c < D; c++) {
            float *st = r->sh + (b * D + c) * N, kk = ml_f32(k)[b * D + c];
            memmove(st + 1, st, sizeof(float) * (size_t)(N - 1)); /* s[n] ← s[n−1] */
            st[0] = 0;
            double acc = 0;
            for (int64_t n = 0; n < N; n++) {
                st[n] += Bs[c * N + n] * kk;
                acc += (double)Cs[c * N + n] * st[n];
            }
            ml_f32(kt)[b * D + c] = (float)acc + kd[c] * kk;
        }
    mlk_h3_outer_fwd((int)B, (int)H, ml_f32(kt), ml_f32(v), ml_f32(kv));
    mlk_s4d_step((int)B, (int)H, 4, s->M, ml_f32(ml_model_p(m, s->dg_c)), ml_f32(ml_model_p(m, s->dg_logdt)),
                 ml_f32(ml_model_p(m, s->dg_b)), ml_f32(ml_model_p(m, s->dg_ar)), ml_f32(ml_model_p(m, s->dg_ai)),
                 ml_f32(ml_model_p(m, s->dg_d)), r->dg, ml_f32(kv), ml_f32(yk));
    mlk_h3_gate_fwd((int)B, (int)H, ml_f32(q), ml_f32(yk), ml_f32(o));
    r->t++;
    out = ml_linear(o, ml_model_p(m, s->wo), ml_model_p(m, s->bo));
done:
    ml_release(q), ml_release(k), ml_release(v), ml_release(kt), ml_release(kv), ml_release(yk), ml_release(o);
    return out;
}

/* The q, k, v and output projections. */
static double h3_flops(const ml_model *m, int l, double B, double L) {
    (void)l;
    double D = m->cfg.d_model;
    return 4 * 2 * B * L * D * D;
}

const ml_mixer_type ml_mixer_h3 = {
    .name = "h3",
    .flops = h3_flops,
    .build = h3_build,
    .init = h3_init,
    .forward = h3_forward,
    .free_state = free,
    .rec_new = h3_rec_new,
    .rec_step = h3_rec_step,
    .rec_free = h3_rec_free,
};
