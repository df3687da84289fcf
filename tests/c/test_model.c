/* The language-model backbone: fused ops' gradients, parameter counts of the spec, hooks'
 * invariants, training steps, checkpoints and exact resumption. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "nn/nn.h"
#include "nn/train.h"
#include "ops/nn_ops.h"
#include "ops/ops.h"
#include "testutil.h"

static ml_tensor *randn(int ndim, const int64_t *shape, uint64_t seed, bool grad) {
    ml_rng r;
    ml_rng_init(&r, seed, 0);
    ml_tensor *t = ml_normal(ndim, shape, 0, 1, &r);
    if (grad) ml_set_requires_grad(t, true);
    return t;
}

/* ---------------------------------------------------------------- fused ops */

static ml_tensor *f_layer_norm(void *ud, ml_tensor **in) { return ml_layer_norm(in[0], in[1], in[2], 1e-5); }
static ml_tensor *f_rms_norm(void *ud, ml_tensor **in) { return ml_rms_norm(in[0], in[1], 1e-5); }
static ml_tensor *f_attention(void *ud, ml_tensor **in) { return ml_causal_attention(in[0], *(int *)ud, NULL); }
static ml_tensor *f_xent(void *ud, ml_tensor **in) { return ml_cross_entropy(in[0], in[1]); }

START_TEST(grad_layer_norm) {
    ml_tensor *in[3] = {randn(3, (int64_t[]){2, 3, 5}, 1, true), randn(1, (int64_t[]){5}, 2, true),
                        randn(1, (int64_t[]){5}, 3, true)};
    ck_assert_msg(ml_gradcheck(f_layer_norm, NULL, 3, in, 1e-2, 2e-3, 2e-2) == ML_OK, "%s", ml_last_error());
    for (int i = 0; i < 3; i++) ml_release(in[i]);
}
END_TEST

/* both outputs reach the result, so the check covers the sum's gradient and norm's through it */
static ml_tensor *f_add_layer_norm(void *ud, ml_tensor **in) {
    ml_tensor *sum = NULL, *y = ml_add_layer_norm(in[0], in[1], in[2], in[3], 1e-5, &sum);
    ml_tensor *half = sum ? ml_binary_scalar(ML_MUL, sum, 0.5) : NULL;
    ml_tensor *out = half ? ml_add(y, half) : NULL;
    ml_release(y), ml_release(sum), ml_release(half);
    return out;
}

START_TEST(grad_add_layer_norm) {
    ml_tensor *in[4] = {randn(3, (int64_t[]){2, 3, 5}, 11, true), randn(3, (int64_t[]){2, 3, 5}, 12, true),
                        randn(1, (int64_t[]){5}, 13, true), randn(1, (int64_t[]){5}, 14, true)};
    ck_assert_msg(ml_gradcheck(f_add_layer_norm, NULL, 4, in, 1e-2, 2e-3, 2e-2) == ML_OK, "%s", ml_last_error());
    for (int i = 0; i < 4; i++) ml_release(in[i]);
}
END_TEST

/* The fused add and norm give ml_add then ml_layer_norm's bits: outputs and every gradient, at widths
 * around the statistics' blocks of four and odd row counts (rows run in pairs); b broadcast takes
 * the unfused path. */
START_TEST(add_layer_norm_bits) {
    for (int64_t D = 1; D <= 19; D += 3)
        for (int64_t rows = 1; rows <= 5; rows += 2)
            for (int bc = 0; bc < 2; bc++) {
                ml_tensor *a[2], *b[2], *w[2], *bias[2], *y[2], *sum[2];
                for (int k = 0; k < 2; k++) {
                    a[k] = randn(2, (int64_t[]){rows, D}, 20 + (uint64_t)D, true);
                    b[k] = randn(bc ? 1 : 2, bc ? &D : (int64_t[]){rows, D}, 40 + (uint64_t)rows, true);
                    w[k] = randn(1, &D, 60, true), bias[k] = randn(1, &D, 61, true);
                    if (k == 0) {
                        sum[0] = ml_add(a[0], b[0]);
                        y[0] = ml_layer_norm(sum[0], w[0], bias[0], 1e-5);
                    } else {
                        y[1] = ml_add_layer_norm(a[1], b[1], w[1], bias[1], 1e-5, &sum[1]);
                    }
                    ck_assert_ptr_nonnull(y[k]);
                    ml_tensor *g = randn(2, (int64_t[]){rows, D}, 80, false), *g2 = randn(2, (int64_t[]){rows, D}, 81, false);
                    ml_tensor *p = ml_mul(y[k], g), *q = ml_mul(sum[k], g2), *t = ml_add(p, q), *l = ml_sum_all(t);
                    ck_assert_int_eq(ml_backward(l, NULL), ML_OK);
                    ml_release(g), ml_release(g2), ml_release(p), ml_release(q), ml_release(t), ml_release(l);
                }
                ml_tensor *cmp[2][6] = {{y[0], sum[0], a[0]->grad, b[0]->grad, w[0]->grad, bias[0]->grad},
                                        {y[1], sum[1], a[1]->grad, b[1]->grad, w[1]->grad, bias[1]->grad}};
                for (int j = 0; j < 6; j++) {
                    ck_assert_ptr_nonnull(cmp[0][j]);
                    ck_assert_ptr_nonnull(cmp[1][j]);
                    ck_assert_msg(!memcmp(ml_f32(cmp[0][j]), ml_f32(cmp[1][j]), sizeof(float) * (size_t)ml_numel(cmp[0][j])),
                                  "D %lld rows %lld broadcast %d: output %d differs", (long long)D, (long long)rows, bc, j);
                }
                for (int k = 0; k < 2; k++)
                    ml_release(a[k]), ml_release(b[k]), ml_release(w[k]), ml_release(bias[k]), ml_release(y[k]),
                        ml_release(sum[k]);
            }
}
END_TEST

