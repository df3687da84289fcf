/* Every sequence mixer of the paper (docs/mixers.md) on every variant: parameter
 * counts and names, whole-model gradients, the recurrent form against the parallel one, hook
 * invariants, state patching, and that each architecture learns a tiny associative recall. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"
#include "nn/train.h"
#include "ops/ops.h"
#include "testutil.h"

typedef struct {
    const char *label, *arch;
    int d_conv;
    bool no_conv, long_only;
    int64_t pe, nope; /* docs/mixers.md, "Parameter counts": totals at D = 64, 2 layers, V = 8196 */
} variant;

static const variant variants[] = {
    {"attention", "attention", -1, false, false, 689792, 624256},
    {"hyena", "hyena", -1, false, false, 723456, 657920},
    {"base_conv", "base_conv", -1, false, false, 669696, 604160},
    {"base_conv_long_only", "base_conv", -1, false, true, 608128 + 65536, 608128},
    {"based", "based", -1, false, false, 670528, 604992},
    {"based d_conv 1", "based", 1, false, false, 604864 + 65536, 604864},
    {"based d_conv 2", "based", 2, false, false, 604928 + 65536, 604928},
    {"based d_conv 4", "based", 4, false, false, 605056 + 65536, 605056},
    {"based_long_only", "based", -1, false, true, 608960 + 65536, 608960},
    {"h3", "h3", -1, false, false, 1149184, 1083648},
    {"mamba", "mamba", -1, false, false, 655616, 590080},
    {"mamba_without_conv", "mamba", -1, true, false, 590080 + 65536, 590080},
    {"mamba d_conv 0", "mamba", 0, false, false, 590080 + 65536, 590080},
    {"mamba d_conv 1", "mamba", 1, false, false, 589312 + 65536, 589312},
    {"mamba d_conv 2", "mamba", 2, false, false, 589568 + 65536, 589568},
    {"mamba d_conv 3", "mamba", 3, false, false, 589824 + 65536, 589824},
    {"mamba d_conv 4", "mamba", 4, false, false, 655616, 590080},
    {"delta_net", "delta_net", -1, false, false, 691456, 625920},
};
enum { N_VARIANTS = sizeof variants / sizeof variants[0] };

/* MECHLAB_TEST_MIXER=name: the per-architecture tests run for that mixer only (c.test_add_mixer
 * checks its dummy; the others are c.test_mixers's); the registry-wide checks see every mixer. */
static bool other_mixer(const char *arch) {
    const char *only = getenv("MECHLAB_TEST_MIXER");
    return only && *only && strcmp(only, arch);
}

static void config_of(const variant *v, ml_model_config *c) {
    ml_model_config_defaults(c, v->arch);
    ml_mixer_opt_set(c, "d_conv", v->d_conv), ml_mixer_opt_set(c, "no_conv", v->no_conv);
    ml_mixer_opt_set(c, "long_only", v->long_only);
}

static ml_model *tiny(const variant *v, int D, int layers, int heads, bool pe, uint64_t seed) {
    ml_model_config c;
    config_of(v, &c);
    c.d_model = D, c.n_layers = layers, c.vocab = 13, c.max_pos = 16, c.pos_emb = pe;
    ml_mixer_opt_set(&c, "n_heads", heads);
    c.seed = seed;
    ml_model *m = ml_model_new(&c);
    ck_assert_msg(m != NULL, "%s: %s", v->label, ml_last_error());
    return m;
}

/* ---------------------------------------------------------------- the registry */

/* Every descriptor is complete, names and aliases are unique, and an alias builds what its
 * variant row spells out field by field. */
