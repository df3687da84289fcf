/* Hyena, order 2 (docs/mixers.md, "Hyena"): short conv over three projections, two gates around an
 * implicit long convolution.
 *
 *   x (B, L, D) = LN1 output;  W = filter_order (64)
 *   p  = x·W_inᵀ + b_in                             (B, L, 3D)
 *   pc = SC_3(p; short_filter.weight (3D, 1, 3), .bias)   (B, L, 3D)
 *   x1, x2, v = pc[0:D], pc[D:2D], pc[2D:3D]          (split order)
 *   k[i, c] = (W4·sin(f⊙(W3·sin(f⊙(W2·sin(f⊙(W1 z_i + b1)) + b2)) + b3)))[c]·exp(−t_i·|δ_c|)   (L, D)
 *   yc = LC(v ⊙ x1; k)                                (B, L, D)    (+ 0·v': bias=False zeroes the skip)
 *   y  = yc ⊙ x2;   out = y·W_outᵀ + b_out
 *
 * f is one Sin frequency vector shared by the three sine layers (PyTorch's state dict names it
 * implicit_filter.1/.3/.5.freq: torch keys); z (1, 1024, 3) is trainable; t and δ
 * (linspace(ln(0.01)/1.5, ln(0.01)/0.3, D)) are buffers, also torch keys. filter_fn.bias exists (N(0, 1)) but
 * is multiplied by 0 in the original, so it never enters and its gradient is 0.
 *
 * Sites: mixer.short_conv pc (B, L, 3D) = [x1 | x2 | v]; mixer.v_gated v⊙x1 (B, L, D);
 * mixer.filter k (L, D); mixer.long_conv yc (B, L, D); mixer.y (B, L, D).
 *
 * Recurrent form: the short filter's window (3D × 2) and the history of v⊙x1 (no finite state),
 * with the filter materialised once on the 1024-grid. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "ops/kernels.h"
#include "ops/mixer_ops.h"
#include "ops/ops.h"

enum { HY_ORDER = 64, HY_EMB = 3, HY_SHORT = 3 };

enum { S_SHORT_CONV, S_V_GATED, S_FILTER, S_LONG_CONV, S_Y, N_SITES }; /* the mixer's sites, in declaration order */

typedef struct {
    int w_in, b_in, w_out, b_out, sw, sb;
    int fbias, z, w1, b1, freq, w2, b2, w3, b3, w4;
    ml_tensor *t, *deltas; /* buffers (1024) and (D); the decay exp(−t_i·|δ_c|) is made per forward */
    int site[N_SITES];          /* ids of the sites below */
} hy_state;

/* The implicit filter, composed from generic ops (so autograd needs no glue of its own). */

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
    if (t->dtype != ML_F32 || deltas->dtype != ML_F32)
        return ml_fail(ML_ERR_DTYPE, "%s: argument %d expected a float32 tensor, got %s", fn, t->dtype != ML_F32 ? 1 : 2,
                       ml_dtype_name(t->dtype != ML_F32 ? t->dtype : deltas->dtype)),
               NULL;
    if (L < 0 || ml_numel(t) < L)
        return ml_fail(ML_ERR_ARG, "%s: argument 3 (length) must be in [0, %lld], got %d", fn, (long long)ml_numel(t),
                       L),
               NULL;
    int64_t C = ml_numel(deltas);
    ml_tensor *out = ml_empty(ML_F32, 2, (int64_t[]){L, C});
    if (!out) return ml_fail(ML_ERR_MEM, "%s: out of memory", fn), NULL;
    for (int64_t i = 0; i < L; i++)
        for (int64_t c = 0; c < C; c++)
            ml_f32(out)[i * C + c] = expf(-(float)ml_get_flat(t, i) * fabsf((float)ml_get_flat(deltas, c)));
    return out;
}

static void hy_free(void *state) {
    hy_state *s = state;
    if (s) ml_release(s->t), ml_release(s->deltas);
    free(s);
}