static ml_tensor *f_bias_gelu(void *ud, ml_tensor **in) { return ml_bias_gelu(in[0], in[1]); }

START_TEST(grad_bias_gelu) {
    ml_tensor *in[2] = {randn(3, (int64_t[]){2, 3, 7}, 15, true), randn(1, (int64_t[]){7}, 16, true)};
    ck_assert_msg(ml_gradcheck(f_bias_gelu, NULL, 2, in, 1e-2, 2e-3, 2e-2) == ML_OK, "%s", ml_last_error());
    ml_release(in[0]), ml_release(in[1]);
}
END_TEST

/* The MLP's fused first layer, a bias-free product then ml_bias_gelu, gives the bits of
 * ml_linear with its bias then GELU (inner widths up to the MLP's fused limit, 64): the output
 * and the gradients of x, W and the bias. */
START_TEST(bias_gelu_bits) {
    for (int64_t in = 1; in <= 64; in += 21)
        for (int64_t out = 1; out <= 70; out += 23) {
            ml_tensor *x[2], *w[2], *b[2], *y[2];
            for (int k = 0; k < 2; k++) {
                x[k] = randn(3, (int64_t[]){3, 5, in}, 90 + (uint64_t)in, true);
                w[k] = randn(2, (int64_t[]){out, in}, 91 + (uint64_t)out, true);
                b[k] = randn(1, &out, 92, true);
                if (k == 0) {
                    ml_tensor *pre = ml_linear(x[0], w[0], b[0]);
                    y[0] = ml_unary(ML_GELU, pre);
                    ml_release(pre);
                } else {
                    ml_tensor *h = ml_linear(x[1], w[1], NULL);
                    y[1] = ml_bias_gelu(h, b[1]);
                    ml_release(h);
                }
                ck_assert_ptr_nonnull(y[k]);
                ml_tensor *g = randn(3, (int64_t[]){3, 5, out}, 93, false), *p = ml_mul(y[k], g), *l = ml_sum_all(p);
                ck_assert_int_eq(ml_backward(l, NULL), ML_OK);
                ml_release(g), ml_release(p), ml_release(l);
            }
            ml_tensor *cmp[2][4] = {{y[0], x[0]->grad, w[0]->grad, b[0]->grad}, {y[1], x[1]->grad, w[1]->grad, b[1]->grad}};
            for (int j = 0; j < 4; j++) {
                ck_assert_ptr_nonnull(cmp[0][j]);
                ck_assert_ptr_nonnull(cmp[1][j]);
                ck_assert_msg(!memcmp(ml_f32(cmp[0][j]), ml_f32(cmp[1][j]), sizeof(float) * (size_t)ml_numel(cmp[0][j])),
                              "in %lld out %lld: output %d differs", (long long)in, (long long)out, j);
            }
            for (int k = 0; k < 2; k++) ml_release(x[k]), ml_release(w[k]), ml_release(b[k]), ml_release(y[k]);
        }
}
END_TEST

START_TEST(grad_rms_norm) {
    ml_tensor *in[2] = {randn(2, (int64_t[]){4, 6}, 4, true), randn(1, (int64_t[]){6}, 5, true)};
    ck_assert_msg(ml_gradcheck(f_rms_norm, NULL, 2, in, 1e-2, 2e-3, 2e-2) == ML_OK, "%s", ml_last_error());
    ml_release(in[0]), ml_release(in[1]);
}
END_TEST

START_TEST(grad_attention) {
    for (int heads = 1; heads <= 2; heads++) {
        ml_tensor *in[1] = {randn(3, (int64_t[]){2, 5, 12}, 6 + heads, true)};
        ck_assert_msg(ml_gradcheck(f_attention, &heads, 1, in, 1e-2, 2e-3, 2e-2) == ML_OK, "heads %d: %s", heads,
                      ml_last_error());
        ml_release(in[0]);
    }
}
END_TEST

START_TEST(grad_cross_entropy) {
    ml_tensor *logits = randn(2, (int64_t[]){4, 7}, 9, true);
    ml_tensor *tg = ml_from_i32(1, (int64_t[]){4}, (int32_t[]){3, -100, 0, 6});
    ml_tensor *in[2] = {logits, tg};
    ck_assert_msg(ml_gradcheck(f_xent, NULL, 2, in, 1e-2, 1e-3, 2e-2) == ML_OK, "%s", ml_last_error());
    ml_tensor *bad = ml_from_i32(1, (int64_t[]){4}, (int32_t[]){3, 7, 0, 6});
    ck_assert_ptr_null(ml_cross_entropy(logits, bad));
    ck_assert_msg(strstr(ml_last_error(), "cross_entropy: target 7"), "%s", ml_last_error());
    ml_release(logits), ml_release(tg), ml_release(bad);
}
END_TEST