START_TEST(registry_descriptors) {
    ck_assert_int_ge(ml_mixer_count(), 7);
    ck_assert_ptr_null(ml_mixer_at(ml_mixer_count()));
    ck_assert_ptr_null(ml_mixer_find("mamba_without_conv")); /* an alias is not a mixer */
    /* a mixer added to the registry needs its row in variants[] (docs/ARCHITECTURE.md, "Adding a mixer") */
    for (int i = 0; i < ml_mixer_count(); i++) {
        int v = 0;
        while (v < N_VARIANTS && strcmp(variants[v].label, ml_mixer_at(i)->name)) v++;
        ck_assert_msg(v < N_VARIANTS, "mixer '%s' has no row in variants[] (tests/c/test_mixers.c): add its parameter counts",
                      ml_mixer_at(i)->name);
    }
    for (int i = 0; i < ml_mixer_count(); i++) {
        const ml_mixer_type *t = ml_mixer_at(i);
        ck_assert_msg(t->build && t->forward && t->rec_new && t->rec_step && t->rec_free && t->flops, "%s", t->name);
        ck_assert_ptr_eq(ml_mixer_find(t->name), t);
        /* its own options: in the table, not common, declared alike by every mixer that shares one */
        for (int o = 0; o < ML_MIXER_MAX_OPTIONS && t->options[o].name; o++) {
            const ml_model_option *own = &t->options[o], *opt = ml_model_option_find(own->name);
            ck_assert_msg(opt && opt->mixer && !own->common && ml_mixer_reads(t, opt), "%s: option %s", t->name, own->name);
            ck_assert_msg(own->type == opt->type && own->def == opt->def && own->lo == opt->lo && own->hi == opt->hi &&
                              own->key == opt->key,
                          "%s: option %s is declared unlike another mixer's", t->name, own->name);
            ck_assert_msg(own->doc && own->doc[0], "%s: option %s has no doc line", t->name, own->name);
        }
        for (int a = 0; a < ML_MIXER_MAX_ALIASES && t->aliases[a].name; a++) {
            ck_assert_ptr_null(ml_mixer_find(t->aliases[a].name));
            ml_model_config c;
            ml_model_config_defaults(&c, t->aliases[a].name);
            ml_mixer_resolve_alias(&c);
            ck_assert_str_eq(c.arch, t->name);
        }
    }
    for (int v = 0; v < N_VARIANTS; v++) {
        bool alias = ml_mixer_find(variants[v].label) == NULL && !strchr(variants[v].label, ' ');
        if (!alias) continue;
        ml_model_config c;
        ml_model_config_defaults(&c, variants[v].label);
        c.pos_emb = false;
        ml_model *m = ml_model_new(&c);
        ck_assert_msg(m != NULL, "%s: %s", variants[v].label, ml_last_error());
        ck_assert_str_eq(m->cfg.arch, variants[v].arch);
        ck_assert_int_eq(ml_mixer_opt(&m->cfg, "no_conv"), variants[v].no_conv);
        ck_assert_int_eq(ml_mixer_opt(&m->cfg, "long_only"), variants[v].long_only);
        ck_assert_int_eq(ml_model_count(m), variants[v].nope);
        ml_model_free(m);
    }
}
END_TEST

/* The benches' FLOP count of a layer is the mixer's own formula (attention: QKV, out, two L²). */
START_TEST(registry_flops) {
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    c.vocab = 16;
    ml_model *m = ml_model_new(&c);
    ck_assert_ptr_nonnull(m);
    double D = 64, B = 2, L = 10;
    ck_assert_double_eq(m->layers[0].mixer->flops(m, 0, B, L),
                        2 * B * L * D * 3 * D + 4 * B * L * L * D + 2 * B * L * D * D);
    ml_model_free(m);
    ml_model_config_defaults(&c, "base_conv");
    c.vocab = 16;
    m = ml_model_new(&c);
    ck_assert_ptr_nonnull(m); /* layer 1 is the long conv: its filter MLP counts too */
    ck_assert_double_gt(m->layers[1].mixer->flops(m, 1, B, L), m->layers[0].mixer->flops(m, 0, B, L));
    ml_model_free(m);
}
END_TEST

/* ---------------------------------------------------------------- (a, b) counts and names */

START_TEST(param_counts) {
    const variant *v = &variants[_i];
    for (int pe = 0; pe <= 1; pe++) {
        ml_model_config c;
        config_of(v, &c);
        c.pos_emb = pe;
        ml_model *m = ml_model_new(&c);
        ck_assert_msg(m != NULL, "%s: %s", v->label, ml_last_error());
        int64_t want = pe ? v->pe : v->nope;
        ck_assert_msg(ml_model_count(m) == want, "%s pe=%d: %lld parameters, expected %lld", v->label, pe,
                      (long long)ml_model_count(m), (long long)want);
        /* V = 8195 is exactly D lower (docs/mixers.md, "Parameter counts") */
        ml_model_free(m);
        c.vocab = 8195;
        m = ml_model_new(&c);
        ck_assert_int_eq(ml_model_count(m), want - 64);
        ml_model_free(m);
    }
}
END_TEST