static ml_status hy_build(ml_model *m, int l, void **state) {
    hy_state *s = calloc(1, sizeof *s);
    if (!s) return ml_fail(ML_ERR_MEM, "model: out of memory");
    *state = s;
    int64_t D = m->cfg.d_model, W = HY_ORDER, E = HY_EMB, K = HY_SHORT;
    s->w_in = ml_model_add_param(m, l, "in_proj.weight", 2, (int64_t[]){3 * D, D}, ML_P_LINEAR_W, D);
    s->b_in = ml_model_add_param(m, l, "in_proj.bias", 1, (int64_t[]){3 * D}, ML_P_LINEAR_B, D);
    s->w_out = ml_model_add_param(m, l, "out_proj.weight", 2, (int64_t[]){D, D}, ML_P_LINEAR_W, D);
    s->b_out = ml_model_add_param(m, l, "out_proj.bias", 1, &D, ML_P_LINEAR_B, D);
    s->sw = ml_model_add_param(m, l, "short_filter.weight", 3, (int64_t[]){3 * D, 1, K}, ML_P_CONV_W, K);
    s->sb = ml_model_add_param(m, l, "short_filter.bias", 1, (int64_t[]){3 * D}, ML_P_CONV_B, K);
    s->fbias = ml_model_add_param(m, l, "filter_fn.bias", 1, &D, ML_P_CUSTOM, 0);
    s->z = ml_model_add_param(m, l, "filter_fn.pos_emb.z", 3, (int64_t[]){1, ML_FILTER_LMAX, E}, ML_P_CUSTOM, 0);
    s->w1 = ml_model_add_param(m, l, "filter_fn.implicit_filter.0.weight", 2, (int64_t[]){W, E}, ML_P_LINEAR_W, E);
    s->b1 = ml_model_add_param(m, l, "filter_fn.implicit_filter.0.bias", 1, &W, ML_P_LINEAR_B, E);
    s->freq = ml_model_add_param(m, l, "filter_fn.implicit_filter.1.freq", 2, (int64_t[]){1, W}, ML_P_ONES, 0);
    s->w2 = ml_model_add_param(m, l, "filter_fn.implicit_filter.2.weight", 2, (int64_t[]){W, W}, ML_P_LINEAR_W, W);
    s->b2 = ml_model_add_param(m, l, "filter_fn.implicit_filter.2.bias", 1, &W, ML_P_LINEAR_B, W);
    s->w3 = ml_model_add_param(m, l, "filter_fn.implicit_filter.4.weight", 2, (int64_t[]){W, W}, ML_P_LINEAR_W, W);
    s->b3 = ml_model_add_param(m, l, "filter_fn.implicit_filter.4.bias", 1, &W, ML_P_LINEAR_B, W);
    s->w4 = ml_model_add_param(m, l, "filter_fn.implicit_filter.6.weight", 2, (int64_t[]){D, W}, ML_P_LINEAR_W, W);
    /* The Sin module is one module at three places of the PyTorch Sequential: three state-dict keys. */
    if (ml_model_add_alias(m, l, "filter_fn.implicit_filter.3.freq", s->freq) ||
        ml_model_add_alias(m, l, "filter_fn.implicit_filter.5.freq", s->freq))
        return ml_last_status();
    /* buffers: t (the 1024-grid) and the modulation δ; PyTorch's state dict holds them as
     * (1, 1024, 1) and (1, 1, D). The decay table is made per forward from the rows it needs, so
     * that planning a model (ml_model_plan) costs no memory of the order of 1024·D. */
    float *z = malloc(sizeof(float) * ML_FILTER_LMAX * 3), *t = malloc(sizeof(float) * ML_FILTER_LMAX);
    float *dl = malloc(sizeof(float) * (size_t)D);
    if (z && t && dl) {
        ml_implicit_pos_features(ML_FILTER_LMAX, z, t);
        ml_linspace_f32(log(1e-2) / 1.5, log(1e-2) / 0.3, (int)D, dl);
        s->t = ml_from_f32(1, (int64_t[]){ML_FILTER_LMAX}, t), s->deltas = ml_from_f32(1, &D, dl);
    }
    free(z), free(t), free(dl);
    if (!s->t || !s->deltas) return ml_last_status() ? ml_last_status() : ml_fail(ML_ERR_MEM, "model: out of memory");
    if (ml_model_add_buffer(m, l, "filter_fn.pos_emb.t", ml_view(s->t, 3, (int64_t[]){1, ML_FILTER_LMAX, 1})) ||
        ml_model_add_buffer(m, l, "filter_fn.modulation.deltas", ml_view(s->deltas, 3, (int64_t[]){1, 1, D})))
        return ml_last_status();
    int64_t BLD[3] = {-1, -2, D};
    s->site[S_SHORT_CONV] = ml_model_add_site(m, l, "mixer.short_conv", 3, (int64_t[]){-1, -2, 3 * D});
    s->site[S_V_GATED] = ml_model_add_site(m, l, "mixer.v_gated", 3, BLD);
    s->site[S_FILTER] = ml_model_add_site(m, l, "mixer.filter", 2, (int64_t[]){-2, D});
    s->site[S_LONG_CONV] = ml_model_add_site(m, l, "mixer.long_conv", 3, BLD);
    s->site[S_Y] = ml_model_add_site(m, l, "mixer.y", 3, BLD);
    return ML_OK;
}