/* The staged attention against a direct transcription of docs/mixers.md, "Attention". */
START_TEST(attention_matches_reference) {
    int64_t B = 2, L = 5, H = 2, D = 6, dh = D / H;
    ml_tensor *qkv = randn(3, (int64_t[]){B, L, 3 * D}, 21, false);
    ml_tensor *out = ml_causal_attention(qkv, (int)H, NULL);
    const float *x = ml_f32(qkv);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t t = 0; t < L; t++) {
                double S[8], mx = -1e30, sum = 0;
                for (int64_t s2 = 0; s2 < L; s2++) {
                    double acc = 0;
                    for (int64_t e = 0; e < dh; e++)
                        acc += (double)x[(b * L + t) * 3 * D + h * dh + e] * x[(b * L + s2) * 3 * D + D + h * dh + e];
                    S[s2] = acc / sqrt((double)dh) + (s2 > t ? -10000.0 : 0.0);
                    mx = S[s2] > mx ? S[s2] : mx;
                }
                for (int64_t s2 = 0; s2 < L; s2++) sum += exp(S[s2] - mx);
                for (int64_t e = 0; e < dh; e++) {
                    double c = 0;
                    for (int64_t s2 = 0; s2 < L; s2++)
                        c += exp(S[s2] - mx) / sum * x[(b * L + s2) * 3 * D + 2 * D + h * dh + e];
                    ck_assert_close(ml_f32(out)[(b * L + t) * D + h * dh + e], c, 1e-5, 1e-4);
                }
            }
    ml_release(qkv), ml_release(out);
}
END_TEST

START_TEST(attention_masks_future) {
    /* Changing the last position must not change earlier outputs. */
    ml_tensor *a = randn(3, (int64_t[]){1, 6, 9}, 11, false);
    ml_tensor *b = ml_clone(a);
    for (int c = 0; c < 9; c++) ml_f32(b)[5 * 9 + c] += 3.0f;
    ml_tensor *ya = ml_causal_attention(a, 1, NULL), *yb = ml_causal_attention(b, 1, NULL);
    for (int i = 0; i < 5 * 3; i++) ck_assert_float_eq(ml_f32(ya)[i], ml_f32(yb)[i]);
    ml_release(a), ml_release(b), ml_release(ya), ml_release(yb);
}
END_TEST

/* ---------------------------------------------------------------- the model */

static ml_model *tiny(const char *arch, int layers, bool pe) {
    ml_model_config c;
    ml_model_config_defaults(&c, arch);
    c.d_model = 8, c.n_layers = layers, c.vocab = 13, c.max_pos = 16, c.pos_emb = pe;
    ml_mixer_opt_set(&c, "n_heads", 2);
    ml_model *m = ml_model_new(&c);
    ck_assert_msg(m != NULL, "%s", ml_last_error());
    return m;
}

START_TEST(param_counts_attention) {
    /* docs/mixers.md, "Parameter counts": D = 64, 2 layers */
    struct {
        int vocab;
        bool pe;
        int64_t want;
    } cases[] = {{8196, true, 689792}, {8196, false, 624256}, {8195, true, 689728}, {8195, false, 624192}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ml_model_config c;
        ml_model_config_defaults(&c, "attention");
        c.vocab = cases[i].vocab, c.pos_emb = cases[i].pe;
        ml_model *m = ml_model_new(&c);
        ck_assert_int_eq(ml_model_count(m), cases[i].want);
        ml_model_free(m);
    }
    /* ATR check value (the original runs): 2-layer attention, D = 256, PE, V = 26 */
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    c.vocab = 26, c.d_model = 256;
    ml_model *m = ml_model_new(&c);
    ck_assert_int_eq(ml_model_count(m), 1847296);
    ck_assert_int_ge(ml_model_find_param(m, "backbone.layers.1.sequence_mixer.Wqkv.weight"), 0);
    ck_assert_int_ge(ml_model_find_param(m, "backbone.layers.0.state_mixer.fc2.bias"), 0);
    ck_assert_int_ge(ml_model_find_param(m, "backbone.embeddings.position_embeddings.weight"), 0);
    ml_model_free(m);
}
END_TEST

START_TEST(init_statistics) {
    /* Transformer regime: Linear weights N(0, 0.02), out_proj/fc2 N(0, 0.02/sqrt(2 n_layers)). */
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    ml_model *m = ml_model_new(&c);
    const char *names[] = {"backbone.layers.0.sequence_mixer.Wqkv.weight", "backbone.layers.1.sequence_mixer.out_proj.weight",
                           "backbone.layers.0.state_mixer.fc2.weight", "backbone.embeddings.word_embeddings.weight"};
    double want[] = {0.02, 0.01, 0.01, 0.02};
    for (int k = 0; k < 4; k++) {
        ml_param *p = &m->params[ml_model_find_param(m, names[k])];
        double s = 0, ss = 0;
        for (int64_t i = 0; i < p->numel; i++) {
            double x = ml_f32(p->t)[i];
            s += x, ss += x * x;
        }
        double mean = s / p->numel, sd = sqrt(ss / p->numel - mean * mean);
        ck_assert_msg(fabs(sd - want[k]) < 0.05 * want[k], "%s: std %g, expected %g", names[k], sd, want[k]);
        ck_assert_msg(fabs(mean) < 0.1 * want[k], "%s: mean %g", names[k], mean);
    }
    ml_param *b = &m->params[ml_model_find_param(m, "backbone.layers.0.sequence_mixer.out_proj.bias")];
    for (int64_t i = 0; i < b->numel; i++) ck_assert_float_eq(ml_f32(b->t)[i], 0.0f);
    ml_model_free(m);
}
END_TEST