START_TEST(param_counts_atr) {
    /* the totals the original runs report (ATR, V = 26, NoPE) */
    struct {
        const char *arch;
        int D, layers;
        int64_t want;
    } cases[] = {{"based", 128, 2, 319872}, {"mamba", 128, 2, 236800}, {"mamba", 256, 1, 445184}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ml_model_config c;
        ml_model_config_defaults(&c, cases[i].arch);
        c.vocab = 26, c.d_model = cases[i].D, c.n_layers = cases[i].layers, c.pos_emb = false;
        ml_model *m = ml_model_new(&c);
        ck_assert_msg(m != NULL, "%s", ml_last_error());
        ck_assert_int_eq(ml_model_count(m), cases[i].want);
        ml_model_free(m);
    }
    /* closed forms at other widths: H3 and Mamba mixers */
    int widths[5] = {16, 32, 64, 128, 256};
    int64_t h3[5] = {58464, 118976, 246144, 525056, 1181184}, mamba[5] = {3360, 9920, 32640, 116480, 437760};
    for (int i = 0; i < 5; i++) {
        const char *archs[2] = {"h3", "mamba"};
        for (int a = 0; a < 2; a++) {
            ml_model_config c;
            ml_model_config_defaults(&c, archs[a]);
            c.d_model = widths[i], c.n_layers = 1, c.vocab = 2, c.pos_emb = false;
            ml_model *m = ml_model_new(&c);
            ck_assert_msg(m != NULL, "%s", ml_last_error());
            int64_t mixer = 0;
            for (int p = m->layers[0].param_first; p < m->layers[0].param_end; p++)
                if (strstr(m->params[p].name, "sequence_mixer.")) mixer += m->params[p].numel;
            ck_assert_int_eq(mixer, a ? mamba[i] : h3[i]);
            ml_model_free(m);
        }
    }
}
END_TEST

static void want_names(ml_model *m, const char *label, const char *const *names) {
    for (int i = 0; names[i]; i++)
        ck_assert_msg(ml_model_find_param(m, names[i]) >= 0, "%s: no parameter %s", label, names[i]);
}

START_TEST(param_names) {
    static const char *const base_conv[] = {"backbone.layers.0.sequence_mixer.projection.weight",
                                            "backbone.layers.0.sequence_mixer.projection.bias",
                                            "backbone.layers.0.sequence_mixer.conv.conv.weight",
                                            "backbone.layers.0.sequence_mixer.conv.conv.bias",
                                            "backbone.layers.1.sequence_mixer.conv.pos_emb.z",
                                            "backbone.layers.1.sequence_mixer.conv.mlp.0.weight",
                                            "backbone.layers.1.sequence_mixer.conv.mlp.0.bias",
                                            "backbone.layers.1.sequence_mixer.conv.mlp.2.weight",
                                            "backbone.layers.1.sequence_mixer.conv.mlp.2.bias",
                                            "backbone.layers.1.state_mixer.fc2.weight",
                                            NULL};
    static const char *const based[] = {"backbone.layers.0.sequence_mixer.mixer.conv.conv.weight",
                                        "backbone.layers.0.sequence_mixer.mixer.projection.weight",
                                        "backbone.layers.1.sequence_mixer.mixer.proj_q.weight",
                                        "backbone.layers.1.sequence_mixer.mixer.proj_k.weight",
                                        "backbone.layers.1.sequence_mixer.mixer.proj_v.weight",
                                        "backbone.layers.1.sequence_mixer.mixer.proj_o.weight",
                                        NULL};
    static const char *const h3[] = {"backbone.layers.0.sequence_mixer.q_proj.weight",
                                     "backbone.layers.0.sequence_mixer.k_proj.bias",
                                     "backbone.layers.0.sequence_mixer.v_proj.weight",
                                     "backbone.layers.0.sequence_mixer.ssm_k_kernel.kernel.B",
                                     "backbone.layers.0.sequence_mixer.ssm_k_kernel.kernel.C",
                                     "backbone.layers.0.sequence_mixer.ssm_k_D",
                                     "backbone.layers.0.sequence_mixer.kernel.kernel.C",
                                     "backbone.layers.0.sequence_mixer.kernel.kernel.log_dt",
                                     "backbone.layers.0.sequence_mixer.kernel.kernel.B",
                                     "backbone.layers.0.sequence_mixer.kernel.kernel.inv_A_real",
                                     "backbone.layers.0.sequence_mixer.kernel.kernel.A_imag",
                                     "backbone.layers.0.sequence_mixer.D",
                                     "backbone.layers.1.sequence_mixer.output_linear.weight",
                                     "backbone.layers.1.sequence_mixer.output_linear.bias",
                                     NULL};
    static const char *const hyena[] = {"backbone.layers.0.sequence_mixer.in_proj.weight",
                                        "backbone.layers.0.sequence_mixer.in_proj.bias",
                                        "backbone.layers.0.sequence_mixer.out_proj.weight",
                                        "backbone.layers.0.sequence_mixer.short_filter.weight",
                                        "backbone.layers.0.sequence_mixer.short_filter.bias",
                                        "backbone.layers.0.sequence_mixer.filter_fn.bias",
                                        "backbone.layers.0.sequence_mixer.filter_fn.pos_emb.z",
                                        "backbone.layers.0.sequence_mixer.filter_fn.implicit_filter.0.weight",
                                        "backbone.layers.0.sequence_mixer.filter_fn.implicit_filter.1.freq",
                                        "backbone.layers.0.sequence_mixer.filter_fn.implicit_filter.4.bias",
                                        "backbone.layers.1.sequence_mixer.filter_fn.implicit_filter.6.weight",
                                        NULL};
    static const char *const mamba[] = {"backbone.layers.0.norm.weight",
                                        "backbone.layers.0.sequence_mixer.in_proj.weight",
                                        "backbone.layers.0.sequence_mixer.conv1d.weight",
                                        "backbone.layers.0.sequence_mixer.conv1d.bias",
                                        "backbone.layers.0.sequence_mixer.x_proj.weight",
                                        "backbone.layers.0.sequence_mixer.dt_proj.weight",
                                        "backbone.layers.0.sequence_mixer.dt_proj.bias",
                                        "backbone.layers.0.sequence_mixer.A_log",
                                        "backbone.layers.0.sequence_mixer.D",
                                        "backbone.layers.1.sequence_mixer.out_proj.weight",
                                        NULL};
    static const char *const delta_net[] = {"backbone.layers.0.sequence_mixer.q_proj.weight",
                                            "backbone.layers.0.sequence_mixer.k_proj.weight",
                                            "backbone.layers.0.sequence_mixer.v_proj.weight",
                                            "backbone.layers.0.sequence_mixer.b_proj.weight",
                                            "backbone.layers.0.sequence_mixer.q_conv1d.weight",
                                            "backbone.layers.0.sequence_mixer.k_conv1d.weight",
                                            "backbone.layers.0.sequence_mixer.v_conv1d.weight",
                                            "backbone.layers.0.sequence_mixer.o_norm.weight",
                                            "backbone.layers.1.sequence_mixer.o_proj.weight",
                                            NULL};
    struct {
        const char *arch;
        const char *const *names;
    } cases[] = {{"base_conv", base_conv}, {"based", based}, {"h3", h3},
                 {"hyena", hyena},         {"mamba", mamba}, {"delta_net", delta_net}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ml_model_config c;
        ml_model_config_defaults(&c, cases[i].arch);
        c.vocab = 16;
        ml_model *m = ml_model_new(&c);
        ck_assert_msg(m != NULL, "%s", ml_last_error());
        want_names(m, cases[i].arch, cases[i].names);
        ml_model_free(m);
    }
    /* no Hybrid level outside "based"; mamba has no MLP and no LN pair */
    ml_model_config c;
    ml_model_config_defaults(&c, "mamba");
    c.vocab = 16;
    ml_model *m = ml_model_new(&c);
    ck_assert_int_lt(ml_model_find_param(m, "backbone.layers.0.norm1.weight"), 0);
    ck_assert_int_lt(ml_model_find_param(m, "backbone.layers.0.state_mixer.fc1.weight"), 0);
    ml_model_free(m);
}
END_TEST