static void hy_init(ml_model *m, int l, void *state, ml_rng *rng) {
    hy_state *s = state;
    float *fb = ml_f32(ml_model_p(m, s->fbias));
    for (int c = 0; c < m->cfg.d_model; c++) fb[c] = (float)ml_rng_normal(rng);
    ml_implicit_pos_features(ML_FILTER_LMAX, ml_f32(ml_model_p(m, s->z)), NULL);
}

/* The filter k (L, D) on the first L rows of the grid. */
static ml_tensor *hy_filter(ml_model *m, hy_state *s, int64_t L) {
    ml_tensor *z2 = ml_view(ml_model_p(m, s->z), 2, (int64_t[]){ML_FILTER_LMAX, HY_EMB});
    ml_tensor *zl = z2 ? ml_narrow(z2, 0, 0, L) : NULL, *dl = ml_hyena_decay(s->t, s->deltas, (int)L);
    ml_tensor *k = zl && dl ? ml_hyena_filter(zl, ml_model_p(m, s->w1), ml_model_p(m, s->b1), ml_model_p(m, s->w2),
                                              ml_model_p(m, s->b2), ml_model_p(m, s->w3), ml_model_p(m, s->b3),
                                              ml_model_p(m, s->freq), ml_model_p(m, s->w4), dl)
                            : NULL;
    ml_release(z2), ml_release(zl), ml_release(dl);
    return k;
}

static ml_tensor *hy_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    hy_state *s = state;
    int64_t L = x->shape[1], D = m->cfg.d_model;
    ml_tensor *p = NULL, *pc = NULL, *x1 = NULL, *x2 = NULL, *v = NULL, *vg = NULL, *k = NULL, *yc = NULL;
    ml_tensor *y = NULL, *out = NULL;
    if (L > ML_FILTER_LMAX) {
        ml_fail(ML_ERR_SHAPE, "hyena: sequence length %lld exceeds l_max %d", (long long)L, ML_FILTER_LMAX);
        return NULL;
    }
    if (!(p = ml_linear(x, ml_model_p(m, s->w_in), ml_model_p(m, s->b_in)))) goto done;
    pc = ml_causal_conv1d(p, ml_model_p(m, s->sw), ml_model_p(m, s->sb));
    if (!pc || !ml_at_site(m, run, s->site[S_SHORT_CONV], &pc)) goto done;
    if (!(x1 = ml_narrow(pc, 2, 0, D)) || !(x2 = ml_narrow(pc, 2, D, D)) || !(v = ml_narrow(pc, 2, 2 * D, D))) goto done;
    if (!(vg = ml_mul(v, x1)) || !ml_at_site(m, run, s->site[S_V_GATED], &vg)) goto done;
    if (!(k = hy_filter(m, s, L)) || !ml_at_site(m, run, s->site[S_FILTER], &k)) goto done;
    if (!(yc = ml_long_conv(vg, k, NULL, 1)) || !ml_at_site(m, run, s->site[S_LONG_CONV], &yc)) goto done;
    if (!(y = ml_mul(yc, x2)) || !ml_at_site(m, run, s->site[S_Y], &y)) goto done;
    out = ml_linear(y, ml_model_p(m, s->w_out), ml_model_p(m, s->b_out));