static ml_tensor *toy_targets(ml_tensor *tokens, int vocab) {
    /* supervise the last position of each row with a token that depends on the first */
    int64_t B = tokens->shape[0], L = tokens->shape[1];
    ml_tensor *t = ml_full(ML_I32, 2, tokens->shape, -100);
    for (int64_t b = 0; b < B; b++) ml_i32(t)[b * L + L - 2] = (ml_i32(tokens)[b * L] * 3 + 1) % vocab;
    return t;
}

START_TEST(grad_whole_model) {
    for (int pe = 0; pe <= 1; pe++) {
        ml_model *m = tiny("attention", 2, pe);
        ml_test_loss u = {m, ml_test_tokens(2, 5, 13, 3), NULL};
        u.targets = toy_targets(u.tokens, 13);
        ml_tensor **in = malloc(sizeof *in * (size_t)m->n_params);
        for (int i = 0; i < m->n_params; i++) {
            in[i] = m->params[i].t;
            ml_zero_grad(in[i]); /* gradcheck accumulates from zero */
        }
        ck_assert_msg(ml_gradcheck(ml_test_loss_fn, &u, m->n_params, in, 1e-3, 2e-3, 3e-2) == ML_OK, "pe=%d: %s", pe,
                      ml_last_error());
        free(in);
        ml_release(u.tokens), ml_release(u.targets);
        ml_model_free(m);
    }
}
END_TEST

/* Sites are ids: the one formatter and the parser are inverse, and each block's entry ids name
 * its paper sites (mlp_input/_output absent without a state mixer). */
START_TEST(site_ids) {
    ml_model *m = tiny("attention", 2, true);
    char full[96];
    for (int i = 0; i < m->n_sites; i++) {
        ml_site_fullname(m, i, full, sizeof full);
        ck_assert_int_eq(ml_site_parse(m, full), i);
        ck_assert_int_eq(ml_site_lookup(m, m->site_layer[i], m->sites[i].name), i);
    }
    ck_assert_int_eq(ml_site_parse(m, "blocks.2.block_input"), -1);
    ck_assert_int_eq(ml_site_parse(m, "blocks.x.block_input"), -1);
    for (int l = 0; l < 2; l++)
        for (int e = 0; e < ML_ENTRY_COUNT; e++) {
            ml_site_fullname(m, m->layers[l].entry_site[e], full, sizeof full);
            char want[96];
            snprintf(want, sizeof want, "blocks.%d.%s", l, ml_entry_names[e]);
            ck_assert_str_eq(full, want);
        }
    ml_model_free(m);
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    c.vocab = 13, c.d_model = 8, c.n_layers = 1;
    snprintf(c.state_mixer, sizeof c.state_mixer, "none");
    m = ml_model_new(&c);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_eq(m->layers[0].entry_site[ML_ENTRY_MLP_INPUT], -1);
    ck_assert_int_eq(m->layers[0].mlp_site[0], -1);
    ml_model_free(m);
}
END_TEST

/* nn/sites: the one builder and parser of "blocks.{l}.{component}" and the TransformerLens
 * aliases: every alias resolves to the id of its mechlab component, and nothing else does. */
START_TEST(site_names_and_aliases) {
    ml_model *m = tiny("attention", 2, true);
    char buf[ML_SITE_NAME_MAX];
    ml_site_format(buf, sizeof buf, 1, "mixer.q");
    ck_assert_str_eq(buf, "blocks.1.mixer.q");
    int layer = -1;
    ck_assert_str_eq(ml_site_split("blocks.12.mlp.hidden_pre", &layer), "mlp.hidden_pre");
    ck_assert_int_eq(layer, 12);
    const char *bad[] = {"block.1.x", "blocks..x", "blocks.1x", "blocks.-1.x", "blocks.1", ""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) ck_assert_ptr_null(ml_site_split(bad[i], &layer));
    ck_assert_str_eq(ml_site_component("hook_resid_pre"), "block_input");
    ck_assert_str_eq(ml_site_component("resid_pre"), "block_input");
    ck_assert_str_eq(ml_site_component("attn.hook_z"), "mixer.head_z");
    ck_assert_str_eq(ml_site_component_at("attn.hook_z", 1), "mixer.ctx"); /* mixers without heads */
    ck_assert_ptr_null(ml_site_component_at("attn.hook_z", 2));
    ck_assert_str_eq(ml_site_component("pattern"), "mixer.pattern");
    ck_assert_str_eq(ml_site_component("mixer.q"), "mixer.q"); /* not an alias: unchanged */
    ck_assert_str_eq(ml_site_tl_name("mlp.hidden_post"), "mlp.hook_post");
    ck_assert_ptr_null(ml_site_tl_name("mixer.dt"));
    ck_assert_str_eq(ml_site_canonical("blocks.0.ln2.hook_normalized", buf, sizeof buf), "blocks.0.mlp_input");
    ck_assert_str_eq(ml_site_canonical("embed.W_E", buf, sizeof buf), "embed.W_E");
    /* literal name filters: a whole run of parts, "hook_" optional on the last, either spelling */
    const char *full = "blocks.1.block_output";
    const char *keep[] = {full, "blocks.1", "block_output", "resid_post", "hook_resid_post", "blocks.1.hook_resid_post"};
    const char *drop[] = {"", "blocks.10", "block_out", "hook_resid_pr", "locks.1", "blocks.0", "output"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) ck_assert_msg(ml_site_literal_match(full, keep[i]), "%s", keep[i]);
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) ck_assert_msg(!ml_site_literal_match(full, drop[i]), "%s", drop[i]);
    ck_assert(ml_site_tl_spelling(full, buf, sizeof buf) && !strcmp(buf, "blocks.1.hook_resid_post"));
    ck_assert(!ml_site_tl_spelling("blocks.1.mixer.dt", buf, sizeof buf));
    for (int i = 0; i < m->n_sites; i++) {
        const char *tl = ml_site_tl_name(m->sites[i].name);
        ml_site_fullname(m, i, buf, sizeof buf);
        ck_assert_int_eq(ml_site_resolve(m, buf), i);
        if (!tl) continue;
        bool listed = false; /* the site is one of the components its TransformerLens name stands for */
        for (int k = 0; ml_site_component_at(tl, k); k++) listed = listed || !strcmp(ml_site_component_at(tl, k), m->sites[i].name);
        ck_assert_msg(listed, "%s", m->sites[i].name);
        ml_site_format(buf, sizeof buf, m->site_layer[i], tl);
        ck_assert_int_eq(ml_site_resolve(m, buf), ml_site_find(m, m->site_layer[i], tl)); /* the first the layer has */
        ck_assert_int_eq(ml_site_parse(m, buf), -1); /* the parser itself takes mechlab's spelling only */
    }
    ck_assert_int_eq(ml_site_resolve(m, "blocks.2.hook_resid_pre"), -1);
    ck_assert_int_eq(ml_site_resolve(m, "blocks.0.hook_nothing"), -1);
    ck_assert_int_eq(ml_site_lookup(m, -1, "block_input"), -1);
    int layers[2] = {1, 0}, out[6], missing;
    const char *comps[3] = {"resid_pre", "mixer.nothing", "mixer.q"};
    ck_assert_int_eq(ml_site_grid(m, layers, 2, comps, 3, out, &missing), 4);
    ck_assert_int_eq(missing, 1);
    int want[4] = {ml_site_lookup(m, 1, "block_input"), ml_site_lookup(m, 1, "mixer.q"),
                   ml_site_lookup(m, 0, "block_input"), ml_site_lookup(m, 0, "mixer.q")};
    for (int i = 0; i < 4; i++) ck_assert_int_eq(out[i], want[i]);
    ck_assert_int_eq(ml_site_grid(m, layers, 1, comps + 2, 1, out, &missing), 1);
    ck_assert_int_eq(missing, -1);
    ml_model_free(m);
}
END_TEST