/* Initialisation details of BaseConv, H3, Hyena and Mamba that the generic rule does not cover. */
static const float *param(ml_model *m, const char *name) {
    int i = ml_model_find_param(m, name);
    ck_assert_msg(i >= 0, "no parameter %s", name);
    return ml_f32(m->params[i].t);
}

START_TEST(special_inits) {
    ml_model_config c;
    ml_model_config_defaults(&c, "mamba");
    ml_model *m = ml_model_new(&c);
    const float *A = param(m, "backbone.layers.0.sequence_mixer.A_log"), *b = param(m, "backbone.layers.0.sequence_mixer.dt_proj.bias");
    for (int n = 0; n < 16; n++) ck_assert_float_eq_tol(A[5 * 16 + n], logf((float)(n + 1)), 1e-6f);
    for (int e = 0; e < 128; e++) {
        double dt = log1p(exp((double)b[e])); /* softplus(bias) = dt₀ ∈ [1e-3, 1e-1] */
        ck_assert_msg(dt > 0.99e-3 && dt < 1.01e-1, "dt %g", dt);
    }
    const float *wo = param(m, "backbone.layers.0.sequence_mixer.out_proj.weight");
    float mx = 0;
    for (int i = 0; i < 64 * 128; i++) mx = fabsf(wo[i]) > mx ? fabsf(wo[i]) : mx;
    ck_assert_msg(mx <= 1.0f / 16 && mx > 0.9f / 16, "out_proj bound %g, expected 1/16", mx); /* U(±1/√(2D·2)) */
    ml_model_free(m);
    ml_model_config_defaults(&c, "hyena");
    m = ml_model_new(&c);
    const float *z = param(m, "backbone.layers.0.sequence_mixer.filter_fn.pos_emb.z");
    ck_assert_float_eq(z[0], 0.0f);
    ck_assert_float_eq(z[1], 1.0f);
    ck_assert_float_eq(z[1023 * 3], 1.0f);
    ck_assert_float_eq_tol(z[1023 * 3 + 2], -sinf(2 * 3.14159265f * 1e-4f * 1023 / 1024), 1e-9f);
    ck_assert_float_eq(param(m, "backbone.layers.0.sequence_mixer.filter_fn.implicit_filter.1.freq")[7], 1.0f);
    ml_model_free(m);
    ml_model_config_defaults(&c, "h3");
    m = ml_model_new(&c);
    const float *B = param(m, "backbone.layers.0.sequence_mixer.ssm_k_kernel.kernel.B");
    ck_assert_float_eq(B[0], 1.0f);
    ck_assert_float_eq(B[1], 0.0f);
    ck_assert_float_eq(B[1024], 1.0f);
    ck_assert_float_eq_tol(param(m, "backbone.layers.0.sequence_mixer.kernel.kernel.A_imag")[3], 3 * 3.14159265f, 1e-5f);
    ck_assert_float_eq_tol(param(m, "backbone.layers.0.sequence_mixer.kernel.kernel.inv_A_real")[9], logf(0.5f), 1e-6f);
    ml_model_free(m);
}
END_TEST