done:
    ml_release(p), ml_release(pc), ml_release(x1), ml_release(x2), ml_release(v), ml_release(vg), ml_release(k);
    ml_release(yc), ml_release(y);
    return out;
}

/* ---- recurrent form ---- */

typedef struct {
    int64_t B, D;
    float *win;         /* [B, 3D, 2] short-filter window */
    ml_lc_history hist; /* v⊙x1 so far */
    ml_tensor *k;       /* (1024, D) */
} hy_rec;

static void hy_rec_free(void *rec) {
    hy_rec *r = rec;
    if (!r) return;
    free(r->win);
    ml_lc_history_free(&r->hist);
    ml_release(r->k);
    free(r);
}

static void *hy_rec_new(ml_model *m, int l, void *state, int64_t B) {
    hy_rec *r = calloc(1, sizeof *r);
    if (!r) return ml_fail(ML_ERR_MEM, "model: out of memory"), NULL;
    r->B = B, r->D = m->cfg.d_model;
    r->win = calloc((size_t)(B * 3 * r->D * (HY_SHORT - 1)), sizeof(float));
    bool old = ml_set_grad_enabled(false);
    r->k = hy_filter(m, state, ML_FILTER_LMAX);
    ml_set_grad_enabled(old);
    if (!r->win || !r->k || ml_lc_history_init(&r->hist, B, r->D)) {
        if (!r->win) ml_fail(ML_ERR_MEM, "model: out of memory");
        hy_rec_free(r);
        return NULL;
    }
    return r;
}

static ml_tensor *hy_rec_step(ml_model *m, int l, void *state, void *rec, ml_tensor *x) {
    hy_state *s = state;
    hy_rec *r = rec;
    int64_t B = r->B, D = r->D;
    ml_tensor *p = ml_linear(x, ml_model_p(m, s->w_in), ml_model_p(m, s->b_in)); /* (B, 3D) */
    ml_tensor *pc = ml_empty(ML_F32, 2, (int64_t[]){B, 3 * D}), *y = ml_empty(ML_F32, 2, (int64_t[]){B, D});
    ml_tensor *vx = ml_empty(ML_F32, 2, (int64_t[]){B, D}), *out = NULL; /* vx: v⊙x1, the long conv's input */
    if (!p || !pc || !y || !vx) goto done;
    mlk_conv1d_step((int)B, (int)(3 * D), HY_SHORT, r->win, ml_f32(p), ml_f32(ml_model_p(m, s->sw)),
                    ml_f32(ml_model_p(m, s->sb)), ml_f32(pc));
    const float *c = ml_f32(pc);
    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < D; d++) ml_f32(vx)[b * D + d] = c[b * 3 * D + 2 * D + d] * c[b * 3 * D + d];
    if (ml_lc_history_step(&r->hist, ml_f32(vx), ml_f32(r->k), ml_f32(y), "hyena")) goto done;
    for (int64_t b = 0; b < B; b++)
        for (int64_t d = 0; d < D; d++) ml_f32(y)[b * D + d] *= c[b * 3 * D + D + d];
    out = ml_linear(y, ml_model_p(m, s->w_out), ml_model_p(m, s->b_out));
done:
    ml_release(p), ml_release(pc), ml_release(y), ml_release(vx);
    return out;
}

/* The in (3D) and out projections, and the filter MLP (3 -> W -> W -> W -> D) over L positions. */
static double hy_flops(const ml_model *m, int l, double B, double L) {
    (void)l;
    double D = m->cfg.d_model;
    return 2 * B * L * D * 4 * D + 2 * L * (HY_EMB * HY_ORDER + 2 * HY_ORDER * HY_ORDER + HY_ORDER * D);
}

const ml_mixer_type ml_mixer_hyena = {
    .name = "hyena",
    .flops = hy_flops,
    .build = hy_build,
    .init = hy_init,
    .forward = hy_forward,
    .free_state = hy_free,
    .rec_new = hy_rec_new,
    .rec_step = hy_rec_step,
    .rec_free = hy_rec_free,
};