/* Hooks: observing changes nothing; returning an identical copy changes nothing; every site
 * fires exactly once per forward; a wrong-shape replacement is an error naming the site. */
typedef struct {
    int calls[256];
    int mode; /* 0 observe, 1 clone, 2 wrong shape */
    ml_model *m;
} hook_ud;

static ml_tensor *test_hook(void *ud, int site, ml_tensor *act, ml_status *err) {
    hook_ud *h = ud;
    int layer = h->m->site_layer[site];
    const char *name = h->m->sites[site].name;
    int i = ml_test_site_index(h->m, layer, name);
    ck_assert_msg(i >= 0, "undeclared site blocks.%d.%s fired", layer, name);
    h->calls[i]++;
    if (h->mode == 1) {
        ml_tensor *c = ml_clone(act);
        return c;
    }
    if (h->mode == 2) return ml_zeros(ML_F32, 1, (int64_t[]){3});
    return NULL;
}

START_TEST(hooks_invariants) {
    ml_model *m = tiny("attention", 2, true);
    ml_tensor *tok = ml_test_tokens(3, 6, 13, 5);
    ml_tensor *h0 = ml_model_hidden(m, tok, NULL);
    for (int mode = 0; mode <= 1; mode++) {
        hook_ud h = {.mode = mode, .m = m};
        ml_run run = {.hook = test_hook, .ud = &h};
        ml_tensor *h1 = ml_model_hidden(m, tok, &run);
        ck_assert_ptr_nonnull(h1);
        ck_assert_msg(ml_equal(h0, h1), "mode %d changed the output", mode);
        for (int i = 0; i < m->n_sites; i++)
            ck_assert_msg(h.calls[i] == 1, "site blocks.%d.%s fired %d times", m->site_layer[i], m->sites[i].name,
                          h.calls[i]);
        ml_release(h1);
    }
    hook_ud h = {.mode = 2, .m = m};
    ml_run run = {.hook = test_hook, .ud = &h};
    ck_assert_ptr_null(ml_model_hidden(m, tok, &run));
    ck_assert_msg(strstr(ml_last_error(), "hook at blocks.0.block_input returned"), "%s", ml_last_error());
    ml_release(h0), ml_release(tok);
    ml_model_free(m);
}
END_TEST

START_TEST(training_reduces_loss) {
    ml_model *m = tiny("attention", 2, true);
    ml_adamw opt;
    ck_assert_int_eq(ml_adamw_init(&opt, m->n_total, 0.9, 0.999, 1e-8, 0), ML_OK);
    ml_tensor *tok = ml_test_tokens(16, 6, 13, 7), *tg = toy_targets(tok, 13);
    ml_batch_stats first, st;
    ck_assert_int_eq(ml_eval_batch(m, tok, tg, &first), ML_OK);
    for (int i = 0; i < 150; i++) ck_assert_int_eq(ml_train_step(m, &opt, tok, tg, 1e-2, ML_NONFINITE_STOP, &st), ML_OK);
    ck_assert_int_eq(ml_eval_batch(m, tok, tg, &st), ML_OK);
    ck_assert_msg(st.loss < 0.2 * first.loss, "loss %g -> %g", first.loss, st.loss);
    ck_assert_int_eq(st.correct, 16);
    ml_adamw_free(&opt);
    ml_release(tok), ml_release(tg);
    ml_model_free(m);
}
END_TEST