START_TEST(config_errors) {
    ml_model_config c;
    ml_model_config_defaults(&c, "base_conv");
    ml_mixer_opt_set(&c, "d_conv", 0);
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_msg(strstr(ml_last_error(), "d_conv"), "%s", ml_last_error());
    ml_model_config_defaults(&c, "h3");
    c.d_model = 7;
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_msg(strstr(ml_last_error(), "d_model"), "%s", ml_last_error());
    ml_model_config_defaults(&c, "based");
    ml_mixer_opt_set(&c, "feature_dim", 17);
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_msg(strstr(ml_last_error(), "feature_dim"), "%s", ml_last_error());
    /* docs/mixers.md, "Layer choices and variants": mamba_without_conv ignores d_conv */
    ml_model_config_defaults(&c, "mamba");
    ml_mixer_opt_set(&c, "no_conv", true), ml_mixer_opt_set(&c, "d_conv", 2), c.pos_emb = false;
    ml_model *m = ml_model_new(&c);
    ck_assert_int_eq(ml_model_count(m), 590080);
    ml_model_free(m);
}
END_TEST

/* The vectorised activations of ml_unary (kernel_util.h) against libm in double, and their
 * gradients. */
static ml_tensor *f_act(void *ud, ml_tensor **in) { return ml_unary(*(ml_unop *)ud, in[0]); }

static double act_ref(ml_unop op, double x) {
    switch (op) {
    case ML_SILU: return x / (1 + exp(-x));
    case ML_SIGMOID: return 1 / (1 + exp(-x));
    case ML_SOFTPLUS: return x > 20 ? x : log1p(exp(x));
    default: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    }
}

START_TEST(fast_activations) {
    ml_unop ops[4] = {ML_SILU, ML_SIGMOID, ML_SOFTPLUS, ML_GELU};
    int64_t n = 4001;
    ml_tensor *x = ml_empty(ML_F32, 1, &n);
    for (int64_t i = 0; i < n; i++) ml_f32(x)[i] = (float)(-100.0 + 0.05 * (double)i); /* −100 .. 100 */
    ml_f32(x)[0] = -1e-9f, ml_f32(x)[1] = 19.999f, ml_f32(x)[2] = 20.001f, ml_f32(x)[3] = -30.0f;
    for (int k = 0; k < 4; k++) {
        ml_tensor *a = ml_unary(ops[k], x);
        for (int64_t i = 0; i < n; i++) {
            double xi = ml_f32(x)[i], want = act_ref(ops[k], xi);
            /* a few ulp; GELU's erf (A&S 7.1.26) is good to 1.5e-7 absolute, scaled by |x|/2 */
            double tol = 4e-7 * fabs(want) + (ops[k] == ML_GELU ? 1e-7 * (1 + fabs(xi)) : 1e-30);
            ck_assert_msg(fabs(ml_f32(a)[i] - want) <= tol, "%s(%g) = %.9g, libm gives %.9g", ml_unop_name(ops[k]), xi,
                          ml_f32(a)[i], want);
        }
        ml_release(a);
        ml_rng r;
        ml_rng_init(&r, 5, 0);
        ml_tensor *in[1] = {ml_normal(2, (int64_t[]){7, 9}, 0, 3, &r)};
        ml_set_requires_grad(in[0], true);
        ck_assert_msg(ml_gradcheck(f_act, &ops[k], 1, in, 1e-3, 1e-3, 1e-2) == ML_OK, "%s", ml_last_error());
        ml_release(in[0]);
    }
    ml_release(x);
}
END_TEST

/* ---------------------------------------------------------------- (c) gradients */

/* Moves every parameter off its initial value (inits such as H3's B = e₀ or Mamba's D = 1 make
 * some paths trivial). */
static void perturb(ml_model *m, double std, uint64_t seed) {
    ml_rng r;
    ml_rng_init(&r, seed, 9);
    for (int64_t i = 0; i < m->n_total; i++) ml_f32(m->flat)[i] += (float)(std * ml_rng_normal(&r));
    m->flat->storage->version++;
}

