/* BaseConv (docs/mixers.md, "BaseConv"): a convolution gated by a linear projection, with an internal skip.
 *
 *   u (B, L, D) = LN1 output
 *   short (kernel K ≥ 1):  u_conv = SC_K(u; conv.conv.weight (D, 1, K), conv.conv.bias (D))
 *   long  (kernel −1):     k (L, D) = mlp(z[:L]),  mlp = Linear(3, 16) → ReLU → Linear(16, D)
 *                          u_conv = LC(u; k) + u          (the FFT routine's "+ u")
 *   u_proj = u·W_pᵀ + b_p                                   (B, L, D)
 *   y      = u_conv ⊙ u_proj + u                            (B, L, D)
 *
 * The layer's kernel comes from layer_kernel ([3, −1, 3, −1] for "base_conv", 3 in Based's
 * BaseConv layers, d_conv overrides, long_only; docs/mixers.md, "Layer choices and variants").
 * z (1, 1024, 3) is a parameter: created with requires_grad=False in the original but trained in
 * practice.
 *
 * Sites: mixer.short_conv or (mixer.filter (L, D), mixer.long_conv) — the conv output u_conv
 * (B, L, D); mixer.proj (B, L, D); mixer.product = u_conv ⊙ u_proj (B, L, D).
 *
 * Recurrent form: short — the last K−1 inputs per channel; long — the history u[0..t] (no finite
 * state), with the filter materialised once on the 1024-grid. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/ops.h"

enum { FILTER_HIDDEN = 16, FILTER_EMB = 3 };

enum { S_SHORT_CONV, S_FILTER, S_LONG_CONV, S_PROJ, S_PRODUCT, N_SITES }; /* the mixer's sites, in declaration order */

typedef struct {
    int K;                      /* ≥ 1 short, −1 long */
    int wp, bp;                 /* projection */
    int cw, cb;                 /* short conv */
    int z, wa, ba, wb, bb;      /* long conv: pos_emb.z, mlp.0, mlp.2 */
    ml_tensor *ones;            /* (D): the long conv's "+ u" as its skip vector */
    int site[N_SITES];          /* ids of the sites below */
} bc_state;

static void bc_free(void *state) {
    bc_state *s = state;
    if (s) ml_release(s->ones);
    free(s);
}

void ml_linspace_f32(double a, double b, int n, float *out) {
    if (n == 1) {
        out[0] = (float)a;
        return;
    }
    float fa = (float)a, fb = (float)b, step = (fb - fa) / (float)(n - 1);
    int half = n / 2;
    for (int i = 0; i < n; i++) out[i] = i < half ? fa + step * (float)i : fb - step * (float)(n - 1 - i);
}

void ml_implicit_pos_features(int lmax, float *z, float *t) {
    float *lin = malloc(sizeof(float) * (size_t)lmax);
    if (lin) ml_linspace_f32(0.0, 1.0, lmax, lin);
    const float two_pi = (float)(2.0 * 3.14159265358979323846), f = 1e-4f;
    for (int i = 0; i < lmax; i++) {
        float ti = lin ? lin[i] : (float)i / (float)(lmax - 1);
        /* the angle as float32 computes it: f·((2π·i)/l_max); cos/sin rounded once from double */
        float w = two_pi * (float)i / (float)lmax, a = f * w;
        z[3 * i] = ti;
        z[3 * i + 1] = (float)cos((double)a);
        z[3 * i + 2] = (float)-sin((double)a);
        if (t) t[i] = ti;
    }
    free(lin);
}

/* BaseConv kernel of layer l: "base_conv" passes kernel_size=[3, −1, 3, −1] (entry l; −1 = the
 * implicit long conv), a hybrid (Based) a short 3 in its BaseConv layers; d_conv overrides both
 * (for every layer), long_only makes every BaseConv long. 0 is refused by bc_build. */
static int layer_kernel(const ml_model_config *cfg, int layer) {
    if (ml_mixer_opt(cfg, "long_only")) return -1;
    int64_t d_conv = ml_mixer_opt(cfg, "d_conv");
    if (d_conv >= 0) return (int)d_conv;
    const ml_mixer_type *arch = ml_mixer_find(cfg->arch);
    if (arch && arch->even_layers) return 3;
    return layer % 2 == 0 ? 3 : -1;
}