START_TEST(checkpoint_exact_resume) {
    char path[] = "/tmp/mechlab_ckpt_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ml_tensor *tok = ml_test_tokens(8, 6, 13, 9), *tg = toy_targets(tok, 13);
    ml_batch_stats st;
    /* N = 10 steps straight */
    ml_model *a = tiny("attention", 2, true);
    ml_adamw oa;
    ml_adamw_init(&oa, a->n_total, 0.9, 0.999, 1e-8, 0);
    for (int i = 0; i < 10; i++) ml_train_step(a, &oa, tok, tg, 1e-3 * (i + 1), ML_NONFINITE_STOP, &st);
    /* k = 4, save, load, 6 more */
    ml_model *b = tiny("attention", 2, true);
    ml_adamw ob;
    ml_adamw_init(&ob, b->n_total, 0.9, 0.999, 1e-8, 0);
    for (int i = 0; i < 4; i++) ml_train_step(b, &ob, tok, tg, 1e-3 * (i + 1), ML_NONFINITE_STOP, &st);
    ck_assert_msg(ml_checkpoint_save(path, b, &ob, false, 1, (const char *[]){"train.step"}, (const char *[]){"4"}) == ML_OK,
                  "%s", ml_last_error());
    ml_model_free(b);
    ml_adamw_free(&ob);
    ml_adamw oc;
    bool has;
    ml_safetensors *meta;
    ml_model *c = ml_checkpoint_load(path, NULL, &oc, &has, &meta);
    ck_assert_msg(c != NULL, "%s", ml_last_error());
    ck_assert(has);
    ck_assert_str_eq(ml_safetensors_meta(meta, "train.step"), "4");
    ml_safetensors_close(meta);
    for (int i = 4; i < 10; i++) ml_train_step(c, &oc, tok, tg, 1e-3 * (i + 1), ML_NONFINITE_STOP, &st);
    ck_assert_msg(ml_equal(a->flat, c->flat), "resumed parameters differ");
    ck_assert(ml_equal(oa.m, oc.m) && ml_equal(oa.v, oc.v));
    ck_assert_int_eq(oa.step, oc.step);
    ml_model_free(a), ml_model_free(c);
    ml_adamw_free(&oa), ml_adamw_free(&oc);
    ml_release(tok), ml_release(tg);
    unlink(path);
}
END_TEST

START_TEST(checkpoint_refuses_bad_files) {
    char path[] = "/tmp/mechlab_ckpt_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    ml_model *m = tiny("attention", 1, false);
    ck_assert_int_eq(ml_checkpoint_save(path, m, NULL, false, 0, NULL, NULL), ML_OK);
    /* truncate: the loader must refuse it */
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    ck_assert_int_eq(truncate(path, n - 5), 0);
    ck_assert_ptr_null(ml_checkpoint_load(path, NULL, NULL, NULL, NULL));
    /* a safetensors file without a mechlab config */
    ml_tensor *t = ml_zeros(ML_F32, 1, (int64_t[]){3});
    ck_assert_int_eq(ml_safetensors_write(path, 1, (const char *[]){"x"}, &t, 0, NULL, NULL), ML_OK);
    ck_assert_ptr_null(ml_checkpoint_load(path, NULL, NULL, NULL, NULL));
    ck_assert_msg(strstr(ml_last_error(), "mechlab.config"), "%s", ml_last_error());
    ck_assert_ptr_null(ml_checkpoint_load("/nonexistent/dir/x.safetensors", NULL, NULL, NULL, NULL));
    ml_release(t);
    ml_model_free(m);
    unlink(path);
}
END_TEST

/* mechlab against an independent PyTorch transcription of the spec (tests/fixtures/
 * gen_attention_lm.py): the same weights, loaded by state-dict name, give the same logits, loss
 * and gradients. */
START_TEST(matches_pytorch_fixture) {
    ml_model *m = ml_checkpoint_load(ML_FIXTURES_DIR "/attention_lm.safetensors", NULL, NULL, NULL, NULL);
    ck_assert_msg(m != NULL, "%s", ml_last_error());
    ml_safetensors *meta = ml_safetensors_open(ML_FIXTURES_DIR "/attention_lm_expected.safetensors");
    ck_assert_msg(meta != NULL, "%s", ml_last_error());
    ml_tensor *tok = ml_safetensors_get(meta, "tokens"), *tg = ml_safetensors_get(meta, "targets");
    ml_tensor *want_logits = ml_safetensors_get(meta, "logits"), *want_loss = ml_safetensors_get(meta, "loss");
    ml_tensor *h = ml_model_hidden(m, tok, NULL), *logits = ml_model_head(m, h);
    ck_assert_int_eq(ml_numel(logits), ml_numel(want_logits));
    for (int64_t i = 0; i < ml_numel(logits); i++) ck_assert_close(ml_f32(logits)[i], ml_f32(want_logits)[i], 1e-4, 1e-4);
    ml_model_zero_grad(m);
    ml_tensor *loss = ml_model_loss(m, tok, tg, NULL, NULL, NULL);
    ck_assert_close(ml_f32(loss)[0], ml_f32(want_loss)[0], 1e-5, 1e-5);
    ck_assert_int_eq(ml_backward(loss, NULL), ML_OK);
    for (int i = 0; i < m->n_params; i++) {
        char name[160];
        snprintf(name, sizeof name, "grad.%s", m->params[i].name);
        ml_tensor *want = ml_safetensors_get(meta, name);
        ck_assert_msg(want != NULL, "%s", ml_last_error());
        for (int64_t k = 0; k < m->params[i].numel; k++)
            ck_assert_msg(fabs(ml_f32(m->params[i].t->grad)[k] - ml_f32(want)[k]) <= 1e-5 + 1e-3 * fabs(ml_f32(want)[k]),
                          "%s[%lld]: %g vs PyTorch %g", m->params[i].name, (long long)k,
                          ml_f32(m->params[i].t->grad)[k], ml_f32(want)[k]);
        ml_release(want);
    }
    ml_release(tok), ml_release(tg), ml_release(want_logits), ml_release(want_loss);
    ml_release(h), ml_release(logits), ml_release(loss);
    ml_safetensors_close(meta);
    ml_model_free(m);
}
END_TEST