START_TEST(grad_whole_model) {
    const variant *v = &variants[_i];
    if (other_mixer(v->arch)) return;
    bool h3 = !strcmp(v->arch, "h3"); /* 2·1024 shift parameters per channel: D = 4, one layer keeps it quick */
    ml_model *m = tiny(v, h3 ? 4 : 8, h3 ? 1 : 2, 2, _i % 2 == 0, 5);
    perturb(m, 0.05, 3);
    ml_test_loss u = {m, ml_test_tokens(2, 5, 13, 3), ml_full(ML_I32, 2, (int64_t[]){2, 5}, -100)};
    ml_i32(u.targets)[3] = 4, ml_i32(u.targets)[5 + 2] = 7, ml_i32(u.targets)[5 + 4] = 1;
    ml_tensor **in = malloc(sizeof *in * (size_t)m->n_params);
    for (int i = 0; i < m->n_params; i++) in[i] = m->params[i].t;
    /* 256 elements a table: every element of the small ones, an even spread of Hyena's filter MLP
     * and H3's kernels (every element of those would be 26,648 and 59,368 pairs of forwards) */
    ml_status st = ml_gradcheck_sampled(ml_test_loss_fn, &u, m->n_params, in, 1e-3, 2e-3, 3e-2, 256);
    int k = 0;
    if (st) sscanf(ml_last_error(), "gradcheck: input %d", &k);
    ck_assert_msg(st == ML_OK, "%s: %s (%s)", v->label, ml_last_error(), k > 0 ? m->params[k - 1].name : "");
    free(in);
    ml_release(u.tokens), ml_release(u.targets);
    ml_model_free(m);
}
END_TEST

/* ---------------------------------------------------------------- (d) recurrent form */

START_TEST(recurrent_equals_parallel) {
    const variant *v = &variants[_i];
    if (other_mixer(v->arch)) return;
    for (int heads = 1; heads <= 2; heads++) {
        ml_model *m = tiny(v, 16, 3, heads, heads == 1, 11);
        perturb(m, 0.1, 4);
        ml_tensor *tok = ml_test_tokens(3, 9, 13, 6);
        ml_tensor *hp = ml_model_hidden(m, tok, NULL), *hr = ml_model_hidden_recurrent(m, tok);
        ck_assert_msg(hp && hr, "%s: %s", v->label, ml_last_error());
        double worst = 0;
        for (int64_t i = 0; i < ml_numel(hp); i++) {
            double d = fabs((double)ml_f32(hp)[i] - ml_f32(hr)[i]);
            worst = d > worst ? d : worst;
        }
        ck_assert_msg(worst <= 1e-5, "%s heads=%d: recurrent differs from parallel by %g", v->label, heads, worst);
        ml_release(hp), ml_release(hr), ml_release(tok);
        ml_model_free(m);
    }
}
END_TEST

/* ---------------------------------------------------------------- (e) hooks */

typedef struct {
    int calls[512];
    int mode; /* 0 observe, 1 clone */
    ml_model *m;
} hook_ud;

static ml_tensor *test_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    hook_ud *h = ud;
    int layer = h->m->site_layer[site];
    const char *name = h->m->sites[site].name;
    int i = ml_test_site_index(h->m, layer, name);
    ck_assert_msg(i >= 0, "undeclared site blocks.%d.%s fired", layer, name);
    h->calls[i]++;
    /* the declared shape (−1 = B, −2 = L) */
    const ml_site_decl *d = &h->m->sites[i];
    ck_assert_msg(d->ndim == act->ndim, "blocks.%d.%s has %d dims, declared %d", layer, name, act->ndim, d->ndim);
    for (int k = 0; k < d->ndim; k++) {
        int64_t want = d->shape[k] == -1 ? 3 : d->shape[k] == -2 ? 6 : d->shape[k];
        ck_assert_msg(act->shape[k] == want, "blocks.%d.%s dim %d is %lld, declared %lld", layer, name, k,
                      (long long)act->shape[k], (long long)want);
    }
    return h->mode == 1 ? ml_clone(act) : NULL;
}