static ml_status bc_build(ml_model *m, int l, void **state) {
    bc_state *s = calloc(1, sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model;
    s->K = layer_kernel(&m->cfg, l);
    if (s->K == 0)
        return ml_fail(ML_ERR_ARG, "model: option 'd_conv' must be >= 1 for a BaseConv layer (arch '%s'), got 0",
                       m->cfg.arch);
    int64_t BLD[3] = {-1, -2, D};
    for (int i = 0; i < N_SITES; i++) s->site[i] = -1; /* short or long: the other's sites stay absent */
    s->wp = ml_model_add_param(m, l, "projection.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->bp = ml_model_add_param(m, l, "projection.bias", 1, &D, ML_P_LINEAR_B, D);
    if (s->K > 0) {
        s->cw = ml_model_add_param(m, l, "conv.conv.weight", 3, (int64_t[]){D, 1, s->K}, ML_P_CONV_W, s->K);
        s->cb = ml_model_add_param(m, l, "conv.conv.bias", 1, &D, ML_P_CONV_B, s->K);
        s->site[S_SHORT_CONV] = ml_model_add_site(m, l, "mixer.short_conv", 3, BLD);
    } else {
        int64_t H = FILTER_HIDDEN, E = FILTER_EMB;
        s->z = ml_model_add_param(m, l, "conv.pos_emb.z", 3, (int64_t[]){1, ML_FILTER_LMAX, E}, ML_P_CUSTOM, 0);
        s->wa = ml_model_add_param(m, l, "conv.mlp.0.weight", 2, (int64_t[]){H, E}, ML_P_LINEAR_W, E);
        s->ba = ml_model_add_param(m, l, "conv.mlp.0.bias", 1, &H, ML_P_LINEAR_B, E);
        s->wb = ml_model_add_param(m, l, "conv.mlp.2.weight", 2, (int64_t[]){D, H}, ML_P_LINEAR_W, H);
        s->bb = ml_model_add_param(m, l, "conv.mlp.2.bias", 1, &D, ML_P_LINEAR_B, H);
        if (!(s->ones = ml_full(ML_F32, 1, &D, 1.0))) return ml_last_status();
        s->site[S_FILTER] = ml_model_add_site(m, l, "mixer.filter", 2, (int64_t[]){-2, D});
        s->site[S_LONG_CONV] = ml_model_add_site(m, l, "mixer.long_conv", 3, BLD);
    }
    s->site[S_PROJ] = ml_model_add_site(m, l, "mixer.proj", 3, BLD);
    s->site[S_PRODUCT] = ml_model_add_site(m, l, "mixer.product", 3, BLD);
    return ML_OK;
}

static void bc_init(ml_model *m, int l, void *state, ml_rng *rng) {
    bc_state *s = state;
    if (s->K < 0) ml_implicit_pos_features(ML_FILTER_LMAX, ml_f32(ml_model_p(m, s->z)), NULL);
}

/* The implicit filter k (L, D) on the first L rows of the 1024-grid. */
static ml_tensor *bc_filter(ml_model *m, bc_state *s, int64_t L) {
    ml_tensor *z2 = ml_view(ml_model_p(m, s->z), 2, (int64_t[]){ML_FILTER_LMAX, FILTER_EMB});
    ml_tensor *zl = z2 ? ml_narrow(z2, 0, 0, L) : NULL;
    ml_tensor *h = zl ? ml_linear(zl, ml_model_p(m, s->wa), ml_model_p(m, s->ba)) : NULL;
    ml_tensor *a = h ? ml_unary(ML_RELU, h) : NULL;
    ml_tensor *k = a ? ml_linear(a, ml_model_p(m, s->wb), ml_model_p(m, s->bb)) : NULL;
    ml_release(z2), ml_release(zl), ml_release(h), ml_release(a);
    return k;
}

static ml_tensor *bc_forward(ml_model *m, int l, void *state, ml_tensor *u, ml_run *run) {
    bc_state *s = state;
    int64_t L = u->shape[1];
    ml_tensor *conv = NULL, *proj = NULL, *prod = NULL, *y = NULL;
    if (s->K > 0) {
        conv = ml_causal_conv1d(u, ml_model_p(m, s->cw), ml_model_p(m, s->cb));
        if (!conv || !ml_at_site(m, run, s->site[S_SHORT_CONV], &conv)) goto done;
    } else {
        if (L > ML_FILTER_LMAX) {
            ml_fail(ML_ERR_SHAPE, "base_conv: sequence length %lld exceeds l_max %d", (long long)L, ML_FILTER_LMAX);
            goto done;
        }
        ml_tensor *k = bc_filter(m, s, L);
        if (!k || !ml_at_site(m, run, s->site[S_FILTER], &k)) goto done;
        conv = ml_long_conv(u, k, s->ones, 1);
        ml_release(k);
        if (!conv || !ml_at_site(m, run, s->site[S_LONG_CONV], &conv)) goto done;
    }
    proj = ml_linear(u, ml_model_p(m, s->wp), ml_model_p(m, s->bp));
    if (!proj || !ml_at_site(m, run, s->site[S_PROJ], &proj)) goto done;
    prod = ml_mul(conv, proj);
    if (!prod || !ml_at_site(m, run, s->site[S_PRODUCT], &prod)) goto done;
    y = ml_add(prod, u);
done:
    ml_release(conv), ml_release(proj), ml_release(prod);
    return y;
}

/* ---- recurrent form ---- */

typedef struct {
    int64_t B, D;
    float *win;         /* short: [B, D, K−1] */
    ml_lc_history hist; /* long: the inputs so far */
    ml_tensor *k;       /* long: (1024, D) */
} bc_rec;

static void bc_rec_free(void *rec) {
    bc_rec *r = rec;
    if (!r) return;
    free(r->win);
    ml_lc_history_free(&r->hist);
    ml_release(r->k);
    free(r);
}

static void *bc_rec_new(ml_model *m, int l, void *state, int64_t B) {
    bc_state *s = state;
    bc_rec *r = calloc(1, sizeof *r);
    if (!r) return ml_fail(ML_ERR_MEM, "model: out of memory"), NULL;
    r->B = B, r->D = m->cfg.d_model;
    if (s->K > 0) {
        r->win = calloc((size_t)(B * r->D * (s->K - 1) + 1), sizeof(float));
        if (!r->win) goto oom;
    } else {
        bool old = ml_set_grad_enabled(false);
        r->k = bc_filter(m, s, ML_FILTER_LMAX);
        ml_set_grad_enabled(old);
        if (!r->k || ml_lc_history_init(&r->hist, B, r->D)) return bc_rec_free(r), NULL;
    }
    return r;
oom:
    bc_rec_free(r);
    return ml_fail(ML_ERR_MEM, "model: out of memory"), NULL;
}

/* x_t (B, D) -> y_t (B, D). */
static ml_tensor *bc_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x) {
    bc_state *s = state;
    bc_rec *r = rec;
    int64_t B = r->B, D = r->D;
    ml_tensor *xc = ml_contiguous(x), *conv = xc ? ml_empty(ML_F32, 2, (int64_t[]){B, D}) : NULL;
    ml_tensor *proj = conv ? ml_linear(xc, ml_model_p(m, s->wp), ml_model_p(m, s->bp)) : NULL, *y = NULL;
    if (!proj) goto done;
    const float *xt = ml_f32(xc);
    float *c = ml_f32(conv);
    if (s->K > 0) {
        mlk_conv1d_step((int)B, (int)D, s->K, r->win, xt, ml_f32(ml_model_p(m, s->cw)), ml_f32(ml_model_p(m, s->cb)), c);
    } else {
        if (ml_lc_history_step(&r->hist, xt, ml_f32(r->k), c, "base_conv")) goto done;
        for (int64_t i = 0; i < B * D; i++) c[i] += xt[i]; /* the inner "+ u" */
    }
    y = ml_empty(ML_F32, 2, (int64_t[]){B, D});
    if (y)
        for (int64_t i = 0; i < B * D; i++) ml_f32(y)[i] = c[i] * ml_f32(proj)[i] + xt[i];
done:
    ml_release(xc), ml_release(conv), ml_release(proj);
    return y;
}

/* The projection, and with the long conv its filter MLP (3 -> 16 -> D) over L positions. */
static double bc_flops(const ml_model *m, int l, double B, double L) {
    double D = m->cfg.d_model, f = 2 * B * L * D * D;
    if (layer_kernel(&m->cfg, l) < 0) f += 2 * L * (FILTER_EMB * FILTER_HIDDEN + FILTER_HIDDEN * D);
    return f;
}

static void long_only(ml_model_config *cfg) { ml_mixer_opt_set(cfg, "long_only", true); }

const ml_mixer_type ml_mixer_base_conv = {
    .name = "base_conv",
    .options = {ML_OPTION_INT("d_conv", -1, -1, 64, "short-conv width; -1: the architecture's default"),
                ML_OPTION_BOOL("long_only", 0, "every BaseConv layer long (base_conv_long_only, based_long_only)")},
    .aliases = {{"base_conv_long_only", long_only}},
    .flops = bc_flops,
    .build = bc_build,
    .init = bc_init,
    .forward = bc_forward,
    .free_state = bc_free,
    .rec_new = bc_rec_new,
    .rec_step = bc_rec_step,
    .rec_free = bc_rec_free,
};