/* The options table: the common options, then each mixer's own once, in a slot of its own, with
 * the mixer's default; ml_mixer_opt reads what ml_option_set wrote. */
START_TEST(options_table) {
    ml_model_config c;
    ml_model_config_defaults(&c, "mamba");
    bool slot_used[ML_MIXER_OPTION_SLOTS] = {false};
    bool mixers_begun = false;
    for (int i = 0; i < ml_model_option_count(); i++) {
        const ml_model_option *o = ml_model_option_at(i);
        ck_assert_ptr_eq(ml_model_option_find(o->name), o); /* names are unique */
        ck_assert_msg(!(mixers_begun && !o->mixer), "%s: a common option after the mixers'", o->name);
        mixers_begun = mixers_begun || o->mixer;
        if (!o->mixer) continue;
        ck_assert_msg(!o->common && o->slot >= 0 && o->slot < ML_MIXER_OPTION_SLOTS && !slot_used[o->slot], "%s", o->name);
        slot_used[o->slot] = true;
        ck_assert_int_eq(ml_mixer_opt(&c, o->name), o->def);
        ml_option_set(&c, o, o->type == ML_OPT_BOOL ? 1 : o->hi);
        ck_assert_int_eq(ml_mixer_opt(&c, o->name), o->type == ML_OPT_BOOL ? 1 : o->hi);
    }
    ck_assert(mixers_begun);
    ml_mixer_opt_set(&c, "d_state", 7);
    ck_assert_int_eq(ml_option_get(&c, ml_model_option_find("d_state")), 7);
    ck_assert(ml_mixer_reads(ml_mixer_find("based"), ml_model_option_find("long_only"))); /* its BaseConv layers' */
    ck_assert(!ml_mixer_reads(ml_mixer_find("hyena"), ml_model_option_find("n_heads")));
}
END_TEST

START_TEST(config_validation) {
    ml_model_config c;
    ml_model_config_defaults(&c, "transformer");
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_msg(strstr(ml_last_error(), "option 'arch'"), "%s", ml_last_error());
    ml_model_config_defaults(&c, "attention");
    ml_mixer_opt_set(&c, "n_heads", 3);
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_msg(strstr(ml_last_error(), "n_heads"), "%s", ml_last_error());
    ml_model_config_defaults(&c, "attention");
    c.d_model = 0;
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_msg(strstr(ml_last_error(), "d_model"), "%s", ml_last_error());
}
END_TEST

/* ---------------------------------------------------------------- runtime-registered mixers */

/* A mixer registered at run time: y = x ⊙ w, one parameter, one site, no recurrent form. */
typedef struct {
    int w, site;
} scale_state;
static ml_status scale_build(ml_model *m, int l, void **state) {
    scale_state *s = calloc(1, sizeof *s);
    *state = s;
    const int *tag = ml_mixer_for_layer(&m->cfg, l)->user; /* the descriptor's context */
    ck_assert_int_eq(*tag, 7);
    int64_t D = m->cfg.d_model;
    s->w = ml_model_add_param(m, l, "w", 1, &D, ML_P_ONES, 0);
    s->site = ml_model_add_site(m, l, "mixer.scaled", 3, (int64_t[]){-1, -2, D});
    return ML_OK;
}
static ml_tensor *scale_forward(ml_model *m, int l, void *state, ml_tensor *x, ml_run *run) {
    scale_state *s = state;
    ml_tensor *y = ml_mul(x, ml_model_p(m, s->w));
    return y && ml_at_site(m, run, s->site, &y) ? y : NULL;
}
static const int scale_tag = 7;
static const ml_mixer_type scale_mixer = {
    .name = "test_scale", .build = scale_build, .forward = scale_forward, .free_state = free, .user = &scale_tag};