START_TEST(hooks_invariants) {
    const variant *v = &variants[_i];
    if (other_mixer(v->arch)) return;
    ml_model *m = tiny(v, 8, 2, 2, true, 7);
    ck_assert_int_le(m->n_sites, 512);
    ml_tensor *tok = ml_test_tokens(3, 6, 13, 5);
    ml_tensor *h0 = ml_model_hidden(m, tok, NULL);
    for (int mode = 0; mode <= 1; mode++) {
        hook_ud h = {.mode = mode, .m = m};
        ml_run run = {.hook = test_hook, .ud = &h};
        ml_tensor *h1 = ml_model_hidden(m, tok, &run);
        ck_assert_msg(h1 != NULL, "%s: %s", v->label, ml_last_error());
        ck_assert_msg(ml_equal(h0, h1), "%s: mode %d changed the output", v->label, mode);
        for (int i = 0; i < m->n_sites; i++)
            ck_assert_msg(h.calls[i] == 1, "%s: site blocks.%d.%s fired %d times", v->label, m->site_layer[i],
                          m->sites[i].name, h.calls[i]);
        ml_release(h1);
    }
    ml_release(h0), ml_release(tok);
    ml_model_free(m);
}
END_TEST

/* Replacing a recurrent state at position p: earlier outputs keep their bits and later ones
 * follow the recurrence continued from the replaced state. Checked by giving row 1 the state that
 * row 0 had at p, with both rows reading the same tokens from p on: in a one-layer model whose
 * mixer inputs are position-wise (no conv window reaching back before p), row 1 must then match
 * row 0 from p on. Based's kv_state is read position by position (a replaced S_t feeds y_t only):
 * there only the untouched positions are checked. */
typedef struct {
    const char *site;
    int layer, p, calls;
    const ml_model *m;
} patch_ud;

static ml_tensor *patch_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    patch_ud *pu = ud;
    int layer = pu->m->site_layer[site];
    const char *name = pu->m->sites[site].name;
    if (layer != pu->layer || strcmp(name, pu->site)) return NULL;
    pu->calls++;
    ml_tensor *r = ml_clone(act);
    int64_t L = act->shape[1], per = ml_numel(act) / (act->shape[0] * L);
    memcpy(ml_f32(r) + (1 * L + pu->p) * per, ml_f32(r) + (0 * L + pu->p) * per, sizeof(float) * (size_t)per);
    return r;
}

START_TEST(state_patching) {
    struct {
        variant v;
        int layers, layer;
        const char *site;
        bool continues;
    } cases[] = {{{"mamba", "mamba", 0, false, false, 0, 0}, 1, 0, "mixer.ssm_state", true},
                 {{"delta_net", "delta_net", 1, false, false, 0, 0}, 1, 0, "mixer.state", true},
                 {{"based", "based", -1, false, false, 0, 0}, 2, 1, "mixer.kv_state", false}};
    for (int a = 0; a < 3; a++) {
        ml_model *m = tiny(&cases[a].v, 8, cases[a].layers, 1, false, 3);
        perturb(m, 0.05, 8);
        int L = 7, p = 3;
        ml_tensor *tok = ml_test_tokens(2, L, 13, 2);
        for (int t = p; t < L; t++) ml_i32(tok)[L + t] = ml_i32(tok)[t];
        ml_tensor *h0 = ml_model_hidden(m, tok, NULL);
        patch_ud pu = {cases[a].site, cases[a].layer, p, 0, m};
        ml_run run = {.hook = patch_hook, .ud = &pu};
        ml_tensor *h1 = ml_model_hidden(m, tok, &run);
        ck_assert_msg(h1 != NULL, "%s: %s", cases[a].v.label, ml_last_error());
        ck_assert_int_eq(pu.calls, 1);
        int64_t D = 8;
        bool changed = false;
        for (int t = 0; t < L; t++)
            for (int d = 0; d < D; d++) {
                float base0 = ml_f32(h0)[t * D + d], new0 = ml_f32(h1)[t * D + d];
                float base1 = ml_f32(h0)[(L + t) * D + d], new1 = ml_f32(h1)[(L + t) * D + d];
                ck_assert_float_eq(new0, base0); /* the donor row is untouched */
                if (t < p) ck_assert_msg(new1 == base1, "%s t=%d d=%d: %.9g vs %.9g", cases[a].v.label, t, d, new1, base1);
                else changed |= new1 != base1;
                if (t >= p && cases[a].continues) ck_assert_float_eq_tol(new1, base0, 2e-5f);
            }
        ck_assert_msg(changed, "%s: the patch changed nothing", cases[a].v.label);
        ml_release(tok), ml_release(h0), ml_release(h1);
        ml_model_free(m);
    }
}
END_TEST

/* Based's explicit forms (taken when a feature map, the pattern or a state is replaced) compute
 * the same function as the fused op: a replacement that differs from the observed activation
 * by one ulp in one element must give the unpatched output within float rounding. */
typedef struct {
    const char *site;
    int calls;
    const ml_model *m;
} nudge_ud;

static ml_tensor *nudge_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    nudge_ud *nu = ud;
    int layer = nu->m->site_layer[site];
    const char *name = nu->m->sites[site].name;
    if (layer != 1 || strcmp(name, nu->site)) return NULL;
    nu->calls++;
    ml_tensor *r = ml_clone(act);
    float *x = ml_f32(r) + ml_numel(r) / 2;
    *x = nextafterf(*x, INFINITY);
    return r;
}

START_TEST(based_explicit_forms) {
    const char *sites[3] = {"mixer.feat_q", "mixer.pattern", "mixer.kv_state"};
    variant v = {"based", "based", -1, false, false, 0, 0};
    for (int heads = 1; heads <= 2; heads++) {
        ml_model *m = tiny(&v, 16, 2, heads, false, 4);
        perturb(m, 0.05, 5);
        ml_tensor *tok = ml_test_tokens(2, 7, 13, 9), *h0 = ml_model_hidden(m, tok, NULL);
        for (int k = 0; k < 3; k++) {
            nudge_ud nu = {sites[k], 0, m};
            ml_run run = {.hook = nudge_hook, .ud = &nu};
            ml_tensor *h1 = ml_model_hidden(m, tok, &run);
            ck_assert_msg(h1 != NULL, "%s: %s", sites[k], ml_last_error());
            ck_assert_int_eq(nu.calls, 1);
            ck_assert_msg(!ml_equal(h0, h1) || k == 2, "%s: the explicit form was not taken", sites[k]);
            ck_assert_msg(ml_allclose(h1, h0, 1e-4, 1e-5), "%s heads=%d: explicit form differs", sites[k], heads);
            ml_release(h1);
        }
        ml_release(tok), ml_release(h0);
        ml_model_free(m);
    }
}
END_TEST

/* ---------------------------------------------------------------- (f) learning */

/* A tiny associative recall: k1 v1 k2 v2 k3 v3 q, answer = the value paired with q. Keys 1..6,
 * values 7..12 (V = 13). */
static void ar_batch(int B, uint64_t seed, ml_tensor **tok, ml_tensor **tg) {
    int L = 7;
    ml_rng r;
    ml_rng_init(&r, seed, 0);
    *tok = ml_empty(ML_I32, 2, (int64_t[]){B, L});
    *tg = ml_full(ML_I32, 2, (int64_t[]){B, L}, -100);
    for (int b = 0; b < B; b++) {
        int32_t keys[6] = {1, 2, 3, 4, 5, 6};
        ml_rng_shuffle_i32(&r, keys, 6);
        int32_t *x = ml_i32(*tok) + b * L;
        for (int j = 0; j < 3; j++) x[2 * j] = keys[j], x[2 * j + 1] = 7 + (int32_t)ml_rng_below(&r, 6);
        int q = (int)ml_rng_below(&r, 3);
        x[6] = x[2 * q];
        ml_i32(*tg)[b * L + 6] = x[2 * q + 1];
    }
}

START_TEST(learns_associative_recall) {
    const char *arch = ml_mixer_at(_i)->name;
    if (other_mixer(arch)) return;
    variant v = {arch, arch, -1, false, false, 0, 0};
    ml_model *m = tiny(&v, 16, 2, 1, true, 1);
    ml_adamw opt;
    ck_assert_int_eq(ml_adamw_init(&opt, m->n_total, 0.9, 0.999, 1e-8, 0), ML_OK);
    ml_tensor *tok, *tg;
    ar_batch(32, 17, &tok, &tg);
    ml_batch_stats first, st;
    ck_assert_int_eq(ml_eval_batch(m, tok, tg, &first), ML_OK);
    for (int i = 0; i < 150; i++) ck_assert_int_eq(ml_train_step(m, &opt, tok, tg, 1e-2, ML_NONFINITE_STOP, &st), ML_OK);
    ck_assert_int_eq(ml_eval_batch(m, tok, tg, &st), ML_OK);
    ck_assert_msg(st.loss < 0.3 * first.loss, "%s: loss %g -> %g", arch, first.loss, st.loss);
    ml_adamw_free(&opt);
    ml_release(tok), ml_release(tg);
    ml_model_free(m);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("mixers");
    TCase *tc = tcase_create("mixers");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, registry_descriptors);
    tcase_add_test(tc, registry_flops);
    tcase_add_loop_test(tc, param_counts, 0, N_VARIANTS);
    tcase_add_test(tc, param_counts_atr);
    tcase_add_test(tc, param_names);
    tcase_add_test(tc, special_inits);
    tcase_add_test(tc, config_errors);
    tcase_add_test(tc, fast_activations);
    tcase_add_loop_test(tc, grad_whole_model, 0, N_VARIANTS);
    tcase_add_loop_test(tc, recurrent_equals_parallel, 0, N_VARIANTS);
    tcase_add_loop_test(tc, hooks_invariants, 0, N_VARIANTS);
    tcase_add_test(tc, state_patching);
    tcase_add_test(tc, based_explicit_forms);
    tcase_add_loop_test(tc, learns_associative_recall, 0, ml_mixer_count());
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return ml_test_run(suite()); }