START_TEST(runtime_mixer) {
    ml_model_config c;
    ml_model_config_defaults(&c, "test_scale");
    c.d_model = 8, c.vocab = 16;
    ck_assert_ptr_null(ml_model_new(&c)); /* not registered yet */
    ck_assert_msg(strstr(ml_last_error(), "or a registered mixer, got 'test_scale'"), "%s", ml_last_error());
    snprintf(c.mixer_module, sizeof c.mixer_module, "my.module");
    ck_assert_ptr_null(ml_model_new(&c));
    ck_assert_msg(strstr(ml_last_error(), "mixer 'test_scale' is not registered (load its module 'my.module' first)"),
                  "%s", ml_last_error());
    ck_assert_int_eq(ml_mixer_register(&scale_mixer), ML_OK);
    ck_assert_int_ne(ml_mixer_register(&scale_mixer), ML_OK); /* names are unique */
    ml_mixer_type clash = scale_mixer;
    clash.name = "mamba";
    ck_assert_int_ne(ml_mixer_register(&clash), ML_OK);
    clash.name = "based_long_only"; /* an alias */
    ck_assert_int_ne(ml_mixer_register(&clash), ML_OK);
    clash.name = "bad name";
    ck_assert_int_ne(ml_mixer_register(&clash), ML_OK);
    clash.name = "with_options"; /* a runtime mixer's options are JSON, not table rows */
    clash.options[0] = (ml_model_option)ML_OPTION_INT("k", 1, 1, 4, "k");
    ck_assert_int_ne(ml_mixer_register(&clash), ML_OK);
    ck_assert_msg(strstr(ml_last_error(), "declares options"), "%s", ml_last_error());
    ck_assert_int_eq(ml_mixer_registered_count(), 1);
    ck_assert_ptr_eq(ml_mixer_find("test_scale"), &scale_mixer);
    snprintf(c.mixer_options, sizeof c.mixer_options, "{\"k\":1}");
    ml_model *m = ml_model_new(&c);
    ck_assert_ptr_nonnull(m);
    ck_assert_int_ge(ml_model_find_param(m, "backbone.layers.1.sequence_mixer.w"), 0);
    ck_assert_int_ge(ml_site_lookup(m, 1, "mixer.scaled"), 0);
    /* the config, module and options included, round-trips through the checkpoint's JSON */
    char *json = ml_config_to_json(&m->cfg);
    ml_model_config back;
    ck_assert_int_eq(ml_config_from_json(json, &back), ML_OK);
    ck_assert_str_eq(back.arch, "test_scale");
    ck_assert_str_eq(back.mixer_module, "my.module");
    ck_assert_str_eq(back.mixer_options, "{\"k\":1}");
    free(json);
    ml_tensor *tok = ml_zeros(ML_I32, 2, (int64_t[]){2, 5});
    ml_tensor *h = ml_model_hidden(m, tok, NULL);
    ck_assert_ptr_nonnull(h);
    ck_assert_ptr_null(ml_model_hidden_recurrent(m, tok)); /* no recurrent form: an error naming it */
    ck_assert_msg(strstr(ml_last_error(), "mixer 'test_scale' has no recurrent form"), "%s", ml_last_error());
    ml_release(h), ml_release(tok);
    ml_model_free(m);
    ck_assert(ml_mixer_unregister(&scale_mixer));
    ck_assert(!ml_mixer_unregister(&scale_mixer));
    ck_assert_ptr_null(ml_mixer_find("test_scale"));
}
END_TEST

/* tie_embeddings = false: lm_head.weight is a parameter of its own (nn.Linear(D, V), no bias). */
START_TEST(untied_head) {
    ml_model_config c;
    ml_model_config_defaults(&c, "attention");
    c.d_model = 8, c.vocab = 16;
    ml_model *tied = ml_model_new(&c);
    c.tie_embeddings = false;
    ml_model *un = ml_model_new(&c);
    ck_assert_int_eq(ml_model_count(un), ml_model_count(tied) + 16 * 8);
    ck_assert_int_eq(un->p_head, un->n_params - 1);
    ck_assert_str_eq(un->params[un->p_head].name, "lm_head.weight");
    ck_assert_int_eq(tied->p_head, -1);
    char *json = ml_config_to_json(&un->cfg), *tj = ml_config_to_json(&tied->cfg);
    ck_assert(strstr(json, "\"tie_embeddings\":false"));
    ck_assert(!strstr(tj, "tie_embeddings")); /* the default is not written: older files keep their bytes */
    free(json), free(tj);
    ml_model_free(tied), ml_model_free(un);
}
END_TEST

static Suite *suite(void) {
    Suite *s = suite_create("model");
    TCase *ops = tcase_create("fused_ops");
    tcase_add_test(ops, grad_layer_norm);
    tcase_add_test(ops, grad_rms_norm);
    tcase_add_test(ops, grad_add_layer_norm);
    tcase_add_test(ops, add_layer_norm_bits);
    tcase_add_test(ops, grad_bias_gelu);
    tcase_add_test(ops, bias_gelu_bits);
    tcase_add_test(ops, grad_attention);
    tcase_add_test(ops, grad_cross_entropy);
    tcase_add_test(ops, attention_masks_future);
    tcase_add_test(ops, attention_matches_reference);
    suite_add_tcase(s, ops);
    TCase *mdl = tcase_create("model");
    tcase_set_timeout(mdl, 120);
    tcase_add_test(mdl, param_counts_attention);
    tcase_add_test(mdl, init_statistics);
    tcase_add_test(mdl, grad_whole_model);
    tcase_add_test(mdl, site_ids);
    tcase_add_test(mdl, site_names_and_aliases);
    tcase_add_test(mdl, hooks_invariants);
    tcase_add_test(mdl, training_reduces_loss);
    tcase_add_test(mdl, checkpoint_exact_resume);
    tcase_add_test(mdl, checkpoint_refuses_bad_files);
    tcase_add_test(mdl, options_table);
    tcase_add_test(mdl, config_validation);
    tcase_add_test(mdl, matches_pytorch_fixture);
    tcase_add_test(mdl, runtime_mixer);
    tcase_add_test(mdl, untied_head);
    suite_add_tcase(s, mdl);
    return s;
}

int main(void) { return ml_test_run(suite()); }
